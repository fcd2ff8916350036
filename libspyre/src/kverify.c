// SPDX-License-Identifier: MIT
/*
 * The host's kernel-program verifier and opcode table: the rules of
 * docs/spyre-hw.rst "Verification and errors", checked instruction by
 * instruction for the builder and the reference interpreter.  The card
 * has its own verifier; this one is written from the contract alone.
 */
#include "kprog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE SPYRE_KVAL_NONE

static const struct kop_desc kops[256] = {
	[SPYRE_KOP_PASS] = { "pass", KC_PASS, 0 },
	[SPYRE_KOP_ENDPASS] = { "endpass", KC_ENDPASS, 0 },
	[SPYRE_KOP_CONST] = { "const", KC_CONST, KT_ANY },
	[SPYRE_KOP_PARAM] = { "param", KC_PARAM, KT_ANY },
	[SPYRE_KOP_IDX] = { "idx", KC_IDX, KT_INT },
	[SPYRE_KOP_SIZE] = { "size", KC_SIZE, KT_INT },
	[SPYRE_KOP_AFFINE] = { "affine", KC_AFFINE, KT_INT },
	[SPYRE_KOP_CHECK] = { "check", KC_CHECK, 0 },
	[SPYRE_KOP_LOAD] = { "load", KC_LOAD, KT_ANY },
	[SPYRE_KOP_STORE] = { "store", KC_STORE, 0 },
	[SPYRE_KOP_ADD] = { "add", KC_BIN, KT_NUM },
	[SPYRE_KOP_SUB] = { "sub", KC_BIN, KT_NUM },
	[SPYRE_KOP_MUL] = { "mul", KC_BIN, KT_NUM },
	[SPYRE_KOP_DIV] = { "div", KC_BIN, KT_F32 },
	[SPYRE_KOP_TRUNCDIV] = { "truncdiv", KC_BIN, KT_NUM },
	[SPYRE_KOP_FLOORDIV] = { "floordiv", KC_BIN, KT_NUM },
	[SPYRE_KOP_FMOD] = { "fmod", KC_BIN, KT_NUM },
	[SPYRE_KOP_REM] = { "rem", KC_BIN, KT_NUM },
	[SPYRE_KOP_FMA] = { "fma", KC_TER, KT_NUM },
	[SPYRE_KOP_NEG] = { "neg", KC_UN, KT_NUM },
	[SPYRE_KOP_ABS] = { "abs", KC_UN, KT_NUM },
	[SPYRE_KOP_MIN] = { "min", KC_MINMAX, KT_NUM },
	[SPYRE_KOP_MAX] = { "max", KC_MINMAX, KT_NUM },
	[SPYRE_KOP_CLAMP] = { "clamp", KC_TER, KT_NUM },
	[SPYRE_KOP_POW] = { "pow", KC_BIN, KT_NUM },
	[SPYRE_KOP_CMP] = { "cmp", KC_CMP, KT_BOOL },
	[SPYRE_KOP_AND] = { "and", KC_BIN, KT_BOOL | KT_INT },
	[SPYRE_KOP_OR] = { "or", KC_BIN, KT_BOOL | KT_INT },
	[SPYRE_KOP_XOR] = { "xor", KC_BIN, KT_BOOL | KT_INT },
	[SPYRE_KOP_NOT] = { "not", KC_UN, KT_BOOL | KT_INT },
	[SPYRE_KOP_SHL] = { "shl", KC_BIN, KT_INT },
	[SPYRE_KOP_SHR] = { "shr", KC_BIN, KT_INT },
	[SPYRE_KOP_SELECT] = { "select", KC_SELECT, KT_ANY },
	[SPYRE_KOP_CVT] = { "cvt", KC_CVT, KT_ANY },
	[SPYRE_KOP_BITCAST] = { "bitcast", KC_BITCAST, KT_I32 | KT_F32 },
	[SPYRE_KOP_EXP] = { "exp", KC_UN, KT_F32 },
	[SPYRE_KOP_LOG] = { "log", KC_UN, KT_F32 },
	[SPYRE_KOP_SQRT] = { "sqrt", KC_UN, KT_F32 },
	[SPYRE_KOP_RSQRT] = { "rsqrt", KC_UN, KT_F32 },
	[SPYRE_KOP_RECIP] = { "recip", KC_UN, KT_F32 },
	[SPYRE_KOP_TANH] = { "tanh", KC_UN, KT_F32 },
	[SPYRE_KOP_SIGMOID] = { "sigmoid", KC_UN, KT_F32 },
	[SPYRE_KOP_ERF] = { "erf", KC_UN, KT_F32 },
	[SPYRE_KOP_EXP2] = { "exp2", KC_UN, KT_F32 },
	[SPYRE_KOP_EXPM1] = { "expm1", KC_UN, KT_F32 },
	[SPYRE_KOP_LOG2] = { "log2", KC_UN, KT_F32 },
	[SPYRE_KOP_LOG10] = { "log10", KC_UN, KT_F32 },
	[SPYRE_KOP_LOG1P] = { "log1p", KC_UN, KT_F32 },
	[SPYRE_KOP_SIN] = { "sin", KC_UN, KT_F32 },
	[SPYRE_KOP_COS] = { "cos", KC_UN, KT_F32 },
	[SPYRE_KOP_TAN] = { "tan", KC_UN, KT_F32 },
	[SPYRE_KOP_ASIN] = { "asin", KC_UN, KT_F32 },
	[SPYRE_KOP_ACOS] = { "acos", KC_UN, KT_F32 },
	[SPYRE_KOP_ATAN] = { "atan", KC_UN, KT_F32 },
	[SPYRE_KOP_ATAN2] = { "atan2", KC_BIN, KT_F32 },
	[SPYRE_KOP_SINH] = { "sinh", KC_UN, KT_F32 },
	[SPYRE_KOP_COSH] = { "cosh", KC_UN, KT_F32 },
	[SPYRE_KOP_ASINH] = { "asinh", KC_UN, KT_F32 },
	[SPYRE_KOP_ACOSH] = { "acosh", KC_UN, KT_F32 },
	[SPYRE_KOP_ATANH] = { "atanh", KC_UN, KT_F32 },
	[SPYRE_KOP_ERFC] = { "erfc", KC_UN, KT_F32 },
	[SPYRE_KOP_ERFINV] = { "erfinv", KC_UN, KT_F32 },
	[SPYRE_KOP_FLOOR] = { "floor", KC_UN, KT_F32 },
	[SPYRE_KOP_CEIL] = { "ceil", KC_UN, KT_F32 },
	[SPYRE_KOP_ROUND] = { "round", KC_UN, KT_F32 },
	[SPYRE_KOP_TRUNC] = { "trunc", KC_UN, KT_F32 },
	[SPYRE_KOP_SIGN] = { "sign", KC_UN, KT_F32 },
	[SPYRE_KOP_ISNAN] = { "isnan", KC_PRED, KT_BOOL },
	[SPYRE_KOP_ISINF] = { "isinf", KC_PRED, KT_BOOL },
	[SPYRE_KOP_COPYSIGN] = { "copysign", KC_BIN, KT_F32 },
	[SPYRE_KOP_HYPOT] = { "hypot", KC_BIN, KT_F32 },
	[SPYRE_KOP_LGAMMA] = { "lgamma", KC_UN, KT_F32 },
	[SPYRE_KOP_REDUCE] = { "reduce", KC_REDUCE, 0 },
	[SPYRE_KOP_SCATTER] = { "scatter", KC_SCATTER, 0 },
	[SPYRE_KOP_SCAN] = { "scan", KC_SCAN, 0 },
	[SPYRE_KOP_RAND] = { "rand", KC_RAND, 0 },
};

