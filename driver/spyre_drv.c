// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: PCI probe/remove, interrupts, DRM driver and
 * file lifetime, QUERY.
 *
 * The driver binds only the emulated card (vendor, device and subsystem
 * IDs must all match), whose programming interface is hw/spyre_hw.h.
 */

#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_job.h"
#include "spyre_mmu.h"
#include "spyre_pm.h"
#include "spyre_queue.h"
#include "spyre_reset.h"
#include "spyre_submit.h"
#include "spyre_telemetry.h"
#include "spyre_trace.h"

/* Every job ends within this; a wait that never ends is not a fence. */
#define SPYRE_JOB_TIMEOUT_MAX_MS	60000

unsigned int spyre_job_timeout_ms = 5000;

static int spyre_job_timeout_set(const char *val, const struct kernel_param *kp)
{
	unsigned int ms;
	int ret;

	ret = kstrtouint(val, 0, &ms);
	if (ret)
		return ret;
	if (!ms || ms > SPYRE_JOB_TIMEOUT_MAX_MS)
		return -EINVAL;
	*(unsigned int *)kp->arg = ms;
	return 0;
}

static const struct kernel_param_ops spyre_job_timeout_ops = {
	.set = spyre_job_timeout_set,
	.get = param_get_uint,
};

module_param_cb(job_timeout_ms, &spyre_job_timeout_ops, &spyre_job_timeout_ms,
		0444);
MODULE_PARM_DESC(job_timeout_ms,
		 "Job run time in ms after which its queue is reset and its context marked guilty; 1..60000 (default 5000)");

unsigned int spyre_max_queues_per_file = 16;
module_param_named(max_queues_per_file, spyre_max_queues_per_file, uint, 0644);
MODULE_PARM_DESC(max_queues_per_file,
		 "Queues one open file may hold; more fail with -EDQUOT; 0 = no cap (default 16)");

unsigned long spyre_max_devmem_per_file_mb;
module_param_named(max_devmem_per_file_mb, spyre_max_devmem_per_file_mb,
		   ulong, 0644);
MODULE_PARM_DESC(max_devmem_per_file_mb,
		 "Device memory in MiB the BOs one open file created may hold; more fail with -EDQUOT; 0 = no cap (default 0)");

unsigned long spyre_max_bo_mb;
module_param_named(max_bo_mb, spyre_max_bo_mb, ulong, 0644);
MODULE_PARM_DESC(max_bo_mb,
		 "Largest system-memory BO in MiB; 0 = half of RAM (default 0)");

#define SPYRE_READY_TIMEOUT_US	USEC_PER_SEC

/* ---- Interrupts -------------------------------------------------------- */

static irqreturn_t spyre_irq_completion(int irq, void *data)
{
	struct spyre_irq_vec *vec = data;
	struct spyre_device *sdev = vec->sdev;
	unsigned int i, n = 0;

	/* The queues on this vector: spyre_queue_vector() chose it. */
	spin_lock(&sdev->hwq_lock);
	for (i = 0; i < sdev->num_queues; i++)
		if (sdev->hwq[i] && sdev->hwq[i]->vector == vec->index)
			n += spyre_queue_irq(sdev->hwq[i]);
	spin_unlock(&sdev->hwq_lock);
	/* A duplicate, or one an earlier interrupt (or the poll) served. */
	if (!n)
		atomic64_inc(&sdev->health.spurious_irqs);

	return IRQ_HANDLED;
}

static void spyre_drain_faults(struct spyre_device *sdev)
{
	unsigned int n;
	u32 lost;

	for (n = 0; n < 2 * SPYRE_FAULT_FIFO_DEPTH; n++) {
		u64 va, info;

		if (!spyre_read32(sdev, SPYRE_REG_FAULT_COUNT))
			break;
		va = spyre_read64(sdev, SPYRE_REG_FAULT_VA);
		info = spyre_read64(sdev, SPYRE_REG_FAULT_INFO);
		spyre_write32(sdev, SPYRE_REG_FAULT_POP, 1);
		atomic64_inc(&sdev->faults);
		trace_spyre_fault(sdev->drm.dev, SPYRE_FAULT_INFO_CTX(info),
				  SPYRE_FAULT_INFO_QUEUE(info), va,
				  SPYRE_FAULT_INFO_WRITE(info),
				  SPYRE_FAULT_INFO_REASON(info));

		dev_warn_ratelimited(sdev->drm.dev,
				     "MMU fault: ctx %u queue %u %s va %#llx reason %u\n",
				     SPYRE_FAULT_INFO_CTX(info),
				     SPYRE_FAULT_INFO_QUEUE(info),
				     SPYRE_FAULT_INFO_WRITE(info) ? "write" : "read",
				     va, SPYRE_FAULT_INFO_REASON(info));
	}

	lost = spyre_read32(sdev, SPYRE_REG_FAULT_LOST);
	if (lost != atomic64_read(&sdev->faults_lost)) {
		atomic64_set(&sdev->faults_lost, lost);
		dev_warn_ratelimited(sdev->drm.dev,
				     "%u MMU fault records lost\n", lost);
	}
}

