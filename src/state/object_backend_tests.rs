//! The object backend against the in-memory store (which keeps the same contract as S3 on
//! moto, see `gpucap_provider::objects::contract`). Several backends on one store stand for
//! several machines.

use std::sync::Arc;
use std::time::Duration;

use gpucap_provider::BoxFuture;
use gpucap_provider::capacity::Idempotency;
use gpucap_provider::objects::memory::{Fault, MemoryObjects, Op};
use gpucap_provider::objects::{Object, ObjectError, ObjectStore, PutCondition};

use super::*;
use crate::state::StateRef;
use crate::state::journal::{self, Step};
use crate::state::managed::tests::block;
use crate::state::test_runtime as rt;

const KEY: &str = "gpucap/prod/state.json";

fn fast() -> RetrySettings {
    RetrySettings {
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_times: 4,
    }
}

fn backend(store: &Arc<MemoryObjects>) -> ObjectBackend {
    ObjectBackend::new(store.clone(), KEY).with_retry(fast())
}

fn idem(intent: &str) -> Idempotency {
    Idempotency {
        plan: "sha256:ab".into(),
        action: "a1".into(),
        intent: intent.into(),
        client_token: Some("gpucap-ab-a1-0".into()),
    }
}

fn intent(run: &str, i: &str) -> JournalRecord {
    JournalRecord::intent(
        run,
        &idem(i),
        "ec2:PurchaseCapacityBlock",
        serde_json::json!({"InstanceCount": 2}),
    )
}

fn lock(b: &ObjectBackend) -> LockGuard {
    rt().block_on(b.lock(&LockOptions::new("apply"))).unwrap()
}

fn lock_leased(b: &ObjectBackend, lease: Duration) -> LockGuard {
    rt().block_on(b.lock(&LockOptions::new("apply").lease(lease)))
        .unwrap()
}

