//! Per-object error backoff: each failure of the same object doubles its retry delay, a success
//! resets it. Objects that keep failing never turn into a tight requeue loop.
//!
//! When the API server said how long to wait (`Retry-After`), the object is also held until then:
//! a watch event in the meantime does not bring its reconcile forward, as it would after an
//! ordinary failure.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// First retry delay after a failure.
pub const BASE_DELAY: Duration = Duration::from_millis(500);

/// Longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// Failure counts per object key (`namespace/name`), and until when the API server asked us to
/// leave an object alone.
#[derive(Debug, Default)]
pub struct ErrorBackoff {
    failures: Mutex<HashMap<String, u32>>,
    held: Mutex<HashMap<String, Instant>>,
}

impl ErrorBackoff {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failure of `key` and returns the delay before its next attempt: its backoff, or
    /// the API server's `retry_after` when that is longer, in which case the object is held until
    /// then ([`ErrorBackoff::held_for`]).
    pub fn failed(&self, key: &str, retry_after: Option<Duration>) -> Duration {
        let mut failures = self.lock();
        let count = failures.entry(key.to_string()).or_default();
        *count = count.saturating_add(1);
        let backoff = delay_for(*count);
        match retry_after {
            Some(asked) if asked > backoff => {
                self.held().insert(key.to_string(), Instant::now() + asked);
                asked
            }
            _ => backoff,
        }
    }

    /// How much longer `key` is held by the API server's `Retry-After`, if at all.
    pub fn held_for(&self, key: &str) -> Option<Duration> {
        let mut held = self.held();
        let until = *held.get(key)?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            held.remove(key);
            return None;
        }
        Some(left)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn succeeded(&self, key: &str) {
        self.lock().remove(key);
        self.held().remove(key);
    }
}

/// The delay after `failures` consecutive failures: 0.5 s, 1 s, 2 s, ... up to [`MAX_DELAY`].
pub fn delay_for(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    BASE_DELAY.saturating_mul(1u32 << exponent).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_on_success() {
        let backoff = ErrorBackoff::new();
        assert_eq!(backoff.failed("ns/a", None), Duration::from_millis(500));
        assert_eq!(backoff.failed("ns/a", None), Duration::from_secs(1));
        assert_eq!(backoff.failed("ns/a", None), Duration::from_secs(2));
        assert_eq!(
            backoff.failed("ns/b", None),
            Duration::from_millis(500),
            "objects back off independently"
        );
        backoff.succeeded("ns/a");
        assert_eq!(backoff.failed("ns/a", None), Duration::from_millis(500));
        assert_eq!(delay_for(40), MAX_DELAY);
        assert_eq!(
            backoff.held_for("ns/a"),
            None,
            "an ordinary failure holds nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_longer_retry_after_holds_the_object_until_it_passes() {
        let backoff = ErrorBackoff::new();
        let asked = Some(Duration::from_secs(3));
        assert_eq!(backoff.failed("ns/a", asked), Duration::from_secs(3));
        assert_eq!(backoff.held_for("ns/a"), Some(Duration::from_secs(3)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(backoff.held_for("ns/a"), Some(Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(backoff.held_for("ns/a"), None);

        // A shorter Retry-After than the backoff changes nothing.
        assert_eq!(
            backoff.failed("ns/b", Some(Duration::from_millis(100))),
            Duration::from_millis(500)
        );
        assert_eq!(backoff.held_for("ns/b"), None);

        backoff.failed("ns/c", asked);
        backoff.succeeded("ns/c");
        assert_eq!(
            backoff.held_for("ns/c"),
            None,
            "a success releases the hold"
        );
    }
}
