//! A Unix-socket connection that replaces an HTTP/2 `:authority` the server
//! would refuse with `localhost`.
//!
//! Why: gRPC's C-core clients (Python grpcio, C++, Ruby, PHP) dialling
//! `unix:/run/cuzk.sock` send the socket path, percent-encoded
//! (`%2Frun%2Fcuzk.sock`), as `:authority`; grpc-java sends the raw path.
//! Neither is a URI authority, and h2 (under hyper and tonic) resets every
//! such stream with `PROTOCOL_ERROR` before the service sees it, with no
//! setting to relax that. On a Unix socket the authority names nothing, so
//! the daemon reads it as `localhost`, as grpc-go sends it.
//!
//! How: the client-to-server bytes are read as HTTP/2 frames. Every frame
//! but a request's header block (HEADERS and its CONTINUATIONs) passes
//! through as it came, undecoded and mostly in place. A header block is
//! decoded with an HPACK decoder that follows the client's dynamic table,
//! its `:authority` replaced if [`Authority`] refuses it, and encoded again
//! with static-table indexes and literals only, so the server's decoder needs
//! no table state from this side; it goes out as HEADERS plus CONTINUATIONs
//! of at most 16 KiB (the server never raises SETTINGS_MAX_FRAME_SIZE), no
//! padding. Server-to-client bytes pass untouched. Anything unexpected (not
//! HTTP/2 with prior knowledge, a malformed frame or block, a block over the
//! bounds below) makes the connection pass through unchanged from there on:
//! the server then refuses it as it would have without this wrapper.

use std::borrow::Cow;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use hyper::http::uri::Authority;
use loona_hpack::Decoder;
use loona_hpack::encoder::encode_integer_into;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// SETTINGS_MAX_FRAME_SIZE's initial value; the daemon's server keeps it.
const MAX_FRAME: usize = 16_384;
/// SETTINGS_HEADER_TABLE_SIZE's initial value; the server keeps it, so no
/// client may grow its table past this.
const TABLE_SIZE: usize = 4096;
/// The most bytes of one header block (its frames) held for rewriting; the
/// server refuses header lists over 16 KiB anyway.
const MAX_BLOCK: usize = 256 << 10;
/// The most frames of one header block: past this it is a CONTINUATION
/// flood, left for the server to refuse.
const MAX_BLOCK_FRAMES: usize = 64;
/// The most bytes one header block may decode to (HPACK's own size: name,
/// value and 32 per field); a block of small references to large table
/// entries could otherwise make megabytes.
const MAX_DECODED: usize = 1 << 20;
/// The authority given to requests whose own is not one.
const LOCALHOST: &[u8] = b"localhost";

/// A connection whose client-to-server HTTP/2 stream has `:authority`
/// values that are not URI authorities replaced with `localhost`.
pub struct FixAuthority<S> {
    inner: S,
    rewriter: Rewriter,
    /// Rewritten bytes not yet read by the server.
    out: Vec<u8>,
    out_pos: usize,
    eof: bool,
}

impl<S> FixAuthority<S> {
    pub fn new(inner: S) -> Self {
        FixAuthority {
            inner,
            rewriter: Rewriter::new(),
            out: Vec::new(),
            out_pos: 0,
            eof: false,
        }
    }
}

impl<S> std::fmt::Debug for FixAuthority<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixAuthority")
            .field("passing_through", &self.rewriter.is_off())
            .field("pending", &(self.out.len() - self.out_pos))
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FixAuthority<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.out_pos < this.out.len() {
                let n = (this.out.len() - this.out_pos).min(buf.remaining());
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof || this.rewriter.is_off() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            // Read straight into the server's buffer; bytes that pass
            // through stay there, the rest goes to `out` or is held.
            let start = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            if buf.filled().len() == start {
                this.eof = true;
                this.rewriter.finish(&mut this.out);
                if this.out.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let kept = this.rewriter.scan(&buf.filled()[start..], &mut this.out);
            buf.set_filled(start + kept);
            if kept > 0 {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FixAuthority<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The connection's peer as the wrapped stream gives it (for a
/// `UnixStream`, tonic's `UdsConnectInfo`: address and credentials).
impl<S: Connected> Connected for FixAuthority<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of the connection preface seen.
    Preface(usize),
    /// Reading a frame header (`Rewriter::head_len` bytes of it so far).
    Head,
    /// This many payload bytes of the current frame to come; `hold`: they
    /// belong to a header block being collected.
    Payload { left: usize, hold: bool },
    /// Everything passes through.
    Off,
}

/// Where the bytes of one `scan` go: left in place at the front of the
/// input while nothing before them was held, else appended to `out`.
struct Sink<'a> {
    out: &'a mut Vec<u8>,
    in_place: usize,
    direct: bool,
}

impl Sink<'_> {
    fn pass(&mut self, input: &[u8], from: usize, to: usize) {
        if self.direct && from == self.in_place {
            self.in_place = to;
        } else {
            self.emit(&input[from..to]);
        }
    }

    fn hold(&mut self) {
        self.direct = false;
    }

    fn emit(&mut self, bytes: &[u8]) {
        self.direct = false;
        self.out.extend_from_slice(bytes);
    }
}

