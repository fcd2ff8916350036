// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Host test of the card's f32 math library (qemu-device/spyre-kmath.c)
 * against the host's long double libm (64-bit significands, far more
 * precise than the f32 results it judges; erfinv by Newton's method on
 * erfl/erfcl): for every function, its error in f32 ulps of the exact
 * value over every special value, every breakpoint of the library's range
 * reductions and thresholds +- 40 ulps, a strided sweep of all 2^32 bit
 * patterns and dense random samples over the function's domain.  Prints
 * the largest error per function and fails when one exceeds the bound
 * docs/spyre-hw.rst states, when a NaN is not the canonical 0x7fc00000,
 * or when a zero's sign or an exact function's value differs.  KTAP
 * output, one test per function.
 *
 *   spyre-kmath-test [fast|full] [-s STRIDE] [-j THREADS] [-f NAME]
 *   spyre-kmath-test bench      ns per element of each function
 *   spyre-kmath-test exact [-s STRIDE] [-j THREADS]   EXP and SIGMOID's
 *                  vectorised lanes (spyre_kmath_lanes())
 *                  bit for bit against the scalar definition
 *                  (spyre_kmath_exp()) on every host code path, over
 *                  every STRIDE-th block of 1024 f32 inputs (default 1:
 *                  all 2^32; make -f Makefile.math kmath-exact)
 *   spyre-kmath-test normal   RAND NORMAL's fused Box-Muller pairs
 *                  (spyre_kmath_normal()) bit for bit against LOG, COS
 *                  and SIN lanes, every u1 and u2 of its 24-bit inputs, on
 *                  every host code path (make -f Makefile.math run)
 *
 * fast (make -f Makefile.math run): sweep stride 65521, 2^16 random
 * samples per function, a few seconds.  full (make -f Makefile.math
 * kmath-sweep): stride 251 and 2^22 random samples, 2 threads.  -s 1 -f
 * NAME sweeps all 2^32 inputs of one function.
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drm/spyre_cmd.h"
#include "spyre-kernel.h"
#include "spyre-kmath.h"

#define BLK 1024
/* f2u(), u2f() and CANON_NAN: spyre-kmath.h. */

/* ---- references ------------------------------------------------------- */

/* erfinv by Newton's method in long double from @x0 (card's value). */
static long double ref_erfinv(float y, float x0)
{
    long double t = fabsl((long double)y), x, r;
    int i;

    if (y != y || t > 1)
        return NAN;
    if (t == 1)
        return y > 0 ? INFINITY : -INFINITY;
    if (y == 0)
        return y;
    x = isfinite(x0) && fabsf(x0) < 6 ? fabsl((long double)x0) : 1;
    for (i = 0; i < 8; i++) {
        r = t <= 0.5L ? erfl(x) - t : (1 - t) - erfcl(x);
        x -= r / (1.1283791670955125738961589031215452L * expl(-x * x));
        if (x < 0)
            x = 0;
    }
    return y < 0 ? -x : x;
}

static long double ref_sign(float x)
{
    return (0 < x) - (x < 0);
}

