/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR MIT */
/*
 * Spyre DRM accel driver: ioctl ABI.
 *
 * Conventions (Documentation/process/botching-up-ioctls.rst):
 *  - fixed-size types only, every struct a multiple of 8 bytes and every
 *    __u64 naturally aligned;
 *  - pad and reserved fields must be zero on input (else -EINVAL) and are
 *    written as zero on output;
 *  - flags reject unknown bits with -EINVAL;
 *  - user pointers are passed as __u64;
 *  - timeouts are absolute CLOCK_MONOTONIC nanoseconds (DRM syncobj style).
 *
 * Command streams are described in <drm/spyre_cmd.h>.
 */
#ifndef _UAPI_SPYRE_ACCEL_H
#define _UAPI_SPYRE_ACCEL_H

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define DRM_SPYRE_QUERY			0x00
#define DRM_SPYRE_BO_CREATE		0x01
#define DRM_SPYRE_BO_INFO		0x02
#define DRM_SPYRE_QUEUE_CREATE		0x03
#define DRM_SPYRE_QUEUE_DESTROY		0x04
#define DRM_SPYRE_SUBMIT		0x05

#define DRM_IOCTL_SPYRE_QUERY \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_QUERY, struct drm_spyre_query)
#define DRM_IOCTL_SPYRE_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_BO_CREATE, \
		 struct drm_spyre_bo_create)
#define DRM_IOCTL_SPYRE_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_BO_INFO, struct drm_spyre_bo_info)
#define DRM_IOCTL_SPYRE_QUEUE_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_QUEUE_CREATE, \
		 struct drm_spyre_queue_create)
#define DRM_IOCTL_SPYRE_QUEUE_DESTROY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_SPYRE_QUEUE_DESTROY, \
		struct drm_spyre_queue_destroy)
#define DRM_IOCTL_SPYRE_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_SUBMIT, struct drm_spyre_submit)

/* ---- DRM_IOCTL_SPYRE_QUERY ------------------------------------------- */

#define DRM_SPYRE_QUERY_DEVICE_INFO	1	/* struct drm_spyre_device_info */

/**
 * struct drm_spyre_query - read a block of device information.
 * @query: DRM_SPYRE_QUERY_*; unknown values fail with -EINVAL.
 * @size: in: bytes available at @data; out: bytes the kernel wrote.
 *	With @size == 0 the kernel only stores the full size of the block.
 *	A shorter buffer receives a truncated block (older userspace); a
 *	longer one is written up to the kernel's size.
 * @data: user pointer to the output block.
 * @flags: must be zero.
 * @pad: must be zero.
 *
 * Errors: -EINVAL (bad query, flags or pad), -EFAULT (bad @data),
 * -ENODEV (device unplugged).
 */
struct drm_spyre_query {
	__u32 query;
	__u32 size;
	__u64 data;
	__u32 flags;
	__u32 pad;
};

/**
 * struct drm_spyre_device_info - DRM_SPYRE_QUERY_DEVICE_INFO block.
 * @vendor_id, @device_id: PCI IDs.
 * @subsystem_vendor_id, @subsystem_id: PCI subsystem IDs.
 * @hw_version: card register-interface version, major << 16 | minor.
 * @num_cores: AI cores.
 * @num_queues: hardware queues on the card.
 * @num_contexts: address spaces the card MMU supports.
 * @devmem_size: device memory in bytes.
 * @caps: SPYRE_CAP_* bits (fp16/bf16/fp8/int8, mmu, semaphores).
 * @va_start: lowest device VA handed to BOs, bytes.
 * @va_end: one past the highest device VA, bytes.
 * @max_cmd_size: largest command stream a job may name, bytes.
 * @pci_domain, @pci_bus, @pci_devfn: PCI location.
 * @reserved: written as zero.
 */
struct drm_spyre_device_info {
	__u32 vendor_id;
	__u32 device_id;
	__u32 subsystem_vendor_id;
	__u32 subsystem_id;
	__u32 hw_version;
	__u32 num_cores;
	__u32 num_queues;
	__u32 num_contexts;
	__u64 devmem_size;
	__u64 caps;
	__u64 va_start;
	__u64 va_end;
	__u32 max_cmd_size;
	__u32 pci_domain;
	__u32 pci_bus;
	__u32 pci_devfn;
	__u64 reserved[4];
};

/* ---- DRM_IOCTL_SPYRE_BO_CREATE / BO_INFO ------------------------------ */

/**
 * struct drm_spyre_bo_create - create a buffer object mapped into the
 * caller's device address space.
 * @size: in: bytes (> 0); rounded up to the 4 KiB page size. Out: the
 *	rounded size.
 * @flags: must be zero (placement flags come with device memory).
 * @handle: out: GEM handle, owned by the calling file.
 * @va: out: device VA of the first byte, 4 KiB aligned.  Every BO is
 *	followed by at least one unmapped guard page.
 *
 * System-memory BOs are shmem-backed and zero-filled.
 * Errors: -EINVAL (size 0, flags, pad), -E2BIG (size above the limit),
 * -ENOMEM (out of memory or VA space), -ENODEV.
 */
