/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR MIT */
/*
 * Spyre command-stream format.
 */

/**
 * DOC: Spyre command streams
 *
 * Userspace writes command streams into buffer objects; a job names the
 * stream by device VA and size, and the card executes it in order.  This
 * header is the one definition shared by libspyre (which encodes, with the
 * encoders of its <spyre/spyre_encode.h>), the card model (which decodes)
 * and the tests.  docs/spyre-hw.rst describes the semantics in prose.
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
#define SPYRE_OP_KERNEL		0x0a	/* VERSION 1.1, SPYRE_CAP_KERNEL */
#define SPYRE_OP_COUNT		0x0b

/* Data types.  0 is invalid on purpose. */
#define SPYRE_DTYPE_U8		1	/* raw bytes (COPY without conversion) */
#define SPYRE_DTYPE_FP32	2
#define SPYRE_DTYPE_FP16	3
#define SPYRE_DTYPE_BF16	4
#define SPYRE_DTYPE_FP8_E4M3	5	/* OCP OFP8 E4M3 (no inf, NaN=0x7f) */
#define SPYRE_DTYPE_FP8_E5M2	6	/* OCP OFP8 E5M2 (IEEE-like) */
#define SPYRE_DTYPE_INT8	7
#define SPYRE_DTYPE_INT32	8
/* Kernels only (KERNEL operands); the other commands refuse these. */
#define SPYRE_DTYPE_INT64	9
#define SPYRE_DTYPE_INT16	10
#define SPYRE_DTYPE_BOOL	11	/* one byte: 0 or 1 */
#define SPYRE_DTYPE_COUNT	12

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
#define SPYRE_STATUS_BAD_PROGRAM	10	/* kernel failed verification */
#define SPYRE_STATUS_OUT_OF_BOUNDS	11	/* kernel access past an extent */
#define SPYRE_STATUS_ASSERT		12	/* kernel CHECK failed */

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
 * struct spyre_cmd_kernel - run a program over an iteration space (KERNEL).
 * @hdr: opcode SPYRE_OP_KERNEL, flags 0, size
 *	SPYRE_CMD_KERNEL_SIZE(@noperands, @nparams).
 * @prog: device VA of the program (struct spyre_kprog_header, then the
 *	instructions), 8-byte aligned.
 * @prog_size: bytes of the program: 64 + 16 * ninsts.
 * @noperands: operand entries following this struct, 0..32.
 * @nparams: u64 parameters following the operands, 0..64.
 * @npdims: pointwise dimensions, 0..6 (0: one point).
 * @nrdims: reduction dimensions, 0..3.
 * @pad: must be zero.
 * @size: sizes of p0..p5 (@size[0..5]) and r0..r2 (@size[6..8]), outermost
 *	first, unused entries zero; SPYRE_KSIZE_PARAM(i) takes a size from
 *	parameter i.
 *
 * Followed by @noperands struct spyre_kernel_operand and @nparams __u64
 * parameters.  docs/spyre-hw.rst, "The KERNEL command", is the reference.
 */
struct spyre_cmd_kernel {
	struct spyre_cmd_header hdr;
	__u64 prog;
	__u32 prog_size;
	__u16 noperands;
	__u16 nparams;
	__u16 npdims;
	__u16 nrdims;
	__u32 pad;
	__u64 size[9];
};

/**
 * struct spyre_kernel_operand - one operand of a KERNEL (24 bytes).
 * @va: device VA of element 0, aligned to the element size.
 * @extent: elements; offsets 0..@extent-1 are valid.
 * @dtype: SPYRE_DTYPE_*, equal to the program's declaration.
 * @pad: must be zero.
 */
struct spyre_kernel_operand {
	__u64 va;
	__u64 extent;
	__u32 dtype;
	__u32 pad;
};

#define SPYRE_CMD_KERNEL_SIZE(nops, nparams) \
	(sizeof(struct spyre_cmd_kernel) + \
	 (nops) * sizeof(struct spyre_kernel_operand) + (nparams) * 8)
#define SPYRE_KSIZE_PARAM(i)		((1ULL << 63) | (__u64)(i))

