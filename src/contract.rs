//! Negotiated prices: what the buyer's contract says beside the clouds' list prices.
//!
//! Enterprises rarely pay list prices. `[prices.discounts]` in `gpucap.toml` takes a percentage
//! off the list price per cloud, and optionally per kind of purchase or instance family (an EDP,
//! private pricing); `[[prices.offers]]` adds private offers: a commitment or term reservation
//! at a negotiated rate, with its term, size limit and start window. Both become offers whose
//! source is [`SourceKind::Contract`], with the list price they replace kept beside them, so
//! `gpucap prices` shows both and a plan says which prices came from the contract.
//!
//! Pure: the caller passes the config's `[prices]` and the list offers it gathered.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpucap_provider::{Cloud, Offer, PurchaseKind, Source, SourceKind, instance_types};
use rust_decimal::Decimal;
use rust_decimal::prelude::{FromPrimitive, ToPrimitive};

pub use crate::config::{DiscountKey, KindClass};
use crate::config::{PriceSettings, PrivateOfferConfig};

/// A list price and where it came from, kept beside the contract price that replaces it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPrice {
    pub price_per_instance_hour: Decimal,
    pub upfront: Decimal,
    pub source: Source,
}

/// An offer as the buyer pays it, with the list price it replaces (for a discount or a private
/// offer priced off a list; `None` for list prices and private offers at a stated rate).
#[derive(Debug, Clone, PartialEq)]
pub struct Priced {
    pub offer: Offer,
    pub list: Option<ListPrice>,
}

/// The discount that applies to `offer`: its key and percentage, the most specific key
/// that matches (see [`DiscountKey::specificity`]); ties go to the key first in order.
pub fn discount_for<'a>(
    discounts: &'a BTreeMap<String, f64>,
    offer: &Offer,
) -> Option<(&'a str, f64)> {
    let mut best: Option<(DiscountKey, &str, f64)> = None;
    for (key, &pct) in discounts {
        let Ok(k) = DiscountKey::parse(key) else {
            continue;
        };
        if !k.matches(offer) {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|(b, _, _)| k.specificity() > b.specificity())
        {
            best = Some((k, key, pct));
        }
    }
    best.map(|(_, key, pct)| (key, pct))
}

/// `offer` at the contract's price: discounted when a `[prices.discounts]` key matches it
/// (private offers are never discounted again), else as listed.
pub fn discounted(prices: &PriceSettings, offer: &Offer) -> Priced {
    if offer.source.kind == SourceKind::Contract {
        return Priced {
            offer: offer.clone(),
            list: None,
        };
    }
    let Some((key, pct)) = discount_for(&prices.discounts, offer) else {
        return Priced {
            offer: offer.clone(),
            list: None,
        };
    };
    let keep = factor(pct);
    let mut o = offer.clone();
    o.price_per_instance_hour = (offer.price_per_instance_hour * keep).round_dp(6);
    o.upfront = (offer.upfront * keep).round_dp(6);
    o.source = Source {
        kind: SourceKind::Contract,
        origin: format!(
            "prices.discounts.\"{key}\": {} % off the {} list price ${}/h ({})",
            show_pct(pct),
            source_word(offer.source.kind),
            offer.price_per_instance_hour.normalize(),
            offer.source.origin
        ),
        fetched_at: offer.source.fetched_at,
    };
    Priced {
        offer: o,
        list: Some(ListPrice {
            price_per_instance_hour: offer.price_per_instance_hour,
            upfront: offer.upfront,
            source: offer.source.clone(),
        }),
    }
}

/// The offering id of a private offer: `contract:<reference>`.
pub fn offering_id(reference: &str) -> String {
    format!("contract:{reference}")
}

/// The private offer an offer stands for, found by its offering id.
pub fn private_offer<'a>(
    prices: &'a PriceSettings,
    offer: &Offer,
) -> Option<&'a PrivateOfferConfig> {
    if offer.source.kind != SourceKind::Contract {
        return None;
    }
    let id = offer.offering_id.as_deref()?;
    prices
        .offers
        .iter()
        .find(|p| offering_id(&p.reference) == id)
}

