/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR MIT */
/*
 * Spyre command-stream format.
 */

/**
 * DOC: Spyre command streams
 *
 * Userspace writes command streams into buffer objects; a job names the
 * stream by device VA and size, and the card executes it in order.  This
 * header is the one definition shared by libspyre (which encodes), the card
 * model (which decodes) and the tests.  docs/spyre-hw.rst describes the
 * semantics in prose.
 *
 * Encoding rules:
 *  - every field is little-endian, whatever the host's byte order: the
 *    card decodes streams as little-endian (libspyre's encoders store the
 *    structs below as they are, so they are right on little-endian hosts
 *    only, the only ones it supports today);
 *  - a stream is a sequence of commands, each starting with a
 *    struct spyre_cmd_header and 8-byte aligned;
 *  - header.size is the size in bytes of the whole command and must equal
 *    the size of the opcode's struct below (else SPYRE_STATUS_INVALID_COMMAND);
 *  - every pad and reserved field must be zero, and header.flags may only
 *    hold the bits the opcode defines (else SPYRE_STATUS_INVALID_COMMAND);
 *  - every address is a device VA in the job's context, translated by the
 *    card MMU; strides, pitches and leading dimensions are as documented per
 *    command; element counts are checked for overflow in 64 bits;
 *  - float scalars (alpha, beta, eps) are IEEE binary32 bit patterns.
 *
 * Matrices are row-major: element (r, c) of a matrix with leading dimension
 * ld is at base + (r * ld + c) * element_size.
 */
#ifndef SPYRE_CMD_H
#define SPYRE_CMD_H

#include <linux/types.h>

/* Opcodes. */
#define SPYRE_OP_NOP		0x00
#define SPYRE_OP_FILL		0x01
#define SPYRE_OP_COPY		0x02
#define SPYRE_OP_GEMM		0x03
#define SPYRE_OP_ELTWISE	0x04
#define SPYRE_OP_REDUCE		0x05
#define SPYRE_OP_ROWOP		0x06
#define SPYRE_OP_TIMESTAMP	0x07
#define SPYRE_OP_SEM_WAIT	0x08
#define SPYRE_OP_SEM_SIGNAL	0x09
#define SPYRE_OP_COUNT		0x0a

/* Data types.  0 is invalid on purpose. */
#define SPYRE_DTYPE_U8		1	/* raw bytes (COPY without conversion) */
#define SPYRE_DTYPE_FP32	2
#define SPYRE_DTYPE_FP16	3
#define SPYRE_DTYPE_BF16	4
#define SPYRE_DTYPE_FP8_E4M3	5	/* OCP OFP8 E4M3 (no inf, NaN=0x7f) */
#define SPYRE_DTYPE_FP8_E5M2	6	/* OCP OFP8 E5M2 (IEEE-like) */
#define SPYRE_DTYPE_INT8	7
#define SPYRE_DTYPE_INT32	8
#define SPYRE_DTYPE_COUNT	9

/*
 * Completion status of a job (struct spyre_hw_completion.status, and
 * reported to userspace through the fence error).
 */
#define SPYRE_STATUS_OK			0
#define SPYRE_STATUS_INVALID_OPCODE	1	/* unknown opcode */
#define SPYRE_STATUS_INVALID_COMMAND	2	/* bad size/flags/reserved */
#define SPYRE_STATUS_INVALID_OPERAND	3	/* bad dtype/op/shape/stride */
#define SPYRE_STATUS_MMU_FAULT		4	/* unmapped/read-only VA */
#define SPYRE_STATUS_DMA_ERROR		5	/* system memory not reached */
#define SPYRE_STATUS_ABORTED		6	/* queue reset while running */
#define SPYRE_STATUS_LIMIT		7	/* command exceeds card limits */
#define SPYRE_STATUS_INVALID_JOB	8	/* bad descriptor or context */
#define SPYRE_STATUS_INTERNAL		9	/* injected or internal error */

/*
 * Per-command limits: a command beyond them ends with SPYRE_STATUS_LIMIT.
 * They bound the card time one command may take.
 *  - SPYRE_CMD_MAX_GEMM_MACS: batch * M * N * K of a GEMM;
 *  - SPYRE_CMD_MAX_ELEMS: ELTWISE count, REDUCE and ROWOP rows * cols;
 *  - SPYRE_CMD_MAX_COPY_BYTES: bytes of a FILL (count * elem_size) and of a
 *    COPY (width * height * the larger element size).
 */
