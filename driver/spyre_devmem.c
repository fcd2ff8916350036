// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: device-memory BOs.
 *
 * The card's memory is BAR2 (DEVMEM_SIZE bytes).  A drm_buddy allocator
 * with 4 KiB chunks hands out blocks; a BO need not be contiguous, since
 * the card reaches it through 4 KiB PTEs with SPYRE_PTE_DEVMEM holding the
 * BAR offset.  Blocks are cleared through a write-combined kernel mapping
 * of the BAR before the BO is handed out (device memory keeps its contents
 * across BOs and resets).  A PCI function reset turns the BAR's decoding
 * off, and writes to it are dropped then: the clear runs with reset_sem
 * held for reading, so no reset starts or is under way meanwhile, and a
 * BO whose clear cannot be trusted is never handed out (-EIO).  They go
 * back to the allocator when the last
 * reference goes: handles and jobs hold references and unmapping from a
 * VM waits for the card's TLB invalidation, so by then no context maps
 * them and no job that listed them runs.
 *
 * CPU mappings are write-combined PFN mappings of the BAR (MAP_SHARED
 * only), set up at mmap time; drm_dev_unplug() zaps them, later accesses
 * get SIGBUS.  Dma-buf export is allowed, but only this card can import
 * the buffer (as the same GEM object): the guest has no PCI peer-to-peer
 * DMA, so attaching any other device fails with -EOPNOTSUPP.
 */

#include <linux/dma-buf.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>
#include <drm/drm_vma_manager.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_mmu.h"
#include "spyre_pm.h"

/* Bytes cleared between two scheduling points. */
#define SPYRE_CLEAR_CHUNK	SZ_2M

static void spyre_devmem_fini(struct drm_device *drm, void *arg)
{
	struct spyre_device *sdev = to_spyre_device(drm);

	/* Every BO holds the device (through its owner): none is left. */
	drm_buddy_fini(&sdev->devmem.mm);
}

/**
 * spyre_devmem_init() - set up the device-memory allocator over BAR2.
 * @sdev: device; DEVMEM_SIZE was read.
 *
 * A card without a usable BAR2 works without device memory (size 0:
 * DRM_SPYRE_BO_DEVICE then fails with -E2BIG).
 *
 * Return: 0 or a negative errno.
 */
int spyre_devmem_init(struct spyre_device *sdev)
{
	struct spyre_devmem *dm = &sdev->devmem;
	struct pci_dev *pdev = sdev->pdev;
	struct drm_device *drm = &sdev->drm;
	u64 size;
	int ret;

	ret = drmm_mutex_init(drm, &dm->lock);
	if (ret)
		return ret;

	size = min_t(u64, sdev->devmem_size,
		     pci_resource_len(pdev, SPYRE_BAR_DEVMEM));
	size = round_down(size, SPYRE_PAGE_SIZE);
	if (!size || !(pci_resource_flags(pdev, SPYRE_BAR_DEVMEM) &
		       IORESOURCE_MEM)) {
		drm_warn(drm, "no usable device memory (BAR2 %pR, DEVMEM_SIZE %#llx)\n",
			 &pdev->resource[SPYRE_BAR_DEVMEM], sdev->devmem_size);
		return 0;
	}

	ret = pcim_request_region(pdev, SPYRE_BAR_DEVMEM, SPYRE_DRIVER_NAME);
	if (ret)
		return ret;

	dm->base = pci_resource_start(pdev, SPYRE_BAR_DEVMEM);
	/* Also reserves the range as write-combined for user mappings. */
	dm->map = devm_ioremap_wc(&pdev->dev, dm->base, size);
	if (!dm->map)
		return -ENOMEM;

	ret = drm_buddy_init(&dm->mm, size, SPYRE_PAGE_SIZE);
	if (ret)
		return ret;
	ret = drmm_add_action_or_reset(drm, spyre_devmem_fini, NULL);
	if (ret)
		return ret;

	dm->size = size;
	return 0;
}

/* ---- GEM object --------------------------------------------------------- */

static void spyre_devmem_free(struct drm_gem_object *obj)
{
	struct spyre_device *sdev = to_spyre_device(obj->dev);
	struct spyre_devmem *dm = &sdev->devmem;
	struct spyre_bo *bo = to_spyre_bo(obj);

	/*
	 * No VM maps the blocks any more: each mapping was removed, with its
	 * TLB invalidation acknowledged, before its last reference (a handle
	 * or a job, which hold BO references too) went away.
	 */
	mutex_lock(&dm->lock);
	drm_buddy_free_list(&dm->mm, &bo->blocks, 0);
	mutex_unlock(&dm->lock);
	if (bo->pm_held)
		spyre_pm_put(sdev);

	spyre_bo_fini_common(bo);
	drm_gem_object_release(obj);
	kfree(bo);
}

static vm_fault_t spyre_devmem_fault(struct vm_fault *vmf)
{
	/*
	 * Every page is mapped at mmap time: a fault means the card was
	 * unplugged and drm_dev_unplug() zapped the mapping.
	 */
	return VM_FAULT_SIGBUS;
}

