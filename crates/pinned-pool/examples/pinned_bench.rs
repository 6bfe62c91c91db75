//! Host<->device copy bandwidth from pinned pool buffers, pageable memory and
//! registered memory (64 MiB, 1 GiB, 4 GiB), and the cost of a fresh 1 GiB
//! pinned allocation against a reuse from the pool; writes bench-data JSON.
//!
//! ```text
//! pinned_bench --revision <short rev> --command "<exact command>" --out <file.json> [--runs 7]
//! ```
//!
//! Copies are timed with CUDA events on one non-blocking stream (one warm-up,
//! then the median of `--runs`); allocation, reuse and registration with the
//! wall clock (they are synchronous host calls). Pageable memory is the
//! baseline for copies, measured in the same run; a fresh allocation is the
//! baseline for a reuse.

// The benchmark examples' shared arguments, by path.
#[path = "../../groth16-cuda/examples/common/args.rs"]
mod args;
use args::List;

use std::{
    ffi::c_void,
    fmt::Write as _,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use clap::Parser;
use cudarc::driver::{
    CudaContext, result,
    sys::{self, CUevent, CUstream},
};
use cuzk_pinned_pool::{CpuAccess, Pool, PoolConfig, Request};
use serde_json::{Value, json};

const GIB: usize = 1 << 30;

/// Host<->device copy bandwidth from pinned pool buffers, pageable and
/// registered memory, and a fresh pinned allocation against a reuse from
/// the pool; writes bench-data JSON.
#[derive(Debug, Parser)]
#[command(name = "pinned_bench", args_override_self = true)]
struct Args {
    /// Short git revision, written to the JSON's "revision".
    #[arg(long, value_name = "R")]
    revision: String,
    /// The exact command that ran this, written to the JSON's "command".
    #[arg(long, value_name = "C")]
    command: String,
    /// Where the bench-data JSON is written.
    #[arg(long, value_name = "FILE")]
    out: String,
    /// Timed runs of each measurement (after one warm-up), at least 5.
    #[arg(long, value_name = "N", default_value_t = 7)]
    runs: usize,
    /// Copy sizes, log2 bytes, comma-separated.
    #[arg(long, value_name = "LOG2,..", default_value = "26,30,32")]
    log2_sizes: List<u32>,
}

fn parse_args() -> Result<Args> {
    let args = Args::parse();
    if args.revision.is_empty() || args.command.is_empty() || args.out.is_empty() {
        bail!("--revision, --command and --out are required");
    }
    if args.runs < 5 {
        bail!("--runs must be at least 5");
    }
    Ok(args)
}

/// Median, min and max of some timings in seconds.
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    runs: usize,
}

fn stats(mut samples: Vec<f64>) -> Stats {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    };
    Stats {
        median,
        min: samples[0],
        max: samples[n - 1],
        runs: n,
    }
}

/// A stream and a pair of events for timing work on it.
struct Timer {
    stream: CUstream,
    start: CUevent,
    end: CUevent,
}

impl Timer {
    fn new() -> Result<Self> {
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
        let start = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        let end = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        Ok(Timer { stream, start, end })
    }

    /// One warm-up, then `runs` timings of `work` (which enqueues on the
    /// stream) between two events, in seconds.
    fn time(&self, runs: usize, mut work: impl FnMut(CUstream) -> Result<()>) -> Result<Stats> {
        let mut samples = Vec::with_capacity(runs);
        for run in 0..=runs {
            // SAFETY: the events and the stream were created in this context
            // and live until `self` drops; `work` enqueues valid copies.
            unsafe {
                result::event::record(self.start, self.stream)?;
                work(self.stream)?;
                result::event::record(self.end, self.stream)?;
                result::event::synchronize(self.end)?;
                let ms = result::event::elapsed(self.start, self.end)?;
                if run > 0 {
                    samples.push(f64::from(ms) / 1e3);
                }
            }
        }
        Ok(stats(samples))
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once here, nothing pending.
        unsafe {
            let _ = result::event::destroy(self.start);
            let _ = result::event::destroy(self.end);
            let _ = result::stream::destroy(self.stream);
        }
    }
}

fn wall(runs: usize, mut work: impl FnMut() -> Result<f64>) -> Result<Stats> {
    let mut samples = Vec::with_capacity(runs);
    for run in 0..=runs {
        let seconds = work()?;
        if run > 0 {
            samples.push(seconds);
        }
    }
    Ok(stats(samples))
}

