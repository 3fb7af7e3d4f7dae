//! One page of the Azure Retail Prices API, parsed and turned into offers.
//!
//! Classification (api-formats §5): `type` `Consumption` is pay-as-you-go, or spot when the
//! `skuName`/`meterName` ends with ` Spot`; `Low Priority` meters and Windows products are
//! excluded; `Reservation` items carry the price of the WHOLE `reservationTerm` although
//! `unitOfMeasure` says `1 Hour`; `savingsPlan[]` entries are hourly. Prices are JSON numbers
//! and are read from their text as decimals, never through a float.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use gpucap_provider::provider::{Action, Issue, Problem};
use gpucap_provider::{Cloud, Offer, PurchaseKind, Query, Source, SourceKind, validate};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Hours in the terms Azure sells (365-day years, as Azure bills reservations).
pub const HOURS_1_YEAR: u32 = 8760;
pub const HOURS_3_YEARS: u32 = 3 * 8760;

/// The response envelope.
#[derive(Debug, Deserialize)]
pub struct Page {
    #[serde(rename = "Items")]
    pub items: Vec<Item>,
    #[serde(rename = "NextPageLink")]
    pub next_page_link: Option<String>,
    #[serde(rename = "BillingCurrency", default)]
    pub billing_currency: Option<String>,
}

/// One price item (only the fields gpucap uses).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    #[serde(default)]
    pub currency_code: Option<String>,
    pub retail_price: Box<RawValue>,
    pub arm_region_name: String,
    #[serde(default)]
    pub arm_sku_name: String,
    #[serde(default)]
    pub meter_name: String,
    #[serde(default)]
    pub sku_name: String,
    #[serde(default)]
    pub product_name: String,
    #[serde(default)]
    pub meter_id: Option<String>,
    #[serde(default)]
    pub sku_id: Option<String>,
    #[serde(rename = "type")]
    pub price_type: String,
    #[serde(default)]
    pub unit_of_measure: String,
    #[serde(default)]
    pub reservation_term: Option<String>,
    #[serde(default)]
    pub savings_plan: Vec<SavingsPlanPrice>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavingsPlanPrice {
    pub retail_price: Box<RawValue>,
    pub term: String,
}

/// Parses a page; the error says what is wrong with the JSON.
pub fn parse_page(body: &[u8]) -> Result<Page, serde_json::Error> {
    serde_json::from_slice(body)
}

/// Reads a JSON number's text as a decimal (`3.673`, `22000.0`, `1.2E-4`).
pub fn decimal(raw: &RawValue) -> Option<Decimal> {
    let text = raw.get().trim();
    if text.starts_with('"') || text == "null" {
        return None;
    }
    Decimal::from_str(text)
        .ok()
        .or_else(|| Decimal::from_scientific(text).ok())
}

fn term_hours(term: &str) -> Option<u32> {
    match term.trim() {
        "1 Year" => Some(HOURS_1_YEAR),
        "3 Years" => Some(HOURS_3_YEARS),
        _ => None,
    }
}