static irqreturn_t spyre_irq_error(int irq, void *data)
{
	struct spyre_irq_vec *vec = data;
	struct spyre_device *sdev = vec->sdev;
	unsigned int i;
	u32 status;

	status = spyre_read32(sdev, SPYRE_REG_IRQ_STATUS);
	if (!status || status == U32_MAX)
		return IRQ_NONE;

	/* Acknowledge first, so an event after the drain raises again. */
	spyre_write32(sdev, SPYRE_REG_IRQ_STATUS, status);

	if (status & SPYRE_IRQ_FAULT)
		spyre_drain_faults(sdev);

	if (status & SPYRE_IRQ_FATAL) {
		atomic64_inc(&sdev->health.fatal_errors);
		dev_err_ratelimited(sdev->drm.dev,
				    "card reports a fatal error, resetting it\n");
		spyre_recover(sdev, SPYRE_RECOVER_FATAL);
	}

	if (status & SPYRE_IRQ_QUEUE_ERROR) {
		atomic64_inc(&sdev->queue_errors);
		/* Settle failed completions the card has now halted on. */
		spin_lock(&sdev->hwq_lock);
		for (i = 0; i < sdev->num_queues; i++)
			if (sdev->hwq[i])
				spyre_queue_irq(sdev->hwq[i]);
		spin_unlock(&sdev->hwq_lock);
	}

	return IRQ_HANDLED;
}

static int spyre_irq_init(struct spyre_device *sdev)
{
	struct irq_affinity affd = { .pre_vectors = SPYRE_ERROR_VECTOR + 1 };
	struct pci_dev *pdev = sdev->pdev;
	u32 hw_vecs;
	int nvec, i, ret;

	hw_vecs = spyre_read32(sdev, SPYRE_REG_NUM_VECTORS);
	hw_vecs = min_t(u32, hw_vecs, SPYRE_MAX_VECTORS);
	if (hw_vecs < 2) {
		drm_err(&sdev->drm, "card has %u MSI-X vectors, need 2\n",
			hw_vecs);
		return -ENODEV;
	}

	/*
	 * The completion vectors are managed and spread over the CPUs (the
	 * error vector is not): a queue takes one of the CPU it is created
	 * on, so its completions land where its submitter runs, as NVMe's
	 * queues do.
	 */
	nvec = pci_alloc_irq_vectors_affinity(pdev, 2, hw_vecs,
					      PCI_IRQ_MSIX | PCI_IRQ_AFFINITY,
					      &affd);
	if (nvec < 0) {
		drm_err(&sdev->drm, "cannot allocate MSI-X vectors: %d\n",
			nvec);
		return nvec;
	}
	sdev->nvec = nvec;

	sdev->vecs = devm_kcalloc(&pdev->dev, nvec, sizeof(*sdev->vecs),
				  GFP_KERNEL);
	if (!sdev->vecs)
		return -ENOMEM;

	for (i = 0; i < nvec; i++) {
		sdev->vecs[i].sdev = sdev;
		sdev->vecs[i].index = i;
		ret = devm_request_irq(&pdev->dev, pci_irq_vector(pdev, i),
				       i == SPYRE_ERROR_VECTOR ?
				       spyre_irq_error : spyre_irq_completion,
				       0, SPYRE_DRIVER_NAME, &sdev->vecs[i]);
		if (ret) {
			drm_err(&sdev->drm, "cannot request IRQ %d: %d\n",
				i, ret);
			return ret;
		}
	}
	return 0;
}

/* ---- Hardware bring-up ------------------------------------------------- */

