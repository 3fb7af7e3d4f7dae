//! The fingerprint of a plan: a sha256 of every input it was made from (config, calendars,
//! forecasts, policies, existing-capacity state, the price quotes with their times and offering
//! ids, and the gpucap version). Acting on a plan later recomputes the digests of the local files
//! and refuses the plan when they differ ([`stale_inputs`]), like Terraform's "saved plan is
//! stale". Pure: callers pass the bytes they parsed, never a second read of the file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path};

use sha2::{Digest, Sha256};

use super::{Fingerprint, InputDigest};

/// The kinds of input read from the infra repository's files, which `apply` can read again and
/// compare; prices (`quotes`, `problem`) and the `tool` version are not among them.
pub const LOCAL_KINDS: [&str; 5] = ["config", "calendar", "forecast", "policy", "state"];

/// The one `state` input that is not a file: the capacity already owned, derived from the
/// config and the state files (both compared on their own).
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

    /// Whether this is a local file `apply` can check: a [`LOCAL_KINDS`] input other than
    /// [`EXISTING_CAPACITY`].
    pub fn is_local_file(&self) -> bool {
        LOCAL_KINDS.contains(&self.kind.as_str())
            && !(self.kind == "state" && self.name == EXISTING_CAPACITY)
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

/// How an input differs from when the plan was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The same file, other content.
    Changed,
    /// A file that is an input now but was not then (a new calendar, policy, …).
    Added,
    /// A file that was an input then but is not now (deleted, or no longer named by the config).
    Removed,
}

/// One input that differs between a plan and the files now (or another plan).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct InputChange {
    /// `config`, `calendar`, `forecast`, `policy`, `state`, `quotes`, `problem` or `tool`.
    pub kind: String,
    /// The file, relative to the project root (see [`input_name`]).
    pub name: String,
    pub change: Change,
}

impl fmt::Display for InputChange {
    /// `calendar calendars/x.yaml changed`, `… was added`, `… was removed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.change {
            Change::Changed => "changed",
            Change::Added => "was added",
            Change::Removed => "was removed",
        };
        write!(f, "{} {} {what}", self.kind, self.name)
    }
}

/// The local files (see [`InputDigest::is_local_file`]) that differ between the inputs a plan
/// recorded and `current` ones computed now, sorted by kind and name; empty when the plan is
/// not stale. Prices, the problem and the gpucap version are not compared: they are expected
/// to move, and `apply` checks the prices it pays on their own.
pub fn stale_inputs(recorded: &[InputDigest], current: &[InputDigest]) -> Vec<InputChange> {
    let local = |inputs: &[InputDigest]| -> Vec<InputDigest> {
        inputs
            .iter()
            .filter(|i| i.is_local_file())
            .cloned()
            .collect()
    };
    input_changes(&local(recorded), &local(current))
}

/// Every input, of any kind, whose digest differs between two fingerprints (`then` and `now`),
/// or that is in only one of them; sorted by kind and name. What moved between two plans.
pub fn input_changes(then: &[InputDigest], now: &[InputDigest]) -> Vec<InputChange> {
    let by_name = |inputs: &[InputDigest]| -> BTreeMap<(String, String), String> {
        inputs
            .iter()
            .map(|i| ((i.kind.clone(), i.name.clone()), i.sha256.clone()))
            .collect()
    };
    let (then, now) = (by_name(then), by_name(now));
    let mut changes: Vec<InputChange> = Vec::new();
    let mut push = |(kind, name): &(String, String), change| {
        changes.push(InputChange {
            kind: kind.clone(),
            name: name.clone(),
            change,
        });
    };
    for (key, sha) in &then {
        match now.get(key) {
            None => push(key, Change::Removed),
            Some(current) if current != sha => push(key, Change::Changed),
            Some(_) => {}
        }
    }
    for key in now.keys().filter(|k| !then.contains_key(*k)) {
        push(key, Change::Added);
    }
    changes.sort();
    changes
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

    fn inputs(files: &[(&str, &str, &[u8])]) -> Vec<InputDigest> {
        let mut f = FingerprintBuilder::default();
        for (kind, name, bytes) in files {
            f.add(kind, name, bytes);
        }
        f.add("quotes", "offers", b"prices")
            .add("state", EXISTING_CAPACITY, b"[]")
            .add("tool", "gpucap", b"0.1.0");
        f.finish().inputs
    }

    const REPO: &[(&str, &str, &[u8])] = &[
        ("config", "gpucap.toml", b"[budget]\n"),
        ("calendar", "calendars/x.yaml", b"campaigns: []\n"),
        ("forecast", "forecasts/h100.csv", b"ds,yhat\n"),
        (
            "policy",
            "policies/acme/a.rego",
            b"package gpucap.policies.acme\n",
        ),
        ("state", "show.json", b"{}"),
    ];

    #[test]
    fn unchanged_local_inputs_are_not_stale() {
        let recorded = inputs(REPO);
        assert_eq!(stale_inputs(&recorded, &inputs(REPO)), []);
        // Prices, the problem, the version and the derived capacity are not local files.
        let mut current = inputs(REPO);
        for i in &mut current {
            if !i.is_local_file() {
                i.sha256 = sha256(b"moved");
            }
        }
        current.retain(|i| i.kind != "tool");
        assert_eq!(stale_inputs(&recorded, &current), []);
    }

    #[test]
    fn an_edited_calendar_is_named() {
        let mut edited = REPO.to_vec();
        edited[1].2 = b"campaigns: []\n# a comment\n";
        let changes = stale_inputs(&inputs(REPO), &inputs(&edited));
        assert_eq!(
            changes,
            [InputChange {
                kind: "calendar".into(),
                name: "calendars/x.yaml".into(),
                change: Change::Changed,
            }]
        );
        assert_eq!(changes[0].to_string(), "calendar calendars/x.yaml changed");
    }

    #[test]
    fn a_removed_forecast_and_a_new_policy_are_named() {
        let mut now: Vec<_> = REPO.iter().filter(|i| i.0 != "forecast").copied().collect();
        now.push((
            "policy",
            "policies/acme/b.rego",
            b"package gpucap.policies.b\n",
        ));
        let changes = stale_inputs(&inputs(REPO), &inputs(&now));
        let shown: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "forecast forecasts/h100.csv was removed",
                "policy policies/acme/b.rego was added",
            ]
        );
    }

    #[test]
    fn input_changes_compare_every_kind_not_only_local_files() {
        let then = inputs(REPO);
        let mut now = inputs(REPO);
        for i in &mut now {
            if i.kind == "quotes" {
                i.sha256 = sha256(b"other prices");
            }
        }
        now.retain(|i| i.kind != "tool");
        let shown: Vec<String> = input_changes(&then, &now)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["quotes offers changed", "tool gpucap was removed"]);
        assert_eq!(stale_inputs(&then, &now), []);
        assert_eq!(input_changes(&then, &then), []);
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
            name("/repo/infra", "/repo/infra/../common/f.csv"),
            "../common/f.csv"
        );
        assert_eq!(name("infra", "/tmp/show.json"), "/tmp/show.json");
    }
}
