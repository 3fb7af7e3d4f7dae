//! The AWS Price List Query API's products (`GetProducts`): each element of `PriceList` is a
//! JSON document serialised as a string. This module decodes one into on-demand and reserved
//! list prices for one instance type. Reserved terms are classified by their `termAttributes`
//! (lease length, purchase option, offering class), never by hard-coded term codes.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Deserialize;

use crate::anomaly::AnomalyReason;
use crate::money;

/// Hours in the 1- and 3-year terms AWS prices reserved instances over (365-day years).
pub const HOURS_1YR: u32 = 8760;
pub const HOURS_3YR: u32 = 26280;

/// One price the price list states for an instance type in a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPrice {
    pub sku: String,
    pub region: String,
    pub instance_type: String,
    /// The product's own `gpu` attribute (`"8"`), checked against `DescribeInstanceTypes`.
    pub listed_gpus: Option<u32>,
    pub term: Term,
    /// USD per instance-hour (the hourly part of a reserved term).
    pub hourly: Decimal,
    /// USD paid once per instance (reserved terms with an upfront part).
    pub upfront: Decimal,
    /// `<sku>.<offerTermCode>`, the id a purchase would name.
    pub term_id: String,
}

/// Which price list term a price belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    OnDemand,
    Reserved(ReservedTerm),
}

/// A reserved-instance term, as its `termAttributes` describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedTerm {
    pub hours: u32,
    /// `No Upfront`, `Partial Upfront`, `All Upfront`.
    pub purchase_option: String,
    /// `standard` or `convertible`.
    pub offering_class: String,
}

