//! The cluster's certificate authorities and keys as CABPK generates and stores them
//! (`util/secret/certificates.go`), the admin kubeconfig core writes (`util/kubeconfig`), and the
//! etcd client certificate KCP makes for itself (`controlplane/kubeadm/internal/workload_cluster.go`,
//! `generateClientCert`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, PublicKeyData,
};
use serde_json::json;

/// The Secret type Cluster API gives the Secrets it owns (`clusterv1.ClusterSecretType`).
pub const CLUSTER_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";
/// The label naming a Secret's cluster (`clusterv1.ClusterNameLabel`).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Where kubeadm keeps its PKI (`secret.DefaultCertificatesDir`).
pub const CERTIFICATES_DIR: &str = "/etc/kubernetes/pki";

/// What a certificate is for: its Secret's name suffix (`secret.Purpose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The cluster CA (`<cluster>-ca`).
    ClusterCa,
    /// The etcd CA (`<cluster>-etcd`).
    EtcdCa,
    /// The front-proxy CA (`<cluster>-proxy`).
    FrontProxyCa,
    /// The service-account key pair (`<cluster>-sa`).
    ServiceAccount,
}

impl Purpose {
    /// The Secret name suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            Purpose::ClusterCa => "ca",
            Purpose::EtcdCa => "etcd",
            Purpose::FrontProxyCa => "proxy",
            Purpose::ServiceAccount => "sa",
        }
    }

    /// The files kubeadm reads, certificate (or public key) then private key
    /// (`NewCertificatesForInitialControlPlane`).
    pub fn files(self) -> (String, String) {
        let (crt, key) = match self {
            Purpose::ClusterCa => ("ca.crt", "ca.key"),
            Purpose::EtcdCa => ("etcd/ca.crt", "etcd/ca.key"),
            Purpose::FrontProxyCa => ("front-proxy-ca.crt", "front-proxy-ca.key"),
            Purpose::ServiceAccount => ("sa.pub", "sa.key"),
        };
        (
            format!("{CERTIFICATES_DIR}/{crt}"),
            format!("{CERTIFICATES_DIR}/{key}"),
        )
    }
}

/// The Secret name of a purpose (`secret.Name`).
pub fn secret_name(cluster: &str, purpose: Purpose) -> String {
    format!("{cluster}-{}", purpose.suffix())
}

/// A self-signed certificate authority: its certificate and the key that signs with it.
pub struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for Authority {
    /// Never shows the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A CA as CABPK's `newSelfSignedCACert` makes it: CN `kubernetes`, a CA without
    /// intermediates (path length 0), for signing, valid from today for ten years.
    pub fn generate() -> Authority {
        let key = KeyPair::generate().expect("an ECDSA P-256 key");
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name("kubernetes", &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
        ];
        set_validity(&mut params, 10);
        Authority {
            issuer: CertifiedIssuer::self_signed(params, key).expect("a self-signed CA"),
        }
    }

    /// The certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// The certificate, DER.
    pub fn cert_der(&self) -> Vec<u8> {
        self.issuer.der().to_vec()
    }

    /// The private key, PEM (PKCS#8).
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// kubeadm's `caCertHashes` entry for this CA: `sha256:` and the hex SHA-256 of its
    /// SubjectPublicKeyInfo (CABPK's `hashCert`, kubeadm's `pubkeypin.Hash`).
    pub fn spki_hash(&self) -> String {
        spki_hash(&self.issuer.key().subject_public_key_info())
    }

    /// A client certificate signed by this CA with a fresh key, valid from today for a year
    /// (core's `certs.Config.NewSignedCert`).
    pub fn client_certificate(&self, common_name: &str, organizations: &[&str]) -> ClientCert {
        let key = KeyPair::generate().expect("an ECDSA P-256 key");
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name, organizations);
        params.key_usages = vec![
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, 1);
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a client certificate");
        ClientCert {
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }
}

/// A client certificate and its key.
pub struct ClientCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The private key, DER (PKCS#8).
    pub key_der: Vec<u8>,
}

/// The service-account signing key pair (`generateServiceAccountKeys`): stored as `tls.crt`
/// (the public key) and `tls.key`.
pub struct ServiceAccountKey {
    key: KeyPair,
}

impl ServiceAccountKey {
    /// A fresh key pair.
    pub fn generate() -> ServiceAccountKey {
        ServiceAccountKey {
            key: KeyPair::generate().expect("an ECDSA P-256 key"),
        }
    }

    /// The public key, PEM (`PUBLIC KEY`).
    pub fn public_pem(&self) -> String {
        self.key.public_key_pem()
    }

    /// The private key, PEM (PKCS#8).
    pub fn private_pem(&self) -> String {
        self.key.serialize_pem()
    }
}

