// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: queues, jobs, fences and completions.
 *
 * Each user queue owns one hardware queue (ring + completion record in
 * kernel-owned coherent memory) and one drm_gpu_scheduler with a single
 * entity.  run_job() writes struct spyre_hw_job descriptors into the ring
 * and rings the doorbell; the queue's MSI-X vector fires when the card has
 * written the completion record, and the IRQ handler signals every
 * hardware fence up to the recorded seqno.
 *
 * The dispatch path is built to cost little per job:
 *  - consecutive jobs of one SUBMIT on one queue become one scheduler job
 *    with one descriptor per job (spyre_group_len()): one pass through the
 *    scheduler, one fence, one interrupt.  Only the first of them may wait
 *    for syncobjs and only the last may signal some, so every fence a user
 *    sees signals when its own job ends; the jobs' BOs share the group's
 *    fence (BO_WAIT may thus also wait for later jobs of the same SUBMIT);
 *  - the ring's slots are the scheduler's credits, a job takes one per
 *    descriptor;
 *  - run_job() leaves the doorbell to the next job when the scheduler will
 *    run that one straight away (up to SPYRE_DOORBELL_BATCH descriptors),
 *    as the driver's own counts tell (spyre_next_job_ready());
 *  - the schedulers run on a per-CPU, high-priority workqueue, so run_job()
 *    follows a SUBMIT on the submitting CPU without a cross-CPU wake-up.
 *
 * Errors are sticky per context: a failed or hung job marks its context,
 * the context's queued jobs are cancelled (-ECANCELED) and later submits
 * fail with -ECANCELED.
 *
 * A job keeps the BOs it lists alive, and their mappings in its context,
 * until it is freed; its fence goes into their reservation objects as a
 * writer (DMA_RESV_USAGE_WRITE) for BOs listed with DRM_SPYRE_BO_REF_WRITE,
 * else as a reader (DMA_RESV_USAGE_READ), which BO_WAIT and implicit-sync
 * importers wait on.  Submission does not wait for the fences already
 * there: ordering between jobs is explicit (syncobjs).  In-syncs flagged
 * DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT are waited for before anything of the
 * SUBMIT is queued, outside drm_dev_enter() and with no lock held.
 *
 * The paths that program the card (run_job, queue setup and teardown,
 * timeout handling) hold sdev->reset_sem for reading, so a PCI function
 * reset (spyre_queues_restore_hw()) never races with them.
 */

#include <linux/dma-fence-chain.h>
#include <linux/dma-mapping.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_exec.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>
#include <drm/spyre_accel.h>

#include <drm/spyre_cmd.h>
#include "spyre_drv.h"

#define SPYRE_Q_RESET_TIMEOUT_US	USEC_PER_SEC
#define SPYRE_DRAIN_TIMEOUT_MS		100
#define SPYRE_IDLE_TIMEOUT_MS		10000
/* The smallest stride that can name a command stream (8-byte multiples). */
#define SPYRE_JOB_STRIDE_MIN	ALIGN(offsetofend(struct drm_spyre_job, \
					      cmd_size), 8)
#define SPYRE_JOB_STRIDE_MAX		PAGE_SIZE
/* Jobs of one SUBMIT that share a scheduler job (and ring credits). */
#define SPYRE_GROUP_MAX			64
/* Descriptors written before the doorbell is rung, at most. */
#define SPYRE_DOORBELL_BATCH		32
/* BO references copied from userspace at once. */
#define SPYRE_BO_REF_CHUNK		32
/* Jobs of a SUBMIT copied to the stack rather than to an allocation. */
#define SPYRE_SUBMIT_STACK_JOBS		4
/* Out-syncs of a job looked up into the stack (libspyre uses two). */
#define SPYRE_OUT_SYNCS_STACK		4

static inline struct spyre_job *to_spyre_job(struct drm_sched_job *job)
{
	return container_of(job, struct spyre_job, base);
}

static inline u32 spyre_qreg(struct spyre_queue *q, u32 reg)
{
	return SPYRE_QUEUE_REG(q->hwq, reg);
}

/* ---- Hardware fences ------------------------------------------------- */

static const char *spyre_fence_get_driver_name(struct dma_fence *fence)
{
	return SPYRE_DRIVER_NAME;
}

static const char *spyre_fence_get_timeline_name(struct dma_fence *fence)
{
	return "spyre-hw-queue";
}

static const struct dma_fence_ops spyre_fence_ops = {
	.get_driver_name = spyre_fence_get_driver_name,
	.get_timeline_name = spyre_fence_get_timeline_name,
};

/* Signal one pending fence of @q; caller holds q->fence_lock. */
static void spyre_fence_complete(struct spyre_queue *q, struct spyre_fence *f,
				 int err)
{
	lockdep_assert_held(&q->fence_lock);
	list_del_init(&f->link);
	/* Before the signal, which lets the scheduler drop its credits. */
	atomic_sub(f->base.seqno - f->first_seqno + 1, &q->inflight);
	if (err)
		dma_fence_set_error(&f->base, err);
	dma_fence_signal(&f->base);
	dma_fence_put(&f->base);	/* the pending list's reference */
}

