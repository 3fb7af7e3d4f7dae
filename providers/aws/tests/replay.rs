//! The AWS provider through the real SDK against a local server replaying AWS's documented wire
//! formats: Price List `GetProducts` (AWS JSON 1.1, PriceList as JSON strings), and EC2 Query/XML
//! responses for the APIs moto does not implement (capacity block offerings, spot placement
//! scores), with paging, throttling and malformed payloads.

#[path = "support/replay.rs"]
mod replay;

use std::time::Duration;

use gpucap_aws::{
    AwsClients, AwsConfig, AwsError, CapacityBlockQuery, RetryPolicy, StaticCredentials,
};
use gpucap_provider::PurchaseKind;
use replay::{Replay, Reply};
use rust_decimal::Decimal;

const PRICING: &str = "AWSPriceListService.GetProducts";
const JSON: &str = "application/x-amz-json-1.1";
const XML: &str = "text/xml;charset=UTF-8";

fn fixture(name: &str) -> String {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures")
    .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config(server: &Replay, regions: &[&str]) -> AwsConfig {
    AwsConfig {
        regions: regions.iter().map(|r| r.to_string()).collect(),
        endpoint_url: Some(server.url()),
        capacity_blocks: vec![CapacityBlockQuery {
            instance_count: 1,
            duration_hours: 24,
        }],
        placement_target_capacity: Some(1),
        static_credentials: Some(StaticCredentials {
            access_key_id: "AKIDREPLAY".into(),
            secret_access_key: "secret".into(),
        }),
        retry: RetryPolicy {
            max_retries: 3, // four attempts in all
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        ..AwsConfig::default()
    }
}

fn throttled_pricing() -> Reply {
    Reply::new(
        400,
        JSON,
        r#"{"__type":"com.amazonaws.awspricing#ThrottlingException","Message":"Rate exceeded"}"#,
    )
}

/// Routes for one healthy region; region-specific needles come first when added by a test.
fn healthy(server: &Replay) {
    server.on(
        "Action=DescribeInstanceTypes",
        vec![Reply::new(200, XML, fixture("describe-instance-types.xml"))],
    );
    server.on(
        "spot-page-2",
        vec![Reply::new(
            200,
            XML,
            fixture("spot-price-history-page2.xml"),
        )],
    );
    server.on(
        "Action=DescribeSpotPriceHistory",
        vec![Reply::new(
            200,
            XML,
            fixture("spot-price-history-page1.xml"),
        )],
    );
    server.on(
        "Action=DescribeCapacityBlockOfferings",
        vec![Reply::new(
            200,
            XML,
            fixture("capacity-block-offerings.xml"),
        )],
    );
    server.on(
        "Action=GetSpotPlacementScores",
        vec![Reply::new(200, XML, fixture("spot-placement-scores.xml"))],
    );
    server.on(
        r#""NextToken":"page-2""#,
        vec![Reply::new(200, JSON, fixture("pricing-p5-page2.json"))],
    );
    server.on(
        r#""instanceType","Value":"p5.48xlarge""#,
        vec![Reply::new(200, JSON, fixture("pricing-p5-page1.json"))],
    );
    server.on(
        PRICING,
        vec![Reply::new(
            200,
            JSON,
            r#"{"FormatVersion":"aws_v1","PriceList":[]}"#,
        )],
    );
}

#[tokio::test]
async fn a_full_pass_prices_every_kind_and_reports_what_it_refused() {
    let server = Replay::start().await;
    healthy(&server);
    let clients = AwsClients::connect(config(&server, &["us-east-1"]))
        .await
        .unwrap();
    let prices = gpucap_aws::fetch_with(&clients).await;
    assert!(prices.failures.is_empty(), "{:?}", prices.failures);

    let of = |kind| {
        prices
            .offers
            .iter()
            .filter(move |o| o.kind == kind && o.instance_type == "p5.48xlarge")
    };
    let od: Vec<_> = of(PurchaseKind::OnDemand).collect();
    assert_eq!(
        od.len(),
        1,
        "the zero placeholder and the 4-GPU row are not offers"
    );
    assert_eq!(od[0].price_per_instance_hour, Decimal::new(5504, 2));
    assert_eq!(od[0].accelerator.name(), "h100");
    assert_eq!(
        (od[0].gpus_per_instance, od[0].gpu_memory_gb),
        (8, Some(80))
    );
    assert_eq!(od[0].effective_price_per_gpu_hour(), Decimal::new(688, 2));

    let ri: Vec<_> = of(PurchaseKind::Commitment).collect();
    assert_eq!(ri.len(), 3);
    let all_upfront_3yr = ri.iter().find(|o| o.term_hours == Some(26280)).unwrap();
    assert_eq!(all_upfront_3yr.upfront, Decimal::from(650000));
    assert_eq!(all_upfront_3yr.price_per_instance_hour, Decimal::ZERO);

    // Two pages of spot history: the latest event per zone wins.
    let mut spot: Vec<_> = of(PurchaseKind::Spot)
        .map(|o| (o.zone.clone().unwrap(), o.price_per_instance_hour))
        .collect();
    spot.sort();
    assert_eq!(
        spot,
        vec![
            ("us-east-1a".into(), "31.464".parse().unwrap()),
            ("us-east-1b".into(), "33.02".parse().unwrap())
        ]
    );

    let cb: Vec<_> = of(PurchaseKind::CapacityBlock).collect();
    assert_eq!(cb.len(), 1, "the zero-fee offering is refused");
    assert_eq!(cb[0].offering_id.as_deref(), Some("cb-0123456789abcdef0"));
    assert_eq!(
        cb[0].earliest_start.unwrap().to_rfc3339(),
        "2030-07-01T11:30:00+00:00"
    );
    // 758.88 / (1 instance × 24 h) / 8 GPUs
    assert_eq!(
        cb[0].effective_price_per_gpu_hour(),
        "3.9525".parse().unwrap()
    );

    // trn1 (Neuron devices) was recognised; only types that sell blocks were asked for them.
    assert_eq!(
        server.count("Action=DescribeCapacityBlockOfferings"),
        2,
        "p5 and trn1 sell capacity blocks"
    );
    assert!(
        !prices
            .offers
            .iter()
            .any(|o| o.instance_type == "g4ad.xlarge"),
        "Radeon is not in the catalog"
    );

    assert_eq!(prices.placement_scores.len(), 2);
    assert_eq!(prices.placement_scores[0].score, 7);

    let reasons: Vec<String> = prices.anomalies.iter().map(|a| a.to_string()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("GetProducts") && r.contains("`0.0000000000`")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("lists 4 GPUs but the instance type has 8")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("DescribeSpotPriceHistory") && r.contains("trn1.32xlarge")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("DescribeCapacityBlockOfferings") && r.contains("`0.00`")),
        "{reasons:#?}"
    );

    // The Price List request carried the documented filters.
    let req = server
        .requests()
        .into_iter()
        .find(|r| r.head.contains(PRICING))
        .unwrap();
    for f in [
        "regionCode",
        "operatingSystem",
        "Linux",
        "tenancy",
        "Shared",
        "preInstalledSw",
        "capacitystatus",
        "Used",
        "TERM_MATCH",
    ] {
        assert!(req.body.contains(f), "{f} missing from {}", req.body);
    }
}

#[tokio::test]
async fn throttling_is_retried_until_success() {
    let server = Replay::start().await;
    server.on(
        PRICING,
        vec![
            throttled_pricing(),
            throttled_pricing(),
            Reply::new(200, JSON, fixture("pricing-p5-page2.json")),
        ],
    );
    server.on(
        "Action=DescribeCapacityBlockOfferings",
        vec![
            Reply::new(503, XML, fixture("request-limit-exceeded.xml")),
            Reply::new(200, XML, fixture("capacity-block-offerings.xml")),
        ],
    );
    let clients = AwsClients::connect(config(&server, &["us-east-1"]))
        .await
        .unwrap();
    let products = clients.products("us-east-1", "p5.48xlarge").await.unwrap();
    assert_eq!(products.len(), 2);
    assert_eq!(server.count(PRICING), 3);
    let rows = clients
        .capacity_block_offerings("us-east-1", "p5.48xlarge", 1, 24)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(server.count("Action=DescribeCapacityBlockOfferings"), 2);
}

#[tokio::test]
async fn persistent_throttling_gives_up_with_the_attempt_count() {
    let server = Replay::start().await;
    server.on(PRICING, vec![throttled_pricing()]);
    let clients = AwsClients::connect(config(&server, &["us-east-1"]))
        .await
        .unwrap();
    let err = clients
        .products("us-east-1", "p5.48xlarge")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AwsError::Throttled { attempts: 4, code, .. } if code == "ThrottlingException"),
        "{err:?}"
    );
    assert_eq!(server.count(PRICING), 4);
}

