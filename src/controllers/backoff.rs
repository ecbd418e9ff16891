//! Per-object error backoff: each failure of the same object doubles its retry delay, a success
//! resets it. Objects that keep failing never turn into a tight requeue loop.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// First retry delay after a failure.
pub const BASE_DELAY: Duration = Duration::from_millis(500);

/// Longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// Failure counts per object key (`namespace/name`).
#[derive(Debug, Default)]
pub struct ErrorBackoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl ErrorBackoff {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failure of `key` and returns the delay before its next attempt.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.lock();
        let count = failures.entry(key.to_string()).or_default();
        *count = count.saturating_add(1);
        delay_for(*count)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn succeeded(&self, key: &str) {
        self.lock().remove(key);
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
        assert_eq!(backoff.failed("ns/a"), Duration::from_millis(500));
        assert_eq!(backoff.failed("ns/a"), Duration::from_secs(1));
        assert_eq!(backoff.failed("ns/a"), Duration::from_secs(2));
        assert_eq!(
            backoff.failed("ns/b"),
            Duration::from_millis(500),
            "objects back off independently"
        );
        backoff.succeeded("ns/a");
        assert_eq!(backoff.failed("ns/a"), Duration::from_millis(500));
        assert_eq!(delay_for(40), MAX_DELAY);
    }
}
