// SPDX-License-Identifier: MIT
/*
 * spyre_failnth: every allocation of the driver's create, submit, queue,
 * import and userptr paths failed in turn (the kernel's fail-nth, as the
 * iommufd selftests do it).  For each path and N = 1, 2, ... the test
 * writes N to /proc/thread-self/fail-nth and runs the path once: its Nth
 * allocation (slab or page, sleeping ones included) fails.  The call
 * must return success or an error and nothing else; after each, closing
 * the file must bring the driver's live objects (debugfs "live") back to
 * where they were.  The path is covered when N passes its last
 * allocation (fail-nth still pending after the call).  The runner's
 * kernel-log check (no oops, WARN, KASAN, lockdep) and kmemleak at the
 * end of the guest cover what the counters cannot see.
 *
 * Needs root (debugfs fault-injection knobs) and a kernel with
 * CONFIG_FAULT_INJECTION, CONFIG_FAILSLAB and CONFIG_FAIL_PAGE_ALLOC (the
 * debug kernel, `make test KERNEL=debug`); skips elsewhere.  Runs only
 * when named.
 */
#include <glob.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MAX_POINTS	2000

/* debugfs knob @path := @val; its old value into @old (if not NULL). */
static int knob(const char *path, const char *val, char *old, size_t len)
{
	if (old && st_read_line(path, old, (int)len))
		return -ENOENT;
	if (old)
		old[strcspn(old, "\n")] = '\0';
	return st_write_line(path, val);
}

/* The driver's live objects, one line ("bos 0 contexts 0 ..."). */
static int live(char *buf, size_t len)
{
	glob_t g;
	int ret = -ENOENT;
	FILE *f;

	if (glob("/sys/kernel/debug/accel/*/live", 0, NULL, &g))
		return -ENOENT;
	f = fopen(g.gl_pathv[0], "re");
	globfree(&g);
	if (!f)
		return -errno;
	buf[0] = '\0';
	for (size_t n = 0; n + 1 < len && fgets(buf + n, (int)(len - n), f);)
		n = strlen(buf);
	fclose(f);
	ret = buf[0] ? 0 : -EIO;
	return ret;
}

/* The live objects are @want again within 5 s; else @now says what is. */
static bool live_back(const char *want, char *now, size_t len)
{
	for (int i = 0; i < 500; i++) {
		if (!live(now, len) && !strcmp(now, want))
			return true;
		usleep(10000);
	}
	return false;
}

/* fail-nth of this thread := @n; 0 clears it.  Read: what is left. */
static int fail_nth_set(unsigned int n)
{
	char v[16];

	snprintf(v, sizeof(v), "%u", n);
	return knob("/proc/thread-self/fail-nth", v, NULL, 0);
}

static long fail_nth_left(void)
{
	char v[32];

	if (st_read_line("/proc/thread-self/fail-nth", v, sizeof(v)))
		return -1;
	return strtol(v, NULL, 10);
}

/* One run of a path on a fresh file @fd: 0 or a negative errno. */
typedef int (*path_fn)(int fd, void *priv);

static int path_bo_sys(int fd, void *priv)
{
	uint32_t h;
	uint64_t va;

	return st_bo_new(fd, 1 << 20, &h, &va);
}

static int path_bo_dev(int fd, void *priv)
{
	uint32_t h;
	uint64_t va;

	return st_bo_new_flags(fd, 1 << 20, DRM_SPYRE_BO_DEVICE, &h, &va);
}

static int path_userptr(int fd, void *priv)
{
	uint32_t h;
	uint64_t va;

	return st_userptr_new(fd, priv, 16 * 4096, 0, &h, &va);
}

static int path_queue(int fd, void *priv)
{
	uint32_t q;

	return st_queue_new(fd, DRM_SPYRE_PRIORITY_NORMAL, &q);
}

/* A context with a queue, an out syncobj and a 4 KiB buffer. */
struct submit_ctx {
	struct st_ctx x;
	struct st_buf b;
};

/*
 * A fill job listing the context's BOs, with an out syncobj, waited for
 * (its status is read after the injection, see cover()).
 */
