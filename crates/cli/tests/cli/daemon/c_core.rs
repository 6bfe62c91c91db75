//! A client speaking HTTP/2 over the socket as gRPC's C-core does (Python
//! grpcio, C++, Ruby, PHP): the socket path, percent-encoded, as
//! `:authority` (grpc-java sends it raw), literals added to the HPACK
//! dynamic table, and the next call on the connection referring to them.
//! h2 alone resets such a stream (RST_STREAM, PROTOCOL_ERROR); the daemon
//! reads the authority as `localhost`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use cuzk_cli::proto;
use loona_hpack::Decoder;
use prost::Message;

use super::TestDaemon;

pub(super) const DATA: u8 = 0x0;
pub(super) const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
pub(super) const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;

/// HPACK as C-core's encoder writes it: `:method POST` and `:scheme http`
/// from the static table, the rest as literals with a literal name, added
/// to the dynamic table, and the same field later as its table index.
#[derive(Default)]
pub(super) struct CCoreEncoder {
    added: Vec<(String, String)>,
}

impl CCoreEncoder {
    pub(super) fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(name, value) in fields {
            match (name, value) {
                (":method", "POST") => out.push(0x83),
                (":scheme", "http") => out.push(0x86),
                _ => match self.added.iter().position(|(n, v)| n == name && v == value) {
                    // Newest entry first, after the static table's 61.
                    Some(i) => out.push(0x80 | (62 + self.added.len() - 1 - i) as u8),
                    None => {
                        out.push(0x40);
                        for s in [name, value] {
                            assert!(s.len() < 127);
                            out.push(s.len() as u8);
                            out.extend_from_slice(s.as_bytes());
                        }
                        self.added.push((name.into(), value.into()));
                    }
                },
            }
        }
        out
    }
}

pub(super) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// What came back for one call.
#[derive(Debug, Default)]
struct Outcome {
    headers: Vec<(String, String)>,
    data: Vec<u8>,
    trailers: Vec<(String, String)>,
    reset: Option<u32>,
}

/// One HTTP/2 connection to the daemon, blocking, as C-core opens it.
struct Connection {
    sock: UnixStream,
    encoder: CCoreEncoder,
    decoder: Decoder<'static>,
}

impl Connection {
    fn open(socket: &Path) -> Connection {
        let mut sock = UnixStream::connect(socket).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        // ENABLE_PUSH 0, INITIAL_WINDOW_SIZE 4 MiB, grpc's
        // allow-true-binary-metadata 1: C-core's first SETTINGS.
        let settings = [0, 2, 0, 0, 0, 0, 0, 4, 0, 0x40, 0, 0, 0xfe, 3, 0, 0, 0, 1];
        hello.extend(frame(SETTINGS, 0, 0, &settings));
        sock.write_all(&hello).unwrap();
        Connection {
            sock,
            encoder: CCoreEncoder::default(),
            decoder: Decoder::new(),
        }
    }

    /// `cuzk.v1.Cuzk/Status` on `stream` with `authority`.
    fn status(&mut self, stream: u32, authority: &str) -> Outcome {
        let block = self.encoder.block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/cuzk.v1.Cuzk/Status"),
            (":authority", authority),
            ("te", "trailers"),
            ("content-type", "application/grpc"),
            (
                "user-agent",
                "grpc-python/1.84.0 grpc-c/50.0.0 (linux; chttp2)",
            ),
        ]);
        let message = proto::StatusRequest {}.encode_to_vec();
        let mut body = vec![0];
        body.extend((message.len() as u32).to_be_bytes());
        body.extend(message);
        let mut request = frame(HEADERS, END_HEADERS, stream, &block);
        request.extend(frame(DATA, END_STREAM, stream, &body));
        self.sock.write_all(&request).unwrap();
        self.read_outcome(stream)
    }

    fn read_frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
        let mut head = [0; 9];
        self.sock.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0; len];
        self.sock.read_exact(&mut payload).unwrap();
        (head[3], head[4], stream, payload)
    }

    /// Reads frames until `stream` ends, answering SETTINGS and PING.
    fn read_outcome(&mut self, stream: u32) -> Outcome {
        let mut outcome = Outcome::default();
        let mut block = Vec::new();
        loop {
            let (kind, flags, id, payload) = self.read_frame();
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    self.sock.write_all(&frame(SETTINGS, ACK, 0, &[])).unwrap();
                }
                PING if flags & ACK == 0 => {
                    self.sock.write_all(&frame(PING, ACK, 0, &payload)).unwrap();
                }
                GOAWAY => panic!("the daemon closed the connection: GOAWAY {payload:?}"),
                RST_STREAM if id == stream => {
                    outcome.reset = Some(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                    return outcome;
                }
                // The server's blocks: decoded with the connection's table,
                // also those of other streams.
                HEADERS | CONTINUATION => {
                    block.extend(payload);
                    if flags & END_HEADERS == 0 {
                        continue;
                    }
                    let fields = self.decoder.decode(&block).unwrap();
                    block.clear();
                    if id != stream {
                        continue;
                    }
                    let fields = fields
                        .into_iter()
                        .map(|(n, v)| (text(n), text(v)))
                        .collect();
                    if outcome.headers.is_empty() {
                        outcome.headers = fields;
                    } else {
                        outcome.trailers = fields;
                    }
                    if flags & END_STREAM != 0 {
                        return outcome;
                    }
                }
                DATA if id == stream => {
                    outcome.data.extend(payload);
                    if flags & END_STREAM != 0 {
                        return outcome;
                    }
                }
                _ => {}
            }
        }
    }
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The call succeeded: 200, one gRPC message that is a StatusReply, and
/// grpc-status 0.
fn assert_ok(outcome: &Outcome, what: &str) {
    assert_eq!(
        outcome.reset, None,
        "{what}: the server reset the stream (1 = PROTOCOL_ERROR)"
    );
    assert_eq!(
        field(&outcome.headers, ":status"),
        Some("200"),
        "{what}: {outcome:?}"
    );
    assert_eq!(
        field(&outcome.trailers, "grpc-status"),
        Some("0"),
        "{what}: {outcome:?}"
    );
    let data = &outcome.data;
    assert!(data.len() >= 5 && data[0] == 0, "{what}: {data:?}");
    let len = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
    assert_eq!(data.len(), 5 + len, "{what}: one message");
    let reply = proto::StatusReply::decode(&data[5..]).unwrap();
    assert_eq!(reply.backend, "cpu", "{what}");
    assert!(reply.memory.is_some(), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_core_clients_are_served_over_the_socket() {
    let d = TestDaemon::start(|_| {}).await;
    let socket = d.socket();
    tokio::task::spawn_blocking(move || {
        let path = socket.to_str().unwrap();
        // C-core: `unix:/tmp/.../cuzk.sock` percent-encoded.
        let encoded = path.replace('/', "%2F");
        let mut c = Connection::open(&socket);
        assert_ok(&c.status(1, &encoded), "C-core's authority");
        // The next call refers to the dynamic table for every literal.
        assert_ok(&c.status(3, &encoded), "C-core's second call");
        assert_eq!(c.encoder.added.len(), 5);

        // grpc-java: the raw path; grpc-go: localhost.
        for authority in [path, "localhost"] {
            let mut c = Connection::open(&socket);
            assert_ok(&c.status(1, authority), authority);
        }
    })
    .await
    .unwrap();
    d.stop().await;
}
