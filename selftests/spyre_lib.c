// SPDX-License-Identifier: MIT
/*
 * spyre_lib: libspyre on a real card: discovery, open, info, BOs, streams,
 * cmdbuf submission, fences and their errors, fork detection, threads.
 */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"
#include "spyre_hw.h"	/* the card's PCI IDs */

#define T_NS ST_TIMEOUT_NS

FIXTURE(lib) {
	struct spyre_device *dev;
	struct spyre_device_info info;
};

FIXTURE_SETUP(lib)
{
	int ret = st_lib_open(&self->dev, &self->info, NULL);

	if (ret == -ENODEV)
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(lib)
{
	spyre_device_close(self->dev);
}

TEST_F(lib, info_matches_query)
{
	struct drm_spyre_device_info di;

	ASSERT_EQ(0, st_query_info(spyre_device_fd(self->dev), &di));
	EXPECT_STREQ("spyre", self->info.driver_name);
	EXPECT_EQ(0, self->info.desc.index);
	EXPECT_EQ(SPYRE_PCI_VENDOR_ID, self->info.desc.vendor_id);
	EXPECT_EQ(SPYRE_PCI_DEVICE_ID, self->info.desc.device_id);
	EXPECT_EQ(di.num_cores, self->info.num_cores);
	EXPECT_EQ(di.num_queues, self->info.num_queues);
	EXPECT_EQ(di.devmem_size, self->info.devmem_size);
	EXPECT_EQ(di.caps, self->info.caps);
	EXPECT_EQ(di.va_start, self->info.va_start);
	EXPECT_EQ(di.va_end, self->info.va_end);
	EXPECT_EQ(di.max_cmd_size, self->info.max_cmd_size);
	EXPECT_EQ(0, spyre_device_error(self->dev));
}

TEST_F(lib, open_by_pci_and_path)
{
	struct spyre_device *d2;
	struct spyre_device_info i2;

	ASSERT_EQ(0, spyre_device_open_pci(self->info.desc.pci_addr, &d2));
	ASSERT_EQ(0, spyre_device_get_info(d2, &i2));
	EXPECT_STREQ(self->info.desc.pci_addr, i2.desc.pci_addr);
	EXPECT_STREQ(self->info.desc.devnode, i2.desc.devnode);
	/* a different open is a different file */
	EXPECT_NE(spyre_device_fd(self->dev), spyre_device_fd(d2));
	spyre_device_close(d2);
	/* short form without domain */
	ASSERT_EQ(0, spyre_device_open_pci(self->info.desc.pci_addr + 5, &d2));
	spyre_device_close(d2);
	ASSERT_EQ(0, spyre_device_open_path(self->info.desc.devnode, &d2));
	ASSERT_EQ(0, spyre_device_get_info(d2, &i2));
	EXPECT_STREQ(self->info.desc.pci_addr, i2.desc.pci_addr);
	EXPECT_EQ(UINT32_MAX, i2.desc.index);
	spyre_device_close(d2);
	EXPECT_EQ(-ENODEV, spyre_device_open_pci("00ff:1f:1f.7", &d2));
	EXPECT_EQ(-EINVAL, spyre_device_open_pci("nonsense", &d2));
	EXPECT_EQ(-ENODEV, spyre_device_open_path("/dev/null", &d2));
}

TEST_F(lib, visible_devices_env)
{
	struct spyre_device_desc all[16], d[16];
	int n = spyre_device_list(all, 16);
	struct spyre_device *d2;

	ASSERT_LT(0, n);
	ASSERT_EQ(0, setenv("SPYRE_VISIBLE_DEVICES", "", 1));
	EXPECT_EQ(0, spyre_device_count());
	EXPECT_EQ(-ENODEV, spyre_device_open(0, &d2));
	EXPECT_EQ(-ENODEV, spyre_device_open_pci(all[0].pci_addr, &d2));
	ASSERT_EQ(0, setenv("SPYRE_VISIBLE_DEVICES", "0", 1));
	EXPECT_EQ(1, spyre_device_count());
	ASSERT_EQ(0, setenv("SPYRE_VISIBLE_DEVICES", "0,x", 1));
	EXPECT_EQ(-EINVAL, spyre_device_count());
	if (n >= 2) {
		ASSERT_EQ(0, setenv("SPYRE_VISIBLE_DEVICES", "1,0", 1));
		ASSERT_EQ(2, spyre_device_list(d, 16));
		EXPECT_STREQ(all[1].pci_addr, d[0].pci_addr);
		EXPECT_STREQ(all[0].pci_addr, d[1].pci_addr);
		ASSERT_EQ(0, spyre_device_open(0, &d2));
		{
			struct spyre_device_info i2;

			spyre_device_get_info(d2, &i2);
			EXPECT_STREQ(all[1].pci_addr, i2.desc.pci_addr);
			EXPECT_EQ(1, i2.desc.phys_index);
		}
		spyre_device_close(d2);
	}
	unsetenv("SPYRE_VISIBLE_DEVICES");
	EXPECT_EQ(n, spyre_device_count());
}

TEST_F(lib, bo_alloc_map_free)
{
	struct spyre_bo *bo, *bo2;
	uint8_t *p, *p2;

	EXPECT_EQ(-EINVAL, spyre_bo_alloc(self->dev, 0, 0, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_alloc(self->dev, 4096, 2, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_alloc(self->dev, 4096, ~0u, &bo));
	EXPECT_EQ(-E2BIG, spyre_bo_alloc(self->dev, 1ull << 52, 0, &bo));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 5000, 0, &bo));
	EXPECT_EQ(8192, spyre_bo_size(bo));
	EXPECT_EQ(0, spyre_bo_va(bo) % 4096);
	EXPECT_LE(self->info.va_start, spyre_bo_va(bo));
	EXPECT_NE(0, spyre_bo_handle(bo));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p2));
	EXPECT_EQ(p, p2);
	for (int i = 0; i < 8192; i++) {
		ASSERT_EQ(0, p[i]);
	}
	memset(p, 0x9c, 8192);
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo2));
	/* no overlap, guard page in between, whichever comes first */
	EXPECT_TRUE(spyre_bo_va(bo2) >= spyre_bo_va(bo) + 8192 + 4096 ||
		    spyre_bo_va(bo) >= spyre_bo_va(bo2) + 4096 + 4096);
	spyre_bo_free(bo);
	spyre_bo_free(bo2);
	/* device may be closed before its BOs are freed */
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	spyre_device_close(self->dev);
	self->dev = NULL;
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	p[0] = 1;
	spyre_bo_free(bo);
}

