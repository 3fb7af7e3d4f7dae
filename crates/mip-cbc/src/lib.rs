//! gpucap's mixed-integer engine: COIN-OR Cbc's branch and bound over the Clp simplex, compiled
//! from source by the `cbc-src` family of crates with nothing but a C++ compiler (no cmake, no
//! libclang, no system library), so that a fresh clone builds anywhere Rust does.
//!
//! The whole interface is [`solve`]: a problem in column form in, a status, a point and a
//! proven bound out. The one `unsafe` block of the workspace is the call into the C++ shim
//! (`cpp/shim.cpp`), whose arguments are checked here first.

use std::os::raw::{c_double, c_int, c_uchar};

// Link the COIN-OR libraries the shim calls into.
use cbc_src as _;
use clp_src as _;

/// A mixed-integer program in column form: min cost·x s.t. row_lower ≤ A x ≤ row_upper,
/// lower ≤ x ≤ upper, x integer where `integer` says. Infinite bounds are `f64::INFINITY`.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    pub cost: &'a [f64],
    pub lower: &'a [f64],
    pub upper: &'a [f64],
    pub integer: &'a [bool],
    pub row_lower: &'a [f64],
    pub row_upper: &'a [f64],
    /// Column starts into `row_index` / `value` (length columns + 1).
    pub col_start: &'a [usize],
    pub row_index: &'a [usize],
    pub value: &'a [f64],
    /// A plan known to be feasible (one value per column), to start branch and bound from:
    /// Cbc then only looks for cheaper plans, and its local-search heuristics work from it.
    pub start: Option<&'a [f64]>,
}

/// When to stop.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Stop when (objective − bound) / |objective| falls below this.
    pub rel_gap: f64,
    /// … or when objective − bound falls below this.
    pub abs_gap: f64,
    /// Wall-clock seconds; `None` for no limit.
    pub time_limit: Option<f64>,
    /// Print Cbc's and Clp's log (on stdout).
    pub log: bool,
    /// Add Cbc's cut generators (probing, flow cover, mixed-integer rounding, Gomory) and
    /// heuristics (rounding, feasibility pump) to branch and bound: for models with fixed
    /// charges, whose relaxation is far from whole. Off, branch and bound is plain.
    pub cuts: bool,
    /// Only plans cheaper than this are of interest (a plan of this cost is known elsewhere):
    /// branch and bound prunes every node whose bound reaches it, and `Infeasible` then means
    /// that no cheaper plan exists.
    pub cutoff: Option<f64>,
    /// Stop branch and bound after this many nodes (`Feasible` if a plan is known). Unlike a
    /// time limit, the same problem then gives the same answer on any machine.
    pub node_limit: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Solved to the requested gap.
    Optimal,
    /// Stopped at the time limit with a feasible point.
    Feasible,
    /// Stopped at the time limit without one.
    NoSolution,
    Infeasible,
}

#[derive(Debug, Clone)]
pub struct Solution {
    pub status: Status,
    /// The point (empty without one).
    pub values: Vec<f64>,
    pub objective: f64,
    /// A proven lower bound on the optimum (−∞ when none is known).
    pub bound: f64,
}

/// Why Cbc gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the problem's arrays disagree in length: {0}")]
    Shape(&'static str),
    #[error("the problem has more than {} rows, columns or non-zeros", c_int::MAX)]
    TooLarge,
    #[error("Cbc stopped on an internal error (numerical trouble or an exception)")]
    Internal,
}

unsafe extern "C" {
    fn gpucap_mip_cbc_solve(
        num_cols: c_int,
        num_rows: c_int,
        col_start: *const c_int,
        row_index: *const c_int,
        value: *const c_double,
        col_lower: *const c_double,
        col_upper: *const c_double,
        objective: *const c_double,
        row_lower: *const c_double,
        row_upper: *const c_double,
        integer: *const c_uchar,
        rel_gap: c_double,
        abs_gap: c_double,
        time_limit: c_double,
        log_level: c_int,
        cuts: c_int,
        cutoff: c_double,
        node_limit: c_int,
        start: *const c_double,
        solution: *mut c_double,
        objective_value: *mut c_double,
        bound: *mut c_double,
    ) -> c_int;
}

