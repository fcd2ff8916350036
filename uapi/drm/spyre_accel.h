/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR MIT */
/*
 * Spyre DRM accel driver: ioctl ABI.  Command streams are described in
 * <drm/spyre_cmd.h>.
 */

/**
 * DOC: Spyre uapi conventions
 *
 * The structs follow Documentation/process/botching-up-ioctls.rst:
 *
 *  - fixed-size types only, every struct a multiple of 8 bytes and every
 *    __u64 naturally aligned;
 *  - pad and reserved fields must be zero on input (else -EINVAL) and are
 *    written as zero on output;
 *  - flags reject unknown bits with -EINVAL;
 *  - user pointers are passed as __u64;
 *  - timeouts are absolute CLOCK_MONOTONIC nanoseconds (DRM syncobj style).
 *
 * The ioctls need no DRM authentication: any user who can open the accel
 * node (/dev/accel/accelN, usually group-owned) may use them.
 */

/**
 * DOC: Spyre contexts, memory, queues and errors
 *
 * Every open file of a card is one context: a hardware context with its
 * own device address space (VM), walked by the card's MMU.  A job can
 * reach only its own context's memory.
 *
 * A BO (system memory, device memory, registered user memory or an
 * imported dma-buf) gets a device VA in every file that holds a handle to
 * it, when the handle is made; each BO is followed by at least one
 * unmapped guard page, so an operand that runs past its BO faults.  Closing
 * the last handle unmaps the BO and waits for the card's TLB invalidation;
 * jobs keep the BOs they list alive until they end.
 *
 * A file creates queues (QUEUE_CREATE), each with a priority, each on a
 * hardware queue of its own with its own scheduler: a queue that waits,
 * faults or hangs never holds up another.  So that one user cannot take
 * the card from the others, a file holds at most max_queues_per_file
 * queues and max_devmem_per_file_mb of device memory (module parameters,
 * 16 and no cap by default); past them QUEUE_CREATE and BO_CREATE fail
 * with -EDQUOT, distinct from the card being full (-EBUSY, -ENOMEM).
 * Device memory is not charged to a memory cgroup: Linux 6.12 has no
 * cgroup controller for device memory.  SUBMIT queues jobs that wait on
 * syncobjs (binary or timeline points) and signal them; fences end with
 * 0 or with the job's error.
 *
 * Errors are sticky per context, and only the guilty context gets one: a
 * job that faults (-EFAULT), runs an invalid command (-EIO; a kernel:
 * -ENOEXEC, -ERANGE, -EDOM, see QUERY_CONTEXT) or hangs past
 * the driver's job timeout (-ETIMEDOUT; a SEM_WAIT never satisfied is such
 * a hang: every job ends by the timeout) ends with that error, the
 * context's other queued jobs end with -ECANCELED, and every later SUBMIT
 * of the file fails with -ECANCELED until the file is closed and the
 * device opened again (QUERY_CONTEXT reports the error and the first
 * fault).  Other contexts carry on.
 *
 * Resets lose no work that can be kept.  The card is reset by a PCI
 * function reset (sysfs "reset"), by AER recovery after a PCIe error, or
 * by the driver itself when the
 * card reports a fatal error, a queue will not stop or a completion
 * record cannot be trusted.  Then:
 *
 *  - jobs that had ended keep their result; jobs that had not started are
 *    run again after the reset, as if nothing happened;
 *  - a job the reset interrupted (or whose end the card reported in a
 *    record that could not be trusted) is run again from its start if it
 *    was submitted with DRM_SPYRE_JOB_RESTARTABLE, else its fence ends
 *    with -ECANCELED;
 *  - nobody is guilty of an administrator's reset or a device error: no
 *    context gets a sticky error from it, and -ECANCELED fences are the
 *    only trace.  A hang whose queue cannot be stopped is the hung job's
 *    context's fault (-ETIMEDOUT, sticky) and the card reset is recovery.
 *
 * Resets are counted in QUERY_HEALTH and sysfs ("resets") and announced
 * with a KOBJ_CHANGE uevent on the accel device (RESET=1, SPYRE_REASON=).
 * A device-memory BO created during a reset waits for it to end.  After
 * the card is unplugged every ioctl fails with -ENODEV and every pending
 * fence signals with an error.
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
#define DRM_SPYRE_BO_USERPTR		0x06
#define DRM_SPYRE_BO_WAIT		0x07

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
#define DRM_IOCTL_SPYRE_BO_USERPTR \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_BO_USERPTR, \
		 struct drm_spyre_bo_userptr)
#define DRM_IOCTL_SPYRE_BO_WAIT \
	DRM_IOW(DRM_COMMAND_BASE + DRM_SPYRE_BO_WAIT, struct drm_spyre_bo_wait)

/* ---- DRM_IOCTL_SPYRE_QUERY ------------------------------------------- */

