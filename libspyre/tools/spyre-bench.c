// SPDX-License-Identifier: MIT
/*
 * spyre-bench - memory and execution benchmarks, each figure next to its
 * own floor or ceiling measured in the same run.
 *
 *   spyre-bench [--card N] [--time SEC] [--size MIB] [--iters N]
 *               [--host-memcpy GBPS] [--host-sgemm GFLOPS]
 *               [--host-sgemm-threads N] [--only mem|exec]
 *	on a machine with a card (the guest):
 *	memory (--only mem):
 *	1. BO life cycle: spyre_bo_alloc + spyre_bo_map + touch every page +
 *	   spyre_bo_unmap + spyre_bo_free per second, for 4 KiB and 2 MiB,
 *	   next to memfd_create + ftruncate + mmap + touch + munmap + close
 *	   in the same process (the ratio's goal is >= 50 %);
 *	2. card COPY bandwidth between system, device and registered host
 *	   memory (--size MiB, default 64), wall clock (submit to fence) and
 *	   card clock (TIMESTAMP commands around the COPY), next to the host
 *	   memcpy bandwidth given by --host-memcpy (the ceiling, measured
 *	   natively on the host by `spyre-bench --host`) and to memcpy in
 *	   this machine.
 *	execution (--only exec), NOP jobs through raw DRM ioctls:
 *	(i)   one NOP job's round trip (SUBMIT + wait on its out syncobj)
 *	      against a cross-thread eventfd ping-pong (goal <= 2x), with
 *	      the threads where the guest's scheduler puts them; also
 *	      against the same ping-pong pinned to one CPU (no cross-CPU
 *	      wake-up at all) and to two CPUs, as references without a
 *	      goal (the job's completion interrupt targets whichever CPU
 *	      its MSI-X vector is bound to, so the one-CPU case is a bound
 *	      no device round trip is built to reach);
 *	(ii)  per-job cost of 10 000 NOP jobs submitted 1, 16, 64 and 256
 *	      per SUBMIT against a no-op ioctl (QUERY with size 0; goal
 *	      <= 1.5x from 64 per SUBMIT);
 *	(iii) per-command cost of a 1000-NOP stream uploaded once and
 *	      submitted repeatedly, against the no-op ioctl (goal <= 0.5x);
 *	(iv)  a high-priority NOP's round trip while four low-priority queues
 *	      hold four 512^3 fp32 GEMMs each (sampled only while all four
 *	      still hold some), against the same round trip on an idle card
 *	      (goal <= 2x);
 *	(v)   512^3 GEMM throughput for fp32, fp16, bf16, fp8-e4m3 and int8
 *	      against the host's OpenBLAS sgemm given by --host-sgemm (same
 *	      thread count as the card's workers, measured natively on the
 *	      host by scripts/run-bench.sh; goal >= 50 % for fp32).  Both
 *	      are best-of figures: the ceiling is the fastest of up to 1000
 *	      calls, the card's the fastest of max(--iters, 10) jobs.
 *	A card whose engine refuses GEMM (-EIO) gets "n/a" for (iv) and (v).
 *	The run ends with a summary table of figure, floor, ratio and goal.
 *   spyre-bench --host [--size MIB]
 *	no card needed: prints "host-memcpy-gbps X", the best memcpy
 *	bandwidth of --size MiB buffers.
 *
 * Timings are printed, never judged: the exit status is 0 unless a step
 * failed (an error from libspyre or the kernel, a wrong result).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <drm/spyre_accel.h>
#include <spyre/spyre.h>

#define MiB (1024ull * 1024ull)
#define PAGE 4096ull

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "spyre-bench: %s: %s\n", what, spyre_strerror(err));
	return 1;
}

/* Touch every page of [p, p + size): one store per page. */
static void touch(volatile uint8_t *p, uint64_t size)
{
	for (uint64_t off = 0; off < size; off += PAGE)
		p[off] = (uint8_t)(off >> 12 | 1);
}

/* ---- memcpy ----------------------------------------------------------- */

/* Best memcpy bandwidth in GB/s over @reps copies of @size bytes. */
static double memcpy_gbps(uint64_t size, int reps)
{
	uint8_t *a = aligned_alloc(PAGE, size), *b = aligned_alloc(PAGE, size);
	double best = 0;

	if (!a || !b) {
		free(a);
		free(b);
		return 0;
	}
	memset(a, 0x5a, size);
	memset(b, 0xa5, size);
	for (int i = 0; i < reps; i++) {
		double t = now();

		memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
		t = now() - t;
		if (t > 0 && (double)size / t / 1e9 > best)
			best = (double)size / t / 1e9;
	}
	/* keep the copies observable */
	if (a[size / 2] != 0x5a && a[size / 2] != 0xa5)
		best = 0;
	free(a);
	free(b);
	return best;
}

/* ---- BO life cycle ---------------------------------------------------- */

struct cycle_ctx {
	struct spyre_device *dev;
	uint64_t size;
	uint32_t flags;
	int err;
};

static int cycle_bo(struct cycle_ctx *c)
{
	struct spyre_bo *bo;
	void *p;
	int ret = spyre_bo_alloc(c->dev, c->size, c->flags, &bo);

	if (ret)
		return ret;
	ret = spyre_bo_map(bo, &p);
	if (!ret) {
		touch(p, c->size);
		ret = spyre_bo_unmap(bo);
	}
	spyre_bo_free(bo);
	return ret;
}

static int cycle_memfd(struct cycle_ctx *c)
{
	int fd = memfd_create("spyre-bench", MFD_CLOEXEC);
	void *p;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)c->size)) {
		close(fd);
		return -errno;
	}
	p = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -errno;
	}
	touch(p, c->size);
	munmap(p, c->size);
	close(fd);
	return 0;
}

/* Mean microseconds per step of @n cycles (a separate, timed pass). */
static int breakdown(struct cycle_ctx *c, int memfd, int n, double us[5])
{
	double t[6];

	memset(us, 0, 5 * sizeof(double));
	for (int i = 0; i < n; i++) {
		struct spyre_bo *bo = NULL;
		void *p = NULL;
		int fd = -1, ret;

		t[0] = now();
		if (memfd) {
			fd = memfd_create("spyre-bench", MFD_CLOEXEC);
			ret = fd < 0 || ftruncate(fd, (off_t)c->size) ? -errno : 0;
		} else {
			ret = spyre_bo_alloc(c->dev, c->size, c->flags, &bo);
		}
		t[1] = now();
		if (!ret && memfd) {
			p = mmap(NULL, c->size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, fd, 0);
			ret = p == MAP_FAILED ? -errno : 0;
		} else if (!ret) {
			ret = spyre_bo_map(bo, &p);
		}
		t[2] = now();
		if (!ret)
			touch(p, c->size);
		t[3] = now();
		if (!ret) {
			if (memfd)
				munmap(p, c->size);
			else
				ret = spyre_bo_unmap(bo);
		}
		t[4] = now();
		if (memfd && fd >= 0)
			close(fd);
		else
			spyre_bo_free(bo);
		t[5] = now();
		if (ret)
			return ret;
		for (int k = 0; k < 5; k++)
			us[k] += (t[k + 1] - t[k]) * 1e6 / n;
	}
	return 0;
}

/* Cycles per second of @fn for about @secs seconds (after one warm-up). */
static double rate(int (*fn)(struct cycle_ctx *), struct cycle_ctx *c,
		   double secs)
{
	double t0, t;
	long n = 0;
	int ret = fn(c);

	if (ret) {
		c->err = ret;
		return 0;
	}
	t0 = now();
	do {
		/* check the clock every few cycles only */
		for (int i = 0; i < 4; i++, n++) {
			ret = fn(c);
			if (ret) {
				c->err = ret;
				return 0;
			}
		}
		t = now() - t0;
	} while (t < secs);
	return (double)n / t;
}

