// SPDX-License-Identifier: MIT
/*
 * spyre_submit: queues, SUBMIT, syncobj completion, command execution on
 * the card (FILL, COPY incl. 2-D, TIMESTAMP), fences with errors, sticky
 * context errors, isolation between files and processes.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define DATA_SIZE (1u << 20)

FIXTURE(sub) {
	struct st_ctx c;
	struct spyre_cmdbuf *cb;
	uint32_t a, b;		/* data BOs */
	uint64_t a_va, b_va;
	uint8_t *pa, *pb;
};

FIXTURE_SETUP(sub)
{
	int ret = st_ctx_init(&self->c, 0);

	if (ret == -ENODEV)
		SKIP(return, "no Spyre card (/dev/accel)");
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, spyre_cmdbuf_create(&self->cb));
	ASSERT_EQ(0, st_bo_new(self->c.fd, DATA_SIZE, &self->a, &self->a_va));
	ASSERT_EQ(0, st_bo_new(self->c.fd, DATA_SIZE, &self->b, &self->b_va));
	self->pa = st_bo_mmap(self->c.fd, self->a, DATA_SIZE);
	ASSERT_NE(MAP_FAILED, self->pa);
	self->pb = st_bo_mmap(self->c.fd, self->b, DATA_SIZE);
	ASSERT_NE(MAP_FAILED, self->pb);
}

FIXTURE_TEARDOWN(sub)
{
	spyre_cmdbuf_destroy(self->cb);
	if (self->pa && self->pa != MAP_FAILED)
		munmap(self->pa, DATA_SIZE);
	if (self->pb && self->pb != MAP_FAILED)
		munmap(self->pb, DATA_SIZE);
	st_close(&self->c);
}

/* ---- queues ------------------------------------------------------------- */

TEST_F(sub, queue_create_destroy)
{
	uint32_t ids[6];

	for (int i = 0; i < 6; i++) {
		ASSERT_EQ(0, st_queue_new(self->c.fd, (uint32_t)(i % 3),
					  &ids[i]));
		ASSERT_LT(0, ids[i]);
		for (int j = 0; j < i; j++) {
			ASSERT_NE(ids[j], ids[i]);
		}
		ASSERT_NE(self->c.qid, ids[i]);
	}
	for (int i = 0; i < 6; i++) {
		ASSERT_EQ(0, st_queue_del(self->c.fd, ids[i]));
	}
	for (int i = 0; i < 6; i++) {
		ASSERT_EQ(-ENOENT, st_queue_del(self->c.fd, ids[i]));
	}
}

/*
 * HIGH needs CAP_SYS_NICE: a child that dropped it gets -EACCES for HIGH
 * on the same file and can still create LOW and NORMAL queues.
 */
TEST_F(sub, prio_high_needs_cap_sys_nice)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		uint32_t id;
		int code = 0;

		if (st_drop_cap_sys_nice() || st_has_cap_sys_nice() != 0)
			_exit(10);
		if (st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_HIGH, &id) !=
		    -EACCES)
			code |= 1;
		if (st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_NORMAL, &id))
			code |= 2;
		else if (st_queue_del(self->c.fd, id))
			code |= 4;
		if (st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_LOW, &id))
			code |= 8;
		_exit(code);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("bits: 1 HIGH not -EACCES, 2/4 NORMAL, 8 LOW, 10 capset");
}

/* The runner gives the test user CAP_SYS_NICE: HIGH queues work with it. */
TEST_F(sub, prio_high_with_cap_sys_nice)
{
	uint32_t id;

	if (st_has_cap_sys_nice() != 1)
		SKIP(return, "no CAP_SYS_NICE (vm.sh's runner grants it)");
	ASSERT_EQ(0, st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_HIGH, &id));
	EXPECT_EQ(0, st_queue_del(self->c.fd, id));
}

TEST_F(sub, queue_bad_args)
{
	struct drm_spyre_queue_create c = { .priority = 3 };
	struct drm_spyre_queue_destroy d = { .queue_id = self->c.qid, .pad = 1 };

	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd,
				    DRM_IOCTL_SPYRE_QUEUE_CREATE, &c));
	c.priority = ~0u;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd,
				    DRM_IOCTL_SPYRE_QUEUE_CREATE, &c));
	c = (struct drm_spyre_queue_create){ .priority = 1, .flags = 1 };
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd,
				    DRM_IOCTL_SPYRE_QUEUE_CREATE, &c));
	c = (struct drm_spyre_queue_create){ .priority = 1, .pad = 1 };
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd,
				    DRM_IOCTL_SPYRE_QUEUE_CREATE, &c));
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd,
				    DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d));
	EXPECT_EQ(-ENOENT, st_queue_del(self->c.fd, 0));
	EXPECT_EQ(-ENOENT, st_queue_del(self->c.fd, 0x7fffffff));
	/* the pad-rejected destroy did not destroy the queue */
	EXPECT_EQ(0, st_queue_del(self->c.fd, self->c.qid));
}

TEST_F(sub, queues_are_per_file)
{
	char node[64];
	int fd2;

	ASSERT_NE(NULL, st_node(0, node, sizeof(node)));
	fd2 = open(node, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	EXPECT_EQ(-ENOENT, st_queue_del(fd2, self->c.qid));
	EXPECT_EQ(-ENOENT, st_submit_job(fd2, self->c.qid, self->c.cmd.va,
					 8, NULL, 0, NULL, 0, 0, 0, NULL));
	close(fd2);
}

/* ---- submit basics ------------------------------------------------------ */

TEST_F(sub, nop_signals_binary_syncobj)
{
	uint64_t seqno = 0;

	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 8);
	ASSERT_EQ(0, st_submit_job(self->c.fd, self->c.qid, self->c.cmd.va,
				   8, &self->c.cmd.h, 1, NULL, 0,
				   self->c.sync, 0, &seqno));
	EXPECT_LT(0, seqno);
	ASSERT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
}

TEST_F(sub, timeline_points_and_seqnos)
{
	uint32_t tl;
	uint64_t seq[4], point = 0;

	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &tl));
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 8);
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, st_submit_job(self->c.fd, self->c.qid,
					   self->c.cmd.va, 8,
					   &self->c.cmd.h, 1, NULL, 0, tl,
					   (uint64_t)(10 * (i + 1)),
					   &seq[i]));
		if (i) {
			EXPECT_EQ(seq[i - 1] + 1, seq[i]);
		}
	}
	ASSERT_EQ(0, st_timeline_wait(self->c.fd, tl, 40,
				      ST_TIMEOUT_NS));
	ASSERT_EQ(0, drmSyncobjQuery(self->c.fd, &tl, &point, 1));
	EXPECT_EQ(40, point);
	/* a point nobody will signal times out */
	EXPECT_EQ(-ETIME, st_timeline_wait(self->c.fd, tl, 50, 20000000));
	drmSyncobjDestroy(self->c.fd, tl);
}

TEST_F(sub, bad_cmd_va_and_size)
{
	const uint32_t max = self->c.di.max_cmd_size;
	static const uint32_t bad_sizes[] = { 0, 4, 12, 7 };
	uint32_t h = self->c.cmd.h;

	memset(self->c.cmd.map, 0, ST_CMD_BO_SIZE);	/* NOPs are 8 zero..*/
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		EXPECT_EQ(-EINVAL, st_submit_job(self->c.fd, self->c.qid,
				self->c.cmd.va, bad_sizes[i], &h, 1, NULL, 0,
				0, 0, NULL)) TH_LOG("size %u", bad_sizes[i]);
	}
	EXPECT_EQ(-EINVAL, st_submit_job(self->c.fd, self->c.qid,
			self->c.cmd.va, max + 8, &h, 1, NULL, 0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, st_submit_job(self->c.fd, self->c.qid,
			self->c.cmd.va, ~0u & ~7u, &h, 1, NULL, 0, 0, 0, NULL));
	for (uint64_t off = 1; off < 8; off++) {
		EXPECT_EQ(-EINVAL, st_submit_job(self->c.fd, self->c.qid,
				self->c.cmd.va + off, 8, &h, 1, NULL, 0, 0, 0,
				NULL)) TH_LOG("va + %llu", (unsigned long long)off);
	}
	/* none of this poisoned the context */
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	EXPECT_EQ(0, st_run_cmdbuf(&self->c, self->cb, NULL, 0));
}

