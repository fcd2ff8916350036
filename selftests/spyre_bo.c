// SPDX-License-Identifier: MIT
/*
 * spyre_bo: BO_CREATE / BO_INFO / mmap / GEM_CLOSE, good and bad input,
 * VA layout (alignment, distinct ranges, guard pages).
 */
#include <stdlib.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

FIXTURE(bo) {
	int fd;
	struct drm_spyre_device_info di;
};

FIXTURE_SETUP(bo)
{
	self->fd = st_open_card(0);
	SKIP_IF_NO_CARD(self->fd);
	ASSERT_EQ(0, st_query_info(self->fd, &self->di));
}

FIXTURE_TEARDOWN(bo)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* ---- sizes ------------------------------------------------------------ */

FIXTURE(bo_size) {
	int fd;
	struct drm_spyre_device_info di;
};

FIXTURE_VARIANT(bo_size) {
	uint64_t size;
	int err;		/* expected ioctl result */
	uint64_t rounded;	/* expected size out */
};

FIXTURE_VARIANT_ADD(bo_size, zero) { .size = 0, .err = -EINVAL };
FIXTURE_VARIANT_ADD(bo_size, one) { .size = 1, .rounded = 4096 };
FIXTURE_VARIANT_ADD(bo_size, page_minus_1) { .size = 4095, .rounded = 4096 };
FIXTURE_VARIANT_ADD(bo_size, page) { .size = 4096, .rounded = 4096 };
FIXTURE_VARIANT_ADD(bo_size, page_plus_1) { .size = 4097, .rounded = 8192 };
FIXTURE_VARIANT_ADD(bo_size, mib_plus_1) { .size = (1 << 20) + 1,
					   .rounded = (1 << 20) + 4096 };
FIXTURE_VARIANT_ADD(bo_size, huge_1p) { .size = 1ull << 50, .err = -E2BIG };
FIXTURE_VARIANT_ADD(bo_size, u64_max) { .size = ~0ull, .err = -E2BIG };
FIXTURE_VARIANT_ADD(bo_size, u64_max_page) { .size = ~0ull - 4095,
					     .err = -E2BIG };

FIXTURE_SETUP(bo_size)
{
	self->fd = st_open_card(0);
	SKIP_IF_NO_CARD(self->fd);
}

FIXTURE_TEARDOWN(bo_size)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(bo_size, create)
{
	struct drm_spyre_bo_create c = { .size = variant->size,
					 .handle = 0xdead, .va = 0xdead };
	struct drm_spyre_bo_info info;

	ASSERT_EQ(variant->err,
		  st_ioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c));
	if (variant->err)
		return;
	EXPECT_EQ(variant->rounded, c.size);
	EXPECT_NE(0, c.handle);
	EXPECT_EQ(0, c.va % PAGE);
	ASSERT_EQ(0, st_bo_get_info(self->fd, c.handle, &info));
	EXPECT_EQ(variant->rounded, info.size);
	EXPECT_EQ(c.va, info.va);
	EXPECT_EQ(0, drmCloseBufferHandle(self->fd, c.handle));
}

/* ---- flags and handles -------------------------------------------------- */

TEST_F(bo, create_bad_flags)
{
	/* DRM_SPYRE_BO_DEVICE (bit 0) is the only placement flag. */
	static const uint32_t bad[] = { 2, 4, 0x100, 0x80000000u, ~0u,
					~DRM_SPYRE_BO_DEVICE,
					DRM_SPYRE_BO_DEVICE | 2 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct drm_spyre_bo_create c = { .size = 4096,
						 .flags = bad[i] };

		EXPECT_EQ(-EINVAL, st_ioctl(self->fd,
			DRM_IOCTL_SPYRE_BO_CREATE, &c)) TH_LOG("flags %#x", bad[i]);
	}
}

