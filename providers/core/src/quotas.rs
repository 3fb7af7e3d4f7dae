//! Cloud quotas on GPU capacity: which quota an instance draws on and how much of it one
//! instance uses, the conservative figure gpucap assumes when it cannot read a quota, and the
//! narrow [`QuotaSource`] interface live readers implement (with [`FakeQuotas`] for tests):
//! `gpucap_aws::AwsQuotas`, `gpucap_gcp::GcpQuotas` and `gpucap_azure::AzureQuotas`, which
//! `gpucap plan` uses when it reads prices live.
//!
//! - **AWS**: per account and region, in vCPUs, per instance family: "Running On-Demand P
//!   instances" (`L-417A185B`) and "All P Spot Instance Requests" (`L-7212CCBC`); G and VT:
//!   `L-DB2E81BA` and `L-3819A6DF`
//!   (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html,
//!   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-resource-limits.html). An
//!   instance's vCPUs follow its size (`xlarge` 4, `48xlarge` 192).
//! - **GCP**: per project and region, in GPUs, per GPU type: `NVIDIA_H100_GPUS` and its
//!   preemptible (spot) twin `PREEMPTIBLE_NVIDIA_H100_GPUS`
//!   (https://cloud.google.com/compute/resource-usage#gpu_quota).
//! - **Azure**: per subscription and region, in vCPUs, per VM family
//!   (`standardNCADSH100v5Family`); spot VMs draw on one regional "Total Regional Low-priority
//!   vCPUs" quota (https://learn.microsoft.com/en-us/azure/quotas/per-vm-quota-requests,
//!   https://learn.microsoft.com/en-us/azure/virtual-machines/spot-vms). A size's vCPUs are the
//!   number in its name (`Standard_NC40ads_H100_v5`: 40).
//!
//! On-demand, spot, capacity reservations and commitments (whose instances run as on-demand
//! instances) draw on these quotas; capacity blocks have their own caps
//! ([`crate::purchase_rules`]) and are not counted here.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::provider::BoxFuture;
use crate::{Accelerator, Cloud, ProviderError, PurchaseKind};

/// One quota: a cloud, a region and the quota's name as the cloud spells it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QuotaId {
    pub cloud: Cloud,
    pub region: String,
    pub name: String,
}

impl fmt::Display for QuotaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.cloud, self.region, self.name)
    }
}

impl QuotaId {
    /// Reads `cloud/region/name` (the name may contain anything but the first two slashes).
    pub fn parse(s: &str) -> Result<QuotaId, String> {
        let mut parts = s.splitn(3, '/');
        let (Some(cloud), Some(region), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "`{s}` is not a quota: expected `cloud/region/name`, e.g. `aws/us-east-1/L-417A185B` or `gcp/us-central1/NVIDIA_H100_GPUS`"
            ));
        };
        let cloud: Cloud = cloud.parse()?;
        if region.is_empty() || name.is_empty() {
            return Err(format!(
                "`{s}`: the region and the quota name must not be empty"
            ));
        }
        Ok(QuotaId {
            cloud,
            region: region.to_string(),
            name: name.to_string(),
        })
    }

    /// Whether `other` names the same quota: AWS by code or title, Azure family names
    /// ignoring case.
    pub fn matches(&self, other: &QuotaId) -> bool {
        self.cloud == other.cloud
            && self.region == other.region
            && self.name.eq_ignore_ascii_case(&other.name)
    }
}

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaUnit {
    Vcpus,
    Gpus,
}

impl QuotaUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaUnit::Vcpus => "vCPUs",
            QuotaUnit::Gpus => "GPUs",
        }
    }
}

/// The quota one instance of an offer draws on, and how much of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaDraw {
    /// Keyed by the code where the cloud has one (AWS), else the name.
    pub quota: QuotaId,
    /// The quota's title, for people ("Running On-Demand P instances").
    pub title: String,
    pub unit: QuotaUnit,
    pub per_instance: u32,
    pub spot: bool,
}

