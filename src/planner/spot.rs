//! The spot model: what a spot price list does not say. Two numbers per offer go into the
//! problem: the `overhead` (extra cost for work redone after interruptions) and how many spot
//! instances can be counted on (`max_instances`).
//!
//! - **Overhead.** An interrupted job loses, on average, half a checkpoint interval of work and
//!   then waits for a replacement instance, so each interruption costs `checkpoint / 2 +
//!   restart` instance-hours. With `λ` interruptions per instance-hour the extra cost is
//!   `overhead = λ × (checkpoint / 2 + restart)` (in hours), a fraction of the spot bill.
//! - **Instances counted on.** Of `n` spot instances asked for (the offer's stated limit, else
//!   `spot.max_instances`), on average only a fraction `availability` is held; the problem
//!   counts `floor(availability × n)`.
//!
//! The defaults are measured from the public spot traces of the SkyPilot group
//! (`skypilot-org/spot-traces`; the files used are in `tests/data/spot-traces`, see its README,
//! and `tests/spot_defaults.rs` recomputes the defaults from them):
//! - `interruptions_per_hour = 0.229`: 802 preemptions in 3,497 spot instance-hours of AWS
//!   V100 instances (`preemption/1-node/aws-04-22-2023` and `preemption/4-node/aws-08-03-2023`,
//!   NSDI'24 "Can't Be Late" traces, April and August 2023).
//! - `availability = 0.47`: mean fraction of 16 requested AWS p3.2xlarge spot instances held
//!   (`availability/16-node/aws-08-27-2023`, three zones, August 2023).
//! - `max_instances = 16`: the request size those traces measured.
//!
//! They are V100 figures from 2023; newer and larger GPUs are scarcer on spot, so per-place
//! overrides (`[spot.overrides."aws/us-east-1"]`) should be set from your own history where
//! you have it.

use gpucap_provider::{Cloud, Offer};

use crate::config::SpotSettings;

/// The spot figures that apply to one place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpotFigures {
    pub interruptions_per_hour: f64,
    pub availability: f64,
    pub max_instances: u32,
}

/// The figures for `cloud/region/instance_type`: the defaults, overridden by the longest
/// matching `spot.overrides` key.
pub fn figures(
    settings: &SpotSettings,
    cloud: Cloud,
    region: &str,
    instance_type: &str,
) -> SpotFigures {
    let mut figures = SpotFigures {
        interruptions_per_hour: settings.interruptions_per_hour,
        availability: settings.availability,
        max_instances: settings.max_instances,
    };
    let keys = [
        cloud.to_string(),
        format!("{cloud}/{region}"),
        format!("{cloud}/{region}/{instance_type}"),
    ];
    for key in keys {
        if let Some(o) = settings.overrides.get(&key) {
            if let Some(v) = o.interruptions_per_hour {
                figures.interruptions_per_hour = v;
            }
            if let Some(v) = o.availability {
                figures.availability = v;
            }
            if let Some(v) = o.max_instances {
                figures.max_instances = v;
            }
        }
    }
    figures
}

/// Extra cost of interruptions as a fraction of the spot bill.
pub fn overhead(figures: &SpotFigures, settings: &SpotSettings) -> f64 {
    let lost_hours = (f64::from(settings.checkpoint_interval_minutes) / 2.0
        + f64::from(settings.restart_minutes))
        / 60.0;
    figures.interruptions_per_hour * lost_hours
}

/// Spot instances of `offer` the plan may count on in any one hour.
pub fn usable_instances(figures: &SpotFigures, offer: &Offer) -> u32 {
    let asked = offer.max_instances.unwrap_or(figures.max_instances);
    (figures.availability * f64::from(asked) + 1e-9).floor() as u32
}

/// The assumption as a person reads it in the plan.
pub fn describe(settings: &SpotSettings) -> String {
    let f = SpotFigures {
        interruptions_per_hour: settings.interruptions_per_hour,
        availability: settings.availability,
        max_instances: settings.max_instances,
    };
    format!(
        "spot: {:.3} interruptions per instance-hour, each losing half a {} min checkpoint interval plus a {} min restart, so spot costs {:.1} % more than its price; {:.0} % of the {} instances asked for per offer are counted on (defaults from the SkyPilot spot traces, 2023; override under [spot]{})",
        f.interruptions_per_hour,
        settings.checkpoint_interval_minutes,
        settings.restart_minutes,
        overhead(&f, settings) * 100.0,
        f.availability * 100.0,
        f.max_instances,
        if settings.overrides.is_empty() {
            String::new()
        } else {
            format!(
                "; overridden for {}",
                settings
                    .overrides
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SpotOverride;

    #[test]
    fn default_overhead_is_about_eleven_percent() {
        let s = SpotSettings::default();
        let f = figures(&s, Cloud::Aws, "us-east-1", "p5.48xlarge");
        // 0.229 × (15 + 15) / 60
        assert!((overhead(&f, &s) - 0.1145).abs() < 1e-12);
    }

    #[test]
    fn the_longest_override_wins() {
        let mut s = SpotSettings::default();
        s.overrides.insert(
            "aws".into(),
            SpotOverride {
                availability: Some(0.5),
                ..Default::default()
            },
        );
        s.overrides.insert(
            "aws/us-west-2".into(),
            SpotOverride {
                availability: Some(0.9),
                max_instances: Some(4),
                ..Default::default()
            },
        );
        let east = figures(&s, Cloud::Aws, "us-east-1", "p5.48xlarge");
        let west = figures(&s, Cloud::Aws, "us-west-2", "p5.48xlarge");
        assert_eq!((east.availability, east.max_instances), (0.5, 16));
        assert_eq!((west.availability, west.max_instances), (0.9, 4));
        assert_eq!(
            figures(&s, Cloud::Gcp, "us-central1", "a3-highgpu-8g").availability,
            0.47
        );
    }
}