const struct kop_desc *spyre__kop(unsigned int op)
{
	return &kops[op & 0xff];
}

unsigned int spyre__kdtype_vtype(unsigned int dtype)
{
	switch (dtype) {
	case SPYRE_DTYPE_U8:
	case SPYRE_DTYPE_INT8:
	case SPYRE_DTYPE_INT16:
	case SPYRE_DTYPE_INT32:
		return SPYRE_KTYPE_I32;
	case SPYRE_DTYPE_INT64:
		return SPYRE_KTYPE_I64;
	case SPYRE_DTYPE_BOOL:
		return SPYRE_KTYPE_BOOL;
	case SPYRE_DTYPE_FP32:
	case SPYRE_DTYPE_FP16:
	case SPYRE_DTYPE_BF16:
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
		return SPYRE_KTYPE_F32;
	default:
		return SPYRE_KTYPE_NONE;
	}
}

const char *spyre__kdtype_name(unsigned int dtype)
{
	static const char *const n[SPYRE_DTYPE_COUNT] = {
		[SPYRE_DTYPE_U8] = "U8", [SPYRE_DTYPE_FP32] = "FP32",
		[SPYRE_DTYPE_FP16] = "FP16", [SPYRE_DTYPE_BF16] = "BF16",
		[SPYRE_DTYPE_FP8_E4M3] = "FP8_E4M3",
		[SPYRE_DTYPE_FP8_E5M2] = "FP8_E5M2",
		[SPYRE_DTYPE_INT8] = "INT8", [SPYRE_DTYPE_INT32] = "INT32",
		[SPYRE_DTYPE_INT64] = "INT64", [SPYRE_DTYPE_INT16] = "INT16",
		[SPYRE_DTYPE_BOOL] = "BOOL",
	};

	return dtype < SPYRE_DTYPE_COUNT ? n[dtype] : NULL;
}