/* Kernel limits (a program or command beyond them is refused). */
#define SPYRE_KERNEL_MAX_OPERANDS	32
#define SPYRE_KERNEL_MAX_PARAMS		64
#define SPYRE_KERNEL_MAX_PDIMS		6
#define SPYRE_KERNEL_MAX_RDIMS		3
#define SPYRE_KERNEL_MAX_INSTS		4096
#define SPYRE_KERNEL_MAX_VALUES		4096
#define SPYRE_KERNEL_MAX_REDUCE		32
#define SPYRE_KERNEL_MAX_PASSES		8
#define SPYRE_KERNEL_MAX_SCAN		8	/* SCAN instructions (part 2) */
#define SPYRE_KERNEL_MAX_ITERS		(1ULL << 36)	/* P * max(R, 1) */

/**
 * struct spyre_kprog_header - the first 64 bytes of a kernel program.
 * @magic: SPYRE_KPROG_MAGIC.
 * @version: SPYRE_KPROG_VERSION.
 * @flags: must be zero.
 * @ninsts: instructions following the header, 0..4096.
 * @nvalues: values the program defines, 0..4096.
 * @noperands: operands, as the command (the signature).
 * @nparams: parameters, as the command.
 * @npdims: pointwise dimensions, as the command.
 * @nrdims: reduction dimensions, as the command.
 * @npasses: PASS instructions: 0 when @nrdims is 0, else 1..8.
 * @pad: must be zero.
 * @dtype: operand i's SPYRE_DTYPE_* for i < @noperands, zero beyond.
 * @reserved: must be zero.
 */
struct spyre_kprog_header {
	__u32 magic;
	__u16 version;
	__u16 flags;
	__u32 ninsts;
	__u32 nvalues;
	__u8 noperands;
	__u8 nparams;
	__u8 npdims;
	__u8 nrdims;
	__u8 npasses;
	__u8 pad[3];
	__u8 dtype[32];
	__u64 reserved;
};

#define SPYRE_KPROG_MAGIC		0x504b5053	/* "SPKP" */
#define SPYRE_KPROG_VERSION		1

/**
 * struct spyre_kinst - one kernel instruction (16 bytes).
 * @op: SPYRE_KOP_*.
 * @type: SPYRE_KTYPE_* of the result.
 * @mod: per opcode: SPYRE_KCMP_*, SPYRE_KRED_*, a dtype, SPYRE_KMOD_* flags,
 *	AFFINE's dimension mask; undefined bits zero.
 * @dst: the value defined (the next value number), or SPYRE_KVAL_NONE.
 * @a: first source value, or SPYRE_KVAL_NONE.
 * @b: second source value, or SPYRE_KVAL_NONE.
 * @c: third source value, or SPYRE_KVAL_NONE.
 * @imm: operand, parameter or dimension index; REDUCE's mask value.
 *
 * CONST reads bytes 8..15 (@b, @c, @imm) as one little-endian u64.
 */
struct spyre_kinst {
	__u8 op;
	__u8 type;
	__u16 mod;
	__u16 dst;
	__u16 a;
	__u16 b;
	__u16 c;
	__u32 imm;
};

#define SPYRE_KVAL_NONE			0xffff

/* Value types. */
#define SPYRE_KTYPE_NONE		0
#define SPYRE_KTYPE_BOOL		1
#define SPYRE_KTYPE_I32			2
#define SPYRE_KTYPE_I64			3
#define SPYRE_KTYPE_F32			4

/* Dimensions for IDX, SIZE and AFFINE: 0-5 p0..p5, 6-8 r0..r2, and: */
#define SPYRE_KDIM_R0			6
#define SPYRE_KDIM_POINT		14	/* linear point index; SIZE: P */
#define SPYRE_KDIM_RINDEX		15	/* linear reduction index; R */