#[test]
fn state_journal_and_audit_live_under_the_key_and_read_back() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    assert_eq!(b.location(), "mem://bucket/gpucap/prod/state.json");
    assert!(rt.block_on(b.read_state()).unwrap().is_none());
    assert_eq!(rt.block_on(b.state_ref()).unwrap(), StateRef::NONE);

    let guard = lock(&b);
    assert_eq!(guard.location(), b.location());
    let on_store: LockInfo =
        serde_json::from_slice(&store.peek("gpucap/prod/state.json.lock").unwrap().bytes).unwrap();
    assert_eq!(&on_store, guard.info());
    assert_eq!(
        rt.block_on(b.read_lock()).unwrap().as_ref(),
        Some(guard.info())
    );

    // State: created once (If-None-Match), then replaced from the version written (If-Match).
    let mut state = State::new();
    rt.block_on(b.write_state(&guard, &mut state)).unwrap();
    state.upsert(block("cr-1", "a1"));
    rt.block_on(b.write_state(&guard, &mut state)).unwrap();
    assert_eq!(state.serial, 2);
    let puts = store.calls_to(Op::Put, KEY);
    let state_puts: Vec<&PutCondition> = puts
        .iter()
        .filter(|c| c.key == KEY)
        .map(|c| &c.condition)
        .collect();
    assert_eq!(state_puts.len(), 2);
    assert_eq!(state_puts[0], &PutCondition::IfNoneMatch);
    assert!(matches!(state_puts[1], PutCondition::IfMatch(_)));
    assert_eq!(rt.block_on(b.read_state()).unwrap().unwrap(), state);

    // Journal: one object per record, seqs from 1, read back in order.
    let i = rt
        .block_on(b.append_journal(&guard, intent("r1", "i-1")))
        .unwrap();
    let s = rt
        .block_on(b.append_journal(&guard, i.next(Step::Sent)))
        .unwrap();
    let d = rt
        .block_on(b.append_journal(&guard, s.done("cr-1", Some("req-1"))))
        .unwrap();
    assert_eq!((i.seq, s.seq, d.seq), (1, 2, 3));
    let read = rt.block_on(b.read_journal()).unwrap();
    assert_eq!(read.records, vec![i.clone(), s.clone(), d.clone()]);
    assert_eq!(read.next_seq(), 4);
    assert!(read.torn.is_none());
    assert_eq!(
        store
            .keys()
            .into_iter()
            .filter(|k| k.starts_with("gpucap/prod/state.json.journal/"))
            .collect::<Vec<_>>(),
        [
            "gpucap/prod/state.json.journal/00000000000000000001.json",
            "gpucap/prod/state.json.journal/00000000000000000002.json",
            "gpucap/prod/state.json.journal/00000000000000000003.json",
        ]
    );
    rt.block_on(guard.unlock()).unwrap();
    assert!(store.peek("gpucap/prod/state.json.lock").is_none());

    // Another machine continues the numbering under its own lock.
    let b2 = backend(&store);
    let g2 = lock(&b2);
    let u = rt
        .block_on(b2.append_journal(&g2, i.next(Step::Unknown)))
        .unwrap();
    assert_eq!(u.seq, 4);
    let history = rt.block_on(b2.read_journal()).unwrap();
    let open = journal::unresolved(&history.records);
    assert_eq!(open.len(), 1, "the last word on i-1 is now `unknown`");
    assert_eq!((open[0].seq, open[0].step), (4, Step::Unknown));
    rt.block_on(g2.unlock()).unwrap();

    // Audit: one immutable object per record, created with If-None-Match, read in order.
    let a1 = AuditRecord::of(&s, "alice", None);
    let a2 = AuditRecord::of(&d, "alice", Some(31_456.5));
    let a3 = AuditRecord::of(&u, "bob", None);
    rt.block_on(b.append_audit(&a1)).unwrap();
    rt.block_on(b.append_audit(&a2)).unwrap();
    rt.block_on(b2.append_audit(&a3)).unwrap();
    assert_eq!(
        rt.block_on(b.read_audit()).unwrap(),
        vec![a1.clone(), a2.clone(), a3.clone()]
    );
    let audit_puts = store.calls_to(Op::Put, ".audit/");
    assert_eq!(audit_puts.len(), 3);
    assert!(
        audit_puts
            .iter()
            .all(|c| c.condition == PutCondition::IfNoneMatch && c.outcome == "ok"),
        "{audit_puts:?}"
    );
    let audit_keys: Vec<String> = audit_puts.iter().map(|c| c.key.clone()).collect();
    assert_eq!(
        audit_keys
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "never the same object twice: {audit_keys:?}"
    );
    // Two prefixes, one per process, each numbered from 1.
    assert!(audit_keys[0].ends_with("/000001.json") && audit_keys[1].ends_with("/000002.json"));
    assert!(audit_keys[2].ends_with("/000001.json"));
    assert_ne!(
        audit_keys[0].rsplit_once('/').unwrap().0,
        audit_keys[2].rsplit_once('/').unwrap().0
    );
}

#[test]
fn credentials_never_reach_the_stored_objects() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    let guard = lock(&b);
    let mut r = intent("r1", "i-1");
    r.request = serde_json::json!({"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG", "n": 2});
    let written = rt.block_on(b.append_journal(&guard, r)).unwrap();
    let mut a = AuditRecord::of(&written, "AKIAIOSFODNN7EXAMPLE", None);
    a.detail = Some("Bearer abc.def.ghi".into());
    rt.block_on(b.append_audit(&a)).unwrap();
    for key in store.keys() {
        let text = String::from_utf8(store.peek(&key).unwrap().bytes).unwrap();
        for secret in ["wJalrXUtnFEMI", "AKIAIOSFODNN7", "abc.def.ghi"] {
            assert!(!text.contains(secret), "{key}: {text}");
        }
    }
    rt.block_on(guard.unlock()).unwrap();
}

