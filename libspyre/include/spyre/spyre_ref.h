/* SPDX-License-Identifier: MIT */
/*
 * libspyre host reference numerics: dtype conversions and fp64 reference
 * implementations of the card's math commands (<drm/spyre_cmd.h>), for
 * checking what the card computes.  No device access, no global state;
 * every function is thread-safe.  The conversions do not depend on the
 * floating-point environment (rounding mode); the fp64 reference ops
 * assume the default round-to-nearest.  Link with -lm.
 *
 * The conversions are written from the format definitions (IEEE 754
 * binary16/binary32, bfloat16, OCP OFP8 E4M3/E5M2 rev. 1.0), not from the
 * card model's code: decoding evaluates (-1)^s * m * 2^e with ldexp(), and
 * encoding scales |x| by a power of two so that the target's last mantissa
 * bit has weight 1 and rounds that to an integer, half to even.  Clarity
 * over speed; a 512x512 conversion still takes a few milliseconds.
 *
 * Values and bit patterns:
 *  - an element of a dtype is passed as its bit pattern in the low bits of
 *    a uint32_t (FP16/BF16: 16 bits, FP8/INT8/U8: 8 bits, FP32/INT32: 32
 *    bits); higher bits are ignored on input and zero on output;
 *  - buffers hold elements packed and little-endian, like card memory;
 *  - every dtype value is exactly representable in fp64 (double), so
 *    decoding is exact, and encoding from double rounds once.  A float
 *    converts to double exactly, so passing a float gives fp32 -> X.
 *
 * Conversion rules (docs/spyre-hw.rst "Data types"):
 *  - narrowing rounds to nearest, ties to even (the tie breaks towards the
 *    even significand, as if the exponent range were unbounded; overflow
 *    is decided after rounding).  So at the top of the range E4M3 464,
 *    halfway between 448 (1.110b * 2^8) and 480 (1.111b * 2^8, the NaN
 *    pattern), gives 448 in both modes, while E5M2 61440, halfway between
 *    57344 (1.11b * 2^15) and 2^16, and FP16 65520 round up, to overflow;
 *  - FP32/FP16/BF16 overflow to +-infinity (IEEE);
 *  - FP8 narrowing saturates to +-max finite (448 for E4M3, 57344 for
 *    E5M2) by default, infinities included (OCP "satfinite"); with
 *    SPYRE_CMD_F_NOSAT a value that rounds beyond max finite, or an
 *    infinity, gives +-inf (E5M2) or NaN (E4M3, sign kept: 0x7f / 0xff);
 *  - NaN stays NaN, with the input's sign and a canonical quiet pattern
 *    (FP32 0x7fc00000, FP16 0x7e00, BF16 0x7fc0, E4M3 0x7f, E5M2 0x7e, |
 *    sign bit); the payload is not kept, so compare NaNs with isnan();
 *  - INT8 (and INT32) round to nearest even and saturate to the type's
 *    range (infinities too); NaN gives 0;
 *  - widening is exact; -0.0 stays -0.0 in the float types.
 *
 * Error codes: -EINVAL for a bad dtype, dtype pair, op, shape, leading
 * dimension, flag or NULL pointer; -EOVERFLOW when an element index does
 * not fit in 64 bits (or size_t); -ENOMEM.  Outputs are written only on
 * success.
 */
#ifndef SPYRE_SPYRE_REF_H
#define SPYRE_SPYRE_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SPYRE_API, SPYRE_DTYPE_*, SPYRE_CMD_F_NOSAT, SPYRE_GEMM_F_*, ops. */
#include <spyre/spyre.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Dtype helpers                                                       */
/* ------------------------------------------------------------------ */

/**
 * spyre_dtype_size() - bytes per element of @dtype (SPYRE_DTYPE_*).
 * @dtype: an element type, SPYRE_DTYPE_*.
 *
 * Returns 1, 2, 4 or 8 (INT64), or 0 for an invalid dtype.
 */
SPYRE_API size_t spyre_dtype_size(uint32_t dtype);