/* The exact value of @op at (@x, @y) (@card: the card's result). */
static long double ref(unsigned int op, float x, float y, float card)
{
    long double X = x, Y = y;

    switch (op) {
    case SPYRE_KOP_EXP: return expl(X);
    case SPYRE_KOP_LOG: return logl(X);
    case SPYRE_KOP_SQRT: return sqrtl(X);
    case SPYRE_KOP_RSQRT: return 1.0f / sqrtf(x);  /* two roundings */
    case SPYRE_KOP_RECIP: return 1 / X;
    case SPYRE_KOP_TANH: return tanhl(X);
    case SPYRE_KOP_SIGMOID:   /* exactly RECIP(ADD(1, EXP(NEG(a)))) */
        return 1.0f / (1.0f + spyre_kmath_exp(-x));
    case SPYRE_KOP_ERF: return erfl(X);
    case SPYRE_KOP_EXP2: return exp2l(X);
    case SPYRE_KOP_EXPM1: return expm1l(X);
    case SPYRE_KOP_LOG2: return log2l(X);
    case SPYRE_KOP_LOG10: return log10l(X);
    case SPYRE_KOP_LOG1P: return log1pl(X);
    case SPYRE_KOP_SIN: return sinl(X);
    case SPYRE_KOP_COS: return cosl(X);
    case SPYRE_KOP_TAN: return tanl(X);
    case SPYRE_KOP_ASIN: return asinl(X);
    case SPYRE_KOP_ACOS: return acosl(X);
    case SPYRE_KOP_ATAN: return atanl(X);
    case SPYRE_KOP_ATAN2: return atan2l(X, Y);
    case SPYRE_KOP_SINH: return sinhl(X);
    case SPYRE_KOP_COSH: return coshl(X);
    case SPYRE_KOP_ASINH: return asinhl(X);
    case SPYRE_KOP_ACOSH: return acoshl(X);
    case SPYRE_KOP_ATANH: return atanhl(X);
    case SPYRE_KOP_ERFC: return erfcl(X);
    case SPYRE_KOP_ERFINV: return ref_erfinv(x, card);
    case SPYRE_KOP_FLOOR: return floorl(X);
    case SPYRE_KOP_CEIL: return ceill(X);
    case SPYRE_KOP_ROUND: return nearbyintl(X);
    case SPYRE_KOP_TRUNC: return truncl(X);
    case SPYRE_KOP_SIGN: return x != x ? 0 : ref_sign(x);
    case SPYRE_KOP_COPYSIGN: return copysignl(X, Y);
    case SPYRE_KOP_HYPOT: return hypotl(X, Y);
    case SPYRE_KOP_LGAMMA: return lgammal(X);
    default: return NAN;
    }
}

/*
 * Error of @f against @r in f32 ulps of @r (an overflow that rounds to
 * @f's infinity is exact, other infinities count as +-2^128, the ulp of
 * subnormals 2^-149); INFINITY for a NaN mismatch, a non-canonical NaN or
 * a zero of the wrong sign.
 */
static double ulp_err(float f, long double r)
{
    long double F = f, a;
    int e;

    if (isnan(r) || isnan(f))
        return isnan(r) && f2u(f) == CANON_NAN ? 0 : INFINITY;
    if (r == 0 && f == 0)
        return !signbit(r) == !signbit(f) ? 0 : INFINITY;
    if (isinf(F) && (float)r == f)
        return 0;       /* the exact value overflows f32 */
    if (isinf(F))
        F = copysignl(0x1p128L, F);
    if (isinf(r))
        r = copysignl(0x1p128L, r);
    a = fabsl(r);
    e = a >= 0x1p127L ? 127 : a < 0x1p-126L ? -126 : ilogbl(a);
    return (double)(fabsl(F - r) / ldexpl(1, e - 23));
}

/* ---- functions under test --------------------------------------------- */

struct kfn {
    const char *name;
    unsigned int op, arity;
    double bound;           /* ulps */
    double abs_bound;       /* or, when non-zero, this absolute error */
    float lo, hi;           /* dense random samples in [lo, hi] */
    const float *brk;       /* breakpoints (NAN-terminated) */
};

static const float brk_exp[] = { 88.72283f, -87.33654f, -103.97208f,
                                 -103.27893f, 0.34657359f, 800, -800, NAN };
static const float brk_exp2[] = { 128, -126, -149, -150, 0.5f, -0.5f, 1, 200,
                                  -200, NAN };
static const float brk_expm1[] = { 0.5f, -0.5f, 88.72283f, -17, 1e-8f,
                                   NAN };
static const float brk_log[] = { 1, 1.41421356f, 0.70710678f, 2, 0.5f,
                                 2.82842712f, 0x1p-126f, 0x1p-149f, NAN };
