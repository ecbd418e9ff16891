//! The fake workload clusters of the in-memory backend, as the cluster and machine controllers
//! share them: one per Cluster, keyed by `<namespace>/<Cluster name>`.

use std::sync::Arc;

use crate::controllers::context::Context;
use crate::controllers::error::{Error, Result};
use crate::inmemory::WorkloadCluster;

/// Key of a fake workload cluster: `<namespace>/<Cluster name>` (CAPD's resource group).
pub fn cluster_key(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{cluster}")
}

/// The fake workload cluster of `key` (made when missing), on `port` when the endpoint already
/// names one (`0`: none yet).
///
/// # Errors
/// [`Error::InMemory`] when no port is free.
pub fn reserve(ctx: &Context, key: &str, port: i32) -> Result<Arc<WorkloadCluster>> {
    let port = u16::try_from(port).ok().filter(|p| *p > 0);
    ctx.in_memory
        .ensure(key, port)
        .map_err(|source| Error::InMemory {
            action: "reserve a listener".into(),
            cluster: key.to_string(),
            source,
        })
}