/**
 * spyre_dtype_name() - short lower-case name of @dtype: "u8", "fp32", "fp16",
 * "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int32", and the kernels' "int64",
 * "int16", "bool"; "invalid" for anything else.
 * @dtype: an element type, SPYRE_DTYPE_*.
 *
 * Never NULL; a static string.
 */
SPYRE_API const char *spyre_dtype_name(uint32_t dtype);

/**
 * spyre_dtype_is_float() - true for FP32, FP16, BF16, FP8_E4M3, FP8_E5M2.
 * @dtype: an element type, SPYRE_DTYPE_*.
 */
SPYRE_API bool spyre_dtype_is_float(uint32_t dtype);

/**
 * spyre_dtype_max() - largest finite value of @dtype: FP32 3.40282347e38,
 * FP16 65504, BF16 3.38953139e38, FP8_E4M3 448, FP8_E5M2 57344, INT8
 * 127, INT32 2147483647, U8 255; 0 for an invalid dtype.
 * @dtype: an element type, SPYRE_DTYPE_*.
 */
SPYRE_API double spyre_dtype_max(uint32_t dtype);

/**
 * spyre_dtype_epsilon() - unit roundoff u of a float @dtype: half the distance
 * from 1.0 to the next value, i.e. 2^-p for p significand bits (FP32 2^-24,
 * FP16 2^-11, BF16 2^-8, E4M3 2^-4, E5M2 2^-3).
 * @dtype: an element type, SPYRE_DTYPE_*.
 *
 * Rounding a normal value x to @dtype changes it by at most u * |x|.  0 for
 * the integer types, -1 for an invalid dtype.
 */
SPYRE_API double spyre_dtype_epsilon(uint32_t dtype);

/**
 * spyre_dtype_min_subnormal() - smallest positive value of a float
 * @dtype (FP32 2^-149, FP16 2^-24, BF16 2^-133, E4M3 2^-9, E5M2 2^-16);
 * 1 for the integer types, -1 for an invalid dtype.
 * @dtype: an element type, SPYRE_DTYPE_*.
 */
SPYRE_API double spyre_dtype_min_subnormal(uint32_t dtype);

/* ------------------------------------------------------------------ */
/* Scalar conversions                                                  */
/* ------------------------------------------------------------------ */

/**
 * spyre_ref_decode() - exact value of the element @bits of @dtype.
 * @dtype: any valid SPYRE_DTYPE_* (U8 gives 0..255, INT8/INT32 are
 *	two's complement).
 * @bits: the element's bit pattern in the low bits.
 * Returns the value (NaN/inf included); NaN for an invalid dtype.
 */
SPYRE_API double spyre_ref_decode(uint32_t dtype, uint32_t bits);

/**
 * spyre_ref_encode() - nearest element of @dtype to @x (rules above).
 * @dtype: any valid SPYRE_DTYPE_* (U8 rounds and saturates to 0..255).
 * @x: the value; any double, NaN and infinities included.
 * @flags: 0 or SPYRE_CMD_F_NOSAT (only changes FP8 results).
 * Returns the bit pattern in the low bits; 0 for an invalid dtype or flag.
 */
SPYRE_API uint32_t spyre_ref_encode(uint32_t dtype, double x, uint32_t flags);

/*
 * Typed shorthands for spyre_ref_decode() / spyre_ref_encode(): *_to_f64
 * widen a bit pattern exactly; f64_to_* narrow with round to nearest
 * even.  fp16/bf16/fp32 overflow to +-inf; the fp8 ones take @flags (0:
 * saturate to +-max finite, SPYRE_CMD_F_NOSAT: +-inf for E5M2, NaN for
 * E4M3); int8/int32 saturate and map NaN to 0.
 */

/**
 * spyre_ref_fp16_to_f64() - the exact value of the IEEE binary16 bit pattern
 * @h.
 * @h: fp16 bits.
 */
SPYRE_API double spyre_ref_fp16_to_f64(uint16_t h);

