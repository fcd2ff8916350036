/*
 * Spyre card model: numeric core (dtype conversion, GEMM, element-wise,
 * reduction and row operations).  See spyre-math.h.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <math.h>
#include <string.h>

#include <cblas.h>

#include "spyre-math.h"

#define CHUNK           256     /* elements converted per stack buffer */
#define GEMM_TILE       512     /* largest tile edge (M, N and K) */
/* INT8 K blocks are summed in binary32: exact only up to 1024 steps. */
_Static_assert(GEMM_TILE <= 1024, "INT8 GEMM K blocks must stay exact");
#define GEMM_ALIGN      64
#define ROW_LANES       8
#define ROW_BLOCK       512     /* columns per pairwise block sum */

#define NO_TILE         UINT64_MAX

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* ---- bit access ------------------------------------------------------- */

/*
 * On a little-endian host, native binary32 is the element layout: fp32
 * data is copied as is.  (Folded to a constant by the compiler.)
 */
static inline bool host_le(void)
{
    const uint16_t one = 1;
    uint8_t b;

    memcpy(&b, &one, 1);
    return b == 1;
}

static inline uint32_t f2u(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline uint16_t ld_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t ld_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline void st_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void st_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---- checked 64-bit arithmetic ---------------------------------------- */

static bool mul_ovf(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a && b > UINT64_MAX / a) {
        return true;
    }
    *r = a * b;
    return false;
}

static bool add_ovf(uint64_t a, uint64_t b, uint64_t *r)
{
    *r = a + b;
    return *r < a;
}

/*
 * Bytes spanned by @batch matrices of @rows x @cols elements of @es bytes,
 * leading dimension @ld, @stride elements apart:
 * ((batch - 1) * stride + (rows - 1) * ld + cols) * es.
 * All counts >= 1.  Returns false on 64-bit overflow.
 */
static bool span_of(uint64_t batch, uint64_t stride, uint64_t rows,
                    uint64_t ld, uint64_t cols, size_t es, uint64_t *out)
{
    uint64_t s1, s2, t;

    if (mul_ovf(batch - 1, stride, &s1) || mul_ovf(rows - 1, ld, &s2) ||
        add_ovf(s1, s2, &t) || add_ovf(t, cols, &t) ||
        mul_ovf(t, es, &t)) {
        return false;
    }
    *out = t;
    return true;
}

/* ---- scalar conversions ----------------------------------------------- */

/* Round @m >> @s to nearest, ties to even (1 <= s <= 31). */
static inline uint32_t rne_shift(uint32_t m, unsigned s)
{
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1);
    uint32_t half = 1u << (s - 1);

    if (rem > half || (rem == half && (q & 1))) {
        q++;
    }
    return q;
}

/*
 * Round the finite binary32 magnitude @ax (sign bit clear) to a binary
 * format with @mbits fraction bits and exponent bias @bias, to nearest
 * with ties to even, with subnormals and an unbounded exponent range
 * above.  Returns the magnitude encoding (biased exponent << mbits |
 * fraction); an encoding beyond the format's largest finite value means
 * the value overflows.  A carry out of the fraction correctly bumps the
 * exponent, and a subnormal that rounds up to 2^emin becomes the smallest
 * normal.
 */
static uint32_t round_code(uint32_t ax, unsigned mbits, int bias)
{
    int e = (int)(ax >> 23);
    uint32_t m = ax & 0x7fffff;
    int te;
    int shift;

    if (e == 0) {
        e = 1;                  /* binary32 subnormal: no implicit bit */
    } else {
        m |= 0x800000;
    }
    /* The value is m * 2^(e - 150). */
    te = e - 127 + bias;
    if (te >= 1) {
        /*
         * Normal range: keep mbits + 1 significant bits.  When m has no
         * implicit bit (binary32 subnormal, only possible for te == 1)
         * the result is a subnormal code, still correct.
         */
        return ((uint32_t)(te - 1) << mbits) + rne_shift(m, 23 - mbits);
    }
    /* Subnormal in the target: quantum 2^(1 - bias - mbits). */
    shift = 23 - (int)mbits + 1 - te;
    if (shift > 25) {
        return 0;               /* below half the smallest subnormal */
    }
    return rne_shift(m, (unsigned)shift);
}

/*
 * Widen a finite magnitude encoding @code of a format with @mbits fraction
 * bits and bias @bias to binary32 bits.  Exact.
 */
static uint32_t widen_code(uint32_t code, unsigned mbits, int bias)
{
    uint32_t mask = (1u << mbits) - 1;
    uint32_t mant = code & mask;
    int e = (int)(code >> mbits);

    if (e == 0) {
        if (mant == 0) {
            return 0;
        }
        /* Subnormal: normalise so that the leading one is implicit. */
        e = 1;
        while (!(mant & (1u << mbits))) {
            mant <<= 1;
            e--;
        }
        mant &= mask;
    }
    return (uint32_t)(e - bias + 127) << 23 | mant << (23 - mbits);
}

float spyre_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t mag = h & 0x7fff;

    if (mag >= 0x7c00) {
        if (mag == 0x7c00) {
            return u2f(sign | 0x7f800000);
        }
        return u2f(sign | 0x7fc00000 | (mag & 0x3ff) << 13);
    }
    return u2f(sign | widen_code(mag, 10, 15));
}

uint16_t spyre_fp32_to_fp16(float f)
{
    uint32_t x = f2u(f);
    uint32_t ax = x & 0x7fffffff;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t code;

    if (ax > 0x7f800000) {
        return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
    }
    if (ax == 0x7f800000) {
        return sign | 0x7c00;
    }
    code = round_code(ax, 10, 15);
    return sign | (uint16_t)(code > 0x7bff ? 0x7c00 : code);
}

float spyre_bf16_to_fp32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;

    if ((x & 0x7fffffff) > 0x7f800000) {
        x |= 0x400000;          /* quieten a signalling NaN */
    }
    return u2f(x);
}

uint16_t spyre_fp32_to_bf16(float f)
{
    uint32_t x = f2u(f);
    uint32_t ax = x & 0x7fffffff;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t code;

    if (ax > 0x7f800000) {
        return (uint16_t)(x >> 16) | 0x40;
    }
    if (ax == 0x7f800000) {
        return sign | 0x7f80;
    }
    code = round_code(ax, 7, 127);
    return sign | (uint16_t)(code > 0x7f7f ? 0x7f80 : code);
}

float spyre_e4m3_to_fp32(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80) << 24;
    uint32_t mag = v & 0x7f;

    if (mag == 0x7f) {
        return u2f(sign | 0x7fc00000);
    }
    return u2f(sign | widen_code(mag, 3, 7));
}

