// SPDX-License-Identifier: MIT
/*
 * spyre_exec_stress: 8 processes x 4 threads, each thread with its own
 * queue (priorities mixed), submitting for a fixed duration and checking
 * every result: FILL + COPY of a varying length with a per-job value (the
 * bytes past the length must stay 0), and, when the card has the compute
 * engine, a small fp32 GEMM checked against the fp64 reference and, now
 * and then in one thread per process, a 512 x 512 x 512 fp16 GEMM (large
 * enough for the card to split it over its cores) of the identity by a
 * random B, which must give B exactly.
 *
 * A second run adds a faulting neighbour: one more process that, for the
 * same duration, opens the card, has a job fail (MMU faults, also in a
 * GEMM split over cores, or an invalid opcode) or closes the file with a
 * GEMM in flight, checks the error and the sticky context, and starts
 * again.
 *
 * Duration: SPYRE_STRESS_SECONDS (default 30 s, as make test runs it; the
 * spyre_soak build of this file defaults to 300 s: "spyre-selftests
 * soak", make soak).
 */
#include <pthread.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#ifndef STRESS_DEFAULT_SECONDS
#define STRESS_DEFAULT_SECONDS 30
#endif

#define NPROC 8
#define NTHR 4
#define WORDS 4096
#define GM 8
#define GN 8
#define GK 16
#define BIG 512
#define BIG_EVERY 16

struct tstat {
	uint64_t iters;
	uint64_t gemms;
	int32_t err;		/* first error, 0 if none */
	uint32_t where;		/* iteration of the first error */
	char what[96];
};

struct shared {
	struct tstat t[NPROC][NTHR];
	int32_t proc_err[NPROC];
	struct tstat chaos;
};

struct worker {
	int fd;
	int proc, thr;
	bool gemm;
	double deadline;
	struct tstat *st;
};

