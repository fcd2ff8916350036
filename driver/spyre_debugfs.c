// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: debugfs (under /sys/kernel/debug/accel/<PCI
 * address>/, e.g. 0000:01:00.0).
 *
 *  queues    active hardware queues with seqnos and hardware state
 *  contexts  contexts with their sticky error, faults, memory and mapped
 *            BOs
 *  memory    memory held by BOs and the device-memory allocator's state
 *  live      driver objects alive now, of all cards together (BOs,
 *            contexts, queues, jobs, fences, pinned pages), mode 0444:
 *            what a test run left behind
 *  inject    write "<hw queue> <kind> [<count>]": arm the card's fault
 *            injection (docs/spyre-hw.rst, DBG_INJECT) for the next
 *            <count> (default 1) jobs or completions of that queue; kinds:
 *            hang, error, fatal (the whole card), drop_irq, dup_irq,
 *            corrupt_seqno, corrupt_status, mmu_fault; -EAGAIN while
 *            the card is runtime-suspended
 *  signalling_alloc  (lockdep kernels only) write anything: allocate in
 *            a fence signalling section, which lockdep must report
 * The files that read the card's registers say so instead while it is
 * runtime-suspended: reading debugfs does not wake it.  Counters and
 * telemetry are in sysfs, for everyone (spyre_telemetry.c).
 */

#include <linux/debugfs.h>
#include <linux/dma-fence.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <drm/drm_debugfs.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_mmu.h"
#include "spyre_job.h"
#include "spyre_pm.h"
#include "spyre_queue.h"

static struct spyre_device *spyre_debugfs_dev(struct seq_file *m)
{
	struct drm_debugfs_entry *entry = m->private;

	return to_spyre_device(entry->dev);
}

static int spyre_debugfs_queues(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = spyre_debugfs_dev(m);
	unsigned int i;
	int idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;
	/* Reading the card's registers must not wake it. */
	if (!spyre_pm_get_if_active(sdev)) {
		seq_puts(m, "card runtime-suspended: no queues\n");
		drm_dev_exit(idx);
		return 0;
	}

	seq_puts(m, "hwq ctx prio vec submitted completed pending status head\n");
	spin_lock_irq(&sdev->hwq_lock);
	for (i = 0; i < sdev->num_queues; i++) {
		struct spyre_queue *q = sdev->hwq[i];
		struct spyre_fence *f;
		unsigned int pending = 0;

		if (!q)
			continue;

		spin_lock(&q->fence_lock);
		list_for_each_entry(f, &q->pending, link)
			pending++;
		spin_unlock(&q->fence_lock);

		seq_printf(m, "%3u %3u %4u %3u %9llu %9llu %7u %6u %4u\n",
			   q->hwq, q->ctx->id, q->priority, q->vector,
			   READ_ONCE(q->next_seqno),
			   le64_to_cpu(READ_ONCE(q->compl->seqno)), pending,
			   spyre_read32(sdev, SPYRE_QUEUE_REG(i, SPYRE_Q_STATUS)),
			   spyre_read32(sdev, SPYRE_QUEUE_REG(i, SPYRE_Q_HEAD)));
	}
	spin_unlock_irq(&sdev->hwq_lock);

	spyre_pm_put(sdev);
	drm_dev_exit(idx);
	return 0;
}

static int spyre_debugfs_contexts(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = spyre_debugfs_dev(m);
	struct spyre_ctx *ctx;
	struct spyre_vma *vma;

	mutex_lock(&sdev->ctx_list_lock);
	list_for_each_entry(ctx, &sdev->ctx_list, link) {
		mutex_lock(&ctx->lock);
		seq_printf(m, "ctx %u error %d faults %lld devmem %lld sysmem %lld userptr %lld\n",
			   ctx->id, atomic_read(&ctx->error),
			   atomic64_read(&ctx->faults),
			   atomic64_read(&ctx->stats.devmem),
			   atomic64_read(&ctx->stats.sysmem),
			   atomic64_read(&ctx->stats.userptr));
		list_for_each_entry(vma, &ctx->vmas, ctx_link)
			seq_printf(m, "  bo va %#014llx size %#llx placement %u\n",
				   vma->node.start, (u64)vma->bo->gem.size,
				   vma->bo->placement);
		mutex_unlock(&ctx->lock);
	}
	mutex_unlock(&sdev->ctx_list_lock);
	return 0;
}

#ifdef CONFIG_DEBUG_FS
struct spyre_live spyre_live;