TEST_F(lib, stream_fill_copy_2d)
{
	struct spyre_stream *s;
	struct spyre_bo *a, *b;
	uint8_t *pa, *pb;
	const uint64_t size = 256 * 1024;
	struct spyre_fence f;

	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_PRIORITY_NORMAL, &s));
	ASSERT_EQ(0, spyre_stream_last_fence(s, &f));
	EXPECT_EQ(NULL, f.queue);
	EXPECT_EQ(0, spyre_stream_sync(s, T_NS));	/* empty stream */
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, size, 0, &a));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, size, 0, &b));
	ASSERT_EQ(0, spyre_bo_map(a, (void **)&pa));
	ASSERT_EQ(0, spyre_bo_map(b, (void **)&pb));

	EXPECT_EQ(-ERANGE, spyre_stream_fill(s, a, size - 4, 2, 4, 0));
	EXPECT_EQ(-ERANGE, spyre_stream_copy(s, b, 1, a, 0, size));
	EXPECT_EQ(-ERANGE, spyre_stream_copy_2d(s, b, 0, 4096, a, 0, 4096,
						4096, 65));
	EXPECT_EQ(-EINVAL, spyre_stream_copy_2d(s, b, 0, 100, a, 0, 4096,
						200, 2));
	EXPECT_EQ(-EINVAL, spyre_stream_fill(s, a, 0, 1, 3, 0));

	ASSERT_EQ(0, spyre_stream_fill(s, a, 0, size / 4, 4, 0xcafebabe));
	ASSERT_EQ(0, spyre_stream_copy(s, b, 0, a, 0, size));
	ASSERT_EQ(0, spyre_stream_sync(s, T_NS));
	for (uint64_t i = 0; i < size; i += 4) {
		uint32_t v;

		memcpy(&v, pb + i, 4);
		ASSERT_EQ(0xcafebabe, v);
	}
	for (uint64_t i = 0; i < size; i++)
		pa[i] = st_pat(i, 3);
	ASSERT_EQ(0, spyre_stream_fill(s, b, 0, size, 1, 0));
	ASSERT_EQ(0, spyre_stream_copy_2d(s, b, 100, 1500, a, 7, 1024, 999,
					  150));
	ASSERT_EQ(0, spyre_stream_sync(s, T_NS));
	for (uint64_t i = 0; i < size; i++) {
		uint8_t want = 0;

		if (i >= 100 && (i - 100) / 1500 < 150 && (i - 100) % 1500 < 999)
			want = st_pat(7 + (i - 100) / 1500 * 1024 +
				      (i - 100) % 1500, 3);
		ASSERT_EQ(want, pb[i]) TH_LOG("byte %llu", (unsigned long long)i);
	}
	ASSERT_EQ(0, spyre_stream_last_fence(s, &f));
	EXPECT_EQ(spyre_stream_queue(s), f.queue);
	EXPECT_EQ(4, f.point);	/* 4 operations were enqueued */
	spyre_bo_free(a);
	spyre_bo_free(b);
	spyre_stream_destroy(s);
}

