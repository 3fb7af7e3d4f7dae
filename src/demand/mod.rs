//! The demand curve: firm and flex GPUs per pool, period by period (hours unless an input
//! needs half or quarter hours), per scenario, built from campaigns and forecasts. Pure: the inputs are already parsed.
//!
//! Order of operations, per scenario: a campaign's buffer is applied first (`gpus × (1 +
//! buffer)`), then the scenario's scale, rounded up to whole GPUs; the scenario's slip moves the
//! campaign later; the result is clipped to the horizon. Forecast values use the scenario's
//! quantile and are rounded up. Interruptible campaigns (and forecasts marked `flex`) are flex
//! demand, the rest firm; critical campaigns are always firm, so they never land on spot.
//!
//! Besides the totals, every curve keeps each campaign's and forecast's own contribution, so
//! reports can say which campaigns drive a peak and charts can stack them.

pub mod pools;
pub mod summary;

use serde::Serialize;

use crate::calendar::{Campaign, Priority};
use crate::config::{Config, ScenarioConfig};
use crate::diagnostic::{InputError, Location, Warning};
use crate::forecast::Series;
use crate::limits::MAX_POOL_GPUS;
use crate::problem::{PoolDemand, Scenario, Segment};
use crate::timespec::{Horizon, rfc3339};
pub use pools::Pool;

/// What one campaign or forecast adds to a pool in one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    /// Campaign name, or `forecast:FILE` for forecasts.
    pub label: String,
    pub team: Option<String>,
    pub flex: bool,
    /// Non-overlapping segments of GPUs.
    pub segments: Vec<Segment>,
}

impl Contribution {
    pub fn at(&self, hour: u32) -> u32 {
        self.segments
            .iter()
            .filter(|s| s.0 <= hour && hour < s.1)
            .map(|s| s.2)
            .sum()
    }

    /// GPU-periods (GPU-hours on an hourly horizon; see [`Horizon::hours_of`]).
    pub fn gpu_periods(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.len() as u64 * s.2 as u64)
            .sum()
    }
}

/// One pool's demand in one scenario.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolCurve {
    /// Non-overlapping, zero-free segments of firm GPUs.
    pub firm: Vec<Segment>,
    pub flex: Vec<Segment>,
    pub contributions: Vec<Contribution>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioCurve {
    pub name: String,
    pub probability: f64,
    /// In the order of [`DemandCurve::pools`].
    pub pools: Vec<PoolCurve>,
}

/// Hourly demand for the whole horizon.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandCurve {
    pub horizon: Horizon,
    pub pools: Vec<Pool>,
    /// The first scenario is the baseline that summaries and charts show.
    pub scenarios: Vec<ScenarioCurve>,
    pub warnings: Vec<Warning>,
}

/// The demand part of a `gpucap.problem/v1` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemandDocument {
    pub start: String,
    /// Periods (hours unless `period_minutes` says otherwise).
    pub hours: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_minutes: Option<u32>,
    pub pools: Vec<String>,
    pub scenarios: Vec<Scenario>,
}

/// A forecast as configured: its series and how to count it.
#[derive(Debug, Clone)]
pub struct ForecastSource {
    pub series: Series,
    pub flex: bool,
    pub team: Option<String>,
}

