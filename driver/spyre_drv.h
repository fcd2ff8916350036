/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: shared definitions.
 *
 * Object model:
 *  - struct spyre_device: one PCI function (the card).
 *  - struct spyre_ctx: a device context (address space) owned by one open
 *    file; refcounted because BOs and queues may outlive the file.
 *  - struct spyre_bo: a buffer object: shmem (system memory), a range of
 *    device memory (drm_buddy over BAR2), pinned user pages (userptr) or
 *    an imported dma-buf.
 *  - struct spyre_vma: a BO mapped into one context's VM; every GEM handle
 *    of a file holds a reference on its BO's mapping in the file's
 *    context, and so does every job that lists the BO.
 *  - struct spyre_queue: one hardware queue with its own drm_sched
 *    instance; refcounted because jobs may outlive QUEUE_DESTROY.
 *  - struct spyre_job: one submitted job.
 */
#ifndef SPYRE_DRV_H
#define SPYRE_DRV_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/dma-fence.h>
#include <linux/io.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include <drm/drm_buddy.h>
#include <drm/drm_device.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_mm.h>
#include <drm/gpu_scheduler.h>

#include "spyre_hw.h"

#define SPYRE_DRIVER_NAME	"spyre"
#define SPYRE_DRIVER_DESC	"Spyre AI accelerator (emulated)"
#define SPYRE_DRIVER_MAJOR	0
#define SPYRE_DRIVER_MINOR	2

/* Device VA window handed to BOs: [4 GiB, 128 TiB). */
#define SPYRE_VA_START		BIT_ULL(32)
#define SPYRE_VA_END		BIT_ULL(47)
/* Unmapped pages after each BO (at least one). */
#define SPYRE_GUARD_SIZE	SPYRE_PAGE_SIZE

/* Ring entries per queue (power of two, SPYRE_RING_MIN/MAX_ENTRIES). */
#define SPYRE_RING_ENTRIES	256

/* BO_CREATE flags this driver knows. */
#define SPYRE_BO_FLAGS		DRM_SPYRE_BO_DEVICE

/* SUBMIT limits, reported in drm_spyre_device_info. */
#define SPYRE_MAX_JOBS			256
#define SPYRE_MAX_BOS_PER_JOB		4096
#define SPYRE_MAX_SYNCS_PER_JOB		64

extern unsigned int spyre_job_timeout_ms;
extern unsigned long spyre_max_bo_mb;

struct spyre_queue;

/**
 * struct spyre_mem_stats - bytes of memory held by BOs.
 * @devmem: device memory (DRM_SPYRE_PLACEMENT_DEVICE).
 * @sysmem: shmem pages of created system BOs.
 * @userptr: user pages pinned by userptr BOs.
 */
struct spyre_mem_stats {
	atomic64_t devmem;
	atomic64_t sysmem;
	atomic64_t userptr;
};

/**
 * struct spyre_devmem - device memory (BAR2) manager.
 * @lock: protects @mm.
 * @mm: buddy allocator over [0, @size), 4 KiB chunks.
 * @size: bytes managed (0: no usable device memory).
 * @base: bus address of BAR2 (CPU physical address for mmap).
 * @map: write-combined kernel mapping of the managed range, used to clear
 *	memory before it is handed out; only touched inside drm_dev_enter().
 */
struct spyre_devmem {
	struct mutex lock;		/* protects mm */
	struct drm_buddy mm;
	u64 size;
	resource_size_t base;
	void __iomem *map;
};

/**
 * struct spyre_irq_vec - per MSI-X vector handler data.
 * @sdev: owning device.
 * @index: vector index (0 is the error vector).
 */
struct spyre_irq_vec {
	struct spyre_device *sdev;
	unsigned int index;
};