/**
 * spyre_ref_f64_to_fp16() - the binary16 bit pattern nearest to @x (round to
 * nearest even, overflow to +-inf).
 * @x: any double.
 */
SPYRE_API uint16_t spyre_ref_f64_to_fp16(double x);

/**
 * spyre_ref_bf16_to_f64() - the exact value of the bfloat16 bit pattern @h.
 * @h: bf16 bits.
 */
SPYRE_API double spyre_ref_bf16_to_f64(uint16_t h);

/**
 * spyre_ref_f64_to_bf16() - the bfloat16 bit pattern nearest to @x (round to
 * nearest even, overflow to +-inf).
 * @x: any double.
 */
SPYRE_API uint16_t spyre_ref_f64_to_bf16(double x);

/**
 * spyre_ref_e4m3_to_f64() - the exact value of the OCP FP8 E4M3 bit pattern @v.
 * @v: E4M3 bits.
 */
SPYRE_API double spyre_ref_e4m3_to_f64(uint8_t v);

/**
 * spyre_ref_f64_to_e4m3() - the E4M3 bit pattern nearest to @x (round to
 * nearest even).
 * @x: any double.
 * @flags: 0 saturates to +-448, SPYRE_CMD_F_NOSAT gives NaN on overflow.
 */
SPYRE_API uint8_t spyre_ref_f64_to_e4m3(double x, uint32_t flags);

/**
 * spyre_ref_e5m2_to_f64() - the exact value of the OCP FP8 E5M2 bit pattern @v.
 * @v: E5M2 bits.
 */
SPYRE_API double spyre_ref_e5m2_to_f64(uint8_t v);

/**
 * spyre_ref_f64_to_e5m2() - the E5M2 bit pattern nearest to @x (round to
 * nearest even).
 * @x: any double.
 * @flags: 0 saturates to +-57344, SPYRE_CMD_F_NOSAT gives +-inf on
 *	overflow.
 */
SPYRE_API uint8_t spyre_ref_f64_to_e5m2(double x, uint32_t flags);

/**
 * spyre_ref_f64_to_int8() - @x rounded to nearest even, saturated to -128..127.
 * @x: any double; NaN gives 0.
 */
SPYRE_API int8_t spyre_ref_f64_to_int8(double x);

/**
 * spyre_ref_f64_to_int32() - @x rounded to nearest even, saturated to the
 * int32 range.
 * @x: any double; NaN gives 0.
 */
SPYRE_API int32_t spyre_ref_f64_to_int32(double x);

/**
 * spyre_ref_f64_to_fp32() - binary32 bit pattern nearest to @x (RNE,
 * overflow to inf); the same as the bits of (float)x, computed by the
 * generic encoder.
 * @x: any double.
 */
SPYRE_API uint32_t spyre_ref_f64_to_fp32(double x);

/* ------------------------------------------------------------------ */
/* Buffer conversions                                                  */
/* ------------------------------------------------------------------ */

/**
 * spyre_ref_convert() - convert @n packed elements like one row of the
 * card's COPY command.
 * @dst: destination buffer.
 * @dst_dtype: SPYRE_DTYPE_* of @dst.
 * @src: source buffer.
 * @src_dtype: SPYRE_DTYPE_* of @src.
 * @n: elements (0 is allowed and does nothing).
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 *
 * U8 pairs only with U8 and INT32 only with INT32 (byte copies); FP32,
 * FP16, BF16, FP8_E4M3, FP8_E5M2 and INT8 convert among themselves.  A
 * conversion to the same dtype copies the bytes unchanged (NaN payloads
 * kept).  The buffers must not overlap unless @dst == @src and both
 * dtypes have the same size.
 * Returns 0, or -EINVAL (bad pair, unknown flag, NULL buffer with @n > 0).
 */
SPYRE_API int spyre_ref_convert(void *dst, uint32_t dst_dtype,
				const void *src, uint32_t src_dtype,
				uint64_t n, uint32_t flags);

