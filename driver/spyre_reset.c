// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: resets and recovery.
 *
 * Owns what happens when the card has to be reset, whoever asks: the PCI
 * function-reset handlers (sysfs "reset", AER), the driver's own recovery
 * through the card's RESET register (on a fatal error, a queue that will
 * not stop, a completion record that cannot be trusted), the poll that
 * finds completions whose interrupt was lost, the devcoredump, and the
 * uevent that announces a reset.
 *
 * Every reset goes the same way, with sdev->reset_sem held for writing so
 * that nothing else programs the card meanwhile:
 *  1. spyre_reset_begin(), while the card still decodes: no error
 *     interrupts, no job starts (CONTROL), each queue's completion record
 *     processed and how far the card got noted (spyre_queue_snapshot());
 *  2. the reset: the PCI core's FLR, or the RESET register;
 *  3. spyre_reset_end(): the card enabled again, the contexts' page-table
 *     roots and the queues programmed again, each queue's unfinished jobs
 *     put back on its ring (spyre_queue_replay(): not started ones and
 *     restartable interrupted ones rerun, other interrupted ones end with
 *     -ECANCELED); counted, announced, and the poll re-armed.
 * No context is marked by a reset: only the timeout handler (a hang) and
 * the card's own job errors make a context guilty.
 *
 * System sleep (spyre_pm.c) goes the same way.
 *
 * Recovery runs from a work item, not from the interrupt or the timeout
 * handler, and resets through the card's register rather than
 * pci_reset_function(): the latter takes the device lock, which remove()
 * holds while it waits for this work.
 *
 * A reset signals fences (it ends lost jobs, and the replayed ones end
 * later), so it is a fence signalling section (dma_fence_begin_signalling()):
 * nothing in it allocates memory with a reclaiming GFP or waits for
 * something that could.  The devcoredump is filled into a buffer allocated
 * ahead, and handed to dev_coredumpv() by @report_work, which also sends
 * the uevents and allocates the next buffer, outside any section.
 */

#include <linux/devcoredump.h>
#include <linux/dma-fence.h>
#include <linux/dma-resv.h>
#include <linux/highmem.h>
#include <linux/kobject.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_job.h"
#include "spyre_mmu.h"
#include "spyre_queue.h"
#include "spyre_reset.h"
#include "spyre_trace.h"

/* A devcoredump is at most this big; command streams are cut short. */
#define SPYRE_DUMP_SIZE		(256 * 1024)
#define SPYRE_DUMP_STREAM_MAX	4096
#define SPYRE_DUMP_DESCS_MAX	4

static const char *const spyre_reason_names[SPYRE_RESET_REASONS] = {
	[SPYRE_RECOVER_FATAL] = "fatal",
	[SPYRE_RECOVER_HANG] = "hang",
	[SPYRE_RECOVER_CORRUPT] = "corrupt",
	[SPYRE_RESET_FUNCTION] = "function",
	[SPYRE_RESET_AER] = "aer",
	[SPYRE_RESET_RESUME] = "resume",
};

/* ---- devcoredump ------------------------------------------------------- */

/* @len bytes at @off of a shmem BO whose pages are pinned, into @dst. */
static void spyre_dump_copy(struct spyre_bo *bo, u64 off, void *dst, u32 len)
{
	while (len) {
		u32 n = min_t(u32, len, PAGE_SIZE - offset_in_page(off));
		void *src = kmap_local_page(bo->shmem.pages[off >> PAGE_SHIFT]);

		memcpy(dst, src + offset_in_page(off), n);
		kunmap_local(src);
		dst += n;
		off += n;
		len -= n;
	}
}

