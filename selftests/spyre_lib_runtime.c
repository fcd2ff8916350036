// SPDX-License-Identifier: MIT
/*
 * spyre_lib_runtime: libspyre's runtime on a card (every case skips when
 * no card is visible): staged host copies, peer copies, events (host and
 * cross-stream waits, timeouts, elapsed time, sync_file export/import),
 * graphs (replay, repetitions, staged launches), the asynchronous error model (sticky per
 * stream and per context, precise errors), stream batches (deferral, flush
 * points, the size limit, freeing a BO a batch names, errors at the next
 * flush), fork detection of the new
 * objects, and the compute stream operations against the fp64 reference
 * (these need a card whose CAPS include FP16).
 *
 * Runs only when named (make test: a guest of its own with two cards):
 *   scripts/vm.sh run --cards 2 -- spyre-selftests lib_runtime
 */
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xf86drm.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#include <spyre/spyre.h>
#include <spyre/spyre_ref.h>

#define T_NS		(20ull * 1000000000ull)
#define MS		(1000ull * 1000ull)

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd64(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Uniform in [-1, 1). */
static double rnd_sym(void)
{
	return (double)(rnd64() >> 11) * 0x1p-52 - 1.0;
}

FIXTURE(rt) {
	struct spyre_device *dev;
	struct spyre_device_info info;
	struct spyre_stream *s;
};

FIXTURE_SETUP(rt)
{
	int ret = st_lib_open(&self->dev, &self->info, &self->s);

	if (ret == -ENODEV)
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(rt)
{
	spyre_stream_destroy(self->s);
	spyre_device_close(self->dev);
}

#define NEED_COMPUTE() do {						\
		if (!(self->info.caps & SPYRE_DEV_CAP_FP16))		\
			SKIP(return, "card without compute (CAPS 0x%llx)", \
			     (unsigned long long)self->info.caps);	\
	} while (0)

static void *map(struct __test_metadata *_metadata, struct spyre_bo *bo)
{
	void *p = NULL;

	ASSERT_EQ(0, spyre_bo_map(bo, &p));
	return p;
}

/* ---- copies ------------------------------------------------------------ */

TEST_F(rt, staged_h2d_d2h_and_device_memory)
{
	const uint64_t size = 9 * 1024 * 1024 + 12345;	/* 3 staging chunks */
	uint8_t *src = malloc(size), *dst = malloc(size);
	struct spyre_bo *dev_bo, *sys_bo;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (uint64_t i = 0; i < size; i++)
		src[i] = (uint8_t)(rnd64() >> 56);
	memset(dst, 0xee, size);
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, size, SPYRE_BO_DEVICE,
				    &dev_bo));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, size + 4096, 0, &sys_bo));

	ASSERT_EQ(0, spyre_stream_copy_h2d(self->s, dev_bo, 0, src, size));
	memset(src, 0, 4096);		/* captured at the call: no effect */
	ASSERT_EQ(0, spyre_stream_copy(self->s, sys_bo, 7, dev_bo, 0, size));
	ASSERT_EQ(0, spyre_stream_copy_d2h(self->s, dst, sys_bo, 7, size));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	for (uint64_t i = 0; i < 4096; i++)
		src[i] = dst[i];	/* the part overwritten above */
	EXPECT_EQ(0, memcmp(src, dst, size));
	EXPECT_EQ(0, spyre_stream_query(self->s));

	/* range and argument checks happen before anything is queued */
	EXPECT_EQ(-ERANGE, spyre_stream_copy_h2d(self->s, dev_bo, 1, src,
						 spyre_bo_size(dev_bo)));
	EXPECT_EQ(-ERANGE, spyre_stream_copy_d2h(self->s, dst, sys_bo,
						 spyre_bo_size(sys_bo), 1));
	EXPECT_EQ(-EINVAL, spyre_stream_copy_h2d(self->s, dev_bo, 0, src, 0));
	EXPECT_EQ(-EINVAL, spyre_stream_copy_d2h(self->s, NULL, sys_bo, 0, 1));
	EXPECT_EQ(0, spyre_stream_error(self->s));
	spyre_bo_free(dev_bo);
	spyre_bo_free(sys_bo);
	free(src);
	free(dst);
}

TEST_F(rt, many_small_d2h_copies_are_all_delivered)
{
	struct spyre_bo *bo;
	uint32_t *p, out[600];

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, sizeof(out), 0, &bo));
	p = map(_metadata, bo);
	for (unsigned int i = 0; i < 600; i++)
		p[i] = i * 2654435761u;
	memset(out, 0, sizeof(out));
	/* > 64 KiB of staging in total: the upload ring wraps */
	for (unsigned int i = 0; i < 600; i++)
		ASSERT_EQ(0, spyre_stream_copy_d2h(self->s, &out[i], bo,
						   4 * i, 4));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	for (unsigned int i = 0; i < 600; i++) {
		ASSERT_EQ(i * 2654435761u, out[i]) TH_LOG("word %u", i);
	}
	spyre_bo_free(bo);
}

TEST_F(rt, peer_copy_between_cards)
{
	const uint64_t size = 20 * 1024 * 1024 + 100;	/* 2 bounce chunks */
	struct spyre_device *d1;
	struct spyre_stream *s1;
	struct spyre_bo *a, *b, *c;
	uint8_t *pa, *pc;

	if (spyre_device_count() < 2)
		SKIP(return, "needs two cards");
	ASSERT_EQ(0, spyre_device_open(1, &d1));
	ASSERT_EQ(0, spyre_stream_create(d1, SPYRE_PRIORITY_NORMAL, &s1));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, size, SPYRE_BO_DEVICE, &a));
	ASSERT_EQ(0, spyre_bo_alloc(d1, size, SPYRE_BO_DEVICE, &b));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, size, 0, &c));
	pc = map(_metadata, c);
	for (uint64_t i = 0; i < size; i += 8) {
		uint64_t v = rnd64();

		memcpy(pc + i, &v, size - i < 8 ? size - i : 8);
	}
	pa = malloc(size);
	ASSERT_NE(NULL, pa);
	memcpy(pa, pc, size);
	/* card 0: system -> device; then card 0 device -> card 1 device */
	ASSERT_EQ(0, spyre_stream_copy(self->s, a, 0, c, 0, size));
	ASSERT_EQ(0, spyre_stream_copy_peer(s1, b, 0, self->s, a, 0, size));
	/* back: card 1 -> card 0 system memory, ordered after the above */
	ASSERT_EQ(0, spyre_stream_fill(self->s, c, 0, size, 1, 0));
	ASSERT_EQ(0, spyre_stream_copy_peer(self->s, c, 0, s1, b, 0, size));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0, memcmp(pa, pc, size));
	EXPECT_EQ(0, spyre_stream_sync(s1, T_NS));
	/* BOs must be on their stream's device */
	EXPECT_EQ(-EXDEV, spyre_stream_copy_peer(s1, a, 0, self->s, b, 0, 8));
	free(pa);
	spyre_bo_free(a);
	spyre_bo_free(b);
	spyre_bo_free(c);
	spyre_stream_destroy(s1);
	spyre_device_close(d1);
}

TEST_F(rt, peer_copy_on_one_card_orders_streams)
{
	struct spyre_stream *s2;
	struct spyre_bo *a, *b, *sem;
	uint64_t *pb;
	volatile uint64_t *ps;
	struct spyre_cmdbuf *cb;

	ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s2));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 65536, 0, &a));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 65536, 0, &b));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &sem));
	pb = map(_metadata, b);
	ps = map(_metadata, sem);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	/* s2 is held in a SEM_WAIT, then fills a */
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 1));
	ASSERT_EQ(0, spyre_stream_submit(s2, cb, &sem, 1));
	ASSERT_EQ(0, spyre_stream_fill(s2, a, 0, 8192, 8, 0x5151));
	ASSERT_EQ(0, spyre_stream_copy_peer(self->s, b, 0, s2, a, 0, 65536));
	usleep(100 * 1000);
	EXPECT_EQ(-EBUSY, spyre_stream_query(self->s));
	ps[0] = 1;
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	for (int i = 0; i < 8192; i++)
		ASSERT_EQ(0x5151, pb[i]);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(a);
	spyre_bo_free(b);
	spyre_bo_free(sem);
	spyre_stream_destroy(s2);
}

