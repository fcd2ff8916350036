// SPDX-License-Identifier: MIT
/*
 * spyre_exec_order: ordering between queues, checked with device
 * TIMESTAMPs and data dependencies (never with timings):
 *  - a job waiting on another queue's (or another file's, or another
 *    card's) timeline point does not start before that job has ended,
 *    even when its own queue has the higher priority and the other job is
 *    held back by a SEM_WAIT;
 *  - a chain of 1000 jobs spread over 4 queues, each copying the previous
 *    job's value and adding 1, waiting on the previous job's timeline
 *    point, ends with the right value in every slot;
 *  - SEM_WAIT / SEM_SIGNAL hand work back and forth between two queues (of
 *    one file, and of two processes sharing the semaphore through a
 *    dma-buf), and their store/add/compare semantics;
 *  - queues stuck in SEM_WAIT delay neither another queue of their file nor
 *    another process; released from the CPU through a mapping they
 *    complete; left alone, the driver's job timeout (module parameter
 *    job_timeout_ms) ends it with -ETIMEDOUT, the context turns sticky
 *    (-ETIMEDOUT, later submits -ECANCELED) and other files carry on;
 *  - QUEUE_DESTROY ends stuck, queued and still-waiting jobs with an error
 *    without running them, and leaves the context usable.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MS 1000000ull

static uint64_t rd64(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_SEQ_CST);
}

static void wr64(void *p, uint64_t v)
{
	__atomic_store_n((uint64_t *)p, v, __ATOMIC_SEQ_CST);
}

FIXTURE(order) {
	struct st_ctx x;
	uint32_t q2;
};

FIXTURE_SETUP(order)
{
	ST_OPEN(&self->x, 0, DRM_SPYRE_PRIORITY_LOW);
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_HIGH,
				  &self->q2));
}

FIXTURE_TEARDOWN(order)
{
	st_close(&self->x);
}

/*
 * Job A (queue qa, low priority): SEM_WAIT(gate >= k), TIMESTAMP t0, FILL
 * 4 MiB with v, TIMESTAMP t1; signals timeline T:k.  Job B (high priority,
 * on q2 or on a queue of a second file): waits T:k, TIMESTAMP t2, COPY the
 * 4 MiB (same file only), TIMESTAMP t3.  B must still be pending with t2
 * unwritten while A is held; after the CPU opens the gate, t1 <= t2 and
 * the copy holds v.
 */
