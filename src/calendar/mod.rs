//! Campaign calendars: the training runs teams plan, read from YAML, TOML or iCalendar files.
//!
//! Every format is read into the same [`RawCampaign`] (the fields a person writes), then
//! checked once by [`RawCampaign::validate`], so the rules and their messages do not depend on
//! the format. Loading a set of files also checks what no single file can: unique names.

mod ics;
mod structured;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Accelerator;
use crate::diagnostic::{InputError, Location, did_you_mean};
use crate::limits::MAX_GPUS;
use crate::timespec::{Span, Timestamp};
use gpucap_provider::Cloud;

/// How much a campaign matters when capacity or budget is short.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Critical,
    High,
    #[default]
    Normal,
    Low,
}

/// Whether a campaign that runs whole may move between places (`migration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Migration {
    /// It stays in one cloud, region and instance type from its start to its end (a gang,
    /// where `[planning] placement = "gangs"`).
    #[default]
    None,
    /// It may move between regions and instance types, checkpointing and restarting where
    /// the plan says: planned as fluid work.
    Allowed,
}

/// The most GPUs one node of any cloud holds (`gpus_per_node`): 8 for H100 and A100 today, 16
/// for some older instance types (AWS p3dn, p2.16xlarge). A larger number is a typo.
pub const MAX_GPUS_PER_NODE: u32 = 16;

/// When a campaign runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// `gpus` GPUs from `start` to `end`.
    Fixed {
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    },
    /// `gpu_hours` of work anywhere inside `[start, end)`. gpucap spreads it evenly over the
    /// window (the flattest profile, which needs the least capacity at any one time).
    Work {
        gpu_hours: f64,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    },
}

impl Schedule {
    pub fn start(&self) -> DateTime<Utc> {
        match *self {
            Schedule::Fixed { start, .. } | Schedule::Work { start, .. } => start,
        }
    }

    pub fn end(&self) -> DateTime<Utc> {
        match *self {
            Schedule::Fixed { end, .. } | Schedule::Work { end, .. } => end,
        }
    }
}

/// A validated campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    pub name: String,
    pub accelerator: Accelerator,
    /// GPUs while it runs. For work campaigns: the even spread over the window, rounded up.
    pub gpus: u32,
    pub schedule: Schedule,
    /// Checkpointed work that may run on spot (flex demand).
    pub interruptible: bool,
    pub priority: Priority,
    /// Allowed clouds; empty means any.
    pub clouds: Vec<Cloud>,
    /// Allowed regions; empty means any.
    pub regions: Vec<String>,
    /// Fraction added for failed runs and experiments; `None` takes the config's default.
    pub buffer: Option<f64>,
    pub team: Option<String>,
    /// GPUs per node when it runs whole; `None`: the pool's largest node.
    pub gpus_per_node: Option<u32>,
    /// Whether it may move between places while it runs.
    pub migration: Migration,
    /// Where it was written.
    pub source: Location,
}

/// The fields of a campaign as a person writes them, before any checks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCampaign {
    pub name: String,
    pub accelerator: Accelerator,
    pub gpus: Option<i64>,
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    pub duration: Option<Span>,
    pub gpu_hours: Option<f64>,
    pub window: Option<Window>,
    #[serde(default)]
    pub interruptible: bool,
    #[serde(default)]
    pub priority: Priority,
    #[serde(default)]
    pub clouds: Vec<Cloud>,
    #[serde(default)]
    pub regions: Vec<String>,
    pub buffer: Option<f64>,
    pub team: Option<String>,
    pub gpus_per_node: Option<i64>,
    #[serde(default)]
    pub migration: Migration,
    /// Free text for people; ignored by gpucap.
    pub notes: Option<String>,
}

/// The window of a work-based campaign.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub start: Timestamp,
    pub end: Timestamp,
}

/// A check failed on one field of a campaign; turned into an [`InputError`] by the caller,
/// who knows the file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

fn field_error(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError {
        field,
        message: message.into(),
        hint: None,
    }
}