static int bench_cycles(struct spyre_device *dev, double secs)
{
	static const uint64_t sizes[] = { 4096, 2 * MiB };
	const int rounds = 3;

	printf("\n== BO life cycle: create + map + touch every page + unmap "
	       "+ free, per second\n");
	printf("   (best of %d rounds of %.1f s; memfd = memfd_create + "
	       "ftruncate + mmap + touch + munmap + close)\n", rounds, secs);
	printf("%-8s %12s %12s %12s %10s %s\n", "size", "spyre-sys/s",
	       "spyre-dev/s", "memfd/s", "sys/memfd", "goal >= 50%");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct cycle_ctx sys = { dev, sizes[s], SPYRE_BO_FLAGS_NONE, 0 };
		struct cycle_ctx dv = { dev, sizes[s], SPYRE_BO_DEVICE, 0 };
		struct cycle_ctx mf = { dev, sizes[s], 0, 0 };
		double r_sys = 0, r_dev = 0, r_mf = 0, r;

		/* Interleaved rounds so drift hits all three alike. */
		for (int i = 0; i < rounds; i++) {
			r = rate(cycle_memfd, &mf, secs);
			r_mf = r > r_mf ? r : r_mf;
			r = rate(cycle_bo, &sys, secs);
			r_sys = r > r_sys ? r : r_sys;
			r = rate(cycle_bo, &dv, secs);
			r_dev = r > r_dev ? r : r_dev;
		}
		if (sys.err)
			return fail("system BO cycle", sys.err);
		if (mf.err)
			return fail("memfd cycle", mf.err);
		printf("%-8s %12.0f ", sizes[s] >= MiB ? "2 MiB" : "4 KiB",
		       r_sys);
		if (dv.err)
			printf("%12s ", spyre_strerror(dv.err));
		else
			printf("%12.0f ", r_dev);
		printf("%12.0f %9.0f%% %s\n", r_mf,
		       r_mf > 0 ? 100.0 * r_sys / r_mf : 0.0,
		       r_mf > 0 && r_sys >= 0.5 * r_mf ? "met" : "NOT met");
	}

	printf("   where the time goes (us per call, mean of a separate "
	       "timed pass):\n");
	printf("%-16s %9s %9s %9s %9s %9s\n", "", "create", "map", "touch",
	       "unmap", "free");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		static const char *const what[3] = { "spyre-sys", "spyre-dev",
						     "memfd" };
		static const uint32_t flags[3] = { 0, SPYRE_BO_DEVICE, 0 };
		int n = sizes[s] >= MiB ? 20 : 200;

		for (int k = 0; k < 3; k++) {
			struct cycle_ctx c = { dev, sizes[s], flags[k], 0 };
			double us[5];
			char name[32];

			if (breakdown(&c, k == 2, n, us))
				continue;
			snprintf(name, sizeof(name), "%s %s", what[k],
				 sizes[s] >= MiB ? "2M" : "4K");
			printf("%-16s %9.1f %9.1f %9.1f %9.1f %9.1f\n", name,
			       us[0], us[1], us[2], us[3], us[4]);
		}
	}
	return 0;
}

/* ---- copy bandwidth --------------------------------------------------- */

enum { SYS_A, SYS_B, DEV_A, DEV_B, HOST_A, HOST_B, NBUF };

static const char *const buf_name[NBUF] = {
	"system", "system", "device", "device", "host", "host",
};

struct copy_env {
	struct spyre_device *dev;
	struct spyre_queue *q;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo[NBUF];
	void *host[2];
	struct spyre_bo *ts;		/* timestamps */
	volatile uint64_t *ts_map;
	uint64_t size;
};

/* One timed COPY dst <- src; returns 0 and the wall and card seconds. */
static int timed_copy(struct copy_env *e, int dst, int src, double *wall,
		      double *card)
{
	struct spyre_bo *bos[3] = { e->bo[dst], e->bo[src], e->ts };
	struct spyre_fence f;
	double t;
	int ret;

	spyre_cmdbuf_reset(e->cb);
	ret = spyre_cmdbuf_timestamp(e->cb, spyre_bo_va(e->ts));
	if (!ret)
		ret = spyre_cmdbuf_copy(e->cb, spyre_bo_va(e->bo[dst]),
					spyre_bo_va(e->bo[src]), e->size);
	if (!ret)
		ret = spyre_cmdbuf_timestamp(e->cb, spyre_bo_va(e->ts) + 8);
	if (ret)
		return ret;
	t = now();
	ret = spyre_submit(e->q, e->cb, bos, 3, NULL, 0, &f);
	if (!ret)
		ret = spyre_fence_wait(&f, 60ull * 1000000000ull);
	*wall = now() - t;
	if (ret)
		return ret;
	*card = (double)(e->ts_map[1] - e->ts_map[0]) * 1e-9;
	return 0;
}

static int check_copy(struct copy_env *e, int dst, uint8_t seed)
{
	uint8_t *p;
	int ret;

	ret = spyre_bo_map(e->bo[dst], (void **)&p);
	if (ret)
		return ret;
	/* sample one byte in every page (device memory reads are slow) */
	for (uint64_t off = 0; off < e->size; off += PAGE)
		if (p[off] != (uint8_t)(seed + (off >> 12)))
			return -EIO;
	return 0;
}

static int bench_copies(struct spyre_device *dev, uint64_t size, int iters,
			double host_gbps)
{
	static const int paths[][2] = {	/* dst, src */
		{ DEV_A, SYS_A }, { SYS_B, DEV_A }, { HOST_A, SYS_A },
		{ SYS_B, HOST_A }, { DEV_A, HOST_A }, { HOST_B, DEV_A },
		{ DEV_B, DEV_A }, { SYS_B, SYS_A }, { HOST_B, HOST_A },
	};
	struct copy_env e;
	double guest_gbps = memcpy_gbps(size, 5);
	int ret = 0, rc = 0;

	memset(&e, 0, sizeof(e));
	e.dev = dev;
	e.size = size;
	ret = spyre_queue_create(dev, SPYRE_PRIORITY_NORMAL, &e.q);
	if (!ret)
		ret = spyre_cmdbuf_create(&e.cb);
	if (!ret)
		ret = spyre_bo_alloc(dev, PAGE, 0, &e.ts);
	if (!ret)
		ret = spyre_bo_map(e.ts, (void **)&e.ts_map);
	for (int i = 0; !ret && i < NBUF; i++) {
		if (i == HOST_A || i == HOST_B) {
			void *h = aligned_alloc(PAGE, size);

			if (!h) {
				ret = -ENOMEM;
				break;
			}
			memset(h, 0, size);	/* populate before pinning */
			e.host[i - HOST_A] = h;
			ret = spyre_bo_register_host(dev, h, size, 0, &e.bo[i]);
		} else {
			ret = spyre_bo_alloc(dev, size,
					     i == DEV_A || i == DEV_B ?
					     SPYRE_BO_DEVICE : 0, &e.bo[i]);
		}
	}
	if (ret) {
		rc = fail("copy set-up", ret);
		goto out;
	}
	{
		uint8_t *p;

		ret = spyre_bo_map(e.bo[SYS_A], (void **)&p);
		if (ret) {
			rc = fail("map", ret);
			goto out;
		}
		for (uint64_t off = 0; off < size; off += PAGE)
			memset(p + off, (uint8_t)(7 + (off >> 12)), PAGE);
	}

	printf("\n== card COPY bandwidth, %llu MiB per copy (best of %d)\n",
	       (unsigned long long)(size / MiB), iters);
	if (host_gbps > 0)
		printf("   ceiling: host memcpy %.2f GB/s (measured natively on "
		       "the host)\n", host_gbps);
	else
		printf("   ceiling: host memcpy not given (--host-memcpy)\n");
	printf("   this machine's CPU memcpy: %.2f GB/s\n", guest_gbps);
	printf("%-18s %10s %10s %12s %12s\n", "path (src->dst)", "wall GB/s",
	       "card GB/s", "wall/host", "card/host");
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int dst = paths[i][0], src = paths[i][1];
		double best_w = 1e30, best_c = 1e30, w, c;
		char name[32];

		for (int it = 0; it < iters; it++) {
			ret = timed_copy(&e, dst, src, &w, &c);
			if (ret)
				break;
			best_w = w < best_w ? w : best_w;
			best_c = c < best_c && c > 0 ? c : best_c;
		}
		if (!ret)
			ret = check_copy(&e, dst, 7);
		snprintf(name, sizeof(name), "%s->%s", buf_name[src],
			 buf_name[dst]);
		if (ret) {
			printf("%-18s %s\n", name, spyre_strerror(ret));
			rc = 1;
			continue;
		}
		w = (double)size / best_w / 1e9;
		c = best_c < 1e30 ? (double)size / best_c / 1e9 : 0;
		printf("%-18s %10.2f %10.2f ", name, w, c);
		if (host_gbps > 0)
			printf("%11.1f%% %11.1f%%\n", 100 * w / host_gbps,
			       100 * c / host_gbps);
		else
			printf("%12s %12s\n", "-", "-");
	}
