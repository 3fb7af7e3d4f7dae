//! The second stage, exactly: the cheapest whole on-demand and spot instances for one hour of
//! one scenario once the term GPUs are known, as a table computed once per scenario.
//!
//! With `OD(z)` the least cost of on-demand instances adding at least z units and `SP(w)` the
//! same for spot, covering firm demand f and all demand d (units beyond the term GPUs) costs
//!
//! ```text
//! Q(f, d) = min over f ≤ z ≤ d of OD(z) + SP(d - z)
//! ```
//!
//! (on-demand may serve flex too; buying more on-demand than d never helps). `OD` and `SP` are
//! bounded covering knapsacks, solved by dynamic programming over units with each offer split
//! into binary multiples, and they remember their choices so the instances can be read back.

use super::pool::HourlyOffer;

/// A bounded covering knapsack: `cost[z]` is the least cost of a multiset of items (each offer
/// at most its limit) adding at least z units; infinite when the limits do not allow z.
#[derive(Debug, Clone)]
struct Cover {
    cost: Vec<f64>,
    /// `(offer index, instances, units, cost)` per binary part.
    parts: Vec<(usize, u32, usize, f64)>,
    /// `taken[i]`: bit z set when part i is in the best cover of z.
    taken: Vec<Vec<u64>>,
    /// The most units the limits let it cover: `cost` is finite exactly on `0..=reach` (it
    /// never decreases, as covering more is never cheaper).
    reach: usize,
}

impl Cover {
    fn new(offers: &[(usize, &HourlyOffer)], unit: u32, max_units: usize) -> Self {
        let mut parts = Vec::new();
        for &(h, o) in offers {
            let size = (o.gpus / unit) as usize;
            let useful = max_units.div_ceil(size) as u64;
            let mut left = o.limit.map_or(useful, |l| u64::from(l).min(useful));
            let mut chunk = 1u64;
            while left > 0 {
                let n = chunk.min(left);
                parts.push((h, n as u32, size * n as usize, o.price * n as f64));
                left -= n;
                chunk *= 2;
            }
        }
        let mut cost = vec![f64::INFINITY; max_units + 1];
        cost[0] = 0.0;
        let words = (max_units + 1).div_ceil(64);
        let mut taken = Vec::with_capacity(parts.len());
        for &(_, _, units, price) in &parts {
            let mut bits = vec![0u64; words];
            for z in (1..=max_units).rev() {
                let with = cost[z.saturating_sub(units)] + price;
                if with < cost[z] {
                    cost[z] = with;
                    bits[z / 64] |= 1 << (z % 64);
                }
            }
            taken.push(bits);
        }
        let reach = cost.iter().rposition(|c| c.is_finite()).unwrap_or(0);
        Cover {
            cost,
            parts,
            taken,
            reach,
        }
    }

    /// Instances per offer index in the best cover of `z` units.
    fn read(&self, mut z: usize, counts: &mut [u32]) {
        for (i, &(h, n, units, _)) in self.parts.iter().enumerate().rev() {
            if z > 0 && self.taken[i][z / 64] >> (z % 64) & 1 == 1 {
                counts[h] += n;
                z = z.saturating_sub(units);
            }
        }
    }
}

/// The exact second stage of one pool in one scenario.
#[derive(Debug, Clone)]
pub(crate) struct Recourse {
    on_demand: Cover,
    spot: Cover,
    offers: usize,
    /// `no_firm[d]`: the best split for no firm and `d` units. The term levels of every segment
    /// above its firm demand ask for exactly these, so they are found once per scenario, not
    /// once per segment and level.
    no_firm: Vec<Option<(usize, f64)>>,
}

impl Recourse {
    /// Tables for `offers` (on-demand and spot of one scenario) up to `max_units` units of
    /// `unit` GPUs.
    pub fn new(offers: &[HourlyOffer], unit: u32, max_units: u64) -> Self {
        let max_units = max_units as usize;
        let of = |kind| {
            offers
                .iter()
                .enumerate()
                .filter(|(_, o)| o.kind == kind)
                .collect::<Vec<_>>()
        };
        let mut recourse = Recourse {
            on_demand: Cover::new(&of(crate::problem::OfferKind::OnDemand), unit, max_units),
            spot: Cover::new(&of(crate::problem::OfferKind::Spot), unit, max_units),
            offers: offers.len(),
            no_firm: Vec::new(),
        };
        recourse.no_firm = (0..=max_units).map(|d| recourse.search(0, d)).collect();
        recourse
    }

