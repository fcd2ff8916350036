// SPDX-License-Identifier: MIT
/* Host-side command encoding (<drm/spyre_cmd.h>).  No device access. */
#include "internal.h"
#include "kprog.h"
#include <spyre/spyre_encode.h>
#include <spyre/spyre_ref.h>

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct spyre_cmd_header) == 8, "header");
_Static_assert(sizeof(struct spyre_cmd_nop) == 8, "nop");
_Static_assert(sizeof(struct spyre_cmd_fill) == 40, "fill");
_Static_assert(sizeof(struct spyre_cmd_copy) == 64, "copy");
_Static_assert(sizeof(struct spyre_cmd_timestamp) == 16, "timestamp");
_Static_assert(sizeof(struct spyre_cmd_sem) == 24, "sem");
_Static_assert(sizeof(struct spyre_cmd_gemm) == 152, "gemm");
_Static_assert(sizeof(struct spyre_cmd_eltwise) == 56, "eltwise");
_Static_assert(sizeof(struct spyre_cmd_reduce) == 48, "reduce");
_Static_assert(sizeof(struct spyre_cmd_rowop) == 80, "rowop");
_Static_assert(sizeof(struct spyre_cmd_kernel) == 104, "kernel");
_Static_assert(sizeof(struct spyre_kernel_operand) == 24, "kernel operand");
_Static_assert(sizeof(struct spyre_kprog_header) == 64, "kernel program");
_Static_assert(sizeof(struct spyre_kinst) == 16, "kernel instruction");
_Static_assert(sizeof(float) == 4, "binary32");

SPYRE_API int spyre_cmdbuf_create(struct spyre_cmdbuf **out)
{
	struct spyre_cmdbuf *cb;

	if (!out)
		return -EINVAL;
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	*out = cb;
	return 0;
}

void spyre__cmdbuf_fini(struct spyre_cmdbuf *cb)
{
	free(cb->data);
	free(cb->bos);
	free(cb->bo_written);
	memset(cb, 0, sizeof(*cb));
}

SPYRE_API void spyre_cmdbuf_destroy(struct spyre_cmdbuf *cb)
{
	if (!cb)
		return;
	spyre__cmdbuf_fini(cb);
	free(cb);
}

SPYRE_API void spyre_cmdbuf_reset(struct spyre_cmdbuf *cb)
{
	if (!cb)
		return;
	cb->size = 0;
	cb->count = 0;
	cb->nbos = 0;
}

SPYRE_API size_t spyre_cmdbuf_bos(const struct spyre_cmdbuf *cb,
				  struct spyre_bo *const **bos)
{
	if (!cb)
		return 0;
	if (bos)
		*bos = cb->bos;
	return cb->nbos;
}

SPYRE_API size_t spyre_cmdbuf_size(const struct spyre_cmdbuf *cb)
{
	return cb ? cb->size : 0;
}

SPYRE_API size_t spyre_cmdbuf_count(const struct spyre_cmdbuf *cb)
{
	return cb ? cb->count : 0;
}

SPYRE_API const void *spyre_cmdbuf_data(const struct spyre_cmdbuf *cb)
{
	return cb && cb->size ? cb->data : NULL;
}

/* Reserve @size bytes (multiple of 8) at the end, zeroed. */
static void *cmdbuf_reserve(struct spyre_cmdbuf *cb, size_t size)
{
	void *p;

	if (size > SIZE_MAX / 4 - cb->size)
		return NULL;
	if (cb->size + size > cb->cap) {
		size_t ncap = cb->cap ? cb->cap : 256;
		uint8_t *nd;

		while (ncap < cb->size + size)
			ncap *= 2;
		nd = realloc(cb->data, ncap);
		if (!nd)
			return NULL;
		cb->data = nd;
		cb->cap = ncap;
	}
	p = cb->data + cb->size;
	memset(p, 0, size);
	return p;
}

static void cmdbuf_commit(struct spyre_cmdbuf *cb, size_t size, size_t ncmds)
{
	cb->size += size;
	cb->count += ncmds;
}

