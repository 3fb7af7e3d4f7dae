//! Logging set-up: what reaches stderr at `-q`, `-v`, `-vv` and under `RUST_LOG`, and what never
//! does.
//!
//! Two guards keep credentials out of the log whatever the verbosity (issue 35: at `-vv` with
//! `RUST_LOG=trace`, the AWS SDK's `resolved identity` events printed the access key id):
//!
//! - Events and spans of the cloud SDKs and HTTP stacks ([`CAPPED_TARGETS`]) are dropped below
//!   `WARN`, by a filter on the output layer that `RUST_LOG` cannot widen. Their debug and trace
//!   events describe identities, signing and headers; their warnings and errors do not.
//! - Every line written is searched for the values of the credential variables gpucap and the
//!   SDKs read ([`CREDENTIAL_VARS`]), which are replaced by the variable's name. This catches a
//!   value that reaches a message by another way (an error quoting a request, a user's policy).

use std::io::{IsTerminal, Write};

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, filter};

use crate::commands::common::{ColorChoice, GlobalArgs};

/// Log targets (crate names, as prefixes) whose events can carry credentials, tokens or signed
/// requests: the cloud SDKs and the HTTP clients under them. Only their warnings and errors
/// are written.
pub const CAPPED_TARGETS: &[&str] = &[
    "aws_",
    "google_cloud_",
    "gcp_auth",
    "azure_",
    "hyper",
    "h2",
    "http",
    "reqwest",
    "rustls",
    "tower",
];

/// Environment variables holding credentials, read by gpucap or by the SDKs it calls: their
/// values are redacted from every log line.
pub const CREDENTIAL_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AZURE_ACCESS_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_ID",
    "GPUCAP_GCP_API_KEY",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "CLOUDSDK_AUTH_ACCESS_TOKEN",
];

/// Shortest value redacted: real credentials are far longer, and redacting a two-letter value
/// would garble every line that happens to contain it.
const MIN_SECRET_LEN: usize = 8;

/// Whether an event or span of `target` at `level` may be written.
pub fn allowed(target: &str, level: &Level) -> bool {
    *level <= Level::WARN || !CAPPED_TARGETS.iter().any(|p| target.starts_with(p))
}

/// The credential values set in the environment, with their variables' names, longest first
/// (so a value containing another is replaced whole).
pub fn secrets_from_env() -> Vec<(String, &'static str)> {
    let mut found: Vec<(String, &'static str)> = CREDENTIAL_VARS
        .iter()
        .filter_map(|&name| Some((std::env::var(name).ok()?.trim().to_string(), name)))
        .filter(|(value, _)| value.len() >= MIN_SECRET_LEN)
        .collect();
    found.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
    found
}

/// `line` with every secret's value replaced by `[redacted NAME]`.
pub fn redact(line: &str, secrets: &[(String, &'static str)]) -> String {
    let mut out = line.to_string();
    for (value, name) in secrets {
        if out.contains(value.as_str()) {
            out = out.replace(value.as_str(), &format!("[redacted {name}]"));
        }
    }
    out
}

/// Writes to stderr with credentials redacted. The formatter writes each event whole, so a
/// secret never straddles two writes.
#[derive(Clone)]
struct RedactingStderr {
    secrets: std::sync::Arc<Vec<(String, &'static str)>>,
}

impl Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        if self.secrets.is_empty() {
            err.write_all(buf)?;
        } else {
            let text = String::from_utf8_lossy(buf);
            err.write_all(redact(&text, &self.secrets).as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingStderr;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs the global subscriber: `warn` by default, `debug` at `-v`, `trace` at `-vv`,
/// `error` at `-q` (gpucap's own crates), or `RUST_LOG` when set; never below `WARN` for
/// [`CAPPED_TARGETS`], and with [`CREDENTIAL_VARS`] redacted.
pub fn init(global: &GlobalArgs) {
    let level = match (global.quiet, global.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let env_filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("gpucap={level},gpucap_provider={level}")));
    let ansi = match global.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    let writer = RedactingStderr {
        secrets: std::sync::Arc::new(secrets_from_env()),
    };
    let output = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .with_filter(filter::filter_fn(|meta| {
            allowed(meta.target(), meta.level())
        }));
    tracing_subscriber::registry()
        .with(env_filter)
        .with(output)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_targets_are_capped_at_warn_and_gpucap_is_not() {
        let auth = "aws_smithy_runtime::client::orchestrator::auth";
        assert!(!allowed(auth, &Level::TRACE));
        assert!(!allowed("aws_config::meta::credentials", &Level::DEBUG));
        assert!(!allowed("aws_sigv4::http_request::sign", &Level::TRACE));
        assert!(!allowed("hyper_util::client", &Level::DEBUG));
        assert!(!allowed("azure_identity", &Level::INFO));
        assert!(allowed(auth, &Level::WARN));
        assert!(allowed("aws_config", &Level::ERROR));
        assert!(allowed("gpucap::commands::plan", &Level::TRACE));
        assert!(allowed("gpucap_provider::retry", &Level::TRACE));
    }

    #[test]
    fn credential_values_are_redacted_by_name() {
        let secrets = vec![
            ("AKIAMARKERMARKER".to_string(), "AWS_ACCESS_KEY_ID"),
            ("short".to_string(), "AWS_SESSION_TOKEN"),
        ];
        assert_eq!(
            redact(
                "identity access_key_id: \"AKIAMARKERMARKER\" short",
                &secrets
            ),
            "identity access_key_id: \"[redacted AWS_ACCESS_KEY_ID]\" [redacted AWS_SESSION_TOKEN]"
        );
        assert_eq!(redact("nothing here", &secrets), "nothing here");
    }
}
