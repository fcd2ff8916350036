// SPDX-License-Identifier: MIT
/*
 * spyre_unplug: hot-unplug and re-plug of one of two cards under load.
 * The host removes and re-adds the second card through QMP
 * (scripts/qmp-hotplug.py, UNPLUG_CYCLES times, default 3, starting once
 * the test says it is ready, and each step only after the test has
 * reported the previous one: a slow kernel sets the pace, not a timer) while
 *  - a child keeps running fill jobs on the first card, each checked:
 *    none may fail;
 *  - the test runs fill jobs on the second card whenever it is there:
 *    when it goes, its jobs and ioctls may fail only with -ENODEV (or
 *    -ECANCELED for jobs the removal cut short); when it comes back (a new
 *    accel node, whose permissions the hotplug helper applies from
 *    udev/70-spyre.rules) the test user opens it and its jobs run
 *    correctly again.
 * Runs only when named: make test boots a guest of its own for it, with
 * the host side running.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define UNPLUG_TIMEOUT_S	600

struct shared {
	volatile int stop;
	uint64_t ok, bad;
	int err;
};

/* accel minor of the card at @pci (or, with @other, any other card). */
static int u_find(const char *pci, bool other)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(d[i].pci_addr, pci) != other)
			return (int)d[i].accel_minor;
	return -1;
}

static int u_open_minor(int minor, struct st_ctx *x)
{
	char node[64];
	int ret;

	memset(x, 0, sizeof(*x));
	snprintf(node, sizeof(node), "/dev/accel/accel%d", minor);
	x->fd = open(node, O_RDWR | O_CLOEXEC);
	if (x->fd < 0) {
		x->fd = -1;
		return -errno;
	}
	ret = st_query_info(x->fd, &x->di);
	if (!ret)
		ret = st_queue_new(x->fd, DRM_SPYRE_PRIORITY_NORMAL, &x->qid);
	if (!ret)
		ret = st_bo_map_new(x->fd, ST_EXEC_CMD_BO_SIZE, 0, &x->cmd);
	if (!ret && drmSyncobjCreate(x->fd, 0, &x->sync))
		ret = -errno;
	if (!ret)
		x->handles[0] = x->cmd.h;
	return ret;
}

/* One checked fill job on @x: 0, or the error of the ioctl or the job. */
static int u_job(struct st_ctx *x, struct st_buf *b, uint32_t v)
{
	struct st_cs cs;
	int ret;

	st_cs_reset(&cs);
	st_cs_fill(&cs, b->va, 1024, 4, v);
	ret = st_run(x, &cs);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < 1024; i++)
		if (((uint32_t *)b->p)[i] != v)
			return -EBADMSG;
	return 0;
}

static void card0_loop(const char *pci, struct shared *sh)
{
	struct st_ctx x;
	struct st_buf b;
	int minor = u_find(pci, false);

	if (minor < 0 || u_open_minor(minor, &x) || st_buf_new(&x, 4096, &b)) {
		sh->err = -ENODEV;
		_exit(1);
	}
	for (uint32_t v = 1; !sh->stop; v++) {
		int ret = u_job(&x, &b, v);

		if (ret) {
			sh->bad++;
			sh->err = ret;
		} else {
			sh->ok++;
		}
	}
	st_close(&x);
	_exit(0);
}

FIXTURE(hot) {
	int unused;
};

FIXTURE_SETUP(hot)
{
	if (spyre_device_count() < 2)
		SKIP(return, "needs two cards");
}

FIXTURE_TEARDOWN(hot)
{
}

TEST_F_TIMEOUT(hot, unplug_replug_under_load, UNPLUG_TIMEOUT_S + 60)
{
	const char *e = getenv("UNPLUG_CYCLES");
	unsigned int cycles = e && *e ? strtoul(e, NULL, 0) : 3;
	unsigned int unplugs = 0, replugs = 0, other_errors = 0;
	uint64_t jobs1 = 0, enodev = 0, eacces = 0;
	struct spyre_device_desc d[2];
	struct shared *sh;
	bool present = true, was_gone = false;
	double end = st_now() + UNPLUG_TIMEOUT_S;
	char pci0[32];
	pid_t pid;
	int status, last_err = 0;

	ASSERT_LE(2, spyre_device_list(d, 2));
	snprintf(pci0, sizeof(pci0), "%s", d[0].pci_addr);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, (void *)sh);
	memset(sh, 0, sizeof(*sh));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		card0_loop(pci0, sh);
	/* scripts/qmp-hotplug.py waits for this line before its first unplug */
	TH_LOG("ready for the host's hot-unplug cycles");

	while (replugs < cycles && st_now() < end) {
		int minor = u_find(pci0, true), ret;
		struct st_ctx x;
		struct st_buf b;

		if (minor < 0) {
			if (present) {
				unplugs++;
				present = false;
				was_gone = true;
				/* qmp-hotplug.py re-plugs only after this line */
				TH_LOG("unplug %u seen", unplugs);
			}
			usleep(20000);
			continue;
		}
		ret = u_open_minor(minor, &x);
		if (!ret)
			ret = st_buf_new(&x, 4096, &b);
		if (ret == -EACCES) {
			/* the hotplug helper has not applied the rule yet */
			eacces++;
			st_close(&x);
			usleep(20000);
			continue;
		}
		for (uint32_t v = 1; !ret; v++) {
			ret = u_job(&x, &b, v);
			if (ret)
				break;
			jobs1++;
			if (was_gone) {
				replugs++;
				was_gone = false;
				/* ... and unplugs again only after this one */
				TH_LOG("re-plug %u seen", replugs);
			}
			present = true;
			if (replugs >= cycles && v > 10)
				break;
		}
		/* st_sync_status() offsets the errno of its own ioctls */
		if (ret <= -2000)
			ret += 2000;
		else if (ret <= -1000)
			ret += 1000;
		if (ret == -ENODEV || ret == -ENOENT || ret == -ECANCELED) {
			enodev++;
		} else if (ret) {
			other_errors++;
			last_err = ret;
		}
		st_close(&x);
	}
	sh->stop = 1;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	TH_LOG("%u unplugs, %u re-plugs; card 1: %llu jobs, %llu -ENODEV/-ECANCELED, %llu opens before the rule applied; card 0: %llu jobs",
	       unplugs, replugs, (unsigned long long)jobs1,
	       (unsigned long long)enodev, (unsigned long long)eacces,
	       (unsigned long long)sh->ok);
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
	EXPECT_EQ(0, sh->bad) TH_LOG("card 0 failed: %d", sh->err);
	EXPECT_LT(0, sh->ok);
	EXPECT_EQ(0, other_errors) TH_LOG("card 1: error %d", last_err);
	EXPECT_LE(cycles, unplugs);
	EXPECT_LE(cycles, replugs);
	munmap(sh, sizeof(*sh));
}

TEST_HARNESS_MAIN
