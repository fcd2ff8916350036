// SPDX-License-Identifier: MIT
/*
 * spyre_exec_errors: a bad command fails only its own job.  For each kind
 * of bad command (invalid opcode, sizes beyond the card's limits, invalid
 * operands, an operand running past its BO into the guard page) the test
 * submits, on one queue, a good job, the bad job and another good job:
 *  - the first job completes with its data written;
 *  - the bad job's fence carries the error (-EIO for invalid commands and
 *    limits, -EFAULT for MMU faults) and so does QUERY_CONTEXT (with the
 *    fault count and a fault VA inside the guard page for -EFAULT);
 *  - the job behind it ends with -ECANCELED without running;
 *  - later submits of the context fail with -ECANCELED, on any queue;
 *  - another file of the same process, with a job in flight across the
 *    failure, and another process are unaffected.
 * Also: a FILL/COPY of 2 GiB is within the documented limits (4 GiB), so
 * into a small BO it must fault at the BO's end, not fail with LIMIT; a
 * GEMM split over the card's cores records exactly one fault; address
 * spans that wrap around 2^64 are INVALID_OPERAND (-EIO), never a silent
 * wrap onto valid memory.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

enum kind {
	K_OPCODE, K_OPCODE_FFFF, K_FILL_LIMIT, K_COPY_LIMIT,
	K_FILL_2GIB, K_COPY_2GIB,
	K_ELT_LIMIT, K_REDUCE_LIMIT, K_ROWOP_LIMIT, K_GEMM_LIMIT,
	K_GEMM_ZERO_M, K_GEMM_BAD_LDA, K_GEMM_INT8_FP32, K_GEMM_FP16_BF16,
	K_GEMM_INT8_BETA2, K_ROWOP_NEG_EPS, K_ELT_BAD_OP, K_ELT_INT8,
	K_REDUCE_BAD_OP, K_SOFTMAX_NAN_EPS, K_RMSNORM_NEG_EPS,
	K_TIMESTAMP_ALIGN, K_SEM_ALIGN, K_ELT_PAD, K_ROWOP_PAD, K_GEMM_FLAGS,
	K_COPY_PITCH, K_REDUCE_LD, K_GEMM_LDA_WRAP, K_GEMM_STRIDE_C_WRAP,
	K_REDUCE_LD_WRAP, K_ROWOP_LD_WRAP, K_COPY_PITCH_WRAP,
	K_GEMM_A_PAST, K_GEMM_C_PAST, K_ELT_OUT_PAST, K_COPY_CONV_PAST,
	K_ROWOP_SRC_PAST, K_GEMM_SPLIT_C_PAST,
};

FIXTURE(err) {
	struct st_ctx x;
};

FIXTURE_VARIANT(err) {
	enum kind kind;
	int err;
	bool compute;
};

FIXTURE_VARIANT_ADD(err, invalid_opcode) { K_OPCODE, -EIO, false };
FIXTURE_VARIANT_ADD(err, invalid_opcode_ffff) { K_OPCODE_FFFF, -EIO, false };
FIXTURE_VARIANT_ADD(err, fill_above_4gib) { K_FILL_LIMIT, -EIO, false };
FIXTURE_VARIANT_ADD(err, copy_above_4gib) { K_COPY_LIMIT, -EIO, false };
FIXTURE_VARIANT_ADD(err, fill_2gib_faults) { K_FILL_2GIB, -EFAULT, false };
FIXTURE_VARIANT_ADD(err, copy_2gib_faults) { K_COPY_2GIB, -EFAULT, false };
FIXTURE_VARIANT_ADD(err, eltwise_limit) { K_ELT_LIMIT, -EIO, true };
FIXTURE_VARIANT_ADD(err, reduce_limit) { K_REDUCE_LIMIT, -EIO, true };
FIXTURE_VARIANT_ADD(err, rowop_limit) { K_ROWOP_LIMIT, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_limit) { K_GEMM_LIMIT, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_zero_m) { K_GEMM_ZERO_M, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_lda_below_k) { K_GEMM_BAD_LDA, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_int8_to_fp32) { K_GEMM_INT8_FP32, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_fp16_x_bf16) { K_GEMM_FP16_BF16, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_int8_beta2) { K_GEMM_INT8_BETA2, -EIO, true };
FIXTURE_VARIANT_ADD(err, rowop_negative_eps) { K_ROWOP_NEG_EPS, -EIO, true };
FIXTURE_VARIANT_ADD(err, eltwise_bad_op) { K_ELT_BAD_OP, -EIO, true };
FIXTURE_VARIANT_ADD(err, eltwise_int8) { K_ELT_INT8, -EIO, true };
FIXTURE_VARIANT_ADD(err, reduce_bad_op) { K_REDUCE_BAD_OP, -EIO, true };
FIXTURE_VARIANT_ADD(err, softmax_nan_eps) { K_SOFTMAX_NAN_EPS, -EIO, true };
FIXTURE_VARIANT_ADD(err, rmsnorm_negative_eps) { K_RMSNORM_NEG_EPS, -EIO, true };
FIXTURE_VARIANT_ADD(err, timestamp_misaligned) { K_TIMESTAMP_ALIGN, -EIO, false };
FIXTURE_VARIANT_ADD(err, sem_misaligned) { K_SEM_ALIGN, -EIO, false };
FIXTURE_VARIANT_ADD(err, copy_pitch_below_row) { K_COPY_PITCH, -EIO, false };
FIXTURE_VARIANT_ADD(err, eltwise_pad) { K_ELT_PAD, -EIO, true };
FIXTURE_VARIANT_ADD(err, rowop_pad) { K_ROWOP_PAD, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_unknown_flag) { K_GEMM_FLAGS, -EIO, true };
FIXTURE_VARIANT_ADD(err, reduce_ld_below_cols) { K_REDUCE_LD, -EIO, true };
/* address spans that wrap around 2^64 are INVALID_OPERAND, not a fault
 * and not a silent wrap onto valid memory */
