//! Which accelerator, and how many, each cloud's GPU instance types carry.
//!
//! Price lists name instance types, and some also list a GPU count — which is sometimes wrong
//! (an upstream catalog lists `Standard_ND96isr_H100_v5` with 12 GPUs; it has 8). This table is
//! the reference providers and importers check those counts against, and the way to find the
//! accelerator of a price-list row that names only the instance type (Azure's retail prices).
//! Figures are from the clouds' instance-type documentation.

use crate::{Accelerator, Cloud};

/// One GPU instance type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceSpec {
    pub cloud: Cloud,
    pub instance_type: &'static str,
    /// Canonical accelerator name (see [`crate::accelerator::CATALOG`]).
    pub accelerator: &'static str,
    pub gpus: u32,
}

const fn aws(instance_type: &'static str, accelerator: &'static str, gpus: u32) -> InstanceSpec {
    InstanceSpec {
        cloud: Cloud::Aws,
        instance_type,
        accelerator,
        gpus,
    }
}
const fn gcp(instance_type: &'static str, accelerator: &'static str, gpus: u32) -> InstanceSpec {
    InstanceSpec {
        cloud: Cloud::Gcp,
        instance_type,
        accelerator,
        gpus,
    }
}
const fn azure(instance_type: &'static str, accelerator: &'static str, gpus: u32) -> InstanceSpec {
    InstanceSpec {
        cloud: Cloud::Azure,
        instance_type,
        accelerator,
        gpus,
    }
}

/// Every GPU/accelerator instance type gpucap knows.
pub const INSTANCE_TYPES: &[InstanceSpec] = &[
    // AWS: https://aws.amazon.com/ec2/instance-types/ (accelerated computing)
    aws("p6-b300.48xlarge", "b300", 8),
    aws("p6-b200.48xlarge", "b200", 8),
    aws("p5en.48xlarge", "h200", 8),
    aws("p5e.48xlarge", "h200", 8),
    aws("p5.48xlarge", "h100", 8),
    aws("p5.4xlarge", "h100", 1),
    aws("p4de.24xlarge", "a100-80gb", 8),
    aws("p4d.24xlarge", "a100", 8),
    aws("p3dn.24xlarge", "v100-32gb", 8),
    aws("p3.2xlarge", "v100", 1),
    aws("p3.8xlarge", "v100", 4),
    aws("p3.16xlarge", "v100", 8),
    aws("g6e.xlarge", "l40s", 1),
    aws("g6e.2xlarge", "l40s", 1),
    aws("g6e.4xlarge", "l40s", 1),
    aws("g6e.8xlarge", "l40s", 1),
    aws("g6e.16xlarge", "l40s", 1),
    aws("g6e.12xlarge", "l40s", 4),
    aws("g6e.24xlarge", "l40s", 4),
    aws("g6e.48xlarge", "l40s", 8),
    aws("g6.xlarge", "l4", 1),
    aws("g6.2xlarge", "l4", 1),
    aws("g6.4xlarge", "l4", 1),
    aws("g6.8xlarge", "l4", 1),
    aws("g6.16xlarge", "l4", 1),
    aws("g6.12xlarge", "l4", 4),
    aws("g6.24xlarge", "l4", 4),
    aws("g6.48xlarge", "l4", 8),
    aws("g5.xlarge", "a10g", 1),
    aws("g5.2xlarge", "a10g", 1),
    aws("g5.4xlarge", "a10g", 1),
    aws("g5.8xlarge", "a10g", 1),
    aws("g5.16xlarge", "a10g", 1),
    aws("g5.12xlarge", "a10g", 4),
    aws("g5.24xlarge", "a10g", 4),
    aws("g5.48xlarge", "a10g", 8),
    aws("g4dn.xlarge", "t4", 1),
    aws("g4dn.2xlarge", "t4", 1),
    aws("g4dn.4xlarge", "t4", 1),
    aws("g4dn.8xlarge", "t4", 1),
    aws("g4dn.16xlarge", "t4", 1),
    aws("g4dn.12xlarge", "t4", 4),
    aws("g4dn.metal", "t4", 8),
    aws("trn1.2xlarge", "trainium", 1),
    aws("trn1.32xlarge", "trainium", 16),
    aws("trn1n.32xlarge", "trainium", 16),
    aws("trn2.3xlarge", "trainium2", 1),
    aws("trn2.48xlarge", "trainium2", 16),
    // GCP: https://cloud.google.com/compute/docs/accelerator-optimized-machines
    gcp("a4-highgpu-8g", "b200", 8),
    gcp("a3-ultragpu-8g", "h200", 8),
    gcp("a3-megagpu-8g", "h100", 8),
    gcp("a3-edgegpu-8g", "h100", 8),
    gcp("a3-edgegpu-8g-nolssd", "h100", 8),
    gcp("a3-highgpu-8g", "h100", 8),
    gcp("a3-highgpu-4g", "h100", 4),
    gcp("a3-highgpu-2g", "h100", 2),
    gcp("a3-highgpu-1g", "h100", 1),
    gcp("a2-ultragpu-8g", "a100-80gb", 8),
    gcp("a2-ultragpu-4g", "a100-80gb", 4),
    gcp("a2-ultragpu-2g", "a100-80gb", 2),
    gcp("a2-ultragpu-1g", "a100-80gb", 1),
    gcp("a2-megagpu-16g", "a100", 16),
    gcp("a2-highgpu-8g", "a100", 8),
    gcp("a2-highgpu-4g", "a100", 4),
    gcp("a2-highgpu-2g", "a100", 2),
    gcp("a2-highgpu-1g", "a100", 1),
    gcp("g2-standard-4", "l4", 1),
    gcp("g2-standard-8", "l4", 1),
    gcp("g2-standard-12", "l4", 1),
    gcp("g2-standard-16", "l4", 1),
    gcp("g2-standard-32", "l4", 1),
    gcp("g2-standard-24", "l4", 2),
    gcp("g2-standard-48", "l4", 4),
    gcp("g2-standard-96", "l4", 8),
    // Azure: https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/
    azure("Standard_ND96isr_H200_v5", "h200", 8),
    azure("Standard_ND96isr_H100_v5", "h100", 8),
    azure("Standard_NC40ads_H100_v5", "h100", 1),
    azure("Standard_NC80adis_H100_v5", "h100", 2),
    azure("Standard_ND96amsr_A100_v4", "a100-80gb", 8),
    azure("Standard_ND96asr_v4", "a100", 8),
    azure("Standard_NC24ads_A100_v4", "a100-80gb", 1),
    azure("Standard_NC48ads_A100_v4", "a100-80gb", 2),
    azure("Standard_NC96ads_A100_v4", "a100-80gb", 4),
    azure("Standard_ND96is_MI300X_v5", "mi300x", 8),
    azure("Standard_NC4as_T4_v3", "t4", 1),
    azure("Standard_NC8as_T4_v3", "t4", 1),
    azure("Standard_NC16as_T4_v3", "t4", 1),
    azure("Standard_NC64as_T4_v3", "t4", 4),
];

