//! [`PartsGate`]: first come, first served entry to the parallel phase of
//! witnesses synthesized in parts.
//!
//! A witness synthesized in parts ([`crate::Witness::from_parts`]) puts one
//! task per part on rayon's pool. When several such witnesses run at once
//! (the partitions of a proof, each on its own synthesis thread), rayon
//! interleaves their tasks and they all finish together, late: ten 32 GiB
//! PoRep partitions sharing 16 cores all end after about 35 s, while one
//! alone takes 9 s. The GPU needs the first one early. The gate lets a
//! witness start its parts only while the parts already running are fewer
//! than twice the pool's threads (one pool-full running, one queued so the
//! pool never runs dry at a witness's tail), in the order the witnesses
//! asked, so partitions finish about one after the other. A part's place
//! goes back as the part ends ([`GatePass::part_done`]), not when its whole
//! witness ends.
//!
//! A caller may also pace its witnesses ([`with_pacer`]): before a witness
//! takes its place in line, the gate asks the caller's [`Pacer`], and waits
//! while it says no; a witness held back that way holds back nobody behind
//! it (another caller's pacer, or another priority class, may have room).
//! cuzk's engine uses that to stop witnesses from being made far ahead of
//! the GPU that proves them (each finished one waits whole in host memory):
//! its pacer says yes only while fewer than
//! `synthesis_ahead` partitions are admitted or finished and not yet taken
//! by a GPU worker, and wakes the gate ([`PartsGate::wake`]) when a worker
//! takes one.

use crate::SynthError;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Asked by the gate, on the caller's thread, before the caller's witness
/// takes its place in line: true lets it in line (and is the pacer's cue to
/// count it), false keeps it out (asked again after [`PartsGate::wake`] or
/// [`PACER_POLL`]) while witnesses that come later go ahead of it.
pub trait Pacer {
    fn try_admit(&self) -> bool;

    /// Asked while the pacer keeps a witness out of line: true makes
    /// [`PartsGate::try_enter`] give up with [`SynthError::Yielded`] (a
    /// witness that has not started its parts has lost nothing).
    fn should_yield(&self) -> bool {
        false
    }
}

/// How often a waiting witness asks its pacer again without a wake.
pub const PACER_POLL: Duration = Duration::from_millis(50);

thread_local! {
    static PACER: RefCell<Option<Rc<dyn Pacer>>> = const { RefCell::new(None) };
}

/// Runs `f` with `pacer` asked before any witness `f` makes on this thread
/// enters a gate; the previous pacer (if any) is back after, also when `f`
/// panics.
pub fn with_pacer<R>(pacer: Rc<dyn Pacer>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rc<dyn Pacer>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            PACER.with(|p| *p.borrow_mut() = previous);
        }
    }
    let _restore = Restore(PACER.with(|p| p.borrow_mut().replace(pacer)));
    f()
}

/// Admits holders in ticket order while the parts admitted and not yet
/// released are under a bound. See the module docs.
#[derive(Debug)]
pub struct PartsGate {
    bound: usize,
    state: Mutex<GateState>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// The next ticket handed out.
    next: u64,
    /// The ticket admitted next.
    serving: u64,
    /// Parts admitted and not yet released.
    parts: usize,
}

/// Holds `parts` of the gate's bound: each is given back by
/// [`GatePass::part_done`] as its part ends, and what is left when the pass
/// is dropped (also on a panic).
#[derive(Debug)]
pub struct GatePass<'a> {
    gate: &'a PartsGate,
    left: AtomicUsize,
}

impl PartsGate {
    /// A gate admitting a witness while fewer than `bound` parts run (at
    /// least one witness always runs, however many parts it has).
    pub fn new(bound: usize) -> Self {
        PartsGate {
            bound: bound.max(1),
            state: Mutex::new(GateState::default()),
            turn: Condvar::new(),
        }
    }

