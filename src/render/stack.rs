//! A stack of series over time (GPUs per campaign, per hour), shared by the terminal and image
//! charts: the largest contributors by GPU-hours get their own band, the rest share one.

use crate::demand::{PoolCurve, hourly};

/// Bands from bottom to top; each band's values per hour.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub labels: Vec<String>,
    pub values: Vec<Vec<u32>>,
    pub hours: u32,
}

impl Stack {
    /// At most `bands` bands: the biggest contributors by GPU-hours, firm before flex, and an
    /// `other (N)` band for the rest.
    pub fn of_pool(curve: &PoolCurve, hours: u32, bands: usize) -> Stack {
        // Occurrences of a recurring event (`name@date`) form one series.
        let mut groups: Vec<(String, bool, Vec<u32>)> = Vec::new();
        for c in &curve.contributions {
            let series = c.label.split('@').next().unwrap_or(&c.label);
            let values = hourly(hours, &c.segments);
            match groups
                .iter_mut()
                .find(|(l, f, _)| l == series && *f == c.flex)
            {
                Some((_, _, acc)) => acc.iter_mut().zip(values).for_each(|(a, v)| *a += v),
                None => groups.push((series.to_string(), c.flex, values)),
            }
        }
        let gpu_hours = |v: &[u32]| v.iter().map(|&x| x as u64).sum::<u64>();
        groups.sort_by(|a, b| {
            gpu_hours(&b.2)
                .cmp(&gpu_hours(&a.2))
                .then_with(|| a.0.cmp(&b.0))
        });
        let keep = if groups.len() > bands {
            bands.saturating_sub(1)
        } else {
            groups.len()
        };
        let rest = groups.split_off(keep);
        groups.sort_by_key(|g| (g.1, std::cmp::Reverse(gpu_hours(&g.2))));
        let mut labels = Vec::new();
        let mut values = Vec::new();
        for (label, flex, v) in groups {
            labels.push(if flex {
                format!("{label} (flex)")
            } else {
                label
            });
            values.push(v);
        }
        if !rest.is_empty() {
            let mut other = vec![0u32; hours as usize];
            for (_, _, v) in &rest {
                other.iter_mut().zip(v).for_each(|(o, x)| *o += x);
            }
            labels.push(format!("other ({})", rest.len()));
            values.push(other);
        }
        Stack {
            labels,
            values,
            hours,
        }
    }

    /// Sum of all bands at each hour.
    pub fn totals(&self) -> Vec<u32> {
        let mut t = vec![0u32; self.hours as usize];
        for band in &self.values {
            for (x, v) in t.iter_mut().zip(band) {
                *x += v;
            }
        }
        t
    }

    pub fn peak(&self) -> u32 {
        self.totals().into_iter().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::Contribution;
    use crate::problem::Segment;

    #[test]
    fn small_contributors_share_a_band() {
        let c = |l: &str, g| Contribution {
            label: l.into(),
            team: None,
            flex: false,
            segments: vec![Segment(0, 2, g)],
        };
        let curve = PoolCurve {
            firm: vec![],
            flex: vec![],
            contributions: vec![c("a", 1), c("b", 5), c("c", 2), c("d", 3)],
        };
        let s = Stack::of_pool(&curve, 4, 3);
        assert_eq!(s.labels, ["b", "d", "other (2)"]);
        assert_eq!(s.values[2], [3, 3, 0, 0]);
        assert_eq!(s.peak(), 11);
        let weekly = PoolCurve {
            firm: vec![],
            flex: vec![],
            contributions: vec![c("ev@2027-01-01", 2), c("ev@2027-01-08", 2), c("x", 1)],
        };
        let s = Stack::of_pool(&weekly, 4, 5);
        assert_eq!(
            s.labels,
            ["ev", "x"],
            "occurrences of a recurring event are one series"
        );
        assert_eq!(s.values[0], [4, 4, 0, 0]);
    }
}
