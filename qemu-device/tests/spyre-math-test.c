// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Host unit test of the Spyre card's numeric core (qemu-device/spyre-math.c)
 * against independent references:
 *  - binary16: gcc's _Float16 (conversions are correctly rounded, RNE);
 *  - bfloat16: a field-wise ldexp decoder and a two-candidate nearest
 *    search in double;
 *  - OCP OFP8 E4M3/E5M2: a decoder written from the spec's formula with
 *    ldexp, and an exhaustive nearest search over the decoded values with
 *    ties to the even mantissa;
 *  - GEMM, element-wise, reduction and row ops: fp64 computations on the
 *    decoded inputs, with error bounds stated next to each check.
 *
 * Build and run: make -f Makefile.math run   (see Makefile.math)
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "kselftest_harness.h"

#include "spyre-math.h"

#define U32 (1.0 / 16777216.0)          /* 2^-24: fp32 unit roundoff */

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd64(void)
{
    uint64_t x = rng_state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

static uint32_t rnd32(void)
{
    return (uint32_t)(rnd64() >> 32);
}

/* Uniform in [lo, hi). */
static double rnd_uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(rnd64() >> 11) / 9007199254740992.0;
}

static uint32_t f2u(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;

    memcpy(&f, &u, 4);
    return f;
}

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Count checks; log the first few failures of a test. */
struct tally {
    unsigned long checks, fails;
};

#define CHECK(t, cond, fmt, ...) do {                                   \
    (t)->checks++;                                                      \
    if (!(cond) && (t)->fails++ < 8)                                    \
        TH_LOG(fmt, ##__VA_ARGS__);                                     \
} while (0)

/* ---- independent references ------------------------------------------- */

static float ref_fp16_to_fp32(uint16_t h)
{
    _Float16 v;

    memcpy(&v, &h, 2);
    return (float)v;
}

static uint16_t ref_fp32_to_fp16(float f)
{
    _Float16 v = (_Float16)f;
    uint16_t h;

    memcpy(&h, &v, 2);
    return h;
}

/* bfloat16 from its fields: 1 sign, 8 exponent (bias 127), 7 fraction. */
static double ref_bf16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
    double v;

    if (e == 0xff) {
        v = m ? NAN : INFINITY;
    } else if (e == 0) {
        v = ldexp(m, -126 - 7);
    } else {
        v = ldexp(1.0 + ldexp(m, -7), e - 127);
    }
    return s ? -v : v;
}

/*
 * binary32 -> bfloat16 by nearest search between the two bfloat16 values
 * around |x| (the truncation and the next one up, 2^128 standing for the
 * overflow to infinity), ties to the even encoding.  NaN is not handled.
 */
static uint16_t ref_fp32_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double ax = fabs((double)f);
    uint16_t lo = (uint16_t)((f2u(f) & 0x7fffffff) >> 16);
    uint16_t hi = lo + 1;
    double vlo, vhi, dlo, dhi;

    if (isinf(ax)) {
        return sign | 0x7f80;
    }
    vlo = ref_bf16_value(lo);
    vhi = hi == 0x7f80 ? ldexp(1.0, 128) : ref_bf16_value(hi);
    dlo = ax - vlo;
    dhi = vhi - ax;
    if (dlo < dhi || (dlo == dhi && !(lo & 1))) {
        return sign | lo;
    }
    return sign | hi;
}

/*
 * OCP OFP8 (v1.0) value of an encoding: E4M3 has bias 7, 3 fraction bits,
 * no infinities and NaN only at S.1111.111; E5M2 has bias 15, 2 fraction
 * bits and IEEE-like S.11111.00 = inf, S.11111.{01,10,11} = NaN.
 * Normal: (-1)^S * 2^(E - bias) * (1 + M / 2^m); subnormal (E == 0):
 * (-1)^S * 2^(1 - bias) * (M / 2^m).
 */
static double ref_fp8_value(unsigned v, bool e5)
{
    int mbits = e5 ? 2 : 3, bias = e5 ? 15 : 7;
    int emax = e5 ? 31 : 15;
    int s = (v >> 7) & 1;
    int e = (v >> mbits) & emax;
    int m = v & ((1 << mbits) - 1);
    double val;

    if (e5 && e == emax) {
        val = m ? NAN : INFINITY;
    } else if (!e5 && e == emax && m == 7) {
        val = NAN;
    } else if (e == 0) {
        val = ldexp(1.0, 1 - bias) * ldexp(m, -mbits);
    } else {
        val = ldexp(1.0, e - bias) * (1.0 + ldexp(m, -mbits));
    }
    return s ? -val : val;
}

/*
 * binary32 -> fp8 by exhaustive nearest search over the non-negative
 * finite encodings, ties to the encoding with an even LSB.  With @nosat
 * the value one ulp above max (480 for E4M3, whose encoding S.1111.111
 * has an odd LSB; 65536 for E5M2, encoding S.11111.00, even) competes too
 * and stands for NaN / inf.  Saturating mode clamps infinities to max.
 */
static uint8_t ref_fp32_to_fp8(float f, bool e5, bool nosat)
{
    unsigned maxc = e5 ? 0x7b : 0x7e;
    unsigned over = maxc + 1;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    double ax = fabs((double)f);
    double best_d = INFINITY, vmax, vover, d;
    unsigned c, best = 0;

    if (isnan(f)) {
        return sign | 0x7f;
    }
    vmax = ref_fp8_value(maxc, e5);
    vover = vmax + (vmax - ref_fp8_value(maxc - 1, e5));
    if (ax >= vover) {
        /* Far beyond: the distances below would not be exact. */
        return sign | (nosat ? over : maxc);
    }
    for (c = 0; c <= maxc; c++) {
        d = fabs(ax - ref_fp8_value(c, e5));
        if (d < best_d || (d == best_d && !(c & 1))) {
            best_d = d;
            best = c;
        }
    }
    if (nosat) {
        d = fabs(ax - vover);
        if (d < best_d || (d == best_d && !(over & 1))) {
            return sign | over;
        }
    }
    return sign | best;
}

/* Value of element @i of a buffer of @dtype, decoded independently. */
static double ref_decode(int dtype, const void *buf, size_t i)
{
    const uint8_t *p = buf;
    uint16_t h;
    uint32_t w;
    int32_t iw;

    switch (dtype) {
    case SPYRE_DTYPE_FP32:
        memcpy(&w, p + 4 * i, 4);
        return u2f(w);
    case SPYRE_DTYPE_FP16:
        memcpy(&h, p + 2 * i, 2);
        return ref_fp16_to_fp32(h);
    case SPYRE_DTYPE_BF16:
        memcpy(&h, p + 2 * i, 2);
        return ref_bf16_value(h);
    case SPYRE_DTYPE_FP8_E4M3:
        return ref_fp8_value(p[i], false);
    case SPYRE_DTYPE_FP8_E5M2:
        return ref_fp8_value(p[i], true);
    case SPYRE_DTYPE_INT8:
        return (int8_t)p[i];
    case SPYRE_DTYPE_INT32:
        memcpy(&iw, p + 4 * i, 4);
        return iw;
    }
    abort();
}

/* Half an ulp of @dtype relative to a value, and half its subnormal step. */
static double out_rel(int dtype)
{
    return dtype == SPYRE_DTYPE_FP16 ? ldexp(1, -11) :
           dtype == SPYRE_DTYPE_BF16 ? ldexp(1, -8) : ldexp(1, -24);
}

static double out_abs(int dtype)
{
    return dtype == SPYRE_DTYPE_FP16 ? ldexp(1, -25) :
           dtype == SPYRE_DTYPE_BF16 ? ldexp(1, -134) : ldexp(1, -150);
}

static const char *dt_name(int dt)
{
    static const char *const n[] = {
        "?", "u8", "fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int32"
    };

    return dt > 0 && dt < SPYRE_DTYPE_COUNT ? n[dt] : "?";
}

/*
 * Narrowing test inputs for a format whose non-negative finite values are
 * vals[0..n-1] ascending, vals[n] being the value one ulp above max: every
 * value, every midpoint between neighbours (including max and the value
 * above it), each +-1 binary32 ulp, both signs.  Returns the count.
 */
static size_t narrow_inputs(const double *vals, size_t n, float *out)
{
    size_t i, k = 0;
    int s;

    for (i = 0; i < n; i++) {
        float v = (float)vals[i];
        float mid = (float)((vals[i] + vals[i + 1]) / 2);

        /* Both are exact: the formats have at most 11 significant bits. */
        for (s = 0; s < 2; s++) {
            float sv = s ? -v : v, sm = s ? -mid : mid;

            out[k++] = sv;
            out[k++] = nextafterf(sv, INFINITY);
            out[k++] = nextafterf(sv, -INFINITY);
            out[k++] = sm;
            out[k++] = nextafterf(sm, INFINITY);
            out[k++] = nextafterf(sm, -INFINITY);
        }
    }
    return k;
}

/* Special binary32 inputs every narrowing test also gets. */
static const uint32_t specials[] = {
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
    0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
    0x7f800001, 0xff800001, 0x7fa00000, 0x7fbfffff, 0x7fffffff, 0x3f800000,
    0x33000000, 0x33000001, 0x32ffffff, 0x477fe000, 0x477fefff, 0x477ff000,
    0x477ff001, 0x43e00000, 0x43e80000, 0x43e80001, 0x43f00000, 0x47700000,
    0x47700001, 0x47800000, 0x3a800000, 0x37800000, 0x3b000000,
};

/* ---- conversion tests ------------------------------------------------- */

TEST(reference_sanity)
{
    /* The references themselves: RNE, overflow, OCP spec anchor values. */
    ASSERT_EQ(0x7bff, ref_fp32_to_fp16(65519.0f));
    ASSERT_EQ(0x7c00, ref_fp32_to_fp16(65520.0f));
    ASSERT_EQ(0x3c00, ref_fp32_to_fp16(u2f(0x3f801000)));  /* tie: even */
    ASSERT_EQ(0x3c02, ref_fp32_to_fp16(u2f(0x3f803000)));  /* tie: even */
    ASSERT_EQ(0x0000, ref_fp32_to_fp16(ldexpf(1, -25)));  /* tie to 0 */
    ASSERT_EQ(0x0001, ref_fp32_to_fp16(nextafterf(ldexpf(1, -25), 1)));
    ASSERT_EQ(448.0, ref_fp8_value(0x7e, false));
    ASSERT_TRUE(isnan(ref_fp8_value(0x7f, false)));
    ASSERT_TRUE(isnan(ref_fp8_value(0xff, false)));
    ASSERT_EQ(-448.0, ref_fp8_value(0xfe, false));
    ASSERT_EQ(ldexp(1, -6), ref_fp8_value(0x08, false));   /* min normal */
    ASSERT_EQ(ldexp(0.875, -6), ref_fp8_value(0x07, false)); /* max sub */
    ASSERT_EQ(ldexp(1, -9), ref_fp8_value(0x01, false));   /* min sub */
    ASSERT_EQ(57344.0, ref_fp8_value(0x7b, true));
    ASSERT_EQ(INFINITY, ref_fp8_value(0x7c, true));
    ASSERT_EQ(-INFINITY, ref_fp8_value(0xfc, true));
    ASSERT_TRUE(isnan(ref_fp8_value(0x7d, true)));
    ASSERT_EQ(ldexp(1, -14), ref_fp8_value(0x04, true));
    ASSERT_EQ(ldexp(0.75, -14), ref_fp8_value(0x03, true));
    ASSERT_EQ(ldexp(1, -16), ref_fp8_value(0x01, true));
    ASSERT_EQ(0x7e, ref_fp32_to_fp8(464.0f, false, true));  /* tie: even */
    ASSERT_EQ(0x7f, ref_fp32_to_fp8(464.5f, false, true));
    ASSERT_EQ(0x7e, ref_fp32_to_fp8(1e9f, false, false));
    ASSERT_EQ(0x7c, ref_fp32_to_fp8(61440.0f, true, true)); /* tie: even */
    ASSERT_EQ(0x7b, ref_fp32_to_fp8(61439.0f, true, true));
    ASSERT_EQ(0x7b, ref_fp32_to_fp8(61440.0f, true, false));
    ASSERT_EQ(0x7f7f, ref_fp32_to_bf16(u2f(0x7f7f7fff)));
    ASSERT_EQ(0x7f80, ref_fp32_to_bf16(u2f(0x7f7f8000)));
    ASSERT_EQ(0x3f80, ref_fp32_to_bf16(u2f(0x3f808000)));
    ASSERT_EQ(0x3f82, ref_fp32_to_bf16(u2f(0x3f818000)));
}

