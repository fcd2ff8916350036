// SPDX-License-Identifier: MIT
/*
 * Host reference numerics: dtype conversions and fp64 reference ops.
 * See <spyre/spyre_ref.h> for the contract.
 *
 * Written from the format definitions (IEEE 754-2008 binary16/binary32,
 * bfloat16 = the upper half of binary32, OCP OFP8 rev. 1.0 E4M3/E5M2) as
 * an independent check of the card model's converter: values are decoded
 * with ldexp() and encoded by scaling into an integer significand and
 * rounding half to even in fp64 -- no bit-level rounding tricks.
 */
#include <spyre/spyre_ref.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Float formats                                                       */
/* ------------------------------------------------------------------ */

/*
 * A binary floating-point format: 1 sign bit, @ebits exponent bits, @mbits
 * stored significand bits, exponent @bias.  Field values:
 *	exponent 0:              subnormal, m * 2^(1 - bias - mbits)
 *	exponent 1..emax_field:  normal, (2^mbits + m) * 2^(e - bias - mbits)
 * IEEE formats (@fn false) reserve the all-ones exponent for infinities
 * (m == 0) and NaNs (m != 0).  "fn" formats (OCP E4M3) have no infinities:
 * the all-ones exponent holds normals, except that the all-ones mantissa
 * there is NaN.
 */
struct fmt {
	int ebits;
	int mbits;
	int bias;
	bool fn;
};

static const struct fmt FMT_FP32 = { 8, 23, 127, false };
static const struct fmt FMT_FP16 = { 5, 10, 15, false };
static const struct fmt FMT_BF16 = { 8, 7, 127, false };
static const struct fmt FMT_E4M3 = { 4, 3, 7, true };
static const struct fmt FMT_E5M2 = { 5, 2, 15, false };

static const struct fmt *fmt_of(uint32_t dtype)
{
	switch (dtype) {
	case SPYRE_DTYPE_FP32:
		return &FMT_FP32;
	case SPYRE_DTYPE_FP16:
		return &FMT_FP16;
	case SPYRE_DTYPE_BF16:
		return &FMT_BF16;
	case SPYRE_DTYPE_FP8_E4M3:
		return &FMT_E4M3;
	case SPYRE_DTYPE_FP8_E5M2:
		return &FMT_E5M2;
	default:
		return NULL;
	}
}

static uint32_t fmt_emask(const struct fmt *f)
{
	return (1u << f->ebits) - 1;
}

static uint32_t fmt_mmask(const struct fmt *f)
{
	return (1u << f->mbits) - 1;
}

static uint32_t fmt_sign(const struct fmt *f)
{
	return 1u << (f->ebits + f->mbits);
}

/* Smallest normal exponent (unbiased). */
static int fmt_emin(const struct fmt *f)
{
	return 1 - f->bias;
}

/* Largest exponent (unbiased) that holds finite values. */
static int fmt_emax(const struct fmt *f)
{
	return (int)fmt_emask(f) - (f->fn ? 0 : 1) - f->bias;
}

/* Largest mantissa field at fmt_emax(). */
static uint32_t fmt_max_mant(const struct fmt *f)
{
	return fmt_mmask(f) - (f->fn ? 1 : 0);
}

static double fmt_max(const struct fmt *f)
{
	return ldexp((double)((1u << f->mbits) + fmt_max_mant(f)),
		     fmt_emax(f) - f->mbits);
}

static double fmt_min_subnormal(const struct fmt *f)
{
	return ldexp(1.0, fmt_emin(f) - f->mbits);
}

static double fmt_decode(const struct fmt *f, uint32_t bits)
{
	uint32_t m = bits & fmt_mmask(f);
	uint32_t e = (bits >> f->mbits) & fmt_emask(f);
	bool neg = (bits & fmt_sign(f)) != 0;
	double v;

	if (e == fmt_emask(f) && !f->fn)
		v = m ? NAN : INFINITY;
	else if (e == fmt_emask(f) && m == fmt_mmask(f))
		v = NAN;
	else if (e == 0)
		v = ldexp((double)m, fmt_emin(f) - f->mbits);
	else
		v = ldexp((double)((1u << f->mbits) + m),
			  (int)e - f->bias - f->mbits);
	return neg ? -v : v;
}

/*
 * Round y >= 0 to the nearest integer, ties to even.  Exact and
 * independent of the rounding mode: floor() is exact, and y - floor(y) is
 * exact (Sterbenz: floor(y) >= y / 2 once y >= 1).
 */
