/* SPDX-License-Identifier: MIT */
/*
 * spyre-block.h - the transformer block of spyre-demo, described once:
 * its dimensions, its parameters (from a fixed seed), its tensors and the
 * sequence of its steps in fp16 and in scaled fp8, expressed against an
 * interface of operations (struct blk_ops) on tensor ids and offsets.
 *
 * Two programs implement that interface: spyre-demo runs the block on the
 * card as stream operations and as one command list (libspyre/tools/
 * spyre-demo.c), and spyre-ceilings runs it natively through the card
 * model's numeric core on host buffers, the ceiling of the card's figure
 * in `make bench` (qemu-device/tests/spyre-ceilings.c).  So this header
 * holds no libspyre and no QEMU code: plain C11 and the command-stream
 * constants of <drm/spyre_cmd.h> (dtypes, ELTWISE and ROWOP ops, GEMM
 * flags).
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
 * with seq 32, d_model 128, 4 heads of 32, ffn 256.  In fp16 every tensor
 * is fp16 (fp32 accumulation).  In scaled fp8 the inputs of the five
 * projection GEMMs are quantized to OCP E4M3 (ELTWISE SCALE by 1 / scale,
 * then a converting COPY), the weights are stored in E4M3, and those GEMMs
 * multiply the per-tensor scales back (torch._scaled_mm style) and report
 * the amax of their output; attention and the element-wise work stay in
 * fp16.  Scales are amax / 448: the weights' from their fp64 values, the
 * activations' from the fp16 run of the block (blk_act_scale[]), as
 * static fp8 inference calibrates them.
 */
#ifndef SPYRE_BLOCK_H
#define SPYRE_BLOCK_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <drm/spyre_cmd.h>

#define BLK_SEQ		32
#define BLK_DM		128
#define BLK_NH		4
#define BLK_DH		(BLK_DM / BLK_NH)
#define BLK_FF		256
#define BLK_EPS		1e-5f
#define BLK_MASK_NEG	(-10000.0)	/* exp() of it is 0 in fp32 */
#define BLK_E4M3_MAX	448.0

/* Tensors: weights first (the demo keeps them in device memory). */
enum {
	BLK_WQKV16, BLK_WO16, BLK_WG16, BLK_WU16, BLK_WD16,
	BLK_WQKV8, BLK_WO8, BLK_WG8, BLK_WU8, BLK_WD8,
	BLK_G1, BLK_G2, BLK_MASK,
	BLK_X,				/* the first activation */
	BLK_H1, BLK_QKV, BLK_SCORES, BLK_PROBS, BLK_ATTN, BLK_O, BLK_X1,
	BLK_H2, BLK_GATE, BLK_UP, BLK_SG, BLK_MM, BLK_DN, BLK_Y,
	/* fp8: the scaled fp16 and the quantized inputs of the projections */
	BLK_H1S, BLK_H1Q, BLK_ATTNS, BLK_ATTNQ, BLK_H2S, BLK_H2Q, BLK_MMS,
	BLK_MMQ,
	BLK_SCALES, BLK_AMAX,		/* binary32 slots, below */
	BLK_NTENSORS,
	BLK_NONE = -1
};

/* Slots of BLK_SCALES: the weights' scales, then the activations'. */
enum {
	BLK_S_WQKV, BLK_S_WO, BLK_S_WG, BLK_S_WU, BLK_S_WD,
	BLK_S_H1, BLK_S_ATTN, BLK_S_H2, BLK_S_MM,
	BLK_NSCALES
};

/* Slots of BLK_AMAX: the amax of the five projection GEMMs' outputs. */
enum { BLK_A_QKV, BLK_A_O, BLK_A_GATE, BLK_A_UP, BLK_A_DOWN, BLK_NAMAX };

struct blk_tensor {
	uint32_t dtype;		/* SPYRE_DTYPE_* */
	uint32_t n;		/* elements */
};

