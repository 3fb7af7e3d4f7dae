//! iCalendar (`.ics`) calendars, as Google Calendar and Outlook export them: each VEVENT is a
//! campaign.
//!
//! SUMMARY is the name; DTSTART with DTEND or DURATION is when (all-day events are whole UTC
//! days; TZID times are converted to UTC with the IANA database, DST included); the other
//! fields come from `key: value` lines in DESCRIPTION or `X-GPUCAP-KEY` properties (which win).
//! Recurring events (RRULE, EXDATE, RECURRENCE-ID overrides) are expanded with the `rrule`
//! crate up to the end of the planning horizon; each occurrence is a campaign named
//! `SUMMARY@DATE`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use chrono::{DateTime, Duration, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use icalendar::{CalendarComponent, CalendarDateTime, Component, DatePerhapsTime, Event};
use serde_json::{Map, Value};

use super::{Campaign, RawCampaign, unknown_key_hint};
use crate::diagnostic::{InputError, Location, did_you_mean};
use crate::limits::MAX_SPAN_HOURS;

/// Keys a description line or `X-GPUCAP-` property may set.
const KEYS: &[&str] = &[
    "accelerator",
    "gpus",
    "gpu_hours",
    "interruptible",
    "priority",
    "clouds",
    "regions",
    "buffer",
    "team",
    "gpus_per_node",
    "migration",
];

/// At most this many occurrences of one recurring event: a daily event over the 12-year
/// maximum horizon, so a runaway `FREQ=MINUTELY` rule fails loudly instead of eating memory.
const MAX_OCCURRENCES: u16 = 4400;

pub(super) fn parse(
    text: &str,
    path: &Path,
    until: DateTime<Utc>,
) -> Result<Vec<Campaign>, InputError> {
    check_content_lines(text, path)?;
    let calendar: icalendar::Calendar = text.parse().map_err(|e: String| {
        InputError::in_file(
            path,
            format!(
                "not a valid iCalendar file: {}",
                e.lines().next().unwrap_or_default()
            ),
        )
    })?;
    let event_lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "BEGIN:VEVENT")
        .map(|(i, _)| i + 1)
        .collect();
    let events: Vec<&Event> = calendar
        .components
        .iter()
        .filter_map(|c| match c {
            CalendarComponent::Event(e) => Some(e),
            _ => None,
        })
        .collect();
    if events.is_empty() {
        return Err(InputError::in_file(
            path,
            "the calendar has no events (VEVENT)",
        ));
    }
    // Occurrences replaced by a RECURRENCE-ID event are dropped from the series they belong to.
    let mut overridden: HashMap<&str, HashSet<DateTime<Utc>>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let (Some(uid), Some(prop)) = (e.get_uid(), e.properties().get("RECURRENCE-ID")) {
            let loc = event_location(path, &event_lines, i, "RECURRENCE-ID");
            let when = DatePerhapsTime::from_property(prop).ok_or_else(|| {
                InputError::new(
                    loc.clone(),
                    format!("`{}` is not a date or time", prop.value()),
                )
            })?;
            overridden
                .entry(uid)
                .or_default()
                .insert(resolve(&when, &loc)?.0);
        }
    }
    let mut campaigns = Vec::new();
    for (i, event) in events.iter().enumerate() {
        if event
            .property_value("STATUS")
            .is_some_and(|s| s.eq_ignore_ascii_case("CANCELLED"))
        {
            continue;
        }
        let skip = event
            .get_uid()
            .filter(|_| !event.properties().contains_key("RECURRENCE-ID"))
            .and_then(|uid| overridden.get(uid));
        campaigns.extend(event_campaigns(event, i, path, &event_lines, until, skip)?);
    }
    Ok(campaigns)
}

fn event_location(path: &Path, event_lines: &[usize], index: usize, field: &str) -> Location {
    let mut loc = Location::file(path).field(format!("events[{index}].{field}"));
    if let Some(&line) = event_lines.get(index) {
        loc = loc.line(line);
    }
    loc
}

