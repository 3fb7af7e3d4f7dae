//! Names in generated code: Terraform identifiers and cloud resource names made from user
//! input (pool, campaign and action ids), sanitised to what each accepts and made unique
//! deterministically, so the same plan always gives the same names and names never depend on
//! list positions.

use std::collections::{BTreeMap, BTreeSet};

/// Longest identifier written; longer ones are cut and end in a hash of the full name.
pub const MAX_IDENT: usize = 64;

/// `[a-z0-9_-]`, starting with a letter, at most `max` characters. Runs of other characters
/// become one `-`; a name with no letter or digit becomes `x`. When the name had to be cut or
/// changed beyond lower-casing, nothing is appended here: [`Namer`] resolves collisions.
pub fn sanitize(raw: &str, max: usize, underscore: bool) -> String {
    let sep = if underscore { '_' } else { '-' };
    let mut out = String::new();
    for c in raw.chars().flat_map(char::to_lowercase) {
        let keep =
            c.is_ascii_lowercase() || c.is_ascii_digit() || (underscore && c == '_') || c == '-';
        let c = if keep { c } else { sep };
        if (c == '-' || c == '_') && (out.is_empty() || out.ends_with(['-', '_'])) {
            continue;
        }
        out.push(c);
    }
    let mut out = out.trim_end_matches(['-', '_']).to_string();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert_str(0, if out.is_empty() { "x" } else { "x-" });
    }
    if out.chars().count() > max {
        // Cut, and keep distinct names distinct with a hash of the original.
        let hash = format!("{:08x}", fnv1a(raw) as u32);
        let keep = max.saturating_sub(hash.len() + 1);
        out = format!(
            "{}{sep}{hash}",
            out.chars()
                .take(keep)
                .collect::<String>()
                .trim_end_matches(['-', '_'])
        );
    }
    out
}

/// GCP/RFC 1035 names: `[a-z]([-a-z0-9]*[a-z0-9])?`, at most `max` characters.
pub fn rfc1035(raw: &str, max: usize) -> String {
    sanitize(raw, max, false)
}

/// GCP label values: `[a-z0-9_-]{0,63}`.
pub fn label_value(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.len() > 63 {
        let hash = format!("{:08x}", fnv1a(raw) as u32);
        out = format!("{}_{hash}", &out[..54]);
    }
    out
}

/// FNV-1a, 64 bits: a stable hash for shortening names (not for security).
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Hands out unique identifiers. Callers ask for every raw name first ([`Namer::assign`]
/// takes them all at once, sorted), so the suffix a colliding name gets depends only on the
/// set of raw names, never on the order of actions in the plan.
#[derive(Debug, Default)]
pub struct Namer {
    names: BTreeMap<String, String>,
}

impl Namer {
    /// Sanitises every raw name; raw names that sanitise alike get `-2`, `-3`, … in the order
    /// of the raw names.
    pub fn assign<'a>(raws: impl IntoIterator<Item = &'a str>, max: usize) -> Namer {
        let raws: BTreeSet<&str> = raws.into_iter().collect();
        let mut taken = BTreeSet::new();
        let mut names = BTreeMap::new();
        for raw in raws {
            let base = sanitize(raw, max, true);
            let mut name = base.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                let suffix = format!("-{n}");
                let keep = max.saturating_sub(suffix.len());
                name = format!("{}{suffix}", base.chars().take(keep).collect::<String>());
                n += 1;
            }
            names.insert(raw.to_string(), name);
        }
        Namer { names }
    }

    /// The identifier given to `raw` (which must have been assigned).
    pub fn get(&self, raw: &str) -> &str {
        self.names.get(raw).map_or("x", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_start_with_a_letter_and_use_only_safe_characters() {
        assert_eq!(sanitize("H100 US/East", 64, true), "h100_us_east");
        assert_eq!(sanitize("${jndi:ldap}", 64, true), "jndi_ldap");
        assert_eq!(sanitize("9-lives", 64, true), "x-9-lives");
        assert_eq!(sanitize("🚀", 64, true), "x");
        assert_eq!(rfc1035("Pool_A.b", 63), "pool-a-b");
        let long = "a".repeat(200);
        let cut = sanitize(&long, 64, true);
        assert_eq!(cut.len(), 64);
        assert_ne!(cut, sanitize(&"a".repeat(201), 64, true));
    }

    #[test]
    fn collisions_get_suffixes_that_do_not_depend_on_order() {
        let a = Namer::assign(["pool.a", "pool_a", "pool a"], 64);
        let b = Namer::assign(["pool a", "pool_a", "pool.a"], 64);
        for raw in ["pool.a", "pool_a", "pool a"] {
            assert_eq!(a.get(raw), b.get(raw));
        }
        let all: BTreeSet<&str> = ["pool.a", "pool_a", "pool a"]
            .iter()
            .map(|r| a.get(r))
            .collect();
        assert_eq!(all.len(), 3);
    }

    #[test]
    fn label_values_fit_gcp() {
        assert_eq!(label_value("LLM 70B"), "llm_70b");
        assert!(label_value(&"x".repeat(100)).len() <= 63);
    }
}