TEST(fp16_widen_all)
{
    struct tally t = { 0 };
    uint32_t h;

    for (h = 0; h < 0x10000; h++) {
        float got = spyre_fp16_to_fp32(h);
        float ref = ref_fp16_to_fp32(h);

        CHECK(&t, f2u(got) == f2u(ref), "fp16 %04x -> %08x, want %08x",
              h, f2u(got), f2u(ref));
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            /* NaN: quiet, same sign, payload in the top fraction bits. */
            CHECK(&t, f2u(got) == ((h & 0x8000u) << 16 | 0x7fc00000 |
                                   (h & 0x3ffu) << 13),
                  "fp16 NaN %04x -> %08x", h, f2u(got));
        }
    }
    ksft_print_msg("fp16 widening: %lu checks\n", t.checks);
    ASSERT_EQ(0, t.fails);
    ASSERT_EQ(65536 + 2 * 1023, t.checks);
}

static void check_fp16_narrow(struct __test_metadata *_metadata,
                              struct tally *t, float x)
{
    uint16_t got = spyre_fp32_to_fp16(x);
    uint16_t ref = ref_fp32_to_fp16(x);

    if (isnan(x)) {
        /* gcc keeps the sign and top payload and sets the quiet bit too. */
        CHECK(t, got == ref && (got & 0x7e00) == 0x7e00,
              "fp16(NaN %08x) = %04x, want %04x", f2u(x), got, ref);
        return;
    }
    CHECK(t, got == ref, "fp16(%a = %08x) = %04x, want %04x", x, f2u(x),
          got, ref);
}

TEST(fp16_narrow)
{
    static double vals[0x7c01];
    static float in[0x7c00 * 12];
    struct tally t = { 0 };
    size_t i, n;

    for (i = 0; i < 0x7c00; i++) {
        vals[i] = ref_fp16_to_fp32(i);
    }
    vals[0x7c00] = 65536.0;
    n = narrow_inputs(vals, 0x7c00, in);
    for (i = 0; i < n; i++) {
        check_fp16_narrow(_metadata, &t, in[i]);
    }
    for (i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
        check_fp16_narrow(_metadata, &t, u2f(specials[i]));
    }
    for (i = 0; i < 4000000; i++) {
        check_fp16_narrow(_metadata, &t, u2f(rnd32()));
    }
    /* Random values in fp16's range, where the rounding is interesting. */
    for (i = 0; i < 4000000; i++) {
        uint32_t b = (rnd32() & 0x8fffffff) | 0x30000000;

        check_fp16_narrow(_metadata, &t, u2f(b));
    }
    ksft_print_msg("fp16 narrowing: %lu checks (%zu structured)\n",
                   t.checks, n);
    ASSERT_EQ(0, t.fails);
}

TEST(bf16_widen_all)
{
    struct tally t = { 0 };
    uint32_t h;

    for (h = 0; h < 0x10000; h++) {
        float got = spyre_bf16_to_fp32(h);
        double ref = ref_bf16_value(h);

        if (isnan(ref)) {
            CHECK(&t, isnan(got) && !!signbit(got) == !!(h & 0x8000) &&
                  f2u(got) == (h << 16 | 0x400000),
                  "bf16 NaN %04x -> %08x", h, f2u(got));
        } else {
            CHECK(&t, (double)got == ref &&
                  !!signbit(got) == !!(h & 0x8000),
                  "bf16 %04x -> %a, want %a", h, got, ref);
        }
    }
    ASSERT_EQ(0, t.fails);
    ASSERT_EQ(65536, t.checks);
}

static void check_bf16_narrow(struct __test_metadata *_metadata,
                              struct tally *t, float x)
{
    uint16_t got = spyre_fp32_to_bf16(x);

    if (isnan(x)) {
        CHECK(t, got == ((f2u(x) >> 16) | 0x40),
              "bf16(NaN %08x) = %04x", f2u(x), got);
        return;
    }
    CHECK(t, got == ref_fp32_to_bf16(x), "bf16(%a = %08x) = %04x, want %04x",
          x, f2u(x), got, ref_fp32_to_bf16(x));
}

TEST(bf16_narrow)
{
    static double vals[0x7f81];
    static float in[0x7f80 * 12];
    struct tally t = { 0 };
    size_t i, n;

    for (i = 0; i < 0x7f80; i++) {
        vals[i] = ref_bf16_value(i);
    }
    vals[0x7f80] = ldexp(1, 128);
    n = narrow_inputs(vals, 0x7f80, in);
    for (i = 0; i < n; i++) {
        check_bf16_narrow(_metadata, &t, in[i]);
    }
    for (i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
        check_bf16_narrow(_metadata, &t, u2f(specials[i]));
    }
    for (i = 0; i < 4000000; i++) {
        check_bf16_narrow(_metadata, &t, u2f(rnd32()));
    }
    ksft_print_msg("bf16 narrowing: %lu checks (%zu structured)\n",
                   t.checks, n);
    ASSERT_EQ(0, t.fails);
}

TEST(fp8_widen_all)
{
    struct tally t = { 0 };
    unsigned v;
    int e5;

    for (e5 = 0; e5 < 2; e5++) {
        for (v = 0; v < 256; v++) {
            float got = e5 ? spyre_e5m2_to_fp32(v) : spyre_e4m3_to_fp32(v);
            double ref = ref_fp8_value(v, e5);

            if (isnan(ref)) {
                uint32_t want = (v & 0x80u) << 24 | 0x7fc00000 |
                                (e5 ? (v & 3u) << 21 : 0);

                CHECK(&t, f2u(got) == want, "%s NaN %02x -> %08x",
                      e5 ? "e5m2" : "e4m3", v, f2u(got));
            } else {
                CHECK(&t, (double)got == ref && !!signbit(got) == v >> 7,
                      "%s %02x -> %a, want %a", e5 ? "e5m2" : "e4m3", v,
                      got, ref);
            }
        }
    }
    ASSERT_EQ(0, t.fails);
    ASSERT_EQ(512, t.checks);
}

static void check_fp8_narrow(struct __test_metadata *_metadata,
                             struct tally *t, float x)
{
    int e5, nosat;

    for (e5 = 0; e5 < 2; e5++) {
        for (nosat = 0; nosat < 2; nosat++) {
            unsigned fl = nosat ? SPYRE_CMD_F_NOSAT : 0;
            uint8_t got = e5 ? spyre_fp32_to_e5m2(x, fl) :
                               spyre_fp32_to_e4m3(x, fl);
            uint8_t ref = ref_fp32_to_fp8(x, e5, nosat);

            CHECK(t, got == ref, "%s%s(%a = %08x) = %02x, want %02x",
                  e5 ? "e5m2" : "e4m3", nosat ? "/nosat" : "", x, f2u(x),
                  got, ref);
        }
    }
}

TEST(fp8_narrow)
{
    static double vals[0x80];
    static float in[0x80 * 12];
    struct tally t = { 0 };
    size_t i, n;
    int e5;

    for (e5 = 0; e5 < 2; e5++) {
        unsigned maxc = e5 ? 0x7b : 0x7e;

        for (i = 0; i <= maxc; i++) {
            vals[i] = ref_fp8_value(i, e5);
        }
        vals[maxc + 1] = 2 * vals[maxc] - vals[maxc - 1];
        n = narrow_inputs(vals, maxc + 1, in);
        for (i = 0; i < n; i++) {
            check_fp8_narrow(_metadata, &t, in[i]);
        }
    }
    for (i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
        check_fp8_narrow(_metadata, &t, u2f(specials[i]));
    }
    for (i = 0; i < 100000; i++) {
        check_fp8_narrow(_metadata, &t, u2f(rnd32()));
    }
    /* Around fp8's range: exponents 2^-20 .. 2^19. */
    for (i = 0; i < 200000; i++) {
        float x = ldexpf((float)rnd_uniform(1, 2), (int)(rnd32() % 40) - 20);

        check_fp8_narrow(_metadata, &t, (rnd32() & 1) ? -x : x);
    }
    /* Explicit spec points. */
    ASSERT_EQ(0x7e, spyre_fp32_to_e4m3(448.0f, 0));
    ASSERT_EQ(0x7e, spyre_fp32_to_e4m3(464.0f, SPYRE_CMD_F_NOSAT));
    ASSERT_EQ(0x7f, spyre_fp32_to_e4m3(nextafterf(464.0f, 1e9f),
                                       SPYRE_CMD_F_NOSAT));
    ASSERT_EQ(0xfe, spyre_fp32_to_e4m3(-INFINITY, 0));
    ASSERT_EQ(0xff, spyre_fp32_to_e4m3(-INFINITY, SPYRE_CMD_F_NOSAT));
    ASSERT_EQ(0x7b, spyre_fp32_to_e5m2(INFINITY, 0));
    ASSERT_EQ(0x7c, spyre_fp32_to_e5m2(INFINITY, SPYRE_CMD_F_NOSAT));
    ASSERT_EQ(0x7c, spyre_fp32_to_e5m2(61440.0f, SPYRE_CMD_F_NOSAT));
    ASSERT_EQ(0x7b, spyre_fp32_to_e5m2(61440.0f, 0));
    ASSERT_EQ(0x80, spyre_fp32_to_e4m3(-ldexpf(1, -11), 0));
    ASSERT_EQ(0x01, spyre_fp32_to_e4m3(nextafterf(ldexpf(1, -10), 1), 0));
    ASSERT_EQ(0x7f, spyre_fp32_to_e5m2(NAN, 0));
    ksft_print_msg("fp8 narrowing: %lu checks (x2 formats x2 modes)\n",
                   t.checks);
    ASSERT_EQ(0, t.fails);
}

/* Every fp16 and bf16 value to fp8 through spyre_convert. */
TEST(convert_16_to_fp8_all)
{
    static uint16_t src[0x10000];
    static uint8_t dst[0x10000];
    struct tally t = { 0 };
    int e5, nosat, bf;
    uint32_t i;

    for (i = 0; i < 0x10000; i++) {
        src[i] = i;
    }
    for (bf = 0; bf < 2; bf++) {
        for (e5 = 0; e5 < 2; e5++) {
            for (nosat = 0; nosat < 2; nosat++) {
                int sd = bf ? SPYRE_DTYPE_BF16 : SPYRE_DTYPE_FP16;
                int dd = e5 ? SPYRE_DTYPE_FP8_E5M2 : SPYRE_DTYPE_FP8_E4M3;

                ASSERT_EQ(SPYRE_STATUS_OK,
                          spyre_convert(dst, dd, src, sd, 0x10000,
                                        nosat ? SPYRE_CMD_F_NOSAT : 0));
                for (i = 0; i < 0x10000; i++) {
                    float x = bf ? (float)ref_bf16_value(i) :
                                   ref_fp16_to_fp32(i);
                    uint8_t ref = ref_fp32_to_fp8(x, e5, nosat);

                    if (isnan(x)) {
                        ref = (i & 0x8000) ? 0xff : 0x7f;
                    }
                    CHECK(&t, dst[i] == ref, "%s %04x -> %s%s %02x, want %02x",
                          dt_name(sd), i, dt_name(dd), nosat ? "/nosat" : "",
                          dst[i], ref);
                }
            }
        }
    }
    ASSERT_EQ(0, t.fails);
    ASSERT_EQ(8 * 65536, t.checks);
}

static int64_t ref_round_int(double x, int64_t lo, int64_t hi)
{
    double r;

    if (isnan(x)) {
        return 0;
    }
    r = nearbyint(x);       /* default rounding mode: ties to even */
    return r < lo ? lo : r > hi ? hi : (int64_t)r;
}