TEST_F_TIMEOUT(order, timeline_wait_never_starts_early, 120)
{
	const uint64_t size = 4u << 20;
	struct st_buf gate, data, copy, ts, ts2;
	struct st_ctx y;
	uint32_t tl, tl2;
	int dfd;

	ASSERT_EQ(0, st_open(&y, 0, DRM_SPYRE_PRIORITY_HIGH));
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&self->x, size, &data));
	ASSERT_EQ(0, st_buf_new(&self->x, size, &copy));
	ASSERT_EQ(0, st_buf_new(&self->x, 64, &ts));
	ASSERT_EQ(0, st_buf_new(&y, 64, &ts2));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &tl));
	/* the same timeline, imported into the second file */
	ASSERT_EQ(0, drmSyncobjHandleToFD(self->x.fd, tl, &dfd));
	ASSERT_EQ(0, drmSyncobjFDToHandle(y.fd, dfd, &tl2));
	close(dfd);

	for (uint64_t k = 1; k <= 4; k++) {
		bool other_file = k % 2 == 0;
		uint64_t v = 0x0dd0000000000000ull + k * 0x10001;
		struct drm_spyre_sync in = { .handle = other_file ? tl2 : tl,
					     .point = k };
		struct st_cs *a = calloc(1, sizeof(*a));
		struct st_cs *b = calloc(1, sizeof(*b));
		const uint8_t *tsp = other_file ? ts2.p : ts.p;
		uint64_t t0, t1, t2, t3;

		ASSERT_NE(NULL, a);
		ASSERT_NE(NULL, b);
		memset(ts.p, 0, 64);
		memset(ts2.p, 0, 64);
		memset(copy.p, 0, size);
		st_cs_sem(a, false, 0, gate.va, k);
		st_cs_timestamp(a, ts.va);
		st_cs_fill(a, data.va, size / 8, 8, v);
		st_cs_timestamp(a, ts.va + 8);
		if (other_file) {
			st_cs_timestamp(b, ts2.va + 16);
			st_cs_timestamp(b, ts2.va + 24);
		} else {
			st_cs_timestamp(b, ts.va + 16);
			st_cs_bytes(b, copy.va, data.va, size);
			st_cs_timestamp(b, ts.va + 24);
		}
		ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, a, NULL, 0, tl,
					  k));
		if (other_file) {
			ASSERT_EQ(0, st_submit_cs(&y, y.qid, b, &in, 1, y.sync,
						  0));
		} else {
			ASSERT_EQ(0, st_submit_cs(&self->x, self->q2, b, &in, 1,
						  self->x.sync, 0));
		}
		/* A is held by its gate: B cannot have run */
		EXPECT_EQ(-ETIME, st_sync_wait(other_file ? y.fd :
					       self->x.fd, other_file ?
					       y.sync : self->x.sync,
					       200 * MS));
		EXPECT_EQ(0, rd64(tsp + 16));
		EXPECT_EQ(0, rd64(ts.p));
		wr64(gate.p, k);	/* release A from the CPU */
		ASSERT_EQ(0, st_wait_status(other_file ? y.fd : self->x.fd,
					    other_file ? y.sync : self->x.sync,
					    ST_TIMEOUT_NS));
		t0 = rd64(ts.p);
		t1 = rd64(ts.p + 8);
		t2 = rd64(tsp + 16);
		t3 = rd64(tsp + 24);
		EXPECT_LT(0, t0);
		EXPECT_LE(t0, t1);
		EXPECT_LE(t1, t2) TH_LOG("k %llu: B started at %llu, A ended at %llu",
					 (unsigned long long)k,
					 (unsigned long long)t2,
					 (unsigned long long)t1);
		EXPECT_LE(t2, t3);
		for (uint64_t i = 0; !other_file && i < size; i += 8) {
			ASSERT_EQ(v, rd64(copy.p + i))
				TH_LOG("k %llu offset %llu",
				       (unsigned long long)k,
				       (unsigned long long)i);
		}
		self->x.cmd_off = 0;
		y.cmd_off = 0;
		free(a);
		free(b);
	}
	EXPECT_EQ(0, st_ctx_error(self->x.fd));
	EXPECT_EQ(0, st_ctx_error(y.fd));
	st_close(&y);
}

/*
 * The same across two cards: a job on card 1 waits on a timeline point of
 * a card-0 job (the syncobj shared between the files) and copies what that
 * job wrote into a system BO shared through a dma-buf.
 */
TEST_F_TIMEOUT(order, timeline_wait_across_cards, 60)
{
	const uint64_t size = 1u << 20;
	struct drm_spyre_bo_info info;
	struct st_buf gate, data, out;
	struct st_cs *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct drm_spyre_sync in;
	struct st_ctx y;
	uint32_t tl, tl2, h;
	int ret = st_open(&y, 1, DRM_SPYRE_PRIORITY_HIGH);
	int dfd;

	if (ret == -ENODEV)
		SKIP(return, "one card only");
	ASSERT_EQ(0, ret);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&self->x, size, &data));
	ASSERT_EQ(0, st_buf_new(&y, size, &out));
	ASSERT_EQ(0, drmPrimeHandleToFD(self->x.fd, data.h, DRM_CLOEXEC |
					DRM_RDWR, &dfd));
	ASSERT_EQ(0, drmPrimeFDToHandle(y.fd, dfd, &h));
	close(dfd);
	ASSERT_EQ(0, st_bo_get_info(y.fd, h, &info));
	y.handles[1 + y.nbos] = h;	/* listed by y's jobs */
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &tl));
	ASSERT_EQ(0, drmSyncobjHandleToFD(self->x.fd, tl, &dfd));
	ASSERT_EQ(0, drmSyncobjFDToHandle(y.fd, dfd, &tl2));
	close(dfd);

	st_cs_sem(a, false, 0, gate.va, 1);
	st_cs_fill(a, data.va, size / 8, 8, 0xc0ffee0000c0ffeeull);
	st_cs_bytes(b, out.va, info.va, size);
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, a, NULL, 0, tl, 1));
	in = (struct drm_spyre_sync){ .handle = tl2, .point = 1 };
	{
		uint64_t va;

		ASSERT_EQ(0, st_cs_put(&y, b, &va));
		ASSERT_EQ(0, st_submit_job(y.fd, y.qid, va, b->len,
					   y.handles, y.nbos + 2, &in, 1,
					   y.sync, 0, NULL));
	}
	EXPECT_EQ(-ETIME, st_sync_wait(y.fd, y.sync, 200 * MS));
	wr64(gate.p, 1);
	ASSERT_EQ(0, st_wait_status(y.fd, y.sync, ST_TIMEOUT_NS));
	for (uint64_t i = 0; i < size; i += 8) {
		ASSERT_EQ(0xc0ffee0000c0ffeeull, rd64(out.p + i))
			TH_LOG("offset %llu", (unsigned long long)i);
	}
	EXPECT_EQ(0, st_ctx_error(self->x.fd));
	EXPECT_EQ(0, st_ctx_error(y.fd));
	st_close(&y);
	free(a);
	free(b);
}

