//! RFC 2397 `data:` URLs, as Ignition uses them for file contents.

use super::files;
use super::{Error, FileProblem};

/// Decodes an Ignition `source`; an empty source is an empty file. Other URL schemes (http, s3,
/// tftp...) would need a fetch and are refused.
pub(crate) fn decode(path: &str, source: &str) -> Result<Vec<u8>, Error> {
    let source = source.trim();
    if source.is_empty() {
        return Ok(Vec::new());
    }
    let bad = |what| Error::file(path, FileProblem::BadDataUrl(what));
    let Some((scheme, rest)) = source.split_once(':') else {
        return Err(bad("no URL scheme"));
    };
    if !scheme.eq_ignore_ascii_case("data") {
        let printable = scheme.len() <= 16 && scheme.bytes().all(|b| b.is_ascii_alphanumeric());
        let shown = if printable { scheme } else { "unknown scheme" };
        return Err(Error::file(
            path,
            FileProblem::RemoteSource(shown.to_ascii_lowercase()),
        ));
    }
    let Some((meta, data)) = rest.split_once(',') else {
        return Err(bad("no comma before the data"));
    };
    let base64 = meta
        .split(';')
        .any(|param| param.trim().eq_ignore_ascii_case("base64"));
    let bytes = percent_decode(data.as_bytes()).ok_or_else(|| bad("invalid percent-escape"))?;
    if base64 {
        files::decode_base64(path, &bytes)
    } else {
        Ok(bytes)
    }
}

/// Decodes `%XX` escapes; any other byte stands for itself (`+` is not a space in data URLs).
pub(crate) fn percent_decode(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut bytes = input.iter().copied();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let high = hex_value(bytes.next()?)?;
            let low = hex_value(bytes.next()?)?;
            out.push(high << 4 | low);
        } else {
            out.push(b);
        }
    }
    Some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_the_forms_ignition_configs_use() {
        let cases: &[(&str, &[u8])] = &[
            ("data:,hello%20world%0A", b"hello world\n"),
            ("data:,a+b", b"a+b"),
            ("data:text/plain;charset=utf-8;base64,aGVsbG8K", b"hello\n"),
            ("data:;base64,aGVs%0AbG8K", b"hello\n"),
            ("data:,", b""),
            ("", b""),
            ("  data:,x  ", b"x"),
        ];
        for (source, expected) in cases {
            assert_eq!(decode("/f", source).unwrap(), *expected, "{source}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_decode() {
        let cases = [
            (
                "https://example.invalid/x",
                FileProblem::RemoteSource("https".into()),
            ),
            ("s3://bucket/key", FileProblem::RemoteSource("s3".into())),
            ("hello", FileProblem::BadDataUrl("no URL scheme")),
            (
                "data:text/plain",
                FileProblem::BadDataUrl("no comma before the data"),
            ),
            (
                "data:,%zz",
                FileProblem::BadDataUrl("invalid percent-escape"),
            ),
            (
                "data:,%4",
                FileProblem::BadDataUrl("invalid percent-escape"),
            ),
            ("data:;base64,@@@", FileProblem::BadBase64),
        ];
        for (source, problem) in cases {
            assert_eq!(
                decode("/f", source),
                Err(Error::file("/f", problem)),
                "{source}"
            );
        }
    }

    fn percent_encode(data: &[u8]) -> String {
        data.iter()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (*b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    proptest! {
        #[test]
        fn percent_encoding_round_trips(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let url = format!("data:,{}", percent_encode(&data));
            prop_assert_eq!(decode("/f", &url).unwrap(), data);
        }

        #[test]
        fn arbitrary_sources_never_panic(source in ".{0,80}") {
            let _ = decode("/f", &source);
        }
    }
}