static const struct vm_operations_struct spyre_devmem_vm_ops = {
	.fault = spyre_devmem_fault,
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static int spyre_devmem_mmap(struct drm_gem_object *obj,
			     struct vm_area_struct *vma)
{
	struct spyre_device *sdev = to_spyre_device(obj->dev);
	struct spyre_devmem *dm = &sdev->devmem;
	struct spyre_bo *bo = to_spyre_bo(obj);
	unsigned long obj_pages = obj->size >> PAGE_SHIFT;
	unsigned long npages = vma_pages(vma);
	struct drm_buddy_block *block;
	unsigned long pgoff, cur = 0;
	int idx, ret = 0;

	/* Private (copy-on-write) mappings of I/O memory make no sense. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;

	/* Page offset in the BO (vm_pgoff holds the fake offset). */
	pgoff = vma->vm_pgoff - drm_vma_node_start(&obj->vma_node);
	if (pgoff > obj_pages || npages > obj_pages - pgoff)
		return -EINVAL;

	if (!drm_dev_enter(obj->dev, &idx))
		return -ENODEV;

	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_page_prot = pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	vma->vm_page_prot = pgprot_decrypted(vma->vm_page_prot);

	list_for_each_entry(block, &bo->blocks, link) {
		unsigned long bpages = drm_buddy_block_size(&dm->mm, block) >>
				       PAGE_SHIFT;
		unsigned long first = max(cur, pgoff);
		unsigned long last = min(cur + bpages, pgoff + npages);

		if (first < last) {
			resource_size_t phys = dm->base +
					       drm_buddy_block_offset(block) +
					       ((resource_size_t)(first - cur) <<
						PAGE_SHIFT);

			ret = io_remap_pfn_range(vma, vma->vm_start +
						 ((first - pgoff) << PAGE_SHIFT),
						 phys >> PAGE_SHIFT,
						 (last - first) << PAGE_SHIFT,
						 vma->vm_page_prot);
			if (ret)
				break;
		}
		cur += bpages;
		if (cur >= pgoff + npages)
			break;
	}

	drm_dev_exit(idx);
	return ret;
}

/* ---- dma-buf ------------------------------------------------------------ */

static int spyre_devmem_dmabuf_attach(struct dma_buf *dma_buf,
				      struct dma_buf_attachment *attach)
{
	/* No peer-to-peer DMA: no other device can reach BAR2. */
	return -EOPNOTSUPP;
}

static struct sg_table *
spyre_devmem_map_dma_buf(struct dma_buf_attachment *attach,
			 enum dma_data_direction dir)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void spyre_devmem_unmap_dma_buf(struct dma_buf_attachment *attach,
				       struct sg_table *sgt,
				       enum dma_data_direction dir)
{
}

static const struct dma_buf_ops spyre_devmem_dmabuf_ops = {
	.attach = spyre_devmem_dmabuf_attach,
	.map_dma_buf = spyre_devmem_map_dma_buf,
	.unmap_dma_buf = spyre_devmem_unmap_dma_buf,
	.release = drm_gem_dmabuf_release,
	.mmap = drm_gem_dmabuf_mmap,
};

static struct dma_buf *spyre_devmem_export(struct drm_gem_object *obj,
					   int flags)
{
	struct dma_buf_export_info exp_info = {
		.exp_name = KBUILD_MODNAME,
		.owner = THIS_MODULE,
		.ops = &spyre_devmem_dmabuf_ops,
		.size = obj->size,
		.flags = flags,
		.priv = obj,
		.resv = obj->resv,
	};

	return drm_gem_dmabuf_export(obj->dev, &exp_info);
}

/**
 * spyre_devmem_dmabuf_owner() - tell whether a dma-buf is a device-memory
 * BO exported by a Spyre card.
 * @dma_buf: buffer.
 * @obj: out: the exported GEM object (no reference taken) if so.
 *
 * Return: true for a Spyre device-memory dma-buf.
 */
bool spyre_devmem_dmabuf_owner(struct dma_buf *dma_buf,
			       struct drm_gem_object **obj)
{
	if (dma_buf->ops != &spyre_devmem_dmabuf_ops)
		return false;
	*obj = dma_buf->priv;
	return true;
}

static const struct drm_gem_object_funcs spyre_devmem_funcs = {
	.free = spyre_devmem_free,
	.open = spyre_gem_open,
	.close = spyre_gem_close,
	.export = spyre_devmem_export,
	.mmap = spyre_devmem_mmap,
	.vm_ops = &spyre_devmem_vm_ops,
};

/* ---- Allocation --------------------------------------------------------- */

/*
 * Whether BAR2 decodes CPU writes: false while the function is in an
 * error state or its memory space is off (config space says so).
 */
static bool spyre_devmem_decodes(struct spyre_device *sdev)
{
	u16 cmd;

	if (pci_channel_offline(sdev->pdev))
		return false;
	if (pci_read_config_word(sdev->pdev, PCI_COMMAND, &cmd))
		return false;
	return cmd != 0xffff && (cmd & PCI_COMMAND_MEMORY);
}

/*
 * Zero the BO's blocks through the write-combined BAR mapping.
 *
 * reset_prepare() takes reset_sem for writing before the PCI core clears
 * the command register, and reset_done() releases it after the core has
 * restored it: holding it for reading orders the whole clear before or
 * after a function reset, never across one.  Decoding is checked before
 * and after, so a BAR that was off for another reason (the function in an
 * error state, memory space disabled) fails the clear instead of leaving
 * the previous owner's bytes in the BO.
 *
 * Return: 0, -EIO (the BAR did not decode: the blocks may hold old data),
 * -ENODEV (unplugged) or -EINTR (fatal signal while a reset was running or
 * between two chunks of the clear: the caller frees the BO).
 */
static int spyre_devmem_clear(struct spyre_device *sdev, struct spyre_bo *bo)
{
	struct spyre_devmem *dm = &sdev->devmem;
	struct drm_buddy_block *block;
	int idx, ret;

	ret = spyre_hw_read_lock_killable(sdev);
	if (ret)
		return ret;
	if (!drm_dev_enter(&sdev->drm, &idx)) {
		ret = -ENODEV;
		goto out_unlock;
	}
	if (!spyre_devmem_decodes(sdev)) {
		ret = -EIO;
		goto out_exit;
	}

	list_for_each_entry(block, &bo->blocks, link) {
		u64 off = drm_buddy_block_offset(block);
		u64 left = drm_buddy_block_size(&dm->mm, block);

		while (left) {
			u64 n = min_t(u64, left, SPYRE_CLEAR_CHUNK);

			/* a large BO takes seconds: let a dying caller go */
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				goto out_exit;
			}
			memset_io(dm->map + off, 0, n);
			off += n;
			left -= n;
			cond_resched();
		}
	}
	/* Drain the write-combining buffers before anyone can look. */
	wmb();
	if (!spyre_devmem_decodes(sdev))
		ret = -EIO;

out_exit:
	drm_dev_exit(idx);
out_unlock:
	up_read(&sdev->reset_sem);
	return ret;
}

