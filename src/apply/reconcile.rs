//! Settling what a crashed or cut-off run left behind, before anything new is sent.
//!
//! Every intent whose last journal step is `intent`, `sent`, `unknown` or `operation` is
//! settled: an `intent` never left (its `sent` would have been written first); a `sent` or
//! `unknown` one is looked up in the cloud by its `gpucap:intent` tag within a bounded wait,
//! and what is found goes into the state; an `operation` one is first waited on (the
//! long-running operation it names, through `Describe::wait_operation`), then looked up. Then every call the journal says is `done` but the state does
//! not show (a kill between the two writes) is added from the journal alone.

use gpucap_provider::Cloud;

use super::executor::{ApplyError, Executor, Request};
use crate::state::{ResourceStatus, Step, journal};

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Intents settled: (action, intent, found resource id).
    pub settled: Vec<(String, String, Option<String>)>,
    /// Resources the journal knew and the state did not.
    pub restored: Vec<String>,
}

impl Executor<'_> {
    /// Settles the journal with the cloud and the state. Call it before any work. Only the
    /// records after the journal's settled point are read ([`Executor::checkpoint`]).
    pub async fn recover(&mut self) -> Result<Recovered, ApplyError> {
        let history = self.backend.read_unsettled_journal().await?;
        if let Some(torn) = &history.torn {
            self.note(&format!(
                "journal: a torn last line ({} bytes at line {}) from a crash is ignored",
                torn.bytes, torn.line
            ));
        }
        let mut out = Recovered::default();
        let pending: Vec<_> = journal::unresolved(&history.records)
            .into_iter()
            .cloned()
            .collect();
        for record in pending {
            let request = Request::parse(&record).ok_or_else(|| ApplyError::Unreadable {
                seq: record.seq,
                intent: record.intent.clone(),
                api: record.api.clone(),
            })?;
            self.note(&format!(
                "settling {} of {} left {} by an earlier run (intent {})",
                record.api,
                record.action,
                record.step.as_str(),
                record.intent
            ));
            let found = self.settle(&record, &request).await?;
            self.note(&format!(
                "  {}",
                match &found {
                    Some(id) => format!("found {id}: it happened; recorded in the state"),
                    None if record.step == Step::Intent => "it was never sent".to_string(),
                    None => "not found: it did not happen".to_string(),
                }
            ));
            out.settled
                .push((record.action.clone(), record.intent.clone(), found));
        }
        // Done in the journal, missing from the state.
        let history = self.backend.read_unsettled_journal().await?;
        for record in journal::fold(&history.records) {
            let Some(id) = record.resource_id.as_deref() else {
                continue;
            };
            if !matches!(record.step, Step::Done | Step::Reconciled) {
                continue;
            }
            let Some(request) = Request::parse(record) else {
                continue;
            };
            let cloud: Cloud = match request.cloud.parse() {
                Ok(c) => c,
                Err(_) => continue,
            };
            if let Some(mut creates) = request.creates
                && self.state.get(cloud, id).is_none()
            {
                creates.id = id.to_string();
                self.record(creates);
                out.restored.push(id.to_string());
            }
            if let Some(released) = request.releases.as_deref()
                && record.step == Step::Done
                && self
                    .state
                    .get(cloud, released)
                    .is_some_and(|r| r.status != ResourceStatus::Released)
            {
                self.set_status(cloud, released, ResourceStatus::Released);
                out.restored.push(released.to_string());
            }
        }
        self.save().await?;
        Ok(out)
    }

    /// At the end of a run: when the state is written and no call is left unresolved, records
    /// the journal's last seq as settled, so the next run reads only what comes after it.
    pub async fn checkpoint(&self) -> Result<(), ApplyError> {
        let Some(guard) = self.guard else {
            return Ok(());
        };
        if self.has_unsaved_changes() {
            return Ok(());
        }
        let history = self.backend.read_unsettled_journal().await?;
        if !journal::unresolved(&history.records).is_empty() {
            return Ok(());
        }
        if let Some(last) = history.records.last() {
            self.backend.mark_settled(guard, last.seq).await?;
        }
        Ok(())
    }
}
