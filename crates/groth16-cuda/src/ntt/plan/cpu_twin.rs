//! The CPU twin of the NTT kernels: a plan's launches run block by block
//! with the kernels' own index arithmetic (`kernels/ntt/ntt.cuh`), for
//! tests.

use blstrs::Scalar;
use ff::Field;

use super::tables::table_pow;
use super::{
    BitrevParams, DomainPlan, LOG_BLOCK, Launch, POST_BITREV_SCALE, POST_SCALE_REV, PRE_AB_MINUS_C,
    PassParams, SCALE_CONST, SCALE_DST, SCALE_SRC, SplitTable, Stages, Vector, j_major,
};

impl DomainPlan {
    /// Runs `launches` on the CPU with the kernels' index arithmetic, block
    /// by block; `tables` are the values of [`DomainPlan::tables`]. The CPU
    /// twin of the kernels, for tests.
    pub fn run_on_cpu(
        &self,
        launches: &[Launch],
        tables: &[Vec<Scalar>],
        vectors: [&mut [Scalar]; 3],
    ) {
        self.run_on_cpu_with(Stages::Radix2, launches, tables, vectors);
    }

    /// [`DomainPlan::run_on_cpu`] with the passes' stages run as `stages`
    /// (the twin of the kernel variant that runs them so).
    pub fn run_on_cpu_with(
        &self,
        stages: Stages,
        launches: &[Launch],
        tables: &[Vec<Scalar>],
        vectors: [&mut [Scalar]; 3],
    ) {
        let [a, b, c] = vectors;
        for launch in launches {
            match *launch {
                Launch::Pass {
                    dit,
                    grid,
                    x,
                    out,
                    radix,
                    tw,
                    sc,
                    params,
                } => {
                    let t = |s: SplitTable| (&tables[s.lo][..], &tables[s.hi][..]);
                    // The pointwise step reads B and C while it writes A;
                    // the fused bit-reversal writes B from A (the plan never
                    // has one pass do both).
                    let (x, pre, out): (&mut [Scalar], _, _) = match (x, out) {
                        (Vector::A, Vector::B) if params.post == POST_BITREV_SCALE => {
                            assert_ne!(
                                params.pre, PRE_AB_MINUS_C,
                                "a pass reading and scattering into B"
                            );
                            (&mut *a, None, Some(&mut *b))
                        }
                        (Vector::A, _) if params.pre == PRE_AB_MINUS_C => {
                            (&mut *a, Some((&*b, &*c)), None)
                        }
                        (Vector::A, _) => (&mut *a, None, None),
                        (Vector::B, _) => (&mut *b, None, None),
                        (Vector::C, _) => (&mut *c, None, None),
                    };
                    cpu_pass(
                        dit,
                        grid,
                        x,
                        pre,
                        out,
                        &tables[radix],
                        t(tw),
                        t(sc),
                        &params,
                        stages,
                    );
                }
                Launch::Bitrev { x, sc, params, .. } => {
                    let x: &mut [Scalar] = match x {
                        Vector::A => &mut *a,
                        Vector::B => &mut *b,
                        Vector::C => &mut *c,
                    };
                    cpu_bitrev(x, (&tables[sc.lo], &tables[sc.hi]), &params);
                }
            }
        }
    }
}

fn rev(x: u32, bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (32 - bits)
    }
}

fn factor(p: &PassParams, tw: (&[Scalar], &[Scalar]), col: u32, row: u32) -> Option<Scalar> {
    let mut e = col * rev(row, p.bits);
    if e == 0 {
        return None;
    }
    if p.inverse != 0 {
        e = (1 << p.tw_bits) - e;
    }
    Some(table_pow(tw, p.tw_l, e))
}

/// The stage steps of a pass of `bits` stages, in order: `(st, false)` one
/// radix-2 stage st, `(st, true)` the pair st, st + 1 (`ntt_pass`'s loops).
fn cpu_stages(stages: Stages, dit: bool, bits: u32) -> Vec<(u32, bool)> {
    match stages {
        Stages::Radix2 => (0..bits)
            .map(|i| (if dit { i } else { bits - 1 - i }, false))
            .collect(),
        Stages::Radix4 | Stages::Radix4Plain => {
            let odd = bits & 1;
            let mut out = Vec::new();
            if dit && odd == 1 {
                out.push((0, false));
            }
            let mut i = 0;
            while i + 1 < bits {
                out.push((if dit { odd + i } else { bits - 2 - i }, true));
                i += 2;
            }
            if !dit && odd == 1 {
                out.push((0, false));
            }
            out
        }
    }
}