/// The accelerator and GPU count of a known instance type (names compare without regard to
/// case, as Azure's do).
pub fn lookup(cloud: Cloud, instance_type: &str) -> Option<(Accelerator, u32)> {
    INSTANCE_TYPES
        .iter()
        .find(|s| s.cloud == cloud && s.instance_type.eq_ignore_ascii_case(instance_type))
        .and_then(|s| Accelerator::parse(s.accelerator).ok().map(|a| (a, s.gpus)))
}

/// Every known instance type of `cloud` carrying `accelerator`.
pub fn of_accelerator(
    cloud: Cloud,
    accelerator: Accelerator,
) -> impl Iterator<Item = &'static InstanceSpec> {
    INSTANCE_TYPES
        .iter()
        .filter(move |s| s.cloud == cloud && s.accelerator == accelerator.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_names_a_catalog_accelerator_once() {
        let mut seen = std::collections::HashSet::new();
        for s in INSTANCE_TYPES {
            let acc = Accelerator::parse(s.accelerator).expect("catalog accelerator");
            assert_eq!(
                acc.name(),
                s.accelerator,
                "{} uses an alias",
                s.instance_type
            );
            assert!(s.gpus > 0);
            assert!(
                seen.insert((s.cloud, s.instance_type.to_ascii_lowercase())),
                "{} twice",
                s.instance_type
            );
        }
    }

    #[test]
    fn lookup_ignores_case_and_knows_the_h100_machines() {
        let (acc, gpus) = lookup(Cloud::Azure, "standard_nd96isr_h100_v5").expect("known");
        assert_eq!((acc.name(), gpus), ("h100", 8));
        assert_eq!(
            lookup(Cloud::Aws, "p4de.24xlarge").map(|(a, n)| (a.name(), n)),
            Some(("a100-80gb", 8))
        );
        assert_eq!(lookup(Cloud::Aws, "Standard_ND96isr_H100_v5"), None);
        assert_eq!(
            of_accelerator(Cloud::Gcp, Accelerator::parse("h100").expect("h100")).count(),
            7
        );
    }
}
