//! Imports a SkyPilot-format catalog CSV (`catalogs/v8/<cloud>/vms.csv`) as offers, since many
//! teams already keep those.
//!
//! The format's quirks are handled, not trusted: columns are found by header name (their order
//! differs per cloud); GCP prices are additive (a GPU machine costs its host-VM row plus its
//! accelerator row, matched by zone); `700.0` is the catalog's placeholder for "unknown"; empty
//! prices mean "not sold that way"; listed GPU counts are checked against the instance-type
//! table (`Standard_ND96isr_H100_v5` is listed with 12). What is wrong is reported as an
//! [`Issue`] naming `file:line`, never used silently.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::provider::{Action, Issue, Problem};
use crate::{
    Accelerator, Cloud, Offer, PurchaseKind, Source, SourceKind, instance_types, validate,
};

/// The catalog's "price unknown" value.
const PLACEHOLDER: Decimal = Decimal::from_parts(700, 0, 0, false, 0);

/// A file that cannot be imported at all.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ImportError {
    pub file: PathBuf,
    pub line: Option<u64>,
    pub message: String,
}

/// The offers of one file and what was wrong with some of its rows.
#[derive(Debug, Default)]
pub struct Imported {
    pub offers: Vec<Offer>,
    pub issues: Vec<Issue>,
    /// The data rows read (the header not counted).
    pub rows: u64,
    /// The bytes read.
    pub bytes: u64,
}

/// The most an import reads: past either bound it stops with an error, so what it holds (the
/// offers, one or two per row) stays bounded whatever the file's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Data rows.
    pub rows: u64,
    /// Bytes of the file, which also bounds one row's length.
    pub bytes: u64,
}

impl Bounds {
    /// No bound: for text already in memory.
    pub const NONE: Bounds = Bounds {
        rows: u64::MAX,
        bytes: u64::MAX,
    };
}

/// How an error about [`Bounds`] begins.
pub const PAST_BOUNDS: &str = "the catalog is too large to import: ";

