//! A bound on the request bytes the daemon parses at once
//! (`max_parsing_bytes`): a 120 MB request costs about four times its size
//! while it is decoded and parsed, and nothing else bounds how many
//! arrive together.
//!
//! A layer in front of the gRPC services reads each request's first
//! message header (gRPC's 5-byte prefix: a flag and the message's length),
//! takes that many bytes from a shared budget before passing the body on
//! (messages of at most [`SMALL_MESSAGE`] bytes take nothing: small calls
//! such as status and awaits are never held behind large requests),
//! and gives them back when the call has its response (the request is then
//! parsed and either refused or submitted, where the engine's memory budget
//! takes over). A request that finds the budget spent waits: HTTP/2 flow
//! control holds its client until earlier requests are through. A request
//! takes its whole size at once, so requests waiting together cannot each
//! hold a part and wait forever for the rest; they are served in the order
//! they came (a large request is not passed over by smaller ones forever).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use hyper::body::{Bytes, Frame, SizeHint};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};

/// gRPC's message prefix: a compression flag and a big-endian length.
const PREFIX: usize = 5;

/// Messages up to this size pass without taking from the budget: status,
/// awaits, cancels and other small calls are never held behind large
/// requests waiting for it.
pub const SMALL_MESSAGE: u32 = 64 << 10;

/// The bytes that may be parsed at once, shared by every call.
#[derive(Debug, Clone)]
pub struct ParseBudget {
    semaphore: Arc<Semaphore>,
    total: u64,
}

impl ParseBudget {
    /// A budget of `total` bytes (at most what a semaphore counts).
    pub fn new(total: u64) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS as u64).max(1);
        ParseBudget {
            // Bounded by MAX_PERMITS above: fits a usize.
            semaphore: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Bytes not taken by a request now.
    pub fn available(&self) -> u64 {
        self.semaphore.available_permits() as u64
    }

    /// What a message of `len` bytes takes: all of it with its prefix, at
    /// most the whole budget (the service refuses larger messages itself,
    /// after the prefix, by `max_request_bytes`).
    fn share(&self, len: u32) -> u32 {
        if len <= SMALL_MESSAGE {
            return 0;
        }
        let want = u64::from(len) + PREFIX as u64;
        u32::try_from(want.min(self.total)).unwrap_or(u32::MAX)
    }
}

/// A [`tower::Layer`] putting [`ParseLimit`] in front of a service.
#[derive(Debug, Clone)]
pub struct ParseLimitLayer(pub ParseBudget);

impl<S> tower::Layer<S> for ParseLimitLayer {
    type Service = ParseLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ParseLimit {
            inner,
            budget: self.0.clone(),
        }
    }
}

/// A service whose requests take their size from a [`ParseBudget`] until
/// their response is ready.
#[derive(Debug, Clone)]
pub struct ParseLimit<S> {
    inner: S,
    budget: ParseBudget,
}

type Held = Arc<Mutex<Option<OwnedSemaphorePermit>>>;

impl<S, ResBody> tower::Service<Request<Body>> for ParseLimit<S>
where
    S: tower::Service<Request<Body>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let held: Held = Arc::new(Mutex::new(None));
        let (budget, body_held) = (self.budget.clone(), Arc::clone(&held));
        let req = req.map(|body| Body::new(Counted::new(body, budget, body_held)));
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await;
            // Parsed and answered: its bytes go back to the budget.
            held.lock().unwrap_or_else(PoisonError::into_inner).take();
            response
        })
    }
}

type Acquire = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

enum State {
    /// Reading the first message's prefix.
    Prefix,
    /// Waiting for the budget, with the frame that completed the prefix.
    Waiting(Acquire, Option<Frame<Bytes>>),
    /// Its share taken (or nothing to take): the rest passes.
    Passing,
}

/// A request body held back until its share of the budget is taken.
struct Counted {
    inner: Body,
    budget: ParseBudget,
    held: Held,
    prefix: Vec<u8>,
    state: State,
}