const char *spyre__kred_name(unsigned int kind)
{
	static const char *const n[] = {
		[SPYRE_KRED_SUM] = "sum", [SPYRE_KRED_PROD] = "prod",
		[SPYRE_KRED_MAX] = "max", [SPYRE_KRED_MIN] = "min",
		[SPYRE_KRED_ARGMAX] = "argmax", [SPYRE_KRED_ARGMIN] = "argmin",
		[SPYRE_KRED_ANY] = "any", [SPYRE_KRED_ALL] = "all",
		[SPYRE_KRED_XOR_SUM] = "xor_sum",
		[SPYRE_KRED_WELFORD] = "welford",
		[SPYRE_KRED_WELFORD_COMBINE] = "welford_combine",
	};

	return kind < sizeof(n) / sizeof(n[0]) ? n[kind] : NULL;
}

unsigned int spyre__kinst_ndefs(const struct spyre_kinst *in)
{
	const struct kop_desc *d = spyre__kop(in->op);

	switch (d->cls) {
	case KC_INVALID:
	case KC_PASS:
	case KC_ENDPASS:
	case KC_CHECK:
	case KC_STORE:
	case KC_SCATTER:
		return 0;
	case KC_REDUCE:
		return ((in->mod & 0xff) == SPYRE_KRED_WELFORD ||
			(in->mod & 0xff) == SPYRE_KRED_WELFORD_COMBINE) ? 3 : 1;
	default:
		return 1;
	}
}

void spyre__kverify_init(struct spyre__kverify *v,
			 const struct spyre__ksig *sig)
{
	v->sig = *sig;
	v->ninsts = 0;
	v->nvalues = 0;
	v->npasses = 0;
	v->nreduce = 0;
	v->nscan = 0;
	v->loaded = v->stored = v->scattered = 0;
	v->in_pass = false;
}

/* Is value @id visible at the current instruction? */
static bool visible(const struct spyre__kverify *v, unsigned int id)
{
	unsigned int s;

	if (id >= v->nvalues)
		return false;
	s = v->vsect[id];
	if (s == 0)
		return true;
	if (v->vreduce[id])	/* visible once its pass ended */
		return s < v->npasses || (s == v->npasses && !v->in_pass);
	return v->in_pass && s == v->npasses;
}

/*
 * A source: NONE allowed when @optional; else defined, visible and of a
 * type in @types.  Returns 0 or a reason.
 */
