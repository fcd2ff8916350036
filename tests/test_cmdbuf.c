// SPDX-License-Identifier: MIT
/*
 * Host unit tests: command encoding of libspyre against <drm/spyre_cmd.h>.
 * No device needed.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kselftest_harness.h"

#include <spyre/spyre.h>
/* struct spyre_bo, to make fake BOs (VA + size) without a device */
#include "../libspyre/src/internal.h"

/* Read a little-endian integer of @n bytes at @p + @off. */
static uint64_t le(const void *p, size_t off, size_t n)
{
	const uint8_t *b = (const uint8_t *)p + off;
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

TEST(struct_sizes_and_offsets)
{
	ASSERT_EQ(8, sizeof(struct spyre_cmd_header));
	ASSERT_EQ(0, offsetof(struct spyre_cmd_header, opcode));
	ASSERT_EQ(2, offsetof(struct spyre_cmd_header, flags));
	ASSERT_EQ(4, offsetof(struct spyre_cmd_header, size));
	ASSERT_EQ(8, sizeof(struct spyre_cmd_nop));
	ASSERT_EQ(40, sizeof(struct spyre_cmd_fill));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_fill, dst));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_fill, count));
	ASSERT_EQ(24, offsetof(struct spyre_cmd_fill, value));
	ASSERT_EQ(32, offsetof(struct spyre_cmd_fill, elem_size));
	ASSERT_EQ(64, sizeof(struct spyre_cmd_copy));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_copy, src));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_copy, dst));
	ASSERT_EQ(24, offsetof(struct spyre_cmd_copy, width));
	ASSERT_EQ(32, offsetof(struct spyre_cmd_copy, height));
	ASSERT_EQ(40, offsetof(struct spyre_cmd_copy, src_pitch));
	ASSERT_EQ(48, offsetof(struct spyre_cmd_copy, dst_pitch));
	ASSERT_EQ(56, offsetof(struct spyre_cmd_copy, src_dtype));
	ASSERT_EQ(60, offsetof(struct spyre_cmd_copy, dst_dtype));
	ASSERT_EQ(16, sizeof(struct spyre_cmd_timestamp));
	ASSERT_EQ(24, sizeof(struct spyre_cmd_sem));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_sem, addr));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_sem, value));
	ASSERT_EQ(152, sizeof(struct spyre_cmd_gemm));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_gemm, a_dtype));
	ASSERT_EQ(12, offsetof(struct spyre_cmd_gemm, b_dtype));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_gemm, c_dtype));
	ASSERT_EQ(20, offsetof(struct spyre_cmd_gemm, bias_dtype));
	ASSERT_EQ(24, offsetof(struct spyre_cmd_gemm, m));
	ASSERT_EQ(28, offsetof(struct spyre_cmd_gemm, n));
	ASSERT_EQ(32, offsetof(struct spyre_cmd_gemm, k));
	ASSERT_EQ(36, offsetof(struct spyre_cmd_gemm, batch));
	ASSERT_EQ(40, offsetof(struct spyre_cmd_gemm, a));
	ASSERT_EQ(48, offsetof(struct spyre_cmd_gemm, b));
	ASSERT_EQ(56, offsetof(struct spyre_cmd_gemm, c));
	ASSERT_EQ(64, offsetof(struct spyre_cmd_gemm, lda));
	ASSERT_EQ(72, offsetof(struct spyre_cmd_gemm, ldb));
	ASSERT_EQ(80, offsetof(struct spyre_cmd_gemm, ldc));
	ASSERT_EQ(88, offsetof(struct spyre_cmd_gemm, stride_a));
	ASSERT_EQ(96, offsetof(struct spyre_cmd_gemm, stride_b));
	ASSERT_EQ(104, offsetof(struct spyre_cmd_gemm, stride_c));
	ASSERT_EQ(112, offsetof(struct spyre_cmd_gemm, alpha));
	ASSERT_EQ(116, offsetof(struct spyre_cmd_gemm, beta));
	ASSERT_EQ(120, offsetof(struct spyre_cmd_gemm, scale_a));
	ASSERT_EQ(128, offsetof(struct spyre_cmd_gemm, scale_b));
	ASSERT_EQ(136, offsetof(struct spyre_cmd_gemm, bias));
	ASSERT_EQ(144, offsetof(struct spyre_cmd_gemm, amax));
	ASSERT_EQ(56, sizeof(struct spyre_cmd_eltwise));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_eltwise, op));
	ASSERT_EQ(12, offsetof(struct spyre_cmd_eltwise, dtype));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_eltwise, count));
	ASSERT_EQ(24, offsetof(struct spyre_cmd_eltwise, a));
	ASSERT_EQ(32, offsetof(struct spyre_cmd_eltwise, b));
	ASSERT_EQ(40, offsetof(struct spyre_cmd_eltwise, out));
	ASSERT_EQ(48, offsetof(struct spyre_cmd_eltwise, alpha));
	ASSERT_EQ(52, offsetof(struct spyre_cmd_eltwise, pad));
	ASSERT_EQ(48, sizeof(struct spyre_cmd_reduce));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_reduce, op));
	ASSERT_EQ(12, offsetof(struct spyre_cmd_reduce, dtype));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_reduce, rows));
	ASSERT_EQ(20, offsetof(struct spyre_cmd_reduce, cols));
	ASSERT_EQ(24, offsetof(struct spyre_cmd_reduce, src));
	ASSERT_EQ(32, offsetof(struct spyre_cmd_reduce, dst));
	ASSERT_EQ(40, offsetof(struct spyre_cmd_reduce, ld));
	ASSERT_EQ(80, sizeof(struct spyre_cmd_rowop));
	ASSERT_EQ(8, offsetof(struct spyre_cmd_rowop, op));
	ASSERT_EQ(12, offsetof(struct spyre_cmd_rowop, dtype));
	ASSERT_EQ(16, offsetof(struct spyre_cmd_rowop, rows));
	ASSERT_EQ(20, offsetof(struct spyre_cmd_rowop, cols));
	ASSERT_EQ(24, offsetof(struct spyre_cmd_rowop, src));
	ASSERT_EQ(32, offsetof(struct spyre_cmd_rowop, dst));
	ASSERT_EQ(40, offsetof(struct spyre_cmd_rowop, ld_src));
	ASSERT_EQ(48, offsetof(struct spyre_cmd_rowop, ld_dst));
	ASSERT_EQ(56, offsetof(struct spyre_cmd_rowop, gamma));
	ASSERT_EQ(64, offsetof(struct spyre_cmd_rowop, beta));
	ASSERT_EQ(72, offsetof(struct spyre_cmd_rowop, eps));
	ASSERT_EQ(76, offsetof(struct spyre_cmd_rowop, pad));
}

FIXTURE(cb) {
	struct spyre_cmdbuf *cb;
};