    /// The process-wide gate for witnesses whose parts run on rayon's
    /// global pool: bound twice its threads.
    pub fn global() -> &'static PartsGate {
        static GATE: OnceLock<PartsGate> = OnceLock::new();
        GATE.get_or_init(|| PartsGate::new(2 * rayon::current_num_threads()))
    }

    /// The bound on parts running at once.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Waits for this thread's [`Pacer`] (if any, see [`with_pacer`]) to
    /// let the caller in line, then for its turn (callers in line are served
    /// in the order they got there) and for the running parts to be under
    /// the bound, then admits `parts` more.
    pub fn enter(&self, parts: usize) -> GatePass<'_> {
        match self.enter_with(parts, false) {
            Ok(pass) => pass,
            Err(_) => unreachable!("enter_with yields only when asked to"),
        }
    }

    /// [`Self::enter`], except that while its pacer keeps it out of line
    /// and asks it to yield ([`Pacer::should_yield`]), it returns
    /// [`SynthError::Yielded`] instead: for witnesses that do nothing before
    /// they enter, so that giving up costs nothing.
    pub fn try_enter(&self, parts: usize) -> Result<GatePass<'_>, SynthError> {
        self.enter_with(parts, true)
    }

    fn enter_with(&self, parts: usize, may_yield: bool) -> Result<GatePass<'_>, SynthError> {
        let pacer = PACER.with(|p| p.borrow().clone());
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pacer) = &pacer {
            while !pacer.try_admit() {
                // Asked without the gate's lock (the pacer may take its
                // own); a wake missed meanwhile costs one PACER_POLL.
                if may_yield {
                    drop(st);
                    let give_up = pacer.should_yield();
                    st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    if give_up {
                        return Err(SynthError::Yielded);
                    }
                }
                st = self
                    .turn
                    .wait_timeout(st, PACER_POLL)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let ticket = st.next;
        st.next += 1;
        while st.serving != ticket || st.parts >= self.bound {
            st = self.turn.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.serving += 1;
        st.parts += parts;
        drop(st);
        // The next ticket may fit too.
        self.turn.notify_all();
        Ok(GatePass {
            gate: self,
            left: AtomicUsize::new(parts),
        })
    }

    fn release(&self, parts: usize) {
        if parts == 0 {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.parts = st.parts.saturating_sub(parts);
        drop(st);
        self.turn.notify_all();
    }

    /// Wakes the witnesses waiting at the gate, to ask their pacers again.
    pub fn wake(&self) {
        // Taken and let go so that a waiter between asking its pacer and
        // sleeping cannot miss this.
        drop(self.state.lock().unwrap_or_else(|p| p.into_inner()));
        self.turn.notify_all();
    }

    /// Parts admitted and not yet released.
    pub fn running(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).parts
    }
}

impl GatePass<'_> {
    /// One of the pass's parts has ended: its place goes back to the gate
    /// at once, so the next witness can start while this one's last parts
    /// run (no idle tail). Calls beyond the pass's parts do nothing.
    pub fn part_done(&self) {
        if self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            self.gate.release(1);
        }
    }
}

