//! The GCP provider through the real google-cloud-rust clients (REST transport, pointed with
//! `with_endpoint` at a plain-HTTP local server, anonymous credentials) replaying the Cloud
//! Billing Catalog and Compute Engine REST JSON formats: int64 as strings, `nextPageToken`
//! paging, aggregated lists keyed by zone, 429 `RESOURCE_EXHAUSTED` and Compute's 403
//! `rateLimitExceeded` throttling, and malformed payloads.

#[path = "../../aws/tests/support/replay.rs"]
mod replay;

use std::time::Duration;

use gpucap_gcp::{AnomalyReason, CredentialsSource, GcpClients, GcpConfig, GcpError, RetryPolicy};
use gpucap_provider::PurchaseKind;
use replay::{Replay, Reply};
use rust_decimal::Decimal;

const JSON: &str = "application/json; charset=UTF-8";
const SKUS: &str = "/v1/services/6F81-5844-456A/skus";
const ACCELERATORS: &str = "/compute/v1/projects/gpucap-test/aggregated/acceleratorTypes";
const MACHINES: &str = "/compute/v1/projects/gpucap-test/aggregated/machineTypes";

fn fixture(name: &str) -> String {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures")
    .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config(server: &Replay) -> GcpConfig {
    GcpConfig {
        project: Some("gpucap-test".into()),
        billing_endpoint: Some(server.url()),
        compute_endpoint: Some(server.url()),
        credentials: CredentialsSource::Anonymous,
        retry: RetryPolicy {
            max_retries: 3, // four attempts in all
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        ..GcpConfig::default()
    }
}

fn healthy(server: &Replay) {
    server.on(
        "pageToken=skus-page-2",
        vec![Reply::new(200, JSON, fixture("skus-page2.json"))],
    );
    server.on(
        SKUS,
        vec![Reply::new(200, JSON, fixture("skus-page1.json"))],
    );
    server.on(
        "pageToken=mt-page-2",
        vec![Reply::new(
            200,
            JSON,
            fixture("machine-types-aggregated-page2.json"),
        )],
    );
    server.on(
        MACHINES,
        vec![Reply::new(
            200,
            JSON,
            fixture("machine-types-aggregated-page1.json"),
        )],
    );
    server.on(
        ACCELERATORS,
        vec![Reply::new(
            200,
            JSON,
            fixture("accelerator-types-aggregated.json"),
        )],
    );
}

fn exhausted() -> Reply {
    Reply::new(
        429,
        JSON,
        r#"{"error":{"code":429,"message":"Quota exceeded for quota metric 'Requests'.","status":"RESOURCE_EXHAUSTED"}}"#,
    )
}

/// The SkyPilot catalog extract in the workspace's `tests/data/catalog/` prices `a2-highgpu-1g`
/// in us-central1 as a host row plus an A100 row; the sum of the component SKUs must agree with
/// it.
fn skypilot_a2_highgpu_1g() -> Decimal {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("../../tests/data/catalog/gcp_vms_accelerators_subset.csv");
    assert!(
        path.is_file(),
        "test data file {} is missing; it is part of the repository",
        path.display()
    );
    let mut reader =
        csv::Reader::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    // InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice
    let price = |pred: &dyn Fn(&csv::StringRecord) -> bool| -> Decimal {
        rows.iter().find(|r| pred(r)).expect("catalog row")[8]
            .parse()
            .unwrap()
    };
    let host = price(&|r| &r[0] == "a2-highgpu-1g" && &r[7] == "us-central1-a");
    let gpu =
        price(&|r| r[0].is_empty() && &r[3] == "A100" && &r[4] == "1" && &r[7] == "us-central1-a");
    host + gpu
}

#[tokio::test]
async fn a_full_pass_sums_components_into_machine_offers() {
    let server = Replay::start().await;
    healthy(&server);
    let clients = GcpClients::connect(config(&server)).await.unwrap();
    let prices = gpucap_gcp::fetch_with(&clients).await;
    assert!(prices.failures.is_empty(), "{:?}", prices.failures);
    assert_eq!(server.count(SKUS), 2, "two pages of SKUs");
    assert_eq!(server.count(MACHINES), 2, "two pages of machine types");

    let a2 = |zone: &str, kind| {
        prices
            .offers
            .iter()
            .find(|o| {
                o.instance_type == "a2-highgpu-1g"
                    && o.zone.as_deref() == Some(zone)
                    && o.kind == kind
            })
            .unwrap_or_else(|| panic!("no {kind} a2-highgpu-1g in {zone}: {:#?}", prices.offers))
    };
    let od = a2("us-central1-a", PurchaseKind::OnDemand);
    // 12 × 0.031611 + 85 GiB × 0.004237 + 1 × 2.933908
    assert_eq!(od.price_per_instance_hour, "3.673385".parse().unwrap());
    assert!((od.price_per_instance_hour - skypilot_a2_highgpu_1g()).abs() < Decimal::new(1, 4));
    assert_eq!(
        (
            od.accelerator.name(),
            od.gpus_per_instance,
            od.region.as_str()
        ),
        ("a100", 1, "us-central1")
    );
    assert_eq!(
        a2("us-central1-b", PurchaseKind::OnDemand).price_per_instance_hour,
        od.price_per_instance_hour
    );
    // 12 × 0.01581 + 85 × 0.002117 + 1.4341
    assert_eq!(
        a2("us-central1-a", PurchaseKind::Spot).price_per_instance_hour,
        "1.803765".parse().unwrap()
    );
    let cud = a2("us-central1-a", PurchaseKind::Commitment);
    assert_eq!(cud.term_hours, Some(8760));
    // 12 × 0.019915 + 85 × 0.002669 + 1.848362
    assert_eq!(cud.price_per_instance_hour, "2.314207".parse().unwrap());

    let g2: Vec<_> = prices
        .offers
        .iter()
        .filter(|o| o.instance_type == "g2-standard-4")
        .collect();
    assert_eq!(g2.len(), 1, "on-demand in us-central1-a only: {g2:#?}");
    // 4 × 0.024988 + 16 × 0.002928 + 0.56004
    assert_eq!(g2[0].price_per_instance_hour, "0.706840".parse().unwrap());
    assert_eq!(g2[0].accelerator.name(), "l4");

    assert!(
        !prices
            .offers
            .iter()
            .any(|o| o.instance_type.starts_with("a3-")),
        "no A3 SKUs in the fixture, so no A3 offers"
    );
    assert!(
        !prices
            .offers
            .iter()
            .any(|o| o.instance_type == "a2-ultragpu-1g")
    );

    let reasons: Vec<String> = prices.anomalies.iter().map(|a| a.to_string()).collect();
    let has = |needle: &str| reasons.iter().any(|r| r.contains(needle));
    assert!(
        has("E2B1-4D2C-8B42") && has("not a positive amount"),
        "zero L4 price: {reasons:#?}"
    );
    assert!(
        has("E2B1-4D2C-8B43") && has("GiBy.mo"),
        "RAM priced per month: {reasons:#?}"
    );
    assert!(
        has("a2-ultragpu-1g in us-central1-a") && has("nvidia-a100-80gb"),
        "{reasons:#?}"
    );
    assert!(
        has("g2-standard-4 in us-central1-c"),
        "zone without the L4 listed: {reasons:#?}"
    );
    // The refused spot G2 RAM leaves no spot G2 price at all, which is absence, not a surprise.
    assert_eq!(prices.anomalies.len(), 4, "{reasons:#?}");
    assert!(
        !prices
            .anomalies
            .iter()
            .any(|a| matches!(a.reason, AnomalyReason::MissingComponent { .. }))
    );
}

#[tokio::test]
async fn throttling_is_retried_until_success() {
    let server = Replay::start().await;
    server.on(
        "pageToken=skus-page-2",
        vec![
            exhausted(),
            Reply::new(200, JSON, fixture("skus-page2.json")),
        ],
    );
    server.on(
        SKUS,
        vec![
            exhausted(),
            exhausted(),
            Reply::new(200, JSON, fixture("skus-page1.json")),
        ],
    );
    server.on(
        ACCELERATORS,
        vec![
            Reply::new(
                403,
                JSON,
                r#"{"error":{"code":403,"message":"Rate Limit Exceeded","errors":[{"message":"Rate Limit Exceeded","domain":"usageLimits","reason":"rateLimitExceeded"}]}}"#,
            ),
            Reply::new(200, JSON, fixture("accelerator-types-aggregated.json")),
        ],
    );
    let clients = GcpClients::connect(config(&server)).await.unwrap();
    let skus = clients.compute_skus().await.unwrap();
    assert_eq!(skus.len(), 17);
    assert_eq!(server.count(SKUS), 5, "3 tries for page 1, 2 for page 2");
    // int64 fields arrive as strings and are read exactly.
    let a100 = skus.iter().find(|s| s.sku_id == "039F-D0DA-4055").unwrap();
    assert_eq!(a100.tiers, vec![(0.0, 2, 933_908_000)]);
    let zones = clients.zone_accelerators().await.unwrap();
    assert_eq!(zones.len(), 4);
    assert_eq!(server.count(ACCELERATORS), 2);
}

#[tokio::test]
async fn persistent_throttling_gives_up_with_the_attempt_count() {
    let server = Replay::start().await;
    server.on(SKUS, vec![exhausted()]);
    let clients = GcpClients::connect(config(&server)).await.unwrap();
    let err = clients.compute_skus().await.unwrap_err();
    assert!(
        matches!(&err, GcpError::Throttled { attempts: 4, code, .. } if code == "RESOURCE_EXHAUSTED"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_failing_list_leaves_the_rest_and_says_why() {
    let server = Replay::start().await;
    server.on(
        ACCELERATORS,
        vec![Reply::new(
            403,
            JSON,
            r#"{"error":{"code":403,"message":"Compute Engine API has not been used in project gpucap-test","status":"PERMISSION_DENIED"}}"#,
        )],
    );
    healthy(&server);
    let clients = GcpClients::connect(config(&server)).await.unwrap();
    let prices = gpucap_gcp::fetch_with(&clients).await;
    assert_eq!(prices.failures.len(), 1, "{:?}", prices.failures);
    let failure = &prices.failures[0];
    assert_eq!(failure.what, "acceleratorTypes.aggregatedList");
    assert!(
        matches!(&failure.error, GcpError::Api { code, .. } if code == "PERMISSION_DENIED"),
        "{:?}",
        failure.error
    );
    assert!(failure.error.hint().is_some());
}

#[tokio::test]
async fn malformed_payloads_are_classified_errors_not_panics() {
    let server = Replay::start().await;
    server.on(
        SKUS,
        vec![Reply::new(200, JSON, r#"{"skus": "not a list"}"#)],
    );
    server.on(
        MACHINES,
        vec![Reply::new(502, "text/html", "<html>Bad Gateway</html>")],
    );
    let clients = GcpClients::connect(config(&server)).await.unwrap();
    let err = clients.compute_skus().await.unwrap_err();
    assert!(matches!(err, GcpError::Malformed { .. }), "{err:?}");
    let err = clients.accelerator_machine_types().await.unwrap_err();
    assert!(
        matches!(err, GcpError::Malformed { .. } | GcpError::Api { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_provider_interface_prices_each_region_from_one_fetch_of_the_lists() {
    use gpucap_provider::{CollectingReporter, Provider, Query, Readiness};
    let server = Replay::start().await;
    healthy(&server);
    let provider = gpucap_gcp::GcpProvider::new(config(&server));
    assert_eq!(provider.readiness().await, Readiness::Ready);
    let query = Query {
        regions: vec!["us-central1".into(), "us-east1".into()],
        ..Query::default()
    };
    let reporter = CollectingReporter::new();
    let central = provider
        .fetch(&query, "us-central1", &reporter)
        .await
        .unwrap();
    let east = provider.fetch(&query, "us-east1", &reporter).await.unwrap();
    assert_eq!(
        central.len(),
        7,
        "a2 in two zones × 3 kinds + g2 on-demand: {central:#?}"
    );
    assert!(
        east.is_empty(),
        "the fixture lists no us-east1 machine types"
    );
    assert_eq!(
        server.count(SKUS),
        2,
        "the catalog is read once for both regions"
    );
    assert!(!reporter.issues().is_empty());
}

#[tokio::test]
async fn no_project_skips_the_cloud_with_a_hint() {
    use gpucap_provider::{Provider, Readiness};
    let server = Replay::start().await;
    let provider = gpucap_gcp::GcpProvider::new(GcpConfig {
        project: None,
        ..config(&server)
    });
    match provider.readiness().await {
        Readiness::Skip { hint, .. } => assert!(hint.contains("GOOGLE_CLOUD_PROJECT"), "{hint}"),
        other => panic!("expected a skip, got {other:?}"),
    }
}
