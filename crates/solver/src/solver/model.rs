//! The segment model of one pool as a mixed-integer program, and the plan read back from its
//! solution.
//!
//! All quantities are in units of `PoolData::unit` GPUs (a divisor of every instance size), so
//! demand is rounded up to whole units exactly. Variables:
//! - `n[o,s]` (integer): term instances bought at start s;
//! - `A[o,i]`: instances of term offer o active in its own interval i, kept by the recurrence
//!   `A[o,i] = A[o,i-1] + (bought at q_i) - (ending at q_i)` and bounded by `max_instances`, so
//!   each purchase appears in two rows however long its term (an interval matrix in network
//!   form);
//! - `T[j]`: term units in pool segment j, at least what the hourly offers' limits leave
//!   uncovered;
//! - `λ[j,c]`: weights on the corners of segment j's cost curve (below);
//! - `k[o,s]` (integer, v2 pieces only): the pieces purchase `n[o,s]` is made of, with
//!   `min·k ≤ n ≤ max·k` (`max` is the purchase's own upper bound when the offer has none) and
//!   `cost_per_purchase` each.
//!
//! The second stage is not modelled instance by instance. For each scenario and segment the
//! exact least hourly cost `Q(T)` of whole on-demand and spot instances is tabulated for every
//! reachable term level T (multiples of the term sizes' divisor) by [`Recourse`]. Where every
//! scenario's `Q` is convex on those levels (almost always), their probability-weighted sum
//! over the segment's hours is convex too, and the segment's cost is exactly a convex
//! combination of that curve's corners at a level no higher than `T`: two rows, no integer
//! variable. Where some `Q` is not convex (mixed instance sizes can make it so), the on-demand
//! and spot instances of that scenario and segment are integer variables with their coverage
//! rows instead. Either way the model is exact, and branch and bound only branches on
//! purchases and on the rare non-convex segments.
//!
//! A pool whose on-demand or spot offers are in a v2 shared limit is modelled instance by
//! instance in every scenario-segment with demand (`PoolData::explicit`): the curve `Q` is the
//! least cost without the limit, which is not the least cost with it. The shared-limit rows
//! themselves join several pool models (`super::coupled`), through `instance_columns` and
//! `active_columns`.

use std::collections::HashMap;
use std::rc::Rc;

use crate::problem::{OfferKind, Segment};

use super::diagnose::Missing;
use super::mip::Mip;
use super::pool::{GangNeed, HourlyOffer, PoolData, gcd};
use super::recourse::Recourse;

/// A plan for one pool: purchases `(offer, start, instances)` and, per scenario, per offer,
/// the instances in use as `[from, to, instances]` segments.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolPlan {
    pub purchases: Vec<(usize, u32, u32)>,
    pub usage: Vec<Vec<(usize, Vec<Segment>)>>,
    /// v3: `(gang, placement)` (indices into `Validated::gangs()`) for each gang of the pool.
    pub placements: Vec<(usize, usize)>,
}

/// `Q` at the term levels `step × a` for `a = first..`, the last one covering all demand.
#[derive(Debug)]
struct Curve {
    first: usize,
    values: Vec<f64>,
    convex: bool,
}

pub(crate) struct PoolModel<'a> {
    data: &'a PoolData,
    pub mip: Mip,
    /// Cost of the segments where no term can be active (no column needed).
    pub constant: f64,
    /// `n_cols[t][s]`: column of `n` for `data.terms[t].starts[s]`.
    n_cols: Vec<Vec<usize>>,
    /// `k_cols[t][s]`: the column of its pieces `k`, where modelled.
    k_cols: Vec<Vec<Option<usize>>>,
    recourse: Vec<Recourse>,
    /// Scenario-segments modelled instance by instance.
    pub integer_segments: usize,
    /// `(scenario, segment)` → `(offer, column)` of the instances of each hourly offer, where
    /// modelled instance by instance.
    instances: HashMap<(usize, usize), Vec<(usize, usize)>>,
    /// Per term offer (as `data.terms`): the breakpoints of its active-count intervals and the
    /// column `A` of each interval.
    active: Vec<(Vec<u32>, Vec<usize>)>,
    /// v3: per gang (as `data.gangs`), `(placement, column)`: the binary choosing it.
    gang_cols: Vec<Vec<(usize, usize)>>,
}

/// How to build the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Minimise cost.
    Cost,
    /// Drop all costs and let each term requirement fall short at a cost of one per
    /// unit-hour: it always has a solution, and it shows where the demand cannot be covered.
    Elastic,
}