/**
 * spyre_ref_to_f64() - decode @n packed elements of @src_dtype (any valid
 * dtype) into @dst, exactly.
 * @dst: receives @n doubles.
 * @src: input buffer, @n packed elements.
 * @src_dtype: SPYRE_DTYPE_* of @src.
 * @n: elements (0 does nothing).
 *
 * Returns 0 or -EINVAL.
 */
SPYRE_API int spyre_ref_to_f64(double *dst, const void *src,
			       uint32_t src_dtype, uint64_t n);

/**
 * spyre_ref_from_f64() - encode @n doubles into packed elements of @dst_dtype
 * (any valid dtype) with spyre_ref_encode() rules and @flags (0 or
 * SPYRE_CMD_F_NOSAT).
 * @dst: output buffer, @n packed elements.
 * @dst_dtype: SPYRE_DTYPE_* of @dst.
 * @src: @n doubles.
 * @n: elements (0 does nothing).
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 *
 * Returns 0 or -EINVAL.
 */
SPYRE_API int spyre_ref_from_f64(void *dst, uint32_t dst_dtype,
				 const double *src, uint64_t n,
				 uint32_t flags);

/* ------------------------------------------------------------------ */
/* Tolerances                                                          */
/* ------------------------------------------------------------------ */

/*
 * Error model.  The card computes in fp32 and rounds the fp32 result once
 * to the output dtype; the references below compute in fp64 from the same
 * (exactly decoded) inputs, which is exact enough to count as the true
 * value.  Each reference op returns, per output element, @err: a bound on
 * |fp32 result - true value| for any reasonable fp32 implementation (any
 * summation order, FMA or not, library exp/erf within a few ulp).  The
 * basic form is spyre_ref_fp32_err(nterms, mag), the classic bound
 * gamma_n * sum|terms| for n roundings (Higham, "Accuracy and Stability of
 * Numerical Algorithms", 2nd ed., 3.1 and 3.5).  The final conversion to
 * the output dtype adds at most half an ulp of the fp32 result.
 * spyre_ref_tol() folds both into:
 *
 *	|got - ref| <= atol + rtol * |ref|, with
 *	rtol = u_out                  (spyre_dtype_epsilon(dtype))
 *	atol = err * (1 + u_out) + min_subnormal(dtype) / 2
 *
 * plus IEEE overflow: a finite ref whose bound reaches the dtype's
 * overflow threshold may come back as an infinity of the same sign.
 */

/** Unit roundoff of fp32 accumulation, 2^-24. */
#define SPYRE_REF_FP32_U	(1.0 / 16777216.0)

/**
 * spyre_ref_fp32_err() - bound on the error of an fp32 computation made of
 * @nterms roundings of quantities bounded by @mag: 1.01 * nterms * (2^-24 *
 * mag + 2^-149) (the 2^-149 term covers underflow to fp32 subnormals).
 * @nterms: roundings the computation makes.
 * @mag: bound on the magnitude of the rounded quantities.
 *
 * Valid while nterms * 2^-24 < 0.01; beyond that, and for a NaN or infinite
 * @mag, returns +inf (no useful bound).  Negative arguments give NaN. For a
 * dot product of length K with result scaling, use nterms = K + 8 and mag =
 * sum of |products| (+ |beta * c| + |bias|).
 */
SPYRE_API double spyre_ref_fp32_err(double nterms, double mag);

/**
 * struct spyre_ref_tol - comparison bound for one output element.
 * @atol: absolute part, >= 0.
 * @rtol: relative part (times |ref|), >= 0.
 * @overflow: |x| at or above which a value rounds to infinity in the
 *	output dtype (FP32 2^128 - 2^103, FP16 65520, BF16 2^128 - 2^119);
 *	+inf for dtypes that never overflow to infinity (FP8 saturating or
 *	NaN, integers).
 */
struct spyre_ref_tol {
	double atol;
	double rtol;
	double overflow;
};