/* ---- events ------------------------------------------------------------- */

TEST_F(rt, events_host_wait_query_timeout_and_elapsed)
{
	struct spyre_event *e0, *e1, *e2;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *sem;
	volatile uint64_t *ps;
	uint64_t t0, t1;
	int64_t dt;

	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e0));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e1));
	ASSERT_EQ(0, spyre_event_create(self->dev,
					SPYRE_EVENT_DISABLE_TIMING, &e2));
	EXPECT_EQ(-EINVAL, spyre_event_create(self->dev, 2, &e2));
	/* a new event is complete, without a timestamp */
	EXPECT_EQ(0, spyre_event_wait(e0, 0));
	EXPECT_EQ(0, spyre_event_query(e0));
	EXPECT_EQ(-ENODATA, spyre_event_timestamp(e0, &t0));

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &sem));
	ps = map(_metadata, sem);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 1));
	ASSERT_EQ(0, spyre_event_record(e0, self->s));
	ASSERT_EQ(0, spyre_stream_submit(self->s, cb, &sem, 1));
	ASSERT_EQ(0, spyre_event_record(e1, self->s));
	ASSERT_EQ(0, spyre_event_record(e2, self->s));
	EXPECT_EQ(0, spyre_event_wait(e0, T_NS));
	EXPECT_EQ(-ETIMEDOUT, spyre_event_wait(e1, 50 * MS));
	EXPECT_EQ(-EBUSY, spyre_event_query(e1));
	EXPECT_EQ(-EBUSY, spyre_event_timestamp(e1, &t1));
	EXPECT_EQ(-EBUSY, spyre_event_elapsed_ns(e0, e1, &dt));
	usleep(20 * 1000);
	ps[0] = 1;
	EXPECT_EQ(0, spyre_event_wait(e1, T_NS));
	EXPECT_EQ(0, spyre_event_wait(e2, T_NS));
	ASSERT_EQ(0, spyre_event_timestamp(e0, &t0));
	ASSERT_EQ(0, spyre_event_timestamp(e1, &t1));
	ASSERT_EQ(0, spyre_event_elapsed_ns(e0, e1, &dt));
	EXPECT_EQ((int64_t)(t1 - t0), dt);
	/* the stream sat in SEM_WAIT between the records (>= 70 ms of host
	 * time; printed, not judged) */
	EXPECT_LT(0, dt);
	TH_LOG("elapsed across the semaphore wait: %lld ns", (long long)dt);
	ASSERT_EQ(0, spyre_event_elapsed_ns(e1, e0, &dt));
	EXPECT_GT(0, dt);
	EXPECT_EQ(-ENODATA, spyre_event_timestamp(e2, &t0));
	/* re-recording moves the event forward */
	ASSERT_EQ(0, spyre_event_record(e0, self->s));
	ASSERT_EQ(0, spyre_event_wait(e0, T_NS));
	ASSERT_EQ(0, spyre_event_timestamp(e0, &t0));
	EXPECT_LE(t1, t0);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(sem);
	spyre_event_destroy(e0);
	spyre_event_destroy(e1);
	spyre_event_destroy(e2);
}

TEST_F(rt, event_orders_two_streams_without_host_blocking)
{
	struct spyre_stream *s2;
	struct spyre_event *e;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *sem, *a, *b;
	volatile uint64_t *ps;
	uint32_t *pb;

	ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s2));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &sem));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 1 << 20, 0, &a));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 1 << 20, 0, &b));
	ps = map(_metadata, sem);
	pb = map(_metadata, b);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 1));
	/* stream 1: wait for the host, then fill a; record e */
	ASSERT_EQ(0, spyre_stream_submit(self->s, cb, &sem, 1));
	ASSERT_EQ(0, spyre_stream_fill(self->s, a, 0, 1 << 18, 4,
				       0xabcd1234));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	/* stream 2: copy a to b after e; does not block the host */
	ASSERT_EQ(0, spyre_stream_wait_event(s2, e));
	ASSERT_EQ(0, spyre_stream_copy(s2, b, 0, a, 0, 1 << 20));
	usleep(100 * 1000);
	EXPECT_EQ(-EBUSY, spyre_stream_query(s2));
	ps[0] = 1;
	ASSERT_EQ(0, spyre_stream_sync(s2, T_NS));
	for (int i = 0; i < 1 << 18; i++) {
		ASSERT_EQ(0xabcd1234u, pb[i]) TH_LOG("word %d", i);
	}
	/* a pending wait alone is work of the stream too */
	spyre_cmdbuf_reset(cb);
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 2));
	ASSERT_EQ(0, spyre_stream_submit(self->s, cb, &sem, 1));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	ASSERT_EQ(0, spyre_stream_wait_event(s2, e));
	EXPECT_EQ(-ETIMEDOUT, spyre_stream_sync(s2, 50 * MS));
	EXPECT_EQ(-EBUSY, spyre_stream_query(s2));
	ps[0] = 2;
	EXPECT_EQ(0, spyre_stream_sync(s2, T_NS));
	EXPECT_EQ(0, spyre_event_query(e));
	/* more pending waits than slots: an empty job consumes them */
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(0, spyre_stream_wait_event(s2, e));
	ASSERT_EQ(0, spyre_stream_fill(s2, b, 0, 16, 1, 7));
	ASSERT_EQ(0, spyre_stream_sync(s2, T_NS));
	EXPECT_EQ(0x07070707u, pb[0]);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(sem);
	spyre_bo_free(a);
	spyre_bo_free(b);
	spyre_event_destroy(e);
	spyre_stream_destroy(s2);
}

TEST_F(rt, event_sync_file_export_and_import)
{
	struct spyre_event *e, *imp, *never;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *sem, *a;
	volatile uint64_t *ps;
	uint8_t *pa;
	int fd, fd2;

	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &imp));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &never));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &sem));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &a));
	ps = map(_metadata, sem);
	pa = map(_metadata, a);
	/* a never-recorded event exports a signalled sync_file */
	ASSERT_EQ(0, spyre_event_export_sync_file(never, &fd));
	{
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		EXPECT_EQ(1, poll(&pfd, 1, 0));
	}
	close(fd);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 1));
	ASSERT_EQ(0, spyre_stream_submit(self->s, cb, &sem, 1));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	ASSERT_EQ(0, spyre_event_export_sync_file(e, &fd));
	/* the import stands for the same fence */
	ASSERT_EQ(0, spyre_event_import_sync_file(imp, fd));
	EXPECT_EQ(-EBUSY, spyre_event_query(imp));
	{
		struct spyre_stream *s2;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s2));
		ASSERT_EQ(0, spyre_stream_wait_event(s2, imp));
		ASSERT_EQ(0, spyre_stream_fill(s2, a, 0, 64, 1, 0x42));
		EXPECT_EQ(0, poll(&pfd, 1, 50));
		EXPECT_EQ(-EBUSY, spyre_stream_query(s2));
		EXPECT_EQ(0, pa[0]);
		ps[0] = 1;
		EXPECT_EQ(1, poll(&pfd, 1, 20000));
		ASSERT_EQ(0, spyre_stream_sync(s2, T_NS));
		EXPECT_EQ(0x42, pa[63]);
		spyre_stream_destroy(s2);
	}
	EXPECT_EQ(0, spyre_event_wait(imp, T_NS));
	EXPECT_EQ(-ENODATA, spyre_event_timestamp(imp, &(uint64_t){0}));
	EXPECT_EQ(-EBADF, spyre_event_import_sync_file(imp, -1));
	fd2 = dup(0);
	if (fd2 >= 0) {
		EXPECT_NE(0, spyre_event_import_sync_file(imp, fd2));
		close(fd2);
	}
	close(fd);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(sem);
	spyre_bo_free(a);
	spyre_event_destroy(e);
	spyre_event_destroy(imp);
	spyre_event_destroy(never);
}