impl<'a> PoolModel<'a> {
    pub fn build(data: &'a PoolData, mode: Mode) -> Self {
        let unit = data.unit;
        let recourse: Vec<Recourse> = (0..data.scenarios())
            .map(|k| {
                let max = data.total[k]
                    .iter()
                    .max()
                    .copied()
                    .unwrap_or(0)
                    .div_ceil(u64::from(unit));
                Recourse::new(&data.hourly[k], unit, max)
            })
            .collect();
        let mut mip = Mip::new();
        let (n_cols, k_cols) = term_columns(data, &mut mip, mode == Mode::Elastic);
        let (term_expr, active) = active_counts(data, &mut mip, &n_cols);
        let mut model = PoolModel {
            data,
            mip,
            constant: 0.0,
            n_cols,
            k_cols,
            recourse,
            integer_segments: 0,
            instances: HashMap::new(),
            active,
            gang_cols: Vec::new(),
        };
        let explicit = data.explicit && mode == Mode::Cost;
        // v3: gangs choose their placements in the cost model; where the hourly offers have
        // least-cost curves, each segment's gangs get their own rows ([`Self::add_gang_rows`]).
        let gangs = mode == Mode::Cost && data.has_gangs();
        if gangs {
            model.add_gang_choices();
        }
        let split = gangs && !explicit;
        let step = data.terms.iter().map(|t| t.gpus / unit).fold(0, gcd).max(1) as u64;
        let mut curves = Curves::default();
        for (j, term) in term_expr.iter().enumerate() {
            let demand = (0..data.scenarios()).any(|k| data.total[k][j] > 0);
            if !demand {
                continue;
            }
            let len = f64::from(data.timeline.len(j));
            if term.is_empty() && explicit {
                for k in 0..data.scenarios() {
                    if data.total[k][j] > 0 {
                        let units = data.units(k, j);
                        model.add_instances(k, j, units, data.probability[k] * len, None);
                    }
                }
                continue;
            }
            // Scenarios whose gangs get rows of their own here: the curves are of the rest.
            let placed: Vec<bool> = (0..data.scenarios())
                .map(|k| split && data.gangs_in(k, j).next().is_some())
                .collect();
            let units = |k: usize| {
                if placed[k] {
                    data.fluid_units(k, j)
                } else {
                    data.units(k, j)
                }
            };
            if term.is_empty() {
                // No term can be active here: the hourly cost is a constant (the capacity
                // check has made sure the hourly offers can cover it).
                for (k, &placed) in placed.iter().enumerate() {
                    let (f, d) = units(k);
                    model.constant +=
                        data.probability[k] * len * model.recourse[k].cost(f, d).unwrap_or(0.0);
                    if placed {
                        model.add_gang_rows(k, j, data.probability[k] * len, None);
                    }
                }
                continue;
            }
            let scenario_curves: Vec<Option<Rc<Curve>>> = (0..data.scenarios())
                .map(|k| {
                    let (f, d) = units(k);
                    (d > 0).then(|| curves.get(k, f, d, || curve(&model.recourse[k], f, d, step)))
                })
                .collect();
            let needed = scenario_curves
                .iter()
                .zip(&placed)
                .filter(|(_, placed)| !**placed)
                .filter_map(|(c, _)| c.as_ref())
                .map(|c| c.first as u64 * step)
                .max()
                .unwrap_or(0);
            let t = if mode == Mode::Elastic {
                let t = model.mip.add_col(0.0, 0.0, f64::INFINITY, false);
                let short = model.mip.add_col(len, 0.0, f64::INFINITY, false);
                model
                    .mip
                    .add_row(needed as f64, f64::INFINITY, [(t, 1.0), (short, 1.0)]);
                t
            } else {
                model.mip.add_col(0.0, needed as f64, f64::INFINITY, false)
            };
            let mut entries = vec![(t, 1.0)];
            entries.extend(term.iter().map(|&(c, v)| (c, -v)));
            model.mip.add_row(0.0, 0.0, entries);
            if mode == Mode::Elastic {
                continue;
            }
            let weights: Vec<f64> = data.probability.iter().map(|p| p * len).collect();
            let mut scenario_curves = scenario_curves;
            for k in 0..data.scenarios() {
                if !placed[k] {
                    continue;
                }
                // The term units left to the rest once the gangs hold theirs.
                let needed = scenario_curves[k]
                    .as_ref()
                    .map_or(0, |c| c.first as u64 * step);
                let rest = model
                    .add_gang_rows(k, j, weights[k], Some((t, needed)))
                    .unwrap_or(t);
                if let Some(curve) = scenario_curves[k].take() {
                    if curve.convex {
                        model.add_curve(&curve, step, weights[k], rest);
                    } else {
                        let (f, d) = units(k);
                        model.add_instances(k, j, (f, d), weights[k], Some(rest));
                    }
                }
            }
            if explicit {
                for (k, curve) in scenario_curves.iter().enumerate() {
                    if curve.is_some() {
                        model.add_instances(k, j, data.units(k, j), weights[k], Some(t));
                    }
                }
                continue;
            }
            if scenario_curves.iter().flatten().all(|c| c.convex) {
                // One cost column for all scenarios: a sum of convex curves is convex.
                let sum = weighted_sum(&scenario_curves, &weights);
                model.add_curve(&sum, step, 1.0, t);
                continue;
            }
            for (k, curve) in scenario_curves.iter().enumerate() {
                let Some(curve) = curve else { continue };
                if curve.convex {
                    model.add_curve(curve, step, weights[k], t);
                } else {
                    model.add_instances(k, j, data.units(k, j), weights[k], Some(t));
                }
            }
        }
        if gangs && explicit {
            model.add_gangs();
        }
        model
    }