static double round_half_even(double y)
{
	double f = floor(y);
	double d = y - f;

	if (d > 0.5)
		return f + 1.0;
	if (d < 0.5)
		return f;
	return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

/* Canonical quiet NaN: fn formats have one NaN, IEEE ones set the top
 * mantissa bit. */
static uint32_t fmt_nan(const struct fmt *f)
{
	if (f->fn)
		return (fmt_emask(f) << f->mbits) | fmt_mmask(f);
	return (fmt_emask(f) << f->mbits) | (1u << (f->mbits - 1));
}

/*
 * Nearest value of format @f to @x, ties to even.  A result beyond max
 * finite (after rounding as if the exponent were unbounded) or an
 * infinite @x gives max finite when @sat, else infinity (IEEE) or NaN
 * (fn).
 */
static uint32_t fmt_encode(const struct fmt *f, double x, bool sat)
{
	uint32_t sign = signbit(x) ? fmt_sign(f) : 0;
	double a = fabs(x), r;
	uint32_t m;
	int e;

	if (isnan(x))
		return sign | fmt_nan(f);
	if (isinf(a))
		goto overflow;
	if (a == 0.0)
		return sign;

	/* a = frac * 2^e with frac in [0.5, 1): a is in [2^(e-1), 2^e). */
	(void)frexp(a, &e);
	e -= 1;
	/* Below the normal range the quantum stays that of emin. */
	if (e < fmt_emin(f))
		e = fmt_emin(f);
	/* Significand in units of the last place 2^(e - mbits): an exact
	 * power-of-two scaling, then one rounding. */
	r = round_half_even(ldexp(a, f->mbits - e));
	if (r == 0.0)
		return sign;
	if (r == ldexp(1.0, f->mbits + 1)) {
		/* Rounded up into the next binade. */
		r = ldexp(1.0, f->mbits);
		e++;
	}
	if (r < ldexp(1.0, f->mbits))
		return sign | (uint32_t)r;	/* subnormal (e == emin) */
	m = (uint32_t)r - (1u << f->mbits);
	if (e > fmt_emax(f) || (e == fmt_emax(f) && m > fmt_max_mant(f)))
		goto overflow;
	return sign | ((uint32_t)(e + f->bias) << f->mbits) | m;

overflow:
	if (sat)
		return sign | ((uint32_t)(fmt_emax(f) + f->bias) << f->mbits) |
		       fmt_max_mant(f);
	return sign | (f->fn ? fmt_nan(f) : fmt_emask(f) << f->mbits);
}

/* Nearest integer to @x in [lo, hi], ties to even; NaN gives 0. */
static int64_t int_encode(double x, int64_t lo, int64_t hi)
{
	double r;

	if (isnan(x))
		return 0;
	if (x <= (double)lo)
		return lo;
	if (x >= (double)hi)
		return hi;
	r = signbit(x) ? -round_half_even(-x) : round_half_even(x);
	return (int64_t)r;
}

static bool is_fp8(uint32_t dtype)
{
	return dtype == SPYRE_DTYPE_FP8_E4M3 || dtype == SPYRE_DTYPE_FP8_E5M2;
}

/* FP32, FP16, BF16: the dtypes ELTWISE/REDUCE/ROWOP work on. */
static bool is_wide_float(uint32_t dtype)
{
	return dtype == SPYRE_DTYPE_FP32 || dtype == SPYRE_DTYPE_FP16 ||
	       dtype == SPYRE_DTYPE_BF16;
}

/* ------------------------------------------------------------------ */
/* Dtype helpers                                                       */
/* ------------------------------------------------------------------ */

/* A fact of the format (drm/spyre_cmd.h), not of the card's math. */
SPYRE_API size_t spyre_dtype_size(uint32_t dtype)
{
	return spyre_cmd_dtype_size(dtype);
}

SPYRE_API const char *spyre_dtype_name(uint32_t dtype)
{
	switch (dtype) {
	case SPYRE_DTYPE_U8:
		return "u8";
	case SPYRE_DTYPE_FP32:
		return "fp32";
	case SPYRE_DTYPE_FP16:
		return "fp16";
	case SPYRE_DTYPE_BF16:
		return "bf16";
	case SPYRE_DTYPE_FP8_E4M3:
		return "fp8_e4m3";
	case SPYRE_DTYPE_FP8_E5M2:
		return "fp8_e5m2";
	case SPYRE_DTYPE_INT8:
		return "int8";
	case SPYRE_DTYPE_INT32:
		return "int32";
	case SPYRE_DTYPE_INT64:
		return "int64";
	case SPYRE_DTYPE_INT16:
		return "int16";
	case SPYRE_DTYPE_BOOL:
		return "bool";
	default:
		return "invalid";
	}
}

SPYRE_API bool spyre_dtype_is_float(uint32_t dtype)
{
	return fmt_of(dtype) != NULL;
}

SPYRE_API double spyre_dtype_max(uint32_t dtype)
{
	const struct fmt *f = fmt_of(dtype);

	if (f)
		return fmt_max(f);
	switch (dtype) {
	case SPYRE_DTYPE_U8:
		return 255.0;
	case SPYRE_DTYPE_INT8:
		return 127.0;
	case SPYRE_DTYPE_INT32:
		return 2147483647.0;
	default:
		return 0.0;
	}
}

SPYRE_API double spyre_dtype_epsilon(uint32_t dtype)
{
	const struct fmt *f = fmt_of(dtype);

	if (f)
		return ldexp(1.0, -(f->mbits + 1));
	return spyre_dtype_size(dtype) ? 0.0 : -1.0;
}

SPYRE_API double spyre_dtype_min_subnormal(uint32_t dtype)
{
	const struct fmt *f = fmt_of(dtype);

	if (f)
		return fmt_min_subnormal(f);
	return spyre_dtype_size(dtype) ? 1.0 : -1.0;
}

/* ------------------------------------------------------------------ */
/* Scalar conversions                                                  */
/* ------------------------------------------------------------------ */

SPYRE_API double spyre_ref_decode(uint32_t dtype, uint32_t bits)
{
	const struct fmt *f = fmt_of(dtype);

	if (f)
		return fmt_decode(f, bits & (fmt_sign(f) * 2 - 1));
	switch (dtype) {
	case SPYRE_DTYPE_U8:
		return (double)(bits & 0xff);
	case SPYRE_DTYPE_INT8:
		bits &= 0xff;
		return bits >= 0x80 ? (double)bits - 256.0 : (double)bits;
	case SPYRE_DTYPE_INT32:
		return bits >= 0x80000000u ? (double)bits - 4294967296.0 :
					     (double)bits;
	default:
		return NAN;
	}
}

SPYRE_API uint32_t spyre_ref_encode(uint32_t dtype, double x, uint32_t flags)
{
	const struct fmt *f = fmt_of(dtype);

	if (flags & ~SPYRE_CMD_F_NOSAT)
		return 0;
	if (f)
		return fmt_encode(f, x, is_fp8(dtype) &&
				  !(flags & SPYRE_CMD_F_NOSAT));
	switch (dtype) {
	case SPYRE_DTYPE_U8:
		return (uint32_t)int_encode(x, 0, 255);
	case SPYRE_DTYPE_INT8:
		return (uint32_t)int_encode(x, -128, 127) & 0xff;
	case SPYRE_DTYPE_INT32:
		return (uint32_t)int_encode(x, INT32_MIN, INT32_MAX);
	default:
		return 0;
	}
}

SPYRE_API double spyre_ref_fp16_to_f64(uint16_t h)
{
	return fmt_decode(&FMT_FP16, h);
}

SPYRE_API uint16_t spyre_ref_f64_to_fp16(double x)
{
	return (uint16_t)fmt_encode(&FMT_FP16, x, false);
}

SPYRE_API double spyre_ref_bf16_to_f64(uint16_t h)
{
	return fmt_decode(&FMT_BF16, h);
}

SPYRE_API uint16_t spyre_ref_f64_to_bf16(double x)
{
	return (uint16_t)fmt_encode(&FMT_BF16, x, false);
}

SPYRE_API double spyre_ref_e4m3_to_f64(uint8_t v)
{
	return fmt_decode(&FMT_E4M3, v);
}

SPYRE_API uint8_t spyre_ref_f64_to_e4m3(double x, uint32_t flags)
{
	return (uint8_t)spyre_ref_encode(SPYRE_DTYPE_FP8_E4M3, x, flags);
}

SPYRE_API double spyre_ref_e5m2_to_f64(uint8_t v)
{
	return fmt_decode(&FMT_E5M2, v);
}

SPYRE_API uint8_t spyre_ref_f64_to_e5m2(double x, uint32_t flags)
{
	return (uint8_t)spyre_ref_encode(SPYRE_DTYPE_FP8_E5M2, x, flags);
}

SPYRE_API int8_t spyre_ref_f64_to_int8(double x)
{
	return (int8_t)int_encode(x, -128, 127);
}

SPYRE_API int32_t spyre_ref_f64_to_int32(double x)
{
	return (int32_t)int_encode(x, INT32_MIN, INT32_MAX);
}

SPYRE_API uint32_t spyre_ref_f64_to_fp32(double x)
{
	return fmt_encode(&FMT_FP32, x, false);
}

/* ------------------------------------------------------------------ */
/* Buffers                                                             */
/* ------------------------------------------------------------------ */

/* Element @i of a packed little-endian buffer of @size-byte elements. */
static uint32_t load_elem(const void *buf, size_t size, uint64_t i)
{
	const uint8_t *p = (const uint8_t *)buf + i * size;
	uint32_t v = 0;

	for (size_t b = 0; b < size; b++)
		v |= (uint32_t)p[b] << (8 * b);
	return v;
}

static void store_elem(void *buf, size_t size, uint64_t i, uint32_t v)
{
	uint8_t *p = (uint8_t *)buf + i * size;

	for (size_t b = 0; b < size; b++)
		p[b] = (uint8_t)(v >> (8 * b));
}

static double load_value(const void *buf, uint32_t dtype, uint64_t i)
{
	return spyre_ref_decode(dtype, load_elem(buf, spyre_dtype_size(dtype),
						 i));
}

/* Whether @n elements of @size bytes can be addressed. */
static bool bytes_ok(uint64_t n, size_t size)
{
	return size && n <= SIZE_MAX / size;
}

/* COPY's convertible set: float types and INT8. */
static bool copy_converts(uint32_t dtype)
{
	return fmt_of(dtype) || dtype == SPYRE_DTYPE_INT8;
}

SPYRE_API int spyre_ref_convert(void *dst, uint32_t dst_dtype,
				const void *src, uint32_t src_dtype,
				uint64_t n, uint32_t flags)
{
	size_t ds = spyre_dtype_size(dst_dtype);
	size_t ss = spyre_dtype_size(src_dtype);

	if (flags & ~SPYRE_CMD_F_NOSAT)
		return -EINVAL;
	if (!(dst_dtype == src_dtype && (dst_dtype == SPYRE_DTYPE_U8 ||
					 dst_dtype == SPYRE_DTYPE_INT32)) &&
	    !(copy_converts(dst_dtype) && copy_converts(src_dtype)))
		return -EINVAL;
	if (n && (!dst || !src))
		return -EINVAL;
	if (!bytes_ok(n, ds) || !bytes_ok(n, ss))
		return -EOVERFLOW;
	if (dst_dtype == src_dtype) {
		memmove(dst, src, (size_t)n * ds);
		return 0;
	}
	for (uint64_t i = 0; i < n; i++)
		store_elem(dst, ds, i,
			   spyre_ref_encode(dst_dtype,
					    load_value(src, src_dtype, i),
					    flags));
	return 0;
}

SPYRE_API int spyre_ref_to_f64(double *dst, const void *src,
			       uint32_t src_dtype, uint64_t n)
{
	size_t ss = spyre_dtype_size(src_dtype);

	if (!ss || (n && (!dst || !src)))
		return -EINVAL;
	if (!bytes_ok(n, ss) || !bytes_ok(n, sizeof(double)))
		return -EOVERFLOW;
	for (uint64_t i = 0; i < n; i++)
		dst[i] = load_value(src, src_dtype, i);
	return 0;
}

SPYRE_API int spyre_ref_from_f64(void *dst, uint32_t dst_dtype,
				 const double *src, uint64_t n,
				 uint32_t flags)
{
	size_t ds = spyre_dtype_size(dst_dtype);

	if (!ds || (flags & ~SPYRE_CMD_F_NOSAT) || (n && (!dst || !src)))
		return -EINVAL;
	if (!bytes_ok(n, ds) || !bytes_ok(n, sizeof(double)))
		return -EOVERFLOW;
	for (uint64_t i = 0; i < n; i++)
		store_elem(dst, ds, i, spyre_ref_encode(dst_dtype, src[i],
							flags));
	return 0;
}

/* ------------------------------------------------------------------ */
/* Tolerances                                                          */
/* ------------------------------------------------------------------ */

#define FP32_U		SPYRE_REF_FP32_U
#define FP32_TINY	0x1p-149	/* fp32 subnormal quantum */

SPYRE_API double spyre_ref_fp32_err(double nterms, double mag)
{
	/* No bound for a NaN or infinite magnitude (inputs with NaN/inf:
	 * the reference is then NaN or inf, which is compared exactly). */
	if (isnan(nterms) || nterms * FP32_U >= 0.01 || !(mag < INFINITY))
		return INFINITY;
	if (nterms < 0 || mag < 0)
		return NAN;
	return 1.01 * nterms * (FP32_U * mag + FP32_TINY);
}

SPYRE_API int spyre_ref_tol(struct spyre_ref_tol *tol, uint32_t dtype,
			    double err)
{
	const struct fmt *f = fmt_of(dtype);
	double u;

	if (!tol || !spyre_dtype_size(dtype) || isnan(err) || err < 0)
		return -EINVAL;
	if (!f) {
		tol->atol = err;
		tol->rtol = 0.0;
		tol->overflow = INFINITY;
		return 0;
	}
	u = spyre_dtype_epsilon(dtype);
	tol->atol = err * (1.0 + u) + fmt_min_subnormal(f) / 2;
	tol->rtol = u;
	/* IEEE formats overflow from max + half an ulp of max. */
	tol->overflow = f->fn || is_fp8(dtype) ? INFINITY :
			fmt_max(f) + ldexp(1.0, fmt_emax(f) - f->mbits - 1);
	return 0;
}

SPYRE_API bool spyre_ref_close(const struct spyre_ref_tol *tol, double got,
			       double ref)
{
	double bound;

	if (!tol)
		return false;
	if (isnan(ref))
		return isnan(got);
	if (isnan(got))
		return false;
	if (isinf(ref))
		return got == ref;
	bound = tol->atol + tol->rtol * fabs(ref);
	if (isinf(got))
		return signbit(got) == signbit(ref) &&
		       fabs(ref) + bound >= tol->overflow;
	return fabs(got - ref) <= bound;
}

SPYRE_API int64_t spyre_ref_compare(const void *got, uint32_t dtype,
				    const double *ref, const double *err,
				    uint64_t n, uint64_t *first_bad)
{
	struct spyre_ref_tol tol;
	uint64_t first = n;
	int64_t bad = 0;
	int ret;

	if (!spyre_dtype_size(dtype) || (n && (!got || !ref)) ||
	    n > INT64_MAX)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		ret = spyre_ref_tol(&tol, dtype, err ? err[i] : 0.0);
		if (ret)
			return ret;
		if (!spyre_ref_close(&tol, load_value(got, dtype, i), ref[i])) {
			if (!bad)
				first = i;
			bad++;
		}
	}
	if (first_bad)
		*first_bad = first;
	return bad;
}