impl RawCampaign {
    /// A campaign with only its name and accelerator set (the rest as when omitted).
    pub fn new(name: impl Into<String>, accelerator: Accelerator) -> Self {
        RawCampaign {
            name: name.into(),
            accelerator,
            gpus: None,
            start: None,
            end: None,
            duration: None,
            gpu_hours: None,
            window: None,
            interruptible: false,
            priority: Priority::default(),
            clouds: Vec::new(),
            regions: Vec::new(),
            buffer: None,
            team: None,
            gpus_per_node: None,
            migration: Migration::None,
            notes: None,
        }
    }

    /// Applies every single-campaign rule.
    pub fn validate(self, source: Location) -> Result<Campaign, FieldError> {
        if self.name.trim().is_empty() {
            return Err(field_error("name", "a campaign needs a non-empty `name`"));
        }
        crate::text::check_name(&self.name).map_err(|m| field_error("name", m))?;
        if let Some(team) = &self.team {
            crate::text::check_name(team).map_err(|m| field_error("team", m))?;
        }
        let gpus = match self.gpus {
            Some(g) if g <= 0 => {
                return Err(field_error(
                    "gpus",
                    format!("GPUs must be a positive whole number, found {g}"),
                ));
            }
            Some(g) if g > i64::from(MAX_GPUS) => {
                return Err(field_error(
                    "gpus",
                    format!(
                        "{g} GPUs is more than any cloud sells (at most {MAX_GPUS}); check the number"
                    ),
                ));
            }
            other => other.map(|g| g as u32),
        };
        let schedule = self.schedule()?;
        let gpus = match (schedule, gpus) {
            (Schedule::Fixed { .. }, Some(g)) => g,
            (Schedule::Fixed { .. }, None) => {
                return Err(FieldError {
                    hint: Some(
                        "add `gpus: N`, or describe the work with `gpu_hours` and a `window`"
                            .into(),
                    ),
                    ..field_error("gpus", "missing `gpus`: how many GPUs the campaign runs on")
                });
            }
            (
                Schedule::Work {
                    gpu_hours,
                    start,
                    end,
                },
                cap,
            ) => {
                let hours = (end - start).num_seconds() as f64 / 3600.0;
                let spread = (gpu_hours / hours - 1e-9).ceil().max(1.0);
                if spread > f64::from(MAX_GPUS) {
                    return Err(FieldError {
                        hint: Some("check the number, or widen the `window`".into()),
                        ..field_error(
                            "gpu_hours",
                            format!(
                                "{gpu_hours} GPU-hours in a window of {hours} hours need {spread} GPUs at once, more than the {MAX_GPUS} gpucap takes"
                            ),
                        )
                    });
                }
                let spread = spread as u32;
                match cap {
                    Some(cap) if (cap as f64) * hours < gpu_hours => {
                        return Err(field_error(
                            "gpu_hours",
                            format!(
                                "{gpu_hours} GPU-hours do not fit in the window: {cap} GPUs for {hours} hours give only {}",
                                cap as f64 * hours
                            ),
                        ));
                    }
                    _ => spread,
                }
            }
        };
        if let Some(b) = self.buffer
            && !(b.is_finite() && (0.0..=10.0).contains(&b))
        {
            return Err(field_error(
                "buffer",
                format!("buffer is a fraction between 0 and 10 (0.2 = +20 %), found {b}"),
            ));
        }
        let gpus_per_node = match self.gpus_per_node {
            None => None,
            Some(_) if self.interruptible => {
                return Err(FieldError {
                    hint: Some(
                        "interruptible work runs on any instance size; remove `gpus_per_node`, or set `interruptible: false`".into(),
                    ),
                    ..field_error(
                        "gpus_per_node",
                        "`gpus_per_node` is for campaigns that run whole, and this one is interruptible",
                    )
                });
            }
            Some(n) if n < 1 || n > i64::from(MAX_GPUS_PER_NODE) => {
                return Err(field_error(
                    "gpus_per_node",
                    format!(
                        "GPUs per node is a whole number from 1 to {MAX_GPUS_PER_NODE} (8 for H100 and A100 nodes), found {n}"
                    ),
                ));
            }
            Some(n) => Some(n as u32),
        };
        for region in &self.regions {
            match Cloud::of_region(region) {
                None => {
                    return Err(FieldError {
                        hint: Some(
                            "use API region names like `us-east-1`, `us-central1` or `eastus`"
                                .into(),
                        ),
                        ..field_error(
                            "regions",
                            format!("`{region}` is not a region name of AWS, GCP or Azure"),
                        )
                    });
                }
                Some(c) if !self.clouds.is_empty() && !self.clouds.contains(&c) => {
                    return Err(field_error(
                        "regions",
                        format!(
                            "region `{region}` is in {c}, which is not in this campaign's `clouds`"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(Campaign {
            name: self.name.trim().to_string(),
            accelerator: self.accelerator,
            gpus,
            schedule,
            interruptible: self.interruptible,
            priority: self.priority,
            clouds: self.clouds,
            regions: self.regions,
            buffer: self.buffer,
            team: self.team,
            gpus_per_node,
            migration: self.migration,
            source,
        })
    }

    fn schedule(&self) -> Result<Schedule, FieldError> {
        if let Some(gpu_hours) = self.gpu_hours {
            let Some(window) = self.window else {
                return Err(field_error(
                    "window",
                    "a `gpu_hours` campaign needs a `window: {start, end}`",
                ));
            };
            if self.start.is_some() || self.end.is_some() || self.duration.is_some() {
                return Err(field_error(
                    "start",
                    "a `gpu_hours` campaign is placed by its `window`; remove `start`, `end` and `duration`",
                ));
            }
            if !(gpu_hours.is_finite() && gpu_hours > 0.0) {
                return Err(field_error(
                    "gpu_hours",
                    format!("GPU-hours must be positive, found {gpu_hours}"),
                ));
            }
            let (start, end) = (window.start.0, window.end.0);
            if end <= start {
                return Err(field_error(
                    "window",
                    format!("the window ends ({end}) before it starts ({start})"),
                ));
            }
            return Ok(Schedule::Work {
                gpu_hours,
                start,
                end,
            });
        }
        if self.window.is_some() {
            return Err(field_error(
                "window",
                "`window` goes with `gpu_hours`; use `start` and `end` otherwise",
            ));
        }
        let Some(start) = self.start else {
            return Err(field_error(
                "start",
                "missing `start` (a date like 2027-02-01 or an RFC 3339 timestamp)",
            ));
        };
        let end = match (self.end, self.duration) {
            (Some(_), Some(_)) => {
                return Err(field_error(
                    "duration",
                    "give `end` or `duration`, not both",
                ));
            }
            (Some(end), None) => end.0,
            (None, Some(d)) if d.as_hours() <= 0 => {
                return Err(field_error(
                    "duration",
                    format!("duration must be positive, found {d}"),
                ));
            }
            (None, Some(d)) => start.0 + d.as_duration(),
            (None, None) => return Err(field_error("end", "missing `end` or `duration`")),
        };
        if end <= start.0 {
            return Err(FieldError {
                hint: Some("check the dates, or give a `duration` like `21d` instead".into()),
                ..field_error(
                    "end",
                    format!("the campaign ends ({}) before it starts ({})", end, start.0),
                )
            });
        }
        Ok(Schedule::Fixed {
            start: start.0,
            end,
        })
    }
}

/// Reads one calendar file of any supported format. Recurring iCalendar events are expanded up
/// to `until`. The text it parsed comes back with the campaigns, so that a digest of the
/// calendar is of exactly what was used.
pub fn load_file(path: &Path, until: DateTime<Utc>) -> Result<(Vec<Campaign>, String), InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::in_file(path, format!("cannot read the calendar: {e}")))?;
    let campaigns = parse(&text, path, until)?;
    Ok((campaigns, text))
}

/// Parses calendar text; the format comes from the file extension.
pub fn parse(text: &str, path: &Path, until: DateTime<Utc>) -> Result<Vec<Campaign>, InputError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if text.trim().is_empty() {
        return Err(InputError::in_file(path, "the calendar is empty")
            .with_hint("a calendar holds a list `campaigns:` (YAML/TOML) or VEVENTs (.ics)"));
    }
    match ext.as_str() {
        "yaml" | "yml" => structured::parse_yaml(text, path),
        "toml" => structured::parse_toml(text, path),
        "ics" | "ical" | "ifb" => ics::parse(text, path, until),
        _ => Err(
            InputError::in_file(path, format!("unknown calendar format `.{ext}`"))
                .with_hint("calendars are `.yaml`, `.yml`, `.toml` or `.ics` files"),
        ),
    }
}

/// Loads every calendar, in order, and checks that campaign names are unique across them.
/// Also returns each file's text as parsed, in the order of `paths`.
pub fn load_all(
    paths: &[PathBuf],
    until: DateTime<Utc>,
) -> Result<(Vec<Campaign>, Vec<String>), InputError> {
    let mut all: Vec<Campaign> = Vec::new();
    let mut texts = Vec::with_capacity(paths.len());
    for path in paths {
        let (campaigns, text) = load_file(path, until)?;
        all.extend(campaigns);
        texts.push(text);
    }
    check_unique(&all)?;
    Ok((all, texts))
}

fn check_unique(campaigns: &[Campaign]) -> Result<(), InputError> {
    let mut seen: HashMap<&str, &Campaign> = HashMap::new();
    for c in campaigns {
        if let Some(first) = seen.insert(&c.name, c) {
            return Err(InputError::new(
                c.source.clone(),
                format!("duplicate campaign name `{}`", c.name),
            )
            .with_hint(format!(
                "it is also defined at {}; names must be unique across all calendars",
                first.source
            )));
        }
    }
    Ok(())
}

/// Builds the error for a [`FieldError`] in campaign `index` of a file, pointing at the line of
/// the field when it can be found in the text.
pub(crate) fn campaign_error(text: &str, path: &Path, index: usize, err: FieldError) -> InputError {
    let field_path = format!("campaigns[{index}].{}", err.field);
    let mut loc = Location::file(path).field(field_path);
    if let Some(line) = locate_indexed_field(text, index, err.field) {
        loc = loc.line(line);
    }
    let e = InputError::new(loc, err.message);
    match err.hint {
        Some(h) => e.with_hint(h),
        None => e,
    }
}

/// Line ranges `[begin, end)` (0-based) of the campaign entries of a YAML (`- ` items) or TOML
/// (`[[campaigns]]` tables) calendar, in order.
fn entries(lines: &[&str]) -> Vec<(usize, usize)> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let is_toml_header = |l: &str| l.trim_start().starts_with("[[");
    let item_indent = lines
        .iter()
        .find(|l| l.trim_start().starts_with("- "))
        .map(|l| indent(l));
    let begins: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            let l = lines[i];
            is_toml_header(l)
                || (l.trim_start().starts_with("- ") && Some(indent(l)) == item_indent)
        })
        .collect();
    begins
        .iter()
        .enumerate()
        .map(|(k, &b)| {
            let next = begins.get(k + 1).copied().unwrap_or(lines.len());
            // A YAML entry also ends where indentation falls back to or above its dash.
            let end = (b + 1..next)
                .find(|&i| {
                    let l = lines[i];
                    !is_toml_header(l)
                        && !l.trim().is_empty()
                        && !l.trim_start().starts_with('#')
                        && item_indent.is_some_and(|d| indent(l) <= d)
                        && !is_toml_header(lines[b])
                })
                .unwrap_or(next);
            (b, end)
        })
        .collect()
}

