//! The fingerprint of a plan: a sha256 of every input it was made from (config, calendars,
//! forecasts, policies, existing-capacity state, the price quotes with their times and offering
//! ids, and the gpucap version). Acting on a plan later recomputes it and refuses the plan when
//! it differs, like Terraform's "saved plan is stale". Pure: callers pass the bytes they parsed,
//! never a second read of the file.

use std::path::{Component, Path};

use sha2::{Digest, Sha256};

use super::{Fingerprint, InputDigest};

/// The one `state` input that is not a file: the capacity already owned, derived from the
/// config and the state files.
pub const EXISTING_CAPACITY: &str = "existing-capacity";

/// `sha256:<64 lowercase hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

impl InputDigest {
    /// The digest of one input's content.
    pub fn of(kind: &str, name: &str, bytes: &[u8]) -> InputDigest {
        InputDigest {
            kind: kind.to_string(),
            name: name.to_string(),
            sha256: sha256(bytes),
        }
    }
}

/// How a file's name appears among a plan's inputs: relative to the project `root` (the config
/// file's directory) where it lies under it, with `/` separators. Leading `./` on either side
/// is ignored, so `-c gpucap.toml`, `-c ./gpucap.toml` and `-c ./infra/gpucap.toml` name the
/// same files the same way.
pub fn input_name(root: &Path, path: &Path) -> String {
    fn plain(p: &Path) -> &Path {
        let mut components = p.components();
        while components.clone().next() == Some(Component::CurDir) {
            components.next();
        }
        components.as_path()
    }
    let path = plain(path);
    path.strip_prefix(plain(root))
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Collects input digests; [`FingerprintBuilder::finish`] combines them.
#[derive(Debug, Default)]
pub struct FingerprintBuilder {
    inputs: Vec<InputDigest>,
}

impl FingerprintBuilder {
    /// Adds an input by its content.
    pub fn add(&mut self, kind: &str, name: &str, bytes: &[u8]) -> &mut Self {
        self.inputs.push(InputDigest::of(kind, name, bytes));
        self
    }

    /// Adds inputs digested already (by the loader that parsed them).
    pub fn extend(&mut self, inputs: impl IntoIterator<Item = InputDigest>) -> &mut Self {
        self.inputs.extend(inputs);
        self
    }

    /// The fingerprint: the inputs sorted, and one digest over `kind name sha256` lines.
    pub fn finish(mut self) -> Fingerprint {
        self.inputs.sort();
        self.inputs.dedup();
        let mut text = String::new();
        for i in &self.inputs {
            text.push_str(&format!("{}\t{}\t{}\n", i.kind, i.name, i.sha256));
        }
        Fingerprint {
            digest: sha256(text.as_bytes()),
            inputs: self.inputs,
        }
    }
}

/// The digest again, from a plan's recorded inputs (to check a plan file was not edited).
pub fn recompute(inputs: &[InputDigest]) -> String {
    FingerprintBuilder {
        inputs: inputs.to_vec(),
    }
    .finish()
    .digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_empty_input_is_the_known_value() {
        assert_eq!(
            sha256(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn order_of_adding_does_not_matter_but_content_does() {
        let mut a = FingerprintBuilder::default();
        a.add("calendar", "a.yaml", b"x")
            .add("config", "gpucap.toml", b"y");
        let mut b = FingerprintBuilder::default();
        b.add("config", "gpucap.toml", b"y")
            .add("calendar", "a.yaml", b"x");
        let mut c = FingerprintBuilder::default();
        c.add("config", "gpucap.toml", b"y")
            .add("calendar", "a.yaml", b"x2");
        let (a, b, c) = (a.finish(), b.finish(), c.finish());
        assert_eq!(a.digest, b.digest);
        assert_ne!(a.digest, c.digest);
        assert_eq!(recompute(&a.inputs), a.digest);
    }

    #[test]
    fn names_are_relative_to_the_root_however_the_config_path_is_spelt() {
        let name = |root: &str, path: &str| input_name(Path::new(root), Path::new(path));
        assert_eq!(name("", "calendars/x.yaml"), "calendars/x.yaml");
        assert_eq!(name(".", "./calendars/x.yaml"), "calendars/x.yaml");
        assert_eq!(name(".", "calendars/x.yaml"), "calendars/x.yaml");
        assert_eq!(
            name("./infra", "infra/calendars/x.yaml"),
            "calendars/x.yaml"
        );
        assert_eq!(
            name("infra", "./infra/calendars/x.yaml"),
            "calendars/x.yaml"
        );
        assert_eq!(
            name("/repo/infra", "/repo/infra/../shared/f.csv"),
            "../shared/f.csv"
        );
        assert_eq!(name("infra", "/tmp/show.json"), "/tmp/show.json");
    }
}