/*
 * 1000 jobs round-robin over 4 queues; job i waits on timeline point i
 * (job i-1) and signals i+1; it copies slot i to slot i+1 and adds 1 with
 * SEM_SIGNAL ADD.  A job that ran early copies a 0 and breaks the chain.
 */
TEST_F_TIMEOUT(order, chain_1000_jobs_4_queues, 180)
{
	enum { N = 1000, NQ = 4 };
	const uint64_t base = 0x1234567800000000ull;
	uint32_t q[NQ] = { self->x.qid, self->q2 }, tl;
	struct st_buf slots;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint64_t point = 0;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_NORMAL,
				  &q[2]));
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_HIGH,
				  &q[3]));
	ASSERT_EQ(0, st_buf_new(&self->x, 8 * (N + 1), &slots));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &tl));
	wr64(slots.p, base);

	for (uint64_t i = 0; i < N; i++) {
		struct drm_spyre_sync in = { .handle = tl, .point = i };

		st_cs_reset(cs);
		st_cs_bytes(cs, slots.va + 8 * (i + 1), slots.va + 8 * i, 8);
		st_cs_sem(cs, true, SPYRE_SEM_F_ADD, slots.va + 8 * (i + 1), 1);
		ASSERT_EQ(0, st_submit_cs(&self->x, q[i % NQ], cs, &in,
					  i ? 1 : 0, tl, i + 1))
			TH_LOG("job %llu", (unsigned long long)i);
	}
	ASSERT_EQ(0, st_timeline_wait(self->x.fd, tl, N,
				      6 * ST_TIMEOUT_NS));
	ASSERT_EQ(0, drmSyncobjQuery(self->x.fd, &tl, &point, 1));
	EXPECT_EQ(N, point);
	for (uint64_t i = 0; i <= N; i++) {
		ASSERT_EQ(base + i, rd64(slots.p + 8 * i))
			TH_LOG("slot %llu", (unsigned long long)i);
	}
	EXPECT_EQ(0, st_ctx_error(self->x.fd));
	free(cs);
}

/*
 * Ping-pong of @rounds between two streams on semaphore @s (VA sva):
 * side 0 waits s >= 2r, side 1 waits s >= 2r+1; each copies the previous
 * slot, adds 1 and stores the next semaphore value.
 */
static void pingpong_stream(struct st_cs *cs, int side, uint64_t sva,
			    uint64_t xva, unsigned int rounds)
{
	for (uint64_t r = 0; r < rounds; r++) {
		uint64_t i = 2 * r + side;

		st_cs_sem(cs, false, 0, sva, i);
		st_cs_bytes(cs, xva + 8 * (i + 1), xva + 8 * i, 8);
		st_cs_sem(cs, true, SPYRE_SEM_F_ADD, xva + 8 * (i + 1), 1);
		st_cs_sem(cs, true, 0, sva, i + 1);
	}
}

TEST_F_TIMEOUT(order, sem_pingpong_two_queues, 120)
{
	enum { R = 64 };
	struct st_buf sem, slots;
	struct st_cs *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	uint32_t sb;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &sb));
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &sem));
	ASSERT_EQ(0, st_buf_new(&self->x, 8 * (2 * R + 1), &slots));
	wr64(slots.p, 1000);
	pingpong_stream(a, 0, sem.va, slots.va, R);
	pingpong_stream(b, 1, sem.va, slots.va, R);
	/* the waiting side first */
	ASSERT_EQ(0, st_submit_cs(&self->x, self->q2, b, NULL, 0, sb, 0));
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, a, NULL, 0,
				  self->x.sync, 0));
	EXPECT_EQ(0, st_wait_status(self->x.fd, self->x.sync,
				    ST_TIMEOUT_NS));
	EXPECT_EQ(0, st_wait_status(self->x.fd, sb, ST_TIMEOUT_NS));
	EXPECT_EQ(2 * R, rd64(sem.p));
	for (uint64_t i = 0; i <= 2 * R; i++) {
		ASSERT_EQ(1000 + i, rd64(slots.p + 8 * i))
			TH_LOG("slot %llu", (unsigned long long)i);
	}
	free(a);
	free(b);
}