fn is_key(line: &str, key: &str) -> bool {
    let l = line.trim_start().trim_start_matches("- ").trim_start();
    l.strip_prefix(key)
        .is_some_and(|rest| rest.trim_start().starts_with([':', '=']))
}

/// 1-based line of `field` in an entry, or of the entry itself when the field is absent.
fn line_in_entry(lines: &[&str], (begin, end): (usize, usize), field: &str) -> usize {
    (begin..end)
        .find(|&i| is_key(lines[i], field))
        .unwrap_or(begin)
        + 1
}

/// The line of `field` in the `index`-th campaign entry.
pub(crate) fn locate_indexed_field(text: &str, index: usize, field: &str) -> Option<usize> {
    Locator::new(text).line(index, field)
}

/// The campaign entries of a calendar's text, found once: locating a field in each of 10,000
/// campaigns by scanning the whole text each time was quadratic (minutes).
pub(crate) struct Locator<'a> {
    lines: Vec<&'a str>,
    entries: Vec<(usize, usize)>,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let lines: Vec<&str> = text.lines().collect();
        let entries = entries(&lines);
        Locator { lines, entries }
    }

    /// The 1-based line of `field` in the `index`-th entry.
    pub(crate) fn line(&self, index: usize, field: &str) -> Option<usize> {
        self.entries
            .get(index)
            .map(|&entry| line_in_entry(&self.lines, entry, field))
    }
}