/**
 * struct spyre_device - one Spyre card.
 * @drm: DRM device (must stay first for devm_drm_dev_alloc users).
 * @pdev: PCI function.
 * @regs: BAR0 mapping; only touched inside drm_dev_enter() or from IRQ
 *	handlers (which are freed before the mapping).
 * @hw_version: VERSION register.
 * @caps: CAPS register.
 * @num_queues: hardware queues the driver uses.
 * @num_cores: AI cores.
 * @num_contexts: hardware contexts the driver uses.
 * @devmem_size: device memory bytes.
 * @nvec: MSI-X vectors allocated (>= 2).
 * @vecs: handler data per vector.
 * @ctx_ida: hardware context ids.
 * @hwq_ida: hardware queue ids.
 * @hwq_lock: protects @hwq; taken from the completion IRQ.
 * @hwq: active queue per hardware queue id, for IRQ dispatch.
 * @mmu_lock: serialises TLB invalidation requests.
 * @ctx_list_lock: protects @ctx_list.
 * @ctx_list: active contexts (struct spyre_ctx.link), for debugfs.
 * @ctxs: active contexts by hardware id (changed with @reset_sem held
 *	for reading), to restore their page-table roots after a reset.
 * @faults: fault records drained.
 * @faults_lost: fault records the card dropped.
 * @queue_errors: QUEUE_ERROR interrupts.
 * @devmem: device memory manager.
 * @stats: memory held by BOs of all files.
 * @reset_sem: held for writing from reset_prepare to reset_done (PCI
 *	function reset); paths that program the card, and the clear of new
 *	device memory through BAR2, hold it for reading.
 * @dma_sem: held for reading while coherent DMA memory (page tables,
 *	rings) is freed, for writing by remove() when it frees what is left:
 *	after remove() the DMA API may no longer be used on the device (its
 *	IOMMU state is gone).
 * @dma_gone: remove() freed the coherent memory; protected by @dma_sem.
 * @submit_wq: workqueue of every queue's scheduler (run_job, free_job).
 * @queues_lock: protects @queues.
 * @queues: queues holding coherent memory (struct spyre_queue.dev_link).
 */
struct spyre_device {
	struct drm_device drm;
	struct pci_dev *pdev;
	void __iomem *regs;

	u32 hw_version;
	u64 caps;
	u32 num_queues;
	u32 num_cores;
	u32 num_contexts;
	u64 devmem_size;

	unsigned int nvec;
	struct spyre_irq_vec *vecs;

	struct ida ctx_ida;
	struct ida hwq_ida;

	spinlock_t hwq_lock;		/* protects hwq[] */
	struct spyre_queue **hwq;

	struct mutex mmu_lock;		/* TLB invalidation */

	struct mutex ctx_list_lock;	/* protects ctx_list */
	struct list_head ctx_list;
	struct xarray ctxs;

	atomic64_t faults;
	atomic64_t faults_lost;
	atomic64_t queue_errors;

	struct spyre_devmem devmem;
	struct spyre_mem_stats stats;
	struct rw_semaphore reset_sem;

	struct rw_semaphore dma_sem;
	bool dma_gone;
	struct workqueue_struct *submit_wq;
	struct mutex queues_lock;	/* protects queues */
	struct list_head queues;
};

/**
 * struct spyre_pt - one page-table page.
 * @cpu: CPU view of the 512 entries (coherent DMA memory).
 * @dma: bus address the card walks.
 * @child: next-level tables (NULL for leaf tables).
 */
struct spyre_pt {
	u64 *cpu;
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
 * @stats: memory held by BOs this context's file created.
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
	struct spyre_mem_stats stats;
	struct mutex lock;		/* mm, root, vmas, active */
	struct drm_mm mm;
	struct spyre_pt *root;
	struct list_head vmas;
	bool active;
	struct list_head link;
};

/**
 * struct spyre_bo - a buffer object.
 * @gem: the GEM object (every placement).
 * @shmem: the shmem object (DRM_SPYRE_PLACEMENT_SYSTEM and _IMPORTED, which
 *	the shmem helpers create); @gem aliases @shmem.base.
 * @placement: DRM_SPYRE_PLACEMENT_*.
 * @readonly: the card may only read the BO (read-only userptr).
 * @owner: context of the file that created the BO, charged for its memory
 *	(reference held); NULL for imported BOs.
 * @sgt: DMA-mapped pages the PTEs point to (system, userptr, imported).
 * @vma_lock: protects @vmas.
 * @vmas: mappings of the BO (struct spyre_vma.bo_link), one per context.
 * @blocks: drm_buddy blocks of a device-memory BO.
 * @pages: pinned pages of a userptr BO.
 * @npages: entries in @pages.
 * @pinned_mm: mm whose pinned_vm a userptr BO is charged to (RLIMIT_MEMLOCK;
 *	an mm_count reference is held), NULL if not charged.
 */
