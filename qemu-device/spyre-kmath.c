/*
 * Spyre card model: the KERNEL engine's f32 math library
 *
 * Owns every f32 math function of the KERNEL command (spyre-kmath.h):
 * exp, log and their relatives, the trigonometric, inverse trigonometric
 * and hyperbolic functions, erf, erfc, erfinv, lgamma, the exact ones
 * (floor .. trunc, sign, copysign) and pow.  Each function but EXP (and
 * SIGMOID, made of it) widens its f32 sources to double (exactly),
 * computes in double with its own range reduction and series, and rounds
 * once to f32, so the f32 result is almost always the correctly rounded
 * one; EXP, the hot one of softmax, computes in f32 (kexpf(), within
 * 1 ulp).  Only IEEE's exact operations
 * come from the compiler's runtime (sqrt, floor, ceil, rint, trunc: one
 * value everywhere); no libm function whose result depends on the libc.
 * The lane loops are branch-free selects over the arithmetic, so that
 * GCC can vectorise them, each built once per host code path (baseline,
 * AVX2, AVX-512; bit-identical) and found in one table by opcode; the
 * rare lanes that need more (trigonometric functions at |x| >= 2^20) are
 * fixed up afterwards, lane by lane.  EXP and SIGMOID run a shorter body
 * (the same bits) over vectors whose lanes are all in its range.
 * Built with -ffp-contract=off (no fused a * b + c) and -fno-math-errno.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* HOST_X86_64: QEMU's build configuration (the native harnesses' own). */
#include "config-host.h"

#include "drm/spyre_cmd.h"
#include "spyre-kernel.h"
#include "spyre-kmath.h"

#ifdef HOST_X86_64
#include <cpuid.h>
#endif

/* ---- Constants (binary64, rounded to nearest) --------------------------- */

/* ln 2 in two parts (fdlibm's): LN2_HI has 32 trailing zero bits. */
static const double LN2_HI = 0.693147180369123816490;
static const double LN2_LO = 0.000000000190821492927058770002;
static const double KLN2 = 0.6931471805599453;
static const double KINV_LN2 = 1.4426950408889634;
static const double KLOG10_2 = 0.3010299956639812;
static const double KINV_LN10 = 0.4342944819032518;
static const double KPI = 3.141592653589793;
static const double KPIO2 = 1.5707963267948966;
static const double KTWO_OVER_PI = 0.6366197723675814;
/* pi/2 in three parts; the first two have 33 significant bits. */
static const double KPIO2_1 = 1.5707963267341256;
static const double KPIO2_2 = 0.00000000006077100506303966;
static const double KPIO2_3 =
    0.0000000000000000000020222662487959506;
static const double KTWO_OVER_SQRTPI = 1.1283791670955126;
static const double KINV_SQRTPI = 0.5641895835477563;
static const double KHALF_LN_2PI = 0.9189385332046728;
/* 2^-128 */
static const double KTWO_M128 =
    1.0 / 18446744073709551616.0 / 18446744073709551616.0;
/* 2^52 + 2^51: x + KRND - KRND is x rounded to an integer, |x| < 2^51. */
#define KRND            0x1.8p52

/* floor(2/pi * 2^256), least significant word first. */
static const uint64_t two_over_pi[5] = {
    0xfe5163abdebbc561ULL, 0xdb6295993c439041ULL,
    0xfc2757d1f534ddc0ULL, 0xa2f9836e4e441529ULL, 0,
};

static inline double krnd(double x)
{
    return (x + KRND) - KRND;
}

static inline double pow2i(int k)
{
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;

    memcpy(&d, &b, 8);
    return d;
}

/*
 * @c ? @x : @y with both computed and no branch: the selects of the lane
 * functions, which GCC turns into vector blends (a ?: whose arms compute
 * something, or whose condition is evaluated only sometimes, stays a
 * branch under -ftrapping-math, and the loop does not vectorise).
 */
static inline double kseld(bool c, double x, double y)
{
    uint64_t m = -(uint64_t)c, ux, uy;

    memcpy(&ux, &x, 8);
    memcpy(&uy, &y, 8);
    ux = (ux & m) | (uy & ~m);
    memcpy(&x, &ux, 8);
    return x;
}

static inline float kself(bool c, float x, float y)
{
    uint32_t m = -(uint32_t)c;

    return u2f((f2u(x) & m) | (f2u(y) & ~m));
}

/* ---- exp ---------------------------------------------------------------- */

/*
 * x = kd ln 2 + r: returns r (|r| <= ln 2 / 2 plus a rounding) and sets
 * *@kd to x / ln 2 rounded to an integer, for |x| <= 800.
 */
static inline double kexp_reduce(double x, double *kd)
{
    double k = x * KINV_LN2 + KRND;

    k -= KRND;
    *kd = k;
    return x - k * LN2_HI - k * LN2_LO;
}

/* e^x for |x| <= 800, relative error about 1e-16 (no branch). */
static inline double kexp_core(double x)
{
    double kd, r, p;
    int k;

    r = kexp_reduce(x, &kd);
    k = (int)kd;
    p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return p * pow2i(k / 2) * pow2i(k - k / 2);
}

/* e^x for finite x; clamps far outside (the scalar part 1 form). */
static double kexp_d(double x)
{
    if (x > 800.0) {
        return HUGE_VAL;
    }
    if (x < -800.0) {
        return 0.0;
    }
    return kexp_core(x);
}

/* e^x - 1 for |x| <= 800 (no NaN): Taylor series below 0.5 in size. */
static inline double kexpm1(double x)
{
    double p;

    p = 1.0 / 20922789888000.0;
    p = p * x + 1.0 / 1307674368000.0;
    p = p * x + 1.0 / 87178291200.0;
    p = p * x + 1.0 / 6227020800.0;
    p = p * x + 1.0 / 479001600.0;
    p = p * x + 1.0 / 39916800.0;
    p = p * x + 1.0 / 3628800.0;
    p = p * x + 1.0 / 362880.0;
    p = p * x + 1.0 / 40320.0;
    p = p * x + 1.0 / 5040.0;
    p = p * x + 1.0 / 720.0;
    p = p * x + 1.0 / 120.0;
    p = p * x + 1.0 / 24.0;
    p = p * x + 1.0 / 6.0;
    p = p * x + 0.5;
    p = p * x + 1.0;
    return kseld(fabs(x) < 0.5, x * p, kexp_core(x) - 1.0);
}