uint8_t spyre_fp32_to_e4m3(float f, unsigned flags)
{
    uint32_t x = f2u(f);
    uint32_t ax = x & 0x7fffffff;
    uint8_t sign = (uint8_t)((x >> 24) & 0x80);
    uint32_t code;

    if (ax > 0x7f800000) {
        return sign | 0x7f;
    }
    code = ax == 0x7f800000 ? 0x7f : round_code(ax, 3, 7);
    if (code > 0x7e) {
        return sign | ((flags & SPYRE_CMD_F_NOSAT) ? 0x7f : 0x7e);
    }
    return sign | (uint8_t)code;
}

float spyre_e5m2_to_fp32(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80) << 24;
    uint32_t mag = v & 0x7f;

    if (mag >= 0x7c) {
        if (mag == 0x7c) {
            return u2f(sign | 0x7f800000);
        }
        return u2f(sign | 0x7fc00000 | (mag & 3) << 21);
    }
    return u2f(sign | widen_code(mag, 2, 15));
}

uint8_t spyre_fp32_to_e5m2(float f, unsigned flags)
{
    uint32_t x = f2u(f);
    uint32_t ax = x & 0x7fffffff;
    uint8_t sign = (uint8_t)((x >> 24) & 0x80);
    uint32_t code;

    if (ax > 0x7f800000) {
        return sign | 0x7f;
    }
    code = ax == 0x7f800000 ? 0x7c : round_code(ax, 2, 15);
    if (code > 0x7b) {
        return sign | ((flags & SPYRE_CMD_F_NOSAT) ? 0x7c : 0x7b);
    }
    return sign | (uint8_t)code;
}

/*
 * Round the finite or infinite binary32 magnitude @ax to an integer, to
 * nearest with ties to even; anything >= 2^32 gives 2^32.
 */
static uint64_t round_int(uint32_t ax)
{
    int e = (int)(ax >> 23);
    uint32_t m = (ax & 0x7fffff) | 0x800000;

    if (e < 126) {
        return 0;               /* below 0.5 */
    }
    if (e >= 127 + 32) {
        return 1ULL << 32;
    }
    if (e >= 150) {
        return (uint64_t)m << (e - 150);
    }
    return rne_shift(m, (unsigned)(150 - e));
}

int8_t spyre_fp32_to_int8(float f)
{
    uint32_t x = f2u(f);
    uint32_t ax = x & 0x7fffffff;
    uint64_t mag;

    if (ax > 0x7f800000) {
        return 0;
    }
    mag = round_int(ax);
    if (x >> 31) {
        return mag >= 128 ? INT8_MIN : (int8_t)-(int)mag;
    }
    return mag >= 127 ? INT8_MAX : (int8_t)mag;
}

int32_t spyre_fp32_to_int32(float f)
{
    uint32_t x = f2u(f);
    uint32_t ax = x & 0x7fffffff;
    uint64_t mag;

    if (ax > 0x7f800000) {
        return 0;
    }
    mag = round_int(ax);
    if (x >> 31) {
        return mag >= (1ULL << 31) ? INT32_MIN : -(int32_t)mag;
    }
    return mag >= INT32_MAX ? INT32_MAX : (int32_t)mag;
}

/* @u rounded to binary32, to nearest even, independent of the FP mode. */
static float u32_to_fp32(uint32_t u)
{
    unsigned sh = 0;

    while ((u >> sh) >= (1u << 24)) {
        sh++;
    }
    if (sh == 0) {
        return (float)u;        /* exact */
    }
    return ldexpf((float)rne_shift(u, sh), (int)sh);
}

float spyre_int32_to_fp32(int32_t i)
{
    float r = u32_to_fp32(i < 0 ? 0u - (uint32_t)i : (uint32_t)i);

    return i < 0 ? -r : r;
}

/* ---- bulk conversions --------------------------------------------------- */

size_t spyre_math_dtype_size(int dtype)
{
    /* The fixed commands take the dtypes of VERSION 1.0 only. */
    if (dtype > SPYRE_DTYPE_INT32) {
        return 0;
    }
    return spyre_cmd_dtype_size((uint32_t)dtype);
}

/* The dtypes that convert through fp32. */
static bool is_convertible(int dtype)
{
    return spyre_cmd_dtype_convertible((uint32_t)dtype);
}

/*
 * Widening tables for the narrow float formats, filled once at start-up
 * from the conversion functions above: operand fetch converts whole rows,
 * and a load beats the bit manipulation per element.
 */
static float fp16_table[1 << 16];
static float e4m3_table[1 << 8];
static float e5m2_table[1 << 8];

static void __attribute__((constructor)) spyre_math_tables_init(void)
{
    uint32_t i;

    for (i = 0; i < 1u << 16; i++) {
        fp16_table[i] = spyre_fp16_to_fp32(i);
    }
    for (i = 0; i < 1u << 8; i++) {
        e4m3_table[i] = spyre_e4m3_to_fp32(i);
        e5m2_table[i] = spyre_e5m2_to_fp32(i);
    }
}
/* FP32, FP16, BF16: the data types of ELTWISE, REDUCE and ROWOP. */
static size_t vec_dtype_size(int dtype)
{
    switch (dtype) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_FP16:
    case SPYRE_DTYPE_BF16:
        return spyre_math_dtype_size(dtype);
    default:
        return 0;
    }
}