static int spyre_status_to_errno(u32 status)
{
	switch (status) {
	case SPYRE_STATUS_OK:
		return 0;
	case SPYRE_STATUS_MMU_FAULT:
		return -EFAULT;
	case SPYRE_STATUS_ABORTED:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

/*
 * Signal the fences of the jobs whose descriptors all ended by seqno
 * @done; the job of @done ends with @err (or -ECANCELED when @done is not
 * its last descriptor: the rest never ran).  With an error, later fences
 * are cancelled: the card halted the queue, they will not run.
 *
 * @fault_va is not NULL when the descriptor of @done took an MMU fault:
 * the fault is recorded in the context, and the context's error set,
 * before any fence signals, so that a waiter woken by -EFAULT finds them
 * in QUERY_CONTEXT.  Returns true if the fence of the job of @done was
 * still pending (a record is processed once: the IRQ handlers, the
 * timeout handler and a reset may all look at the same one).
 */
static bool spyre_queue_signal(struct spyre_queue *q, u64 done, int err,
			       const u64 *fault_va)
{
	struct spyre_fence *f, *tmp;
	unsigned long flags;
	bool found = false;

	spin_lock_irqsave(&q->fence_lock, flags);
	if (err) {
		if (fault_va) {
			list_for_each_entry(f, &q->pending, link) {
				if (f->base.seqno < done)
					continue;
				if (f->first_seqno <= done)
					spyre_ctx_note_fault(q->ctx, *fault_va);
				break;
			}
		}
		/*
		 * Before the cancellation, under the lock run_job checks it
		 * with: a job either sees the error or is cancelled below.
		 */
		spyre_ctx_set_error(q->ctx, err);
	}

	list_for_each_entry_safe(f, tmp, &q->pending, link) {
		if (f->base.seqno < done) {
			spyre_fence_complete(q, f, 0);
		} else if (f->first_seqno <= done) {
			/* The job of @done; not over yet if it is not its last. */
			if (!err && f->base.seqno > done)
				break;
			/* Its later descriptors were not run: as a lone job. */
			spyre_fence_complete(q, f, f->base.seqno == done ? err :
						-ECANCELED);
			found = true;
		} else if (err) {
			spyre_fence_complete(q, f, -ECANCELED);
		} else {
			break;
		}
	}
	spin_unlock_irqrestore(&q->fence_lock, flags);
	return found;
}

/* Signal every pending fence: @guilty with @guilty_err, others with @err. */
static void spyre_queue_cancel(struct spyre_queue *q,
			       struct spyre_fence *guilty, int guilty_err,
			       int err)
{
	struct spyre_fence *f, *tmp;
	unsigned long flags;

	spin_lock_irqsave(&q->fence_lock, flags);
	list_for_each_entry_safe(f, tmp, &q->pending, link)
		spyre_fence_complete(q, f, f == guilty ? guilty_err : err);
	spin_unlock_irqrestore(&q->fence_lock, flags);
}

/**
 * spyre_queue_irq() - process a queue's completion record.
 * @q: queue.
 *
 * Called from the queue's MSI-X handler (with sdev->hwq_lock held) or with
 * the device entered; BAR0 must be mapped.
 *
 * The card writes every field of the record and then the seqno, so a
 * failed status read next to an older seqno may belong to a newer job
 * whose seqno is not written yet.  A failure is only trusted once the card
 * reports the queue halted (or the job was aborted by a reset); until then
 * only the jobs before the recorded one are signalled, and the next
 * interrupt settles it.
 */
void spyre_queue_irq(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	u32 status;
	u64 done, va;
	int err;

	done = READ_ONCE(q->compl->seqno);
	rmb(); /* the seqno is written last */
	status = READ_ONCE(q->compl->status);

	if (status == SPYRE_STATUS_OK) {
		spyre_queue_signal(q, done, 0, NULL);
		return;
	}

	if (status != SPYRE_STATUS_ABORTED &&
	    spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_STATUS)) != SPYRE_QS_ERROR) {
		if (done)
			spyre_queue_signal(q, done - 1, 0, NULL);
		return;
	}

	/* The queue is halted: the record is final; re-read it in order. */
	rmb(); /* after the status register read */
	done = READ_ONCE(q->compl->seqno);
	rmb(); /* the seqno is written last */
	status = READ_ONCE(q->compl->status);
	err = spyre_status_to_errno(status);
	va = READ_ONCE(q->compl->error_va);
	if (spyre_queue_signal(q, done, err,
			       status == SPYRE_STATUS_MMU_FAULT ? &va : NULL) &&
	    err && err != -ECANCELED) {
		dev_warn_ratelimited(sdev->drm.dev,
				     "queue %u (ctx %u): job %llu failed, status %u at offset %u, va %#llx\n",
				     q->hwq, q->ctx->id, done, status,
				     READ_ONCE(q->compl->cmd_offset), va);
	}
}

/**
 * spyre_queues_cancel_all() - signal every pending fence of every queue.
 * @sdev: device, already unplugged and quiesced.
 * @err: error for the fences.
 */
void spyre_queues_cancel_all(struct spyre_device *sdev, int err)
{
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&sdev->hwq_lock, flags);
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_queue *q = sdev->hwq[i];

		if (q) {
			spyre_queue_cancel(q, NULL, 0, err);
			spyre_ctx_set_error(q->ctx, err);
		}
	}
	spin_unlock_irqrestore(&sdev->hwq_lock, flags);
}

/* ---- Hardware queue programming (device entered) --------------------- */

static int spyre_hwq_reset(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	u32 st;
	int ret;

	spyre_write32(sdev, spyre_qreg(q, SPYRE_Q_RESET), 1);
	ret = readl_poll_timeout(sdev->regs + spyre_qreg(q, SPYRE_Q_STATUS), st,
				 st != SPYRE_QS_BUSY && st != SPYRE_QS_SEM_WAIT,
				 10, SPYRE_Q_RESET_TIMEOUT_US);
	if (ret)
		drm_err(&sdev->drm, "queue %u: reset timed out (status %u)\n",
			q->hwq, st);
	return ret;
}

static int spyre_hwq_program(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	int ret;

	ret = spyre_hwq_reset(q);
	if (ret)
		return ret;

	spyre_write64(sdev, spyre_qreg(q, SPYRE_Q_RING_BASE), q->ring_dma);
	spyre_write32(sdev, spyre_qreg(q, SPYRE_Q_RING_ENTRIES), q->entries);
	spyre_write64(sdev, spyre_qreg(q, SPYRE_Q_COMPL_ADDR), q->compl_dma);
	spyre_write32(sdev, spyre_qreg(q, SPYRE_Q_CONTROL),
		      SPYRE_Q_CONTROL_ENABLE |
		      SPYRE_Q_CONTROL_PRIO(q->priority) |
		      SPYRE_Q_CONTROL_VECTOR(q->vector));
	q->tail = spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_HEAD)) &
		  (q->entries - 1);
	q->db_tail = q->tail;
	q->deferred = 0;
	return 0;
}

static void spyre_hwq_disable(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;

	spyre_hwq_reset(q);
	spyre_write32(sdev, spyre_qreg(q, SPYRE_Q_CONTROL), 0);
	spyre_write64(sdev, spyre_qreg(q, SPYRE_Q_RING_BASE), 0);
	spyre_write64(sdev, spyre_qreg(q, SPYRE_Q_COMPL_ADDR), 0);
}

/**
 * spyre_queues_restore_hw() - bring every queue back after a PCI reset.
 * @sdev: device; the caller holds @sdev->reset_sem for writing and is
 *	inside drm_dev_enter().
 *
 * The reset dropped the jobs still on the card: their fences end with
 * -ECANCELED and their context's error is set (the work it depends on is
 * lost).  Contexts with nothing on the card carry
 * on.  Each queue is programmed again with an empty ring; jobs still in
 * the scheduler run once the reset is over.
 */
void spyre_queues_restore_hw(struct spyre_device *sdev)
{
	unsigned int i;

	lockdep_assert_held_write(&sdev->reset_sem);

	/* hwq[] changes only under reset_sem: it is stable here. */
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_queue *q = sdev->hwq[i];
		unsigned long flags;
		u32 status;
		bool lost;
		u64 done;

		if (!q)
			continue;

		/*
		 * Jobs the card finished before the reset keep their result;
		 * a failure record may be torn by the reset, so only the jobs
		 * before it count as done.
		 */
		done = READ_ONCE(q->compl->seqno);
		rmb(); /* the seqno is written last */
		status = READ_ONCE(q->compl->status);
		if (status != SPYRE_STATUS_OK && done)
			done--;
		spyre_queue_signal(q, done, 0, NULL);

		spin_lock_irqsave(&q->fence_lock, flags);
		lost = !list_empty(&q->pending);
		spin_unlock_irqrestore(&q->fence_lock, flags);
		if (lost) {
			/* Before the cancellation: run_job checks it. */
			spyre_ctx_set_error(q->ctx, -ECANCELED);
			spyre_queue_cancel(q, NULL, 0, -ECANCELED);
		}

		if (spyre_hwq_program(q))
			spyre_ctx_set_error(q->ctx, -EIO);
	}
}

