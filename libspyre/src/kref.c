// SPDX-License-Identifier: MIT
/*
 * The reference interpreter of kernel programs (spyre_ref_kernel()):
 * runs a KERNEL launch on host buffers one point at a time, in the
 * contract's sequential order, written from docs/spyre-hw.rst "The
 * KERNEL command" and not from the card's code.  f32 results are computed
 * in double and rounded once to binary32 (exact for + - * / sqrt; the
 * math functions then lie within the contract's ulp bounds of the card's),
 * integers in exact 64-bit two's complement, reductions in the fixed
 * order (16 stripes per 1024-index block, the pairwise tree T).
 */
#include "internal.h"
#include "kprog.h"

#include <spyre/spyre_ref.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE SPYRE_KVAL_NONE
#define T_BOOL SPYRE_KTYPE_BOOL
#define T_I32 SPYRE_KTYPE_I32
#define T_I64 SPYRE_KTYPE_I64
#define T_F32 SPYRE_KTYPE_F32

/* A value: bool and ints in @i (i32 sign-extended), f32 in @f. */
struct kval {
	int64_t i;
	float f;
};

/* One reduction's accumulator. */
struct racc {
	struct kval v;		/* SUM .. XOR_SUM; ARGMAX/MIN value */
	int64_t idx;		/* ARGMAX/MIN */
	bool has;		/* ARGMAX/MIN: an element was taken */
	float mean, m2, w;	/* WELFORD */
};

struct rstate {
	const struct spyre_kinst *in;
	struct racc stripe[16];
	struct racc stack[64];	/* partials of the tree T over blocks */
	uint64_t cnt[64];
	int top;
};

struct kst {
	const struct spyre_ref_kernel_launch *l;
	const struct spyre_kinst *ins;
	uint32_t n;
	uint32_t *endpass;	/* per PASS: its ENDPASS */
	struct kval *v;
	uint8_t *vt;		/* per value: its type */
	uint64_t size[9];
	uint64_t P, R;
	uint64_t pc[6], pt;	/* the point */
	uint64_t rc[3], rl;	/* the reduction index */
	struct spyre_ref_kernel_result *res;
};

static float f32_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* A NaN an instruction returns is the canonical 0x7fc00000. */
static float canon(float x)
{
	return isnan(x) ? f32_of(0x7fc00000u) : x;
}

/* Round a double to binary32 (once), NaN canonical. */
static float rf(double x)
{
	return canon((float)x);
}

static int64_t wrap(unsigned int t, uint64_t x)
{
	return t == T_I32 ? (int64_t)(int32_t)(uint32_t)x : (int64_t)x;
}

static int64_t tmin(unsigned int t)
{
	return t == T_I32 ? INT32_MIN : INT64_MIN;
}

static int64_t tmax(unsigned int t)
{
	return t == T_I32 ? INT32_MAX : INT64_MAX;
}

/* ---- conversions -------------------------------------------------------- */

/* f32 to an int type: truncation; NaN, infinities, out of range: MIN. */
static int64_t f2i(unsigned int t, float f)
{
	double d = f;

	if (t == T_I32) {
		if (!(d > -2147483649.0 && d < 2147483648.0))
			return INT32_MIN;
		return (int64_t)(int32_t)d;
	}
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)d;
}

/* CVT with mod 0: @x of type @s to type @t. */
static struct kval cvt(unsigned int t, unsigned int s, struct kval x)
{
	struct kval r = { 0, 0 };

	switch (t) {
	case T_BOOL:
		r.i = s == T_F32 ? x.f != 0 : x.i != 0;
		break;
	case T_I32:
	case T_I64:
		r.i = s == T_F32 ? f2i(t, x.f) : wrap(t, (uint64_t)x.i);
		break;
	case T_F32:
		r.f = s == T_F32 ? canon(x.f) : (float)x.i;
		break;
	}
	return r;
}

/* Store @x (the dtype's value type) as the bits of an element. */
static uint64_t to_elem(unsigned int dtype, struct kval x, bool sat)
{
	switch (dtype) {
	case SPYRE_DTYPE_U8:
	case SPYRE_DTYPE_INT8:
		return (uint64_t)x.i & 0xff;
	case SPYRE_DTYPE_INT16:
		return (uint64_t)x.i & 0xffff;
	case SPYRE_DTYPE_INT32:
		return (uint64_t)x.i & 0xffffffffu;
	case SPYRE_DTYPE_INT64:
		return (uint64_t)x.i;
	case SPYRE_DTYPE_BOOL:
		return x.i != 0;
	case SPYRE_DTYPE_FP32:
		return bits_of(x.f);
	default:	/* FP16, BF16, FP8 */
		return spyre_ref_encode(dtype, (double)x.f,
					sat ? 0 : SPYRE_CMD_F_NOSAT);
	}
}

/* Load an element's bits as the dtype's value type. */
static struct kval from_elem(unsigned int dtype, uint64_t e)
{
	struct kval r = { 0, 0 };

	switch (dtype) {
	case SPYRE_DTYPE_U8:
		r.i = (int64_t)(e & 0xff);
		break;
	case SPYRE_DTYPE_INT8:
		r.i = (int8_t)(uint8_t)e;
		break;
	case SPYRE_DTYPE_INT16:
		r.i = (int16_t)(uint16_t)e;
		break;
	case SPYRE_DTYPE_INT32:
		r.i = (int32_t)(uint32_t)e;
		break;
	case SPYRE_DTYPE_INT64:
		r.i = (int64_t)e;
		break;
	case SPYRE_DTYPE_BOOL:
		r.i = (e & 0xff) != 0;
		break;
	case SPYRE_DTYPE_FP32:
		r.f = f32_of((uint32_t)e);
		break;
	default:
		r.f = (float)spyre_ref_decode(dtype, (uint32_t)e);
		break;
	}
	return r;
}