int spyre_load_fp32(float *dst, const void *src, int src_dtype, size_t n)
{
    const uint8_t *p = src;
    size_t i;

    switch (src_dtype) {
    case SPYRE_DTYPE_FP32:
        if (host_le()) {
            memmove(dst, p, n * 4);
            break;
        }
        for (i = 0; i < n; i++) {
            dst[i] = u2f(ld_le32(p + 4 * i));
        }
        break;
    case SPYRE_DTYPE_FP16:
        for (i = 0; i < n; i++) {
            dst[i] = fp16_table[ld_le16(p + 2 * i)];
        }
        break;
    case SPYRE_DTYPE_BF16:
        for (i = 0; i < n; i++) {
            dst[i] = spyre_bf16_to_fp32(ld_le16(p + 2 * i));
        }
        break;
    case SPYRE_DTYPE_FP8_E4M3:
        for (i = 0; i < n; i++) {
            dst[i] = e4m3_table[p[i]];
        }
        break;
    case SPYRE_DTYPE_FP8_E5M2:
        for (i = 0; i < n; i++) {
            dst[i] = e5m2_table[p[i]];
        }
        break;
    case SPYRE_DTYPE_INT8:
        for (i = 0; i < n; i++) {
            dst[i] = (float)(int8_t)p[i];
        }
        break;
    default:
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    return SPYRE_STATUS_OK;
}

int spyre_store_fp32(void *dst, int dst_dtype, const float *src, size_t n,
                     unsigned flags)
{
    uint8_t *p = dst;
    size_t i;

    switch (dst_dtype) {
    case SPYRE_DTYPE_FP32:
        if (host_le()) {
            memmove(p, src, n * 4);
            break;
        }
        for (i = 0; i < n; i++) {
            st_le32(p + 4 * i, f2u(src[i]));
        }
        break;
    case SPYRE_DTYPE_FP16:
        for (i = 0; i < n; i++) {
            st_le16(p + 2 * i, spyre_fp32_to_fp16(src[i]));
        }
        break;
    case SPYRE_DTYPE_BF16:
        for (i = 0; i < n; i++) {
            st_le16(p + 2 * i, spyre_fp32_to_bf16(src[i]));
        }
        break;
    case SPYRE_DTYPE_FP8_E4M3:
        for (i = 0; i < n; i++) {
            p[i] = spyre_fp32_to_e4m3(src[i], flags);
        }
        break;
    case SPYRE_DTYPE_FP8_E5M2:
        for (i = 0; i < n; i++) {
            p[i] = spyre_fp32_to_e5m2(src[i], flags);
        }
        break;
    case SPYRE_DTYPE_INT8:
        for (i = 0; i < n; i++) {
            p[i] = (uint8_t)spyre_fp32_to_int8(src[i]);
        }
        break;
    default:
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    return SPYRE_STATUS_OK;
}

int spyre_convert_check(int dst_dtype, int src_dtype)
{
    if (dst_dtype == src_dtype && spyre_math_dtype_size(dst_dtype)) {
        return SPYRE_STATUS_OK;         /* includes U8 and INT32 */
    }
    if (is_convertible(dst_dtype) && is_convertible(src_dtype)) {
        return SPYRE_STATUS_OK;
    }
    return SPYRE_STATUS_INVALID_OPERAND;
}

int spyre_convert(void *dst, int dst_dtype, const void *src, int src_dtype,
                  size_t n, unsigned flags)
{
    float buf[CHUNK];
    const uint8_t *s = src;
    uint8_t *d = dst;
    size_t ses = spyre_math_dtype_size(src_dtype);
    size_t des = spyre_math_dtype_size(dst_dtype);
    int st = spyre_convert_check(dst_dtype, src_dtype);

    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (dst_dtype == src_dtype) {
        memmove(dst, src, n * ses);
        return SPYRE_STATUS_OK;
    }
    while (n) {
        size_t c = min_u64(n, CHUNK);

        spyre_load_fp32(buf, s, src_dtype, c);
        spyre_store_fp32(d, dst_dtype, buf, c, flags);
        s += c * ses;
        d += c * des;
        n -= c;
    }
    return SPYRE_STATUS_OK;
}

int spyre_copy_check(const struct spyre_cmd_copy *cmd, uint64_t *src_bytes,
                     uint64_t *dst_bytes)
{
    size_t ses = spyre_math_dtype_size(cmd->src_dtype);
    size_t des = spyre_math_dtype_size(cmd->dst_dtype);
    uint64_t srow, drow, elems, sspan, dspan;

    if (cmd->hdr.flags & ~SPYRE_CMD_F_NOSAT) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (spyre_convert_check(cmd->dst_dtype, cmd->src_dtype) !=
        SPYRE_STATUS_OK || !cmd->width || !cmd->height) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (mul_ovf(cmd->width, cmd->height, &elems) ||
        mul_ovf(elems, ses > des ? ses : des, &elems) ||
        elems > SPYRE_CMD_MAX_COPY_BYTES) {
        return SPYRE_STATUS_LIMIT;
    }
    srow = cmd->width * ses;    /* no overflow: below the limit */
    drow = cmd->width * des;
    if (cmd->height > 1) {
        if (cmd->src_pitch < srow || cmd->dst_pitch < drow ||
            !span_of(1, 0, cmd->height, cmd->src_pitch, srow, 1, &sspan) ||
            !span_of(1, 0, cmd->height, cmd->dst_pitch, drow, 1, &dspan)) {
            return SPYRE_STATUS_INVALID_OPERAND;
        }
    } else {
        sspan = srow;
        dspan = drow;
    }
    if (src_bytes) {
        *src_bytes = sspan;
    }
    if (dst_bytes) {
        *dst_bytes = dspan;
    }
    return SPYRE_STATUS_OK;
}

/* ---- GEMM ------------------------------------------------------------- */

static bool gemm_in_dtype(uint32_t dt)
{
    return is_convertible((int)dt);
}

static bool is_fp8(uint32_t dt)
{
    return dt == SPYRE_DTYPE_FP8_E4M3 || dt == SPYRE_DTYPE_FP8_E5M2;
}

int spyre_gemm_check(const struct spyre_cmd_gemm *cmd, SpyreGemmSpan *span)
{
    bool ta = cmd->hdr.flags & SPYRE_GEMM_F_TRANS_A;
    bool tb = cmd->hdr.flags & SPYRE_GEMM_F_TRANS_B;
    bool is_int;
    uint64_t macs;
    SpyreGemmSpan s = { 0 };

    if (cmd->hdr.flags & ~SPYRE_GEMM_F_ALL) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (!gemm_in_dtype(cmd->a_dtype) || !gemm_in_dtype(cmd->b_dtype)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (cmd->a_dtype != cmd->b_dtype &&
        !(is_fp8(cmd->a_dtype) && is_fp8(cmd->b_dtype))) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    is_int = cmd->a_dtype == SPYRE_DTYPE_INT8;
    if (is_int) {
        float beta = u2f(cmd->beta);

        if (cmd->c_dtype != SPYRE_DTYPE_INT32 ||
            !(beta == 0.0f || beta == 1.0f)) {
            return SPYRE_STATUS_INVALID_OPERAND;
        }
    } else if (!vec_dtype_size(cmd->c_dtype)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (cmd->bias_dtype && !vec_dtype_size(cmd->bias_dtype)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (!cmd->m || !cmd->n || !cmd->k || !cmd->batch) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (cmd->lda < (ta ? cmd->m : cmd->k) ||
        cmd->ldb < (tb ? cmd->k : cmd->n) || cmd->ldc < cmd->n) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    macs = (uint64_t)cmd->m * cmd->n;
    if (mul_ovf(macs, cmd->k, &macs) || mul_ovf(macs, cmd->batch, &macs) ||
        macs > SPYRE_CMD_MAX_GEMM_MACS) {
        return SPYRE_STATUS_LIMIT;
    }
    if (!span_of(cmd->batch, cmd->stride_a, ta ? cmd->k : cmd->m, cmd->lda,
                 ta ? cmd->m : cmd->k, spyre_math_dtype_size(cmd->a_dtype),
                 &s.a) ||
        !span_of(cmd->batch, cmd->stride_b, tb ? cmd->n : cmd->k, cmd->ldb,
                 tb ? cmd->k : cmd->n, spyre_math_dtype_size(cmd->b_dtype),
                 &s.b) ||
        !span_of(cmd->batch, cmd->stride_c, cmd->m, cmd->ldc, cmd->n,
                 spyre_math_dtype_size(cmd->c_dtype), &s.c)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (cmd->bias_dtype && !is_int) {
        s.bias = (uint64_t)cmd->n * spyre_math_dtype_size(cmd->bias_dtype);
    }
    if (span) {
        *span = s;
    }
    return SPYRE_STATUS_OK;
}

static size_t align_up(size_t v)
{
    return (v + GEMM_ALIGN - 1) & ~(size_t)(GEMM_ALIGN - 1);
}

/*
 * Staging bytes at least: SPYRE_GEMM_STAGE, and at least one row of @r
 * elements (spyre_gemm_init() gives the stage what the tiles leave).
 */
static size_t gemm_stage(size_t r)
{
    return align_up(r * 4 > SPYRE_GEMM_STAGE ? r * 4 : SPYRE_GEMM_STAGE);
}

/*
 * Tile-buffer bytes for tiles of tm x tn outputs with K steps of tk; INT8
 * needs a second tm x tn block for one K block's fp32 products.
 */
static size_t gemm_footprint(uint32_t tm, uint32_t tn, uint32_t tk,
                             bool is_int)
{
    size_t r = tm > tn ? tm : tn;

    r = r > tk ? r : tk;
    return GEMM_ALIGN + align_up((size_t)tm * tk * 4) +
           align_up((size_t)tk * tn * 4) +
           (is_int ? 2 : 1) * align_up((size_t)tm * tn * 4) +
           align_up(r * 4) + align_up((size_t)tn * 4) + gemm_stage(r);
}

static uint32_t halve(uint32_t v)
{
    return (v + 1) / 2;
}

int spyre_gemm_init(SpyreGemm *g, const struct spyre_cmd_gemm *cmd,
                    float scale_a, float scale_b, const SpyreGemmIO *io,
                    void *tile_buf, size_t tile_buf_size)
{
    uint32_t tm, tn, tk;
    uint8_t *p;
    size_t r;
    int st;

    memset(g, 0, sizeof(*g));
    g->done = true;
    st = spyre_gemm_check(cmd, NULL);
    if (st == SPYRE_STATUS_OK && (!io || !io->read || !io->write ||
                                  !tile_buf ||
                                  tile_buf_size < SPYRE_GEMM_TILE_BUF_MIN)) {
        st = SPYRE_STATUS_INTERNAL;
    }
    if (st != SPYRE_STATUS_OK) {
        g->status = st;
        return st;
    }

    g->cmd = *cmd;
    g->io = *io;
    g->is_int = cmd->a_dtype == SPYRE_DTYPE_INT8;
    g->beta = u2f(cmd->beta);
    g->read_c = g->beta != 0.0;
    g->has_bias = !g->is_int && cmd->bias_dtype;
    g->scale = (double)u2f(cmd->alpha) * scale_a * scale_b;
    g->plain_fp32 = host_le() && !g->is_int && !g->read_c && !g->has_bias &&
                    g->scale == 1.0 && cmd->c_dtype == SPYRE_DTYPE_FP32;
    g->es_a = spyre_math_dtype_size(cmd->a_dtype);
    g->es_b = spyre_math_dtype_size(cmd->b_dtype);
    g->es_c = spyre_math_dtype_size(cmd->c_dtype);
    g->es_bias = spyre_math_dtype_size(cmd->bias_dtype);

    tm = min_u64(cmd->m, GEMM_TILE);
    tn = min_u64(cmd->n, GEMM_TILE);
    tk = min_u64(cmd->k, GEMM_TILE);
    while (gemm_footprint(tm, tn, tk, g->is_int) > tile_buf_size) {
        if (tm >= tn && tm >= tk) {
            tm = halve(tm);
        } else if (tn >= tk) {
            tn = halve(tn);
        } else {
            tk = halve(tk);
        }
    }
    g->tm = tm;
    g->tn = tn;
    g->tk = tk;
    r = tm > tn ? tm : tn;
    r = r > tk ? r : tk;

    p = tile_buf;
    p += (GEMM_ALIGN - ((uintptr_t)p & (GEMM_ALIGN - 1))) & (GEMM_ALIGN - 1);
    g->a_tile = (float *)p;
    p += align_up((size_t)tm * tk * 4);
    g->b_tile = (float *)p;
    p += align_up((size_t)tk * tn * 4);
    g->acc = p;
    p += align_up((size_t)tm * tn * 4);
    if (g->is_int) {
        g->block = (float *)p;
        p += align_up((size_t)tm * tn * 4);
    }
    g->row = p;
    p += align_up(r * 4);
    g->bias_row = (float *)p;
    p += align_up((size_t)tn * 4);
    /*
     * The rest of the buffer (at least gemm_stage(r), as the footprint
     * says) stages raw rows: with SPYRE_GEMM_TILE_BUF_SIZE, a whole tile
     * of a narrow dtype, so that it moves in one I/O batch.
     */
    g->raw = p;
    g->stage = (tile_buf_size - (size_t)(p - (uint8_t *)tile_buf)) &
               ~(size_t)(GEMM_ALIGN - 1);

    g->a_cached = NO_TILE;
    g->bias_cached = NO_TILE;
    /* At most 2^36 MACs: no overflow. */
    g->steps_total = (uint64_t)cmd->batch *
                     (((uint64_t)cmd->m + tm - 1) / tm) *
                     (((uint64_t)cmd->n + tn - 1) / tn) *
                     (((uint64_t)cmd->k + tk - 1) / tk);
    g->done = false;
    return SPYRE_STATUS_OK;
}

/*
 * Fetch @nrows stored row segments of @ncols elements of operand @opnd,
 * the first at element offset @base, @ld apart, into @tile as native
 * floats (INT8 values too: they are exact in binary32), laid out as
 * stored: @nrows x @ncols.  fp32 rows go straight into the tile in one
 * batch; other dtypes are staged at g->raw, as many rows as fit (with
 * SPYRE_GEMM_TILE_BUF_SIZE, all of them) and widened once, row by row.
 */
static int gemm_fetch(SpyreGemm *g, int opnd, int dtype, size_t es,
                      uint64_t base, uint64_t ld, uint32_t nrows,
                      uint32_t ncols, float *tile)
{
    size_t len = (size_t)ncols * es;
    uint32_t r, i, n, per = g->stage / len;
    int st;

    if (host_le() && dtype == SPYRE_DTYPE_FP32) {
        return g->io.read(g->io.opaque, opnd, base * es, ld * es, nrows,
                          tile, len);
    }
    for (r = 0; r < nrows; r += n) {
        n = nrows - r < per ? nrows - r : per;
        st = g->io.read(g->io.opaque, opnd, (base + r * ld) * es, ld * es, n,
                        g->raw, len);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        for (i = 0; i < n; i++) {
            spyre_load_fp32(tile + (size_t)(r + i) * ncols, g->raw + i * len,
                            dtype, ncols);
        }
    }
    return SPYRE_STATUS_OK;
}

/*
 * acc (int32, wrapping) += block, the fp32 products of one INT8 K block.
 * A K block has at most GEMM_TILE (512) steps and each product of two
 * int8 values lies in [-16256, 16384], so every partial sum sgemm forms,
 * in whatever order, is an integer of magnitude <= 2^23: exact in
 * binary32.  The block is therefore the exact integer result.
 */
static void gemm_add_int_block(uint32_t *restrict acc,
                               const float *restrict block, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        acc[i] += (uint32_t)(int32_t)block[i];
    }
}

/*
 * Fold max |r| over @n results into g->amax (NaN once any r is NaN).
 * With the sign cleared, the bit patterns of binary32 values order as the
 * magnitudes do, and every NaN lies above infinity (0x7f800000): one
 * integer max, which the compiler vectorises, finds both.
 */
static void amax_row(SpyreGemm *g, const float *r, size_t n)
{
    int32_t m = 0;
    size_t j;

    for (j = 0; j < n; j++) {
        int32_t v = (int32_t)(f2u(r[j]) & 0x7fffffffu);

        m = v > m ? v : m;
    }
    if (isnan(g->amax)) {
        return;
    }
    if (m > 0x7f800000) {
        g->amax = NAN;
    } else if (u2f((uint32_t)m) > g->amax) {
        g->amax = u2f((uint32_t)m);
    }
}

/* Row @i of the current output tile: r = result, stored at @raw (len). */
static void gemm_result_row(SpyreGemm *g, uint32_t i, uint32_t nt,
                            uint8_t *raw)
{
    const struct spyre_cmd_gemm *cmd = &g->cmd;
    uint32_t j;

    if (g->is_int) {
        const uint32_t *acc = (uint32_t *)g->acc + (size_t)i * nt;

        for (j = 0; j < nt; j++) {
            uint32_t v = acc[j];
            uint32_t mag;

            if (g->read_c) {
                v += ld_le32(raw + 4 * j);
            }
            mag = (v >> 31) ? 0u - v : v;
            if (mag > g->amax_int) {
                g->amax_int = mag;
            }
            st_le32(raw + 4 * j, v);
        }
    } else {
        const float *acc = (float *)g->acc + (size_t)i * nt;
        float *row = g->row;

        if (g->read_c) {
            spyre_load_fp32(row, raw, cmd->c_dtype, nt);
        }
        for (j = 0; j < nt; j++) {
            double v = g->scale * acc[j];

            if (g->read_c) {
                v += g->beta * row[j];
            }
            if (g->has_bias) {
                v += g->bias_row[j];
            }
            row[j] = (float)v;
        }
        amax_row(g, row, nt);
        spyre_store_fp32(raw, cmd->c_dtype, row, nt, cmd->hdr.flags);
    }
}

/* Write the finished output tile (mt x nt at batch, m0, n0) to C. */
static int gemm_epilogue(SpyreGemm *g, uint32_t mt, uint32_t nt)
{
    const struct spyre_cmd_gemm *cmd = &g->cmd;
    uint64_t off = ((uint64_t)g->batch * cmd->stride_c +
                    (uint64_t)g->m0 * cmd->ldc + g->n0) * g->es_c;
    uint64_t stride = cmd->ldc * g->es_c;
    size_t len = nt * g->es_c;
    uint32_t i, r, n, per = g->stage / len;
    int st;

    if (g->has_bias && g->bias_cached != g->n0) {
        g->bias_cached = NO_TILE;
        st = g->io.read(g->io.opaque, SPYRE_GEMM_OPND_BIAS,
                        (uint64_t)g->n0 * g->es_bias, 0, 1, g->raw,
                        nt * g->es_bias);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        spyre_load_fp32(g->bias_row, g->raw, cmd->bias_dtype, nt);
        g->bias_cached = g->n0;
    }
    if (g->plain_fp32) {
        /* alpha * scales == 1, no C, no bias: r is the accumulator. */
        amax_row(g, g->acc, (size_t)mt * nt);
        return g->io.write(g->io.opaque, SPYRE_GEMM_OPND_C, off, stride, mt,
                           g->acc, len);
    }
    for (r = 0; r < mt; r += n) {
        n = mt - r < per ? mt - r : per;
        if (g->read_c) {
            st = g->io.read(g->io.opaque, SPYRE_GEMM_OPND_C, off + r * stride,
                            stride, n, g->raw, len);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
        for (i = 0; i < n; i++) {
            gemm_result_row(g, r + i, nt, g->raw + i * len);
        }
        st = g->io.write(g->io.opaque, SPYRE_GEMM_OPND_C, off + r * stride,
                         stride, n, g->raw, len);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    return SPYRE_STATUS_OK;
}

/*
 * One step: multiply the K block at g->k0 of the output tile at (batch,
 * m0, n0) into the accumulators; after the last K block, write the tile.
 */
static int gemm_kblock(SpyreGemm *g)
{
    const struct spyre_cmd_gemm *cmd = &g->cmd;
    bool ta = cmd->hdr.flags & SPYRE_GEMM_F_TRANS_A;
    bool tb = cmd->hdr.flags & SPYRE_GEMM_F_TRANS_B;
    uint32_t mt = min_u64(g->tm, cmd->m - g->m0);
    uint32_t nt = min_u64(g->tn, cmd->n - g->n0);
    uint32_t kt = min_u64(g->tk, cmd->k - g->k0);
    bool single_k = cmd->k <= g->tk;
    uint64_t a_key = (uint64_t)g->batch << 32 | g->m0;
    uint64_t abase = (uint64_t)g->batch * cmd->stride_a;
    uint64_t bbase = (uint64_t)g->batch * cmd->stride_b;
    uint64_t k0 = g->k0;
    int st;

    if (k0 == 0) {
        memset(g->acc, 0, (size_t)mt * nt * 4);
    }
    /* With a single K block, A stays valid while n0 moves along the row. */
    if (!single_k || g->a_cached != a_key) {
        g->a_cached = NO_TILE;
        if (ta) {
            st = gemm_fetch(g, SPYRE_GEMM_OPND_A, cmd->a_dtype, g->es_a,
                            abase + k0 * cmd->lda + g->m0, cmd->lda, kt, mt,
                            g->a_tile);
        } else {
            st = gemm_fetch(g, SPYRE_GEMM_OPND_A, cmd->a_dtype, g->es_a,
                            abase + (uint64_t)g->m0 * cmd->lda + k0,
                            cmd->lda, mt, kt, g->a_tile);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        if (single_k) {
            g->a_cached = a_key;
        }
    }
    if (tb) {
        st = gemm_fetch(g, SPYRE_GEMM_OPND_B, cmd->b_dtype, g->es_b,
                        bbase + (uint64_t)g->n0 * cmd->ldb + k0, cmd->ldb,
                        nt, kt, g->b_tile);
    } else {
        st = gemm_fetch(g, SPYRE_GEMM_OPND_B, cmd->b_dtype, g->es_b,
                        bbase + k0 * cmd->ldb + g->n0, cmd->ldb, kt, nt,
                        g->b_tile);
    }
    if (st != SPYRE_STATUS_OK) {
        return st;
    }

    /* Tiles are as stored: sgemm applies the transposes. */
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, (int)mt, (int)nt, (int)kt,
                1.0f, g->a_tile, (int)(ta ? mt : kt), g->b_tile,
                (int)(tb ? kt : nt), g->is_int ? 0.0f : 1.0f,
                g->is_int ? g->block : g->acc, (int)nt);
    if (g->is_int) {
        gemm_add_int_block(g->acc, g->block, (size_t)mt * nt);
    }
    if (k0 + kt < cmd->k) {
        return SPYRE_STATUS_OK;
    }
    return gemm_epilogue(g, mt, nt);
}

int spyre_gemm_step(SpyreGemm *g)
{
    int st;

    if (g->status != SPYRE_STATUS_OK || g->done) {
        return g->status;
    }
    st = gemm_kblock(g);
    if (st != SPYRE_STATUS_OK) {
        g->status = st;
        return st;
    }
    g->steps_done++;
    if (g->k0 + g->tk < g->cmd.k) {
        g->k0 += g->tk;
        return SPYRE_STATUS_OK;
    }
    g->k0 = 0;
    if ((uint64_t)g->n0 + g->tn < g->cmd.n) {
        g->n0 += g->tn;
        return SPYRE_STATUS_OK;
    }
    g->n0 = 0;
    if ((uint64_t)g->m0 + g->tm < g->cmd.m) {
        g->m0 += g->tm;
        return SPYRE_STATUS_OK;
    }
    g->m0 = 0;
    if ((uint64_t)g->batch + 1 < g->cmd.batch) {
        g->batch++;
        return SPYRE_STATUS_OK;
    }
    g->done = true;
    return SPYRE_STATUS_OK;
}

bool spyre_gemm_done(const SpyreGemm *g)
{
    return g->done;
}

uint64_t spyre_gemm_steps_done(const SpyreGemm *g)
{
    return g->steps_done;
}

uint64_t spyre_gemm_steps_total(const SpyreGemm *g)
{
    return g->steps_total;
}

float spyre_gemm_amax(const SpyreGemm *g)
{
    return g->is_int ? u32_to_fp32(g->amax_int) : g->amax;
}

int spyre_gemm_run(const struct spyre_cmd_gemm *cmd, float scale_a,
                   float scale_b, const SpyreGemmIO *io, void *tile_buf,
                   size_t tile_buf_size, float *amax)
{
    SpyreGemm g;
    int st;

    st = spyre_gemm_init(&g, cmd, scale_a, scale_b, io, tile_buf,
                         tile_buf_size);
    while (st == SPYRE_STATUS_OK && !spyre_gemm_done(&g)) {
        st = spyre_gemm_step(&g);
    }
    if (st == SPYRE_STATUS_OK && amax) {
        *amax = spyre_gemm_amax(&g);
    }
    return st;
}

static bool host_buf(const SpyreGemmHostBufs *b, int opnd, uint8_t **base,
                     size_t *size)
{
    switch (opnd) {
    case SPYRE_GEMM_OPND_A:
        *base = (uint8_t *)b->a;
        *size = b->a_size;
        break;
    case SPYRE_GEMM_OPND_B:
        *base = (uint8_t *)b->b;
        *size = b->b_size;
        break;
    case SPYRE_GEMM_OPND_C:
        *base = b->c;
        *size = b->c_size;
        break;
    case SPYRE_GEMM_OPND_BIAS:
        *base = (uint8_t *)b->bias;
        *size = b->bias_size;
        break;
    default:
        return false;
    }
    return *base != NULL;
}

/* Host buffer I/O: each segment must lie within the operand's buffer. */
static int host_io(const SpyreGemmHostBufs *bufs, int opnd, uint64_t off,
                   uint64_t stride, uint32_t nrows, uint8_t *p, size_t len,
                   bool write)
{
    uint8_t *base;
    size_t size;
    uint32_t r;

    if ((write && opnd != SPYRE_GEMM_OPND_C) ||
        !host_buf(bufs, opnd, &base, &size)) {
        return SPYRE_STATUS_MMU_FAULT;
    }
    for (r = 0; r < nrows; r++, off += stride, p += len) {
        if (off > size || len > size - off) {
            return SPYRE_STATUS_MMU_FAULT;
        }
        if (write) {
            memcpy(base + off, p, len);
        } else {
            memcpy(p, base + off, len);
        }
    }
    return SPYRE_STATUS_OK;
}

static int host_read(void *opaque, int opnd, uint64_t off, uint64_t stride,
                     uint32_t nrows, void *dst, size_t len)
{
    return host_io(opaque, opnd, off, stride, nrows, dst, len, false);
}

static int host_write(void *opaque, int opnd, uint64_t off, uint64_t stride,
                      uint32_t nrows, const void *src, size_t len)
{
    return host_io(opaque, opnd, off, stride, nrows, (uint8_t *)src, len,
                   true);
}

int spyre_gemm_host(const struct spyre_cmd_gemm *cmd, float scale_a,
                    float scale_b, const SpyreGemmHostBufs *bufs,
                    void *tile_buf, size_t tile_buf_size, float *amax)
{
    SpyreGemmIO io = {
        .read = host_read,
        .write = host_write,
        .opaque = (void *)bufs,
    };

    return spyre_gemm_run(cmd, scale_a, scale_b, &io, tile_buf, tile_buf_size,
                          amax);
}

void spyre_math_set_blas_threads(int n)
{
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(n);
#else
    (void)n;
#endif
}

/* ---- ELTWISE ---------------------------------------------------------- */

int spyre_eltwise_check(const struct spyre_cmd_eltwise *cmd, uint64_t *bytes)
{
    size_t es = vec_dtype_size(cmd->dtype);

    if (cmd->hdr.flags || cmd->pad) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (cmd->op < SPYRE_ELT_ADD || cmd->op > SPYRE_ELT_EXP || !es ||
        !cmd->count) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (cmd->count > SPYRE_CMD_MAX_ELEMS) {
        return SPYRE_STATUS_LIMIT;
    }
    if (bytes) {
        *bytes = cmd->count * es;
    }
    return SPYRE_STATUS_OK;
}

static float elt_op(int op, float x, float y, float alpha)
{
    switch (op) {
    case SPYRE_ELT_ADD:
        return x + y;
    case SPYRE_ELT_MUL:
        return x * y;
    case SPYRE_ELT_SCALE:
        return alpha * x;
    case SPYRE_ELT_RELU:
        return (x > 0.0f || isnan(x)) ? x : 0.0f;
    case SPYRE_ELT_GELU:
        if (isinf(x)) {
            return x > 0.0f ? x : -0.0f;    /* the limits, not inf * 0 */
        }
        return x * 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
    case SPYRE_ELT_SILU:
        if (isinf(x)) {
            return x > 0.0f ? x : -0.0f;
        }
        return x / (1.0f + expf(-x));
    default:
        return expf(x);
    }
}

int spyre_eltwise(int op, int dtype, float alpha, const void *a,
                  const void *b, void *out, size_t n)
{
    float x[CHUNK], y[CHUNK];
    const uint8_t *pa = a, *pb = b;
    uint8_t *po = out;
    size_t es = vec_dtype_size(dtype);
    bool binary = op == SPYRE_ELT_ADD || op == SPYRE_ELT_MUL;

    if (op < SPYRE_ELT_ADD || op > SPYRE_ELT_EXP || !es || (binary && !b)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    while (n) {
        size_t c = min_u64(n, CHUNK);
        size_t i;

        spyre_load_fp32(x, pa, dtype, c);
        if (binary) {
            spyre_load_fp32(y, pb, dtype, c);
            pb += c * es;
        }
        for (i = 0; i < c; i++) {
            x[i] = elt_op(op, x[i], binary ? y[i] : 0.0f, alpha);
        }
        spyre_store_fp32(po, dtype, x, c, 0);
        pa += c * es;
        po += c * es;
        n -= c;
    }
    return SPYRE_STATUS_OK;
}

/* ---- REDUCE and ROWOP ------------------------------------------------- */

static int rows_check(uint32_t dtype, uint32_t rows, uint32_t cols,
                      uint64_t ld_src, uint64_t ld_dst, uint64_t *src_bytes,
                      uint64_t *dst_bytes)
{
    size_t es = vec_dtype_size(dtype);
    uint64_t s, d;

    if (!es || !rows || !cols || ld_src < cols || ld_dst < cols) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if ((uint64_t)rows * cols > SPYRE_CMD_MAX_ELEMS) {
        return SPYRE_STATUS_LIMIT;
    }
    if (!span_of(1, 0, rows, ld_src, cols, es, &s) ||
        !span_of(1, 0, rows, ld_dst, cols, es, &d)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (src_bytes) {
        *src_bytes = s;
    }
    if (dst_bytes) {
        *dst_bytes = d;
    }
    return SPYRE_STATUS_OK;
}

int spyre_reduce_check(const struct spyre_cmd_reduce *cmd,
                       uint64_t *src_bytes, uint64_t *dst_bytes)
{
    int st;

    if (cmd->hdr.flags) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (cmd->op != SPYRE_REDUCE_SUM && cmd->op != SPYRE_REDUCE_MAX) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    /* dst is a column: rows x 1 with leading dimension 1. */
    st = rows_check(cmd->dtype, cmd->rows, cmd->cols, cmd->ld, cmd->cols,
                    src_bytes, NULL);
    if (st == SPYRE_STATUS_OK && dst_bytes) {
        *dst_bytes = (uint64_t)cmd->rows * vec_dtype_size(cmd->dtype);
    }
    return st;
}

int spyre_rowop_check(const struct spyre_cmd_rowop *cmd,
                      uint64_t *src_bytes, uint64_t *dst_bytes)
{
    if (cmd->hdr.flags || cmd->pad) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (cmd->op < SPYRE_ROW_SOFTMAX || cmd->op > SPYRE_ROW_RMSNORM) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    return rows_check(cmd->dtype, cmd->rows, cmd->cols, cmd->ld_src,
                      cmd->ld_dst, src_bytes, dst_bytes);
}

/* What the current pass of @r computes. */
enum {
    ROW_PASS_SUM,               /* sum x */
    ROW_PASS_MAX,               /* max x */
    ROW_PASS_SUMEXP,            /* sum expf(x - max) */
    ROW_PASS_SUMDEV2,           /* sum (x - mean)^2 */
    ROW_PASS_SUMSQ,             /* sum x^2 */
};

static int row_pass_kind(const SpyreRow *r)
{
    if (r->opcode == SPYRE_OP_REDUCE) {
        return r->op == SPYRE_REDUCE_SUM ? ROW_PASS_SUM : ROW_PASS_MAX;
    }
    switch (r->op) {
    case SPYRE_ROW_SOFTMAX:
        return r->pass == 0 ? ROW_PASS_MAX : ROW_PASS_SUMEXP;
    case SPYRE_ROW_LAYERNORM:
        return r->pass == 0 ? ROW_PASS_SUM : ROW_PASS_SUMDEV2;
    default:
        return ROW_PASS_SUMSQ;
    }
}

int spyre_row_init(SpyreRow *r, int opcode, int op, uint64_t cols, float eps)
{
    memset(r, 0, sizeof(*r));
    r->opcode = opcode;
    r->op = op;
    r->cols = cols;
    r->eps = eps;
    r->max = -INFINITY;
    if (opcode == SPYRE_OP_REDUCE &&
        (op == SPYRE_REDUCE_SUM || op == SPYRE_REDUCE_MAX)) {
        r->npasses = 1;
    } else if (opcode == SPYRE_OP_ROWOP &&
               (op == SPYRE_ROW_SOFTMAX || op == SPYRE_ROW_LAYERNORM)) {
        r->npasses = 2;
    } else if (opcode == SPYRE_OP_ROWOP && op == SPYRE_ROW_RMSNORM) {
        r->npasses = 1;
    }
    if (!r->npasses || !cols) {
        r->npasses = 0;
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    return SPYRE_STATUS_OK;
}

unsigned spyre_row_passes(const SpyreRow *r)
{
    return r->npasses;
}

/* Add the lanes pairwise into a block sum; Kahan-add that to the total. */
static void row_fold(SpyreRow *r)
{
    float *l = r->lane;
    float block = ((l[0] + l[1]) + (l[2] + l[3])) +
                  ((l[4] + l[5]) + (l[6] + l[7]));
    float y = block - r->comp;
    float t = r->total + y;

    r->comp = isfinite(t) ? (t - r->total) - y : 0.0f;
    r->total = t;
    memset(r->lane, 0, sizeof(r->lane));
}

/* Accumulate @n values; r->pos is the column of x[0]. */
static void row_sum(SpyreRow *r, const float *x, size_t n)
{
    while (n) {
        if ((r->pos & (ROW_LANES - 1)) == 0 && n >= ROW_LANES) {
            size_t left = ROW_BLOCK - (r->pos & (ROW_BLOCK - 1));
            size_t groups = min_u64(n, left) / ROW_LANES;
            size_t gi;
            int t;

            for (gi = 0; gi < groups; gi++) {
                for (t = 0; t < ROW_LANES; t++) {
                    r->lane[t] += x[t];
                }
                x += ROW_LANES;
            }
            r->pos += groups * ROW_LANES;
            n -= groups * ROW_LANES;
        } else {
            r->lane[r->pos & (ROW_LANES - 1)] += *x++;
            r->pos++;
            n--;
        }
        if ((r->pos & (ROW_BLOCK - 1)) == 0) {
            row_fold(r);
        }
    }
}

int spyre_row_feed(SpyreRow *r, const void *src, int dtype, size_t n)
{
    float buf[CHUNK];
    const uint8_t *p = src;
    size_t es = vec_dtype_size(dtype);
    int kind;

    if (r->pass >= r->npasses || !es || n > r->cols - r->pos) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    kind = row_pass_kind(r);
    while (n) {
        size_t c = min_u64(n, CHUNK);
        size_t i;

        spyre_load_fp32(buf, p, dtype, c);
        p += c * es;
        n -= c;
        switch (kind) {
        case ROW_PASS_MAX:
            for (i = 0; i < c; i++) {
                if (isnan(buf[i]) || buf[i] > r->max) {
                    r->max = isnan(r->max) ? r->max : buf[i];
                }
            }
            r->pos += c;
            continue;
        case ROW_PASS_SUMEXP:
            for (i = 0; i < c; i++) {
                buf[i] = expf(buf[i] - r->max);
            }
            break;
        case ROW_PASS_SUMDEV2:
            for (i = 0; i < c; i++) {
                float d = buf[i] - r->mean;

                buf[i] = d * d;
            }
            break;
        case ROW_PASS_SUMSQ:
            for (i = 0; i < c; i++) {
                buf[i] = buf[i] * buf[i];
            }
            break;
        default:
            break;
        }
        row_sum(r, buf, c);
    }
    return SPYRE_STATUS_OK;
}

int spyre_row_end_pass(SpyreRow *r)
{
    float n = (float)r->cols;
    float total;

    if (r->pass >= r->npasses || r->pos != r->cols) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (r->pos & (ROW_BLOCK - 1)) {
        row_fold(r);
    }
    total = r->total;

    switch (row_pass_kind(r)) {
    case ROW_PASS_SUM:
        if (r->opcode == SPYRE_OP_REDUCE) {
            r->sum = total;
        } else {
            r->mean = total / n;
        }
        break;
    case ROW_PASS_SUMEXP:
        r->sum = total;
        break;
    case ROW_PASS_SUMDEV2:
    case ROW_PASS_SUMSQ:
        r->rstd = 1.0f / sqrtf(total / n + r->eps);
        break;
    default:
        break;
    }

    memset(r->lane, 0, sizeof(r->lane));
    r->total = 0.0f;
    r->comp = 0.0f;
    r->pos = 0;
    r->pass++;
    return SPYRE_STATUS_OK;
}

float spyre_row_result(const SpyreRow *r)
{
    return r->op == SPYRE_REDUCE_MAX ? r->max : r->sum;
}

int spyre_row_apply(const SpyreRow *r, void *dst, int dtype, const void *src,
                    size_t n, const void *gamma, const void *beta)
{
    float buf[CHUNK];
    const uint8_t *ps = src, *pg = gamma, *pb = beta;
    uint8_t *pd = dst;
    size_t es = vec_dtype_size(dtype);

    if (r->opcode != SPYRE_OP_ROWOP || r->pass != r->npasses || !es) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    while (n) {
        size_t c = min_u64(n, CHUNK);
        size_t i;

        spyre_load_fp32(buf, ps, dtype, c);
        for (i = 0; i < c; i++) {
            float y;

            if (r->op == SPYRE_ROW_SOFTMAX) {
                buf[i] = expf(buf[i] - r->max) / r->sum;
                continue;
            }
            if (r->op == SPYRE_ROW_LAYERNORM) {
                y = (buf[i] - r->mean) * r->rstd;
            } else {
                y = buf[i] * r->rstd;
            }
            if (pg) {
                y *= u2f(ld_le32(pg + 4 * i));
            }
            if (pb && r->op == SPYRE_ROW_LAYERNORM) {
                y += u2f(ld_le32(pb + 4 * i));
            }
            buf[i] = y;
        }
        spyre_store_fp32(pd, dtype, buf, c, 0);
        ps += c * es;
        pd += c * es;
        if (pg) {
            pg += c * 4;
        }
        if (pb) {
            pb += c * 4;
        }
        n -= c;
    }
    return SPYRE_STATUS_OK;
}

int spyre_reduce(int op, int dtype, const void *src, uint64_t ld,
                 uint32_t rows, uint32_t cols, void *dst)
{
    size_t es = vec_dtype_size(dtype);
    uint32_t i;
    SpyreRow r;
    int st;

    if (!es || ld < cols) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    for (i = 0; i < rows; i++) {
        float v;

        st = spyre_row_init(&r, SPYRE_OP_REDUCE, op, cols, 0.0f);
        if (st == SPYRE_STATUS_OK) {
            st = spyre_row_feed(&r, (const uint8_t *)src + i * ld * es,
                                dtype, cols);
        }
        if (st == SPYRE_STATUS_OK) {
            st = spyre_row_end_pass(&r);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        v = spyre_row_result(&r);
        spyre_store_fp32((uint8_t *)dst + (size_t)i * es, dtype, &v, 1, 0);
    }
    return SPYRE_STATUS_OK;
}

int spyre_rowop(int op, int dtype, const void *src, uint64_t ld_src,
                void *dst, uint64_t ld_dst, uint32_t rows, uint32_t cols,
                const void *gamma, const void *beta, float eps)
{
    size_t es = vec_dtype_size(dtype);
    uint32_t i;
    unsigned p;
    SpyreRow r;
    int st;

    if (!es || ld_src < cols || ld_dst < cols) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    for (i = 0; i < rows; i++) {
        const uint8_t *s = (const uint8_t *)src + i * ld_src * es;

        st = spyre_row_init(&r, SPYRE_OP_ROWOP, op, cols, eps);
        for (p = 0; st == SPYRE_STATUS_OK && p < spyre_row_passes(&r); p++) {
            st = spyre_row_feed(&r, s, dtype, cols);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_row_end_pass(&r);
            }
        }
        if (st == SPYRE_STATUS_OK) {
            st = spyre_row_apply(&r, (uint8_t *)dst + i * ld_dst * es, dtype,
                                 s, cols, gamma, beta);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    return SPYRE_STATUS_OK;
}
