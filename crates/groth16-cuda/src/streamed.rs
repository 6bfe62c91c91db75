//! Streamed MSMs: the five MSMs of a proof against a parameter set that is
//! not resident on the device, its bases copied from host memory chunk by
//! chunk.
//!
//! A shape's plan is made once and kept ([`StreamedShape`]): each query's
//! variables cut into chunks of at most [`GpuOptions::stream_chunk`]
//! bases (used variables: a chunk of a sparse query spans more variables
//! than a dense one's), each chunk's density on the device and where its
//! bases start in the host query. A proof then runs every chunk of every query as one
//! pipeline ([`Streamer`]): while one chunk's MSM runs, the next chunk's
//! bases, of the same query or of the next one, are copied on a copy stream
//! into the other of two chunk buffers, and the first chunk of H is copied
//! under the NTTs. Only the first copy of a proof can be waited for, and it
//! runs under the NTT.
//!
//! [`GpuOptions::stream_chunk`]: crate::GpuOptions::stream_chunk

use std::sync::Arc;
use std::time::Duration;

use bellperson::groth16::Parameters;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::{CudaStream, DevicePtrMut, result as cu_result};
use cuzk_synth::{Density, Pce};

use crate::cuda::{DeviceBuffer, Gpu, GpuEvent};
use crate::gpu::ResidentQueries;
use crate::msm::{DeviceBases, DeviceDensity, GpuMsm, MsmAffine};
use crate::{Bls12, Groth16Error, Result};

/// A bitmap over variables, assembled from runs and densities, then cut
/// into chunks: bit `i % 64` of word `i / 64` is variable `i`, and bits
/// past `len` are zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    /// The number of variables covered.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether variable `i` is used.
    #[cfg(test)]
    fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// The number of used variables.
    pub(crate) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Appends the first `n` bits of `src` (bit `i % 64` of `src[i / 64]`).
    fn append_words(&mut self, src: &[u64], n: usize) {
        let mut left = n;
        for &w in src {
            if left == 0 {
                break;
            }
            let take = left.min(64);
            let w = if take == 64 {
                w
            } else {
                w & ((1u64 << take) - 1)
            };
            let shift = self.len % 64;
            match self.words.last_mut() {
                Some(last) if shift != 0 => {
                    *last |= w << shift;
                    if take > 64 - shift {
                        self.words.push(w >> (64 - shift));
                    }
                }
                _ => self.words.push(w),
            }
            self.len += take;
            left -= take;
        }
    }

    /// Appends `n` variables, all used or all unused.
    pub(crate) fn push_run(&mut self, used: bool, n: usize) {
        let w = if used { u64::MAX } else { 0 };
        for _ in 0..n / 64 {
            self.append_words(&[w], 64);
        }
        self.append_words(&[w], n % 64);
    }

    /// Appends a query's density.
    pub(crate) fn push_density(&mut self, d: &Density) {
        self.append_words(d.words(), d.len());
    }

    /// One past the `k`-th used variable from `lo` on (`k` >= 1), or the
    /// end when fewer follow.
    pub(crate) fn end_of_used(&self, lo: usize, k: usize) -> usize {
        let mut left = k.max(1);
        let mut i = lo;
        while i < self.len {
            // Bits past len are zero.
            let word = self.words[i / 64] >> (i % 64);
            let ones = word.count_ones() as usize;
            if ones >= left {
                let mut w = word;
                for _ in 1..left {
                    w &= w - 1;
                }
                return i + w.trailing_zeros() as usize + 1;
            }
            left -= ones;
            i = (i / 64 + 1) * 64;
        }
        self.len
    }

    /// Variables `lo..lo + len` (which must lie inside) as a bitmap of
    /// their own.
    pub(crate) fn range(&self, lo: usize, len: usize) -> Bits {
        debug_assert!(lo + len <= self.len);
        let (first, shift) = (lo / 64, lo % 64);
        let mut words: Vec<u64> = (0..len.div_ceil(64))
            .map(|k| {
                let low = self.words[first + k] >> shift;
                let high = match self.words.get(first + k + 1) {
                    Some(&next) if shift != 0 => next << (64 - shift),
                    _ => 0,
                };
                low | high
            })
            .collect();
        if let Some(last) = words.last_mut().filter(|_| !len.is_multiple_of(64)) {
            *last &= (1u64 << (len % 64)) - 1;
        }
        Bits { words, len }
    }
}