static uint64_t mem_read(const void *base, unsigned int dtype, uint64_t off)
{
	size_t es = spyre_cmd_dtype_size(dtype);
	const uint8_t *p = (const uint8_t *)base + off * es;
	uint64_t e = 0;

	memcpy(&e, p, es);	/* little-endian host */
	return e;
}

static void mem_write(void *base, unsigned int dtype, uint64_t off, uint64_t e)
{
	size_t es = spyre_cmd_dtype_size(dtype);

	memcpy((uint8_t *)base + off * es, &e, es);
}

/* ---- arithmetic --------------------------------------------------------- */

static float fminmax(bool max, float a, float b, bool ignore_nan)
{
	if (isnan(a) || isnan(b)) {
		if (ignore_nan && !(isnan(a) && isnan(b)))
			return isnan(a) ? b : a;
		return canon(NAN);
	}
	if (a == b)	/* -0 orders below +0 */
		return (signbit(a) != 0) == max ? b : a;
	return (a < b) == max ? b : a;
}

static float f_floordiv(float a, float b)
{
	float m, d, q;

	if (b == 0)
		return rf((double)a / b);
	m = (float)fmod(a, b);
	d = rf((double)rf((double)a - m) / b);
	if (m != 0 && ((b < 0) != (m < 0)))
		d = rf((double)d - 1.0);
	if (d == 0)
		return copysignf(0.0f, rf((double)a / b));
	q = floorf(d);
	if (rf((double)d - q) > 0.5f)
		q = rf((double)q + 1.0);
	return canon(q);
}

static float f_rem(float a, float b)
{
	float m = (float)fmod(a, b);

	if (m != 0 && ((b < 0) != (m < 0)))
		m = rf((double)m + b);
	return canon(m);
}

static int64_t i_pow(unsigned int t, int64_t a, int64_t b)
{
	uint64_t r = 1, x = (uint64_t)a;

	if (b < 0) {
		if (a == 1)
			return 1;
		if (a == -1)
			return (b & 1) ? -1 : 1;
		return 0;
	}
	for (uint64_t e = (uint64_t)b; e; e >>= 1) {
		if (e & 1)
			r *= x;
		x *= x;
	}
	return wrap(t, r);
}

/*
 * The inverse error function (libm has none): bisection on erf to a
 * bracket of 2^-10, then Newton's method, on erfc above |y| = 1/2 where
 * 1 - |y| is exact.
 */
static double erfinv_d(double y)
{
	double t = fabs(y), lo = 0, hi = 6, x, r;
	int i;

	if (isnan(y) || t > 1)
		return NAN;
	if (t == 1)
		return copysign(INFINITY, y);
	if (t == 0)
		return y;
	for (i = 0; i < 13; i++) {
		x = 0.5 * (lo + hi);
		if (erf(x) < t)
			lo = x;
		else
			hi = x;
	}
	x = 0.5 * (lo + hi);
	for (i = 0; i < 6; i++) {
		r = t <= 0.5 ? erf(x) - t : (1 - t) - erfc(x);
		x -= r / (1.1283791670955126 * exp(-x * x));
	}
	return copysign(x, y);
}

static struct kval arith(unsigned int op, unsigned int t, unsigned int mod,
			 struct kval a, struct kval b, struct kval c)
{
	struct kval r = { 0, 0 };
	double fa = a.f, fb = b.f;
	unsigned int w = t == T_I32 ? 32 : 64;

