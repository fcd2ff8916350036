// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: contexts, device page tables and TLB
 * invalidation.
 *
 * Each open file owns one context: a hardware context id and a 4-level
 * page table (format in spyre_hw.h) in coherent DMA memory that only the
 * kernel writes.  VAs come from a drm_mm over [SPYRE_VA_START,
 * SPYRE_VA_END); each BO's range is followed by an unmapped guard page.
 */

#include <linux/dma-mapping.h>
#include <linux/iopoll.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "spyre_drv.h"

#define SPYRE_INVAL_TIMEOUT_US	(100 * USEC_PER_MSEC)

static struct spyre_pt *spyre_pt_alloc(struct spyre_device *sdev, bool leaf)
{
	struct spyre_pt *pt;

	pt = kzalloc(sizeof(*pt), GFP_KERNEL);
	if (!pt)
		return NULL;

	pt->cpu = dma_alloc_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, &pt->dma,
				     GFP_KERNEL);
	if (!pt->cpu)
		goto err_free;

	if (pt->dma & ~SPYRE_PTE_ADDR_MASK) {
		drm_err(&sdev->drm, "page table at %pad not addressable\n",
			&pt->dma);
		goto err_dma;
	}

	if (!leaf) {
		pt->child = kcalloc(SPYRE_PT_ENTRIES, sizeof(*pt->child),
				    GFP_KERNEL);
		if (!pt->child)
			goto err_dma;
	}
	return pt;

err_dma:
	dma_free_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, pt->cpu, pt->dma);
err_free:
	kfree(pt);
	return NULL;
}

static void spyre_pt_free(struct spyre_device *sdev, struct spyre_pt *pt)
{
	unsigned int i;

	if (!pt)
		return;

	if (pt->child) {
		for (i = 0; i < SPYRE_PT_ENTRIES; i++)
			spyre_pt_free(sdev, pt->child[i]);
		kfree(pt->child);
	}
	dma_free_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, pt->cpu, pt->dma);
	kfree(pt);
}

/*
 * Return the leaf table covering @va, allocating missing tables if @alloc.
 * Returns NULL if absent and !@alloc, ERR_PTR(-ENOMEM) on failure.
 */
static struct spyre_pt *spyre_pt_walk(struct spyre_ctx *ctx, u64 va,
				      bool alloc)
{
	struct spyre_pt *pt = ctx->root;
	unsigned int lvl;

	lockdep_assert_held(&ctx->lock);

	for (lvl = 0; lvl < SPYRE_PT_LEVELS - 1; lvl++) {
		unsigned int idx = SPYRE_PT_INDEX(va, lvl);
		struct spyre_pt *child = pt->child[idx];

		if (!child) {
			if (!alloc)
				return NULL;
			child = spyre_pt_alloc(ctx->sdev,
					       lvl + 1 == SPYRE_PT_LEVELS - 1);
			if (!child)
				return ERR_PTR(-ENOMEM);
			pt->child[idx] = child;
			WRITE_ONCE(pt->cpu[idx], child->dma | SPYRE_PTE_VALID);
		}
		pt = child;
	}
	return pt;
}

static void spyre_vm_clear(struct spyre_ctx *ctx, u64 va, u64 npages)
{
	struct spyre_pt *leaf = NULL;
	u64 i;

	for (i = 0; i < npages; i++, va += SPYRE_PAGE_SIZE) {
		unsigned int idx = SPYRE_PT_INDEX(va, SPYRE_PT_LEVELS - 1);

		if (!leaf || idx == 0)
			leaf = spyre_pt_walk(ctx, va, false);
		if (leaf)
			WRITE_ONCE(leaf->cpu[idx], 0);
	}
	/* PTE writes reach memory before the invalidation request. */
	dma_wmb();
}

static int spyre_vm_map_sgt(struct spyre_ctx *ctx, u64 start, u64 npages,
			    struct sg_table *sgt)
{
	struct spyre_pt *leaf = NULL;
	struct sg_dma_page_iter iter;
	u64 va = start, n = 0;
	int ret = 0;

	for_each_sgtable_dma_page(sgt, &iter, 0) {
		dma_addr_t dma = sg_page_iter_dma_address(&iter);
		unsigned int idx = SPYRE_PT_INDEX(va, SPYRE_PT_LEVELS - 1);

		if (n == npages)
			break;
		if (dma & ~SPYRE_PTE_ADDR_MASK) {
			ret = -EINVAL;
			goto err;
		}
		if (!leaf || idx == 0) {
			leaf = spyre_pt_walk(ctx, va, true);
			if (IS_ERR(leaf)) {
				ret = PTR_ERR(leaf);
				goto err;
			}
		}
		WRITE_ONCE(leaf->cpu[idx],
			   dma | SPYRE_PTE_VALID | SPYRE_PTE_WRITE);
		va += SPYRE_PAGE_SIZE;
		n++;
	}
	if (n != npages) {
		ret = -EINVAL;
		goto err;
	}
	dma_wmb();
	return 0;

err:
	spyre_vm_clear(ctx, start, n);
	return ret;
}

