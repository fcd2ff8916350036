/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: queues, one hardware queue and one drm_sched
 * entity each, and the schedulers of the hardware queues (spyre_queue.c).
 */
#ifndef SPYRE_QUEUE_H
#define SPYRE_QUEUE_H

#include <linux/atomic.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include <drm/gpu_scheduler.h>

#include "spyre_drv.h"

/* Ring entries per queue (power of two, SPYRE_RING_MIN/MAX_ENTRIES). */
#define SPYRE_RING_ENTRIES	256
/* Completion records a queue remembers for a devcoredump. */
#define SPYRE_COMPL_HISTORY	8

/**
 * struct spyre_queue - a user queue bound to one hardware queue.
 * @ref: references (file, submit in progress, each job).
 * @sdev: device.
 * @ctx: context the queue runs in (reference held).
 * @hwq: hardware queue index.
 * @vector: MSI-X vector of the queue: one whose affinity holds the CPU
 *	that created it (spyre_queue_vector()).
 * @priority: DRM_SPYRE_PRIORITY_*.
 * @sched: the scheduler of hardware queue @hwq (sdev->hwq_sched).
 * @sched_list: scheduler list for @entity.
 * @entity: the queue's entity, the only one on @sched while the queue
 *	holds @hwq.
 * @lock: serialises job arm/push and @dead.
 * @reset_lock: serialises timeout handling with teardown.
 * @dead: set on teardown, no more jobs reach the ring.
 * @next_seqno: seqno of the next job pushed (from 1).
 * @fence_ctx: dma_fence context.
 * @ring: ring of @entries job descriptors (coherent DMA).
 * @ring_dma: bus address of @ring.
 * @entries: ring entries.
 * @tail: next ring slot to write (run_job only).
 * @db_tail: @tail as last written to the doorbell.
 * @parked: a reset is under way (from spyre_queue_snapshot() to
 *	spyre_queue_replay()): run_job leaves the ring alone; under
 *	@fence_lock, as are @tail and @db_tail outside resets.
 * @compl: completion record (coherent DMA).
 * @compl_dma: bus address of @compl.
 * @written: seqno of the last descriptor written to the ring (a record
 *	beyond it is corrupt).
 * @signalled: seqno of the last descriptor whose end was processed (a
 *	record below it is corrupt); changed under @fence_lock.
 * @started: set by spyre_queue_snapshot() before a reset: the last seqno
 *	the card may have started; descriptors after @signalled up to it
 *	were interrupted (or ended in a record that was not trusted).
 * @busy_base: card time (ns) the queue was busy before the card last
 *	cleared its BUSY_NS register (queue or card reset); fdinfo adds the
 *	register.
 * @poll_seen: the record's seqno at the previous lost-interrupt poll.
 * @corrupt: the current record was found corrupt (counted once).
 * @history: the last records processed, for devcoredump; @history_next
 *	is the slot of the next one (both under @fence_lock).
 * @history_next: see @history.
 * @fence_lock: protects @pending.
 * @pending: hardware fences of jobs written to the ring, in seqno order.
 * @jobs_ran: jobs that went through run_job and are not freed yet.
 * @idle_wq: woken when @jobs_ran drops.
 * @hw_active: hardware queue programmed and listed in sdev->hwq.
 * @entity_ready: @entity is initialised.
 * @dev_link: entry in sdev->queues while @ring and @compl are allocated.
 */
struct spyre_queue {
	struct kref ref;
	struct spyre_device *sdev;
	struct spyre_ctx *ctx;
	u32 hwq;
	u32 vector;
	u32 priority;

	struct drm_gpu_scheduler *sched;
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
	bool parked;
	struct spyre_hw_completion *compl;
	dma_addr_t compl_dma;
	u64 written;
	u64 signalled;
	u64 started;
	atomic64_t busy_base;
	u64 poll_seen;
	bool corrupt;
	struct spyre_hw_completion history[SPYRE_COMPL_HISTORY];
	u32 history_next;

	spinlock_t fence_lock;		/* protects pending */
	struct list_head pending;

	atomic_t jobs_ran;
	wait_queue_head_t idle_wq;
	bool hw_active;
	bool entity_ready;
	struct list_head dev_link;
};

/**
 * struct spyre_hwq_sched - the scheduler of one hardware queue.
 * @base: the scheduler; it lives as long as the DRM device, since fences
 *	of its jobs name it (drm_sched_fence's timeline is @base.name) and
 *	may outlive the user queue that submitted them.
 * @name: @base's name, "spyre-q<hardware queue>".
 */
struct spyre_hwq_sched {
	struct drm_gpu_scheduler base;
	char name[24];
};

static inline u32 spyre_qreg(struct spyre_queue *q, u32 reg)
{
	return SPYRE_QUEUE_REG(q->hwq, reg);
}

int spyre_hwq_sched_init(struct spyre_device *sdev);
int spyre_ioctl_queue_create(struct drm_device *drm, void *data,
			     struct drm_file *file);
int spyre_ioctl_queue_destroy(struct drm_device *drm, void *data,
			      struct drm_file *file);
struct spyre_queue *spyre_queue_lookup(struct spyre_file *sfile, u32 id);
void spyre_queue_put(struct spyre_queue *q);
void spyre_queues_destroy_all(struct spyre_file *sfile);
int spyre_hwq_reset(struct spyre_queue *q);
void spyre_hwq_fold_busy(struct spyre_queue *q);
u64 spyre_queue_busy_ns(struct spyre_queue *q);
void spyre_queues_restore_hw(struct spyre_device *sdev);
void spyre_queues_free_dma(struct spyre_device *sdev);

#endif /* SPYRE_QUEUE_H */
