//! Names, ownership marks and resources.
//!
//! **Names.** Compute Engine takes no client token on a name, and a reservation has no labels,
//! so the name is the identity: `gpucap-<action slug>-<12 hex>`, the hex taken from the client
//! token (a UUID v5 of the plan digest and the action), the slug cut so the whole stays within
//! 63 characters and matches `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`. Two actions, or the same action
//! in two plans, get two names; the same action of the same plan always the same one.
//!
//! **Ownership.** Reservations have no labels, so gpucap writes its tags (`managed-by`,
//! `gpucap:plan`, `gpucap:action`, `gpucap:intent`) as a JSON object in the reservation's
//! `description`. A reservation is gpucap's when its name starts with `gpucap-` **and** its
//! description parses to tags with `managed-by=gpucap`; only those are ever resized or
//! deleted. The intent tag is what reconciliation after a crash looks for.
//!
//! **Ids.** gpucap's id for a reservation is `<zone>/<name>` (a reservation is zonal); a full
//! `selfLink` or `projects/…/zones/<zone>/reservations/<name>` is read too.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use google_cloud_compute_v1::model::{Reservation, reservation};
use gpucap_provider::capacity::{
    CloudResource, Idempotency, Placement, ResourceKind, managed_by_gpucap,
};
use gpucap_provider::names::slug;

/// The longest name Compute Engine allows.
pub const MAX_NAME: usize = 63;
/// The prefix of every name gpucap gives.
pub const PREFIX: &str = "gpucap-";

/// Whether `name` is a valid Compute Engine resource name.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// The reservation an action creates, from its id and client token.
pub fn reservation_name(action: &str, client_token: &str) -> String {
    let hex: String = client_token
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .take(12)
        .collect();
    let room = MAX_NAME - PREFIX.len() - 1 - hex.len();
    let mut s = slug(action);
    s.truncate(room);
    let s = s.trim_end_matches('-');
    match (s.is_empty(), hex.is_empty()) {
        (true, _) => format!("{PREFIX}{hex}"),
        (false, true) => format!("{PREFIX}{s}"),
        (false, false) => format!("{PREFIX}{s}-{hex}"),
    }
}

/// The `requestId` of a mutating call: a UUID v5 of the call and what makes it unique (never
/// the zero UUID, which Compute Engine rejects; a v5 UUID carries its version bits).
pub fn request_id(call: &str, key: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("gpucap:gcp:{call}:{key}").as_bytes(),
    )
    .to_string()
}

/// gpucap's tags as the description carries them.
pub fn description(id: &Idempotency) -> String {
    serde_json::to_string(&id.tags()).unwrap_or_default()
}

/// The tags a description carries (none when it is not gpucap's JSON).
pub fn tags_of(description: Option<&str>) -> BTreeMap<String, String> {
    description
        .and_then(|d| serde_json::from_str::<BTreeMap<String, String>>(d).ok())
        .unwrap_or_default()
}

/// Whether gpucap made this reservation: its name and its description both say so.
pub fn ours(r: &Reservation) -> bool {
    owned(r.name.as_deref(), r.description.as_deref())
}

/// Whether gpucap made a resource with this name and description (reservation, instance
/// template, managed instance group): the name starts with `gpucap-` and the description
/// parses to tags with `managed-by=gpucap`.
pub fn owned(name: Option<&str>, description: Option<&str>) -> bool {
    name.is_some_and(|n| n.starts_with(PREFIX)) && managed_by_gpucap(&tags_of(description))
}

/// The Compute Engine name of a pool's instance template and managed instance group, from
/// the pool's deterministic name (`gpucap-<pool>-<region>-<type>`, [`PoolSpec::name`]); the
/// spot half of a pool gets `-spot`. A name that does not fit 63 characters is cut and ends
/// with 12 hex digits of a UUID v5 of the whole, so two long names never meet.
///
/// [`PoolSpec::name`]: gpucap_provider::capacity::PoolSpec
pub fn pool_resource_name(pool: &str, spot: bool) -> String {
    let mut whole = slug(pool);
    if !whole.starts_with(PREFIX) {
        whole = format!("{PREFIX}{whole}");
    }
    if spot {
        whole.push_str("-spot");
    }
    if valid_name(&whole) {
        return whole;
    }
    let hex: String = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, whole.as_bytes())
        .simple()
        .to_string()
        .chars()
        .take(12)
        .collect();
    let mut cut = whole;
    cut.truncate(MAX_NAME - 1 - hex.len());
    format!("{}-{hex}", cut.trim_end_matches('-'))
}

/// The last segment of a URL or path.
pub fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// (zone, name) from gpucap's id (`zone/name`), a partial URL or a `selfLink`.
pub fn parse_id(id: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
    if let [zone, name] = parts.as_slice() {
        return (!zone.is_empty() && !name.is_empty())
            .then(|| (zone.to_string(), name.to_string()));
    }
    let at = parts.iter().position(|p| *p == "zones")?;
    let zone = parts.get(at + 1)?;
    if *parts.get(at + 2)? != "reservations" {
        return None;
    }
    let name = parts.get(at + 3)?;
    Some((zone.to_string(), name.to_string()))
}

/// gpucap's id of a reservation.
pub fn id_of(zone: &str, name: &str) -> String {
    format!("{zone}/{name}")
}

/// The region of a zone (`us-central1-a` → `us-central1`).
pub fn region_of(zone: &str) -> String {
    match zone.rsplit_once('-') {
        Some((region, _)) if region.contains('-') => region.to_string(),
        _ => zone.to_string(),
    }
}