FIXTURE_SETUP(cb)
{
	ASSERT_EQ(0, spyre_cmdbuf_create(&self->cb));
	ASSERT_EQ(0, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(0, spyre_cmdbuf_count(self->cb));
	ASSERT_EQ(NULL, spyre_cmdbuf_data(self->cb));
}

FIXTURE_TEARDOWN(cb)
{
	spyre_cmdbuf_destroy(self->cb);
}

TEST_F(cb, nop_bytes)
{
	const uint8_t want[8] = { SPYRE_OP_NOP, 0, 0, 0, 8, 0, 0, 0 };

	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	ASSERT_EQ(8, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(1, spyre_cmdbuf_count(self->cb));
	ASSERT_EQ(0, memcmp(want, spyre_cmdbuf_data(self->cb), 8));
}

TEST_F(cb, fill_bytes)
{
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, 0x123456789000ull, 777, 4,
				       0xdeadbeefcafef00dull));
	ASSERT_EQ(40, spyre_cmdbuf_size(self->cb));
	d = spyre_cmdbuf_data(self->cb);
	ASSERT_EQ(SPYRE_OP_FILL, le(d, 0, 2));
	ASSERT_EQ(0, le(d, 2, 2));
	ASSERT_EQ(40, le(d, 4, 4));
	ASSERT_EQ(0x123456789000ull, le(d, 8, 8));
	ASSERT_EQ(777, le(d, 16, 8));
	ASSERT_EQ(0xdeadbeefcafef00dull, le(d, 24, 8));
	ASSERT_EQ(4, le(d, 32, 4));
	ASSERT_EQ(0, le(d, 36, 4));	/* pad */
}

TEST_F(cb, fill_rejects_bad_args)
{
	static const uint32_t bad[] = { 0, 3, 5, 6, 7, 9, 16, 0xffffffffu };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill(self->cb, 0x1000, 1,
						     bad[i], 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill(self->cb, 0x1000, 0, 4, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill(NULL, 0x1000, 1, 4, 0));
	for (uint32_t es = 1; es <= 8; es *= 2)
		EXPECT_EQ(0, spyre_cmdbuf_fill(self->cb, 0x1000, 1, es, 0));
	/* Failed calls left nothing behind. */
	EXPECT_EQ(4 * 40, spyre_cmdbuf_size(self->cb));
	EXPECT_EQ(4, spyre_cmdbuf_count(self->cb));
}

TEST_F(cb, copy_bytes)
{
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_copy(self->cb, 0x2000, 0x1000, 4096));
	ASSERT_EQ(0, spyre_cmdbuf_copy_2d(self->cb, 0xa000, 384,
					  SPYRE_DTYPE_FP16, 0xb000, 256,
					  SPYRE_DTYPE_FP32, 50, 7,
					  SPYRE_CMD_F_NOSAT));
	ASSERT_EQ(128, spyre_cmdbuf_size(self->cb));
	d = spyre_cmdbuf_data(self->cb);
	/* 1-D byte copy */
	ASSERT_EQ(SPYRE_OP_COPY, le(d, 0, 2));
	ASSERT_EQ(0, le(d, 2, 2));
	ASSERT_EQ(64, le(d, 4, 4));
	ASSERT_EQ(0x1000, le(d, 8, 8));		/* src */
	ASSERT_EQ(0x2000, le(d, 16, 8));	/* dst */
	ASSERT_EQ(4096, le(d, 24, 8));		/* width */
	ASSERT_EQ(1, le(d, 32, 8));		/* height */
	ASSERT_EQ(SPYRE_DTYPE_U8, le(d, 56, 4));
	ASSERT_EQ(SPYRE_DTYPE_U8, le(d, 60, 4));
	/* 2-D converting copy */
	d += 64;
	ASSERT_EQ(SPYRE_OP_COPY, le(d, 0, 2));
	ASSERT_EQ(SPYRE_CMD_F_NOSAT, le(d, 2, 2));
	ASSERT_EQ(64, le(d, 4, 4));
	ASSERT_EQ(0xb000, le(d, 8, 8));
	ASSERT_EQ(0xa000, le(d, 16, 8));
	ASSERT_EQ(50, le(d, 24, 8));
	ASSERT_EQ(7, le(d, 32, 8));
	ASSERT_EQ(256, le(d, 40, 8));
	ASSERT_EQ(384, le(d, 48, 8));
	ASSERT_EQ(SPYRE_DTYPE_FP32, le(d, 56, 4));
	ASSERT_EQ(SPYRE_DTYPE_FP16, le(d, 60, 4));
}

TEST_F(cb, copy_rejects_bad_dtypes)
{
	struct { uint32_t d, s; int ok; } cases[] = {
		{ SPYRE_DTYPE_U8, SPYRE_DTYPE_U8, 1 },
		{ SPYRE_DTYPE_U8, SPYRE_DTYPE_FP16, 0 },
		{ SPYRE_DTYPE_FP32, SPYRE_DTYPE_U8, 0 },
		{ SPYRE_DTYPE_INT32, SPYRE_DTYPE_INT32, 1 },
		{ SPYRE_DTYPE_INT32, SPYRE_DTYPE_FP32, 0 },
		{ SPYRE_DTYPE_INT8, SPYRE_DTYPE_BF16, 1 },
		{ SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2, 1 },
		{ 0, SPYRE_DTYPE_FP32, 0 },
		{ SPYRE_DTYPE_FP32, SPYRE_DTYPE_COUNT, 0 },
	};
	size_t good = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret = spyre_cmdbuf_copy_2d(self->cb, 0, 0, cases[i].d, 0,
					       0, cases[i].s, 1, 1, 0);

		EXPECT_EQ(cases[i].ok ? 0 : -EINVAL, ret)
			TH_LOG("case %zu dst %u src %u", i, cases[i].d,
			       cases[i].s);
		good += cases[i].ok;
	}
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_2d(self->cb, 0, 0, 1, 0, 0, 1, 0,
						1, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_2d(self->cb, 0, 0, 1, 0, 0, 1, 1,
						0, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_2d(self->cb, 0, 0, 1, 0, 0, 1, 1,
						1, 1u << 5));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy(self->cb, 0, 0, 0));
	EXPECT_EQ(good * 64, spyre_cmdbuf_size(self->cb));
}

TEST_F(cb, timestamp_and_sem_bytes)
{
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_timestamp(self->cb, 0x4008));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(self->cb, 0x5000, 42));
	ASSERT_EQ(0, spyre_cmdbuf_sem_signal(self->cb, 0x5008, 7,
					     SPYRE_SEM_F_ADD));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_timestamp(self->cb, 0x4004));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_sem_wait(self->cb, 0x5001, 1));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_sem_signal(self->cb, 0x5000, 1, 1));
	ASSERT_EQ(16 + 24 + 24, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(3, spyre_cmdbuf_count(self->cb));
	d = spyre_cmdbuf_data(self->cb);
	ASSERT_EQ(SPYRE_OP_TIMESTAMP, le(d, 0, 2));
	ASSERT_EQ(16, le(d, 4, 4));
	ASSERT_EQ(0x4008, le(d, 8, 8));
	d += 16;
	ASSERT_EQ(SPYRE_OP_SEM_WAIT, le(d, 0, 2));
	ASSERT_EQ(0, le(d, 2, 2));
	ASSERT_EQ(24, le(d, 4, 4));
	ASSERT_EQ(0x5000, le(d, 8, 8));
	ASSERT_EQ(42, le(d, 16, 8));
	d += 24;
	ASSERT_EQ(SPYRE_OP_SEM_SIGNAL, le(d, 0, 2));
	ASSERT_EQ(SPYRE_SEM_F_ADD, le(d, 2, 2));
	ASSERT_EQ(0x5008, le(d, 8, 8));
	ASSERT_EQ(7, le(d, 16, 8));
}