/* ------------------------------------------------------------------ */
/* Index arithmetic                                                    */
/* ------------------------------------------------------------------ */

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	if (a && b > UINT64_MAX / a)
		return false;
	*r = a * b;
	return true;
}

static bool add_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	if (b > UINT64_MAX - a)
		return false;
	*r = a + b;
	return true;
}

/*
 * Whether the last element of @batch matrices of @rows x @cols (stored
 * with leading dimension @ld, @stride elements apart) has an index that
 * fits, as bytes of @size-byte elements, in size_t.
 */
static bool span_ok(uint64_t batch, uint64_t stride, uint64_t rows,
		    uint64_t ld, uint64_t cols, size_t size)
{
	uint64_t a, b, last;

	if (!mul_ok(batch - 1, stride, &a) || !mul_ok(rows - 1, ld, &b) ||
	    !add_ok(a, b, &last) || !add_ok(last, cols, &last))
		return false;
	return bytes_ok(last, size);
}

/* malloc of @n doubles, NULL on overflow too. */
static double *alloc_doubles(uint64_t n)
{
	if (!n || !bytes_ok(n, sizeof(double)))
		return NULL;
	return malloc((size_t)n * sizeof(double));
}

/* ------------------------------------------------------------------ */
/* GEMM                                                                */
/* ------------------------------------------------------------------ */