fn entry(
    name: &str,
    s: &Stats,
    bytes: Option<usize>,
    baseline: Option<(&str, f64)>,
    notes: &str,
    link_rate: Option<f64>,
) -> Value {
    let mut v = json!({
        "name": name,
        "unit": "s",
        "median": s.median,
        "min": s.min,
        "max": s.max,
        "runs": s.runs,
    });
    if let Some(bytes) = bytes {
        v["derived"] = json!({ "gb_per_s": bytes as f64 / 1e9 / s.median });
        if let Some(rate) = link_rate {
            // The least time the link allows for these bytes.
            v["bound"] = json!({ "name": "pcie-link", "value": bytes as f64 / rate });
        }
    }
    if let Some((base, median)) = baseline {
        v["baseline"] = json!({ "name": base, "median": median });
        v["ratio_vs_baseline"] = json!(median / s.median);
    }
    if !notes.is_empty() {
        v["notes"] = json!(notes);
    }
    v
}

/// What nvidia-smi says about the driver and the host link.
struct SmiInfo {
    driver: String,
    /// PCIe generation and lane count now.
    link: Option<(u32, u32)>,
}

/// The kernel module's version and the PCIe link, from nvidia-smi; the
/// version falls back to /proc (whose wording varies between drivers, so
/// the first dotted number in it is taken).
fn smi_info() -> SmiInfo {
    let smi = std::process::Command::new("nvidia-smi")
        .args([
            "--id=0",
            "--query-gpu=driver_version,pcie.link.gen.current,pcie.link.width.current",
            "--format=csv,noheader,nounits",
        ])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned());
    let fields: Vec<String> = smi
        .as_deref()
        .and_then(|text| text.lines().next())
        .map(|line| line.split(',').map(|f| f.trim().to_owned()).collect())
        .unwrap_or_default();
    let is_version = |t: &str| t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.');
    let driver = match fields.first() {
        Some(v) if is_version(v) => v.clone(),
        _ => std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|text| {
                text.split_whitespace()
                    .find(|t| is_version(t))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "unknown".to_owned()),
    };
    let link = match (fields.get(1), fields.get(2)) {
        (Some(g), Some(w)) => g.parse().ok().zip(w.parse().ok()),
        _ => None,
    };
    SmiInfo { driver, link }
}

/// Bytes per second one direction of a PCIe link carries at most (gen 3 to
/// 5 use 128b/130b encoding), or `None` for generations this does not know.
fn link_bytes_per_s((gen_, lanes): (u32, u32)) -> Option<f64> {
    let gt_per_s = match gen_ {
        3 => 8.0,
        4 => 16.0,
        5 => 32.0,
        _ => return None,
    };
    Some(gt_per_s * 1e9 * 128.0 / 130.0 / 8.0 * f64::from(lanes))
}

/// `YYYY-MM-DD` (UTC) of now.
fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Enqueues a copy of `src` to the start of `device`.
fn h2d(device: sys::CUdeviceptr, src: &[u8]) -> impl FnMut(CUstream) -> Result<()> + '_ {
    move |stream| {
        // SAFETY: `device` holds at least `src.len()` bytes; `src` outlives
        // the timing, which synchronizes before returning.
        unsafe { result::memcpy_htod_async(device, src, stream) }?;
        Ok(())
    }
}

