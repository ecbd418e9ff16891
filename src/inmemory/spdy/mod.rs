//! SPDY/3.1 framing as `github.com/moby/spdystream` (client-go's port-forward transport) speaks
//! it: control frames (SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS,
//! WINDOW_UPDATE) and DATA frames, with header blocks compressed by one zlib stream per
//! direction, primed with the SPDY/3 dictionary and sync-flushed after each block.
//!
//! [`Decoder`] reads frames from the bytes received so far (a frame split across reads waits
//! for the rest); [`Encoder`] writes them. Each side of a connection has one of each.

mod dictionary;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

pub use self::dictionary::DICTIONARY;

/// The SPDY version spdystream writes.
pub const VERSION: u16 = 3;

/// FLAG_FIN of control and DATA frames: the sender half-closes the stream.
pub const FLAG_FIN: u8 = 0x01;

/// FLAG_UNIDIRECTIONAL of SYN_STREAM.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;

/// RST_STREAM status PROTOCOL_ERROR.
pub const PROTOCOL_ERROR: u32 = 1;

/// RST_STREAM status CANCEL (what spdystream's `Stream.Reset` sends).
pub const CANCEL: u32 = 5;

/// The largest header block this side decompresses.
const MAX_HEADER_BLOCK: usize = 1 << 20;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

/// Header names (lower case, as on the wire) and their values (joined by NUL on the wire).
pub type Headers = Vec<(String, Vec<String>)>;

/// The first value of header `name` (lower case).
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, values)| values.first())
        .map(String::as_str)
}

/// One SPDY frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens a stream.
    SynStream {
        /// Its id (odd from the client).
        stream_id: u32,
        /// The stream it is associated to, 0 for none.
        associated_to: u32,
        /// Priority, 0–7.
        priority: u8,
        /// [`FLAG_FIN`], [`FLAG_UNIDIRECTIONAL`].
        flags: u8,
        /// Its headers.
        headers: Headers,
    },
    /// Accepts a stream.
    SynReply {
        /// The stream.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// Reply headers.
        headers: Headers,
    },
    /// Aborts a stream.
    RstStream {
        /// The stream.
        stream_id: u32,
        /// Why ([`PROTOCOL_ERROR`], [`CANCEL`], ...).
        status: u32,
    },
    /// Connection settings: (flags, id, value).
    Settings {
        /// Frame flags.
        flags: u8,
        /// The settings.
        entries: Vec<(u8, u32, u32)>,
    },
    /// A ping; the receiver of a peer's ping echoes it.
    Ping {
        /// Odd from the client, even from the server.
        id: u32,
    },
    /// The sender accepts no new stream.
    GoAway {
        /// The last stream it accepted.
        last_good_stream_id: u32,
        /// 0 OK, 1 PROTOCOL_ERROR, 2 INTERNAL_ERROR.
        status: u32,
    },
    /// More headers of a stream.
    Headers {
        /// The stream.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The headers.
        headers: Headers,
    },
    /// Flow control credit (spdystream neither sends nor honours it).
    WindowUpdate {
        /// The stream.
        stream_id: u32,
        /// Bytes added to the window.
        delta: u32,
    },
    /// Stream data.
    Data {
        /// The stream.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The payload.
        data: Bytes,
    },
}

/// Why a frame could not be read or written; the connection cannot go on after it.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    /// A control frame type spdystream does not know.
    #[error("unknown control frame type {0}")]
    UnknownFrame(u16),
    /// A frame whose fields break the protocol.
    #[error("invalid {frame} frame: {reason}")]
    Invalid {
        /// The frame type.
        frame: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A header block that does not decompress or parse.
    #[error("invalid header block: {0}")]
    HeaderBlock(String),
    /// A payload over the 24-bit length limit.
    #[error("frame payload of {0} bytes is over the limit")]
    TooLarge(usize),
}

fn invalid(frame: &'static str, reason: &'static str) -> SpdyError {
    SpdyError::Invalid { frame, reason }
}

