//! The spot model's defaults (`[spot]` in gpucap.toml, `planner::spot`) are measured from the
//! public SkyPilot spot traces; this recomputes them from the raw traces kept in
//! `tests/data/spot-traces/` (see its README) so the constants in the code cannot drift from
//! their stated source.

#[path = "support/data.rs"]
mod data;

use gpucap::config::SpotSettings;
use serde::Deserialize;

#[derive(Deserialize)]
struct Trace {
    metadata: Metadata,
    data: Vec<u32>,
}

#[derive(Deserialize)]
struct Metadata {
    gap_seconds: f64,
}

/// The traces of one measurement: `tests/data/spot-traces/<dir>/<zone>_v100_1.json` for each
/// zone. Every file is named, so a missing one fails the test by name.
fn read(dir: &str, zones: &[&str]) -> Vec<Trace> {
    zones
        .iter()
        .map(|zone| {
            let file = format!("spot-traces/{dir}/{zone}_v100_1.json");
            serde_json::from_str(&data::read(&file))
                .unwrap_or_else(|e| panic!("tests/data/{file}: {e}"))
        })
        .collect()
}

#[test]
fn interruptions_per_hour_is_preemptions_per_spot_instance_hour_of_the_aws_gpu_traces() {
    let mut drops = 0u64;
    let mut instance_hours = 0.0;
    for (dir, zones) in [
        (
            "preemption/1-node/aws-04-22-2023",
            &["us-east-1c", "us-east-1f", "us-west-2b", "us-west-2c"][..],
        ),
        (
            "preemption/4-node/aws-08-03-2023",
            &["us-east-1f", "us-east-2a", "us-west-2c"][..],
        ),
    ] {
        for t in read(dir, zones) {
            instance_hours +=
                t.data.iter().map(|&n| f64::from(n)).sum::<f64>() * t.metadata.gap_seconds / 3600.0;
            drops += t
                .data
                .windows(2)
                .map(|w| u64::from(w[0].saturating_sub(w[1])))
                .sum::<u64>();
        }
    }
    let rate = drops as f64 / instance_hours;
    assert_eq!(drops, 802);
    assert!(
        (rate - SpotSettings::default().interruptions_per_hour).abs() < 5e-4,
        "{rate}"
    );
}

#[test]
fn availability_is_the_mean_share_of_sixteen_requested_instances_held() {
    let traces = read(
        "availability/16-node/aws-08-27-2023",
        &["us-east-2b", "us-west-2a", "us-west-2c"],
    );
    let shares: Vec<f64> = traces
        .iter()
        .map(|t| t.data.iter().map(|&n| f64::from(n)).sum::<f64>() / t.data.len() as f64 / 16.0)
        .collect();
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    let defaults = SpotSettings::default();
    assert!((mean - defaults.availability).abs() < 5e-3, "{mean}");
    assert_eq!(defaults.max_instances, 16);
    assert_eq!(
        traces.iter().map(|t| *t.data.iter().max().unwrap()).max(),
        Some(16)
    );
}
