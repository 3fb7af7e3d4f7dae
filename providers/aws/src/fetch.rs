//! One pricing run over every configured region: fetches, normalises and collects offers,
//! and keeps going when a region or an operation fails, recording which and why, so that one
//! region's outage never erases the others' prices.

use std::collections::BTreeMap;

use chrono::Utc;
use gpucap_provider::{Offer, PurchaseKind, Query};

use crate::anomaly::{Anomaly, AnomalyReason};
use crate::client::AwsClients;
use crate::config::AwsConfig;
use crate::error::AwsError;
use crate::instance_types::{self, GpuSpec};
use crate::normalise::{self, Provenance};
use crate::placement::SpotPlacementScore;
use crate::{capacity_blocks, price_list, spot};

/// Everything one run learnt about AWS.
#[derive(Debug, Default)]
pub struct AwsPrices {
    pub offers: Vec<Offer>,
    /// Spot placement scores, for interruption modelling.
    pub placement_scores: Vec<SpotPlacementScore>,
    /// Operations that failed, per region; the other regions' offers are still there.
    pub failures: Vec<Failure>,
    /// Rows that were refused and reported instead of used.
    pub anomalies: Vec<Anomaly>,
}

/// One failed operation.
#[derive(Debug)]
pub struct Failure {
    /// Region asked, or `global` for cross-region calls.
    pub region: String,
    /// What was being fetched (`DescribeSpotPriceHistory`, `GetProducts p5.48xlarge`, …).
    pub what: String,
    pub error: AwsError,
}

impl AwsPrices {
    fn fail(&mut self, region: &str, what: impl Into<String>, error: AwsError) {
        tracing::warn!(region, "aws: {error}");
        self.failures.push(Failure {
            region: region.to_string(),
            what: what.into(),
            error,
        });
    }

    fn refuse(
        &mut self,
        region: &str,
        instance_type: Option<String>,
        operation: &'static str,
        reason: AnomalyReason,
    ) {
        self.anomalies.push(Anomaly {
            region: region.to_string(),
            instance_type,
            operation,
            reason,
        });
    }
}

/// Connects (credentials checked first) and prices every configured region.
pub async fn fetch(config: AwsConfig) -> Result<AwsPrices, AwsError> {
    let clients = AwsClients::connect(config).await?;
    Ok(fetch_with(&clients).await)
}

/// Prices every configured region with connected clients.
pub async fn fetch_with(clients: &AwsClients) -> AwsPrices {
    let config = clients.config().clone();
    let at = Provenance {
        fetched_at: Utc::now(),
    };
    let mut out = AwsPrices::default();
    let mut all_types = Vec::new();
    for region in &config.regions {
        match fetch_region(clients, region, &Query::default(), &at, &mut out).await {
            Ok(types) => all_types.extend(types),
            Err(e) => out.fail(region, "DescribeInstanceTypes", e),
        }
    }
    all_types.sort();
    all_types.dedup();
    if let Some(target) = config.placement_target_capacity
        && !all_types.is_empty()
    {
        match clients
            .spot_placement_scores(&all_types, &config.regions, target)
            .await
        {
            Ok((scores, refused)) => {
                out.placement_scores = scores;
                for r in refused {
                    out.refuse("global", None, "GetSpotPlacementScores", r);
                }
            }
            Err(e) => out.fail("global", "GetSpotPlacementScores", e),
        }
    }
    out
}

/// Prices one region into `out`, fetching only what `query` wants (accelerators, kinds).
/// Fails only when the region's instance types cannot be listed; a failing price call is
/// recorded in `out.failures` and the rest of the region is still priced. Returns the GPU
/// instance types found.
pub async fn fetch_region(
    clients: &AwsClients,
    region: &str,
    query: &Query,
    at: &Provenance,
    out: &mut AwsPrices,
) -> Result<Vec<String>, AwsError> {
    let mut specs = gpu_specs(clients, region, out).await?;
    specs.retain(|_, spec| query.wants_accelerator(spec.accelerator));
    if query.wants_kind(PurchaseKind::OnDemand) || query.wants_kind(PurchaseKind::Commitment) {
        list_prices(clients, region, &specs, at, out).await;
    }
    if query.wants_kind(PurchaseKind::Spot) {
        spot_prices(clients, region, &specs, at, out).await;
    }
    if query.wants_kind(PurchaseKind::CapacityBlock) {
        capacity_blocks(clients, region, &specs, at, out).await;
    }
    out.offers.retain(|o| query.wants(o));
    Ok(specs.into_keys().collect())
}