/**
 * spyre_ref_tol() - comparison bound for a result stored in @dtype whose
 * fp32 computation error is at most @err.
 * @tol: receives the bound.
 * @dtype: the output dtype, SPYRE_DTYPE_*.
 * @err: bound on the fp32 computation error, >= 0: e.g. an element of the
 *	err arrays of the reference ops below, or spyre_ref_fp32_err().
 *
 * Integer dtypes give an exact comparison (atol = err, rtol = 0).
 * Returns 0, or -EINVAL (invalid dtype, NULL @tol, negative or NaN @err).
 */
SPYRE_API int spyre_ref_tol(struct spyre_ref_tol *tol, uint32_t dtype,
			    double err);

/**
 * spyre_ref_close() - whether @got (a card result, decoded) matches @ref
 * (the fp64 reference) within @tol: NaN matches only NaN, an infinite
 * @ref only the same infinity, and a finite @ref any @got with
 * |got - ref| <= atol + rtol * |ref|, or an infinity of @ref's sign when
 * |ref| + atol + rtol * |ref| >= @tol->overflow.
 * @tol: the bound, from spyre_ref_tol().
 * @got: the card's value, decoded.
 * @ref: the fp64 reference value.
 */
SPYRE_API bool spyre_ref_close(const struct spyre_ref_tol *tol, double got,
			       double ref);

/**
 * spyre_ref_compare() - compare @n packed card results against a reference.
 * @n: elements to compare.
 * @got: the card's output buffer, @n packed elements.
 * @dtype: SPYRE_DTYPE_* of @got.
 * @ref: @n reference values (fp64).
 * @err: @n fp32 error bounds as returned by the reference ops, or NULL
 *	for 0 (conversion error only).
 * @first_bad: if not NULL, set to the index of the first mismatch (or to
 *	@n when all match).
 * Returns the number of mismatching elements (0 when all are close), or
 * -EINVAL.
 */
SPYRE_API int64_t spyre_ref_compare(const void *got, uint32_t dtype,
				    const double *ref, const double *err,
				    uint64_t n, uint64_t *first_bad);

/* ------------------------------------------------------------------ */
/* Reference ops (fp64)                                                */
/* ------------------------------------------------------------------ */

/**
 * struct spyre_ref_gemm_args - host-side description of one GEMM command
 * (struct spyre_cmd_gemm with host pointers and decoded scalars):
 *	C[b] = alpha * sa * sb * op(A[b]) op(B[b]) + beta * C[b] + bias
 * for b in 0..batch-1, op(A) M x K, op(B) K x N, all row-major.
 * @flags: SPYRE_GEMM_F_TRANS_A (A stored K x M), SPYRE_GEMM_F_TRANS_B
 *	(B stored N x K); SPYRE_CMD_F_NOSAT is accepted and has no effect
 *	(no GEMM output dtype is fp8).
 * @a_dtype: A's dtype; equal to @b_dtype, one of FP32, FP16, BF16, FP8_E4M3,
 *	FP8_E5M2, INT8; or FP8_E4M3 with FP8_E5M2 in either order.
 * @b_dtype: B's dtype, see @a_dtype.
 * @c_dtype: FP32, FP16 or BF16 for float inputs; INT32 for INT8 inputs.
 * @bias_dtype: 0 (none), FP32, FP16 or BF16 (ignored for INT8 inputs).
 * @m: rows of op(A) and C, >= 1.
 * @n: columns of op(B) and C, >= 1.
 * @k: columns of op(A) and rows of op(B), >= 1.
 * @batch: matrices, >= 1.
 * @a: A's element (0, 0) of batch 0, in @a_dtype.
 * @b: B's element (0, 0) of batch 0, in @b_dtype.
 * @c: C's input values (element (0, 0) of batch 0, @c_dtype, @ldc,
 *	@stride_c), read only when @beta != 0; may be NULL when @beta == 0.
 * @bias: N elements of @bias_dtype when @bias_dtype != 0.
 * @lda: leading dimension of A in elements, >= its stored row length (K,
 *	or M with TRANS_A).
 * @ldb: leading dimension of B, >= N (or K with TRANS_B).
 * @ldc: leading dimension of C, >= N.
 * @stride_a: elements between A matrices of consecutive batches (any
 *	value, 0 broadcasts one matrix to every batch).
 * @stride_b: the same for B.
 * @stride_c: the same for C.
 * @alpha: as the command's binary32 field; INT8 inputs ignore it.
 * @beta: as the command's binary32 field; INT8 inputs require 0 or 1.
 * @scale_a: A's per-tensor scale (pass 1.0f for an absent scale); ignored
 *	for INT8 inputs.
 * @scale_b: B's per-tensor scale, as @scale_a.
 */
