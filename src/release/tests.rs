//! `gpucap release` against the fake cloud: what it frees, what it keeps and why, that idle
//! takes two looks, that it never touches what its tags do not say gpucap made, and that a
//! stop from the gates releases nothing.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use gpucap_provider::Cloud;
use gpucap_provider::capacity::{CloudResource, Placement, ResourceKind, tag};

use super::*;
use crate::apply::fake::FakeCloud;
use crate::state::{LocalBackend, ManagedResource, StateBackend};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("a timestamp")
}

const NOW: &str = "2027-01-03T00:00:00Z";

/// Pool `train` (H100, us-east-1) with one campaign, 2027-01-10 for 7 days.
fn demand(now: DateTime<Utc>) -> DemandCurve {
    let dir = Path::new("/nonexistent");
    let config = crate::config::Config::parse(
        "[planning]\nhorizon = \"8w\"\n[pools.train]\naccelerator = \"h100\"\nregions = [\"us-east-1\"]\n",
        &dir.join("gpucap.toml"),
    )
    .expect("config");
    let campaigns = crate::calendar::parse(
        "campaigns:\n  - name: pretrain\n    accelerator: h100\n    gpus: 64\n    start: 2027-01-10T00:00:00Z\n    duration: 7d\n",
        &dir.join("campaigns.yaml"),
        now + Duration::weeks(8),
    )
    .expect("calendar");
    let horizon = crate::timespec::Horizon::new(now, config.planning.horizon);
    crate::demand::build(&config, horizon, &campaigns, &[]).expect("demand")
}

fn managed(id: &str, kind: ResourceKind, start: &str, end: Option<&str>) -> ManagedResource {
    ManagedResource {
        id: id.into(),
        kind,
        cloud: Cloud::Aws,
        region: "us-east-1".into(),
        zone: Some("us-east-1a".into()),
        instance_type: "p5.48xlarge".into(),
        instances: 8,
        start: Some(at(start)),
        end: end.map(at),
        cost: 7000.0,
        irreversible: kind == ResourceKind::CapacityBlock,
        plan: "sha256:p".into(),
        action: format!("action-{id}"),
        pool: Some("train".into()),
        created_at: at("2026-12-20T00:00:00Z"),
        status: ResourceStatus::Active,
        idle_since: None,
    }
}

fn cloud_copy(r: &ManagedResource, in_use: Option<u32>, ours: bool) -> CloudResource {
    let mut tags = std::collections::BTreeMap::new();
    if ours {
        tags.insert(
            tag::MANAGED_BY.to_string(),
            tag::MANAGED_BY_VALUE.to_string(),
        );
        tags.insert(tag::ACTION.to_string(), r.action.clone());
    }
    CloudResource {
        id: r.id.clone(),
        kind: r.kind,
        placement: Placement {
            region: r.region.clone(),
            zone: r.zone.clone(),
            instance_type: r.instance_type.clone(),
        },
        instances: r.instances,
        start: r.start,
        end: r.end,
        state: "active".into(),
        tags,
        in_use,
    }
}

/// The state and the fake cloud of the scenario every test starts from.
fn world() -> (State, FakeCloud) {
    let needed = managed(
        "cr-needed",
        ResourceKind::Reservation,
        "2027-01-01T00:00:00Z",
        Some("2027-01-20T00:00:00Z"),
    );
    let idle = managed(
        "cr-idle",
        ResourceKind::Reservation,
        "2027-01-01T00:00:00Z",
        Some("2027-01-08T00:00:00Z"),
    );
    let busy = managed(
        "cr-busy",
        ResourceKind::Reservation,
        "2027-01-01T00:00:00Z",
        Some("2027-01-08T00:00:00Z"),
    );
    let foreign = managed(
        "cr-foreign",
        ResourceKind::Reservation,
        "2027-01-01T00:00:00Z",
        Some("2027-01-08T00:00:00Z"),
    );
    let block = managed(
        "cr-block",
        ResourceKind::CapacityBlock,
        "2027-01-01T00:00:00Z",
        Some("2027-01-05T00:00:00Z"),
    );
    let over = managed(
        "cr-over",
        ResourceKind::Reservation,
        "2026-12-25T00:00:00Z",
        Some("2027-01-01T00:00:00Z"),
    );
    let mut pool = managed(
        "gpucap-train",
        ResourceKind::Pool,
        "2026-12-20T00:00:00Z",
        None,
    );
    pool.start = None;
    pool.zone = None;
    let fake = FakeCloud::default();
    {
        let mut inner = fake.inner.lock().unwrap();
        inner.resources = vec![
            cloud_copy(&needed, Some(0), true),
            cloud_copy(&idle, Some(0), true),
            cloud_copy(&busy, Some(3), true),
            cloud_copy(&foreign, Some(0), false),
            cloud_copy(&block, Some(0), true),
            cloud_copy(&pool, Some(8), true),
        ];
    }
    let mut state = State::new();
    for r in [needed, idle, busy, foreign, block, over, pool] {
        state.upsert(r);
    }
    (state, fake)
}

