//! Figures about a demand curve that people ask first: the peak and who drives it, GPU-hours
//! per month, firm against flex, and how the scenarios compare.

use std::collections::BTreeMap;

use chrono::Datelike;
use serde::Serialize;

use super::{DemandCurve, PoolCurve, hourly};

/// One contributor at the peak hour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Driver {
    pub label: String,
    pub gpus: u32,
    pub flex: bool,
}

/// GPU-hours in one calendar month (UTC).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Month {
    /// `YYYY-MM`.
    pub month: String,
    pub firm_gpu_hours: u64,
    pub flex_gpu_hours: u64,
}

/// Summary of one pool in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolSummary {
    pub pool: String,
    pub accelerator: String,
    pub peak_gpus: u32,
    /// First hour at which the peak is reached; `None` when there is no demand.
    pub peak_hour: Option<u32>,
    pub peak_firm_gpus: u32,
    pub peak_flex_gpus: u32,
    pub firm_gpu_hours: u64,
    pub flex_gpu_hours: u64,
    pub months: Vec<Month>,
    /// Contributors at the peak hour, largest first.
    pub drivers: Vec<Driver>,
}

/// Summaries of every pool in one scenario.
pub fn summarise(curve: &DemandCurve, scenario: usize) -> Vec<PoolSummary> {
    let h = curve.horizon;
    let hours = h.periods;
    curve
        .pools
        .iter()
        .zip(&curve.scenarios[scenario].pools)
        .map(|(pool, pc)| {
            let firm = hourly(hours, &pc.firm);
            let flex = hourly(hours, &pc.flex);
            let total: Vec<u32> = firm.iter().zip(&flex).map(|(a, b)| a + b).collect();
            let peak_gpus = total.iter().copied().max().unwrap_or(0);
            let peak_hour = (peak_gpus > 0)
                .then(|| total.iter().position(|&v| v == peak_gpus))
                .flatten()
                .map(|h| h as u32);
            let mut months: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for t in 0..hours as usize {
                if total[t] == 0 {
                    continue;
                }
                let when = curve.horizon.time_of(t as u32);
                let m = months
                    .entry(format!("{:04}-{:02}", when.year(), when.month()))
                    .or_default();
                m.0 += firm[t] as u64;
                m.1 += flex[t] as u64;
            }
            PoolSummary {
                pool: pool.id.clone(),
                accelerator: pool.accelerator.name().to_string(),
                peak_gpus,
                peak_hour,
                peak_firm_gpus: peak_hour.map_or(0, |h| firm[h as usize]),
                peak_flex_gpus: peak_hour.map_or(0, |h| flex[h as usize]),
                firm_gpu_hours: h.hours_of(firm.iter().map(|&v| v as u64).sum()),
                flex_gpu_hours: h.hours_of(flex.iter().map(|&v| v as u64).sum()),
                months: months
                    .into_iter()
                    .map(|(month, (f, x))| Month {
                        month,
                        firm_gpu_hours: h.hours_of(f),
                        flex_gpu_hours: h.hours_of(x),
                    })
                    .collect(),
                drivers: peak_hour.map(|h| drivers(pc, h)).unwrap_or_default(),
            }
        })
        .collect()
}

fn drivers(pc: &PoolCurve, hour: u32) -> Vec<Driver> {
    let mut d: Vec<Driver> = pc
        .contributions
        .iter()
        .map(|c| Driver {
            label: c.label.clone(),
            gpus: c.at(hour),
            flex: c.flex,
        })
        .filter(|d| d.gpus > 0)
        .collect();
    d.sort_by(|a, b| b.gpus.cmp(&a.gpus).then_with(|| a.label.cmp(&b.label)));
    d
}

/// Peak and GPU-hours of each scenario, all pools together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioSummary {
    pub name: String,
    pub probability: f64,
    pub gpu_hours: u64,
    /// Per pool, in pool order.
    pub peak_gpus: Vec<u32>,
}

pub fn compare_scenarios(curve: &DemandCurve) -> Vec<ScenarioSummary> {
    let hours = curve.horizon.periods;
    curve
        .scenarios
        .iter()
        .map(|s| ScenarioSummary {
            name: s.name.clone(),
            probability: s.probability,
            gpu_hours: curve.horizon.hours_of(
                s.pools
                    .iter()
                    .flat_map(|p| p.firm.iter().chain(&p.flex))
                    .map(|seg| seg.len() as u64 * seg.2 as u64)
                    .sum(),
            ),
            peak_gpus: s
                .pools
                .iter()
                .map(|p| {
                    let f = hourly(hours, &p.firm);
                    let x = hourly(hours, &p.flex);
                    f.iter().zip(&x).map(|(a, b)| a + b).max().unwrap_or(0)
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::{Contribution, Pool, ScenarioCurve};
    use crate::problem::Segment;
    use crate::timespec::{Horizon, Span, parse_timestamp};

    #[test]
    fn peak_drivers_and_months() {
        let horizon = Horizon::new(
            parse_timestamp("2027-01-31T20:00:00Z").unwrap(),
            Span::hours(10),
        );
        let c = |label: &str, flex, segs: Vec<Segment>| Contribution {
            label: label.into(),
            team: None,
            flex,
            segments: segs,
        };
        let contributions = vec![
            c("a", false, vec![Segment(0, 6, 8)]),
            c("b", true, vec![Segment(3, 10, 4)]),
            c("z", false, vec![Segment(5, 6, 8)]),
        ];
        let pc = PoolCurve {
            firm: super::super::merge(10, [Segment(0, 6, 8), Segment(5, 6, 8)].into_iter()),
            flex: vec![Segment(3, 10, 4)],
            contributions,
        };
        let curve = DemandCurve {
            horizon,
            pools: vec![Pool {
                id: "p".into(),
                accelerator: "h100".parse().unwrap(),
                clouds: vec![],
                regions: vec![],
                configured: true,
            }],
            scenarios: vec![ScenarioCurve {
                name: "e".into(),
                probability: 1.0,
                pools: vec![pc],
            }],
            warnings: vec![],
        };
        let s = &summarise(&curve, 0)[0];
        assert_eq!(s.peak_gpus, 20);
        assert_eq!(s.peak_hour, Some(5));
        assert_eq!((s.peak_firm_gpus, s.peak_flex_gpus), (16, 4));
        assert_eq!(
            s.drivers
                .iter()
                .map(|d| d.label.as_str())
                .collect::<Vec<_>>(),
            ["a", "z", "b"]
        );
        assert_eq!(s.firm_gpu_hours, 56);
        assert_eq!(s.flex_gpu_hours, 28);
        // Hours 0-3 are in January, 4-9 in February.
        assert_eq!(
            s.months[0],
            Month {
                month: "2027-01".into(),
                firm_gpu_hours: 32,
                flex_gpu_hours: 4
            }
        );
        assert_eq!(s.months[1].month, "2027-02");
        assert_eq!(compare_scenarios(&curve)[0].gpu_hours, 84);
    }
}
