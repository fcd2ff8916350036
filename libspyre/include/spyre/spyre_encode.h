/* SPDX-License-Identifier: MIT */
/*
 * Spyre command encoders: one function per command of <drm/spyre_cmd.h>
 * (the format, in the kernel's uapi), for libspyre, its users, the
 * selftests and the card model's qtest.  Installed with libspyre as
 * <spyre/spyre_encode.h>; header-only, nothing here is a library symbol.
 */
#ifndef SPYRE_ENCODE_H
#define SPYRE_ENCODE_H

#include <stdint.h>

#include <drm/spyre_cmd.h>

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
 * spyre_cmd_hdr_init() - encode a command header.
 * @h: the header.
 * @opcode: SPYRE_OP_*.
 * @flags: the opcode's flag bits.
 * @size: bytes of the whole command (sizeof its struct).
 */
static inline void spyre_cmd_hdr_init(struct spyre_cmd_header *h,
				      uint16_t opcode, uint16_t flags, uint32_t size)
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
static inline void spyre_cmd_fill_init(struct spyre_cmd_fill *c, uint64_t dst,
				       uint64_t count, uint32_t elem_size,
				       uint64_t value)
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
static inline void spyre_cmd_copy_init(struct spyre_cmd_copy *c, uint16_t flags,
				       uint64_t dst, uint64_t dst_pitch,
				       uint32_t dst_dtype, uint64_t src,
				       uint64_t src_pitch, uint32_t src_dtype,
				       uint64_t width, uint64_t height)
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
static inline void spyre_cmd_gemm_init(struct spyre_cmd_gemm *g, uint16_t flags,
				       uint32_t a_dtype, uint32_t b_dtype,
				       uint32_t c_dtype, uint32_t m, uint32_t n,
				       uint32_t k, uint64_t a, uint64_t lda, uint64_t b,
				       uint64_t ldb, uint64_t c, uint64_t ldc)
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
static inline void spyre_cmd_gemm_batch(struct spyre_cmd_gemm *g, uint32_t batch,
					uint64_t stride_a, uint64_t stride_b,
					uint64_t stride_c)
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
					   uint32_t alpha, uint32_t beta,
					   uint32_t bias_dtype, uint64_t bias)
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
					 uint64_t scale_a, uint64_t scale_b,
					 uint64_t amax)
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
					  uint32_t op, uint32_t dtype, uint64_t count,
					  uint64_t out, uint64_t a, uint64_t b,
					  uint32_t alpha)
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
static inline void spyre_cmd_reduce_init(struct spyre_cmd_reduce *c, uint32_t op,
					 uint32_t dtype, uint32_t rows, uint32_t cols,
					 uint64_t dst, uint64_t src, uint64_t ld)
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
static inline void spyre_cmd_rowop_init(struct spyre_cmd_rowop *c, uint32_t op,
					uint32_t dtype, uint32_t rows, uint32_t cols,
					uint64_t dst, uint64_t ld_dst, uint64_t src,
					uint64_t ld_src, uint64_t gamma, uint64_t beta,
					uint32_t eps)
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
					    uint64_t dst)
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
static inline void spyre_cmd_sem_init(struct spyre_cmd_sem *c, uint16_t opcode,
				      uint16_t flags, uint64_t addr, uint64_t value)
{
	spyre_cmd_hdr_init(&c->hdr, opcode, flags, sizeof(*c));
	c->addr = addr;
	c->value = value;
}

/**
 * spyre_cmd_kernel_init() - encode the fixed part of a KERNEL (104 bytes).
 * @c: the command; the caller provides SPYRE_CMD_KERNEL_SIZE(@noperands,
 *	@nparams) bytes, and fills the operand and parameter tables that
 *	follow with spyre_cmd_kernel_operand() and spyre_cmd_kernel_param().
 * @prog: device VA of the program, 8-byte aligned.
 * @prog_size: bytes of the program, 64 + 16 * instructions.
 * @noperands: operand entries, 0..32.
 * @nparams: parameters, 0..64.
 * @npdims: pointwise dimensions, 0..6.
 * @nrdims: reduction dimensions, 0..3.
 * @size: the 9 sizes (p0..p5, r0..r2, unused entries zero; an entry may be
 *	SPYRE_KSIZE_PARAM(i)), or NULL for all zero.
 */
static inline void spyre_cmd_kernel_init(struct spyre_cmd_kernel *c,
					 uint64_t prog, uint32_t prog_size,
					 uint16_t noperands, uint16_t nparams,
					 uint16_t npdims, uint16_t nrdims,
					 const uint64_t *size)
{
	spyre_cmd_hdr_init(&c->hdr, SPYRE_OP_KERNEL, 0,
			   (uint32_t)SPYRE_CMD_KERNEL_SIZE(noperands, nparams));
	c->prog = prog;
	c->prog_size = prog_size;
	c->noperands = noperands;
	c->nparams = nparams;
	c->npdims = npdims;
	c->nrdims = nrdims;
	c->pad = 0;
	for (int i = 0; i < 9; i++)
		c->size[i] = size ? size[i] : 0;
}