struct spyre_ref_gemm_args {
	uint32_t flags;
	uint32_t a_dtype;
	uint32_t b_dtype;
	uint32_t c_dtype;
	uint32_t bias_dtype;
	uint32_t m;
	uint32_t n;
	uint32_t k;
	uint32_t batch;
	const void *a;
	const void *b;
	const void *c;
	const void *bias;
	uint64_t lda;
	uint64_t ldb;
	uint64_t ldc;
	uint64_t stride_a;
	uint64_t stride_b;
	uint64_t stride_c;
	float alpha;
	float beta;
	float scale_a;
	float scale_b;
};

/**
 * spyre_ref_gemm() - reference GEMM in fp64.
 * @g: the operands (above).
 * @out: batch * m * n doubles, dense ([b][i][j] at (b * m + i) * n + j):
 *	the result before conversion to @c_dtype.  Float inputs: the exact
 *	value of alpha * sa * sb * sum_k a * b + beta * c + bias (up to fp64
 *	rounding).  INT8 inputs: the exact sum (+ c when beta == 1) wrapped
 *	to int32 (two's complement), which is what any int32 accumulation
 *	order gives.
 * @err: NULL, or batch * m * n fp32 error bounds (dense like @out):
 *	spyre_ref_fp32_err(k + 8, |alpha sa sb| sum_k |a b| + |beta c| +
 *	|bias|) for float inputs, 0 for INT8.
 * @amax: NULL, or receives max |out| over all batches (NaN if any result
 *	is NaN) -- the value the command's amax output approximates (fp32).
 * @amax_err: NULL, or receives the largest @err, the bound for @amax.
 * Convert @out to @c_dtype with spyre_ref_from_f64() to get the bytes a
 * card with exact accumulation would write; compare card output with
 * spyre_ref_compare(got, c_dtype, out, err, ...).
 * Returns 0, -EINVAL (bad dtypes, shape, leading dimension, flags, beta
 * for INT8, NULL pointer), -EOVERFLOW or -ENOMEM.
 */
SPYRE_API int spyre_ref_gemm(const struct spyre_ref_gemm_args *g, double *out,
			     double *err, double *amax, double *amax_err);

/**
 * spyre_ref_eltwise() - reference ELTWISE: out[i] = f(a[i], b[i]).
 * @op: SPYRE_ELT_ADD, MUL, SCALE (alpha * a), RELU (max(a, 0); NaN stays
 *	NaN), GELU (a/2 * (1 + erf(a / sqrt 2))), SILU (a / (1 + exp(-a))),
 *	EXP.
 * @dtype: FP32, FP16 or BF16 for @a and @b.
 * @count: elements (>= 1).
 * @a: @count elements.
 * @b: @count elements for ADD and MUL, else ignored (may be NULL).
 * @alpha: SCALE's factor.
 * @out: @count doubles, the exact results.
 * @err: NULL, or @count fp32 error bounds: ADD/MUL/SCALE 1 rounding of
 *	|out|; RELU 0; EXP 4 roundings of |out|; SILU 8 roundings of |out|
 *	(+|out| below a = -88, where fp32 exp(-a) overflows and the
 *	formula gives -0); GELU 8 roundings of |a| (1 + erf cancels for
 *	a << 0).
 * Returns 0 or -EINVAL.
 */
SPYRE_API int spyre_ref_eltwise(uint32_t op, uint32_t dtype, uint64_t count,
				const void *a, const void *b, float alpha,
				double *out, double *err);