TEST_F(rt, event_of_another_card_orders_a_stream)
{
	struct spyre_device *d1;
	struct spyre_stream *s1;
	struct spyre_event *e1;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *sem, *a;
	volatile uint64_t *ps;
	uint8_t *pa;

	if (spyre_device_count() < 2)
		SKIP(return, "needs two cards");
	ASSERT_EQ(0, spyre_device_open(1, &d1));
	ASSERT_EQ(0, spyre_stream_create(d1, 1, &s1));
	ASSERT_EQ(0, spyre_event_create(d1, 0, &e1));
	ASSERT_EQ(0, spyre_bo_alloc(d1, 4096, 0, &sem));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &a));
	ps = map(_metadata, sem);
	pa = map(_metadata, a);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 1));
	ASSERT_EQ(0, spyre_stream_submit(s1, cb, &sem, 1));
	ASSERT_EQ(0, spyre_event_record(e1, s1));
	EXPECT_EQ(-EXDEV, spyre_event_record(e1, self->s));
	ASSERT_EQ(0, spyre_stream_wait_event(self->s, e1));
	ASSERT_EQ(0, spyre_stream_fill(self->s, a, 0, 16, 1, 0x99));
	usleep(50 * 1000);
	EXPECT_EQ(-EBUSY, spyre_stream_query(self->s));
	ps[0] = 1;
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0x99, pa[15]);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(sem);
	spyre_bo_free(a);
	spyre_event_destroy(e1);
	spyre_stream_destroy(s1);
	spyre_device_close(d1);
}

/* ---- graphs ------------------------------------------------------------- */

TEST_F(rt, graph_replay_and_repetitions)
{
	struct spyre_cmdbuf *cb;
	struct spyre_graph *g, *gd;
	struct spyre_bo *bo;
	volatile uint64_t *p;
	const unsigned int reps = 300;	/* two submit ioctls */

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 65536, 0, &bo));
	p = map(_metadata, bo);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	/* counter += 1; copy counter to word 1; timestamp to word 2 */
	ASSERT_EQ(0, spyre_cmdbuf_sem_signal(cb, spyre_bo_va(bo), 1,
					     SPYRE_SEM_F_ADD));
	ASSERT_EQ(0, spyre_cmdbuf_copy(cb, spyre_bo_va(bo) + 8,
				       spyre_bo_va(bo), 8));
	ASSERT_EQ(0, spyre_cmdbuf_timestamp(cb, spyre_bo_va(bo) + 16));
	ASSERT_EQ(0, spyre_graph_create(self->dev, cb, &bo, 1, 0, &g));
	ASSERT_EQ(0, spyre_graph_create(self->dev, cb, &bo, 1,
					SPYRE_BO_DEVICE, &gd));
	EXPECT_EQ(spyre_cmdbuf_size(cb), spyre_graph_size(g));
	EXPECT_EQ(-EINVAL, spyre_graph_create(self->dev, cb, &bo, 1, 4, &gd));
	/* the graph copied the commands */
	spyre_cmdbuf_reset(cb);
	ASSERT_EQ(0, spyre_graph_launch(g, self->s, 1));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(1, p[0]);
	EXPECT_EQ(1, p[1]);
	ASSERT_EQ(0, spyre_graph_launch(g, self->s, reps));
	ASSERT_EQ(0, spyre_graph_launch(gd, self->s, 5));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(1 + reps + 5, p[0]);
	EXPECT_EQ(1 + reps + 5, p[1]);
	EXPECT_EQ(-EINVAL, spyre_graph_launch(g, self->s, 0));
	EXPECT_EQ(-EINVAL, spyre_graph_create(self->dev, cb, NULL, 0, 0, &g));
	spyre_graph_destroy(gd);
	/* launches outlive the graph and its handle */
	ASSERT_EQ(0, spyre_graph_launch(g, self->s, 3));
	spyre_graph_destroy(g);
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(1 + reps + 5 + 3, p[0]);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
}

/* The last point the stream's queue signalled (all its work waited for). */
static uint64_t stream_point(struct __test_metadata *_metadata,
			     struct spyre_device *dev, struct spyre_stream *s)
{
	uint32_t tl = spyre_queue_syncobj(spyre_stream_queue(s));
	uint64_t point = 0;

	EXPECT_EQ(0, drmSyncobjQuery(spyre_device_fd(dev), &tl, &point, 1));
	return point;
}

TEST_F(rt, graph_launch_staged_in_order_in_one_submission)
{
	struct spyre_cmdbuf *cb, *pre, *post;
	struct spyre_graph *g;
	struct spyre_bo *in, *arena, *out;
	volatile uint64_t *pi, *pa, *po;
	uint64_t p0;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &in));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &arena));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &out));
	pi = map(_metadata, in);
	pa = map(_metadata, arena);
	po = map(_metadata, out);
	/* the graph: arena[0] += 1; arena[1] = arena[0] */
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_sem_signal(cb, spyre_bo_va(arena), 1,
					     SPYRE_SEM_F_ADD));
	ASSERT_EQ(0, spyre_cmdbuf_copy(cb, spyre_bo_va(arena) + 8,
				       spyre_bo_va(arena), 8));
	ASSERT_EQ(0, spyre_graph_create(self->dev, cb, &arena, 1,
					SPYRE_BO_DEVICE, &g));
	/* pre: arena[0] = in[k]; post: out[k] = arena[1] */
	ASSERT_EQ(0, spyre_cmdbuf_create(&pre));
	ASSERT_EQ(0, spyre_cmdbuf_create(&post));
	for (unsigned int k = 0; k < 8; k++)
		pi[k] = 100 * k + 41;
	pa[0] = pa[1] = 0;
	p0 = stream_point(_metadata, self->dev, self->s);
	for (unsigned int k = 0; k < 8; k++) {
		spyre_cmdbuf_reset(pre);
		spyre_cmdbuf_reset(post);
		ASSERT_EQ(0, spyre_cmdbuf_copy_mem(pre, SPYRE_MEM(arena, 0), 0,
						   SPYRE_DTYPE_U8,
						   SPYRE_MEM(in, 8 * k), 0,
						   SPYRE_DTYPE_U8, 8, 1, 0));
		ASSERT_EQ(0, spyre_cmdbuf_copy_mem(post, SPYRE_MEM(out, 8 * k),
						   0, SPYRE_DTYPE_U8,
						   SPYRE_MEM(arena, 8), 0,
						   SPYRE_DTYPE_U8, 8, 1, 0));
		/* launches queue back to back; pre/post may be reused */
		ASSERT_EQ(0, spyre_graph_launch_staged(g, self->s, pre, post));
	}
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	/* each launch in order: its pre, then the graph, then its post */
	for (unsigned int k = 0; k < 8; k++) {
		EXPECT_EQ(100 * k + 42, po[k]) TH_LOG("launch %u", k);
	}
	/* one submission (one fence of the stream) per staged launch */
	EXPECT_EQ(p0 + 8, stream_point(_metadata, self->dev, self->s));
	/* without pre or post (NULL or empty): a plain launch */
	spyre_cmdbuf_reset(pre);
	ASSERT_EQ(0, spyre_graph_launch_staged(g, self->s, NULL, pre));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(100 * 7 + 43, pa[0]);
	EXPECT_EQ(100 * 7 + 43, pa[1]);
	EXPECT_EQ(p0 + 9, stream_point(_metadata, self->dev, self->s));
	EXPECT_EQ(-EINVAL, spyre_graph_launch_staged(NULL, self->s, NULL,
						     NULL));
	EXPECT_EQ(-EINVAL, spyre_graph_launch_staged(g, NULL, NULL, NULL));
	/* a pre job above max_cmd_size */
	while (spyre_cmdbuf_size(pre) <= self->info.max_cmd_size)
		ASSERT_EQ(0, spyre_cmdbuf_nop(pre));
	EXPECT_EQ(-E2BIG, spyre_graph_launch_staged(g, self->s, pre, NULL));
	if (spyre_device_count() >= 2) {
		struct spyre_device *d1;
		struct spyre_bo *bo1;

		/* a BO of another card in @post */
		ASSERT_EQ(0, spyre_device_open(1, &d1));
		ASSERT_EQ(0, spyre_bo_alloc(d1, 4096, 0, &bo1));
		spyre_cmdbuf_reset(post);
		ASSERT_EQ(0, spyre_cmdbuf_copy_mem(post, SPYRE_MEM(bo1, 0), 0,
						   SPYRE_DTYPE_U8,
						   SPYRE_MEM(arena, 8), 0,
						   SPYRE_DTYPE_U8, 8, 1, 0));
		EXPECT_EQ(-EXDEV, spyre_graph_launch_staged(g, self->s, NULL,
							    post));
		spyre_bo_free(bo1);
		spyre_device_close(d1);
	}
	/* the stream still works */
	ASSERT_EQ(0, spyre_graph_launch(g, self->s, 1));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(100 * 7 + 44, pa[1]);
	spyre_cmdbuf_destroy(pre);
	spyre_cmdbuf_destroy(post);
	spyre_cmdbuf_destroy(cb);
	spyre_graph_destroy(g);
	spyre_bo_free(in);
	spyre_bo_free(arena);
	spyre_bo_free(out);
}

