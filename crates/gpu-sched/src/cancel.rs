//! Cancellation tokens that wake blocked waits.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

type Listener = Arc<dyn Fn() + Send + Sync>;

/// A cancellation flag shared by clones. Cancelling it wakes every blocking
/// wait of this crate that was given it ([`crate::DispatchBound::acquire`],
/// [`crate::DeviceMemory::reserve`]); a job's token
/// ([`crate::JobHandle::cancel_token`]) also cancels the job. Phases see it
/// through [`crate::WorkerContext::is_cancelled`].
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    listeners: Mutex<Listeners>,
}

#[derive(Default)]
struct Listeners {
    next: u64,
    map: BTreeMap<u64, Listener>,
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels: every clone reports it, and waits given this token return
    /// [`crate::GpuSchedError::Cancelled`]. Idempotent.
    ///
    /// Listeners run on the calling thread.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        // Called without the listeners' lock: a listener takes other locks.
        let listeners: Vec<Listener> = self.listeners().map.values().cloned().collect();
        for listener in listeners {
            listener();
        }
    }

    /// Whether [`Self::cancel`] was called on any clone.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    fn listeners(&self) -> std::sync::MutexGuard<'_, Listeners> {
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `listener` on the first cancellation, while the guard lives.
    ///
    /// If the token is cancelled concurrently the listener may not run:
    /// callers check [`Self::is_cancelled`] after registering, under the lock
    /// the listener takes, so no wake-up is lost.
    pub(crate) fn listen(&self, listener: Listener) -> ListenerGuard {
        let mut listeners = self.listeners();
        let id = listeners.next;
        listeners.next += 1;
        listeners.map.insert(id, listener);
        ListenerGuard {
            token: Some(Arc::downgrade(&self.inner)),
            id,
        }
    }
}

/// Unregisters its listener on drop.
pub(crate) struct ListenerGuard {
    /// `None` once kept.
    token: Option<Weak<Inner>>,
    id: u64,
}

impl ListenerGuard {
    /// Keeps the listener for the token's whole life.
    pub(crate) fn keep(mut self) {
        self.token = None;
    }
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        if let Some(inner) = self.token.as_ref().and_then(Weak::upgrade) {
            inner
                .listeners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .map
                .remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn clones_share_the_flag_and_listeners_run_once() {
        let token = CancelToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        let guard = token.listen(Arc::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        let c = Arc::clone(&calls);
        drop(token.listen(Arc::new(move || {
            c.fetch_add(100, Ordering::SeqCst);
        })));
        let clone = token.clone();
        assert!(!clone.is_cancelled());
        clone.cancel();
        token.cancel();
        assert!(token.is_cancelled());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drop(guard);
    }
}