static void spyre_dump_stream(struct drm_printer *p, struct spyre_job *job,
			      u64 va, u32 size)
{
	u32 i, off;

	size = min_t(u32, size, SPYRE_DUMP_STREAM_MAX);
	for (i = 0; i < job->bo_count; i++) {
		struct drm_gem_object *obj = job->bos[i].obj;
		struct spyre_bo *bo = to_spyre_bo(obj);
		u64 start = job->bos[i].vma->node.start;

		if (va < start || va - start > obj->size ||
		    size > obj->size - (va - start))
			continue;
		if (bo->placement != DRM_SPYRE_PLACEMENT_SYSTEM) {
			drm_printf(p, "    (BO placement %u, not captured)\n",
				   bo->placement);
			return;
		}
		/* Never wait for a BO here: its holder may wait for us. */
		if (!dma_resv_trylock(obj->resv)) {
			drm_printf(p, "    (BO locked, not captured)\n");
			return;
		}
		/* Pinned pages only: a mapping would allocate. */
		if (!bo->shmem.pages) {
			dma_resv_unlock(obj->resv);
			drm_printf(p, "    (BO pages not pinned, not captured)\n");
			return;
		}
		for (off = 0; off < size; off += 16) {
			__le32 w[4] = { 0 };

			spyre_dump_copy(bo, va - start + off, w,
					min_t(u32, 16, size - off));
			drm_printf(p, "    %04x: %08x %08x %08x %08x\n", off,
				   le32_to_cpu(w[0]), le32_to_cpu(w[1]),
				   le32_to_cpu(w[2]), le32_to_cpu(w[3]));
		}
		dma_resv_unlock(obj->resv);
		return;
	}
	drm_printf(p, "    (no BO of the job holds it)\n");
}

static void spyre_dump_job(struct drm_printer *p, struct spyre_job *job)
{
	u64 first = job->seqno - job->ndesc + 1;
	u32 i;

	drm_printf(p, "  job seqno %llu..%llu, %u BOs\n", first, job->seqno,
		   job->bo_count);
	for (i = 0; i < job->ndesc; i++) {
		const struct spyre_job_desc *d = &job->descs[i];

		drm_printf(p, "  descriptor seqno %llu cmd_va %#llx cmd_size %u%s\n",
			   first + i, d->cmd_va, d->cmd_size,
			   d->restartable ? " restartable" : "");
		if (i < SPYRE_DUMP_DESCS_MAX) {
			drm_printf(p, "   command stream:\n");
			spyre_dump_stream(p, job, d->cmd_va, d->cmd_size);
		}
	}
}

static void spyre_dump_compl(struct drm_printer *p, const char *what,
			     const struct spyre_hw_completion *c)
{
	drm_printf(p, "  %s seqno %llu status %u offset %u va %#llx start %llu end %llu\n",
		   what, le64_to_cpu(c->seqno), le32_to_cpu(c->status),
		   le32_to_cpu(c->cmd_offset), le64_to_cpu(c->error_va),
		   le64_to_cpu(c->start_ns), le64_to_cpu(c->end_ns));
	if (c->detail || c->detail2)
		drm_printf(p, "    detail %#llx detail2 %#llx\n",
			   le64_to_cpu(c->detail), le64_to_cpu(c->detail2));
}

/*
 * One queue: its registers, its record, the records it processed last, and
 * @job (or else the first job still pending, which the card was on).  The
 * caller keeps @job alive: it is the timeout handler's, or the card is
 * stopped and reset_sem held for writing, so no pending fence signals.
 */
static void spyre_dump_queue(struct drm_printer *p, struct spyre_queue *q,
			     struct spyre_job *job)
{
	struct spyre_device *sdev = q->sdev;
	struct spyre_hw_completion hist[SPYRE_COMPL_HISTORY];
	unsigned long flags;
	u32 i, next;

	drm_printf(p, "queue %u ctx %u priority %u vector %u entries %u\n",
		   q->hwq, q->ctx->id, q->priority, q->vector, q->entries);
	drm_printf(p, "  driver: next_seqno %llu written %llu signalled %llu tail %u doorbell %u\n",
		   q->next_seqno, READ_ONCE(q->written),
		   READ_ONCE(q->signalled), q->tail, q->db_tail);
	drm_printf(p, "  card: status %u head %u last_seqno %llu control %#x\n",
		   spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_STATUS)),
		   spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_HEAD)),
		   spyre_read64(sdev, spyre_qreg(q, SPYRE_Q_LAST_SEQNO)),
		   spyre_read32(sdev, spyre_qreg(q, SPYRE_Q_CONTROL)));
	spyre_dump_compl(p, "record", q->compl);

	spin_lock_irqsave(&q->fence_lock, flags);
	memcpy(hist, q->history, sizeof(hist));
	next = q->history_next;
	if (!job && !list_empty(&q->pending))
		job = list_first_entry(&q->pending, struct spyre_fence,
				       link)->job;
	spin_unlock_irqrestore(&q->fence_lock, flags);
	for (i = 0; i < SPYRE_COMPL_HISTORY; i++) {
		const struct spyre_hw_completion *c =
			&hist[(next + i) % SPYRE_COMPL_HISTORY];

		if (c->seqno)
			spyre_dump_compl(p, "recent", c);
	}
	if (job)
		spyre_dump_job(p, job);
}