/// One campaign per occurrence of the event.
fn event_campaigns(
    event: &Event,
    index: usize,
    path: &Path,
    event_lines: &[usize],
    until: DateTime<Utc>,
    skip: Option<&HashSet<DateTime<Utc>>>,
) -> Result<Vec<Campaign>, InputError> {
    let at = |field: &str| event_location(path, event_lines, index, field);
    let name = event
        .get_summary()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            InputError::new(
                at("SUMMARY"),
                "the event has no SUMMARY; it names the campaign",
            )
        })?
        .to_string();
    let start_prop = event.get_start().ok_or_else(|| {
        InputError::new(
            at("DTSTART"),
            format!("event `{name}` has no valid DTSTART"),
        )
    })?;
    let (start, tz, all_day) = resolve(&start_prop, &at("DTSTART"))?;
    let start_local = start.with_timezone(&tz).naive_local();
    let end_local = match (event.get_end(), event.property_value("DURATION")) {
        (Some(end), _) => resolve(&end, &at("DTEND"))?
            .0
            .with_timezone(&tz)
            .naive_local(),
        (None, Some(d)) => {
            let length = parse_duration(d).ok_or_else(|| {
                InputError::new(
                    at("DURATION"),
                    format!(
                        "`{d}` is not an iCalendar duration like `P3D` or `PT8H` of at most {} years",
                        MAX_SPAN_HOURS / (24 * 365)
                    ),
                )
            })?;
            start_local.checked_add_signed(length).ok_or_else(|| {
                InputError::new(
                    at("DURATION"),
                    format!("`{d}` after DTSTART is past any date gpucap plans for"),
                )
            })?
        }
        (None, None) if all_day => start_local + Duration::days(1),
        (None, None) => {
            return Err(InputError::new(
                at("DTEND"),
                format!("event `{name}` has no DTEND or DURATION"),
            ));
        }
    };
    let length = end_local - start_local;
    let fields = event_fields(event, &at("DESCRIPTION"))?;

    let occurrences = match event.property_value("RRULE") {
        None => vec![start],
        Some(rule) => expand(event, rule, &start_prop, tz, until, &at("RRULE"))?,
    };
    let recurring = occurrences.len() > 1 || event.property_value("RRULE").is_some();
    let mut out = Vec::new();
    for occ in occurrences {
        if skip.is_some_and(|s| s.contains(&occ)) {
            continue;
        }
        let occ_local = occ.with_timezone(&tz).naive_local();
        let occ_end = occ_local
            .checked_add_signed(length)
            .map(|end| local_to_utc(tz, end))
            .ok_or_else(|| {
                InputError::new(at("DTEND"), format!("event `{name}` ends past any date"))
            })?;
        let occ_name = if recurring {
            format!("{name}@{}", occ.format("%Y-%m-%d"))
        } else {
            name.clone()
        };
        out.push(build(&occ_name, occ, occ_end, &fields, at(""))?);
    }
    Ok(out)
}

/// The event's `key: value` settings: description lines first, `X-GPUCAP-*` properties over them.
fn event_fields(event: &Event, loc: &Location) -> Result<Map<String, Value>, InputError> {
    let mut fields = Map::new();
    for line in event.get_description().unwrap_or_default().lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        if KEYS.contains(&key.as_str()) {
            let value = typed_value(&key, value.trim());
            fields.insert(key, value);
        } else if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && let Some(hint) = unknown_key_hint(&key)
                .filter(|_| did_you_mean(&key, KEYS.iter().copied()).is_some())
        {
            return Err(InputError::new(
                loc.clone(),
                format!("unknown setting `{key}` in the description"),
            )
            .with_hint(hint));
        }
    }
    for (name, prop) in event.properties() {
        if let Some(key) = name.strip_prefix("X-GPUCAP-") {
            let key = key.to_ascii_lowercase().replace('-', "_");
            if !KEYS.contains(&key.as_str()) {
                let mut e = InputError::new(loc.clone(), format!("unknown property `{name}`"));
                if let Some(k) = did_you_mean(&key, KEYS.iter().copied()) {
                    e = e.with_hint(format!(
                        "did you mean `X-GPUCAP-{}`?",
                        k.to_ascii_uppercase().replace('_', "-")
                    ));
                }
                return Err(e);
            }
            fields.insert(key.clone(), typed_value(&key, prop.value().trim()));
        }
    }
    Ok(fields)
}

