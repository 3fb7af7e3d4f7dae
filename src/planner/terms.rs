//! Booking rules for term capacity: which lengths can be bought, when a purchase may start, how
//! much notice it needs and how far ahead it can be booked. Price lists give a price; these
//! rules say what that price can buy.
//!
//! - **Capacity blocks** (AWS Capacity Blocks for ML, GCP calendar-mode future reservations):
//!   the lengths, start time of day, notice and booking window of the cloud's purchase rule
//!   ([`gpucap_provider::purchase_rules`]): on AWS 1 to 14 days by the day and then by the week
//!   up to 182 days, from 11:30 UTC after a day's notice, up to eight weeks ahead. Lengths
//!   longer than the horizon are not offered (a shorter one reaching the horizon's end costs
//!   less). An AWS block runs 11:30 to 11:30: on a grid of half hours it covers all of it; on a
//!   grid of whole hours (no pool buys blocks, or periods chosen otherwise) gpucap counts the
//!   whole periods inside it (12:00 to 11:00 of the last day). Every hour is billed, and the
//!   whole fee is paid when booking. A live offering with a date and length is offered exactly
//!   as sold.
//! - **Capacity reservations without a term** (AWS ODCR, GCP reservations, Azure capacity
//!   reservations): billed per hour while they exist, released at will; offered as windows of
//!   [`RESERVATION_DAYS`] starting any day at 00:00 UTC, each followed by a release.
//! - **Commitments and term reservations** (CUDs, savings plans, 1- and 3-year reservations)
//!   start now: at the planning start, or the next hour when planning has begun.
//!
//! A purchase may start after the booking window that is open today (e.g. a block twelve weeks
//! out): the plan keeps it with the date it becomes bookable, and a later run books it at the
//! price of that day — the rolling horizon.

use chrono::{DateTime, Timelike, Utc};
use gpucap_provider::purchase_rules::{self, PurchaseRule, StartTime};
use gpucap_provider::{Offer, PurchaseKind};

use crate::timespec::Horizon;

/// Capacity-block lengths for a cloud without a purchase rule, days.
pub const BLOCK_DAYS: &[u32] = &[1, 2, 3, 7, 14, 28];
/// Reservation windows offered, days: a modelling choice (reservations are sold for any
/// length and cancelled at will), few enough to keep the problem small.
pub const RESERVATION_DAYS: &[u32] = &[1, 7, 14, 28];

/// One way to buy a term offer: a length and the periods it may start at (the horizon's
/// periods: hours, or half or quarter hours).
#[derive(Debug, Clone, PartialEq)]
pub struct TermChoice {
    /// Suffix of the problem offer id, e.g. `7d`.
    pub label: String,
    /// Whole horizon periods the purchase serves.
    pub cover_periods: u32,
    /// Periods billed (the term's length, used or not).
    pub billed_periods: u32,
    /// Allowed start periods (ascending, inside the horizon).
    pub starts: Vec<u32>,
    /// Minutes from the start period to the real start (an AWS block on whole hours: -30,
    /// i.e. 11:30 for a start period of 12:00; 0 on half hours).
    pub start_offset_minutes: i64,
    /// Notice needed before the start, hours.
    pub lead_hours: u32,
    /// How far ahead it can be booked, hours (`None`: no limit).
    pub max_advance_hours: Option<u32>,
    /// A reservation that must be released at its end.
    pub releasable: bool,
}

/// The ways `offer` (a capacity block, reservation or commitment) can be bought in `horizon`,
/// planning at `now`.
pub fn choices(offer: &Offer, horizon: &Horizon, now: DateTime<Utc>) -> Vec<TermChoice> {
    let now_period = horizon.ceil(now).max(0);
    match offer.kind {
        PurchaseKind::OnDemand | PurchaseKind::Spot => Vec::new(),
        PurchaseKind::CapacityBlock => blocks(offer, horizon, now, now_period),
        PurchaseKind::Reservation if offer.term_hours.is_none() => {
            let lead = offer.lead_time_hours.unwrap_or(0);
            let starts = daily(horizon, now_period + i64::from(horizon.periods_of(lead)), 0);
            RESERVATION_DAYS
                .iter()
                .map(|&d| TermChoice {
                    label: format!("{d}d"),
                    cover_periods: horizon.periods_of(d * 24),
                    billed_periods: horizon.periods_of(d * 24),
                    starts: starts.clone(),
                    start_offset_minutes: 0,
                    lead_hours: lead,
                    max_advance_hours: None,
                    releasable: true,
                })
                .collect()
        }
        PurchaseKind::Reservation | PurchaseKind::Commitment => {
            let Some(term) = offer.term_hours.filter(|&h| h > 0) else {
                return Vec::new();
            };
            if now_period >= i64::from(horizon.periods) {
                return Vec::new();
            }
            vec![TermChoice {
                label: term_label(term),
                cover_periods: horizon.periods_of(term),
                billed_periods: horizon.periods_of(term),
                starts: vec![now_period as u32],
                start_offset_minutes: 0,
                lead_hours: 0,
                max_advance_hours: None,
                releasable: false,
            }]
        }
    }
}