/* Opcodes: structure, sources and indices. */
#define SPYRE_KOP_PASS			0x01
#define SPYRE_KOP_ENDPASS		0x02
#define SPYRE_KOP_CONST			0x03
#define SPYRE_KOP_PARAM			0x04
#define SPYRE_KOP_IDX			0x05
#define SPYRE_KOP_SIZE			0x06
#define SPYRE_KOP_AFFINE		0x07
#define SPYRE_KOP_CHECK			0x08
/* Memory. */
#define SPYRE_KOP_LOAD			0x10
#define SPYRE_KOP_STORE			0x11
#define SPYRE_KOP_SCATTER		0x12	/* part 2: lane order, ADD */
/* Arithmetic. */
#define SPYRE_KOP_ADD			0x20
#define SPYRE_KOP_SUB			0x21
#define SPYRE_KOP_MUL			0x22
#define SPYRE_KOP_DIV			0x23
#define SPYRE_KOP_TRUNCDIV		0x24
#define SPYRE_KOP_FLOORDIV		0x25
#define SPYRE_KOP_FMOD			0x26
#define SPYRE_KOP_REM			0x27
#define SPYRE_KOP_FMA			0x28
#define SPYRE_KOP_NEG			0x29
#define SPYRE_KOP_ABS			0x2a
#define SPYRE_KOP_MIN			0x2b
#define SPYRE_KOP_MAX			0x2c
#define SPYRE_KOP_CLAMP			0x2d
#define SPYRE_KOP_POW			0x2e
/* Comparison, logic and selection. */
#define SPYRE_KOP_CMP			0x30
#define SPYRE_KOP_AND			0x31
#define SPYRE_KOP_OR			0x32
#define SPYRE_KOP_XOR			0x33
#define SPYRE_KOP_NOT			0x34
#define SPYRE_KOP_SHL			0x35
#define SPYRE_KOP_SHR			0x36
#define SPYRE_KOP_SELECT		0x37
/* Conversions. */
#define SPYRE_KOP_CVT			0x38
#define SPYRE_KOP_BITCAST		0x39
/* Math (f32).  0x48..0x64 is the full library; part 1 has the marked ones. */
#define SPYRE_KOP_EXP			0x40
#define SPYRE_KOP_LOG			0x41
#define SPYRE_KOP_SQRT			0x42
#define SPYRE_KOP_RSQRT			0x43
#define SPYRE_KOP_RECIP			0x44
#define SPYRE_KOP_TANH			0x45
#define SPYRE_KOP_SIGMOID		0x46
#define SPYRE_KOP_ERF			0x47
#define SPYRE_KOP_EXP2			0x48
#define SPYRE_KOP_EXPM1			0x49
#define SPYRE_KOP_LOG2			0x4a
#define SPYRE_KOP_LOG10			0x4b
#define SPYRE_KOP_LOG1P			0x4c
#define SPYRE_KOP_SIN			0x4d
#define SPYRE_KOP_COS			0x4e
#define SPYRE_KOP_TAN			0x4f
#define SPYRE_KOP_ASIN			0x50
#define SPYRE_KOP_ACOS			0x51
#define SPYRE_KOP_ATAN			0x52
#define SPYRE_KOP_ATAN2			0x53
#define SPYRE_KOP_SINH			0x54
#define SPYRE_KOP_COSH			0x55
#define SPYRE_KOP_ASINH			0x56
#define SPYRE_KOP_ACOSH			0x57
#define SPYRE_KOP_ATANH			0x58
#define SPYRE_KOP_ERFC			0x59
#define SPYRE_KOP_ERFINV		0x5a
#define SPYRE_KOP_FLOOR			0x5b	/* part 1 */
#define SPYRE_KOP_CEIL			0x5c	/* part 1 */
#define SPYRE_KOP_ROUND			0x5d	/* part 1: half to even */
#define SPYRE_KOP_TRUNC			0x5e	/* part 1 */
#define SPYRE_KOP_SIGN			0x5f
#define SPYRE_KOP_ISNAN			0x60	/* part 1: bool */
#define SPYRE_KOP_ISINF			0x61	/* part 1: bool */
#define SPYRE_KOP_COPYSIGN		0x62
#define SPYRE_KOP_HYPOT			0x63
#define SPYRE_KOP_LGAMMA		0x64
/* Reductions (in a pass only). */
#define SPYRE_KOP_REDUCE		0x80
/* Part 2 (VERSION 1.2): a scan along the reduction index, in a pass only. */
#define SPYRE_KOP_SCAN			0x88
/* Part 2 (VERSION 1.2): Philox4x32-10 counter-based random numbers. */
#define SPYRE_KOP_RAND			0x90

