// SPDX-License-Identifier: MIT
/*
 * spyre_exec_gemm: GEMM on the card against the independent fp64
 * reference (spyre_ref_gemm) within the documented tolerances
 * (spyre_ref_compare: fp32 accumulation bound + one rounding to c_dtype).
 *
 *  - small: every input pair (fp32, fp16, bf16, e4m3, e5m2, e4m3 x e5m2,
 *    e5m2 x e4m3, int8) x every output type, over shapes from 1x1x1 with
 *    odd sizes, both transposes, padded leading dimensions, batches with
 *    padded and zero (broadcast) strides, alpha/beta, per-tensor scales,
 *    bias of each dtype, amax, NOSAT; int8 also checks that alpha, scales
 *    and bias are ignored and that the int32 accumulation wraps.  Padding
 *    between rows and batches holds NaN: a card that reads it shows it.
 *    Every C element outside the result (padding) must keep its bytes;
 *    with beta == 0 C starts as NaN (C is not read).
 *  - large: one input set per input pair up to 512 x 512 x 512, computed
 *    by the card into every output type, against ONE fp64 reference.
 *
 * Every operand ends at the end of its BO: a read or write past it hits
 * the guard page and fails the job.
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

#define NO_SCALE 0.0f	/* scale pointer 0 */
#define BCAST (-1)	/* batch stride 0 */

/* the configuration table leaves the trailing, rarely used fields out */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

struct gcfg {
	const char *name;
	uint32_t m, n, k, batch;
	uint32_t flags;
	uint32_t pad_a, pad_b, pad_c;	/* extra elements per row */
	int32_t spad_a, spad_b;		/* extra elements per batch, or BCAST */
	uint32_t spad_c;
	float alpha, beta;
	float sa, sb;			/* NO_SCALE: no pointer */
	uint32_t bias;			/* bias dtype or 0 */
	bool amax;
	uint32_t abs_sa, abs_sb;	/* if set: the batch strides of A, B
					 * (overlapping input matrices) */
	bool specials;			/* A(0,0) NaN, B(0,1) inf (floats) */
};

#define TA SPYRE_GEMM_F_TRANS_A
#define TB SPYRE_GEMM_F_TRANS_B

