//! Spot placement scores from EC2 `GetSpotPlacementScores`: AWS's 1–10 estimate of how likely a
//! spot request of a given size succeeds in a region or zone. Kept apart from prices so that
//! interruption modelling can use them later.

use crate::anomaly::AnomalyReason;

/// One scored region or zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotPlacementScore {
    pub region: String,
    /// Zone id (`use1-az4`), present when scores were asked per zone.
    pub availability_zone_id: Option<String>,
    /// 1 (unlikely) to 10 (highly likely).
    pub score: u8,
    /// The instance types and target capacity the score is for.
    pub instance_types: Vec<String>,
    pub target_capacity: u32,
}

/// Checks one `<item>` of `spotPlacementScoreSet`.
pub fn parse(
    region: Option<&str>,
    zone_id: Option<&str>,
    score: Option<i32>,
    instance_types: &[String],
    target_capacity: u32,
) -> Result<SpotPlacementScore, AnomalyReason> {
    let region = region.ok_or_else(|| AnomalyReason::Malformed {
        detail: "spot placement score without region".into(),
    })?;
    let score = score
        .and_then(|s| u8::try_from(s).ok())
        .filter(|s| (1..=10).contains(s))
        .ok_or_else(|| AnomalyReason::Malformed {
            detail: format!("spot placement score {score:?} outside 1..=10"),
        })?;
    Ok(SpotPlacementScore {
        region: region.to_string(),
        availability_zone_id: zone_id.map(str::to_string),
        score,
        instance_types: instance_types.to_vec(),
        target_capacity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_outside_the_scale_are_refused() {
        let types = ["p5.48xlarge".to_string()];
        assert_eq!(
            parse(Some("us-east-2"), Some("use2-az3"), Some(7), &types, 2)
                .unwrap()
                .score,
            7
        );
        assert!(parse(Some("us-east-2"), None, Some(11), &types, 2).is_err());
        assert!(parse(None, None, Some(3), &types, 2).is_err());
    }
}
