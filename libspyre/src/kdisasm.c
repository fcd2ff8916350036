// SPDX-License-Identifier: MIT
/*
 * The kernel-program disassembler (spyre_kernel_disasm(), the syntax of
 * docs/spyre-hw.rst "Examples") and SPYRE_KERNEL_DUMP, which prints the
 * programs of KERNEL commands as libspyre encodes them.
 */
#include "internal.h"
#include "kprog.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	char *buf;
	size_t len;
	size_t used;	/* bytes the whole text needs */
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	size_t room = o->used < o->len ? o->len - o->used : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->used : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->used += (size_t)n;
}

static const char *tname(unsigned int t)
{
	static const char *const n[] = { "none", "bool", "i32", "i64", "f32" };

	return t < 5 ? n[t] : "t?";
}

static void val(struct out *o, uint16_t v)
{
	if (v == SPYRE_KVAL_NONE)
		put(o, "none");
	else
		put(o, "%%%u", v);
}

static void dim(struct out *o, unsigned int d)
{
	if (d < SPYRE_KDIM_R0)
		put(o, "p%u", d);
	else if (d < SPYRE_KDIM_R0 + SPYRE_KERNEL_MAX_RDIMS)
		put(o, "r%u", d - SPYRE_KDIM_R0);
	else if (d == SPYRE_KDIM_POINT)
		put(o, "point");
	else if (d == SPYRE_KDIM_RINDEX)
		put(o, "rindex");
	else
		put(o, "dim%u", d);
}

static void f32(struct out *o, uint32_t bits)
{
	float f;

	memcpy(&f, &bits, sizeof(f));
	if (isnan(f))
		put(o, "nan:0x%08" PRIx32, bits);
	else if (isinf(f))
		put(o, "%sinf", f < 0 ? "-" : "");
	else if (f == 0)
		put(o, "%s0", signbit(f) ? "-" : "");
	else
		put(o, "%.9g", (double)f);
}

static const char *const cmp_names[] = { "eq", "ne", "lt", "le", "gt", "ge" };