out:
	for (int i = 0; i < NBUF; i++)
		spyre_bo_free(e.bo[i]);
	free(e.host[0]);
	free(e.host[1]);
	spyre_bo_free(e.ts);
	spyre_cmdbuf_destroy(e.cb);
	spyre_queue_destroy(e.q);
	return rc;
}

/* ---- execution -------------------------------------------------------- */

/*
 * The execution benchmarks talk to the kernel directly (DRM ioctls on the
 * device's fd, binary syncobjs) so that they measure the driver's dispatch
 * path, not libspyre's bookkeeping; libspyre's own round trip is printed
 * next to them for reference.
 */

#define GEMM_DIM	512u
#define NSEC		1000000000ll

struct summary_row {
	char figure[64];
	char value[24];
	char floor_name[32];
	char floor_value[24];
	double ratio;		/* < 0: no ratio */
	double goal;		/* the ratio's goal */
	int goal_le;		/* 1: ratio <= goal, 0: ratio >= goal */
};

static struct summary_row summary[16];
static int nsummary;

static void summary_add(const char *figure, const char *value,
			const char *floor_name, const char *floor_value,
			double ratio, double goal, int goal_le)
{
	struct summary_row *r;

	if (nsummary >= (int)(sizeof(summary) / sizeof(summary[0])))
		return;
	r = &summary[nsummary++];
	snprintf(r->figure, sizeof(r->figure), "%s", figure);
	snprintf(r->value, sizeof(r->value), "%s", value);
	snprintf(r->floor_name, sizeof(r->floor_name), "%s", floor_name);
	snprintf(r->floor_value, sizeof(r->floor_value), "%s", floor_value);
	r->ratio = ratio;
	r->goal = goal;
	r->goal_le = goal_le;
}

