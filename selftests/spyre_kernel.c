// SPDX-License-Identifier: MIT
/*
 * spyre_kernel: the KERNEL command through libspyre (spyre_kernel_*
 * builder, spyre_stream_kernel()), every result judged against the host
 * reference interpreter spyre_ref_kernel() run on the same inputs: every
 * operation over every dtype with special values (NaN, +-inf, +-0,
 * subnormals, the largest values, fp8 saturation both ways), casts between
 * every pair of dtypes, every reduction kind with NaN, ties and masks in
 * the fixed order, one-kernel softmax and layer norm, masked loads at the
 * edges of cat/pad index ranges, broadcast and strided operands, a kernel
 * preempted by a high-priority queue, OUT_OF_BOUNDS and BAD_PROGRAM
 * failing only their own context, and a fuzz of random and mutated
 * programs; part 2 (VERSION 1.2): gathers and scatters with colliding
 * lanes in sequential order, out-of-range indices failing their own
 * context, scans against a CPU loop, Philox's known answer and its
 * independence of the launch's shape and tiling.  Skips (fails with SPYRE_EXEC_REQUIRE=1) on a card without
 * SPYRE_DEV_CAP_KERNEL.  The injected hang and fault are in spyre_fault
 * (root).
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

#define NONE SPYRE_KERNEL_NONE
#define KT_MAX_OPS SPYRE_KERNEL_MAX_OPERANDS

FIXTURE(kernel) {
	struct spyre_device *dev;
	struct spyre_device_info info;
	struct spyre_stream *s;
};

FIXTURE_SETUP(kernel)
{
	int ret = st_lib_open(&self->dev, &self->info, &self->s);

	if (ret == -ENODEV)
		SKIP(return, "no Spyre card (/dev/accel)");
	ASSERT_EQ(0, ret);
	if (!(self->info.caps & SPYRE_DEV_CAP_KERNEL)) {
		if (st_exec_required())
			ASSERT_TRUE(0) TH_LOG("card caps %#llx lack KERNEL",
					      (unsigned long long)self->info.caps);
		SKIP(return, "card caps %#llx lack KERNEL",
		     (unsigned long long)self->info.caps);
	}
}

FIXTURE_TEARDOWN(kernel)
{
	spyre_stream_destroy(self->s);
	spyre_device_close(self->dev);
}

/* One launch: operands with their initial contents, parameters, sizes. */
struct kt_case {
	struct spyre_kernel *k;
	unsigned int nops;
	uint32_t dtype[KT_MAX_OPS];
	uint64_t extent[KT_MAX_OPS];
	void *host[KT_MAX_OPS];		/* initial contents; the reference's
					 * results after kt_run() */
	unsigned int nparams;
	uint64_t params[SPYRE_KERNEL_MAX_PARAMS];
	unsigned int npdims, nrdims;
	uint64_t size[9];
	void *card[KT_MAX_OPS];		/* if set: receives the card's
					 * results after kt_run() */
	unsigned int ulps;		/* float outputs: tolerance */
	double abs_tol;			/* or this absolute difference */
};

/* Monotonic key of a float element (sign-magnitude to ordered). */
static int64_t kt_key(uint32_t dt, uint64_t bits)
{
	unsigned int w = (unsigned int)spyre_dtype_size(dt) * 8;
	uint64_t sign = 1ull << (w - 1), mag = bits & (sign - 1);

	return (bits & sign) ? -(int64_t)mag : (int64_t)mag;
}

static uint64_t kt_elem(const void *p, uint32_t dt, uint64_t i)
{
	size_t es = spyre_dtype_size(dt);
	uint64_t v = 0;

	memcpy(&v, (const uint8_t *)p + i * es, es);
	return v;
}

/* Mismatches of @n elements of @dt, card @got vs reference @want. */
static uint64_t kt_compare(struct __test_metadata *_metadata,
			   const char *what, unsigned int op, uint32_t dt,
			   const void *got, const void *want, uint64_t n,
			   unsigned int ulps, double abs_tol)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t g = kt_elem(got, dt, i), w = kt_elem(want, dt, i);
		bool ok = g == w;

		if (!ok && spyre_dtype_is_float(dt)) {
			double gd = spyre_ref_decode(dt, (uint32_t)g),
			       wd = spyre_ref_decode(dt, (uint32_t)w);
			int64_t d = kt_key(dt, g) - kt_key(dt, w);

			ok = (isnan(gd) && isnan(wd)) ||
			     (!isnan(gd) && !isnan(wd) && d <= (int64_t)ulps &&
			      d >= -(int64_t)ulps) ||
			     (abs_tol > 0 && fabs(gd - wd) <= abs_tol);
		}
		if (!ok && bad++ < 3)
			TH_LOG("%s: operand %u (%s) [%llu]: card %#llx, reference %#llx",
			       what, op, spyre_dtype_name(dt),
			       (unsigned long long)i, (unsigned long long)g,
			       (unsigned long long)w);
	}
	return bad;
}

/*
 * Run @c on the card and in the reference; compare every operand.
 * Returns the stream's result (0 or the job's error) in *@card_ret and
 * the reference's status; the number of mismatching elements (for a
 * failed launch only the card's failure is compared).
 */
static uint64_t kt_run(struct __test_metadata *_metadata,
		       FIXTURE_DATA(kernel) *self, struct kt_case *c,
		       const char *what, int *card_ret, uint32_t *ref_status)
{
	struct spyre_ref_kernel_operand rops[KT_MAX_OPS];
	struct spyre_kernel_arg args[KT_MAX_OPS];
	struct spyre_ref_kernel_launch rl = { 0 };
	struct spyre_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	struct spyre_bo *bo[KT_MAX_OPS] = { 0 }, *pbo = NULL;
	void *map[KT_MAX_OPS] = { 0 };
	const void *prog;
	size_t psize;
	uint64_t bad = 0;
	int ret;

	*card_ret = -1;
	*ref_status = ~0u;
	ret = spyre_kernel_finalize(c->k, &prog, &psize);
	EXPECT_EQ(0, ret) TH_LOG("%s: finalize", what);
	if (ret)
		return 1;
	EXPECT_EQ(0, spyre_kernel_upload(self->dev, prog, psize, 0, &pbo));
	for (unsigned int i = 0; i < c->nops; i++) {
		size_t bytes = c->extent[i] * spyre_dtype_size(c->dtype[i]);

		EXPECT_EQ(0, spyre_bo_alloc(self->dev, bytes ? bytes : 1, 0,
					    &bo[i]));
		if (!bo[i] || spyre_bo_map(bo[i], &map[i]))
			goto out;
		memcpy(map[i], c->host[i], bytes);
		args[i] = (struct spyre_kernel_arg){ SPYRE_MEM(bo[i], 0),
						     c->extent[i], c->dtype[i],
						     0 };
		rops[i] = (struct spyre_ref_kernel_operand){ c->host[i],
							     c->extent[i],
							     c->dtype[i], 0 };
	}
	if (!pbo)
		goto out;
	l.prog = SPYRE_MEM(pbo, 0);
	l.prog_size = (uint32_t)psize;
	l.noperands = c->nops;
	l.nparams = c->nparams;
	l.npdims = c->npdims;
	l.nrdims = c->nrdims;
	l.operands = args;
	l.params = c->params;
	memcpy(l.size, c->size, sizeof(l.size));
	ret = spyre_stream_kernel(self->s, &l);
	EXPECT_EQ(0, ret) TH_LOG("%s: launch %d", what, ret);
	if (!ret)
		ret = spyre_stream_sync(self->s, ST_TIMEOUT_NS);
	*card_ret = ret;

	rl.prog = prog;
	rl.prog_size = psize;
	rl.noperands = c->nops;
	rl.nparams = c->nparams;
	rl.npdims = c->npdims;
	rl.nrdims = c->nrdims;
	rl.operands = rops;
	rl.params = c->params;
	memcpy(rl.size, c->size, sizeof(rl.size));
	EXPECT_EQ(0, spyre_ref_kernel(&rl, &res));
	*ref_status = res.status;
	if (res.status != SPYRE_STATUS_OK || ret)
		goto out;
	for (unsigned int i = 0; i < c->nops; i++)
		bad += kt_compare(_metadata, what, i, c->dtype[i], map[i],
				  c->host[i], c->extent[i], c->ulps,
				  c->abs_tol);
out:
	for (unsigned int i = 0; i < c->nops; i++) {
		if (c->card[i] && map[i])
			memcpy(c->card[i], map[i],
			       c->extent[i] * spyre_dtype_size(c->dtype[i]));
		spyre_bo_free(bo[i]);
	}
	spyre_bo_free(pbo);
	return bad;
}

/* kt_run() expecting success on both sides and equal results. */
#define KT_CHECK(c, what) do {						\
		int r_;							\
		uint32_t st_;						\
		EXPECT_EQ(0, kt_run(_metadata, self, (c), (what), &r_, &st_)); \
		EXPECT_EQ(0, r_) TH_LOG("%s: card %d", (what), r_);	\
		EXPECT_EQ(SPYRE_STATUS_OK, st_) TH_LOG("%s", (what));	\
	} while (0)

static void kt_free(struct kt_case *c)
{
	spyre_kernel_destroy(c->k);
	for (unsigned int i = 0; i < c->nops; i++)
		free(c->host[i]);
	memset(c, 0, sizeof(*c));
}

