//! The solver: the proven-optimal purchase plan for a `gpucap.problem/v1` or `/v2`
//! (`docs/problem-v1.md`, `docs/problem-v2.md`). Pure: no I/O, no clock except the time limit.
//!
//! How it works, and why it is exact:
//! 1. Pools share nothing, so each pool is solved on its own (in parallel). Only v2's shared
//!    limits join pools: the pools joined by them are solved together in one program, on a
//!    common timeline ([`coupled`], whose doc says why that stays exact). A pool whose limits
//!    count only its own term offers is solved alone, with them as rows of its own model
//!    where its plan without them breaks them.
//! 2. Hours between consecutive breakpoints (demand changes, allowed term starts and ends) face
//!    identical constraints, so one variable per segment stands for every hour in it
//!    ([`timeline`]).
//! 3. Purchases that can never pay off are left out before the model is built: a purchase
//!    never needs more instances than its window's peak demand ([`pool`]), and an on-demand or
//!    spot offer beaten per GPU-hour by an unlimited offer of a dividing size is dropped.
//! 4. The second stage is not modelled instance by instance: for each segment the exact least
//!    hourly cost of whole on-demand and spot instances is tabulated against the term capacity
//!    ([`recourse`]). Where that curve is convex (almost always) it enters the segment model
//!    ([`model`]) as a convex combination of its corners, with no integer variable; where it
//!    is not, that segment keeps integer instances. Term purchases enter an active-count
//!    recurrence, an interval matrix in network form. Cbc (`crates/mip-cbc`) solves the resulting mixed-integer
//!    program by branch and bound to a relative gap far below 1e-6 (the relaxation is usually
//!    whole already), and its dual bound is the proven `bound`.
//! 5. A cost per purchase (v2 pieces) is a fixed charge, which the relaxation carries poorly:
//!    such a pool starts branch and bound from a plan with few purchases found by slope
//!    scaling, and searches a bounded number of nodes from it ([`charges`]). Its plan is then
//!    `feasible`, with the bound proven at the root, unless the search closes the gap.
//! 6. Costs in the solution are recomputed from the whole-number plan, never taken from the
//!    solver's floating-point objective.
//!
//! The baselines (all on-demand, cheapest-now, reserve-the-peak) run the same machinery on a
//! restricted problem ([`baselines`]).

mod baselines;
mod chains;
mod charges;
mod coupled;
mod diagnose;
mod incumbent;
mod memo;
mod mip;
mod model;
mod plan;
mod pool;
pub mod progress;
mod recourse;
mod runs;
mod timeline;

use std::thread;
use std::time::{Duration, Instant};

use crate::problem::{Solution, Status, Validated};

pub use baselines::{Baseline, Baselines, baselines};
pub use memo::Memo;

use diagnose::Missing;
use mip::{MipLimits, MipStatus};
use model::{Mode, PoolModel, PoolPlan};
use pool::{PoolData, Scope};

/// The largest relative gap between the plan and the bound for which `status` is `optimal`.
pub const OPTIMALITY_GAP: f64 = 1e-6;

/// How far (relative) the expected cost may exceed the budget before the plan breaks it: float
/// rounding of sums of prices, not money.
const BUDGET_TOLERANCE: f64 = 1e-9;

#[derive(Debug, Clone)]
pub struct SolveOptions {
    /// Stop branch and cut after this long and return the best plan found (`feasible`).
    pub time_limit: Option<Duration>,
    /// Pools solved at once; 0 means one per available core.
    pub threads: usize,
    /// The relative gap each pool is solved to. Far below [`OPTIMALITY_GAP`] so that the sum
    /// over pools is within it.
    pub rel_gap: f64,
    /// Let the MIP engine print its log (on stdout: for debugging only).
    pub solver_log: bool,
    /// Told as each pool starts and ends ([`progress`]).
    pub observer: progress::Observer,
    /// Pools solved before with these options (or a clone of them), answered again without a
    /// solve when their data is the same ([`memo`]).
    pub memo: Memo,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            time_limit: None,
            threads: 0,
            rel_gap: 1e-8,
            solver_log: false,
            observer: progress::Observer::default(),
            memo: Memo::default(),
        }
    }
}