/// The variables of each of a proof's MSMs, in bellperson's layout: which
/// scalars pair with the query's bases, in order.
pub(crate) struct QueryBits {
    /// H: the first m-1 of the m coefficients of h.
    pub(crate) h: Bits,
    /// L: every aux variable (the scalars start after the inputs).
    pub(crate) l: Bits,
    /// A: every input, then the aux used in A.
    pub(crate) a: Bits,
    /// B (G1 and G2): the inputs and aux used in B.
    pub(crate) b: Bits,
}

impl QueryBits {
    pub(crate) fn of(pce: &Pce) -> QueryBits {
        let m = pce.domain_size();
        let mut h = Bits::default();
        h.push_run(true, m.saturating_sub(1));
        h.push_run(false, m.min(1));
        let mut l = Bits::default();
        l.push_run(true, pce.num_aux);
        let mut a = Bits::default();
        a.push_run(true, pce.num_inputs);
        a.push_density(&pce.a_aux_density);
        let mut b = Bits::default();
        b.push_density(&pce.b_input_density);
        b.push_density(&pce.b_aux_density);
        QueryBits { h, l, a, b }
    }
}

/// One chunk of a query: variables `lo..lo + bits.len()`, whose used ones
/// pair with the host bases from `first_base` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlannedChunk {
    pub(crate) lo: usize,
    pub(crate) first_base: usize,
    pub(crate) bits: Bits,
}

impl PlannedChunk {
    /// The number of bases (used variables) of the chunk.
    pub(crate) fn count(&self) -> usize {
        self.bits.count()
    }
}

/// `used` cut into chunks of `chunk` used variables each (the last may
/// have fewer): a chunk ends just after its last used variable, the next
/// one starts there, and the last one runs to the end (or to its last
/// used variable, when it is full); a query without a used variable has no
/// chunk.
pub(crate) fn plan_query(used: &Bits, chunk: usize) -> Vec<PlannedChunk> {
    let chunk = chunk.max(1);
    let mut out = Vec::new();
    let mut first_base = 0;
    let mut lo = 0;
    while lo < used.len() {
        let end = used.end_of_used(lo, chunk);
        let bits = used.range(lo, end - lo);
        let count = bits.count();
        if count == 0 {
            break;
        }
        out.push(PlannedChunk {
            lo,
            first_base,
            bits,
        });
        first_base += count;
        lo = end;
    }
    out
}

/// A planned chunk with its density on the device.
pub(crate) struct DeviceChunk {
    lo: usize,
    first_base: usize,
    count: usize,
    /// Covers the chunk's variables.
    dens: DeviceDensity,
}

impl DeviceChunk {
    fn upload(gpu: &Arc<Gpu>, c: PlannedChunk) -> Result<DeviceChunk> {
        let (lo, first_base, count, len) = (c.lo, c.first_base, c.count(), c.bits.len());
        Ok(DeviceChunk {
            lo,
            first_base,
            count,
            dens: DeviceDensity::from_words(gpu, c.bits.words, len)?,
        })
    }
}

/// Key of a circuit shape in the prover's caches.
pub(crate) type ShapeKey = (usize, usize, usize, u64);

/// One shape's streamed MSMs planned for one chunk size, kept on the device
/// (densities only: a few bits per variable).
pub(crate) struct StreamedShape {
    pub(crate) key: ShapeKey,
    pub(crate) chunk: usize,
    h: Vec<DeviceChunk>,
    l: Vec<DeviceChunk>,
    a: Vec<DeviceChunk>,
    b: Vec<DeviceChunk>,
}

