//! `gpucap prices` as a user runs it, offline: on the built-in snapshot and on the SkyPilot
//! catalog extracts in `tests/data/catalog/` (no test reaches the internet).

#[path = "support/data.rs"]
mod data;

use std::path::PathBuf;
use std::str::FromStr;

use assert_cmd::Command;
use rust_decimal::Decimal;
use serde_json::Value;

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("binary");
    // Never touch the user's cache, never use a provider endpoint from the environment.
    cmd.env(
        "GPUCAP_CACHE_DIR",
        std::env::temp_dir().join("gpucap-prices-test-cache"),
    );
    cmd.env_remove("GPUCAP_AZURE_PRICES_URL");
    cmd
}

fn catalog(name: &str) -> PathBuf {
    data::file(&format!("catalog/{name}"))
}

fn json(cmd: &mut Command) -> Vec<Value> {
    let out = cmd.arg("--format").arg("json").output().expect("runs");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("a JSON array of offers")
}

fn dec(v: &Value) -> Decimal {
    Decimal::from_str(v.as_str().expect("decimal as string")).expect("decimal")
}

#[test]
fn offline_snapshot_lists_h100_offers_cheapest_first_with_provenance() {
    let offers = json(gpucap().args(["prices", "--offline", "--accelerator", "h100"]));
    assert!(offers.len() >= 5, "{offers:?}");
    for field in [
        "cloud",
        "region",
        "zone",
        "instance_type",
        "accelerator",
        "gpus_per_instance",
        "kind",
        "price_per_instance_hour",
        "upfront",
        "term_hours",
        "source",
        "fetched_at",
    ] {
        assert!(
            offers.iter().all(|o| o.get(field).is_some()),
            "missing {field}"
        );
    }
    assert!(
        offers
            .iter()
            .all(|o| o["accelerator"] == "h100" && o["source"] == "snapshot")
    );
    let per_gpu: Vec<Decimal> = offers
        .iter()
        .map(|o| dec(&o["price_per_gpu_hour"]))
        .collect();
    assert!(
        per_gpu.windows(2).all(|w| w[0] <= w[1]),
        "not sorted: {per_gpu:?}"
    );
    let p5 = offers
        .iter()
        .find(|o| o["instance_type"] == "p5.48xlarge" && o["kind"] == "on-demand")
        .expect("p5 on-demand in the snapshot");
    assert_eq!(
        dec(&p5["price_per_instance_hour"]),
        Decimal::from_str("55.04").expect("d")
    );
    assert_eq!(p5["gpus_per_instance"], 8);
}

#[test]
fn filters_by_cloud_region_and_kind() {
    let offers = json(gpucap().args([
        "prices",
        "--offline",
        "--cloud",
        "aws",
        "--kind",
        "capacity-block",
        "--region",
        "us-east-2",
    ]));
    assert!(!offers.is_empty());
    assert!(offers.iter().all(|o| o["cloud"] == "aws"
        && o["kind"] == "capacity-block"
        && o["region"] == "us-east-2"));
    assert!(offers.iter().any(|o| o["accelerator"] == "h200"));
}

