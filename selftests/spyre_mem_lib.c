// SPDX-License-Identifier: MIT
/*
 * spyre_mem_lib: libspyre's memory API on a real card: placement,
 * host-memory registration, map/unmap, dma-buf export/import (also across
 * cards and from dma-heap), memory and context info, BO wait; and data
 * round trips host -> system -> device -> host memory -> system -> host
 * over sizes from 1 byte to 64 MiB at odd offsets, and with many BOs.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB (1024ull * 1024ull)
#define T_NS ST_TIMEOUT_NS

FIXTURE(ml) {
	struct spyre_device *dev;
	struct spyre_device_info info;
	struct spyre_stream *s;
};

FIXTURE_SETUP(ml)
{
	int ret;

	self->dev = NULL;
	self->s = NULL;
	ret = st_lib_open(&self->dev, &self->info, &self->s);
	if (ret == -ENODEV)
		SKIP(return, "no Spyre card");
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(ml)
{
	spyre_stream_destroy(self->s);
	spyre_device_close(self->dev);
}

/* True if [p, p + len) is not mapped in this process. */
static int unmapped(void *p, size_t len)
{
	return msync(p, len, MS_ASYNC) == -1 && errno == ENOMEM;
}

TEST_F(ml, alloc_placement_map_unmap)
{
	struct spyre_memory_info mi;
	struct spyre_bo *sys, *dev, *bo;
	uint8_t *p, *q;

	ASSERT_EQ(0, spyre_device_memory_info(self->dev, &mi));
	EXPECT_EQ(-EINVAL, spyre_bo_alloc(self->dev, PAGE, 2, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_alloc(self->dev, PAGE,
					  SPYRE_BO_DEVICE | 0x10, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_alloc(self->dev, 0, SPYRE_BO_DEVICE, &bo));
	EXPECT_EQ(-E2BIG, spyre_bo_alloc(self->dev, mi.devmem_total + 1,
					 SPYRE_BO_DEVICE, &bo));
	EXPECT_EQ(-E2BIG, spyre_bo_alloc(self->dev, mi.max_bo_size + 1, 0,
					 &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_placement(NULL));

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 5000, 0, &sys));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 5000, SPYRE_BO_DEVICE, &dev));
	EXPECT_EQ(SPYRE_PLACEMENT_SYSTEM, spyre_bo_placement(sys));
	EXPECT_EQ(SPYRE_PLACEMENT_DEVICE, spyre_bo_placement(dev));
	EXPECT_EQ(8192, spyre_bo_size(dev));
	EXPECT_EQ(0, spyre_bo_va(dev) % PAGE);
	EXPECT_NE(spyre_bo_handle(sys), spyre_bo_handle(dev));

	ASSERT_EQ(0, spyre_bo_map(dev, (void **)&p));
	EXPECT_TRUE(st_all_bytes(p, 8192, 0));
	memset(p, 0x5d, 8192);
	/* unmap drops the mapping; the data stays; a new map sees it */
	ASSERT_EQ(0, spyre_bo_unmap(dev));
	EXPECT_TRUE(unmapped(p, 8192));
	EXPECT_EQ(0, spyre_bo_unmap(dev));	/* twice is fine */
	ASSERT_EQ(0, spyre_bo_map(dev, (void **)&q));
	EXPECT_TRUE(st_all_bytes(q, 8192, 0x5d));
	ASSERT_EQ(0, spyre_bo_map(dev, (void **)&p));
	EXPECT_EQ(q, p);
	EXPECT_EQ(-EINVAL, spyre_bo_unmap(NULL));

	/* the card sees what the CPU wrote into device memory */
	ASSERT_EQ(0, spyre_stream_copy(self->s, sys, 0, dev, 0, 8192));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	ASSERT_EQ(0, spyre_bo_map(sys, (void **)&p));
	EXPECT_TRUE(st_all_bytes(p, 8192, 0x5d));
	spyre_bo_free(sys);
	spyre_bo_free(dev);
}

