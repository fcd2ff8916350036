// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: jobs on the scheduler, hardware fences and
 * completions.
 *
 * Each user queue (spyre_queue.c) owns one hardware queue (ring +
 * completion record in kernel-owned coherent memory) and one
 * drm_gpu_scheduler with a single entity; SUBMIT (spyre_submit.c) pushes
 * the jobs.  This file is the scheduler's backend: run_job() writes
 * struct spyre_hw_job descriptors into the ring and rings the doorbell;
 * the queue's MSI-X vector fires when the card has written the completion
 * record, and the IRQ handler signals every hardware fence up to the
 * recorded seqno.
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
 *  - the schedulers run on a per-CPU, high-priority workqueue, so run_job()
 *    follows a SUBMIT on the submitting CPU without a cross-CPU wake-up.
 *
 * run_job, the timeout handler, the poll and the resets are fence
 * signalling sections (dma_fence_begin_signalling()): they allocate
 * nothing and take no lock that is held elsewhere around an allocation.
 * run_job takes no sleeping lock at all: during a reset its queue is
 * parked and the job waits on the pending list for the replay.
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
 * The paths that program the card (queue setup and teardown, timeout
 * handling) hold sdev->reset_sem for reading, so a PCI function reset
 * (spyre_queues_restore_hw()) never races with them; run_job writes the
 * ring under q->fence_lock, unless the queue is parked.
 */

#include <linux/module.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include <drm/spyre_cmd.h>
#include "spyre_drv.h"
#include "spyre_job.h"
#include "spyre_mmu.h"
#include "spyre_queue.h"
#include "spyre_reset.h"
#include "spyre_trace.h"

/* ---- Hardware fences ------------------------------------------------- */

static const char *spyre_fence_get_driver_name(struct dma_fence *fence)
{
	return SPYRE_DRIVER_NAME;
}

static const char *spyre_fence_get_timeline_name(struct dma_fence *fence)
{
	return "spyre-hw-queue";
}

static void spyre_fence_release(struct dma_fence *fence)
{
	spyre_live_dec(fences);
	dma_fence_free(fence);
}

static const struct dma_fence_ops spyre_fence_ops = {
	.get_driver_name = spyre_fence_get_driver_name,
	.get_timeline_name = spyre_fence_get_timeline_name,
	.release = spyre_fence_release,
};

/* Signal one pending fence of @q; caller holds q->fence_lock. */
static void spyre_fence_complete(struct spyre_queue *q, struct spyre_fence *f,
				 int err)
{
	lockdep_assert_held(&q->fence_lock);
	if (trace_spyre_job_done_enabled()) {
		/* the card's times are in the record when it is this job's */
		bool own = le64_to_cpu(READ_ONCE(q->compl->seqno)) ==
			   f->base.seqno;

		trace_spyre_job_done(q->sdev->drm.dev, q->ctx->id, q->hwq,
				     f->base.seqno, err,
				     own ? le64_to_cpu(q->compl->start_ns) : 0,
				     own ? le64_to_cpu(q->compl->end_ns) : 0);
	}
	list_del_init(&f->link);
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
	case SPYRE_STATUS_BAD_PROGRAM:
		return -ENOEXEC;
	case SPYRE_STATUS_OUT_OF_BOUNDS:
		return -ERANGE;
	case SPYRE_STATUS_ASSERT:
		return -EDOM;
	default:
		return -EIO;
	}
}

/**
 * spyre_queue_signal() - signal the fences of the jobs that ended.
 * @q: queue.
 * @done: seqno of the last descriptor the card ended.
 * @err: its error (0, or a negative errno).
 * @fault_va: the faulting device VA when @err is an MMU fault, else NULL.
 *
 * Signal the fences of the jobs whose descriptors all ended by seqno
 * @done; the job of @done ends with @err (or -ECANCELED when @done is not
 * its last descriptor: the rest never ran).  With an error, later fences
 * are cancelled: the card halted the queue, they will not run.
 *
 * @fault_va is not NULL when the descriptor of @done took an MMU fault:
 * the fault is recorded in the context, and the context's error set,
 * before any fence signals, so that a waiter woken by -EFAULT finds them
 * in QUERY_CONTEXT.  A record is processed once: the IRQ handlers, the
 * lost-interrupt poll, the timeout handler and a reset may all look at
 * the same one.
 *
 * Return: the number of fences signalled.
 */
