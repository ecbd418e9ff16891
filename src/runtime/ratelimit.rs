//! Client-side rate limiting of Kubernetes API requests (`--kube-api-qps`, `--kube-api-burst`).
//!
//! kube 5 has no built-in client rate limiter, so this is client-go's token bucket as a tower
//! layer: `burst` requests at once, refilled at `qps` per second, one per request (a watch costs
//! one when it starts). The bucket is `governor`'s GCRA limiter, which admits exactly what a
//! token bucket of that rate and size admits, on tokio's clock. The layer sits under kube's
//! request buffer, whose single worker drives `poll_ready` and `call` in turn, so waiting in
//! `poll_ready` queues requests in order, as client-go's limiter does.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// tokio's monotonic clock as governor reads it: the time since the limiter was made. Under a
/// paused tokio runtime it stands still like every other tokio timer.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// client-go's bucket as a governor quota: bursts of `burst` (at least 1), one more request every
/// `1/qps` seconds (a `qps` of 0 or below admits one request a year, never none).
pub fn quota(qps: f32, burst: u32) -> Quota {
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    let year = Duration::from_secs(365 * 24 * 3600);
    let period = if qps > 0.0 {
        Duration::try_from_secs_f64(1.0 / f64::from(qps)).map_or(year, |p| p.min(year))
    } else {
        year
    };
    // A period of at least one nanosecond is never refused.
    Quota::with_period(period.max(Duration::from_nanos(1)))
        .unwrap_or(Quota::per_second(NonZeroU32::MAX))
        .allow_burst(burst)
}

/// The limiter on some clock: the service uses [`TokioClock`], tests a fake one.
type Limiter<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// Takes a request's permit from `limiter`, or says how long until one is available.
fn try_take<C: Clock>(limiter: &Limiter<C>, clock: &C) -> Result<(), Duration> {
    limiter
        .check()
        .map_err(|not_until| not_until.wait_time_from(clock.now()))
}

/// The tower layer adding the rate limiter in front of a service.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitLayer {
    qps: f32,
    burst: u32,
}

impl RateLimitLayer {
    /// `qps` requests per second on average, bursts of up to `burst`.
    pub fn new(qps: f32, burst: u32) -> Self {
        Self { qps, burst }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        let clock = TokioClock::new();
        RateLimited {
            inner,
            limiter: RateLimiter::direct_with_clock(quota(self.qps, self.burst), clock),
            clock,
            sleep: None,
            permitted: false,
        }
    }
}

/// A service that spends one token per request.
pub struct RateLimited<S> {
    inner: S,
    limiter: Limiter<TokioClock>,
    clock: TokioClock,
    sleep: Option<Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.permitted {
            if let Some(sleep) = self.sleep.as_mut() {
                ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
            }
            match try_take(&self.limiter, &self.clock) {
                Ok(()) => self.permitted = true,
                Err(wait) => {
                    if wait >= Duration::from_secs(1) {
                        tracing::debug!(
                            wait_ms = wait.as_millis() as u64,
                            "Client-side throttling"
                        );
                    }
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    use governor::clock::FakeRelativeClock;

    fn fake_limiter(qps: f32, burst: u32) -> (Limiter<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (
            RateLimiter::direct_with_clock(quota(qps, burst), clock.clone()),
            clock,
        )
    }

    #[test]
    fn a_full_bucket_allows_a_burst_then_paces_at_qps() {
        let (limiter, clock) = fake_limiter(10.0, 3);
        for _ in 0..3 {
            assert_eq!(try_take(&limiter, &clock), Ok(()));
        }
        let wait = try_take(&limiter, &clock).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        clock.advance(Duration::from_millis(100));
        assert_eq!(try_take(&limiter, &clock), Ok(()));
        assert!(try_take(&limiter, &clock).is_err());
    }

    #[test]
    fn an_idle_bucket_refills_only_up_to_burst() {
        let (limiter, clock) = fake_limiter(100.0, 2);
        clock.advance(Duration::from_secs(60));
        assert_eq!(try_take(&limiter, &clock), Ok(()));
        assert_eq!(try_take(&limiter, &clock), Ok(()));
        assert!(try_take(&limiter, &clock).is_err());
    }

    #[test]
    fn fractional_qps_and_degenerate_flags_still_admit_requests() {
        let (limiter, clock) = fake_limiter(0.5, 0);
        assert_eq!(
            try_take(&limiter, &clock),
            Ok(()),
            "a burst of 0 counts as 1"
        );
        assert_eq!(try_take(&limiter, &clock), Err(Duration::from_secs(2)));
        let (limiter, clock) = fake_limiter(0.0, 1);
        assert_eq!(try_take(&limiter, &clock), Ok(()));
        assert!(try_take(&limiter, &clock).is_err());
    }

    /// Counts calls; always ready.
    struct Counter(u32);

    impl Service<()> for Counter {
        type Response = u32;
        type Error = Infallible;
        type Future = std::future::Ready<Result<u32, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, (): ()) -> Self::Future {
            self.0 += 1;
            std::future::ready(Ok(self.0))
        }
    }

    async fn send(service: &mut RateLimited<Counter>) -> u32 {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .unwrap();
        service.call(()).await.unwrap()
    }

    #[tokio::test]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let mut service = RateLimitLayer::new(20.0, 2).layer(Counter(0));
        let start = Instant::now();
        send(&mut service).await;
        send(&mut service).await;
        assert!(
            start.elapsed() < Duration::from_millis(40),
            "the burst goes through at once"
        );
        send(&mut service).await;
        assert!(
            start.elapsed() >= Duration::from_millis(45),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(send(&mut service).await, 4);
        assert!(
            start.elapsed() >= Duration::from_millis(95),
            "{:?}",
            start.elapsed()
        );
    }
}
