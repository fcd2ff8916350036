// SPDX-License-Identifier: MIT
/*
 * spyre_mem_dmabuf: dma-buf export and import (DRM PRIME) between files
 * and cards, device-memory restrictions, foreign dma-bufs from
 * /dev/dma_heap/system and /dev/udmabuf; the card reads and writes every
 * imported buffer and the CPU checks through its own mapping.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB (1024ull * 1024ull)

static int prime_export(int fd, uint32_t h, int *dfd)
{
	return drmPrimeHandleToFD(fd, h, DRM_CLOEXEC | DRM_RDWR, dfd) ?
	       -errno : 0;
}

static int prime_import(int fd, int dfd, uint32_t *h)
{
	return drmPrimeFDToHandle(fd, dfd, h) ? -errno : 0;
}

static int dmabuf_sync(int dfd, uint64_t flags)
{
	struct dma_buf_sync s = { .flags = flags };

	return ioctl(dfd, DMA_BUF_IOCTL_SYNC, &s) ? -errno : 0;
}

/* Copy @len bytes on @c's card: dst_va <- src_va (BOs @bos). */
static int card_copy(struct st_ctx *c, uint64_t dst, uint64_t src,
		     uint64_t len, const uint32_t *bos, uint32_t n)
{
	struct spyre_cmdbuf *cb;
	int ret;

	if (spyre_cmdbuf_create(&cb))
		return -ENOMEM;
	ret = spyre_cmdbuf_copy(cb, dst, src, len);
	if (!ret)
		ret = st_run_cmdbuf(c, cb, bos, n);
	spyre_cmdbuf_destroy(cb);
	return ret;
}

static int card_fill(struct st_ctx *c, uint64_t dst, uint64_t len,
		     uint8_t v, const uint32_t *bos, uint32_t n)
{
	struct spyre_cmdbuf *cb;
	int ret;

	if (spyre_cmdbuf_create(&cb))
		return -ENOMEM;
	ret = spyre_cmdbuf_fill(cb, dst, len, 1, v);
	if (!ret)
		ret = st_run_cmdbuf(c, cb, bos, n);
	spyre_cmdbuf_destroy(cb);
	return ret;
}

/*
 * Contexts: a (card 0), a2 (card 0, another file), b (card 1, fd -1 if
 * there is no second card).  Fixture "prime" for single tests, "xprime"
 * for tests run once per placement.
 */
#define PRIME_FIXTURE(name)						\
	FIXTURE(name) {							\
		struct st_ctx a, a2, b;				\
	};								\
	FIXTURE_SETUP(name)						\
	{								\
		int ret = st_ctx_init(&self->a, 0);			\
									\
		self->a2.fd = self->b.fd = -1;				\
		if (ret == -ENODEV)					\
			SKIP(return, "no Spyre card (/dev/accel)");	\
		ASSERT_EQ(0, ret);					\
		ASSERT_EQ(0, st_ctx_init(&self->a2, 0));		\
		ret = st_ctx_init(&self->b, 1);			\
		if (ret == -ENODEV)					\
			self->b.fd = -1;				\
		else							\
			ASSERT_EQ(0, ret);				\
	}								\
	FIXTURE_TEARDOWN(name)						\
	{								\
		st_close(&self->a);				\
		st_close(&self->a2);				\
		st_close(&self->b);				\
	}

PRIME_FIXTURE(prime)
PRIME_FIXTURE(xprime)

FIXTURE_VARIANT(xprime) {
	uint32_t flags;
	uint64_t size;
};

FIXTURE_VARIANT_ADD(xprime, system) { .flags = 0, .size = 3 * MiB + 5 };
FIXTURE_VARIANT_ADD(xprime, device) { .flags = DRM_SPYRE_BO_DEVICE,
				       .size = MiB + 4096 };

#define NEED_CARD1() do {						\
		if (self->b.fd < 0)					\
			SKIP(return, "needs a second Spyre card");	\
	} while (0)