TEST_F(ml, register_host)
{
	struct spyre_memory_info m0, m1;
	struct spyre_bo *bo, *out;
	uint8_t *h, *ro, *p;
	int fd;

	h = aligned_alloc(PAGE, 16 * PAGE);
	ASSERT_NE(NULL, h);
	memset(h, 0x42, 16 * PAGE);
	EXPECT_EQ(-EINVAL, spyre_bo_register_host(self->dev, NULL, PAGE, 0,
						  &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_register_host(self->dev, h + 1, PAGE, 0,
						  &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_register_host(self->dev, h, 100, 0, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_register_host(self->dev, h, 0, 0, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_register_host(self->dev, h, PAGE, 0x80,
						  &bo));
	ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	EXPECT_EQ(-EFAULT, spyre_bo_register_host(self->dev, ro, PAGE, 0, &bo));
	ASSERT_EQ(0, spyre_bo_register_host(self->dev, ro, PAGE,
					    SPYRE_HOST_READONLY, &bo));
	EXPECT_EQ(SPYRE_PLACEMENT_HOST, spyre_bo_placement(bo));
	spyre_bo_free(bo);

	ASSERT_EQ(0, spyre_device_memory_info(self->dev, &m0));
	ASSERT_EQ(0, spyre_bo_register_host(self->dev, h, 16 * PAGE, 0, &bo));
	ASSERT_EQ(0, spyre_device_memory_info(self->dev, &m1));
	EXPECT_EQ(m0.file_userptr_used + 16 * PAGE, m1.file_userptr_used);
	EXPECT_EQ(m0.userptr_used + 16 * PAGE, m1.userptr_used);
	EXPECT_EQ(SPYRE_PLACEMENT_HOST, spyre_bo_placement(bo));
	EXPECT_EQ(16 * PAGE, spyre_bo_size(bo));
	ASSERT_EQ(0, spyre_bo_map(bo, (void **)&p));
	EXPECT_EQ(h, p);
	EXPECT_EQ(0, spyre_bo_unmap(bo));
	EXPECT_EQ(0x42, h[0]);	/* still the caller's memory */
	EXPECT_EQ(-EOPNOTSUPP, spyre_bo_export_dmabuf(bo, &fd));

	/* stream ops on it, the CPU sees the result in place */
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 16 * PAGE, 0, &out));
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 3, 100, 1, 0x17));
	ASSERT_EQ(0, spyre_stream_copy(self->s, out, 0, bo, 0, 16 * PAGE));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	EXPECT_EQ(0x42, h[2]);
	EXPECT_TRUE(st_all_bytes(h + 3, 100, 0x17));
	EXPECT_EQ(0x42, h[103]);
	ASSERT_EQ(0, spyre_bo_map(out, (void **)&p));
	EXPECT_EQ(16 * PAGE, st_first_diff(p, h, 16 * PAGE));
	spyre_bo_free(out);
	spyre_bo_free(bo);
	/* the finished jobs may still hold the BO for a moment */
	for (int i = 0; i < 500; i++) {
		ASSERT_EQ(0, spyre_device_memory_info(self->dev, &m1));
		if (m1.file_userptr_used == m0.file_userptr_used)
			break;
		usleep(10000);
	}
	EXPECT_EQ(m0.file_userptr_used, m1.file_userptr_used);
	munmap(ro, PAGE);
	free(h);
}

TEST_F(ml, memory_info_moves)
{
	struct spyre_memory_info m0, m1;
	struct spyre_bo *a, *b;

	ASSERT_EQ(0, spyre_device_memory_info(self->dev, &m0));
	EXPECT_LT(0, m0.devmem_total);
	EXPECT_LT(0, m0.max_bo_size);
	EXPECT_EQ(-EINVAL, spyre_device_memory_info(self->dev, NULL));
	EXPECT_EQ(-EINVAL, spyre_device_memory_info(NULL, &m1));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, 3 * MiB, SPYRE_BO_DEVICE, &a));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, MiB + 1, 0, &b));
	ASSERT_EQ(0, spyre_device_memory_info(self->dev, &m1));
	EXPECT_EQ(m0.file_devmem_used + 3 * MiB, m1.file_devmem_used);
	EXPECT_EQ(m0.devmem_used + 3 * MiB, m1.devmem_used);
	EXPECT_EQ(m0.file_sysmem_used + MiB + PAGE, m1.file_sysmem_used);
	EXPECT_EQ(m0.sysmem_used + MiB + PAGE, m1.sysmem_used);
	EXPECT_EQ(m0.devmem_total, m1.devmem_total);
	spyre_bo_free(a);
	spyre_bo_free(b);
	ASSERT_EQ(0, spyre_device_memory_info(self->dev, &m1));
	EXPECT_EQ(m0.file_devmem_used, m1.file_devmem_used);
	EXPECT_EQ(m0.file_sysmem_used, m1.file_sysmem_used);
}