	if (t == T_F32) {
		switch (op) {
		case SPYRE_KOP_ADD: r.f = rf(fa + fb); break;
		case SPYRE_KOP_SUB: r.f = rf(fa - fb); break;
		case SPYRE_KOP_MUL: r.f = rf(fa * fb); break;
		case SPYRE_KOP_DIV: r.f = rf(fa / fb); break;
		case SPYRE_KOP_TRUNCDIV: r.f = canon(truncf(rf(fa / fb))); break;
		case SPYRE_KOP_FLOORDIV: r.f = f_floordiv(a.f, b.f); break;
		case SPYRE_KOP_FMOD: r.f = rf(fmod(fa, fb)); break;
		case SPYRE_KOP_REM: r.f = f_rem(a.f, b.f); break;
		case SPYRE_KOP_FMA: r.f = canon(fmaf(a.f, b.f, c.f)); break;
		case SPYRE_KOP_NEG: r.f = f32_of(bits_of(a.f) ^ 0x80000000u); break;
		case SPYRE_KOP_ABS: r.f = f32_of(bits_of(a.f) & 0x7fffffffu); break;
		case SPYRE_KOP_MIN:
			r.f = fminmax(false, a.f, b.f, mod & SPYRE_KMOD_IGNORE_NAN);
			break;
		case SPYRE_KOP_MAX:
			r.f = fminmax(true, a.f, b.f, mod & SPYRE_KMOD_IGNORE_NAN);
			break;
		case SPYRE_KOP_CLAMP:
			r.f = fminmax(false, fminmax(true, a.f, b.f, false), c.f,
				      false);
			break;
		case SPYRE_KOP_POW: r.f = rf(pow(fa, fb)); break;
		case SPYRE_KOP_EXP: r.f = rf(exp(fa)); break;
		case SPYRE_KOP_LOG: r.f = rf(log(fa)); break;
		case SPYRE_KOP_SQRT: r.f = rf(sqrt(fa)); break;
		case SPYRE_KOP_RSQRT: r.f = rf(1.0 / (double)rf(sqrt(fa))); break;
		case SPYRE_KOP_RECIP: r.f = rf(1.0 / fa); break;
		case SPYRE_KOP_TANH: r.f = rf(tanh(fa)); break;
		case SPYRE_KOP_SIGMOID: {
			float e = rf(exp(-fa));

			r.f = rf(1.0 / (double)rf(1.0 + e));
			break;
		}
		case SPYRE_KOP_ERF: r.f = rf(erf(fa)); break;
		case SPYRE_KOP_EXP2: r.f = rf(exp2(fa)); break;
		case SPYRE_KOP_EXPM1: r.f = rf(expm1(fa)); break;
		case SPYRE_KOP_LOG2: r.f = rf(log2(fa)); break;
		case SPYRE_KOP_LOG10: r.f = rf(log10(fa)); break;
		case SPYRE_KOP_LOG1P: r.f = rf(log1p(fa)); break;
		case SPYRE_KOP_SIN: r.f = rf(sin(fa)); break;
		case SPYRE_KOP_COS: r.f = rf(cos(fa)); break;
		case SPYRE_KOP_TAN: r.f = rf(tan(fa)); break;
		case SPYRE_KOP_ASIN: r.f = rf(asin(fa)); break;
		case SPYRE_KOP_ACOS: r.f = rf(acos(fa)); break;
		case SPYRE_KOP_ATAN: r.f = rf(atan(fa)); break;
		case SPYRE_KOP_ATAN2: r.f = rf(atan2(fa, fb)); break;
		case SPYRE_KOP_SINH: r.f = rf(sinh(fa)); break;
		case SPYRE_KOP_COSH: r.f = rf(cosh(fa)); break;
		case SPYRE_KOP_ASINH: r.f = rf(asinh(fa)); break;
		case SPYRE_KOP_ACOSH: r.f = rf(acosh(fa)); break;
		case SPYRE_KOP_ATANH: r.f = rf(atanh(fa)); break;
		case SPYRE_KOP_ERFC: r.f = rf(erfc(fa)); break;
		case SPYRE_KOP_ERFINV: r.f = rf(erfinv_d(fa)); break;
		case SPYRE_KOP_FLOOR: r.f = rf(floor(fa)); break;
		case SPYRE_KOP_CEIL: r.f = rf(ceil(fa)); break;
		case SPYRE_KOP_ROUND: r.f = rf(nearbyint(fa)); break;
		case SPYRE_KOP_TRUNC: r.f = rf(trunc(fa)); break;
		/* PyTorch's (0 < a) - (a < 0): NaN and -0 give +0 */
		case SPYRE_KOP_SIGN: r.f = (float)((0 < fa) - (fa < 0)); break;
		case SPYRE_KOP_COPYSIGN: r.f = rf(copysign(fa, fb)); break;
		case SPYRE_KOP_HYPOT: r.f = rf(hypot(fa, fb)); break;
		case SPYRE_KOP_LGAMMA: r.f = rf(lgamma(fa)); break;
		}
		return r;
	}
	if (t == T_BOOL) {
		switch (op) {
		case SPYRE_KOP_AND: r.i = a.i && b.i; break;
		case SPYRE_KOP_OR: r.i = a.i || b.i; break;
		case SPYRE_KOP_XOR: r.i = !a.i != !b.i; break;
		case SPYRE_KOP_NOT: r.i = !a.i; break;
		}
		return r;
	}
	/* i32 / i64 */
	switch (op) {
	case SPYRE_KOP_ADD: r.i = wrap(t, (uint64_t)a.i + (uint64_t)b.i); break;
	case SPYRE_KOP_SUB: r.i = wrap(t, (uint64_t)a.i - (uint64_t)b.i); break;
	case SPYRE_KOP_MUL: r.i = wrap(t, (uint64_t)a.i * (uint64_t)b.i); break;
	case SPYRE_KOP_TRUNCDIV:
	case SPYRE_KOP_FLOORDIV:
		if (b.i == 0)
			r.i = -1;
		else if (a.i == tmin(t) && b.i == -1)
			r.i = tmin(t);
		else {
			r.i = a.i / b.i;
			if (op == SPYRE_KOP_FLOORDIV && a.i % b.i &&
			    ((a.i < 0) != (b.i < 0)))
				r.i--;
		}
		break;
	case SPYRE_KOP_FMOD:
	case SPYRE_KOP_REM:
		if (b.i == 0)
			r.i = a.i;
		else if (b.i == -1)
			r.i = 0;
		else {
			r.i = a.i % b.i;
			if (op == SPYRE_KOP_REM && r.i &&
			    ((r.i < 0) != (b.i < 0)))
				r.i += b.i;
		}
		break;
	case SPYRE_KOP_FMA:
		r.i = wrap(t, (uint64_t)a.i * (uint64_t)b.i + (uint64_t)c.i);
		break;
	case SPYRE_KOP_NEG: r.i = wrap(t, 0 - (uint64_t)a.i); break;
	case SPYRE_KOP_ABS:
		r.i = a.i < 0 ? wrap(t, 0 - (uint64_t)a.i) : a.i;
		break;
	case SPYRE_KOP_MIN: r.i = a.i < b.i ? a.i : b.i; break;
	case SPYRE_KOP_MAX: r.i = a.i > b.i ? a.i : b.i; break;
	case SPYRE_KOP_CLAMP:
		r.i = a.i > b.i ? a.i : b.i;
		r.i = r.i < c.i ? r.i : c.i;
		break;
	case SPYRE_KOP_POW: r.i = i_pow(t, a.i, b.i); break;
	case SPYRE_KOP_AND: r.i = a.i & b.i; break;
	case SPYRE_KOP_OR: r.i = a.i | b.i; break;
	case SPYRE_KOP_XOR: r.i = a.i ^ b.i; break;
	case SPYRE_KOP_NOT: r.i = ~a.i; break;
	case SPYRE_KOP_SHL:
		r.i = (b.i < 0 || b.i >= (int64_t)w) ? 0 :
		      wrap(t, (uint64_t)a.i << b.i);
		break;
	case SPYRE_KOP_SHR:
		r.i = (b.i < 0 || b.i >= (int64_t)w) ? (a.i < 0 ? -1 : 0) :
		      a.i >> b.i;
		break;
	}
	return r;
}

