//! What each cloud sells in one purchase, as data: one rule per cloud and instrument (instances
//! per purchase, lengths and their steps, start times, notice, how far ahead, account caps,
//! whether it can be cancelled, terms), each with the page it was read from and when.
//!
//! Price lists say what a thing costs; these rules say which purchases exist. The planner builds
//! its term offers from them (lengths, starts, booking windows), the problem carries the sizes
//! per purchase, and the plan, the generated Terraform and `apply` split a purchase larger than
//! one purchase can be into pieces the cloud sells (`problem::split_purchase` with the rule's
//! sizes). Where a figure
//! was not found in the cloud's documentation the rule says so in `notes` and gpucap's own
//! assumption is marked as one.

use crate::{Cloud, PurchaseKind};

/// The kinds of purchase the rules distinguish (a reservation with a term is not the same
/// instrument as one billed per hour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Instrument {
    /// A pre-paid fixed window (AWS Capacity Blocks for ML, GCP calendar-mode future
    /// reservations, Azure block capacity reservations).
    CapacityBlock,
    /// A capacity reservation billed per hour while it exists, cancelled at will.
    CapacityReservation,
    /// A reserved-instance term (1 or 3 years).
    TermReservation,
    /// A spend or resource commitment (savings plan, committed use discount).
    Commitment,
}

impl Instrument {
    /// The instrument an offer of `kind` (with `term_hours`) is bought through; `None` for
    /// on-demand and spot, which are not purchases.
    pub fn of(kind: PurchaseKind, term_hours: Option<u32>) -> Option<Instrument> {
        match kind {
            PurchaseKind::OnDemand | PurchaseKind::Spot => None,
            PurchaseKind::CapacityBlock => Some(Instrument::CapacityBlock),
            PurchaseKind::Reservation if term_hours.is_none() => {
                Some(Instrument::CapacityReservation)
            }
            PurchaseKind::Reservation => Some(Instrument::TermReservation),
            PurchaseKind::Commitment => Some(Instrument::Commitment),
        }
    }
}

/// Lengths from `from_days` to `to_days` in steps of `step_days`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthSteps {
    pub from_days: u32,
    pub to_days: u32,
    pub step_days: u32,
}

/// When a purchase may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartTime {
    /// Every day at this time, UTC (AWS blocks: 11:30).
    DailyAt { hour: u32, minute: u32 },
    /// At the purchase (commitments, reservations created now).
    AtPurchase,
}

/// A cap on everything bought through one instrument, across purchases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountCap {
    pub instances: u32,
    /// What it spans, in words (`per account`, `per account and region`).
    pub scope: &'static str,
}

/// One cloud's rules for one instrument.
#[derive(Debug, Clone, PartialEq)]
pub struct PurchaseRule {
    pub cloud: Cloud,
    pub instrument: Instrument,
    /// The product's own name.
    pub name: &'static str,
    /// Fewest and most instances one purchase may hold; `max` `None`: no stated limit (the
    /// quotas bound it).
    pub min_instances: u32,
    pub max_instances: Option<u32>,
    /// The lengths sold; empty when the length is free (billed per hour until cancelled) or
    /// fixed by the term of the offer (commitments).
    pub lengths: &'static [LengthSteps],
    pub start: StartTime,
    /// Notice needed before the start, hours.
    pub lead_hours: u32,
    /// How far ahead the start may be booked, days (`None`: no limit stated).
    pub max_advance_days: Option<u32>,
    pub account_cap: Option<AccountCap>,
    pub cancellable: bool,
    /// How it is paid and for how long, in words.
    pub terms: &'static str,
    /// The documentation page the figures were read from, and when.
    pub source: &'static str,
    pub read_on: &'static str,
    /// Why the figures are what they are; what was not found and what gpucap assumes instead.
    pub notes: &'static str,
}

