//! KCP's view of a stacked etcd: a client certificate of its own signed by the etcd CA
//! (`generateClientCert`, CN `cluster-api.x-k8s.io`), talking to the members kubeadm started on
//! the control plane nodes. KCP dials through the API server to the etcd Pods' port 2379; the suite
//! runs on the Docker host, where the node network is routed, and dials the nodes' addresses. It
//! speaks etcd's JSON gateway (`/v3/...`, same messages as the gRPC API) instead of gRPC.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::certs::Authority;

/// etcd's client port.
pub const ETCD_CLIENT_PORT: u16 = 2379;

/// One etcd member (`etcdserverpb.Member`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member ID.
    pub id: u64,
    /// The member name: kubeadm names it after the node.
    pub name: String,
}

/// What [`EtcdClient::remove_member_for_node`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The removed member.
    pub member: Member,
    /// The member that took over the leadership from it, when it led.
    pub leadership_moved_to: Option<String>,
}

/// A client of a cluster's etcd members, authenticated with a certificate of the etcd CA.
pub struct EtcdClient {
    tls: Arc<rustls::ClientConfig>,
}

impl EtcdClient {
    /// A client with a fresh certificate signed by `etcd_ca`, trusting only `etcd_ca`.
    pub fn new(etcd_ca: &Authority) -> EtcdClient {
        let client = etcd_ca.client_certificate("cluster-api.x-k8s.io", &[]);
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(etcd_ca.cert_der()))
            .expect("the etcd CA as a trust anchor");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_client_auth_cert(
                vec![CertificateDer::from(client.cert_der)],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(client.key_der)),
            )
            .expect("a client certificate");
        EtcdClient { tls: Arc::new(tls) }
    }

    /// The members, as the member at `address` sees them (`Members`: goes through consensus).
    pub async fn members(&self, address: &str) -> Result<Vec<Member>, String> {
        let answer = self
            .call(address, "/v3/cluster/member/list", json!({}))
            .await?;
        answer["members"]
            .as_array()
            .map(|members| {
                members
                    .iter()
                    .filter_map(|m| {
                        Some(Member {
                            id: uint64(&m["ID"])?,
                            name: m["name"].as_str().unwrap_or_default().to_string(),
                        })
                    })
                    .collect()
            })
            .ok_or_else(|| format!("no members in {answer}"))
    }

    /// The member ID of the leader, as the member at `address` knows it.
    pub async fn leader(&self, address: &str) -> Result<u64, String> {
        let answer = self
            .call(address, "/v3/maintenance/status", json!({}))
            .await?;
        uint64(&answer["leader"]).ok_or_else(|| format!("no leader in {answer}"))
    }

    /// Removes a member, asking the member at `address`.
    pub async fn remove_member(&self, address: &str, id: u64) -> Result<(), String> {
        self.call(
            address,
            "/v3/cluster/member/remove",
            json!({"ID": id.to_string()}),
        )
        .await
        .map(drop)
    }

    /// Moves the leadership to `target`, asking the leader at `leader_address`.
    pub async fn move_leader(&self, leader_address: &str, target: u64) -> Result<(), String> {
        self.call(
            leader_address,
            "/v3/maintenance/transfer-leadership",
            json!({"targetID": target.to_string()}),
        )
        .await
        .map(drop)
    }

    /// KCP's scale-down of a stacked etcd for the control plane Node `node` at `node_address`:
    /// the leadership moves to the newest remaining member when `node` leads
    /// (`ForwardEtcdLeadership`), then its member is removed through the first remaining member
    /// that answers (`RemoveEtcdMemberForMachine`). `remaining` is `(node, address)`, newest
    /// last. `None` when the member was gone already.
    pub async fn remove_member_for_node(
        &self,
        node: &str,
        node_address: &str,
        remaining: &[(String, String)],
    ) -> Result<Option<Removal>, String> {
        let mut errors = Vec::new();
        let mut found = None;
        for (_, address) in remaining {
            match self.members(address).await {
                Ok(members) => {
                    found = Some((address.clone(), members));
                    break;
                }
                Err(e) => errors.push(e),
            }
        }
        let (address, members) =
            found.ok_or_else(|| format!("no remaining etcd member answers: {errors:?}"))?;
        let Some(member) = members.iter().find(|m| m.name == node).cloned() else {
            return Ok(None);
        };
        let mut leadership_moved_to = None;
        if self.leader(&address).await? == member.id
            && let Some((newest, _)) = remaining.last()
            && let Some(candidate) = members.iter().find(|m| &m.name == newest)
        {
            self.move_leader(node_address, candidate.id).await?;
            leadership_moved_to = Some(candidate.name.clone());
        }
        self.remove_member(&address, member.id).await?;
        Ok(Some(Removal {
            member,
            leadership_moved_to,
        }))
    }

    /// `POST https://<address>:2379<path>` with a JSON body; the JSON answer of a 200.
    async fn call(&self, address: &str, path: &str, body: Value) -> Result<Value, String> {
        let work = async {
            let ip: std::net::IpAddr = address
                .parse()
                .map_err(|e| format!("address {address}: {e}"))?;
            let tcp = tokio::net::TcpStream::connect((ip, ETCD_CLIENT_PORT))
                .await
                .map_err(|e| format!("connect to {address}: {e}"))?;
            let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
            let mut tls = connector
                .connect(ServerName::IpAddress(ip.into()), tcp)
                .await
                .map_err(|e| format!("TLS with {address}: {e}"))?;
            let body = body.to_string();
            let request = format!(
                "POST {path} HTTP/1.1\r\nHost: {address}:{ETCD_CLIENT_PORT}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            tls.write_all(request.as_bytes())
                .await
                .map_err(|e| format!("write to {address}: {e}"))?;
            let mut raw = Vec::new();
            // Go closes with close_notify; keep what arrived even if it does not.
            let _ = tls.read_to_end(&mut raw).await;
            let (status, body) = parse_http_answer(&raw)?;
            if status != 200 {
                return Err(format!("{path} on {address}: HTTP {status}: {body}"));
            }
            serde_json::from_str(&body).map_err(|e| format!("{path} on {address}: {e}: {body}"))
        };
        tokio::time::timeout(Duration::from_secs(15), work)
            .await
            .map_err(|_| format!("{path} on {address}: timed out"))?
    }
}

/// A proto3 JSON `uint64`: a string of digits (or a number).
fn uint64(value: &Value) -> Option<u64> {
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| value.as_u64())
}

/// The status and body of an HTTP/1.1 answer (chunked or not).
pub fn parse_http_answer(raw: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding") && v.trim() == "chunked"
        })
    });
    if !chunked {
        return Ok((status, body.to_string()));
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).map_err(|e| format!("chunk: {e}"))?;
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    Ok((status, out))
}