TEST_F(cb, growth_and_reset)
{
	const size_t n = 20000;	/* ~ 500 KiB: many reallocations */
	const uint8_t *d;
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		int ret = (i % 3 == 0) ? spyre_cmdbuf_nop(self->cb) :
			  (i % 3 == 1) ? spyre_cmdbuf_fill(self->cb, i * 8, i + 1, 8, i) :
			  spyre_cmdbuf_copy(self->cb, i * 16, i * 32, i + 1);

		ASSERT_EQ(0, ret);
	}
	ASSERT_EQ(n, spyre_cmdbuf_count(self->cb));
	ASSERT_EQ((n + 2) / 3 * 8 + (n + 1) / 3 * 40 + n / 3 * 64,
		  spyre_cmdbuf_size(self->cb));
	/* Walk the stream: every header valid and in order. */
	d = spyre_cmdbuf_data(self->cb);
	for (size_t i = 0; i < n; i++) {
		static const unsigned int ops[3] = {
			SPYRE_OP_NOP, SPYRE_OP_FILL, SPYRE_OP_COPY };
		static const unsigned int sizes[3] = { 8, 40, 64 };

		ASSERT_EQ(ops[i % 3], le(d, off, 2));
		ASSERT_EQ(sizes[i % 3], le(d, off + 4, 4));
		if (i % 3 == 1)
			ASSERT_EQ(i + 1, le(d, off + 16, 8));
		if (i % 3 == 2)
			ASSERT_EQ(i * 32, le(d, off + 8, 8));
		off += sizes[i % 3];
	}
	ASSERT_EQ(off, spyre_cmdbuf_size(self->cb));
	spyre_cmdbuf_reset(self->cb);
	ASSERT_EQ(0, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(0, spyre_cmdbuf_count(self->cb));
	ASSERT_EQ(NULL, spyre_cmdbuf_data(self->cb));
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	ASSERT_EQ(8, spyre_cmdbuf_size(self->cb));
}

TEST_F(cb, raw_append)
{
	struct spyre_cmd_nop nop = { .hdr = { SPYRE_OP_NOP, 0, 8 } };
	uint8_t two[16];

	memcpy(two, &nop, 8);
	memcpy(two + 8, &nop, 8);
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_raw(self->cb, two, 0));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_raw(self->cb, two, 12));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_raw(self->cb, NULL, 8));
	ASSERT_EQ(0, spyre_cmdbuf_raw(self->cb, two, 16));
	ASSERT_EQ(16, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(2, spyre_cmdbuf_count(self->cb));
	ASSERT_EQ(0, memcmp(two, spyre_cmdbuf_data(self->cb), 16));
}

/* ---- compute commands (0.4) ---------------------------------------- */

/* Fake BOs: the encoders only read va and size. */
#define FAKE_BO(name, va_, size_)					\
	struct spyre_bo name;						\
	memset(&name, 0, sizeof(name));					\
	name.va = (va_);						\
	name.size = (size_)

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

