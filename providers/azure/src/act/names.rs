//! Names, tags and resources.
//!
//! **Names.** ARM's idempotency is the resource name, so gpucap's are deterministic:
//!
//! - a capacity reservation group per location and zone: `gpucap-<location>` (regional) or
//!   `gpucap-<location>-z<zone>` (zonal), since a group's zones are fixed when it is made
//!   and a reservation's zone must be one of them;
//! - a capacity reservation per plan action: `gpucap-<action slug>-<12 hex>`, the hex taken
//!   from the client token (a UUID v5 of the plan digest and the action), the slug cut so the
//!   whole stays within 64 characters. Letters, digits and `-` only, starting with a letter
//!   and ending with a digit or letter, which every Compute resource name allows.
//!
//! - a VM scale set per pool and purchase model ([`scale_set_name`]): the pool's own
//!   deterministic name (`gpucap-<pool>-<region>-<instance type>`, from `gpucap apply`) for
//!   on-demand, with `-spot` for spot; one too long for 64 characters is cut and ends with 12
//!   hex digits of a UUID v5 of the whole, so two long names stay two.
//!
//! Two actions, or the same action in two plans, get two names; the same action of the same
//! plan always the same one.
//!
//! **Tags.** ARM tag names may not contain `<`, `>`, `%`, `&`, `\`, `?` or `/` (and are at most
//! 512 characters, values 256). `:` is allowed on Microsoft.Compute resources, so gpucap's
//! tag keys (`managed-by`, `gpucap:plan`, `gpucap:action`, `gpucap:intent`) are written as
//! they are; [`tag_key`] replaces any forbidden character with `_`, the same way on write and
//! on lookup, so a future key with one stays findable.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpucap_provider::capacity::{CloudResource, Idempotency, Placement, ResourceKind};
use gpucap_provider::names::slug;
use serde_json::Value;

/// The longest name gpucap gives (Compute allows more; 64 keeps names readable and safe).
pub const MAX_NAME: usize = 64;

/// An Azure location as ARM names it: `eastus`, from `eastus`, `East US` or `east-us`.
pub fn location(region: &str) -> String {
    region
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// An availability zone as ARM names it (`1`, `2`, `3`): from `1`, `eastus-1` or `eastus-az1`.
pub fn zone(z: &str) -> String {
    let digits: String = z
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if digits.is_empty() {
        z.to_string()
    } else {
        digits
    }
}

/// The capacity reservation group for a location and zone.
pub fn group_name(region: &str, zone_name: Option<&str>) -> String {
    match zone_name {
        Some(z) => format!("gpucap-{}-z{}", location(region), slug(&zone(z))),
        None => format!("gpucap-{}", location(region)),
    }
}

/// The capacity reservation an action creates, from its id and client token.
pub fn reservation_name(action: &str, client_token: &str) -> String {
    let hex: String = client_token
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .take(12)
        .collect();
    let room = MAX_NAME - "gpucap-".len() - 1 - hex.len();
    let mut s = slug(action);
    s.truncate(room);
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        format!("gpucap-{hex}")
    } else {
        format!("gpucap-{s}-{hex}")
    }
}

