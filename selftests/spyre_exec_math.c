// SPDX-License-Identifier: MIT
/*
 * spyre_exec_math: ELTWISE (7 ops), REDUCE (SUM, MAX) and ROWOP (SOFTMAX,
 * LAYERNORM, RMSNORM) on the card, for each of fp32/fp16/bf16, against
 * the independent fp64 reference (spyre_ref_eltwise/reduce/rowop) within
 * the documented tolerances.  Small odd shapes with special values (+-0,
 * subnormals, +-inf, NaN, overflow), in-place operation, padded leading
 * dimensions whose padding holds NaN (never read), and one large shape per
 * case.  Outputs end at the end of their BO (guard page after them); the
 * padding of outputs must keep its bytes.
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

static const char *elt_name(uint32_t op)
{
	static const char *const n[] = { "?", "add", "mul", "scale", "relu",
					 "gelu", "silu", "exp" };

	return op < 8 ? n[op] : "?";
}

/* Encode @v (a double) as an element of @dt. */
static uint32_t enc(uint32_t dt, double v)
{
	return spyre_ref_encode(dt, v, 0);
}

/* Compare @n card results (@got, @dt) with the reference; log the first
 * mismatch.  Returns the number of mismatches. */
static int64_t compare(struct __test_metadata *_metadata, const char *what,
		       const void *got, uint32_t dt, const double *ref,
		       double *err, uint64_t n)
{
	uint64_t first = 0;
	int64_t bad;

	bad = spyre_ref_compare(got, dt, ref, err, n, &first);

	if (bad) {
		uint32_t bits = st_load(got, dt, first);

		TH_LOG("%s (%s): %lld of %llu off; first [%llu]: got %#x = %.9g, ref %.9g, err bound %.3g",
		       what, spyre_dtype_name(dt), (long long)bad,
		       (unsigned long long)n, (unsigned long long)first, bits,
		       spyre_ref_decode(dt, bits), ref[first],
		       err ? err[first] : 0.0);
	}
	return bad;
}

/* ---- ELTWISE ------------------------------------------------------------ */

FIXTURE(elt) {
	struct st_ctx x;
};

FIXTURE_VARIANT(elt) {
	uint32_t op;
	uint32_t dt;
};

#define EV(op, dt) FIXTURE_VARIANT_ADD(elt, op##_##dt) { \
		SPYRE_ELT_##op, SPYRE_DTYPE_##dt }
#define EV3(op) EV(op, FP32); EV(op, FP16); EV(op, BF16)
EV3(ADD);
EV3(MUL);
EV3(SCALE);
EV3(RELU);
EV3(GELU);
EV3(SILU);
EV3(EXP);

FIXTURE_SETUP(elt)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, st_dtype_caps(variant->dt));
}

FIXTURE_TEARDOWN(elt)
{
	st_close(&self->x);
}

/* Input values for @op: a range that exercises it, specials first. */
static void elt_inputs(uint64_t *seed, uint32_t op, uint32_t dt, void *p,
		       uint64_t n, bool specials)
{
	double hi = spyre_dtype_max(dt);
	const double sp[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN,
			      spyre_dtype_min_subnormal(dt),
			      -spyre_dtype_min_subnormal(dt), hi, -hi, 1.0,
			      -1.0, 0.5, 88.5, -88.5, 89.0, -104.0, 11.0,
			      11.1, -17.5, 1e-3, -1e-3 };
	uint64_t i = 0;

	if (specials)
		for (; i < n && i < sizeof(sp) / sizeof(sp[0]); i++)
			st_store(p, dt, i, enc(dt, sp[i]));
	for (; i < n; i++) {
		double v;

		switch (op) {
		case SPYRE_ELT_EXP:
			v = dt == SPYRE_DTYPE_FP16 ?
				st_uniform(seed, -20.0, 12.0) :
				st_uniform(seed, -110.0, 95.0);
			break;
		case SPYRE_ELT_GELU:
		case SPYRE_ELT_SILU:
			v = st_uniform(seed, -12.0, 12.0);
			if ((i & 15) == 3)
				v *= 10.0;
			break;
		default:
			/* random exponents over a wide range of the type */
			st_store(p, dt, i, st_rand_elem(seed, dt,
				dt == SPYRE_DTYPE_FP16 ? -24 : -60,
				dt == SPYRE_DTYPE_FP16 ? 15 : 60));
			continue;
		}
		st_store(p, dt, i, enc(dt, v));
	}
}

