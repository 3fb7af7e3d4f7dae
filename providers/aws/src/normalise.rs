//! Turning AWS prices into gpucap offers: joins each price with its instance type's GPU facts
//! (refusing rows whose GPU count contradicts them) and stamps it with its provenance.

use chrono::{DateTime, Utc};
use gpucap_provider::{Cloud, Offer, PurchaseKind, Source, SourceKind};
use rust_decimal::Decimal;

use crate::anomaly::AnomalyReason;
use crate::capacity_blocks::CapacityBlock;
use crate::instance_types::GpuSpec;
use crate::price_list::{ListPrice, Term};
use crate::spot::SpotPrice;

/// When the prices were fetched.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub fetched_at: DateTime<Utc>,
}

impl Provenance {
    fn source(&self, origin: String) -> Source {
        Source {
            kind: SourceKind::Live,
            origin,
            fetched_at: self.fetched_at,
        }
    }
}

fn base(
    region: &str,
    instance_type: &str,
    spec: &GpuSpec,
    kind: PurchaseKind,
    source: Source,
) -> Offer {
    Offer {
        cloud: Cloud::Aws,
        region: region.to_string(),
        zone: None,
        instance_type: instance_type.to_string(),
        accelerator: spec.accelerator,
        gpus_per_instance: spec.count,
        gpu_memory_gb: spec.memory_gb.or(Some(spec.accelerator.spec().memory_gb)),
        kind,
        price_per_instance_hour: Decimal::ZERO,
        upfront: Decimal::ZERO,
        term_hours: None,
        earliest_start: None,
        lead_time_hours: None,
        max_instances: None,
        offering_id: None,
        source,
    }
}

/// An on-demand or reserved list price. Reserved instances are commitments: the hourly part is
/// paid for every hour of the term, the upfront part once.
pub fn list_price(
    region: &str,
    price: &ListPrice,
    spec: &GpuSpec,
    at: &Provenance,
) -> Result<Offer, AnomalyReason> {
    if let Some(listed) = price.listed_gpus
        && listed != spec.count
    {
        return Err(AnomalyReason::GpuCountMismatch {
            listed,
            instance_type_has: spec.count,
        });
    }
    let source = at.source(format!("aws pricing GetProducts sku {}", price.sku));
    let offer = match &price.term {
        Term::OnDemand => Offer {
            price_per_instance_hour: price.hourly,
            ..base(
                region,
                &price.instance_type,
                spec,
                PurchaseKind::OnDemand,
                source,
            )
        },
        Term::Reserved(t) => Offer {
            price_per_instance_hour: price.hourly,
            upfront: price.upfront,
            term_hours: Some(t.hours),
            offering_id: Some(format!(
                "{} ({} {} {}yr)",
                price.term_id,
                t.purchase_option,
                t.offering_class,
                t.hours / 8760
            )),
            ..base(
                region,
                &price.instance_type,
                spec,
                PurchaseKind::Commitment,
                source,
            )
        },
    };
    Ok(offer)
}

/// A spot pool's current price, zonal.
pub fn spot(region: &str, price: &SpotPrice, spec: &GpuSpec, at: &Provenance) -> Offer {
    let source = at.source(format!(
        "aws ec2 DescribeSpotPriceHistory (price since {})",
        price.since.to_rfc3339()
    ));
    Offer {
        zone: Some(price.availability_zone.clone()),
        price_per_instance_hour: price.price,
        ..base(
            region,
            &price.instance_type,
            spec,
            PurchaseKind::Spot,
            source,
        )
    }
}

/// A capacity block offering. Its fee is the whole price: the offer carries it as upfront per
/// instance over the block's hours with no hourly part, so the effective price per GPU-hour is
/// fee / (instances × hours × GPUs); the lead time is the wait until the block starts.
pub fn capacity_block(region: &str, cb: &CapacityBlock, spec: &GpuSpec, at: &Provenance) -> Offer {
    let lead = (cb.start - at.fetched_at).num_hours().max(0);
    Offer {
        zone: Some(cb.availability_zone.clone()),
        price_per_instance_hour: Decimal::ZERO,
        upfront: cb.upfront_per_instance(),
        term_hours: Some(cb.duration_hours),
        earliest_start: Some(cb.start),
        lead_time_hours: u32::try_from(lead).ok(),
        max_instances: Some(cb.instance_count),
        offering_id: Some(cb.offering_id.clone()),
        ..base(
            region,
            &cb.instance_type,
            spec,
            PurchaseKind::CapacityBlock,
            at.source("aws ec2 DescribeCapacityBlockOfferings".into()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::price_list::ReservedTerm;
    use gpucap_provider::Accelerator;

    fn h100x8() -> GpuSpec {
        GpuSpec {
            accelerator: Accelerator::parse("h100").unwrap(),
            count: 8,
            memory_gb: Some(80),
        }
    }

    fn at() -> Provenance {
        Provenance {
            fetched_at: "2025-06-01T12:00:00Z".parse().unwrap(),
        }
    }

    fn price(term: Term, listed: Option<u32>) -> ListPrice {
        ListPrice {
            sku: "SKU1".into(),
            region: "us-east-1".into(),
            instance_type: "p5.48xlarge".into(),
            listed_gpus: listed,
            term,
            hourly: "17.12".parse().unwrap(),
            upfront: "150000".parse().unwrap(),
            term_id: "SKU1.BBBB".into(),
        }
    }

    #[test]
    fn reserved_terms_become_commitments_with_the_same_effective_price() {
        let term = Term::Reserved(ReservedTerm {
            hours: 8760,
            purchase_option: "Partial Upfront".into(),
            offering_class: "standard".into(),
        });
        let p = price(term, Some(8));
        let o = list_price("us-east-1", &p, &h100x8(), &at()).unwrap();
        assert_eq!(o.kind, PurchaseKind::Commitment);
        assert_eq!(
            o.effective_price_per_gpu_hour() * Decimal::from(8),
            p.effective_hourly()
        );
    }

    #[test]
    fn contradicting_gpu_count_is_refused() {
        let err = list_price(
            "us-east-1",
            &price(Term::OnDemand, Some(4)),
            &h100x8(),
            &at(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            AnomalyReason::GpuCountMismatch {
                listed: 4,
                instance_type_has: 8
            }
        );
    }

    #[test]
    fn capacity_block_effective_price_is_fee_over_instance_hours() {
        let cb = CapacityBlock {
            offering_id: "cb-1".into(),
            instance_type: "p5.48xlarge".into(),
            availability_zone: "us-east-2a".into(),
            instance_count: 4,
            start: "2025-07-01T11:30:00Z".parse().unwrap(),
            duration_hours: 168,
            upfront_fee: "25000".parse().unwrap(),
        };
        let o = capacity_block("us-east-2", &cb, &h100x8(), &at());
        assert_eq!(
            o.effective_price_per_gpu_hour() * Decimal::from(8),
            cb.price_per_instance_hour()
        );
        assert_eq!(o.lead_time_hours, Some(719));
        assert_eq!(o.offering_id.as_deref(), Some("cb-1"));
    }
}