static bool cmp(unsigned int pred, unsigned int t, struct kval a, struct kval b)
{
	if (t == T_F32) {
		switch (pred) {
		case SPYRE_KCMP_EQ: return a.f == b.f;
		case SPYRE_KCMP_NE: return a.f != b.f;
		case SPYRE_KCMP_LT: return a.f < b.f;
		case SPYRE_KCMP_LE: return a.f <= b.f;
		case SPYRE_KCMP_GT: return a.f > b.f;
		default: return a.f >= b.f;
		}
	}
	switch (pred) {
	case SPYRE_KCMP_EQ: return a.i == b.i;
	case SPYRE_KCMP_NE: return a.i != b.i;
	case SPYRE_KCMP_LT: return a.i < b.i;
	case SPYRE_KCMP_LE: return a.i <= b.i;
	case SPYRE_KCMP_GT: return a.i > b.i;
	default: return a.i >= b.i;
	}
}

/* ---- reductions --------------------------------------------------------- */

static void racc_identity(struct racc *a, unsigned int kind, unsigned int t)
{
	memset(a, 0, sizeof(*a));
	switch (kind) {
	case SPYRE_KRED_PROD:
		if (t == T_F32)
			a->v.f = 1.0f;
		else
			a->v.i = 1;
		break;
	case SPYRE_KRED_MAX:
		if (t == T_F32)
			a->v.f = -INFINITY;
		else
			a->v.i = tmin(t);
		break;
	case SPYRE_KRED_MIN:
		if (t == T_F32)
			a->v.f = INFINITY;
		else
			a->v.i = tmax(t);
		break;
	case SPYRE_KRED_ALL:
		a->v.i = 1;
		break;
	}
}

/* ARGMAX (@max) / ARGMIN: does value @b beat value @a (type @t)? */
static bool arg_beats(bool max, unsigned int t, struct kval a, struct kval b)
{
	if (t == T_F32) {
		bool na = isnan(a.f), nb = isnan(b.f);

		if (na || nb)
			return nb && !na;
		return max ? b.f > a.f : b.f < a.f;
	}
	return max ? b.i > a.i : b.i < a.i;
}

/* @x = @x combined with @y (@x holds the earlier indices). */
static void racc_combine(struct racc *x, const struct racc *y,
			 unsigned int kind, unsigned int t, unsigned int st)
{
	switch (kind) {
	case SPYRE_KRED_SUM:
	case SPYRE_KRED_PROD:
		x->v = arith(kind == SPYRE_KRED_SUM ? SPYRE_KOP_ADD : SPYRE_KOP_MUL,
			     t, 0, x->v, y->v, y->v);
		break;
	case SPYRE_KRED_MAX:
	case SPYRE_KRED_MIN:
		x->v = arith(kind == SPYRE_KRED_MAX ? SPYRE_KOP_MAX : SPYRE_KOP_MIN,
			     t, 0, x->v, y->v, y->v);
		break;
	case SPYRE_KRED_ARGMAX:
	case SPYRE_KRED_ARGMIN:
		if (!y->has)
			break;
		if (!x->has || arg_beats(kind == SPYRE_KRED_ARGMAX, st, x->v,
					 y->v) ||
		    (!arg_beats(kind == SPYRE_KRED_ARGMAX, st, y->v, x->v) &&
		     y->idx < x->idx))
			*x = *y;
		break;
	case SPYRE_KRED_ANY:
		x->v.i = x->v.i || y->v.i;
		break;
	case SPYRE_KRED_ALL:
		x->v.i = x->v.i && y->v.i;
		break;
	case SPYRE_KRED_XOR_SUM:
		x->v.i = x->v.i ^ y->v.i;
		break;
	case SPYRE_KRED_WELFORD:
	case SPYRE_KRED_WELFORD_COMBINE: {
		float w, d, f;

		if (y->w == 0)
			break;
		if (x->w == 0) {
			*x = *y;
			break;
		}
		w = rf((double)x->w + y->w);
		d = rf((double)y->mean - x->mean);
		f = rf((double)y->w / w);
		x->mean = rf((double)x->mean + (double)rf((double)d * f));
		x->m2 = rf((double)rf((double)x->m2 + y->m2) +
			   (double)rf((double)rf((double)rf((double)d * d) *
						 x->w) * f));
		x->w = w;
		break;
	}
	}
}

/* One element @a (b, c for WELFORD_COMBINE) at reduction index @r. */
static void racc_add(struct racc *x, unsigned int kind, unsigned int t,
		     unsigned int st, struct kval a, struct kval b,
		     struct kval c, uint64_t r)
{
	struct racc y;

