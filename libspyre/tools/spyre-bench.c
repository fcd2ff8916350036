// SPDX-License-Identifier: MIT
/*
 * spyre-bench - memory and execution benchmarks, each figure next to its
 * own floor or ceiling measured in the same run.
 *
 *   spyre-bench [--card N] [--time SEC] [--size MIB] [--iters N]
 *               [--reps N] [--ceilings FILE] [--threads N]
 *               [--host-memcpy GBPS] [--host-sgemm GFLOPS]
 *               [--only mem|exec|vec|gemm|scale|kernel] [--json]
 *	on a machine with a card (the guest).  Every figure is measured
 *	--reps times (default 5) and printed as median [min-max]; each
 *	ratio is a median over a median, and names its clock: "card"
 *	(TIMESTAMP commands around the work, the card's own clock) or
 *	"wall" (submit to fence, or the guest's clock).  The ceilings are
 *	measured natively on the host in the same run: --ceilings FILE
 *	holds the lines of qemu-device/tests/spyre-ceilings (see
 *	scripts/run-bench.sh), --threads the host threads the card's
 *	copies and GEMM parts use (the file says it too); --host-memcpy
 *	and --host-sgemm give one ceiling by hand instead.
 *	memory (--only mem):
 *	1. BO life cycle: spyre_bo_alloc + spyre_bo_map + touch every page +
 *	   spyre_bo_unmap + spyre_bo_free per second, for 4 KiB and 2 MiB,
 *	   next to memfd_create + ftruncate + mmap + touch + munmap + close
 *	   in the same process (the ratio's goal is >= 50 %);
 *	2. card COPY bandwidth between system, device and registered host
 *	   memory (--size MiB, default 64; max(--iters, --reps) copies per
 *	   path), wall and card clock, against host memcpy on as many
 *	   threads as the card's copies use (goal >= 70 %, >= 50 % for the
 *	   registered host memory paths, card clock) and memcpy in this
 *	   machine.
 *	execution (--only exec), NOP jobs through raw DRM ioctls:
 *	(i)   one NOP job's round trip (SUBMIT + wait on its out syncobj)
 *	      against a cross-thread eventfd ping-pong (goal <= 2x), with
 *	      the threads where the guest's scheduler puts them; also
 *	      against the same ping-pong pinned to one CPU (no cross-CPU
 *	      wake-up at all; stretch goal <= 1.5x) and to two CPUs (the
 *	      job's completion interrupt targets whichever CPU its MSI-X
 *	      vector is bound to);
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
 *	      (max(--iters, --reps) jobs each) against the same GEMM through
 *	      the card model's math code natively (goal >= 75 %, card
 *	      clock), fp32 also against OpenBLAS sgemm (goal >= 50 %, wall),
 *	      and fp32 at 2048^3 against OpenBLAS sgemm (card clock, no goal)
 *	      (also alone, to profile the card's GEMM: --only gemm);
 *	(vi)  (also alone with (vii), to profile the card's fixed cost per
 *	      command: --only vec)
 *	      1000 ELTWISE ADDs of 4 Ki fp16 values in one command list, per
 *	      command, against one native call of the card's math code on
 *	      the same data (goal <= 3x, card clock);
 *	(vii) per-element cost of every ELTWISE, REDUCE and ROWOP kind at
 *	      4 Ki, 64 Ki and 1 Mi fp16 elements, one command per job,
 *	      against the same call natively (card clock, no goal);
 *	(viii) scaling (also alone: --only scale): N = 1, 2, 4, 8 processes,
 *	      each its own context and queue, for --time seconds doing NOP
 *	      jobs (16 per SUBMIT, every 256th waited for), 256^3 fp32 GEMMs
 *	      or 1 MiB system->device COPYs, one job at a time; aggregate
 *	      throughput against N = 1 (goal >= 0.9x) and the processes'
 *	      CPU use at each N, both over the common window only (set-up
 *	      before it, teardown after; wall clock; min(--reps, 3) runs
 *	      each).
 *	(ix)-(xii) kernels (also alone: --only kernel), card clock: (ix) a
 *	      fused pointwise expression of 8 operations over 4 Mi fp32
 *	      elements, (x) a row sum of 1024 x 4096 fp16 (fp32 out), (xi) a
 *	      one-kernel softmax of the same, each against the host's memcpy
 *	      on 2 threads (memcpy-2t, this run) of its bytes, inputs read
 *	      once plus outputs written (goal <= 4x); (xii) an empty KERNEL
 *	      in a 1000-command list against a NOP in the same list, per
 *	      command (goal <= 2x); (xiii) a gather of 128 rows of a 32 Ki x
 *	      512 fp16 table (an embedding lookup) and (xiv) the scatter of
 *	      128 rows into it, each against the memcpy of its bytes (rows
 *	      and indices read, rows written; goal <= 2x), (xv) 4 Mi normal
 *	      fp32 values against the memcpy of the bytes written (goal <=
 *	      3x); "n/a" on a card without KERNEL.
 *	A card whose engine refuses GEMM (-EIO) gets "n/a" for (iv) and (v).
 *   spyre-bench --only load [--time SEC] [--rate JOBS]
 *	a load for the host to profile, not a figure: four threads, each
 *	with its own stream, run ELTWISE ADDs of 1 Mi fp16 values, REDUCE
 *	SUMs of 1024 x 1024 fp16 and 256^3 fp32 GEMMs on system-memory
 *	operands for --time seconds, between the lines "load: start" and
 *	"load: end SECONDS JOBS OFFERED" (scripts/bql-profile.py reads
 *	QEMU's lock profile over that window).  Without --rate each thread
 *	submits its next three jobs when the last three are done (as fast
 *	as the card goes; OFFERED is 0); with --rate JOBS (jobs per second
 *	per queue) it submits them on a fixed schedule, one round every
 *	3 / JOBS s, at once when it is late, and OFFERED is the jobs the
 *	schedule asked for in the window (fewer jobs done than that: the
 *	card did not keep up).
 *	The run ends with a summary table of figure, ceiling, ratio, clock
 *	and goal.  --json: that table and the ceilings as one JSON object on
 *	stdout (numbers, docs/spyre-bench.schema.json), the text report on
 *	stderr instead.
 *   spyre-bench --host [--size MIB]
 *	no card needed: prints "host-memcpy-gbps X", the best memcpy
 *	bandwidth of --size MiB buffers on one thread.
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
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <drm/spyre_accel.h>
#include <json-c/json.h>
#include <spyre/spyre.h>
#include <spyre/spyre_ref.h>

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

/* ---- repetitions and ceilings ----------------------------------------- */

/* Every figure is measured this many times (--reps). */
static int reps = 5;

#define MAX_REPS	32

/* One figure over its repetitions: median, and min-max as the spread. */
struct fig {
	int n;
	double v[MAX_REPS];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void fig_add(struct fig *f, double x)
{
	if (f->n < MAX_REPS)
		f->v[f->n++] = x;
}

/* Sorts the values: index 0 is the minimum, n - 1 the maximum. */
static double fig_med(struct fig *f)
{
	if (!f->n)
		return 0;
	qsort(f->v, (size_t)f->n, sizeof(f->v[0]), cmp_double);
	return f->n & 1 ? f->v[f->n / 2] :
	       (f->v[f->n / 2 - 1] + f->v[f->n / 2]) / 2;
}

static double fig_min(struct fig *f)
{
	fig_med(f);
	return f->n ? f->v[0] : 0;
}

static double fig_max(struct fig *f)
{
	fig_med(f);
	return f->n ? f->v[f->n - 1] : 0;
}

/* "median [min-max]" with @prec decimals, @scale applied. */
static const char *fig_str(char *buf, size_t len, struct fig *f,
			   double scale, int prec)
{
	if (!f->n)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.*f [%.*f-%.*f]", prec,
			 fig_med(f) * scale, prec, fig_min(f) * scale, prec,
			 fig_max(f) * scale);
	return buf;
}

/*
 * Host ceilings (--ceilings FILE, written by scripts/run-bench.sh from
 * qemu-device/tests/spyre-ceilings): "ceiling KEY MEDIAN MIN MAX" lines,
 * and "threads T", the host threads the card's copies and GEMM parts use.
 */
struct ceiling {
	char key[48];
	struct fig f;
};

static struct ceiling ceilings[128];
static int nceilings, ceil_threads = 1;

static struct fig *ceil_set(const char *key)
{
	struct ceiling *c;

	for (int i = 0; i < nceilings; i++)
		if (!strcmp(ceilings[i].key, key))
			return &ceilings[i].f;
	if (nceilings >= (int)(sizeof(ceilings) / sizeof(ceilings[0])))
		return NULL;
	c = &ceilings[nceilings++];
	snprintf(c->key, sizeof(c->key), "%s", key);
	c->f.n = 0;
	return &c->f;
}

/* The ceiling called @fmt, or NULL if the run did not measure it. */
static struct fig *ceil_get(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static struct fig *ceil_get(const char *fmt, ...)
{
	char key[48];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(key, sizeof(key), fmt, ap);
	va_end(ap);
	for (int i = 0; i < nceilings; i++)
		if (!strcmp(ceilings[i].key, key) && ceilings[i].f.n)
			return &ceilings[i].f;
	return NULL;
}

static bool load_ceilings(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256], key[48];
	double med, lo, hi;
	int t, n = 0;

	if (!f) {
		fprintf(stderr, "spyre-bench: --ceilings: %s: %s\n", path,
			strerror(errno));
		return false;
	}
	while (fgets(line, sizeof(line), f)) {
		struct fig *c;

		if (sscanf(line, "threads %d", &t) == 1 && t >= 1) {
			ceil_threads = t;
		} else if (sscanf(line, "ceiling %47s %lf %lf %lf", key, &med,
				  &lo, &hi) == 4) {
			c = ceil_set(key);
			if (!c)
				continue;
			/* min, median, max: fig_med() gives the median back */
			c->n = 0;
			fig_add(c, lo);
			fig_add(c, med);
			fig_add(c, hi);
			n++;
		}
	}
	fclose(f);
	if (!n) {
		fprintf(stderr, "spyre-bench: --ceilings: %s holds no ceiling\n",
			path);
		return false;
	}
	return true;
}

/* A ceiling given on the command line: one value, no spread. */
static void ceil_given(const char *key, double v)
{
	struct fig *c = ceil_set(key);

	if (c) {
		c->n = 0;
		fig_add(c, v);
	}
}

/* ---- summary ---------------------------------------------------------- */

struct summary_row {
	char figure[56];
	char ceil_name[40];
	char column[8];		/* "card" (card clock), "wall", or "" */
	struct fig val, ceil;	/* ceil.n == 0: no floor or ceiling */
	double scale;		/* applied to both before printing */
	int prec;		/* decimals printed */
	char unit[16];
	double ratio;		/* median over median; < 0: no ratio */
	double goal;		/* the ratio's goal; <= 0: none */
	int goal_le;		/* 1: ratio <= goal, 0: ratio >= goal */
};

static struct summary_row summary[64];
static int nsummary;

/*
 * A row of the closing table: @value (a struct fig's median and spread)
 * against @ceil (its floor or ceiling, likewise), the ratio of their
 * medians taken in @column ("card" clock or "wall" clock).
 */
static void summary_add(const char *figure, struct fig *value, double scale,
			int prec, const char *unit, const char *ceil_name,
			struct fig *ceil, const char *column, double goal,
			int goal_le)
{
	struct summary_row *r;

	if (nsummary >= (int)(sizeof(summary) / sizeof(summary[0])))
		return;
	r = &summary[nsummary++];
	snprintf(r->figure, sizeof(r->figure), "%s", figure);
	snprintf(r->ceil_name, sizeof(r->ceil_name), "%s", ceil_name);
	snprintf(r->column, sizeof(r->column), "%s", column);
	r->val = *value;
	r->ceil.n = 0;
	if (ceil)
		r->ceil = *ceil;
	r->scale = scale;
	r->prec = prec;
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
	r->ratio = ceil && ceil->n && value->n && fig_med(ceil) > 0 ?
		   fig_med(value) / fig_med(ceil) : -1;
	r->goal = goal;
	r->goal_le = goal_le;
}

/* Whether @r's ratio meets its goal (only for a row with both). */
static bool summary_met(const struct summary_row *r)
{
	return r->goal_le ? r->ratio <= r->goal : r->ratio >= r->goal;
}

