//! How long a planning period is. Plans are laid on whole hours unless an input needs finer
//! ones: an AWS capacity block starts at 11:30 UTC, and on a grid of whole hours it covers
//! only from 12:00, so a campaign that starts at 11:30 on it would need an hour of on-demand
//! nodes beside it (and their quota), and so would every change from one block to the next.
//! The period is the longest of 60, 30 or 15 minutes on whose grid every edge falls: each
//! campaign's and forecast point's start and end, the start of every capacity block a pool may
//! buy (by its cloud's purchase rule, or a dated offering's own start), and the ends of capacity
//! already owned. An edge off the quarter hours is rounded out to the grid, as before.

use chrono::{DateTime, Timelike, Utc};
use gpucap_provider::purchase_rules::{self, StartTime};
use gpucap_provider::{Offer, PurchaseKind};

use crate::calendar::Campaign;
use crate::config::Config;
use crate::demand::{DemandCurve, ForecastSource};
use crate::timespec::period_minutes;

use super::{ExistingCapacity, offers};

/// The planning period, in minutes, for these inputs (see the module's doc).
pub fn minutes(
    config: &Config,
    demand: &DemandCurve,
    campaigns: &[Campaign],
    forecasts: &[ForecastSource],
    offers: &[Offer],
    existing: &[ExistingCapacity],
) -> u32 {
    let minute = |t: DateTime<Utc>| t.minute();
    let mut edges: Vec<u32> = Vec::new();
    for c in campaigns {
        edges.extend([minute(c.schedule.start()), minute(c.schedule.end())]);
    }
    for f in forecasts {
        for p in &f.series.points {
            edges.extend([minute(p.start), minute(p.end)]);
        }
    }
    for pool in &demand.pools {
        for o in offers::for_pool(pool, offers, &config.budget) {
            if o.kind != PurchaseKind::CapacityBlock {
                continue;
            }
            match o.earliest_start {
                Some(at) => edges.push(minute(at)),
                None => {
                    if let Some(StartTime::DailyAt { minute, .. }) =
                        purchase_rules::for_offer(o.cloud, o.kind, o.term_hours).map(|r| r.start)
                    {
                        edges.push(minute);
                    }
                }
            }
        }
    }
    for e in existing {
        edges.extend(e.start.iter().chain(&e.end).map(|&t| minute(t)));
    }
    period_minutes(edges)
}
