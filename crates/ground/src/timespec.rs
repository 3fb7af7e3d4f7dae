//! How people write times in gpucap inputs: dates, RFC 3339 timestamps and durations like
//! `21d`, and the hour grid every plan is laid on.
//!
//! Planning happens in periods of whole UTC hours, or of half or quarter hours where an input
//! needs them (period `t` of a horizon is `[start + t p, start + (t+1) p)`), so all inputs are
//! converted to UTC here and rounded to the grid by one rule: a campaign occupies every period
//! it touches.

use std::fmt;

use chrono::{
    DateTime, Datelike, Duration, Months, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits::{MAX_SPAN_HOURS, MAX_YEAR, MIN_YEAR};

/// Parses `2027-02-01` (00:00 UTC), `2027-02-01T09:00:00Z`, `2027-02-01T09:00:00+02:00`
/// (converted to UTC) or `2027-02-01 09:00` (UTC).
///
/// Dates outside the years [`MIN_YEAR`]..=[`MAX_YEAR`] are refused: date arithmetic on them
/// (a slip, a horizon) could leave the range chrono and the Rego time builtins can hold.
pub fn parse_timestamp(s: &str) -> Result<DateTime<Utc>, String> {
    let t = parse_any_timestamp(s)?;
    if !(MIN_YEAR..=MAX_YEAR).contains(&t.year()) {
        return Err(format!(
            "`{}` is outside the years {MIN_YEAR} to {MAX_YEAR} gpucap plans in",
            s.trim()
        ));
    }
    Ok(t)
}

fn parse_any_timestamp(s: &str) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default()));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(Utc.from_utc_datetime(&t));
        }
    }
    Err(format!(
        "`{s}` is not a date or timestamp; expected `YYYY-MM-DD` or RFC 3339 like `2027-02-01T09:00:00Z`"
    ))
}

/// A length of time written as a number and a unit: `36h`, `21d`, `2w`, `1y` (365 days).
/// Several parts add up: `1w2d`. At most [`MAX_SPAN_HOURS`] (20 years).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    hours: i64,
}

impl Span {
    pub const fn hours(hours: i64) -> Self {
        Span { hours }
    }

    pub const fn days(days: i64) -> Self {
        Span { hours: days * 24 }
    }

    pub fn as_hours(self) -> i64 {
        self.hours
    }

