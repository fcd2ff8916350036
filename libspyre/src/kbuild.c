// SPDX-License-Identifier: MIT
/*
 * The kernel-program builder (spyre_kernel_*): emits a program of one
 * signature instruction by instruction, each checked by the host verifier
 * (kverify.c) before it is kept, so finalized programs are valid.
 */
#include "internal.h"
#include "kprog.h"

#include <spyre/spyre_encode.h>

#include <stdlib.h>
#include <string.h>

struct spyre_kernel {
	int error;			/* sticky */
	struct spyre__kverify v;
	struct spyre_kinst *insts;
	size_t cap;
	uint32_t dtypes[SPYRE_KERNEL_MAX_OPERANDS];
	uint8_t *bytes;			/* the last finalized program */
};

SPYRE_API int spyre_kernel_create(const uint32_t *dtypes,
				  unsigned int noperands, unsigned int nparams,
				  unsigned int npdims, unsigned int nrdims,
				  struct spyre_kernel **out)
{
	struct spyre__ksig sig;
	struct spyre_kernel *k;

	if (!out || noperands > SPYRE_KERNEL_MAX_OPERANDS ||
	    nparams > SPYRE_KERNEL_MAX_PARAMS ||
	    npdims > SPYRE_KERNEL_MAX_PDIMS ||
	    nrdims > SPYRE_KERNEL_MAX_RDIMS || (noperands && !dtypes))
		return -EINVAL;
	memset(&sig, 0, sizeof(sig));
	for (unsigned int i = 0; i < noperands; i++) {
		if (spyre__kdtype_vtype(dtypes[i]) == SPYRE_KTYPE_NONE)
			return -EINVAL;
		sig.dtype[i] = (uint8_t)dtypes[i];
	}
	sig.noperands = noperands;
	sig.nparams = nparams;
	sig.npdims = npdims;
	sig.nrdims = nrdims;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	spyre__kverify_init(&k->v, &sig);
	for (unsigned int i = 0; i < noperands; i++)
		k->dtypes[i] = dtypes[i];
	*out = k;
	return 0;
}

SPYRE_API void spyre_kernel_destroy(struct spyre_kernel *k)
{
	if (!k)
		return;
	free(k->insts);
	free(k->bytes);
	free(k);
}

SPYRE_API int spyre_kernel_error(const struct spyre_kernel *k)
{
	return k ? k->error : -EINVAL;
}

SPYRE_API int spyre_kernel_type(const struct spyre_kernel *k, int v)
{
	if (!k || v < 0 || (unsigned int)v >= k->v.nvalues)
		return -EINVAL;
	return k->v.vtype[v];
}

SPYRE_API unsigned int spyre_kernel_dtype_type(uint32_t dtype)
{
	return spyre__kdtype_vtype(dtype);
}

static int fail(struct spyre_kernel *k, int err)
{
	if (!k->error)
		k->error = err;
	return k->error;
}

/* A source argument as the instruction field; -errno for a bad one. */
static int field(int v)
{
	if (v < 0)
		return v;	/* an earlier call's error */
	if (v > 0xffff)
		return -EINVAL;
	return v;
}

/*
 * Append one instruction after checking it; returns its first defined
 * value (or 0 when it defines none) or the sticky error.
 */
