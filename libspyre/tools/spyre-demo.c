// SPDX-License-Identifier: MIT
/*
 * spyre-demo - one transformer block on the card, in fp16 and in scaled
 * fp8, checked against the fp64 reference.
 *
 *   spyre-demo [-r RUNS] [DEV]     DEV: index (default 0) or PCI address
 *
 * The block (pre-norm, causal self-attention and a SiLU-gated MLP):
 *
 *	h1 = rmsnorm(x) * g1			ROWOP RMSNORM
 *	qkv = h1 Wqkv				GEMM
 *	s_h = Q_h K_h^T / sqrt(dh) + mask	GEMM, batched over heads with
 *						strides into qkv, TRANS_B,
 *						beta = 1 on a COPY of the mask
 *	p_h = softmax(s_h)			ROWOP SOFTMAX
 *	attn_h = p_h V_h			GEMM, batched, strided
 *	x1 = x + attn Wo			GEMM, ELTWISE ADD
 *	h2 = rmsnorm(x1) * g2			ROWOP RMSNORM
 *	y = x1 + (silu(h2 Wg) * (h2 Wu)) Wd	GEMM x3, ELTWISE SILU, MUL, ADD
 *
 * with seq 32, d_model 128, 4 heads of 32, ffn 256.  The fp16 run keeps
 * every tensor in fp16 (fp32 accumulation on the card).  The fp8 run
 * quantizes the weights and the inputs of the five projection GEMMs to
 * OCP E4M3 with per-tensor scales (weights: amax / 448; activations:
 * amax / 448 calibrated on the fp16 run, as static fp8 inference does),
 * runs those GEMMs as scaled fp8 GEMMs (the card multiplies the scales
 * back, torch._scaled_mm style) that also report the amax of their
 * output, and keeps attention and the element-wise work in fp16.
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
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <spyre/spyre.h>
#include <spyre/spyre_ref.h>

#define SEQ	32
#define DM	128
#define NH	4
#define DH	(DM / NH)
#define FF	256
#define EPS	1e-5f
#define MASK_NEG	(-10000.0)	/* exp() of it is 0 in fp32 */
#define TOL_FP16	1e-2
#define TOL_FP8		1.5e-1
#define E4M3_MAX	448.0
#define REPEAT		20

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

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* Uniform in [-1, 1). */
static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) * 0x1p-52 - 1.0;
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

static struct spyre_mem M(struct buf b)
{
	return SPYRE_MEM(b.bo, b.off);
}

/* Element @i of a binary32 buffer. */
static struct spyre_mem MF(struct buf b, unsigned int i)
{
	return SPYRE_MEM(b.bo, b.off + 4ull * i);
}

/* Scale slots: weights W_QKV..W_D, then the activations. */
enum { S_WQKV, S_WO, S_WG, S_WU, S_WD, S_H1, S_ATTN, S_H2, S_MM, NSCALES };
/* amax slots of the five projection GEMMs */
enum { A_QKV, A_O, A_GATE, A_UP, A_DOWN, NAMAX };

struct tensors {
	/* weights, in device memory */
	struct buf wqkv16, wo16, wg16, wu16, wd16;
	struct buf wqkv8, wo8, wg8, wu8, wd8;
	struct buf g1, g2, mask;
	/* activations, in system memory (read back for the checks) */
	struct buf x, h1, qkv, scores, probs, attn, o, x1, h2, gate, up, sg,
		   mm, dn, y;
	/* fp8 run: scaled fp16 and quantized inputs of the projections */
	struct buf h1s, h1q, attns, attnq, h2s, h2q, mms, mmq;
	struct buf scales, amax, ts;
};

/* ---- the model on the host ---------------------------------------------- */

struct model {
	double x[SEQ * DM];
	double wqkv[DM * 3 * DM], wo[DM * DM], wg[DM * FF], wu[DM * FF],
	       wd[FF * DM];
	double g1[DM], g2[DM];
	/* encoded copies, as uploaded */
	uint16_t x16[SEQ * DM];
	uint16_t wqkv16[DM * 3 * DM], wo16[DM * DM], wg16[DM * FF],
		 wu16[DM * FF], wd16[FF * DM];
	uint8_t wqkv8[DM * 3 * DM], wo8[DM * DM], wg8[DM * FF], wu8[DM * FF],
		wd8[FF * DM];
	float g1f[DM], g2f[DM];
	uint16_t mask16[NH * SEQ * SEQ];
	float scales[NSCALES];
};

static struct model md;