#[tokio::test]
async fn one_failing_region_leaves_the_others_intact() {
    let server = Replay::start().await;
    // SigV4 puts the region in the credential scope, so the replay can fail one region only.
    server.on(
        "us-west-2/ec2/aws4_request",
        vec![Reply::new(403, XML, fixture("unauthorized.xml"))],
    );
    healthy(&server);
    let clients = AwsClients::connect(config(&server, &["us-east-1", "us-west-2"]))
        .await
        .unwrap();
    let prices = gpucap_aws::fetch_with(&clients).await;
    assert!(
        prices
            .offers
            .iter()
            .any(|o| o.region == "us-east-1" && o.kind == PurchaseKind::OnDemand)
    );
    assert!(!prices.offers.iter().any(|o| o.region == "us-west-2"));
    let failed: Vec<_> = prices
        .failures
        .iter()
        .filter(|f| f.region == "us-west-2")
        .collect();
    assert_eq!(failed.len(), 1, "{:?}", prices.failures);
    assert!(
        matches!(&failed[0].error, AwsError::Api { code, .. } if code == "UnauthorizedOperation")
    );
    assert!(failed[0].error.hint().is_some());
}

#[tokio::test]
async fn malformed_payloads_are_classified_errors_not_panics() {
    let server = Replay::start().await;
    server.on(
        "Action=DescribeCapacityBlockOfferings",
        vec![Reply::new(
            200,
            XML,
            "<DescribeCapacityBlockOfferingsResponse><capacityBlockOfferingSet><item>",
        )],
    );
    server.on(
        PRICING,
        vec![Reply::new(
            200,
            JSON,
            r#"{"FormatVersion":"aws_v1","PriceList":"not a list"}"#,
        )],
    );
    server.on(
        "Action=GetSpotPlacementScores",
        vec![Reply::new(500, "text/html", "<html>gateway</html>")],
    );
    let clients = AwsClients::connect(config(&server, &["us-east-1"]))
        .await
        .unwrap();
    // The SDK's XML reader accepts a truncated document and yields an empty item; the
    // normaliser refuses it instead of pricing it.
    let rows = clients
        .capacity_block_offerings("us-east-1", "p5.48xlarge", 1, 24)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let refused = gpucap_aws::capacity_blocks::parse(&rows[0]).unwrap_err();
    assert!(
        matches!(refused, gpucap_aws::AnomalyReason::Malformed { .. }),
        "{refused:?}"
    );
    let err = clients
        .products("us-east-1", "p5.48xlarge")
        .await
        .unwrap_err();
    assert!(matches!(err, AwsError::Malformed { .. }), "{err:?}");
    let err = clients
        .spot_placement_scores(&["p5.48xlarge".into()], &["us-east-1".into()], 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AwsError::Malformed { .. } | AwsError::Api { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_provider_interface_fetches_one_region_and_reports_issues() {
    use gpucap_provider::{Accelerator, CollectingReporter, Problem, Provider, Query, Readiness};
    let server = Replay::start().await;
    healthy(&server);
    let provider = gpucap_aws::AwsProvider::new(config(&server, &["us-east-1"]));
    assert_eq!(provider.readiness().await, Readiness::Ready);
    let query = Query {
        accelerators: vec![Accelerator::parse("h100").unwrap()],
        regions: vec!["us-east-1".into(), "eastus".into()],
        kinds: vec![PurchaseKind::OnDemand, PurchaseKind::Spot],
    };
    assert_eq!(provider.regions(&query), vec!["us-east-1"]);
    let reporter = CollectingReporter::new();
    let offers = provider
        .fetch(&query, "us-east-1", &reporter)
        .await
        .unwrap();
    assert_eq!(
        offers.len(),
        3,
        "one on-demand and two spot p5 offers: {offers:#?}"
    );
    assert!(offers.iter().all(|o| query.wants(o)));
    assert_eq!(
        server.count("Action=DescribeCapacityBlockOfferings"),
        0,
        "capacity blocks were not asked for"
    );
    let issues = reporter.issues();
    assert!(
        issues.iter().any(|i| i.problem == Problem::ZeroPrice),
        "{issues:#?}"
    );
    assert!(
        issues
            .iter()
            .any(|i| matches!(i.problem, Problem::GpuCountMismatch { expected: 8, .. })),
        "{issues:#?}"
    );

    // A region that fails as a whole is an error of the shared class, not a panic.
    server.on_first(
        "eu-west-1/ec2/aws4_request",
        vec![Reply::new(503, XML, fixture("request-limit-exceeded.xml"))],
    );
    let err = provider
        .fetch(&query, "eu-west-1", &reporter)
        .await
        .unwrap_err();
    assert_eq!(err.kind, gpucap_provider::ErrorKind::Throttled);
    assert_eq!(err.region.as_deref(), Some("eu-west-1"));
}

/// Runs in a child process with an environment that holds no AWS credentials (edition 2024
/// forbids changing the environment of a running test process).
#[tokio::test]
async fn missing_credentials_skip_the_cloud_with_a_hint() {
    if std::env::var_os("GPUCAP_TEST_NO_AWS_CREDENTIALS").is_some() {
        let provider = gpucap_aws::AwsProvider::new(AwsConfig::default());
        match gpucap_provider::Provider::readiness(&provider).await {
            gpucap_provider::Readiness::Skip { hint, .. } => {
                assert!(hint.contains("AWS_PROFILE"), "{hint}")
            }
            other => panic!("expected a skip, got {other:?}"),
        }
        return;
    }
    let empty = std::env::temp_dir().join("gpucap-no-aws-config");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "missing_credentials_skip_the_cloud_with_a_hint",
            "--quiet",
        ])
        .env("GPUCAP_TEST_NO_AWS_CREDENTIALS", "1")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_WEB_IDENTITY_TOKEN_FILE")
        .env_remove("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        .env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        .env("AWS_CONFIG_FILE", empty.join("config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", empty.join("credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .status()
        .unwrap();
    assert!(status.success(), "the child test failed");
}