static void summary_print(void)
{
	if (!nsummary)
		return;
	printf("\n== summary (each figure against its floor from this run)\n");
	printf("%-40s %12s  %-22s %12s %8s %10s\n", "figure", "value", "floor",
	       "value", "ratio", "goal");
	for (int i = 0; i < nsummary; i++) {
		struct summary_row *r = &summary[i];
		char ratio[16] = "-", goal[16] = "-";

		if (r->ratio >= 0)
			snprintf(ratio, sizeof(ratio), "%.2fx", r->ratio);
		if (r->ratio >= 0 && r->goal <= 0) {
			snprintf(goal, sizeof(goal), "(info)");
		} else if (r->ratio >= 0) {
			snprintf(goal, sizeof(goal), "%s %.2gx%s",
				 r->goal_le ? "<=" : ">=", r->goal,
				 (r->goal_le ? r->ratio <= r->goal :
					       r->ratio >= r->goal) ? "" : " !");
		}
		printf("%-40s %12s  %-22s %12s %8s %10s\n", r->figure, r->value,
		       r->floor_name, r->floor_value, ratio, goal);
	}
	printf("   (\"!\" marks a goal not met, \"(info)\" a reference without "
	       "a goal; figures are reported, never judged)\n");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sort @v and return its @q quantile (0.5: median). */
static double quantile(double *v, int n, double q)
{
	int i;

	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	i = (int)(q * (n - 1) + 0.5);
	return v[i];
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

/* The tools link libspyre only: DRM ioctls are made by hand. */
static int xioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	do
		ret = ioctl(fd, req, arg);
	while (ret == -1 && (errno == EINTR || errno == EAGAIN));
	return ret ? -errno : 0;
}

static int xsyncobj_create(int fd, uint32_t *h)
{
	struct drm_syncobj_create c = { 0 };
	int ret = xioctl(fd, DRM_IOCTL_SYNCOBJ_CREATE, &c);

	if (!ret)
		*h = c.handle;
	return ret;
}

static void xsyncobj_destroy(int fd, uint32_t h)
{
	struct drm_syncobj_destroy d = { .handle = h };

	if (h)
		xioctl(fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d);
}

/* Wait for @n binary syncobjs (all of them) until @abs_ns; 0 polls. */
/* Wait for all (@all) or any of the @n syncobjs at @h until @abs_ns. */
static int xsyncobj_wait_flags(int fd, uint32_t *h, uint32_t n,
			       int64_t abs_ns, bool all)
{
	struct drm_syncobj_wait w = {
		.handles = (uintptr_t)h,
		.timeout_nsec = abs_ns,
		.count_handles = n,
		.flags = all ? DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL : 0,
	};

	return xioctl(fd, DRM_IOCTL_SYNCOBJ_WAIT, &w);
}

static int xsyncobj_wait(int fd, uint32_t *h, uint32_t n, int64_t abs_ns)
{
	return xsyncobj_wait_flags(fd, h, n, abs_ns, true);
}

static int xqueue_create(int fd, uint32_t prio, uint32_t *id)
{
	struct drm_spyre_queue_create qc = { .priority = prio };
	int ret = xioctl(fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &qc);

	if (!ret)
		*id = qc.queue_id;
	return ret;
}

static void xqueue_destroy(int fd, uint32_t id)
{
	struct drm_spyre_queue_destroy qd = { .queue_id = id };

	if (id)
		xioctl(fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &qd);
}

static int xsubmit(int fd, struct drm_spyre_job *jobs, uint32_t n)
{
	struct drm_spyre_submit s = {
		.jobs = (uintptr_t)jobs,
		.job_count = n,
		.job_stride = sizeof(*jobs),
	};

	return xioctl(fd, DRM_IOCTL_SPYRE_SUBMIT, &s);
}

/* Wait for a binary syncobj, at most @secs seconds. */
static int xwait(int fd, uint32_t h, double secs)
{
	return xsyncobj_wait(fd, &h, 1, mono_ns() + (int64_t)(secs * 1e9));
}

/* The context's sticky error (0 while every job succeeded). */
static int xctx_error(int fd)
{
	struct drm_spyre_context_info ci;
	struct drm_spyre_query qy = {
		.query = DRM_SPYRE_QUERY_CONTEXT,
		.size = sizeof(ci),
		.data = (uintptr_t)&ci,
	};
	int ret;

	memset(&ci, 0, sizeof(ci));
	ret = xioctl(fd, DRM_IOCTL_SPYRE_QUERY, &qy);
	return ret ? ret : ci.error;
}

/* The floor of every per-job figure: an ioctl that does nothing. */
static int noop_ioctl(int fd)
{
	struct drm_spyre_query qy = { .query = DRM_SPYRE_QUERY_DEVICE_INFO };

	return xioctl(fd, DRM_IOCTL_SPYRE_QUERY, &qy);
}

/* Mean ns per no-op ioctl over about @secs seconds (best of 3 rounds). */
static double noop_ioctl_ns(int fd, double secs)
{
	double best = 1e30;

	for (int r = 0; r < 3; r++) {
		int64_t t0 = mono_ns(), t;
		long n = 0;

		do {
			for (int i = 0; i < 64; i++, n++)
				if (noop_ioctl(fd))
					return 0;
			t = mono_ns() - t0;
		} while (t < secs * 1e9 / 3);
		if ((double)t / n < best)
			best = (double)t / n;
	}
	return best;
}

/* ---- eventfd ping-pong (floor of the round trip) ---- */

struct pingpong {
	int efd[2];
	long iters;
	int cpu;		/* pin the pong thread there; -1: don't */
};

static void pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *pong_thread(void *arg)
{
	struct pingpong *pp = arg;
	uint64_t v;

	if (pp->cpu >= 0)
		pin_self(pp->cpu);

	for (long i = 0; i < pp->iters; i++) {
		if (read(pp->efd[0], &v, sizeof(v)) != sizeof(v))
			break;
		v = 1;
		if (write(pp->efd[1], &v, sizeof(v)) != sizeof(v))
			break;
	}
	return NULL;
}

/* Where pingpong_ns() puts its two threads. */
enum pp_mode {
	PP_UNPINNED,	/* where the guest's scheduler puts them */
	PP_ONE_CPU,	/* both on the caller's CPU: no cross-CPU wake-up */
	PP_TWO_CPUS,	/* one each on two CPUs: two cross-CPU wake-ups */
};

/*
 * Median ns of a cross-thread eventfd round trip; 0 on error (or
 * PP_TWO_CPUS on one CPU).  The caller's affinity is restored.
 */
static double pingpong_ns(long iters, enum pp_mode mode)
{
	struct pingpong pp = { { -1, -1 }, iters, -1 };
	double *t = calloc((size_t)iters, sizeof(*t)), med = 0;
	int cpu = sched_getcpu(), ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t saved;
	pthread_t th;
	uint64_t v;
	long i;

	if (cpu < 0 || (mode == PP_TWO_CPUS && ncpu < 2)) {
		free(t);
		return 0;
	}
	sched_getaffinity(0, sizeof(saved), &saved);
	if (mode != PP_UNPINNED)
		pin_self(cpu);
	pp.cpu = mode == PP_ONE_CPU ? cpu :
		 mode == PP_TWO_CPUS ? (cpu + 1) % ncpu : -1;
	pp.efd[0] = eventfd(0, EFD_CLOEXEC);
	pp.efd[1] = eventfd(0, EFD_CLOEXEC);
	if (!t || pp.efd[0] < 0 || pp.efd[1] < 0 ||
	    pthread_create(&th, NULL, pong_thread, &pp))
		goto out;
	for (i = 0; i < iters; i++) {
		int64_t t0 = mono_ns();

		v = 1;
		if (write(pp.efd[0], &v, sizeof(v)) != sizeof(v) ||
		    read(pp.efd[1], &v, sizeof(v)) != sizeof(v))
			break;
		t[i] = (double)(mono_ns() - t0);
	}
	pthread_join(th, NULL);
	if (i == iters)
		med = quantile(t + iters / 10, (int)(iters - iters / 10), 0.5);
out:
	sched_setaffinity(0, sizeof(saved), &saved);
	free(t);
	if (pp.efd[0] >= 0)
		close(pp.efd[0]);
	if (pp.efd[1] >= 0)
		close(pp.efd[1]);
	return med;
}

/* ---- NOP jobs ---- */

struct xenv {
	struct spyre_device *dev;
	int fd;
	struct spyre_bo *nop;		/* one NOP */
	struct spyre_bo *nops;		/* NOP_LIST NOPs */
	uint32_t syncobj;
};

#define NOP_LIST	1000u

static int upload_nops(struct spyre_device *dev, unsigned int n,
		       struct spyre_bo **out)
{
	struct spyre_cmdbuf *cb;
	int ret = spyre_cmdbuf_create(&cb);

	for (unsigned int i = 0; !ret && i < n; i++)
		ret = spyre_cmdbuf_nop(cb);
	if (!ret)
		ret = spyre_cmdbuf_upload(cb, dev, out);
	spyre_cmdbuf_destroy(cb);
	return ret;
}

/* A job running the @size bytes of commands at the start of @bo. */
static struct drm_spyre_bo_ref bo_ref(struct spyre_bo *bo, uint32_t flags)
{
	return (struct drm_spyre_bo_ref){ spyre_bo_handle(bo), flags };
}

static void make_job(struct drm_spyre_job *j, uint32_t queue,
		     struct spyre_bo *bo, uint32_t size,
		     struct drm_spyre_sync *out)
{
	memset(j, 0, sizeof(*j));
	j->queue_id = queue;
	j->cmd_va = spyre_bo_va(bo);
	j->cmd_size = size;
	if (out) {
		j->out_syncs = (uintptr_t)out;
		j->out_sync_count = 1;
	}
}

/*
 * Round trips of one job (@bo's stream) on @queue: submit, then wait for
 * its out syncobj.  Fills @t[0..n) with ns per round trip; @sub (if not
 * NULL) gets the ns spent in the submit ioctl.
 */
static int round_trips(struct xenv *x, uint32_t queue, struct spyre_bo *bo,
		       double *t, double *sub, int n)
{
	struct drm_spyre_sync out = { .handle = x->syncobj };
	struct drm_spyre_job j;
	int ret;

	make_job(&j, queue, bo, 8, &out);
	for (int i = 0; i < n; i++) {
		int64_t t0 = mono_ns(), t1;

		ret = xsubmit(x->fd, &j, 1);
		t1 = mono_ns();
		if (!ret)
			ret = xwait(x->fd, x->syncobj, 10);
		if (ret)
			return ret;
		t[i] = (double)(mono_ns() - t0);
		if (sub)
			sub[i] = (double)(t1 - t0);
	}
	return 0;
}

/* (ii): ns per job of @total NOP jobs submitted @batch per ioctl. */
static int batched_jobs(struct xenv *x, uint32_t queue, int total, int batch,
			double *per_job, double *per_job_submit)
{
	struct drm_spyre_sync out = { .handle = x->syncobj };
	struct drm_spyre_job *jobs = calloc((size_t)batch, sizeof(*jobs));
	int64_t t0, in_submit = 0;
	int ret = 0;

	if (!jobs)
		return -ENOMEM;
	for (int i = 0; i < batch; i++)
		make_job(&jobs[i], queue, x->nop, 8, NULL);
	t0 = mono_ns();
	for (int done = 0; !ret && done < total; done += batch) {
		int n = total - done < batch ? total - done : batch;
		int64_t s0 = mono_ns();

		/* Only the last job signals: jobs of a queue end in order. */
		if (done + n >= total) {
			jobs[n - 1].out_syncs = (uintptr_t)&out;
			jobs[n - 1].out_sync_count = 1;
		}
		ret = xsubmit(x->fd, jobs, (uint32_t)n);
		in_submit += mono_ns() - s0;
	}
	if (!ret)
		ret = xwait(x->fd, x->syncobj, 60);
	if (!ret) {
		*per_job = (double)(mono_ns() - t0) / total;
		*per_job_submit = (double)in_submit / total;
	}
	free(jobs);
	return ret;
}

/* (iii): ns per command of the NOP_LIST-NOP stream replayed @reps times. */
static int replayed_list(struct xenv *x, uint32_t queue, int reps,
			 double *per_cmd)
{
	struct drm_spyre_sync out = { .handle = x->syncobj };
	struct drm_spyre_job j;
	int64_t t0 = mono_ns();
	int ret = 0;

	make_job(&j, queue, x->nops, 8 * NOP_LIST, NULL);
	for (int i = 0; !ret && i < reps; i++) {
		if (i == reps - 1) {
			j.out_syncs = (uintptr_t)&out;
			j.out_sync_count = 1;
		}
		ret = xsubmit(x->fd, &j, 1);
	}
	if (!ret)
		ret = xwait(x->fd, x->syncobj, 120);
	if (!ret)
		*per_cmd = (double)(mono_ns() - t0) / ((double)reps * NOP_LIST);
	return ret;
}

static void fmt_us(char *buf, size_t len, double ns)
{
	snprintf(buf, len, "%.1f us", ns / 1e3);
}

static int bench_dispatch(struct spyre_device *dev, double secs)
{
	struct xenv x = { .dev = dev, .fd = spyre_device_fd(dev) };
	static const int batches[] = { 1, 16, 64, 256 };
	const int total = 10000;
	char v[24], f[24], name[64];
	double noop, pp, *t = NULL, *sub = NULL;
	uint32_t queue = 0;
	int n, ret, rc = 0;

	ret = xqueue_create(x.fd, DRM_SPYRE_PRIORITY_NORMAL, &queue);
	if (!ret)
		ret = upload_nops(dev, 1, &x.nop);
	if (!ret)
		ret = upload_nops(dev, NOP_LIST, &x.nops);
	if (!ret)
		ret = xsyncobj_create(x.fd, &x.syncobj);
	if (ret) {
		rc = fail("dispatch set-up", ret);
		goto out;
	}

	printf("\n== job dispatch (NOP jobs, raw ioctls, no BOs listed)\n");
	noop = noop_ioctl_ns(x.fd, secs);
	printf("   floor: no-op ioctl (QUERY, size 0) %.2f us\n", noop / 1e3);

	/*
	 * (i) round trip vs eventfd ping-pong, in alternating rounds; the
	 * best round's median of each counts (the machine's other load hits
	 * both alike and is least in the best round).
	 */
	n = 2000;
	t = calloc((size_t)n, sizeof(*t));
	sub = calloc((size_t)n, sizeof(*sub));
	if (!t || !sub) {
		rc = fail("dispatch", -ENOMEM);
		goto out;
	}
	ret = round_trips(&x, queue, x.nop, t, sub, 50);	/* warm-up */
	if (!ret) {
		/* as many per round as fit in @secs / 5, 100..1000 */
		int64_t t0 = mono_ns();

		ret = round_trips(&x, queue, x.nop, t, sub, 100);
		n = (int)(secs * 1e9 / 5 / ((double)(mono_ns() - t0) / 100));
		n = n < 100 ? 100 : n > 1000 ? 1000 : n;
	}
	{
		double med = 1e30, p90 = 0, smed = 0, pp1 = 1e30, pp2 = 1e30;
		const int rounds = 5;

		pp = 1e30;
		for (int r = 0; !ret && r < rounds; r++) {
			double m = pingpong_ns(n, PP_UNPINNED);

			pp = m > 0 && m < pp ? m : pp;
			m = pingpong_ns(n, PP_ONE_CPU);
			pp1 = m > 0 && m < pp1 ? m : pp1;
			m = pingpong_ns(n, PP_TWO_CPUS);
			pp2 = m > 0 && m < pp2 ? m : pp2;
			ret = round_trips(&x, queue, x.nop, t, sub, n);
			if (ret)
				break;
			m = quantile(t, n, 0.5);
			if (m < med) {
				med = m;
				p90 = quantile(t, n, 0.9);
				smed = quantile(sub, n, 0.5);
			}
		}
		if (ret) {
			rc = fail("NOP round trip", ret);
			goto out;
		}
		pp = pp < 1e30 ? pp : 0;
		pp1 = pp1 < 1e30 ? pp1 : 0;
		pp2 = pp2 < 1e30 ? pp2 : 0;
		printf("   (i) NOP round trip, submit + syncobj wait: median "
		       "%.1f us, p90 %.1f us (median in SUBMIT %.1f us); best "
		       "of %d rounds of %d\n", med / 1e3, p90 / 1e3,
		       smed / 1e3, rounds, n);
		printf("       floor: cross-thread eventfd ping-pong, threads "
		       "where the scheduler puts them: %.1f us -> %.2fx (goal "
		       "<= 2x)\n", pp / 1e3, pp > 0 ? med / pp : 0);
		printf("       (both threads pinned to one CPU, no cross-CPU "
		       "wake-up: %.1f us -> %.2fx;\n        pinned to two "
		       "CPUs: %.1f us -> %.2fx)\n", pp1 / 1e3,
		       pp1 > 0 ? med / pp1 : 0, pp2 / 1e3,
		       pp2 > 0 ? med / pp2 : 0);
		fmt_us(v, sizeof(v), med);
		fmt_us(f, sizeof(f), pp);
		summary_add("(i) NOP round trip", v, "eventfd ping-pong",
			    f, pp > 0 ? med / pp : -1, 2, 1);
		fmt_us(f, sizeof(f), pp1);
		/* A stricter reference than the goal's floor: no IPI. */
		summary_add("(i) NOP round trip", v, "ping-pong on 1 CPU",
			    f, pp1 > 0 ? med / pp1 : -1, 0, 1);
	}
	/* libspyre's round trip, for reference */
	{
		struct spyre_queue *lq;
		struct spyre_fence fe;
		int m = n < 300 ? n : 300;

		ret = spyre_queue_create(dev, SPYRE_PRIORITY_NORMAL, &lq);
		for (int i = 0; !ret && i < m + 20; i++) {
			int64_t t0 = mono_ns();

			ret = spyre_submit_va(lq, spyre_bo_va(x.nop), 8, &x.nop,
					      1, NULL, 0, &fe);
			if (!ret)
				ret = spyre_fence_wait(&fe, 10ull * NSEC);
			if (i >= 20)
				t[i - 20] = (double)(mono_ns() - t0);
		}
		if (!ret)
			printf("       for reference, libspyre spyre_submit_va + "
			       "spyre_fence_wait (1 BO listed): median %.1f us\n",
			       quantile(t, m, 0.5) / 1e3);
		else
			printf("       libspyre round trip: %s\n",
			       spyre_strerror(ret));
		spyre_queue_destroy(lq);
		ret = 0;
	}

	/* (ii) batched submission */
	printf("   (ii) %d NOP jobs, per job (wall, submit to last fence; "
	       "time in SUBMIT):\n", total);
	for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
		double best = 1e30, best_sub = 0;

		for (int r = 0; r < 3; r++) {
			double pj, ps;

			ret = batched_jobs(&x, queue, total, batches[b], &pj,
					   &ps);
			if (ret)
				break;
			if (pj < best) {
				best = pj;
				best_sub = ps;
			}
		}
		if (ret) {
			rc = fail("batched jobs", ret);
			goto out;
		}
		printf("       %3d jobs per SUBMIT: %7.2f us per job (%.2f us "
		       "in SUBMIT) -> %.2fx the no-op ioctl%s\n", batches[b],
		       best / 1e3, best_sub / 1e3, noop > 0 ? best / noop : 0,
		       batches[b] >= 64 ? " (goal <= 1.5x)" : "");
		if (batches[b] >= 64) {
			snprintf(name, sizeof(name),
				 "(ii) per job, %d per SUBMIT", batches[b]);
			fmt_us(v, sizeof(v), best);
			snprintf(f, sizeof(f), "%.2f us", noop / 1e3);
			summary_add(name, v, "no-op ioctl", f,
				    noop > 0 ? best / noop : -1, 1.5, 1);
		}
	}

	/* (iii) replayed command list */
	{
		double pc = 0, best = 1e30;
		int reps = 4;
		int64_t t0 = mono_ns();

		ret = replayed_list(&x, queue, reps, &pc);	/* calibrate */
		if (!ret) {
			double one = (double)(mono_ns() - t0) / reps;

			reps = (int)(secs * 1e9 / one);
			reps = reps < 4 ? 4 : reps > 400 ? 400 : reps;
		}
		for (int r = 0; !ret && r < 3; r++) {
			ret = replayed_list(&x, queue, reps, &pc);
			best = pc < best ? pc : best;
		}
		if (ret) {
			rc = fail("replayed list", ret);
			goto out;
		}
		printf("   (iii) %u-NOP command list uploaded once, replayed "
		       "%d times: %.3f us per command -> %.2fx the no-op "
		       "ioctl (goal <= 0.5x)\n", NOP_LIST, reps, best / 1e3,
		       noop > 0 ? best / noop : 0);
		snprintf(v, sizeof(v), "%.3f us", best / 1e3);
		snprintf(f, sizeof(f), "%.2f us", noop / 1e3);
		summary_add("(iii) per command, replayed 1000-NOP list", v,
			    "no-op ioctl", f, noop > 0 ? best / noop : -1, 0.5,
			    1);
	}
	ret = xctx_error(x.fd);
	if (ret) {
		printf("   context error after the NOP jobs: %s\n",
		       spyre_strerror(ret));
		rc = 1;
	}
out:
	free(t);
	free(sub);
	xqueue_destroy(x.fd, queue);
	xsyncobj_destroy(x.fd, x.syncobj);
	spyre_bo_free(x.nop);
	spyre_bo_free(x.nops);
	return rc;
}