/// The proven-optimal plan for `problem`, or why there is none.
pub fn solve(problem: &Validated, options: &SolveOptions) -> Solution {
    let scopes: Vec<Scope> = (0..problem.problem().pools.len())
        .map(Scope::full)
        .collect();
    let outcome = run(problem, scopes, options);
    let mut solution = outcome.into_solution(problem);
    if let (Some(budget), Status::Optimal | Status::Feasible) =
        (problem.problem().budget, solution.status)
        && solution.expected_cost > budget * (1.0 + BUDGET_TOLERANCE)
    {
        solution.message = Some(over_budget(&solution, budget));
        solution.status = Status::Infeasible;
    }
    solution
}

fn over_budget(solution: &Solution, budget: f64) -> String {
    if solution.status == Status::Optimal || solution.bound > budget {
        format!(
            "the budget cannot be met: the least expected cost is ${:.2}, ${:.2} above the budget of ${budget:.2}; the plan given is that least-cost plan",
            solution.expected_cost.max(solution.bound),
            solution.expected_cost.max(solution.bound) - budget
        )
    } else {
        format!(
            "no plan within the budget of ${budget:.2} was found in the time limit: the best plan found costs ${:.2} and no plan can cost less than ${:.2}; allow more time",
            solution.expected_cost, solution.bound
        )
    }
}

/// Says why the plan is not proven optimal (the time limit, or the branch-and-bound budget for
/// costs per purchase), and how far from optimal it may be.
fn not_proven(solution: &Solution, timed_out: bool) -> String {
    let gap = if solution.expected_cost > 0.0 {
        (solution.expected_cost - solution.bound) / solution.expected_cost * 100.0
    } else {
        0.0
    };
    let (why, costs, more) = if timed_out {
        (
            "stopped at the time limit",
            "",
            ". Allow more time (`--time-limit`) to prove the optimum",
        )
    } else {
        (
            "costs per purchase make the optimum slow to prove",
            " with those costs",
            "",
        )
    };
    format!(
        "{why}: this is the best plan found, at ${:.2}{costs}; no plan can cost less than ${:.2} (gap {gap:.4} %){more}",
        solution.expected_cost, solution.bound
    )
}

/// What solving every pool gave.
#[derive(Debug, Default)]
struct Outcome {
    plans: Vec<PoolPlan>,
    bound: f64,
    /// Messages for pools whose demand cannot be covered, or for which no plan was found.
    short: Vec<String>,
    /// Some of `short` ran out of time rather than proving that no plan exists.
    out_of_time: bool,
    /// The time limit was reached. A plan not proven optimal without it stopped at the
    /// branch-and-bound budget for costs per purchase ([`charges`]).
    timed_out: bool,
}

impl Outcome {
    fn into_solution(self, v: &Validated) -> Solution {
        if !self.short.is_empty() {
            let mut solution = plan::infeasible(v, self.short.join("\n"));
            solution.out_of_time = self.out_of_time;
            return solution;
        }
        let mut solution = plan::solution(v, &self.plans);
        solution.bound = self.bound.min(solution.expected_cost);
        let gap = solution.expected_cost - solution.bound;
        // The bound is proven whether or not every pool's search ran to its end: a search
        // stopped at its node budget (costs per purchase) that closed the gap is optimal too.
        let optimal = gap <= OPTIMALITY_GAP * solution.expected_cost.abs().max(1e-9);
        solution.status = if optimal {
            Status::Optimal
        } else {
            Status::Feasible
        };
        if solution.status == Status::Feasible && solution.message.is_none() {
            solution.message = Some(not_proven(&solution, self.timed_out));
        }
        solution
    }
}