static int path_submit(int fd, void *priv)
{
	struct submit_ctx *c = priv;
	struct st_cs cs;
	int ret;

	st_cs_reset(&cs);
	st_cs_fill(&cs, c->b.va, 512, 8, 0x6661696c);
	ret = st_submit_cs(&c->x, c->x.qid, &cs, NULL, 0, c->x.sync, 0);
	if (ret)
		return ret;
	return st_sync_wait(c->x.fd, c->x.sync, ST_TIMEOUT_NS);
}

/* Export a BO as dma-buf and import it on another file of the card. */
static int path_import(int fd, void *priv)
{
	int *exp = priv, dmabuf, ret;
	uint32_t h;

	ret = drmPrimeHandleToFD(exp[0], (uint32_t)exp[1], DRM_CLOEXEC,
				 &dmabuf);
	if (ret)
		return -errno;
	ret = drmPrimeFDToHandle(fd, dmabuf, &h) ? -errno : 0;
	close(dmabuf);
	return ret;
}

struct path {
	const char *name;
	path_fn fn;
};

FIXTURE(failnth) {
	char slab_wait[16], page_wait[16], slab_verbose[16], page_verbose[16];
	char page_order[16];
	bool armed;
};

FIXTURE_SETUP(failnth)
{
	if (access("/proc/self/fail-nth", W_OK) ||
	    access("/sys/kernel/debug/failslab/ignore-gfp-wait", W_OK))
		SKIP(return, "no fail-nth/failslab (needs root and "
		     "CONFIG_FAULT_INJECTION: make test KERNEL=debug)");
	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	/* sleeping allocations too (the driver's are nearly all), quietly */
	ASSERT_EQ(0, knob("/sys/kernel/debug/failslab/ignore-gfp-wait", "N",
			  self->slab_wait, sizeof(self->slab_wait)));
	ASSERT_EQ(0, knob("/sys/kernel/debug/fail_page_alloc/ignore-gfp-wait",
			  "N", self->page_wait, sizeof(self->page_wait)));
	ASSERT_EQ(0, knob("/sys/kernel/debug/failslab/verbose", "0",
			  self->slab_verbose, sizeof(self->slab_verbose)));
	ASSERT_EQ(0, knob("/sys/kernel/debug/fail_page_alloc/verbose", "0",
			  self->page_verbose, sizeof(self->page_verbose)));
	/* single pages too (shmem backing, page tables): default is 1 */
	ASSERT_EQ(0, knob("/sys/kernel/debug/fail_page_alloc/min-order", "0",
			  self->page_order, sizeof(self->page_order)));
	self->armed = true;
}

FIXTURE_TEARDOWN(failnth)
{
	if (!self->armed)
		return;
	knob("/sys/kernel/debug/failslab/ignore-gfp-wait", self->slab_wait,
	     NULL, 0);
	knob("/sys/kernel/debug/fail_page_alloc/ignore-gfp-wait",
	     self->page_wait, NULL, 0);
	knob("/sys/kernel/debug/failslab/verbose", self->slab_verbose, NULL, 0);
	knob("/sys/kernel/debug/fail_page_alloc/verbose", self->page_verbose,
	     NULL, 0);
	knob("/sys/kernel/debug/fail_page_alloc/min-order", self->page_order,
	     NULL, 0);
}

/*
 * Run @fn with its Nth allocation failed, N = 1, 2, ... until it passes
 * its last; each run on a fresh file (opened, and set up by @setup,
 * outside the injection; @with_ctx: a struct submit_ctx).  Returns the
 * number of injection points.
 */