/* ---- Scheduler backend ------------------------------------------------ */

/*
 * Hand the descriptors written since the last doorbell to the card.
 * Returns true if the doorbell was written.  Caller: inside
 * drm_dev_enter(), with reset_sem held for reading, from run_job or with
 * the scheduler stopped.
 */
static bool spyre_ring_doorbell(struct spyre_queue *q)
{
	if (q->db_tail == q->tail)
		return false;
	dma_wmb(); /* descriptors before doorbell */
	spyre_write32(q->sdev, spyre_qreg(q, SPYRE_Q_DOORBELL), q->tail);
	q->db_tail = q->tail;
	q->deferred = 0;
	return true;
}

/*
 * Will the scheduler run another job of this queue right after the one in
 * run_job?  Then that job's run_job() rings the doorbell for both.  Told
 * from the driver's own counts, never from the scheduler's state: a job
 * was pushed after this one (@queued), every job pushed and not yet run
 * had its in-fences signalled when it was pushed (@queued_waiting; a
 * signalled fence stays so), and the ring has room for the largest group
 * besides what is in flight (@inflight, never below the scheduler's own
 * credit count).  Then the scheduler's next pass runs it at once: it
 * re-queues its run work after each job and is only stopped by this
 * driver, in the timeout handler (which rings the doorbell itself) and in
 * queue teardown (which takes the queue off the card).  So no descriptor
 * waits for a doorbell longer than one pass of the scheduler.
 */
static bool spyre_next_job_ready(struct spyre_queue *q)
{
	return atomic_read(&q->queued) > 0 &&
	       !atomic_read(&q->queued_waiting) &&
	       atomic_read(&q->inflight) + SPYRE_GROUP_MAX <= q->entries - 1;
}

static struct dma_fence *spyre_job_run(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_queue *q = job->queue;
	struct spyre_device *sdev = q->sdev;
	struct spyre_fence *f = job->hw_fence;
	u64 first = job->seqno - job->ndesc + 1;
	struct dma_fence *fence;
	unsigned long flags;
	u32 i;
	int idx;

	/*
	 * Already on the ring: the timeout handler, finding the job was not
	 * hung, has the scheduler ask for its fence again (see there).
	 */
	if (job->fence_init)
		return dma_fence_get(&f->base);

	if (!job->ran) {
		job->ran = true;
		atomic_inc(&q->jobs_ran);
		if (!job->deps_ready)
			atomic_dec(&q->queued_waiting);
		/* Teardown waits for the jobs in the entity to get here. */
		if (atomic_dec_and_test(&q->queued) && READ_ONCE(q->dead))
			wake_up_all(&q->idle_wq);
	}

	/*
	 * A dead queue was taken off the card with the descriptors it held.
	 * A context in error runs no more jobs, but the descriptors of
	 * earlier jobs still waiting for their doorbell get it below.
	 */
	if (READ_ONCE(q->dead) ||
	    (atomic_read(&q->ctx->error) && q->db_tail == q->tail))
		return ERR_PTR(-ECANCELED);

	/* A PCI reset in progress reprograms the ring: wait for it. */
	down_read(&sdev->reset_sem);
	if (!drm_dev_enter(&sdev->drm, &idx)) {
		up_read(&sdev->reset_sem);
		return ERR_PTR(-ENODEV);
	}

	if (atomic_read(&q->ctx->error)) {
		fence = ERR_PTR(-ECANCELED);
		goto flush;
	}

	/*
	 * Written in free slots (the scheduler's credits are ring slots);
	 * only the doorbell hands them to the card.  Only the last one,
	 * whose end signals the job's fence, raises an interrupt.
	 */
	for (i = 0; i < job->ndesc; i++) {
		struct spyre_hw_job *desc;

		desc = &q->ring[(q->tail + i) & (q->entries - 1)];
		desc->seqno = first + i;
		desc->cmd_va = job->descs[i].cmd_va;
		desc->cmd_size = job->descs[i].cmd_size;
		desc->ctx = q->ctx->id;
		desc->flags = i == job->ndesc - 1 ? SPYRE_JOB_F_IRQ : 0;
		memset(desc->reserved, 0, sizeof(desc->reserved));
	}

	/*
	 * A completion error cancels the pending fences after setting the
	 * context error: checked under the same lock, a job either sees the
	 * error or is on the list the error handler cancels.
	 */
	spin_lock_irqsave(&q->fence_lock, flags);
	if (atomic_read(&q->ctx->error)) {
		spin_unlock_irqrestore(&q->fence_lock, flags);
		fence = ERR_PTR(-ECANCELED);
		goto flush;
	}
	spin_lock_init(&f->lock);
	INIT_LIST_HEAD(&f->link);
	f->first_seqno = first;
	dma_fence_init(&f->base, &spyre_fence_ops, &f->lock, q->fence_ctx,
		       job->seqno);
	job->fence_init = true;
	job->progress = first - 1;
	dma_fence_get(&f->base);	/* for the pending list */
	list_add_tail(&f->link, &q->pending);
	atomic_add(job->ndesc, &q->inflight);
	spin_unlock_irqrestore(&q->fence_lock, flags);

	q->tail = (q->tail + job->ndesc) & (q->entries - 1);
	fence = dma_fence_get(&f->base);	/* for the scheduler */

	/*
	 * One doorbell for a run of jobs the scheduler hands over back to
	 * back (jobs queued while the card was busy, or by several SUBMITs in
	 * a row): each MMIO write stalls the CPU and wakes the card.  The run
	 * is capped so that the card starts on long ones early.
	 */
	q->deferred += job->ndesc;
	if (q->deferred < SPYRE_DOORBELL_BATCH && spyre_next_job_ready(q))
		goto out;
flush:
	/* Descriptors of earlier jobs may still wait for their doorbell. */
	spyre_ring_doorbell(q);
out:
	drm_dev_exit(idx);
	up_read(&sdev->reset_sem);
	return fence;
}