static int src(const struct spyre__kverify *v, uint16_t id, unsigned int types,
	       bool optional)
{
	if (id == NONE)
		return optional ? 0 : SPYRE_KERR_VALUE;
	if (!visible(v, id))
		return SPYRE_KERR_VALUE;
	if (!((1u << v->vtype[id]) & types))
		return SPYRE_KERR_TYPE;
	return 0;
}

#define TRY(x) do { int r_ = (x); if (r_) return r_; } while (0)

/* Is @dim a dimension of the signature (for IDX, SIZE, AFFINE)? */
static bool dim_ok(const struct spyre__kverify *v, unsigned int dim)
{
	if (dim < SPYRE_KERNEL_MAX_PDIMS)
		return dim < v->sig.npdims;
	if (dim >= SPYRE_KDIM_R0 && dim < SPYRE_KDIM_R0 + SPYRE_KERNEL_MAX_RDIMS)
		return dim - SPYRE_KDIM_R0 < v->sig.nrdims;
	return dim == SPYRE_KDIM_POINT ||
	       (dim == SPYRE_KDIM_RINDEX && v->sig.nrdims);
}

static bool is_rdim(unsigned int dim)
{
	return dim >= SPYRE_KDIM_R0;
}

/* The checks of one instruction; the caller accounts for it. */
static int check(struct spyre__kverify *v, const struct spyre_kinst *in)
{
	const struct kop_desc *d = spyre__kop(in->op);
	unsigned int t = in->type, ndefs = spyre__kinst_ndefs(in);
	uint32_t bit = 1u << (t < 8 ? t : 7);
	bool defines = ndefs > 0;

	if (d->cls == KC_INVALID)
		return SPYRE_KERR_OPCODE;
	/* the result type */
	if (d->cls == KC_REDUCE || d->cls == KC_SCAN || d->cls == KC_RAND) {
		/* checked with the kind below */
	} else if (!defines) {
		if (t != SPYRE_KTYPE_NONE)
			return SPYRE_KERR_TYPE;
	} else if (t > SPYRE_KTYPE_F32 || !(bit & d->types)) {
		return SPYRE_KERR_TYPE;
	}
	/* dst */
	if (defines) {
		if (v->nvalues + ndefs > SPYRE_KERNEL_MAX_VALUES)
			return SPYRE_KERR_VALUE;
		if (in->dst != v->nvalues)
			return SPYRE_KERR_VALUE;
	} else if (in->dst != NONE) {
		return SPYRE_KERR_FIELD;
	}

	switch (d->cls) {
	case KC_PASS:
		if (in->mod || in->a != NONE || in->b != NONE || in->c != NONE ||
		    in->imm)
			return SPYRE_KERR_FIELD;
		if (v->in_pass || !v->sig.nrdims ||
		    v->npasses >= SPYRE_KERNEL_MAX_PASSES)
			return SPYRE_KERR_STRUCTURE;
		return 0;
	case KC_ENDPASS:
		if (in->mod || in->a != NONE || in->b != NONE || in->c != NONE ||
		    in->imm)
			return SPYRE_KERR_FIELD;
		if (!v->in_pass)
			return SPYRE_KERR_STRUCTURE;
		return 0;
	case KC_CONST: {
		uint64_t imm = (uint64_t)in->b | (uint64_t)in->c << 16 |
			       (uint64_t)in->imm << 32;

		if (in->mod || in->a != NONE)
			return SPYRE_KERR_FIELD;
		if ((t == SPYRE_KTYPE_I32 || t == SPYRE_KTYPE_F32) && imm >> 32)
			return SPYRE_KERR_FIELD;
		if (t == SPYRE_KTYPE_BOOL && imm > 1)
			return SPYRE_KERR_FIELD;
		return 0;
	}
	case KC_PARAM:
		if (in->mod || in->a != NONE || in->b != NONE || in->c != NONE)
			return SPYRE_KERR_FIELD;
		if (in->imm >= v->sig.nparams)
			return SPYRE_KERR_INDEX;
		return 0;
	case KC_IDX:
	case KC_SIZE:
		if (in->mod || in->a != NONE || in->b != NONE || in->c != NONE)
			return SPYRE_KERR_FIELD;
		if (!dim_ok(v, in->imm))
			return SPYRE_KERR_INDEX;
		if (d->cls == KC_IDX && is_rdim(in->imm) &&
		    in->imm != SPYRE_KDIM_POINT && !v->in_pass)
			return SPYRE_KERR_STRUCTURE;
		return 0;
	case KC_AFFINE: {
		unsigned int n = 0;

		if (in->b != NONE || in->c != NONE || (in->mod & ~0x1ffu))
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, bit, true));
		for (unsigned int dd = 0; dd < 9; dd++) {
			if (!(in->mod & (1u << dd)))
				continue;
			if (!dim_ok(v, dd))
				return SPYRE_KERR_INDEX;
			if (is_rdim(dd) && !v->in_pass)
				return SPYRE_KERR_STRUCTURE;
			n++;
		}
		if (!n && in->imm)
			return SPYRE_KERR_FIELD;
		if (n && (uint64_t)in->imm + n > v->sig.nparams)
			return SPYRE_KERR_INDEX;
		return 0;
	}
	case KC_CHECK:
		if (in->mod || in->c != NONE || in->imm)
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, KT_BOOL, false));
		TRY(src(v, in->b, KT_BOOL, true));
		return 0;
	case KC_LOAD:
	case KC_STORE: {
		unsigned int vt;

		if (in->imm >= v->sig.noperands)
			return SPYRE_KERR_INDEX;
		vt = spyre__kdtype_vtype(v->sig.dtype[in->imm]);
		if (d->cls == KC_LOAD) {
			if (in->mod)
				return SPYRE_KERR_FIELD;
			if (t != vt)
				return SPYRE_KERR_TYPE;
		} else if (in->mod & ~SPYRE_KMOD_SAT) {
			return SPYRE_KERR_FIELD;
		} else if ((in->mod & SPYRE_KMOD_SAT) &&
			   v->sig.dtype[in->imm] != SPYRE_DTYPE_FP8_E4M3 &&
			   v->sig.dtype[in->imm] != SPYRE_DTYPE_FP8_E5M2) {
			return SPYRE_KERR_FIELD;
		}
		TRY(src(v, in->a, KT_INT, false));
		TRY(src(v, in->b, KT_BOOL, true));
		TRY(src(v, in->c, 1u << vt, d->cls == KC_LOAD));
		/* a SCATTER's operand is the only access of that operand */
		if (v->scattered & (1u << in->imm))
			return SPYRE_KERR_STRUCTURE;
		return 0;
	}
	case KC_SCATTER: {
		unsigned int vt, kind = in->mod & 0xff;
		uint32_t dt;

		if (in->imm >= v->sig.noperands)
			return SPYRE_KERR_INDEX;
		dt = v->sig.dtype[in->imm];
		vt = spyre__kdtype_vtype(dt);
		if ((in->mod & ~(0xffu | SPYRE_KMOD_SAT)) ||
		    (kind != SPYRE_KSCAT_STORE && kind != SPYRE_KSCAT_ADD) ||
		    (kind == SPYRE_KSCAT_ADD && vt == SPYRE_KTYPE_BOOL) ||
		    ((in->mod & SPYRE_KMOD_SAT) && dt != SPYRE_DTYPE_FP8_E4M3 &&
		     dt != SPYRE_DTYPE_FP8_E5M2))
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, KT_INT, false));
		TRY(src(v, in->b, KT_BOOL, true));
		TRY(src(v, in->c, 1u << vt, false));
		if ((v->loaded | v->stored | v->scattered) & (1u << in->imm))
			return SPYRE_KERR_STRUCTURE;
		return 0;
	}
	case KC_SCAN: {
		unsigned int kind = in->mod & 0xff;
		bool arg = kind == SPYRE_KRED_ARGMAX || kind == SPYRE_KRED_ARGMIN;

		if ((in->mod & ~0xffu) || kind < SPYRE_KRED_SUM ||
		    kind > SPYRE_KRED_ARGMIN || in->b != NONE || in->c != NONE)
			return SPYRE_KERR_FIELD;
		if (arg ? t != SPYRE_KTYPE_I64 :
			  (t > SPYRE_KTYPE_F32 || !(bit & KT_NUM)))
			return SPYRE_KERR_TYPE;
		if (!v->in_pass || v->nscan >= SPYRE_KERNEL_MAX_SCAN)
			return SPYRE_KERR_STRUCTURE;
		TRY(src(v, in->a, arg ? KT_NUM : bit, false));
		if (in->imm != NONE) {
			if (in->imm > 0xffff)
				return SPYRE_KERR_FIELD;
			TRY(src(v, (uint16_t)in->imm, KT_BOOL, false));
		}
		return 0;
	}
	case KC_RAND:
		if (in->mod > SPYRE_KRAND_NORMAL || in->imm)
			return SPYRE_KERR_FIELD;
		if (t != (in->mod == SPYRE_KRAND_BITS ? SPYRE_KTYPE_I32 :
			  SPYRE_KTYPE_F32))
			return SPYRE_KERR_TYPE;
		TRY(src(v, in->a, KT_I64, false));
		TRY(src(v, in->b, KT_I64, false));
		return src(v, in->c, KT_INT, false);
	case KC_UN:
		if (in->mod || in->b != NONE || in->c != NONE || in->imm)
			return SPYRE_KERR_FIELD;
		return src(v, in->a, bit, false);
	case KC_BIN:
	case KC_MINMAX:
		if (in->c != NONE || in->imm)
			return SPYRE_KERR_FIELD;
		if (in->mod & ~(d->cls == KC_MINMAX ? SPYRE_KMOD_IGNORE_NAN : 0u))
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, bit, false));
		return src(v, in->b, bit, false);
	case KC_TER:
		if (in->mod || in->imm)
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, bit, false));
		TRY(src(v, in->b, bit, false));
		return src(v, in->c, bit, false);
	case KC_CMP:
		if (in->c != NONE || in->imm || in->mod > SPYRE_KCMP_GE)
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, KT_ANY, false));
		TRY(src(v, in->b, 1u << v->vtype[in->a], false));
		if (v->vtype[in->a] == SPYRE_KTYPE_BOOL && in->mod > SPYRE_KCMP_NE)
			return SPYRE_KERR_TYPE;
		return 0;
	case KC_SELECT:
		if (in->mod || in->imm)
			return SPYRE_KERR_FIELD;
		TRY(src(v, in->a, KT_BOOL, false));
		TRY(src(v, in->b, bit, false));
		return src(v, in->c, bit, false);
	case KC_CVT: {
		unsigned int dt = in->mod & 0xff;

		if (in->b != NONE || in->c != NONE || in->imm ||
		    (in->mod & ~(0xffu | SPYRE_KMOD_SAT)))
			return SPYRE_KERR_FIELD;
		if (dt && (dt >= SPYRE_DTYPE_COUNT ||
			   spyre__kdtype_vtype(dt) != t))
			return SPYRE_KERR_FIELD;
		if ((in->mod & SPYRE_KMOD_SAT) && dt != SPYRE_DTYPE_FP8_E4M3 &&
		    dt != SPYRE_DTYPE_FP8_E5M2)
			return SPYRE_KERR_FIELD;
		return src(v, in->a, KT_ANY, false);
	}
	case KC_BITCAST:
		if (in->mod || in->b != NONE || in->c != NONE || in->imm)
			return SPYRE_KERR_FIELD;
		return src(v, in->a, KT_I32 | KT_F32, false);
	case KC_PRED:
		if (in->mod || in->b != NONE || in->c != NONE || in->imm)
			return SPYRE_KERR_FIELD;
		return src(v, in->a, KT_F32, false);
	case KC_REDUCE: {
		unsigned int kind = in->mod & 0xff, at, rt;

		if (in->mod & ~0xffu)
			return SPYRE_KERR_FIELD;
		switch (kind) {
		case SPYRE_KRED_SUM: case SPYRE_KRED_PROD:
		case SPYRE_KRED_MAX: case SPYRE_KRED_MIN:
			at = KT_NUM; rt = KT_NUM; break;
		case SPYRE_KRED_ARGMAX: case SPYRE_KRED_ARGMIN:
			at = KT_NUM; rt = KT_I64; break;
		case SPYRE_KRED_ANY: case SPYRE_KRED_ALL:
			at = KT_BOOL; rt = KT_BOOL; break;
		case SPYRE_KRED_XOR_SUM:
			at = KT_INT; rt = KT_INT; break;
		case SPYRE_KRED_WELFORD: case SPYRE_KRED_WELFORD_COMBINE:
			at = KT_F32; rt = KT_F32; break;
		default:
			return SPYRE_KERR_FIELD;
		}
		if (t > SPYRE_KTYPE_F32 || !(bit & rt))
			return SPYRE_KERR_TYPE;
		if (!v->in_pass)
			return SPYRE_KERR_STRUCTURE;
		if (v->nreduce >= SPYRE_KERNEL_MAX_REDUCE)
			return SPYRE_KERR_STRUCTURE;
		/* sources of type T, except arg-reductions (any num) */
		if (rt != KT_I64)
			at = bit;
		TRY(src(v, in->a, at, false));
		if (kind == SPYRE_KRED_WELFORD_COMBINE) {
			TRY(src(v, in->b, KT_F32, false));
			TRY(src(v, in->c, KT_F32, false));
		} else if (in->b != NONE || in->c != NONE) {
			return SPYRE_KERR_FIELD;
		}
		if (in->imm != NONE) {
			if (in->imm > 0xffff)
				return SPYRE_KERR_FIELD;
			TRY(src(v, (uint16_t)in->imm, KT_BOOL, false));
		}
		return 0;
	}
	default:
		return SPYRE_KERR_OPCODE;
	}
}

