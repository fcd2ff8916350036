// SPDX-License-Identifier: MIT
/*
 * spyre_fault: faults injected into the card (debugfs "inject") and what
 * the driver makes of them: a bad job, a bad context or a bad device state
 * hurts only itself, and every fence signals, with an error only where
 * work was really lost (uapi/drm/spyre_accel.h, "contexts, memory, queues
 * and errors").  Each test opens its own contexts on card 0 (one queue
 * each) and checks their data, their fences, their contexts' sticky error
 * and the driver's counters (QUERY_HEALTH).
 *
 *  - hang_*: a job that never ends times out; its context alone is guilty
 *    (-ETIMEDOUT, sticky) while another context's jobs keep finishing
 *    with correct results;
 *  - coredump_*: the hang leaves a devcoredump with the job's stream;
 *  - inject_*: an injected job error or MMU fault fails its context only;
 *    bad injection requests are refused;
 *  - fatal_*, flr_*, aer_*: a fatal card error (recovered by the driver
 *    through the card's RESET register), a function reset (sysfs) or a
 *    PCIe error (AER, non-fatal and fatal, injected with the aer_inject
 *    module), or a system suspend/resume (suspend_*, /sys/power/pm_test
 *    "devices") with work in three contexts: jobs that had not started run normally, interrupted
 *    restartable jobs rerun, other interrupted jobs end with -ECANCELED,
 *    and no context becomes sticky;
 *  - lost_irq_*, duplicate_irq_*: a completion whose interrupt is lost is
 *    found by the driver's poll (no reset, no guilty context); a
 *    duplicate interrupt changes nothing;
 *  - kernel_inject_*: an injected hang, MMU fault or job error in a KERNEL
 *    fails its context only (skipped on a card without KERNEL);
 *  - corrupt_*: a completion record with a seqno or status out of range
 *    is not trusted: the card is reset and the job reruns (restartable)
 *    or ends with -ECANCELED, and nobody is guilty.
 *
 * Needs root (debugfs, the sysfs reset) and a job timeout of at most
 * 3000 ms and at least 1000 ms (module parameter job_timeout_ms; make
 * test boots this suite's guest with 2000); otherwise the tests SKIP.
 */
#include <glob.h>
#include <linux/netlink.h>
#include <linux/pci_regs.h>
#include <sys/socket.h>

#include "kselftest_harness.h"
#include "spyre_test.h"


#define F_PAGE		4096u
#define F_FILL_MAGIC	0x5ca1ab1eu	/* in the hang's stream, for the dump */
#define F_WAIT_NS	(10 * 1000000000ull)

/* One context with one queue, a data page and a semaphore page. */
struct fctx {
	struct st_ctx x;
	struct st_buf data;
	struct st_buf sem;
	uint32_t hwq;
};

static char dbg_dir[96];

static bool f_usable(void)
{
	long long t = st_module_param("job_timeout_ms");

	return geteuid() == 0 && t >= 1000 && t <= 3000;
}

/* This context's hardware queue, from debugfs "queues" (hwq ctx ...). */
static int f_find_hwq(struct fctx *c)
{
	struct drm_spyre_context_info ci;
	char path[160], line[256];
	unsigned int hwq, ctx;
	int ret = st_query_context(c->x.fd, &ci);
	FILE *f;

	if (ret)
		return ret;
	snprintf(dbg_dir, sizeof(dbg_dir),
		 "/sys/kernel/debug/accel/%04x:%02x:%02x.%x",
		 c->x.di.pci_domain, c->x.di.pci_bus, c->x.di.pci_devfn >> 3,
		 c->x.di.pci_devfn & 7);
	snprintf(path, sizeof(path), "%s/queues", dbg_dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ret = -ENOENT;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%u %u", &hwq, &ctx) == 2 &&
		    ctx == ci.context_id) {
			c->hwq = hwq;
			ret = 0;
		}
	fclose(f);
	return ret;
}

/* The card's STATUS of this context's queue (debugfs), or -errno. */
static int f_queue_status(struct fctx *c)
{
	char path[160], line[256];
	unsigned int v[9];
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "%s/queues", dbg_dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%u %u %u %u %u %u %u %u %u", &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
			   &v[8]) == 9 && v[0] == c->hwq)
			ret = v[7];
	fclose(f);
	return ret;
}

