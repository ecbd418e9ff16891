use bytes::{Bytes, BytesMut};

use super::*;

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), vec![v.to_string()]))
        .collect()
}

fn frames() -> Vec<Frame> {
    vec![
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: headers(&[
                ("streamtype", "error"),
                ("port", "2379"),
                ("requestid", "0"),
            ]),
        },
        Frame::SynStream {
            stream_id: 3,
            associated_to: 0,
            priority: 7,
            flags: FLAG_FIN,
            headers: headers(&[("streamtype", "data"), ("port", "2379"), ("requestid", "0")]),
        },
        Frame::SynReply {
            stream_id: 3,
            flags: 0,
            headers: Vec::new(),
        },
        Frame::Headers {
            stream_id: 3,
            flags: 0,
            headers: vec![("x-multi".into(), vec!["a".into(), "b".into()])],
        },
        Frame::Data {
            stream_id: 3,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"hello"),
        },
        Frame::Data {
            stream_id: 1,
            flags: 0,
            data: Bytes::new(),
        },
        Frame::RstStream {
            stream_id: 5,
            status: CANCEL,
        },
        Frame::Settings {
            flags: 0,
            entries: vec![(1, 4, 100), (0, 7, 65536)],
        },
        Frame::Ping { id: 1 },
        Frame::WindowUpdate {
            stream_id: 3,
            delta: 1024,
        },
        Frame::GoAway {
            last_good_stream_id: 3,
            status: 0,
        },
    ]
}

fn encode_all(frames: &[Frame]) -> BytesMut {
    let mut encoder = Encoder::new().unwrap();
    let mut out = BytesMut::new();
    for frame in frames {
        encoder.encode(frame, &mut out).unwrap();
    }
    out
}

fn decode_all(decoder: &mut Decoder, buf: &mut BytesMut) -> Vec<Frame> {
    let mut got = Vec::new();
    while let Some(frame) = decoder.decode(buf).unwrap() {
        got.push(frame);
    }
    got
}

#[test]
fn frames_round_trip_through_one_zlib_stream_per_direction() {
    let sent = frames();
    let mut wire = encode_all(&sent);
    let got = decode_all(&mut Decoder::new(), &mut wire);
    assert_eq!(got, sent);
    assert!(wire.is_empty());
}

#[test]
fn frames_split_across_reads_come_out_whole() {
    let sent = frames();
    let wire = encode_all(&sent);
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for byte in wire.iter() {
        buf.extend_from_slice(&[*byte]);
        got.extend(decode_all(&mut decoder, &mut buf));
    }
    assert_eq!(got, sent);
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for byte in data {
        a = (a + u32::from(*byte)) % 65521;
        b = (b + a) % 65521;
    }
    b << 16 | a
}

#[test]
fn header_blocks_are_zlib_with_the_spdy3_dictionary() {
    assert_eq!(DICTIONARY.len(), 1423);
    assert!(DICTIONARY.starts_with(b"\0\0\0\x07options\0\0\0\x04head"));
    assert!(DICTIONARY.ends_with(b",enq=0."));
    let wire = encode_all(&frames()[..1]);
    // Control bit, version 3, type SYN_STREAM; then stream id, associated id, priority, slot.
    assert_eq!(&wire[..4], &[0x80, 0x03, 0x00, 0x01]);
    let block = &wire[18..];
    // CMF/FLG: deflate, FDICT set, check bits valid, then the dictionary's Adler-32 (DICTID).
    assert_eq!(block[0] & 0x0f, 8);
    assert_ne!(block[1] & 0x20, 0);
    assert_eq!((u16::from(block[0]) << 8 | u16::from(block[1])) % 31, 0);
    assert_eq!(
        u32::from_be_bytes([block[2], block[3], block[4], block[5]]),
        adler32(&DICTIONARY)
    );
    // Sync-flushed: the block ends with an empty stored block.
    assert!(block.ends_with(&[0x00, 0x00, 0xff, 0xff]));
}

