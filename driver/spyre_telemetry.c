// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: what operators see.
 *
 *  - sysfs attributes of the PCI device (/sys/bus/pci/devices/<addr>/),
 *    all world-readable, documented in docs/ABI/sysfs-driver-spyre:
 *    identity, memory per placement, use (busy and active time, jobs,
 *    commands, bytes, faults, queue errors) and health counters.
 *    Reading them never wakes a runtime-suspended card: the card's
 *    counters are then shown as sampled when it suspended.
 *  - DRM fdinfo of an open card (Documentation/gpu/drm-usage-stats.rst).
 *  - The card's TEL_* registers kept since probe: a card reset clears
 *    them, so every reset path samples them first (spyre_tel_sample())
 *    and restarts from 0 after (spyre_tel_restart()); only counts of an
 *    AER recovery with a frozen channel, since the last sample, are lost.
 */

#include <linux/dma-resv.h>
#include <linux/idr.h>
#include <linux/pci.h>
#include <linux/sysfs.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_mmu.h"
#include "spyre_pm.h"
#include "spyre_queue.h"
#include "spyre_telemetry.h"

/* ---- Card counters ------------------------------------------------------ */

/**
 * spyre_tel_init() - start the card's counters from what it shows now.
 * @sdev: device, right after probe reset the card (counters 0).
 */
void spyre_tel_init(struct spyre_device *sdev)
{
	spin_lock_init(&sdev->tel.lock);
	memset(sdev->tel.total, 0, sizeof(sdev->tel.total));
	memset(sdev->tel.seen, 0, sizeof(sdev->tel.seen));
	atomic_set(&sdev->tel.jobs_in_flight, 0);
}

/**
 * spyre_tel_sample() - add what the card counted since the last sample.
 * @sdev: device; the caller is inside drm_dev_enter(), the card is
 *	powered, and no reset runs (reset_sem held, either way).
 *
 * Safe to call any number of times: a register below its last value was
 * cleared by a reset nobody sampled before, and counts from 0.  A read of
 * all-ones (a surprise removal, a frozen channel) is ignored.
 */
void spyre_tel_sample(struct spyre_device *sdev)
{
	struct spyre_tel *t = &sdev->tel;
	u64 raw[SPYRE_TEL_NUM];
	unsigned int i;

	for (i = 0; i < SPYRE_TEL_NUM; i++)
		raw[i] = spyre_read64(sdev, SPYRE_REG_TEL_JOBS + 8 * i);
	spin_lock(&t->lock);
	for (i = 0; i < SPYRE_TEL_NUM; i++) {
		if (raw[i] == U64_MAX)
			continue;
		t->total[i] += raw[i] >= t->seen[i] ? raw[i] - t->seen[i] :
			       raw[i];
		t->seen[i] = raw[i];
	}
	spin_unlock(&t->lock);
}

/**
 * spyre_tel_restart() - note that a reset cleared the card's counters.
 * @sdev: device; the caller holds reset_sem for writing, right after the
 *	card's reset.
 */
void spyre_tel_restart(struct spyre_device *sdev)
{
	spin_lock(&sdev->tel.lock);
	memset(sdev->tel.seen, 0, sizeof(sdev->tel.seen));
	spin_unlock(&sdev->tel.lock);
}

/*
 * A counter since probe; sampled first if the card is powered and no reset
 * runs (a reset in progress or a suspended card: the last sample's value).
 */
static u64 spyre_tel_read(struct spyre_device *sdev, enum spyre_tel_counter c)
{
	u64 v;
	int idx;

	if (drm_dev_enter(&sdev->drm, &idx)) {
		if (spyre_hw_read_trylock(sdev)) {
			if (spyre_pm_get_if_active(sdev)) {
				spyre_tel_sample(sdev);
				spyre_pm_put(sdev);
			}
			up_read(&sdev->reset_sem);
		}
		drm_dev_exit(idx);
	}
	spin_lock(&sdev->tel.lock);
	v = sdev->tel.total[c];
	spin_unlock(&sdev->tel.lock);
	return v;
}

/* ---- sysfs -------------------------------------------------------------- */

static struct spyre_device *spyre_sysfs_dev(struct device *dev)
{
	return pci_get_drvdata(to_pci_dev(dev));
}

