//! A discrete-event simulation of the scheduler: the same [`Core`] and
//! [`PermitCore`] decisions the threaded scheduler makes, driven by a
//! simulated clock (ticks), with the engine's side modelled as "take a
//! dispatch permit, synthesize, submit". After every event, oracles written
//! apart from [`Core`] re-check the invariants: memory never over capacity,
//! queue and lock order, no idle worker or free lock while work could use
//! them, never more than the bound in flight.
//!
//! Its parts: `engine` (jobs arrive, take dispatch permits, synthesize,
//! submit, are cancelled), `workers` (the workers' side: items assigned,
//! phases timed, the kernel lock granted, items ended), `oracles` (the
//! invariants re-checked between events), `report` (what a run measured
//! and left behind) and `scenarios` (the tests: workloads and what they
//! must show). This file holds the workload description, the simulation's
//! state and its event loop.

mod engine;
mod oracles;
mod report;
#[cfg(test)]
mod scenarios;
mod workers;

pub(crate) use report::{KernelSpan, Report, Tally};

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use crate::core::{Core, WorkerId};
use crate::permits::PermitCore;
use crate::{JobId, Phase, Priority};

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
}