#[test]
fn a_decoder_reads_blocks_of_another_compression_level() {
    // spdystream compresses at level 9; any zlib writer with the dictionary must do.
    let mut deflate = Compress::new(Compression::fast(), true);
    deflate.set_dictionary(&DICTIONARY).unwrap();
    let mut encoder = Encoder { deflate };
    let mut wire = BytesMut::new();
    for frame in &frames()[..2] {
        encoder.encode(frame, &mut wire).unwrap();
    }
    assert_eq!(decode_all(&mut Decoder::new(), &mut wire), frames()[..2]);
}

#[test]
fn protocol_breaches_are_errors() {
    // A header name that is not lower case, as spdystream refuses it.
    let mut plain = BytesMut::new();
    let mut encoder = Encoder::new().unwrap();
    let mut deflate_only = |headers: Headers| {
        let mut out = BytesMut::new();
        let block = encoder.header_block(&headers).unwrap();
        control(&mut out, TYPE_SYN_REPLY, 0, block.len() + 4).unwrap();
        out.put_u32(1);
        out.put_slice(&block);
        out
    };
    // Upper case survives our encoder's lower-casing only if written by hand: build the block.
    let mut raw = Vec::new();
    raw.put_u32(1);
    raw.put_u32(4);
    raw.put_slice(b"Port");
    raw.put_u32(4);
    raw.put_slice(b"2379");
    assert!(matches!(
        parse_headers(&raw),
        Err(SpdyError::HeaderBlock(message)) if message.contains("lower case")
    ));
    plain.extend_from_slice(&deflate_only(headers(&[("port", "1")])));
    assert!(Decoder::new().decode(&mut plain).unwrap().is_some());
    // An unknown control frame (type 5, NOOP in SPDY/2) ends the connection.
    let mut noop = BytesMut::from(&[0x80, 0x03, 0x00, 0x05, 0, 0, 0, 0][..]);
    assert!(matches!(
        Decoder::new().decode(&mut noop),
        Err(SpdyError::UnknownFrame(5))
    ));
    // A SYN_STREAM carrying a hop-by-hop header.
    let mut wire = encode_all(&[Frame::SynStream {
        stream_id: 1,
        associated_to: 0,
        priority: 0,
        flags: 0,
        headers: headers(&[("host", "x")]),
    }]);
    assert!(Decoder::new().decode(&mut wire).is_err());
    // A PING with id 0.
    let mut ping = BytesMut::from(&[0x80, 0x03, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 0][..]);
    assert!(Decoder::new().decode(&mut ping).is_err());
}

/// Two SYN_STREAMs as C zlib writes them (Python's `zlib.compressobj(9, zdict=DICTIONARY)`,
/// each block sync-flushed): the first carries the zlib header and the dictionary id, the second
/// continues the stream, as spdystream's writer (Go's compress/zlib) sends them.
const C_ZLIB_SYN_STREAMS: &str = "\
800300010000003d0000000100000000000078f9e3c6a7c202253a48f95b044eea46c6e696409ab308125f99a074cc68\
004e892545a989b9d0c2863515141500000000ffff800300010000001600000003000000000000225333a8a44a040000\
00ffff";

#[test]
fn header_blocks_of_another_zlib_decode() {
    let bytes: Vec<u8> = (0..C_ZLIB_SYN_STREAMS.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&C_ZLIB_SYN_STREAMS[i..i + 2], 16).unwrap())
        .collect();
    let mut wire = BytesMut::from(&bytes[..]);
    let got = decode_all(&mut Decoder::new(), &mut wire);
    let expected = |stream_id, kind: &str| Frame::SynStream {
        stream_id,
        associated_to: 0,
        priority: 0,
        flags: 0,
        headers: headers(&[("port", "2379"), ("requestid", "0"), ("streamtype", kind)]),
    };
    assert_eq!(got, [expected(1, "error"), expected(3, "data")]);
}