async fn gpu_specs(
    clients: &AwsClients,
    region: &str,
    out: &mut AwsPrices,
) -> Result<BTreeMap<String, GpuSpec>, AwsError> {
    let mut specs = BTreeMap::new();
    for (name, devices) in clients.accelerated_instance_types(region).await? {
        match instance_types::gpu_spec(&devices) {
            Ok(Some(spec)) => {
                specs.insert(name, spec);
            }
            Ok(None) => {}
            // Accelerators gpucap does not model (Inferentia, Radeon, Gaudi) are not surprising;
            // they are left out quietly. Anything else about the devices is reported.
            Err(AnomalyReason::UnknownAccelerator { name: model }) => {
                tracing::debug!(
                    region,
                    "aws: skipping {name}: accelerator `{model}` is not in gpucap's catalog"
                );
            }
            Err(r) => out.refuse(region, Some(name), "DescribeInstanceTypes", r),
        }
    }
    Ok(specs)
}

async fn list_prices(
    clients: &AwsClients,
    region: &str,
    specs: &BTreeMap<String, GpuSpec>,
    at: &Provenance,
    out: &mut AwsPrices,
) {
    const OP: &str = "GetProducts";
    for (instance_type, spec) in specs {
        let products = match clients.products(region, instance_type).await {
            Ok(p) => p,
            Err(e) => {
                out.fail(region, format!("{OP} {instance_type}"), e);
                continue;
            }
        };
        for element in &products {
            let decoded = price_list::decode(element);
            for (t, r) in decoded.refused {
                out.refuse(region, t.or(Some(instance_type.clone())), OP, r);
            }
            for price in decoded.prices {
                match normalise::list_price(region, &price, spec, at) {
                    Ok(offer) => out.offers.push(offer),
                    Err(r) => out.refuse(region, Some(price.instance_type.clone()), OP, r),
                }
            }
        }
    }
}

async fn spot_prices(
    clients: &AwsClients,
    region: &str,
    specs: &BTreeMap<String, GpuSpec>,
    at: &Provenance,
    out: &mut AwsPrices,
) {
    const OP: &str = "DescribeSpotPriceHistory";
    if specs.is_empty() {
        return;
    }
    let types: Vec<String> = specs.keys().cloned().collect();
    let points = match clients.spot_price_history(region, &types).await {
        Ok(p) => p,
        Err(e) => return out.fail(region, OP, e),
    };
    let (prices, refused) = spot::latest(&points);
    for (t, r) in refused {
        out.refuse(region, Some(t), OP, r);
    }
    for p in prices {
        match specs.get(&p.instance_type) {
            Some(spec) => out.offers.push(normalise::spot(region, &p, spec, at)),
            None => out.refuse(
                region,
                Some(p.instance_type.clone()),
                OP,
                AnomalyReason::Malformed {
                    detail: "spot price for an instance type that was not asked for".into(),
                },
            ),
        }
    }
}

async fn capacity_blocks(
    clients: &AwsClients,
    region: &str,
    specs: &BTreeMap<String, GpuSpec>,
    at: &Provenance,
    out: &mut AwsPrices,
) {
    const OP: &str = "DescribeCapacityBlockOfferings";
    let queries = clients.config().capacity_blocks.clone();
    for (instance_type, spec) in specs
        .iter()
        .filter(|(t, _)| AwsConfig::sells_capacity_blocks(t))
    {
        for q in &queries {
            let rows = match clients
                .capacity_block_offerings(region, instance_type, q.instance_count, q.duration_hours)
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    out.fail(region, format!("{OP} {instance_type}"), e);
                    continue;
                }
            };
            for row in rows {
                match capacity_blocks::parse(&row) {
                    Ok(cb) if cb.instance_type == *instance_type => out
                        .offers
                        .push(normalise::capacity_block(region, &cb, spec, at)),
                    Ok(cb) => out.refuse(
                        region,
                        Some(cb.instance_type),
                        OP,
                        AnomalyReason::Malformed {
                            detail: format!(
                                "offering {} is for another instance type than `{instance_type}`",
                                cb.offering_id
                            ),
                        },
                    ),
                    Err(r) => out.refuse(region, Some(instance_type.clone()), OP, r),
                }
            }
        }
    }
}
