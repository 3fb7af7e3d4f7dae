//! Which pool each campaign and forecast draws from.
//!
//! A pool may be used by a campaign when it has the campaign's accelerator and every place the
//! pool may buy in is allowed by the campaign's placement rule. Among those, the widest pool
//! (most places, ties by id) wins: more places means more offers to choose from. Without any
//! pools in the config, one pool is made per accelerator and placement rule found.

use std::collections::BTreeMap;

use crate::Accelerator;
use crate::calendar::Campaign;
use crate::config::PoolConfig;
use crate::diagnostic::{InputError, Location, did_you_mean};
use crate::forecast::Series;
use gpucap_provider::Cloud;

/// A capacity pool: one interchangeable kind of accelerator in a set of places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub id: String,
    pub accelerator: Accelerator,
    /// Clouds the pool may buy from; empty means any.
    pub clouds: Vec<Cloud>,
    /// Regions the pool may buy in; empty means any region of its clouds.
    pub regions: Vec<String>,
    /// Declared in the config (rather than made from a campaign's placement rule).
    pub configured: bool,
}

impl Pool {
    /// The clouds it can buy from, derived from regions where clouds are not given.
    pub fn effective_clouds(&self) -> Vec<Cloud> {
        let mut clouds = if !self.clouds.is_empty() {
            self.clouds.clone()
        } else if !self.regions.is_empty() {
            self.regions
                .iter()
                .filter_map(|r| Cloud::of_region(r))
                .collect()
        } else {
            Cloud::ALL.to_vec()
        };
        clouds.sort();
        clouds.dedup();
        clouds
    }

    /// Whether a campaign with these placement rules may run anywhere this pool buys.
    fn allows(&self, accelerator: Accelerator, clouds: &[Cloud], regions: &[String]) -> bool {
        self.accelerator == accelerator
            && (regions.is_empty()
                || (!self.regions.is_empty() && self.regions.iter().all(|r| regions.contains(r))))
            && (clouds.is_empty() || self.effective_clouds().iter().all(|c| clouds.contains(c)))
    }

    /// How much choice the pool gives: unrestricted pools are the widest.
    fn width(&self) -> usize {
        if self.regions.is_empty() {
            1_000_000 + self.effective_clouds().len()
        } else {
            self.regions.len()
        }
    }
}

pub(crate) struct Pools {
    pools: Vec<Pool>,
    configured: bool,
}

impl Pools {
    pub(crate) fn new(config: &BTreeMap<String, PoolConfig>) -> Self {
        let pools = config
            .iter()
            .map(|(id, p)| Pool {
                id: id.clone(),
                accelerator: p.accelerator,
                clouds: p.clouds.clone(),
                regions: p.regions.clone(),
                configured: true,
            })
            .collect();
        Pools {
            pools,
            configured: !config.is_empty(),
        }
    }

    pub(crate) fn into_pools(self) -> Vec<Pool> {
        self.pools
    }

    pub(crate) fn for_campaign(&mut self, c: &Campaign) -> Result<usize, InputError> {
        self.assign(c.accelerator, &c.clouds, &c.regions)
            .ok_or_else(|| {
                let same: Vec<&str> = self
                    .pools
                    .iter()
                    .filter(|p| p.accelerator == c.accelerator)
                    .map(|p| p.id.as_str())
                    .collect();
                let why = if same.is_empty() {
                    format!("no pool in gpucap.toml has accelerator `{}`", c.accelerator)
                } else {
                    format!(
                        "the `{}` pools ({}) buy in places the campaign does not allow",
                        c.accelerator,
                        same.join(", ")
                    )
                };
                InputError::new(
                    c.source.clone(),
                    format!("campaign `{}` fits no pool: {why}", c.name),
                )
                .with_hint(format!(
                    "add a pool with `accelerator = \"{}\"`{} to gpucap.toml",
                    c.accelerator,
                    placement_hint(&c.clouds, &c.regions)
                ))
            })
    }

