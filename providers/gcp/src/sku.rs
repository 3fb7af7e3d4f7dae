//! Cloud Billing Catalog SKUs (`services/6F81-5844-456A/skus`) read into component prices:
//! a GPU, or a vCPU or GiB of RAM of an accelerator-optimised machine series, for one usage
//! type (on-demand, spot, 1- or 3-year commitment) in one region. Prices are `units +
//! nanos / 1e9` as exact decimals.

use rust_decimal::Decimal;

use crate::anomaly::AnomalyReason;
use crate::names;

/// One SKU as the catalog lists it, reduced to what pricing needs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SkuRow {
    pub sku_id: String,
    pub description: String,
    pub resource_family: String,
    pub resource_group: String,
    pub usage_type: String,
    pub service_regions: Vec<String>,
    pub usage_unit: String,
    pub currency_code: String,
    /// Tiers as (start usage amount, units, nanos).
    pub tiers: Vec<(f64, i64, i32)>,
}

/// What a component price is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// One GPU of this accelerator type (`nvidia-h100-80gb`), per hour.
    Gpu(&'static str),
    /// One vCPU of this series (`a3-highgpu`), per hour.
    Core(&'static str),
    /// One GiB of RAM of this series, per hour.
    Ram(&'static str),
}

/// How the component is bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Usage {
    OnDemand,
    Spot,
    Commit1Yr,
    Commit3Yr,
}

/// One priced component in one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentPrice {
    pub component: Component,
    pub usage: Usage,
    pub region: String,
    /// USD per unit-hour.
    pub price: Decimal,
    pub sku_id: String,
}

/// Reads one SKU. `Ok(vec![])` for SKUs that are not about GPU capacity (storage, N1 cores,
/// sole tenancy, …); an error for a GPU-capacity SKU that cannot be priced.
pub fn classify(row: &SkuRow) -> Result<Vec<ComponentPrice>, AnomalyReason> {
    if row.resource_family != "Compute"
        || names::EXCLUDED_WORDS
            .iter()
            .any(|w| row.description.contains(w))
    {
        return Ok(Vec::new());
    }
    let Some(component) = component(&row.description) else {
        return Ok(Vec::new());
    };
    let usage = match row.usage_type.as_str() {
        "OnDemand" => Usage::OnDemand,
        "Preemptible" => Usage::Spot,
        "Commit1Yr" => Usage::Commit1Yr,
        "Commit3Yr" => Usage::Commit3Yr,
        other => {
            return Err(AnomalyReason::UnknownUnit {
                unit: format!("usage type {other}"),
            });
        }
    };
    let expected_unit = match component {
        Component::Gpu(_) | Component::Core(_) => "h",
        Component::Ram(_) => "GiBy.h",
    };
    if row.usage_unit != expected_unit {
        return Err(AnomalyReason::UnknownUnit {
            unit: row.usage_unit.clone(),
        });
    }
    if row.currency_code != "USD" {
        return Err(AnomalyReason::UnknownUnit {
            unit: row.currency_code.clone(),
        });
    }
    let price = first_tier(&row.tiers)?;
    if row.service_regions.is_empty() {
        return Err(AnomalyReason::Malformed {
            detail: "SKU without serviceRegions".into(),
        });
    }
    Ok(row
        .service_regions
        .iter()
        .map(|region| ComponentPrice {
            component,
            usage,
            region: region.clone(),
            price,
            sku_id: row.sku_id.clone(),
        })
        .collect())
}

/// The price of the tier that starts at zero usage, which must be positive.
fn first_tier(tiers: &[(f64, i64, i32)]) -> Result<Decimal, AnomalyReason> {
    let &(_, units, nanos) = tiers
        .iter()
        .find(|(start, _, _)| *start == 0.0)
        .ok_or_else(|| AnomalyReason::Malformed {
            detail: "no tier starting at 0".into(),
        })?;
    money(units, nanos)
}

/// `units + nanos / 1e9`, which Google requires to have the same sign; must be positive.
pub fn money(units: i64, nanos: i32) -> Result<Decimal, AnomalyReason> {
    let bad = || AnomalyReason::BadPrice {
        value: format!("units {units}, nanos {nanos}"),
    };
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(bad());
    }
    let price = Decimal::from(units) + Decimal::new(i64::from(nanos), 9);
    if price <= Decimal::ZERO {
        return Err(bad());
    }
    Ok(price.normalize())
}