/// Text from an event as the JSON type the campaign field wants; anything that does not fit
/// stays a string so the campaign parser reports it with the field's name.
fn typed_value(key: &str, value: &str) -> Value {
    match key {
        "gpus" | "gpus_per_node" => value
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| value.into()),
        "buffer" | "gpu_hours" => value
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or_else(|_| value.into()),
        "interruptible" => match value.to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" | "1" => Value::Bool(true),
            "false" | "no" | "n" | "0" => Value::Bool(false),
            _ => value.into(),
        },
        "clouds" | "regions" => Value::Array(
            value
                .trim_matches(['[', ']'])
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(|s| Value::from(s.trim_matches(['"', '\''])))
                .collect(),
        ),
        _ => value.into(),
    }
}

fn build(
    name: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    fields: &Map<String, Value>,
    loc: Location,
) -> Result<Campaign, InputError> {
    let mut doc = fields.clone();
    doc.insert("name".into(), name.into());
    let (s, e) = (
        crate::timespec::rfc3339(start),
        crate::timespec::rfc3339(end),
    );
    if doc.contains_key("gpu_hours") {
        doc.insert("window".into(), serde_json::json!({"start": s, "end": e}));
    } else {
        doc.insert("start".into(), s.into());
        doc.insert("end".into(), e.into());
    }
    let field_loc = |field: String| {
        let mut l = loc.clone();
        l.field = Some(
            l.field
                .unwrap_or_default()
                .trim_end_matches('.')
                .to_string()
                + "."
                + &field,
        );
        l
    };
    let raw: RawCampaign = serde_path_to_error::deserialize(Value::Object(doc)).map_err(|e| {
        let field = e.path().to_string();
        InputError::new(field_loc(field), format!("event `{name}`: {}", e.inner()))
    })?;
    let mut source = loc.clone();
    source.field = None;
    raw.validate(source).map_err(|e| {
        let err = InputError::new(
            field_loc(e.field.to_string()),
            format!("event `{name}`: {}", e.message),
        );
        match e.hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    })
}

/// A date or time from the calendar in UTC, the time zone it was written in (for recurrence
/// and nominal durations), and whether it is an all-day date.
fn resolve(
    value: &DatePerhapsTime,
    loc: &Location,
) -> Result<(DateTime<Utc>, Tz, bool), InputError> {
    match value {
        DatePerhapsTime::Date(d) => {
            let t = d.and_hms_opt(0, 0, 0).unwrap_or_default();
            Ok((Utc.from_utc_datetime(&t), Tz::UTC, true))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::Utc(t)) => Ok((*t, Tz::UTC, false)),
        // Floating times have no zone; planning is in UTC, so they are read as UTC.
        DatePerhapsTime::DateTime(CalendarDateTime::Floating(t)) => {
            Ok((Utc.from_utc_datetime(t), Tz::UTC, false))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::WithTimezone { date_time, tzid }) => {
            let tz = time_zone(tzid).ok_or_else(|| {
                InputError::new(loc.clone(), format!("unknown time zone `{tzid}`")).with_hint(
                    "use an IANA time zone name such as `Europe/Berlin` or `America/New_York`",
                )
            })?;
            Ok((local_to_utc(tz, *date_time), tz, false))
        }
    }
}