	memset(&y, 0, sizeof(y));
	switch (kind) {
	case SPYRE_KRED_WELFORD: {
		float d;

		x->w = rf((double)x->w + 1.0);
		d = rf((double)a.f - x->mean);
		x->mean = rf((double)x->mean + (double)rf((double)d / x->w));
		x->m2 = rf((double)x->m2 +
			   (double)rf((double)d * (double)rf((double)a.f -
							     x->mean)));
		return;
	}
	case SPYRE_KRED_WELFORD_COMBINE:
		y.mean = a.f;
		y.m2 = b.f;
		y.w = c.f;
		break;
	default:
		y.v = a;
		y.idx = (int64_t)r;
		y.has = true;
	}
	racc_combine(x, &y, kind, t, st);
}

/* The tree T over @n accumulators, in place; the result in a[0]. */
static void tree(struct racc *a, unsigned int n, unsigned int kind,
		 unsigned int t, unsigned int st)
{
	while (n > 1) {
		unsigned int m = 0;

		for (unsigned int i = 0; i + 1 < n; i += 2) {
			racc_combine(&a[i], &a[i + 1], kind, t, st);
			a[m++] = a[i];
		}
		if (n & 1)
			a[m++] = a[n - 1];
		n = m;
	}
}

/* ---- part 2: Philox4x32-10, scans ---------------------------------------- */

/*
 * Philox4x32-10 of counter @ctr under key @key: ten rounds, the key
 * bumped by the Weyl constants between them.
 */
SPYRE_API void spyre_ref_philox4x32_10(uint32_t ctr[4], const uint32_t key[2])
{
	static const uint32_t mul[2] = { 0xD2511F53u, 0xCD9E8D57u };
	static const uint32_t weyl[2] = { 0x9E3779B9u, 0xBB67AE85u };
	uint32_t k[2] = { key[0], key[1] };

	for (int round = 0; round < 10; round++) {
		uint64_t lo = (uint64_t)mul[0] * ctr[0];
		uint64_t hi = (uint64_t)mul[1] * ctr[2];
		uint32_t out[4] = {
			(uint32_t)(hi >> 32) ^ ctr[1] ^ k[0], (uint32_t)hi,
			(uint32_t)(lo >> 32) ^ ctr[3] ^ k[1], (uint32_t)lo,
		};

		memcpy(ctr, out, sizeof(out));
		k[0] += weyl[0];
		k[1] += weyl[1];
	}
}

/*
 * RAND (docs/spyre-hw.rst): element @n of (@seed, @offset).  The block is
 * n / 4; its counter the block's 64 bits then the offset's, its key the
 * seed's 64 bits, low words first.  NORMAL's pair is words 2 h and 2 h +
 * 1, h = (n / 2) % 2: the cosine for an even n, the sine for an odd one.
 */
static struct kval rand_value(unsigned int kind, uint64_t seed,
			      uint64_t offset, uint64_t n)
{
	uint64_t blk = n / 4, h = (n / 2) % 2;
	uint32_t w[4] = { (uint32_t)blk, (uint32_t)(blk >> 32),
			  (uint32_t)offset, (uint32_t)(offset >> 32) };
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	struct kval r = { 0, 0 };
	float u1, u2, l, t, c;

	spyre_ref_philox4x32_10(w, key);
	switch (kind) {
	case SPYRE_KRAND_BITS:
		r.i = (int32_t)w[n % 4];
		return r;
	case SPYRE_KRAND_UNIFORM:
		r.f = (float)(w[n % 4] >> 8) / 16777216.0f;
		return r;
	default:
		u1 = (float)((w[2 * h] >> 8) + 1) / 16777216.0f;
		u2 = (float)(w[2 * h + 1] >> 8) / 16777216.0f;
		l = rf(log((double)u1));
		t = rf(sqrt((double)(-2.0f * l)));
		c = rf((double)6.28318548f * (double)u2);
		c = rf(n % 2 ? sin((double)c) : cos((double)c));
		r.f = rf((double)t * (double)c);
		return r;
	}
}

/* A SCAN's running value over one point's reduction indices. */
struct sstate {
	bool has;
	struct kval v;
	int64_t idx;
};

/*
 * Take element @x (of type @ta) at reduction index @r into @q (kind
 * @kind); then the lane's result of type @t.
 */
static struct kval scan_step(struct sstate *q, unsigned int kind,
			     unsigned int t, unsigned int ta, bool active,
			     struct kval x, uint64_t r)
{
	bool arg = kind == SPYRE_KRED_ARGMAX || kind == SPYRE_KRED_ARGMIN;
	bool max = kind == SPYRE_KRED_MAX || kind == SPYRE_KRED_ARGMAX;
	struct kval out = { 0, 0 };

	if (active) {
		bool take = true;

		if (!q->has) {
			q->v = x;
		} else if (ta == T_F32) {
			double a = q->v.f, b = x.f;

			if (kind == SPYRE_KRED_SUM)
				q->v.f = (float)(a + b);
			else if (kind == SPYRE_KRED_PROD)
				q->v.f = (float)(a * b);
			else if (isnan(x.f))
				q->v = x;
			else if (isnan(q->v.f))
				take = false;
			else if (max ? x.f >= q->v.f : x.f <= q->v.f)
				q->v = x;
			else
				take = false;
		} else {
			uint64_t a = (uint64_t)q->v.i, b = (uint64_t)x.i;

			if (kind == SPYRE_KRED_SUM)
				q->v.i = wrap(ta, a + b);
			else if (kind == SPYRE_KRED_PROD)
				q->v.i = wrap(ta, a * b);
			else if (max ? x.i >= q->v.i : x.i <= q->v.i)
				q->v = x;
			else
				take = false;
		}
		if (take)
			q->idx = (int64_t)r;
		q->has = true;
	}
	if (arg) {
		out.i = q->has ? q->idx : 0;
	} else if (q->has) {
		out = q->v;
		out.f = canon(out.f);
	} else if (t == T_F32) {
		out.f = kind == SPYRE_KRED_SUM ? 0.0f :
			kind == SPYRE_KRED_PROD ? 1.0f :
			kind == SPYRE_KRED_MAX ? -INFINITY : INFINITY;
	} else {
		out.i = kind == SPYRE_KRED_SUM ? 0 : kind == SPYRE_KRED_PROD ? 1 :
			kind == SPYRE_KRED_MAX ? tmin(t) : tmax(t);
	}
	return out;
}