/// Reads and imports a catalog file as it streams in, within `bounds`; `fetched_at` is when its
/// prices were true (the file's modification time, usually).
pub fn import_file(path: &Path, bounds: Bounds) -> Result<Imported, ImportError> {
    let fail = |e: std::io::Error| ImportError {
        file: path.into(),
        line: None,
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(fail)?;
    let fetched_at = file
        .metadata()
        .and_then(|m| m.modified())
        .map(DateTime::<Utc>::from)
        .unwrap_or_else(|_| Utc::now());
    import_reader(std::io::BufReader::new(file), path, fetched_at, bounds)
}

struct Columns {
    instance_type: usize,
    accelerator: usize,
    count: usize,
    price: usize,
    spot: usize,
    region: usize,
    zone: Option<usize>,
}

/// A GCP accelerator row waiting for its host row.
struct Attached {
    line: u64,
    machine: &'static str,
    zone: String,
    region: String,
    listed: String,
    count: Decimal,
    price: Option<Decimal>,
    spot: Option<Decimal>,
}

/// Imports catalog text; `file` names it in issues and errors.
pub fn import(text: &str, file: &Path, fetched_at: DateTime<Utc>) -> Result<Imported, ImportError> {
    import_reader(text.as_bytes(), file, fetched_at, Bounds::NONE)
}

/// Imports a catalog as it is read from `input`, row by row, within `bounds`; `file` names it
/// in issues and errors.
pub fn import_reader(
    input: impl Read,
    file: &Path,
    fetched_at: DateTime<Utc>,
    bounds: Bounds,
) -> Result<Imported, ImportError> {
    let fail = |line: Option<u64>, message: String| ImportError {
        file: file.into(),
        line,
        message,
    };
    // One byte past the bound is read, so a file that has it is told from one that ends there;
    // the count is of bytes taken from `input`, whether or not they parse.
    let read = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let counted = Counted {
        inner: input.take(bounds.bytes.saturating_add(1)),
        read: read.clone(),
    };
    let mut reader = csv::ReaderBuilder::new().from_reader(counted);
    let too_large = |line: Option<u64>, what: String| fail(line, format!("{PAST_BOUNDS}{what}"));
    let headers = reader
        .headers()
        .map_err(|e| fail(Some(1), e.to_string()))?
        .clone();
    if read.get() > bounds.bytes {
        return Err(too_large(None, format!("more than {} bytes", bounds.bytes)));
    }
    let col = |name: &str| headers.iter().position(|h| h.trim() == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| {
            fail(
                Some(1),
                format!("no `{name}` column; is this a SkyPilot catalog (vms.csv)?"),
            )
        })
    };
    let cols = Columns {
        instance_type: need("InstanceType")?,
        accelerator: need("AcceleratorName")?,
        count: need("AcceleratorCount")?,
        price: need("Price")?,
        spot: need("SpotPrice")?,
        region: need("Region")?,
        zone: col("AvailabilityZone"),
    };
    let origin = format!("SkyPilot catalog {}", file.display());
    let mut offers: Vec<Offer> = Vec::new();
    let mut issues: Vec<Issue> = Vec::new();
    let mut unknown: BTreeMap<String, usize> = BTreeMap::new();
    let mut hosts: HashMap<(String, String), (Option<Decimal>, Option<Decimal>)> = HashMap::new();
    let mut attached: Vec<Attached> = Vec::new();
    // Instance types of known accelerators that the instance-type table lacks: first line, rows.
    let mut unlisted: BTreeMap<(Cloud, String), (u64, usize)> = BTreeMap::new();

    let mut rows = 0u64;
    let mut record = csv::StringRecord::new();
    loop {
        let result = reader.read_record(&mut record);
        if read.get() > bounds.bytes {
            return Err(too_large(None, format!("more than {} bytes", bounds.bytes)));
        }
        let more = result.map_err(|e| fail(e.position().map(|p| p.line()), e.to_string()))?;
        if !more {
            break;
        }
        rows += 1;
        let line = record.position().map_or(0, |p| p.line());
        if rows > bounds.rows {
            return Err(too_large(
                Some(line),
                format!("more than {} rows", bounds.rows),
            ));
        }
        let get = |i: usize| record.get(i).unwrap_or("").trim();
        let region = get(cols.region).to_string();
        let Some(cloud) = Cloud::of_region(&region) else {
            return Err(fail(
                Some(line),
                format!("`Region` `{region}` is not an AWS, GCP or Azure region"),
            ));
        };
        let subject = |what: &str| format!("{}:{line} {what}", file.display());
        let mut report = |what: &str, problem: Problem, action: Action| {
            issues.push(Issue {
                cloud,
                region: Some(region.clone()),
                subject: subject(what),
                problem,
                action,
            })
        };
        let money = |field: &str, s: &str| -> Result<Option<Decimal>, ImportError> {
            if s.is_empty() {
                return Ok(None);
            }
            Decimal::from_str(s)
                .map(Some)
                .map_err(|_| fail(Some(line), format!("`{field}` `{s}` is not a number")))
        };
        let price = money("Price", get(cols.price))?;
        let spot = money("SpotPrice", get(cols.spot))?;
        let zone = cols
            .zone
            .map(|z| get(z).to_string())
            .filter(|z| !z.is_empty());
        let instance_type = get(cols.instance_type).to_string();
        let listed_acc = get(cols.accelerator).to_string();
        let listed_count = get(cols.count);
        let count = match listed_count {
            "" => None,
            c => Some(Decimal::from_str(c).map_err(|_| {
                fail(
                    Some(line),
                    format!("`AcceleratorCount` `{c}` is not a number"),
                )
            })?),
        };
        // A row that sells no GPUs (or fewer than none) is a broken row, not one to correct from
        // the instance-type table: whatever produced it may have broken its prices too.
        if let Some(c) = count.filter(|c| *c <= Decimal::ZERO) {
            return Err(fail(
                Some(line),
                format!(
                    "`AcceleratorCount` `{}` is not a number of GPUs: a row must sell at least one",
                    c.normalize()
                ),
            ));
        }

        if cloud == Cloud::Gcp && instance_type.is_empty() {
            // An accelerator row: priced on top of its host machine, or a TPU priced alone.
            let n = count.unwrap_or(Decimal::ONE);
            if let Some((acc, chips)) = tpu(&listed_acc) {
                let hw = validate::Hardware {
                    accelerator: acc,
                    gpus: chips,
                    corrected: None,
                };
                push_offers(
                    &mut offers,
                    &mut report,
                    cloud,
                    &region,
                    zone,
                    &listed_acc,
                    hw,
                    price,
                    spot,
                    &origin,
                    fetched_at,
                );
            } else if let Some(machine) = gcp_machine(&listed_acc, n) {
                attached.push(Attached {
                    line,
                    machine,
                    zone: zone.unwrap_or_default(),
                    region: region.clone(),
                    listed: listed_acc,
                    count: n,
                    price,
                    spot,
                });
            } else {
                *unknown
                    .entry(format!("gcp {listed_acc} x{}", n.normalize()))
                    .or_default() += 1;
            }
            continue;
        }
        if listed_acc.is_empty() {
            if cloud == Cloud::Gcp {
                hosts.insert((instance_type, zone.unwrap_or_default()), (price, spot));
            }
            continue;
        }
        // An instance type the table does not know has only the catalog's word for its GPUs,
        // and catalogs get counts wrong: it is skipped, and said so, rather than planned on.
        if instance_types::lookup(cloud, &instance_type).is_none() {
            if Accelerator::parse(&listed_acc).is_ok() {
                unlisted
                    .entry((cloud, instance_type))
                    .or_insert_with(|| (line, 0))
                    .1 += 1;
            } else {
                *unknown.entry(format!("{cloud} {listed_acc}")).or_default() += 1;
            }
            continue;
        }
        match validate::hardware(cloud, &instance_type, Some(&listed_acc), count) {
            Ok(hw) => {
                if let Some(problem) = hw.corrected.clone() {
                    report(&instance_type, problem, Action::Corrected);
                }
                push_offers(
                    &mut offers,
                    &mut report,
                    cloud,
                    &region,
                    zone,
                    &instance_type,
                    hw,
                    price,
                    spot,
                    &origin,
                    fetched_at,
                );
            }
            Err(_) => *unknown.entry(format!("{cloud} {listed_acc}")).or_default() += 1,
        }
    }

    if rows == 0 {
        return Err(fail(
            None,
            "the file has a header but no rows: it prices nothing".into(),
        ));
    }
    let bytes = read.get();
    let mut missing_hosts: BTreeMap<&str, usize> = BTreeMap::new();
    for a in attached {
        let Some((host_price, host_spot)) =
            hosts.get(&(a.machine.to_string(), a.zone.clone())).copied()
        else {
            *missing_hosts.entry(a.machine).or_default() += 1;
            continue;
        };
        let sum = |x: Option<Decimal>, y: Option<Decimal>| match (x, y) {
            (Some(x), Some(y)) if x != PLACEHOLDER && y != PLACEHOLDER => Some(x + y),
            (Some(x), Some(y)) => Some(if x == PLACEHOLDER { x } else { y }),
            _ => None,
        };
        let hw = validate::hardware(Cloud::Gcp, a.machine, Some(&a.listed), Some(a.count))
            .map_err(|p| fail(Some(a.line), p.to_string()))?;
        let region = a.region.clone();
        let mut report = |what: &str, problem: Problem, action: Action| {
            issues.push(Issue {
                cloud: Cloud::Gcp,
                region: Some(region.clone()),
                subject: format!("{}:{} {what}", file.display(), a.line),
                problem,
                action,
            })
        };
        let (price, spot) = (sum(host_price, a.price), sum(host_spot, a.spot));
        push_offers(
            &mut offers,
            &mut report,
            Cloud::Gcp,
            &a.region,
            Some(a.zone).filter(|z| !z.is_empty()),
            a.machine,
            hw,
            price,
            spot,
            &origin,
            fetched_at,
        );
    }
    for (machine, rows) in missing_hosts {
        issues.push(Issue {
            cloud: Cloud::Gcp,
            region: None,
            subject: format!("{} {machine}", file.display()),
            problem: Problem::Other { message: format!("{rows} accelerator rows have no host-VM row for their zone; the GPU price alone would understate the machine") },
            action: Action::Skipped,
        });
    }
    for ((cloud, instance_type), (line, rows)) in unlisted {
        issues.push(Issue {
            cloud,
            region: None,
            subject: format!("{}:{line} {instance_type}", file.display()),
            problem: Problem::Other {
                message: format!(
                    "instance type not in gpucap's instance-type table, so the GPU count the catalog lists cannot be checked; its {rows} row(s) are not offers"
                ),
            },
            action: Action::Skipped,
        });
    }
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|(n, c)| format!("{n} ({c})")).collect();
        tracing::debug!(
            "{}: rows of accelerators outside gpucap's catalog skipped: {}",
            file.display(),
            names.join(", ")
        );
    }
    Ok(Imported {
        offers,
        issues,
        rows,
        bytes,
    })
}