/**
 * spyre_hw_reset() - reset the card through its RESET register.
 * @sdev: device, inside drm_dev_enter(); a caller that wants the card's
 *	telemetry kept ran spyre_tel_sample() first (the reset clears it).
 *
 * Return: 0, or -ETIMEDOUT if the card did not report READY in time.
 */
int spyre_hw_reset(struct spyre_device *sdev)
{
	u32 st;
	int ret;

	spyre_write32(sdev, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
	ret = readl_poll_timeout(sdev->regs + SPYRE_REG_STATUS, st,
				 st & SPYRE_DEV_STATUS_READY, 10,
				 SPYRE_READY_TIMEOUT_US);
	spyre_tel_restart(sdev);
	if (ret)
		drm_err(&sdev->drm, "card not ready after reset (status %#x)\n",
			st);
	return ret;
}

static int spyre_hw_init(struct spyre_device *sdev)
{
	u32 id, ver;
	int ret;

	id = spyre_read32(sdev, SPYRE_REG_ID);
	if (id != SPYRE_ID_MAGIC) {
		drm_err(&sdev->drm, "bad ID register %#x\n", id);
		return -ENODEV;
	}

	ver = spyre_read32(sdev, SPYRE_REG_VERSION);
	if (ver >> 16 != SPYRE_HW_VERSION_MAJOR) {
		drm_err(&sdev->drm, "unsupported interface version %u.%u\n",
			ver >> 16, ver & 0xffff);
		return -ENODEV;
	}
	sdev->hw_version = ver;

	ret = spyre_hw_reset(sdev);
	if (ret)
		return ret;

	sdev->caps = spyre_read64(sdev, SPYRE_REG_CAPS);
	sdev->num_cores = spyre_read32(sdev, SPYRE_REG_NUM_CORES);
	sdev->devmem_size = spyre_read64(sdev, SPYRE_REG_DEVMEM_SIZE);
	sdev->num_queues = min_t(u32, spyre_read32(sdev, SPYRE_REG_NUM_QUEUES),
				 SPYRE_MAX_QUEUES);
	sdev->num_contexts = min_t(u32,
				   spyre_read32(sdev, SPYRE_REG_NUM_CONTEXTS),
				   SPYRE_MAX_CONTEXTS);
	if (!sdev->num_queues || !sdev->num_contexts) {
		drm_err(&sdev->drm, "card has %u queues, %u contexts\n",
			sdev->num_queues, sdev->num_contexts);
		return -ENODEV;
	}
	return 0;
}

/**
 * spyre_hw_enable() - enable the card's interrupts and queues.
 * @sdev: device, inside drm_dev_enter().
 */
void spyre_hw_enable(struct spyre_device *sdev)
{
	spyre_write32(sdev, SPYRE_REG_IRQ_STATUS, SPYRE_IRQ_ALL);
	spyre_write32(sdev, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
	spyre_write32(sdev, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
}

/**
 * spyre_hw_disable() - stop all DMA and interrupts of the card.
 * @sdev: device, inside drm_dev_enter() (BAR0 mapped).
 */
void spyre_hw_disable(struct spyre_device *sdev)
{
	spyre_write32(sdev, SPYRE_REG_IRQ_MASK, 0);
	spyre_write32(sdev, SPYRE_REG_CONTROL, 0);
	spyre_hw_reset(sdev);
}

/* ---- Files ------------------------------------------------------------- */

static int spyre_open(struct drm_device *drm, struct drm_file *file)
{
	struct spyre_device *sdev = to_spyre_device(drm);
	struct spyre_file *sfile;
	int idx, ret;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	/* An open file keeps the card powered (spyre_pm.c). */
	ret = spyre_pm_get(sdev);
	if (ret)
		goto out;
	sfile = kzalloc(sizeof(*sfile), GFP_KERNEL);
	if (!sfile) {
		ret = -ENOMEM;
		goto out_pm;
	}

	sfile->sdev = sdev;
	sfile->ctx = spyre_ctx_create(sdev);
	if (IS_ERR(sfile->ctx)) {
		ret = PTR_ERR(sfile->ctx);
		kfree(sfile);
		goto out_pm;
	}
	xa_init_flags(&sfile->queues, XA_FLAGS_ALLOC1);
	mutex_init(&sfile->lock);
	file->driver_priv = sfile;
	drm_dev_exit(idx);
	return 0;
out_pm:
	spyre_pm_put(sdev);
out:
	drm_dev_exit(idx);
	return ret;
}

static void spyre_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct spyre_file *sfile = file->driver_priv;
	struct spyre_device *sdev = sfile->sdev;

	spyre_queues_destroy_all(sfile);
	spyre_ctx_release_hw(sfile->ctx);
	spyre_ctx_put(sfile->ctx);
	mutex_destroy(&sfile->lock);
	kfree(sfile);
	spyre_pm_put(sdev);
}

/* ---- QUERY ------------------------------------------------------------- */

/**
 * spyre_uapi_caps() - the card's capability bits as DRM_SPYRE_CAP_* bits.
 * @hw: SPYRE_CAP_* bits of the CAPS register.
 *
 * Return: the DRM_SPYRE_CAP_* bits (QUERY and sysfs "caps").
 */
u64 spyre_uapi_caps(u64 hw)
{
	static const struct {
		u64 hw;
		u64 uapi;
	} map[] = {
		{ SPYRE_CAP_FP16, DRM_SPYRE_CAP_FP16 },
		{ SPYRE_CAP_BF16, DRM_SPYRE_CAP_BF16 },
		{ SPYRE_CAP_FP8, DRM_SPYRE_CAP_FP8 },
		{ SPYRE_CAP_INT8, DRM_SPYRE_CAP_INT8 },
		{ SPYRE_CAP_MMU, DRM_SPYRE_CAP_MMU },
		{ SPYRE_CAP_SEM, DRM_SPYRE_CAP_SEM },
		{ SPYRE_CAP_KERNEL, DRM_SPYRE_CAP_KERNEL },
	};
	u64 caps = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(map); i++)
		if (hw & map[i].hw)
			caps |= map[i].uapi;
	return caps;
}

static void spyre_fill_device_info(struct spyre_device *sdev,
				   struct drm_spyre_device_info *info)
{
	struct pci_dev *pdev = sdev->pdev;

	memset(info, 0, sizeof(*info));
	info->vendor_id = pdev->vendor;
	info->device_id = pdev->device;
	info->subsystem_vendor_id = pdev->subsystem_vendor;
	info->subsystem_id = pdev->subsystem_device;
	info->hw_version = sdev->hw_version;
	info->num_cores = sdev->num_cores;
	info->num_queues = sdev->num_queues;
	info->num_contexts = sdev->num_contexts;
	info->devmem_size = sdev->devmem_size;
	info->caps = spyre_uapi_caps(sdev->caps);
	info->va_start = SPYRE_VA_START;
	info->va_end = SPYRE_VA_END;
	info->max_cmd_size = SPYRE_MAX_CMD_STREAM;
	info->pci_domain = pci_domain_nr(pdev->bus);
	info->pci_bus = pdev->bus->number;
	info->pci_devfn = pdev->devfn;
	info->max_jobs = SPYRE_MAX_JOBS;
	info->max_bos_per_job = SPYRE_MAX_BOS_PER_JOB;
	info->max_syncs_per_job = SPYRE_MAX_SYNCS_PER_JOB;
}

static void spyre_fill_memory_info(struct spyre_device *sdev,
				   struct spyre_ctx *ctx,
				   struct drm_spyre_memory_info *info)
{
	memset(info, 0, sizeof(*info));
	info->devmem_total = sdev->devmem.size;
	info->devmem_used = atomic64_read(&sdev->stats.devmem);
	info->sysmem_used = atomic64_read(&sdev->stats.sysmem);
	info->userptr_used = atomic64_read(&sdev->stats.userptr);
	info->file_devmem_used = atomic64_read(&ctx->stats.devmem);
	info->file_sysmem_used = atomic64_read(&ctx->stats.sysmem);
	info->file_userptr_used = atomic64_read(&ctx->stats.userptr);
	info->max_bo_size = spyre_max_bo_size();
}

static void spyre_fill_context_info(struct spyre_ctx *ctx,
				    struct drm_spyre_context_info *info)
{
	memset(info, 0, sizeof(*info));
	/* Written in the reverse order: fault VA, count, then the error. */
	info->error = atomic_read(&ctx->error);
	smp_rmb(); /* the fault record is complete once the error is set */
	info->context_id = ctx->id;
	info->faults = atomic64_read(&ctx->faults);
	smp_rmb(); /* the VA is stored before the count */
	info->fault_va = atomic64_read(&ctx->fault_va);
	if (info->error && atomic_read(&ctx->job_err_noted)) {
		smp_rmb(); /* the fields are stored before the flag */
		info->job_status = ctx->job_status;
		info->job_cmd_offset = ctx->job_cmd_offset;
		info->job_detail = ctx->job_detail;
		info->job_detail2 = ctx->job_detail2;
	}
}

static void spyre_fill_health_info(struct spyre_device *sdev,
				   struct drm_spyre_health_info *info)
{
	const struct spyre_health *h = &sdev->health;

	memset(info, 0, sizeof(*info));
	info->resets = atomic64_read(&h->resets);
	info->recoveries = atomic64_read(&h->recoveries);
	info->fatal_errors = atomic64_read(&h->fatal_errors);
	info->hangs = atomic64_read(&h->hangs);
	info->lost_irqs = atomic64_read(&h->lost_irqs);
	info->spurious_irqs = atomic64_read(&h->spurious_irqs);
	info->corrupt_completions = atomic64_read(&h->corrupt_completions);
	info->jobs_replayed = atomic64_read(&h->jobs_replayed);
	info->jobs_lost = atomic64_read(&h->jobs_lost);
	info->aer_errors = atomic64_read(&h->aer_errors);
}

static int spyre_ioctl_query(struct drm_device *drm, void *data,
			     struct drm_file *file)
{
	struct spyre_device *sdev = to_spyre_device(drm);
	struct spyre_file *sfile = file->driver_priv;
	struct drm_spyre_query *args = data;
	union {
		struct drm_spyre_device_info dev;
		struct drm_spyre_memory_info mem;
		struct drm_spyre_context_info ctx;
		struct drm_spyre_health_info health;
	} info;
	u32 len, size;
	int idx, ret = 0;

	if (args->flags || args->pad)
		return -EINVAL;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	switch (args->query) {
	case DRM_SPYRE_QUERY_DEVICE_INFO:
		spyre_fill_device_info(sdev, &info.dev);
		size = sizeof(info.dev);
		break;
	case DRM_SPYRE_QUERY_MEMORY:
		spyre_fill_memory_info(sdev, sfile->ctx, &info.mem);
		size = sizeof(info.mem);
		break;
	case DRM_SPYRE_QUERY_CONTEXT:
		spyre_fill_context_info(sfile->ctx, &info.ctx);
		size = sizeof(info.ctx);
		break;
	case DRM_SPYRE_QUERY_HEALTH:
		spyre_fill_health_info(sdev, &info.health);
		size = sizeof(info.health);
		break;
	default:
		ret = -EINVAL;
		goto out;
	}

	if (!args->size) {
		args->size = size;
		goto out;
	}

	len = min(args->size, size);
	if (copy_to_user(u64_to_user_ptr(args->data), &info, len)) {
		ret = -EFAULT;
		goto out;
	}
	args->size = len;
out:
	drm_dev_exit(idx);
	return ret;
}

/* ---- DRM driver ---------------------------------------------------------- */

static const struct drm_ioctl_desc spyre_ioctls[] = {
	DRM_IOCTL_DEF_DRV(SPYRE_QUERY, spyre_ioctl_query, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_CREATE, spyre_ioctl_bo_create, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_INFO, spyre_ioctl_bo_info, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_QUEUE_CREATE, spyre_ioctl_queue_create, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_QUEUE_DESTROY, spyre_ioctl_queue_destroy, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_SUBMIT, spyre_ioctl_submit, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_USERPTR, spyre_ioctl_bo_userptr, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_WAIT, spyre_ioctl_bo_wait, 0),
};

/*
 * In 6.12, DRM_IOCTL_GET_MAGIC and DRM_IOCTL_GET_UNIQUE dereference the
 * (NULL) master of an accel file.  The DRM core dispatches core ioctls by
 * number alone, so refuse those numbers whatever the rest of @cmd says.
 */
static bool spyre_ioctl_refused(unsigned int cmd)
{
	unsigned int nr = DRM_IOCTL_NR(cmd);

	return nr == DRM_IOCTL_NR(DRM_IOCTL_GET_MAGIC) ||
	       nr == DRM_IOCTL_NR(DRM_IOCTL_GET_UNIQUE);
}

static long spyre_unlocked_ioctl(struct file *filp, unsigned int cmd,
				 unsigned long arg)
{
	if (spyre_ioctl_refused(cmd))
		return -EOPNOTSUPP;
	return drm_ioctl(filp, cmd, arg);
}

#ifdef CONFIG_COMPAT
static long spyre_compat_ioctl(struct file *filp, unsigned int cmd,
			       unsigned long arg)
{
	if (spyre_ioctl_refused(cmd))
		return -EOPNOTSUPP;
	return drm_compat_ioctl(filp, cmd, arg);
}
#else
#define spyre_compat_ioctl NULL
#endif

/* DEFINE_DRM_ACCEL_FOPS(), with the ioctl entry points wrapped. */
static const struct file_operations spyre_fops = {
	.owner = THIS_MODULE,
	.open = accel_open,
	.release = drm_release,
	.unlocked_ioctl = spyre_unlocked_ioctl,
	.compat_ioctl = spyre_compat_ioctl,
	.poll = drm_poll,
	.read = drm_read,
	.llseek = noop_llseek,
	.mmap = drm_gem_mmap,
	.fop_flags = FOP_UNSIGNED_OFFSET,
	.show_fdinfo = drm_show_fdinfo,
};

static const struct drm_driver spyre_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_COMPUTE_ACCEL |
			   DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE,
	.open = spyre_open,
	.postclose = spyre_postclose,
	.show_fdinfo = spyre_show_fdinfo,
	.gem_create_object = spyre_gem_create_object,
	.gem_prime_import = spyre_gem_prime_import,
	.gem_prime_import_sg_table = spyre_gem_prime_import_sg_table,
	.ioctls = spyre_ioctls,
	.num_ioctls = ARRAY_SIZE(spyre_ioctls),
	.fops = &spyre_fops,
	.name = SPYRE_DRIVER_NAME,
	.desc = SPYRE_DRIVER_DESC,
	.major = SPYRE_DRIVER_MAJOR,
	.minor = SPYRE_DRIVER_MINOR,
};

