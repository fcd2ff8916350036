/*
 * Spyre card model: the KERNEL engine's f32 math library
 *
 * The functions behind the KERNEL command's math opcodes (0x40-0x64 and
 * POW): docs/spyre-hw.rst, "The KERNEL command", is the contract (the
 * table gives each function's ulp bound, special values and domain
 * notes).  Plain C with no QEMU dependency, built with -ffp-contract=off
 * and -fno-math-errno like spyre-kernel.c; results are bit-identical on
 * every host (the card's own code, never the host's libm).  Also the
 * engine's shared lane helpers (f32 bits, the canonical NaN, KFOR).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_MISC_SPYRE_KMATH_H
#define HW_MISC_SPYRE_KMATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The one NaN f32 results carry (docs/spyre-hw.rst). */
#define CANON_NAN   0x7fc00000u

/* The f32 whose bits are @u, and the bits of @f. */
static inline float u2f(uint32_t u)
{
    float f;

    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t f2u(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    return u;
}

/* @f, or the canonical NaN if @f is a NaN. */
static inline float kcanon(float f)
{
    return f != f ? u2f(CANON_NAN) : f;
}

/*
 * Lane loops, shared by the engine's files.  KALWAYS: inlined into each
 * host code path (the functions built once for the baseline and once
 * for AVX2; spyre-kernel.h, SPYRE_KISA_*).
 *
 * KFOR(j, n, body): the body for lanes j (a size_t of the caller's) in
 * [0, n) in blocks of KBLK lanes, the last of which may run past n (a
 * slot holds vl >= KBLK lanes, vl a power of two), computing lanes
 * nobody reads.  Each block is a loop of a constant trip count over a
 * 64-bit index, which GCC vectorises even at QEMU's -O2 (its
 * "very cheap" cost model), if the body has no branch: selects as
 * masks (ksel), every comparison evaluated.  Only for operations that
 * cannot fail or trap on any input.
 *
 * KFOR_N(j, n, body): the same over exactly [0, n) (j declared by the
 * macro): whole blocks, then the rest lane by lane.
 */
#define KALWAYS     __attribute__((always_inline))
#define KBLK        16
#define KFOR(j, n, ...) do { \
        for (size_t j##_b = 0; j##_b < (n); j##_b += KBLK) { \
            for (size_t j##_k = 0; j##_k < KBLK; j##_k++) { \
                j = j##_b + j##_k; \
                __VA_ARGS__ \
            } \
        } \
    } while (0)
#define KFOR_N(j, n, ...) do { \
        size_t j##_b; \
        \
        for (j##_b = 0; j##_b + KBLK <= (n); j##_b += KBLK) { \
            for (size_t j##_k = 0; j##_k < KBLK; j##_k++) { \
                size_t j = j##_b + j##_k; \
                \
                __VA_ARGS__ \
            } \
        } \
        for (size_t j = j##_b; j < (n); j++) { \
            __VA_ARGS__ \
        } \
    } while (0)

/*
 * The mask of host code paths (1 << SPYRE_KISA_*, spyre-kernel.h) this
 * host can run: GENERIC always, AVX2 on x86-64 with AVX2, FMA and F16C
 * (spyre-kernel.c converts fp16 with it).
 */
unsigned int spyre_kmath_isas(void);

/*
 * Number of f32 sources of math opcode @op (SPYRE_KOP_*): 1 for EXP ..
 * TRUNC, SIGN and LGAMMA, 2 for ATAN2, COPYSIGN and HYPOT; 0 for any
 * other opcode (ISNAN and ISINF give bools: the interpreter's own).
 */
unsigned int spyre_kmath_arity(unsigned int op);

/*
 * @d[j] = op(@a[j]) (or op(@a[j], @b[j]) for the binary ones) for the
 * lanes j < @n, with host code path @isa (SPYRE_KISA_*, one of
 * spyre_kmath_isas(); any other runs the generic one): every path gives
 * the same bits.  @op must have a non-zero spyre_kmath_arity(); @b is
 * ignored (may be NULL) for unary ones.  @d must not overlap @a or @b.
 * A NaN result is the canonical 0x7fc00000.
 */
void spyre_kmath_lanes(unsigned int isa, unsigned int op, float *d,
                       const float *a, const float *b, uint32_t n);

/*
 * RAND NORMAL's Box-Muller pairs (docs/spyre-hw.rst) for j < @n: with r
 * = sqrt(-2 LOG(@u1[j])) and t = 2 pi @u2[j], @d[2 j] = r COS(t) and
 * @d[2 j + 1] = r SIN(t), each step rounded to f32, LOG, COS and SIN
 * spyre_kmath_lanes()'s, in one pass (@d holds 2 @n floats); @u1[j] in
 * (0, 1], @u2[j] in [0, 1) (else the values are unspecified).  Host code
 * path @isa as spyre_kmath_lanes() (the same bits on every path); @d
 * must not overlap @u1 or @u2.
 */
void spyre_kmath_normal(unsigned int isa, float *d, const float *u1,
                        const float *u2, uint32_t n);

/* One lane of spyre_kmath_lanes() (@b ignored for unary opcodes). */
float spyre_kmath_1(unsigned int op, float a, float b);

/* Single functions, shared with the tests (canonical NaN). */
float spyre_kmath_exp(float x);
float spyre_kmath_log(float x);
float spyre_kmath_tanh(float x);
float spyre_kmath_erf(float x);
float spyre_kmath_pow(float x, float y);

#endif