/*
 * EXP: e^x in f32 arithmetic alone (the card's one algorithm; every host
 * code path computes these operations in this order, each rounded once,
 * no fused multiply-add, so all give the same bits).  x = k ln2/2 + r:
 * k = x 2/ln2 rounded to an integer (|k| <= 300), r = (x - k C1) - k C2
 * (C1 = ln2/2 to 12 bits, so k C1 and x - k C1 are exact; C2 = ln2/2 -
 * C1), |r| <= ln2/4 plus a rounding.  e^x = 2^(k/2) e^r = 2^n T (1 + s):
 * n = floor(k/2), T = 2^(j/2) for j = k - 2n, the two-entry table as a
 * select, kept as Thi + Tlo in two f32s; s = e^r - 1 = r + r^2 P(r), P the
 * Taylor series to r^6 (truncation error below 2^-30).  y = Thi + (Tlo +
 * Thi s), rounded once at the last addition, in [0.84, 1.69]; scaled by
 * 2^floor(n/2) (exact) and then 2^(n - floor(n/2)) (the one rounding of a
 * subnormal result, inf past FLT_MAX).  The largest error over every f32
 * input, measured against libm: 0.825 ulp (bound 1 ulp; docs/spyre-hw.rst
 * gives the constants in hex, the decimals below are the same floats).
 * At or below -104 the result is +0 (x taken as 0, then the result
 * replaced), at or above 89 +inf (x taken as 89: e^89 overflows), a NaN
 * the canonical one.  No branch: vectorises on every path, 16 lanes per
 * AVX-512 vector.  kexp_y() computes y and n, kexpf() the rest.
 */
static inline float kexp_y(float xc, int32_t *n)
{
    float kf = (xc * 2.88539f + 0x1.8p23f) - 0x1.8p23f;
    int32_t k = (int32_t)kf;
    float r = (xc - kf * 0.3465576171875f) - kf * 0.000015973092f;
    float p = 0.0013888889f;           /* 1/720, then 1/120 .. 1/2 */
    float th, tl, s;
    bool odd = k & 1;

    *n = k >> 1;
    p = p * r + 0.008333334f;
    p = p * r + 0.041666668f;
    p = p * r + 0.16666667f;
    p = p * r + 0.5f;
    s = r + (r * r) * p;
    th = kself(odd, 1.4142135f, 1.0f);          /* sqrt(2) = th + tl */
    tl = kself(odd, 0.000000024203235f, 0.0f);
    return th + (tl + th * s);
}

static inline float kexpf(float x)
{
    bool gt = x > -104.0f;
    float xc = kself(gt, kself(x < 89.0f, x, 89.0f), 0.0f), y;
    int32_t n;

    y = kexp_y(xc, &n);
    y = y * u2f((uint32_t)((n >> 1) + 127) << 23) *
        u2f((uint32_t)(n - (n >> 1) + 127) << 23);
    return kself(x != x, u2f(CANON_NAN), kself(gt, y, 0.0f));
}

/*
 * kexpf() of an x in [KEXP_LO, KEXP_HI] (a number), bit for bit: no
 * clamp and no select is needed there, and n is in [-124, 127], where
 * y 2^n (normal) is the product of the two exact scalings.
 */
#define KEXP_LO     (-86.0f)
#define KEXP_HI     88.0f

static inline float kexpf_mid(float x)
{
    int32_t n;
    float y = kexp_y(x, &n);

    return y * u2f((uint32_t)(n + 127) << 23);
}

/* Are lanes [0, @n) of @a all numbers in [@lo, @hi]? */
static inline KALWAYS bool kall_in(const float *restrict a, uint32_t n,
                                   float lo, float hi)
{
    uint32_t out[KBLK] = { 0 }, any = 0;
    size_t j0 = 0, j;

    /* Lane-wise flags, one block at a time (vectorises), then merged. */
    for (; j0 + KBLK <= n; j0 += KBLK) {
        for (j = 0; j < KBLK; j++) {
            out[j] |= !((a[j0 + j] >= lo) & (a[j0 + j] <= hi));
        }
    }
    for (j = j0; j < n; j++) {
        any |= !((a[j] >= lo) & (a[j] <= hi));
    }
    for (j = 0; j < KBLK; j++) {
        any |= out[j];
    }
    return !any;
}

/*
 * EXP of lanes [0, @n) of @a into @d: kexpf_mid() when every lane is in
 * its range (softmax's x - max, most activations), else kexpf().
 */
static inline KALWAYS void kexp_lanes(float *restrict d,
                                      const float *restrict a, uint32_t n)
{
    if (kall_in(a, n, KEXP_LO, KEXP_HI)) {
        KFOR_N(j, n, { d[j] = kexpf_mid(a[j]); });
    } else {
        KFOR_N(j, n, { d[j] = kexpf(a[j]); });
    }
}

/* SIGMOID: exactly RECIP(ADD(1, EXP(NEG(x)))) in f32. */
static inline float ksigmoidf(float x)
{
    return kcanon(1.0f / (1.0f + kexpf(-x)));
}

/*
 * SIGMOID of lanes [0, @n) of @a into @d, as kexp_lanes(): with
 * kexpf_mid() when every -x is in its range (the quotient of positive
 * normal numbers needs no canonical NaN).
 */