static const struct gcfg small_cfgs[] = {
	{ "1x1x1", 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "3x5x7", 3, 5, 7, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, true },
	{ "17x9x33", 17, 9, 33, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "3x5x7_ta", 3, 5, 7, 1, TA, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "3x5x7_tb", 3, 5, 7, 1, TB, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "17x9x33_ta_tb_ld", 17, 9, 33, 1, TA | TB, 3, 5, 2, 0, 0, 0,
	  1.0f, 0.0f, NO_SCALE, NO_SCALE, 0, true },
	{ "1x33x1_ld", 1, 33, 1, 1, 0, 1, 7, 3, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "33x1x17_tb", 33, 1, 17, 1, TB, 0, 2, 1, 0, 0, 0, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "batch3_strides", 5, 3, 7, 3, 0, 1, 2, 1, 5, 3, 7, 1.0f, 0.0f,
	  NO_SCALE, NO_SCALE, 0, true },
	{ "batch4_bcast_a_ta", 4, 6, 5, 4, TA, 0, 1, 0, BCAST, 2, 0, 1.0f,
	  0.0f, NO_SCALE, NO_SCALE, 0, false },
	{ "batch2_bcast_b_tb", 7, 4, 3, 2, TB, 2, 0, 3, 1, BCAST, 5, 1.0f,
	  0.0f, NO_SCALE, NO_SCALE, 0, true },
	{ "alpha_beta", 3, 5, 7, 1, 0, 0, 0, 2, 0, 0, 0, -1.5f, 0.75f,
	  NO_SCALE, NO_SCALE, 0, false },
	{ "beta1_batch2", 9, 17, 5, 2, TA, 1, 0, 1, 2, 3, 4, 2.0f, 1.0f,
	  NO_SCALE, NO_SCALE, 0, true },
	{ "scales_bias_fp32_amax", 17, 9, 33, 1, 0, 0, 0, 0, 0, 0, 0, 1.0f,
	  0.0f, 0.5f, 4.0f, SPYRE_DTYPE_FP32, true },
	{ "scale_a_bias_fp16", 9, 17, 5, 1, TB, 0, 0, 1, 0, 0, 0, 0.25f,
	  -2.0f, 3.0f, NO_SCALE, SPYRE_DTYPE_FP16, false },
	{ "scale_b_bias_bf16_batch3", 5, 33, 3, 3, 0, 0, 0, 0, 1, BCAST, 2,
	  1.0f, 0.5f, NO_SCALE, 0.125f, SPYRE_DTYPE_BF16, true },
	{ "nosat_flag", 2, 2, 64, 1, SPYRE_CMD_F_NOSAT, 0, 0, 0, 0, 0, 0,
	  1.0f, 0.0f, NO_SCALE, NO_SCALE, 0, true },
	{ "batch3_overlapping_inputs", 4, 3, 5, 3, 0, 0, 1, 0, 0, 0, 0, 1.0f,
	  0.0f, NO_SCALE, NO_SCALE, 0, false, 5, 4 },
	{ "alpha_overflows_fp16", 9, 7, 33, 1, 0, 0, 0, 0, 0, 0, 0, 8192.0f,
	  0.0f, NO_SCALE, NO_SCALE, 0, true },
	{ "alpha_subnormal", 5, 6, 7, 1, TA, 0, 0, 0, 0, 0, 0, 0x1p-130f,
	  0.0f, NO_SCALE, 0.5f, 0, true },
	{ "nan_inf_amax", 5, 4, 9, 2, TB, 1, 0, 0, 0, 0, 0, 1.0f, 0.5f,
	  2.0f, NO_SCALE, SPYRE_DTYPE_FP32, true, 0, 0, true },
};

#define NCFG (sizeof(small_cfgs) / sizeof(small_cfgs[0]))

/* Operands of one GEMM command, host copies for the reference. */
struct gop {
	struct gcfg cfg;
	uint32_t adt, bdt, cdt;
	uint64_t lda, ldb, ldc, sta, stb, stc;
	uint64_t ea, eb, ec;		/* extents in elements */
	struct st_buf A, B, C, bias, sa, sb, amax;
	uint8_t *c0;			/* C's bytes before the job */
};

static uint64_t extent(uint32_t batch, uint64_t stride, uint64_t rows,
		       uint64_t ld, uint64_t cols)
{
	return (batch - 1) * stride + (rows - 1) * ld + cols;
}

/* Is element @i of a strided batched matrix inside the matrices? */
static bool in_matrix(uint64_t i, uint32_t batch, uint64_t stride,
		      uint64_t rows, uint64_t ld, uint64_t cols)
{
	for (uint32_t b = 0; b < batch; b++) {
		uint64_t o = b * stride;

		if (i >= o && i < o + (rows - 1) * ld + cols &&
		    (i - o) % ld < cols)
			return true;
		if (!stride)
			break;
	}
	return false;
}

static int exps_for(uint32_t dt, int *lo, int *hi)
{
	switch (dt) {
	case SPYRE_DTYPE_FP8_E4M3: *lo = -6; *hi = 3; break;
	case SPYRE_DTYPE_FP8_E5M2: *lo = -14; *hi = 3; break;
	case SPYRE_DTYPE_FP16: *lo = -8; *hi = 2; break;
	default: *lo = -12; *hi = 2; break;
	}
	return 0;
}

/* Fill a strided operand: random elements in the matrices, @poison in
 * the padding. */
