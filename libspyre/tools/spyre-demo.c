// SPDX-License-Identifier: MIT
/*
 * spyre-demo - one transformer block on the card, in fp16 and in scaled
 * fp8, checked against the fp64 reference.
 *
 *   spyre-demo [-r RUNS] [-b REPS] [DEV]
 *	DEV: index (default 0) or PCI address
 *
 * The block, its parameters and its steps are those of spyre-block.h
 * (pre-norm, causal self-attention and a SiLU-gated MLP; seq 32, d_model
 * 128, 4 heads of 32, ffn 256; fp16, and scaled fp8: E4M3 weights and
 * projection inputs with per-tensor scales, the GEMMs reporting their
 * amax); this program implements its operations over libspyre (struct
 * sink), and spyre-ceilings runs the same description natively for
 * `make bench`.  The activation scales are calibrated on the card's fp16
 * run.
 *
 * Each run goes through the card three ways: as stream operations (one
 * job per operation, the libspyre stream helpers), as a graph (the same
 * operations recorded once into one command buffer, one job per launch)
 * and as one launch of the graph repeated 20 times (one submit ioctl).
 * Printed: time per step (device time from TIMESTAMP commands between the
 * steps of the graph, host time spent in the stream helper call), and the
 * share of the wall time spent in dispatch (host time inside libspyre
 * submission calls).
 *
 * -b REPS (for `make bench`, scripts/run-bench.sh): the repeated launch is
 * measured REPS times (default 1), and after each precision's report come
 * two lines "demo: figure block-PREC CLOCK MEDIAN MIN MAX REPS" (PREC fp16
 * or fp8): microseconds per block of the graph launched 20 times in one
 * submit, on the card's clock ("card": events, i.e. TIMESTAMP jobs, just
 * before and after the launch, so the jobs' switches count) and on the
 * wall clock ("wall": launch to stream sync).
 *
 * Checks (exit status 1 if any fails, "demo: OK" otherwise):
 *  - every step against the fp64 reference (spyre_ref_*) computed from
 *    the card's own inputs to that step: each element within the bound of
 *    the reference's error model (fp32 accumulation error + one rounding
 *    to the output dtype); fp8 quantization bit-exact; the GEMM amax
 *    within its bound;
 *  - the block output against an fp64 model run from the same input with
 *    the unquantized fp64 weights: the normwise relative error of the
 *    block's update y - x must stay below 1e-2 for fp16 and 1.5e-1 for
 *    fp8 (E4M3 keeps 3 mantissa bits: 2^-4 relative rounding per value);
 *  - the graph and the repeated launch give bit-identical outputs to the
 *    stream run, and the staged device-to-host copy of y matches.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <spyre/spyre.h>
#include <spyre/spyre_ref.h>

#include "spyre-block.h"

#define TOL_FP16	1e-2
#define TOL_FP8		1.5e-1
#define REPEAT		20
#define MAX_REPS	32

#define TIMEOUT_NS	(60ull * 1000000000ull)
#define KiB		1024u

#define CHECK(expr) do {						\
		int ret_ = (expr);					\
		if (ret_) {						\
			fprintf(stderr, "demo: %s failed: %s (%d)\n",	\
				#expr, spyre_strerror(ret_), ret_);	\
			exit(1);					\
		}							\
	} while (0)

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- device buffers ----------------------------------------------------- */

struct buf {
	struct spyre_bo *bo;
	uint64_t off;
	uint64_t bytes;
	void *p;		/* CPU address (system memory), else NULL */
};

struct arena {
	struct spyre_bo *bo;
	uint8_t *map;
	uint64_t used;
};

static struct buf get(struct arena *a, uint64_t bytes)
{
	struct buf b = { a->bo, a->used, bytes, NULL };

	if (a->map)
		b.p = a->map + a->used;
	a->used = (a->used + bytes + 255) & ~255ull;
	if (a->used > spyre_bo_size(a->bo)) {
		fprintf(stderr, "demo: arena too small\n");
		exit(1);
	}
	return b;
}

/*
 * The block's tensors (spyre-block.h): the weights in device memory, the
 * activations in system memory (read back for the checks); and the
 * graph's timestamps.
 */
struct tensors {
	struct buf b[BLK_NTENSORS];
	struct buf ts;
};

/* ---- the model on the host ---------------------------------------------- */

#define QKV_W	(BLK_DM * 3 * BLK_DM)
#define SQ_W	(BLK_DM * BLK_DM)
#define FF_W	(BLK_DM * BLK_FF)

struct model {
	double x[BLK_SEQ * BLK_DM];
	double wqkv[QKV_W], wo[SQ_W], wg[FF_W], wu[FF_W], wd[FF_W];
	double g1[BLK_DM], g2[BLK_DM];
	/* encoded copies, as uploaded */
	uint16_t x16[BLK_SEQ * BLK_DM];
	uint16_t wqkv16[QKV_W], wo16[SQ_W], wg16[FF_W], wu16[FF_W],
		 wd16[FF_W];
	uint8_t wqkv8[QKV_W], wo8[SQ_W], wg8[FF_W], wu8[FF_W], wd8[FF_W];
	float g1f[BLK_DM], g2f[BLK_DM];
	uint16_t mask16[BLK_NH * BLK_SEQ * BLK_SEQ];
	float scales[BLK_NSCALES];
};

static struct model md;