/* Add operand @dt of @n elements, zeroed (or @init). */
static void *kt_operand(struct kt_case *c, uint32_t dt, uint64_t n,
			const void *init)
{
	size_t bytes = n * spyre_dtype_size(dt);
	void *p = calloc(1, bytes ? bytes : 1);

	if (p && init)
		memcpy(p, init, bytes);
	c->dtype[c->nops] = dt;
	c->extent[c->nops] = n;
	c->host[c->nops++] = p;
	return p;
}

static const uint32_t float_dts[] = {
	SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
	SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2,
};
static const uint32_t int_dts[] = {
	SPYRE_DTYPE_INT8, SPYRE_DTYPE_U8, SPYRE_DTYPE_INT16,
	SPYRE_DTYPE_INT32, SPYRE_DTYPE_INT64,
};
static const uint32_t all_dts[] = {
	SPYRE_DTYPE_U8, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
	SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2, SPYRE_DTYPE_INT8,
	SPYRE_DTYPE_INT32, SPYRE_DTYPE_INT64, SPYRE_DTYPE_INT16,
	SPYRE_DTYPE_BOOL,
};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Fill @n elements of @dt: special values first, then random ones. */
static void kt_fill(uint64_t *seed, uint32_t dt, void *p, uint64_t n)
{
	static const double fsp[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN,
				      1.0, -1.0, 0.5, 2.5, -2.5, 3.0, 7.0,
				      -7.0, 1e-3 };
	static const int64_t isp[] = { 0, 1, -1, 2, -2, 7, -7, 31, 32, 33,
				       63, 64, INT64_MIN, INT64_MAX,
				       INT32_MIN, INT32_MAX, 127, -128, 255,
				       32767, -32768 };
	size_t es = spyre_dtype_size(dt);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t v;

		if (dt == SPYRE_DTYPE_BOOL) {
			v = st_rand(seed) & 1;
		} else if (spyre_dtype_is_float(dt)) {
			if (i < N_OF(fsp))
				v = spyre_ref_encode(dt, fsp[i], 0);
			else if (i == N_OF(fsp))
				v = spyre_ref_encode(dt, spyre_dtype_max(dt), 0);
			else if (i == N_OF(fsp) + 1)
				v = spyre_ref_encode(dt,
					-spyre_dtype_min_subnormal(dt), 0);
			else
				v = st_rand_elem(seed, dt, -8, 8);
		} else {
			v = i < N_OF(isp) ? (uint64_t)isp[i] :
			    st_rand(seed) >> (st_rand(seed) % 64);
		}
		memcpy((uint8_t *)p + i * es, &v, es);
	}
}

/* A shuffled copy: the pairs of special values meet each other. */
static void kt_shuffle(uint64_t *seed, void *p, uint32_t dt, uint64_t n)
{
	size_t es = spyre_dtype_size(dt);
	uint8_t t[8];

	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = st_rand(seed) % (i + 1);

		memcpy(t, (uint8_t *)p + i * es, es);
		memcpy((uint8_t *)p + i * es, (uint8_t *)p + j * es, es);
		memcpy((uint8_t *)p + j * es, t, es);
	}
}

struct kt_opdesc {
	uint32_t op;
	int nsrc;
	uint32_t mod;
	unsigned int ulps;	/* f32: allowed difference to the reference */
};

/*
 * out[i] = op(a[i], b[i], c[i]) over @n points, the inputs and the output
 * in @dt (a bool output as BOOL).
 */
static void kt_pointwise_op(struct __test_metadata *_metadata,
			    FIXTURE_DATA(kernel) *self, uint32_t dt,
			    const struct kt_opdesc *d, uint64_t *seed)
{
	enum { N = 96 };
	struct kt_case c = { 0 };
	int i, v[3], r;
	bool pred = d->op == SPYRE_KOP_CMP || d->op == SPYRE_KOP_ISNAN ||
		    d->op == SPYRE_KOP_ISINF;
	char what[64];

	for (int s = 0; s < 3; s++) {
		void *p = kt_operand(&c, dt, N, NULL);

		kt_fill(seed, dt, p, N);
		if (s)
			kt_shuffle(seed, p, dt, N);
	}
	kt_operand(&c, pred ? SPYRE_DTYPE_BOOL : dt, N, NULL);
	c.npdims = 1;
	c.size[0] = N;
	c.ulps = d->ulps;
	ASSERT_EQ(0, spyre_kernel_create(c.dtype, 4, 0, 1, 0, &c.k));
	i = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64, 0);
	for (int s = 0; s < 3; s++)
		v[s] = s < d->nsrc ? spyre_kernel_load(c.k, (unsigned int)s, i,
						      NONE, NONE) : NONE;
	if (d->op == SPYRE_KOP_SELECT)
		v[0] = spyre_kernel_cvt(c.k, SPYRE_KTYPE_BOOL, v[0], 0, 0);
	r = spyre_kernel_op(c.k, d->op, d->mod, v[0], v[1], v[2]);
	spyre_kernel_store(c.k, 3, i, r, NONE, 0);
	snprintf(what, sizeof(what), "op %#x mod %u %s", d->op, d->mod,
		 spyre_dtype_name(dt));
	ASSERT_EQ(0, spyre_kernel_error(c.k)) TH_LOG("%s", what);
	KT_CHECK(&c, what);
	kt_free(&c);
}

/* Minutes, not seconds, on the debug kernel of a loaded 2-core host. */
TEST_F_TIMEOUT(kernel, kernel_ops_float_every_dtype, 300)
{
	static const struct kt_opdesc ops[] = {
		{ SPYRE_KOP_ADD, 2, 0, 0 }, { SPYRE_KOP_SUB, 2, 0, 0 },
		{ SPYRE_KOP_MUL, 2, 0, 0 }, { SPYRE_KOP_DIV, 2, 0, 0 },
		{ SPYRE_KOP_TRUNCDIV, 2, 0, 0 },
		{ SPYRE_KOP_FLOORDIV, 2, 0, 0 }, { SPYRE_KOP_FMOD, 2, 0, 0 },
		{ SPYRE_KOP_REM, 2, 0, 0 }, { SPYRE_KOP_FMA, 3, 0, 0 },
		{ SPYRE_KOP_NEG, 1, 0, 0 }, { SPYRE_KOP_ABS, 1, 0, 0 },
		{ SPYRE_KOP_MIN, 2, 0, 0 }, { SPYRE_KOP_MAX, 2, 0, 0 },
		{ SPYRE_KOP_MIN, 2, SPYRE_KMOD_IGNORE_NAN, 0 },
		{ SPYRE_KOP_MAX, 2, SPYRE_KMOD_IGNORE_NAN, 0 },
		{ SPYRE_KOP_CLAMP, 3, 0, 0 }, { SPYRE_KOP_POW, 2, 0, 1 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_EQ, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_NE, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_LT, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_LE, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_GT, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_GE, 0 },
		{ SPYRE_KOP_SELECT, 3, 0, 0 },
		{ SPYRE_KOP_EXP, 1, 0, 1 }, { SPYRE_KOP_LOG, 1, 0, 1 },
		{ SPYRE_KOP_SQRT, 1, 0, 0 }, { SPYRE_KOP_RSQRT, 1, 0, 0 },
		{ SPYRE_KOP_RECIP, 1, 0, 0 }, { SPYRE_KOP_TANH, 1, 0, 1 },
		{ SPYRE_KOP_SIGMOID, 1, 0, 1 }, { SPYRE_KOP_ERF, 1, 0, 1 },
		{ SPYRE_KOP_FLOOR, 1, 0, 0 }, { SPYRE_KOP_CEIL, 1, 0, 0 },
		{ SPYRE_KOP_ROUND, 1, 0, 0 }, { SPYRE_KOP_TRUNC, 1, 0, 0 },
		{ SPYRE_KOP_ISNAN, 1, 0, 0 }, { SPYRE_KOP_ISINF, 1, 0, 0 },
	};
	uint64_t seed = 0x51;

	for (size_t d = 0; d < N_OF(float_dts); d++)
		for (size_t o = 0; o < N_OF(ops); o++)
			kt_pointwise_op(_metadata, self, float_dts[d], &ops[o],
					&seed);
}

/*
 * The math library's special values on the card: every function over
 * +-0, +-inf, NaN, subnormals, the extremes and each function's edges
 * (the binary ones over every pair), against the reference within the
 * contract's bound (docs/spyre-hw.rst's math table: the card's bound,
 * plus the reference's own rounding).  The dense sweeps are the host's
 * (qemu-device/tests/spyre-kmath-test.c).
 */