/// Turns the items of a page into offers that match `query`. Items that are out of scope
/// (Windows, Low Priority, dev/test, other regions, instance types gpucap doesn't know) are
/// dropped quietly; items that are in scope but wrong go to `issues`.
pub fn offers(
    items: &[Item],
    query: &Query,
    origin: &str,
    fetched_at: DateTime<Utc>,
    issues: &mut Vec<Issue>,
) -> Vec<Offer> {
    let mut out = Vec::new();
    for item in items {
        if item.product_name.contains("Windows")
            || item.meter_name.contains("Low Priority")
            || item.sku_name.contains("Low Priority")
        {
            continue;
        }
        let Some((accelerator, gpus)) =
            gpucap_provider::instance_types::lookup(Cloud::Azure, &item.arm_sku_name)
        else {
            continue;
        };
        if !query.wants_accelerator(accelerator) {
            continue;
        }
        let mut issue = |problem: Problem| {
            issues.push(Issue {
                cloud: Cloud::Azure,
                region: Some(item.arm_region_name.clone()),
                subject: format!(
                    "{} {} ({})",
                    item.arm_sku_name, item.meter_name, item.price_type
                ),
                problem,
                action: Action::Skipped,
            })
        };
        if let Some(currency) = item.currency_code.as_deref().filter(|c| *c != "USD") {
            issue(Problem::Other {
                message: format!("price in {currency}, not USD"),
            });
            continue;
        }
        if item.unit_of_measure != "1 Hour" {
            issue(Problem::UnknownUnit {
                unit: item.unit_of_measure.clone(),
            });
            continue;
        }
        let Some(listed) = decimal(&item.retail_price) else {
            issue(Problem::Other {
                message: format!("retailPrice `{}` is not a number", item.retail_price.get()),
            });
            continue;
        };
        let price = match validate::price(listed) {
            Ok(p) => p,
            Err(problem) => {
                issue(problem);
                continue;
            }
        };
        let is_spot = item.sku_name.ends_with(" Spot") || item.meter_name.ends_with(" Spot");
        let base = Offer {
            cloud: Cloud::Azure,
            region: item.arm_region_name.clone(),
            zone: None,
            instance_type: item.arm_sku_name.clone(),
            accelerator,
            gpus_per_instance: gpus,
            gpu_memory_gb: Some(accelerator.spec().memory_gb),
            kind: PurchaseKind::OnDemand,
            price_per_instance_hour: price,
            upfront: Decimal::ZERO,
            term_hours: None,
            earliest_start: None,
            lead_time_hours: None,
            max_instances: None,
            offering_id: item.meter_id.clone().or_else(|| item.sku_id.clone()),
            source: Source {
                kind: SourceKind::Live,
                origin: origin.to_string(),
                fetched_at,
            },
        };
        match item.price_type.as_str() {
            "Consumption" => {
                let kind = if is_spot {
                    PurchaseKind::Spot
                } else {
                    PurchaseKind::OnDemand
                };
                out.push(Offer {
                    kind,
                    ..base.clone()
                });
                if !is_spot {
                    for plan in &item.savings_plan {
                        let (Some(hours), Some(hourly)) =
                            (term_hours(&plan.term), decimal(&plan.retail_price))
                        else {
                            issue(Problem::Other {
                                message: format!(
                                    "savings plan term `{}` price `{}` not understood",
                                    plan.term,
                                    plan.retail_price.get()
                                ),
                            });
                            continue;
                        };
                        match validate::price(hourly) {
                            Ok(hourly) => out.push(Offer {
                                kind: PurchaseKind::Commitment,
                                price_per_instance_hour: hourly,
                                term_hours: Some(hours),
                                ..base.clone()
                            }),
                            Err(problem) => issue(problem),
                        }
                    }
                }
            }
            "Reservation" => {
                let Some(hours) = item.reservation_term.as_deref().and_then(term_hours) else {
                    issue(Problem::Other {
                        message: format!(
                            "reservation term `{}` not understood",
                            item.reservation_term.as_deref().unwrap_or("")
                        ),
                    });
                    continue;
                };
                // The listed price is for the whole term; spread it over the term's hours.
                let hourly = (price / Decimal::from(hours)).round_dp(6);
                out.push(Offer {
                    kind: PurchaseKind::Reservation,
                    price_per_instance_hour: hourly,
                    term_hours: Some(hours),
                    ..base
                });
            }
            // DevTestConsumption and future types are not sold to production workloads.
            _ => {}
        }
    }
    out.retain(|o| query.wants(o));
    check_spot_below_on_demand(&out, issues);
    out
}

