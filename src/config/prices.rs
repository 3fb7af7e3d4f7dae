//! `[prices]` in `gpucap.toml`: negotiated discounts and private offers, the grammar of a
//! discount key, and the checks on both.
//!
//! The config owns what the keys mean and whether they are well formed; [`crate::contract`]
//! applies them to the clouds' list prices. Keeping the grammar here lets the config validate
//! itself without reaching into pricing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use gpucap_provider::{Cloud, Offer, PurchaseKind, instance_types};
use serde::Deserialize;

use crate::timespec::{Span, Timestamp};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSettings {
    /// Use only the built-in price snapshot (and `imports`), never the cloud APIs. Default
    /// `false`; `gpucap plan --offline` does the same for one run.
    #[serde(default)]
    pub offline: bool,
    /// SkyPilot catalog CSVs (`vms.csv`) to read prices from instead of the cloud APIs,
    /// relative to this file. Default: none.
    #[serde(default)]
    pub imports: Vec<PathBuf>,
    /// Negotiated discounts (an EDP, private pricing), in percent off the list price, keyed by
    /// `cloud`, `cloud.kind`, `cloud.family` or `cloud.family.kind` (quote dotted keys:
    /// `"aws.p5" = 15`). Kinds: `on_demand`, `spot`, `term` (reservations and commitments),
    /// `capacity_block`; a family is an instance type or its prefix up to a `.`, `-` or `_`
    /// (`p5`, `a2`, `a2-highgpu`). The most specific key wins and discounts do not stack: a
    /// family beats a kind, a kind beats the cloud alone, a longer family a shorter one.
    /// Default: none (list prices).
    #[serde(default)]
    pub discounts: BTreeMap<String, f64>,
    /// Private offers: commitments or term reservations at a negotiated rate (`[[prices.offers]]`).
    #[serde(default)]
    pub offers: Vec<PrivateOfferConfig>,
}

/// A private offer: a term at a negotiated rate, with its size limit and start window.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivateOfferConfig {
    /// The contract's id or name, shown as the price's source (`PPA-2027-0412`).
    pub reference: String,
    /// The region it is sold in (the cloud follows from it).
    pub region: String,
    /// The instance type it covers (`p4d.24xlarge`).
    pub instance_type: String,
    /// `commitment` (savings plan, CUD, Azure reservation) or `reservation` (a term
    /// reservation). Default `commitment`.
    #[serde(default = "default_offer_kind")]
    pub kind: gpucap_provider::PurchaseKind,
    /// Its term: `1y`, `3y`, `180d`, ….
    pub term: Span,
    /// USD per instance-hour, paid every hour of the term, used or not. Give this or `discount`.
    pub price_per_instance_hour: Option<f64>,
    /// Percent off the list price of the same instance type, kind and term in the region (off
    /// its on-demand list price when the clouds list no such term). Give this or
    /// `price_per_instance_hour`.
    pub discount: Option<f64>,
    /// USD paid once per instance when it starts, with `price_per_instance_hour`. Default 0
    /// (with `discount`: the list's upfront fee, discounted).
    pub upfront: Option<f64>,
    /// The most instances the offer sells. Default: no limit.
    pub max_instances: Option<u32>,
    /// The first day it may start. Default: the planning start.
    pub earliest_start: Option<Timestamp>,
    /// The last day it may start (inclusive, 00:00 UTC starts). Default: the end of the
    /// horizon.
    pub latest_start: Option<Timestamp>,
    /// When the offer was made: the quote's time in the plan for an offer at a stated rate
    /// (one priced off a list is as old as the list price). Required.
    pub quoted: Timestamp,
}

fn default_offer_kind() -> gpucap_provider::PurchaseKind {
    gpucap_provider::PurchaseKind::Commitment
}

/// The kinds of purchase a discount key may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindClass {
    OnDemand,
    Spot,
    /// Reservations and commitments.
    Term,
    CapacityBlock,
}

impl KindClass {
    fn parse(s: &str) -> Option<KindClass> {
        match s.replace('-', "_").as_str() {
            "on_demand" => Some(KindClass::OnDemand),
            "spot" => Some(KindClass::Spot),
            "term" => Some(KindClass::Term),
            "capacity_block" => Some(KindClass::CapacityBlock),
            _ => None,
        }
    }

    pub(crate) fn matches(self, kind: PurchaseKind) -> bool {
        match self {
            KindClass::OnDemand => kind == PurchaseKind::OnDemand,
            KindClass::Spot => kind == PurchaseKind::Spot,
            KindClass::Term => {
                matches!(kind, PurchaseKind::Reservation | PurchaseKind::Commitment)
            }
            KindClass::CapacityBlock => kind == PurchaseKind::CapacityBlock,
        }
    }
}

/// A `[prices.discounts]` key: `cloud[.family][.kind]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscountKey {
    pub cloud: Cloud,
    pub family: Option<String>,
    pub kind: Option<KindClass>,
}

