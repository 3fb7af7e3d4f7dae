//! Chained purchases bought again as fewer: a plan's last polish.
//!
//! A plan that stops short of its proof (costs per purchase make the optimum slow to prove)
//! may hold the same instances through a run of back-to-back purchases, 2 + 1 + 5 + 28 + 1 + 3
//! days of one block where 35 + 5 would do. Each purchase pays its cost per piece, and each
//! change under a campaign that runs whole is a restart. So every such chain is bought again,
//! from the same start to the same end with the same instances, as the cheapest sequence of
//! alike offers (a shortest path over the allowed starts), kept where it is fewer purchases at
//! no more cost.
//!
//! The capacity held in every hour is unchanged, so coverage, the gangs' placements and the
//! hourly runs stay as they were. Offers are alike when nothing but their term and price tells
//! them apart: the same pool, node size, placement, instance limit, piece rules and weight in
//! every shared limit. An offer's own instance limit is checked again after the change.

use std::collections::{BTreeMap, HashMap};

use crate::problem::{OfferKind, Validated, pieces::fewest_pieces};

/// What makes term offers interchangeable for the same hours (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Kind {
    pool: usize,
    gpus: u32,
    placement: Option<String>,
    max_instances: Option<u32>,
    min_piece: u32,
    max_piece: Option<u32>,
    piece_cost_bits: u64,
    /// `(limit, weight)` for every shared limit the offer is in.
    weights: Vec<(usize, u32)>,
}

fn kind_of(v: &Validated, o: usize) -> Kind {
    let offer = &v.problem().offers[o];
    let (min_piece, max_piece, piece_cost) = v.piece_rules(o);
    Kind {
        pool: v.pool_of(o),
        gpus: offer.gpus_per_instance,
        placement: offer.placement.clone(),
        max_instances: offer.max_instances,
        min_piece,
        max_piece,
        piece_cost_bits: piece_cost.to_bits(),
        weights: v
            .shared_limits()
            .iter()
            .enumerate()
            .filter_map(|(l, s)| {
                s.offers
                    .iter()
                    .find(|&&(x, _)| x == o)
                    .map(|&(_, w)| (l, w))
            })
            .collect(),
    }
}

/// Where a purchase of term offer `o` at `start` stops holding: its term's end, or the
/// horizon's.
fn end_of(v: &Validated, o: usize, start: u32) -> u32 {
    let term = v.problem().offers[o].term_hours.unwrap_or(0);
    start.saturating_add(term).min(v.hours())
}

/// The cost of `n` instances of `o`, with its pieces' cost.
fn cost_of(v: &Validated, o: usize, n: u32) -> f64 {
    let (_, max, piece) = v.piece_rules(o);
    f64::from(n) * v.term_cost_per_instance(o) + f64::from(fewest_pieces(n, max)) * piece
}

