/*
 * Spyre card model: the KERNEL engine's f32 math library
 *
 * The functions behind the KERNEL command's math opcodes (0x40-0x64 and
 * POW): docs/spyre-hw.rst, "The KERNEL command", is the contract (the
 * table gives each function's ulp bound, special values and domain
 * notes).  Plain C with no QEMU dependency, built with -ffp-contract=off
 * and -fno-math-errno like spyre-kernel.c; results are bit-identical on
 * every host (the card's own code, never the host's libm).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_MISC_SPYRE_KMATH_H
#define HW_MISC_SPYRE_KMATH_H

#include <stdint.h>

/*
 * Number of f32 sources of math opcode @op (SPYRE_KOP_*): 1 for EXP ..
 * TRUNC, SIGN and LGAMMA, 2 for ATAN2, COPYSIGN and HYPOT; 0 for any
 * other opcode (ISNAN and ISINF give bools: the interpreter's own).
 */
unsigned int spyre_kmath_arity(unsigned int op);

/*
 * @d[j] = op(@a[j]) (or op(@a[j], @b[j]) for the binary ones) for the
 * lanes j < @n.  @op must have a non-zero spyre_kmath_arity(); @b is
 * ignored (may be NULL) for unary ones.  @d must not overlap @a or @b.
 * A NaN result is the canonical 0x7fc00000.
 */
void spyre_kmath_lanes(unsigned int op, float *d, const float *a,
                       const float *b, uint32_t n);

/* One lane of spyre_kmath_lanes() (@b ignored for unary opcodes). */
float spyre_kmath_1(unsigned int op, float a, float b);

/* Single functions, shared with the tests (canonical NaN). */
float spyre_kmath_exp(float x);
float spyre_kmath_log(float x);
float spyre_kmath_tanh(float x);
float spyre_kmath_erf(float x);
float spyre_kmath_pow(float x, float y);

#endif
