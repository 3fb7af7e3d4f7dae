//! Quotas read from the clouds for `gpucap plan` (and `gpucap apply`, which plans the same
//! way): the quotas the plan's offers draw on that `[quotas]` does not set, read where this
//! build has the cloud's provider and the environment its credentials, one line of progress
//! per region on stderr. What could not be read is said, one line per cloud naming the quotas
//! and why (never a credential), and the plan uses the stated offline default for it.
//!
//! The I/O edge only: the values go into [`crate::planner::QuotaBook::live`]; the planner
//! never sees a reader. Offline runs never come here.

use std::collections::{BTreeMap, BTreeSet};

use gpucap_provider::quotas::{QuotaId, QuotaSource};
use gpucap_provider::{Cloud, ProviderError};

/// What was read, and what was not (one note per cloud).
#[derive(Debug, Default)]
pub struct LiveQuotas {
    pub values: BTreeMap<QuotaId, u64>,
    pub notes: Vec<String>,
}

/// A cloud's reader, or why there is none (no provider in this build, no credentials).
pub type Source = Result<Box<dyn QuotaSource>, String>;

/// Reads `wanted` with the readers this build has, configured from the environment.
pub fn read(wanted: &[QuotaId], progress: &dyn Fn(&str)) -> LiveQuotas {
    let clouds: BTreeSet<Cloud> = wanted.iter().map(|q| q.cloud).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return LiveQuotas {
                values: BTreeMap::new(),
                notes: vec![format!("quotas not read: cannot start tokio: {e}")],
            };
        }
    };
    runtime.block_on(async {
        let mut sources = BTreeMap::new();
        for cloud in clouds {
            sources.insert(cloud, source(cloud).await);
        }
        read_from(sources, wanted, progress).await
    })
}

/// Why a reader could not be had or could not read: the error's class and words (the
/// providers' errors name what is missing, never a secret).
fn reason(e: ProviderError) -> String {
    format!("{}: {}", e.kind, e.message)
}

/// The reader of `cloud`, once its credentials are known to resolve.
async fn source(cloud: Cloud) -> Source {
    match cloud {
        #[cfg(feature = "aws")]
        Cloud::Aws => {
            let q = gpucap_aws::AwsQuotas::from_env();
            q.ready().await.map_err(reason)?;
            Ok(Box::new(q))
        }
        #[cfg(feature = "gcp")]
        Cloud::Gcp => {
            let q = gpucap_gcp::GcpQuotas::from_env();
            q.ready().await.map_err(reason)?;
            Ok(Box::new(q))
        }
        #[cfg(feature = "azure")]
        Cloud::Azure => Ok(Box::new(
            gpucap_azure::AzureQuotas::from_env().map_err(reason)?,
        )),
        #[allow(unreachable_patterns)]
        other => Err(format!(
            "this gpucap was built without the `{other}` feature (build with `--features {other}`)"
        )),
    }
}

/// Reads `wanted` with `sources` (one per cloud), region by region: [`read`] without the
/// environment, so that tests can hand it fakes.
pub async fn read_from(
    sources: BTreeMap<Cloud, Source>,
    wanted: &[QuotaId],
    progress: &dyn Fn(&str),
) -> LiveQuotas {
    let mut out = LiveQuotas::default();
    let mut by_place: BTreeMap<(Cloud, &str), Vec<&QuotaId>> = BTreeMap::new();
    for q in wanted {
        by_place.entry((q.cloud, &q.region)).or_default().push(q);
    }
    // Per cloud: the quotas not read, with why.
    let mut missed: BTreeMap<Cloud, (Vec<String>, BTreeSet<String>)> = BTreeMap::new();
    for ((cloud, region), quotas) in by_place {
        let names: Vec<&str> = quotas.iter().map(|q| q.name.as_str()).collect();
        let source = match sources.get(&cloud) {
            Some(Ok(s)) => s,
            Some(Err(why)) => {
                let m = missed.entry(cloud).or_default();
                m.0.extend(quotas.iter().map(|q| format!("{region}/{}", q.name)));
                m.1.insert(why.clone());
                continue;
            }
            None => {
                let m = missed.entry(cloud).or_default();
                m.0.extend(quotas.iter().map(|q| format!("{region}/{}", q.name)));
                m.1.insert("no reader for this cloud".into());
                continue;
            }
        };
        progress(&format!(
            "reading quotas: {cloud} {region} ({})",
            names.join(", ")
        ));
        for q in quotas {
            let why = match source.quota(q).await {
                Ok(Some(v)) => {
                    out.values.insert(q.clone(), v);
                    continue;
                }
                Ok(None) => format!("{cloud} does not list it"),
                Err(e) => reason(e),
            };
            let m = missed.entry(cloud).or_default();
            m.0.push(format!("{region}/{}", q.name));
            m.1.insert(why);
        }
    }
    for (cloud, (quotas, whys)) in missed {
        out.notes.push(format!(
            "{cloud} quotas {} not read ({}): the offline default is used for them",
            quotas.join(", "),
            whys.into_iter().collect::<Vec<_>>().join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpucap_provider::quotas::FakeQuotas;

    fn id(s: &str) -> QuotaId {
        QuotaId::parse(s).unwrap()
    }

    #[tokio::test]
    async fn values_are_read_and_what_is_not_is_said_once_per_cloud() {
        let fake = FakeQuotas {
            cloud: Some(Cloud::Aws),
            values: [(id("aws/us-east-1/L-417A185B"), 384)].into(),
            ..Default::default()
        };
        let sources: BTreeMap<Cloud, Source> = [
            (Cloud::Aws, Ok(Box::new(fake) as Box<dyn QuotaSource>)),
            (Cloud::Gcp, Err("auth: no GCP credentials".to_string())),
        ]
        .into();
        let wanted = [
            id("aws/us-east-1/L-417A185B"),
            id("aws/us-east-1/L-7212CCBC"),
            id("gcp/us-central1/NVIDIA_H100_GPUS"),
            id("gcp/us-east4/NVIDIA_H100_GPUS"),
        ];
        let lines = std::sync::Mutex::new(Vec::new());
        let got = read_from(sources, &wanted, &|l| {
            lines.lock().unwrap().push(l.to_string())
        })
        .await;
        assert_eq!(
            got.values.into_iter().collect::<Vec<_>>(),
            vec![(id("aws/us-east-1/L-417A185B"), 384)]
        );
        assert_eq!(
            got.notes,
            vec![
                "aws quotas us-east-1/L-7212CCBC not read (aws does not list it): the offline default is used for them",
                "gcp quotas us-central1/NVIDIA_H100_GPUS, us-east4/NVIDIA_H100_GPUS not read (auth: no GCP credentials): the offline default is used for them",
            ]
        );
        assert_eq!(
            lines.into_inner().unwrap(),
            vec!["reading quotas: aws us-east-1 (L-417A185B, L-7212CCBC)"]
        );
    }
}
