/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: shared definitions.
 *
 * The device (struct spyre_device), what every file needs (register
 * accessors, the open file), and the driver's lock order.  The other
 * objects have a header each:
 *  - spyre_mmu.h: struct spyre_ctx, a device context (address space)
 *    owned by one open file, refcounted because BOs and queues may
 *    outlive the file; struct spyre_vma, a BO mapped into one context's
 *    VM (every GEM handle of a file, and every job that lists the BO,
 *    holds a reference on it); the page tables;
 *  - spyre_gem.h: struct spyre_bo, a buffer object: shmem (system
 *    memory), a range of device memory (drm_buddy over BAR2), pinned user
 *    pages (userptr) or an imported dma-buf;
 *  - spyre_queue.h: struct spyre_queue, one hardware queue with its own
 *    drm_sched instance, refcounted because jobs may outlive
 *    QUEUE_DESTROY;
 *  - spyre_job.h: struct spyre_job, one scheduler job (one or more jobs of
 *    a SUBMIT on one queue), and its hardware fence;
 *  - spyre_submit.h: SUBMIT.
 *
 * Lock order (outer first):
 *   bo->vma_lock, ctx->lock,
 *   sfile->lock (inside the BOs' reservation locks: all-or-nothing SUBMIT),
 *   q->lock (arm and push vs. teardown),
 *   q->reset_lock (timeout handling vs. teardown),
 *   sdev->reset_sem (read: paths that program the card, through
 *     spyre_hw_read_lock(), which also waits while the card is blocked;
 *     write: resets, and the start and end of a block; nothing allocates
 *     under it, since resets are fence signalling sections),
 *   sdev->dma_sem (read: freeing coherent memory; write: remove()),
 *   sdev->queues_lock, sdev->mmu_lock, sdev->devmem.lock,
 *   sdev->hwq_lock (spinlock, also taken by the completion IRQ),
 *   q->fence_lock (spinlock, inside hwq_lock in the IRQ path).
 * drm_dev_enter() sections nest inside reset_sem where both are held, and
 * may also be entered first (an ioctl), since SRCU readers never wait for
 * one another.
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
#include <linux/lockdep.h>
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
#include "spyre_telemetry.h"

#define SPYRE_DRIVER_NAME	"spyre"
#define SPYRE_DRIVER_DESC	"Spyre AI accelerator (emulated)"
#define SPYRE_DRIVER_MAJOR	0
#define SPYRE_DRIVER_MINOR	3

extern unsigned int spyre_job_timeout_ms;
extern unsigned long spyre_max_bo_mb;
extern unsigned int spyre_max_queues_per_file;
extern unsigned long spyre_max_devmem_per_file_mb;

struct spyre_queue;
struct spyre_hwq_sched;

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
 * struct spyre_health - what the card and the driver went through
 *	(DRM_SPYRE_QUERY_HEALTH, sysfs); see struct drm_spyre_health_info.
 * @resets: card resets (function resets and recoveries).
 * @recoveries: resets the driver made itself.
 * @fatal_errors: fatal errors the card reported.
 * @hangs: jobs past the job timeout.
 * @lost_irqs: completions found by the poll.
 * @spurious_irqs: completion interrupts with nothing new.
 * @corrupt_completions: completion records rejected.
 * @jobs_replayed: jobs run again after a reset.
 * @jobs_lost: interrupted jobs ended with -ECANCELED by a reset.
 * @aer_errors: PCIe errors the PCI core reported (error_detected()).
 */
struct spyre_health {
	atomic64_t resets;
	atomic64_t recoveries;
	atomic64_t fatal_errors;
	atomic64_t hangs;
	atomic64_t lost_irqs;
	atomic64_t spurious_irqs;
	atomic64_t corrupt_completions;
	atomic64_t jobs_replayed;
	atomic64_t jobs_lost;
	atomic64_t aer_errors;
};

/**
 * struct spyre_live - driver objects alive now, of every card together
 *	(debugfs "live"), so that tests can tell what a run left behind.
 *	Module-wide: BOs, contexts and fences may outlive their card.
 * @bos: BOs (every placement, imported ones included).
 * @contexts: contexts (one per open file, kept by its BOs and queues).
 * @queues: queues (kept by their jobs after QUEUE_DESTROY).
 * @jobs: scheduler jobs not yet freed.
 * @fences: hardware fences not yet released.
 * @pinned_pages: user pages pinned by userptr BOs.
 */
struct spyre_live {
	atomic_t bos;
	atomic_t contexts;
	atomic_t queues;
	atomic_t jobs;
	atomic_t fences;
	atomic64_t pinned_pages;
};

/* Counted only where debugfs can show them (defined in spyre_debugfs.c). */
extern struct spyre_live spyre_live;
#define spyre_live_inc(what) do {					\
	if (IS_ENABLED(CONFIG_DEBUG_FS))				\
		atomic_inc(&spyre_live.what);				\
} while (0)
#define spyre_live_dec(what) do {					\
	if (IS_ENABLED(CONFIG_DEBUG_FS))				\
		atomic_dec(&spyre_live.what);				\
} while (0)
#define spyre_live_add(what, n) do {					\
	if (IS_ENABLED(CONFIG_DEBUG_FS))				\
		atomic64_add(n, &spyre_live.what);			\
} while (0)
#define spyre_live_sub(what, n) do {					\
	if (IS_ENABLED(CONFIG_DEBUG_FS))				\
		atomic64_sub(n, &spyre_live.what);			\
} while (0)