static enum drm_gpu_sched_stat
spyre_job_timedout(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_queue *q = job->queue;
	struct spyre_device *sdev = q->sdev;
	bool hw = false, kicked = false;
	int idx;

	mutex_lock(&q->reset_lock);
	drm_sched_wqueue_stop(&q->sched);
	/* After the stop: run_job may wait for a reset to finish. */
	down_read(&sdev->reset_sem);

	if (drm_dev_enter(&sdev->drm, &idx)) {
		hw = true;
		/* A late or lost interrupt is not a hang. */
		if (q->hw_active)
			spyre_queue_irq(q);
		/* Nor a job whose doorbell run_job left to its successor. */
		if (q->hw_active && !q->dead && spyre_ring_doorbell(q))
			kicked = true;
		/*
		 * Nor a job of several descriptors that has ended some since
		 * the last look: each gets its own run time.
		 */
		if (job->fence_init) {
			u64 done = READ_ONCE(q->compl->seqno);

			if (done > job->progress && done < job->seqno) {
				job->progress = done;
				kicked = true;
			}
		}
	}

	if (!job->fence_init || kicked ||
	    dma_fence_is_signaled(&job->hw_fence->base)) {
		if (hw)
			drm_dev_exit(idx);
		up_read(&sdev->reset_sem);
		/*
		 * Not hung.  The scheduler took the job off its pending list
		 * before calling here.  drm_sched_stop() puts it back (or, if
		 * its fence has signalled meanwhile, has it freed once this
		 * returns) and cuts every pending job from its hardware fence;
		 * drm_sched_resubmit_jobs() hands each its fence again
		 * (run_job of a job already on the ring only returns it: the
		 * card runs nothing twice), and drm_sched_start() re-arms
		 * the timeout.  Without the resubmit, start would end every
		 * job still on the card with -ECANCELED.  No job is leaked or
		 * freed twice, and the next timeout comes one period later.
		 */
		drm_sched_stop(&q->sched, sched_job);
		drm_sched_resubmit_jobs(&q->sched);
		drm_sched_start(&q->sched);
		mutex_unlock(&q->reset_lock);
		return DRM_GPU_SCHED_STAT_NOMINAL;
	}

	dev_warn_ratelimited(sdev->drm.dev,
			     "queue %u (ctx %u): job %llu timed out, resetting queue; context marked guilty\n",
			     q->hwq, q->ctx->id, job->seqno);

	/*
	 * The context is guilty: its queues never run again.  Take this one
	 * out of interrupt dispatch so that the ABORTED record the reset
	 * produces does not race with the errors chosen here.
	 */
	spyre_ctx_set_error(q->ctx, -ETIMEDOUT);
	if (q->hw_active) {
		unsigned long flags;

		spin_lock_irqsave(&sdev->hwq_lock, flags);
		sdev->hwq[q->hwq] = NULL;
		spin_unlock_irqrestore(&sdev->hwq_lock, flags);
	}
	if (hw) {
		if (q->hw_active)
			spyre_hwq_reset(q);
		drm_dev_exit(idx);
	}
	up_read(&sdev->reset_sem);

	spyre_queue_cancel(q, job->hw_fence, -ETIMEDOUT, -ECANCELED);

	drm_sched_stop(&q->sched, sched_job);
	drm_sched_start(&q->sched);
	mutex_unlock(&q->reset_lock);

	return hw ? DRM_GPU_SCHED_STAT_NOMINAL : DRM_GPU_SCHED_STAT_ENODEV;
}

static void spyre_queue_put(struct spyre_queue *q);

static void spyre_job_release(struct spyre_job *job)
{
	struct spyre_queue *q = job->queue;
	u32 i;

	/* Each mapping first: it needs its BO alive. */
	for (i = 0; i < job->bo_count; i++) {
		spyre_vma_put(job->bos[i].vma);
		drm_gem_object_put(job->bos[i].obj);
	}
	kvfree(job->bos);

	if (job->fence_init)
		dma_fence_put(&job->hw_fence->base);
	else
		kfree(job->hw_fence);

	if (job->ran && atomic_dec_and_test(&q->jobs_ran))
		wake_up_all(&q->idle_wq);

	kfree(job);
	spyre_queue_put(q);
}

static void spyre_job_free(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);

	drm_sched_job_cleanup(sched_job);
	spyre_job_release(job);
}

static const struct drm_sched_backend_ops spyre_sched_ops = {
	.run_job = spyre_job_run,
	.timedout_job = spyre_job_timedout,
	.free_job = spyre_job_free,
};

/* ---- Queue lifetime -------------------------------------------------- */

static void spyre_queue_release(struct kref *ref)
{
	struct spyre_queue *q = container_of(ref, struct spyre_queue, ref);

	spyre_ctx_put(q->ctx);
	mutex_destroy(&q->lock);
	mutex_destroy(&q->reset_lock);
	kfree(q);
	/* Jobs killed after their file closed still call into this module. */
	module_put(THIS_MODULE);
}

static void spyre_queue_put(struct spyre_queue *q)
{
	kref_put(&q->ref, spyre_queue_release);
}

/* Take the queue off the card; pending fences are cancelled by the caller. */
static void spyre_queue_hw_fini(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	unsigned long flags;
	int idx;

	if (!q->hw_active)
		return;

	down_read(&sdev->reset_sem);
	spin_lock_irqsave(&sdev->hwq_lock, flags);
	sdev->hwq[q->hwq] = NULL;
	spin_unlock_irqrestore(&sdev->hwq_lock, flags);

	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_hwq_disable(q);
		drm_dev_exit(idx);
	}
	q->hw_active = false;
	up_read(&sdev->reset_sem);
}

static void __spyre_queue_free_dma(struct spyre_queue *q)
{
	struct device *dev = q->sdev->drm.dev;

	list_del_init(&q->dev_link);
	if (q->ring)
		dma_free_coherent(dev, q->entries * sizeof(*q->ring), q->ring,
				  q->ring_dma);
	if (q->compl)
		dma_free_coherent(dev, sizeof(*q->compl), q->compl,
				  q->compl_dma);
	q->ring = NULL;
	q->compl = NULL;
}

/* Free the ring and completion record, unless remove() already did. */
static void spyre_queue_free_dma(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;

	down_read(&sdev->dma_sem);
	mutex_lock(&sdev->queues_lock);
	if (!sdev->dma_gone)
		__spyre_queue_free_dma(q);
	mutex_unlock(&sdev->queues_lock);
	up_read(&sdev->dma_sem);
}

/**
 * spyre_queues_free_dma() - free the rings and completion records of every
 * queue left, at remove() time.
 * @sdev: device, unplugged, quiesced, its interrupts synchronised.
 *
 * The queues themselves live on until their files close; their memory must
 * go now, while the DMA API still works for the device.
 */
void spyre_queues_free_dma(struct spyre_device *sdev)
{
	struct spyre_queue *q, *tmp;
	unsigned long flags;
	unsigned int i;

	/* No interrupt handler looks at a queue after this. */
	spin_lock_irqsave(&sdev->hwq_lock, flags);
	for (i = 0; i < sdev->num_queues; i++)
		sdev->hwq[i] = NULL;
	spin_unlock_irqrestore(&sdev->hwq_lock, flags);

	down_write(&sdev->dma_sem);
	mutex_lock(&sdev->queues_lock);
	list_for_each_entry_safe(q, tmp, &sdev->queues, dev_link)
		__spyre_queue_free_dma(q);
	sdev->dma_gone = true;
	mutex_unlock(&sdev->queues_lock);
	up_write(&sdev->dma_sem);
}

