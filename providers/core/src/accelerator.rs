//! The accelerator catalog: one canonical name per interchangeable accelerator, with the
//! aliases the clouds, SkyPilot catalogs and people use for it.
//!
//! Every input (calendars, forecasts, price lists) names accelerators its own way — `H100`,
//! `nvidia-h100-80gb`, `NVIDIA H100 80GB HBM3`, `p5.48xlarge`'s `gpu` attribute — and gpucap
//! compares them all, so they meet here. Lookup normalises case and punctuation, so the alias
//! table only lists spellings that differ in substance.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Who makes an accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
    Aws,
    Google,
}

/// Static facts about one accelerator model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceleratorSpec {
    /// Canonical name: lowercase, what gpucap prints and what pools are keyed by.
    pub name: &'static str,
    /// The name a person reads in a report.
    pub display: &'static str,
    pub vendor: Vendor,
    /// Memory per device in GB, as the vendor sells it.
    pub memory_gb: u32,
    /// Other spellings, already normalised (see [`normalise`]).
    pub aliases: &'static [&'static str],
}

/// Every accelerator gpucap knows. Order is the order of `gpucap prices` listings.
pub const CATALOG: &[AcceleratorSpec] = &[
    spec(
        "b300",
        "NVIDIA B300",
        Vendor::Nvidia,
        288,
        &["b300-288gb", "blackwell-ultra"],
    ),
    spec(
        "b200",
        "NVIDIA B200",
        Vendor::Nvidia,
        180,
        &["b200-180gb", "b200-192gb"],
    ),
    spec(
        "h200",
        "NVIDIA H200 141GB",
        Vendor::Nvidia,
        141,
        &["h200-141gb"],
    ),
    spec(
        "h100",
        "NVIDIA H100 80GB",
        Vendor::Nvidia,
        80,
        &["h100-80gb", "h100-mega", "h100-mega-80gb", "h100-sxm"],
    ),
    spec(
        "a100-80gb",
        "NVIDIA A100 80GB",
        Vendor::Nvidia,
        80,
        &["a100-80g", "a100-sxm4-80gb", "a100-80gb-sxm"],
    ),
    spec(
        "a100",
        "NVIDIA A100 40GB",
        Vendor::Nvidia,
        40,
        &["a100-40gb", "a100-40g", "a100-sxm4-40gb"],
    ),
    spec("l40s", "NVIDIA L40S", Vendor::Nvidia, 48, &["l40s-48gb"]),
    spec("l4", "NVIDIA L4", Vendor::Nvidia, 24, &["l4-24gb"]),
    spec("a10g", "NVIDIA A10G", Vendor::Nvidia, 24, &["a10g-24gb"]),
    spec("a10", "NVIDIA A10", Vendor::Nvidia, 24, &["a10-24gb"]),
    spec(
        "v100-32gb",
        "NVIDIA V100 32GB",
        Vendor::Nvidia,
        32,
        &["v100-32g"],
    ),
    spec(
        "v100",
        "NVIDIA V100 16GB",
        Vendor::Nvidia,
        16,
        &["v100-16gb"],
    ),
    spec("t4", "NVIDIA T4", Vendor::Nvidia, 16, &["t4-16gb"]),
    spec(
        "mi300x",
        "AMD Instinct MI300X",
        Vendor::Amd,
        192,
        &["instinct-mi300x"],
    ),
    spec(
        "trainium",
        "AWS Trainium",
        Vendor::Aws,
        32,
        &["trainium1", "trn1"],
    ),
    spec("trainium2", "AWS Trainium2", Vendor::Aws, 96, &["trn2"]),
    spec("tpu-v5p", "Google TPU v5p", Vendor::Google, 95, &["v5p"]),
    spec(
        "tpu-v6e",
        "Google TPU v6e",
        Vendor::Google,
        32,
        &["v6e", "trillium"],
    ),
];

const fn spec(
    name: &'static str,
    display: &'static str,
    vendor: Vendor,
    memory_gb: u32,
    aliases: &'static [&'static str],
) -> AcceleratorSpec {
    AcceleratorSpec {
        name,
        display,
        vendor,
        memory_gb,
        aliases,
    }
}