#[test]
fn a_second_locker_waits_then_fails_naming_the_holder_or_gets_it_once_released() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let (b1, b2) = (backend(&store), backend(&store));
    let rt = rt();
    let held = lock(&b1);
    let started = std::time::Instant::now();
    let err = rt
        .block_on(
            b2.lock(
                &LockOptions::new("apply")
                    .timeout(Duration::from_millis(200))
                    .poll(Duration::from_millis(20)),
            ),
        )
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(200));
    match &err {
        StateError::Locked {
            holder, takeover, ..
        } => {
            assert_eq!(**holder, *held.info());
            assert!(takeover);
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("gpucap force-unlock {}", held.id())),
        "{msg}"
    );
    assert!(
        msg.contains("mem://bucket/gpucap/prod/state.json.lock"),
        "{msg}"
    );
    assert!(msg.contains("lease runs until"), "{msg}");
    // Polled: several create attempts, each refused, none of them overwrote the lock.
    let attempts = store.calls_to(Op::Put, ".lock");
    assert!(attempts.len() >= 3, "{attempts:?}");
    assert!(attempts[1..].iter().all(|c| c.outcome == "412"));

    // Released with If-Match on its own version; then the other gets it.
    let etag = store.peek("gpucap/prod/state.json.lock").unwrap().etag;
    rt.block_on(held.unlock()).unwrap();
    let delete = store.calls_to(Op::Delete, ".lock");
    assert_eq!(
        delete.last().unwrap().condition,
        PutCondition::IfMatch(etag)
    );
    let g2 = lock(&b2);
    rt.block_on(g2.unlock()).unwrap();
}

/// A store whose lock reads yield to the runtime first, so that two lockers driven by one
/// `join!` both read the same lock before either acts on it: the race the CAS must settle.
struct Yielding(Arc<MemoryObjects>);

impl ObjectStore for Yielding {
    fn url(&self, key: &str) -> String {
        self.0.url(key)
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Object>, ObjectError>> {
        Box::pin(async move {
            let read = self.0.get(key).await;
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            read
        })
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<String, ObjectError>> {
        self.0.put(key, bytes, condition)
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        if_match: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ObjectError>> {
        self.0.delete(key, if_match)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ObjectError>> {
        self.0.list(prefix)
    }
}

#[test]
fn an_expired_lease_is_taken_over_by_exactly_one_of_two_takers() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let dead = backend(&store);
    let rt = rt();
    // A run that took the lock for 50 ms and died (its guard is never released).
    let abandoned = lock_leased(&dead, Duration::from_millis(50));
    let expired_etag = store.peek("gpucap/prod/state.json.lock").unwrap().etag;
    std::mem::forget(abandoned);
    std::thread::sleep(Duration::from_millis(80));

    let racing = Arc::new(Yielding(store.clone()));
    let (a, b) = (
        ObjectBackend::new(racing.clone(), KEY).with_retry(fast()),
        ObjectBackend::new(racing, KEY).with_retry(fast()),
    );
    let options = LockOptions::new("apply");
    let (ra, rb) = rt.block_on(async { tokio::join!(a.lock(&options), b.lock(&options)) });
    let (winner, loser) = match (ra, rb) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        (Ok(_), Ok(_)) => panic!("both takers won"),
        (Err(x), Err(y)) => panic!("neither won: {x}; {y}"),
    };
    // Both swapped against the expired lock's version; one of them was refused.
    let swaps: Vec<_> = store
        .calls_to(Op::Put, ".lock")
        .into_iter()
        .filter(|c| c.condition == PutCondition::IfMatch(expired_etag.clone()))
        .collect();
    assert_eq!(swaps.len(), 2, "{swaps:?}");
    assert_eq!(
        swaps.iter().filter(|c| c.outcome == "ok").count(),
        1,
        "{swaps:?}"
    );
    match &loser {
        StateError::Locked { holder, .. } => assert_eq!(holder.id, winner.id()),
        other => panic!("{other:?}"),
    }
    let stored: LockInfo =
        serde_json::from_slice(&store.peek("gpucap/prod/state.json.lock").unwrap().bytes).unwrap();
    assert_eq!(&stored, winner.info());

    // The takeover is in the audit log, naming the lock it replaced.
    let audit = rt.block_on(dead.read_audit()).unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].outcome, "lock-takeover");
    assert!(
        audit[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("lease ran out"),
        "{audit:?}"
    );
    rt.block_on(winner.unlock()).unwrap();
}

#[test]
fn a_live_lease_is_not_taken_over() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let (b1, b2) = (backend(&store), backend(&store));
    let rt = rt();
    let held = lock_leased(&b1, Duration::from_secs(3600));
    let err = rt
        .block_on(b2.lock(&LockOptions::new("apply")))
        .unwrap_err();
    assert!(matches!(err, StateError::Locked { .. }), "{err:?}");
    assert!(
        store
            .calls_to(Op::Put, ".lock")
            .iter()
            .all(|c| !matches!(c.condition, PutCondition::IfMatch(_))),
        "no swap was tried"
    );
    rt.block_on(held.unlock()).unwrap();
}