    /// v3: each gang in exactly one of its placements: a binary per placement.
    fn add_gang_choices(&mut self) {
        let mut gang_cols = Vec::with_capacity(self.data.gangs.len());
        for gang in &self.data.gangs {
            let cols: Vec<(usize, usize)> = gang
                .placements
                .iter()
                .map(|&q| (q, self.mip.add_col(0.0, 0.0, 1.0, true)))
                .collect();
            self.mip
                .add_row(1.0, 1.0, cols.iter().map(|&(_, c)| (c, 1.0)));
            gang_cols.push(cols);
        }
        self.gang_cols = gang_cols;
    }

    /// v3, where the hourly offers have least-cost curves: scenario k's gangs in segment j
    /// (`weight` = probability × hours). For each placement, whole on-demand instances `z`
    /// (integer, at the offer's price) and held term instances `w` of that placement (no more
    /// than its purchases hold) carry at least the nodes of the gangs placed there. With term
    /// units `t` active (`Some((t, needed))`), returns the column of the term units left to the
    /// rest of the work, `t` less the gangs' `w` (at least `needed`), which the curve of the
    /// rest then prices. What the gangs leave of a term is worth more to them than to the
    /// rest: the rest could always run on the gang's own on-demand offer, which has no limit
    /// here (`PoolData::explicit`). `None` without `t`.
    fn add_gang_rows(
        &mut self,
        k: usize,
        j: usize,
        weight: f64,
        term: Option<(usize, u64)>,
    ) -> Option<usize> {
        let data = self.data;
        let start = data.timeline.start(j);
        let here: Vec<GangNeed> = data.gangs_in(k, j).copied().collect();
        let mut held: Vec<(usize, f64)> = Vec::new();
        for (q, offers) in &data.placements {
            let mut node = 0;
            let mut entries: Vec<(usize, f64)> = here
                .iter()
                .filter_map(|n| {
                    let col = self.gang_cols[n.gang].iter().find(|(p, _)| p == q)?.1;
                    node = data.gangs[n.gang].node;
                    Some((col, -f64::from(n.nodes)))
                })
                .collect();
            if entries.is_empty() {
                continue;
            }
            for h in data.hourly[k]
                .iter()
                .filter(|h| h.kind == OfferKind::OnDemand && offers.contains(&h.offer))
            {
                let z = self.mip.add_col(weight * h.price, 0.0, f64::INFINITY, true);
                entries.push((z, 1.0));
            }
            let active: Vec<(usize, f64)> = if term.is_some() {
                offers
                    .iter()
                    .filter_map(|&o| self.active_column(o, start))
                    .map(|a| (a, -1.0))
                    .collect()
            } else {
                Vec::new()
            };
            if !active.is_empty() {
                let w = self.mip.add_col(0.0, 0.0, f64::INFINITY, false);
                held.push((w, f64::from(node / data.unit)));
                self.mip.add_row(
                    f64::NEG_INFINITY,
                    0.0,
                    active.into_iter().chain(std::iter::once((w, 1.0))),
                );
                entries.push((w, 1.0));
            }
            self.mip.add_row(0.0, f64::INFINITY, entries);
        }
        let (t, needed) = term?;
        let rest = self.mip.add_col(0.0, needed as f64, f64::INFINITY, false);
        let entries = [(rest, 1.0), (t, -1.0)].into_iter().chain(held);
        self.mip.add_row(f64::NEG_INFINITY, 0.0, entries);
        Some(rest)
    }

    /// v3, where hourly usage is modelled instance by instance: in every scenario-segment the
    /// on-demand instances and held term instances of each placement at least the nodes of
    /// the gangs placed there. The pool's coverage rows already count the gangs' GPUs, so what
    /// the placements do not hold for gangs covers the rest.
    fn add_gangs(&mut self) {
        let data = self.data;
        let gang_cols = std::mem::take(&mut self.gang_cols);
        for k in 0..data.scenarios() {
            for j in 0..data.timeline.segments() {
                let (start, end) = (data.timeline.start(j), data.timeline.end(j));
                let here: Vec<_> = data.gang_needs[k]
                    .iter()
                    .filter(|n| n.from <= start && end <= n.to)
                    .collect();
                for (q, offers) in &data.placements {
                    let mut entries: Vec<(usize, f64)> = here
                        .iter()
                        .filter_map(|n| {
                            let col = gang_cols[n.gang].iter().find(|(p, _)| p == q)?.1;
                            Some((col, -f64::from(n.nodes)))
                        })
                        .collect();
                    if entries.is_empty() {
                        continue;
                    }
                    for &o in offers {
                        let col = self
                            .instance_column(k, j, o)
                            .filter(|_| {
                                data.hourly[k]
                                    .iter()
                                    .any(|h| h.offer == o && h.kind == OfferKind::OnDemand)
                            })
                            .or_else(|| self.active_column(o, start));
                        entries.extend(col.map(|c| (c, 1.0)));
                    }
                    self.mip.add_row(0.0, f64::INFINITY, entries);
                }
            }
        }
        self.gang_cols = gang_cols;
    }

