//! The executor against the fake cloud and a local state directory: purchases happen once,
//! lost answers are found by their intent tag, throttling is retried only where safe, and a
//! re-run finds nothing left to do.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gpucap_provider::Cloud;
use gpucap_provider::capacity::{
    ActErrorKind, BlockOffering, Capacity, Idempotency, Placement, ResourceKind,
};
use serde_json::json;

use super::fake::{FakeCloud, Fault};
use super::*;
use crate::plan::due::{self, Window};
use crate::plan::{Action, ActionKind};
use crate::state::{JournalRecord, LocalBackend, Step};

const NOW: &str = "2027-01-20T10:00:00Z";
const START: &str = "2027-01-25T11:30:00Z";
const END: &str = "2027-02-01T11:30:00Z";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn action(id: &str, kind: ActionKind, zone: &str, instances: u32, cost: f64) -> Action {
    Action {
        id: id.into(),
        kind,
        pool: "h100".into(),
        cloud: "aws".into(),
        region: "us-east-1".into(),
        zone: Some(zone.into()),
        instance_type: "p5.48xlarge".into(),
        instances,
        gpus: instances * 8,
        start: START.into(),
        end: END.into(),
        start_hour: 0,
        end_hour: 168,
        due: NOW.into(),
        bookable_from: None,
        cost,
        irreversible: kind == ActionKind::PurchaseCapacityBlock,
        offer: format!("offer-{zone}"),
        offering_id: None,
        campaigns: Vec::new(),
        pieces: Vec::new(),
    }
}

fn plan(actions: Vec<Action>) -> Plan {
    let mut plan: Plan = serde_json::from_value(json!({
        "schema": "gpucap.plan/v1",
        "created_at": NOW,
        "horizon": {"start": NOW, "end": "2027-04-20T10:00:00Z", "hours": 2160},
        "fingerprint": {"digest": "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", "inputs": []},
        "solution": {"status": "optimal", "expected_cost": 0.0, "bound": 0.0, "term_cost": 0.0},
        "cost": {"expected_total": 0.0, "irreversible": 0.0, "by_scenario": [],
                 "by_month": [], "by_pool": [], "by_team": [],
                 "by_kind": {"on_demand": 0.0, "spot": 0.0, "capacity_block": 0.0,
                             "reservation": 0.0, "commitment": 0.0}},
        "baselines": [],
        "risk": {"worst_scenario": "", "worst_total": 0.0, "stranded": []},
        "actions_scenario": "base",
        "actions": [],
        "pools": [],
        "campaigns": [],
        "quotes": [],
        "assumptions": []
    }))
    .unwrap();
    plan.actions = actions;
    plan
}

fn offering(id: &str, zone: &str, instances: u32, fee: f64) -> BlockOffering {
    BlockOffering {
        offering_id: id.into(),
        placement: Placement {
            region: "us-east-1".into(),
            zone: Some(zone.into()),
            instance_type: "p5.48xlarge".into(),
        },
        instances,
        start: t(START),
        end: t(END),
        upfront_fee: fee,
        currency: "USD".into(),
    }
}

fn settings() -> Settings {
    Settings {
        reconcile_wait: Duration::from_millis(30),
        reconcile_poll: Duration::from_millis(5),
        retry_min_delay: Duration::from_millis(1),
        retry_max_delay: Duration::from_millis(5),
        ..Settings::new(t(NOW))
    }
}

struct World {
    dir: tempfile::TempDir,
    cloud: std::sync::Arc<FakeCloud>,
}

impl World {
    fn new(cloud: FakeCloud) -> World {
        World {
            dir: tempfile::tempdir().unwrap(),
            cloud: std::sync::Arc::new(cloud),
        }
    }

    fn backend(&self) -> LocalBackend {
        LocalBackend::new(self.dir.path())
    }

    fn apply(&self, plan: &Plan, settings: &Settings) -> Result<Summary, RunError> {
        self.apply_with(plan, settings, &BTreeMap::new())
    }

    fn apply_with(
        &self,
        plan: &Plan,
        settings: &Settings,
        launch: &BTreeMap<String, crate::config::LaunchSettings>,
    ) -> Result<Summary, RunError> {
        let selected = due::select(
            plan,
            &Window {
                now: settings.now,
                window: chrono::Duration::days(7),
            },
        )
        .unwrap();
        let clouds = Clouds::default().with(
            Cloud::Aws,
            self.cloud.clone() as std::sync::Arc<dyn Capacity>,
        );
        let backend = self.backend();
        let progress = |_: &str| {};
        crate::state::test_runtime().block_on(run(Run {
            plan,
            due: &selected.due,
            launch,
            clouds: &clouds,
            backend: &backend,
            settings,
            lock_timeout: Duration::from_millis(100),
            who: "tester".into(),
            approval: None,
            progress: &progress,
        }))
    }