/**
 * spyre_ref_reduce() - reference REDUCE: row-wise SUM or MAX.
 * @src: @rows x @cols elements of @dtype, rows @ld elements apart.
 * @op: SPYRE_REDUCE_SUM or SPYRE_REDUCE_MAX (NaN in a row gives NaN).
 * @dtype: FP32, FP16 or BF16.
 * @rows: rows of @src, >= 1.
 * @cols: elements per row, >= 1.
 * @ld: elements between rows of @src, >= @cols.
 * @out: @rows doubles.
 * @err: NULL, or @rows bounds: SUM spyre_ref_fp32_err(cols + 1,
 *	sum |x|), MAX 0.
 * Returns 0, -EINVAL or -EOVERFLOW.
 */
SPYRE_API int spyre_ref_reduce(uint32_t op, uint32_t dtype, uint32_t rows,
			       uint32_t cols, uint64_t ld, const void *src,
			       double *out, double *err);

/**
 * spyre_ref_rowop() - reference ROWOP over a @rows x @cols matrix.
 * @src: @rows x @cols elements of @dtype, rows @ld_src elements apart.
 * @op: SPYRE_ROW_SOFTMAX: exp(x - max) / sum exp(x - max);
 *	SPYRE_ROW_LAYERNORM: (x - mean) / sqrt(var + eps) * gamma + beta,
 *	var the biased (1/cols) variance;
 *	SPYRE_ROW_RMSNORM: x / sqrt(mean(x^2) + eps) * gamma.
 * @dtype: FP32, FP16 or BF16 for @src.
 * @rows: rows of @src, >= 1.
 * @cols: elements per row, >= 1.
 * @ld_src: elements between rows of @src (>= @cols).
 * @gamma: NULL (1.0) or @cols floats; SOFTMAX ignores it.
 * @beta: NULL (0.0) or @cols floats; SOFTMAX and RMSNORM ignore it.
 * @eps: as the command's binary32 field; must be >= 0 (-EINVAL for a
 *	negative or NaN @eps).
 * @out: rows * cols doubles, dense (row r at r * cols).
 * @err: NULL, or rows * cols fp32 error bounds: SOFTMAX
 *	spyre_ref_fp32_err(cols + 8 + |x - max|, |out|) (the rounding of
 *	x - max is amplified by exp); RMSNORM spyre_ref_fp32_err(cols / 2 +
 *	8, |out|); LAYERNORM a first-order bound built from the worst-case
 *	fp32 error of the mean, (cols + 2) u mean|x|, and of the variance
 *	(src/ref.c, layernorm_err()).  LAYERNORM's bound assumes the
 *	variance is computed from (x - mean) (two passes or Welford), not as
 *	mean(x^2) - mean^2; it grows with |mean| / stddev, as the true fp32
 *	error does.
 * Returns 0, -EINVAL, -EOVERFLOW or -ENOMEM.
 */
SPYRE_API int spyre_ref_rowop(uint32_t op, uint32_t dtype, uint32_t rows,
			      uint32_t cols, uint64_t ld_src, const void *src,
			      const float *gamma, const float *beta, float eps,
			      double *out, double *err);

/* ------------------------------------------------------------------ */
/* Kernel programs (0.8)                                               */
/* ------------------------------------------------------------------ */

/**
 * struct spyre_ref_kernel_operand - one operand of a reference kernel run.
 * @data: host buffer of @extent packed little-endian elements of @dtype
 *	(the card's layout); may be NULL when @extent is 0.
 * @extent: elements; offsets 0..@extent-1 are valid.
 * @dtype: SPYRE_DTYPE_* (any data type, INT64/INT16/BOOL included).
 * @pad: must be zero.
 */
struct spyre_ref_kernel_operand {
	void *data;
	uint64_t extent;
	uint32_t dtype;
	uint32_t pad;
};

/**
 * struct spyre_ref_kernel_launch - a KERNEL command on host buffers (the
 *	fields of struct spyre_cmd_kernel).
 * @prog: the program bytes.
 * @prog_size: their size.
 * @noperands: entries at @operands.
 * @nparams: entries at @params.
 * @npdims: pointwise dimensions.
 * @nrdims: reduction dimensions.
 * @operands: the operands.
 * @params: the parameters.
 * @size: p0..p5 in @size[0..5], r0..r2 in @size[6..8] (unused entries
 *	zero); SPYRE_KSIZE_PARAM(i) takes a size from parameter i.
 */