    /// v3: `mip` (this model's, or a copy of it) with each gang held to its placement in
    /// `placements` (as [`PoolPlan::placements`]).
    pub fn hold_placements(&self, mip: &mut Mip, placements: &[(usize, usize)]) {
        for (cols, gang) in self.gang_cols.iter().zip(&self.data.gangs) {
            let Some(&(_, chosen)) = placements.iter().find(|(g, _)| *g == gang.gang) else {
                continue;
            };
            for &(q, c) in cols {
                let on = if q == chosen { 1.0 } else { 0.0 };
                mip.lower[c] = on;
                mip.upper[c] = on;
            }
        }
    }

    /// v3: the placement each gang's binaries choose in `values`.
    pub fn placements(&self, values: &[f64]) -> Vec<(usize, usize)> {
        self.gang_cols
            .iter()
            .zip(&self.data.gangs)
            .filter_map(|(cols, gang)| {
                let &(q, _) = cols
                    .iter()
                    .max_by(|a, b| values[a.1].total_cmp(&values[b.1]))?;
                Some((gang.gang, q))
            })
            .collect()
    }

    /// A convex curve as a convex combination of its corners: weights λ summing to one, each
    /// costing the curve's value there, at a level no higher than the term units `T`. As the
    /// curve never rises, the cheapest combination is the curve at `T` (zero past its end).
    /// Two rows per curve, however many corners.
    fn add_curve(&mut self, curve: &Curve, step: u64, weight: f64, term: usize) {
        let values = &curve.values;
        if values.iter().all(|&v| v == 0.0) {
            return;
        }
        let corners = corners(values);
        let lambdas: Vec<(usize, usize)> = corners
            .iter()
            .map(|&i| (i, self.mip.add_col(weight * values[i], 0.0, 1.0, false)))
            .collect();
        self.mip
            .add_row(1.0, 1.0, lambdas.iter().map(|&(_, c)| (c, 1.0)));
        let level = |i: usize| ((curve.first + i) as u64 * step) as f64;
        let entries = lambdas
            .iter()
            .map(|&(i, c)| (c, level(i)))
            .chain(std::iter::once((term, -1.0)));
        self.mip.add_row(f64::NEG_INFINITY, 0.0, entries);
    }

    /// Integer on-demand and spot instances for scenario k in segment j covering `(f, d)`
    /// firm and all units with the term units `term`, with coverage rows.
    fn add_instances(
        &mut self,
        k: usize,
        j: usize,
        (f, d): (u64, u64),
        weight: f64,
        term: Option<usize>,
    ) {
        self.integer_segments += 1;
        let data = self.data;
        let unit = data.unit;
        let offers = &data.hourly[k];
        let cols: Vec<(OfferKind, usize, f64)> = offers
            .iter()
            .map(|o| {
                let size = u64::from(o.gpus / unit);
                let upper = o
                    .limit
                    .map_or(f64::INFINITY, f64::from)
                    .min(d.div_ceil(size) as f64);
                (
                    o.kind,
                    self.mip.add_col(weight * o.price, 0.0, upper, true),
                    size as f64,
                )
            })
            .collect();
        self.instances.insert(
            (k, j),
            offers
                .iter()
                .zip(&cols)
                .map(|(o, c)| (o.offer, c.1))
                .collect(),
        );
        let coverage = |kinds: &[OfferKind]| {
            let hourly = cols
                .iter()
                .filter(|c| kinds.contains(&c.0))
                .map(|&(_, c, size)| (c, size));
            term.map(|t| (t, 1.0))
                .into_iter()
                .chain(hourly)
                .collect::<Vec<_>>()
        };
        if f > 0 {
            self.mip
                .add_row(f as f64, f64::INFINITY, coverage(&[OfferKind::OnDemand]));
        }
        self.mip.add_row(
            d as f64,
            f64::INFINITY,
            coverage(&[OfferKind::OnDemand, OfferKind::Spot]),
        );
    }