TEST_F(cb, gemm_bytes)
{
	FAKE_BO(A, 0x100000, 0x10000);
	FAKE_BO(B, 0x200000, 0x10000);
	FAKE_BO(C, 0x300000, 0x10000);
	FAKE_BO(S, 0x400000, 0x1000);
	struct spyre_gemm g = {
		.flags = SPYRE_GEMM_F_TRANS_B | SPYRE_CMD_F_NOSAT,
		.a_dtype = SPYRE_DTYPE_FP8_E4M3,
		.b_dtype = SPYRE_DTYPE_FP8_E5M2,
		.c_dtype = SPYRE_DTYPE_BF16,
		.bias_dtype = SPYRE_DTYPE_FP32,
		.m = 7, .n = 9, .k = 11, .batch = 3,
		.a = SPYRE_MEM(&A, 16), .b = SPYRE_MEM(&B, 32),
		.c = SPYRE_MEM(&C, 64),
		.lda = 12, .ldb = 13, .ldc = 14,
		.stride_a = 100, .stride_b = 0, .stride_c = 200,
		.alpha = 0.5f, .beta = -2.0f,
		.scale_a = SPYRE_MEM(&S, 0), .scale_b = SPYRE_MEM(&S, 4),
		.bias = SPYRE_MEM(&S, 64), .amax = SPYRE_MEM_VA(0xabc000),
	};
	const uint8_t *d;
	struct spyre_bo *const *bos;

	ASSERT_EQ(0, spyre_cmdbuf_gemm(self->cb, &g));
	ASSERT_EQ(152, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(1, spyre_cmdbuf_count(self->cb));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(SPYRE_OP_GEMM, le(d, 0, 2));
	EXPECT_EQ(SPYRE_GEMM_F_TRANS_B | SPYRE_CMD_F_NOSAT, le(d, 2, 2));
	EXPECT_EQ(152, le(d, 4, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP8_E4M3, le(d, 8, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP8_E5M2, le(d, 12, 4));
	EXPECT_EQ(SPYRE_DTYPE_BF16, le(d, 16, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP32, le(d, 20, 4));
	EXPECT_EQ(7, le(d, 24, 4));
	EXPECT_EQ(9, le(d, 28, 4));
	EXPECT_EQ(11, le(d, 32, 4));
	EXPECT_EQ(3, le(d, 36, 4));
	EXPECT_EQ(0x100010, le(d, 40, 8));
	EXPECT_EQ(0x200020, le(d, 48, 8));
	EXPECT_EQ(0x300040, le(d, 56, 8));
	EXPECT_EQ(12, le(d, 64, 8));
	EXPECT_EQ(13, le(d, 72, 8));
	EXPECT_EQ(14, le(d, 80, 8));
	EXPECT_EQ(100, le(d, 88, 8));
	EXPECT_EQ(0, le(d, 96, 8));
	EXPECT_EQ(200, le(d, 104, 8));
	EXPECT_EQ(0x3f000000, le(d, 112, 4));	/* 0.5f */
	EXPECT_EQ(0xc0000000, le(d, 116, 4));	/* -2.0f */
	EXPECT_EQ(0x400000, le(d, 120, 8));
	EXPECT_EQ(0x400004, le(d, 128, 8));
	EXPECT_EQ(0x400040, le(d, 136, 8));
	EXPECT_EQ(0xabc000, le(d, 144, 8));
	/* BOs recorded once each, in first-use order; raw VAs not */
	ASSERT_EQ(4, spyre_cmdbuf_bos(self->cb, &bos));
	EXPECT_EQ(&A, bos[0]);
	EXPECT_EQ(&B, bos[1]);
	EXPECT_EQ(&C, bos[2]);
	EXPECT_EQ(&S, bos[3]);
}

TEST_F(cb, gemm_defaults)
{
	struct spyre_gemm g = {
		.a_dtype = SPYRE_DTYPE_FP16, .b_dtype = SPYRE_DTYPE_FP16,
		.c_dtype = SPYRE_DTYPE_FP16, .m = 5, .n = 6, .k = 7,
		.a = SPYRE_MEM_VA(0x1000), .b = SPYRE_MEM_VA(0x2000),
		.c = SPYRE_MEM_VA(0x3000), .alpha = 1.0f,
	};
	const uint8_t *d;

	/* dense leading dimensions, batch 1, absent options */
	ASSERT_EQ(0, spyre_cmdbuf_gemm(self->cb, &g));
	g.flags = SPYRE_GEMM_F_TRANS_A | SPYRE_GEMM_F_TRANS_B;
	ASSERT_EQ(0, spyre_cmdbuf_gemm(self->cb, &g));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(1, le(d, 36, 4));		/* batch */
	EXPECT_EQ(7, le(d, 64, 8));		/* lda = K */
	EXPECT_EQ(6, le(d, 72, 8));		/* ldb = N */
	EXPECT_EQ(6, le(d, 80, 8));		/* ldc = N */
	EXPECT_EQ(0, le(d, 120, 8));
	EXPECT_EQ(0, le(d, 128, 8));
	EXPECT_EQ(0, le(d, 136, 8));
	EXPECT_EQ(0, le(d, 144, 8));
	EXPECT_EQ(0, le(d, 20, 4));		/* bias_dtype */
	EXPECT_EQ(0, spyre_cmdbuf_bos(self->cb, NULL));
	d += 152;
	EXPECT_EQ(SPYRE_GEMM_F_TRANS_A | SPYRE_GEMM_F_TRANS_B, le(d, 2, 2));
	EXPECT_EQ(5, le(d, 64, 8));		/* lda = M (A is K x M) */
	EXPECT_EQ(7, le(d, 72, 8));		/* ldb = K (B is N x K) */
	EXPECT_EQ(6, le(d, 80, 8));
}

TEST_F(cb, gemm_dtype_combinations)
{
	static const uint32_t dts[] = {
		SPYRE_DTYPE_U8, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16,
		SPYRE_DTYPE_BF16, SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2,
		SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32, 0, SPYRE_DTYPE_COUNT,
	};
	const size_t nd = sizeof(dts) / sizeof(dts[0]);
	size_t good = 0;

	for (size_t i = 0; i < nd; i++)
		for (size_t j = 0; j < nd; j++)
			for (size_t k = 0; k < nd; k++) {
				uint32_t a = dts[i], b = dts[j], c = dts[k];
				bool fp8a = a == SPYRE_DTYPE_FP8_E4M3 ||
					    a == SPYRE_DTYPE_FP8_E5M2;
				bool fp8b = b == SPYRE_DTYPE_FP8_E4M3 ||
					    b == SPYRE_DTYPE_FP8_E5M2;
				bool fin = a == SPYRE_DTYPE_FP32 ||
					   a == SPYRE_DTYPE_FP16 ||
					   a == SPYRE_DTYPE_BF16 || fp8a;
				bool fout = c == SPYRE_DTYPE_FP32 ||
					    c == SPYRE_DTYPE_FP16 ||
					    c == SPYRE_DTYPE_BF16;
				bool pair = a == b || (fp8a && fp8b);
				bool ok = pair && ((fin && fout) ||
					(a == SPYRE_DTYPE_INT8 &&
					 c == SPYRE_DTYPE_INT32));
				struct spyre_gemm g = {
					.a_dtype = a, .b_dtype = b,
					.c_dtype = c, .m = 1, .n = 1, .k = 1,
					.a = SPYRE_MEM_VA(0x1000),
					.b = SPYRE_MEM_VA(0x2000),
					.c = SPYRE_MEM_VA(0x3000),
				};

				EXPECT_EQ(ok ? 0 : -EINVAL,
					  spyre_cmdbuf_gemm(self->cb, &g))
					TH_LOG("a %u b %u c %u", a, b, c);
				good += ok;
			}
	/* 5 float same-type + 2 mixed fp8, x 3 outputs; int8 -> int32 */
	EXPECT_EQ(7 * 3 + 1, good);
	EXPECT_EQ(good * 152, spyre_cmdbuf_size(self->cb));
}

TEST_F(cb, gemm_rejects_bad_args)
{
	FAKE_BO(A, 0x100000, 4096);
	const struct spyre_gemm ok = {
		.a_dtype = SPYRE_DTYPE_FP16, .b_dtype = SPYRE_DTYPE_FP16,
		.c_dtype = SPYRE_DTYPE_FP32, .m = 8, .n = 8, .k = 8,
		.a = SPYRE_MEM(&A, 0), .b = SPYRE_MEM_VA(0x2000),
		.c = SPYRE_MEM_VA(0x3000), .alpha = 1.0f,
	};
	struct spyre_gemm g;

#define BAD(err, field_assignments) do {				\
		g = ok;							\
		field_assignments;					\
		EXPECT_EQ(err, spyre_cmdbuf_gemm(self->cb, &g))		\
			TH_LOG("%s", #field_assignments);		\
	} while (0)

	BAD(0, (void)0);
	BAD(-EINVAL, g.m = 0);
	BAD(-EINVAL, g.n = 0);
	BAD(-EINVAL, g.k = 0);
	BAD(-EINVAL, g.flags = 1u << 3);
	BAD(-EINVAL, g.flags = 0x8000);
	BAD(-EINVAL, g.pad = 1);
	BAD(-EINVAL, g.reserved[3] = 1);
	BAD(-EINVAL, g.a = SPYRE_MEM_NONE);
	BAD(-EINVAL, g.b = SPYRE_MEM_NONE);
	BAD(-EINVAL, g.c = SPYRE_MEM_NONE);
	BAD(-EINVAL, g.lda = 7);			/* < K */
	BAD(-EINVAL, g.ldb = 7);			/* < N */
	BAD(-EINVAL, g.ldc = 7);			/* < N */
	BAD(-EINVAL, g.m = 9; g.flags = SPYRE_GEMM_F_TRANS_A; g.lda = 8);
	BAD(0, g.m = 9; g.flags = SPYRE_GEMM_F_TRANS_A; g.lda = 9);
	BAD(-EINVAL, g.bias_dtype = SPYRE_DTYPE_FP16);	/* no bias */
	BAD(-EINVAL, g.bias = SPYRE_MEM_VA(0x5000));	/* no bias_dtype */
	BAD(-EINVAL, g.bias_dtype = SPYRE_DTYPE_INT8;
	    g.bias = SPYRE_MEM_VA(0x5000));
	BAD(0, g.bias_dtype = SPYRE_DTYPE_BF16; g.bias = SPYRE_MEM_VA(0x5000));
	BAD(-EINVAL, g.batch = 2);			/* stride_c 0 */
	BAD(0, g.batch = 2; g.stride_c = 64);
	/* INT8: int32 output, beta 0 or 1 */
	BAD(-EINVAL, g.a_dtype = g.b_dtype = SPYRE_DTYPE_INT8);
	BAD(0, g.a_dtype = g.b_dtype = SPYRE_DTYPE_INT8;
	    g.c_dtype = SPYRE_DTYPE_INT32; g.beta = 1.0f);
	BAD(-EINVAL, g.a_dtype = g.b_dtype = SPYRE_DTYPE_INT8;
	    g.c_dtype = SPYRE_DTYPE_INT32; g.beta = 0.5f);
	/* card limit: batch * M * N * K <= 2^36 */
	BAD(0, g.a = SPYRE_MEM_VA(0x1000); g.m = 4096; g.n = 4096;
	    g.k = 4096; g.lda = 0);
	BAD(-E2BIG, g.a = SPYRE_MEM_VA(0x1000); g.m = 4096; g.n = 4096;
	    g.k = 4097; g.lda = 0);
	BAD(-E2BIG, g.a = SPYRE_MEM_VA(0x1000); g.m = 0xffffffffu;
	    g.n = 0xffffffffu; g.batch = 0xffffffffu; g.stride_c = 1);
	/* ranges: A is 8 x 8 fp16 = 128 bytes inside a 4096-byte BO */
	BAD(0, g.a = SPYRE_MEM(&A, 4096 - 128));
	BAD(-ERANGE, g.a = SPYRE_MEM(&A, 4096 - 126));
	BAD(-ERANGE, g.a = SPYRE_MEM(&A, 8192));
	BAD(-ERANGE, g.lda = 1000);
	BAD(0, g.batch = 2; g.stride_c = 64; g.stride_a = 1984);
	BAD(-ERANGE, g.batch = 2; g.stride_c = 64; g.stride_a = 1985);
	BAD(-ERANGE, g.batch = 2; g.stride_c = 64; g.stride_a = UINT64_MAX);
	BAD(-ERANGE, g.scale_a = SPYRE_MEM(&A, 4093));
	BAD(0, g.amax = SPYRE_MEM(&A, 4092));
	BAD(-ERANGE, g.bias_dtype = SPYRE_DTYPE_FP32;
	    g.bias = SPYRE_MEM(&A, 4096 - 28));	/* 8 x 4 bytes */
#undef BAD
	/* the failures left nothing behind */
	EXPECT_EQ(9 * 152, spyre_cmdbuf_size(self->cb));
	EXPECT_EQ(9, spyre_cmdbuf_count(self->cb));
	EXPECT_EQ(1, spyre_cmdbuf_bos(self->cb, NULL));
}

TEST_F(cb, eltwise_bytes_and_checks)
{
	FAKE_BO(X, 0x100000, 4096);
	FAKE_BO(Y, 0x200000, 4096);
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_ADD,
					  SPYRE_DTYPE_FP16, 2048,
					  SPYRE_MEM(&Y, 0), SPYRE_MEM(&X, 0),
					  SPYRE_MEM(&Y, 0), 0.0f));
	/* unary: b ignored and encoded as 0 */
	ASSERT_EQ(0, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_SCALE,
					  SPYRE_DTYPE_BF16, 3,
					  SPYRE_MEM_VA(0x9000),
					  SPYRE_MEM(&X, 6),
					  SPYRE_MEM(&Y, 123456), -1.5f));
	ASSERT_EQ(112, spyre_cmdbuf_size(self->cb));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(SPYRE_OP_ELTWISE, le(d, 0, 2));
	EXPECT_EQ(0, le(d, 2, 2));
	EXPECT_EQ(56, le(d, 4, 4));
	EXPECT_EQ(SPYRE_ELT_ADD, le(d, 8, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP16, le(d, 12, 4));
	EXPECT_EQ(2048, le(d, 16, 8));
	EXPECT_EQ(0x100000, le(d, 24, 8));	/* a */
	EXPECT_EQ(0x200000, le(d, 32, 8));	/* b */
	EXPECT_EQ(0x200000, le(d, 40, 8));	/* out */
	EXPECT_EQ(0, le(d, 48, 4));
	EXPECT_EQ(0, le(d, 52, 4));		/* pad */
	d += 56;
	EXPECT_EQ(SPYRE_ELT_SCALE, le(d, 8, 4));
	EXPECT_EQ(SPYRE_DTYPE_BF16, le(d, 12, 4));
	EXPECT_EQ(0x100006, le(d, 24, 8));
	EXPECT_EQ(0, le(d, 32, 8));
	EXPECT_EQ(0x9000, le(d, 40, 8));
	EXPECT_EQ(fbits(-1.5f), le(d, 48, 4));
	EXPECT_EQ(2, spyre_cmdbuf_bos(self->cb, NULL));

	for (uint32_t op = 0; op <= SPYRE_ELT_EXP + 1; op++) {
		int want = op >= SPYRE_ELT_ADD && op <= SPYRE_ELT_EXP ? 0 :
			   -EINVAL;

		EXPECT_EQ(want, spyre_cmdbuf_eltwise(self->cb, op,
						     SPYRE_DTYPE_FP32, 1,
						     SPYRE_MEM_VA(0x1000),
						     SPYRE_MEM_VA(0x2000),
						     SPYRE_MEM_VA(0x3000),
						     1.0f)) TH_LOG("op %u", op);
	}
	for (uint32_t dt = 0; dt <= SPYRE_DTYPE_COUNT; dt++) {
		int want = dt == SPYRE_DTYPE_FP32 || dt == SPYRE_DTYPE_FP16 ||
			   dt == SPYRE_DTYPE_BF16 ? 0 : -EINVAL;

		EXPECT_EQ(want, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_RELU,
						     dt, 1,
						     SPYRE_MEM_VA(0x1000),
						     SPYRE_MEM_VA(0x2000),
						     SPYRE_MEM_NONE, 0.0f))
			TH_LOG("dtype %u", dt);
	}
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_EXP,
						SPYRE_DTYPE_FP32, 0,
						SPYRE_MEM_VA(0x1000),
						SPYRE_MEM_VA(0x1000),
						SPYRE_MEM_NONE, 0.0f));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_MUL,
						SPYRE_DTYPE_FP32, 1,
						SPYRE_MEM_VA(0x1000),
						SPYRE_MEM_VA(0x1000),
						SPYRE_MEM_NONE, 0.0f));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_EXP,
						SPYRE_DTYPE_FP32, 1,
						SPYRE_MEM_NONE,
						SPYRE_MEM_VA(0x1000),
						SPYRE_MEM_NONE, 0.0f));
	EXPECT_EQ(-E2BIG, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_EXP,
					       SPYRE_DTYPE_FP32,
					       SPYRE_CMD_MAX_ELEMS + 1,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_NONE, 0.0f));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_ADD,
						SPYRE_DTYPE_FP16, 2049,
						SPYRE_MEM_VA(0x1000),
						SPYRE_MEM_VA(0x2000),
						SPYRE_MEM(&Y, 0), 0.0f));
	EXPECT_EQ(2 + 7 + 3, spyre_cmdbuf_count(self->cb));
}

