//! The fingerprint of a plan: a sha256 of every input it was made from (config, calendars,
//! forecasts, policies, existing-capacity state, the price quotes with their times and offering
//! ids, and the gpucap version). Acting on a plan later recomputes it and refuses the plan when
//! it differs, like Terraform's "saved plan is stale". Pure: callers pass the bytes.

use sha2::{Digest, Sha256};

use super::{Fingerprint, InputDigest};

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

/// Collects input digests; [`FingerprintBuilder::finish`] combines them.
#[derive(Debug, Default)]
pub struct FingerprintBuilder {
    inputs: Vec<InputDigest>,
}

impl FingerprintBuilder {
    /// Adds an input by its content.
    pub fn add(&mut self, kind: &str, name: &str, bytes: &[u8]) -> &mut Self {
        self.inputs.push(InputDigest {
            kind: kind.to_string(),
            name: name.to_string(),
            sha256: sha256(bytes),
        });
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
}