#define SPYRE_CMD_MAX_GEMM_MACS		(1ULL << 36)
#define SPYRE_CMD_MAX_ELEMS		(1ULL << 30)
#define SPYRE_CMD_MAX_COPY_BYTES	(1ULL << 32)

/* 1.0 as an IEEE binary32 bit pattern (alpha of a plain GEMM). */
#define SPYRE_CMD_F32_ONE		0x3f800000U

/**
 * struct spyre_cmd_header - first 8 bytes of every command.
 * @opcode: SPYRE_OP_*.
 * @flags: opcode-specific SPYRE_CMD_F_* bits.
 * @size: size of the whole command in bytes (== sizeof its struct).
 */
struct spyre_cmd_header {
	__u16 opcode;
	__u16 flags;
	__u32 size;
};

/*
 * Flags valid in several commands.  SPYRE_CMD_F_NOSAT: fp8 narrowing
 * overflows to inf (E5M2) / NaN (E4M3) instead of saturating to the
 * largest finite value.
 */
#define SPYRE_CMD_F_NOSAT	(1U << 0)

/**
 * struct spyre_cmd_nop - does nothing.
 * @hdr: opcode SPYRE_OP_NOP, size 8.
 */
struct spyre_cmd_nop {
	struct spyre_cmd_header hdr;
};

/**
 * struct spyre_cmd_fill - fill @count elements of @elem_size bytes at @dst
 * with the low @elem_size bytes of @value (little-endian).
 * @hdr: opcode SPYRE_OP_FILL, size 40.
 * @dst: device VA of the first element.
 * @count: elements to write (0 writes nothing).
 * @value: fill pattern, low @elem_size bytes used.
 * @elem_size: 1, 2, 4 or 8 bytes.
 * @pad: must be zero.
 */
struct spyre_cmd_fill {
	struct spyre_cmd_header hdr;
	__u64 dst;
	__u64 count;
	__u64 value;
	__u32 elem_size;
	__u32 pad;
};

/**
 * struct spyre_cmd_copy - 2-D strided copy with dtype conversion.
 * @hdr: opcode SPYRE_OP_COPY, size 64, flag SPYRE_CMD_F_NOSAT.
 * @src: device VA of the first source element.
 * @dst: device VA of the first destination element.
 * @width: elements per row (>= 1).
 * @height: rows (>= 1).
 * @src_pitch: bytes between source rows (ignored when @height == 1).
 * @dst_pitch: bytes between destination rows (ignored when @height == 1).
 * @src_dtype: SPYRE_DTYPE_* of the source.
 * @dst_dtype: SPYRE_DTYPE_* of the destination.  U8 only with U8 (byte copy);
 *	INT32 only with INT32; the float types (FP32/FP16/BF16/FP8) and INT8
 *	convert among themselves, narrowing with round-to-nearest-even;
 *	fp8 narrowing saturates unless SPYRE_CMD_F_NOSAT.
 * Source and destination must not overlap (undefined result, never a crash).
 */
struct spyre_cmd_copy {
	struct spyre_cmd_header hdr;
	__u64 src;
	__u64 dst;
	__u64 width;
	__u64 height;
	__u64 src_pitch;
	__u64 dst_pitch;
	__u32 src_dtype;
	__u32 dst_dtype;
};

#define SPYRE_GEMM_F_TRANS_A	(1U << 1)	/* op(A) = A^T, A stored K x M */
#define SPYRE_GEMM_F_TRANS_B	(1U << 2)	/* op(B) = B^T, B stored N x K */
#define SPYRE_GEMM_F_ALL	(SPYRE_CMD_F_NOSAT | SPYRE_GEMM_F_TRANS_A | \
				 SPYRE_GEMM_F_TRANS_B)