TEST_F(prime, same_file_import_is_same_handle)
{
	uint32_t hs, hd, h;
	int dfd;

	ASSERT_EQ(0, st_bo_new(self->a.fd, PAGE, &hs, NULL));
	ASSERT_EQ(0, st_bo_new_flags(self->a.fd, PAGE, DRM_SPYRE_BO_DEVICE,
				     &hd, NULL));
	ASSERT_EQ(0, prime_export(self->a.fd, hs, &dfd));
	ASSERT_EQ(0, prime_import(self->a.fd, dfd, &h));
	EXPECT_EQ(hs, h);
	close(dfd);
	ASSERT_EQ(0, prime_export(self->a.fd, hd, &dfd));
	ASSERT_EQ(0, prime_import(self->a.fd, dfd, &h));
	EXPECT_EQ(hd, h);
	close(dfd);
}

TEST_F(xprime, same_card_other_file)
{
	/* a exports, a2 imports: same memory, a2's own VA; a2's card writes
	 * what a's CPU reads and reads what a's CPU wrote. */
	const uint64_t rs = (variant->size + PAGE - 1) & ~(PAGE - 1);
	struct drm_spyre_bo_info info;
	struct drm_spyre_memory_info m0, m1;
	uint32_t h, hi, hs, bos[2];
	uint64_t vs;
	uint8_t *p, *ps, *ref;
	int dfd;

	ref = malloc(rs);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, st_bo_new_flags(self->a.fd, variant->size,
				     variant->flags, &h, NULL));
	p = st_bo_mmap(self->a.fd, h, rs);
	ASSERT_NE(MAP_FAILED, p);
	st_fill_words(ref, rs, 0x0a);
	memcpy(p, ref, rs);
	ASSERT_EQ(0, st_query_memory(self->a2.fd, &m0));
	ASSERT_EQ(0, prime_export(self->a.fd, h, &dfd));
	ASSERT_EQ(0, prime_import(self->a2.fd, dfd, &hi));
	close(dfd);
	ASSERT_EQ(0, st_bo_get_info(self->a2.fd, hi, &info));
	EXPECT_EQ(rs, info.size);
	EXPECT_EQ(variant->flags ? DRM_SPYRE_PLACEMENT_DEVICE :
				   DRM_SPYRE_PLACEMENT_SYSTEM, info.placement);
	EXPECT_EQ(0, info.va % PAGE);
	EXPECT_LE(self->a2.di.va_start, info.va);
	EXPECT_GE(self->a2.di.va_end, info.va + info.size);
	/* importing is not allocating: counters do not move */
	ASSERT_EQ(0, st_query_memory(self->a2.fd, &m1));
	EXPECT_EQ(m0.file_sysmem_used, m1.file_sysmem_used);
	EXPECT_EQ(m0.file_devmem_used, m1.file_devmem_used);
	EXPECT_EQ(m0.sysmem_used, m1.sysmem_used);
	EXPECT_EQ(m0.devmem_used, m1.devmem_used);

	ASSERT_EQ(0, st_bo_new(self->a2.fd, rs, &hs, &vs));
	ps = st_bo_mmap(self->a2.fd, hs, rs);
	ASSERT_NE(MAP_FAILED, ps);
	bos[0] = hi;
	bos[1] = hs;
	ASSERT_EQ(0, card_copy(&self->a2, vs, info.va, rs, bos, 2));
	EXPECT_EQ(rs, st_first_diff(ps, ref, rs));
	ASSERT_EQ(0, card_fill(&self->a2, info.va + 1, rs - 2, 0x6b, bos, 1));
	EXPECT_EQ(ref[0], p[0]);
	EXPECT_TRUE(st_all_bytes(p + 1, rs - 2, 0x6b));
	EXPECT_EQ(ref[rs - 1], p[rs - 1]);
	/* the importer's own CPU mapping shows the same memory */
	{
		uint8_t *pi = st_bo_mmap(self->a2.fd, hi, rs);

		ASSERT_NE(MAP_FAILED, pi);
		EXPECT_EQ(rs, st_first_diff(pi, p, rs));
		pi[5] = 0x99;
		EXPECT_EQ(0x99, p[5]);
		munmap(pi, rs);
	}
	/* the import has its guard page too */
	EXPECT_EQ(-EFAULT, card_fill(&self->a2, info.va + rs, 1, 1, bos, 1));
	munmap(p, rs);
	munmap(ps, rs);
	free(ref);
}