TEST_F(cb, reduce_bytes_and_checks)
{
	FAKE_BO(X, 0x100000, 4096);
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_MAX,
					 SPYRE_DTYPE_BF16, 3, 5,
					 SPYRE_MEM(&X, 2048), SPYRE_MEM(&X, 8),
					 0));
	ASSERT_EQ(0, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					 SPYRE_DTYPE_FP32, 2, 5,
					 SPYRE_MEM_VA(0x5000),
					 SPYRE_MEM_VA(0x6000), 9));
	ASSERT_EQ(96, spyre_cmdbuf_size(self->cb));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(SPYRE_OP_REDUCE, le(d, 0, 2));
	EXPECT_EQ(48, le(d, 4, 4));
	EXPECT_EQ(SPYRE_REDUCE_MAX, le(d, 8, 4));
	EXPECT_EQ(SPYRE_DTYPE_BF16, le(d, 12, 4));
	EXPECT_EQ(3, le(d, 16, 4));
	EXPECT_EQ(5, le(d, 20, 4));
	EXPECT_EQ(0x100008, le(d, 24, 8));	/* src */
	EXPECT_EQ(0x100800, le(d, 32, 8));	/* dst */
	EXPECT_EQ(5, le(d, 40, 8));		/* ld = cols */
	EXPECT_EQ(9, le(d, 48 + 40, 8));
	EXPECT_EQ(1, spyre_cmdbuf_bos(self->cb, NULL));

	EXPECT_EQ(-EINVAL, spyre_cmdbuf_reduce(self->cb, 0, SPYRE_DTYPE_FP32,
					       1, 1, SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000), 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_reduce(self->cb, 3, SPYRE_DTYPE_FP32,
					       1, 1, SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000), 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					       SPYRE_DTYPE_INT8, 1, 1,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000), 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					       SPYRE_DTYPE_FP32, 0, 1,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000), 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					       SPYRE_DTYPE_FP32, 1, 0,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000), 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					       SPYRE_DTYPE_FP32, 2, 4,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM_VA(0x1000), 3));
	EXPECT_EQ(-E2BIG, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					      SPYRE_DTYPE_FP32, 1u << 16,
					      (1u << 14) + 1,
					      SPYRE_MEM_VA(0x1000),
					      SPYRE_MEM_VA(0x1000), 0));
	/* 2 rows of ld 1024 + 1 fp16: 2050 bytes from 2047 */
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					       SPYRE_DTYPE_FP16, 2, 1,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_MEM(&X, 2047), 1024));
	EXPECT_EQ(0, spyre_cmdbuf_reduce(self->cb, SPYRE_REDUCE_SUM,
					 SPYRE_DTYPE_FP16, 2, 1,
					 SPYRE_MEM_VA(0x1000),
					 SPYRE_MEM(&X, 2046), 1024));
	EXPECT_EQ(3, spyre_cmdbuf_count(self->cb));
}