TEST_F(bo, info_bad_handle_and_flags)
{
	struct drm_spyre_bo_info info;
	uint32_t h;

	EXPECT_EQ(-ENOENT, st_bo_get_info(self->fd, 0, &info));
	EXPECT_EQ(-ENOENT, st_bo_get_info(self->fd, 0xdeadbeef, &info));
	ASSERT_EQ(0, st_bo_new(self->fd, 4096, &h, NULL));
	EXPECT_EQ(-ENOENT, st_bo_get_info(self->fd, h + 1, &info));
	memset(&info, 0, sizeof(info));
	info.handle = h;
	info.flags = 1;
	EXPECT_EQ(-EINVAL, st_ioctl(self->fd, DRM_IOCTL_SPYRE_BO_INFO,
				    &info));
	/* closed handles are gone; closing twice fails */
	EXPECT_EQ(0, drmCloseBufferHandle(self->fd, h));
	EXPECT_EQ(-ENOENT, st_bo_get_info(self->fd, h, &info));
	EXPECT_NE(0, drmCloseBufferHandle(self->fd, h));
}

TEST_F(bo, info_fields)
{
	struct drm_spyre_bo_info info;
	uint64_t va;
	uint32_t h;

	ASSERT_EQ(0, st_bo_new(self->fd, 3 * PAGE, &h, &va));
	memset(&info, 0xff, sizeof(info));	/* outputs must be written */
	info.handle = h;
	info.flags = 0;
	info.pad = 0;
	ASSERT_EQ(0, st_ioctl(self->fd, DRM_IOCTL_SPYRE_BO_INFO, &info));
	EXPECT_EQ(h, info.handle);
	EXPECT_EQ(DRM_SPYRE_PLACEMENT_SYSTEM, info.placement);
	EXPECT_EQ(0, info.pad);
	EXPECT_EQ(3 * PAGE, info.size);
	EXPECT_EQ(va, info.va);
	EXPECT_EQ(0, info.va % PAGE);
	EXPECT_LE(self->di.va_start, info.va);
	EXPECT_GE(self->di.va_end, info.va + info.size);
	EXPECT_NE(0, info.mmap_offset);
	EXPECT_EQ(0, info.mmap_offset % PAGE);
	EXPECT_NE(~0ull, info.mmap_offset);
}

TEST_F(bo, handles_are_per_file)
{
	struct drm_spyre_bo_info info;
	char node[64];
	uint32_t h;
	int fd2;

	ASSERT_NE(NULL, st_node(0, node, sizeof(node)));
	fd2 = open(node, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, st_bo_new(self->fd, 4096, &h, NULL));
	EXPECT_EQ(-ENOENT, st_bo_get_info(fd2, h, &info));
	close(fd2);
}

/* ---- VA layout ---------------------------------------------------------- */

static int cmp_u64pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

TEST_F(bo, va_distinct_with_guard_gap)
{
	enum { N = 64 };
	uint64_t r[N][2];	/* va, size */
	uint32_t h[N];

	for (int i = 0; i < N; i++) {
		uint64_t size = PAGE * (1 + (uint64_t)(i * 7 % 13));

		ASSERT_EQ(0, st_bo_new(self->fd, size, &h[i], &r[i][0]));
		r[i][1] = size;
		ASSERT_EQ(0, r[i][0] % PAGE);
	}
	qsort(r, N, sizeof(r[0]), cmp_u64pair);
	for (int i = 0; i + 1 < N; i++) {
		ASSERT_LE(r[i][0] + r[i][1] + PAGE, r[i + 1][0])
			TH_LOG("BO at %#llx+%#llx too close to %#llx",
			       (unsigned long long)r[i][0],
			       (unsigned long long)r[i][1],
			       (unsigned long long)r[i + 1][0]);
	}
	/* Freed VA may be reused, but never overlapping a live BO. */
	for (int i = 0; i < N; i += 2) {
		ASSERT_EQ(0, drmCloseBufferHandle(self->fd, h[i]));
	}
}

TEST_F(bo, va_spaces_are_per_file)
{
	/* Two files may be given the same VA: each has its own VM. */
	struct drm_spyre_bo_info a, b;
	char node[64];
	uint32_t ha, hb;
	int fd2;

	ASSERT_NE(NULL, st_node(0, node, sizeof(node)));
	fd2 = open(node, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, st_bo_new(self->fd, PAGE, &ha, NULL));
	ASSERT_EQ(0, st_bo_new(fd2, PAGE, &hb, NULL));
	ASSERT_EQ(0, st_bo_get_info(self->fd, ha, &a));
	ASSERT_EQ(0, st_bo_get_info(fd2, hb, &b));
	EXPECT_LE(self->di.va_start, a.va);
	EXPECT_LE(self->di.va_start, b.va);
	close(fd2);
}