static inline KALWAYS void ksigmoid_lanes(float *restrict d,
                                          const float *restrict a,
                                          uint32_t n)
{
    if (kall_in(a, n, -KEXP_HI, -KEXP_LO)) {
        KFOR_N(j, n, { d[j] = 1.0f / (1.0f + kexpf_mid(-a[j])); });
    } else {
        KFOR_N(j, n, { d[j] = ksigmoidf(a[j]); });
    }
}

/* 2^x: x = k + r exactly (|r| <= 1/2), 2^r = e^(r ln 2). */
static inline float kexp2(float x)
{
    bool nan = x != x;
    double xd = kseld(nan, 0.0, kseld(x > 200.0f, 200.0,
                                      kseld(x < -200.0f, -200.0, x)));
    double k = krnd(xd);
    int ki = (int)k;
    double v = kexp_core((xd - k) * KLN2) * pow2i(ki / 2) *
               pow2i(ki - ki / 2);

    return kcanon(kself(nan, x, (float)v));
}

static inline float kexpm1f(float x)
{
    bool nan = x != x;
    double xd = kseld(nan, 0.0, kseld(x > 800.0f, 800.0,
                                      kseld(x < -800.0f, -800.0, x)));

    return kcanon(kself(nan, x, (float)kexpm1(xd)));
}

/* ---- log ---------------------------------------------------------------- */

/*
 * For a positive, finite, normal double x = 2^e m (m in [sqrt(1/2),
 * sqrt(2)]): returns log(m) and sets *@e.  log(m) = 2 atanh(s), s = (m -
 * 1) / (m + 1), |s| < 0.172, by its series to s^23.
 */
static inline double klog_m(double x, double *e)
{
    uint64_t b;
    double m, s, s2, t;
    int ex;
    bool hi;

    memcpy(&b, &x, 8);
    ex = (int)((b >> 52) & 0x7ff) - 1023;
    b = (b & ((1ULL << 52) - 1)) | (1023ULL << 52);
    memcpy(&m, &b, 8);
    hi = m > 1.4142135623730951;
    m = kseld(hi, m * 0.5, m);
    *e = ex + (int)hi;
    s = (m - 1.0) / (m + 1.0);
    s2 = s * s;
    t = (1.0 / 23) * s2;
    t = (t + 1.0 / 21) * s2;
    t = (t + 1.0 / 19) * s2;
    t = (t + 1.0 / 17) * s2;
    t = (t + 1.0 / 15) * s2;
    t = (t + 1.0 / 13) * s2;
    t = (t + 1.0 / 11) * s2;
    t = (t + 1.0 / 9) * s2;
    t = (t + 1.0 / 7) * s2;
    t = (t + 1.0 / 5) * s2;
    t = (t + 1.0 / 3) * s2;
    return 2.0 * s * (1.0 + t);
}

/* Natural log of a positive, finite, normal double. */
static inline double klog(double x)
{
    double e, l = klog_m(x, &e);

    return e * LN2_HI + (e * LN2_LO + l);
}

/* log(1 + u) for u > -1 finite (Goldberg: exact when 1 + u is). */
static inline double klog1p(double u)
{
    double w = 1.0 + u;
    double ws = kseld((w > 0.0) & (w < 1e300), w, 1.0);
    double l = klog(ws) * (u / (w - 1.0));

    return kseld(w == 1.0, u, l);
}

/* Which log: 0 natural, 1 base 2, 2 base 10. */
static inline float klogf(float x, int base)
{
    double xd = kseld((x > 0.0f) & (x < INFINITY), x, 1.0);
    double e, l = klog_m(xd, &e), v;

    if (base == 1) {
        v = e + l * KINV_LN2;
    } else if (base == 2) {
        v = e * KLOG10_2 + l * KINV_LN10;
    } else {
        v = e * LN2_HI + (e * LN2_LO + l);
    }
    return kself(x == 0.0f, -INFINITY, kself(x == INFINITY, x,
                 kself(!(x > 0.0f), u2f(CANON_NAN), (float)v)));
}

static inline float klog1pf(float x)
{
    double xd = kseld((x > -1.0f) & (x < INFINITY), x, 0.0);
    float v = (float)klog1p(xd);

    return kself(x == -1.0f, -INFINITY, kself(x == INFINITY, x,
                 kself(!(x > -1.0f), u2f(CANON_NAN), v)));
}

/* ---- Trigonometric functions -------------------------------------------- */

/* sin r and cos r for |r| <= pi/4 (Taylor to r^17 and r^18). */
static inline double ksin_poly(double r)
{
    double r2 = r * r, p;

    p = 1.0 / 355687428096000.0;
    p = p * r2 - 1.0 / 1307674368000.0;
    p = p * r2 + 1.0 / 6227020800.0;
    p = p * r2 - 1.0 / 39916800.0;
    p = p * r2 + 1.0 / 362880.0;
    p = p * r2 - 1.0 / 5040.0;
    p = p * r2 + 1.0 / 120.0;
    p = p * r2 - 1.0 / 6.0;
    return r + r * r2 * p;
}

static inline double kcos_poly(double r)
{
    double r2 = r * r, p;

    p = 1.0 / 6402373705728000.0;
    p = p * r2 - 1.0 / 20922789888000.0;
    p = p * r2 + 1.0 / 87178291200.0;
    p = p * r2 - 1.0 / 479001600.0;
    p = p * r2 + 1.0 / 3628800.0;
    p = p * r2 - 1.0 / 40320.0;
    p = p * r2 + 1.0 / 720.0;
    p = p * r2 - 1.0 / 24.0;
    p = p * r2 + 0.5;
    return 1.0 - r2 * p;
}

/* Bits [@pos, @pos + 64) of floor(2/pi * 2^256). */
static uint64_t two_over_pi_bits(unsigned int pos)
{
    unsigned int w = pos / 64, b = pos % 64;

    if (w >= 4) {
        return 0;
    }
    return b ? two_over_pi[w] >> b | two_over_pi[w + 1] << (64 - b) :
               two_over_pi[w];
}

