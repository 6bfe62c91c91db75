//! An MSM's launch sequences ([`Run`]): classifying the scalars, summing
//! the ones, Pippenger's sorting passes and bucket accumulation, the scan,
//! and the bucket reduction, each a series of kernel launches on the
//! scratch, with the launch geometry they share.

use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use group::Group;

use super::config::{scatter_op, window_for};
use super::scratch::{CurveScratch, Scratch, clear, curve_scratch, ensure, scratch_missing};
use super::{DeviceBases, DeviceDensity, MsmAffine, MsmConfig, plan, windows};
use crate::cuda::{DeviceBuffer, DeviceRange, Gpu, Kernel, LaunchConfig, grid_1d};
use crate::{Groth16Error, Result};

/// Threads per block of the curve kernels; must equal `MSM_CURVE_THREADS` in
/// kernels/msm/pippenger.cuh (their `__launch_bounds__`).
pub(super) const CURVE_BLOCK: u32 = 128;
/// Threads per block of the scalar kernels (module `msm`).
/// A multiple of 32: the batched scatter keeps every warp whole.
const SCALAR_BLOCK: u32 = 256;
/// Elements per thread in the levels after the first of every segmented sum
/// (their lists are short).
pub(super) const PARTIALS_PER: u32 = 32;
/// Elements per thread of the scan kernels.
const SCAN_PER: u32 = 64;

fn u32_of(x: usize, what: &str) -> Result<u32> {
    u32::try_from(x).map_err(|_| Groth16Error::MsmShape {
        detail: format!("{what} is {x}, more than 32-bit kernel indices allow"),
    })
}

fn grid(threads: u64, block: u32) -> Result<LaunchConfig> {
    grid_1d(usize::try_from(threads).unwrap_or(usize::MAX), block)
}

/// One MSM in progress: the launches, in order.
pub(super) struct Run<'a> {
    pub(super) gpu: &'a Arc<Gpu>,
    pub(super) config: &'a MsmConfig,
    pub(super) s: &'a mut Scratch,
    pub(super) phase_start: Instant,
}