TEST(int_conversions)
{
    struct tally t = { 0 };
    size_t i;
    int k;
    float xs[8];

    for (k = -300; k <= 300; k++) {
        int j;

        xs[0] = k;
        xs[1] = k + 0.5f;
        xs[2] = k * 0.5f;
        xs[3] = k + 0.25f;
        for (j = 0; j < 4; j++) {
            float cand[3] = {
                xs[j], nextafterf(xs[j], INFINITY),
                nextafterf(xs[j], -INFINITY)
            };
            int c;

            for (c = 0; c < 3; c++) {
                CHECK(&t, spyre_fp32_to_int8(cand[c]) ==
                      ref_round_int(cand[c], -128, 127),
                      "int8(%a) = %d", cand[c], spyre_fp32_to_int8(cand[c]));
                CHECK(&t, spyre_fp32_to_int32(cand[c]) ==
                      ref_round_int(cand[c], INT32_MIN, INT32_MAX),
                      "int32(%a)", cand[c]);
            }
        }
    }
    for (i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) {
        float x = u2f(specials[i]);

        CHECK(&t, spyre_fp32_to_int8(x) == ref_round_int(x, -128, 127),
              "int8(%08x) = %d", specials[i], spyre_fp32_to_int8(x));
        CHECK(&t, spyre_fp32_to_int32(x) ==
              ref_round_int(x, INT32_MIN, INT32_MAX),
              "int32(%08x) = %d", specials[i], spyre_fp32_to_int32(x));
    }
    for (i = 0; i < 1000000; i++) {
        float x = u2f(rnd32());
        float y = (float)rnd_uniform(-3e9, 3e9);
        int32_t iv = (int32_t)rnd32();

        CHECK(&t, spyre_fp32_to_int8(x) == ref_round_int(x, -128, 127),
              "int8(%a)", x);
        CHECK(&t, spyre_fp32_to_int32(x) ==
              ref_round_int(x, INT32_MIN, INT32_MAX), "int32(%a)", x);
        CHECK(&t, spyre_fp32_to_int32(y) ==
              ref_round_int(y, INT32_MIN, INT32_MAX), "int32(%a)", y);
        CHECK(&t, f2u(spyre_int32_to_fp32(iv)) == f2u((float)iv),
              "fp32(%d)", iv);
    }
    ASSERT_EQ(-128, spyre_fp32_to_int8(-128.5f));
    ASSERT_EQ(-128, spyre_fp32_to_int8(-1e30f));
    ASSERT_EQ(127, spyre_fp32_to_int8(127.5f));
    ASSERT_EQ(2, spyre_fp32_to_int8(2.5f));
    ASSERT_EQ(-2, spyre_fp32_to_int8(-2.5f));
    ASSERT_EQ(0, spyre_fp32_to_int8(NAN));
    ASSERT_EQ(0, spyre_fp32_to_int8(-0.5f));
    ASSERT_EQ(INT32_MIN, spyre_fp32_to_int32(-2147483648.0f));
    ASSERT_EQ(INT32_MAX, spyre_fp32_to_int32(2147483648.0f));
    ASSERT_EQ(0x4f000000u, f2u(spyre_int32_to_fp32(INT32_MAX)));
    ASSERT_EQ(0xcf000000u, f2u(spyre_int32_to_fp32(INT32_MIN)));
    ASSERT_EQ(0, t.fails);
}

TEST(convert_api)
{
    static const int convertible[] = {
        SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
        SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2, SPYRE_DTYPE_INT8,
    };
    uint8_t sbuf[4 * 1001 + 1], dbuf[4 * 1001 + 1], xbuf[4 * 1001];
    float f[1001], g[1001];
    int s, d;
    size_t i;

    /* Pairing rules (COPY). */
    for (s = -1; s <= SPYRE_DTYPE_COUNT; s++) {
        for (d = -1; d <= SPYRE_DTYPE_COUNT; d++) {
            bool cs = false, cd = false, ok;

            for (i = 0; i < 6; i++) {
                cs |= s == convertible[i];
                cd |= d == convertible[i];
            }
            ok = (cs && cd) ||
                 (s == d && (s == SPYRE_DTYPE_U8 || s == SPYRE_DTYPE_INT32));
            EXPECT_EQ(ok ? SPYRE_STATUS_OK : SPYRE_STATUS_INVALID_OPERAND,
                      spyre_convert_check(d, s)) {
                TH_LOG("pair %d -> %d", s, d);
            }
            if (!ok) {
                EXPECT_EQ(SPYRE_STATUS_INVALID_OPERAND,
                          spyre_convert(dbuf, d, sbuf, s, 1, 0));
            }
        }
    }
    ASSERT_EQ(0, spyre_math_dtype_size(0));
    ASSERT_EQ(4, spyre_math_dtype_size(SPYRE_DTYPE_INT32));
    ASSERT_EQ(1, spyre_math_dtype_size(SPYRE_DTYPE_U8));
    ASSERT_EQ(0, spyre_math_dtype_size(SPYRE_DTYPE_COUNT));

    /*
     * Every convertible pair on 1001 random values, from a misaligned
     * source to a misaligned destination, against the scalar functions.
     */
    for (i = 0; i < 1001; i++) {
        f[i] = (float)rnd_uniform(-600, 600);
        if (i % 7 == 0) {
            f[i] = u2f(rnd32());
        }
    }
    for (s = 0; s < 6; s++) {
        for (d = 0; d < 6; d++) {
            int sd = convertible[s], dd = convertible[d];
            size_t des = spyre_math_dtype_size(dd);
            unsigned fl = (s + d) & 1 ? SPYRE_CMD_F_NOSAT : 0;

            ASSERT_EQ(0, spyre_store_fp32(sbuf + 1, sd, f, 1001, 0));
            ASSERT_EQ(0, spyre_convert(dbuf + 1, dd, sbuf + 1, sd, 1001, fl));
            ASSERT_EQ(0, spyre_load_fp32(g, sbuf + 1, sd, 1001));
            ASSERT_EQ(0, spyre_store_fp32(xbuf, dd, g, 1001, fl));
            if (sd == dd) {
                /* Same type: bytes unchanged. */
                ASSERT_EQ(0, memcmp(dbuf + 1, sbuf + 1, 1001 * des));
            } else {
                ASSERT_EQ(0, memcmp(dbuf + 1, xbuf, 1001 * des)) {
                    TH_LOG("%s -> %s", dt_name(sd), dt_name(dd));
                }
            }
        }
    }
    /* Little-endian layout, element by element. */
    ASSERT_EQ(0, spyre_store_fp32(dbuf, SPYRE_DTYPE_FP32, f, 3, 0));
    for (i = 0; i < 3; i++) {
        uint32_t w = f2u(f[i]);

        ASSERT_EQ((uint8_t)w, dbuf[4 * i]);
        ASSERT_EQ((uint8_t)(w >> 24), dbuf[4 * i + 3]);
    }
    ASSERT_EQ(0, spyre_store_fp32(dbuf, SPYRE_DTYPE_FP16, f, 3, 0));
    for (i = 0; i < 3; i++) {
        uint16_t h = ref_fp32_to_fp16(f[i]);

        ASSERT_EQ(h & 0xff, dbuf[2 * i]);
        ASSERT_EQ(h >> 8, dbuf[2 * i + 1]);
    }
    /* U8 and INT32 copy bytes; a same-type fp32 copy keeps NaN payloads. */
    for (i = 0; i < sizeof(sbuf); i++) {
        sbuf[i] = rnd32();
    }
    ASSERT_EQ(0, spyre_convert(dbuf, SPYRE_DTYPE_U8, sbuf, SPYRE_DTYPE_U8,
                               333, 0));
    ASSERT_EQ(0, memcmp(dbuf, sbuf, 333));
    ASSERT_EQ(0, spyre_convert(dbuf, SPYRE_DTYPE_INT32, sbuf,
                               SPYRE_DTYPE_INT32, 100, 0));
    ASSERT_EQ(0, memcmp(dbuf, sbuf, 400));
    memcpy(sbuf, "\x01\x00\x80\x7f", 4);    /* signalling NaN */
    ASSERT_EQ(0, spyre_convert(dbuf, SPYRE_DTYPE_FP32, sbuf,
                               SPYRE_DTYPE_FP32, 1, 0));
    ASSERT_EQ(0, memcmp(dbuf, sbuf, 4));
    /* int8 -> fp16 -> int8 round trip is exact. */
    for (i = 0; i < 256; i++) {
        sbuf[i] = i;
    }
    ASSERT_EQ(0, spyre_convert(xbuf, SPYRE_DTYPE_FP16, sbuf,
                               SPYRE_DTYPE_INT8, 256, 0));
    ASSERT_EQ(0, spyre_convert(dbuf, SPYRE_DTYPE_INT8, xbuf,
                               SPYRE_DTYPE_FP16, 256, 0));
    ASSERT_EQ(0, memcmp(dbuf, sbuf, 256));
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_load_fp32(f, sbuf, SPYRE_DTYPE_INT32, 1));
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_store_fp32(dbuf, SPYRE_DTYPE_U8, f, 1, 0));
}

TEST(copy_check)
{
    struct spyre_cmd_copy c = {
        .hdr = { SPYRE_OP_COPY, 0, sizeof(c) },
        .width = 10, .height = 3, .src_pitch = 40, .dst_pitch = 20,
        .src_dtype = SPYRE_DTYPE_FP32, .dst_dtype = SPYRE_DTYPE_FP16,
    };
    struct spyre_cmd_copy x;
    uint64_t sb = 0, db = 0;

    ASSERT_EQ(SPYRE_STATUS_OK, spyre_copy_check(&c, &sb, &db));
    ASSERT_EQ(2 * 40 + 40, sb);
    ASSERT_EQ(2 * 20 + 20, db);
    x = c;
    x.hdr.flags = SPYRE_CMD_F_NOSAT;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_copy_check(&x, NULL, NULL));
    x.hdr.flags = 2;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_copy_check(&x, NULL, NULL));
    x = c;
    x.dst_pitch = 19;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_copy_check(&x, NULL, NULL));
    x.height = 1;       /* pitch ignored */
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_copy_check(&x, &sb, &db));
    ASSERT_EQ(40, sb);
    ASSERT_EQ(20, db);
    x = c;
    x.width = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_copy_check(&x, NULL, NULL));
    x = c;
    x.dst_dtype = SPYRE_DTYPE_INT32;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_copy_check(&x, NULL, NULL));
    x = c;
    x.src_dtype = x.dst_dtype = SPYRE_DTYPE_U8;
    x.width = 1ULL << 16;
    x.height = 1ULL << 16;
    x.src_pitch = x.dst_pitch = 1ULL << 16;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_copy_check(&x, NULL, NULL));
    x.height++;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_copy_check(&x, NULL, NULL));
    x = c;
    x.width = UINT64_MAX / 2;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_copy_check(&x, NULL, NULL));
    x = c;
    x.src_pitch = UINT64_MAX / 2;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_copy_check(&x, NULL, NULL));
}

/* ---- GEMM ------------------------------------------------------------- */

struct gemm_case {
    int ad, bd, cd, biasd;
    uint32_t m, n, k, batch;
    bool ta, tb;
    uint32_t pad;               /* added to every leading dimension */
    uint32_t bpad;              /* extra elements between batches */
    float alpha, beta, sa, sb;
    size_t tile_buf;
    double range;               /* inputs uniform in [-range, range] */
};

/* Random finite values of @dtype in [-range, range] (fp8: saturating). */
static void fill_random(void *buf, int dtype, size_t n, double range)
{
    float f[256];
    size_t es = spyre_math_dtype_size(dtype);
    size_t i, c;

    for (; n; n -= c, buf = (uint8_t *)buf + c * es) {
        c = n < 256 ? n : 256;
        for (i = 0; i < c; i++) {
            f[i] = (float)rnd_uniform(-range, range);
            if (dtype == SPYRE_DTYPE_INT8) {
                f[i] = (float)(int)(rnd32() % 256) - 128;
            }
        }
        if (dtype == SPYRE_DTYPE_INT32) {
            for (i = 0; i < c; i++) {
                int32_t v = (int32_t)(rnd32() % 2000001) - 1000000;

                memcpy((uint8_t *)buf + 4 * i, &v, 4);
            }
        } else {
            spyre_store_fp32(buf, dtype, f, c, 0);
        }
    }
}

/* A NaN (or garbage) of @dtype: what padding and an unread C hold. */
static void fill_poison(void *buf, int dtype, size_t n)
{
    uint8_t *p = buf;
    size_t es = spyre_math_dtype_size(dtype);
    size_t i;

    for (i = 0; i < n; i++) {
        switch (dtype) {
        case SPYRE_DTYPE_FP32:
            memcpy(p + 4 * i, "\x00\x00\xc0\x7f", 4);
            break;
        case SPYRE_DTYPE_FP16:
            memcpy(p + 2 * i, "\x00\x7e", 2);
            break;
        case SPYRE_DTYPE_BF16:
            memcpy(p + 2 * i, "\xc0\x7f", 2);
            break;
        case SPYRE_DTYPE_FP8_E4M3:
        case SPYRE_DTYPE_FP8_E5M2:
            p[i] = 0x7f;
            break;
        default:
            memset(p + es * i, 0x5a, es);
        }
    }
}

