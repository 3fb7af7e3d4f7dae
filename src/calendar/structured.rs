//! YAML and TOML calendars: a document with a list `campaigns`, one mapping per campaign.
//!
//! The parsers know where each value is, so syntax and type errors carry the parser's line and
//! column; rules that span fields (end before start) are located by [`super::locate_indexed_field`].

use std::path::Path;

use serde::Deserialize;

use super::{Campaign, RawCampaign, campaign_error, unknown_key_hint};
use crate::diagnostic::{InputError, Location};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalendarFile {
    /// `campaigns:` with nothing after it is YAML's null: most likely a list lost in an edit,
    /// so it is an error (`campaigns: []` says "none" on purpose).
    /// `None`: the key is missing; `Some(None)`: it is null.
    #[serde(default, deserialize_with = "present")]
    campaigns: Option<Option<Vec<RawCampaign>>>,
}

/// A key that is present, even as null.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

pub(super) fn parse_yaml(text: &str, path: &Path) -> Result<Vec<Campaign>, InputError> {
    crate::nesting::check(text, path, crate::nesting::Syntax::Yaml)?;
    refuse_tags(text, path)?;
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let file: CalendarFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let mut loc = Location::file(path);
        let field = e.path().to_string();
        // The YAML parser places errors in a campaign at the campaign's start; point at the
        // field's own line when the path names one.
        let field_line = field
            .strip_prefix("campaigns[")
            .and_then(|rest| rest.split_once("]."))
            .and_then(|(i, f)| Some((i.parse::<usize>().ok()?, f.split(['.', '[']).next()?)))
            .and_then(|(i, f)| super::locate_indexed_field(text, i, f));
        match (field_line, e.inner().location()) {
            (Some(line), _) => loc = loc.line(line),
            (None, Some(l)) => loc = loc.line(l.line()).column(l.column()),
            (None, None) => {}
        }
        let message = e.inner().to_string();
        let message = message.split(" at line ").next().unwrap_or(&message);
        let message = message
            .strip_prefix(&format!("{field}: "))
            .unwrap_or(message);
        let message = message
            .split_once(": ")
            .filter(|(p, _)| field.starts_with(p))
            .map_or(message, |(_, m)| m);
        serde_error(loc, &field, message.to_string())
    })?;
    validate(file, text, path)
}

pub(super) fn parse_toml(text: &str, path: &Path) -> Result<Vec<Campaign>, InputError> {
    crate::nesting::check(text, path, crate::nesting::Syntax::Toml)?;
    let to_error = |e: &toml::de::Error, field: String| {
        let mut loc = Location::file(path);
        if let Some(span) = e.span() {
            loc = loc.at_offset(text, span.start);
        }
        serde_error(loc, &field, e.message().trim().to_string())
    };
    let de = toml::de::Deserializer::parse(text).map_err(|e| to_error(&e, String::new()))?;
    let file: CalendarFile = serde_path_to_error::deserialize(de)
        .map_err(|e| to_error(e.inner(), e.path().to_string()))?;
    validate(file, text, path)
}