TEST_F(rt, graph_of_another_device_and_too_big)
{
	struct spyre_cmdbuf *cb;
	struct spyre_graph *g;

	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	while (spyre_cmdbuf_size(cb) <= self->info.max_cmd_size)
		ASSERT_EQ(0, spyre_cmdbuf_nop(cb));
	EXPECT_EQ(-E2BIG, spyre_graph_create(self->dev, cb, NULL, 0, 0, &g));
	EXPECT_EQ(-E2BIG, spyre_stream_submit(self->s, cb, NULL, 0));
	spyre_cmdbuf_reset(cb);
	ASSERT_EQ(0, spyre_cmdbuf_nop(cb));
	if (spyre_device_count() >= 2) {
		struct spyre_device *d1;
		struct spyre_bo *bo1;

		ASSERT_EQ(0, spyre_device_open(1, &d1));
		ASSERT_EQ(0, spyre_bo_alloc(d1, 4096, 0, &bo1));
		EXPECT_EQ(-EXDEV, spyre_graph_create(self->dev, cb, &bo1, 1,
						     0, &g));
		ASSERT_EQ(0, spyre_graph_create(d1, cb, NULL, 0, 0, &g));
		EXPECT_EQ(-EXDEV, spyre_graph_launch(g, self->s, 1));
		spyre_graph_destroy(g);
		spyre_bo_free(bo1);
		spyre_device_close(d1);
	}
	spyre_cmdbuf_destroy(cb);
}

/* ---- errors -------------------------------------------------------------- */

TEST_F(rt, stream_error_is_sticky_and_precise)
{
	struct spyre_stream *s2;
	struct spyre_event *e;
	struct spyre_cmdbuf *cb;
	struct spyre_context_info ci;
	struct spyre_bo *bo;
	uint8_t out[16];
	int rd, rec;

	ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s2));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	/* a write into the guard page after the BO faults */
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) + 4096, 1, 8, 1));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 16, 1, 0x11));
	ASSERT_EQ(0, spyre_stream_submit(self->s, cb, &bo, 1));
	/* queued behind the fault: cancelled, D2H not delivered */
	memset(out, 0xee, sizeof(out));
	rd = spyre_stream_copy_d2h(self->s, out, bo, 0, 16);
	rec = spyre_event_record(e, self->s);
	/*
	 * Queued, or refused once the error is known (a kernel refusal,
	 * -ECANCELED, is reported as the stream's own error).
	 */
	EXPECT_TRUE(rd == 0 || rd == -EFAULT) TH_LOG("d2h %d", rd);
	EXPECT_TRUE(rec == 0 || rec == -EFAULT) TH_LOG("record %d", rec);
	/* the stream reports its own job's error, not the cancellation */
	EXPECT_EQ(-EFAULT, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(-EFAULT, spyre_stream_error(self->s));
	EXPECT_EQ(-EFAULT, spyre_stream_query(self->s));
	EXPECT_EQ(0xee, out[0]);
	/* sticky: later operations fail without a submission */
	EXPECT_EQ(-EFAULT, spyre_stream_fill(self->s, bo, 0, 1, 1, 0));
	EXPECT_EQ(-EFAULT, spyre_event_record(e, self->s));
	EXPECT_EQ(-EFAULT, spyre_stream_wait_event(self->s, e));
	EXPECT_EQ(-EFAULT, spyre_stream_eltwise(self->s, SPYRE_ELT_RELU,
						SPYRE_DTYPE_FP32, 4,
						SPYRE_MEM(bo, 0),
						SPYRE_MEM(bo, 0),
						SPYRE_MEM_NONE, 0));
	/* the event recorded behind the fault was cancelled */
	if (rec == 0)
		EXPECT_EQ(-ECANCELED, spyre_event_wait(e, T_NS));
	/* another stream of the context: its submission is refused */
	EXPECT_EQ(-ECANCELED, spyre_stream_fill(s2, bo, 0, 1, 1, 0));
	EXPECT_EQ(-ECANCELED, spyre_stream_error(s2));
	EXPECT_EQ(-ECANCELED, spyre_stream_sync(s2, T_NS));
	/* the context: what libspyre saw and what the kernel saw */
	EXPECT_EQ(-EFAULT, spyre_device_error(self->dev));
	ASSERT_EQ(0, spyre_device_context_info(self->dev, &ci));
	EXPECT_EQ(-EFAULT, ci.error);
	EXPECT_EQ(spyre_bo_va(bo) + 4096, ci.fault_va);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
	spyre_event_destroy(e);
	spyre_stream_destroy(s2);
}

TEST_F(rt, refused_submission_learns_the_context_error)
{
	struct spyre_device *d2;
	struct spyre_queue *q;
	struct spyre_stream *s2;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo;
	struct spyre_fence f;
	int r;

	/* a context of its own, failed by a job nobody waits for */
	ASSERT_EQ(0, spyre_device_open(0, &d2));
	ASSERT_EQ(0, spyre_queue_create(d2, 1, &q));
	ASSERT_EQ(0, spyre_stream_create(d2, 1, &s2));
	ASSERT_EQ(0, spyre_bo_alloc(d2, 4096, 0, &bo));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) + 4096, 1, 1, 1));
	ASSERT_EQ(0, spyre_submit(q, cb, &bo, 1, NULL, 0, &f));
	/* let the card fail it, without looking at its fence */
	ASSERT_EQ(0, spyre_bo_wait(bo, T_NS));
	EXPECT_EQ(0, spyre_device_error(d2));	/* nobody saw it yet */
	r = spyre_stream_fill(s2, bo, 0, 1, 1, 0);
	EXPECT_EQ(-ECANCELED, r);
	/* the refused submission fetched the kernel's context error */
	EXPECT_EQ(-EFAULT, spyre_device_error(d2));
	EXPECT_EQ(-ECANCELED, spyre_stream_error(s2));
	/* the fixture's context is not affected */
	EXPECT_EQ(0, spyre_device_error(self->dev));
	{
		struct spyre_bo *mine;

		ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &mine));
		EXPECT_EQ(0, spyre_stream_fill(self->s, mine, 0, 1, 1, 0));
		EXPECT_EQ(0, spyre_stream_sync(self->s, T_NS));
		spyre_bo_free(mine);
	}
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
	spyre_stream_destroy(s2);
	spyre_queue_destroy(q);
	spyre_device_close(d2);
}