struct gemm_result {
    double worst;               /* max |err| / allowed */
    double worst32;             /* the same for FP32 outputs */
    unsigned long checked;
};

/*
 * Run one GEMM through spyre_gemm_host and compare every output element
 * with an fp64 reference computed from the independently decoded inputs.
 *
 * Float inputs: the product is accumulated in fp32 (any summation order),
 * so |acc - exact| <= K * u * sum|a*b| (u = 2^-24, first order); the
 * epilogue adds a few roundings of the terms; rounding to c_dtype adds
 * half an ulp of the output type.  Allowed error:
 *   2 * K * u * |s| * sum|a*b| + 4 * u * (|s*ab| + |beta*c| + |bias|)
 *   + out_rel * |ref| + out_abs.
 * INT8: exact (int32 with wrap-around).
 * Padding in C (between rows and between batches) must be unchanged, and
 * with beta == 0 C must not be read (it holds NaNs).
 */
static int run_gemm_case(struct __test_metadata *_metadata,
                         const struct gemm_case *gc, struct gemm_result *res,
                         float *amax_out)
{
    bool is_int = gc->ad == SPYRE_DTYPE_INT8;
    uint32_t ar = gc->ta ? gc->k : gc->m, ac = gc->ta ? gc->m : gc->k;
    uint32_t br = gc->tb ? gc->n : gc->k, bc = gc->tb ? gc->k : gc->n;
    uint64_t lda = ac + gc->pad, ldb = bc + gc->pad, ldc = gc->n + gc->pad;
    uint64_t sta = ar * lda + gc->bpad, stb = br * ldb + gc->bpad;
    uint64_t stc = gc->m * ldc + gc->bpad;
    size_t esa = spyre_math_dtype_size(gc->ad);
    size_t esb = spyre_math_dtype_size(gc->bd);
    size_t esc = spyre_math_dtype_size(gc->cd);
    struct spyre_cmd_gemm cmd = {
        .hdr = { SPYRE_OP_GEMM,
                 (gc->ta ? SPYRE_GEMM_F_TRANS_A : 0) |
                 (gc->tb ? SPYRE_GEMM_F_TRANS_B : 0), sizeof(cmd) },
        .a_dtype = gc->ad, .b_dtype = gc->bd, .c_dtype = gc->cd,
        .bias_dtype = gc->biasd,
        .m = gc->m, .n = gc->n, .k = gc->k, .batch = gc->batch,
        .lda = lda, .ldb = ldb, .ldc = ldc,
        .stride_a = sta, .stride_b = stb, .stride_c = stc,
        .alpha = f2u(gc->alpha), .beta = f2u(gc->beta),
    };
    SpyreGemmSpan span;
    SpyreGemmHostBufs bufs;
    uint8_t *a, *b, *c, *c0, *bias = NULL, *mask;
    void *tile_buf;
    double s = (double)gc->alpha * gc->sa * gc->sb;
    double amax_ref = 0, amax_tol = 0;
    float amax = -1;
    uint32_t bt, i, j, kk;
    int st, fails = 0;
    size_t x;

    st = spyre_gemm_check(&cmd, &span);
    if (st != SPYRE_STATUS_OK) {
        TH_LOG("check failed: %d", st);
        return 1;
    }
    /* Exactly the span: reading past it is an MMU fault in the host I/O. */
    a = malloc(span.a);
    b = malloc(span.b);
    c = malloc(span.c);
    c0 = malloc(span.c);
    mask = calloc(span.c, 1);
    tile_buf = malloc(gc->tile_buf);
    if (span.bias) {
        bias = malloc(span.bias);
        fill_random(bias, gc->biasd, gc->n, 1.0);
    }
    fill_poison(a, gc->ad, span.a / esa);
    fill_poison(b, gc->bd, span.b / esb);
    fill_poison(c, gc->cd, span.c / esc);
    for (bt = 0; bt < gc->batch; bt++) {
        for (i = 0; i < ar; i++) {
            fill_random(a + (bt * sta + i * lda) * esa, gc->ad, ac,
                        gc->range);
        }
        for (i = 0; i < br; i++) {
            fill_random(b + (bt * stb + i * ldb) * esb, gc->bd, bc,
                        gc->range);
        }
        for (i = 0; i < gc->m; i++) {
            if (gc->beta != 0.0f) {
                fill_random(c + (bt * stc + i * ldc) * esc, gc->cd, gc->n,
                            2.0);
            }
            memset(mask + (bt * stc + i * ldc) * esc, 1, gc->n * esc);
        }
    }
    memcpy(c0, c, span.c);

    bufs = (SpyreGemmHostBufs) {
        .a = a, .a_size = span.a, .b = b, .b_size = span.b,
        .c = c, .c_size = span.c, .bias = bias, .bias_size = span.bias,
    };
    st = spyre_gemm_host(&cmd, gc->sa, gc->sb, &bufs, tile_buf, gc->tile_buf,
                         &amax);
    if (st != SPYRE_STATUS_OK) {
        TH_LOG("gemm failed: %d", st);
        fails++;
        goto out;
    }

    for (bt = 0; bt < gc->batch; bt++) {
        for (i = 0; i < gc->m; i++) {
            for (j = 0; j < gc->n; j++) {
                size_t ci = bt * stc + i * ldc + j;
                double acc = 0, aacc = 0, ref, got, allow, cterm = 0;
                double bterm = 0;
                int64_t iacc = 0;

                for (kk = 0; kk < gc->k; kk++) {
                    size_t ai = bt * sta + (gc->ta ? kk * lda + i :
                                                     i * lda + kk);
                    size_t bi = bt * stb + (gc->tb ? j * ldb + kk :
                                                     kk * ldb + j);
                    double p = ref_decode(gc->ad, a, ai) *
                               ref_decode(gc->bd, b, bi);

                    acc += p;
                    aacc += fabs(p);
                    iacc += (int64_t)p;
                }
                got = ref_decode(gc->cd, c, ci);
                if (is_int) {
                    int32_t want;

                    if (gc->beta == 1.0f) {
                        iacc += (int64_t)ref_decode(SPYRE_DTYPE_INT32, c0,
                                                    ci);
                    }
                    want = (int32_t)(uint32_t)iacc;
                    res->checked++;
                    if (got != want && fails++ < 5) {
                        TH_LOG("int C[%u][%u][%u] = %.0f, want %d", bt, i, j,
                               got, want);
                    }
                    if (fabs((double)want) > amax_ref) {
                        amax_ref = fabs((double)want);
                    }
                    continue;
                }
                if (gc->beta != 0.0f) {
                    cterm = gc->beta * ref_decode(gc->cd, c0, ci);
                }
                if (bias) {
                    bterm = ref_decode(gc->biasd, bias, j);
                }
                ref = s * acc + cterm + bterm;
                allow = 2.0 * gc->k * U32 * fabs(s) * aacc +
                        4 * U32 * (fabs(s * acc) + fabs(cterm) +
                                   fabs(bterm));
                if (fabs(ref) > amax_ref) {
                    amax_ref = fabs(ref);
                }
                if (allow > amax_tol) {
                    amax_tol = allow;
                }
                allow += out_rel(gc->cd) * fabs(ref) + out_abs(gc->cd);
                res->checked++;
                if (!(fabs(got - ref) <= allow)) {
                    if (fails++ < 5) {
                        TH_LOG("C[%u][%u][%u] = %a, want %a (allow %g)", bt,
                               i, j, got, ref, allow);
                    }
                } else if (allow > 0) {
                    double ratio = fabs(got - ref) / allow;

                    res->worst = ratio > res->worst ? ratio : res->worst;
                    if (gc->cd == SPYRE_DTYPE_FP32 && ratio > res->worst32) {
                        res->worst32 = ratio;
                    }
                }
            }
        }
    }
    /* Padding untouched. */
    for (x = 0; x < span.c; x++) {
        if (!mask[x] && c[x] != c0[x]) {
            if (fails++ < 5) {
                TH_LOG("C padding byte %zu changed", x);
            }
            break;
        }
    }
    amax_tol += amax_tol == 0 ? 0 : U32 * amax_ref;
    if (!(fabs(amax - amax_ref) <= amax_tol + U32 * amax_ref)) {
        TH_LOG("amax %a, want %a", amax, amax_ref);
        fails++;
    }
    if (amax_out) {
        *amax_out = amax;
    }
out:
    if (fails) {
        TH_LOG("case %s x %s -> %s bias %s, %ux%ux%u batch %u ta %d tb %d "
               "pad %u alpha %g beta %g sa %g sb %g", dt_name(gc->ad),
               dt_name(gc->bd), dt_name(gc->cd), dt_name(gc->biasd), gc->m,
               gc->n, gc->k, gc->batch, gc->ta, gc->tb, gc->pad, gc->alpha,
               gc->beta, gc->sa, gc->sb);
    }
    free(a);
    free(b);
    free(c);
    free(c0);
    free(mask);
    free(bias);
    free(tile_buf);
    return fails;
}

FIXTURE(gemm) {
};

FIXTURE_VARIANT(gemm) {
    int ad, bd;
};

FIXTURE_SETUP(gemm)
{
}

FIXTURE_TEARDOWN(gemm)
{
}

FIXTURE_VARIANT_ADD(gemm, fp32) {
    .ad = SPYRE_DTYPE_FP32, .bd = SPYRE_DTYPE_FP32,
};
FIXTURE_VARIANT_ADD(gemm, fp16) {
    .ad = SPYRE_DTYPE_FP16, .bd = SPYRE_DTYPE_FP16,
};
FIXTURE_VARIANT_ADD(gemm, bf16) {
    .ad = SPYRE_DTYPE_BF16, .bd = SPYRE_DTYPE_BF16,
};
FIXTURE_VARIANT_ADD(gemm, e4m3) {
    .ad = SPYRE_DTYPE_FP8_E4M3, .bd = SPYRE_DTYPE_FP8_E4M3,
};
FIXTURE_VARIANT_ADD(gemm, e5m2) {
    .ad = SPYRE_DTYPE_FP8_E5M2, .bd = SPYRE_DTYPE_FP8_E5M2,
};
FIXTURE_VARIANT_ADD(gemm, e4m3_e5m2) {
    .ad = SPYRE_DTYPE_FP8_E4M3, .bd = SPYRE_DTYPE_FP8_E5M2,
};
FIXTURE_VARIANT_ADD(gemm, e5m2_e4m3) {
    .ad = SPYRE_DTYPE_FP8_E5M2, .bd = SPYRE_DTYPE_FP8_E4M3,
};
FIXTURE_VARIANT_ADD(gemm, int8) {
    .ad = SPYRE_DTYPE_INT8, .bd = SPYRE_DTYPE_INT8,
};

/*
 * The dtype pair against every output type, bias type, small odd shape,
 * transpose combination, batch 1 and 3 (with gaps between batches),
 * lda/ldb/ldc larger than the rows, beta 0 (C holds NaN) and 0.5, alphas
 * and per-tensor scales.
 */
TEST_F(gemm, small_shapes)
{
    static const uint32_t shapes[][3] = {
        { 1, 1, 1 }, { 3, 5, 7 }, { 17, 9, 33 }, { 2, 31, 4 },
    };
    static const int couts[] = {
        SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
    };
    static const int biases[] = {
        0, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
    };
    static const float alphas[] = { 1.0f, -1.5f, 0.75f };
    static const float scales[][2] = { { 1, 1 }, { 0.5f, 2 }, { 0.25f, 3 } };
    bool is_int = variant->ad == SPYRE_DTYPE_INT8;
    struct gemm_result res = { 0 };
    unsigned cases = 0, idx = 0;
    int fails = 0;
    size_t sh, co, bi, tr, bt, be;

    for (sh = 0; sh < 4; sh++) {
        for (tr = 0; tr < 4; tr++) {
            for (bt = 0; bt < 2; bt++) {
                for (be = 0; be < 2; be++) {
                    for (co = 0; co < (is_int ? 1 : 3); co++) {
                        for (bi = 0; bi < (is_int ? 2 : 4); bi++) {
                            struct gemm_case gc = {
                                .ad = variant->ad, .bd = variant->bd,
                                .cd = is_int ? SPYRE_DTYPE_INT32 : couts[co],
                                .biasd = biases[bi],
                                .m = shapes[sh][0], .n = shapes[sh][1],
                                .k = shapes[sh][2], .batch = bt ? 3 : 1,
                                .ta = tr & 1, .tb = tr & 2,
                                .pad = (idx % 3) * 2 + (sh & 1),
                                .bpad = bt ? 5 : 0,
                                .alpha = is_int ? 1 : alphas[idx % 3],
                                .beta = be ? (is_int ? 1.0f : 0.5f) : 0.0f,
                                .sa = is_int ? 1 : scales[idx % 3][0],
                                .sb = is_int ? 1 : scales[idx % 3][1],
                                .tile_buf = SPYRE_GEMM_TILE_BUF_SIZE,
                                .range = 2.0,
                            };

                            fails += run_gemm_case(_metadata, &gc, &res,
                                                   NULL);
                            cases++;
                            idx++;
                        }
                    }
                }
            }
        }
    }
    /* fp16/bf16 outputs come near 1: their rounding is half an ulp. */
    ksft_print_msg("gemm %s x %s: %u cases, %lu outputs, worst err/allowed "
                   "%.3g (fp32 outputs %.3g)\n", dt_name(variant->ad),
                   dt_name(variant->bd), cases, res.checked, res.worst,
                   res.worst32);
    ASSERT_EQ(0, fails);
    ASSERT_LT(res.worst, 1.0);
}