static const float brk_log1p[] = { -1, 0, 0.41421356f, -0.29289322f,
                                   0x1p-20f, -0x1p-20f, 0x1p-29f, NAN };
static const float brk_trig[] = { 0.78539816f, 1.57079633f, 2.35619449f,
                                  3.14159265f, 4.71238898f, 6.28318531f,
                                  0x1p20f, -0x1p20f, 0x1p24f, 1e30f,
                                  3.4e38f, 1e-20f, 12.5663706f,
                                  100.530965f, 1000.0f, 102943.7f, NAN };
static const float brk_inv[] = { 1, -1, 0.5f, -0.5f, 0.41421356f,
                                 0.19891237f, 0.70710678f, 2.4142136f,
                                 0.999f, NAN };
static const float brk_hyp[] = { 0.5f, 88.72283f, 89.41599f, 100, 1, 2,
                                 1e-20f, NAN };
static const float brk_erf[] = { 2, -2, 4, -4, 3.9f, 10.0546f, 9.194f,
                                 27, 0.5f, 1e-20f, NAN };
static const float brk_erfinv[] = { 0.5f, -0.5f, 1, -1, 0.99999994f,
                                    0.9999999f, 0.9953223f, 0.8427008f,
                                    1e-30f, NAN };
static const float brk_lgamma[] = { 1, 2, 10, 9.9999f, 0.5f, 3,
                                    -2.4570749f, -2.7476826f, -3.1435473f,
                                    -3.9552154f, -4.0390298f, -4.9991650f,
                                    -5.0008302f, -0.5f, -1.5f, -9.5f,
                                    -10.5f, 4.0850e36f, 1e-30f, -1e-30f,
                                    0x1p23f, -0x1p23f, NAN };
static const float brk_none[] = { 1, -1, 0.5f, 1.5f, 2.5f, -2.5f, 0x1p23f,
                                  8388607.5f, NAN };

