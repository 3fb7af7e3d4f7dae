//! Limits that several offers draw on together, as `gpucap.problem/v2` shared limits: an
//! offering's own limit when several pools buy the same thing (same cloud, place, instance
//! type and kind), a cloud's cap across purchases (AWS: 256 instances across Capacity Blocks),
//! and the account's quotas (vCPUs or GPUs per family and region). Each pool applying such a
//! limit on its own would let the pools together plan more than exists; one limit across them
//! does not.
//!
//! Quota values come from `[quotas]` in the config first, then from the cloud where gpucap
//! could read them, then from the stated offline default
//! ([`gpucap_provider::quotas::offline_default`]).

use std::collections::{BTreeMap, BTreeSet};

use gpucap_provider::purchase_rules::{self, Instrument};
use gpucap_provider::quotas::{self, QuotaDraw, QuotaId, QuotaUnit};
use gpucap_provider::{Cloud, PurchaseKind};
use serde::{Deserialize, Serialize};

use crate::config::QuotaSettings;
use crate::problem::SharedLimit;

/// Prefix of the ids of quota limits (the ones a quota increase can lift).
pub const QUOTA_PREFIX: &str = "quota:";

/// One problem offer, as the limits see it.
#[derive(Debug, Clone)]
pub struct Member {
    pub offer: String,
    pub pool: String,
    /// What is sold, whoever buys it: `cloud/region[/zone]/type/kind`.
    pub offering: String,
    /// The offering's own limit on instances in use, where it has one.
    pub offering_cap: Option<u32>,
    pub cloud: Cloud,
    pub kind: PurchaseKind,
    pub draw: Option<QuotaDraw>,
    /// The most instances of this offer a plan could ever use: its own limit, or its pool's
    /// peak demand in whole instances (more would cost more and serve nothing).
    pub useful: Option<u64>,
}

/// Whether a limit over `members` (weights by offer) can never be reached: the most all of them
/// could ever use together is within `cap`. Such a limit constrains nothing and stays out of
/// the problem (it only makes the solve harder); the plan still lists it as checked.
fn cannot_bind(members: &[&Member], weight: impl Fn(&Member) -> u64, cap: u64) -> bool {
    let mut most = 0u64;
    for m in members {
        let Some(u) = m.useful else {
            return false;
        };
        most = most.saturating_add(weight(m).saturating_mul(u));
    }
    most <= cap
}

/// Where a quota's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuotaOrigin {
    /// `[quotas]` in the config.
    Config,
    /// Read from the cloud in this run.
    Live,
    /// gpucap's stated offline default.
    Default,
}

impl QuotaOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaOrigin::Config => "config",
            QuotaOrigin::Live => "live",
            QuotaOrigin::Default => "default",
        }
    }
}

/// The quotas gpucap knows: the config's, and those read live.
#[derive(Debug, Clone, Default)]
pub struct QuotaBook {
    pub config: QuotaSettings,
    pub live: BTreeMap<QuotaId, u64>,
}

impl QuotaBook {
    pub fn value(&self, draw: &QuotaDraw) -> (u64, QuotaOrigin) {
        if let Some(v) = self.config.get(&draw.quota) {
            return (v, QuotaOrigin::Config);
        }
        if let Some((_, v)) = self.live.iter().find(|(k, _)| k.matches(&draw.quota)) {
            return (*v, QuotaOrigin::Live);
        }
        (quotas::offline_default(draw), QuotaOrigin::Default)
    }
}

/// A quota the problem keeps within.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaLimit {
    /// The shared limit's id in the problem (absent from it when it cannot bind).
    pub limit: String,
    pub quota: QuotaId,
    pub title: String,
    pub unit: QuotaUnit,
    pub value: u64,
    pub origin: QuotaOrigin,
    /// Problem offer id → what one instance uses of the quota.
    pub offers: BTreeMap<String, u32>,
    /// Whether the problem carries it: `false` when the offers could never use it all.
    pub binding: bool,
}