SPYRE_API int spyre_cmdbuf_nop(struct spyre_cmdbuf *cb)
{
	struct spyre_cmd_nop *c;

	if (!cb)
		return -EINVAL;
	c = cmdbuf_reserve(cb, sizeof(*c));
	if (!c)
		return -ENOMEM;
	spyre_cmd_nop_init(c);
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_fill(struct spyre_cmdbuf *cb, uint64_t dst,
				uint64_t count, uint32_t elem_size,
				uint64_t value)
{
	struct spyre_cmd_fill *c;

	if (!cb || count == 0 ||
	    (elem_size != 1 && elem_size != 2 && elem_size != 4 &&
	     elem_size != 8))
		return -EINVAL;
	c = cmdbuf_reserve(cb, sizeof(*c));
	if (!c)
		return -ENOMEM;
	spyre_cmd_fill_init(c, dst, count, elem_size, value);
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

static bool copy_dtypes_ok(uint32_t dst, uint32_t src)
{
	if (dst == SPYRE_DTYPE_U8 || src == SPYRE_DTYPE_U8)
		return dst == src;
	if (dst == SPYRE_DTYPE_INT32 || src == SPYRE_DTYPE_INT32)
		return dst == src;
	return spyre_cmd_dtype_convertible(dst) &&
	       spyre_cmd_dtype_convertible(src);
}

SPYRE_API int spyre_cmdbuf_copy_2d(struct spyre_cmdbuf *cb,
				   uint64_t dst, uint64_t dst_pitch,
				   uint32_t dst_dtype,
				   uint64_t src, uint64_t src_pitch,
				   uint32_t src_dtype,
				   uint64_t width, uint64_t height,
				   uint32_t flags)
{
	struct spyre_cmd_copy *c;

	if (!cb || !width || !height || (flags & ~SPYRE_CMD_F_NOSAT) ||
	    !copy_dtypes_ok(dst_dtype, src_dtype))
		return -EINVAL;
	c = cmdbuf_reserve(cb, sizeof(*c));
	if (!c)
		return -ENOMEM;
	spyre_cmd_copy_init(c, (uint16_t)flags, dst, dst_pitch, dst_dtype, src,
			    src_pitch, src_dtype, width, height);
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_copy(struct spyre_cmdbuf *cb, uint64_t dst,
				uint64_t src, uint64_t size)
{
	if (!size)
		return -EINVAL;
	return spyre_cmdbuf_copy_2d(cb, dst, 0, SPYRE_DTYPE_U8, src, 0,
				    SPYRE_DTYPE_U8, size, 1, 0);
}

SPYRE_API int spyre_cmdbuf_timestamp(struct spyre_cmdbuf *cb, uint64_t dst)
{
	struct spyre_cmd_timestamp *c;

	if (!cb || (dst & 7))
		return -EINVAL;
	c = cmdbuf_reserve(cb, sizeof(*c));
	if (!c)
		return -ENOMEM;
	spyre_cmd_timestamp_init(c, dst);
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

static int cmdbuf_sem(struct spyre_cmdbuf *cb, uint16_t op, uint16_t flags,
		      uint64_t addr, uint64_t value)
{
	struct spyre_cmd_sem *c = cmdbuf_reserve(cb, sizeof(*c));

	if (!c)
		return -ENOMEM;
	spyre_cmd_sem_init(c, op, flags, addr, value);
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_sem_wait(struct spyre_cmdbuf *cb, uint64_t addr,
				    uint64_t value)
{
	if (!cb || (addr & 7))
		return -EINVAL;
	return cmdbuf_sem(cb, SPYRE_OP_SEM_WAIT, 0, addr, value);
}

SPYRE_API int spyre_cmdbuf_sem_signal(struct spyre_cmdbuf *cb, uint64_t addr,
				      uint64_t value, uint32_t flags)
{
	if (!cb || (addr & 7) || (flags & ~SPYRE_SEM_F_ADD))
		return -EINVAL;
	return cmdbuf_sem(cb, SPYRE_OP_SEM_SIGNAL, (uint16_t)flags, addr, value);
}

SPYRE_API int spyre_cmdbuf_raw(struct spyre_cmdbuf *cb, const void *cmd,
			       size_t size)
{
	void *p;
	size_t n = 0;

	if (!cb || !cmd || !size || (size & 7))
		return -EINVAL;
	p = cmdbuf_reserve(cb, size);
	if (!p)
		return -ENOMEM;
	memcpy(p, cmd, size);
	/* Count the headers it holds, as far as they parse. */
	for (size_t off = 0; off + 8 <= size;) {
		struct spyre_cmd_header h;

		memcpy(&h, (const uint8_t *)cmd + off, sizeof(h));
		n++;
		if (h.size < 8 || (h.size & 7) || h.size > size - off)
			break;
		off += h.size;
	}
	cmdbuf_commit(cb, size, n);
	return 0;
}

SPYRE_API int spyre_cmdbuf_upload(const struct spyre_cmdbuf *cb,
				  struct spyre_device *dev,
				  struct spyre_bo **out)
{
	struct spyre_bo *bo;
	void *map;
	int ret;

	if (!cb || !cb->size || !out)
		return -EINVAL;
	ret = spyre_bo_alloc(dev, cb->size, 0, &bo);
	if (ret)
		return ret;
	ret = spyre_bo_map(bo, &map);
	if (ret) {
		spyre_bo_free(bo);
		return ret;
	}
	memcpy(map, cb->data, cb->size);
	*out = bo;
	return 0;
}

/* ---- compute commands --------------------------------------------------- */

static bool mem_absent(struct spyre_mem m)
{
	return !m.bo && !m.offset;
}

static uint64_t mem_va(struct spyre_mem m)
{
	return m.bo ? m.bo->va + m.offset : m.offset;
}

/*
 * An operand of @elems elements of @esize bytes at @m: with a BO it must
 * lie inside it.  @elems == 0 means "absent operand" and always passes.
 */
static int mem_check(struct spyre_mem m, uint64_t elems, uint64_t esize)
{
	if (!m.bo || !elems)
		return 0;
	if (elems > UINT64_MAX / esize)
		return -ERANGE;
	if (m.offset > m.bo->size || elems * esize > m.bo->size - m.offset)
		return -ERANGE;
	return 0;
}

/*
 * Elements spanned by @batch matrices of @rows x @cols (leading dimension
 * @ld) @stride elements apart: (batch - 1) * stride + (rows - 1) * ld +
 * cols.  UINT64_MAX on overflow (which mem_check() then refuses).
 */
static uint64_t span_elems(uint64_t batch, uint64_t stride, uint64_t rows,
			   uint64_t ld, uint64_t cols)
{
	uint64_t a, b;

	if (__builtin_mul_overflow(batch - 1, stride, &a) ||
	    __builtin_mul_overflow(rows - 1, ld, &b) ||
	    __builtin_add_overflow(a, b, &a) ||
	    __builtin_add_overflow(a, cols, &a))
		return UINT64_MAX;
	return a;
}

/* Make room for @n more BOs in @cb's list (nothing is added yet). */
static int bos_reserve(struct spyre_cmdbuf *cb, size_t n)
{
	if (cb->nbos + n > cb->bos_cap) {
		size_t ncap = cb->bos_cap ? cb->bos_cap * 2 : 16;
		struct spyre_bo **nb;
		bool *nw;

		while (ncap < cb->nbos + n)
			ncap *= 2;
		nb = realloc(cb->bos, ncap * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		cb->bos = nb;
		nw = realloc(cb->bo_written, ncap * sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		cb->bo_written = nw;
		cb->bos_cap = ncap;
	}
	return 0;
}

/*
 * Record the BOs of @mems (room reserved by bos_reserve()); bit i of
 * @written says that the command writes mems[i].
 */
static void bos_add(struct spyre_cmdbuf *cb, const struct spyre_mem *mems,
		    size_t n, unsigned int written)
{
	for (size_t i = 0; i < n; i++) {
		bool w = written & (1u << i);
		size_t j;

		if (!mems[i].bo)
			continue;
		for (j = 0; j < cb->nbos; j++)
			if (cb->bos[j] == mems[i].bo)
				break;
		if (j == cb->nbos) {
			cb->bos[cb->nbos] = mems[i].bo;
			cb->bo_written[cb->nbos++] = w;
		} else if (w) {
			cb->bo_written[j] = true;
		}
	}
}

/* List @bo in @cb (room reserved), written if @w; each BO once. */
static void bo_add_one(struct spyre_cmdbuf *cb, struct spyre_bo *bo, bool w)
{
	for (size_t j = 0; j < cb->nbos; j++) {
		if (cb->bos[j] == bo) {
			cb->bo_written[j] = cb->bo_written[j] || w;
			return;
		}
	}
	cb->bos[cb->nbos] = bo;
	cb->bo_written[cb->nbos++] = w;
}

int spyre__cmdbuf_append(struct spyre_cmdbuf *dst,
			 const struct spyre_cmdbuf *src,
			 struct spyre_bo *const *bos, unsigned int nbos,
			 size_t *nnew)
{
	size_t before = dst->nbos;
	void *p;

	if (bos_reserve(dst, src->nbos + nbos))
		return -ENOMEM;
	p = cmdbuf_reserve(dst, src->size);
	if (!p)
		return -ENOMEM;
	memcpy(p, src->data, src->size);
	cmdbuf_commit(dst, src->size, src->count);
	for (size_t i = 0; i < src->nbos; i++)
		bo_add_one(dst, src->bos[i], src->bo_written[i]);
	for (unsigned int i = 0; i < nbos; i++)
		bo_add_one(dst, bos[i], true);
	*nnew = dst->nbos - before;
	return 0;
}

bool spyre__cmdbuf_bo_written(const struct spyre_cmdbuf *cb, size_t i)
{
	return cb->bo_written[i];
}

/*
 * Commit one command of @size bytes reserved with reserve_cmd() and record
 * the BOs of its @n operands @mems; bit i of @written: it writes mems[i].
 */
static void cmd_commit(struct spyre_cmdbuf *cb, size_t size,
		       const struct spyre_mem *mems, size_t n,
		       unsigned int written)
{
	bos_add(cb, mems, n, written);
	cmdbuf_commit(cb, size, 1);
}

/* Reserve a command of @size bytes and room for @n BOs; NULL on ENOMEM. */
static void *reserve_cmd(struct spyre_cmdbuf *cb, size_t size, size_t nbos)
{
	if (bos_reserve(cb, nbos))
		return NULL;
	return cmdbuf_reserve(cb, size);
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static bool is_float_io(uint32_t dt)
{
	return dt == SPYRE_DTYPE_FP32 || dt == SPYRE_DTYPE_FP16 ||
	       dt == SPYRE_DTYPE_BF16;
}

static bool gemm_dtypes_ok(const struct spyre_gemm *g)
{
	uint32_t a = g->a_dtype, b = g->b_dtype;
	bool fp8 = (a == SPYRE_DTYPE_FP8_E4M3 || a == SPYRE_DTYPE_FP8_E5M2) &&
		   (b == SPYRE_DTYPE_FP8_E4M3 || b == SPYRE_DTYPE_FP8_E5M2);

	if (a != b && !fp8)
		return false;
	switch (a) {
	case SPYRE_DTYPE_INT8:
		if (g->c_dtype != SPYRE_DTYPE_INT32)
			return false;
		break;
	case SPYRE_DTYPE_FP32:
	case SPYRE_DTYPE_FP16:
	case SPYRE_DTYPE_BF16:
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
		if (!is_float_io(g->c_dtype))
			return false;
		break;
	default:
		return false;
	}
	return g->bias_dtype == 0 || is_float_io(g->bias_dtype);
}

SPYRE_API int spyre_cmdbuf_gemm(struct spyre_cmdbuf *cb,
				const struct spyre_gemm *g)
{
	struct spyre_cmd_gemm *c;
	uint64_t batch, lda, ldb, ldc, ar, ac, br, bc, macs;
	bool ta, tb;
	int ret;

	if (!cb || !g)
		return -EINVAL;
	if ((g->flags & ~SPYRE_GEMM_F_ALL) || g->pad || g->reserved[0] ||
	    g->reserved[1] || g->reserved[2] || g->reserved[3])
		return -EINVAL;
	if (!gemm_dtypes_ok(g) || !g->m || !g->n || !g->k)
		return -EINVAL;
	if (g->a_dtype == SPYRE_DTYPE_INT8 && g->beta != 0.0f &&
	    g->beta != 1.0f)
		return -EINVAL;
	if (mem_absent(g->a) || mem_absent(g->b) || mem_absent(g->c))
		return -EINVAL;
	/* bias_dtype and bias come together */
	if ((g->bias_dtype != 0) == mem_absent(g->bias))
		return -EINVAL;
	batch = g->batch ? g->batch : 1;
	if (batch > 1 && g->stride_c == 0)
		return -EINVAL;
	ta = g->flags & SPYRE_GEMM_F_TRANS_A;
	tb = g->flags & SPYRE_GEMM_F_TRANS_B;
	ar = ta ? g->k : g->m;		/* A as stored */
	ac = ta ? g->m : g->k;
	br = tb ? g->n : g->k;		/* B as stored */
	bc = tb ? g->k : g->n;
	lda = g->lda ? g->lda : ac;
	ldb = g->ldb ? g->ldb : bc;
	ldc = g->ldc ? g->ldc : g->n;
	if (lda < ac || ldb < bc || ldc < g->n)
		return -EINVAL;
	if (__builtin_mul_overflow(batch, (uint64_t)g->m, &macs) ||
	    __builtin_mul_overflow(macs, (uint64_t)g->n, &macs) ||
	    __builtin_mul_overflow(macs, (uint64_t)g->k, &macs) ||
	    macs > SPYRE_CMD_MAX_GEMM_MACS)
		return -E2BIG;

	ret = mem_check(g->a, span_elems(batch, g->stride_a, ar, lda, ac),
			spyre_dtype_size(g->a_dtype));
	if (!ret)
		ret = mem_check(g->b, span_elems(batch, g->stride_b, br, ldb,
						 bc), spyre_dtype_size(g->b_dtype));
	if (!ret)
		ret = mem_check(g->c, span_elems(batch, g->stride_c, g->m, ldc,
						 g->n), spyre_dtype_size(g->c_dtype));
	if (!ret)
		ret = mem_check(g->bias, g->bias_dtype ? g->n : 0,
				g->bias_dtype ? spyre_dtype_size(g->bias_dtype) : 1);
	if (!ret)
		ret = mem_check(g->scale_a, 1, 4);
	if (!ret)
		ret = mem_check(g->scale_b, 1, 4);
	if (!ret)
		ret = mem_check(g->amax, 1, 4);
	if (ret)
		return ret;

	c = reserve_cmd(cb, sizeof(*c), 7);
	if (!c)
		return -ENOMEM;
	spyre_cmd_gemm_init(c, (uint16_t)g->flags, g->a_dtype, g->b_dtype,
			    g->c_dtype, g->m, g->n, g->k, mem_va(g->a), lda,
			    mem_va(g->b), ldb, mem_va(g->c), ldc);
	spyre_cmd_gemm_batch(c, (uint32_t)batch, g->stride_a, g->stride_b,
			     g->stride_c);
	spyre_cmd_gemm_epilogue(c, f32_bits(g->alpha), f32_bits(g->beta),
				g->bias_dtype, mem_va(g->bias));
	spyre_cmd_gemm_scales(c, mem_va(g->scale_a), mem_va(g->scale_b),
			      mem_va(g->amax));
	cmd_commit(cb, sizeof(*c), (const struct spyre_mem[]){
			   g->a, g->b, g->c, g->bias, g->scale_a, g->scale_b,
			   g->amax }, 7, 1u << 2 | 1u << 6);	/* c, amax */
	return 0;
}

SPYRE_API int spyre_cmdbuf_eltwise(struct spyre_cmdbuf *cb, uint32_t op,
				   uint32_t dtype, uint64_t count,
				   struct spyre_mem out, struct spyre_mem a,
				   struct spyre_mem b, float alpha)
{
	struct spyre_cmd_eltwise *c;
	bool binary = op == SPYRE_ELT_ADD || op == SPYRE_ELT_MUL;
	int ret;

	if (!cb || op < SPYRE_ELT_ADD || op > SPYRE_ELT_EXP ||
	    !is_float_io(dtype) || !count || mem_absent(out) ||
	    mem_absent(a) || (binary && mem_absent(b)))
		return -EINVAL;
	if (count > SPYRE_CMD_MAX_ELEMS)
		return -E2BIG;
	if (!binary)
		b = SPYRE_MEM_NONE;
	ret = mem_check(out, count, spyre_dtype_size(dtype));
	if (!ret)
		ret = mem_check(a, count, spyre_dtype_size(dtype));
	if (!ret)
		ret = mem_check(b, binary ? count : 0, spyre_dtype_size(dtype));
	if (ret)
		return ret;

	c = reserve_cmd(cb, sizeof(*c), 3);
	if (!c)
		return -ENOMEM;
	spyre_cmd_eltwise_init(c, op, dtype, count, mem_va(out), mem_va(a),
			       mem_va(b), f32_bits(alpha));
	cmd_commit(cb, sizeof(*c), (const struct spyre_mem[]){ out, a, b }, 3,
		   1u << 0);	/* out */
	return 0;
}

SPYRE_API int spyre_cmdbuf_reduce(struct spyre_cmdbuf *cb, uint32_t op,
				  uint32_t dtype, uint32_t rows,
				  uint32_t cols, struct spyre_mem dst,
				  struct spyre_mem src, uint64_t ld)
{
	struct spyre_cmd_reduce *c;
	int ret;

	if (!ld)
		ld = cols;
	if (!cb || (op != SPYRE_REDUCE_SUM && op != SPYRE_REDUCE_MAX) ||
	    !is_float_io(dtype) || !rows || !cols || ld < cols ||
	    mem_absent(dst) || mem_absent(src))
		return -EINVAL;
	if ((uint64_t)rows * cols > SPYRE_CMD_MAX_ELEMS)
		return -E2BIG;
	ret = mem_check(src, span_elems(1, 0, rows, ld, cols),
			spyre_dtype_size(dtype));
	if (!ret)
		ret = mem_check(dst, rows, spyre_dtype_size(dtype));
	if (ret)
		return ret;

	c = reserve_cmd(cb, sizeof(*c), 2);
	if (!c)
		return -ENOMEM;
	spyre_cmd_reduce_init(c, op, dtype, rows, cols, mem_va(dst),
			      mem_va(src), ld);
	cmd_commit(cb, sizeof(*c), (const struct spyre_mem[]){ dst, src }, 2,
		   1u << 0);	/* dst */
	return 0;
}

SPYRE_API int spyre_cmdbuf_rowop(struct spyre_cmdbuf *cb, uint32_t op,
				 uint32_t dtype, uint32_t rows, uint32_t cols,
				 struct spyre_mem dst, uint64_t ld_dst,
				 struct spyre_mem src, uint64_t ld_src,
				 struct spyre_mem gamma, struct spyre_mem beta,
				 float eps)
{
	struct spyre_cmd_rowop *c;
	int ret;

	if (!ld_dst)
		ld_dst = cols;
	if (!ld_src)
		ld_src = cols;
	if (!cb || op < SPYRE_ROW_SOFTMAX || op > SPYRE_ROW_RMSNORM ||
	    !is_float_io(dtype) || !rows || !cols || ld_dst < cols ||
	    ld_src < cols || mem_absent(dst) || mem_absent(src) ||
	    !(eps >= 0.0f))
		return -EINVAL;
	if (op == SPYRE_ROW_SOFTMAX && !mem_absent(gamma))
		return -EINVAL;
	if (op != SPYRE_ROW_LAYERNORM && !mem_absent(beta))
		return -EINVAL;
	if ((uint64_t)rows * cols > SPYRE_CMD_MAX_ELEMS)
		return -E2BIG;
	ret = mem_check(src, span_elems(1, 0, rows, ld_src, cols),
			spyre_dtype_size(dtype));
	if (!ret)
		ret = mem_check(dst, span_elems(1, 0, rows, ld_dst, cols),
				spyre_dtype_size(dtype));
	if (!ret)
		ret = mem_check(gamma, cols, 4);
	if (!ret)
		ret = mem_check(beta, cols, 4);
	if (ret)
		return ret;

	c = reserve_cmd(cb, sizeof(*c), 4);
	if (!c)
		return -ENOMEM;
	spyre_cmd_rowop_init(c, op, dtype, rows, cols, mem_va(dst), ld_dst,
			     mem_va(src), ld_src, mem_va(gamma), mem_va(beta),
			     f32_bits(eps));
	cmd_commit(cb, sizeof(*c),
		   (const struct spyre_mem[]){ dst, src, gamma, beta }, 4,
		   1u << 0);	/* dst */
	return 0;
}

/* A 1-D converting COPY is the one-row case of spyre_cmdbuf_copy_mem(). */
SPYRE_API int spyre_cmdbuf_convert(struct spyre_cmdbuf *cb,
				   struct spyre_mem dst, uint32_t dst_dtype,
				   struct spyre_mem src, uint32_t src_dtype,
				   uint64_t count, uint32_t flags)
{
	return spyre_cmdbuf_copy_mem(cb, dst, 0, dst_dtype, src, 0, src_dtype,
				     count, 1, flags);
}

/* ---- range-checked data movement (0.5) ---------------------------------- */

SPYRE_API int spyre_cmdbuf_fill_mem(struct spyre_cmdbuf *cb,
				    struct spyre_mem dst, uint64_t count,
				    uint32_t elem_size, uint64_t value)
{
	struct spyre_cmd_fill *c;
	int ret;

	if (!cb || !count || mem_absent(dst) ||
	    (elem_size != 1 && elem_size != 2 && elem_size != 4 &&
	     elem_size != 8))
		return -EINVAL;
	ret = mem_check(dst, count, elem_size);
	if (ret)
		return ret;
	c = reserve_cmd(cb, sizeof(*c), 1);
	if (!c)
		return -ENOMEM;
	spyre_cmd_fill_init(c, mem_va(dst), count, elem_size, value);
	cmd_commit(cb, sizeof(*c), &dst, 1, 1u << 0);
	return 0;
}

/* Bytes spanned by @height rows of @row bytes @pitch apart; UINT64_MAX on
 * overflow. */
static uint64_t rows_span(uint64_t height, uint64_t pitch, uint64_t row)
{
	uint64_t a;

	if (height == 1)
		return row;
	if (__builtin_mul_overflow(height - 1, pitch, &a) ||
	    __builtin_add_overflow(a, row, &a))
		return UINT64_MAX;
	return a;
}

SPYRE_API int spyre_cmdbuf_copy_mem(struct spyre_cmdbuf *cb,
				    struct spyre_mem dst, uint64_t dst_pitch,
				    uint32_t dst_dtype,
				    struct spyre_mem src, uint64_t src_pitch,
				    uint32_t src_dtype,
				    uint64_t width, uint64_t height,
				    uint32_t flags)
{
	struct spyre_cmd_copy *c;
	uint64_t des, ses, elems, drow, srow;
	int ret;

	if (!cb || !width || !height || (flags & ~SPYRE_CMD_F_NOSAT) ||
	    !copy_dtypes_ok(dst_dtype, src_dtype) || mem_absent(dst) ||
	    mem_absent(src))
		return -EINVAL;
	des = spyre_dtype_size(dst_dtype);
	ses = spyre_dtype_size(src_dtype);
	if (__builtin_mul_overflow(width, height, &elems) ||
	    elems > SPYRE_CMD_MAX_COPY_BYTES / des ||
	    elems > SPYRE_CMD_MAX_COPY_BYTES / ses)
		return -E2BIG;
	drow = width * des;	/* no overflow: below the limit */
	srow = width * ses;
	if (height > 1 && (dst_pitch < drow || src_pitch < srow))
		return -EINVAL;
	ret = mem_check(dst, rows_span(height, dst_pitch, drow), 1);
	if (!ret)
		ret = mem_check(src, rows_span(height, src_pitch, srow), 1);
	if (ret)
		return ret;
	c = reserve_cmd(cb, sizeof(*c), 2);
	if (!c)
		return -ENOMEM;
	spyre_cmd_copy_init(c, (uint16_t)flags, mem_va(dst),
			    height > 1 ? dst_pitch : 0, dst_dtype, mem_va(src),
			    height > 1 ? src_pitch : 0, src_dtype, width, height);
	cmd_commit(cb, sizeof(*c), (const struct spyre_mem[]){ dst, src }, 2,
		   1u << 0);	/* dst */
	return 0;
}

/* ---- kernels (0.8) ------------------------------------------------------ */

SPYRE_API int spyre_kernel_upload(struct spyre_device *dev, const void *prog,
				  size_t size, uint32_t bo_flags,
				  struct spyre_bo **out)
{
	struct spyre_bo *bo;
	void *map;
	int ret;

	if (!dev || !prog || !out || size < sizeof(struct spyre_kprog_header) ||
	    (size - sizeof(struct spyre_kprog_header)) % 16 ||
	    size > sizeof(struct spyre_kprog_header) +
		   16 * (size_t)SPYRE_KERNEL_MAX_INSTS)
		return -EINVAL;
	if (!spyre__kernel_runs(dev, prog, size))
		return -EOPNOTSUPP;
	ret = spyre_bo_alloc(dev, size, bo_flags, &bo);
	if (ret)
		return ret;
	ret = spyre_bo_map(bo, &map);
	if (ret) {
		spyre_bo_free(bo);
		return ret;
	}
	memcpy(map, prog, size);
	*out = bo;
	return 0;
}

/*
 * Can @dev's card run program @prog (@size bytes)?  Part 2's instructions
 * (SCATTER, SCAN, RAND) need VERSION 1.2: an older card would refuse
 * them as BAD_PROGRAM (OPCODE) and make the context's error sticky.
 */
bool spyre__kernel_runs(const struct spyre_device *dev, const void *prog,
			size_t size)
{
	return dev->info.hw_version >= (1u << 16 | 2) ||
	       !spyre__kprog_part2(prog, size);
}

/*
 * The program of @l through its BO's CPU mapping, or NULL (a raw VA, a
 * mapping that fails, a range outside the BO).
 */
static const void *kernel_prog_bytes(const struct spyre_kernel_launch *l)
{
	void *map;

	if (!l->prog.bo || l->prog.offset > l->prog.bo->size ||
	    l->prog_size > l->prog.bo->size - l->prog.offset ||
	    spyre_bo_map(l->prog.bo, &map))
		return NULL;
	return (const uint8_t *)map + l->prog.offset;
}

/*
 * Check a launch on the host; with the program's bytes @prog, also its
 * signature, and set bit i of *@written for each operand it stores to.
 */
static int kernel_check(const struct spyre_kernel_launch *l, const void *prog,
			uint32_t *written)
{
	uint32_t ninsts;

	*written = l->noperands < 32 ? (1u << l->noperands) - 1 : ~0u;
	if (l->noperands > SPYRE_KERNEL_MAX_OPERANDS ||
	    l->nparams > SPYRE_KERNEL_MAX_PARAMS ||
	    l->npdims > SPYRE_KERNEL_MAX_PDIMS ||
	    l->nrdims > SPYRE_KERNEL_MAX_RDIMS || l->pad ||
	    (l->noperands && !l->operands) || (l->nparams && !l->params) ||
	    mem_absent(l->prog) || (mem_va(l->prog) & 7) ||
	    l->prog_size < sizeof(struct spyre_kprog_header) ||
	    (l->prog_size - sizeof(struct spyre_kprog_header)) % 16 ||
	    (l->prog_size - sizeof(struct spyre_kprog_header)) / 16 >
		    SPYRE_KERNEL_MAX_INSTS)
		return -EINVAL;
	for (unsigned int i = 0; i < 4; i++)
		if (l->reserved[i])
			return -EINVAL;
	for (unsigned int i = 0; i < 9; i++) {
		uint64_t v = l->size[i];
		bool used = i < SPYRE_KDIM_R0 ? i < l->npdims :
			    i - SPYRE_KDIM_R0 < l->nrdims;

		if ((!used && v) ||
		    ((v >> 63) && (v & ~(1ull << 63)) >= l->nparams))
			return -EINVAL;
	}
	for (unsigned int i = 0; i < l->noperands; i++) {
		const struct spyre_kernel_arg *a = &l->operands[i];
		size_t es = spyre_cmd_dtype_size(a->dtype);
		int ret;

		if (!es || a->dtype >= SPYRE_DTYPE_COUNT || a->pad ||
		    (mem_va(a->mem) & (es - 1)))
			return -EINVAL;
		ret = mem_check(a->mem, a->extent, es);
		if (ret)
			return ret;
	}
	if (mem_check(l->prog, l->prog_size, 1))
		return -ERANGE;
	if (!prog)
		return 0;
	{
		const struct spyre_kprog_header *h = prog;

		if (h->magic != SPYRE_KPROG_MAGIC || h->noperands != l->noperands ||
		    h->nparams != l->nparams || h->npdims != l->npdims ||
		    h->nrdims != l->nrdims)
			return -EINVAL;
		for (unsigned int i = 0; i < l->noperands; i++)
			if (h->dtype[i] != l->operands[i].dtype)
				return -EINVAL;
		ninsts = (l->prog_size - sizeof(*h)) / 16;
		*written = 0;
		for (uint32_t i = 0; i < ninsts; i++) {
			const struct spyre_kinst *in =
				(const struct spyre_kinst *)(h + 1) + i;

			if ((in->op == SPYRE_KOP_STORE ||
			     in->op == SPYRE_KOP_SCATTER) && in->imm < 32)
				*written |= 1u << in->imm;
		}
	}
	return 0;
}

/* Encode @l into @cb; *@written as kernel_check(). */
int spyre__cmdbuf_kernel(struct spyre_cmdbuf *cb,
			 const struct spyre_kernel_launch *l,
			 uint32_t *written)
{
	struct spyre_mem mems[SPYRE_KERNEL_MAX_OPERANDS];
	struct spyre_cmd_kernel *c;
	const void *prog;
	size_t size;
	int ret;

	if (!cb || !l)
		return -EINVAL;
	prog = kernel_prog_bytes(l);
	ret = kernel_check(l, prog, written);
	if (ret)
		return ret;
	if (prog && !spyre__kernel_runs(l->prog.bo->dev, prog, l->prog_size))
		return -EOPNOTSUPP;
	size = SPYRE_CMD_KERNEL_SIZE(l->noperands, l->nparams);
	c = reserve_cmd(cb, size, l->noperands + 1);
	if (!c)
		return -ENOMEM;
	spyre_cmd_kernel_init(c, mem_va(l->prog), l->prog_size,
			      (uint16_t)l->noperands, (uint16_t)l->nparams,
			      (uint16_t)l->npdims, (uint16_t)l->nrdims, l->size);
	for (unsigned int i = 0; i < l->noperands; i++) {
		spyre_cmd_kernel_operand(c, i, mem_va(l->operands[i].mem),
					 l->operands[i].extent,
					 l->operands[i].dtype);
		mems[i] = l->operands[i].mem;
	}
	for (unsigned int i = 0; i < l->nparams; i++)
		spyre_cmd_kernel_param(c, i, l->params[i]);
	bos_add(cb, mems, l->noperands, *written);
	bos_add(cb, &l->prog, 1, 0);
	cmdbuf_commit(cb, size, 1);
	spyre__kernel_dump(prog, l->prog_size, mem_va(l->prog), l->size,
			   l->npdims, l->nrdims);
	return 0;
}

SPYRE_API int spyre_cmdbuf_kernel(struct spyre_cmdbuf *cb,
				  const struct spyre_kernel_launch *l)
{
	uint32_t written;

	return spyre__cmdbuf_kernel(cb, l, &written);
}