#define SPYRE_ATTR_U64(_name, _expr)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct spyre_device *sdev = spyre_sysfs_dev(dev);		\
									\
	return sysfs_emit(buf, "%llu\n", (u64)(_expr));			\
}									\
static DEVICE_ATTR_RO(_name)

SPYRE_ATTR_U64(num_cores, sdev->num_cores);
SPYRE_ATTR_U64(num_queues, sdev->num_queues);
SPYRE_ATTR_U64(num_contexts, sdev->num_contexts);

SPYRE_ATTR_U64(mem_devmem_total, sdev->devmem.size);
SPYRE_ATTR_U64(mem_devmem_used, atomic64_read(&sdev->stats.devmem));
SPYRE_ATTR_U64(mem_sysmem_used, atomic64_read(&sdev->stats.sysmem));
SPYRE_ATTR_U64(mem_userptr_used, atomic64_read(&sdev->stats.userptr));

SPYRE_ATTR_U64(busy_ns, spyre_tel_read(sdev, SPYRE_TEL_BUSY_NS));
SPYRE_ATTR_U64(active_ns, spyre_tel_read(sdev, SPYRE_TEL_ACTIVE_NS));
SPYRE_ATTR_U64(jobs_completed, spyre_tel_read(sdev, SPYRE_TEL_JOBS));
SPYRE_ATTR_U64(commands_completed, spyre_tel_read(sdev, SPYRE_TEL_CMDS));
SPYRE_ATTR_U64(bytes_moved, spyre_tel_read(sdev, SPYRE_TEL_BYTES));
SPYRE_ATTR_U64(mmu_faults, spyre_tel_read(sdev, SPYRE_TEL_FAULTS));
SPYRE_ATTR_U64(fault_records_lost, atomic64_read(&sdev->faults_lost));
SPYRE_ATTR_U64(queue_errors, atomic64_read(&sdev->queue_errors));
SPYRE_ATTR_U64(jobs_in_flight, atomic_read(&sdev->tel.jobs_in_flight));

SPYRE_ATTR_U64(resets, atomic64_read(&sdev->health.resets));
SPYRE_ATTR_U64(recoveries, atomic64_read(&sdev->health.recoveries));
SPYRE_ATTR_U64(fatal_errors, atomic64_read(&sdev->health.fatal_errors));
SPYRE_ATTR_U64(hangs, atomic64_read(&sdev->health.hangs));
SPYRE_ATTR_U64(lost_irqs, atomic64_read(&sdev->health.lost_irqs));
SPYRE_ATTR_U64(spurious_irqs, atomic64_read(&sdev->health.spurious_irqs));
SPYRE_ATTR_U64(corrupt_completions,
	       atomic64_read(&sdev->health.corrupt_completions));
SPYRE_ATTR_U64(jobs_replayed, atomic64_read(&sdev->health.jobs_replayed));
SPYRE_ATTR_U64(jobs_lost, atomic64_read(&sdev->health.jobs_lost));
SPYRE_ATTR_U64(aer_errors, atomic64_read(&sdev->health.aer_errors));

static ssize_t hw_version_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct spyre_device *sdev = spyre_sysfs_dev(dev);

	return sysfs_emit(buf, "%u.%u\n", sdev->hw_version >> 16,
			  sdev->hw_version & 0xffff);
}
static DEVICE_ATTR_RO(hw_version);

static ssize_t caps_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	struct spyre_device *sdev = spyre_sysfs_dev(dev);

	return sysfs_emit(buf, "%#llx\n", spyre_uapi_caps(sdev->caps));
}
static DEVICE_ATTR_RO(caps);