static int f_open(struct fctx *c)
{
	int ret = st_open(&c->x, 0, DRM_SPYRE_PRIORITY_NORMAL);

	if (!ret)
		ret = st_buf_new(&c->x, 16 * F_PAGE, &c->data);
	if (!ret)
		ret = st_buf_new(&c->x, F_PAGE, &c->sem);
	if (!ret)
		ret = f_find_hwq(c);
	return ret;
}

static void f_close(struct fctx *c)
{
	st_close(&c->x);
}

/* Arm the card's fault injection on this context's queue. */
static int f_inject(struct fctx *c, const char *kind, unsigned int count)
{
	char path[160], req[64];

	snprintf(path, sizeof(path), "%s/inject", dbg_dir);
	snprintf(req, sizeof(req), "%u %s %u", c->hwq, kind, count);
	return st_write_line(path, req);
}

static struct drm_spyre_health_info f_health(int fd)
{
	struct drm_spyre_health_info h;
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_HEALTH,
		.size = sizeof(h),
		.data = (uintptr_t)&h,
	};

	memset(&h, 0xff, sizeof(h));
	if (st_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q))
		memset(&h, 0xff, sizeof(h));
	return h;
}

/*
 * Submit @cs as one job with @flags (DRM_SPYRE_JOB_*), listing every BO
 * of the context, signalling a new binary syncobj (*@sync).
 */
static int f_submit(struct fctx *c, const struct st_cs *cs, uint32_t flags,
		    uint32_t *sync)
{
	struct drm_spyre_bo_ref refs[ST_MAX_BOS + 1];
	struct drm_spyre_sync out = { 0 };
	struct drm_spyre_job job = { 0 };
	struct drm_spyre_submit s = { 0 };
	uint64_t va;
	int ret = st_cs_put(&c->x, cs, &va);

	if (ret)
		return ret;
	if (drmSyncobjCreate(c->x.fd, 0, sync))
		return -errno;
	for (unsigned int i = 0; i <= c->x.nbos; i++)
		refs[i] = (struct drm_spyre_bo_ref){ c->x.handles[i],
			DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE };
	out.handle = *sync;
	job.queue_id = c->x.qid;
	job.flags = flags;
	job.cmd_va = va;
	job.cmd_size = cs->len;
	job.bo_count = c->x.nbos + 1;
	job.bos = (uintptr_t)refs;
	job.out_syncs = (uintptr_t)&out;
	job.out_sync_count = 1;
	s.jobs = (uintptr_t)&job;
	s.job_count = 1;
	s.job_stride = sizeof(job);
	return st_ioctl(c->x.fd, DRM_IOCTL_SPYRE_SUBMIT, &s);
}

/* Fill page @page of the data buffer with @v, after a SEM_WAIT if @sem. */
static void f_fill_cs(struct fctx *c, struct st_cs *cs, unsigned int page,
		      uint32_t v, bool sem)
{
	st_cs_reset(cs);
	if (sem)
		st_cs_sem(cs, false, 0, c->sem.va, 1);
	st_cs_fill(cs, c->data.va + page * F_PAGE, F_PAGE / 4, 4, v);
}

static bool f_page_is(struct fctx *c, unsigned int page, uint32_t v)
{
	const uint32_t *p = (const uint32_t *)(c->data.p + page * F_PAGE);

	for (unsigned int i = 0; i < F_PAGE / 4; i++)
		if (p[i] != v)
			return false;
	return true;
}

/*
 * Delete every devcoredump (writing to its data file frees it) and wait,
 * up to 3 s, until they are gone: the kernel deletes them from a work
 * item, and drops a new dump of a device whose old one still exists.
 */
static void f_dumps_clear(void)
{
	double end = st_now() + 3;
	glob_t g;

	while (!glob("/sys/class/devcoredump/devcd*/data", 0, NULL, &g)) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			st_write_line(g.gl_pathv[i], "1");
		globfree(&g);
		if (st_now() > end)
			return;
		usleep(10000);
	}
}

/*
 * Read the first devcoredump into @buf (NUL-terminated); bytes or -errno.
 * With @wait, give it up to 3 s to appear: the driver hands the dump to
 * devcoredump from a worker, after the hung job's fence signalled.
 */
static ssize_t f_dump_read(char *buf, size_t len, bool wait)
{
	double end = st_now() + (wait ? 3 : 0);
	ssize_t n, total = 0;
	glob_t g;
	int fd;

	while (glob("/sys/class/devcoredump/devcd*/data", 0, NULL, &g)) {
		if (st_now() >= end)
			return -ENOENT;
		usleep(10000);
	}
	fd = open(g.gl_pathv[0], O_RDONLY | O_CLOEXEC);
	globfree(&g);
	if (fd < 0)
		return -errno;
	while ((size_t)total < len - 1 &&
	       (n = read(fd, buf + total, len - 1 - total)) > 0)
		total += n;
	close(fd);
	buf[total] = '\0';
	return total;
}