static double amax64(const double *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

/* Weights: uniform with unit output variance; fp16 and scaled E4M3. */
static void make_weight(double *w, uint16_t *w16, uint8_t *w8, size_t n,
			unsigned int fan_in, float *scale)
{
	double *tmp = malloc(n * sizeof(double));
	double s;

	for (size_t i = 0; i < n; i++)
		w[i] = urand() * sqrt(3.0 / fan_in);
	CHECK(spyre_ref_from_f64(w16, SPYRE_DTYPE_FP16, w, n, 0));
	s = (float)(amax64(w, n) / E4M3_MAX);
	for (size_t i = 0; i < n; i++)
		tmp[i] = w[i] / s;
	CHECK(spyre_ref_from_f64(w8, SPYRE_DTYPE_FP8_E4M3, tmp, n, 0));
	*scale = (float)s;
	free(tmp);
}

static void make_model(void)
{
	for (int i = 0; i < SEQ * DM; i++)
		md.x[i] = urand() * sqrt(3.0);
	/* the input as the card sees it, and the fp64 model uses */
	CHECK(spyre_ref_from_f64(md.x16, SPYRE_DTYPE_FP16, md.x, SEQ * DM, 0));
	CHECK(spyre_ref_to_f64(md.x, md.x16, SPYRE_DTYPE_FP16, SEQ * DM));
	make_weight(md.wqkv, md.wqkv16, md.wqkv8, DM * 3 * DM, DM,
		    &md.scales[S_WQKV]);
	make_weight(md.wo, md.wo16, md.wo8, DM * DM, DM, &md.scales[S_WO]);
	make_weight(md.wg, md.wg16, md.wg8, DM * FF, DM, &md.scales[S_WG]);
	make_weight(md.wu, md.wu16, md.wu8, DM * FF, DM, &md.scales[S_WU]);
	make_weight(md.wd, md.wd16, md.wd8, FF * DM, FF, &md.scales[S_WD]);
	for (int i = 0; i < DM; i++) {
		md.g1f[i] = (float)(1.0 + 0.2 * urand());
		md.g2f[i] = (float)(1.0 + 0.2 * urand());
		md.g1[i] = md.g1f[i];
		md.g2[i] = md.g2f[i];
	}
	for (int h = 0; h < NH; h++)
		for (int i = 0; i < SEQ; i++)
			for (int j = 0; j < SEQ; j++)
				md.mask16[(h * SEQ + i) * SEQ + j] =
					spyre_ref_f64_to_fp16(j > i ? MASK_NEG :
							      0.0);
}

/* fp64 model: y from x with the unquantized weights. */
static void rmsnorm64(const double *x, const double *g, double *y, int rows,
		      int cols)
{
	for (int r = 0; r < rows; r++) {
		double ms = 0;

		for (int c = 0; c < cols; c++)
			ms += x[r * cols + c] * x[r * cols + c];
		ms = 1.0 / sqrt(ms / cols + (double)EPS);
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
	static double h1[SEQ * DM], qkv[SEQ * 3 * DM], s[SEQ * SEQ],
		      attn[SEQ * DM], x1[SEQ * DM], h2[SEQ * DM],
		      gate[SEQ * FF], up[SEQ * FF], dn[SEQ * DM];

	rmsnorm64(md.x, md.g1, h1, SEQ, DM);
	matmul64(h1, DM, md.wqkv, 3 * DM, false, qkv, 3 * DM, SEQ, 3 * DM,
		 DM, 1.0);
	for (int h = 0; h < NH; h++) {
		matmul64(qkv + h * DH, 3 * DM, qkv + DM + h * DH, 3 * DM, true,
			 s, SEQ, SEQ, SEQ, DH, 1.0 / sqrt(DH));
		for (int i = 0; i < SEQ; i++) {
			double mx = -INFINITY, sum = 0;

			for (int j = 0; j < SEQ; j++) {
				s[i * SEQ + j] += j > i ? MASK_NEG : 0.0;
				mx = fmax(mx, s[i * SEQ + j]);
			}
			for (int j = 0; j < SEQ; j++) {
				s[i * SEQ + j] = exp(s[i * SEQ + j] - mx);
				sum += s[i * SEQ + j];
			}
			for (int j = 0; j < SEQ; j++)
				s[i * SEQ + j] /= sum;
		}
		matmul64(s, SEQ, qkv + 2 * DM + h * DH, 3 * DM, false,
			 attn + h * DH, DM, SEQ, DH, SEQ, 1.0);
	}
	matmul64(attn, DM, md.wo, DM, false, x1, DM, SEQ, DM, DM, 1.0);
	for (int i = 0; i < SEQ * DM; i++)
		x1[i] += md.x[i];
	rmsnorm64(x1, md.g2, h2, SEQ, DM);
	matmul64(h2, DM, md.wg, FF, false, gate, FF, SEQ, FF, DM, 1.0);
	matmul64(h2, DM, md.wu, FF, false, up, FF, SEQ, FF, DM, 1.0);
	for (int i = 0; i < SEQ * FF; i++)
		gate[i] = gate[i] / (1.0 + exp(-gate[i])) * up[i];
	matmul64(gate, FF, md.wd, DM, false, dn, DM, SEQ, DM, FF, 1.0);
	for (int i = 0; i < SEQ * DM; i++)
		y[i] = x1[i] + dn[i];
}

/* ---- recording the block: into a stream or into a command buffer ------- */

#define MAX_STEPS 32

struct sink {
	struct spyre_stream *s;		/* stream operations, or */
	struct spyre_cmdbuf *cb;	/* commands for a graph */
	struct buf ts;			/* graph: a timestamp per step */
	int nsteps;
	const char *name[MAX_STEPS];
	char what[MAX_STEPS][40];
	double submit_ns[MAX_STEPS];	/* stream: host time in the call */
};

static void step(struct sink *k, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (k->nsteps == MAX_STEPS) {
		fprintf(stderr, "demo: too many steps\n");
		exit(1);
	}
	k->name[k->nsteps] = name;
	va_start(ap, fmt);
	vsnprintf(k->what[k->nsteps], sizeof(k->what[0]), fmt, ap);
	va_end(ap);
	if (k->cb)
		CHECK(spyre_cmdbuf_timestamp(k->cb, spyre_bo_va(k->ts.bo) +
					     k->ts.off + 8ull * k->nsteps));
	k->nsteps++;
}

static void end_steps(struct sink *k)
{
	if (k->cb)
		CHECK(spyre_cmdbuf_timestamp(k->cb, spyre_bo_va(k->ts.bo) +
					     k->ts.off + 8ull * k->nsteps));
}

/* Run one operation: encode it (graph) or enqueue it (stream, timed). */
#define OP(k, cbcall, scall) do {					\
		if ((k)->cb) {						\
			CHECK(cbcall);					\
		} else {						\
			double t0_ = now_ns();				\
									\
			CHECK(scall);					\
			(k)->submit_ns[(k)->nsteps - 1] += now_ns() - t0_; \
		}							\
	} while (0)

static void k_gemm(struct sink *k, const struct spyre_gemm *g)
{
	OP(k, spyre_cmdbuf_gemm(k->cb, g), spyre_stream_gemm(k->s, g));
}

static void k_elt(struct sink *k, uint32_t op, uint64_t n, struct buf out,
		  struct buf a, struct buf b, float alpha)
{
	struct spyre_mem mb = b.bo ? M(b) : SPYRE_MEM_NONE;

	OP(k, spyre_cmdbuf_eltwise(k->cb, op, SPYRE_DTYPE_FP16, n, M(out),
				   M(a), mb, alpha),
	   spyre_stream_eltwise(k->s, op, SPYRE_DTYPE_FP16, n, M(out), M(a),
				mb, alpha));
}

static void k_rms(struct sink *k, struct buf dst, struct buf src,
		  struct buf g)
{
	OP(k, spyre_cmdbuf_rowop(k->cb, SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP16,
				 SEQ, DM, M(dst), 0, M(src), 0, M(g),
				 SPYRE_MEM_NONE, EPS),
	   spyre_stream_rmsnorm(k->s, SPYRE_DTYPE_FP16, SEQ, DM, M(dst), 0,
				M(src), 0, M(g), EPS));
}

static void k_softmax(struct sink *k, struct buf dst, struct buf src,
		      uint32_t rows, uint32_t cols)
{
	OP(k, spyre_cmdbuf_rowop(k->cb, SPYRE_ROW_SOFTMAX, SPYRE_DTYPE_FP16,
				 rows, cols, M(dst), 0, M(src), 0,
				 SPYRE_MEM_NONE, SPYRE_MEM_NONE, 0),
	   spyre_stream_softmax(k->s, SPYRE_DTYPE_FP16, rows, cols, M(dst),
				0, M(src), 0));
}

static void k_convert(struct sink *k, struct buf dst, uint32_t ddt,
		      struct buf src, uint32_t sdt, uint64_t n)
{
	OP(k, spyre_cmdbuf_convert(k->cb, M(dst), ddt, M(src), sdt, n, 0),
	   spyre_stream_convert(k->s, M(dst), ddt, M(src), sdt, n, 0));
}

/* x (fp16) -> xq (E4M3) = x / scale, through xs = x * (1 / scale). */
static void quantize(struct sink *k, const char *name, struct buf x,
		     struct buf xs, struct buf xq, uint64_t n, int slot)
{
	step(k, name, "ELTWISE SCALE + COPY e4m3 %" PRIu64, n);
	k_elt(k, SPYRE_ELT_SCALE, n, xs, x, (struct buf){ 0 },
	      1.0f / md.scales[slot]);
	k_convert(k, xq, SPYRE_DTYPE_FP8_E4M3, xs, SPYRE_DTYPE_FP16, n);
}

/* out[SEQ x n] = in[SEQ x kk] W[kk x n], fp16 or scaled fp8. */
static void project(struct sink *k, const struct tensors *t, bool fp8,
		    struct buf in, struct buf w, struct buf out, uint32_t n,
		    uint32_t kk, int a_slot, int w_slot, int amax_slot)
{
	struct spyre_gemm g;

	memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = fp8 ? SPYRE_DTYPE_FP8_E4M3 : SPYRE_DTYPE_FP16;
	g.c_dtype = SPYRE_DTYPE_FP16;
	g.m = SEQ;
	g.n = n;
	g.k = kk;
	g.a = M(in);
	g.b = M(w);
	g.c = M(out);
	g.alpha = 1.0f;
	if (fp8) {
		g.scale_a = MF(t->scales, a_slot);
		g.scale_b = MF(t->scales, w_slot);
		g.amax = MF(t->amax, amax_slot);
	}
	k_gemm(k, &g);
}

static void record_block(struct sink *k, const struct tensors *t, bool fp8)
{
	struct spyre_gemm g;

	step(k, "rmsnorm1", "ROWOP RMSNORM %dx%d", SEQ, DM);
	k_rms(k, t->h1, t->x, t->g1);
	if (fp8)
		quantize(k, "quant h1", t->h1, t->h1s, t->h1q, SEQ * DM, S_H1);
	step(k, "qkv", "GEMM %dx%dx%d%s", SEQ, 3 * DM, DM,
	     fp8 ? " e4m3" : "");
	project(k, t, fp8, fp8 ? t->h1q : t->h1, fp8 ? t->wqkv8 : t->wqkv16,
		t->qkv, 3 * DM, DM, S_H1, S_WQKV, A_QKV);

	step(k, "mask", "COPY %d bytes", NH * SEQ * SEQ * 2);
	k_convert(k, t->scores, SPYRE_DTYPE_U8, t->mask, SPYRE_DTYPE_U8,
		  NH * SEQ * SEQ * 2);
	step(k, "scores", "GEMM %dx(%dx%dx%d) QK^T", NH, SEQ, SEQ, DH);
	memset(&g, 0, sizeof(g));
	g.flags = SPYRE_GEMM_F_TRANS_B;
	g.a_dtype = g.b_dtype = g.c_dtype = SPYRE_DTYPE_FP16;
	g.m = SEQ;
	g.n = SEQ;
	g.k = DH;
	g.batch = NH;
	g.a = M(t->qkv);				/* Q_h at column h*dh */
	g.b = SPYRE_MEM(t->qkv.bo, t->qkv.off + 2 * DM);	/* K_h */
	g.c = M(t->scores);
	g.lda = 3 * DM;
	g.ldb = 3 * DM;
	g.stride_a = DH;
	g.stride_b = DH;
	g.stride_c = SEQ * SEQ;
	g.alpha = (float)(1.0 / sqrt(DH));
	g.beta = 1.0f;					/* + mask */
	k_gemm(k, &g);
	step(k, "softmax", "ROWOP SOFTMAX %dx%d", NH * SEQ, SEQ);
	k_softmax(k, t->probs, t->scores, NH * SEQ, SEQ);
	step(k, "attn", "GEMM %dx(%dx%dx%d) PV", NH, SEQ, DH, SEQ);
	memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = g.c_dtype = SPYRE_DTYPE_FP16;
	g.m = SEQ;
	g.n = DH;
	g.k = SEQ;
	g.batch = NH;
	g.a = M(t->probs);
	g.b = SPYRE_MEM(t->qkv.bo, t->qkv.off + 2 * 2 * DM);	/* V_h */
	g.c = M(t->attn);				/* heads side by side */
	g.ldb = 3 * DM;
	g.ldc = DM;
	g.stride_a = SEQ * SEQ;
	g.stride_b = DH;
	g.stride_c = DH;
	g.alpha = 1.0f;
	k_gemm(k, &g);
	if (fp8)
		quantize(k, "quant attn", t->attn, t->attns, t->attnq,
			 SEQ * DM, S_ATTN);
	step(k, "wo", "GEMM %dx%dx%d%s", SEQ, DM, DM, fp8 ? " e4m3" : "");
	project(k, t, fp8, fp8 ? t->attnq : t->attn, fp8 ? t->wo8 : t->wo16,
		t->o, DM, DM, S_ATTN, S_WO, A_O);
	step(k, "residual1", "ELTWISE ADD %d", SEQ * DM);
	k_elt(k, SPYRE_ELT_ADD, SEQ * DM, t->x1, t->x, t->o, 0);

	step(k, "rmsnorm2", "ROWOP RMSNORM %dx%d", SEQ, DM);
	k_rms(k, t->h2, t->x1, t->g2);
	if (fp8)
		quantize(k, "quant h2", t->h2, t->h2s, t->h2q, SEQ * DM, S_H2);
	step(k, "gate", "GEMM %dx%dx%d%s", SEQ, FF, DM, fp8 ? " e4m3" : "");
	project(k, t, fp8, fp8 ? t->h2q : t->h2, fp8 ? t->wg8 : t->wg16,
		t->gate, FF, DM, S_H2, S_WG, A_GATE);
	step(k, "up", "GEMM %dx%dx%d%s", SEQ, FF, DM, fp8 ? " e4m3" : "");
	project(k, t, fp8, fp8 ? t->h2q : t->h2, fp8 ? t->wu8 : t->wu16,
		t->up, FF, DM, S_H2, S_WU, A_UP);
	step(k, "silu", "ELTWISE SILU %d", SEQ * FF);
	k_elt(k, SPYRE_ELT_SILU, SEQ * FF, t->sg, t->gate, (struct buf){ 0 },
	      0);
	step(k, "gating", "ELTWISE MUL %d", SEQ * FF);
	k_elt(k, SPYRE_ELT_MUL, SEQ * FF, t->mm, t->sg, t->up, 0);
	if (fp8)
		quantize(k, "quant mlp", t->mm, t->mms, t->mmq, SEQ * FF, S_MM);
	step(k, "down", "GEMM %dx%dx%d%s", SEQ, DM, FF, fp8 ? " e4m3" : "");
	project(k, t, fp8, fp8 ? t->mmq : t->mm, fp8 ? t->wd8 : t->wd16,
		t->dn, DM, FF, S_MM, S_WD, A_DOWN);
	step(k, "residual2", "ELTWISE ADD %d", SEQ * DM);
	k_elt(k, SPYRE_ELT_ADD, SEQ * DM, t->y, t->x1, t->dn, 0);
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
			      gamma, NULL, op == SPYRE_ROW_SOFTMAX ? 0 : EPS,
			      ref, err));
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

