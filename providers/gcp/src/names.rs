//! The mapping tables between the Billing Catalog's free-text SKU descriptions and Compute
//! Engine's names. Google names the same thing differently in each (`Nvidia H100 80GB Plus GPU`
//! is the `nvidia-h100-mega-80gb` accelerator; `A3Plus Instance Core` prices `a3-megagpu-*`
//! machines), so the correspondence is a table, kept here and nowhere else.

/// GPU model as written in SKU descriptions (between `Nvidia ` and ` GPU`) → accelerator type.
/// Longest match wins, so `Tesla A100 80GB` is not read as `Tesla A100`.
pub const GPU_MODELS: &[(&str, &str)] = &[
    ("Tesla T4", "nvidia-tesla-t4"),
    ("Tesla V100", "nvidia-tesla-v100"),
    ("Tesla A100", "nvidia-tesla-a100"),
    ("Tesla A100 80GB", "nvidia-a100-80gb"),
    ("A100 80GB", "nvidia-a100-80gb"),
    ("H100 80GB", "nvidia-h100-80gb"),
    ("H100 80GB Mega", "nvidia-h100-mega-80gb"),
    ("H100 80GB Plus", "nvidia-h100-mega-80gb"),
    ("H100 Mega 80GB", "nvidia-h100-mega-80gb"),
    ("H200 141GB", "nvidia-h200-141gb"),
    ("L4", "nvidia-l4"),
    ("B200", "nvidia-b200"),
];

/// Machine series word in `<Series> Instance Core|Ram` SKUs → the series it prices.
/// Only accelerator-optimised families, whose GPUs come with the machine.
pub const SERIES_WORDS: &[(&str, &str)] = &[
    ("A2", "a2"),
    ("A3", "a3-highgpu"),
    ("A3Plus", "a3-megagpu"),
    ("A3 Plus", "a3-megagpu"),
    ("A3 Mega", "a3-megagpu"),
    ("G2", "g2"),
];

/// Series → the machine-type name prefixes it covers.
pub const SERIES_PREFIXES: &[(&str, &[&str])] = &[
    ("a2", &["a2-highgpu-", "a2-megagpu-", "a2-ultragpu-"]),
    ("a3-highgpu", &["a3-highgpu-", "a3-edgegpu-"]),
    ("a3-megagpu", &["a3-megagpu-"]),
    ("g2", &["g2-standard-"]),
];

/// Words that mark a SKU as a variant that is not the list price of an ordinary VM
/// (gpuhunt's filter): sole-tenant nodes, reservations, premium/custom shapes, DWS.
pub const EXCLUDED_WORDS: &[&str] = &[
    "Sole Tenancy",
    "Reserved",
    "Premium",
    "Custom",
    "DWS",
    "Calendar Mode",
];

/// The accelerator type a description's GPU model names, by longest exact match.
pub fn accelerator_type(model: &str) -> Option<&'static str> {
    GPU_MODELS
        .iter()
        .filter(|(m, _)| *m == model.trim())
        .map(|(_, t)| *t)
        .next()
}

/// The series a description's series word prices (`A3Plus` → `a3-megagpu`).
pub fn series(word: &str) -> Option<&'static str> {
    SERIES_WORDS
        .iter()
        .find(|(w, _)| *w == word.trim())
        .map(|(_, s)| *s)
}

/// The series a machine type belongs to (`a3-megagpu-8g` → `a3-megagpu`).
pub fn series_of_machine(machine_type: &str) -> Option<&'static str> {
    SERIES_PREFIXES
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|p| machine_type.starts_with(p)))
        .map(|(s, _)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irregular_names_map_to_compute_names() {
        assert_eq!(
            accelerator_type("H100 80GB Plus"),
            Some("nvidia-h100-mega-80gb")
        );
        assert_eq!(
            accelerator_type("Tesla A100 80GB"),
            Some("nvidia-a100-80gb")
        );
        assert_eq!(accelerator_type("Tesla A100"), Some("nvidia-tesla-a100"));
        assert_eq!(accelerator_type("Tesla K80"), None);
        assert_eq!(series("A3Plus"), series_of_machine("a3-megagpu-8g"));
        assert_eq!(series("A3"), Some("a3-highgpu"));
        assert_eq!(series_of_machine("n1-standard-8"), None);
    }

    #[test]
    fn every_accelerator_type_is_in_gpucaps_catalog() {
        for (_, t) in GPU_MODELS {
            assert!(gpucap_provider::Accelerator::parse(t).is_ok(), "{t}");
        }
    }
}