TEST_F(sub, bad_ids_and_handles)
{
	struct drm_spyre_sync in = { .handle = 0xdead, .point = 0 };
	uint32_t bad_bo[2] = { self->c.cmd.h, 0xdead };

	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 8);
	EXPECT_EQ(-ENOENT, st_submit_job(self->c.fd, 0, self->c.cmd.va, 8,
					 NULL, 0, NULL, 0, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, st_submit_job(self->c.fd, self->c.qid + 1000,
					 self->c.cmd.va, 8, NULL, 0, NULL,
					 0, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, st_submit_job(self->c.fd, self->c.qid,
					 self->c.cmd.va, 8, bad_bo, 2,
					 NULL, 0, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, st_submit_job(self->c.fd, self->c.qid,
					 self->c.cmd.va, 8, bad_bo, 1,
					 &in, 1, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, st_submit_job(self->c.fd, self->c.qid,
					 self->c.cmd.va, 8, bad_bo, 1,
					 NULL, 0, 0xdead, 0, NULL));
	/* still fine afterwards */
	EXPECT_EQ(0, st_run_cmdbuf(&self->c, self->cb, NULL, 0));
}

/* One-job submit; the kernel writes job_count back (jobs queued). */
#define SUBMIT1(sp) ((sp)->job_count = 1,				\
		     st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, (sp)))

TEST_F(sub, bad_submit_struct)
{
	struct drm_spyre_sync out = { .handle = self->c.sync };
	struct drm_spyre_bo_ref ref = { self->c.cmd.h, DRM_SPYRE_BO_REF_READ };
	struct drm_spyre_job job[2] = { {
		.queue_id = self->c.qid, .cmd_va = self->c.cmd.va,
		.cmd_size = 8, .bo_count = 1,
		.bos = (uintptr_t)&ref,
		.out_syncs = (uintptr_t)&out, .out_sync_count = 1,
	} };
	struct drm_spyre_submit s = { .jobs = (uintptr_t)job, .job_count = 1,
				      .job_stride = sizeof(job[0]) };
	uint8_t big[sizeof(job[0]) + 8];

	memset(self->c.cmd.map, 0, 8);
	self->c.cmd.map[4] = 8;	/* NOP, size 8 */
	s.flags = DRM_SPYRE_SUBMIT_ALL_OR_NOTHING << 1;	/* unknown */
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	s.flags = 0;
	s.error_index = 1;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	s.error_index = 0;
	s.job_count = 0;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &s));
	s.job_count = self->c.di.max_jobs + 1;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &s));
	job[0].flags = DRM_SPYRE_JOB_RESTARTABLE << 1;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	/* a job rejected: the kernel reports how many it queued, none */
	EXPECT_EQ(0, s.job_count);
	job[0].flags = 0;
	out.flags = 1;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	out.flags = 0;
	s.jobs = 16;
	EXPECT_EQ(-EFAULT, SUBMIT1(&s));
	s.jobs = (uintptr_t)job;
	job[0].bo_count = self->c.di.max_bos_per_job + 1;
	EXPECT_GT(0, SUBMIT1(&s));
	job[0].bo_count = 1;
	job[0].bos = 16;
	EXPECT_EQ(-EFAULT, SUBMIT1(&s));
	job[0].bos = (uintptr_t)&ref;
	/* a BO reference needs READ and/or WRITE, nothing else */
	ref.flags = 0;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	ref.flags = DRM_SPYRE_BO_REF_READ | (1u << 2);
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	ref.flags = 1u << 31;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	ref.flags = DRM_SPYRE_BO_REF_READ;
	/* WAIT_FOR_SUBMIT is an in-sync flag: not for out-syncs */
	out.flags = DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	out.flags = 0;
	job[0].in_sync_count = self->c.di.max_syncs_per_job + 1;
	job[0].in_syncs = (uintptr_t)&out;
	EXPECT_GT(0, SUBMIT1(&s));
	job[0].in_sync_count = 0;
	job[0].in_syncs = 0;

	/* strides: multiples of 8 from 24 (through cmd_size) to 4096 */
	s.job_stride = 20;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	s.job_stride = 28;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	s.job_stride = 4096 + 8;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	/*
	 * A 24-byte job (bo_count is in it, its pointer is not): no BOs,
	 * no syncs, no seqno written back.
	 */
	job[0].seqno = 0xfeed;
	job[0].bo_count = 0;
	s.job_stride = 24;
	EXPECT_EQ(0, SUBMIT1(&s));
	EXPECT_EQ(0xfeed, job[0].seqno);
	s.job_stride = sizeof(job[0]);
	job[0].seqno = 0;
	job[0].bo_count = 1;

	/* larger stride: extra bytes must be zero */
	memset(big, 0, sizeof(big));
	memcpy(big, &job[0], sizeof(job[0]));
	s.jobs = (uintptr_t)big;
	s.job_stride = sizeof(big);
	big[sizeof(job[0]) + 3] = 1;
	EXPECT_EQ(-EINVAL, SUBMIT1(&s));
	big[sizeof(job[0]) + 3] = 0;
	EXPECT_EQ(0, SUBMIT1(&s));
	EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	/* a valid two-job array */
	job[1] = job[0];
	s.jobs = (uintptr_t)job;
	s.job_stride = sizeof(job[0]);
	s.job_count = 2;
	EXPECT_EQ(0, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &s));
	EXPECT_EQ(2, s.job_count);
	EXPECT_EQ(job[0].seqno + 1, job[1].seqno);
	EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	/* second job bad: the first is queued and counted */
	job[1].queue_id = 0xdead;
	s.job_count = 2;
	EXPECT_EQ(-ENOENT, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &s));
	EXPECT_EQ(1, s.job_count);
	EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
}

/* ---- command execution -------------------------------------------------- */

FIXTURE(fill) {
	struct st_ctx c;
	struct spyre_cmdbuf *cb;
	uint32_t a;
	uint64_t a_va;
	uint8_t *pa;
};

FIXTURE_VARIANT(fill) {
	uint32_t elem_size;
	uint64_t value;
	uint64_t offset;
	uint64_t count;
};

FIXTURE_VARIANT_ADD(fill, u8) { 1, 0x5a, 3, 4093 };
FIXTURE_VARIANT_ADD(fill, u16) { 2, 0xbeef, 2, 10000 };
FIXTURE_VARIANT_ADD(fill, u32) { 4, 0xa5c3f00d, 4096, 65536 };
FIXTURE_VARIANT_ADD(fill, u64) { 8, 0x0123456789abcdefull, 8, 131071 };

FIXTURE_SETUP(fill)
{
	int ret = st_ctx_init(&self->c, 0);

	if (ret == -ENODEV)
		SKIP(return, "no Spyre card (/dev/accel)");
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, spyre_cmdbuf_create(&self->cb));
	ASSERT_EQ(0, st_bo_new(self->c.fd, DATA_SIZE, &self->a, &self->a_va));
	self->pa = st_bo_mmap(self->c.fd, self->a, DATA_SIZE);
	ASSERT_NE(MAP_FAILED, self->pa);
}

FIXTURE_TEARDOWN(fill)
{
	spyre_cmdbuf_destroy(self->cb);
	st_close(&self->c);
}

TEST_F(fill, readback)
{
	const uint64_t start = variant->offset;
	const uint64_t end = start + variant->count * variant->elem_size;

	memset(self->pa, 0x77, DATA_SIZE);
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va + start,
				       variant->count, variant->elem_size,
				       variant->value));
	ASSERT_EQ(0, st_run_cmdbuf(&self->c, self->cb, &self->a, 1));
	for (uint64_t i = 0; i < DATA_SIZE; i++) {
		uint8_t want = 0x77;

		if (i >= start && i < end)
			want = (uint8_t)(variant->value >>
				(8 * ((i - start) % variant->elem_size)));
		ASSERT_EQ(want, self->pa[i]) TH_LOG("byte %llu",
						    (unsigned long long)i);
	}
}

