// SPDX-License-Identifier: MIT
/*
 * spyre_quota: fair sharing between the files of a card.  One open file
 * holds at most max_queues_per_file queues and max_devmem_per_file_mb of
 * device memory (module parameters); past them QUEUE_CREATE and BO_CREATE
 * fail with -EDQUOT, while another file still gets its share, and freeing
 * gives the room back.  Each test lowers a parameter and restores it.
 * Needs root (the parameters are root's to write); SKIPs otherwise.
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

#define PARAM_DIR	"/sys/module/spyre/parameters/"
#define MiB		(1ull << 20)

static int param_get(const char *name, char *buf, size_t len)
{
	char path[128];
	int ret;

	snprintf(path, sizeof(path), PARAM_DIR "%s", name);
	ret = st_read_line(path, buf, (int)len);
	if (!ret)
		buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

static int param_set(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), PARAM_DIR "%s", name);
	return st_write_line(path, val);
}

FIXTURE(quota) {
	int a, b;
	char saved[32];
	const char *param;
};

FIXTURE_SETUP(quota)
{
	self->a = self->b = -1;
	self->param = NULL;
	if (geteuid())
		SKIP(return, "needs root (module parameters)");
	self->a = st_open_card(0);
	self->b = st_open_card(0);
	ASSERT_LE(0, self->a);
	ASSERT_LE(0, self->b);
}

FIXTURE_TEARDOWN(quota)
{
	if (self->param)
		param_set(self->param, self->saved);
	if (self->a >= 0)
		close(self->a);
	if (self->b >= 0)
		close(self->b);
}

static void lower(struct __test_metadata *_metadata,
		  FIXTURE_DATA(quota) *self, const char *name, const char *val)
{
	ASSERT_EQ(0, param_get(name, self->saved, sizeof(self->saved)));
	self->param = name;
	ASSERT_EQ(0, param_set(name, val));
}

TEST_F(quota, quota_queues_per_file)
{
	uint32_t q[5], qb[4];

	lower(_metadata, self, "max_queues_per_file", "4");
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, st_queue_new(self->a, DRM_SPYRE_PRIORITY_NORMAL,
					     &q[i]));
	ASSERT_EQ(-EDQUOT, st_queue_new(self->a, DRM_SPYRE_PRIORITY_HIGH,
					   &q[4]));
	/* another file has its own four */
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, st_queue_new(self->b, DRM_SPYRE_PRIORITY_LOW,
					     &qb[i]));
	ASSERT_EQ(-EDQUOT, st_queue_new(self->b, DRM_SPYRE_PRIORITY_LOW,
					   &q[4]));
	/* a destroyed queue gives its place back, and only one */
	ASSERT_EQ(0, st_queue_del(self->a, q[1]));
	ASSERT_EQ(-ENOENT, st_queue_del(self->a, q[1]));
	ASSERT_EQ(0, st_queue_new(self->a, DRM_SPYRE_PRIORITY_NORMAL,
				     &q[1]));
	ASSERT_EQ(-EDQUOT, st_queue_new(self->a, DRM_SPYRE_PRIORITY_NORMAL,
					   &q[4]));
	/* 0 lifts the cap */
	ASSERT_EQ(0, param_set("max_queues_per_file", "0"));
	ASSERT_EQ(0, st_queue_new(self->a, DRM_SPYRE_PRIORITY_NORMAL,
				     &q[4]));
}

TEST_F(quota, quota_devmem_per_file)
{
	struct drm_spyre_memory_info mi;
	uint32_t h[4], hb, hs;
	uint64_t va;

	ASSERT_EQ(0, st_query_memory(self->a, &mi));
	if (mi.devmem_total < 16 * MiB)
		SKIP(return, "card has %llu bytes of device memory",
		     (unsigned long long)mi.devmem_total);
	lower(_metadata, self, "max_devmem_per_file_mb", "4");
	ASSERT_EQ(0, st_bo_new_flags(self->a, 2 * MiB, DRM_SPYRE_BO_DEVICE,
					&h[0], &va));
	ASSERT_EQ(0, st_bo_new_flags(self->a, 2 * MiB, DRM_SPYRE_BO_DEVICE,
					&h[1], &va));
	ASSERT_EQ(-EDQUOT, st_bo_new_flags(self->a, 4096,
					      DRM_SPYRE_BO_DEVICE, &h[2], &va));
	/* system memory is not capped by it */
	ASSERT_EQ(0, st_bo_new(self->a, 4 * MiB, &hs, &va));
	/* the card is not full: another file gets its 4 MiB */
	ASSERT_EQ(0, st_bo_new_flags(self->b, 4 * MiB, DRM_SPYRE_BO_DEVICE,
					&hb, &va));
	ASSERT_EQ(0, st_query_memory(self->a, &mi));
	ASSERT_EQ(4 * MiB, mi.file_devmem_used);
	/* freeing gives the room back */
	ASSERT_EQ(0, drmCloseBufferHandle(self->a, h[0]));
	ASSERT_EQ(0, st_bo_new_flags(self->a, 2 * MiB, DRM_SPYRE_BO_DEVICE,
					&h[2], &va));
	ASSERT_EQ(-EDQUOT, st_bo_new_flags(self->a, 4096,
					      DRM_SPYRE_BO_DEVICE, &h[3], &va));
	/* a BO bigger than the card is -E2BIG, whatever the cap */
	ASSERT_EQ(-E2BIG, st_bo_new_flags(self->a, mi.devmem_total * 2,
					     DRM_SPYRE_BO_DEVICE, &h[3], &va));
}

TEST_HARNESS_MAIN