TEST_F(cb, rowop_bytes_and_checks)
{
	FAKE_BO(X, 0x100000, 8192);
	FAKE_BO(G, 0x200000, 4096);
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_LAYERNORM,
					SPYRE_DTYPE_FP16, 4, 64,
					SPYRE_MEM(&X, 4096), 0,
					SPYRE_MEM(&X, 0), 128,
					SPYRE_MEM(&G, 0), SPYRE_MEM(&G, 256),
					1e-5f));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(SPYRE_OP_ROWOP, le(d, 0, 2));
	EXPECT_EQ(0, le(d, 2, 2));
	EXPECT_EQ(80, le(d, 4, 4));
	EXPECT_EQ(SPYRE_ROW_LAYERNORM, le(d, 8, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP16, le(d, 12, 4));
	EXPECT_EQ(4, le(d, 16, 4));
	EXPECT_EQ(64, le(d, 20, 4));
	EXPECT_EQ(0x100000, le(d, 24, 8));	/* src */
	EXPECT_EQ(0x101000, le(d, 32, 8));	/* dst */
	EXPECT_EQ(128, le(d, 40, 8));		/* ld_src */
	EXPECT_EQ(64, le(d, 48, 8));		/* ld_dst = cols */
	EXPECT_EQ(0x200000, le(d, 56, 8));	/* gamma */
	EXPECT_EQ(0x200100, le(d, 64, 8));	/* beta */
	EXPECT_EQ(fbits(1e-5f), le(d, 72, 4));
	EXPECT_EQ(0, le(d, 76, 4));
	EXPECT_EQ(2, spyre_cmdbuf_bos(self->cb, NULL));

	/* in place softmax, rmsnorm without gamma */
	EXPECT_EQ(0, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_SOFTMAX,
					SPYRE_DTYPE_FP32, 8, 8,
					SPYRE_MEM(&X, 0), 0, SPYRE_MEM(&X, 0),
					0, SPYRE_MEM_NONE, SPYRE_MEM_NONE, 0));
	EXPECT_EQ(0, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_RMSNORM,
					SPYRE_DTYPE_BF16, 8, 8,
					SPYRE_MEM(&X, 0), 0, SPYRE_MEM(&X, 0),
					0, SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					1e-6f));
	/* op, eps, unused gamma/beta, lds, ranges */
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, 4, SPYRE_DTYPE_FP32,
					      1, 1, SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					      0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_RMSNORM,
					      SPYRE_DTYPE_FP32, 1, 1,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					      -1e-6f));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_LAYERNORM,
					      SPYRE_DTYPE_FP32, 1, 1,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					      NAN));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_SOFTMAX,
					      SPYRE_DTYPE_FP32, 1, 1,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x2000),
					      SPYRE_MEM_NONE, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_RMSNORM,
					      SPYRE_DTYPE_FP32, 1, 1,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_NONE,
					      SPYRE_MEM_VA(0x2000), 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_SOFTMAX,
					      SPYRE_DTYPE_FP8_E4M3, 1, 1,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					      0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_SOFTMAX,
					      SPYRE_DTYPE_FP32, 2, 4,
					      SPYRE_MEM_VA(0x1000), 3,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					      0));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_RMSNORM,
					      SPYRE_DTYPE_FP32, 1, 1025,
					      SPYRE_MEM_VA(0x1000), 0,
					      SPYRE_MEM_VA(0x10000), 0,
					      SPYRE_MEM(&G, 0), SPYRE_MEM_NONE,
					      0));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_rowop(self->cb, SPYRE_ROW_SOFTMAX,
					      SPYRE_DTYPE_FP32, 8, 257,
					      SPYRE_MEM(&X, 0), 0,
					      SPYRE_MEM_VA(0x10000), 0,
					      SPYRE_MEM_NONE, SPYRE_MEM_NONE,
					      0));
	EXPECT_EQ(3, spyre_cmdbuf_count(self->cb));
}