    fn state(&self) -> crate::state::State {
        crate::state::test_runtime()
            .block_on(self.backend().read_state())
            .unwrap()
            .unwrap_or_default()
    }

    fn journal(&self) -> Vec<JournalRecord> {
        crate::state::test_runtime()
            .block_on(self.backend().read_journal())
            .unwrap()
            .records
    }
}

fn one_block() -> (Plan, FakeCloud) {
    let plan = plan(vec![action(
        "block-a",
        ActionKind::PurchaseCapacityBlock,
        "us-east-1a",
        2,
        60_000.0,
    )]);
    let cloud = FakeCloud::with_offerings(vec![offering("cb-1", "us-east-1a", 2, 60_000.0)]);
    (plan, cloud)
}

#[test]
fn a_due_block_is_bought_once_and_a_rerun_has_nothing_to_do() {
    let (plan, cloud) = one_block();
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(s.complete(), "{s:?}");
    assert_eq!(s.spent(), 60_000.0);
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 1);
    let state = w.state();
    assert_eq!(state.resources.len(), 1);
    assert_eq!(state.resources[0].action, "block-a");
    assert_eq!(
        state.applied_plan.as_ref().map(|a| a.plan.as_str()),
        Some(plan.fingerprint.digest.as_str())
    );
    let steps: Vec<Step> = w.journal().iter().map(|r| r.step).collect();
    assert_eq!(steps, [Step::Intent, Step::Sent, Step::Done]);

    // The same plan again (its own writes moved the serial): nothing left, nothing bought.
    let again = w.apply(&plan, &settings()).unwrap();
    assert!(again.reports.is_empty(), "{again:?}");
    assert_eq!(again.already_done, ["block-a"]);
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 1);
}

#[test]
fn a_lost_answer_is_found_by_its_intent_tag_and_not_bought_again() {
    let (plan, cloud) = one_block();
    cloud.fail("PurchaseCapacityBlock", Fault::DoThenLose);
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(s.complete(), "{s:?}");
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 1, "never re-sent");
    assert_eq!(w.cloud.resources(ResourceKind::CapacityBlock).len(), 1);
    assert_eq!(w.state().resources.len(), 1);
    let steps: Vec<Step> = w.journal().iter().map(|r| r.step).collect();
    assert_eq!(
        steps,
        [Step::Intent, Step::Sent, Step::Unknown, Step::Reconciled]
    );
    assert_eq!(s.counts.reconciled, 1);
}

#[test]
fn throttling_before_the_purchase_re_quotes_and_buys_once() {
    let (plan, cloud) = one_block();
    cloud.fail(
        "PurchaseCapacityBlock",
        Fault::Fail(ActErrorKind::Throttled),
    );
    cloud.fail(
        "DescribeCapacityBlockOfferings",
        Fault::Fail(ActErrorKind::Throttled),
    );
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(s.complete(), "{s:?}");
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 2);
    assert_eq!(w.cloud.resources(ResourceKind::CapacityBlock).len(), 1);
    // Throttled quote retried, then a fresh quote before the second purchase.
    assert_eq!(w.cloud.calls("DescribeCapacityBlockOfferings"), 3);
    assert!(s.counts.retries >= 2, "{:?}", s.counts);
}