/**
 * struct spyre_cmd_gemm - batched C = alpha * sa * sb * op(A) op(B)
 *	+ beta * C + bias.
 * @hdr: opcode SPYRE_OP_GEMM, size 152, flags SPYRE_GEMM_F_ALL.
 * @a_dtype: dtype of A: FP32, FP16, BF16, FP8_E4M3, FP8_E5M2 or INT8.
 * @b_dtype: dtype of B: equal to @a_dtype, or the mixed pair
 *	FP8_E4M3 x FP8_E5M2 (either order).
 * @c_dtype: FP32, FP16 or BF16 (float inputs, fp32 accumulation) or INT32
 *	(INT8 inputs only, int32 accumulation, alpha/beta/scales/bias ignored
 *	except beta in {0, 1}).
 * @bias_dtype: 0 (no bias) or FP32/FP16/BF16: an N-vector added to every row.
 * @m: rows of op(A) and C (>= 1).
 * @n: columns of op(B) and C (>= 1).
 * @k: columns of op(A), rows of op(B) (>= 1).
 * @batch: number of matrices (>= 1).
 * @a: device VA of A of batch 0.
 * @b: device VA of B of batch 0.
 * @c: device VA of C of batch 0.
 * @lda: leading dimension of A in elements (>= K, or >= M with TRANS_A).
 * @ldb: leading dimension of B in elements (>= N, or >= K with TRANS_B).
 * @ldc: leading dimension of C in elements (>= N).
 * @stride_a: elements between consecutive A matrices.
 * @stride_b: elements between consecutive B matrices.
 * @stride_c: elements between consecutive C matrices.
 * @alpha: binary32 multiplier of the product.
 * @beta: binary32 multiplier of C; 0 means C is not read.
 * @scale_a: VA of a binary32 per-tensor scale of A, 0 for 1.0.
 * @scale_b: VA of a binary32 per-tensor scale of B, 0 for 1.0.
 * @bias: VA of the bias vector when @bias_dtype != 0.
 * @amax: VA of a binary32 written with max |result| over all batches
 *	before conversion to @c_dtype; 0 for none.
 */
struct spyre_cmd_gemm {
	struct spyre_cmd_header hdr;
	__u32 a_dtype;
	__u32 b_dtype;
	__u32 c_dtype;
	__u32 bias_dtype;
	__u32 m;
	__u32 n;
	__u32 k;
	__u32 batch;
	__u64 a;
	__u64 b;
	__u64 c;
	__u64 lda;
	__u64 ldb;
	__u64 ldc;
	__u64 stride_a;
	__u64 stride_b;
	__u64 stride_c;
	__u32 alpha;
	__u32 beta;
	__u64 scale_a;
	__u64 scale_b;
	__u64 bias;
	__u64 amax;
};

/* Element-wise operations: out[i] = f(a[i], b[i]), computed in fp32. */
#define SPYRE_ELT_ADD		1	/* a + b */
#define SPYRE_ELT_MUL		2	/* a * b */
#define SPYRE_ELT_SCALE		3	/* alpha * a */
#define SPYRE_ELT_RELU		4	/* max(a, 0) */
#define SPYRE_ELT_GELU		5	/* a * 0.5 * (1 + erf(a / sqrt(2))) */
#define SPYRE_ELT_SILU		6	/* a / (1 + exp(-a)) */
#define SPYRE_ELT_EXP		7	/* exp(a) */

/**
 * struct spyre_cmd_eltwise - element-wise op over @count elements.
 * @hdr: opcode SPYRE_OP_ELTWISE, size 56.
 * @op: SPYRE_ELT_*; @b is read only by ADD and MUL.
 * @count: elements.
 * @a: device VA of the first operand.
 * @b: device VA of the second operand (ADD, MUL).
 * @out: device VA of the result.
 * @pad: must be zero.
 * @dtype: FP32, FP16 or BF16 for @a, @b and @out.
 * @alpha: binary32, used by SCALE.
 * @out may equal @a or @b (in place); other overlaps are undefined.
 */
struct spyre_cmd_eltwise {
	struct spyre_cmd_header hdr;
	__u32 op;
	__u32 dtype;
	__u64 count;
	__u64 a;
	__u64 b;
	__u64 out;
	__u32 alpha;
	__u32 pad;
};

#define SPYRE_REDUCE_SUM	1
#define SPYRE_REDUCE_MAX	2