/* out = op(a, b) on the card vs the reference; @inplace: out is a (or b). */
static int64_t elt_case(struct __test_metadata *_metadata, struct st_ctx *x,
			uint32_t op, uint32_t dt, uint64_t n, int inplace,
			uint64_t *seed)
{
	size_t es = spyre_dtype_size(dt);
	float alpha = -2.5f;
	struct st_buf a, b, out;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	double *ref = malloc(n * sizeof(double));
	double *err = malloc(n * sizeof(double));
	void *a0 = malloc(n * es), *b0 = malloc(n * es);
	char what[64];
	int64_t bad = -1;
	int ret;

	if (!cs || !ref || !err || !a0 || !b0)
		goto out;
	if (st_buf_new(x, n * es, &a) || st_buf_new(x, n * es, &b) ||
	    st_buf_new(x, n * es, &out))
		goto out;
	elt_inputs(seed, op, dt, a.p, n, true);
	elt_inputs(seed, op, dt, b.p, n, false);
	/* b has specials at other positions than a */
	if (n > 40)
		elt_inputs(seed, op, dt, b.p + 17 * es, 23, true);
	memcpy(a0, a.p, n * es);
	memcpy(b0, b.p, n * es);
	for (uint64_t i = 0; i < n; i++)
		st_store(out.p, dt, i, st_poison(dt));

	spyre_cmd_eltwise_init(ST_CS(cs, ELTWISE, 0, spyre_cmd_eltwise), op, dt, n,
			       inplace == 1 ? a.va : inplace == 2 ? b.va :
			       out.va, a.va, b.va, st_f2u(alpha));
	ret = st_run(x, cs);
	if (ret) {
		TH_LOG("ELTWISE %s %s n=%llu: job error %d", elt_name(op),
		       spyre_dtype_name(dt), (unsigned long long)n, ret);
		goto out;
	}
	if (spyre_ref_eltwise(op, dt, n, a0, b0, alpha, ref, err)) {
		TH_LOG("reference failed");
		goto out;
	}
	snprintf(what, sizeof(what), "ELTWISE %s n=%llu%s", elt_name(op),
		 (unsigned long long)n,
		 inplace == 1 ? " out=a" : inplace == 2 ? " out=b" : "");
	bad = compare(_metadata, what,
		      inplace == 1 ? a.p : inplace == 2 ? b.p : out.p, dt,
		      ref, err, n);
	/* the operand that is not the output is unchanged */
	if (inplace != 1 && memcmp(a.p, a0, n * es)) {
		TH_LOG("%s: input a changed", what);
		bad++;
	}
	if (inplace != 2 && memcmp(b.p, b0, n * es)) {
		TH_LOG("%s: input b changed", what);
		bad++;
	}
out:
	free(cs);
	free(ref);
	free(err);
	free(a0);
	free(b0);
	st_free_bufs(x);
	return bad;
}

TEST_F_TIMEOUT(elt, values, 120)
{
	static const uint64_t counts[] = { 1, 7, 4099 };
	uint64_t seed = 0xe17 + variant->op * 31 + variant->dt;
	bool binary = variant->op == SPYRE_ELT_ADD ||
		      variant->op == SPYRE_ELT_MUL;

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		EXPECT_EQ(0, elt_case(_metadata, &self->x, variant->op,
				      variant->dt, counts[i], 0, &seed));
	}
	EXPECT_EQ(0, elt_case(_metadata, &self->x, variant->op, variant->dt,
			      1001, 1, &seed));
	if (binary) {
		EXPECT_EQ(0, elt_case(_metadata, &self->x, variant->op,
				      variant->dt, 1001, 2, &seed));
	}
	/* large */
	EXPECT_EQ(0, elt_case(_metadata, &self->x, variant->op, variant->dt,
			      (1u << 18) + 3, 0, &seed));
}