fn decision<'a>(items: &'a [Item], id: &str) -> &'a Item {
    items
        .iter()
        .find(|i| i.id == id)
        .unwrap_or_else(|| panic!("{id} not decided: {items:#?}"))
}

#[test]
fn each_resource_gets_the_rule_that_fits_it_and_idle_takes_two_looks() {
    let now = at(NOW);
    let demand = demand(now);
    let (state, fake) = world();
    let observed: Vec<Observed> = state
        .resources
        .iter()
        .map(|r| Observed {
            resource: r.clone(),
            cloud: match fake
                .inner
                .lock()
                .unwrap()
                .resources
                .iter()
                .find(|c| c.id == r.id)
            {
                Some(c) => Lookup::Found(c.clone()),
                None => Lookup::NotAsked,
            },
        })
        .collect();
    let rules = Rules {
        now,
        idle_after: Duration::hours(1),
    };
    let items = select::select(&observed, &Need::new(&demand), rules);

    let needed = decision(&items, "cr-needed");
    assert_eq!(needed.decision, Decision::Keep);
    assert!(needed.reason.contains("pretrain"), "{}", needed.reason);
    let idle = decision(&items, "cr-idle");
    assert_eq!(idle.decision, Decision::Keep, "one look is not enough");
    assert_eq!(idle.idle_since, Some(now));
    let busy = decision(&items, "cr-busy");
    assert_eq!(busy.decision, Decision::Keep);
    assert!(busy.reason.contains("3 of 8"), "{}", busy.reason);
    assert_eq!(busy.idle_since, None);
    assert_eq!(decision(&items, "cr-foreign").decision, Decision::LeftAlone);
    let Decision::Owed { cost, ahead } = decision(&items, "cr-block").decision else {
        panic!("a block cannot be released")
    };
    assert_eq!(cost, 7000.0);
    assert!((ahead - 7000.0 * 2.0 / 4.0).abs() < 1e-6, "{ahead}");
    assert_eq!(
        decision(&items, "cr-over").decision,
        Decision::Ended {
            status: ResourceStatus::Expired
        }
    );
    assert_eq!(
        decision(&items, "gpucap-train").decision,
        Decision::ScaleToZero { from: 8 }
    );

    // An hour later, still unused and still unneeded: cancelled.
    let later: Vec<Observed> = observed
        .into_iter()
        .map(|mut o| {
            if o.resource.id == "cr-idle" {
                o.resource.idle_since = Some(now);
            }
            o
        })
        .collect();
    let rules = Rules {
        now: now + Duration::hours(1),
        ..rules
    };
    let items = select::select(&later, &Need::new(&demand), rules);
    assert_eq!(decision(&items, "cr-idle").decision, Decision::Cancel);
    assert_eq!(decision(&items, "cr-needed").decision, Decision::Keep);
    // During the campaign the pool is needed.
    let rules = Rules {
        now: at("2027-01-11T00:00:00Z"),
        ..rules
    };
    let items = select::select(&later, &Need::new(&demand), rules);
    assert_eq!(decision(&items, "gpucap-train").decision, Decision::Keep);
}

fn release_at(
    backend: &LocalBackend,
    clouds: &Clouds,
    now: DateTime<Utc>,
    verdict: Verdict,
) -> Summary {
    let demand = demand(at(NOW));
    let settings = Settings::new(now);
    let approve = move |_: &[Item]| verdict.clone();
    let progress = |_: &str| {};
    crate::state::test_runtime()
        .block_on(run(Run {
            demand: &demand,
            clouds,
            backend,
            settings: &settings,
            idle_after: Duration::hours(1),
            lock_timeout: Duration::zero().to_std().unwrap(),
            who: "tester".into(),
            approve: &approve,
            progress: &progress,
        }))
        .expect("the run completes")
}

