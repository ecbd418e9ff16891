//! The admission and conversion webhooks, served over HTTPS on `--webhook-port`.
//!
//! - `/convert`: ConversionReview (`apiextensions.k8s.io/v1`) for every kind, v1beta1 ⇄ v1beta2
//!   through [`crate::api::conversion::convert_object`] ([`conversion`]).
//! - `/mutate-infrastructure-cluster-x-k8s-io-v1beta2-<kind>` and
//!   `/validate-infrastructure-cluster-x-k8s-io-v1beta2-<kind>`: AdmissionReview
//!   (`admission.k8s.io/v1`) running CAPD's defaulting and validation rules ([`rules`], decoded
//!   and answered by [`admission`]). Denials are `422 Invalid` statuses listing every field.
//! - [`certs`]: the serving certificate from `--webhook-cert-dir`, reloaded when the files change.
//! - [`server`]: the axum router and the TLS server.
//!
//! The paths are those of CAPD, so `config/webhook/` matches what Cluster API users know.

pub mod admission;
pub mod certs;
pub mod conversion;
pub mod field;
pub mod meta;
pub mod reference;
pub mod review;
pub mod rules;
pub mod server;

pub use certs::{CertificateError, ServingCertificate};
pub use server::{
    WebhookConfig, WebhookError, WebhookServer, router, serve_once_certificate_exists,
};

use serde::Serialize;

/// Path of the conversion webhook (the CRDs' `spec.conversion.webhook.clientConfig.service.path`).
pub const CONVERT_PATH: &str = "/convert";

/// Largest AdmissionReview accepted: an object may be 3 MiB (the API server's request limit) and
/// a review of an update carries it twice; controller-runtime allows 7 MiB for the same reason.
pub const ADMISSION_BODY_LIMIT: usize = 7 * 1024 * 1024;

/// Largest ConversionReview accepted. The API server converts the items of a list in one review,
/// so this is larger than a single object, yet bounded so that no request can exhaust memory.
pub const CONVERSION_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// The kinds with admission webhooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// DockerCluster.
    DockerCluster,
    /// DockerClusterTemplate.
    DockerClusterTemplate,
    /// DockerMachine.
    DockerMachine,
    /// DockerMachineTemplate.
    DockerMachineTemplate,
    /// DockerMachinePool.
    DockerMachinePool,
    /// DockerMachinePoolTemplate.
    DockerMachinePoolTemplate,
    /// DevCluster.
    DevCluster,
    /// DevClusterTemplate.
    DevClusterTemplate,
    /// DevMachine.
    DevMachine,
    /// DevMachineTemplate.
    DevMachineTemplate,
    /// DevMachinePool.
    DevMachinePool,
    /// DevMachinePoolTemplate.
    DevMachinePoolTemplate,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 12] = [
        Kind::DockerCluster,
        Kind::DockerClusterTemplate,
        Kind::DockerMachine,
        Kind::DockerMachineTemplate,
        Kind::DockerMachinePool,
        Kind::DockerMachinePoolTemplate,
        Kind::DevCluster,
        Kind::DevClusterTemplate,
        Kind::DevMachine,
        Kind::DevMachineTemplate,
        Kind::DevMachinePool,
        Kind::DevMachinePoolTemplate,
    ];

    /// The kind's name (`DockerCluster`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::DockerCluster => "DockerCluster",
            Kind::DockerClusterTemplate => "DockerClusterTemplate",
            Kind::DockerMachine => "DockerMachine",
            Kind::DockerMachineTemplate => "DockerMachineTemplate",
            Kind::DockerMachinePool => "DockerMachinePool",
            Kind::DockerMachinePoolTemplate => "DockerMachinePoolTemplate",
            Kind::DevCluster => "DevCluster",
            Kind::DevClusterTemplate => "DevClusterTemplate",
            Kind::DevMachine => "DevMachine",
            Kind::DevMachineTemplate => "DevMachineTemplate",
            Kind::DevMachinePool => "DevMachinePool",
            Kind::DevMachinePoolTemplate => "DevMachinePoolTemplate",
        }
    }

    /// The kind's resource name (`dockerclusters`).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::DockerCluster => "dockerclusters",
            Kind::DockerClusterTemplate => "dockerclustertemplates",
            Kind::DockerMachine => "dockermachines",
            Kind::DockerMachineTemplate => "dockermachinetemplates",
            Kind::DockerMachinePool => "dockermachinepools",
            Kind::DockerMachinePoolTemplate => "dockermachinepooltemplates",
            Kind::DevCluster => "devclusters",
            Kind::DevClusterTemplate => "devclustertemplates",
            Kind::DevMachine => "devmachines",
            Kind::DevMachineTemplate => "devmachinetemplates",
            Kind::DevMachinePool => "devmachinepools",
            Kind::DevMachinePoolTemplate => "devmachinepooltemplates",
        }
    }
}