TEST_F_TIMEOUT(kernel, kernel_math_special, 300)
{
	static const float sp[] = {
		0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f,
		1.17549435e-38f, -1.17549435e-38f, 3.40282347e38f,
		-3.40282347e38f, 1, -1, 0.5f, -0.5f, 2, -2, 1.57079633f,
		-3.14159265f, 0.99999994f, -0.99999994f, 1.00000012f, 1e-8f,
		-1e-20f, 10, -10, 88.7228394f, -103.972084f, 128, -150,
		1e30f, -1e6f, 0x1p20f, 3.99999976f, -2.4570749f, -2.5f,
		-3, 4.0850e36f, 27, 9.19f,
	};
	static const struct {
		uint32_t op;
		int nsrc;
		unsigned int ulps;
		double abs_tol;
	} fns[] = {
		{ SPYRE_KOP_EXP2, 1, 1, 0 }, { SPYRE_KOP_EXPM1, 1, 1, 0 },
		{ SPYRE_KOP_LOG2, 1, 1, 0 }, { SPYRE_KOP_LOG10, 1, 1, 0 },
		{ SPYRE_KOP_LOG1P, 1, 1, 0 }, { SPYRE_KOP_SIN, 1, 1, 0 },
		{ SPYRE_KOP_COS, 1, 1, 0 }, { SPYRE_KOP_TAN, 1, 1, 0 },
		{ SPYRE_KOP_ASIN, 1, 1, 0 }, { SPYRE_KOP_ACOS, 1, 1, 0 },
		{ SPYRE_KOP_ATAN, 1, 1, 0 }, { SPYRE_KOP_ATAN2, 2, 1, 0 },
		{ SPYRE_KOP_SINH, 1, 1, 0 }, { SPYRE_KOP_COSH, 1, 1, 0 },
		{ SPYRE_KOP_ASINH, 1, 1, 0 }, { SPYRE_KOP_ACOSH, 1, 1, 0 },
		{ SPYRE_KOP_ATANH, 1, 1, 0 }, { SPYRE_KOP_ERFC, 1, 1, 0 },
		{ SPYRE_KOP_ERFINV, 1, 2, 0 }, { SPYRE_KOP_SIGN, 1, 0, 0 },
		{ SPYRE_KOP_COPYSIGN, 2, 0, 0 }, { SPYRE_KOP_HYPOT, 2, 1, 0 },
		{ SPYRE_KOP_LGAMMA, 1, 2, 0x1p-22 },
		{ SPYRE_KOP_EXP, 1, 1, 0 }, { SPYRE_KOP_LOG, 1, 1, 0 },
		{ SPYRE_KOP_TANH, 1, 1, 0 }, { SPYRE_KOP_ERF, 1, 1, 0 },
		{ SPYRE_KOP_SIGMOID, 1, 1, 0 },
	};
	enum { NS = N_OF(sp), N = NS * NS };
	char what[32];

	for (size_t f = 0; f < N_OF(fns); f++) {
		struct kt_case c = { 0 };
		float *a, *b;
		int i, v[2], r;

		a = kt_operand(&c, SPYRE_DTYPE_FP32, N, NULL);
		b = kt_operand(&c, SPYRE_DTYPE_FP32, N, NULL);
		kt_operand(&c, SPYRE_DTYPE_FP32, N, NULL);
		ASSERT_NE(NULL, a);
		ASSERT_NE(NULL, b);
		/* every pair; unary functions see each value NS times */
		for (int j = 0; j < N; j++) {
			a[j] = sp[j / NS];
			b[j] = sp[j % NS];
		}
		c.npdims = 1;
		c.size[0] = fns[f].nsrc == 2 ? N : NS;
		c.ulps = fns[f].ulps;
		c.abs_tol = fns[f].abs_tol;
		ASSERT_EQ(0, spyre_kernel_create(c.dtype, 3, 0, 1, 0, &c.k));
		i = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64, 0);
		if (fns[f].nsrc == 1)
			i = spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0, i,
					    spyre_kernel_const(c.k,
							       SPYRE_KTYPE_I64,
							       NS), NONE);
		v[0] = spyre_kernel_load(c.k, 0, i, NONE, NONE);
		v[1] = fns[f].nsrc == 2 ?
		       spyre_kernel_load(c.k, 1, i, NONE, NONE) : NONE;
		r = spyre_kernel_op(c.k, fns[f].op, 0, v[0], v[1], NONE);
		spyre_kernel_store(c.k, 2, i, r, NONE, 0);
		snprintf(what, sizeof(what), "math op %#x", fns[f].op);
		ASSERT_EQ(0, spyre_kernel_error(c.k)) TH_LOG("%s", what);
		KT_CHECK(&c, what);
		kt_free(&c);
	}
}

TEST_F_TIMEOUT(kernel, kernel_ops_int_and_bool_every_dtype, 300)
{
	static const struct kt_opdesc ops[] = {
		{ SPYRE_KOP_ADD, 2, 0, 0 }, { SPYRE_KOP_SUB, 2, 0, 0 },
		{ SPYRE_KOP_MUL, 2, 0, 0 }, { SPYRE_KOP_TRUNCDIV, 2, 0, 0 },
		{ SPYRE_KOP_FLOORDIV, 2, 0, 0 }, { SPYRE_KOP_FMOD, 2, 0, 0 },
		{ SPYRE_KOP_REM, 2, 0, 0 }, { SPYRE_KOP_FMA, 3, 0, 0 },
		{ SPYRE_KOP_NEG, 1, 0, 0 }, { SPYRE_KOP_ABS, 1, 0, 0 },
		{ SPYRE_KOP_MIN, 2, 0, 0 }, { SPYRE_KOP_MAX, 2, 0, 0 },
		{ SPYRE_KOP_CLAMP, 3, 0, 0 }, { SPYRE_KOP_POW, 2, 0, 0 },
		{ SPYRE_KOP_AND, 2, 0, 0 }, { SPYRE_KOP_OR, 2, 0, 0 },
		{ SPYRE_KOP_XOR, 2, 0, 0 }, { SPYRE_KOP_NOT, 1, 0, 0 },
		{ SPYRE_KOP_SHL, 2, 0, 0 }, { SPYRE_KOP_SHR, 2, 0, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_LT, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_GE, 0 },
		{ SPYRE_KOP_SELECT, 3, 0, 0 },
	};
	static const struct kt_opdesc bops[] = {
		{ SPYRE_KOP_AND, 2, 0, 0 }, { SPYRE_KOP_OR, 2, 0, 0 },
		{ SPYRE_KOP_XOR, 2, 0, 0 }, { SPYRE_KOP_NOT, 1, 0, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_EQ, 0 },
		{ SPYRE_KOP_CMP, 2, SPYRE_KCMP_NE, 0 },
		{ SPYRE_KOP_SELECT, 3, 0, 0 },
	};
	uint64_t seed = 0x52;

	for (size_t d = 0; d < N_OF(int_dts); d++)
		for (size_t o = 0; o < N_OF(ops); o++)
			kt_pointwise_op(_metadata, self, int_dts[d], &ops[o],
					&seed);
	for (size_t o = 0; o < N_OF(bops); o++)
		kt_pointwise_op(_metadata, self, SPYRE_DTYPE_BOOL, &bops[o],
				&seed);
}

/*
 * Casts: from each dtype to every dtype (CVT to the target's value type
 * through the target dtype, then stored), and fp8 stores with and without
 * SAT of values beyond their range.
 */
TEST_F(kernel, kernel_casts_every_pair_and_fp8_saturation)
{
	enum { N = 64 };
	uint64_t seed = 0x53;

	for (size_t s = 0; s < N_OF(all_dts); s++) {
		struct kt_case c = { 0 };
		int i, x;
		char what[48];

		kt_fill(&seed, all_dts[s], kt_operand(&c, all_dts[s], N, NULL),
			N);
		for (size_t d = 0; d < N_OF(all_dts); d++)
			kt_operand(&c, all_dts[d], N, NULL);
		/* saturating fp8 stores from the source's values */
		kt_operand(&c, SPYRE_DTYPE_FP8_E4M3, N, NULL);
		kt_operand(&c, SPYRE_DTYPE_FP8_E5M2, N, NULL);
		c.npdims = 1;
		c.size[0] = N;
		ASSERT_EQ(0, spyre_kernel_create(c.dtype, c.nops, 0, 1, 0,
						 &c.k));
		i = spyre_kernel_idx(c.k, SPYRE_KTYPE_I32, 0);
		x = spyre_kernel_load(c.k, 0, i, NONE, NONE);
		for (size_t d = 0; d < N_OF(all_dts); d++) {
			uint32_t dt = all_dts[d];
			int t = dt == SPYRE_DTYPE_BOOL ? SPYRE_KTYPE_BOOL :
				dt == SPYRE_DTYPE_INT64 ? SPYRE_KTYPE_I64 :
				spyre_dtype_is_float(dt) ? SPYRE_KTYPE_F32 :
				SPYRE_KTYPE_I32;
			int y = spyre_kernel_cvt(c.k, (uint32_t)t, x, dt, 0);

			spyre_kernel_store(c.k, (unsigned int)(1 + d), i, y,
					   NONE, 0);
		}
		x = spyre_kernel_cvt(c.k, SPYRE_KTYPE_F32, x, 0, 0);
		x = spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0, x,
				    spyre_kernel_const_f32(c.k, 1e4f), NONE);
		spyre_kernel_store(c.k, 12, i, x, NONE, SPYRE_KMOD_SAT);
		spyre_kernel_store(c.k, 13, i, x, NONE, SPYRE_KMOD_SAT);
		ASSERT_EQ(0, spyre_kernel_error(c.k));
		snprintf(what, sizeof(what), "casts from %s",
			 spyre_dtype_name(all_dts[s]));
		KT_CHECK(&c, what);
		kt_free(&c);
	}
}

/*
 * Every reduction kind over rows of @R with NaN, ties and a mask: FP32
 * SUM/PROD/MAX/MIN/ARGMAX/ARGMIN/WELFORD (+ COMBINE of (x, 0, 1)), INT32
 * and INT64 SUM/PROD/MAX/MIN/ARGMAX/ARGMIN/XOR_SUM, BOOL ANY/ALL.
 */