/**
 * struct spyre_cmd_reduce - row-wise reduction of a @rows x @cols matrix
 * into @rows elements, accumulated in fp32.
 * @hdr: opcode SPYRE_OP_REDUCE, size 48.
 * @op: SPYRE_REDUCE_*.
 * @rows: rows (>= 1).
 * @cols: columns (>= 1).
 * @src: device VA of the matrix.
 * @dst: device VA of the @rows results.
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @ld: leading dimension of @src in elements (>= @cols).
 */
struct spyre_cmd_reduce {
	struct spyre_cmd_header hdr;
	__u32 op;
	__u32 dtype;
	__u32 rows;
	__u32 cols;
	__u64 src;
	__u64 dst;
	__u64 ld;
};

#define SPYRE_ROW_SOFTMAX	1	/* exp(x - max) / sum */
#define SPYRE_ROW_LAYERNORM	2	/* (x - mean) / sqrt(var + eps) * g + b */
#define SPYRE_ROW_RMSNORM	3	/* x / sqrt(mean(x^2) + eps) * g */

/**
 * struct spyre_cmd_rowop - row-wise softmax or normalisation of a
 * @rows x @cols matrix, computed in fp32.
 * @hdr: opcode SPYRE_OP_ROWOP, size 80.
 * @op: SPYRE_ROW_*.
 * @rows: rows (>= 1).
 * @cols: columns (>= 1).
 * @src: device VA of the input matrix.
 * @dst: device VA of the output matrix (may equal @src).
 * @pad: must be zero.
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @ld_src: leading dimension of @src in elements (>= @cols).
 * @ld_dst: leading dimension of @dst in elements (>= @cols).
 * @gamma: VA of a binary32 @cols-vector scale, 0 for 1.0; not SOFTMAX.
 * @beta: VA of a binary32 @cols-vector shift, 0 for 0.0; LAYERNORM only.
 * @eps: binary32.
 */
struct spyre_cmd_rowop {
	struct spyre_cmd_header hdr;
	__u32 op;
	__u32 dtype;
	__u32 rows;
	__u32 cols;
	__u64 src;
	__u64 dst;
	__u64 ld_src;
	__u64 ld_dst;
	__u64 gamma;
	__u64 beta;
	__u32 eps;
	__u32 pad;
};

/**
 * struct spyre_cmd_timestamp - write the 64-bit device clock (ns) to @dst.
 * @hdr: opcode SPYRE_OP_TIMESTAMP, size 16.
 * @dst: device VA, 8-byte aligned.
 */
struct spyre_cmd_timestamp {
	struct spyre_cmd_header hdr;
	__u64 dst;
};

/**
 * struct spyre_cmd_sem - SEM_WAIT / SEM_SIGNAL on a 64-bit value at @addr
 * (8-byte aligned).
 * @hdr: opcode SPYRE_OP_SEM_WAIT or SPYRE_OP_SEM_SIGNAL, size 24; flag
 *	SPYRE_SEM_F_ADD for SEM_SIGNAL.
 * @addr: device VA of the 64-bit semaphore value.
 * @value: value to wait for (>=) or to store/add.
 * SEM_WAIT blocks this queue (only) until *addr >= @value.
 * SEM_SIGNAL stores @value, or adds it atomically with SPYRE_SEM_F_ADD.
 */
struct spyre_cmd_sem {
	struct spyre_cmd_header hdr;
	__u64 addr;
	__u64 value;
};

#define SPYRE_SEM_F_ADD		(1U << 1)

/**
 * DOC: Spyre command encoders
 *
 * The spyre_cmd_*_init() functions below are the one encoder of every
 * command: each writes the whole struct it is given (header, fields, zero
 * pads and reserved fields) and nothing else.  They allocate nothing and
 * check nothing: the caller provides storage of sizeof(struct) bytes at an
 * 8-byte aligned offset of its stream, and the card checks what it runs.
 * Addresses are device VAs; float scalars are binary32 bit patterns
 * (SPYRE_CMD_F32_ONE is 1.0).
 */

/**
 * spyre_cmd_dtype_size() - bytes of one element of a data type.
 * @dtype: SPYRE_DTYPE_*.
 *
 * Return: 1, 2 or 4; 0 for an invalid @dtype.
 */