/// Reads frames, decompressing header blocks with the peer's zlib stream.
pub struct Decoder {
    inflate: Decompress,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder at the start of a connection.
    pub fn new() -> Self {
        Self {
            inflate: Decompress::new(true),
        }
    }

    /// The next whole frame at the front of `buf` (taken from it), or `None` until more bytes
    /// arrive.
    ///
    /// # Errors
    /// [`SpdyError`] for a frame spdystream would refuse.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, SpdyError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let length = usize::from(buf[5]) << 16 | usize::from(buf[6]) << 8 | usize::from(buf[7]);
        if buf.len() < 8 + length {
            buf.reserve(8 + length - buf.len());
            return Ok(None);
        }
        let first = buf.get_u32();
        let flags_length = buf.get_u32();
        let flags = (flags_length >> 24) as u8;
        let mut payload = buf.split_to(length).freeze();
        if first & 0x8000_0000 == 0 {
            let stream_id = first & 0x7fff_ffff;
            if stream_id == 0 {
                return Err(invalid("DATA", "stream id 0"));
            }
            return Ok(Some(Frame::Data {
                stream_id,
                flags,
                data: payload,
            }));
        }
        let kind = (first & 0xffff) as u16;
        let word = |payload: &mut Bytes, frame| {
            if payload.remaining() < 4 {
                return Err(invalid(frame, "short payload"));
            }
            Ok(payload.get_u32())
        };
        let frame = match kind {
            TYPE_SYN_STREAM => {
                let stream_id = word(&mut payload, "SYN_STREAM")?;
                let associated_to = word(&mut payload, "SYN_STREAM")?;
                if payload.remaining() < 2 {
                    return Err(invalid("SYN_STREAM", "short payload"));
                }
                let priority = payload.get_u8() >> 5;
                let _slot = payload.get_u8();
                let headers = self.header_block(&payload)?;
                if stream_id == 0 {
                    return Err(invalid("SYN_STREAM", "stream id 0"));
                }
                if headers.iter().any(|(name, _)| {
                    matches!(
                        name.as_str(),
                        "connection"
                            | "host"
                            | "keep-alive"
                            | "proxy-connection"
                            | "transfer-encoding"
                    )
                }) {
                    return Err(invalid("SYN_STREAM", "a hop-by-hop header"));
                }
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority,
                    flags,
                    headers,
                }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                let name = if kind == TYPE_SYN_REPLY {
                    "SYN_REPLY"
                } else {
                    "HEADERS"
                };
                let stream_id = word(&mut payload, name)?;
                let headers = self.header_block(&payload)?;
                if stream_id == 0 {
                    return Err(invalid(name, "stream id 0"));
                }
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply {
                        stream_id,
                        flags,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        flags,
                        headers,
                    }
                }
            }
            TYPE_RST_STREAM => {
                let stream_id = word(&mut payload, "RST_STREAM")?;
                let status = word(&mut payload, "RST_STREAM")?;
                if status == 0 {
                    return Err(invalid("RST_STREAM", "status 0"));
                }
                if stream_id == 0 {
                    return Err(invalid("RST_STREAM", "stream id 0"));
                }
                Frame::RstStream { stream_id, status }
            }
            TYPE_SETTINGS => {
                let count = word(&mut payload, "SETTINGS")?;
                let mut entries = Vec::new();
                for _ in 0..count {
                    let id = word(&mut payload, "SETTINGS")?;
                    let value = word(&mut payload, "SETTINGS")?;
                    entries.push(((id >> 24) as u8, id & 0x00ff_ffff, value));
                }
                Frame::Settings { flags, entries }
            }
            TYPE_PING => {
                let id = word(&mut payload, "PING")?;
                if id == 0 || flags != 0 {
                    return Err(invalid("PING", "id 0 or flags set"));
                }
                Frame::Ping { id }
            }
            TYPE_GOAWAY => {
                if flags != 0 || length != 8 {
                    return Err(invalid("GOAWAY", "flags set or length not 8"));
                }
                Frame::GoAway {
                    last_good_stream_id: word(&mut payload, "GOAWAY")?,
                    status: word(&mut payload, "GOAWAY")?,
                }
            }
            TYPE_WINDOW_UPDATE => {
                if flags != 0 || length != 8 {
                    return Err(invalid("WINDOW_UPDATE", "flags set or length not 8"));
                }
                Frame::WindowUpdate {
                    stream_id: word(&mut payload, "WINDOW_UPDATE")?,
                    delta: word(&mut payload, "WINDOW_UPDATE")?,
                }
            }
            other => return Err(SpdyError::UnknownFrame(other)),
        };
        Ok(Some(frame))
    }

    /// Decompresses one header block (all of `compressed`) and parses it.
    fn header_block(&mut self, compressed: &[u8]) -> Result<Headers, SpdyError> {
        let mut out = Vec::with_capacity(compressed.len() * 4 + 64);
        let mut used = 0;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= MAX_HEADER_BLOCK {
                    return Err(SpdyError::HeaderBlock("over 1 MiB".into()));
                }
                out.reserve(out.len());
            }
            let before = self.inflate.total_in();
            let result =
                self.inflate
                    .decompress_vec(&compressed[used..], &mut out, FlushDecompress::Sync);
            used += usize::try_from(self.inflate.total_in() - before).unwrap_or(usize::MAX);
            match result {
                Ok(Status::StreamEnd) => break,
                Ok(_) if used >= compressed.len() && out.len() < out.capacity() => break,
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&DICTIONARY)
                        .map_err(|e| SpdyError::HeaderBlock(e.to_string()))?;
                }
                Err(e) => return Err(SpdyError::HeaderBlock(e.to_string())),
            }
        }
        if used != compressed.len() {
            return Err(SpdyError::HeaderBlock(
                "compressed payload size does not match".into(),
            ));
        }
        parse_headers(&out)
    }
}

