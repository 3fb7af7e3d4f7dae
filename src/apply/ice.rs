//! The insufficient-capacity cache: a placement (region, zone, instance type) that just
//! answered "no capacity" is not asked again for a few minutes, as Karpenter does with its
//! ICE cache (3 minutes). Without it, every later action for the same place would make the
//! same doomed call; with it they fail fast, naming when the cloud said no.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use gpucap_provider::capacity::Placement;

/// Placements that recently had no capacity.
#[derive(Debug)]
pub struct IceCache {
    ttl: Duration,
    seen: Mutex<HashMap<Placement, (Instant, String)>>,
}

impl IceCache {
    pub fn new(ttl: Duration) -> IceCache {
        IceCache {
            ttl,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Remembers that `placement` had no capacity, with the cloud's words.
    pub fn remember(&self, placement: &Placement, message: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert(placement.clone(), (Instant::now(), message.to_string()));
        }
    }

    /// The cloud's words if `placement` had no capacity within the time to live, and how long
    /// ago.
    pub fn check(&self, placement: &Placement) -> Option<(Duration, String)> {
        let mut seen = self.seen.lock().ok()?;
        let (at, message) = seen.get(placement)?.clone();
        let age = at.elapsed();
        if age >= self.ttl {
            seen.remove(placement);
            return None;
        }
        Some((age, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(zone: &str) -> Placement {
        Placement {
            region: "us-east-1".into(),
            zone: Some(zone.into()),
            instance_type: "p5.48xlarge".into(),
        }
    }

    #[test]
    fn remembers_a_placement_until_its_time_to_live_runs_out() {
        let cache = IceCache::new(Duration::from_millis(50));
        cache.remember(&place("us-east-1a"), "no p5 capacity");
        assert_eq!(
            cache.check(&place("us-east-1a")).map(|(_, m)| m),
            Some("no p5 capacity".to_string())
        );
        assert!(cache.check(&place("us-east-1b")).is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.check(&place("us-east-1a")).is_none());
    }
}
