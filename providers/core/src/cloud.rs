//! The clouds gpucap buys from.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cloud {
    Aws,
    Gcp,
    Azure,
}

impl Cloud {
    pub const ALL: [Cloud; 3] = [Cloud::Aws, Cloud::Gcp, Cloud::Azure];

    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
        }
    }

    /// Which cloud a region name belongs to, from the naming schemes the clouds use
    /// (`us-east-1`, `us-central1`, `eastus`). `None` when it fits none of them.
    pub fn of_region(region: &str) -> Option<Cloud> {
        let parts: Vec<&str> = region.split('-').collect();
        let last = parts.last()?;
        match parts.len() {
            // aws: us-east-1, ap-southeast-2, us-gov-west-1
            3 | 4 if last.chars().all(|c| c.is_ascii_digit()) => Some(Cloud::Aws),
            // gcp: us-central1, europe-west4, northamerica-northeast2
            2 if last.ends_with(|c: char| c.is_ascii_digit())
                && last.starts_with(|c: char| c.is_ascii_alphabetic()) =>
            {
                Some(Cloud::Gcp)
            }
            // azure: eastus, westeurope, eastus2, southcentralus
            1 if region
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) =>
            {
                Some(Cloud::Azure)
            }
            _ => None,
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Cloud {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "aws" => Ok(Cloud::Aws),
            "gcp" | "google" => Ok(Cloud::Gcp),
            "azure" => Ok(Cloud::Azure),
            _ => Err(format!(
                "unknown cloud `{s}`; expected `aws`, `gcp` or `azure`"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_name_their_cloud() {
        for (region, cloud) in [
            ("us-east-1", Some(Cloud::Aws)),
            ("ap-southeast-2", Some(Cloud::Aws)),
            ("us-gov-west-1", Some(Cloud::Aws)),
            ("us-central1", Some(Cloud::Gcp)),
            ("europe-west4", Some(Cloud::Gcp)),
            ("eastus", Some(Cloud::Azure)),
            ("southcentralus", Some(Cloud::Azure)),
            ("US East", None),
        ] {
            assert_eq!(Cloud::of_region(region), cloud, "{region}");
        }
    }
}