static inline __u32 spyre_cmd_dtype_size(__u32 dtype)
{
	switch (dtype) {
	case SPYRE_DTYPE_U8:
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
	case SPYRE_DTYPE_INT8:
		return 1;
	case SPYRE_DTYPE_FP16:
	case SPYRE_DTYPE_BF16:
		return 2;
	case SPYRE_DTYPE_FP32:
	case SPYRE_DTYPE_INT32:
		return 4;
	default:
		return 0;
	}
}

/**
 * spyre_cmd_dtype_convertible() - whether COPY converts a data type.
 * @dtype: SPYRE_DTYPE_*.
 *
 * Return: 1 for the types COPY converts among themselves (through binary32:
 * FP32, FP16, BF16, FP8_E4M3, FP8_E5M2, INT8), else 0.
 */
static inline int spyre_cmd_dtype_convertible(__u32 dtype)
{
	switch (dtype) {
	case SPYRE_DTYPE_FP32:
	case SPYRE_DTYPE_FP16:
	case SPYRE_DTYPE_BF16:
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
	case SPYRE_DTYPE_INT8:
		return 1;
	default:
		return 0;
	}
}

/**
 * spyre_cmd_hdr_init() - encode a command header.
 * @h: the header.
 * @opcode: SPYRE_OP_*.
 * @flags: the opcode's flag bits.
 * @size: bytes of the whole command (sizeof its struct).
 */
static inline void spyre_cmd_hdr_init(struct spyre_cmd_header *h,
				      __u16 opcode, __u16 flags, __u32 size)
{
	h->opcode = opcode;
	h->flags = flags;
	h->size = size;
}

/**
 * spyre_cmd_nop_init() - encode a NOP.
 * @c: the command (8 bytes).
 */
static inline void spyre_cmd_nop_init(struct spyre_cmd_nop *c)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_NOP, 0, sizeof(*c));
}

/**
 * spyre_cmd_fill_init() - encode a FILL.
 * @c: the command (40 bytes).
 * @dst: device VA of the first element.
 * @count: elements to write.
 * @elem_size: bytes per element: 1, 2, 4 or 8.
 * @value: pattern; its low @elem_size bytes are stored (little-endian).
 */
static inline void spyre_cmd_fill_init(struct spyre_cmd_fill *c, __u64 dst,
				       __u64 count, __u32 elem_size,
				       __u64 value)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_FILL, 0, sizeof(*c));
	c->dst = dst;
	c->count = count;
	c->value = value;
	c->elem_size = elem_size;
	c->pad = 0;
}

/**
 * spyre_cmd_copy_init() - encode a COPY (2-D, converting).
 * @c: the command (64 bytes).
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 * @dst: device VA of the first destination element.
 * @dst_pitch: bytes between destination rows.
 * @dst_dtype: SPYRE_DTYPE_* of the destination.
 * @src: device VA of the first source element.
 * @src_pitch: bytes between source rows.
 * @src_dtype: SPYRE_DTYPE_* of the source.
 * @width: elements per row.
 * @height: rows.
 *
 * A byte copy of n bytes is width n, height 1, both dtypes SPYRE_DTYPE_U8.
 */
static inline void spyre_cmd_copy_init(struct spyre_cmd_copy *c, __u16 flags,
				       __u64 dst, __u64 dst_pitch,
				       __u32 dst_dtype, __u64 src,
				       __u64 src_pitch, __u32 src_dtype,
				       __u64 width, __u64 height)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_COPY, flags, sizeof(*c));
	c->src = src;
	c->dst = dst;
	c->width = width;
	c->height = height;
	c->src_pitch = src_pitch;
	c->dst_pitch = dst_pitch;
	c->src_dtype = src_dtype;
	c->dst_dtype = dst_dtype;
}