TEST_F(kernel, kernel_reductions_every_kind_nan_ties_masks)
{
	enum { ROWS = 6, R = 2600 };
	static const uint32_t dts[] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_INT32,
					SPYRE_DTYPE_INT64, SPYRE_DTYPE_BOOL };
	uint64_t seed = 0x54;

	for (size_t d = 0; d < N_OF(dts); d++) {
		uint32_t dt = dts[d];
		bool f = dt == SPYRE_DTYPE_FP32, b = dt == SPYRE_DTYPE_BOOL;
		static const uint32_t fk[] = {
			SPYRE_KRED_SUM, SPYRE_KRED_PROD, SPYRE_KRED_MAX,
			SPYRE_KRED_MIN, SPYRE_KRED_ARGMAX, SPYRE_KRED_ARGMIN,
			SPYRE_KRED_WELFORD, SPYRE_KRED_WELFORD_COMBINE };
		static const uint32_t ik[] = {
			SPYRE_KRED_SUM, SPYRE_KRED_PROD, SPYRE_KRED_MAX,
			SPYRE_KRED_MIN, SPYRE_KRED_ARGMAX, SPYRE_KRED_ARGMIN,
			SPYRE_KRED_XOR_SUM };
		static const uint32_t bk[] = { SPYRE_KRED_ANY, SPYRE_KRED_ALL };
		const uint32_t *kinds = f ? fk : b ? bk : ik;
		size_t nk = f ? N_OF(fk) : b ? N_OF(bk) : N_OF(ik);
		struct kt_case c = { 0 };
		void *x = kt_operand(&c, dt, (uint64_t)ROWS * R, NULL);
		int row, o, v, m, res[2][8], z;
		char what[48];

		for (uint64_t i = 0; i < (uint64_t)ROWS * R; i++) {
			uint64_t r = st_rand(&seed), e = 0;

			if (f) {
				/* row 0 has NaNs, row 1 ties, row 2 large
				 * and small values, the rest near 1 */
				float v2 = (float)st_uniform(&seed, 0.9, 1.1);

				if (i / R == 0 && r % 97 == 0)
					v2 = NAN;
				if (i / R == 1)
					v2 = (float)(r % 4);
				if (i / R == 2)
					v2 = (r & 1) ? 1e7f : 1e-3f;
				memcpy(&e, &v2, 4);
			} else if (b) {
				e = (i / R == 0) ? 0 : (i / R == 1) ? 1 :
				    (r % 1000 != 0);
			} else {
				e = (i / R == 1) ? r % 3 : r % 2000 - 1000;
				if (i / R == 2)
					e = r;
			}
			memcpy((uint8_t *)x + i * spyre_dtype_size(dt), &e,
			       spyre_dtype_size(dt));
		}
		for (size_t k = 0; k < nk; k++) {
			uint32_t odt = kinds[k] == SPYRE_KRED_ARGMAX ||
				       kinds[k] == SPYRE_KRED_ARGMIN ?
				       SPYRE_DTYPE_INT64 : dt;
			uint64_t n = kinds[k] >= SPYRE_KRED_WELFORD ? 3 : 1;

			/* unmasked and masked results */
			kt_operand(&c, odt, ROWS * n, NULL);
			kt_operand(&c, odt, ROWS * n, NULL);
		}
		c.nparams = 1;
		c.params[0] = R;
		c.npdims = 1;
		c.nrdims = 1;
		c.size[0] = ROWS;
		c.size[6] = R;
		ASSERT_EQ(0, spyre_kernel_create(c.dtype, c.nops, 1, 1, 1,
						 &c.k));
		row = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, NONE, 1, 0);
		spyre_kernel_pass(c.k);
		o = spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0, row,
				    spyre_kernel_idx(c.k, SPYRE_KTYPE_I64,
						     SPYRE_KDIM_R0), NONE);
		v = spyre_kernel_load(c.k, 0, o, NONE, NONE);
		m = spyre_kernel_op(c.k, SPYRE_KOP_CMP, SPYRE_KCMP_NE,
				    spyre_kernel_op(c.k, SPYRE_KOP_REM, 0,
					spyre_kernel_idx(c.k, SPYRE_KTYPE_I32,
							 SPYRE_KDIM_RINDEX),
					spyre_kernel_const(c.k,
							   SPYRE_KTYPE_I32, 3),
					NONE),
				    spyre_kernel_const(c.k, SPYRE_KTYPE_I32, 0),
				    NONE);
		z = f ? spyre_kernel_const_f32(c.k, 0) : NONE;
		for (size_t k = 0; k < nk; k++)
			for (int mm = 0; mm < 2; mm++) {
				bool comb = kinds[k] ==
					    SPYRE_KRED_WELFORD_COMBINE;

				res[mm][k] = spyre_kernel_reduce(c.k, kinds[k],
					v, comb ? z : NONE,
					comb ? spyre_kernel_const_f32(c.k, 1) :
					NONE, mm ? m : NONE);
			}
		spyre_kernel_endpass(c.k);
		for (size_t k = 0; k < nk; k++) {
			unsigned int n = kinds[k] >= SPYRE_KRED_WELFORD ? 3 : 1;

			for (int mm = 0; mm < 2; mm++)
				for (unsigned int j = 0; j < n; j++) {
					/* out[row * n + j] */
					int idx = spyre_kernel_op(c.k,
						SPYRE_KOP_FMA,
						0, spyre_kernel_idx(c.k,
							SPYRE_KTYPE_I64, 0),
						spyre_kernel_const(c.k,
							SPYRE_KTYPE_I64, n),
						spyre_kernel_const(c.k,
							SPYRE_KTYPE_I64, j));
					spyre_kernel_store(c.k,
						(unsigned int)(1 + 2 * k + mm),
						idx, res[mm][k] + (int)j, NONE,
						0);
				}
		}
		ASSERT_EQ(0, spyre_kernel_error(c.k));
		snprintf(what, sizeof(what), "reductions of %s",
			 spyre_dtype_name(dt));
		KT_CHECK(&c, what);
		kt_free(&c);
	}
}

/* One-kernel softmax (the doc's example) and layer norm (Welford). */
TEST_F(kernel, kernel_softmax_and_layernorm_multipass)
{
	enum { ROWS = 5, R = 1500 };
	static const uint32_t dts[] = { SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32 };
	uint64_t seed = 0x55;

	for (size_t d = 0; d < N_OF(dts); d++) {
		uint32_t dt = dts[d];
		struct kt_case c = { 0 };
		void *x = kt_operand(&c, dt, ROWS * R, NULL);
		int row, o, v, amax, e, sum, w;

		for (uint64_t i = 0; i < ROWS * R; i++)
			st_store(x, dt, i, spyre_ref_encode(dt,
				st_uniform(&seed, -8, 8), 0));
		kt_operand(&c, dt, ROWS * R, NULL);	/* softmax */
		kt_operand(&c, dt, ROWS * R, NULL);	/* layer norm */
		kt_operand(&c, SPYRE_DTYPE_FP32, R, NULL);	/* gamma */
		kt_operand(&c, SPYRE_DTYPE_FP32, R, NULL);	/* beta */
		kt_operand(&c, SPYRE_DTYPE_FP32, ROWS, NULL);	/* mean */
		kt_operand(&c, SPYRE_DTYPE_FP32, ROWS, NULL);	/* rstd */
		for (int i = 0; i < R; i++) {
			((float *)c.host[3])[i] = (float)st_uniform(&seed, 0.5, 2);
			((float *)c.host[4])[i] = (float)st_uniform(&seed, -1, 1);
		}
		c.nparams = 3;
		c.params[0] = R;
		c.params[1] = 1;
		c.params[2] = st_f2u(1e-5f);
		c.npdims = 1;
		c.nrdims = 1;
		c.size[0] = ROWS;
		c.size[6] = SPYRE_KSIZE_PARAM(0);
		/*
		 * EXP within 1 ulp (docs/spyre-hw.rst), the reference's
		 * correctly rounded, then the division: 2 ulps
		 */
		c.ulps = 2;
		ASSERT_EQ(0, spyre_kernel_create(c.dtype, c.nops, 3, 1, 1,
						 &c.k));
		row = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, NONE, 1, 0);
		spyre_kernel_pass(c.k);
		o = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, row, 1u << 6, 1);
		v = spyre_kernel_load(c.k, 0, o, NONE, NONE);
		amax = spyre_kernel_reduce(c.k, SPYRE_KRED_MAX, v, NONE, NONE,
					   NONE);
		w = spyre_kernel_reduce(c.k, SPYRE_KRED_WELFORD, v, NONE, NONE,
					NONE);
		spyre_kernel_endpass(c.k);
		spyre_kernel_pass(c.k);
		o = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, row, 1u << 6, 1);
		v = spyre_kernel_load(c.k, 0, o, NONE, NONE);
		e = spyre_kernel_op(c.k, SPYRE_KOP_EXP, 0,
				    spyre_kernel_op(c.k, SPYRE_KOP_SUB, 0, v,
						    amax, NONE), NONE, NONE);
		sum = spyre_kernel_reduce(c.k, SPYRE_KRED_SUM, e, NONE, NONE,
					  NONE);
		spyre_kernel_endpass(c.k);
		{
			/* rstd = rsqrt(m2 / w + eps) in point code */
			int var = spyre_kernel_op(c.k, SPYRE_KOP_DIV, 0, w + 1,
						  w + 2, NONE);
			int rstd = spyre_kernel_op(c.k, SPYRE_KOP_RSQRT, 0,
				spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0, var,
					spyre_kernel_param(c.k, SPYRE_KTYPE_F32,
							   2), NONE),
				NONE, NONE);
			int r0, g, b2, y, p0;

			spyre_kernel_pass(c.k);
			o = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, row,
						1u << 6, 1);
			v = spyre_kernel_load(c.k, 0, o, NONE, NONE);
			e = spyre_kernel_op(c.k, SPYRE_KOP_EXP, 0,
				spyre_kernel_op(c.k, SPYRE_KOP_SUB, 0, v, amax,
						NONE), NONE, NONE);
			spyre_kernel_store(c.k, 1, o,
				spyre_kernel_op(c.k, SPYRE_KOP_DIV, 0, e, sum,
						NONE), NONE, 0);
			r0 = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64,
					      SPYRE_KDIM_R0);
			g = spyre_kernel_load(c.k, 3, r0, NONE, NONE);
			b2 = spyre_kernel_load(c.k, 4, r0, NONE, NONE);
			y = spyre_kernel_op(c.k, SPYRE_KOP_SUB, 0, v, w, NONE);
			y = spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0, y, rstd,
					    NONE);
			y = spyre_kernel_op(c.k, SPYRE_KOP_FMA, 0, y, g, b2);
			spyre_kernel_store(c.k, 2, o, y, NONE, 0);
			spyre_kernel_endpass(c.k);
			p0 = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64, 0);
			spyre_kernel_store(c.k, 5, p0, w, NONE, 0);
			spyre_kernel_store(c.k, 6, p0, rstd, NONE, 0);
		}
		ASSERT_EQ(0, spyre_kernel_error(c.k));
		KT_CHECK(&c, dt == SPYRE_DTYPE_FP16 ? "softmax/layernorm fp16" :
			 "softmax/layernorm fp32");
		/* the reference itself: softmax rows sum to 1 */
		for (int r = 0; r < ROWS; r++) {
			double s = 0;

			for (int i = 0; i < R; i++)
				s += spyre_ref_decode(dt, st_load(c.host[1], dt,
						(uint64_t)r * R + i));
			EXPECT_LT(fabs(s - 1), 0.01) TH_LOG("row %d: %g", r, s);
		}
		kt_free(&c);
	}
}