FIXTURE_VARIANT_ADD(err, gemm_lda_wraps) { K_GEMM_LDA_WRAP, -EIO, true };
FIXTURE_VARIANT_ADD(err, gemm_stride_c_wraps) { K_GEMM_STRIDE_C_WRAP, -EIO, true };
FIXTURE_VARIANT_ADD(err, reduce_ld_wraps) { K_REDUCE_LD_WRAP, -EIO, true };
FIXTURE_VARIANT_ADD(err, rowop_ld_dst_wraps) { K_ROWOP_LD_WRAP, -EIO, true };
FIXTURE_VARIANT_ADD(err, copy_pitch_wraps) { K_COPY_PITCH_WRAP, -EIO, false };
FIXTURE_VARIANT_ADD(err, gemm_a_past_bo) { K_GEMM_A_PAST, -EFAULT, true };
FIXTURE_VARIANT_ADD(err, gemm_c_past_bo) { K_GEMM_C_PAST, -EFAULT, true };
FIXTURE_VARIANT_ADD(err, eltwise_out_past_bo) { K_ELT_OUT_PAST, -EFAULT, true };
FIXTURE_VARIANT_ADD(err, copy_convert_past_bo) { K_COPY_CONV_PAST, -EFAULT, true };
FIXTURE_VARIANT_ADD(err, rowop_src_past_bo) { K_ROWOP_SRC_PAST, -EFAULT, true };
FIXTURE_VARIANT_ADD(err, split_gemm_c_past_bo) { K_GEMM_SPLIT_C_PAST, -EFAULT, true };

FIXTURE_SETUP(err)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_NORMAL);
	if (variant->compute)
		ST_NEED_CAPS(&self->x, DRM_SPYRE_CAP_INT8 | DRM_SPYRE_CAP_BF16);
}

