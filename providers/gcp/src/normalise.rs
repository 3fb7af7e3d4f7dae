//! Turning component prices into gpucap offers: an accelerator-optimised machine costs
//! vCPUs × core price + GiB × RAM price + GPUs × GPU price, per zone where Compute Engine
//! offers both the machine type and its GPU, for each way of buying it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use gpucap_provider::{Accelerator, Cloud, Offer, PurchaseKind, Source, SourceKind};
use rust_decimal::Decimal;

use crate::anomaly::AnomalyReason;
use crate::machines::{MachineShape, region_of};
use crate::sku::{Component, ComponentPrice, Usage};

/// Hours in GCP's 1- and 3-year commitment terms (365-day years).
const HOURS_1YR: u32 = 8760;
const HOURS_3YR: u32 = 26280;

/// Component prices indexed for lookup: (component, usage, region) → price and SKU.
#[derive(Debug, Default)]
pub struct PriceBook {
    prices: HashMap<(Component, Usage, String), (Decimal, String)>,
}

impl PriceBook {
    /// Indexes prices. When two SKUs price the same thing the higher is kept: a lower
    /// duplicate is more likely a promotion or a mis-tagged variant than the list price.
    pub fn new(prices: impl IntoIterator<Item = ComponentPrice>) -> Self {
        let mut book = PriceBook::default();
        for p in prices {
            let key = (p.component, p.usage, p.region);
            match book.prices.get(&key) {
                Some((old, _)) if *old >= p.price => {}
                _ => {
                    book.prices.insert(key, (p.price, p.sku_id));
                }
            }
        }
        book
    }

    fn get(&self, c: Component, u: Usage, region: &str) -> Option<&(Decimal, String)> {
        self.prices.get(&(c, u, region.to_string()))
    }
}

/// One machine type in one zone, bought one way, priced. Errors say which component price is
/// missing; `Ok(None)` when nothing prices this usage at all in the region (e.g. no
/// commitment SKUs for G2 there), which is not a surprise.
pub fn machine_offer(
    shape: &MachineShape,
    series: &'static str,
    gpu_type: &'static str,
    usage: Usage,
    book: &PriceBook,
    fetched_at: DateTime<Utc>,
) -> Result<Option<Offer>, AnomalyReason> {
    let region = region_of(&shape.zone);
    let parts = [
        Component::Core(series),
        Component::Ram(series),
        Component::Gpu(gpu_type),
    ];
    let found: Vec<Option<&(Decimal, String)>> =
        parts.iter().map(|&c| book.get(c, usage, region)).collect();
    if found.iter().all(Option::is_none) {
        return Ok(None);
    }
    let [Some(core), Some(ram), Some(gpu)] = found[..] else {
        let missing: Vec<String> = parts
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(c, _)| format!("{c:?}"))
            .collect();
        return Err(AnomalyReason::MissingComponent {
            detail: format!("{usage:?} {} in {region}", missing.join(", ")),
        });
    };
    let memory_gib = Decimal::from(shape.memory_mib) / Decimal::from(1024);
    let hourly = Decimal::from(shape.vcpus) * core.0
        + memory_gib * ram.0
        + Decimal::from(shape.gpus) * gpu.0;
    let accelerator = Accelerator::parse(gpu_type).map_err(|e| AnomalyReason::Malformed {
        detail: e.to_string(),
    })?;
    let (kind, term_hours) = match usage {
        Usage::OnDemand => (PurchaseKind::OnDemand, None),
        Usage::Spot => (PurchaseKind::Spot, None),
        Usage::Commit1Yr => (PurchaseKind::Commitment, Some(HOURS_1YR)),
        Usage::Commit3Yr => (PurchaseKind::Commitment, Some(HOURS_3YR)),
    };
    Ok(Some(Offer {
        cloud: Cloud::Gcp,
        region: region.to_string(),
        zone: Some(shape.zone.clone()),
        instance_type: shape.name.clone(),
        accelerator,
        gpus_per_instance: shape.gpus,
        gpu_memory_gb: Some(accelerator.spec().memory_gb),
        kind,
        price_per_instance_hour: hourly.round_dp(10).normalize(),
        upfront: Decimal::ZERO,
        term_hours,
        earliest_start: None,
        lead_time_hours: None,
        max_instances: None,
        offering_id: Some(format!("skus {}+{}+{}", core.1, ram.1, gpu.1)),
        source: Source {
            kind: SourceKind::Live,
            origin: "gcp cloudbilling services/6F81-5844-456A/skus + compute machineTypes".into(),
            fetched_at,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(component: Component, usage: Usage, p: &str) -> ComponentPrice {
        ComponentPrice {
            component,
            usage,
            region: "us-central1".into(),
            price: p.parse().unwrap(),
            sku_id: "S".into(),
        }
    }

    fn a2() -> MachineShape {
        MachineShape {
            name: "a2-highgpu-1g".into(),
            zone: "us-central1-a".into(),
            vcpus: 12,
            memory_mib: 87040,
            accelerator_type: "nvidia-tesla-a100".into(),
            gpus: 1,
        }
    }

    #[test]
    fn machine_price_is_the_sum_of_its_components() {
        let book = PriceBook::new([
            price(Component::Core("a2"), Usage::OnDemand, "0.031611"),
            price(Component::Ram("a2"), Usage::OnDemand, "0.004237"),
            price(
                Component::Gpu("nvidia-tesla-a100"),
                Usage::OnDemand,
                "2.933908",
            ),
        ]);
        let o = machine_offer(
            &a2(),
            "a2",
            "nvidia-tesla-a100",
            Usage::OnDemand,
            &book,
            Utc::now(),
        )
        .unwrap()
        .unwrap();
        // 12 × 0.031611 + 85 GiB × 0.004237 + 1 × 2.933908 = 3.673385
        assert_eq!(o.price_per_instance_hour.to_string(), "3.673385");
        assert_eq!(o.accelerator.name(), "a100");
        assert_eq!(o.region, "us-central1");
    }

    #[test]
    fn a_missing_component_is_reported_and_an_absent_usage_is_not() {
        let book = PriceBook::new([price(
            Component::Gpu("nvidia-tesla-a100"),
            Usage::Spot,
            "1.0",
        )]);
        assert!(matches!(
            machine_offer(
                &a2(),
                "a2",
                "nvidia-tesla-a100",
                Usage::Spot,
                &book,
                Utc::now()
            ),
            Err(AnomalyReason::MissingComponent { .. })
        ));
        assert_eq!(
            machine_offer(
                &a2(),
                "a2",
                "nvidia-tesla-a100",
                Usage::Commit3Yr,
                &book,
                Utc::now()
            )
            .unwrap(),
            None
        );
    }
}