int spyre__kverify_inst(struct spyre__kverify *v, const struct spyre_kinst *in)
{
	const struct kop_desc *d = spyre__kop(in->op);
	unsigned int n;
	int r;

	if (v->ninsts >= SPYRE_KERNEL_MAX_INSTS)
		return SPYRE_KERR_STRUCTURE;
	r = check(v, in);
	if (r)
		return r;
	n = spyre__kinst_ndefs(in);
	for (unsigned int i = 0; i < n; i++) {
		v->vtype[v->nvalues + i] = in->type;
		v->vsect[v->nvalues + i] = v->in_pass ? v->npasses : 0;
		v->vreduce[v->nvalues + i] = d->cls == KC_REDUCE;
	}
	v->nvalues += n;
	if (d->cls == KC_PASS) {
		v->npasses++;
		v->in_pass = true;
	} else if (d->cls == KC_ENDPASS) {
		v->in_pass = false;
	} else if (d->cls == KC_REDUCE) {
		v->nreduce++;
	} else if (d->cls == KC_SCAN) {
		v->nscan++;
	} else if (d->cls == KC_LOAD) {
		v->loaded |= 1u << in->imm;
	} else if (d->cls == KC_STORE) {
		v->stored |= 1u << in->imm;
	} else if (d->cls == KC_SCATTER) {
		v->scattered |= 1u << in->imm;
	}
	v->ninsts++;
	return 0;
}