/* ---- the interpreter ---------------------------------------------------- */

static int oob(struct kst *s, uint32_t i, unsigned int operand, bool write,
	       int64_t off)
{
	s->res->status = SPYRE_STATUS_OUT_OF_BOUNDS;
	s->res->detail = operand | (write ? SPYRE_KDETAIL_WRITE : 0) |
			 (uint64_t)i << 32;
	s->res->detail2 = (uint64_t)off;
	return 1;
}

static uint64_t dim_value(const struct kst *s, unsigned int d, bool size)
{
	if (d < SPYRE_KDIM_R0)
		return size ? s->size[d] : s->pc[d];
	if (d < SPYRE_KDIM_R0 + 3)
		return size ? s->size[d] : s->rc[d - SPYRE_KDIM_R0];
	if (d == SPYRE_KDIM_POINT)
		return size ? s->P : s->pt;
	return size ? s->R : s->rl;
}

static unsigned int vtype_of(const struct kst *s, uint16_t v);

/* Run instruction @i (not PASS, ENDPASS or REDUCE); 1 ends the job. */
static int exec(struct kst *s, uint32_t i)
{
	const struct spyre_kinst *in = &s->ins[i];
	const struct spyre_ref_kernel_launch *l = s->l;
	struct kval z = { 0, 0 }, a, b, c, r = { 0, 0 };
	unsigned int t = in->type;

	if (in->op == SPYRE_KOP_CONST) {	/* b, c, imm: the immediate */
		uint64_t u = (uint64_t)in->b | (uint64_t)in->c << 16 |
			     (uint64_t)in->imm << 32;

		if (t == T_F32)
			r.f = f32_of((uint32_t)u);
		else
			r.i = t == T_I32 ? (int32_t)(uint32_t)u : (int64_t)u;
		s->v[in->dst] = r;
		return 0;
	}
	a = in->a != NONE ? s->v[in->a] : z;
	b = in->b != NONE ? s->v[in->b] : z;
	c = in->c != NONE ? s->v[in->c] : z;
	switch (in->op) {
	case SPYRE_KOP_PARAM: {
		uint64_t u = l->params[in->imm];

		if (t == T_F32)
			r.f = f32_of((uint32_t)u);
		else if (t == T_BOOL)
			r.i = u != 0;
		else
			r.i = wrap(t, u);
		break;
	}
	case SPYRE_KOP_IDX:
	case SPYRE_KOP_SIZE:
		r.i = wrap(t, dim_value(s, in->imm, in->op == SPYRE_KOP_SIZE));
		break;
	case SPYRE_KOP_AFFINE: {
		uint64_t acc = in->a != NONE ? (uint64_t)a.i : 0;
		unsigned int j = 0;

		for (unsigned int d = 0; d < 9; d++) {
			if (!(in->mod & (1u << d)))
				continue;
			acc += dim_value(s, d, false) * l->params[in->imm + j++];
		}
		r.i = wrap(t, acc);
		break;
	}
	case SPYRE_KOP_CHECK:
		if ((in->b == NONE || b.i) && !a.i) {
			s->res->status = SPYRE_STATUS_ASSERT;
			s->res->detail = (uint64_t)i << 32;
			s->res->detail2 = 0;
			return 1;
		}
		return 0;
	case SPYRE_KOP_LOAD: {
		const struct spyre_ref_kernel_operand *o = &l->operands[in->imm];

		if (in->b != NONE && !b.i) {
			r = in->c != NONE ? c : z;
			break;
		}
		if (a.i < 0 || (uint64_t)a.i >= o->extent)
			return oob(s, i, in->imm, false, a.i);
		r = from_elem(o->dtype, mem_read(o->data, o->dtype,
						 (uint64_t)a.i));
		break;
	}
	case SPYRE_KOP_STORE: {
		const struct spyre_ref_kernel_operand *o = &l->operands[in->imm];

		if (in->b != NONE && !b.i)
			return 0;
		if (a.i < 0 || (uint64_t)a.i >= o->extent)
			return oob(s, i, in->imm, true, a.i);
		mem_write(o->data, o->dtype, (uint64_t)a.i,
			  to_elem(o->dtype, c, in->mod & SPYRE_KMOD_SAT));
		return 0;
	}
	case SPYRE_KOP_SCATTER: {
		const struct spyre_ref_kernel_operand *o = &l->operands[in->imm];
		unsigned int vt = spyre__kdtype_vtype(o->dtype);

		if (in->b != NONE && !b.i)
			return 0;
		if (a.i < 0 || (uint64_t)a.i >= o->extent)
			return oob(s, i, in->imm, true, a.i);
		if ((in->mod & 0xff) == SPYRE_KSCAT_ADD) {
			struct kval old = from_elem(o->dtype,
				mem_read(o->data, o->dtype, (uint64_t)a.i));

			if (vt == T_F32)
				c.f = rf((double)old.f + (double)c.f);
			else
				c.i = wrap(vt, (uint64_t)old.i + (uint64_t)c.i);
		}
		mem_write(o->data, o->dtype, (uint64_t)a.i,
			  to_elem(o->dtype, c, in->mod & SPYRE_KMOD_SAT));
		return 0;
	}
	case SPYRE_KOP_RAND:
		r = rand_value(in->mod, (uint64_t)a.i, (uint64_t)b.i,
			       (uint64_t)c.i);
		break;
	case SPYRE_KOP_CMP:
		r.i = cmp(in->mod, vtype_of(s, in->a), a, b);
		break;
	case SPYRE_KOP_SELECT:
		r = a.i ? b : c;
		break;
	case SPYRE_KOP_CVT: {
		unsigned int dt = in->mod & 0xff;

		r = cvt(t, vtype_of(s, in->a), a);
		if (dt && dt != SPYRE_DTYPE_FP32) {
			r = from_elem(dt, to_elem(dt, r, in->mod & SPYRE_KMOD_SAT));
			if (t == T_F32)
				r.f = canon(r.f);
		}
		break;
	}
	case SPYRE_KOP_BITCAST: {
		uint32_t u = vtype_of(s, in->a) == T_F32 ? bits_of(a.f) :
			     (uint32_t)a.i;

		if (t == T_F32)
			r.f = f32_of(u);
		else
			r.i = (int32_t)u;
		break;
	}
	case SPYRE_KOP_ISNAN:
		r.i = isnan(a.f) != 0;
		break;
	case SPYRE_KOP_ISINF:
		r.i = isinf(a.f) != 0;
		break;
	default:
		r = arith(in->op, t, in->mod, a, b, c);
		break;
	}
	s->v[in->dst] = r;
	return 0;
}