TEST_F(ml, context_info_reports_faults)
{
	struct spyre_context_info ci;
	struct spyre_device *d2;
	struct spyre_cmdbuf *cb;
	struct spyre_queue *q;
	struct spyre_bo *bo;
	struct spyre_fence f;

	ASSERT_EQ(0, spyre_device_context_info(self->dev, &ci));
	EXPECT_EQ(0, ci.error);
	EXPECT_EQ(0, ci.faults);
	EXPECT_GT(self->info.num_contexts, ci.context_id);
	/* a job nobody waits for faults: the kernel still knows */
	ASSERT_EQ(0, spyre_device_open(0, &d2));
	ASSERT_EQ(0, spyre_queue_create(d2, SPYRE_PRIORITY_NORMAL, &q));
	ASSERT_EQ(0, spyre_bo_alloc(d2, PAGE, 0, &bo));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(bo) + PAGE + 8, 1, 8,
				       1));
	ASSERT_EQ(0, spyre_submit(q, cb, &bo, 1, NULL, 0, &f));
	ASSERT_EQ(0, spyre_bo_wait(bo, T_NS));
	EXPECT_EQ(0, spyre_device_error(d2));	/* nobody looked yet */
	ASSERT_EQ(0, spyre_device_context_info(d2, &ci));
	EXPECT_EQ(-EFAULT, ci.error);
	EXPECT_LE(1, ci.faults);
	EXPECT_EQ(spyre_bo_va(bo) + PAGE, ci.fault_va & ~(PAGE - 1));
	EXPECT_EQ(-EFAULT, spyre_device_error(d2));
	EXPECT_EQ(-EFAULT, spyre_fence_wait(&f, T_NS));
	/* the first device is unaffected */
	ASSERT_EQ(0, spyre_device_context_info(self->dev, &ci));
	EXPECT_EQ(0, ci.error);
	EXPECT_EQ(0, spyre_device_error(self->dev));
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(bo);
	spyre_queue_destroy(q);
	spyre_device_close(d2);
}

TEST_F(ml, bo_wait)
{
	struct spyre_cmdbuf *cb;
	struct spyre_bo *sem, *other;
	struct spyre_fence f;
	volatile uint64_t *p;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, PAGE, 0, &sem));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, PAGE, SPYRE_BO_DEVICE, &other));
	ASSERT_EQ(0, spyre_bo_map(sem, (void **)&p));
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	ASSERT_EQ(0, spyre_cmdbuf_sem_wait(cb, spyre_bo_va(sem), 1));
	ASSERT_EQ(0, spyre_cmdbuf_fill(cb, spyre_bo_va(sem) + 8, 1, 8, 9));
	ASSERT_EQ(0, spyre_submit(spyre_stream_queue(self->s), cb, &sem, 1,
				  NULL, 0, &f));
	EXPECT_EQ(-ETIMEDOUT, spyre_bo_wait(sem, 0));
	EXPECT_EQ(-ETIMEDOUT, spyre_bo_wait(sem, 20 * 1000000ull));
	EXPECT_EQ(0, spyre_bo_wait(other, 0));
	EXPECT_EQ(-EINVAL, spyre_bo_wait(NULL, 0));
	p[0] = 1;
	EXPECT_EQ(0, spyre_bo_wait(sem, SPYRE_TIMEOUT_INFINITE));
	EXPECT_EQ(9, p[1]);
	EXPECT_EQ(0, spyre_fence_query(&f));
	spyre_cmdbuf_destroy(cb);
	spyre_bo_free(sem);
	spyre_bo_free(other);
}

TEST_F(ml, dmabuf_same_device_shares_handle)
{
	/* Importing a BO of the same device file gives a second spyre_bo on
	 * the same handle; the handle lives until both are freed, in either
	 * order. */
	for (int order = 0; order < 2; order++) {
		struct spyre_bo *a, *b, *keep;
		uint8_t *p;
		int fd;

		ASSERT_EQ(0, spyre_bo_alloc(self->dev, 2 * PAGE,
					    order ? SPYRE_BO_DEVICE : 0, &a));
		ASSERT_EQ(0, spyre_bo_export_dmabuf(a, &fd));
		ASSERT_EQ(0, spyre_bo_import_dmabuf(self->dev, fd, &b));
		close(fd);
		EXPECT_EQ(spyre_bo_handle(a), spyre_bo_handle(b));
		EXPECT_EQ(spyre_bo_va(a), spyre_bo_va(b));
		EXPECT_EQ(spyre_bo_size(a), spyre_bo_size(b));
		EXPECT_EQ(spyre_bo_placement(a), spyre_bo_placement(b));
		if (order) {
			spyre_bo_free(a);
			keep = b;
		} else {
			spyre_bo_free(b);
			keep = a;
		}
		ASSERT_EQ(0, spyre_stream_fill(self->s, keep, 0, 2 * PAGE, 1,
					       0x60 + order));
		ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
		ASSERT_EQ(0, spyre_bo_map(keep, (void **)&p));
		EXPECT_TRUE(st_all_bytes(p, 2 * PAGE, 0x60 + order));
		spyre_bo_free(keep);
	}
}