TEST_F(cb, convert_bytes_and_checks)
{
	FAKE_BO(X, 0x100000, 4096);
	FAKE_BO(Y, 0x200000, 4096);
	const uint8_t *d;

	ASSERT_EQ(0, spyre_cmdbuf_convert(self->cb, SPYRE_MEM(&Y, 0),
					  SPYRE_DTYPE_FP8_E4M3,
					  SPYRE_MEM(&X, 0), SPYRE_DTYPE_FP16,
					  2048, SPYRE_CMD_F_NOSAT));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(SPYRE_OP_COPY, le(d, 0, 2));
	EXPECT_EQ(SPYRE_CMD_F_NOSAT, le(d, 2, 2));
	EXPECT_EQ(64, le(d, 4, 4));
	EXPECT_EQ(0x100000, le(d, 8, 8));	/* src */
	EXPECT_EQ(0x200000, le(d, 16, 8));	/* dst */
	EXPECT_EQ(2048, le(d, 24, 8));		/* width */
	EXPECT_EQ(1, le(d, 32, 8));		/* height */
	EXPECT_EQ(0, le(d, 40, 8));
	EXPECT_EQ(0, le(d, 48, 8));
	EXPECT_EQ(SPYRE_DTYPE_FP16, le(d, 56, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP8_E4M3, le(d, 60, 4));
	EXPECT_EQ(2, spyre_cmdbuf_bos(self->cb, NULL));

	EXPECT_EQ(-ERANGE, spyre_cmdbuf_convert(self->cb, SPYRE_MEM(&Y, 0),
						SPYRE_DTYPE_FP32,
						SPYRE_MEM(&X, 0),
						SPYRE_DTYPE_FP16, 1025, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_convert(self->cb, SPYRE_MEM(&Y, 0),
						SPYRE_DTYPE_INT32,
						SPYRE_MEM(&X, 0),
						SPYRE_DTYPE_FP16, 1, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_convert(self->cb, SPYRE_MEM(&Y, 0),
						SPYRE_DTYPE_FP32,
						SPYRE_MEM(&X, 0),
						SPYRE_DTYPE_FP16, 0, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_convert(self->cb, SPYRE_MEM(&Y, 0),
						SPYRE_DTYPE_FP32,
						SPYRE_MEM(&X, 0),
						SPYRE_DTYPE_FP16, 1, 2));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_convert(self->cb, SPYRE_MEM_NONE,
						SPYRE_DTYPE_FP32,
						SPYRE_MEM(&X, 0),
						SPYRE_DTYPE_FP16, 1, 0));
	EXPECT_EQ(-E2BIG, spyre_cmdbuf_convert(self->cb, SPYRE_MEM_VA(0x1000),
					       SPYRE_DTYPE_FP32,
					       SPYRE_MEM_VA(0x1000),
					       SPYRE_DTYPE_FP16,
					       SPYRE_CMD_MAX_COPY_BYTES / 4 + 1, 0));
	EXPECT_EQ(0, spyre_cmdbuf_convert(self->cb, SPYRE_MEM_VA(0x1000),
					  SPYRE_DTYPE_U8, SPYRE_MEM_VA(0x2000),
					  SPYRE_DTYPE_U8, SPYRE_CMD_MAX_COPY_BYTES, 0));
	EXPECT_EQ(2, spyre_cmdbuf_count(self->cb));
}

TEST_F(cb, fill_mem_and_copy_mem)
{
	FAKE_BO(X, 0x100000, 4096);
	FAKE_BO(Y, 0x200000, 8192);
	struct spyre_bo *const *bos;
	const uint8_t *d;

	/* FILL: bytes as spyre_cmdbuf_fill() at the operand's VA */
	ASSERT_EQ(0, spyre_cmdbuf_fill_mem(self->cb, SPYRE_MEM(&X, 64), 1008,
					   4, 0x3f800000));
	d = spyre_cmdbuf_data(self->cb);
	EXPECT_EQ(SPYRE_OP_FILL, le(d, 0, 2));
	EXPECT_EQ(40, le(d, 4, 4));
	EXPECT_EQ(0x100040, le(d, 8, 8));
	EXPECT_EQ(1008, le(d, 16, 8));
	EXPECT_EQ(0x3f800000, le(d, 24, 8));
	EXPECT_EQ(4, le(d, 32, 4));
	EXPECT_EQ(0, le(d, 36, 4));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_fill_mem(self->cb, SPYRE_MEM(&X, 64),
						 1009, 4, 0));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_fill_mem(self->cb, SPYRE_MEM(&X, 8192),
						 1, 1, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill_mem(self->cb, SPYRE_MEM_NONE, 1,
						 4, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill_mem(self->cb, SPYRE_MEM(&X, 0), 0,
						 4, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill_mem(self->cb, SPYRE_MEM(&X, 0), 1,
						 3, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_fill_mem(NULL, SPYRE_MEM(&X, 0), 1, 4,
						 0));

	/* 2-D converting COPY: 7 rows of 50 fp32 (pitch 256) to fp16 rows
	 * (pitch 128); the last row ends exactly at each BO's end */
	ASSERT_EQ(0, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 8192 - 6 * 128 - 100),
					   128, SPYRE_DTYPE_FP16,
					   SPYRE_MEM(&X, 4096 - 6 * 256 - 200), 256,
					   SPYRE_DTYPE_FP32, 50, 7,
					   SPYRE_CMD_F_NOSAT));
	d = (const uint8_t *)spyre_cmdbuf_data(self->cb) + 40;
	EXPECT_EQ(SPYRE_OP_COPY, le(d, 0, 2));
	EXPECT_EQ(SPYRE_CMD_F_NOSAT, le(d, 2, 2));
	EXPECT_EQ(64, le(d, 4, 4));
	EXPECT_EQ(0x100000 + 4096 - 6 * 256 - 200, le(d, 8, 8));	/* src */
	EXPECT_EQ(0x200000 + 8192 - 6 * 128 - 100, le(d, 16, 8));	/* dst */
	EXPECT_EQ(50, le(d, 24, 8));
	EXPECT_EQ(7, le(d, 32, 8));
	EXPECT_EQ(256, le(d, 40, 8));
	EXPECT_EQ(128, le(d, 48, 8));
	EXPECT_EQ(SPYRE_DTYPE_FP32, le(d, 56, 4));
	EXPECT_EQ(SPYRE_DTYPE_FP16, le(d, 60, 4));
	ASSERT_EQ(2, spyre_cmdbuf_bos(self->cb, &bos));
	EXPECT_EQ(&X, bos[0]);
	EXPECT_EQ(&Y, bos[1]);
	/* one byte more on either side is out of its BO */
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_copy_mem(self->cb,
			SPYRE_MEM(&Y, 8192 - 6 * 128 - 99), 128,
			SPYRE_DTYPE_FP16, SPYRE_MEM(&X, 0), 256,
			SPYRE_DTYPE_FP32, 50, 7, 0));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0),
			128, SPYRE_DTYPE_FP16,
			SPYRE_MEM(&X, 4096 - 6 * 256 - 199), 256,
			SPYRE_DTYPE_FP32, 50, 7, 0));
	/* a pitch below the row, overflowing spans, bad dtypes and flags */
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0),
			99, SPYRE_DTYPE_FP16, SPYRE_MEM(&X, 0), 200,
			SPYRE_DTYPE_FP32, 50, 2, 0));
	EXPECT_EQ(-ERANGE, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0),
			UINT64_MAX / 2, SPYRE_DTYPE_U8, SPYRE_MEM(&X, 0), 1,
			SPYRE_DTYPE_U8, 1, 3, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0), 0,
			SPYRE_DTYPE_INT32, SPYRE_MEM(&X, 0), 0,
			SPYRE_DTYPE_FP32, 1, 1, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0), 0,
			SPYRE_DTYPE_U8, SPYRE_MEM(&X, 0), 0, SPYRE_DTYPE_U8, 1,
			1, 4));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM_NONE, 0,
			SPYRE_DTYPE_U8, SPYRE_MEM(&X, 0), 0, SPYRE_DTYPE_U8, 1,
			1, 0));
	EXPECT_EQ(-EINVAL, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0), 0,
			SPYRE_DTYPE_U8, SPYRE_MEM(&X, 0), 0, SPYRE_DTYPE_U8, 0,
			1, 0));
	EXPECT_EQ(-E2BIG, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM_VA(0x1000),
			0, SPYRE_DTYPE_FP32, SPYRE_MEM_VA(0x1000), 0,
			SPYRE_DTYPE_FP16, SPYRE_CMD_MAX_COPY_BYTES / 4 + 1, 1, 0));
	/* height 1: pitches are not used and encoded as 0 */
	ASSERT_EQ(0, spyre_cmdbuf_copy_mem(self->cb, SPYRE_MEM(&Y, 0), 5,
			SPYRE_DTYPE_U8, SPYRE_MEM(&X, 0), 7, SPYRE_DTYPE_U8,
			4096, 1, 0));
	d = (const uint8_t *)spyre_cmdbuf_data(self->cb) + 40 + 64;
	EXPECT_EQ(0, le(d, 40, 8));
	EXPECT_EQ(0, le(d, 48, 8));
	EXPECT_EQ(3, spyre_cmdbuf_count(self->cb));
}