/* The type of value @v. */
static unsigned int vtype_of(const struct kst *s, uint16_t v)
{
	return s->vt[v];
}

static void set_rcoords(struct kst *s, uint64_t r)
{
	unsigned int nr = s->l->nrdims;

	s->rl = r;
	for (int d = (int)nr - 1; d >= 0; d--) {
		uint64_t sz = s->size[SPYRE_KDIM_R0 + d];

		s->rc[d] = sz ? r % sz : 0;
		r = sz ? r / sz : 0;
	}
}

/* Run the pass from PASS @p to its ENDPASS @e; 1 ends the job. */
static int run_pass(struct kst *s, uint32_t p, uint32_t e, uint8_t *vt)
{
	struct rstate rs[SPYRE_KERNEL_MAX_REDUCE];
	struct sstate ss[SPYRE_KERNEL_MAX_SCAN];
	unsigned int nr = 0;

	memset(ss, 0, sizeof(ss));	/* a scan starts with nothing */

	for (uint32_t i = p + 1; i < e; i++) {
		if (s->ins[i].op != SPYRE_KOP_REDUCE)
			continue;
		rs[nr].in = &s->ins[i];
		rs[nr].top = 0;
		for (int k = 0; k < 16; k++)
			racc_identity(&rs[nr].stripe[k], s->ins[i].mod & 0xff,
				      s->ins[i].type);
		nr++;
	}
	for (uint64_t r = 0; r < s->R; r++) {
		unsigned int k = 0, sk = 0;

		set_rcoords(s, r);
		for (uint32_t i = p + 1; i < e; i++) {
			const struct spyre_kinst *in = &s->ins[i];
			struct kval z = { 0, 0 };

			if (in->op == SPYRE_KOP_SCAN) {
				bool act = in->imm == NONE || s->v[in->imm].i;

				s->v[in->dst] = scan_step(&ss[sk++],
							  in->mod & 0xff,
							  in->type, vt[in->a],
							  act, s->v[in->a], r);
				continue;
			}
			if (in->op != SPYRE_KOP_REDUCE) {
				if (exec(s, i))
					return 1;
				continue;
			}
			if (in->imm == NONE || s->v[in->imm].i)
				racc_add(&rs[k].stripe[r % 16], in->mod & 0xff,
					 in->type, vt[in->a], s->v[in->a],
					 in->b != NONE ? s->v[in->b] : z,
					 in->c != NONE ? s->v[in->c] : z, r);
			k++;
		}
		if (r % 1024 == 1023 || r == s->R - 1) {
			for (unsigned int j = 0; j < nr; j++) {
				struct rstate *q = &rs[j];
				unsigned int kind = q->in->mod & 0xff;

				tree(q->stripe, 16, kind, q->in->type,
				     vt[q->in->a]);
				q->stack[q->top] = q->stripe[0];
				q->cnt[q->top++] = 1;
				while (q->top > 1 &&
				       q->cnt[q->top - 2] == q->cnt[q->top - 1]) {
					racc_combine(&q->stack[q->top - 2],
						     &q->stack[q->top - 1], kind,
						     q->in->type, vt[q->in->a]);
					q->cnt[q->top - 2] *= 2;
					q->top--;
				}
				for (int m = 0; m < 16; m++)
					racc_identity(&q->stripe[m], kind,
						      q->in->type);
			}
		}
	}
	for (unsigned int j = 0; j < nr; j++) {
		struct rstate *q = &rs[j];
		const struct spyre_kinst *in = q->in;
		unsigned int kind = in->mod & 0xff;
		struct racc res;

		if (q->top) {
			res = q->stack[q->top - 1];
			for (int m = q->top - 2; m >= 0; m--) {
				struct racc left = q->stack[m];

				racc_combine(&left, &res, kind, in->type,
					     vt[in->a]);
				res = left;
			}
		} else {
			racc_identity(&res, kind, in->type);
		}
		if (kind == SPYRE_KRED_WELFORD ||
		    kind == SPYRE_KRED_WELFORD_COMBINE) {
			s->v[in->dst].f = res.mean;
			s->v[in->dst + 1].f = res.m2;
			s->v[in->dst + 2].f = res.w;
		} else if (kind == SPYRE_KRED_ARGMAX ||
			   kind == SPYRE_KRED_ARGMIN) {
			s->v[in->dst].i = res.has ? res.idx : 0;
		} else {
			s->v[in->dst] = res.v;
		}
	}
	return 0;
}

