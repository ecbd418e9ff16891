//! A small YAML tree that keeps mapping order and `!!binary` scalars, read with serde-saphyr.
//!
//! cloud-init reads user data with PyYAML (YAML 1.1); the options below keep the differences that
//! matter for bootstrap data harmless: `0644` stays the text `0644` (so permissions are read as
//! octal, as cloud-init does), duplicate keys keep the last value (as PyYAML does), `yes`/`on`
//! stay text in command lines (YAML 1.2 booleans; flags such as `append` still accept them) and
//! `!!binary` scalars arrive as bytes.

use std::collections::HashMap;
use std::fmt;

use base64::Engine as _;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Tagged;

use super::Error;

/// One YAML node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    /// A `!!binary` scalar, already base64-decoded.
    Bytes(Vec<u8>),
    Seq(Vec<Node>),
    /// Entries in document order.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The text of a scalar (booleans in YAML spelling, `true`, where cloud-init would say
    /// `True`); `None` for null, binary and collections.
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match self {
            Node::Str(s) => Some(s.clone()),
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(f.to_string()),
            Node::Bool(b) => Some(b.to_string()),
            Node::Null | Node::Bytes(_) | Node::Seq(_) | Node::Map(_) => None,
        }
    }

    /// The value of `key` in a mapping (last one wins).
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// A YAML 1.1 style boolean: `true/false`, `yes/no`, `on/off` (any case) or a YAML bool.
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self {
            Node::Bool(b) => Some(*b),
            Node::Str(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "y" => Some(true),
                "false" | "no" | "off" | "n" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// A short name of the node's kind for error messages.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a float",
            Node::Str(_) => "a string",
            Node::Bytes(_) => "binary data",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }
}

/// Parses one YAML document into a [`Node`]; an empty document is [`Node::Null`].
///
/// Errors carry only the position: serde-saphyr's own messages quote the offending source line,
/// which may be a private key.
pub(crate) fn parse(data: &[u8]) -> Result<Node, Error> {
    let options = serde_saphyr::options! {
        leading_zero_numbers_as_strings: true,
        strict_booleans: true,
        ignore_binary_tag_for_string: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    };
    let node: Option<Node> = serde_saphyr::from_slice_with_options(data, options).map_err(|e| {
        let location = e.location();
        Error::InvalidYaml {
            line: location.map_or(0, |l| l.line()),
            column: location.map_or(0, |l| l.column()),
        }
    })?;
    Ok(node.unwrap_or(Node::Null))
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Tagged(node, tag) = Tagged::<Untagged>::deserialize(deserializer)?;
        let binary = tag.as_deref().is_some_and(|t| {
            matches!(
                t,
                "!!binary" | "!binary" | "tag:yaml.org,2002:binary" | "tag:yaml.org,2002:!binary"
            )
        });
        match (binary, node.0) {
            (true, Node::Str(text)) => {
                let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
                base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map(Node::Bytes)
                    .map_err(|_| de::Error::custom("invalid !!binary scalar"))
            }
            (_, node) => Ok(node),
        }
    }
}

/// A node read without looking at its tag; children are full [`Node`]s.
struct Untagged(Node);

impl<'de> Deserialize<'de> for Untagged {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor).map(Untagged)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        i128::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Node, E> {
        Ok(Node::Bytes(v.to_vec()))
    }
    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Node, E> {
        Ok(Node::Bytes(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        // A repeated key keeps its first position and takes the last value, like PyYAML.
        let mut entries: Vec<(Node, Node)> = Vec::new();
        let mut text_keys: HashMap<String, usize> = HashMap::new();
        while let Some((k, v)) = map.next_entry::<Node, Node>()? {
            let existing = match &k {
                Node::Str(text) => text_keys.get(text).copied(),
                other => entries.iter().position(|(existing, _)| existing == other),
            };
            match existing {
                Some(index) => entries[index].1 = v,
                None => {
                    if let Node::Str(text) = &k {
                        text_keys.insert(text.clone(), entries.len());
                    }
                    entries.push((k, v));
                }
            }
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_mapping_order_and_yaml11_friendly_scalars() {
        let node = parse(b"#cloud-config\nzeta: 1\nalpha: '0640'\nmode: 0644\nbig: 12\non: yes\n")
            .unwrap();
        let Node::Map(entries) = &node else {
            panic!("not a map: {node:?}")
        };
        let keys: Vec<_> = entries
            .iter()
            .map(|(k, _)| k.scalar_text().unwrap())
            .collect();
        assert_eq!(keys, ["zeta", "alpha", "mode", "big", "on"]);
        assert_eq!(node.get("on"), Some(&Node::Str("yes".into())));
        assert_eq!(node.get("alpha"), Some(&Node::Str("0640".into())));
        assert_eq!(node.get("mode"), Some(&Node::Str("0644".into())));
        assert_eq!(node.get("big"), Some(&Node::Int(12)));
        assert_eq!(node.get("on").and_then(Node::as_bool), Some(true));
    }

    #[test]
    fn binary_scalars_become_bytes() {
        let node = parse(b"a: !!binary |\n  H4sI\n  AAAA\nb: !!binary aGk=\n").unwrap();
        assert_eq!(
            node.get("a"),
            Some(&Node::Bytes(vec![0x1f, 0x8b, 8, 0, 0, 0]))
        );
        assert_eq!(node.get("b"), Some(&Node::Bytes(b"hi".to_vec())));
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let node = parse(b"a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(node.get("a"), Some(&Node::Int(3)));
        let Node::Map(entries) = node else { panic!() };
        assert_eq!(entries.len(), 2, "{entries:?}");
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse(b"").unwrap(), Node::Null);
        assert_eq!(parse(b"#cloud-config\n").unwrap(), Node::Null);
    }

    #[test]
    fn syntax_errors_report_position_without_source_text() {
        let err = parse(b"a: 1\n  b: [\nsecretvalue: 'abc\n").unwrap_err();
        assert_eq!(err, Error::InvalidYaml { line: 2, column: 4 });
        assert!(!err.to_string().contains("secretvalue"));
    }
}