    /// As a chrono duration. Parsed spans are bounded, so this is exact; a span built in code
    /// beyond chrono's range saturates rather than panics.
    pub fn as_duration(self) -> Duration {
        Duration::try_hours(self.hours).unwrap_or(if self.hours < 0 {
            Duration::MIN
        } else {
            Duration::MAX
        })
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let bad = || {
            format!(
                "`{s}` is not a duration; expected a number and a unit, like `36h`, `21d`, `2w` or `1y`"
            )
        };
        if text.is_empty() {
            return Err(bad());
        }
        if text.starts_with('-') {
            return Err(format!(
                "`{s}` is negative; durations are lengths of time, like `7d`"
            ));
        }
        let mut hours: i64 = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
            if digits == 0 {
                return Err(bad());
            }
            let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = rest[digits..].trim_start();
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let per = match rest[..unit_len].trim() {
                "h" | "hr" | "hrs" | "hour" | "hours" => 1,
                "d" | "day" | "days" => 24,
                "w" | "wk" | "week" | "weeks" => 24 * 7,
                "y" | "yr" | "year" | "years" => 24 * 365,
                _ => return Err(bad()),
            };
            hours = n
                .checked_mul(per)
                .and_then(|h| h.checked_add(hours))
                .ok_or_else(bad)?;
            rest = &rest[unit_len..];
        }
        if hours > MAX_SPAN_HOURS {
            return Err(format!(
                "`{s}` is longer than {} years, the longest duration gpucap takes",
                MAX_SPAN_HOURS / (24 * 365)
            ));
        }
        Ok(Span { hours })
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = self.hours;
        if h != 0 && h % (24 * 7) == 0 {
            write!(f, "{}w", h / (24 * 7))
        } else if h != 0 && h % 24 == 0 {
            write!(f, "{}d", h / 24)
        } else {
            write!(f, "{h}h")
        }
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Span::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A point in time as written in a config or calendar (see [`parse_timestamp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub DateTime<Utc>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // TOML has a native datetime type; YAML gives strings. Accept both.
        let value = toml::Value::deserialize(d)?;
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Datetime(dt) => dt.to_string(),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "expected a date or timestamp, found {}",
                    other.type_str()
                )));
            }
        };
        parse_timestamp(&text)
            .map(Timestamp)
            .map_err(serde::de::Error::custom)
    }
}

/// The time grid of a plan: `periods` periods of `minutes` minutes each from `start`, on
/// whole UTC hours. Periods are whole hours unless an input needs finer ones: an AWS capacity
/// block starts at 11:30 UTC, and a campaign that starts there should need nothing before it
/// (see [`period_minutes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Horizon {
    pub start: DateTime<Utc>,
    pub periods: u32,
    /// Minutes per period: 60, 30 or 15 (a divisor of an hour).
    pub minutes: u32,
}

/// The lengths of a period gpucap plans with, longest first.
pub const PERIOD_MINUTES: [u32; 3] = [60, 30, 15];

/// The longest period (of [`PERIOD_MINUTES`]) on whose grid every one of `edges` falls, given
/// as minutes past the hour. An edge on no quarter hour (a campaign starting 09:07) does not
/// make periods shorter: it is rounded out to the grid, as every edge was to the hour.
pub fn period_minutes(edges: impl IntoIterator<Item = u32>) -> u32 {
    edges
        .into_iter()
        .map(|m| m % 60)
        .filter(|m| m % 15 == 0)
        .fold(60, |p, m| if m % p == 0 { p } else { gcd(p, m) })
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Horizon {
    /// A horizon of whole hours starting at `start` rounded down to the hour.
    pub fn new(start: DateTime<Utc>, span: Span) -> Self {
        let start = floor_hour(start);
        let hours = span.as_hours().clamp(1, u32::MAX as i64) as u32;
        Horizon {
            start,
            periods: hours,
            minutes: 60,
        }
    }

    /// The same span in periods of `minutes` (one of [`PERIOD_MINUTES`]; anything else is
    /// taken as 60).
    pub fn with_period(self, minutes: u32) -> Self {
        let minutes = if PERIOD_MINUTES.contains(&minutes) {
            minutes
        } else {
            60
        };
        let hours = u64::from(self.periods) * u64::from(self.minutes) / 60;
        let periods = (hours * u64::from(60 / minutes)).min(u64::from(u32::MAX)) as u32;
        Horizon {
            start: self.start,
            periods,
            minutes,
        }
    }

    /// Periods per hour: 1, 2 or 4.
    pub fn per_hour(&self) -> u32 {
        (60 / self.minutes.max(1)).max(1)
    }

    /// The length of one period in hours (1, 0.5 or 0.25): what an hourly price is multiplied
    /// by for one period.
    pub fn period_hours(&self) -> f64 {
        f64::from(self.minutes) / 60.0
    }

    /// The periods in `hours` whole hours.
    pub fn periods_of(&self, hours: u32) -> u32 {
        hours.saturating_mul(self.per_hour())
    }

    /// `periods` periods in hours, to the nearest hour (GPU-periods to GPU-hours).
    pub fn hours_of(&self, periods: u64) -> u64 {
        let per = u64::from(self.per_hour());
        (periods + per / 2) / per
    }

    /// The calendar months (`YYYY-MM`, UTC) the periods `[from, to)` fall in, with how many
    /// periods in each.
    pub fn month_periods(&self, from: u32, to: u32) -> Vec<(String, u32)> {
        // Months start on whole hours, so a month's periods are its hours times `per_hour`,
        // less the parts of the first and last hours outside `[from, to)` (none on whole hours).
        let per = self.per_hour();
        let (first_hour, last_hour) = (from / per, to.div_ceil(per));
        let mut out: Vec<(String, u32)> = month_hours(self.start, first_hour, last_hour)
            .into_iter()
            .map(|(month, hours)| (month, hours * per))
            .collect();
        if let Some(first) = out.first_mut() {
            first.1 -= from - first_hour * per;
        }
        if let Some(last) = out.last_mut() {
            last.1 -= last_hour * per - to;
        }
        out.retain(|m| m.1 > 0);
        out
    }

    /// The whole hours the horizon spans.
    pub fn hours(&self) -> u32 {
        self.periods / self.per_hour()
    }

    pub fn end(&self) -> DateTime<Utc> {
        self.time_of(self.periods)
    }

    fn seconds(&self) -> i64 {
        i64::from(self.minutes.max(1)) * 60
    }

    /// Index of the period containing `t` (may be negative or past the end).
    pub fn floor(&self, t: DateTime<Utc>) -> i64 {
        (t - self.start).num_seconds().div_euclid(self.seconds())
    }

    /// Index of the first period starting at or after `t`.
    pub fn ceil(&self, t: DateTime<Utc>) -> i64 {
        let secs = (t - self.start).num_seconds();
        let len = self.seconds();
        secs.div_euclid(len) + i64::from(secs.rem_euclid(len) != 0)
    }

    /// The periods `[from, to)` touched by the interval `[a, b)`, clipped to the horizon;
    /// `None` when nothing of it falls inside.
    pub fn clip(&self, a: DateTime<Utc>, b: DateTime<Utc>) -> Option<(u32, u32)> {
        let from = self.floor(a).max(0);
        let to = self.ceil(b).min(self.periods as i64);
        (from < to).then_some((from as u32, to as u32))
    }

    /// The start of period `period`; saturates at chrono's last time rather than overflow (a
    /// horizon read back from a plan file is input, not trusted).
    pub fn time_of(&self, period: u32) -> DateTime<Utc> {
        self.start
            .checked_add_signed(Duration::minutes(
                i64::from(period) * i64::from(self.minutes),
            ))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

/// The calendar months (`YYYY-MM`, UTC) the hours `[from, to)` after `start` fall in, with how
/// many hours in each.
pub fn month_hours(start: DateTime<Utc>, from: u32, to: u32) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let at = |h: u32| start.checked_add_signed(Duration::hours(h.into()));
    let (Some(mut t), Some(end)) = (at(from), at(to)) else {
        return out;
    };
    while t < end {
        let next = Utc
            .with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
            .single()
            .and_then(|m| m.checked_add_months(Months::new(1)));
        let Some(next) = next else {
            break;
        };
        let stop = next.min(end);
        let hours = (stop - t).num_hours().clamp(0, u32::MAX.into()) as u32;
        out.push((t.format("%Y-%m").to_string(), hours));
        t = stop;
    }
    out
}

pub fn floor_hour(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_nanosecond(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_minute(0))
        .unwrap_or(t)
}

/// RFC 3339 with a `Z`, as every gpucap document writes times.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(Span::parse("21d").unwrap().as_hours(), 504);
        assert_eq!(Span::parse("2w").unwrap().as_hours(), 336);
        assert_eq!(Span::parse("36h").unwrap().as_hours(), 36);
        assert_eq!(Span::parse("1w2d").unwrap().as_hours(), 216);
        assert_eq!(Span::parse("1y").unwrap().as_hours(), 8760);
        for bad in [
            "",
            "d",
            "3",
            "3x",
            "-2d",
            "99999999999999999999d",
            "1000000y",
            "21y",
            "3000000000000000h",
        ] {
            assert!(Span::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Span::hours(336).to_string(), "2w");
        assert_eq!(Span::hours(48).to_string(), "2d");
        assert_eq!(Span::hours(5).to_string(), "5h");
    }

    #[test]
    fn timestamps_convert_to_utc() {
        let t = parse_timestamp("2027-03-01T09:30:00+02:00").unwrap();
        assert_eq!(rfc3339(t), "2027-03-01T07:30:00Z");
        assert_eq!(
            rfc3339(parse_timestamp("2027-03-01").unwrap()),
            "2027-03-01T00:00:00Z"
        );
        assert!(parse_timestamp("2027-02-30").is_err());
        assert!(parse_timestamp("tomorrow").is_err());
        assert_eq!(Span::parse("20y").unwrap().as_hours(), MAX_SPAN_HOURS);
        for far in [
            "2263-01-01",
            "+262143-01-01T00:00:00Z",
            "1969-12-31",
            "0207-01-01",
        ] {
            let err = parse_timestamp(far).unwrap_err();
            assert!(
                err.contains("outside the years") || err.contains("not a date"),
                "{far}: {err}"
            );
        }
    }

    #[test]
    fn clipping_touches_every_partial_hour() {
        let h = Horizon::new(parse_timestamp("2027-01-01").unwrap(), Span::days(2));
        let at = |s| parse_timestamp(s).unwrap();
        assert_eq!(
            h.clip(at("2027-01-01T01:30:00Z"), at("2027-01-01T03:10:00Z")),
            Some((1, 4))
        );
        assert_eq!(
            h.clip(at("2026-12-31"), at("2027-01-01T02:00:00Z")),
            Some((0, 2))
        );
        assert_eq!(h.clip(at("2027-01-05"), at("2027-01-06")), None);
        assert_eq!(h.clip(at("2027-01-02"), at("2027-01-09")), Some((24, 48)));
    }

    #[test]
    fn periods_are_as_short_as_the_edges_need_and_no_shorter() {
        assert_eq!(period_minutes([]), 60);
        assert_eq!(period_minutes([0, 0, 60]), 60);
        assert_eq!(period_minutes([0, 30]), 30);
        assert_eq!(period_minutes([30, 45]), 15);
        // 09:07 is rounded out to the grid, as it was to the hour.
        assert_eq!(period_minutes([7, 0]), 60);
        assert_eq!(period_minutes([7, 30]), 30);
    }

    #[test]
    fn half_hour_periods_clip_to_the_half_hour() {
        let h = Horizon::new(parse_timestamp("2027-01-01").unwrap(), Span::days(2)).with_period(30);
        assert_eq!((h.periods, h.per_hour(), h.hours()), (96, 2, 48));
        assert_eq!(h.end(), parse_timestamp("2027-01-03").unwrap());
        let at = |s| parse_timestamp(s).unwrap();
        assert_eq!(
            h.clip(at("2027-01-01T11:30:00Z"), at("2027-01-02T11:30:00Z")),
            Some((23, 71))
        );
        assert_eq!(
            h.clip(at("2027-01-01T01:40:00Z"), at("2027-01-01T03:10:00Z")),
            Some((3, 7))
        );
        assert_eq!(h.time_of(23), at("2027-01-01T11:30:00Z"));
        assert_eq!(h.period_hours(), 0.5);
        assert_eq!(h.periods_of(24), 48);
        // An unknown length is taken as whole hours.
        assert_eq!(h.with_period(7).minutes, 60);
        assert_eq!(h.with_period(7).periods, 48);
        // Jan 31 23:30 to Feb 1 01:00: one half hour in January, two in February.
        let m = Horizon::new(at("2027-01-31T20:00:00Z"), Span::hours(10)).with_period(30);
        assert_eq!(
            m.month_periods(7, 10),
            [("2027-01".to_string(), 1), ("2027-02".to_string(), 2)]
        );
        assert_eq!(m.month_periods(8, 9), [("2027-02".to_string(), 1)]);
        assert!(m.month_periods(9, 9).is_empty());
    }

    #[test]
    fn months_split_at_month_boundaries() {
        let start = parse_timestamp("2027-01-04").unwrap();
        // 28 days left in January, then all of February.
        assert_eq!(
            month_hours(start, 0, 28 * 24 + 28 * 24 + 5),
            [
                ("2027-01".to_string(), 672),
                ("2027-02".to_string(), 672),
                ("2027-03".to_string(), 5)
            ]
        );
        assert!(month_hours(start, 10, 10).is_empty());
        assert!(month_hours(start, 10, 3).is_empty());
    }
}