static int cover(struct __test_metadata *_metadata, const char *name,
		 path_fn fn, bool with_ctx)
{
	char base[256], now[256];
	unsigned int n;
	int errs = 0;

	ASSERT_EQ(0, live(base, sizeof(base)));
	for (n = 1; n < MAX_POINTS; n++) {
		uint8_t *host = NULL;
		struct submit_ctx c;
		int fd = -1, ex[2] = { -1, 0 }, ret;
		void *priv = NULL;
		long left;

		if (with_ctx) {
			ASSERT_EQ(0, st_open(&c.x, 0,
					     DRM_SPYRE_PRIORITY_NORMAL));
			ASSERT_EQ(0, st_buf_new(&c.x, 4096, &c.b));
			fd = c.x.fd;
			priv = &c;
		} else {
			fd = st_open_card(0);
			ASSERT_LE(0, fd);
		}
		if (fn == path_userptr) {
			host = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			ASSERT_NE(MAP_FAILED, host);
			memset(host, 1, 16 * 4096);
			priv = host;
		}
		if (fn == path_import) {
			uint64_t va;
			uint32_t h;

			ex[0] = st_open_card(0);
			ASSERT_LE(0, ex[0]);
			ASSERT_EQ(0, st_bo_new(ex[0], 65536, &h, &va));
			ex[1] = (int)h;
			priv = ex;
		}

		ASSERT_EQ(0, fail_nth_set(n));
		ret = fn(fd, priv);
		left = fail_nth_left();
		fail_nth_set(0);
		/*
		 * The job's status is read with injection off: the read goes
		 * through a sync_file, and the DRM core turns a failed
		 * sync_file_create() into -EINVAL (not the driver's path).
		 */
		if (with_ctx && ret == 0)
			ret = st_wait_status(c.x.fd, c.x.sync, ST_TIMEOUT_NS);

		/* an error, or success; nothing else */
		EXPECT_TRUE(ret == 0 || ret == -ENOMEM || ret == -ENOSPC ||
			    ret == -EFAULT || ret == -EIO || ret == -ECANCELED ||
			    ret == -EINTR || ret == -EAGAIN || ret == -ETIME)
			TH_LOG("%s: point %u: %d", name, n, ret);
		errs += ret != 0;
		if (with_ctx)
			st_close(&c.x);
		else
			close(fd);
		if (ex[0] >= 0)
			close(ex[0]);
		if (host)
			munmap(host, 16 * 4096);
		EXPECT_TRUE(live_back(base, now, sizeof(now)))
			TH_LOG("%s: point %u left objects behind: %s, was %s",
			       name, n, now, base);
		if (left > 0)
			break;		/* the path made fewer than n calls */
	}
	EXPECT_GT(MAX_POINTS, n) TH_LOG("%s: more than %d points", name,
					MAX_POINTS);
	TH_LOG("%s: %u allocation points, %d failed the call", name, n - 1,
	       errs);
	return (int)n - 1;
}

TEST_F_TIMEOUT(failnth, each_allocation_of_every_path, 1800)
{
	/*
	 * Device memory last: on Debian's 6.12.95 a failed block allocation
	 * inside drm_buddy_alloc_blocks() (split_block(), then err_undo's
	 * __drm_buddy_free() of a block still on a free tree) corrupts the
	 * buddy allocator (KASAN use-after-free, then BUG in drm_buddy.c).
	 * The debug kernel carries the fix (scripts/debug-kernel.patch);
	 * on a kernel without it the other paths are still counted first.
	 */
	static const struct path paths[] = {
		{ "bo_create_system", path_bo_sys },
		{ "bo_userptr", path_userptr },
		{ "queue_create", path_queue },
		{ "dmabuf_import", path_import },
	};
	struct submit_ctx c;
	int total = 0;

	for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
		total += cover(_metadata, paths[i].name, paths[i].fn, false);
	total += cover(_metadata, "submit", path_submit, true);
	total += cover(_metadata, "bo_create_device", path_bo_dev, false);
	TH_LOG("%d fail-nth points in all", total);
	/* the card still serves a new context correctly */
	ASSERT_EQ(0, st_open(&c.x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&c.x, 4096, &c.b));
	ASSERT_EQ(0, path_submit(c.x.fd, &c));
	ASSERT_EQ(0, st_wait_status(c.x.fd, c.x.sync, ST_TIMEOUT_NS));
	for (unsigned int i = 0; i < 512; i++)
		ASSERT_EQ(0x6661696cull, ((uint64_t *)c.b.p)[i]);
	st_close(&c.x);
}

TEST_HARNESS_MAIN