static void fill_operand(uint64_t *seed, const struct st_buf *b, uint32_t dt,
			 uint64_t ext, uint32_t batch, uint64_t stride,
			 uint64_t rows, uint64_t ld, uint64_t cols)
{
	int lo, hi;

	exps_for(dt, &lo, &hi);
	for (uint64_t i = 0; i < ext; i++)
		st_store(b->p, dt, i, st_poison(dt));
	for (uint32_t bi = 0; bi < batch; bi++)
		for (uint64_t r = 0; r < rows; r++)
			for (uint64_t c = 0; c < cols; c++)
				st_store(b->p, dt, bi * stride + r * ld + c,
					 st_rand_elem(seed, dt, lo, hi));
}

/* Set up buffers and encode the GEMM of @g (its cfg and dtypes set). */
static int gop_setup(struct st_ctx *x, struct gop *g, uint64_t *seed,
		     struct st_cs *cs)
{
	const struct gcfg *c = &g->cfg;
	bool ta = c->flags & TA, tb = c->flags & TB;
	uint64_t ra = ta ? c->k : c->m, ca = ta ? c->m : c->k;
	uint64_t rb = tb ? c->n : c->k, cb = tb ? c->k : c->n;
	size_t as = spyre_dtype_size(g->adt), bs = spyre_dtype_size(g->bdt);
	size_t cs_ = spyre_dtype_size(g->cdt);
	struct spyre_cmd_gemm *cmd;
	int ret;

	g->lda = ca + c->pad_a;
	g->ldb = cb + c->pad_b;
	g->ldc = c->n + c->pad_c;
	g->sta = c->spad_a == BCAST ? 0 : ra * g->lda + (uint64_t)c->spad_a;
	g->stb = c->spad_b == BCAST ? 0 : rb * g->ldb + (uint64_t)c->spad_b;
	if (c->abs_sa)
		g->sta = c->abs_sa;
	if (c->abs_sb)
		g->stb = c->abs_sb;
	g->stc = c->m * g->ldc + c->spad_c;
	g->ea = extent(c->batch, g->sta, ra, g->lda, ca);
	g->eb = extent(c->batch, g->stb, rb, g->ldb, cb);
	g->ec = extent(c->batch, g->stc, c->m, g->ldc, c->n);

	ret = st_buf_new(x, g->ea * as, &g->A);
	ret = ret ?: st_buf_new(x, g->eb * bs, &g->B);
	ret = ret ?: st_buf_new(x, g->ec * cs_, &g->C);
	if (ret)
		return ret;
	fill_operand(seed, &g->A, g->adt, g->ea, c->batch, g->sta, ra,
		     g->lda, ca);
	fill_operand(seed, &g->B, g->bdt, g->eb, c->batch, g->stb, rb,
		     g->ldb, cb);
	if (c->specials && g->adt != SPYRE_DTYPE_INT8) {
		/* op(A)(0, 0) = NaN, op(B)(0, 1) = +inf (E4M3: 448) */
		st_store(g->A.p, g->adt, 0, spyre_ref_encode(g->adt, NAN, 0));
		st_store(g->B.p, g->bdt, tb ? g->ldb : 1,
			 spyre_ref_encode(g->bdt, INFINITY, 0));
	}
	if (c->beta != 0.0f)
		fill_operand(seed, &g->C, g->cdt, g->ec, c->batch, g->stc,
			     c->m, g->ldc, c->n);
	else
		for (uint64_t i = 0; i < g->ec; i++)
			st_store(g->C.p, g->cdt, i, st_poison(g->cdt));
	g->c0 = malloc(g->C.bytes);
	if (!g->c0)
		return -ENOMEM;
	memcpy(g->c0, g->C.p, g->C.bytes);

