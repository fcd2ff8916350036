/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: jobs and hardware fences; the drm_sched backend
 * and the completion path (spyre_job.c).
 */
#ifndef SPYRE_JOB_H
#define SPYRE_JOB_H

#include <linux/dma-fence.h>
#include <linux/dma-resv.h>
#include <linux/spinlock.h>
#include <linux/types.h>

#include <drm/gpu_scheduler.h>

#include "spyre_queue.h"

struct drm_gem_object;
struct spyre_vma;

/* Jobs of one SUBMIT that share a scheduler job (and ring credits). */
#define SPYRE_GROUP_MAX			64
/* Reruns of a job that resets interrupted, after which it is cancelled. */
#define SPYRE_MAX_REPLAYS		3

/**
 * struct spyre_fence - hardware fence of one job.
 * @base: the fence.  Must stay first: the fence's last reference frees
 *	the whole struct through &base (dma_fence_free(), which
 *	kfree_rcu()s that pointer).
 * @lock: fence lock; per fence so the fence may outlive its queue.
 * @link: entry in the queue's pending list.
 * @first_seqno: seqno of the job's first descriptor (base.seqno is the
 *	last one's).
 * @job: the job; valid while the fence is on the pending list (the job
 *	is freed only after its fence signalled).
 */
struct spyre_fence {
	struct dma_fence base;
	spinlock_t lock;		/* fence lock */
	struct list_head link;
	u64 first_seqno;
	struct spyre_job *job;
};

/**
 * struct spyre_job_desc - one ring descriptor of a job.
 * @cmd_va: command stream VA.
 * @cmd_size: command stream bytes.
 * @restartable: DRM_SPYRE_JOB_RESTARTABLE: may run again after a reset
 *	interrupted it.
 */
struct spyre_job_desc {
	u64 cmd_va;
	u32 cmd_size;
	bool restartable;
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
 * @base: scheduler job (to_spyre_job() finds the job from it).
 * @queue: queue (reference held).
 * @hw_fence: hardware fence, allocated at submit, initialised in run_job;
 *	it signals when the last descriptor ends.
 * @fence_init: @hw_fence was initialised (else it is plain memory).
 * @ran: run_job was called (counted in queue->jobs_ran).
 * @replays: times a reset interrupted the job and it was rerun.
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
	u32 replays;
	struct spyre_job_bo *bos;
	u32 bo_count;
	u64 seqno;
	u64 progress;
	u32 ndesc;
	struct spyre_job_desc descs[] __counted_by(ndesc);
};

static inline struct spyre_job *to_spyre_job(struct drm_sched_job *job)
{
	return container_of(job, struct spyre_job, base);
}

extern const struct drm_sched_backend_ops spyre_sched_ops;

void spyre_job_release(struct spyre_job *job);
unsigned int spyre_queue_signal(struct spyre_queue *q, u64 done, int err,
				const u64 *fault_va);
void spyre_queue_cancel(struct spyre_queue *q, struct spyre_fence *guilty,
			int guilty_err, int err);
unsigned int spyre_queue_irq(struct spyre_queue *q);
void spyre_queue_snapshot(struct spyre_queue *q, bool mmio);
void spyre_queue_replay(struct spyre_queue *q);
void spyre_queues_cancel_all(struct spyre_device *sdev, int err);

#endif /* SPYRE_JOB_H */