    /// The plan for the purchases in `values`, with the exact least-cost hourly mix for them.
    pub fn plan(&self, values: &[f64]) -> PoolPlan {
        let data = self.data;
        let chosen = self.chosen(values);
        let held = held_instances(data, &chosen);
        // Term units active per segment: every offer's held instances at its size.
        let term: Vec<u64> = (0..data.timeline.segments())
            .map(|j| {
                data.terms
                    .iter()
                    .zip(&held)
                    .map(|(t, h)| u64::from(t.gpus / data.unit) * h[j])
                    .sum()
            })
            .collect();
        let purchases = chosen
            .iter()
            .map(|&(t, s, n)| (data.terms[t].offer, data.terms[t].starts[s].start, n))
            .collect();
        let segments = data.timeline.segments();
        let placements = self.placements(values);
        let mut usage = Vec::with_capacity(data.scenarios());
        for k in 0..data.scenarios() {
            let offers = &data.hourly[k];
            let mut counts = vec![vec![0u32; segments]; offers.len()];
            for j in 0..segments {
                let (f, d) = data.units(k, j);
                if d == 0 {
                    continue;
                }
                if data.explicit
                    && let Some(cols) = self.instances.get(&(k, j))
                {
                    // Coupled to other offers by a shared limit: the instances chosen.
                    for (h, &(_, c)) in cols.iter().enumerate() {
                        counts[h][j] = values[c].round().max(0.0) as u32;
                    }
                    continue;
                }
                if !placements.is_empty() && data.gangs_in(k, j).next().is_some() {
                    // The gangs first, on their placements' terms and then on demand; the
                    // rest on the terms they leave and the least-cost mix.
                    let at: Vec<u64> = held.iter().map(|h| h[j]).collect();
                    let (left, gang_counts) = gang_split(data, k, j, &placements, &at, term[j]);
                    let (f, d) = data.fluid_units(k, j);
                    let mix = self.recourse[k].mix(f.saturating_sub(left), d.saturating_sub(left));
                    for (h, n) in mix.unwrap_or_default().into_iter().enumerate() {
                        counts[h][j] = n + gang_counts[h];
                    }
                    continue;
                }
                let mix =
                    self.recourse[k].mix(f.saturating_sub(term[j]), d.saturating_sub(term[j]));
                for (h, n) in mix.unwrap_or_default().into_iter().enumerate() {
                    counts[h][j] = n;
                }
            }
            let per_offer = offers
                .iter()
                .zip(counts)
                .map(|(o, c)| (o.offer, data.timeline.runs(&c)))
                .filter(|(_, runs)| !runs.is_empty())
                .collect();
            usage.push(per_offer);
        }
        PoolPlan {
            purchases,
            usage,
            placements,
        }
    }

    /// The columns of the instances of hourly offer `offer` in scenario k, segment j, where the
    /// pool is modelled instance by instance (`None` where the offer is not usable there).
    pub fn instance_column(&self, k: usize, j: usize, offer: usize) -> Option<usize> {
        let cols = self.instances.get(&(k, j))?;
        cols.iter().find(|&&(o, _)| o == offer).map(|&(_, c)| c)
    }

    /// The column counting the instances of term offer `offer` held in hour `hour`, if any
    /// purchase of it can be active then.
    pub fn active_column(&self, offer: usize, hour: u32) -> Option<usize> {
        let t = self.data.terms.iter().position(|t| t.offer == offer)?;
        let (points, cols) = &self.active[t];
        let i = points.partition_point(|&p| p <= hour).checked_sub(1)?;
        cols.get(i).copied()
    }

    /// Where the purchases in `values` (of the elastic model) leave demand the hourly offers
    /// cannot cover, in GPUs.
    pub fn missing(&self, values: &[f64]) -> Vec<Missing> {
        let term = term_units(self.data, &self.chosen(values));
        let unit = u64::from(self.data.unit);
        super::diagnose::shortages(self.data, |j| Some(term[j] * unit))
    }

    /// The purchases of the relaxed `values`, each rounded up to a whole purchase its rules
    /// allow (at least `min` instances per piece), or `None` when that passes its upper bound.
    /// For [`super::incumbent`].
    pub fn purchases_rounded_up(&self, values: &[f64]) -> Option<Vec<(usize, usize, u32)>> {
        let mut out = Vec::new();
        for (t, cols) in self.n_cols.iter().enumerate() {
            let term = &self.data.terms[t];
            for (s, &c) in cols.iter().enumerate() {
                // A relaxed value within rounding of a whole number is that number.
                let mut n = (values[c] - 1e-6).ceil().max(0.0) as u32;
                if n == 0 {
                    continue;
                }
                if let Some(p) = term.pieces {
                    let max = p.max.unwrap_or(term.starts[s].upper).max(1);
                    n = n.max(p.min.max(1).saturating_mul(n.div_ceil(max)));
                }
                if n > term.starts[s].upper {
                    return None;
                }
                out.push((t, s, n));
            }
        }
        Some(out)
    }

    /// The least-cost on-demand and spot instances (per hourly offer of scenario k) adding
    /// `firm` and `all` units, without shared limits; `None` when the offers' own limits cannot.
    pub fn hourly_mix(&self, k: usize, firm: u64, all: u64) -> Option<Vec<u32>> {
        if all == 0 {
            return Some(vec![0; self.data.hourly[k].len()]);
        }
        self.recourse[k].mix(firm, all)
    }

    /// The plan of purchases `chosen`, hourly instances `counts[k][h][j]` (scenario, hourly
    /// offer, segment) and gangs' `placements` (as [`PoolPlan::placements`]).
    pub fn plan_of(
        &self,
        chosen: &[(usize, usize, u32)],
        counts: &[Vec<Vec<u32>>],
        placements: Vec<(usize, usize)>,
    ) -> PoolPlan {
        let data = self.data;
        PoolPlan {
            purchases: chosen
                .iter()
                .map(|&(t, s, n)| (data.terms[t].offer, data.terms[t].starts[s].start, n))
                .collect(),
            usage: counts
                .iter()
                .enumerate()
                .map(|(k, per_offer)| {
                    data.hourly[k]
                        .iter()
                        .zip(per_offer)
                        .map(|(o, c)| (o.offer, data.timeline.runs(c)))
                        .filter(|(_, runs)| !runs.is_empty())
                        .collect()
                })
                .collect(),
            placements,
        }
    }

