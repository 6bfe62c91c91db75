//! The timeline: every stage of every partition, as (job, partition, worker,
//! device, stage, start, end), exported as Chrome-trace JSON (opens in
//! Perfetto) and summarized (proofs per second, busy fraction of each device
//! between its first and last kernel region, the largest idle gaps between
//! kernel regions, per-stage medians).
//!
//! Times are wall clocks on the host. For the CPU backend that is the truth;
//! a GPU backend reports its kernel sub-stages from CUDA events through
//! [`StageTimings`](cuzk_groth16_cuda::StageTimings), which the engine lays
//! out inside the kernel region's wall-clock span.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

/// Where a span ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// A host synthesis thread (`worker` is its index).
    Host,
    /// A device's worker (`worker` is its index within the device); the
    /// number is the device's ordinal.
    Device(usize),
}

/// The kernel region's stage name: what the device's busy time is made of.
pub const KERNEL_REGION: &str = "kernel_region";
/// The epilogue's stage name; one per proof made.
pub const EPILOGUE: &str = "epilogue";
/// The prep phase's stage name (uploads, and a/b/c on the device).
pub const PREP: &str = "prep";
/// The stage name of a parameter set's load for the job that needed it.
pub const PARAMS_LOAD: &str = "params_load";
/// The stage name of a partition's witness (synthesis) on the host.
pub const WITNESS: &str = "witness";
/// The stage name of the time a partition waited for a working set the
/// host memory budget had no room for (the note gives the budget then).
pub const BUDGET_WAIT: &str = "budget_wait";
/// Inside a [`WITNESS`]: the time a witness made on every core waited for
/// room before its parts started (`synthesis_ahead`; the note says so).
pub const PACED: &str = "paced";
/// The stage name of the time a job spent parked: its parameters and PCE
/// given up to a higher-priority job, until it was admitted again.
pub const PARKED: &str = "parked";
/// The stage name of a parameter set's eviction to make room (the note
/// names the set and its bytes); on the job whose admission made it.
pub const PARAMS_EVICT: &str = "params_evict";
/// [`PARAMS_EVICT`] for a PCE.
pub const PCE_EVICT: &str = "pce_evict";
/// The stage name of a job's admission leasing (page-locking) a/b/c buffers
/// ahead for its partitions that wait on the host, before its first one.
pub const ABC_AHEAD: &str = "abc_ahead";
/// The stage name of a PCE's matrices dropped from host memory while every
/// device keeps them (`release_host_pce`), on the job whose partition
/// found them there.
pub const PCE_RELEASE: &str = "pce_release";

/// One stage of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub job: u64,
    pub partition: u32,
    pub worker: usize,
    pub lane: Lane,
    pub stage: &'static str,
    /// Microseconds since the timeline's epoch.
    pub start_us: u64,
    pub end_us: u64,
    /// Depth below the phase it belongs to (0 for phases, 1 for the
    /// backend's sub-stages inside them).
    pub depth: u8,
    /// Why the stage ran as it did, where that was a choice (e.g. where
    /// a/b/c were evaluated); in the Chrome trace's args.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "note_text")]
    pub note: Option<Arc<str>>,
}

fn note_text<S: serde::Serializer>(
    note: &Option<Arc<str>>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_some(note.as_deref().unwrap_or_default())
}

impl Span {
    /// Its length in microseconds.
    pub fn duration_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }
}

/// Called with every span as it is recorded (a metrics exporter's hook).
pub type SpanObserver = Box<dyn Fn(&Span) + Send + Sync>;

/// Records spans; shared by every thread of an engine.
#[derive(Debug)]
pub struct Timeline {
    epoch: Instant,
    capacity: usize,
    spans: Mutex<VecDeque<Span>>,
    observers: Observers,
}

#[derive(Default)]
struct Observers(RwLock<Vec<SpanObserver>>);

impl fmt::Debug for Observers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.read().unwrap_or_else(PoisonError::into_inner).len();
        write!(f, "{n} observers")
    }
}

impl Timeline {
    /// An empty timeline keeping at most `capacity` spans (the oldest go).
    pub fn new(capacity: usize) -> Self {
        Timeline {
            epoch: Instant::now(),
            capacity: capacity.max(1),
            spans: Mutex::new(VecDeque::new()),
            observers: Observers::default(),
        }
    }