/// The quota an instance of `instance_type` bought as `kind` draws on; `None` for capacity
/// blocks, and where gpucap does not know the family (the caller says so).
pub fn draw(
    cloud: Cloud,
    region: &str,
    instance_type: &str,
    accelerator: Accelerator,
    gpus_per_instance: u32,
    kind: PurchaseKind,
) -> Option<QuotaDraw> {
    let spot = match kind {
        PurchaseKind::CapacityBlock => return None,
        PurchaseKind::Spot => true,
        _ => false,
    };
    let id = |name: String| QuotaId {
        cloud,
        region: region.to_string(),
        name,
    };
    match cloud {
        Cloud::Aws => {
            let vcpus = aws_vcpus(instance_type)?;
            let family = aws_family(instance_type)?;
            let (code, title) = match (family, spot) {
                ("P", false) => ("L-417A185B", "Running On-Demand P instances"),
                ("P", true) => ("L-7212CCBC", "All P Spot Instance Requests"),
                ("G", false) => ("L-DB2E81BA", "Running On-Demand G and VT instances"),
                ("G", true) => ("L-3819A6DF", "All G and VT Spot Instance Requests"),
                _ => return None,
            };
            Some(QuotaDraw {
                quota: id(code.to_string()),
                title: title.to_string(),
                unit: QuotaUnit::Vcpus,
                per_instance: vcpus,
                spot,
            })
        }
        Cloud::Gcp => {
            let gpu = gcp_gpu_name(accelerator)?;
            let name = if spot {
                format!("PREEMPTIBLE_NVIDIA_{gpu}_GPUS")
            } else {
                format!("NVIDIA_{gpu}_GPUS")
            };
            Some(QuotaDraw {
                quota: id(name.clone()),
                title: name,
                unit: QuotaUnit::Gpus,
                per_instance: gpus_per_instance,
                spot,
            })
        }
        Cloud::Azure => {
            let vcpus = azure_vcpus(instance_type)?;
            let name = if spot {
                "lowPriorityCores".to_string()
            } else {
                azure_family(instance_type)?
            };
            Some(QuotaDraw {
                title: if spot {
                    "Total Regional Low-priority vCPUs".to_string()
                } else {
                    name.clone()
                },
                quota: id(name),
                unit: QuotaUnit::Vcpus,
                per_instance: vcpus,
                spot,
            })
        }
    }
}

/// vCPUs of an AWS size: `xlarge` 4, `Nxlarge` 4·N (`p5.48xlarge` 192, `p4d.24xlarge` 96).
fn aws_vcpus(instance_type: &str) -> Option<u32> {
    let size = instance_type.split('.').nth(1)?;
    match size {
        "xlarge" => Some(4),
        "large" => Some(2),
        s => s.strip_suffix("xlarge")?.parse::<u32>().ok().map(|n| n * 4),
    }
}

/// The quota family of an AWS type: `P` (p3, p4d, p5, p5e, p5en, p6), `G` (g4dn, g5, g6, …).
fn aws_family(instance_type: &str) -> Option<&'static str> {
    let family = instance_type.split('.').next()?;
    let letters: String = family
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    match letters.as_str() {
        "p" => Some("P"),
        "g" | "vt" => Some("G"),
        _ => None,
    }
}

/// The GPU part of a GCP quota name.
fn gcp_gpu_name(accelerator: Accelerator) -> Option<&'static str> {
    Some(match accelerator.name() {
        "h100" => "H100",
        "h200" => "H200",
        "b200" => "B200",
        "a100-80gb" => "A100_80GB",
        "a100" => "A100",
        "l4" => "L4",
        "t4" => "T4",
        "v100" => "V100",
        _ => return None,
    })
}

