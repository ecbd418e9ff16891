//! Protobuf request bodies of built-in kinds, turned into the JSON objects they encode.
//!
//! client-go sends `application/vnd.kubernetes.protobuf` when a client is configured for it, as
//! controller-runtime's clients are for built-in kinds: Cluster API's KCP and CABPK create and
//! update Secrets and ConfigMaps that way, in the management cluster and in workload clusters,
//! and core deletes a workload Node with protobuf DeleteOptions. kube-apiserver reads such a body
//! as the 4-byte magic `k8s\0` followed by a `runtime.Unknown`
//! (`k8s.io/apimachinery/pkg/runtime/generated.proto`: 1 `typeMeta` {1 `apiVersion`, 2 `kind`},
//! 2 `raw`, 3 `contentEncoding`, 4 `contentType`) whose `raw` is the object in the kind's own
//! message (`k8s.io/api/core/v1/generated.proto`).
//!
//! Two servers read it: the test API server (`e2e/apiserver`) and the in-memory backend's fake
//! workload API servers (`src/inmemory/server.rs`).
//!
//! Simplification: only the kinds Cluster API writes that way are decoded, Secret and ConfigMap
//! (and the DeleteOptions of a delete), with every field of their messages and of `ObjectMeta` a
//! client sets (the server-owned ones, `selfLink`, `creationTimestamp`, `deletionTimestamp`,
//! `managedFields`, are skipped as kube-apiserver would overwrite or refuse them). Any other kind is
//! [`ProtobufError::Unsupported`], naming it. Answers stay JSON: client-go asks for protobuf with
//! JSON as its second choice.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The magic prefix of a Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ProtobufError {
    /// Not a well-formed body.
    Malformed(String),
    /// A kind this server does not decode.
    Unsupported(String),
}

