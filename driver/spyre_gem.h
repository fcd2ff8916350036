/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Spyre DRM accel driver: buffer objects (spyre_gem.c: common and system
 * memory; spyre_devmem.c: device memory; spyre_userptr.c: user memory).
 */
#ifndef SPYRE_GEM_H
#define SPYRE_GEM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include <drm/drm_gem.h>
#include <drm/drm_gem_shmem_helper.h>

#include "spyre_drv.h"

struct dma_buf;
struct dma_buf_attachment;
struct spyre_ctx;

/* BO_CREATE flags this driver knows. */
#define SPYRE_BO_FLAGS		DRM_SPYRE_BO_DEVICE

/**
 * struct spyre_bo - a buffer object.
 * @gem: the GEM object (every placement).
 * @shmem: the shmem object (DRM_SPYRE_PLACEMENT_SYSTEM and _IMPORTED, which
 *	the shmem helpers create); @gem aliases @shmem.base.
 * @placement: DRM_SPYRE_PLACEMENT_*.
 * @readonly: the card may only read the BO (read-only userptr).
 * @owner: context of the file that created the BO, charged for its memory
 *	(reference held); NULL for imported BOs.
 * @sgt: DMA-mapped pages the PTEs point to (system, userptr, imported).
 * @vma_lock: protects @vmas.
 * @vmas: mappings of the BO (struct spyre_vma.bo_link), one per context.
 * @blocks: drm_buddy blocks of a device-memory BO.
 * @pages: pinned pages of a userptr BO.
 * @npages: entries in @pages.
 * @pinned_mm: mm whose pinned_vm a userptr BO is charged to (RLIMIT_MEMLOCK;
 *	an mm_count reference is held), NULL if not charged.
 * @pm_held: a device-memory BO holds a runtime-PM reference (spyre_pm.c).
 */
struct spyre_bo {
	union {
		struct drm_gem_object gem;
		struct drm_gem_shmem_object shmem;
	};
	u32 placement;
	bool readonly;
	struct spyre_ctx *owner;
	struct sg_table *sgt;
	struct mutex vma_lock;		/* protects vmas */
	struct list_head vmas;
	struct list_head blocks;
	struct page **pages;
	unsigned long npages;
	struct mm_struct *pinned_mm;
	bool pm_held;
};

static inline struct spyre_bo *to_spyre_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct spyre_bo, gem);
}

/* spyre_gem.c */
struct drm_gem_object *spyre_gem_create_object(struct drm_device *drm,
					       size_t size);
struct drm_gem_object *
spyre_gem_prime_import_sg_table(struct drm_device *drm,
				struct dma_buf_attachment *attach,
				struct sg_table *sgt);
struct drm_gem_object *spyre_gem_prime_import(struct drm_device *drm,
					      struct dma_buf *dma_buf);
void spyre_bo_init_common(struct spyre_bo *bo, u32 placement);
int spyre_gem_open(struct drm_gem_object *obj, struct drm_file *file);
void spyre_gem_close(struct drm_gem_object *obj, struct drm_file *file);
void spyre_bo_charge(struct spyre_bo *bo, struct spyre_ctx *owner,
		     size_t size);
void spyre_bo_fini_common(struct spyre_bo *bo);
u64 spyre_max_bo_size(void);
int spyre_ioctl_bo_create(struct drm_device *drm, void *data,
			  struct drm_file *file);
int spyre_ioctl_bo_info(struct drm_device *drm, void *data,
			struct drm_file *file);
int spyre_ioctl_bo_wait(struct drm_device *drm, void *data,
			struct drm_file *file);

/* spyre_devmem.c */
int spyre_devmem_init(struct spyre_device *sdev);
struct spyre_bo *spyre_devmem_bo_create(struct spyre_device *sdev,
					struct spyre_ctx *owner, u64 size);
bool spyre_devmem_dmabuf_owner(struct dma_buf *dma_buf,
			       struct drm_gem_object **obj);

/* spyre_userptr.c */
int spyre_ioctl_bo_userptr(struct drm_device *drm, void *data,
			   struct drm_file *file);

#endif /* SPYRE_GEM_H */
