//! How a purchase of n instances of a term offer splits into pieces that each respect the
//! offer's minimum and maximum per purchase (v2, `docs/problem-v2.md`). The solver counts the
//! pieces (each one costs `cost_per_purchase`); the planner shows and applies each piece as its
//! own purchase. Both use the rule here, so they always agree.

/// The fewest pieces a purchase of `n` instances can be made of: `ceil(n / max)` (1 without a
/// maximum), 0 for no instances. Whenever some number of pieces k has `min·k ≤ n ≤ max·k`,
/// this one does too (it is the smallest k with `n ≤ max·k`, and `min·k` only grows with k), so
/// with a cost per piece it is also the cheapest.
pub fn fewest_pieces(n: u32, max: Option<u32>) -> u32 {
    match (n, max) {
        (0, _) => 0,
        (_, Some(max)) if max > 0 => n.div_ceil(max),
        _ => 1,
    }
}

/// Whether `n` instances can be bought in pieces of `min..=max` instances each (`None`: 1 and
/// no limit).
pub fn can_split(n: u32, min: Option<u32>, max: Option<u32>) -> bool {
    let k = fewest_pieces(n, max);
    n == 0 || u64::from(min.unwrap_or(1)) * u64::from(k) <= u64::from(n)
}

/// The sizes of the pieces of a purchase of `n` instances, largest first, summing to `n`.
///
/// The rule: the fewest pieces ([`fewest_pieces`]); every piece but the last as large as the
/// maximum allows, the last one taking the rest; and if the rest is below the minimum, the
/// earlier pieces give up instances to it, the first piece first, each down to no less than the
/// minimum. So 71 instances with a maximum of 64 are `[64, 7]`, or `[63, 8]` with a minimum of
/// 8. Without a maximum a purchase is one piece.
///
/// When `n` cannot be split within the bounds at all (`can_split` is false: fewer instances than
/// the minimum, which a solver's answer never has), the pieces still keep to the maximum and the
/// last one is below the minimum.
pub fn split_purchase(n: u32, min: Option<u32>, max: Option<u32>) -> Vec<u32> {
    let k = fewest_pieces(n, max) as usize;
    if k == 0 {
        return Vec::new();
    }
    let largest = max.filter(|&m| m > 0).unwrap_or(n);
    let mut pieces = vec![largest; k];
    pieces[k - 1] = n - largest * (k as u32 - 1);
    let min = min.unwrap_or(1);
    let mut short = min.saturating_sub(pieces[k - 1]);
    for i in 0..k - 1 {
        if short == 0 {
            break;
        }
        let give = pieces[i].saturating_sub(min).min(short);
        pieces[i] -= give;
        pieces[k - 1] += give;
        short -= give;
    }
    pieces.sort_unstable_by(|a, b| b.cmp(a));
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_piece_takes_the_rest() {
        assert_eq!(split_purchase(71, None, Some(64)), vec![64, 7]);
        assert_eq!(split_purchase(71, Some(8), Some(64)), vec![63, 8]);
        assert_eq!(split_purchase(128, Some(8), Some(64)), vec![64, 64]);
        assert_eq!(split_purchase(5, None, None), vec![5]);
        assert_eq!(split_purchase(0, Some(2), Some(4)), Vec::<u32>::new());
    }

    #[test]
    fn short_pieces_borrow_from_several() {
        // 3 pieces of at most 10 for 21: [10, 10, 1]; a minimum of 7 needs 6 more.
        assert_eq!(split_purchase(21, Some(7), Some(10)), vec![7, 7, 7]);
        assert!(can_split(21, Some(7), Some(10)));
        assert!(!can_split(22, Some(8), Some(10)));
    }

    #[test]
    fn every_split_respects_the_bounds_when_one_exists() {
        for min in 1..6u32 {
            for max in min..12u32 {
                for n in 0..80u32 {
                    let pieces = split_purchase(n, Some(min), Some(max));
                    assert_eq!(pieces.iter().sum::<u32>(), n);
                    assert_eq!(pieces.len() as u32, fewest_pieces(n, Some(max)));
                    let exists = (1..=n).any(|k| min * k <= n && n <= max * k) || n == 0;
                    assert_eq!(
                        can_split(n, Some(min), Some(max)),
                        exists,
                        "{n} {min} {max}"
                    );
                    if exists {
                        assert!(
                            pieces.iter().all(|&p| (min..=max).contains(&p)),
                            "{n} {min} {max} {pieces:?}"
                        );
                    }
                }
            }
        }
    }
}