/*
 * Payne and Hanek's reduction of a finite f32 @x, |x| >= 2^20: returns
 * the quadrant q (x = (4j + q) pi/2 + r) and sets *@r, |r| <= pi/4.
 * With x = m 2^e (m an integer below 2^24, e >= -3) and N = e + 126,
 * x 2/pi mod 4 is (m * F mod 2^128) / 2^126, F the 128 bits of 2/pi
 * below 2^-(N - 128) scaled by 2^N: the bits above F make multiples of
 * 4, those below it less than 2^-102.
 */
static int kreduce_big(float x, double *r)
{
    uint32_t u = f2u(x);
    int e = (int)((u >> 23) & 0xff) - 150;
    uint64_t m = (u & 0x7fffff) | 0x800000;
    unsigned int sh = 256 - (unsigned int)(e + 126);
    unsigned __int128 f, p;
    __int128 s;
    int q;

    f = (unsigned __int128)two_over_pi_bits(sh + 64) << 64 |
        two_over_pi_bits(sh);
    p = f * m;
    q = (int)((p + ((unsigned __int128)1 << 125)) >> 126) & 3;
    s = (__int128)(p << 2);
    *r = (double)s * KTWO_M128 * KPIO2;
    if (u >> 31) {
        *r = -*r;
        q = -q & 3;
    }
    return q;
}

/* @x where mask @m is all ones, else @y (kseld() on a 64-bit mask). */
static inline double kseldm(uint64_t m, double x, double y)
{
    uint64_t ux, uy;

    memcpy(&ux, &x, 8);
    memcpy(&uy, &y, 8);
    ux = (ux & m) | (uy & ~m);
    memcpy(&x, &ux, 8);
    return x;
}

/*
 * SIN, COS or TAN of quadrant @q (its low two bits) and remainder @r.
 * The selects take 64-bit masks made from @q, a 64-bit integer: lanes of
 * one width, which the lane loops vectorise (a bool from an int does
 * not).
 */
static inline double ktrig_q(unsigned int op, uint64_t q, double r)
{
    double s = ksin_poly(r), c = kcos_poly(r), v;
    uint64_t odd = -(q & 1), neg = -((q >> 1) & 1);

    if (op == SPYRE_KOP_SIN) {
        v = kseldm(odd, c, s);
        return kseldm(neg, -v, v);
    }
    if (op == SPYRE_KOP_COS) {
        v = kseldm(odd, s, c);
        return kseldm(-(((q + 1) >> 1) & 1), -v, v);
    }
    return kseldm(odd, -c / s, s / c);
}

/* One lane, any f32 (the fix-up of large and non-finite lanes). */
static float ktrig_big(unsigned int op, float x)
{
    double r;
    int q;

    if (!isfinite(x)) {
        return u2f(CANON_NAN);
    }
    q = kreduce_big(x, &r);
    return (float)ktrig_q(op, (uint64_t)q, r);
}

/*
 * SIN, COS or TAN (@op) of @x when |x| < 2^20 (the vector lanes' part;
 * ktrig_lanes() fixes the others up): 0 for the other lanes' @big.
 */
static inline float ktrig_small(unsigned int op, float x, bool big)
{
    double xd = kseld(big, 0.0, x), k, r;
    float v;

    /* Cody and Waite: k * KPIO2_1 and k * KPIO2_2 are exact. */
    double kb = xd * KTWO_OVER_PI + KRND;
    uint64_t kq;

    memcpy(&kq, &kb, 8);
    k = kb - KRND;
    r = ((xd - k * KPIO2_1) - k * KPIO2_2) - k * KPIO2_3;
    v = (float)ktrig_q(op, kq, r);
    return kself(x == 0.0f && op != SPYRE_KOP_COS, x, v);
}

/*
 * SIN, COS or TAN (@op) of @n lanes: vector loop, then the big lanes (a
 * scalar pass only when the vector loop counted some).
 */
static inline KALWAYS void ktrig_lanes(unsigned int op, float *restrict d,
                                       const float *restrict a, uint32_t n)
{
    uint32_t nbig = 0;

    KFOR_N(j, n, {
        float x = a[j];
        bool big = !(fabsf(x) < 0x1p20f);

        nbig += big;
        d[j] = ktrig_small(op, x, big);
    });
    for (size_t j = 0; nbig && j < n; j++) {
        if (!(fabsf(a[j]) < 0x1p20f)) {
            d[j] = ktrig_big(op, a[j]);
        }
    }
}

/* ---- Inverse trigonometric functions ------------------------------------ */

/*
 * atan t for t >= 0 (inf included): t > 1 through pi/2 - atan(1/t), then
 * two halvings atan u = 2 atan(u / (1 + sqrt(1 + u^2))) down to |u| <=
 * tan(pi/16), and the series to u^23.
 */
static inline double katan_pos(double t)
{
    bool inv = t > 1.0;
    double u = inv ? 1.0 / t : t, u2, p;

    u = u / (1.0 + sqrt(1.0 + u * u));
    u = u / (1.0 + sqrt(1.0 + u * u));
    u2 = u * u;
    p = -1.0 / 23.0;
    p = p * u2 + 1.0 / 21.0;
    p = p * u2 - 1.0 / 19.0;
    p = p * u2 + 1.0 / 17.0;
    p = p * u2 - 1.0 / 15.0;
    p = p * u2 + 1.0 / 13.0;
    p = p * u2 - 1.0 / 11.0;
    p = p * u2 + 1.0 / 9.0;
    p = p * u2 - 1.0 / 7.0;
    p = p * u2 + 1.0 / 5.0;
    p = p * u2 - 1.0 / 3.0;
    p = 4.0 * (u + u * u2 * p);
    return inv ? KPIO2 - p : p;
}

static inline float katanf(float x)
{
    double v = katan_pos(fabs((double)x));

    return kcanon((float)(x < 0.0f ? -v : x == 0.0f ? x : v));
}

