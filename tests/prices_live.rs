//! `gpucap prices` on the live path, against a local server replaying the Azure Retail Prices
//! API (127.0.0.1 only): live offers are printed and cached, and a second run without the
//! server is served from the cache.

#[path = "support/canned_http.rs"]
mod canned_http;

use assert_cmd::Command;
use serde_json::Value;

/// Answers `responses.len()` requests, one response each, then stops listening.
fn serve(responses: Vec<(u16, String)>) -> String {
    canned_http::in_turn(responses, "X") + "/api/retail/prices"
}

const PAGE: &str = r#"{"BillingCurrency":"USD","Items":[
 {"currencyCode":"USD","retailPrice":98.32,"unitPrice":98.32,"armRegionName":"eastus","meterName":"ND96isr H100 v5",
  "skuName":"ND96isr H100 v5","productName":"Virtual Machines NDsr H100 v5 Series","type":"Consumption",
  "unitOfMeasure":"1 Hour","armSkuName":"Standard_ND96isr_H100_v5"},
 {"currencyCode":"USD","retailPrice":0,"unitPrice":0,"armRegionName":"eastus","meterName":"ND96isr H100 v5 Spot",
  "skuName":"ND96isr H100 v5 Spot","productName":"Virtual Machines NDsr H100 v5 Series","type":"Consumption",
  "unitOfMeasure":"1 Hour","armSkuName":"Standard_ND96isr_H100_v5"}],"NextPageLink":null,"Count":2}"#;

fn run(base: &str, cache: &std::path::Path) -> (Vec<Value>, String) {
    let out = Command::cargo_bin("gpucap")
        .expect("binary")
        .env("GPUCAP_AZURE_PRICES_URL", base)
        .env("GPUCAP_CACHE_DIR", cache)
        .args([
            "prices", "--cloud", "azure", "--region", "eastus", "-a", "h100", "--format", "json",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_slice(&out.stdout).expect("json"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn live_quotes_are_used_reported_and_cached() {
    let cache = tempfile::tempdir().expect("tempdir");
    let base = serve(vec![(429, "{}".into()), (200, PAGE.into())]);
    let (offers, stderr) = run(&base, cache.path());
    assert_eq!(offers.len(), 1, "{offers:?}");
    assert_eq!(offers[0]["source"], "live");
    assert_eq!(offers[0]["price_per_instance_hour"], "98.32");
    assert!(
        stderr.contains("price is zero"),
        "the zero spot price is reported: {stderr}"
    );

    // The server is gone now; the fresh cache answers.
    let (offers, _) = run(&base, cache.path());
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0]["source"], "cache");
}