/// What a description prices, after the `Spot Preemptible ` / `Commitment v1: ` prefixes:
/// `[Nvidia ]<model> GPU …`, or `<series> Instance Core|Ram …` (on-demand and spot) /
/// `<series> Cpu|Ram …` (commitments).
fn component(description: &str) -> Option<Component> {
    let d = description.trim();
    let d = d.strip_prefix("Spot Preemptible ").unwrap_or(d);
    let d = d.strip_prefix("Commitment v1: ").unwrap_or(d);
    let d = d.strip_prefix("Preemptible ").unwrap_or(d);
    if let Some(i) = d.find(" GPU") {
        let model = d[..i].strip_prefix("Nvidia ").unwrap_or(&d[..i]);
        return names::accelerator_type(model).map(Component::Gpu);
    }
    type Make = fn(&'static str) -> Component;
    const MARKERS: &[(&str, Make)] = &[
        (" Instance Core", Component::Core),
        (" Instance Ram", Component::Ram),
        (" Cpu", Component::Core),
        (" Ram", Component::Ram),
    ];
    MARKERS.iter().find_map(|(marker, make)| {
        d.find(marker)
            .and_then(|i| names::series(&d[..i]))
            .map(make)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(description: &str, usage_type: &str, unit: &str, units: i64, nanos: i32) -> SkuRow {
        SkuRow {
            sku_id: "AAAA-BBBB-CCCC".into(),
            description: description.into(),
            resource_family: "Compute".into(),
            resource_group: "GPU".into(),
            usage_type: usage_type.into(),
            service_regions: vec!["us-central1".into(), "us-east1".into()],
            usage_unit: unit.into(),
            currency_code: "USD".into(),
            tiers: vec![(0.0, units, nanos)],
        }
    }

    #[test]
    fn gpu_core_and_ram_skus_are_classified() {
        let gpu = classify(&row(
            "Nvidia Tesla A100 GPU running in Americas",
            "OnDemand",
            "h",
            2,
            933_908_000,
        ))
        .unwrap();
        assert_eq!(gpu.len(), 2);
        assert_eq!(gpu[0].component, Component::Gpu("nvidia-tesla-a100"));
        assert_eq!(gpu[0].price.to_string(), "2.933908");
        let spot = classify(&row(
            "Spot Preemptible Nvidia H100 80GB Plus GPU running in Americas",
            "Preemptible",
            "h",
            1,
            0,
        ))
        .unwrap();
        assert_eq!(
            (spot[0].component, spot[0].usage),
            (Component::Gpu("nvidia-h100-mega-80gb"), Usage::Spot)
        );
        let core = classify(&row(
            "A3Plus Instance Core running in Americas",
            "Commit1Yr",
            "h",
            0,
            21_000_000,
        ))
        .unwrap();
        assert_eq!(
            (core[0].component, core[0].usage),
            (Component::Core("a3-megagpu"), Usage::Commit1Yr)
        );
        let ram = classify(&row(
            "Commitment v1: G2 Instance Ram running in Americas",
            "Commit3Yr",
            "GiBy.h",
            0,
            1_000_000,
        ))
        .unwrap();
        assert_eq!(ram[0].component, Component::Ram("g2"));
    }

    #[test]
    fn variants_and_unrelated_skus_are_skipped() {
        for d in [
            "Nvidia Tesla A100 GPU Sole Tenancy running in Americas",
            "Reserved A2 Instance Core running in Americas",
            "DWS Calendar Mode Nvidia H100 80GB GPU running in Americas",
            "N1 Predefined Instance Core running in Americas",
            "Nvidia Tesla K80 GPU running in Americas",
        ] {
            assert_eq!(
                classify(&row(d, "OnDemand", "h", 1, 0)).unwrap(),
                vec![],
                "{d}"
            );
        }
    }

    #[test]
    fn bad_prices_and_units_are_refused() {
        let d = "Nvidia L4 GPU running in Americas";
        assert!(matches!(
            classify(&row(d, "OnDemand", "h", 0, 0)),
            Err(AnomalyReason::BadPrice { .. })
        ));
        assert!(matches!(
            classify(&row(d, "OnDemand", "h", 0, 1_000_000_000)),
            Err(AnomalyReason::BadPrice { .. })
        ));
        assert!(matches!(
            classify(&row(d, "OnDemand", "mo", 1, 0)),
            Err(AnomalyReason::UnknownUnit { .. })
        ));
        let ram_hourly = "A2 Instance Ram running in Americas";
        assert!(matches!(
            classify(&row(ram_hourly, "OnDemand", "h", 1, 0)),
            Err(AnomalyReason::UnknownUnit { .. })
        ));
    }
}
