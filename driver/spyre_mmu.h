/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: contexts, their VMs and page tables
 * (spyre_mmu.c).
 */
#ifndef SPYRE_MMU_H
#define SPYRE_MMU_H

#include <linux/atomic.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include <drm/drm_mm.h>

#include "spyre_drv.h"

struct spyre_bo;

/* Device VA window handed to BOs: [4 GiB, 128 TiB). */
#define SPYRE_VA_START		BIT_ULL(32)
#define SPYRE_VA_END		BIT_ULL(47)
/* Unmapped pages after each BO (at least one). */
#define SPYRE_GUARD_SIZE	SPYRE_PAGE_SIZE

/**
 * struct spyre_pt - one page-table page.
 * @cpu: CPU view of the 512 entries (coherent DMA memory, little-endian).
 * @dma: bus address the card walks.
 * @child: next-level tables (NULL for leaf tables).
 */
struct spyre_pt {
	__le64 *cpu;
	dma_addr_t dma;
	struct spyre_pt **child;
};

/**
 * struct spyre_ctx - a device context: hardware context id and its VM.
 * @ref: references (file, BOs mapped in it, queues).
 * @sdev: device; a drm_dev reference is held.
 * @id: hardware context id (valid while @active).
 * @error: 0, or the first error that made the context unusable (sticky).
 * @faults: MMU faults that ended jobs of this context.
 * @fault_va: device VA of the first such fault, 0 if none.
 * @job_err_noted: @job_status and the fields after it are set.
 * @job_status: SPYRE_STATUS_* of the first job of this context that failed
 *	on the card (spyre_ctx_note_job_error()).
 * @job_cmd_offset: that job's record's command offset.
 * @job_detail: that job's record's detail.
 * @job_detail2: that job's record's detail2.
 * @stats: memory held by BOs this context's file created.
 * @busy_ns: card time (ns) its destroyed queues were busy (fdinfo).
 * @lock: protects @mm, @root, @vmas and @active.
 * @mm: VA allocator.
 * @root: level-0 page table.
 * @vmas: BOs mapped in this VM (struct spyre_vma.ctx_link).
 * @active: the hardware context is programmed and @id is owned.
 * @link: entry in sdev->ctx_list while @active.
 */
struct spyre_ctx {
	struct kref ref;
	struct spyre_device *sdev;
	u32 id;
	atomic_t error;
	atomic64_t faults;
	atomic64_t fault_va;
	atomic_t job_err_noted;
	u32 job_status;
	u32 job_cmd_offset;
	u64 job_detail;
	u64 job_detail2;
	struct spyre_mem_stats stats;
	atomic64_t busy_ns;
	struct mutex lock;		/* mm, root, vmas, active */
	struct drm_mm mm;
	struct spyre_pt *root;
	struct list_head vmas;
	bool active;
	struct list_head link;
};

/**
 * struct spyre_vma - a BO mapped into one context's VM.
 * @ref: GEM handles to the BO in the context's file, plus jobs of the
 *	context that list the BO.
 * @bo: the BO (kept alive by whoever holds @ref).
 * @ctx: the context (reference held).
 * @node: VA range, including the guard page(s).
 * @bo_link: entry in @bo->vmas while @ref > 0.
 * @ctx_link: entry in @ctx->vmas while @mapped.
 * @mapped: PTEs and @node are present; protected by @ctx->lock.
 */
struct spyre_vma {
	struct kref ref;
	struct spyre_bo *bo;
	struct spyre_ctx *ctx;
	struct drm_mm_node node;
	struct list_head bo_link;
	struct list_head ctx_link;
	bool mapped;
};

struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev);
void spyre_ctx_get(struct spyre_ctx *ctx);
void spyre_ctx_put(struct spyre_ctx *ctx);
void spyre_ctx_release_hw(struct spyre_ctx *ctx);
void spyre_ctx_set_error(struct spyre_ctx *ctx, int err);
void spyre_ctx_note_fault(struct spyre_ctx *ctx, u64 va);
void spyre_ctx_note_job_error(struct spyre_ctx *ctx, u32 status,
			      u32 cmd_offset, u64 detail, u64 detail2);
void spyre_ctxs_restore_hw(struct spyre_device *sdev);
void spyre_ctxs_release_all(struct spyre_device *sdev);
int spyre_vma_open(struct spyre_bo *bo, struct spyre_ctx *ctx);
void spyre_vma_close(struct spyre_bo *bo, struct spyre_ctx *ctx);
struct spyre_vma *spyre_vma_lookup(struct spyre_bo *bo,
				   struct spyre_ctx *ctx);
void spyre_vma_put(struct spyre_vma *vma);
u64 spyre_vma_va(struct spyre_bo *bo, struct spyre_ctx *ctx);
int spyre_mmu_invalidate(struct spyre_device *sdev, u32 ctx_id);
int spyre_mmu_invalidate_locked(struct spyre_device *sdev, u32 ctx_id);

#endif /* SPYRE_MMU_H */