/* A socket on the kernel's uevents, or -errno. */
static int f_uevent_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_KOBJECT_UEVENT);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* Wait up to 3 s for a uevent carrying RESET=1 and @want: 0 or -ETIME. */
static int f_uevent_wait(int fd, const char *want)
{
	static char buf[8192];
	double end = st_now() + 3;

	while (st_now() < end) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		bool reset = false, match = false;

		if (n <= 0) {
			usleep(5000);
			continue;
		}
		buf[n] = '\0';
		for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
			reset |= !strcmp(p, "RESET=1");
			match |= !strcmp(p, want);
		}
		if (reset && match)
			return 0;
	}
	return -ETIME;
}

/* The aer_inject module's request (drivers/pci/pcie/aer_inject.c). */
struct f_aer_inj {
	uint8_t bus, dev, fn;
	uint32_t uncor_status;
	uint32_t cor_status;
	uint32_t header_log[4];
	uint32_t domain;
};

/* Report uncorrectable PCIe error(s) @uncor of the card through AER. */
static int f_aer_inject(struct fctx *c, uint32_t uncor)
{
	struct f_aer_inj e = {
		.bus = c->x.di.pci_bus,
		.dev = c->x.di.pci_devfn >> 3,
		.fn = c->x.di.pci_devfn & 7,
		.uncor_status = uncor,
		.domain = c->x.di.pci_domain,
	};
	int fd, ret = 0;

	if (system("modprobe aer_inject"))
		return -ENOENT;
	fd = open("/dev/aer_inject", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, &e, sizeof(e)) != sizeof(e))
		ret = -errno;
	close(fd);
	return ret;
}

/* Wait until @c's queue reports @status (SPYRE_QS_*), up to 3 s. */
static bool f_wait_queue(struct fctx *c, int status)
{
	double end = st_now() + 3;

	while (st_now() < end) {
		if (f_queue_status(c) == status)
			return true;
		usleep(2000);
	}
	return false;
}

#define NEED_FAULTS()							\
	do {								\
		if (!f_usable())					\
			SKIP(return, "needs root and 1000 <= job_timeout_ms <= 3000"); \
	} while (0)

FIXTURE(fault) {
	struct fctx a, b, c;
	struct st_cs cs;
};

FIXTURE_SETUP(fault)
{
	memset(self, 0, sizeof(*self));
	self->a.x.fd = self->b.x.fd = self->c.x.fd = -1;
	if (!f_usable())
		return;
	ASSERT_EQ(0, f_open(&self->a));
	ASSERT_EQ(0, f_open(&self->b));
	ASSERT_EQ(0, f_open(&self->c));
}

FIXTURE_TEARDOWN(fault)
{
	f_close(&self->a);
	f_close(&self->b);
	f_close(&self->c);
}

/*
 * A hangs; B keeps submitting fills into its 16 pages and checks each,
 * before, during and after A's timeout.
 */