/**
 * spyre_mmu_invalidate() - invalidate the card's TLB for one context and
 * wait for the acknowledgment.
 * @sdev: device.
 * @ctx_id: hardware context id.
 *
 * Return: 0 when the card acknowledged, -ENODEV if the device is gone
 * (it no longer does DMA then), -ETIMEDOUT if it did not acknowledge.
 */
int spyre_mmu_invalidate(struct spyre_device *sdev, u32 ctx_id)
{
	u32 req, ack;
	int idx, ret;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;

	mutex_lock(&sdev->mmu_lock);
	spyre_write64(sdev, SPYRE_REG_MMU_INVAL,
		      ctx_id & SPYRE_MMU_INVAL_CTX_MASK);
	req = spyre_read32(sdev, SPYRE_REG_MMU_INVAL_REQ);
	ret = readl_poll_timeout(sdev->regs + SPYRE_REG_MMU_INVAL_ACK, ack,
				 (s32)(ack - req) >= 0, 2,
				 SPYRE_INVAL_TIMEOUT_US);
	mutex_unlock(&sdev->mmu_lock);

	if (ret)
		drm_err_ratelimited(&sdev->drm,
				    "TLB invalidation of context %u timed out (req %u ack %u)\n",
				    ctx_id, req, ack);
	drm_dev_exit(idx);
	return ret;
}

/**
 * spyre_ctx_create() - allocate a context and program its page-table root.
 * @sdev: device.
 *
 * Return: the context with one reference, or an ERR_PTR: -EBUSY when all
 * hardware contexts are in use, -ENOMEM, -ENODEV.
 */
struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev)
{
	struct spyre_ctx *ctx;
	int id, idx, ret;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return ERR_PTR(-ENOMEM);

	kref_init(&ctx->ref);
	ctx->sdev = sdev;
	mutex_init(&ctx->lock);
	INIT_LIST_HEAD(&ctx->bos);
	INIT_LIST_HEAD(&ctx->link);
	drm_dev_get(&sdev->drm);

	id = ida_alloc_max(&sdev->ctx_ida, sdev->num_contexts - 1, GFP_KERNEL);
	if (id < 0) {
		ret = id == -ENOSPC ? -EBUSY : id;
		goto err_put;
	}
	ctx->id = id;

	ctx->root = spyre_pt_alloc(sdev, false);
	if (!ctx->root) {
		ret = -ENOMEM;
		goto err_ida;
	}

	if (!drm_dev_enter(&sdev->drm, &idx)) {
		ret = -ENODEV;
		goto err_pt;
	}
	spyre_write64(sdev, SPYRE_REG_CTX_ROOT(id),
		      ctx->root->dma | SPYRE_PTE_VALID);
	drm_dev_exit(idx);

	drm_mm_init(&ctx->mm, SPYRE_VA_START, SPYRE_VA_END - SPYRE_VA_START);
	ctx->active = true;

	mutex_lock(&sdev->ctx_list_lock);
	list_add_tail(&ctx->link, &sdev->ctx_list);
	mutex_unlock(&sdev->ctx_list_lock);
	return ctx;

err_pt:
	spyre_pt_free(sdev, ctx->root);
err_ida:
	ida_free(&sdev->ctx_ida, id);
err_put:
	drm_dev_put(&sdev->drm);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return ERR_PTR(ret);
}

/**
 * spyre_ctx_release_hw() - detach a context from the card.
 * @ctx: context.
 *
 * Unmaps every BO from the VM, clears the page-table root, waits for the
 * TLB invalidation, frees the page tables and the hardware context id.
 * Called when the owning file closes, after its queues are destroyed; BOs
 * that outlive the file stay valid but are no longer mapped.
 */