/*
 * Why the card is reset: the driver's own recoveries (spyre_recover())
 * first, then the resets the PCI and PM cores ask for.  The uevent that
 * announces a reset names it (SPYRE_REASON=).
 */
enum spyre_recovery_reason {
	SPYRE_RECOVER_FATAL = 1,	/* STATUS.FATAL */
	SPYRE_RECOVER_HANG,		/* a queue would not stop */
	SPYRE_RECOVER_CORRUPT,		/* untrusted completion record */
	SPYRE_RESET_FUNCTION,		/* PCI function reset */
	SPYRE_RESET_AER,		/* PCIe error recovery */
	SPYRE_RESET_RESUME,		/* system resume */
	SPYRE_RESET_REASONS
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
 * @drm: DRM device, embedded: devm_drm_dev_alloc() allocates the whole
 *	struct and to_spyre_device() finds it with container_of().
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
 * @hwq_sched: scheduler per hardware queue id (spyre_hwq_sched_init()).
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
 * @reset_sem: held for writing while the card is reset or its state
 *	saved or restored; paths that program the card, and the clear of new
 *	device memory through BAR2, hold it for reading
 *	(spyre_hw_read_lock()).  It is never held from one PCI or PM callback
 *	to another (they may run in other tasks): @hw_blocked spans those.
 *	Nothing allocates while holding it.
 * @hw_blocked: reasons the card is out of service across callbacks (PCI
 *	function reset, PCIe error recovery, system sleep); changed with
 *	@reset_sem held for writing.  The ioctl paths wait on @hw_wq in
 *	spyre_hw_read_lock() while it is not 0; no fence path waits for it
 *	(run_job finds its queue parked, the timeout handler, the poll and
 *	the recovery work leave the card alone).
 * @hw_wq: woken when @hw_blocked drops to 0.
 * @hw_block_map: lockdep's view of a block: the callbacks that end one
 *	hold it while they run, every spyre_hw_read_lock() acquires and
 *	releases it first, so a lock held around that wait and taken by those
 *	callbacks is reported as the deadlock it would be.
 * @dma_sem: held for reading while coherent DMA memory (page tables,
 *	rings) is freed, for writing by remove() when it frees what is left:
 *	after remove() the DMA API may no longer be used on the device (its
 *	IOMMU state is gone).
 * @dma_gone: remove() freed the coherent memory; protected by @dma_sem.
 * @submit_wq: workqueue of every queue's scheduler (run_job, free_job).
 * @reset_wq: workqueue of the fence paths that are not the scheduler's:
 *	the job timeouts (drm_sched's timeout_wq), @recovery_work and
 *	@poll_work; WQ_MEM_RECLAIM, as fences signal through it.
 * @queues_lock: protects @queues.
 * @queues: queues holding coherent memory (struct spyre_queue.dev_link).
 * @health: counters of faults, resets and interrupts.
 * @tel: the card's telemetry counters since probe, and jobs in flight.
 * @recovery_work: resets the card through its RESET register
 *	(spyre_reset.c); queued by spyre_recover().
 * @recovery_reason: bitmask of BIT(enum spyre_recovery_reason) not yet
 *	served by @recovery_work.
 * @poll_work: finds completions whose interrupt was lost, every
 *	SPYRE_POLL_MS while jobs are pending.
 * @aer_held: AER recovery holds one @hw_blocked reason, from
 *	error_detected() to resume() (or to giving up); only the PCI core's
 *	recovery thread touches it.
 * @dump_buf: the next devcoredump's buffer (SPYRE_DUMP_SIZE), allocated
 *	ahead: the timeout handler and the recovery fill it without
 *	allocating; NULL while none is ready.
 * @dump_len: bytes of @dump_buf filled.
 * @dump_busy: bit 0: @dump_buf is taken (being filled, or allocated);
 *	bit 1: it holds a dump not yet handed over.
 * @report_work: outside the fence paths, hands a filled @dump_buf to
 *	dev_coredumpv(), allocates the next one and sends the reset uevents
 *	(both allocate).
 * @uevent_pending: BIT(enum spyre_recovery_reason) of resets not yet
 *	announced.
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
	struct spyre_hwq_sched *hwq_sched;

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
	unsigned int hw_blocked;
	wait_queue_head_t hw_wq;
	struct lockdep_map hw_block_map;

	struct rw_semaphore dma_sem;
	bool dma_gone;
	struct workqueue_struct *submit_wq;
	struct workqueue_struct *reset_wq;
	struct mutex queues_lock;	/* protects queues */
	struct list_head queues;

	struct spyre_health health;
	struct spyre_tel tel;
	struct work_struct recovery_work;
	unsigned long recovery_reason;
	struct delayed_work poll_work;
	bool aer_held;
	void *dump_buf;
	size_t dump_len;
	unsigned long dump_busy;
	struct work_struct report_work;
	unsigned long uevent_pending;
};

/**
 * struct spyre_file - per open file state.
 * @sdev: device.
 * @ctx: the file's context.
 * @queues: queue id -> struct spyre_queue.
 * @nqueues: entries in @queues, and creations in progress (the cap).
 * @lock: held by QUEUE_DESTROY while it takes a queue out of @queues, and
 *	by an all-or-nothing SUBMIT while it queues: a queue still in
 *	@queues then stays alive until the SUBMIT is done.
 */
struct spyre_file {
	struct spyre_device *sdev;
	struct spyre_ctx *ctx;
	struct xarray queues;
	atomic_t nqueues;
	struct mutex lock;		/* queue removal vs. SUBMIT */
};

static inline struct spyre_device *to_spyre_device(struct drm_device *drm)
{
	return container_of(drm, struct spyre_device, drm);
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

/* spyre_debugfs.c */
void spyre_debugfs_init(struct spyre_device *sdev);

/* spyre_drv.c */
int spyre_hw_reset(struct spyre_device *sdev);
u64 spyre_uapi_caps(u64 hw);
void spyre_hw_enable(struct spyre_device *sdev);
void spyre_hw_disable(struct spyre_device *sdev);

/* ---- Holding the card against resets ------------------------------------ */

/**
 * spyre_hw_read_lock() - hold @sdev->reset_sem for reading, once the card
 * is not blocked (PCI function reset, PCIe error recovery, system sleep).
 * @sdev: device.
 *
 * Sleeps (uninterruptibly) until then; release with up_read().  For the
 * ioctl paths: no fence path may wait for a block.
 */
static inline void spyre_hw_read_lock(struct spyre_device *sdev)
{
	lock_map_acquire(&sdev->hw_block_map);
	lock_map_release(&sdev->hw_block_map);
	for (;;) {
		down_read(&sdev->reset_sem);
		if (!READ_ONCE(sdev->hw_blocked))
			return;
		up_read(&sdev->reset_sem);
		wait_event(sdev->hw_wq, !READ_ONCE(sdev->hw_blocked));
	}
}

/**
 * spyre_hw_read_lock_killable() - spyre_hw_read_lock(), or give up on a
 * fatal signal.
 * @sdev: device.
 *
 * Return: 0 (held: release with up_read()) or -EINTR.
 */
static inline int spyre_hw_read_lock_killable(struct spyre_device *sdev)
{
	lock_map_acquire(&sdev->hw_block_map);
	lock_map_release(&sdev->hw_block_map);
	for (;;) {
		if (down_read_killable(&sdev->reset_sem))
			return -EINTR;
		if (!READ_ONCE(sdev->hw_blocked))
			return 0;
		up_read(&sdev->reset_sem);
		if (wait_event_killable(sdev->hw_wq,
					!READ_ONCE(sdev->hw_blocked)))
			return -EINTR;
	}
}

/**
 * spyre_hw_read_trylock() - spyre_hw_read_lock() without waiting.
 * @sdev: device.
 *
 * Return: true (held: release with up_read()), or false while a reset
 * runs or the card is blocked.
 */
static inline bool spyre_hw_read_trylock(struct spyre_device *sdev)
{
	if (!down_read_trylock(&sdev->reset_sem))
		return false;
	if (!READ_ONCE(sdev->hw_blocked))
		return true;
	up_read(&sdev->reset_sem);
	return false;
}

#endif /* SPYRE_DRV_H */