/// Builds the demand curve.
pub fn build(
    config: &Config,
    horizon: Horizon,
    campaigns: &[Campaign],
    forecasts: &[ForecastSource],
) -> Result<DemandCurve, InputError> {
    let mut pools = pools::Pools::new(&config.pools);
    let campaign_pool: Vec<usize> = campaigns
        .iter()
        .map(|c| pools.for_campaign(c))
        .collect::<Result<_, _>>()?;
    let forecast_pool: Vec<usize> = forecasts
        .iter()
        .map(|f| pools.for_forecast(&f.series))
        .collect::<Result<_, _>>()?;
    let pools = pools.into_pools();

    let mut warnings = Vec::new();
    for c in campaigns {
        if horizon.clip(c.schedule.start(), c.schedule.end()).is_none() {
            warnings.push(Warning {
                location: c.source.clone(),
                message: format!(
                    "campaign `{}` ({} to {}) is outside the planning horizon ({} to {}) and adds no demand",
                    c.name,
                    rfc3339(c.schedule.start()),
                    rfc3339(c.schedule.end()),
                    rfc3339(horizon.start),
                    rfc3339(horizon.end()),
                ),
            });
        }
    }
    for f in forecasts {
        let (first, last) = (f.series.points.first(), f.series.points.last());
        if let (Some(a), Some(b)) = (first, last)
            && horizon.clip(a.start, b.end).is_none()
        {
            warnings.push(Warning {
                location: Location::file(&f.series.file),
                message: format!(
                    "forecast for `{}` does not overlap the planning horizon",
                    f.series.pool
                ),
            });
        }
    }

    let scenarios = config
        .scenarios
        .iter()
        .map(|s| {
            let mut curves: Vec<PoolCurve> = vec![PoolCurve::default(); pools.len()];
            for (c, &p) in campaigns.iter().zip(&campaign_pool) {
                if let Some(contribution) =
                    campaign_contribution(c, s, config.demand.buffer, horizon)
                {
                    curves[p].contributions.push(contribution);
                }
            }
            for (f, &p) in forecasts.iter().zip(&forecast_pool) {
                if let Some(contribution) = forecast_contribution(f, s, horizon) {
                    curves[p].contributions.push(contribution);
                }
            }
            for curve in &mut curves {
                let of = |flex: bool| {
                    curve
                        .contributions
                        .iter()
                        .filter(move |c| c.flex == flex)
                        .flat_map(|c| c.segments.iter().copied())
                };
                curve.firm = merge(horizon.periods, of(false));
                curve.flex = merge(horizon.periods, of(true));
            }
            for (pool, curve) in pools.iter().zip(&curves) {
                check_peak(pool, s, curve)?;
            }
            Ok(ScenarioCurve {
                name: s.name.clone(),
                probability: s.probability,
                pools: curves,
            })
        })
        .collect::<Result<_, InputError>>()?;
    Ok(DemandCurve {
        horizon,
        pools,
        scenarios,
        warnings,
    })
}

/// A pool may need at most [`MAX_POOL_GPUS`] at one hour (firm and flex together): beyond
/// it the solver's counts would no longer be exact, and no input meant it. The error names
/// what makes the peak, largest first.
fn check_peak(pool: &Pool, s: &ScenarioConfig, curve: &PoolCurve) -> Result<(), InputError> {
    let peak = |segments: &[Segment]| segments.iter().map(|x| u64::from(x.2)).max().unwrap_or(0);
    let total = peak(&curve.firm) + peak(&curve.flex);
    if total <= MAX_POOL_GPUS {
        return Ok(());
    }
    let mut largest: Vec<(u64, &str)> = curve
        .contributions
        .iter()
        .map(|c| (peak(&c.segments), c.label.as_str()))
        .collect();
    largest.sort_by(|a, b| b.cmp(a));
    let named: Vec<String> = largest
        .iter()
        .take(3)
        .map(|(g, l)| format!("`{l}` ({g} GPUs)"))
        .collect();
    Err(InputError::new(
        Location::default().field(format!("pools.{}", pool.id)),
        format!(
            "pool `{}` would need up to {total} GPUs at once in scenario `{}`, more than the {MAX_POOL_GPUS} gpucap plans for; the largest demands: {}",
            pool.id,
            s.name,
            named.join(", ")
        ),
    )
    .with_hint("check those numbers and the scenario's `scale`"))
}

fn campaign_contribution(
    c: &Campaign,
    s: &ScenarioConfig,
    default_buffer: f64,
    horizon: Horizon,
) -> Option<Contribution> {
    let buffer = c.buffer.unwrap_or(default_buffer);
    // At most MAX_GPUS × 11 × MAX_SCALE: finite, and saturating at u32::MAX where it is cast;
    // the pool's peak check then refuses it by name.
    let gpus = (c.gpus as f64 * (1.0 + buffer) * s.scale - 1e-9)
        .ceil()
        .clamp(0.0, f64::from(u32::MAX)) as u32;
    let slip = s.slip.as_duration();
    // Dates and slips are bounded when read; a sum past chrono's range would be past any
    // horizon too, so it adds nothing rather than panic.
    let (from, to) = horizon.clip(
        c.schedule.start().checked_add_signed(slip)?,
        c.schedule.end().checked_add_signed(slip)?,
    )?;
    (gpus > 0).then(|| Contribution {
        label: c.name.clone(),
        team: c.team.clone(),
        // Critical campaigns stay off spot even when they checkpoint: the `spot.critical` gate
        // would deny any plan that put them there.
        flex: c.interruptible && c.priority != Priority::Critical,
        segments: vec![Segment(from, to, gpus)],
    })
}