/// The private offers as offers, priced at their rate or off the list price among `list`
/// (the same instance type, kind and term in the region, else its on-demand price). An offer
/// priced off a list the clouds do not quote is left out, with a warning.
pub fn private_offers(prices: &PriceSettings, list: &[Offer]) -> (Vec<Priced>, Vec<String>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for p in &prices.offers {
        let Some(cloud) = Cloud::of_region(&p.region) else {
            continue;
        };
        let Some((accelerator, gpus)) = instance_types::lookup(cloud, &p.instance_type) else {
            continue;
        };
        let term = u32::try_from(p.term.as_hours()).unwrap_or(u32::MAX);
        let (price, upfront, listed) = match (p.price_per_instance_hour, p.discount) {
            (Some(rate), _) => (decimal(rate), decimal(p.upfront.unwrap_or(0.0)), None),
            (None, Some(pct)) => {
                let same = |o: &&Offer| {
                    o.source.kind != SourceKind::Contract
                        && o.cloud == cloud
                        && o.region == p.region
                        && o.instance_type.eq_ignore_ascii_case(&p.instance_type)
                };
                let cheapest = |it: Vec<&Offer>| {
                    it.into_iter()
                        .min_by_key(|o| o.effective_price_per_gpu_hour())
                        .cloned()
                };
                let term_list = cheapest(
                    list.iter()
                        .filter(same)
                        .filter(|o| o.kind == p.kind && o.term_hours == Some(term))
                        .collect(),
                );
                let base = term_list.or_else(|| {
                    cheapest(
                        list.iter()
                            .filter(same)
                            .filter(|o| o.kind == PurchaseKind::OnDemand)
                            .collect(),
                    )
                });
                let Some(base) = base else {
                    warnings.push(format!(
                        "private offer `{}` is {}% off the list price of {} in {}, but no price of it is known; it is left out (give `price_per_instance_hour` instead)",
                        p.reference,
                        show_pct(pct),
                        p.instance_type,
                        p.region
                    ));
                    continue;
                };
                let keep = factor(pct);
                (
                    (base.price_per_instance_hour * keep).round_dp(6),
                    (base.upfront * keep).round_dp(6),
                    Some(base),
                )
            }
            (None, None) => continue,
        };
        let origin = match &listed {
            Some(base) => format!(
                "private offer `{}`: {} % off the {} {} list price ${}/h ({})",
                p.reference,
                show_pct(p.discount.unwrap_or(0.0)),
                source_word(base.source.kind),
                if base.kind == PurchaseKind::OnDemand {
                    "on-demand".to_string()
                } else {
                    format!("{} {}", term_words(term), base.kind)
                },
                base.price_per_instance_hour.normalize(),
                base.source.origin
            ),
            None => format!("private offer `{}` at its stated rate", p.reference),
        };
        out.push(Priced {
            offer: Offer {
                cloud,
                region: p.region.clone(),
                zone: None,
                instance_type: p.instance_type.clone(),
                accelerator,
                gpus_per_instance: gpus,
                gpu_memory_gb: None,
                kind: p.kind,
                price_per_instance_hour: price,
                upfront,
                term_hours: Some(term),
                earliest_start: p.earliest_start.map(|t| t.0),
                lead_time_hours: None,
                max_instances: p.max_instances,
                offering_id: Some(offering_id(&p.reference)),
                source: Source {
                    kind: SourceKind::Contract,
                    origin,
                    // Priced off a list, it is as old as the list price; at a stated rate, as
                    // old as the offer.
                    fetched_at: listed.as_ref().map_or(p.quoted.0, |b| b.source.fetched_at),
                },
            },
            list: listed.map(|b| ListPrice {
                price_per_instance_hour: b.price_per_instance_hour,
                upfront: b.upfront,
                source: b.source,
            }),
        });
    }
    (out, warnings)
}

/// Every offer as the buyer pays it: the list offers with their discounts, then the private
/// offers. What `gpucap prices` shows and `gpucap plan` plans with.
pub fn apply(prices: &PriceSettings, list: &[Offer]) -> (Vec<Priced>, Vec<String>) {
    let mut out: Vec<Priced> = list.iter().map(|o| discounted(prices, o)).collect();
    let (private, warnings) = private_offers(prices, list);
    out.extend(private);
    (out, warnings)
}

/// The start window of a private offer: from `earliest_start` to `latest_start` (either open).
pub fn window(offer: &PrivateOfferConfig) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    (
        offer.earliest_start.map(|t| t.0),
        offer.latest_start.map(|t| t.0),
    )
}

/// `3y`, `180d`, `36h`.
fn term_words(hours: u32) -> String {
    if hours.is_multiple_of(8760) {
        format!("{}y", hours / 8760)
    } else if hours.is_multiple_of(24) {
        format!("{}d", hours / 24)
    } else {
        format!("{hours}h")
    }
}

/// `1 - pct / 100` as a decimal.
fn factor(pct: f64) -> Decimal {
    Decimal::ONE - decimal(pct) / Decimal::ONE_HUNDRED
}

fn decimal(v: f64) -> Decimal {
    Decimal::from_f64(v).unwrap_or_default().round_dp(9)
}

fn show_pct(pct: f64) -> String {
    let d = decimal(pct).normalize();
    d.to_f64()
        .map_or_else(|| pct.to_string(), |_| d.to_string())
}