#[derive(Clone)]
pub(crate) enum PoolOutcome {
    Planned {
        plan: PoolPlan,
        bound: f64,
        proven: bool,
    },
    Short(String),
    /// No plan was found before the time limit (one may exist).
    OutOfTime(String),
}

/// Solves each pool in `scopes`, in parallel; pools coupled by shared limits together.
fn run(v: &Validated, scopes: Vec<Scope>, options: &SolveOptions) -> Outcome {
    let deadline = options.time_limit.map(|t| Instant::now() + t);
    // Jobs: one scope alone, or the scopes of a group of coupled pools.
    let mut jobs: Vec<(Vec<Scope>, bool)> = Vec::new();
    for (pools, limited) in coupled::components(v) {
        let group: Vec<Scope> = pools
            .iter()
            .filter_map(|&p| scopes.iter().find(|s| s.pool == p).cloned())
            .collect();
        if limited {
            jobs.push((group, true));
        } else {
            jobs.extend(group.into_iter().map(|s| (vec![s], false)));
        }
    }
    let scopes = jobs;
    let threads = match options.threads {
        0 => thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(scopes.len())
    .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, Vec<PoolOutcome>)> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((group, limited)) = scopes.get(i) else {
                            break;
                        };
                        let outcomes = if *limited && coupled::own_term_limits(v, group) {
                            vec![solve_pool(v, &group[0], options, deadline, Limits::Own)]
                        } else if *limited {
                            // Each pool alone first: when those optima keep every shared
                            // limit, they are the group's optimum (`coupled::alone_suffices`).
                            let alone: Vec<PoolOutcome> = group
                                .iter()
                                .map(|s| solve_pool(v, s, options, deadline, Limits::Dropped))
                                .collect();
                            if coupled::alone_suffices(v, &alone) {
                                alone
                            } else {
                                coupled::solve_group(v, group, &alone, options, deadline)
                            }
                        } else {
                            vec![solve_pool(v, &group[0], options, deadline, Limits::Dropped)]
                        };
                        done.push((i, outcomes));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    let mut outcome = Outcome {
        timed_out: deadline.is_some_and(|d| Instant::now() >= d),
        ..Default::default()
    };
    for result in results.into_iter().flat_map(|(_, r)| r) {
        match result {
            PoolOutcome::Planned { plan, bound, .. } => {
                outcome.plans.push(plan);
                outcome.bound += bound;
            }
            PoolOutcome::Short(message) => outcome.short.push(message),
            PoolOutcome::OutOfTime(message) => {
                outcome.short.push(message);
                outcome.out_of_time = true;
            }
        }
    }
    outcome
}

/// What a pool solved on its own does with the shared limits on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limits {
    /// Drops them: a pool without limits, or one of a group whose limits are checked after
    /// (`coupled::alone_suffices`) and solved jointly where they bind (`coupled::solve_group`).
    Dropped,
    /// Keeps them: a pool whose limits count only its own term offers
    /// (`coupled::own_term_limits`). It is solved without them first; only a plan that breaks
    /// them is solved again, with them as rows of the same model.
    Own,
}