TEST_F(rt, fork_child_gets_echild_for_new_objects)
{
	struct spyre_event *e;
	struct spyre_graph *g;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo;
	pid_t pid;
	int status;

	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo), 8, 1, 3));
	ASSERT_EQ(0, spyre_graph_create(self->dev, cb, &bo, 1, 0, &g));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct spyre_event *e2;
		struct spyre_graph *g2;
		int fd;
		uint8_t x[8];

		if (spyre_event_create(self->dev, 0, &e2) != -ECHILD)
			_exit(1);
		if (spyre_event_record(e, self->s) != -ECHILD)
			_exit(2);
		if (spyre_event_wait(e, 0) != -ECHILD ||
		    spyre_event_query(e) != -ECHILD ||
		    spyre_event_export_sync_file(e, &fd) != -ECHILD)
			_exit(3);
		if (spyre_graph_create(self->dev, cb, NULL, 0, 0, &g2) !=
		    -ECHILD || spyre_graph_launch(g, self->s, 1) != -ECHILD)
			_exit(4);
		if (spyre_stream_copy_h2d(self->s, bo, 0, x, 8) != -ECHILD ||
		    spyre_stream_copy_d2h(self->s, x, bo, 0, 8) != -ECHILD ||
		    spyre_stream_query(self->s) != -ECHILD ||
		    spyre_stream_error(self->s) != -ECHILD ||
		    spyre_stream_wait_event(self->s, e) != -ECHILD ||
		    spyre_stream_submit(self->s, cb, NULL, 0) != -ECHILD ||
		    spyre_stream_gemm(self->s, &(struct spyre_gemm){ 0 }) !=
		    -ECHILD)
			_exit(5);
		/* freeing in the child does not touch the parent's objects */
		spyre_event_destroy(e);
		spyre_graph_destroy(g);
		spyre_stream_destroy(self->s);
		spyre_bo_free(bo);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, spyre_graph_launch(g, self->s, 2));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	EXPECT_EQ(0, spyre_event_wait(e, T_NS));
	EXPECT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(3, ((uint8_t *)map(_metadata, bo))[7]);
	spyre_graph_destroy(g);
	spyre_event_destroy(e);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
}

/* ---- compute (needs the card's math engine) ------------------------------ */

/* Fill @n elements of @dtype at @p with values of about @scale. */
static void fill_random(void *p, uint32_t dtype, uint64_t n, double scale)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t bits = spyre_ref_encode(dtype, rnd_sym() * scale, 0);
		size_t es = spyre_dtype_size(dtype);

		memcpy((uint8_t *)p + i * es, &bits, es);
	}
}

static void expect_close(struct __test_metadata *_metadata, const void *got,
			 uint32_t dtype, const double *ref, const double *err,
			 uint64_t n, const char *what)
{
	uint64_t bad = 0;
	int64_t nbad = spyre_ref_compare(got, dtype, ref, err, n, &bad);

	EXPECT_EQ(0, nbad) {
		double g = 0;

		if (bad < n) {
			uint32_t bits = 0;

			memcpy(&bits, (const uint8_t *)got +
			       bad * spyre_dtype_size(dtype),
			       spyre_dtype_size(dtype));
			g = spyre_ref_decode(dtype, bits);
		}
		TH_LOG("%s: %lld mismatches, first at %llu: got %g want %g "
		       "(err %g)", what, (long long)nbad,
		       (unsigned long long)bad, g, bad < n ? ref[bad] : 0.0,
		       err && bad < n ? err[bad] : 0.0);
	}
}

TEST_F(rt, gemm_batched_strided_transposed)
{
	/* attention scores: per head h, S = Q_h K_h^T over a packed QKV */
	enum { SEQ = 24, HEADS = 3, DH = 16, LD = 3 * HEADS * DH };
	struct spyre_bo *qkv, *out;
	uint16_t *pq, *po;
	double *ref, *err;
	struct spyre_gemm g;
	struct spyre_ref_gemm_args ra;

	NEED_COMPUTE();
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, SEQ * LD * 2, 0, &qkv));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, HEADS * SEQ * SEQ * 4, 0,
				    &out));
	pq = map(_metadata, qkv);
	po = map(_metadata, out);
	fill_random(pq, SPYRE_DTYPE_FP16, SEQ * LD, 2.0);
	memset(&g, 0, sizeof(g));
	g.flags = SPYRE_GEMM_F_TRANS_B;
	g.a_dtype = g.b_dtype = SPYRE_DTYPE_FP16;
	g.c_dtype = SPYRE_DTYPE_FP32;
	g.m = SEQ;
	g.n = SEQ;
	g.k = DH;
	g.batch = HEADS;
	g.a = SPYRE_MEM(qkv, 0);			/* Q */
	g.b = SPYRE_MEM(qkv, HEADS * DH * 2);		/* K */
	g.c = SPYRE_MEM(out, 0);
	g.lda = LD;
	g.ldb = LD;
	g.stride_a = DH;
	g.stride_b = DH;
	g.stride_c = SEQ * SEQ;
	g.alpha = 0.25f;
	ASSERT_EQ(0, spyre_stream_gemm(self->s, &g));
	/* out of the BO: refused on the host, nothing queued */
	g.batch = HEADS + 1;
	EXPECT_EQ(-ERANGE, spyre_stream_gemm(self->s, &g));
	g.batch = HEADS;
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));

	ref = calloc(HEADS * SEQ * SEQ, sizeof(double));
	err = calloc(HEADS * SEQ * SEQ, sizeof(double));
	memset(&ra, 0, sizeof(ra));
	ra.flags = g.flags;
	ra.a_dtype = ra.b_dtype = SPYRE_DTYPE_FP16;
	ra.c_dtype = SPYRE_DTYPE_FP32;
	ra.m = SEQ;
	ra.n = SEQ;
	ra.k = DH;
	ra.batch = HEADS;
	ra.a = pq;
	ra.b = pq + HEADS * DH;
	ra.lda = ra.ldb = LD;
	ra.ldc = SEQ;
	ra.stride_a = ra.stride_b = DH;
	ra.stride_c = SEQ * SEQ;
	ra.alpha = 0.25f;
	ra.scale_a = ra.scale_b = 1.0f;
	ASSERT_EQ(0, spyre_ref_gemm(&ra, ref, err, NULL, NULL));
	expect_close(_metadata, po, SPYRE_DTYPE_FP32, ref, err,
		     HEADS * SEQ * SEQ, "QK^T");
	free(ref);
	free(err);
	spyre_bo_free(qkv);
	spyre_bo_free(out);
}

TEST_F(rt, gemm_scaled_fp8_with_amax_and_bias)
{
	enum { M = 20, N = 28, K = 40 };
	struct spyre_bo *bo;
	uint8_t *p, *a, *b;
	uint16_t *c, *bias;
	float *scales, *amax;
	double ref[M * N], err[M * N], ref_amax, amax_err;
	struct spyre_gemm g;
	struct spyre_ref_gemm_args ra;

	NEED_COMPUTE();
	if (!(self->info.caps & SPYRE_DEV_CAP_FP8))
		SKIP(return, "no fp8");
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 65536, 0, &bo));
	p = map(_metadata, bo);
	a = p;					/* M x K e4m3 */
	b = p + 4096;				/* N x K e5m2 (TRANS_B) */
	c = (uint16_t *)(p + 8192);		/* M x N bf16 */
	bias = (uint16_t *)(p + 16384);		/* N bf16 */
	scales = (float *)(p + 20480);
	amax = scales + 2;
	fill_random(a, SPYRE_DTYPE_FP8_E4M3, M * K, 400.0);
	fill_random(b, SPYRE_DTYPE_FP8_E5M2, N * K, 1000.0);
	fill_random(bias, SPYRE_DTYPE_BF16, N, 1.0);
	scales[0] = 1.0f / 256;
	scales[1] = 1.0f / 1024;
	*amax = -1.0f;
	memset(&g, 0, sizeof(g));
	g.flags = SPYRE_GEMM_F_TRANS_B;
	g.a_dtype = SPYRE_DTYPE_FP8_E4M3;
	g.b_dtype = SPYRE_DTYPE_FP8_E5M2;
	g.c_dtype = SPYRE_DTYPE_BF16;
	g.bias_dtype = SPYRE_DTYPE_BF16;
	g.m = M;
	g.n = N;
	g.k = K;
	g.a = SPYRE_MEM(bo, 0);
	g.b = SPYRE_MEM(bo, 4096);
	g.c = SPYRE_MEM(bo, 8192);
	g.bias = SPYRE_MEM(bo, 16384);
	g.scale_a = SPYRE_MEM(bo, 20480);
	g.scale_b = SPYRE_MEM(bo, 20484);
	g.amax = SPYRE_MEM(bo, 20488);
	g.alpha = 1.0f;
	ASSERT_EQ(0, spyre_stream_gemm(self->s, &g));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));

	memset(&ra, 0, sizeof(ra));
	ra.flags = g.flags;
	ra.a_dtype = g.a_dtype;
	ra.b_dtype = g.b_dtype;
	ra.c_dtype = g.c_dtype;
	ra.bias_dtype = g.bias_dtype;
	ra.m = M;
	ra.n = N;
	ra.k = K;
	ra.batch = 1;
	ra.a = a;
	ra.b = b;
	ra.bias = bias;
	ra.lda = K;
	ra.ldb = K;
	ra.ldc = N;
	ra.alpha = 1.0f;
	ra.scale_a = scales[0];
	ra.scale_b = scales[1];
	ASSERT_EQ(0, spyre_ref_gemm(&ra, ref, err, &ref_amax, &amax_err));
	expect_close(_metadata, c, SPYRE_DTYPE_BF16, ref, err, M * N,
		     "scaled fp8");
	EXPECT_TRUE(fabs(*amax - ref_amax) <= amax_err + 1e-30)
		TH_LOG("amax %g want %g (+- %g)", *amax, ref_amax, amax_err);
	spyre_bo_free(bo);
}