/* K beyond one tile, several M and N tiles, small and minimal tile buffers. */
TEST_F(gemm, tiled)
{
    struct gemm_result res = { 0 };
    bool is_int = variant->ad == SPYRE_DTYPE_INT8;
    struct gemm_case gc = {
        .ad = variant->ad, .bd = variant->bd,
        .cd = is_int ? SPYRE_DTYPE_INT32 : SPYRE_DTYPE_FP16,
        .biasd = SPYRE_DTYPE_BF16,
        .m = 131, .n = 77, .k = 1100, .batch = 2, .ta = true, .tb = false,
        .pad = 3, .bpad = 1, .alpha = 1.0f, .beta = is_int ? 1.0f : -2.0f,
        .sa = 1, .sb = 1, .tile_buf = SPYRE_GEMM_TILE_BUF_MIN, .range = 1.0,
    };

    ASSERT_EQ(0, run_gemm_case(_metadata, &gc, &res, NULL));
    gc.ta = false;
    gc.tb = true;
    gc.tile_buf = 300000;
    ASSERT_EQ(0, run_gemm_case(_metadata, &gc, &res, NULL));
    gc.m = 600;
    gc.n = 5;
    gc.k = 600;
    gc.batch = 1;
    gc.tile_buf = SPYRE_GEMM_TILE_BUF_SIZE;
    ASSERT_EQ(0, run_gemm_case(_metadata, &gc, &res, NULL));
    ASSERT_LT(res.worst, 1.0);
}

TEST(gemm_int8_wrap)
{
    /* 140000 * (-128 * -128) = 2293760000 wraps to -2001207296. */
    enum { K = 140000 };
    static int8_t a[K], b[K];
    int32_t c = 0;
    struct spyre_cmd_gemm cmd = {
        .hdr = { SPYRE_OP_GEMM, 0, sizeof(cmd) },
        .a_dtype = SPYRE_DTYPE_INT8, .b_dtype = SPYRE_DTYPE_INT8,
        .c_dtype = SPYRE_DTYPE_INT32, .m = 1, .n = 1, .k = K, .batch = 1,
        .lda = K, .ldb = 1, .ldc = 1,
    };
    SpyreGemmHostBufs bufs = {
        .a = a, .a_size = K, .b = b, .b_size = K, .c = &c, .c_size = 4,
    };
    static uint8_t tile_buf[SPYRE_GEMM_TILE_BUF_MIN];
    float amax;

    memset(a, -128, K);
    memset(b, -128, K);
    ASSERT_EQ(0, spyre_gemm_host(&cmd, 1, 1, &bufs, tile_buf,
                                 sizeof(tile_buf), &amax));
    ASSERT_EQ((int32_t)(uint32_t)(140000ULL * 16384), c);
    ASSERT_EQ(-2001207296, c);
    ASSERT_EQ(2001207296.0f, amax);
    /* beta = 1 adds C, wrapping again. */
    cmd.beta = f2u(1.0f);
    ASSERT_EQ(0, spyre_gemm_host(&cmd, 1, 1, &bufs, tile_buf,
                                 sizeof(tile_buf), NULL));
    ASSERT_EQ((int32_t)(uint32_t)(2 * 140000ULL * 16384), c);
}

/* NaN/inf propagation and beta == 0 ignoring NaN in C. */
TEST(gemm_special_values)
{
    float a[2 * 2] = { 1, 2, NAN, 4 };
    float b[2 * 2] = { 1, 0, 0, 1 };
    float c[2 * 2] = { NAN, NAN, NAN, NAN };
    float bias[2] = { 10, INFINITY };
    struct spyre_cmd_gemm cmd = {
        .hdr = { SPYRE_OP_GEMM, 0, sizeof(cmd) },
        .a_dtype = SPYRE_DTYPE_FP32, .b_dtype = SPYRE_DTYPE_FP32,
        .c_dtype = SPYRE_DTYPE_FP32, .m = 2, .n = 2, .k = 2, .batch = 1,
        .lda = 2, .ldb = 2, .ldc = 2, .alpha = f2u(2.0f), .beta = f2u(-0.0f),
    };
    SpyreGemmHostBufs bufs = {
        .a = a, .a_size = sizeof(a), .b = b, .b_size = sizeof(b),
        .c = c, .c_size = sizeof(c), .bias = bias, .bias_size = sizeof(bias),
    };
    static uint8_t tile_buf[SPYRE_GEMM_TILE_BUF_MIN];
    uint16_t h[4];
    float amax;

    ASSERT_EQ(0, spyre_gemm_host(&cmd, 1, 1, &bufs, tile_buf,
                                 sizeof(tile_buf), &amax));
    ASSERT_EQ(2.0f, c[0]);
    ASSERT_EQ(4.0f, c[1]);
    ASSERT_TRUE(isnan(c[2]));
    ASSERT_TRUE(isnan(c[3]));
    ASSERT_TRUE(isnan(amax));
    /* Now with a bias and no NaN: amax sees the result before rounding. */
    a[2] = 3;
    cmd.bias_dtype = SPYRE_DTYPE_FP32;
    cmd.c_dtype = SPYRE_DTYPE_FP16;
    bias[1] = 70000;
    ASSERT_EQ(0, spyre_gemm_host(&cmd, 1, 1, &bufs, tile_buf,
                                 sizeof(tile_buf), &amax));
    ASSERT_EQ(70008.0f, amax);
    memcpy(h, c, sizeof(h));
    ASSERT_EQ(ref_fp32_to_fp16(12.0f), h[0]);
    ASSERT_EQ(0x7c00, h[3]);                        /* 70008 -> inf */
}

TEST(gemm_check)
{
    struct spyre_cmd_gemm ok = {
        .hdr = { SPYRE_OP_GEMM, 0, sizeof(ok) },
        .a_dtype = SPYRE_DTYPE_FP16, .b_dtype = SPYRE_DTYPE_FP16,
        .c_dtype = SPYRE_DTYPE_BF16, .bias_dtype = SPYRE_DTYPE_FP32,
        .m = 4, .n = 5, .k = 6, .batch = 2, .lda = 6, .ldb = 5, .ldc = 5,
        .stride_a = 24, .stride_b = 30, .stride_c = 20,
        .alpha = 0x3f800000,
    };
    struct spyre_cmd_gemm x;
    SpyreGemmSpan sp;
    int a, b, c, bias;
    unsigned accepted = 0;

    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&ok, &sp));
    ASSERT_EQ((24 + 3 * 6 + 6) * 2, sp.a);
    ASSERT_EQ((30 + 5 * 5 + 5) * 2, sp.b);
    ASSERT_EQ((20 + 3 * 5 + 5) * 2, sp.c);
    ASSERT_EQ(5 * 4, sp.bias);

    /* The whole dtype cube. */
    for (a = 0; a <= SPYRE_DTYPE_COUNT; a++) {
        for (b = 0; b <= SPYRE_DTYPE_COUNT; b++) {
            for (c = 0; c <= SPYRE_DTYPE_COUNT; c++) {
                for (bias = 0; bias <= SPYRE_DTYPE_COUNT; bias++) {
                    bool in_ok = a >= SPYRE_DTYPE_FP32 &&
                                 a <= SPYRE_DTYPE_INT8 &&
                                 (a == b || (a >= SPYRE_DTYPE_FP8_E4M3 &&
                                             a <= SPYRE_DTYPE_FP8_E5M2 &&
                                             b >= SPYRE_DTYPE_FP8_E4M3 &&
                                             b <= SPYRE_DTYPE_FP8_E5M2));
                    bool c_ok = a == SPYRE_DTYPE_INT8 ?
                                c == SPYRE_DTYPE_INT32 :
                                (c >= SPYRE_DTYPE_FP32 &&
                                 c <= SPYRE_DTYPE_BF16);
                    bool bias_ok = bias == 0 || (bias >= SPYRE_DTYPE_FP32 &&
                                                 bias <= SPYRE_DTYPE_BF16);
                    bool want = in_ok && c_ok && bias_ok;

                    x = ok;
                    x.a_dtype = a;
                    x.b_dtype = b;
                    x.c_dtype = c;
                    x.bias_dtype = bias;
                    EXPECT_EQ(want ? SPYRE_STATUS_OK :
                              SPYRE_STATUS_INVALID_OPERAND,
                              spyre_gemm_check(&x, NULL)) {
                        TH_LOG("%d %d %d %d", a, b, c, bias);
                    }
                    accepted += want;
                }
            }
        }
    }
    /* 7 float pairs x 3 outputs x 4 biases + int8 x 4 biases. */
    ASSERT_EQ(7 * 3 * 4 + 4, accepted);

    x = ok;
    x.hdr.flags = SPYRE_GEMM_F_ALL;
    x.lda = 4;
    x.ldb = 6;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, NULL));
    x.hdr.flags = 1 << 3;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.hdr.flags = SPYRE_GEMM_F_TRANS_A;     /* lda 6 >= m 4 */
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, NULL));
    x.lda = 3;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.lda = 5;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.ldb = 4;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x.hdr.flags = SPYRE_GEMM_F_TRANS_B;     /* ldb >= k 6 */
    x.ldb = 5;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.ldc = 4;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.m = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.batch = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.k = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    /* Broadcast batch strides are fine. */
    x = ok;
    x.stride_b = 0;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, &sp));
    ASSERT_EQ(30 * 2, sp.b);
    /* Spans overflowing 64 bits. */
    x = ok;
    x.stride_a = 1ULL << 63;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.ldc = UINT64_MAX / 2;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x = ok;
    x.lda = UINT64_MAX / 2 - 2;     /* fits elements, not bytes */
    x.m = 2;
    x.batch = 1;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    /* Limits. */
    x = ok;
    x.m = x.n = x.k = 4096;
    x.batch = 1;
    x.lda = x.ldb = x.ldc = 4096;
    x.stride_a = x.stride_b = x.stride_c = 0;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, NULL));    /* 2^36 */
    x.batch = 2;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_gemm_check(&x, NULL));
    x.batch = 1;
    x.k = 4097;
    x.lda = 4097;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_gemm_check(&x, NULL));
    x.m = x.n = x.k = x.batch = UINT32_MAX;
    x.lda = x.ldb = x.ldc = UINT32_MAX;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_gemm_check(&x, NULL));
    /* INT8: beta 0 or 1 only; bias ignored (no span). */
    x = ok;
    x.a_dtype = x.b_dtype = SPYRE_DTYPE_INT8;
    x.c_dtype = SPYRE_DTYPE_INT32;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, &sp));
    ASSERT_EQ(0, sp.bias);
    ASSERT_EQ((20 + 3 * 5 + 5) * 4, sp.c);
    x.beta = f2u(1.0f);
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, NULL));
    x.beta = f2u(-0.0f);
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_gemm_check(&x, NULL));
    x.beta = f2u(0.5f);
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
    x.beta = f2u(NAN);
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_check(&x, NULL));
}

/* An I/O layer that records extents, counts calls and can fail. */
struct io_rec {
    SpyreGemmHostBufs bufs;
    uint64_t end[4];
    unsigned long calls, fail_at;
    int fail_status;
};