/**
 * spyre_coredump() - record what the card was doing, as a devcoredump.
 * @sdev: device; the caller is inside drm_dev_enter() and holds
 *	sdev->reset_sem (either way).
 * @reason: "hang" or "fatal".
 * @q: the hung queue, or NULL for every active queue.
 * @job: the hung job (kept alive by the caller), or NULL.
 *
 * The dump is text: the card's global state, the driver's last fault
 * records, and per queue its registers, completion records and the job it
 * was on with its descriptors and command streams (shmem BOs; other
 * placements are named but not captured).  The kernel keeps one dump per
 * device until it is read and deleted (a write to its data file) or times
 * out; a dump made meanwhile is dropped.
 *
 * Called in fence signalling sections: it fills the buffer allocated
 * ahead (none ready: no dump) and leaves dev_coredumpv(), which
 * allocates, to @report_work.
 */
void spyre_coredump(struct spyre_device *sdev, const char *reason,
		    struct spyre_queue *q, struct spyre_job *job)
{
	struct drm_print_iterator iter = { .remain = SPYRE_DUMP_SIZE };
	struct drm_printer p;
	unsigned int i;

	if (test_and_set_bit(0, &sdev->dump_busy))
		return;
	iter.data = sdev->dump_buf;
	if (!iter.data) {
		clear_bit(0, &sdev->dump_busy);
		return;
	}
	p = drm_coredump_printer(&iter);

	drm_printf(&p, "spyre devcoredump\nreason: %s\n", reason);
	drm_printf(&p, "card: status %#x irq %#x control %#x clock %llu jobs %llu faults %llu\n",
		   spyre_read32(sdev, SPYRE_REG_STATUS),
		   spyre_read32(sdev, SPYRE_REG_IRQ_STATUS),
		   spyre_read32(sdev, SPYRE_REG_CONTROL),
		   spyre_read64(sdev, SPYRE_REG_CLOCK),
		   spyre_read64(sdev, SPYRE_REG_TEL_JOBS),
		   spyre_read64(sdev, SPYRE_REG_TEL_FAULTS));
	drm_printf(&p, "driver: faults %lld lost %lld resets %lld hangs %lld lost_irqs %lld\n",
		   atomic64_read(&sdev->faults),
		   atomic64_read(&sdev->faults_lost),
		   atomic64_read(&sdev->health.resets),
		   atomic64_read(&sdev->health.hangs),
		   atomic64_read(&sdev->health.lost_irqs));

	if (q) {
		spyre_dump_queue(&p, q, job);
	} else {
		for (i = 0; i < sdev->num_queues; i++)
			if (sdev->hwq[i])
				spyre_dump_queue(&p, sdev->hwq[i], NULL);
	}

	sdev->dump_len = SPYRE_DUMP_SIZE - iter.remain;
	set_bit(1, &sdev->dump_busy);
	queue_work(system_wq, &sdev->report_work);
}

/*
 * The work of the fence paths that allocates: a filled dump goes to
 * dev_coredumpv() (which frees it) and the next buffer is allocated; the
 * resets since the last run are announced, one uevent per reason.
 */
