//! Which offers may serve a pool: the pool's accelerator, clouds and regions, the budget's
//! allowed clouds and regions (residency), and one quote per thing sold — the best-sourced one
//! when the snapshot, an import, the cache and a live fetch all price the same offer.

use std::collections::BTreeMap;

use gpucap_provider::{Offer, SourceKind};

use crate::config::Budget;
use crate::demand::Pool;

/// The offers `pool` may buy, one per thing sold, in a stable order.
pub fn for_pool<'a>(pool: &Pool, offers: &'a [Offer], budget: &Budget) -> Vec<&'a Offer> {
    let clouds = pool.effective_clouds();
    let mut best: BTreeMap<OfferKey, &Offer> = BTreeMap::new();
    for o in offers.iter().filter(|o| {
        o.accelerator == pool.accelerator
            && clouds.contains(&o.cloud)
            && (pool.regions.is_empty() || pool.regions.contains(&o.region))
            && allowed(budget, o)
    }) {
        let key = OfferKey::of(o);
        match best.get(&key) {
            Some(current) if !better(o, current) => {}
            _ => {
                best.insert(key, o);
            }
        }
    }
    best.into_values().collect()
}

/// Whether the budget's residency rules allow buying this offer.
pub fn allowed(budget: &Budget, o: &Offer) -> bool {
    (budget.allowed_clouds.is_empty() || budget.allowed_clouds.contains(&o.cloud))
        && (budget.allowed_regions.is_empty() || budget.allowed_regions.contains(&o.region))
}

/// What is sold, regardless of who quoted it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OfferKey {
    cloud: gpucap_provider::Cloud,
    region: String,
    zone: Option<String>,
    instance_type: String,
    kind: gpucap_provider::PurchaseKind,
    term_hours: Option<u32>,
    earliest_start: Option<chrono::DateTime<chrono::Utc>>,
    offering_id: Option<String>,
}

impl OfferKey {
    fn of(o: &Offer) -> Self {
        OfferKey {
            cloud: o.cloud,
            region: o.region.clone(),
            zone: o.zone.clone(),
            instance_type: o.instance_type.clone(),
            kind: o.kind,
            term_hours: o.term_hours,
            earliest_start: o.earliest_start,
            offering_id: o.offering_id.clone(),
        }
    }
}

/// Live beats cache beats an import beats the snapshot; then the newer quote.
fn better(a: &Offer, b: &Offer) -> bool {
    let rank = |k: SourceKind| match k {
        SourceKind::Contract => 4,
        SourceKind::Live => 3,
        SourceKind::Cache => 2,
        SourceKind::Import => 1,
        SourceKind::Snapshot => 0,
    };
    (rank(a.source.kind), a.source.fetched_at) > (rank(b.source.kind), b.source.fetched_at)
}
