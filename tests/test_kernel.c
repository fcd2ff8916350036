// SPDX-License-Identifier: MIT
/*
 * Host unit tests for kernel programs: the builder's encodings (byte-exact
 * against docs/spyre-hw.rst "Examples") and its refusals, the
 * disassembler on the doc's two examples, and the reference interpreter
 * (spyre_ref_kernel()) against hand-computed values: integer edge
 * values, conversions, NaN rules, reduction ties, NaN and the fixed
 * summation order, statuses and details; part 2's scatter order, scans
 * and Philox (the Random123 known answers, the word mapping, shape
 * independence).  No device needed.
 */
#include "kselftest_harness.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spyre/spyre.h>
#include <spyre/spyre_ref.h>

#define NONE SPYRE_KERNEL_NONE

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* The doc's fused pointwise example: out = silu(x + b) * s. */
static struct spyre_kernel *doc_example1(void)
{
	const uint32_t dt[] = { SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32,
				SPYRE_DTYPE_FP16 };
	struct spyre_kernel *k;
	int o, ob, x, b, s, sig, m;

	if (spyre_kernel_create(dt, 3, 4, 2, 0, &k))
		return NULL;
	o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, NONE, 0x3, 0);
	ob = spyre_kernel_affine(k, SPYRE_KTYPE_I64, NONE, 0x2, 2);
	x = spyre_kernel_load(k, 0, o, NONE, NONE);
	b = spyre_kernel_load(k, 1, ob, NONE, NONE);
	s = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, x, b, NONE);
	sig = spyre_kernel_op(k, SPYRE_KOP_SIGMOID, 0, s, NONE, NONE);
	m = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, s, sig, NONE);
	m = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, m,
			    spyre_kernel_param(k, SPYRE_KTYPE_F32, 3), NONE);
	spyre_kernel_store(k, 2, o, m, NONE, 0);
	return k;
}

/* The doc's one-kernel softmax over r0 of x [N, R] into y. */
static struct spyre_kernel *doc_softmax(uint32_t dtype)
{
	const uint32_t dt[] = { dtype, dtype };
	struct spyre_kernel *k;
	int row, o, x, amax, e, sum;

	if (spyre_kernel_create(dt, 2, 2, 1, 1, &k))
		return NULL;
	row = spyre_kernel_affine(k, SPYRE_KTYPE_I64, NONE, 0x1, 0);
	spyre_kernel_pass(k);
	o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, row, 1u << 6, 1);
	x = spyre_kernel_load(k, 0, o, NONE, NONE);
	amax = spyre_kernel_reduce(k, SPYRE_KRED_MAX, x, NONE, NONE, NONE);
	spyre_kernel_endpass(k);
	spyre_kernel_pass(k);
	o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, row, 1u << 6, 1);
	x = spyre_kernel_load(k, 0, o, NONE, NONE);
	x = spyre_kernel_op(k, SPYRE_KOP_SUB, 0, x, amax, NONE);
	e = spyre_kernel_op(k, SPYRE_KOP_EXP, 0, x, NONE, NONE);
	sum = spyre_kernel_reduce(k, SPYRE_KRED_SUM, e, NONE, NONE, NONE);
	spyre_kernel_endpass(k);
	spyre_kernel_pass(k);
	o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, row, 1u << 6, 1);
	x = spyre_kernel_load(k, 0, o, NONE, NONE);
	x = spyre_kernel_op(k, SPYRE_KOP_SUB, 0, x, amax, NONE);
	e = spyre_kernel_op(k, SPYRE_KOP_EXP, 0, x, NONE, NONE);
	e = spyre_kernel_op(k, SPYRE_KOP_DIV, 0, e, sum, NONE);
	spyre_kernel_store(k, 1, o, e, NONE, 0);
	spyre_kernel_endpass(k);
	return k;
}

TEST(builder_doc_example_bytes)
{
	static const uint8_t add4[16] = { 0x20, 0x04, 0x00, 0x00, 0x04, 0x00,
					  0x02, 0x00, 0x03, 0x00, 0xff, 0xff,
					  0x00, 0x00, 0x00, 0x00 };
	struct spyre_kernel *k = doc_example1();
	const struct spyre_kprog_header *h;
	const uint8_t *p;
	size_t size;
	const void *prog;

	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &prog, &size));
	ASSERT_EQ(64 + 16 * 10, size);
	p = prog;
	h = prog;
	EXPECT_EQ(0x53, p[0]);	/* "SPKP" */
	EXPECT_EQ(0x50, p[1]);
	EXPECT_EQ(0x4b, p[2]);
	EXPECT_EQ(0x50, p[3]);
	EXPECT_EQ(1, h->version);
	EXPECT_EQ(10, h->ninsts);
	EXPECT_EQ(9, h->nvalues);
	EXPECT_EQ(3, h->noperands);
	EXPECT_EQ(4, h->nparams);
	EXPECT_EQ(2, h->npdims);
	EXPECT_EQ(0, h->nrdims);
	EXPECT_EQ(0, h->npasses);
	EXPECT_EQ(SPYRE_DTYPE_FP16, h->dtype[0]);
	EXPECT_EQ(SPYRE_DTYPE_FP32, h->dtype[1]);
	EXPECT_EQ(0, h->dtype[3]);
	EXPECT_EQ(0, memcmp(p + 64 + 4 * 16, add4, 16));
	/* %0 = affine.i64 [p0 p1] P0: op 7, type 3, mod 3, dst 0, a NONE */
	EXPECT_EQ(0x07, p[64]);
	EXPECT_EQ(0x03, p[65]);
	EXPECT_EQ(0x03, p[66]);
	EXPECT_EQ(0xff, p[70]);
	/* the store: op 0x11, dst NONE, a %0, c %8, imm 2 */
	EXPECT_EQ(0x11, p[64 + 9 * 16]);
	EXPECT_EQ(0xff, p[64 + 9 * 16 + 4]);
	EXPECT_EQ(8, p[64 + 9 * 16 + 10]);
	EXPECT_EQ(2, p[64 + 9 * 16 + 12]);
	spyre_kernel_destroy(k);
}

TEST(disasm_doc_examples)
{
	static const char want1[] =
		"; o0 FP16, o1 FP32, o2 FP16\n"
		"; 4 params, 2 pointwise dims, 0 reduction dims, 0 passes, "
		"9 values, 10 instructions\n"
		"%0 = affine.i64 [p0 p1] P0\n"
		"%1 = affine.i64 [p1] P2\n"
		"%2 = load.f32 o0[%0]\n"
		"%3 = load.f32 o1[%1]\n"
		"%4 = add.f32 %2, %3\n"
		"%5 = sigmoid.f32 %4\n"
		"%6 = mul.f32 %4, %5\n"
		"%7 = param.f32 P3\n"
		"%8 = mul.f32 %6, %7\n"
		"     store o2[%0], %8\n";
	static const char want2[] =
		"; o0 FP16, o1 FP16\n"
		"; 2 params, 1 pointwise dims, 1 reduction dims, 3 passes, "
		"14 values, 21 instructions\n"
		"%0  = affine.i64 [p0] P0\n"
		"      pass\n"
		"%1  = affine.i64 %0 + [r0] P1\n"
		"%2  = load.f32 o0[%1]\n"
		"%3  = reduce.max.f32 %2\n"
		"      endpass\n"
		"      pass\n"
		"%4  = affine.i64 %0 + [r0] P1\n"
		"%5  = load.f32 o0[%4]\n"
		"%6  = sub.f32 %5, %3\n"
		"%7  = exp.f32 %6\n"
		"%8  = reduce.sum.f32 %7\n"
		"      endpass\n"
		"      pass\n"
		"%9  = affine.i64 %0 + [r0] P1\n"
		"%10 = load.f32 o0[%9]\n"
		"%11 = sub.f32 %10, %3\n"
		"%12 = exp.f32 %11\n"
		"%13 = div.f32 %12, %8\n"
		"      store o1[%9], %13\n"
		"      endpass\n";
	struct spyre_kernel *k1 = doc_example1(),
			    *k2 = doc_softmax(SPYRE_DTYPE_FP16);
	const void *p;
	size_t n;
	char buf[2048], tiny[8];

	ASSERT_NE(NULL, k1);
	ASSERT_NE(NULL, k2);
	ASSERT_EQ(0, spyre_kernel_finalize(k1, &p, &n));
	EXPECT_EQ((int)strlen(want1), spyre_kernel_disasm(p, n, buf,
							   sizeof(buf)));
	EXPECT_STREQ(want1, buf);
	/* truncated like snprintf, the length still the whole text's */
	EXPECT_EQ((int)strlen(want1), spyre_kernel_disasm(p, n, tiny,
							   sizeof(tiny)));
	EXPECT_EQ(7, strlen(tiny));
	EXPECT_EQ((int)strlen(want1), spyre_kernel_disasm(p, n, NULL, 0));
	EXPECT_EQ(-EINVAL, spyre_kernel_disasm(p, n - 1, buf, sizeof(buf)));
	EXPECT_EQ(-EINVAL, spyre_kernel_disasm(NULL, n, buf, sizeof(buf)));
	ASSERT_EQ(0, spyre_kernel_finalize(k2, &p, &n));
	EXPECT_EQ((int)strlen(want2), spyre_kernel_disasm(p, n, buf,
							   sizeof(buf)));
	EXPECT_STREQ(want2, buf);
	spyre_kernel_destroy(k1);
	spyre_kernel_destroy(k2);
}

TEST(disasm_other_forms_and_garbage)
{
	const uint32_t dt[] = { SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_INT32 };
	struct spyre_kernel *k;
	const void *p;
	size_t n;
	char buf[2048];
	uint8_t bad[64 + 16];
	int i, c, m, f;

	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 1, 1, 0, &k));
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I32, 0);
	c = spyre_kernel_const(k, SPYRE_KTYPE_I32, -3);
	m = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_LT, i, c, NONE);
	f = spyre_kernel_load(k, 0, i, m, spyre_kernel_const_f32(k, -0.0f));
	f = spyre_kernel_op(k, SPYRE_KOP_MAX, SPYRE_KMOD_IGNORE_NAN, f, f, NONE);
	spyre_kernel_store(k, 0, i, f, m, SPYRE_KMOD_SAT);
	spyre_kernel_store(k, 1, i, spyre_kernel_cvt(k, SPYRE_KTYPE_I32, f,
						      SPYRE_DTYPE_INT8, 0),
			   NONE, 0);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &p, &n));
	ASSERT_LT(0, spyre_kernel_disasm(p, n, buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, "%0 = idx.i32 p0\n"));
	EXPECT_NE(NULL, strstr(buf, "%1 = const.i32 -3\n"));
	EXPECT_NE(NULL, strstr(buf, "%2 = cmp.lt.bool %0, %1\n"));
	EXPECT_NE(NULL, strstr(buf, "%3 = const.f32 -0\n"));
	EXPECT_NE(NULL, strstr(buf, "%4 = load.f32 o0[%0] if %2 else %3\n"));
	EXPECT_NE(NULL, strstr(buf, "%5 = max.f32 %4, %4 ignore_nan\n"));
	EXPECT_NE(NULL, strstr(buf, "store o0[%0], %5 if %2 sat\n"));
	EXPECT_NE(NULL, strstr(buf, "%6 = cvt.i32 %5 via INT8\n"));
	spyre_kernel_destroy(k);

	/* any instruction bytes decode, unknown ones raw */
	memcpy(bad, p, 64);
	memset(bad, 0, sizeof(bad));
	memcpy(bad, "SPKP", 4);
	bad[4] = 1;
	memset(bad + 64, 0xee, 16);
	ASSERT_LT(0, spyre_kernel_disasm(bad, sizeof(bad), buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, ".inst op=0xee"));
	bad[0] = 'X';
	EXPECT_EQ(-EINVAL, spyre_kernel_disasm(bad, sizeof(bad), buf,
					       sizeof(buf)));
}