/*
 * cat along the last dimension (out[i] = i < n1 ? a[i] : b[i - n1]) and a
 * constant pad (out[i] = 2 <= i < n + 2 ? x[i - 2] : -1): the masked
 * loads' inactive offsets lie outside their operands, which end exactly
 * at their extents.
 */
TEST_F(kernel, kernel_masked_loads_cat_and_pad_edges)
{
	enum { N1 = 37, N2 = 29 };
	struct kt_case c = { 0 };
	float *a, *b;
	int i, m, la, lb, o;

	a = kt_operand(&c, SPYRE_DTYPE_FP32, N1, NULL);
	b = kt_operand(&c, SPYRE_DTYPE_FP32, N2, NULL);
	for (int k = 0; k < N1; k++)
		a[k] = (float)k;
	for (int k = 0; k < N2; k++)
		b[k] = (float)(-1 - k);
	kt_operand(&c, SPYRE_DTYPE_FP32, N1 + N2, NULL);	/* cat */
	kt_operand(&c, SPYRE_DTYPE_FP32, N1 + N2, NULL);	/* pad */
	c.nparams = 1;
	c.params[0] = N1;
	c.npdims = 1;
	c.size[0] = N1 + N2;
	ASSERT_EQ(0, spyre_kernel_create(c.dtype, 4, 1, 1, 0, &c.k));
	i = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64, 0);
	m = spyre_kernel_op(c.k, SPYRE_KOP_CMP, SPYRE_KCMP_LT, i,
			    spyre_kernel_param(c.k, SPYRE_KTYPE_I64, 0), NONE);
	la = spyre_kernel_load(c.k, 0, i, m, NONE);
	o = spyre_kernel_op(c.k, SPYRE_KOP_SUB, 0, i,
			    spyre_kernel_param(c.k, SPYRE_KTYPE_I64, 0), NONE);
	lb = spyre_kernel_load(c.k, 1, o,
			       spyre_kernel_op(c.k, SPYRE_KOP_NOT, 0, m, NONE,
					       NONE), NONE);
	spyre_kernel_store(c.k, 2, i, spyre_kernel_op(c.k, SPYRE_KOP_SELECT, 0,
						      m, la, lb), NONE, 0);
	/* pad x = a by 2 on the left: offsets -2, -1 and beyond N1 inactive */
	o = spyre_kernel_op(c.k, SPYRE_KOP_SUB, 0, i,
			    spyre_kernel_const(c.k, SPYRE_KTYPE_I64, 2), NONE);
	m = spyre_kernel_op(c.k, SPYRE_KOP_AND, 0,
		spyre_kernel_op(c.k, SPYRE_KOP_CMP, SPYRE_KCMP_GE, o,
				spyre_kernel_const(c.k, SPYRE_KTYPE_I64, 0),
				NONE),
		spyre_kernel_op(c.k, SPYRE_KOP_CMP, SPYRE_KCMP_LT, o,
				spyre_kernel_param(c.k, SPYRE_KTYPE_I64, 0),
				NONE), NONE);
	spyre_kernel_store(c.k, 3, i,
			   spyre_kernel_load(c.k, 0, o, m,
					     spyre_kernel_const_f32(c.k, -1)),
			   NONE, 0);
	ASSERT_EQ(0, spyre_kernel_error(c.k));
	KT_CHECK(&c, "cat/pad");
	/* the reference's values, checked by hand */
	EXPECT_EQ(36.0f, ((float *)c.host[2])[36]);
	EXPECT_EQ(-1.0f, ((float *)c.host[2])[37]);
	EXPECT_EQ(-1.0f, ((float *)c.host[3])[1]);
	EXPECT_EQ(0.0f, ((float *)c.host[3])[2]);
	EXPECT_EQ(-1.0f, ((float *)c.host[3])[N1 + 2]);
	kt_free(&c);
}

/*
 * The doc's fused example out = silu(x + b) * s with b broadcast over rows
 * (stride 0 along p0) and x a strided, transposed view: x[i, j] at j * LD
 * + i.
 */
TEST_F(kernel, kernel_broadcast_and_strided_operands)
{
	enum { N = 19, C = 23, LD = 27 };
	struct kt_case c = { 0 };
	uint64_t seed = 0x56;
	void *x;
	int o, ob, ox, vx, vb, s;

	x = kt_operand(&c, SPYRE_DTYPE_FP16, (uint64_t)C * LD, NULL);
	for (uint64_t i = 0; i < (uint64_t)C * LD; i++)
		st_store(x, SPYRE_DTYPE_FP16, i, spyre_ref_encode(
			SPYRE_DTYPE_FP16, st_uniform(&seed, -6, 6), 0));
	kt_operand(&c, SPYRE_DTYPE_FP32, C, NULL);
	for (int i = 0; i < C; i++)
		((float *)c.host[1])[i] = (float)st_uniform(&seed, -1, 1);
	kt_operand(&c, SPYRE_DTYPE_FP16, (uint64_t)N * C, NULL);
	c.nparams = 6;
	c.params[0] = 1;	/* x: p0 stride */
	c.params[1] = LD;	/* x: p1 stride */
	c.params[2] = 1;	/* b: p1 stride (p0 broadcast) */
	c.params[3] = st_f2u(1.5f);
	c.params[4] = C;	/* out: row-major */
	c.params[5] = 1;
	c.npdims = 2;
	c.size[0] = N;
	c.size[1] = C;
	c.ulps = 1;
	ASSERT_EQ(0, spyre_kernel_create(c.dtype, 3, 6, 2, 0, &c.k));
	ox = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, NONE, 0x3, 0);
	ob = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, NONE, 0x2, 2);
	o = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, NONE, 0x3, 4);
	vx = spyre_kernel_load(c.k, 0, ox, NONE, NONE);
	vb = spyre_kernel_load(c.k, 1, ob, NONE, NONE);
	s = spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0, vx, vb, NONE);
	s = spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0, s,
			    spyre_kernel_op(c.k, SPYRE_KOP_SIGMOID, 0, s, NONE,
					    NONE), NONE);
	s = spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0, s,
			    spyre_kernel_param(c.k, SPYRE_KTYPE_F32, 3), NONE);
	spyre_kernel_store(c.k, 2, o, s, NONE, 0);
	ASSERT_EQ(0, spyre_kernel_error(c.k));
	KT_CHECK(&c, "broadcast/strided");
	kt_free(&c);
}

/* A kernel reading x[i + P0] with an active lane past x's extent. */
static struct spyre_kernel *kt_shift_kernel(void)
{
	const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
	struct spyre_kernel *k;
	int i, v;

	if (spyre_kernel_create(dt, 2, 1, 1, 0, &k))
		return NULL;
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	v = spyre_kernel_load(k, 0, spyre_kernel_op(k, SPYRE_KOP_ADD, 0, i,
			spyre_kernel_param(k, SPYRE_KTYPE_I64, 0), NONE),
			NONE, NONE);
	spyre_kernel_store(k, 1, i, v, NONE, 0);
	return k;
}

/*
 * Launch the shift kernel (x and y of @n elements, P0 = @shift) in @dev
 * on @s; returns the stream's result.
 */