/**
 * spyre_cmd_gemm_init() - encode a single GEMM C = op(A) op(B).
 * @g: the command (152 bytes).
 * @flags: SPYRE_GEMM_F_* bits.
 * @a_dtype: SPYRE_DTYPE_* of A.
 * @b_dtype: SPYRE_DTYPE_* of B.
 * @c_dtype: SPYRE_DTYPE_* of C.
 * @m: rows of op(A) and C.
 * @n: columns of op(B) and C.
 * @k: columns of op(A), rows of op(B).
 * @a: device VA of A.
 * @lda: leading dimension of A, in elements.
 * @b: device VA of B.
 * @ldb: leading dimension of B, in elements.
 * @c: device VA of C.
 * @ldc: leading dimension of C, in elements.
 *
 * The rest is the plain case: batch 1, alpha 1.0, beta 0 (C not read), no
 * bias, scales or amax; spyre_cmd_gemm_batch(), spyre_cmd_gemm_epilogue()
 * and spyre_cmd_gemm_scales() change it.
 */
static inline void spyre_cmd_gemm_init(struct spyre_cmd_gemm *g, __u16 flags,
				       __u32 a_dtype, __u32 b_dtype,
				       __u32 c_dtype, __u32 m, __u32 n,
				       __u32 k, __u64 a, __u64 lda, __u64 b,
				       __u64 ldb, __u64 c, __u64 ldc)
{
	spyre_cmd_hdr_init(&g->hdr, SPYRE_OP_GEMM, flags, sizeof(*g));
	g->a_dtype = a_dtype;
	g->b_dtype = b_dtype;
	g->c_dtype = c_dtype;
	g->m = m;
	g->n = n;
	g->k = k;
	g->batch = 1;
	g->a = a;
	g->b = b;
	g->c = c;
	g->lda = lda;
	g->ldb = ldb;
	g->ldc = ldc;
	g->alpha = SPYRE_CMD_F32_ONE;
	g->bias_dtype = 0;
	g->stride_a = 0;
	g->stride_b = 0;
	g->stride_c = 0;
	g->beta = 0;
	g->scale_a = 0;
	g->scale_b = 0;
	g->bias = 0;
	g->amax = 0;
}

/**
 * spyre_cmd_gemm_batch() - make a GEMM strided-batched.
 * @g: a command set up by spyre_cmd_gemm_init().
 * @batch: number of matrices.
 * @stride_a: elements between consecutive A matrices.
 * @stride_b: elements between consecutive B matrices.
 * @stride_c: elements between consecutive C matrices.
 */
static inline void spyre_cmd_gemm_batch(struct spyre_cmd_gemm *g, __u32 batch,
					__u64 stride_a, __u64 stride_b,
					__u64 stride_c)
{
	g->batch = batch;
	g->stride_a = stride_a;
	g->stride_b = stride_b;
	g->stride_c = stride_c;
}

/**
 * spyre_cmd_gemm_epilogue() - set a GEMM's alpha, beta and bias.
 * @g: a command set up by spyre_cmd_gemm_init().
 * @alpha: binary32 bit pattern of the product's multiplier.
 * @beta: binary32 bit pattern of C's multiplier (0: C is not read).
 * @bias_dtype: 0 (no bias) or the SPYRE_DTYPE_* of the bias N-vector.
 * @bias: device VA of the bias (0 without one).
 */
static inline void spyre_cmd_gemm_epilogue(struct spyre_cmd_gemm *g,
					   __u32 alpha, __u32 beta,
					   __u32 bias_dtype, __u64 bias)
{
	g->alpha = alpha;
	g->beta = beta;
	g->bias_dtype = bias_dtype;
	g->bias = bias;
}

/**
 * spyre_cmd_gemm_scales() - set a GEMM's per-tensor scales and amax output.
 * @g: a command set up by spyre_cmd_gemm_init().
 * @scale_a: device VA of A's binary32 scale (0: 1.0).
 * @scale_b: device VA of B's binary32 scale (0: 1.0).
 * @amax: device VA of the binary32 max |result| output (0: none).
 */
static inline void spyre_cmd_gemm_scales(struct spyre_cmd_gemm *g,
					 __u64 scale_a, __u64 scale_b,
					 __u64 amax)
{
	g->scale_a = scale_a;
	g->scale_b = scale_b;
	g->amax = amax;
}

/**
 * spyre_cmd_eltwise_init() - encode an ELTWISE.
 * @c: the command (56 bytes).
 * @op: SPYRE_ELT_*.
 * @dtype: SPYRE_DTYPE_* of @a, @b and @out.
 * @count: elements.
 * @out: device VA of the result.
 * @a: device VA of the first operand.
 * @b: device VA of the second operand (ADD, MUL; else 0).
 * @alpha: binary32 bit pattern used by SCALE.
 */