TEST(builder_refusals)
{
	const uint32_t dt[] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_INT32 };
	const uint32_t bad_dt[] = { 0 };
	struct spyre_kernel *k;
	const void *p;
	size_t n;
	int f, i, r;

	EXPECT_EQ(-EINVAL, spyre_kernel_create(dt, 33, 0, 0, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_create(dt, 2, 65, 0, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_create(dt, 2, 0, 7, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_create(dt, 2, 0, 0, 4, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_create(bad_dt, 1, 0, 0, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_create(NULL, 1, 0, 0, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_create(dt, 2, 0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, spyre_kernel_error(NULL));
	EXPECT_EQ(-EINVAL, spyre_kernel_op(NULL, SPYRE_KOP_ADD, 0, 0, 0, NONE));

	/* a type mismatch, then the error is sticky */
	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 2, 1, 0, &k));
	f = spyre_kernel_param(k, SPYRE_KTYPE_F32, 0);
	i = spyre_kernel_param(k, SPYRE_KTYPE_I32, 1);
	EXPECT_EQ(0, f);
	EXPECT_EQ(1, i);
	EXPECT_EQ(SPYRE_KTYPE_F32, spyre_kernel_type(k, f));
	EXPECT_EQ(-EINVAL, spyre_kernel_type(k, 2));
	EXPECT_EQ(SPYRE_KTYPE_I32, spyre_kernel_dtype_type(SPYRE_DTYPE_U8));
	EXPECT_EQ(SPYRE_KTYPE_I32, spyre_kernel_dtype_type(SPYRE_DTYPE_INT16));
	EXPECT_EQ(SPYRE_KTYPE_I64, spyre_kernel_dtype_type(SPYRE_DTYPE_INT64));
	EXPECT_EQ(SPYRE_KTYPE_BOOL, spyre_kernel_dtype_type(SPYRE_DTYPE_BOOL));
	EXPECT_EQ(SPYRE_KTYPE_F32, spyre_kernel_dtype_type(SPYRE_DTYPE_BF16));
	EXPECT_EQ(SPYRE_KTYPE_F32,
		  spyre_kernel_dtype_type(SPYRE_DTYPE_FP8_E5M2));
	EXPECT_EQ(SPYRE_KTYPE_NONE, spyre_kernel_dtype_type(0xff));
	EXPECT_EQ(-EINVAL, spyre_kernel_op(k, SPYRE_KOP_ADD, 0, f, i, NONE));
	EXPECT_EQ(-EINVAL, spyre_kernel_error(k));
	EXPECT_EQ(-EINVAL, spyre_kernel_param(k, SPYRE_KTYPE_F32, 0));
	EXPECT_EQ(-EINVAL, spyre_kernel_finalize(k, &p, &n));
	spyre_kernel_destroy(k);

#define REFUSE(expr, err) do {						\
		ASSERT_EQ(0, spyre_kernel_create(dt, 2, 2, 1, 1, &k));	\
		f = spyre_kernel_param(k, SPYRE_KTYPE_F32, 0);		\
		i = spyre_kernel_param(k, SPYRE_KTYPE_I32, 1);		\
		ASSERT_EQ(1, i);					\
		EXPECT_EQ(err, (expr)) TH_LOG("%s", #expr);		\
		EXPECT_EQ(err, spyre_kernel_error(k));			\
		spyre_kernel_destroy(k);				\
	} while (0)

	REFUSE(spyre_kernel_param(k, SPYRE_KTYPE_I64, 2), -EINVAL);
	REFUSE(spyre_kernel_param(k, 9, 0), -EINVAL);
	REFUSE(spyre_kernel_idx(k, SPYRE_KTYPE_F32, 0), -EINVAL);
	REFUSE(spyre_kernel_idx(k, SPYRE_KTYPE_I64, 1), -EINVAL);
	/* a reduction index outside a pass */
	REFUSE(spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0), -EINVAL);
	REFUSE(spyre_kernel_affine(k, SPYRE_KTYPE_I64, NONE, 1u << 6, 0),
	       -EINVAL);
	REFUSE(spyre_kernel_affine(k, SPYRE_KTYPE_I64, NONE, 0x1, 2), -EINVAL);
	REFUSE(spyre_kernel_affine(k, SPYRE_KTYPE_I64, f, 0x1, 0), -EINVAL);
	REFUSE(spyre_kernel_load(k, 2, i, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_load(k, 0, f, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_load(k, 0, i, i, NONE), -EINVAL);	/* mask */
	REFUSE(spyre_kernel_load(k, 0, i, NONE, i), -EINVAL);	/* other */
	REFUSE(spyre_kernel_store(k, 1, i, f, NONE, 0), -EINVAL);
	REFUSE(spyre_kernel_store(k, 0, i, f, NONE, SPYRE_KMOD_SAT), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_DIV, 0, i, i, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_ADD, 0, f, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_NEG, 0, f, f, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_SHL, 0, f, f, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_EXP, 0, i, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_CMP, 9, f, f, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_ADD, 1, f, f, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, 0x65, 0, f, NONE, NONE), -EINVAL);
	/* the math library: f32 sources, one or two */
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_SIN, 0, i, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_SIGN, 0, i, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_LGAMMA, 0, f, f, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_ATAN2, 0, f, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_HYPOT, 0, f, i, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_COPYSIGN, 1, f, f, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_LOAD, 0, i, NONE, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_ADD, 0, f, 7, NONE), -EINVAL);
	REFUSE(spyre_kernel_op(k, SPYRE_KOP_ADD, 0, f, -ENOMEM, NONE),
	       -ENOMEM);
	REFUSE(spyre_kernel_cvt(k, SPYRE_KTYPE_I32, f, SPYRE_DTYPE_FP16, 0),
	       -EINVAL);
	REFUSE(spyre_kernel_cvt(k, SPYRE_KTYPE_F32, f, SPYRE_DTYPE_FP16,
				SPYRE_KMOD_SAT), -EINVAL);
	REFUSE(spyre_kernel_bitcast(k, SPYRE_KTYPE_I64, f), -EINVAL);
	REFUSE(spyre_kernel_check(k, i, NONE), -EINVAL);
	REFUSE(spyre_kernel_reduce(k, SPYRE_KRED_SUM, f, NONE, NONE, NONE),
	       -EINVAL);			/* outside a pass */
	REFUSE(spyre_kernel_endpass(k), -EINVAL);
	REFUSE((spyre_kernel_pass(k), spyre_kernel_pass(k)), -EINVAL);
	REFUSE((spyre_kernel_pass(k), spyre_kernel_reduce(k, SPYRE_KRED_ANY,
							  f, NONE, NONE,
							  NONE)), -EINVAL);
	REFUSE((spyre_kernel_pass(k), spyre_kernel_reduce(k, 12, f, NONE,
							  NONE, NONE)),
	       -EINVAL);
	/* a reduction's result is not visible in its own pass */
	REFUSE((spyre_kernel_pass(k),
		r = spyre_kernel_reduce(k, SPYRE_KRED_SUM, f, NONE, NONE, NONE),
		spyre_kernel_op(k, SPYRE_KOP_ADD, 0, r, f, NONE)), -EINVAL);
	/* nor a pass's other values after it */
	REFUSE((spyre_kernel_pass(k),
		r = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, f, f, NONE),
		spyre_kernel_endpass(k),
		spyre_kernel_op(k, SPYRE_KOP_ADD, 0, r, f, NONE)), -EINVAL);
	/* nine passes */
	REFUSE(({ int e_ = 0; for (int j = 0; j < 9 && !e_; j++)
			e_ = spyre_kernel_pass(k) ?: spyre_kernel_endpass(k);
		  e_; }), -E2BIG);
	/* 33 reductions */
	REFUSE(({ int e_ = spyre_kernel_pass(k);
		  for (int j = 0; j < 33 && e_ >= 0; j++)
			e_ = spyre_kernel_reduce(k, SPYRE_KRED_SUM, f, NONE,
						 NONE, NONE);
		  e_; }), -E2BIG);
	/* 4097 instructions */
	REFUSE(({ int e_ = 0;
		  for (int j = 0; j < 4096 && e_ >= 0; j++)
			e_ = spyre_kernel_op(k, SPYRE_KOP_NEG, 0, f, NONE, NONE);
		  e_; }), -E2BIG);

	/* a pass in a pointwise kernel; a reduction kernel without one */
	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 0, 1, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_pass(k));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 0, 1, 1, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_finalize(k, &p, &n));
	EXPECT_EQ(0, spyre_kernel_error(k));	/* finalize is not sticky */
	EXPECT_EQ(0, spyre_kernel_pass(k));
	EXPECT_EQ(-EINVAL, spyre_kernel_finalize(k, &p, &n));	/* open */
	EXPECT_EQ(0, spyre_kernel_endpass(k));
	EXPECT_EQ(0, spyre_kernel_finalize(k, &p, &n));
	spyre_kernel_destroy(k);
}

/* ---- the reference interpreter ------------------------------------------ */

/*
 * A one-point kernel: r = @op(P0, P1, P2) of @type (sources given by
 * @nsrc), stored to operand 0 of @out_dtype.
 */
static uint64_t run_op(struct __test_metadata *_metadata, uint32_t op,
		       uint32_t mod, uint32_t type, int nsrc, uint64_t a,
		       uint64_t b, uint64_t c, uint32_t out_dtype)
{
	struct spyre_ref_kernel_operand o = { 0 };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	uint64_t params[3] = { a, b, c }, out = 0;
	struct spyre_kernel *k;
	int s[3], r, z;

	EXPECT_EQ(0, spyre_kernel_create(&out_dtype, 1, 3, 0, 0, &k));
	for (int i = 0; i < 3; i++)
		s[i] = i < nsrc ? spyre_kernel_param(k, op == SPYRE_KOP_SELECT &&
						     i == 0 ? SPYRE_KTYPE_BOOL :
						     type, (unsigned int)i) :
		       NONE;
	r = spyre_kernel_op(k, op, mod, s[0], s[1], s[2]);
	z = spyre_kernel_const(k, SPYRE_KTYPE_I64, 0);
	spyre_kernel_store(k, 0, z, r, NONE, 0);
	EXPECT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
	o.data = &out;
	o.extent = 1;
	o.dtype = out_dtype;
	l.noperands = 1;
	l.operands = &o;
	l.nparams = 3;
	l.params = params;
	EXPECT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OK, res.status);
	spyre_kernel_destroy(k);
	return out;
}

static int32_t i32op(struct __test_metadata *_metadata, uint32_t op,
		     int32_t a, int32_t b)
{
	return (int32_t)run_op(_metadata, op, 0, SPYRE_KTYPE_I32, 2,
			       (uint32_t)a, (uint32_t)b, 0, SPYRE_DTYPE_INT32);
}

static int64_t i64op(struct __test_metadata *_metadata, uint32_t op,
		     int64_t a, int64_t b)
{
	return (int64_t)run_op(_metadata, op, 0, SPYRE_KTYPE_I64, 2,
			       (uint64_t)a, (uint64_t)b, 0, SPYRE_DTYPE_INT64);
}

static uint32_t f32op(struct __test_metadata *_metadata, uint32_t op,
		      uint32_t mod, int nsrc, float a, float b, float c)
{
	return (uint32_t)run_op(_metadata, op, mod, SPYRE_KTYPE_F32, nsrc,
				fbits(a), fbits(b), fbits(c),
				SPYRE_DTYPE_FP32);
}

#define F(op, a, b) bitsf(f32op(_metadata, op, 0, 2, a, b, 0))
#define F1(op, a) bitsf(f32op(_metadata, op, 0, 1, a, 0, 0))