static void check_quant(const char *name, const struct buf *x,
			const struct buf *xs, const struct buf *xq,
			uint64_t n, int slot)
{
	uint8_t *want = malloc(n);

	check_elt(name, SPYRE_ELT_SCALE, n, x->p, NULL,
		  1.0f / md.scales[slot], xs->p);
	CHECK(spyre_ref_convert(want, SPYRE_DTYPE_FP8_E4M3, xs->p,
				SPYRE_DTYPE_FP16, n, 0));
	compare_exact("  -> e4m3", xq->p, want, n);
	free(want);
}

/* Every step of the block, from the card's own inputs to that step. */
static void check_steps(const struct tensors *t, bool fp8)
{
	struct spyre_ref_gemm_args r;
	const float *amax = t->amax.p;
	const uint32_t pdt = fp8 ? SPYRE_DTYPE_FP8_E4M3 : SPYRE_DTYPE_FP16;

	check_rowop("rmsnorm1", SPYRE_ROW_RMSNORM, SEQ, DM, t->x.p, md.g1f,
		    t->h1.p);
	if (fp8)
		check_quant("quant h1", &t->h1, &t->h1s, &t->h1q, SEQ * DM,
			    S_H1);
	gemm_args(&r, pdt, fp8 ? t->h1q.p : t->h1.p,
		  fp8 ? (void *)md.wqkv8 : (void *)md.wqkv16, SEQ, 3 * DM, DM);
	if (fp8) {
		r.scale_a = md.scales[S_H1];
		r.scale_b = md.scales[S_WQKV];
	}
	check_gemm("qkv", &r, t->qkv.p, fp8 ? &amax[A_QKV] : NULL);

	gemm_args(&r, SPYRE_DTYPE_FP16, t->qkv.p,
		  (const uint16_t *)t->qkv.p + DM, SEQ, SEQ, DH);
	r.flags = SPYRE_GEMM_F_TRANS_B;
	r.batch = NH;
	r.lda = r.ldb = 3 * DM;
	r.ldc = SEQ;
	r.stride_a = r.stride_b = DH;
	r.stride_c = SEQ * SEQ;
	r.alpha = (float)(1.0 / sqrt(DH));
	r.beta = 1.0f;
	r.c = md.mask16;
	check_gemm("scores", &r, t->scores.p, NULL);
	check_rowop("softmax", SPYRE_ROW_SOFTMAX, NH * SEQ, SEQ, t->scores.p,
		    NULL, t->probs.p);
	gemm_args(&r, SPYRE_DTYPE_FP16, t->probs.p,
		  (const uint16_t *)t->qkv.p + 2 * DM, SEQ, DH, SEQ);
	r.batch = NH;
	r.ldb = 3 * DM;
	r.ldc = DM;
	r.stride_a = SEQ * SEQ;
	r.stride_b = DH;
	r.stride_c = DH;
	check_gemm("attn", &r, t->attn.p, NULL);
	if (fp8)
		check_quant("quant attn", &t->attn, &t->attns, &t->attnq,
			    SEQ * DM, S_ATTN);
	gemm_args(&r, pdt, fp8 ? t->attnq.p : t->attn.p,
		  fp8 ? (void *)md.wo8 : (void *)md.wo16, SEQ, DM, DM);
	if (fp8) {
		r.scale_a = md.scales[S_ATTN];
		r.scale_b = md.scales[S_WO];
	}
	check_gemm("wo", &r, t->o.p, fp8 ? &amax[A_O] : NULL);
	check_elt("residual1", SPYRE_ELT_ADD, SEQ * DM, t->x.p, t->o.p, 0,
		  t->x1.p);
	check_rowop("rmsnorm2", SPYRE_ROW_RMSNORM, SEQ, DM, t->x1.p, md.g2f,
		    t->h2.p);
	if (fp8)
		check_quant("quant h2", &t->h2, &t->h2s, &t->h2q, SEQ * DM,
			    S_H2);
	gemm_args(&r, pdt, fp8 ? t->h2q.p : t->h2.p,
		  fp8 ? (void *)md.wg8 : (void *)md.wg16, SEQ, FF, DM);
	if (fp8) {
		r.scale_a = md.scales[S_H2];
		r.scale_b = md.scales[S_WG];
	}
	check_gemm("gate", &r, t->gate.p, fp8 ? &amax[A_GATE] : NULL);
	r.b = fp8 ? (void *)md.wu8 : (void *)md.wu16;
	if (fp8)
		r.scale_b = md.scales[S_WU];
	check_gemm("up", &r, t->up.p, fp8 ? &amax[A_UP] : NULL);
	check_elt("silu", SPYRE_ELT_SILU, SEQ * FF, t->gate.p, NULL, 0,
		  t->sg.p);
	check_elt("gating", SPYRE_ELT_MUL, SEQ * FF, t->sg.p, t->up.p, 0,
		  t->mm.p);
	if (fp8)
		check_quant("quant mlp", &t->mm, &t->mms, &t->mmq, SEQ * FF,
			    S_MM);
	gemm_args(&r, pdt, fp8 ? t->mmq.p : t->mm.p,
		  fp8 ? (void *)md.wd8 : (void *)md.wd16, SEQ, DM, FF);
	if (fp8) {
		r.scale_a = md.scales[S_MM];
		r.scale_b = md.scales[S_WD];
	}
	check_gemm("down", &r, t->dn.p, fp8 ? &amax[A_DOWN] : NULL);
	check_elt("residual2", SPYRE_ELT_ADD, SEQ * DM, t->x1.p, t->dn.p, 0,
		  t->y.p);
}

