//! v3: what each gang runs on, hour by hour, read from a plan's purchases and usage.
//!
//! The model only says that each placement holds enough on-demand and term instances for the
//! gangs placed there in every hour; which gang takes which instances is decided here, once the
//! plan is whole numbers. A gang keeps the instances it ran on while they last (a change is a
//! restart from a checkpoint), and takes new ones from the instrument that lasts longest, so a
//! gang changes capacity only where what it ran on ends.

use std::collections::BTreeMap;

use crate::problem::{GangRun, OfferKind, Segment, Validated};

/// One thing a gang can run on: an hourly offer, or a term offer's purchase at `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Instrument {
    offer: usize,
    start: Option<u32>,
}

/// The runs of every gang in scenario `k`, and the restarts of each gang (by index into
/// `Validated::gangs()`), for the plan's `purchases` `(offer, start, instances)`, `usage`
/// (per offer, its segments of instances in use in scenario k) and `placements`
/// `(gang, placement)`.
pub(crate) fn runs(
    v: &Validated,
    k: usize,
    purchases: &[(usize, u32, u32)],
    usage: &[(usize, Vec<Segment>)],
    placements: &[(usize, usize)],
) -> (Vec<GangRun>, BTreeMap<usize, u32>) {
    let gangs = v.gangs();
    let placement_of: BTreeMap<usize, usize> = placements.iter().copied().collect();
    let hours = v.hours();
    let mut out = Vec::new();
    let mut restarts = BTreeMap::new();
    for (q, placement) in gangs.placements.iter().enumerate() {
        let needs: Vec<_> = gangs.demand[k][placement.pool]
            .iter()
            .filter(|d| placement_of.get(&d.gang) == Some(&q))
            .collect();
        if needs.is_empty() {
            continue;
        }
        let problem = v.problem();
        // Each instrument with its instances over time, as `(from, to, instances)`.
        let mut held: Vec<(Instrument, Vec<Segment>)> = Vec::new();
        for &o in &placement.offers {
            match problem.offers[o].kind {
                OfferKind::Term => {
                    let term = problem.offers[o].term_hours.unwrap_or(0);
                    for &(_, s, n) in purchases.iter().filter(|p| p.0 == o) {
                        let end = s.saturating_add(term).min(hours);
                        let start = Some(s);
                        held.push((Instrument { offer: o, start }, vec![Segment(s, end, n)]));
                    }
                }
                OfferKind::OnDemand => {
                    if let Some((_, segments)) = usage.iter().find(|(u, _)| *u == o) {
                        let start = None;
                        held.push((Instrument { offer: o, start }, segments.clone()));
                    }
                }
                OfferKind::Spot => {}
            }
        }
        let mut cuts: Vec<u32> = needs.iter().flat_map(|d| [d.from, d.to]).collect();
        cuts.extend(
            held.iter()
                .flat_map(|(_, s)| s.iter().flat_map(|s| [s.from(), s.to()])),
        );
        cuts.sort_unstable();
        cuts.dedup();
        let at = |segments: &[Segment], hour: u32| {
            segments
                .iter()
                .find(|s| s.from() <= hour && hour < s.to())
                .map_or((0, hour), |s| (s.value(), s.to()))
        };
        // The allocation of the previous interval, per gang.
        let mut previous: BTreeMap<usize, BTreeMap<Instrument, u32>> = BTreeMap::new();
        let mut open: BTreeMap<(usize, Instrument), (u32, u32)> = BTreeMap::new();
        for w in cuts.windows(2) {
            let (from, to) = (w[0], w[1]);
            let active: Vec<_> = needs
                .iter()
                .filter(|d| d.from <= from && to <= d.to)
                .collect();
            let mut free: BTreeMap<Instrument, (u32, u32)> = held
                .iter()
                .map(|(i, s)| (*i, at(s, from)))
                .filter(|(_, (n, _))| *n > 0)
                .collect();
            let mut now: BTreeMap<usize, BTreeMap<Instrument, u32>> = BTreeMap::new();
            // First what each gang ran on, where it still is.
            for d in &active {
                let alloc = now.entry(d.gang).or_default();
                let Some(before) = previous.get(&d.gang) else {
                    continue;
                };
                let mut need = d.nodes;
                for (i, &n) in before {
                    let Some((left, _)) = free.get_mut(i) else {
                        continue;
                    };
                    let take = n.min(*left).min(need);
                    if take > 0 {
                        *left -= take;
                        need -= take;
                        *alloc.entry(*i).or_default() += take;
                    }
                }
            }
            // Then the rest, from what lasts longest.
            for d in &active {
                let alloc = now.entry(d.gang).or_default();
                let mut need = d.nodes.saturating_sub(alloc.values().sum());
                let mut order: Vec<(Instrument, u32)> =
                    free.iter().map(|(i, &(_, end))| (*i, end)).collect();
                order.sort_by_key(|&(i, end)| (std::cmp::Reverse(end), i.start.is_none(), i));
                for (i, _) in order {
                    if need == 0 {
                        break;
                    }
                    let Some((left, _)) = free.get_mut(&i) else {
                        continue;
                    };
                    let take = (*left).min(need);
                    if take > 0 {
                        *left -= take;
                        need -= take;
                        *alloc.entry(i).or_default() += take;
                    }
                }
            }
            for d in &active {
                let alloc = &now[&d.gang];
                if let Some(before) = previous.get(&d.gang)
                    && before != alloc
                {
                    *restarts.entry(d.gang).or_insert(0) += 1;
                }
            }
            // Close the runs that do not go on, open or extend the rest.
            let continuing =
                |g: usize, i: &Instrument, n: u32| now.get(&g).and_then(|a| a.get(i)) == Some(&n);
            let closed: Vec<(usize, Instrument)> = open
                .iter()
                .filter(|(key, value)| !continuing(key.0, &key.1, value.1))
                .map(|(&key, _)| key)
                .collect();
            for key in closed {
                if let Some((start, n)) = open.remove(&key) {
                    out.push(run(v, key, start, from, n));
                }
            }
            for (&g, alloc) in &now {
                for (&i, &n) in alloc {
                    open.entry((g, i)).or_insert((from, n));
                }
            }
            previous = now;
        }
        let end = cuts.last().copied().unwrap_or(0);
        for (key, (start, n)) in open {
            out.push(run(v, key, start, end, n));
        }
    }
    out.sort_by(|a, b| (&a.gang, a.from, &a.offer).cmp(&(&b.gang, b.from, &b.offer)));
    (out, restarts)
}