TEST_F_TIMEOUT(fault, hang_innocent_keeps_working, 60)
{
	struct drm_spyre_health_info h0, h1;
	uint32_t a1, a2, bs[16], x;
	double t_fail = 0, t_back = 0;
	unsigned int rounds = 0;

	NEED_FAULTS();
	h0 = f_health(self->a.x.fd);
	ASSERT_EQ(0, f_inject(&self->a, "hang", 1));
	f_fill_cs(&self->a, &self->cs, 0, 0x22, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	f_fill_cs(&self->a, &self->cs, 1, 0x23, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a2));

	for (;;) {
		bool a_done = st_sync_status(self->a.x.fd, a1) != 0;

		/* B: 16 jobs queued at once, then each checked. */
		self->b.x.cmd_off = 0;
		for (unsigned int p = 0; p < 16; p++) {
			f_fill_cs(&self->b, &self->cs, p, rounds * 16 + p,
				  false);
			ASSERT_EQ(0, f_submit(&self->b, &self->cs, 0, &bs[p]));
		}
		for (unsigned int p = 0; p < 16; p++) {
			ASSERT_EQ(0, st_wait_status(self->b.x.fd, bs[p],
						   F_WAIT_NS));
			ASSERT_TRUE(f_page_is(&self->b, p, rounds * 16 + p));
			drmSyncobjDestroy(self->b.x.fd, bs[p]);
		}
		rounds++;
		if (t_fail) {
			t_back = st_now();
			break;
		}
		if (a_done)
			t_fail = st_now();
		ASSERT_LT(rounds, 100000);
	}

	ASSERT_EQ(-ETIMEDOUT, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_EQ(-ECANCELED, st_wait_status(self->a.x.fd, a2, F_WAIT_NS));
	ASSERT_EQ(-ETIMEDOUT, st_ctx_error(self->a.x.fd));
	f_fill_cs(&self->a, &self->cs, 0, 0x24, false);
	ASSERT_EQ(-ECANCELED, f_submit(&self->a, &self->cs, 0, &x));
	ASSERT_EQ(0, st_ctx_error(self->b.x.fd));
	h1 = f_health(self->a.x.fd);
	ASSERT_EQ(h0.hangs + 1, h1.hangs);
	ASSERT_EQ(h0.resets, h1.resets);	/* a queue reset sufficed */
	TH_LOG("B ran %u rounds of 16 jobs across A's hang; from A's fence to B's next 16 jobs done: %.1f ms",
	       rounds, (t_back - t_fail) * 1e3);
	f_dumps_clear();
}

TEST_F_TIMEOUT(fault, coredump_hang_holds_stream, 60)
{
	static char dump[256 * 1024];
	char words[64];
	uint32_t a1;

	NEED_FAULTS();
	f_dumps_clear();
	ASSERT_EQ(0, f_inject(&self->a, "hang", 1));
	f_fill_cs(&self->a, &self->cs, 0, F_FILL_MAGIC, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	ASSERT_EQ(-ETIMEDOUT, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));

	ASSERT_LT(0, f_dump_read(dump, sizeof(dump), true));
	ASSERT_NE(NULL, strstr(dump, "reason: hang"));
	/* The job's descriptor, and its FILL's value in the stream. */
	snprintf(words, sizeof(words), "cmd_va %#llx cmd_size %u",
		 (unsigned long long)self->a.x.cmd.va, self->cs.len);
	ASSERT_NE(NULL, strstr(dump, words)) TH_LOG("no '%s' in:\n%.3000s",
						    words, dump);
	snprintf(words, sizeof(words), " %08x", F_FILL_MAGIC);
	ASSERT_NE(NULL, strstr(dump, words)) TH_LOG("no '%s' in:\n%.3000s",
						    words, dump);
	f_dumps_clear();
	ASSERT_GT(0, f_dump_read(dump, sizeof(dump), false));
}

/* An injected job error or MMU fault fails A's context only. */
static void f_guilty_only(struct __test_metadata *_metadata,
			  FIXTURE_DATA(fault) *self, const char *kind,
			  int err)
{
	struct drm_spyre_context_info ci;
	uint32_t a1, b1;

	ASSERT_EQ(0, f_inject(&self->a, kind, 1));
	f_fill_cs(&self->a, &self->cs, 0, 0x31, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	f_fill_cs(&self->b, &self->cs, 0, 0x32, false);
	ASSERT_EQ(0, f_submit(&self->b, &self->cs, 0, &b1));
	ASSERT_EQ(err, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_EQ(0, st_wait_status(self->b.x.fd, b1, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->b, 0, 0x32));
	ASSERT_TRUE(f_page_is(&self->a, 0, 0));	/* never ran */
	ASSERT_EQ(0, st_query_context(self->a.x.fd, &ci));
	ASSERT_EQ(err, ci.error);
	if (err == -EFAULT) {
		ASSERT_EQ(1, ci.faults);
		ASSERT_EQ(self->a.x.cmd.va, ci.fault_va);
	}
	ASSERT_EQ(0, st_ctx_error(self->b.x.fd));
}

TEST_F(fault, inject_error_guilty_only)
{
	NEED_FAULTS();
	f_guilty_only(_metadata, self, "error", -EIO);
}

TEST_F(fault, inject_mmu_fault_guilty_only)
{
	NEED_FAULTS();
	f_guilty_only(_metadata, self, "mmu_fault", -EFAULT);
}

TEST_F(fault, inject_bad_requests_refused)
{
	static const char *const bad[] = {
		"0 bogus", "0", "100000 hang", "0 hang 0", "0 hang 257",
		"x hang",
	};
	char path[160];

	NEED_FAULTS();
	snprintf(path, sizeof(path), "%s/inject", dbg_dir);
	for (unsigned int i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-EINVAL, st_write_line(path, bad[i])) {
			TH_LOG("'%s'", bad[i]);
		}
	}
}

/*
 * Work in three contexts when the card is reset (@how: "fatal" injects a
 * fatal error the driver recovers from, "flr" resets the function
 * through sysfs):
 *  A: a1 waits on A's semaphore (started, restartable), a2 behind it;
 *  B: b1 waits on B's semaphore (started, not restartable);
 *  C: c1 done before, c2 waits (started, restartable), c3 behind it.
 * Then the semaphores are released: a1, a2, c2, c3 end OK with their
 * data, b1 with -ECANCELED, and no context is sticky.
 */
/*
 * A system suspend and resume that stops after suspending the devices
 * (pm_test "devices", no delay): 0 or -errno.
 */
static int f_suspend_cycle(void)
{
	char states[128] = "";
	int fd = open("/sys/power/state", O_RDONLY | O_CLOEXEC), ret;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, states, sizeof(states) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	ret = st_write_line("/sys/module/suspend/parameters/pm_test_delay", "0");
	if (!ret)
		ret = st_write_line("/sys/power/pm_test", "devices");
	if (!ret)
		ret = st_write_line("/sys/power/state", strstr(states, "mem") ? "mem" :
			      "freeze");
	st_write_line("/sys/power/pm_test", "none");
	return ret;
}

enum f_reset_how { F_FATAL, F_FLR, F_AER_NONFATAL, F_AER_FATAL, F_SUSPEND };

static void f_reset_three(struct __test_metadata *_metadata,
			  FIXTURE_DATA(fault) *self, enum f_reset_how how)
{
	static const char *const names[] = { "fatal error", "function reset",
		"non-fatal PCIe error", "fatal PCIe error", "suspend/resume" };
	static const char *const reasons[] = { "SPYRE_REASON=fatal",
		"SPYRE_REASON=function", "SPYRE_REASON=aer",
		"SPYRE_REASON=aer", "SPYRE_REASON=resume" };
	bool fatal = how == F_FATAL;
	bool aer = how == F_AER_NONFATAL || how == F_AER_FATAL;
	struct drm_spyre_health_info h0, h1;
	uint32_t a1, a2, b1, c1, c2, c3, x;
	struct fctx *all[3] = { &self->a, &self->b, &self->c };
	static char dump[256 * 1024];
	char path[160];
	double t0, t1;
	int ev = f_uevent_open();

	ASSERT_LE(0, ev);
	h0 = f_health(self->a.x.fd);
	f_dumps_clear();
	f_fill_cs(&self->c, &self->cs, 0, 0xc1, false);
	ASSERT_EQ(0, f_submit(&self->c, &self->cs, 0, &c1));
	ASSERT_EQ(0, st_wait_status(self->c.x.fd, c1, F_WAIT_NS));

	f_fill_cs(&self->a, &self->cs, 0, 0xa1, true);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, DRM_SPYRE_JOB_RESTARTABLE,
			      &a1));
	f_fill_cs(&self->a, &self->cs, 1, 0xa2, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a2));
	f_fill_cs(&self->b, &self->cs, 0, 0xb1, true);
	ASSERT_EQ(0, f_submit(&self->b, &self->cs, 0, &b1));
	f_fill_cs(&self->c, &self->cs, 1, 0xc2, true);
	ASSERT_EQ(0, f_submit(&self->c, &self->cs, DRM_SPYRE_JOB_RESTARTABLE,
			      &c2));
	f_fill_cs(&self->c, &self->cs, 2, 0xc3, false);
	ASSERT_EQ(0, f_submit(&self->c, &self->cs, 0, &c3));
	for (unsigned int i = 0; i < 3; i++)
		ASSERT_TRUE(f_wait_queue(all[i], 3 /* SPYRE_QS_SEM_WAIT */));

	t0 = st_now();
	switch (how) {
	case F_FATAL:
		ASSERT_EQ(0, f_inject(&self->a, "fatal", 1));
		break;
	case F_FLR:
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/reset",
			 strrchr(dbg_dir, '/') + 1);
		ASSERT_EQ(0, st_write_line(path, "1"));
		break;
	case F_AER_NONFATAL:	/* Unsupported Request: non-fatal */
		ASSERT_EQ(0, f_aer_inject(&self->a, PCI_ERR_UNC_UNSUP));
		break;
	case F_AER_FATAL:	/* Malformed TLP: fatal, the link is reset */
		ASSERT_EQ(0, f_aer_inject(&self->a, PCI_ERR_UNC_MALF_TLP));
		break;
	case F_SUSPEND:		/* returns after the resume */
		ASSERT_EQ(0, f_suspend_cycle());
		break;
	}
	while (f_health(self->a.x.fd).resets == h0.resets)
		ASSERT_LT(st_now(), t0 + 5);
	/* b1 is over already; the others wait again on their semaphore. */
	ASSERT_EQ(-ECANCELED, st_wait_status(self->b.x.fd, b1, F_WAIT_NS));
	t1 = st_now();
	for (unsigned int i = 0; i < 3; i++)
		*(volatile uint64_t *)all[i]->sem.p = 1;

	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a2, F_WAIT_NS));
	ASSERT_EQ(0, st_wait_status(self->c.x.fd, c2, F_WAIT_NS));
	ASSERT_EQ(0, st_wait_status(self->c.x.fd, c3, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->a, 0, 0xa1));
	ASSERT_TRUE(f_page_is(&self->a, 1, 0xa2));
	ASSERT_TRUE(f_page_is(&self->b, 0, 0));
	ASSERT_TRUE(f_page_is(&self->c, 0, 0xc1));
	ASSERT_TRUE(f_page_is(&self->c, 1, 0xc2));
	ASSERT_TRUE(f_page_is(&self->c, 2, 0xc3));

	/* Nobody is guilty: every context goes on. */
	for (unsigned int i = 0; i < 3; i++) {
		ASSERT_EQ(0, st_ctx_error(all[i]->x.fd));
		f_fill_cs(all[i], &self->cs, 3, 0xd0 + i, false);
		ASSERT_EQ(0, f_submit(all[i], &self->cs, 0, &x));
		ASSERT_EQ(0, st_wait_status(all[i]->x.fd, x, F_WAIT_NS));
		ASSERT_TRUE(f_page_is(all[i], 3, 0xd0 + i));
	}
	h1 = f_health(self->a.x.fd);
	ASSERT_EQ(h0.resets + 1, h1.resets);
	ASSERT_EQ(h0.recoveries + fatal, h1.recoveries);
	ASSERT_EQ(h0.fatal_errors + fatal, h1.fatal_errors);
	ASSERT_EQ(h0.jobs_replayed + 4, h1.jobs_replayed);
	ASSERT_EQ(h0.jobs_lost + 1, h1.jobs_lost);
	ASSERT_EQ(h0.hangs, h1.hangs);
	ASSERT_EQ(h0.aer_errors + aer, h1.aer_errors);
	TH_LOG("%s: reset counted %.1f ms after the request", names[how],
	       (t1 - t0) * 1e3);
	ASSERT_EQ(0, f_uevent_wait(ev, reasons[how]));
	close(ev);
	/* A fatal error leaves a dump; a function reset does not. */
	if (fatal) {
		ASSERT_LT(0, f_dump_read(dump, sizeof(dump), true));
		ASSERT_NE(NULL, strstr(dump, "reason: fatal"));
	} else {
		ASSERT_GT(0, f_dump_read(dump, sizeof(dump), false));
	}
	f_dumps_clear();
}