	cmd = ST_CS(cs, GEMM, (uint16_t)c->flags, spyre_cmd_gemm);
	spyre_cmd_gemm_init(cmd, (uint16_t)c->flags, g->adt, g->bdt, g->cdt,
			    c->m, c->n, c->k, g->A.va, g->lda, g->B.va, g->ldb,
			    g->C.va, g->ldc);
	spyre_cmd_gemm_batch(cmd, c->batch, g->sta, g->stb, g->stc);
	cmd->alpha = st_f2u(c->alpha);
	cmd->beta = st_f2u(c->beta);
	if (c->bias) {
		ret = st_buf_new(x, c->n * spyre_dtype_size(c->bias), &g->bias);
		if (ret)
			return ret;
		for (uint32_t j = 0; j < c->n; j++)
			st_store(g->bias.p, c->bias, j,
				 st_rand_elem(seed, c->bias, -4, 3));
		cmd->bias_dtype = c->bias;
		cmd->bias = g->bias.va;
	}
	if (c->sa != NO_SCALE) {
		ret = st_buf_new(x, 4, &g->sa);
		if (ret)
			return ret;
		memcpy(g->sa.p, &c->sa, 4);
		cmd->scale_a = g->sa.va;
	}
	if (c->sb != NO_SCALE) {
		ret = st_buf_new(x, 4, &g->sb);
		if (ret)
			return ret;
		memcpy(g->sb.p, &c->sb, 4);
		cmd->scale_b = g->sb.va;
	}
	if (c->amax) {
		ret = st_buf_new(x, 4, &g->amax);
		if (ret)
			return ret;
		memcpy(g->amax.p, &(uint32_t){ 0x7fbadbad }, 4);
		cmd->amax = g->amax.va;
	}
	return 0;
}

/* Reference of @g (from the host copies); @out/@err batch*m*n. */
static int gop_ref(const struct gop *g, double *out, double *err,
		   double *amax, double *amax_err)
{
	const struct gcfg *c = &g->cfg;
	struct spyre_ref_gemm_args a = {
		.flags = c->flags,
		.a_dtype = g->adt, .b_dtype = g->bdt, .c_dtype = g->cdt,
		.bias_dtype = c->bias,
		.m = c->m, .n = c->n, .k = c->k, .batch = c->batch,
		.a = g->A.p, .b = g->B.p, .c = g->c0,
		.bias = c->bias ? g->bias.p : NULL,
		.lda = g->lda, .ldb = g->ldb, .ldc = g->ldc,
		.stride_a = g->sta, .stride_b = g->stb, .stride_c = g->stc,
		.alpha = c->alpha, .beta = c->beta,
		.scale_a = c->sa == NO_SCALE ? 1.0f : c->sa,
		.scale_b = c->sb == NO_SCALE ? 1.0f : c->sb,
	};

	if (g->adt == SPYRE_DTYPE_INT8)
		a.bias_dtype = 0;	/* ignored for int8 */
	return spyre_ref_gemm(&a, out, err, amax, amax_err);
}

/*
 * Compare the card's C (and amax) with the reference; check the padding
 * of C kept its bytes.  Returns the number of problems, logging a few.
 */