/// YAML tags (`!!python/object:…`, `!custom`) ask a loader to build something other than the
/// plain value; gpucap would read past them silently, so a calendar with one is refused.
fn refuse_tags(text: &str, path: &Path) -> Result<(), InputError> {
    fn first_tag(v: &serde_yaml_ng::Value) -> Option<String> {
        use serde_yaml_ng::Value;
        match v {
            Value::Tagged(t) => Some(t.tag.to_string()),
            Value::Sequence(items) => items.iter().find_map(first_tag),
            Value::Mapping(m) => m
                .iter()
                .find_map(|(k, v)| first_tag(k).or_else(|| first_tag(v))),
            _ => None,
        }
    }
    // `!!`-tags outside the core schema are dropped by the YAML reader, so they are found in
    // the text: `!!` starting a token (after `: `, `- `, `[`, `{`, `,` or indentation),
    // outside quotes and comments.
    let secondary = text.lines().find_map(|line| {
        let (mut single, mut double) = (false, false);
        let mut prev = ' ';
        let mut token_start = true;
        for (i, c) in line.char_indices() {
            match c {
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                '#' if !single && !double && prev.is_whitespace() => return None,
                '!' if !single && !double && token_start && line[i..].starts_with("!!") => {
                    let tag: String = line[i..]
                        .chars()
                        .take_while(|c| !c.is_whitespace())
                        .collect();
                    return Some(tag);
                }
                _ => {}
            }
            if !c.is_whitespace() {
                token_start = matches!(c, ':' | '-' | '[' | '{' | ',') && !single && !double;
            }
            prev = c;
        }
        None
    });
    // Syntax errors are reported by the typed parse, with their place.
    let tag = match secondary {
        Some(tag) => tag,
        None => {
            let Ok(value) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) else {
                return Ok(());
            };
            let Some(tag) = first_tag(&value) else {
                return Ok(());
            };
            tag
        }
    };
    let name = tag.trim_start_matches('!');
    let mut loc = Location::file(path);
    if let Some(line) = text.lines().position(|l| l.contains(&format!("!{name}"))) {
        loc = loc.line(line + 1);
    }
    Err(InputError::new(
        loc,
        format!("YAML tags are not allowed in a calendar; found `{tag}`"),
    )
    .with_hint("remove the tag: calendars hold plain strings, numbers and lists"))
}

/// An error from the deserializer, with the field path and, for unknown keys, a suggestion.
fn serde_error(mut loc: Location, field: &str, message: String) -> InputError {
    if !field.is_empty() && field != "." {
        loc = loc.field(field.to_string());
    }
    let hint = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
        .and_then(unknown_key_hint)
        .or_else(|| {
            message
                .starts_with("missing field `campaigns`")
                .then(|| "a calendar is a list under `campaigns:`".to_string())
        });
    let e = InputError::new(loc, message);
    match hint {
        Some(h) => e.with_hint(h),
        None => e,
    }
}