static const struct kfn fns[] = {
    { "exp", SPYRE_KOP_EXP, 1, 1, 0, -110, 95, brk_exp },
    { "log", SPYRE_KOP_LOG, 1, 1, 0, 0, 100, brk_log },
    { "sqrt", SPYRE_KOP_SQRT, 1, 0.5, 0, 0, 1e6f, brk_log },
    { "rsqrt", SPYRE_KOP_RSQRT, 1, 0, 0, 0, 1e6f, brk_log },
    { "recip", SPYRE_KOP_RECIP, 1, 0.5, 0, -1e3f, 1e3f, brk_none },
    { "tanh", SPYRE_KOP_TANH, 1, 1, 0, -12, 12, brk_hyp },
    { "sigmoid", SPYRE_KOP_SIGMOID, 1, 0, 0, -110, 110, brk_exp },
    { "erf", SPYRE_KOP_ERF, 1, 1, 0, -5, 5, brk_erf },
    { "exp2", SPYRE_KOP_EXP2, 1, 1, 0, -155, 130, brk_exp2 },
    { "expm1", SPYRE_KOP_EXPM1, 1, 1, 0, -20, 90, brk_expm1 },
    { "log2", SPYRE_KOP_LOG2, 1, 1, 0, 0, 100, brk_log },
    { "log10", SPYRE_KOP_LOG10, 1, 1, 0, 0, 100, brk_log },
    { "log1p", SPYRE_KOP_LOG1P, 1, 1, 0, -1, 10, brk_log1p },
    { "sin", SPYRE_KOP_SIN, 1, 1, 0, -1e4f, 1e4f, brk_trig },
    { "cos", SPYRE_KOP_COS, 1, 1, 0, -1e4f, 1e4f, brk_trig },
    { "tan", SPYRE_KOP_TAN, 1, 1, 0, -1e4f, 1e4f, brk_trig },
    { "asin", SPYRE_KOP_ASIN, 1, 1, 0, -1, 1, brk_inv },
    { "acos", SPYRE_KOP_ACOS, 1, 1, 0, -1, 1, brk_inv },
    { "atan", SPYRE_KOP_ATAN, 1, 1, 0, -10, 10, brk_inv },
    { "atan2", SPYRE_KOP_ATAN2, 2, 1, 0, -10, 10, brk_inv },
    { "sinh", SPYRE_KOP_SINH, 1, 1, 0, -95, 95, brk_hyp },
    { "cosh", SPYRE_KOP_COSH, 1, 1, 0, -95, 95, brk_hyp },
    { "asinh", SPYRE_KOP_ASINH, 1, 1, 0, -100, 100, brk_inv },
    { "acosh", SPYRE_KOP_ACOSH, 1, 1, 0, 1, 100, brk_inv },
    { "atanh", SPYRE_KOP_ATANH, 1, 1, 0, -1, 1, brk_inv },
    { "erfc", SPYRE_KOP_ERFC, 1, 1, 0, -5, 11, brk_erf },
    { "erfinv", SPYRE_KOP_ERFINV, 1, 1, 0, -1, 1, brk_erfinv },
    { "floor", SPYRE_KOP_FLOOR, 1, 0, 0, -1e7f, 1e7f, brk_none },
    { "ceil", SPYRE_KOP_CEIL, 1, 0, 0, -1e7f, 1e7f, brk_none },
    { "round", SPYRE_KOP_ROUND, 1, 0, 0, -1e7f, 1e7f, brk_none },
    { "trunc", SPYRE_KOP_TRUNC, 1, 0, 0, -1e7f, 1e7f, brk_none },
    { "sign", SPYRE_KOP_SIGN, 1, 0, 0, -10, 10, brk_none },
    { "copysign", SPYRE_KOP_COPYSIGN, 2, 0, 0, -10, 10, brk_none },
    { "hypot", SPYRE_KOP_HYPOT, 2, 1, 0, -1e3f, 1e3f, brk_none },
    { "lgamma", SPYRE_KOP_LGAMMA, 1, 1, 0x1p-44, -20, 20, brk_lgamma },
};
#define NFNS (sizeof(fns) / sizeof(fns[0]))

static const uint32_t specials[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
    0x7f800001, 0x7fbfffff, 0xffffffff, 0x00000001, 0x80000001, 0x007fffff,
    0x807fffff, 0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff, 0x3f800000,
    0xbf800000, 0x3f000000, 0xbf000000, 0x40000000, 0xc0000000, 0x3f7fffff,
    0xbf7fffff, 0x3f800001, 0xbf800001, 0x33800000, 0xb3800000, 0x4b000000,
    0xcb000000, 0x4b800000, 0x40490fdb, 0xc0490fdb, 0x3fc90fdb, 0xbfc90fdb,
};
#define NSPEC (sizeof(specials) / sizeof(specials[0]))

/* ---- the sweep -------------------------------------------------------- */