/// `purchases` `(offer, start, instances)` with every chain of alike purchases bought as the
/// cheapest sequence that holds the same instances over the same hours, where that is fewer
/// purchases at no more cost.
///
/// Every solution passes through here (`plan::solution`, also while the coupled search
/// compares plans), so the offers' kinds are read only once a chain is found.
pub(crate) fn merged(v: &Validated, purchases: Vec<(usize, u32, u32)>) -> Vec<(usize, u32, u32)> {
    let problem = v.problem();
    let is_term = |o: usize| problem.offers[o].kind == OfferKind::Term;
    let mut kinds: HashMap<usize, Kind> = HashMap::new();
    for &(o, _, _) in &purchases {
        if is_term(o) {
            kinds.entry(o).or_insert_with(|| kind_of(v, o));
        }
    }
    // Chains: purchases in start order, each joining the chain of its kind and size that ends
    // where it starts.
    let mut order: Vec<usize> = (0..purchases.len()).collect();
    order.sort_by_key(|&i| (purchases[i].1, purchases[i].0));
    let mut chains: Vec<Vec<usize>> = Vec::new();
    let mut open: BTreeMap<(&Kind, u32, u32), usize> = BTreeMap::new();
    for &i in &order {
        let (o, start, n) = purchases[i];
        let Some(kind) = kinds.get(&o) else {
            continue;
        };
        let c = match open.remove(&(kind, n, start)) {
            Some(c) => c,
            None => {
                chains.push(Vec::new());
                chains.len() - 1
            }
        };
        chains[c].push(i);
        open.insert((kind, n, end_of(v, o, start)), c);
    }
    chains.retain(|c| c.len() > 1);
    if chains.is_empty() {
        return purchases;
    }
    // The offers alike to each chained one, by kind, each offer's kind read once.
    let mut alike: HashMap<Kind, Vec<usize>> = chains
        .iter()
        .map(|c| (kinds[&purchases[c[0]].0].clone(), Vec::new()))
        .collect();
    for o in (0..problem.offers.len()).filter(|&o| is_term(o)) {
        if let Some(offers) = alike.get_mut(&kind_of(v, o)) {
            offers.push(o);
        }
    }
    let mut removed = vec![false; purchases.len()];
    let mut added: Vec<(usize, u32, u32)> = Vec::new();
    for chain in &chains {
        let (o0, from, n) = purchases[chain[0]];
        let (ol, last, _) = purchases[chain[chain.len() - 1]];
        let to = end_of(v, ol, last);
        let now: f64 = chain.iter().map(|&i| cost_of(v, purchases[i].0, n)).sum();
        let Some((cost, path)) = cheapest(v, &alike[&kinds[&o0]], from, to, n) else {
            continue;
        };
        // Fewer purchases at no more cost: fewer charges, and fewer restarts under the
        // campaigns that run on them.
        if path.len() < chain.len() && cost <= now + 1e-9 * now.abs().max(1.0) {
            for &i in chain {
                removed[i] = true;
            }
            added.extend(path.into_iter().map(|(o, s)| (o, s, n)));
        }
    }
    if added.is_empty() {
        return purchases;
    }
    let mut kept: Vec<(usize, u32, u32)> = purchases
        .iter()
        .zip(&removed)
        .filter(|(_, r)| !**r)
        .map(|(p, _)| *p)
        .chain(added)
        .collect();
    kept.sort_unstable();
    if within_limits(v, &kept) {
        kept
    } else {
        purchases
    }
}

/// The cheapest sequence of purchases of `n` instances of `offers`, back to back from `from`
/// to `to`: `(cost, [(offer, start)])`, fewest purchases among the cheapest.
fn cheapest(
    v: &Validated,
    offers: &[usize],
    from: u32,
    to: u32,
    n: u32,
) -> Option<(f64, Vec<(usize, u32)>)> {
    // Best (cost, purchases, previous position, offer) to reach each position.
    let mut best: BTreeMap<u32, (f64, usize, u32, usize)> = BTreeMap::new();
    best.insert(from, (0.0, 0, from, usize::MAX));
    let mut at = Some(from);
    while let Some(pos) = at {
        let (cost, count, _, _) = best[&pos];
        if pos < to {
            for &o in offers {
                if v.starts(o).binary_search(&pos).is_err() {
                    continue;
                }
                let end = end_of(v, o, pos);
                if end <= pos || end > to {
                    continue;
                }
                let next = (cost + cost_of(v, o, n), count + 1, pos, o);
                let better = best
                    .get(&end)
                    .is_none_or(|b| (next.0, next.1) < (b.0 - 1e-9 * b.0.abs(), b.1));
                if better {
                    best.insert(end, next);
                }
            }
        }
        at = best.range(pos + 1..).next().map(|(&p, _)| p);
    }
    let &(cost, _, _, _) = best.get(&to)?;
    let mut path = Vec::new();
    let mut pos = to;
    while pos != from {
        let (_, _, prev, o) = best[&pos];
        path.push((o, prev));
        pos = prev;
    }
    path.reverse();
    Some((cost, path))
}