TEST_F(ml, dmabuf_import_errors)
{
	struct spyre_bo *bo;
	int mfd = memfd_create("x", MFD_CLOEXEC);

	ASSERT_LE(0, mfd);
	EXPECT_EQ(-EBADF, spyre_bo_import_dmabuf(self->dev, -1, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_import_dmabuf(self->dev, mfd, &bo));
	EXPECT_EQ(-EINVAL, spyre_bo_import_dmabuf(self->dev, mfd, NULL));
	EXPECT_EQ(-EINVAL, spyre_bo_export_dmabuf(NULL, &mfd));
	EXPECT_NE(NULL, strstr(spyre_strerror(-EOPNOTSUPP), "another card"));
	close(mfd);
}

TEST_F(ml, dmabuf_other_card)
{
	struct spyre_device *d1;
	struct spyre_stream *s1;
	struct spyre_bo *sys, *dev, *imp, *out;
	uint8_t *ps, *po;
	int fd;

	if (spyre_device_count() < 2)
		SKIP(return, "needs a second Spyre card");
	ASSERT_EQ(0, spyre_device_open(1, &d1));
	ASSERT_EQ(0, spyre_stream_create(d1, SPYRE_PRIORITY_NORMAL, &s1));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, MiB, 0, &sys));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, MiB, SPYRE_BO_DEVICE, &dev));
	ASSERT_EQ(0, spyre_bo_map(sys, (void **)&ps));
	st_fill_words(ps, MiB, 0xc0ffee);

	ASSERT_EQ(0, spyre_bo_export_dmabuf(dev, &fd));
	EXPECT_EQ(-EOPNOTSUPP, spyre_bo_import_dmabuf(d1, fd, &imp));
	close(fd);

	ASSERT_EQ(0, spyre_bo_export_dmabuf(sys, &fd));
	ASSERT_EQ(0, spyre_bo_import_dmabuf(d1, fd, &imp));
	close(fd);
	EXPECT_EQ(SPYRE_PLACEMENT_IMPORTED, spyre_bo_placement(imp));
	EXPECT_EQ(MiB, spyre_bo_size(imp));
	/* a BO of another device is refused by the stream */
	EXPECT_EQ(-EXDEV, spyre_stream_copy(s1, imp, 0, sys, 0, 8));
	ASSERT_EQ(0, spyre_bo_alloc(d1, MiB, 0, &out));
	ASSERT_EQ(0, spyre_stream_copy(s1, out, 5, imp, 0, MiB - 5));
	ASSERT_EQ(0, spyre_stream_fill(s1, imp, 0, 64, 1, 0xa7));
	ASSERT_EQ(0, spyre_stream_sync(s1, T_NS));
	ASSERT_EQ(0, spyre_bo_map(out, (void **)&po));
	{
		uint8_t *ref = malloc(MiB);

		ASSERT_NE(NULL, ref);
		st_fill_words(ref, MiB, 0xc0ffee);
		EXPECT_EQ(MiB - 5, st_first_diff(po + 5, ref, MiB - 5));
		EXPECT_TRUE(st_all_bytes(ps, 64, 0xa7));
		EXPECT_EQ(ref[64], ps[64]);
		free(ref);
	}
	spyre_bo_free(imp);
	spyre_bo_free(out);
	spyre_bo_free(sys);
	spyre_bo_free(dev);
	spyre_stream_destroy(s1);
	spyre_device_close(d1);
}