/* The same between two processes: the semaphore page is a dma-buf. */
TEST_F_TIMEOUT(order, sem_pingpong_two_processes, 120)
{
	enum { R = 32 };
	struct st_buf sh;
	struct st_cs *a = calloc(1, sizeof(*a));
	int dfd, status;
	pid_t pid;

	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, st_buf_new(&self->x, PAGE, &sh));	/* sem + slots */
	ASSERT_EQ(0, drmPrimeHandleToFD(self->x.fd, sh.h, DRM_CLOEXEC |
					DRM_RDWR, &dfd));
	wr64(sh.p + 8, 500);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct drm_spyre_bo_info info;
		struct st_ctx y;
		struct st_cs *b = calloc(1, sizeof(*b));
		uint32_t h;

		if (!b || st_open(&y, 0, DRM_SPYRE_PRIORITY_NORMAL))
			_exit(10);
		if (drmPrimeFDToHandle(y.fd, dfd, &h) ||
		    st_bo_get_info(y.fd, h, &info))
			_exit(11);
		y.handles[1] = h;
		y.nbos = 1;	/* listed, not owned by y.bos */
		pingpong_stream(b, 1, info.va, info.va + 8, R);
		if (st_submit_cs(&y, y.qid, b, NULL, 0, y.sync, 0))
			_exit(12);
		if (st_wait_status(y.fd, y.sync, ST_TIMEOUT_NS))
			_exit(13);
		_exit(0);
	}
	close(dfd);
	pingpong_stream(a, 0, sh.va, sh.va + 8, R);
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, a, NULL, 0,
				  self->x.sync, 0));
	EXPECT_EQ(0, st_wait_status(self->x.fd, self->x.sync,
				    ST_TIMEOUT_NS));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(2 * R, rd64(sh.p));
	for (uint64_t i = 0; i <= 2 * R; i++) {
		ASSERT_EQ(500 + i, rd64(sh.p + 8 + 8 * i))
			TH_LOG("slot %llu", (unsigned long long)i);
	}
	free(a);
}

/* SEM_WAIT compares >= (unsigned 64-bit); SEM_SIGNAL stores or adds. */
TEST_F(order, sem_semantics)
{
	struct st_buf s;
	struct st_cs *cs = calloc(1, sizeof(*cs));

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, st_buf_new(&self->x, 64, &s));
	wr64(s.p, 10);
	wr64(s.p + 8, 0xfffffffffffffff0ull);
	st_cs_sem(cs, false, 0, s.va, 5);			/* 10 >= 5 */
	st_cs_sem(cs, false, 0, s.va, 10);		/* 10 >= 10 */
	st_cs_sem(cs, false, 0, s.va + 8, 0x8000000000000000ull); /* unsigned */
	st_cs_sem(cs, true, SPYRE_SEM_F_ADD, s.va, 7);		/* 17 */
	st_cs_sem(cs, true, SPYRE_SEM_F_ADD, s.va + 8, 0x20);	/* wraps: 0x10 */
	st_cs_sem(cs, true, 0, s.va + 16, 0xdeadbeefcafef00dull);	/* store */
	st_cs_sem(cs, true, SPYRE_SEM_F_ADD, s.va + 24, ~0ull);	/* 0 - 1 */
	st_cs_sem(cs, true, 0, s.va + 32, 3);
	st_cs_sem(cs, true, 0, s.va + 32, 2);			/* overwrite */
	ASSERT_EQ(0, st_run(&self->x, cs));
	EXPECT_EQ(17, rd64(s.p));
	EXPECT_EQ(0x10, rd64(s.p + 8));
	EXPECT_EQ(0xdeadbeefcafef00dull, rd64(s.p + 16));
	EXPECT_EQ(~0ull, rd64(s.p + 24));
	EXPECT_EQ(2, rd64(s.p + 32));
	EXPECT_EQ(0, rd64(s.p + 40));
	free(cs);
}