static int kt_shift(struct spyre_device *dev, struct spyre_stream *s,
		    uint64_t n, int64_t shift, const void *prog, size_t psize,
		    float *y_out)
{
	struct spyre_bo *x = NULL, *y = NULL, *p = NULL;
	struct spyre_kernel_arg args[2];
	struct spyre_kernel_launch l = { 0 };
	uint64_t param = (uint64_t)shift;
	void *mx, *my;
	int ret;

	ret = spyre_kernel_upload(dev, prog, psize, 0, &p);
	if (!ret)
		ret = spyre_bo_alloc(dev, n * 4, 0, &x);
	if (!ret)
		ret = spyre_bo_alloc(dev, n * 4, 0, &y);
	if (!ret)
		ret = spyre_bo_map(x, &mx) ?: spyre_bo_map(y, &my);
	if (ret)
		goto out;
	for (uint64_t i = 0; i < n; i++)
		((float *)mx)[i] = (float)i;
	memset(my, 0, n * 4);
	args[0] = (struct spyre_kernel_arg){ SPYRE_MEM(x, 0), n,
					     SPYRE_DTYPE_FP32, 0 };
	args[1] = (struct spyre_kernel_arg){ SPYRE_MEM(y, 0), n,
					     SPYRE_DTYPE_FP32, 0 };
	l.prog = SPYRE_MEM(p, 0);
	l.prog_size = (uint32_t)psize;
	l.noperands = 2;
	l.nparams = 1;
	l.npdims = 1;
	l.operands = args;
	l.params = &param;
	l.size[0] = n;
	ret = spyre_stream_kernel(s, &l);
	if (!ret)
		ret = spyre_stream_sync(s, ST_TIMEOUT_NS);
	if (!ret && y_out)
		memcpy(y_out, my, n * 4);
out:
	spyre_bo_free(x);
	spyre_bo_free(y);
	spyre_bo_free(p);
	return ret;
}

/* A second context on the same card: it must be unaffected. */
static void kt_innocent_ok(struct __test_metadata *_metadata,
			   const void *prog, size_t psize)
{
	struct spyre_device *dev;
	struct spyre_stream *s;
	float y[64];

	ASSERT_EQ(0, spyre_device_open(0, &dev));
	ASSERT_EQ(0, spyre_stream_create(dev, SPYRE_PRIORITY_NORMAL, &s));
	ASSERT_EQ(0, kt_shift(dev, s, 64, 0, prog, psize, y));
	for (int i = 0; i < 64; i++)
		ASSERT_EQ((float)i, y[i]);
	EXPECT_EQ(0, spyre_device_error(dev));
	spyre_stream_destroy(s);
	spyre_device_close(dev);
}

TEST_F(kernel, kernel_out_of_bounds_fails_own_context_only)
{
	struct spyre_kernel *k = kt_shift_kernel();
	struct spyre_ref_kernel_operand ro[2];
	struct spyre_ref_kernel_launch rl = { 0 };
	struct spyre_ref_kernel_result res;
	float rx[64] = { 0 }, ry[64];
	uint64_t param = 1;
	const void *prog;
	size_t psize;
	int ret;

	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &prog, &psize));
	/* the reference names the operand, the instruction and the offset */
	ro[0] = (struct spyre_ref_kernel_operand){ rx, 64, SPYRE_DTYPE_FP32, 0 };
	ro[1] = (struct spyre_ref_kernel_operand){ ry, 64, SPYRE_DTYPE_FP32, 0 };
	rl.prog = prog;
	rl.prog_size = psize;
	rl.noperands = 2;
	rl.operands = ro;
	rl.nparams = 1;
	rl.params = &param;
	rl.npdims = 1;
	rl.size[0] = 64;
	ASSERT_EQ(0, spyre_ref_kernel(&rl, &res));
	EXPECT_EQ(SPYRE_STATUS_OUT_OF_BOUNDS, res.status);
	EXPECT_EQ(0 | (3ull << 32), res.detail);	/* o0, load, inst 3 */
	EXPECT_EQ(64, res.detail2);
	/* the card: the job fails, the stream and the context stay failed */
	ret = kt_shift(self->dev, self->s, 64, 1, prog, psize, NULL);
	EXPECT_GT(0, ret);
	EXPECT_NE(-ECANCELED, ret);
	EXPECT_EQ(ret, spyre_stream_error(self->s));
	EXPECT_EQ(ret, kt_shift(self->dev, self->s, 64, 0, prog, psize, NULL));
	kt_innocent_ok(_metadata, prog, psize);
	spyre_kernel_destroy(k);
}

TEST_F(kernel, kernel_bad_program_fails_own_context_only)
{
	struct spyre_kernel *k = kt_shift_kernel();
	const void *prog;
	uint8_t bad[64 + 16 * 8];
	size_t psize;
	int ret;

	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &prog, &psize));
	ASSERT_LE(psize, sizeof(bad));
	memcpy(bad, prog, psize);
	bad[64 + 2 * 16] = 0x65;	/* a reserved opcode */
	ret = kt_shift(self->dev, self->s, 64, 0, bad, psize, NULL);
	EXPECT_GT(0, ret);
	EXPECT_NE(-ECANCELED, ret);
	kt_innocent_ok(_metadata, prog, psize);
	spyre_kernel_destroy(k);
}

/*
 * Random and mutated programs: each either runs or fails its own job;
 * the context that ran it is replaced after a failure, and an innocent
 * context checks its results every 16 programs.
 */
TEST_F_TIMEOUT(kernel, kernel_fuzz_random_and_mutated_programs, 120)
{
	struct spyre_kernel *k = kt_shift_kernel();
	struct spyre_device *dev = self->dev;
	struct spyre_stream *s = self->s;
	uint64_t seed = 0x57;
	const void *prog;
	uint8_t buf[64 + 16 * 24];
	size_t psize;
	int fails = 0;

	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &prog, &psize));
	for (int it = 0; it < 160; it++) {
		size_t n = psize;
		int ret;

		memcpy(buf, prog, psize);
		if (it % 4 == 3) {	/* random instructions */
			n = 64 + 16 * (1 + st_rand(&seed) % 23);
			for (size_t j = 64; j < n; j++)
				buf[j] = (uint8_t)st_rand(&seed);
			((struct spyre_kprog_header *)buf)->ninsts =
				(uint32_t)((n - 64) / 16);
		} else {
			for (int j = 0; j < 1 + it % 3; j++)
				buf[st_rand(&seed) % n] ^=
					(uint8_t)(1u << (st_rand(&seed) % 8));
		}
		/* mostly in range: the mutation decides the outcome */
		ret = kt_shift(dev, s, 64, st_rand(&seed) % 8 ? 0 :
			       (int64_t)(st_rand(&seed) % 2) * 2 - 1, buf, n,
			       NULL);
		if (ret) {
			EXPECT_NE(-ECANCELED, ret) TH_LOG("program %d", it);
			fails++;
			/* a fresh context for the next one */
			if (dev != self->dev) {
				spyre_stream_destroy(s);
				spyre_device_close(dev);
			}
			ASSERT_EQ(0, spyre_device_open(0, &dev));
			ASSERT_EQ(0, spyre_stream_create(dev,
					SPYRE_PRIORITY_NORMAL, &s));
		}
		if (it % 16 == 15)
			kt_innocent_ok(_metadata, prog, psize);
	}
	TH_LOG("%d of 160 programs failed their job", fails);
	EXPECT_LT(0, fails);
	if (dev != self->dev) {
		spyre_stream_destroy(s);
		spyre_device_close(dev);
	}
	spyre_kernel_destroy(k);
}

/*
 * A long reduction kernel (P points x 64 Ki ones) on the normal queue and
 * a small kernel on a high-priority queue submitted after it: the small
 * one completes first (the card switches at a tile boundary), and the
 * long one's sums are still exact.  When the small job's submission
 * outlasted the long kernel (a slow guest: the debug kernel), P doubles,
 * up to 4 Ki points (a longer kernel risks the 5 s command budget on a
 * loaded host); a card that does not switch fails every round.
 */
TEST_F_TIMEOUT(kernel, kernel_preempted_by_high_priority_queue, 120)
{
	enum { PMAX = 4096, R = 65536 };
	const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
	struct spyre_kernel *k, *ks = kt_shift_kernel();
	struct spyre_stream *hi;
	struct spyre_bo *pbo, *obo, *ibo;
	struct spyre_kernel_arg args[2];
	struct spyre_kernel_launch l = { 0 };
	struct spyre_event *e_long, *e_hi;
	const void *prog, *sprog;
	size_t psize, spsize;
	uint64_t t_long, t_hi;
	float y[64], *out;
	uint32_t p;
	void *m;
	int ret, v;

	ret = spyre_stream_create(self->dev, SPYRE_PRIORITY_HIGH, &hi);
	if (ret == -EACCES || ret == -EPERM)
		SKIP(return, "no high-priority queue (CAP_SYS_NICE)");
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 0, 1, 1, &k));
	spyre_kernel_pass(k);
	v = spyre_kernel_load(k, 0, spyre_kernel_op(k, SPYRE_KOP_AND, 0,
			spyre_kernel_idx(k, SPYRE_KTYPE_I32, SPYRE_KDIM_R0),
			spyre_kernel_const(k, SPYRE_KTYPE_I32, 1023), NONE),
			NONE, NONE);
	v = spyre_kernel_reduce(k, SPYRE_KRED_SUM, v, NONE, NONE, NONE);
	spyre_kernel_endpass(k);
	spyre_kernel_store(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I32, 0), v,
			   NONE, 0);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &prog, &psize));
	ASSERT_EQ(0, spyre_kernel_finalize(ks, &sprog, &spsize));
	ASSERT_EQ(0, spyre_kernel_upload(self->dev, prog, psize, 0, &pbo));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &ibo));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4 * PMAX, 0, &obo));
	ASSERT_EQ(0, spyre_bo_map(ibo, &m));
	for (int i = 0; i < 1024; i++)
		((float *)m)[i] = 1.0f;
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e_long));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e_hi));
	for (p = 1024;; p *= 2) {
		args[0] = (struct spyre_kernel_arg){ SPYRE_MEM(ibo, 0), 1024,
						     SPYRE_DTYPE_FP32, 0 };
		args[1] = (struct spyre_kernel_arg){ SPYRE_MEM(obo, 0), p,
						     SPYRE_DTYPE_FP32, 0 };
		l.prog = SPYRE_MEM(pbo, 0);
		l.prog_size = (uint32_t)psize;
		l.noperands = 2;
		l.npdims = 1;
		l.nrdims = 1;
		l.operands = args;
		l.size[0] = p;
		l.size[6] = R;
		ASSERT_EQ(0, spyre_stream_kernel(self->s, &l));
		ASSERT_EQ(0, spyre_event_record(e_long, self->s));
		ASSERT_EQ(0, kt_shift(self->dev, hi, 64, 0, sprog, spsize,
				      y));
		ASSERT_EQ(0, spyre_event_record(e_hi, hi));
		ASSERT_EQ(0, spyre_event_wait(e_hi, ST_TIMEOUT_NS));
		ASSERT_EQ(0, spyre_stream_sync(self->s, 3 * ST_TIMEOUT_NS));
		ASSERT_EQ(0, spyre_event_timestamp(e_long, &t_long));
		ASSERT_EQ(0, spyre_event_timestamp(e_hi, &t_hi));
		for (int i = 0; i < 64; i++)
			ASSERT_EQ((float)i, y[i]);
		ASSERT_EQ(0, spyre_bo_map(obo, &m));
		out = m;
		for (uint32_t i = 0; i < p; i++)
			ASSERT_EQ((float)R, out[i]);
		if (t_hi < t_long || p == PMAX)
			break;
		TH_LOG("%u points: the small job came after the long one's end; again with %u",
		       p, 2 * p);
	}
	EXPECT_LT(t_hi, t_long);
	spyre_event_destroy(e_long);
	spyre_event_destroy(e_hi);
	spyre_bo_free(pbo);
	spyre_bo_free(ibo);
	spyre_bo_free(obo);
	spyre_stream_destroy(hi);
	spyre_kernel_destroy(k);
	spyre_kernel_destroy(ks);
}