static double amax64(const double *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

/* A weight in fp16, and in E4M3 scaled by *@scale = amax / 448. */
static void encode_weight(const double *w, uint16_t *w16, uint8_t *w8,
			  size_t n, float *scale)
{
	double *tmp = malloc(n * sizeof(double));
	double s;

	CHECK(spyre_ref_from_f64(w16, SPYRE_DTYPE_FP16, w, n, 0));
	s = (float)(amax64(w, n) / BLK_E4M3_MAX);
	for (size_t i = 0; i < n; i++)
		tmp[i] = w[i] / s;
	CHECK(spyre_ref_from_f64(w8, SPYRE_DTYPE_FP8_E4M3, tmp, n, 0));
	*scale = (float)s;
	free(tmp);
}

static void make_model(void)
{
	double *const w[BLK_NWEIGHTS] = { md.wqkv, md.wo, md.wg, md.wu,
					  md.wd };
	uint16_t *const w16[BLK_NWEIGHTS] = { md.wqkv16, md.wo16, md.wg16,
					      md.wu16, md.wd16 };
	uint8_t *const w8[BLK_NWEIGHTS] = { md.wqkv8, md.wo8, md.wg8, md.wu8,
					    md.wd8 };

	blk_params(md.x, w, md.g1, md.g2);
	/* the input as the card sees it, and the fp64 model uses */
	CHECK(spyre_ref_from_f64(md.x16, SPYRE_DTYPE_FP16, md.x,
				 BLK_SEQ * BLK_DM, 0));
	CHECK(spyre_ref_to_f64(md.x, md.x16, SPYRE_DTYPE_FP16,
			       BLK_SEQ * BLK_DM));
	for (int j = 0; j < BLK_NWEIGHTS; j++)
		encode_weight(w[j], w16[j], w8[j],
			      blk_tensors[blk_weights[j].w16].n,
			      &md.scales[j]);
	for (int i = 0; i < BLK_DM; i++) {
		md.g1f[i] = (float)md.g1[i];
		md.g2f[i] = (float)md.g2[i];
	}
	for (int h = 0; h < BLK_NH; h++)
		for (int i = 0; i < BLK_SEQ; i++)
			for (int j = 0; j < BLK_SEQ; j++)
				md.mask16[(h * BLK_SEQ + i) * BLK_SEQ + j] =
					spyre_ref_f64_to_fp16(blk_mask(i, j));
}

/* fp64 model: y from x with the unquantized weights. */
static void rmsnorm64(const double *x, const double *g, double *y, int rows,
		      int cols)
{
	for (int r = 0; r < rows; r++) {
		double ms = 0;

		for (int c = 0; c < cols; c++)
			ms += x[r * cols + c] * x[r * cols + c];
		ms = 1.0 / sqrt(ms / cols + (double)BLK_EPS);
		for (int c = 0; c < cols; c++)
			y[r * cols + c] = x[r * cols + c] * ms * g[c];
	}
}

/* c[m x n] = a[m x k] (lda) * b[k x n] (ldb), or b^T with b n x k. */
static void matmul64(const double *a, int lda, const double *b, int ldb,
		     bool tb, double *c, int ldc, int m, int n, int k,
		     double alpha)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;

			for (int l = 0; l < k; l++)
				s += a[i * lda + l] *
				     (tb ? b[j * ldb + l] : b[l * ldb + j]);
			c[i * ldc + j] = alpha * s;
		}
}

static void model64(double *y)
{
	static double h1[BLK_SEQ * BLK_DM], qkv[BLK_SEQ * 3 * BLK_DM],
		      s[BLK_SEQ * BLK_SEQ], attn[BLK_SEQ * BLK_DM],
		      x1[BLK_SEQ * BLK_DM], h2[BLK_SEQ * BLK_DM],
		      gate[BLK_SEQ * BLK_FF], up[BLK_SEQ * BLK_FF],
		      dn[BLK_SEQ * BLK_DM];

	rmsnorm64(md.x, md.g1, h1, BLK_SEQ, BLK_DM);
	matmul64(h1, BLK_DM, md.wqkv, 3 * BLK_DM, false, qkv, 3 * BLK_DM,
		 BLK_SEQ, 3 * BLK_DM, BLK_DM, 1.0);
	for (int h = 0; h < BLK_NH; h++) {
		matmul64(qkv + h * BLK_DH, 3 * BLK_DM,
			 qkv + BLK_DM + h * BLK_DH, 3 * BLK_DM, true, s,
			 BLK_SEQ, BLK_SEQ, BLK_SEQ, BLK_DH, 1.0 / sqrt(BLK_DH));
		for (int i = 0; i < BLK_SEQ; i++) {
			double *row = s + i * BLK_SEQ, mx = -INFINITY, sum = 0;

			for (int j = 0; j < BLK_SEQ; j++) {
				row[j] += j > i ? BLK_MASK_NEG : 0.0;
				mx = fmax(mx, row[j]);
			}
			for (int j = 0; j < BLK_SEQ; j++) {
				row[j] = exp(row[j] - mx);
				sum += row[j];
			}
			for (int j = 0; j < BLK_SEQ; j++)
				row[j] /= sum;
		}
		matmul64(s, BLK_SEQ, qkv + 2 * BLK_DM + h * BLK_DH, 3 * BLK_DM,
			 false, attn + h * BLK_DH, BLK_DM, BLK_SEQ, BLK_DH,
			 BLK_SEQ, 1.0);
	}
	matmul64(attn, BLK_DM, md.wo, BLK_DM, false, x1, BLK_DM, BLK_SEQ,
		 BLK_DM, BLK_DM, 1.0);
	for (int i = 0; i < BLK_SEQ * BLK_DM; i++)
		x1[i] += md.x[i];
	rmsnorm64(x1, md.g2, h2, BLK_SEQ, BLK_DM);
	matmul64(h2, BLK_DM, md.wg, BLK_FF, false, gate, BLK_FF, BLK_SEQ,
		 BLK_FF, BLK_DM, 1.0);
	matmul64(h2, BLK_DM, md.wu, BLK_FF, false, up, BLK_FF, BLK_SEQ,
		 BLK_FF, BLK_DM, 1.0);
	for (int i = 0; i < BLK_SEQ * BLK_FF; i++)
		gate[i] = gate[i] / (1.0 + exp(-gate[i])) * up[i];
	matmul64(gate, BLK_FF, md.wd, BLK_DM, false, dn, BLK_DM, BLK_SEQ,
		 BLK_DM, BLK_FF, 1.0);
	for (int i = 0; i < BLK_SEQ * BLK_DM; i++)
		y[i] = x1[i] + dn[i];
}