/* FILL + COPY of @words words with a value; 0 if the copy is right. */
static int fill_copy_check(struct st_ctx *y, const struct st_buf *src,
			   const struct st_buf *dst, uint64_t words, uint64_t v)
{
	struct st_cs *cs = calloc(1, sizeof(*cs));
	int ret;

	if (!cs)
		return -ENOMEM;
	memset(dst->p, 0, words * 8);
	st_cs_fill(cs, src->va, words, 8, v);
	st_cs_bytes(cs, dst->va, src->va, words * 8);
	ret = st_run(y, cs);
	free(cs);
	if (ret)
		return ret;
	for (uint64_t i = 0; i < words; i++)
		if (rd64(dst->p + 8 * i) != v)
			return -EBADMSG;
	return 0;
}

/*
 * Queues stuck in SEM_WAIT (more of them than the card has host worker
 * threads by default, the first at high priority): another queue of the
 * same file and another process complete their jobs meanwhile; then the
 * CPU releases them through the mapping and they all complete.
 */
TEST_F_TIMEOUT(order, stuck_queues_delay_nobody, 120)
{
	enum { NSTUCK = 8 };
	long long tmo = st_module_param("job_timeout_ms");
	/* release the stuck jobs well before the driver's timeout would */
	double stop = st_now() + (tmo > 0 ? (double)tmo / 1000 / 3 : 10.0);
	struct st_buf gate, mark, src, dst;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint32_t s2, q[NSTUCK] = { self->q2 }, sy[NSTUCK];
	int status;
	pid_t pid;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &s2));
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&self->x, 8 * NSTUCK, &mark));
	ASSERT_EQ(0, st_buf_new(&self->x, 64 * 1024, &src));
	ASSERT_EQ(0, st_buf_new(&self->x, 64 * 1024, &dst));
	for (int i = 0; i < NSTUCK; i++) {
		if (i) {
			ASSERT_EQ(0, st_queue_new(self->x.fd, i % 3, &q[i]));
		}
		ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &sy[i]));
		st_cs_reset(cs);
		st_cs_sem(cs, false, 0, gate.va, 1);
		st_cs_fill(cs, mark.va + 8 * i, 1, 8, 0x600d + i);
		ASSERT_EQ(0, st_submit_cs(&self->x, q[i], cs, NULL, 0, sy[i],
					  0));
	}

	/* another (low-priority) queue of the same file */
	st_cs_reset(cs);
	st_cs_fill(cs, src.va, 8192, 8, 0xabc);
	st_cs_bytes(cs, dst.va, src.va, 65536);
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, cs, NULL, 0, s2, 0));
	EXPECT_EQ(0, st_wait_status(self->x.fd, s2, ST_TIMEOUT_NS));
	EXPECT_EQ(0xabc, rd64(dst.p + 65528));

	/* another process */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct st_ctx y;
		struct st_buf a, b;

		if (st_open(&y, 0, DRM_SPYRE_PRIORITY_LOW) ||
		    st_buf_new(&y, 32768, &a) || st_buf_new(&y, 32768, &b))
			_exit(10);
		/* 16 jobs, or at least 2 if time runs short */
		for (uint64_t i = 0; i < 16 && (i < 2 || st_now() < stop); i++)
			if (fill_copy_check(&y, &a, &b, 4096, i * 77 + 1))
				_exit(11 + (int)i);
		_exit(st_ctx_error(y.fd) ? 40 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));

	/* all of that ran while the queues were stuck */
	for (int i = 0; i < NSTUCK; i++) {
		EXPECT_EQ(0, st_sync_status(self->x.fd, sy[i]))
			TH_LOG("stuck queue %d", i);
		EXPECT_EQ(0, rd64(mark.p + 8 * i));
	}
	wr64(gate.p, 1);
	for (int i = 0; i < NSTUCK; i++) {
		EXPECT_EQ(0, st_wait_status(self->x.fd, sy[i],
					    ST_TIMEOUT_NS))
			TH_LOG("stuck queue %d", i);
		EXPECT_EQ(0x600d + i, rd64(mark.p + 8 * i));
	}
	EXPECT_EQ(0, st_ctx_error(self->x.fd));
	free(cs);
}

/*
 * QUEUE_DESTROY with a job stuck in SEM_WAIT and one queued behind it, and
 * on another destroyed queue a job still waiting for an in-fence: every
 * fence signals with an error (-ECANCELED for the jobs the queue had),
 * none of the jobs runs, and destroying its own queues does not put the
 * context in error.
 */