/* atan2(y, x) with C99 Annex F's special values. */
static inline float katan2f(float y, float x)
{
    double ay = fabs((double)y), ax = fabs((double)x), t, v;
    bool swap = ay > ax;

    t = swap ? ax / ay : ay / ax;
    t = isinf(ay) && isinf(ax) ? 1.0 : ay == 0.0 && ax == 0.0 ? 0.0 : t;
    v = katan_pos(t);
    v = swap ? KPIO2 - v : v;
    v = signbit(x) ? KPI - v : v;
    v = signbit(y) ? -v : v;
    return kcanon(x != x || y != y ? u2f(CANON_NAN) : (float)v);
}

/* asin x = atan(x / sqrt(1 - x^2)); acos x = atan2(sqrt(1 - x^2), x). */
static inline float kasinf(float x)
{
    double t = fabs((double)x), s = sqrt((1.0 - t) * (1.0 + t));
    double v = katan_pos(t / s);

    v = t > 1.0 ? NAN : v;
    return kcanon(x == 0.0f ? x : (float)(x < 0.0f ? -v : v));
}

static inline float kacosf(float x)
{
    double t = fabs((double)x), s = sqrt((1.0 - t) * (1.0 + t));
    double v = katan_pos(s / t);

    v = x < 0.0f ? KPI - v : v;
    return kcanon(t > 1.0 ? u2f(CANON_NAN) : (float)v);
}

/* ---- Hyperbolic functions ----------------------------------------------- */

/* sinh t = (E + E / (E + 1)) / 2 with E = e^t - 1; cosh from e^t. */
static inline float ksinhf(float x)
{
    double t = fabs((double)x), e, v;

    t = t > 100.0 ? 100.0 : t == t ? t : 0.0;
    e = kexpm1(t);
    v = 0.5 * (e + e / (e + 1.0));
    return kcanon(x != x ? x : x == 0.0f ? x :
                  (float)(x < 0.0f ? -v : v));
}

static inline float kcoshf(float x)
{
    double t = fabs((double)x), e;

    t = t > 100.0 ? 100.0 : t == t ? t : 0.0;
    e = kexp_core(t);
    return kcanon(x != x ? x : (float)(0.5 * (e + 1.0 / e)));
}

/* asinh t = log1p(t + t^2 / (1 + sqrt(1 + t^2))). */
static inline float kasinhf(float x)
{
    double t = fabs((double)x), v;

    t = isinf(t) ? 1.0 : t;
    v = klog1p(t + t * t / (1.0 + sqrt(1.0 + t * t)));
    return kcanon(isinf(x) || x == 0.0f || x != x ? x :
                  (float)(x < 0.0f ? -v : v));
}

/* acosh x = log1p(u + sqrt(u (u + 2))), u = x - 1 (exact). */
static inline float kacoshf(float x)
{
    double u = x >= 1.0f && x < INFINITY ? (double)x - 1.0 : 0.0;
    float v = (float)klog1p(u + sqrt(u * (u + 2.0)));

    return x == INFINITY ? x : !(x >= 1.0f) ? u2f(CANON_NAN) : v;
}

/* atanh t = log1p(2t / (1 - t)) / 2. */
static inline float katanhf(float x)
{
    double t = fabs((double)x), v;

    t = t < 1.0 ? t : 0.0;
    v = 0.5 * klog1p(2.0 * t / (1.0 - t));
    return fabsf(x) == 1.0f ? copysignf(INFINITY, x) :
           !(fabsf(x) < 1.0f) ? u2f(CANON_NAN) :
           x == 0.0f ? x : (float)(x < 0.0f ? -v : v);
}

/* ---- erf, erfc, erfinv -------------------------------------------------- */

/* erf t for 0 <= t <= 2: e^-t^2 2/sqrt(pi) sum t (2t^2)^n / (2n+1)!!. */
static inline double kerf_series(double t)
{
    double x2 = 2.0 * t * t, term = t, sum = t;
    int i;

    for (i = 0; i < 40; i++) {
        term = term * x2 * (1.0 / (2 * i + 3));
        sum += term;
    }
    return sum * kexp_core(-t * t) * KTWO_OVER_SQRTPI;
}

/*
 * erfc t for 2 <= t <= 27 by Laplace's continued fraction e^-t^2 /
 * sqrt(pi) / (t + (1/2) / (t + 1 / (t + (3/2) / (t + ...)))), 48 levels.
 */
static inline double kerfc_cf(double t)
{
    double v = t;
    int k;

    for (k = 48; k >= 1; k--) {
        v = t + (k * 0.5) / v;
    }
    return kexp_core(-t * t) * KINV_SQRTPI / v;
}

/* erfc x for a double x (NaN-free). */
static inline double kerfc(double x)
{
    double t = fabs(x);
    double s = kerf_series(t < 2.0 ? t : 2.0);
    double c = kerfc_cf(t < 2.0 ? 2.0 : t > 27.0 ? 27.0 : t);
    double ec = t <= 2.0 ? 1.0 - s : c;

    return x < 0.0 ? 2.0 - ec : ec;
}

static inline float kerfcf(float x)
{
    return kcanon(x != x ? x : (float)kerfc(x));
}

/*
 * erfinv y: Winitzki's closed form (a = 0.147, relative error below
 * 2e-3) as the start, then three Halley steps on erf x - t, evaluated as
 * (1 - t) - erfc x above t = 1/2 (1 - t is exact).
 */
static inline float kerfinvf(float y)
{
    double t = fabs((double)y), L, c, x, r, dx;
    int i;

    t = t < 1.0 ? t : 0.0;
    L = klog((1.0 - t) * (1.0 + t));
    c = 2.0 / (KPI * 0.147) + 0.5 * L;
    x = sqrt(sqrt(c * c - L / 0.147) - c);
    for (i = 0; i < 3; i++) {
        double s = kerf_series(x < 2.0 ? x : 2.0);
        double ec = x <= 2.0 ? 1.0 - s :
                    kerfc_cf(x < 2.0 ? 2.0 : x > 27.0 ? 27.0 : x);

        r = t <= 0.5 ? s - t : (1.0 - t) - ec;
        dx = r / (KTWO_OVER_SQRTPI * kexp_core(-x * x));
        x = x - dx / (1.0 + x * dx);
        x = x < 0.0 ? 0.0 : x > 6.0 ? 6.0 : x;
    }
    return fabsf(y) == 1.0f ? copysignf(INFINITY, y) :
           !(fabsf(y) < 1.0f) ? u2f(CANON_NAN) :
           y == 0.0f ? y : (float)(y < 0.0f ? -x : x);
}