/* ---- recording the block: into a stream or into a command buffer ------- */

#define MAX_STEPS 32

/* The operations of spyre-block.h over libspyre: struct blk_ops' ctx. */
struct sink {
	struct spyre_stream *s;		/* stream operations, or */
	struct spyre_cmdbuf *cb;	/* commands for a graph */
	const struct tensors *t;
	int nsteps, nops;
	const char *name[MAX_STEPS];
	char what[MAX_STEPS][40];
	double submit_ns[MAX_STEPS];	/* stream: host time in the call */
};

static void k_step(void *ctx, const char *name, const char *what)
{
	struct sink *k = ctx;

	if (k->nsteps == MAX_STEPS) {
		fprintf(stderr, "demo: too many steps\n");
		exit(1);
	}
	k->name[k->nsteps] = name;
	snprintf(k->what[k->nsteps], sizeof(k->what[0]), "%s", what);
	if (k->cb)
		CHECK(spyre_cmdbuf_timestamp(k->cb, spyre_bo_va(k->t->ts.bo) +
					     k->t->ts.off + 8ull * k->nsteps));
	k->nsteps++;
}

static void end_steps(struct sink *k)
{
	if (k->cb)
		CHECK(spyre_cmdbuf_timestamp(k->cb, spyre_bo_va(k->t->ts.bo) +
					     k->t->ts.off + 8ull * k->nsteps));
}

/* Run one operation: encode it (graph) or enqueue it (stream, timed). */
#define OP(k, cbcall, scall) do {					\
		(k)->nops++;						\
		if ((k)->cb) {						\
			CHECK(cbcall);					\
		} else {						\
			double t0_ = now_ns();				\
									\
			CHECK(scall);					\
			(k)->submit_ns[(k)->nsteps - 1] += now_ns() - t0_; \
		}							\
	} while (0)

/* Where a tensor reference of the block lies. */
static struct spyre_mem k_mem(const struct sink *k, struct blk_ref r)
{
	const struct buf *b;

	if (r.t == BLK_NONE)
		return SPYRE_MEM_NONE;
	b = &k->t->b[r.t];
	return SPYRE_MEM(b->bo, b->off + blk_offset(r));
}

static void k_gemm(void *ctx, const struct blk_gemm *bg)
{
	struct sink *k = ctx;
	struct spyre_gemm g;

	memset(&g, 0, sizeof(g));
	g.flags = bg->flags;
	g.a_dtype = bg->a_dtype;
	g.b_dtype = bg->b_dtype;
	g.c_dtype = bg->c_dtype;
	g.m = bg->m;
	g.n = bg->n;
	g.k = bg->k;
	g.batch = bg->batch;
	g.a = k_mem(k, bg->a);
	g.b = k_mem(k, bg->b);
	g.c = k_mem(k, bg->c);
	g.lda = bg->lda;
	g.ldb = bg->ldb;
	g.ldc = bg->ldc;
	g.stride_a = bg->stride_a;
	g.stride_b = bg->stride_b;
	g.stride_c = bg->stride_c;
	g.alpha = bg->alpha;
	g.beta = bg->beta;
	g.scale_a = k_mem(k, bg->scale_a);
	g.scale_b = k_mem(k, bg->scale_b);
	g.amax = k_mem(k, bg->amax);
	OP(k, spyre_cmdbuf_gemm(k->cb, &g), spyre_stream_gemm(k->s, &g));
}

static void k_eltwise(void *ctx, uint32_t op, uint32_t dtype, uint64_t n,
		      struct blk_ref out, struct blk_ref a, struct blk_ref b,
		      float alpha)
{
	struct sink *k = ctx;

	OP(k, spyre_cmdbuf_eltwise(k->cb, op, dtype, n, k_mem(k, out),
				   k_mem(k, a), k_mem(k, b), alpha),
	   spyre_stream_eltwise(k->s, op, dtype, n, k_mem(k, out),
				k_mem(k, a), k_mem(k, b), alpha));
}

/* A stream helper per ROWOP the block uses. */
static int stream_rowop(struct spyre_stream *s, uint32_t op, uint32_t dtype,
			uint32_t rows, uint32_t cols, struct spyre_mem dst,
			struct spyre_mem src, struct spyre_mem gamma,
			float eps)
{
	switch (op) {
	case SPYRE_ROW_RMSNORM:
		return spyre_stream_rmsnorm(s, dtype, rows, cols, dst, 0, src,
					    0, gamma, eps);
	case SPYRE_ROW_SOFTMAX:
		return spyre_stream_softmax(s, dtype, rows, cols, dst, 0, src,
					    0);
	default:
		return -EINVAL;
	}
}

static void k_rowop(void *ctx, uint32_t op, uint32_t dtype, uint32_t rows,
		    uint32_t cols, struct blk_ref dst, struct blk_ref src,
		    struct blk_ref gamma, float eps)
{
	struct sink *k = ctx;

	OP(k, spyre_cmdbuf_rowop(k->cb, op, dtype, rows, cols, k_mem(k, dst),
				 0, k_mem(k, src), 0, k_mem(k, gamma),
				 SPYRE_MEM_NONE, eps),
	   stream_rowop(k->s, op, dtype, rows, cols, k_mem(k, dst),
			k_mem(k, src), k_mem(k, gamma), eps));
}

static void k_convert(void *ctx, struct blk_ref dst, uint32_t ddt,
		      struct blk_ref src, uint32_t sdt, uint64_t n)
{
	struct sink *k = ctx;

	OP(k, spyre_cmdbuf_convert(k->cb, k_mem(k, dst), ddt, k_mem(k, src),
				   sdt, n, 0),
	   spyre_stream_convert(k->s, k_mem(k, dst), ddt, k_mem(k, src), sdt,
				n, 0));
}