static void inst(struct out *o, const struct spyre_kinst *in)
{
	const struct kop_desc *d = spyre__kop(in->op);
	const char *tn = tname(in->type);

	switch (d->cls) {
	case KC_INVALID:
		put(o, ".inst op=0x%02x type=%u mod=0x%x dst=%u a=%u b=%u c=%u "
		    "imm=0x%" PRIx32, in->op, in->type, in->mod, in->dst,
		    in->a, in->b, in->c, in->imm);
		return;
	case KC_PASS:
	case KC_ENDPASS:
		put(o, "%s", d->name);
		return;
	case KC_CONST: {
		uint64_t u = (uint64_t)in->b | (uint64_t)in->c << 16 |
			     (uint64_t)in->imm << 32;

		put(o, "const.%s ", tn);
		if (in->type == SPYRE_KTYPE_F32)
			f32(o, (uint32_t)u);
		else if (in->type == SPYRE_KTYPE_I32)
			put(o, "%" PRId32, (int32_t)(uint32_t)u);
		else if (in->type == SPYRE_KTYPE_BOOL)
			put(o, "%s", u == 0 ? "false" : u == 1 ? "true" : "bool?");
		else
			put(o, "%" PRId64, (int64_t)u);
		return;
	}
	case KC_PARAM:
		put(o, "param.%s P%" PRIu32, tn, in->imm);
		return;
	case KC_IDX:
	case KC_SIZE:
		put(o, "%s.%s ", d->name, tn);
		dim(o, in->imm);
		return;
	case KC_AFFINE: {
		bool first = true;

		put(o, "affine.%s ", tn);
		if (in->a != SPYRE_KVAL_NONE) {
			val(o, in->a);
			if (!(in->mod & 0x1ff))
				return;
			put(o, " + ");
		} else if (!(in->mod & 0x1ff)) {
			put(o, "0");
			return;
		}
		put(o, "[");
		for (unsigned int i = 0; i < 9; i++) {
			if (!(in->mod & (1u << i)))
				continue;
			if (!first)
				put(o, " ");
			dim(o, i);
			first = false;
		}
		put(o, "] P%" PRIu32, in->imm);
		return;
	}
	case KC_CHECK:
		put(o, "check ");
		val(o, in->a);
		if (in->b != SPYRE_KVAL_NONE) {
			put(o, " if ");
			val(o, in->b);
		}
		return;
	case KC_LOAD:
	case KC_STORE:
		if (d->cls == KC_LOAD)
			put(o, "load.%s o%" PRIu32 "[", tn, in->imm);
		else
			put(o, "store o%" PRIu32 "[", in->imm);
		val(o, in->a);
		put(o, "]");
		if (d->cls == KC_STORE) {
			put(o, ", ");
			val(o, in->c);
		}
		if (in->b != SPYRE_KVAL_NONE) {
			put(o, " if ");
			val(o, in->b);
		}
		if (d->cls == KC_LOAD && in->c != SPYRE_KVAL_NONE) {
			put(o, " else ");
			val(o, in->c);
		}
		if (d->cls == KC_STORE && (in->mod & SPYRE_KMOD_SAT))
			put(o, " sat");
		return;
	case KC_CMP:
		put(o, "cmp.%s.%s ", in->mod < 6 ? cmp_names[in->mod] : "?", tn);
		val(o, in->a);
		put(o, ", ");
		val(o, in->b);
		return;
	case KC_CVT: {
		const char *dn = spyre__kdtype_name(in->mod & 0xff);

		put(o, "cvt.%s ", tn);
		val(o, in->a);
		if (in->mod & 0xff)
			put(o, " via %s", dn ? dn : "?");
		if (in->mod & SPYRE_KMOD_SAT)
			put(o, " sat");
		return;
	}
	case KC_REDUCE: {
		const char *kn = spyre__kred_name(in->mod & 0xff);

		put(o, "reduce.%s.%s ", kn ? kn : "?", tn);
		val(o, in->a);
		if (in->b != SPYRE_KVAL_NONE || in->c != SPYRE_KVAL_NONE) {
			put(o, ", ");
			val(o, in->b);
			put(o, ", ");
			val(o, in->c);
		}
		if (in->imm != SPYRE_KVAL_NONE) {
			put(o, " if ");
			val(o, (uint16_t)in->imm);
		}
		return;
	}
	case KC_SCATTER:
		put(o, "scatter.%s o%" PRIu32 "[",
		    (in->mod & 0xff) == SPYRE_KSCAT_ADD ? "add" :
		    (in->mod & 0xff) == SPYRE_KSCAT_STORE ? "store" : "?",
		    in->imm);
		val(o, in->a);
		put(o, "], ");
		val(o, in->c);
		if (in->b != SPYRE_KVAL_NONE) {
			put(o, " if ");
			val(o, in->b);
		}
		if (in->mod & SPYRE_KMOD_SAT)
			put(o, " sat");
		return;
	case KC_SCAN: {
		const char *kn = spyre__kred_name(in->mod & 0xff);

		put(o, "scan.%s.%s ", kn ? kn : "?", tn);
		val(o, in->a);
		if (in->imm != SPYRE_KVAL_NONE) {
			put(o, " if ");
			val(o, (uint16_t)in->imm);
		}
		return;
	}
	case KC_RAND:
		put(o, "rand.%s.%s ", in->mod == SPYRE_KRAND_BITS ? "bits" :
		    in->mod == SPYRE_KRAND_UNIFORM ? "uniform" :
		    in->mod == SPYRE_KRAND_NORMAL ? "normal" : "?", tn);
		val(o, in->a);
		put(o, ", ");
		val(o, in->b);
		put(o, ", ");
		val(o, in->c);
		return;
	default:	/* UN, BIN, TER, MINMAX, SELECT, BITCAST, PRED */
		put(o, "%s.%s ", d->name, tn);
		val(o, in->a);
		if (in->b != SPYRE_KVAL_NONE) {
			put(o, ", ");
			val(o, in->b);
		}
		if (in->c != SPYRE_KVAL_NONE) {
			put(o, ", ");
			val(o, in->c);
		}
		if (d->cls == KC_MINMAX && (in->mod & SPYRE_KMOD_IGNORE_NAN))
			put(o, " ignore_nan");
		return;
	}
}