/* ---- lgamma ------------------------------------------------------------- */

/*
 * log Gamma(z) for z > 0 finite: shifted up to z + k >= 10 (the product
 * of the shifts divided out), then Stirling's series to 1/z^15.
 */
static inline double klgamma_pos(double z)
{
    double p = 1.0, w, w2, s;
    int i;

    for (i = 0; i < 10; i++) {
        bool lt = z < 10.0;

        p = lt ? p * z : p;
        z = lt ? z + 1.0 : z;
    }
    w = 1.0 / z;
    w2 = w * w;
    s = -3617.0 / 122400.0;
    s = s * w2 + 1.0 / 156.0;
    s = s * w2 - 691.0 / 360360.0;
    s = s * w2 + 1.0 / 1188.0;
    s = s * w2 - 1.0 / 1680.0;
    s = s * w2 + 1.0 / 1260.0;
    s = s * w2 - 1.0 / 360.0;
    s = s * w2 + 1.0 / 12.0;
    return (z - 0.5) * klog(z) - z + KHALF_LN_2PI + s * w - klog(p);
}

/* |sin(pi x)| for a finite f32 x (exact reduction to [0, 1/2]). */
static inline double ksinpi_abs(float x)
{
    double xd = x, r = fabs(xd - 2.0 * krnd(xd * 0.5));

    r = r > 0.5 ? 1.0 - r : r;
    return r > 0.25 ? kcos_poly((0.5 - r) * KPI) : ksin_poly(r * KPI);
}

/* lgamma x; x < 0 by reflection: log(pi / |sin(pi x)|) - lgamma(1 - x). */
static inline float klgammaf(float x)
{
    bool neg = x < 0.0f, pole = x <= 0.0f && floorf(x) == x;
    double z = neg ? 1.0 - (double)x : (double)x, v;

    z = isfinite(x) && !pole ? z : 1.0;
    v = klgamma_pos(z);
    v = neg ? klog(KPI / ksinpi_abs(pole ? 0.5f : x)) - v : v;
    return kcanon(isinf(x) || pole ? INFINITY : x != x ? x :
                  x == 1.0f || x == 2.0f ? 0.0f : (float)v);
}

/* ---- Part 1's functions (kept bit for bit) ------------------------------ */

/*
 * tanh: 0, NaN and |x| >= 10 exactly; below 1/16 its series to x^11,
 * else (e^2|x| - 1) / (e^2|x| + 1); every part computed, then selected.
 */
static inline float ktanhf(float x)
{
    double d = x, d2 = d * d, s, t, e;
    bool big = fabsf(x) >= 10.0f;

    s = d + d * d2 * (-1.0 / 3 + d2 * (2.0 / 15 +
        d2 * (-17.0 / 315 + d2 * (62.0 / 2835 +
        d2 * (-1382.0 / 155925)))));
    t = kseld(big | (x != x), 0.0, fabs(d));
    e = kexp_core(2.0 * t);
    e = (e - 1.0) / (e + 1.0);
    return kself((x != x) | (x == 0.0f), kcanon(x),
                 kself(big, kself(x > 0, 1.0f, -1.0f),
                       kself(fabsf(x) < 0.0625f, (float)s,
                             (float)kseld(x < 0, -e, e))));
}

float spyre_kmath_exp(float x)
{
    return kexpf(x);
}

float spyre_kmath_log(float x)
{
    return klogf(x, 0);
}

float spyre_kmath_tanh(float x)
{
    return ktanhf(x);
}

float spyre_kmath_erf(float x)
{
    double d = fabs((double)x), t, sum, x2;
    int n;

    if (x != x || x == 0.0f) {
        return kcanon(x);
    }
    if (d >= 4.0) {
        return x > 0 ? 1.0f : -1.0f;
    }
    /* erf x = 2/sqrt(pi) e^-x^2 sum x^(2n+1) 2^n / (2n+1)!! */
    x2 = 2.0 * d * d;
    t = d;
    sum = d;
    for (n = 0; n < 200 && t > sum / 1e18; n++) {
        t = t * x2 / (2 * n + 3);
        sum += t;
    }
    sum = sum * kexp_d(-d * d) * 1.1283791670955126;
    return (float)(x < 0 ? -sum : sum);
}

float spyre_kmath_pow(float x, float y)
{
    bool yint, yodd;
    double r;

    if (y == 0.0f || x == 1.0f) {
        return 1.0f;
    }
    if (x != x || y != y) {
        return u2f(CANON_NAN);
    }
    if (isinf(y)) {
        if (fabsf(x) == 1.0f) {
            return 1.0f;
        }
        return (fabsf(x) < 1.0f) == (y > 0) ? 0.0f : INFINITY;
    }
    yint = floorf(y) == y;
    yodd = yint && fabsf(y) < 16777216.0f && ((int32_t)y & 1);
    if (x == 0.0f) {
        if (y < 0) {
            return yodd ? copysignf(INFINITY, x) : INFINITY;
        }
        return yodd ? x : 0.0f;
    }
    if (isinf(x)) {
        if (x > 0) {
            return y < 0 ? 0.0f : INFINITY;
        }
        if (y < 0) {
            return yodd ? -0.0f : 0.0f;
        }
        return yodd ? -INFINITY : INFINITY;
    }
    if (x < 0 && !yint) {
        return u2f(CANON_NAN);
    }
    r = kexp_d((double)y * klog(fabs((double)x)));
    return (float)(x < 0 && yodd ? -r : r);
}