static void fail(struct tstat *st, int err, uint64_t it, const char *what)
{
	if (st->err)
		return;
	st->err = err ? err : -EBADMSG;
	st->where = (uint32_t)it;
	snprintf(st->what, sizeof(st->what), "%s", what);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tstat *st = w->st;
	struct st_bo cmd, src, dst, ga, gb, gc, ba, bb, bc;
	double ref[GM * GN], err[GM * GN];
	uint32_t qid, sync, handles[9], nh = 6;
	bool big = w->gemm && w->thr == 0;
	uint64_t seed = 0x5eed0000 + w->proc * 16 + w->thr;
	uint64_t it;
	int ret;

	ret = st_queue_new(w->fd, (uint32_t)(w->thr % 3), &qid);
	if (ret) {
		fail(st, ret, 0, "queue create");
		return NULL;
	}
	if (drmSyncobjCreate(w->fd, 0, &sync)) {
		fail(st, -errno, 0, "syncobj");
		return NULL;
	}
	ret = st_bo_map_new(w->fd, PAGE, 0, &cmd);
	ret = ret ?: st_bo_map_new(w->fd, WORDS * 8, 0, &src);
	ret = ret ?: st_bo_map_new(w->fd, WORDS * 8, 0, &dst);
	ret = ret ?: st_bo_map_new(w->fd, PAGE, 0, &ga);
	ret = ret ?: st_bo_map_new(w->fd, PAGE, 0, &gb);
	ret = ret ?: st_bo_map_new(w->fd, PAGE, 0, &gc);
	if (ret) {
		fail(st, ret, 0, "BO create");
		return NULL;
	}
	handles[0] = cmd.h;
	handles[1] = src.h;
	handles[2] = dst.h;
	handles[3] = ga.h;
	handles[4] = gb.h;
	handles[5] = gc.h;
	memset(&ba, 0, sizeof(ba));
	memset(&bb, 0, sizeof(bb));
	memset(&bc, 0, sizeof(bc));
	if (big) {
		ret = st_bo_map_new(w->fd, BIG * BIG * 2, 0, &ba);
		ret = ret ?: st_bo_map_new(w->fd, BIG * BIG * 2, 0, &bb);
		ret = ret ?: st_bo_map_new(w->fd, BIG * BIG * 4, 0, &bc);
		if (ret) {
			fail(st, ret, 0, "big BO create");
			return NULL;
		}
		handles[nh++] = ba.h;
		handles[nh++] = bb.h;
		handles[nh++] = bc.h;
		for (int i = 0; i < BIG; i++)
			st_store(ba.map, SPYRE_DTYPE_FP16, i * BIG + i, 0x3c00);
		for (int i = 0; i < BIG * BIG; i++)
			st_store(bb.map, SPYRE_DTYPE_FP16, i,
				 st_rand_elem(&seed, SPYRE_DTYPE_FP16, -8, 2));
	}
	if (w->gemm) {
		struct spyre_ref_gemm_args g = {
			.a_dtype = SPYRE_DTYPE_FP32,
			.b_dtype = SPYRE_DTYPE_FP32,
			.c_dtype = SPYRE_DTYPE_FP32,
			.m = GM, .n = GN, .k = GK, .batch = 1,
			.a = ga.map, .b = gb.map, .lda = GK, .ldb = GN,
			.ldc = GN, .alpha = 1.0f, .scale_a = 1.0f,
			.scale_b = 1.0f,
		};

		for (int i = 0; i < GM * GK; i++)
			st_store(ga.map, SPYRE_DTYPE_FP32, i,
				 st_rand_elem(&seed, SPYRE_DTYPE_FP32, -4, 2));
		for (int i = 0; i < GK * GN; i++)
			st_store(gb.map, SPYRE_DTYPE_FP32, i,
				 st_rand_elem(&seed, SPYRE_DTYPE_FP32, -4, 2));
		if (spyre_ref_gemm(&g, ref, err, NULL, NULL)) {
			fail(st, -EINVAL, 0, "reference");
			return NULL;
		}
	}

	for (it = 0; it == 0 || st_now() < w->deadline; it++) {
		uint64_t words = 1 + st_rand(&seed) % WORDS;
		uint64_t v = st_rand(&seed) | 1;
		bool do_gemm = w->gemm && (it % 2 == 0);
		bool do_big = big && it % BIG_EVERY == BIG_EVERY - 1;
		struct st_cs cs;
		char what[96];

		st_cs_reset(&cs);
		memset(dst.map, 0, WORDS * 8);
		st_cs_fill(&cs, src.va, words, 8, v);
		st_cs_bytes(&cs, dst.va, src.va, words * 8);
		if (do_gemm) {
			memset(gc.map, 0xff, GM * GN * 4);	/* NaN */
			st_cs_gemm(&cs, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, GM,
				   GN, GK, ga.va, gb.va, gc.va);
		}
		if (do_big) {
			memset(bc.map, 0xff, BIG * BIG * 4);	/* NaN */
			st_cs_gemm(&cs, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32, BIG,
				   BIG, BIG, ba.va, bb.va, bc.va);
		}
		memcpy(cmd.map, cs.buf, cs.len);
		ret = st_submit_job(w->fd, qid, cmd.va, cs.len, handles, nh,
				    NULL, 0, sync, 0, NULL);
		if (ret) {
			fail(st, ret, it, "submit");
			break;
		}
		ret = st_wait_status(w->fd, sync, 3 * ST_TIMEOUT_NS);
		if (ret) {
			fail(st, ret, it, "job");
			break;
		}
		for (uint64_t i = 0; i < WORDS; i++) {
			uint64_t got;

			memcpy(&got, dst.map + 8 * i, 8);
			if (got != (i < words ? v : 0)) {
				snprintf(what, sizeof(what),
					 "copy word %llu of %llu: %#llx",
					 (unsigned long long)i,
					 (unsigned long long)words,
					 (unsigned long long)got);
				fail(st, 0, it, what);
				break;
			}
		}
		if (do_gemm) {
			int64_t bad = spyre_ref_compare(gc.map,
							SPYRE_DTYPE_FP32, ref,
							err, GM * GN, NULL);

			if (bad)
				fail(st, 0, it, "small GEMM result");
			st->gemms++;
		}
		for (int i = 0; do_big && i < BIG * BIG; i++) {
			float got = st_u2f(st_load(bc.map, SPYRE_DTYPE_FP32, i));
			double want = spyre_ref_decode(SPYRE_DTYPE_FP16,
				st_load(bb.map, SPYRE_DTYPE_FP16, i));

			if (got != want) {
				snprintf(what, sizeof(what),
					 "I x B element %d: %.9g, want %.9g", i,
					 got, want);
				fail(st, 0, it, what);
				break;
			}
		}
		if (st->err)
			break;
		st->iters++;
	}
	st_bo_map_free(w->fd, &cmd);
	st_bo_map_free(w->fd, &src);
	st_bo_map_free(w->fd, &dst);
	st_bo_map_free(w->fd, &ga);
	st_bo_map_free(w->fd, &gb);
	st_bo_map_free(w->fd, &gc);
	st_bo_map_free(w->fd, &ba);
	st_bo_map_free(w->fd, &bb);
	st_bo_map_free(w->fd, &bc);
	st_queue_del(w->fd, qid);
	return NULL;
}

