//! Reading existing capacity from `terraform show -json` output: resources at the root and in
//! nested module calls (as gpucap's generated root modules create them), every capacity type
//! gpucap buys, and errors that name the file and field.

use std::path::{Path, PathBuf};

use chrono::{TimeZone, Utc};
use gpucap::planner::ExistingCapacity;
use gpucap::state::terraform;
use gpucap_provider::{Cloud, PurchaseKind};

fn fixture() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures/terraform/show.json")
}

fn find<'a>(found: &'a [ExistingCapacity], id: &str) -> &'a ExistingCapacity {
    found
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("{id} not found in {found:#?}"))
}

#[test]
fn counts_reservations_blocks_and_commitments_in_every_module() {
    let found = terraform::read(&fixture()).expect("read the state");
    assert_eq!(found.len(), 6, "{found:#?}");
    assert!(
        found
            .iter()
            .all(|c| c.source.starts_with("terraform-state:"))
    );

    let handmade = find(&found, "cr-0aaaabbbbccccdddd");
    assert_eq!(
        (
            handmade.kind,
            handmade.cloud,
            handmade.region.as_str(),
            handmade.instances
        ),
        (PurchaseKind::Reservation, Cloud::Aws, "us-east-1", 1)
    );
    assert_eq!(handmade.end, None, "an unlimited reservation has no end");

    let reserved = find(&found, "cr-0123456789abcdef0");
    assert_eq!(reserved.zone.as_deref(), Some("us-east-1a"));
    assert_eq!(
        reserved.end,
        Some(Utc.with_ymd_and_hms(2027, 2, 15, 0, 0, 0).unwrap())
    );

    let block = find(&found, "cr-0fedcba9876543210");
    assert_eq!(block.kind, PurchaseKind::CapacityBlock);
    assert_eq!(
        (block.instance_type.as_str(), block.instances),
        ("p5.48xlarge", 8)
    );
    assert_eq!(
        block.start,
        Some(Utc.with_ymd_and_hms(2027, 1, 18, 11, 30, 0).unwrap())
    );

    let gcp = find(&found, "reserve-h100");
    assert_eq!(
        (
            gcp.cloud,
            gcp.region.as_str(),
            gcp.zone.as_deref(),
            gcp.instance_type.as_str(),
            gcp.instances
        ),
        (
            Cloud::Gcp,
            "us-central1",
            Some("us-central1-a"),
            "a3-highgpu-8g",
            4
        )
    );

    let commit = find(&found, "commit-h100");
    assert_eq!(commit.kind, PurchaseKind::Commitment);
    assert_eq!(
        (
            commit.region.as_str(),
            commit.instance_type.as_str(),
            commit.instances
        ),
        ("us-central1", "a3-highgpu-8g", 4)
    );
    assert_eq!(
        commit.start,
        Some(Utc.with_ymd_and_hms(2027, 1, 4, 8, 0, 0).unwrap())
    );

    let azure = found
        .iter()
        .find(|c| c.cloud == Cloud::Azure)
        .expect("azure");
    assert_eq!(
        (
            azure.region.as_str(),
            azure.zone.as_deref(),
            azure.instance_type.as_str(),
            azure.instances
        ),
        ("eastus", Some("1"), "Standard_ND96asr_v4", 2)
    );
}

#[test]
fn an_empty_state_has_no_capacity() {
    let found =
        terraform::parse(r#"{"format_version": "1.0"}"#, Path::new("empty.json")).expect("parse");
    assert!(found.is_empty());
}

#[test]
fn bad_state_names_the_file_and_field() {
    let text = std::fs::read_to_string(fixture()).expect("read");
    let bad = text.replacen("\"instance_count\": 2", "\"instance_count\": \"two\"", 1);
    let err = terraform::parse(&bad, Path::new("state.json")).expect_err("bad count");
    let message = err.to_string();
    assert!(message.starts_with("state.json: "), "{message}");
    assert!(
        message.contains("values.root_module.child_modules[0].resources[0].values.instance_count"),
        "{message}"
    );

    let err = terraform::parse(
        "{\"version\": 4, \"resources\": []}",
        Path::new("raw.tfstate"),
    )
    .expect_err("raw state");
    assert!(
        err.hint
            .as_deref()
            .unwrap_or_default()
            .contains("terraform show -json"),
        "{err:?}"
    );

    let err =
        terraform::parse("{\n  \"format_version\": ", Path::new("cut.json")).expect_err("cut");
    assert!(err.to_string().starts_with("cut.json:"), "{err}");
}

#[test]
fn a_block_that_ends_before_it_starts_is_not_capacity() {
    let text = std::fs::read_to_string(fixture()).expect("read");
    let bad = text.replacen(
        "\"end_date\": \"2027-01-25T11:30:00Z\"",
        "\"end_date\": \"2027-01-11T11:30:00Z\"",
        1,
    );
    assert_ne!(bad, text);
    let err = terraform::parse(&bad, Path::new("state.json")).expect_err("ends before it starts");
    let message = err.to_string();
    assert!(message.starts_with("state.json: "), "{message}");
    assert!(message.contains(".values.end_date`"), "{message}");
    assert!(
        message.contains("`2027-01-11T11:30:00Z` is not after the start `2027-01-18T11:30:00Z`"),
        "{message}"
    );
    assert!(err.hint.is_some(), "{err:?}");
}