TEST(ref_integer_edge_values)
{
	const int32_t mn = INT32_MIN;
	const int64_t mn64 = INT64_MIN;

	EXPECT_EQ(-1, i32op(_metadata, SPYRE_KOP_TRUNCDIV, 7, 0));
	EXPECT_EQ(-1, i32op(_metadata, SPYRE_KOP_FLOORDIV, -7, 0));
	EXPECT_EQ(mn, i32op(_metadata, SPYRE_KOP_TRUNCDIV, mn, -1));
	EXPECT_EQ(mn, i32op(_metadata, SPYRE_KOP_FLOORDIV, mn, -1));
	EXPECT_EQ(mn64, i64op(_metadata, SPYRE_KOP_TRUNCDIV, mn64, -1));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_FMOD, mn, -1));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_REM, mn, -1));
	EXPECT_EQ(7, i32op(_metadata, SPYRE_KOP_FMOD, 7, 0));
	EXPECT_EQ(-7, i32op(_metadata, SPYRE_KOP_REM, -7, 0));
	EXPECT_EQ(-3, i32op(_metadata, SPYRE_KOP_TRUNCDIV, -7, 2));
	EXPECT_EQ(-4, i32op(_metadata, SPYRE_KOP_FLOORDIV, -7, 2));
	EXPECT_EQ(-1, i32op(_metadata, SPYRE_KOP_FMOD, -7, 2));
	EXPECT_EQ(1, i32op(_metadata, SPYRE_KOP_REM, -7, 2));
	EXPECT_EQ(-1, i32op(_metadata, SPYRE_KOP_REM, 7, -2));
	EXPECT_EQ(mn, i32op(_metadata, SPYRE_KOP_ADD, INT32_MAX, 1));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_MUL, 65536, 65536));
	EXPECT_EQ(mn, (int32_t)run_op(_metadata, SPYRE_KOP_ABS, 0,
				      SPYRE_KTYPE_I32, 1, (uint32_t)mn, 0, 0,
				      SPYRE_DTYPE_INT32));
	EXPECT_EQ(mn64, (int64_t)run_op(_metadata, SPYRE_KOP_NEG, 0,
					SPYRE_KTYPE_I64, 1, (uint64_t)mn64, 0,
					0, SPYRE_DTYPE_INT64));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_SHL, 1, 32));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_SHL, 1, -1));
	EXPECT_EQ(mn, i32op(_metadata, SPYRE_KOP_SHL, 1, 31));
	EXPECT_EQ(1LL << 40, i64op(_metadata, SPYRE_KOP_SHL, 1, 40));
	EXPECT_EQ(-1, i32op(_metadata, SPYRE_KOP_SHR, -8, 32));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_SHR, 8, -3));
	EXPECT_EQ(-2, i32op(_metadata, SPYRE_KOP_SHR, -8, 2));
	EXPECT_EQ(-1, i64op(_metadata, SPYRE_KOP_SHR, -8, 64));
	EXPECT_EQ(1, i32op(_metadata, SPYRE_KOP_POW, 1, -5));
	EXPECT_EQ(-1, i32op(_metadata, SPYRE_KOP_POW, -1, -5));
	EXPECT_EQ(1, i32op(_metadata, SPYRE_KOP_POW, -1, -4));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_POW, 2, -1));
	EXPECT_EQ(1024, i32op(_metadata, SPYRE_KOP_POW, 2, 10));
	EXPECT_EQ(0, i32op(_metadata, SPYRE_KOP_POW, 2, 32));	/* wraps */
	EXPECT_EQ(-3, i32op(_metadata, SPYRE_KOP_MIN, -3, 4));
	EXPECT_EQ(6, i32op(_metadata, SPYRE_KOP_XOR, 5, 3));
	/* FMA wraps, CLAMP is min(max(a, b), c) */
	EXPECT_EQ(1, (int32_t)run_op(_metadata, SPYRE_KOP_FMA, 0,
				     SPYRE_KTYPE_I32, 3, 65536, 32768,
				     (uint32_t)mn + 1, SPYRE_DTYPE_INT32));
	EXPECT_EQ(5, (int32_t)run_op(_metadata, SPYRE_KOP_CLAMP, 0,
				     SPYRE_KTYPE_I32, 3, 9, 0, 5,
				     SPYRE_DTYPE_INT32));
	/* a store keeps the narrow type's bits */
	EXPECT_EQ(0x80, run_op(_metadata, SPYRE_KOP_ADD, 0, SPYRE_KTYPE_I32, 2,
			       127, 1, 0, SPYRE_DTYPE_INT8));
	EXPECT_EQ(0x1234, run_op(_metadata, SPYRE_KOP_ADD, 0, SPYRE_KTYPE_I32,
				 2, 0x71234, 0, 0, SPYRE_DTYPE_INT16));
	EXPECT_EQ(1, run_op(_metadata, SPYRE_KOP_ADD, 0, SPYRE_KTYPE_I32, 2, 2,
			    -1, 0, SPYRE_DTYPE_U8) == 1);
}

TEST(ref_float_rules)
{
	const float inf = INFINITY;

	/* canonical NaN from arithmetic, whatever the input NaN */
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_ADD, 0, 2,
				     bitsf(0xffc01234u), 1, 0));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_SUB, 0, 2, inf, inf,
				     0));
	/* NEG and ABS are bit operations */
	EXPECT_EQ(0x7fc01234u, f32op(_metadata, SPYRE_KOP_NEG, 0, 1,
				     bitsf(0xffc01234u), 0, 0));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_NEG, 0, 1, 0, 0, 0));
	/* MIN/MAX: NaN wins, -0 below +0; IGNORE_NAN gives the other */
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_MAX, 0, 2, 1, NAN, 0));
	EXPECT_EQ(fbits(1), f32op(_metadata, SPYRE_KOP_MAX,
				  SPYRE_KMOD_IGNORE_NAN, 2, 1, NAN, 0));
	EXPECT_EQ(fbits(1), f32op(_metadata, SPYRE_KOP_MIN,
				  SPYRE_KMOD_IGNORE_NAN, 2, NAN, 1, 0));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_MIN, 0, 2, 0.0f,
				     -0.0f, 0));
	EXPECT_EQ(0x00000000u, f32op(_metadata, SPYRE_KOP_MAX, 0, 2, -0.0f,
				     0.0f, 0));
	/* PyTorch's floor division and remainder */
	EXPECT_EQ(-4.0f, F(SPYRE_KOP_FLOORDIV, -7, 2));
	EXPECT_EQ(3.0f, F(SPYRE_KOP_FLOORDIV, 7, 2));
	EXPECT_EQ(-1.0f, F(SPYRE_KOP_FLOORDIV, -0.5f, 2));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_FLOORDIV, 0, 2,
				     -0.0f, 2, 0));	/* -0 */
	EXPECT_EQ(-1.0f, F(SPYRE_KOP_FLOORDIV, 0.5f, -2));
	EXPECT_EQ(-inf, F(SPYRE_KOP_FLOORDIV, -1, 0));
	EXPECT_EQ(-3.0f, F(SPYRE_KOP_TRUNCDIV, -7, 2));
	EXPECT_EQ(1.0f, F(SPYRE_KOP_REM, -7, 2));
	EXPECT_EQ(-1.0f, F(SPYRE_KOP_FMOD, -7, 2));
	EXPECT_EQ(-1.0f, F(SPYRE_KOP_REM, 7, -2));
	EXPECT_EQ(inf, F(SPYRE_KOP_REM, -1, inf));
	/* POW's C99 cases */
	EXPECT_EQ(1.0f, F(SPYRE_KOP_POW, NAN, 0));
	EXPECT_EQ(1.0f, F(SPYRE_KOP_POW, 1, NAN));
	EXPECT_TRUE(isnan(F(SPYRE_KOP_POW, -8, 1.0f / 3)));
	EXPECT_EQ(-8.0f, F(SPYRE_KOP_POW, -2, 3));
	/* math limits */
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_EXP, -inf));
	EXPECT_EQ(-1.0f, F1(SPYRE_KOP_TANH, -inf));
	EXPECT_EQ(1.0f, F1(SPYRE_KOP_ERF, inf));
	EXPECT_EQ(-inf, F1(SPYRE_KOP_LOG, 0));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_LOG, 0, 1, -1, 0, 0));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_SQRT, 0, 1, -0.0f, 0,
				     0));
	EXPECT_EQ(-inf, F1(SPYRE_KOP_RSQRT, -0.0f));
	EXPECT_EQ(inf, F1(SPYRE_KOP_RSQRT, 0.0f));
	EXPECT_EQ(0.5f, F1(SPYRE_KOP_SIGMOID, 0));
	EXPECT_EQ(2.0f, F1(SPYRE_KOP_ROUND, 2.5f));	/* half to even */
	EXPECT_EQ(-2.0f, F1(SPYRE_KOP_ROUND, -1.5f));
	EXPECT_EQ(-1.0f, F1(SPYRE_KOP_FLOOR, -0.5f));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_CEIL, 0, 1, -0.5f, 0,
				     0));
	/* FMA rounds once: (1 + 2^-23) * (1 - 2^-23) - 1 = -2^-46 */
	EXPECT_EQ(-ldexpf(1, -46), bitsf(f32op(_metadata, SPYRE_KOP_FMA, 0, 3,
					       1 + ldexpf(1, -23),
					       1 - ldexpf(1, -23), -1)));
	/* subnormals kept */
	EXPECT_EQ(ldexpf(1, -149), F(SPYRE_KOP_MUL, ldexpf(1, -75),
				     ldexpf(1, -74)));
	/* CMP: NaN unequal to everything */
	EXPECT_EQ(1, run_op(_metadata, SPYRE_KOP_CMP, SPYRE_KCMP_NE,
			    SPYRE_KTYPE_F32, 2, fbits(NAN), fbits(NAN), 0,
			    SPYRE_DTYPE_BOOL));
	EXPECT_EQ(0, run_op(_metadata, SPYRE_KOP_CMP, SPYRE_KCMP_LE,
			    SPYRE_KTYPE_F32, 2, fbits(NAN), fbits(1), 0,
			    SPYRE_DTYPE_BOOL));
	EXPECT_EQ(1, run_op(_metadata, SPYRE_KOP_ISINF, 0, SPYRE_KTYPE_F32, 1,
			    fbits(-inf), 0, 0, SPYRE_DTYPE_BOOL));
	/* SELECT */
	EXPECT_EQ(fbits(3), run_op(_metadata, SPYRE_KOP_SELECT, 0,
				   SPYRE_KTYPE_F32, 3, 0, fbits(2), fbits(3),
				   SPYRE_DTYPE_FP32));
}

/*
 * The math library's special values (C99 Annex F and PyTorch's CPU
 * kernels), exact where the value is exact, and a few plain values
 * within the contract's bounds.
 */