#define DRM_SPYRE_QUERY_DEVICE_INFO	1	/* struct drm_spyre_device_info */
#define DRM_SPYRE_QUERY_MEMORY		2	/* struct drm_spyre_memory_info */
#define DRM_SPYRE_QUERY_CONTEXT		3	/* struct drm_spyre_context_info */
#define DRM_SPYRE_QUERY_HEALTH		4	/* struct drm_spyre_health_info */

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

/*
 * Capability bits of drm_spyre_device_info.caps.  The kernel translates the
 * card's capability register into these; a bit it does not know is not
 * reported.
 */
#define DRM_SPYRE_CAP_FP16		(1ULL << 0)
#define DRM_SPYRE_CAP_BF16		(1ULL << 1)
#define DRM_SPYRE_CAP_FP8		(1ULL << 2)
#define DRM_SPYRE_CAP_INT8		(1ULL << 3)
#define DRM_SPYRE_CAP_MMU		(1ULL << 4)
#define DRM_SPYRE_CAP_SEM		(1ULL << 5)
#define DRM_SPYRE_CAP_KERNEL		(1ULL << 6)	/* KERNEL command */

/**
 * struct drm_spyre_device_info - DRM_SPYRE_QUERY_DEVICE_INFO block.
 * @vendor_id: PCI vendor ID (0x1014).
 * @device_id: PCI device ID (0x06a7).
 * @subsystem_vendor_id: PCI subsystem vendor ID.
 * @subsystem_id: PCI subsystem ID.
 * @hw_version: card register-interface version, major << 16 | minor.
 * @num_cores: AI cores.
 * @num_queues: hardware queues on the card.
 * @num_contexts: address spaces the card MMU supports.
 * @devmem_size: device memory in bytes.
 * @caps: DRM_SPYRE_CAP_* bits.
 * @va_start: lowest device VA handed to BOs, bytes.
 * @va_end: one past the highest device VA, bytes.
 * @max_cmd_size: largest command stream a job may name, bytes.
 * @pci_domain: PCI domain.
 * @pci_bus: PCI bus.
 * @pci_devfn: PCI device and function (PCI_DEVFN encoding).
 * @max_jobs: most jobs one SUBMIT accepts (struct drm_spyre_submit).
 * @max_bos_per_job: most BO references one job may list.
 * @max_syncs_per_job: most in-syncs, and most out-syncs, of one job.
 * @pad: written as zero.
 * @reserved: written as zero.
 *
 * The limits are the kernel's, not the card's, and may grow in later
 * kernels: userspace reads them here rather than assuming values.
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
	__u32 max_jobs;
	__u32 max_bos_per_job;
	__u32 max_syncs_per_job;
	__u32 pad;
	__u64 reserved[2];
};

/**
 * struct drm_spyre_memory_info - DRM_SPYRE_QUERY_MEMORY block (bytes).
 * @devmem_total: device memory the driver manages.
 * @devmem_used: device memory held by BOs of all files.
 * @sysmem_used: system memory held by shmem BOs of all files.
 * @userptr_used: user memory pinned by userptr BOs of all files.
 * @file_devmem_used: device memory held by BOs created by this file.
 * @file_sysmem_used: system memory held by BOs created by this file.
 * @file_userptr_used: user memory pinned by this file.
 * @max_bo_size: largest system-memory BO that BO_CREATE accepts.
 * @reserved: written as zero.
 *
 * The same device-wide figures are in sysfs under the PCI device:
 * mem_devmem_total, mem_devmem_used, mem_sysmem_used, mem_userptr_used.
 */
struct drm_spyre_memory_info {
	__u64 devmem_total;
	__u64 devmem_used;
	__u64 sysmem_used;
	__u64 userptr_used;
	__u64 file_devmem_used;
	__u64 file_sysmem_used;
	__u64 file_userptr_used;
	__u64 max_bo_size;
	__u64 reserved[4];
};