/* CMP's mod. */
#define SPYRE_KCMP_EQ			0
#define SPYRE_KCMP_NE			1
#define SPYRE_KCMP_LT			2
#define SPYRE_KCMP_LE			3
#define SPYRE_KCMP_GT			4
#define SPYRE_KCMP_GE			5

/* REDUCE's mod bits 7:0. */
#define SPYRE_KRED_SUM			1
#define SPYRE_KRED_PROD			2
#define SPYRE_KRED_MAX			3
#define SPYRE_KRED_MIN			4
#define SPYRE_KRED_ARGMAX		5
#define SPYRE_KRED_ARGMIN		6
#define SPYRE_KRED_ANY			7
#define SPYRE_KRED_ALL			8
#define SPYRE_KRED_XOR_SUM		9
#define SPYRE_KRED_WELFORD		10
#define SPYRE_KRED_WELFORD_COMBINE	11

/* SCATTER's mod bits 7:0 (bit 8: SPYRE_KMOD_SAT). */
#define SPYRE_KSCAT_STORE		0	/* the last lane in order wins */
#define SPYRE_KSCAT_ADD			1	/* accumulate, in lane order */

/* SCAN's mod bits 7:0: SPYRE_KRED_SUM, _PROD, _MAX, _MIN, _ARGMAX, _ARGMIN. */

/* RAND's mod. */
#define SPYRE_KRAND_BITS		0	/* i32: a Philox output word */
#define SPYRE_KRAND_UNIFORM		1	/* f32 in [0, 1) */
#define SPYRE_KRAND_NORMAL		2	/* f32, Box-Muller */

/* mod flags. */
#define SPYRE_KMOD_IGNORE_NAN		(1U << 0)	/* MIN, MAX */
#define SPYRE_KMOD_SAT			(1U << 8)	/* STORE, CVT: fp8 */

/*
 * The completion record's detail fields for kernel statuses
 * (struct spyre_hw_completion in hw/spyre_hw.h):
 *  - BAD_PROGRAM: detail bits 31:0 the instruction (SPYRE_KINST_HEADER for
 *    the header or signature), bits 39:32 SPYRE_KERR_*; detail2 0;
 *  - OUT_OF_BOUNDS, MMU_FAULT, DMA_ERROR of a kernel: detail bits 7:0 the
 *    operand (SPYRE_KOPERAND_PROGRAM: the program read), bit 8 a write,
 *    bits 63:32 the instruction; detail2 the element offset (signed);
 *  - ASSERT: detail bits 63:32 the CHECK instruction.
 */
#define SPYRE_KINST_HEADER		0xffffffffU
#define SPYRE_KOPERAND_PROGRAM		0xff
#define SPYRE_KDETAIL_WRITE		(1ULL << 8)
#define SPYRE_KERR_HEADER		1
#define SPYRE_KERR_SIGNATURE		2
#define SPYRE_KERR_OPCODE		3
#define SPYRE_KERR_TYPE			4
#define SPYRE_KERR_VALUE		5
#define SPYRE_KERR_INDEX		6
#define SPYRE_KERR_STRUCTURE		7
#define SPYRE_KERR_FIELD		8

/* Properties of the data types, for encoders and decoders alike. */

/**
 * spyre_cmd_dtype_size() - bytes of one element of a data type.
 * @dtype: SPYRE_DTYPE_*.
 *
 * Return: 1, 2, 4 or 8; 0 for an invalid @dtype.
 */
static inline __u32 spyre_cmd_dtype_size(__u32 dtype)
{
	switch (dtype) {
	case SPYRE_DTYPE_U8:
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
	case SPYRE_DTYPE_INT8:
	case SPYRE_DTYPE_BOOL:
		return 1;
	case SPYRE_DTYPE_FP16:
	case SPYRE_DTYPE_BF16:
	case SPYRE_DTYPE_INT16:
		return 2;
	case SPYRE_DTYPE_FP32:
	case SPYRE_DTYPE_INT32:
		return 4;
	case SPYRE_DTYPE_INT64:
		return 8;
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

#endif /* SPYRE_CMD_H */