unsigned int spyre_queue_signal(struct spyre_queue *q, u64 done, int err,
				const u64 *fault_va)
{
	struct spyre_fence *f, *tmp;
	unsigned int n = 0;
	unsigned long flags;

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
		} else if (err) {
			spyre_fence_complete(q, f, -ECANCELED);
		} else {
			break;
		}
		n++;
	}
	if (done > q->signalled)
		q->signalled = done;
	spin_unlock_irqrestore(&q->fence_lock, flags);
	return n;
}

/**
 * spyre_queue_cancel() - signal every pending fence of a queue.
 * @q: queue.
 * @guilty: fence to end with @guilty_err, or NULL.
 * @guilty_err: error for @guilty.
 * @err: error for the others.
 */
void spyre_queue_cancel(struct spyre_queue *q, struct spyre_fence *guilty,
			int guilty_err, int err)
{
	struct spyre_fence *f, *tmp;
	unsigned long flags;

	spin_lock_irqsave(&q->fence_lock, flags);
	list_for_each_entry_safe(f, tmp, &q->pending, link)
		spyre_fence_complete(q, f, f == guilty ? guilty_err : err);
	spin_unlock_irqrestore(&q->fence_lock, flags);
}

static bool spyre_status_known(u32 status)
{
	switch (status) {
	case SPYRE_STATUS_OK:
	case SPYRE_STATUS_INVALID_OPCODE:
	case SPYRE_STATUS_INVALID_COMMAND:
	case SPYRE_STATUS_INVALID_OPERAND:
	case SPYRE_STATUS_MMU_FAULT:
	case SPYRE_STATUS_DMA_ERROR:
	case SPYRE_STATUS_ABORTED:
	case SPYRE_STATUS_LIMIT:
	case SPYRE_STATUS_INVALID_JOB:
	case SPYRE_STATUS_INTERNAL:
	case SPYRE_STATUS_BAD_PROGRAM:
	case SPYRE_STATUS_OUT_OF_BOUNDS:
	case SPYRE_STATUS_ASSERT:
		return true;
	default:
		return false;
	}
}

/*
 * Is the record (@done, @status) one the card can have written?  Its seqno
 * lies between the last one processed and the last one written to the
 * ring, and its status is one the card defines.  A record that is not is
 * never acted on: it is counted once and the card is reset (nobody is
 * guilty; spyre_queue_replay() decides what reruns).
 */
static bool spyre_compl_trusted(struct spyre_queue *q, u64 done, u32 status)
{
	struct spyre_device *sdev = q->sdev;

	if (done <= READ_ONCE(q->written) && done >= READ_ONCE(q->signalled) &&
	    spyre_status_known(status))
		return true;
	if (!READ_ONCE(q->corrupt)) {
		WRITE_ONCE(q->corrupt, true);
		atomic64_inc(&sdev->health.corrupt_completions);
		dev_warn_ratelimited(sdev->drm.dev,
				     "queue %u: corrupt completion record (seqno %llu, status %#x; last written %llu, processed %llu), resetting the card\n",
				     q->hwq, done, status, READ_ONCE(q->written),
				     READ_ONCE(q->signalled));
		spyre_recover(sdev, SPYRE_RECOVER_CORRUPT);
	}
	return false;
}