    /// The best split `(on-demand units, cost)` for firm `f` and all `d` units (`f ≤ d`), or
    /// `None` when the limits cannot cover them. Only splits where both covers are finite are
    /// tried (on-demand `z ≤ reach`, spot `d - z ≤ reach`): the others cost infinity, so the
    /// minimum and the first split attaining it are those of the whole range `f..=d`. Without
    /// spot offers that is one split, not `d - f + 1`.
    fn best(&self, f: u64, d: u64) -> Option<(usize, f64)> {
        let (f, d) = (f as usize, d as usize);
        match self.no_firm.get(d) {
            Some(&best) if f == 0 => best,
            _ => self.search(f, d),
        }
    }

    /// [`Recourse::best`], searched.
    fn search(&self, f: usize, d: usize) -> Option<(usize, f64)> {
        let from = f.max(d.saturating_sub(self.spot.reach));
        let to = d.min(self.on_demand.reach);
        let mut best: Option<(usize, f64)> = None;
        if from > to {
            return None;
        }
        // Both covers never decrease, so no split past `z` costs less than on-demand's cost at
        // `z` plus spot's least (at the smallest spot share, `d - to`): once that reaches the
        // best found, the rest of the range cannot improve on it. With spot cheaper than
        // on-demand, the best split is near the most spot and the loop ends soon after.
        // (The margin keeps a rounding difference in the sums from ending it early.)
        let spot_floor = self.spot.cost[d - to];
        for z in from..=to {
            if let Some((_, b)) = best
                && self.on_demand.cost[z] + spot_floor > b + 1e-9 * (1.0 + b.abs())
            {
                break;
            }
            let c = self.on_demand.cost[z] + self.spot.cost[d - z];
            if c < best.map_or(f64::INFINITY, |b| b.1) {
                best = Some((z, c));
            }
        }
        best
    }

    /// Least cost per hour for firm `f` and all `d` units beyond the term, if coverable.
    pub fn cost(&self, f: u64, d: u64) -> Option<f64> {
        self.best(f, d.max(f)).map(|b| b.1)
    }

    /// Instances per offer (aligned with the `offers` given to `new`) of that least-cost mix.
    pub fn mix(&self, f: u64, d: u64) -> Option<Vec<u32>> {
        let d = d.max(f);
        let (z, _) = self.best(f, d)?;
        let mut counts = vec![0u32; self.offers];
        self.on_demand.read(z, &mut counts);
        self.spot.read(d as usize - z, &mut counts);
        Some(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::OfferKind;

    fn offer(
        offer: usize,
        kind: OfferKind,
        gpus: u32,
        price: f64,
        limit: Option<u32>,
    ) -> HourlyOffer {
        HourlyOffer {
            offer,
            kind,
            gpus,
            limit,
            price,
        }
    }

    #[test]
    fn firm_on_on_demand_flex_on_the_cheapest() {
        let offers = [
            offer(0, OfferKind::OnDemand, 8, 10.0, Some(2)),
            offer(1, OfferKind::OnDemand, 8, 12.0, None),
            offer(2, OfferKind::Spot, 8, 4.0, Some(3)),
        ];
        let r = Recourse::new(&offers, 8, 20);
        // 3 firm, 8 in all: 2 + 1 on-demand for firm, 3 spot, 2 more at 12.
        assert_eq!(r.mix(3, 8), Some(vec![2, 3, 3]));
        assert_eq!(r.cost(3, 8), Some(20.0 + 36.0 + 12.0));
        assert_eq!(r.mix(0, 5), Some(vec![2, 0, 3]));
        assert_eq!(r.mix(0, 0), Some(vec![0, 0, 0]));
    }

    #[test]
    fn mixed_sizes_and_limits() {
        // 8-GPU instances at 64, 1-GPU at 9 (at most 4): 100 GPUs = 12 × 8 + 4 × 1.
        let offers = [
            offer(0, OfferKind::OnDemand, 8, 64.0, None),
            offer(1, OfferKind::OnDemand, 1, 9.0, Some(4)),
        ];
        let r = Recourse::new(&offers, 1, 100);
        assert_eq!(r.mix(100, 100), Some(vec![12, 4]));
        assert_eq!(r.cost(100, 100), Some(12.0 * 64.0 + 36.0));
        // 5 GPUs: one 8-GPU instance beats 4 + nothing.
        assert_eq!(r.mix(5, 5), Some(vec![1, 0]));
    }

    #[test]
    fn limits_that_cannot_cover() {
        let offers = [
            offer(0, OfferKind::OnDemand, 1, 1.0, Some(3)),
            offer(1, OfferKind::Spot, 1, 0.5, Some(2)),
        ];
        let r = Recourse::new(&offers, 1, 10);
        assert_eq!(r.cost(4, 4), None);
        assert_eq!(r.cost(3, 5), Some(3.0 + 1.0));
        assert_eq!(r.cost(0, 6), None);
    }
}