TEST_F(rt, eltwise_reduce_rowops_convert)
{
	enum { R = 12, C = 80, N = R * C };
	struct spyre_bo *bo;
	uint8_t *p;
	uint16_t *x, *y, *o_add, *o_silu, *o_sm, *o_rms, *o_ln, *o_red;
	uint8_t *o_e4m3;
	float *gamma, *beta;
	double ref[N], err[N];
	struct spyre_mem m;

	NEED_COMPUTE();
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 65536, 0, &bo));
	p = map(_metadata, bo);
	x = (uint16_t *)p;
	y = (uint16_t *)(p + 2048);
	o_add = (uint16_t *)(p + 4096);
	o_silu = (uint16_t *)(p + 6144);
	o_sm = (uint16_t *)(p + 8192);
	o_rms = (uint16_t *)(p + 10240);
	o_ln = (uint16_t *)(p + 12288);
	o_red = (uint16_t *)(p + 14336);
	o_e4m3 = p + 16384;
	gamma = (float *)(p + 20480);
	beta = (float *)(p + 24576);
	fill_random(x, SPYRE_DTYPE_FP16, N, 4.0);
	fill_random(y, SPYRE_DTYPE_FP16, N, 4.0);
	for (int i = 0; i < C; i++) {
		gamma[i] = (float)(1.0 + 0.5 * rnd_sym());
		beta[i] = (float)(0.1 * rnd_sym());
	}
	m = SPYRE_MEM(bo, 0);
	ASSERT_EQ(0, spyre_stream_eltwise(self->s, SPYRE_ELT_ADD,
					  SPYRE_DTYPE_FP16, N,
					  SPYRE_MEM(bo, 4096), m,
					  SPYRE_MEM(bo, 2048), 0));
	ASSERT_EQ(0, spyre_stream_eltwise(self->s, SPYRE_ELT_SILU,
					  SPYRE_DTYPE_FP16, N,
					  SPYRE_MEM(bo, 6144), m,
					  SPYRE_MEM_NONE, 0));
	ASSERT_EQ(0, spyre_stream_softmax(self->s, SPYRE_DTYPE_FP16, R, C,
					  SPYRE_MEM(bo, 8192), 0, m, 0));
	ASSERT_EQ(0, spyre_stream_rmsnorm(self->s, SPYRE_DTYPE_FP16, R, C,
					  SPYRE_MEM(bo, 10240), 0, m, 0,
					  SPYRE_MEM(bo, 20480), 1e-5f));
	ASSERT_EQ(0, spyre_stream_layernorm(self->s, SPYRE_DTYPE_FP16, R, C,
					    SPYRE_MEM(bo, 12288), 0, m, 0,
					    SPYRE_MEM(bo, 20480),
					    SPYRE_MEM(bo, 24576), 1e-5f));
	ASSERT_EQ(0, spyre_stream_reduce(self->s, SPYRE_REDUCE_SUM,
					 SPYRE_DTYPE_FP16, R, C,
					 SPYRE_MEM(bo, 14336), m, 0));
	ASSERT_EQ(0, spyre_stream_convert(self->s, SPYRE_MEM(bo, 16384),
					  SPYRE_DTYPE_FP8_E4M3, m,
					  SPYRE_DTYPE_FP16, N, 0));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));

	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_ADD, SPYRE_DTYPE_FP16, N, x,
				       y, 0, ref, err));
	expect_close(_metadata, o_add, SPYRE_DTYPE_FP16, ref, err, N, "add");
	ASSERT_EQ(0, spyre_ref_eltwise(SPYRE_ELT_SILU, SPYRE_DTYPE_FP16, N, x,
				       NULL, 0, ref, err));
	expect_close(_metadata, o_silu, SPYRE_DTYPE_FP16, ref, err, N,
		     "silu");
	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_SOFTMAX, SPYRE_DTYPE_FP16, R,
				     C, C, x, NULL, NULL, 0, ref, err));
	expect_close(_metadata, o_sm, SPYRE_DTYPE_FP16, ref, err, N,
		     "softmax");
	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP16, R,
				     C, C, x, gamma, NULL, 1e-5f, ref, err));
	expect_close(_metadata, o_rms, SPYRE_DTYPE_FP16, ref, err, N,
		     "rmsnorm");
	ASSERT_EQ(0, spyre_ref_rowop(SPYRE_ROW_LAYERNORM, SPYRE_DTYPE_FP16, R,
				     C, C, x, gamma, beta, 1e-5f, ref, err));
	expect_close(_metadata, o_ln, SPYRE_DTYPE_FP16, ref, err, N,
		     "layernorm");
	ASSERT_EQ(0, spyre_ref_reduce(SPYRE_REDUCE_SUM, SPYRE_DTYPE_FP16, R,
				      C, C, x, ref, err));
	expect_close(_metadata, o_red, SPYRE_DTYPE_FP16, ref, err, R, "sum");
	ASSERT_EQ(0, spyre_ref_to_f64(ref, x, SPYRE_DTYPE_FP16, N));
	expect_close(_metadata, o_e4m3, SPYRE_DTYPE_FP8_E4M3, ref, NULL, N,
		     "fp16 -> e4m3");
	spyre_bo_free(bo);
}