    /// This model with every purchase fixed: `chosen` (as [`PoolModel::chosen`]) bought in the
    /// fewest pieces the offer's rules allow, nothing else. A purchase below the smallest piece
    /// is rounded up to it (more capacity never uncovers an hour), or left out where that is
    /// above the purchase's upper bound. Solving it gives a feasible point of this model (when
    /// one exists with these purchases), to start branch and bound from.
    pub fn fixed_to(&self, chosen: &[(usize, usize, u32)]) -> Mip {
        let mut mip = self.mip.clone();
        for (cols, ks) in self.n_cols.iter().zip(&self.k_cols) {
            for (&n, &k) in cols.iter().zip(ks) {
                mip.lower[n] = 0.0;
                mip.upper[n] = 0.0;
                if let Some(k) = k {
                    mip.lower[k] = 0.0;
                    mip.upper[k] = 0.0;
                }
            }
        }
        for &(t, s, n) in chosen {
            let start = &self.data.terms[t].starts[s];
            let col = self.n_cols[t][s];
            let (n, k) = match self.data.terms[t].pieces {
                None => (n, None),
                Some(p) => {
                    let k = n.div_ceil(p.largest(start));
                    (n.max(p.min.max(1) * k), Some(k))
                }
            };
            if n > start.upper || n < start.lower {
                continue;
            }
            mip.lower[col] = f64::from(n);
            mip.upper[col] = f64::from(n);
            if let (Some(k), Some(kc)) = (k, self.k_cols[t][s]) {
                mip.lower[kc] = f64::from(k);
                mip.upper[kc] = f64::from(k);
            }
        }
        mip
    }

    /// `[t][s]`: the column of the purchase of `data.terms[t]` at its start `s`.
    pub fn purchase_columns(&self) -> &[Vec<usize>] {
        &self.n_cols
    }

    /// The purchases in `values`: `(index into data.terms, index into its starts, instances)`.
    pub fn chosen(&self, values: &[f64]) -> Vec<(usize, usize, u32)> {
        let mut out = Vec::new();
        for (t, cols) in self.n_cols.iter().enumerate() {
            for (s, &c) in cols.iter().enumerate() {
                let n = values[c].round().max(0.0) as u32;
                if n > 0 {
                    out.push((t, s, n));
                }
            }
        }
        out
    }
}

/// The curves already made, by scenario, firm and all units: segments that differ only by a
/// term window have the same demand, and so the same curve. Past [`Curves::MAX_VALUES`] values
/// the cache starts over, so a pool whose demand changes every hour (thousands of segments with
/// thousands of term levels each) holds one segment's curves at a time, not all of them.
#[derive(Default)]
struct Curves {
    map: HashMap<(usize, u64, u64), Rc<Curve>>,
    values: usize,
}

impl Curves {
    /// 4 million values, 32 MB: far more than any pool with few demand changes needs.
    const MAX_VALUES: usize = 1 << 22;

    fn get(&mut self, k: usize, f: u64, d: u64, make: impl FnOnce() -> Curve) -> Rc<Curve> {
        if let Some(c) = self.map.get(&(k, f, d)) {
            return c.clone();
        }
        let c = Rc::new(make());
        if self.values + c.values.len() > Self::MAX_VALUES {
            self.map.clear();
            self.values = 0;
        }
        self.values += c.values.len();
        self.map.insert((k, f, d), c.clone());
        c
    }
}

/// `Q` for firm `f` and all `d` units at term levels `0, step, 2·step, …` up to covering `d`,
/// from the first level the hourly limits can complete.
fn curve(recourse: &Recourse, f: u64, d: u64, step: u64) -> Curve {
    let last = d.div_ceil(step);
    let mut first = None;
    let mut values = Vec::new();
    for a in 0..=last {
        let t = a * step;
        match recourse.cost(f.saturating_sub(t), d.saturating_sub(t)) {
            Some(c) => {
                first.get_or_insert(a as usize);
                values.push(c);
            }
            None => debug_assert!(first.is_none(), "coverable levels are contiguous"),
        }
    }
    let first = first.unwrap_or(last as usize);
    // Convex: slopes never decrease (to a rounding tolerance on sums of prices).
    let tolerance = 1e-9 * (1.0 + values.first().copied().unwrap_or(0.0));
    let convex = values
        .windows(3)
        .all(|w| (w[2] - w[1]) >= (w[1] - w[0]) - tolerance);
    Curve {
        first,
        values,
        convex,
    }
}