fn source_word(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Live => "live",
        SourceKind::Cache => "cached",
        SourceKind::Snapshot => "snapshot",
        SourceKind::Import => "imported",
        SourceKind::Contract => "contract",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timespec::parse_timestamp;
    use gpucap_provider::Accelerator;
    use std::path::Path;

    fn offer(instance_type: &str, kind: PurchaseKind) -> Offer {
        Offer {
            cloud: Cloud::Aws,
            region: "us-east-1".into(),
            zone: None,
            instance_type: instance_type.into(),
            accelerator: Accelerator::parse("h100").unwrap(),
            gpus_per_instance: 8,
            gpu_memory_gb: None,
            kind,
            price_per_instance_hour: Decimal::new(100, 0),
            upfront: Decimal::ZERO,
            term_hours: None,
            earliest_start: None,
            lead_time_hours: None,
            max_instances: None,
            offering_id: None,
            source: Source {
                kind: SourceKind::Snapshot,
                origin: "test".into(),
                fetched_at: parse_timestamp("2024-12-01").unwrap(),
            },
        }
    }

    fn prices(toml_text: &str) -> PriceSettings {
        crate::config::Config::parse(toml_text, Path::new("gpucap.toml"))
            .unwrap()
            .prices
    }

    #[test]
    fn the_most_specific_discount_wins_and_discounts_do_not_stack() {
        let p = prices(
            "[prices.discounts]\naws = 10\n\"aws.spot\" = 5\n\"aws.p5\" = 15\n\"aws.p5.spot\" = 2\n\"aws.p5.48xlarge\" = 20\ngcp = 30\n",
        );
        let price = |t: &str, k| discounted(&p, &offer(t, k)).offer.price_per_instance_hour;
        // Cloud alone.
        assert_eq!(
            price("p4d.24xlarge", PurchaseKind::OnDemand),
            Decimal::new(90, 0)
        );
        // A kind beats the cloud.
        assert_eq!(
            price("p4d.24xlarge", PurchaseKind::Spot),
            Decimal::new(95, 0)
        );
        // A family beats a kind; the longer family wins.
        assert_eq!(
            price("p5.4xlarge", PurchaseKind::OnDemand),
            Decimal::new(85, 0)
        );
        assert_eq!(
            price("p5.48xlarge", PurchaseKind::Spot),
            Decimal::new(80, 0)
        );
        // A family with a kind beats the family alone.
        assert_eq!(price("p5.4xlarge", PurchaseKind::Spot), Decimal::new(98, 0));
        // `p5` is not the family of `p5e.48xlarge`.
        assert_eq!(
            price("p5e.48xlarge", PurchaseKind::OnDemand),
            Decimal::new(90, 0)
        );
        let d = discounted(&p, &offer("p4d.24xlarge", PurchaseKind::OnDemand));
        assert_eq!(d.offer.source.kind, SourceKind::Contract);
        assert!(
            d.offer
                .source
                .origin
                .contains("10 % off the snapshot list price $100/h"),
            "{}",
            d.offer.source.origin
        );
        assert_eq!(
            d.list.unwrap().price_per_instance_hour,
            Decimal::new(100, 0)
        );
    }

    #[test]
    fn term_covers_reservations_and_commitments_and_other_clouds_pay_list() {
        let p = prices("[prices.discounts]\n\"aws.term\" = 25\n");
        let mut c = offer("p5.48xlarge", PurchaseKind::Commitment);
        c.upfront = Decimal::new(1000, 0);
        let d = discounted(&p, &c);
        assert_eq!(d.offer.price_per_instance_hour, Decimal::new(75, 0));
        assert_eq!(d.offer.upfront, Decimal::new(750, 0));
        let od = discounted(&p, &offer("p5.48xlarge", PurchaseKind::OnDemand));
        assert_eq!(od.list, None);
        assert_eq!(od.offer.source.kind, SourceKind::Snapshot);
    }

    #[test]
    fn a_private_offer_is_priced_off_its_term_list_else_on_demand() {
        let p = prices(
            "[[prices.offers]]\nreference = \"PPA-1\"\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\nterm = \"3y\"\ndiscount = 20\nquoted = 2027-01-04\nearliest_start = 2027-04-01\nlatest_start = 2027-06-30\nmax_instances = 40\n",
        );
        let od = offer("p5.48xlarge", PurchaseKind::OnDemand);
        let (out, warnings) = private_offers(&p, std::slice::from_ref(&od));
        assert!(warnings.is_empty());
        assert_eq!(out[0].offer.price_per_instance_hour, Decimal::new(80, 0));
        assert_eq!(out[0].offer.offering_id.as_deref(), Some("contract:PPA-1"));
        assert_eq!(out[0].offer.max_instances, Some(40));
        assert_eq!(out[0].offer.term_hours, Some(3 * 8760));
        let mut three_year = offer("p5.48xlarge", PurchaseKind::Commitment);
        three_year.term_hours = Some(3 * 8760);
        three_year.price_per_instance_hour = Decimal::new(50, 0);
        let (out, _) = private_offers(&p, &[od, three_year]);
        assert_eq!(out[0].offer.price_per_instance_hour, Decimal::new(40, 0));
        assert!(
            out[0]
                .offer
                .source
                .origin
                .contains("3y commitment list price $50/h")
        );
        let (out, warnings) = private_offers(&p, &[]);
        assert!(out.is_empty());
        assert!(warnings[0].contains("PPA-1"), "{warnings:?}");
    }
}