/*
 * Destroy a queue that is no longer reachable from its file.  Jobs on the
 * card are aborted, queued jobs are cancelled (-ECANCELED; jobs still
 * waiting for in-fences are killed by the scheduler with -ESRCH once those
 * signal), and every fence signals.  Jobs keep the queue memory alive.
 */
static void spyre_queue_destroy(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;

	mutex_lock(&q->lock);
	q->dead = true;
	mutex_unlock(&q->lock);

	if (q->sched_ready) {
		mutex_lock(&q->reset_lock);
		drm_sched_wqueue_stop(&q->sched);
		spyre_queue_hw_fini(q);
		spyre_queue_cancel(q, NULL, 0, -ECANCELED);
		drm_sched_wqueue_start(&q->sched);
		mutex_unlock(&q->reset_lock);

		/*
		 * Let ready jobs pass through run_job, which cancels them;
		 * jobs still waiting for in-fences after that are killed by
		 * drm_sched_entity_fini() (-ESRCH once those signal).
		 */
		wait_event_timeout(q->idle_wq, !atomic_read(&q->queued),
				   msecs_to_jiffies(SPYRE_DRAIN_TIMEOUT_MS));
		drm_sched_entity_fini(&q->entity);

		if (!wait_event_timeout(q->idle_wq, !atomic_read(&q->jobs_ran),
					msecs_to_jiffies(SPYRE_IDLE_TIMEOUT_MS)))
			drm_warn(&sdev->drm, "queue %u: jobs not freed\n",
				 q->hwq);
		drm_sched_fini(&q->sched);
	} else {
		spyre_queue_hw_fini(q);
	}

	spyre_queue_free_dma(q);
	if (q->hwq != U32_MAX)
		ida_free(&sdev->hwq_ida, q->hwq);

	spyre_queue_put(q);
}

static struct spyre_queue *spyre_queue_create(struct spyre_file *sfile,
					      u32 priority)
{
	struct spyre_device *sdev = sfile->sdev;
	struct device *dev = sdev->drm.dev;
	struct spyre_queue *q;
	unsigned long flags;
	int ret;

	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return ERR_PTR(-ENOMEM);

	__module_get(THIS_MODULE);	/* an open file holds one already */
	kref_init(&q->ref);
	q->sdev = sdev;
	spyre_ctx_get(sfile->ctx);
	q->ctx = sfile->ctx;
	q->priority = priority;
	q->hwq = U32_MAX;
	q->entries = SPYRE_RING_ENTRIES;
	mutex_init(&q->lock);
	mutex_init(&q->reset_lock);
	spin_lock_init(&q->fence_lock);
	INIT_LIST_HEAD(&q->pending);
	INIT_LIST_HEAD(&q->dev_link);
	init_waitqueue_head(&q->idle_wq);
	atomic_set(&q->jobs_ran, 0);

	ret = ida_alloc_max(&sdev->hwq_ida, sdev->num_queues - 1, GFP_KERNEL);
	if (ret < 0) {
		ret = ret == -ENOSPC ? -EBUSY : ret;
		goto err;
	}
	q->hwq = ret;
	q->vector = 1 + q->hwq % (sdev->nvec - 1);
	snprintf(q->name, sizeof(q->name), "spyre-q%u", q->hwq);

	q->ring = dma_alloc_coherent(dev, q->entries * sizeof(*q->ring),
				     &q->ring_dma, GFP_KERNEL);
	q->compl = dma_alloc_coherent(dev, sizeof(*q->compl), &q->compl_dma,
				      GFP_KERNEL);
	mutex_lock(&sdev->queues_lock);
	list_add_tail(&q->dev_link, &sdev->queues);
	mutex_unlock(&sdev->queues_lock);
	if (!q->ring || !q->compl) {
		ret = -ENOMEM;
		goto err;
	}
	q->fence_ctx = dma_fence_context_alloc(1);

	ret = drm_sched_init(&q->sched, &spyre_sched_ops, sdev->submit_wq, 1,
			     q->entries - 1, 0,
			     spyre_job_timeout_ms ?
			     msecs_to_jiffies(spyre_job_timeout_ms) :
			     MAX_SCHEDULE_TIMEOUT,
			     NULL, NULL, q->name, dev);
	if (ret)
		goto err;

	q->sched_list[0] = &q->sched;
	ret = drm_sched_entity_init(&q->entity, DRM_SCHED_PRIORITY_KERNEL,
				    q->sched_list, 1, NULL);
	if (ret) {
		drm_sched_fini(&q->sched);
		goto err;
	}
	q->sched_ready = true;

	down_read(&sdev->reset_sem);
	ret = spyre_hwq_program(q);
	if (!ret) {
		spin_lock_irqsave(&sdev->hwq_lock, flags);
		sdev->hwq[q->hwq] = q;
		spin_unlock_irqrestore(&sdev->hwq_lock, flags);
		q->hw_active = true;
	}
	up_read(&sdev->reset_sem);
	if (ret)
		goto err;

	return q;

err:
	spyre_queue_destroy(q);
	return ERR_PTR(ret);
}

/**
 * spyre_ioctl_queue_create() - DRM_IOCTL_SPYRE_QUEUE_CREATE.
 * @drm: device.
 * @data: struct drm_spyre_queue_create.
 * @file: caller.
 *
 * Return: 0 or a negative errno (see the uapi header).
 */
int spyre_ioctl_queue_create(struct drm_device *drm, void *data,
			     struct drm_file *file)
{
	struct drm_spyre_queue_create *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct spyre_queue *q;
	u32 id;
	int idx, ret;

	if (args->flags || args->pad ||
	    args->priority > DRM_SPYRE_PRIORITY_HIGH)
		return -EINVAL;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	q = spyre_queue_create(sfile, args->priority);
	if (IS_ERR(q)) {
		ret = PTR_ERR(q);
		goto out;
	}

	ret = xa_alloc(&sfile->queues, &id, q, xa_limit_32b, GFP_KERNEL);
	if (ret) {
		spyre_queue_destroy(q);
		goto out;
	}
	args->queue_id = id;
out:
	drm_dev_exit(idx);
	return ret;
}

/**
 * spyre_ioctl_queue_destroy() - DRM_IOCTL_SPYRE_QUEUE_DESTROY.
 * @drm: device.
 * @data: struct drm_spyre_queue_destroy.
 * @file: caller.
 *
 * Return: 0, -EINVAL (pad) or -ENOENT (no such queue).
 */
int spyre_ioctl_queue_destroy(struct drm_device *drm, void *data,
			      struct drm_file *file)
{
	struct drm_spyre_queue_destroy *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct spyre_queue *q;

	if (args->pad)
		return -EINVAL;

	q = xa_erase(&sfile->queues, args->queue_id);
	if (!q)
		return -ENOENT;

	spyre_queue_destroy(q);
	return 0;
}

/**
 * spyre_queues_destroy_all() - destroy every queue of a closing file.
 * @sfile: file.
 */
