//! The pieces of a campaign that runs whole are bought in one zone, or none of them.
//!
//! A gang's nodes talk to each other over the zone's network (EFA, a placement group), so the
//! capacity blocks it runs on at the same time must be in one availability zone. AWS sells a
//! block of at most 64 instances, so a gang of 71 nodes is bought as two parts of one action,
//! and two actions may carry it at once. Each part is quoted on its own
//! (`DescribeCapacityBlockOfferings`), and an offering names its zone. Before any part of such
//! a group is bought, every part is quoted, and the group is bought only in a zone where all of
//! them are offered (the cheapest such zone). A part bought by an earlier run fixes the zone.
//! Pure: the executor quotes and buys (`super::executor::Executor::choose_zones`).

use std::collections::{BTreeMap, BTreeSet};

use super::work::{Part, Work};

/// Capacity block parts that must share a zone: those of one action that carries a campaign
/// placed whole, and those of other such actions that carry the same campaign at the same
/// time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The placed campaigns the parts carry, by name.
    pub campaigns: Vec<String>,
    /// Indices into the works.
    pub parts: Vec<usize>,
}

/// The groups among `works`, one part or more (AWS capacity blocks only; GCP reserves a block
/// by name in the zone the plan gives). `placed`: the names of the plan's campaigns that run
/// whole. A group of one part still has to join a zone where a part of it was bought before.
pub fn groups(works: &[Work], placed: &BTreeSet<String>) -> Vec<Group> {
    let blocks: Vec<(usize, &Part, Vec<&String>)> = works
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w {
            Work::Block(p) if p.action.cloud == "aws" => Some((
                i,
                p,
                p.action
                    .campaigns
                    .iter()
                    .filter(|c| placed.contains(*c))
                    .collect::<Vec<&String>>(),
            )),
            _ => None,
        })
        .filter(|(_, _, gangs)| !gangs.is_empty())
        .collect();
    // Union-find over the parts: the same action, or a gang in common at an overlapping time.
    let mut root: Vec<usize> = (0..blocks.len()).collect();
    fn find(root: &mut [usize], i: usize) -> usize {
        let mut i = i;
        while root[i] != i {
            root[i] = root[root[i]];
            i = root[i];
        }
        i
    }
    for a in 0..blocks.len() {
        for b in a + 1..blocks.len() {
            let (pa, pb) = (blocks[a].1, blocks[b].1);
            let same_action = pa.action.id == pb.action.id;
            let together = pa.start < pb.end
                && pb.start < pa.end
                && blocks[a].2.iter().any(|g| blocks[b].2.contains(g));
            if same_action || together {
                let (ra, rb) = (find(&mut root, a), find(&mut root, b));
                root[ra] = rb;
            }
        }
    }
    let mut by_root: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..blocks.len() {
        let r = find(&mut root, i);
        by_root.entry(r).or_default().push(i);
    }
    let mut members: Vec<Vec<usize>> = by_root.into_values().collect();
    members.sort();
    members
        .into_iter()
        .map(|members| {
            let campaigns: BTreeSet<String> = members
                .iter()
                .flat_map(|&m| blocks[m].2.iter().map(|c| (*c).clone()))
                .collect();
            Group {
                campaigns: campaigns.into_iter().collect(),
                parts: members.iter().map(|&m| blocks[m].0).collect(),
            }
        })
        .collect()
}

