//! Radix-2 NTTs over Fr on every core (rayon), for the CPU prover's H:
//! the transforms bellperson's `EvaluationDomain` makes (same omega, coset
//! generator and scalings), with a precomputed twiddle table instead of
//! its running products and no shuffle into per-thread sub-transforms, so
//! about half its field multiplications. Field arithmetic is exact: the
//! results are bellperson's bit for bit (tested against it).

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

/// Elements a rayon task takes at least.
const CHUNK: usize = 1 << 12;

/// A radix-2 domain of `2^log2` points and its twiddles.
pub struct Domain {
    log2: u32,
    /// omega^j for j < n/2, omega the domain's primitive root (inverse
    /// transforms read them back to front).
    twiddles: Vec<Scalar>,
}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain").field("log2", &self.log2).finish()
    }
}

/// `start * step^i` into `out[i]`, in parallel chunks.
fn powers(out: &mut [Scalar], start: Scalar, step: Scalar) {
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut x = start * step.pow_vartime([(c * CHUNK) as u64]);
            for v in chunk {
                *v = x;
                x *= step;
            }
        });
}

/// Multiplies `v[i]` by `start * step^i`.
fn scale_by_powers(v: &mut [Scalar], start: Scalar, step: Scalar) {
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let mut x = start * step.pow_vartime([(c * CHUNK) as u64]);
        for v in chunk {
            *v *= x;
            x *= step;
        }
    });
}

impl Domain {
    /// The domain of `2^log2` points (log2 below Fr's two-adicity).
    pub fn new(log2: u32) -> Self {
        assert!(
            log2 < Scalar::S,
            "no radix-2 domain of 2^{log2} points in Fr"
        );
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log2..Scalar::S {
            omega = omega.square();
        }
        let mut twiddles = vec![Scalar::ZERO; (1usize << log2) / 2];
        powers(&mut twiddles, Scalar::ONE, omega);
        Domain { log2, twiddles }
    }

    pub fn len(&self) -> usize {
        1 << self.log2
    }

    /// omega^j (or omega^-j = omega^(n-j) with `inverse`), for j < n/2.
    fn twiddle(&self, j: usize, inverse: bool) -> Scalar {
        if j == 0 || !inverse {
            self.twiddles[j]
        } else {
            // omega^-j = omega^(n/2) * omega^(n/2 - j) = -omega^(n/2 - j).
            -self.twiddles[self.len() / 2 - j]
        }
    }

    /// The transform in place (natural order in and out): evaluations at
    /// omega^i, or at omega^-i with `inverse` (unscaled).
    fn transform(&self, a: &mut [Scalar], inverse: bool) {
        let n = self.len();
        assert_eq!(a.len(), n, "a vector of {} for a domain of {n}", a.len());
        if n == 1 {
            return;
        }
        let bits = self.log2;
        for i in 0..n {
            let r = i.reverse_bits() >> (usize::BITS - bits);
            if i < r {
                a.swap(i, r);
            }
        }
        let mut m = 1;
        while m < n {
            let stride = n / (2 * m);
            let butterflies = |lo: &mut [Scalar], hi: &mut [Scalar], first: usize| {
                for (j, (x, y)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    let t = *y * self.twiddle((first + j) * stride, inverse);
                    *y = *x - t;
                    *x += t;
                }
            };
            if stride >= 8 {
                // Many blocks: one task per group of blocks.
                let per = (CHUNK / (2 * m)).max(1) * 2 * m;
                a.par_chunks_mut(per).for_each(|blocks| {
                    for block in blocks.chunks_mut(2 * m) {
                        let (lo, hi) = block.split_at_mut(m);
                        butterflies(lo, hi, 0);
                    }
                });
            } else {
                // Few large blocks: each block's butterflies in chunks.
                for block in a.chunks_mut(2 * m) {
                    let (lo, hi) = block.split_at_mut(m);
                    let c = CHUNK.min(m);
                    lo.par_chunks_mut(c)
                        .zip(hi.par_chunks_mut(c))
                        .enumerate()
                        .for_each(|(k, (lo, hi))| butterflies(lo, hi, k * c));
                }
            }
            m *= 2;
        }
    }

    /// bellperson's `fft`.
    pub fn fft(&self, a: &mut [Scalar]) {
        self.transform(a, false);
    }