static int rec_read(void *opaque, int opnd, uint64_t off, uint64_t stride,
                    uint32_t nrows, void *dst, size_t len)
{
    struct io_rec *r = opaque;
    const void *base[4] = { r->bufs.a, r->bufs.b, r->bufs.c, r->bufs.bias };
    uint64_t end = off + (nrows - 1) * stride + len;
    uint32_t i;

    if (++r->calls == r->fail_at) {
        return r->fail_status;
    }
    if (end > r->end[opnd]) {
        r->end[opnd] = end;
    }
    for (i = 0; i < nrows; i++) {
        memcpy((uint8_t *)dst + i * len,
               (const uint8_t *)base[opnd] + off + i * stride, len);
    }
    return 0;
}

static int rec_write(void *opaque, int opnd, uint64_t off, uint64_t stride,
                     uint32_t nrows, const void *src, size_t len)
{
    struct io_rec *r = opaque;
    uint64_t end = off + (nrows - 1) * stride + len;
    uint32_t i;

    if (++r->calls == r->fail_at || opnd != SPYRE_GEMM_OPND_C) {
        return r->fail_status;
    }
    if (end > r->end[opnd]) {
        r->end[opnd] = end;
    }
    for (i = 0; i < nrows; i++) {
        memcpy((uint8_t *)r->bufs.c + off + i * stride,
               (const uint8_t *)src + i * len, len);
    }
    return 0;
}

/*
 * The step API: steps are counted, the engine touches exactly the spans
 * spyre_gemm_check() reports, results do not depend on the tile size
 * (int8: bit-exact), and an I/O error stops the GEMM with that status.
 */
TEST(gemm_steps_and_io)
{
    enum { M = 150, N = 45, K = 600, LDA = 601, LDB = 46, LDC = 47 };
    struct spyre_cmd_gemm cmd = {
        .hdr = { SPYRE_OP_GEMM, 0, sizeof(cmd) },
        .a_dtype = SPYRE_DTYPE_INT8, .b_dtype = SPYRE_DTYPE_INT8,
        .c_dtype = SPYRE_DTYPE_INT32, .m = M, .n = N, .k = K, .batch = 2,
        .lda = LDA, .ldb = LDB, .ldc = LDC,
        .stride_a = M * LDA, .stride_b = K * LDB, .stride_c = M * LDC,
        .beta = f2u(1.0f),
    };
    static int8_t a[2 * M * LDA], b[2 * K * LDB];
    static int32_t c_ref[2 * M * LDC], c[2 * M * LDC], c_init[2 * M * LDC];
    static uint8_t tile_buf[SPYRE_GEMM_TILE_BUF_SIZE];
    struct io_rec rec = { 0 };
    SpyreGemmIO io = { .read = rec_read, .write = rec_write, .opaque = &rec };
    SpyreGemmSpan span;
    SpyreGemm g;
    size_t sizes[] = { SPYRE_GEMM_TILE_BUF_MIN, 200000,
                       SPYRE_GEMM_TILE_BUF_SIZE };
    unsigned si, steps;
    size_t i;

    for (i = 0; i < sizeof(a); i++) {
        a[i] = rnd32();
    }
    for (i = 0; i < sizeof(b); i++) {
        b[i] = rnd32();
    }
    for (i = 0; i < 2 * M * LDC; i++) {
        c_init[i] = (int32_t)rnd32();
    }
    ASSERT_EQ(0, spyre_gemm_check(&cmd, &span));
    for (si = 0; si < 3; si++) {
        memcpy(c, c_init, sizeof(c));
        rec = (struct io_rec) {
            .bufs = { .a = a, .b = b, .c = c },
        };
        ASSERT_EQ(0, spyre_gemm_init(&g, &cmd, 1, 1, &io, tile_buf,
                                     sizes[si]));
        steps = 0;
        while (!spyre_gemm_done(&g)) {
            ASSERT_EQ(steps, spyre_gemm_steps_done(&g));
            ASSERT_EQ(0, spyre_gemm_step(&g));
            steps++;
        }
        ASSERT_EQ(spyre_gemm_steps_total(&g), steps);
        ksft_print_msg("tile buffer %zu: %u steps, %lu I/O calls\n", sizes[si],
                       steps, rec.calls);
        if (si == 0) {
            ASSERT_GT(steps, 2);
            memcpy(c_ref, c, sizeof(c));
        } else {
            ASSERT_EQ(0, memcmp(c_ref, c, sizeof(c)));
        }
        ASSERT_EQ(span.a, rec.end[SPYRE_GEMM_OPND_A]);
        ASSERT_EQ(span.b, rec.end[SPYRE_GEMM_OPND_B]);
        ASSERT_EQ(span.c, rec.end[SPYRE_GEMM_OPND_C]);
        /* Further steps are no-ops. */
        ASSERT_EQ(0, spyre_gemm_step(&g));
    }
    /* Spot-check against a direct computation (and the untouched gap). */
    for (i = 0; i < 50; i++) {
        uint32_t bt = rnd32() % 2, r = rnd32() % M, col = rnd32() % N, kk;
        uint32_t want = c_init[bt * M * LDC + r * LDC + col];

        for (kk = 0; kk < K; kk++) {
            want += (uint32_t)(a[bt * M * LDA + r * LDA + kk] *
                               b[bt * K * LDB + kk * LDB + col]);
        }
        ASSERT_EQ((int32_t)want, c_ref[bt * M * LDC + r * LDC + col]);
        ASSERT_EQ(c_init[bt * M * LDC + r * LDC + N + 1],
                  c_ref[bt * M * LDC + r * LDC + N + 1]);
    }
    /* An MMU fault in the middle: reported, sticky. */
    rec = (struct io_rec) {
        .bufs = { .a = a, .b = b, .c = c },
        .fail_at = 100, .fail_status = SPYRE_STATUS_MMU_FAULT,
    };
    ASSERT_EQ(0, spyre_gemm_init(&g, &cmd, 1, 1, &io, tile_buf,
                                 SPYRE_GEMM_TILE_BUF_MIN));
    for (steps = 0; !spyre_gemm_done(&g); steps++) {
        if (spyre_gemm_step(&g) != SPYRE_STATUS_OK) {
            break;
        }
    }
    ASSERT_FALSE(spyre_gemm_done(&g));
    ASSERT_EQ(SPYRE_STATUS_MMU_FAULT, spyre_gemm_step(&g));
    /* The same through spyre_gemm_run(), failing the very first read. */
    rec.calls = 0;
    rec.fail_at = 1;
    rec.fail_status = SPYRE_STATUS_DMA_ERROR;
    ASSERT_EQ(SPYRE_STATUS_DMA_ERROR,
              spyre_gemm_run(&cmd, 1, 1, &io, tile_buf, sizeof(tile_buf),
                             NULL));
    /* Tile buffer too small, or invalid command. */
    ASSERT_EQ(SPYRE_STATUS_INTERNAL,
              spyre_gemm_init(&g, &cmd, 1, 1, &io, tile_buf,
                              SPYRE_GEMM_TILE_BUF_MIN - 1));
    cmd.k = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_gemm_init(&g, &cmd, 1, 1, &io, tile_buf, sizeof(tile_buf)));
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_gemm_step(&g));
}

/* Large: 512^3 against fp64, timed. */
static void big_gemm(struct __test_metadata *_metadata, int dtype)
{
    enum { S = 512 };
    size_t es = spyre_math_dtype_size(dtype);
    uint8_t *a = malloc(S * S * es), *b = malloc(S * S * es);
    float *c = malloc(S * S * 4), *fa = malloc(S * S * 4);
    float *fb = malloc(S * S * 4), *fc = malloc(S * S * 4);
    double *ref = calloc(S * S, 8), *aref = calloc(S * S, 8);
    double *da = malloc(S * S * 8), *db = malloc(S * S * 8);
    void *tile_buf = malloc(SPYRE_GEMM_TILE_BUF_SIZE);
    struct spyre_cmd_gemm cmd = {
        .hdr = { SPYRE_OP_GEMM, 0, sizeof(cmd) },
        .a_dtype = dtype, .b_dtype = dtype, .c_dtype = SPYRE_DTYPE_FP32,
        .m = S, .n = S, .k = S, .batch = 1, .lda = S, .ldb = S, .ldc = S,
        .alpha = f2u(1.0f),
    };
    SpyreGemmHostBufs bufs = {
        .a = a, .a_size = S * S * es, .b = b, .b_size = S * S * es,
        .c = c, .c_size = S * S * 4,
    };
    double t0, t_gemm = 1e9, t_blas = 1e9, t_ref, worst = 0, sum_rel = 0;
    size_t i, j, k;
    int rep;

    fill_random(a, dtype, S * S, 1.0);
    fill_random(b, dtype, S * S, 1.0);
    for (i = 0; i < S * S; i++) {
        da[i] = ref_decode(dtype, a, i);
        db[i] = ref_decode(dtype, b, i);
        fa[i] = (float)da[i];
        fb[i] = (float)db[i];
    }
    t0 = now_sec();
    for (i = 0; i < S; i++) {
        for (k = 0; k < S; k++) {
            double av = da[i * S + k];

            for (j = 0; j < S; j++) {
                ref[i * S + j] += av * db[k * S + j];
                aref[i * S + j] += fabs(av * db[k * S + j]);
            }
        }
    }
    t_ref = now_sec() - t0;
    for (rep = 0; rep < 3; rep++) {
        t0 = now_sec();
        ASSERT_EQ(0, spyre_gemm_host(&cmd, 1, 1, &bufs, tile_buf,
                                     SPYRE_GEMM_TILE_BUF_SIZE, NULL));
        t0 = now_sec() - t0;
        t_gemm = t0 < t_gemm ? t0 : t_gemm;
        t0 = now_sec();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, S, S, 1.0f,
                    fa, S, fb, S, 0.0f, fc, S);
        t0 = now_sec() - t0;
        t_blas = t0 < t_blas ? t0 : t_blas;
    }
    for (i = 0; i < S * S; i++) {
        double err = fabs(c[i] - ref[i]);
        double allow = 2.0 * S * U32 * aref[i] + U32 * fabs(ref[i]);

        ASSERT_LE(err, allow) {
            TH_LOG("C[%zu] = %a, want %a", i, c[i], ref[i]);
        }
        worst = err / aref[i] > worst ? err / aref[i] : worst;
        sum_rel += err / aref[i];
    }
    ksft_print_msg("gemm 512^3 %s: %.1f ms (%.1f GFLOP/s); plain cblas_sgemm "
                   "%.1f ms; fp64 reference %.0f ms; max err/sum|ab| %.2e "
                   "(bound %.2e), mean %.2e\n", dt_name(dtype),
                   t_gemm * 1e3, 2.0 * S * S * S / t_gemm * 1e-9,
                   t_blas * 1e3, t_ref * 1e3, worst, 2.0 * S * U32,
                   sum_rel / (S * S));
    ASSERT_LT(t_gemm, 1.0);
    free(a);
    free(b);
    free(c);
    free(fa);
    free(fb);
    free(fc);
    free(ref);
    free(aref);
    free(da);
    free(db);
    free(tile_buf);
}

TEST(gemm_512_fp32)
{
    big_gemm(_metadata, SPYRE_DTYPE_FP32);
}

TEST(gemm_512_fp16)
{
    big_gemm(_metadata, SPYRE_DTYPE_FP16);
}

TEST(gemm_512_int8_timing)
{
    enum { S = 512 };
    static int8_t a[S * S], b[S * S];
    static int32_t c[S * S];
    static uint8_t tile_buf[SPYRE_GEMM_TILE_BUF_SIZE];
    struct spyre_cmd_gemm cmd = {
        .hdr = { SPYRE_OP_GEMM, 0, sizeof(cmd) },
        .a_dtype = SPYRE_DTYPE_INT8, .b_dtype = SPYRE_DTYPE_INT8,
        .c_dtype = SPYRE_DTYPE_INT32, .m = S, .n = S, .k = S, .batch = 1,
        .lda = S, .ldb = S, .ldc = S,
    };
    SpyreGemmHostBufs bufs = {
        .a = a, .a_size = sizeof(a), .b = b, .b_size = sizeof(b),
        .c = c, .c_size = sizeof(c),
    };
    double t;
    size_t i, k;

    for (i = 0; i < S * S; i++) {
        a[i] = rnd32();
        b[i] = rnd32();
    }
    t = now_sec();
    ASSERT_EQ(0, spyre_gemm_host(&cmd, 1, 1, &bufs, tile_buf, sizeof(tile_buf),
                                 NULL));
    t = now_sec() - t;
    for (i = 0; i < 200; i++) {
        size_t r = rnd32() % S, col = rnd32() % S;
        int32_t want = 0;

        for (k = 0; k < S; k++) {
            want += a[r * S + k] * b[k * S + col];
        }
        ASSERT_EQ(want, c[r * S + col]);
    }
    ksft_print_msg("gemm 512^3 int8: %.1f ms\n", t * 1e3);
    ASSERT_LT(t, 2.0);
}

