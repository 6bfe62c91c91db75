//! The engine's configuration: TOML with documented defaults that work
//! (`docs/engine.example.toml`), overridable key by key (`key=value`, as a
//! command line passes them).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use cuzk_groth16_cuda::gpu::ResidentQueries;

use crate::error::{EngineError, Result};

/// Which prover backend runs the kernel regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The GPU backend where it is available, else the CPU one.
    #[default]
    Auto,
    /// The CPU backend (bellperson's building blocks) on one pseudo-device.
    Cpu,
    /// The CUDA backend on every visible GPU.
    Gpu,
}

/// Where the GPU backend keeps a parameter set's points: `"auto"`,
/// `"resident"`, `"streamed"`, or the queries to keep resident as a
/// comma-separated list of `h`, `l`, `a`, `b_g1`, `b_g2` (`"a,l,h"`; `"all"`,
/// `"none"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuParams {
    /// Resident in device memory when the set fits beside two partitions'
    /// working memory; else the queries that fit there resident (A, L, H,
    /// B_G2, B_G1 in that order, each if it fits), the others streamed.
    #[default]
    Auto,
    /// Always resident (a set that does not fit fails with a clear error).
    Resident,
    /// Always streamed from host memory in chunks, in every MSM.
    Streamed,
    /// These queries always resident (a set whose named queries do not fit
    /// fails with a clear error), the others streamed.
    Queries(ResidentQueries),
}

impl FromStr for GpuParams {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "auto" => Ok(GpuParams::Auto),
            "resident" => Ok(GpuParams::Resident),
            "streamed" => Ok(GpuParams::Streamed),
            list => list
                .parse()
                .map(GpuParams::Queries)
                .map_err(|e| format!("{e}; or one of auto, resident, streamed")),
        }
    }
}

impl fmt::Display for GpuParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuParams::Auto => f.write_str("auto"),
            GpuParams::Resident => f.write_str("resident"),
            GpuParams::Streamed => f.write_str("streamed"),
            GpuParams::Queries(q) => write!(f, "{q}"),
        }
    }
}

impl Serialize for GpuParams {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GpuParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where the GPU backend keeps a partition between its preparation and its
/// kernel region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuStaging {
    /// In device memory when two partitions fit there beside the prover's
    /// kernel-region memory, else in host memory.
    #[default]
    Auto,
    /// In device memory (a/b/c and the witness uploaded by the preparation).
    Device,
    /// In host memory: a/b/c on the CPU, uploaded in the kernel region, H
    /// with two vectors on the device at once, parameters streamed.
    Host,
}

/// `"auto"` or a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Auto<T> {
    #[default]
    Auto,
    Value(T),
}

impl<T: Copy> Auto<T> {
    /// The value, or `auto()` for `"auto"`.
    pub fn or_else(self, auto: impl FnOnce() -> T) -> T {
        match self {
            Auto::Auto => auto(),
            Auto::Value(v) => v,
        }
    }
}

impl<T: Serialize> Serialize for Auto<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Auto::Auto => s.serialize_str("auto"),
            Auto::Value(v) => v.serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Auto<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<T> {
            Text(String),
            Value(T),
        }
        match Raw::<T>::deserialize(d)? {
            Raw::Text(t) if t == "auto" => Ok(Auto::Auto),
            // A value written as a string ("48GiB").
            Raw::Text(t) => {
                let text: serde::de::value::StringDeserializer<D::Error> =
                    serde::de::IntoDeserializer::into_deserializer(t.clone());
                T::deserialize(text)
                    .map(Auto::Value)
                    .map_err(|e: D::Error| {
                        serde::de::Error::custom(format!(
                            "expected \"auto\" or a value, found \"{t}\" ({e})"
                        ))
                    })
            }
            Raw::Value(v) => Ok(Auto::Value(v)),
        }
    }
}