TEST_F(sub, copy_1d)
{
	for (uint32_t i = 0; i < DATA_SIZE; i++)
		self->pa[i] = st_pat(i, 7);
	memset(self->pb, 0, DATA_SIZE);
	ASSERT_EQ(0, spyre_cmdbuf_copy(self->cb, self->b_va + 5,
				       self->a_va + 3, DATA_SIZE - 4096));
	{
		uint32_t bos[2] = { self->a, self->b };

		ASSERT_EQ(0, st_run_cmdbuf(&self->c, self->cb, bos, 2));
	}
	for (uint32_t i = 0; i < DATA_SIZE; i++) {
		uint8_t want = (i >= 5 && i < 5 + DATA_SIZE - 4096) ?
			       st_pat(i - 2, 7) : 0;

		ASSERT_EQ(want, self->pb[i]) TH_LOG("byte %u", i);
	}
}

TEST_F(sub, copy_2d_pitched)
{
	const uint64_t w = 300, h = 129, sp = 512, dp = 1000;
	uint32_t bos[2] = { self->a, self->b };

	for (uint32_t i = 0; i < DATA_SIZE; i++)
		self->pa[i] = st_pat(i, 9);
	memset(self->pb, 0xcd, DATA_SIZE);
	ASSERT_EQ(0, spyre_cmdbuf_copy_2d(self->cb, self->b_va + 64, dp,
					  SPYRE_DTYPE_U8, self->a_va + 32, sp,
					  SPYRE_DTYPE_U8, w, h, 0));
	ASSERT_EQ(0, st_run_cmdbuf(&self->c, self->cb, bos, 2));
	for (uint64_t i = 0; i < DATA_SIZE; i++) {
		uint8_t want = 0xcd;

		if (i >= 64) {
			uint64_t r = (i - 64) / dp, c = (i - 64) % dp;

			if (r < h && c < w)
				want = st_pat(32 + r * sp + c, 9);
		}
		ASSERT_EQ(want, self->pb[i]) TH_LOG("byte %llu",
						    (unsigned long long)i);
	}
}

TEST_F(sub, many_commands_one_job)
{
	/* 1000 FILLs of one 8-byte word each, then TIMESTAMPs around. */
	uint64_t t0, t1;

	memset(self->pa, 0, DATA_SIZE);
	ASSERT_EQ(0, spyre_cmdbuf_timestamp(self->cb, self->a_va));
	for (uint64_t i = 0; i < 1000; i++) {
		ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb,
					       self->a_va + 64 + 8 * i, 1, 8,
					       i * 0x100000001ull + 1));
	}
	ASSERT_EQ(0, spyre_cmdbuf_timestamp(self->cb, self->a_va + 8));
	ASSERT_GE(ST_CMD_BO_SIZE, spyre_cmdbuf_size(self->cb));
	ASSERT_EQ(0, st_run_cmdbuf(&self->c, self->cb, &self->a, 1));
	for (uint64_t i = 0; i < 1000; i++) {
		uint64_t v;

		memcpy(&v, self->pa + 64 + 8 * i, 8);
		ASSERT_EQ(i * 0x100000001ull + 1, v);
	}
	memcpy(&t0, self->pa, 8);
	memcpy(&t1, self->pa + 8, 8);
	EXPECT_LT(0, t0);
	EXPECT_LE(t0, t1);
}

TEST_F_TIMEOUT(sub, many_jobs_in_a_row, 120)
{
	/* 400 jobs, each its own 40-byte FILL in the command BO. */
	enum { N = 400 };
	uint32_t tl, bos[2] = { self->c.cmd.h, self->a };
	uint64_t prev = 0;

	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &tl));
	memset(self->pa, 0, DATA_SIZE);
	for (uint32_t i = 0; i < N; i++) {
		uint64_t seq;

		spyre_cmdbuf_reset(self->cb);
		ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va + 8 * i, 1,
					       8, 0xf00d0000ull + i));
		memcpy(self->c.cmd.map + 64 * i, spyre_cmdbuf_data(self->cb), 40);
		ASSERT_EQ(0, st_submit_job(self->c.fd, self->c.qid,
					   self->c.cmd.va + 64 * i, 40, bos,
					   2, NULL, 0, tl, i + 1, &seq))
			TH_LOG("job %u", i);
		ASSERT_LT(prev, seq);
		prev = seq;
	}
	ASSERT_EQ(0, st_timeline_wait(self->c.fd, tl, N,
				      ST_TIMEOUT_NS * 4));
	for (uint32_t i = 0; i < N; i++) {
		uint64_t v;

		memcpy(&v, self->pa + 8 * i, 8);
		ASSERT_EQ(0xf00d0000ull + i, v) TH_LOG("job %u", i);
	}
	drmSyncobjDestroy(self->c.fd, tl);
}

TEST_F(sub, in_fence_orders_queues)
{
	/* q1 fills a (large), q2 copies a->b after q1's fence. */
	struct drm_spyre_sync in;
	uint32_t q2, tl, bos[3] = { self->c.cmd.h, self->a, self->b };

	ASSERT_EQ(0, st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_HIGH, &q2));
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &tl));
	memset(self->pa, 0, DATA_SIZE);
	memset(self->pb, 0, DATA_SIZE);
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va, DATA_SIZE / 4, 4,
				       0x600df00d));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 40);
	spyre_cmdbuf_reset(self->cb);
	ASSERT_EQ(0, spyre_cmdbuf_copy(self->cb, self->b_va, self->a_va,
				       DATA_SIZE));
	memcpy(self->c.cmd.map + 1024, spyre_cmdbuf_data(self->cb), 64);

	ASSERT_EQ(0, st_submit_job(self->c.fd, self->c.qid, self->c.cmd.va,
				   40, bos, 3, NULL, 0, tl, 1, NULL));
	in = (struct drm_spyre_sync){ .handle = tl, .point = 1 };
	ASSERT_EQ(0, st_submit_job(self->c.fd, q2, self->c.cmd.va + 1024,
				   64, bos, 3, &in, 1, self->c.sync, 0,
				   NULL));
	ASSERT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	ASSERT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	for (uint32_t i = 0; i < DATA_SIZE; i += 4) {
		uint32_t v;

		memcpy(&v, self->pb + i, 4);
		ASSERT_EQ(0x600df00du, v) TH_LOG("offset %u", i);
	}
}

TEST_F(sub, in_fence_signalled_from_cpu)
{
	/* A timeline point signalled by the CPU is a valid dependency; a
	 * point nobody submitted is refused (DRM core: -EINVAL). */
	struct drm_spyre_sync in;
	uint32_t tl, bos[2] = { self->c.cmd.h, self->a };
	uint64_t p = 1;

	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &tl));
	memset(self->pa, 0, 8);
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va, 1, 8, 0xabcd));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 40);
	in = (struct drm_spyre_sync){ .handle = tl, .point = 1 };
	EXPECT_EQ(-EINVAL, st_submit_job(self->c.fd, self->c.qid,
					 self->c.cmd.va, 40, bos, 2, &in, 1,
					 self->c.sync, 0, NULL));
	ASSERT_EQ(0, drmSyncobjTimelineSignal(self->c.fd, &tl, &p, 1));
	ASSERT_EQ(0, st_submit_job(self->c.fd, self->c.qid, self->c.cmd.va,
				   40, bos, 2, &in, 1, self->c.sync, 0,
				   NULL));
	EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	EXPECT_EQ(0xabcd, *(volatile uint64_t *)self->pa);
}

/* ---- SUBMIT, all or nothing -------------------------------------------- */

/* Job @i of @jobs: FILL 8 bytes of a at @i * 8 with @i + 1, on @qid. */
static void aon_job(struct st_ctx *c, struct drm_spyre_job *job,
		    struct drm_spyre_bo_ref *refs, uint32_t qid, uint64_t a_va,
		    int i)
{
	struct st_cs cs;
	uint64_t va = 0;

	st_cs_reset(&cs);
	st_cs_fill(&cs, a_va + 8 * i, 1, 8, i + 1);
	st_cs_put(c, &cs, &va);
	*job = (struct drm_spyre_job){
		.queue_id = qid, .cmd_va = va, .cmd_size = cs.len,
		.bo_count = 2, .bos = (uintptr_t)refs,
	};
}

/*
 * One past the seqno of a NOP queued (and waited for) now: the next job's,
 * and the NOP's own is the one the queue had to give.
 */