/// Everything KCP generates for a new cluster (`reconcileClusterCertificates`:
/// `NewCertificatesForInitialControlPlane(...).LookupOrGenerateCached`).
pub struct ClusterCertificates {
    /// The cluster CA: the API server's and the kubelets' certificates, the admin kubeconfig.
    pub ca: Authority,
    /// The etcd CA: etcd's server and peer certificates, the API server's etcd client.
    pub etcd: Authority,
    /// The front-proxy CA (aggregation layer).
    pub front_proxy: Authority,
    /// The service-account signing key pair.
    pub service_account: ServiceAccountKey,
}

impl ClusterCertificates {
    /// Generates the three CAs and the service-account key pair.
    pub fn generate() -> ClusterCertificates {
        ClusterCertificates {
            ca: Authority::generate(),
            etcd: Authority::generate(),
            front_proxy: Authority::generate(),
            service_account: ServiceAccountKey::generate(),
        }
    }

    /// `(purpose, certificate or public key PEM, private key PEM)` in the order CABPK writes
    /// them to the node (`Certificates.AsFiles`: ca, etcd, front-proxy, sa).
    pub fn pairs(&self) -> Vec<(Purpose, String, String)> {
        vec![
            (Purpose::ClusterCa, self.ca.cert_pem(), self.ca.key_pem()),
            (Purpose::EtcdCa, self.etcd.cert_pem(), self.etcd.key_pem()),
            (
                Purpose::FrontProxyCa,
                self.front_proxy.cert_pem(),
                self.front_proxy.key_pem(),
            ),
            (
                Purpose::ServiceAccount,
                self.service_account.public_pem(),
                self.service_account.private_pem(),
            ),
        ]
    }

    /// The four Secrets as `Certificate.AsSecret` shapes them: `<cluster>-<purpose>` with
    /// `tls.crt` and `tls.key`, type `cluster.x-k8s.io/secret`, labelled with the cluster name.
    pub fn secrets(&self, cluster: &str, namespace: &str) -> Vec<Secret> {
        self.pairs()
            .into_iter()
            .map(|(purpose, crt, key)| {
                cluster_secret(
                    &secret_name(cluster, purpose),
                    namespace,
                    cluster,
                    [("tls.crt", crt), ("tls.key", key)],
                )
            })
            .collect()
    }
}

/// A Secret of the cluster as Cluster API writes them: type `cluster.x-k8s.io/secret`, the
/// cluster-name label, `data` as given.
pub fn cluster_secret<'a>(
    name: &str,
    namespace: &str,
    cluster: &str,
    data: impl IntoIterator<Item = (&'a str, String)>,
) -> Secret {
    let mut secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {CLUSTER_NAME_LABEL: cluster}
        },
        "type": CLUSTER_SECRET_TYPE
    }))
    .expect("a Secret");
    secret.data = Some(
        data.into_iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
            .collect::<BTreeMap<_, _>>(),
    );
    secret
}

/// The admin kubeconfig core's `kubeconfig.New` writes: cluster `<cluster>` at `server` with the
/// CA, user `<cluster>-admin` with a client certificate (CN `kubernetes-admin`, O
/// `system:masters`) signed by the CA, context `<cluster>-admin@<cluster>`, current.
pub fn admin_kubeconfig(cluster: &str, server: &str, ca: &Authority) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let client = ca.client_certificate("kubernetes-admin", &["system:masters"]);
    let user = format!("{cluster}-admin");
    let context = format!("{user}@{cluster}");
    // clientcmd.Write's layout (keys sorted, as its YAML marshalling does).
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: {cluster}\ncontexts:\n- context:\n    cluster: {cluster}\n    user: {user}\n  name: {context}\ncurrent-context: {context}\nkind: Config\npreferences: {{}}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\n",
        ca = b64(&ca.cert_pem()),
        crt = b64(&client.cert_pem),
        key = b64(&client.key_pem),
    )
}

/// `sha256:<hex>` of a DER SubjectPublicKeyInfo.
pub fn spki_hash(spki_der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, spki_der);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn distinguished_name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for organization in organizations {
        name.push(DnType::OrganizationName, *organization);
    }
    name.push(DnType::CommonName, common_name);
    name
}

/// Valid from today (midnight UTC: a little before now, as Cluster API's five minutes) for
/// `years`.
fn set_validity(params: &mut CertificateParams, years: i16) {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let (year, month, day) = (
        i32::from(today.year()),
        today.month().unsigned_abs(),
        today.day().unsigned_abs().min(28),
    );
    params.not_before = rcgen::date_time_ymd(year, month, day);
    params.not_after = rcgen::date_time_ymd(year + i32::from(years), month, day);
}