/// vCPUs of an Azure size: the number after the family letters (`Standard_ND96isr_H100_v5`).
fn azure_vcpus(instance_type: &str) -> Option<u32> {
    let size = instance_type.strip_prefix("Standard_")?;
    let digits: String = size
        .chars()
        .skip_while(|c| c.is_ascii_alphabetic())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The vCPU quota family of an Azure size, as its usage API names it:
/// `Standard_NC40ads_H100_v5` → `standardNCADSH100v5Family`.
fn azure_family(instance_type: &str) -> Option<String> {
    let size = instance_type.strip_prefix("Standard_")?;
    let mut parts = size.split('_');
    let head = parts.next()?;
    let series: String = head
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let features: String = head
        .chars()
        .skip_while(|c| c.is_ascii_alphabetic())
        .skip_while(char::is_ascii_digit)
        .collect();
    let rest: String = parts.collect::<Vec<_>>().concat();
    Some(format!(
        "standard{}{}{}Family",
        series.to_ascii_uppercase(),
        features.to_ascii_uppercase(),
        rest
    ))
}

/// What gpucap assumes for a quota it cannot read and the config does not set, and why.
///
/// Not a cloud's figure: new accounts start at 0 for GPU families (AWS lists 0 as the default
/// for P and G spot requests; GCP and Azure grant GPU quota on request), and what an account
/// holds after that is granted case by case. gpucap assumes a modest grant — eight 8-GPU
/// instances' worth on demand and four spot, per region — so that a plan made without reading
/// the quotas does not count on more than a small account would have; set `[quotas]` to your
/// own figures, or let `gpucap plan` read them live.
pub fn offline_default(draw: &QuotaDraw) -> u64 {
    let instances: u64 = if draw.spot { 4 } else { 8 };
    match draw.unit {
        // 8 × the largest 8-GPU size (192 vCPUs on AWS; 96 on Azure's ND series).
        QuotaUnit::Vcpus if draw.quota.cloud == Cloud::Azure => instances * 96,
        QuotaUnit::Vcpus => instances * 192,
        QuotaUnit::Gpus => instances * 8,
    }
}

/// The sentence the plan states about [`offline_default`].
pub const OFFLINE_DEFAULT_NOTE: &str = "quotas not read from the cloud and not set in `[quotas]` are assumed to be a modest grant per region: AWS 1,536 vCPUs on demand and 768 spot per family, GCP 64 GPUs and 32 preemptible per GPU type, Azure 768 vCPUs per VM family and 384 spot (gpucap's assumption, not a cloud figure: new accounts start at 0)";

/// How long a quota increase takes to be granted, hours: not documented by any of the
/// clouds (requests are reviewed case by case). gpucap assumes five days so that a plan asks
/// early enough; the request names its deadline.
pub const INCREASE_LEAD_HOURS: u32 = 5 * 24;

/// Reads quotas where credentials allow. One implementation per cloud, behind the provider's
/// feature flag.
pub trait QuotaSource: Send + Sync {
    fn cloud(&self) -> Cloud;
    /// The quota's current value in its unit, `Ok(None)` when the cloud does not know it.
    fn quota<'a>(&'a self, id: &'a QuotaId) -> BoxFuture<'a, Result<Option<u64>, ProviderError>>;
}

/// A quota source with settable values that records what it was asked, for tests.
#[derive(Debug, Default)]
pub struct FakeQuotas {
    pub cloud: Option<Cloud>,
    pub values: BTreeMap<QuotaId, u64>,
    pub asked: Mutex<Vec<QuotaId>>,
}

impl QuotaSource for FakeQuotas {
    fn cloud(&self) -> Cloud {
        self.cloud.unwrap_or(Cloud::Aws)
    }
    fn quota<'a>(&'a self, id: &'a QuotaId) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        self.asked
            .lock()
            .expect("fake quotas lock")
            .push(id.clone());
        let value = self
            .values
            .iter()
            .find(|(k, _)| k.matches(id))
            .map(|(_, v)| *v);
        Box::pin(async move { Ok(value) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Accelerator {
        Accelerator::parse("h100").unwrap()
    }

    #[test]
    fn aws_p_instances_draw_vcpus_on_the_p_quota_and_its_spot_twin() {
        let d = draw(
            Cloud::Aws,
            "us-east-1",
            "p5.48xlarge",
            h100(),
            8,
            PurchaseKind::OnDemand,
        )
        .unwrap();
        assert_eq!((d.quota.name.as_str(), d.per_instance), ("L-417A185B", 192));
        assert_eq!(d.unit, QuotaUnit::Vcpus);
        let s = draw(
            Cloud::Aws,
            "us-east-1",
            "p5.48xlarge",
            h100(),
            8,
            PurchaseKind::Spot,
        )
        .unwrap();
        assert_eq!(s.quota.name, "L-7212CCBC");
        let r = draw(
            Cloud::Aws,
            "us-east-1",
            "p4d.24xlarge",
            h100(),
            8,
            PurchaseKind::Reservation,
        )
        .unwrap();
        assert_eq!((r.quota.name.as_str(), r.per_instance), ("L-417A185B", 96));
        let g = draw(
            Cloud::Aws,
            "us-east-1",
            "g6.xlarge",
            h100(),
            1,
            PurchaseKind::OnDemand,
        )
        .unwrap();
        assert_eq!((g.quota.name.as_str(), g.per_instance), ("L-DB2E81BA", 4));
        assert!(
            draw(
                Cloud::Aws,
                "us-east-1",
                "p5.48xlarge",
                h100(),
                8,
                PurchaseKind::CapacityBlock
            )
            .is_none()
        );
    }

    #[test]
    fn gcp_counts_gpus_per_type_and_azure_vcpus_per_family() {
        let d = draw(
            Cloud::Gcp,
            "us-central1",
            "a3-highgpu-8g",
            h100(),
            8,
            PurchaseKind::Spot,
        )
        .unwrap();
        assert_eq!(
            (d.quota.name.as_str(), d.per_instance, d.unit),
            ("PREEMPTIBLE_NVIDIA_H100_GPUS", 8, QuotaUnit::Gpus)
        );
        let a = draw(
            Cloud::Azure,
            "eastus",
            "Standard_NC40ads_H100_v5",
            h100(),
            1,
            PurchaseKind::OnDemand,
        )
        .unwrap();
        assert_eq!(
            (a.quota.name.as_str(), a.per_instance),
            ("standardNCADSH100v5Family", 40)
        );
        let n = draw(
            Cloud::Azure,
            "eastus",
            "Standard_ND96isr_H100_v5",
            h100(),
            8,
            PurchaseKind::OnDemand,
        )
        .unwrap();
        assert_eq!(
            (n.quota.name.as_str(), n.per_instance),
            ("standardNDISRH100v5Family", 96)
        );
    }

    #[test]
    fn quota_ids_parse_and_match_ignoring_case() {
        let id = QuotaId::parse("azure/eastus/StandardNCADSH100v5Family").unwrap();
        assert!(id.matches(&QuotaId::parse("azure/eastus/standardNCadsH100v5Family").unwrap()));
        assert!(QuotaId::parse("aws/us-east-1").is_err());
        assert!(QuotaId::parse("nope/us-east-1/x").is_err());
        assert_eq!(id.to_string(), "azure/eastus/StandardNCADSH100v5Family");
    }

    #[test]
    fn the_fake_answers_what_it_was_given_and_records_the_question() {
        let id = QuotaId::parse("aws/us-east-1/L-417A185B").unwrap();
        let fake = FakeQuotas {
            values: [(id.clone(), 3072)].into(),
            ..Default::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(fake.quota(&id)).unwrap(), Some(3072));
        let other = QuotaId::parse("aws/us-west-2/L-417A185B").unwrap();
        assert_eq!(rt.block_on(fake.quota(&other)).unwrap(), None);
        assert_eq!(fake.asked.lock().unwrap().len(), 2);
    }
}