/**
 * struct drm_spyre_context_info - DRM_SPYRE_QUERY_CONTEXT block: the state
 * of the calling file's context.
 * @error: 0, or the sticky negative errno of the first job that failed
 *	(-EFAULT MMU fault, -EIO invalid command, -ETIMEDOUT hang,
 *	-ECANCELED work lost to a device reset; kernels: -ENOEXEC program
 *	refused, -ERANGE access out of an operand's extent, -EDOM failed
 *	CHECK).  Once set, SUBMIT fails
 *	with -ECANCELED until the file is closed.
 * @context_id: the card's address-space id of this file.
 * @faults: MMU faults taken by this context.
 * @fault_va: device VA of the first fault, 0 if none.
 * @job_status: when @error came from a job the card ended with an error,
 *	that job's SPYRE_STATUS_* (drm/spyre_cmd.h), else 0.  This and the
 *	next three fields were reserved[0..2] (older kernels write them as
 *	zero).
 * @job_cmd_offset: that job's completion record's command offset.
 * @job_detail: its detail (for a kernel: the failing instruction and
 *	operand, or the verifier's reason; docs/spyre-hw.rst).
 * @job_detail2: its detail2 (for a kernel access: the element offset).
 * @reserved: written as zero.
 */
struct drm_spyre_context_info {
	__s32 error;
	__u32 context_id;
	__u64 faults;
	__u64 fault_va;
	__u32 job_status;
	__u32 job_cmd_offset;
	__u64 job_detail;
	__u64 job_detail2;
	__u64 reserved[2];
};

/**
 * struct drm_spyre_health_info - DRM_SPYRE_QUERY_HEALTH block: what the
 * card and the driver went through since the driver bound the card.
 * Counters only grow (until the driver is unbound).
 * @resets: card resets: PCI function resets and the driver's recoveries.
 * @recoveries: of @resets, those the driver made itself (fatal error,
 *	queue that would not stop, untrusted completion record).
 * @fatal_errors: fatal errors the card reported.
 * @hangs: jobs that ran past the job timeout.
 * @lost_irqs: completions found by the driver's poll, their interrupt
 *	never having come.
 * @spurious_irqs: completion interrupts that found nothing new to
 *	signal: duplicates, and ones a previous interrupt already served.
 * @corrupt_completions: completion records rejected (seqno or status
 *	out of range).
 * @jobs_replayed: jobs run again after a reset (not started, or
 *	interrupted and restartable).
 * @jobs_lost: jobs ended with -ECANCELED by a reset (interrupted, not
 *	restartable).
 * @aer_errors: PCIe errors (AER) the PCI core reported to the driver.
 * @reserved: written as zero.
 */
struct drm_spyre_health_info {
	__u64 resets;
	__u64 recoveries;
	__u64 fatal_errors;
	__u64 hangs;
	__u64 lost_irqs;
	__u64 spurious_irqs;
	__u64 corrupt_completions;
	__u64 jobs_replayed;
	__u64 jobs_lost;
	__u64 aer_errors;
	__u64 reserved[6];
};

/* ---- DRM_IOCTL_SPYRE_BO_CREATE / BO_INFO ------------------------------ */

/**
 * struct drm_spyre_bo_create - create a buffer object mapped into the
 * caller's device address space.
 * @size: in: bytes (> 0); rounded up to the 4 KiB page size. Out: the
 *	rounded size.
 * @flags: DRM_SPYRE_BO_* placement; unknown bits fail with -EINVAL.
 * @handle: out: GEM handle, owned by the calling file.
 * @va: out: device VA of the first byte, 4 KiB aligned.  Every BO is
 *	followed by at least one unmapped guard page.
 *
 * System-memory BOs (the default) are shmem-backed, charged to the
 * caller's memory cgroup and zero-filled.  Device-memory BOs
 * (DRM_SPYRE_BO_DEVICE) are carved from the card's memory and cleared
 * before the caller can see them (a BO created while the card's PCI
 * function resets waits for the reset to end); their CPU mapping is
 * write-combined.  Every handle to a BO in a file (created, imported through PRIME or
 * flink) gets a VA in that file's address space.
 *
 * Dma-buf (DRM PRIME ioctls): any BO but a userptr one can be exported.
 * A system-memory BO imports into any Spyre card; a device-memory BO only
 * into the card that owns it (another card gets -EOPNOTSUPP, and so does
 * any other device attaching to it).  Foreign dma-bufs (dma-heap, udmabuf,
 * other drivers) import as system memory.
 *
 * Errors: -EINVAL (size 0, flags), -E2BIG (size above max_bo_size, or
 * above device memory, which is 0 on a card without usable device memory),
 * -EDQUOT (device memory only: the file's device-memory BOs would exceed
 * max_devmem_per_file_mb, a module parameter), -ENOMEM (out of memory,
 * device memory or VA space: the card is full), -EIO (device memory
 * only: the card's memory BAR does not decode, so the memory could not be
 * cleared; the card is in an error state), -EINTR (fatal signal while
 * waiting for a reset), -ENODEV.
 */