TEST_F_TIMEOUT(fault, fatal_recovery_keeps_work, 60)
{
	NEED_FAULTS();
	f_reset_three(_metadata, self, F_FATAL);
}

TEST_F_TIMEOUT(fault, flr_three_contexts_keep_work, 60)
{
	NEED_FAULTS();
	f_reset_three(_metadata, self, F_FLR);
}

TEST_F_TIMEOUT(fault, suspend_with_work_keeps_work, 60)
{
	NEED_FAULTS();
	f_reset_three(_metadata, self, F_SUSPEND);
}

/* An idle card suspends and resumes, and serves its contexts after. */
TEST_F_TIMEOUT(fault, suspend_idle, 60)
{
	struct drm_spyre_health_info h0;
	uint32_t a1;

	NEED_FAULTS();
	h0 = f_health(self->a.x.fd);
	ASSERT_EQ(0, f_suspend_cycle());
	ASSERT_EQ(h0.resets + 1, f_health(self->a.x.fd).resets);
	f_fill_cs(&self->a, &self->cs, 0, 0x71, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->a, 0, 0x71));
	ASSERT_EQ(0, st_ctx_error(self->a.x.fd));
}

TEST_F_TIMEOUT(fault, aer_nonfatal_keeps_work, 60)
{
	NEED_FAULTS();
	f_reset_three(_metadata, self, F_AER_NONFATAL);
}