static const struct blk_tensor blk_tensors[BLK_NTENSORS] = {
	[BLK_WQKV16] = { SPYRE_DTYPE_FP16, BLK_DM * 3 * BLK_DM },
	[BLK_WO16] = { SPYRE_DTYPE_FP16, BLK_DM * BLK_DM },
	[BLK_WG16] = { SPYRE_DTYPE_FP16, BLK_DM * BLK_FF },
	[BLK_WU16] = { SPYRE_DTYPE_FP16, BLK_DM * BLK_FF },
	[BLK_WD16] = { SPYRE_DTYPE_FP16, BLK_FF * BLK_DM },
	[BLK_WQKV8] = { SPYRE_DTYPE_FP8_E4M3, BLK_DM * 3 * BLK_DM },
	[BLK_WO8] = { SPYRE_DTYPE_FP8_E4M3, BLK_DM * BLK_DM },
	[BLK_WG8] = { SPYRE_DTYPE_FP8_E4M3, BLK_DM * BLK_FF },
	[BLK_WU8] = { SPYRE_DTYPE_FP8_E4M3, BLK_DM * BLK_FF },
	[BLK_WD8] = { SPYRE_DTYPE_FP8_E4M3, BLK_FF * BLK_DM },
	[BLK_G1] = { SPYRE_DTYPE_FP32, BLK_DM },
	[BLK_G2] = { SPYRE_DTYPE_FP32, BLK_DM },
	[BLK_MASK] = { SPYRE_DTYPE_FP16, BLK_NH * BLK_SEQ * BLK_SEQ },
	[BLK_X] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_H1] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_QKV] = { SPYRE_DTYPE_FP16, BLK_SEQ * 3 * BLK_DM },
	[BLK_SCORES] = { SPYRE_DTYPE_FP16, BLK_NH * BLK_SEQ * BLK_SEQ },
	[BLK_PROBS] = { SPYRE_DTYPE_FP16, BLK_NH * BLK_SEQ * BLK_SEQ },
	[BLK_ATTN] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_O] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_X1] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_H2] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_GATE] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF },
	[BLK_UP] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF },
	[BLK_SG] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF },
	[BLK_MM] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF },
	[BLK_DN] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_Y] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_H1S] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_H1Q] = { SPYRE_DTYPE_FP8_E4M3, BLK_SEQ * BLK_DM },
	[BLK_ATTNS] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_ATTNQ] = { SPYRE_DTYPE_FP8_E4M3, BLK_SEQ * BLK_DM },
	[BLK_H2S] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM },
	[BLK_H2Q] = { SPYRE_DTYPE_FP8_E4M3, BLK_SEQ * BLK_DM },
	[BLK_MMS] = { SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF },
	[BLK_MMQ] = { SPYRE_DTYPE_FP8_E4M3, BLK_SEQ * BLK_FF },
	[BLK_SCALES] = { SPYRE_DTYPE_FP32, BLK_NSCALES },
	[BLK_AMAX] = { SPYRE_DTYPE_FP32, BLK_NAMAX },
};

/* The five weights, indexed by their scale slot: fp16, E4M3, fan-in. */
struct blk_weight {
	int w16, w8;
	uint32_t fan_in;
};

#define BLK_NWEIGHTS (BLK_S_WD + 1)

static const struct blk_weight blk_weights[BLK_NWEIGHTS] = {
	[BLK_S_WQKV] = { BLK_WQKV16, BLK_WQKV8, BLK_DM },
	[BLK_S_WO] = { BLK_WO16, BLK_WO8, BLK_DM },
	[BLK_S_WG] = { BLK_WG16, BLK_WG8, BLK_DM },
	[BLK_S_WU] = { BLK_WU16, BLK_WU8, BLK_DM },
	[BLK_S_WD] = { BLK_WD16, BLK_WD8, BLK_FF },
};