static bool gemm_in_ok(uint32_t a, uint32_t b)
{
	if (a == b)
		return fmt_of(a) || a == SPYRE_DTYPE_INT8;
	return is_fp8(a) && is_fp8(b);
}

static int gemm_check(const struct spyre_ref_gemm_args *g)
{
	bool ta = g->flags & SPYRE_GEMM_F_TRANS_A;
	bool tb = g->flags & SPYRE_GEMM_F_TRANS_B;
	bool int8 = g->a_dtype == SPYRE_DTYPE_INT8;

	if (g->flags & ~SPYRE_GEMM_F_ALL)
		return -EINVAL;
	if (!gemm_in_ok(g->a_dtype, g->b_dtype))
		return -EINVAL;
	if (int8 ? g->c_dtype != SPYRE_DTYPE_INT32 :
		   !is_wide_float(g->c_dtype))
		return -EINVAL;
	if (g->bias_dtype && !is_wide_float(g->bias_dtype))
		return -EINVAL;
	if (int8 && g->beta != 0.0f && g->beta != 1.0f)
		return -EINVAL;
	if (!g->m || !g->n || !g->k || !g->batch)
		return -EINVAL;
	if (g->lda < (ta ? g->m : g->k) || g->ldb < (tb ? g->k : g->n) ||
	    g->ldc < g->n)
		return -EINVAL;
	if (!g->a || !g->b || (g->beta != 0.0f && !g->c) ||
	    (!int8 && g->bias_dtype && !g->bias))
		return -EINVAL;
	if (!span_ok(g->batch, g->stride_a, ta ? g->k : g->m, g->lda,
		     ta ? g->m : g->k, spyre_dtype_size(g->a_dtype)) ||
	    !span_ok(g->batch, g->stride_b, tb ? g->n : g->k, g->ldb,
		     tb ? g->k : g->n, spyre_dtype_size(g->b_dtype)) ||
	    !span_ok(g->batch, g->stride_c, g->m, g->ldc, g->n,
		     spyre_dtype_size(g->c_dtype)))
		return -EOVERFLOW;
	return 0;
}