TEST_F(ml, dmabuf_heap_import)
{
	struct dma_heap_allocation_data a = { .len = MiB,
					      .fd_flags = O_RDWR | O_CLOEXEC };
	struct dma_buf_sync sync = { 0 };
	struct spyre_bo *imp, *out;
	uint8_t *pd, *po, *ref;
	int hfd = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);

	ASSERT_LE(0, hfd);
	ASSERT_EQ(0, ioctl(hfd, DMA_HEAP_IOCTL_ALLOC, &a));
	close(hfd);
	ref = malloc(MiB);
	ASSERT_NE(NULL, ref);
	st_fill_words(ref, MiB, 0x4ea9);
	pd = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, (int)a.fd, 0);
	ASSERT_NE(MAP_FAILED, pd);
	sync.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW;
	ASSERT_EQ(0, ioctl((int)a.fd, DMA_BUF_IOCTL_SYNC, &sync));
	memcpy(pd, ref, MiB);
	sync.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
	ASSERT_EQ(0, ioctl((int)a.fd, DMA_BUF_IOCTL_SYNC, &sync));
	ASSERT_EQ(0, spyre_bo_import_dmabuf(self->dev, (int)a.fd, &imp));
	EXPECT_EQ(SPYRE_PLACEMENT_IMPORTED, spyre_bo_placement(imp));
	EXPECT_EQ(MiB, spyre_bo_size(imp));
	{
		/* mapping a foreign import: the same pages, or refused */
		uint8_t *pi;
		int ret = spyre_bo_map(imp, (void **)&pi);

		if (ret) {
			EXPECT_EQ(-EOPNOTSUPP, ret);
		} else {
			EXPECT_EQ(MiB, st_first_diff(pi, ref, MiB));
			EXPECT_EQ(0, spyre_bo_unmap(imp));
		}
	}
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, MiB, SPYRE_BO_DEVICE, &out));
	ASSERT_EQ(0, spyre_stream_copy(self->s, out, 0, imp, 0, MiB));
	ASSERT_EQ(0, spyre_stream_fill(self->s, imp, 100, 10, 4, 0x01020304));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	ASSERT_EQ(0, spyre_bo_map(out, (void **)&po));
	EXPECT_EQ(MiB, st_first_diff(po, ref, MiB));
	sync.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ;
	ASSERT_EQ(0, ioctl((int)a.fd, DMA_BUF_IOCTL_SYNC, &sync));
	EXPECT_EQ(ref[99], pd[99]);
	EXPECT_EQ(0x04, pd[100]);
	EXPECT_EQ(0x01, pd[139]);
	EXPECT_EQ(ref[140], pd[140]);
	sync.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ;
	ASSERT_EQ(0, ioctl((int)a.fd, DMA_BUF_IOCTL_SYNC, &sync));
	spyre_bo_free(out);
	spyre_bo_free(imp);
	munmap(pd, MiB);
	close((int)a.fd);
	free(ref);
}

TEST_F(ml, child_after_fork_gets_echild)
{
	struct spyre_bo *bo;
	pid_t pid;
	int status;

	ASSERT_EQ(0, spyre_bo_alloc(self->dev, PAGE, 0, &bo));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct spyre_memory_info mi;
		struct spyre_context_info ci;
		struct spyre_bo *b2;
		void *h = aligned_alloc(PAGE, PAGE);
		int fd;

		if (spyre_device_memory_info(self->dev, &mi) != -ECHILD ||
		    spyre_device_context_info(self->dev, &ci) != -ECHILD ||
		    spyre_bo_register_host(self->dev, h, PAGE, 0, &b2) !=
			-ECHILD ||
		    spyre_bo_export_dmabuf(bo, &fd) != -ECHILD ||
		    spyre_bo_import_dmabuf(self->dev, 0, &b2) != -ECHILD ||
		    spyre_bo_wait(bo, 0) != -ECHILD ||
		    spyre_bo_unmap(bo) != -ECHILD)
			_exit(1);
		spyre_bo_free(bo);	/* allowed, no ioctl */
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, WEXITSTATUS(status));
	/* the parent's BO is intact */
	ASSERT_EQ(0, spyre_stream_fill(self->s, bo, 0, 8, 1, 1));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	spyre_bo_free(bo);
}

/* ---- round trips ------------------------------------------------------ */

FIXTURE(rt) {
	struct spyre_device *dev;
	struct spyre_stream *s;
	struct spyre_bo *bo[4];	/* system, device, host, system */
	uint8_t *map[4];
	uint8_t *host;
	uint8_t *ref;
	uint64_t bsize;
};

