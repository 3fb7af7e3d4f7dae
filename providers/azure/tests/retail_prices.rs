//! The Azure provider against a local HTTP server that replays Retail Prices API responses in
//! the documented wire format (api-formats §5): pagination, throttling, malformed payloads.

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use gpucap_azure::AzureProvider;
use gpucap_provider::{
    Accelerator, CollectingReporter, ErrorKind, Problem, Provider, PurchaseKind, Query,
    RetryPolicy, SourceKind,
};
use rust_decimal::Decimal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A scripted HTTP/1.1 server on 127.0.0.1: answers the n-th request with the n-th response
/// (`{base}` in a body becomes the server's URL) and records each request target.
struct Replay {
    base: String,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn replay(responses: Vec<(u16, String)>) -> Replay {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!(
        "http://{}/api/retail/prices",
        listener.local_addr().expect("addr")
    );
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (seen, url) = (requests.clone(), base.clone());
    tokio::spawn(async move {
        for (status, body) in responses {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let target = String::from_utf8_lossy(&head)
                .split(' ')
                .nth(1)
                .unwrap_or_default()
                .to_string();
            seen.lock().expect("lock").push(target);
            let body = body.replace("{base}", &url);
            let reason = if status == 200 { "OK" } else { "Error" };
            let response = format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    Replay { base, requests }
}

fn item(sku: &str, meter: &str, kind: &str, price: &str, extra: &str) -> String {
    format!(
        r#"{{"currencyCode":"USD","tierMinimumUnits":0.0,"retailPrice":{price},"unitPrice":{price},
        "armRegionName":"eastus","location":"US East","effectiveStartDate":"2024-05-01T00:00:00Z",
        "meterId":"00000000-0000-0000-0000-00000000000{n}","meterName":"{meter}","productId":"DZH318Z0XXXX",
        "skuId":"DZH318Z0XXXX/00AB","availabilityId":null,"productName":"Virtual Machines NDsr H100 v5 Series",
        "skuName":"{meter}","serviceName":"Virtual Machines","serviceId":"DZH313Z7MMC8","serviceFamily":"Compute",
        "unitOfMeasure":"1 Hour","type":"{kind}","isPrimaryMeterRegion":true,"armSkuName":"{sku}"{extra}}}"#,
        n = meter.len() % 10
    )
}

fn page(items: &[String], next: Option<&str>) -> String {
    let next = next.map_or("null".to_string(), |n| format!("\"{n}\""));
    format!(
        r#"{{"BillingCurrency":"USD","CustomerEntityId":"Default","CustomerEntityType":"Retail","Items":[{}],"NextPageLink":{next},"Count":{}}}"#,
        items.join(","),
        items.len()
    )
}

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).expect("decimal")
}

fn provider(base: &str) -> AzureProvider {
    AzureProvider::new()
        .with_base_url(base)
        .with_retry(RetryPolicy::fast(4))
}

#[tokio::test]
async fn follows_next_page_link_to_the_last_page() {
    let p1 = page(
        &[item(
            "Standard_ND96isr_H100_v5",
            "ND96isr H100 v5",
            "Consumption",
            "98.32",
            "",
        )],
        Some("{base}?api-version=2023-01-01-preview&$skip=1000"),
    );
    let p2 = page(
        &[item(
            "Standard_ND96isr_H100_v5",
            "ND96isr H100 v5 Spot",
            "Consumption",
            "39.33",
            "",
        )],
        Some("{base}?api-version=2023-01-01-preview&$skip=2000"),
    );
    let p3 = page(
        &[item(
            "Standard_ND96isr_H100_v5",
            "ND96isr H100 v5",
            "Reservation",
            "578160",
            r#","reservationTerm":"3 Years""#,
        )],
        None,
    );
    let server = replay(vec![(200, p1), (200, p2), (200, p3)]).await;
    let reporter = CollectingReporter::new();
    let offers = provider(&server.base)
        .fetch(&Query::default(), "eastus", &reporter)
        .await
        .expect("three pages");

    let requests = server.requests.lock().expect("lock").clone();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[0].contains("armRegionName+eq+%27eastus%27"),
        "{}",
        requests[0]
    );
    assert!(requests[1].ends_with("$skip=1000"), "{}", requests[1]);
    assert!(requests[2].ends_with("$skip=2000"), "{}", requests[2]);

    let kinds: Vec<PurchaseKind> = offers.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        vec![
            PurchaseKind::OnDemand,
            PurchaseKind::Spot,
            PurchaseKind::Reservation
        ]
    );
    // 578160 USD for 3 years = 22.0 USD per hour
    assert_eq!(offers[2].price_per_instance_hour, d("22"));
    assert_eq!(offers[2].term_hours, Some(26280));
    assert_eq!(offers[0].effective_price_per_gpu_hour(), d("12.29"));
    assert!(
        offers
            .iter()
            .all(|o| o.source.kind == SourceKind::Live && o.source.origin.contains("127.0.0.1"))
    );
    assert!(reporter.issues().is_empty());
}

