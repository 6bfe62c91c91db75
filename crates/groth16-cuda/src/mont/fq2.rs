//! CPU twin of the kernels' Fq2 multiplication (`kernels/ff/bls12_381.cuh`,
//! `fq2_t::operator*`): `Fq[u] / (u^2 + 1)` from the Fq twin's wide products
//! ([`mul_wide`]) with one wide reduction ([`redc_wide`]) per coordinate.

use super::{Chain, add_sub_wide, mul_wide, redc_wide, wide_lt};

/// Fq2 multiplication (Fq[u] / (u^2 + 1)) with lazy reduction, as the
/// kernel's `fq2_t::operator*`: with `s_a = a0 + a1`, `s_b = b0 + b1` not
/// reduced,
/// `c0 = redc_wide(a0 b0 - a1 b1 + modulus^2)` and
/// `c1 = redc_wide(s_a s_b - (a0 b0 + a1 b1))`.
/// `modulus_sq` is the modulus squared (2N limbs, the kernel's `FQ_MOD_SQ`).
/// Operands below the modulus; checks that both sums are below
/// `2 * modulus^2` (so below `modulus * 2^(32N)`).
pub fn fq2_mul<const N: usize>(
    a: &[[u32; N]; 2],
    b: &[[u32; N]; 2],
    modulus: &[u32; N],
    modulus_sq: &[u32],
    m0: u32,
) -> [[u32; N]; 2] {
    let plain_add = |x: &[u32; N], y: &[u32; N]| -> [u32; N] {
        let mut c = Chain { carry: 0 };
        let r = std::array::from_fn(|k| c.add(k == 0, x[k], y[k]));
        c.dropped("a + b below 2 * modulus");
        r
    };
    let sa = plain_add(&a[0], &a[1]);
    let sb = plain_add(&b[0], &b[1]);
    let t0 = mul_wide(&a[0], &b[0]);
    let t1 = mul_wide(&a[1], &b[1]);
    let s01 = add_sub_wide(&t0, &t1, false);
    let c0w = add_sub_wide(&add_sub_wide(&t0, &t1, true), modulus_sq, false);
    let c1w = add_sub_wide(&mul_wide(&sa, &sb), &s01, true);
    let twice_sq = add_sub_wide(modulus_sq, modulus_sq, false);
    for (name, w) in [("c0", &c0w), ("c1", &c1w)] {
        assert!(
            wide_lt(w, &twice_sq),
            "the {name} sum is not below 2 * modulus^2"
        );
    }
    [
        redc_wide::<N>(&c0w, modulus, m0),
        redc_wide::<N>(&c1w, modulus, m0),
    ]
}

#[cfg(test)]
mod tests {
    use blstrs::Fp;
    use ff::Field;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use super::super::tests::{FQ_M0, FQ_MOD, bytes, edges, random_below};
    use super::*;

    /// A 24-limb constant of kernels/ff/bls12_381.cuh, read from the header.
    fn kernel_constant(name: &str) -> Vec<u32> {
        let header = include_str!("../../../../kernels/ff/bls12_381.cuh");
        let start = header
            .find(&format!("{name}[24] = {{"))
            .unwrap_or_else(|| panic!("{name} in the header"));
        let body = &header[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
        body.split(',')
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(|t| u32::from_str_radix(t.trim_start_matches("0x"), 16).unwrap())
            .collect()
    }

    #[test]
    fn fq2_products_match_blstrs_on_edges_and_random_values() {
        use blstrs::Fp2;
        let sq = kernel_constant("FQ_MOD_SQ");
        assert_eq!(
            sq,
            mul_wide(&FQ_MOD, &FQ_MOD),
            "the kernel's FQ_MOD_SQ is not the modulus squared"
        );
        let r = Fp::from(2u64).pow_vartime([384]);
        let fp = |x: &[u32; 12]| Fp::from_bytes_le(&bytes(x).try_into().unwrap()).unwrap();
        let check = |a: [[u32; 12]; 2], b: [[u32; 12]; 2]| {
            let got = fq2_mul(&a, &b, &FQ_MOD, &sq, FQ_M0);
            let fa = Fp2::new(fp(&a[0]), fp(&a[1]));
            let fb = Fp2::new(fp(&b[0]), fp(&b[1]));
            let fz = Fp2::new(fp(&got[0]), fp(&got[1]));
            assert_eq!(fz * Fp2::new(r, Fp::ZERO), fa * fb, "{a:x?} * {b:x?}");
        };
        let mut rng = ChaCha20Rng::seed_from_u64(27);
        let edges = edges(&FQ_MOD, &mut rng);
        let zero = [0u32; 12];
        for x in &edges {
            for y in &edges {
                check([*x, *y], [*y, *x]);
                check([*x, *x], [*y, *y]);
                check([*x, zero], [zero, *y]);
                // a0 b0 - a1 b1 at its most negative: a0 b0 = 0, a1 b1 near p^2.
                check([zero, *x], [*y, *y]);
            }
        }
        for _ in 0..20_000 {
            check(
                [
                    random_below(&FQ_MOD, &mut rng),
                    random_below(&FQ_MOD, &mut rng),
                ],
                [
                    random_below(&FQ_MOD, &mut rng),
                    random_below(&FQ_MOD, &mut rng),
                ],
            );
        }
    }
}