#[test]
fn the_run_that_lost_its_lock_can_write_nothing_and_cannot_delete_the_new_lock() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let (old, new) = (backend(&store), backend(&store));
    let rt = rt();
    let stale = lock_leased(&old, Duration::from_millis(50));
    let mut state = rt.block_on(old.read_state()).unwrap().unwrap_or_default();
    rt.block_on(old.write_state(&stale, &mut state)).unwrap();
    std::thread::sleep(Duration::from_millis(80));
    let current = lock(&new);

    let err = rt
        .block_on(old.append_journal(&stale, intent("r-old", "i-1")))
        .unwrap_err();
    assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
    assert!(
        err.to_string().contains(current.id()),
        "names the new holder: {err}"
    );
    state.upsert(block("cr-9", "a9"));
    let err = rt
        .block_on(old.write_state(&stale, &mut state))
        .unwrap_err();
    assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
    assert_eq!(state.serial, 1, "not moved");
    assert!(rt.block_on(old.read_journal()).unwrap().records.is_empty());

    // Its release deletes only its own version: refused, the new lock stays.
    let err = rt.block_on(stale.unlock()).unwrap_err();
    assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
    let stored: LockInfo =
        serde_json::from_slice(&store.peek("gpucap/prod/state.json.lock").unwrap().bytes).unwrap();
    assert_eq!(stored.id, current.id());
    rt.block_on(current.unlock()).unwrap();
}

#[test]
fn a_state_write_after_the_lock_was_stolen_is_refused() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let (first, second) = (backend(&store), backend(&store));
    let rt = rt();
    // The first run takes the lock and reads the state.
    let guard = lock(&first);
    let mut state = State::new();
    rt.block_on(first.write_state(&guard, &mut state)).unwrap();
    let mut mine = rt.block_on(first.read_state()).unwrap().unwrap();
    // Someone force-unlocks it, locks, and writes newer state.
    rt.block_on(second.force_unlock(guard.id())).unwrap();
    let theirs_guard = lock(&second);
    let mut theirs = rt.block_on(second.read_state()).unwrap().unwrap();
    theirs.upsert(block("cr-2", "a2"));
    rt.block_on(second.write_state(&theirs_guard, &mut theirs))
        .unwrap();
    // The first run's write is refused and the newer state stands.
    mine.upsert(block("cr-1", "a1"));
    let err = rt
        .block_on(first.write_state(&guard, &mut mine))
        .unwrap_err();
    assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
    let now = rt.block_on(first.read_state()).unwrap().unwrap();
    assert_eq!(now, theirs);
    rt.block_on(theirs_guard.unlock()).unwrap();
}

#[test]
fn a_state_changed_behind_the_lock_is_never_overwritten() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    let guard = lock(&b);
    let mut state = State::new();
    rt.block_on(b.write_state(&guard, &mut state)).unwrap();
    // Someone writes the state object without the lock (by hand, or an old gpucap).
    let mut edited = state.clone();
    edited.serial = 7;
    store.set(KEY, &edited.to_bytes().unwrap());
    state.upsert(block("cr-1", "a1"));
    let err = rt.block_on(b.write_state(&guard, &mut state)).unwrap_err();
    match &err {
        StateError::StateChanged {
            read_serial,
            disk_serial,
            ..
        } => assert_eq!((*read_serial, *disk_serial), (1, 7)),
        other => panic!("{other:?}"),
    }
    // The refused write was the conditional put on the version written before.
    let last = store
        .calls_to(Op::Put, KEY)
        .into_iter()
        .rfind(|c| c.key == KEY)
        .unwrap();
    assert!(
        matches!(last.condition, PutCondition::IfMatch(_)),
        "{last:?}"
    );
    assert_eq!(last.outcome, "412");
    // A state this caller never read is refused before any write.
    let mut other = State::new();
    other.serial = 3;
    assert!(matches!(
        rt.block_on(b.write_state(&guard, &mut other)),
        Err(StateError::StateChanged { .. })
    ));
    rt.block_on(guard.unlock()).unwrap();
}