/*
 * libspyre reports a high-priority stream asked for without CAP_SYS_NICE
 * as -EACCES, with a message that names the capability, and creates no
 * stream (no silent fallback).
 */
TEST_F(lib, prio_high_stream_unprivileged)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct spyre_stream *s = NULL;
		struct spyre_device *dev;
		int code = 0;

		/* a child opens the card anew (libspyre's fork rule) */
		if (st_drop_cap_sys_nice() || spyre_device_open(0, &dev))
			_exit(10);
		if (spyre_stream_create(dev, SPYRE_PRIORITY_HIGH, &s) !=
		    -EACCES || s)
			code |= 1;
		if (!strstr(spyre_strerror(-EACCES), "CAP_SYS_NICE"))
			code |= 2;
		if (spyre_stream_create(dev, SPYRE_PRIORITY_NORMAL, &s))
			code |= 4;
		else
			spyre_stream_destroy(s);
		spyre_device_close(dev);
		_exit(code);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("bits: 1 HIGH not -EACCES, 2 message, 4 NORMAL");
}

TEST_F(lib, submit_cmdbuf_with_dependencies)
{
	struct spyre_queue *q1, *q2;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo;
	struct spyre_fence f1, f2, zero = { 0 };
	uint64_t *p;

	ASSERT_EQ(0, spyre_queue_create(self->dev, SPYRE_PRIORITY_LOW, &q1));
	ASSERT_EQ(0, spyre_queue_create(self->dev, SPYRE_PRIORITY_HIGH, &q2));
	EXPECT_NE(spyre_queue_id(q1), spyre_queue_id(q2));
	EXPECT_EQ(-EINVAL, spyre_queue_create(self->dev, 3, &q1));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 1 << 20, 0, &bo));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	EXPECT_EQ(-EINVAL, spyre_submit(q1, cb, &bo, 1, NULL, 0, &f1));

	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo), (1 << 20) / 8, 8,
				       0x1111222233334444ull));
	ASSERT_EQ(0, spyre_submit(q1, cb, &bo, 1, NULL, 0, &f1));
	spyre_cmdbuf_reset(cb);
	ASSERT_EQ(0, spyre_cmdbuf_copy(cb, spyre_bo_va(bo) + (512 << 10),
				       spyre_bo_va(bo), 512 << 10));
	ASSERT_EQ(0, spyre_cmdbuf_timestamp(cb, spyre_bo_va(bo) + 8));
	{
		struct spyre_fence deps[2] = { f1, zero };

		ASSERT_EQ(0, spyre_submit(q2, cb, &bo, 1, deps, 2, &f2));
	}
	EXPECT_EQ(q2, f2.queue);
	EXPECT_EQ(1, f2.point);
	ASSERT_EQ(0, spyre_fence_wait(&f2, T_NS));
	ASSERT_EQ(0, spyre_fence_query(&f1));
	for (size_t i = 0; i < (1 << 20) / 8; i++) {
		if (i == 1) {
			continue;	/* timestamp */
		ASSERT_EQ(0x1111222233334444ull, p[i]) TH_LOG("word %zu", i);
		}
	}
	EXPECT_NE(0x1111222233334444ull, p[1]);
	EXPECT_EQ(0, spyre_fence_wait(&zero, 0));
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
	spyre_queue_destroy(q1);
	spyre_queue_destroy(q2);
}