/// The zone every part can be bought in, given per part the cheapest fee of an acceptable
/// offering in each zone (`quotes[i]`: zone → USD): the zone where the group costs least, ties
/// by name. `Err` says, in words, where each part is offered.
pub fn common_zone(
    campaigns: &[String],
    parts: &[&Part],
    quotes: &[BTreeMap<String, f64>],
) -> Result<String, String> {
    let mut zones: Option<BTreeSet<&String>> = None;
    for q in quotes {
        let here: BTreeSet<&String> = q.keys().collect();
        zones = Some(match zones {
            None => here,
            Some(z) => z.intersection(&here).copied().collect(),
        });
    }
    let best = zones.unwrap_or_default().into_iter().min_by(|a, b| {
        let cost = |z: &String| quotes.iter().map(|q| q[z]).sum::<f64>();
        cost(a).total_cmp(&cost(b)).then(a.cmp(b))
    });
    match best {
        Some(zone) => Ok(zone.clone()),
        None => {
            let offered: Vec<String> = parts
                .iter()
                .zip(quotes)
                .map(|(p, q)| {
                    let zones: Vec<&str> = q.keys().map(String::as_str).collect();
                    format!(
                        "{} ({} x {}): {}",
                        p.id,
                        p.instances,
                        p.action.instance_type,
                        if zones.is_empty() {
                            "offered nowhere".to_string()
                        } else {
                            format!("offered in {}", zones.join(", "))
                        }
                    )
                })
                .collect();
            let names: Vec<String> = campaigns.iter().map(|c| format!("`{c}`")).collect();
            Err(format!(
                "the {} capacity blocks that {} runs on at once are not all offered in one zone, so none of them is bought (its nodes must share a zone); a later run tries again: {}",
                parts.len(),
                names.join(", "),
                offered.join("; ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Action;

    fn part(action: &str, n: u32, campaigns: &[&str], days: (u32, u32)) -> Work {
        let at = |d: u32| {
            chrono::DateTime::parse_from_rfc3339(&format!("2027-01-{:02}T11:30:00Z", d))
                .expect("a time")
                .to_utc()
        };
        let mut a: Action = serde_json::from_value(serde_json::json!({
            "id": action, "kind": "purchase_capacity_block", "pool": "h100", "cloud": "aws",
            "region": "us-east-1", "instance_type": "p5.48xlarge", "instances": n, "gpus": n * 8,
            "start": "2027-01-01T11:30:00Z", "end": "2027-01-08T11:30:00Z", "start_hour": 0,
            "end_hour": 168, "cost": 1000.0, "irreversible": true, "due": "2026-12-31T11:30:00Z",
            "offer": "h100/aws/us-east-1/p5.48xlarge/capacity-block/7d", "campaigns": campaigns,
        }))
        .expect("an action");
        a.instances = n;
        Work::Block(Part {
            id: format!("{action}#{n}"),
            action: a,
            instances: n,
            start: at(days.0),
            end: at(days.1),
            planned_cost: 1000.0,
        })
    }

    #[test]
    fn parts_of_a_placed_campaign_at_the_same_time_share_a_zone() {
        let placed = BTreeSet::from(["train".to_string()]);
        let works = vec![
            part("a", 36, &["train"], (1, 8)),
            part("a", 35, &["train"], (1, 8)),
            // The same campaign later: a restart, free to move to another zone.
            part("b", 71, &["train"], (8, 15)),
            // Another action carrying it at the same time joins the first group.
            part("c", 4, &["train", "serve"], (3, 8)),
            // Fluid work in pieces: no zone to share.
            part("d", 40, &["serve"], (1, 8)),
            part("d", 30, &["serve"], (1, 8)),
        ];
        let groups = groups(&works, &placed);
        let train = |parts: Vec<usize>| Group {
            campaigns: vec!["train".into()],
            parts,
        };
        assert_eq!(groups, [train(vec![0, 1, 3]), train(vec![2])]);
    }

    #[test]
    fn the_cheapest_zone_that_offers_every_part_or_words_saying_where_each_is() {
        let works = [
            part("a", 36, &["train"], (1, 8)),
            part("a", 35, &["train"], (1, 8)),
        ];
        let parts: Vec<&Part> = works
            .iter()
            .map(|w| match w {
                Work::Block(p) => p,
                _ => unreachable!(),
            })
            .collect();
        let q = |zones: &[(&str, f64)]| -> BTreeMap<String, f64> {
            zones.iter().map(|(z, f)| (z.to_string(), *f)).collect()
        };
        let campaigns = ["train".to_string()];
        let both = [
            q(&[("us-east-1a", 10.0), ("us-east-1b", 12.0)]),
            q(&[("us-east-1b", 5.0), ("us-east-1c", 1.0)]),
        ];
        assert_eq!(
            common_zone(&campaigns, &parts, &both),
            Ok("us-east-1b".into())
        );
        let apart = [q(&[("us-east-1a", 10.0)]), q(&[("us-east-1b", 5.0)])];
        let e = common_zone(&campaigns, &parts, &apart).expect_err("no zone has both");
        assert!(
            e.contains("`train`")
                && e.contains("none of them is bought")
                && e.contains("a#36 (36 x p5.48xlarge): offered in us-east-1a")
                && e.contains("a#35 (35 x p5.48xlarge): offered in us-east-1b"),
            "{e}"
        );
    }
}