/* ---- The exact ones ----------------------------------------------------- */

/* PyTorch's CPU sign: (0 < x) - (x < 0), so sign(NaN) and sign(-0) are 0. */
static inline float ksignf(float x)
{
    return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f;
}

static inline float kcopysignf(float x, float y)
{
    return kcanon(u2f((f2u(x) & 0x7fffffffu) | (f2u(y) & 0x80000000u)));
}

/* hypot: +inf if either is infinite (even with a NaN), else NaN wins. */
static inline float khypotf(float x, float y)
{
    double v = sqrt((double)x * x + (double)y * y);

    return isinf(x) || isinf(y) ? INFINITY : kcanon((float)v);
}

/* ---- The lane API ------------------------------------------------------- */

unsigned int spyre_kmath_arity(unsigned int op)
{
    switch (op) {
    case SPYRE_KOP_ATAN2:
    case SPYRE_KOP_COPYSIGN:
    case SPYRE_KOP_HYPOT:
        return 2;
    case SPYRE_KOP_EXP ... SPYRE_KOP_ATAN:
    case SPYRE_KOP_SINH ... SPYRE_KOP_TRUNC:
    case SPYRE_KOP_SIGN:
    case SPYRE_KOP_LGAMMA:
        return 1;
    default:
        return 0;
    }
}

/*
 * The host code paths (SPYRE_KISA_*).  Each function's lane loop is one
 * always-inline body (its name_loop), built as name_gen for the build's
 * baseline and, on x86-64, as name_avx2 with AVX2 and FMA enabled and
 * name_avx512 with AVX-512 too, as QEMU's util/bufferiszero.c builds its
 * loops.  All compute the same IEEE operations, each rounded once
 * (-ffp-contract=off holds in all: no FMA instruction unless the source
 * asks for fma), so their results are bit-identical; where the body is
 * branch-free (kseld/kself selects) a vector holds two doubles on the
 * baseline, four with AVX2, eight with AVX-512 (twice as many floats:
 * EXP and SIGMOID).
 */
unsigned int spyre_kmath_isas(void)
{
    unsigned int m = 1u << SPYRE_KISA_GENERIC;

#ifdef HOST_X86_64
    /* clang 14's __builtin_cpu_supports() knows no "f16c": CPUID 1 */
    unsigned int a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);

    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        f16c) {
        m |= 1u << SPYRE_KISA_AVX2;
        if (__builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl")) {
            m |= 1u << SPYRE_KISA_AVX512;
        }
    }
#endif
    return m;
}

#define KLANES_ARGS float *restrict d, const float *restrict a, \
                    const float *restrict b, uint32_t n
typedef void KLanesFn(KLANES_ARGS);

#ifdef HOST_X86_64
#ifdef SPYRE_TARGET_WIDTH   /* see meson.build */
#define KAVX512     "avx512f,avx512dq,avx512vl,avx2,fma,prefer-vector-width=512"
#else
#define KAVX512     "avx512f,avx512dq,avx512vl,avx2,fma"
#endif
#define KDEF_AVX2(name) \
static __attribute__((target("avx2,fma"))) void name##_avx2(KLANES_ARGS) \
{ \
    name##_loop(d, a, b, n); \
} \
static __attribute__((target(KAVX512))) void name##_avx512(KLANES_ARGS) \
{ \
    name##_loop(d, a, b, n); \
}
#define KPATHS(name) { name##_gen, name##_avx2, name##_avx512 }
#else
#define KDEF_AVX2(name)
#define KPATHS(name) { name##_gen, name##_gen, name##_gen }
#endif

/* The lane loop @name of statement STMT (over d, a, b, n), every path. */
#define KDEF_LANES(name, STMT) \
static inline KALWAYS void name##_loop(KLANES_ARGS) \
{ \
    (void)b; \
    STMT; \
} \
static void name##_gen(KLANES_ARGS) \
{ \
    name##_loop(d, a, b, n); \
} \
KDEF_AVX2(name)

/*
 * d[j] = EXPR of x = a[j] (and y = b[j]) for j < n, in KFOR_N blocks.
 * The exact ones and IEEE's (sqrt, 1/x) round once, NaN canonical;
 * floor .. trunc are libm calls on the baseline, one instruction with
 * SSE4.1 (the AVX2 paths): the same exact value.
 */
#define KDEF_MAP1(name, EXPR) \
    KDEF_LANES(name, KFOR_N(j, n, { float x = a[j]; d[j] = (EXPR); }))
#define KDEF_MAP2(name, EXPR) \
    KDEF_LANES(name, KFOR_N(j, n, { \
        float x = a[j], y = b[j]; \
        \
        d[j] = (EXPR); \
    }))

KDEF_LANES(kexp, kexp_lanes(d, a, n))
KDEF_LANES(ksigmoid, ksigmoid_lanes(d, a, n))
KDEF_MAP1(klog, klogf(x, 0))
KDEF_MAP1(ksqrt, kcanon(sqrtf(x)))
KDEF_MAP1(krsqrt, kcanon(1.0f / sqrtf(x)))
KDEF_MAP1(krecip, kcanon(1.0f / x))
KDEF_MAP1(ktanh, ktanhf(x))
KDEF_MAP1(kerf, spyre_kmath_erf(x))
KDEF_MAP1(kexp2, kexp2(x))
KDEF_MAP1(kexpm1, kexpm1f(x))
KDEF_MAP1(klog2, klogf(x, 1))
KDEF_MAP1(klog10, klogf(x, 2))
KDEF_MAP1(klog1p, klog1pf(x))
KDEF_LANES(ksin, ktrig_lanes(SPYRE_KOP_SIN, d, a, n))
KDEF_LANES(kcos, ktrig_lanes(SPYRE_KOP_COS, d, a, n))
KDEF_LANES(ktan, ktrig_lanes(SPYRE_KOP_TAN, d, a, n))
/*
 * NORMAL's Box-Muller pair: r = sqrt(-2 LOG(u1)) and t = 2 pi u2, each
 * step rounded to f32 (u2 in [0, 1): t below 2^20), then r COS(t) into
 * *@c and r SIN(t) into *@s, COS and SIN as ktrig_small() gives them
 * (one reduction serves both).
 */