FIXTURE_TEARDOWN(err)
{
	st_close(&self->x);
}

static struct spyre_cmd_gemm *gemm(struct st_cs *cs, uint32_t dt, uint32_t m,
				   uint32_t n, uint32_t k, uint64_t a,
				   uint64_t b, uint64_t c)
{
	return st_cs_gemm(cs, dt, dt == SPYRE_DTYPE_INT8 ? SPYRE_DTYPE_INT32 :
			  SPYRE_DTYPE_FP32, m, n, k, a, b, c);
}

/*
 * Encode the bad command of @kind; for a fault, [*lo, *hi) is where the
 * faulting VA must lie (the guard page after the operand's BO).
 */
static int build_bad(struct st_ctx *x, enum kind kind, struct st_cs *cs,
		     uint64_t *lo, uint64_t *hi)
{
	struct st_buf a, b, c;
	int ret;

	*lo = *hi = 0;
	if (kind == K_GEMM_SPLIT_C_PAST) {
		/* 512 x 512 x 512 (2^27 multiply-adds: split over cores) */
		ret = st_buf_new(x, 512 * 512 * 2, &a);
		ret = ret ?: st_buf_new(x, 512 * 512 * 2, &b);
		ret = ret ?: st_buf_new(x, 512 * 512 * 4, &c);
	} else {
		ret = st_buf_new(x, 64 * 1024, &a);
		ret = ret ?: st_buf_new(x, 64 * 1024, &b);
		ret = ret ?: st_buf_new(x, 64 * 1024, &c);
	}
	if (ret)
		return ret;
	switch (kind) {
	case K_OPCODE:
		st_cs_add(cs, 0x7f, 0, 8);
		break;
	case K_OPCODE_FFFF:
		st_cs_add(cs, 0xffff, 0, 16);
		break;
	case K_FILL_LIMIT:
		st_cs_fill(cs, a.va, (1ull << 29) + 1, 8, 1);
		break;
	case K_COPY_LIMIT:
		st_cs_bytes(cs, b.va, a.va, SPYRE_CMD_MAX_COPY_BYTES + 1);
		break;
	case K_FILL_2GIB:
		st_cs_fill(cs, a.va, 1ull << 28, 8, 1);
		*lo = a.bo_va + a.bo_size;
		break;
	case K_COPY_2GIB:
		/* 2 GiB from the last 32 KiB of a into b (64 KiB): the
		 * source runs out first */
		st_cs_copy(cs, 0, b.va, SPYRE_DTYPE_U8, 0, a.va + 32768,
			   SPYRE_DTYPE_U8, 0, 1ull << 31, 1);
		*lo = a.bo_va + a.bo_size;
		break;
	case K_ELT_LIMIT: {
		struct spyre_cmd_eltwise *e = ST_CS(cs, ELTWISE, 0,
						    spyre_cmd_eltwise);

		e->op = SPYRE_ELT_ADD;
		e->dtype = SPYRE_DTYPE_FP16;
		e->count = SPYRE_CMD_MAX_ELEMS + 1;
		e->a = a.va;
		e->b = b.va;
		e->out = c.va;
		break;
	}
	case K_REDUCE_LIMIT: {
		struct spyre_cmd_reduce *r = ST_CS(cs, REDUCE, 0,
						   spyre_cmd_reduce);

		r->op = SPYRE_REDUCE_SUM;
		r->dtype = SPYRE_DTYPE_FP32;
		r->rows = 1u << 16;
		r->cols = (1u << 14) + 1;
		r->ld = r->cols;
		r->src = a.va;
		r->dst = b.va;
		break;
	}
	case K_ROWOP_LIMIT:
	case K_ROWOP_NEG_EPS:
	case K_SOFTMAX_NAN_EPS:
	case K_RMSNORM_NEG_EPS:
	case K_ROWOP_SRC_PAST: {
		struct spyre_cmd_rowop *r = ST_CS(cs, ROWOP, 0, spyre_cmd_rowop);

		r->op = kind == K_ROWOP_NEG_EPS ? SPYRE_ROW_LAYERNORM :
			kind == K_RMSNORM_NEG_EPS ? SPYRE_ROW_RMSNORM :
						    SPYRE_ROW_SOFTMAX;
		r->dtype = SPYRE_DTYPE_FP32;
		r->rows = kind == K_ROWOP_LIMIT ? 1u << 15 : 16;
		r->cols = kind == K_ROWOP_LIMIT ? (1u << 15) + 1 : 1024;
		r->ld_src = r->ld_dst = r->cols;
		r->src = a.va;
		r->dst = b.va;
		r->eps = st_f2u(kind == K_ROWOP_NEG_EPS ? -1e-5f :
				kind == K_RMSNORM_NEG_EPS ? -0.0f - 1e-30f :
				kind == K_SOFTMAX_NAN_EPS ? NAN : 1e-5f);
		if (kind == K_ROWOP_SRC_PAST) {
			/* 16 x 1024 fp32 = 64 KiB: one element too many */
			r->src = a.va + 4;
			*lo = a.bo_va + a.bo_size;
		}
		break;
	}
	case K_GEMM_LIMIT: {
		struct spyre_cmd_gemm *g = gemm(cs, SPYRE_DTYPE_FP16, 4096,
						4096, 4096, a.va, b.va, c.va);

		g->batch = 2;		/* 2^37 multiply-adds */
		g->stride_a = g->stride_b = 0;
		g->stride_c = 4096ull * 4096;
		break;
	}
	case K_GEMM_ZERO_M:
		gemm(cs, SPYRE_DTYPE_FP32, 0, 4, 4, a.va, b.va, c.va);
		break;
	case K_GEMM_BAD_LDA:
		gemm(cs, SPYRE_DTYPE_FP32, 4, 4, 8, a.va, b.va, c.va)->lda = 7;
		break;
	case K_GEMM_INT8_FP32:
		gemm(cs, SPYRE_DTYPE_INT8, 4, 4, 4, a.va, b.va, c.va)->c_dtype =
			SPYRE_DTYPE_FP32;
		break;
	case K_GEMM_FP16_BF16:
		gemm(cs, SPYRE_DTYPE_FP16, 4, 4, 4, a.va, b.va, c.va)->b_dtype =
			SPYRE_DTYPE_BF16;
		break;
	case K_GEMM_INT8_BETA2:
		gemm(cs, SPYRE_DTYPE_INT8, 4, 4, 4, a.va, b.va, c.va)->beta =
			st_f2u(2.0f);
		break;
	case K_ELT_BAD_OP:
	case K_ELT_INT8:
	case K_ELT_OUT_PAST: {
		struct spyre_cmd_eltwise *e = ST_CS(cs, ELTWISE, 0,
						    spyre_cmd_eltwise);

		e->op = kind == K_ELT_BAD_OP ? SPYRE_ELT_EXP + 1 :
						SPYRE_ELT_RELU;
		e->dtype = kind == K_ELT_INT8 ? SPYRE_DTYPE_INT8 :
						SPYRE_DTYPE_FP32;
		e->count = 1024;
		e->a = a.va;
		e->b = b.va;
		e->out = c.va;
		if (kind == K_ELT_OUT_PAST) {
			e->count = 16384;
			e->out = c.va + 4;	/* last element in the guard */
			*lo = c.bo_va + c.bo_size;
		}
		break;
	}
	case K_REDUCE_BAD_OP: {
		struct spyre_cmd_reduce *r = ST_CS(cs, REDUCE, 0,
						   spyre_cmd_reduce);

		r->op = 3;
		r->dtype = SPYRE_DTYPE_FP32;
		r->rows = 4;
		r->cols = 4;
		r->ld = 4;
		r->src = a.va;
		r->dst = b.va;
		break;
	}
	case K_GEMM_A_PAST:
		/* 128 x 128 fp32 A = 64 KiB: start one element late */
		gemm(cs, SPYRE_DTYPE_FP32, 128, 4, 128, a.va + 4, b.va, c.va);
		*lo = a.bo_va + a.bo_size;
		break;
	case K_GEMM_C_PAST:
		/* 128 x 128 fp32 C = 64 KiB: start one element late */
		gemm(cs, SPYRE_DTYPE_FP32, 128, 128, 4, a.va, b.va, c.va + 4);
		*lo = c.bo_va + c.bo_size;
		break;
	case K_COPY_PITCH:
		st_cs_copy(cs, 0, b.va, SPYRE_DTYPE_FP16, 64, a.va,
			   SPYRE_DTYPE_FP16, 62, 32, 4);	/* rows of 64 bytes */
		break;
	case K_ELT_PAD: {
		struct spyre_cmd_eltwise *e = ST_CS(cs, ELTWISE, 0,
						    spyre_cmd_eltwise);

		e->op = SPYRE_ELT_RELU;
		e->dtype = SPYRE_DTYPE_FP32;
		e->count = 16;
		e->a = a.va;
		e->out = c.va;
		e->pad = 1;
		break;
	}
	case K_ROWOP_PAD: {
		struct spyre_cmd_rowop *r = ST_CS(cs, ROWOP, 0, spyre_cmd_rowop);

		r->op = SPYRE_ROW_SOFTMAX;
		r->dtype = SPYRE_DTYPE_FP32;
		r->rows = r->cols = 4;
		r->ld_src = r->ld_dst = 4;
		r->src = a.va;
		r->dst = b.va;
		r->pad = 0x80000000u;
		break;
	}
	case K_GEMM_FLAGS:
		gemm(cs, SPYRE_DTYPE_FP32, 4, 4, 4, a.va, b.va, c.va)->hdr.flags =
			1u << 3;
		break;
	case K_REDUCE_LD: {
		struct spyre_cmd_reduce *r = ST_CS(cs, REDUCE, 0,
						   spyre_cmd_reduce);

		r->op = SPYRE_REDUCE_MAX;
		r->dtype = SPYRE_DTYPE_BF16;
		r->rows = 4;
		r->cols = 8;
		r->ld = 7;
		r->src = a.va;
		r->dst = b.va;
		break;
	}
	case K_GEMM_LDA_WRAP:
		/* fp16 A, 3 rows: row 2 at a + 4 * (2^62 + 1) = a + 4 mod 2^64 */
		gemm(cs, SPYRE_DTYPE_FP16, 3, 4, 4, a.va, b.va, c.va)->lda =
			(1ull << 62) + 1;
		break;
	case K_GEMM_STRIDE_C_WRAP: {
		/* fp32 C of batch 1 at c + 4 * 2^62 = c mod 2^64 */
		struct spyre_cmd_gemm *g = gemm(cs, SPYRE_DTYPE_FP32, 4, 4, 4,
						a.va, b.va, c.va);

		g->batch = 2;
		g->stride_c = 1ull << 62;
		break;
	}
	case K_REDUCE_LD_WRAP: {
		struct spyre_cmd_reduce *r = ST_CS(cs, REDUCE, 0,
						   spyre_cmd_reduce);

		r->op = SPYRE_REDUCE_SUM;
		r->dtype = SPYRE_DTYPE_FP32;
		r->rows = 2;
		r->cols = 8;
		r->ld = 1ull << 62;	/* row 1 at src + 2^64 = src */
		r->src = a.va;
		r->dst = b.va;
		break;
	}
	case K_ROWOP_LD_WRAP: {
		struct spyre_cmd_rowop *r = ST_CS(cs, ROWOP, 0, spyre_cmd_rowop);

		r->op = SPYRE_ROW_RMSNORM;
		r->dtype = SPYRE_DTYPE_FP16;
		r->rows = 3;
		r->cols = 8;
		r->ld_src = 8;
		r->ld_dst = 1ull << 62;	/* row 2 at dst + 2^64 = dst */
		r->src = a.va;
		r->dst = b.va;
		r->eps = st_f2u(1e-5f);
		break;
	}
	case K_COPY_PITCH_WRAP:
		/* row 2 at dst + 2 * 2^63 = dst */
		st_cs_copy(cs, 0, b.va, SPYRE_DTYPE_U8, 1ull << 63, a.va,
			   SPYRE_DTYPE_U8, 64, 64, 3);
		break;
	case K_TIMESTAMP_ALIGN:
		st_cs_timestamp(cs, a.va + 4);
		break;
	case K_SEM_ALIGN:
		st_cs_sem(cs, true, 0, a.va + 12, 1);
		break;
	case K_GEMM_SPLIT_C_PAST:
		/* C (1 MiB of fp32) one element late: the last part faults */
		gemm(cs, SPYRE_DTYPE_FP16, 512, 512, 512, a.va, b.va,
		     c.va + 4);
		*lo = c.bo_va + c.bo_size;
		break;
	case K_COPY_CONV_PAST:
		/* 16384 fp32 = 64 KiB of c, read from one element late */
		st_cs_copy(cs, 0, b.va, SPYRE_DTYPE_FP16, 0, c.va + 4,
			   SPYRE_DTYPE_FP32, 0, 16384, 1);
		*lo = c.bo_va + c.bo_size;
		break;
	}
	if (*lo)
		*hi = *lo + PAGE;
	return cs->overflow ? -E2BIG : 0;
}