fn fill(bytes: &mut [u8]) {
    // SAFETY: u64 has no invalid bit patterns; align_to_mut only returns the
    // aligned middle part.
    let (_, mid, _) = unsafe { bytes.align_to_mut::<u64>() };
    for (i, w) in mid.iter_mut().enumerate() {
        *w = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let runs = args.runs;
    // The pool checks for the driver library first (cudarc panics without it).
    let pool = Pool::pinned(0, PoolConfig::unbounded())?;
    let ctx = CudaContext::new(0).context("CUDA device 0")?;
    let gpu = result::device::get_name(ctx.cu_device())?;
    let mut cuda_version = 0;
    // SAFETY: a valid out pointer; the driver is initialised.
    unsafe { sys::cuDriverGetVersion(&mut cuda_version) }.result()?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let smi = smi_info();
    let link_rate = smi.link.and_then(link_bytes_per_s);
    println!(
        "{gpu}, driver {}, CUDA {cuda_version}, {cpus} CPUs, PCIe {:?}",
        smi.driver, smi.link
    );

    let max = 1usize << args.log2_sizes.iter().copied().max().unwrap_or(30);
    let timer = Timer::new()?;
    // SAFETY: a plain device allocation in the current (primary) context,
    // freed at the end of main.
    let device = unsafe { result::malloc_sync(max) }?;

    let mut pinned = pool.lease(Request::bytes(max))?;
    let mut pinned_wc = pool.lease(Request::bytes(max).access(CpuAccess::WriteOnly))?;
    fill(&mut pinned);
    fill(&mut pinned_wc);
    let mut pageable = vec![0u8; max];
    fill(&mut pageable);

    let mut results = Vec::new();
    let mut table = String::new();
    let mut report = |v: Value, table: &mut String| {
        let name = v["name"].as_str().unwrap_or("?").to_owned();
        let median = v["median"].as_f64().unwrap_or(f64::NAN);
        let gbs = v["derived"]["gb_per_s"].as_f64();
        let ratio = v["ratio_vs_baseline"].as_f64();
        let _ = writeln!(
            table,
            "{name:<38} {:>12} {:>11} {:>10}",
            if median < 1e-3 {
                format!("{:.3} us", median * 1e6)
            } else {
                format!("{:.3} ms", median * 1e3)
            },
            gbs.map_or(String::new(), |g| format!("{g:.1} GB/s")),
            ratio.map_or(String::new(), |r| format!("x{r:.2}")),
        );
        results.push(v);
    };

    // Copies. Pageable first (the baseline), then the pool's buffers, then the
    // same pageable memory registered.
    let mut baselines = std::collections::HashMap::new();
    for &log2 in &args.log2_sizes {
        let n = 1usize << log2;
        let base_h2d = timer.time(runs, h2d(device, &pageable[..n]))?;
        let name = format!("pinned/h2d/2^{log2}/pageable");
        report(
            entry(
                &name,
                &base_h2d,
                Some(n),
                None,
                "baseline: Vec<u8>, pages touched",
                link_rate,
            ),
            &mut table,
        );
        baselines.insert(("h2d", log2), (name, base_h2d.median));

        let d2h_base = {
            let dst = &mut pageable[..n];
            timer.time(runs, |stream| {
                // SAFETY: as above, for the opposite direction.
                unsafe { result::memcpy_dtoh_async(&mut *dst, device, stream) }?;
                Ok(())
            })?
        };
        let name = format!("pinned/d2h/2^{log2}/pageable");
        report(
            entry(
                &name,
                &d2h_base,
                Some(n),
                None,
                "baseline: Vec<u8>, pages touched",
                link_rate,
            ),
            &mut table,
        );
        baselines.insert(("d2h", log2), (name, d2h_base.median));

        let (bname, bmed) = &baselines[&("h2d", log2)];
        let s = timer.time(runs, h2d(device, &pinned[..n]))?;
        report(
            entry(
                &format!("pinned/h2d/2^{log2}/pool"),
                &s,
                Some(n),
                Some((bname, *bmed)),
                "pool lease, cached (not write-combined)",
                link_rate,
            ),
            &mut table,
        );
        let s = timer.time(runs, h2d(device, &pinned_wc[..n]))?;
        report(
            entry(
                &format!("pinned/h2d/2^{log2}/pool-wc"),
                &s,
                Some(n),
                Some((bname, *bmed)),
                "pool lease, CpuAccess::WriteOnly (write-combined)",
                link_rate,
            ),
            &mut table,
        );

        let (bname, bmed) = baselines[&("d2h", log2)].clone();
        let s = {
            let dst = &mut pinned[..n];
            timer.time(runs, |stream| {
                // SAFETY: as above.
                unsafe { result::memcpy_dtoh_async(&mut *dst, device, stream) }?;
                Ok(())
            })?
        };
        report(
            entry(
                &format!("pinned/d2h/2^{log2}/pool"),
                &s,
                Some(n),
                Some((bname.as_str(), bmed)),
                "pool lease, cached (not write-combined)",
                link_rate,
            ),
            &mut table,
        );

        // Registered: the pageable buffer, page-locked for the measurement.
        let mut registered = pool.register(&mut pageable[..n])?;
        anyhow::ensure!(registered.is_pinned(), "registration did not pin");
        let s = timer.time(runs, h2d(device, &registered))?;
        let (hname, hmed) = &baselines[&("h2d", log2)];
        report(
            entry(
                &format!("pinned/h2d/2^{log2}/registered"),
                &s,
                Some(n),
                Some((hname, *hmed)),
                "the pageable Vec, cuMemHostRegister(PORTABLE)",
                link_rate,
            ),
            &mut table,
        );
        let s = {
            let dst = &mut registered[..];
            timer.time(runs, |stream| {
                // SAFETY: as above.
                unsafe { result::memcpy_dtoh_async(&mut *dst, device, stream) }?;
                Ok(())
            })?
        };
        report(
            entry(
                &format!("pinned/d2h/2^{log2}/registered"),
                &s,
                Some(n),
                Some((bname.as_str(), bmed)),
                "the pageable Vec, cuMemHostRegister(PORTABLE)",
                link_rate,
            ),
            &mut table,
        );
        drop(registered);
    }
    drop((pinned, pinned_wc));
    pool.trim();

    // Allocation: a fresh 1 GiB lease (cuMemHostAlloc plus the zero-fill that
    // makes the bytes initialised), the driver call alone, a reuse, and a
    // registration of 1 GiB of touched pageable memory.
    let fresh = wall(runs, || {
        pool.trim();
        let t = Instant::now();
        let lease = pool.lease(Request::bytes(GIB))?;
        let s = t.elapsed().as_secs_f64();
        drop(lease);
        Ok(s)
    })?;
    let fresh_name = "pinned/alloc/2^30/fresh-lease";
    report(
        entry(
            fresh_name,
            &fresh,
            None,
            None,
            "empty pool: cuMemHostAlloc(PORTABLE) + zero-fill, wall clock",
            link_rate,
        ),
        &mut table,
    );
    let raw = wall(runs, || {
        let t = Instant::now();
        // SAFETY: a plain allocation, freed right after; never read.
        let ptr = unsafe { result::malloc_host(GIB, sys::CU_MEMHOSTALLOC_PORTABLE) }?;
        let s = t.elapsed().as_secs_f64();
        // SAFETY: allocated just above, unused.
        unsafe { result::free_host(ptr) }?;
        Ok(s)
    })?;
    report(
        entry(
            "pinned/alloc/2^30/cuMemHostAlloc",
            &raw,
            None,
            None,
            "the driver call alone (PORTABLE), wall clock",
            link_rate,
        ),
        &mut table,
    );
    let _warm = pool.lease(Request::bytes(GIB))?;
    drop(_warm);
    let reuse = wall(runs.max(51), || {
        let t = Instant::now();
        let lease = pool.lease(Request::bytes(GIB))?;
        let s = t.elapsed().as_secs_f64();
        drop(lease);
        Ok(s)
    })?;
    report(
        entry(
            "pinned/alloc/2^30/reuse",
            &reuse,
            None,
            Some((fresh_name, fresh.median)),
            "idle 1 GiB buffer in the pool, wall clock",
            link_rate,
        ),
        &mut table,
    );
    let stats = pool.stats();
    let region = &mut pageable[..GIB];
    let register = wall(runs, || {
        let ptr = region.as_mut_ptr().cast::<c_void>();
        let t = Instant::now();
        // SAFETY: `region` is 1 GiB of live memory borrowed for this closure;
        // it is unregistered right after.
        unsafe { sys::cuMemHostRegister_v2(ptr, GIB, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            .result()?;
        let s = t.elapsed().as_secs_f64();
        // SAFETY: registered just above.
        unsafe { sys::cuMemHostUnregister(ptr) }.result()?;
        Ok(s)
    })?;
    report(
        entry(
            "pinned/register/2^30/pageable",
            &register,
            None,
            None,
            "cuMemHostRegister(PORTABLE) of touched pageable memory, wall clock",
            link_rate,
        ),
        &mut table,
    );

    // SAFETY: allocated above; no copy is pending (every timing synchronized).
    unsafe { result::free_sync(device) }?;
    drop(timer);
    drop(ctx);

    let doc = json!({
        "revision": args.revision,
        "date": today(),
        "machine": {
            "gpu": gpu,
            "driver": smi.driver,
            "pcie": smi.link.map(|(g, w)| format!("gen{g} x{w}")),
            "cuda_driver_api": cuda_version,
            "cpus": cpus,
        },
        "command": args.command,
        "results": results,
        "notes": format!(
            "copies: CUDA events around cuMemcpy{{HtoD,DtoH}}Async on one non-blocking stream, 1 warm-up + {runs} runs, GB = 1e9 bytes; bound = the bytes over one direction of the PCIe link's signalling rate (128b/130b), from nvidia-smi's current generation and width; alloc/reuse/register: wall clock. Pool stats after the reuse runs: {stats:?}"
        ),
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", args.out))?;
    println!("{table}wrote {}", args.out);
    Ok(())
}