static void summary_print(void)
{
	if (!nsummary)
		return;
	printf("\n== summary: median [min-max] of %d repetitions (ceilings: "
	       "as measured on the host in this run); ratio = median / "
	       "median, in the clock named\n", reps);
	printf("%-44s %-30s %-26s %-30s %7s %-5s %s\n", "figure", "value",
	       "floor or ceiling", "value", "ratio", "clock", "goal");
	for (int i = 0; i < nsummary; i++) {
		struct summary_row *r = &summary[i];
		char ratio[16] = "-", goal[16] = "-", v[40], value[48], ceil[48];

		if (r->ratio >= 0)
			snprintf(ratio, sizeof(ratio), "%.2fx", r->ratio);
		if (r->ratio >= 0 && r->goal <= 0) {
			snprintf(goal, sizeof(goal), "(info)");
		} else if (r->goal > 0) {
			snprintf(goal, sizeof(goal), "%s %.2gx%s",
				 r->goal_le ? "<=" : ">=", r->goal,
				 r->ratio < 0 ? " ?" :
				 summary_met(r) ? "" : " !");
		}
		snprintf(value, sizeof(value), "%s%s%s",
			 fig_str(v, sizeof(v), &r->val, r->scale, r->prec),
			 r->val.n ? " " : "", r->val.n ? r->unit : "");
		if (r->ceil.n)
			snprintf(ceil, sizeof(ceil), "%s %s",
				 fig_str(v, sizeof(v), &r->ceil, r->scale,
					 r->prec), r->unit);
		else
			snprintf(ceil, sizeof(ceil), "-");
		printf("%-44s %-30s %-26s %-30s %7s %-5s %s\n", r->figure,
		       value, r->ceil_name, ceil, ratio, r->column, goal);
	}
	printf("   (\"!\" marks a goal not met, \"?\" one without its "
	       "ceiling, \"(info)\" a reference without a goal; figures are "
	       "reported, never judged)\n");
}

/*
 * --json: { "median", "min", "max", "n" } of @f with @scale applied, or
 * null when it was never measured.
 */
static json_object *fig_json(struct fig *f, double scale)
{
	json_object *o;

	if (!f->n)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "median",
			       json_object_new_double(fig_med(f) * scale));
	json_object_object_add(o, "min",
			       json_object_new_double(fig_min(f) * scale));
	json_object_object_add(o, "max",
			       json_object_new_double(fig_max(f) * scale));
	json_object_object_add(o, "n", json_object_new_int(f->n));
	return o;
}

/*
 * --json: the summary and the ceilings as one JSON object on @out
 * (docs/spyre-bench.schema.json): numbers, never preformatted strings.
 */
