//! Parsing the decimal strings AWS sends for money (`"55.0400000000"`, `"25000.00"`) into
//! `Decimal`, never through a float, and refusing zero or negative prices.

use std::str::FromStr;

use rust_decimal::Decimal;

use crate::anomaly::AnomalyReason;

/// A price that must be strictly positive (an hourly rate, a capacity block fee).
pub fn positive(value: &str) -> Result<Decimal, AnomalyReason> {
    match Decimal::from_str(value.trim()) {
        Ok(d) if d > Decimal::ZERO => Ok(d.normalize()),
        _ => Err(AnomalyReason::BadPrice {
            value: value.to_string(),
        }),
    }
}

/// Below this, an hourly price for a GPU instance is a placeholder, not a price: the cheapest
/// GPU instance (a spot T4) costs well over ten times more. Emulators answer 0.00001.
pub const MIN_HOURLY_USD: Decimal = Decimal::from_parts(1, 0, 0, false, 2);

/// An hourly rate for a whole GPU instance: positive and not a placeholder.
pub fn hourly(value: &str) -> Result<Decimal, AnomalyReason> {
    let d = positive(value)?;
    if d < MIN_HOURLY_USD {
        return Err(AnomalyReason::BadPrice {
            value: format!("{value} (placeholder: below {MIN_HOURLY_USD} per instance-hour)"),
        });
    }
    Ok(d)
}

/// A price that may be zero (the hourly part of an All Upfront reservation, the upfront part
/// of a No Upfront one) but not negative.
pub fn non_negative(value: &str) -> Result<Decimal, AnomalyReason> {
    match Decimal::from_str(value.trim()) {
        Ok(d) if d >= Decimal::ZERO => Ok(d.normalize()),
        _ => Err(AnomalyReason::BadPrice {
            value: value.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_decimals() {
        assert_eq!(positive("55.0400000000").unwrap().to_string(), "55.04");
        assert_eq!(
            positive("0.1").unwrap() + positive("0.2").unwrap(),
            positive("0.3").unwrap()
        );
    }

    #[test]
    fn refuses_zero_placeholders_and_junk() {
        for bad in ["0.0000000000", "-1", "", "NA", "1e3x"] {
            assert!(positive(bad).is_err(), "{bad}");
        }
        assert_eq!(non_negative("0.0000000000").unwrap(), Decimal::ZERO);
        assert!(non_negative("-0.5").is_err());
        assert!(hourly("0.00001").is_err());
        assert_eq!(hourly("0.16").unwrap().to_string(), "0.16");
    }
}