impl Counted {
    fn new(inner: Body, budget: ParseBudget, held: Held) -> Self {
        Counted {
            inner,
            budget,
            held,
            prefix: Vec::with_capacity(PREFIX),
            state: State::Prefix,
        }
    }
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Passing => return Pin::new(&mut this.inner).poll_frame(cx),
                State::Waiting(acquire, frame) => {
                    let permit = match acquire.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(permit)) => permit,
                        // The semaphore is never closed; pass on regardless.
                        Poll::Ready(Err(_)) => {
                            let frame = frame.take();
                            this.state = State::Passing;
                            return Poll::Ready(frame.map(Ok));
                        }
                    };
                    *this.held.lock().unwrap_or_else(PoisonError::into_inner) = Some(permit);
                    let frame = frame.take();
                    this.state = State::Passing;
                    return Poll::Ready(frame.map(Ok));
                }
                State::Prefix => {
                    let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                        Poll::Ready(Some(Ok(frame))) => frame,
                        other => return other,
                    };
                    if let Some(data) = frame.data_ref() {
                        let need = PREFIX - this.prefix.len();
                        this.prefix.extend_from_slice(&data[..need.min(data.len())]);
                    }
                    if this.prefix.len() < PREFIX {
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    let len = u32::from_be_bytes([
                        this.prefix[1],
                        this.prefix[2],
                        this.prefix[3],
                        this.prefix[4],
                    ]);
                    let share = this.budget.share(len);
                    if share == 0 {
                        this.state = State::Passing;
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    if share as u64 > this.budget.available() {
                        tracing::debug!(
                            bytes = share,
                            available = this.budget.available(),
                            "a request waits for max_parsing_bytes"
                        );
                    }
                    let semaphore = Arc::clone(&this.budget.semaphore);
                    this.state =
                        State::Waiting(Box::pin(semaphore.acquire_many_owned(share)), Some(frame));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self.state {
            State::Waiting(..) => false,
            _ => self.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Body as _;
    use std::collections::VecDeque;
    use std::time::Duration;

    /// A body of the given chunks.
    struct Chunks(VecDeque<Bytes>);

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = tonic::Status;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    /// A gRPC message of `len` bytes, in one chunk or (`split`) in chunks
    /// of 3 bytes, so its prefix spans two.
    fn message(len: usize, split: bool) -> Body {
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(&(len as u32).to_be_bytes());
        bytes.extend(std::iter::repeat_n(7u8, len));
        let chunks = if split {
            bytes.chunks(3).map(Bytes::copy_from_slice).collect()
        } else {
            VecDeque::from([Bytes::from(bytes)])
        };
        Body::new(Chunks(chunks))
    }

    /// A service that reads its request whole, reports it, and answers
    /// when told to.
    fn service(
        read: tokio::sync::mpsc::UnboundedSender<usize>,
        release: Arc<Semaphore>,
    ) -> impl tower::Service<
        Request<Body>,
        Response = Response<Body>,
        Error = std::convert::Infallible,
        Future = impl Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send,
    > + Clone {
        tower::service_fn(move |req: Request<Body>| {
            let (read, release) = (read.clone(), Arc::clone(&release));
            async move {
                let mut body = req.into_body();
                let mut n = 0;
                while let Some(frame) =
                    std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
                {
                    n += frame.unwrap().into_data().map_or(0, |d| d.len());
                }
                read.send(n).unwrap();
                release.acquire().await.unwrap().forget();
                Ok(Response::new(Body::empty()))
            }
        })
    }

    #[tokio::test]
    async fn a_request_waits_while_the_budget_is_taken_and_goes_on_after() {
        use tower::{Layer, ServiceExt};
        let k = SMALL_MESSAGE as usize;
        let budget = ParseBudget::new(10 * k as u64);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let release = Arc::new(Semaphore::new(0));
        let svc = ParseLimitLayer(budget.clone()).layer(service(tx, Arc::clone(&release)));
        // 7 k: read and parsed, then held until its response.
        let first = tokio::spawn(svc.clone().oneshot(Request::new(message(7 * k, false))));
        assert_eq!(rx.recv().await, Some(7 * k + 5));
        assert_eq!(budget.available(), 3 * k as u64 - 5);
        // 2 k fit beside it (its prefix split over two chunks).
        let beside = tokio::spawn(svc.clone().oneshot(Request::new(message(2 * k, true))));
        assert_eq!(rx.recv().await, Some(2 * k + 5));
        assert_eq!(budget.available(), k as u64 - 10);
        // 4 k more do not fit: the body is not read yet.
        let waiting = tokio::spawn(svc.clone().oneshot(Request::new(message(4 * k, false))));
        assert!(
            tokio::time::timeout(Duration::from_millis(200), rx.recv())
                .await
                .is_err(),
            "the 4 k request was read while the others held the budget"
        );
        // A small call is not held behind it, and takes nothing.
        let small = tokio::spawn(svc.clone().oneshot(Request::new(message(100, true))));
        assert_eq!(rx.recv().await, Some(105));
        // The first answered: its bytes go back and the waiting one is read.
        release.add_permits(1);
        first.await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some(4 * k + 5));
        release.add_permits(3);
        for call in [beside, small, waiting] {
            call.await.unwrap().unwrap();
        }
        assert_eq!(budget.available(), 10 * k as u64);
    }

    #[tokio::test]
    async fn a_message_larger_than_the_budget_takes_all_of_it_and_still_passes() {
        use tower::{Layer, ServiceExt};
        let k = SMALL_MESSAGE as usize;
        let budget = ParseBudget::new(2 * k as u64);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let release = Arc::new(Semaphore::new(0));
        let svc = ParseLimitLayer(budget.clone()).layer(service(tx, Arc::clone(&release)));
        let call = tokio::spawn(svc.oneshot(Request::new(message(5 * k, false))));
        assert_eq!(rx.recv().await, Some(5 * k + 5));
        assert_eq!(budget.available(), 0);
        release.add_permits(1);
        call.await.unwrap().unwrap();
        assert_eq!(budget.available(), 2 * k as u64);
    }

    #[tokio::test]
    async fn an_empty_body_takes_nothing() {
        use tower::{Layer, ServiceExt};
        let budget = ParseBudget::new(10);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let release = Arc::new(Semaphore::new(0));
        let svc = ParseLimitLayer(budget.clone()).layer(service(tx, Arc::clone(&release)));
        let call = tokio::spawn(svc.oneshot(Request::new(Body::empty())));
        assert_eq!(rx.recv().await, Some(0));
        assert_eq!(budget.available(), 10);
        release.add_permits(1);
        call.await.unwrap().unwrap();
    }
}