/// One admission endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// Defaulting (mutating webhook).
    Mutate(Kind),
    /// Validation (validating webhook).
    Validate(Kind),
}

impl Endpoint {
    /// The endpoints served: CAPD's (defaulting for the cluster kinds, validation for the
    /// cluster and machine kinds, both for the Dev cluster and machine kinds) and validation for
    /// the pool kinds, Docker and Dev, which CAPD does not check. Nothing of a Docker machine or
    /// a pool has a default, so they get no defaulting webhook; a Dev machine has one, its
    /// backend.
    pub const ALL: [Endpoint; 18] = [
        Endpoint::Mutate(Kind::DockerCluster),
        Endpoint::Mutate(Kind::DockerClusterTemplate),
        Endpoint::Validate(Kind::DockerCluster),
        Endpoint::Validate(Kind::DockerClusterTemplate),
        Endpoint::Validate(Kind::DockerMachine),
        Endpoint::Validate(Kind::DockerMachineTemplate),
        Endpoint::Validate(Kind::DockerMachinePool),
        Endpoint::Validate(Kind::DockerMachinePoolTemplate),
        Endpoint::Mutate(Kind::DevCluster),
        Endpoint::Mutate(Kind::DevClusterTemplate),
        Endpoint::Mutate(Kind::DevMachine),
        Endpoint::Mutate(Kind::DevMachineTemplate),
        Endpoint::Validate(Kind::DevCluster),
        Endpoint::Validate(Kind::DevClusterTemplate),
        Endpoint::Validate(Kind::DevMachine),
        Endpoint::Validate(Kind::DevMachineTemplate),
        Endpoint::Validate(Kind::DevMachinePool),
        Endpoint::Validate(Kind::DevMachinePoolTemplate),
    ];

    /// The kind the endpoint judges.
    pub fn kind(self) -> Kind {
        match self {
            Endpoint::Mutate(kind) | Endpoint::Validate(kind) => kind,
        }
    }

    /// The HTTP path, as controller-runtime derives it
    /// (`/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockermachine`).
    pub fn path(self) -> String {
        let verb = match self {
            Endpoint::Mutate(_) => "mutate",
            Endpoint::Validate(_) => "validate",
        };
        let kind = self.kind().name().to_lowercase();
        format!("/{verb}-infrastructure-cluster-x-k8s-io-v1beta2-{kind}")
    }
}

/// Process settings the rules depend on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The `ClusterTopology` feature gate is on (DockerClusterTemplates and DevClusterTemplates
    /// may be created).
    pub cluster_topology: bool,
}

/// An HTTP answer: status and JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// JSON body.
    pub body: Vec<u8>,
}

impl Reply {
    /// `value` as JSON with `status`; a value that cannot be encoded becomes a 500.
    pub fn json<T: Serialize>(status: u16, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => Self { status, body },
            Err(error) => {
                tracing::error!(error = %error, "Cannot encode a webhook response");
                Self {
                    status: 500,
                    body: br#"{"error":"failed to encode the response"}"#.to_vec(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