struct spyre_bo {
	union {
		struct drm_gem_object gem;
		struct drm_gem_shmem_object shmem;
	};
	u32 placement;
	bool readonly;
	struct spyre_ctx *owner;
	struct sg_table *sgt;
	struct mutex vma_lock;		/* protects vmas */
	struct list_head vmas;
	struct list_head blocks;
	struct page **pages;
	unsigned long npages;
	struct mm_struct *pinned_mm;
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

/**
 * struct spyre_file - per open file state.
 * @sdev: device.
 * @ctx: the file's context.
 * @queues: queue id -> struct spyre_queue.
 */
struct spyre_file {
	struct spyre_device *sdev;
	struct spyre_ctx *ctx;
	struct xarray queues;
};

/**
 * struct spyre_fence - hardware fence of one job.
 * @base: the fence (must stay first: freed with dma_fence_free()).
 * @lock: fence lock; per fence so the fence may outlive its queue.
 * @link: entry in the queue's pending list.
 * @first_seqno: seqno of the job's first descriptor (base.seqno is the
 *	last one's).
 */
struct spyre_fence {
	struct dma_fence base;
	spinlock_t lock;		/* fence lock */
	struct list_head link;
	u64 first_seqno;
};

/**
 * struct spyre_queue - a user queue bound to one hardware queue.
 * @ref: references (file, submit in progress, each job).
 * @sdev: device.
 * @ctx: context the queue runs in (reference held).
 * @hwq: hardware queue index.
 * @vector: MSI-X vector of the queue.
 * @priority: DRM_SPYRE_PRIORITY_*.
 * @name: scheduler name.
 * @sched: the queue's scheduler.
 * @sched_list: scheduler list for @entity.
 * @entity: the only entity on @sched.
 * @lock: serialises job arm/push and @dead.
 * @reset_lock: serialises timeout handling with teardown.
 * @dead: set on teardown, no more jobs reach the ring.
 * @next_seqno: seqno of the next job pushed (from 1).
 * @fence_ctx: dma_fence context.
 * @ring: ring of @entries job descriptors (coherent DMA).
 * @ring_dma: bus address of @ring.
 * @entries: ring entries.
 * @tail: next ring slot to write (run_job only).
 * @db_tail: @tail as last written to the doorbell: slots from @db_tail to
 *	@tail are written but not handed to the card yet.
 * @deferred: descriptors written since the last doorbell.
 * @compl: completion record (coherent DMA).
 * @compl_dma: bus address of @compl.
 * @fence_lock: protects @pending.
 * @pending: hardware fences of jobs written to the ring, in seqno order.
 * @jobs_ran: jobs that went through run_job and are not freed yet.
 * @idle_wq: woken when @jobs_ran drops.
 * @hw_active: hardware queue programmed and listed in sdev->hwq.
 * @sched_ready: @sched and @entity are initialised.
 * @dev_link: entry in sdev->queues while @ring and @compl are allocated.
 */
struct spyre_queue {
	struct kref ref;
	struct spyre_device *sdev;
	struct spyre_ctx *ctx;
	u32 hwq;
	u32 vector;
	u32 priority;
	char name[24];

	struct drm_gpu_scheduler sched;
	struct drm_gpu_scheduler *sched_list[1];
	struct drm_sched_entity entity;

	struct mutex lock;		/* arm/push vs dead */
	struct mutex reset_lock;	/* timeout vs teardown */
	bool dead;
	u64 next_seqno;
	u64 fence_ctx;

	struct spyre_hw_job *ring;
	dma_addr_t ring_dma;
	u32 entries;
	u32 tail;
	u32 db_tail;
	u32 deferred;
	struct spyre_hw_completion *compl;
	dma_addr_t compl_dma;

	spinlock_t fence_lock;		/* protects pending */
	struct list_head pending;

	atomic_t jobs_ran;
	wait_queue_head_t idle_wq;
	bool hw_active;
	bool sched_ready;
	struct list_head dev_link;
};

/**
 * struct spyre_job_desc - one ring descriptor of a job.
 * @cmd_va: command stream VA.
 * @cmd_size: command stream bytes.
 */
struct spyre_job_desc {
	u64 cmd_va;
	u32 cmd_size;
};

/**
 * struct spyre_job_bo - a BO a job uses.
 * @obj: the BO (reference held).
 * @vma: its mapping in the job's context (reference held).
 * @usage: how the job's fence goes into @obj's reservation object.
 */
struct spyre_job_bo {
	struct drm_gem_object *obj;
	struct spyre_vma *vma;
	enum dma_resv_usage usage;
};

/**
 * struct spyre_job - one scheduler job: one or more jobs of a SUBMIT on
 * one queue (see spyre_ioctl_submit()), one ring descriptor each.
 * @base: scheduler job (must stay first).
 * @queue: queue (reference held).
 * @hw_fence: hardware fence, allocated at submit, initialised in run_job;
 *	it signals when the last descriptor ends.
 * @fence_init: @hw_fence was initialised (else it is plain memory).
 * @ran: run_job was called (counted in queue->jobs_ran).
 * @bos: BOs the job keeps alive, with their mappings.
 * @bo_count: entries in @bos.
 * @seqno: sequence number of the last descriptor on the queue.
 * @progress: last descriptor seen ended by the timeout handler.
 * @ndesc: entries in @descs, the credits the job takes.
 * @descs: the descriptors, in order.
 */
struct spyre_job {
	struct drm_sched_job base;
	struct spyre_queue *queue;
	struct spyre_fence *hw_fence;
	bool fence_init;
	bool ran;
	struct spyre_job_bo *bos;
	u32 bo_count;
	u64 seqno;
	u64 progress;
	u32 ndesc;
	struct spyre_job_desc descs[] __counted_by(ndesc);
};

static inline struct spyre_device *to_spyre_device(struct drm_device *drm)
{
	return container_of(drm, struct spyre_device, drm);
}

static inline struct spyre_bo *to_spyre_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct spyre_bo, gem);
}