#[test]
fn the_table_shows_source_and_age_per_figure() {
    let out = gpucap()
        .args(["prices", "--offline", "-a", "a100-80gb"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let header = text.lines().nth(1).expect("header");
    for col in [
        "cloud",
        "region",
        "instance",
        "on-demand",
        "spot",
        "capacity block",
        "1-year",
        "3-year",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let row = text
        .lines()
        .find(|l| l.contains("Standard_NC24ads_A100_v4"))
        .expect("azure A100 row");
    assert!(row.contains("3.673 snap "), "{row}");
}

#[test]
fn imported_catalogs_keep_the_prices_of_their_rows() {
    let mut cmd = gpucap();
    cmd.arg("prices");
    for f in [
        "aws_vms_accelerators_subset.csv",
        "gcp_vms_accelerators_subset.csv",
        "azure_vms_accelerators.csv",
    ] {
        cmd.arg("--import").arg(catalog(f));
    }
    let out = cmd.args(["--format", "json"]).output().expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offers: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let find = |instance: &str, region: &str, zone: Option<&str>, kind: &str| {
        offers
            .iter()
            .find(|o| {
                o["instance_type"] == instance
                    && o["region"] == region
                    && o["kind"] == kind
                    && zone.is_none_or(|z| o["zone"] == z)
            })
            .map(|o| dec(&o["price_per_instance_hour"]))
    };
    let d = |s: &str| Some(Decimal::from_str(s).expect("d"));
    // AWS: the row's own price (p5.48xlarge, ap-northeast-1 apne1-az1: 68.8 / 68.800000).
    assert_eq!(
        find(
            "p5.48xlarge",
            "ap-northeast-1",
            Some("apne1-az1"),
            "on-demand"
        ),
        d("68.8")
    );
    // GCP is additive: a2-highgpu-1g us-central1-a = host 0.73948 + A100 x1 2.93391.
    assert_eq!(
        find(
            "a2-highgpu-1g",
            "us-central1",
            Some("us-central1-a"),
            "on-demand"
        ),
        d("3.67339")
    );
    assert_eq!(
        find(
            "a2-highgpu-1g",
            "us-central1",
            Some("us-central1-a"),
            "spot"
        ),
        d("1.80385")
    );
    // Azure ND96isr_H100_v5 is listed with 12 GPUs; it has 8, and the correction is reported.
    let nd = offers
        .iter()
        .find(|o| {
            o["instance_type"] == "Standard_ND96isr_H100_v5"
                && o["region"] == "eastus"
                && o["kind"] == "on-demand"
        })
        .expect("ND H100 eastus");
    assert_eq!(nd["gpus_per_instance"], 8);
    assert_eq!(
        dec(&nd["price_per_instance_hour"]),
        Decimal::from_str("98.32").expect("d")
    );
    assert!(
        stderr.contains("listed with 12 GPUs but the instance type has 8"),
        "{stderr}"
    );
    // The 700.0 sentinel is reported and never used.
    assert!(stderr.contains("700.0 is a placeholder"), "{stderr}");
    assert!(
        offers
            .iter()
            .all(|o| dec(&o["price_per_instance_hour"]) != Decimal::from(700))
    );
    // p5e has no on-demand price in the catalog: no on-demand offer is made up, while its rows'
    // spot prices are kept. (us-east-2: the catalog has no p5e rows in us-east-1.)
    assert_eq!(find("p5e.48xlarge", "us-east-2", None, "on-demand"), None);
    assert_eq!(
        find("p5e.48xlarge", "us-east-2", Some("use2-az3"), "spot"),
        d("18.735900")
    );
    assert!(offers.iter().all(|o| o["source"] == "import"));
}

#[test]
fn bad_input_names_file_line_and_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("vms.csv");
    std::fs::write(
        &bad,
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n\
         p5.48xlarge,H100,8.0,192.0,2048.0,x,free,,us-east-1,use1-az4,x86_64\n",
    )
    .expect("write");
    let out = gpucap()
        .arg("prices")
        .arg("--import")
        .arg(&bad)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vms.csv:2"), "{stderr}");
    assert!(
        stderr.contains("`Price` `free` is not a number"),
        "{stderr}"
    );

    let out = gpucap()
        .args(["prices", "--offline", "-a", "h10"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean `h100`?"));
}

#[test]
fn the_offline_table_shows_every_kind_with_its_source_date_and_spot_spread() {
    let out = gpucap()
        .args([
            "prices",
            "--offline",
            "--region",
            "us-east-1",
            "--region",
            "us-central1",
        ])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let row = |instance: &str| {
        text.lines()
            .find(|l| l.contains(&format!(" {instance} ")))
            .unwrap_or_else(|| panic!("no {instance} row in\n{text}"))
    };
    // p5 in us-east-1: on-demand, spot with the zones' range, and a capacity block.
    let p5 = row("p5.48xlarge");
    let cells: Vec<&str> = p5.split(" snap ").collect();
    assert_eq!(cells.len(), 4, "on-demand, spot, capacity block: {p5}");
    assert!(p5.contains("–"), "spot shows its zones' range: {p5}");
    // GCP A3: 1- and 3-year commitments too.
    let a3 = row("a3-highgpu-8g");
    assert_eq!(
        a3.matches(" snap ").count(),
        4,
        "on-demand, spot, 1y, 3y: {a3}"
    );
    for note in [
        "spot, indicative, as of ",
        "on-demand, as of ",
        "capacity-block, as of 2024-12-01: https://aws.amazon.com/ec2/capacityblocks/pricing/",
        "commitment 1y, as of ",
        "commitment 3y, as of ",
    ] {
        assert!(text.contains(note), "no note `{note}` in\n{text}");
    }
    // JSON carries the same: spot is indicative, with its spread.
    let offers = json(gpucap().args([
        "prices",
        "--offline",
        "--region",
        "us-east-1",
        "--kind",
        "spot",
        "-a",
        "h100",
    ]));
    let spot = offers
        .iter()
        .find(|o| o["instance_type"] == "p5.48xlarge")
        .expect("p5 spot");
    assert_eq!(spot["indicative"], true);
    assert!(dec(&spot["zone_min"]) <= dec(&spot["price_per_instance_hour"]));
    assert!(dec(&spot["price_per_instance_hour"]) <= dec(&spot["zone_max"]));
    assert!(spot["zones"].as_u64().expect("zones") > 1);
}

/// The committed snapshot is what its recorded command writes today (apart from the day and
/// the output path the header records).
#[test]
fn the_builtin_snapshot_is_what_its_command_generates() {
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("snapshot.csv");
    let out = gpucap()
        .current_dir(&root)
        .args(["prices", "-q", "--write-snapshot"])
        .arg(&path)
        .args([
            "--from-catalog",
            "providers/core/data/catalog",
            "--published",
            "providers/core/data/published.csv",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let comparable = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("# Written on ") && !l.starts_with("#   gpucap prices "))
            .map(str::to_string)
            .collect()
    };
    let committed = std::fs::read_to_string(root.join("providers/core/data/snapshot.csv"))
        .expect("the committed snapshot");
    assert!(committed.contains(
        "#   gpucap prices --write-snapshot providers/core/data/snapshot.csv --from-catalog providers/core/data/catalog --published providers/core/data/published.csv"
    ));
    let generated = std::fs::read_to_string(&path).expect("written");
    assert_eq!(comparable(&generated), comparable(&committed));
}

#[test]
fn write_snapshot_needs_a_source_and_bad_catalog_dirs_name_the_file() {
    let out = gpucap()
        .args(["prices", "--write-snapshot", "/tmp/x.csv"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--from-catalog"));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("aws.csv"), "x\n").expect("write");
    let out = gpucap()
        .args(["prices", "--write-snapshot"])
        .arg(dir.path().join("snap.csv"))
        .arg("--from-catalog")
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sources.csv"), "{stderr}");
    assert!(!dir.path().join("snap.csv").exists(), "no partial write");
}