/* The block's update y - x against the fp64 model. */
static void check_model(const uint16_t *y, double tol, const char *what)
{
	static double yref[SEQ * DM];
	double num = 0, den = 0, maxabs = 0, rel;

	model64(yref);
	for (int i = 0; i < SEQ * DM; i++) {
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

struct timing {
	double stream_wall, stream_submit;	/* per block, ns */
	double stream_device;			/* per block, ns (events) */
	double graph_wall, graph_submit;	/* per launch */
	double rep_wall, rep_submit;		/* per repetition */
	double step_dev[MAX_STEPS];		/* per step, ns */
	double step_submit[MAX_STEPS];		/* per step, ns (stream) */
	int nsteps;
	size_t graph_bytes, graph_cmds;
};

static void run(struct spyre_device *dev, struct spyre_stream *s,
		struct tensors *t, bool fp8, int runs, struct timing *tm,
		const char *label)
{
	static struct sink k;
	struct spyre_event *e0, *e1;
	struct spyre_graph *g;
	uint16_t *y_stream = malloc(SEQ * DM * 2), *y_d2h = malloc(SEQ * DM * 2);
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
		CHECK(spyre_event_record(e0, s));
		t0 = now_ns();
		record_block(&k, t, fp8);
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
	printf("demo: %s: checking each step against the fp64 reference\n",
	       label);
	check_steps(t, fp8);
	check_model(t->y.p, fp8 ? TOL_FP8 : TOL_FP16,
		    fp8 ? "scaled fp8 E4M3" : "fp16");
	memcpy(y_stream, t->y.p, SEQ * DM * 2);
	/* the staged device-to-host copy delivers the same bytes */
	memset(y_d2h, 0, SEQ * DM * 2);
	CHECK(spyre_stream_copy_d2h(s, y_d2h, t->y.bo, t->y.off, SEQ * DM * 2));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	if (memcmp(y_d2h, y_stream, SEQ * DM * 2)) {
		printf("demo:   FAIL: staged D2H copy of y differs\n");
		failures++;
	}

	/* 2. the same operations recorded once as a graph */
	memset(&k, 0, sizeof(k));
	CHECK(spyre_cmdbuf_create(&k.cb));
	k.ts = t->ts;
	record_block(&k, t, fp8);
	tm->graph_bytes = spyre_cmdbuf_size(k.cb);
	tm->graph_cmds = spyre_cmdbuf_count(k.cb);
	CHECK(spyre_graph_create(dev, k.cb, &t->ts.bo, 1, 0, &g));
	memset(t->y.p, 0, SEQ * DM * 2);
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
	if (memcmp(t->y.p, y_stream, SEQ * DM * 2)) {
		printf("demo:   FAIL: graph output differs from the stream "
		       "run\n");
		failures++;
	}
	/* 3. one launch repeated REPEAT times: one submit ioctl */
	memset(t->y.p, 0, SEQ * DM * 2);
	t0 = now_ns();
	CHECK(spyre_graph_launch(g, s, REPEAT));
	tm->rep_submit = (now_ns() - t0) / REPEAT;
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	tm->rep_wall = (now_ns() - t0) / REPEAT;
	if (memcmp(t->y.p, y_stream, SEQ * DM * 2)) {
		printf("demo:   FAIL: repeated graph output differs\n");
		failures++;
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
	       "%.0f us in submit calls: %.1f %% dispatch\n", tm->nsteps +
	       (fp8 ? 4 : 0), tm->stream_wall / 1e3, tm->stream_device / 1e3,
	       tm->stream_submit / 1e3,
	       100.0 * tm->stream_submit / tm->stream_wall);
	printf("demo:   graph:  1 job of %zu commands (%zu bytes), %.0f us "
	       "per launch, %.1f us in submit: %.1f %% dispatch\n",
	       tm->graph_cmds, tm->graph_bytes, tm->graph_wall / 1e3,
	       tm->graph_submit / 1e3,
	       100.0 * tm->graph_submit / tm->graph_wall);
	printf("demo:   graph x%d in one submit: %.0f us per block, %.2f us "
	       "of submit per block: %.2f %% dispatch\n", REPEAT,
	       tm->rep_wall / 1e3, tm->rep_submit / 1e3,
	       100.0 * tm->rep_submit / tm->rep_wall);
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
	struct tensors t;
	struct timing t16, t8;
	int opt, runs = 10, ret;

	while ((opt = getopt(argc, argv, "r:h")) != -1) {
		switch (opt) {
		case 'r':
			runs = atoi(optarg);
			if (runs < 1)
				runs = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-r RUNS] [DEV]\n", argv[0]);
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
	       "ffn %d (SiLU-gated), causal, RMSNorm eps %g\n", SEQ, DM, NH,
	       DH, FF, (double)EPS);

	/* weights in device memory, activations in system memory */
	CHECK(spyre_bo_alloc(dev, 1 << 20, SPYRE_BO_DEVICE, &w.bo));
	CHECK(spyre_bo_alloc(dev, 1 << 20, 0, &a.bo));
	CHECK(spyre_bo_map(a.bo, (void **)&a.map));
	memset(&t, 0, sizeof(t));
	t.wqkv16 = get(&w, sizeof(md.wqkv16));
	t.wo16 = get(&w, sizeof(md.wo16));
	t.wg16 = get(&w, sizeof(md.wg16));
	t.wu16 = get(&w, sizeof(md.wu16));
	t.wd16 = get(&w, sizeof(md.wd16));
	t.wqkv8 = get(&w, sizeof(md.wqkv8));
	t.wo8 = get(&w, sizeof(md.wo8));
	t.wg8 = get(&w, sizeof(md.wg8));
	t.wu8 = get(&w, sizeof(md.wu8));
	t.wd8 = get(&w, sizeof(md.wd8));
	t.g1 = get(&w, sizeof(md.g1f));
	t.g2 = get(&w, sizeof(md.g2f));
	t.mask = get(&w, sizeof(md.mask16));
	t.x = get(&a, SEQ * DM * 2);
	t.h1 = get(&a, SEQ * DM * 2);
	t.qkv = get(&a, SEQ * 3 * DM * 2);
	t.scores = get(&a, NH * SEQ * SEQ * 2);
	t.probs = get(&a, NH * SEQ * SEQ * 2);
	t.attn = get(&a, SEQ * DM * 2);
	t.o = get(&a, SEQ * DM * 2);
	t.x1 = get(&a, SEQ * DM * 2);
	t.h2 = get(&a, SEQ * DM * 2);
	t.gate = get(&a, SEQ * FF * 2);
	t.up = get(&a, SEQ * FF * 2);
	t.sg = get(&a, SEQ * FF * 2);
	t.mm = get(&a, SEQ * FF * 2);
	t.dn = get(&a, SEQ * DM * 2);
	t.y = get(&a, SEQ * DM * 2);
	t.h1s = get(&a, SEQ * DM * 2);
	t.h1q = get(&a, SEQ * DM);
	t.attns = get(&a, SEQ * DM * 2);
	t.attnq = get(&a, SEQ * DM);
	t.h2s = get(&a, SEQ * DM * 2);
	t.h2q = get(&a, SEQ * DM);
	t.mms = get(&a, SEQ * FF * 2);
	t.mmq = get(&a, SEQ * FF);
	t.scales = get(&a, NSCALES * 4);
	t.amax = get(&a, NAMAX * 4);
	t.ts = get(&a, 8 * (MAX_STEPS + 1));

	/* host -> card: staged copies into device memory */
	upload(s, t.wqkv16, md.wqkv16);
	upload(s, t.wo16, md.wo16);
	upload(s, t.wg16, md.wg16);
	upload(s, t.wu16, md.wu16);
	upload(s, t.wd16, md.wd16);
	upload(s, t.wqkv8, md.wqkv8);
	upload(s, t.wo8, md.wo8);
	upload(s, t.wg8, md.wg8);
	upload(s, t.wu8, md.wu8);
	upload(s, t.wd8, md.wd8);
	upload(s, t.g1, md.g1f);
	upload(s, t.g2, md.g2f);
	upload(s, t.mask, md.mask16);
	memcpy(t.x.p, md.x16, sizeof(md.x16));
	CHECK(spyre_stream_sync(s, TIMEOUT_NS));
	printf("demo: weights uploaded to device memory (%" PRIu64 " KiB, "
	       "fp16 and E4M3), activations in system memory (%" PRIu64
	       " KiB)\n", w.used / KiB, a.used / KiB);

	/* fp16 */
	run(dev, s, &t, false, runs, &t16, "fp16");

	/* calibrate the activation scales on the fp16 run */
	md.scales[S_H1] = (float)(amax16(t.h1.p, SEQ * DM) / E4M3_MAX);
	md.scales[S_ATTN] = (float)(amax16(t.attn.p, SEQ * DM) / E4M3_MAX);
	md.scales[S_H2] = (float)(amax16(t.h2.p, SEQ * DM) / E4M3_MAX);
	md.scales[S_MM] = (float)(amax16(t.mm.p, SEQ * FF) / E4M3_MAX);
	memcpy(t.scales.p, md.scales, sizeof(md.scales));
	printf("demo: fp8 scales (amax / 448): weights %.3g %.3g %.3g %.3g "
	       "%.3g, activations %.3g %.3g %.3g %.3g\n",
	       md.scales[S_WQKV], md.scales[S_WO], md.scales[S_WG],
	       md.scales[S_WU], md.scales[S_WD], md.scales[S_H1],
	       md.scales[S_ATTN], md.scales[S_H2], md.scales[S_MM]);

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