TEST_F_TIMEOUT(order, queue_destroy_cancels_stuck_and_waiting_jobs, 60)
{
	struct st_buf gate, mark;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	uint32_t qd, qw, qs, s1, s2, s3, tl;
	struct drm_spyre_sync in;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_NORMAL,
				  &qd));
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_NORMAL,
				  &qw));
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_NORMAL,
				  &qs));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &s1));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &s2));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &s3));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &tl));
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&self->x, 32, &mark));

	/* qd: stuck job, and one behind it */
	st_cs_sem(cs, false, 0, gate.va, 1);
	st_cs_fill(cs, mark.va, 1, 8, 1);
	ASSERT_EQ(0, st_submit_cs(&self->x, qd, cs, NULL, 0, s1, 0));
	st_cs_reset(cs);
	st_cs_fill(cs, mark.va + 8, 1, 8, 2);
	ASSERT_EQ(0, st_submit_cs(&self->x, qd, cs, NULL, 0, s2, 0));
	/* qs: stuck too (point 1 of tl); qw: a job waiting for it */
	st_cs_reset(cs);
	st_cs_sem(cs, false, 0, gate.va, 1);
	ASSERT_EQ(0, st_submit_cs(&self->x, qs, cs, NULL, 0, tl, 1));
	in = (struct drm_spyre_sync){ .handle = tl, .point = 1 };
	st_cs_reset(cs);
	st_cs_fill(cs, mark.va + 16, 1, 8, 3);
	ASSERT_EQ(0, st_submit_cs(&self->x, qw, cs, &in, 1, s3, 0));

	ASSERT_EQ(0, st_queue_del(self->x.fd, qd));
	EXPECT_EQ(-ECANCELED, st_wait_status(self->x.fd, s1,
					     ST_TIMEOUT_NS));
	/* on the ring (-ECANCELED), or still in the scheduler (-ESRCH) */
	{
		int ret = st_wait_status(self->x.fd, s2, ST_TIMEOUT_NS);

		EXPECT_TRUE(ret == -ECANCELED || ret == -ESRCH);
	}
	ASSERT_EQ(0, st_queue_del(self->x.fd, qw));
	/* qw's job signals once its in-fence has: open the gate */
	wr64(gate.p, 1);
	EXPECT_EQ(0, st_timeline_wait(self->x.fd, tl, 1,
				      ST_TIMEOUT_NS));
	/*
	 * The uapi only says "cancelled"; the scheduler kills a job whose
	 * entity is gone with -ESRCH (driver/spyre_queue.c,
	 * spyre_queue_destroy()).  Any error will do, as long as it did
	 * not run.
	 */
	{
		int ret = st_wait_status(self->x.fd, s3, ST_TIMEOUT_NS);

		EXPECT_GT(0, ret);
		EXPECT_NE(-ETIME, ret);
	}
	EXPECT_EQ(0, rd64(mark.p));
	EXPECT_EQ(0, rd64(mark.p + 8));
	EXPECT_EQ(0, rd64(mark.p + 16));
	EXPECT_EQ(0, st_ctx_error(self->x.fd));
	/* the context still works */
	st_cs_reset(cs);
	st_cs_fill(cs, mark.va + 24, 1, 8, 4);
	EXPECT_EQ(0, st_run(&self->x, cs));
	EXPECT_EQ(4, rd64(mark.p + 24));
	free(cs);
}

/*
 * A job's fence outlives the queue that ran it, and the queues that take
 * its hardware queue after it: a sync_file of it still names its timeline
 * (the hardware queue's scheduler, which lives as long as the device;
 * the debug kernel's KASAN reports a use-after-free if it went with the
 * queue).
 */
TEST_F(order, fence_outlives_its_queue)
{
	struct sync_fence_info fi[2];
	struct sync_file_info info;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	struct st_buf mark;
	uint32_t q, q2, s;
	int sf;

	ASSERT_NE(NULL, cs);
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &mark));
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_NORMAL, &q));
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &s));
	st_cs_fill(cs, mark.va, 1, 8, 7);
	ASSERT_EQ(0, st_submit_cs(&self->x, q, cs, NULL, 0, s, 0));
	ASSERT_EQ(0, st_wait_status(self->x.fd, s, ST_TIMEOUT_NS));
	ASSERT_EQ(0, drmSyncobjExportSyncFile(self->x.fd, s, &sf));
	ASSERT_EQ(0, st_queue_del(self->x.fd, q));
	/* the next queue takes the same hardware queue (the lowest free) */
	ASSERT_EQ(0, st_queue_new(self->x.fd, DRM_SPYRE_PRIORITY_NORMAL, &q2));
	ASSERT_EQ(0, st_queue_del(self->x.fd, q2));

	memset(&info, 0, sizeof(info));
	memset(fi, 0, sizeof(fi));
	info.num_fences = 2;
	info.sync_fence_info = (uintptr_t)fi;
	ASSERT_EQ(0, ioctl(sf, SYNC_IOC_FILE_INFO, &info));
	close(sf);
	EXPECT_EQ(1, info.status);
	ASSERT_EQ(1, info.num_fences);
	EXPECT_STREQ("drm_sched", fi[0].driver_name);
	EXPECT_EQ(0, strncmp(fi[0].obj_name, "spyre-q", 7))
		TH_LOG("timeline \"%.32s\"", fi[0].obj_name);
	EXPECT_EQ(1, fi[0].status);
	EXPECT_EQ(7, rd64(mark.p));
	free(cs);
}