/// Reports spot prices above the on-demand price of the same VM (kept: spot can be capped at
/// on-demand, but above it means a mismatched meter).
fn check_spot_below_on_demand(offers: &[Offer], issues: &mut Vec<Issue>) {
    for spot in offers.iter().filter(|o| o.kind == PurchaseKind::Spot) {
        if let Some(od) = offers.iter().find(|o| {
            o.kind == PurchaseKind::OnDemand
                && o.instance_type == spot.instance_type
                && o.region == spot.region
        }) && spot.price_per_instance_hour > od.price_per_instance_hour
        {
            issues.push(Issue {
                cloud: Cloud::Azure,
                region: Some(spot.region.clone()),
                subject: format!("{} spot", spot.instance_type),
                problem: Problem::SpotAboveOnDemand {
                    spot: spot.price_per_instance_hour,
                    on_demand: od.price_per_instance_hour,
                },
                action: Action::Kept,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(items: &str) -> Page {
        parse_page(
            format!(
                r#"{{"BillingCurrency":"USD","Items":[{items}],"NextPageLink":null,"Count":1}}"#
            )
            .as_bytes(),
        )
        .expect("valid page")
    }

    fn item(sku: &str, meter: &str, kind: &str, price: &str, extra: &str) -> String {
        format!(
            r#"{{"currencyCode":"USD","retailPrice":{price},"unitPrice":{price},"armRegionName":"eastus",
            "meterName":"{meter}","skuName":"{meter}","productName":"Virtual Machines NDsr H100 v5 Series",
            "type":"{kind}","unitOfMeasure":"1 Hour","armSkuName":"{sku}"{extra}}}"#
        )
    }

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).expect("decimal")
    }

    #[test]
    fn consumption_spot_savings_plan_and_reservation_are_classified() {
        let p = page(&[
            item("Standard_ND96isr_H100_v5", "ND96isr H100 v5", "Consumption", "98.32", r#","savingsPlan":[{"unitPrice":70.1,"retailPrice":70.1,"term":"1 Year"},{"unitPrice":50.2,"retailPrice":50.2,"term":"3 Years"}]"#),
            item("Standard_ND96isr_H100_v5", "ND96isr H100 v5 Spot", "Consumption", "39.328", ""),
            item("Standard_ND96isr_H100_v5", "ND96isr H100 v5", "Reservation", "526000.0", r#","reservationTerm":"1 Year""#),
        ]
        .join(","));
        let mut issues = Vec::new();
        let offers = offers(&p.items, &Query::default(), "test", Utc::now(), &mut issues);
        assert!(issues.is_empty(), "{issues:?}");
        let by_kind = |k: PurchaseKind, term: Option<u32>| {
            offers
                .iter()
                .find(|o| o.kind == k && o.term_hours == term)
                .map(|o| o.price_per_instance_hour)
        };
        assert_eq!(by_kind(PurchaseKind::OnDemand, None), Some(d("98.32")));
        assert_eq!(by_kind(PurchaseKind::Spot, None), Some(d("39.328")));
        assert_eq!(
            by_kind(PurchaseKind::Commitment, Some(8760)),
            Some(d("70.1"))
        );
        assert_eq!(
            by_kind(PurchaseKind::Commitment, Some(26280)),
            Some(d("50.2"))
        );
        // 526000 / 8760 h
        assert_eq!(
            by_kind(PurchaseKind::Reservation, Some(8760)),
            Some(d("60.045662"))
        );
        assert!(
            offers
                .iter()
                .all(|o| o.gpus_per_instance == 8 && o.accelerator.name() == "h100")
        );
    }

    #[test]
    fn windows_low_priority_and_unknown_skus_are_dropped() {
        let mut windows = item(
            "Standard_ND96isr_H100_v5",
            "ND96isr H100 v5",
            "Consumption",
            "120.0",
            "",
        );
        windows = windows.replace("Virtual Machines NDsr", "Virtual Machines NDsr Windows");
        let p = page(
            &[
                windows,
                item(
                    "Standard_ND96isr_H100_v5",
                    "ND96isr H100 v5 Low Priority",
                    "Consumption",
                    "20.0",
                    "",
                ),
                item("Standard_D2s_v5", "D2s v5", "Consumption", "0.096", ""),
                item(
                    "Standard_ND96isr_H100_v5",
                    "ND96isr H100 v5",
                    "DevTestConsumption",
                    "90.0",
                    "",
                ),
            ]
            .join(","),
        );
        let mut issues = Vec::new();
        assert!(offers(&p.items, &Query::default(), "t", Utc::now(), &mut issues).is_empty());
        assert!(issues.is_empty());
    }

    #[test]
    fn zero_prices_units_and_spot_above_on_demand_are_reported() {
        let mut per_month = item(
            "Standard_NC24ads_A100_v4",
            "NC24ads A100 v4",
            "Consumption",
            "3.67",
            "",
        );
        per_month = per_month.replace("1 Hour", "1/Month");
        let p = page(
            &[
                item(
                    "Standard_ND96isr_H100_v5",
                    "ND96isr H100 v5",
                    "Consumption",
                    "0",
                    "",
                ),
                per_month,
                item(
                    "Standard_NC40ads_H100_v5",
                    "NC40ads H100 v5",
                    "Consumption",
                    "6.98",
                    "",
                ),
                item(
                    "Standard_NC40ads_H100_v5",
                    "NC40ads H100 v5 Spot",
                    "Consumption",
                    "7.5",
                    "",
                ),
            ]
            .join(","),
        );
        let mut issues = Vec::new();
        let offers = offers(&p.items, &Query::default(), "t", Utc::now(), &mut issues);
        assert_eq!(offers.len(), 2);
        let problems: Vec<&Problem> = issues.iter().map(|i| &i.problem).collect();
        assert_eq!(problems[0], &Problem::ZeroPrice);
        assert_eq!(
            problems[1],
            &Problem::UnknownUnit {
                unit: "1/Month".into()
            }
        );
        assert!(matches!(problems[2], Problem::SpotAboveOnDemand { .. }));
        assert_eq!(issues[2].action, Action::Kept);
    }

    #[test]
    fn prices_are_read_from_their_text() {
        let raw = RawValue::from_string("0.1".into()).expect("raw");
        assert_eq!(decimal(&raw), Some(d("0.1")));
        let raw = RawValue::from_string("1.5E2".into()).expect("raw");
        assert_eq!(decimal(&raw), Some(d("150")));
        let raw = RawValue::from_string("\"n/a\"".into()).expect("raw");
        assert_eq!(decimal(&raw), None);
    }
}