struct job {
    const struct kfn *f;
    uint64_t stride, nrand;
    uint64_t first, step;   /* blocks first, first + step, ... */
    /* results */
    double max_ulp, max_abs;
    float arg_x, arg_y;
    uint64_t n, bad, misrounded;    /* misrounded: above 0.5 ulp */
    uint64_t pathdiff;      /* lanes where a host code path differs */
    float bad_x, bad_y, bad_got;
    long double bad_want;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static float rnd_in(uint64_t h, float lo, float hi)
{
    double u = (double)(h >> 11) * 0x1p-53;

    return (float)(lo + (hi - lo) * u);
}

/* Specials, special pairs and breakpoint neighbourhoods of @f. */
static size_t nfixed(const struct kfn *f)
{
    size_t nb = 0;

    while (!isnan(f->brk[nb]))
        nb++;
    return NSPEC + 2 * nb * 81 + (f->arity == 2 ? NSPEC * NSPEC : 0);
}

/* Input @i of a job: fixed ones, then the sweep, then random samples. */
static void sample(const struct job *jb, uint64_t i, float *x, float *y)
{
    const struct kfn *f = jb->f;
    uint64_t nfix = nfixed(f), nsweep = (1ULL << 32) / jb->stride, h;

    *y = 1.0f;
    if (i < NSPEC) {
        *x = u2f(specials[i]);
        return;
    }
    if (i < nfix) {
        i -= NSPEC;
        if (f->arity == 2 && i < NSPEC * NSPEC) {
            *x = u2f(specials[i / NSPEC]);
            *y = u2f(specials[i % NSPEC]);
            return;
        }
        if (f->arity == 2)
            i -= NSPEC * NSPEC;
        /* breakpoint i / 162, both signs, -40 .. +40 ulps */
        {
            float b = f->brk[i / 162];
            int k = (int)(i % 81) - 40;
            uint32_t u = f2u(i % 162 >= 81 ? -b : b);

            *x = u2f(u + k);
            if (f->arity == 2)
                *y = (i / 81) & 1 ? 1.0f : -0.75f;
        }
        return;
    }
    i -= nfix;
    h = mix(i * 0x9e3779b97f4a7c15ULL + f->op);
    if (i < nsweep) {
        *x = u2f((uint32_t)(i * jb->stride + (h & 0xff) % jb->stride));
        *y = u2f((uint32_t)mix(h));
        if (f->arity == 2 && (h & 3) == 0)
            *y = *x * rnd_in(mix(h + 1), 0.5f, 2.0f);
        return;
    }
    *x = rnd_in(h, f->lo, f->hi);
    *y = rnd_in(mix(h + 7), f->lo, f->hi);
    if (f->arity == 2 && (h & 1))
        *y = u2f(f2u(*y) + (uint32_t)((h >> 8) % 64 - 32) * 0x800000u);
}

static void *run_job(void *opaque)
{
    struct job *jb = opaque;
    const struct kfn *f = jb->f;
    uint64_t total = nfixed(f) + (1ULL << 32) / jb->stride + jb->nrand;
    uint64_t blk, j;
    unsigned int isa, isas = spyre_kmath_isas();
    float x[BLK], y[BLK], d[BLK], e[BLK];

    for (blk = jb->first; blk * BLK < total; blk += jb->step) {
        uint64_t n = total - blk * BLK < BLK ? total - blk * BLK : BLK;

        for (j = 0; j < n; j++)
            sample(jb, blk * BLK + j, &x[j], &y[j]);
        spyre_kmath_lanes(SPYRE_KISA_GENERIC, f->op, d, x, y, (uint32_t)n);
        /* every other host code path: the same bits */
        for (isa = 1; isa < 32; isa++) {
            if (!(isas & (1u << isa)))
                continue;
            spyre_kmath_lanes(isa, f->op, e, x, y, (uint32_t)n);
            for (j = 0; j < n; j++)
                jb->pathdiff += f2u(e[j]) != f2u(d[j]);
        }
        for (j = 0; j < n; j++) {
            long double r = ref(f->op, x[j], y[j], d[j]);
            double e = ulp_err(d[j], r), ab;
            bool ok;

            ab = isfinite(r) && isfinite(d[j]) ?
                 (double)fabsl((long double)d[j] - r) : e ? INFINITY : 0;
            ok = e <= f->bound || (f->abs_bound && ab <= f->abs_bound);
            /* exact functions: bit for bit (NaNs canonical) */
            if (!f->bound && !(isnan(r) && f2u(d[j]) == CANON_NAN) &&
                f2u(d[j]) != f2u((float)r))
                ok = false;
            if (e > jb->max_ulp) {
                jb->max_ulp = e;
                jb->arg_x = x[j];
                jb->arg_y = y[j];
            }
            if (f->abs_bound && e > f->bound && ab > jb->max_abs)
                jb->max_abs = ab;
            jb->misrounded += e > 0.5;
            if (!ok) {
                if (!jb->bad) {
                    jb->bad_x = x[j];
                    jb->bad_y = y[j];
                    jb->bad_got = d[j];
                    jb->bad_want = r;
                }
                jb->bad++;
            }
            jb->n++;
        }
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * ns per element of spyre_kmath_lanes() over 1024-lane vectors of random
 * inputs in each function's dense range (best of 5 passes over 1 Mi
 * elements), per host code path: a benchmark, never an assertion.
 */
static int bench(void)
{
    enum { NB = 1 << 20 };
    static float x[NB], y[NB], d[NB];
    unsigned int isa, isas = spyre_kmath_isas();
    size_t k, i, r;

    printf("%-8s", "ns/elem");
    for (isa = 0; isa < 32; isa++)
        if (isas & (1u << isa))
            printf(" %8s", isa == SPYRE_KISA_AVX512 ? "avx512" :
                   isa == SPYRE_KISA_AVX2 ? "avx2" : "generic");
    printf("\n");

    for (k = 0; k < NFNS; k++) {
        const struct kfn *f = &fns[k];

        for (i = 0; i < NB; i++) {
            x[i] = rnd_in(mix(i + 1), f->lo, f->hi);
            y[i] = rnd_in(mix(i + NB), f->lo, f->hi);
        }
        printf("%-8s", f->name);
        for (isa = 0; isa < 32; isa++) {
            double best = 1e9;

            if (!(isas & (1u << isa)))
                continue;
            for (r = 0; r < 5; r++) {
                double t0 = now();

                for (i = 0; i < NB; i += BLK)
                    spyre_kmath_lanes(isa, f->op, d + i, x + i, y + i, BLK);
                t0 = now() - t0;
                best = t0 < best ? t0 : best;
            }
            printf(" %8.2f", best * 1e9 / NB);
        }
        printf("\n");
    }
    return 0;
}

/* One thread of exact: blocks first, first + step, ... */
struct xjob {
    uint64_t first, step, stride;
    uint64_t n, diff;
    float diff_x;
};

static void *run_exact(void *opaque)
{
    struct xjob *jb = opaque;
    unsigned int isa, isas = spyre_kmath_isas(), op;
    float x[BLK], d[BLK], want[2][BLK];
    uint64_t blk;
    size_t j;

    for (blk = jb->first * jb->stride; blk < (1ULL << 32) / BLK;
         blk += jb->step * jb->stride) {
        for (j = 0; j < BLK; j++) {
            x[j] = u2f((uint32_t)(blk * BLK + j));
            want[0][j] = spyre_kmath_exp(x[j]);
            want[1][j] = 1.0f / (1.0f + spyre_kmath_exp(-x[j]));
            if (isnan(want[1][j]))
                want[1][j] = u2f(CANON_NAN);
        }
        for (isa = 0; isa < 32; isa++) {
            if (!(isas & (1u << isa)))
                continue;
            for (op = 0; op < 2; op++) {
                spyre_kmath_lanes(isa, op ? SPYRE_KOP_SIGMOID : SPYRE_KOP_EXP,
                                  d, x, NULL, BLK);
                for (j = 0; j < BLK; j++) {
                    if (f2u(d[j]) != f2u(want[op][j])) {
                        if (!jb->diff)
                            jb->diff_x = op ? -x[j] : x[j];
                        jb->diff++;
                    }
                }
            }
        }
        jb->n += BLK;
    }
    return NULL;
}

static int exact(uint64_t stride, unsigned int threads)
{
    struct xjob jb[64];
    pthread_t tid[64];
    uint64_t n = 0, diff = 0;
    float first = 0;
    unsigned int t;

    printf("TAP version 13\n1..1\n");
    for (t = 0; t < threads; t++) {
        jb[t] = (struct xjob){ .first = t, .step = threads,
                               .stride = stride };
        if (pthread_create(&tid[t], NULL, run_exact, &jb[t])) {
            perror("pthread_create");
            return 2;
        }
    }
    for (t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        n += jb[t].n;
        if (jb[t].diff && !diff)
            first = jb[t].diff_x;
        diff += jb[t].diff;
    }
    printf("# exp, sigmoid: %llu inputs (every %llu-th block of %d), "
           "%llu lanes differ from spyre_kmath_exp()",
           (unsigned long long)n, (unsigned long long)stride, BLK,
           (unsigned long long)diff);
    if (diff)
        printf(", first e^%a", first);
    printf("\n%s 1 kmath_exp_exact\n", diff ? "not ok" : "ok");
    printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n",
           !diff, !!diff);
    return diff ? 1 : 0;
}

/*
 * RAND NORMAL's fused pairs (spyre_kmath_normal()) against their
 * definition from LOG, COS and SIN lanes (generic path), bit for bit, on
 * every host code path: every u1 = k 2^-24 (k in [1, 2^24]) and every
 * u2 = j 2^-24 (j in [0, 2^24)), paired as k - 1 = i, j = i * an odd
 * number mod 2^24 (a permutation), i over all 2^24 pairs.
 */
static int normal_exact(void)
{
    static float u1[BLK], u2[BLK], l[BLK], c[BLK], sn[BLK], t[BLK];
    static float want[2 * BLK], d[2 * BLK];
    unsigned int isa, isas = spyre_kmath_isas();
    uint64_t diff = 0, n = 0;
    uint32_t i0, i, first = 0;

    printf("TAP version 13\n1..1\n");
    for (i0 = 0; i0 < (1u << 24); i0 += BLK) {
        for (i = 0; i < BLK; i++) {
            u1[i] = (float)(i0 + i + 1) / 16777216.0f;
            u2[i] = (float)((i0 + i) * 0x9e3779b1u & 0xffffff) / 16777216.0f;
            t[i] = 6.28318548f * u2[i];
        }
        spyre_kmath_lanes(SPYRE_KISA_GENERIC, SPYRE_KOP_LOG, l, u1, NULL, BLK);
        spyre_kmath_lanes(SPYRE_KISA_GENERIC, SPYRE_KOP_COS, c, t, NULL, BLK);
        spyre_kmath_lanes(SPYRE_KISA_GENERIC, SPYRE_KOP_SIN, sn, t, NULL, BLK);
        for (i = 0; i < BLK; i++) {
            float r = sqrtf(-2.0f * l[i]);

            want[2 * i] = r * c[i];
            want[2 * i + 1] = r * sn[i];
        }
        for (isa = 0; isa < 32; isa++) {
            if (!(isas & (1u << isa)))
                continue;
            spyre_kmath_normal(isa, d, u1, u2, BLK);
            for (i = 0; i < 2 * BLK; i++) {
                if (f2u(d[i]) != f2u(want[i])) {
                    if (!diff)
                        first = i0 + i / 2;
                    diff++;
                }
            }
        }
        n += BLK;
    }
    printf("# normal: %llu (u1, u2) pairs, %llu values differ from "
           "sqrt(-2 LOG(u1)) COS and SIN(2 pi u2)", (unsigned long long)n,
           (unsigned long long)diff);
    if (diff)
        printf(", first at u1 = %u 2^-24", first + 1);
    printf("\n%s 1 kmath_normal_exact\n", diff ? "not ok" : "ok");
    printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n",
           !diff, !!diff);
    return diff ? 1 : 0;
}