void spyre_queues_destroy_all(struct spyre_file *sfile)
{
	struct spyre_queue *q;
	unsigned long id;

	xa_for_each(&sfile->queues, id, q) {
		xa_erase(&sfile->queues, id);
		spyre_queue_destroy(q);
	}
	xa_destroy(&sfile->queues);
}

static struct spyre_queue *spyre_queue_lookup(struct spyre_file *sfile,
					      u32 id)
{
	struct spyre_queue *q;

	xa_lock(&sfile->queues);
	q = xa_load(&sfile->queues, id);
	if (q)
		kref_get(&q->ref);
	xa_unlock(&sfile->queues);
	return q;
}

/* ---- Submission -------------------------------------------------------- */

struct spyre_out_sync {
	struct drm_syncobj *syncobj;
	struct dma_fence_chain *chain;
	u64 point;
};

/* An out-sync of a job of the SUBMIT being waited for (see below). */
struct spyre_sub_out {
	u32 job;
	u32 handle;
	u64 point;
};

/*
 * The out-syncs of the @count jobs at @uj, in job order, into *@outs
 * (kvfree() it); *@n gets their number.
 */
static int spyre_sub_outs_get(const struct drm_spyre_job *uj, u32 count,
			      struct spyre_sub_out **outs, u32 *n)
{
	struct spyre_sub_out *o;
	struct drm_spyre_sync s;
	u32 i, k, total = 0;

	for (i = 0; i < count; i++)
		total += uj[i].out_sync_count;
	*n = 0;
	*outs = NULL;
	if (!total)
		return 0;
	o = kvmalloc_array(total, sizeof(*o), GFP_KERNEL);
	if (!o)
		return -ENOMEM;
	for (i = 0; i < count; i++) {
		struct drm_spyre_sync __user *us =
			u64_to_user_ptr(uj[i].out_syncs);

		for (k = 0; k < uj[i].out_sync_count; k++) {
			if (copy_from_user(&s, &us[k], sizeof(s))) {
				kvfree(o);
				return -EFAULT;
			}
			o[*n].job = i;
			o[*n].handle = s.handle;
			o[(*n)++].point = s.point;
		}
	}
	*outs = o;
	return 0;
}

/*
 * Before anything of a SUBMIT is queued, wait, holding no lock, until every
 * in-sync of the @count jobs at @uj flagged DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT
 * has a fence, unless an earlier job of the same SUBMIT signals it (the
 * same handle: binary, or a timeline point at or past the one waited for).
 * A signal ends the wait with -ERESTARTSYS: nothing is queued yet, so the
 * ioctl restarts as it came.
 */
static int spyre_submit_wait_for_submit(struct spyre_file *sfile,
					struct drm_file *file,
					const struct drm_spyre_job *uj,
					u32 count)
{
	struct spyre_sub_out *outs = NULL;
	struct drm_spyre_sync s;
	struct dma_fence *fence;
	bool have_outs = false;
	u32 i, k, j, nouts = 0;
	int ret = 0;

	for (i = 0; !ret && i < count; i++) {
		struct drm_spyre_sync __user *usync =
			u64_to_user_ptr(uj[i].in_syncs);

		for (k = 0; !ret && k < uj[i].in_sync_count; k++) {
			if (copy_from_user(&s, &usync[k], sizeof(s))) {
				ret = -EFAULT;
				break;
			}
			if (s.flags & ~DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT) {
				ret = -EINVAL;
				break;
			}
			if (!s.flags)
				continue;
			if (!have_outs) {
				ret = spyre_sub_outs_get(uj, count, &outs,
							 &nouts);
				have_outs = true;
				if (ret)
					break;
			}
			for (j = 0; j < nouts && outs[j].job < i; j++)
				if (outs[j].handle == s.handle &&
				    (s.point ? outs[j].point >= s.point :
					       !outs[j].point))
					break;
			if (j < nouts && outs[j].job < i)
				continue;	/* an earlier job signals it */
			if (atomic_read(&sfile->ctx->error)) {
				ret = -ECANCELED;
				break;
			}
			ret = drm_syncobj_find_fence(file, s.handle, s.point,
						     DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
						     &fence);
			if (!ret)
				dma_fence_put(fence);
		}
		cond_resched();
	}
	kvfree(outs);
	return ret;
}

static int spyre_job_add_in_syncs(struct spyre_job *job,
				  struct drm_file *file,
				  const struct drm_spyre_job *uj)
{
	struct drm_spyre_sync __user *usync = u64_to_user_ptr(uj->in_syncs);
	struct drm_spyre_sync s;
	struct dma_fence *fence;
	u32 i;
	int ret;

	for (i = 0; i < uj->in_sync_count; i++) {
		if (copy_from_user(&s, &usync[i], sizeof(s)))
			return -EFAULT;
		if (s.flags & ~DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT)
			return -EINVAL;

		ret = drm_syncobj_find_fence(file, s.handle, s.point, 0,
					     &fence);
		if (ret)
			return ret;

		if (!dma_fence_is_signaled(fence))
			job->deps_ready = false;
		ret = drm_sched_job_add_dependency(&job->base, fence);
		if (ret)
			return ret;
	}
	return 0;
}

/* Release @outs (@count entries); @stack is the caller's small array. */
static void spyre_out_syncs_free(struct spyre_out_sync *outs, u32 count,
				 struct spyre_out_sync *stack)
{
	u32 i;

	if (!outs)
		return;
	for (i = 0; i < count; i++) {
		if (outs[i].syncobj)
			drm_syncobj_put(outs[i].syncobj);
		dma_fence_chain_free(outs[i].chain);
	}
	if (outs != stack)
		kvfree(outs);
}

/*
 * Look up the syncobjs @uj signals into *@outs_out: @stack (zeroed, of
 * SPYRE_OUT_SYNCS_STACK entries) when they fit, else an allocation.
 * *@outs_out is set even on failure, for spyre_out_syncs_free().
 */
static int spyre_out_syncs_get(struct drm_file *file,
			       const struct drm_spyre_job *uj,
			       struct spyre_out_sync *stack,
			       struct spyre_out_sync **outs_out)
{
	struct drm_spyre_sync __user *usync = u64_to_user_ptr(uj->out_syncs);
	struct spyre_out_sync *outs = stack;
	struct drm_spyre_sync s;
	u32 i;

	*outs_out = NULL;
	if (!uj->out_sync_count)
		return 0;

	if (uj->out_sync_count > SPYRE_OUT_SYNCS_STACK) {
		outs = kvcalloc(uj->out_sync_count, sizeof(*outs),
				GFP_KERNEL);
		if (!outs)
			return -ENOMEM;
	}
	*outs_out = outs;

	for (i = 0; i < uj->out_sync_count; i++) {
		if (copy_from_user(&s, &usync[i], sizeof(s)))
			return -EFAULT;
		if (s.flags)
			return -EINVAL;

		outs[i].syncobj = drm_syncobj_find(file, s.handle);
		if (!outs[i].syncobj)
			return -ENOENT;

		if (s.point) {
			outs[i].chain = dma_fence_chain_alloc();
			if (!outs[i].chain)
				return -ENOMEM;
			outs[i].point = s.point;
		}
	}
	return 0;
}