/* Keep a copy of a record processed for the first time, for devcoredump. */
static void spyre_queue_remember(struct spyre_queue *q, u64 done)
{
	unsigned long flags;
	u32 last;

	spin_lock_irqsave(&q->fence_lock, flags);
	last = (q->history_next + SPYRE_COMPL_HISTORY - 1) % SPYRE_COMPL_HISTORY;
	if (le64_to_cpu(q->history[last].seqno) != done) {
		memcpy(&q->history[q->history_next], q->compl,
		       sizeof(*q->compl));
		q->history_next = (q->history_next + 1) % SPYRE_COMPL_HISTORY;
	}
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
 * interrupt settles it.  A record out of range is not trusted at all
 * (spyre_compl_trusted()).
 *
 * Return: the number of fences signalled.
 */
unsigned int spyre_queue_irq(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	unsigned int n;
	u32 status;
	u64 done, va;
	int err;

	done = le64_to_cpu(READ_ONCE(q->compl->seqno));
	rmb(); /* the seqno is written last */
	status = le32_to_cpu(READ_ONCE(q->compl->status));
	if (!spyre_compl_trusted(q, done, status))
		return 0;

	if (status == SPYRE_STATUS_OK) {
		n = spyre_queue_signal(q, done, 0, NULL);
		if (n)
			spyre_queue_remember(q, done);
		return n;
	}

	if (status != SPYRE_STATUS_ABORTED &&
	    spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_STATUS)) != SPYRE_QS_ERROR)
		return done ? spyre_queue_signal(q, done - 1, 0, NULL) : 0;

	/* The queue is halted: the record is final; re-read it in order. */
	rmb(); /* after the status register read */
	done = le64_to_cpu(READ_ONCE(q->compl->seqno));
	rmb(); /* the seqno is written last */
	status = le32_to_cpu(READ_ONCE(q->compl->status));
	if (!spyre_compl_trusted(q, done, status))
		return 0;
	err = spyre_status_to_errno(status);
	va = le64_to_cpu(READ_ONCE(q->compl->error_va));
	if (err && err != -ECANCELED && done > READ_ONCE(q->signalled))
		spyre_ctx_note_job_error(q->ctx, status,
					 le32_to_cpu(READ_ONCE(q->compl->cmd_offset)),
					 le64_to_cpu(READ_ONCE(q->compl->detail)),
					 le64_to_cpu(READ_ONCE(q->compl->detail2)));
	n = spyre_queue_signal(q, done, err,
			       status == SPYRE_STATUS_MMU_FAULT ? &va : NULL);
	if (n)
		spyre_queue_remember(q, done);
	if (n && err && err != -ECANCELED) {
		dev_warn_ratelimited(sdev->drm.dev,
				     "queue %u (ctx %u): job %llu failed, status %u at offset %u, va %#llx, detail %#llx %#llx\n",
				     q->hwq, q->ctx->id, done, status,
				     le32_to_cpu(READ_ONCE(q->compl->cmd_offset)),
				     va, le64_to_cpu(READ_ONCE(q->compl->detail)),
				     le64_to_cpu(READ_ONCE(q->compl->detail2)));
	}
	return n;
}

/**
 * spyre_queue_snapshot() - note how far the card got on a queue, before a
 * reset.
 * @q: queue; the caller holds sdev->reset_sem for writing and is inside
 *	drm_dev_enter(); with @mmio it has stopped the card starting jobs
 *	(CONTROL) and has processed the queue's record.
 * @mmio: the card's registers can be read (not so for a frozen channel).
 *
 * Sets @q->started to the seqno of the job the card is running (STATUS
 * BUSY or SEM_WAIT: the descriptor at HEAD), else of the last one it
 * ended (the one before HEAD), bounded by what is known: never below the
 * last record processed, never beyond the last descriptor written.
 * Without @mmio, it is the job after the last one the record reports
 * ended: a queue runs its jobs one after the other.  Descriptors after
 * the last record up to @q->started are treated as interrupted by
 * spyre_queue_replay().
 *
 * The queue is parked first: until spyre_queue_replay(), run_job puts its
 * jobs on the pending list without writing the ring.
 */
void spyre_queue_snapshot(struct spyre_queue *q, bool mmio)
{
	struct spyre_device *sdev = q->sdev;
	u32 st, head, mask = q->entries - 1;
	unsigned long flags;
	u64 started;

	lockdep_assert_held_write(&sdev->reset_sem);
	spin_lock_irqsave(&q->fence_lock, flags);
	q->parked = true;
	spin_unlock_irqrestore(&q->fence_lock, flags);
	if (!mmio) {
		started = le64_to_cpu(READ_ONCE(q->compl->seqno));
		if (started < q->signalled || started > q->written)
			started = q->signalled;	/* not trusted */
		q->started = min(started + 1, q->written);
		return;
	}
	spyre_hwq_fold_busy(q);
	st = spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_STATUS));
	head = spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_HEAD));
	if (st == SPYRE_QS_BUSY || st == SPYRE_QS_SEM_WAIT)
		started = le64_to_cpu(q->ring[head & mask].seqno);
	else
		started = le64_to_cpu(q->ring[(head - 1) & mask].seqno);
	if (head > mask || started > q->written)
		started = q->written;	/* the card makes no sense: all */
	q->started = max(started, q->signalled);
}