/*
 * A SEM_WAIT never satisfied ends at the job timeout (job_timeout_ms, never
 * longer: 0 and values above 60 s are refused at load): its fence ends
 * with -ETIMEDOUT no earlier than the timeout and not much later, the job
 * queued behind it with -ECANCELED, the context is sticky; another file
 * works throughout.
 */
TEST_F_TIMEOUT(order, fence_sem_wait_times_out, 90)
{
	long long waited;
	double t0;
	long long tmo = st_module_param("job_timeout_ms");
	struct st_buf gate, mark;
	struct st_cs *cs = calloc(1, sizeof(*cs));
	struct st_ctx y;
	struct st_buf ya, yb;
	uint32_t s2;

	ASSERT_NE(NULL, cs);
	if (tmo < 0)
		SKIP(return, "no /sys/module/spyre/parameters/job_timeout_ms");
	if (tmo > 30000)
		SKIP(return, "job_timeout_ms=%lld: not testing the timeout",
		     tmo);
	ASSERT_LT(0, tmo);
	ASSERT_EQ(0, drmSyncobjCreate(self->x.fd, 0, &s2));
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&self->x, 8, &mark));
	st_cs_sem(cs, false, 0, gate.va, 1);
	t0 = st_now();
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, cs, NULL, 0,
				  self->x.sync, 0));
	st_cs_reset(cs);
	st_cs_fill(cs, mark.va, 1, 8, 0xbad);
	ASSERT_EQ(0, st_submit_cs(&self->x, self->x.qid, cs, NULL, 0, s2, 0));

	ASSERT_EQ(0, st_open(&y, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&y, 4096, &ya));
	ASSERT_EQ(0, st_buf_new(&y, 4096, &yb));
	EXPECT_EQ(0, fill_copy_check(&y, &ya, &yb, 512, 0x5157));

	EXPECT_EQ(-ETIMEDOUT, st_wait_status(self->x.fd, self->x.sync,
					     (uint64_t)tmo * MS +
					     ST_TIMEOUT_NS));
	waited = (long long)((st_now() - t0) * 1e3);
	EXPECT_LE(tmo, waited);
	/* the timeout, plus the guest's slowness under TCG */
	EXPECT_GT(tmo + 5000, waited) TH_LOG("ended after %lld ms", waited);
	EXPECT_EQ(-ECANCELED, st_wait_status(self->x.fd, s2,
					     ST_TIMEOUT_NS));
	EXPECT_EQ(0, rd64(mark.p));
	EXPECT_EQ(-ETIMEDOUT, st_ctx_error(self->x.fd));
	st_cs_reset(cs);
	st_cs_fill(cs, mark.va, 1, 8, 1);
	EXPECT_EQ(-ECANCELED, st_submit_cs(&self->x, self->x.qid, cs, NULL, 0,
					   0, 0));
	/* releasing the gate now changes nothing */
	wr64(gate.p, 1);
	EXPECT_EQ(0, rd64(mark.p));
	/* the other file is fine */
	EXPECT_EQ(0, fill_copy_check(&y, &ya, &yb, 512, 0x5158));
	EXPECT_EQ(0, st_ctx_error(y.fd));
	st_close(&y);
	free(cs);
}

/* Module references of spyre.ko (/sys/module/spyre/refcnt), or -errno. */
static long long module_refcnt(void)
{
	char buf[32];
	FILE *f = fopen("/sys/module/spyre/refcnt", "re");
	long long v = -EIO;

	if (!f)
		return -errno;
	if (fgets(buf, sizeof(buf), f))
		v = strtoll(buf, NULL, 0);
	fclose(f);
	return v;
}

