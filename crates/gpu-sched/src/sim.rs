//! A discrete-event simulation of the scheduler: the same [`Core`] and
//! [`PermitCore`] decisions the threaded scheduler makes, driven by a
//! simulated clock (ticks), with the engine's side modelled as "take a
//! dispatch permit, synthesize, submit". After every event, oracles written
//! apart from [`Core`] re-check the invariants: memory never over capacity,
//! queue and lock order, no idle worker or free lock while work could use
//! them, never more than the bound in flight.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use crate::core::{Core, CoreEvent, ItemEnd, WorkerId};
use crate::permits::PermitCore;
use crate::{GpuSchedError, JobId, JobSummary, Phase, Priority, Result};

#[derive(Debug, Clone)]
pub(crate) struct SimItem {
    pub(crate) bytes: u64,
    pub(crate) synth: u64,
    pub(crate) prep: u64,
    pub(crate) kernel: u64,
    pub(crate) epilogue: u64,
    /// The phase that fails, if any.
    pub(crate) fail: Option<Phase>,
}

#[derive(Debug, Clone)]
pub(crate) struct SimJob {
    pub(crate) arrival: u64,
    pub(crate) priority: Priority,
    pub(crate) items: Vec<SimItem>,
    pub(crate) cancel_at: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct SimSetup {
    pub(crate) capacities: Vec<u64>,
    pub(crate) margin: u64,
    pub(crate) workers_per_device: usize,
    /// The engine's dispatch bound; `None`: synthesis is never held back.
    pub(crate) bound: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelSpan {
    pub(crate) device: usize,
    pub(crate) job: usize,
    pub(crate) partition: u32,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) completed: usize,
    pub(crate) cancelled: usize,
    pub(crate) refused: usize,
    pub(crate) failed: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) kernels: Vec<KernelSpan>,
    /// (job, partition) -> tick a worker took it.
    pub(crate) assigned_at: HashMap<(usize, u32), u64>,
    pub(crate) submitted_at: HashMap<(usize, u32), u64>,
    pub(crate) synth_starts: Vec<u64>,
    pub(crate) item_ends: Vec<u64>,
    /// Per device, the most bytes items held at once.
    pub(crate) max_item_bytes: Vec<u64>,
    pub(crate) max_in_flight: usize,
    pub(crate) tallies: Vec<Tally>,
    pub(crate) outcomes: Vec<Option<Result<JobSummary>>>,
    /// Broken invariants, in words; empty when all held.
    pub(crate) violations: Vec<String>,
    /// What was left behind at the end (queued items, reserved bytes,
    /// permits, locks, busy workers); empty when nothing was.
    pub(crate) leftovers: Vec<String>,
}