static void summary_json(FILE *out, const char *pci_addr)
{
	json_object *root = json_object_new_object();
	json_object *figs = json_object_new_array();
	json_object *ceils = json_object_new_array();

	json_object_object_add(root, "schema_version", json_object_new_int(1));
	json_object_object_add(root, "version",
			       json_object_new_string(spyre_version()));
	json_object_object_add(root, "card",
			       json_object_new_string(pci_addr));
	json_object_object_add(root, "reps", json_object_new_int(reps));
	json_object_object_add(root, "ceiling_threads",
			       json_object_new_int(ceil_threads));
	for (int i = 0; i < nceilings; i++) {
		json_object *c = fig_json(&ceilings[i].f, 1);

		if (!c)
			continue;
		json_object_object_add(c, "key",
				       json_object_new_string(ceilings[i].key));
		json_object_array_add(ceils, c);
	}
	json_object_object_add(root, "ceilings", ceils);
	for (int i = 0; i < nsummary; i++) {
		struct summary_row *r = &summary[i];
		json_object *o = json_object_new_object();
		json_object *c = fig_json(&r->ceil, r->scale);

		json_object_object_add(o, "figure",
				       json_object_new_string(r->figure));
		json_object_object_add(o, "unit",
				       json_object_new_string(r->unit));
		json_object_object_add(o, "clock", r->column[0] ?
				       json_object_new_string(r->column) : NULL);
		json_object_object_add(o, "value", fig_json(&r->val, r->scale));
		if (c)
			json_object_object_add(c, "name",
					       json_object_new_string(r->ceil_name));
		json_object_object_add(o, "ceiling", c);
		json_object_object_add(o, "ratio", r->ratio >= 0 ?
				       json_object_new_double(r->ratio) : NULL);
		if (r->goal > 0) {
			json_object *g = json_object_new_object();

			json_object_object_add(g, "op", json_object_new_string(
					       r->goal_le ? "<=" : ">="));
			json_object_object_add(g, "ratio",
					       json_object_new_double(r->goal));
			json_object_object_add(o, "goal", g);
			json_object_object_add(o, "met", r->ratio < 0 ? NULL :
					       json_object_new_boolean(summary_met(r)));
		} else {
			json_object_object_add(o, "goal", NULL);
			json_object_object_add(o, "met", NULL);
		}
		json_object_array_add(figs, o);
	}
	json_object_object_add(root, "figures", figs);
	fprintf(out, "%s\n", json_object_to_json_string_ext(root,
		JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
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
	char b1[48], b2[48], b3[48];

	printf("\n== BO life cycle: create + map + touch every page + unmap "
	       "+ free, per second\n");
	printf("   (median [min-max] of %d rounds of %.1f s, wall clock; memfd "
	       "= memfd_create + ftruncate + mmap + touch + munmap + close)\n",
	       reps, secs);
	printf("%-8s %-22s %-22s %-22s %9s %s\n", "size", "spyre-sys/s",
	       "spyre-dev/s", "memfd/s", "sys/memfd", "goal >= 50%");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct cycle_ctx sys = { dev, sizes[s], SPYRE_BO_FLAGS_NONE, 0 };
		struct cycle_ctx dv = { dev, sizes[s], SPYRE_BO_DEVICE, 0 };
		struct cycle_ctx mf = { dev, sizes[s], 0, 0 };
		struct fig r_sys = { 0 }, r_dev = { 0 }, r_mf = { 0 };
		char name[48];

		/* Interleaved rounds so drift hits all three alike. */
		for (int i = 0; i < reps; i++) {
			fig_add(&r_mf, rate(cycle_memfd, &mf, secs));
			fig_add(&r_sys, rate(cycle_bo, &sys, secs));
			fig_add(&r_dev, rate(cycle_bo, &dv, secs));
		}
		if (sys.err)
			return fail("system BO cycle", sys.err);
		if (mf.err)
			return fail("memfd cycle", mf.err);
		printf("%-8s %-22s %-22s %-22s %8.0f%% %s\n",
		       sizes[s] >= MiB ? "2 MiB" : "4 KiB",
		       fig_str(b1, sizeof(b1), &r_sys, 1, 0),
		       dv.err ? spyre_strerror(dv.err) :
		       fig_str(b2, sizeof(b2), &r_dev, 1, 0),
		       fig_str(b3, sizeof(b3), &r_mf, 1, 0),
		       100.0 * fig_med(&r_sys) / fig_med(&r_mf),
		       fig_med(&r_sys) >= 0.5 * fig_med(&r_mf) ? "met" :
		       "NOT met");
		snprintf(name, sizeof(name), "BO life cycle %s system",
			 sizes[s] >= MiB ? "2MiB" : "4KiB");
		summary_add(name, &r_sys, 1, 0, "/s", "memfd cycle", &r_mf,
			    "wall", 0.5, 0);
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

static int bench_copies(struct spyre_device *dev, uint64_t size, int iters)
{
	static const int paths[][2] = {	/* dst, src */
		{ DEV_A, SYS_A }, { SYS_B, DEV_A }, { HOST_A, SYS_A },
		{ SYS_B, HOST_A }, { DEV_A, HOST_A }, { HOST_B, DEV_A },
		{ DEV_B, DEV_A }, { SYS_B, SYS_A }, { HOST_B, HOST_A },
	};
	struct fig *ceil = ceil_get("memcpy-%dt", ceil_threads);
	struct fig *ceil1 = ceil_get("memcpy-1t");
	struct copy_env e;
	double guest_gbps = memcpy_gbps(size, 5);
	int n = iters > reps ? iters : reps, ret = 0, rc = 0;
	char b1[48], b2[48], name[32], cname[40], fname[64];

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

	printf("\n== card COPY bandwidth, %llu MiB per copy: median "
	       "[min-max] of %d copies (after one)\n",
	       (unsigned long long)(size / MiB), n);
	printf("   wall: submit to fence; card: TIMESTAMP commands around "
	       "the COPY (the card's clock)\n");
	if (ceil)
		printf("   ceiling: host memcpy on %d thread(s) (as many as the "
		       "card's copies use), %s GB/s; on 1 thread %s GB/s "
		       "(measured natively on the host in this run)\n",
		       ceil_threads, fig_str(b1, sizeof(b1), ceil, 1, 2),
		       ceil1 ? fig_str(b2, sizeof(b2), ceil1, 1, 2) : "-");
	else
		printf("   ceiling: host memcpy not given (--ceilings)\n");
	printf("   this machine's CPU memcpy: %.2f GB/s\n", guest_gbps);
	printf("%-16s %-24s %-24s %10s %10s\n", "path (src->dst)",
	       "wall GB/s", "card GB/s", "wall/ceil", "card/ceil");
	snprintf(cname, sizeof(cname), "host memcpy, %d thr", ceil_threads);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int dst = paths[i][0], src = paths[i][1];
		struct fig fw = { 0 }, fc = { 0 };
		double w, c;

		for (int it = 0; it <= n; it++) {
			ret = timed_copy(&e, dst, src, &w, &c);
			if (ret)
				break;
			if (it && w > 0)
				fig_add(&fw, (double)size / w / 1e9);
			if (it && c > 0)
				fig_add(&fc, (double)size / c / 1e9);
		}
		if (!ret)
			ret = check_copy(&e, dst, 7);
		snprintf(name, sizeof(name), "%s->%s", buf_name[src],
			 buf_name[dst]);
		if (ret) {
			printf("%-16s %s\n", name, spyre_strerror(ret));
			rc = 1;
			continue;
		}
		printf("%-16s %-24s %-24s ", name,
		       fig_str(b1, sizeof(b1), &fw, 1, 2),
		       fig_str(b2, sizeof(b2), &fc, 1, 2));
		if (ceil)
			printf("%9.1f%% %9.1f%%\n",
			       100 * fig_med(&fw) / fig_med(ceil),
			       100 * fig_med(&fc) / fig_med(ceil));
		else
			printf("%10s %10s\n", "-", "-");
		snprintf(fname, sizeof(fname), "COPY %lluMiB %s",
			 (unsigned long long)(size / MiB), name);
		summary_add(fname, &fc, 1, 2, "GB/s", cname, ceil, "card",
			    src >= HOST_A || dst >= HOST_A ? 0.5 : 0.7, 0);
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

/* Mean ns per no-op ioctl, one figure per round of about @secs / 3 s. */
static int noop_ioctl_ns(int fd, double secs, struct fig *f)
{
	for (int r = 0; r < reps; r++) {
		int64_t t0 = mono_ns(), t;
		long n = 0;

		do {
			for (int i = 0; i < 64; i++, n++)
				if (noop_ioctl(fd))
					return -EIO;
			t = mono_ns() - t0;
		} while (t < secs * 1e9 / 3);
		fig_add(f, (double)t / n);
	}
	return 0;
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

static int bench_dispatch(struct spyre_device *dev, double secs)
{
	struct xenv x = { .dev = dev, .fd = spyre_device_fd(dev) };
	static const int batches[] = { 1, 16, 64, 256 };
	const int total = 10000;
	struct fig noop = { 0 }, rt = { 0 }, p90 = { 0 }, in_sub = { 0 };
	struct fig pp = { 0 }, pp1 = { 0 }, pp2 = { 0 };
	char b1[48], b2[48], b3[48], name[64];
	double *t = NULL, *sub = NULL;
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

	printf("\n== job dispatch (NOP jobs, raw ioctls, no BOs listed; "
	       "median [min-max] of %d rounds, wall clock)\n", reps);
	if (noop_ioctl_ns(x.fd, secs, &noop)) {
		rc = fail("no-op ioctl", -EIO);
		goto out;
	}
	printf("   floor: no-op ioctl (QUERY, size 0) %s us\n",
	       fig_str(b1, sizeof(b1), &noop, 1e-3, 2));

	/*
	 * (i) round trip vs eventfd ping-pong, in alternating rounds; each
	 * round gives one median of each.
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
	for (int r = 0; !ret && r < reps; r++) {
		double m = pingpong_ns(n, PP_UNPINNED);

		if (m > 0)
			fig_add(&pp, m);
		m = pingpong_ns(n, PP_ONE_CPU);
		if (m > 0)
			fig_add(&pp1, m);
		m = pingpong_ns(n, PP_TWO_CPUS);
		if (m > 0)
			fig_add(&pp2, m);
		ret = round_trips(&x, queue, x.nop, t, sub, n);
		if (ret)
			break;
		fig_add(&rt, quantile(t, n, 0.5));
		fig_add(&p90, quantile(t, n, 0.9));
		fig_add(&in_sub, quantile(sub, n, 0.5));
	}
	if (ret) {
		rc = fail("NOP round trip", ret);
		goto out;
	}
	printf("   (i) NOP round trip, submit + syncobj wait (%d per round): "
	       "median %s us, p90 %s us (in SUBMIT %s us)\n", n,
	       fig_str(b1, sizeof(b1), &rt, 1e-3, 1),
	       fig_str(b2, sizeof(b2), &p90, 1e-3, 1),
	       fig_str(b3, sizeof(b3), &in_sub, 1e-3, 1));
	printf("       floor: cross-thread eventfd ping-pong, threads where "
	       "the scheduler puts them: %s us -> %.2fx (goal <= 2x)\n",
	       fig_str(b1, sizeof(b1), &pp, 1e-3, 1),
	       pp.n ? fig_med(&rt) / fig_med(&pp) : 0);
	printf("       (both threads pinned to one CPU, no cross-CPU "
	       "wake-up: %s us -> %.2fx;\n        pinned to two CPUs: %s us "
	       "-> %.2fx)\n", fig_str(b1, sizeof(b1), &pp1, 1e-3, 1),
	       pp1.n ? fig_med(&rt) / fig_med(&pp1) : 0,
	       fig_str(b2, sizeof(b2), &pp2, 1e-3, 1),
	       pp2.n ? fig_med(&rt) / fig_med(&pp2) : 0);
	summary_add("(i) NOP round trip", &rt, 1e-3, 1, "us",
		    "eventfd ping-pong", &pp, "wall", 2, 1);
	/* A stricter reference than the goal's floor: no IPI (stretch). */
	summary_add("(i) NOP round trip", &rt, 1e-3, 1, "us",
		    "ping-pong on 1 CPU", &pp1, "wall", 1.5, 1);
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
		struct fig pj = { 0 }, ps = { 0 };

		for (int r = 0; r < reps; r++) {
			double j, js;

			ret = batched_jobs(&x, queue, total, batches[b], &j, &js);
			if (ret)
				break;
			fig_add(&pj, j);
			fig_add(&ps, js);
		}
		if (ret) {
			rc = fail("batched jobs", ret);
			goto out;
		}
		printf("       %3d jobs per SUBMIT: %s us per job (%s us in "
		       "SUBMIT) -> %.2fx the no-op ioctl%s\n", batches[b],
		       fig_str(b1, sizeof(b1), &pj, 1e-3, 2),
		       fig_str(b2, sizeof(b2), &ps, 1e-3, 2),
		       fig_med(&pj) / fig_med(&noop),
		       batches[b] >= 64 ? " (goal <= 1.5x)" : "");
		if (batches[b] >= 64) {
			snprintf(name, sizeof(name),
				 "(ii) per job, %d per SUBMIT", batches[b]);
			summary_add(name, &pj, 1e-3, 2, "us", "no-op ioctl",
				    &noop, "wall", 1.5, 1);
		}
	}

	/* (iii) replayed command list */
	{
		struct fig pc = { 0 };
		double c = 0;
		int nrep = 4;
		int64_t t0 = mono_ns();

		ret = replayed_list(&x, queue, nrep, &c);	/* calibrate */
		if (!ret) {
			double one = (double)(mono_ns() - t0) / nrep;

			nrep = (int)(secs * 1e9 / one);
			nrep = nrep < 4 ? 4 : nrep > 400 ? 400 : nrep;
		}
		for (int r = 0; !ret && r < reps; r++) {
			ret = replayed_list(&x, queue, nrep, &c);
			fig_add(&pc, c);
		}
		if (ret) {
			rc = fail("replayed list", ret);
			goto out;
		}
		printf("   (iii) %u-NOP command list uploaded once, replayed "
		       "%d times: %s us per command -> %.2fx the no-op ioctl "
		       "(goal <= 0.5x)\n", NOP_LIST, nrep,
		       fig_str(b1, sizeof(b1), &pc, 1e-3, 3),
		       fig_med(&pc) / fig_med(&noop));
		summary_add("(iii) per command, replayed 1000-NOP list", &pc,
			    1e-3, 3, "us", "no-op ioctl", &noop, "wall", 0.5, 1);
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

/* A @dim^3 GEMM of @d's dtype, row-major, leading dimensions @dim. */
static int cmd_gemm_dim(struct spyre_cmdbuf *cb, const struct gemm_dtype *d,
			uint32_t dim, uint64_t a, uint64_t b, uint64_t c)
{
	struct spyre_cmd_gemm g;

	memset(&g, 0, sizeof(g));
	g.hdr.opcode = SPYRE_OP_GEMM;
	g.hdr.size = sizeof(g);
	g.a_dtype = d->dtype;
	g.b_dtype = d->dtype;
	g.c_dtype = d->c_dtype;
	g.m = dim;
	g.n = dim;
	g.k = dim;
	g.batch = 1;
	g.a = a;
	g.b = b;
	g.c = c;
	g.lda = dim;
	g.ldb = dim;
	g.ldc = dim;
	g.stride_a = (uint64_t)dim * dim;
	g.stride_b = (uint64_t)dim * dim;
	g.stride_c = (uint64_t)dim * dim;
	g.alpha = 0x3f800000;	/* 1.0f */
	return spyre_cmdbuf_raw(cb, &g, sizeof(g));
}

static int cmd_gemm(struct spyre_cmdbuf *cb, const struct gemm_dtype *d,
		    uint64_t a, uint64_t b, uint64_t c)
{
	return cmd_gemm_dim(cb, d, GEMM_DIM, a, b, c);
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
	struct fig idle = { 0 }, loaded = { 0 }, p90 = { 0 };
	double *t = NULL;
	const int nidle = 200, max_loaded = 4000;
	int n = 0, rounds = 0, samples = 0, ret, rc = 0;
	char b1[48], b2[48], b3[48];

	printf("\n== priority: high-priority NOP round trip while 4 "
	       "low-priority queues hold 4 GEMMs (%u^3 fp32) each, sampled while all 4 are busy\n", GEMM_DIM);
	if (!gemm_ok) {
		printf("   n/a (card lacks GEMM)\n");
		summary_add("(iv) hi-prio NOP under GEMM load", &loaded, 1e-3,
			    1, "us", "idle round trip", NULL, "wall", 2, 1);
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
	for (int r = 0; !ret && r < reps; r++) {
		ret = round_trips(&x, hiq, nop, t, NULL, nidle);
		if (!ret)
			fig_add(&idle, quantile(t, nidle, 0.5));
	}
	if (ret) {
		rc = fail("idle round trip", ret);
		goto out;
	}

	/*
	 * Per repetition: load rounds until 400 / reps samples or @secs * 10
	 * / reps seconds; the repetition's figure is their median.
	 */
	for (int rep = 0; !ret && rep < reps; rep++) {
		int64_t t_end = mono_ns() + (int64_t)(secs * 10 * 1e9 / reps);
		int want = 400 / reps > 40 ? 400 / reps : 40;

		n = 0;
		while (!ret && n < want && mono_ns() < t_end) {
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
		if (!ret && n) {
			fig_add(&loaded, quantile(t, n, 0.5));
			fig_add(&p90, quantile(t, n, 0.9));
			samples += n;
		}
	}
	if (!ret)
		ret = xctx_error(g.fd);
	if (ret) {
		rc = fail("loaded round trip", ret);
		goto out;
	}
	if (!loaded.n) {
		printf("   the GEMMs ended before a NOP could be timed\n");
		goto out;
	}
	printf("   idle: median %s us; loaded: median %s us, p90 %s us (%d "
	       "samples over %d rounds) -> %.2fx idle (goal <= 2x)\n",
	       fig_str(b1, sizeof(b1), &idle, 1e-3, 1),
	       fig_str(b2, sizeof(b2), &loaded, 1e-3, 1),
	       fig_str(b3, sizeof(b3), &p90, 1e-3, 1), samples, rounds,
	       fig_med(&loaded) / fig_med(&idle));
	summary_add("(iv) hi-prio NOP under GEMM load", &loaded, 1e-3, 1, "us",
		    "idle round trip", &idle, "wall", 2, 1);
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

/*
 * (v) also at @dim^3 in fp32, against OpenBLAS sgemm natively on as many
 * threads (card clock; min(--reps, 3) jobs, after one).
 */
static int bench_gemm_big(unsigned int card, uint32_t dim)
{
	const double flop = 2.0 * dim * dim * dim;
	const uint64_t sz = (uint64_t)dim * dim * 4;
	struct fig *nat = ceil_get("sgemm-%u-%dt", dim, ceil_threads);
	struct spyre_bo *bos[4] = { NULL };
	volatile uint64_t *ts = NULL;
	struct spyre_device *dev = NULL;
	struct spyre_cmdbuf *cb = NULL;
	struct spyre_queue *q = NULL;
	const char *placement = "device";
	struct fig fc = { 0 };
	char b1[48], b2[48], name[64], cname[40];
	int n = reps < 3 ? reps : 3, ret;

	ret = spyre_device_open(card, &dev);
	if (!ret)
		ret = spyre_queue_create(dev, SPYRE_PRIORITY_NORMAL, &q);
	for (int i = 0; !ret && i < 3; i++)
		ret = alloc_operand(dev, sz, &bos[i], &placement);
	if (!ret)
		ret = spyre_bo_alloc(dev, PAGE, 0, &bos[3]);
	if (!ret)
		ret = spyre_bo_map(bos[3], (void **)&ts);
	if (!ret)
		ret = spyre_cmdbuf_create(&cb);
	for (int i = 0; !ret && i < 2; i++)
		ret = spyre_cmdbuf_fill(cb, spyre_bo_va(bos[i]), (uint64_t)dim * dim,
					4, 0x3f800000);
	if (!ret)
		ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(bos[3]));
	if (!ret)
		ret = cmd_gemm_dim(cb, &gemm_dtypes[0], dim, spyre_bo_va(bos[0]),
				   spyre_bo_va(bos[1]), spyre_bo_va(bos[2]));
	if (!ret)
		ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(bos[3]) + 8);
	for (int it = 0; !ret && it <= n; it++) {
		struct spyre_fence fe;

		ret = spyre_submit(q, cb, bos, 4, NULL, 0, &fe);
		if (!ret)
			ret = spyre_fence_wait(&fe, 120ull * NSEC);
		if (!ret && it && ts[1] > ts[0])
			fig_add(&fc, flop / (double)(ts[1] - ts[0]));
	}
	if (!ret) {
		volatile float *c;

		ret = spyre_bo_map(bos[2], (void **)&c);
		if (!ret && (c[0] != (float)dim ||
			     c[(uint64_t)dim * dim - 1] != (float)dim))
			ret = -EIO;
	}
	if (ret) {
		printf("   GEMM %u^3 fp32: %s\n", dim, spyre_strerror(ret));
	} else {
		printf("   %u^3 fp32 (%s mem): card %s GFLOPS; OpenBLAS sgemm "
		       "natively, %d thread(s): %s GFLOPS -> %.1f%%\n", dim,
		       placement, fig_str(b1, sizeof(b1), &fc, 1, 1),
		       ceil_threads, nat ? fig_str(b2, sizeof(b2), nat, 1, 1) :
		       "-", nat ? 100 * fig_med(&fc) / fig_med(nat) : 0);
		snprintf(name, sizeof(name), "(v) GEMM %u^3 fp32 (%s mem)", dim,
			 placement);
		snprintf(cname, sizeof(cname), "OpenBLAS sgemm, %d thr",
			 ceil_threads);
		summary_add(name, &fc, 1, 1, "GFLOPS", cname, nat, "card", 0,
			    0);
	}
	spyre_cmdbuf_destroy(cb);
	for (int i = 0; i < 4; i++)
		spyre_bo_free(bos[i]);
	spyre_queue_destroy(q);
	if (dev)
		spyre_device_close(dev);
	return ret ? 1 : 0;
}

/*
 * (v): GEMM throughput per dtype against the same work done natively on
 * the host through the card model's numeric core (widening + sgemm, on
 * as many threads as the card's GEMM parts use), and fp32 also against
 * plain OpenBLAS sgemm.
 */
static int bench_gemm(unsigned int card, int iters, int gemm_ok)
{
	const double flop = 2.0 * GEMM_DIM * GEMM_DIM * GEMM_DIM;
	struct fig *sgemm = ceil_get("sgemm-%dt", ceil_threads);
	struct fig none = { 0 };
	char b1[48], b2[48], b3[48], name[64], cname[40];
	int n = iters > reps ? iters : reps, rc = 0;

	printf("\n== GEMM throughput, %u^3, one GEMM per job: median "
	       "[min-max] of %d jobs (after one)\n", GEMM_DIM, n);
	printf("   card: TIMESTAMPs around the GEMM (the card's clock); wall: "
	       "submit to fence\n");
	printf("   ceilings (measured natively on the host in this run, %d "
	       "thread(s)): the same GEMM through the card model's math code "
	       "(per dtype), and OpenBLAS sgemm %s GFLOPS\n", ceil_threads,
	       sgemm ? fig_str(b1, sizeof(b1), sgemm, 1, 1) : "-");
	if (!gemm_ok) {
		printf("   n/a (card lacks GEMM)\n");
		summary_add("(v) GEMM 512^3 fp32", &none, 1, 1, "GFLOPS",
			    "host sgemm", sgemm, "wall", 0.5, 0);
		return 0;
	}
	printf("%-10s %-24s %-24s %-24s %9s %9s\n", "dtype", "wall GFLOPS",
	       "card GFLOPS", "native GFLOPS", "card/nat", "wall/nat");
	for (size_t i = 0; i < sizeof(gemm_dtypes) / sizeof(gemm_dtypes[0]);
	     i++) {
		const struct gemm_dtype *d = &gemm_dtypes[i];
		struct fig *nat = ceil_get("gemm-%s-%dt", d->name, ceil_threads);
		struct spyre_cmdbuf *cb = NULL;
		struct fig fw = { 0 }, fc = { 0 };
		struct gemm_env g;
		double w;
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
		for (int it = 0; !ret && it <= n; it++) {
			ret = gemm_run(&g, g.queue, cb, &w);
			if (ret || !it)
				continue;	/* the first run warms up */
			fig_add(&fw, flop / w);	/* GFLOPS: flop per ns */
			w = (double)(g.ts_map[1] - g.ts_map[0]);
			if (w > 0)
				fig_add(&fc, flop / w);
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
		printf("%-10s %-24s %-24s %-24s ", d->name,
		       fig_str(b1, sizeof(b1), &fw, 1, 1),
		       fig_str(b2, sizeof(b2), &fc, 1, 1),
		       nat ? fig_str(b3, sizeof(b3), nat, 1, 1) : "-");
		if (nat)
			printf("%8.1f%% %8.1f%%\n",
			       100 * fig_med(&fc) / fig_med(nat),
			       100 * fig_med(&fw) / fig_med(nat));
		else
			printf("%9s %9s\n", "-", "-");
		snprintf(name, sizeof(name), "(v) GEMM 512^3 %s (%s mem)",
			 d->name, g.placement);
		snprintf(cname, sizeof(cname), "native %s, %d thr", d->name,
			 ceil_threads);
		summary_add(name, &fc, 1, 1, "GFLOPS", cname, nat, "card",
			    0.75, 0);
		if (!i) {
			snprintf(cname, sizeof(cname), "OpenBLAS sgemm, %d thr",
				 ceil_threads);
			summary_add(name, &fw, 1, 1, "GFLOPS", cname, sgemm,
				    "wall", 0.5, 0);
		}
		gemm_env_fini(&g);
	}
	rc |= bench_gemm_big(card, 2048);
	return rc;
}

/* ---- ELTWISE, REDUCE, ROWOP ---- */

/* Columns of a REDUCE or ROWOP row, as in spyre-ceilings. */
#define VEC_COLS	1024u
/* Commands of the ELTWISE ADD command list. */
#define ADD_LIST	1000u

struct vec_kind {
	const char *name;	/* the ceiling's key */
	int kind;		/* 0 ELTWISE, 1 REDUCE, 2 ROWOP */
	uint32_t op;
};

static const struct vec_kind vec_kinds[] = {
	{ "elt-add", 0, SPYRE_ELT_ADD }, { "elt-mul", 0, SPYRE_ELT_MUL },
	{ "elt-scale", 0, SPYRE_ELT_SCALE }, { "elt-relu", 0, SPYRE_ELT_RELU },
	{ "elt-gelu", 0, SPYRE_ELT_GELU }, { "elt-silu", 0, SPYRE_ELT_SILU },
	{ "elt-exp", 0, SPYRE_ELT_EXP },
	{ "reduce-sum", 1, SPYRE_REDUCE_SUM },
	{ "reduce-max", 1, SPYRE_REDUCE_MAX },
	{ "rowop-softmax", 2, SPYRE_ROW_SOFTMAX },
	{ "rowop-layernorm", 2, SPYRE_ROW_LAYERNORM },
	{ "rowop-rmsnorm", 2, SPYRE_ROW_RMSNORM },
};

static int vec_cmd(struct spyre_cmdbuf *cb, const struct vec_kind *k,
		   uint32_t n, struct spyre_bo *a, struct spyre_bo *b,
		   struct spyre_bo *out)
{
	if (k->kind == 0)
		return spyre_cmdbuf_eltwise(cb, k->op, SPYRE_DTYPE_FP16, n,
					    SPYRE_MEM(out, 0), SPYRE_MEM(a, 0),
					    SPYRE_MEM(b, 0), 0.5f);
	if (k->kind == 1)
		return spyre_cmdbuf_reduce(cb, k->op, SPYRE_DTYPE_FP16,
					   n / VEC_COLS, VEC_COLS,
					   SPYRE_MEM(out, 0), SPYRE_MEM(a, 0),
					   VEC_COLS);
	return spyre_cmdbuf_rowop(cb, k->op, SPYRE_DTYPE_FP16, n / VEC_COLS,
				  VEC_COLS, SPYRE_MEM(out, 0), VEC_COLS,
				  SPYRE_MEM(a, 0), VEC_COLS, SPYRE_MEM_NONE,
				  SPYRE_MEM_NONE, 1e-5f);
}

/*
 * Card-clock ns of @cmds copies of @k's command on @n fp16 elements in
 * one command list between two TIMESTAMPs, one figure per repetition.
 */
static int vec_run(struct spyre_device *dev, struct spyre_queue *q,
		   struct spyre_bo **bos, const struct vec_kind *k, uint32_t n,
		   unsigned int cmds, struct fig *f)
{
	volatile uint64_t *ts;
	struct spyre_cmdbuf *cb;
	struct spyre_fence fe;
	int ret = spyre_cmdbuf_create(&cb);

	(void)dev;
	if (!ret)
		ret = spyre_bo_map(bos[3], (void **)&ts);
	if (!ret)
		ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(bos[3]));
	for (unsigned int i = 0; !ret && i < cmds; i++)
		ret = vec_cmd(cb, k, n, bos[0], bos[1], bos[2]);
	if (!ret)
		ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(bos[3]) + 8);
	for (int r = 0; !ret && r <= reps; r++) {
		ret = spyre_submit(q, cb, bos, 4, NULL, 0, &fe);
		if (!ret)
			ret = spyre_fence_wait(&fe, 60ull * NSEC);
		if (!ret && r)		/* the first one warms up */
			fig_add(f, (double)(ts[1] - ts[0]) / cmds);
	}
	spyre_cmdbuf_destroy(cb);
	return ret;
}

/*
 * (vi) the fixed cost of small commands: a list of ADD_LIST ELTWISE ADDs
 * of 4 Ki fp16 values, per command, against one native call of the card's
 * math code on the same data; (vii) per-element cost of every ELTWISE,
 * REDUCE and ROWOP kind at 4 Ki, 64 Ki and 1 Mi fp16 elements, one
 * command per job, against the same call natively.  Card clock.
 */
/* --only load: one of its four threads. */
struct load_thread {
	struct spyre_device *dev;
	pthread_barrier_t *start;
	double secs;
	double rate;		/* jobs per second, 0: free-running */
	uint64_t jobs;
	uint64_t offered;	/* jobs the schedule asked for */
	int ret;
};

#define LOAD_ELT	(1u << 20)	/* fp16 elements per ELTWISE */
#define LOAD_ROWS	1024u		/* REDUCE rows (x 1024 columns) */
#define LOAD_DIM	256u		/* GEMM M = N = K, fp32 */
#define LOAD_SYNC_NS	(60ull * 1000000000ull)

static void *load_thread_fn(void *arg)
{
	struct load_thread *t = arg;
	const uint64_t vec = (uint64_t)LOAD_ELT * 2;
	const uint64_t mat = (uint64_t)LOAD_DIM * LOAD_DIM * 4;
	struct spyre_bo *a = NULL, *b = NULL, *o = NULL;
	struct spyre_stream *s = NULL;
	struct spyre_gemm g = { 0 };
	int64_t start, deadline, period = 0, rounds = 0;
	int ret;

	ret = spyre_stream_create(t->dev, SPYRE_PRIORITY_NORMAL, &s);
	if (!ret)
		ret = spyre_bo_alloc(t->dev, vec, 0, &a);
	if (!ret)
		ret = spyre_bo_alloc(t->dev, vec, 0, &b);
	if (!ret)
		ret = spyre_bo_alloc(t->dev, vec, 0, &o);
	if (!ret)
		ret = spyre_stream_fill(s, a, 0, LOAD_ELT, 2, 0x3c00);
	if (!ret)
		ret = spyre_stream_fill(s, b, 0, LOAD_ELT, 2, 0x3c00);
	if (!ret)
		ret = spyre_stream_sync(s, LOAD_SYNC_NS);
	g.a_dtype = g.b_dtype = g.c_dtype = SPYRE_DTYPE_FP32;
	g.m = g.n = g.k = LOAD_DIM;
	g.batch = 1;
	g.a = SPYRE_MEM(a, 0);
	g.b = SPYRE_MEM(b, 0);
	g.c = SPYRE_MEM(o, mat);
	g.alpha = 1.0f;
	if (t->rate > 0)
		period = (int64_t)(3e9 / t->rate);	/* one round: 3 jobs */
	pthread_barrier_wait(t->start);
	start = mono_ns();
	deadline = start + (int64_t)(t->secs * 1e9);
	while (!ret && mono_ns() < deadline) {
		if (period) {
			int64_t due = start + rounds++ * period;
			struct timespec ts = { .tv_sec = due / NSEC,
					       .tv_nsec = due % NSEC };

			if (due >= deadline)
				break;
			/* EINTR cannot come: no signal handlers here. */
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
					NULL);
		}
		ret = spyre_stream_eltwise(s, SPYRE_ELT_ADD, SPYRE_DTYPE_FP16,
					   LOAD_ELT, SPYRE_MEM(o, 0),
					   SPYRE_MEM(a, 0), SPYRE_MEM(b, 0), 0);
		if (!ret)
			ret = spyre_stream_reduce(s, SPYRE_REDUCE_SUM,
						  SPYRE_DTYPE_FP16, LOAD_ROWS,
						  LOAD_ELT / LOAD_ROWS,
						  SPYRE_MEM(b, 0),
						  SPYRE_MEM(a, 0), 0);
		if (!ret)
			ret = spyre_stream_gemm(s, &g);
		if (!ret)
			ret = spyre_stream_sync(s, LOAD_SYNC_NS);
		if (!ret)
			t->jobs += 3;
	}
	if (period)	/* the rounds due before the deadline */
		t->offered = 3 * (uint64_t)((deadline - start + period - 1) /
					    period);
	spyre_stream_destroy(s);
	spyre_bo_free(o);
	spyre_bo_free(b);
	spyre_bo_free(a);
	t->ret = ret;
	return NULL;
}

/*
 * --only load: element-wise, reduction and GEMM work on four queues for
 * @secs seconds, framed by "load: start" / "load: end" lines; @rate jobs
 * per second per queue on a fixed schedule, or as fast as the card goes
 * when it is 0.
 */
static int bench_load(struct spyre_device *dev, double secs, double rate)
{
	struct load_thread t[4];
	pthread_t th[4];
	pthread_barrier_t start;
	uint64_t jobs = 0, offered = 0;
	int64_t t0;
	int rc = 0, n;

	pthread_barrier_init(&start, NULL, 5);
	for (n = 0; n < 4; n++) {
		t[n] = (struct load_thread){ .dev = dev, .start = &start,
					     .secs = secs, .rate = rate };
		if (pthread_create(&th[n], NULL, load_thread_fn, &t[n]))
			break;
	}
	if (n < 4) {
		/* Cannot happen short of resources: the rest never start. */
		fprintf(stderr, "spyre-bench: load: pthread_create failed\n");
		exit(1);
	}
	pthread_barrier_wait(&start);
	t0 = mono_ns();
	printf("load: start\n");
	fflush(stdout);
	for (n = 0; n < 4; n++) {
		pthread_join(th[n], NULL);
		jobs += t[n].jobs;
		offered += t[n].offered;
		if (t[n].ret)
			rc |= fail("load", t[n].ret);
	}
	printf("load: end %.3f %llu %llu\n", (mono_ns() - t0) / 1e9,
	       (unsigned long long)jobs, (unsigned long long)offered);
	fflush(stdout);
	pthread_barrier_destroy(&start);
	return rc;
}

static int bench_vec(struct spyre_device *dev)
{
	static const uint32_t sizes[] = { 4096, 65536, 1048576 };
	struct spyre_bo *bos[4] = { NULL };
	struct spyre_queue *q = NULL;
	struct fig f = { 0 };
	char b1[48], b2[48], name[64], cname[40];
	const char *placement;
	int ret, rc = 0;

	ret = spyre_queue_create(dev, SPYRE_PRIORITY_NORMAL, &q);
	for (int i = 0; !ret && i < 3; i++)
		ret = alloc_operand(dev, 2 * MiB, &bos[i], &placement);
	if (!ret)
		ret = spyre_bo_alloc(dev, PAGE, 0, &bos[3]);
	for (int i = 0; !ret && i < 2; i++) {
		struct spyre_cmdbuf *cb;
		struct spyre_fence fe;

		/* 1.0 and 0.5 in fp16: nothing overflows, no NaN */
		ret = spyre_cmdbuf_create(&cb);
		if (!ret)
			ret = spyre_cmdbuf_fill(cb, spyre_bo_va(bos[i]), MiB, 2,
						i ? 0x3800 : 0x3c00);
		if (!ret)
			ret = spyre_submit(q, cb, bos, 4, NULL, 0, &fe);
		if (!ret)
			ret = spyre_fence_wait(&fe, 60ull * NSEC);
		spyre_cmdbuf_destroy(cb);
	}
	if (ret) {
		rc = fail("vector set-up", ret);
		goto out;
	}

	printf("\n== small commands: %u ELTWISE ADDs of 4 Ki fp16 in one "
	       "command list (card clock, per command; median [min-max] of "
	       "%d lists)\n", ADD_LIST, reps);
	ret = vec_run(dev, q, bos, &vec_kinds[0], 4096, ADD_LIST, &f);
	if (ret) {
		rc = fail("ELTWISE list", ret);
		goto out;
	}
	{
		struct fig *nat = ceil_get("elt-add-4096-call");

		printf("   %s us per command; native call of the card's math "
		       "code (1 thread): %s us -> %.2fx (goal <= 3x)\n",
		       fig_str(b1, sizeof(b1), &f, 1e-3, 2),
		       nat ? fig_str(b2, sizeof(b2), nat, 1e-3, 2) : "-",
		       nat ? fig_med(&f) / fig_med(nat) : 0);
		summary_add("(vi) ELTWISE ADD 4Ki fp16, in a 1000-list", &f,
			    1e-3, 2, "us", "native call, 1 thr", nat, "card",
			    3, 1);
	}

	printf("\n== per-element cost, fp16, one command per job (card "
	       "clock, ns per element; rows of %u for REDUCE/ROWOP)\n",
	       VEC_COLS);
	printf("   against the same call of the card's math code natively on "
	       "the host (1 thread, this run)\n");
	printf("%-16s %8s %-22s %-22s %7s\n", "kind", "elements",
	       "card ns/elem", "native ns/elem", "ratio");
	for (size_t k = 0; k < sizeof(vec_kinds) / sizeof(vec_kinds[0]); k++) {
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			struct fig *nat = ceil_get("%s-%u", vec_kinds[k].name,
						   sizes[z]);

			f.n = 0;
			ret = vec_run(dev, q, bos, &vec_kinds[k], sizes[z], 1,
				      &f);
			if (ret) {
				printf("%-16s %8u %s\n", vec_kinds[k].name,
				       sizes[z], spyre_strerror(ret));
				rc = 1;
				ret = 0;
				continue;
			}
			for (int i = 0; i < f.n; i++)
				f.v[i] /= sizes[z];
			printf("%-16s %8u %-22s %-22s %6.2fx\n",
			       vec_kinds[k].name, sizes[z],
			       fig_str(b1, sizeof(b1), &f, 1, 2),
			       nat ? fig_str(b2, sizeof(b2), nat, 1, 2) : "-",
			       nat ? fig_med(&f) / fig_med(nat) : 0);
			if (sizes[z] == 65536) {
				snprintf(name, sizeof(name),
					 "(vii) %s 64Ki fp16, per elem",
					 vec_kinds[k].name);
				snprintf(cname, sizeof(cname), "native, 1 thr");
				summary_add(name, &f, 1, 2, "ns", cname, nat,
					    "card", 0, 1);
			}
		}
	}
out:
	for (int i = 0; i < 4; i++)
		spyre_bo_free(bos[i]);
	spyre_queue_destroy(q);
	return rc;
}

/* ---- kernels (KERNEL) ---- */

/* Pointwise elements of (ix), and the rows x columns of (x) and (xi). */
#define K_ELEMS		(4u << 20)
#define K_ROWS		1024u
#define K_COLS		4096u
/* (xiii), (xiv): rows gathered or scattered, of a table's rows x cols. */
#define K_GROWS		128u
#define K_TROWS		32768u
#define K_TCOLS		512u
/* The fp16 bits of table element (r, c) and row element (j, c): finite. */
#define K_TBITS(r, c)	((uint16_t)(((r) * 7u + (c)) % 0x7000u))
#define K_RBITS(j, c)	((uint16_t)(((j) * 131u + (c) * 3u + 1u) % 0x7000u))

/*
 * Card-clock ns per command of @cmds copies of the command @l (a KERNEL),
 * or of NOPs when @l is NULL, in one command list between two
 * TIMESTAMPs; one figure per repetition.
 */
static int kernel_list_run(struct spyre_queue *q, struct spyre_bo *ts_bo,
			   const struct spyre_kernel_launch *l,
			   unsigned int cmds, struct fig *f)
{
	volatile uint64_t *ts;
	struct spyre_bo *const *bos;
	struct spyre_cmdbuf *cb;
	struct spyre_fence fe;
	size_t nbos;
	int ret = spyre_cmdbuf_create(&cb);

	if (!ret)
		ret = spyre_bo_map(ts_bo, (void **)&ts);
	if (!ret)
		ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(ts_bo));
	for (unsigned int i = 0; !ret && i < cmds; i++)
		ret = l ? spyre_cmdbuf_kernel(cb, l) : spyre_cmdbuf_nop(cb);
	if (!ret)
		ret = spyre_cmdbuf_timestamp(cb, spyre_bo_va(ts_bo) + 8);
	nbos = spyre_cmdbuf_bos(cb, &bos);
	for (int r = 0; !ret && r <= reps; r++) {
		struct spyre_bo *list[40];

		for (size_t i = 0; i < nbos && i < 39; i++)
			list[i] = bos[i];
		list[nbos < 39 ? nbos : 39] = ts_bo;
		ret = spyre_submit(q, cb, list, (unsigned int)(nbos + 1), NULL,
				   0, &fe);
		if (!ret)
			ret = spyre_fence_wait(&fe, 60ull * NSEC);
		if (!ret && r)		/* the first one warms up */
			fig_add(f, (double)(ts[1] - ts[0]) / cmds);
	}
	spyre_cmdbuf_destroy(cb);
	return ret;
}

/*
 * The ceiling of a memory-bound kernel: ns the host's memcpy on 2
 * threads (memcpy-2t, GB/s, this run) takes for @bytes, as a figure
 * (its spread from the memcpy's); NULL when the run has no memcpy-2t.
 */
static struct fig *kernel_ceiling(struct fig *out, uint64_t bytes)
{
	struct fig *m = ceil_get("memcpy-2t");

	if (!m)		/* a host whose card uses another thread count */
		m = ceil_get("memcpy-%dt", ceil_threads);
	if (!m)
		return NULL;
	out->n = 0;
	fig_add(out, bytes / fig_max(m));
	fig_add(out, bytes / fig_med(m));
	fig_add(out, bytes / fig_min(m));
	return out;
}

/* The fused pointwise expression of (ix): 8 operations per element. */
static int kernel_fused8(struct spyre_kernel **out)
{
	const uint32_t dt[3] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32,
				 SPYRE_DTYPE_FP32 };
	struct spyre_kernel *k;
	int ret = spyre_kernel_create(dt, 3, 1, 1, 0, &k), i, x, y, t, s;

	if (ret)
		return ret;
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	x = spyre_kernel_load(k, 0, i, SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE);
	y = spyre_kernel_load(k, 1, i, SPYRE_KERNEL_NONE, SPYRE_KERNEL_NONE);
	s = spyre_kernel_param(k, SPYRE_KTYPE_F32, 0);
	t = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, x, y, SPYRE_KERNEL_NONE);
	t = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, t, x, SPYRE_KERNEL_NONE);
	t = spyre_kernel_op(k, SPYRE_KOP_SUB, 0, t, y, SPYRE_KERNEL_NONE);
	t = spyre_kernel_op(k, SPYRE_KOP_MAX, 0, t, y, SPYRE_KERNEL_NONE);
	t = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, t, s, SPYRE_KERNEL_NONE);
	t = spyre_kernel_op(k, SPYRE_KOP_FMA, 0, t, x, y);
	t = spyre_kernel_op(k, SPYRE_KOP_SIGMOID, 0, t, SPYRE_KERNEL_NONE,
			    SPYRE_KERNEL_NONE);
	t = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, t, x, SPYRE_KERNEL_NONE);
	spyre_kernel_store(k, 2, i, t, SPYRE_KERNEL_NONE, 0);
	ret = spyre_kernel_error(k);
	if (ret)
		spyre_kernel_destroy(k);
	else
		*out = k;
	return ret;
}