/*
 * Write the descriptors of @job from index @from on at the ring's tail
 * (not handed to the card yet: the caller advances q->tail and rings the
 * doorbell).  Only the last one raises an interrupt.  Returns how many.
 */
static u32 spyre_ring_fill(struct spyre_queue *q, struct spyre_job *job,
			   u32 from)
{
	u64 first = job->seqno - job->ndesc + 1;
	u32 i;

	for (i = from; i < job->ndesc; i++) {
		struct spyre_hw_job *desc;

		desc = &q->ring[(q->tail + i - from) & (q->entries - 1)];
		desc->seqno = cpu_to_le64(first + i);
		desc->cmd_va = cpu_to_le64(job->descs[i].cmd_va);
		desc->cmd_size = cpu_to_le32(job->descs[i].cmd_size);
		desc->ctx = cpu_to_le16(q->ctx->id);
		desc->flags = cpu_to_le16(i == job->ndesc - 1 ?
					  SPYRE_JOB_F_IRQ : 0);
		memset(desc->reserved, 0, sizeof(desc->reserved));
	}
	return job->ndesc - from;
}

static void spyre_ring_doorbell(struct spyre_queue *q);

/**
 * spyre_queue_replay() - put a queue's unfinished jobs back on its ring
 * after a reset, and unpark it.
 * @q: queue, programmed again with an empty ring; the caller holds
 *	sdev->reset_sem for writing and is inside drm_dev_enter(), and has
 *	processed what the record says ended.
 *
 * In seqno order, each pending job runs again from its first descriptor
 * not known to have ended, unless that part was interrupted (up to
 * @q->started) and is not DRM_SPYRE_JOB_RESTARTABLE, or the job was
 * already interrupted SPYRE_MAX_REPLAYS times: then its fence ends with
 * -ECANCELED, and no context is marked.  Jobs of a context already in
 * error are cancelled.  The fences stay the same: waiters see nothing of
 * the reset but the time it took.  Nothing here allocates or waits.
 */