static void spyre_report_work(struct work_struct *work)
{
	struct spyre_device *sdev = container_of(work, struct spyre_device,
						 report_work);
	unsigned long pending = xchg(&sdev->uevent_pending, 0);
	char reason_env[32];
	char *envp[3];
	unsigned int r;
	int idx;

	/* Bit 0: the buffer is taken; bit 1: it holds a dump. */
	if (test_bit(1, &sdev->dump_busy)) {
		void *buf = sdev->dump_buf;

		sdev->dump_buf = vzalloc(SPYRE_DUMP_SIZE);
		dev_coredumpv(sdev->drm.dev, buf, sdev->dump_len, GFP_KERNEL);
		clear_bit(1, &sdev->dump_busy);
		clear_bit_unlock(0, &sdev->dump_busy);
	} else if (!sdev->dump_buf && !test_and_set_bit(0, &sdev->dump_busy)) {
		sdev->dump_buf = vzalloc(SPYRE_DUMP_SIZE);
		clear_bit_unlock(0, &sdev->dump_busy);
	}

	/* The accel device is gone once the card is unplugged. */
	if (!pending || !drm_dev_enter(&sdev->drm, &idx))
		return;
	for_each_set_bit(r, &pending, SPYRE_RESET_REASONS) {
		snprintf(reason_env, sizeof(reason_env), "SPYRE_REASON=%s",
			 spyre_reason_names[r]);
		envp[0] = "RESET=1";
		envp[1] = reason_env;
		envp[2] = NULL;
		kobject_uevent_env(&sdev->drm.accel->kdev->kobj, KOBJ_CHANGE,
				   envp);
	}
	drm_dev_exit(idx);
}

/* ---- Reset ------------------------------------------------------------- */

/**
 * spyre_reset_begin() - step 1 of a reset: stop the card starting jobs and
 * note how far it got on each queue.
 * @sdev: device; the caller holds reset_sem for writing and is inside
 *	drm_dev_enter().
 * @mmio: the registers can be used; without (a frozen channel) the card
 *	is not touched and the completion records alone tell.
 *
 * Every queue is parked (spyre_queue_snapshot()): run_job leaves new jobs
 * to the replay instead of writing them to the ring.
 */
void spyre_reset_begin(struct spyre_device *sdev, bool mmio)
{
	unsigned long flags;
	unsigned int i;

	lockdep_assert_held_write(&sdev->reset_sem);
	if (mmio) {
		spyre_write32(sdev, SPYRE_REG_IRQ_MASK, 0);
		spyre_write32(sdev, SPYRE_REG_CONTROL, 0);
		spyre_tel_sample(sdev);
	}

	spin_lock_irqsave(&sdev->hwq_lock, flags);
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_queue *q = sdev->hwq[i];

		if (!q)
			continue;
		if (mmio)
			spyre_queue_irq(q);
		spyre_queue_snapshot(q, mmio);
	}
	spin_unlock_irqrestore(&sdev->hwq_lock, flags);
}

/**
 * spyre_reset_end() - step 3 of a reset: reset the card through its RESET
 * register, program it again and replay the unfinished jobs.
 * @sdev: device; the caller holds reset_sem for writing, is inside
 *	drm_dev_enter() and ran spyre_reset_begin().
 * @why: the reason, for the log and the uevent (SPYRE_REASON=), which
 *	@report_work sends.
 *
 * Return: 0, or -EIO if the card did not come back (every pending fence
 * then ends with -EIO).
 */
int spyre_reset_end(struct spyre_device *sdev, enum spyre_recovery_reason why)
{
	const char *reason = spyre_reason_names[why];

	lockdep_assert_held_write(&sdev->reset_sem);
	atomic64_inc(&sdev->health.resets);
	if (spyre_hw_reset(sdev)) {
		trace_spyre_reset(sdev->drm.dev, reason, -EIO);
		/* The card is gone for good: nothing pending will end. */
		spyre_queues_cancel_all(sdev, -EIO);
		return -EIO;
	}
	trace_spyre_reset(sdev->drm.dev, reason, 0);
	spyre_hw_enable(sdev);
	spyre_ctxs_restore_hw(sdev);
	spyre_queues_restore_hw(sdev);
	drm_info(&sdev->drm, "card reset (%s), back in service\n", reason);

	set_bit(why, &sdev->uevent_pending);
	queue_work(system_wq, &sdev->report_work);
	spyre_poll_arm(sdev);
	return 0;
}

/*
 * PCI function reset (FLR through sysfs "reset", or a bus reset): the card
 * loses its registers, queues and running jobs.  reset_prepare() runs
 * before the PCI core saves the state and turns decoding off,
 * reset_done() after it restored them.  Device memory keeps its contents,
 * but while the function resets its BAR is off: CPU mappings of
 * device-memory BOs read 0 and drop writes then, and so would the clear
 * of a new device-memory BO, which therefore runs under reset_sem too
 * (spyre_devmem.c).
 */