/* (x) a row sum, fp16 in, fp32 out, or (xi) a softmax, fp16 in and out. */
static int kernel_rows(bool softmax, struct spyre_kernel **out)
{
	const uint32_t dt[2] = { SPYRE_DTYPE_FP16,
				 softmax ? SPYRE_DTYPE_FP16 : SPYRE_DTYPE_FP32 };
	const int N = SPYRE_KERNEL_NONE;
	struct spyre_kernel *k;
	int ret = spyre_kernel_create(dt, 2, 1, 1, 1, &k), row, o, x, m, e, s;

	if (ret)
		return ret;
	row = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N, 1, 0);
	spyre_kernel_pass(k);
	/* o = row * P0 + r0 (contiguous rows of P0 elements) */
	o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
			    spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0),
			    N);
	x = spyre_kernel_load(k, 0, o, N, N);
	m = spyre_kernel_reduce(k, softmax ? SPYRE_KRED_MAX : SPYRE_KRED_SUM,
				x, N, N, N);
	spyre_kernel_endpass(k);
	if (!softmax) {
		spyre_kernel_store(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0),
				   m, N, 0);
	} else {
		spyre_kernel_pass(k);
		o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
				    spyre_kernel_idx(k, SPYRE_KTYPE_I64,
						     SPYRE_KDIM_R0), N);
		x = spyre_kernel_load(k, 0, o, N, N);
		e = spyre_kernel_op(k, SPYRE_KOP_EXP, 0,
				    spyre_kernel_op(k, SPYRE_KOP_SUB, 0, x, m, N),
				    N, N);
		s = spyre_kernel_reduce(k, SPYRE_KRED_SUM, e, N, N, N);
		spyre_kernel_endpass(k);
		spyre_kernel_pass(k);
		o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
				    spyre_kernel_idx(k, SPYRE_KTYPE_I64,
						     SPYRE_KDIM_R0), N);
		x = spyre_kernel_load(k, 0, o, N, N);
		e = spyre_kernel_op(k, SPYRE_KOP_EXP, 0,
				    spyre_kernel_op(k, SPYRE_KOP_SUB, 0, x, m, N),
				    N, N);
		spyre_kernel_store(k, 1, o,
				   spyre_kernel_op(k, SPYRE_KOP_DIV, 0, e, s, N),
				   N, 0);
		spyre_kernel_endpass(k);
	}
	ret = spyre_kernel_error(k);
	if (ret)
		spyre_kernel_destroy(k);
	else
		*out = k;
	return ret;
}