impl Report {
    /// Fraction of the time between the first kernel region's start and the
    /// last one's end that `device` ran a kernel region.
    pub(crate) fn busy(&self, device: usize) -> f64 {
        let spans: Vec<&KernelSpan> = self.kernels.iter().filter(|k| k.device == device).collect();
        let (Some(first), Some(last)) = (
            spans.iter().map(|k| k.start).min(),
            spans.iter().map(|k| k.end).max(),
        ) else {
            return 0.0;
        };
        let busy: u64 = spans.iter().map(|k| k.end - k.start).sum();
        busy as f64 / (last - first).max(1) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Prep,
    Kernel,
    Epilogue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    Cancel(usize),
    SynthDone(usize, u32),
    PhaseDone(WorkerId, Step),
}

#[derive(Debug, Clone, Copy)]
struct Payload {
    job: usize,
    partition: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SimStage {
    Idle,
    Prep,
    Waiting,
    Kernel,
    Epilogue,
}

type QueueKey = (Reverse<Priority>, JobId, u32);

struct Sim<'a> {
    setup: &'a SimSetup,
    jobs: &'a [SimJob],
    core: Core<Payload>,
    permits: Option<PermitCore>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: u64,
    ids: Vec<Option<JobId>>,
    tickets: BTreeMap<u64, (usize, u32)>,
    unsynthesized: Vec<usize>,
    // The oracles' own view of the state.
    cancelled: Vec<bool>,
    queued: BTreeMap<QueueKey, u64>,
    item_bytes: Vec<u64>,
    stage: Vec<(SimStage, Option<(QueueKey, usize)>)>,
    running: HashMap<WorkerId, Payload>,
    in_flight: usize,
    kernel_start: HashMap<WorkerId, u64>,
    report: Report,
}

pub(crate) fn simulate(setup: &SimSetup, jobs: &[SimJob]) -> Report {
    let specs: Vec<(usize, u64)> = setup.capacities.iter().copied().enumerate().collect();
    let mut core = Core::new(&specs, setup.workers_per_device, setup.margin);
    core.record_events();
    let workers = core.worker_count();
    let mut sim = Sim {
        setup,
        jobs,
        core,
        permits: setup.bound.map(PermitCore::new),
        heap: BinaryHeap::new(),
        seq: 0,
        now: 0,
        ids: vec![None; jobs.len()],
        tickets: BTreeMap::new(),
        unsynthesized: vec![0; jobs.len()],
        cancelled: vec![false; jobs.len()],
        queued: BTreeMap::new(),
        item_bytes: vec![0; setup.capacities.len()],
        stage: vec![(SimStage::Idle, None); workers],
        running: HashMap::new(),
        in_flight: 0,
        kernel_start: HashMap::new(),
        report: Report {
            max_item_bytes: vec![0; setup.capacities.len()],
            tallies: vec![Tally::default(); jobs.len()],
            ..Report::default()
        },
    };
    for (j, job) in jobs.iter().enumerate() {
        sim.at(job.arrival, Ev::Arrive(j));
    }
    while let Some(Reverse((time, _, ev))) = sim.heap.pop() {
        sim.now = time;
        sim.handle(ev);
        sim.check_quiescent();
    }
    sim.finish_report()
}

impl Sim<'_> {
    fn at(&mut self, time: u64, ev: Ev) {
        self.heap.push(Reverse((time, self.seq, ev)));
        self.seq += 1;
    }

    fn usable(&self, device: usize) -> u64 {
        self.setup.capacities[device].saturating_sub(self.setup.margin)
    }

    fn item(&self, job: usize, partition: u32) -> &SimItem {
        &self.jobs[job].items[partition as usize]
    }

    fn id(&self, job: usize) -> JobId {
        self.ids[job].unwrap_or(JobId(u64::MAX))
    }