static const struct blk_ops sink_ops = {
	.step = k_step,
	.gemm = k_gemm,
	.eltwise = k_eltwise,
	.rowop = k_rowop,
	.convert = k_convert,
};

static void record_block(struct sink *k, bool fp8)
{
	blk_run(&sink_ops, k, fp8, md.scales);
	end_steps(k);
}

/* ---- checks ------------------------------------------------------------- */

static int failures;

/*
 * Compare @n card results (@got, @dtype) with the reference; print the
 * largest |got - ref| as a fraction of its allowed bound.
 */
static void compare(const char *name, const void *got, uint32_t dtype,
		    const double *ref, const double *err, uint64_t n)
{
	uint64_t first = 0;
	int64_t bad = spyre_ref_compare(got, dtype, ref, err, n, &first);
	double worst = 0;

	for (uint64_t i = 0; i < n; i++) {
		struct spyre_ref_tol tol;
		uint32_t bits = 0;
		double g, lim;

		memcpy(&bits, (const uint8_t *)got + i * spyre_dtype_size(dtype),
		       spyre_dtype_size(dtype));
		g = spyre_ref_decode(dtype, bits);
		if (spyre_ref_tol(&tol, dtype, err ? err[i] : 0) ||
		    !isfinite(g) || !isfinite(ref[i]))
			continue;
		lim = tol.atol + tol.rtol * fabs(ref[i]);
		if (lim > 0)
			worst = fmax(worst, fabs(g - ref[i]) / lim);
	}
	if (bad) {
		uint32_t bits = 0;

		memcpy(&bits, (const uint8_t *)got +
		       first * spyre_dtype_size(dtype), spyre_dtype_size(dtype));
		printf("demo:   %-10s FAIL: %" PRId64 " of %" PRIu64
		       " outside the bound, first [%" PRIu64 "] got %.6g want "
		       "%.6g (err bound %.3g)\n", name, bad, n, first,
		       spyre_ref_decode(dtype, bits), ref[first],
		       err ? err[first] : 0.0);
		failures++;
	} else {
		printf("demo:   %-10s %6" PRIu64 " values ok, worst %.2f of "
		       "the bound\n", name, n, worst);
	}
}

/* Bit-exact check of a quantization (dtype conversion is exact). */
static void compare_exact(const char *name, const void *got,
			  const void *want, size_t bytes)
{
	if (memcmp(got, want, bytes)) {
		printf("demo:   %-10s FAIL: not bit-exact\n", name);
		failures++;
	} else {
		printf("demo:   %-10s %6zu values bit-exact\n", name, bytes);
	}
}

static void gemm_args(struct spyre_ref_gemm_args *r, uint32_t dt,
		      const void *a, const void *b, uint32_t m, uint32_t n,
		      uint32_t k)
{
	memset(r, 0, sizeof(*r));
	r->a_dtype = r->b_dtype = dt;
	r->c_dtype = SPYRE_DTYPE_FP16;
	r->m = m;
	r->n = n;
	r->k = k;
	r->batch = 1;
	r->a = a;
	r->b = b;
	r->lda = k;
	r->ldb = n;
	r->ldc = n;
	r->alpha = 1.0f;
	r->scale_a = r->scale_b = 1.0f;
}

/* Check a GEMM whose C is @got (ldc, stride_c as in @r). */
static void check_gemm(const char *name, const struct spyre_ref_gemm_args *r,
		       const uint16_t *got, const float *amax_got)
{
	size_t n = (size_t)r->batch * r->m * r->n;
	double *ref = malloc(n * sizeof(double));
	double *err = malloc(n * sizeof(double));
	uint16_t *dense = malloc(n * sizeof(uint16_t));
	double amax, amax_err;

	CHECK(spyre_ref_gemm(r, ref, err, &amax, &amax_err));
	for (uint32_t b = 0; b < r->batch; b++)
		for (uint32_t i = 0; i < r->m; i++)
			for (uint32_t j = 0; j < r->n; j++)
				dense[((size_t)b * r->m + i) * r->n + j] =
					got[b * r->stride_c + i * r->ldc + j];
	compare(name, dense, SPYRE_DTYPE_FP16, ref, err, n);
	if (amax_got) {
		if (fabs(*amax_got - amax) > amax_err) {
			printf("demo:   %-10s FAIL: amax %.6g, want %.6g "
			       "(+- %.2g)\n", name, *amax_got, amax, amax_err);
			failures++;
		} else {
			printf("demo:   %-10s amax %.4f ok (ref %.4f)\n", "",
			       *amax_got, amax);
		}
	}
	free(ref);
	free(err);
	free(dense);
}

static void check_rowop(const char *name, uint32_t op, uint32_t rows,
			uint32_t cols, const void *src, const float *gamma,
			const void *got)
{
	size_t n = (size_t)rows * cols;
	double *ref = malloc(n * sizeof(double));
	double *err = malloc(n * sizeof(double));

	CHECK(spyre_ref_rowop(op, SPYRE_DTYPE_FP16, rows, cols, cols, src,
			      gamma, NULL,
			      op == SPYRE_ROW_SOFTMAX ? 0 : BLK_EPS, ref,
			      err));
	compare(name, got, SPYRE_DTYPE_FP16, ref, err, n);
	free(ref);
	free(err);
}

static void check_elt(const char *name, uint32_t op, uint64_t n,
		      const void *a, const void *b, float alpha,
		      const void *got)
{
	double *ref = malloc(n * sizeof(double));
	double *err = malloc(n * sizeof(double));

	CHECK(spyre_ref_eltwise(op, SPYRE_DTYPE_FP16, n, a, b, alpha, ref,
				err));
	compare(name, got, SPYRE_DTYPE_FP16, ref, err, n);
	free(ref);
	free(err);
}