/*
 * (xiii) an embedding lookup, a gather of K_GROWS rows of a K_TROWS x
 * K_TCOLS fp16 table (o0 the table, o1 the rows' int64 indices, o2 the
 * rows), or (xiv) the scatter of the rows into the table at the indices;
 * parameter 0 is the row length.
 */
static int kernel_embedding(bool scatter, struct spyre_kernel **out)
{
	const uint32_t dt[3] = { SPYRE_DTYPE_FP16, SPYRE_DTYPE_INT64,
				 SPYRE_DTYPE_FP16 };
	const int N = SPYRE_KERNEL_NONE;
	struct spyre_kernel *k;
	int ret = spyre_kernel_create(dt, 3, 1, 2, 0, &k), row, d, o;

	if (ret)
		return ret;
	row = spyre_kernel_load(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0),
				N, N);
	d = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 1);
	/* o = i0 * P0 + i1 (the rows), row = index * P0 + i1 (the table) */
	o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, d, 1, 0);
	row = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, d,
			      spyre_kernel_op(k, SPYRE_KOP_MUL, 0, row,
					      spyre_kernel_param(k,
						      SPYRE_KTYPE_I64, 0), N),
			      N);
	if (scatter)
		spyre_kernel_scatter(k, 0, row, spyre_kernel_load(k, 2, o, N, N),
				     N, SPYRE_KSCAT_STORE);
	else
		spyre_kernel_store(k, 2, o, spyre_kernel_load(k, 0, row, N, N),
				   N, 0);
	ret = spyre_kernel_error(k);
	if (ret)
		spyre_kernel_destroy(k);
	else
		*out = k;
	return ret;
}