/* Child of another process: run a FILL + COPY, check it; exit status. */
static int other_process_job(int rfd)
{
	struct st_ctx y;
	struct st_buf a, b;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	char c;

	if (read(rfd, &c, 1) != 1)	/* after the failure */
		return 2;
	if (!cs || st_open(&y, 0, DRM_SPYRE_PRIORITY_NORMAL) ||
	    st_buf_new(&y, 8192, &a) || st_buf_new(&y, 8192, &b))
		return 3;
	st_cs_fill(cs, a.va, 1024, 8, 0x0123456789abcdefull);
	st_cs_bytes(cs, b.va, a.va, 8192);
	if (st_run(&y, cs))
		return 4;
	for (int i = 0; i < 8192; i += 8)
		if (*(uint64_t *)(b.p + i) != 0x0123456789abcdefull)
			return 5;
	return st_ctx_error(y.fd) ? 6 : 0;
}

TEST_F_TIMEOUT(err, fails_only_its_job, 60)
{
	struct st_ctx *x = &self->x, y;
	struct st_buf gate, m1, m3, ya, yb;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	struct drm_spyre_context_info ci;
	uint32_t s1, s3, ys, q2;
	uint64_t lo, hi;
	int pfd[2], status;
	pid_t pid;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(pfd[1]);
		_exit(other_process_job(pfd[0]));
	}
	close(pfd[0]);

	ASSERT_EQ(0, st_open(&y, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&y, 4u << 20, &ya));
	ASSERT_EQ(0, st_buf_new(&y, 4u << 20, &yb));
	ASSERT_EQ(0, drmSyncobjCreate(y.fd, 0, &ys));
	ASSERT_EQ(0, drmSyncobjCreate(x->fd, 0, &s1));
	ASSERT_EQ(0, drmSyncobjCreate(x->fd, 0, &s3));
	ASSERT_EQ(0, st_buf_new(x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(x, 8, &m1));
	ASSERT_EQ(0, st_buf_new(x, 8, &m3));

	/* the other file's job, in flight across the failure */
	st_cs_fill(cs, ya.va, (4u << 20) / 8, 8, 0xfeedfacecafebeefull);
	st_cs_bytes(cs, yb.va, ya.va, 4u << 20);
	ASSERT_EQ(0, st_submit_cs(&y, y.qid, cs, NULL, 0, ys, 0));

	/* good, bad, good on one queue; the first waits for the CPU to open
	 * a gate, so that all three are queued before the bad one runs */
	st_cs_reset(cs);
	st_cs_sem(cs, false, 0, gate.va, 1);
	st_cs_fill(cs, m1.va, 1, 8, 0x1111);
	ASSERT_EQ(0, st_submit_cs(x, x->qid, cs, NULL, 0, s1, 0));
	st_cs_reset(cs);
	ASSERT_EQ(0, build_bad(x, variant->kind, cs, &lo, &hi));
	ASSERT_EQ(0, st_submit_cs(x, x->qid, cs, NULL, 0, x->sync, 0));
	st_cs_reset(cs);
	st_cs_fill(cs, m3.va, 1, 8, 0x3333);
	ASSERT_EQ(0, st_submit_cs(x, x->qid, cs, NULL, 0, s3, 0));
	EXPECT_EQ(0, st_ctx_error(x->fd));
	__atomic_store_n((uint64_t *)gate.p, 1, __ATOMIC_SEQ_CST);

	EXPECT_EQ(0, st_wait_status(x->fd, s1, ST_TIMEOUT_NS));
	EXPECT_EQ(variant->err, st_wait_status(x->fd, x->sync,
					       ST_TIMEOUT_NS));
	EXPECT_EQ(-ECANCELED, st_wait_status(x->fd, s3,
					     ST_TIMEOUT_NS));
	EXPECT_EQ(0x1111, *(volatile uint64_t *)m1.p);
	EXPECT_EQ(0, *(volatile uint64_t *)m3.p);

	ASSERT_EQ(0, st_query_context(x->fd, &ci));
	EXPECT_EQ(variant->err, ci.error);
	if (variant->err == -EFAULT) {
		EXPECT_EQ(1, ci.faults);
		EXPECT_LE(lo, ci.fault_va) TH_LOG("fault VA %#llx, guard page %#llx",
			(unsigned long long)ci.fault_va,
			(unsigned long long)lo);
		EXPECT_GT(hi, ci.fault_va) TH_LOG("fault VA %#llx, guard page %#llx",
			(unsigned long long)ci.fault_va,
			(unsigned long long)lo);
	} else {
		EXPECT_EQ(0, ci.faults);
		EXPECT_EQ(0, ci.fault_va);
	}

	/* sticky: later submits fail, on any queue */
	st_cs_reset(cs);
	st_cs_fill(cs, m3.va, 1, 8, 0x4444);
	EXPECT_EQ(-ECANCELED, st_submit_cs(x, x->qid, cs, NULL, 0, 0, 0));
	if (st_queue_new(x->fd, DRM_SPYRE_PRIORITY_HIGH, &q2) == 0) {
		EXPECT_EQ(-ECANCELED, st_submit_cs(x, q2, cs, NULL, 0, 0, 0));
	}
	EXPECT_EQ(0, *(volatile uint64_t *)m3.p);

	/* the other file: its job went through, and it still works */
	EXPECT_EQ(0, st_wait_status(y.fd, ys, ST_TIMEOUT_NS));
	EXPECT_EQ(0xfeedfacecafebeefull, *(volatile uint64_t *)
		  (yb.p + (4u << 20) - 8));
	EXPECT_EQ(0, st_ctx_error(y.fd));
	st_cs_reset(cs);
	st_cs_fill(cs, yb.va, 1, 8, 42);
	EXPECT_EQ(0, st_run(&y, cs));
	EXPECT_EQ(42, *(volatile uint64_t *)yb.p);

	/* another process */
	ASSERT_EQ(1, write(pfd[1], "g", 1));
	close(pfd[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	st_close(&y);
	free(cs);
}

TEST_HARNESS_MAIN
