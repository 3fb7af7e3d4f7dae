//! The hours of a pool cut at every breakpoint: where any scenario's demand changes and where a
//! term purchase may start or end. Every hour of one segment faces the same constraints, so an
//! exact model needs one variable per segment, not per hour.

use crate::problem::Segment;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// `0 = points[0] < points[1] < … < points[m] = H`; segment j is `[points[j], points[j+1])`.
    points: Vec<u32>,
}

impl Timeline {
    /// The timeline of `[0, hours)` cut at `cuts` (any order, repeats and out-of-range ignored).
    pub fn new(hours: u32, cuts: impl IntoIterator<Item = u32>) -> Self {
        let mut points: Vec<u32> = cuts.into_iter().filter(|&c| c > 0 && c < hours).collect();
        points.push(0);
        points.push(hours);
        points.sort_unstable();
        points.dedup();
        Timeline { points }
    }

    /// The breakpoints, `0` and the horizon's end included.
    pub fn points(&self) -> &[u32] {
        &self.points
    }

    pub fn segments(&self) -> usize {
        self.points.len() - 1
    }

    pub fn start(&self, j: usize) -> u32 {
        self.points[j]
    }

    pub fn end(&self, j: usize) -> u32 {
        self.points[j + 1]
    }

    pub fn len(&self, j: usize) -> u32 {
        self.points[j + 1] - self.points[j]
    }

    /// The index of the breakpoint `t` (which must be one), `segments()` for the horizon's end.
    pub fn point(&self, t: u32) -> usize {
        match self.points.binary_search(&t) {
            Ok(i) => i,
            Err(_) => panic!("hour {t} is not a breakpoint of this timeline"),
        }
    }

    /// The segment containing hour `t`.
    pub fn segment_at(&self, t: u32) -> usize {
        self.points.partition_point(|&p| p <= t) - 1
    }

    /// Sums segments `[from, to, value]` (which must start and end on breakpoints) into a value
    /// per timeline segment.
    pub fn accumulate<'a>(&self, segments: impl IntoIterator<Item = &'a Segment>) -> Vec<u64> {
        self.sum(
            segments
                .into_iter()
                .map(|s| (s.from(), s.to(), u64::from(s.value()))),
        )
    }

    /// Sums `(from, to, value)` (starting and ending on breakpoints) into a value per segment.
    pub fn sum(&self, items: impl IntoIterator<Item = (u32, u32, u64)>) -> Vec<u64> {
        let mut diff = vec![0i64; self.points.len()];
        for (from, to, value) in items {
            diff[self.point(from)] += value as i64;
            diff[self.point(to)] -= value as i64;
        }
        let mut level = 0i64;
        diff[..self.segments()]
            .iter()
            .map(|d| {
                level += d;
                level as u64
            })
            .collect()
    }

    /// Per-segment values as `[from, to, value]` segments: runs of equal values merged, zeros left
    /// out.
    pub fn runs(&self, values: &[u32]) -> Vec<Segment> {
        let mut out: Vec<Segment> = Vec::new();
        for (j, &v) in values.iter().enumerate() {
            if v == 0 {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.1 == self.start(j) && last.2 == v => last.1 = self.end(j),
                _ => out.push(Segment(self.start(j), self.end(j), v)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_and_sums() {
        let t = Timeline::new(10, [5, 3, 3, 12, 0]);
        assert_eq!(t.segments(), 3);
        assert_eq!((t.start(1), t.end(1), t.len(1)), (3, 5, 2));
        let d = t.accumulate(&[Segment(0, 5, 2), Segment(3, 10, 1)]);
        assert_eq!(d, vec![2, 3, 1]);
        assert_eq!(t.runs(&[2, 2, 0]), vec![Segment(0, 5, 2)]);
        assert_eq!(t.runs(&[0, 1, 1]), vec![Segment(3, 10, 1)]);
    }
}