/// A private offer's term (`[[prices.offers]]`): its length, starting at 00:00 UTC on any day
/// from `earliest` (or now) to `latest` (or the end of the horizon), without notice.
pub fn in_window(
    offer: &Offer,
    horizon: &Horizon,
    now: DateTime<Utc>,
    earliest: Option<DateTime<Utc>>,
    latest: Option<DateTime<Utc>>,
) -> Vec<TermChoice> {
    let Some(term) = offer.term_hours.filter(|&h| h > 0) else {
        return Vec::new();
    };
    let first = horizon
        .ceil(now)
        .max(earliest.map_or(0, |t| horizon.ceil(t)));
    let last = latest.map_or(i64::from(horizon.periods), |t| horizon.floor(t));
    let starts: Vec<u32> = daily(horizon, first, 0)
        .into_iter()
        .filter(|&h| i64::from(h) <= last)
        .collect();
    if starts.is_empty() {
        return Vec::new();
    }
    vec![TermChoice {
        label: term_label(term),
        cover_periods: horizon.periods_of(term),
        billed_periods: horizon.periods_of(term),
        starts,
        start_offset_minutes: 0,
        lead_hours: 0,
        max_advance_hours: None,
        releasable: false,
    }]
}

fn blocks(
    offer: &Offer,
    horizon: &Horizon,
    now: DateTime<Utc>,
    now_period: i64,
) -> Vec<TermChoice> {
    let rule = purchase_rules::for_offer(offer.cloud, offer.kind, offer.term_hours);
    // A block starting between periods (11:30 on a grid of whole hours) serves whole periods
    // from the next one (12:00), one period fewer than billed. One starting on the grid loses
    // nothing.
    let (start_period_of_day, offset, lost) = match rule.map(|r| r.start) {
        Some(StartTime::DailyAt { hour, minute }) => {
            let at = hour * 60 + minute;
            let first = at.div_ceil(horizon.minutes);
            let offset = i64::from(at) - i64::from(first * horizon.minutes);
            (
                first % horizon.periods_of(24),
                offset,
                u32::from(offset != 0),
            )
        }
        _ => (0, 0, 0),
    };
    let lead = offer
        .lead_time_hours
        .unwrap_or_else(|| rule.map_or(24, |r| r.lead_hours));
    let max_advance = rule.and_then(|r| r.max_advance_days).map(|d| d * 24);
    if let (Some(at), Some(term)) = (offer.earliest_start, offer.term_hours) {
        // A dated offering: exactly what is on sale.
        let first = horizon.ceil(at);
        let term = horizon.periods_of(term);
        if first < now_period || first >= i64::from(horizon.periods) {
            return Vec::new();
        }
        let real_start = horizon.time_of(first as u32);
        let offset = (at - real_start).num_minutes();
        let lost = u32::from(offset != 0);
        if at < now || term <= lost {
            return Vec::new();
        }
        return vec![TermChoice {
            label: format!(
                "{}@{}",
                term_label(offer.term_hours.unwrap_or(0)),
                at.format("%Y%m%dT%H%M")
            ),
            cover_periods: term - lost,
            billed_periods: term,
            starts: vec![first as u32],
            start_offset_minutes: offset,
            lead_hours: 0,
            max_advance_hours: None,
            releasable: false,
        }];
    }
    let starts = daily(
        horizon,
        now_period + i64::from(horizon.periods_of(lead)),
        start_period_of_day,
    );
    let days = match offer.term_hours {
        Some(h) if h.is_multiple_of(24) && h > 0 => vec![h / 24],
        _ => block_days(rule, horizon.hours()),
    };
    days.iter()
        .map(|&d| TermChoice {
            label: format!("{d}d"),
            cover_periods: horizon.periods_of(d * 24) - lost,
            billed_periods: horizon.periods_of(d * 24),
            starts: starts.clone(),
            start_offset_minutes: offset,
            lead_hours: lead,
            max_advance_hours: max_advance,
            releasable: false,
        })
        .collect()
}

