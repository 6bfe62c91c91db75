//! The rewriter fed whole connections in pieces of several sizes, checked
//! by decoding what the server would read with a fresh HPACK decoder.

use std::os::unix::fs::MetadataExt;

use loona_hpack::Encoder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const DATA: u8 = 0x0;
const SETTINGS: u8 = 0x4;
const WINDOW_UPDATE: u8 = 0x8;

/// "%2Ftmp%2Fcuzk.sock" in HPACK's Huffman code (RFC 7541 Appendix B).
const HUFFMAN_SOCKET: [u8; 14] = [
    0x54, 0x58, 0x53, 0x4d, 0x6a, 0x8b, 0x09, 0x2d, 0xf7, 0xd5, 0x74, 0x1c, 0x9d, 0x7f,
];

type Fields = Vec<(String, String)>;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame_header(&mut f, payload.len(), kind, flags, stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The preface, an empty SETTINGS, then `frames`.
fn connection(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut c = PREFACE.to_vec();
    c.extend(frame(SETTINGS, 0, 0, &[]));
    c.extend(frames.concat());
    c
}

/// A gRPC request's headers as C-core sends them.
fn grpc_request(authority: Option<&str>) -> Fields {
    let mut f = fields(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/cuzk.v1.Cuzk/Status"),
    ]);
    if let Some(a) = authority {
        f.push((":authority".into(), a.into()));
    }
    f.extend(fields(&[
        ("te", "trailers"),
        ("content-type", "application/grpc"),
        (
            "user-agent",
            "grpc-python/1.84.0 grpc-c/50.0.0 (linux; chttp2)",
        ),
    ]));
    f
}

fn fields(f: &[(&str, &str)]) -> Fields {
    f.iter().map(|&(n, v)| (n.into(), v.into())).collect()
}

fn with_authority(fields: &Fields, authority: &str) -> Fields {
    let mut f = fields.clone();
    for (n, v) in &mut f {
        if n == ":authority" {
            *v = authority.into();
        }
    }
    f
}

fn encode(encoder: &mut Encoder<'_>, fields: &Fields) -> Vec<u8> {
    encoder.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
}

/// Feeds `input` to a rewriter in `chunk`-byte pieces, as the connection
/// does; the bytes the server reads.
fn rewrite(input: &[u8], chunk: usize) -> Vec<u8> {
    let mut r = Rewriter::new();
    let (mut output, mut out) = (Vec::new(), Vec::new());
    for piece in input.chunks(chunk) {
        let kept = r.scan(piece, &mut out);
        output.extend_from_slice(&piece[..kept]);
        output.append(&mut out);
    }
    r.finish(&mut out);
    output.append(&mut out);
    output
}

#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// The frames after the preface.
fn frames(bytes: &[u8]) -> Vec<Frame> {
    assert_eq!(&bytes[..PREFACE.len()], PREFACE);
    let mut rest = &bytes[PREFACE.len()..];
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
        frames.push(Frame {
            kind: rest[3],
            flags: rest[4],
            stream,
            payload: rest[9..9 + len].to_vec(),
        });
        rest = &rest[9 + len..];
    }
    frames
}

/// The header blocks of `frames`, decoded as the server does: one decoder
/// for the connection. Checks the frames are within the server's size.
fn header_blocks(frames: &[Frame]) -> Vec<Fields> {
    let mut decoder = Decoder::new();
    let mut blocks = Vec::new();
    let mut fragment = Vec::new();
    for f in frames {
        assert!(
            f.payload.len() <= MAX_FRAME,
            "a frame of {}",
            f.payload.len()
        );
        match f.kind {
            HEADERS => {
                assert!(fragment.is_empty() && f.flags & PADDED == 0);
                let skip = if f.flags & PRIORITY != 0 { 5 } else { 0 };
                fragment.extend_from_slice(&f.payload[skip..]);
            }
            CONTINUATION => fragment.extend_from_slice(&f.payload),
            _ => continue,
        }
        if f.flags & END_HEADERS != 0 {
            blocks.push(text(decoder.decode(&fragment).unwrap()));
            fragment.clear();
        }
    }
    blocks
}