TEST_F(rt, compute_graph_matches_stream_and_queue_submit)
{
	enum { M = 16, N = 32, K = 24 };
	struct spyre_bo *bo;
	uint8_t *p;
	struct spyre_cmdbuf *cb;
	struct spyre_graph *g;
	struct spyre_queue *q;
	struct spyre_fence f;
	struct spyre_gemm gm;

	NEED_COMPUTE();
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 65536, 0, &bo));
	p = map(_metadata, bo);
	fill_random(p, SPYRE_DTYPE_BF16, M * K, 1.0);
	fill_random(p + 4096, SPYRE_DTYPE_BF16, K * N, 1.0);
	memset(&gm, 0, sizeof(gm));
	gm.a_dtype = gm.b_dtype = gm.c_dtype = SPYRE_DTYPE_BF16;
	gm.m = M;
	gm.n = N;
	gm.k = K;
	gm.a = SPYRE_MEM(bo, 0);
	gm.b = SPYRE_MEM(bo, 4096);
	gm.c = SPYRE_MEM(bo, 8192);
	gm.alpha = 1.0f;
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_gemm(cb, &gm));
	ASSERT_EQ(0, spyre_cmdbuf_eltwise(cb, SPYRE_ELT_GELU,
					  SPYRE_DTYPE_BF16, M * N,
					  SPYRE_MEM(bo, 12288),
					  SPYRE_MEM(bo, 8192),
					  SPYRE_MEM_NONE, 0));
	/* the same commands three ways; results bit-identical */
	ASSERT_EQ(0, spyre_stream_submit(self->s, cb, NULL, 0));
	ASSERT_EQ(0, spyre_stream_copy(self->s, bo, 32768, bo, 8192, 8192));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	memset(p + 8192, 0, 8192);
	ASSERT_EQ(0, spyre_graph_create(self->dev, cb, NULL, 0, 0, &g));
	ASSERT_EQ(0, spyre_graph_launch(g, self->s, 4));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0, memcmp(p + 8192, p + 32768, 8192));
	memset(p + 8192, 0, 8192);
	ASSERT_EQ(0, spyre_queue_create(self->dev, 1, &q));
	ASSERT_EQ(0, spyre_submit(q, cb, NULL, 0, NULL, 0, &f));
	ASSERT_EQ(0, spyre_fence_wait(&f, T_NS));
	EXPECT_EQ(0, memcmp(p + 8192, p + 32768, 8192));
	spyre_queue_destroy(q);
	spyre_graph_destroy(g);
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
}

/* ---- stream batches (spyre_stream_set_batch()) --------------------------- */

/* Whether the job at @point of @s's queue has been submitted. */
static bool submitted(struct spyre_stream *s, uint64_t point)
{
	struct spyre_fence f = { spyre_stream_queue(s), point };

	/* a point past the queue's last submission is refused */
	return spyre_fence_query(&f) != -EINVAL;
}

static int wait_point(struct spyre_stream *s, uint64_t point)
{
	struct spyre_fence f = { spyre_stream_queue(s), point };

	return spyre_fence_wait(&f, T_NS);
}

TEST_F(rt, batch_defers_until_a_flush_point)
{
	struct spyre_event *e;
	struct spyre_fence f0, f;
	struct spyre_bo *bo;
	uint8_t *p, out[4];
	uint64_t p0;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	p = map(_metadata, bo);
	memset(p, 0, 4096);
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e));
	EXPECT_EQ(-EINVAL, spyre_stream_set_batch(self->s,
						  SPYRE_STREAM_BATCH_MAX + 1));
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 16));
	ASSERT_EQ(0, spyre_stream_last_fence(self->s, &f0));
	p0 = f0.point;
	/* three operations: queued in the open batch, nothing submitted */
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 8, 1, 0x11));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 8, 8, 1, 0x22));
	ASSERT_EQ(0, spyre_stream_copy(self->s, bo, 16, bo, 0, 8));
	EXPECT_FALSE(submitted(self->s, p0 + 1));
	usleep(50 * 1000);
	EXPECT_EQ(0, p[0]);
	EXPECT_EQ(0, p[16]);
	/* flushed as one job, in order */
	ASSERT_EQ(0, spyre_stream_flush(self->s));
	EXPECT_TRUE(submitted(self->s, p0 + 1));
	EXPECT_FALSE(submitted(self->s, p0 + 2));
	ASSERT_EQ(0, wait_point(self->s, p0 + 1));
	EXPECT_EQ(0x11, p[7]);
	EXPECT_EQ(0x22, p[15]);
	EXPECT_EQ(0x11, p[16]);
	EXPECT_EQ(0, spyre_stream_flush(self->s));	/* nothing open */
	EXPECT_FALSE(submitted(self->s, p0 + 2));

	/* a device-to-host copy flushes what was queued before it */
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 4, 1, 0x44));
	ASSERT_EQ(0, spyre_stream_copy_d2h(self->s, out, bo, 0, 4));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0x44, out[3]);
	/* so does an event record: the event covers the batch */
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 4, 1, 0x55));
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	ASSERT_EQ(0, spyre_event_wait(e, T_NS));
	EXPECT_EQ(0x55, p[0]);
	/* and sync, and last_fence */
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 4, 1, 0x66));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0x66, p[0]);
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 4, 1, 0x67));
	ASSERT_EQ(0, spyre_stream_last_fence(self->s, &f));
	ASSERT_EQ(0, spyre_fence_wait(&f, T_NS));
	EXPECT_EQ(0x67, p[0]);
	/* off again: every operation is a job of its own, at once */
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 4, 1, 0x77));
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 0));
	ASSERT_EQ(0, spyre_stream_last_fence(self->s, &f));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 4, 4, 1, 0x78));
	EXPECT_TRUE(submitted(self->s, f.point + 1));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0x77, p[0]);
	EXPECT_EQ(0x78, p[4]);
	spyre_event_destroy(e);
	spyre_bo_free(bo);
}

/* Stamps between batched operations: one job, each command's card time. */
TEST_F(rt, batch_timestamps_time_each_command_of_one_job)
{
	struct spyre_bo *ts, *bo, *other;
	struct spyre_event *e;
	struct spyre_fence f0;
	uint64_t n0, n, t_end;
	volatile uint64_t *t;
	uint8_t *p;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &ts));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 1 << 20, SPYRE_BO_DEVICE,
				    &bo));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &other));
	ASSERT_EQ(0, spyre_event_create(self->dev, 0, &e));
	t = map(_metadata, ts);
	p = map(_metadata, other);
	memset((void *)t, 0, 4096);
	/* bad arguments: nothing queued */
	ASSERT_EQ(0, spyre_stream_enqueued(self->s, &n0));
	EXPECT_EQ(-EINVAL, spyre_stream_timestamp(self->s, ts, 4, 0));
	EXPECT_EQ(-ERANGE, spyre_stream_timestamp(self->s, ts, 4096, 0));
	EXPECT_EQ(-EINVAL, spyre_stream_timestamp(self->s, NULL, 0, 0));
	EXPECT_EQ(-EINVAL, spyre_stream_timestamp(self->s, ts, 0, 2));
	EXPECT_EQ(-EINVAL, spyre_stream_enqueued(self->s, NULL));
	ASSERT_EQ(0, spyre_stream_enqueued(self->s, &n));
	EXPECT_EQ(n0, n);

	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 16));
	ASSERT_EQ(0, spyre_stream_last_fence(self->s, &f0));
	ASSERT_EQ(0, spyre_stream_enqueued(self->s, &n0));
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 0, 0));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 1 << 18, 4, 7));
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 8,
					    SPYRE_TIMESTAMP_EAGER));
	ASSERT_EQ(0, spyre_stream_fill(self->s, other, 0, 8, 1, 0x5a));
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 16, 0));
	/* counted, and still in the open batch: stamps do not flush */
	ASSERT_EQ(0, spyre_stream_enqueued(self->s, &n));
	EXPECT_EQ(n0 + 5, n);
	EXPECT_FALSE(submitted(self->s, f0.point + 1));
	EXPECT_EQ(0u, t[0]);
	ASSERT_EQ(0, spyre_event_record(e, self->s));
	ASSERT_EQ(0, spyre_event_wait(e, T_NS));
	/* the batch was one job; the event's own job came after it */
	EXPECT_TRUE(submitted(self->s, f0.point + 2));
	EXPECT_FALSE(submitted(self->s, f0.point + 3));
	ASSERT_EQ(0, spyre_event_timestamp(e, &t_end));
	EXPECT_EQ(0x5a, p[7]);
	EXPECT_NE(0u, t[0]);
	EXPECT_LT(t[0], t[1]);		/* the 1 MiB fill took card time */
	EXPECT_LE(t[1], t[2]);
	EXPECT_LE(t[2], t_end);
	/* EAGER with no open batch: a job of its own at once; plain opens one */
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 24,
					    SPYRE_TIMESTAMP_EAGER));
	EXPECT_TRUE(submitted(self->s, f0.point + 3));
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 32, 0));
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 40,
					    SPYRE_TIMESTAMP_EAGER));
	EXPECT_FALSE(submitted(self->s, f0.point + 4));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_TRUE(submitted(self->s, f0.point + 4));
	EXPECT_FALSE(submitted(self->s, f0.point + 5));
	EXPECT_LE(t_end, t[3]);
	EXPECT_LE(t[3], t[4]);
	EXPECT_LE(t[4], t[5]);
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 0));
	/* unbatched: a job of its own, at once */
	ASSERT_EQ(0, spyre_stream_timestamp(self->s, ts, 48, 0));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_LE(t[5], t[6]);
	spyre_event_destroy(e);
	spyre_bo_free(other);
	spyre_bo_free(bo);
	spyre_bo_free(ts);
}

