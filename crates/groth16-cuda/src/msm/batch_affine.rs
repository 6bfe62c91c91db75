//! The CPU twin of the batch-affine bucket accumulation
//! (kernels/msm/pippenger.cuh, `msm_accumulate_ba`), step for step: the
//! same segments, the same order of entries and additions, the same
//! outputs. Level 0 of bucket accumulation over the sorted (bucket, point)
//! list: thread t runs segments t*K .. t*K + K - 1 side by side, each with
//! its running sum in affine coordinates; a step gives every unfinished
//! segment at most one addition that needs a division, and the step's
//! denominators share one inversion (Montgomery's trick).

use ff::Field;
use group::Group;

use super::MsmAffine;

/// The key of no bucket (`MSM_NO_KEY`): past a segment's end.
const NO_KEY: u32 = u32::MAX;
/// The sign bit of an entry's base index (`MSM_NEG_BIT`): the digit was
/// negative, add -P.
const NEG_BIT: u32 = 1 << 31;

/// What a segment's pending addition is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    /// acc + p with acc.x != p.x: denominator p.x - acc.x.
    Add,
    /// acc + acc: denominator 2 acc.y.
    Double,
}

/// One segment's state: the kernel's local-memory slot.
#[derive(Clone, Copy)]
struct Slot<F> {
    /// The next entry.
    pos: u32,
    /// The key of the run being summed; [`NO_KEY`] once the segment is done.
    cur: u32,
    /// The segment owns the run (it holds the run's first entry).
    owned: bool,
    /// The running sum is the identity (acc is then meaningless).
    empty: bool,
    acc: [F; 2],
    pending: Pending,
    /// The point to add (for [`Pending::Add`]).
    p: [F; 2],
    /// The product of the step's earlier denominators.
    pre: F,
}