/// A size in bytes: an integer, or a string such as `"48GiB"`, `"512 MiB"`,
/// `"1.5TiB"`, `"100MB"` (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB
/// of 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = (&t[..split], t[split..].trim());
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{s}` is not a size (e.g. 48GiB, 512MiB, 1000000)"))?;
        let scale: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            _ => {
                return Err(format!(
                    "unknown unit `{unit}` in `{s}` (use KiB, MiB, GiB, TiB)"
                ));
            }
        };
        let bytes = value * scale as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("`{s}` is out of range"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", crate::error::fmt_bytes(self.0))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        // TOML integers are i64; larger sizes go out as text.
        match i64::try_from(self.0) {
            Ok(v) => s.serialize_i64(v),
            Err(_) => s.serialize_str(&format!("{}B", self.0)),
        }
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(v) => Ok(ByteSize(v)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// The engine's configuration. Every field has a default that works; see
/// `docs/engine.example.toml` for the documented file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// `auto`, `cpu` or `gpu`.
    pub backend: Backend,
    /// Workers (threads) per device; `auto`: 2 on GPUs (one runs its kernel
    /// region while the other preps or finishes), 1 on the CPU pseudo-device
    /// (its kernel region already uses every core, so a second worker has
    /// nothing to overlap with).
    pub workers_per_device: Auto<usize>,
    /// Partitions synthesized at once (witness + SpMV); `auto`: as many as
    /// the CPU has cores (at least 2) with GPUs, 1 on the CPU backend. A
    /// single-threaded witness then keeps every core busy; circuits that
    /// synthesize parts in parallel (PoRep's challenges) share rayon's pool
    /// and take it in turn (`cuzk_synth::PartsGate`: first asked, first
    /// served, while the parts running are under twice the pool's threads),
    /// and the host memory budget bounds how many working sets exist.
    pub synthesis_concurrency: Auto<usize>,
    /// Partitions between "synthesis started" and "proof done" (reactive
    /// dispatch); `auto`: all workers plus `synthesis_concurrency`.
    pub dispatch_bound: Auto<usize>,
    /// Partitions whose witness is made in parallel parts (through
    /// `cuzk_synth::PartsGate`: PoRep's, the built-in `porep:K`'s),
    /// started or finished and not yet taken by a GPU worker, at most per
    /// priority class and those above it: such a witness starts its parts
    /// only while there is room. A
    /// witness made on every core faster than the GPU proves it then stops a
    /// few partitions ahead instead of filling host memory with finished
    /// witnesses. Witnesses made on one thread are not counted. `auto`: one
    /// per device.
    pub synthesis_ahead: Auto<usize>,
    /// The host memory budget; `auto`: the machine's memory (or cgroup
    /// limit) minus `host_memory_margin`.
    pub host_memory_budget: Auto<ByteSize>,
    /// What `auto` keeps back for the OS and everything else; `auto`: 10% of
    /// the machine's memory, at least 2 GiB.
    pub host_memory_margin: Auto<ByteSize>,
    /// Where recorded PCEs are kept on disk (one file per shape); none when
    /// unset.
    pub pce_cache_dir: Option<PathBuf>,
    /// Drop a PCE's matrices from host memory (8.9 GB of a 32 GiB PoRep's
    /// 9 GB) while every GPU keeps them (a/b/c evaluated on the GPU) and
    /// the PCE is in `pce_cache_dir`, to be read from there again where the
    /// host needs them (a job whose a/b/c are evaluated on the CPU, a GPU
    /// that freed its copy). Needs `pce_cache_dir`; false: keep them.
    pub release_host_pce: bool,
    /// Check every parameter point for subgroup membership when loading
    /// (about 25 µs a point: minutes for PoRep-32G). Points are always
    /// checked to be on the curve.
    pub params_subgroup_check: bool,
    /// Device memory kept back from reservations on each GPU.
    pub device_memory_margin: ByteSize,
    /// Each GPU behaves as a card with this much memory when it has more:
    /// the scheduler's reservations, the prover's placement of parameters
    /// and a/b/c, and cuzk's device buffers see that card (what other
    /// processes hold when the engine starts counts against it; device
    /// code and the driver's bookkeeping are not counted). Unset: the
    /// card's own memory. To run as on a smaller card, or to leave room for
    /// other programs. Must exceed `device_memory_margin`.
    pub device_memory_limit: Option<ByteSize>,
    /// GPUs to use, by driver ordinal (after `CUDA_VISIBLE_DEVICES`); unset:
    /// every GPU the driver sees.
    pub gpus: Option<Vec<usize>>,
    /// Where the GPU backend keeps parameters: `auto`, `resident`,
    /// `streamed`, or the queries kept resident (`"a,l,h"`).
    pub gpu_params: GpuParams,
    /// Page-lock streamed parameter sets' host copies (copied at the
    /// link's full speed, under the previous chunk's MSM); false: copied
    /// from pageable memory.
    pub gpu_pin_streamed: bool,
    /// Upload each partition's witness (and a, b, c when staged on the
    /// device) through two 256 MiB page-locked buffers per worker, filled by
    /// a few threads while the other crosses the link, instead of from
    /// pageable memory at a fraction of the link's speed; false: pageable.
    pub gpu_pinned_uploads: bool,
    /// Bytes of each of a worker's two bounce buffers (`gpu_pinned_uploads`):
    /// larger pieces cross the link in fewer copies, each waited for
    /// before its buffer is filled again.
    pub gpu_upload_buffer: ByteSize,
    /// Keep a, b and c evaluated on the CPU (partitions staged in host
    /// memory) in page-locked buffers of the engine's pool, copied in the
    /// kernel region at the link's full speed; false: in ordinary memory,
    /// copied through the bounce buffers of `gpu_pinned_uploads`, so no
    /// a/b/c buffer is ever page-locked (seconds each, stalling the
    /// driver, on a freshly started engine's first proofs).
    pub gpu_pin_abc: bool,
    /// Give each worker its own CUDA stream, so one worker's uploads and
    /// a/b/c kernels run beside the other's kernel region; false: both
    /// workers of a GPU on one shared stream (for comparison).
    pub gpu_stream_per_worker: bool,
    /// Let the GPU backend compute a/b/c itself from the circuit's matrices
    /// kept in device memory (only the witness crosses PCIe) when they fit;
    /// false: a/b/c on the CPU, uploaded.
    pub gpu_abc: bool,
    /// Where partitions wait between preparation and kernel region:
    /// `auto`, `device` or `host`.
    pub gpu_staging: GpuStaging,
    /// Keep a resident parameter set's window multiples on the GPU where
    /// they fit beside the set and two partitions (H first, then B_G2, L,
    /// A, B_G1): about 1.17x faster G1 MSMs for windows(c) - 1 more copies
    /// of each query kept (11 for 2^24 points); counted in the device
    /// budget. For cards with room to spare; off by default.
    pub gpu_window_multiples: bool,
    /// Spans the timeline keeps (the oldest are dropped beyond this).
    pub timeline_capacity: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            backend: Backend::Auto,
            workers_per_device: Auto::Auto,
            synthesis_concurrency: Auto::Auto,
            dispatch_bound: Auto::Auto,
            synthesis_ahead: Auto::Auto,
            host_memory_budget: Auto::Auto,
            host_memory_margin: Auto::Auto,
            pce_cache_dir: None,
            release_host_pce: true,
            params_subgroup_check: false,
            device_memory_margin: ByteSize(1 << 30),
            device_memory_limit: None,
            gpus: None,
            gpu_params: GpuParams::Auto,
            gpu_pin_streamed: true,
            gpu_pinned_uploads: true,
            gpu_upload_buffer: ByteSize(cuzk_groth16_cuda::BOUNCE_BYTES as u64),
            gpu_pin_abc: true,
            gpu_stream_per_worker: true,
            gpu_abc: true,
            gpu_staging: GpuStaging::Auto,
            gpu_window_multiples: false,
            timeline_capacity: 1 << 20,
        }
    }
}

impl EngineConfig {
    /// Parses a TOML document.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| EngineError::Config(e.to_string()))
    }

    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| EngineError::ConfigIo {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| EngineError::Config(format!("{}: {e}", path.display())))
    }

    /// This configuration as TOML.
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| EngineError::Config(e.to_string()))
    }

    /// Sets one key from `key=value` text, as a command line gives it
    /// (`--engine workers_per_device=2`). The value is read as TOML (`2`,
    /// `true`, `"48GiB"`), or as a string when it is not TOML (`48GiB`,
    /// `/var/cache/pce`).
    pub fn apply_override(&mut self, assignment: &str) -> Result<()> {
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(EngineError::Config(format!(
                "override `{assignment}` is not of the form key=value"
            )));
        };
        let (key, value) = (key.trim(), value.trim());
        let mut table =
            toml::Table::try_from(&*self).map_err(|e| EngineError::Config(e.to_string()))?;
        let parsed: toml::Value = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        table.insert(key.to_owned(), parsed);
        *self = table.try_into().map_err(|e: toml::de::Error| {
            EngineError::Config(format!("override `{assignment}`: {e}"))
        })?;
        Ok(())
    }

    /// Applies [`EngineConfig::apply_override`] to each assignment in order.
    pub fn with_overrides<'a>(
        mut self,
        assignments: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self> {
        for a in assignments {
            self.apply_override(a)?;
        }
        Ok(self)
    }

    /// The host memory budget in bytes this configuration gives on this
    /// machine.
    pub fn host_budget_bytes(&self) -> Result<u64> {
        match self.host_memory_budget {
            Auto::Value(b) => Ok(b.0),
            Auto::Auto => {
                let total = crate::budget::machine_memory().ok_or_else(|| {
                    EngineError::Config(
                        "host_memory_budget = \"auto\" needs /proc/meminfo; set a size instead"
                            .into(),
                    )
                })?;
                let margin = self
                    .host_memory_margin
                    .or_else(|| ByteSize((total / 10).max(2 << 30)))
                    .0;
                if margin >= total {
                    return Err(EngineError::Config(format!(
                        "host_memory_margin {} leaves nothing of the machine's {}",
                        crate::error::fmt_bytes(margin),
                        crate::error::fmt_bytes(total)
                    )));
                }
                Ok(total - margin)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_parses_and_the_empty_file_gives_defaults() {
        let text = include_str!("../../../docs/engine.example.toml");
        let example = EngineConfig::from_toml_str(text).unwrap();
        assert_eq!(example.backend, Backend::Auto);
        assert_eq!(
            EngineConfig::from_toml_str("").unwrap(),
            EngineConfig::default()
        );
        let back = EngineConfig::from_toml_str(&example.to_toml_string().unwrap()).unwrap();
        assert_eq!(back, example);
    }

    #[test]
    fn sizes_parse_in_every_form() {
        let c = EngineConfig::from_toml_str(
            "host_memory_budget = \"48GiB\"\nhost_memory_margin = 1000\ndevice_memory_margin = \"1.5 MiB\"",
        )
        .unwrap();
        assert_eq!(c.host_memory_budget, Auto::Value(ByteSize(48 << 30)));
        assert_eq!(c.host_memory_margin, Auto::Value(ByteSize(1000)));
        assert_eq!(c.device_memory_margin, ByteSize(3 << 19));
        assert_eq!(c.host_budget_bytes().unwrap(), 48 << 30);
        assert_eq!("100MB".parse::<ByteSize>(), Ok(ByteSize(100_000_000)));
        assert!(
            "12 parsecs"
                .parse::<ByteSize>()
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(EngineConfig::default().host_budget_bytes().unwrap() > 0);
    }

    #[test]
    fn mistakes_are_named() {
        let err = EngineConfig::from_toml_str("worker_per_device = 2").unwrap_err();
        assert!(err.to_string().contains("worker_per_device"), "{err}");
        let err = EngineConfig::from_toml_str("workers_per_device = \"many\"").unwrap_err();
        assert!(err.to_string().contains("many"), "{err}");
        let err = EngineConfig::from_toml_str("backend = \"tpu\"").unwrap_err();
        assert!(err.to_string().contains("tpu"), "{err}");
    }

    #[test]
    fn gpu_params_takes_a_word_or_the_queries_to_keep() {
        use cuzk_groth16_cuda::gpu::Query;
        let parse = |v: &str| {
            EngineConfig::default()
                .with_overrides([v])
                .map(|c| c.gpu_params)
        };
        assert_eq!(parse("gpu_params=streamed").unwrap(), GpuParams::Streamed);
        assert_eq!(parse("gpu_params=auto").unwrap(), GpuParams::Auto);
        let alh = ResidentQueries::NONE
            .with(Query::A)
            .with(Query::L)
            .with(Query::H);
        assert_eq!(parse("gpu_params=a,l,h").unwrap(), GpuParams::Queries(alh));
        assert_eq!(
            parse("gpu_params=none").unwrap(),
            GpuParams::Queries(ResidentQueries::NONE)
        );
        // Written back as the list, read again as the same.
        let c = EngineConfig {
            gpu_params: GpuParams::Queries(alh),
            ..EngineConfig::default()
        };
        let text = c.to_toml_string().unwrap();
        assert!(text.contains("gpu_params = \"h,l,a\""), "{text}");
        assert_eq!(EngineConfig::from_toml_str(&text).unwrap(), c);
        let err = parse("gpu_params=a,q").unwrap_err().to_string();
        assert!(err.contains("\"q\"") && err.contains("streamed"), "{err}");
    }

    #[test]
    fn overrides_set_one_key_at_a_time() {
        let c = EngineConfig::default()
            .with_overrides([
                "workers_per_device=2",
                "backend=cpu",
                "host_memory_budget=8GiB",
                "pce_cache_dir=/tmp/pce",
                "params_subgroup_check = true",
                "dispatch_bound=auto",
                "synthesis_ahead=3",
                "device_memory_limit=16GiB",
            ])
            .unwrap();
        assert_eq!(c.workers_per_device, Auto::Value(2));
        assert_eq!(c.backend, Backend::Cpu);
        assert_eq!(c.host_memory_budget, Auto::Value(ByteSize(8 << 30)));
        assert_eq!(c.pce_cache_dir.as_deref(), Some(Path::new("/tmp/pce")));
        assert!(c.params_subgroup_check);
        assert_eq!(c.dispatch_bound, Auto::Auto);
        assert_eq!(c.synthesis_ahead, Auto::Value(3));
        assert_eq!(c.device_memory_limit, Some(ByteSize(16 << 30)));
        assert_eq!(EngineConfig::default().device_memory_limit, None);
        let err = EngineConfig::default()
            .with_overrides(["nonsense=1"])
            .unwrap_err();
        assert!(err.to_string().contains("nonsense"), "{err}");
        assert!(EngineConfig::default().with_overrides(["novalue"]).is_err());
    }
}