    /// bellperson's `ifft`: the inverse transform scaled by 1/n.
    pub fn ifft(&self, a: &mut [Scalar]) {
        self.transform(a, true);
        let minv = Scalar::from(self.len() as u64).invert().unwrap();
        a.par_iter_mut().for_each(|v| *v *= minv);
    }

    /// bellperson's `coset_fft`: coefficient i times g^i (g Fr's
    /// multiplicative generator), then the transform.
    pub fn coset_fft(&self, a: &mut [Scalar]) {
        scale_by_powers(a, Scalar::ONE, Scalar::MULTIPLICATIVE_GENERATOR);
        self.fft(a);
    }

    /// bellperson's `icoset_fft`: the inverse transform, then coefficient i
    /// times g^-i. The 1/n of the inverse is folded into the same pass.
    pub fn icoset_fft(&self, a: &mut [Scalar]) {
        self.transform(a, true);
        let minv = Scalar::from(self.len() as u64).invert().unwrap();
        let geninv = Scalar::MULTIPLICATIVE_GENERATOR.invert().unwrap();
        scale_by_powers(a, minv, geninv);
    }

    /// bellperson's `divide_by_z_on_coset`: Z(g x) = g^n - 1 at every
    /// point of the coset.
    pub fn divide_by_z_on_coset(&self, a: &mut [Scalar]) {
        let z = Scalar::MULTIPLICATIVE_GENERATOR.pow_vartime([self.len() as u64]) - Scalar::ONE;
        let zinv = z.invert().unwrap();
        a.par_iter_mut().for_each(|v| *v *= zinv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::domain::EvaluationDomain;
    use ec_gpu_gen::threadpool::Worker;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    fn random(n: usize, seed: u64) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut rng)).collect()
    }

    #[test]
    fn every_transform_is_bellpersons() {
        let worker = Worker::new();
        // Sizes that take each path: tiny, one task, many blocks, few large
        // blocks split in chunks.
        for log2 in [0u32, 1, 2, 3, 5, 9, 13, 15] {
            let n = 1usize << log2;
            let d = Domain::new(log2);
            let mut v = random(n, u64::from(log2));
            // Edge values among random ones.
            v[0] = Scalar::ZERO;
            if n > 2 {
                v[1] = -Scalar::ONE;
                v[2] = Scalar::ONE;
            }
            type Op = fn(&Domain, &mut [Scalar]);
            type TheirOp = fn(&mut EvaluationDomain<Scalar>, &Worker);
            let ops: [(&str, Op, TheirOp); 5] = [
                ("fft", Domain::fft, |e, w| e.fft(w, &mut None).unwrap()),
                ("ifft", Domain::ifft, |e, w| e.ifft(w, &mut None).unwrap()),
                ("coset_fft", Domain::coset_fft, |e, w| {
                    e.coset_fft(w, &mut None).unwrap()
                }),
                ("icoset_fft", Domain::icoset_fft, |e, w| {
                    e.icoset_fft(w, &mut None).unwrap()
                }),
                (
                    "divide_by_z_on_coset",
                    Domain::divide_by_z_on_coset,
                    |e, w| e.divide_by_z_on_coset(w),
                ),
            ];
            for (name, ours, theirs) in ops {
                let mut mine = v.clone();
                ours(&d, &mut mine);
                let mut e = EvaluationDomain::from_coeffs(v.clone()).unwrap();
                theirs(&mut e, &worker);
                assert!(mine == e.into_coeffs(), "{name} at 2^{log2}");
            }
            // And back: ifft(fft(v)) = v.
            let mut w = v.clone();
            d.fft(&mut w);
            d.ifft(&mut w);
            assert!(w == v, "ifft(fft(v)) at 2^{log2}");
        }
    }

    #[test]
    fn the_twiddles_are_the_roots_of_unity() {
        let d = Domain::new(10);
        let omega = d.twiddles[1];
        assert_eq!(omega.pow_vartime([1024u64]), Scalar::ONE);
        assert_ne!(omega.pow_vartime([512u64]), Scalar::ONE);
        for j in [1usize, 7, 511] {
            assert_eq!(
                d.twiddle(j, true) * d.twiddle(j, false),
                Scalar::ONE,
                "j = {j}"
            );
        }
    }
}