static void check_quant(const char *name, const void *x, const void *xs,
			const void *xq, uint64_t n, int slot)
{
	uint8_t *want = malloc(n);

	check_elt(name, SPYRE_ELT_SCALE, n, x, NULL, 1.0f / md.scales[slot],
		  xs);
	CHECK(spyre_ref_convert(want, SPYRE_DTYPE_FP8_E4M3, xs,
				SPYRE_DTYPE_FP16, n, 0));
	compare_exact("  -> e4m3", xq, want, n);
	free(want);
}

/*
 * Every step of the block, from the card's own inputs to that step, with
 * the parameters spelled out here again (not taken from spyre-block.h's
 * steps), so that the checks stay independent of what they check.
 */
static void check_steps(const struct tensors *t, bool fp8)
{
	struct spyre_ref_gemm_args r;
	const float *amax = t->b[BLK_AMAX].p;
	const uint32_t pdt = fp8 ? SPYRE_DTYPE_FP8_E4M3 : SPYRE_DTYPE_FP16;
	const int sd = BLK_SEQ * BLK_DM, sf = BLK_SEQ * BLK_FF;
	void *p[BLK_NTENSORS];

	for (int i = 0; i < BLK_NTENSORS; i++)
		p[i] = t->b[i].p;
	check_rowop("rmsnorm1", SPYRE_ROW_RMSNORM, BLK_SEQ, BLK_DM, p[BLK_X],
		    md.g1f, p[BLK_H1]);
	if (fp8)
		check_quant("quant h1", p[BLK_H1], p[BLK_H1S], p[BLK_H1Q], sd,
			    BLK_S_H1);
	gemm_args(&r, pdt, p[fp8 ? BLK_H1Q : BLK_H1],
		  fp8 ? (void *)md.wqkv8 : (void *)md.wqkv16, BLK_SEQ,
		  3 * BLK_DM, BLK_DM);
	if (fp8) {
		r.scale_a = md.scales[BLK_S_H1];
		r.scale_b = md.scales[BLK_S_WQKV];
	}
	check_gemm("qkv", &r, p[BLK_QKV], fp8 ? &amax[BLK_A_QKV] : NULL);

	gemm_args(&r, SPYRE_DTYPE_FP16, p[BLK_QKV],
		  (const uint16_t *)p[BLK_QKV] + BLK_DM, BLK_SEQ, BLK_SEQ,
		  BLK_DH);
	r.flags = SPYRE_GEMM_F_TRANS_B;
	r.batch = BLK_NH;
	r.lda = r.ldb = 3 * BLK_DM;
	r.ldc = BLK_SEQ;
	r.stride_a = r.stride_b = BLK_DH;
	r.stride_c = BLK_SEQ * BLK_SEQ;
	r.alpha = (float)(1.0 / sqrt(BLK_DH));
	r.beta = 1.0f;
	r.c = md.mask16;
	check_gemm("scores", &r, p[BLK_SCORES], NULL);
	check_rowop("softmax", SPYRE_ROW_SOFTMAX, BLK_NH * BLK_SEQ, BLK_SEQ,
		    p[BLK_SCORES], NULL, p[BLK_PROBS]);
	gemm_args(&r, SPYRE_DTYPE_FP16, p[BLK_PROBS],
		  (const uint16_t *)p[BLK_QKV] + 2 * BLK_DM, BLK_SEQ, BLK_DH,
		  BLK_SEQ);
	r.batch = BLK_NH;
	r.ldb = 3 * BLK_DM;
	r.ldc = BLK_DM;
	r.stride_a = BLK_SEQ * BLK_SEQ;
	r.stride_b = BLK_DH;
	r.stride_c = BLK_DH;
	check_gemm("attn", &r, p[BLK_ATTN], NULL);
	if (fp8)
		check_quant("quant attn", p[BLK_ATTN], p[BLK_ATTNS],
			    p[BLK_ATTNQ], sd, BLK_S_ATTN);
	gemm_args(&r, pdt, p[fp8 ? BLK_ATTNQ : BLK_ATTN],
		  fp8 ? (void *)md.wo8 : (void *)md.wo16, BLK_SEQ, BLK_DM,
		  BLK_DM);
	if (fp8) {
		r.scale_a = md.scales[BLK_S_ATTN];
		r.scale_b = md.scales[BLK_S_WO];
	}
	check_gemm("wo", &r, p[BLK_O], fp8 ? &amax[BLK_A_O] : NULL);
	check_elt("residual1", SPYRE_ELT_ADD, sd, p[BLK_X], p[BLK_O], 0,
		  p[BLK_X1]);
	check_rowop("rmsnorm2", SPYRE_ROW_RMSNORM, BLK_SEQ, BLK_DM, p[BLK_X1],
		    md.g2f, p[BLK_H2]);
	if (fp8)
		check_quant("quant h2", p[BLK_H2], p[BLK_H2S], p[BLK_H2Q], sd,
			    BLK_S_H2);
	gemm_args(&r, pdt, p[fp8 ? BLK_H2Q : BLK_H2],
		  fp8 ? (void *)md.wg8 : (void *)md.wg16, BLK_SEQ, BLK_FF,
		  BLK_DM);
	if (fp8) {
		r.scale_a = md.scales[BLK_S_H2];
		r.scale_b = md.scales[BLK_S_WG];
	}
	check_gemm("gate", &r, p[BLK_GATE], fp8 ? &amax[BLK_A_GATE] : NULL);
	r.b = fp8 ? (void *)md.wu8 : (void *)md.wu16;
	if (fp8)
		r.scale_b = md.scales[BLK_S_WU];
	check_gemm("up", &r, p[BLK_UP], fp8 ? &amax[BLK_A_UP] : NULL);
	check_elt("silu", SPYRE_ELT_SILU, sf, p[BLK_GATE], NULL, 0, p[BLK_SG]);
	check_elt("gating", SPYRE_ELT_MUL, sf, p[BLK_SG], p[BLK_UP], 0,
		  p[BLK_MM]);
	if (fp8)
		check_quant("quant mlp", p[BLK_MM], p[BLK_MMS], p[BLK_MMQ], sf,
			    BLK_S_MM);
	gemm_args(&r, pdt, p[fp8 ? BLK_MMQ : BLK_MM],
		  fp8 ? (void *)md.wd8 : (void *)md.wd16, BLK_SEQ, BLK_DM,
		  BLK_FF);
	if (fp8) {
		r.scale_a = md.scales[BLK_S_MM];
		r.scale_b = md.scales[BLK_S_WD];
	}
	check_gemm("down", &r, p[BLK_DN], fp8 ? &amax[BLK_A_DOWN] : NULL);
	check_elt("residual2", SPYRE_ELT_ADD, sd, p[BLK_X1], p[BLK_DN], 0,
		  p[BLK_Y]);
}