static inline u32 spyre_read32(struct spyre_device *sdev, u32 reg)
{
	return readl(sdev->regs + reg);
}

static inline void spyre_write32(struct spyre_device *sdev, u32 reg, u32 val)
{
	writel(val, sdev->regs + reg);
}

static inline u64 spyre_read64(struct spyre_device *sdev, u32 reg)
{
	return readq(sdev->regs + reg);
}

static inline void spyre_write64(struct spyre_device *sdev, u32 reg, u64 val)
{
	writeq(val, sdev->regs + reg);
}

/* spyre_mmu.c */
struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev);
void spyre_ctx_get(struct spyre_ctx *ctx);
void spyre_ctx_put(struct spyre_ctx *ctx);
void spyre_ctx_release_hw(struct spyre_ctx *ctx);
void spyre_ctx_set_error(struct spyre_ctx *ctx, int err);
void spyre_ctx_note_fault(struct spyre_ctx *ctx, u64 va);
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

/* spyre_gem.c */
struct drm_gem_object *spyre_gem_create_object(struct drm_device *drm,
					       size_t size);
struct drm_gem_object *
spyre_gem_prime_import_sg_table(struct drm_device *drm,
				struct dma_buf_attachment *attach,
				struct sg_table *sgt);
struct drm_gem_object *spyre_gem_prime_import(struct drm_device *drm,
					      struct dma_buf *dma_buf);
void spyre_bo_init_common(struct spyre_bo *bo, u32 placement);
int spyre_gem_open(struct drm_gem_object *obj, struct drm_file *file);
void spyre_gem_close(struct drm_gem_object *obj, struct drm_file *file);
void spyre_bo_charge(struct spyre_bo *bo, struct spyre_ctx *owner,
		     size_t size);
void spyre_bo_uncharge(struct spyre_bo *bo);
u64 spyre_max_bo_size(void);
int spyre_ioctl_bo_create(struct drm_device *drm, void *data,
			  struct drm_file *file);
int spyre_ioctl_bo_info(struct drm_device *drm, void *data,
			struct drm_file *file);
int spyre_ioctl_bo_wait(struct drm_device *drm, void *data,
			struct drm_file *file);

/* spyre_devmem.c */
int spyre_devmem_init(struct spyre_device *sdev);
struct spyre_bo *spyre_devmem_bo_create(struct spyre_device *sdev,
					struct spyre_ctx *owner, u64 size);
bool spyre_devmem_dmabuf_owner(struct dma_buf *dma_buf,
			       struct drm_gem_object **obj);

/* spyre_userptr.c */
int spyre_ioctl_bo_userptr(struct drm_device *drm, void *data,
			   struct drm_file *file);

/* spyre_job.c */
int spyre_ioctl_queue_create(struct drm_device *drm, void *data,
			     struct drm_file *file);
int spyre_ioctl_queue_destroy(struct drm_device *drm, void *data,
			      struct drm_file *file);
int spyre_ioctl_submit(struct drm_device *drm, void *data,
		       struct drm_file *file);
void spyre_queues_destroy_all(struct spyre_file *sfile);
void spyre_queue_irq(struct spyre_queue *q);
void spyre_queues_cancel_all(struct spyre_device *sdev, int err);
void spyre_queues_restore_hw(struct spyre_device *sdev);
void spyre_queues_free_dma(struct spyre_device *sdev);

/* spyre_debugfs.c */
void spyre_debugfs_init(struct spyre_device *sdev);

#endif /* SPYRE_DRV_H */