static uint64_t aon_next_seqno(struct st_ctx *c)
{
	uint64_t seqno = 0;

	memset(c->cmd.map + 60000, 0, 8);
	c->cmd.map[60004] = 8;	/* NOP, size 8 */
	if (st_submit_job(c->fd, c->qid, c->cmd.va + 60000, 8, &c->cmd.h, 1,
			  NULL, 0, c->sync, 0, &seqno) ||
	    st_wait_status(c->fd, c->sync, ST_TIMEOUT_NS))
		return 0;
	return seqno + 1;
}

/*
 * With DRM_SPYRE_SUBMIT_ALL_OR_NOTHING a batch with one bad job queues
 * nothing and names the job in error_index, whatever the step that finds
 * it (the checks of the job array, a BO or a syncobj looked up while the
 * jobs are prepared, in the batch's first or a later group); without the
 * flag the jobs before the bad one are queued, as before.
 */
TEST_F(sub, submit_all_or_nothing_bad_job_queues_nothing)
{
	struct drm_spyre_bo_ref refs[2] = {
		{ self->c.cmd.h, DRM_SPYRE_BO_REF_READ },
		{ self->a, DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE } };
	struct drm_spyre_bo_ref bad_ref = { 0x7ffffff0, DRM_SPYRE_BO_REF_READ };
	struct drm_spyre_sync bad_in = { .handle = 0x7ffffff0 };
	struct drm_spyre_sync out = { .handle = self->c.sync };
	struct drm_spyre_job jobs[3];
	struct drm_spyre_submit sub = {
		.jobs = (uintptr_t)jobs, .job_stride = sizeof(jobs[0]),
		.flags = DRM_SPYRE_SUBMIT_ALL_OR_NOTHING,
	};
	static const struct {
		int bad, kind, err;
	} cases[] = {
		{ 1, 0, -ENOENT },	/* a BO handle, in the first group */
		{ 2, 1, -ENOENT },	/* an in-sync, in the second group */
		{ 1, 2, -EINVAL },	/* the job array's own checks */
		{ 0, 0, -ENOENT },
	};
	uint64_t next = aon_next_seqno(&self->c);

	ASSERT_LT(1, next);
	for (unsigned int k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int b = cases[k].bad;

		self->c.cmd_off = 0;
		for (int i = 0; i < 3; i++)
			aon_job(&self->c, &jobs[i], refs, self->c.qid,
				self->a_va, i);
		jobs[2].out_syncs = (uintptr_t)&out;
		jobs[2].out_sync_count = 1;
		if (cases[k].kind == 0) {
			jobs[b].bos = (uintptr_t)&bad_ref;
			jobs[b].bo_count = 1;
		} else if (cases[k].kind == 1) {
			jobs[b].in_syncs = (uintptr_t)&bad_in;
			jobs[b].in_sync_count = 1;
		} else {
			jobs[b].cmd_size = 12;
		}
		memset(self->pa, 0, 24);
		sub.job_count = 3;
		sub.error_index = 0;
		EXPECT_EQ(cases[k].err, st_ioctl(self->c.fd,
						 DRM_IOCTL_SPYRE_SUBMIT, &sub))
			TH_LOG("case %u", k);
		EXPECT_EQ(b, sub.error_index) TH_LOG("case %u", k);
		EXPECT_EQ(3, sub.job_count) TH_LOG("case %u", k);
	}
	/* nothing ran, and the queue's next seqno is the one before */
	usleep(100000);
	EXPECT_EQ(1, st_all_bytes(self->pa, 24, 0));
	EXPECT_EQ(next + 1, aon_next_seqno(&self->c));

	/* without the flag: job 0 is queued and runs, job_count says 1 */
	self->c.cmd_off = 0;
	for (int i = 0; i < 3; i++)
		aon_job(&self->c, &jobs[i], refs, self->c.qid, self->a_va, i);
	jobs[0].out_syncs = (uintptr_t)&out;
	jobs[0].out_sync_count = 1;
	jobs[1].bos = (uintptr_t)&bad_ref;
	jobs[1].bo_count = 1;
	sub.flags = 0;
	sub.job_count = 3;
	EXPECT_EQ(-ENOENT, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	EXPECT_EQ(1, sub.job_count);
	EXPECT_EQ(0, sub.error_index);	/* not written without the flag */
	EXPECT_EQ(0, st_wait_status(self->c.fd, self->c.sync, ST_TIMEOUT_NS));
	EXPECT_EQ(1, ((uint64_t *)self->pa)[0]);
	EXPECT_EQ(0, ((uint64_t *)self->pa)[1]);

	/* unknown flags */
	sub.flags = 2;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	sub.flags = DRM_SPYRE_SUBMIT_ALL_OR_NOTHING | 2;
	sub.job_count = 3;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	EXPECT_EQ(0xffffffffu, sub.error_index);
	EXPECT_EQ(3, sub.job_count);
}

/*
 * A good all-or-nothing batch over two queues, where a job of the second
 * queue waits for an earlier job of the batch on the first: every job
 * runs, in order, and gets its seqno.
 */
TEST_F(sub, submit_all_or_nothing_runs_in_order)
{
	struct drm_spyre_bo_ref refs[3] = {
		{ self->c.cmd.h, DRM_SPYRE_BO_REF_READ },
		{ self->a, DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE },
		{ self->b, DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE } };
	struct drm_spyre_sync mid, o2, out = { .handle = self->c.sync };
	struct drm_spyre_job jobs[3];
	struct drm_spyre_submit sub = {
		.jobs = (uintptr_t)jobs, .job_count = 3,
		.job_stride = sizeof(jobs[0]),
		.flags = DRM_SPYRE_SUBMIT_ALL_OR_NOTHING,
	};
	uint32_t q2, s1, s2;
	struct st_cs cs;
	uint64_t va;

	ASSERT_EQ(0, st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_NORMAL, &q2));
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &s1));
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &s2));
	memset(self->pa, 0, 24);
	memset(self->pb, 0, 8);
	self->c.cmd_off = 0;
	/* job 0 (queue 1): a[0] = 1, signals s1 */
	aon_job(&self->c, &jobs[0], refs, self->c.qid, self->a_va, 0);
	mid = (struct drm_spyre_sync){ .handle = s1 };
	jobs[0].out_syncs = (uintptr_t)&mid;
	jobs[0].out_sync_count = 1;
	jobs[0].bo_count = 3;
	/* job 1 (queue 2): waits for s1, copies a[0] to b[0], signals s2 */
	st_cs_reset(&cs);
	st_cs_bytes(&cs, self->b_va, self->a_va, 8);
	ASSERT_EQ(0, st_cs_put(&self->c, &cs, &va));
	jobs[1] = (struct drm_spyre_job){
		.queue_id = q2, .cmd_va = va, .cmd_size = cs.len,
		.bo_count = 3, .bos = (uintptr_t)refs,
		.in_syncs = (uintptr_t)&mid, .in_sync_count = 1,
	};
	o2 = (struct drm_spyre_sync){ .handle = s2 };
	jobs[1].out_syncs = (uintptr_t)&o2;
	jobs[1].out_sync_count = 1;
	/* job 2 (queue 1): a[2] = 3 */
	aon_job(&self->c, &jobs[2], refs, self->c.qid, self->a_va, 2);
	jobs[2].out_syncs = (uintptr_t)&out;
	jobs[2].out_sync_count = 1;

	ASSERT_EQ(0, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	EXPECT_EQ(3, sub.job_count);
	EXPECT_EQ(0, sub.error_index);
	EXPECT_EQ(0, st_wait_status(self->c.fd, s2, ST_TIMEOUT_NS));
	EXPECT_EQ(0, st_wait_status(self->c.fd, self->c.sync, ST_TIMEOUT_NS));
	EXPECT_EQ(1, ((uint64_t *)self->pa)[0]);
	EXPECT_EQ(3, ((uint64_t *)self->pa)[2]);
	EXPECT_EQ(1, ((uint64_t *)self->pb)[0]);	/* after job 0 */
	EXPECT_LT(0, jobs[0].seqno);
	EXPECT_EQ(jobs[0].seqno + 1, jobs[2].seqno);
	EXPECT_LT(0, jobs[1].seqno);
	EXPECT_EQ(0, st_queue_del(self->c.fd, q2));
}

