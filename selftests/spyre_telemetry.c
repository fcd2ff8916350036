// SPDX-License-Identifier: MIT
/*
 * spyre_telemetry: what a client and an operator can read about the
 * card's use.  fdinfo_*: the DRM fdinfo keys of an open card
 * (/proc/self/fdinfo, Documentation/gpu/drm-usage-stats.rst) move with the
 * client's own work: busy time with its jobs, memory with its BOs, the
 * engine capacity with its queues.  telemetry_*: the card's sysfs
 * counters (docs/ABI/sysfs-driver-spyre) are readable by anyone and move
 * with the work, its faults and its queue; they keep counting across
 * resets and runtime suspend (spyre_power).  smi_*: spyre-smi's overview,
 * ps and JSON, seen from another process of the same user.
 */
#include <sys/stat.h>

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

/* Every counter of the card's sysfs telemetry and health, by name. */
static const char *const tel_names[] = {
	"busy_ns", "active_ns", "jobs_completed", "commands_completed",
	"bytes_moved", "mmu_faults", "fault_records_lost", "queue_errors",
	"jobs_in_flight", "mem_devmem_total", "mem_devmem_used",
	"mem_sysmem_used", "mem_userptr_used", "resets", "recoveries",
	"fatal_errors", "hangs", "lost_irqs", "spurious_irqs",
	"corrupt_completions", "jobs_replayed", "jobs_lost", "aer_errors",
};

static uint64_t tel(const char *name)
{
	uint64_t v = UINT64_MAX;

	if (st_sysfs_u64(0, name, &v))
		return UINT64_MAX;
	return v;
}

TEST(telemetry_counters_move_under_load_and_are_world_readable)
{
	uint64_t busy0, act0, jobs0, cmds0, bytes0, busy1, act1;
	long long fd_busy0, fd_busy1;
	struct st_ctx x;
	struct st_buf a, b;
	struct st_cs cs;
	char path[256];
	struct stat sb;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	for (unsigned int i = 0; i < ARRAY_SIZE(tel_names); i++) {
		ASSERT_EQ(0, st_sysfs_path(0, tel_names[i], path,
					   sizeof(path)));
		ASSERT_EQ(0, stat(path, &sb)) TH_LOG("%s", path);
		ASSERT_EQ(0444, sb.st_mode & 0777) TH_LOG("%s", path);
		ASSERT_NE(UINT64_MAX, tel(tel_names[i])) TH_LOG("%s", path);
	}

	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 4 * MiB, &a));
	ASSERT_EQ(0, st_buf_new(&x, 4 * MiB, &b));
	busy0 = tel("busy_ns");
	act0 = tel("active_ns");
	jobs0 = tel("jobs_completed");
	cmds0 = tel("commands_completed");
	bytes0 = tel("bytes_moved");
	fd_busy0 = fdinfo(x.fd, "drm-engine-compute");

	/* 4 MiB written by the fill, 4 MiB read and 4 MiB written by the copy */
	st_cs_reset(&cs);
	st_cs_fill(&cs, a.va, MiB / 2, 8, 0x74656c656d657472ull);
	st_cs_bytes(&cs, b.va, a.va, 4 * MiB);
	ASSERT_EQ(0, st_run(&x, &cs));
	ASSERT_EQ(0, memcmp(a.p, b.p, 4 * MiB));

	ASSERT_LE(jobs0 + 1, tel("jobs_completed"));
	ASSERT_LE(cmds0 + 2, tel("commands_completed"));
	ASSERT_LE(bytes0 + 12 * MiB, tel("bytes_moved"));
	busy1 = tel("busy_ns");
	act1 = tel("active_ns");
	fd_busy1 = fdinfo(x.fd, "drm-engine-compute");
	ASSERT_LT(busy0, busy1);
	ASSERT_LT(act0, act1);
	/* the union of the jobs' spans never exceeds their sum */
	ASSERT_LE(act1 - act0, busy1 - busy0);
	/* the client's own busy time is part of the card's */
	ASSERT_LT(fd_busy0, fd_busy1);
	ASSERT_LE((uint64_t)(fd_busy1 - fd_busy0), busy1 - busy0);
	TH_LOG("card busy +%llu ns, active +%llu ns, the client's +%lld ns",
	       (unsigned long long)(busy1 - busy0),
	       (unsigned long long)(act1 - act0), fd_busy1 - fd_busy0);
	st_close(&x);
}

TEST(telemetry_jobs_in_flight_counts_queued_work)
{
	uint64_t base, held, left = 0;
	struct st_buf gate, m;
	struct st_ctx x;
	struct st_cs cs;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&x, 4096, &m));
	base = tel("jobs_in_flight");

	/* one job waits for the CPU to open a gate, 15 more queue behind it */
	st_cs_reset(&cs);
	st_cs_sem(&cs, false, 0, gate.va, 1);
	ASSERT_EQ(0, st_submit_cs(&x, x.qid, &cs, NULL, 0, 0, 0));
	for (int i = 0; i < 15; i++) {
		st_cs_reset(&cs);
		st_cs_fill(&cs, m.va + 8 * i, 1, 8, i);
		ASSERT_EQ(0, st_submit_cs(&x, x.qid, &cs, NULL, 0,
					  i == 14 ? x.sync : 0, 0));
	}
	held = tel("jobs_in_flight");
	ASSERT_LE(base + 16, held);
	__atomic_store_n((uint64_t *)gate.p, 1, __ATOMIC_SEQ_CST);
	ASSERT_EQ(0, st_wait_status(x.fd, x.sync, ST_TIMEOUT_NS));
	/* retired jobs are freed by the scheduler's work soon after */
	for (int i = 0; i < 500; i++) {
		left = tel("jobs_in_flight");
		if (left <= base)
			break;
		usleep(10000);
	}
	ASSERT_GE(base, left);
	TH_LOG("jobs in flight: %llu while held, %llu after",
	       (unsigned long long)held, (unsigned long long)left);
	st_close(&x);
}

TEST(telemetry_faults_and_queue_errors_are_counted)
{
	uint64_t faults0, errors0;
	struct st_ctx x;
	struct st_buf a;
	struct st_cs cs;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 64 * 1024, &a));
	faults0 = tel("mmu_faults");
	errors0 = tel("queue_errors");
	/* a fill that runs past its 64 KiB BO into unmapped VA */
	st_cs_reset(&cs);
	st_cs_fill(&cs, a.va, 1ull << 20, 8, 1);
	ASSERT_EQ(-EFAULT, st_run(&x, &cs));
	ASSERT_LE(faults0 + 1, tel("mmu_faults"));
	ASSERT_LE(errors0 + 1, tel("queue_errors"));
	st_close(&x);
}

TEST_HARNESS_MAIN