/* Wrap an exact integer to int32 (two's complement), as int32 adds do. */
static double wrap_int32(int64_t v)
{
	uint32_t w = (uint32_t)(uint64_t)v;

	return w >= 0x80000000u ? (double)w - 4294967296.0 : (double)w;
}

SPYRE_API int spyre_ref_gemm(const struct spyre_ref_gemm_args *g, double *out,
			     double *err, double *amax, double *amax_err)
{
	uint64_t m, n, k, mn, mk, nk, total;
	double *ad = NULL, *bt = NULL;
	double amx = 0.0, amx_err = 0.0;
	double scale;
	bool int8, ta, tb;
	int ret;

	if (!g || !out)
		return -EINVAL;
	ret = gemm_check(g);
	if (ret)
		return ret;
	m = g->m;
	n = g->n;
	k = g->k;
	int8 = g->a_dtype == SPYRE_DTYPE_INT8;
	ta = g->flags & SPYRE_GEMM_F_TRANS_A;
	tb = g->flags & SPYRE_GEMM_F_TRANS_B;
	/* m, n, k < 2^32: these products fit in 64 bits. */
	mn = m * n;
	mk = m * k;
	nk = n * k;
	if (!mul_ok(mn, g->batch, &total) || !bytes_ok(total, sizeof(double)))
		return -EOVERFLOW;
	ad = alloc_doubles(mk);
	bt = alloc_doubles(nk);
	if (!ad || !bt) {
		ret = bytes_ok(mk, sizeof(double)) &&
		      bytes_ok(nk, sizeof(double)) ? -ENOMEM : -EOVERFLOW;
		goto out;
	}
	scale = (double)g->alpha * (double)g->scale_a * (double)g->scale_b;

	for (uint64_t bi = 0; bi < g->batch; bi++) {
		uint64_t oa = bi * g->stride_a, ob = bi * g->stride_b;
		uint64_t oc = bi * g->stride_c;

		/* ad[i][kk] = op(A)(i, kk); bt[j][kk] = op(B)(kk, j). */
		for (uint64_t i = 0; i < m; i++)
			for (uint64_t kk = 0; kk < k; kk++)
				ad[i * k + kk] = load_value(g->a, g->a_dtype,
					oa + (ta ? kk * g->lda + i :
						   i * g->lda + kk));
		for (uint64_t j = 0; j < n; j++)
			for (uint64_t kk = 0; kk < k; kk++)
				bt[j * k + kk] = load_value(g->b, g->b_dtype,
					ob + (tb ? j * g->ldb + kk :
						   kk * g->ldb + j));

		for (uint64_t i = 0; i < m; i++) {
			for (uint64_t j = 0; j < n; j++) {
				const double *ar = ad + i * k, *br = bt + j * k;
				uint64_t o = bi * mn + i * n + j;
				double v, mag, e;

				if (int8) {
					int64_t acc = 0;

					for (uint64_t kk = 0; kk < k; kk++)
						acc += (int64_t)ar[kk] *
						       (int64_t)br[kk];
					if (g->beta != 0.0f)
						acc += (int64_t)load_value(g->c,
							g->c_dtype,
							oc + i * g->ldc + j);
					v = wrap_int32(acc);
					e = 0.0;
				} else {
					double acc = 0.0, abs_acc = 0.0;

					for (uint64_t kk = 0; kk < k; kk++) {
						double p = ar[kk] * br[kk];

						acc += p;
						abs_acc += fabs(p);
					}
					v = scale * acc;
					mag = fabs(scale) * abs_acc;
					if (g->beta != 0.0f) {
						double c = (double)g->beta *
							load_value(g->c,
								g->c_dtype,
								oc + i * g->ldc
								+ j);
						v += c;
						mag += fabs(c);
					}
					if (g->bias_dtype) {
						double b = load_value(g->bias,
							g->bias_dtype, j);
						v += b;
						mag += fabs(b);
					}
					e = spyre_ref_fp32_err((double)k + 8,
							       mag);
				}
				out[o] = v;
				if (err)
					err[o] = e;
				if (isnan(v) || isnan(amx))
					amx = NAN;
				else if (fabs(v) > amx)
					amx = fabs(v);
				if (!(e <= amx_err))
					amx_err = e;
			}
		}
	}
	if (amax)
		*amax = amx;
	if (amax_err)
		*amax_err = amx_err;
	ret = 0;
out:
	free(ad);
	free(bt);
	return ret;
}