fn solve_pool(
    v: &Validated,
    scope: &Scope,
    options: &SolveOptions,
    deadline: Option<Instant>,
    limits_on_pool: Limits,
) -> PoolOutcome {
    // Alone, no limit counts the pool's hourly offers (they are dropped, or only on its terms),
    // so its hourly offers need no instance-by-instance model: the least-cost curve is the
    // exact second stage again.
    let scope = &Scope {
        with_limits: limits_on_pool == Limits::Own,
        ..scope.clone()
    };
    let data = PoolData::new(v, scope);
    let over = diagnose::over_capacity(&data);
    if !over.is_empty() {
        return PoolOutcome::Short(diagnose::message(v, &data, &over, true));
    }
    let pool = v.problem().pools[scope.pool].as_str();
    // With its limits dropped, the data is the whole program (`memo`).
    let remembered = limits_on_pool == Limits::Dropped;
    if remembered && let Some(solved) = options.memo.get(&data, options.rel_gap) {
        options.observer.started(progress::PoolStarted {
            pool,
            columns: solved.columns,
            rows: solved.rows,
        });
        options.observer.finished(solved.finished(pool));
        tracing::debug!(pool, "pool solved before, with the same data");
        return solved.outcome;
    }
    let started = Instant::now();
    let mut model = PoolModel::build(&data, Mode::Cost);
    let (columns, rows) = (model.mip.num_cols(), model.mip.num_rows());
    options.observer.started(progress::PoolStarted {
        pool,
        columns,
        rows,
    });
    // Without its limits the model is a relaxation of the one with them: a plan that keeps
    // them is the answer (its bound stays a bound). The rows slow a solve where they do not
    // bind (by a third at 1,000 campaigns in `cargo bench --bench plan`), and a solve without
    // them is wasted where they do (4 s of 16 at 10,000; measured 2026-11-25), so the pool is
    // solved with them first only where they are likely to bind.
    let with_limits = |data: &PoolData, model: &mut PoolModel| {
        coupled::add_own_limits(v, data, model);
    };
    let mut limited = limits_on_pool == Limits::Own && coupled::likely_to_bind(v, &data);
    if limited {
        with_limits(&data, &mut model);
    }
    let no_rows = |_: &PoolData, _: &mut PoolModel| {};
    let constrain: &dyn Fn(&PoolData, &mut PoolModel) =
        if limited { &with_limits } else { &no_rows };
    let mut result = solve_model(&data, &model, options, deadline, constrain);
    if limits_on_pool == Limits::Own
        && !limited
        && matches!(result.status, MipStatus::Optimal | MipStatus::Feasible)
        && !coupled::keeps_limits(v, &[&model.plan(&result.values)])
    {
        with_limits(&data, &mut model);
        result = solve_model(&data, &model, options, deadline, &with_limits);
        limited = true;
    }
    let finished = progress::PoolFinished {
        pool,
        status: match result.status {
            MipStatus::Optimal => "optimal",
            MipStatus::Feasible => "feasible",
            MipStatus::NoSolution => "no plan yet",
            MipStatus::Infeasible => "infeasible",
        },
        cost: (!result.values.is_empty())
            .then(|| model.mip.objective(&result.values) + model.constant),
        bound: result.bound + model.constant,
        seconds: started.elapsed().as_secs_f64(),
    };
    options.observer.finished(finished);
    tracing::debug!(
        pool = %v.problem().pools[scope.pool],
        segments = data.timeline.segments(),
        unit = data.unit,
        starts = data.terms.iter().map(|t| t.starts.len()).sum::<usize>(),
        columns = model.mip.num_cols(),
        rows = model.mip.num_rows(),
        nonzeros = model.mip.num_nonzeros(),
        integer_segments = model.integer_segments,
        limited,
        status = ?result.status,
        seconds = started.elapsed().as_secs_f64(),
        "pool solved"
    );
    match result.status {
        MipStatus::Optimal | MipStatus::Feasible => {
            let outcome = PoolOutcome::Planned {
                plan: model.plan(&result.values),
                bound: result.bound + model.constant,
                proven: result.status == MipStatus::Optimal,
            };
            if remembered && deadline.is_none_or(|d| Instant::now() < d) {
                options.memo.put(memo::Solved {
                    data,
                    rel_gap: options.rel_gap,
                    outcome: outcome.clone(),
                    columns,
                    rows,
                    status: finished.status,
                    cost: finished.cost,
                    bound: finished.bound,
                });
            }
            outcome
        }
        MipStatus::NoSolution => fallback(
            v,
            scope,
            options,
            result.bound + model.constant,
            limits_on_pool,
        ),
        MipStatus::Infeasible => {
            let elastic = PoolModel::build(&data, Mode::Elastic);
            let result = mip::solve(&elastic.mip, pool_limits(&data, &model, options, None));
            let missing: Vec<Missing> = if result.values.is_empty() {
                Vec::new()
            } else {
                elastic.missing(&result.values)
            };
            if missing.is_empty() && limited {
                // Covered without its limits (the elastic model has none): they are why not.
                return PoolOutcome::Short(coupled::beyond_limits(v, std::slice::from_ref(scope)));
            }
            PoolOutcome::Short(diagnose::message(v, &data, &missing, false))
        }
    }
}

