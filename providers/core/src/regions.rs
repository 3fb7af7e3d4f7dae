//! The regions each cloud has, as data (`data/regions.csv`, with its sources and date), so a
//! config that names one that does not exist (`us-east-99`) is refused where it is written,
//! with the closest real one as a suggestion, rather than surfacing later as demand no offer
//! can serve. [`Cloud::of_region`] says which cloud's *naming scheme* a name follows; this says
//! whether the cloud actually has it.

use std::sync::OnceLock;

use crate::Cloud;

/// The list, compiled in.
const DATA: &str = include_str!("../data/regions.csv");

/// Every `(cloud, region)` of [`DATA`], in file order.
fn all() -> &'static [(Cloud, &'static str)] {
    static ALL: OnceLock<Vec<(Cloud, &'static str)>> = OnceLock::new();
    ALL.get_or_init(|| {
        DATA.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && *l != "cloud,region")
            .filter_map(|l| {
                let (cloud, region) = l.split_once(',')?;
                Some((cloud.parse().ok()?, region.trim()))
            })
            .collect()
    })
}

/// The regions gpucap knows for `cloud`, sorted.
pub fn of(cloud: Cloud) -> impl Iterator<Item = &'static str> {
    all()
        .iter()
        .filter(move |(c, _)| *c == cloud)
        .map(|&(_, r)| r)
}

/// The cloud that has `region`, if any cloud gpucap knows has it.
pub fn cloud_of(region: &str) -> Option<Cloud> {
    all().iter().find(|(_, r)| *r == region).map(|&(c, _)| c)
}

/// Whether `cloud` has `region`.
pub fn exists(cloud: Cloud, region: &str) -> bool {
    of(cloud).any(|r| r == region)
}

/// Whether `zone` names a zone of `cloud`'s `region`: on AWS and GCP the region's name and a
/// suffix (`us-east-1a`, `us-central1-a`), on Azure a zone number (`1`).
pub fn zone_in_region(cloud: Cloud, region: &str, zone: &str) -> bool {
    match cloud {
        Cloud::Aws | Cloud::Gcp => zone.strip_prefix(region).is_some_and(|rest| {
            let rest = rest.strip_prefix('-').unwrap_or(rest);
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric())
        }),
        Cloud::Azure => !zone.is_empty() && zone.chars().all(|c| c.is_ascii_digit()),
    }
}

/// The known region nearest in spelling to `region`, for a "did you mean" hint: of the cloud
/// whose naming scheme `region` follows, or of every cloud when it follows none.
pub fn closest(region: &str) -> Option<&'static str> {
    let cloud = Cloud::of_region(region);
    all()
        .iter()
        .filter(|(c, _)| cloud.is_none_or(|cloud| cloud == *c))
        .map(|&(_, r)| (r, strsim::damerau_levenshtein(region, r)))
        .filter(|&(r, d)| d <= 3.max(r.len() / 3))
        .min_by_key(|&(r, d)| (d, r))
        .map(|(r, _)| r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn zones_belong_to_their_region() {
        use super::zone_in_region;
        use crate::Cloud;
        assert!(zone_in_region(Cloud::Aws, "us-east-1", "us-east-1a"));
        assert!(zone_in_region(Cloud::Gcp, "us-central1", "us-central1-a"));
        assert!(zone_in_region(Cloud::Azure, "eastus", "2"));
        assert!(!zone_in_region(Cloud::Aws, "us-east-1", "eu-west-1a"));
        assert!(!zone_in_region(Cloud::Aws, "us-east-1", "us-east-1"));
        assert!(!zone_in_region(Cloud::Gcp, "us-central1", "us-east4-a"));
        assert!(!zone_in_region(Cloud::Azure, "eastus", "eastus-1"));
    }

    use super::*;

    #[test]
    fn the_list_holds_each_clouds_main_regions_in_its_own_naming_scheme() {
        for cloud in Cloud::ALL {
            assert!(of(cloud).count() >= 30, "{cloud}");
            for region in of(cloud) {
                assert_eq!(Cloud::of_region(region), Some(cloud), "{region}");
            }
        }
        for (cloud, region) in [
            (Cloud::Aws, "us-east-1"),
            (Cloud::Aws, "us-gov-west-1"),
            (Cloud::Gcp, "europe-west4"),
            (Cloud::Azure, "swedencentral"),
        ] {
            assert!(exists(cloud, region), "{region}");
            assert_eq!(cloud_of(region), Some(cloud));
        }
        assert!(!exists(Cloud::Aws, "us-east-99"));
        assert!(!exists(Cloud::Gcp, "us-east-1"));
    }

    #[test]
    fn a_misspelt_region_gets_the_nearest_real_one_of_its_cloud() {
        assert_eq!(closest("us-east-99"), Some("us-east-1"));
        assert_eq!(closest("us-centrl1"), Some("us-central1"));
        assert_eq!(closest("eastsu2"), Some("eastus2"));
        assert_eq!(closest("europe-wset4"), Some("europe-west4"));
        assert_eq!(closest("Mars"), None);
    }
}