TEST_F(xprime, other_card)
{
	/* System memory crosses cards; device memory does not. */
	const uint64_t rs = (variant->size + PAGE - 1) & ~(PAGE - 1);
	struct drm_spyre_bo_info info;
	struct drm_spyre_memory_info b0, b1, a0, a1;
	uint32_t h, hi, hs, bos[2];
	uint64_t vs;
	uint8_t *p, *pd, *ps;
	int dfd;

	NEED_CARD1();
	ASSERT_EQ(0, st_bo_new_flags(self->a.fd, variant->size,
				     variant->flags, &h, NULL));
	ASSERT_EQ(0, prime_export(self->a.fd, h, &dfd));
	ASSERT_EQ(0, st_query_memory(self->b.fd, &b0));
	ASSERT_EQ(0, st_query_memory(self->a.fd, &a0));
	if (variant->flags) {
		EXPECT_EQ(-EOPNOTSUPP, prime_import(self->b.fd, dfd, &hi));
		close(dfd);
		ASSERT_EQ(0, st_query_memory(self->b.fd, &b1));
		EXPECT_EQ(b0.file_sysmem_used, b1.file_sysmem_used);
		EXPECT_EQ(0, card_fill(&self->b, self->b.cmd.va + 8192, 64, 1,
				       &self->b.cmd.h, 1));
		return;
	}
	ASSERT_EQ(0, prime_import(self->b.fd, dfd, &hi));
	ASSERT_EQ(0, st_bo_get_info(self->b.fd, hi, &info));
	EXPECT_EQ(rs, info.size);
	EXPECT_EQ(DRM_SPYRE_PLACEMENT_IMPORTED, info.placement);
	EXPECT_LE(self->b.di.va_start, info.va);
	ASSERT_EQ(0, st_query_memory(self->b.fd, &b1));
	EXPECT_EQ(b0.file_sysmem_used, b1.file_sysmem_used);
	EXPECT_EQ(b0.sysmem_used, b1.sysmem_used);
	ASSERT_EQ(0, st_query_memory(self->a.fd, &a1));
	EXPECT_EQ(a0.sysmem_used, a1.sysmem_used);

	/* CPU writes through the dma-buf mapping, card 1 reads */
	pd = mmap(NULL, rs, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, pd);
	p = st_bo_mmap(self->a.fd, h, rs);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, dmabuf_sync(dfd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE));
	st_fill_words(pd, rs, 0xb1);
	ASSERT_EQ(0, dmabuf_sync(dfd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE));
	ASSERT_EQ(0, st_bo_new(self->b.fd, rs, &hs, &vs));
	ps = st_bo_mmap(self->b.fd, hs, rs);
	ASSERT_NE(MAP_FAILED, ps);
	bos[0] = hi;
	bos[1] = hs;
	ASSERT_EQ(0, card_copy(&self->b, vs + 3, info.va, rs - 3, bos, 2));
	EXPECT_EQ(rs - 3, st_first_diff(ps + 3, p, rs - 3));
	/* card 1 writes, the exporter's CPU and the dma-buf mapping see it */
	ASSERT_EQ(0, card_fill(&self->b, info.va + 4096, 8192, 0xc3, bos, 1));
	ASSERT_EQ(0, dmabuf_sync(dfd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_TRUE(st_all_bytes(pd + 4096, 8192, 0xc3));
	ASSERT_EQ(0, dmabuf_sync(dfd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	EXPECT_TRUE(st_all_bytes(p + 4096, 8192, 0xc3));
	/* card 0 still uses it too */
	ASSERT_EQ(0, st_bo_get_info(self->a.fd, h, &info));
	ASSERT_EQ(0, card_fill(&self->a, info.va, 16, 0x0d, &h, 1));
	EXPECT_TRUE(st_all_bytes(p, 16, 0x0d));
	munmap(pd, rs);
	munmap(p, rs);
	munmap(ps, rs);
	close(dfd);
}

TEST_F(xprime, import_outlives_exporter)
{
	/* The importer keeps the memory after the dma-buf fd, the exporter's
	 * handle and the exporter's whole file are gone. */
	const uint64_t rs = (variant->size + PAGE - 1) & ~(PAGE - 1);
	struct st_ctx *imp = variant->flags ? &self->a2 : &self->b;
	struct drm_spyre_bo_info info;
	uint32_t h, hi, hs, bos[2];
	uint64_t vs;
	uint8_t *p, *ps, *ref;
	int dfd;

	if (!variant->flags)
		NEED_CARD1();
	ref = malloc(rs);
	ASSERT_NE(NULL, ref);
	st_fill_words(ref, rs, 0x5151);
	ASSERT_EQ(0, st_bo_new_flags(self->a.fd, variant->size,
				     variant->flags, &h, NULL));
	p = st_bo_mmap(self->a.fd, h, rs);
	ASSERT_NE(MAP_FAILED, p);
	memcpy(p, ref, rs);
	munmap(p, rs);
	ASSERT_EQ(0, prime_export(self->a.fd, h, &dfd));
	ASSERT_EQ(0, prime_import(imp->fd, dfd, &hi));
	close(dfd);
	ASSERT_EQ(0, drmCloseBufferHandle(self->a.fd, h));
	st_close(&self->a);

	ASSERT_EQ(0, st_bo_get_info(imp->fd, hi, &info));
	ASSERT_EQ(0, st_bo_new(imp->fd, rs, &hs, &vs));
	ps = st_bo_mmap(imp->fd, hs, rs);
	ASSERT_NE(MAP_FAILED, ps);
	bos[0] = hi;
	bos[1] = hs;
	ASSERT_EQ(0, card_copy(imp, vs, info.va, rs, bos, 2));
	EXPECT_EQ(rs, st_first_diff(ps, ref, rs));
	ASSERT_EQ(0, card_fill(imp, info.va, rs, 0x17, bos, 1));
	ASSERT_EQ(0, card_copy(imp, vs, info.va, rs, bos, 2));
	EXPECT_TRUE(st_all_bytes(ps, rs, 0x17));
	munmap(ps, rs);
	free(ref);
}

TEST_F(xprime, dmabuf_fd_alone_keeps_memory)
{
	/* Only the dma-buf fd is left of the exporter (handle and file
	 * closed); importing it later still gives the data. */
	const uint64_t rs = (variant->size + PAGE - 1) & ~(PAGE - 1);
	struct st_ctx *imp = variant->flags ? &self->a2 : &self->b;
	struct drm_spyre_bo_info info;
	uint32_t h, hi, hs, bos[2];
	uint64_t vs;
	uint8_t *p, *ps;
	int dfd;

	if (!variant->flags)
		NEED_CARD1();
	ASSERT_EQ(0, st_bo_new_flags(self->a.fd, variant->size,
				     variant->flags, &h, NULL));
	p = st_bo_mmap(self->a.fd, h, rs);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0x4d, rs);
	munmap(p, rs);
	ASSERT_EQ(0, prime_export(self->a.fd, h, &dfd));
	ASSERT_EQ(0, drmCloseBufferHandle(self->a.fd, h));
	st_close(&self->a);
	ASSERT_EQ(0, prime_import(imp->fd, dfd, &hi));
	close(dfd);
	ASSERT_EQ(0, st_bo_get_info(imp->fd, hi, &info));
	EXPECT_EQ(rs, info.size);
	ASSERT_EQ(0, st_bo_new(imp->fd, rs, &hs, &vs));
	ps = st_bo_mmap(imp->fd, hs, rs);
	ASSERT_NE(MAP_FAILED, ps);
	bos[0] = hi;
	bos[1] = hs;
	ASSERT_EQ(0, card_copy(imp, vs, info.va, rs, bos, 2));
	EXPECT_TRUE(st_all_bytes(ps, rs, 0x4d));
	munmap(ps, rs);
}

TEST_F(prime, hostile_import_and_export)
{
	char node[64];
	uint32_t h, hu;
	int dfd, mfd, nfd;
	void *host = aligned_alloc(PAGE, PAGE);

	ASSERT_NE(NULL, host);
	memset(host, 0, PAGE);
	EXPECT_EQ(-EBADF, prime_import(self->a.fd, -1, &h));
	EXPECT_EQ(-EBADF, prime_import(self->a.fd, 100000, &h));
	mfd = memfd_create("not-a-dmabuf", MFD_CLOEXEC);
	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, ftruncate(mfd, PAGE));
	EXPECT_EQ(-EINVAL, prime_import(self->a.fd, mfd, &h));
	EXPECT_EQ(-EINVAL, prime_import(self->a.fd, self->a2.fd, &h));
	nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, nfd);
	EXPECT_EQ(-EINVAL, prime_import(self->a.fd, nfd, &h));
	close(nfd);
	close(mfd);
	/* export: bad handle, bad flags, closed handle */
	EXPECT_EQ(-ENOENT, prime_export(self->a.fd, 0xdead, &dfd));
	ASSERT_EQ(0, st_bo_new(self->a.fd, PAGE, &h, NULL));
	EXPECT_EQ(-EINVAL, drmPrimeHandleToFD(self->a.fd, h, 0x4, &dfd) ?
			   -errno : 0);
	/* a userptr BO cannot be exported */
	ASSERT_EQ(0, st_userptr_new(self->a.fd, host, PAGE, 0, &hu, NULL));
	EXPECT_EQ(-EOPNOTSUPP, prime_export(self->a.fd, hu, &dfd));
	ASSERT_EQ(0, drmCloseBufferHandle(self->a.fd, h));
	EXPECT_EQ(-ENOENT, prime_export(self->a.fd, h, &dfd));
	/* another file's handle means nothing here */
	ASSERT_NE(NULL, st_node(0, node, sizeof(node)));
	ASSERT_EQ(0, st_bo_new(self->a2.fd, PAGE, &h, NULL));
	if (h != self->a.cmd.h && h != hu)
		EXPECT_EQ(-ENOENT, prime_export(self->a.fd, h, &dfd));
	/* everything still works */
	EXPECT_EQ(0, card_fill(&self->a, self->a.cmd.va + 8192, 64, 1,
			       &self->a.cmd.h, 1));
	EXPECT_EQ(0, card_fill(&self->a2, self->a2.cmd.va + 8192, 64, 1,
			       &self->a2.cmd.h, 1));
	free(host);
}

