//! The AWS provider through the real SDK against moto's server on 127.0.0.1, for the EC2 APIs
//! moto implements: `DescribeInstanceTypes` (moto ships AWS's real instance type data) and
//! `DescribeSpotPriceHistory` (moto lists the real zones that offer each type, but its prices
//! are synthetic: `0.00001` at a fixed 2006 timestamp, which gpucap must refuse as a
//! placeholder rather than use).

// The shared helper uses `File::lock` (Rust 1.89), newer than the workspace MSRV.
#[allow(clippy::incompatible_msrv)]
#[path = "../../../tests/support/python.rs"]
mod python;
#[path = "support/replay.rs"]
mod replay;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpucap_aws::{AnomalyReason, AwsClients, AwsConfig, RetryPolicy, StaticCredentials};
use gpucap_provider::PurchaseKind;

/// moto's server on a free port, killed on drop.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(python::bin_dir().join("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let moto = Moto {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not listen on {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }
}

fn config(moto: &Moto) -> AwsConfig {
    AwsConfig {
        regions: vec!["us-east-1".into()],
        instance_types: vec![
            "p4d.24xlarge".into(),
            "p5.48xlarge".into(),
            "trn1.32xlarge".into(),
            "m5.large".into(),
        ],
        endpoint_url: Some(moto.url.clone()),
        capacity_blocks: Vec::new(),
        placement_target_capacity: None,
        static_credentials: Some(StaticCredentials {
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
        }),
        retry: RetryPolicy {
            max_retries: 1, // two attempts in all
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        ..AwsConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn moto_instance_types_and_spot_history() {
    let moto = Moto::start();
    let clients = AwsClients::connect(config(&moto)).await.unwrap();

    // Instance types: moto's data is AWS's own, so the GPU facts are real.
    let types = clients
        .accelerated_instance_types("us-east-1")
        .await
        .unwrap();
    let names: Vec<&str> = types.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.contains(&"m5.large"), "{names:?}");
    let spec = |name: &str| {
        let (_, devices) = types.iter().find(|(n, _)| n == name).unwrap();
        gpucap_aws::instance_types::gpu_spec(devices)
            .unwrap()
            .unwrap()
    };
    assert_eq!(
        (
            spec("p5.48xlarge").accelerator.name(),
            spec("p5.48xlarge").count
        ),
        ("h100", 8)
    );
    assert_eq!(
        (
            spec("p4d.24xlarge").accelerator.name(),
            spec("p4d.24xlarge").memory_gb
        ),
        ("a100", Some(40))
    );
    assert_eq!(
        (
            spec("trn1.32xlarge").accelerator.name(),
            spec("trn1.32xlarge").count
        ),
        ("trainium", 16)
    );

    // Spot history: real zones, synthetic prices.
    let points = clients
        .spot_price_history("us-east-1", &["p4d.24xlarge".into()])
        .await
        .unwrap();
    let mut zones: Vec<&str> = points
        .iter()
        .map(|p| p.availability_zone.as_str())
        .collect();
    zones.sort();
    assert_eq!(
        zones,
        ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
    );
    assert!(
        points
            .iter()
            .all(|p| p.spot_price == "0.00001" && p.instance_type == "p4d.24xlarge")
    );

    // A whole pass (Price List pointed at a replay server with no products) refuses every
    // synthetic spot price as a placeholder instead of offering GPUs at $0.00001 an hour.
    let pricing = replay::Replay::start().await;
    pricing.on(
        "AWSPriceListService.GetProducts",
        vec![replay::Reply::new(
            200,
            "application/x-amz-json-1.1",
            r#"{"FormatVersion":"aws_v1","PriceList":[]}"#,
        )],
    );
    let clients = AwsClients::connect(AwsConfig {
        pricing_endpoint_url: Some(pricing.url()),
        ..config(&moto)
    })
    .await
    .unwrap();
    let prices = gpucap_aws::fetch_with(&clients).await;
    assert!(prices.failures.is_empty(), "{:?}", prices.failures);
    assert!(
        !prices.offers.iter().any(|o| o.kind == PurchaseKind::Spot),
        "{:?}",
        prices.offers
    );
    let placeholders = prices
        .anomalies
        .iter()
        .filter(|a| {
            a.operation == "DescribeSpotPriceHistory"
                && matches!(a.reason, AnomalyReason::BadPrice { .. })
        })
        .count();
    assert!(
        placeholders >= 4 + 6,
        "one refusal per (zone, type): {:#?}",
        prices.anomalies
    );
    assert_eq!(
        pricing.count("AWSPriceListService.GetProducts"),
        3,
        "one GetProducts per GPU type"
    );
}