/// Solves `problem` with Cbc. Every call owns its solver objects, so calls from several threads
/// run in parallel safely.
pub fn solve(problem: &Problem<'_>, limits: &Limits) -> Result<Solution, Error> {
    let cols = problem.cost.len();
    let rows = problem.row_lower.len();
    check(problem, cols, rows)?;
    let int = |n: usize| c_int::try_from(n).map_err(|_| Error::TooLarge);
    let num_cols = int(cols)?;
    let num_rows = int(rows)?;
    let col_start = problem
        .col_start
        .iter()
        .map(|&s| int(s))
        .collect::<Result<Vec<_>, _>>()?;
    let row_index = problem
        .row_index
        .iter()
        .map(|&r| int(r))
        .collect::<Result<Vec<_>, _>>()?;
    // Clp reads anything beyond ±1e30 as infinite.
    let finite = |v: &[f64]| v.iter().map(|x| x.clamp(-1e30, 1e30)).collect::<Vec<_>>();
    let (lower, upper) = (finite(problem.lower), finite(problem.upper));
    let (row_lower, row_upper) = (finite(problem.row_lower), finite(problem.row_upper));
    let integer: Vec<c_uchar> = problem.integer.iter().map(|&i| c_uchar::from(i)).collect();
    let mut values = vec![0.0; cols];
    let mut objective = f64::NAN;
    let mut bound = f64::NEG_INFINITY;
    // SAFETY: every array has the length the shim reads (checked above: `cols` columns,
    // `rows` rows, `col_start[cols]` non-zeros, every row index below `rows`); the shim
    // writes `cols` values into `values` and one double each into `objective` and `bound`,
    // and catches every C++ exception before returning.
    let status = unsafe {
        gpucap_mip_cbc_solve(
            num_cols,
            num_rows,
            col_start.as_ptr(),
            row_index.as_ptr(),
            problem.value.as_ptr(),
            lower.as_ptr(),
            upper.as_ptr(),
            problem.cost.as_ptr(),
            row_lower.as_ptr(),
            row_upper.as_ptr(),
            integer.as_ptr(),
            limits.rel_gap,
            limits.abs_gap,
            limits.time_limit.map_or(0.0, |t| t.max(0.001)),
            c_int::from(limits.log),
            c_int::from(limits.cuts),
            limits
                .cutoff
                .map_or(f64::INFINITY, |c| c.clamp(-1e30, 1e30)),
            limits
                .node_limit
                .map_or(-1, |n| c_int::try_from(n).unwrap_or(c_int::MAX)),
            problem.start.map_or(std::ptr::null(), <[f64]>::as_ptr),
            values.as_mut_ptr(),
            &mut objective,
            &mut bound,
        )
    };
    let status = match status {
        0 => Status::Optimal,
        1 => Status::Feasible,
        2 => Status::NoSolution,
        3 => Status::Infeasible,
        _ => return Err(Error::Internal),
    };
    if matches!(status, Status::NoSolution | Status::Infeasible) {
        values.clear();
    }
    Ok(Solution {
        status,
        values,
        objective,
        bound,
    })
}