fn text(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Fields {
    let s = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    fields.into_iter().map(|(n, v)| (s(n), s(v))).collect()
}

#[test]
fn a_socket_path_as_authority_becomes_localhost() {
    for authority in ["%2Ftmp%2Fcuzk.sock", "/tmp/cuzk.sock", "", "a b"] {
        let request = grpc_request(Some(authority));
        let block = encode(&mut Encoder::new(), &request);
        let input = connection(&[frame(HEADERS, END_HEADERS, 1, &block)]);
        for chunk in [1, 5, 9, 64, input.len()] {
            let blocks = header_blocks(&frames(&rewrite(&input, chunk)));
            assert_eq!(blocks, [with_authority(&request, "localhost")]);
        }
    }
}

#[test]
fn a_valid_authority_is_kept_and_an_absent_one_stays_absent() {
    let authorities = [
        "localhost",
        "localhost:50051",
        "gpu-1.example:9820",
        "[::1]:9820",
    ];
    for request in authorities
        .iter()
        .map(|a| grpc_request(Some(a)))
        .chain([grpc_request(None)])
    {
        let block = encode(&mut Encoder::new(), &request);
        let input = connection(&[frame(HEADERS, END_HEADERS | END_STREAM, 1, &block)]);
        let out = frames(&rewrite(&input, 7));
        assert_eq!(header_blocks(&out), [request]);
        assert_eq!(out[1].flags, END_HEADERS | END_STREAM);
    }
}

#[test]
fn a_block_split_over_continuation_frames() {
    let mut request = grpc_request(Some("%2Frun%2Fcuzk.sock"));
    let block = encode(&mut Encoder::new(), &request);
    // Cut anywhere, mid-field too.
    let (a, rest) = block.split_at(5);
    let (b, c) = rest.split_at(17);
    let input = connection(&[
        frame(HEADERS, 0, 3, a),
        frame(CONTINUATION, 0, 3, b),
        frame(CONTINUATION, END_HEADERS, 3, c),
    ]);
    for chunk in [1, 10, input.len()] {
        assert_eq!(
            header_blocks(&frames(&rewrite(&input, chunk))),
            [with_authority(&request, "localhost")]
        );
    }

    // A block larger than a frame goes out as several, within 16 KiB each.
    request.push(("x-big".into(), "a".repeat(40_000)));
    let block = encode(&mut Encoder::new(), &request);
    let pieces: Vec<_> = block.chunks(MAX_FRAME).collect();
    let mut sent = vec![frame(HEADERS, END_STREAM, 5, pieces[0])];
    for (i, p) in pieces.iter().enumerate().skip(1) {
        let end = if i + 1 == pieces.len() {
            END_HEADERS
        } else {
            0
        };
        sent.push(frame(CONTINUATION, end, 5, p));
    }
    let out = frames(&rewrite(&connection(&sent), 4096));
    assert_eq!(header_blocks(&out), [with_authority(&request, "localhost")]);
    let kinds: Vec<_> = out.iter().map(|f| (f.kind, f.flags, f.stream)).collect();
    assert_eq!(
        kinds[1..],
        [
            (HEADERS, END_STREAM, 5),
            (CONTINUATION, 0, 5),
            (CONTINUATION, END_HEADERS, 5)
        ]
    );
}

#[test]
fn padded_headers_with_priority() {
    let request = grpc_request(Some("%2Ftmp%2Fcuzk.sock"));
    let mut payload = vec![7, 0x80, 0, 0, 3, 15];
    payload.extend(encode(&mut Encoder::new(), &request));
    payload.extend([0; 7]);
    let flags = END_HEADERS | END_STREAM | PADDED | PRIORITY;
    let out = frames(&rewrite(
        &connection(&[frame(HEADERS, flags, 1, &payload)]),
        3,
    ));
    assert_eq!(header_blocks(&out), [with_authority(&request, "localhost")]);
    assert_eq!(out[1].flags, END_HEADERS | END_STREAM | PRIORITY);
    assert_eq!(out[1].payload[..5], [0x80, 0, 0, 3, 15]);

    // Padding longer than the frame: left for the server to refuse.
    let bad = connection(&[frame(HEADERS, END_HEADERS | PADDED, 1, &[9, 0x82])]);
    assert_eq!(rewrite(&bad, 4), bad);
}

#[test]
fn a_huffman_coded_authority_and_its_dynamic_table_reference() {
    // As C-core's first request: the authority added to the table...
    let mut first = vec![0x83, 0x86, 0x44, 20];
    first.extend_from_slice(b"/cuzk.v1.Cuzk/Status");
    first.extend([0x41, 0x80 | 14]);
    first.extend(HUFFMAN_SOCKET);
    // ...and the second referring to it (62) and to the path (63).
    let second = [0x83, 0x86, 0xbf, 0xbe];
    let input = connection(&[
        frame(HEADERS, END_HEADERS, 1, &first),
        frame(HEADERS, END_HEADERS, 3, &second),
    ]);
    let expected = fields(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/cuzk.v1.Cuzk/Status"),
        (":authority", "localhost"),
    ]);
    for chunk in [1, 13, input.len()] {
        let blocks = header_blocks(&frames(&rewrite(&input, chunk)));
        assert_eq!(blocks, [expected.clone(), expected.clone()]);
    }

    // RFC 7541 C.4.1 and C.4.2: a valid Huffman-coded authority, kept.
    let c41 = hex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
    let c42 = hex("828684be5886a8eb10649cbf");
    let input = connection(&[
        frame(HEADERS, END_HEADERS, 1, &c41),
        frame(HEADERS, END_HEADERS, 3, &c42),
    ]);
    let mut decoder = Decoder::new();
    let expected = [&c41, &c42].map(|b| text(decoder.decode(b).unwrap()));
    assert_eq!(expected[1][3].1, "www.example.com");
    assert_eq!(header_blocks(&frames(&rewrite(&input, 2))), expected);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn a_never_indexed_field_stays_never_indexed() {
    let mut block = encode(&mut Encoder::new(), &grpc_request(Some("/tmp/s")));
    block.extend([0x10, 8]);
    block.extend_from_slice(b"x-secret");
    block.extend([3]);
    block.extend_from_slice(b"abc");
    block.extend([0x1f, 8, 4]); // never indexed, name `authorization` (23)
    block.extend_from_slice(b"open");
    let input = connection(&[frame(HEADERS, END_HEADERS, 1, &block)]);
    let out = frames(&rewrite(&input, 64));
    let mut kinds = Vec::new();
    field_kinds(&out[1].payload, &mut kinds).unwrap();
    let n = kinds.len();
    assert!(kinds[..n - 2].iter().all(|&never| !never), "{kinds:?}");
    assert_eq!(kinds[n - 2..], [true, true]);
    let fields = &header_blocks(&out)[0];
    assert_eq!(fields[n - 1], ("authorization".into(), "open".into()));
}

#[test]
fn data_frames_pass_through_in_place() {
    let body: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
    let input = connection(&[
        frame(DATA, 0, 1, &body[..MAX_FRAME]),
        frame(WINDOW_UPDATE, 0, 0, &[0, 1, 0, 0]),
        frame(DATA, END_STREAM, 1, &body[MAX_FRAME..2 * MAX_FRAME]),
    ]);
    let mut out = Vec::new();
    assert_eq!(Rewriter::new().scan(&input, &mut out), input.len());
    assert!(out.is_empty());
    assert!(rewrite(&input, 1000) == input);

    // Around a rewritten block, the other frames are as they were.
    let block = encode(&mut Encoder::new(), &grpc_request(Some("/tmp/s")));
    let input = connection(&[
        frame(HEADERS, END_HEADERS, 1, &block),
        frame(DATA, END_STREAM, 1, &body[..1000]),
    ]);
    let out = frames(&rewrite(&input, 333));
    assert_eq!(
        (out[2].kind, out[2].flags, out[2].stream),
        (DATA, END_STREAM, 1)
    );
    assert!(out[2].payload == body[..1000]);
}

#[test]
fn broken_streams_pass_through_unchanged() {
    let block = encode(&mut Encoder::new(), &grpc_request(Some("/tmp/s")));
    let whole = connection(&[frame(HEADERS, END_HEADERS, 1, &block)]);
    // Cut anywhere before the block is complete: the bytes as they came.
    for cut in 0..whole.len() {
        assert_eq!(rewrite(&whole[..cut], 7), whole[..cut], "cut at {cut}");
    }
    let cases = [
        // Not HTTP/2 with prior knowledge.
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        // An index past the tables.
        connection(&[frame(HEADERS, END_HEADERS, 1, &[0x80 | 70])]),
        // A block ending in a table size update, or growing the table.
        connection(&[frame(HEADERS, END_HEADERS, 1, &[0x82, 0x20])]),
        connection(&[frame(HEADERS, END_HEADERS, 1, &[0x3f, 0xe1, 0x3f, 0x82])]),
        // Another frame inside a block; a CONTINUATION of another stream.
        connection(&[frame(HEADERS, 0, 1, &block), frame(DATA, 0, 1, b"x")]),
        connection(&[frame(HEADERS, 0, 1, &block), frame(CONTINUATION, 4, 3, b"")]),
        // A frame over the server's size.
        connection(&[frame(HEADERS, END_HEADERS, 1, &vec![0x82; MAX_FRAME + 1])]),
    ];
    for input in cases {
        for chunk in [1, 9, input.len()] {
            let head = &input[..input.len().min(40)];
            assert!(rewrite(&input, chunk) == input, "in {chunk}s: {head:?}...");
        }
    }

    // A block over the bound (a CONTINUATION flood) is not held.
    let mut flood = vec![frame(HEADERS, 0, 1, &block)];
    flood.extend((0..MAX_BLOCK_FRAMES + 10).map(|_| frame(CONTINUATION, 0, 1, &[])));
    let flood = connection(&flood);
    let mut out = Vec::new();
    let mut r = Rewriter::new();
    let kept = r.scan(&flood, &mut out);
    assert!(r.is_off());
    assert!([&flood[..kept], &out].concat() == flood);

    // A block decoding to more than MAX_DECODED: many references to one
    // large table entry.
    let mut bomb = vec![0x40, 1, b'x', 0x7f, 0xa1, 0x1e];
    bomb.extend(std::iter::repeat_n(b'a', 4000));
    bomb.extend(std::iter::repeat_n(0xbe, 20_000));
    let input = connection(&[
        frame(HEADERS, 0, 1, &bomb[..MAX_FRAME]),
        frame(CONTINUATION, END_HEADERS, 1, &bomb[MAX_FRAME..]),
    ]);
    assert!(
        rewrite(&input, input.len()) == input,
        "the bomb is rewritten"
    );
}

#[test]
fn random_frames_do_not_panic() {
    let mut rng = ChaCha8Rng::seed_from_u64(48);
    for _ in 0..3000 {
        let mut sent = Vec::new();
        for _ in 0..rng.gen_range(1..5) {
            let kind = [DATA, HEADERS, CONTINUATION, SETTINGS][rng.gen_range(0..4)];
            let payload: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.r#gen()).collect();
            sent.push(frame(kind, rng.r#gen(), rng.gen_range(0..4), &payload));
        }
        let mut input = connection(&sent);
        if rng.gen_bool(0.3) {
            let cut = rng.gen_range(0..input.len());
            input.truncate(cut);
        }
        let out = rewrite(&input, rng.gen_range(1..50));
        assert!(!out.is_empty() || input.is_empty());
    }
}

#[test]
fn the_static_table_is_hpacks() {
    let mut decoder = Decoder::new();
    for (i, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        let fields = decoder.decode(&[0x80 | (i as u8 + 1)]).unwrap();
        assert_eq!(fields, [(n.to_vec(), v.to_vec())]);
    }
}

/// Through the AsyncRead a read at a time, a few bytes each: as the
/// rewriter says; the peer is the Unix socket's.
#[tokio::test]
async fn reads_through_the_connection() {
    let (client, server) = std::os::unix::net::UnixStream::pair().unwrap();
    server.set_nonblocking(true).unwrap();
    let mut server = FixAuthority::new(tokio::net::UnixStream::from_std(server).unwrap());
    let info = server.connect_info();
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    assert_eq!(info.peer_cred.map(|c| c.uid()), Some(uid));

    let block = encode(&mut Encoder::new(), &grpc_request(Some("%2Fs")));
    let input = connection(&[
        frame(DATA, 0, 1, b"before"),
        frame(HEADERS, END_HEADERS, 3, &block),
        frame(DATA, END_STREAM, 3, b"after"),
    ]);
    let expected = rewrite(&input, input.len());
    let writer = std::thread::spawn({
        let input = input.clone();
        move || {
            use std::io::Write;
            let mut client = client;
            for piece in input.chunks(11) {
                client.write_all(piece).unwrap();
            }
        }
    });
    let mut got = Vec::new();
    loop {
        let piece = std::future::poll_fn(|cx| {
            let mut b = [0u8; 3];
            let mut rb = ReadBuf::new(&mut b);
            ready!(Pin::new(&mut server).poll_read(cx, &mut rb))?;
            Poll::Ready(io::Result::Ok(rb.filled().to_vec()))
        })
        .await
        .unwrap();
        if piece.is_empty() {
            break;
        }
        got.extend(piece);
    }
    writer.join().unwrap();
    assert_eq!(got, expected);
    assert_ne!(got, input);
}