/* Module-wide (all cards): see struct spyre_live.  Readable by anyone. */
static int spyre_debugfs_live_show(struct seq_file *m, void *unused)
{
	seq_printf(m, "bos %d\ncontexts %d\nqueues %d\njobs %d\nfences %d\npinned_pages %lld\n",
		   atomic_read(&spyre_live.bos),
		   atomic_read(&spyre_live.contexts),
		   atomic_read(&spyre_live.queues),
		   atomic_read(&spyre_live.jobs),
		   atomic_read(&spyre_live.fences),
		   atomic64_read(&spyre_live.pinned_pages));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(spyre_debugfs_live);
#endif

#if IS_ENABLED(CONFIG_PROVE_LOCKING)
/*
 * Proof that the driver's signalling annotations are live: a write
 * allocates with GFP_KERNEL inside a fence signalling section, the very
 * thing the driver never does, and lockdep reports it (once per boot:
 * lockdep turns itself off after its first report).  Lockdep kernels only.
 */
static ssize_t spyre_debugfs_signalling_alloc_write(struct file *file,
						    const char __user *ubuf,
						    size_t len, loff_t *ppos)
{
	bool cookie = dma_fence_begin_signalling();
	void *p = kmalloc(64, GFP_KERNEL);

	kfree(p);
	dma_fence_end_signalling(cookie);
	return len;
}

static const struct file_operations spyre_debugfs_signalling_alloc_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = spyre_debugfs_signalling_alloc_write,
	.llseek = noop_llseek,
};
#endif

static int spyre_debugfs_memory(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = spyre_debugfs_dev(m);
	struct drm_printer p = drm_seq_file_printer(m);

	seq_printf(m, "devmem_used %lld\nsysmem_used %lld\nuserptr_used %lld\n",
		   atomic64_read(&sdev->stats.devmem),
		   atomic64_read(&sdev->stats.sysmem),
		   atomic64_read(&sdev->stats.userptr));
	if (!sdev->devmem.size)
		return 0;

	mutex_lock(&sdev->devmem.lock);
	drm_buddy_print(&sdev->devmem.mm, &p);
	mutex_unlock(&sdev->devmem.lock);
	return 0;
}

static const char *const spyre_inject_kinds[SPYRE_DBG_KIND_MAX + 1] = {
	[SPYRE_DBG_HANG] = "hang",
	[SPYRE_DBG_ERROR] = "error",
	[SPYRE_DBG_FATAL] = "fatal",
	[SPYRE_DBG_DROP_IRQ] = "drop_irq",
	[SPYRE_DBG_DUP_IRQ] = "dup_irq",
	[SPYRE_DBG_CORRUPT_SEQNO] = "corrupt_seqno",
	[SPYRE_DBG_CORRUPT_STATUS] = "corrupt_status",
	[SPYRE_DBG_MMU_FAULT] = "mmu_fault",
};

static ssize_t spyre_debugfs_inject_write(struct file *file,
					  const char __user *ubuf,
					  size_t count, loff_t *ppos)
{
	struct spyre_device *sdev = file->private_data;
	unsigned int queue, times = 1;
	char buf[48], name[24];
	int kind, n, idx;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';

	n = sscanf(buf, "%u %23s %u", &queue, name, &times);
	if (n < 2 || queue >= sdev->num_queues || times < 1 || times > 256)
		return -EINVAL;
	for (kind = SPYRE_DBG_KIND_MAX; kind > 0; kind--)
		if (!strcmp(name, spyre_inject_kinds[kind]))
			break;
	if (!kind)
		return -EINVAL;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;
	/* An idle card has no queue to fault: it is not woken for this. */
	if (!spyre_pm_get_if_active(sdev)) {
		drm_dev_exit(idx);
		return -EAGAIN;
	}
	spyre_write32(sdev, SPYRE_REG_DBG_INJECT,
		      SPYRE_DBG_INJECT_VAL(queue, kind, times));
	spyre_pm_put(sdev);
	drm_dev_exit(idx);
	return count;
}

static const struct file_operations spyre_debugfs_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = spyre_debugfs_inject_write,
	.llseek = noop_llseek,
};

/**
 * spyre_debugfs_init() - register the debugfs files (before
 * drm_dev_register()).
 * @sdev: device.
 */
void spyre_debugfs_init(struct spyre_device *sdev)
{
	drm_debugfs_add_file(&sdev->drm, "queues", spyre_debugfs_queues, NULL);
	drm_debugfs_add_file(&sdev->drm, "contexts", spyre_debugfs_contexts,
			     NULL);
	drm_debugfs_add_file(&sdev->drm, "memory", spyre_debugfs_memory, NULL);
	debugfs_create_file("inject", 0200, sdev->drm.debugfs_root, sdev,
			    &spyre_debugfs_inject_fops);
#ifdef CONFIG_DEBUG_FS
	debugfs_create_file("live", 0444, sdev->drm.debugfs_root, NULL,
			    &spyre_debugfs_live_fops);
#endif
#if IS_ENABLED(CONFIG_PROVE_LOCKING)
	debugfs_create_file("signalling_alloc", 0200, sdev->drm.debugfs_root,
			    NULL, &spyre_debugfs_signalling_alloc_fops);
#endif
}