int spyre__kverify_end(const struct spyre__kverify *v, unsigned int npasses)
{
	if (v->in_pass || v->npasses != npasses)
		return SPYRE_KERR_STRUCTURE;
	if (v->sig.nrdims && !v->npasses)
		return SPYRE_KERR_STRUCTURE;
	return 0;
}

bool spyre__kprog_part2(const void *prog, size_t size)
{
	const struct spyre_kinst *in;
	size_t n;

	if (!prog || size < sizeof(struct spyre_kprog_header))
		return false;
	in = (const struct spyre_kinst *)((const uint8_t *)prog +
					  sizeof(struct spyre_kprog_header));
	n = (size - sizeof(struct spyre_kprog_header)) / 16;
	for (size_t i = 0; i < n; i++) {
		unsigned int cls = spyre__kop(in[i].op)->cls;

		if (cls == KC_SCATTER || cls == KC_SCAN || cls == KC_RAND)
			return true;
	}
	return false;
}

static uint64_t kdetail(uint32_t inst, unsigned int reason)
{
	return (uint64_t)inst | (uint64_t)reason << 32;
}

int spyre__kverify_program(const void *prog, uint64_t size,
			   const struct spyre__ksig *launch, uint64_t *detail)
{
	struct spyre_kprog_header h;
	const uint8_t *p = prog;
	struct spyre__kverify *v;
	struct spyre__ksig sig;
	int ret = 0;

	*detail = kdetail(SPYRE_KINST_HEADER, SPYRE_KERR_HEADER);
	if (size < sizeof(h) || (size - sizeof(h)) % 16 ||
	    (size - sizeof(h)) / 16 > SPYRE_KERNEL_MAX_INSTS)
		return SPYRE_STATUS_BAD_PROGRAM;
	memcpy(&h, p, sizeof(h));
	if (h.magic != SPYRE_KPROG_MAGIC || h.version != SPYRE_KPROG_VERSION ||
	    h.flags || h.pad[0] || h.pad[1] || h.pad[2] || h.reserved ||
	    h.ninsts != (size - sizeof(h)) / 16 ||
	    h.nvalues > SPYRE_KERNEL_MAX_VALUES ||
	    h.noperands > SPYRE_KERNEL_MAX_OPERANDS ||
	    h.nparams > SPYRE_KERNEL_MAX_PARAMS ||
	    h.npdims > SPYRE_KERNEL_MAX_PDIMS ||
	    h.nrdims > SPYRE_KERNEL_MAX_RDIMS ||
	    h.npasses > SPYRE_KERNEL_MAX_PASSES ||
	    (h.nrdims ? !h.npasses : h.npasses))
		return SPYRE_STATUS_BAD_PROGRAM;
	for (unsigned int i = 0; i < 32; i++) {
		bool bad = i < h.noperands ?
			spyre__kdtype_vtype(h.dtype[i]) == SPYRE_KTYPE_NONE :
			h.dtype[i] != 0;
		if (bad)
			return SPYRE_STATUS_BAD_PROGRAM;
	}
	memset(&sig, 0, sizeof(sig));
	sig.noperands = h.noperands;
	sig.nparams = h.nparams;
	sig.npdims = h.npdims;
	sig.nrdims = h.nrdims;
	memcpy(sig.dtype, h.dtype, sizeof(sig.dtype));
	if (launch && (launch->noperands != sig.noperands ||
		       launch->nparams != sig.nparams ||
		       launch->npdims != sig.npdims ||
		       launch->nrdims != sig.nrdims ||
		       memcmp(launch->dtype, sig.dtype, sig.noperands))) {
		*detail = kdetail(SPYRE_KINST_HEADER, SPYRE_KERR_SIGNATURE);
		return SPYRE_STATUS_BAD_PROGRAM;
	}
	v = malloc(sizeof(*v));
	if (!v)
		return -ENOMEM;
	spyre__kverify_init(v, &sig);
	for (uint32_t i = 0; i < h.ninsts; i++) {
		struct spyre_kinst in;
		int r;

		memcpy(&in, p + sizeof(h) + 16 * (size_t)i, sizeof(in));
		r = spyre__kverify_inst(v, &in);
		if (r) {
			*detail = kdetail(i, (unsigned int)r);
			ret = SPYRE_STATUS_BAD_PROGRAM;
			goto out;
		}
	}
	if (spyre__kverify_end(v, h.npasses)) {
		*detail = kdetail(h.ninsts, SPYRE_KERR_STRUCTURE);
		ret = SPYRE_STATUS_BAD_PROGRAM;
	} else if (v->nvalues != h.nvalues) {
		*detail = kdetail(SPYRE_KINST_HEADER, SPYRE_KERR_HEADER);
		ret = SPYRE_STATUS_BAD_PROGRAM;
	} else {
		*detail = 0;
	}
out:
	free(v);
	return ret;
}