TEST(ref_math_library)
{
	const float inf = INFINITY, pi = 3.14159265f;

	EXPECT_EQ(8.0f, F1(SPYRE_KOP_EXP2, 3));
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_EXP2, -inf));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_EXPM1, 0, 1, -0.0f,
				     0, 0));
	EXPECT_EQ(-1.0f, F1(SPYRE_KOP_EXPM1, -inf));
	EXPECT_EQ(3.0f, F1(SPYRE_KOP_LOG2, 8));
	EXPECT_EQ(3.0f, F1(SPYRE_KOP_LOG10, 1000));
	EXPECT_EQ(-inf, F1(SPYRE_KOP_LOG1P, -1));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_LOG1P, 0, 1, -2, 0,
				     0));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_SIN, 0, 1, -0.0f, 0,
				     0));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_COS, 0, 1, inf, 0,
				     0));
	EXPECT_EQ(1.0f, F1(SPYRE_KOP_COS, 0));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_TAN, 0, 1, -0.0f, 0,
				     0));
	EXPECT_EQ(pi / 2, F1(SPYRE_KOP_ASIN, 1));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_ASIN, 0, 1, 1.5f, 0,
				     0));
	EXPECT_EQ(pi, F1(SPYRE_KOP_ACOS, -1));
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_ACOS, 1));
	EXPECT_EQ(-pi / 2, F1(SPYRE_KOP_ATAN, -inf));
	/* atan2's signed zeros and infinities */
	EXPECT_EQ(pi, F(SPYRE_KOP_ATAN2, 0.0f, -0.0f));
	EXPECT_EQ(-pi, F(SPYRE_KOP_ATAN2, -0.0f, -1));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_ATAN2, 0, 2, -0.0f,
				     0.0f, 0));
	EXPECT_EQ(3 * pi / 4, F(SPYRE_KOP_ATAN2, inf, -inf));
	EXPECT_EQ(pi / 2, F(SPYRE_KOP_ATAN2, 1, 0));
	EXPECT_EQ(-inf, F1(SPYRE_KOP_SINH, -inf));
	EXPECT_EQ(inf, F1(SPYRE_KOP_COSH, -inf));
	EXPECT_EQ(1.0f, F1(SPYRE_KOP_COSH, 0));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_ASINH, 0, 1, -0.0f,
				     0, 0));
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_ACOSH, 1));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_ACOSH, 0, 1, 0.5f, 0,
				     0));
	EXPECT_EQ(inf, F1(SPYRE_KOP_ATANH, 1));
	EXPECT_EQ(-inf, F1(SPYRE_KOP_ATANH, -1));
	EXPECT_EQ(2.0f, F1(SPYRE_KOP_ERFC, -inf));
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_ERFC, inf));
	EXPECT_EQ(1.0f, F1(SPYRE_KOP_ERFC, 0));
	EXPECT_EQ(inf, F1(SPYRE_KOP_ERFINV, 1));
	EXPECT_EQ(-inf, F1(SPYRE_KOP_ERFINV, -1));
	EXPECT_EQ(0x80000000u, f32op(_metadata, SPYRE_KOP_ERFINV, 0, 1, -0.0f,
				     0, 0));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_ERFINV, 0, 1, 2, 0,
				     0));
	/* erfinv(1/2) = 0.4769362762..., erfinv(erf(1)) = 1 */
	EXPECT_LE(fabsf(F1(SPYRE_KOP_ERFINV, 0.5f) - 0.476936276f), 6e-8f);
	EXPECT_LE(fabsf(F1(SPYRE_KOP_ERFINV, 0.842700793f) - 1), 2.4e-7f);
	/* PyTorch's sign: (0 < a) - (a < 0), so NaN and -0 give +0 */
	EXPECT_EQ(0x00000000u, f32op(_metadata, SPYRE_KOP_SIGN, 0, 1, NAN, 0,
				     0));
	EXPECT_EQ(0x00000000u, f32op(_metadata, SPYRE_KOP_SIGN, 0, 1, -0.0f, 0,
				     0));
	EXPECT_EQ(-1.0f, F1(SPYRE_KOP_SIGN, -inf));
	EXPECT_EQ(1.0f, F1(SPYRE_KOP_SIGN, 1e-45f));
	EXPECT_EQ(-1.0f, F(SPYRE_KOP_COPYSIGN, 1, -0.0f));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_COPYSIGN, 0, 2, NAN,
				     -1, 0));
	EXPECT_EQ(inf, F(SPYRE_KOP_HYPOT, NAN, -inf));
	EXPECT_EQ(5.0f, F(SPYRE_KOP_HYPOT, -3, 4));
	EXPECT_EQ(0x7fc00000u, f32op(_metadata, SPYRE_KOP_HYPOT, 0, 2, NAN, 1,
				     0));
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_LGAMMA, 1));
	EXPECT_EQ(0.0f, F1(SPYRE_KOP_LGAMMA, 2));
	EXPECT_EQ(inf, F1(SPYRE_KOP_LGAMMA, 0));
	EXPECT_EQ(inf, F1(SPYRE_KOP_LGAMMA, -3));
	EXPECT_EQ(inf, F1(SPYRE_KOP_LGAMMA, -inf));
	/* lgamma(1/2) = log(sqrt(pi)), lgamma(-1/2) = log(2 sqrt(pi)) */
	EXPECT_EQ(0.572364943f, F1(SPYRE_KOP_LGAMMA, 0.5f));
	EXPECT_EQ(1.26551212f, F1(SPYRE_KOP_LGAMMA, -0.5f));
}

/* The disassembler names every math opcode. */
TEST(disasm_math_library)
{
	static const uint32_t un[] = {
		SPYRE_KOP_EXP2, SPYRE_KOP_EXPM1, SPYRE_KOP_LOG2,
		SPYRE_KOP_LOG10, SPYRE_KOP_LOG1P, SPYRE_KOP_SIN, SPYRE_KOP_COS,
		SPYRE_KOP_TAN, SPYRE_KOP_ASIN, SPYRE_KOP_ACOS, SPYRE_KOP_ATAN,
		SPYRE_KOP_SINH, SPYRE_KOP_COSH, SPYRE_KOP_ASINH,
		SPYRE_KOP_ACOSH, SPYRE_KOP_ATANH, SPYRE_KOP_ERFC,
		SPYRE_KOP_ERFINV, SPYRE_KOP_SIGN, SPYRE_KOP_LGAMMA,
	};
	static const char *const want[] = {
		"%1 = exp2.f32 %0\n", "%2 = expm1.f32 %0\n",
		"%3 = log2.f32 %0\n", "%4 = log10.f32 %0\n",
		"%5 = log1p.f32 %0\n", "%6 = sin.f32 %0\n",
		"%7 = cos.f32 %0\n", "%8 = tan.f32 %0\n",
		"%9 = asin.f32 %0\n", "%10 = acos.f32 %0\n",
		"%11 = atan.f32 %0\n", "%12 = sinh.f32 %0\n",
		"%13 = cosh.f32 %0\n", "%14 = asinh.f32 %0\n",
		"%15 = acosh.f32 %0\n", "%16 = atanh.f32 %0\n",
		"%17 = erfc.f32 %0\n", "%18 = erfinv.f32 %0\n",
		"%19 = sign.f32 %0\n", "%20 = lgamma.f32 %0\n",
		"%21 = atan2.f32 %0, %1\n", "%22 = copysign.f32 %0, %1\n",
		"%23 = hypot.f32 %0, %1\n",
	};
	const uint32_t dt = SPYRE_DTYPE_FP32;
	struct spyre_kernel *k;
	char buf[4096], line[64], *at;
	const void *p;
	size_t n, i;
	int x, r;

	ASSERT_EQ(0, spyre_kernel_create(&dt, 1, 1, 0, 0, &k));
	x = spyre_kernel_param(k, SPYRE_KTYPE_F32, 0);
	for (i = 0; i < sizeof(un) / sizeof(un[0]); i++)
		ASSERT_LT(0, spyre_kernel_op(k, un[i], 0, x, NONE, NONE));
	ASSERT_LT(0, spyre_kernel_op(k, SPYRE_KOP_ATAN2, 0, x, 1, NONE));
	ASSERT_LT(0, spyre_kernel_op(k, SPYRE_KOP_COPYSIGN, 0, x, 1, NONE));
	r = spyre_kernel_op(k, SPYRE_KOP_HYPOT, 0, x, 1, NONE);
	ASSERT_LT(0, r);
	spyre_kernel_store(k, 0, spyre_kernel_const(k, SPYRE_KTYPE_I64, 0), r,
			   NONE, 0);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &p, &n));
	ASSERT_LT(0, spyre_kernel_disasm(p, n, buf, sizeof(buf)));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		/* the value column is padded to the widest name, "%24" */
		snprintf(line, sizeof(line), "%s", want[i]);
		at = strchr(line, ' ');
		*at = 0;
		at = strstr(buf, line);
		ASSERT_NE(NULL, at) TH_LOG("%s", want[i]);
		EXPECT_EQ(0, strncmp(strchr(at, '='), strchr(want[i], '='),
				     strlen(strchr(want[i], '='))))
			TH_LOG("%s", want[i]);
	}
	spyre_kernel_destroy(k);
}

/* CVT from a parameter of @from to @to (via @via), stored as @out. */
static uint64_t run_cvt(struct __test_metadata *_metadata, uint32_t from,
			uint32_t to, uint32_t via, uint32_t flags, uint64_t a,
			uint32_t out_dtype, uint32_t store_flags)
{
	struct spyre_ref_kernel_operand o = { 0 };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	struct spyre_kernel *k;
	uint64_t out = 0;
	int r;

	EXPECT_EQ(0, spyre_kernel_create(&out_dtype, 1, 1, 0, 0, &k));
	r = spyre_kernel_cvt(k, to, spyre_kernel_param(k, from, 0), via, flags);
	spyre_kernel_store(k, 0, spyre_kernel_const(k, SPYRE_KTYPE_I32, 0), r,
			   NONE, store_flags);
	EXPECT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
	o.data = &out;
	o.extent = 1;
	o.dtype = out_dtype;
	l.noperands = 1;
	l.operands = &o;
	l.nparams = 1;
	l.params = &a;
	EXPECT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OK, res.status);
	spyre_kernel_destroy(k);
	return out;
}

