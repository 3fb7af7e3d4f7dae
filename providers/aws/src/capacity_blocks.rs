//! Capacity Blocks for ML from EC2 `DescribeCapacityBlockOfferings`: a fixed window of
//! instances bought for one upfront fee. The fee is the whole price, so the per instance-hour
//! price is fee / (instances × hours), and the offering id is kept for the purchase.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::anomaly::AnomalyReason;
use crate::money;

/// One `<item>` of `capacityBlockOfferingSet`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OfferingRow {
    pub offering_id: Option<String>,
    pub instance_type: Option<String>,
    pub availability_zone: Option<String>,
    pub instance_count: Option<i32>,
    pub start_date: Option<DateTime<Utc>>,
    pub end_date: Option<DateTime<Utc>>,
    pub duration_hours: Option<i32>,
    pub upfront_fee: Option<String>,
    pub currency_code: Option<String>,
}

/// A capacity block offering that can be priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityBlock {
    pub offering_id: String,
    pub instance_type: String,
    pub availability_zone: String,
    pub instance_count: u32,
    pub start: DateTime<Utc>,
    pub duration_hours: u32,
    /// USD for the whole block.
    pub upfront_fee: Decimal,
}

impl CapacityBlock {
    /// USD per instance-hour, the fee spread over every instance and hour of the block.
    pub fn price_per_instance_hour(&self) -> Decimal {
        self.upfront_fee / Decimal::from(self.instance_count) / Decimal::from(self.duration_hours)
    }

    /// USD paid once per instance.
    pub fn upfront_per_instance(&self) -> Decimal {
        self.upfront_fee / Decimal::from(self.instance_count)
    }
}

/// Checks and types one offering.
pub fn parse(row: &OfferingRow) -> Result<CapacityBlock, AnomalyReason> {
    let missing = |field: &str| AnomalyReason::Malformed {
        detail: format!("capacity block offering without {field}"),
    };
    let currency = row.currency_code.as_deref().unwrap_or("USD");
    if currency != "USD" {
        return Err(AnomalyReason::UnknownUnit {
            unit: currency.to_string(),
        });
    }
    let positive = |v: Option<i32>, field: &str| {
        v.and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| missing(field))
    };
    let start = row.start_date.ok_or_else(|| missing("startDate"))?;
    let duration_hours = match (row.duration_hours, row.end_date) {
        (Some(h), _) => positive(Some(h), "capacityBlockDurationHours")?,
        (None, Some(end)) => positive(
            i32::try_from((end - start).num_hours()).ok(),
            "a positive duration",
        )?,
        (None, None) => return Err(missing("capacityBlockDurationHours")),
    };
    Ok(CapacityBlock {
        offering_id: row
            .offering_id
            .clone()
            .ok_or_else(|| missing("capacityBlockOfferingId"))?,
        instance_type: row
            .instance_type
            .clone()
            .ok_or_else(|| missing("instanceType"))?,
        availability_zone: row
            .availability_zone
            .clone()
            .ok_or_else(|| missing("availabilityZone"))?,
        instance_count: positive(row.instance_count, "instanceCount")?,
        start,
        duration_hours,
        upfront_fee: money::positive(
            row.upfront_fee
                .as_deref()
                .ok_or_else(|| missing("upfrontFee"))?,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> OfferingRow {
        OfferingRow {
            offering_id: Some("cb-0123456789abcdef0".into()),
            instance_type: Some("p5.48xlarge".into()),
            availability_zone: Some("us-east-2a".into()),
            instance_count: Some(4),
            start_date: Some("2025-07-01T11:30:00Z".parse().unwrap()),
            end_date: Some("2025-07-08T11:30:00Z".parse().unwrap()),
            duration_hours: Some(168),
            upfront_fee: Some("25000.00".into()),
            currency_code: Some("USD".into()),
        }
    }

    #[test]
    fn fee_is_spread_over_instances_and_hours() {
        let cb = parse(&row()).unwrap();
        // 25000 / (4 × 168) = 37.2023809…
        assert_eq!(
            cb.price_per_instance_hour().round_dp(4).to_string(),
            "37.2024"
        );
        assert_eq!(cb.upfront_per_instance().to_string(), "6250");
    }

    #[test]
    fn duration_falls_back_to_the_window() {
        let cb = parse(&OfferingRow {
            duration_hours: None,
            ..row()
        })
        .unwrap();
        assert_eq!(cb.duration_hours, 168);
    }

    #[test]
    fn bad_offerings_are_classified() {
        assert!(matches!(
            parse(&OfferingRow {
                upfront_fee: Some("0".into()),
                ..row()
            }),
            Err(AnomalyReason::BadPrice { .. })
        ));
        assert!(matches!(
            parse(&OfferingRow {
                currency_code: Some("EUR".into()),
                ..row()
            }),
            Err(AnomalyReason::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse(&OfferingRow {
                instance_count: Some(0),
                ..row()
            }),
            Err(AnomalyReason::Malformed { .. })
        ));
    }
}