/*
 * Activation scales (slots BLK_S_H1 on): amax / 448 of these fp16 tensors
 * after the fp16 run of the block.
 */
static const int blk_act_scale[BLK_NSCALES] = {
	[BLK_S_H1] = BLK_H1,
	[BLK_S_ATTN] = BLK_ATTN,
	[BLK_S_H2] = BLK_H2,
	[BLK_S_MM] = BLK_MM,
};

/* ---- parameters --------------------------------------------------------- */

/* xorshift64: uniform in [-1, 1). */
static inline double blk_urand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (double)(*s >> 11) * 0x1p-52 - 1.0;
}

/*
 * The block's parameters in fp64, from a fixed seed: the input @x (unit
 * variance), the weights @w[] in blk_weights[] order (uniform, unit output
 * variance) and the RMSNorm gains @g1, @g2 (1 +- 0.2).  The caller encodes
 * them: x and the fp16 weights rounded to fp16, the E4M3 weights as
 * w / scale with scale = (binary32) amax(w) / 448 in slot j of weight j,
 * the gains in binary32.
 */
static inline void blk_params(double *x, double *const w[BLK_NWEIGHTS],
			      double *g1, double *g2)
{
	uint64_t s = 0x2545f4914f6cdd1dull;

	for (int i = 0; i < BLK_SEQ * BLK_DM; i++)
		x[i] = blk_urand(&s) * sqrt(3.0);
	for (int j = 0; j < BLK_NWEIGHTS; j++) {
		const struct blk_weight *bw = &blk_weights[j];

		for (uint32_t i = 0; i < blk_tensors[bw->w16].n; i++)
			w[j][i] = blk_urand(&s) * sqrt(3.0 / bw->fan_in);
	}
	for (int i = 0; i < BLK_DM; i++) {
		g1[i] = (float)(1.0 + 0.2 * blk_urand(&s));
		g2[i] = (float)(1.0 + 0.2 * blk_urand(&s));
	}
}

/* The causal mask's element (i, j) of every head (row i, column j). */
static inline double blk_mask(int i, int j)
{
	return j > i ? BLK_MASK_NEG : 0.0;
}

/* ---- the steps ---------------------------------------------------------- */

/* Element @off (in the tensor's dtype) of tensor @t. */
struct blk_ref {
	int t;			/* BLK_*, or BLK_NONE: no operand */
	uint64_t off;
};

#define BLK_AT(t_, off_)	((struct blk_ref){ (t_), (off_) })
#define BLK_T(t_)		BLK_AT(t_, 0)
#define BLK_NOREF		BLK_AT(BLK_NONE, 0)

/* Bytes of tensor @t. */
static inline uint64_t blk_bytes(int t)
{
	return (uint64_t)blk_tensors[t].n *
	       spyre_cmd_dtype_size(blk_tensors[t].dtype);
}

/* Byte offset of @r in its tensor. */
static inline uint64_t blk_offset(struct blk_ref r)
{
	return r.off * spyre_cmd_dtype_size(blk_tensors[r.t].dtype);
}

/*
 * C[b] = alpha * sa * sb * op(A[b]) op(B[b]) + beta * C[b] for b < batch,
 * as the card's GEMM command (leading dimensions and batch strides in
 * elements, never 0 here); sa, sb the binary32 values at @scale_a and
 * @scale_b (1 without them), the amax of the result stored at @amax.
 */
struct blk_gemm {
	uint32_t flags;		/* SPYRE_GEMM_F_* */
	uint32_t a_dtype, b_dtype, c_dtype;
	uint32_t m, n, k, batch;
	struct blk_ref a, b, c;
	uint64_t lda, ldb, ldc;
	uint64_t stride_a, stride_b, stride_c;
	float alpha, beta;
	struct blk_ref scale_a, scale_b, amax;
};

/*
 * The operations a step is made of.  Each does what the card's command of
 * that name does (uapi/drm/spyre_cmd.h); an implementation that cannot
 * stops the program or records the failure itself.
 */