TEST_F(lib, cmdbuf_upload_and_replay)
{
	struct spyre_queue *q;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo, *cmd;
	struct spyre_fence f;
	uint32_t *p;

	ASSERT_EQ(0, spyre_queue_create(self->dev, 1, &q));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	/* each replay adds 1 to a semaphore word */
	ASSERT_EQ(0, spyre_cmdbuf_sem_signal(cb, spyre_bo_va(bo), 1,
					     SPYRE_SEM_F_ADD));
	ASSERT_EQ(0, spyre_cmdbuf_upload(cb, self->dev, &cmd));
	for (int i = 0; i < 5; i++) {
		struct spyre_bo *bos[2] = { cmd, bo };

		ASSERT_EQ(0, spyre_submit_va(q, spyre_bo_va(cmd),
					     (uint32_t)spyre_cmdbuf_size(cb),
					     bos, 2, NULL, 0, &f));
	}
	ASSERT_EQ(0, spyre_fence_wait(&f, T_NS));
	EXPECT_EQ(5, p[0]);
	EXPECT_EQ(0, p[1]);
	spyre_bo_free(cmd);
	spyre_bo_free(bo);
	spyre_cmdbuf_destroy(cb);
	spyre_queue_destroy(q);
}

TEST_F(lib, fence_timeout_and_sem_wait)
{
	struct spyre_queue *q;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo;
	struct spyre_fence f;
	volatile uint64_t *p;
	int sfd;

	ASSERT_EQ(0, spyre_queue_create(self->dev, 1, &q));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(bo), 3));
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) + 8, 1, 8, 77));
	ASSERT_EQ(0, spyre_submit(q, cb, &bo, 1, NULL, 0, &f));
	EXPECT_EQ(-ETIMEDOUT, spyre_fence_wait(&f, 50 * 1000 * 1000));
	EXPECT_EQ(-EBUSY, spyre_fence_query(&f));
	ASSERT_EQ(0, spyre_fence_export_sync_file(&f, &sfd));
	{
		struct pollfd pfd = { .fd = sfd, .events = POLLIN };

		EXPECT_EQ(0, poll(&pfd, 1, 0));
		p[0] = 3;	/* release the card-side wait */
		EXPECT_EQ(1, poll(&pfd, 1, 20000));
	}
	close(sfd);
	EXPECT_EQ(0, spyre_fence_wait(&f, T_NS));
	EXPECT_EQ(77, p[1]);
	spyre_bo_free(bo);
	spyre_cmdbuf_destroy(cb);
	spyre_queue_destroy(q);
}

TEST_F(lib, fault_maps_to_efault_and_sticks)
{
	struct spyre_stream *s;
	struct spyre_queue *q;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo;
	struct spyre_fence f;
	struct spyre_device *d2;

	ASSERT_EQ(0, spyre_queue_create(self->dev, 1, &q));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	/* write into the guard page after the BO */
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) + 4096, 1, 8, 5));
	ASSERT_EQ(0, spyre_submit(q, cb, &bo, 1, NULL, 0, &f));
	EXPECT_EQ(-EFAULT, spyre_fence_wait(&f, T_NS));
	EXPECT_EQ(-EFAULT, spyre_fence_wait(&f, 0));	/* repeatable */
	EXPECT_EQ(-EFAULT, spyre_device_error(self->dev));
	spyre_cmdbuf_reset(cb);
	ASSERT_EQ(0, spyre_cmdbuf_nop(cb));
	EXPECT_EQ(-ECANCELED, spyre_submit(q, cb, NULL, 0, NULL, 0, &f));
	ASSERT_EQ(0, spyre_stream_create(self->dev, 1, &s));
	EXPECT_EQ(-ECANCELED, spyre_stream_fill(s, bo, 0, 1, 1, 0));
	EXPECT_EQ(-ECANCELED, spyre_stream_sync(s, T_NS));
	EXPECT_EQ(-EFAULT, spyre_device_error(self->dev));
	spyre_stream_destroy(s);
	/* A fresh open is a fresh context. */
	ASSERT_EQ(0, spyre_device_open(0, &d2));
	EXPECT_EQ(0, spyre_device_error(d2));
	{
		struct spyre_queue *q2;

		ASSERT_EQ(0, spyre_queue_create(d2, 1, &q2));
		ASSERT_EQ(0, spyre_submit(q2, cb, NULL, 0, NULL, 0, &f));
		EXPECT_EQ(0, spyre_fence_wait(&f, T_NS));
		/* fences and BOs do not cross devices */
		EXPECT_EQ(-EXDEV, spyre_submit(q2, cb, &bo, 1, NULL, 0, &f));
		spyre_queue_destroy(q2);
	}
	spyre_device_close(d2);
	spyre_bo_free(bo);
	spyre_cmdbuf_destroy(cb);
	spyre_queue_destroy(q);
}