/* The block's update y - x against the fp64 model. */
static void check_model(const uint16_t *y, double tol, const char *what)
{
	static double yref[BLK_SEQ * BLK_DM];
	double num = 0, den = 0, maxabs = 0, rel;

	model64(yref);
	for (int i = 0; i < BLK_SEQ * BLK_DM; i++) {
		double got = spyre_ref_fp16_to_f64(y[i]) - md.x[i];
		double want = yref[i] - md.x[i];

		num += (got - want) * (got - want);
		den += want * want;
		maxabs = fmax(maxabs, fabs(got - want));
	}
	rel = sqrt(num / den);
	printf("demo:   vs fp64 model: |dy - dy_ref| / |dy_ref| = %.2e "
	       "(tolerance %.2g, %s), max |error| %.3g\n", rel, tol, what,
	       maxabs);
	if (!(rel <= tol)) {
		printf("demo:   block output FAIL\n");
		failures++;
	}
}

static double amax16(const uint16_t *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs(spyre_ref_fp16_to_f64(v[i])));
	return m;
}

/* ---- running and timing ------------------------------------------------ */

#define YBYTES	(BLK_SEQ * BLK_DM * 2)

/* -b: repetitions of the repeated launch, and its figure lines (0: none) */
static int bench_reps;

struct timing {
	double stream_wall, stream_submit;	/* per block, ns */
	double stream_device;			/* per block, ns (events) */
	double graph_wall, graph_submit;	/* per launch */
	double rep_wall[MAX_REPS];		/* per block, each repetition */
	double rep_card[MAX_REPS];		/* likewise, card clock */
	double rep_submit;			/* per block */
	double step_dev[MAX_STEPS];		/* per step, ns */
	double step_submit[MAX_STEPS];		/* per step, ns (stream) */
	int nsteps, stream_jobs, nrep;
	size_t graph_bytes, graph_cmds;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* -b: "demo: figure block-LABEL CLOCK MEDIAN MIN MAX N", us per block. */
static void print_figure(const char *label, const char *clock,
			 const double *ns, int n)
{
	double v[MAX_REPS];

	memcpy(v, ns, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_double);
	printf("demo: figure block-%s %s %.1f %.1f %.1f %d\n", label, clock,
	       v[n / 2] / 1e3, v[0] / 1e3, v[n - 1] / 1e3, n);
}

static void run(struct spyre_device *dev, struct spyre_stream *s,
		struct tensors *t, bool fp8, int runs, struct timing *tm,
		const char *label)
{
	static struct sink k;
	struct spyre_event *e0, *e1;
	struct spyre_graph *g;
	struct buf *y = &t->b[BLK_Y];
	uint16_t *y_stream = malloc(YBYTES), *y_d2h = malloc(YBYTES);
	const uint64_t *ts = t->ts.p;
	int64_t dev_ns;
	double t0;

	memset(tm, 0, sizeof(*tm));
	CHECK(spyre_event_create(dev, 0, &e0));
	CHECK(spyre_event_create(dev, 0, &e1));

	/* 1. stream operations: one job per operation */
	for (int r = 0; r <= runs; r++) {
		memset(&k, 0, sizeof(k));
		k.s = s;
		k.t = t;
		CHECK(spyre_event_record(e0, s));
		t0 = now_ns();
		record_block(&k, fp8);
		CHECK(spyre_event_record(e1, s));
		CHECK(spyre_stream_sync(s, TIMEOUT_NS));
		if (r == 0)
			continue;	/* warm-up */
		tm->stream_wall += (now_ns() - t0) / runs;
		CHECK(spyre_event_elapsed_ns(e0, e1, &dev_ns));
		tm->stream_device += (double)dev_ns / runs;
		for (int i = 0; i < k.nsteps; i++) {
			tm->step_submit[i] += k.submit_ns[i] / runs;
			tm->stream_submit += k.submit_ns[i] / runs;
		}
	}
	tm->nsteps = k.nsteps;
	tm->stream_jobs = k.nops;
	printf("demo: %s: checking each step against the fp64 reference\n",
	       label);
	check_steps(t, fp8);
	check_model(y->p, fp8 ? TOL_FP8 : TOL_FP16,
		    fp8 ? "scaled fp8 E4M3" : "fp16");
	memcpy(y_stream, y->p, YBYTES);
	/* the staged device-to-host copy delivers the same bytes */
	memset(y_d2h, 0, YBYTES);
	CHECK(spyre_stream_copy_d2h(s, y_d2h, y->bo, y->off, YBYTES));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	if (memcmp(y_d2h, y_stream, YBYTES)) {
		printf("demo:   FAIL: staged D2H copy of y differs\n");
		failures++;
	}

	/* 2. the same operations recorded once as a graph */
	memset(&k, 0, sizeof(k));
	CHECK(spyre_cmdbuf_create(&k.cb));
	k.t = t;
	record_block(&k, fp8);
	tm->graph_bytes = spyre_cmdbuf_size(k.cb);
	tm->graph_cmds = spyre_cmdbuf_count(k.cb);
	CHECK(spyre_graph_create(dev, k.cb, &t->ts.bo, 1, 0, &g));
	memset(y->p, 0, YBYTES);
	for (int r = 0; r <= runs; r++) {
		double t1;

		t0 = now_ns();
		CHECK(spyre_graph_launch(g, s, 1));
		t1 = now_ns();
		CHECK(spyre_stream_sync(s, TIMEOUT_NS));
		if (r == 0)
			continue;
		tm->graph_submit += (t1 - t0) / runs;
		tm->graph_wall += (now_ns() - t0) / runs;
		for (int i = 0; i < k.nsteps; i++)
			tm->step_dev[i] += (double)(ts[i + 1] - ts[i]) / runs;
	}
	if (memcmp(y->p, y_stream, YBYTES)) {
		printf("demo:   FAIL: graph output differs from the stream "
		       "run\n");
		failures++;
	}
	/*
	 * 3. one launch repeated REPEAT times: one submit ioctl, between two
	 * events (card clock); -b measures it bench_reps times
	 */
	tm->nrep = bench_reps ? bench_reps : 1;
	for (int r = 0; r < tm->nrep; r++) {
		double t1;

		memset(y->p, 0, YBYTES);
		CHECK(spyre_event_record(e0, s));
		t0 = now_ns();
		CHECK(spyre_graph_launch(g, s, REPEAT));
		t1 = now_ns();
		CHECK(spyre_event_record(e1, s));
		CHECK(spyre_stream_sync(s, TIMEOUT_NS));
		tm->rep_wall[r] = (now_ns() - t0) / REPEAT;
		tm->rep_submit += (t1 - t0) / REPEAT / tm->nrep;
		CHECK(spyre_event_elapsed_ns(e0, e1, &dev_ns));
		tm->rep_card[r] = (double)dev_ns / REPEAT;
		if (memcmp(y->p, y_stream, YBYTES)) {
			printf("demo:   FAIL: repeated graph output differs\n");
			failures++;
		}
	}
	spyre_graph_destroy(g);
	spyre_cmdbuf_destroy(k.cb);
	spyre_event_destroy(e0);
	spyre_event_destroy(e1);
	free(y_stream);
	free(y_d2h);

	printf("demo: %s: time per step (device: TIMESTAMPs in the graph; "
	       "host: stream helper call)\n", label);
	printf("demo:   %-10s %-30s %10s %10s\n", "step", "operation",
	       "device us", "host us");
	for (int i = 0; i < tm->nsteps; i++)
		printf("demo:   %-10s %-30s %10.1f %10.1f\n", k.name[i],
		       k.what[i], tm->step_dev[i] / 1e3,
		       tm->step_submit[i] / 1e3);
	printf("demo:   stream: %d jobs, %.0f us per block (device %.0f us), "
	       "%.0f us in submit calls: %.1f %% dispatch\n", tm->stream_jobs,
	       tm->stream_wall / 1e3, tm->stream_device / 1e3,
	       tm->stream_submit / 1e3,
	       100.0 * tm->stream_submit / tm->stream_wall);
	printf("demo:   graph:  1 job of %zu commands (%zu bytes), %.0f us "
	       "per launch, %.1f us in submit: %.1f %% dispatch\n",
	       tm->graph_cmds, tm->graph_bytes, tm->graph_wall / 1e3,
	       tm->graph_submit / 1e3,
	       100.0 * tm->graph_submit / tm->graph_wall);
	printf("demo:   graph x%d in one submit: %.0f us per block, %.2f us "
	       "of submit per block: %.2f %% dispatch\n", REPEAT,
	       tm->rep_wall[0] / 1e3, tm->rep_submit / 1e3,
	       100.0 * tm->rep_submit / tm->rep_wall[0]);
	if (bench_reps) {
		print_figure(label, "card", tm->rep_card, tm->nrep);
		print_figure(label, "wall", tm->rep_wall, tm->nrep);
	}
}

/* ---- main -------------------------------------------------------------- */

static int open_dev(const char *arg, struct spyre_device **dev)
{
	char *end;
	unsigned long idx;

	if (!arg)
		return spyre_device_open(0, dev);
	idx = strtoul(arg, &end, 10);
	return *end ? spyre_device_open_pci(arg, dev) :
		      spyre_device_open((unsigned int)idx, dev);
}

static void upload(struct spyre_stream *s, struct buf b, const void *src)
{
	CHECK(spyre_stream_copy_h2d(s, b.bo, b.off, src, b.bytes));
}

int main(int argc, char **argv)
{
	struct spyre_device *dev;
	struct spyre_device_info in;
	struct spyre_stream *s;
	struct arena w = { 0 }, a = { 0 };
	const void *const wsrc[BLK_X] = {
		[BLK_WQKV16] = md.wqkv16, [BLK_WO16] = md.wo16,
		[BLK_WG16] = md.wg16, [BLK_WU16] = md.wu16,
		[BLK_WD16] = md.wd16, [BLK_WQKV8] = md.wqkv8,
		[BLK_WO8] = md.wo8, [BLK_WG8] = md.wg8, [BLK_WU8] = md.wu8,
		[BLK_WD8] = md.wd8, [BLK_G1] = md.g1f, [BLK_G2] = md.g2f,
		[BLK_MASK] = md.mask16,
	};
	struct tensors t;
	struct timing t16, t8;
	int opt, runs = 10, ret;

	while ((opt = getopt(argc, argv, "r:b:h")) != -1) {
		switch (opt) {
		case 'r':
			runs = atoi(optarg);
			if (runs < 1)
				runs = 1;
			break;
		case 'b':
			bench_reps = atoi(optarg);
			if (bench_reps < 1 || bench_reps > MAX_REPS) {
				fprintf(stderr, "demo: -b: 1 to %d\n",
					MAX_REPS);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: %s [-r RUNS] [-b REPS] [DEV]\n",
				argv[0]);
			return 2;
		}
	}
	ret = open_dev(optind < argc ? argv[optind] : NULL, &dev);
	if (ret) {
		fprintf(stderr, "demo: cannot open device: %s (%d)\n",
			spyre_strerror(ret), ret);
		return 1;
	}
	CHECK(spyre_device_get_info(dev, &in));
	printf("demo: libspyre %s, device %s (%s), driver %s %d.%d.%d\n",
	       spyre_version(), in.desc.pci_addr, in.desc.devnode,
	       in.driver_name, in.driver_major, in.driver_minor,
	       in.driver_patch);
	printf("demo: hw %u.%u, %u cores, %u queues, %llu MiB device memory, "
	       "caps 0x%llx\n", in.hw_version >> 16, in.hw_version & 0xffff,
	       in.num_cores, in.num_queues,
	       (unsigned long long)(in.devmem_size >> 20),
	       (unsigned long long)in.caps);
	if ((in.caps & (SPYRE_DEV_CAP_FP16 | SPYRE_DEV_CAP_FP8)) !=
	    (SPYRE_DEV_CAP_FP16 | SPYRE_DEV_CAP_FP8)) {
		fprintf(stderr, "demo: the card has no fp16/fp8 math engine "
			"(caps 0x%llx)\n", (unsigned long long)in.caps);
		return 1;
	}
	CHECK(spyre_stream_create(dev, SPYRE_PRIORITY_NORMAL, &s));

	/* A quick FILL + COPY sanity check of plain data movement. */
	{
		struct spyre_bo *b0, *b1;
		uint32_t *p;

		CHECK(spyre_bo_alloc(dev, 1 << 20, SPYRE_BO_DEVICE, &b0));
		CHECK(spyre_bo_alloc(dev, 1 << 20, 0, &b1));
		CHECK(spyre_stream_fill(s, b0, 0, 1 << 18, 4, 0xa5c3f00du));
		CHECK(spyre_stream_copy(s, b1, 0, b0, 0, 1 << 20));
		CHECK(spyre_stream_sync(s, TIMEOUT_NS));
		CHECK(spyre_bo_map(b1, (void **)&p));
		for (int i = 0; i < 1 << 18; i++) {
			if (p[i] != 0xa5c3f00du) {
				fprintf(stderr, "demo: FILL/COPY mismatch at "
					"word %d: 0x%08x\n", i, p[i]);
				return 1;
			}
		}
		printf("demo: FILL (device memory) + COPY 1 MiB: verified\n");
		spyre_bo_free(b0);
		spyre_bo_free(b1);
	}

	make_model();
	printf("demo: transformer block: seq %d, d_model %d, %d heads of %d, "
	       "ffn %d (SiLU-gated), causal, RMSNorm eps %g\n", BLK_SEQ,
	       BLK_DM, BLK_NH, BLK_DH, BLK_FF, (double)BLK_EPS);

	/* weights in device memory, activations in system memory */
	CHECK(spyre_bo_alloc(dev, 1 << 20, SPYRE_BO_DEVICE, &w.bo));
	CHECK(spyre_bo_alloc(dev, 1 << 20, 0, &a.bo));
	CHECK(spyre_bo_map(a.bo, (void **)&a.map));
	memset(&t, 0, sizeof(t));
	for (int i = 0; i < BLK_NTENSORS; i++)
		t.b[i] = get(i < BLK_X ? &w : &a, blk_bytes(i));
	t.ts = get(&a, 8 * (MAX_STEPS + 1));

	/* host -> card: staged copies into device memory */
	for (int i = 0; i < BLK_X; i++)
		upload(s, t.b[i], wsrc[i]);
	memcpy(t.b[BLK_X].p, md.x16, sizeof(md.x16));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	printf("demo: weights uploaded to device memory (%" PRIu64 " KiB, "
	       "fp16 and E4M3), activations in system memory (%" PRIu64
	       " KiB)\n", w.used / KiB, a.used / KiB);

	/* fp16 */
	run(dev, s, &t, false, runs, &t16, "fp16");

	/* calibrate the activation scales on the fp16 run */
	for (int j = BLK_S_H1; j < BLK_NSCALES; j++) {
		int id = blk_act_scale[j];

		md.scales[j] = (float)(amax16(t.b[id].p, blk_tensors[id].n) /
				       BLK_E4M3_MAX);
	}
	memcpy(t.b[BLK_SCALES].p, md.scales, sizeof(md.scales));
	printf("demo: fp8 scales (amax / 448): weights %.3g %.3g %.3g %.3g "
	       "%.3g, activations %.3g %.3g %.3g %.3g\n",
	       md.scales[BLK_S_WQKV], md.scales[BLK_S_WO], md.scales[BLK_S_WG],
	       md.scales[BLK_S_WU], md.scales[BLK_S_WD], md.scales[BLK_S_H1],
	       md.scales[BLK_S_ATTN], md.scales[BLK_S_H2], md.scales[BLK_S_MM]);

	/* scaled fp8 */
	run(dev, s, &t, true, runs, &t8, "fp8");

	printf("demo: graph launch vs stream operations: %.1fx (fp16), %.1fx "
	       "(fp8) faster per block\n", t16.stream_wall / t16.graph_wall,
	       t8.stream_wall / t8.graph_wall);

	spyre_stream_destroy(s);
	spyre_bo_free(w.bo);
	spyre_bo_free(a.bo);
	ret = spyre_device_error(dev);
	spyre_device_close(dev);
	if (ret) {
		fprintf(stderr, "demo: device error %s\n", spyre_strerror(ret));
		return 1;
	}
	if (failures) {
		printf("demo: FAILED (%d checks)\n", failures);
		return 1;
	}
	printf("demo: OK\n");
	return 0;
}