SPYRE_API int spyre_kernel_disasm(const void *prog, size_t size, char *buf,
				  size_t len)
{
	struct spyre_kprog_header h;
	struct out o = { buf, len, 0 };
	unsigned int w, n;
	const uint8_t *p = prog;

	if (!prog || (!buf && len) || size < sizeof(h) ||
	    (size - sizeof(h)) % sizeof(struct spyre_kinst))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.magic != SPYRE_KPROG_MAGIC || h.version != SPYRE_KPROG_VERSION)
		return -EINVAL;
	n = (unsigned int)((size - sizeof(h)) / sizeof(struct spyre_kinst));
	if (len)
		buf[0] = 0;
	put(&o, ";");
	for (unsigned int i = 0; i < h.noperands && i < 32; i++) {
		const char *dn = spyre__kdtype_name(h.dtype[i]);

		put(&o, "%s o%u %s", i ? "," : "", i, dn ? dn : "?");
	}
	if (!h.noperands)
		put(&o, " no operands");
	put(&o, "\n; %u params, %u pointwise dims, %u reduction dims, "
	    "%u passes, %u values, %u instructions\n", h.nparams, h.npdims,
	    h.nrdims, h.npasses, h.nvalues, n);
	/* the width of the widest "%n" the program defines */
	w = 2;
	for (unsigned int top = 10; h.nvalues > top && w < 6; top *= 10)
		w++;
	for (unsigned int i = 0; i < n; i++) {
		struct spyre_kinst in;

		memcpy(&in, p + sizeof(h) + (size_t)i * sizeof(in), sizeof(in));
		if (spyre__kinst_ndefs(&in) && in.dst != SPYRE_KVAL_NONE) {
			char d[8];

			snprintf(d, sizeof(d), "%%%u", in.dst);
			put(&o, "%-*s = ", (int)w, d);
		} else {
			put(&o, "%*s", (int)w + 3, "");
		}
		inst(&o, &in);
		put(&o, "\n");
	}
	if (o.used > INT32_MAX)
		return -EOVERFLOW;
	return (int)o.used;
}

void spyre__kernel_dump(const void *prog, size_t size, uint64_t prog_va,
			const uint64_t *sizes, unsigned int npdims,
			unsigned int nrdims)
{
	const char *e = getenv("SPYRE_KERNEL_DUMP");
	bool to_stderr;
	char *text;
	FILE *f;
	int n;

	if (!e || !*e || !strcmp(e, "0"))
		return;
	to_stderr = !strcmp(e, "1") || !strcmp(e, "stderr");
	n = prog ? spyre_kernel_disasm(prog, size, NULL, 0) : -EINVAL;
	text = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (text)
		spyre_kernel_disasm(prog, size, text, (size_t)n + 1);
	f = to_stderr ? stderr : fopen(e, "ae");
	if (!f) {
		free(text);
		return;
	}
	fprintf(f, "; KERNEL prog 0x%" PRIx64 " (%zu bytes) size [", prog_va,
		size);
	for (unsigned int i = 0; i < npdims + nrdims; i++) {
		uint64_t s = sizes[i < npdims ? i : SPYRE_KDIM_R0 + i - npdims];

		if (i == npdims)
			fprintf(f, "] x [");
		else if (i)
			fprintf(f, " ");
		if (s >> 63)	/* from a parameter */
			fprintf(f, "P%" PRIu64, s & ~(UINT64_C(1) << 63));
		else
			fprintf(f, "%" PRIu64, s);
	}
	fprintf(f, "]");
	fprintf(f, "\n%s", text ? text : "; (program not readable)\n");
	if (!to_stderr)
		fclose(f);
	else
		fflush(f);
	free(text);
}