/* ---- PCI --------------------------------------------------------------- */

static void spyre_drm_fini(struct drm_device *drm, void *arg)
{
	struct spyre_device *sdev = to_spyre_device(drm);

	if (sdev->submit_wq)
		destroy_workqueue(sdev->submit_wq);

	ida_destroy(&sdev->ctx_ida);
	ida_destroy(&sdev->hwq_ida);
	xa_destroy(&sdev->ctxs);
}

static int spyre_probe(struct pci_dev *pdev, const struct pci_device_id *ent)
{
	struct spyre_device *sdev;
	struct drm_device *drm;
	int ret;

	sdev = devm_drm_dev_alloc(&pdev->dev, &spyre_drm_driver,
				  struct spyre_device, drm);
	if (IS_ERR(sdev))
		return PTR_ERR(sdev);
	drm = &sdev->drm;
	sdev->pdev = pdev;
	pci_set_drvdata(pdev, sdev);

	ida_init(&sdev->ctx_ida);
	ida_init(&sdev->hwq_ida);
	xa_init(&sdev->ctxs);
	init_rwsem(&sdev->reset_sem);
	init_rwsem(&sdev->dma_sem);
	ret = drmm_add_action_or_reset(drm, spyre_drm_fini, NULL);
	if (ret)
		return ret;
	ret = spyre_reset_init(sdev);
	if (ret)
		return ret;
	/*
	 * The queues' schedulers share one per-CPU, high-priority workqueue
	 * rather than each allocating an ordered, unbound one: run_job then
	 * runs on the CPU that submitted, right after the SUBMIT ioctl,
	 * instead of waiting for a worker woken on another CPU.  (A work item
	 * never runs on two CPUs at once, so each scheduler's run_job and
	 * free_job still run one at a time.)  WQ_MEM_RECLAIM: fences signal
	 * through it.
	 */
	sdev->submit_wq = alloc_workqueue("spyre-submit",
					  WQ_HIGHPRI | WQ_MEM_RECLAIM, 0);
	if (!sdev->submit_wq)
		return -ENOMEM;
	spin_lock_init(&sdev->hwq_lock);
	ret = drmm_mutex_init(drm, &sdev->mmu_lock);
	if (ret)
		return ret;
	ret = drmm_mutex_init(drm, &sdev->ctx_list_lock);
	if (ret)
		return ret;
	INIT_LIST_HEAD(&sdev->ctx_list);
	ret = drmm_mutex_init(drm, &sdev->queues_lock);
	if (ret)
		return ret;
	INIT_LIST_HEAD(&sdev->queues);

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;

	if (pci_resource_len(pdev, SPYRE_BAR_REGS) < SPYRE_BAR0_SIZE) {
		drm_err(drm, "BAR0 too small\n");
		return -ENODEV;
	}
	sdev->regs = pcim_iomap_region(pdev, SPYRE_BAR_REGS, SPYRE_DRIVER_NAME);
	if (IS_ERR(sdev->regs))
		return PTR_ERR(sdev->regs);

	pci_set_master(pdev);

	/* Page-table entries hold 52-bit addresses. */
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(52));
	if (ret)
		return ret;
	/*
	 * The device MMU maps page by page: a scatterlist segment may be of
	 * any length (the DMA API's default limit is 64 KiB).
	 */
	dma_set_max_seg_size(&pdev->dev, UINT_MAX);

	spyre_tel_init(sdev);
	ret = spyre_hw_init(sdev);
	if (ret)
		return ret;

	ret = spyre_devmem_init(sdev);
	if (ret)
		return ret;

	sdev->hwq = drmm_kcalloc(drm, sdev->num_queues, sizeof(*sdev->hwq),
				 GFP_KERNEL);
	if (!sdev->hwq)
		return -ENOMEM;
	ret = spyre_hwq_sched_init(sdev);
	if (ret)
		return ret;

	ret = spyre_irq_init(sdev);
	if (ret)
		return ret;

	spyre_hw_enable(sdev);
	spyre_debugfs_init(sdev);
	/* What AER's slot_reset() restores after the link was reset. */
	pci_save_state(pdev);
	spyre_pm_init(sdev);

	ret = drm_dev_register(drm, 0);
	if (ret) {
		spyre_hw_disable(sdev);
		return ret;
	}

	drm_info(drm, "Spyre interface %u.%u: %u cores, %u queues, %u contexts, %u vectors, %llu MiB device memory\n",
		 sdev->hw_version >> 16, sdev->hw_version & 0xffff,
		 sdev->num_cores, sdev->num_queues, sdev->num_contexts,
		 sdev->nvec, sdev->devmem.size >> 20);
	return 0;
}