impl PurchaseRule {
    /// Every length sold, in days, up to `limit_days`.
    pub fn lengths_days(&self, limit_days: u32) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .lengths
            .iter()
            .flat_map(|s| (s.from_days..=s.to_days).step_by(s.step_days.max(1) as usize))
            .filter(|&d| d <= limit_days)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

const AWS_CB_DOC: &str =
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html";
const READ_ON: &str = "2026-11-24";

/// How far ahead of its start a GCP calendar-mode future reservation must still be for it to
/// be cancelled: "the start time is at least 30 days away" (the other case, within 24 hours of
/// approval and at least four days ahead, needs the approval time, which the API does not
/// give). Source: https://cloud.google.com/compute/docs/instances/delete-future-reservations-calendar-mode
/// ("Cancel a future reservation request in calendar mode", read 2026-11-25).
pub const GCP_CALENDAR_CANCEL_NOTICE_DAYS: i64 = 30;

/// The rules, one per cloud and instrument.
pub const RULES: &[PurchaseRule] = &[
    PurchaseRule {
        cloud: Cloud::Aws,
        instrument: Instrument::CapacityBlock,
        name: "EC2 Capacity Blocks for ML",
        min_instances: 1,
        max_instances: Some(64),
        lengths: &[
            LengthSteps {
                from_days: 1,
                to_days: 14,
                step_days: 1,
            },
            LengthSteps {
                from_days: 21,
                to_days: 182,
                step_days: 7,
            },
        ],
        start: StartTime::DailyAt {
            hour: 11,
            minute: 30,
        },
        lead_hours: 24,
        max_advance_days: Some(56),
        account_cap: Some(AccountCap {
            instances: 256,
            scope: "per account, across Capacity Blocks",
        }),
        cancellable: false,
        terms: "the whole reservation fee is paid when the block is bought; no cancellation",
        source: AWS_CB_DOC,
        read_on: READ_ON,
        notes: "Lengths: 1-day steps up to 14 days, 7-day steps up to 182 days. Up to 64 instances per block (an older version of the page listed only 1, 2, 4, 8, 16, 32 or 64, and says 64 is not sold for every type in every region) and up to 256 instances across Capacity Blocks. Blocks start and end at 11:30 UTC; start up to eight weeks ahead (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html). The shortest notice is not stated: gpucap assumes a day.",
    },
    PurchaseRule {
        cloud: Cloud::Aws,
        instrument: Instrument::CapacityReservation,
        name: "EC2 On-Demand Capacity Reservations",
        min_instances: 1,
        max_instances: None,
        lengths: &[],
        start: StartTime::AtPurchase,
        lead_hours: 0,
        max_advance_days: None,
        account_cap: None,
        cancellable: true,
        terms: "billed at the on-demand rate while it exists, used or not; cancelled at will",
        source: "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-reservations.html",
        read_on: READ_ON,
        notes: "No per-reservation size limit found; instances in it count against the Running On-Demand quota, so the quota bounds it. Future-dated reservations (a commitment of at least 14 days, requested ahead) were not confirmed here and are not planned. gpucap plans windows of 1, 7, 14 and 28 days from 00:00 UTC, each followed by a release.",
    },
    PurchaseRule {
        cloud: Cloud::Aws,
        instrument: Instrument::Commitment,
        name: "Savings Plans / Reserved Instances",
        min_instances: 1,
        max_instances: None,
        lengths: &[],
        start: StartTime::AtPurchase,
        lead_hours: 0,
        max_advance_days: None,
        account_cap: None,
        cancellable: false,
        terms: "1 or 3 years, paid for the whole term",
        source: "https://docs.aws.amazon.com/savingsplans/latest/userguide/what-is-savings-plans.html",
        read_on: READ_ON,
        notes: "Savings Plans commit to dollars per hour, not instances; gpucap models them as instances of the priced type. Queued (future-dated) purchases are not planned: commitments start now.",
    },
    PurchaseRule {
        cloud: Cloud::Gcp,
        instrument: Instrument::CapacityBlock,
        name: "Compute Engine future reservations in calendar mode",
        min_instances: 1,
        max_instances: Some(80),
        lengths: &[
            LengthSteps {
                from_days: 1,
                to_days: 14,
                step_days: 1,
            },
            LengthSteps {
                from_days: 21,
                to_days: 84,
                step_days: 7,
            },
            LengthSteps {
                from_days: 90,
                to_days: 90,
                step_days: 1,
            },
        ],
        start: StartTime::DailyAt { hour: 0, minute: 0 },
        lead_hours: 24,
        max_advance_days: Some(60),
        account_cap: None,
        cancellable: false,
        terms: "reserved for 1 to 90 days; a submitted request can be cancelled only while its start is at least 30 days away (or within 24 hours of approval, at least four days ahead), never modified",
        source: "https://cloud.google.com/compute/docs/instances/create-future-reservations-calendar-mode",
        read_on: READ_ON,
        notes: "1 to 80 GPU VMs per request, any whole number of days from 1 to 90; future availability of GPU VMs is shown up to 60 days ahead (https://cloud.google.com/compute/docs/instances/future-reservations-calendar-mode-overview). Requests are reviewed by Google before they are approved. Start time of day and shortest notice not found: gpucap assumes 00:00 UTC after a day's notice, and offers 1 to 14 days, then whole weeks and 90 days (a subset of the lengths sold, to keep the problem small).",
    },
    PurchaseRule {
        cloud: Cloud::Gcp,
        instrument: Instrument::CapacityReservation,
        name: "Compute Engine on-demand reservations",
        min_instances: 1,
        max_instances: None,
        lengths: &[],
        start: StartTime::AtPurchase,
        lead_hours: 0,
        max_advance_days: None,
        account_cap: None,
        cancellable: true,
        terms: "billed at the VM's rate while it exists, used or not; deleted at will",
        source: "https://cloud.google.com/compute/docs/instances/reservations-overview",
        read_on: READ_ON,
        notes: "No per-reservation size limit found; reserved VMs count against the regional GPU quota. gpucap plans windows of 1, 7, 14 and 28 days, each followed by a release.",
    },
    PurchaseRule {
        cloud: Cloud::Gcp,
        instrument: Instrument::Commitment,
        name: "Committed use discounts (resource-based)",
        min_instances: 1,
        max_instances: None,
        lengths: &[],
        start: StartTime::AtPurchase,
        lead_hours: 0,
        max_advance_days: None,
        account_cap: None,
        cancellable: false,
        terms: "1 or 3 years, billed monthly whether used or not",
        source: "https://cloud.google.com/compute/docs/instances/signing-up-committed-use-discounts",
        read_on: READ_ON,
        notes: "GPU commitments must be attached to a reservation to be usable; gpucap counts the committed GPUs as capacity from the start of the term.",
    },
    PurchaseRule {
        cloud: Cloud::Azure,
        instrument: Instrument::CapacityBlock,
        name: "Block capacity reservations (preview)",
        min_instances: 1,
        max_instances: None,
        lengths: &[
            LengthSteps {
                from_days: 1,
                to_days: 14,
                step_days: 1,
            },
            LengthSteps {
                from_days: 21,
                to_days: 182,
                step_days: 7,
            },
        ],
        start: StartTime::DailyAt {
            hour: 11,
            minute: 30,
        },
        lead_hours: 0,
        max_advance_days: Some(56),
        account_cap: None,
        cancellable: false,
        terms: "a fixed window of 1 to 14 whole days or 3 to 26 whole weeks",
        source: "https://learn.microsoft.com/en-us/javascript/api/@azure/arm-compute/scheduleprofile",
        read_on: READ_ON,
        notes: "Compute API 2025-04-01 `scheduleProfile`: start today or within 56 days (same day only before 11:30 UTC), 1-14 whole days or 3-26 whole weeks. Size per reservation and cancellation terms not found; the price snapshot has no Azure block prices, so gpucap plans none.",
    },
    PurchaseRule {
        cloud: Cloud::Azure,
        instrument: Instrument::CapacityReservation,
        name: "On-demand capacity reservations",
        min_instances: 1,
        max_instances: None,
        lengths: &[],
        start: StartTime::AtPurchase,
        lead_hours: 0,
        max_advance_days: None,
        account_cap: None,
        cancellable: true,
        terms: "billed at the pay-as-you-go rate while it exists, used or not; deleted at will",
        source: "https://learn.microsoft.com/en-us/azure/virtual-machines/capacity-reservation-overview",
        read_on: READ_ON,
        notes: "Reserved quantity counts against the subscription's vCPU quota for the VM family; no per-reservation limit found. gpucap plans windows of 1, 7, 14 and 28 days, each followed by a release.",
    },
    PurchaseRule {
        cloud: Cloud::Azure,
        instrument: Instrument::TermReservation,
        name: "Azure Reservations (reserved VM instances)",
        min_instances: 1,
        max_instances: None,
        lengths: &[],
        start: StartTime::AtPurchase,
        lead_hours: 0,
        max_advance_days: None,
        account_cap: None,
        cancellable: false,
        terms: "1 or 3 years, paid up front or monthly",
        source: "https://learn.microsoft.com/en-us/azure/cost-management-billing/reservations/save-compute-costs-reservations",
        read_on: READ_ON,
        notes: "Azure allows cancelling reservations with a refund up to a yearly limit; gpucap does not plan on it and counts the whole term.",
    },
];

/// The rule for buying through `instrument` on `cloud`, if gpucap has one.
pub fn rule(cloud: Cloud, instrument: Instrument) -> Option<&'static PurchaseRule> {
    RULES
        .iter()
        .find(|r| r.cloud == cloud && r.instrument == instrument)
        .or_else(|| {
            // A term reservation on a cloud that sells none as such is bought like a
            // commitment (AWS RIs, GCP CUDs).
            (instrument == Instrument::TermReservation)
                .then(|| rule(cloud, Instrument::Commitment))
                .flatten()
        })
}

