//! CPU twins of the kernels' Fq2 multiplication and difference of products
//! (`kernels/ff/bls12_381.cuh`, `fq2_t::operator*` and `fq2_t::mul_sub`):
//! `Fq[u] / (u^2 + 1)` from the Fq twin's wide products ([`mul_wide`]) with
//! one wide reduction ([`redc_wide`]) per coordinate.

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

/// `a b - c d` over Fq2 with one wide reduction per coordinate, as the
/// kernel's `fq2_t::mul_sub`, step for step (the wide arithmetic modulo
/// 2^(64N)): with `e = a0 b0 + a1 b1` and `g = c0 d0 + c1 d1`,
/// `c0 = redc_wide(2 modulus^2 + a0 b0 - a1 b1 - c0 d0 + c1 d1)` and
/// `c1 = redc_wide((a0 + a1)(b0 + b1) - e + g + 2 modulus^2 - (c0 + c1)(d0 + d1))`,
/// the sums of two coordinates not reduced. `modulus_sq2` is twice the
/// modulus squared (the kernel's `FQ_MOD_SQ2`). Operands below the modulus;
/// checks that both sums are below `4 * modulus^2` (below
/// `modulus * 2^(32N)` for a modulus under 2^(32N - 2)), which a negative
/// true value, wrapped, would not be.
pub fn fq2_mul_sub<const N: usize>(
    a: &[[u32; N]; 2],
    b: &[[u32; N]; 2],
    c: &[[u32; N]; 2],
    d: &[[u32; N]; 2],
    modulus: &[u32; N],
    modulus_sq2: &[u32],
    m0: u32,
) -> [[u32; N]; 2] {
    let plain_add = |x: &[u32; N], y: &[u32; N]| -> [u32; N] {
        let mut ch = Chain { carry: 0 };
        let r = std::array::from_fn(|k| ch.add(k == 0, x[k], y[k]));
        ch.dropped("a + b below 2 * modulus");
        r
    };
    let four_sq = add_sub_wide(modulus_sq2, modulus_sq2, false);
    // e = a0 b0 + a1 b1, f = 2 p^2 + a0 b0 - a1 b1
    let mut e = mul_wide(&a[0], &b[0]);
    let mut t = mul_wide(&a[1], &b[1]);
    let mut f = add_sub_wide(&add_sub_wide(modulus_sq2, &e, false), &t, true);
    e = add_sub_wide(&e, &t, false);
    // g = c0 d0 + c1 d1, f = f - c0 d0 + c1 d1
    let mut g = mul_wide(&c[0], &d[0]);
    t = mul_wide(&c[1], &d[1]);
    f = add_sub_wide(&add_sub_wide(&f, &g, true), &t, false);
    g = add_sub_wide(&g, &t, false);
    assert!(
        wide_lt(&f, &four_sq),
        "the c0 sum is not below 4 * modulus^2"
    );
    let c0 = redc_wide::<N>(&f, modulus, m0);
    f = mul_wide(&plain_add(&a[0], &a[1]), &plain_add(&b[0], &b[1]));
    f = add_sub_wide(&add_sub_wide(&f, &e, true), &g, false);
    f = add_sub_wide(&f, modulus_sq2, false);
    t = mul_wide(&plain_add(&c[0], &c[1]), &plain_add(&d[0], &d[1]));
    f = add_sub_wide(&f, &t, true);
    assert!(
        wide_lt(&f, &four_sq),
        "the c1 sum is not below 4 * modulus^2"
    );
    [c0, redc_wide::<N>(&f, modulus, m0)]
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
    fn fq2_differences_of_products_match_blstrs_at_their_extremes_and_on_random_values() {
        use blstrs::Fp2;
        let sq2 = kernel_constant("FQ_MOD_SQ2");
        let sq = mul_wide(&FQ_MOD, &FQ_MOD);
        assert_eq!(
            sq2,
            add_sub_wide(&sq, &sq, false),
            "the kernel's FQ_MOD_SQ2 is not twice the modulus squared"
        );
        let r = Fp::from(2u64).pow_vartime([384]);
        let fp = |x: &[u32; 12]| Fp::from_bytes_le(&bytes(x).try_into().unwrap()).unwrap();
        let fp2 = |x: &[[u32; 12]; 2]| Fp2::new(fp(&x[0]), fp(&x[1]));
        let check = |a: [[u32; 12]; 2], b: [[u32; 12]; 2], c: [[u32; 12]; 2], d: [[u32; 12]; 2]| {
            let got = fq2_mul_sub(&a, &b, &c, &d, &FQ_MOD, &sq2, FQ_M0);
            assert_eq!(
                fp2(&got) * Fp2::new(r, Fp::ZERO),
                fp2(&a) * fp2(&b) - fp2(&c) * fp2(&d),
                "{a:x?} {b:x?} - {c:x?} {d:x?}"
            );
        };
        let mut rng = ChaCha20Rng::seed_from_u64(28);
        let edges = edges(&FQ_MOD, &mut rng);
        let zero = [0u32; 12];
        let mut top = FQ_MOD;
        top[0] -= 1;
        for x in &edges {
            for y in &edges {
                // Each coordinate's difference at both ends: one side's
                // products zero, the other's near p^2 with the sign that
                // pushes the sum furthest (a0 b0 - a1 b1 most negative with
                // a0 = 0; a0 b1 + a1 b0 largest with all four near p).
                check([*x, *y], [*y, *x], [zero, zero], [zero, zero]);
                check([zero, zero], [zero, zero], [*x, *y], [*y, *x]);
                check([zero, *x], [*y, *y], [*x, zero], [*y, *y]);
                check([*x, zero], [*y, *y], [zero, *x], [*y, *y]);
                check([*x, *y], [*x, *y], [top, top], [top, top]);
                check([top, top], [top, top], [*x, *y], [*x, *y]);
            }
        }
        for _ in 0..10_000 {
            let [a, b, c, d] = std::array::from_fn(|_| {
                [
                    random_below(&FQ_MOD, &mut rng),
                    random_below(&FQ_MOD, &mut rng),
                ]
            });
            check(a, b, c, d);
        }
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