TEST_F_TIMEOUT(fault, aer_fatal_keeps_work, 60)
{
	NEED_FAULTS();
	f_reset_three(_metadata, self, F_AER_FATAL);
}

TEST_F(fault, lost_irq_found_by_poll)
{
	struct drm_spyre_health_info h0, h1;
	uint32_t a1;
	double t0;

	NEED_FAULTS();
	h0 = f_health(self->a.x.fd);
	ASSERT_EQ(0, f_inject(&self->a, "drop_irq", 1));
	f_fill_cs(&self->a, &self->cs, 0, 0x41, false);
	t0 = st_now();
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	TH_LOG("job with a lost interrupt ended after %.1f ms",
	       (st_now() - t0) * 1e3);
	ASSERT_TRUE(f_page_is(&self->a, 0, 0x41));
	h1 = f_health(self->a.x.fd);
	ASSERT_EQ(h0.lost_irqs + 1, h1.lost_irqs);
	ASSERT_EQ(h0.resets, h1.resets);
	ASSERT_EQ(h0.hangs, h1.hangs);
	ASSERT_EQ(0, st_ctx_error(self->a.x.fd));
}

TEST_F(fault, duplicate_irq_ignored)
{
	struct drm_spyre_health_info h0, h1;
	uint32_t a1, a2;

	NEED_FAULTS();
	h0 = f_health(self->a.x.fd);
	ASSERT_EQ(0, f_inject(&self->a, "dup_irq", 1));
	f_fill_cs(&self->a, &self->cs, 0, 0x51, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	/*
	 * The second message comes 20 ms (card time) later: long enough not
	 * to merge with the first in the guest's APIC under TCG.
	 */
	usleep(200000);
	f_fill_cs(&self->a, &self->cs, 1, 0x52, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a2));
	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a2, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->a, 0, 0x51));
	ASSERT_TRUE(f_page_is(&self->a, 1, 0x52));
	h1 = f_health(self->a.x.fd);
	ASSERT_LE(h0.spurious_irqs + 1, h1.spurious_irqs);
	ASSERT_EQ(h0.resets, h1.resets);
	ASSERT_EQ(0, st_ctx_error(self->a.x.fd));
}