/* Submit on @c: SEM_WAIT(sem_va >= 1), FILL @len bytes at @dst with @v,
 * then COPY them to @out (if not 0); BOs @bos; signals c->sync. */
static int submit_parked(struct st_ctx *c, uint64_t sem_va, uint64_t dst,
			 uint64_t out, uint64_t len, uint8_t v,
			 const uint32_t *bos, uint32_t n)
{
	struct spyre_cmdbuf *cb;
	uint32_t hl[8];
	int ret;

	if (n > 7 || spyre_cmdbuf_create(&cb))
		return -EINVAL;
	ret = spyre_cmdbuf_sem_wait(cb, sem_va, 1);
	if (!ret)
		ret = spyre_cmdbuf_fill(cb, dst, len, 1, v);
	if (!ret && out)
		ret = spyre_cmdbuf_copy(cb, out, dst, len);
	if (!ret) {
		memcpy(c->cmd.map, spyre_cmdbuf_data(cb), spyre_cmdbuf_size(cb));
		hl[0] = c->cmd.h;
		memcpy(hl + 1, bos, n * sizeof(*bos));
		ret = st_submit_job(c->fd, c->qid, c->cmd.va,
				    (uint32_t)spyre_cmdbuf_size(cb), hl,
				    n + 1, NULL, 0, c->sync, 0, NULL);
	}
	spyre_cmdbuf_destroy(cb);
	return ret;
}