fn validate(file: CalendarFile, text: &str, path: &Path) -> Result<Vec<Campaign>, InputError> {
    let locator = super::Locator::new(text);
    let Some(campaigns) = file.campaigns else {
        return Err(
            InputError::new(Location::file(path), "missing field `campaigns`")
                .with_hint("a calendar is a list under `campaigns:`"),
        );
    };
    let Some(campaigns) = campaigns else {
        return Err(InputError::new(
            Location::file(path).field("campaigns"),
            "`campaigns` is empty (null)",
        )
        .with_hint("list the campaigns under it, or write `campaigns: []` for none"));
    };
    campaigns
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            let line = locator.line(i, "name");
            let mut source = Location::file(path);
            if let Some(line) = line {
                source = source.line(line);
            }
            raw.validate(source)
                .map_err(|e| campaign_error(text, path, i, e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::Schedule;

    const YAML: &str = "\
campaigns:
  - name: llm-pretrain-q1
    accelerator: NVIDIA H100 80GB HBM3
    gpus: 256
    start: 2027-02-01
    end: 2027-02-22
    interruptible: false
    priority: critical
    regions: [us-east-1, us-central1]
    buffer: 0.2
    team: research
  - name: sweep
    accelerator: a100-80gb
    gpu_hours: 2400
    window: {start: 2027-03-01, end: 2027-03-11}
    interruptible: true
";

    #[test]
    fn reads_fixed_and_work_campaigns() {
        let c = parse_yaml(YAML, Path::new("c.yaml")).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].accelerator.name(), "h100");
        assert_eq!(c[0].gpus, 256);
        assert_eq!(c[0].regions, ["us-east-1", "us-central1"]);
        assert_eq!(c[0].source.line, Some(2));
        // 2400 GPU-hours over 240 hours: 10 GPUs.
        assert_eq!(c[1].gpus, 10);
        assert!(matches!(c[1].schedule, Schedule::Work { gpu_hours, .. } if gpu_hours == 2400.0));
    }

    #[test]
    fn toml_calendars_read_the_same() {
        let toml = "[[campaigns]]\nname = \"a\"\naccelerator = \"h100\"\ngpus = 8\nstart = 2027-02-01\nduration = \"3d\"\n";
        let c = parse_toml(toml, Path::new("c.toml")).unwrap();
        assert_eq!(
            c[0].schedule.end() - c[0].schedule.start(),
            chrono::Duration::hours(72)
        );
    }

    fn err(yaml: &str) -> InputError {
        parse_yaml(yaml, Path::new("c.yaml")).unwrap_err()
    }

    #[test]
    fn errors_name_line_field_and_fix() {
        let e = err("campaigns:\n  - name: a\n    accelerator: h10\n    gpus: 8\n");
        assert_eq!(e.location.line, Some(3), "{e}");
        assert_eq!(
            e.location.field.as_deref(),
            Some("campaigns[0].accelerator")
        );
        assert!(e.message.contains("did you mean `h100`"), "{e}");

        let e = err(
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 0\n    start: 2027-01-01\n    duration: 1d\n",
        );
        assert_eq!(e.location.line, Some(4), "{e}");
        assert!(e.message.contains("positive"), "{e}");

        let e = err(
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-05\n    end: 2027-01-01\n",
        );
        assert_eq!(e.location.line, Some(6), "{e}");
        assert_eq!(e.location.field.as_deref(), Some("campaigns[0].end"));
        assert!(e.message.contains("ends"), "{e}");

        let e = err("campaigns:\n  - name: a\n    acelerator: h100\n");
        assert_eq!(
            e.hint.as_deref(),
            Some("did you mean `accelerator`?"),
            "{e}"
        );

        let e = err("campaigns:\n  - name: a\n    accelerator: [h100\n");
        assert!(e.location.line.is_some(), "syntax errors carry a line: {e}");

        let e = err(
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: -4\n    start: 2027-01-01\n    end: 2027-01-02\n",
        );
        assert!(e.message.contains("-4"), "{e}");
    }

    #[test]
    fn ten_thousand_campaigns_read_in_linear_time() {
        let mut yaml = String::from("campaigns:\n");
        for i in 0..10_000 {
            yaml.push_str(&format!(
                "  - name: c{i}\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-04\n    duration: 1d\n"
            ));
        }
        let c = parse_yaml(&yaml, Path::new("big.yaml")).unwrap();
        assert_eq!(c.len(), 10_000);
        assert_eq!(c[9_999].source.line, Some(2 + 5 * 9_999));
        // Locating each campaign by rescanning the text took minutes (quadratic); the plan
        // benchmark's 10,000-campaign calendars measure the time, not this test.
    }

    #[test]
    fn yaml_tags_are_refused_with_their_line() {
        let e = err("campaigns:\n  - name: !!python/object:os.system x\n    accelerator: h100\n");
        assert_eq!(e.location.line, Some(2), "{e}");
        assert!(e.message.contains("tags are not allowed"), "{e}");
        let e = err("campaigns:\n  - name: x\n    gpus: !custom 5\n");
        assert_eq!(e.location.line, Some(3), "{e}");
    }

    #[test]
    fn a_null_campaign_list_is_an_error_and_an_empty_one_is_not() {
        let e = err("campaigns:\n");
        assert_eq!(e.location.field.as_deref(), Some("campaigns"), "{e}");
        assert!(e.message.contains("null"), "{e}");
        let e = err("other: 1\n");
        assert!(e.message.contains("campaigns"), "{e}");
        assert!(
            parse_yaml("campaigns: []\n", Path::new("c.yaml"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn timestamps_with_offsets_become_utc() {
        let c = parse_yaml(
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-01T09:00:00+09:00\n    duration: 2h\n",
            Path::new("c.yaml"),
        )
        .unwrap();
        assert_eq!(
            crate::timespec::rfc3339(c[0].schedule.start()),
            "2027-01-01T00:00:00Z"
        );
    }
}