static void spyre_remove(struct pci_dev *pdev)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);

	unsigned int i;

	/* No ioctl, run_job or MMIO user is inside drm_dev_enter() after this. */
	drm_dev_unplug(&sdev->drm);
	spyre_pm_fini(sdev);
	spyre_reset_fini(sdev);
	spyre_hw_disable(sdev);
	for (i = 0; i < sdev->nvec; i++)
		synchronize_irq(pci_irq_vector(pdev, i));
	spyre_queues_cancel_all(sdev, -ENODEV);

	/*
	 * Files, queues and BOs may outlive the device, but its coherent DMA
	 * memory must be freed now: once the device is gone, so is its IOMMU
	 * state, and the DMA API no longer works for it.
	 */
	spyre_ctxs_release_all(sdev);
	spyre_queues_free_dma(sdev);
}

static void spyre_shutdown(struct pci_dev *pdev)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);
	int idx;

	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_hw_disable(sdev);
		drm_dev_exit(idx);
	}
}

static const struct pci_device_id spyre_pci_ids[] = {
	{ PCI_DEVICE_SUB(SPYRE_PCI_VENDOR_ID, SPYRE_PCI_DEVICE_ID,
			 SPYRE_PCI_SUBVENDOR_ID, SPYRE_PCI_SUBDEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, spyre_pci_ids);

static struct pci_driver spyre_pci_driver = {
	.name = SPYRE_DRIVER_NAME,
	.id_table = spyre_pci_ids,
	.probe = spyre_probe,
	.remove = spyre_remove,
	.shutdown = spyre_shutdown,
	.err_handler = &spyre_err_handlers,
	.driver.pm = pm_ptr(&spyre_pm_ops),
	.dev_groups = spyre_groups,
};
module_pci_driver(spyre_pci_driver);

MODULE_AUTHOR("The Spyre open driver stack developers");
MODULE_DESCRIPTION(SPYRE_DRIVER_DESC);
MODULE_LICENSE("GPL");