FIXTURE_VARIANT(rt) {
	uint64_t size;
	uint64_t off[4];	/* offset of the data in each BO */
};

FIXTURE_VARIANT_ADD(rt, b1) { .size = 1, .off = { 0, 0, 0, 0 } };
FIXTURE_VARIANT_ADD(rt, b1_odd) { .size = 1, .off = { 4095, 1, 2047, 3 } };
FIXTURE_VARIANT_ADD(rt, b7) { .size = 7, .off = { 1, 4093, 9, 0 } };
FIXTURE_VARIANT_ADD(rt, page_minus_1) { .size = 4095, .off = { 1, 2, 3, 4 } };
FIXTURE_VARIANT_ADD(rt, page) { .size = 4096, .off = { 0, 0, 0, 0 } };
FIXTURE_VARIANT_ADD(rt, page_plus_1) { .size = 4097, .off = { 4095, 7, 1, 4094 } };
FIXTURE_VARIANT_ADD(rt, k64_odd) { .size = 65537, .off = { 13, 4000, 255, 1 } };
FIXTURE_VARIANT_ADD(rt, m1_odd) { .size = MiB + 3, .off = { 3, 5, 4093, 17 } };
FIXTURE_VARIANT_ADD(rt, m3_aligned) { .size = 3 * MiB, .off = { 0, 4096, 8192, 0 } };
FIXTURE_VARIANT_ADD(rt, m64) { .size = 64 * MiB, .off = { 0, 0, 0, 0 } };
FIXTURE_VARIANT_ADD(rt, m64_odd) { .size = 64 * MiB - 9, .off = { 1, 7, 4095, 3 } };

FIXTURE_SETUP(rt)
{
	uint64_t max_off = 0;
	int n = spyre_device_count();

	memset(self->bo, 0, sizeof(self->bo));
	self->host = self->ref = NULL;
	self->dev = NULL;
	self->s = NULL;
	ASSERT_LE(0, n);
	if (n == 0)
		SKIP(return, "no Spyre card");
	for (int i = 0; i < 4; i++)
		max_off = variant->off[i] > max_off ? variant->off[i] : max_off;
	/* room for a canary after the data too */
	self->bsize = (variant->size + max_off + 64 + PAGE - 1) & ~(PAGE - 1);
	ASSERT_EQ(0, spyre_device_open(0, &self->dev));
	{
		struct spyre_memory_info mi;

		ASSERT_EQ(0, spyre_device_memory_info(self->dev, &mi));
		if (self->bsize > mi.devmem_total / 2)
			SKIP(return, "card has %llu MiB of device memory",
			     (unsigned long long)(mi.devmem_total >> 20));
	}
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_PRIORITY_NORMAL,
					 &self->s));
	self->host = aligned_alloc(PAGE, self->bsize);
	self->ref = malloc(variant->size);
	ASSERT_NE(NULL, self->host);
	ASSERT_NE(NULL, self->ref);
	memset(self->host, 0xee, self->bsize);
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, self->bsize, 0, &self->bo[0]));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, self->bsize, SPYRE_BO_DEVICE,
				    &self->bo[1]));
	ASSERT_EQ(0, spyre_bo_register_host(self->dev, self->host, self->bsize,
					    0, &self->bo[2]));
	ASSERT_EQ(0, spyre_bo_alloc(self->dev, self->bsize, 0, &self->bo[3]));
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, spyre_bo_map(self->bo[i], (void **)&self->map[i]));
		if (i != 2)
			memset(self->map[i], 0xee, self->bsize);
	}
}

FIXTURE_TEARDOWN(rt)
{
	for (int i = 0; i < 4; i++)
		spyre_bo_free(self->bo[i]);
	spyre_stream_destroy(self->s);
	spyre_device_close(self->dev);
	free(self->host);
	free(self->ref);
}

TEST_F_TIMEOUT(rt, system_device_host_system, 120)
{
	static const char *const names[4] = { "system", "device", "host",
					      "system2" };
	const uint64_t n = variant->size;

	st_fill_words(self->ref, n, n * 0x1234567ull);
	memcpy(self->map[0] + variant->off[0], self->ref, n);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, spyre_stream_copy(self->s, self->bo[i + 1],
					       variant->off[i + 1], self->bo[i],
					       variant->off[i], n));
	}
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	for (int i = 1; i < 4; i++) {
		const uint8_t *p = self->map[i];
		uint64_t off = variant->off[i], d, pre = off < 64 ? off : 64;

		d = st_first_diff(p + off, self->ref, n);
		EXPECT_EQ(n, d) TH_LOG("%s: byte %llu of %llu differs", names[i],
				       (unsigned long long)d,
				       (unsigned long long)n);
		/* nothing written around the range */
		EXPECT_TRUE(st_all_bytes(p + off - pre, pre, 0xee))
			TH_LOG("%s: written before the range", names[i]);
		EXPECT_TRUE(st_all_bytes(p + off + n, 64, 0xee))
			TH_LOG("%s: written after the range", names[i]);
	}
}