/**
 * spyre_hw_block() - take the card out of service until spyre_hw_unblock(),
 * possibly in another task or callback.
 * @sdev: device; the caller holds reset_sem for writing (and releases it
 *	once it has quiesced the card).
 *
 * Until the matching spyre_hw_unblock(), the ioctl paths that program the
 * card wait in spyre_hw_read_lock() and the recovery work leaves the card
 * alone.  No fence path waits for a block: run_job leaves its jobs to the
 * replay (the queues are parked), the timeout handler and the poll skip
 * the card.  Blocks nest (a function reset inside a PCIe error recovery).
 * reset_sem itself is never held from one PCI or PM callback to the next:
 * they may run in other tasks (an rwsem is released by its owner only),
 * and the PCI core takes its own locks between them.  The callbacks that
 * end a block hold @sdev->hw_block_map, lockdep's view of it.
 */
void spyre_hw_block(struct spyre_device *sdev)
{
	lockdep_assert_held_write(&sdev->reset_sem);
	sdev->hw_blocked++;
}

/**
 * spyre_hw_unblock() - end one spyre_hw_block().
 * @sdev: device; the caller holds reset_sem for writing (the card is
 *	restored).
 *
 * When the last block ends, waiters go on and recovery requests made
 * meanwhile are served.  Extra calls are ignored (remove() ends every
 * block, a late resume() may follow).
 */
void spyre_hw_unblock(struct spyre_device *sdev)
{
	lockdep_assert_held_write(&sdev->reset_sem);
	if (!sdev->hw_blocked || --sdev->hw_blocked)
		return;
	wake_up_all(&sdev->hw_wq);
	if (READ_ONCE(sdev->recovery_reason))
		queue_work(sdev->reset_wq, &sdev->recovery_work);
}

static void spyre_reset_prepare(struct pci_dev *pdev)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);
	bool cookie = dma_fence_begin_signalling();
	int idx;

	down_write(&sdev->reset_sem);
	spyre_hw_block(sdev);
	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_reset_begin(sdev, true);
		drm_dev_exit(idx);
	}
	up_write(&sdev->reset_sem);
	dma_fence_end_signalling(cookie);
}

static void spyre_reset_done(struct pci_dev *pdev)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);
	bool cookie = dma_fence_begin_signalling();
	int idx;

	lock_map_acquire(&sdev->hw_block_map);
	down_write(&sdev->reset_sem);
	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_reset_end(sdev, SPYRE_RESET_FUNCTION);
		drm_dev_exit(idx);
	}
	spyre_hw_unblock(sdev);
	up_write(&sdev->reset_sem);
	lock_map_release(&sdev->hw_block_map);
	dma_fence_end_signalling(cookie);
}

/*
 * AER: the PCI core reports a PCIe error and drives the recovery.  Unlike
 * a function reset it does not call reset_prepare(): error_detected()
 * blocks the card itself (spyre_hw_block()) until resume(), or until the
 * recovery is given up (DISCONNECT: resume() is never called then).  On a
 * frozen channel the card's registers cannot be read, so what the card had
 * started is told from the completion records alone.
 * The card is always reset (slot_reset(), after the core reset the link
 * for a fatal error): its state after an error is not known.
 */
static void spyre_aer_release(struct spyre_device *sdev)
{
	if (sdev->aer_held) {
		sdev->aer_held = false;
		lock_map_acquire(&sdev->hw_block_map);
		down_write(&sdev->reset_sem);
		spyre_hw_unblock(sdev);
		up_write(&sdev->reset_sem);
		lock_map_release(&sdev->hw_block_map);
	}
}