/*
 * The one step after the jobs are queued, the write-back of the seqnos:
 * with the job array read-only it faults, the call returns -EFAULT with
 * error_index == job_count, and every job still runs and signals.
 */
TEST_F(sub, submit_all_or_nothing_seqno_writeback_fault)
{
	struct drm_spyre_bo_ref refs[2] = {
		{ self->c.cmd.h, DRM_SPYRE_BO_REF_READ },
		{ self->a, DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE } };
	struct drm_spyre_sync out = { .handle = self->c.sync };
	struct drm_spyre_submit sub = {
		.job_count = 2, .job_stride = sizeof(struct drm_spyre_job),
		.flags = DRM_SPYRE_SUBMIT_ALL_OR_NOTHING,
	};
	struct drm_spyre_job *jobs = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, jobs);
	memset(self->pa, 0, 16);
	self->c.cmd_off = 0;
	for (int i = 0; i < 2; i++)
		aon_job(&self->c, &jobs[i], refs, self->c.qid, self->a_va, i);
	jobs[1].out_syncs = (uintptr_t)&out;
	jobs[1].out_sync_count = 1;
	ASSERT_EQ(0, mprotect(jobs, 4096, PROT_READ));
	sub.jobs = (uintptr_t)jobs;
	EXPECT_EQ(-EFAULT, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	EXPECT_EQ(2, sub.error_index);
	EXPECT_EQ(2, sub.job_count);
	EXPECT_EQ(0, st_wait_status(self->c.fd, self->c.sync, ST_TIMEOUT_NS));
	EXPECT_EQ(1, ((uint64_t *)self->pa)[0]);
	EXPECT_EQ(2, ((uint64_t *)self->pa)[1]);
	munmap(jobs, 4096);
}

TEST_F(sub, device_info_limits_are_enforced)
{
	const uint64_t known = DRM_SPYRE_CAP_FP16 | DRM_SPYRE_CAP_BF16 |
			       DRM_SPYRE_CAP_FP8 | DRM_SPYRE_CAP_INT8 |
			       DRM_SPYRE_CAP_MMU | DRM_SPYRE_CAP_SEM |
			       DRM_SPYRE_CAP_KERNEL;
	struct drm_spyre_device_info *di = &self->c.di;
	uint32_t njobs = di->max_jobs, nrefs = di->max_bos_per_job;
	uint32_t nsyncs = di->max_syncs_per_job;
	struct drm_spyre_job *jobs;
	struct drm_spyre_bo_ref *refs;
	struct drm_spyre_sync *in, out = { .handle = self->c.sync };
	struct drm_spyre_submit sub = { .job_stride = sizeof(*jobs) };
	uint64_t p = 1;
	uint32_t tl;

	/* the emulated card has every capability; nothing unknown leaks */
	EXPECT_EQ(known, di->caps);
	EXPECT_EQ(0, di->pad);
	EXPECT_EQ(0, di->reserved[0] | di->reserved[1]);
	ASSERT_LE(1, njobs);
	ASSERT_LE(1, nrefs);
	ASSERT_LE(1, nsyncs);

	/* exactly the reported maxima go through, in one job or in many */
	/* one entry more than the maxima, all valid: only the counts fail */
	jobs = calloc(njobs + 1, sizeof(*jobs));
	refs = calloc(nrefs + 1, sizeof(*refs));
	in = calloc(nsyncs + 1, sizeof(*in));
	ASSERT_TRUE(jobs && refs && in);
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &tl));
	ASSERT_EQ(0, drmSyncobjTimelineSignal(self->c.fd, &tl, &p, 1));
	for (uint32_t i = 0; i <= nrefs; i++)
		refs[i] = (struct drm_spyre_bo_ref){
			i & 1 ? self->a : self->c.cmd.h, DRM_SPYRE_BO_REF_READ };
	for (uint32_t i = 0; i <= nsyncs; i++)
		in[i] = (struct drm_spyre_sync){ .handle = tl, .point = 1 };
	memset(self->c.cmd.map, 0, 8);
	self->c.cmd.map[4] = 8;	/* NOP, size 8 */
	for (uint32_t i = 0; i <= njobs; i++)
		jobs[i] = (struct drm_spyre_job){
			.queue_id = self->c.qid, .cmd_va = self->c.cmd.va,
			.cmd_size = 8,
		};
	jobs[0].bos = (uintptr_t)refs;
	jobs[0].bo_count = nrefs;
	jobs[0].in_syncs = (uintptr_t)in;
	jobs[0].in_sync_count = nsyncs;
	jobs[njobs - 1].out_syncs = (uintptr_t)&out;
	jobs[njobs - 1].out_sync_count = 1;
	sub.jobs = (uintptr_t)jobs;
	sub.job_count = njobs;
	EXPECT_EQ(0, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	EXPECT_EQ(njobs, sub.job_count);
	EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	/* and one more of each is refused, queueing nothing */
	jobs[njobs - 1].out_sync_count = 0;
	sub.job_count = njobs + 1;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT,
				    &sub));
	EXPECT_EQ(0, sub.job_count);
	sub.job_count = 1;
	jobs[0].bo_count = nrefs + 1;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT,
				    &sub));
	jobs[0].bo_count = nrefs;
	sub.job_count = 1;
	jobs[0].in_sync_count = nsyncs + 1;
	EXPECT_EQ(-EINVAL, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT,
				    &sub));
	free(jobs);
	free(refs);
	free(in);
}

/*
 * POLLIN / POLLOUT readiness of a dma-buf within @ms milliseconds (0: right
 * now; a fence that just signalled may still be running its callbacks).
 */
static short dmabuf_ready(int fd, int ms)
{
	struct pollfd in = { .fd = fd, .events = POLLIN };
	struct pollfd out = { .fd = fd, .events = POLLOUT };

	if (poll(&in, 1, ms) < 0 || poll(&out, 1, ms) < 0)
		return -1;
	return in.revents | out.revents;
}

TEST_F(sub, bo_ref_read_and_write_fences)
{
	/*
	 * A job held in SEM_WAIT lists a as READ and b as WRITE.  Through
	 * their dma-bufs: a may be read at once (no writer) but not written
	 * (a reader is busy); b may do neither.  BO_WAIT waits for both.
	 */
	struct drm_spyre_sync out = { .handle = self->c.sync };
	struct drm_spyre_bo_ref refs[4];
	struct drm_spyre_job job = {
		.queue_id = self->c.qid, .cmd_va = self->c.cmd.va,
		.bos = (uintptr_t)refs, .bo_count = 4,
		.out_syncs = (uintptr_t)&out, .out_sync_count = 1,
	};
	struct drm_spyre_submit sub = { .jobs = (uintptr_t)&job,
					.job_count = 1,
					.job_stride = sizeof(job) };
	volatile uint64_t *sem;
	uint64_t sem_va;
	uint32_t sem_h;
	int fa, fb;

	ASSERT_EQ(0, st_bo_new(self->c.fd, 4096, &sem_h, &sem_va));
	sem = st_bo_mmap(self->c.fd, sem_h, 4096);
	ASSERT_NE(MAP_FAILED, (void *)sem);
	*sem = 0;
	ASSERT_EQ(0, drmPrimeHandleToFD(self->c.fd, self->a, DRM_CLOEXEC, &fa));
	ASSERT_EQ(0, drmPrimeHandleToFD(self->c.fd, self->b, DRM_CLOEXEC, &fb));
	EXPECT_EQ(POLLIN | POLLOUT, dmabuf_ready(fa, 0));
	EXPECT_EQ(POLLIN | POLLOUT, dmabuf_ready(fb, 0));

	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(self->cb, sem_va, 1));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb),
	       spyre_cmdbuf_size(self->cb));
	job.cmd_size = (uint32_t)spyre_cmdbuf_size(self->cb);
	refs[0] = (struct drm_spyre_bo_ref){ self->c.cmd.h,
					     DRM_SPYRE_BO_REF_READ };
	refs[1] = (struct drm_spyre_bo_ref){ self->a, DRM_SPYRE_BO_REF_READ };
	refs[2] = (struct drm_spyre_bo_ref){ self->b, DRM_SPYRE_BO_REF_WRITE };
	refs[3] = (struct drm_spyre_bo_ref){ sem_h, DRM_SPYRE_BO_REF_READ };
	ASSERT_EQ(0, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));

	EXPECT_EQ(POLLIN, dmabuf_ready(fa, 0));
	EXPECT_EQ(0, dmabuf_ready(fb, 0));
	EXPECT_EQ(-ETIME, st_bo_wait_abs(self->c.fd, self->a,
					 st_abs_timeout(1000000)));
	EXPECT_EQ(-ETIME, st_bo_wait_abs(self->c.fd, self->b,
					 st_abs_timeout(1000000)));

	*sem = 1;	/* let the job end */
	ASSERT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	EXPECT_EQ(0, st_bo_wait_abs(self->c.fd, self->a,
				    st_abs_timeout(ST_TIMEOUT_NS)));
	EXPECT_EQ(POLLIN | POLLOUT, dmabuf_ready(fa, 1000));
	EXPECT_EQ(POLLIN | POLLOUT, dmabuf_ready(fb, 1000));
	close(fa);
	close(fb);
	munmap((void *)sem, 4096);
}