/// A wall-clock time in `tz` as UTC. In the autumn overlap the earlier instant is taken; a time
/// in the spring gap (which no clock shows) is moved forward by the gap, as calendar apps do.
fn local_to_utc(tz: Tz, t: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&t) {
        chrono::LocalResult::Single(x) => x.with_timezone(&Utc),
        chrono::LocalResult::Ambiguous(a, _) => a.with_timezone(&Utc),
        chrono::LocalResult::None => tz
            .from_local_datetime(&(t + Duration::hours(1)))
            .earliest()
            .map(|x| x.with_timezone(&Utc))
            .unwrap_or_else(|| Utc.from_utc_datetime(&t)),
    }
}

/// IANA names, plus the Windows names Outlook writes in TZID.
fn time_zone(tzid: &str) -> Option<Tz> {
    const WINDOWS: &[(&str, &str)] = &[
        ("UTC", "UTC"),
        ("GMT Standard Time", "Europe/London"),
        ("W. Europe Standard Time", "Europe/Berlin"),
        ("Romance Standard Time", "Europe/Paris"),
        ("Central Europe Standard Time", "Europe/Budapest"),
        ("E. Europe Standard Time", "Europe/Chisinau"),
        ("Eastern Standard Time", "America/New_York"),
        ("Central Standard Time", "America/Chicago"),
        ("Mountain Standard Time", "America/Denver"),
        ("Pacific Standard Time", "America/Los_Angeles"),
        ("India Standard Time", "Asia/Kolkata"),
        ("China Standard Time", "Asia/Shanghai"),
        ("Tokyo Standard Time", "Asia/Tokyo"),
        ("Singapore Standard Time", "Asia/Singapore"),
        ("AUS Eastern Standard Time", "Australia/Sydney"),
    ];
    let tzid = tzid.trim().trim_matches('"');
    tzid.parse::<Tz>().ok().or_else(|| {
        WINDOWS
            .iter()
            .find(|(w, _)| *w == tzid)
            .and_then(|(_, iana)| iana.parse().ok())
    })
}

/// Occurrence starts (UTC) of a recurring event before `until`.
fn expand(
    event: &Event,
    rule: &str,
    start: &DatePerhapsTime,
    tz: Tz,
    until: DateTime<Utc>,
    loc: &Location,
) -> Result<Vec<DateTime<Utc>>, InputError> {
    let dtstart = match start {
        DatePerhapsTime::Date(d) => format!("DTSTART:{}T000000Z", d.format("%Y%m%d")),
        DatePerhapsTime::DateTime(CalendarDateTime::Utc(t)) => {
            format!("DTSTART:{}", t.format("%Y%m%dT%H%M%SZ"))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::Floating(t)) => {
            format!("DTSTART:{}Z", t.format("%Y%m%dT%H%M%S"))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::WithTimezone { date_time, .. }) => {
            format!(
                "DTSTART;TZID={}:{}",
                tz.name(),
                date_time.format("%Y%m%dT%H%M%S")
            )
        }
    };
    // `COUNT=0` repeats the event no times: the event would vanish without a word.
    let zero_count = rule.split(';').any(|part| {
        part.trim()
            .to_ascii_uppercase()
            .strip_prefix("COUNT=")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b == b'0'))
    });
    if zero_count {
        return Err(InputError::new(
            loc.clone(),
            format!("the rule `{rule}` has COUNT=0: the event never happens"),
        )
        .with_hint("give COUNT a number of occurrences (1 or more), or remove the event"));
    }
    let mut text = format!("{dtstart}\nRRULE:{rule}");
    for exdate in event.multi_properties().get("EXDATE").into_iter().flatten() {
        for value in exdate.value().split(',') {
            let when = DatePerhapsTime::from_property(&icalendar::Property::new("EXDATE", value))
                .map(|d| match (d, exdate.params().get("TZID")) {
                    (DatePerhapsTime::DateTime(CalendarDateTime::Floating(t)), Some(_)) => {
                        local_to_utc(tz, t)
                    }
                    (other, _) => resolve(&other, loc).map(|r| r.0).unwrap_or_default(),
                })
                .ok_or_else(|| {
                    InputError::new(
                        loc.clone(),
                        format!("EXDATE `{value}` is not a date or time"),
                    )
                })?;
            text.push_str(&format!("\nEXDATE:{}", when.format("%Y%m%dT%H%M%SZ")));
        }
    }
    let set: rrule::RRuleSet = text.parse().map_err(|e: rrule::RRuleError| {
        InputError::new(
            loc.clone(),
            format!("invalid recurrence rule `{rule}`: {e}"),
        )
    })?;
    let result = set
        .before(until.with_timezone(&rrule::Tz::UTC))
        .all(MAX_OCCURRENCES);
    if result.limited && result.dates.len() >= MAX_OCCURRENCES as usize {
        return Err(InputError::new(
            loc.clone(),
            format!(
                "the rule `{rule}` repeats more than {MAX_OCCURRENCES} times inside the horizon"
            ),
        )
        .with_hint("give the rule a COUNT or UNTIL, or a coarser FREQ"));
    }
    Ok(result
        .dates
        .into_iter()
        .map(|d| d.with_timezone(&Utc))
        .filter(|d| *d < until)
        .collect())
}