static void spyre_out_syncs_signal(struct spyre_out_sync *outs, u32 count,
				   struct dma_fence *fence)
{
	u32 i;

	for (i = 0; i < count; i++) {
		if (outs[i].chain) {
			drm_syncobj_add_point(outs[i].syncobj, outs[i].chain,
					      fence, outs[i].point);
			outs[i].chain = NULL;	/* consumed */
		} else {
			drm_syncobj_replace_fence(outs[i].syncobj, fence);
		}
	}
}

static int spyre_job_validate(const struct drm_spyre_job *uj)
{
	if (uj->flags)
		return -EINVAL;
	if (!IS_ALIGNED(uj->cmd_va, 8) || !IS_ALIGNED(uj->cmd_size, 8) ||
	    uj->cmd_size < 8 || uj->cmd_size > SPYRE_MAX_CMD_STREAM)
		return -EINVAL;
	if (uj->cmd_va < SPYRE_VA_START ||
	    uj->cmd_va > SPYRE_VA_END - uj->cmd_size)
		return -EINVAL;
	if (uj->bo_count > SPYRE_MAX_BOS_PER_JOB ||
	    uj->in_sync_count > SPYRE_MAX_SYNCS_PER_JOB ||
	    uj->out_sync_count > SPYRE_MAX_SYNCS_PER_JOB)
		return -EINVAL;
	return 0;
}

/*
 * How many jobs from @uj[0] (of @count) go into one scheduler job: jobs of
 * the same queue, where only the first may wait for syncobjs and only the
 * last may signal them, so that every fence a user can see still signals
 * when its own job ends and no job waits for anything a later one needs.
 */
static u32 spyre_group_len(const struct drm_spyre_job *uj, u32 count)
{
	u32 n, bos = uj[0].bo_count;

	for (n = 1; n < count && n < SPYRE_GROUP_MAX; n++) {
		if (uj[n - 1].out_sync_count ||
		    uj[n].queue_id != uj[0].queue_id || uj[n].in_sync_count ||
		    bos + uj[n].bo_count > SPYRE_MAX_BOS_PER_JOB)
			break;
		bos += uj[n].bo_count;
	}
	return n;
}

/* Drop the BOs of @job from index @keep on. */
static void spyre_job_trim_bos(struct spyre_job *job, u32 keep)
{
	while (job->bo_count > keep) {
		job->bo_count--;
		spyre_vma_put(job->bos[job->bo_count].vma);
		drm_gem_object_put(job->bos[job->bo_count].obj);
	}
}

/* Append the BOs @uj lists to @job, with their mappings in its context. */
static int spyre_job_add_bos(struct spyre_job *job, struct drm_file *file,
			     const struct drm_spyre_job *uj)
{
	struct drm_spyre_bo_ref __user *uref = u64_to_user_ptr(uj->bos);
	struct drm_spyre_bo_ref buf[SPYRE_BO_REF_CHUNK];
	u32 i, n;

	for (i = 0; i < uj->bo_count; i += n) {
		n = min_t(u32, uj->bo_count - i, SPYRE_BO_REF_CHUNK);
		if (copy_from_user(buf, uref + i, n * sizeof(*buf)))
			return -EFAULT;
		for (u32 k = 0; k < n; k++) {
			struct spyre_job_bo *jb = &job->bos[job->bo_count];
			struct drm_gem_object *obj;
			struct spyre_vma *vma;

			if (!buf[k].flags ||
			    (buf[k].flags & ~(DRM_SPYRE_BO_REF_READ |
					      DRM_SPYRE_BO_REF_WRITE)))
				return -EINVAL;
			obj = drm_gem_object_lookup(file, buf[k].handle);
			if (!obj)
				return -ENOENT;
			/* NULL if the handle was closed meanwhile */
			vma = spyre_vma_lookup(to_spyre_bo(obj),
					       job->queue->ctx);
			if (!vma) {
				drm_gem_object_put(obj);
				return -ENOENT;
			}
			jb->obj = obj;
			jb->vma = vma;
			jb->usage = buf[k].flags & DRM_SPYRE_BO_REF_WRITE ?
				    DMA_RESV_USAGE_WRITE : DMA_RESV_USAGE_READ;
			job->bo_count++;
		}
	}
	return 0;
}

/*
 * Queue the @n jobs at @uj (copied from @uptr, @stride apart) as one
 * scheduler job: one ring descriptor per job, one hardware fence (the
 * last descriptor's), the BOs of all of them.  A job that fails stops the
 * group there: the jobs before it are queued anyway and *@queued counts
 * them (an error can still follow when a seqno cannot be written back).
 */
