//! Progress of the solver on stderr, for `plan` and `solve`: on a terminal a spinner naming the
//! pool being solved and how many are done; at `-v` a line per pool as it ends (status, cost,
//! proven bound, gap, time). Otherwise nothing, so tests and pipes see only the result.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use crate::solver::progress::{Observer, PoolFinished, PoolStarted, SolveObserver};

/// The CLI's [`SolveObserver`].
pub struct SolveProgress {
    bar: Option<ProgressBar>,
    lines: bool,
    pools: usize,
    started: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    done: usize,
    running: Vec<String>,
}

impl SolveProgress {
    /// For `pools` pools. `bar`: a spinner already on screen to write into (`plan` has one);
    /// without one, a spinner is started when stderr is a terminal. `verbose` adds a line per
    /// pool; `quiet` silences both.
    pub fn observer(
        pools: usize,
        bar: Option<ProgressBar>,
        verbose: bool,
        quiet: bool,
    ) -> Observer {
        if quiet {
            return Observer::default();
        }
        let bar = bar.or_else(|| {
            std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
                let bar = ProgressBar::new_spinner();
                bar.enable_steady_tick(Duration::from_millis(120));
                bar
            })
        });
        if bar.is_none() && !verbose {
            return Observer::default();
        }
        Observer::new(std::sync::Arc::new(SolveProgress {
            bar,
            lines: verbose,
            pools,
            started: Instant::now(),
            state: Mutex::default(),
        }))
    }

    fn show(&self, state: &State) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "solving: {} of {} pools done{}; {:.0} s",
                // A pool stopped without a plan is solved again without terms: count it once.
                state.done.min(self.pools),
                self.pools,
                if state.running.is_empty() {
                    String::new()
                } else {
                    format!(", on {}", state.running.join(", "))
                },
                self.started.elapsed().as_secs_f64()
            ));
        }
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }
}

impl SolveObserver for SolveProgress {
    fn pool_started(&self, pool: &PoolStarted<'_>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .running
            .push(crate::text::visible(pool.pool).into_owned());
        self.show(&state);
        drop(state);
        if self.lines {
            self.line(format!(
                "pool {}: solving {} columns, {} rows",
                crate::text::visible(pool.pool),
                pool.columns,
                pool.rows
            ));
        }
    }

    fn pool_finished(&self, pool: &PoolFinished<'_>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.done += 1;
        let name = crate::text::visible(pool.pool).into_owned();
        if let Some(i) = state.running.iter().position(|p| *p == name) {
            state.running.remove(i);
        }
        self.show(&state);
        drop(state);
        if self.lines {
            self.line(finished_line(pool));
        }
    }
}

/// `pool h100: optimal, cost $1,234.00, bound $1,234.00, gap 0.0000 %, 1.2 s`.
fn finished_line(pool: &PoolFinished<'_>) -> String {
    let name = crate::text::visible(pool.pool);
    let seconds = pool.seconds;
    match pool.cost {
        Some(cost) => {
            let gap = if cost > 0.0 {
                (cost - pool.bound).max(0.0) / cost * 100.0
            } else {
                0.0
            };
            // One word that matches the gap: a search stopped at its node budget may have
            // closed it.
            let status = if gap <= crate::solver::OPTIMALITY_GAP * 100.0 {
                "optimal"
            } else {
                pool.status
            };
            format!(
                "pool {name}: {status}, cost ${cost:.2}, bound ${:.2}, gap {gap:.4} %, {seconds:.1} s",
                pool.bound
            )
        }
        None => format!("pool {name}: {}, {seconds:.1} s", pool.status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_pool_reads_as_one_line_with_its_gap() {
        let line = finished_line(&PoolFinished {
            pool: "h100",
            status: "feasible",
            cost: Some(200.0),
            bound: 150.0,
            seconds: 1.25,
        });
        assert_eq!(
            line,
            "pool h100: feasible, cost $200.00, bound $150.00, gap 25.0000 %, 1.2 s"
        );
        let line = finished_line(&PoolFinished {
            pool: "h100",
            status: "feasible",
            cost: Some(200.0),
            bound: 200.0,
            seconds: 1.25,
        });
        assert_eq!(
            line, "pool h100: optimal, cost $200.00, bound $200.00, gap 0.0000 %, 1.2 s",
            "a closed gap is optimal, whatever the search's own status"
        );
        let line = finished_line(&PoolFinished {
            pool: "a\u{1b}[2J",
            status: "no plan yet",
            cost: None,
            bound: f64::NEG_INFINITY,
            seconds: 3.0,
        });
        assert_eq!(line, "pool a\\u{1b}[2J: no plan yet, 3.0 s");
    }

    #[test]
    fn nothing_is_observed_when_quiet_or_off_a_terminal_without_verbose() {
        let quiet = SolveProgress::observer(2, None, true, true);
        assert_eq!(format!("{quiet:?}"), "Observer(None)");
        let on = SolveProgress::observer(2, None, true, false);
        assert_eq!(format!("{on:?}"), "Observer(..)");
    }
}