struct blk_ops {
	/* A new step begins: its name and what it runs (may be NULL). */
	void (*step)(void *ctx, const char *name, const char *what);
	void (*gemm)(void *ctx, const struct blk_gemm *g);
	/* out = op(a, b) on @n elements (@b: ADD and MUL only). */
	void (*eltwise)(void *ctx, uint32_t op, uint32_t dtype, uint64_t n,
			struct blk_ref out, struct blk_ref a, struct blk_ref b,
			float alpha);
	/* dst = op(src) on dense rows, with binary32 @gamma (RMSNORM). */
	void (*rowop)(void *ctx, uint32_t op, uint32_t dtype, uint32_t rows,
		      uint32_t cols, struct blk_ref dst, struct blk_ref src,
		      struct blk_ref gamma, float eps);
	/* COPY of @n elements, converting @src_dtype to @dst_dtype. */
	void (*convert)(void *ctx, struct blk_ref dst, uint32_t dst_dtype,
			struct blk_ref src, uint32_t src_dtype, uint64_t n);
};

static inline void blk_step(const struct blk_ops *ops, void *ctx,
			    const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static inline void blk_step(const struct blk_ops *ops, void *ctx,
			    const char *name, const char *fmt, ...)
{
	char what[64];
	va_list ap;

	if (!ops->step)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	ops->step(ctx, name, what);
}

/* @x (fp16) -> @xq (E4M3) = x / scale, through @xs = x * (1 / scale). */
static inline void blk_quantize(const struct blk_ops *ops, void *ctx,
				const float *scales, const char *name, int x,
				int xs, int xq, int slot)
{
	uint32_t n = blk_tensors[x].n;

	blk_step(ops, ctx, name, "ELTWISE SCALE + COPY e4m3 %u", n);
	ops->eltwise(ctx, SPYRE_ELT_SCALE, SPYRE_DTYPE_FP16, n, BLK_T(xs),
		     BLK_T(x), BLK_NOREF, 1.0f / scales[slot]);
	ops->convert(ctx, BLK_T(xq), SPYRE_DTYPE_FP8_E4M3, BLK_T(xs),
		     SPYRE_DTYPE_FP16, n);
}

/*
 * out[SEQ x n] = in[SEQ x k] W[k x n] for the weight of scale slot @j:
 * fp16, or scaled E4M3 from the quantized input @in8.
 */
static inline void blk_project(const struct blk_ops *ops, void *ctx,
			       bool fp8, const char *name, int in16, int in8,
			       int j, int out, uint32_t n, uint32_t k,
			       int a_slot, int amax_slot)
{
	const struct blk_weight *w = &blk_weights[j];
	struct blk_gemm g = {
		.a_dtype = fp8 ? SPYRE_DTYPE_FP8_E4M3 : SPYRE_DTYPE_FP16,
		.b_dtype = fp8 ? SPYRE_DTYPE_FP8_E4M3 : SPYRE_DTYPE_FP16,
		.c_dtype = SPYRE_DTYPE_FP16,
		.m = BLK_SEQ, .n = n, .k = k, .batch = 1,
		.a = BLK_T(fp8 ? in8 : in16),
		.b = BLK_T(fp8 ? w->w8 : w->w16),
		.c = BLK_T(out),
		.lda = k, .ldb = n, .ldc = n,
		.alpha = 1.0f,
		.scale_a = fp8 ? BLK_AT(BLK_SCALES, a_slot) : BLK_NOREF,
		.scale_b = fp8 ? BLK_AT(BLK_SCALES, j) : BLK_NOREF,
		.amax = fp8 ? BLK_AT(BLK_AMAX, amax_slot) : BLK_NOREF,
	};

	blk_step(ops, ctx, name, "GEMM %dx%ux%u%s", BLK_SEQ, n, k,
		 fp8 ? " e4m3" : "");
	ops->gemm(ctx, &g);
}

/*
 * One block, y from x, in fp16 or in scaled fp8: every operation in
 * order, grouped into named steps.  @scales: the host's copy of the
 * BLK_SCALES slots (the quantizing steps multiply by 1 / scale; fp8 only).
 */
static inline void blk_run(const struct blk_ops *ops, void *ctx, bool fp8,
			   const float *scales)
{
	struct blk_gemm scores = {
		.flags = SPYRE_GEMM_F_TRANS_B,
		.a_dtype = SPYRE_DTYPE_FP16, .b_dtype = SPYRE_DTYPE_FP16,
		.c_dtype = SPYRE_DTYPE_FP16,
		.m = BLK_SEQ, .n = BLK_SEQ, .k = BLK_DH, .batch = BLK_NH,
		.a = BLK_T(BLK_QKV),			/* Q_h at column h*dh */
		.b = BLK_AT(BLK_QKV, BLK_DM),		/* K_h */
		.c = BLK_T(BLK_SCORES),
		.lda = 3 * BLK_DM, .ldb = 3 * BLK_DM, .ldc = BLK_SEQ,
		.stride_a = BLK_DH, .stride_b = BLK_DH,
		.stride_c = BLK_SEQ * BLK_SEQ,
		.alpha = (float)(1.0 / sqrt(BLK_DH)),
		.beta = 1.0f,				/* + mask */
		.scale_a = BLK_NOREF, .scale_b = BLK_NOREF, .amax = BLK_NOREF,
	};
	struct blk_gemm pv = {
		.a_dtype = SPYRE_DTYPE_FP16, .b_dtype = SPYRE_DTYPE_FP16,
		.c_dtype = SPYRE_DTYPE_FP16,
		.m = BLK_SEQ, .n = BLK_DH, .k = BLK_SEQ, .batch = BLK_NH,
		.a = BLK_T(BLK_PROBS),
		.b = BLK_AT(BLK_QKV, 2 * BLK_DM),	/* V_h */
		.c = BLK_T(BLK_ATTN),			/* heads side by side */
		.lda = BLK_SEQ, .ldb = 3 * BLK_DM, .ldc = BLK_DM,
		.stride_a = BLK_SEQ * BLK_SEQ, .stride_b = BLK_DH,
		.stride_c = BLK_DH,
		.alpha = 1.0f,
		.scale_a = BLK_NOREF, .scale_b = BLK_NOREF, .amax = BLK_NOREF,
	};

	blk_step(ops, ctx, "rmsnorm1", "ROWOP RMSNORM %dx%d", BLK_SEQ, BLK_DM);
	ops->rowop(ctx, SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP16, BLK_SEQ, BLK_DM,
		   BLK_T(BLK_H1), BLK_T(BLK_X), BLK_T(BLK_G1), BLK_EPS);
	if (fp8)
		blk_quantize(ops, ctx, scales, "quant h1", BLK_H1, BLK_H1S,
			     BLK_H1Q, BLK_S_H1);
	blk_project(ops, ctx, fp8, "qkv", BLK_H1, BLK_H1Q, BLK_S_WQKV,
		    BLK_QKV, 3 * BLK_DM, BLK_DM, BLK_S_H1, BLK_A_QKV);

	blk_step(ops, ctx, "mask", "COPY %d bytes",
		 BLK_NH * BLK_SEQ * BLK_SEQ * 2);
	ops->convert(ctx, BLK_T(BLK_SCORES), SPYRE_DTYPE_U8, BLK_T(BLK_MASK),
		     SPYRE_DTYPE_U8, BLK_NH * BLK_SEQ * BLK_SEQ * 2);
	blk_step(ops, ctx, "scores", "GEMM %dx(%dx%dx%d) QK^T", BLK_NH,
		 BLK_SEQ, BLK_SEQ, BLK_DH);
	ops->gemm(ctx, &scores);
	blk_step(ops, ctx, "softmax", "ROWOP SOFTMAX %dx%d", BLK_NH * BLK_SEQ,
		 BLK_SEQ);
	ops->rowop(ctx, SPYRE_ROW_SOFTMAX, SPYRE_DTYPE_FP16, BLK_NH * BLK_SEQ,
		   BLK_SEQ, BLK_T(BLK_PROBS), BLK_T(BLK_SCORES), BLK_NOREF, 0);
	blk_step(ops, ctx, "attn", "GEMM %dx(%dx%dx%d) PV", BLK_NH, BLK_SEQ,
		 BLK_DH, BLK_SEQ);
	ops->gemm(ctx, &pv);
	if (fp8)
		blk_quantize(ops, ctx, scales, "quant attn", BLK_ATTN,
			     BLK_ATTNS, BLK_ATTNQ, BLK_S_ATTN);
	blk_project(ops, ctx, fp8, "wo", BLK_ATTN, BLK_ATTNQ, BLK_S_WO, BLK_O,
		    BLK_DM, BLK_DM, BLK_S_ATTN, BLK_A_O);
	blk_step(ops, ctx, "residual1", "ELTWISE ADD %d", BLK_SEQ * BLK_DM);
	ops->eltwise(ctx, SPYRE_ELT_ADD, SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM,
		     BLK_T(BLK_X1), BLK_T(BLK_X), BLK_T(BLK_O), 0);

	blk_step(ops, ctx, "rmsnorm2", "ROWOP RMSNORM %dx%d", BLK_SEQ, BLK_DM);
	ops->rowop(ctx, SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP16, BLK_SEQ, BLK_DM,
		   BLK_T(BLK_H2), BLK_T(BLK_X1), BLK_T(BLK_G2), BLK_EPS);
	if (fp8)
		blk_quantize(ops, ctx, scales, "quant h2", BLK_H2, BLK_H2S,
			     BLK_H2Q, BLK_S_H2);
	blk_project(ops, ctx, fp8, "gate", BLK_H2, BLK_H2Q, BLK_S_WG, BLK_GATE,
		    BLK_FF, BLK_DM, BLK_S_H2, BLK_A_GATE);
	blk_project(ops, ctx, fp8, "up", BLK_H2, BLK_H2Q, BLK_S_WU, BLK_UP,
		    BLK_FF, BLK_DM, BLK_S_H2, BLK_A_UP);
	blk_step(ops, ctx, "silu", "ELTWISE SILU %d", BLK_SEQ * BLK_FF);
	ops->eltwise(ctx, SPYRE_ELT_SILU, SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF,
		     BLK_T(BLK_SG), BLK_T(BLK_GATE), BLK_NOREF, 0);
	blk_step(ops, ctx, "gating", "ELTWISE MUL %d", BLK_SEQ * BLK_FF);
	ops->eltwise(ctx, SPYRE_ELT_MUL, SPYRE_DTYPE_FP16, BLK_SEQ * BLK_FF,
		     BLK_T(BLK_MM), BLK_T(BLK_SG), BLK_T(BLK_UP), 0);
	if (fp8)
		blk_quantize(ops, ctx, scales, "quant mlp", BLK_MM, BLK_MMS,
			     BLK_MMQ, BLK_S_MM);
	blk_project(ops, ctx, fp8, "down", BLK_MM, BLK_MMQ, BLK_S_WD, BLK_DN,
		    BLK_DM, BLK_FF, BLK_S_MM, BLK_A_DOWN);
	blk_step(ops, ctx, "residual2", "ELTWISE ADD %d", BLK_SEQ * BLK_DM);
	ops->eltwise(ctx, SPYRE_ELT_ADD, SPYRE_DTYPE_FP16, BLK_SEQ * BLK_DM,
		     BLK_T(BLK_Y), BLK_T(BLK_X1), BLK_T(BLK_DN), 0);
}

#endif /* SPYRE_BLOCK_H */
