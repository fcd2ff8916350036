// SPDX-License-Identifier: MIT
/*
 * spyre_reset: PCI function resets (FLR through sysfs "reset") racing
 * the card's users.  Needs root (the reset attribute is root's): the
 * resets run as root, as an administrator's would, and everything else in
 * child processes that drop to the unprivileged test user (uid/gid 1000,
 * group accel), each with its own context.
 *
 *  - reset_clear_race: while one process resets the card in a loop, an
 *    "owner" context fills a device-memory BO with its bytes and frees
 *    it, and a "reader" context creates one at once (getting the blocks
 *    just freed) and checks that it holds nothing but zeros, through its
 *    CPU mapping (before and after a job), and through a card COPY into a
 *    system-memory BO.  A BO create may fail only with -EIO (the memory
 *    could not be cleared); a COPY may end with -ECANCELED when a reset
 *    interrupted it, and the reader's context must then still be usable
 *    (nobody is guilty of a reset: no sticky error).
 *    SPYRE_RESET_SECONDS (default 6; 60 in the spyre_flr_soak build).
 *  - flr_under_load: SPYRE_FLR_COUNT function resets (default 20; the
 *    spyre_flr_soak build of this file: 600, "make soak-reset") while
 *    two processes keep the card busy with fp16 GEMMs of the identity by
 *    a random B (checked exactly whenever the job succeeds; a GEMM the
 *    reset interrupted ends with -ECANCELED and its context goes on);
 *    afterwards the card serves a new context correctly.  On 2 vCPUs this is the
 *    load under which an unpatched QEMU 10.0 dies
 *    (qemu-device/patches/0001-*).
 *  - fence_replay_bound: a restartable job stuck in SEM_WAIT is
 *    interrupted by function resets: rerun after each of the first
 *    REPLAY_MAX (the driver's SPYRE_MAX_REPLAYS), cancelled (-ECANCELED)
 *    by the next, with nobody guilty.
 */
#include <grp.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#ifndef FLR_DEFAULT_COUNT
#define FLR_DEFAULT_COUNT 20
#endif
#ifndef RESET_DEFAULT_SECONDS
#define RESET_DEFAULT_SECONDS 6
#endif

#define TEST_UID	1000
#define TEST_GID	1000
#define CLEAR_BO	(4ull << 20)	/* bytes per BO of the clear race */
#define OWNER_BYTE	0xa5
#define GEMM_N		256
#define REPLAY_MAX	3	/* SPYRE_MAX_REPLAYS, driver/spyre_job.h */

struct race_stats {
	uint64_t resets, reset_errors;
	uint64_t owner_fills;
	uint64_t checks_cpu, checks_copy;
	uint64_t create_eio, copy_canceled;
	uint64_t leaked_cpu, leaked_copy;	/* non-zero bytes seen */
	uint64_t gemms_ok, gemms_canceled, gemms_bad;
	int32_t err;
	char what[96];
};

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

static void note_err(struct race_stats *st, int err, const char *what)
{
	if (st->err)
		return;
	st->err = err ? err : -1;
	snprintf(st->what, sizeof(st->what), "%s", what);
}

static int drop_privileges(void)
{
	gid_t g = TEST_GID;

	if (setgroups(1, &g) || setgid(TEST_GID) || setuid(TEST_UID))
		return -errno;
	return 0;
}

/*
 * Reset through sysfs until @deadline (or @count resets, if non-zero),
 * @gap_us apart.
 */
static void reset_loop(const char *path, double deadline, unsigned long count,
		       unsigned int gap_us, struct race_stats *st)
{
	for (unsigned long i = 0; count ? i < count : st_now() < deadline;
	     i++) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "1", 1) != 1) {
			st->reset_errors++;
			note_err(st, -errno, "sysfs reset");
		} else {
			st->resets++;
		}
		if (fd >= 0)
			close(fd);
		if (gap_us)
			usleep(gap_us);
	}
}

static uint64_t nonzero_bytes(const uint8_t *p, uint64_t len)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < len; i += PAGE)
		if (!st_all_bytes(p + i, PAGE, 0))
			for (uint64_t j = i; j < i + PAGE; j++)
				n += p[j] != 0;
	return n;
}

static int reader_open(struct st_ctx *x, struct st_bo *dst)
{
	if (st_open(x, 0, DRM_SPYRE_PRIORITY_NORMAL))
		return -ENODEV;
	return st_bo_map_new(x->fd, CLEAR_BO, 0, dst);
}