static struct attribute *spyre_attrs[] = {
	&dev_attr_hw_version.attr,
	&dev_attr_caps.attr,
	&dev_attr_num_cores.attr,
	&dev_attr_num_queues.attr,
	&dev_attr_num_contexts.attr,
	&dev_attr_mem_devmem_total.attr,
	&dev_attr_mem_devmem_used.attr,
	&dev_attr_mem_sysmem_used.attr,
	&dev_attr_mem_userptr_used.attr,
	&dev_attr_busy_ns.attr,
	&dev_attr_active_ns.attr,
	&dev_attr_jobs_completed.attr,
	&dev_attr_commands_completed.attr,
	&dev_attr_bytes_moved.attr,
	&dev_attr_mmu_faults.attr,
	&dev_attr_fault_records_lost.attr,
	&dev_attr_queue_errors.attr,
	&dev_attr_jobs_in_flight.attr,
	&dev_attr_resets.attr,
	&dev_attr_recoveries.attr,
	&dev_attr_fatal_errors.attr,
	&dev_attr_hangs.attr,
	&dev_attr_lost_irqs.attr,
	&dev_attr_spurious_irqs.attr,
	&dev_attr_corrupt_completions.attr,
	&dev_attr_jobs_replayed.attr,
	&dev_attr_jobs_lost.attr,
	&dev_attr_aer_errors.attr,
	NULL
};

static const struct attribute_group spyre_attr_group = {
	.attrs = spyre_attrs,
};

/* The PCI driver's dev_groups: created before probe ends uevents. */
const struct attribute_group *spyre_groups[] = {
	&spyre_attr_group,
	NULL
};

/* ---- DRM fdinfo --------------------------------------------------------- */

/*
 * Memory per region, counted for every file that holds a handle to a BO
 * (drm-usage-stats.rst): shared when another file or a dma-buf holds it
 * too, resident always (every placement is pinned or device memory while
 * the BO lives), active while a job uses it.  Nothing is purgeable.
 */
static void spyre_fdinfo_memory(struct drm_printer *p, struct drm_file *file)
{
	struct drm_memory_stats st[2] = { { 0 } };	/* system, device */
	struct drm_gem_object *obj;
	int id;

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id) {
		struct spyre_bo *bo = to_spyre_bo(obj);
		struct drm_memory_stats *m =
			&st[bo->placement == DRM_SPYRE_PLACEMENT_DEVICE];

		if (drm_gem_object_is_shared_for_memory_stats(obj))
			m->shared += obj->size;
		else
			m->private += obj->size;
		m->resident += obj->size;
		if (!dma_resv_test_signaled(obj->resv, DMA_RESV_USAGE_BOOKKEEP))
			m->active += obj->size;
	}
	spin_unlock(&file->table_lock);
	drm_print_memory_stats(p, &st[0], DRM_GEM_OBJECT_RESIDENT, "system");
	drm_print_memory_stats(p, &st[1], DRM_GEM_OBJECT_RESIDENT, "device");
}

/**
 * spyre_show_fdinfo() - the driver's DRM fdinfo keys, after the core's.
 * @p: printer of /proc/PID/fdinfo/FD.
 * @file: the open card.
 *
 * drm-engine-compute: card time (ns) the file's queues were busy, summed
 * over its queues, destroyed ones and resets included.  The card is one
 * compute engine (no capacity key): a file busy on several queues at once
 * adds their times.  drm-{total,shared,resident,active}-{system,device}:
 * the BOs the file holds a handle to (spyre_fdinfo_memory()).
 */
void spyre_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct spyre_file *sfile = file->driver_priv;
	struct spyre_device *sdev = sfile->sdev;
	struct spyre_ctx *ctx = sfile->ctx;
	u64 busy = atomic64_read(&ctx->busy_ns);
	struct spyre_queue *q;
	unsigned long id;
	int idx;

	/*
	 * During a reset (which folds the registers into the queues' bases)
	 * the live registers are skipped: a reader never waits for one.
	 */
	if (drm_dev_enter(&sdev->drm, &idx)) {
		bool regs = spyre_hw_read_trylock(sdev);

		xa_for_each(&sfile->queues, id, q) {
			q = spyre_queue_lookup(sfile, id);
			if (!q)
				continue;
			if (regs && q->hw_active)
				busy += spyre_queue_busy_ns(q);
			else
				busy += atomic64_read(&q->busy_base);
			spyre_queue_put(q);
		}
		if (regs)
			up_read(&sdev->reset_sem);
		drm_dev_exit(idx);
	}
	drm_printf(p, "drm-engine-compute:\t%llu ns\n", busy);
	spyre_fdinfo_memory(p, file);
}