static int gop_check(struct __test_metadata *_metadata, const struct gop *g,
		     const double *ref, const double *err, double ramax,
		     double ramax_err)
{
	const struct gcfg *c = &g->cfg;
	uint64_t n = (uint64_t)c->batch * c->m * c->n, first = 0;
	size_t es = spyre_dtype_size(g->cdt);
	uint8_t *dense = malloc(n * es + 1);
	int64_t bad;
	int problems = 0;

	if (!dense)
		return 1;
	for (uint32_t b = 0; b < c->batch; b++)
		for (uint32_t i = 0; i < c->m; i++)
			memcpy(dense + ((uint64_t)(b * c->m + i) * c->n) * es,
			       g->C.p + (b * g->stc + i * g->ldc) * es,
			       c->n * es);
	bad = spyre_ref_compare(dense, g->cdt, ref, err, n, &first);
	if (bad) {
		uint32_t bits = st_load(dense, g->cdt, first);

		TH_LOG("%s %s x %s -> %s: %lld of %llu elements off; first [b %llu, %llu, %llu]: got %#x = %.9g, ref %.9g, err bound %.3g",
		       c->name, spyre_dtype_name(g->adt),
		       spyre_dtype_name(g->bdt), spyre_dtype_name(g->cdt),
		       (long long)bad, (unsigned long long)n,
		       (unsigned long long)(first / ((uint64_t)c->m * c->n)),
		       (unsigned long long)(first / c->n % c->m),
		       (unsigned long long)(first % c->n), bits,
		       spyre_ref_decode(g->cdt, bits), ref[first],
		       err ? err[first] : 0.0);
		problems++;
	}
	free(dense);
	/* padding of C untouched */
	for (uint64_t i = 0; i < g->ec; i++) {
		if (in_matrix(i, c->batch, g->stc, c->m, g->ldc, c->n))
			continue;
		if (memcmp(g->C.p + i * es, g->c0 + i * es, es)) {
			TH_LOG("%s: C padding element %llu changed",
			       c->name, (unsigned long long)i);
			problems++;
			break;
		}
	}
	if (c->amax) {
		struct spyre_ref_tol t;
		uint32_t bits;

		memcpy(&bits, g->amax.p, 4);
		if (spyre_ref_tol(&t, SPYRE_DTYPE_FP32, ramax_err) ||
		    !spyre_ref_close(&t, st_u2f(bits), ramax)) {
			TH_LOG("%s %s -> %s: amax got %#x = %.9g, ref %.9g (bound %.3g)",
			       c->name, spyre_dtype_name(g->adt),
			       spyre_dtype_name(g->cdt), bits, st_u2f(bits),
			       ramax, ramax_err);
			problems++;
		}
	}
	return problems;
}

/* ---- small shapes: every dtype combination ------------------------------ */

FIXTURE(gemm) {
	struct st_ctx x;
};

FIXTURE_VARIANT(gemm) {
	uint32_t a, b, c;
};

#define GV(name, A, B, C) \
	FIXTURE_VARIANT_ADD(gemm, name) { SPYRE_DTYPE_##A, SPYRE_DTYPE_##B, \
					  SPYRE_DTYPE_##C }
GV(fp32_fp32, FP32, FP32, FP32);
GV(fp32_fp16, FP32, FP32, FP16);
GV(fp32_bf16, FP32, FP32, BF16);
GV(fp16_fp32, FP16, FP16, FP32);
GV(fp16_fp16, FP16, FP16, FP16);
GV(fp16_bf16, FP16, FP16, BF16);
GV(bf16_fp32, BF16, BF16, FP32);
GV(bf16_fp16, BF16, BF16, FP16);
GV(bf16_bf16, BF16, BF16, BF16);
GV(e4m3_fp32, FP8_E4M3, FP8_E4M3, FP32);
GV(e4m3_fp16, FP8_E4M3, FP8_E4M3, FP16);
GV(e4m3_bf16, FP8_E4M3, FP8_E4M3, BF16);
GV(e5m2_fp32, FP8_E5M2, FP8_E5M2, FP32);
GV(e5m2_fp16, FP8_E5M2, FP8_E5M2, FP16);
GV(e5m2_bf16, FP8_E5M2, FP8_E5M2, BF16);
GV(e4m3xe5m2_fp32, FP8_E4M3, FP8_E5M2, FP32);
GV(e4m3xe5m2_fp16, FP8_E4M3, FP8_E5M2, FP16);
GV(e4m3xe5m2_bf16, FP8_E4M3, FP8_E5M2, BF16);
GV(e5m2xe4m3_fp32, FP8_E5M2, FP8_E4M3, FP32);
GV(e5m2xe4m3_fp16, FP8_E5M2, FP8_E4M3, FP16);
GV(e5m2xe4m3_bf16, FP8_E5M2, FP8_E4M3, BF16);
GV(int8_int32, INT8, INT8, INT32);

FIXTURE_SETUP(gemm)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, st_dtype_caps(variant->a) |
		     st_dtype_caps(variant->b) | st_dtype_caps(variant->c));
}