/// The shared limits over `members`, and the quotas among them.
pub fn shared_limits(members: &[Member], book: &QuotaBook) -> (Vec<SharedLimit>, Vec<QuotaLimit>) {
    let mut out = Vec::new();

    // An offering several pools buy: its limit once across them.
    let mut by_offering: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
    for m in members {
        by_offering.entry(&m.offering).or_default().push(m);
    }
    for (offering, group) in &by_offering {
        let pools: BTreeSet<&str> = group.iter().map(|m| m.pool.as_str()).collect();
        let Some(cap) = group.iter().filter_map(|m| m.offering_cap).min() else {
            continue;
        };
        if pools.len() < 2 || cannot_bind(group, |_| 1, u64::from(cap)) {
            continue;
        }
        out.push(SharedLimit {
            id: format!("offering:{offering}"),
            unit: "instances".into(),
            cap: u64::from(cap),
            offers: group.iter().map(|m| (m.offer.clone(), 1)).collect(),
            reason: Some(format!(
                "{offering}: at most {cap} instances, shared by pools {}",
                pools.into_iter().collect::<Vec<_>>().join(", ")
            )),
        });
    }

    // A cloud's cap across all purchases through one instrument.
    for rule in purchase_rules::RULES {
        let Some(cap) = rule.account_cap else {
            continue;
        };
        let drawing: Vec<&Member> = members
            .iter()
            .filter(|m| {
                m.cloud == rule.cloud && Instrument::of(m.kind, None) == Some(rule.instrument)
            })
            .collect();
        if drawing.is_empty() || cannot_bind(&drawing, |_| 1, u64::from(cap.instances)) {
            continue;
        }
        let offers: BTreeMap<String, u32> = drawing.iter().map(|m| (m.offer.clone(), 1)).collect();
        out.push(SharedLimit {
            id: format!(
                "cap:{}/{}",
                rule.cloud,
                gpucap_provider::names::slug(rule.name)
            ),
            unit: "instances".into(),
            cap: u64::from(cap.instances),
            offers,
            reason: Some(format!(
                "{} {}: at most {} instances {} ({}, read {})",
                rule.cloud, rule.name, cap.instances, cap.scope, rule.source, rule.read_on
            )),
        });
    }

    // Quotas.
    let mut by_quota: BTreeMap<&QuotaId, (&QuotaDraw, Vec<&Member>)> = BTreeMap::new();
    for m in members {
        if let Some(d) = &m.draw {
            by_quota
                .entry(&d.quota)
                .or_insert_with(|| (d, Vec::new()))
                .1
                .push(m);
        }
    }
    let mut quota_limits = Vec::new();
    for (id, (draw, drawing)) in by_quota {
        let (value, origin) = book.value(draw);
        let limit = format!("{QUOTA_PREFIX}{id}");
        let weight = |m: &Member| m.draw.as_ref().map_or(1, |d| d.per_instance.max(1));
        let offers: BTreeMap<String, u32> = drawing
            .iter()
            .map(|m| (m.offer.clone(), weight(m)))
            .collect();
        let binding = !cannot_bind(&drawing, |m| u64::from(weight(m)), value);
        quota_limits.push(QuotaLimit {
            limit: limit.clone(),
            quota: id.clone(),
            title: draw.title.clone(),
            unit: draw.unit,
            value,
            origin,
            offers: offers.clone(),
            binding,
        });
        if !binding {
            continue;
        }
        out.push(SharedLimit {
            id: limit.clone(),
            unit: draw.unit.as_str().into(),
            cap: value,
            offers,
            reason: Some(format!(
                "{} quota {} ({}): {value} {} ({})",
                id.cloud,
                draw.title,
                id,
                draw.unit.as_str(),
                origin.as_str()
            )),
        });
    }
    (out, quota_limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpucap_provider::Accelerator;

    fn member(offer: &str, pool: &str, kind: PurchaseKind, cap: Option<u32>) -> Member {
        Member {
            offer: offer.into(),
            pool: pool.into(),
            offering: format!("aws/us-east-1/p5.48xlarge/{kind}"),
            offering_cap: cap,
            cloud: Cloud::Aws,
            kind,
            draw: quotas::draw(
                Cloud::Aws,
                "us-east-1",
                "p5.48xlarge",
                Accelerator::parse("h100").unwrap(),
                8,
                kind,
            ),
            useful: None,
        }
    }

    #[test]
    fn an_offering_two_pools_buy_is_limited_once_across_them() {
        let members = [
            member("a/od", "a", PurchaseKind::Spot, Some(7)),
            member("b/od", "b", PurchaseKind::Spot, Some(7)),
        ];
        let (limits, _) = shared_limits(&members, &QuotaBook::default());
        let l = limits
            .iter()
            .find(|l| l.id.starts_with("offering:"))
            .unwrap();
        assert_eq!(l.cap, 7);
        assert_eq!(l.offers.len(), 2);
        // One pool alone keeps its own limit: no shared one.
        let (limits, _) = shared_limits(&members[..1], &QuotaBook::default());
        assert!(limits.iter().all(|l| !l.id.starts_with("offering:")));
    }

    #[test]
    fn aws_blocks_share_the_256_instance_cap_and_quotas_weigh_vcpus() {
        let members = [
            member("a/cb/7d", "a", PurchaseKind::CapacityBlock, None),
            member("b/cb/7d", "b", PurchaseKind::CapacityBlock, None),
            member("a/od", "a", PurchaseKind::OnDemand, None),
            member("b/od", "b", PurchaseKind::OnDemand, None),
        ];
        let mut book = QuotaBook::default();
        book.config
            .limits
            .insert("aws/us-east-1/L-417A185B".into(), 3072);
        let (limits, quotas) = shared_limits(&members, &book);
        let cap = limits
            .iter()
            .find(|l| l.id.starts_with("cap:aws/"))
            .unwrap();
        assert_eq!((cap.cap, cap.offers.len()), (256, 2));
        let q = limits
            .iter()
            .find(|l| l.id == "quota:aws/us-east-1/L-417A185B")
            .unwrap();
        assert_eq!((q.cap, q.offers["a/od"], q.offers.len()), (3072, 192, 2));
        assert_eq!(quotas[0].origin, QuotaOrigin::Config);
        // Blocks draw on no quota.
        assert!(!q.offers.contains_key("a/cb/7d"));
    }

    #[test]
    fn an_unset_quota_takes_the_stated_default() {
        let members = [member("a/od", "a", PurchaseKind::OnDemand, None)];
        let (_, quotas) = shared_limits(&members, &QuotaBook::default());
        assert_eq!(
            (quotas[0].value, quotas[0].origin),
            (1536, QuotaOrigin::Default)
        );
    }

    #[test]
    fn a_limit_the_offers_could_never_reach_stays_out_of_the_problem() {
        let mut members = [
            member("a/od", "a", PurchaseKind::OnDemand, None),
            member("b/od", "b", PurchaseKind::OnDemand, None),
        ];
        // 8 + 8 instances of 192 vCPUs at most: 3,072, within a quota of 3,072.
        members[0].useful = Some(8);
        members[1].useful = Some(8);
        let mut book = QuotaBook::default();
        book.config
            .limits
            .insert("aws/us-east-1/L-417A185B".into(), 3072);
        let (limits, quotas) = shared_limits(&members, &book);
        assert!(limits.is_empty(), "{limits:?}");
        assert!(!quotas[0].binding);
        assert_eq!(quotas[0].offers.len(), 2);
        // One more instance's worth and it can bind.
        members[1].useful = Some(9);
        let (limits, quotas) = shared_limits(&members, &book);
        assert_eq!(limits.len(), 1);
        assert!(quotas[0].binding);
    }
}