impl StreamedShape {
    pub(crate) fn new(gpu: &Arc<Gpu>, pce: &Pce, key: ShapeKey, chunk: usize) -> Result<Self> {
        let q = QueryBits::of(pce);
        let up = |bits: &Bits| -> Result<Vec<DeviceChunk>> {
            plan_query(bits, chunk)
                .into_iter()
                .map(|c| DeviceChunk::upload(gpu, c))
                .collect()
        };
        Ok(StreamedShape {
            key,
            chunk,
            h: up(&q.h)?,
            l: up(&q.l)?,
            a: up(&q.a)?,
            b: up(&q.b)?,
        })
    }

    /// Device bytes of the chunks' densities.
    pub(crate) fn device_bytes(&self) -> u64 {
        [&self.h, &self.l, &self.a, &self.b]
            .iter()
            .flat_map(|q| q.iter().map(|c| c.dens.device_bytes()))
            .sum()
    }

    fn chunks(&self, q: Query) -> &[DeviceChunk] {
        match q {
            Query::H => &self.h,
            Query::L => &self.l,
            Query::A => &self.a,
            Query::BG1 | Query::BG2 => &self.b,
        }
    }
}

/// A parameter set's five queries: its five MSMs, in the order a proof
/// runs them ([`Query::ALL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    H,
    L,
    A,
    BG1,
    BG2,
}

impl Query {
    /// The five, in the order a proof runs their MSMs.
    pub const ALL: [Query; 5] = [Query::H, Query::L, Query::A, Query::BG1, Query::BG2];

    /// Its name in settings and logs: `h`, `l`, `a`, `b_g1`, `b_g2`.
    pub fn name(self) -> &'static str {
        match self {
            Query::H => "h",
            Query::L => "l",
            Query::A => "a",
            Query::BG1 => "b_g1",
            Query::BG2 => "b_g2",
        }
    }
}

/// One chunk of one query in the pipeline.
struct Item {
    query: Query,
    chunk: usize,
    /// Which of its curve's two chunk buffers it is copied into.
    slot: usize,
}

/// The two chunk buffers of each curve. Only one curve's are held at a
/// time, except while the first G2 chunk is copied under the last G1
/// chunk's MSM (then two G1 buffers and one G2 buffer: the room of two G2
/// buffers, what [`Prover::shared_device_bytes`] counts).
///
/// [`Prover::shared_device_bytes`]: crate::Prover::shared_device_bytes
#[derive(Default)]
struct Buffers {
    g1: [Option<DeviceBases<G1Affine>>; 2],
    g2: [Option<DeviceBases<G2Affine>>; 2],
}

/// A curve's side of the pipeline.
trait Curve: MsmAffine {
    fn slots(b: &mut Buffers) -> &mut [Option<DeviceBases<Self>>; 2];
    fn host(p: &Parameters<Bls12>, q: Query) -> &[Self];
}

impl Curve for G1Affine {
    fn slots(b: &mut Buffers) -> &mut [Option<DeviceBases<Self>>; 2] {
        &mut b.g1
    }
    fn host(p: &Parameters<Bls12>, q: Query) -> &[Self] {
        match q {
            Query::H => &p.h,
            Query::L => &p.l,
            Query::A => &p.a,
            Query::BG1 | Query::BG2 => &p.b_g1,
        }
    }
}

impl Curve for G2Affine {
    fn slots(b: &mut Buffers) -> &mut [Option<DeviceBases<Self>>; 2] {
        &mut b.g2
    }
    fn host(p: &Parameters<Bls12>, _: Query) -> &[Self] {
        &p.b_g2
    }
}