/// The rule for an offer of `kind` (with `term_hours`) on `cloud`.
pub fn for_offer(
    cloud: Cloud,
    kind: PurchaseKind,
    term_hours: Option<u32>,
) -> Option<&'static PurchaseRule> {
    rule(cloud, Instrument::of(kind, term_hours)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_blocks_are_sold_by_the_day_to_two_weeks_then_by_the_week_to_182_days() {
        let r = rule(Cloud::Aws, Instrument::CapacityBlock).unwrap();
        let days = r.lengths_days(365);
        assert_eq!(&days[..14], &(1..=14).collect::<Vec<_>>()[..]);
        assert_eq!(days[14], 21);
        assert_eq!(*days.last().unwrap(), 182);
        assert!(days[14..].iter().all(|d| d % 7 == 0));
        assert_eq!(days.len(), 14 + 24);
        assert_eq!(r.lengths_days(30).last(), Some(&28));
        assert_eq!(r.max_advance_days, Some(56));
        assert_eq!(r.account_cap.unwrap().instances, 256);
    }

    #[test]
    fn every_rule_has_a_source_a_date_and_a_reason() {
        for r in RULES {
            assert!(r.source.starts_with("https://"), "{}", r.name);
            assert_eq!(r.read_on.len(), 10, "{}", r.name);
            assert!(!r.notes.is_empty(), "{}", r.name);
        }
        assert!(rule(Cloud::Aws, Instrument::TermReservation).is_some());
        assert!(for_offer(Cloud::Aws, PurchaseKind::Spot, None).is_none());
    }
}