    pub(crate) fn for_forecast(&mut self, s: &Series) -> Result<usize, InputError> {
        if let Some(i) = self.pools.iter().position(|p| p.id == s.pool) {
            return Ok(i);
        }
        let ids: Vec<String> = self.pools.iter().map(|p| p.id.clone()).collect();
        let unknown = || {
            let mut e = InputError::new(
                Location::file(&s.file),
                format!("unknown pool `{}` in the forecast", s.pool),
            );
            if let Some(m) = did_you_mean(&s.pool, ids.iter().map(String::as_str)) {
                e = e.with_hint(format!("did you mean `{m}`?"));
            } else {
                e = e.with_hint("name a pool from gpucap.toml, or an accelerator such as `h100`");
            }
            e
        };
        let accelerator = Accelerator::parse(&s.pool).map_err(|_| unknown())?;
        self.assign(accelerator, &[], &[]).ok_or_else(unknown)
    }

    /// The widest eligible pool; without configured pools, a new one for this placement rule.
    fn assign(
        &mut self,
        accelerator: Accelerator,
        clouds: &[Cloud],
        regions: &[String],
    ) -> Option<usize> {
        let best = self
            .pools
            .iter()
            .enumerate()
            .filter(|(_, p)| p.allows(accelerator, clouds, regions))
            .max_by(|(_, a), (_, b)| a.width().cmp(&b.width()).then_with(|| b.id.cmp(&a.id)))
            .map(|(i, _)| i);
        if best.is_some() || self.configured {
            return best;
        }
        let mut clouds = clouds.to_vec();
        clouds.sort();
        let mut regions = regions.to_vec();
        regions.sort();
        if let Some(i) = self.pools.iter().position(|p| {
            p.accelerator == accelerator && p.clouds == clouds && p.regions == regions
        }) {
            return Some(i);
        }
        let suffix = if !regions.is_empty() {
            regions.join("-")
        } else {
            clouds
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join("-")
        };
        let id = if suffix.is_empty() {
            accelerator.name().to_string()
        } else {
            format!("{accelerator}-{suffix}")
        };
        self.pools.push(Pool {
            id,
            accelerator,
            clouds,
            regions,
            configured: false,
        });
        Some(self.pools.len() - 1)
    }
}

fn placement_hint(clouds: &[Cloud], regions: &[String]) -> String {
    if !regions.is_empty() {
        format!(" and `regions` within [{}]", regions.join(", "))
    } else if !clouds.is_empty() {
        format!(
            " and `clouds` within [{}]",
            clouds
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn pools(toml: &str) -> Pools {
        Pools::new(&Config::parse(toml, Path::new("g.toml")).unwrap().pools)
    }

    fn acc(s: &str) -> Accelerator {
        s.parse().unwrap()
    }

    #[test]
    fn campaigns_take_the_widest_pool_their_placement_allows() {
        let mut p = pools(
            "[pools.h100-us]\naccelerator = \"h100\"\nregions = [\"us-east-1\", \"us-central1\", \"us-east-2\"]\n\
             [pools.h100-use1]\naccelerator = \"h100\"\nregions = [\"us-east-1\"]\n\
             [pools.h100-eu]\naccelerator = \"h100\"\nregions = [\"europe-west4\"]\n",
        );
        let us = [
            "us-east-1".to_string(),
            "us-central1".into(),
            "us-east-2".into(),
        ];
        let i = p.assign(acc("h100"), &[], &us).unwrap();
        assert_eq!(p.pools[i].id, "h100-us");
        let i = p.assign(acc("h100"), &[], &["us-east-1".into()]).unwrap();
        assert_eq!(p.pools[i].id, "h100-use1");
        let i = p.assign(acc("h100"), &[Cloud::Gcp], &[]).unwrap();
        assert_eq!(p.pools[i].id, "h100-eu");
        assert_eq!(p.assign(acc("h100"), &[Cloud::Azure], &[]), None);
        assert_eq!(p.assign(acc("l4"), &[], &[]), None);
    }

    #[test]
    fn without_configured_pools_one_is_made_per_placement_rule() {
        let mut p = pools("");
        let a = p.assign(acc("h100"), &[], &[]).unwrap();
        let b = p.assign(acc("H100"), &[], &[]).unwrap();
        let c = p.assign(acc("h100"), &[], &["us-east-1".into()]).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let ids: Vec<&str> = p.pools.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["h100", "h100-us-east-1"]);
    }
}