fn run(v: &Validated, (g, i): (usize, Instrument), from: u32, to: u32, instances: u32) -> GangRun {
    GangRun {
        gang: v.gangs().gangs[g].id.clone(),
        offer: v.problem().offers[i.offer].id.clone(),
        start_hour: i.start,
        from,
        to,
        instances,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::problem::{GangRun, Status, parse, validate};
    use crate::solver::{SolveOptions, solve};

    fn run(offer: &str, start_hour: Option<u32>, from: u32, to: u32, instances: u32) -> GangRun {
        GangRun {
            gang: "train".into(),
            offer: offer.into(),
            start_hour,
            from,
            to,
            instances,
        }
    }

    #[test]
    fn a_gang_runs_whole_in_one_placement_and_restarts_where_its_capacity_changes() {
        // The west is cheaper but holds only 2 of the gang's 3 nodes, and the 1-GPU instances
        // serve only the fluid 4 GPUs: the gang runs in the east. Its middle day is one block
        // purchase of 3 ($2,400 against $3,600 on demand). The first and last days each buy
        // one block instance ($800), which serves the fluid 4 GPUs for 12 hours ($288 of small
        // instances) and one gang node for the other 12 ($600 on demand); the gang's other two
        // nodes run on demand. $1,152 of small instances in hours 12-60, $2,400 on demand, and
        // $4,000 of blocks: $7,552.
        let text = include_str!("../../../../tests/fixtures/problems/gangs.json");
        let v = validate(parse(text, Path::new("gangs.json")).expect("parses")).expect("valid");
        let solution = solve(&v, &SolveOptions::default());
        assert_eq!(solution.status, Status::Optimal, "{solution:?}");
        assert!(
            (solution.expected_cost - 7_552.0).abs() < 1e-6,
            "{solution:?}"
        );
        assert_eq!(solution.schema, "gpucap.solution/v3");
        assert_eq!(solution.gangs.len(), 1);
        assert_eq!(solution.gangs[0].placement, "aws/us-east-1/p5.48xlarge");
        assert_eq!(solution.gangs[0].restarts, 2);
        assert_eq!(
            solution.scenarios[0].runs_on,
            vec![
                run("east/block/1d", Some(0), 12, 24, 1),
                run("east/on-demand", None, 12, 24, 2),
                run("east/block/1d", Some(24), 24, 48, 3),
                run("east/block/1d", Some(48), 48, 60, 1),
                run("east/on-demand", None, 48, 60, 2),
            ]
        );
    }
}