/// The block lengths offered in a horizon of `hours`: every length the rule sells up to the
/// first one that reaches past the horizon (longer ones only cost more).
pub fn block_days(rule: Option<&PurchaseRule>, hours: u32) -> Vec<u32> {
    let Some(rule) = rule else {
        return BLOCK_DAYS.to_vec();
    };
    let all = rule.lengths_days(u32::MAX);
    let horizon_days = hours.div_ceil(24);
    let mut out: Vec<u32> = all.iter().copied().filter(|&d| d < horizon_days).collect();
    if let Some(&reach) = all.iter().find(|&&d| d >= horizon_days) {
        out.push(reach);
    }
    out
}

/// The periods starting `period_of_day` periods after 00:00 UTC, from `earliest` to the end of
/// the horizon.
fn daily(horizon: &Horizon, earliest: i64, period_of_day: u32) -> Vec<u32> {
    let earliest = earliest.max(0);
    let day = i64::from(horizon.periods_of(24));
    let start_of_day = i64::from(horizon.periods_of(horizon.start.hour()));
    let mut first = (day + i64::from(period_of_day) - start_of_day % day) % day;
    if first < earliest {
        first += (earliest - first).div_euclid(day) * day;
        if first < earliest {
            first += day;
        }
    }
    (first..i64::from(horizon.periods))
        .step_by(day as usize)
        .map(|h| h as u32)
        .collect()
}