/// Level 0 of the batch-affine bucket accumulation over `entries` (each
/// (key, base index | [`NEG_BIT`] for -P), sorted by key), in segments of
/// `per` entries, `chains` segments a thread. Owned runs are written to
/// `buckets[key]` (added to it with `carry`); returns the next level's list:
/// for each segment its first key and, unless the segment owns that run,
/// the sum of the run's part in it (the identity if it does).
///
/// Panics when an entry names a base or bucket out of range, or `per` or
/// `chains` is 0: the device code's inputs are valid by construction.
pub fn accumulate_batch_affine_cpu<A: MsmAffine>(
    entries: &[(u32, u32)],
    bases: &[A],
    per: u32,
    chains: u32,
    buckets: &mut [A::Projective],
    carry: bool,
) -> (Vec<u32>, Vec<A::Projective>) {
    assert!(per > 0 && chains > 0, "per and chains must be positive");
    let e = u32::try_from(entries.len()).expect("at most 2^32 - 1 entries");
    let l = e.div_ceil(per);
    let mut out_keys = vec![NO_KEY; l as usize];
    let mut out_vals: Vec<Option<A::Projective>> = vec![None; l as usize];
    let zero = A::Coord::ZERO;
    let affine = |p: [A::Coord; 2]| A::from_xyzz(&[p[0], p[1], A::Coord::ONE, A::Coord::ONE]);
    for t in 0..l.div_ceil(chains) {
        let first = t * chains;
        let mut slots: Vec<Slot<A::Coord>> = (0..chains)
            .map(|j| {
                let s = first + j;
                let mut slot = Slot {
                    pos: 0,
                    cur: NO_KEY,
                    owned: false,
                    empty: true,
                    acc: [zero; 2],
                    pending: Pending::None,
                    p: [zero; 2],
                    pre: zero,
                };
                if s < l {
                    let start = s * per;
                    let k = entries[start as usize].0;
                    slot.owned = start == 0 || entries[start as usize - 1].0 != k;
                    out_keys[s as usize] = k;
                    if slot.owned {
                        out_vals[s as usize] = Some(A::Projective::identity());
                    }
                    slot.cur = k;
                    slot.pos = start;
                }
                slot
            })
            .collect();
        loop {
            // Forward: each unfinished segment consumes entries up to its
            // next addition with a denominator, or to its end.
            let mut prod = A::Coord::ONE;
            let mut any = false;
            for (j, slot) in slots.iter_mut().enumerate() {
                if slot.cur == NO_KEY {
                    continue;
                }
                let s = first + j as u32;
                let end = (s * per + per).min(e);
                let d = loop {
                    let (key, base) = if slot.pos < end {
                        entries[slot.pos as usize]
                    } else {
                        (NO_KEY, 0)
                    };
                    if key != slot.cur {
                        // The run of slot.cur ends here.
                        let sum = if slot.empty {
                            A::Projective::identity()
                        } else {
                            affine(slot.acc)
                        };
                        if slot.owned {
                            let b = &mut buckets[slot.cur as usize];
                            *b = if carry { *b + sum } else { sum };
                        } else {
                            out_vals[s as usize] = Some(sum);
                        }
                        slot.owned = true;
                        slot.empty = true;
                        slot.cur = key;
                        if key == NO_KEY {
                            break None;
                        }
                    }
                    slot.pos += 1;
                    let [x, mut y] = bases[(base & !NEG_BIT) as usize].xy();
                    if base & NEG_BIT != 0 {
                        y = -y; // the identity (0, 0) stays itself
                    }
                    if bool::from(x.is_zero()) && bool::from(y.is_zero()) {
                        continue;
                    }
                    let a = slot.acc;
                    if slot.empty {
                        slot.acc = [x, y];
                        slot.empty = false;
                    } else if x != a[0] {
                        slot.p = [x, y];
                        slot.pending = Pending::Add;
                        break Some(x - a[0]);
                    } else if y == a[1] && !bool::from(a[1].is_zero()) {
                        slot.pending = Pending::Double;
                        break Some(a[1].double());
                    } else {
                        slot.empty = true; // P + (-P)
                    }
                };
                if let Some(d) = d {
                    slot.pre = prod;
                    prod *= d;
                    any = true;
                }
            }
            if !any {
                break;
            }
            // Backward: inv is 1 / (d_0 ... d_j) on entering slot j.
            let mut inv = prod.invert().expect("denominators are never zero");
            for slot in slots.iter_mut().rev() {
                if slot.pending == Pending::None {
                    continue;
                }
                let [ax, ay] = slot.acc;
                let dinv = inv * slot.pre;
                let (num, x2) = if slot.pending == Pending::Add {
                    inv *= slot.p[0] - ax;
                    (slot.p[1] - ay, slot.p[0])
                } else {
                    inv *= ay.double();
                    let xx = ax.square();
                    (xx.double() + xx, ax)
                };
                let lambda = num * dinv;
                let x3 = lambda.square() - ax - x2;
                slot.acc = [x3, lambda * (ax - x3) - ay];
                slot.pending = Pending::None;
            }
        }
    }
    let vals = out_vals
        .into_iter()
        .map(|v| v.expect("every segment writes its partial sum"))
        .collect();
    (out_keys, vals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
    use group::Curve;
    use group::prime::PrimeCurveAffine;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// Runs of keys (ascending, with gaps) whose points exercise every case
    /// of the affine step: doublings, P + (-P) in the middle and at the end
    /// of a run, identities first, between and alone, a run made of one
    /// point, and long random runs.
    fn entries(rng: &mut ChaCha20Rng, n_bases: u32) -> Vec<(u32, u32)> {
        let neg = |i: u32| i | NEG_BIT;
        // Base 0 is the identity; 1 and 2 are P and Q, 3 is 2P.
        let crafted: Vec<Vec<u32>> = vec![
            vec![1, 1],                 // P + P: a doubling
            vec![1, neg(1)],            // P - P: the identity
            vec![1, neg(1), 2],         // then Q
            vec![1, 1, neg(3)],         // 2P - 2P
            vec![1, 1, 3],              // 2P + 2P: a doubling of a sum
            vec![0],                    // the identity alone
            vec![0, 0, 1, 0, 1],        // identities around a doubling
            vec![2],                    // one point
            vec![neg(2), neg(2), 2],    // -2Q + Q
            vec![1, 3, neg(1), neg(3)], // back to the identity
            vec![3, 1, 1, 1, 1, 1],     // repeated additions of P after 2P
        ];
        let mut out = Vec::new();
        let mut key = 0u32;
        for run in crafted {
            key += rng.gen_range(1..4);
            out.extend(run.into_iter().map(|b| (key, b)));
        }
        for len in [1usize, 2, 3, 5, 16, 17, 31, 33, 64, 100, 300] {
            key += rng.gen_range(1..4);
            for _ in 0..len {
                let b = rng.gen_range(0..n_bases);
                out.push((key, if rng.gen_bool(0.5) { neg(b) } else { b }));
            }
        }
        out
    }

    /// The identity, P, Q and 2P, then random points: `gen` maps a random
    /// scalar to a point.
    fn bases<A: MsmAffine>(rng: &mut ChaCha20Rng, n: usize, r#gen: impl Fn(Scalar) -> A) -> Vec<A> {
        let p = Scalar::from(rng.r#gen::<u64>());
        let mut out = vec![
            r#gen(Scalar::ZERO),
            r#gen(p),
            r#gen(Scalar::from(rng.r#gen::<u64>())),
            r#gen(p.double()),
        ];
        while out.len() < n {
            out.push(r#gen(Scalar::from(rng.r#gen::<u64>())));
        }
        out
    }

    /// The twin's buckets and partial sums against the plain sum of every
    /// run, for several segment lengths and chain counts, with and without
    /// carry; and its list has one entry per segment, with the identity
    /// where the segment owns its first run. `proj` is a base's point,
    /// `start` the buckets before (one per key, the last key's included).
    fn sums_every_run<A: MsmAffine>(
        rng: &mut ChaCha20Rng,
        bases: &[A],
        proj: impl Fn(&A) -> A::Projective,
        start: impl FnOnce(usize) -> Vec<A::Projective>,
    ) {
        let entries = entries(rng, bases.len() as u32);
        let keys = entries.last().unwrap().0 as usize + 1;
        let start = start(keys);
        let point = |b: u32| {
            let p = proj(&bases[(b & !NEG_BIT) as usize]);
            if b & NEG_BIT != 0 { -p } else { p }
        };
        let mut want = vec![A::Projective::identity(); keys];
        for &(k, b) in &entries {
            want[k as usize] += point(b);
        }
        for (per, chains) in [(1, 1), (2, 3), (4, 1), (5, 7), (16, 4), (16, 128), (64, 2)] {
            for carry in [false, true] {
                let mut buckets = start.clone();
                let (out_keys, out_vals) =
                    accumulate_batch_affine_cpu(&entries, bases, per, chains, &mut buckets, carry);
                let what = format!("per {per}, chains {chains}, carry {carry}");
                assert_eq!(
                    out_keys.len(),
                    entries.len().div_ceil(per as usize),
                    "{what}"
                );
                let mut got = buckets.clone();
                for (s, (&k, &v)) in out_keys.iter().zip(&out_vals).enumerate() {
                    let start_at = s * per as usize;
                    assert_eq!(k, entries[start_at].0, "{what}: segment {s}'s key");
                    let owned = start_at == 0 || entries[start_at - 1].0 != k;
                    if owned {
                        assert_eq!(v, A::Projective::identity(), "{what}: owned segment {s}");
                    }
                    got[k as usize] += v;
                }
                for k in 0..keys {
                    let present = entries.iter().any(|e| e.0 as usize == k);
                    let expect = match (present, carry) {
                        (false, _) => start[k],
                        (true, false) => want[k],
                        (true, true) => start[k] + want[k],
                    };
                    assert_eq!(got[k], expect, "{what}: bucket {k}");
                }
            }
        }
    }

    #[test]
    fn batch_affine_twin_sums_every_run_g1() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let g = G1Projective::generator();
        let bases = bases(&mut rng, 40, |s| (g * s).to_affine());
        assert_eq!(bases[0], G1Affine::identity());
        let mut r2 = ChaCha20Rng::seed_from_u64(21);
        sums_every_run(
            &mut rng,
            &bases,
            |p| p.to_curve(),
            |n| {
                (0..n)
                    .map(|_| g * Scalar::from(r2.r#gen::<u64>()))
                    .collect()
            },
        );
    }

    #[test]
    fn batch_affine_twin_sums_every_run_g2() {
        let mut rng = ChaCha20Rng::seed_from_u64(12);
        let g = G2Projective::generator();
        let bases = bases(&mut rng, 40, |s| (g * s).to_affine());
        assert_eq!(bases[0], G2Affine::identity());
        let mut r2 = ChaCha20Rng::seed_from_u64(22);
        sums_every_run(
            &mut rng,
            &bases,
            |p| p.to_curve(),
            |n| {
                (0..n)
                    .map(|_| g * Scalar::from(r2.r#gen::<u64>()))
                    .collect()
            },
        );
    }
}