impl Drop for GatePass<'_> {
    fn drop(&mut self) {
        self.gate.release(*self.left.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn admits_in_order_under_the_bound() {
        let gate = Arc::new(PartsGate::new(4));
        // 18 parts: over the bound alone, admitted because nothing runs.
        let first = gate.enter(18);
        assert_eq!(gate.running(), 18);
        let (tx, rx) = mpsc::channel();
        let mut threads = Vec::new();
        for i in 0..3 {
            // Each waiter takes its ticket before the next one starts.
            let (g, tx) = (Arc::clone(&gate), tx.clone());
            threads.push(thread::spawn(move || {
                let pass = g.enter(4);
                tx.send((i, g.running())).unwrap();
                thread::sleep(Duration::from_millis(20));
                drop(pass);
            }));
            while gate.state.lock().unwrap().next != i + 2 {
                thread::yield_now();
            }
        }
        // Nobody enters while 18 parts run.
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(first);
        let mut order = Vec::new();
        for _ in 0..3 {
            let (i, running) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            // One at a time: 4 parts fill the bound.
            assert_eq!(running, 4);
            order.push(i);
        }
        assert_eq!(order, [0, 1, 2]);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(gate.running(), 0);
        // Under the bound, witnesses run side by side.
        let (a, b) = (gate.enter(2), gate.enter(1));
        assert_eq!(gate.running(), 3);
        drop((a, b));
    }

    #[test]
    fn parts_given_back_one_by_one_let_the_next_witness_in() {
        let gate = Arc::new(PartsGate::new(4));
        let first = gate.enter(6);
        let g = Arc::clone(&gate);
        let next = thread::spawn(move || {
            let _pass = g.enter(2);
            g.running()
        });
        for left in [5, 4] {
            first.part_done();
            // Still at the bound: the waiter stays out.
            assert_eq!(gate.running(), left);
        }
        // 3 running, under the bound: the waiter gets in with its 2.
        first.part_done();
        assert_eq!(next.join().unwrap(), 5);
        first.part_done();
        first.part_done();
        first.part_done();
        // Beyond its parts: nothing more is given back.
        first.part_done();
        assert_eq!(gate.running(), 0);
        drop(first);
        assert_eq!(gate.running(), 0);
    }

    /// Says yes once `open` is set, and counts the times it was asked.
    struct Flag {
        open: Arc<std::sync::atomic::AtomicBool>,
        asked: Arc<AtomicUsize>,
    }

    impl Pacer for Flag {
        fn try_admit(&self) -> bool {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.open.load(Ordering::SeqCst)
        }
    }

    /// Never admits; asks to yield from the `after`-th refusal on.
    struct Yielding {
        refused: std::cell::Cell<usize>,
        after: usize,
    }

    impl Pacer for Yielding {
        fn try_admit(&self) -> bool {
            self.refused.set(self.refused.get() + 1);
            false
        }

        fn should_yield(&self) -> bool {
            self.refused.get() >= self.after
        }
    }

    #[test]
    fn try_enter_gives_up_when_its_pacer_asks_and_takes_no_place() {
        let gate = PartsGate::new(4);
        let pacer = Rc::new(Yielding {
            refused: std::cell::Cell::new(0),
            after: 3,
        });
        let asked = Rc::clone(&pacer);
        let got = with_pacer(pacer, || gate.try_enter(2).map(|_| ()));
        assert!(matches!(got, Err(SynthError::Yielded)), "{got:?}");
        // Refused three times (two waits of PACER_POLL), then gave up.
        assert_eq!(asked.refused.get(), 3);
        // No ticket taken, no parts counted: the next caller goes straight in.
        assert_eq!(gate.running(), 0);
        let pass = gate.try_enter(1).unwrap();
        assert_eq!(gate.running(), 1);
        drop(pass);
    }

    #[test]
    fn a_pacer_holds_back_its_witness_and_nobody_behind_it() {
        let gate = Arc::new(PartsGate::new(8));
        let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let asked = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let (g, t) = (Arc::clone(&gate), tx.clone());
        let flag = Flag {
            open: Arc::clone(&open),
            asked: Arc::clone(&asked),
        };
        let paced = thread::spawn(move || {
            with_pacer(Rc::new(flag), || {
                let _pass = g.enter(2);
                t.send("paced").unwrap();
            });
            // The pacer is gone after `with_pacer`: no more asking.
            let _pass = g.enter(1);
        });
        // Asked and said no: the witness waits out of line (no ticket).
        while asked.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(gate.state.lock().unwrap().next, 0);
        // A witness that comes later (no pacer) goes ahead of it.
        let g = Arc::clone(&gate);
        let later = thread::spawn(move || {
            let _pass = g.enter(1);
            tx.send("later").unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "later");
        later.join().unwrap();
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(gate.running(), 0);
        // Asked again by its polls while it waited.
        assert!(asked.load(Ordering::SeqCst) >= 2);
        open.store(true, Ordering::SeqCst);
        gate.wake();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "paced");
        let before = asked.load(Ordering::SeqCst);
        paced.join().unwrap();
        // Not asked once the pacer was gone.
        assert_eq!(asked.load(Ordering::SeqCst), before);
        assert_eq!(gate.running(), 0);
        // Without a pacer on this thread, straight in.
        let _pass = gate.enter(1);
    }

    #[test]
    fn a_pass_dropped_by_a_panic_releases_its_parts() {
        let gate = Arc::new(PartsGate::new(4));
        let g = Arc::clone(&gate);
        let r = thread::spawn(move || {
            let _pass = g.enter(4);
            panic!("witness failed");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(gate.running(), 0);
        let _pass = gate.enter(3);
        assert_eq!(gate.running(), 3);
        assert_eq!(PartsGate::new(0).bound(), 1);
    }
}
