//! A small, solver-neutral mixed-integer program (columns, rows, CSR matrix) and the one place
//! that hands it to the engine (Cbc, through `crates/mip-cbc`). The model builder never sees
//! the engine's types, so the formulation can be read and tested on its own.

use std::time::Duration;

/// min cost·x  s.t.  row_lower ≤ A x ≤ row_upper,  lower ≤ x ≤ upper,  x integer where asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mip {
    pub cost: Vec<f64>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub integer: Vec<bool>,
    pub row_lower: Vec<f64>,
    pub row_upper: Vec<f64>,
    /// CSR: row r holds `entries[row_start[r]..row_start[r + 1]]`.
    row_start: Vec<usize>,
    entries: Vec<(usize, f64)>,
}

impl Mip {
    pub fn new() -> Self {
        Mip {
            row_start: vec![0],
            ..Default::default()
        }
    }

    pub fn add_col(&mut self, cost: f64, lower: f64, upper: f64, integer: bool) -> usize {
        self.cost.push(cost);
        self.lower.push(lower);
        self.upper.push(upper);
        self.integer.push(integer);
        self.cost.len() - 1
    }

    pub fn add_row(
        &mut self,
        lower: f64,
        upper: f64,
        entries: impl IntoIterator<Item = (usize, f64)>,
    ) {
        self.entries.extend(entries);
        self.row_start.push(self.entries.len());
        self.row_lower.push(lower);
        self.row_upper.push(upper);
    }

    /// Adds `other`'s columns and rows after this one's; returns the offset of its columns.
    pub fn append(&mut self, other: &Mip) -> usize {
        let offset = self.num_cols();
        self.cost.extend(&other.cost);
        self.lower.extend(&other.lower);
        self.upper.extend(&other.upper);
        self.integer.extend(&other.integer);
        for r in 0..other.num_rows() {
            let entries: Vec<(usize, f64)> =
                other.row(r).iter().map(|&(c, v)| (c + offset, v)).collect();
            self.add_row(other.row_lower[r], other.row_upper[r], entries);
        }
        offset
    }

    pub fn num_cols(&self) -> usize {
        self.cost.len()
    }

    pub fn num_rows(&self) -> usize {
        self.row_lower.len()
    }

    pub fn num_nonzeros(&self) -> usize {
        self.entries.len()
    }

    /// `cost·values`, the objective at a point (one value per column).
    pub fn objective(&self, values: &[f64]) -> f64 {
        self.cost.iter().zip(values).map(|(c, x)| c * x).sum()
    }

    pub fn row(&self, r: usize) -> &[(usize, f64)] {
        &self.entries[self.row_start[r]..self.row_start[r + 1]]
    }

    /// The matrix by columns: starts (length columns + 1), row indices and values, with each
    /// column's rows in increasing order.
    pub fn columns(&self) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
        let mut start = vec![0usize; self.num_cols() + 1];
        for &(c, _) in &self.entries {
            start[c + 1] += 1;
        }
        for c in 0..self.num_cols() {
            start[c + 1] += start[c];
        }
        let mut next = start.clone();
        let mut index = vec![0usize; self.entries.len()];
        let mut value = vec![0f64; self.entries.len()];
        for r in 0..self.num_rows() {
            for &(c, v) in self.row(r) {
                index[next[c]] = r;
                value[next[c]] = v;
                next[c] += 1;
            }
        }
        (start, index, value)
    }
}

/// What the MIP solver was asked to reach.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MipLimits {
    pub time_limit: Option<Duration>,
    pub rel_gap: f64,
    /// Let the engine print its log on stdout.
    pub log: bool,
    /// Add cut generators and heuristics (models with fixed charges: v2 purchase pieces).
    pub cuts: bool,
    /// A plan of this objective is already known: look only for cheaper ones, and answer
    /// `Infeasible` when there are none (see `gpucap_mip_cbc::Limits::cutoff`).
    pub cutoff: Option<f64>,
    /// Stop branch and bound after this many nodes (see `gpucap_mip_cbc::Limits::node_limit`).
    pub node_limit: Option<u32>,
}

impl MipLimits {
    /// Solve to a relative gap of 1e-9 within `time_limit`: no log, cuts, cutoff or node limit.
    pub fn plain(time_limit: Option<Duration>) -> Self {
        MipLimits {
            time_limit,
            rel_gap: 1e-9,
            log: false,
            cuts: false,
            cutoff: None,
            node_limit: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MipStatus {
    /// Solved to the requested gap.
    Optimal,
    /// Stopped at the time limit with a feasible point.
    Feasible,
    /// Stopped at the time limit without one (or the engine failed).
    NoSolution,
    Infeasible,
}

#[derive(Debug, Clone)]
pub(crate) struct MipResult {
    pub status: MipStatus,
    pub values: Vec<f64>,
    /// A proven lower bound on the optimum.
    pub bound: f64,
}

/// Solves `mip` with Cbc (`gpucap-mip-cbc`): Clp's dual simplex at the root, then branch and
/// bound. No cut generators or heuristics are added: the relaxation of this model is almost
/// always whole, and on the benchmark they only cost time (measured in docs/solver.md).
///
/// Each call owns its solver, so pools are solved in parallel on their own threads.
pub(crate) fn solve(mip: &Mip, limits: MipLimits) -> MipResult {
    solve_from(mip, limits, None)
}

/// [`solve`], starting from a feasible point `start` (one value per column) that branch and
/// bound only looks to beat.
pub(crate) fn solve_from(mip: &Mip, limits: MipLimits, start: Option<&[f64]>) -> MipResult {
    if mip.num_cols() == 0 {
        return MipResult {
            status: MipStatus::Optimal,
            values: Vec::new(),
            bound: 0.0,
        };
    }
    let (col_start, row_index, value) = mip.columns();
    let problem = gpucap_mip_cbc::Problem {
        cost: &mip.cost,
        lower: &mip.lower,
        upper: &mip.upper,
        integer: &mip.integer,
        row_lower: &mip.row_lower,
        row_upper: &mip.row_upper,
        col_start: &col_start,
        row_index: &row_index,
        value: &value,
        start,
    };
    let limits = gpucap_mip_cbc::Limits {
        rel_gap: limits.rel_gap,
        // An absolute floor far below a cent.
        abs_gap: 1e-9,
        time_limit: limits.time_limit.map(|t| t.as_secs_f64()),
        log: limits.log,
        cuts: limits.cuts,
        cutoff: limits.cutoff,
        node_limit: limits.node_limit,
    };
    let solved = match gpucap_mip_cbc::solve(&problem, &limits) {
        Ok(solved) => solved,
        Err(e) => {
            tracing::warn!("the MIP engine gave no answer: {e}");
            return MipResult {
                status: MipStatus::NoSolution,
                values: Vec::new(),
                bound: f64::NEG_INFINITY,
            };
        }
    };
    let status = match solved.status {
        gpucap_mip_cbc::Status::Optimal => MipStatus::Optimal,
        gpucap_mip_cbc::Status::Feasible => MipStatus::Feasible,
        gpucap_mip_cbc::Status::NoSolution => MipStatus::NoSolution,
        gpucap_mip_cbc::Status::Infeasible => MipStatus::Infeasible,
    };
    let bound = match status {
        MipStatus::Optimal | MipStatus::Feasible => solved.bound.min(solved.objective),
        _ => solved.bound,
    };
    MipResult {
        status,
        values: solved.values,
        bound,
    }
}