TEST_F(bo, many_bos)
{
	enum { N = 512 };
	static uint32_t h[N];

	for (int i = 0; i < N; i++) {
		ASSERT_EQ(0, st_bo_new(self->fd, PAGE, &h[i], NULL))
			TH_LOG("BO %d", i);
	}
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(0, drmCloseBufferHandle(self->fd, h[i]));
	}
}

/* ---- CPU mappings ------------------------------------------------------- */

TEST_F(bo, mmap_zeroed_and_round_trip)
{
	const uint64_t size = 16 * PAGE;
	uint8_t *p;
	uint32_t h;

	ASSERT_EQ(0, st_bo_new(self->fd, size, &h, NULL));
	p = st_bo_mmap(self->fd, h, size);
	ASSERT_NE(MAP_FAILED, p);
	for (uint64_t i = 0; i < size; i++) {
		ASSERT_EQ(0, p[i]) TH_LOG("new BO not zeroed at %llu",
					  (unsigned long long)i);
	}
	for (uint64_t i = 0; i < size; i++)
		p[i] = st_pat(i, 1);
	ASSERT_EQ(0, munmap(p, size));
	/* A second, independent mapping sees the data. */
	p = st_bo_mmap(self->fd, h, size);
	ASSERT_NE(MAP_FAILED, p);
	for (uint64_t i = 0; i < size; i++) {
		ASSERT_EQ(st_pat(i, 1), p[i]);
	}
	/* Two live mappings alias the same pages. */
	{
		uint8_t *q = st_bo_mmap(self->fd, h, size);

		ASSERT_NE(MAP_FAILED, q);
		q[123] = 0x5a;
		EXPECT_EQ(0x5a, p[123]);
		munmap(q, size);
	}
	munmap(p, size);
}

TEST_F(bo, mapping_outlives_handle_and_fd)
{
	uint8_t *p;
	uint32_t h;

	ASSERT_EQ(0, st_bo_new(self->fd, PAGE, &h, NULL));
	p = st_bo_mmap(self->fd, h, PAGE);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0x3c, PAGE);
	ASSERT_EQ(0, drmCloseBufferHandle(self->fd, h));
	close(self->fd);
	self->fd = -1;
	for (int i = 0; i < (int)PAGE; i++) {
		ASSERT_EQ(0x3c, p[i]);
	}
	ASSERT_EQ(0, munmap(p, PAGE));
}

TEST_F(bo, mmap_private_writable_refused)
{
	struct drm_spyre_bo_info info;
	uint32_t h;
	void *p;

	ASSERT_EQ(0, st_bo_new(self->fd, PAGE, &h, NULL));
	ASSERT_EQ(0, st_bo_get_info(self->fd, h, &info));
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->fd,
		 (off_t)info.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, PAGE);
}

TEST_F(bo, mmap_bad_range_refused)
{
	struct drm_spyre_bo_info info;
	uint32_t h;
	void *p;

	ASSERT_EQ(0, st_bo_new(self->fd, 2 * PAGE, &h, NULL));
	ASSERT_EQ(0, st_bo_get_info(self->fd, h, &info));
	/* longer than the BO */
	p = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 (off_t)info.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, 3 * PAGE);
	/* an offset that names no BO */
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, self->fd,
		 (off_t)(info.mmap_offset + (1ull << 40)));
	EXPECT_EQ(MAP_FAILED, p);
	/* a mapping must start at the BO's offset (DRM core exact lookup);
	 * a shorter one from there is fine */
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 (off_t)(info.mmap_offset + PAGE));
	EXPECT_EQ(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 (off_t)info.mmap_offset);
	EXPECT_NE(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	/* after GEM_CLOSE the offset is dead */
	ASSERT_EQ(0, drmCloseBufferHandle(self->fd, h));
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, self->fd,
		 (off_t)info.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
}

TEST_HARNESS_MAIN