/// `Σ weight × curve` on the levels where every curve is defined (0 past a curve's end).
fn weighted_sum(curves: &[Option<Rc<Curve>>], weights: &[f64]) -> Curve {
    let present = || {
        curves
            .iter()
            .zip(weights)
            .filter_map(|(c, &w)| c.as_ref().map(|c| (c, w)))
    };
    let first = present().map(|(c, _)| c.first).max().unwrap_or(0);
    let end = present()
        .map(|(c, _)| c.first + c.values.len())
        .max()
        .unwrap_or(first)
        .max(first + 1);
    let values = (first..end)
        .map(|a| {
            present()
                .map(|(c, w)| w * c.values.get(a - c.first).copied().unwrap_or(0.0))
                .sum()
        })
        .collect();
    Curve {
        first,
        values,
        convex: true,
    }
}

/// The corners of a convex sequence: the first and last index and every index where the
/// slope grows by more than rounding noise. The lines between consecutive corners are its
/// linear pieces (points in between lie on them to that noise).
fn corners(values: &[f64]) -> Vec<usize> {
    let scale = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let noise = 1e-12 * (1.0 + scale) * values.len() as f64;
    let mut out = vec![0];
    for i in 1..values.len().saturating_sub(1) {
        let last = *out.last().unwrap_or(&0);
        let before = (values[i] - values[last]) / (i - last) as f64;
        let after = values[i + 1] - values[i];
        if after - before > noise {
            out.push(i);
        }
    }
    if values.len() > 1 {
        out.push(values.len() - 1);
    }
    out
}

fn term_columns(
    data: &PoolData,
    mip: &mut Mip,
    elastic: bool,
) -> (Vec<Vec<usize>>, Vec<Vec<Option<usize>>>) {
    data.terms
        .iter()
        .map(|t| {
            let cost = if elastic { 0.0 } else { t.cost };
            t.starts
                .iter()
                .map(|s| {
                    let upper = if s.upper == u32::MAX {
                        f64::INFINITY
                    } else {
                        f64::from(s.upper)
                    };
                    let n = mip.add_col(cost, f64::from(s.lower), upper, true);
                    let k = match (t.pieces, s.lower == s.upper) {
                        (Some(p), false) => Some(add_pieces(mip, n, upper, p, elastic)),
                        _ => None,
                    };
                    (n, k)
                })
                .unzip()
        })
        .unzip()
}

/// The pieces `k` of purchase column `n` (upper bound `upper`): `min·k ≤ n ≤ max·k`, each piece
/// costing the offer's cost per purchase. Without a maximum, `upper` stands for it (a purchase
/// never exceeds its upper bound, so one piece of that size can hold it). Returns `k`'s column.
fn add_pieces(mip: &mut Mip, n: usize, upper: f64, p: super::pool::Pieces, elastic: bool) -> usize {
    let min = f64::from(p.min.max(1));
    // A piece never holds more than the purchase's own upper bound: `n ≤ min(max, upper)·k`
    // is as valid as `n ≤ max·k` and, for purchases capped at a few instances, makes the
    // relaxation pay nearly the whole cost per purchase instead of `cost / max` per instance.
    let max = p.max.map_or(upper, |m| f64::from(m).min(upper));
    let cost = if elastic { 0.0 } else { p.cost };
    let k = mip.add_col(cost, 0.0, (upper / min).floor(), true);
    mip.add_row(0.0, f64::INFINITY, [(n, 1.0), (k, -min)]);
    if max.is_finite() {
        mip.add_row(f64::NEG_INFINITY, 0.0, [(n, 1.0), (k, -max)]);
    }
    k
}

/// Per term offer: breakpoints and the columns `A` between them.
type ActiveColumns = Vec<(Vec<u32>, Vec<usize>)>;

/// The active-count columns `A[o,i]` of every term offer with their recurrence rows, and for
/// each pool segment with demand the entries that sum its term units (`A` weighted by instance
/// size).
fn active_counts(
    data: &PoolData,
    mip: &mut Mip,
    n_cols: &[Vec<usize>],
) -> (Vec<Vec<(usize, f64)>>, ActiveColumns) {
    let timeline = &data.timeline;
    let mut per_segment: Vec<Vec<(usize, f64)>> = vec![Vec::new(); timeline.segments()];
    let mut active = Vec::with_capacity(data.terms.len());
    for (t, cols) in data.terms.iter().zip(n_cols) {
        let mut points: Vec<u32> = t.starts.iter().flat_map(|s| [s.start, s.end]).collect();
        points.sort_unstable();
        points.dedup();
        let index = |p: u32| points.binary_search(&p).unwrap_or_else(|i| i);
        let mut starting = vec![Vec::new(); points.len()];
        let mut ending = vec![Vec::new(); points.len()];
        for (s, &c) in t.starts.iter().zip(cols) {
            starting[index(s.start)].push(c);
            ending[index(s.end)].push(c);
        }
        let coefficient = f64::from(t.gpus / data.unit);
        let limit = t.max.map_or(f64::INFINITY, f64::from);
        let mut a_cols = Vec::with_capacity(points.len().saturating_sub(1));
        for i in 0..points.len().saturating_sub(1) {
            let a = mip.add_col(0.0, 0.0, limit, false);
            let mut entries = vec![(a, 1.0)];
            entries.extend(a_cols.last().map(|&p| (p, -1.0)));
            entries.extend(starting[i].iter().map(|&c| (c, -1.0)));
            entries.extend(ending[i].iter().map(|&c| (c, 1.0)));
            mip.add_row(0.0, 0.0, entries);
            a_cols.push(a);
            let (first, last) = (timeline.point(points[i]), timeline.point(points[i + 1]));
            for (j, expr) in per_segment.iter_mut().enumerate().take(last).skip(first) {
                if data.total.iter().any(|total| total[j] > 0) {
                    expr.push((a, coefficient));
                }
            }
        }
        active.push((points, a_cols));
    }
    (per_segment, active)
}

