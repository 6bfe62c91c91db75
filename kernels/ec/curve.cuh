// Short Weierstrass curves y^2 = x^3 + b with a = 0 (BLS12-381's G1 over Fq
// and G2 over Fq2), in three coordinate systems:
//
// - affine_t   (x, y): blst's layout; the identity is (0, 0).
// - jacobian_t (X, Y, Z): x = X/Z^2, y = Y/Z^3; blst's projective layout;
//   the identity has Z = 0.
// - xyzz_t     (X, Y, ZZ, ZZZ): x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; the
//   identity has ZZ = 0. Cheapest for accumulating buckets (MSM).
//
// Every addition handles the identity on either side, P + P (falls back to
// doubling) and P + (-P) (gives the identity). Formulas from the Explicit-
// Formulas Database (add-2007-bl style, dbl-2009-l, add/madd/dbl-2008-s).
// Doublings are not inlined: in additions they are the rare P + P path.
#pragma once

template <class F>
struct affine_t {
    F x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
    __device__ __forceinline__ static affine_t inf() { return {F::zero(), F::zero()}; }
    __device__ __forceinline__ affine_t operator-() const {
        if (is_inf()) return *this;
        return {x, -y};
    }
};

template <class F>
struct jacobian_t {
    F x, y, z;

    __device__ __forceinline__ static jacobian_t inf() { return {F::one(), F::one(), F::zero()}; }
    __device__ __forceinline__ bool is_inf() const { return z.is_zero(); }
    __device__ __forceinline__ static jacobian_t from_affine(const affine_t<F>& p) {
        if (p.is_inf()) return inf();
        return {p.x, p.y, F::one()};
    }

    // dbl-2009-l
    __device__ __noinline__ jacobian_t dbl() const {
        if (is_inf() || y.is_zero()) return inf();
        F a = x.sqr();
        F b = y.sqr();
        F c = b.sqr();
        F d = ((x + b).sqr() - a - c).dbl();
        F e = a.dbl() + a;
        F f = e.sqr();
        F x3 = f - d.dbl();
        F y3 = e * (d - x3) - c.dbl().dbl().dbl();
        F z3 = (y * z).dbl();
        return {x3, y3, z3};
    }

    __device__ jacobian_t add(const jacobian_t& q) const {
        if (is_inf()) return q;
        if (q.is_inf()) return *this;
        F z1z1 = z.sqr();
        F z2z2 = q.z.sqr();
        F u1 = x * z2z2;
        F u2 = q.x * z1z1;
        F s1 = y * q.z * z2z2;
        F s2 = q.y * z * z1z1;
        F h = u2 - u1;
        F r = s2 - s1;
        if (h.is_zero()) return r.is_zero() ? dbl() : inf();
        F hh = h.sqr();
        F hhh = h * hh;
        F v = u1 * hh;
        F x3 = r.sqr() - hhh - v.dbl();
        F y3 = r * (v - x3) - s1 * hhh;
        F z3 = z * q.z * h;
        return {x3, y3, z3};
    }

    // this + affine q
    __device__ jacobian_t add(const affine_t<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F z1z1 = z.sqr();
        F u2 = q.x * z1z1;
        F s2 = q.y * z * z1z1;
        F h = u2 - x;
        F r = s2 - y;
        if (h.is_zero()) return r.is_zero() ? dbl() : inf();
        F hh = h.sqr();
        F hhh = h * hh;
        F v = x * hh;
        F x3 = r.sqr() - hhh - v.dbl();
        F y3 = r * (v - x3) - y * hhh;
        F z3 = z * h;
        return {x3, y3, z3};
    }
};

template <class F>
struct xyzz_t {
    F x, y, zz, zzz;

    __device__ __forceinline__ static xyzz_t inf() { return {F::one(), F::one(), F::zero(), F::zero()}; }
    __device__ __forceinline__ bool is_inf() const { return zz.is_zero(); }
    __device__ __forceinline__ static xyzz_t from_affine(const affine_t<F>& p) {
        if (p.is_inf()) return inf();
        return {p.x, p.y, F::one(), F::one()};
    }

    // dbl-2008-s-1 (a = 0)
    __device__ __noinline__ xyzz_t dbl() const {
        if (is_inf() || y.is_zero()) return inf();
        F u = y.dbl();
        F v = u.sqr();
        F w = u * v;
        F s = x * v;
        F xx = x.sqr();
        F m = xx.dbl() + xx;
        F x3 = m.sqr() - s.dbl();
        F y3 = m * (s - x3) - w * y;
        return {x3, y3, v * zz, w * zzz};
    }

    // 2 * affine p (mdbl-2008-s-1)
    __device__ __noinline__ static xyzz_t dbl(const affine_t<F>& p) {
        if (p.is_inf() || p.y.is_zero()) return inf();
        F u = p.y.dbl();
        F v = u.sqr();
        F w = u * v;
        F s = p.x * v;
        F xx = p.x.sqr();
        F m = xx.dbl() + xx;
        F x3 = m.sqr() - s.dbl();
        F y3 = m * (s - x3) - w * p.y;
        return {x3, y3, v, w};
    }

    // add-2008-s
    __device__ xyzz_t add(const xyzz_t& q) const {
        if (is_inf()) return q;
        if (q.is_inf()) return *this;
        F u1 = x * q.zz;
        F u2 = q.x * zz;
        F s1 = y * q.zzz;
        F s2 = q.y * zzz;
        F p = u2 - u1;
        F r = s2 - s1;
        if (p.is_zero()) return r.is_zero() ? dbl() : inf();
        F pp = p.sqr();
        F ppp = p * pp;
        F q2 = u1 * pp;
        F x3 = r.sqr() - ppp - q2.dbl();
        F y3 = r * (q2 - x3) - s1 * ppp;
        return {x3, y3, zz * q.zz * pp, zzz * q.zzz * ppp};
    }

    // this + affine q (madd-2008-s)
    __device__ xyzz_t add(const affine_t<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F u2 = q.x * zz;
        F s2 = q.y * zzz;
        F p = u2 - x;
        F r = s2 - y;
        if (p.is_zero()) return r.is_zero() ? dbl(q) : inf();
        F pp = p.sqr();
        F ppp = p * pp;
        F q2 = x * pp;
        F x3 = r.sqr() - ppp - q2.dbl();
        F y3 = r * (q2 - x3) - y * ppp;
        return {x3, y3, zz * pp, zzz * ppp};
    }

    // The same point in Jacobian coordinates, without an inversion:
    // Z = ZZ * ZZZ, X = x * Z^2 = X * ZZ * ZZZ^2, Y = y * Z^3 = Y * ZZ^3 * ZZZ^2.
    __device__ jacobian_t<F> to_jacobian() const {
        if (is_inf()) return jacobian_t<F>::inf();
        F zzz2 = zzz.sqr();
        F z = zz * zzz;
        return {x * zz * zzz2, y * zz.sqr() * zz * zzz2, z};
    }
};