TEST_F_TIMEOUT(lib, old_fences_and_ring_wrap, 180)
{
	/* 300 submissions of ~1.5 KiB each wrap the 64 KiB upload ring many
	 * times; fences older than the exact-error window still wait OK. */
	struct spyre_queue *q;
	struct spyre_cmdbuf *cb;
	struct spyre_bo *bo;
	struct spyre_fence first, f;
	uint64_t *p;

	ASSERT_EQ(0, spyre_queue_create(self->dev, 1, &q));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 300 * 8, 0, &bo));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	for (uint64_t i = 0; i < 300; i++) {
		spyre_cmdbuf_reset(cb);
		for (int k = 0; k < 30; k++) {
			ASSERT_EQ(0, spyre_cmdbuf_nop(cb));
		}
		ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) + 8 * i, 1,
					       8, i + 1000));
		for (int k = 0; k < 4; k++) {
			ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) +
						       8 * i, 1, 8, i + 1000));
		}
		ASSERT_EQ(0, spyre_submit(q, cb, &bo, 1, NULL, 0, &f))
			TH_LOG("submit %llu", (unsigned long long)i);
		if (i == 0)
			first = f;
	}
	EXPECT_EQ(300, f.point);
	ASSERT_EQ(0, spyre_fence_wait(&f, 4 * T_NS));
	EXPECT_EQ(0, spyre_fence_wait(&first, 0));
	for (uint64_t i = 0; i < 300; i++) {
		ASSERT_EQ(i + 1000, p[i]) TH_LOG("word %llu",
						 (unsigned long long)i);
	}
	/* a command stream larger than the ring grows it */
	spyre_cmdbuf_reset(cb);
	for (int k = 0; k < 20000; k++) {
		ASSERT_EQ(0, spyre_cmdbuf_nop(cb));
	}
	ASSERT_EQ(0, spyre_submit(q, cb, NULL, 0, NULL, 0, &f));
	EXPECT_EQ(0, spyre_fence_wait(&f, 4 * T_NS));
	spyre_bo_free(bo);
	spyre_cmdbuf_destroy(cb);
	spyre_queue_destroy(q);
}

