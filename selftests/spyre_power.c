// SPDX-License-Identifier: MIT
/*
 * spyre_power: runtime power management of card 0.  The card suspends
 * about a second after the last user went away and resumes on use; an
 * open file and a live device-memory BO (kept by a dma-buf or a CPU
 * mapping after its file closed) keep it powered; reading its sysfs
 * attributes never wakes it, and its telemetry survives the sleep.  The runtime status is the PCI device's
 * power/runtime_status.  No test holds the card between tests, and no
 * other suite may run at the same time.
 */
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB		(1ull << 20)
#define SUSPEND_WAIT_S	5.0	/* autosuspend is 1 s */

/* Read power/<name> of card 0 into @buf (newline stripped). */
static int p_read(const char *name, char *buf, size_t len)
{
	struct spyre_device_desc d[16];
	char path[192];
	int ret;

	if (spyre_device_list(d, 16) < 1)
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/power/%s",
		 d[0].pci_addr, name);
	ret = st_read_line(path, buf, (int)len);
	if (!ret)
		buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

static bool p_is(const char *want)
{
	char s[32];

	return !p_read("runtime_status", s, sizeof(s)) && !strcmp(s, want);
}

/* Wait up to @secs for runtime_status @want; the seconds it took, or -1. */
static double p_wait(const char *want, double secs)
{
	double t0 = st_now();

	while (st_now() < t0 + secs) {
		if (p_is(want))
			return st_now() - t0;
		usleep(10000);
	}
	return -1;
}

TEST(runtime_pm_idle_suspends_use_resumes)
{
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;
	double t;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_LE(0, p_wait("suspended", SUSPEND_WAIT_S));
	/* An open resumes the card; a job runs correctly after it. */
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_TRUE(p_is("active"));
	ASSERT_EQ(0, st_buf_new(&x, 4096, &b));
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, 1024, 4, 0x706d7274);
	ASSERT_EQ(0, st_run(&x, &cs));
	for (unsigned int i = 0; i < 1024; i++)
		ASSERT_EQ(0x706d7274u, ((uint32_t *)b.p)[i]);
	/* Held while open, however long. */
	usleep(1500000);
	ASSERT_TRUE(p_is("active"));
	st_close(&x);
	t = p_wait("suspended", SUSPEND_WAIT_S);
	ASSERT_LE(0, t);
	TH_LOG("suspended %.2f s after the last file closed", t);
}

TEST(runtime_pm_devmem_bo_holds_card)
{
	struct drm_spyre_memory_info mi;
	uint32_t h;
	uint64_t va;
	int fd, dmabuf;
	void *map;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	fd = st_open_card(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, st_query_memory(fd, &mi));
	if (!mi.devmem_total) {
		close(fd);
		SKIP(return, "no device memory");
	}

	/* A dma-buf keeps the BO, and so the card, after the file closed. */
	ASSERT_EQ(0, st_bo_new_flags(fd, 1 * MiB, DRM_SPYRE_BO_DEVICE, &h, &va));
	ASSERT_EQ(0, drmPrimeHandleToFD(fd, h, DRM_CLOEXEC, &dmabuf));
	close(fd);
	usleep(2000000);
	ASSERT_TRUE(p_is("active"));
	close(dmabuf);
	ASSERT_LE(0, p_wait("suspended", SUSPEND_WAIT_S));

	/* So does a CPU mapping. */
	fd = st_open_card(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, st_bo_new_flags(fd, 1 * MiB, DRM_SPYRE_BO_DEVICE, &h, &va));
	map = st_bo_mmap(fd, h, 1 * MiB);
	ASSERT_NE(MAP_FAILED, map);
	memset(map, 0x5a, 4096);
	close(fd);
	usleep(2000000);
	ASSERT_TRUE(p_is("active"));
	ASSERT_EQ(0x5a, ((volatile uint8_t *)map)[4095]);
	munmap(map, 1 * MiB);
	ASSERT_LE(0, p_wait("suspended", SUSPEND_WAIT_S));

	/* A system-memory BO does not. */
	fd = st_open_card(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, st_bo_new(fd, 1 * MiB, &h, &va));
	ASSERT_EQ(0, drmPrimeHandleToFD(fd, h, DRM_CLOEXEC, &dmabuf));
	close(fd);
	ASSERT_LE(0, p_wait("suspended", SUSPEND_WAIT_S));
	close(dmabuf);
}

/*
 * The card's telemetry is sampled when it suspends and read from there
 * while it sleeps: no read wakes it, and resuming (which resets the card
 * and so its counters) neither loses nor doubles a count.
 */
TEST(telemetry_read_does_not_wake_a_suspended_card)
{
	static const char *const attrs[] = {
		"num_cores", "num_queues", "caps", "resets", "lost_irqs",
		"mem_devmem_used", "mem_devmem_total", "busy_ns", "active_ns",
		"jobs_completed", "commands_completed", "bytes_moved",
		"mmu_faults", "queue_errors", "jobs_in_flight",
	};
	char before[32], after[32], path[ARRAY_SIZE(attrs)][256];
	uint64_t v, jobs0, jobs1;
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 4096, &b));
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, 512, 8, 7);
	ASSERT_EQ(0, st_run(&x, &cs));
	st_close(&x);
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_completed", &jobs0));
	ASSERT_LT(0, jobs0);

	/* the paths once: listing the cards 300 times is slow */
	for (unsigned int i = 0; i < ARRAY_SIZE(attrs); i++)
		ASSERT_EQ(0, st_sysfs_path(0, attrs[i], path[i], sizeof(path[i])));
	ASSERT_LE(0, p_wait("suspended", SUSPEND_WAIT_S));
	ASSERT_EQ(0, p_read("runtime_active_time", before, sizeof(before)));
	for (unsigned int r = 0; r < 20; r++) {
		for (unsigned int i = 0; i < ARRAY_SIZE(attrs); i++) {
			ASSERT_EQ(0, st_read_u64(path[i], &v)) {
				TH_LOG("%s", attrs[i]);
			}
		}
	}
	ASSERT_TRUE(p_is("suspended"));
	ASSERT_EQ(0, p_read("runtime_active_time", after, sizeof(after)));
	ASSERT_STREQ(before, after);
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_completed", &v));
	ASSERT_EQ(jobs0, v);

	/* resumed (the card's counters start from 0): one more job is one */
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 4096, &b));
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, 512, 8, 7);
	ASSERT_EQ(0, st_run(&x, &cs));
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_completed", &jobs1));
	ASSERT_EQ(jobs0 + 1, jobs1);
	st_close(&x);
}

TEST_HARNESS_MAIN