#[test]
fn conditional_conflicts_are_retried_and_lost_answers_are_found() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    store.inject(Fault::conflict(".lock", 2));
    let guard = lock(&b);
    store.inject(Fault::conflict(KEY, 2));
    let mut state = State::new();
    rt.block_on(b.write_state(&guard, &mut state)).unwrap();
    assert_eq!(state.serial, 1);
    store.inject(Fault::conflict(".journal/", 3));
    let i = rt
        .block_on(b.append_journal(&guard, intent("r", "i-1")))
        .unwrap();
    // The answer of the next append is lost after it was stored: found, not doubled.
    store.inject(Fault::answer_lost(Op::Put, ".journal/"));
    let s = rt
        .block_on(b.append_journal(&guard, i.next(Step::Sent)))
        .unwrap();
    assert_eq!((i.seq, s.seq), (1, 2));
    assert_eq!(rt.block_on(b.read_journal()).unwrap().records, vec![i, s]);
    let outcomes: Vec<String> = store
        .calls_to(Op::Put, ".journal/")
        .into_iter()
        .map(|c| c.outcome)
        .collect();
    assert_eq!(outcomes, ["409", "409", "409", "ok", "lost", "412"]);
    rt.block_on(guard.unlock()).unwrap();
}

#[test]
fn force_unlock_needs_the_right_id_and_removes_only_that_lock() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let (b1, b2) = (backend(&store), backend(&store));
    let rt = rt();
    let guard = lock(&b1);
    let err = rt.block_on(b2.force_unlock("not-the-id")).unwrap_err();
    assert!(matches!(err, StateError::LockIdMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains(guard.id()), "{err}");
    let etag = store.peek("gpucap/prod/state.json.lock").unwrap().etag;
    let removed = rt.block_on(b2.force_unlock(guard.id())).unwrap();
    assert_eq!(&removed, guard.info());
    assert_eq!(
        store
            .calls_to(Op::Delete, ".lock")
            .last()
            .unwrap()
            .condition,
        PutCondition::IfMatch(etag),
        "deleted with If-Match on the version whose id matched"
    );
    assert!(matches!(
        rt.block_on(b2.force_unlock(guard.id())),
        Err(StateError::NotLocked { .. })
    ));
    let err = rt.block_on(guard.unlock()).unwrap_err();
    assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
}

#[test]
fn long_runs_renew_their_lease_once_half_of_it_has_gone() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    let guard = lock_leased(&b, Duration::from_millis(400));
    let first = guard.version().unwrap().get();
    // Early on: no renewal.
    let i = rt
        .block_on(b.append_journal(&guard, intent("r", "i-1")))
        .unwrap();
    assert_eq!(guard.version().unwrap().get(), first);
    std::thread::sleep(Duration::from_millis(250));
    rt.block_on(b.append_journal(&guard, i.next(Step::Sent)))
        .unwrap();
    let renewed = guard.version().unwrap().get();
    assert_ne!(renewed.etag, first.etag);
    assert!(renewed.info.lease_until > first.info.lease_until);
    assert_eq!(renewed.info.id, first.info.id);
    let swap = store
        .calls_to(Op::Put, ".lock")
        .into_iter()
        .find(|c| matches!(c.condition, PutCondition::IfMatch(_)))
        .unwrap();
    assert_eq!(swap.condition, PutCondition::IfMatch(first.etag));
    let stored: LockInfo =
        serde_json::from_slice(&store.peek("gpucap/prod/state.json.lock").unwrap().bytes).unwrap();
    assert_eq!(stored, renewed.info);
    // Another locker finds it live, and the release uses the renewed version.
    let other = backend(&store);
    assert!(rt.block_on(other.lock(&LockOptions::new("apply"))).is_err());
    rt.block_on(guard.unlock()).unwrap();
    assert!(store.peek("gpucap/prod/state.json.lock").is_none());
}