fn parse_headers(mut block: &[u8]) -> Result<Headers, SpdyError> {
    fn field<'a>(block: &mut &'a [u8]) -> Result<&'a [u8], SpdyError> {
        if block.len() < 4 {
            return Err(SpdyError::HeaderBlock("truncated".into()));
        }
        let length = block.get_u32() as usize;
        if block.len() < length {
            return Err(SpdyError::HeaderBlock("truncated".into()));
        }
        let (value, rest) = block.split_at(length);
        *block = rest;
        Ok(value)
    }
    if block.len() < 4 {
        return Err(SpdyError::HeaderBlock("truncated".into()));
    }
    let count = block.get_u32();
    let mut headers: Headers = Vec::new();
    for _ in 0..count {
        let name = String::from_utf8_lossy(field(&mut block)?).into_owned();
        let value = String::from_utf8_lossy(field(&mut block)?).into_owned();
        if name != name.to_lowercase() {
            return Err(SpdyError::HeaderBlock(format!(
                "header name {name:?} is not lower case"
            )));
        }
        if headers.iter().any(|(n, _)| *n == name) {
            return Err(SpdyError::HeaderBlock(format!("duplicate header {name:?}")));
        }
        headers.push((name, value.split('\0').map(str::to_string).collect()));
    }
    if !block.is_empty() {
        return Err(SpdyError::HeaderBlock("bytes after the last header".into()));
    }
    Ok(headers)
}

/// Writes frames, compressing header blocks with this side's zlib stream (best compression,
/// as spdystream's writer).
pub struct Encoder {
    deflate: Compress,
}

impl Encoder {
    /// An encoder at the start of a connection.
    ///
    /// # Errors
    /// [`SpdyError::HeaderBlock`] when zlib refuses the dictionary.
    pub fn new() -> Result<Self, SpdyError> {
        let mut deflate = Compress::new(Compression::best(), true);
        deflate
            .set_dictionary(&DICTIONARY)
            .map_err(|e| SpdyError::HeaderBlock(e.to_string()))?;
        Ok(Self { deflate })
    }