struct late_signal {
	int fd;
	uint32_t qid, tl;
	uint64_t cmd_va;
	uint32_t cmd_h;
	atomic_int submitting;
	int ret;
};

static void *late_signal_thread(void *arg)
{
	struct late_signal *ls = arg;
	struct timespec d = { 0, 300 * 1000 * 1000 };

	nanosleep(&d, NULL);
	atomic_store(&ls->submitting, 1);
	ls->ret = st_submit_job(ls->fd, ls->qid, ls->cmd_va, 8, &ls->cmd_h,
				1, NULL, 0, ls->tl, 1, NULL);
	return NULL;
}

TEST_F_TIMEOUT(sub, wait_for_submit, 60)
{
	/*
	 * An in-sync flagged WAIT_FOR_SUBMIT on a point another thread
	 * signals later: SUBMIT blocks until that thread submits, then the
	 * job runs.  Within one SUBMIT the point may come from an earlier
	 * job.  A point nobody submits gives -ETIME, queueing nothing.
	 */
	struct late_signal ls = { .fd = self->c.fd, .cmd_va = self->c.cmd.va,
				  .cmd_h = self->c.cmd.h };
	uint32_t bos[2] = { self->c.cmd.h, self->a };
	struct drm_spyre_sync in = { .point = 1,
				     .flags = DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT };
	struct drm_spyre_sync sig = { .point = 1 }, done = {
		.handle = self->c.sync };
	struct drm_spyre_bo_ref refs[2] = {
		{ self->c.cmd.h, DRM_SPYRE_BO_REF_READ },
		{ self->a, DRM_SPYRE_BO_REF_WRITE },
	};
	struct drm_spyre_job jobs[2];
	struct drm_spyre_submit sub = { .jobs = (uintptr_t)jobs,
					.job_count = 2,
					.job_stride = sizeof(jobs[0]) };
	pthread_t th;

	memset(self->c.cmd.map, 0, 8);
	self->c.cmd.map[4] = 8;	/* NOP at offset 0 */
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va, 1, 8, 0x5eed));
	memcpy(self->c.cmd.map + 64, spyre_cmdbuf_data(self->cb), 40);
	ASSERT_EQ(0, st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_NORMAL,
				  &ls.qid));
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &ls.tl));

	/* another thread submits the signalling job 300 ms from now */
	memset(self->pa, 0, 8);
	in.handle = ls.tl;
	ASSERT_EQ(0, pthread_create(&th, NULL, late_signal_thread, &ls));
	EXPECT_EQ(0, st_submit_job(self->c.fd, self->c.qid,
				   self->c.cmd.va + 64, 40, bos, 2, &in, 1,
				   self->c.sync, 0, NULL));
	EXPECT_EQ(1, atomic_load(&ls.submitting));
	pthread_join(th, NULL);
	EXPECT_EQ(0, ls.ret);
	ASSERT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	EXPECT_EQ(0x5eed, *(volatile uint64_t *)self->pa);

	/* job 1 waits for the point job 0 of the same SUBMIT signals */
	ASSERT_EQ(0, drmSyncobjReset(self->c.fd, &self->c.sync, 1));
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &sig.handle));
	in.handle = sig.handle;
	memset(self->pa, 0, 8);
	jobs[0] = (struct drm_spyre_job){
		.queue_id = ls.qid, .cmd_va = self->c.cmd.va, .cmd_size = 8,
		.bos = (uintptr_t)refs, .bo_count = 1,
		.out_syncs = (uintptr_t)&sig, .out_sync_count = 1,
	};
	jobs[1] = (struct drm_spyre_job){
		.queue_id = self->c.qid, .cmd_va = self->c.cmd.va + 64,
		.cmd_size = 40, .bos = (uintptr_t)refs, .bo_count = 2,
		.in_syncs = (uintptr_t)&in, .in_sync_count = 1,
		.out_syncs = (uintptr_t)&done, .out_sync_count = 1,
	};
	EXPECT_EQ(0, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub));
	EXPECT_EQ(2, sub.job_count);
	ASSERT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
	EXPECT_EQ(0x5eed, *(volatile uint64_t *)self->pa);

	/* nobody signals point 7: the DRM core gives up after 5 s */
	in.point = 7;
	sub.jobs = (uintptr_t)&jobs[1];
	sub.job_count = 1;
	EXPECT_EQ(-ETIME, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT,
				   &sub));
	EXPECT_EQ(0, sub.job_count);
	/* the context is not harmed */
	EXPECT_EQ(0, st_run_cmdbuf_at(&self->c, self->cb, 64, &self->a, 1));
}

TEST_F_TIMEOUT(sub, duplicate_bo_refs_with_busy_fences, 120)
{
	/*
	 * A fresh BO listed thrice in one job, as writer, reader and both,
	 * while 0..8 jobs of other queues (held in SEM_WAIT) already have
	 * fences on it: whatever free slots its reservation object has left
	 * (one, with 4 held in 6.12), the job goes in and runs.
	 */
	enum { MAXQ = 8 };
	uint32_t qs[MAXQ], sem_h;
	uint64_t sem_va;
	volatile uint64_t *sem;
	struct drm_spyre_bo_ref held[2], dup[4];
	struct drm_spyre_sync out = { .handle = self->c.sync };
	struct drm_spyre_job job = { .cmd_size = 8,
				     .out_syncs = (uintptr_t)&out };
	struct drm_spyre_submit sub = { .jobs = (uintptr_t)&job,
					.job_count = 1,
					.job_stride = sizeof(job) };
	uint32_t sem_off = 4096;

	ASSERT_EQ(0, st_bo_new(self->c.fd, 4096, &sem_h, &sem_va));
	sem = st_bo_mmap(self->c.fd, sem_h, 4096);
	ASSERT_NE(MAP_FAILED, (void *)sem);
	memset(self->c.cmd.map, 0, 8);
	self->c.cmd.map[4] = 8;	/* NOP at offset 0 */
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(self->cb, sem_va, 1));
	memcpy(self->c.cmd.map + sem_off, spyre_cmdbuf_data(self->cb),
	       spyre_cmdbuf_size(self->cb));
	for (int i = 0; i < MAXQ; i++)
		ASSERT_EQ(0, st_queue_new(self->c.fd,
					  DRM_SPYRE_PRIORITY_NORMAL, &qs[i]));
	held[0] = (struct drm_spyre_bo_ref){ self->c.cmd.h,
					     DRM_SPYRE_BO_REF_READ };
	dup[0] = held[0];
	for (int busy = 0; busy <= MAXQ; busy++) {
		uint32_t x;
		uint64_t x_va;

		ASSERT_EQ(0, st_bo_new(self->c.fd, 4096, &x, &x_va));
		dup[1] = (struct drm_spyre_bo_ref){ x, DRM_SPYRE_BO_REF_WRITE };
		dup[2] = (struct drm_spyre_bo_ref){ x, DRM_SPYRE_BO_REF_READ };
		dup[3] = (struct drm_spyre_bo_ref){ x, DRM_SPYRE_BO_REF_READ |
						       DRM_SPYRE_BO_REF_WRITE };
		*sem = 0;
		for (int i = 0; i < busy; i++) {
			held[1] = (struct drm_spyre_bo_ref){
				x, i & 1 ? DRM_SPYRE_BO_REF_WRITE :
					   DRM_SPYRE_BO_REF_READ };
			job = (struct drm_spyre_job){
				.queue_id = qs[i],
				.cmd_va = self->c.cmd.va + sem_off,
				.cmd_size = (uint32_t)spyre_cmdbuf_size(self->cb),
				.bos = (uintptr_t)held, .bo_count = 2,
			};
			ASSERT_EQ(0, st_ioctl(self->c.fd,
					      DRM_IOCTL_SPYRE_SUBMIT, &sub));
		}
		job = (struct drm_spyre_job){
			.queue_id = self->c.qid, .cmd_va = self->c.cmd.va,
			.cmd_size = 8, .bos = (uintptr_t)dup, .bo_count = 4,
			.out_syncs = (uintptr_t)&out, .out_sync_count = 1,
		};
		ASSERT_EQ(0, drmSyncobjReset(self->c.fd, &self->c.sync, 1));
		ASSERT_EQ(0, st_ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT,
				      &sub)) TH_LOG("%d busy", busy);
		EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
					  ST_TIMEOUT_NS));
		EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
		*sem = 1;	/* release the held jobs */
		EXPECT_EQ(0, st_bo_wait_abs(self->c.fd, x,
				st_abs_timeout(ST_TIMEOUT_NS)));
		EXPECT_EQ(0, drmCloseBufferHandle(self->c.fd, x));
	}
	munmap((void *)sem, 4096);
}