static int proc_main(struct shared *sh, int p, double deadline)
{
	struct drm_spyre_device_info di;
	struct worker w[NTHR];
	pthread_t th[NTHR];
	int fd = st_open_card(0);

	if (fd < 0)
		return 10;
	if (st_query_info(fd, &di))
		return 11;
	for (int t = 0; t < NTHR; t++) {
		w[t] = (struct worker){
			.fd = fd, .proc = p, .thr = t,
			.gemm = (di.caps & DRM_SPYRE_CAP_FP16) != 0,
			.deadline = deadline, .st = &sh->t[p][t],
		};
		if (pthread_create(&th[t], NULL, worker_main, &w[t]))
			return 12;
	}
	for (int t = 0; t < NTHR; t++)
		pthread_join(th[t], NULL);
	sh->proc_err[p] = st_ctx_error(fd);
	close(fd);
	return 0;
}

/*
 * The faulting neighbour: contexts that fail, again and again.  In turn:
 * a FILL running into the guard page (-EFAULT), an invalid opcode (-EIO),
 * with the compute engine a split 512^3 GEMM whose C runs into the guard
 * page (-EFAULT), and a valid split GEMM whose file is closed while it
 * runs.  Each failure must show in the fence and in QUERY_CONTEXT, and
 * the next submit must get -ECANCELED.
 */
static int chaos_main(struct shared *sh, double deadline)
{
	struct tstat *st = &sh->chaos;
	uint64_t it;

	for (it = 0; it == 0 || st_now() < deadline; it++) {
		int kind = (int)(it % 4);
		struct st_ctx x;
		struct st_buf a, b, c;
		struct st_cs cs;
		int ret, want = kind == 1 ? -EIO : -EFAULT;

		if (st_open(&x, 0, DRM_SPYRE_PRIORITY_HIGH) ||
		    st_buf_new(&x, BIG * BIG * 2, &a) ||
		    st_buf_new(&x, BIG * BIG * 2, &b) ||
		    st_buf_new(&x, BIG * BIG * 4, &c)) {
			fail(st, -ENODEV, it, "open");
			return 1;
		}
		if (kind >= 2 && !(x.di.caps & DRM_SPYRE_CAP_FP16))
			kind = 0;
		st_cs_reset(&cs);
		if (kind == 0) {
			st_cs_fill(&cs, c.va, BIG * BIG + 1, 4, 1);
		} else if (kind == 1) {
			st_cs_add(&cs, 0x7f, 0, 8);
		} else {
			st_cs_gemm(&cs, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32, BIG,
				   BIG, BIG, a.va, b.va,
				   kind == 2 ? c.va + 4 : c.va);
		}
		if (kind == 3) {
			/* close the file with the GEMM in flight */
			ret = st_submit_cs(&x, x.qid, &cs, NULL, 0, 0, 0);
			st_close(&x);
			if (ret) {
				fail(st, ret, it, "submit before close");
				return 1;
			}
			st->iters++;
			continue;
		}
		ret = st_run(&x, &cs);
		if (ret != want) {
			fail(st, ret ? ret : -EBADMSG, it, "bad job's fence");
			st_close(&x);
			return 1;
		}
		ret = st_ctx_error(x.fd);
		if (ret != want) {
			fail(st, ret ? ret : -EBADMSG, it, "context error");
			st_close(&x);
			return 1;
		}
		st_cs_reset(&cs);
		st_cs_fill(&cs, a.va, 1, 8, 1);
		ret = st_run(&x, &cs);
		if (ret != -ECANCELED) {
			fail(st, ret ? ret : -EBADMSG, it, "sticky submit");
			st_close(&x);
			return 1;
		}
		st_close(&x);
		st->iters++;
	}
	return 0;
}