/* ------------------------------------------------------------------ */
/* ELTWISE, REDUCE, ROWOP                                              */
/* ------------------------------------------------------------------ */

SPYRE_API int spyre_ref_eltwise(uint32_t op, uint32_t dtype, uint64_t count,
				const void *a, const void *b, float alpha,
				double *out, double *err)
{
	bool binary = op == SPYRE_ELT_ADD || op == SPYRE_ELT_MUL;

	if (op < SPYRE_ELT_ADD || op > SPYRE_ELT_EXP || !is_wide_float(dtype))
		return -EINVAL;
	if (!count || !a || (binary && !b) || !out)
		return -EINVAL;
	if (!bytes_ok(count, sizeof(double)) ||
	    !bytes_ok(count, spyre_dtype_size(dtype)))
		return -EOVERFLOW;
	for (uint64_t i = 0; i < count; i++) {
		double x = load_value(a, dtype, i);
		double y = binary ? load_value(b, dtype, i) : 0.0;
		double v, e;

		switch (op) {
		case SPYRE_ELT_ADD:
			v = x + y;
			e = spyre_ref_fp32_err(1, fabs(v));
			break;
		case SPYRE_ELT_MUL:
			v = x * y;
			e = spyre_ref_fp32_err(1, fabs(v));
			break;
		case SPYRE_ELT_SCALE:
			v = (double)alpha * x;
			e = spyre_ref_fp32_err(1, fabs(v));
			break;
		case SPYRE_ELT_RELU:
			v = isnan(x) ? x : (x > 0.0 ? x : 0.0);
			e = 0.0;
			break;
		case SPYRE_ELT_GELU:
			/* 1 + erf(t) == erfc(-t), without the cancellation;
			 * the limits: gelu(+inf) = +inf, gelu(-inf) = -0 */
			if (isinf(x))
				v = x > 0.0 ? x : -0.0;
			else
				v = 0.5 * x * erfc(-x / sqrt(2.0));
			e = spyre_ref_fp32_err(8, fabs(x));
			break;
		case SPYRE_ELT_SILU:
			/* the limits: silu(+inf) = +inf, silu(-inf) = -0 */
			if (isinf(x))
				v = x > 0.0 ? x : -0.0;
			else
				v = x / (1.0 + exp(-x));
			e = spyre_ref_fp32_err(8, fabs(v));
			if (x < -88.0)	/* fp32 exp(-x) overflows: -0 */
				e += fabs(v);
			break;
		default: /* SPYRE_ELT_EXP */
			v = exp(x);
			e = spyre_ref_fp32_err(4, fabs(v));
			break;
		}
		out[i] = v;
		if (err)
			err[i] = e;
	}
	return 0;
}