/// One solve of a pool's `model`: from a first plan by slope scaling when its purchases carry
/// costs per purchase ([`charges`], whose rounds get the model's extra rows from `constrain`).
fn solve_model(
    data: &PoolData,
    model: &PoolModel,
    options: &SolveOptions,
    deadline: Option<Instant>,
    constrain: &dyn Fn(&PoolData, &mut PoolModel),
) -> mip::MipResult {
    let limits = pool_limits(data, model, options, deadline);
    let start = charges::first_plan(data, model, limits, constrain);
    tracing::debug!(first_plan = start.as_ref().map(|s| s.cost), "slope scaling");
    // A budget of so few nodes is spent at the root, whose cuts take seconds on a large pool
    // (7 s of 12 on the quickstart's largest pool with gangs, measured 2026-11-28) to tighten
    // the bound by a few hundredths of a percent, and it finds no cheaper plan there (the
    // doc of `charges::NODE_WORK`): the first plan stands, with the first round's bound.
    if let Some(first) = &start
        && limits.node_limit.is_some_and(|n| n < charges::FEW_NODES)
    {
        let proven = first.cost - first.bound <= OPTIMALITY_GAP * 0.5 * first.cost.abs();
        return mip::MipResult {
            status: if proven {
                MipStatus::Optimal
            } else {
                MipStatus::Feasible
            },
            values: first.values.clone(),
            bound: first.bound.min(first.cost),
        };
    }
    mip::solve_from(
        &model.mip,
        limits,
        start.as_ref().map(|s| s.values.as_slice()),
    )
}

/// The engine's limits for a pool's model: with costs per purchase, cuts and a budget in nodes
/// ([`charges::node_limit`]).
fn pool_limits(
    data: &PoolData,
    model: &PoolModel,
    options: &SolveOptions,
    deadline: Option<Instant>,
) -> MipLimits {
    let charged = data.has_pieces();
    MipLimits {
        time_limit: deadline.map(|d| d.saturating_duration_since(Instant::now())),
        rel_gap: options.rel_gap,
        log: options.solver_log,
        // Gangs' placement binaries leave the relaxation fractional, as fixed charges do.
        cuts: charged || data.has_gangs(),
        cutoff: None,
        node_limit: charged.then(|| charges::node_limit(model.mip.num_cols())),
    }
}

/// When the time runs out before any plan was found: the cheapest plan without terms (which the
/// capacity check says exists, or the terms would be needed and the model found none).
fn fallback(
    v: &Validated,
    scope: &Scope,
    options: &SolveOptions,
    bound: f64,
    limits_on_pool: Limits,
) -> PoolOutcome {
    let hourly_only = Scope {
        terms: pool::Terms::None,
        ..scope.clone()
    };
    match solve_pool(v, &hourly_only, options, None, limits_on_pool) {
        PoolOutcome::Planned { plan, .. } => PoolOutcome::Planned {
            plan,
            bound: bound.max(0.0),
            proven: false,
        },
        PoolOutcome::Short(_) | PoolOutcome::OutOfTime(_) => PoolOutcome::OutOfTime(format!(
            "no plan for pool `{}` was found in the time limit; allow more time",
            v.problem().pools[scope.pool]
        )),
    }
}