    fn violation(&mut self, text: String) {
        self.report
            .violations
            .push(format!("t={}: {text}", self.now));
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive(j) => self.arrive(j),
            Ev::Cancel(j) => self.cancel(j),
            Ev::SynthDone(j, p) => self.synth_done(j, p),
            Ev::PhaseDone(w, step) => self.phase_done(w, step),
        }
        self.process_events();
    }

    fn arrive(&mut self, j: usize) {
        let job = &self.jobs[j];
        let id = self.core.create_job(job.priority);
        self.ids[j] = Some(id);
        self.unsynthesized[j] = job.items.len();
        if job.items.is_empty() {
            self.core.close(id);
        }
        if let Some(at) = job.cancel_at {
            self.at(at.max(self.now), Ev::Cancel(j));
        }
        for p in 0..job.items.len() as u32 {
            self.request_permit(j, p);
        }
    }

    fn request_permit(&mut self, j: usize, p: u32) {
        let priority = self.jobs[j].priority;
        match &mut self.permits {
            None => self.start_synth(j, p),
            Some(permits) => {
                let ticket = permits.request(priority);
                if permits.take_grant(ticket) {
                    self.start_synth(j, p);
                } else {
                    self.tickets.insert(ticket, (j, p));
                }
            }
        }
    }

    fn start_synth(&mut self, j: usize, p: u32) {
        self.in_flight += 1;
        self.report.max_in_flight = self.report.max_in_flight.max(self.in_flight);
        if let Some(bound) = self.setup.bound
            && self.in_flight > bound
        {
            self.violation(format!(
                "{} in flight over a bound of {bound}",
                self.in_flight
            ));
        }
        self.report.synth_starts.push(self.now);
        let synth = self.item(j, p).synth;
        self.at(self.now + synth, Ev::SynthDone(j, p));
    }

    fn release_permit(&mut self) {
        self.in_flight -= 1;
        let Some(permits) = &mut self.permits else {
            return;
        };
        if let Some(ticket) = permits.release() {
            permits.take_grant(ticket);
            if let Some((j, p)) = self.tickets.remove(&ticket) {
                self.start_synth(j, p);
            }
        }
    }

    fn leave_synthesis(&mut self, j: usize) {
        self.unsynthesized[j] -= 1;
        if self.unsynthesized[j] == 0 {
            self.core.close(self.id(j));
        }
    }

    fn synth_done(&mut self, j: usize, p: u32) {
        let id = self.id(j);
        if self.core.is_cancelled(id) {
            self.report.tallies[j].cancelled += 1;
            self.release_permit();
            self.leave_synthesis(j);
            return;
        }
        let bytes = self.item(j, p).bytes;
        match self.core.submit(
            id,
            p,
            bytes,
            Payload {
                job: j,
                partition: p,
            },
        ) {
            Ok(()) => {
                self.queued
                    .insert((Reverse(self.jobs[j].priority), id, p), bytes);
                self.report.submitted_at.insert((j, p), self.now);
            }
            Err((GpuSchedError::ItemNeverFits { need_bytes, .. }, _)) => {
                let largest = (0..self.setup.capacities.len())
                    .map(|d| self.usable(d))
                    .max()
                    .unwrap_or(0);
                if need_bytes <= largest {
                    self.violation(format!("{need_bytes} bytes refused but {largest} usable"));
                }
                self.report.tallies[j].refused += 1;
                self.release_permit();
            }
            Err((error, _)) => self.violation(format!("unexpected refusal: {error}")),
        }
        self.leave_synthesis(j);
    }

    fn phase_done(&mut self, w: WorkerId, step: Step) {
        let Some(payload) = self.running.get(&w).copied() else {
            self.violation(format!("worker {w} finished {step:?} without an item"));
            return;
        };
        let (j, p) = (payload.job, payload.partition);
        let fail = self.item(j, p).fail;
        let cancelled = self.core.is_cancelled(self.id(j));
        match step {
            Step::Prep => {
                if fail == Some(Phase::Prep) {
                    self.end_item(w, failed(Phase::Prep));
                } else if cancelled {
                    self.end_item(w, ItemEnd::Cancelled);
                } else {
                    self.stage[w].0 = SimStage::Waiting;
                    self.core.request_kernel(w);
                }
            }
            Step::Kernel => {
                let device = self.core.device_of(w);
                let start = self.kernel_start.remove(&w).unwrap_or(self.now);
                self.report.kernels.push(KernelSpan {
                    device,
                    job: j,
                    partition: p,
                    start,
                    end: self.now,
                });
                self.stage[w].0 = SimStage::Epilogue;
                self.core.kernel_done(w);
                if fail == Some(Phase::Kernel) {
                    self.end_item(w, failed(Phase::Kernel));
                } else if cancelled {
                    self.end_item(w, ItemEnd::Cancelled);
                } else {
                    let epilogue = self.item(j, p).epilogue;
                    self.at(self.now + epilogue, Ev::PhaseDone(w, Step::Epilogue));
                }
            }
            Step::Epilogue => {
                if fail == Some(Phase::Epilogue) {
                    self.end_item(w, failed(Phase::Epilogue));
                } else {
                    self.end_item(w, ItemEnd::Completed);
                }
            }
        }
    }

    /// As the real worker does: drop the payload (its permit), then tell
    /// the core.
    fn end_item(&mut self, w: WorkerId, end: ItemEnd) {
        let Some(payload) = self.running.remove(&w) else {
            return;
        };
        let j = payload.job;
        let device = self.core.device_of(w);
        self.item_bytes[device] -= self.item(j, payload.partition).bytes;
        self.stage[w] = (SimStage::Idle, None);
        self.report.item_ends.push(self.now);
        self.release_permit();
        let tally = &mut self.report.tallies[j];
        let failed = match &end {
            ItemEnd::Completed => {
                tally.completed += 1;
                false
            }
            ItemEnd::Cancelled => {
                tally.cancelled += 1;
                false
            }
            ItemEnd::Failed(_) => {
                tally.failed += 1;
                true
            }
        };
        let removed = self.core.finish(w, end);
        self.removed(j, removed);
        if failed && !self.cancelled[j] {
            self.job_cancelled(j);
        }
    }

    fn removed(&mut self, j: usize, removed: Vec<Payload>) {
        let count = removed.len();
        for payload in removed {
            let key = (
                Reverse(self.jobs[j].priority),
                self.id(j),
                payload.partition,
            );
            if self.queued.remove(&key).is_none() {
                self.violation(format!("{key:?} removed but not queued"));
            }
            self.report.tallies[j].cancelled += 1;
            self.release_permit();
        }
        self.core.payloads_dropped(self.id(j), count);
    }

    fn cancel(&mut self, j: usize) {
        let removed = self.core.cancel(self.id(j));
        self.removed(j, removed);
        self.job_cancelled(j);
    }

    /// What the engine and the workers do when a job is cancelled: give up
    /// its permit tickets, and leave the kernel lock's queue.
    fn job_cancelled(&mut self, j: usize) {
        self.cancelled[j] = true;
        let priority = self.jobs[j].priority;
        let tickets: Vec<u64> = self
            .tickets
            .iter()
            .filter(|(_, (job, _))| *job == j)
            .map(|(&t, _)| t)
            .collect();
        for ticket in tickets {
            self.tickets.remove(&ticket);
            self.report.tallies[j].cancelled += 1;
            self.leave_synthesis(j);
            let granted = self
                .permits
                .as_mut()
                .and_then(|permits| permits.withdraw(priority, ticket));
            if let Some(granted) = granted {
                if let Some(permits) = &mut self.permits {
                    permits.take_grant(granted);
                }
                if let Some((jj, pp)) = self.tickets.remove(&granted) {
                    self.start_synth(jj, pp);
                }
            }
        }
        let waiting: Vec<WorkerId> = (0..self.stage.len())
            .filter(|&w| {
                self.stage[w].0 == SimStage::Waiting
                    && self.running.get(&w).is_some_and(|p| p.job == j)
            })
            .collect();
        for w in waiting {
            self.end_item(w, ItemEnd::Cancelled);
        }
    }

    fn process_events(&mut self) {
        for event in self.core.drain_events() {
            match event {
                CoreEvent::Assigned(w) => self.assigned(w),
                CoreEvent::Granted(w) => self.granted(w),
            }
        }
    }

    fn assigned(&mut self, w: WorkerId) {
        let Some((info, payload)) = self.core.take_payload(w) else {
            self.violation(format!("worker {w} assigned nothing"));
            return;
        };
        let (j, p) = (payload.job, payload.partition);
        let key = (Reverse(info.key.priority), info.key.job, p);
        let device = info.device;
        let bytes = self.item(j, p).bytes;
        if self.queued.remove(&key).is_none() {
            self.violation(format!("{key:?} assigned but not queued"));
        }
        // Nothing ahead of it could ever have run on this device.
        let usable = self.usable(device);
        if let Some((ahead, need)) = self.queued.range(..key).find(|(_, need)| **need <= usable) {
            let text = format!("{key:?} dispatched to GPU {device} ahead of {ahead:?} ({need} B)");
            self.violation(text);
        }
        self.item_bytes[device] += bytes;
        self.report.max_item_bytes[device] =
            self.report.max_item_bytes[device].max(self.item_bytes[device]);
        if self.item_bytes[device] > usable {
            let text = format!(
                "GPU {device}: {} B reserved of {usable}",
                self.item_bytes[device]
            );
            self.violation(text);
        }
        if self.stage[w].0 != SimStage::Idle {
            self.violation(format!("worker {w} assigned while busy"));
        }
        self.stage[w] = (SimStage::Prep, Some((key, device)));
        self.running.insert(w, payload);
        self.report.assigned_at.insert((j, p), self.now);
        let prep = self.item(j, p).prep;
        self.at(self.now + prep, Ev::PhaseDone(w, Step::Prep));
    }

    fn live(&self, w: WorkerId, stage: SimStage) -> Option<QueueKey> {
        let (s, item) = self.stage[w];
        let (key, _) = item?;
        let j = self.running.get(&w)?.job;
        (s == stage && !self.cancelled[j]).then_some(key)
    }

    fn device_workers(&self, device: usize) -> std::ops::Range<WorkerId> {
        let n = self.setup.workers_per_device;
        device * n..(device + 1) * n
    }

    fn granted(&mut self, w: WorkerId) {
        // Granted, then cancelled with its job before this event was read
        // (a real worker wakes, sees the cancellation and gives the lock back).
        if !self.core.holds_kernel(w) && self.stage[w].0 == SimStage::Idle {
            return;
        }
        let device = self.core.device_of(w);
        let Some((key, _)) = self.stage[w].1 else {
            self.violation(format!("worker {w} granted without an item"));
            return;
        };
        if self.stage[w].0 != SimStage::Waiting {
            self.violation(format!("worker {w} granted while not waiting"));
        }
        for other in self.device_workers(device) {
            if other == w {
                continue;
            }
            if self.stage[other].0 == SimStage::Kernel {
                self.violation(format!("GPU {device}: two kernel regions"));
            }
            if let Some(k) = self.live(other, SimStage::Waiting)
                && k < key
            {
                self.violation(format!("GPU {device}: lock to {key:?} before {k:?}"));
            }
            if let Some(k) = self.live(other, SimStage::Prep)
                && k.0.0 > key.0.0
            {
                self.violation(format!("GPU {device}: lock to {key:?}, {k:?} in prep"));
            }
        }
        self.stage[w].0 = SimStage::Kernel;
        self.kernel_start.insert(w, self.now);
        let (j, p) = self
            .running
            .get(&w)
            .map_or((0, 0), |p| (p.job, p.partition));
        let kernel = self.item(j, p).kernel;
        self.at(self.now + kernel, Ev::PhaseDone(w, Step::Kernel));
    }

    /// Between events nothing that could run may be left waiting.
    fn check_quiescent(&mut self) {
        for device in 0..self.setup.capacities.len() {
            let workers = self.device_workers(device);
            let has_kernel = workers.clone().any(|w| self.stage[w].0 == SimStage::Kernel);
            let best_waiting = workers
                .clone()
                .filter_map(|w| self.live(w, SimStage::Waiting))
                .min();
            let best_prep = workers
                .clone()
                .filter_map(|w| self.live(w, SimStage::Prep))
                .map(|k| k.0.0)
                .max();
            if let (false, Some(waiting)) = (has_kernel, best_waiting)
                && best_prep.is_none_or(|p| p <= waiting.0.0)
            {
                self.violation(format!("GPU {device}: lock free while {waiting:?} waits"));
            }
            let idle = workers.clone().any(|w| self.stage[w].0 == SimStage::Idle);
            let usable = self.usable(device);
            let first = self.queued.iter().find(|(_, need)| **need <= usable);
            if let (true, Some((key, need))) = (idle, first)
                && *need <= usable - self.item_bytes[device]
            {
                let text = format!("GPU {device}: a worker idles while {key:?} fits");
                self.violation(text);
            }
        }
        if let Some(permits) = &self.permits
            && permits.waiting() > 0
            && permits.in_use() < self.setup.bound.unwrap_or(0)
        {
            let text = format!("{} permits free while some wait", permits.in_use());
            self.violation(text);
        }
    }

    fn finish_report(mut self) -> Report {
        let mut left = Vec::new();
        if self.core.queue_len() > 0 {
            left.push(format!("{} items queued", self.core.queue_len()));
        }
        for device in 0..self.setup.capacities.len() {
            let reserved = self.core.ledger(device).map_or(0, |l| l.reserved());
            if reserved > 0 {
                left.push(format!("GPU {device}: {reserved} B reserved"));
            }
            if self.core.kernel_holder(device).is_some() {
                left.push(format!("GPU {device}: kernel lock held"));
            }
        }
        for w in 0..self.core.worker_count() {
            if self.core.stage(w) != crate::core::Stage::Idle {
                left.push(format!("worker {w} busy"));
            }
        }
        if let Some(permits) = &self.permits
            && (permits.in_use() > 0 || permits.waiting() > 0)
        {
            left.push(format!(
                "{} permits held, {} waiting",
                permits.in_use(),
                permits.waiting()
            ));
        }
        if self.in_flight > 0 {
            left.push(format!("{} items in flight", self.in_flight));
        }
        self.report.outcomes = (0..self.jobs.len())
            .map(|j| self.ids[j].and_then(|id| self.core.job_outcome(id)))
            .collect();
        self.report.leftovers = left;
        self.report
    }
}