static int emit(struct spyre_kernel *k, uint8_t op, uint32_t type,
		uint32_t mod, int a, int b, int c, uint32_t imm)
{
	int fa = field(a), fb = field(b), fc = field(c);
	struct spyre_kinst in;
	unsigned int ndefs;
	int r;

	if (k->error)
		return k->error;
	if (fa < 0)
		return fail(k, fa);
	if (fb < 0)
		return fail(k, fb);
	if (fc < 0)
		return fail(k, fc);
	if (type > 0xff || mod > 0xffff)
		return fail(k, -EINVAL);
	spyre_kinst_init(&in, op, (uint8_t)type, (uint16_t)mod, SPYRE_KVAL_NONE,
			 (uint16_t)fa, (uint16_t)fb, (uint16_t)fc, imm);
	ndefs = spyre__kinst_ndefs(&in);
	if (ndefs)
		in.dst = (uint16_t)k->v.nvalues;
	/* the limits first, for a distinct error */
	if (k->v.ninsts >= SPYRE_KERNEL_MAX_INSTS ||
	    k->v.nvalues + ndefs > SPYRE_KERNEL_MAX_VALUES ||
	    (op == SPYRE_KOP_REDUCE &&
	     k->v.nreduce >= SPYRE_KERNEL_MAX_REDUCE) ||
	    (op == SPYRE_KOP_SCAN && k->v.nscan >= SPYRE_KERNEL_MAX_SCAN) ||
	    (op == SPYRE_KOP_PASS && k->v.npasses >= SPYRE_KERNEL_MAX_PASSES))
		return fail(k, -E2BIG);
	if (k->v.ninsts >= k->cap) {
		size_t ncap = k->cap ? k->cap * 2 : 64;
		struct spyre_kinst *n = realloc(k->insts, ncap * sizeof(*n));

		if (!n)
			return fail(k, -ENOMEM);
		k->insts = n;
		k->cap = ncap;
	}
	r = spyre__kverify_inst(&k->v, &in);
	if (r)
		return fail(k, -EINVAL);
	k->insts[k->v.ninsts - 1] = in;
	return ndefs ? in.dst : 0;
}

SPYRE_API int spyre_kernel_const(struct spyre_kernel *k, uint32_t type,
				 int64_t bits)
{
	struct spyre_kinst in;
	uint64_t u;
	int r;

	if (!k)
		return -EINVAL;
	switch (type) {
	case SPYRE_KTYPE_BOOL:
		u = bits != 0;
		break;
	case SPYRE_KTYPE_I32:
	case SPYRE_KTYPE_F32:
		u = (uint32_t)bits;
		break;
	case SPYRE_KTYPE_I64:
		u = (uint64_t)bits;
		break;
	default:
		return fail(k, -EINVAL);
	}
	/* emit() with the immediate in b, c and imm */
	spyre_kinst_const_init(&in, (uint8_t)type, 0, u);
	r = emit(k, SPYRE_KOP_CONST, type, 0, SPYRE_KERNEL_NONE, in.b, in.c,
		 in.imm);
	return r;
}

SPYRE_API int spyre_kernel_const_f32(struct spyre_kernel *k, float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return spyre_kernel_const(k, SPYRE_KTYPE_F32, u);
}

SPYRE_API int spyre_kernel_param(struct spyre_kernel *k, uint32_t type,
				 unsigned int index)
{
	if (!k)
		return -EINVAL;
	return emit(k, SPYRE_KOP_PARAM, type, 0, SPYRE_KERNEL_NONE,
		    SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE, index);
}

SPYRE_API int spyre_kernel_idx(struct spyre_kernel *k, uint32_t type,
			       unsigned int dim)
{
	if (!k)
		return -EINVAL;
	return emit(k, SPYRE_KOP_IDX, type, 0, SPYRE_KERNEL_NONE,
		    SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE, dim);
}

SPYRE_API int spyre_kernel_size(struct spyre_kernel *k, uint32_t type,
				unsigned int dim)
{
	if (!k)
		return -EINVAL;
	return emit(k, SPYRE_KOP_SIZE, type, 0, SPYRE_KERNEL_NONE,
		    SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE, dim);
}

SPYRE_API int spyre_kernel_affine(struct spyre_kernel *k, uint32_t type,
				  int base, uint32_t dims, unsigned int param)
{
	if (!k)
		return -EINVAL;
	if (dims > 0x1ff)
		return fail(k, -EINVAL);
	return emit(k, SPYRE_KOP_AFFINE, type, dims, base, SPYRE_KERNEL_NONE,
		    SPYRE_KERNEL_NONE, param);
}