/// A canonical accelerator: a cheap handle into [`CATALOG`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Accelerator(u8);

/// A name that matches no accelerator, with the closest known one when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown accelerator `{name}`{}", suggestion.map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
pub struct UnknownAccelerator {
    pub name: String,
    pub suggestion: Option<&'static str>,
}

impl Accelerator {
    /// Resolves a canonical name or any alias, ignoring case, vendor prefixes and punctuation.
    pub fn parse(name: &str) -> Result<Self, UnknownAccelerator> {
        let key = normalise(name);
        CATALOG
            .iter()
            .position(|s| s.name == key || s.aliases.contains(&key.as_str()))
            .map(|i| Accelerator(i as u8))
            .ok_or_else(|| UnknownAccelerator {
                name: name.to_string(),
                suggestion: closest(&key),
            })
    }

    /// Every accelerator in the catalog.
    pub fn all() -> impl Iterator<Item = Accelerator> {
        (0..CATALOG.len()).map(|i| Accelerator(i as u8))
    }

    pub fn spec(self) -> &'static AcceleratorSpec {
        &CATALOG[self.0 as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// Lowercases, turns punctuation and spaces into `-`, and drops vendor words and form-factor
/// suffixes that never distinguish two accelerators (`NVIDIA Tesla A100 80GB PCIe` →
/// `a100-80gb`).
pub fn normalise(name: &str) -> String {
    const NOISE: &[&str] = &[
        "nvidia", "tesla", "amd", "aws", "google", "gpu", "pcie", "nvl", "hbm3", "hbm3e", "sxm5",
    ];
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !NOISE.contains(w))
        .collect();
    words.join("-")
}

fn closest(key: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .flat_map(|s| {
            std::iter::once(s.name)
                .chain(s.aliases.iter().copied())
                .map(move |a| (s.name, a))
        })
        .map(|(name, alias)| (name, strsim::damerau_levenshtein(key, alias)))
        .filter(|&(_, d)| d <= 2.max(key.len() / 3))
        .min_by_key(|&(_, d)| d)
        .map(|(name, _)| name)
}

impl fmt::Display for Accelerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Accelerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Accelerator({})", self.name())
    }
}

impl std::str::FromStr for Accelerator {
    type Err = UnknownAccelerator;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Accelerator::parse(s)
    }
}

impl Serialize for Accelerator {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Accelerator {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Accelerator::parse(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_one_canonical_name() {
        for name in [
            "H100",
            "h100-80gb",
            "NVIDIA H100 80GB HBM3",
            "nvidia-h100-80gb",
            "H100-MEGA",
        ] {
            assert_eq!(
                Accelerator::parse(name).expect("known accelerator").name(),
                "h100",
                "{name}"
            );
        }
        for name in ["A100-80GB", "nvidia-a100-80gb", "NVIDIA A100 80GB PCIe"] {
            assert_eq!(
                Accelerator::parse(name).expect("known accelerator").name(),
                "a100-80gb",
                "{name}"
            );
        }
        assert_eq!(
            Accelerator::parse("nvidia-tesla-a100")
                .expect("known accelerator")
                .name(),
            "a100"
        );
        assert_eq!(
            Accelerator::parse("Trainium2")
                .expect("known accelerator")
                .name(),
            "trainium2"
        );
    }

    #[test]
    fn unknown_names_suggest_the_closest() {
        let err = Accelerator::parse("h10").expect_err("unknown accelerator");
        assert_eq!(
            err.to_string(),
            "unknown accelerator `h10`; did you mean `h100`?"
        );
        let err = Accelerator::parse("quantum-annealer").expect_err("unknown accelerator");
        assert_eq!(err.suggestion, None);
    }

    #[test]
    fn canonical_names_and_aliases_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for s in CATALOG {
            assert_eq!(normalise(s.name), s.name);
            assert!(seen.insert(s.name), "{} twice", s.name);
            for a in s.aliases {
                assert_eq!(&normalise(a), a, "alias {a} is not normalised");
                assert!(seen.insert(a), "{a} twice");
            }
        }
    }
}