impl Run<'_> {
    fn kernel(&self, module: &str, op: &str, curve: Option<&str>) -> Result<Kernel> {
        let name = match curve {
            Some(c) => format!("msm_{op}_{c}_bls12_381"),
            None => format!("msm_{op}_bls12_381"),
        };
        self.gpu.kernel(module, &name)
    }

    /// Ends a phase of the profile (waiting for the GPU) when profiling.
    pub(super) fn phase(&mut self, name: &'static str) -> Result<()> {
        if self.config.profile {
            self.gpu.synchronize()?;
            let now = Instant::now();
            self.s
                .profile
                .push((name, now.duration_since(self.phase_start).as_secs_f64()));
            self.phase_start = now;
        }
        Ok(())
    }

    pub(super) fn msm<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        scalars: &DeviceRange<'_, Scalar>,
        density: Option<&DeviceDensity>,
        used: usize,
    ) -> Result<A::Projective> {
        let (n1, m) = self.classify(scalars, density, used)?;
        self.phase("classify")?;
        let mut result = A::Projective::identity();
        if n1 > 0 {
            result += self.sum_ones::<A>(bases, n1)?;
            self.phase("ones")?;
        }
        if m > 0 {
            result += self.pippenger::<A>(bases, m)?;
        }
        Ok(result)
    }

    /// Step 1: returns (ones, others) of the scalars (every variable the
    /// density covers, at most 2^31), `used` of which the density marks
    /// (all of them without one).
    pub(super) fn classify(
        &mut self,
        scalars: &DeviceRange<'_, Scalar>,
        density: Option<&DeviceDensity>,
        used: usize,
    ) -> Result<(u32, u32)> {
        let gpu = self.gpu;
        // Checked by the caller (checked_len): n <= MAX_LEN < 2^31.
        let n = scalars.len() as u32;
        let k = self.kernel("msm", "classify", None)?;
        let s = &mut *self.s;
        let counters = ensure(gpu, &mut s.counters, 2)?;
        clear(gpu, counters, 2)?;
        // One slot per used variable: the kernel skips the others.
        let ones_idx = ensure(gpu, &mut s.ones_idx, used)?;
        let other_idx = ensure(gpu, &mut s.other_idx, used)?;
        let other = ensure(gpu, &mut s.other_scalars, used)?;
        let no_bits = ensure(gpu, &mut s.no_bits, 1)?;
        let no_prefix = ensure(gpu, &mut s.no_prefix, 1)?;
        let (bits, prefix, use_density) = match density {
            Some(d) => (&d.bits, &d.prefix, 1u32),
            None => (&*no_bits, &*no_prefix, 0u32),
        };
        let ones_sep = u32::from(self.config.ones_separately);
        // SAFETY: msm_classify_bls12_381(const fr_t* scalars, uint32_t n,
        // const uint64_t* dens_bits, const uint32_t* dens_prefix, uint32_t
        // use_density, uint32_t ones_separately, uint32_t* counters,
        // uint32_t* ones_idx, uint32_t* other_idx, fr_t* other_scalars):
        // thread i < n reads scalars[i] (the range holds n) and, with a
        // density, word i/64 of bits and prefix (the density covers n
        // variables: checked by the caller); only a used variable (all
        // without a density) writes, one slot of ones_idx or
        // other_idx/other_scalars below `used` (the counters count used
        // variables only), each allocated with `used` elements, and
        // counters[0..2].
        unsafe {
            k.args()
                .range(scalars)
                .arg(&n)
                .buf(bits)
                .buf(prefix)
                .arg(&use_density)
                .arg(&ones_sep)
                .buf_mut(counters)
                .buf_mut(ones_idx)
                .buf_mut(other_idx)
                .buf_mut(other)
                .launch(grid(u64::from(n), SCALAR_BLOCK)?)?;
        }
        let c = counters.download()?;
        Ok((c[0], c[1]))
    }

    /// Step 2: the sum of the bases of the n1 scalars equal to 1.
    pub(super) fn sum_ones<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        n1: u32,
    ) -> Result<A::Projective> {
        let gpu = self.gpu;
        let sum_bases = self.kernel(A::MODULE, "sum_bases", Some(A::CURVE))?;
        let sum_points = self.kernel(A::MODULE, "sum_points", Some(A::CURVE))?;
        let gather = self.kernel(A::MODULE, "gather", Some(A::CURVE))?;
        let per = plan::segment_len(u64::from(n1), 17, 16);
        let mut l = n1.div_ceil(per);
        let s = &mut *self.s;
        let ones_idx = match &s.ones_idx {
            Some(b) => b,
            None => return Err(scratch_missing("classify allocated it")),
        };
        let cs = curve_scratch::<A::Coord>(&mut s.curves);
        let [la, lb] = &mut cs.lists;
        let mut src = ensure(gpu, la, 4 * l as usize)?;
        let mut dst = ensure(gpu, lb, 4 * l.div_ceil(PARTIALS_PER) as usize)?;
        // SAFETY: msm_sum_bases_<c>_bls12_381(const affine_t* bases, const
        // uint32_t* idx, uint32_t n, uint32_t per, xyzz_t* out): thread s
        // reads idx[j] for j < n1 (classify wrote n1 entries) and the bases
        // they name (indices of used variables, below bases.len(): checked
        // by the caller), and writes out[s] for s < ceil(n1 / per) = l
        // points, which `src` holds (4 coordinates each).
        unsafe {
            sum_bases
                .args()
                .buf(&bases.points)
                .buf(ones_idx)
                .arg(&n1)
                .arg(&per)
                .buf_mut(src)
                .launch(grid(u64::from(l), CURVE_BLOCK)?)?;
        }
        while l > 1 {
            let next = l.div_ceil(PARTIALS_PER);
            // SAFETY: msm_sum_points_<c>_bls12_381(const xyzz_t* in,
            // uint32_t n, uint32_t per, xyzz_t* out): reads in[0..l) (src
            // holds l points), writes out[0..next) (dst holds next points).
            unsafe {
                sum_points
                    .args()
                    .buf(src)
                    .arg(&l)
                    .arg(&PARTIALS_PER)
                    .buf_mut(dst)
                    .launch(grid(u64::from(next), CURVE_BLOCK)?)?;
            }
            l = next;
            std::mem::swap(&mut src, &mut dst);
        }
        let out = ensure(gpu, &mut cs.out, 4)?;
        let one = 1u32;
        // SAFETY: msm_gather_<c>_bls12_381(const xyzz_t* in, uint32_t n,
        // uint32_t stride, xyzz_t* out): copies in[0] (src holds >= 1 point)
        // to out[0] (out holds >= 1 point).
        unsafe {
            gather
                .args()
                .buf(src)
                .arg(&one)
                .arg(&one)
                .buf_mut(out)
                .launch(grid(1, CURVE_BLOCK)?)?;
        }
        let host = out.download()?;
        Ok(A::from_xyzz(&host[..4]))
    }

    /// Step 3: Pippenger over the m other scalars; with window multiples
    /// of the bases, in their window size and one set of buckets.
    fn pippenger<A: MsmAffine>(&mut self, bases: &DeviceBases<A>, m: u32) -> Result<A::Projective> {
        if let Some(c) = bases.multiples_of {
            let stride = u32_of(bases.len, "bases")?;
            self.clear_buckets::<A>(c, 1)?;
            self.passes::<A>(bases, m, c, false, stride)?;
            let nb32 = u32_of(plan::buckets_per_window(c) as usize, "buckets per window")?;
            let sums = self.reduce::<A>(1, nb32)?;
            self.phase("bucket reduction")?;
            return Ok(A::from_xyzz(&sums[..4]));
        }
        let c = window_for::<A>(self.config, m as usize, 1)?;
        self.clear_buckets::<A>(c, windows(c))?;
        self.passes::<A>(bases, m, c, false, 0)?;
        self.finish_buckets::<A>(c)
    }

    /// Room for the buckets of `w_all` windows of `c` bits, set to the
    /// identity.
    pub(super) fn clear_buckets<A: MsmAffine>(&mut self, c: u32, w_all: u32) -> Result<()> {
        let gpu = self.gpu;
        let total_buckets = u64::from(w_all) * plan::buckets_per_window(c);
        let cs = curve_scratch::<A::Coord>(&mut self.s.curves);
        let buckets = ensure(gpu, &mut cs.buckets, 4 * total_buckets as usize)?;
        clear(gpu, buckets, 4 * total_buckets as usize)
    }

    /// The sorting passes and bucket accumulation of the m other scalars
    /// with windows of `c` bits, into buckets cleared by the caller;
    /// with `carry`, added to what the buckets hold (the buckets of one
    /// query summed over several calls). With `fold_stride` > 0 the bases
    /// carry window multiples (window w's at w * fold_stride) and every
    /// window shares one set of buckets, so passes after the first carry.
    pub(super) fn passes<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        m: u32,
        c: u32,
        carry: bool,
        fold_stride: u32,
    ) -> Result<()> {
        let gpu = self.gpu;
        let w_all = windows(c);
        let nb = plan::buckets_per_window(c);
        let group = plan::windows_per_pass(m as usize, c, self.config.max_entries_per_pass);
        let max_entries = u64::from(m) * u64::from(group);
        // Entries and segment starts stay below 2^32 in the kernels' u32
        // arithmetic (start + per with per <= 256).
        if max_entries + 256 >= 1 << 32 {
            return Err(Groth16Error::MsmShape {
                detail: format!(
                    "{m} scalars x {group} windows per pass overflow 32-bit entry indices"
                ),
            });
        }
        let nb32 = u32_of(nb as usize, "buckets per window")?;
        let _span = tracing::debug_span!("pippenger", m, c, windows = w_all, group).entered();

        let histogram = self.kernel("msm", "histogram", None)?;
        let scatter = self.kernel("msm", scatter_op(self.config.scatter_batch), None)?;
        let accumulate =
            self.kernel(A::MODULE, self.config.accumulate.op::<A>(), Some(A::CURVE))?;
        let partials = self.kernel(A::MODULE, "accumulate_partials", Some(A::CURVE))?;

        let fold = u32::from(fold_stride > 0);
        let kg_max = if fold == 1 { nb } else { u64::from(group) * nb };
        {
            let s = &mut *self.s;
            ensure(gpu, &mut s.counts, kg_max as usize)?;
            ensure(gpu, &mut s.offsets, kg_max as usize + 1)?;
            ensure(gpu, &mut s.total, 1)?;
            ensure(gpu, &mut s.entries, max_entries as usize)?;
        }
        self.phase("pippenger setup")?;

        let mut w0 = 0;
        while w0 < w_all {
            let w1 = (w0 + group).min(w_all);
            let kg = if fold == 1 { nb32 } else { (w1 - w0) * nb32 };
            let carry = u32::from(carry || (fold == 1 && w0 > 0));
            {
                let s = &mut *self.s;
                let (Some(other), Some(counts)) = (&s.other_scalars, &mut s.counts) else {
                    return Err(scratch_missing("allocated above"));
                };
                clear(gpu, counts, kg as usize)?;
                // SAFETY: msm_histogram_bls12_381(const fr_t* scalars,
                // uint32_t m, uint32_t c, uint32_t w0, uint32_t w1, uint32_t*
                // counts, uint32_t fold): thread i < m reads scalars[i]
                // (classify wrote m canonical scalars) and increments
                // counts[(w - w0) * nb + |d| - 1] < (w1 - w0) * nb = kg, or
                // with fold counts[|d| - 1] < nb = kg; kg <= counts.len().
                unsafe {
                    histogram
                        .args()
                        .buf(other)
                        .arg(&m)
                        .arg(&c)
                        .arg(&w0)
                        .arg(&w1)
                        .buf_mut(counts)
                        .arg(&fold)
                        .launch(grid(u64::from(m), SCALAR_BLOCK)?)?;
                }
            }
            let e = self.scan(kg)?;
            self.phase("sort: histogram + scan")?;
            if e > 0 {
                {
                    let s = &mut *self.s;
                    let (Some(other), Some(idx), Some(offsets), Some(entries)) = (
                        &s.other_scalars,
                        &s.other_idx,
                        &mut s.offsets,
                        &mut s.entries,
                    ) else {
                        return Err(scratch_missing("allocated above"));
                    };
                    // SAFETY: msm_scatter_bls12_381(const fr_t* scalars,
                    // const uint32_t* idx, uint32_t m, uint32_t c, uint32_t
                    // w0, uint32_t w1, uint32_t* offsets, uint2* entries,
                    // uint32_t fold_stride): thread i < m reads scalars[i]
                    // and idx[i]; it advances offsets[key] for keys below
                    // kg (offsets holds kg + 1, keys as in the histogram)
                    // and writes 8-byte entries (u64 elements) at the
                    // claimed positions, which the exclusive scan of the
                    // same digits' histogram bounds by e <= m * group =
                    // entries.len(). With fold_stride the entries name
                    // points w * fold_stride + idx[i] < windows * len, all
                    // in the bases' buffer (made with the multiples).
                    unsafe {
                        scatter
                            .args()
                            .buf(other)
                            .buf(idx)
                            .arg(&m)
                            .arg(&c)
                            .arg(&w0)
                            .arg(&w1)
                            .buf_mut(offsets)
                            .buf_mut(entries)
                            .arg(&fold_stride)
                            .launch(grid(u64::from(m), SCALAR_BLOCK)?)?;
                    }
                }
                self.phase("sort: scatter")?;
                self.accumulate::<A>(bases, &accumulate, &partials, e, carry)?;
                self.phase("accumulate")?;
            }
            w0 = w1;
        }
        Ok(())
    }

    /// Bucket reduction and window combination of the buckets of `c`-bit
    /// windows: the MSM's result (of the other scalars).
    pub(super) fn finish_buckets<A: MsmAffine>(&mut self, c: u32) -> Result<A::Projective> {
        let w_all = windows(c);
        let nb32 = u32_of(plan::buckets_per_window(c) as usize, "buckets per window")?;
        let sums = self.reduce::<A>(w_all, nb32)?;
        self.phase("bucket reduction")?;
        // sum_w 2^(c w) S_w by Horner's rule: W * c doublings, cheaper on
        // the CPU (about 0.3 us each) than one GPU thread's (several us).
        let mut acc = A::Projective::identity();
        for w in (0..w_all as usize).rev() {
            for _ in 0..c {
                acc = acc.double();
            }
            acc += A::from_xyzz(&sums[4 * w..4 * w + 4]);
        }
        self.phase("window combination")?;
        Ok(acc)
    }

    /// Exclusive scan of counts[0..n) into offsets[0..=n]; returns the total.
    fn scan(&mut self, n: u32) -> Result<u32> {
        let gpu = self.gpu;
        let reduce = self.kernel("msm", "scan_reduce", None)?;
        let apply = self.kernel("msm", "scan_apply", None)?;
        // Level sizes: n, ceil(n / SCAN_PER), ... down to one thread's worth.
        let mut sizes = vec![n];
        while let Some(&last) = sizes.last() {
            if last <= SCAN_PER {
                break;
            }
            sizes.push(last.div_ceil(SCAN_PER));
        }
        let s = &mut *self.s;
        // scan_levels[l - 1] holds level l's values (the chunk sums of level
        // l - 1) and their exclusive scan, for l >= 1.
        for (l, &size) in sizes.iter().enumerate().skip(1) {
            let len = size as usize;
            if s.scan_levels.len() < l {
                s.scan_levels.push((
                    DeviceBuffer::alloc(gpu, len, false)?,
                    DeviceBuffer::alloc(gpu, len + 1, false)?,
                ));
            } else if s.scan_levels[l - 1].0.len() < len {
                s.scan_levels[l - 1] = (
                    DeviceBuffer::alloc(gpu, len, false)?,
                    DeviceBuffer::alloc(gpu, len + 1, false)?,
                );
            }
        }
        let (Some(counts), Some(offsets), Some(total), Some(unused)) =
            (&s.counts, &mut s.offsets, &mut s.total, &s.no_prefix)
        else {
            return Err(scratch_missing("allocated by the caller and by classify"));
        };
        // Upward: level l's values are the chunk sums of level l - 1.
        for l in 1..sizes.len() {
            let (lower, upper) = s.scan_levels.split_at_mut(l - 1);
            let input = if l == 1 { counts } else { &lower[l - 2].0 };
            let n_in = sizes[l - 1];
            // SAFETY: msm_scan_reduce_bls12_381(const uint32_t* in, uint32_t
            // n, uint32_t per, uint32_t* sums): thread t reads in[t*per ..
            // min(n, t*per + per)) (input holds at least n_in = sizes[l - 1])
            // and writes sums[t] for t < ceil(n_in / per) = sizes[l], the
            // length of level l's values buffer.
            unsafe {
                reduce
                    .args()
                    .buf(input)
                    .arg(&n_in)
                    .arg(&SCAN_PER)
                    .buf_mut(&mut upper[0].0)
                    .launch(grid(u64::from(sizes[l]), SCALAR_BLOCK)?)?;
            }
        }
        // Downward: scan each level's values, each chunk starting from the
        // scanned chunk sum one level up (none at the top level).
        for l in (0..sizes.len()).rev() {
            let threads = u64::from(sizes[l].div_ceil(SCAN_PER));
            let top = l + 1 == sizes.len();
            let has_base = u32::from(!top);
            let (lower, upper) = s.scan_levels.split_at_mut(l);
            let base: &DeviceBuffer<u32> = if top { unused } else { &upper[0].1 };
            let mut args;
            if l == 0 {
                args = apply.args();
                args.buf(counts)
                    .arg(&sizes[0])
                    .arg(&SCAN_PER)
                    .buf(base)
                    .arg(&has_base)
                    .buf_mut(offsets);
            } else {
                let (values, scanned) = &mut lower[l - 1];
                args = apply.args();
                args.buf(values)
                    .arg(&sizes[l])
                    .arg(&SCAN_PER)
                    .buf(base)
                    .arg(&has_base)
                    .buf_mut(scanned);
            }
            // SAFETY: msm_scan_apply_bls12_381(const uint32_t* in, uint32_t
            // n, uint32_t per, const uint32_t* base, uint32_t has_base,
            // uint32_t* out, uint32_t* total): thread t < ceil(n / per) reads
            // in[t*per .. min(n, ..)) (the level's values: sizes[l] of them),
            // base[t] only when has_base (the scan one level up holds
            // sizes[l + 1] + 1 = threads + 1 entries), and writes out[0..=n]
            // (the level's scan buffer holds sizes[l] + 1) and total[0].
            // Without a base the stand-in buffer is passed and never read.
            unsafe {
                args.buf_mut(total).launch(grid(threads, SCALAR_BLOCK)?)?;
            }
        }
        // The last apply (level 0) wrote the total of all counts.
        let t = total.download()?;
        Ok(t[0])
    }

    /// Bucket accumulation of one pass's e sorted entries.
    fn accumulate<A: MsmAffine>(
        &mut self,
        bases: &DeviceBases<A>,
        accumulate: &Kernel,
        partials: &Kernel,
        e: u32,
        carry: u32,
    ) -> Result<()> {
        let gpu = self.gpu;
        let chains = self.config.accumulate.chains::<A>();
        let per = match chains {
            Some(k) => plan::batch_affine_segment_len(u64::from(e), k),
            None => plan::segment_len(u64::from(e), 18, 32),
        };
        let mut l = e.div_ceil(per);
        // Threads of level 0: one per segment, or per `chains` segments.
        let threads = match chains {
            Some(k) => l.div_ceil(k),
            None => l,
        };
        // Level 1's list has l entries, level 2's ceil(l / PARTIALS_PER), and
        // the levels after alternate between the two buffers, shrinking.
        let (len0, len1) = (l as usize, l.div_ceil(PARTIALS_PER) as usize);
        let s = &mut *self.s;
        let [lk0, lk1] = &mut s.list_keys;
        let lk0 = ensure(gpu, lk0, len0)?;
        let lk1 = ensure(gpu, lk1, len1)?;
        let cs = curve_scratch::<A::Coord>(&mut s.curves);
        let [lv0, lv1] = &mut cs.lists;
        let lv0 = ensure(gpu, lv0, 4 * len0)?;
        let lv1 = ensure(gpu, lv1, 4 * len1)?;
        let (Some(entries), Some(buckets)) = (&s.entries, &mut cs.buckets) else {
            return Err(scratch_missing("allocated by the caller"));
        };
        // SAFETY: msm_accumulate_<variant>_<c>_bls12_381(const uint2*
        // entries, uint32_t e, uint32_t per, const affine_t* bases, xyzz_t*
        // buckets, uint32_t* out_keys, xyzz_t* out_vals, uint32_t carry):
        // with carry, a run's owner also reads its bucket; the segment s <
        // ceil(e / per) = l (thread s, or thread s / K in the batch-affine
        // kernels, which return for threads with s*K >= l) reads entries in
        // [s*per - 1, min(e, s*per + per)) (the scatter wrote e of them)
        // and prefetches or reads the
        // bases they name (the low 31 bits are indices of used variables,
        // below bases.len(), or with window multiples of their multiples,
        // below the points' buffer length); it writes buckets[key] for keys below the
        // total bucket count (the buffer holds all of them), and
        // out_keys[s], out_vals[s] with s < l (lk0 and lv0 hold l entries).
        unsafe {
            accumulate
                .args()
                .buf(entries)
                .arg(&e)
                .arg(&per)
                .buf(&bases.points)
                .buf_mut(buckets)
                .buf_mut(lk0)
                .buf_mut(lv0)
                .arg(&carry)
                .launch(grid(u64::from(threads), CURVE_BLOCK)?)?;
        }
        let (mut src_k, mut src_v, mut dst_k, mut dst_v) = (lk0, lv0, lk1, lv1);
        while l > 1 {
            let next = l.div_ceil(PARTIALS_PER);
            // SAFETY: msm_accumulate_partials_<c>_bls12_381(const uint32_t*
            // in_keys, const xyzz_t* in_vals, uint32_t l, uint32_t per,
            // xyzz_t* buckets, uint32_t* out_keys, xyzz_t* out_vals): thread
            // s < next reads the previous level's l entries (src), updates
            // buckets of keys found there (valid bucket indices), and writes
            // out_keys[s], out_vals[s]: dst holds at least next entries (the
            // first pass's dst holds ceil(l0 / PARTIALS_PER), and every
            // later list is shorter).
            unsafe {
                partials
                    .args()
                    .buf(src_k)
                    .buf(src_v)
                    .arg(&l)
                    .arg(&PARTIALS_PER)
                    .buf_mut(buckets)
                    .buf_mut(dst_k)
                    .buf_mut(dst_v)
                    .launch(grid(u64::from(next), CURVE_BLOCK)?)?;
            }
            l = next;
            std::mem::swap(&mut src_k, &mut dst_k);
            std::mem::swap(&mut src_v, &mut dst_v);
        }
        Ok(())
    }

    /// Bucket reduction: each window's sum_j (j + 1) B_j, downloaded as
    /// XYZZ coordinates (4 per window).
    fn reduce<A: MsmAffine>(&mut self, w_all: u32, nb: u32) -> Result<Vec<A::Coord>> {
        let gpu = self.gpu;
        let sums_k = self.kernel(A::MODULE, "bucket_sums", Some(A::CURVE))?;
        let merge = self.kernel(A::MODULE, "bucket_merge", Some(A::CURVE))?;
        let gather = self.kernel(A::MODULE, "gather", Some(A::CURVE))?;
        let fan_log2 = self.config.merge_fan_log2.clamp(1, 8);
        let merge_fan = match fan_log2 {
            1 => None,
            _ => Some(self.kernel(A::MODULE, "bucket_merge_fan", Some(A::CURVE))?),
        };
        let part_log2 = plan::part_log2(u64::from(w_all) * u64::from(nb), u64::from(nb));
        let parts = nb >> part_log2;
        let threads = u64::from(w_all) * u64::from(parts);
        let s = &mut *self.s;
        let cs = curve_scratch::<A::Coord>(&mut s.curves);
        let CurveScratch {
            buckets, t, r, out, ..
        } = cs;
        let Some(buckets) = buckets.as_ref() else {
            return Err(scratch_missing("allocated by the caller"));
        };
        let t = ensure(gpu, t, 4 * threads as usize)?;
        let r = ensure(gpu, r, 4 * threads as usize)?;
        // SAFETY: msm_bucket_sums_<c>_bls12_381(const xyzz_t* buckets,
        // uint32_t windows, uint32_t nb, uint32_t part_log2, xyzz_t* t,
        // xyzz_t* r): thread id < windows * parts reads buckets [w * nb + p *
        // 2^part_log2, + 2^part_log2) within windows * nb (parts * 2^part_log2
        // = nb), and writes t[id], r[id] (both hold windows * parts points).
        unsafe {
            sums_k
                .args()
                .buf(buckets)
                .arg(&w_all)
                .arg(&nb)
                .arg(&part_log2)
                .buf_mut(t)
                .buf_mut(r)
                .launch(grid(threads, CURVE_BLOCK)?)?;
        }
        if let Some(merge_fan) = &merge_fan {
            let mut level = 0u32;
            while (1u32 << level) < parts {
                // The last launch merges what is left: parts is a power of two.
                let f = fan_log2.min(parts.trailing_zeros() - level);
                let merges = u64::from(w_all) * u64::from(parts >> (level + f));
                // SAFETY: msm_bucket_merge_fan_<c>_bls12_381(xyzz_t* t,
                // xyzz_t* r, uint32_t windows, uint32_t parts, uint32_t
                // level, uint32_t fan_log2, uint32_t part_log2): thread id <
                // windows * (parts >> (level + f)) reads and writes entries
                // a + i * 2^level < (w + 1) * parts (i < 2^f) of t and r,
                // which hold windows * parts points.
                unsafe {
                    merge_fan
                        .args()
                        .buf_mut(t)
                        .buf_mut(r)
                        .arg(&w_all)
                        .arg(&parts)
                        .arg(&level)
                        .arg(&f)
                        .arg(&part_log2)
                        .launch(grid(merges, CURVE_BLOCK)?)?;
                }
                level += f;
            }
        }
        // Pairwise merges, one level a launch, unless the fan merged all.
        let mut level = if merge_fan.is_some() {
            parts.trailing_zeros()
        } else {
            0
        };
        while (1u32 << level) < parts {
            let merges = u64::from(w_all) * u64::from(parts >> (level + 1));
            // SAFETY: msm_bucket_merge_<c>_bls12_381(xyzz_t* t, xyzz_t* r,
            // uint32_t windows, uint32_t parts, uint32_t level, uint32_t
            // part_log2): thread id < windows * (parts >> (level + 1)) reads
            // and writes entries a < b < (w + 1) * parts of t and r, which
            // hold windows * parts points.
            unsafe {
                merge
                    .args()
                    .buf_mut(t)
                    .buf_mut(r)
                    .arg(&w_all)
                    .arg(&parts)
                    .arg(&level)
                    .arg(&part_log2)
                    .launch(grid(merges, CURVE_BLOCK)?)?;
            }
            level += 1;
        }
        let out = ensure(gpu, out, 4 * w_all as usize)?;
        // SAFETY: msm_gather_<c>_bls12_381(const xyzz_t* in, uint32_t n,
        // uint32_t stride, xyzz_t* out): thread i < windows copies in[i *
        // parts] (t holds windows * parts points) to out[i] (out holds at
        // least windows points).
        unsafe {
            gather
                .args()
                .buf(t)
                .arg(&w_all)
                .arg(&parts)
                .buf_mut(out)
                .launch(grid(u64::from(w_all), CURVE_BLOCK)?)?;
        }
        let mut host = out.download()?;
        host.truncate(4 * w_all as usize);
        Ok(host)
    }
}