#[test]
fn no_capacity_is_remembered_and_not_asked_again_in_the_run() {
    let plan = plan(vec![
        action(
            "block-a",
            ActionKind::PurchaseCapacityBlock,
            "us-east-1a",
            2,
            60_000.0,
        ),
        action(
            "block-b",
            ActionKind::PurchaseCapacityBlock,
            "us-east-1a",
            2,
            60_000.0,
        ),
    ]);
    let cloud = FakeCloud::with_offerings(vec![offering("cb-1", "us-east-1a", 2, 60_000.0)]);
    cloud.fail("PurchaseCapacityBlock", Fault::Fail(ActErrorKind::Capacity));
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(!s.complete());
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 1, "{s:?}");
    let reasons: Vec<String> = s
        .reports
        .iter()
        .map(|r| match &r.outcome {
            Outcome::NotDone { reason } => reason.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(reasons[1].contains("no capacity"), "{reasons:?}");
    assert!(w.state().resources.is_empty());
}

#[test]
fn a_block_larger_than_one_block_holds_is_bought_in_parts() {
    // A plan without pieces (made before they were listed): AWS's rule, at most 64 per block.
    let plan = plan(vec![action(
        "block-big",
        ActionKind::PurchaseCapacityBlock,
        "us-east-1a",
        71,
        710_000.0,
    )]);
    let cloud = FakeCloud::with_offerings(vec![
        offering("cb-64", "us-east-1a", 64, 640_000.0),
        offering("cb-7", "us-east-1a", 7, 70_000.0),
    ]);
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(s.complete(), "{s:?}");
    let ids: Vec<String> = w
        .state()
        .resources
        .iter()
        .map(|r| r.action.clone())
        .collect();
    assert_eq!(ids, ["block-big#1", "block-big#2"]);
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 2);
}

#[test]
fn a_price_beyond_the_tolerance_is_refused_as_stale() {
    let (plan, _) = one_block();
    let cloud = FakeCloud::with_offerings(vec![offering("cb-1", "us-east-1a", 2, 70_000.0)]);
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    let Outcome::NotDone { reason } = &s.reports[0].outcome else {
        panic!("{s:?}")
    };
    assert!(
        reason.contains("plan is stale") && reason.contains("70000.00"),
        "{reason}"
    );
    assert_eq!(w.cloud.calls("PurchaseCapacityBlock"), 0);
}

#[test]
fn a_dry_run_writes_nothing_and_sends_only_dry_runs() {
    let (plan, cloud) = one_block();
    let w = World::new(cloud);
    let s = w
        .apply(
            &plan,
            &Settings {
                dry_run: true,
                ..settings()
            },
        )
        .unwrap();
    assert!(
        matches!(s.reports[0].outcome, Outcome::WouldDo { .. }),
        "{s:?}"
    );
    assert!(w.cloud.resources(ResourceKind::CapacityBlock).is_empty());
    let calls = w.cloud.inner.lock().unwrap().calls.clone();
    assert!(
        calls.iter().any(|c| c.contains("dry_run=true")),
        "{calls:?}"
    );
    assert!(
        std::fs::read_dir(w.dir.path()).unwrap().next().is_none(),
        "no files"
    );
}

#[test]
fn a_crash_after_sent_is_settled_before_anything_else() {
    let (plan, cloud) = one_block();
    let w = World::new(cloud);
    // An earlier run journalled the intent, sent the purchase, and died: the block exists.
    let id = Idempotency {
        plan: plan.fingerprint.digest.clone(),
        action: "block-a".into(),
        intent: "intent-1".into(),
        client_token: None,
    };
    let resource = crate::state::ManagedResource {
        id: String::new(),
        kind: ResourceKind::CapacityBlock,
        cloud: Cloud::Aws,
        region: "us-east-1".into(),
        zone: Some("us-east-1a".into()),
        instance_type: "p5.48xlarge".into(),
        instances: 2,
        start: Some(t(START)),
        end: Some(t(END)),
        cost: 60_000.0,
        irreversible: true,
        plan: plan.fingerprint.digest.clone(),
        action: "block-a".into(),
        created_at: t(NOW),
        pool: None,
        status: crate::state::ResourceStatus::Pending,
        idle_since: None,
    };
    let request = executor::Request {
        cloud: "aws".into(),
        region: "us-east-1".into(),
        params: json!({}),
        creates: Some(resource),
        releases: None,
    };
    let offer = offering("cb-1", "us-east-1a", 2, 60_000.0);
    crate::state::test_runtime().block_on(async {
        use gpucap_provider::capacity::CapacityBlocks;
        w.cloud.purchase_block(&offer, &id, false).await.unwrap();
        let backend = w.backend();
        let guard = backend
            .lock(&crate::state::LockOptions::new("apply"))
            .await
            .unwrap();
        let intent = backend
            .append_journal(
                &guard,
                JournalRecord::intent(
                    "run-0",
                    &id,
                    "ec2:PurchaseCapacityBlock",
                    serde_json::to_value(&request).unwrap(),
                ),
            )
            .await
            .unwrap();
        backend
            .append_journal(&guard, intent.next(Step::Sent))
            .await
            .unwrap();
        guard.unlock().await.unwrap();
    });
    let s = w.apply(&plan, &settings()).unwrap();
    assert_eq!(s.recovered.found, 1, "{s:?}");
    assert!(s.reports.is_empty(), "nothing left: {s:?}");
    assert_eq!(
        w.cloud.calls("PurchaseCapacityBlock"),
        1,
        "bought once in all"
    );
    assert_eq!(w.state().resources.len(), 1);
}