/// "did you mean" for unknown campaign keys.
pub(crate) fn unknown_key_hint(key: &str) -> Option<String> {
    const KEYS: &[&str] = &[
        "name",
        "accelerator",
        "gpus",
        "start",
        "end",
        "duration",
        "gpu_hours",
        "window",
        "interruptible",
        "priority",
        "clouds",
        "regions",
        "buffer",
        "team",
        "notes",
    ];
    did_you_mean(key, KEYS.iter().copied()).map(|k| format!("did you mean `{k}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_fields_inside_yaml_and_toml_entries() {
        let yaml = "campaigns:\n  - name: a\n    gpus: 1\n  - name: b\n    start: 2027-01-01\n    end: 2026-01-01\n";
        assert_eq!(locate_indexed_field(yaml, 1, "end"), Some(6));
        assert_eq!(locate_indexed_field(yaml, 1, "gpus"), Some(4));
        assert_eq!(locate_indexed_field(yaml, 0, "gpus"), Some(3));
        let toml =
            "[[campaigns]]\nname = \"a\"\ngpus = 0\n\n[[campaigns]]\nname = \"b\"\ngpus = 0\n";
        assert_eq!(locate_indexed_field(toml, 1, "gpus"), Some(7));
        assert_eq!(locate_indexed_field(toml, 2, "gpus"), None);
    }

    fn campaign(edit: impl FnOnce(&mut RawCampaign)) -> Result<Campaign, FieldError> {
        let mut raw = RawCampaign::new("train", Accelerator::parse("h100").expect("h100"));
        raw.gpus = Some(64);
        raw.start = Some(Timestamp(
            crate::timespec::parse_timestamp("2027-01-04").expect("a date"),
        ));
        raw.duration = Some(Span::parse("7d").expect("a span"));
        edit(&mut raw);
        raw.validate(Location::file("q1.yaml"))
    }

    #[test]
    fn gpus_per_node_is_a_node_size_for_work_that_runs_whole() {
        let c = campaign(|r| r.gpus_per_node = Some(4)).expect("valid");
        assert_eq!(c.gpus_per_node, Some(4));
        assert_eq!(c.migration, Migration::None);
        for bad in [0, -8, 17] {
            let e = campaign(|r| r.gpus_per_node = Some(bad)).expect_err("out of range");
            assert_eq!(e.field, "gpus_per_node");
            assert!(e.message.contains(&format!("found {bad}")), "{}", e.message);
        }
        let e = campaign(|r| {
            r.gpus_per_node = Some(8);
            r.interruptible = true;
        })
        .expect_err("interruptible work has no node size");
        assert_eq!(e.field, "gpus_per_node");
        assert!(e.hint.is_some_and(|h| h.contains("interruptible")));
        let c = campaign(|r| r.migration = Migration::Allowed).expect("valid");
        assert_eq!(c.migration, Migration::Allowed);
    }
}