TEST(ref_conversions)
{
	const uint32_t F32 = SPYRE_KTYPE_F32, I32 = SPYRE_KTYPE_I32,
		       I64 = SPYRE_KTYPE_I64, B = SPYRE_KTYPE_BOOL;

#define CV(from, to, via, fl, a, out) \
	run_cvt(_metadata, from, to, via, fl, a, out, 0)
	/* f32 to int: truncation; NaN, inf, out of range: MIN */
	EXPECT_EQ((uint32_t)-2, CV(F32, I32, 0, 0, fbits(-2.9f),
				   SPYRE_DTYPE_INT32));
	EXPECT_EQ(0x80000000u, CV(F32, I32, 0, 0, fbits(NAN),
				  SPYRE_DTYPE_INT32));
	EXPECT_EQ(0x80000000u, CV(F32, I32, 0, 0, fbits(3e9f),
				  SPYRE_DTYPE_INT32));
	EXPECT_EQ(0x80000000u, CV(F32, I32, 0, 0, fbits(-INFINITY),
				  SPYRE_DTYPE_INT32));
	EXPECT_EQ(1ull << 63, CV(F32, I64, 0, 0, fbits(1e19f),
				 SPYRE_DTYPE_INT64));
	EXPECT_EQ(3000000000ull, CV(F32, I64, 0, 0, fbits(3e9f),
				    SPYRE_DTYPE_INT64));
	/* through INT8: truncate to i32, keep bits 7:0, sign-extend */
	EXPECT_EQ((uint32_t)-56, CV(F32, I32, SPYRE_DTYPE_INT8, 0,
				    fbits(200.7f), SPYRE_DTYPE_INT32));
	EXPECT_EQ(200, CV(I32, I32, SPYRE_DTYPE_U8, 0, (uint32_t)-56,
			  SPYRE_DTYPE_INT32));
	EXPECT_EQ((uint32_t)-32768, CV(I32, I32, SPYRE_DTYPE_INT16, 0, 32768,
				       SPYRE_DTYPE_INT32));
	/* i64 to i32 keeps bits 31:0; i32 to i64 sign-extends */
	EXPECT_EQ(0x89abcdefu, CV(I64, I32, 0, 0, 0x0123456789abcdefull,
				  SPYRE_DTYPE_INT32));
	EXPECT_EQ(~0ull, CV(I32, I64, 0, 0, 0xffffffffu, SPYRE_DTYPE_INT64));
	/* int to f32 rounds to nearest even */
	EXPECT_EQ(fbits(16777216.0f), CV(I32, F32, 0, 0, 16777217,
					 SPYRE_DTYPE_FP32));
	EXPECT_EQ(fbits(16777220.0f), CV(I32, F32, 0, 0, 16777219,
					 SPYRE_DTYPE_FP32));
	/* bool rules: NaN is true, -0 false */
	EXPECT_EQ(1, CV(F32, B, 0, 0, fbits(NAN), SPYRE_DTYPE_BOOL));
	EXPECT_EQ(0, CV(F32, B, 0, 0, fbits(-0.0f), SPYRE_DTYPE_BOOL));
	EXPECT_EQ(fbits(1.0f), CV(B, F32, 0, 0, 7, SPYRE_DTYPE_FP32));
	/* through FP16 rounds (once more is no change) */
	EXPECT_EQ(fbits(1.0f), CV(F32, F32, SPYRE_DTYPE_FP16, 0,
				  fbits(1.0f + ldexpf(1, -12)),
				  SPYRE_DTYPE_FP32));
	/* fp8 stores: no saturation unless SAT */
	EXPECT_EQ(0x7f, run_cvt(_metadata, F32, F32, 0, 0, fbits(500.0f),
				SPYRE_DTYPE_FP8_E4M3, 0));
	EXPECT_EQ(0x7e, run_cvt(_metadata, F32, F32, 0, 0, fbits(500.0f),
				SPYRE_DTYPE_FP8_E4M3, SPYRE_KMOD_SAT));
	EXPECT_EQ(0x7e, run_cvt(_metadata, F32, F32, 0, 0, fbits(464.0f),
				SPYRE_DTYPE_FP8_E4M3, 0));
	EXPECT_EQ(0x7c, run_cvt(_metadata, F32, F32, 0, 0, fbits(61440.0f),
				SPYRE_DTYPE_FP8_E5M2, 0));
	EXPECT_EQ(0x7b, run_cvt(_metadata, F32, F32, 0, 0, fbits(61440.0f),
				SPYRE_DTYPE_FP8_E5M2, SPYRE_KMOD_SAT));
	EXPECT_EQ(0xfb, run_cvt(_metadata, F32, F32, 0, 0, fbits(-INFINITY),
				SPYRE_DTYPE_FP8_E5M2, SPYRE_KMOD_SAT));
	EXPECT_EQ(0x7c00, run_cvt(_metadata, F32, F32, 0, 0, fbits(65520.0f),
				  SPYRE_DTYPE_FP16, 0));
	/* CVT through E4M3 with SAT */
	EXPECT_EQ(fbits(448.0f), CV(F32, F32, SPYRE_DTYPE_FP8_E4M3,
				    SPYRE_KMOD_SAT, fbits(1000.0f),
				    SPYRE_DTYPE_FP32));
	EXPECT_EQ(0x7fc00000u, CV(F32, F32, SPYRE_DTYPE_FP8_E4M3, 0,
				  fbits(1000.0f), SPYRE_DTYPE_FP32));
	/* bitcast */
	{
		struct spyre_ref_kernel_operand o = { 0 };
		struct spyre_ref_kernel_launch l = { 0 };
		struct spyre_ref_kernel_result res;
		struct spyre_kernel *k;
		uint32_t dt = SPYRE_DTYPE_INT32, out = 0;
		uint64_t a = fbits(-1.5f);

		ASSERT_EQ(0, spyre_kernel_create(&dt, 1, 1, 0, 0, &k));
		spyre_kernel_store(k, 0, spyre_kernel_const(k, I32, 0),
				   spyre_kernel_bitcast(k, I32,
					spyre_kernel_param(k, F32, 0)),
				   NONE, 0);
		ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
		o.data = &out;
		o.extent = 1;
		o.dtype = dt;
		l.noperands = 1;
		l.operands = &o;
		l.nparams = 1;
		l.params = &a;
		ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
		EXPECT_EQ(fbits(-1.5f), out);
		spyre_kernel_destroy(k);
	}
#undef CV
}

/*
 * A reduction kernel: out[0] = REDUCE @kind over r0 < @n of x[r0] (FP32 or
 * INT32 @dtype), the result of type @rtype stored to @out_dtype;
 * WELFORD's three results to out[0..2].
 */
static int run_reduce(struct __test_metadata *_metadata, uint32_t kind,
		      uint32_t dtype, const void *x, uint64_t n,
		      uint32_t out_dtype, void *out, uint64_t out_extent)
{
	const uint32_t dt[2] = { dtype, out_dtype };
	struct spyre_ref_kernel_operand o[2] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	struct spyre_kernel *k;
	int r, v, z;

	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 0, 0, 1, &k)) return -1;
	spyre_kernel_pass(k);
	v = spyre_kernel_load(k, 0, spyre_kernel_idx(k, SPYRE_KTYPE_I64,
						     SPYRE_KDIM_R0),
			      NONE, NONE);
	if (kind == SPYRE_KRED_ANY || kind == SPYRE_KRED_ALL)
		v = spyre_kernel_cvt(k, SPYRE_KTYPE_BOOL, v, 0, 0);
	r = spyre_kernel_reduce(k, kind, v, NONE, NONE, NONE);
	spyre_kernel_endpass(k);
	z = spyre_kernel_const(k, SPYRE_KTYPE_I64, 0);
	if (kind == SPYRE_KRED_WELFORD) {
		spyre_kernel_store(k, 1, z, r, NONE, 0);
		spyre_kernel_store(k, 1, spyre_kernel_const(k, SPYRE_KTYPE_I64,
							    1), r + 1, NONE, 0);
		spyre_kernel_store(k, 1, spyre_kernel_const(k, SPYRE_KTYPE_I64,
							    2), r + 2, NONE, 0);
	} else {
		spyre_kernel_store(k, 1, z, r, NONE, 0);
	}
	ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size))
		return -1;
	o[0].data = (void *)x;
	o[0].extent = n;
	o[0].dtype = dtype;
	o[1].data = out;
	o[1].extent = out_extent;
	o[1].dtype = out_dtype;
	l.noperands = 2;
	l.operands = o;
	l.nrdims = 1;
	l.size[6] = n;
	EXPECT_EQ(0, spyre_ref_kernel(&l, &res));
	spyre_kernel_destroy(k);
	return (int)res.status;
}

TEST(ref_reductions_fixed_order)
{
	static float x[3072];
	float out = -1;
	int64_t idx = -1;

	/* one block: the 16 stripes meet in the pairwise tree */
	for (int i = 0; i < 16; i++)
		x[i] = 1;
	x[0] = 16777216.0f;
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_FP32, x,
				16, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_EQ(16777230.0f, out);	/* a sequential sum gives 2^24 */
	/* three blocks: 2^24 + 960, then 1024 and 1024 */
	for (int i = 0; i < 3072; i++)
		x[i] = 1;
	x[0] = 16777216.0f;
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_FP32, x,
				3072, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_EQ(16780224.0f, out);
	/* sums of -0 are +0; empty reductions give their identity */
	x[0] = -0.0f;
	x[1] = -0.0f;
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_FP32, x,
				2, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_EQ(0u, fbits(out));
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_MAX, SPYRE_DTYPE_FP32, x,
				0, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_EQ(-INFINITY, out);
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_PROD, SPYRE_DTYPE_FP32, x,
				0, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_EQ(1.0f, out);
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ARGMAX, SPYRE_DTYPE_FP32,
				x, 0, SPYRE_DTYPE_INT64, &idx, 1));
	EXPECT_EQ(0, idx);
}

TEST(ref_reductions_ties_and_nan)
{
	const float a[] = { 1, 3, 3, NAN, 2, NAN, -5, -5 };
	const float b[] = { 2, 1, 1, -0.0f, 0.0f, 7 };
	const int32_t c[] = { 4, -9, 4, -9, INT32_MAX, 0 };
	float out, w[3];
	int64_t idx;
	int32_t iout;
	uint8_t bout;

	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ARGMAX, SPYRE_DTYPE_FP32,
				a, 8, SPYRE_DTYPE_INT64, &idx, 1));
	EXPECT_EQ(3, idx);		/* the first NaN */
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ARGMAX, SPYRE_DTYPE_FP32,
				a, 3, SPYRE_DTYPE_INT64, &idx, 1));
	EXPECT_EQ(1, idx);		/* the first of equal maxima */
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ARGMIN, SPYRE_DTYPE_FP32,
				a, 8, SPYRE_DTYPE_INT64, &idx, 1));
	EXPECT_EQ(3, idx);		/* NaN below every number */
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ARGMIN, SPYRE_DTYPE_FP32,
				b, 6, SPYRE_DTYPE_INT64, &idx, 1));
	EXPECT_EQ(3, idx);		/* -0 == +0 < 1: the first zero */
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ARGMIN, SPYRE_DTYPE_INT32,
				c, 6, SPYRE_DTYPE_INT64, &idx, 1));
	EXPECT_EQ(1, idx);
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_MAX, SPYRE_DTYPE_FP32, a,
				8, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_TRUE(isnan(out));
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_MIN, SPYRE_DTYPE_FP32, b,
				6, SPYRE_DTYPE_FP32, &out, 1));
	EXPECT_EQ(0x80000000u, fbits(out));
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_INT32, c,
				6, SPYRE_DTYPE_INT32, &iout, 1));
	EXPECT_EQ(INT32_MAX - 10, iout);	/* wraps */
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_XOR_SUM,
				SPYRE_DTYPE_INT32, c, 4, SPYRE_DTYPE_INT32,
				&iout, 1));
	EXPECT_EQ(0, iout);
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ALL, SPYRE_DTYPE_INT32, c,
				6, SPYRE_DTYPE_BOOL, &bout, 1));
	EXPECT_EQ(0, bout);
	ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_ANY, SPYRE_DTYPE_INT32, c,
				6, SPYRE_DTYPE_BOOL, &bout, 1));
	EXPECT_EQ(1, bout);
	/* Welford of 1, 2, 3, 4: stripes of one element, then the tree */
	{
		const float v[] = { 1, 2, 3, 4 };

		ASSERT_EQ(0, run_reduce(_metadata, SPYRE_KRED_WELFORD,
					SPYRE_DTYPE_FP32, v, 4,
					SPYRE_DTYPE_FP32, w, 3));
		EXPECT_EQ(2.5f, w[0]);
		EXPECT_EQ(5.0f, w[1]);
		EXPECT_EQ(4.0f, w[2]);
	}
}

TEST(ref_softmax_and_example1_values)
{
	struct spyre_kernel *k = doc_softmax(SPYRE_DTYPE_FP32);
	struct spyre_ref_kernel_operand o[3] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	float x[2 * 5] = { 0, 1, 2, 3, 4, -1, -1, -1, -1, -1 }, y[10];
	uint64_t params[4] = { 5, 1 };
	double sum = 0;

	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
	o[0] = (struct spyre_ref_kernel_operand){ x, 10, SPYRE_DTYPE_FP32, 0 };
	o[1] = (struct spyre_ref_kernel_operand){ y, 10, SPYRE_DTYPE_FP32, 0 };
	l.noperands = 2;
	l.operands = o;
	l.nparams = 2;
	l.params = params;
	l.npdims = 1;
	l.nrdims = 1;
	l.size[0] = 2;
	l.size[6] = SPYRE_KSIZE_PARAM(0);	/* R from P0 */
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	ASSERT_EQ(SPYRE_STATUS_OK, res.status);
	for (int i = 0; i < 5; i++)
		sum += exp(i - 4.0);
	for (int i = 0; i < 5; i++)
		EXPECT_LT(fabs(y[i] - exp(i - 4.0) / sum), 1e-6);
	for (int i = 5; i < 10; i++)
		EXPECT_EQ(0.2f, y[i]);
	spyre_kernel_destroy(k);

	/* example 1: out = silu(x + b) * s, x and out fp16 [2, 3] */
	k = doc_example1();
	ASSERT_NE(NULL, k);
	{
		uint16_t xh[6], oh[6];
		float b[3] = { 0.5f, -1, 2 }, s = 3;

		for (int i = 0; i < 6; i++)
			xh[i] = spyre_ref_f64_to_fp16(i - 2);
		ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
		o[0] = (struct spyre_ref_kernel_operand){ xh, 6,
							  SPYRE_DTYPE_FP16, 0 };
		o[1] = (struct spyre_ref_kernel_operand){ b, 3,
							  SPYRE_DTYPE_FP32, 0 };
		o[2] = (struct spyre_ref_kernel_operand){ oh, 6,
							  SPYRE_DTYPE_FP16, 0 };
		params[0] = 3;	/* row stride */
		params[1] = 1;
		params[2] = 1;	/* b's stride */
		params[3] = fbits(s);
		memset(&l, 0, sizeof(l));
		ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
		l.noperands = 3;
		l.operands = o;
		l.nparams = 4;
		l.params = params;
		l.npdims = 2;
		l.size[0] = 2;
		l.size[1] = 3;
		ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
		ASSERT_EQ(SPYRE_STATUS_OK, res.status);
		for (int i = 0; i < 6; i++) {
			double v = (i - 2) + b[i % 3];
			double want = v / (1 + exp(-v)) * s;

			EXPECT_LT(fabs(spyre_ref_fp16_to_f64(oh[i]) - want),
				  fabs(want) * 1e-3 + 1e-6) TH_LOG("i %d", i);
		}
	}
	spyre_kernel_destroy(k);
}