#[test]
fn release_cancels_only_what_is_idle_and_unneeded_journals_it_and_a_stop_releases_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(dir.path());
    let (mut state, fake) = world();
    let rt = crate::state::test_runtime();
    rt.block_on(async {
        let guard = backend
            .lock(&crate::state::LockOptions::new("seed"))
            .await
            .unwrap();
        backend.write_state(&guard, &mut state).await.unwrap();
        guard.unlock().await.unwrap();
    });
    let fake = Arc::new(fake);
    let clouds = Clouds::default().with(Cloud::Aws, fake.clone());

    // The gates say stop: nothing is called, but the idle marks are recorded.
    let stopped = release_at(&backend, &clouds, at(NOW), Verdict::Stop("freeze".into()));
    assert_eq!(stopped.stopped.as_deref(), Some("freeze"));
    assert!(stopped.reports.is_empty());
    assert_eq!(fake.calls("CancelCapacityReservation"), 0);
    assert_eq!(fake.calls("UpdateAutoScalingGroup"), 0);
    assert!(!stopped.complete());

    // First run: the pool goes to zero; the idle reservation is only marked.
    let first = release_at(&backend, &clouds, at(NOW), Verdict::Go);
    assert!(first.complete(), "{first:#?}");
    assert_eq!(fake.calls("UpdateAutoScalingGroup"), 1);
    assert_eq!(fake.calls("CancelCapacityReservation"), 0);
    let state = rt.block_on(backend.read_state()).unwrap().unwrap();
    let idle = state.get(Cloud::Aws, "cr-idle").unwrap();
    assert_eq!(idle.idle_since, Some(at(NOW)));
    assert_eq!(
        state.get(Cloud::Aws, "cr-over").unwrap().status,
        ResourceStatus::Expired
    );
    assert_eq!(state.get(Cloud::Aws, "gpucap-train").unwrap().instances, 0);

    // Two hours later: the idle reservation is cancelled, once; the others are untouched.
    let second = release_at(&backend, &clouds, at(NOW) + Duration::hours(2), Verdict::Go);
    assert!(second.complete(), "{second:#?}");
    let cancels: Vec<String> = fake
        .inner
        .lock()
        .unwrap()
        .calls
        .iter()
        .filter(|c| c.starts_with("CancelCapacityReservation"))
        .cloned()
        .collect();
    assert_eq!(cancels, ["CancelCapacityReservation id=cr-idle"]);
    let state = rt.block_on(backend.read_state()).unwrap().unwrap();
    assert_eq!(
        state.get(Cloud::Aws, "cr-idle").unwrap().status,
        ResourceStatus::Released
    );
    for keep in ["cr-needed", "cr-busy", "cr-foreign", "cr-block"] {
        assert_eq!(
            state.get(Cloud::Aws, keep).unwrap().status,
            ResourceStatus::Active,
            "{keep}"
        );
    }
    // Journalled before it was sent, and named as a release.
    let journal = rt.block_on(backend.read_journal()).unwrap();
    let steps: Vec<&str> = journal
        .records
        .iter()
        .filter(|r| r.api == "ec2:CancelCapacityReservation")
        .map(|r| r.step.as_str())
        .collect();
    assert_eq!(steps, ["intent", "sent", "done"]);
    assert!(
        journal
            .records
            .iter()
            .any(|r| r.action == "release:action-cr-idle")
    );
    // A third run has nothing left to release.
    let third = release_at(&backend, &clouds, at(NOW) + Duration::hours(3), Verdict::Go);
    assert!(third.reports.is_empty(), "{:#?}", third.reports);
    assert_eq!(fake.calls("CancelCapacityReservation"), 1);
}

