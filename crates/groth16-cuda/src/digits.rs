//! Signed-digit windows of a scalar: the CPU twin of `msm_digit` in
//! kernels/msm/digits.cuh, which both the MSM and the setup (fixed-base)
//! kernels call.

use blstrs::Scalar;
use ff::PrimeField;

/// Bits the windows must cover: scalars are below r < 2^255, and with signed
/// digits the top window needs one bit of room for the carry.
const SCALAR_BITS: u32 = 256;

/// Number of signed-digit windows for `c`-bit windows: the smallest `w`
/// with `w * c >= 256`, one more bit than a scalar has, so the top digit
/// never carries out.
pub fn windows(c: u32) -> u32 {
    SCALAR_BITS.div_ceil(c)
}

/// The canonical value of `s` as little-endian 32-bit limbs, as the kernels
/// see it after `from_mont`.
pub fn limbs(s: &Scalar) -> [u32; 8] {
    let repr = s.to_repr();
    let mut out = [0u32; 8];
    for (o, chunk) in out.iter_mut().zip(repr.as_ref().chunks_exact(4)) {
        *o = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    out
}

/// The signed digits of canonical limbs in `c`-bit windows, lowest first,
/// each in [-2^(c-1), 2^(c-1)]: a raw window above 2^(c-1) becomes
/// `raw - 2^c` and carries one into the next.
pub fn signed_digits_of_limbs(limbs: &[u32; 8], c: u32) -> Vec<i32> {
    let bits = |bit: u32| -> u32 {
        let (limb, off) = ((bit / 32) as usize, bit % 32);
        if limb >= 8 {
            return 0;
        }
        let lo = limbs[limb] >> off;
        let hi = if off != 0 && limb + 1 < 8 {
            limbs[limb + 1] << (32 - off)
        } else {
            0
        };
        (lo | hi) & ((1u32 << c) - 1)
    };
    let mut carry = 0;
    (0..windows(c))
        .map(|w| {
            let raw = bits(w * c) + carry;
            if raw > 1 << (c - 1) {
                carry = 1;
                raw as i32 - (1i32 << c)
            } else {
                carry = 0;
                raw as i32
            }
        })
        .collect()
}

/// The signed digits of `s` in `c`-bit windows, lowest first.
pub fn signed_digits(s: &Scalar, c: u32) -> Vec<i32> {
    signed_digits_of_limbs(&limbs(s), c)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ff::Field;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn recompose(digits: &[i32], c: u32) -> Scalar {
        let mut acc = Scalar::ZERO;
        for &d in digits.iter().rev() {
            acc *= Scalar::from(2u64).pow_vartime([u64::from(c)]);
            let mag = Scalar::from(u64::from(d.unsigned_abs()));
            acc += if d < 0 { -mag } else { mag };
        }
        acc
    }

    /// Scalars that exercise the digit logic: small values, window
    /// boundaries, long carry chains and the top of the field.
    pub(crate) fn edge_scalars(c: u32) -> Vec<Scalar> {
        let two = Scalar::from(2u64);
        let pow = |e: u32| two.pow_vartime([u64::from(e)]);
        let mut v = vec![
            Scalar::ZERO,
            Scalar::ONE,
            Scalar::from(2u64),
            -Scalar::ONE,
            -Scalar::from(2u64),
            pow(c - 1),
            pow(c - 1) + Scalar::ONE,
            pow(c) - Scalar::ONE,
            pow(c),
            pow(254),
            pow(254) - Scalar::ONE,
            pow(255) - Scalar::ONE, // reduced mod r
            Scalar::ROOT_OF_UNITY,
            Scalar::MULTIPLICATIVE_GENERATOR,
        ];
        // All digits at the carry threshold: sum_k (2^(c-1) + 1) 2^(c k).
        let mut s = Scalar::ZERO;
        for k in 0..windows(c) - 1 {
            s += (pow(c - 1) + Scalar::ONE) * pow(c * k);
        }
        v.push(s);
        v.push(-s);
        v
    }

    #[test]
    fn digits_recompose_within_bounds() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        // Every width the MSM (2..=24) and the setup (2..=20) kernels take.
        for c in 2..=24 {
            let mut scalars = edge_scalars(c);
            scalars.extend((0..50).map(|_| Scalar::random(&mut rng)));
            for s in scalars {
                let d = signed_digits(&s, c);
                assert_eq!(d.len() as u32, windows(c));
                assert!(
                    d.iter().all(|&d| d.unsigned_abs() <= 1 << (c - 1)),
                    "c = {c}"
                );
                assert_eq!(recompose(&d, c), s, "c = {c}");
            }
        }
    }
}