/* ---- GEMM ---- */

struct gemm_dtype {
	const char *name;
	uint32_t dtype, c_dtype, size;
	uint64_t one;		/* bit pattern of 1 */
};

static const struct gemm_dtype gemm_dtypes[] = {
	{ "fp32", SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 4, 0x3f800000 },
	{ "fp16", SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32, 2, 0x3c00 },
	{ "bf16", SPYRE_DTYPE_BF16, SPYRE_DTYPE_FP32, 2, 0x3f80 },
	{ "fp8-e4m3", SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP32, 1, 0x38 },
	{ "int8", SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32, 1, 0x01 },
};

static int cmd_gemm(struct spyre_cmdbuf *cb, const struct gemm_dtype *d,
		    uint64_t a, uint64_t b, uint64_t c)
{
	struct spyre_cmd_gemm g;

	memset(&g, 0, sizeof(g));
	g.hdr.opcode = SPYRE_OP_GEMM;
	g.hdr.size = sizeof(g);
	g.a_dtype = d->dtype;
	g.b_dtype = d->dtype;
	g.c_dtype = d->c_dtype;
	g.m = GEMM_DIM;
	g.n = GEMM_DIM;
	g.k = GEMM_DIM;
	g.batch = 1;
	g.a = a;
	g.b = b;
	g.c = c;
	g.lda = GEMM_DIM;
	g.ldb = GEMM_DIM;
	g.ldc = GEMM_DIM;
	g.stride_a = (uint64_t)GEMM_DIM * GEMM_DIM;
	g.stride_b = (uint64_t)GEMM_DIM * GEMM_DIM;
	g.stride_c = (uint64_t)GEMM_DIM * GEMM_DIM;
	g.alpha = 0x3f800000;	/* 1.0f */
	return spyre_cmdbuf_raw(cb, &g, sizeof(g));
}