/* A corrupt record: the card is reset, the job reruns or is cancelled. */
static void f_corrupt(struct __test_metadata *_metadata,
		      FIXTURE_DATA(fault) *self, const char *kind)
{
	struct drm_spyre_health_info h0, h1;
	uint32_t a1, a2;

	h0 = f_health(self->a.x.fd);
	ASSERT_EQ(0, f_inject(&self->a, kind, 1));
	f_fill_cs(&self->a, &self->cs, 0, 0x61, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, DRM_SPYRE_JOB_RESTARTABLE,
			      &a1));
	ASSERT_EQ(0, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->a, 0, 0x61));
	ASSERT_EQ(0, f_inject(&self->a, kind, 1));
	f_fill_cs(&self->a, &self->cs, 1, 0x62, false);
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a2));
	ASSERT_EQ(-ECANCELED, st_wait_status(self->a.x.fd, a2, F_WAIT_NS));
	ASSERT_EQ(0, st_ctx_error(self->a.x.fd));
	h1 = f_health(self->a.x.fd);
	ASSERT_EQ(h0.corrupt_completions + 2, h1.corrupt_completions);
	ASSERT_EQ(h0.resets + 2, h1.resets);
	ASSERT_EQ(h0.recoveries + 2, h1.recoveries);
	ASSERT_EQ(h0.jobs_lost + 1, h1.jobs_lost);
}

TEST_F_TIMEOUT(fault, corrupt_seqno_not_trusted, 60)
{
	NEED_FAULTS();
	f_corrupt(_metadata, self, "corrupt_seqno");
}

TEST_F_TIMEOUT(fault, corrupt_status_not_trusted, 60)
{
	NEED_FAULTS();
	f_corrupt(_metadata, self, "corrupt_status");
}

/* ---- kernels: an injected hang and fault mid-kernel ---------------------- */

#define F_KPROG_PAGE	15	/* the data page holding the program */

/*
 * A KERNEL filling data page @page with the int32 @v (1024 points, the
 * value a parameter), its program written to page F_KPROG_PAGE.
 */