/// `ntt_stage_twiddle`: omega_{2^(st+1)}^j (or its inverse) from the radix table.
fn stage_twiddle(radix: &[Scalar], j: u32, st: u32, inverse: bool) -> Scalar {
    let mut e = j << (LOG_BLOCK - 1 - st);
    if inverse {
        e = ((1 << LOG_BLOCK) - e) & ((1 << LOG_BLOCK) - 1);
    }
    radix[e as usize]
}

/// `ntt_quad`: the shared-memory index of quad q's first row for the stage
/// pair (st, st + 1) of a pass of `bits` stages, and the row's bits below st;
/// j first where `jm` (the kernels with swizzled slots) and [`j_major`] say
/// so.
fn quad(q: u32, st: u32, lc: u32, bits: u32, jm: bool) -> (usize, u32) {
    let col = q & ((1 << lc) - 1);
    let qq = q >> lc;
    let (hi, j) = if jm && j_major(st, lc, bits) {
        let hib = bits - 2 - st;
        (qq & ((1 << hib) - 1), qq >> hib)
    } else {
        (qq >> st, qq & ((1 << st) - 1))
    };
    let row = (hi << (st + 2)) | j;
    (((row << lc) | col) as usize, j)
}

/// One radix-2 stage over the block (`ntt_stage`).
fn cpu_stage(sm: &mut [Scalar], radix: &[Scalar], dit: bool, st: u32, lc: u32, inverse: bool) {
    let n = sm.len() as u32;
    for q in 0..n / 2 {
        let col = q & ((1 << lc) - 1);
        let qq = q >> lc;
        let j = qq & ((1 << st) - 1);
        let row = ((qq >> st) << (st + 1)) | j;
        let i0 = ((row << lc) | col) as usize;
        let i1 = i0 + (1usize << (st + lc));
        let w = stage_twiddle(radix, j, st, inverse);
        let (u, v) = (sm[i0], sm[i1]);
        if dit {
            let v = if st != 0 { v * w } else { v };
            sm[i0] = u + v;
            sm[i1] = u - v;
        } else {
            let d = u - v;
            sm[i0] = u + v;
            sm[i1] = if st != 0 { d * w } else { d };
        }
    }
}

/// Stages st and st + 1 on quads of rows (`ntt_stage_pair`). A quad with j
/// = 0 (every quad in the pair (0, 1)) has twiddles of 1 in stage st and in
/// stage st + 1's first pair: not multiplied, as in the kernel.
fn cpu_stage_pair(
    sm: &mut [Scalar],
    radix: &[Scalar],
    dit: bool,
    st: u32,
    p: &PassParams,
    jm: bool,
    inverse: bool,
) {
    let (lc, bits) = (p.log_cols, p.bits);
    let n = sm.len() as u32;
    let h = 1usize << (st + lc);
    for q in 0..n / 4 {
        let (i0, j) = quad(q, st, lc, bits, jm);
        let (x0, mut x1, x2, mut x3) = (sm[i0], sm[i0 + h], sm[i0 + 2 * h], sm[i0 + 3 * h]);
        let tw = j != 0;
        let wa = stage_twiddle(radix, j, st + 1, inverse);
        let wb = stage_twiddle(radix, j + (1 << st), st + 1, inverse);
        if dit {
            if tw {
                let w = stage_twiddle(radix, j, st, inverse);
                x1 *= w;
                x3 *= w;
            }
            let (y0, y1) = (x0 + x1, x0 - x1);
            let y2 = if tw { (x2 + x3) * wa } else { x2 + x3 };
            let y3 = (x2 - x3) * wb;
            sm[i0] = y0 + y2;
            sm[i0 + h] = y1 + y3;
            sm[i0 + 2 * h] = y0 - y2;
            sm[i0 + 3 * h] = y1 - y3;
        } else {
            let y0 = x0 + x2;
            let y2 = if tw { (x0 - x2) * wa } else { x0 - x2 };
            let (y1, y3) = (x1 + x3, (x1 - x3) * wb);
            let (mut d0, mut d1) = (y0 - y1, y2 - y3);
            if tw {
                let w = stage_twiddle(radix, j, st, inverse);
                d0 *= w;
                d1 *= w;
            }
            sm[i0] = y0 + y1;
            sm[i0 + h] = d0;
            sm[i0 + 2 * h] = y2 + y3;
            sm[i0 + 3 * h] = d1;
        }
    }
}