fn failed(phase: Phase) -> ItemEnd {
    ItemEnd::Failed(GpuSchedError::PhaseFailed {
        job: JobId(0),
        partition: 0,
        phase,
        message: "simulated failure".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn item(bytes: u64, synth: u64, prep: u64, kernel: u64, epilogue: u64) -> SimItem {
        SimItem {
            bytes,
            synth,
            prep,
            kernel,
            epilogue,
            fail: None,
        }
    }

    fn assert_clean(report: &Report) {
        assert!(
            report.violations.is_empty(),
            "{} violations, first: {:?}",
            report.violations.len(),
            &report.violations[..report.violations.len().min(5)]
        );
        assert!(report.leftovers.is_empty(), "{:?}", report.leftovers);
        assert!(
            report.outcomes.iter().all(Option::is_some),
            "a job never ended"
        );
    }

    /// A PoRep-like stream: prep + epilogue (at most 70 ticks) shorter than
    /// a kernel region (at least 80).
    fn pipeline(workers: usize, devices: usize) -> Report {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let items = (0..60)
            .map(|_| {
                item(
                    10,
                    rng.gen_range(40..=60),
                    rng.gen_range(20..=40),
                    rng.gen_range(80..=120),
                    rng.gen_range(10..=30),
                )
            })
            .collect();
        let setup = SimSetup {
            capacities: vec![1000; devices],
            margin: 0,
            workers_per_device: workers,
            bound: Some(4 * devices),
        };
        let job = SimJob {
            arrival: 0,
            priority: Priority::Normal,
            items,
            cancel_at: None,
        };
        let report = simulate(&setup, &[job]);
        assert_clean(&report);
        assert_eq!(report.tallies[0].completed, 60);
        report
    }

    #[test]
    fn two_workers_keep_the_gpu_busy_and_one_does_not() {
        let one = pipeline(1, 1).busy(0);
        let two = pipeline(2, 1).busy(0);
        let multi = pipeline(2, 2);
        let (d0, d1) = (multi.busy(0), multi.busy(1));
        eprintln!(
            "simulated GPU busy between first and last kernel region: 1 worker {one:.3}, \
             2 workers {two:.3}; 2 GPUs x 2 workers {d0:.3} / {d1:.3}"
        );
        assert!(two >= 0.95, "2 workers: busy {two:.3}");
        assert!(one < 0.8, "1 worker: busy {one:.3}");
        assert!(d0 >= 0.95 && d1 >= 0.95, "2 GPUs: busy {d0:.3} / {d1:.3}");
        // Both GPUs took a share of the work.
        assert!(multi.kernels.iter().filter(|k| k.device == 1).count() >= 25);
    }

    #[test]
    fn critical_work_overtakes_bulk_at_partition_granularity() {
        let bulk = SimJob {
            arrival: 0,
            priority: Priority::Normal,
            items: vec![item(10, 0, 10, 100, 10); 20],
            cancel_at: None,
        };
        let urgent = SimJob {
            arrival: 350,
            priority: Priority::Critical,
            items: vec![item(10, 0, 10, 100, 10); 3],
            cancel_at: None,
        };
        let setup = SimSetup {
            capacities: vec![1000],
            margin: 0,
            workers_per_device: 2,
            bound: None,
        };
        let report = simulate(&setup, &[bulk, urgent]);
        assert_clean(&report);
        let arrival = 350;
        let last_critical = report
            .kernels
            .iter()
            .filter(|k| k.job == 1)
            .map(|k| k.start)
            .max()
            .unwrap();
        let overtaken_by: Vec<u32> = report
            .kernels
            .iter()
            .filter(|k| k.job == 0 && k.start > arrival && k.start < last_critical)
            .map(|k| k.partition)
            .collect();
        // Only bulk partitions already on a worker at the arrival may run
        // their kernel region before the critical ones.
        for partition in &overtaken_by {
            assert!(report.assigned_at[&(0, *partition)] <= arrival);
        }
        assert!(
            overtaken_by.len() < setup.workers_per_device,
            "{overtaken_by:?}"
        );
        let order: Vec<(usize, u32)> = report
            .kernels
            .iter()
            .map(|k| (k.job, k.partition))
            .collect();
        eprintln!(
            "kernel order around the critical arrival: {:?}",
            &order[..8]
        );
    }

    #[test]
    fn reactive_dispatch_starts_one_synthesis_per_completion() {
        let bound = 3;
        let job = SimJob {
            arrival: 0,
            priority: Priority::Normal,
            items: vec![item(10, 5, 10, 50, 10); 30],
            cancel_at: None,
        };
        let setup = SimSetup {
            capacities: vec![1000],
            margin: 0,
            workers_per_device: 2,
            bound: Some(bound),
        };
        let report = simulate(&setup, &[job]);
        assert_clean(&report);
        assert_eq!(report.max_in_flight, bound);
        // After the first `bound`, each synthesis starts at a completion,
        // and never more at one tick than completions at that tick.
        assert!(report.synth_starts[..bound].iter().all(|&t| t == 0));
        let mut ends: HashMap<u64, usize> = HashMap::new();
        for &t in &report.item_ends {
            *ends.entry(t).or_default() += 1;
        }
        let mut starts: HashMap<u64, usize> = HashMap::new();
        for &t in &report.synth_starts[bound..] {
            *starts.entry(t).or_default() += 1;
        }
        for (t, n) in starts {
            assert!(n <= ends.get(&t).copied().unwrap_or(0), "{n} starts at {t}");
        }
    }

    #[test]
    fn cancellation_leaves_no_permit_or_reservation_behind() {
        let setup = SimSetup {
            capacities: vec![100, 60],
            margin: 10,
            workers_per_device: 2,
            bound: Some(5),
        };
        let jobs = [
            SimJob {
                arrival: 0,
                priority: Priority::Normal,
                items: vec![item(30, 10, 10, 60, 10); 12],
                cancel_at: Some(150),
            },
            SimJob {
                arrival: 20,
                priority: Priority::High,
                items: vec![item(40, 10, 10, 60, 10); 4],
                cancel_at: None,
            },
            SimJob {
                arrival: 40,
                priority: Priority::Low,
                items: vec![item(20, 10, 10, 60, 10); 6],
                cancel_at: Some(100),
            },
        ];
        let report = simulate(&setup, &jobs);
        assert_clean(&report);
        assert_eq!(report.tallies[1].completed, 4);
        for (j, tally) in report.tallies.iter().enumerate() {
            let total = tally.completed + tally.cancelled + tally.refused + tally.failed;
            assert_eq!(total, jobs[j].items.len(), "job {j}: {tally:?}");
        }
        assert!(report.tallies[0].cancelled > 0);
        assert!(matches!(
            report.outcomes[0],
            Some(Err(GpuSchedError::JobCancelled { .. }))
        ));
    }

    fn random_workload(rng: &mut ChaCha8Rng) -> (SimSetup, Vec<SimJob>) {
        let devices = rng.gen_range(1..=3);
        let capacities: Vec<u64> = (0..devices).map(|_| rng.gen_range(100..=400)).collect();
        let margin = rng.gen_range(0..=30);
        let largest = capacities.iter().max().copied().unwrap_or(0);
        let bound = rng.gen_bool(0.7).then(|| rng.gen_range(1..=8));
        let priorities = [
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Critical,
        ];
        let jobs = (0..rng.gen_range(1..=6))
            .map(|_| {
                let items = (0..rng.gen_range(0..=10))
                    .map(|_| SimItem {
                        // Now and then more than any device holds.
                        bytes: rng.gen_range(0..=largest + largest / 8),
                        synth: rng.gen_range(0..=30),
                        prep: rng.gen_range(0..=40),
                        kernel: rng.gen_range(1..=60),
                        epilogue: rng.gen_range(0..=30),
                        fail: match rng.gen_range(0..40) {
                            0 => Some(Phase::Prep),
                            1 => Some(Phase::Kernel),
                            2 => Some(Phase::Epilogue),
                            _ => None,
                        },
                    })
                    .collect();
                SimJob {
                    arrival: rng.gen_range(0..=300),
                    priority: priorities[rng.gen_range(0..4)],
                    items,
                    cancel_at: rng.gen_bool(0.3).then(|| rng.gen_range(0..=600)),
                }
            })
            .collect();
        let setup = SimSetup {
            capacities,
            margin,
            workers_per_device: 2,
            bound,
        };
        (setup, jobs)
    }

    #[test]
    fn a_thousand_random_workloads_keep_every_invariant() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
        let (mut items, mut refused, mut cancelled, mut failed) = (0, 0, 0, 0);
        for round in 0..1000 {
            let (setup, jobs) = random_workload(&mut rng);
            let report = simulate(&setup, &jobs);
            assert!(
                report.violations.is_empty() && report.leftovers.is_empty(),
                "workload {round} {setup:?}: {:?} {:?}",
                &report.violations[..report.violations.len().min(5)],
                report.leftovers
            );
            for (d, &max) in report.max_item_bytes.iter().enumerate() {
                assert!(max <= setup.capacities[d] - setup.margin.min(setup.capacities[d]));
            }
            if let Some(bound) = setup.bound {
                assert!(report.max_in_flight <= bound);
            }
            for (j, job) in jobs.iter().enumerate() {
                let tally = report.tallies[j];
                let total = tally.completed + tally.cancelled + tally.refused + tally.failed;
                assert_eq!(
                    total,
                    job.items.len(),
                    "workload {round} job {j}: {tally:?}"
                );
                let outcome = report.outcomes[j].clone().expect("every job ends");
                match outcome {
                    Ok(summary) => {
                        assert_eq!(summary.completed, tally.completed);
                        assert_eq!(tally.completed + tally.refused, job.items.len());
                    }
                    Err(GpuSchedError::JobCancelled { .. }) => assert!(job.cancel_at.is_some()),
                    Err(GpuSchedError::PhaseFailed { .. }) => assert!(tally.failed > 0),
                    Err(other) => panic!("workload {round} job {j}: {other}"),
                }
                items += job.items.len();
                refused += tally.refused;
                cancelled += tally.cancelled;
                failed += tally.failed;
            }
        }
        eprintln!(
            "1000 workloads: {items} items, {refused} refused, {cancelled} cancelled, \
             {failed} failed"
        );
        // The workloads did exercise refusals, cancellations and failures.
        assert!(refused > 0 && cancelled > 0 && failed > 0);
    }
}