impl DiscountKey {
    pub fn parse(key: &str) -> Result<DiscountKey, String> {
        let mut parts: Vec<&str> = key.split('.').collect();
        let cloud = parts[0].parse::<Cloud>().map_err(|_| {
            format!("`{key}` does not start with a cloud (`aws`, `gcp` or `azure`)")
        })?;
        let kind = match parts.last().and_then(|p| KindClass::parse(p)) {
            Some(k) if parts.len() > 1 => {
                parts.pop();
                Some(k)
            }
            _ => None,
        };
        let family = parts[1..].join(".");
        if parts.len() > 1 && family.trim().is_empty() {
            return Err(format!("`{key}` has an empty instance family"));
        }
        Ok(DiscountKey {
            cloud,
            family: (!family.is_empty()).then_some(family),
            kind,
        })
    }

    pub(crate) fn matches(&self, o: &Offer) -> bool {
        self.cloud == o.cloud
            && self.kind.is_none_or(|k| k.matches(o.kind))
            && self
                .family
                .as_deref()
                .is_none_or(|f| in_family(&o.instance_type, f))
    }

    /// Higher is more specific: a family beats a kind, a longer family a shorter one.
    pub(crate) fn specificity(&self) -> (bool, usize, bool) {
        (
            self.family.is_some(),
            self.family.as_ref().map_or(0, String::len),
            self.kind.is_some(),
        )
    }
}

/// Whether `instance_type` is `family` or starts with it followed by `.`, `-` or `_`.
fn in_family(instance_type: &str, family: &str) -> bool {
    let (t, f) = (
        instance_type.to_ascii_lowercase(),
        family.to_ascii_lowercase(),
    );
    t == f || (t.starts_with(&f) && matches!(t.as_bytes().get(f.len()), Some(b'.' | b'-' | b'_')))
}

/// Checks `[prices]`; the error is the field and the message.
pub fn validate(prices: &PriceSettings) -> Result<(), (String, String)> {
    for (key, &pct) in &prices.discounts {
        let field = format!("prices.discounts.\"{key}\"");
        DiscountKey::parse(key).map_err(|m| (field.clone(), m))?;
        if !(pct.is_finite() && (0.0..100.0).contains(&pct)) {
            return Err((
                field,
                format!("a discount is a percentage from 0 to below 100, found {pct}"),
            ));
        }
    }
    let mut references = BTreeMap::new();
    for (i, o) in prices.offers.iter().enumerate() {
        let field = |name: &str| format!("prices.offers[{i}].{name}");
        if o.reference.trim().is_empty() {
            return Err((field("reference"), "must name the contract".into()));
        }
        crate::text::check_name(&o.reference).map_err(|m| (field("reference"), m))?;
        if let Some(first) = references.insert(o.reference.as_str(), i) {
            return Err((
                field("reference"),
                format!(
                    "`{}` is also the reference of prices.offers[{first}]",
                    o.reference
                ),
            ));
        }
        let Some(cloud) = Cloud::of_region(&o.region) else {
            return Err((
                field("region"),
                format!("`{}` is not an AWS, GCP or Azure region name", o.region),
            ));
        };
        if instance_types::lookup(cloud, &o.instance_type).is_none() {
            return Err((
                field("instance_type"),
                format!(
                    "`{}` is not a GPU instance type gpucap knows on {cloud}",
                    o.instance_type
                ),
            ));
        }
        if !matches!(o.kind, PurchaseKind::Commitment | PurchaseKind::Reservation) {
            return Err((
                field("kind"),
                format!(
                    "a private offer is a `commitment` or a term `reservation`, not `{}`",
                    o.kind
                ),
            ));
        }
        let hours = o.term.as_hours();
        if hours <= 0 || hours > i64::from(crate::problem::validate::MAX_HOURS) {
            return Err((field("term"), "must be between 1 hour and 12 years".into()));
        }
        match (o.price_per_instance_hour, o.discount) {
            (Some(_), Some(_)) | (None, None) => {
                return Err((
                    field("price_per_instance_hour"),
                    "give either `price_per_instance_hour` or `discount`".into(),
                ));
            }
            (Some(p), None) if !crate::limits::finite_in(p, 0.0, crate::limits::MAX_USD) => {
                return Err((
                    field("price_per_instance_hour"),
                    format!("must be a number of US dollars from 0, found {p}"),
                ));
            }
            (None, Some(d)) if !(d.is_finite() && (0.0..100.0).contains(&d)) => {
                return Err((
                    field("discount"),
                    format!("a discount is a percentage from 0 to below 100, found {d}"),
                ));
            }
            _ => {}
        }
        if let Some(u) = o.upfront {
            if o.discount.is_some() {
                return Err((
                    field("upfront"),
                    "with `discount` the upfront fee is the list's, discounted; give `price_per_instance_hour` to state it".into(),
                ));
            }
            if !crate::limits::finite_in(u, 0.0, crate::limits::MAX_USD) {
                return Err((
                    field("upfront"),
                    format!("must be a number of US dollars from 0, found {u}"),
                ));
            }
        }
        if let Some(n) = o.max_instances
            && !(1..=crate::limits::MAX_INSTANCES).contains(&n)
        {
            return Err((
                field("max_instances"),
                format!(
                    "must be between 1 and {}, found {n}",
                    crate::limits::MAX_INSTANCES
                ),
            ));
        }
        if let (Some(a), Some(b)) = (o.earliest_start, o.latest_start)
            && b < a
        {
            return Err((
                field("latest_start"),
                "must not be before `earliest_start`".into(),
            ));
        }
    }
    Ok(())
}