void spyre_queue_replay(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	struct spyre_fence *f, *tmp;
	unsigned int replayed = 0;
	bool guilty = atomic_read(&q->ctx->error);
	unsigned long flags;
	u32 status;
	u64 done;

	lockdep_assert_held_write(&sdev->reset_sem);

	/*
	 * Jobs the card ended after the snapshot keep their result; a failure
	 * record may be torn by the reset, so only the jobs before it count,
	 * and a record out of range counts for nothing.
	 */
	done = le64_to_cpu(READ_ONCE(q->compl->seqno));
	rmb(); /* the seqno is written last */
	status = le32_to_cpu(READ_ONCE(q->compl->status));
	if (done <= q->written && done >= q->signalled &&
	    spyre_status_known(status) && (status == SPYRE_STATUS_OK || done))
		spyre_queue_signal(q, status == SPYRE_STATUS_OK ? done : done - 1,
				   0, NULL);

	spin_lock_irqsave(&q->fence_lock, flags);
	list_for_each_entry_safe(f, tmp, &q->pending, link) {
		struct spyre_job *job = f->job;
		u64 from = max(f->first_seqno, q->signalled + 1);
		u64 s, last = min(q->started, f->base.seqno);
		bool rerun = !guilty;

		for (s = from; rerun && s <= last; s++)
			rerun = job->descs[s - f->first_seqno].restartable;
		/* A job that keeps being interrupted is not rerun forever. */
		if (rerun && from <= last && ++job->replays > SPYRE_MAX_REPLAYS)
			rerun = false;
		if (!rerun) {
			/* Counted before the signal its waiter may act on. */
			if (!guilty)
				atomic64_inc(&sdev->health.jobs_lost);
			spyre_fence_complete(q, f, -ECANCELED);
			continue;
		}
		q->tail = (q->tail + spyre_ring_fill(q, job,
						     from - f->first_seqno)) &
			  (q->entries - 1);
		job->progress = from - 1;
		/* Jobs run_job left to the replay are written now. */
		if (f->base.seqno > q->written)
			WRITE_ONCE(q->written, f->base.seqno);
		replayed++;
	}
	q->started = 0;
	q->parked = false;
	WRITE_ONCE(q->corrupt, false);
	spyre_ring_doorbell(q);
	spin_unlock_irqrestore(&q->fence_lock, flags);

	atomic64_add(replayed, &sdev->health.jobs_replayed);
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

/* ---- Scheduler backend ------------------------------------------------ */

/*
 * Hand the descriptors written since the last doorbell to the card.
 * Caller: inside drm_dev_enter(), holding q->fence_lock, with the queue
 * not parked (run_job) or being unparked (the replay).
 */
static void spyre_ring_doorbell(struct spyre_queue *q)
{
	lockdep_assert_held(&q->fence_lock);
	if (q->db_tail == q->tail)
		return;
	dma_wmb(); /* descriptors before doorbell */
	spyre_write32(q->sdev, spyre_qreg(q, SPYRE_Q_DOORBELL), q->tail);
	q->db_tail = q->tail;
}

/*
 * A fence signalling section: no allocation, no sleeping lock.  The job's
 * fence was allocated at SUBMIT; the ring is written under q->fence_lock,
 * and not at all while a reset has the queue parked (the replay writes
 * it then).
 */
static struct dma_fence *spyre_job_run(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_queue *q = job->queue;
	struct spyre_device *sdev = q->sdev;
	struct spyre_fence *f = job->hw_fence;
	u64 first = job->seqno - job->ndesc + 1;
	struct dma_fence *fence;
	unsigned long flags;
	bool cookie;
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
	}

	/*
	 * A dead queue was taken off the card with the descriptors it held;
	 * a context in error runs no more jobs.
	 */
	if (READ_ONCE(q->dead) || atomic_read(&q->ctx->error))
		return ERR_PTR(-ECANCELED);

	cookie = dma_fence_begin_signalling();
	if (!drm_dev_enter(&sdev->drm, &idx)) {
		fence = ERR_PTR(-ENODEV);
		goto out;
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
		goto exit;
	}
	spin_lock_init(&f->lock);
	INIT_LIST_HEAD(&f->link);
	f->first_seqno = first;
	f->job = job;
	dma_fence_init(&f->base, &spyre_fence_ops, &f->lock, q->fence_ctx,
		       job->seqno);
	spyre_live_inc(fences);
	job->fence_init = true;
	job->progress = first - 1;
	dma_fence_get(&f->base);	/* for the pending list */
	list_add_tail(&f->link, &q->pending);
	if (!q->parked) {
		/* In free slots: the scheduler's credits are ring slots. */
		spyre_ring_fill(q, job, 0);
		q->tail = (q->tail + job->ndesc) & (q->entries - 1);
		WRITE_ONCE(q->written, job->seqno);
		spyre_ring_doorbell(q);
	}
	spin_unlock_irqrestore(&q->fence_lock, flags);
	if (trace_spyre_job_run_enabled())
		trace_spyre_job_run(sdev->drm.dev, q->ctx->id, q->hwq,
				    job->seqno, spyre_read64(sdev, SPYRE_REG_CLOCK));
	spyre_poll_arm(sdev);
	fence = dma_fence_get(&f->base);	/* for the scheduler */
exit:
	drm_dev_exit(idx);
out:
	dma_fence_end_signalling(cookie);
	return fence;
}

/*
 * The queue's scheduler is stopped (drm_sched_wqueue_stop()) before the
 * signalling section starts and stopped for good (drm_sched_stop(), which
 * waits on fences) after it ends: the section covers the decision and the
 * fences it signals, and neither allocates (the devcoredump buffer was
 * allocated ahead) nor waits for a reset to end (a card out of service is
 * not judged: the job gets another period).
 */
