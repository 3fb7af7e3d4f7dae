//! Entra ID bearer tokens for ARM, from the environment, in this order:
//!
//! 1. `AZURE_ACCESS_TOKEN`: a token got elsewhere (`az account get-access-token --query
//!    accessToken -o tsv`), used as is;
//! 2. workload identity: `AZURE_FEDERATED_TOKEN_FILE` (+ `AZURE_TENANT_ID`, `AZURE_CLIENT_ID`),
//!    the OIDC token in that file exchanged for an ARM token (client assertion);
//! 3. a client secret: `AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`.
//!
//! Tokens are cached until a minute before they expire. Neither a secret nor a token is ever
//! part of an error, a log line or a `Debug` output.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpucap_provider::capacity::{ActError, ActErrorKind, ActResult};
use serde_json::Value;

use super::AzureCapacity;

const SCOPE: &str = "https://management.azure.com/.default";
const API: &str = "entra:token";

/// How gpucap proves who it is to ARM.
#[derive(Clone)]
pub enum Credential {
    /// A bearer token given as is (`AZURE_ACCESS_TOKEN`).
    AccessToken(String),
    /// Workload identity federation: an OIDC token read from a file at each exchange.
    Federated {
        tenant: String,
        client_id: String,
        token_file: PathBuf,
    },
    /// A service principal's client secret.
    ClientSecret {
        tenant: String,
        client_id: String,
        secret: String,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::AccessToken(_) => f.write_str("AccessToken(<hidden>)"),
            Credential::Federated {
                tenant, client_id, ..
            } => f
                .debug_struct("Federated")
                .field("tenant", tenant)
                .field("client_id", client_id)
                .finish_non_exhaustive(),
            Credential::ClientSecret {
                tenant, client_id, ..
            } => f
                .debug_struct("ClientSecret")
                .field("tenant", tenant)
                .field("client_id", client_id)
                .finish_non_exhaustive(),
        }
    }
}

impl Credential {
    /// The first credential the environment holds (see the module docs).
    pub fn from_env() -> ActResult<Credential> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        if let Some(token) = var("AZURE_ACCESS_TOKEN") {
            return Ok(Credential::AccessToken(token.trim().to_string()));
        }
        let ids = (var("AZURE_TENANT_ID"), var("AZURE_CLIENT_ID"));
        if let Some(file) = var("AZURE_FEDERATED_TOKEN_FILE") {
            let (Some(tenant), Some(client_id)) = ids else {
                return Err(auth_error(
                    "AZURE_FEDERATED_TOKEN_FILE is set, but AZURE_TENANT_ID or AZURE_CLIENT_ID is not",
                ));
            };
            return Ok(Credential::Federated {
                tenant,
                client_id,
                token_file: PathBuf::from(file),
            });
        }
        if let Some(secret) = var("AZURE_CLIENT_SECRET") {
            let (Some(tenant), Some(client_id)) = ids else {
                return Err(auth_error(
                    "AZURE_CLIENT_SECRET is set, but AZURE_TENANT_ID or AZURE_CLIENT_ID is not",
                ));
            };
            return Ok(Credential::ClientSecret {
                tenant,
                client_id,
                secret,
            });
        }
        Err(auth_error(
            "no Azure credentials in the environment: set AZURE_ACCESS_TOKEN (e.g. from `az account get-access-token`), AZURE_FEDERATED_TOKEN_FILE with AZURE_TENANT_ID and AZURE_CLIENT_ID (workload identity), or AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET",
        ))
    }
}

fn auth_error(message: impl Into<String>) -> ActError {
    ActError {
        api: API.into(),
        kind: ActErrorKind::Auth,
        code: None,
        message: message.into(),
        request_id: None,
    }
}

/// The token in use and when to get a new one.
#[derive(Default)]
pub(crate) struct TokenCache {
    current: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl AzureCapacity {
    /// A bearer token for ARM.
    pub(crate) async fn token(&self) -> ActResult<String> {
        let (tenant, client_id, form_secret) = match &self.config.credential {
            Credential::AccessToken(t) => return Ok(t.clone()),
            Credential::ClientSecret {
                tenant,
                client_id,
                secret,
            } => (tenant, client_id, ("client_secret", secret.clone())),
            Credential::Federated {
                tenant,
                client_id,
                token_file,
            } => {
                let assertion = std::fs::read_to_string(token_file).map_err(|e| {
                    auth_error(format!(
                        "cannot read the federated token file {}: {e}",
                        token_file.display()
                    ))
                })?;
                (
                    tenant,
                    client_id,
                    ("client_assertion", assertion.trim().to_string()),
                )
            }
        };
        let mut current = self.tokens.current.lock().await;
        if let Some((token, until)) = current.as_ref()
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let mut form = vec![
            ("grant_type", "client_credentials".to_string()),
            ("client_id", client_id.clone()),
            ("scope", SCOPE.to_string()),
            (form_secret.0, form_secret.1),
        ];
        if form_secret.0 == "client_assertion" {
            form.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
            ));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", form_escape(v)))
            .collect::<Vec<_>>()
            .join("&");
        let url = format!(
            "{}/{}/oauth2/v2.0/token",
            self.config.authority,
            form_escape(tenant)
        );
        let reply = self
            .http
            .post(&url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                auth_error(format!(
                    "cannot reach Entra ID at {}: {}",
                    self.config.authority,
                    e.without_url()
                ))
            })?;
        let status = reply.status().as_u16();
        let text = reply.text().await.unwrap_or_default();
        let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status != 200 {
            // Only the error code: the description can echo what was sent.
            let code = doc["error"]["code"]
                .as_str()
                .or_else(|| doc["error"].as_str())
                .unwrap_or("unknown");
            return Err(ActError {
                code: Some(code.to_string()),
                ..auth_error(format!(
                    "Entra ID refused a token for client {client_id} in tenant {tenant} (HTTP {status})"
                ))
            });
        }
        let Some(token) = doc["access_token"].as_str().map(str::to_string) else {
            return Err(auth_error("Entra ID answered without an access token"));
        };
        let lifetime = doc["expires_in"]
            .as_u64()
            .or_else(|| doc["expires_in"].as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(300);
        let until = Instant::now() + Duration::from_secs(lifetime.saturating_sub(60).max(1));
        *current = Some((token.clone(), until));
        Ok(token)
    }
}

/// `application/x-www-form-urlencoded` escaping of one value.
pub(crate) fn form_escape(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_secret_or_a_token() {
        let c = Credential::ClientSecret {
            tenant: "t".into(),
            client_id: "c".into(),
            secret: "s3cr3t-value".into(),
        };
        assert!(!format!("{c:?}").contains("s3cr3t"));
        let t = Credential::AccessToken("eyJtoken".into());
        assert!(!format!("{t:?}").contains("eyJ"));
    }

    #[test]
    fn form_values_are_escaped() {
        assert_eq!(form_escape("a b&c=d/e"), "a%20b%26c%3Dd%2Fe");
    }
}