#[test]
fn a_journal_record_someone_else_wrote_stops_the_run() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    let guard = lock(&b);
    let i = rt
        .block_on(b.append_journal(&guard, intent("mine", "i-1")))
        .unwrap();
    let mut theirs = intent("their-run", "i-9");
    theirs.seq = 2;
    store.set(
        "gpucap/prod/state.json.journal/00000000000000000002.json",
        &serde_json::to_vec(&theirs).unwrap(),
    );
    let err = rt
        .block_on(b.append_journal(&guard, i.next(Step::Sent)))
        .unwrap_err();
    match &err {
        StateError::JournalConflict { seq, detail, .. } => {
            assert_eq!(*seq, 2);
            assert!(detail.contains("their-run"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing was overwritten.
    let read = rt.block_on(b.read_journal()).unwrap();
    assert_eq!(read.records[1].run, "their-run");
    rt.block_on(guard.unlock()).unwrap();
}

#[test]
fn damaged_objects_are_errors_naming_them() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    store.set(
        "gpucap/prod/state.json.journal/00000000000000000001.json",
        b"{\"seq\": 1, oops",
    );
    let err = rt.block_on(b.read_journal()).unwrap_err().to_string();
    assert!(
        err.contains("mem://bucket/gpucap/prod/state.json.journal/00000000000000000001.json"),
        "{err}"
    );
    rt.block_on(store.delete(
        "gpucap/prod/state.json.journal/00000000000000000001.json",
        None,
    ))
    .unwrap();
    store.set("gpucap/prod/state.json.journal/notes.txt", b"hi");
    let err = rt.block_on(b.read_journal()).unwrap_err().to_string();
    assert!(err.contains("notes.txt"), "{err}");

    store.set(KEY, b"{\"version\": 1,\n oops}");
    let err = rt.block_on(b.read_state()).unwrap_err().to_string();
    assert!(
        err.contains("mem://bucket/gpucap/prod/state.json:2"),
        "{err}"
    );

    store.set("gpucap/prod/state.json.lock", b"{\"id\": ");
    let err = rt.block_on(b.lock(&LockOptions::new("apply"))).unwrap_err();
    assert!(matches!(err, StateError::LockUnreadable { .. }), "{err:?}");
}

#[test]
fn recovery_reads_only_what_follows_the_settled_point() {
    let store = Arc::new(MemoryObjects::new("bucket"));
    let b = backend(&store);
    let rt = rt();
    let guard = lock(&b);
    let i = rt
        .block_on(b.append_journal(&guard, intent("r1", "i-1")))
        .unwrap();
    let s = rt
        .block_on(b.append_journal(&guard, i.next(Step::Sent)))
        .unwrap();
    let d = rt
        .block_on(b.append_journal(&guard, s.done("cr-1", None)))
        .unwrap();
    // Nothing recorded yet: recovery reads everything.
    assert_eq!(
        rt.block_on(b.read_unsettled_journal())
            .unwrap()
            .records
            .len(),
        3
    );
    rt.block_on(b.mark_settled(&guard, d.seq)).unwrap();
    let next = rt
        .block_on(b.append_journal(&guard, intent("r2", "i-2")))
        .unwrap();
    assert_eq!(next.seq, 4);
    let unsettled = rt.block_on(b.read_unsettled_journal()).unwrap();
    assert_eq!(unsettled.records, vec![next.clone()]);
    assert_eq!(journal::unresolved(&unsettled.records).len(), 1);
    // The whole journal stays readable (`state show`), and the point never moves back.
    assert_eq!(rt.block_on(b.read_journal()).unwrap().records.len(), 4);
    rt.block_on(b.mark_settled(&guard, 1)).unwrap();
    assert_eq!(
        rt.block_on(b.read_unsettled_journal())
            .unwrap()
            .records
            .len(),
        1
    );
    // Only the lock holder may move it.
    rt.block_on(guard.unlock()).unwrap();
    let other = lock(&b);
    rt.block_on(b.force_unlock(other.id())).unwrap();
    assert!(rt.block_on(b.mark_settled(&other, 4)).is_err());
}
