// SPDX-License-Identifier: MIT
/*
 * Host unit tests: command encoding of libspyre against <drm/spyre_cmd.h>.
 * No device needed.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kselftest_harness.h"

#include <spyre/spyre.h>

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
	/* Commands without an encoder yet: still 8-byte multiples. */
	ASSERT_EQ(0, sizeof(struct spyre_cmd_gemm) % 8);
	ASSERT_EQ(0, sizeof(struct spyre_cmd_eltwise) % 8);
	ASSERT_EQ(0, sizeof(struct spyre_cmd_reduce) % 8);
	ASSERT_EQ(0, sizeof(struct spyre_cmd_rowop) % 8);
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