/* ---- REDUCE ------------------------------------------------------------- */

FIXTURE(red) {
	struct st_ctx x;
};

FIXTURE_VARIANT(red) {
	uint32_t op;
	uint32_t dt;
};

#define RV(op, dt) FIXTURE_VARIANT_ADD(red, op##_##dt) { \
		SPYRE_REDUCE_##op, SPYRE_DTYPE_##dt }
RV(SUM, FP32);
RV(SUM, FP16);
RV(SUM, BF16);
RV(MAX, FP32);
RV(MAX, FP16);
RV(MAX, BF16);

FIXTURE_SETUP(red)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, st_dtype_caps(variant->dt));
}

FIXTURE_TEARDOWN(red)
{
	st_close(&self->x);
}

/* rows x cols with leading dimension ld; @special: rows 0..4 hold NaN,
 * -inf only, +inf and -inf, max finite values, -0 only. */
static int64_t red_case(struct __test_metadata *_metadata, struct st_ctx *x,
			uint32_t op, uint32_t dt, uint32_t rows, uint32_t cols,
			uint64_t ld, bool special, uint64_t *seed)
{
	size_t es = spyre_dtype_size(dt);
	uint64_t ext = (uint64_t)(rows - 1) * ld + cols;
	struct st_buf src, dst;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	double *ref = malloc(rows * sizeof(double));
	double *err = malloc(rows * sizeof(double));
	void *s0 = malloc(ext * es);
	char what[96];
	int64_t bad = -1;
	int ret;

	if (!cs || !ref || !err || !s0)
		goto out;
	if (st_buf_new(x, ext * es, &src) || st_buf_new(x, rows * es, &dst))
		goto out;
	for (uint64_t i = 0; i < ext; i++)
		st_store(src.p, dt, i, (i % ld) < cols ?
			 st_rand_elem(seed, dt, -10, 8) : st_poison(dt));
	if (special && rows >= 5 && cols >= 3) {
		double mx = spyre_dtype_max(dt);

		st_store(src.p, dt, 0 * ld + 1, enc(dt, NAN));
		for (uint32_t j = 0; j < cols; j++) {
			st_store(src.p, dt, 1 * ld + j, enc(dt, -INFINITY));
			st_store(src.p, dt, 3 * ld + j, enc(dt, mx));
			st_store(src.p, dt, 4 * ld + j, enc(dt, -0.0));
		}
		st_store(src.p, dt, 2 * ld + 0, enc(dt, INFINITY));
		st_store(src.p, dt, 2 * ld + 2, enc(dt, -INFINITY));
	}
	memcpy(s0, src.p, ext * es);
	for (uint32_t i = 0; i < rows; i++)
		st_store(dst.p, dt, i, st_poison(dt));

	spyre_cmd_reduce_init(ST_CS(cs, REDUCE, 0, spyre_cmd_reduce), op, dt, rows,
			      cols, dst.va, src.va, ld);
	snprintf(what, sizeof(what), "REDUCE %s %ux%u ld %llu%s",
		 op == SPYRE_REDUCE_SUM ? "sum" : "max", rows, cols,
		 (unsigned long long)ld, special ? " specials" : "");
	ret = st_run(x, cs);
	if (ret) {
		TH_LOG("%s %s: job error %d", what, spyre_dtype_name(dt), ret);
		goto out;
	}
	if (spyre_ref_reduce(op, dt, rows, cols, ld, s0, ref, err)) {
		TH_LOG("reference failed");
		goto out;
	}
	bad = compare(_metadata, what, dst.p, dt, ref, err, rows);
	if (memcmp(src.p, s0, ext * es)) {
		TH_LOG("%s: source changed", what);
		bad++;
	}
out:
	free(cs);
	free(ref);
	free(err);
	free(s0);
	st_free_bufs(x);
	return bad;
}

