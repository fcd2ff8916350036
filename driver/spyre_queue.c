// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: queues.
 *
 * A user queue (QUEUE_CREATE) takes one hardware queue of the card for
 * its lifetime: a ring of job descriptors and a completion record in
 * kernel-owned coherent DMA memory, programmed into the queue's register
 * page, one drm_sched entity on that hardware queue's drm_gpu_scheduler
 * (the backend is in spyre_job.c), and a completion MSI-X vector whose
 * managed affinity holds the creating CPU.  The schedulers, one per
 * hardware queue, live as long as the DRM device: the fences a job hands
 * out (sync_file, syncobj) name their scheduler and may outlive the
 * queue.  This file owns the schedulers, the queue's lifetime (create,
 * destroy, the references jobs hold), programming the hardware queue and
 * bringing every queue back after a PCI function reset, and the queue
 * ioctls.
 *
 * Paths that program the card hold sdev->reset_sem for reading and are
 * inside drm_dev_enter(); teardown takes q->reset_lock against the
 * timeout handler.
 */

#include <linux/capability.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/spyre_accel.h>

#include <drm/spyre_cmd.h>
#include "spyre_drv.h"
#include "spyre_job.h"
#include "spyre_mmu.h"
#include "spyre_queue.h"

/* QUEUE_CREATE's priority goes into SPYRE_Q_CONTROL_PRIO as it is. */
static_assert(DRM_SPYRE_PRIORITY_LOW == SPYRE_Q_PRIO_LOW);
static_assert(DRM_SPYRE_PRIORITY_NORMAL == SPYRE_Q_PRIO_NORMAL);
static_assert(DRM_SPYRE_PRIORITY_HIGH == SPYRE_Q_PRIO_HIGH);

#define SPYRE_Q_RESET_TIMEOUT_US	USEC_PER_SEC
#define SPYRE_IDLE_TIMEOUT_MS		10000

/*
 * ---- Hardware queue programming ------------------------------------------
 * Callers are inside drm_dev_enter() and hold sdev->reset_sem (for reading,
 * or for writing in a reset).
 */

/**
 * spyre_hwq_fold_busy() - keep the card's BUSY_NS of a queue before the
 * card clears it (queue or card reset).
 * @q: queue; the caller is inside drm_dev_enter() and holds reset_sem.
 */
void spyre_hwq_fold_busy(struct spyre_queue *q)
{
	atomic64_add(spyre_read64(q->sdev, spyre_qreg(q, SPYRE_Q_BUSY_NS)),
		     &q->busy_base);
}

/**
 * spyre_queue_busy_ns() - card time the queue has been busy, ns.
 * @q: queue programmed on the card; the caller is inside drm_dev_enter().
 *
 * A sample: a reset folding the register meanwhile may count a job twice.
 *
 * Return: the sum of the run times of the queue's jobs that ended.
 */
u64 spyre_queue_busy_ns(struct spyre_queue *q)
{
	return atomic64_read(&q->busy_base) +
	       spyre_read64(q->sdev, spyre_qreg(q, SPYRE_Q_BUSY_NS));
}

/**
 * spyre_hwq_reset() - reset a hardware queue and wait until it is idle.
 * @q: queue; the caller is inside drm_dev_enter().
 *
 * Return: 0, or -ETIMEDOUT if the card did not stop the queue in time.
 */
int spyre_hwq_reset(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	u32 st;
	int ret;

	lockdep_assert_held(&sdev->reset_sem);

	spyre_hwq_fold_busy(q);
	spyre_write32(sdev, spyre_qreg(q, SPYRE_Q_RESET), 1);
	ret = readl_poll_timeout(sdev->regs + spyre_qreg(q, SPYRE_Q_STATUS), st,
				 st != SPYRE_QS_BUSY && st != SPYRE_QS_SEM_WAIT,
				 10, SPYRE_Q_RESET_TIMEOUT_US);
	if (ret)
		drm_err(&sdev->drm, "queue %u: reset timed out (status %u)\n",
			q->hwq, st);
	return ret;
}

static bool spyre_vector_has_cpu(struct spyre_device *sdev, unsigned int v,
				 unsigned int cpu)
{
	const struct cpumask *mask = pci_irq_get_affinity(sdev->pdev, v);

	return mask && cpumask_test_cpu(cpu, mask);
}

/*
 * The completion vector for hardware queue @hwq: one of those whose
 * (managed) affinity holds the CPU creating the queue, the queues of a CPU
 * spread over its vectors by @hwq, so that a completion interrupt lands
 * on the CPU its submitter most likely runs on.  Without affinity
 * information (a single vector, or the CPU in none of the masks), any
 * completion vector by @hwq.  The CPU is a hint: the creator may migrate.
 */
