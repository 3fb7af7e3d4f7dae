//! Spot prices from EC2 `DescribeSpotPriceHistory`: the history is a list of change events per
//! (availability zone, instance type, product), so the current price of each pool is its latest
//! event. Reduced here, apart from the paging that fetches the events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::anomaly::AnomalyReason;
use crate::money;

/// One `<item>` of `spotPriceHistorySet`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotPricePoint {
    pub availability_zone: String,
    pub instance_type: String,
    pub product_description: String,
    pub spot_price: String,
    pub timestamp: Option<DateTime<Utc>>,
}

/// The current spot price of one (zone, instance type) pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotPrice {
    pub availability_zone: String,
    pub instance_type: String,
    pub price: Decimal,
    pub since: DateTime<Utc>,
}

/// Latest price per (zone, instance type); events that cannot be used come back as refusals
/// keyed by instance type. A refused latest event hides no older one: the pool is then
/// reported, not priced from stale data.
pub fn latest(points: &[SpotPricePoint]) -> (Vec<SpotPrice>, Vec<(String, AnomalyReason)>) {
    let mut newest: BTreeMap<(&str, &str), &SpotPricePoint> = BTreeMap::new();
    let mut refused = Vec::new();
    for p in points {
        if p.timestamp.is_none() {
            refused.push((
                p.instance_type.clone(),
                AnomalyReason::Malformed {
                    detail: "spot price without timestamp".into(),
                },
            ));
            continue;
        }
        let key = (p.availability_zone.as_str(), p.instance_type.as_str());
        match newest.get(&key) {
            Some(seen) if seen.timestamp >= p.timestamp => {}
            _ => {
                newest.insert(key, p);
            }
        }
    }
    let mut prices = Vec::new();
    for p in newest.into_values() {
        match money::hourly(&p.spot_price) {
            Ok(price) => prices.push(SpotPrice {
                availability_zone: p.availability_zone.clone(),
                instance_type: p.instance_type.clone(),
                price,
                since: p.timestamp.unwrap_or_default(),
            }),
            Err(r) => refused.push((p.instance_type.clone(), r)),
        }
    }
    (prices, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(az: &str, price: &str, ts: &str) -> SpotPricePoint {
        SpotPricePoint {
            availability_zone: az.into(),
            instance_type: "p4d.24xlarge".into(),
            product_description: "Linux/UNIX".into(),
            spot_price: price.into(),
            timestamp: Some(ts.parse().unwrap()),
        }
    }

    #[test]
    fn keeps_the_latest_event_per_zone() {
        let (prices, refused) = latest(&[
            point("us-east-1a", "8.1", "2025-06-01T10:00:00Z"),
            point("us-east-1a", "9.25", "2025-06-01T11:00:00Z"),
            point("us-east-1a", "7.0", "2025-05-31T11:00:00Z"),
            point("us-east-1b", "8.5", "2025-06-01T09:00:00Z"),
        ]);
        assert!(refused.is_empty());
        assert_eq!(prices.len(), 2);
        assert_eq!(prices[0].price.to_string(), "9.25");
        assert_eq!(prices[1].availability_zone, "us-east-1b");
    }

    #[test]
    fn a_zero_latest_price_is_refused_not_replaced_by_an_older_one() {
        let (prices, refused) = latest(&[
            point("us-east-1a", "8.1", "2025-06-01T10:00:00Z"),
            point("us-east-1a", "0.000000", "2025-06-01T11:00:00Z"),
        ]);
        assert!(prices.is_empty());
        assert!(matches!(refused[0].1, AnomalyReason::BadPrice { .. }));
    }
}