struct gemm_env {
	struct spyre_device *dev;
	int fd;
	uint32_t queue;
	uint32_t syncobj;
	struct spyre_bo *a, *b, *c[4], *ts;
	volatile uint64_t *ts_map;
	const char *placement;
};

static void gemm_env_fini(struct gemm_env *g)
{
	xqueue_destroy(g->fd, g->queue);
	xsyncobj_destroy(g->fd, g->syncobj);
	spyre_bo_free(g->a);
	spyre_bo_free(g->b);
	for (int i = 0; i < 4; i++)
		spyre_bo_free(g->c[i]);
	spyre_bo_free(g->ts);
	if (g->dev)
		spyre_device_close(g->dev);
	memset(g, 0, sizeof(*g));
}

static int alloc_operand(struct spyre_device *dev, uint64_t size,
			 struct spyre_bo **bo, const char **placement)
{
	int ret = spyre_bo_alloc(dev, size, SPYRE_BO_DEVICE, bo);

	if (ret) {
		ret = spyre_bo_alloc(dev, size, 0, bo);
		*placement = "system";
	}
	return ret;
}

/* A fresh context (own fd: a failed job poisons only it) with operands. */
static int gemm_env_init(struct gemm_env *g, unsigned int card)
{
	const uint64_t sz = (uint64_t)GEMM_DIM * GEMM_DIM * 4;
	int ret;

	memset(g, 0, sizeof(*g));
	g->placement = "device";
	ret = spyre_device_open(card, &g->dev);
	if (ret)
		return ret;
	g->fd = spyre_device_fd(g->dev);
	ret = xqueue_create(g->fd, DRM_SPYRE_PRIORITY_NORMAL, &g->queue);
	if (!ret)
		ret = xsyncobj_create(g->fd, &g->syncobj);
	if (!ret)
		ret = alloc_operand(g->dev, sz, &g->a, &g->placement);
	if (!ret)
		ret = alloc_operand(g->dev, sz, &g->b, &g->placement);
	for (int i = 0; !ret && i < 4; i++)
		ret = alloc_operand(g->dev, sz, &g->c[i], &g->placement);
	if (!ret)
		ret = spyre_bo_alloc(g->dev, PAGE, 0, &g->ts);
	if (!ret)
		ret = spyre_bo_map(g->ts, (void **)&g->ts_map);
	return ret;
}

/*
 * Run @cb as one job on @queue listing the operands, wait for it and
 * return the context's error (so a failed job shows as its errno).
 */
static int gemm_run(struct gemm_env *g, uint32_t queue,
		    struct spyre_cmdbuf *cb, double *wall)
{
	struct spyre_bo *cmd;
	struct drm_spyre_sync out = { .handle = g->syncobj };
	struct drm_spyre_job j;
	struct drm_spyre_bo_ref h[8];
	int64_t t0;
	int ret = spyre_cmdbuf_upload(cb, g->dev, &cmd);

	if (ret)
		return ret;
	h[0] = bo_ref(cmd, DRM_SPYRE_BO_REF_READ);
	h[1] = bo_ref(g->a, DRM_SPYRE_BO_REF_READ);
	h[2] = bo_ref(g->b, DRM_SPYRE_BO_REF_READ);
	for (int i = 0; i < 4; i++)
		h[3 + i] = bo_ref(g->c[i], DRM_SPYRE_BO_REF_WRITE);
	h[7] = bo_ref(g->ts, DRM_SPYRE_BO_REF_WRITE);
	make_job(&j, queue, cmd, (uint32_t)spyre_cmdbuf_size(cb), &out);
	j.bos = (uintptr_t)h;
	j.bo_count = 8;
	t0 = mono_ns();
	ret = xsubmit(g->fd, &j, 1);
	if (!ret)
		ret = xwait(g->fd, g->syncobj, 120);
	if (wall)
		*wall = (double)(mono_ns() - t0);
	spyre_bo_free(cmd);
	return ret ? ret : xctx_error(g->fd);
}

/* Fill A and B with 1 of @d, C with 0. */
static int gemm_init_operands(struct gemm_env *g, const struct gemm_dtype *d)
{
	const uint64_t n = (uint64_t)GEMM_DIM * GEMM_DIM;
	struct spyre_cmdbuf *cb;
	int ret = spyre_cmdbuf_create(&cb);

	if (!ret)
		ret = spyre_cmdbuf_fill(cb, spyre_bo_va(g->a), n, d->size,
					d->one);
	if (!ret)
		ret = spyre_cmdbuf_fill(cb, spyre_bo_va(g->b), n, d->size,
					d->one);
	for (int i = 0; !ret && i < 4; i++)
		ret = spyre_cmdbuf_fill(cb, spyre_bo_va(g->c[i]), n, 4, 0);
	if (!ret)
		ret = gemm_run(g, g->queue, cb, NULL);
	spyre_cmdbuf_destroy(cb);
	return ret;
}

/* C[0][0] of the all-ones product must be K. */
static int gemm_check(struct gemm_env *g, const struct gemm_dtype *d)
{
	volatile uint32_t *p;
	uint32_t want;
	float fk = (float)GEMM_DIM;
	int ret = spyre_bo_map(g->c[0], (void **)&p);

	if (ret)
		return ret;
	if (d->c_dtype == SPYRE_DTYPE_INT32)
		want = GEMM_DIM;
	else
		memcpy(&want, &fk, sizeof(want));
	return p[0] == want && p[GEMM_DIM * GEMM_DIM - 1] == want ? 0 : -EIO;
}

