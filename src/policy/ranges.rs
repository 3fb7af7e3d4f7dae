//! `numbers.range` and `numbers.range_step` with a bound on their length.
//!
//! regorus's own versions reserve the whole result before counting it against the memory limit
//! (`MAX_POLICY_MEMORY`): a range of 10¹⁵ numbers is an allocation the system refuses, which
//! ends the process instead of failing the gate. These replacements, registered as extensions
//! (which regorus looks up before its builtins), refuse a range longer than the memory limit
//! could hold and otherwise return what the builtins return.

use anyhow::{Result, bail};
use regorus::Value;

/// Most numbers one range may hold: 10⁷, 240 MB of regorus values (24 bytes each), a quarter
/// of [`crate::limits::MAX_POLICY_MEMORY`], so that the memory check that follows the range
/// still has room to stop what the policy builds from it.
pub const MAX_RANGE_LEN: i64 = 10_000_000;

/// Adds both functions to `engine`.
pub fn register(engine: &mut regorus::Engine) -> Result<()> {
    engine.add_extension(
        "numbers.range".into(),
        2,
        Box::new(|args: Vec<Value>| range("numbers.range", &args[0], &args[1], 1)),
    )?;
    engine.add_extension(
        "numbers.range_step".into(),
        3,
        Box::new(|args: Vec<Value>| {
            let step = integer("numbers.range_step", &args[2])?;
            if step <= 0 {
                bail!("numbers.range_step: step must be a positive integer");
            }
            range("numbers.range_step", &args[0], &args[1], step)
        }),
    )?;
    Ok(())
}

fn integer(name: &str, v: &Value) -> Result<i64> {
    match v.as_i64() {
        Ok(n) => Ok(n),
        Err(_) => bail!("{name}: operand must be an integer, got {v}"),
    }
}

/// `from`, `from ± step`, … up to `to` inclusive (downwards when `to < from`).
fn range(name: &str, from: &Value, to: &Value, step: i64) -> Result<Value> {
    let (from, to) = (integer(name, from)?, integer(name, to)?);
    let len = (i128::from(to) - i128::from(from)).abs() / i128::from(step) + 1;
    if len > i128::from(MAX_RANGE_LEN) {
        bail!("{name}: a range of {len} numbers is more than a gate may hold ({MAX_RANGE_LEN})");
    }
    let step = if to < from { -step } else { step };
    let mut values = Vec::with_capacity(len as usize);
    let mut v = from;
    for _ in 0..len {
        values.push(Value::from(v));
        v = v.saturating_add(step);
    }
    Ok(Value::from(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(v: &Value) -> Vec<i64> {
        v.as_array()
            .expect("an array")
            .iter()
            .map(|n| n.as_i64().expect("an integer"))
            .collect()
    }

    #[test]
    fn ranges_are_those_of_the_builtins() {
        let r = |a: i64, b: i64, s: i64| range("r", &Value::from(a), &Value::from(b), s);
        assert_eq!(numbers(&r(1, 4, 1).expect("ok")), [1, 2, 3, 4]);
        assert_eq!(numbers(&r(4, 1, 1).expect("ok")), [4, 3, 2, 1]);
        assert_eq!(numbers(&r(2, 2, 1).expect("ok")), [2]);
        assert_eq!(numbers(&r(0, 10, 4).expect("ok")), [0, 4, 8]);
        assert_eq!(numbers(&r(10, 0, 4).expect("ok")), [10, 6, 2]);
    }

    #[test]
    fn huge_ranges_are_errors_not_allocations() {
        for to in [i64::MAX, 1_000_000_000_000_000, MAX_RANGE_LEN + 1] {
            let err =
                range("numbers.range", &Value::from(1), &Value::from(to), 1).expect_err("refused");
            assert!(
                err.to_string().contains("more than a gate may hold"),
                "{err}"
            );
        }
        let err = range(
            "numbers.range",
            &Value::from(i64::MIN),
            &Value::from(i64::MAX),
            1,
        )
        .expect_err("refused");
        assert!(err.to_string().contains("numbers.range"), "{err}");
        assert!(range("r", &Value::from(1.5), &Value::from(3), 1).is_err());
    }
}