SPYRE_API int spyre_kernel_load(struct spyre_kernel *k, unsigned int operand,
				int offset, int mask, int other)
{
	uint32_t type;

	if (!k)
		return -EINVAL;
	if (operand >= k->v.sig.noperands)
		return fail(k, -EINVAL);
	type = spyre__kdtype_vtype(k->dtypes[operand]);
	return emit(k, SPYRE_KOP_LOAD, type, 0, offset, mask, other, operand);
}

SPYRE_API int spyre_kernel_store(struct spyre_kernel *k, unsigned int operand,
				 int offset, int value, int mask,
				 uint32_t flags)
{
	int r;

	if (!k)
		return -EINVAL;
	r = emit(k, SPYRE_KOP_STORE, SPYRE_KTYPE_NONE, flags, offset, mask,
		 value, operand);
	return r < 0 ? r : 0;
}

/* The result type of @op given its sources. */
static int op_type(struct spyre_kernel *k, uint32_t op, int a, int b)
{
	const struct kop_desc *d = spyre__kop(op);
	int src = d->cls == KC_SELECT ? b : a;

	if (d->cls == KC_CMP || d->cls == KC_PRED)
		return SPYRE_KTYPE_BOOL;
	if (src < 0)
		return src;
	return spyre_kernel_type(k, src);
}

SPYRE_API int spyre_kernel_op(struct spyre_kernel *k, uint32_t op,
			      uint32_t mod, int a, int b, int c)
{
	const struct kop_desc *d;
	int t;

	if (!k)
		return -EINVAL;
	if (k->error)
		return k->error;
	d = spyre__kop(op);
	if (op > 0xff)
		return fail(k, -EINVAL);
	switch (d->cls) {
	case KC_UN: case KC_BIN: case KC_TER: case KC_MINMAX:
	case KC_CMP: case KC_SELECT: case KC_PRED:
		break;
	default:
		return fail(k, -EINVAL);	/* has its own function */
	}
	t = op_type(k, op, a, b);
	if (t < 0)
		return fail(k, t);
	return emit(k, (uint8_t)op, (uint32_t)t, mod, a, b, c, 0);
}

SPYRE_API int spyre_kernel_cvt(struct spyre_kernel *k, uint32_t type, int a,
			       uint32_t via_dtype, uint32_t flags)
{
	if (!k)
		return -EINVAL;
	if (via_dtype > 0xff || (flags & ~SPYRE_KMOD_SAT))
		return fail(k, -EINVAL);
	return emit(k, SPYRE_KOP_CVT, type, via_dtype | flags, a,
		    SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE, 0);
}

SPYRE_API int spyre_kernel_bitcast(struct spyre_kernel *k, uint32_t type,
				   int a)
{
	if (!k)
		return -EINVAL;
	return emit(k, SPYRE_KOP_BITCAST, type, 0, a, SPYRE_KERNEL_NONE,
		    SPYRE_KERNEL_NONE, 0);
}

SPYRE_API int spyre_kernel_check(struct spyre_kernel *k, int cond, int mask)
{
	int r;

	if (!k)
		return -EINVAL;
	r = emit(k, SPYRE_KOP_CHECK, SPYRE_KTYPE_NONE, 0, cond, mask,
		 SPYRE_KERNEL_NONE, 0);
	return r < 0 ? r : 0;
}

SPYRE_API int spyre_kernel_pass(struct spyre_kernel *k)
{
	int r;

	if (!k)
		return -EINVAL;
	r = emit(k, SPYRE_KOP_PASS, SPYRE_KTYPE_NONE, 0, SPYRE_KERNEL_NONE,
		 SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE, 0);
	return r < 0 ? r : 0;
}