#[tokio::test]
async fn http_429_is_retried_then_succeeds() {
    let ok = page(
        &[item(
            "Standard_NC24ads_A100_v4",
            "NC24ads A100 v4",
            "Consumption",
            "3.673",
            "",
        )],
        None,
    );
    let throttled =
        r#"{"error":{"code":"TooManyRequests","message":"Rate limit exceeded"}}"#.to_string();
    let server = replay(vec![(429, throttled.clone()), (429, throttled), (200, ok)]).await;
    let query = Query {
        accelerators: vec![Accelerator::parse("a100-80gb").expect("acc")],
        ..Default::default()
    };
    let offers = provider(&server.base)
        .fetch(&query, "eastus", &CollectingReporter::new())
        .await
        .expect("third try");
    assert_eq!(server.requests.lock().expect("lock").len(), 3);
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].price_per_instance_hour, d("3.673"));
    assert_eq!(offers[0].accelerator.name(), "a100-80gb");
}

#[tokio::test]
async fn throttling_that_never_ends_fails_as_throttled() {
    let throttled = (429, "{}".to_string());
    let server = replay(vec![throttled.clone(); 5]).await;
    let err = provider(&server.base)
        .fetch(&Query::default(), "eastus", &CollectingReporter::new())
        .await
        .expect_err("gives up");
    assert_eq!(err.kind, ErrorKind::Throttled);
    assert_eq!(err.region.as_deref(), Some("eastus"));
    assert_eq!(server.requests.lock().expect("lock").len(), 5);
}

#[tokio::test]
async fn a_malformed_page_is_a_malformed_error_naming_the_page() {
    let p1 = page(
        &[item(
            "Standard_ND96isr_H100_v5",
            "ND96isr H100 v5",
            "Consumption",
            "98.32",
            "",
        )],
        Some("{base}?$skip=1000"),
    );
    let broken = r#"{"BillingCurrency":"USD","Items":[{"retailPrice":"#.to_string();
    let server = replay(vec![(200, p1), (200, broken)]).await;
    let err = provider(&server.base)
        .fetch(&Query::default(), "eastus", &CollectingReporter::new())
        .await
        .expect_err("malformed");
    assert_eq!(err.kind, ErrorKind::Malformed);
    assert!(err.to_string().contains("page 2"), "{err}");
}

#[tokio::test]
async fn zero_and_placeholder_prices_are_reported_not_used() {
    let p = page(
        &[
            item(
                "Standard_ND96isr_H100_v5",
                "ND96isr H100 v5",
                "Consumption",
                "0.0",
                "",
            ),
            item(
                "Standard_ND96isr_H100_v5",
                "ND96isr H100 v5 Spot",
                "Consumption",
                "-1",
                "",
            ),
            item(
                "Standard_NC40ads_H100_v5",
                "NC40ads H100 v5",
                "Consumption",
                "6.98",
                "",
            ),
        ],
        None,
    );
    let server = replay(vec![(200, p)]).await;
    let reporter = CollectingReporter::new();
    let offers = provider(&server.base)
        .fetch(&Query::default(), "eastus", &reporter)
        .await
        .expect("page");
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].instance_type, "Standard_NC40ads_H100_v5");
    let issues = reporter.issues();
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert_eq!(issues[0].problem, Problem::ZeroPrice);
    assert!(matches!(
        issues[1].problem,
        Problem::PlaceholderPrice { .. }
    ));
    assert!(
        issues[0]
            .to_string()
            .starts_with("azure eastus Standard_ND96isr_H100_v5"),
        "{}",
        issues[0]
    );
}

#[tokio::test]
async fn auth_and_not_found_are_classified_and_not_retried() {
    let server = replay(vec![(404, "not here".into())]).await;
    let err = provider(&server.base)
        .fetch(&Query::default(), "eastus", &CollectingReporter::new())
        .await
        .expect_err("404");
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert_eq!(server.requests.lock().expect("lock").len(), 1);
}
