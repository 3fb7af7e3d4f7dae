//! `audit.jsonl`: who spent what, when, on which plan: one line per journal transition (and per
//! operator event such as a force-unlock), never rewritten. The journal is the machine's
//! record for recovery and may be compacted one day; the audit log is the people's record for
//! finance and incident review and is only ever appended to. Like the journal it is scrubbed of
//! anything credential-like before writing ([`super::redact`]).

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::StateError;
use super::fsio;
use super::holder::LockInfo;
use super::journal::{JournalRecord, encode_line};

/// One audit line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    pub at: DateTime<Utc>,
    /// As in the lock: the CI actor or the user.
    pub who: String,
    /// The apply run id.
    pub run: String,
    pub plan_fingerprint: String,
    pub action: String,
    pub api: String,
    pub request_id: Option<String>,
    /// The journal step (`intent`, `sent`, `done`, `failed`, `unknown`, `reconciled`) or an
    /// lock event (`force-unlock`, `lock-takeover`).
    pub outcome: String,
    /// USD committed by this step, where it commits any.
    pub cost: Option<f64>,
    /// Words for people: the error of a failed call, the reason of an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl AuditRecord {
    /// The audit line of a journal transition.
    pub fn of(record: &JournalRecord, who: &str, cost: Option<f64>) -> AuditRecord {
        AuditRecord {
            at: record.at,
            who: who.to_string(),
            run: record.run.clone(),
            plan_fingerprint: record.plan.clone(),
            action: record.action.clone(),
            api: record.api.clone(),
            request_id: record.request_id.clone(),
            outcome: record.step.as_str().to_string(),
            cost,
            detail: record.error.as_ref().map(|e| e.message.clone()),
        }
    }
}

impl AuditRecord {
    /// The audit line of the lock `id` (taken by this user) replacing `previous`, with the
    /// reason it could (`whose lease ran out at …`, `whose process is no longer running`).
    pub fn lock_takeover(id: &str, previous: &LockInfo, why: &str) -> AuditRecord {
        AuditRecord {
            at: Utc::now(),
            who: super::holder::who(),
            run: id.to_string(),
            plan_fingerprint: String::new(),
            action: "*".into(),
            api: "lock-takeover".into(),
            request_id: None,
            outcome: "lock-takeover".into(),
            cost: None,
            detail: Some(format!(
                "took over the lock {} of {} on {} (pid {}, {}) taken at {}, {why}",
                previous.id,
                previous.who,
                previous.host,
                previous.pid,
                previous.operation,
                previous.created_at.to_rfc3339(),
            )),
        }
    }
}

/// The append-only audit log at a path.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: std::path::PathBuf,
}

impl AuditLog {
    pub fn new(path: &Path) -> AuditLog {
        AuditLog {
            path: path.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record`, scrubbed, fsync'd before returning. A torn tail left by a crash (a
    /// last line without its newline, which no append reported as written) is cut off first,
    /// so the new line does not glue onto it.
    pub fn append(&self, record: &AuditRecord) -> Result<(), StateError> {
        let line = encode_line(record, "the audit log")?;
        fsio::cut_torn_tail(&self.path)?;
        fsio::append_durable(&self.path, &line)
    }

    /// Every record, oldest first. A last line without its newline is torn and skipped with
    /// a warning; any other bad line is an error naming it.
    pub fn read(&self) -> Result<Vec<AuditRecord>, StateError> {
        let Some(bytes) = fsio::read_optional(&self.path)? else {
            return Ok(Vec::new());
        };
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if i + 1 == lines.len() && !text.ends_with('\n') {
                tracing::warn!(
                    "{}:{}: ignoring a torn last audit line",
                    self.path.display(),
                    i + 1
                );
                break;
            }
            match serde_json::from_str(line) {
                Ok(r) => out.push(r),
                Err(e) => {
                    return Err(StateError::corrupt(
                        &self.path,
                        Some(i + 1),
                        format!("corrupt audit record: {e}"),
                    ));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: &str, request_id: Option<&str>) -> AuditRecord {
        AuditRecord {
            at: "2027-01-20T10:00:00Z".parse().unwrap(),
            who: "alice".into(),
            run: "run-1".into(),
            plan_fingerprint: "sha256:abcd".into(),
            action: "a1".into(),
            api: "ec2:PurchaseCapacityBlock".into(),
            request_id: request_id.map(str::to_string),
            outcome: outcome.into(),
            cost: Some(31_456.5),
            detail: None,
        }
    }

    #[test]
    fn appends_and_reads_back() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::new(&d.path().join("audit.jsonl"));
        assert!(log.read().unwrap().is_empty());
        log.append(&record("sent", None)).unwrap();
        log.append(&record("done", Some("req-1"))).unwrap();
        let back = log.read().unwrap();
        assert_eq!(
            back,
            vec![record("sent", None), record("done", Some("req-1"))]
        );
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn credentials_never_reach_the_audit_log() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::new(&d.path().join("audit.jsonl"));
        let mut r = record("failed", Some("req-1"));
        r.who = "AKIAIOSFODNN7EXAMPLE".into();
        r.api = "sts:GetSessionToken with Bearer abc.def.ghi".into();
        log.append(&r).unwrap();
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(!text.contains("AKIAIOSFODNN7"), "{text}");
        assert!(!text.contains("abc.def.ghi"), "{text}");
        let back = log.read().unwrap();
        assert_eq!(back[0].who, "[redacted]");
        assert_eq!(back[0].api, "sts:GetSessionToken with Bearer [redacted]");
        assert!(
            super::super::redact::credential_paths(&serde_json::from_str(text.trim()).unwrap())
                .is_empty()
        );
    }

    #[test]
    fn a_torn_tail_is_skipped_and_cut_before_the_next_append() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::new(&d.path().join("audit.jsonl"));
        log.append(&record("sent", None)).unwrap();
        let mut bytes = std::fs::read(log.path()).unwrap();
        bytes.extend_from_slice(b"{\"at\": \"2027-");
        std::fs::write(log.path(), &bytes).unwrap();
        assert_eq!(log.read().unwrap().len(), 1);
        log.append(&record("done", None)).unwrap();
        assert_eq!(log.read().unwrap().len(), 2);
    }

    #[test]
    fn a_corrupt_middle_line_names_the_line() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::new(&d.path().join("audit.jsonl"));
        log.append(&record("sent", None)).unwrap();
        let mut bytes = std::fs::read(log.path()).unwrap();
        bytes.extend_from_slice(b"{oops\n");
        std::fs::write(log.path(), &bytes).unwrap();
        log.append(&record("done", None)).unwrap();
        let err = log.read().unwrap_err().to_string();
        assert!(err.contains("audit.jsonl:2:"), "{err}");
    }
}