/**
 * spyre_devmem_bo_create() - allocate and clear a device-memory BO.
 * @sdev: device.
 * @owner: creating file's context, charged for the memory.
 * @size: bytes, a multiple of the page size, at most the device memory.
 *
 * The blocks are cleared before the BO is returned; the clear waits for a
 * PCI function reset under way to finish.
 *
 * Return: the BO with one reference, or an ERR_PTR: -E2BIG (@size 0 or
 * above the device memory), -EDQUOT (the file would hold more device
 * memory than max_devmem_per_file_mb), -ENOMEM (out of device or system
 * memory),
 * -EIO (the memory BAR did not decode, so the blocks could not be
 * cleared: the function is in an error state or its memory space is
 * off), -EINTR (fatal signal while waiting for a reset), -ENODEV.
 */
struct spyre_bo *spyre_devmem_bo_create(struct spyre_device *sdev,
					struct spyre_ctx *owner, u64 size)
{
	struct spyre_devmem *dm = &sdev->devmem;
	struct spyre_bo *bo;
	u64 cap;
	int ret;

	if (!size || size > dm->size)
		return ERR_PTR(-E2BIG);

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);

	spyre_bo_init_common(bo, DRM_SPYRE_PLACEMENT_DEVICE);
	bo->gem.funcs = &spyre_devmem_funcs;
	drm_gem_private_object_init(&sdev->drm, &bo->gem, size);
	/* Its contents live on the card: keep it powered (spyre_pm.c). */
	ret = spyre_pm_get(sdev);
	if (ret)
		goto err_put;
	bo->pm_held = true;

	/*
	 * The file's cap is checked and the BO charged under the allocator's
	 * lock, so that concurrent creates of one file cannot pass it
	 * together.  A BO freed on an error below is uncharged.
	 */
	mutex_lock(&dm->lock);
	cap = (u64)READ_ONCE(spyre_max_devmem_per_file_mb) << 20;
	if (cap && atomic64_read(&owner->stats.devmem) + size > cap) {
		mutex_unlock(&dm->lock);
		ret = -EDQUOT;
		goto err_put;
	}
	ret = drm_buddy_alloc_blocks(&dm->mm, 0, dm->size, size,
				     SPYRE_PAGE_SIZE, &bo->blocks, 0);
	if (!ret)
		spyre_bo_charge(bo, owner, size);
	mutex_unlock(&dm->lock);
	if (ret) {
		/* -ENOSPC: no free blocks left. */
		ret = -ENOMEM;
		goto err_put;
	}

	ret = spyre_devmem_clear(sdev, bo);
	if (ret)
		goto err_put;
	return bo;

err_put:
	drm_gem_object_put(&bo->gem);
	return ERR_PTR(ret);
}