/*
 * Until @deadline: the owner context fills a device-memory BO with
 * OWNER_BYTE and frees it; the reader context creates one of the same
 * size at once (the allocator hands it the blocks just freed) and checks
 * that it reads as zeros through its CPU mapping, through a card COPY
 * into a system BO (which waits for a reset under way), and through the
 * CPU mapping again after that job.
 */
static void clear_race_loop(double deadline, struct race_stats *st)
{
	int owner = st_open_card(0);
	struct st_ctx x;
	struct st_bo dst;

	if (owner < 0 || reader_open(&x, &dst)) {
		note_err(st, -ENODEV, "open");
		return;
	}
	while (st_now() < deadline && !st->err) {
		struct st_bo bo;
		struct st_cs cs;
		uint32_t handles[3];
		uint64_t n;
		int ret = st_bo_map_new(owner, CLEAR_BO, DRM_SPYRE_BO_DEVICE, &bo);

		if (ret == -EIO) {
			st->create_eio++;
			continue;
		}
		if (ret) {
			note_err(st, ret, "owner BO");
			break;
		}
		memset(bo.map, OWNER_BYTE, bo.size);
		st->owner_fills++;
		st_bo_map_free(owner, &bo);

		ret = st_bo_map_new(x.fd, CLEAR_BO, DRM_SPYRE_BO_DEVICE, &bo);
		if (ret == -EIO) {
			st->create_eio++;
			continue;
		}
		if (ret) {
			note_err(st, ret, "reader BO");
			break;
		}
		n = nonzero_bytes(bo.map, bo.size);
		st->leaked_cpu += n;
		st->checks_cpu++;

		memset(dst.map, 0xff, dst.size);
		st_cs_reset(&cs);
		st_cs_bytes(&cs, dst.va, bo.va, CLEAR_BO);
		memcpy(x.cmd.map, cs.buf, cs.len);
		handles[0] = x.cmd.h;
		handles[1] = bo.h;
		handles[2] = dst.h;
		ret = st_submit_job(x.fd, x.qid, x.cmd.va, cs.len, handles,
				    3, NULL, 0, x.sync, 0, NULL);
		if (!ret)
			ret = st_wait_status(x.fd, x.sync,
					     3 * ST_TIMEOUT_NS);
		if (!ret) {
			n = nonzero_bytes(dst.map, CLEAR_BO);
			st->leaked_copy += n;
			st->checks_copy++;
		}
		n = nonzero_bytes(bo.map, bo.size);
		st->leaked_cpu += n;
		st->checks_cpu++;
		st_bo_map_free(x.fd, &bo);
		if (ret == -ECANCELED) {
			/* a reset interrupted the job: the context goes on */
			st->copy_canceled++;
			ret = st_ctx_error(x.fd);
			if (ret)
				note_err(st, ret, "reader context sticky");
		} else if (ret) {
			note_err(st, ret, "reader COPY");
		}
	}
	st_bo_map_free(x.fd, &dst);
	st_close(&x);
	close(owner);
}

/* fp16 identity by a random B (fp32 out) until @stop is set. */
static void gemm_loop(volatile int *stop, unsigned int seed,
		      struct race_stats *st)
{
	const uint64_t n = GEMM_N;
	struct st_ctx x;
	struct st_buf a, b, c;
	uint64_t rs = seed;

	for (;;) {
		if (st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL) ||
		    st_buf_new(&x, n * n * 2, &a) || st_buf_new(&x, n * n * 2, &b) ||
		    st_buf_new(&x, n * n * 4, &c)) {
			note_err(st, -ENODEV, "GEMM open");
			return;
		}
		for (uint64_t i = 0; i < n * n; i++) {
			st_store(a.p, SPYRE_DTYPE_FP16, i,
				 i / n == i % n ? 0x3c00 : 0);
			/* finite fp16 values, exact in fp32 */
			st_store(b.p, SPYRE_DTYPE_FP16, i,
				 st_rand(&rs) & 0x3bff);
		}
		while (!*stop) {
			struct st_cs cs;
			int ret;

			st_cs_reset(&cs);
			st_cs_gemm(&cs, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32, n, n,
				   n, a.va, b.va, c.va);
			memset(c.p, 0xff, c.bytes);
			ret = st_run(&x, &cs);
			if (ret == -ECANCELED) {
				/* interrupted by a reset: the context goes on */
				st->gemms_canceled++;
				ret = st_ctx_error(x.fd);
				if (ret) {
					note_err(st, ret, "GEMM context sticky");
					st_close(&x);
					return;
				}
				continue;
			}
			if (ret) {
				note_err(st, ret, "GEMM job");
				st_close(&x);
				return;
			}
			for (uint64_t i = 0; i < n * n; i++) {
				float got = st_u2f(st_load(c.p, SPYRE_DTYPE_FP32,
							   i));
				double want = spyre_ref_decode(SPYRE_DTYPE_FP16,
					st_load(b.p, SPYRE_DTYPE_FP16, i));

				if (got != want) {
					st->gemms_bad++;
					note_err(st, 0, "GEMM result");
					break;
				}
			}
			st->gemms_ok++;
		}
		st_close(&x);
		if (*stop)
			return;
	}
}