struct drm_spyre_bo_create {
	__u64 size;
	__u32 flags;
	__u32 handle;
	__u64 va;
};

#define DRM_SPYRE_BO_DEVICE		(1U << 0)	/* device memory */

/* Placement reported by BO_INFO. */
#define DRM_SPYRE_PLACEMENT_SYSTEM	1	/* shmem */
#define DRM_SPYRE_PLACEMENT_DEVICE	2	/* card memory */
#define DRM_SPYRE_PLACEMENT_USERPTR	3	/* pinned user memory */
#define DRM_SPYRE_PLACEMENT_IMPORTED	4	/* foreign dma-buf */

/**
 * struct drm_spyre_bo_info - describe a BO of the calling file.
 * @handle: GEM handle.
 * @flags: must be zero.
 * @size: out: bytes.
 * @va: out: device VA in the caller's address space.
 * @mmap_offset: out: offset to pass to mmap(2) on the accel fd.  Only
 *	MAP_SHARED mappings are allowed (MAP_PRIVATE gets -EINVAL); userptr
 *	BOs have none (0: map the original memory instead).
 * @placement: out: DRM_SPYRE_PLACEMENT_*.
 * @pad: must be zero; written as zero.
 *
 * Errors: -EINVAL (flags, pad), -ENOENT (bad handle), -ENOMEM.
 */
struct drm_spyre_bo_info {
	__u32 handle;
	__u32 flags;
	__u64 size;
	__u64 va;
	__u64 mmap_offset;
	__u32 placement;
	__u32 pad;
};

/**
 * struct drm_spyre_bo_userptr - register ordinary user memory as a BO.
 * @user_ptr: start of the range, 4 KiB aligned, anonymous or shmem memory
 *	of the calling process.
 * @size: bytes, > 0, multiple of 4 KiB.
 * @flags: DRM_SPYRE_USERPTR_READONLY: the card may only read the range
 *	(required for read-only memory); unknown bits fail with -EINVAL.
 * @handle: out: GEM handle.
 * @va: out: device VA of @user_ptr in the caller's address space.
 *
 * The pages are pinned (pin_user_pages, FOLL_LONGTERM) until the BO is
 * freed and mapped for the card without a copy; the process keeps using
 * the range as usual.  Pinned pages count against the calling process's
 * RLIMIT_MEMLOCK (charged to its mm's pinned memory, as RDMA and VFIO do;
 * CAP_IPC_LOCK lifts the limit) until the BO is freed.  The BO cannot be
 * mmap'ed through the accel fd (mmap_offset is 0) or exported (PRIME
 * export fails with -EOPNOTSUPP).
 * Errors: -EINVAL (alignment, size 0, flags), -EFAULT (range not mapped
 * or not pinnable, e.g. I/O or a writable file mapping, or read-only
 * without READONLY), -E2BIG (above max_bo_size), -ENOMEM (out of memory,
 * or the process's pinned memory would exceed RLIMIT_MEMLOCK).
 */
struct drm_spyre_bo_userptr {
	__u64 user_ptr;
	__u64 size;
	__u32 flags;
	__u32 handle;
	__u64 va;
};

#define DRM_SPYRE_USERPTR_READONLY	(1U << 0)

/**
 * struct drm_spyre_bo_wait - wait until no job uses a BO.
 * @handle: GEM handle.
 * @flags: must be zero.
 * @timeout_ns: absolute CLOCK_MONOTONIC deadline in ns; 0 polls.
 *
 * Waits for every fence in the BO's reservation object (jobs that listed
 * it).  Errors: -ENOENT (bad handle), -EINVAL (flags), -ETIME (deadline
 * passed with jobs still running), -EINTR (signal; the deadline is
 * absolute, so the call can simply be repeated).
 */