/* ---- part 2: gather/scatter, scans, Philox (card VERSION 1.2) ---------- */

/* Part 2 needs VERSION 1.2: older cards skip (libspyre refuses). */
#define KT_NEED_PART2() do {						\
		if (self->info.hw_version < (1u << 16 | 2))		\
			SKIP(return, "card VERSION %u.%u lacks part 2",	\
			     self->info.hw_version >> 16,		\
			     self->info.hw_version & 0xffff);		\
	} while (0)

/*
 * An embedding-style gather and a scatter with colliding rows:
 * out[n, d] = table[idx[n], d] (FP16 table), and acc[idx2[n], d] (op)=
 * src[n, d] with many n sharing a row, in point code (over [N, D]) and
 * in a pass (over r0 = d).  The card must equal the reference bit for
 * bit: the lanes in sequential order, ADD in FP32 and FP16.
 */
TEST_F(kernel, kernel_gather_scatter_collisions_in_lane_order)
{
	enum { V = 64, D = 8, N = 300 };
	uint64_t seed = 0x61;

	KT_NEED_PART2();
	for (int variant = 0; variant < 6; variant++) {
		bool in_pass = variant & 1;
		uint32_t mode = variant < 2 ? SPYRE_KSCAT_STORE :
				SPYRE_KSCAT_ADD;
		uint32_t acc_dt = variant < 4 ? SPYRE_DTYPE_FP32 :
				  SPYRE_DTYPE_FP16;
		struct kt_case c = { 0 };
		int64_t *idx, *idx2;
		float *src;
		int n, d, row, row2, g;
		char what[64];

		kt_fill(&seed, SPYRE_DTYPE_FP16,
			kt_operand(&c, SPYRE_DTYPE_FP16, V * D, NULL), V * D);
		idx = kt_operand(&c, SPYRE_DTYPE_INT64, N, NULL);
		idx2 = kt_operand(&c, SPYRE_DTYPE_INT64, N, NULL);
		src = kt_operand(&c, SPYRE_DTYPE_FP32, N * D, NULL);
		kt_operand(&c, SPYRE_DTYPE_FP32, N * D, NULL);
		kt_fill(&seed, acc_dt, kt_operand(&c, acc_dt, V * D, NULL),
			V * D);
		ASSERT_NE(NULL, idx);
		for (int i = 0; i < N; i++) {
			idx[i] = (int64_t)(st_rand(&seed) % V);
			idx2[i] = (int64_t)(st_rand(&seed) % 5);  /* collide */
		}
		for (int i = 0; i < N * D; i++)	/* sums depend on order */
			src[i] = (float)st_uniform(&seed, -1, 1) *
				 (i % 3 ? 1.0f : 4096.0f);
		c.nparams = 1;
		c.params[0] = D;
		c.npdims = in_pass ? 1 : 2;
		c.nrdims = in_pass ? 1 : 0;
		c.size[0] = N;
		c.size[in_pass ? 6 : 1] = D;
		ASSERT_EQ(0, spyre_kernel_create(c.dtype, 6, 1, c.npdims,
						 c.nrdims, &c.k));
		n = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64, 0);
		row = spyre_kernel_load(c.k, 1, n, NONE, NONE);
		row2 = spyre_kernel_load(c.k, 2, n, NONE, NONE);
		if (in_pass)
			spyre_kernel_pass(c.k);
		d = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64,
				     in_pass ? SPYRE_KDIM_R0 : 1);
		/* gather: table[row * D + d] */
		g = spyre_kernel_load(c.k, 0,
				      spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0,
					spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0,
					    row, spyre_kernel_param(c.k,
						SPYRE_KTYPE_I64, 0), NONE),
					d, NONE), NONE, NONE);
		spyre_kernel_store(c.k, 4, spyre_kernel_affine(c.k,
				   SPYRE_KTYPE_I64, d, 1u, 0), g, NONE, 0);
		spyre_kernel_scatter(c.k, 5,
			spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0,
				spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0, row2,
					spyre_kernel_param(c.k,
						SPYRE_KTYPE_I64, 0), NONE),
				d, NONE),
			spyre_kernel_load(c.k, 3, spyre_kernel_affine(c.k,
				SPYRE_KTYPE_I64, d, 1u, 0), NONE, NONE),
			NONE, mode);
		if (in_pass)
			spyre_kernel_endpass(c.k);
		snprintf(what, sizeof(what), "scatter %s %s %s",
			 mode ? "add" : "store", spyre_dtype_name(acc_dt),
			 in_pass ? "in a pass" : "in point code");
		ASSERT_EQ(0, spyre_kernel_error(c.k)) TH_LOG("%s", what);
		KT_CHECK(&c, what);
		kt_free(&c);
	}
}

/*
 * A gather and a scatter at an index out of range fail their own job
 * (OUT_OF_BOUNDS, the operand and offset the reference names) and make
 * only their own context's error sticky.
 */
TEST_F(kernel, kernel_gather_scatter_out_of_range_own_context_only)
{
	struct spyre_kernel *ks = kt_shift_kernel();
	const void *sprog;
	size_t ssize;

	KT_NEED_PART2();
	ASSERT_NE(NULL, ks);
	ASSERT_EQ(0, spyre_kernel_finalize(ks, &sprog, &ssize));
	for (int scatter = 0; scatter < 2; scatter++) {
		const uint32_t dt[3] = { SPYRE_DTYPE_INT32, SPYRE_DTYPE_FP32,
					 SPYRE_DTYPE_FP32 };
		struct spyre_ref_kernel_operand ro[3];
		struct spyre_ref_kernel_launch rl = { 0 };
		struct spyre_ref_kernel_result res;
		struct spyre_kernel_launch l = { 0 };
		struct spyre_kernel_arg args[3];
		struct spyre_bo *bo[3] = { 0 }, *pbo = NULL;
		struct spyre_device *dev;
		struct spyre_stream *s;
		int32_t idx[32];
		float x[32] = { 0 }, y[32] = { 0 };
		struct spyre_kernel *k;
		const void *prog;
		size_t psize;
		void *m;
		int i, v, ret;

		for (i = 0; i < 32; i++)
			idx[i] = 31 - i;
		idx[20] = 32;			/* one past the end */
		ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
		i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
		v = spyre_kernel_load(k, 0, i, NONE, NONE);
		if (scatter)
			spyre_kernel_scatter(k, 2, v,
					     spyre_kernel_load(k, 1, i, NONE,
							       NONE),
					     NONE, SPYRE_KSCAT_ADD);
		else
			spyre_kernel_store(k, 2, i,
					   spyre_kernel_load(k, 1, v, NONE,
							     NONE), NONE, 0);
		ASSERT_EQ(0, spyre_kernel_finalize(k, &prog, &psize));
		ro[0] = (struct spyre_ref_kernel_operand){ idx, 32,
			SPYRE_DTYPE_INT32, 0 };
		ro[1] = (struct spyre_ref_kernel_operand){ x, 32,
			SPYRE_DTYPE_FP32, 0 };
		ro[2] = (struct spyre_ref_kernel_operand){ y, 32,
			SPYRE_DTYPE_FP32, 0 };
		rl.prog = prog;
		rl.prog_size = psize;
		rl.noperands = 3;
		rl.operands = ro;
		rl.npdims = 1;
		rl.size[0] = 32;
		ASSERT_EQ(0, spyre_ref_kernel(&rl, &res));
		EXPECT_EQ(SPYRE_STATUS_OUT_OF_BOUNDS, res.status);
		EXPECT_EQ(scatter ? 2 | SPYRE_KDETAIL_WRITE : 1, res.detail & 0x1ff);
		EXPECT_EQ(32, res.detail2);
		/* the card, in a context of its own */
		ASSERT_EQ(0, spyre_device_open(0, &dev));
		ASSERT_EQ(0, spyre_stream_create(dev, SPYRE_PRIORITY_NORMAL,
						 &s));
		ret = spyre_kernel_upload(dev, prog, psize, 0, &pbo);
		for (i = 0; !ret && i < 3; i++) {
			ret = spyre_bo_alloc(dev, 128, 0, &bo[i]) ?:
			      spyre_bo_map(bo[i], &m);
			if (!ret)
				memcpy(m, i ? (void *)x : (void *)idx, 128);
			args[i] = (struct spyre_kernel_arg){
				SPYRE_MEM(bo[i], 0), 32, dt[i], 0 };
		}
		ASSERT_EQ(0, ret);
		l.prog = SPYRE_MEM(pbo, 0);
		l.prog_size = (uint32_t)psize;
		l.noperands = 3;
		l.npdims = 1;
		l.operands = args;
		l.size[0] = 32;
		ret = spyre_stream_kernel(s, &l);
		if (!ret)
			ret = spyre_stream_sync(s, ST_TIMEOUT_NS);
		EXPECT_GT(0, ret) TH_LOG("%s", scatter ? "scatter" : "gather");
		EXPECT_NE(-ECANCELED, ret);
		EXPECT_EQ(ret, spyre_stream_error(s));
		for (i = 0; i < 3; i++)
			spyre_bo_free(bo[i]);
		spyre_bo_free(pbo);
		spyre_stream_destroy(s);
		spyre_device_close(dev);
		spyre_kernel_destroy(k);
		/* the fixture's context and a new one carry on */
		EXPECT_EQ(0, kt_shift(self->dev, self->s, 64, 0, sprog, ssize,
				      NULL));
		kt_innocent_ok(_metadata, sprog, ssize);
	}
	spyre_kernel_destroy(ks);
}

