// SPDX-License-Identifier: MIT
/*
 * spyre-bench - memory benchmarks, each figure next to its own floor or
 * ceiling measured in the same run.
 *
 *   spyre-bench [--card N] [--time SEC] [--size MIB] [--iters N]
 *               [--host-memcpy GBPS]
 *	on a machine with a card (the guest):
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
 *   spyre-bench --host [--size MIB]
 *	no card needed: prints "host-memcpy-gbps X", the best memcpy
 *	bandwidth of --size MiB buffers.
 *
 * Timings are printed, never judged: the exit status is 0 unless a step
 * failed (an error from libspyre, a wrong copy result).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-bench [--card N] [--time SEC] [--size MIB] "
		"[--iters N] [--host-memcpy GBPS]\n"
		"       spyre-bench --host [--size MIB]\n");
}

int main(int argc, char **argv)
{
	struct spyre_device *dev;
	struct spyre_device_info info;
	unsigned int card = 0;
	double secs = 0.5, host_gbps = 0;
	uint64_t size = 64 * MiB;
	int iters = 3, host = 0, ret, rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--host")) {
			host = 1;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!v) {
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--card"))
			card = (unsigned int)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--time"))
			secs = strtod(v, NULL);
		else if (!strcmp(a, "--size"))
			size = strtoull(v, NULL, 0) * MiB;
		else if (!strcmp(a, "--iters"))
			iters = atoi(v);
		else if (!strcmp(a, "--host-memcpy"))
			host_gbps = strtod(v, NULL);
		else {
			usage(stderr);
			return 2;
		}
	}
	if (!size || iters < 1 || secs <= 0) {
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
	rc = bench_cycles(dev, secs);
	rc |= bench_copies(dev, size, iters, host_gbps);
	spyre_device_close(dev);
	return rc;
}
