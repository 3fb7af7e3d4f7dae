//! One GCP pricing run: reads the Billing Catalog and Compute Engine's machine and accelerator
//! types, and prices every accelerator-optimised machine in every zone that offers it, for
//! each way of buying it. A failing list or region is recorded, never fatal to the rest.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use gpucap_provider::{Offer, Query};

use crate::anomaly::{Anomaly, AnomalyReason};
use crate::client::GcpClients;
use crate::config::GcpConfig;
use crate::error::GcpError;
use crate::machines::{self, MachineRow, MachineShape, ZoneAccelerator, region_of};
use crate::names;
use crate::normalise::{self, PriceBook};
use crate::sku::{self, SkuRow, Usage};

/// Everything one run learnt about GCP.
#[derive(Debug, Default)]
pub struct GcpPrices {
    pub offers: Vec<Offer>,
    /// Lists that failed; whatever else was fetched is still priced.
    pub failures: Vec<Failure>,
    /// Rows refused and reported instead of used.
    pub anomalies: Vec<Anomaly>,
}

/// One failed list call.
#[derive(Debug)]
pub struct Failure {
    pub what: &'static str,
    pub error: GcpError,
}

/// The three global lists a pricing pass reads. `accelerators` is `None` when that list could
/// not be fetched: zones are then not cross-checked rather than all refused.
#[derive(Debug, Default)]
pub struct Lists {
    pub skus: Vec<SkuRow>,
    pub machines: Vec<MachineRow>,
    pub accelerators: Option<Vec<ZoneAccelerator>>,
}

/// Connects (credentials resolved first) and prices.
pub async fn fetch(config: GcpConfig) -> Result<GcpPrices, GcpError> {
    let clients = GcpClients::connect(config).await?;
    Ok(fetch_with(&clients).await)
}

/// Prices with connected clients; a failing list is recorded and the rest still priced.
pub async fn fetch_with(clients: &GcpClients) -> GcpPrices {
    let mut out = GcpPrices::default();
    let mut lists = Lists::default();
    match clients.compute_skus().await {
        Ok(s) => lists.skus = s,
        Err(error) => out.failures.push(Failure {
            what: "services.skus.list",
            error,
        }),
    }
    match clients.accelerator_machine_types().await {
        Ok(m) => lists.machines = m,
        Err(error) => out.failures.push(Failure {
            what: "machineTypes.aggregatedList",
            error,
        }),
    }
    match clients.zone_accelerators().await {
        Ok(a) => lists.accelerators = Some(a),
        Err(error) => out.failures.push(Failure {
            what: "acceleratorTypes.aggregatedList",
            error,
        }),
    }
    let regions = clients.config().regions.clone();
    let (offers, anomalies) = price(
        &lists,
        &Query::default(),
        &|zone| regions.is_empty() || regions.iter().any(|r| r == region_of(zone)),
        Utc::now(),
    );
    out.offers = offers;
    out.anomalies = anomalies;
    out
}

/// Fetches the three lists, failing on the first list that fails.
pub async fn fetch_lists(clients: &GcpClients) -> Result<Lists, GcpError> {
    Ok(Lists {
        skus: clients.compute_skus().await?,
        machines: clients.accelerator_machine_types().await?,
        accelerators: Some(clients.zone_accelerators().await?),
    })
}

/// Prices every accelerator-optimised machine in the zones `zone_wanted` accepts, for the
/// accelerators and purchase kinds `query` wants. Pure.
pub fn price(
    lists: &Lists,
    query: &Query,
    zone_wanted: &dyn Fn(&str) -> bool,
    fetched_at: DateTime<Utc>,
) -> (Vec<Offer>, Vec<Anomaly>) {
    let (mut offers, mut anomalies) = (Vec::new(), Vec::new());
    let mut prices = Vec::new();
    for row in &lists.skus {
        match sku::classify(row) {
            Ok(p) => prices.extend(p),
            Err(reason) => anomalies.push(Anomaly {
                subject: sku_subject(row),
                operation: "services.skus.list",
                reason,
            }),
        }
    }
    let book = PriceBook::new(prices);
    let by_zone = lists.accelerators.as_deref().map(machines::by_zone);
    let mut missing_reported = BTreeSet::new();
    for row in lists.machines.iter().filter(|r| zone_wanted(&r.zone)) {
        let Some(series) = names::series_of_machine(&row.name) else {
            continue;
        };
        let shape = match machines::shape(row) {
            Ok(s) => s,
            Err(reason) => {
                let subject = format!("{} in {}", row.name, row.zone);
                anomalies.push(Anomaly {
                    subject,
                    operation: "machineTypes.aggregatedList",
                    reason,
                });
                continue;
            }
        };
        let Some(gpu_type) = known_gpu(&shape) else {
            tracing::debug!(
                "gcp: skipping {}: accelerator `{}` is not in gpucap's catalog",
                shape.name,
                shape.accelerator_type
            );
            continue;
        };
        if let Some(by_zone) = &by_zone
            && let Err(reason) = offered_in_zone(&shape, by_zone)
        {
            let subject = format!("{} in {}", shape.name, shape.zone);
            anomalies.push(Anomaly {
                subject,
                operation: "acceleratorTypes.aggregatedList",
                reason,
            });
            continue;
        }
        for usage in [
            Usage::OnDemand,
            Usage::Spot,
            Usage::Commit1Yr,
            Usage::Commit3Yr,
        ] {
            match normalise::machine_offer(&shape, series, gpu_type, usage, &book, fetched_at) {
                Ok(Some(offer)) if query.wants(&offer) => offers.push(offer),
                Ok(_) => {}
                // One report per machine type, usage and region, not one per zone.
                Err(reason) => {
                    if missing_reported.insert((
                        shape.name.clone(),
                        usage,
                        region_of(&shape.zone).to_string(),
                    )) {
                        anomalies.push(Anomaly {
                            subject: shape.name.clone(),
                            operation: "services.skus.list",
                            reason,
                        });
                    }
                }
            }
        }
    }
    (offers, anomalies)
}

/// The accelerator type as a `'static` name from the mapping table, if gpucap prices it.
fn known_gpu(shape: &MachineShape) -> Option<&'static str> {
    names::GPU_MODELS
        .iter()
        .map(|(_, t)| *t)
        .find(|t| *t == shape.accelerator_type)
}

/// The zone must list the machine's accelerator type, with room for as many GPUs as the
/// machine type says it has.
fn offered_in_zone(
    shape: &MachineShape,
    by_zone: &std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, Option<i32>>>,
) -> Result<(), AnomalyReason> {
    let Some(max) = by_zone
        .get(shape.zone.as_str())
        .and_then(|z| z.get(shape.accelerator_type.as_str()))
    else {
        return Err(AnomalyReason::Malformed {
            detail: format!(
                "zone lists the machine type but not its accelerator `{}`",
                shape.accelerator_type
            ),
        });
    };
    match max {
        Some(m) if i64::from(*m) < i64::from(shape.gpus) => Err(AnomalyReason::Malformed {
            detail: format!(
                "machine type has {} GPUs but `{}` allows at most {m} per instance",
                shape.gpus, shape.accelerator_type
            ),
        }),
        _ => Ok(()),
    }
}

fn sku_subject(row: &sku::SkuRow) -> String {
    format!("{} ({})", row.sku_id, row.description)
}