static int spyre_submit_group(struct spyre_file *sfile, struct drm_file *file,
			      const struct drm_spyre_job *uj, u32 n, u64 uptr,
			      u32 stride, u32 *queued)
{
	struct spyre_out_sync stack_outs[SPYRE_OUT_SYNCS_STACK] = {};
	struct spyre_out_sync *outs = NULL;
	struct dma_fence *fence;
	struct spyre_queue *q;
	struct spyre_job *job;
	struct drm_exec exec;
	bool inited = false, locked = false;
	u32 i, done, nbos = 0, nouts = 0;
	u64 first;
	int ret = 0, err;

	*queued = 0;
	q = spyre_queue_lookup(sfile, uj[0].queue_id);
	if (!q)
		return -ENOENT;

	job = kzalloc(struct_size(job, descs, n), GFP_KERNEL);
	if (!job) {
		spyre_queue_put(q);
		return -ENOMEM;
	}
	job->ndesc = n;
	job->queue = q;		/* the lookup reference is the job's */
	job->deps_ready = true;	/* until an in-fence says otherwise */

	if (atomic_read(&q->ctx->error)) {
		ret = -ECANCELED;
		goto err;
	}

	job->hw_fence = kzalloc(sizeof(*job->hw_fence), GFP_KERNEL);
	for (i = 0; i < n; i++)
		nbos += uj[i].bo_count;
	if (nbos)
		job->bos = kvcalloc(nbos, sizeof(*job->bos), GFP_KERNEL);
	if (!job->hw_fence || (nbos && !job->bos)) {
		ret = -ENOMEM;
		goto err;
	}

	/* In the order a lone job checks them: BOs, in-syncs, out-syncs. */
	for (done = 0; done < n; done++) {
		u32 keep = job->bo_count;

		ret = spyre_job_add_bos(job, file, &uj[done]);
		if (!ret && !done) {
			ret = drm_sched_job_init(&job->base, &q->entity, n,
						 file);
			inited = !ret;
			if (!ret)
				ret = spyre_job_add_in_syncs(job, file, uj);
		}
		if (!ret && done == n - 1) {
			ret = spyre_out_syncs_get(file, &uj[done], stack_outs,
						  &outs);
			nouts = uj[done].out_sync_count;
		}
		if (ret) {
			spyre_job_trim_bos(job, keep);
			break;
		}
		job->descs[done].cmd_va = uj[done].cmd_va;
		job->descs[done].cmd_size = uj[done].cmd_size;
	}
	if (!done)
		goto err;
	err = ret;
	if (err) {
		/* The out-syncs belonged to the job that failed. */
		spyre_out_syncs_free(outs, nouts, stack_outs);
		outs = NULL;
		nouts = 0;
	}
	job->ndesc = done;
	job->base.credits = done;

	/* Reserve a fence slot in every listed BO's reservation object. */
	if (job->bo_count) {
		/*
		 * Not interruptible: jobs before this one may already be
		 * queued, and a restarted SUBMIT would queue them again.
		 */
		drm_exec_init(&exec, DRM_EXEC_IGNORE_DUPLICATES,
			      job->bo_count);
		locked = true;
		drm_exec_until_all_locked(&exec) {
			for (i = 0; i < job->bo_count; i++) {
				ret = drm_exec_prepare_obj(&exec,
							   job->bos[i].obj, 1);
				drm_exec_retry_on_contention(&exec);
				if (ret)
					goto err;
			}
		}
	}

	mutex_lock(&q->lock);
	if (q->dead) {
		mutex_unlock(&q->lock);
		ret = -ENOENT;
		goto err;
	}
	if (atomic_read(&q->ctx->error)) {
		mutex_unlock(&q->lock);
		ret = -ECANCELED;
		goto err;
	}
	drm_sched_job_arm(&job->base);
	first = q->next_seqno + 1;
	q->next_seqno += done;
	job->seqno = q->next_seqno;
	fence = dma_fence_get(&job->base.s_fence->finished);
	/*
	 * Readers first: a BO listed more than once, as reader and writer,
	 * then ends with one writer entry (dma_resv_add_fence() replaces a
	 * reader of the same context by a writer, not the other way round),
	 * so the one slot reserved per BO is enough.
	 */
	for (i = 0; i < job->bo_count; i++)
		if (job->bos[i].usage == DMA_RESV_USAGE_READ)
			dma_resv_add_fence(job->bos[i].obj->resv, fence,
					   DMA_RESV_USAGE_READ);
	for (i = 0; i < job->bo_count; i++)
		if (job->bos[i].usage == DMA_RESV_USAGE_WRITE)
			dma_resv_add_fence(job->bos[i].obj->resv, fence,
					   DMA_RESV_USAGE_WRITE);
	/* Counted before the push: run_job may run before it returns. */
	atomic_inc(&q->queued);
	if (!job->deps_ready)
		atomic_inc(&q->queued_waiting);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&q->lock);
	if (locked)
		drm_exec_fini(&exec);
	/* The job now belongs to the scheduler. */
	*queued = done;

	spyre_out_syncs_signal(outs, nouts, fence);
	spyre_out_syncs_free(outs, nouts, stack_outs);
	dma_fence_put(fence);

	if (stride >= offsetofend(struct drm_spyre_job, seqno)) {
		for (i = 0; i < done; i++) {
			struct drm_spyre_job __user *ujob =
				u64_to_user_ptr(uptr + (u64)i * stride);

			if (put_user(first + i, &ujob->seqno))
				return -EFAULT;
		}
	}
	return err;

err:
	if (locked)
		drm_exec_fini(&exec);
	spyre_out_syncs_free(outs, nouts, stack_outs);
	if (inited)
		drm_sched_job_cleanup(&job->base);
	spyre_job_release(job);
	return ret;
}

/* Copy job @i of @args into @uj and check it. */
static int spyre_job_copy(const struct drm_spyre_submit *args, u32 i,
			  struct drm_spyre_job *uj)
{
	void __user *src = u64_to_user_ptr(args->jobs + (u64)i *
					   args->job_stride);
	int ret;

	ret = copy_struct_from_user(uj, sizeof(*uj), src, args->job_stride);
	if (ret)
		return ret == -E2BIG ? -EINVAL : ret;
	return spyre_job_validate(uj);
}

/**
 * spyre_ioctl_submit() - DRM_IOCTL_SPYRE_SUBMIT.
 * @drm: device.
 * @data: struct drm_spyre_submit.
 * @file: caller.
 *
 * Jobs are validated and queued in order; on an error @job_count is set to
 * the number of jobs queued.  Consecutive jobs of one queue are queued as
 * one scheduler job (see spyre_group_len()): they cost one pass through
 * the scheduler, one fence and one interrupt instead of one each.
 *
 * Return: 0 or a negative errno (see the uapi header).
 */
int spyre_ioctl_submit(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct drm_spyre_submit *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct drm_spyre_job stack_jobs[SPYRE_SUBMIT_STACK_JOBS];
	struct drm_spyre_job *uj = stack_jobs;
	u32 i, n, valid, queued = 0;
	int idx, ret = 0, first_err = 0;

	if (args->flags || args->pad ||
	    !args->job_count || args->job_count > SPYRE_MAX_JOBS ||
	    args->job_stride < SPYRE_JOB_STRIDE_MIN ||
	    args->job_stride > SPYRE_JOB_STRIDE_MAX ||
	    !IS_ALIGNED(args->job_stride, 8)) {
		args->job_count = 0;	/* nothing queued */
		return -EINVAL;
	}

	if (args->job_count > ARRAY_SIZE(stack_jobs)) {
		uj = kvmalloc_array(args->job_count, sizeof(*uj), GFP_KERNEL);
		if (!uj) {
			args->job_count = 0;
			return -ENOMEM;
		}
	}

	/* The jobs up to the first bad one are queued: find it first. */
	if (args->job_stride == sizeof(*uj) &&
	    !copy_from_user(uj, u64_to_user_ptr(args->jobs),
			    (size_t)args->job_count * sizeof(*uj))) {
		for (valid = 0; valid < args->job_count; valid++) {
			first_err = spyre_job_validate(&uj[valid]);
			if (first_err)
				break;
		}
	} else {
		for (valid = 0; valid < args->job_count; valid++) {
			first_err = spyre_job_copy(args, valid, &uj[valid]);
			if (first_err)
				break;
		}
	}

	ret = spyre_submit_wait_for_submit(sfile, file, uj, valid);
	if (ret == -ERESTARTSYS)
		goto out;	/* restarts with @args as they came */
	for (i = 0; !ret && i < valid; i += n) {
		u32 q;

		n = spyre_group_len(&uj[i], valid - i);
		if (!drm_dev_enter(drm, &idx)) {
			ret = -ENODEV;
			break;
		}
		ret = spyre_submit_group(sfile, file, &uj[i], n,
					 args->jobs + (u64)i * args->job_stride,
					 args->job_stride, &q);
		drm_dev_exit(idx);
		queued += q;
		if (ret)
			break;
	}
	if (!ret)
		ret = first_err;
	if (ret)
		args->job_count = queued;
out:
	if (uj != stack_jobs)
		kvfree(uj);
	return ret;
}