SPYRE_API int spyre_ref_reduce(uint32_t op, uint32_t dtype, uint32_t rows,
			       uint32_t cols, uint64_t ld, const void *src,
			       double *out, double *err)
{
	if ((op != SPYRE_REDUCE_SUM && op != SPYRE_REDUCE_MAX) ||
	    !is_wide_float(dtype) || !rows || !cols || ld < cols || !src ||
	    !out)
		return -EINVAL;
	if (!span_ok(1, 0, rows, ld, cols, spyre_dtype_size(dtype)))
		return -EOVERFLOW;
	for (uint64_t r = 0; r < rows; r++) {
		double acc = op == SPYRE_REDUCE_SUM ? 0.0 : -INFINITY;
		double mag = 0.0;

		for (uint64_t c = 0; c < cols; c++) {
			double x = load_value(src, dtype, r * ld + c);

			if (op == SPYRE_REDUCE_SUM) {
				acc += x;
				mag += fabs(x);
			} else if (isnan(x) || isnan(acc)) {
				acc = NAN;
			} else if (x > acc) {
				acc = x;
			}
		}
		out[r] = acc;
		if (err)
			err[r] = op == SPYRE_REDUCE_SUM ?
				 spyre_ref_fp32_err((double)cols + 1, mag) :
				 0.0;
	}
	return 0;
}

/*
 * LAYERNORM error bound for one row (see the header: fp32 computation,
 * variance from x - mean).  With n = cols, u = 2^-24, exact mean mu,
 * deviations d_i = x_i - mu, variance var = sum d_i^2 / n, r = 1 /
 * sqrt(var + eps), y_i = d_i r g_i + b_i:
 *  - the fp32 mean is off by at most dm = 1.01 (n + 2) u mean|x|;
 *  - an offset e of the mean adds exactly e^2 to the variance (sum d_i
 *    is 0), and the fp32 squares and sum cost (n + 4) roundings of
 *    positive terms: var_f in [var (1 - c), (var + dm^2) (1 + c)], c =
 *    1.01 (n + 6) u;
 *  - eps add, sqrt and division cost 3 more roundings: r_f in
 *    [r_lo, r_hi] from the variance bounds;
 *  - |y_f - y| <= |g| (|d_i| |r_f - r| + (dm + 5u (|d_i| + dm)) r_hi)
 *    + 2u (|y| + |b|), times 1.01, plus the underflow floor.
 */
