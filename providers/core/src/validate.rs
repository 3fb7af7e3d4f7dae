//! The checks every price source applies before an offer is used: a price must be a real
//! price (not zero, negative or a placeholder), and the accelerator and GPU count must agree
//! with what the instance type is known to carry ([`crate::instance_types`]).

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use crate::provider::Problem;
use crate::{Accelerator, Cloud, instance_types};

/// A usable price, or what is wrong with it.
pub fn price(price: Decimal) -> Result<Decimal, Problem> {
    if price.is_zero() {
        Err(Problem::ZeroPrice)
    } else if price.is_sign_negative() {
        Err(Problem::PlaceholderPrice { price })
    } else {
        Ok(price)
    }
}

/// What an instance type carries, after checking what the source listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    pub accelerator: Accelerator,
    pub gpus: u32,
    /// Set when the listed count disagreed with the instance-type table and was corrected.
    pub corrected: Option<Problem>,
}

/// Resolves the accelerator and GPU count of `instance_type`. A listed count of zero or less
/// is refused; otherwise a known instance type wins over what the source listed (a
/// disagreement is returned in `corrected`), and an unknown one needs a listed accelerator and
/// a whole, positive count.
pub fn hardware(
    cloud: Cloud,
    instance_type: &str,
    listed_accelerator: Option<&str>,
    listed_gpus: Option<Decimal>,
) -> Result<Hardware, Problem> {
    if let Some(listed) = listed_gpus.filter(|g| *g <= Decimal::ZERO) {
        // Nothing to correct: a row that sells no GPUs is broken, whatever the type carries.
        return Err(Problem::Other {
            message: format!(
                "GPU count `{}` of `{instance_type}` is not a positive number",
                listed.normalize()
            ),
        });
    }
    if let Some((accelerator, gpus)) = instance_types::lookup(cloud, instance_type) {
        let corrected = match listed_gpus {
            Some(listed) if listed != Decimal::from(gpus) => Some(Problem::GpuCountMismatch {
                listed: listed.normalize().to_string(),
                expected: gpus,
            }),
            _ => None,
        };
        return Ok(Hardware {
            accelerator,
            gpus,
            corrected,
        });
    }
    let name = listed_accelerator
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| Problem::UnknownAccelerator {
            name: format!("no accelerator listed for unknown instance type `{instance_type}`"),
        })?;
    let accelerator = Accelerator::parse(name).map_err(|_| Problem::UnknownAccelerator {
        name: name.to_string(),
    })?;
    let gpus = listed_gpus
        .filter(|g| g.fract().is_zero() && *g > Decimal::ZERO && *g <= Decimal::from(64))
        .and_then(|g| g.to_u32())
        .ok_or_else(|| Problem::Other {
            message: format!(
                "GPU count `{}` of `{instance_type}` is not a whole number between 1 and 64",
                listed_gpus.map(|g| g.to_string()).unwrap_or_default()
            ),
        })?;
    Ok(Hardware {
        accelerator,
        gpus,
        corrected: None,
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).expect("decimal")
    }

    #[test]
    fn zero_and_negative_prices_are_refused() {
        assert_eq!(price(d("0")), Err(Problem::ZeroPrice));
        assert_eq!(price(d("0.000")), Err(Problem::ZeroPrice));
        assert!(matches!(
            price(d("-1")),
            Err(Problem::PlaceholderPrice { .. })
        ));
        assert_eq!(price(d("98.32")), Ok(d("98.32")));
    }

    #[test]
    fn a_known_instance_type_corrects_a_wrong_count() {
        let hw = hardware(
            Cloud::Azure,
            "Standard_ND96isr_H100_v5",
            Some("H100"),
            Some(d("12")),
        )
        .expect("known");
        assert_eq!((hw.accelerator.name(), hw.gpus), ("h100", 8));
        assert_eq!(
            hw.corrected,
            Some(Problem::GpuCountMismatch {
                listed: "12".into(),
                expected: 8
            })
        );
        let hw = hardware(Cloud::Aws, "p5.48xlarge", Some("H100"), Some(d("8.0"))).expect("known");
        assert_eq!(hw.corrected, None);
        for listed in ["0", "-8"] {
            let refused = hardware(Cloud::Aws, "p5.48xlarge", Some("H100"), Some(d(listed)));
            assert!(
                refused.is_err_and(|p| p.to_string().contains("not a positive number")),
                "{listed}"
            );
        }
    }

    #[test]
    fn an_unknown_instance_type_needs_a_sane_listing() {
        let hw = hardware(Cloud::Aws, "p9.huge", Some("H100"), Some(d("4.0"))).expect("listed");
        assert_eq!((hw.accelerator.name(), hw.gpus), ("h100", 4));
        assert!(hardware(Cloud::Aws, "p9.huge", Some("H100"), Some(d("2.5"))).is_err());
        assert!(hardware(Cloud::Aws, "p9.huge", Some("Quantum"), Some(d("1"))).is_err());
        assert!(hardware(Cloud::Aws, "p9.huge", None, Some(d("1"))).is_err());
    }
}