FIXTURE(stress) {
	int fd;
};

FIXTURE_SETUP(stress)
{
	self->fd = st_open_card(0);
	SKIP_IF_NO_CARD(self->fd);
}

FIXTURE_TEARDOWN(stress)
{
	if (self->fd >= 0)
		close(self->fd);
}

static int stress_seconds(void)
{
	const char *e = getenv("SPYRE_STRESS_SECONDS");
	int s = e ? atoi(e) : 0;

	return s > 0 ? s : STRESS_DEFAULT_SECONDS;
}

static void run_stress(struct __test_metadata *_metadata, bool chaos)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int secs = stress_seconds();
	double deadline = st_now() + secs;
	uint64_t total = 0, gemms = 0;
	pid_t pid[NPROC], cpid = -1;

	ASSERT_NE(MAP_FAILED, sh);
	memset(sh, 0, sizeof(*sh));
	for (int p = 0; p < NPROC; p++) {
		pid[p] = fork();
		ASSERT_LE(0, pid[p]);
		if (pid[p] == 0)
			_exit(proc_main(sh, p, deadline));
	}
	if (chaos) {
		cpid = fork();
		ASSERT_LE(0, cpid);
		if (cpid == 0)
			_exit(chaos_main(sh, deadline));
	}
	for (int p = 0; p < NPROC; p++) {
		int status;

		ASSERT_EQ(pid[p], waitpid(pid[p], &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("process %d", p);
		EXPECT_EQ(0, sh->proc_err[p]) TH_LOG("process %d context", p);
		for (int t = 0; t < NTHR; t++) {
			struct tstat *st = &sh->t[p][t];

			EXPECT_EQ(0, st->err)
				TH_LOG("process %d thread %d: %s at iteration %u",
				       p, t, st->what, st->where);
			EXPECT_LT(0, st->iters)
				TH_LOG("process %d thread %d ran nothing", p,
				       t);
			total += st->iters;
			gemms += st->gemms;
		}
	}
	if (chaos) {
		int status;

		ASSERT_EQ(cpid, waitpid(cpid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status))
			TH_LOG("faulting neighbour: %s (%d) at iteration %u",
			       sh->chaos.what, sh->chaos.err, sh->chaos.where);
		EXPECT_LT(0, sh->chaos.iters);
	}
	TH_LOG("%d s: %llu jobs checked (%llu with a GEMM) by %d queues%s",
	       secs, (unsigned long long)total, (unsigned long long)gemms,
	       NPROC * NTHR, chaos ? ", next to a faulting neighbour" : "");
	if (chaos)
		TH_LOG("the neighbour failed %llu contexts",
		       (unsigned long long)sh->chaos.iters);
	munmap(sh, sizeof(*sh));
}

TEST_F_TIMEOUT(stress, procs8_threads4, 900)
{
	run_stress(_metadata, false);
}

TEST_F_TIMEOUT(stress, procs8_threads4_faulting_neighbour, 900)
{
	run_stress(_metadata, true);
}

TEST_HARNESS_MAIN