FIXTURE_TEARDOWN(gemm)
{
	st_close(&self->x);
}

/* Run every small configuration as its own job; returns the failures. */
static int run_small(struct __test_metadata *_metadata, struct st_ctx *x,
		     uint32_t adt, uint32_t bdt, uint32_t cdt)
{
	bool int8 = adt == SPYRE_DTYPE_INT8;
	uint64_t seed = 0x6e6d6d00 + adt * 97 + bdt * 13 + cdt;
	int failed = 0;

	for (size_t ci = 0; ci < NCFG; ci++) {
		struct gop g = { .cfg = small_cfgs[ci], .adt = adt,
				 .bdt = bdt, .cdt = cdt };
		uint64_t n = (uint64_t)g.cfg.batch * g.cfg.m * g.cfg.n;
		double *ref = malloc(n * sizeof(double));
		double *err = malloc(n * sizeof(double));
		double amax = 0, amax_err = 0;
		struct st_cs *cs = calloc(1, sizeof(*cs));
		int ret;

		if (!ref || !err || !cs)
			return failed + 1;
		if (int8) {
			/* alpha, scales and bias are ignored; beta is 0 or 1:
			 * give odd values to see that they are ignored. */
			if (g.cfg.beta != 0.0f)
				g.cfg.beta = 1.0f;
			g.cfg.alpha = 3.0f;
		}
		ret = gop_setup(x, &g, &seed, cs);
		if (!ret)
			ret = gop_ref(&g, ref, err, &amax, &amax_err);
		if (ret) {
			TH_LOG("%s: setup/reference error %d", g.cfg.name, ret);
			failed++;
		} else {
			ret = st_run(x, cs);
			if (ret) {
				TH_LOG("GEMM %s %s x %s -> %s: job error %d",
				       g.cfg.name, spyre_dtype_name(adt),
				       spyre_dtype_name(bdt),
				       spyre_dtype_name(cdt), ret);
				failed++;
			} else {
				failed += gop_check(_metadata, &g, ref, err,
						    amax, amax_err);
			}
		}
		free(g.c0);
		free(ref);
		free(err);
		free(cs);
		st_free_bufs(x);
		if (ret)
			break;	/* the context is in error now */
	}
	return failed;
}

TEST_F_TIMEOUT(gemm, small_shapes, 120)
{
	EXPECT_EQ(0, run_small(_metadata, &self->x, variant->a, variant->b,
			       variant->c));
}

/* The same with every operand in device memory (DEVMEM PTEs). */
FIXTURE(devmem) {
	struct st_ctx x;
};

FIXTURE_VARIANT(devmem) {
	uint32_t a, b, c;
};

#define DV(name, A, B, C) \
	FIXTURE_VARIANT_ADD(devmem, name) { SPYRE_DTYPE_##A, SPYRE_DTYPE_##B, \
					    SPYRE_DTYPE_##C }
DV(fp32_fp32, FP32, FP32, FP32);
DV(bf16_fp16, BF16, BF16, FP16);
DV(e4m3xe5m2_bf16, FP8_E4M3, FP8_E5M2, BF16);
DV(int8_int32, INT8, INT8, INT32);

FIXTURE_SETUP(devmem)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, st_dtype_caps(variant->a) |
		     st_dtype_caps(variant->b) | st_dtype_caps(variant->c));
	if (self->x.di.devmem_size < (16u << 20))
		SKIP(return, "no device memory");
	self->x.bo_flags = DRM_SPYRE_BO_DEVICE;
}

FIXTURE_TEARDOWN(devmem)
{
	st_close(&self->x);
}

TEST_F_TIMEOUT(devmem, small_shapes, 120)
{
	EXPECT_EQ(0, run_small(_metadata, &self->x, variant->a, variant->b,
			       variant->c));
}