#[test]
fn a_plan_made_before_another_plans_apply_is_stale() {
    let (plan_a, cloud) = one_block();
    let w = World::new(cloud);
    w.apply(&plan_a, &settings()).unwrap();
    let mut plan_b = plan_a.clone();
    plan_b.fingerprint.digest = format!("sha256:{}", "ab".repeat(32));
    let err = w.apply(&plan_b, &settings()).unwrap_err();
    assert!(matches!(err, RunError::Stale(_)), "{err}");
    assert!(err.to_string().contains("saved plan is stale"), "{err}");
    // A plan made against the state as it is now is fine.
    plan_b.state = Some(w.state().reference());
    w.apply(&plan_b, &settings()).unwrap();
}

#[test]
fn a_reservation_with_a_lost_answer_is_repeated_with_the_same_token() {
    let plan = plan(vec![action(
        "reserve-a",
        ActionKind::Reserve,
        "us-east-1a",
        3,
        10_000.0,
    )]);
    let cloud = FakeCloud::default();
    cloud.fail("CreateCapacityReservation", Fault::DoThenLose);
    let w = World::new(cloud);
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(s.complete(), "{s:?}");
    assert_eq!(w.cloud.calls("CreateCapacityReservation"), 2);
    assert_eq!(w.cloud.resources(ResourceKind::Reservation).len(), 1);
    let tokens = w.cloud.inner.lock().unwrap().tokens.clone();
    assert_eq!(tokens.len(), 1);
    assert_eq!(w.state().resources.len(), 1);
}

#[test]
fn pools_are_sized_for_now_and_need_launch_settings() {
    let mut od = action("od-1", ActionKind::RunOnDemand, "us-east-1a", 4, 1_000.0);
    od.start = "2027-01-20T00:00:00Z".into();
    od.end = "2027-01-21T00:00:00Z".into();
    let mut spot = action("spot-1", ActionKind::RunSpot, "us-east-1a", 2, 100.0);
    spot.start = "2027-01-20T06:00:00Z".into();
    spot.end = "2027-01-22T00:00:00Z".into();
    let plan = plan(vec![od, spot]);
    let w = World::new(FakeCloud::default());
    let s = w.apply(&plan, &settings()).unwrap();
    assert!(
        matches!(&s.reports[0].outcome, Outcome::Manual { reason } if reason.contains("[apply.pools.h100]")),
        "{s:?}"
    );
    let launch = BTreeMap::from([(
        "h100".to_string(),
        crate::config::LaunchSettings {
            image: "ami-1".into(),
            subnets: vec!["subnet-1".into()],
            security_groups: vec![],
            max_size: None,
            flex_start: false,
            max_run_duration: None,
        },
    )]);
    let s = w.apply_with(&plan, &settings(), &launch).unwrap();
    assert!(s.complete(), "{s:?}");
    let calls = w.cloud.inner.lock().unwrap().calls.clone();
    assert!(
        calls.contains(
            &"UpdateAutoScalingGroup name=gpucap-h100-us-east-1-p5-48xlarge od=4 spot=2"
                .to_string()
        ),
        "{calls:?}"
    );
    // A day later the on-demand run is over: the pool shrinks to the spot run.
    let later = Settings {
        now: t("2027-01-21T12:00:00Z"),
        ..settings()
    };
    let mut plan2 = plan.clone();
    plan2.state = Some(w.state().reference());
    w.apply_with(&plan2, &later, &launch).unwrap();
    let calls = w.cloud.inner.lock().unwrap().calls.clone();
    assert_eq!(w.cloud.calls("CreateAutoScalingGroup"), 1, "{calls:?}");
    assert!(calls.last().unwrap().ends_with("od=0 spot=2"), "{calls:?}");
}

#[test]
fn pieces_follow_the_plan_else_the_clouds_rule() {
    let mut a = action(
        "b",
        ActionKind::PurchaseCapacityBlock,
        "us-east-1a",
        129,
        1.0,
    );
    assert_eq!(a.piece_sizes(), [64, 64, 1]);
    a.instances = 64;
    assert_eq!(a.piece_sizes(), [64]);
    // The plan's pieces win.
    a.instances = 71;
    a.pieces = vec![64, 7];
    assert_eq!(a.piece_sizes(), [64, 7]);
    // Reservations have no per-purchase limit on AWS.
    let r = action("r", ActionKind::Reserve, "us-east-1a", 200, 1.0);
    assert_eq!(r.piece_sizes(), [200]);
    assert_eq!(crate::plan::piece_id("a", 1, 1), "a");
    assert_eq!(crate::plan::piece_id("a", 2, 3), "a#2");
}