    /// Calls `observer` with every span recorded from now on, on the
    /// recording thread (so it must be quick and must not record spans).
    pub fn add_observer(&self, observer: SpanObserver) {
        self.observers
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(observer);
    }

    fn spans(&self) -> MutexGuard<'_, VecDeque<Span>> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Microseconds since the epoch of `at`.
    pub fn micros(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// Time since the epoch.
    pub fn elapsed(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Records a span.
    pub fn record(&self, span: Span) {
        {
            let observers = self
                .observers
                .0
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            for observe in observers.iter() {
                observe(&span);
            }
        }
        let mut spans = self.spans();
        if spans.len() == self.capacity {
            spans.pop_front();
        }
        spans.push_back(span);
    }

    /// Records `stage` from `start` to now.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_since(
        &self,
        job: u64,
        partition: u32,
        lane: Lane,
        worker: usize,
        stage: &'static str,
        start: Instant,
    ) -> Instant {
        self.record_noted(job, partition, lane, worker, stage, start, None)
    }

    /// [`record_since`](Timeline::record_since) with a note on the span.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_noted(
        &self,
        job: u64,
        partition: u32,
        lane: Lane,
        worker: usize,
        stage: &'static str,
        start: Instant,
        note: Option<Arc<str>>,
    ) -> Instant {
        let end = Instant::now();
        self.record_between(job, partition, lane, worker, stage, start, end, note);
        end
    }

    /// [`record_noted`](Timeline::record_noted) of a span that ended at
    /// `end`, before it is recorded.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_between(
        &self,
        job: u64,
        partition: u32,
        lane: Lane,
        worker: usize,
        stage: &'static str,
        start: Instant,
        end: Instant,
        note: Option<Arc<str>>,
    ) {
        self.record(Span {
            job,
            partition,
            worker,
            lane,
            stage,
            start_us: self.micros(start),
            end_us: self.micros(end),
            depth: 0,
            note,
        });
    }

    /// Lays a backend's sub-stage timings end to end from `start`, one level
    /// below the phase that ran them.
    pub(crate) fn record_substages(
        &self,
        template: (u64, u32, Lane, usize),
        start: Instant,
        stages: &[(&'static str, Duration)],
    ) {
        let (job, partition, lane, worker) = template;
        let mut at = self.micros(start);
        for (stage, d) in stages {
            let end = at + d.as_micros() as u64;
            self.record(Span {
                job,
                partition,
                worker,
                lane,
                stage,
                start_us: at,
                end_us: end,
                depth: 1,
                note: None,
            });
            at = end;
        }
    }

    /// Totals of work that overlapped a phase's stages (the backend's
    /// [`StageTimings::overlapped`](cuzk_groth16_cuda::StageTimings)), one
    /// span each from the phase's `start`, a level below the stages, with
    /// the backend's note.
    pub(crate) fn record_overlapped(
        &self,
        template: (u64, u32, Lane, usize),
        start: Instant,
        totals: &[(&'static str, Duration, String)],
    ) {
        let (job, partition, lane, worker) = template;
        let at = self.micros(start);
        for (stage, d, note) in totals {
            self.record(Span {
                job,
                partition,
                worker,
                lane,
                stage,
                start_us: at,
                end_us: at + d.as_micros() as u64,
                depth: 2,
                note: Some(Arc::from(note.as_str())),
            });
        }
    }

    /// A copy of the spans kept now.
    pub fn snapshot(&self) -> TimelineData {
        TimelineData {
            spans: self.spans().iter().cloned().collect(),
        }
    }

    /// Forgets every span (e.g. after a warm-up).
    pub fn clear(&self) {
        self.spans().clear();
    }
}

/// A set of spans, to export or summarize.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TimelineData {
    pub spans: Vec<Span>,
}

/// Chrome-trace process id of a lane: 0 for the host's synthesis threads,
/// 1 + ordinal for a device.
fn pid(lane: Lane) -> usize {
    match lane {
        Lane::Host => 0,
        Lane::Device(ordinal) => 1 + ordinal,
    }
}

impl TimelineData {
    /// Chrome-trace JSON (the "JSON Object Format": `traceEvents` of
    /// complete events, `ph: "X"`, times in µs), which Perfetto and
    /// chrome://tracing open. Processes are the host's synthesis threads
    /// (pid 0) and each device (pid 1 + ordinal); threads are workers.
    pub fn chrome_trace(&self) -> serde_json::Value {
        let mut events = Vec::with_capacity(self.spans.len() + 8);
        let mut lanes: BTreeMap<Lane, Vec<usize>> = BTreeMap::new();
        for s in &self.spans {
            let workers = lanes.entry(s.lane).or_default();
            if !workers.contains(&s.worker) {
                workers.push(s.worker);
            }
        }
        for (lane, workers) in &lanes {
            let name = match lane {
                Lane::Host => "host synthesis".to_owned(),
                Lane::Device(o) => format!("device {o}"),
            };
            events.push(
                json!({"name": "process_name", "ph": "M", "pid": pid(*lane), "tid": 0,
                "args": {"name": name}}),
            );
            for w in workers {
                let thread = match lane {
                    Lane::Host => format!("synthesis {w}"),
                    Lane::Device(_) => format!("worker {w}"),
                };
                events.push(
                    json!({"name": "thread_name", "ph": "M", "pid": pid(*lane), "tid": w,
                    "args": {"name": thread}}),
                );
            }
        }
        for s in &self.spans {
            let mut args = json!({"job": s.job, "partition": s.partition});
            if let Some(note) = &s.note {
                args["note"] = json!(note.as_ref());
            }
            events.push(json!({
                "name": s.stage,
                "cat": if s.depth == 0 { "phase" } else { "stage" },
                "ph": "X",
                "ts": s.start_us,
                "dur": s.duration_us(),
                "pid": pid(s.lane),
                "tid": s.worker,
                "args": args,
            }));
        }
        json!({"traceEvents": events, "displayTimeUnit": "ms"})
    }

    /// The summary of these spans.
    pub fn summary(&self) -> TimelineSummary {
        summarize(&self.spans)
    }
}

/// An idle gap between two kernel regions of one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gap {
    /// When it started, in seconds since the timeline's epoch.
    pub at_s: f64,
    pub ms: f64,
}

/// One device's kernel regions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSummary {
    /// Ordinal (or the pseudo-device's number for the CPU backend).
    pub device: usize,
    pub kernel_regions: usize,
    /// From the first kernel region's start to the last one's end.
    pub window_s: f64,
    /// Time inside some kernel region in that window.
    pub busy_s: f64,
    /// `busy_s / window_s`.
    pub busy_fraction: f64,
    /// The largest idle gaps between kernel regions, largest first (at most 5).
    pub largest_gaps: Vec<Gap>,
    /// Time the device's workers spent in prep (uploads, a/b/c on the
    /// device), and how much of it was inside a kernel region (the other
    /// worker's: one worker does one thing at a time).
    pub prep_s: f64,
    pub prep_under_kernel_s: f64,
}

