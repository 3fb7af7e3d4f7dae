//! `journal.jsonl`: the write-ahead log of every mutating cloud call, so that `apply` never
//! buys anything twice. Before a call is sent its `intent` (and then `sent`) record is on disk
//! and fsync'd; after it, `done`, `failed` or `unknown`. After a crash, every intent whose last
//! step is `intent`, `sent` or `unknown` may or may not have happened in the cloud: it must be
//! reconciled (found by its tags, or proven absent, then recorded as `reconciled`) before
//! anything else is sent. See [`unresolved`].
//!
//! One JSON object per line. A crash while appending can leave a torn last line: reading skips
//! it with a warning (the append that wrote it never returned, so nothing acted on it), and the
//! next append cuts it off. A bad line anywhere else means the file was damaged or edited; that
//! is an error naming the file and line, because guessing would risk a second purchase.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use gpucap_provider::capacity::{ActError, ActErrorKind, Idempotency};
use serde::{Deserialize, Serialize};

use super::error::StateError;
use super::{fsio, redact};

/// The step of an intent a record reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// About to send; nothing sent yet.
    Intent,
    /// Being sent now; the cloud may act on it from here on.
    Sent,
    /// The cloud acted; `resource_id` says on what.
    Done,
    /// The cloud refused; `error` says why. Nothing happened.
    Failed,
    /// Nobody knows whether the cloud acted (timeout, reset, 5xx after sending).
    Unknown,
    /// The cloud took the call and carries it out as a long-running operation, named in
    /// `request_id` (GCP: `zones/{zone}/operations/{name}`); the call waits for it. A run
    /// killed here settles the call by waiting on that operation first.
    Operation,
    /// Settled after the fact by looking in the cloud: `resource_id` is set when it was found,
    /// absent when the call is proven not to have happened.
    Reconciled,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Intent => "intent",
            Step::Sent => "sent",
            Step::Done => "done",
            Step::Failed => "failed",
            Step::Unknown => "unknown",
            Step::Reconciled => "reconciled",
            Step::Operation => "operation",
        }
    }

    /// Whether an intent whose last step is this one must be reconciled before anything else.
    pub fn is_unresolved(self) -> bool {
        matches!(
            self,
            Step::Intent | Step::Sent | Step::Unknown | Step::Operation
        )
    }
}

/// The idempotency data of a call as journaled: the client token (where the API takes one)
/// and the tags put on what it creates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedIdempotency {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_token: Option<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

impl From<&Idempotency> for RecordedIdempotency {
    fn from(id: &Idempotency) -> Self {
        RecordedIdempotency {
            client_token: id.client_token.clone(),
            tags: id.tags(),
        }
    }
}

/// A failure as journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedError {
    pub kind: ActErrorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub message: String,
}

impl From<&ActError> for RecordedError {
    fn from(e: &ActError) -> Self {
        RecordedError {
            kind: e.kind,
            code: e.code.clone(),
            message: e.message.clone(),
        }
    }
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalRecord {
    /// Position in the journal, from 1; assigned by the journal on append.
    pub seq: u64,
    pub at: DateTime<Utc>,
    /// The apply run (a UUID per `gpucap apply`).
    pub run: String,
    /// The plan's fingerprint digest.
    pub plan: String,
    /// The plan action this call belongs to.
    pub action: String,
    /// The intent id: one per attempt of one call; every step of it repeats it.
    pub intent: String,
    pub step: Step,
    /// The cloud API, e.g. `ec2:PurchaseCapacityBlock`.
    pub api: String,
    pub idempotency: RecordedIdempotency,
    /// The call's parameters (scrubbed of anything credential-like before writing).
    #[serde(default)]
    pub request: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl JournalRecord {
    /// The first record of a new intent (step `intent`, `seq` 0 until appended).
    pub fn intent(
        run: &str,
        id: &Idempotency,
        api: &str,
        request: serde_json::Value,
    ) -> JournalRecord {
        JournalRecord {
            seq: 0,
            at: Utc::now(),
            run: run.to_string(),
            plan: id.plan.clone(),
            action: id.action.clone(),
            intent: id.intent.clone(),
            step: Step::Intent,
            api: api.to_string(),
            idempotency: id.into(),
            request,
            resource_id: None,
            error: None,
            request_id: None,
        }
    }

    /// The next record of the same intent, at `step`, now; outcome fields cleared.
    pub fn next(&self, step: Step) -> JournalRecord {
        JournalRecord {
            seq: 0,
            at: Utc::now(),
            step,
            resource_id: None,
            error: None,
            request_id: None,
            ..self.clone()
        }
    }

    /// `done` with the resource the cloud reports.
    pub fn done(&self, resource_id: &str, request_id: Option<&str>) -> JournalRecord {
        let mut r = self.next(Step::Done);
        r.resource_id = Some(resource_id.to_string());
        r.request_id = request_id.map(str::to_string);
        r
    }

    /// `failed` or `unknown` (for [`ActErrorKind::Unknown`]) from a classified error.
    pub fn errored(&self, e: &ActError) -> JournalRecord {
        let step = if e.kind == ActErrorKind::Unknown {
            Step::Unknown
        } else {
            Step::Failed
        };
        let mut r = self.next(step);
        r.error = Some(e.into());
        r.request_id = e.request_id.clone();
        r
    }
}

/// A torn last line that reading skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornLine {
    pub line: usize,
    pub bytes: usize,
}

/// The journal as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JournalRead {
    pub records: Vec<JournalRecord>,
    /// The skipped torn tail, if any (also logged as a warning).
    pub torn: Option<TornLine>,
    /// Bytes of the file up to the end of the last good record (where appends continue).
    pub(crate) valid_len: u64,
    /// The last good record has no newline yet.
    pub(crate) needs_newline: bool,
}