TEST_F_TIMEOUT(red, values, 120)
{
	uint64_t seed = 0x7ed + variant->op * 3 + variant->dt;
	uint32_t op = variant->op, dt = variant->dt;

	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 1, 1, 1, false,
			      &seed));
	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 3, 7, 9, false,
			      &seed));
	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 64, 1000, 1003,
			      false, &seed));
	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 1001, 3, 3,
			      false, &seed));
	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 1, 4097, 4097,
			      false, &seed));
	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 7, 33, 40, true,
			      &seed));
	/* large */
	EXPECT_EQ(0, red_case(_metadata, &self->x, op, dt, 512, 4096, 4101,
			      false, &seed));
}

/* ---- ROWOP -------------------------------------------------------------- */

FIXTURE(row) {
	struct st_ctx x;
};

FIXTURE_VARIANT(row) {
	uint32_t op;
	uint32_t dt;
};

#define WV(op, dt) FIXTURE_VARIANT_ADD(row, op##_##dt) { \
		SPYRE_ROW_##op, SPYRE_DTYPE_##dt }
WV(SOFTMAX, FP32);
WV(SOFTMAX, FP16);
WV(SOFTMAX, BF16);
WV(LAYERNORM, FP32);
WV(LAYERNORM, FP16);
WV(LAYERNORM, BF16);
WV(RMSNORM, FP32);
WV(RMSNORM, FP16);
WV(RMSNORM, BF16);

FIXTURE_SETUP(row)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, st_dtype_caps(variant->dt));
}

FIXTURE_TEARDOWN(row)
{
	st_close(&self->x);
}

struct rcfg {
	uint32_t rows, cols;
	uint32_t pad_src, pad_dst;
	bool gamma, beta, inplace, special;
	float eps;
	double offset;		/* added to every input (LAYERNORM mean) */
};

