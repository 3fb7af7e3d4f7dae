//! Accelerator-optimised machine shapes and GPU availability per zone, from Compute Engine's
//! `machineTypes` and `acceleratorTypes` aggregated lists, reduced to what pricing needs.

use std::collections::BTreeMap;

use crate::anomaly::AnomalyReason;

/// One machine type in one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineShape {
    pub name: String,
    pub zone: String,
    pub vcpus: u32,
    /// Memory, MiB (the API's `memoryMb`).
    pub memory_mib: u32,
    pub accelerator_type: String,
    pub gpus: u32,
}

/// An accelerator type offered in a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneAccelerator {
    pub zone: String,
    pub name: String,
    pub maximum_cards_per_instance: Option<i32>,
}

/// A machine type as listed, before checking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineRow {
    pub name: String,
    pub zone: String,
    pub guest_cpus: Option<i32>,
    pub memory_mb: Option<i32>,
    /// (accelerator type, count) pairs.
    pub accelerators: Vec<(Option<String>, Option<i32>)>,
}

/// Checks a machine type that comes with GPUs.
pub fn shape(row: &MachineRow) -> Result<MachineShape, AnomalyReason> {
    let bad = |detail: String| AnomalyReason::Malformed { detail };
    let positive = |v: Option<i32>, what: &str| {
        v.and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| bad(format!("{what} {v:?}")))
    };
    let [(Some(accelerator_type), count)] = row.accelerators.as_slice() else {
        return Err(bad(format!(
            "expected one accelerator group, got {:?}",
            row.accelerators
        )));
    };
    Ok(MachineShape {
        name: row.name.clone(),
        zone: row.zone.clone(),
        vcpus: positive(row.guest_cpus, "guestCpus")?,
        memory_mib: positive(row.memory_mb, "memoryMb")?,
        accelerator_type: last_segment(accelerator_type).to_string(),
        gpus: positive(*count, "guestAcceleratorCount")?,
    })
}

/// Compute resource URLs (`…/zones/us-central1-a`) are compared by their last segment.
pub fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The region of a zone (`us-central1-a` → `us-central1`).
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

/// Accelerator types per zone: zone → (type → max cards per instance).
pub fn by_zone(accelerators: &[ZoneAccelerator]) -> BTreeMap<&str, BTreeMap<&str, Option<i32>>> {
    let mut out: BTreeMap<&str, BTreeMap<&str, Option<i32>>> = BTreeMap::new();
    for a in accelerators {
        out.entry(a.zone.as_str())
            .or_default()
            .insert(a.name.as_str(), a.maximum_cards_per_instance);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_rows_are_checked() {
        let row = MachineRow {
            name: "a3-highgpu-8g".into(),
            zone: "us-central1-a".into(),
            guest_cpus: Some(208),
            memory_mb: Some(1_916_928),
            accelerators: vec![(Some("nvidia-h100-80gb".into()), Some(8))],
        };
        let s = shape(&row).unwrap();
        assert_eq!(
            (s.vcpus, s.gpus, s.accelerator_type.as_str()),
            (208, 8, "nvidia-h100-80gb")
        );
        assert!(
            shape(&MachineRow {
                accelerators: vec![],
                ..row.clone()
            })
            .is_err()
        );
        assert!(
            shape(&MachineRow {
                guest_cpus: Some(0),
                ..row
            })
            .is_err()
        );
        assert_eq!(region_of("europe-west4-b"), "europe-west4");
    }
}