static inline void spyre_cmd_eltwise_init(struct spyre_cmd_eltwise *c,
					  __u32 op, __u32 dtype, __u64 count,
					  __u64 out, __u64 a, __u64 b,
					  __u32 alpha)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_ELTWISE, 0, sizeof(*c));
	c->op = op;
	c->dtype = dtype;
	c->count = count;
	c->a = a;
	c->b = b;
	c->out = out;
	c->alpha = alpha;
	c->pad = 0;
}

/**
 * spyre_cmd_reduce_init() - encode a REDUCE.
 * @c: the command (48 bytes).
 * @op: SPYRE_REDUCE_*.
 * @dtype: SPYRE_DTYPE_* of @src and @dst.
 * @rows: rows of the matrix (and results).
 * @cols: columns of the matrix.
 * @dst: device VA of the @rows results.
 * @src: device VA of the matrix.
 * @ld: leading dimension of @src, in elements.
 */
static inline void spyre_cmd_reduce_init(struct spyre_cmd_reduce *c, __u32 op,
					 __u32 dtype, __u32 rows, __u32 cols,
					 __u64 dst, __u64 src, __u64 ld)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_REDUCE, 0, sizeof(*c));
	c->op = op;
	c->dtype = dtype;
	c->rows = rows;
	c->cols = cols;
	c->src = src;
	c->dst = dst;
	c->ld = ld;
}

/**
 * spyre_cmd_rowop_init() - encode a ROWOP.
 * @c: the command (80 bytes).
 * @op: SPYRE_ROW_*.
 * @dtype: SPYRE_DTYPE_* of @src and @dst.
 * @rows: rows.
 * @cols: columns.
 * @dst: device VA of the output matrix.
 * @ld_dst: leading dimension of @dst, in elements.
 * @src: device VA of the input matrix.
 * @ld_src: leading dimension of @src, in elements.
 * @gamma: device VA of the binary32 scale vector (0: 1.0).
 * @beta: device VA of the binary32 shift vector (0: 0.0).
 * @eps: binary32 bit pattern of epsilon.
 */
static inline void spyre_cmd_rowop_init(struct spyre_cmd_rowop *c, __u32 op,
					__u32 dtype, __u32 rows, __u32 cols,
					__u64 dst, __u64 ld_dst, __u64 src,
					__u64 ld_src, __u64 gamma, __u64 beta,
					__u32 eps)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_ROWOP, 0, sizeof(*c));
	c->op = op;
	c->dtype = dtype;
	c->rows = rows;
	c->cols = cols;
	c->src = src;
	c->dst = dst;
	c->ld_src = ld_src;
	c->ld_dst = ld_dst;
	c->gamma = gamma;
	c->beta = beta;
	c->eps = eps;
	c->pad = 0;
}

/**
 * spyre_cmd_timestamp_init() - encode a TIMESTAMP.
 * @c: the command (16 bytes).
 * @dst: device VA of the 64-bit result, 8-byte aligned.
 */
static inline void spyre_cmd_timestamp_init(struct spyre_cmd_timestamp *c,
					    __u64 dst)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_TIMESTAMP, 0, sizeof(*c));
	c->dst = dst;
}

/**
 * spyre_cmd_sem_init() - encode a SEM_WAIT or a SEM_SIGNAL.
 * @c: the command (24 bytes).
 * @opcode: SPYRE_OP_SEM_WAIT or SPYRE_OP_SEM_SIGNAL.
 * @flags: 0, or SPYRE_SEM_F_ADD for SEM_SIGNAL.
 * @addr: device VA of the 64-bit semaphore, 8-byte aligned.
 * @value: value to wait for (>=), or to store or add.
 */
static inline void spyre_cmd_sem_init(struct spyre_cmd_sem *c, __u16 opcode,
				      __u16 flags, __u64 addr, __u64 value)
{
	spyre_cmd_hdr_init(&c->hdr, opcode, flags, sizeof(*c));
	c->addr = addr;
	c->value = value;
}

#endif /* SPYRE_CMD_H */