/// A reader that counts the bytes taken from it.
struct Counted<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Adds the on-demand and spot offers of one row, after checking both prices.
#[allow(clippy::too_many_arguments)]
fn push_offers(
    out: &mut Vec<Offer>,
    report: &mut dyn FnMut(&str, Problem, Action),
    cloud: Cloud,
    region: &str,
    zone: Option<String>,
    instance_type: &str,
    hw: validate::Hardware,
    price: Option<Decimal>,
    spot: Option<Decimal>,
    origin: &str,
    fetched_at: DateTime<Utc>,
) {
    let mut checked = |kind: PurchaseKind, p: Option<Decimal>| -> Option<Decimal> {
        let p = p?;
        let what = format!("{instance_type} {kind}");
        if p == PLACEHOLDER {
            report(
                &what,
                Problem::PlaceholderPrice { price: p },
                Action::Skipped,
            );
            return None;
        }
        validate::price(p)
            .map_err(|problem| report(&what, problem, Action::Skipped))
            .ok()
    };
    let on_demand = checked(PurchaseKind::OnDemand, price);
    let spot = checked(PurchaseKind::Spot, spot);
    if let (Some(s), Some(od)) = (spot, on_demand)
        && s > od
    {
        report(
            &format!("{instance_type} spot"),
            Problem::SpotAboveOnDemand {
                spot: s,
                on_demand: od,
            },
            Action::Kept,
        );
    }
    for (kind, p) in [
        (PurchaseKind::OnDemand, on_demand),
        (PurchaseKind::Spot, spot),
    ] {
        let Some(p) = p else { continue };
        out.push(Offer {
            cloud,
            region: region.to_string(),
            zone: zone.clone(),
            instance_type: instance_type.to_string(),
            accelerator: hw.accelerator,
            gpus_per_instance: hw.gpus,
            gpu_memory_gb: Some(hw.accelerator.spec().memory_gb),
            kind,
            price_per_instance_hour: p,
            upfront: Decimal::ZERO,
            term_hours: None,
            earliest_start: None,
            lead_time_hours: None,
            max_instances: None,
            offering_id: None,
            source: Source {
                kind: SourceKind::Import,
                origin: origin.to_string(),
                fetched_at,
            },
        });
    }
}