struct drm_spyre_bo_create {
	__u64 size;
	__u32 flags;
	__u32 handle;
	__u64 va;
};

/**
 * struct drm_spyre_bo_info - describe a BO of the calling file.
 * @handle: GEM handle.
 * @flags: must be zero.
 * @size: out: bytes.
 * @va: out: device VA in the caller's address space, 0 for an imported BO
 *	that is not mapped.
 * @mmap_offset: out: offset to pass to mmap(2) on the accel fd.  Only
 *	MAP_SHARED mappings are allowed.
 *
 * Errors: -EINVAL (flags), -ENOENT (bad handle), -ENOMEM.
 */
struct drm_spyre_bo_info {
	__u32 handle;
	__u32 flags;
	__u64 size;
	__u64 va;
	__u64 mmap_offset;
};

/* ---- DRM_IOCTL_SPYRE_QUEUE_CREATE / DESTROY --------------------------- */

#define DRM_SPYRE_PRIORITY_LOW		0
#define DRM_SPYRE_PRIORITY_NORMAL	1
#define DRM_SPYRE_PRIORITY_HIGH		2

/**
 * struct drm_spyre_queue_create - create a command queue on its own
 * hardware queue.
 * @priority: DRM_SPYRE_PRIORITY_*.
 * @flags: must be zero.
 * @queue_id: out: id (> 0) naming the queue in this file.
 * @pad: must be zero.
 *
 * Errors: -EINVAL, -EBUSY (no hardware queue free), -ENOMEM, -ENODEV.
 */
struct drm_spyre_queue_create {
	__u32 priority;
	__u32 flags;
	__u32 queue_id;
	__u32 pad;
};

/**
 * struct drm_spyre_queue_destroy - destroy a queue; jobs already
 * submitted complete (or are cancelled) and their fences signal.
 * @queue_id: from QUEUE_CREATE.
 * @pad: must be zero.
 *
 * Errors: -EINVAL (pad), -ENOENT (no such queue).
 */
struct drm_spyre_queue_destroy {
	__u32 queue_id;
	__u32 pad;
};

/* ---- DRM_IOCTL_SPYRE_SUBMIT ------------------------------------------- */

/**
 * struct drm_spyre_sync - a syncobj to wait on or signal.
 * @handle: syncobj handle.
 * @flags: must be zero.
 * @point: timeline point, 0 for a binary syncobj.
 */
struct drm_spyre_sync {
	__u32 handle;
	__u32 flags;
	__u64 point;
};

/**
 * struct drm_spyre_job - one job of a submission.
 * @queue_id: queue to run on.
 * @flags: must be zero.
 * @cmd_va: device VA of the command stream, 8-byte aligned.
 * @cmd_size: bytes, multiple of 8, 8..max_cmd_size.
 * @bo_count: number of entries at @bo_handles.
 * @bo_handles: user pointer to __u32 GEM handles the job uses; they stay
 *	alive until the job ends.
 * @in_syncs: user pointer to struct drm_spyre_sync the job waits for.
 * @out_syncs: user pointer to struct drm_spyre_sync signalled (binary) or
 *	given a point (timeline) with the job's fence.
 * @in_sync_count, @out_sync_count: entries at @in_syncs / @out_syncs.
 * @seqno: out: the job's sequence number on its queue.
 */
struct drm_spyre_job {
	__u32 queue_id;
	__u32 flags;
	__u64 cmd_va;
	__u32 cmd_size;
	__u32 bo_count;
	__u64 bo_handles;
	__u64 in_syncs;
	__u64 out_syncs;
	__u32 in_sync_count;
	__u32 out_sync_count;
	__u64 seqno;
};

/**
 * struct drm_spyre_submit - submit an array of jobs.
 * @jobs: user pointer to @job_count jobs, @job_stride bytes apart.
 * @job_count: 1..DRM_SPYRE_MAX_JOBS.
 * @job_stride: sizeof(struct drm_spyre_job) the caller was built with;
 *	smaller than the kernel's struct means trailing fields are zero,
 *	larger is accepted only if the extra bytes are zero.
 * @flags: must be zero.
 * @pad: must be zero.
 *
 * Jobs are validated one by one and queued in order; on an error the
 * ioctl returns it and @job_count is set to the number of jobs queued.
 * A job's fence signals with an error when the job fails on the card
 * (-EIO for invalid commands, -EFAULT for MMU faults, -ECANCELED when the
 * context was already in error).
 * Errors: -EINVAL, -ENOENT (bad queue, BO or syncobj handle), -EFAULT,
 * -ENOMEM, -ECANCELED (the context hit an error earlier: sticky), -ENODEV.
 */
struct drm_spyre_submit {
	__u64 jobs;
	__u32 job_count;
	__u32 job_stride;
	__u32 flags;
	__u32 pad;
};

#define DRM_SPYRE_MAX_JOBS		256
#define DRM_SPYRE_MAX_BOS_PER_JOB	4096
#define DRM_SPYRE_MAX_SYNCS_PER_JOB	64

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_SPYRE_ACCEL_H */