#[test]
fn client_tokens_are_deterministic_and_fit_the_api() {
    let a = executor::client_token("sha256:aa", "reserve-x");
    assert_eq!(a, executor::client_token("sha256:aa", "reserve-x"));
    assert_ne!(a, executor::client_token("sha256:aa", "reserve-y"));
    assert!(a.len() <= 64 && a.is_ascii());
}

#[test]
fn azure_reservations_and_pools_and_gcp_blocks_and_commitments_are_acted_on() {
    let on = |id: &str, kind: ActionKind, cloud: &str| {
        let mut a = action(id, kind, "1", 2, 100.0);
        a.cloud = cloud.into();
        a.region = "eastus".into();
        a.instance_type = "Standard_ND96isr_H100_v5".into();
        a.start = "2027-01-20T00:00:00Z".into();
        a.end = "2027-01-27T00:00:00Z".into();
        a
    };
    let plan = plan(vec![
        on("reserve-az", ActionKind::Reserve, "azure"),
        on("block-az", ActionKind::PurchaseCapacityBlock, "azure"),
        on("commit-az", ActionKind::Commit, "azure"),
        on("od-az", ActionKind::RunOnDemand, "azure"),
        on("reserve-gcp", ActionKind::Reserve, "gcp"),
        on("block-gcp", ActionKind::PurchaseCapacityBlock, "gcp"),
        on("commit-gcp", ActionKind::Commit, "gcp"),
    ]);
    let selected = due::select(
        &plan,
        &Window {
            now: t(NOW),
            window: chrono::Duration::days(7),
        },
    )
    .unwrap();
    let todo = work::todo(
        &plan,
        &selected.due,
        &crate::state::State::new(),
        &BTreeMap::new(),
        t(NOW),
    );
    let reason = |label: &str| {
        todo.work
            .iter()
            .find_map(|w| match w {
                Work::Manual { action, reason } if action.starts_with(label) => {
                    Some(reason.clone())
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{label} is not manual: {todo:#?}"))
    };
    assert!(
        todo.work
            .iter()
            .any(|w| matches!(w, Work::Reserve(p) if p.id == "reserve-az")),
        "{todo:#?}"
    );
    assert!(reason("block-az").contains("no capacity blocks"));
    assert!(reason("commit-az").contains("commitments"));
    // An Azure run is a pool (a VM scale set) apply can make, given launch settings.
    assert!(reason("gpucap-h100-eastus").contains("[apply.pools.h100]"));
    assert!(
        todo.work
            .iter()
            .any(|w| matches!(w, Work::Reserve(p) if p.id == "reserve-gcp")),
        "{todo:#?}"
    );
    // GCP blocks are future reservations in calendar mode, requested like every block; GCP
    // commitments are signed (regionCommitments.insert). Neither is manual.
    assert!(
        todo.work
            .iter()
            .any(|w| matches!(w, Work::Block(p) if p.id == "block-gcp" && p.instances == 2)),
        "{todo:#?}"
    );
    assert!(
        todo.work
            .iter()
            .any(|w| matches!(w, Work::Commit(p) if p.id == "commit-gcp" && p.instances == 2)),
        "{todo:#?}"
    );
    assert!(
        !todo
            .work
            .iter()
            .any(|w| matches!(w, Work::Manual { action, .. } if action.ends_with("-gcp"))),
        "{todo:#?}"
    );
    assert_eq!(todo.work.len(), 7, "{todo:#?}");
}

#[test]
fn an_azure_run_is_a_pool_to_make_and_size_not_manual() {
    let mut run = action("spot-az", ActionKind::RunSpot, "1", 2, 100.0);
    run.cloud = "azure".into();
    run.region = "eastus".into();
    run.zone = None;
    run.instance_type = "Standard_ND96asr_v4".into();
    run.start = "2027-01-20T00:00:00Z".into();
    run.end = "2027-01-27T00:00:00Z".into();
    let plan = plan(vec![run]);
    let launch = BTreeMap::from([(
        "h100".to_string(),
        crate::config::LaunchSettings {
            image: "microsoft-dsvm:ubuntu-hpc:2204:latest".into(),
            subnets: vec!["/subscriptions/s/resourceGroups/n/providers/Microsoft.Network/virtualNetworks/v/subnets/gpu".into()],
            security_groups: vec![],
            max_size: None,
            flex_start: false,
            max_run_duration: None,
        },
    )]);
    let todo = work::todo(&plan, &[], &crate::state::State::new(), &launch, t(NOW));
    match todo.work.as_slice() {
        [Work::Pool(p)] => {
            assert_eq!(p.cloud, "azure");
            assert_eq!(p.name, "gpucap-h100-eastus-standard-nd96asr-v4");
            assert_eq!((p.on_demand, p.spot), (0, 2));
        }
        other => panic!("{other:#?}"),
    }
}

#[test]
fn a_gcp_run_is_a_pool_to_make_and_size_not_manual() {
    let mut run = action("od-gcp", ActionKind::RunOnDemand, "1", 3, 100.0);
    run.cloud = "gcp".into();
    run.region = "us-central1".into();
    run.zone = None;
    run.instance_type = "a3-highgpu-8g".into();
    run.start = "2027-01-20T00:00:00Z".into();
    run.end = "2027-01-27T00:00:00Z".into();
    let plan = plan(vec![run]);
    let launch = BTreeMap::from([(
        "h100".to_string(),
        crate::config::LaunchSettings {
            image: "projects/p/global/images/family/f".into(),
            subnets: vec!["regions/us-central1/subnetworks/train".into()],
            security_groups: vec![],
            max_size: None,
            flex_start: false,
            max_run_duration: None,
        },
    )]);
    let todo = work::todo(&plan, &[], &crate::state::State::new(), &launch, t(NOW));
    match todo.work.as_slice() {
        [Work::Pool(p)] => {
            assert_eq!(p.cloud, "gcp");
            assert_eq!(p.name, "gpucap-h100-us-central1-a3-highgpu-8g");
            assert_eq!((p.on_demand, p.spot), (3, 0));
        }
        other => panic!("{other:#?}"),
    }
}

#[test]
fn every_due_action_is_accounted_for_once_done_by_hand_or_later() {
    let block = action(
        "block-a",
        ActionKind::PurchaseCapacityBlock,
        "us-east-1a",
        2,
        60_000.0,
    );
    let mut now_run = action("od-now", ActionKind::RunOnDemand, "us-east-1a", 4, 1_000.0);
    now_run.start = "2027-01-20T00:00:00Z".into();
    now_run.end = "2027-01-21T00:00:00Z".into();
    // Due in the window (its `due` is now), but it starts in five days.
    let later_run = action("od-later", ActionKind::RunOnDemand, "us-east-1a", 2, 500.0);
    let commit = action("commit-1", ActionKind::Commit, "us-east-1a", 1, 9_000.0);
    let plan = plan(vec![block, now_run, later_run, commit]);
    let cloud = FakeCloud::with_offerings(vec![offering("cb-1", "us-east-1a", 2, 60_000.0)]);
    let w = World::new(cloud);
    let dry = Settings {
        dry_run: true,
        ..settings()
    };
    let s = w.apply(&plan, &dry).unwrap();
    let fates: Vec<(&str, &str)> = s
        .due
        .iter()
        .map(|a| (a.action.as_str(), a.fate.label()))
        .collect();
    assert_eq!(
        fates,
        [
            ("block-a", "would do"),
            ("od-now", "for a person"),
            ("od-later", "later run"),
            ("commit-1", "for a person"),
        ],
        "{s:?}"
    );
    let by_id = |id: &str| s.due.iter().find(|a| a.action == id).unwrap();
    assert!(
        by_id("od-now").fate.text().contains("[apply.pools.h100]"),
        "why a person: {:?}",
        by_id("od-now")
    );
    assert!(
        by_id("od-later")
            .fate
            .text()
            .starts_with("starts 2027-01-25T11:30:00Z"),
        "{:?}",
        by_id("od-later")
    );

    // Bought for real, then a re-run: the block is done earlier, the rest as before.
    w.apply(&plan, &settings()).unwrap();
    let mut plan2 = plan.clone();
    plan2.state = Some(w.state().reference());
    let again = w.apply(&plan2, &dry).unwrap();
    assert_eq!(again.due[0].fate, Fate::DoneEarlier, "{again:?}");
    assert_eq!(again.due.len(), 4);
}