TEST_F(prime, bo_wait_sees_the_other_cards_jobs)
{
	/* Exporter and importer share the dma-buf's reservation object: a
	 * job on one card keeps the buffer busy for BO_WAIT on the other. */
	uint32_t hx, hi, hsa, hsb, bos[2];
	uint64_t vx, vsa, vsb;
	struct drm_spyre_bo_info info;
	volatile uint64_t *sa, *sb;
	int dfd;

	NEED_CARD1();
	ASSERT_EQ(0, st_bo_new(self->a.fd, MiB, &hx, &vx));
	ASSERT_EQ(0, st_bo_new(self->a.fd, PAGE, &hsa, &vsa));
	ASSERT_EQ(0, st_bo_new(self->b.fd, PAGE, &hsb, &vsb));
	sa = st_bo_mmap(self->a.fd, hsa, PAGE);
	sb = st_bo_mmap(self->b.fd, hsb, PAGE);
	ASSERT_NE(MAP_FAILED, sa);
	ASSERT_NE(MAP_FAILED, sb);
	ASSERT_EQ(0, prime_export(self->a.fd, hx, &dfd));
	ASSERT_EQ(0, prime_import(self->b.fd, dfd, &hi));
	close(dfd);
	ASSERT_EQ(0, st_bo_get_info(self->b.fd, hi, &info));
	EXPECT_EQ(0, st_bo_wait_abs(self->b.fd, hi, 0));

	/* card 0 busy -> the import on card 1 is busy */
	bos[0] = hsa;
	bos[1] = hx;
	ASSERT_EQ(0, submit_parked(&self->a, vsa, vx, 0, MiB, 0x11, bos, 2));
	EXPECT_EQ(-ETIME, st_bo_wait_abs(self->a.fd, hx, 0));
	EXPECT_EQ(-ETIME, st_bo_wait_abs(self->b.fd, hi, 0));
	sa[0] = 1;
	EXPECT_EQ(0, st_bo_wait_abs(self->b.fd, hi,
				    st_abs_timeout(ST_TIMEOUT_NS)));
	EXPECT_EQ(1, st_sync_status(self->a.fd, self->a.sync));

	/* card 1 busy -> the original on card 0 is busy */
	bos[0] = hsb;
	bos[1] = hi;
	ASSERT_EQ(0, submit_parked(&self->b, vsb, info.va, 0, MiB, 0x22, bos,
				   2));
	EXPECT_EQ(-ETIME, st_bo_wait_abs(self->b.fd, hi, 0));
	EXPECT_EQ(-ETIME, st_bo_wait_abs(self->a.fd, hx, 0));
	sb[0] = 1;
	EXPECT_EQ(0, st_bo_wait_abs(self->a.fd, hx,
				    st_abs_timeout(ST_TIMEOUT_NS)));
	EXPECT_EQ(1, st_sync_status(self->b.fd, self->b.sync));
	munmap((void *)sa, PAGE);
	munmap((void *)sb, PAGE);
}