/// gpucap's state word for a reservation's `status`.
pub fn state_word(status: Option<&reservation::Status>) -> &'static str {
    match status {
        Some(reservation::Status::Ready) => "active",
        Some(reservation::Status::Updating) => "active",
        Some(reservation::Status::Deleting) => "cancelled",
        Some(reservation::Status::Invalid) => "failed",
        _ => "pending",
    }
}

/// A reservation as gpucap describes it.
pub fn resource(zone_hint: &str, r: &Reservation) -> CloudResource {
    let zone = r
        .zone
        .as_deref()
        .map(last_segment)
        .filter(|z| !z.is_empty())
        .unwrap_or(zone_hint)
        .to_string();
    let name = r.name.clone().unwrap_or_default();
    let specific = r.specific_reservation.as_ref();
    let count = specific.and_then(|s| s.count).unwrap_or(0).max(0);
    let in_use = specific
        .and_then(|s| s.in_use_count)
        .map(|n| n.max(0) as u32);
    let machine = specific
        .and_then(|s| s.instance_properties.as_ref())
        .and_then(|p| p.machine_type.clone())
        .unwrap_or_default();
    let parse = |t: Option<&String>| {
        t.and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    CloudResource {
        id: id_of(&zone, &name),
        kind: ResourceKind::Reservation,
        placement: Placement {
            region: region_of(&zone),
            zone: Some(zone.clone()),
            instance_type: machine,
        },
        instances: count as u32,
        start: parse(r.creation_timestamp.as_ref()),
        end: parse(r.delete_at_time.as_ref()),
        state: state_word(r.status.as_ref()).to_string(),
        tags: tags_of(r.description.as_deref()),
        in_use,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_deterministic_and_distinct() {
        let token = "3f1c2a9e-0b7d-5e21-9c44-8a6f0d2e1b73";
        let a = reservation_name("r1-us-central1-a3-highgpu-8g-part-0", token);
        assert_eq!(
            a,
            reservation_name("r1-us-central1-a3-highgpu-8g-part-0", token)
        );
        assert!(valid_name(&a), "{a}");
        assert!(a.ends_with("-3f1c2a9e0b7d"), "{a}");
        let long = reservation_name(&"Very_Long Action/".repeat(20), token);
        assert!(valid_name(&long) && long.len() <= MAX_NAME, "{long}");
        let other = reservation_name("r1", "aaaaaaaa-0b7d-5e21-9c44-8a6f0d2e1b73");
        assert_ne!(reservation_name("r1", token), other);
        assert!(valid_name(&reservation_name("---", token)));
        assert!(!valid_name("Gpucap") && !valid_name("gpucap-") && !valid_name("1a"));
    }

    #[test]
    fn pool_names_fit_and_do_not_collide() {
        let short = pool_resource_name("gpucap-h100-gcp-us-central1-a3-highgpu-1g", false);
        assert_eq!(short, "gpucap-h100-gcp-us-central1-a3-highgpu-1g");
        assert_eq!(
            pool_resource_name("gpucap-h100-gcp-us-central1-a3-highgpu-1g", true),
            "gpucap-h100-gcp-us-central1-a3-highgpu-1g-spot"
        );
        let a = pool_resource_name(&format!("gpucap-{}-a", "x".repeat(80)), false);
        let b = pool_resource_name(&format!("gpucap-{}-b", "x".repeat(80)), false);
        let a_spot = pool_resource_name(&format!("gpucap-{}-a", "x".repeat(80)), true);
        for n in [&a, &b, &a_spot] {
            assert!(valid_name(n) && n.starts_with(PREFIX), "{n}");
        }
        assert_ne!(a, b);
        assert_ne!(a, a_spot);
        assert!(pool_resource_name("My Pool", false).starts_with("gpucap-my-pool"));
    }

    #[test]
    fn request_ids_are_never_the_zero_uuid() {
        let id = request_id("insert", "x");
        assert_ne!(id, uuid::Uuid::nil().to_string());
        assert_eq!(id, request_id("insert", "x"));
        assert_ne!(id, request_id("delete", "x"));
        assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 5);
    }

    #[test]
    fn ids_parse_in_every_form() {
        let want = Some(("us-central1-a".to_string(), "gpucap-x".to_string()));
        assert_eq!(parse_id("us-central1-a/gpucap-x"), want);
        assert_eq!(
            parse_id(
                "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/reservations/gpucap-x"
            ),
            want
        );
        assert_eq!(
            parse_id("projects/p/zones/us-central1-a/reservations/gpucap-x"),
            want
        );
        assert_eq!(parse_id("gpucap-x"), None);
        assert_eq!(region_of("us-central1-a"), "us-central1");
        assert_eq!(region_of("europe-west4-b"), "europe-west4");
    }

    #[test]
    fn ownership_needs_the_name_and_the_description() {
        let id = Idempotency {
            plan: "sha256:0123456789abcdef0123".into(),
            action: "r1".into(),
            intent: "i1".into(),
            client_token: None,
        };
        let mut r = Reservation::default();
        r.name = Some("gpucap-r1-abc".into());
        r.description = Some(description(&id));
        assert!(ours(&r));
        r.name = Some("team-r1".into());
        assert!(!ours(&r));
        r.name = Some("gpucap-r1-abc".into());
        r.description = Some("made by hand".into());
        assert!(!ours(&r));
    }
}