/// The client-to-server byte stream's state: frame parsing, the header
/// block being collected, and the client's HPACK context.
struct Rewriter {
    state: State,
    head: [u8; FRAME_HEADER],
    head_len: usize,
    /// The frames (headers and payloads) of the header block being
    /// collected, as received; empty when none is.
    block: Vec<u8>,
    block_frames: usize,
    block_stream: u32,
    last_flags: u8,
    decoder: Decoder<'static>,
    /// Scratch space, kept between blocks.
    fragment: Vec<u8>,
    never_indexed: Vec<bool>,
    encoded: Vec<u8>,
}

impl Rewriter {
    fn new() -> Self {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(TABLE_SIZE);
        Rewriter {
            state: State::Preface(0),
            head: [0; FRAME_HEADER],
            head_len: 0,
            block: Vec::new(),
            block_frames: 0,
            block_stream: 0,
            last_flags: 0,
            decoder,
            fragment: Vec::new(),
            never_indexed: Vec::new(),
            encoded: Vec::new(),
        }
    }

    fn is_off(&self) -> bool {
        self.state == State::Off
    }

    /// Takes the next bytes from the client. Returns how many bytes at the
    /// front of `input` pass through as they are; whatever follows them in
    /// the output is appended to `out` (which must be empty for any byte to
    /// stay in place).
    fn scan(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        let direct = out.is_empty();
        let mut sink = Sink {
            out,
            in_place: 0,
            direct,
        };
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Off => {
                    sink.pass(input, i, input.len());
                    i = input.len();
                }
                State::Preface(seen) => {
                    let n = (PREFACE.len() - seen).min(input.len() - i);
                    if input[i..i + n] == PREFACE[seen..seen + n] {
                        sink.pass(input, i, i + n);
                        i += n;
                        self.state = if seen + n == PREFACE.len() {
                            State::Head
                        } else {
                            State::Preface(seen + n)
                        };
                    } else {
                        // Not HTTP/2 with prior knowledge: the server's to judge.
                        self.state = State::Off;
                    }
                }
                State::Head => {
                    let n = (FRAME_HEADER - self.head_len).min(input.len() - i);
                    self.head[self.head_len..self.head_len + n].copy_from_slice(&input[i..i + n]);
                    self.head_len += n;
                    i += n;
                    if self.head_len < FRAME_HEADER {
                        sink.hold();
                        continue;
                    }
                    self.head_len = 0;
                    let head = self.head;
                    if self.on_head(head) {
                        sink.hold();
                    } else {
                        // Held frames of an abandoned block go first.
                        self.flush_block(&mut sink);
                        if n == FRAME_HEADER {
                            sink.pass(input, i - n, i);
                        } else {
                            sink.emit(&head);
                        }
                    }
                    self.payload_done(&mut sink);
                }
                State::Payload { left, hold } => {
                    let n = left.min(input.len() - i);
                    if hold {
                        self.block.extend_from_slice(&input[i..i + n]);
                        sink.hold();
                    } else {
                        sink.pass(input, i, i + n);
                    }
                    i += n;
                    self.state = State::Payload {
                        left: left - n,
                        hold,
                    };
                    self.payload_done(&mut sink);
                }
            }
        }
        sink.in_place
    }

    /// The client closed its side: whatever is held goes out as it came.
    fn finish(&mut self, out: &mut Vec<u8>) {
        let mut sink = Sink {
            out,
            in_place: 0,
            direct: false,
        };
        self.flush_block(&mut sink);
        sink.emit(&self.head[..self.head_len]);
        self.head_len = 0;
        self.state = State::Off;
    }

    /// A frame header has been read: decides whether its frame is held as
    /// part of a header block (true) or passes through, and sets the state
    /// for its payload.
    fn on_head(&mut self, head: [u8; FRAME_HEADER]) -> bool {
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let hold = if self.block.is_empty() {
            kind == HEADERS && len <= MAX_FRAME
        } else {
            kind == CONTINUATION
                && stream == self.block_stream
                && len <= MAX_FRAME
                && self.block_frames < MAX_BLOCK_FRAMES
                && self.block.len() + FRAME_HEADER + len <= MAX_BLOCK
        };
        if hold {
            self.block.extend_from_slice(&head);
            self.block_frames += 1;
            self.block_stream = stream;
            self.last_flags = flags;
            self.state = State::Payload { left: len, hold };
        } else if self.block.is_empty() && kind != HEADERS {
            self.state = State::Payload { left: len, hold };
        } else {
            // A broken or oversized header block: from here on the server
            // gets the bytes as they are.
            tracing::debug!(
                kind,
                len,
                "a header block not rewritten: passing the connection through"
            );
            self.state = State::Off;
        }
        hold
    }

    /// After a frame's payload is complete: a finished header block is
    /// rewritten; the next frame header is awaited.
    fn payload_done(&mut self, sink: &mut Sink<'_>) {
        let State::Payload { left: 0, hold } = self.state else {
            return;
        };
        self.state = State::Head;
        if hold && self.last_flags & END_HEADERS != 0 {
            match self.rewrite() {
                Some(()) => {
                    sink.emit(&self.encoded);
                    self.block.clear();
                    self.block_frames = 0;
                }
                None => {
                    tracing::debug!(
                        "a header block that does not decode: passing the connection through"
                    );
                    self.flush_block(sink);
                    self.state = State::Off;
                }
            }
        }
    }

    fn flush_block(&mut self, sink: &mut Sink<'_>) {
        if !self.block.is_empty() {
            sink.emit(&self.block);
            self.block.clear();
            self.block_frames = 0;
        }
    }

    /// Decodes the collected header block and encodes it again, with a bad
    /// `:authority` replaced, into `self.encoded` as frames. `None` if the
    /// block is malformed or too large.
    fn rewrite(&mut self) -> Option<()> {
        let mut priority = None;
        self.fragment.clear();
        let mut at = 0;
        while at < self.block.len() {
            let head = self.block.get(at..at + FRAME_HEADER)?;
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let payload = self.block.get(at + FRAME_HEADER..at + FRAME_HEADER + len)?;
            if at == 0 {
                let flags = head[4];
                let mut start = 0;
                let mut pad = 0;
                if flags & PADDED != 0 {
                    pad = usize::from(*payload.first()?);
                    start = 1;
                }
                if flags & PRIORITY != 0 {
                    priority = Some(payload.get(start..start + 5)?);
                    start += 5;
                }
                let end = len.checked_sub(pad)?;
                self.fragment.extend_from_slice(payload.get(start..end)?);
            } else {
                self.fragment.extend_from_slice(payload);
            }
            at += FRAME_HEADER + len;
        }

        self.never_indexed.clear();
        field_kinds(&self.fragment, &mut self.never_indexed)?;
        let mut hpack = std::mem::take(&mut self.encoded);
        hpack.clear();
        let (mut field, mut decoded, mut replaced) = (0, 0usize, false);
        let never_indexed = &self.never_indexed;
        let result = self.decoder.decode_with_cb(&self.fragment, |name, value| {
            decoded += name.len() + value.len() + 32;
            if decoded > MAX_DECODED {
                return;
            }
            let never = never_indexed.get(field).copied().unwrap_or(true);
            field += 1;
            let value = if &*name == b":authority" && Authority::try_from(&*value).is_err() {
                replaced = true;
                Cow::Borrowed(LOCALHOST)
            } else {
                value
            };
            encode_field(&mut hpack, &name, &value, never);
        });
        if result.is_err() || decoded > MAX_DECODED || field != never_indexed.len() {
            self.encoded = hpack;
            return None;
        }
        if replaced {
            tracing::trace!("a request's :authority replaced with localhost");
        }

        // Frame it: HEADERS (its END_STREAM and priority kept) then
        // CONTINUATIONs, each within the server's frame size.
        let first = &self.block[..FRAME_HEADER];
        let flags = first[4] & (END_STREAM | PRIORITY);
        let stream = [first[5], first[6], first[7], first[8]];
        let mut framed = Vec::with_capacity(hpack.len() + 2 * FRAME_HEADER + 5);
        let room = MAX_FRAME - priority.map_or(0, <[u8]>::len);
        let (chunk, mut rest) = hpack.split_at(room.min(hpack.len()));
        let end = if rest.is_empty() { END_HEADERS } else { 0 };
        let len = chunk.len() + priority.map_or(0, <[u8]>::len);
        frame_header(&mut framed, len, HEADERS, flags | end, stream);
        framed.extend_from_slice(priority.unwrap_or_default());
        framed.extend_from_slice(chunk);
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(MAX_FRAME.min(rest.len()));
            rest = tail;
            let end = if rest.is_empty() { END_HEADERS } else { 0 };
            frame_header(&mut framed, chunk.len(), CONTINUATION, end, stream);
            framed.extend_from_slice(chunk);
        }
        self.encoded = framed;
        Some(())
    }
}

fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: [u8; 4]) {
    // `len` is at most MAX_FRAME: it fits 24 bits.
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream);
}

/// An HPACK integer with a `prefix`-bit prefix at the front of `buf`: its
/// value and length. `None` if truncated or over 2^28.
fn integer(buf: &[u8], prefix: u8) -> Option<(usize, usize)> {
    let mask = (1usize << prefix) - 1;
    let mut value = usize::from(*buf.first()?) & mask;
    if value < mask {
        return Some((value, 1));
    }
    for (i, &b) in buf.iter().enumerate().skip(1).take(4) {
        value += usize::from(b & 0x7f) << (7 * (i - 1));
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The length of the HPACK string literal at the front of `buf`.
fn string_len(buf: &[u8]) -> Option<usize> {
    let (len, n) = integer(buf, 7)?;
    let total = n.checked_add(len)?;
    (total <= buf.len()).then_some(total)
}

/// Walks an HPACK block without decoding it, pushing for each field
/// whether it is a never-indexed literal (RFC 7541 6.2.3: an intermediary
/// keeps that representation). `None` if the block is malformed.
fn field_kinds(block: &[u8], never_indexed: &mut Vec<bool>) -> Option<()> {
    let mut i = 0;
    while let Some(&b) = block.get(i) {
        let rest = &block[i..];
        if b & 0x80 != 0 {
            i += integer(rest, 7)?.1;
            never_indexed.push(false);
        } else if b & 0xe0 == 0x20 {
            // A dynamic table size update: not a field.
            i += integer(rest, 5)?.1;
        } else {
            let (prefix, never) = if b & 0x40 != 0 {
                (6, false)
            } else {
                (4, b & 0x10 != 0)
            };
            let (index, mut n) = integer(rest, prefix)?;
            if index == 0 {
                n += string_len(rest.get(n..)?)?;
            }
            n += string_len(rest.get(n..)?)?;
            i += n;
            never_indexed.push(never);
        }
    }
    Some(())
}

/// Appends one field: an index where the static table has it whole, else a
/// literal not added to the dynamic table (never-indexed if it came so),
/// its name indexed where the static table has it; no Huffman coding.
fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8], never_indexed: bool) {
    fn int(value: usize, prefix: u8, bits: u8, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = encode_integer_into(value, prefix, bits, out);
    }
    let by_name = STATIC_TABLE.iter().position(|&(n, _)| n == name);
    if !never_indexed
        && let Some(i) = by_name.and_then(|first| {
            STATIC_TABLE[first..]
                .iter()
                .take_while(|&&(n, _)| n == name)
                .position(|&(_, v)| v == value)
                .map(|j| first + j)
        })
    {
        int(i + 1, 7, 0x80, out);
        return;
    }
    let bits = if never_indexed { 0x10 } else { 0x00 };
    match by_name {
        Some(i) => int(i + 1, 4, bits, out),
        None => {
            out.push(bits);
            int(name.len(), 7, 0, out);
            out.extend_from_slice(name);
        }
    }
    int(value.len(), 7, 0, out);
    out.extend_from_slice(value);
}

/// HPACK's static table (RFC 7541 Appendix A); entry `i` has index `i + 1`.
/// Entries of one name are adjacent. Checked against loona-hpack's decoder
/// in the tests.
const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

#[cfg(test)]
mod tests;