FIXTURE(reset) {
	char path[128];
	struct race_stats *st;	/* shared with the children */
};

FIXTURE_SETUP(reset)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	self->st = MAP_FAILED;
	if (geteuid() != 0)
		SKIP(return, "needs root (sysfs reset)");
	if (n < 1)
		SKIP(return, "no Spyre card (/dev/accel)");
	snprintf(self->path, sizeof(self->path),
		 "/sys/bus/pci/devices/%s/reset", d[0].pci_addr);
	if (access(self->path, W_OK))
		SKIP(return, "no %s", self->path);
	self->st = mmap(NULL, sizeof(*self->st), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->st);
	memset(self->st, 0, sizeof(*self->st));
}

FIXTURE_TEARDOWN(reset)
{
	if (self->st != MAP_FAILED)
		munmap(self->st, sizeof(*self->st));
}

/* Fork a child that drops to the test user and runs @fn; its pid. */
#define SPAWN_USER(st, call) ({						\
	pid_t _p = fork();						\
	if (_p == 0) {							\
		int _r = drop_privileges();				\
		if (_r)							\
			note_err((st), _r, "drop privileges");		\
		else							\
			call;						\
		_exit(0);						\
	}								\
	_p;								\
})

TEST_F_TIMEOUT(reset, reset_clear_race, 300)
{
	struct race_stats *st = self->st;
	double secs = env_ul("SPYRE_RESET_SECONDS", RESET_DEFAULT_SECONDS);
	double deadline = st_now() + secs;
	pid_t user, resetter;
	int status;

	user = SPAWN_USER(st, clear_race_loop(deadline, st));
	ASSERT_LT(0, user);
	resetter = fork();
	if (resetter == 0) {
		/* the card in service about half of the time */
		reset_loop(self->path, deadline, 0, 100000, st);
		_exit(0);
	}
	ASSERT_LT(0, resetter);
	ASSERT_EQ(resetter, waitpid(resetter, &status, 0));
	ASSERT_EQ(user, waitpid(user, &status, 0));

	TH_LOG("%.0f s: %llu resets, %llu fills, %llu CPU + %llu COPY checks, %llu creates -EIO, %llu COPYs canceled, %llu + %llu bytes leaked (CPU, COPY)",
	       secs, (unsigned long long)st->resets,
	       (unsigned long long)st->owner_fills,
	       (unsigned long long)st->checks_cpu,
	       (unsigned long long)st->checks_copy,
	       (unsigned long long)st->create_eio,
	       (unsigned long long)st->copy_canceled,
	       (unsigned long long)st->leaked_cpu,
	       (unsigned long long)st->leaked_copy);
	EXPECT_EQ(0, st->err) TH_LOG("first error: %s (%d)", st->what,
				     st->err);
	EXPECT_EQ(0, st->leaked_cpu);
	EXPECT_EQ(0, st->leaked_copy);
	EXPECT_EQ(0, st->reset_errors);
	/* the race ran: resets, the owner's bytes and checks of both kinds */
	EXPECT_LT(2, st->resets);
	EXPECT_LT(2, st->owner_fills);
	EXPECT_LT(2, st->checks_cpu);
	EXPECT_LT(0, st->checks_copy);
}