/* Does the card run GEMM?  0, -ENOTSUP (it says invalid), or an error. */
static int gemm_probe(unsigned int card)
{
	struct gemm_env g;
	struct spyre_cmdbuf *cb = NULL;
	int ret = gemm_env_init(&g, card);

	if (!ret)
		ret = gemm_init_operands(&g, &gemm_dtypes[0]);
	if (!ret)
		ret = spyre_cmdbuf_create(&cb);
	if (!ret)
		ret = cmd_gemm(cb, &gemm_dtypes[0], spyre_bo_va(g.a),
			       spyre_bo_va(g.b), spyre_bo_va(g.c[0]));
	if (!ret) {
		ret = gemm_run(&g, g.queue, cb, NULL);
		if (ret == -EIO)
			ret = -ENOTSUP;
	}
	spyre_cmdbuf_destroy(cb);
	gemm_env_fini(&g);
	return ret;
}

/*
 * (iv): high-priority NOP round trip while four low-priority queues hold
 * four 512^3 fp32 GEMMs each, against the same round trip on an idle card.
 */
static int bench_priority(unsigned int card, double secs, int gemm_ok)
{
	struct gemm_env g;
	struct spyre_bo *nop = NULL, *gcmd[4] = { NULL };
	uint32_t lowq[4] = { 0 }, lows[4] = { 0 }, hiq = 0;
	struct xenv x;
	double *t = NULL, idle = 0, loaded, p90;
	const int nidle = 200, max_loaded = 4000;
	int n = 0, rounds = 0, ret, rc = 0;
	char v[24], f[24];

	printf("\n== priority: high-priority NOP round trip while 4 "
	       "low-priority queues hold 4 GEMMs (%u^3 fp32) each, sampled while all 4 are busy\n", GEMM_DIM);
	if (!gemm_ok) {
		printf("   n/a (card lacks GEMM)\n");
		summary_add("(iv) hi-prio NOP under GEMM load", "n/a",
			    "idle round trip", "-", -1, 2, 1);
		return 0;
	}
	ret = gemm_env_init(&g, card);
	if (!ret)
		ret = gemm_init_operands(&g, &gemm_dtypes[0]);
	if (!ret)
		ret = upload_nops(g.dev, 1, &nop);
	if (!ret)
		ret = xqueue_create(g.fd, DRM_SPYRE_PRIORITY_HIGH, &hiq);
	for (int i = 0; !ret && i < 4; i++) {
		struct spyre_cmdbuf *cb;

		ret = xqueue_create(g.fd, DRM_SPYRE_PRIORITY_LOW, &lowq[i]);
		if (!ret)
			ret = xsyncobj_create(g.fd, &lows[i]);
		if (!ret)
			ret = spyre_cmdbuf_create(&cb);
		if (ret)
			break;
		ret = cmd_gemm(cb, &gemm_dtypes[0], spyre_bo_va(g.a),
			       spyre_bo_va(g.b), spyre_bo_va(g.c[i]));
		if (!ret)
			ret = spyre_cmdbuf_upload(cb, g.dev, &gcmd[i]);
		spyre_cmdbuf_destroy(cb);
	}
	t = calloc(max_loaded, sizeof(*t));
	if (!ret && !t)
		ret = -ENOMEM;
	if (ret) {
		rc = fail("priority set-up", ret);
		goto out;
	}
	x.dev = g.dev;
	x.fd = g.fd;
	x.syncobj = g.syncobj;

	ret = round_trips(&x, hiq, nop, t, NULL, 20);
	if (!ret)
		ret = round_trips(&x, hiq, nop, t, NULL, nidle);
	if (ret) {
		rc = fail("idle round trip", ret);
		goto out;
	}
	idle = quantile(t, nidle, 0.5);

	/* Load rounds until enough samples or @secs * 10 seconds. */
	{
		int64_t t_end = mono_ns() + (int64_t)(secs * 10 * 1e9);

		while (!ret && n < 400 && mono_ns() < t_end) {
			struct drm_spyre_bo_ref h[2] = {
				bo_ref(g.a, DRM_SPYRE_BO_REF_READ),
				bo_ref(g.b, DRM_SPYRE_BO_REF_READ),
			};

			for (int i = 0; !ret && i < 4; i++) {
				struct drm_spyre_sync out = { .handle = lows[i] };
				struct drm_spyre_job j[4];

				for (int k = 0; k < 4; k++) {
					make_job(&j[k], lowq[i], gcmd[i],
						 sizeof(struct spyre_cmd_gemm),
						 k == 3 ? &out : NULL);
					j[k].bos = (uintptr_t)h;
					j[k].bo_count = 2;
				}
				ret = xsubmit(g.fd, j, 4);
			}
			rounds++;
			/*
			 * Samples taken while all four low-priority queues
			 * still hold GEMMs (none has signalled its last).
			 */
			while (!ret && n < max_loaded) {
				if (!xsyncobj_wait_flags(g.fd, lows, 4, 0, false))
					break;
				ret = round_trips(&x, hiq, nop, t + n, NULL, 1);
				n++;
			}
			if (!ret)
				ret = xwait(g.fd, lows[0], 120);
			for (int i = 1; !ret && i < 4; i++)
				ret = xwait(g.fd, lows[i], 120);
		}
	}
	if (!ret)
		ret = xctx_error(g.fd);
	if (ret) {
		rc = fail("loaded round trip", ret);
		goto out;
	}
	if (!n) {
		printf("   the GEMMs ended before a NOP could be timed\n");
		goto out;
	}
	loaded = quantile(t, n, 0.5);
	p90 = quantile(t, n, 0.9);
	printf("   idle: median %.1f us; loaded: median %.1f us, p90 %.1f us "
	       "(%d samples over %d rounds) -> %.2fx idle (goal <= 2x)\n",
	       idle / 1e3, loaded / 1e3, p90 / 1e3, n, rounds,
	       idle > 0 ? loaded / idle : 0);
	fmt_us(v, sizeof(v), loaded);
	fmt_us(f, sizeof(f), idle);
	summary_add("(iv) hi-prio NOP under GEMM load", v, "idle round trip", f,
		    idle > 0 ? loaded / idle : -1, 2, 1);
out:
	free(t);
	for (int i = 0; i < 4; i++) {
		xqueue_destroy(g.fd, lowq[i]);
		xsyncobj_destroy(g.fd, lows[i]);
		spyre_bo_free(gcmd[i]);
	}
	xqueue_destroy(g.fd, hiq);
	spyre_bo_free(nop);
	gemm_env_fini(&g);
	return rc;
}