TEST_F(lib, fork_child_gets_echild)
{
	struct spyre_bo *bo;
	struct spyre_queue *q;
	pid_t pid;
	int status;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 4096, 0, &bo));
	ASSERT_EQ(0, spyre_queue_create(self->dev, 1, &q));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct spyre_bo *b2;
		struct spyre_device *d2;
		struct spyre_stream *s;
		void *ptr;

		if (spyre_bo_alloc(self->dev, 4096, 0, &b2) != -ECHILD)
			_exit(1);
		if (spyre_bo_map(bo, &ptr) != -ECHILD)
			_exit(2);
		if (spyre_device_fd(self->dev) != -ECHILD)
			_exit(3);
		{
			struct spyre_cmdbuf *cb;

			spyre_cmdbuf_create(&cb);
			spyre_cmdbuf_nop(cb);
			if (spyre_submit(q, cb, NULL, 0, NULL, 0, NULL) != -ECHILD)
				_exit(4);
			spyre_cmdbuf_destroy(cb);
		}
		/* freeing inherited handles must not touch the parent */
		spyre_bo_free(bo);
		spyre_queue_destroy(q);
		spyre_device_close(self->dev);
		/* a fresh open works */
		if (spyre_device_open(0, &d2))
			_exit(5);
		if (spyre_bo_alloc(d2, 4096, 0, &b2))
			_exit(6);
		if (spyre_stream_create(d2, 1, &s))
			_exit(7);
		if (spyre_stream_fill(s, b2, 0, 4096, 1, 0x11) ||
		    spyre_stream_sync(s, T_NS))
			_exit(8);
		if (spyre_bo_map(b2, &ptr) || ((uint8_t *)ptr)[4095] != 0x11)
			_exit(9);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* the parent's objects survived the child's cleanup */
	{
		struct drm_spyre_bo_info info;
		struct spyre_cmdbuf *cb;
		struct spyre_fence f;

		EXPECT_EQ(0, st_bo_get_info(spyre_device_fd(self->dev),
					    spyre_bo_handle(bo), &info));
		ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
		ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo), 8, 1, 1));
		EXPECT_EQ(0, spyre_submit(q, cb, &bo, 1, NULL, 0, &f));
		EXPECT_EQ(0, spyre_fence_wait(&f, T_NS));
		spyre_cmdbuf_destroy(cb);
	}
	spyre_queue_destroy(q);
	spyre_bo_free(bo);
}

struct thr {
	struct spyre_device *dev;
	struct spyre_bo *bo;
	uint64_t off;
	int ret;
};

static void *thread_fn(void *arg)
{
	struct thr *t = arg;
	struct spyre_stream *s;

	t->ret = spyre_stream_create(t->dev, 1, &s);
	if (t->ret)
		return NULL;
	for (int i = 0; i < 50 && !t->ret; i++)
		t->ret = spyre_stream_fill(s, t->bo, t->off + 64 * i, 8, 8,
					   t->off + i);
	if (!t->ret)
		t->ret = spyre_stream_sync(s, 4 * T_NS);
	spyre_stream_destroy(s);
	return NULL;
}

TEST_F_TIMEOUT(lib, threads_share_a_device, 120)
{
	enum { NT = 4 };
	pthread_t th[NT];
	struct thr t[NT];
	struct spyre_bo *bo;
	uint64_t *p;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, NT * 4096, 0, &bo));
	for (int i = 0; i < NT; i++) {
		t[i] = (struct thr){ self->dev, bo, (uint64_t)i * 4096, 0 };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, thread_fn, &t[i]));
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, t[i].ret) TH_LOG("thread %d: %s", i,
					      spyre_strerror(t[i].ret));
	}
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	for (int i = 0; i < NT; i++) {
		for (int j = 0; j < 50; j++)
			for (int k = 0; k < 8; k++)
				ASSERT_EQ((uint64_t)i * 4096 + j,
					  p[(i * 4096 + 64 * j) / 8 + k]);
	}
	spyre_bo_free(bo);
}

TEST(all_cards_via_libspyre)
{
	int n = spyre_device_count();

	if (n <= 0)
		SKIP(return, "no Spyre card");
	for (int i = 0; i < n; i++) {
		struct spyre_device *dev;
		struct spyre_stream *s;
		struct spyre_bo *bo;
		uint32_t *p;

		ASSERT_EQ(0, spyre_device_open((unsigned int)i, &dev));
		ASSERT_EQ(0, spyre_stream_create(dev, 2, &s));
		ASSERT_EQ(0, spyre_bo_alloc(dev, 65536, 0, &bo));
		ASSERT_EQ(0, spyre_stream_fill(s, bo, 0, 16384, 4,
					       0xd00d0000u + (unsigned)i));
		ASSERT_EQ(0, spyre_stream_sync(s, T_NS));
		ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
		for (int k = 0; k < 16384; k++) {
			ASSERT_EQ(0xd00d0000u + (unsigned)i, p[k]);
		}
		spyre_bo_free(bo);
		spyre_stream_destroy(s);
		spyre_device_close(dev);
	}
}

TEST_HARNESS_MAIN
