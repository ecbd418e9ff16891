//! watch: initial events, replay from a resourceVersion, live events, bookmarks, 410 Expired.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::common::{Req, Selectors, partial, served};
use crate::error::{ApiError, ApiResult};
use crate::state::Shared;
use crate::store::{EventType, StoreEvent};

type Tx = mpsc::Sender<Result<Bytes, Infallible>>;

struct Watch {
    req: Req,
    selectors: Selectors,
    bookmarks: bool,
    last_rv: u64,
    sent_headers: bool,
}

impl Watch {
    fn in_scope(&self, object: &Value) -> bool {
        match &self.req.namespace {
            Some(ns) => object["metadata"]["namespace"].as_str() == Some(ns),
            None => true,
        }
    }

    /// The event type a watcher with selectors sees for a store event, if any.
    fn visible(&self, event: &StoreEvent) -> Option<EventType> {
        if !self.in_scope(&event.object) {
            return None;
        }
        let now = self.selectors.matches(&event.object);
        match event.kind {
            EventType::Added => now.then_some(EventType::Added),
            EventType::Deleted => now.then_some(EventType::Deleted),
            EventType::Modified => {
                let before = event
                    .old
                    .as_ref()
                    .is_some_and(|o| self.selectors.matches(o));
                match (before, now) {
                    (true, true) => Some(EventType::Modified),
                    (true, false) => Some(EventType::Deleted),
                    (false, true) => Some(EventType::Added),
                    (false, false) => None,
                }
            }
        }
    }

    async fn send_object(&mut self, tx: &Tx, kind: &str, stored: &Value, rv: u64) -> bool {
        let object = match served(&self.req.def, stored, &self.req.version).await {
            Ok(o) => o,
            Err(e) => {
                send_line(tx, &json!({"type": "ERROR", "object": e.status()})).await;
                return false;
            }
        };
        self.last_rv = self.last_rv.max(rv);
        let object = match self.req.table {
            Some(include) => {
                let metadata = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                let headers = !self.sent_headers;
                self.sent_headers = true;
                crate::table::table(
                    &self.req.def,
                    &self.req.version,
                    &[object],
                    metadata,
                    include,
                    headers,
                )
            }
            None if self.req.partial => partial(&object),
            None => object,
        };
        send_line(tx, &json!({"type": kind, "object": object})).await
    }

    async fn send_event(&mut self, tx: &Tx, event: &StoreEvent) -> bool {
        if event.rv <= self.last_rv {
            return true;
        }
        match self.visible(event) {
            Some(kind) => {
                self.send_object(tx, kind.as_str(), &event.object, event.rv)
                    .await
            }
            None => {
                self.last_rv = event.rv;
                true
            }
        }
    }

    async fn send_bookmark(&mut self, tx: &Tx, rv: u64, initial_end: bool) -> bool {
        let rv = rv.max(self.last_rv);
        self.last_rv = rv;
        // A metadata-only watch gets its bookmarks as PartialObjectMetadata too, as every other
        // event: client-go decodes them all into that one type.
        let (kind, api_version) = if self.req.partial && self.req.table.is_none() {
            (
                "PartialObjectMetadata".to_string(),
                "meta.k8s.io/v1".to_string(),
            )
        } else {
            (self.req.def.kind.clone(), self.req.api_version())
        };
        let object = watchlist::bookmark(&api_version, &kind, rv, initial_end);
        send_line(tx, &json!({"type": "BOOKMARK", "object": object})).await
    }
}

async fn send_line(tx: &Tx, v: &Value) -> bool {
    let mut line = v.to_string();
    line.push('\n');
    tx.send(Ok(Bytes::from(line))).await.is_ok()
}

/// WATCH of a resource.
pub async fn watch(shared: &Arc<Shared>, req: &Req) -> ApiResult<Response> {
    let selectors = Selectors::parse(req)?;
    // Where the watch starts, and what kube-apiserver refuses, are the rules shared with the
    // in-memory backend (the `watchlist` crate).
    let options = watchlist::ListOptions::from_query(req.watch_prefix, |k| req.param(k))
        .map_err(ApiError::refused)?;
    options.validate().map_err(ApiError::refused)?;
    let bookmarks = options.allow_watch_bookmarks;
    let timeout = match req.param("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        None => Duration::from_secs(1800),
    };
    let key = req.def.storage.clone();
    let mut store = shared.store.lock().await;
    let current = store.rv();
    let mut initial: Vec<Arc<Value>> = Vec::new();
    let mut replay: Vec<Arc<StoreEvent>> = Vec::new();
    let mut refused: Option<ApiError> = None;
    let mut start = current;
    let mut end_bookmark = false;
    match options.start(current) {
        Ok(watchlist::Start::Snapshot { end_bookmark: end }) => {
            initial = store.list(&key, req.namespace.as_deref());
            end_bookmark = end;
        }
        Ok(watchlist::Start::After(rv)) => match store.events_since(&key, rv) {
            Ok(events) => {
                replay = events;
                start = rv;
            }
            Err(oldest) => refused = Some(ApiError::refused(watchlist::expired(rv, oldest))),
        },
        Err(too_large) => refused = Some(ApiError::refused(too_large)),
    }
    let mut rx = store.subscribe(&key);
    drop(store);
    let (tx, body_rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let mut w = Watch {
        req: req.clone(),
        selectors,
        bookmarks,
        last_rv: start,
        sent_headers: false,
    };
    let shared = shared.clone();
    let bookmark_every = shared.bookmark_interval;
    let mut dropped = shared.watch_epoch.subscribe();
    tokio::spawn(async move {
        if let Some(err) = refused {
            send_line(&tx, &json!({"type": "ERROR", "object": err.status()})).await;
            return;
        }
        let shutdown = shared.shutdown.clone();
        for object in &initial {
            if w.selectors.matches(object) && !w.send_object(&tx, "ADDED", object, 0).await {
                return;
            }
        }
        if replay.is_empty() {
            w.last_rv = w.last_rv.max(current);
        }
        if end_bookmark && !w.send_bookmark(&tx, current, true).await {
            return;
        }
        for event in &replay {
            if !w.send_event(&tx, event).await {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.tick().await;
        loop {
            tokio::select! {
                event = rx.recv() => {
                    let Some(event) = event else { return };
                    if !w.send_event(&tx, &event).await {
                        return;
                    }
                }
                _ = ticker.tick(), if w.bookmarks => {
                    let rv = shared.store.lock().await.rv();
                    while let Ok(event) = rx.try_recv() {
                        if !w.send_event(&tx, &event).await {
                            return;
                        }
                    }
                    if !w.send_bookmark(&tx, rv, false).await {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = crate::state::until_shutdown(shutdown.clone()) => return,
                // Handle::drop_watches, or a restart: the stream ends as a dropped connection would.
                _ = dropped.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let stream =
        futures::stream::unfold(
            body_rx,
            |mut rx| async move { rx.recv().await.map(|b| (b, rx)) },
        );
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}