void spyre_ctx_release_hw(struct spyre_ctx *ctx)
{
	struct spyre_device *sdev = ctx->sdev;
	struct spyre_bo *bo, *tmp;
	int idx;

	mutex_lock(&sdev->ctx_list_lock);
	mutex_lock(&ctx->lock);
	if (!ctx->active) {
		mutex_unlock(&ctx->lock);
		mutex_unlock(&sdev->ctx_list_lock);
		return;
	}
	list_del_init(&ctx->link);
	mutex_unlock(&sdev->ctx_list_lock);

	list_for_each_entry_safe(bo, tmp, &ctx->bos, ctx_link) {
		list_del_init(&bo->ctx_link);
		drm_mm_remove_node(&bo->node);
		bo->mapped = false;
	}

	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_write64(sdev, SPYRE_REG_CTX_ROOT(ctx->id), 0);
		drm_dev_exit(idx);
	}
	spyre_mmu_invalidate(sdev, ctx->id);

	spyre_pt_free(sdev, ctx->root);
	ctx->root = NULL;
	drm_mm_takedown(&ctx->mm);
	ida_free(&sdev->ctx_ida, ctx->id);
	ctx->active = false;
	mutex_unlock(&ctx->lock);
}

static void spyre_ctx_release(struct kref *ref)
{
	struct spyre_ctx *ctx = container_of(ref, struct spyre_ctx, ref);
	struct drm_device *drm = &ctx->sdev->drm;

	spyre_ctx_release_hw(ctx);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	drm_dev_put(drm);
}

/**
 * spyre_ctx_get() - take a context reference.
 * @ctx: context.
 */
void spyre_ctx_get(struct spyre_ctx *ctx)
{
	kref_get(&ctx->ref);
}

/**
 * spyre_ctx_put() - drop a context reference.
 * @ctx: context, may be NULL.
 */
void spyre_ctx_put(struct spyre_ctx *ctx)
{
	if (ctx)
		kref_put(&ctx->ref, spyre_ctx_release);
}

/**
 * spyre_ctx_set_error() - mark a context unusable (sticky).
 * @ctx: context.
 * @err: negative errno; only the first error is kept.
 */
void spyre_ctx_set_error(struct spyre_ctx *ctx, int err)
{
	atomic_cmpxchg(&ctx->error, 0, err);
}

/**
 * spyre_ctx_map_bo() - give a BO a VA in @ctx and map its pages.
 * @ctx: context.
 * @bo: BO, not mapped yet.
 * @sgt: DMA-mapped pages of @bo.
 *
 * The VA range is followed by SPYRE_GUARD_SIZE unmapped bytes.  PTEs are
 * system memory, readable and writable.  On success @bo holds a reference
 * to @ctx.
 *
 * Return: 0, -ENOMEM (no memory or VA space), -EINVAL (pages not
 * addressable), -ENODEV (context released).
 */
int spyre_ctx_map_bo(struct spyre_ctx *ctx, struct spyre_bo *bo,
		     struct sg_table *sgt)
{
	u64 size = bo->base.base.size;
	int ret;

	mutex_lock(&ctx->lock);
	if (!ctx->active) {
		ret = -ENODEV;
		goto out;
	}

	ret = drm_mm_insert_node_in_range(&ctx->mm, &bo->node,
					  size + SPYRE_GUARD_SIZE, 0, 0,
					  SPYRE_VA_START, SPYRE_VA_END,
					  DRM_MM_INSERT_BEST);
	if (ret) {
		ret = -ENOMEM;
		goto out;
	}

	ret = spyre_vm_map_sgt(ctx, bo->node.start, size >> SPYRE_PAGE_SHIFT,
			       sgt);
	if (ret) {
		drm_mm_remove_node(&bo->node);
		goto out;
	}

	spyre_ctx_get(ctx);
	bo->ctx = ctx;
	bo->mapped = true;
	list_add_tail(&bo->ctx_link, &ctx->bos);
out:
	mutex_unlock(&ctx->lock);
	return ret;
}

/**
 * spyre_bo_unmap() - remove a BO from its VM.
 * @bo: BO, mapped or not.
 *
 * Clears the PTEs and waits until the card acknowledged the TLB
 * invalidation, so the caller may release the pages afterwards.  Drops the
 * BO's context reference.
 */
void spyre_bo_unmap(struct spyre_bo *bo)
{
	struct spyre_ctx *ctx = bo->ctx;

	if (!ctx)
		return;

	mutex_lock(&ctx->lock);
	if (bo->mapped) {
		spyre_vm_clear(ctx, bo->node.start,
			       bo->base.base.size >> SPYRE_PAGE_SHIFT);
		if (ctx->active)
			spyre_mmu_invalidate(ctx->sdev, ctx->id);
		list_del_init(&bo->ctx_link);
		drm_mm_remove_node(&bo->node);
		bo->mapped = false;
	}
	mutex_unlock(&ctx->lock);

	bo->ctx = NULL;
	spyre_ctx_put(ctx);
}