TEST(ref_statuses_and_details)
{
	const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
	struct spyre_ref_kernel_operand o[2] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	float x[8] = { 1, 2, 3, 4 }, y[4] = { 0 };
	uint64_t params[1] = { 2 };
	struct spyre_kernel *k;
	uint8_t bad[64 + 3 * 16];
	int i, m, v;

	/* y[i] = x[i + P0] for i < 4, masked to i + P0 < 4 when ... */
	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 1, 1, 0, &k));
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	v = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, i,
			    spyre_kernel_param(k, SPYRE_KTYPE_I64, 0), NONE);
	m = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_LT, v,
			    spyre_kernel_size(k, SPYRE_KTYPE_I64, 0), NONE);
	v = spyre_kernel_load(k, 0, v, m, spyre_kernel_const_f32(k, -1));
	spyre_kernel_store(k, 1, i, v, NONE, 0);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
	o[0] = (struct spyre_ref_kernel_operand){ x, 4, SPYRE_DTYPE_FP32, 0 };
	o[1] = (struct spyre_ref_kernel_operand){ y, 4, SPYRE_DTYPE_FP32, 0 };
	l.noperands = 2;
	l.operands = o;
	l.nparams = 1;
	l.params = params;
	l.npdims = 1;
	l.size[0] = 4;
	/* inactive lanes' offsets (4, 5) are neither read nor checked */
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OK, res.status);
	EXPECT_EQ(3.0f, y[0]);
	EXPECT_EQ(4.0f, y[1]);
	EXPECT_EQ(-1.0f, y[2]);
	EXPECT_EQ(-1.0f, y[3]);
	/* an active lane out of range: the first in sequential order, point
	 * 2 loading x[4] (instruction 6, operand 0) */
	l.size[0] = 6;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OUT_OF_BOUNDS, res.status);
	EXPECT_EQ(6ull << 32, res.detail);
	EXPECT_EQ(4, res.detail2);
	/* with x long enough, point 4 storing y[4]: a write */
	o[0].extent = 8;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OUT_OF_BOUNDS, res.status);
	EXPECT_EQ(1 | SPYRE_KDETAIL_WRITE | (7ull << 32), res.detail);
	EXPECT_EQ(4, res.detail2);
	o[0].extent = 4;
	/* a negative offset reads: point 0 with P0 = -1 */
	params[0] = (uint64_t)-1;
	l.size[0] = 4;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OUT_OF_BOUNDS, res.status);
	EXPECT_EQ(0 | (6ull << 32), res.detail);
	EXPECT_EQ((uint64_t)-1, res.detail2);
	params[0] = 0;
	/* command checks */
	l.size[1] = 1;		/* an unused size */
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_INVALID_COMMAND, res.status);
	l.size[1] = 0;
	l.size[0] = SPYRE_KSIZE_PARAM(1);	/* no such parameter */
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_INVALID_COMMAND, res.status);
	l.size[0] = 1ull << 37;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_LIMIT, res.status);
	l.size[0] = 4;
	/* the signature: an operand dtype differs */
	o[1].dtype = SPYRE_DTYPE_FP16;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_BAD_PROGRAM, res.status);
	EXPECT_EQ(0xffffffffull | (2ull << 32), res.detail);
	o[1].dtype = SPYRE_DTYPE_FP32;
	o[1].dtype = 12;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_INVALID_OPERAND, res.status);
	o[1].dtype = SPYRE_DTYPE_FP32;
	/* a reserved opcode at instruction 1 */
	ASSERT_GE(sizeof(bad), 64 + 2 * 16);
	memcpy(bad, l.prog, 64 + 2 * 16);
	((struct spyre_kprog_header *)bad)->ninsts = 2;
	((struct spyre_kprog_header *)bad)->nvalues = 2;
	bad[64 + 16] = 0x65;
	l.prog = bad;
	l.prog_size = 64 + 2 * 16;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_BAD_PROGRAM, res.status);
	EXPECT_EQ(1 | ((uint64_t)SPYRE_KERR_OPCODE << 32), res.detail);
	l.prog_size = 65;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_BAD_PROGRAM, res.status);
	EXPECT_EQ(0xffffffffull | (1ull << 32), res.detail);
	EXPECT_EQ(-EINVAL, spyre_ref_kernel(NULL, &res));
	spyre_kernel_destroy(k);

	/* CHECK ends the job with ASSERT naming the instruction */
	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 0, 1, 0, &k));
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I32, 0);
	m = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_LT, i,
			    spyre_kernel_const(k, SPYRE_KTYPE_I32, 2), NONE);
	ASSERT_EQ(0, spyre_kernel_check(k, m, NONE));
	memset(&l, 0, sizeof(l));
	ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
	l.noperands = 2;
	l.operands = o;
	l.npdims = 1;
	l.size[0] = 2;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_OK, res.status);
	l.size[0] = 3;
	ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
	EXPECT_EQ(SPYRE_STATUS_ASSERT, res.status);
	EXPECT_EQ(3ull << 32, res.detail);
	spyre_kernel_destroy(k);
}

/* Random programs through the verifier and the interpreter: never a
 * crash, a status for each. */
TEST(ref_random_bytes_never_crash)
{
	const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_INT8 };
	struct spyre_ref_kernel_operand o[2] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	struct spyre_kernel *k = doc_softmax(SPYRE_DTYPE_FP32);
	uint8_t prog[64 + 24 * 16];
	float x[8] = { 0 };
	uint64_t seed = 12345, params[2] = { 4, 1 };
	const void *p;
	size_t n;
	int ok = 0;

	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &p, &n));
	ASSERT_LE(n, sizeof(prog));
	(void)dt;
	o[0] = (struct spyre_ref_kernel_operand){ x, 8, SPYRE_DTYPE_FP32, 0 };
	o[1] = (struct spyre_ref_kernel_operand){ x, 8, SPYRE_DTYPE_FP32, 0 };
	l.noperands = 2;
	l.operands = o;
	l.nparams = 2;
	l.params = params;
	l.npdims = 1;
	l.nrdims = 1;
	l.size[0] = 2;
	l.size[6] = 4;
	for (int it = 0; it < 2000; it++) {
		memcpy(prog, p, n);
		for (int j = 0; j < 1 + it % 3; j++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			prog[64 + (seed >> 33) % (n - 64)] ^=
				(uint8_t)(1u << ((seed >> 20) % 8));
		}
		l.prog = prog;
		l.prog_size = n;
		ASSERT_EQ(0, spyre_ref_kernel(&l, &res));
		ASSERT_TRUE(res.status == SPYRE_STATUS_OK ||
			    res.status == SPYRE_STATUS_BAD_PROGRAM ||
			    res.status == SPYRE_STATUS_OUT_OF_BOUNDS);
		ok += res.status == SPYRE_STATUS_OK;
		EXPECT_GE(spyre_kernel_disasm(prog, n, NULL, 0), 0);
	}
	EXPECT_LT(ok, 2000);	/* mutations were refused */
	spyre_kernel_destroy(k);
}

TEST(cmdbuf_kernel_encoding)
{
	const struct spyre_kernel_arg ops[2] = {
		{ SPYRE_MEM_VA(0x10000), 100, SPYRE_DTYPE_FP16, 0 },
		{ SPYRE_MEM_VA(0x20000), 7, SPYRE_DTYPE_INT64, 0 },
	};
	const uint64_t params[3] = { 5, 6, 0x3f800000 };
	struct spyre_kernel_launch l = {
		.prog = SPYRE_MEM_VA(0x30000), .prog_size = 64 + 16 * 3,
		.noperands = 2, .nparams = 3, .npdims = 2, .nrdims = 1,
		.operands = ops, .params = params,
		.size = { 10, SPYRE_KSIZE_PARAM(1), 0, 0, 0, 0, 4 },
	};
	const struct spyre_cmd_kernel *c;
	const struct spyre_kernel_operand *o;
	const uint64_t *pp;
	struct spyre_cmdbuf *cb;

	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_kernel(cb, &l));
	ASSERT_EQ(104 + 2 * 24 + 3 * 8, spyre_cmdbuf_size(cb));
	EXPECT_EQ(1, spyre_cmdbuf_count(cb));
	c = spyre_cmdbuf_data(cb);
	EXPECT_EQ(SPYRE_OP_KERNEL, c->hdr.opcode);
	EXPECT_EQ(0, c->hdr.flags);
	EXPECT_EQ(104 + 2 * 24 + 3 * 8, c->hdr.size);
	EXPECT_EQ(0x30000, c->prog);
	EXPECT_EQ(64 + 16 * 3, c->prog_size);
	EXPECT_EQ(2, c->noperands);
	EXPECT_EQ(3, c->nparams);
	EXPECT_EQ(2, c->npdims);
	EXPECT_EQ(1, c->nrdims);
	EXPECT_EQ(0, c->pad);
	EXPECT_EQ(10, c->size[0]);
	EXPECT_EQ((1ull << 63) | 1, c->size[1]);
	EXPECT_EQ(4, c->size[6]);
	o = (const void *)(c + 1);
	EXPECT_EQ(0x20000, o[1].va);
	EXPECT_EQ(7, o[1].extent);
	EXPECT_EQ(SPYRE_DTYPE_INT64, o[1].dtype);
	EXPECT_EQ(0, o[1].pad);
	pp = (const void *)(o + 2);
	EXPECT_EQ(0x3f800000, pp[2]);
	EXPECT_EQ(0, spyre_cmdbuf_bos(cb, NULL));	/* raw VAs */

#define BAD(field, val, err) do {							struct spyre_kernel_launch b_ = l;					b_.field = val;								EXPECT_EQ(err, spyre_cmdbuf_kernel(cb, &b_)) TH_LOG(#field); 	} while (0)
	BAD(prog_size, 65, -EINVAL);
	BAD(prog_size, 32, -EINVAL);
	BAD(prog_size, 64 + 16 * 4097, -EINVAL);
	BAD(prog, SPYRE_MEM_VA(0x30004), -EINVAL);
	BAD(prog, SPYRE_MEM_NONE, -EINVAL);
	BAD(noperands, 33, -EINVAL);
	BAD(nparams, 65, -EINVAL);
	BAD(npdims, 7, -EINVAL);
	BAD(nrdims, 0, -EINVAL);	/* size[6] set but unused */
	BAD(size[2], 1, -EINVAL);
	BAD(size[0], SPYRE_KSIZE_PARAM(3), -EINVAL);
	BAD(reserved[1], 1, -EINVAL);
	BAD(operands, NULL, -EINVAL);