TEST_F(prime, job_in_flight_when_exporter_closes)
{
	/* Card 1's job on the import is parked while card 0's file (the
	 * exporter) goes away entirely; released, the job still reads and
	 * writes the buffer. */
	uint32_t hx, hi, hs, ho, bos[3];
	uint64_t vs, vo;
	struct drm_spyre_bo_info info;
	volatile uint64_t *s;
	uint8_t *po;
	int dfd;

	NEED_CARD1();
	ASSERT_EQ(0, st_bo_new(self->a.fd, MiB, &hx, NULL));
	ASSERT_EQ(0, prime_export(self->a.fd, hx, &dfd));
	ASSERT_EQ(0, prime_import(self->b.fd, dfd, &hi));
	close(dfd);
	ASSERT_EQ(0, st_bo_get_info(self->b.fd, hi, &info));
	ASSERT_EQ(0, st_bo_new(self->b.fd, PAGE, &hs, &vs));
	ASSERT_EQ(0, st_bo_new(self->b.fd, MiB, &ho, &vo));
	s = st_bo_mmap(self->b.fd, hs, PAGE);
	ASSERT_NE(MAP_FAILED, s);
	po = st_bo_mmap(self->b.fd, ho, MiB);
	ASSERT_NE(MAP_FAILED, po);
	bos[0] = hs;
	bos[1] = hi;
	bos[2] = ho;
	ASSERT_EQ(0, submit_parked(&self->b, vs, info.va, vo, MiB, 0x3c, bos,
				   3));
	ASSERT_EQ(0, drmCloseBufferHandle(self->a.fd, hx));
	st_close(&self->a);
	s[0] = 1;
	ASSERT_EQ(0, st_sync_wait(self->b.fd, self->b.sync,
				  ST_TIMEOUT_NS));
	EXPECT_EQ(1, st_sync_status(self->b.fd, self->b.sync));
	EXPECT_TRUE(st_all_bytes(po, MiB, 0x3c));
	munmap((void *)s, PAGE);
	munmap(po, MiB);
}

/* ---- foreign dma-bufs --------------------------------------------------- */