impl JournalRead {
    /// The seq the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.records.last().map_or(1, |r| r.seq + 1)
    }
}

/// Reads the journal at `path` (an absent file is an empty journal).
pub fn read(path: &Path) -> Result<JournalRead, StateError> {
    match fsio::read_optional(path)? {
        None => Ok(JournalRead::default()),
        Some(bytes) => parse(&bytes, path),
    }
}

/// [`read`] on bytes already in memory; `path` names them in errors.
pub fn parse(bytes: &[u8], path: &Path) -> Result<JournalRead, StateError> {
    let mut out = JournalRead::default();
    // Split into lines, remembering where each ends, so a torn tail can be cut off exactly.
    let mut lines: Vec<(usize, &[u8], usize)> = Vec::new(); // (line number, content, end offset)
    let mut start = 0;
    let mut number = 0;
    while start < bytes.len() {
        number += 1;
        let (content, end) = match bytes[start..].iter().position(|b| *b == b'\n') {
            Some(n) => (&bytes[start..start + n], start + n + 1),
            None => (&bytes[start..], bytes.len()),
        };
        lines.push((number, content, end));
        start = end;
    }
    let last_nonblank = lines
        .iter()
        .rposition(|(_, c, _)| !is_blank(c))
        .unwrap_or(0);
    for (i, (line, content, end)) in lines.iter().enumerate() {
        if is_blank(content) {
            if i < last_nonblank {
                return Err(StateError::corrupt(
                    path,
                    Some(*line),
                    "empty line in the journal",
                ));
            }
            continue;
        }
        let parsed = std::str::from_utf8(content)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<JournalRecord>(t).map_err(|e| e.to_string()));
        match parsed {
            Ok(record) => {
                if let Some(prev) = out.records.last()
                    && record.seq <= prev.seq
                {
                    return Err(StateError::corrupt(
                        path,
                        Some(*line),
                        format!(
                            "journal seq {} after seq {}: records out of order",
                            record.seq, prev.seq
                        ),
                    ));
                }
                out.records.push(record);
                out.valid_len = *end as u64;
                out.needs_newline = !bytes[..*end].ends_with(b"\n");
            }
            Err(message) if i == last_nonblank => {
                tracing::warn!(
                    "{}:{line}: ignoring a torn last journal line ({} bytes; a write was interrupted): {message}",
                    path.display(),
                    content.len()
                );
                out.torn = Some(TornLine {
                    line: *line,
                    bytes: bytes.len() - out.valid_len as usize,
                });
            }
            Err(message) => {
                return Err(StateError::corrupt(
                    path,
                    Some(*line),
                    format!("corrupt journal record: {message}"),
                ));
            }
        }
    }
    Ok(out)
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace() || *b == 0)
}

/// The latest record of every intent, in the order the intents first appeared.
pub fn fold(records: &[JournalRecord]) -> Vec<&JournalRecord> {
    let mut order: Vec<&str> = Vec::new();
    let mut last: HashMap<&str, &JournalRecord> = HashMap::new();
    for r in records {
        if last.insert(r.intent.as_str(), r).is_none() {
            order.push(r.intent.as_str());
        }
    }
    order.iter().filter_map(|i| last.get(i).copied()).collect()
}

/// The latest record of every intent that must be reconciled before anything else is sent:
/// its last step is `intent`, `sent`, `unknown` or `operation`.
pub fn unresolved(records: &[JournalRecord]) -> Vec<&JournalRecord> {
    fold(records)
        .into_iter()
        .filter(|r| r.step.is_unresolved())
        .collect()
}

/// An open journal for appending. Open it only while holding the state lock.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    next_seq: u64,
    history: Vec<JournalRecord>,
}