TEST_F_TIMEOUT(ml, many_bos_rotate, 120)
{
	/*
	 * 96 BOs, a third each system, device and host memory, each with its
	 * own data at its own odd offset; one job with all of them rotates
	 * the data one BO down (through a temporary), a second job rotates
	 * it back through single stream copies.
	 */
	enum { N = 96, L = 5000 };
	struct spyre_bo *bo[N + 1];
	uint8_t *map[N + 1], *host[N], *ref;
	uint64_t off[N + 1];
	struct spyre_cmdbuf *cb;
	struct spyre_fence f;

	ref = malloc((size_t)N * L);
	ASSERT_NE(NULL, ref);
	for (int i = 0; i <= N; i++) {
		off[i] = (uint64_t)(i * 37) % 1000;
		if (i < N && i % 3 == 2) {
			host[i] = aligned_alloc(PAGE, 2 * PAGE);
			ASSERT_NE(NULL, host[i]);
			ASSERT_EQ(0, spyre_bo_register_host(self->dev, host[i],
							    2 * PAGE, 0,
							    &bo[i]));
		} else {
			ASSERT_EQ(0, spyre_bo_alloc(self->dev, L + 1000,
						    i % 3 == 1 ?
						    SPYRE_BO_DEVICE : 0,
						    &bo[i]));
		}
		ASSERT_EQ(0, spyre_bo_map(bo[i], (void **)&map[i]));
		if (i < N) {
			st_fill_words(ref + (size_t)i * L, L, 0x100 + i);
			memcpy(map[i] + off[i], ref + (size_t)i * L, L);
		}
	}
	ASSERT_EQ(0, spyre_cmdbuf_create(&cb));
	/* tmp <- 0, i <- i + 1, N - 1 <- tmp */
	ASSERT_EQ(0, spyre_cmdbuf_copy(cb, spyre_bo_va(bo[N]) + off[N],
				       spyre_bo_va(bo[0]) + off[0], L));
	for (int i = 0; i + 1 < N; i++) {
		ASSERT_EQ(0, spyre_cmdbuf_copy(cb, spyre_bo_va(bo[i]) + off[i],
					       spyre_bo_va(bo[i + 1]) +
					       off[i + 1], L));
	}
	ASSERT_EQ(0, spyre_cmdbuf_copy(cb, spyre_bo_va(bo[N - 1]) + off[N - 1],
				       spyre_bo_va(bo[N]) + off[N], L));
	ASSERT_EQ(0, spyre_submit(spyre_stream_queue(self->s), cb, bo, N + 1,
				  NULL, 0, &f));
	ASSERT_EQ(0, spyre_fence_wait(&f, T_NS));
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(L, st_first_diff(map[i] + off[i],
					   ref + (size_t)((i + 1) % N) * L,
					   L)) TH_LOG("BO %d", i);
	}
	/* and back, one stream copy each */
	ASSERT_EQ(0, spyre_stream_copy(self->s, bo[N], off[N], bo[N - 1],
				       off[N - 1], L));
	for (int i = N - 1; i > 0; i--) {
		ASSERT_EQ(0, spyre_stream_copy(self->s, bo[i], off[i],
					       bo[i - 1], off[i - 1], L));
	}
	ASSERT_EQ(0, spyre_stream_copy(self->s, bo[0], off[0], bo[N], off[N],
				       L));
	ASSERT_EQ(0, spyre_stream_sync(self->s, T_NS));
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(L, st_first_diff(map[i] + off[i],
					   ref + (size_t)i * L, L))
			TH_LOG("BO %d", i);
	}
	spyre_cmdbuf_destroy(cb);
	for (int i = 0; i <= N; i++)
		spyre_bo_free(bo[i]);
	for (int i = 2; i < N; i += 3)
		free(host[i]);
	free(ref);
}

TEST_HARNESS_MAIN