fn check(p: &Problem<'_>, cols: usize, rows: usize) -> Result<(), Error> {
    if p.lower.len() != cols || p.upper.len() != cols || p.integer.len() != cols {
        return Err(Error::Shape("column bounds or integrality"));
    }
    if p.row_upper.len() != rows {
        return Err(Error::Shape("row bounds"));
    }
    if p.col_start.len() != cols + 1 || p.col_start.first() != Some(&0) {
        return Err(Error::Shape("column starts"));
    }
    if p.col_start.windows(2).any(|w| w[0] > w[1]) {
        return Err(Error::Shape("column starts must not decrease"));
    }
    let nnz = p.col_start[cols];
    if p.row_index.len() != nnz || p.value.len() != nnz {
        return Err(Error::Shape("non-zeros"));
    }
    if p.start.is_some_and(|s| s.len() != cols) {
        return Err(Error::Shape("the start must give one value per column"));
    }
    if p.row_index.iter().any(|&r| r >= rows) {
        return Err(Error::Shape("a row index is out of range"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            rel_gap: 1e-9,
            abs_gap: 1e-9,
            time_limit: None,
            log: false,
            cuts: false,
            cutoff: None,
            node_limit: None,
        }
    }

    /// max 5x + 4y s.t. 6x + 4y ≤ 24, x + 2y ≤ 6, integer: optimum 20 at (4, 0); the
    /// relaxation's optimum is 21 at (3, 1.5), so branch and bound has work to do.
    fn small_integer_program() -> Problem<'static> {
        Problem {
            cost: &[-5.0, -4.0],
            lower: &[0.0, 0.0],
            upper: &[f64::INFINITY, f64::INFINITY],
            integer: &[true, true],
            row_lower: &[f64::NEG_INFINITY, f64::NEG_INFINITY],
            row_upper: &[24.0, 6.0],
            col_start: &[0, 2, 4],
            row_index: &[0, 1, 0, 1],
            value: &[6.0, 1.0, 4.0, 2.0],
            start: None,
        }
    }

    #[test]
    fn a_cutoff_at_the_optimum_proves_nothing_cheaper_exists() {
        let at = Limits {
            cutoff: Some(-20.0 - 1e-6),
            ..limits()
        };
        let s = solve(&small_integer_program(), &at).unwrap();
        assert_eq!(s.status, Status::Infeasible, "{s:?}");
        let above = Limits {
            cutoff: Some(-19.5),
            ..limits()
        };
        let s = solve(&small_integer_program(), &above).unwrap();
        assert_eq!(s.status, Status::Optimal);
        assert!((s.objective + 20.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_start_is_improved_on_to_the_optimum() {
        // (0, 3) is feasible at −12; the optimum is −20 at (4, 0).
        let p = Problem {
            start: Some(&[0.0, 3.0]),
            ..small_integer_program()
        };
        let s = solve(&p, &limits()).unwrap();
        assert_eq!(s.status, Status::Optimal, "{s:?}");
        assert!((s.objective + 20.0).abs() < 1e-9, "{s:?}");
        let short = Problem {
            start: Some(&[0.0]),
            ..small_integer_program()
        };
        assert!(matches!(solve(&short, &limits()), Err(Error::Shape(_))));
    }

    #[test]
    fn solves_a_small_integer_program_to_optimality() {
        let s = solve(&small_integer_program(), &limits()).unwrap();
        assert_eq!(s.status, Status::Optimal);
        assert!((s.objective + 20.0).abs() < 1e-9, "{s:?}");
        assert!((s.values[0] - 4.0).abs() < 1e-9 && s.values[1].abs() < 1e-9);
        assert!(s.bound <= s.objective + 1e-9);
    }

    #[test]
    fn reports_infeasibility() {
        let p = Problem {
            cost: &[1.0],
            lower: &[0.0],
            upper: &[1.0],
            integer: &[false],
            row_lower: &[2.0],
            row_upper: &[f64::INFINITY],
            col_start: &[0, 1],
            row_index: &[0],
            value: &[1.0],
            start: None,
        };
        assert_eq!(solve(&p, &limits()).unwrap().status, Status::Infeasible);
    }

    #[test]
    fn refuses_arrays_that_disagree() {
        let p = Problem {
            cost: &[1.0],
            lower: &[0.0],
            upper: &[1.0],
            integer: &[false],
            row_lower: &[0.0],
            row_upper: &[1.0],
            col_start: &[0, 1],
            row_index: &[3],
            value: &[1.0],
            start: None,
        };
        assert!(matches!(solve(&p, &limits()), Err(Error::Shape(_))));
    }

    #[test]
    fn parallel_solves_agree() {
        let run = || {
            solve(&small_integer_program(), &limits())
                .unwrap()
                .objective
        };
        let results: Vec<f64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8).map(|_| s.spawn(run)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            results.iter().all(|&r| (r + 20.0).abs() < 1e-9),
            "{results:?}"
        );
    }
}