    /// Appends `frame` to `out`.
    ///
    /// # Errors
    /// [`SpdyError::TooLarge`] for a payload over 2^24 - 1 bytes, [`SpdyError::HeaderBlock`]
    /// when compression fails.
    pub fn encode(&mut self, frame: &Frame, out: &mut BytesMut) -> Result<(), SpdyError> {
        match frame {
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u32(u32::from(*flags) << 24 | length(data.len())?);
                out.put_slice(data);
            }
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                flags,
                headers,
            } => {
                let block = self.header_block(headers)?;
                control(out, TYPE_SYN_STREAM, *flags, block.len() + 10)?;
                out.put_u32(*stream_id);
                out.put_u32(*associated_to);
                out.put_u8(priority << 5);
                out.put_u8(0);
                out.put_slice(&block);
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            }
            | Frame::Headers {
                stream_id,
                flags,
                headers,
            } => {
                let kind = if matches!(frame, Frame::SynReply { .. }) {
                    TYPE_SYN_REPLY
                } else {
                    TYPE_HEADERS
                };
                let block = self.header_block(headers)?;
                control(out, kind, *flags, block.len() + 4)?;
                out.put_u32(*stream_id);
                out.put_slice(&block);
            }
            Frame::RstStream { stream_id, status } => {
                control(out, TYPE_RST_STREAM, 0, 8)?;
                out.put_u32(*stream_id);
                out.put_u32(*status);
            }
            Frame::Settings { flags, entries } => {
                control(out, TYPE_SETTINGS, *flags, 4 + 8 * entries.len())?;
                out.put_u32(u32::try_from(entries.len()).unwrap_or(u32::MAX));
                for (flag, id, value) in entries {
                    out.put_u32(u32::from(*flag) << 24 | (id & 0x00ff_ffff));
                    out.put_u32(*value);
                }
            }
            Frame::Ping { id } => {
                control(out, TYPE_PING, 0, 4)?;
                out.put_u32(*id);
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                control(out, TYPE_GOAWAY, 0, 8)?;
                out.put_u32(*last_good_stream_id);
                out.put_u32(*status);
            }
            Frame::WindowUpdate { stream_id, delta } => {
                control(out, TYPE_WINDOW_UPDATE, 0, 8)?;
                out.put_u32(*stream_id);
                out.put_u32(*delta);
            }
        }
        Ok(())
    }

    /// The header block of `headers`, compressed and sync-flushed.
    fn header_block(&mut self, headers: &Headers) -> Result<Vec<u8>, SpdyError> {
        let mut plain = Vec::new();
        plain.put_u32(u32::try_from(headers.len()).unwrap_or(u32::MAX));
        for (name, values) in headers {
            let name = name.to_lowercase();
            let value = values.join("\0");
            plain.put_u32(length(name.len())?);
            plain.put_slice(name.as_bytes());
            plain.put_u32(length(value.len())?);
            plain.put_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(plain.len() + 64);
        let mut used = 0;
        loop {
            if out.len() == out.capacity() {
                out.reserve(out.len().max(64));
            }
            let before = self.deflate.total_in();
            self.deflate
                .compress_vec(&plain[used..], &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::HeaderBlock(e.to_string()))?;
            used += usize::try_from(self.deflate.total_in() - before).unwrap_or(usize::MAX);
            // All input taken and room left: the flush is complete.
            if used >= plain.len() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

fn length(n: usize) -> Result<u32, SpdyError> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= 0x00ff_ffff)
        .ok_or(SpdyError::TooLarge(n))
}

fn control(out: &mut BytesMut, kind: u16, flags: u8, payload: usize) -> Result<(), SpdyError> {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32(u32::from(flags) << 24 | length(payload)?);
    Ok(())
}

#[cfg(test)]
mod tests;