/// `[t][j]`: the instances of `data.terms[t]` that `chosen` purchases hold in segment j.
fn held_instances(data: &PoolData, chosen: &[(usize, usize, u32)]) -> Vec<Vec<u64>> {
    (0..data.terms.len())
        .map(|t| {
            data.timeline
                .sum(chosen.iter().filter(|c| c.0 == t).map(|&(_, s, n)| {
                    let start = &data.terms[t].starts[s];
                    (start.start, start.end, u64::from(n))
                }))
        })
        .collect()
}

/// v3: scenario k's gangs in segment j on their `placements` (`(gang, placement)` as
/// `PoolPlan::placements`), each on its placement's held term instances first (`held[t]`: the
/// instances of `data.terms[t]` held in segment j) and then on its on-demand offers, cheapest
/// first, each within its limit (the last takes what is left, even past its limit, for the
/// caller to refuse). Returns the term units of the `term` active left to the rest of the
/// work, and the instances of each hourly offer of scenario k the gangs run on. Terms go to the
/// gangs first: the rest could run on the same on-demand offer, so it never saves more by them
/// (the doc of `PoolModel::add_gang_rows`).
pub(crate) fn gang_split(
    data: &PoolData,
    k: usize,
    j: usize,
    placements: &[(usize, usize)],
    held: &[u64],
    term: u64,
) -> (u64, Vec<u32>) {
    let mut counts = vec![0u32; data.hourly[k].len()];
    let mut used = 0u64;
    for (q, offers) in &data.placements {
        let mut node = 0;
        let need: u64 = data
            .gangs_in(k, j)
            .filter(|n| {
                placements
                    .iter()
                    .any(|&(g, p)| g == data.gangs[n.gang].gang && p == *q)
            })
            .map(|n| {
                node = data.gangs[n.gang].node;
                u64::from(n.nodes)
            })
            .sum();
        if need == 0 {
            continue;
        }
        let on_terms: u64 = data
            .terms
            .iter()
            .zip(held)
            .filter(|(t, _)| offers.contains(&t.offer))
            .map(|(_, &h)| h)
            .sum::<u64>()
            .min(need);
        used += on_terms * u64::from(node / data.unit);
        let mut on_demand: Vec<(usize, &HourlyOffer)> = data.hourly[k]
            .iter()
            .enumerate()
            .filter(|(_, h)| h.kind == OfferKind::OnDemand && offers.contains(&h.offer))
            .collect();
        on_demand.sort_by(|a, b| a.1.price.total_cmp(&b.1.price));
        let mut left = need - on_terms;
        let last = on_demand.len().saturating_sub(1);
        for (i, &(h, o)) in on_demand.iter().enumerate() {
            let n = match o.limit {
                Some(limit) if i < last => left.min(u64::from(limit)),
                _ => left,
            };
            counts[h] = counts[h].saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            left -= n;
            if left == 0 {
                break;
            }
        }
    }
    (term.saturating_sub(used), counts)
}

/// Term units active in each pool segment for `chosen` purchases (as from `PoolModel::chosen`).
pub(crate) fn term_units(data: &PoolData, chosen: &[(usize, usize, u32)]) -> Vec<u64> {
    data.timeline.sum(chosen.iter().map(|&(t, s, n)| {
        let (t, start) = (&data.terms[t], &data.terms[t].starts[s]);
        (
            start.start,
            start.end,
            u64::from(t.gpus / data.unit) * u64::from(n),
        )
    }))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::problem::{parse, validate};
    use crate::solver::pool::Scope;

    #[test]
    fn corners_of_a_convex_sequence() {
        assert_eq!(corners(&[10.0, 7.0, 4.0, 2.0, 0.0, 0.0]), vec![0, 2, 4, 5]);
        assert_eq!(corners(&[5.0]), vec![0]);
    }

    #[test]
    fn hours_whose_cost_is_not_convex_in_term_capacity_get_whole_instances() {
        // 4-GPU terms against 5-GPU on-demand instances: 10 GPUs cost 2 instances with no
        // term, still 2 with one term (6 left), 1 with two: not convex.
        let text = include_str!("../../../../tests/fixtures/problems/nonconvex.json");
        let problem = parse(text, Path::new("nonconvex.json")).expect("parses");
        let validated = validate(problem).expect("valid");
        let data = PoolData::new(&validated, &Scope::full(0));
        let model = PoolModel::build(&data, Mode::Cost);
        assert!(model.integer_segments > 0);
        assert!(
            model.mip.integer.iter().filter(|&&i| i).count()
                > model.n_cols.iter().map(Vec::len).sum::<usize>()
        );
    }
}