TEST_F(rt, batch_limit_submits_full_batches)
{
	struct spyre_fence f0;
	struct spyre_bo *bo;
	uint8_t *p;
	uint64_t p0;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	p = map(_metadata, bo);
	memset(p, 0, 4096);
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 4));
	ASSERT_EQ(0, spyre_stream_last_fence(self->s, &f0));
	p0 = f0.point;
	for (unsigned int i = 0; i < 10; i++)
		ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 8 * i, 8, 1,
					       0x10 + i));
	/* two full batches went, the last two operations wait */
	EXPECT_TRUE(submitted(self->s, p0 + 2));
	EXPECT_FALSE(submitted(self->s, p0 + 3));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_TRUE(submitted(self->s, p0 + 3));
	EXPECT_FALSE(submitted(self->s, p0 + 4));
	for (unsigned int i = 0; i < 10; i++)
		EXPECT_EQ(0x10 + i, p[8 * i + 7]);
	spyre_bo_free(bo);
}

TEST_F(rt, batch_freeing_a_bo_it_names_flushes_it_first)
{
	struct spyre_stream *s2;
	struct spyre_fence f0, g0;
	struct spyre_bo *keep, *tmp, *other;
	uint8_t *p, *po;

	ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s2));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &keep));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, SPYRE_BO_DEVICE, &tmp));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &other));
	p = map(_metadata, keep);
	memset(p, 0, 4096);
	po = map(_metadata, other);
	memset(po, 0, 4096);
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 16));
	ASSERT_EQ(0, spyre_stream_set_batch(s2, 16));
	ASSERT_EQ(0, spyre_stream_last_fence(self->s, &f0));
	ASSERT_EQ(0, spyre_stream_last_fence(s2, &g0));
	/* the batch of self->s uses tmp; the batch of s2 does not */
	ASSERT_EQ(0, spyre_stream_fill(self->s, tmp, 0, 4096, 1, 0x5a));
	ASSERT_EQ(0, spyre_stream_copy(self->s, keep, 64, tmp, 0, 64));
	ASSERT_EQ(0, spyre_stream_fill(s2, other, 0, 8, 1, 0x33));
	EXPECT_FALSE(submitted(self->s, f0.point + 1));
	/* freeing tmp submits the batch that names it, which keeps it alive */
	spyre_bo_free(tmp);
	EXPECT_TRUE(submitted(self->s, f0.point + 1));
	EXPECT_FALSE(submitted(s2, g0.point + 1));
	ASSERT_EQ(0, wait_point(self->s, f0.point + 1));
	EXPECT_EQ(0x5a, p[64]);
	EXPECT_EQ(0x5a, p[127]);
	EXPECT_EQ(0, p[128]);
	EXPECT_EQ(0, spyre_stream_sync(self->s, T_NS));
	/* destroying a stream submits its batch */
	spyre_stream_destroy(s2);
	EXPECT_EQ(0x33, po[7]);
	spyre_bo_free(other);
	spyre_bo_free(keep);
}

TEST_F(rt, batch_shared_bo_keeps_program_order_across_streams)
{
	struct spyre_stream *s2;
	struct spyre_bo *a, *b;
	uint8_t *pb, out[8];

	ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s2));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, SPYRE_BO_DEVICE, &a));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &b));
	pb = map(_metadata, b);
	memset(pb, 0, 4096);
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 16));
	ASSERT_EQ(0, spyre_stream_set_batch(s2, 16));
	/*
	 * self->s writes a (queued in its batch); s2 then reads a: the batch
	 * of self->s is submitted first, so the kernel orders the two jobs by
	 * a's fences as it would have without batching.
	 */
	ASSERT_EQ(0, spyre_stream_fill(self->s, a, 0, 64, 1, 0x3c));
	ASSERT_EQ(0, spyre_stream_copy(s2, b, 0, a, 0, 64));
	ASSERT_EQ(0, spyre_stream_sync(s2, T_NS));
	EXPECT_EQ(0x3c, pb[0]);
	EXPECT_EQ(0x3c, pb[63]);
	/* and a host copy of a on s2 after a write queued on self->s */
	ASSERT_EQ(0, spyre_stream_fill(self->s, a, 0, 8, 1, 0x4d));
	ASSERT_EQ(0, spyre_stream_copy_d2h(s2, out, a, 0, 8));
	ASSERT_EQ(0, spyre_stream_sync(s2, T_NS));
	EXPECT_EQ(0x4d, out[7]);
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	spyre_bo_free(a);
	spyre_bo_free(b);
	spyre_stream_destroy(s2);
}

TEST_F(rt, batch_errors_surface_at_the_next_flush)
{
	struct spyre_device *d2;
	struct spyre_queue *q;
	struct spyre_stream *s2;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo, *bad;
	struct spyre_fence f;
	uint8_t *p;

	/*
	 * A job error: the faulting command was queued without complaint,
	 * the sync of the batch reports the fault, and the stream is in
	 * error (sticky) as without batching.
	 */
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	p = map(_metadata, bo);
	memset(p, 0, 4096);
	ASSERT_EQ(0, spyre_stream_set_batch(self->s, 16));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 16, 1, 0x11));
	/* a store into the guard page after the BO */
	ASSERT_EQ(0, spyre_stream_convert(self->s,
					  SPYRE_MEM_VA(spyre_bo_va(bo) + 4096),
					  SPYRE_DTYPE_FP32, SPYRE_MEM(bo, 0),
					  SPYRE_DTYPE_FP32, 4, 0));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 16, 16, 1, 0x22));
	EXPECT_EQ(-EFAULT, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(-EFAULT, spyre_stream_error(self->s));
	EXPECT_EQ(-EFAULT, spyre_stream_fill(self->s, bo, 0, 1, 1, 0));
	EXPECT_EQ(-EFAULT, spyre_stream_flush(self->s));
	spyre_bo_free(bo);

	/*
	 * A refused submission at an implicit flush (a full batch): the
	 * operation that filled it returns 0, the next flush point the error.
	 */
	ASSERT_EQ(0, spyre_device_open(0, &d2));
	ASSERT_EQ(0, spyre_queue_create(d2, 1, &q));
	ASSERT_EQ(0, spyre_stream_create(d2, 1, &s2));
	ASSERT_EQ(0, spyre_stream_set_batch(s2, 2));
	ASSERT_EQ(0, spyre_bo_alloc(d2, 4096, 0, &bad));
	/* argument errors still come from the call itself */
	EXPECT_EQ(-ERANGE, spyre_stream_fill(s2, bad, 4096, 1, 1, 0));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bad) + 4096, 1, 1, 1));
	ASSERT_EQ(0, spyre_submit(q, cb, &bad, 1, NULL, 0, &f));
	ASSERT_EQ(0, spyre_bo_wait(bad, T_NS));	/* the context fails */
	EXPECT_EQ(0, spyre_stream_fill(s2, bad, 0, 1, 1, 0));
	EXPECT_EQ(0, spyre_stream_fill(s2, bad, 1, 1, 1, 0));	/* flushes */
	EXPECT_EQ(-ECANCELED, spyre_stream_sync(s2, T_NS));
	EXPECT_EQ(-ECANCELED, spyre_stream_error(s2));
	/* the fixture's other context is not affected */
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bad);
	spyre_stream_destroy(s2);
	spyre_queue_destroy(q);
	spyre_device_close(d2);
}

TEST_HARNESS_MAIN