/// Whether every term offer's held instances stay within its own limit in every hour.
fn within_limits(v: &Validated, purchases: &[(usize, u32, u32)]) -> bool {
    let mut changes: BTreeMap<usize, BTreeMap<u32, i64>> = BTreeMap::new();
    for &(o, start, n) in purchases {
        if v.limit(0, o).is_none() {
            continue;
        }
        let c = changes.entry(o).or_default();
        *c.entry(start).or_default() += i64::from(n);
        *c.entry(end_of(v, o, start)).or_default() -= i64::from(n);
    }
    changes.iter().all(|(&o, c)| {
        let limit = i64::from(v.limit(0, o).unwrap_or(u32::MAX));
        let mut held = 0;
        c.values().all(|d| {
            held += d;
            held <= limit
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{parse, validate};

    /// One pool, blocks of 1, 2, 3 and 5 days at $24 an hour per instance and $100 a piece.
    fn problem() -> Validated {
        let blocks: Vec<String> = [1, 2, 3, 5]
            .iter()
            .map(|d| {
                format!(
                    r#"{{"id": "b{d}", "pool": "p", "kind": "term", "gpus_per_instance": 8,
                     "price_per_instance_hour": 24.0, "term_hours": {},
                     "starts": {{"from": 0, "to": 240, "step": 24}}, "cost_per_purchase": 100.0}}"#,
                    d * 24
                )
            })
            .collect();
        let text = format!(
            r#"{{"schema": "gpucap.problem/v2", "start": "2027-01-04T00:00:00Z", "hours": 240,
          "pools": ["p"],
          "offers": [
            {{"id": "od", "pool": "p", "kind": "on_demand", "gpus_per_instance": 8,
             "price_per_instance_hour": 60.0}},
            {},
            {{"id": "other", "pool": "p", "kind": "term", "gpus_per_instance": 8,
             "price_per_instance_hour": 20.0, "term_hours": 24, "max_instances": 1,
             "starts": {{"from": 0, "to": 240, "step": 24}}, "cost_per_purchase": 100.0}}
          ],
          "scenarios": [{{"name": "e", "probability": 1.0,
            "demand": {{"p": {{"firm": [[24, 240, 16]]}}}}}}]}}"#,
            blocks.join(",\n")
        );
        validate(parse(&text, std::path::Path::new("chains.json")).expect("parses")).expect("valid")
    }

    #[test]
    fn a_chain_of_blocks_is_bought_again_as_the_fewest_that_cost_least() {
        let v = problem();
        // 1 + 2 + 1 + 1 days from day 1, 2 instances: five purchases, back to back.
        let chain = vec![(1, 24, 2), (2, 48, 2), (1, 96, 2), (1, 120, 2)];
        let merged = merged(&v, chain);
        // The same five days as one 5-day block.
        assert_eq!(merged, vec![(4, 24, 2)]);
    }

    #[test]
    fn without_costs_per_purchase_a_chain_is_still_bought_as_fewer_at_the_same_cost() {
        let text = problem().problem().clone();
        let mut free = text;
        for o in &mut free.offers {
            o.cost_per_purchase = None;
        }
        let v = validate(free).expect("valid");
        let chain = vec![(1, 24, 2), (1, 48, 2), (1, 72, 2)];
        assert_eq!(merged(&v, chain), vec![(3, 24, 2)]);
    }

    #[test]
    fn purchases_that_are_not_back_to_back_or_not_alike_are_left_alone() {
        let v = problem();
        // A gap between them; other sizes; an offer with its own limit.
        let apart = vec![(1, 24, 2), (1, 72, 2)];
        assert_eq!(merged(&v, apart.clone()), apart);
        let sizes = vec![(1, 24, 2), (1, 48, 3)];
        assert_eq!(merged(&v, sizes.clone()), sizes);
        let unlike = vec![(1, 24, 1), (5, 48, 1)];
        assert_eq!(merged(&v, unlike.clone()), unlike);
    }
}