/* int8: the int32 accumulation wraps (C near the int32 limits, beta 1). */
TEST(int8_accumulation_wraps)
{
	struct st_ctx x;
	struct gop g = { .cfg = { "wrap", 4, 3, 64, 1, 0, 0, 0, 0, 0, 0, 0,
				  1.0f, 1.0f, NO_SCALE, NO_SCALE, 0, true },
			 .adt = SPYRE_DTYPE_INT8, .bdt = SPYRE_DTYPE_INT8,
			 .cdt = SPYRE_DTYPE_INT32 };
	double ref[12], err[12], amax, amax_err;
	uint64_t seed = 77;
	struct st_cs *cs;
	int wrapped = 0;
	ST_OPEN(&x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&x, DRM_SPYRE_CAP_INT8);
	cs = calloc(1, sizeof(*cs));
	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, gop_setup(&x, &g, &seed, cs));
	/* A all 127 or -128, B 127/-128: products +-16129 or 16384 */
	for (uint64_t i = 0; i < g.ea; i++)
		g.A.p[i] = (i & 1) ? 0x80 : 0x7f;
	for (uint64_t i = 0; i < g.eb; i++)
		g.B.p[i] = (i % 3) ? 0x7f : 0x80;
	for (uint32_t i = 0; i < 12; i++) {
		int32_t v = (i & 1) ? INT32_MAX - (int32_t)i * 1000 :
				      INT32_MIN + (int32_t)i * 1000;

		memcpy(g.C.p + 4 * ((i / 3) * g.ldc + i % 3), &v, 4);
	}
	memcpy(g.c0, g.C.p, g.C.bytes);
	ASSERT_EQ(0, gop_ref(&g, ref, err, &amax, &amax_err));
	for (int i = 0; i < 12; i++) {
		int32_t c0;

		memcpy(&c0, g.c0 + 4 * ((i / 3) * g.ldc + i % 3), 4);
		if ((c0 > 0) != (ref[i] > 0))
			wrapped++;
	}
	ASSERT_LT(0, wrapped);	/* the data does wrap */
	ASSERT_EQ(0, st_run(&x, cs));
	EXPECT_EQ(0, gop_check(_metadata, &g, ref, err, amax, amax_err));
	free(g.c0);
	free(cs);
	st_close(&x);
}

/* ---- large shapes: one fp64 reference per input set --------------------- */

FIXTURE(big) {
	struct st_ctx x;
};

FIXTURE_VARIANT(big) {
	uint32_t a, b;
	uint32_t m, n, k;
	uint32_t flags;
};

#define BV(name, A, B, M, N, K, F) \
	FIXTURE_VARIANT_ADD(big, name) { SPYRE_DTYPE_##A, SPYRE_DTYPE_##B, \
					 M, N, K, F }
BV(fp32_512, FP32, FP32, 512, 512, 512, 0);
BV(fp16_512, FP16, FP16, 512, 512, 512, 0);
BV(bf16_512, BF16, BF16, 512, 512, 512, 0);
BV(e4m3_512, FP8_E4M3, FP8_E4M3, 512, 512, 512, 0);
BV(e5m2_512, FP8_E5M2, FP8_E5M2, 512, 512, 512, 0);
BV(e4m3xe5m2_512, FP8_E4M3, FP8_E5M2, 512, 512, 512, 0);
BV(e5m2xe4m3_512, FP8_E5M2, FP8_E4M3, 512, 512, 512, 0);
BV(int8_512, INT8, INT8, 512, 512, 512, 0);
BV(fp16_odd_ta_tb, FP16, FP16, 255, 129, 511, TA | TB);
BV(e4m3_odd_ta, FP8_E4M3, FP8_E4M3, 257, 383, 131, TA);

FIXTURE_SETUP(big)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	ST_NEED_CAPS(&self->x, st_dtype_caps(variant->a) |
		     st_dtype_caps(variant->b) | DRM_SPYRE_CAP_BF16);
}