int main(int argc, char **argv)
{
    bool full = argc > 1 && !strcmp(argv[1], "full");
    uint64_t stride = full ? 251 : 65521, nrand = full ? 1u << 22 : 1u << 16;
    unsigned int threads = full ? 2 : 1, t, k, pass = 0, fail = 0, nsel = 0;
    const char *only = NULL;
    int i;

    bool ex = argc > 1 && !strcmp(argv[1], "exact");

    if (argc > 1 && !strcmp(argv[1], "bench"))
        return bench();
    if (argc > 1 && !strcmp(argv[1], "normal"))
        return normal_exact();
    if (ex) {
        stride = 1;
        threads = 2;
    }
    for (i = 1 + ex; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc)
            stride = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-j") && i + 1 < argc)
            threads = (unsigned int)atoi(argv[++i]);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "fast") && strcmp(argv[i], "full")) {
            fprintf(stderr, "usage: %s [fast|full] [-s STRIDE] "
                    "[-j THREADS] [-f NAME] | bench | exact [-s STRIDE] "
                    "[-j THREADS] | normal\n", argv[0]);
            return 2;
        }
    }
    if (!stride || !threads || threads > 64) {
        fprintf(stderr, "bad stride or thread count\n");
        return 2;
    }
    if (ex)
        return exact(stride, threads);
    for (k = 0; k < NFNS; k++)
        nsel += !only || !strcmp(only, fns[k].name);
    printf("TAP version 13\n1..%u\n", nsel);
    printf("# sweep stride %llu, %llu random samples per function, "
           "%u threads\n", (unsigned long long)stride,
           (unsigned long long)nrand, threads);
    for (k = 0, nsel = 0; k < NFNS; k++) {
        const struct kfn *f = &fns[k];
        struct job jb[64];
        pthread_t tid[64];
        struct job sum = { .f = f };

        if (only && strcmp(only, f->name))
            continue;
        for (t = 0; t < threads; t++) {
            jb[t] = (struct job){ .f = f, .stride = stride, .nrand = nrand,
                                  .first = t, .step = threads };
            if (pthread_create(&tid[t], NULL, run_job, &jb[t])) {
                perror("pthread_create");
                return 2;
            }
        }
        for (t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            sum.n += jb[t].n;
            sum.misrounded += jb[t].misrounded;
            if (jb[t].max_ulp > sum.max_ulp) {
                sum.max_ulp = jb[t].max_ulp;
                sum.arg_x = jb[t].arg_x;
                sum.arg_y = jb[t].arg_y;
            }
            if (jb[t].max_abs > sum.max_abs)
                sum.max_abs = jb[t].max_abs;
            if (jb[t].bad && !sum.bad) {
                sum.bad_x = jb[t].bad_x;
                sum.bad_y = jb[t].bad_y;
                sum.bad_got = jb[t].bad_got;
                sum.bad_want = jb[t].bad_want;
            }
            sum.bad += jb[t].bad;
            sum.pathdiff += jb[t].pathdiff;
        }
        printf("# %-8s max %.5f ulp (bound %g", f->name, sum.max_ulp,
               f->bound);
        if (f->abs_bound)
            printf(" or %.3g absolute; where above %g ulp, max absolute "
                   "%.3g", f->abs_bound, f->bound, sum.max_abs);
        printf(") at x=%a", sum.arg_x);
        if (f->arity == 2)
            printf(" y=%a", sum.arg_y);
        printf(", %llu inputs, %llu not correctly rounded\n",
               (unsigned long long)sum.n,
               (unsigned long long)sum.misrounded);
        if (sum.bad) {
            printf("# %s: %llu outside the bound, first f(%a", f->name,
                   (unsigned long long)sum.bad, sum.bad_x);
            if (f->arity == 2)
                printf(", %a", sum.bad_y);
            printf(") = %a (0x%08x), exact %La\n", sum.bad_got,
                   f2u(sum.bad_got), sum.bad_want);
        }
        if (sum.pathdiff)
            printf("# %s: %llu results differ between host code paths\n",
                   f->name, (unsigned long long)sum.pathdiff);
        if (sum.bad || sum.pathdiff)
            fail++;
        else
            pass++;
        printf("%s %u kmath_%s\n", sum.bad || sum.pathdiff ? "not ok" : "ok",
               ++nsel,
               f->name);
        fflush(stdout);
    }
    printf("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:0 error:0\n",
           pass, fail);
    return fail ? 1 : 0;
}