/// Median and total of one stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSummary {
    pub stage: &'static str,
    pub count: usize,
    pub median_ms: f64,
    pub total_ms: f64,
}

/// What a run's timeline says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineSummary {
    /// Proofs made (epilogues that finished).
    pub proofs: usize,
    /// From the first span's start to the last span's end.
    pub window_s: f64,
    pub proofs_per_second: f64,
    pub seconds_per_proof: f64,
    pub devices: Vec<DeviceSummary>,
    /// In order of first appearance.
    pub stages: Vec<StageSummary>,
}

fn median(v: &mut [u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

fn summarize(spans: &[Span]) -> TimelineSummary {
    let start = spans.iter().map(|s| s.start_us).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.end_us).max().unwrap_or(0);
    let window_s = end.saturating_sub(start) as f64 / 1e6;
    let proofs = spans.iter().filter(|s| s.stage == EPILOGUE).count();
    let rate = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };

    let mut kernels: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    let mut preps: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.depth == 0) {
        if let Lane::Device(d) = s.lane {
            match s.stage {
                KERNEL_REGION => kernels.entry(d).or_default().push((s.start_us, s.end_us)),
                PREP => preps.entry(d).or_default().push((s.start_us, s.end_us)),
                _ => {}
            }
        }
    }
    let devices = kernels
        .into_iter()
        .map(|(device, mut regions)| {
            regions.sort_unstable();
            let count = regions.len();
            let first = regions.first().map_or(0, |r| r.0);
            let mut busy = 0u64;
            let mut gaps = Vec::new();
            // Merge overlaps (there are none with one kernel lock, but a
            // timeline may mix runs), measuring busy time and gaps.
            let mut current: Option<(u64, u64)> = None;
            let mut merged = Vec::new();
            for (s, e) in regions {
                match current {
                    Some((cs, ce)) if s <= ce => current = Some((cs, ce.max(e))),
                    Some((cs, ce)) => {
                        busy += ce - cs;
                        gaps.push((ce, s - ce));
                        merged.push((cs, ce));
                        current = Some((s, e));
                    }
                    None => current = Some((s, e)),
                }
            }
            let last = current.map_or(first, |(cs, ce)| {
                busy += ce - cs;
                merged.push((cs, ce));
                ce
            });
            let device_preps = preps.remove(&device).unwrap_or_default();
            let prep: u64 = device_preps.iter().map(|(s, e)| e.saturating_sub(*s)).sum();
            let under: u64 = device_preps
                .iter()
                .flat_map(|&(ps, pe)| {
                    merged
                        .iter()
                        .map(move |&(ks, ke)| pe.min(ke).saturating_sub(ps.max(ks)))
                })
                .sum();
            gaps.sort_by_key(|g| std::cmp::Reverse(g.1));
            let window = last.saturating_sub(first) as f64 / 1e6;
            DeviceSummary {
                device,
                kernel_regions: count,
                window_s: window,
                busy_s: busy as f64 / 1e6,
                busy_fraction: if window > 0.0 {
                    busy as f64 / 1e6 / window
                } else {
                    1.0
                },
                largest_gaps: gaps
                    .iter()
                    .take(5)
                    .map(|&(at, d)| Gap {
                        at_s: at as f64 / 1e6,
                        ms: d as f64 / 1e3,
                    })
                    .collect(),
                prep_s: prep as f64 / 1e6,
                prep_under_kernel_s: under as f64 / 1e6,
            }
        })
        .collect();

    let mut order: Vec<&'static str> = Vec::new();
    let mut by_stage: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    for s in spans {
        let entry = by_stage.entry(s.stage).or_default();
        if entry.is_empty() {
            order.push(s.stage);
        }
        entry.push(s.duration_us());
    }
    let stages = order
        .into_iter()
        .map(|stage| {
            let mut v = by_stage.remove(stage).unwrap_or_default();
            let total: u64 = v.iter().sum();
            StageSummary {
                stage,
                count: v.len(),
                median_ms: median(&mut v) / 1e3,
                total_ms: total as f64 / 1e3,
            }
        })
        .collect();
    TimelineSummary {
        proofs,
        window_s,
        proofs_per_second: rate(proofs as f64, window_s),
        seconds_per_proof: rate(window_s, proofs as f64),
        devices,
        stages,
    }
}