/// The machine type SkyPilot prices a GCP accelerator row against.
fn gcp_machine(listed: &str, count: Decimal) -> Option<&'static str> {
    let n = count.normalize().to_string();
    Some(match (listed, n.as_str()) {
        ("A100", "1") => "a2-highgpu-1g",
        ("A100", "2") => "a2-highgpu-2g",
        ("A100", "4") => "a2-highgpu-4g",
        ("A100", "8") => "a2-highgpu-8g",
        ("A100", "16") => "a2-megagpu-16g",
        ("A100-80GB", "1") => "a2-ultragpu-1g",
        ("A100-80GB", "2") => "a2-ultragpu-2g",
        ("A100-80GB", "4") => "a2-ultragpu-4g",
        ("A100-80GB", "8") => "a2-ultragpu-8g",
        ("H100", "1") => "a3-highgpu-1g",
        ("H100", "2") => "a3-highgpu-2g",
        ("H100", "4") => "a3-highgpu-4g",
        ("H100", "8") => "a3-highgpu-8g",
        ("H100-MEGA", "8") => "a3-megagpu-8g",
        ("H200", "8") => "a3-ultragpu-8g",
        ("B200", "8") => "a4-highgpu-8g",
        ("L4", "1") => "g2-standard-4",
        ("L4", "2") => "g2-standard-24",
        ("L4", "4") => "g2-standard-48",
        ("L4", "8") => "g2-standard-96",
        _ => return None,
    })
}