/// A proof's streamed MSMs in progress: copies are queued one chunk ahead
/// of the MSMs ([`Streamer::prefetch`] before the NTT queues the first).
/// Dropping it waits for the copy stream, so no copy reads the host bases
/// or writes a chunk buffer afterwards.
pub(crate) struct Streamer<'a> {
    gpu: &'a Arc<Gpu>,
    msm: &'a GpuMsm,
    copy: Arc<CudaStream>,
    params: &'a Parameters<Bls12>,
    shape: Arc<StreamedShape>,
    /// The queries not streamed.
    resident: ResidentQueries,
    items: Vec<Item>,
    /// Items whose copy is queued / whose MSM is done.
    copied: usize,
    done: usize,
    /// Chunk buffer lengths: the most bases of any chunk of each curve.
    g1_len: usize,
    g2_len: usize,
    bufs: Buffers,
    events: Vec<(GpuEvent, GpuEvent)>,
    bytes: u64,
    /// Chunks whose copy was still running when their MSM was queued.
    waited: usize,
}

impl<'a> Streamer<'a> {
    /// Streams the queries of `params` not in `resident` (kept on the
    /// device by the caller, whose MSMs it runs itself); checks that every
    /// chunk's bases are in the host set.
    pub(crate) fn new(
        gpu: &'a Arc<Gpu>,
        msm: &'a GpuMsm,
        copy: Arc<CudaStream>,
        params: &'a Parameters<Bls12>,
        shape: Arc<StreamedShape>,
        resident: ResidentQueries,
    ) -> Result<Self> {
        let mut items = Vec::new();
        let (mut g1_len, mut g2_len) = (0, 0);
        let mut per_curve = [0usize; 2];
        for q in Query::ALL.into_iter().filter(|&q| !resident.has(q)) {
            let (available, curve) = match q {
                Query::BG2 => (params.b_g2.len(), 1),
                _ => (G1Affine::host(params, q).len(), 0),
            };
            for (k, c) in shape.chunks(q).iter().enumerate() {
                if c.first_base + c.count > available {
                    return Err(Groth16Error::MsmTooFewBases {
                        needed: c.first_base + c.count,
                        available,
                    });
                }
                if curve == 0 {
                    g1_len = g1_len.max(c.count);
                } else {
                    g2_len = g2_len.max(c.count);
                }
                items.push(Item {
                    query: q,
                    chunk: k,
                    slot: per_curve[curve] % 2,
                });
                per_curve[curve] += 1;
            }
        }
        Ok(Streamer {
            gpu,
            msm,
            copy,
            params,
            shape,
            resident,
            items,
            copied: 0,
            done: 0,
            g1_len,
            g2_len,
            bufs: Buffers::default(),
            events: Vec::new(),
            bytes: 0,
            waited: 0,
        })
    }

    /// Queues the copy of the next chunk not yet copied, if any, into its
    /// buffer (allocated on first use). Its buffer's previous chunk has
    /// been summed (every MSM reads its result back before returning).
    pub(crate) fn prefetch(&mut self) -> Result<()> {
        let Some(item) = self.items.get(self.copied) else {
            return Ok(());
        };
        let (q, k, slot) = (item.query, item.chunk, item.slot);
        match q {
            Query::BG2 => self.copy_chunk::<G2Affine>(q, k, slot, self.g2_len)?,
            _ => self.copy_chunk::<G1Affine>(q, k, slot, self.g1_len)?,
        }
        self.copied += 1;
        Ok(())
    }

    fn copy_chunk<A: Curve>(&mut self, q: Query, k: usize, slot: usize, len: usize) -> Result<()> {
        let g = self.gpu;
        g.bind("streaming parameter bases")?;
        let c = &self.shape.chunks(q)[k];
        let src = &A::host(self.params, q)[c.first_base..c.first_base + c.count];
        let buf = match &mut A::slots(&mut self.bufs)[slot] {
            Some(buf) => buf,
            empty => empty.insert(DeviceBases::<A>::alloc(g, len)?),
        };
        // The copy stream writes the buffer only after its allocation
        // (stream-ordered on the GPU's stream) and whatever else is queued
        // there; cudarc also orders it after the buffer's last read.
        self.copy.join(g.stream()).map_err(|e| Groth16Error::Cuda {
            what: "ordering the copy stream after the GPU's stream".into(),
            detail: format!("{e:?}"),
        })?;
        self.events
            .push(upload_on(g, &self.copy, buf.buffer_mut(), src)?);
        self.bytes += size_of_val(src) as u64;
        Ok(())
    }

