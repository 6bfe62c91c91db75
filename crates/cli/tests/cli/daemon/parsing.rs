//! `max_parsing_bytes`: a large request takes its size from the budget when
//! its first bytes arrive, so a client that stalls mid-body holds it and the
//! next large request waits; small calls (status) are never held; the
//! budget comes back when the stalled client goes away.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::c_core::{CCoreEncoder, DATA, END_HEADERS, HEADERS, SETTINGS, frame};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_large_request_holds_the_parse_budget_but_not_small_calls() {
    let d = TestDaemon::start(|c| {
        c.max_request_bytes = ByteSize(1 << 20);
        c.max_parsing_bytes = ByteSize(1 << 20);
    })
    .await;
    // A Submit whose message says 900 KiB, of which only the prefix comes.
    let mut stalled = UnixStream::connect(d.socket()).unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    let block = CCoreEncoder::default().block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/cuzk.v1.Cuzk/Submit"),
        (":authority", "localhost"),
        ("te", "trailers"),
        ("content-type", "application/grpc"),
    ]);
    hello.extend(frame(HEADERS, END_HEADERS, 1, &block));
    let mut prefix = vec![0u8];
    prefix.extend((900u32 << 10).to_be_bytes());
    hello.extend(frame(DATA, 0, 1, &prefix));
    stalled.write_all(&hello).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    // 300 KB more do not fit in what is left: the request waits.
    let mut c = d.client().await;
    let big = request(
        &"x".repeat(300_000),
        vec![1],
        by_name("none"),
        proto::Priority::Normal,
    );
    let mut waiting = {
        let mut c = d.client().await;
        tokio::spawn(async move { c.submit(big).await.map(|_| ()) })
    };
    assert!(
        tokio::time::timeout(Duration::from_millis(700), &mut waiting)
            .await
            .is_err(),
        "a 300 KB request was answered while a stalled one held the budget"
    );
    // A status call goes through meanwhile.
    let s = tokio::time::timeout(Duration::from_secs(10), status(&mut c))
        .await
        .expect("status is not held behind the budget");
    assert_eq!(s.backend, "cpu");
    // The stalled client leaves: its share comes back, the request is
    // parsed and answered (refused: the circuit is no circuit).
    drop(stalled);
    let e = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting request is answered once the budget is back")
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    d.stop().await;
}