struct drm_spyre_bo_wait {
	__u32 handle;
	__u32 flags;
	__s64 timeout_ns;
};

/* ---- DRM_IOCTL_SPYRE_QUEUE_CREATE / DESTROY --------------------------- */

#define DRM_SPYRE_PRIORITY_LOW		0
#define DRM_SPYRE_PRIORITY_NORMAL	1
#define DRM_SPYRE_PRIORITY_HIGH		2

/**
 * struct drm_spyre_queue_create - create a command queue on its own
 * hardware queue.
 * @priority: DRM_SPYRE_PRIORITY_*.  DRM_SPYRE_PRIORITY_HIGH needs
 *	CAP_SYS_NICE (the card serves high-priority queues first, so they
 *	can starve other users): without it, -EACCES.
 * @flags: must be zero.
 * @queue_id: out: id (> 0) naming the queue in this file.
 * @pad: must be zero.
 *
 * Errors: -EINVAL, -EACCES (HIGH without CAP_SYS_NICE), -EDQUOT (the
 * file holds max_queues_per_file queues already, a module parameter),
 * -EBUSY (no hardware queue free on the card), -ENOMEM, -ENODEV.
 */
struct drm_spyre_queue_create {
	__u32 priority;
	__u32 flags;
	__u32 queue_id;
	__u32 pad;
};

/**
 * struct drm_spyre_queue_destroy - destroy a queue; jobs already
 * submitted are cancelled and their fences signal: -ECANCELED for jobs
 * the card had, -ESRCH for jobs not handed to it yet (those waiting for
 * their in-fences signal once those fences have).
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

/* drm_spyre_sync.flags, in-syncs only. */
#define DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT	(1U << 0)

/**
 * struct drm_spyre_sync - a syncobj to wait on or signal.
 * @handle: syncobj handle.
 * @flags: in-syncs: 0, or DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT to let SUBMIT
 *	block until a fence exists for the point (another thread may not
 *	have submitted its job yet), as DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
 *	does for SYNCOBJ_WAIT.  SUBMIT does all these waits first, before it
 *	queues anything, skipping points that an earlier job of the same
 *	SUBMIT signals (same handle: binary, or a point at or past this
 *	one).  A wait gives up with -ETIME after the DRM core's timeout (5 s
 *	in 6.12); a signal restarts the ioctl (nothing was queued).  Without
 *	the flag, a point (or binary syncobj) with no fence yet fails with
 *	-EINVAL.  Out-syncs: must be zero.
 * @point: timeline point, 0 for a binary syncobj.
 */
struct drm_spyre_sync {
	__u32 handle;
	__u32 flags;
	__u64 point;
};

/* drm_spyre_bo_ref.flags: how the job's commands use the BO. */
#define DRM_SPYRE_BO_REF_READ		(1U << 0)
#define DRM_SPYRE_BO_REF_WRITE		(1U << 1)

/**
 * struct drm_spyre_bo_ref - a BO a job uses.
 * @handle: GEM handle of the calling file.
 * @flags: DRM_SPYRE_BO_REF_READ, DRM_SPYRE_BO_REF_WRITE or both; 0 or an
 *	unknown bit fails with -EINVAL.
 *
 * The BO stays alive and mapped until the job ends.  The job's fence goes
 * into the BO's reservation object as a writer (DMA_RESV_USAGE_WRITE) if
 * WRITE is set, else as a reader (DMA_RESV_USAGE_READ): BO_WAIT and
 * dma-buf importers honour that.  The card does not enforce the flags (its
 * MMU enforces the mapping's permission): a job that writes a BO it listed
 * as READ only misleads implicit synchronisation.
 */
struct drm_spyre_bo_ref {
	__u32 handle;
	__u32 flags;
};

/**
 * struct drm_spyre_job - one job of a submission.
 * @queue_id: queue to run on.
 * @flags: DRM_SPYRE_JOB_*; unknown bits fail with -EINVAL.
 * @cmd_va: device VA of the command stream, 8-byte aligned.
 * @cmd_size: bytes, multiple of 8, 8..max_cmd_size.
 * @bo_count: entries at @bos, at most device_info.max_bos_per_job.
 * @bos: user pointer to struct drm_spyre_bo_ref: the BOs the job uses.
 * @in_syncs: user pointer to struct drm_spyre_sync the job waits for.
 * @out_syncs: user pointer to struct drm_spyre_sync signalled (binary) or
 *	given a point (timeline) with the job's fence.
 * @in_sync_count: entries at @in_syncs, at most max_syncs_per_job.
 * @out_sync_count: entries at @out_syncs, at most max_syncs_per_job.
 * @seqno: out: the job's sequence number on its queue.
 */