/// `tpu-v6e-8` → (TPU v6e, 8 chips); `tpu-v5p-8` → (TPU v5p, 4 chips: v5p sizes count cores).
fn tpu(listed: &str) -> Option<(Accelerator, u32)> {
    let (family, size) = listed.rsplit_once('-')?;
    let size: u32 = size.parse().ok()?;
    match family {
        "tpu-v6e" => Some((Accelerator::parse("tpu-v6e").ok()?, size)),
        "tpu-v5p" if size >= 2 => Some((Accelerator::parse("tpu-v5p").ok()?, size / 2)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).expect("decimal")
    }

    const GCP: &str = "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice
a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.73948,0.36975
,,,A100,1,{'Gpus': []},us-central1,us-central1-a,2.93391,1.4341
,,,H100,8,x,us-central1,us-central1-a,33.6,10.0
,,,tpu-v6e-1,1,tpu-v6e-1,asia-east1,asia-east1-c,700.0,700.0
,,,tpu-v6e-1,1,tpu-v6e-1,us-east1,us-east1-d,2.7,1.89
";

    #[test]
    fn gcp_machines_are_host_plus_accelerator_and_placeholders_are_reported() {
        let imported = import(GCP, Path::new("gcp.csv"), Utc::now()).expect("imports");
        let a100: Vec<&Offer> = imported
            .offers
            .iter()
            .filter(|o| o.instance_type == "a2-highgpu-1g")
            .collect();
        assert_eq!(a100.len(), 2);
        assert_eq!(a100[0].price_per_instance_hour, d("3.67339"));
        assert_eq!(a100[1].price_per_instance_hour, d("1.80385"));
        assert!(
            !imported
                .offers
                .iter()
                .any(|o| o.accelerator.name() == "h100"),
            "no host row, no offer"
        );
        let tpu: Vec<&Offer> = imported
            .offers
            .iter()
            .filter(|o| o.accelerator.name() == "tpu-v6e")
            .collect();
        assert_eq!(tpu.len(), 2, "only the us-east1 row is real");
        let placeholders = imported
            .issues
            .iter()
            .filter(|i| matches!(i.problem, Problem::PlaceholderPrice { .. }))
            .count();
        assert_eq!(placeholders, 2);
        assert!(
            imported
                .issues
                .iter()
                .any(|i| i.subject.ends_with("a3-highgpu-8g")),
            "{:?}",
            imported.issues
        );
        assert!(
            imported
                .issues
                .iter()
                .any(|i| i.subject.starts_with("gcp.csv:5 ")),
            "{:?}",
            imported.issues
        );
    }

    const AWS_HEADER: &str = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n";

    #[test]
    fn rows_selling_no_gpus_are_refused_not_corrected() {
        for count in ["0", "0.0", "-8", "-0.5"] {
            let text = format!(
                "{AWS_HEADER}p5.48xlarge,H100,8.0,192.0,2048.0,x,98.32,,us-east-1,use1-az4,x86_64\n\
                 p5.48xlarge,H100,{count},192.0,2048.0,x,98.32,,us-east-1,use1-az6,x86_64\n"
            );
            let err = import(&text, Path::new("aws.csv"), Utc::now()).expect_err(count);
            assert!(
                err.to_string()
                    .starts_with("aws.csv:3: `AcceleratorCount` `"),
                "{err}"
            );
            assert!(err.to_string().contains("at least one"), "{err}");
        }
    }

    #[test]
    fn instance_types_the_table_lacks_are_skipped_and_reported_once() {
        let text = format!(
            "{AWS_HEADER}p9.huge,H100,4.0,192.0,2048.0,x,50.0,,us-east-1,use1-az4,x86_64\n\
             p9.huge,H100,4.0,192.0,2048.0,x,51.0,20.0,us-west-2,usw2-az1,x86_64\n\
             p5.48xlarge,H100,8.0,192.0,2048.0,x,98.32,,us-east-1,use1-az4,x86_64\n"
        );
        let imported = import(&text, Path::new("aws.csv"), Utc::now()).expect("imports");
        assert!(
            imported
                .offers
                .iter()
                .all(|o| o.instance_type == "p5.48xlarge")
        );
        assert_eq!(imported.offers.len(), 1);
        let skipped: Vec<String> = imported.issues.iter().map(|i| i.to_string()).collect();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].contains("aws.csv:2 p9.huge"), "{skipped:?}");
        assert!(
            skipped[0].contains("its 2 row(s) are not offers"),
            "{skipped:?}"
        );
        assert_eq!(imported.issues[0].action, Action::Skipped);
    }

    #[test]
    fn bad_numbers_are_errors_naming_file_and_line() {
        let text = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch
p5.48xlarge,H100,8.0,192.0,2048.0,x,98.32,,us-east-1,use1-az4,x86_64
p5.48xlarge,H100,8.0,192.0,2048.0,x,cheap,,us-east-1,use1-az6,x86_64
";
        let err = import(text, Path::new("aws.csv"), Utc::now()).expect_err("bad price");
        assert_eq!(
            err.to_string(),
            "aws.csv:3: `Price` `cheap` is not a number"
        );
        let err = import("a,b\n1,2\n", Path::new("x.csv"), Utc::now()).expect_err("not a catalog");
        assert!(
            err.to_string()
                .starts_with("x.csv:1: no `InstanceType` column"),
            "{err}"
        );
    }

    #[test]
    fn an_import_stops_past_its_bounds_and_an_empty_one_says_so() {
        let header = "InstanceType,AcceleratorName,AcceleratorCount,Price,SpotPrice,Region,AvailabilityZone\n";
        let row = "p5.48xlarge,H100,8,98.32,,us-east-1,us-east-1a\n";
        let text = format!("{header}{}", row.repeat(3));
        let at = |bounds| import_reader(text.as_bytes(), Path::new("aws.csv"), Utc::now(), bounds);
        let all = at(Bounds {
            rows: 3,
            bytes: text.len() as u64,
        })
        .expect("within its bounds");
        assert_eq!((all.rows, all.bytes), (3, text.len() as u64));
        let err = at(Bounds {
            rows: 2,
            bytes: u64::MAX,
        })
        .expect_err("a row too many");
        assert_eq!(
            err.to_string(),
            format!("aws.csv:4: {PAST_BOUNDS}more than 2 rows")
        );
        let err = at(Bounds {
            rows: u64::MAX,
            bytes: 100,
        })
        .expect_err("too long");
        assert_eq!(
            err.to_string(),
            format!("aws.csv: {PAST_BOUNDS}more than 100 bytes")
        );
        let err = import(header, Path::new("aws.csv"), Utc::now()).expect_err("no rows");
        assert_eq!(
            err.to_string(),
            "aws.csv: the file has a header but no rows: it prices nothing"
        );
    }
}