/* (xv) K_ELEMS normal fp32 values: RAND of (P0, P1) at the index. */
static int kernel_normal(struct spyre_kernel **out)
{
	const uint32_t dt[1] = { SPYRE_DTYPE_FP32 };
	struct spyre_kernel *k;
	int ret = spyre_kernel_create(dt, 1, 2, 1, 0, &k), i;

	if (ret)
		return ret;
	i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
	spyre_kernel_store(k, 0, i,
			   spyre_kernel_rand(k, SPYRE_KRAND_NORMAL,
				spyre_kernel_param(k, SPYRE_KTYPE_I64, 0),
				spyre_kernel_param(k, SPYRE_KTYPE_I64, 1), i),
			   SPYRE_KERNEL_NONE, 0);
	ret = spyre_kernel_error(k);
	if (ret)
		spyre_kernel_destroy(k);
	else
		*out = k;
	return ret;
}

/*
 * One kernel figure: @k launched with @l (its program uploaded here) in
 * lists of one command, card ns, against the memcpy time of @bytes.
 */
static int kernel_figure(struct spyre_device *dev, struct spyre_queue *q,
			 struct spyre_bo *ts, struct spyre_kernel *k,
			 struct spyre_kernel_launch *l, uint64_t bytes,
			 const char *name, double goal, struct fig *f)
{
	struct spyre_bo *pbo = NULL;
	const void *prog;
	size_t psize;
	struct fig c;
	char b1[48], b2[48];
	int ret = spyre_kernel_finalize(k, &prog, &psize);

	if (!ret)
		ret = spyre_kernel_upload(dev, prog, psize, 0, &pbo);
	if (ret)
		return ret;
	l->prog = SPYRE_MEM(pbo, 0);
	l->prog_size = (uint32_t)psize;
	f->n = 0;
	ret = kernel_list_run(q, ts, l, 1, f);
	spyre_bo_free(pbo);
	if (ret)
		return ret;
	printf("   %-36s %s us; memcpy of %.2f MiB, 2 thr: %s us -> %.2fx "
	       "(goal <= %gx)\n", name, fig_str(b1, sizeof(b1), f, 1e-3, 1),
	       bytes / (double)MiB,
	       kernel_ceiling(&c, bytes) ? fig_str(b2, sizeof(b2), &c, 1e-3, 1) :
	       "-", kernel_ceiling(&c, bytes) ? fig_med(f) / fig_med(&c) : 0,
	       goal);
	summary_add(name, f, 1e-3, 1, "us", "memcpy of its bytes, 2 thr",
		    kernel_ceiling(&c, bytes), "card", goal, 1);
	return 0;
}

/* |got - want| within 2 ulp-ish of a binary32 @want (the card's exp). */
static bool kernel_close(double got, double want)
{
	return fabs(got - want) <= 2.5e-7 * fabs(want) + 1e-30;
}

/* Fill @count elements of @elem bytes of @bo with @value on @q. */
static int kernel_fill(struct spyre_queue *q, struct spyre_bo *bo,
		       uint64_t count, uint32_t elem, uint64_t value)
{
	struct spyre_cmdbuf *cb;
	struct spyre_fence fe;
	int ret = spyre_cmdbuf_create(&cb);

	if (!ret)
		ret = spyre_cmdbuf_fill(cb, spyre_bo_va(bo), count, elem, value);
	if (!ret)
		ret = spyre_submit(q, cb, &bo, 1, NULL, 0, &fe);
	if (!ret)
		ret = spyre_fence_wait(&fe, 60ull * NSEC);
	spyre_cmdbuf_destroy(cb);
	return ret;
}

/*
 * (xiii) the gather of K_GROWS rows of the K_TROWS x K_TCOLS fp16 table
 * @tbl at the int64 indices in @ibo into @rows, then (xiv) the scatter of
 * other rows into the table at the same indices, each against the
 * memcpy of its bytes (rows and indices read, rows written; goal <= 2x).
 * The table and rows hold finite fp16 bit patterns, which both move
 * unchanged: every element gathered and scattered is checked.
 */
static int kernel_embedding_figures(struct spyre_device *dev,
				    struct spyre_queue *q, struct spyre_bo *ts,
				    struct spyre_bo *tbl, struct spyre_bo *ibo,
				    struct spyre_bo *rows)
{
	const uint64_t bytes = 2ull * K_GROWS * K_TCOLS * 2 + K_GROWS * 8;
	const uint64_t width = K_TCOLS;
	struct spyre_kernel_arg args[3] = {
		{ SPYRE_MEM(tbl, 0), (uint64_t)K_TROWS * K_TCOLS,
		  SPYRE_DTYPE_FP16, 0 },
		{ SPYRE_MEM(ibo, 0), K_GROWS, SPYRE_DTYPE_INT64, 0 },
		{ SPYRE_MEM(rows, 0), (uint64_t)K_GROWS * K_TCOLS,
		  SPYRE_DTYPE_FP16, 0 } };
	struct spyre_kernel_launch l;
	struct spyre_kernel *k = NULL;
	struct fig f = { 0 };
	uint16_t *t, *r;
	int64_t *idx;
	int ret;

	ret = spyre_bo_map(tbl, (void **)&t);
	if (!ret)
		ret = spyre_bo_map(ibo, (void **)&idx);
	if (!ret)
		ret = spyre_bo_map(rows, (void **)&r);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < K_TROWS; i++)
		for (uint32_t c = 0; c < K_TCOLS; c++)
			t[(size_t)i * K_TCOLS + c] = K_TBITS(i, c);
	/* distinct rows (257 is prime to 2^15), spread over the table */
	for (uint32_t j = 0; j < K_GROWS; j++)
		idx[j] = (int64_t)((j * 257u * 97u + 13u) % K_TROWS);
	memset(&l, 0, sizeof(l));
	l.noperands = 3;
	l.operands = args;
	l.nparams = 1;
	l.params = &width;
	l.npdims = 2;
	l.size[0] = K_GROWS;
	l.size[1] = K_TCOLS;
	for (int sc = 0; !ret && sc < 2; sc++) {
		const char *name = sc ? "(xiv) scatter 128 rows of 32Kx512 fp16" :
				   "(xiii) gather 128 rows of 32Kx512 fp16";

		if (sc)
			for (uint32_t j = 0; j < K_GROWS; j++)
				for (uint32_t c = 0; c < K_TCOLS; c++)
					r[(size_t)j * K_TCOLS + c] =
						K_RBITS(j, c);
		ret = kernel_embedding(sc, &k);
		if (!ret)
			ret = kernel_figure(dev, q, ts, k, &l, bytes, name, 2,
					    &f);
		spyre_kernel_destroy(k);
		k = NULL;
		for (uint32_t j = 0; !ret && j < K_GROWS; j++) {
			for (uint32_t c = 0; c < K_TCOLS; c++) {
				uint16_t want = sc ? K_RBITS(j, c) :
						K_TBITS((uint32_t)idx[j], c);
				uint16_t got = sc ?
					t[(size_t)idx[j] * K_TCOLS + c] :
					r[(size_t)j * K_TCOLS + c];

				if (got != want) {
					fprintf(stderr, "%s: row %u col %u: "
						"card %#x, want %#x\n", name,
						j, c, got, want);
					ret = -EIO;
					break;
				}
			}
		}
	}
	return ret;
}

/*
 * (xv) K_ELEMS normal fp32 values (RAND's Box-Muller) into @out against
 * the memcpy of the bytes written (goal <= 3x); the first 4 Ki values
 * checked against the reference interpreter's (a few ulp: the card's
 * LOG and COS against fp64).
 */
static int kernel_normal_figure(struct spyre_device *dev,
				struct spyre_queue *q, struct spyre_bo *ts,
				struct spyre_bo *out)
{
	const uint64_t seed_off[2] = { 0x5eed5eed1234ull, 7 };
	struct spyre_kernel_arg arg = { SPYRE_MEM(out, 0), K_ELEMS,
					SPYRE_DTYPE_FP32, 0 };
	struct spyre_kernel_launch l;
	struct spyre_kernel *k = NULL;
	struct fig f = { 0 };
	float *got, want[K_ELEMS / 1024];
	const void *prog;
	size_t psize;
	int ret = kernel_normal(&k);

	memset(&l, 0, sizeof(l));
	l.noperands = 1;
	l.operands = &arg;
	l.nparams = 2;
	l.params = seed_off;
	l.npdims = 1;
	l.size[0] = K_ELEMS;
	if (!ret)
		ret = kernel_figure(dev, q, ts, k, &l, (uint64_t)K_ELEMS * 4,
				    "(xv) normal 4Mi fp32", 3, &f);
	if (!ret)
		ret = spyre_bo_map(out, (void **)&got);
	if (!ret)
		ret = spyre_kernel_finalize(k, &prog, &psize);
	if (!ret) {
		/* the reference's first 4 Ki values */
		struct spyre_ref_kernel_operand ro = {
			want, K_ELEMS / 1024, SPYRE_DTYPE_FP32, 0 };
		struct spyre_ref_kernel_launch rl = { 0 };
		struct spyre_ref_kernel_result res;

		rl.prog = prog;
		rl.prog_size = psize;
		rl.noperands = 1;
		rl.operands = &ro;
		rl.nparams = 2;
		rl.params = seed_off;
		rl.npdims = 1;
		rl.size[0] = K_ELEMS / 1024;
		ret = spyre_ref_kernel(&rl, &res);
		if (!ret && res.status)
			ret = -EIO;
		for (uint32_t i = 0; !ret && i < K_ELEMS / 1024; i++) {
			if (!(fabs(got[i] - want[i]) <=
			      5e-7 * fabs(want[i]) + 1e-6)) {
				fprintf(stderr, "(xv): element %u: card %.9g, "
					"reference %.9g\n", i, got[i],
					want[i]);
				ret = -EIO;
			}
		}
	}
	spyre_kernel_destroy(k);
	return ret;
}

/*
 * (ix) a fused pointwise expression of 8 operations over 4 Mi fp32
 * elements, (x) a row sum of 1024 x 4096 fp16 (fp32 accumulation and
 * output), (xi) a one-kernel softmax of the same, each against the host's
 * memcpy (2 threads, this run) of its bytes (inputs read once plus
 * outputs written); (xii) an empty KERNEL in a 1000-command list against
 * a NOP in the same list, per command; (xiii)-(xv) part 2's gather,
 * scatter and normal random numbers (kernel_embedding_figures(),
 * kernel_normal_figure()).  Card clock.  A card without
 * KERNEL gets "n/a".  The results are checked (a wrong one fails).
 */