#undef BAD
	{
		struct spyre_kernel_arg bad[2] = { ops[0], ops[1] };

		l.operands = bad;
		bad[1].dtype = 12;
		EXPECT_EQ(-EINVAL, spyre_cmdbuf_kernel(cb, &l));
		bad[1].dtype = SPYRE_DTYPE_INT64;
		bad[1].mem = SPYRE_MEM_VA(0x20004);	/* not 8-aligned */
		EXPECT_EQ(-EINVAL, spyre_cmdbuf_kernel(cb, &l));
	}
	EXPECT_EQ(1, spyre_cmdbuf_count(cb));	/* unchanged on error */
	/* SPYRE_KERNEL_DUMP to a file: the launch, and a raw-VA program
	 * that the host cannot read */
	{
		char path[] = "/tmp/spyre-kdump-XXXXXX", text[512] = "";
		int fd = mkstemp(path);
		FILE *f;

		ASSERT_LE(0, fd);
		close(fd);
		setenv("SPYRE_KERNEL_DUMP", path, 1);
		l.operands = ops;
		EXPECT_EQ(0, spyre_cmdbuf_kernel(cb, &l));
		unsetenv("SPYRE_KERNEL_DUMP");
		f = fopen(path, "r");
		ASSERT_NE(NULL, f);
		EXPECT_LT(0, (int)fread(text, 1, sizeof(text) - 1, f));
		fclose(f);
		unlink(path);
		EXPECT_NE(NULL, strstr(text, "; KERNEL prog 0x30000 (112 bytes)"
					     " size [10 P1] x [4]\n"));
		EXPECT_NE(NULL, strstr(text, "; (program not readable)"));
	}
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_kernel(NULL, &l));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_kernel(cb, NULL));
	EXPECT_EQ(-EINVAL, spyre_stream_kernel(NULL, &l));
	EXPECT_EQ(-EINVAL, spyre_kernel_upload(NULL, &l, 64, 0, NULL));
	spyre_cmdbuf_destroy(cb);
}

/* ---- part 2: SCATTER, SCAN, RAND ---------------------------------------- */

/* Random123's kat_vectors for philox4x32_10: counter, key, output. */
TEST(ref_philox_known_answers)
{
	static const uint32_t kat[3][10] = {
		{ 0, 0, 0, 0, 0, 0,
		  0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
		{ 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
		  0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
		{ 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822,
		  0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
	};

	for (int i = 0; i < 3; i++) {
		uint32_t x[4];

		memcpy(x, kat[i], sizeof(x));
		spyre_ref_philox4x32_10(x, kat[i] + 4);
		EXPECT_EQ(kat[i][6], x[0]) TH_LOG("KAT %d", i);
		EXPECT_EQ(kat[i][7], x[1]) TH_LOG("KAT %d", i);
		EXPECT_EQ(kat[i][8], x[2]) TH_LOG("KAT %d", i);
		EXPECT_EQ(kat[i][9], x[3]) TH_LOG("KAT %d", i);
	}
}

/*
 * RAND of @kind for elements n = p * @step + @first, p < @n, with seed and
 * offset from parameters, into @out (INT32 or FP32); @npd pointwise dims
 * (2: the same points as [n / 7, 7]).
 */
static int run_rand(struct __test_metadata *_metadata, uint32_t kind,
		    uint64_t seed, uint64_t offset, uint64_t first,
		    uint64_t step, uint64_t n, unsigned int npd, void *out)
{
	const uint32_t dt[1] = { kind == SPYRE_KRAND_BITS ? SPYRE_DTYPE_INT32 :
				 SPYRE_DTYPE_FP32 };
	const uint64_t params[4] = { seed, offset, step, first };
	struct spyre_ref_kernel_operand o[1] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	struct spyre_kernel *k;
	int p, e;

	ASSERT_EQ(0, spyre_kernel_create(dt, 1, 4, npd, 0, &k)) return -1;
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_POINT);
	e = spyre_kernel_affine(k, SPYRE_KTYPE_I64,
				spyre_kernel_param(k, SPYRE_KTYPE_I64, 3),
				1u << (npd - 1), 2);
	if (npd == 2)	/* n = (p0 * 7 + p1) * step + first */
		e = spyre_kernel_op(k, SPYRE_KOP_ADD, 0,
				    spyre_kernel_param(k, SPYRE_KTYPE_I64, 3),
				    spyre_kernel_op(k, SPYRE_KOP_MUL, 0, p,
					spyre_kernel_param(k, SPYRE_KTYPE_I64,
							   2), NONE), NONE);
	spyre_kernel_store(k, 0, p,
			   spyre_kernel_rand(k, kind,
				spyre_kernel_param(k, SPYRE_KTYPE_I64, 0),
				spyre_kernel_param(k, SPYRE_KTYPE_I64, 1), e),
			   NONE, 0);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size))
		return -1;
	o[0].data = out;
	o[0].extent = n;
	o[0].dtype = dt[0];
	l.noperands = 1;
	l.operands = o;
	l.nparams = 4;
	l.params = params;
	l.npdims = npd;
	if (npd == 2) {
		l.size[0] = n / 7;
		l.size[1] = 7;
	} else {
		l.size[0] = n;
	}
	EXPECT_EQ(0, spyre_ref_kernel(&l, &res));
	spyre_kernel_destroy(k);
	return (int)res.status;
}

TEST(ref_rand_mapping)
{
	uint32_t w[16], w2[16], x[4], key[2];
	float u[14], z[14], z2[14];

	/* BITS: element n is word n % 4 of block n / 4 */
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_BITS, 0, 0, 0, 1, 8, 1,
			      w));
	EXPECT_EQ(0x6627e8d5u, w[0]);	/* the first KAT: counter 0, key 0 */
	EXPECT_EQ(0xe169c58du, w[1]);
	EXPECT_EQ(0xbc57ac4cu, w[2]);
	EXPECT_EQ(0x9b00dbd8u, w[3]);
	/* the seed is the key, the offset counter words 2 and 3 */
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_BITS,
			      0x299f31d0a4093822ull, 0x0370734413198a2eull,
			      0x3ff, 1, 1, 1, w));
	x[0] = 0xff;
	x[1] = 0;
	x[2] = 0x13198a2e;
	x[3] = 0x03707344;
	key[0] = 0xa4093822;
	key[1] = 0x299f31d0;
	spyre_ref_philox4x32_10(x, key);
	EXPECT_EQ(x[3], w[0]);
	/* a value depends on (seed, offset, n) only: strides and shapes */
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_BITS, 42, 7, 0, 1, 14, 1,
			      w));
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_BITS, 42, 7, 0, 1, 14, 2,
			      w2));
	EXPECT_EQ(0, memcmp(w, w2, 14 * 4));
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_BITS, 42, 7, 6, 2, 4, 1,
			      w2));
	EXPECT_EQ(w[6], w2[0]);
	EXPECT_EQ(w[12], w2[3]);
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_BITS, 42, 8, 0, 1, 14, 1,
			      w2));
	EXPECT_NE(w[0], w2[0]);		/* another offset, another stream */
	/* UNIFORM: (w >> 8) * 2^-24 of the same words */
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_UNIFORM, 42, 7, 0, 1, 14,
			      1, u));
	for (int i = 0; i < 14; i++) {
		EXPECT_EQ((float)(w[i] >> 8) / 16777216.0f, u[i]);
		EXPECT_TRUE(u[i] >= 0.0f && u[i] < 1.0f);
	}
	/*
	 * NORMAL: block n / 4, words 2 h and 2 h + 1 (h = (n / 2) % 2),
	 * the cosine for an even n, the sine for an odd one
	 */
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_NORMAL, 42, 7, 0, 1, 14,
			      1, z));
	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_NORMAL, 42, 7, 0, 1, 14,
			      2, z2));
	EXPECT_EQ(0, memcmp(z, z2, sizeof(z)));
	for (int n = 0; n < 14; n++) {
		uint32_t c[4] = { (uint32_t)(n / 4), 0, 7, 0 }, k2[2] = { 42, 0 };
		int h = (n / 2) % 2;
		double u1, u2, want;

		spyre_ref_philox4x32_10(c, k2);
		u1 = ((c[2 * h] >> 8) + 1) / 16777216.0;
		u2 = (c[2 * h + 1] >> 8) / 16777216.0;
		want = sqrt(-2 * log(u1)) *
		       (n % 2 ? sin(2 * M_PI * u2) : cos(2 * M_PI * u2));
		EXPECT_TRUE(fabs(z[n] - want) < 1e-5 * (1 + fabs(want)))
			TH_LOG("n %d: %g, want %g", n, z[n], want);
	}
}

/* A NORMAL sample's mean and variance (a sanity check, not a KS test). */
TEST(ref_rand_normal_moments)
{
	static float z[1 << 16];
	double m = 0, v = 0;

	ASSERT_EQ(0, run_rand(_metadata, SPYRE_KRAND_NORMAL, 1234, 0, 0, 1,
			      1 << 16, 1, z));
	for (int i = 0; i < 1 << 16; i++)
		m += z[i];
	m /= 1 << 16;
	for (int i = 0; i < 1 << 16; i++)
		v += (z[i] - m) * (z[i] - m);
	v /= 1 << 16;
	EXPECT_TRUE(fabs(m) < 0.02) TH_LOG("mean %g", m);
	EXPECT_TRUE(fabs(v - 1) < 0.03) TH_LOG("variance %g", v);
}

/*
 * o2[idx[i]] (mode)= val[i] for i < n, a scatter of FP32 (or @dtype)
 * values; optionally the lanes in a pass over r0 (one point).
 */
static struct spyre_ref_kernel_result run_scatter(
	struct __test_metadata *_metadata, uint32_t mode, const int64_t *idx,
	const float *val, uint64_t n, uint32_t dtype, void *out,
	uint64_t extent, bool in_pass)
{
	const uint32_t dt[3] = { SPYRE_DTYPE_INT64, SPYRE_DTYPE_FP32, dtype };
	struct spyre_ref_kernel_operand o[3] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res = { 0 };
	struct spyre_kernel *k;
	int p, v;

	EXPECT_EQ(0, spyre_kernel_create(dt, 3, 0, in_pass ? 0 : 1,
					 in_pass ? 1 : 0, &k));
	if (in_pass)
		spyre_kernel_pass(k);
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, in_pass ? SPYRE_KDIM_R0 : 0);
	v = spyre_kernel_load(k, 1, p, NONE, NONE);
	if (dtype == SPYRE_DTYPE_INT32)
		v = spyre_kernel_cvt(k, SPYRE_KTYPE_I32, v, 0, 0);
	EXPECT_EQ(0, spyre_kernel_scatter(k, 2,
					  spyre_kernel_load(k, 0, p, NONE,
							    NONE), v, NONE,
					  mode));
	if (in_pass)
		spyre_kernel_endpass(k);
	EXPECT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size));
	o[0] = (struct spyre_ref_kernel_operand){ (void *)idx, n,
						   SPYRE_DTYPE_INT64, 0 };
	o[1] = (struct spyre_ref_kernel_operand){ (void *)val, n,
						   SPYRE_DTYPE_FP32, 0 };
	o[2] = (struct spyre_ref_kernel_operand){ out, extent, dtype, 0 };
	l.noperands = 3;
	l.operands = o;
	l.npdims = in_pass ? 0 : 1;
	l.nrdims = in_pass ? 1 : 0;
	l.size[in_pass ? 6 : 0] = n;
	EXPECT_EQ(0, spyre_ref_kernel(&l, &res));
	spyre_kernel_destroy(k);
	return res;
}