TEST_F(cb, bo_list_follows_commands)
{
	FAKE_BO(X, 0x100000, 4096);
	FAKE_BO(Y, 0x200000, 4096);
	struct spyre_bo *const *bos;

	ASSERT_EQ(0, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_MUL,
					  SPYRE_DTYPE_FP32, 4,
					  SPYRE_MEM(&X, 0), SPYRE_MEM(&X, 16),
					  SPYRE_MEM(&X, 32), 0));
	ASSERT_EQ(1, spyre_cmdbuf_bos(self->cb, &bos));
	EXPECT_EQ(&X, bos[0]);
	/* a failed encoder adds nothing */
	ASSERT_EQ(-ERANGE, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_EXP,
						SPYRE_DTYPE_FP32, 1025,
						SPYRE_MEM(&Y, 0),
						SPYRE_MEM_VA(0x3000),
						SPYRE_MEM_NONE, 0));
	ASSERT_EQ(1, spyre_cmdbuf_bos(self->cb, NULL));
	ASSERT_EQ(0, spyre_cmdbuf_convert(self->cb, SPYRE_MEM(&Y, 0),
					  SPYRE_DTYPE_FP16, SPYRE_MEM(&X, 0),
					  SPYRE_DTYPE_FP32, 16, 0));
	ASSERT_EQ(2, spyre_cmdbuf_bos(self->cb, &bos));
	EXPECT_EQ(&X, bos[0]);
	EXPECT_EQ(&Y, bos[1]);
	/* many distinct BOs: the list grows */
	for (int i = 0; i < 100; i++) {
		static struct spyre_bo many[100];

		many[i].va = 0x1000000 + 0x10000ull * i;
		many[i].size = 4096;
		ASSERT_EQ(0, spyre_cmdbuf_eltwise(self->cb, SPYRE_ELT_RELU,
						  SPYRE_DTYPE_FP32, 8,
						  SPYRE_MEM(&many[i], 0),
						  SPYRE_MEM(&many[i], 32),
						  SPYRE_MEM_NONE, 0));
	}
	ASSERT_EQ(102, spyre_cmdbuf_bos(self->cb, &bos));
	spyre_cmdbuf_reset(self->cb);
	EXPECT_EQ(0, spyre_cmdbuf_bos(self->cb, NULL));
}

TEST(null_handles_are_safe)
{
	spyre_cmdbuf_destroy(NULL);
	spyre_cmdbuf_reset(NULL);
	ASSERT_EQ(0, spyre_cmdbuf_size(NULL));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_create(NULL));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_nop(NULL));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_upload(NULL, NULL, NULL));
	ASSERT_EQ(0, spyre_bo_va(NULL));
	ASSERT_EQ(0, spyre_bo_size(NULL));
	ASSERT_EQ(0, spyre_queue_id(NULL));
	ASSERT_EQ(-EINVAL, spyre_bo_alloc(NULL, 4096, 0, NULL));
	ASSERT_EQ(-EINVAL, spyre_device_fd(NULL));
	ASSERT_EQ(-EINVAL, spyre_submit(NULL, NULL, NULL, 0, NULL, 0, NULL));
	spyre_bo_free(NULL);
	spyre_queue_destroy(NULL);
	spyre_stream_destroy(NULL);
	spyre_device_close(NULL);
	/* 0.4 objects */
	spyre_event_destroy(NULL);
	spyre_graph_destroy(NULL);
	ASSERT_EQ(0, spyre_graph_size(NULL));
	ASSERT_EQ(0, spyre_cmdbuf_bos(NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_cmdbuf_gemm(NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_event_create(NULL, 0, NULL));
	ASSERT_EQ(-EINVAL, spyre_event_record(NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_event_wait(NULL, 0));
	ASSERT_EQ(-EINVAL, spyre_event_query(NULL));
	ASSERT_EQ(-EINVAL, spyre_event_elapsed_ns(NULL, NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_event_export_sync_file(NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_event_import_sync_file(NULL, -1));
	ASSERT_EQ(-EINVAL, spyre_graph_create(NULL, NULL, NULL, 0, 0, NULL));
	ASSERT_EQ(-EINVAL, spyre_graph_launch(NULL, NULL, 1));
	/* 0.7 */
	ASSERT_EQ(-EINVAL, spyre_graph_launch_staged(NULL, NULL, NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_stream_submit(NULL, NULL, NULL, 0));
	ASSERT_EQ(-EINVAL, spyre_stream_gemm(NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_stream_query(NULL));
	ASSERT_EQ(-EINVAL, spyre_stream_error(NULL));
	ASSERT_EQ(-EINVAL, spyre_stream_wait_event(NULL, NULL));
	ASSERT_EQ(-EINVAL, spyre_stream_copy_h2d(NULL, NULL, 0, NULL, 1));
	ASSERT_EQ(-EINVAL, spyre_stream_copy_d2h(NULL, NULL, NULL, 0, 1));
	ASSERT_EQ(-EINVAL, spyre_stream_copy_peer(NULL, NULL, 0, NULL, NULL,
						  0, 1));
	ASSERT_EQ(-EINVAL, spyre_stream_softmax(NULL, SPYRE_DTYPE_FP16, 1, 1,
						SPYRE_MEM_VA(0x1000), 0,
						SPYRE_MEM_VA(0x1000), 0));
}

TEST(zeroed_fence_is_signalled)
{
	struct spyre_fence f = { NULL, 0 };
	struct spyre_fence bad = { NULL, 5 };

	ASSERT_EQ(0, spyre_fence_wait(&f, 0));
	ASSERT_EQ(0, spyre_fence_query(&f));
	ASSERT_EQ(-EINVAL, spyre_fence_wait(&bad, 0));
	ASSERT_EQ(-EINVAL, spyre_fence_wait(NULL, 0));
}

TEST_HARNESS_MAIN