#[test]
fn an_azure_reservation_past_its_planned_end_is_not_taken_for_ended() {
    // Azure capacity reservations have no end date: past the plan's window it still bills, so
    // it is looked up and goes through the idle rule instead of being recorded as over.
    let now = at(NOW);
    let demand = demand(now);
    let mut r = managed(
        "azure-cr",
        ResourceKind::Reservation,
        "2026-12-20T00:00:00Z",
        Some("2026-12-27T00:00:00Z"),
    );
    r.cloud = Cloud::Azure;
    r.region = "eastus".into();
    r.instance_type = "Standard_ND96isr_H100_v5".into();
    assert!(select::lives_past_its_end(&r));
    let mut aws = r.clone();
    aws.cloud = Cloud::Aws;
    assert!(!select::lives_past_its_end(&aws));
    let mut found = cloud_copy(&r, Some(0), true);
    found.end = None;
    let rules = Rules {
        now,
        idle_after: Duration::hours(1),
    };
    let look = |r: &ManagedResource, rules: Rules| {
        select::select(
            &[Observed {
                resource: r.clone(),
                cloud: Lookup::Found(found.clone()),
            }],
            &Need::new(&demand),
            rules,
        )
    };
    let first = look(&r, rules);
    assert_eq!(first[0].decision, Decision::Keep, "{:?}", first[0]);
    assert_eq!(first[0].idle_since, Some(now));
    r.idle_since = Some(now);
    let later = look(
        &r,
        Rules {
            now: now + Duration::hours(1),
            ..rules
        },
    );
    assert_eq!(later[0].decision, Decision::Cancel, "{:?}", later[0]);
    // The same on AWS ended by itself.
    let ended = select::select(
        &[Observed {
            resource: aws,
            cloud: Lookup::NotAsked,
        }],
        &Need::new(&demand),
        rules,
    );
    assert!(matches!(ended[0].decision, Decision::Ended { .. }));
}

/// A GCP capacity block (a future reservation in calendar mode) gpucap made for an H100
/// window, as the state records it.
fn gcp_block(id: &str, start: &str, end: &str) -> ManagedResource {
    let mut r = managed(id, ResourceKind::CapacityBlock, start, Some(end));
    r.cloud = Cloud::Gcp;
    r.region = "us-central1".into();
    r.zone = Some("us-central1-a".into());
    r.instance_type = "a3-highgpu-8g".into();
    r.pool = None;
    r
}

#[test]
fn a_gcp_block_is_cancelled_only_before_its_notice_period_and_a_commitment_never() {
    let now = at(NOW);
    let curve = demand(now);
    let need = Need::new(&curve);
    let rules = Rules {
        now,
        idle_after: Duration::hours(1),
    };
    let observed = |r: ManagedResource, state: &str, ours: bool| {
        let mut c = cloud_copy(&r, None, ours);
        c.state = state.into();
        Observed {
            resource: r,
            cloud: Lookup::Found(c),
        }
    };
    // Starts 2027-03-10, 66 days ahead: no campaign needs it, Compute Engine still allows it.
    let far = gcp_block(
        "us-central1-a/gpucap-far",
        "2027-03-10T00:00:00Z",
        "2027-03-20T00:00:00Z",
    );
    // Starts 2027-01-20, 17 days ahead: inside the 30-day notice.
    let near = gcp_block(
        "us-central1-a/gpucap-near",
        "2027-01-20T00:00:00Z",
        "2027-01-30T00:00:00Z",
    );
    let locked = gcp_block(
        "us-central1-a/gpucap-locked",
        "2027-03-10T00:00:00Z",
        "2027-03-20T00:00:00Z",
    );
    let theirs = gcp_block(
        "us-central1-a/gpucap-theirs",
        "2027-03-10T00:00:00Z",
        "2027-03-20T00:00:00Z",
    );
    let mut commitment = gcp_block(
        "us-central1/gpucap-commit",
        "2027-01-01T00:00:00Z",
        "2028-01-01T00:00:00Z",
    );
    commitment.kind = ResourceKind::Commitment;
    commitment.irreversible = true;
    let items = select::select(
        &[
            observed(far, "scheduled", true),
            observed(near, "scheduled", true),
            observed(locked, "locked", true),
            observed(theirs, "scheduled", false),
            observed(commitment, "active", true),
        ],
        &need,
        rules,
    );
    let by = |id: &str| items.iter().find(|i| i.id.ends_with(id)).unwrap();
    assert_eq!(by("far").decision, Decision::Cancel, "{:?}", by("far"));
    assert!(
        by("far").reason.contains("2027-02-08"),
        "{}",
        by("far").reason
    );
    for id in ["near", "locked"] {
        assert!(
            matches!(by(id).decision, Decision::Owed { cost, .. } if cost == 7000.0),
            "{:?}",
            by(id)
        );
        assert!(
            by(id).reason.contains("can no longer be cancelled"),
            "{}",
            by(id).reason
        );
    }
    assert!(
        by("near").reason.contains("30 days"),
        "{}",
        by("near").reason
    );
    assert_eq!(by("theirs").decision, Decision::LeftAlone);
    assert!(matches!(by("commit").decision, Decision::Owed { .. }));
}