static int64_t row_case(struct __test_metadata *_metadata, struct st_ctx *x,
			uint32_t op, uint32_t dt, const struct rcfg *r,
			uint64_t *seed)
{
	size_t es = spyre_dtype_size(dt);
	uint64_t lds = r->cols + r->pad_src;
	uint64_t ldd = r->inplace ? lds : r->cols + r->pad_dst;
	uint64_t exs = (uint64_t)(r->rows - 1) * lds + r->cols;
	uint64_t exd = (uint64_t)(r->rows - 1) * ldd + r->cols;
	uint64_t n = (uint64_t)r->rows * r->cols;
	struct st_buf src, dst, gam, bet;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	double *ref = malloc(n * sizeof(double));
	double *err = malloc(n * sizeof(double));
	void *s0 = malloc(exs * es), *dense = malloc(n * es);
	uint8_t *d0 = malloc(exd * es);
	const struct st_buf *out;
	char what[128];
	int64_t bad = -1;
	int ret;

	if (!cs || !ref || !err || !s0 || !dense || !d0)
		goto out;
	if (st_buf_new(x, exs * es, &src) || st_buf_new(x, r->cols * 4, &gam) ||
	    st_buf_new(x, r->cols * 4, &bet))
		goto out;
	if (!r->inplace && st_buf_new(x, exd * es, &dst))
		goto out;
	out = r->inplace ? &src : &dst;
	for (uint64_t i = 0; i < exs; i++)
		st_store(src.p, dt, i, (i % lds) < r->cols ?
			 enc(dt, r->offset + st_uniform(seed, -4.0, 4.0) *
			     (1 + (i % 5 == 0) * 3)) : st_poison(dt));
	if (r->special && r->rows >= 4 && r->cols >= 4) {
		/* row 0 constant, row 1 with -inf entries, row 2 one large
		 * value, row 3 NaN (softmax only: NaN row) */
		for (uint32_t j = 0; j < r->cols; j++)
			st_store(src.p, dt, j, enc(dt, 0.75));
		st_store(src.p, dt, lds + 1, enc(dt, -INFINITY));
		if (op == SPYRE_ROW_SOFTMAX) {
			st_store(src.p, dt, lds + 3, enc(dt, -INFINITY));
			st_store(src.p, dt, 2 * lds + 2,
				 enc(dt, dt == SPYRE_DTYPE_FP16 ? 6e4 : 1e30));
			st_store(src.p, dt, 3 * lds + 1, enc(dt, NAN));
		} else {
			/* norms: a finite large value instead of -inf */
			st_store(src.p, dt, lds + 1, enc(dt, -200.0));
			st_store(src.p, dt, 2 * lds + 2, enc(dt, 100.0));
		}
	}
	for (uint32_t j = 0; j < r->cols; j++) {
		float gv = (float)st_uniform(seed, -2.0, 2.0);
		float bv = (float)st_uniform(seed, -1.0, 1.0);

		memcpy(gam.p + 4 * j, &gv, 4);
		memcpy(bet.p + 4 * j, &bv, 4);
	}
	memcpy(s0, src.p, exs * es);
	if (!r->inplace)
		for (uint64_t i = 0; i < exd; i++)
			st_store(dst.p, dt, i, st_poison(dt));
	memcpy(d0, out->p, exd * es);

	spyre_cmd_rowop_init(ST_CS(cs, ROWOP, 0, spyre_cmd_rowop), op, dt, r->rows,
			     r->cols, out->va, ldd, src.va, lds,
			     r->gamma ? gam.va : 0, r->beta ? bet.va : 0,
			     st_f2u(r->eps));
	snprintf(what, sizeof(what), "ROWOP %s %ux%u ld %llu/%llu%s%s%s%s eps %g",
		 op == SPYRE_ROW_SOFTMAX ? "softmax" :
		 op == SPYRE_ROW_LAYERNORM ? "layernorm" : "rmsnorm",
		 r->rows, r->cols, (unsigned long long)lds,
		 (unsigned long long)ldd, r->gamma ? " gamma" : "",
		 r->beta ? " beta" : "", r->inplace ? " in-place" : "",
		 r->special ? " specials" : "", r->eps);
	ret = st_run(x, cs);
	if (ret) {
		TH_LOG("%s %s: job error %d", what, spyre_dtype_name(dt), ret);
		goto out;
	}
	if (spyre_ref_rowop(op, dt, r->rows, r->cols, lds, s0,
			    r->gamma ? (const float *)gam.p : NULL,
			    r->beta ? (const float *)bet.p : NULL, r->eps, ref,
			    err)) {
		TH_LOG("reference failed");
		goto out;
	}
	for (uint32_t i = 0; i < r->rows; i++)
		memcpy((uint8_t *)dense + (uint64_t)i * r->cols * es,
		       out->p + i * ldd * es, r->cols * es);
	bad = compare(_metadata, what, dense, dt, ref, err, n);
	for (uint64_t i = 0; i < exd; i++) {
		if (i % ldd < r->cols)
			continue;
		if (memcmp(out->p + i * es, d0 + i * es, es)) {
			TH_LOG("%s: output padding element %llu changed", what,
			       (unsigned long long)i);
			bad++;
			break;
		}
	}
	if (!r->inplace && memcmp(src.p, s0, exs * es)) {
		TH_LOG("%s: source changed", what);
		bad++;
	}
out:
	free(cs);
	free(ref);
	free(err);
	free(s0);
	free(dense);
	free(d0);
	st_free_bufs(x);
	return bad;
}

TEST_F_TIMEOUT(row, values, 120)
{
	static const struct rcfg cfgs[] = {
		{ 1, 1, 0, 0, false, false, false, false, 1e-5f, 0.0 },
		{ 3, 7, 2, 4, true, false, false, false, 1e-5f, 0.0 },
		{ 17, 100, 0, 3, true, true, false, false, 1e-3f, 0.0 },
		{ 64, 1, 1, 1, true, true, false, false, 1e-5f, 0.0 },
		{ 5, 33, 3, 0, false, true, true, false, 0.0f, 0.0 },
		{ 9, 65, 0, 0, true, true, false, true, 1e-5f, 0.0 },
		{ 8, 257, 1, 2, true, true, false, false, 1e-5f, 100.0 },
		/* large */
		{ 128, 4096, 3, 0, true, true, false, false, 1e-5f, 0.0 },
	};
	uint64_t seed = 0x50f + variant->op * 11 + variant->dt;

	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		EXPECT_EQ(0, row_case(_metadata, &self->x, variant->op,
				      variant->dt, &cfgs[i], &seed))
			TH_LOG("config %zu", i);
	}
}

TEST_HARNESS_MAIN