SPYRE_API int spyre_kernel_endpass(struct spyre_kernel *k)
{
	int r;

	if (!k)
		return -EINVAL;
	r = emit(k, SPYRE_KOP_ENDPASS, SPYRE_KTYPE_NONE, 0, SPYRE_KERNEL_NONE,
		 SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE, 0);
	return r < 0 ? r : 0;
}

/*
 * The result type of a REDUCE or SCAN of @kind over value @a under @mask:
 * an index (I64) for ARGMAX/ARGMIN, else @a's type.  Returns it, or a
 * negative error (also recorded in @k).
 */
static int fold_type(struct spyre_kernel *k, uint32_t kind, int a, int mask)
{
	int t;

	if (!k)
		return -EINVAL;
	if (k->error)
		return k->error;
	if (mask < 0)
		return fail(k, mask);
	if (kind == SPYRE_KRED_ARGMAX || kind == SPYRE_KRED_ARGMIN)
		return SPYRE_KTYPE_I64;
	if (a < 0)
		return fail(k, a);
	t = spyre_kernel_type(k, a);
	return t < 0 ? fail(k, t) : t;
}

SPYRE_API int spyre_kernel_reduce(struct spyre_kernel *k, uint32_t kind,
				  int a, int b, int c, int mask)
{
	int t = fold_type(k, kind, a, mask);

	if (t < 0)
		return t;
	return emit(k, SPYRE_KOP_REDUCE, (uint32_t)t, kind, a, b, c,
		    (uint32_t)mask);
}

SPYRE_API int spyre_kernel_scatter(struct spyre_kernel *k,
				   unsigned int operand, int offset, int value,
				   int mask, uint32_t mode)
{
	int r;

	if (!k)
		return -EINVAL;
	r = emit(k, SPYRE_KOP_SCATTER, SPYRE_KTYPE_NONE, mode, offset, mask,
		 value, operand);
	return r < 0 ? r : 0;
}

SPYRE_API int spyre_kernel_scan(struct spyre_kernel *k, uint32_t kind, int a,
				int mask)
{
	int t = fold_type(k, kind, a, mask);

	if (t < 0)
		return t;
	return emit(k, SPYRE_KOP_SCAN, (uint32_t)t, kind, a, SPYRE_KERNEL_NONE,
		    SPYRE_KERNEL_NONE, (uint32_t)mask);
}

SPYRE_API int spyre_kernel_rand(struct spyre_kernel *k, uint32_t kind,
				int seed, int offset, int index)
{
	if (!k)
		return -EINVAL;
	return emit(k, SPYRE_KOP_RAND, kind == SPYRE_KRAND_BITS ?
		    SPYRE_KTYPE_I32 : SPYRE_KTYPE_F32, kind, seed, offset, index,
		    0);
}

SPYRE_API int spyre_kernel_finalize(struct spyre_kernel *k, const void **prog,
				    size_t *size)
{
	struct spyre_kprog_header *h;
	size_t n;
	uint8_t *p;

	if (!k || !prog || !size)
		return -EINVAL;
	if (k->error)
		return k->error;
	if (spyre__kverify_end(&k->v, k->v.npasses))
		return -EINVAL;
	n = sizeof(*h) + k->v.ninsts * sizeof(struct spyre_kinst);
	p = realloc(k->bytes, n);
	if (!p)
		return -ENOMEM;
	k->bytes = p;
	h = (struct spyre_kprog_header *)p;
	spyre_kprog_header_init(h, k->v.ninsts, k->v.nvalues,
				(uint8_t)k->v.sig.noperands, k->dtypes,
				(uint8_t)k->v.sig.nparams,
				(uint8_t)k->v.sig.npdims,
				(uint8_t)k->v.sig.nrdims,
				(uint8_t)k->v.npasses);
	if (k->v.ninsts)
		memcpy(p + sizeof(*h), k->insts,
		       k->v.ninsts * sizeof(struct spyre_kinst));
	*prog = p;
	*size = n;
	return 0;
}
