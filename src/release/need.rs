//! Whether a campaign in the calendar (or a forecast) still needs a piece of capacity: the rule
//! that keeps `gpucap release` from freeing what is about to be used. Pure: it reads the demand
//! curve `gpucap plan` would plan against now.
//!
//! A resource is needed while any scenario of any pool that could use it (same accelerator, a
//! cloud and region the pool may buy in) has demand during the resource's remaining window.
//! The pool it was bought for is not the only one that counts: a later plan would count it for
//! any pool that fits, so freeing it would only buy it again.

use chrono::{DateTime, Utc};
use gpucap_provider::instance_types;

use crate::demand::DemandCurve;
use crate::state::ManagedResource;
use crate::timespec::rfc3339;

/// Who needs a resource, and from when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeededBy {
    pub pool: String,
    /// The campaign's name, or `forecast:FILE`.
    pub campaign: String,
    pub from: DateTime<Utc>,
}

impl std::fmt::Display for NeededBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "campaign `{}` needs pool `{}` from {}",
            self.campaign,
            self.pool,
            rfc3339(self.from)
        )
    }
}

/// The demand, asked about resources.
#[derive(Debug)]
pub struct Need<'a> {
    demand: &'a DemandCurve,
}

impl<'a> Need<'a> {
    pub fn new(demand: &'a DemandCurve) -> Need<'a> {
        Need { demand }
    }

    /// The first demand that could use `r` between `from` and `to` (`to`: the resource's end;
    /// `None`: up to the end of the horizon). `None` when nothing in the calendar needs it.
    pub fn of(
        &self,
        r: &ManagedResource,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> Option<NeededBy> {
        let horizon = self.demand.horizon;
        let (from_hour, to_hour) = horizon.clip(from, to.unwrap_or_else(|| horizon.end()))?;
        let accelerator = instance_types::lookup(r.cloud, &r.instance_type).map(|(a, _)| a);
        let mut first: Option<(u32, &str, &str)> = None;
        for (p, pool) in self.demand.pools.iter().enumerate() {
            let fits = match accelerator {
                Some(a) => {
                    pool.accelerator == a
                        && pool.effective_clouds().contains(&r.cloud)
                        && (pool.regions.is_empty() || pool.regions.contains(&r.region))
                }
                // A type gpucap does not know: only the pool it was bought for can use it.
                None => r.pool.as_deref() == Some(pool.id.as_str()),
            };
            if !fits {
                continue;
            }
            for scenario in &self.demand.scenarios {
                let Some(curve) = scenario.pools.get(p) else {
                    continue;
                };
                for c in &curve.contributions {
                    let hit = c
                        .segments
                        .iter()
                        .filter(|s| s.2 > 0 && s.0 < to_hour && from_hour < s.1)
                        .map(|s| s.0.max(from_hour))
                        .min();
                    if let Some(h) = hit
                        && first.is_none_or(|(at, _, _)| h < at)
                    {
                        first = Some((h, pool.id.as_str(), c.label.as_str()));
                    }
                }
            }
        }
        first.map(|(h, pool, campaign)| NeededBy {
            pool: pool.to_string(),
            campaign: campaign.to_string(),
            from: horizon.time_of(h),
        })
    }

    /// Whether pool `pool` has demand in the hour containing `at` (a pool is sized for now).
    pub fn pool_now(&self, pool: &str, at: DateTime<Utc>) -> Option<NeededBy> {
        let horizon = self.demand.horizon;
        let h = u32::try_from(horizon.floor(at)).ok()?;
        let p = self.demand.pools.iter().position(|x| x.id == pool)?;
        self.demand.scenarios.iter().find_map(|s| {
            s.pools.get(p)?.contributions.iter().find_map(|c| {
                (c.at(h) > 0).then(|| NeededBy {
                    pool: pool.to_string(),
                    campaign: c.label.clone(),
                    from: horizon.time_of(h),
                })
            })
        })
    }
}