/// ISO 8601 / RFC 5545 durations: `P2W`, `P1D`, `PT8H30M`, `P1DT12H`.
fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let body = s.strip_prefix('P')?;
    let (date, time) = body.split_once('T').unwrap_or((body, ""));
    let mut total = Duration::zero();
    let mut add = |part: &str, units: &[(char, i64)]| -> Option<()> {
        let mut num = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() {
                num.push(c);
            } else {
                let secs = units.iter().find(|(u, _)| *u == c)?.1;
                let part = num.parse::<i64>().ok()?.checked_mul(secs)?;
                total = total.checked_add(&Duration::try_seconds(part)?)?;
                // Bounded like every duration gpucap reads (`limits::MAX_SPAN_HOURS`).
                if total.num_hours() > MAX_SPAN_HOURS {
                    return None;
                }
                num.clear();
            }
        }
        num.is_empty().then_some(())
    };
    add(date, &[('W', 7 * 86400), ('D', 86400)])?;
    add(time, &[('H', 3600), ('M', 60), ('S', 1)])?;
    if body.is_empty() || (body.contains('T') && time.is_empty()) {
        return None;
    }
    Some(if negative { -total } else { total })
}

/// Every unfolded content line must be `NAME[;PARAM=…]:VALUE`; the first one that is not is
/// reported with its line number (the iCalendar parser itself does not say where it stopped).
fn check_content_lines(text: &str, path: &Path) -> Result<(), InputError> {
    let mut saw_begin = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with([' ', '\t']) || line.trim().is_empty() {
            continue; // a folded continuation, or trailing blank lines
        }
        let name_end = line.find([':', ';']).unwrap_or(line.len());
        let name = &line[..name_end];
        let ok = name_end < line.len()
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && line.contains(':');
        if !ok {
            return Err(InputError::new(
                Location::file(path).line(i + 1).column(1),
                format!("not an iCalendar content line: `{}`", line.chars().take(60).collect::<String>()),
            )
            .with_hint("each line is `NAME:VALUE` (or `NAME;PARAM=X:VALUE`); continuation lines start with a space"));
        }
        if !saw_begin {
            if line.trim() != "BEGIN:VCALENDAR" {
                return Err(InputError::new(
                    Location::file(path).line(i + 1),
                    "an iCalendar file starts with `BEGIN:VCALENDAR`",
                ));
            }
            saw_begin = true;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::Schedule;
    use crate::timespec::rfc3339;

    fn until() -> DateTime<Utc> {
        crate::timespec::parse_timestamp("2028-01-01").unwrap()
    }

    fn cal(events: &str) -> String {
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{events}END:VCALENDAR\r\n")
    }

    #[test]
    fn an_event_is_a_campaign() {
        let text = cal(
            "BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:finetune\r\nDTSTART:20270301T090000Z\r\nDTEND:20270303T090000Z\r\n\
DESCRIPTION:accelerator: h100\\ngpus: 16\\ninterruptible: yes\\nregions: us-east-1\\, us-east-2\r\nEND:VEVENT\r\n",
        );
        let c = parse(&text, Path::new("c.ics"), until()).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "finetune");
        assert_eq!(c[0].gpus, 16);
        assert!(c[0].interruptible);
        assert_eq!(c[0].regions, ["us-east-1", "us-east-2"]);
        assert_eq!(rfc3339(c[0].schedule.end()), "2027-03-03T09:00:00Z");
        assert_eq!(c[0].source.line, Some(4));
    }

    #[test]
    fn x_properties_win_and_durations_work() {
        let text = cal(
            "BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:eval\r\nDTSTART:20270301T000000Z\r\nDURATION:P1DT12H\r\n\
DESCRIPTION:gpus: 4\r\nX-GPUCAP-GPUS:8\r\nX-GPUCAP-ACCELERATOR:NVIDIA A100 80GB\r\nEND:VEVENT\r\n",
        );
        let c = parse(&text, Path::new("c.ics"), until()).unwrap();
        assert_eq!(c[0].gpus, 8);
        assert_eq!(c[0].accelerator.name(), "a100-80gb");
        assert_eq!(
            c[0].schedule.end() - c[0].schedule.start(),
            Duration::hours(36)
        );
    }

    #[test]
    fn a_rule_with_count_zero_is_an_error_not_a_vanished_event() {
        let text = cal(
            "BEGIN:VEVENT\r\nUID:w\r\nSUMMARY:weekly-eval\r\nDTSTART:20270322T090000Z\r\n\
DTEND:20270322T170000Z\r\nRRULE:FREQ=WEEKLY;COUNT=0\r\n\
X-GPUCAP-ACCELERATOR:l4\r\nX-GPUCAP-GPUS:2\r\nEND:VEVENT\r\n",
        );
        let err = parse(&text, Path::new("c.ics"), until()).unwrap_err();
        assert!(err.message.contains("COUNT=0"), "{err}");
        assert_eq!(
            err.location.field.as_deref(),
            Some("events[0].RRULE"),
            "{err}"
        );
    }

    #[test]
    fn weekly_events_keep_local_time_across_dst() {
        // Berlin switches to summer time on 2027-03-28: 09:00 local is 08:00Z before, 07:00Z after.
        let text = cal(
            "BEGIN:VEVENT\r\nUID:w\r\nSUMMARY:weekly-eval\r\nDTSTART;TZID=Europe/Berlin:20270322T090000\r\n\
DTEND;TZID=Europe/Berlin:20270322T170000\r\nRRULE:FREQ=WEEKLY;COUNT=3\r\nEXDATE;TZID=Europe/Berlin:20270405T090000\r\n\
X-GPUCAP-ACCELERATOR:l4\r\nX-GPUCAP-GPUS:2\r\nEND:VEVENT\r\n",
        );
        let c = parse(&text, Path::new("c.ics"), until()).unwrap();
        let starts: Vec<String> = c.iter().map(|c| rfc3339(c.schedule.start())).collect();
        assert_eq!(starts, ["2027-03-22T08:00:00Z", "2027-03-29T07:00:00Z"]);
        assert_eq!(c[1].name, "weekly-eval@2027-03-29");
        assert!(
            c.iter()
                .all(|c| c.schedule.end() - c.schedule.start() == Duration::hours(8))
        );
    }

    #[test]
    fn unbounded_rules_stop_at_the_horizon_and_overrides_replace_occurrences() {
        let text = cal(
            "BEGIN:VEVENT\r\nUID:d\r\nSUMMARY:nightly\r\nDTSTART:20271229T000000Z\r\nDURATION:PT6H\r\n\
RRULE:FREQ=DAILY\r\nX-GPUCAP-ACCELERATOR:h100\r\nX-GPUCAP-GPUS:8\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:d\r\nRECURRENCE-ID:20271230T000000Z\r\nSUMMARY:nightly-big\r\nDTSTART:20271230T000000Z\r\n\
DURATION:PT6H\r\nX-GPUCAP-ACCELERATOR:h100\r\nX-GPUCAP-GPUS:64\r\nEND:VEVENT\r\n",
        );
        let c = parse(&text, Path::new("c.ics"), until()).unwrap();
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["nightly@2027-12-29", "nightly@2027-12-31", "nightly-big"]
        );
    }

    #[test]
    fn all_day_events_and_work_campaigns() {
        let text = cal(
            "BEGIN:VEVENT\r\nUID:a\r\nSUMMARY:sweep\r\nDTSTART;VALUE=DATE:20270301\r\nDTEND;VALUE=DATE:20270311\r\n\
DESCRIPTION:accelerator: l40s\\ngpu_hours: 480\r\nEND:VEVENT\r\n",
        );
        let c = parse(&text, Path::new("c.ics"), until()).unwrap();
        assert!(matches!(c[0].schedule, Schedule::Work { .. }));
        assert_eq!(c[0].gpus, 2);
    }

    #[test]
    fn bad_events_are_located() {
        let e = parse(&cal("BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:x\r\nDTSTART:20270301T000000Z\r\nDTEND:20270302T000000Z\r\n\
X-GPUCAP-ACCELERATOR:h10\r\nX-GPUCAP-GPUS:8\r\nEND:VEVENT\r\n"), Path::new("c.ics"), until())
        .unwrap_err();
        assert_eq!(e.location.line, Some(4), "{e}");
        assert!(e.message.contains("did you mean `h100`"), "{e}");

        let e = parse(
            &cal("BEGIN:VEVENT\r\nthis is not ical\r\nEND:VEVENT\r\n"),
            Path::new("c.ics"),
            until(),
        )
        .unwrap_err();
        assert_eq!(e.location.line, Some(5), "{e}");

        let e = parse(&cal("BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:x\r\nDTSTART;TZID=Mars/Olympus:20270301T000000\r\n\
DURATION:PT1H\r\nX-GPUCAP-ACCELERATOR:h100\r\nX-GPUCAP-GPUS:8\r\nEND:VEVENT\r\n"), Path::new("c.ics"), until())
        .unwrap_err();
        assert!(e.message.contains("Mars/Olympus"), "{e}");

        let e = parse(&cal("BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:x\r\nDTSTART:20270301T000000Z\r\nDURATION:PT1H\r\n\
DESCRIPTION:acclerator: h100\\ngpus: 8\r\nEND:VEVENT\r\n"), Path::new("c.ics"), until())
        .unwrap_err();
        assert_eq!(
            e.hint.as_deref(),
            Some("did you mean `accelerator`?"),
            "{e}"
        );
    }

    #[test]
    fn iso_durations() {
        assert_eq!(parse_duration("P2W"), Some(Duration::days(14)));
        assert_eq!(parse_duration("P999999999999D"), None);
        assert_eq!(parse_duration("P99999999999999999W"), None);
        assert_eq!(parse_duration("PT9223372036854775807S"), None);
        assert_eq!(parse_duration("PT8H30M"), Some(Duration::minutes(510)));
        assert_eq!(parse_duration("P1DT12H"), Some(Duration::hours(36)));
        for bad in ["P", "PT", "1D", "P1X", "PT5"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