static int set_status(struct spyre_ref_kernel_result *res, uint32_t status,
		      uint64_t detail)
{
	res->status = status;
	res->detail = detail;
	res->detail2 = 0;
	return 0;
}

SPYRE_API int spyre_ref_kernel(const struct spyre_ref_kernel_launch *l,
			       struct spyre_ref_kernel_result *res)
{
	struct spyre_ref_kernel_result r = { 0, 0, 0, 0 };
	const struct spyre_kprog_header *h;
	struct spyre__ksig sig;
	struct kst s;
	uint64_t detail, pr;
	uint8_t *vt = NULL;
	int ret;

	if (!l || !res || (l->noperands && !l->operands) ||
	    (l->nparams && !l->params) || (l->prog_size && !l->prog))
		return -EINVAL;
	memset(&s, 0, sizeof(s));
	s.l = l;
	s.res = &r;
	/* 1. the command */
	if (l->noperands > SPYRE_KERNEL_MAX_OPERANDS ||
	    l->nparams > SPYRE_KERNEL_MAX_PARAMS ||
	    l->npdims > SPYRE_KERNEL_MAX_PDIMS ||
	    l->nrdims > SPYRE_KERNEL_MAX_RDIMS)
		goto bad_command;
	for (unsigned int i = 0; i < 9; i++) {
		uint64_t v = l->size[i];
		bool used = i < SPYRE_KDIM_R0 ? i < l->npdims :
			    i - SPYRE_KDIM_R0 < l->nrdims;

		if (!used && v)
			goto bad_command;
		if (v >> 63) {
			if ((v & ~(1ull << 63)) >= l->nparams)
				goto bad_command;
			v = l->params[v & 63];
		}
		s.size[i] = v;
	}
	/* 2. the operands */
	memset(&sig, 0, sizeof(sig));
	for (unsigned int i = 0; i < l->noperands; i++) {
		const struct spyre_ref_kernel_operand *o = &l->operands[i];

		if (spyre__kdtype_vtype(o->dtype) == SPYRE_KTYPE_NONE || o->pad) {
			*res = r;
			return set_status(res, SPYRE_STATUS_INVALID_OPERAND, 0);
		}
		if (o->extent && !o->data)
			return -EINVAL;
		sig.dtype[i] = (uint8_t)o->dtype;
	}
	/* 3. the iteration space */
	s.P = 1;
	for (unsigned int i = 0; i < l->npdims; i++)
		if (__builtin_mul_overflow(s.P, s.size[i], &s.P))
			goto limit;
	s.R = 1;
	for (unsigned int i = 0; i < l->nrdims; i++)
		if (__builtin_mul_overflow(s.R, s.size[SPYRE_KDIM_R0 + i], &s.R))
			goto limit;
	if (__builtin_mul_overflow(s.P, s.R ? s.R : 1, &pr) ||
	    pr > SPYRE_KERNEL_MAX_ITERS)
		goto limit;
	/* 4., 5. the program */
	sig.noperands = l->noperands;
	sig.nparams = l->nparams;
	sig.npdims = l->npdims;
	sig.nrdims = l->nrdims;
	ret = spyre__kverify_program(l->prog, l->prog_size, &sig, &detail);
	if (ret < 0)
		return ret;
	if (ret) {
		*res = r;
		return set_status(res, (uint32_t)ret, detail);
	}
	h = l->prog;
	s.ins = (const struct spyre_kinst *)(h + 1);
	s.n = h->ninsts;
	s.v = calloc(h->nvalues ? h->nvalues : 1, sizeof(*s.v));
	s.endpass = calloc(s.n ? s.n : 1, sizeof(*s.endpass));
	vt = calloc(h->nvalues ? h->nvalues : 1, 1);
	s.vt = vt;
	if (!s.v || !s.endpass || !vt) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0, open = 0; i < s.n; i++) {
		unsigned int nd = spyre__kinst_ndefs(&s.ins[i]);

		for (unsigned int j = 0; j < nd; j++)
			vt[s.ins[i].dst + j] = s.ins[i].type;
		if (s.ins[i].op == SPYRE_KOP_PASS)
			open = i;
		else if (s.ins[i].op == SPYRE_KOP_ENDPASS)
			s.endpass[open] = i;
	}
	/* 6. run, points in increasing linear order */
	for (uint64_t pt = 0; pt < s.P; pt++) {
		uint64_t q = pt;

		s.pt = pt;
		for (int d = (int)l->npdims - 1; d >= 0; d--) {
			s.pc[d] = q % s.size[d];
			q /= s.size[d];
		}
		for (uint32_t i = 0; i < s.n; i++) {
			if (s.ins[i].op == SPYRE_KOP_PASS) {
				if (run_pass(&s, i, s.endpass[i], vt))
					goto done;
				i = s.endpass[i];
				continue;
			}
			if (exec(&s, i))
				goto done;
		}
	}
done:
	*res = r;
	ret = 0;
out:
	free(s.v);
	free(s.endpass);
	free(vt);
	return ret;

bad_command:
	*res = r;
	return set_status(res, SPYRE_STATUS_INVALID_COMMAND, 0);
limit:
	*res = r;
	return set_status(res, SPYRE_STATUS_LIMIT, 0);
}