/**
 * spyre_cmd_kernel_operand() - encode operand entry @i of a KERNEL.
 * @c: a command set up by spyre_cmd_kernel_init(), @i < its noperands.
 * @i: the operand's index.
 * @va: device VA of element 0, aligned to the element size.
 * @extent: elements; offsets 0..@extent-1 are valid.
 * @dtype: SPYRE_DTYPE_*, as the program declares it.
 */
static inline void spyre_cmd_kernel_operand(struct spyre_cmd_kernel *c,
					    unsigned int i, uint64_t va,
					    uint64_t extent, uint32_t dtype)
{
	struct spyre_kernel_operand *o =
		(struct spyre_kernel_operand *)(c + 1) + i;

	o->va = va;
	o->extent = extent;
	o->dtype = dtype;
	o->pad = 0;
}

/**
 * spyre_cmd_kernel_param() - encode parameter @i of a KERNEL.
 * @c: a command set up by spyre_cmd_kernel_init(), @i < its nparams (its
 *	noperands already set: the parameters follow the operand table).
 * @i: the parameter's index.
 * @value: the 64 bits (an integer, or a binary32 pattern in bits 31:0).
 */
static inline void spyre_cmd_kernel_param(struct spyre_cmd_kernel *c,
					  unsigned int i, uint64_t value)
{
	uint64_t *p = (uint64_t *)((struct spyre_kernel_operand *)(c + 1) +
				   c->noperands);

	p[i] = value;
}

/**
 * spyre_kprog_header_init() - encode a kernel program's 64-byte header.
 * @h: the header.
 * @ninsts: instructions following it.
 * @nvalues: values they define.
 * @noperands: operands (0..32); @dtype gives their SPYRE_DTYPE_*.
 * @dtype: @noperands dtypes (NULL when @noperands is 0).
 * @nparams: parameters.
 * @npdims: pointwise dimensions.
 * @nrdims: reduction dimensions.
 * @npasses: PASS instructions.
 */
static inline void spyre_kprog_header_init(struct spyre_kprog_header *h,
					   uint32_t ninsts, uint32_t nvalues,
					   uint8_t noperands,
					   const uint32_t *dtype,
					   uint8_t nparams, uint8_t npdims,
					   uint8_t nrdims, uint8_t npasses)
{
	h->magic = SPYRE_KPROG_MAGIC;
	h->version = SPYRE_KPROG_VERSION;
	h->flags = 0;
	h->ninsts = ninsts;
	h->nvalues = nvalues;
	h->noperands = noperands;
	h->nparams = nparams;
	h->npdims = npdims;
	h->nrdims = nrdims;
	h->npasses = npasses;
	h->pad[0] = h->pad[1] = h->pad[2] = 0;
	for (int i = 0; i < 32; i++)
		h->dtype[i] = i < noperands ? (uint8_t)dtype[i] : 0;
	h->reserved = 0;
}

/**
 * spyre_kinst_init() - encode one kernel instruction (16 bytes).
 * @k: the instruction.
 * @op: SPYRE_KOP_*.
 * @type: SPYRE_KTYPE_* of the result (SPYRE_KTYPE_NONE for PASS, ENDPASS,
 *	STORE, CHECK).
 * @mod: the opcode's modifier (predicate, reduction kind, dtype, flags,
 *	AFFINE's dimension mask), 0 when it has none.
 * @dst: the value defined, or SPYRE_KVAL_NONE.
 * @a: first source, or SPYRE_KVAL_NONE.
 * @b: second source, or SPYRE_KVAL_NONE.
 * @c: third source, or SPYRE_KVAL_NONE.
 * @imm: operand, parameter or dimension index, REDUCE's mask value, or 0.
 *
 * CONST's 64-bit immediate goes in @b, @c and @imm: use
 * spyre_kinst_const_init().
 */
static inline void spyre_kinst_init(struct spyre_kinst *k, uint8_t op,
				    uint8_t type, uint16_t mod, uint16_t dst,
				    uint16_t a, uint16_t b, uint16_t c,
				    uint32_t imm)
{
	k->op = op;
	k->type = type;
	k->mod = mod;
	k->dst = dst;
	k->a = a;
	k->b = b;
	k->c = c;
	k->imm = imm;
}

/**
 * spyre_kinst_const_init() - encode a CONST.
 * @k: the instruction.
 * @type: SPYRE_KTYPE_* of the value.
 * @dst: the value defined.
 * @bits: the immediate: an i64, an i32 or binary32 pattern in bits 31:0
 *	(bits 63:32 zero), or 0 / 1 for a bool.
 */
static inline void spyre_kinst_const_init(struct spyre_kinst *k, uint8_t type,
					  uint16_t dst, uint64_t bits)
{
	spyre_kinst_init(k, SPYRE_KOP_CONST, type, 0, dst, SPYRE_KVAL_NONE,
			 (uint16_t)bits, (uint16_t)(bits >> 16),
			 (uint32_t)(bits >> 32));
}

#endif /* SPYRE_ENCODE_H */