static atomic_int alarms;

static void on_alarm(int sig)
{
	(void)sig;
	atomic_fetch_add(&alarms, 1);
}

TEST_F_TIMEOUT(sub, wait_for_submit_survives_signals, 60)
{
	/*
	 * Signals arrive while SUBMIT waits for a point another thread
	 * submits later.  With SA_RESTART the kernel restarts the ioctl;
	 * without it, raw ioctl() sees -EINTR with job_count untouched and
	 * calls again.  Either way the job (SEM_SIGNAL add 1) runs once.
	 */
	struct late_signal ls = { .fd = self->c.fd, .cmd_va = self->c.cmd.va,
				  .cmd_h = self->c.cmd.h };
	struct drm_spyre_sync in = { .point = 1,
				     .flags = DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT };
	struct drm_spyre_sync out = { .handle = self->c.sync };
	struct drm_spyre_bo_ref refs[2] = {
		{ self->c.cmd.h, DRM_SPYRE_BO_REF_READ },
		{ self->a, DRM_SPYRE_BO_REF_WRITE },
	};
	struct drm_spyre_job job = {
		.queue_id = self->c.qid, .cmd_va = self->c.cmd.va + 64,
		.bos = (uintptr_t)refs, .bo_count = 2,
		.in_syncs = (uintptr_t)&in, .in_sync_count = 1,
		.out_syncs = (uintptr_t)&out, .out_sync_count = 1,
	};
	struct drm_spyre_submit sub = { .jobs = (uintptr_t)&job,
					.job_count = 1,
					.job_stride = sizeof(job) };
	struct itimerval every_50ms = { { 0, 50000 }, { 0, 50000 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa = { .sa_handler = on_alarm };

	memset(self->c.cmd.map, 0, 8);
	self->c.cmd.map[4] = 8;	/* NOP at offset 0 */
	ASSERT_EQ(0, spyre_cmdbuf_sem_signal(self->cb, self->a_va, 1,
					     SPYRE_SEM_F_ADD));
	memcpy(self->c.cmd.map + 64, spyre_cmdbuf_data(self->cb),
	       spyre_cmdbuf_size(self->cb));
	job.cmd_size = (uint32_t)spyre_cmdbuf_size(self->cb);
	ASSERT_EQ(0, st_queue_new(self->c.fd, DRM_SPYRE_PRIORITY_NORMAL,
				  &ls.qid));

	for (int restart = 1; restart >= 0; restart--) {
		pthread_t th;
		int ret, eintr = 0;

		ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &ls.tl));
		in.handle = ls.tl;
		*(volatile uint64_t *)self->pa = 0;
		atomic_store(&alarms, 0);
		atomic_store(&ls.submitting, 0);
		sa.sa_flags = restart ? SA_RESTART : 0;
		ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
		ASSERT_EQ(0, drmSyncobjReset(self->c.fd, &self->c.sync, 1));
		ASSERT_EQ(0, pthread_create(&th, NULL, late_signal_thread,
					    &ls));
		ASSERT_EQ(0, setitimer(ITIMER_REAL, &every_50ms, NULL));
		do {
			ret = ioctl(self->c.fd, DRM_IOCTL_SPYRE_SUBMIT, &sub);
			if (ret && errno == EINTR) {
				eintr++;
				EXPECT_EQ(1, sub.job_count);
			}
		} while (ret && errno == EINTR);
		setitimer(ITIMER_REAL, &off, NULL);
		pthread_join(th, NULL);
		EXPECT_EQ(0, ret) TH_LOG("errno %d", errno);
		EXPECT_EQ(1, sub.job_count);
		EXPECT_EQ(0, ls.ret);
		EXPECT_EQ(1, atomic_load(&ls.submitting));
		EXPECT_LT(0, atomic_load(&alarms));
		if (restart) {
			EXPECT_EQ(0, eintr);
		} else {
			EXPECT_LT(0, eintr);
		}
		ASSERT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
					  ST_TIMEOUT_NS));
		EXPECT_EQ(1, st_sync_status(self->c.fd, self->c.sync));
		EXPECT_EQ(1, *(volatile uint64_t *)self->pa)
			TH_LOG("the job ran %llu times",
			       (unsigned long long)*(volatile uint64_t *)self->pa);
	}
	signal(SIGALRM, SIG_DFL);
}

/* ---- errors ------------------------------------------------------------- */

TEST_F(sub, fault_is_fence_error_and_sticky)
{
	struct st_ctx other;
	uint32_t bos[1] = { self->a };

	ASSERT_EQ(0, st_ctx_init(&other, 0));
	/* The guard page right after BO a is unmapped. */
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va + DATA_SIZE, 1, 8,
				       1));
	EXPECT_EQ(-EFAULT, st_run_cmdbuf(&self->c, self->cb, bos, 1));
	/* Sticky: later submits on this file fail. */
	spyre_cmdbuf_reset(self->cb);
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	EXPECT_EQ(-ECANCELED, st_run_cmdbuf_at(&self->c, self->cb, 4096, NULL,
					       0));
	{
		uint32_t q2;

		/* even on a new queue of the same file */
		if (st_queue_new(self->c.fd, 1, &q2) == 0) {
			EXPECT_EQ(-ECANCELED, st_submit_job(self->c.fd, q2,
				self->c.cmd.va + 4096, 8, &self->c.cmd.h, 1,
				NULL, 0, 0, 0, NULL));
		}
	}
	/* Another file is untouched. */
	EXPECT_EQ(0, st_run_cmdbuf(&other, self->cb, NULL, 0));
	{
		uint32_t ob;
		uint64_t ova;
		uint8_t *p;

		ASSERT_EQ(0, st_bo_new(other.fd, PAGE, &ob, &ova));
		p = st_bo_mmap(other.fd, ob, PAGE);
		ASSERT_NE(MAP_FAILED, p);
		spyre_cmdbuf_reset(self->cb);
		ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, ova, PAGE, 1, 0x42));
		EXPECT_EQ(0, st_run_cmdbuf(&other, self->cb, &ob, 1));
		EXPECT_EQ(0x42, p[0]);
		EXPECT_EQ(0x42, p[PAGE - 1]);
		munmap(p, PAGE);
	}
	st_close(&other);
}

