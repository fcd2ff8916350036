// SPDX-License-Identifier: MIT
/*
 * spyre_telemetry: what a client and an operator can read about the
 * card's use.  fdinfo_*: the DRM fdinfo keys of an open card
 * (/proc/self/fdinfo, Documentation/gpu/drm-usage-stats.rst) move with the
 * client's own work: busy time with its jobs, memory with its BOs, the
 * engine capacity with its queues.
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB	(1ull << 20)

/*
 * Value of fdinfo key @key of @fd, or -1: sizes ("KiB", "MiB") in bytes,
 * other values as printed (busy time in ns).
 */
static long long fdinfo(int fd, const char *key)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			char *end;

			v = strtoll(line + kl + 1, &end, 10);
			if (!strncmp(end, " KiB", 4))
				v <<= 10;
			else if (!strncmp(end, " MiB", 4))
				v <<= 20;
		}
	fclose(f);
	return v;
}

static bool fdinfo_has(int fd, const char *text)
{
	char path[64], line[256];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, text) != NULL;
	fclose(f);
	return found;
}

TEST(fdinfo_keys_move_with_the_clients_work)
{
	long long busy0, busy1, sys0, dev0;
	struct drm_spyre_memory_info mi;
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;
	uint32_t h, q2;
	uint64_t va;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_TRUE(fdinfo_has(x.fd, "drm-driver:\tspyre"));
	ASSERT_LE(0, fdinfo(x.fd, "drm-client-id"));
	busy0 = fdinfo(x.fd, "drm-engine-compute");
	sys0 = fdinfo(x.fd, "drm-total-system");
	dev0 = fdinfo(x.fd, "drm-total-device");
	ASSERT_EQ(0, busy0);
	ASSERT_LE(0, sys0);
	ASSERT_EQ(0, dev0);
	/* one queue: no capacity key (1 by default) */
	ASSERT_EQ(-1, fdinfo(x.fd, "drm-engine-capacity-compute"));

	/* memory: its own BOs, by placement */
	ASSERT_EQ(0, st_bo_new(x.fd, 4 * MiB, &h, &va));
	ASSERT_EQ(sys0 + (long long)(4 * MiB), fdinfo(x.fd, "drm-total-system"));
	ASSERT_EQ(0, st_query_memory(x.fd, &mi));
	if (mi.devmem_total >= 16 * MiB) {
		ASSERT_EQ(0, st_bo_new_flags(x.fd, 8 * MiB, DRM_SPYRE_BO_DEVICE,
					     &h, &va));
		ASSERT_EQ((long long)(8 * MiB),
			  fdinfo(x.fd, "drm-total-device"));
		ASSERT_EQ((long long)(8 * MiB),
			  fdinfo(x.fd, "drm-resident-device"));
	}

	/* busy time: grows with its jobs */
	ASSERT_EQ(0, st_buf_new(&x, 4 * MiB, &b));
	st_cs_reset(&cs);
	for (int i = 0; i < 8; i++)
		st_cs_fill(&cs, b.va, MiB, 4, i);
	ASSERT_EQ(0, st_run(&x, &cs));
	busy1 = fdinfo(x.fd, "drm-engine-compute");
	ASSERT_LT(busy0, busy1);

	/* a second queue: the file can be busy on two at once */
	ASSERT_EQ(0, st_queue_new(x.fd, DRM_SPYRE_PRIORITY_LOW, &q2));
	ASSERT_EQ(2, fdinfo(x.fd, "drm-engine-capacity-compute"));
	/* a destroyed queue's time stays counted */
	ASSERT_EQ(0, st_queue_del(x.fd, x.qid));
	ASSERT_LE(busy1, fdinfo(x.fd, "drm-engine-compute"));
	TH_LOG("16 MiB of fills: %lld ns busy", busy1);
	st_close(&x);
}

TEST_HARNESS_MAIN