impl fmt::Display for TimelineSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} proofs in {:.3} s: {:.3} proofs/s, {:.3} s per proof",
            self.proofs, self.window_s, self.proofs_per_second, self.seconds_per_proof
        )?;
        for d in &self.devices {
            writeln!(
                f,
                "device {}: {} kernel regions, busy {:.1}% of {:.3} s between the first and the last",
                d.device,
                d.kernel_regions,
                d.busy_fraction * 100.0,
                d.window_s
            )?;
            if d.prep_s > 0.0 {
                writeln!(
                    f,
                    "  prep {:.3} s, {:.1}% of it inside the other worker's kernel regions",
                    d.prep_s,
                    d.prep_under_kernel_s / d.prep_s * 100.0
                )?;
            }
            for g in &d.largest_gaps {
                writeln!(f, "  idle gap {:>10.3} ms at {:.3} s", g.ms, g.at_s)?;
            }
        }
        writeln!(f, "stage medians:")?;
        for s in &self.stages {
            writeln!(
                f,
                "  {:<16} {:>6} x {:>10.3} ms (total {:.3} ms)",
                s.stage, s.count, s.median_ms, s.total_ms
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(partition: u32, worker: usize, stage: &'static str, start: u64, end: u64) -> Span {
        Span {
            job: 1,
            partition,
            worker,
            lane: Lane::Device(0),
            stage,
            start_us: start,
            end_us: end,
            depth: 0,
            note: None,
        }
    }

    #[test]
    fn summary_measures_busy_time_gaps_and_medians() {
        let data = TimelineData {
            spans: vec![
                span(0, 0, PREP, 0, 100),
                // The next partition's prep, half inside the first region,
                // half inside the gap.
                span(1, 1, PREP, 600, 1100),
                span(2, 0, PREP, 2350, 2850),
                span(0, 0, KERNEL_REGION, 100, 1100),
                span(1, 1, KERNEL_REGION, 1100, 2100),
                span(0, 0, EPILOGUE, 1100, 1200),
                span(2, 0, KERNEL_REGION, 2600, 3600),
                span(1, 1, EPILOGUE, 2100, 2150),
                span(2, 0, EPILOGUE, 3600, 4100),
            ],
        };
        let s = data.summary();
        assert_eq!(s.proofs, 3);
        assert!((s.window_s - 0.0041).abs() < 1e-9);
        let d = &s.devices[0];
        assert_eq!(d.kernel_regions, 3);
        assert!((d.busy_fraction - 3000.0 / 3500.0).abs() < 1e-9);
        assert_eq!(d.largest_gaps.len(), 1);
        assert!((d.largest_gaps[0].ms - 0.5).abs() < 1e-9);
        let epi = s.stages.iter().find(|x| x.stage == EPILOGUE).unwrap();
        assert_eq!((epi.count, epi.median_ms), (3, 0.1));
        assert_eq!(s.stages[0].stage, "prep");
        assert!(s.to_string().contains("busy 85.7%"), "{s}");
        // 100 + 500 + 500 us of prep; 500 + 250 of it inside regions.
        assert!((d.prep_s - 0.0011).abs() < 1e-9, "{}", d.prep_s);
        assert!((d.prep_under_kernel_s - 0.00075).abs() < 1e-9);
        assert!(s.to_string().contains("prep 0.001 s, 68.2%"), "{s}");
    }

    #[test]
    fn overlapped_totals_sit_below_the_stages_with_their_note() {
        let t = Timeline::new(10);
        let start = Instant::now();
        t.record_substages(
            (1, 0, Lane::Device(0), 0),
            start,
            &[
                ("msm h", Duration::from_millis(4)),
                ("msm l", Duration::from_millis(2)),
            ],
        );
        t.record_overlapped(
            (1, 0, Lane::Device(0), 0),
            start,
            &[("streamed h2d", Duration::from_millis(3), "3 GB/s".into())],
        );
        let spans = t.snapshot().spans;
        let h2d = spans.iter().find(|s| s.stage == "streamed h2d").unwrap();
        let h = spans.iter().find(|s| s.stage == "msm h").unwrap();
        let l = spans.iter().find(|s| s.stage == "msm l").unwrap();
        // From the phase's start, over the stages, which keep their places.
        assert_eq!((h2d.start_us, h2d.depth), (h.start_us, 2));
        assert_eq!(h2d.end_us - h2d.start_us, 3000);
        assert_eq!(l.start_us, h.end_us);
        assert_eq!(h2d.note.as_deref(), Some("3 GB/s"));
    }

    #[test]
    fn chrome_trace_has_complete_events_and_names() {
        let t = Timeline::new(10);
        let start = Instant::now();
        t.record_since(3, 1, Lane::Host, 0, "witness", start);
        t.record_substages(
            (3, 1, Lane::Device(0), 1),
            start,
            &[("msm h", Duration::from_micros(5))],
        );
        let trace = t.snapshot().chrome_trace();
        let events = trace["traceEvents"].as_array().unwrap();
        let x: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 2);
        assert_eq!(x[0]["name"], "witness");
        assert_eq!(x[0]["pid"], 0);
        assert_eq!(x[1]["pid"], 1);
        assert_eq!(x[1]["tid"], 1);
        assert_eq!(x[1]["dur"], 5);
        assert_eq!(x[1]["args"]["job"], 3);
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "M" && e["args"]["name"] == "device 0")
        );
    }

    #[test]
    fn capacity_drops_the_oldest() {
        let t = Timeline::new(2);
        for p in 0..3 {
            t.record(span(p, 0, "x", 0, 1));
        }
        let spans = t.snapshot().spans;
        assert_eq!(
            spans.iter().map(|s| s.partition).collect::<Vec<_>>(),
            [1, 2]
        );
        t.clear();
        assert!(t.snapshot().spans.is_empty());
    }
}