impl ListPrice {
    /// Effective USD per instance-hour: hourly + upfront spread over the term's hours.
    pub fn effective_hourly(&self) -> Decimal {
        match &self.term {
            Term::OnDemand => self.hourly,
            Term::Reserved(r) => self.hourly + self.upfront / Decimal::from(r.hours),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Product {
    product: ProductInfo,
    #[serde(default)]
    terms: Terms,
}

#[derive(Debug, Deserialize)]
struct ProductInfo {
    sku: String,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct Terms {
    #[serde(rename = "OnDemand", default)]
    on_demand: BTreeMap<String, TermDoc>,
    #[serde(rename = "Reserved", default)]
    reserved: BTreeMap<String, TermDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TermDoc {
    #[serde(default)]
    term_attributes: BTreeMap<String, String>,
    #[serde(default)]
    price_dimensions: BTreeMap<String, Dimension>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Dimension {
    unit: String,
    #[serde(default)]
    description: String,
    price_per_unit: BTreeMap<String, String>,
}

/// What one `PriceList` element yields: the prices it states and the rows it refused.
#[derive(Debug, Default)]
pub struct Decoded {
    pub prices: Vec<ListPrice>,
    pub refused: Vec<(Option<String>, AnomalyReason)>,
}

/// Decodes one element of `GetProducts`' `PriceList` (itself a JSON string).
pub fn decode(element: &str) -> Decoded {
    let mut out = Decoded::default();
    let product: Product = match serde_json::from_str(element) {
        Ok(p) => p,
        Err(e) => {
            out.refused.push((
                None,
                AnomalyReason::Malformed {
                    detail: format!("PriceList element: {e}"),
                },
            ));
            return out;
        }
    };
    let attrs = &product.product.attributes;
    let Some(instance_type) = attrs.get("instanceType").cloned() else {
        out.refused.push((
            None,
            AnomalyReason::Malformed {
                detail: "product has no instanceType".into(),
            },
        ));
        return out;
    };
    let region = attrs.get("regionCode").cloned().unwrap_or_default();
    let listed_gpus = attrs.get("gpu").and_then(|g| g.trim().parse::<u32>().ok());
    let base = |term, term_id: &str| ListPrice {
        sku: product.product.sku.clone(),
        region: region.clone(),
        instance_type: instance_type.clone(),
        listed_gpus,
        term,
        hourly: Decimal::ZERO,
        upfront: Decimal::ZERO,
        term_id: term_id.to_string(),
    };
    for (id, doc) in &product.terms.on_demand {
        match on_demand_price(doc) {
            Ok(hourly) => out.prices.push(ListPrice {
                hourly,
                ..base(Term::OnDemand, id)
            }),
            Err(r) => out.refused.push((Some(instance_type.clone()), r)),
        }
    }
    for (id, doc) in &product.terms.reserved {
        match reserved_price(doc) {
            Ok((term, hourly, upfront)) => out.prices.push(ListPrice {
                hourly,
                upfront,
                ..base(Term::Reserved(term), id)
            }),
            Err(r) => out.refused.push((Some(instance_type.clone()), r)),
        }
    }
    out
}

fn usd(d: &Dimension) -> Result<&str, AnomalyReason> {
    d.price_per_unit
        .get("USD")
        .map(String::as_str)
        .ok_or_else(|| AnomalyReason::UnknownUnit {
            unit: d
                .price_per_unit
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(","),
        })
}

fn on_demand_price(doc: &TermDoc) -> Result<Decimal, AnomalyReason> {
    let mut hourly = None;
    for d in doc.price_dimensions.values() {
        match d.unit.as_str() {
            "Hrs" => hourly = Some(money::hourly(usd(d)?)?),
            other => {
                return Err(AnomalyReason::UnknownUnit {
                    unit: other.to_string(),
                });
            }
        }
    }
    hourly.ok_or_else(|| AnomalyReason::Malformed {
        detail: "on-demand term has no hourly dimension".into(),
    })
}

fn reserved_price(doc: &TermDoc) -> Result<(ReservedTerm, Decimal, Decimal), AnomalyReason> {
    let attr = |k: &str| doc.term_attributes.get(k).map(String::as_str);
    let hours = match attr("LeaseContractLength") {
        Some("1yr" | "1 yr") => HOURS_1YR,
        Some("3yr" | "3 yr") => HOURS_3YR,
        other => {
            return Err(AnomalyReason::UnclassifiedTerm {
                detail: format!("LeaseContractLength {other:?}"),
            });
        }
    };
    let purchase_option = attr("PurchaseOption")
        .filter(|p| ["No Upfront", "Partial Upfront", "All Upfront"].contains(p))
        .ok_or_else(|| AnomalyReason::UnclassifiedTerm {
            detail: format!("PurchaseOption {:?}", attr("PurchaseOption")),
        })?
        .to_string();
    let offering_class = attr("OfferingClass").unwrap_or("standard").to_string();
    let (mut hourly, mut upfront) = (None, None);
    for d in doc.price_dimensions.values() {
        match d.unit.as_str() {
            "Hrs" => hourly = Some(money::non_negative(usd(d)?)?),
            "Quantity" => upfront = Some(money::non_negative(usd(d)?)?),
            other => {
                return Err(AnomalyReason::UnknownUnit {
                    unit: format!("{other} ({})", d.description),
                });
            }
        }
    }
    let hourly = hourly.unwrap_or(Decimal::ZERO);
    let upfront = upfront.unwrap_or(Decimal::ZERO);
    // Each purchase option must carry money where it says it does: an All Upfront term with no
    // fee, or a No Upfront term with no hourly rate, is a placeholder, not a free instance.
    let consistent = match purchase_option.as_str() {
        "All Upfront" => upfront > Decimal::ZERO,
        "No Upfront" => hourly > Decimal::ZERO,
        _ => upfront > Decimal::ZERO && hourly > Decimal::ZERO,
    };
    if !consistent {
        return Err(AnomalyReason::BadPrice {
            value: format!("{purchase_option}: hourly {hourly}, upfront {upfront}"),
        });
    }
    Ok((
        ReservedTerm {
            hours,
            purchase_option,
            offering_class,
        },
        hourly,
        upfront,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(on_demand_usd: &str, reserved: &str) -> String {
        serde_json::json!({
            "product": {"productFamily": "Compute Instance", "sku": "SKU1",
                "attributes": {"instanceType": "p5.48xlarge", "regionCode": "us-east-1", "gpu": "8"}},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {"SKU1.AAAA": {"offerTermCode": "AAAA", "termAttributes": {},
                    "priceDimensions": {"SKU1.AAAA.X": {"unit": "Hrs", "description": "x",
                        "pricePerUnit": {"USD": on_demand_usd}}}}},
                "Reserved": serde_json::from_str::<serde_json::Value>(reserved).unwrap()
            }
        })
        .to_string()
    }

    const PARTIAL_1YR: &str = r#"{"SKU1.BBBB": {"termAttributes": {"LeaseContractLength": "1yr",
        "OfferingClass": "standard", "PurchaseOption": "Partial Upfront"},
        "priceDimensions": {
          "SKU1.BBBB.U": {"unit": "Quantity", "description": "Upfront Fee", "pricePerUnit": {"USD": "150000"}},
          "SKU1.BBBB.H": {"unit": "Hrs", "description": "hourly", "pricePerUnit": {"USD": "17.1200000000"}}}}}"#;

    #[test]
    fn decodes_on_demand_and_classifies_reserved_by_attributes() {
        let d = decode(&element("55.0400000000", PARTIAL_1YR));
        assert!(d.refused.is_empty(), "{:?}", d.refused);
        assert_eq!(d.prices.len(), 2);
        let od = d.prices.iter().find(|p| p.term == Term::OnDemand).unwrap();
        assert_eq!(od.hourly.to_string(), "55.04");
        assert_eq!(od.listed_gpus, Some(8));
        let ri = d
            .prices
            .iter()
            .find(|p| matches!(p.term, Term::Reserved(_)))
            .unwrap();
        let Term::Reserved(t) = &ri.term else {
            unreachable!()
        };
        assert_eq!(
            (t.hours, t.purchase_option.as_str()),
            (8760, "Partial Upfront")
        );
        // 17.12 + 150000 / 8760 = 34.2432876712…
        assert_eq!(ri.effective_hourly().round_dp(6).to_string(), "34.243288");
        assert_eq!(ri.term_id, "SKU1.BBBB");
    }

    #[test]
    fn zero_on_demand_price_and_unknown_units_are_refused() {
        let d = decode(&element("0.0000000000", "{}"));
        assert!(d.prices.is_empty());
        assert!(matches!(d.refused[0].1, AnomalyReason::BadPrice { .. }));

        let odd = PARTIAL_1YR.replace("\"Quantity\"", "\"Hours-ish\"");
        let d = decode(&element("1.5", &odd));
        assert_eq!(d.prices.len(), 1);
        assert!(matches!(d.refused[0].1, AnomalyReason::UnknownUnit { .. }));
    }

    #[test]
    fn unclassifiable_and_placeholder_terms_are_refused() {
        let five = PARTIAL_1YR.replace("1yr", "5yr");
        assert!(matches!(
            decode(&element("1", &five)).refused[0].1,
            AnomalyReason::UnclassifiedTerm { .. }
        ));
        let free = PARTIAL_1YR
            .replace("Partial Upfront", "All Upfront")
            .replace("150000", "0");
        assert!(matches!(
            decode(&element("1", &free)).refused[0].1,
            AnomalyReason::BadPrice { .. }
        ));
    }

    #[test]
    fn a_non_json_element_is_malformed_not_a_panic() {
        let d = decode("{\"product\": ");
        assert!(matches!(d.refused[0].1, AnomalyReason::Malformed { .. }));
    }
}