/* ---- ELTWISE ---------------------------------------------------------- */

static double ref_elt(int op, double x, double y, double alpha)
{
    switch (op) {
    case SPYRE_ELT_ADD:
        return x + y;
    case SPYRE_ELT_MUL:
        return x * y;
    case SPYRE_ELT_SCALE:
        return alpha * x;
    case SPYRE_ELT_RELU:
        return isnan(x) ? x : x > 0 ? x : 0;
    case SPYRE_ELT_GELU:
        if (isinf(x)) {
            return x > 0 ? x : -0.0;    /* the limits (docs/spyre-hw.rst) */
        }
        return x * 0.5 * (1 + erf(x / sqrt(2.0)));
    case SPYRE_ELT_SILU:
        if (isinf(x)) {
            return x > 0 ? x : -0.0;
        }
        return x / (1 + exp(-x));
    default:
        return exp(x);
    }
}

/*
 * Element-wise ops against fp64 on decoded inputs.  fp32 arithmetic and
 * libm's expf/erff are within a few ulp, so allowed error is
 * 8 * 2^-24 * |ref| + 2^-24 * |x| (GELU's 1 + erf cancels for x << 0)
 * + half an ulp of the output type (+ its subnormal half step).
 * MUL of fp16/bf16 is exact in fp32, so it must match the correctly
 * rounded product exactly; RELU must be exact.
 */
TEST(eltwise)
{
    static const int dts[] = {
        SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
    };
    static const float sp[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 1e-3f, -1e-3f, 9.0f, -9.0f, 80.0f,
        -80.0f, 100.0f, -100.0f, INFINITY, -INFINITY, NAN, 65504.0f,
        6e-8f, -20.0f,
    };
    enum { N = 5000 };
    static float fa[N], fb[N];
    static uint8_t a[N * 4], b[N * 4], out[N * 4], inpl[N * 4];
    struct tally t = { 0 };
    float alpha = -1.75f;
    int op, d;
    size_t i, ns = sizeof(sp) / sizeof(sp[0]);

    for (i = 0; i < N; i++) {
        fa[i] = (float)rnd_uniform(-10, 10);
        fb[i] = (float)rnd_uniform(-10, 10);
        if (i < ns * ns) {
            fa[i] = sp[i % ns];
            fb[i] = sp[i / ns];
        }
    }
    for (d = 0; d < 3; d++) {
        int dt = dts[d];
        size_t es = spyre_math_dtype_size(dt);

        spyre_store_fp32(a, dt, fa, N, 0);
        spyre_store_fp32(b, dt, fb, N, 0);
        for (op = SPYRE_ELT_ADD; op <= SPYRE_ELT_EXP; op++) {
            bool bin = op == SPYRE_ELT_ADD || op == SPYRE_ELT_MUL;

            ASSERT_EQ(0, spyre_eltwise(op, dt, alpha, a, bin ? b : NULL, out,
                                       N));
            for (i = 0; i < N; i++) {
                double x = ref_decode(dt, a, i), y = ref_decode(dt, b, i);
                double ref = ref_elt(op, x, y, alpha);
                double got = ref_decode(dt, out, i);
                double allow = 8 * U32 * fabs(ref) + U32 * fabs(x) +
                               out_rel(dt) * fabs(ref) + out_abs(dt);

                if ((op == SPYRE_ELT_MUL && dt != SPYRE_DTYPE_FP32) ||
                    op == SPYRE_ELT_RELU) {
                    float want = (float)ref;

                    if (dt == SPYRE_DTYPE_FP16) {
                        want = ref_fp16_to_fp32(ref_fp32_to_fp16(want));
                    } else if (dt == SPYRE_DTYPE_BF16) {
                        want = ref_bf16_value(ref_fp32_to_bf16(want));
                    }
                    CHECK(&t, (isnan(want) && isnan(got)) ||
                          (got == want && !signbit(got) == !signbit(want)),
                          "%s op %d (%a, %a) = %a, want %a", dt_name(dt), op,
                          x, y, got, want);
                } else if (isnan(ref) || isinf(ref)) {
                    CHECK(&t, (isnan(ref) && isnan(got)) || got == ref,
                          "%s op %d (%a, %a) = %a, want %a", dt_name(dt), op,
                          x, y, got, ref);
                } else {
                    /* Overflow of the output type is allowed to be inf. */
                    bool ovf = isinf(got) && fabs(ref) * (1 - 16 * U32) >
                               (dt == SPYRE_DTYPE_FP16 ? 65504.0 : FLT_MAX);

                    CHECK(&t, ovf || fabs(got - ref) <= allow,
                          "%s op %d (%a, %a) = %a, want %a", dt_name(dt), op,
                          x, y, got, ref);
                }
            }
            /* In place: out == a (and out == b for binary ops). */
            memcpy(inpl, a, N * es);
            ASSERT_EQ(0, spyre_eltwise(op, dt, alpha, inpl, bin ? b : NULL,
                                       inpl, N));
            ASSERT_EQ(0, memcmp(inpl, out, N * es));
            if (bin) {
                memcpy(inpl, b, N * es);
                ASSERT_EQ(0, spyre_eltwise(op, dt, alpha, a, inpl, inpl, N));
                ASSERT_EQ(0, memcmp(inpl, out, N * es));
            }
            /* Chunking does not matter. */
            ASSERT_EQ(0, spyre_eltwise(op, dt, alpha, a + 7 * es,
                                       bin ? b + 7 * es : NULL, inpl, 300));
            ASSERT_EQ(0, memcmp(inpl, out + 7 * es, 300 * es));
        }
    }
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_eltwise(0, SPYRE_DTYPE_FP32, 1, a, b, out, 1));
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_eltwise(8, SPYRE_DTYPE_FP32, 1, a, b, out, 1));
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_eltwise(1, SPYRE_DTYPE_INT8, 1, a, b, out, 1));
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
              spyre_eltwise(SPYRE_ELT_ADD, SPYRE_DTYPE_FP32, 1, a, NULL, out,
                            1));
    ksft_print_msg("eltwise: %lu checks\n", t.checks);
    ASSERT_EQ(0, t.fails);
}

TEST(vector_checks)
{
    struct spyre_cmd_eltwise e = {
        .hdr = { SPYRE_OP_ELTWISE, 0, sizeof(e) },
        .op = SPYRE_ELT_GELU, .dtype = SPYRE_DTYPE_BF16, .count = 100,
    };
    struct spyre_cmd_reduce r = {
        .hdr = { SPYRE_OP_REDUCE, 0, sizeof(r) },
        .op = SPYRE_REDUCE_MAX, .dtype = SPYRE_DTYPE_FP16, .rows = 3,
        .cols = 10, .ld = 12,
    };
    struct spyre_cmd_rowop w = {
        .hdr = { SPYRE_OP_ROWOP, 0, sizeof(w) },
        .op = SPYRE_ROW_RMSNORM, .dtype = SPYRE_DTYPE_FP32, .rows = 3,
        .cols = 10, .ld_src = 10, .ld_dst = 16,
    };
    struct spyre_cmd_eltwise e2;
    struct spyre_cmd_reduce r2;
    struct spyre_cmd_rowop w2;
    uint64_t s, d;

    ASSERT_EQ(0, spyre_eltwise_check(&e, &s));
    ASSERT_EQ(200, s);
    e2 = e;
    e2.hdr.flags = 1;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_eltwise_check(&e2, NULL));
    e2 = e;
    e2.pad = 1;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_eltwise_check(&e2, NULL));
    e2 = e;
    e2.op = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_eltwise_check(&e2, NULL));
    e2.op = 8;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_eltwise_check(&e2, NULL));
    e2 = e;
    e2.dtype = SPYRE_DTYPE_FP8_E4M3;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_eltwise_check(&e2, NULL));
    e2 = e;
    e2.count = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_eltwise_check(&e2, NULL));
    e2.count = SPYRE_CMD_MAX_ELEMS;
    ASSERT_EQ(SPYRE_STATUS_OK, spyre_eltwise_check(&e2, NULL));
    e2.count = UINT64_MAX;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_eltwise_check(&e2, NULL));

    ASSERT_EQ(0, spyre_reduce_check(&r, &s, &d));
    ASSERT_EQ((2 * 12 + 10) * 2, s);
    ASSERT_EQ(3 * 2, d);
    r2 = r;
    r2.hdr.flags = 4;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_reduce_check(&r2, NULL,
                                                               NULL));
    r2 = r;
    r2.op = 3;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_reduce_check(&r2, NULL,
                                                               NULL));
    r2 = r;
    r2.ld = 9;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_reduce_check(&r2, NULL,
                                                               NULL));
    r2 = r;
    r2.rows = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_reduce_check(&r2, NULL,
                                                               NULL));
    r2 = r;
    r2.dtype = SPYRE_DTYPE_INT32;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_reduce_check(&r2, NULL,
                                                               NULL));
    r2 = r;
    r2.ld = UINT64_MAX / 2;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_reduce_check(&r2, NULL,
                                                               NULL));
    r2 = r;
    r2.rows = 1 << 20;
    r2.cols = 1 << 11;
    r2.ld = r2.cols;
    ASSERT_EQ(SPYRE_STATUS_LIMIT, spyre_reduce_check(&r2, NULL, NULL));

    ASSERT_EQ(0, spyre_rowop_check(&w, &s, &d));
    ASSERT_EQ(30 * 4, s);
    ASSERT_EQ((2 * 16 + 10) * 4, d);
    w2 = w;
    w2.pad = 1;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_rowop_check(&w2, NULL,
                                                              NULL));
    w2 = w;
    w2.hdr.flags = 1;
    ASSERT_EQ(SPYRE_STATUS_INVALID_COMMAND, spyre_rowop_check(&w2, NULL,
                                                              NULL));
    w2 = w;
    w2.op = 4;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_rowop_check(&w2, NULL,
                                                              NULL));
    w2 = w;
    w2.ld_dst = 9;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_rowop_check(&w2, NULL,
                                                              NULL));
    w2 = w;
    w2.cols = 0;
    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_rowop_check(&w2, NULL,
                                                              NULL));
}

/* ---- REDUCE ----------------------------------------------------------- */

/*
 * SUM against fp64: the fp32 scheme (8 lanes x 64 per 512-block, pairwise
 * lanes, Kahan across blocks) is within about 70 * 2^-24 * sum|x|; allowed
 * 128 * 2^-24 * sum|x| plus half an output ulp.  MAX is exact.  Feeding a
 * row in random chunks gives bit-identical results.
 */