static pci_ers_result_t spyre_error_detected(struct pci_dev *pdev,
					     pci_channel_state_t state)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);
	bool cookie;
	int idx;

	atomic64_inc(&sdev->health.aer_errors);
	drm_warn(&sdev->drm, "PCIe error (channel %s), recovering\n",
		 state == pci_channel_io_normal ? "normal" :
		 state == pci_channel_io_frozen ? "frozen" : "failed");
	if (state == pci_channel_io_perm_failure) {
		spyre_aer_release(sdev);
		return PCI_ERS_RESULT_DISCONNECT;
	}
	cookie = dma_fence_begin_signalling();
	down_write(&sdev->reset_sem);
	if (!sdev->aer_held) {
		spyre_hw_block(sdev);
		sdev->aer_held = true;
	}
	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_reset_begin(sdev, state == pci_channel_io_normal);
		drm_dev_exit(idx);
	}
	up_write(&sdev->reset_sem);
	dma_fence_end_signalling(cookie);
	return PCI_ERS_RESULT_NEED_RESET;
}

static pci_ers_result_t spyre_mmio_enabled(struct pci_dev *pdev)
{
	/* Registers work again, but the card's state is not known: reset. */
	return PCI_ERS_RESULT_NEED_RESET;
}

static pci_ers_result_t spyre_slot_reset(struct pci_dev *pdev)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);
	pci_ers_result_t res = PCI_ERS_RESULT_DISCONNECT;
	bool cookie;
	int idx;

	pci_restore_state(pdev);
	pci_save_state(pdev);
	cookie = dma_fence_begin_signalling();
	lock_map_acquire(&sdev->hw_block_map);
	down_write(&sdev->reset_sem);
	if (drm_dev_enter(&sdev->drm, &idx)) {
		if (!spyre_reset_end(sdev, SPYRE_RESET_AER))
			res = PCI_ERS_RESULT_RECOVERED;
		drm_dev_exit(idx);
	}
	up_write(&sdev->reset_sem);
	lock_map_release(&sdev->hw_block_map);
	dma_fence_end_signalling(cookie);
	if (res == PCI_ERS_RESULT_DISCONNECT)
		spyre_aer_release(sdev);
	return res;
}

static void spyre_aer_resume(struct pci_dev *pdev)
{
	spyre_aer_release(pci_get_drvdata(pdev));
}

const struct pci_error_handlers spyre_err_handlers = {
	.error_detected = spyre_error_detected,
	.mmio_enabled = spyre_mmio_enabled,
	.slot_reset = spyre_slot_reset,
	.resume = spyre_aer_resume,
	.reset_prepare = spyre_reset_prepare,
	.reset_done = spyre_reset_done,
};

static void spyre_recovery_work(struct work_struct *work)
{
	struct spyre_device *sdev = container_of(work, struct spyre_device,
						 recovery_work);
	bool cookie = dma_fence_begin_signalling();
	unsigned long why;
	int idx;

	down_write(&sdev->reset_sem);
	/* A blocked card is reset when the block ends; that requeues us. */
	if (sdev->hw_blocked)
		goto out;
	why = xchg(&sdev->recovery_reason, 0);
	if (why && drm_dev_enter(&sdev->drm, &idx)) {
		unsigned int r = __ffs(why);

		drm_warn(&sdev->drm, "recovering the card (%s)\n",
			 spyre_reason_names[r]);
		/* The hang dumped its own queue already. */
		if (why & BIT(SPYRE_RECOVER_FATAL))
			spyre_coredump(sdev, "fatal", NULL, NULL);
		spyre_reset_begin(sdev, true);
		atomic64_inc(&sdev->health.recoveries);
		spyre_reset_end(sdev, r);
		drm_dev_exit(idx);
	}
out:
	up_write(&sdev->reset_sem);
	dma_fence_end_signalling(cookie);
}

/**
 * spyre_recover() - have the card reset by the driver's recovery work.
 * @sdev: device.
 * @why: the reason (for the log, the dump and the uevent).
 *
 * Any context, including hard IRQ.  Requests made before the work runs
 * are served by one reset.
 */
void spyre_recover(struct spyre_device *sdev, enum spyre_recovery_reason why)
{
	set_bit(why, &sdev->recovery_reason);
	queue_work(sdev->reset_wq, &sdev->recovery_work);
}

/* ---- Lost interrupts --------------------------------------------------- */

/*
 * Every SPYRE_POLL_MS while jobs are pending: a record that has shown a
 * seqno beyond the last one processed for a whole period lost its
 * interrupt.  It is processed as the interrupt would have (no reset, no
 * guilty context) and counted.
 */