struct spyre_ref_kernel_launch {
	const void *prog;
	uint64_t prog_size;
	uint32_t noperands;
	uint32_t nparams;
	uint32_t npdims;
	uint32_t nrdims;
	const struct spyre_ref_kernel_operand *operands;
	const uint64_t *params;
	uint64_t size[9];
};

/**
 * struct spyre_ref_kernel_result - how the launch ended, as the card's
 *	completion record says it.
 * @status: SPYRE_STATUS_OK, _INVALID_COMMAND, _INVALID_OPERAND, _LIMIT,
 *	_BAD_PROGRAM, _OUT_OF_BOUNDS or _ASSERT.
 * @pad: zero.
 * @detail: the record's detail (BAD_PROGRAM: instruction | reason << 32;
 *	OUT_OF_BOUNDS: operand | SPYRE_KDETAIL_WRITE | instruction << 32;
 *	ASSERT: instruction << 32), else 0.
 * @detail2: OUT_OF_BOUNDS: the element offset (signed), else 0.
 */
struct spyre_ref_kernel_result {
	uint32_t status;
	uint32_t pad;
	uint64_t detail;
	uint64_t detail2;
};

/**
 * spyre_ref_kernel() - run a KERNEL launch on host buffers: the reference
 * the tests judge the card's kernels with.
 * @l: the launch.
 * @res: receives the status and details.
 *
 * Checks the command, the operands, the iteration space and the program
 * in the contract's order (docs/spyre-hw.rst, "Verification and
 * errors"), then runs the points in increasing linear order, each
 * section in program order and each pass reduction index by reduction
 * index, stopping at the first failing access or CHECK (the failure the
 * card reports).  f32 operations are computed in double and rounded once
 * (bit-exact for ADD, SUB, MUL, DIV, FMA, SQRT, RECIP, RSQRT, the
 * divisions and remainders, conversions, FLOOR .. TRUNC, SIGN,
 * COPYSIGN); POW and the math functions (EXP .. ERFINV, HYPOT, LGAMMA)
 * are the host libm's double value rounded once, so almost always the
 * correctly rounded one: compare the card's with the contract's bound for
 * the function (docs/spyre-hw.rst's math table) beside it.
 * Integers are exact (two's complement, the contract's values for
 * division by zero and the like); reductions follow the fixed order, so
 * SUM, PROD and WELFORD are bit-exact too.  Part 2: SCATTER writes
 * lane after lane in that order, SCAN folds left to right (both
 * bit-exact), RAND is bit-exact for BITS and UNIFORM and, for NORMAL,
 * uses libm's log and cos (within 4 ulps of the card's).  Outputs are written in place
 * in the operands' buffers (what a failed run wrote is as undefined as
 * on the card).  Cost: about (P * max(R, 1) * instructions) steps, single
 * threaded.
 *
 * Returns 0 when the launch was judged (the outcome in @res), -EINVAL (NULL
 * @l or @res, a NULL array with a non-zero count, an operand with an
 * extent and no data), -ENOMEM.
 */
SPYRE_API int spyre_ref_kernel(const struct spyre_ref_kernel_launch *l,
			       struct spyre_ref_kernel_result *res);

/**
 * spyre_ref_philox4x32_10() - the Philox4x32-10 block function (Salmon,
 * Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11), the generator of the kernels' RAND.
 * @ctr: the counter words c0..c3, replaced by the four output words.
 * @key: the key words k0, k1.
 *
 * docs/spyre-hw.rst says which counter and word each RAND element takes.
 */
SPYRE_API void spyre_ref_philox4x32_10(uint32_t ctr[4], const uint32_t key[2]);

#ifdef __cplusplus
}
#endif

#endif /* SPYRE_SPYRE_REF_H */