fn forecast_contribution(
    f: &ForecastSource,
    s: &ScenarioConfig,
    horizon: Horizon,
) -> Option<Contribution> {
    let segments: Vec<Segment> = f
        .series
        .points
        .iter()
        .filter_map(|p| {
            let gpus = (p.value(s.forecast) - 1e-9).ceil().max(0.0) as u32;
            let (from, to) = horizon.clip(p.start, p.end)?;
            (gpus > 0).then_some(Segment(from, to, gpus))
        })
        .collect();
    let name = f.series.file.file_name().map_or_else(
        || f.series.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    (!segments.is_empty()).then(|| Contribution {
        // File names are not checked like names in files; shown escaped wherever they appear.
        label: format!("forecast:{}", crate::text::visible(&name)),
        team: f.team.clone(),
        flex: f.flex,
        segments: merge(horizon.periods, segments.into_iter()),
    })
}

/// Sums possibly overlapping segments into non-overlapping, zero-free maximal segments.
pub fn merge(hours: u32, segments: impl Iterator<Item = Segment>) -> Vec<Segment> {
    let mut delta = vec![0i64; hours as usize + 1];
    for s in segments {
        let (from, to) = (s.0.min(hours), s.1.min(hours));
        if from < to && s.2 > 0 {
            delta[from as usize] += s.2 as i64;
            delta[to as usize] -= s.2 as i64;
        }
    }
    let mut out = Vec::new();
    let (mut level, mut since) = (0i64, 0u32);
    for (t, d) in delta.iter().enumerate() {
        if *d == 0 {
            continue;
        }
        if level > 0 {
            // Saturates rather than wrap: a sum past u32 is refused by the peak check.
            let gpus = u32::try_from(level).unwrap_or(u32::MAX);
            out.push(Segment(since, t as u32, gpus));
        }
        level += d;
        since = t as u32;
    }
    out
}

/// Value of segments at each hour of `[0, hours)`, summing overlaps; segments past the end
/// are clipped and backwards ones skipped (plan files read back are input, not trusted).
pub fn hourly(hours: u32, segments: &[Segment]) -> Vec<u32> {
    let mut v = vec![0u32; hours as usize];
    for s in segments {
        let (from, to) = (s.0 as usize, s.1.min(hours) as usize);
        for x in v.iter_mut().take(to).skip(from) {
            *x = x.saturating_add(s.2);
        }
    }
    v
}

impl DemandCurve {
    /// The `start`, `hours`, `pools` and `scenarios` of a `gpucap.problem/v1` document.
    pub fn document(&self) -> DemandDocument {
        DemandDocument {
            start: rfc3339(self.horizon.start),
            hours: self.horizon.periods,
            period_minutes: (self.horizon.minutes != 60).then_some(self.horizon.minutes),
            pools: self.pools.iter().map(|p| p.id.clone()).collect(),
            scenarios: self
                .scenarios
                .iter()
                .map(|s| Scenario {
                    name: s.name.clone(),
                    probability: s.probability,
                    demand: self
                        .pools
                        .iter()
                        .zip(&s.pools)
                        .filter(|(_, c)| !c.firm.is_empty() || !c.flex.is_empty())
                        .map(|(p, c)| {
                            (
                                p.id.clone(),
                                PoolDemand {
                                    firm: c.firm.clone(),
                                    flex: c.flex.clone(),
                                    gangs: Vec::new(),
                                },
                            )
                        })
                        .collect(),
                    max_instances: Default::default(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hourly_sums_overlaps_clips_and_skips_backwards_segments() {
        assert_eq!(
            hourly(4, &[Segment(1, 3, 2), Segment(2, 9, 1), Segment(3, 1, 5)]),
            [0, 2, 3, 1]
        );
    }
    use crate::calendar::{RawCampaign, Schedule};
    use crate::timespec::{Span, Timestamp, parse_timestamp};
    use std::path::Path;

    fn config(extra: &str) -> Config {
        Config::parse(
            &format!("[planning]\nstart = 2027-01-01\nhorizon = \"10d\"\n{extra}"),
            Path::new("g.toml"),
        )
        .unwrap()
    }

    fn campaign(name: &str, acc: &str, gpus: i64, start: &str, hours: i64, flex: bool) -> Campaign {
        let mut raw = RawCampaign::new(name, acc.parse().unwrap());
        raw.gpus = Some(gpus);
        raw.start = Some(Timestamp(parse_timestamp(start).unwrap()));
        raw.duration = Some(Span::hours(hours));
        raw.interruptible = flex;
        raw.validate(Location::default()).unwrap()
    }

    #[test]
    fn merge_adds_overlaps_and_drops_zeros() {
        let m = merge(
            10,
            [
                Segment(0, 4, 2),
                Segment(2, 6, 3),
                Segment(8, 20, 1),
                Segment(5, 5, 9),
            ]
            .into_iter(),
        );
        assert_eq!(
            m,
            [
                Segment(0, 2, 2),
                Segment(2, 4, 5),
                Segment(4, 6, 3),
                Segment(8, 10, 1)
            ]
        );
        assert_eq!(hourly(10, &m), [2, 2, 5, 5, 3, 3, 0, 0, 1, 1]);
    }

    #[test]
    fn scenarios_apply_buffer_scale_and_slip() {
        let cfg = config(
            "[demand]\nbuffer = 0.25\n[[scenarios]]\nname = \"expected\"\nprobability = 0.5\n\
             [[scenarios]]\nname = \"late\"\nprobability = 0.25\nslip = \"2d\"\n\
             [[scenarios]]\nname = \"big\"\nprobability = 0.25\nscale = 1.5\n",
        );
        let h = cfg.horizon(chrono::Utc::now());
        let cs = [
            campaign("a", "h100", 8, "2027-01-02", 24, false),
            campaign("b", "h100", 4, "2027-01-09", 72, true),
        ];
        let d = build(&cfg, h, &cs, &[]).unwrap();
        assert_eq!(d.pools.len(), 1);
        let doc = d.document();
        let firm = |k: usize| doc.scenarios[k].demand["h100"].firm.clone();
        let flex = |k: usize| doc.scenarios[k].demand["h100"].flex.clone();
        assert_eq!(firm(0), [Segment(24, 48, 10)], "8 GPUs + 25 % buffer");
        assert_eq!(
            flex(0),
            [Segment(192, 240, 5)],
            "clipped at the horizon end"
        );
        assert_eq!(firm(1), [Segment(72, 96, 10)], "two days later");
        assert!(flex(1).is_empty(), "slipped out of the horizon");
        assert_eq!(firm(2), [Segment(24, 48, 15)], "10 × 1.5");
    }

    #[test]
    fn work_campaigns_spread_evenly() {
        let cfg = config("");
        let h = cfg.horizon(chrono::Utc::now());
        let mut c = campaign("w", "l4", 1, "2027-01-01", 1, true);
        c.schedule = Schedule::Work {
            gpu_hours: 100.0,
            start: parse_timestamp("2027-01-01").unwrap(),
            end: parse_timestamp("2027-01-02").unwrap(),
        };
        c.gpus = 5;
        let d = build(&cfg, h, &[c], &[]).unwrap();
        assert_eq!(d.scenarios[0].pools[0].flex, [Segment(0, 24, 5)]);
    }

    #[test]
    fn campaigns_outside_the_horizon_warn() {
        let cfg = config("");
        let h = cfg.horizon(chrono::Utc::now());
        let d = build(
            &cfg,
            h,
            &[campaign("old", "h100", 8, "2026-01-01", 24, false)],
            &[],
        )
        .unwrap();
        assert_eq!(d.warnings.len(), 1);
        assert!(
            d.warnings[0]
                .message
                .contains("outside the planning horizon")
        );
    }
}