static void spyre_poll_work(struct work_struct *work)
{
	struct spyre_device *sdev = container_of(to_delayed_work(work),
						 struct spyre_device,
						 poll_work);
	bool busy = false, cookie = dma_fence_begin_signalling();
	unsigned long flags;
	unsigned int i;
	int idx;

	/* The section first: the resets take reset_sem inside theirs. */
	if (!drm_dev_enter(&sdev->drm, &idx))
		goto out;
	/* A reset in progress re-arms the poll when it ends. */
	if (!spyre_hw_read_trylock(sdev)) {
		drm_dev_exit(idx);
		goto out;
	}
	spin_lock_irqsave(&sdev->hwq_lock, flags);
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_queue *q = sdev->hwq[i];
		u64 seen;

		if (!q)
			continue;
		seen = le64_to_cpu(READ_ONCE(q->compl->seqno));
		/* Counted before the signal its waiter may act on. */
		if (seen > READ_ONCE(q->signalled) && seen == q->poll_seen &&
		    !READ_ONCE(q->corrupt)) {
			atomic64_inc(&sdev->health.lost_irqs);
			spyre_queue_irq(q);
		}
		q->poll_seen = seen;
		busy |= !list_empty(&q->pending);
	}
	spin_unlock_irqrestore(&sdev->hwq_lock, flags);
	up_read(&sdev->reset_sem);
	if (busy)
		spyre_poll_arm(sdev);
	drm_dev_exit(idx);
out:
	dma_fence_end_signalling(cookie);
}

/**
 * spyre_poll_arm() - make sure the lost-interrupt poll runs within
 * SPYRE_POLL_MS.
 * @sdev: device.
 *
 * Cheap when the poll is already armed (one bit test); called after every
 * doorbell.
 */
void spyre_poll_arm(struct spyre_device *sdev)
{
	if (!delayed_work_pending(&sdev->poll_work))
		queue_delayed_work(sdev->reset_wq, &sdev->poll_work,
				   msecs_to_jiffies(SPYRE_POLL_MS));
}

static void spyre_reset_release(struct drm_device *drm, void *arg)
{
	struct spyre_device *sdev = to_spyre_device(drm);

	destroy_workqueue(sdev->reset_wq);
	vfree(sdev->dump_buf);
}

/**
 * spyre_reset_init() - set up the recovery work, the poll, their
 * workqueue and the first devcoredump buffer.
 * @sdev: device, at probe.
 *
 * Return: 0 or -ENOMEM.
 */
int spyre_reset_init(struct spyre_device *sdev)
{
	static struct lock_class_key hw_block_key;

	lockdep_init_map(&sdev->hw_block_map, "spyre_hw_block", &hw_block_key,
			 0);
	INIT_WORK(&sdev->recovery_work, spyre_recovery_work);
	INIT_DELAYED_WORK(&sdev->poll_work, spyre_poll_work);
	INIT_WORK(&sdev->report_work, spyre_report_work);
	init_waitqueue_head(&sdev->hw_wq);
	sdev->reset_wq = alloc_workqueue("spyre-reset",
					 WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!sdev->reset_wq)
		return -ENOMEM;
	sdev->dump_buf = vzalloc(SPYRE_DUMP_SIZE);
	if (!sdev->dump_buf) {
		destroy_workqueue(sdev->reset_wq);
		return -ENOMEM;
	}
	return drmm_add_action_or_reset(&sdev->drm, spyre_reset_release, NULL);
}

/**
 * spyre_reset_fini() - wait for the recovery work, the poll and the
 * reports to end, and end every block.
 * @sdev: device, unplugged (neither work re-arms after drm_dev_unplug()).
 *
 * Tasks waiting in spyre_hw_read_lock() for a block that will not end
 * (the card went away during a reset, error recovery or sleep) go on and
 * find the device unplugged.
 */
void spyre_reset_fini(struct spyre_device *sdev)
{
	cancel_work_sync(&sdev->recovery_work);
	cancel_delayed_work_sync(&sdev->poll_work);
	flush_work(&sdev->report_work);
	lock_map_acquire(&sdev->hw_block_map);
	down_write(&sdev->reset_sem);
	sdev->hw_blocked = 0;
	wake_up_all(&sdev->hw_wq);
	up_write(&sdev->reset_sem);
	lock_map_release(&sdev->hw_block_map);
}