struct drm_spyre_job {
	__u32 queue_id;
	__u32 flags;
	__u64 cmd_va;
	__u32 cmd_size;
	__u32 bo_count;
	__u64 bos;
	__u64 in_syncs;
	__u64 out_syncs;
	__u32 in_sync_count;
	__u32 out_sync_count;
	__u64 seqno;
};

/*
 * The job may be run again from its start if a reset interrupts it: it
 * does not read what it writes (no command's output overlaps an input of
 * the same or an earlier command, and no semaphore it waits on is one it
 * changes), so a second run gives the same result.  Without the flag an
 * interrupted job's fence ends with -ECANCELED, and so it does with the
 * flag once resets interrupted it four times (three reruns).
 */
#define DRM_SPYRE_JOB_RESTARTABLE	(1U << 0)

/**
 * struct drm_spyre_submit - submit an array of jobs.
 * @jobs: user pointer to @job_count jobs, @job_stride bytes apart.
 * @job_count: 1..device_info.max_jobs.
 * @job_stride: sizeof(struct drm_spyre_job) the caller was built with:
 *	a multiple of 8, at least 24 (through @cmd_size) and at most 4096;
 *	smaller than the kernel's struct means trailing fields are zero
 *	(and @seqno is not written back), larger is accepted only if the
 *	extra bytes are zero.
 * @flags: 0 or DRM_SPYRE_SUBMIT_ALL_OR_NOTHING; other bits fail with
 *	-EINVAL.
 * @error_index: in: must be zero.  Out, with DRM_SPYRE_SUBMIT_ALL_OR_NOTHING
 *	only, when the call fails: the index of the job the error is about,
 *	0xffffffff when it is about none in particular (the call's own
 *	fields, memory for the job array, a context already in error), or
 *	@job_count when every job was queued and only the write-back of the
 *	seqnos failed (-EFAULT; see below).
 *
 * Without flags (the ABI before driver minor version 3), jobs are
 * validated one by one and queued in order; on an error the ioctl
 * returns it and @job_count is set to the number of jobs queued.
 *
 * With DRM_SPYRE_SUBMIT_ALL_OR_NOTHING (driver minor version 3 and later;
 * older kernels reject the flag with -EINVAL) every job of the batch is
 * checked and prepared (queue, BOs, syncobjs and timeline points, memory)
 * before any is queued: on an error nothing is queued, @job_count is left
 * as it was and @error_index names the job.  An in-sync that an earlier
 * job of the same batch signals waits for that job, as without the flag.
 * Once the first job is queued nothing can fail but the write-back of
 * the seqnos to the job array (a stride that holds @seqno): if that
 * faults (the array was made read-only or unmapped meanwhile), every job
 * is still queued and runs, its out-syncs signal, and the call returns
 * -EFAULT with @error_index == @job_count.
 * A job's fence signals with an error when the job fails on the card
 * (-EIO for invalid commands, -EFAULT for MMU faults, -ETIMEDOUT for a
 * hang, -ECANCELED when the context was already in error).  An error is
 * not inherited through in-fences: a job of another context waiting on a
 * failed job still runs.
 * Consecutive jobs of one SUBMIT on the same queue may be run by the
 * kernel as one batch: each job's out-syncs still signal when that job
 * ends, but the fence added to the BOs the jobs list is the batch's, so
 * BO_WAIT may also wait for later jobs of the same SUBMIT.
 * Errors: -EINVAL, -ENOENT (bad queue, BO or syncobj handle), -EFAULT,
 * -ENOMEM, -ECANCELED (the context hit an error earlier: sticky), -ENODEV,
 * -ETIME (a DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT wait gave up; nothing queued),
 * -EINTR (a signal during such a wait, with a handler that does not
 * restart system calls; nothing queued, @job_count unchanged).
 */
struct drm_spyre_submit {
	__u64 jobs;
	__u32 job_count;
	__u32 job_stride;
	__u32 flags;
	__u32 error_index;
};

/* drm_spyre_submit.flags: queue every job or none (driver minor >= 3). */
#define DRM_SPYRE_SUBMIT_ALL_OR_NOTHING	(1U << 0)

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_SPYRE_ACCEL_H */