static inline void knormalf(float u1, float u2, float *c, float *s)
{
    float r = sqrtf(-2.0f * klogf(u1, 0)), t = 6.28318548f * u2;

    *c = r * ktrig_small(SPYRE_KOP_COS, t, false);
    *s = r * ktrig_small(SPYRE_KOP_SIN, t, false);
}

KDEF_LANES(knormal, KFOR_N(j, n, {
    float c, s;

    knormalf(a[j], b[j], &c, &s);
    d[2 * j] = c;
    d[2 * j + 1] = s;
}))
KDEF_MAP1(kasin, kasinf(x))
KDEF_MAP1(kacos, kacosf(x))
KDEF_MAP1(katan, katanf(x))
KDEF_MAP2(katan2, katan2f(x, y))
KDEF_MAP1(ksinh, ksinhf(x))
KDEF_MAP1(kcosh, kcoshf(x))
KDEF_MAP1(kasinh, kasinhf(x))
KDEF_MAP1(kacosh, kacoshf(x))
KDEF_MAP1(katanh, katanhf(x))
KDEF_MAP1(kerfc, kerfcf(x))
KDEF_MAP1(kerfinv, kerfinvf(x))
KDEF_MAP1(kfloor, kcanon(floorf(x)))
KDEF_MAP1(kceil, kcanon(ceilf(x)))
KDEF_MAP1(kround, kcanon(rintf(x)))
KDEF_MAP1(ktrunc, kcanon(truncf(x)))
KDEF_MAP1(ksign, ksignf(x))
KDEF_MAP2(kcopysign, kcopysignf(x, y))
KDEF_MAP2(khypot, khypotf(x, y))
KDEF_MAP1(klgamma, klgammaf(x))

/* Each math opcode's lane loop, per host code path. */
static KLanesFn *const kmath_paths[SPYRE_KOP_LGAMMA + 1][3] = {
    [SPYRE_KOP_EXP] = KPATHS(kexp),
    [SPYRE_KOP_LOG] = KPATHS(klog),
    [SPYRE_KOP_SQRT] = KPATHS(ksqrt),
    [SPYRE_KOP_RSQRT] = KPATHS(krsqrt),
    [SPYRE_KOP_RECIP] = KPATHS(krecip),
    [SPYRE_KOP_TANH] = KPATHS(ktanh),
    [SPYRE_KOP_SIGMOID] = KPATHS(ksigmoid),
    [SPYRE_KOP_ERF] = KPATHS(kerf),
    [SPYRE_KOP_EXP2] = KPATHS(kexp2),
    [SPYRE_KOP_EXPM1] = KPATHS(kexpm1),
    [SPYRE_KOP_LOG2] = KPATHS(klog2),
    [SPYRE_KOP_LOG10] = KPATHS(klog10),
    [SPYRE_KOP_LOG1P] = KPATHS(klog1p),
    [SPYRE_KOP_SIN] = KPATHS(ksin),
    [SPYRE_KOP_COS] = KPATHS(kcos),
    [SPYRE_KOP_TAN] = KPATHS(ktan),
    [SPYRE_KOP_ASIN] = KPATHS(kasin),
    [SPYRE_KOP_ACOS] = KPATHS(kacos),
    [SPYRE_KOP_ATAN] = KPATHS(katan),
    [SPYRE_KOP_ATAN2] = KPATHS(katan2),
    [SPYRE_KOP_SINH] = KPATHS(ksinh),
    [SPYRE_KOP_COSH] = KPATHS(kcosh),
    [SPYRE_KOP_ASINH] = KPATHS(kasinh),
    [SPYRE_KOP_ACOSH] = KPATHS(kacosh),
    [SPYRE_KOP_ATANH] = KPATHS(katanh),
    [SPYRE_KOP_ERFC] = KPATHS(kerfc),
    [SPYRE_KOP_ERFINV] = KPATHS(kerfinv),
    [SPYRE_KOP_FLOOR] = KPATHS(kfloor),
    [SPYRE_KOP_CEIL] = KPATHS(kceil),
    [SPYRE_KOP_ROUND] = KPATHS(kround),
    [SPYRE_KOP_TRUNC] = KPATHS(ktrunc),
    [SPYRE_KOP_SIGN] = KPATHS(ksign),
    [SPYRE_KOP_COPYSIGN] = KPATHS(kcopysign),
    [SPYRE_KOP_HYPOT] = KPATHS(khypot),
    [SPYRE_KOP_LGAMMA] = KPATHS(klgamma),
};

void spyre_kmath_lanes(unsigned int isa, unsigned int op, float *d,
                       const float *a, const float *b, uint32_t n)
{
    KLanesFn *fn = NULL;
    uint32_t j;

    if (op < sizeof(kmath_paths) / sizeof(kmath_paths[0])) {
        fn = kmath_paths[op][isa <= SPYRE_KISA_AVX512 ? isa :
                             SPYRE_KISA_GENERIC];
    }
    if (!fn) {
        for (j = 0; j < n; j++) {
            d[j] = u2f(CANON_NAN);
        }
        return;
    }
    fn(d, a, b ? b : a, n);
}

void spyre_kmath_normal(unsigned int isa, float *d, const float *u1,
                        const float *u2, uint32_t n)
{
    static KLanesFn *const paths[3] = KPATHS(knormal);

    paths[isa <= SPYRE_KISA_AVX512 ? isa : SPYRE_KISA_GENERIC](d, u1, u2, n);
}

float spyre_kmath_1(unsigned int op, float a, float b)
{
    float d;

    spyre_kmath_lanes(SPYRE_KISA_GENERIC, op, &d, &a, &b, 1);
    return d;
}