static void layernorm_err(uint64_t n, double mabs, double var, double eps,
			  const double *d, const double *y, const float *gamma,
			  const float *beta, double *err)
{
	const double u = FP32_U;
	double dm = 1.01 * ((double)n + 2) * u * mabs;
	double c = 1.01 * ((double)n + 6) * u;
	double r = 1.0 / sqrt(var + eps);
	double v_lo = var * (1.0 - c), v_hi = (var + dm * dm) * (1.0 + c);
	double r_lo = (1.0 - 4 * u) / sqrt(v_hi + eps);
	double r_hi = (1.0 + 4 * u) / sqrt(v_lo + eps);
	double dr = fmax(r_hi - r, r - r_lo);

	if (c >= 0.01) {
		for (uint64_t i = 0; i < n; i++)
			err[i] = INFINITY;
		return;
	}
	for (uint64_t i = 0; i < n; i++) {
		double g = gamma ? fabs((double)gamma[i]) : 1.0;
		double b = beta ? fabs((double)beta[i]) : 0.0;
		double ad = fabs(d[i]);
		double e = g * (ad * dr + (dm + 5 * u * (ad + dm)) * r_hi) +
			   2 * u * (fabs(y[i]) + b);

		err[i] = 1.01 * e + spyre_ref_fp32_err((double)n + 8, 0.0);
	}
}

SPYRE_API int spyre_ref_rowop(uint32_t op, uint32_t dtype, uint32_t rows,
			      uint32_t cols, uint64_t ld_src, const void *src,
			      const float *gamma, const float *beta, float eps,
			      double *out, double *err)
{
	uint64_t n = cols, total;
	double *d;

	if (op < SPYRE_ROW_SOFTMAX || op > SPYRE_ROW_RMSNORM ||
	    !is_wide_float(dtype) || !rows || !cols || ld_src < cols ||
	    !src || !out || !(eps >= 0.0f))
		return -EINVAL;
	if (!span_ok(1, 0, rows, ld_src, cols, spyre_dtype_size(dtype)) ||
	    !mul_ok(rows, n, &total) || !bytes_ok(total, sizeof(double)))
		return -EOVERFLOW;
	d = alloc_doubles(n);
	if (!d)
		return -ENOMEM;

	for (uint64_t r = 0; r < rows; r++) {
		double *y = out + r * n, *e = err ? err + r * n : NULL;
		double s = 0.0, s2 = 0.0, mabs = 0.0, mx = -INFINITY;

		for (uint64_t c = 0; c < n; c++) {
			d[c] = load_value(src, dtype, r * ld_src + c);
			s += d[c];
			mabs += fabs(d[c]);
			s2 += d[c] * d[c];
			if (isnan(d[c]) || isnan(mx))
				mx = NAN;
			else if (d[c] > mx)
				mx = d[c];
		}

		if (op == SPYRE_ROW_SOFTMAX) {
			double sum = 0.0;

			for (uint64_t c = 0; c < n; c++) {
				y[c] = exp(d[c] - mx);
				sum += y[c];
			}
			for (uint64_t c = 0; c < n; c++) {
				/* exp(x - max) carries |x - max| u of the
				 * subtraction; the sum n roundings. */
				double dist = fabs(d[c] - mx);

				y[c] /= sum;
				if (e)
					e[c] = spyre_ref_fp32_err(
						(double)n + 8 + dist, fabs(y[c]));
			}
		} else if (op == SPYRE_ROW_LAYERNORM) {
			double mean = s / (double)n, var = 0.0, rs;

			for (uint64_t c = 0; c < n; c++) {
				d[c] -= mean;
				var += d[c] * d[c];
			}
			var /= (double)n;
			rs = 1.0 / sqrt(var + (double)eps);
			for (uint64_t c = 0; c < n; c++)
				y[c] = d[c] * rs *
				       (gamma ? (double)gamma[c] : 1.0) +
				       (beta ? (double)beta[c] : 0.0);
			if (e)
				layernorm_err(n, mabs / (double)n, var,
					      (double)eps, d, y, gamma, beta,
					      e);
		} else { /* SPYRE_ROW_RMSNORM */
			double rs = 1.0 / sqrt(s2 / (double)n + (double)eps);

			for (uint64_t c = 0; c < n; c++) {
				y[c] = d[c] * rs *
				       (gamma ? (double)gamma[c] : 1.0);
				/* positive sum of squares: (n + 1) roundings,
				 * halved by sqrt; then eps, sqrt, div, 2
				 * products. */
				if (e)
					e[c] = spyre_ref_fp32_err(
						(double)n / 2 + 8, fabs(y[c]));
			}
		}
	}
	free(d);
	return 0;
}