    /// The MSM of query `q` (G1), chunk by chunk, each chunk's scalars
    /// `scalars[offset + v]` for its variables v.
    pub(crate) fn g1(
        &mut self,
        q: Query,
        scalars: &DeviceBuffer<Scalar>,
        offset: usize,
    ) -> Result<G1Projective> {
        self.run::<G1Affine>(q, scalars, offset)
    }

    /// [`Streamer::g1`] for B in G2.
    pub(crate) fn g2(&mut self, scalars: &DeviceBuffer<Scalar>) -> Result<G2Projective> {
        self.run::<G2Affine>(Query::BG2, scalars, 0)
    }

    fn run<A: Curve>(
        &mut self,
        q: Query,
        scalars: &DeviceBuffer<Scalar>,
        offset: usize,
    ) -> Result<A::Projective> {
        if self.resident.has(q) {
            return Err(Groth16Error::Cuda {
                what: format!("a streamed MSM of query {}", q.name()),
                detail: "the query is resident, not streamed".into(),
            });
        }
        // One MSM over the query's chunks: buckets carried from chunk to
        // chunk, reduced once, with the windows of the whole query.
        let chunks = self.shape.chunks(q);
        let total: usize = chunks.iter().map(|c| c.count).sum();
        let mut msm = self.msm.carried::<A>(total, chunks.len())?;
        while let Some(item) = self.items.get(self.done) {
            if item.query != q {
                break;
            }
            let (k, slot) = (item.chunk, item.slot);
            // This chunk's copy, and the next one's under this MSM.
            while self.copied < (self.done + 2).min(self.items.len()) {
                self.prefetch()?;
            }
            let c = &self.shape.chunks(q)[k];
            let Some(buf) = &A::slots(&mut self.bufs)[slot] else {
                return Err(Groth16Error::Cuda {
                    what: "a streamed MSM".into(),
                    detail: "its chunk buffer was not filled".into(),
                });
            };
            // The MSM's launches wait for the chunk's copy (cudarc records
            // the copy as the buffer's last write on the copy stream).
            if self
                .events
                .get(self.done)
                .is_some_and(|(_, end)| !end.is_done())
            {
                self.waited += 1;
            }
            // The chunk's scalars, read in place from the proof's.
            msm.add_at(buf, scalars, offset + c.lo, Some(&c.dens))?;
            self.done += 1;
            let curve_ends = self
                .items
                .get(self.done)
                .is_none_or(|n| (n.query == Query::BG2) != (q == Query::BG2));
            if curve_ends {
                // Room for the other curve's second buffer.
                *A::slots(&mut self.bufs) = [None, None];
            }
        }
        msm.finish()
    }

    /// Waits for the copies: their bytes and GPU time, the number of
    /// chunks, and how many of them were queued before their copy was done
    /// (the MSMs waited for the copies: streaming was copy-bound there).
    pub(crate) fn finish(self) -> Result<(u64, Duration, usize, usize)> {
        self.copy.synchronize().map_err(|e| Groth16Error::Cuda {
            what: format!("waiting for GPU {}'s copy stream", self.gpu.ordinal()),
            detail: format!("{e:?}"),
        })?;
        let mut copy = Duration::ZERO;
        for (start, end) in &self.events {
            copy += Duration::from_secs_f64(end.ms_since(start)?.max(0.0) / 1e3);
        }
        Ok((self.bytes, copy, self.items.len(), self.waited))
    }
}

impl Drop for Streamer<'_> {
    fn drop(&mut self) {
        // Whatever happened, no copy may still read the host bases or write
        // a chunk buffer once the proof's kernel region is left.
        if let Err(e) = self.copy.synchronize() {
            tracing::warn!(
                gpu = self.gpu.ordinal(),
                "waiting for the copy stream: {e:?}"
            );
        }
    }
}

