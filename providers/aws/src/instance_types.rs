//! GPU facts about EC2 instance types, from `DescribeInstanceTypes`' `GpuInfo` and
//! `NeuronInfo`: which canonical accelerator, how many per instance, how much memory each.
//! Price rows are checked against these, because the price list's own `gpu` attribute is a
//! free-form string that is sometimes wrong or missing (Trainium).

use gpucap_provider::Accelerator;

use crate::anomaly::AnomalyReason;

/// One accelerator group as `DescribeInstanceTypes` describes it (GPU or Neuron device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `H100`, `A100`, `Trainium2`, …
    pub name: String,
    pub count: Option<i32>,
    /// Memory per device, MiB.
    pub memory_mib: Option<i32>,
}

/// The GPU side of an instance type, normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuSpec {
    pub accelerator: Accelerator,
    pub count: u32,
    /// Memory per GPU, GB (MiB / 1024, rounded).
    pub memory_gb: Option<u32>,
}

/// Normalises an instance type's devices. `Ok(None)` for instance types without accelerators;
/// an error when the devices are there but cannot be understood.
pub fn gpu_spec(devices: &[DeviceInfo]) -> Result<Option<GpuSpec>, AnomalyReason> {
    let Some(first) = devices.first() else {
        return Ok(None);
    };
    if devices.iter().any(|d| d.name != first.name) {
        return Err(AnomalyReason::Malformed {
            detail: format!(
                "mixed accelerator models {:?}",
                devices.iter().map(|d| &d.name).collect::<Vec<_>>()
            ),
        });
    }
    let count: i64 = devices
        .iter()
        .map(|d| i64::from(d.count.unwrap_or(0)))
        .sum();
    let count = u32::try_from(count)
        .ok()
        .filter(|&c| c > 0)
        .ok_or_else(|| AnomalyReason::Malformed {
            detail: format!("accelerator count {count}"),
        })?;
    let memory_gb = first
        .memory_mib
        .filter(|&m| m > 0)
        .map(|m| (f64::from(m) / 1024.0).round() as u32);
    let accelerator = resolve(&first.name, memory_gb)?;
    Ok(Some(GpuSpec {
        accelerator,
        count,
        memory_gb,
    }))
}

/// AWS names the model without its memory (`A100` is sold with 40 and 80 GB), so the memory
/// picks the variant when the catalog has one (`a100-80gb`), else the bare name decides.
fn resolve(name: &str, memory_gb: Option<u32>) -> Result<Accelerator, AnomalyReason> {
    if let Some(gb) = memory_gb
        && let Ok(a) = Accelerator::parse(&format!("{name}-{gb}gb"))
    {
        return Ok(a);
    }
    Accelerator::parse(name).map_err(|_| AnomalyReason::UnknownAccelerator {
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, count: i32, mib: i32) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            count: Some(count),
            memory_mib: Some(mib),
        }
    }

    #[test]
    fn memory_picks_the_a100_variant() {
        let p4d = gpu_spec(&[dev("A100", 8, 40960)]).unwrap().unwrap();
        let p4de = gpu_spec(&[dev("A100", 8, 81920)]).unwrap().unwrap();
        assert_eq!(p4d.accelerator.name(), "a100");
        assert_eq!(p4de.accelerator.name(), "a100-80gb");
        assert_eq!(p4de.count, 8);
        assert_eq!(p4de.memory_gb, Some(80));
    }

    #[test]
    fn neuron_and_h200_resolve() {
        assert_eq!(
            gpu_spec(&[dev("Trainium2", 16, 98304)])
                .unwrap()
                .unwrap()
                .accelerator
                .name(),
            "trainium2"
        );
        assert_eq!(
            gpu_spec(&[dev("H200", 8, 143771)])
                .unwrap()
                .unwrap()
                .accelerator
                .name(),
            "h200"
        );
        assert_eq!(
            gpu_spec(&[dev("V100", 8, 32768)])
                .unwrap()
                .unwrap()
                .accelerator
                .name(),
            "v100-32gb"
        );
    }

    #[test]
    fn no_devices_is_not_an_error_but_junk_is() {
        assert_eq!(gpu_spec(&[]).unwrap(), None);
        assert!(matches!(
            gpu_spec(&[dev("Radeon Pro V520", 1, 8192)]),
            Err(AnomalyReason::UnknownAccelerator { .. })
        ));
        assert!(matches!(
            gpu_spec(&[dev("H100", 0, 81920)]),
            Err(AnomalyReason::Malformed { .. })
        ));
    }
}