/// The VM scale set of pool `pool` (its on-demand one, or with `spot` its spot twin).
pub fn scale_set_name(pool: &str, spot: bool) -> String {
    let mut whole = slug(pool);
    if !whole.starts_with("gpucap-") {
        whole = format!("gpucap-{whole}");
    }
    if spot {
        whole.push_str("-spot");
    }
    if whole.len() <= MAX_NAME {
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

/// The computer name prefix of a scale set's VMs: `gpucap` and 8 hex digits of the scale
/// set's name (14 characters, which every OS takes; Azure appends each VM's own suffix).
pub fn computer_name_prefix(scale_set: &str) -> String {
    let hex: String = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, scale_set.as_bytes())
        .simple()
        .to_string()
        .chars()
        .take(8)
        .collect();
    format!("gpucap{hex}")
}

/// A tag name ARM accepts: forbidden characters replaced with `_`, at most 512 characters.
pub fn tag_key(key: &str) -> String {
    let mut k: String = key
        .chars()
        .map(|c| match c {
            '<' | '>' | '%' | '&' | '\\' | '?' | '/' => '_',
            c => c,
        })
        .collect();
    k.truncate(512);
    k
}

/// gpucap's tags as ARM stores them.
pub fn tags(id: &Idempotency) -> BTreeMap<String, String> {
    id.tags()
        .into_iter()
        .map(|(k, mut v)| {
            v.truncate(256);
            (tag_key(&k), v)
        })
        .collect()
}

/// The tags of an ARM resource document.
pub fn tags_of(v: &Value) -> BTreeMap<String, String> {
    v["tags"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// (group, reservation) from a capacity reservation's ARM id (or `group/name`).
pub fn parse_id(id: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
    if let [group, name] = parts.as_slice() {
        return Some((group.to_string(), name.to_string()));
    }
    let at = parts
        .iter()
        .position(|p| p.eq_ignore_ascii_case("capacityReservationGroups"))?;
    let group = parts.get(at + 1)?;
    if !parts
        .get(at + 2)?
        .eq_ignore_ascii_case("capacityReservations")
    {
        return None;
    }
    let name = parts.get(at + 3)?;
    Some((group.to_string(), name.to_string()))
}

/// gpucap's state word for an ARM `provisioningState`.
pub fn state_word(provisioning: &str) -> &'static str {
    match provisioning {
        "Succeeded" => "active",
        "Failed" | "Canceled" => "failed",
        "Deleting" => "cancelled",
        _ => "pending",
    }
}

/// A capacity reservation as ARM describes it (GET, list, or a PUT's answer).
pub fn reservation(region: &str, v: &Value) -> CloudResource {
    let props = &v["properties"];
    let tags = tags_of(v);
    let list_len = |x: &Value| x.as_array().map_or(0, Vec::len);
    // Instances in use: the VMs allocated in it when the instance view says (GET
    // `$expand=instanceView`), else the VMs associated with it.
    let in_use = if props["instanceView"]["utilizationInfo"].is_object() {
        list_len(&props["instanceView"]["utilizationInfo"]["virtualMachinesAllocated"])
    } else {
        list_len(&props["virtualMachinesAssociated"])
    };
    let created = props["timeCreated"]
        .as_str()
        .or_else(|| props["provisioningTime"].as_str())
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    CloudResource {
        id: v["id"].as_str().unwrap_or_default().to_string(),
        kind: ResourceKind::Reservation,
        placement: Placement {
            region: v["location"].as_str().unwrap_or(region).to_string(),
            zone: v["zones"][0].as_str().map(str::to_string),
            instance_type: v["sku"]["name"].as_str().unwrap_or_default().to_string(),
        },
        instances: v["sku"]["capacity"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        start: created,
        // Azure capacity reservations do not end by themselves: gpucap deletes them.
        end: None,
        state: state_word(props["provisioningState"].as_str().unwrap_or("")).to_string(),
        tags,
        in_use: Some(u32::try_from(in_use).unwrap_or(u32::MAX)),
    }
}

/// The capacity ARM gives a document's `sku` (a scale set's target size).
pub fn capacity(v: &Value) -> u32 {
    v["sku"]["capacity"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

/// A pool as gpucap describes it: its on-demand scale set (`on_demand`), the spot twin's
/// target added; `running` as counted, when it was.
pub fn pool(
    region: &str,
    on_demand: &Value,
    spot: Option<&Value>,
    running: Option<u32>,
) -> CloudResource {
    let tags = tags_of(on_demand);
    let id = tags
        .get(&tag_key(gpucap_provider::capacity::tag::ACTION))
        .cloned()
        .unwrap_or_else(|| on_demand["name"].as_str().unwrap_or_default().to_string());
    CloudResource {
        id,
        kind: ResourceKind::Pool,
        placement: Placement {
            region: on_demand["location"].as_str().unwrap_or(region).to_string(),
            zone: on_demand["zones"][0].as_str().map(str::to_string),
            instance_type: on_demand["sku"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        },
        instances: capacity(on_demand) + spot.map(capacity).unwrap_or(0),
        start: None,
        end: None,
        state: state_word(
            on_demand["properties"]["provisioningState"]
                .as_str()
                .unwrap_or(""),
        )
        .to_string(),
        tags,
        in_use: running,
    }
}

/// How many VMs are associated with a reservation (Azure deletes it only at zero).
pub fn associated(v: &Value) -> usize {
    v["properties"]["virtualMachinesAssociated"]
        .as_array()
        .map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_short_and_distinct() {
        let token = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let a = reservation_name(
            "reserve-h100-azure-azure-eastus-standard-nc40ads-h100-v5-8x-20270111t1200-7d",
            token,
        );
        assert!(a.len() <= MAX_NAME, "{a}");
        assert!(a.starts_with("gpucap-reserve-h100"));
        assert!(a.ends_with("-0f8fad5bd9cb"), "{a}");
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert_eq!(
            a,
            reservation_name(
                "reserve-h100-azure-azure-eastus-standard-nc40ads-h100-v5-8x-20270111t1200-7d",
                token
            )
        );
        let b = reservation_name("reserve-x#2", "1f8fad5b-d9cb-469f-a165-70867728950e");
        assert_eq!(b, "gpucap-reserve-x-2-1f8fad5bd9cb");
        assert_ne!(a, b);
        assert_eq!(group_name("East US", None), "gpucap-eastus");
        assert_eq!(group_name("eastus", Some("eastus-2")), "gpucap-eastus-z2");
    }

    #[test]
    fn scale_set_names_fit_and_stay_distinct() {
        assert_eq!(
            scale_set_name("gpucap-h100-azure-eastus-standard-nc40ads-h100-v5", false),
            "gpucap-h100-azure-eastus-standard-nc40ads-h100-v5"
        );
        assert_eq!(
            scale_set_name("gpucap-h100-azure-eastus-standard-nc40ads-h100-v5", true),
            "gpucap-h100-azure-eastus-standard-nc40ads-h100-v5-spot"
        );
        let long = "gpucap-a-very-long-pool-name-for-training-eastus-standard-nd96isr-h100-v5";
        let (a, b) = (scale_set_name(long, false), scale_set_name(long, true));
        assert!(a.len() <= MAX_NAME && b.len() <= MAX_NAME, "{a} {b}");
        assert_ne!(a, b);
        assert_eq!(a, scale_set_name(long, false));
        assert!(a.starts_with("gpucap-a-very-long"), "{a}");
        let p = computer_name_prefix(&a);
        assert_eq!(p.len(), 14);
        assert!(p.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn ids_parse_back_into_group_and_name() {
        let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/CapacityReservationGroups/g/capacityReservations/r";
        assert_eq!(parse_id(id), Some(("g".into(), "r".into())));
        assert_eq!(parse_id("g/r"), Some(("g".into(), "r".into())));
        assert_eq!(parse_id("cr-123"), None);
    }

    #[test]
    fn tag_keys_lose_only_forbidden_characters() {
        assert_eq!(tag_key("gpucap:plan"), "gpucap:plan");
        assert_eq!(tag_key("a/b?c"), "a_b_c");
    }

    #[test]
    fn a_described_reservation_says_what_runs_in_it() {
        let v = serde_json::json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/g/capacityReservations/r",
            "location": "westus", "zones": ["1"], "tags": {"managed-by": "gpucap"},
            "sku": {"name": "Standard_DS1_v2", "capacity": 4},
            "properties": {
                "provisioningState": "Succeeded",
                "timeCreated": "2021-06-27T01:02:38.3138469+00:00",
                "virtualMachinesAssociated": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
                "instanceView": {"utilizationInfo": {"currentCapacity": 5,
                    "virtualMachinesAllocated": [{"id": "a"}, {"id": "b"}]}}
            }
        });
        let r = reservation("westus", &v);
        assert_eq!(r.state, "active");
        assert_eq!(r.instances, 4);
        assert_eq!(r.in_use, Some(2));
        assert_eq!(r.placement.zone.as_deref(), Some("1"));
        assert!(r.managed_by_gpucap());
        assert!(r.start.is_some());
        assert_eq!(associated(&v), 3);
    }
}