/// Queues a copy of `src` into the start of `dst` on `stream`, between two
/// timing events (returned); `src` must stay alive and unchanged until the
/// stream has been waited for.
fn upload_on<A: MsmAffine>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    dst: &mut DeviceBuffer<A>,
    src: &[A],
) -> Result<(GpuEvent, GpuEvent)> {
    if src.len() > dst.len() {
        return Err(Groth16Error::CopyLength {
            what: "into a streamed chunk buffer",
            device: dst.len(),
            host: src.len(),
        });
    }
    let start = gpu.event_on(stream)?;
    {
        // Records the copy as the buffer's last write when dropped.
        let (ptr, _record) = dst.slice_mut().device_ptr_mut(stream);
        // SAFETY: `ptr` holds at least `src.len()` elements of `A` in this
        // GPU's context (bound by the caller); the caller keeps `src` alive
        // until it has waited for `stream`.
        unsafe { cu_result::memcpy_htod_async(ptr, src, stream.cu_stream()) }.map_err(|e| {
            Groth16Error::Cuda {
                what: format!(
                    "copying {} streamed bases to GPU {}",
                    src.len(),
                    gpu.ordinal()
                ),
                detail: format!("{e:?}"),
            }
        })?;
    }
    Ok((start, gpu.event_on(stream)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn naive(bits: &[bool]) -> Bits {
        let mut b = Bits::default();
        for &u in bits {
            b.push_run(u, 1);
        }
        b
    }

    fn random_bools(n: usize, p: f64, seed: u64) -> Vec<bool> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n).map(|_| rng.gen_bool(p)).collect()
    }

    fn density(bits: &[bool]) -> Density {
        let mut d = Density::new(bits.len());
        for (i, &u) in bits.iter().enumerate() {
            if u {
                d.set(i);
            }
        }
        d
    }

    #[test]
    fn bits_append_runs_and_densities_at_any_offset() {
        // Runs and densities of lengths around word edges, in every order.
        let lens = [0, 1, 5, 63, 64, 65, 127, 128, 130, 300];
        for (s, &a) in lens.iter().enumerate() {
            for &b in &lens {
                let x = random_bools(a, 0.5, s as u64);
                let y = random_bools(b, 0.3, 100 + s as u64);
                let mut bits = Bits::default();
                bits.push_density(&density(&x));
                bits.push_run(true, 3);
                bits.push_density(&density(&y));
                bits.push_run(false, b);
                let mut expect: Vec<bool> = x.clone();
                expect.extend([true; 3]);
                expect.extend(&y);
                expect.extend(std::iter::repeat_n(false, b));
                assert_eq!(bits.len(), expect.len());
                assert_eq!(bits.words.len(), expect.len().div_ceil(64));
                for (i, &e) in expect.iter().enumerate() {
                    assert_eq!(bits.get(i), e, "bit {i} of {a} + 3 + {b} + {b}");
                }
                assert_eq!(bits.count(), expect.iter().filter(|&&u| u).count());
                assert_eq!(bits, naive(&expect));
            }
        }
    }

    #[test]
    fn a_range_is_the_bits_it_covers() {
        let all = random_bools(1000, 0.4, 7);
        let bits = naive(&all);
        for lo in [0, 1, 63, 64, 65, 200, 999] {
            for len in [0, 1, 2, 63, 64, 65, 129, 300] {
                if lo + len > all.len() {
                    continue;
                }
                assert_eq!(bits.range(lo, len), naive(&all[lo..lo + len]), "{lo}+{len}");
            }
        }
        assert_eq!(bits.range(0, 1000), bits);
    }

    #[test]
    fn the_end_of_k_used_variables_is_found_across_words() {
        for (p, seed) in [(0.05, 1), (0.5, 2), (1.0, 3)] {
            let all = random_bools(700, p, seed);
            let bits = naive(&all);
            for lo in [0, 1, 63, 64, 65, 130, 699, 700] {
                for k in [1, 2, 31, 64, 65, 200, 1000] {
                    // One past the k-th used variable at or after lo.
                    let want = all[lo..]
                        .iter()
                        .enumerate()
                        .filter(|(_, u)| **u)
                        .nth(k - 1)
                        .map_or(all.len(), |(i, _)| lo + i + 1);
                    assert_eq!(bits.end_of_used(lo, k), want, "p {p}, {k} from {lo}");
                }
            }
        }
    }

    #[test]
    fn chunks_cover_the_used_variables_in_order() {
        let all = random_bools(10_000, 0.2, 11);
        // An empty stretch, so a chunk without a used variable is left out.
        let mut used = all.clone();
        used[3000..3600].iter_mut().for_each(|u| *u = false);
        let bits = naive(&used);
        let total = used.iter().filter(|&&u| u).count();
        for chunk in [1, 64, 300, 600, 4096, 10_000, 20_000] {
            let plan = plan_query(&bits, chunk);
            assert_eq!(plan.len(), total.div_ceil(chunk), "chunk {chunk}");
            let mut base = 0;
            let mut covered = vec![false; used.len()];
            let mut next = 0;
            for (k, c) in plan.iter().enumerate() {
                assert!(c.count() > 0, "chunk {chunk}: an empty chunk was kept");
                // Full chunks of bases but the last, back to back, each
                // ending at a used variable.
                assert_eq!(c.lo, next, "chunk {chunk}: a gap before chunk {k}");
                next = c.lo + c.bits.len();
                if k + 1 < plan.len() {
                    assert_eq!(c.count(), chunk);
                    assert!(used[next - 1], "chunk {chunk}: chunk {k} ends unused");
                } else {
                    assert!(c.count() <= chunk);
                    assert!(
                        !used[next..].contains(&true),
                        "chunk {chunk}: used variables after the last chunk"
                    );
                }
                // Bases: every used variable before the chunk has one.
                assert_eq!(
                    c.first_base,
                    used[..c.lo].iter().filter(|&&u| u).count(),
                    "chunk {chunk} at {}",
                    c.lo
                );
                assert!(c.first_base >= base);
                base = c.first_base + c.count();
                for i in 0..c.bits.len() {
                    assert_eq!(c.bits.get(i), used[c.lo + i]);
                    covered[c.lo + i] = true;
                }
            }
            assert_eq!(base, used.iter().filter(|&&u| u).count());
            // What no chunk covers is unused.
            for (i, &u) in used.iter().enumerate() {
                assert!(covered[i] || !u, "chunk {chunk}: variable {i} left out");
            }
        }
        assert!(plan_query(&Bits::default(), 8).is_empty());
        assert!(plan_query(&naive(&[false; 100]), 8).is_empty());
    }

    #[test]
    fn query_bits_follow_bellpersons_layout() {
        let a_aux = random_bools(200, 0.6, 1);
        let b_in = random_bools(3, 0.5, 2);
        let b_aux = random_bools(200, 0.3, 3);
        // 150 empty constraints: a domain of 256.
        let rows = cuzk_synth::Csr {
            row_ptr: vec![0; 151],
            ..Default::default()
        };
        let pce = Pce {
            num_inputs: 3,
            num_aux: 200,
            a: rows.clone(),
            b: rows.clone(),
            c: rows,
            coeff_table: Vec::new(),
            a_aux_density: density(&a_aux),
            b_input_density: density(&b_in),
            b_aux_density: density(&b_aux),
            names: None,
            released: None,
            memo: Default::default(),
        };
        let q = QueryBits::of(&pce);
        let m = pce.domain_size();
        assert!(m >= 150);
        let mut h = vec![true; m - 1];
        h.push(false);
        assert_eq!(q.h, naive(&h));
        assert_eq!(q.l, naive(&[true; 200]));
        let mut a = vec![true; 3];
        a.extend(&a_aux);
        assert_eq!(q.a, naive(&a));
        let mut b = b_in.clone();
        b.extend(&b_aux);
        assert_eq!(q.b, naive(&b));
    }
}