#define RACE_DESCS	10
#define RACE_GROUPS	10

/*
 * Run with a short job_timeout_ms (T <= 500; make test boots a guest with
 * 200 for it): one SUBMIT of RACE_DESCS jobs on one queue (one scheduler
 * job of RACE_DESCS descriptors), descriptor i waiting for gate >= i + 1
 * and then writing mark[i].  The CPU opens the gate one step every 0.2 T
 * to 0.5 T (seeded), so the job runs for several periods and every period
 * holds two steps, one of them at least 0.5 T before its end: each
 * timeout sees progress and is not a hang (unless the card takes longer
 * than 0.5 T to end a descriptor whose gate is open), and the job's last
 * descriptor ends at any phase of the timer, also just as it fires.  Every group must end
 * OK, signalled once, with every mark written and the context clean;
 * afterwards the module's reference count returns to where it was, so no
 * job (each holds its queue, each queue the module) was leaked.
 */
TEST_F_TIMEOUT(order, timeout_racing_completion, 120)
{
	long long tmo = st_module_param("job_timeout_ms");
	struct st_buf gate, mark;
	uint64_t seed = 0x7131;
	long long refs0, refs;
	struct st_ctx y;

	if (tmo < 0)
		SKIP(return, "no /sys/module/spyre/parameters/job_timeout_ms");
	if (tmo == 0 || tmo > 500)
		SKIP(return, "job_timeout_ms=%lld: needs 1..500", tmo);
	refs0 = module_refcnt();
	ASSERT_LT(0, refs0);

	ASSERT_EQ(0, st_open(&y, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&y, 8, &gate));
	ASSERT_EQ(0, st_buf_new(&y, 8 * RACE_DESCS, &mark));
	for (int g = 0; g < RACE_GROUPS; g++) {
		struct drm_spyre_job jobs[RACE_DESCS];
		struct drm_spyre_bo_ref refs_[3];
		struct drm_spyre_sync out = { .handle = y.sync };
		struct drm_spyre_submit sub = {
			.jobs = (uintptr_t)jobs,
			.job_count = RACE_DESCS,
			.job_stride = sizeof(jobs[0]),
		};
		uint32_t hs[3] = { y.cmd.h, gate.h, mark.h };

		for (int i = 0; i < 3; i++)
			refs_[i] = (struct drm_spyre_bo_ref){
				hs[i], DRM_SPYRE_BO_REF_READ |
				       DRM_SPYRE_BO_REF_WRITE };
		wr64(gate.p, 0);
		memset(mark.p, 0, mark.bytes);
		y.cmd_off = 0;
		for (int i = 0; i < RACE_DESCS; i++) {
			struct st_cs cs;
			uint64_t va;

			st_cs_reset(&cs);
			st_cs_sem(&cs, false, 0, gate.va, i + 1);
			st_cs_fill(&cs, mark.va + 8 * i, 1, 8, g * 100 + i + 1);
			ASSERT_EQ(0, st_cs_put(&y, &cs, &va));
			jobs[i] = (struct drm_spyre_job){
				.queue_id = y.qid,
				.cmd_va = va,
				.cmd_size = cs.len,
				.bo_count = 3,
				.bos = (uintptr_t)refs_,
			};
		}
		jobs[RACE_DESCS - 1].out_syncs = (uintptr_t)&out;
		jobs[RACE_DESCS - 1].out_sync_count = 1;
		ASSERT_EQ(0, st_ioctl(y.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
		for (int i = 0; i < RACE_DESCS; i++) {
			usleep((useconds_t)(tmo * 1000 *
					    (2 + st_rand(&seed) % 4) / 10));
			wr64(gate.p, i + 1);
		}
		ASSERT_EQ(0, st_wait_status(y.fd, y.sync,
					    ST_TIMEOUT_NS))
			TH_LOG("group %d", g);
		for (int i = 0; i < RACE_DESCS; i++) {
			ASSERT_EQ(g * 100 + i + 1, rd64(mark.p + 8 * i))
				TH_LOG("group %d, job %d", g, i);
		}
		ASSERT_EQ(0, st_ctx_error(y.fd));
	}
	st_close(&y);

	/* Jobs are freed after their fences signal: give them a moment. */
	for (int i = 0; i < 200; i++) {
		refs = module_refcnt();
		if (refs == refs0)
			break;
		usleep(10000);
	}
	EXPECT_EQ(refs0, refs);
}

TEST_HARNESS_MAIN