static enum drm_gpu_sched_stat
spyre_job_timedout(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_queue *q = job->queue;
	struct spyre_device *sdev = q->sdev;
	bool hw = false, kicked = false, blocked, cookie;
	int idx;

	trace_spyre_job_timeout(sdev->drm.dev, q->ctx->id, q->hwq, job->seqno);
	mutex_lock(&q->reset_lock);
	drm_sched_wqueue_stop(q->sched);

	cookie = dma_fence_begin_signalling();
	down_read(&sdev->reset_sem);
	blocked = READ_ONCE(sdev->hw_blocked);
	if (!blocked && drm_dev_enter(&sdev->drm, &idx)) {
		hw = true;
		/*
		 * A card that stopped on a fatal error is not hung by this
		 * job: the recovery (queued already, or now) replays it.
		 */
		if (READ_ONCE(sdev->recovery_reason) ||
		    spyre_read32(sdev, SPYRE_REG_STATUS) & SPYRE_DEV_STATUS_FATAL) {
			spyre_recover(sdev, SPYRE_RECOVER_FATAL);
			kicked = true;
		}
		/* A late or lost interrupt is not a hang. */
		if (q->hw_active)
			spyre_queue_irq(q);
		/*
		 * Nor a job of several descriptors that has ended some since
		 * the last look: each gets its own run time.
		 */
		if (job->fence_init) {
			u64 done = le64_to_cpu(READ_ONCE(q->compl->seqno));

			if (done > job->progress && done < job->seqno) {
				job->progress = done;
				kicked = true;
			}
		}
	}

	if (blocked || !job->fence_init || kicked ||
	    dma_fence_is_signaled(&job->hw_fence->base)) {
		if (hw)
			drm_dev_exit(idx);
		up_read(&sdev->reset_sem);
		dma_fence_end_signalling(cookie);
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
		drm_sched_stop(q->sched, sched_job);
		drm_sched_resubmit_jobs(q->sched);
		drm_sched_start(q->sched);
		mutex_unlock(&q->reset_lock);
		return DRM_GPU_SCHED_STAT_NOMINAL;
	}

	dev_warn_ratelimited(sdev->drm.dev,
			     "queue %u (ctx %u): job %llu timed out, resetting queue; context marked guilty\n",
			     q->hwq, q->ctx->id, job->seqno);
	atomic64_inc(&sdev->health.hangs);

	/*
	 * The context is guilty: its queues never run again.  Take this one
	 * out of interrupt dispatch so that the ABORTED record the reset
	 * produces does not race with the errors chosen here.  A queue that
	 * will not stop takes the whole card down: the recovery resets it
	 * and replays the other queues' jobs.
	 */
	spyre_ctx_set_error(q->ctx, -ETIMEDOUT);
	if (hw)
		spyre_coredump(sdev, "hang", q, job);
	if (q->hw_active) {
		unsigned long flags;

		spin_lock_irqsave(&sdev->hwq_lock, flags);
		sdev->hwq[q->hwq] = NULL;
		spin_unlock_irqrestore(&sdev->hwq_lock, flags);
	}
	if (hw) {
		if (q->hw_active && spyre_hwq_reset(q))
			spyre_recover(sdev, SPYRE_RECOVER_HANG);
		drm_dev_exit(idx);
	}
	up_read(&sdev->reset_sem);

	spyre_queue_cancel(q, job->hw_fence, -ETIMEDOUT, -ECANCELED);
	dma_fence_end_signalling(cookie);

	drm_sched_stop(q->sched, sched_job);
	drm_sched_start(q->sched);
	mutex_unlock(&q->reset_lock);

	return hw ? DRM_GPU_SCHED_STAT_NOMINAL : DRM_GPU_SCHED_STAT_ENODEV;
}

/**
 * spyre_job_release() - free a job and drop what it holds.
 * @job: job, no longer known to the scheduler (freed, or never pushed).
 *
 * Drops the job's BO and mapping references, its hardware fence (or the
 * memory for it), and its queue reference.
 */
void spyre_job_release(struct spyre_job *job)
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
	spyre_live_dec(jobs);
	atomic_dec(&q->sdev->tel.jobs_in_flight);
	spyre_queue_put(q);
}

static void spyre_job_free(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);

	drm_sched_job_cleanup(sched_job);
	spyre_job_release(job);
}

const struct drm_sched_backend_ops spyre_sched_ops = {
	.run_job = spyre_job_run,
	.timedout_job = spyre_job_timedout,
	.free_job = spyre_job_free,
};