FIXTURE(foreign) {
	struct st_ctx c[2];
	int ncards;
	int dfd;		/* the dma-buf */
	uint8_t *cpu;		/* CPU view (dma-buf mmap or memfd mmap) */
	uint64_t size;
	int sync;		/* CPU view needs DMA_BUF_IOCTL_SYNC */
	int mfd;
};

FIXTURE_VARIANT(foreign) {
	int udmabuf;
	uint64_t size;
};

FIXTURE_VARIANT_ADD(foreign, dma_heap_system) { .udmabuf = 0,
						 .size = 2 * MiB + 3 * PAGE };
FIXTURE_VARIANT_ADD(foreign, udmabuf_memfd) { .udmabuf = 1,
					       .size = 4 * MiB };

/* Drop @self's foreign buffer, if any (a BO imported from it stays valid). */
static void foreign_release(FIXTURE_DATA(foreign) *self)
{
	if (self->cpu != MAP_FAILED)
		munmap(self->cpu, self->size);
	if (self->dfd >= 0)
		close(self->dfd);
	if (self->mfd >= 0)
		close(self->mfd);
	self->dfd = self->mfd = -1;
	self->cpu = MAP_FAILED;
}

/*
 * A new foreign buffer of @variant's kind into @self (dfd, cpu, mfd,
 * sync), the previous one released.
 */
static void foreign_alloc(struct __test_metadata *_metadata,
			  FIXTURE_DATA(foreign) *self,
			  const FIXTURE_VARIANT(foreign) *variant)
{
	foreign_release(self);
	if (!variant->udmabuf) {
		struct dma_heap_allocation_data a = {
			.len = self->size,
			.fd_flags = O_RDWR | O_CLOEXEC,
		};
		int hfd = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);

		ASSERT_LE(0, hfd) TH_LOG("/dev/dma_heap/system: %s",
					 strerror(errno));
		ASSERT_EQ(0, ioctl(hfd, DMA_HEAP_IOCTL_ALLOC, &a))
			TH_LOG("DMA_HEAP_IOCTL_ALLOC: %s", strerror(errno));
		close(hfd);
		self->dfd = (int)a.fd;
		self->cpu = mmap(NULL, self->size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, self->dfd, 0);
		self->sync = 1;
	} else {
		struct udmabuf_create u = {
			.flags = UDMABUF_FLAGS_CLOEXEC,
			.offset = 0,
			.size = self->size,
		};
		int ufd = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);

		if (ufd < 0)
			SKIP(return, "/dev/udmabuf: %s", strerror(errno));
		self->mfd = memfd_create("spyre-udmabuf",
					 MFD_CLOEXEC | MFD_ALLOW_SEALING);
		ASSERT_LE(0, self->mfd);
		ASSERT_EQ(0, ftruncate(self->mfd, (off_t)self->size));
		ASSERT_EQ(0, fcntl(self->mfd, F_ADD_SEALS, F_SEAL_SHRINK));
		u.memfd = (uint32_t)self->mfd;
		self->dfd = ioctl(ufd, UDMABUF_CREATE, &u);
		ASSERT_LE(0, self->dfd) TH_LOG("UDMABUF_CREATE: %s",
					       strerror(errno));
		close(ufd);
		/* the memfd's own mapping is the CPU view */
		self->cpu = mmap(NULL, self->size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, self->mfd, 0);
		self->sync = 0;
	}
	ASSERT_NE(MAP_FAILED, self->cpu);
}

FIXTURE_SETUP(foreign)
{
	int ret = st_ctx_init(&self->c[0], 0);

	self->c[1].fd = -1;
	self->dfd = self->mfd = -1;
	self->cpu = MAP_FAILED;
	self->size = variant->size;
	if (ret == -ENODEV)
		SKIP(return, "no Spyre card (/dev/accel)");
	ASSERT_EQ(0, ret);
	self->ncards = st_ctx_init(&self->c[1], 1) ? 1 : 2;
	foreign_alloc(_metadata, self, variant);
}

FIXTURE_TEARDOWN(foreign)
{
	foreign_release(self);
	st_close(&self->c[0]);
	st_close(&self->c[1]);
}

static void cpu_begin(struct __test_metadata *_metadata, int dfd, int sync,
		      uint64_t flags)
{
	if (sync)
		ASSERT_EQ(0, dmabuf_sync(dfd, DMA_BUF_SYNC_START | flags));
}