/// `ntt_pass` of kernels/ntt/ntt.cuh, block by block, with its stages run
/// as `stages`.
#[allow(clippy::too_many_arguments)]
fn cpu_pass(
    dit: bool,
    grid: u32,
    x: &mut [Scalar],
    pre: Option<(&[Scalar], &[Scalar])>,
    mut out: Option<&mut [Scalar]>,
    radix: &[Scalar],
    tw: (&[Scalar], &[Scalar]),
    sc: (&[Scalar], &[Scalar]),
    p: &PassParams,
    stages: Stages,
) {
    let (lo, lc) = (p.lo, p.log_cols);
    let n = 1u32 << (p.bits + lc);
    let col_mask = (1u32 << lc) - 1;
    let col_blocks_log = lo - lc;
    let steps = cpu_stages(stages, dit, p.bits);
    let jm = stages == Stages::Radix4;
    let inverse = p.inverse != 0;
    let mut sm = vec![Scalar::ZERO; n as usize];
    for block in 0..grid {
        let c0 = (block & ((1 << col_blocks_log) - 1)) << lc;
        let base = ((block >> col_blocks_log) << (lo + p.bits)) + c0;
        for l in 0..n {
            let (row, col) = (l >> lc, l & col_mask);
            let g = (base + (row << lo) + col) as usize;
            let mut v = x[g];
            if let Some((b, c)) = pre {
                v = v * b[g] - c[g];
            }
            if dit
                && p.tw_bits != 0
                && let Some(f) = factor(p, tw, c0 + col, row)
            {
                v *= f;
            }
            sm[l as usize] = v;
        }
        for &(st, pair) in &steps {
            if pair {
                cpu_stage_pair(&mut sm, radix, dit, st, p, jm, inverse);
            } else {
                cpu_stage(&mut sm, radix, dit, st, lc, inverse);
            }
        }
        for l in 0..n {
            let (row, col) = (l >> lc, l & col_mask);
            let g = base + (row << lo) + col;
            let mut v = sm[l as usize];
            if !dit
                && p.tw_bits != 0
                && let Some(f) = factor(p, tw, c0 + col, row)
            {
                v *= f;
            }
            if p.post == POST_SCALE_REV {
                v *= table_pow(sc, p.sc_l, rev(g, p.log_m));
            }
            if p.post == POST_BITREV_SCALE {
                let i = rev(g, p.log_m);
                let out = out
                    .as_deref_mut()
                    .expect("POST_BITREV_SCALE writes another vector");
                out[i as usize] = v * table_pow(sc, p.sc_l, i);
            } else {
                x[g as usize] = v;
            }
        }
    }
}