TEST_F_TIMEOUT(reset, flr_under_load, 1200)
{
	struct race_stats *st = self->st;
	unsigned long count = env_ul("SPYRE_FLR_COUNT", FLR_DEFAULT_COUNT);
	volatile int *stop;
	pid_t load[2];
	int status;
	double t0;

	stop = mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, (void *)stop);
	*stop = 0;
	for (int i = 0; i < 2; i++) {
		load[i] = SPAWN_USER(st, gemm_loop(stop, 17 + i, st));
		ASSERT_LT(0, load[i]);
	}
	usleep(300000);
	t0 = st_now();
	reset_loop(self->path, 0, count, 0, st);
	t0 = st_now() - t0;
	*stop = 1;
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(load[i], waitpid(load[i], &status, 0));

	TH_LOG("%llu FLRs in %.1f s under load: %llu GEMMs ok, %llu canceled",
	       (unsigned long long)st->resets, t0,
	       (unsigned long long)st->gemms_ok,
	       (unsigned long long)st->gemms_canceled);
	EXPECT_EQ(0, st->err) TH_LOG("first error: %s (%d)", st->what,
				     st->err);
	EXPECT_EQ(count, st->resets);
	EXPECT_EQ(0, st->gemms_bad);
	EXPECT_LT(0, st->gemms_ok);

	/* the card still serves a new context, without a cancel */
	memset(st, 0, sizeof(*st));
	*stop = 0;
	load[0] = SPAWN_USER(st, gemm_loop(stop, 99, st));
	ASSERT_LT(0, load[0]);
	usleep(1000000);
	*stop = 1;
	ASSERT_EQ(load[0], waitpid(load[0], &status, 0));
	EXPECT_EQ(0, st->err) TH_LOG("after the resets: %s (%d)", st->what,
				     st->err);
	EXPECT_LT(0, st->gemms_ok);
	EXPECT_EQ(0, st->gemms_canceled);
	EXPECT_EQ(0, st->gemms_bad);
	munmap((void *)stop, sizeof(*stop));
}

static uint64_t rd64(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_SEQ_CST);
}

static int reset_once(const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ret = fd >= 0 && write(fd, "1", 1) == 1 ? 0 : -errno;

	if (fd >= 0)
		close(fd);
	return ret;
}

TEST_F_TIMEOUT(reset, fence_replay_bound, 120)
{
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint64_t replayed0, replayed, lost0, lost, va;
	struct drm_spyre_bo_ref refs[ST_MAX_BOS + 1];
	struct drm_spyre_sync out;
	struct drm_spyre_job job;
	struct drm_spyre_submit sub;
	struct st_buf gate, mark;
	struct st_ctx x;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&x, 8, &mark));
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_replayed", &replayed0));
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_lost", &lost0));

	/* SEM_WAIT(gate >= 1), then mark = 1: restartable, never satisfied */
	st_cs_sem(cs, false, 0, gate.va, 1);
	st_cs_fill(cs, mark.va, 1, 8, 1);
	ASSERT_EQ(0, st_cs_put(&x, cs, &va));
	for (unsigned int i = 0; i <= x.nbos; i++)
		refs[i] = (struct drm_spyre_bo_ref){ x.handles[i],
			DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE };
	out = (struct drm_spyre_sync){ .handle = x.sync };
	job = (struct drm_spyre_job){
		.queue_id = x.qid, .flags = DRM_SPYRE_JOB_RESTARTABLE,
		.cmd_va = va, .cmd_size = cs->len,
		.bo_count = x.nbos + 1, .bos = (uintptr_t)refs,
		.out_syncs = (uintptr_t)&out, .out_sync_count = 1,
	};
	sub = (struct drm_spyre_submit){ .jobs = (uintptr_t)&job,
		.job_count = 1, .job_stride = sizeof(job) };
	ASSERT_EQ(0, st_ioctl(x.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));

	for (int i = 0; i <= REPLAY_MAX; i++) {
		usleep(200000);		/* the card is on it, waiting */
		ASSERT_EQ(0, st_sync_status(x.fd, x.sync))
			TH_LOG("fence ended before reset %d", i + 1);
		ASSERT_EQ(0, reset_once(self->path));
	}
	EXPECT_EQ(-ECANCELED, st_wait_status(x.fd, x.sync, ST_TIMEOUT_NS));
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_replayed", &replayed));
	ASSERT_EQ(0, st_sysfs_u64(0, "jobs_lost", &lost));
	EXPECT_EQ(REPLAY_MAX, replayed - replayed0);
	EXPECT_EQ(1, lost - lost0);
	EXPECT_EQ(0, rd64(mark.p));
	/* nobody is guilty: the context still runs jobs */
	EXPECT_EQ(0, st_ctx_error(x.fd));
	st_cs_reset(cs);
	st_cs_fill(cs, mark.va, 1, 8, 2);
	EXPECT_EQ(0, st_run(&x, cs));
	EXPECT_EQ(2, rd64(mark.p));
	st_close(&x);
	free(cs);
}

TEST_HARNESS_MAIN