static void cpu_end(struct __test_metadata *_metadata, int dfd, int sync,
		    uint64_t flags)
{
	if (sync)
		ASSERT_EQ(0, dmabuf_sync(dfd, DMA_BUF_SYNC_END | flags));
}

TEST_F(foreign, card_reads_and_writes)
{
	uint8_t *ref = malloc(self->size);

	ASSERT_NE(NULL, ref);
	for (int card = 0; card < self->ncards; card++) {
		struct st_ctx *c = &self->c[card];
		struct drm_spyre_bo_info info;
		uint32_t hi, hs, bos[2];
		uint64_t vs, n = self->size - 4096 - 5;
		uint8_t *ps;

		/*
		 * Each card a buffer of its own: both exporters map every
		 * attachment without DMA_ATTR_SKIP_CPU_SYNC, and the DMA API
		 * (CONFIG_DMA_API_DEBUG: "overlapping mappings aren't
		 * supported") does not allow two such mappings of one page
		 * at a time, whichever devices hold them.
		 */
		if (card)
			foreign_alloc(_metadata, self, variant);
		/* CPU writes, card copies into its own BO */
		st_fill_words(ref, self->size, 0xf00 + card);
		cpu_begin(_metadata, self->dfd, self->sync, DMA_BUF_SYNC_WRITE);
		memcpy(self->cpu, ref, self->size);
		cpu_end(_metadata, self->dfd, self->sync, DMA_BUF_SYNC_WRITE);
		ASSERT_EQ(0, prime_import(c->fd, self->dfd, &hi));
		ASSERT_EQ(0, st_bo_get_info(c->fd, hi, &info));
		EXPECT_EQ(self->size, info.size);
		EXPECT_EQ(DRM_SPYRE_PLACEMENT_IMPORTED, info.placement);
		EXPECT_EQ(0, info.va % PAGE);
		EXPECT_LE(c->di.va_start, info.va);
		ASSERT_EQ(0, st_bo_new(c->fd, self->size, &hs, &vs));
		ps = st_bo_mmap(c->fd, hs, self->size);
		ASSERT_NE(MAP_FAILED, ps);
		bos[0] = hi;
		bos[1] = hs;
		ASSERT_EQ(0, card_copy(c, vs + 1, info.va + 4096 + 5, n, bos,
				       2));
		EXPECT_EQ(n, st_first_diff(ps + 1, ref + 4096 + 5, n))
			TH_LOG("card %d read", card);
		/* card writes into the foreign buffer (odd range) */
		st_fill_words(ps, self->size, 0xbeef + card);
		ASSERT_EQ(0, card_copy(c, info.va + 7, vs + 7,
				       self->size - 14, bos, 2));
		cpu_begin(_metadata, self->dfd, self->sync, DMA_BUF_SYNC_READ);
		EXPECT_EQ(0, memcmp(self->cpu, ref, 7));
		EXPECT_EQ(self->size - 14, st_first_diff(self->cpu + 7,
				ps + 7, self->size - 14)) TH_LOG("card %d write",
								card);
		EXPECT_EQ(0, memcmp(self->cpu + self->size - 7,
				    ref + self->size - 7, 7));
		cpu_end(_metadata, self->dfd, self->sync, DMA_BUF_SYNC_READ);
		/* one byte past the import faults */
		EXPECT_EQ(-EFAULT, card_fill(c, info.va + self->size, 1, 1,
					     bos, 1));
		munmap(ps, self->size);
	}
	free(ref);
}

TEST_F(foreign, import_survives_fd_close)
{
	struct st_ctx *c = &self->c[0];
	struct drm_spyre_bo_info info;
	uint32_t hi;

	ASSERT_EQ(0, prime_import(c->fd, self->dfd, &hi));
	close(self->dfd);
	self->dfd = -1;
	ASSERT_EQ(0, st_bo_get_info(c->fd, hi, &info));
	ASSERT_EQ(0, card_fill(c, info.va, self->size, 0x29, &hi, 1));
	/* udmabuf: the memfd pages; dma-heap: the buffer stays mapped */
	EXPECT_TRUE(st_all_bytes(self->cpu, self->size, 0x29));
}

TEST_HARNESS_MAIN