static int f_kernel_cs(struct fctx *c, struct st_cs *cs, unsigned int page,
		       uint32_t v)
{
	const uint32_t dt = SPYRE_DTYPE_INT32;
	const uint64_t size[9] = { F_PAGE / 4 };
	struct spyre_cmd_kernel *k;
	struct spyre_kernel *b;
	const void *prog;
	size_t psize;
	int ret;

	ret = spyre_kernel_create(&dt, 1, 1, 1, 0, &b);
	if (ret)
		return ret;
	spyre_kernel_store(b, 0, spyre_kernel_idx(b, SPYRE_KTYPE_I32, 0),
			   spyre_kernel_param(b, SPYRE_KTYPE_I32, 0),
			   SPYRE_KERNEL_NONE, 0);
	ret = spyre_kernel_finalize(b, &prog, &psize);
	if (!ret)
		memcpy(c->data.p + F_KPROG_PAGE * F_PAGE, prog, psize);
	st_cs_reset(cs);
	k = st_cs_add(cs, SPYRE_OP_KERNEL, 0, SPYRE_CMD_KERNEL_SIZE(1, 1));
	spyre_cmd_kernel_init(k, c->data.va + F_KPROG_PAGE * F_PAGE,
			      (uint32_t)psize, 1, 1, 1, 0, size);
	spyre_cmd_kernel_operand(k, 0, c->data.va + page * F_PAGE, F_PAGE / 4,
				 dt);
	spyre_cmd_kernel_param(k, 0, v);
	spyre_kernel_destroy(b);
	return ret;
}

#define NEED_KERNEL(c)							\
	do {								\
		if (!((c)->x.di.caps & SPYRE_DEV_CAP_KERNEL))		\
			SKIP(return, "card without KERNEL");		\
	} while (0)

/* A hangs in a kernel; B's kernels run before and after A's timeout. */
TEST_F_TIMEOUT(fault, kernel_inject_hang_innocent_continues, 60)
{
	uint32_t a1, b1, b2;

	NEED_FAULTS();
	NEED_KERNEL(&self->a);
	ASSERT_EQ(0, f_inject(&self->a, "hang", 1));
	ASSERT_EQ(0, f_kernel_cs(&self->a, &self->cs, 0, 0x71));
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	ASSERT_EQ(0, f_kernel_cs(&self->b, &self->cs, 0, 0x72));
	ASSERT_EQ(0, f_submit(&self->b, &self->cs, 0, &b1));
	ASSERT_EQ(0, st_wait_status(self->b.x.fd, b1, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->b, 0, 0x72));
	ASSERT_EQ(-ETIMEDOUT, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_EQ(-ETIMEDOUT, st_ctx_error(self->a.x.fd));
	ASSERT_EQ(0, f_kernel_cs(&self->b, &self->cs, 1, 0x73));
	ASSERT_EQ(0, f_submit(&self->b, &self->cs, 0, &b2));
	ASSERT_EQ(0, st_wait_status(self->b.x.fd, b2, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->b, 1, 0x73));
	ASSERT_EQ(0, st_ctx_error(self->b.x.fd));
	f_dumps_clear();
}

/* An injected MMU fault or job error in a kernel fails A's context only. */
static void f_kernel_guilty_only(struct __test_metadata *_metadata,
				 FIXTURE_DATA(fault) *self, const char *kind,
				 int err)
{
	uint32_t a1, b1;

	ASSERT_EQ(0, f_inject(&self->a, kind, 1));
	ASSERT_EQ(0, f_kernel_cs(&self->a, &self->cs, 0, 0x81));
	ASSERT_EQ(0, f_submit(&self->a, &self->cs, 0, &a1));
	ASSERT_EQ(0, f_kernel_cs(&self->b, &self->cs, 0, 0x82));
	ASSERT_EQ(0, f_submit(&self->b, &self->cs, 0, &b1));
	ASSERT_EQ(err, st_wait_status(self->a.x.fd, a1, F_WAIT_NS));
	ASSERT_EQ(0, st_wait_status(self->b.x.fd, b1, F_WAIT_NS));
	ASSERT_TRUE(f_page_is(&self->b, 0, 0x82));
	ASSERT_EQ(err, st_ctx_error(self->a.x.fd));
	ASSERT_EQ(0, st_ctx_error(self->b.x.fd));
}

TEST_F(fault, kernel_inject_fault_guilty_only)
{
	NEED_FAULTS();
	NEED_KERNEL(&self->a);
	f_kernel_guilty_only(_metadata, self, "mmu_fault", -EFAULT);
}

TEST_F(fault, kernel_inject_error_guilty_only)
{
	NEED_FAULTS();
	NEED_KERNEL(&self->a);
	f_kernel_guilty_only(_metadata, self, "error", -EIO);
}

TEST_HARNESS_MAIN