TEST_F(sub, unmapped_cmd_stream_faults)
{
	/* The stream itself lies in the guard page after the command BO. */
	EXPECT_EQ(0, st_submit_job(self->c.fd, self->c.qid,
				   self->c.cmd.va + ST_CMD_BO_SIZE, 8,
				   &self->c.cmd.h, 1, NULL, 0,
				   self->c.sync, 0, NULL));
	EXPECT_EQ(0, st_sync_wait(self->c.fd, self->c.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(-EFAULT, st_sync_status(self->c.fd, self->c.sync));
}

FIXTURE(badcmd) {
	struct st_ctx c;
};

FIXTURE_VARIANT(badcmd) {
	uint8_t cmd[64];
	uint32_t size;
	int err;
};

FIXTURE_VARIANT_ADD(badcmd, unknown_opcode) {
	.cmd = { 0x7f, 0, 0, 0, 8 }, .size = 8, .err = -EIO };
FIXTURE_VARIANT_ADD(badcmd, opcode_count) {
	.cmd = { SPYRE_OP_COUNT, 0, 0, 0, 8 }, .size = 8, .err = -EIO };
FIXTURE_VARIANT_ADD(badcmd, nop_wrong_size) {
	.cmd = { 0, 0, 0, 0, 16 }, .size = 16, .err = -EIO };
FIXTURE_VARIANT_ADD(badcmd, nop_bad_flags) {
	.cmd = { 0, 0, 1, 0, 8 }, .size = 8, .err = -EIO };
FIXTURE_VARIANT_ADD(badcmd, size_past_stream) {
	.cmd = { SPYRE_OP_FILL, 0, 0, 0, 40 }, .size = 8, .err = -EIO };
FIXTURE_VARIANT_ADD(badcmd, fill_bad_elem_size) {
	.cmd = { SPYRE_OP_FILL, 0, 0, 0, 40, 0, 0, 0,
		 0, 0, 0, 0, 1, 0, 0, 0,	/* dst 4 GiB */
		 1, 0, 0, 0, 0, 0, 0, 0,	/* count 1 */
		 0, 0, 0, 0, 0, 0, 0, 0,	/* value */
		 3, 0, 0, 0, 0, 0, 0, 0 },	/* elem_size 3 */
	.size = 40, .err = -EIO };
FIXTURE_VARIANT_ADD(badcmd, zero_size_header) {
	.cmd = { 0, 0, 0, 0, 0 }, .size = 8, .err = -EIO };

FIXTURE_SETUP(badcmd)
{
	int ret = st_ctx_init(&self->c, 0);

	if (ret == -ENODEV)
		SKIP(return, "no Spyre card (/dev/accel)");
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(badcmd)
{
	st_close(&self->c);
}

TEST_F(badcmd, fence_error)
{
	struct spyre_cmdbuf *cb;

	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_raw(cb, variant->cmd, variant->size));
	EXPECT_EQ(variant->err, st_run_cmdbuf(&self->c, cb, NULL, 0));
	spyre_cmdbuf_destroy(cb);
}

TEST_F(sub, closed_bo_in_list)
{
	uint32_t bos[1] = { self->b };

	munmap(self->pb, DATA_SIZE);
	self->pb = NULL;
	ASSERT_EQ(0, drmCloseBufferHandle(self->c.fd, self->b));
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	EXPECT_EQ(-ENOENT, st_run_cmdbuf(&self->c, self->cb, bos, 1));
	/* The freed BO's VA is unmapped: using it faults. */
	spyre_cmdbuf_reset(self->cb);
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->b_va, 1, 8, 1));
	EXPECT_EQ(-EFAULT, st_run_cmdbuf_at(&self->c, self->cb, 4096, NULL, 0));
}

/* ---- lifetime and isolation --------------------------------------------- */

TEST_F_TIMEOUT(sub, close_fd_with_jobs_in_flight, 120)
{
	uint32_t bos[2] = { self->c.cmd.h, self->a };
	struct st_ctx c2;

	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va, DATA_SIZE / 8, 8,
				       0x1122334455667788ull));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 40);
	for (int i = 0; i < 64; i++) {
		ASSERT_EQ(0, st_submit_job(self->c.fd, self->c.qid,
					   self->c.cmd.va, 40, bos, 2, NULL,
					   0, 0, 0, NULL));
	}
	munmap(self->pa, DATA_SIZE);
	munmap(self->pb, DATA_SIZE);
	munmap(self->c.cmd.map, ST_CMD_BO_SIZE);
	self->pa = self->pb = NULL;
	self->c.cmd.map = NULL;
	close(self->c.fd);
	self->c.fd = -1;
	/* The card keeps working for a new file. */
	ASSERT_EQ(0, st_ctx_init(&c2, 0));
	spyre_cmdbuf_reset(self->cb);
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	EXPECT_EQ(0, st_run_cmdbuf(&c2, self->cb, NULL, 0));
	st_close(&c2);
}

TEST_F_TIMEOUT(sub, queue_destroy_with_jobs_in_flight, 120)
{
	uint32_t q2, tl, bos[2] = { self->c.cmd.h, self->a };

	ASSERT_EQ(0, st_queue_new(self->c.fd, 0, &q2));
	ASSERT_EQ(0, drmSyncobjCreate(self->c.fd, 0, &tl));
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va, DATA_SIZE / 8, 8,
				       7));
	memcpy(self->c.cmd.map, spyre_cmdbuf_data(self->cb), 40);
	for (uint64_t i = 1; i <= 32; i++) {
		ASSERT_EQ(0, st_submit_job(self->c.fd, q2, self->c.cmd.va,
					   40, bos, 2, NULL, 0, tl, i,
					   NULL));
	}
	ASSERT_EQ(0, st_queue_del(self->c.fd, q2));
	/* Every fence signals (completed or cancelled), none hangs. */
	EXPECT_EQ(0, st_timeline_wait(self->c.fd, tl, 32,
				      ST_TIMEOUT_NS * 3));
	/* The context is not poisoned by destroying its own queue. */
	spyre_cmdbuf_reset(self->cb);
	ASSERT_EQ(0, spyre_cmdbuf_nop(self->cb));
	EXPECT_EQ(0, st_run_cmdbuf_at(&self->c, self->cb, 4096, NULL, 0));
}

TEST_F(sub, two_processes_own_contexts)
{
	pid_t pid;
	int status;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct st_ctx c;
		struct spyre_cmdbuf *cb;
		struct drm_spyre_bo_info info;
		uint32_t h;
		uint64_t va;
		uint8_t *p;

		if (st_ctx_init(&c, 0) || spyre_cmdbuf_create(&cb))
			_exit(10);
		/* parent's handles mean nothing in the child's own file */
		if (st_bo_get_info(c.fd, self->a, &info) != -ENOENT &&
		    self->a != c.cmd.h)
			_exit(11);
		if (st_bo_new(c.fd, DATA_SIZE, &h, &va))
			_exit(12);
		p = st_bo_mmap(c.fd, h, DATA_SIZE);
		if (p == MAP_FAILED)
			_exit(13);
		spyre_cmdbuf_fill(cb, va, DATA_SIZE, 1, 0xc1);
		if (st_run_cmdbuf(&c, cb, &h, 1))
			_exit(14);
		for (uint32_t i = 0; i < DATA_SIZE; i++)
			if (p[i] != 0xc1)
				_exit(15);
		_exit(0);
	}
	ASSERT_EQ(0, spyre_cmdbuf_fill(self->cb, self->a_va, DATA_SIZE, 1,
				       0xa1));
	ASSERT_EQ(0, st_run_cmdbuf(&self->c, self->cb, &self->a, 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	for (uint32_t i = 0; i < DATA_SIZE; i++) {
		ASSERT_EQ(0xa1, self->pa[i]);
	}
}

TEST(second_card_works)
{
	struct st_ctx c;
	struct spyre_cmdbuf *cb;
	uint32_t h;
	uint64_t va;
	uint8_t *p;
	int ret = st_ctx_init(&c, 1);

	if (ret == -ENODEV)
		SKIP(return, "only one Spyre card");
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, st_bo_new(c.fd, 8 * PAGE, &h, &va));
	p = st_bo_mmap(c.fd, h, 8 * PAGE);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, va, 8 * PAGE / 2, 2, 0x1234));
	ASSERT_EQ(0, st_run_cmdbuf(&c, cb, &h, 1));
	for (uint32_t i = 0; i < 8 * PAGE; i += 2) {
		ASSERT_EQ(0x1234, p[i] | p[i + 1] << 8);
	}
	spyre_cmdbuf_destroy(cb);
	st_close(&c);
}

TEST_HARNESS_MAIN