static int bench_kernel(struct spyre_device *dev)
{
	struct spyre_device_info info;
	struct spyre_kernel *k = NULL;
	struct spyre_bo *bos[4] = { NULL }, *ts = NULL, *pbo = NULL;
	struct spyre_bo *tbl = NULL, *ibo = NULL;
	struct spyre_queue *q = NULL;
	struct spyre_kernel_arg args[3];
	struct spyre_kernel_launch l;
	const uint64_t scale = 0x3fc00000;	/* 1.5f */
	const uint64_t rstride = K_COLS;
	struct fig f = { 0 }, fn = { 0 };
	const char *placement = "device";
	const void *prog;
	size_t psize;
	char b1[48], b2[48];
	void *m;
	int ret, rc = 0;

	printf("\n== kernels (KERNEL): card clock, median [min-max] of %d "
	       "runs, against the host's memcpy (2 threads) of the kernel's "
	       "bytes\n", reps);
	if (spyre_device_get_info(dev, &info) ||
	    !(info.caps & SPYRE_DEV_CAP_KERNEL)) {
		printf("   n/a: the card does not run KERNEL\n");
		return 0;
	}
	ret = spyre_queue_create(dev, SPYRE_PRIORITY_NORMAL, &q);
	for (int i = 0; !ret && i < 4; i++)
		ret = alloc_operand(dev, (uint64_t)K_ELEMS * 4, &bos[i],
				    &placement);
	if (!ret)
		ret = spyre_bo_alloc(dev, PAGE, 0, &ts);
	if (!ret)
		ret = kernel_fill(q, bos[0], K_ELEMS, 4, 0x3f800000); /* 1.0 */
	if (!ret)
		ret = kernel_fill(q, bos[1], K_ELEMS, 4, 0x3f000000); /* 0.5 */
	if (!ret)	/* fp16 1.0 */
		ret = kernel_fill(q, bos[3], (uint64_t)K_ROWS * K_COLS, 2,
				  0x3c00);
	if (ret) {
		rc = fail("kernel set-up", ret);
		goto out;
	}

	/* (ix) */
	memset(&l, 0, sizeof(l));
	for (int i = 0; i < 3; i++)
		args[i] = (struct spyre_kernel_arg){ SPYRE_MEM(bos[i], 0),
						     K_ELEMS, SPYRE_DTYPE_FP32,
						     0 };
	l.noperands = 3;
	l.operands = args;
	l.nparams = 1;
	l.params = &scale;
	l.npdims = 1;
	l.size[0] = K_ELEMS;
	ret = kernel_fused8(&k);
	if (!ret)
		ret = kernel_figure(dev, q, ts, k, &l, 3ull * K_ELEMS * 4,
				    "(ix) fused 8-op pointwise 4Mi fp32", 4, &f);
	if (!ret)
		ret = spyre_bo_map(bos[2], &m);
	if (!ret) {
		/* the reference on one element of the same inputs */
		float x = 1.0f, y = 0.5f, want = 0;
		struct spyre_ref_kernel_operand ro[3] = {
			{ &x, 1, SPYRE_DTYPE_FP32, 0 },
			{ &y, 1, SPYRE_DTYPE_FP32, 0 },
			{ &want, 1, SPYRE_DTYPE_FP32, 0 } };
		struct spyre_ref_kernel_launch rl = { 0 };
		struct spyre_ref_kernel_result res;
		const float *got = m;

		spyre_kernel_finalize(k, &rl.prog, &psize);
		rl.prog_size = psize;
		rl.noperands = 3;
		rl.operands = ro;
		rl.nparams = 1;
		rl.params = &scale;
		rl.npdims = 1;
		rl.size[0] = 1;
		ret = spyre_ref_kernel(&rl, &res);
		if (!ret && (res.status || !kernel_close(got[0], want) ||
			     !kernel_close(got[K_ELEMS - 1], want))) {
			fprintf(stderr, "(ix): card %.9g, %.9g; reference "
				"%.9g\n", got[0], got[K_ELEMS - 1], want);
			ret = -EIO;
		}
	}
	spyre_kernel_destroy(k);
	k = NULL;
	if (ret)
		rc |= fail("(ix) fused pointwise", ret);

	/* (x) and (xi) */
	for (int sm = 0; sm < 2; sm++) {
		const char *name = sm ? "(xi) softmax 1024x4096 fp16" :
				   "(x) row sum 1024x4096 fp16->fp32";
		uint64_t out_bytes = sm ? (uint64_t)K_ROWS * K_COLS * 2 :
				     K_ROWS * 4;

		memset(&l, 0, sizeof(l));
		args[0] = (struct spyre_kernel_arg){ SPYRE_MEM(bos[3], 0),
			(uint64_t)K_ROWS * K_COLS, SPYRE_DTYPE_FP16, 0 };
		args[1] = (struct spyre_kernel_arg){ SPYRE_MEM(bos[2], 0),
			sm ? (uint64_t)K_ROWS * K_COLS : K_ROWS,
			sm ? SPYRE_DTYPE_FP16 : SPYRE_DTYPE_FP32, 0 };
		l.noperands = 2;
		l.operands = args;
		l.nparams = 1;
		l.params = &rstride;
		l.npdims = 1;
		l.nrdims = 1;
		l.size[0] = K_ROWS;
		l.size[SPYRE_KDIM_R0] = K_COLS;
		ret = kernel_rows(sm, &k);
		if (!ret)
			ret = kernel_figure(dev, q, ts, k, &l,
					    (uint64_t)K_ROWS * K_COLS * 2 +
					    out_bytes, name, 4, &f);
		if (!ret)
			ret = spyre_bo_map(bos[2], &m);
		if (!ret) {
			/* rows of ones: sums 4096, softmax 1/4096 (fp16) */
			double want = sm ? 1.0 / K_COLS : K_COLS;
			double g0 = sm ? spyre_ref_fp16_to_f64(*(uint16_t *)m) :
				    *(float *)m;
			double g1 = sm ? spyre_ref_fp16_to_f64(((uint16_t *)m)
					[(uint64_t)K_ROWS * K_COLS - 1]) :
				    ((float *)m)[K_ROWS - 1];

			if (g0 != want || g1 != want) {
				fprintf(stderr, "%s: card %g, %g; want %g\n",
					name, g0, g1, want);
				ret = -EIO;
			}
		}
		spyre_kernel_destroy(k);
		k = NULL;
		if (ret) {
			rc |= fail(name, ret);
			ret = 0;
		}
	}

	/* (xiii) and (xiv): an embedding's gather and scatter of rows */
	ret = alloc_operand(dev, (uint64_t)K_TROWS * K_TCOLS * 2, &tbl,
			    &placement);
	if (!ret)
		ret = spyre_bo_alloc(dev, PAGE, 0, &ibo);
	if (!ret)
		ret = kernel_embedding_figures(dev, q, ts, tbl, ibo, bos[2]);
	if (ret) {
		rc |= fail("(xiii)/(xiv) gather and scatter", ret);
		ret = 0;
	}

	/* (xv) */
	ret = kernel_normal_figure(dev, q, ts, bos[2]);
	if (ret) {
		rc |= fail("(xv) normal", ret);
		ret = 0;
	}

	/* (xii) an empty KERNEL (no instructions, one point) vs a NOP */
	ret = spyre_kernel_create(NULL, 0, 0, 0, 0, &k);
	if (!ret)
		ret = spyre_kernel_finalize(k, &prog, &psize);
	if (!ret)
		ret = spyre_kernel_upload(dev, prog, psize, 0, &pbo);
	if (!ret) {
		memset(&l, 0, sizeof(l));
		l.prog = SPYRE_MEM(pbo, 0);
		l.prog_size = (uint32_t)psize;
		f.n = 0;
		fn.n = 0;
		ret = kernel_list_run(q, ts, &l, 1000, &f);
	}
	if (!ret)
		ret = kernel_list_run(q, ts, NULL, 1000, &fn);
	if (!ret) {
		printf("   %-36s %s us per command; NOP in the same list: %s "
		       "us -> %.2fx (goal <= 2x)\n",
		       "(xii) empty KERNEL in a 1000-list",
		       fig_str(b1, sizeof(b1), &f, 1e-3, 3),
		       fig_str(b2, sizeof(b2), &fn, 1e-3, 3),
		       fig_med(&f) / fig_med(&fn));
		summary_add("(xii) empty KERNEL in a 1000-list", &f, 1e-3, 3,
			    "us", "NOP in the same list", &fn, "card", 2, 1);
	} else {
		rc |= fail("(xii) empty KERNEL list", ret);
	}
out:
	spyre_kernel_destroy(k);
	spyre_bo_free(pbo);
	for (int i = 0; i < 4; i++)
		spyre_bo_free(bos[i]);
	spyre_bo_free(tbl);
	spyre_bo_free(ibo);
	spyre_bo_free(ts);
	spyre_queue_destroy(q);
	return rc;
}

/* ---- scaling ---- */

#define SCALE_GEMM_DIM	256u
#define SCALE_COPY	MiB
#define SCALE_MAX_PROCS	8

enum { SCALE_NOP, SCALE_GEMM, SCALE_COPY_KIND, SCALE_KINDS };

static const char *const scale_name[SCALE_KINDS] = {
	"NOP jobs (16/SUBMIT, wait/256)", "GEMM 256^3 fp32", "COPY 1 MiB sys->dev",
};

/* NOP jobs, 16 per SUBMIT, the last of every 256 waited for. */
/* What one scaling process works with: set up before the common start. */
struct scale_ctx {
	struct spyre_device *dev;
	int kind;
	int fd;
	uint32_t queue;			/* SCALE_NOP: raw DRM queue... */
	bool has_queue;			/* ... if created */
	uint32_t syncobj;
	struct drm_spyre_job jobs[16];
	struct drm_spyre_sync out;
	struct spyre_bo *nop;
	struct spyre_queue *q;		/* GEMM, COPY: libspyre queue */
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bos[3];
};

static void scale_teardown(struct scale_ctx *c)
{
	if (c->has_queue)
		xqueue_destroy(c->fd, c->queue);
	if (c->syncobj)
		xsyncobj_destroy(c->fd, c->syncobj);
	spyre_bo_free(c->nop);
	spyre_cmdbuf_destroy(c->cb);
	for (int i = 0; i < 3; i++)
		spyre_bo_free(c->bos[i]);
	spyre_queue_destroy(c->q);
}

/*
 * Queue, buffers and commands of one scaling process: NOP jobs through
 * raw DRM ioctls (16 per SUBMIT, the last signalling a syncobj), or one
 * GEMM 256^3 / 1 MiB system->device COPY per job through libspyre.
 */
static int scale_setup(struct scale_ctx *c, struct spyre_device *dev,
		       int kind)
{
	const uint64_t sz = (uint64_t)SCALE_GEMM_DIM * SCALE_GEMM_DIM * 4;
	int ret;

	memset(c, 0, sizeof(*c));
	c->dev = dev;
	c->kind = kind;
	c->fd = spyre_device_fd(dev);
	if (kind == SCALE_NOP) {
		ret = xqueue_create(c->fd, DRM_SPYRE_PRIORITY_NORMAL,
				    &c->queue);
		c->has_queue = !ret;
		if (!ret)
			ret = upload_nops(dev, 1, &c->nop);
		if (!ret)
			ret = xsyncobj_create(c->fd, &c->syncobj);
		c->out.handle = c->syncobj;
		for (int i = 0; !ret && i < 16; i++)
			make_job(&c->jobs[i], c->queue, c->nop, 8, NULL);
		return ret;
	}
	ret = spyre_queue_create(dev, SPYRE_PRIORITY_NORMAL, &c->q);
	for (int i = 0; !ret && i < 3; i++)
		ret = spyre_bo_alloc(dev, kind == SCALE_GEMM ? sz : SCALE_COPY,
				     kind == SCALE_COPY_KIND && i == 0 ? 0 :
				     SPYRE_BO_DEVICE, &c->bos[i]);
	if (!ret)
		ret = spyre_cmdbuf_create(&c->cb);
	if (!ret && kind == SCALE_GEMM)
		ret = cmd_gemm_dim(c->cb, &gemm_dtypes[0], SCALE_GEMM_DIM,
				   spyre_bo_va(c->bos[0]),
				   spyre_bo_va(c->bos[1]),
				   spyre_bo_va(c->bos[2]));
	else if (!ret)
		ret = spyre_cmdbuf_copy(c->cb, spyre_bo_va(c->bos[1]),
					spyre_bo_va(c->bos[0]), SCALE_COPY);
	return ret;
}

/*
 * Work until @t_end (CLOCK_MONOTONIC ns): 16 SUBMITs of 16 NOP jobs then
 * a wait, or one job and its wait; *@ops counts the jobs completed.
 */
static int scale_loop(struct scale_ctx *c, int64_t t_end, uint64_t *ops)
{
	struct spyre_fence fe;
	int ret = 0;

	while (!ret && mono_ns() < t_end) {
		if (c->kind != SCALE_NOP) {
			ret = spyre_submit(c->q, c->cb, c->bos, 3, NULL, 0,
					   &fe);
			if (!ret)
				ret = spyre_fence_wait(&fe, 60ull * NSEC);
			if (!ret)
				*ops += 1;
			continue;
		}
		for (int k = 0; !ret && k < 16; k++) {
			c->jobs[15].out_syncs = k == 15 ? (uintptr_t)&c->out : 0;
			c->jobs[15].out_sync_count = k == 15;
			ret = xsubmit(c->fd, c->jobs, 16);
		}
		if (!ret)
			ret = xwait(c->fd, c->syncobj, 60);
		if (!ret)
			*ops += 256;
	}
	return ret;
}

static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

/* What a scaling process reports (one pipe write: atomic). */
struct scale_res {
	uint64_t ops;		/* jobs completed in the window */
	int64_t t_done;		/* CLOCK_MONOTONIC ns its last one completed */
	int64_t cpu;		/* its CPU time in the window, ns */
	int32_t ret;
};