static unsigned int spyre_queue_vector(struct spyre_device *sdev, u32 hwq)
{
	unsigned int cpu = raw_smp_processor_id();
	unsigned int v, n = 0, k;

	for (v = SPYRE_ERROR_VECTOR + 1; v < sdev->nvec; v++)
		n += spyre_vector_has_cpu(sdev, v, cpu);
	if (!n)
		return SPYRE_ERROR_VECTOR + 1 + hwq % (sdev->nvec - 1);
	k = hwq % n;
	for (v = SPYRE_ERROR_VECTOR + 1; v < sdev->nvec; v++)
		if (spyre_vector_has_cpu(sdev, v, cpu) && !k--)
			break;
	return v;
}

static int spyre_hwq_program(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;
	int ret;

	lockdep_assert_held(&sdev->reset_sem);

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
	return 0;
}

static void spyre_hwq_disable(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;

	lockdep_assert_held(&sdev->reset_sem);

	spyre_hwq_reset(q);
	spyre_write32(sdev, spyre_qreg(q, SPYRE_Q_CONTROL), 0);
	spyre_write64(sdev, spyre_qreg(q, SPYRE_Q_RING_BASE), 0);
	spyre_write64(sdev, spyre_qreg(q, SPYRE_Q_COMPL_ADDR), 0);
}

/**
 * spyre_queues_restore_hw() - bring every queue back after a card reset.
 * @sdev: device; the caller holds @sdev->reset_sem for writing, is inside
 *	drm_dev_enter(), took spyre_queue_snapshot() of each queue before
 *	the reset and has reset the card.
 *
 * Each queue is programmed again with an empty ring and its unfinished
 * jobs are put back on it (spyre_queue_replay()); its job timeout starts
 * again.  A queue the card will not take back fails its context (-EIO).
 */
void spyre_queues_restore_hw(struct spyre_device *sdev)
{
	unsigned int i;

	lockdep_assert_held_write(&sdev->reset_sem);

	/* hwq[] changes only under reset_sem: it is stable here. */
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_queue *q = sdev->hwq[i];

		if (!q)
			continue;
		if (spyre_hwq_program(q))
			spyre_ctx_set_error(q->ctx, -EIO);
		spyre_queue_replay(q);
		drm_sched_resume_timeout(q->sched,
					 msecs_to_jiffies(spyre_job_timeout_ms));
	}
}

/* ---- Schedulers, one per hardware queue ------------------------------- */

static void spyre_hwq_sched_fini(struct drm_device *drm, void *arg)
{
	struct spyre_device *sdev = to_spyre_device(drm);
	unsigned int i;

	/* Every file is closed: its queues are gone and their jobs freed. */
	for (i = 0; i < sdev->num_queues; i++)
		drm_sched_fini(&sdev->hwq_sched[i].base);
}

/**
 * spyre_hwq_sched_init() - set up the scheduler of every hardware queue.
 * @sdev: device being probed; num_queues and submit_wq are set.
 *
 * Each scheduler takes up to SPYRE_RING_ENTRIES - 1 descriptors (credits)
 * at a time and times jobs out after the job_timeout_ms module parameter
 * (bounded: every job ends).  They are finalised when the DRM device is released,
 * after its last file closed.
 *
 * Return: 0, -ENOMEM, or drm_sched_init()'s error.
 */
int spyre_hwq_sched_init(struct spyre_device *sdev)
{
	long timeout = msecs_to_jiffies(spyre_job_timeout_ms);
	struct drm_device *drm = &sdev->drm;
	unsigned int i;
	int ret;

	sdev->hwq_sched = drmm_kcalloc(drm, sdev->num_queues,
				       sizeof(*sdev->hwq_sched), GFP_KERNEL);
	if (!sdev->hwq_sched)
		return -ENOMEM;
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_hwq_sched *s = &sdev->hwq_sched[i];

		snprintf(s->name, sizeof(s->name), "spyre-q%u", i);
		ret = drm_sched_init(&s->base, &spyre_sched_ops,
				     sdev->submit_wq, 1, SPYRE_RING_ENTRIES - 1,
				     0, timeout, sdev->reset_wq, NULL, s->name,
				     drm->dev);
		if (ret) {
			while (i--)
				drm_sched_fini(&sdev->hwq_sched[i].base);
			return ret;
		}
	}
	return drmm_add_action_or_reset(drm, spyre_hwq_sched_fini, NULL);
}

/* ---- Queue lifetime -------------------------------------------------- */

static void spyre_queue_release(struct kref *ref)
{
	struct spyre_queue *q = container_of(ref, struct spyre_queue, ref);

	spyre_ctx_put(q->ctx);
	mutex_destroy(&q->lock);
	mutex_destroy(&q->reset_lock);
	kfree(q);
	spyre_live_dec(queues);
	/* Jobs killed after their file closed still call into this module. */
	module_put(THIS_MODULE);
}