impl Journal {
    /// Reads the journal, cuts off a torn tail (so the next line does not glue onto it), and
    /// gets ready to append.
    pub fn open(path: &Path) -> Result<Journal, StateError> {
        let read = read(path)?;
        if read.torn.is_some() {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(StateError::io("open", path))?;
            f.set_len(read.valid_len)
                .map_err(StateError::io("cut the torn tail of", path))?;
            f.sync_all().map_err(StateError::io("fsync", path))?;
        }
        if read.needs_newline {
            fsio::append_durable(path, b"\n")?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            next_seq: read.next_seq(),
            history: read.records,
        })
    }

    /// The records that were in the journal when it was opened.
    pub fn history(&self) -> &[JournalRecord] {
        &self.history
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` with the next seq, scrubbed of credentials, and fsyncs before
    /// returning: once this returns `Ok`, the record survives a crash. Returns the record
    /// with its seq (as given otherwise; the file holds the scrubbed form).
    pub fn append(&mut self, mut record: JournalRecord) -> Result<JournalRecord, StateError> {
        record.seq = self.next_seq;
        let line = encode_line(&record, "the journal")?;
        fsio::append_durable(&self.path, &line)?;
        self.next_seq += 1;
        Ok(record)
    }
}

/// `record` as one scrubbed JSON line, or an error if scrubbing left a credential.
pub(crate) fn encode_line<T: Serialize>(
    record: &T,
    what: &'static str,
) -> Result<Vec<u8>, StateError> {
    let mut value =
        serde_json::to_value(record).map_err(|source| StateError::Encode { what, source })?;
    redact::scrub(&mut value);
    let left = redact::credential_paths(&value);
    if !left.is_empty() {
        return Err(StateError::Credential { what, paths: left });
    }
    let mut line =
        serde_json::to_vec(&value).map_err(|source| StateError::Encode { what, source })?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idem(intent: &str) -> Idempotency {
        Idempotency {
            plan: "sha256:abcd".into(),
            action: "a1".into(),
            intent: intent.into(),
            client_token: Some("gpucap-abcd-a1-0".into()),
        }
    }

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn appends_get_increasing_seqs_and_read_back() {
        let d = dir();
        let path = d.path().join("journal.jsonl");
        let mut j = Journal::open(&path).unwrap();
        let i = j
            .append(JournalRecord::intent(
                "run-1",
                &idem("i-1"),
                "ec2:CreateCapacityReservation",
                serde_json::json!({"InstanceCount": 2}),
            ))
            .unwrap();
        assert_eq!(i.seq, 1);
        let s = j.append(i.next(Step::Sent)).unwrap();
        let d1 = j.append(s.done("cr-1", Some("req-9"))).unwrap();
        assert_eq!(d1.seq, 3);
        let read = read(&path).unwrap();
        assert_eq!(read.records.len(), 3);
        assert_eq!(read.records[2].resource_id.as_deref(), Some("cr-1"));
        assert_eq!(read.records[0].idempotency.tags["gpucap:intent"], "i-1");
        assert!(read.torn.is_none());
        // Reopening continues the numbering.
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.history().len(), 3);
        let again = j
            .append(JournalRecord::intent(
                "run-2",
                &idem("i-2"),
                "x",
                serde_json::Value::Null,
            ))
            .unwrap();
        assert_eq!(again.seq, 4);
    }

    #[test]
    fn torn_last_line_is_ignored_and_cut_off_on_the_next_append() {
        let d = dir();
        let path = d.path().join("journal.jsonl");
        let mut j = Journal::open(&path).unwrap();
        let i = j
            .append(JournalRecord::intent(
                "r",
                &idem("i-1"),
                "x",
                serde_json::Value::Null,
            ))
            .unwrap();
        drop(j);
        // A crash in the middle of writing the `sent` record.
        let full = String::from_utf8(encode_line(&i.next(Step::Sent), "t").unwrap()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&full.as_bytes()[..full.len() / 2]);
        std::fs::write(&path, &bytes).unwrap();

        let read = read(&path).unwrap();
        assert_eq!(read.records.len(), 1);
        assert_eq!(read.torn.as_ref().unwrap().line, 2);
        assert_eq!(unresolved(&read.records).len(), 1);

        let mut j = Journal::open(&path).unwrap();
        let s = j.append(i.next(Step::Sent)).unwrap();
        assert_eq!(s.seq, 2);
        let read = super::read(&path).unwrap();
        assert!(read.torn.is_none());
        assert_eq!(read.records.len(), 2);
    }

    #[test]
    fn a_complete_last_line_without_newline_is_kept() {
        let d = dir();
        let path = d.path().join("journal.jsonl");
        let line = encode_line(
            &JournalRecord {
                seq: 1,
                ..JournalRecord::intent("r", &idem("i-1"), "x", serde_json::Value::Null)
            },
            "t",
        )
        .unwrap();
        std::fs::write(&path, &line[..line.len() - 1]).unwrap();
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.history().len(), 1);
        j.append(j.history()[0].next(Step::Sent)).unwrap();
        assert_eq!(read(&path).unwrap().records.len(), 2);
    }

    #[test]
    fn a_corrupt_line_in_the_middle_is_an_error_naming_file_and_line() {
        let d = dir();
        let path = d.path().join("journal.jsonl");
        let mut j = Journal::open(&path).unwrap();
        let i = j
            .append(JournalRecord::intent(
                "r",
                &idem("i-1"),
                "x",
                serde_json::Value::Null,
            ))
            .unwrap();
        j.append(i.next(Step::Sent)).unwrap();
        j.append(i.done("cr-1", None)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[1] = "{\"seq\": 2, \"garbage";
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let err = read(&path).unwrap_err();
        match &err {
            StateError::Corrupt { path: p, line, .. } => {
                assert_eq!(p, &path);
                assert_eq!(*line, Some(2));
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("journal.jsonl:2:"), "{err}");
        assert!(Journal::open(&path).is_err());
    }

    #[test]
    fn out_of_order_seqs_are_corruption() {
        let d = dir();
        let path = d.path().join("journal.jsonl");
        let r = |seq| {
            encode_line(
                &JournalRecord {
                    seq,
                    ..JournalRecord::intent("r", &idem("i-1"), "x", serde_json::Value::Null)
                },
                "t",
            )
            .unwrap()
        };
        std::fs::write(&path, [r(1), r(1), r(3)].concat()).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains(":2:") && err.contains("out of order"), "{err}");
    }

    #[test]
    fn fold_keeps_the_last_step_and_lists_the_unresolved() {
        let mk = |seq, intent: &str, step| JournalRecord {
            seq,
            step,
            ..JournalRecord::intent("r", &idem(intent), "x", serde_json::Value::Null)
        };
        let records = vec![
            mk(1, "done", Step::Intent),
            mk(2, "done", Step::Sent),
            mk(3, "done", Step::Done),
            mk(4, "sent", Step::Intent),
            mk(5, "sent", Step::Sent),
            mk(6, "unknown", Step::Intent),
            mk(7, "failed", Step::Intent),
            mk(8, "unknown", Step::Sent),
            mk(9, "unknown", Step::Unknown),
            mk(10, "failed", Step::Failed),
            mk(11, "fixed", Step::Unknown),
            mk(12, "fixed", Step::Reconciled),
            mk(13, "new", Step::Intent),
        ];
        let latest: Vec<(&str, Step)> = fold(&records)
            .iter()
            .map(|r| (r.intent.as_str(), r.step))
            .collect();
        assert_eq!(
            latest,
            vec![
                ("done", Step::Done),
                ("sent", Step::Sent),
                ("unknown", Step::Unknown),
                ("failed", Step::Failed),
                ("fixed", Step::Reconciled),
                ("new", Step::Intent),
            ]
        );
        let open: Vec<&str> = unresolved(&records)
            .iter()
            .map(|r| r.intent.as_str())
            .collect();
        assert_eq!(open, vec!["sent", "unknown", "new"]);
    }

    #[test]
    fn credentials_in_requests_and_errors_never_reach_the_file() {
        let d = dir();
        let path = d.path().join("journal.jsonl");
        let mut j = Journal::open(&path).unwrap();
        let i = j
            .append(JournalRecord::intent(
                "r",
                &idem("i-1"),
                "ec2:CreateCapacityReservation",
                serde_json::json!({"InstanceCount": 2, "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG"}),
            ))
            .unwrap();
        // The in-memory record is untouched; the file is scrubbed.
        assert_eq!(i.request["SecretAccessKey"], "wJalrXUtnFEMI/K7MDENG");
        let e = ActError {
            api: "x".into(),
            kind: ActErrorKind::Auth,
            code: Some("AuthFailure".into()),
            message: "key AKIAIOSFODNN7EXAMPLE is not valid".into(),
            request_id: None,
        };
        j.append(i.errored(&e)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("wJalr") && !text.contains("AKIAIOSFODNN7"),
            "{text}"
        );
        assert!(
            text.contains("gpucap-abcd-a1-0"),
            "client token kept: {text}"
        );
        let read = read(&path).unwrap();
        assert_eq!(read.records[1].step, Step::Failed);
        assert_eq!(
            read.records[1].error.as_ref().unwrap().message,
            "key [redacted] is not valid"
        );
    }
}
