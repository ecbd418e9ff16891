//! Client-side rate limiting of Kubernetes API requests (`--kube-api-qps`, `--kube-api-burst`).
//!
//! kube 5 has no built-in client rate limiter, so this is client-go's token bucket as a tower
//! layer: `burst` tokens, refilled at `qps` per second, one token per request (a watch costs one
//! when it starts). The layer sits under kube's request buffer, whose single worker drives
//! `poll_ready` and `call` in turn, so waiting for a token in `poll_ready` queues requests in
//! order, as client-go's limiter does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// A token bucket on a caller-supplied clock.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `qps` per second.
    pub fn new(qps: f32, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: f64::from(qps).max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token, or says how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The tower layer adding a [`TokenBucket`] in front of a service.
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
        RateLimited {
            inner,
            bucket: TokenBucket::new(self.qps, self.burst, Instant::now()),
            sleep: None,
            permitted: false,
        }
    }
}

/// A service that spends one token per request.
pub struct RateLimited<S> {
    inner: S,
    bucket: TokenBucket,
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
            match self.bucket.try_take(Instant::now()) {
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

    #[test]
    fn a_full_bucket_allows_a_burst_then_paces_at_qps() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(bucket.try_take(t0), Ok(()));
        }
        let wait = bucket.try_take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(bucket.try_take(t0 + Duration::from_millis(100)), Ok(()));
        assert!(bucket.try_take(t0 + Duration::from_millis(100)).is_err());
    }

    #[test]
    fn an_idle_bucket_refills_only_up_to_burst() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(100.0, 2, t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(bucket.try_take(later), Ok(()));
        assert_eq!(bucket.try_take(later), Ok(()));
        assert!(bucket.try_take(later).is_err());
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
