//! The CPU twin of the bucket reduction (kernels/msm/pippenger.cuh,
//! `msm_bucket_sums`, then `msm_bucket_merge` level by level or
//! `msm_bucket_merge_fan` 2^k ranges a launch), step for step on the same
//! arrays: each window's sum_j (j + 1) B_j.

use group::Group;

/// Each of `windows` windows' sum_j (j + 1) B_j over its `nb` buckets
/// (window w's are `buckets[w * nb..(w + 1) * nb]`), as the kernels make it:
/// parts of 2^part_log2 buckets summed by running sums, then merged pairwise
/// (`fan_log2` = 1) or 2^fan_log2 ranges at a time (the last merge takes
/// what is left).
///
/// Panics unless nb is a power of two, 2^part_log2 <= nb, fan_log2 >= 1 and
/// the buckets hold windows * nb points: the device code's inputs are valid
/// by construction.
pub fn reduce_cpu<G: Group>(
    buckets: &[G],
    windows: usize,
    nb: usize,
    part_log2: u32,
    fan_log2: u32,
) -> Vec<G> {
    assert!(nb.is_power_of_two() && (1 << part_log2) <= nb && fan_log2 >= 1);
    assert_eq!(buckets.len(), windows * nb);
    let len = 1usize << part_log2;
    let parts = nb >> part_log2;
    let mut t = vec![G::identity(); windows * parts];
    let mut r = vec![G::identity(); windows * parts];
    // msm_bucket_sums: from the top of each part, running += B_j, then
    // sum += running.
    for id in 0..windows * parts {
        let (w, p) = (id / parts, id % parts);
        let b = &buckets[w * nb + p * len..w * nb + (p + 1) * len];
        let (mut running, mut sum) = (G::identity(), G::identity());
        for j in (0..len).rev() {
            running += b[j];
            sum += running;
        }
        t[id] = sum;
        r[id] = running;
    }
    let scale = |mut x: G, doublings: u32| {
        for _ in 0..doublings {
            x = x.double();
        }
        x
    };
    let log_parts = parts.trailing_zeros();
    let mut level = 0u32;
    while level < log_parts {
        let f = if fan_log2 > 1 {
            fan_log2.min(log_parts - level)
        } else {
            1
        };
        let groups = parts >> (level + f);
        let step = 1usize << level;
        for id in 0..windows * groups {
            let (w, q) = (id / groups, id % groups);
            let a = w * parts + (q << (level + f));
            if fan_log2 > 1 {
                // msm_bucket_merge_fan
                let (mut run, mut acc) = (G::identity(), G::identity());
                for i in (1..1usize << f).rev() {
                    run += r[a + i * step];
                    acc += run;
                }
                r[a] += run;
                acc = scale(acc, part_log2 + level);
                for i in 0..1usize << f {
                    acc += t[a + i * step];
                }
                t[a] = acc;
            } else {
                // msm_bucket_merge
                let b = a + step;
                let scaled = scale(r[b], part_log2 + level);
                let ta = t[a] + t[b];
                t[a] = ta + scaled;
                r[a] = r[a] + r[b];
            }
        }
        level += f;
    }
    (0..windows).map(|w| t[w * parts]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective, Scalar};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    fn check<G: Group<Scalar = Scalar>>(seed: u64) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        for (windows, nb) in [(1usize, 1usize), (1, 2), (3, 8), (2, 64), (1, 512)] {
            let buckets: Vec<G> = (0..windows * nb)
                .map(|i| match i % 7 {
                    0 => G::identity(),
                    _ => G::generator() * Scalar::from(rng.r#gen::<u64>()),
                })
                .collect();
            let want: Vec<G> = (0..windows)
                .map(|w| {
                    (0..nb)
                        .map(|j| buckets[w * nb + j] * Scalar::from(j as u64 + 1))
                        .sum()
                })
                .collect();
            for part_log2 in 0..=nb.trailing_zeros() {
                for fan_log2 in [1, 2, 3, 4, 8] {
                    assert_eq!(
                        reduce_cpu(&buckets, windows, nb, part_log2, fan_log2),
                        want,
                        "{windows} windows of {nb}, part_log2 {part_log2}, fan_log2 {fan_log2}"
                    );
                }
            }
        }
    }

    #[test]
    fn reduction_twin_gives_the_weighted_sums_g1() {
        check::<G1Projective>(31);
    }

    #[test]
    fn reduction_twin_gives_the_weighted_sums_g2() {
        check::<G2Projective>(32);
    }
}