/* One scan over x [P, R] (FP32) on the card; the result in @out. */
static void kt_scan(struct __test_metadata *_metadata,
		    FIXTURE_DATA(kernel) *self, uint32_t kind, const float *x,
		    uint64_t P, uint64_t R, void *out)
{
	struct kt_case c = { 0 };
	uint32_t odt = kind >= SPYRE_KRED_ARGMAX ? SPYRE_DTYPE_INT64 :
		       SPYRE_DTYPE_FP32;
	int o;
	char what[32];

	kt_operand(&c, SPYRE_DTYPE_FP32, P * R, x);
	kt_operand(&c, odt, P * R, NULL);
	c.card[1] = out;
	c.nparams = 1;
	c.params[0] = R;
	c.npdims = 1;
	c.nrdims = 1;
	c.size[0] = P;
	c.size[6] = R;
	ASSERT_EQ(0, spyre_kernel_create(c.dtype, 2, 1, 1, 1, &c.k));
	o = spyre_kernel_affine(c.k, SPYRE_KTYPE_I64, NONE, 1, 0);
	spyre_kernel_pass(c.k);
	o = spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0, o,
			    spyre_kernel_idx(c.k, SPYRE_KTYPE_I64,
					     SPYRE_KDIM_R0), NONE);
	spyre_kernel_store(c.k, 1, o,
			   spyre_kernel_scan(c.k, kind,
					     spyre_kernel_load(c.k, 0, o, NONE,
							       NONE), NONE),
			   NONE, 0);
	spyre_kernel_endpass(c.k);
	snprintf(what, sizeof(what), "scan kind %u", kind);
	ASSERT_EQ(0, spyre_kernel_error(c.k));
	KT_CHECK(&c, what);
	kt_free(&c);
}

/*
 * Scans against a CPU loop: cumsum left to right in f32, cumprod,
 * cummax/cummin with NaN and ties (torch's rule), rows longer than a
 * vector so the running value crosses vectors and blocks.
 */
TEST_F_TIMEOUT(kernel, kernel_scans_against_a_cpu_loop, 120)
{
	enum { P = 3, R = 2500 };
	static float x[P * R], f[P * R];
	static int64_t ix[P * R];
	uint64_t seed = 0x62;

	KT_NEED_PART2();
	for (int i = 0; i < P * R; i++)
		x[i] = (float)(int)(st_rand(&seed) % 41 - 20) / 8.0f;
	x[7] = NAN;
	x[R + 1500] = NAN;
	x[R + 1600] = NAN;
	for (int i = 0; i < P * R; i++)	/* cumprod stays finite */
		if (i / R == 2)
			x[i] = 1.0f + x[i] / 4096.0f;
	for (uint32_t kind = SPYRE_KRED_SUM; kind <= SPYRE_KRED_ARGMIN;
	     kind++) {
		bool arg = kind >= SPYRE_KRED_ARGMAX;
		bool max = kind == SPYRE_KRED_MAX || kind == SPYRE_KRED_ARGMAX;
		uint64_t bad = 0;

		kt_scan(_metadata, self, kind, x, P, R, arg ? (void *)ix :
			(void *)f);
		for (int p = 0; p < P; p++) {
			float acc = 0;
			int64_t at = 0;

			for (int r = 0; r < R; r++) {
				float v = x[p * R + r];
				bool take = !r || isnan(v) ||
					    (!isnan(acc) &&
					     (max ? v >= acc : v <= acc));

				if (kind == SPYRE_KRED_SUM)
					acc = r ? acc + v : v;
				else if (kind == SPYRE_KRED_PROD)
					acc = r ? acc * v : v;
				else if (take) {
					acc = v;
					at = r;
				}
				if (arg ? ix[p * R + r] != at :
				    (isnan(acc) ? !isnan(f[p * R + r]) :
				     f[p * R + r] != acc))
					if (bad++ < 3)
						TH_LOG("kind %u [%d, %d]", kind,
						       p, r);
			}
		}
		EXPECT_EQ(0, bad) TH_LOG("kind %u", kind);
	}
}

/*
 * RAND: Random123's first known answer (seed 0, offset 0: elements 0..3
 * are the words of counter 0), and the same (seed, offset, index) giving
 * the same value whatever the launch's shape, tiling or work division:
 * [N] in point code, [N / 7, 7], and a pass over r0 (other tiles).
 */
TEST_F(kernel, kernel_philox_known_answers_and_tiling_independence)
{
	enum { N = 7 * 1500 };
	static const uint32_t kat0[4] = { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
					  0x9b00dbd8 };
	static uint32_t w[3][N];
	static float u[3][N];

	KT_NEED_PART2();
	for (uint32_t kind = SPYRE_KRAND_BITS; kind <= SPYRE_KRAND_NORMAL;
	     kind++) {
		for (int shape = 0; shape < 3; shape++) {
			struct kt_case c = { 0 };
			uint32_t dt = kind == SPYRE_KRAND_BITS ?
				      SPYRE_DTYPE_INT32 : SPYRE_DTYPE_FP32;
			void *out = kind == SPYRE_KRAND_BITS ?
				    (void *)w[shape] : (void *)u[shape];
			int e, v;
			char what[40];

			kt_operand(&c, dt, N, NULL);
			c.card[0] = out;
			c.ulps = kind == SPYRE_KRAND_NORMAL ? 4 : 0;
			c.nparams = 2;
			c.params[0] = kind == SPYRE_KRAND_BITS ? 0 :
				      0x0123456789abcdefull;
			c.params[1] = kind == SPYRE_KRAND_BITS ? 0 : 99;
			c.npdims = shape == 1 ? 2 : 1;
			c.nrdims = shape == 2 ? 1 : 0;
			c.size[0] = shape == 0 ? N : N / 7;
			c.size[shape == 1 ? 1 : 6] = shape ? 7 : 0;
			if (!shape)
				c.size[6] = 0;
			ASSERT_EQ(0, spyre_kernel_create(c.dtype, 1, 2,
							 c.npdims, c.nrdims,
							 &c.k));
			if (shape == 2) {
				spyre_kernel_pass(c.k);
				e = spyre_kernel_op(c.k, SPYRE_KOP_ADD, 0,
					spyre_kernel_op(c.k, SPYRE_KOP_MUL, 0,
						spyre_kernel_idx(c.k,
							SPYRE_KTYPE_I64, 0),
						spyre_kernel_const(c.k,
							SPYRE_KTYPE_I64, 7),
						NONE),
					spyre_kernel_idx(c.k, SPYRE_KTYPE_I64,
							 SPYRE_KDIM_R0), NONE);
			} else {
				e = spyre_kernel_idx(c.k, SPYRE_KTYPE_I64,
						     SPYRE_KDIM_POINT);
			}
			v = spyre_kernel_rand(c.k, kind,
				spyre_kernel_param(c.k, SPYRE_KTYPE_I64, 0),
				spyre_kernel_param(c.k, SPYRE_KTYPE_I64, 1), e);
			spyre_kernel_store(c.k, 0, e, v, NONE, 0);
			if (shape == 2)
				spyre_kernel_endpass(c.k);
			snprintf(what, sizeof(what), "rand kind %u shape %d",
				 kind, shape);
			ASSERT_EQ(0, spyre_kernel_error(c.k)) TH_LOG("%s",
								     what);
			KT_CHECK(&c, what);
			kt_free(&c);
		}
		if (kind == SPYRE_KRAND_BITS) {
			EXPECT_EQ(0, memcmp(w[0], kat0, sizeof(kat0)));
			EXPECT_EQ(0, memcmp(w[0], w[1], sizeof(w[0])));
			EXPECT_EQ(0, memcmp(w[0], w[2], sizeof(w[0])));
		} else {
			EXPECT_EQ(0, memcmp(u[0], u[1], sizeof(u[0])));
			EXPECT_EQ(0, memcmp(u[0], u[2], sizeof(u[0])));
		}
	}
}

TEST_HARNESS_MAIN