/* The child side of scale_run(); never returns. */
static void scale_child(unsigned int card, int kind, int ready, int go,
			int res)
{
	struct scale_res r = { 0 };
	struct spyre_device *dev = NULL;
	struct scale_ctx c;
	int64_t t_end, c0;

	r.ret = spyre_device_open(card, &dev);
	if (!r.ret)
		r.ret = scale_setup(&c, dev, kind);
	/*
	 * Set up, then start together: one read of one record (pipe writes
	 * this small are atomic), bounded in case the parent died.
	 */
	if (write(ready, &r.ret, sizeof(r.ret)) != sizeof(r.ret) ||
	    read(go, &t_end, sizeof(t_end)) != sizeof(t_end))
		_exit(1);
	if (t_end > mono_ns() + 120 * NSEC)
		t_end = mono_ns() + 120 * NSEC;
	c0 = cpu_ns();
	if (!r.ret)
		r.ret = scale_loop(&c, t_end, &r.ops);
	r.t_done = mono_ns();
	r.cpu = cpu_ns() - c0;
	if (r.ret)
		r.ops = 0;
	if (write(res, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	if (dev) {
		scale_teardown(&c);
		spyre_device_close(dev);
	}
	_exit(r.ret ? 1 : 0);
}

/*
 * Run @kind in @n processes (each its own device file: its own context
 * and queue), each set up first, then all working for @secs seconds
 * from a common start; *@rate gets the aggregate operations per second
 * of that window (from the start to the last process's last completion:
 * set-up, teardown and process exit are not in it), *@cpu the CPU time
 * of the processes in the window per second of it (1.0: one CPU).
 */
static int scale_run(unsigned int card, int kind, int n, double secs,
		     double *rate, double *cpu)
{
	int ready[2], go[2], res[2], ret = 0;
	pid_t pid[SCALE_MAX_PROCS];
	int64_t t0, t1, t_last, cpu_total = 0;
	uint64_t total = 0;

	if (pipe(ready))
		return -errno;
	if (pipe(go)) {
		ret = -errno;
		close(ready[0]);
		close(ready[1]);
		return ret;
	}
	if (pipe(res)) {
		ret = -errno;
		close(ready[0]);
		close(ready[1]);
		close(go[0]);
		close(go[1]);
		return ret;
	}
	for (int i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			ret = -errno;
			n = i;
			break;
		}
		if (!pid[i]) {
			close(ready[0]);
			close(go[1]);
			close(res[0]);
			scale_child(card, kind, ready[1], go[0], res[1]);
		}
	}
	close(ready[1]);
	close(go[0]);
	close(res[1]);
	for (int i = 0; i < n; i++) {
		int32_t r;

		if (read(ready[0], &r, sizeof(r)) != sizeof(r))
			ret = ret ? ret : -EIO;
		else if (r)
			ret = ret ? ret : r;
	}
	t0 = mono_ns();
	t1 = t0 + (int64_t)(secs * 1e9);
	t_last = t0;
	for (int i = 0; i < n; i++)
		if (write(go[1], &t1, sizeof(t1)) != sizeof(t1))
			ret = -EIO;
	for (int i = 0; i < n; i++) {
		struct scale_res r;

		if (read(res[0], &r, sizeof(r)) == sizeof(r)) {
			total += r.ops;
			cpu_total += r.cpu;
			if (r.t_done > t_last)
				t_last = r.t_done;
			if (r.ret)
				ret = ret ? ret : r.ret;
		} else {
			ret = ret ? ret : -EIO;
		}
	}
	for (int i = 0; i < n; i++) {
		int st;

		if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			ret = ret ? ret : -EIO;
	}
	close(ready[0]);
	close(go[1]);
	close(res[0]);
	if (t_last <= t0)
		return ret ? ret : -EIO;
	*rate = (double)total / ((double)(t_last - t0) / 1e9);
	*cpu = (double)cpu_total / (double)(t_last - t0);
	return ret;
}

/*
 * (viii) scaling: N = 1, 2, 4, 8 processes for about @secs each doing NOP
 * jobs, 256^3 GEMMs or 1 MiB copies; aggregate throughput against N = 1
 * (goal >= 0.9x at every N), and the processes' CPU use at each N.
 */
static int bench_scale(unsigned int card, double secs, int gemm_ok)
{
	static const int procs[] = { 1, 2, 4, 8 };
	static const double unit[SCALE_KINDS] = {
		1e-3, 2.0 * SCALE_GEMM_DIM * SCALE_GEMM_DIM * SCALE_GEMM_DIM / 1e9,
		(double)SCALE_COPY / 1e9,
	};
	static const char *const unit_name[SCALE_KINDS] = {
		"k jobs/s", "GFLOPS", "GB/s",
	};
	int nrep = reps < 3 ? reps : 3, rc = 0;
	char b1[48], b2[48], name[64];

	printf("\n== scaling: N processes, each its own context and queue, "
	       "%.1f s each, aggregate throughput (wall clock; median "
	       "[min-max] of %d runs)\n", secs, nrep);
	for (int k = 0; k < SCALE_KINDS; k++) {
		struct fig f[4] = { 0 }, cpu[4] = { 0 };

		if (k == SCALE_GEMM && !gemm_ok)
			continue;
		printf("   %s, %s:\n", scale_name[k], unit_name[k]);
		for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
			for (int r = 0; r < nrep; r++) {
				double rate = 0, c = 0;
				int ret = scale_run(card, k, procs[i], secs,
						    &rate, &c);

				if (ret) {
					printf("       N=%d: %s\n", procs[i],
					       spyre_strerror(ret));
					rc = 1;
					break;
				}
				fig_add(&f[i], rate * unit[k]);
				fig_add(&cpu[i], c);
			}
			if (!f[i].n)
				continue;
			printf("       N=%d: %-26s -> %.2fx N=1", procs[i],
			       fig_str(b1, sizeof(b1), &f[i], 1, 2),
			       f[0].n ? fig_med(&f[i]) / fig_med(&f[0]) : 0);
			printf(" (CPU use %s %% of one CPU)\n",
			       fig_str(b2, sizeof(b2), &cpu[i], 100, 0));
			if (i) {
				snprintf(name, sizeof(name),
					 "(viii) %s, N=%d", k == SCALE_NOP ?
					 "NOP jobs" : k == SCALE_GEMM ?
					 "GEMM 256^3" : "COPY 1MiB", procs[i]);
				summary_add(name, &f[i], 1, 2, unit_name[k],
					    "the same at N=1", &f[0], "wall",
					    0.9, 0);
			}
		}
	}
	return rc;
}

static int bench_exec(struct spyre_device *dev, unsigned int card,
		      double secs, int iters)
{
	int rc = bench_dispatch(dev, secs);
	int probe = gemm_probe(card), gemm_ok = !probe;

	if (probe && probe != -ENOTSUP) {
		printf("\n   GEMM probe failed: %s\n", spyre_strerror(probe));
		rc = 1;
	}
	rc |= bench_priority(card, secs, gemm_ok);
	rc |= bench_gemm(card, iters, gemm_ok);
	rc |= bench_vec(dev);
	rc |= bench_kernel(dev);
	rc |= bench_scale(card, secs, gemm_ok);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-bench [--card N] [--time SEC] [--size MIB] "
		"[--iters N] [--reps N]\n"
		"                   [--ceilings FILE] [--threads N] "
		"[--host-memcpy GBPS] [--host-sgemm GFLOPS]\n"
		"                   [--only mem|exec|vec|gemm|scale|load|kernel] "
		"[--rate JOBS] [--json]\n"
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
	OPT_CARD = 256, OPT_TIME, OPT_SIZE, OPT_ITERS, OPT_REPS, OPT_CEILINGS,
	OPT_HOST_MEMCPY, OPT_HOST_SGEMM, OPT_THREADS, OPT_ONLY, OPT_HOST,
	OPT_JSON, OPT_RATE,
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "card", required_argument, NULL, OPT_CARD },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "reps", required_argument, NULL, OPT_REPS },
		{ "ceilings", required_argument, NULL, OPT_CEILINGS },
		{ "host-memcpy", required_argument, NULL, OPT_HOST_MEMCPY },
		{ "host-sgemm", required_argument, NULL, OPT_HOST_SGEMM },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "host-sgemm-threads", required_argument, NULL, OPT_THREADS },
		{ "only", required_argument, NULL, OPT_ONLY },
		{ "host", no_argument, NULL, OPT_HOST },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct spyre_device *dev;
	struct spyre_device_info info;
	unsigned int card = 0;
	double secs = 0.5, host_gbps = 0, host_gflops = 0, rate = 0;
	int threads = 0;
	uint64_t size = 64 * MiB, v;
	int iters = 3, host = 0, ret, rc = 0, opt;
	int do_mem = 1, do_exec = 1;
	bool ok = true, json = false;
	FILE *json_out = NULL;

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
		case OPT_REPS:
			ok = parse_uint("reps", optarg, 1, MAX_REPS, &v);
			reps = (int)v;
			break;
		case OPT_CEILINGS:
			ok = load_ceilings(optarg);
			break;
		case OPT_HOST_MEMCPY:
			ok = parse_num("host-memcpy", optarg, 0, 1e5, &host_gbps);
			break;
		case OPT_HOST_SGEMM:
			ok = parse_num("host-sgemm", optarg, 0, 1e7,
				       &host_gflops);
			break;
		case OPT_THREADS:
			ok = parse_uint("threads", optarg, 1, 4096, &v);
			threads = (int)v;
			break;
		case OPT_ONLY:
			if (!strcmp(optarg, "mem")) {
				do_exec = 0;
			} else if (!strcmp(optarg, "exec")) {
				do_mem = 0;
			} else if (!strcmp(optarg, "scale")) {
				do_mem = 0;
				do_exec = 2;
			} else if (!strcmp(optarg, "vec")) {
				do_mem = 0;
				do_exec = 3;
			} else if (!strcmp(optarg, "gemm")) {
				do_mem = 0;
				do_exec = 4;
			} else if (!strcmp(optarg, "load")) {
				do_mem = 0;
				do_exec = 5;
			} else if (!strcmp(optarg, "kernel")) {
				do_mem = 0;
				do_exec = 6;
			} else {
				fprintf(stderr, "spyre-bench: --only: '%s' is "
					"not mem, exec, vec, gemm, scale, load "
					"or kernel\n", optarg);
				ok = false;
			}
			break;
		case OPT_HOST:
			host = 1;
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_RATE:
			ok = parse_num("rate", optarg, 0, 1e5, &rate);
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
	if (ok && rate > 0 && do_exec != 5) {
		fprintf(stderr, "spyre-bench: --rate is for --only load\n");
		ok = false;
	}
	if (!ok) {
		usage(stderr);
		return 2;
	}
	/* Values given on the command line override the --ceilings file. */
	if (threads)
		ceil_threads = threads;
	if (host_gbps > 0 || host_gflops > 0) {
		char key[32];

		snprintf(key, sizeof(key), "memcpy-%dt", ceil_threads);
		if (host_gbps > 0)
			ceil_given(key, host_gbps);
		snprintf(key, sizeof(key), "sgemm-%dt", ceil_threads);
		if (host_gflops > 0)
			ceil_given(key, host_gflops);
	}
	if (host) {
		printf("host-memcpy-gbps %.3f\n", memcpy_gbps(size, 20));
		return 0;
	}

	if (json) {
		/* the JSON alone on stdout, the text report on stderr */
		int fd = dup(STDOUT_FILENO);

		fflush(stdout);
		if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 ||
		    !(json_out = fdopen(fd, "w")))
			return fail("--json: stdout", -errno);
	}
	ret = spyre_device_open(card, &dev);
	if (ret)
		return fail("open", ret);
	spyre_device_get_info(dev, &info);
	printf("spyre-bench %s: card %u (%s), %d card(s) visible\n",
	       spyre_version(), card, info.desc.pci_addr, spyre_device_count());
	if (do_mem) {
		rc |= bench_cycles(dev, secs);
		rc |= bench_copies(dev, size, iters);
	}
	if (do_exec == 2)
		rc |= bench_scale(card, secs, !gemm_probe(card));
	else if (do_exec == 3)
		rc |= bench_vec(dev);
	else if (do_exec == 4)
		rc |= bench_gemm(card, iters, !gemm_probe(card));
	else if (do_exec == 5)
		rc |= bench_load(dev, secs, rate);
	else if (do_exec == 6)
		rc |= bench_kernel(dev);
	else if (do_exec)
		rc |= bench_exec(dev, card, secs, iters);
	summary_print();
	if (json_out) {
		summary_json(json_out, info.desc.pci_addr);
		if (fclose(json_out))
			rc |= fail("--json: stdout", -errno);
	}
	spyre_device_close(dev);
	return rc;
}