TEST(ref_scatter_lane_order)
{
	const int64_t idx[] = { 2, 0, 2, 1, 2, 0 };
	const float val[] = { 1e8f, 5, 1, 7, -1e8f, 3 };
	float out[3];
	uint16_t h[3];
	int32_t iout[3];
	struct spyre_ref_kernel_result r;

	for (int pass = 0; pass < 2; pass++) {
		/* STORE: the last lane wins */
		memset(out, 0, sizeof(out));
		r = run_scatter(_metadata, SPYRE_KSCAT_STORE, idx, val, 6,
				SPYRE_DTYPE_FP32, out, 3, pass);
		EXPECT_EQ(0u, r.status);
		EXPECT_EQ(3.0f, out[0]);
		EXPECT_EQ(7.0f, out[1]);
		EXPECT_EQ(-1e8f, out[2]);
		/* ADD, in order: (1e8 + 1) - 1e8 = 0 in f32, not 1 */
		out[0] = 0.5f;
		out[1] = 0;
		out[2] = 0;
		r = run_scatter(_metadata, SPYRE_KSCAT_ADD, idx, val, 6,
				SPYRE_DTYPE_FP32, out, 3, pass);
		EXPECT_EQ(0u, r.status);
		EXPECT_EQ(8.5f, out[0]);
		EXPECT_EQ(7.0f, out[1]);
		EXPECT_EQ(0.0f, out[2]);
	}
	/* FP16 accumulates in FP16: 2048 + 1 + 1 stays 2048 */
	{
		const int64_t i3[] = { 0, 0, 0 };
		const float v3[] = { 2048, 1, 1 };

		memset(h, 0, sizeof(h));
		r = run_scatter(_metadata, SPYRE_KSCAT_ADD, i3, v3, 3,
				SPYRE_DTYPE_FP16, h, 1, false);
		EXPECT_EQ(0u, r.status);
		EXPECT_EQ(0x6800, h[0]);	/* 2048 */
	}
	/* integers wrap */
	{
		const int64_t i2[] = { 1, 1 };
		const float v2[] = { 2147483520.0f, 1024 };

		memset(iout, 0, sizeof(iout));
		r = run_scatter(_metadata, SPYRE_KSCAT_ADD, i2, v2, 2,
				SPYRE_DTYPE_INT32, iout, 3, false);
		EXPECT_EQ(0u, r.status);
		EXPECT_EQ((int32_t)(2147483520u + 1024u), iout[1]);
	}
	/* an index out of range fails at its lane, as a write */
	{
		const int64_t bad[] = { 0, 1, 3, -1 };

		r = run_scatter(_metadata, SPYRE_KSCAT_ADD, bad, val, 4,
				SPYRE_DTYPE_FP32, out, 3, false);
		EXPECT_EQ(SPYRE_STATUS_OUT_OF_BOUNDS, r.status);
		EXPECT_EQ(2u, r.detail & 0xff);
		EXPECT_TRUE(r.detail & SPYRE_KDETAIL_WRITE);
		EXPECT_EQ(3u, r.detail2);
	}
}

/* o1[r] = scan(kind, o0[r]) over one point, masked where r % 4 == 3. */
static int run_scan(struct __test_metadata *_metadata, uint32_t kind,
		    uint32_t dtype, const void *x, uint64_t n, bool masked,
		    void *out)
{
	uint32_t odt = kind >= SPYRE_KRED_ARGMAX ? SPYRE_DTYPE_INT64 : dtype;
	const uint32_t dt[2] = { dtype, odt };
	struct spyre_ref_kernel_operand o[2] = { { 0 } };
	struct spyre_ref_kernel_launch l = { 0 };
	struct spyre_ref_kernel_result res;
	struct spyre_kernel *k;
	int r, m = NONE;

	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 0, 0, 1, &k)) return -1;
	spyre_kernel_pass(k);
	r = spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0);
	if (masked)
		m = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_NE,
			spyre_kernel_op(k, SPYRE_KOP_AND, 0, r,
				spyre_kernel_const(k, SPYRE_KTYPE_I64, 3),
				NONE),
			spyre_kernel_const(k, SPYRE_KTYPE_I64, 3), NONE);
	spyre_kernel_store(k, 1, r,
			   spyre_kernel_scan(k, kind,
					     spyre_kernel_load(k, 0, r, NONE,
							       NONE), m),
			   NONE, 0);
	spyre_kernel_endpass(k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &l.prog, &l.prog_size))
		return -1;
	o[0] = (struct spyre_ref_kernel_operand){ (void *)x, n, dtype, 0 };
	o[1] = (struct spyre_ref_kernel_operand){ out, n, odt, 0 };
	l.noperands = 2;
	l.operands = o;
	l.nrdims = 1;
	l.size[6] = n;
	EXPECT_EQ(0, spyre_ref_kernel(&l, &res));
	spyre_kernel_destroy(k);
	return (int)res.status;
}

TEST(ref_scans)
{
	const float x[] = { 1, 3, 3, NAN, 2, NAN, -5, 8 };
	const float s[] = { 16777216.0f, 1, 1, 1, -0.0f };
	const int32_t c[] = { 5, -2, 5, 9, INT32_MAX, 1 };
	float f[8];
	int64_t i[8];
	int32_t ic[6];

	/* cumsum left to right: 2^24 + 1 + 1 + 1 stays 2^24 in f32 */
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_FP32, s,
			      5, false, f));
	EXPECT_EQ(16777216.0f, f[3]);
	EXPECT_EQ(16777216.0f, f[4]);
	/* the first element is taken as it is: -0 stays -0 */
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_FP32,
			      s + 4, 1, false, f));
	EXPECT_EQ(0x80000000u, fbits(f[0]));
	/* cummax: NaN sticks until the next NaN; ties go to the later */
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_MAX, SPYRE_DTYPE_FP32, x,
			      8, false, f));
	EXPECT_EQ(1.0f, f[0]);
	EXPECT_EQ(3.0f, f[2]);
	EXPECT_EQ(0x7fc00000u, fbits(f[3]));
	EXPECT_EQ(0x7fc00000u, fbits(f[7]));
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_ARGMAX, SPYRE_DTYPE_FP32,
			      x, 8, false, i));
	EXPECT_EQ(0, i[0]);
	EXPECT_EQ(1, i[1]);
	EXPECT_EQ(2, i[2]);		/* the later of equal maxima */
	EXPECT_EQ(3, i[3]);
	EXPECT_EQ(3, i[4]);
	EXPECT_EQ(5, i[5]);		/* the later NaN */
	EXPECT_EQ(5, i[7]);
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_ARGMIN, SPYRE_DTYPE_INT32,
			      c, 6, false, i));
	EXPECT_EQ(0, i[0]);
	EXPECT_EQ(1, i[1]);
	EXPECT_EQ(1, i[5]);
	/* integer cumsum wraps; masked lanes (r = 3) add nothing */
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_SUM, SPYRE_DTYPE_INT32, c,
			      6, true, ic));
	EXPECT_EQ(5, ic[0]);
	EXPECT_EQ(8, ic[2]);
	EXPECT_EQ(8, ic[3]);
	EXPECT_EQ((int32_t)(8u + 2147483647u), ic[4]);
	ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_PROD, SPYRE_DTYPE_INT32, c,
			      3, false, ic));
	EXPECT_EQ(-50, ic[2]);
	/* a masked first element: the identity until the first active one */
	{
		const float y[] = { 0, 0, 0, 4, 2 };

		ASSERT_EQ(0, run_scan(_metadata, SPYRE_KRED_MIN,
				      SPYRE_DTYPE_FP32, y + 3, 2, false, f));
		EXPECT_EQ(2.0f, f[1]);
	}
}

TEST(builder_part2_refusals)
{
	const uint32_t dt[] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_INT64,
				SPYRE_DTYPE_BOOL };
	struct spyre_kernel *k;
	int p, v;

	/* a SCATTER's operand may have no other access, before or after */
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	v = spyre_kernel_load(k, 0, p, NONE, NONE);
	EXPECT_EQ(-EINVAL, spyre_kernel_scatter(k, 0, p, v, NONE,
						SPYRE_KSCAT_ADD));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	v = spyre_kernel_const_f32(k, 1.0f);
	EXPECT_EQ(0, spyre_kernel_scatter(k, 0, p, v, NONE, SPYRE_KSCAT_ADD));
	EXPECT_EQ(-EINVAL, spyre_kernel_store(k, 0, p, v, NONE, 0));
	spyre_kernel_destroy(k);
	/* ADD of bool, unknown kinds, SAT on fp32 */
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	EXPECT_EQ(-EINVAL, spyre_kernel_scatter(k, 2, p,
			spyre_kernel_const(k, SPYRE_KTYPE_BOOL, 1), NONE,
			SPYRE_KSCAT_ADD));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	EXPECT_EQ(-EINVAL, spyre_kernel_scatter(k, 0, p,
			spyre_kernel_const_f32(k, 1), NONE, 2));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	EXPECT_EQ(-EINVAL, spyre_kernel_scatter(k, 0, p,
			spyre_kernel_const_f32(k, 1), NONE, SPYRE_KMOD_SAT));
	spyre_kernel_destroy(k);
	/* SCAN outside a pass; a ninth SCAN */
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 1, &k));
	v = spyre_kernel_const_f32(k, 1);
	EXPECT_EQ(-EINVAL, spyre_kernel_scan(k, SPYRE_KRED_SUM, v, NONE));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 1, &k));
	spyre_kernel_pass(k);
	v = spyre_kernel_const_f32(k, 1);
	for (int i = 0; i < SPYRE_KERNEL_MAX_SCAN; i++)
		EXPECT_LT(0, spyre_kernel_scan(k, SPYRE_KRED_SUM, v, NONE));
	EXPECT_EQ(-E2BIG, spyre_kernel_scan(k, SPYRE_KRED_SUM, v, NONE));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 1, &k));
	spyre_kernel_pass(k);
	EXPECT_EQ(-EINVAL, spyre_kernel_scan(k, SPYRE_KRED_ANY,
			spyre_kernel_const(k, SPYRE_KTYPE_BOOL, 1), NONE));
	spyre_kernel_destroy(k);
	/* RAND: i64 seed and offset, an int index, a defined kind */
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I32, 0);
	EXPECT_EQ(-EINVAL, spyre_kernel_rand(k, SPYRE_KRAND_UNIFORM, p, p, p));
	spyre_kernel_destroy(k);
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	p = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	EXPECT_EQ(-EINVAL, spyre_kernel_rand(k, 3, p, p, p));
	spyre_kernel_destroy(k);
	/* the linear reduction index exists only with reduction dims */
	ASSERT_EQ(0, spyre_kernel_create(dt, 3, 0, 1, 0, &k));
	EXPECT_EQ(-EINVAL, spyre_kernel_size(k, SPYRE_KTYPE_I64,
					     SPYRE_KDIM_RINDEX));
	spyre_kernel_destroy(k);
}

TEST(disasm_part2)
{
	const uint32_t dt[] = { SPYRE_DTYPE_FP16, SPYRE_DTYPE_INT64 };
	struct spyre_kernel *k;
	const void *p;
	size_t n;
	char buf[2048];
	int i, s, seed, off;

	ASSERT_EQ(0, spyre_kernel_create(dt, 2, 2, 0, 1, &k));
	spyre_kernel_pass(k);
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0);
	seed = spyre_kernel_param(k, SPYRE_KTYPE_I64, 0);
	off = spyre_kernel_param(k, SPYRE_KTYPE_I64, 1);
	s = spyre_kernel_rand(k, SPYRE_KRAND_NORMAL, seed, off, i);
	s = spyre_kernel_scan(k, SPYRE_KRED_ARGMAX, s, NONE);
	spyre_kernel_scatter(k, 1, s, s, NONE, SPYRE_KSCAT_ADD);
	spyre_kernel_endpass(k);
	ASSERT_EQ(0, spyre_kernel_finalize(k, &p, &n));
	ASSERT_LT(0, spyre_kernel_disasm(p, n, buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, "%3 = rand.normal.f32 %1, %2, %0"))
		TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "%4 = scan.argmax.i64 %3")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "scatter.add o1[%4], %4")) TH_LOG("%s", buf);
	spyre_kernel_destroy(k);
}

TEST_HARNESS_MAIN