/**
 * spyre_queue_put() - drop a queue reference.
 * @q: queue.
 */
void spyre_queue_put(struct spyre_queue *q)
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

	spyre_hw_read_lock(sdev);
	spin_lock_irqsave(&sdev->hwq_lock, flags);
	sdev->hwq[q->hwq] = NULL;
	spin_unlock_irqrestore(&sdev->hwq_lock, flags);

	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_hwq_disable(q);
		drm_dev_exit(idx);
	}
	q->hw_active = false;
	/* The file's fdinfo keeps counting what its queues did. */
	atomic64_add(atomic64_xchg(&q->busy_base, 0), &q->ctx->busy_ns);
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
 * card are aborted (-ECANCELED), jobs the scheduler still holds are killed
 * by it (-ESRCH, once their in-fences signal), and every fence signals.
 * Jobs keep the queue memory alive.
 */
static void spyre_queue_destroy(struct spyre_queue *q)
{
	struct spyre_device *sdev = q->sdev;

	mutex_lock(&q->lock);
	q->dead = true;
	mutex_unlock(&q->lock);

	if (q->entity_ready) {
		mutex_lock(&q->reset_lock);
		drm_sched_wqueue_stop(q->sched);
		spyre_queue_hw_fini(q);
		spyre_queue_cancel(q, NULL, 0, -ECANCELED);
		drm_sched_wqueue_start(q->sched);
		mutex_unlock(&q->reset_lock);

		/*
		 * Jobs the scheduler has not handed to run_job yet are killed
		 * by drm_sched_entity_fini() (-ESRCH, once their in-fences
		 * signal); run_job cancels any it still sees (-ECANCELED).
		 */
		drm_sched_entity_fini(&q->entity);

		/*
		 * The scheduler stays (the next queue on this hardware queue
		 * uses it); none of this queue's jobs may be left on it.
		 */
		if (!wait_event_timeout(q->idle_wq, !atomic_read(&q->jobs_ran),
					msecs_to_jiffies(SPYRE_IDLE_TIMEOUT_MS)))
			drm_warn(&sdev->drm, "queue %u: jobs not freed\n",
				 q->hwq);
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

	/* The card's layouts (hw/spyre_hw.h). */
	BUILD_BUG_ON(sizeof(struct spyre_hw_job) != 64);
	BUILD_BUG_ON(sizeof(struct spyre_hw_completion) != 64);
	BUILD_BUG_ON(!is_power_of_2(SPYRE_RING_ENTRIES));

	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return ERR_PTR(-ENOMEM);
	spyre_live_inc(queues);

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
	q->vector = spyre_queue_vector(sdev, q->hwq);
	q->sched = &sdev->hwq_sched[q->hwq].base;

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

	q->sched_list[0] = q->sched;
	ret = drm_sched_entity_init(&q->entity, DRM_SCHED_PRIORITY_KERNEL,
				    q->sched_list, 1, NULL);
	if (ret)
		goto err;
	q->entity_ready = true;

	spyre_hw_read_lock(sdev);
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
	unsigned int cap;
	u32 id;
	int idx, ret;

	if (args->flags || args->pad ||
	    args->priority > DRM_SPYRE_PRIORITY_HIGH)
		return -EINVAL;
	/* The card serves HIGH first: as panthor, only with privilege. */
	if (args->priority == DRM_SPYRE_PRIORITY_HIGH && !capable(CAP_SYS_NICE))
		return -EACCES;

	/* Fair sharing: one file holds at most max_queues_per_file. */
	cap = READ_ONCE(spyre_max_queues_per_file);
	if (atomic_inc_return(&sfile->nqueues) > cap && cap) {
		atomic_dec(&sfile->nqueues);
		return -EDQUOT;
	}
	if (!drm_dev_enter(drm, &idx)) {
		atomic_dec(&sfile->nqueues);
		return -ENODEV;
	}

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
	if (ret)
		atomic_dec(&sfile->nqueues);
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

	mutex_lock(&sfile->lock);
	q = xa_erase(&sfile->queues, args->queue_id);
	mutex_unlock(&sfile->lock);
	if (!q)
		return -ENOENT;
	atomic_dec(&sfile->nqueues);

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

/**
 * spyre_queue_lookup() - find a queue of a file by id.
 * @sfile: file.
 * @id: queue id (from QUEUE_CREATE).
 *
 * Return: the queue with a reference taken (spyre_queue_put() it), or
 * NULL if the file has no such queue.
 */
struct spyre_queue *spyre_queue_lookup(struct spyre_file *sfile, u32 id)
{
	struct spyre_queue *q;

	xa_lock(&sfile->queues);
	q = xa_load(&sfile->queues, id);
	if (q)
		kref_get(&q->ref);
	xa_unlock(&sfile->queues);
	return q;
}