FIXTURE_TEARDOWN(big)
{
	st_close(&self->x);
}

TEST_F_TIMEOUT(big, one_reference_all_outputs, 300)
{
	static const uint32_t fouts[] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16,
					  SPYRE_DTYPE_BF16 };
	static const uint32_t iouts[] = { SPYRE_DTYPE_INT32 };
	bool int8 = variant->a == SPYRE_DTYPE_INT8;
	const uint32_t *outs = int8 ? iouts : fouts;
	unsigned int nout = int8 ? 1 : 3;
	struct gop g[3];
	uint64_t seed = 0xb16 + variant->a * 7 + variant->b;
	uint64_t n = (uint64_t)variant->m * variant->n;
	double *ref = malloc(n * sizeof(double));
	double *err = malloc(n * sizeof(double));
	double amax, amax_err;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	int failed = 0;

	ASSERT_NE(NULL, ref);
	ASSERT_NE(NULL, err);
	ASSERT_NE(NULL, cs);
	for (unsigned int o = 0; o < nout; o++) {
		struct gcfg cfg = { "large", variant->m, variant->n,
				    variant->k, 1, variant->flags, 0, 0, 0,
				    0, 0, 0, 1.0f, 0.0f, NO_SCALE, NO_SCALE,
				    0, true };

		if (int8) {
			cfg.beta = 1.0f;	/* int32 C in, wraps */
		} else {
			cfg.alpha = 0.25f;
			cfg.sa = 2.0f;
			cfg.sb = 0.5f;
		}
		g[o] = (struct gop){ .cfg = cfg, .adt = variant->a,
				     .bdt = variant->b, .cdt = outs[o] };
		if (o == 0) {
			ASSERT_EQ(0, gop_setup(&self->x, &g[0], &seed, cs));
			continue;
		}
		/* same A and B (and bias/scales) for every output type */
		{
			struct gop *p = &g[o];
			struct spyre_cmd_gemm *cmd;
			size_t cs_ = spyre_dtype_size(p->cdt);

			p->A = g[0].A;
			p->B = g[0].B;
			p->sa = g[0].sa;
			p->sb = g[0].sb;
			p->lda = g[0].lda;
			p->ldb = g[0].ldb;
			p->ldc = g[0].ldc;
			p->ec = g[0].ec;
			ASSERT_EQ(0, st_buf_new(&self->x, p->ec * cs_, &p->C));
			ASSERT_EQ(0, st_buf_new(&self->x, 4, &p->amax));
			memcpy(p->amax.p, &(uint32_t){ 0x7fbadbad }, 4);
			for (uint64_t i = 0; i < p->ec; i++)
				st_store(p->C.p, p->cdt, i, st_poison(p->cdt));
			p->c0 = malloc(p->C.bytes);
			ASSERT_NE(NULL, p->c0);
			memcpy(p->c0, p->C.p, p->C.bytes);
			cmd = ST_CS(cs, GEMM, (uint16_t)cfg.flags,
				    spyre_cmd_gemm);
			memcpy(cmd, cs->buf, sizeof(*cmd));	/* g[0]'s */
			cmd->c_dtype = p->cdt;
			cmd->c = p->C.va;
			cmd->amax = p->amax.va;
		}
	}
	/* the card computes while the guest computes the reference */
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, cs, NULL, 0,
				  self->x.sync, 0));
	ASSERT_EQ(0, gop_ref(&g[0], ref, err, &amax, &amax_err));
	ASSERT_EQ(0, st_wait_status(self->x.fd, self->x.sync,
				    6 * ST_TIMEOUT_NS));
	for (unsigned int o = 0; o < nout; o++) {
		failed += gop_check(_metadata, &g[o], ref, err, amax,
				    amax_err);
		free(g[o].c0);
	}
	EXPECT_EQ(0, failed);
	free(ref);
	free(err);
	free(cs);
}

TEST_HARNESS_MAIN