/// `1y`, `3y`, `7d`, `36h`.
fn term_label(hours: u32) -> String {
    if hours.is_multiple_of(8760) {
        format!("{}y", hours / 8760)
    } else if hours.is_multiple_of(24) {
        format!("{}d", hours / 24)
    } else {
        format!("{hours}h")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timespec::{Span, parse_timestamp};
    use gpucap_provider::{Accelerator, Cloud, Source, SourceKind};
    use rust_decimal::Decimal;

    fn offer(cloud: Cloud, kind: PurchaseKind, term: Option<u32>) -> Offer {
        Offer {
            cloud,
            region: "us-east-1".into(),
            zone: None,
            instance_type: "p5.48xlarge".into(),
            accelerator: Accelerator::parse("h100").unwrap(),
            gpus_per_instance: 8,
            gpu_memory_gb: None,
            kind,
            price_per_instance_hour: Decimal::new(3933, 2),
            upfront: Decimal::ZERO,
            term_hours: term,
            earliest_start: None,
            lead_time_hours: None,
            max_instances: None,
            offering_id: None,
            source: Source {
                kind: SourceKind::Snapshot,
                origin: "test".into(),
                fetched_at: parse_timestamp("2024-12-01").unwrap(),
            },
        }
    }

    fn horizon() -> Horizon {
        Horizon::new(parse_timestamp("2027-01-04").unwrap(), Span::days(28))
    }

    #[test]
    fn aws_blocks_start_at_noon_after_a_days_notice_and_lose_the_half_hour() {
        let now = parse_timestamp("2027-01-04T08:00:00Z").unwrap();
        let c = choices(
            &offer(Cloud::Aws, PurchaseKind::CapacityBlock, None),
            &horizon(),
            now,
        );
        // 1..14 days, then weeks up to the first length past the 28-day horizon.
        let days: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(days.len(), 14 + 2, "{days:?}");
        assert_eq!(&days[13..], &["14d", "21d", "28d"]);
        assert_eq!(c[0].max_advance_hours, Some(56 * 24));
        let week = c.iter().find(|c| c.label == "7d").unwrap();
        // now + 24h = hour 32 (Jan 5 08:00); the next 12:00 is Jan 5 12:00 = hour 36.
        assert_eq!(week.starts[0], 36);
        assert!(week.starts.windows(2).all(|w| w[1] - w[0] == 24));
        assert_eq!((week.cover_periods, week.billed_periods), (167, 168));
        assert_eq!(week.start_offset_minutes, -30);
    }

    #[test]
    fn on_half_hours_aws_blocks_start_at_11_30_and_cover_all_they_bill() {
        let now = parse_timestamp("2027-01-04T08:00:00Z").unwrap();
        let half = horizon().with_period(30);
        let c = choices(
            &offer(Cloud::Aws, PurchaseKind::CapacityBlock, None),
            &half,
            now,
        );
        let week = c.iter().find(|c| c.label == "7d").unwrap();
        // now + 24h = period 64 (Jan 5 08:00); the next 11:30 is Jan 5 11:30 = period 71.
        assert_eq!(week.starts[0], 71);
        assert_eq!(
            half.time_of(71),
            parse_timestamp("2027-01-05T11:30:00Z").unwrap()
        );
        assert!(week.starts.windows(2).all(|w| w[1] - w[0] == 48));
        assert_eq!((week.cover_periods, week.billed_periods), (336, 336));
        assert_eq!(week.start_offset_minutes, 0);
        // A dated offering at 11:30 loses nothing either.
        let mut o = offer(Cloud::Aws, PurchaseKind::CapacityBlock, Some(96));
        o.earliest_start = Some(parse_timestamp("2027-01-10T11:30:00Z").unwrap());
        let c = choices(&o, &half, now);
        assert_eq!(c[0].starts, vec![(6 * 24 + 11) * 2 + 1]);
        assert_eq!((c[0].cover_periods, c[0].billed_periods), (192, 192));
        // Reservations start at 00:00, a day apart.
        let r = choices(
            &offer(Cloud::Aws, PurchaseKind::Reservation, None),
            &half,
            now,
        );
        assert_eq!(&r[0].starts[..2], &[48, 96]);
        assert_eq!(r[0].cover_periods, 48);
    }

    #[test]
    fn commitments_start_now_and_reservations_any_day() {
        let now = parse_timestamp("2026-12-01").unwrap();
        let c = choices(
            &offer(Cloud::Gcp, PurchaseKind::Commitment, Some(8760)),
            &horizon(),
            now,
        );
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].starts.clone(), c[0].label.as_str()), (vec![0], "1y"));
        let r = choices(
            &offer(Cloud::Aws, PurchaseKind::Reservation, None),
            &horizon(),
            now,
        );
        assert_eq!(r.len(), RESERVATION_DAYS.len());
        assert_eq!(r[0].starts.len(), 28);
        assert!(r.iter().all(|c| c.releasable));
    }

    #[test]
    fn a_dated_offering_is_offered_exactly() {
        let mut o = offer(Cloud::Aws, PurchaseKind::CapacityBlock, Some(96));
        o.earliest_start = Some(parse_timestamp("2027-01-10T11:30:00Z").unwrap());
        let now = parse_timestamp("2027-01-04").unwrap();
        let c = choices(&o, &horizon(), now);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].starts, vec![6 * 24 + 12]);
        assert_eq!((c[0].cover_periods, c[0].billed_periods), (95, 96));
    }

    #[test]
    fn block_lengths_follow_each_clouds_rule_up_to_the_horizon() {
        let aws = purchase_rules::for_offer(Cloud::Aws, PurchaseKind::CapacityBlock, None);
        // A 13-week horizon (91 days): 1..14 days, then weeks 21..91.
        let days = block_days(aws, 91 * 24);
        assert_eq!(days.len(), 14 + 11);
        assert_eq!(days.last(), Some(&91));
        // A year: every length AWS sells, up to 182 days.
        assert_eq!(block_days(aws, 8760).last(), Some(&182));
        let gcp = purchase_rules::for_offer(Cloud::Gcp, PurchaseKind::CapacityBlock, None);
        assert_eq!(block_days(gcp, 8760).last(), Some(&90));
        // GCP blocks start at 00:00 UTC and lose no hour.
        let now = parse_timestamp("2027-01-04").unwrap();
        let c = choices(
            &offer(Cloud::Gcp, PurchaseKind::CapacityBlock, None),
            &horizon(),
            now,
        );
        assert_eq!(
            (
                c[0].starts[0],
                c[0].cover_periods,
                c[0].start_offset_minutes
            ),
            (24, 24, 0)
        );
        assert_eq!(c[0].max_advance_hours, Some(60 * 24));
    }
}