/// A protobuf request body as the JSON object it encodes.
///
/// # Errors
/// [`ProtobufError`] when the body is malformed or of a kind not decoded here.
pub fn to_json(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("the body does not start with the k8s protobuf magic"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for field in Fields::new(envelope) {
        match field? {
            (1, Wire::Bytes(type_meta)) => {
                for inner in Fields::new(type_meta) {
                    match inner? {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => secret(raw)?,
        ("v1", "ConfigMap") => config_map(raw)?,
        ("meta.k8s.io/v1" | "v1", "DeleteOptions") => delete_options(raw)?,
        _ => {
            return Err(ProtobufError::Unsupported(format!("{api_version}/{kind}")));
        }
    };
    object.insert("apiVersion".into(), json!(api_version));
    object.insert("kind".into(), json!(kind));
    Ok(Value::Object(object))
}

fn malformed(why: impl Into<String>) -> ProtobufError {
    ProtobufError::Malformed(why.into())
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| malformed("a string field is not UTF-8"))
}

fn base64(bytes: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// One field's value on the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of a message, in order.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(message: &'a [u8]) -> Self {
        Self { rest: message }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .rest
                .split_first()
                .ok_or_else(|| malformed("a varint runs past the end"))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("a varint is longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if n > self.rest.len() {
            return Err(malformed("a field runs past the end"));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = (|| {
            let key = self.varint()?;
            let number = key >> 3;
            let wire = match key & 7 {
                0 => Wire::Varint(self.varint()?),
                1 => {
                    self.take(8)?;
                    Wire::Fixed
                }
                2 => {
                    let len = usize::try_from(self.varint()?)
                        .map_err(|_| malformed("a length does not fit"))?;
                    Wire::Bytes(self.take(len)?)
                }
                5 => {
                    self.take(4)?;
                    Wire::Fixed
                }
                other => return Err(malformed(format!("wire type {other} is not supported"))),
            };
            Ok((number, wire))
        })();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

/// A map entry (`key` = 1, `value` = 2) as its key and raw value.
fn entry(bytes: &[u8]) -> Result<(String, &[u8]), ProtobufError> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for field in Fields::new(bytes) {
        match field? {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

/// Adds a map entry to the object `map[name]`, its value read by `value`.
fn map_insert(
    map: &mut Map<String, Value>,
    name: &str,
    bytes: &[u8],
    value: fn(&[u8]) -> Result<Value, ProtobufError>,
) -> Result<(), ProtobufError> {
    let (key, raw) = entry(bytes)?;
    let target = map.entry(name).or_insert_with(|| json!({}));
    target[key] = value(raw)?;
    Ok(())
}

/// A `map<string, string>` entry.
fn string_map_insert(
    map: &mut Map<String, Value>,
    name: &str,
    bytes: &[u8],
) -> Result<(), ProtobufError> {
    map_insert(map, name, bytes, |raw| text(raw).map(Value::String))
}

/// A `map<string, bytes>` entry (base64 in JSON).
fn bytes_map_insert(
    map: &mut Map<String, Value>,
    name: &str,
    bytes: &[u8],
) -> Result<(), ProtobufError> {
    map_insert(map, name, bytes, |raw| Ok(base64(raw)))
}

/// `ObjectMeta` (`k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`).
fn object_meta(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut meta = Map::new();
    for field in Fields::new(bytes) {
        match field? {
            (1, Wire::Bytes(b)) => _ = meta.insert("name".into(), json!(text(b)?)),
            (2, Wire::Bytes(b)) => _ = meta.insert("generateName".into(), json!(text(b)?)),
            (3, Wire::Bytes(b)) => _ = meta.insert("namespace".into(), json!(text(b)?)),
            (5, Wire::Bytes(b)) => _ = meta.insert("uid".into(), json!(text(b)?)),
            (6, Wire::Bytes(b)) => _ = meta.insert("resourceVersion".into(), json!(text(b)?)),
            (7, Wire::Varint(v)) => _ = meta.insert("generation".into(), json!(v as i64)),
            (10, Wire::Varint(v)) => {
                _ = meta.insert("deletionGracePeriodSeconds".into(), json!(v as i64));
            }
            (11, Wire::Bytes(b)) => string_map_insert(&mut meta, "labels", b)?,
            (12, Wire::Bytes(b)) => string_map_insert(&mut meta, "annotations", b)?,
            (13, Wire::Bytes(b)) => {
                let owners = meta.entry("ownerReferences").or_insert_with(|| json!([]));
                if let Value::Array(owners) = owners {
                    owners.push(owner_reference(b)?);
                }
            }
            (14, Wire::Bytes(b)) => {
                let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
                if let Value::Array(finalizers) = finalizers {
                    finalizers.push(json!(text(b)?));
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(meta))
}

/// `OwnerReference`: 1 kind, 3 name, 4 uid, 5 apiVersion, 6 controller, 7 blockOwnerDeletion.
fn owner_reference(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut owner = Map::new();
    for field in Fields::new(bytes) {
        match field? {
            (1, Wire::Bytes(b)) => _ = owner.insert("kind".into(), json!(text(b)?)),
            (3, Wire::Bytes(b)) => _ = owner.insert("name".into(), json!(text(b)?)),
            (4, Wire::Bytes(b)) => _ = owner.insert("uid".into(), json!(text(b)?)),
            (5, Wire::Bytes(b)) => _ = owner.insert("apiVersion".into(), json!(text(b)?)),
            (6, Wire::Varint(v)) => _ = owner.insert("controller".into(), json!(v != 0)),
            (7, Wire::Varint(v)) => {
                _ = owner.insert("blockOwnerDeletion".into(), json!(v != 0));
            }
            _ => {}
        }
    }
    Ok(Value::Object(owner))
}

/// `Secret`: 1 metadata, 2 data (bytes), 3 type, 4 stringData, 5 immutable.
fn secret(bytes: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut object = Map::new();
    for field in Fields::new(bytes) {
        match field? {
            (1, Wire::Bytes(b)) => _ = object.insert("metadata".into(), object_meta(b)?),
            (2, Wire::Bytes(b)) => bytes_map_insert(&mut object, "data", b)?,
            (3, Wire::Bytes(b)) => _ = object.insert("type".into(), json!(text(b)?)),
            (4, Wire::Bytes(b)) => string_map_insert(&mut object, "stringData", b)?,
            (5, Wire::Varint(v)) => _ = object.insert("immutable".into(), json!(v != 0)),
            _ => {}
        }
    }
    Ok(object)
}

/// `ConfigMap`: 1 metadata, 2 data, 3 binaryData, 4 immutable.
fn config_map(bytes: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut object = Map::new();
    for field in Fields::new(bytes) {
        match field? {
            (1, Wire::Bytes(b)) => _ = object.insert("metadata".into(), object_meta(b)?),
            (2, Wire::Bytes(b)) => string_map_insert(&mut object, "data", b)?,
            (3, Wire::Bytes(b)) => bytes_map_insert(&mut object, "binaryData", b)?,
            (4, Wire::Varint(v)) => _ = object.insert("immutable".into(), json!(v != 0)),
            _ => {}
        }
    }
    Ok(object)
}

/// `DeleteOptions`: 1 gracePeriodSeconds, 2 preconditions {1 uid, 2 resourceVersion},
/// 3 orphanDependents, 4 propagationPolicy, 5 dryRun.
fn delete_options(bytes: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut object = Map::new();
    for field in Fields::new(bytes) {
        match field? {
            (1, Wire::Varint(v)) => _ = object.insert("gracePeriodSeconds".into(), json!(v as i64)),
            (2, Wire::Bytes(b)) => {
                let mut preconditions = Map::new();
                for inner in Fields::new(b) {
                    match inner? {
                        (1, Wire::Bytes(b)) => {
                            _ = preconditions.insert("uid".into(), json!(text(b)?))
                        }
                        (2, Wire::Bytes(b)) => {
                            _ = preconditions.insert("resourceVersion".into(), json!(text(b)?));
                        }
                        _ => {}
                    }
                }
                object.insert("preconditions".into(), Value::Object(preconditions));
            }
            (3, Wire::Varint(v)) => _ = object.insert("orphanDependents".into(), json!(v != 0)),
            (4, Wire::Bytes(b)) => _ = object.insert("propagationPolicy".into(), json!(text(b)?)),
            (5, Wire::Bytes(b)) => {
                let dry_run = object.entry("dryRun").or_insert_with(|| json!([]));
                if let Value::Array(dry_run) = dry_run {
                    dry_run.push(json!(text(b)?));
                }
            }
            _ => {}
        }
    }
    Ok(object)
}

/// Writes bodies field by field as protoc-generated code writes them: what the tests of the servers
/// that read them send, as client-go would.
pub mod encode {
    use super::MAGIC;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A length-delimited field (a string, bytes or an embedded message).
    pub fn bytes_field(number: u64, value: &[u8], out: &mut Vec<u8>) {
        varint(number << 3 | 2, out);
        varint(value.len() as u64, out);
        out.extend_from_slice(value);
    }

    /// A varint field (an integer or a bool).
    pub fn varint_field(number: u64, value: u64, out: &mut Vec<u8>) {
        varint(number << 3, out);
        varint(value, out);
    }

    /// A map entry: key 1, value 2.
    pub fn entry(key: &str, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        bytes_field(1, key.as_bytes(), &mut out);
        bytes_field(2, value, &mut out);
        out
    }

    /// The whole body: the magic and the `runtime.Unknown` holding `raw` as `apiVersion`/`kind`.
    pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = Vec::new();
        bytes_field(1, api_version.as_bytes(), &mut type_meta);
        bytes_field(2, kind.as_bytes(), &mut type_meta);
        let mut unknown = Vec::new();
        bytes_field(1, &type_meta, &mut unknown);
        bytes_field(2, raw, &mut unknown);
        bytes_field(3, b"", &mut unknown);
        bytes_field(4, b"", &mut unknown);
        let mut body = MAGIC.to_vec();
        body.extend(unknown);
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::encode::{bytes_field, entry, envelope, varint_field};

    /// The Secret KCP writes for a cluster's CA: owned by the KubeadmControlPlane, labelled with
    /// the cluster name, of type cluster.x-k8s.io/secret.
    fn kcp_ca_secret() -> Vec<u8> {
        let mut owner = Vec::new();
        bytes_field(1, b"KubeadmControlPlane", &mut owner);
        bytes_field(3, b"c1-control-plane", &mut owner);
        bytes_field(4, b"u-1", &mut owner);
        bytes_field(5, b"controlplane.cluster.x-k8s.io/v1beta2", &mut owner);
        varint_field(6, 1, &mut owner);
        varint_field(7, 1, &mut owner);
        let mut meta = Vec::new();
        bytes_field(1, b"c1-ca", &mut meta);
        bytes_field(3, b"ns1", &mut meta);
        bytes_field(
            11,
            &entry("cluster.x-k8s.io/cluster-name", b"c1"),
            &mut meta,
        );
        bytes_field(13, &owner, &mut meta);
        let mut secret = Vec::new();
        bytes_field(1, &meta, &mut secret);
        bytes_field(2, &entry("tls.crt", b"CERT"), &mut secret);
        bytes_field(2, &entry("tls.key", &[0, 1, 2]), &mut secret);
        bytes_field(3, b"cluster.x-k8s.io/secret", &mut secret);
        envelope("v1", "Secret", &secret)
    }

    #[test]
    fn a_secret_as_kcp_sends_it_reads_as_its_json() {
        assert_eq!(
            to_json(&kcp_ca_secret()).unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "c1-ca",
                    "namespace": "ns1",
                    "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                    "ownerReferences": [{
                        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                        "kind": "KubeadmControlPlane",
                        "name": "c1-control-plane",
                        "uid": "u-1",
                        "controller": true,
                        "blockOwnerDeletion": true
                    }]
                },
                "data": {"tls.crt": "Q0VSVA==", "tls.key": "AAEC"},
                "type": "cluster.x-k8s.io/secret"
            })
        );
    }

    #[test]
    fn a_config_map_reads_as_its_json() {
        let mut meta = Vec::new();
        bytes_field(1, b"kubeadm-config", &mut meta);
        bytes_field(14, b"f1", &mut meta);
        let mut config_map = Vec::new();
        bytes_field(1, &meta, &mut config_map);
        bytes_field(
            2,
            &entry("ClusterConfiguration", b"apiServer: {}"),
            &mut config_map,
        );
        varint_field(4, 1, &mut config_map);
        assert_eq!(
            to_json(&envelope("v1", "ConfigMap", &config_map)).unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kubeadm-config", "finalizers": ["f1"]},
                "data": {"ClusterConfiguration": "apiServer: {}"},
                "immutable": true
            })
        );
    }

    #[test]
    fn the_delete_options_of_a_protobuf_delete_read_as_their_json() {
        let mut preconditions = Vec::new();
        bytes_field(1, b"u-1", &mut preconditions);
        let mut options = Vec::new();
        varint_field(1, 0, &mut options);
        bytes_field(2, &preconditions, &mut options);
        bytes_field(4, b"Background", &mut options);
        assert_eq!(
            to_json(&envelope("meta.k8s.io/v1", "DeleteOptions", &options)).unwrap(),
            json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "u-1"},
                "propagationPolicy": "Background"
            })
        );
    }

    #[test]
    fn other_kinds_and_broken_bodies_are_refused_with_why() {
        assert_eq!(
            to_json(&envelope("v1", "Pod", b"")),
            Err(ProtobufError::Unsupported("v1/Pod".into()))
        );
        assert!(matches!(
            to_json(b"{\"kind\":\"Secret\"}"),
            Err(ProtobufError::Malformed(_))
        ));
        let mut cut = kcp_ca_secret();
        cut.truncate(cut.len() - 3);
        assert!(matches!(to_json(&cut), Err(ProtobufError::Malformed(_))));
    }
}