/// `ntt_bitrev` of kernels/ntt/ntt.cuh.
fn cpu_bitrev(x: &mut [Scalar], sc: (&[Scalar], &[Scalar]), p: &BitrevParams) {
    for i in 0..1u32 << p.log_m {
        let r = rev(i, p.log_m);
        if i > r {
            continue;
        }
        let (mut xi, mut xr) = (x[i as usize], x[r as usize]);
        match p.scale {
            SCALE_CONST => {
                xi *= sc.0[0];
                xr *= sc.0[0];
            }
            SCALE_DST => {
                xr *= table_pow(sc, p.sc_l, i);
                xi *= table_pow(sc, p.sc_l, r);
            }
            SCALE_SRC => {
                xr *= table_pow(sc, p.sc_l, r);
                xi *= table_pow(sc, p.sc_l, i);
            }
            _ => {}
        }
        x[i as usize] = xr;
        x[r as usize] = xi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::compute_h;
    use crate::ntt::TableLayout;
    use crate::ntt::plan::{MAX_SINGLE_TABLE_LOG, Op, TableSpec};
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn random(n: usize, seed: u64) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut rng)).collect()
    }

    fn run_with(
        stages: Stages,
        plan: &DomainPlan,
        op: Op,
        a: &mut [Scalar],
        b: &mut [Scalar],
        c: &mut [Scalar],
    ) {
        let tables: Vec<Vec<Scalar>> = plan.tables().iter().map(TableSpec::values).collect();
        plan.run_on_cpu_with(stages, &plan.launches(op), &tables, [a, b, c]);
    }

    /// The CPU twin of the kernels computes what bellperson computes, for
    /// one-pass, two-pass and three-pass sizes (three passes start at 2^20,
    /// which is too slow here unoptimised, so MAX_UPPER_BITS is what keeps
    /// 2^11..2^19 at two).
    #[test]
    fn cpu_twin_matches_bellperson() {
        twin_matches_bellperson(Stages::Radix2);
    }

    /// The same with the stages in pairs (the `_r4` kernels), over passes of
    /// both parities of bits, so the lone stage 0 runs first in DIT and last
    /// in DIF.
    #[test]
    fn cpu_twin_radix4_matches_bellperson() {
        twin_matches_bellperson(Stages::Radix4);
    }

    /// And in the usual quad order (the kernel without the swizzle).
    #[test]
    fn cpu_twin_radix4_plain_matches_bellperson() {
        twin_matches_bellperson(Stages::Radix4Plain);
    }

    fn twin_matches_bellperson(stages: Stages) {
        let worker = Worker::new();
        for log2 in (1..=12).chain([15, 19]) {
            let m = 1usize << log2;
            let plan = DomainPlan::new(log2).unwrap();
            let x = random(m, u64::from(log2));
            let mut zeros = vec![Scalar::ZERO; m];
            let mut zeros2 = zeros.clone();
            type Step = fn(&mut EvaluationDomain<Scalar>, &Worker);
            let ops: [(Op, Step); 4] = [
                (Op::Fft, |d, w| d.fft(w, &mut None).unwrap()),
                (Op::Ifft, |d, w| d.ifft(w, &mut None).unwrap()),
                (Op::CosetFft, |d, w| d.coset_fft(w, &mut None).unwrap()),
                (Op::IcosetFft, |d, w| d.icoset_fft(w, &mut None).unwrap()),
            ];
            for (op, step) in ops {
                let mut want = EvaluationDomain::from_coeffs(x.clone()).unwrap();
                step(&mut want, &worker);
                let mut got = x.clone();
                run_with(stages, &plan, op, &mut got, &mut zeros, &mut zeros2);
                assert!(got == want.as_ref(), "{op:?} at 2^{log2}, {stages:?}");
            }
            check_h_with(stages, &plan, x);
        }
    }

    fn check_h(plan: &DomainPlan, a: Vec<Scalar>) {
        check_h_with(Stages::Radix2, plan, a);
    }

    fn check_h_with(stages: Stages, plan: &DomainPlan, a: Vec<Scalar>) {
        let run = |plan: &DomainPlan, op, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]| {
            run_with(stages, plan, op, a, b, c)
        };
        let m = a.len();
        let (mut a, mut b, mut c) = (a, random(m, 100), random(m, 200));
        let want = compute_h(&a, &b, &c).unwrap();
        // In two buffers: each vector to the coset alone, then the pointwise
        // step (the GPU's `ntt_pointwise`), then the end.
        let mut two = a.clone();
        let mut other = b.clone();
        let mut none = vec![Scalar::ZERO; 1];
        let mut none2 = none.clone();
        run(plan, Op::HCoset, &mut two, &mut none, &mut none2);
        run(plan, Op::HCoset, &mut other, &mut none, &mut none2);
        two.iter_mut().zip(&other).for_each(|(x, y)| *x *= y);
        other.copy_from_slice(&c);
        run(plan, Op::HCoset, &mut other, &mut none, &mut none2);
        two.iter_mut().zip(&other).for_each(|(x, y)| *x -= y);
        // The other buffer is free now; the fused bit-reversal writes it.
        run(plan, Op::HFinish, &mut two, &mut other, &mut none2);
        let h = if plan.h_result() == Vector::B {
            &other
        } else {
            &two
        };
        assert!(
            h[..m - 1] == want[..],
            "H in two buffers at 2^{}",
            plan.log2()
        );
        // Fused, in three.
        run(plan, Op::H, &mut a, &mut b, &mut c);
        let h = if plan.h_result() == Vector::B { &b } else { &a };
        assert!(h[..m - 1] == want[..], "H at 2^{}", plan.log2());
    }

    /// H with the bit-reversal fused into the last pass: the same h (in B),
    /// one launch and 2m element moves fewer, for every stage order and
    /// table layout (small, whole, and either part whole); a one-pass
    /// domain keeps the bit-reversal launch.
    #[test]
    fn fused_bitrev_gives_the_same_h() {
        let bytes = |p: &DomainPlan| -> u64 { p.launches(Op::H).iter().map(Launch::bytes).sum() };
        let muls =
            |p: &DomainPlan| -> u64 { p.launches(Op::H).iter().map(Launch::multiplications).sum() };
        for log2 in [11, 13, 19] {
            // The partly whole layouts at 2^19 only, where the top pass's
            // factor table is past the single-table bound.
            let partly: &[TableLayout] = if log2 == 19 {
                &[TableLayout::WHOLE_FACTORS, TableLayout::WHOLE_SCALES]
            } else {
                &[]
            };
            for &layout in [TableLayout::SMALL, TableLayout::WHOLE]
                .iter()
                .chain(partly)
            {
                let plain = DomainPlan::with_layout(log2, layout).unwrap();
                let fused = plain.clone().with_fused_bitrev(true);
                assert_eq!(fused.h_result(), Vector::B);
                let (hp, hf) = (plain.launches(Op::H), fused.launches(Op::H));
                assert_eq!(hf.len() + 1, hp.len());
                assert!(!hf.iter().any(|l| matches!(l, Launch::Bitrev { .. })));
                assert_eq!(bytes(&plain) - bytes(&fused), 64 << log2);
                assert_eq!(muls(&plain), muls(&fused));
                assert!(hf.iter().all(|l| fused.is_planned(l)));
                assert!(!plain.is_planned(hf.last().unwrap()));
                // The stage orders read the tables alike: the partly whole
                // layouts with one.
                let orders: &[Stages] = if partly.contains(&layout) {
                    &[Stages::Radix4]
                } else {
                    &[Stages::Radix2, Stages::Radix4]
                };
                for &stages in orders {
                    check_h_with(stages, &fused, random(1 << log2, u64::from(log2) + 7));
                }
            }
        }
        let small = DomainPlan::new(9).unwrap().with_fused_bitrev(true);
        assert_eq!(small.h_result(), Vector::A);
        check_h(&small, random(1 << 9, 9));
    }

    /// DIT with the inverse root (planned, though no Op uses it yet): a
    /// bit-reversal with the 1/m scaling and an inverse DIT is ifft.
    #[test]
    fn cpu_twin_inverse_dit_is_ifft() {
        let worker = Worker::new();
        for log2 in [1, 6, 10, 13] {
            let plan = DomainPlan::new(log2).unwrap();
            let x = random(1 << log2, 300 + u64::from(log2));
            let mut want = EvaluationDomain::from_coeffs(x.clone()).unwrap();
            want.ifft(&worker, &mut None).unwrap();
            let mut launches = vec![plan.bitrev(Vector::A, SCALE_CONST, plan.minv)];
            launches.extend(plan.dit(Vector::A, true));
            assert!(launches.iter().all(|l| plan.is_planned(l)));
            let tables: Vec<Vec<Scalar>> = plan.tables().iter().map(TableSpec::values).collect();
            let mut got = x;
            let (mut b, mut c) = (vec![Scalar::ZERO; 1], vec![Scalar::ZERO; 1]);
            plan.run_on_cpu(&launches, &tables, [&mut got, &mut b, &mut c]);
            assert!(got == want.as_ref(), "2^{log2}");
        }
    }

    /// Three passes, the top one with a split factor table.
    #[test]
    fn cpu_twin_h_three_passes() {
        let plan = DomainPlan::new(20).unwrap();
        assert_eq!(plan.passes().len(), 3);
        check_h(&plan, random(1 << 20, 20));
    }

    /// Radix-4 stage steps are the radix-2 stages in the same order, paired.
    #[test]
    fn stage_pairs_run_every_stage_once_in_order() {
        for bits in 1..=LOG_BLOCK {
            for dit in [false, true] {
                let flat: Vec<u32> = cpu_stages(Stages::Radix4, dit, bits)
                    .into_iter()
                    .flat_map(|(st, pair)| match (pair, dit) {
                        (false, _) => vec![st],
                        (true, true) => vec![st, st + 1],
                        (true, false) => vec![st + 1, st],
                    })
                    .collect();
                let want: Vec<u32> = cpu_stages(Stages::Radix2, dit, bits)
                    .into_iter()
                    .map(|(st, _)| st)
                    .collect();
                assert_eq!(flat, want, "bits {bits}, dit {dit}");
                let pairs = cpu_stages(Stages::Radix4, dit, bits)
                    .iter()
                    .filter(|s| s.1)
                    .count();
                assert_eq!(pairs as u32, bits / 2);
            }
        }
    }

    /// The cost model with stage pairs: a quarter multiplication an
    /// element fewer in each pass of an even number of bits (the pair (0,
    /// 1)), and 3 * 2^-(st + 2) fewer for each pair at st >= 1 numbered j
    /// first. At 2^26 (passes of 10, 8 and 8 bits, each with a j-first pair
    /// at st = 2; seven transforms) H's 110.5 multiplications an element
    /// with small tables become 105.25 with the pair (0, 1) and 101.3125
    /// with the j-first pairs too.
    #[test]
    fn stage_pairs_skip_stage_one_first_twiddle() {
        // 14 and 20 have passes over 32 or more columns (5 and 4 bits).
        for log2 in [11, 14, 19, 20, 24, 26, 27] {
            let plan = DomainPlan::with_layout(log2, TableLayout::SMALL).unwrap();
            let launches = plan.launches(Op::H);
            let m = 1u64 << log2;
            let radix2: u64 = launches.iter().map(Launch::multiplications).sum();
            let pairs: u64 = launches
                .iter()
                .map(|l| l.multiplications_with(Stages::Radix4))
                .sum();
            // Every pass's quads, counted one by one with the kernel's
            // mapping: a quad skips three multiplications where its whole
            // warp of 32 consecutive quads has j = 0.
            let mut skipped = 0u64;
            for l in &launches {
                let Launch::Pass {
                    params: p, grid, ..
                } = l
                else {
                    continue;
                };
                let quads = 1u32 << (p.bits + p.log_cols - 2);
                let radix4 = cpu_stages(Stages::Radix4, true, p.bits);
                for &(st, pair) in &radix4 {
                    if !pair || st == 0 {
                        continue;
                    }
                    for w in (0..quads).step_by(32) {
                        let end = (w + 32).min(quads);
                        if (w..end).all(|q| quad(q, st, p.log_cols, p.bits, true).1 == 0) {
                            skipped += 3 * u64::from(end - w) * u64::from(*grid);
                        }
                    }
                }
            }
            let even = launches
                .iter()
                .filter(|l| matches!(l, Launch::Pass { params, .. } if params.bits % 2 == 0))
                .count() as u64;
            assert_eq!(radix2 - pairs, even * m / 4 + skipped, "2^{log2}");
            let per = |muls: u64| muls as f64 / m as f64;
            if log2 == 26 {
                assert_eq!(
                    plan.passes().iter().map(|p| p.bits).collect::<Vec<_>>(),
                    [10, 8, 8]
                );
                assert_eq!((per(radix2), per(pairs)), (110.5, 101.3125));
            }
            if log2 >= 24 {
                assert!(skipped > 0, "2^{log2}: no j-first pair skipped anything");
            }
            for l in &launches {
                assert_eq!(l.multiplications_with(Stages::Radix2), l.multiplications());
            }
        }
    }

    /// A quad's butterflies are exactly the radix-2 butterflies of its two
    /// stages, with the same twiddle indices: every pair of each stage once.
    /// Where the pair is numbered j first, every warp of 32 consecutive
    /// quads has one j, and the warp's four accesses (one per row of its
    /// quads) each meet at most two words in a shared-memory bank.
    #[test]
    fn quads_hold_the_butterflies_of_both_stages() {
        for (bits, lc) in [(2, 0), (3, 1), (8, 2), (9, 1), (10, 0), (7, 3), (6, 4)] {
            let n = 1u32 << (bits + lc);
            for st in 0..bits - 1 {
                // Radix-2: (i0, i1) -> j, per stage.
                let pairs = |stage: u32| {
                    let mut v: Vec<(usize, usize, u32)> = (0..n / 2)
                        .map(|q| {
                            let col = q & ((1 << lc) - 1);
                            let qq = q >> lc;
                            let j = qq & ((1 << stage) - 1);
                            let row = ((qq >> stage) << (stage + 1)) | j;
                            let i0 = ((row << lc) | col) as usize;
                            (i0, i0 + (1usize << (stage + lc)), j)
                        })
                        .collect();
                    v.sort_unstable();
                    v
                };
                let h = 1usize << (st + lc);
                let (mut low, mut high) = (Vec::new(), Vec::new());
                for q in 0..n / 4 {
                    let (i0, j) = quad(q, st, lc, bits, true);
                    assert!(i0 + 3 * h < n as usize);
                    low.push((i0, i0 + h, j));
                    low.push((i0 + 2 * h, i0 + 3 * h, j));
                    high.push((i0, i0 + 2 * h, j));
                    high.push((i0 + h, i0 + 3 * h, j + (1 << st)));
                }
                if st == 0 {
                    // The pair (0, 1) that skips stage 1's twiddle of index
                    // 0 in every quad: each quad's j is 0.
                    assert!(low.iter().all(|&(_, _, j)| j == 0), "bits {bits}, lc {lc}");
                }
                if j_major(st, lc, bits) {
                    for w in (0..n / 4).step_by(32) {
                        let warp: Vec<(usize, u32)> =
                            (w..w + 32).map(|q| quad(q, st, lc, bits, true)).collect();
                        assert!(warp.iter().all(|&(_, j)| j == warp[0].1));
                        for k in 0..4 {
                            let mut banks = std::collections::HashMap::new();
                            for &(i0, _) in &warp {
                                let s = super::super::slot((i0 + k * h) as u32, lc);
                                banks.entry(s % 32).or_insert_with(Vec::new).push(s);
                            }
                            let worst = banks.values().map(Vec::len).max().unwrap();
                            assert!(worst <= 2, "bits {bits}, lc {lc}, st {st}: {worst}-way");
                        }
                    }
                }
                low.sort_unstable();
                high.sort_unstable();
                assert_eq!(low, pairs(st), "bits {bits}, lc {lc}, stage {st}");
                assert_eq!(
                    high,
                    pairs(st + 1),
                    "bits {bits}, lc {lc}, stage {}",
                    st + 1
                );
            }
        }
    }

    /// With whole tables the top pass reads its factor from one table
    /// (2^log2 entries), and so do H's scalings: the same H with one
    /// multiplication an element fewer in each, in both stage orders. Small
    /// domains get whole scaling tables only when asked.
    #[test]
    fn single_factor_table_gives_the_same_h() {
        let log2 = 19;
        let split = DomainPlan::new(log2).unwrap();
        let single = DomainPlan::with_layout(log2, TableLayout::WHOLE).unwrap();
        assert!(
            split
                .tables()
                .iter()
                .all(|t| t.log_len <= MAX_SINGLE_TABLE_LOG)
        );
        assert!(single.tables().iter().any(|t| t.log_len == log2));
        let muls =
            |p: &DomainPlan| -> u64 { p.launches(Op::H).iter().map(Launch::multiplications).sum() };
        // Seven top passes, three coset scalings, one final scaling.
        assert_eq!(muls(&split) - muls(&single), 11 << log2);
        assert!(single.launches(Op::H).iter().all(|l| single.is_planned(l)));
        let a = random(1 << log2, 19);
        check_h_with(Stages::Radix2, &single, a.clone());
        check_h_with(Stages::Radix4, &single, a);
        let small = DomainPlan::new(8).unwrap();
        let whole = DomainPlan::with_layout(8, TableLayout::WHOLE).unwrap();
        assert_eq!(muls(&small) - muls(&whole), 4 << 8);
        check_h_with(Stages::Radix4, &whole, random(1 << 8, 8));
    }
}