TEST(reduce)
{
    static const int dts[] = {
        SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
    };
    static const uint32_t shapes[][3] = {       /* rows, cols, ld */
        { 1, 1, 1 }, { 5, 3, 3 }, { 7, 1000, 1003 }, { 2, 70001, 70001 },
        { 3, 513, 600 },
    };
    struct tally t = { 0 };
    size_t sh, i, j;
    int d, op;

    for (d = 0; d < 3; d++) {
        int dt = dts[d];
        size_t es = spyre_math_dtype_size(dt);

        for (sh = 0; sh < 5; sh++) {
            uint32_t rows = shapes[sh][0], cols = shapes[sh][1];
            uint32_t ld = shapes[sh][2];
            uint8_t *src = malloc((size_t)rows * ld * es);
            uint8_t out[16 * 4];

            fill_random(src, dt, (size_t)rows * ld, 3.0);
            for (i = 0; i < rows; i++) {
                /* Offset so that the sum does not cancel to ~0. */
                float bias = (float)i;
                float *f = malloc(cols * 4);

                spyre_load_fp32(f, src + i * ld * es, dt, cols);
                for (j = 0; j < cols; j++) {
                    f[j] += bias;
                }
                spyre_store_fp32(src + i * ld * es, dt, f, cols, 0);
                free(f);
            }
            for (op = SPYRE_REDUCE_SUM; op <= SPYRE_REDUCE_MAX; op++) {
                ASSERT_EQ(0, spyre_reduce(op, dt, src, ld, rows, cols, out));
                for (i = 0; i < rows; i++) {
                    double sum = 0, asum = 0, mx = -INFINITY, got, ref;
                    SpyreRow r;
                    size_t pos = 0;
                    uint8_t one[4];
                    float rv;

                    for (j = 0; j < cols; j++) {
                        double v = ref_decode(dt, src, i * ld + j);

                        sum += v;
                        asum += fabs(v);
                        mx = v > mx ? v : mx;
                    }
                    got = ref_decode(dt, out, i);
                    ref = op == SPYRE_REDUCE_SUM ? sum : mx;
                    /* fp16 overflows to inf beyond 65520. */
                    CHECK(&t, (isinf(got) && dt == SPYRE_DTYPE_FP16 &&
                               fabs(ref) > 65520 * (1 + 128 * U32)) ||
                          fabs(got - ref) <=
                          (op == SPYRE_REDUCE_SUM ? 128 * U32 * asum : 0) +
                          out_rel(dt) * fabs(ref) + out_abs(dt),
                          "%s op %d %ux%u row %zu: %a, want %a", dt_name(dt),
                          op, rows, cols, i, got, ref);
                    if (op == SPYRE_REDUCE_MAX) {
                        CHECK(&t, got == ref, "max %a != %a", got, ref);
                    }
                    /* Random chunks. */
                    ASSERT_EQ(0, spyre_row_init(&r, SPYRE_OP_REDUCE, op, cols,
                                                0));
                    while (pos < cols) {
                        size_t c = 1 + rnd32() % 700;

                        c = c > cols - pos ? cols - pos : c;
                        ASSERT_EQ(0, spyre_row_feed(&r, src + (i * ld + pos) *
                                                    es, dt, c));
                        pos += c;
                    }
                    ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
                              spyre_row_feed(&r, src, dt, 1));
                    ASSERT_EQ(0, spyre_row_end_pass(&r));
                    rv = spyre_row_result(&r);
                    spyre_store_fp32(one, dt, &rv, 1, 0);
                    CHECK(&t, memcmp(one, out + i * es, es) == 0,
                          "chunked %s op %d differs", dt_name(dt), op);
                }
            }
            free(src);
        }
    }
    /* NaN propagates through SUM and MAX (wherever it is). */
    {
        float v[9] = { 1, 2, NAN, 3, 4, 5, 6, 7, 8 }, o;
        float w[3] = { -INFINITY, -INFINITY, -INFINITY };

        ASSERT_EQ(0, spyre_reduce(SPYRE_REDUCE_MAX, SPYRE_DTYPE_FP32, v, 9, 1,
                                  9, &o));
        ASSERT_TRUE(isnan(o));
        ASSERT_EQ(0, spyre_reduce(SPYRE_REDUCE_SUM, SPYRE_DTYPE_FP32, v, 9, 1,
                                  9, &o));
        ASSERT_TRUE(isnan(o));
        v[2] = INFINITY;
        ASSERT_EQ(0, spyre_reduce(SPYRE_REDUCE_SUM, SPYRE_DTYPE_FP32, v, 9, 1,
                                  9, &o));
        ASSERT_EQ(INFINITY, o);
        ASSERT_EQ(0, spyre_reduce(SPYRE_REDUCE_MAX, SPYRE_DTYPE_FP32, w, 3, 1,
                                  3, &o));
        ASSERT_EQ(-INFINITY, o);
    }
    ksft_print_msg("reduce: %lu checks\n", t.checks);
    ASSERT_EQ(0, t.fails);
}

/* ---- ROWOP ------------------------------------------------------------ */

/*
 * SOFTMAX, LAYERNORM and RMSNORM against fp64.  Allowed error:
 *  - softmax: 128 * 2^-24 * |ref| (sum error ~70u, expf and the division
 *    a few u) + half an output ulp;
 *  - norms: the statistics carry ~70u relative error, and x - mean loses
 *    u * max|x| absolutely: 128 * 2^-24 * (|ref| + rstd * max|x| * |g|)
 *    + |b| * 2^-24 + half an output ulp.
 * Softmax rows must also sum to 1 within cols * half an output ulp.
 */
TEST(rowop)
{
    static const int dts[] = {
        SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
    };
    static const uint32_t shapes[][4] = {   /* rows, cols, ld_src, ld_dst */
        { 1, 1, 1, 1 }, { 4, 7, 9, 8 }, { 3, 1000, 1000, 1001 },
        { 2, 20000, 20001, 20000 },
    };
    struct tally t = { 0 };
    float eps = 1e-5f;
    size_t sh, i, j;
    int d, op, gb;

    for (d = 0; d < 3; d++) {
        int dt = dts[d];
        size_t es = spyre_math_dtype_size(dt);

        for (sh = 0; sh < 4; sh++) {
            uint32_t rows = shapes[sh][0], cols = shapes[sh][1];
            uint32_t lds = shapes[sh][2], ldd = shapes[sh][3];
            uint8_t *src = malloc((size_t)rows * lds * es);
            uint8_t *dst = malloc((size_t)rows * ldd * es);
            uint8_t *dst2 = malloc((size_t)rows * ldd * es);
            float *gamma = malloc(cols * 4), *beta = malloc(cols * 4);

            fill_random(src, dt, (size_t)rows * lds, 4.0);
            for (j = 0; j < cols; j++) {
                gamma[j] = (float)rnd_uniform(0.5, 1.5);
                beta[j] = (float)rnd_uniform(-1, 1);
            }
            for (op = SPYRE_ROW_SOFTMAX; op <= SPYRE_ROW_RMSNORM; op++) {
                for (gb = 0; gb < 2; gb++) {
                    const float *g = gb ? gamma : NULL;
                    const float *bb = gb ? beta : NULL;

                    memset(dst, 0xa5, (size_t)rows * ldd * es);
                    ASSERT_EQ(0, spyre_rowop(op, dt, src, lds, dst, ldd, rows,
                                             cols, g, bb, eps));
                    for (i = 0; i < rows; i++) {
                        double mx = -INFINITY, sum = 0, sq = 0, mean, var;
                        double rstd, amax = 0, osum = 0;

                        for (j = 0; j < cols; j++) {
                            double v = ref_decode(dt, src, i * lds + j);

                            mx = v > mx ? v : mx;
                            sum += v;
                            sq += v * v;
                            amax = fabs(v) > amax ? fabs(v) : amax;
                        }
                        mean = sum / cols;
                        var = 0;
                        for (j = 0; j < cols; j++) {
                            double dv = ref_decode(dt, src, i * lds + j) -
                                        mean;

                            var += dv * dv;
                        }
                        var /= cols;
                        if (op == SPYRE_ROW_SOFTMAX) {
                            double s = 0;

                            for (j = 0; j < cols; j++) {
                                s += exp(ref_decode(dt, src, i * lds + j) -
                                         mx);
                            }
                            rstd = 1 / s;
                        } else if (op == SPYRE_ROW_LAYERNORM) {
                            rstd = 1 / sqrt(var + eps);
                        } else {
                            rstd = 1 / sqrt(sq / cols + eps);
                        }
                        for (j = 0; j < cols; j++) {
                            double x = ref_decode(dt, src, i * lds + j);
                            double gj = g ? g[j] : 1, bj = bb ? bb[j] : 0;
                            double got = ref_decode(dt, dst, i * ldd + j);
                            double ref, allow;

                            if (op == SPYRE_ROW_SOFTMAX) {
                                ref = exp(x - mx) * rstd;
                                allow = 128 * U32 * ref;
                            } else if (op == SPYRE_ROW_LAYERNORM) {
                                ref = (x - mean) * rstd * gj + bj;
                                allow = 128 * U32 * (fabs(ref) + rstd * amax *
                                                     fabs(gj)) +
                                        U32 * fabs(bj);
                            } else {
                                ref = x * rstd * gj;
                                allow = 128 * U32 * fabs(ref);
                            }
                            allow += out_rel(dt) * fabs(ref) + out_abs(dt);
                            osum += got;
                            CHECK(&t, fabs(got - ref) <= allow,
                                  "%s op %d gb %d %ux%u [%zu][%zu]: %a, "
                                  "want %a", dt_name(dt), op, gb, rows, cols,
                                  i, j, got, ref);
                        }
                        if (op == SPYRE_ROW_SOFTMAX) {
                            CHECK(&t, fabs(osum - 1) <= 1e-6 +
                                  cols * out_rel(dt),
                                  "softmax row sums to %.9g", osum);
                        }
                        /* Padding between dst rows untouched. */
                        for (j = cols * es; j < ldd * es && i + 1 < rows;
                             j++) {
                            CHECK(&t, dst[i * ldd * es + j] == 0xa5,
                                  "dst padding written");
                        }
                    }
                    /* Streaming in chunks gives the same bytes. */
                    for (i = 0; i < rows; i++) {
                        SpyreRow r;
                        unsigned p;
                        size_t pos;

                        ASSERT_EQ(0, spyre_row_init(&r, SPYRE_OP_ROWOP, op,
                                                    cols, eps));
                        for (p = 0; p < spyre_row_passes(&r); p++) {
                            for (pos = 0; pos < cols;) {
                                size_t c = 1 + rnd32() % 900;

                                c = c > cols - pos ? cols - pos : c;
                                ASSERT_EQ(0, spyre_row_feed(&r, src +
                                          (i * lds + pos) * es, dt, c));
                                pos += c;
                            }
                            ASSERT_EQ(0, spyre_row_end_pass(&r));
                        }
                        for (pos = 0; pos < cols;) {
                            size_t c = 1 + rnd32() % 900;

                            c = c > cols - pos ? cols - pos : c;
                            ASSERT_EQ(0, spyre_row_apply(&r, dst2 + pos * es,
                                                         dt, src +
                                                         (i * lds + pos) * es,
                                                         c, g ? g + pos : NULL,
                                                         bb ? bb + pos :
                                                         NULL));
                            pos += c;
                        }
                        CHECK(&t, memcmp(dst2, dst + i * ldd * es,
                                         cols * es) == 0,
                              "chunked rowop %d differs", op);
                    }
                }
            }
            /* In place. */
            memcpy(dst2, src, (size_t)cols * es);
            ASSERT_EQ(0, spyre_rowop(SPYRE_ROW_LAYERNORM, dt, dst2, lds, dst2,
                                     lds, 1, cols, gamma, beta, eps));
            ASSERT_EQ(0, spyre_rowop(SPYRE_ROW_LAYERNORM, dt, src, lds, dst,
                                     ldd, 1, cols, gamma, beta, eps));
            ASSERT_EQ(0, memcmp(dst2, dst, cols * es));
            free(src);
            free(dst);
            free(dst2);
            free(gamma);
            free(beta);
        }
    }
    /* Misuse of the streaming API is refused. */
    {
        SpyreRow r;
        float x[4] = { 1, 2, 3, 4 }, y[4];

        ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
                  spyre_row_init(&r, SPYRE_OP_ROWOP, 4, 4, 0));
        ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
                  spyre_row_init(&r, SPYRE_OP_REDUCE, SPYRE_REDUCE_SUM, 0, 0));
        ASSERT_EQ(0, spyre_row_init(&r, SPYRE_OP_ROWOP, SPYRE_ROW_SOFTMAX, 4,
                                    0));
        ASSERT_EQ(2, spyre_row_passes(&r));
        ASSERT_EQ(0, spyre_row_feed(&r, x, SPYRE_DTYPE_FP32, 3));
        ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND, spyre_row_end_pass(&r));
        ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
                  spyre_row_apply(&r, y, SPYRE_DTYPE_FP32, x, 4, NULL, NULL));
        ASSERT_EQ(SPYRE_STATUS_INVALID_OPERAND,
                  spyre_row_feed(&r, x, SPYRE_DTYPE_INT8, 1));
    }
    /* Softmax of a row with -inf entries and a large offset. */
    {
        float x[4] = { 1000, -INFINITY, 1000, 999 }, y[4];
        double e1 = exp(-1.0), s = 2 + e1;

        ASSERT_EQ(0, spyre_rowop(SPYRE_ROW_SOFTMAX, SPYRE_DTYPE_FP32, x, 4, y,
                                 4, 1, 4, NULL, NULL, 0));
        ASSERT_LE(fabs(y[0] - 1 / s), 4e-7);
        ASSERT_EQ(0.0f, y[1]);
        ASSERT_LE(fabs(y[3] - e1 / s), 4e-7);
    }
    ksft_print_msg("rowop: %lu checks\n", t.checks);
    ASSERT_EQ(0, t.fails);
}

TEST_HARNESS_MAIN