/* (v): GEMM throughput per dtype against host sgemm. */
static int bench_gemm(unsigned int card, int iters, int gemm_ok,
		      double host_gflops, int host_threads)
{
	const double flop = 2.0 * GEMM_DIM * GEMM_DIM * GEMM_DIM;
	char v[24], f[24], name[64];
	int rc = 0;

	/* The host ceiling is a best of many calls: compare like with like. */
	iters = iters > 10 ? iters : 10;
	printf("\n== GEMM throughput, %u^3, one GEMM per job (best of %d)\n",
	       GEMM_DIM, iters);
	if (host_gflops > 0)
		printf("   ceiling: host OpenBLAS sgemm, %d thread(s), %.1f "
		       "GFLOPS (measured natively on the host)\n",
		       host_threads, host_gflops);
	else
		printf("   ceiling: host sgemm not given (--host-sgemm)\n");
	if (host_gflops > 0)
		snprintf(f, sizeof(f), "%.1f GFLOPS", host_gflops);
	else
		snprintf(f, sizeof(f), "-");
	if (!gemm_ok) {
		printf("   n/a (card lacks GEMM)\n");
		summary_add("(v) GEMM 512^3 fp32", "n/a", "host sgemm", f, -1,
			    0.5, 0);
		return 0;
	}
	printf("%-10s %12s %12s %12s %s\n", "dtype", "wall GFLOPS",
	       "card GFLOPS", "wall/host", "(card clock: TIMESTAMPs around the "
	       "GEMM)");
	for (size_t i = 0; i < sizeof(gemm_dtypes) / sizeof(gemm_dtypes[0]);
	     i++) {
		const struct gemm_dtype *d = &gemm_dtypes[i];
		struct spyre_cmdbuf *cb = NULL;
		struct gemm_env g;
		double best_w = 1e30, best_c = 1e30, w;
		int ret = gemm_env_init(&g, card);

		if (!ret)
			ret = gemm_init_operands(&g, d);
		if (!ret)
			ret = spyre_cmdbuf_create(&cb);
		if (!ret)
			ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(g.ts));
		if (!ret)
			ret = cmd_gemm(cb, d, spyre_bo_va(g.a), spyre_bo_va(g.b),
				       spyre_bo_va(g.c[0]));
		if (!ret)
			ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(g.ts) + 8);
		for (int it = 0; !ret && it <= iters; it++) {
			ret = gemm_run(&g, g.queue, cb, &w);
			if (ret || !it)
				continue;	/* the first run warms up */
			best_w = w < best_w ? w : best_w;
			w = (double)(g.ts_map[1] - g.ts_map[0]);
			best_c = w > 0 && w < best_c ? w : best_c;
		}
		if (!ret)
			ret = gemm_check(&g, d);
		spyre_cmdbuf_destroy(cb);
		if (ret) {
			printf("%-10s %s\n", d->name, ret == -EIO ?
			       "wrong result or job failed (-EIO)" :
			       spyre_strerror(ret));
			gemm_env_fini(&g);
			rc = 1;
			continue;
		}
		w = flop / best_w;	/* GFLOPS: flop per ns */
		printf("%-10s %12.1f %12.1f ", d->name, w,
		       best_c < 1e30 ? flop / best_c : 0);
		if (host_gflops > 0)
			printf("%11.1f%%\n", 100 * w / host_gflops);
		else
			printf("%12s\n", "-");
		snprintf(name, sizeof(name), "(v) GEMM 512^3 %s (%s mem)",
			 d->name, g.placement);
		snprintf(v, sizeof(v), "%.1f GFLOPS", w);
		summary_add(name, v, i ? "host sgemm (fp32)" : "host sgemm", f,
			    host_gflops > 0 ? w / host_gflops : -1, 0.5, 0);
		gemm_env_fini(&g);
	}
	return rc;
}

static int bench_exec(struct spyre_device *dev, unsigned int card,
		      double secs, int iters, double host_gflops,
		      int host_threads)
{
	int rc = bench_dispatch(dev, secs);
	int probe = gemm_probe(card), gemm_ok = !probe;

	if (probe && probe != -ENOTSUP) {
		printf("\n   GEMM probe failed: %s\n", spyre_strerror(probe));
		rc = 1;
	}
	rc |= bench_priority(card, secs, gemm_ok);
	rc |= bench_gemm(card, iters, gemm_ok, host_gflops, host_threads);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-bench [--card N] [--time SEC] [--size MIB] "
		"[--iters N] [--host-memcpy GBPS]\n"
		"                   [--host-sgemm GFLOPS] "
		"[--host-sgemm-threads N] [--only mem|exec]\n"
		"       spyre-bench --host [--size MIB]\n");
}

/*
 * Parse @arg, the value of option --@opt, as an integer in [@min, @max]:
 * the whole string, decimal or 0x hex, no sign.  Prints why not.
 */
static bool parse_uint(const char *opt, const char *arg, uint64_t min,
		       uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = *arg >= '0' && *arg <= '9' ? strtoull(arg, &end, 0) : 0;
	if (*arg < '0' || *arg > '9' || *end || errno || v < min || v > max) {
		fprintf(stderr, "spyre-bench: --%s: '%s' is not an integer in "
			"[%llu, %llu]\n", opt, arg, (unsigned long long)min,
			(unsigned long long)max);
		return false;
	}
	*out = v;
	return true;
}

/* The same for a finite number in (@min, @max] (min excluded). */
static bool parse_num(const char *opt, const char *arg, double min,
		      double max, double *out)
{
	double v;
	char *end;

	errno = 0;
	v = strtod(arg, &end);
	if (end == arg || *end || errno || !(v > min && v <= max) ||
	    *arg == ' ' || *arg == '\t') {
		fprintf(stderr, "spyre-bench: --%s: '%s' is not a number in "
			"(%g, %g]\n", opt, arg, min, max);
		return false;
	}
	*out = v;
	return true;
}

enum {
	OPT_CARD = 256, OPT_TIME, OPT_SIZE, OPT_ITERS, OPT_HOST_MEMCPY,
	OPT_HOST_SGEMM, OPT_HOST_SGEMM_THREADS, OPT_ONLY, OPT_HOST,
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "card", required_argument, NULL, OPT_CARD },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "host-memcpy", required_argument, NULL, OPT_HOST_MEMCPY },
		{ "host-sgemm", required_argument, NULL, OPT_HOST_SGEMM },
		{ "host-sgemm-threads", required_argument, NULL,
		  OPT_HOST_SGEMM_THREADS },
		{ "only", required_argument, NULL, OPT_ONLY },
		{ "host", no_argument, NULL, OPT_HOST },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct spyre_device *dev;
	struct spyre_device_info info;
	unsigned int card = 0;
	double secs = 0.5, host_gbps = 0, host_gflops = 0;
	uint64_t size = 64 * MiB, v;
	int iters = 3, host = 0, host_threads = 0, ret, rc = 0, opt;
	int do_mem = 1, do_exec = 1;
	bool ok = true;

	opterr = 0;
	while (ok && (opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_CARD:
			ok = parse_uint("card", optarg, 0, 255, &v);
			card = (unsigned int)v;
			break;
		case OPT_TIME:
			ok = parse_num("time", optarg, 0, 600, &secs);
			break;
		case OPT_SIZE:
			ok = parse_uint("size", optarg, 1, 4096, &v);
			size = v * MiB;
			break;
		case OPT_ITERS:
			ok = parse_uint("iters", optarg, 1, 10000, &v);
			iters = (int)v;
			break;
		case OPT_HOST_MEMCPY:
			ok = parse_num("host-memcpy", optarg, 0, 1e5, &host_gbps);
			break;
		case OPT_HOST_SGEMM:
			ok = parse_num("host-sgemm", optarg, 0, 1e7,
				       &host_gflops);
			break;
		case OPT_HOST_SGEMM_THREADS:
			ok = parse_uint("host-sgemm-threads", optarg, 1, 4096,
					&v);
			host_threads = (int)v;
			break;
		case OPT_ONLY:
			if (!strcmp(optarg, "mem")) {
				do_exec = 0;
			} else if (!strcmp(optarg, "exec")) {
				do_mem = 0;
			} else {
				fprintf(stderr, "spyre-bench: --only: '%s' is "
					"not mem or exec\n", optarg);
				ok = false;
			}
			break;
		case OPT_HOST:
			host = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			if (optopt >= OPT_CARD)
				fprintf(stderr, "spyre-bench: option '%s' needs "
					"a value\n", argv[optind - 1]);
			else
				fprintf(stderr, "spyre-bench: unknown option "
					"'%s'\n", argv[optind - 1]);
			ok = false;
		}
	}
	if (ok && optind < argc) {
		fprintf(stderr, "spyre-bench: unexpected argument '%s'\n",
			argv[optind]);
		ok = false;
	}
	if (!ok) {
		usage(stderr);
		return 2;
	}
	if (host) {
		printf("host-memcpy-gbps %.3f\n", memcpy_gbps(size, 20));
		return 0;
	}

	ret = spyre_device_open(card, &dev);
	if (ret)
		return fail("open", ret);
	spyre_device_get_info(dev, &info);
	printf("spyre-bench %s: card %u (%s), %d card(s) visible\n",
	       spyre_version(), card, info.desc.pci_addr, spyre_device_count());
	if (do_mem) {
		rc |= bench_cycles(dev, secs);
		rc |= bench_copies(dev, size, iters, host_gbps);
	}
	if (do_exec)
		rc |= bench_exec(dev, card, secs, iters, host_gflops,
				 host_threads);
	summary_print();
	spyre_device_close(dev);
	return rc;
}
