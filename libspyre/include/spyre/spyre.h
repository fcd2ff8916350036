/* SPDX-License-Identifier: MIT */
/*
 * libspyre - userspace runtime for the Spyre AI accelerator.
 *
 * Conventions (apply to every function below unless its comment says
 * otherwise):
 *  - Functions returning int return 0 (or a documented non-negative value)
 *    on success and a negative errno on failure; spyre_strerror() turns it
 *    into text.  Output parameters are written only on success.
 *  - Sizes and offsets are in bytes, device addresses (VA) are the card's
 *    virtual addresses in bytes, times are in nanoseconds.
 *  - Handles (struct spyre_device, spyre_bo, spyre_queue, spyre_stream,
 *    spyre_event, spyre_graph, spyre_cmdbuf) are opaque.  A handle may be
 *    used from several threads at once, except that it must not be used
 *    after (or concurrently with) the call that frees it.  struct
 *    spyre_cmdbuf is the exception: it is a plain host-side buffer, one
 *    thread at a time.
 *  - Ownership: BOs, queues, streams, events and graphs hold a reference
 *    on their device, so spyre_device_close() may be called before they
 *    are freed; the device file descriptor is closed when the last of them
 *    goes.
 *  - fork(): the device file (and with it the card context) is shared with
 *    a child after fork().  A child must not use handles inherited from
 *    its parent: every call that takes a device-backed handle fails with
 *    -ECHILD in a process other than the one that opened the device.  The
 *    child opens the device again (spyre_device_open()), which gives it its
 *    own context.  Freeing inherited handles in the child is allowed and
 *    only releases the child's memory (no ioctl is made).
 *  - Errors from the card are reported asynchronously through fences: see
 *    spyre_fence_wait().  After a job fails, the kernel marks the context
 *    (the opened device) as broken; later submissions fail with
 *    -ECANCELED until the device is opened again (see spyre_device_error()).
 *    Streams and events report the error they saw (see "Asynchronous
 *    errors" below).
 *
 * Asynchronous errors (streams, events, graphs):
 *  - A stream's error is sticky.  The first job error a stream observes
 *    (spyre_stream_sync(), spyre_stream_query(), or a submission refused
 *    with -ECANCELED) becomes the stream's error, and every later
 *    operation on the stream returns it without submitting anything
 *    (spyre_stream_error() reads it).  The error is the one of the
 *    stream's own failing job (-EFAULT MMU fault, -EIO invalid command,
 *    ...) when that job is among the last 64 the stream submitted, else
 *    -ECANCELED (its work was cancelled because another job of the
 *    context failed).
 *  - An event reports the error of the job that recorded it (the record
 *    job is cancelled, -ECANCELED, when earlier work of its stream failed).
 *  - The context's error is sticky too: spyre_device_error() (what
 *    libspyre saw) and spyre_device_context_info() (what the kernel saw,
 *    including jobs nobody waited for).  Streams refresh it from the
 *    kernel when a submission is refused.
 *  - Only a new context (spyre_device_open()) recovers.
 *
 * Environment:
 *  SPYRE_VISIBLE_DEVICES  comma-separated list of physical device indices
 *	(as ordered by PCI address) that the process may see, in the order
 *	given; e.g. "1,0" swaps two cards, "" hides all of them.  Indices
 *	that do not exist are skipped; a malformed list (not a number,
 *	duplicate) makes discovery fail with -EINVAL.
 */
#ifndef SPYRE_SPYRE_H
#define SPYRE_SPYRE_H

#include <stddef.h>
#include <stdint.h>

/* Command-stream format: SPYRE_OP_*, SPYRE_DTYPE_*, struct spyre_cmd_*. */
#include <drm/spyre_cmd.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(SPYRE_BUILDING_LIBRARY)
#define SPYRE_API __attribute__((visibility("default")))
#else
#define SPYRE_API
#endif

#define SPYRE_VERSION_MAJOR 0
#define SPYRE_VERSION_MINOR 9
#define SPYRE_VERSION_PATCH 0

/** Infinite timeout for the *_wait / *_sync functions. */
#define SPYRE_TIMEOUT_INFINITE UINT64_MAX

/** Bytes of a card page; BO sizes and VAs are multiples of it. */
#define SPYRE_BO_PAGE_SIZE 4096u

/* spyre_device_info.caps bits (the kernel's DRM_SPYRE_CAP_* values). */
#define SPYRE_DEV_CAP_FP16	(1ull << 0)
#define SPYRE_DEV_CAP_BF16	(1ull << 1)
#define SPYRE_DEV_CAP_FP8	(1ull << 2)
#define SPYRE_DEV_CAP_INT8	(1ull << 3)
#define SPYRE_DEV_CAP_MMU	(1ull << 4)
#define SPYRE_DEV_CAP_SEM	(1ull << 5)
#define SPYRE_DEV_CAP_KERNEL	(1ull << 6)	/* KERNEL command (0.8) */

struct spyre_device;
struct spyre_bo;
struct spyre_queue;
struct spyre_stream;
struct spyre_cmdbuf;
struct spyre_event;
struct spyre_graph;

/* ------------------------------------------------------------------ */
/* Library                                                            */
/* ------------------------------------------------------------------ */

/**
 * spyre_version() - library version string, e.g. "0.1.0".
 *
 * Returns a static string; never NULL.
 */
SPYRE_API const char *spyre_version(void);

/**
 * spyre_strerror() - describe an error code returned by libspyre.
 * @err: a negative errno as returned by libspyre (a positive errno is
 *	accepted too).
 *
 * Returns a static, thread-safe string describing the error in terms of
 * this library (for example -ECANCELED: "context is in error after an
 * earlier job failed; reopen the device").  Unknown codes give
 * "unknown error"; 0 gives "success".  Never NULL.
 */
SPYRE_API const char *spyre_strerror(int err);

/* ------------------------------------------------------------------ */
/* Discovery and devices                                              */
/* ------------------------------------------------------------------ */

/**
 * struct spyre_device_desc - a card found by discovery (no open needed).
 * @reserved: zero; room for later fields.
 * @index: logical index (after SPYRE_VISIBLE_DEVICES), for
 *	spyre_device_open().
 * @phys_index: index among all Spyre cards ordered by PCI address.
 * @accel_minor: N of /dev/accel/accelN.
 * @pci_addr: PCI address "dddd:bb:dd.f", NUL-terminated.
 * @devnode: "/dev/accel/accelN", NUL-terminated.
 * @vendor_id: PCI vendor ID, read from sysfs (0x1014).
 * @device_id: PCI device ID, read from sysfs (0x06a7).
 * @subsystem_vendor_id: PCI subsystem vendor ID, read from sysfs.
 * @subsystem_id: PCI subsystem ID, read from sysfs.
 */
struct spyre_device_desc {
	unsigned int index;
	unsigned int phys_index;
	unsigned int accel_minor;
	char pci_addr[16];
	char devnode[32];
	uint16_t vendor_id;
	uint16_t device_id;
	uint16_t subsystem_vendor_id;
	uint16_t subsystem_id;
	uint32_t reserved[8];
};

/**
 * spyre_device_list() - enumerate the visible cards.
 * @descs: array of @max entries to fill (may be NULL when @max is 0).
 * @max: entries available at @descs.
 *
 * Scans /sys/class/accel for Spyre cards (those the spyre driver is bound
 * to: the driver decides which PCI IDs it serves), orders them by PCI
 * address and
 * applies SPYRE_VISIBLE_DEVICES.  The list is re-read on every call, so
 * hot-plugged cards appear and removed ones vanish.
 *
 * Returns the number of visible cards (which may exceed @max; only the
 * first @max are written), or -EINVAL (malformed SPYRE_VISIBLE_DEVICES),
 * -ENOMEM.  A machine without the accel class returns 0.
 */
SPYRE_API int spyre_device_list(struct spyre_device_desc *descs,
				unsigned int max);

/**
 * spyre_device_count() - number of visible cards, or a negative errno.
 */
SPYRE_API int spyre_device_count(void);

/**
 * struct spyre_telemetry - a card's use and health since its driver bound
 *	it, read from sysfs (docs/ABI/sysfs-driver-spyre has each counter).
 * @sample_ns: CLOCK_MONOTONIC time of the read, ns: the growth of a
 *	counter between two samples over the growth of this is a rate
 *	(utilisation = d(active_ns) / d(sample_ns)).
 * @busy_ns: card time jobs ran, summed over hardware queues, ns.
 * @active_ns: card time with at least one job in progress, ns.
 * @jobs_completed: jobs the card ended (any status).
 * @commands_completed: commands the card executed.
 * @bytes_moved: bytes the card's commands read plus wrote.
 * @mmu_faults: MMU faults.
 * @fault_records_lost: fault records the card dropped (FIFO full).
 * @queue_errors: queue-error interrupts (queues halted on a failed job).
 * @jobs_in_flight: jobs submitted and not yet retired (a gauge).
 * @devmem_total: bytes of device memory.
 * @devmem_used: bytes of device memory held by BOs.
 * @sysmem_used: bytes of system memory held by BOs.
 * @userptr_used: bytes of registered (pinned) host memory.
 * @resets: card resets of any origin.
 * @recoveries: resets the driver made itself.
 * @fatal_errors: fatal errors the card reported.
 * @hangs: jobs past the job timeout.
 * @lost_irqs: completions found by polling (interrupt lost).
 * @spurious_irqs: completion interrupts with nothing new (duplicates).
 * @corrupt_completions: completion records rejected.
 * @jobs_replayed: jobs rerun after a reset.
 * @jobs_lost: interrupted jobs a reset ended with -ECANCELED.
 * @aer_errors: PCIe errors reported by the PCI core.
 * @hw_version: interface version, major << 16 | minor.
 * @num_cores: AI cores.
 * @num_queues: hardware queues.
 * @num_contexts: hardware contexts.
 * @runtime_suspended: 1 if the card is runtime-suspended now (its counters
 *	are then those sampled when it suspended), else 0.
 * @reserved: zero.
 */
struct spyre_telemetry {
	uint64_t sample_ns;
	uint64_t busy_ns;
	uint64_t active_ns;
	uint64_t jobs_completed;
	uint64_t commands_completed;
	uint64_t bytes_moved;
	uint64_t mmu_faults;
	uint64_t fault_records_lost;
	uint64_t queue_errors;
	uint64_t jobs_in_flight;
	uint64_t devmem_total;
	uint64_t devmem_used;
	uint64_t sysmem_used;
	uint64_t userptr_used;
	uint64_t resets;
	uint64_t recoveries;
	uint64_t fatal_errors;
	uint64_t hangs;
	uint64_t lost_irqs;
	uint64_t spurious_irqs;
	uint64_t corrupt_completions;
	uint64_t jobs_replayed;
	uint64_t jobs_lost;
	uint64_t aer_errors;
	uint32_t hw_version;
	uint32_t num_cores;
	uint32_t num_queues;
	uint32_t num_contexts;
	uint32_t runtime_suspended;
	uint32_t reserved[7];
};

/**
 * spyre_device_telemetry() - read a card's telemetry without opening it.
 * @desc: the card, from spyre_device_list().
 * @out: filled on success (every field; zero where the driver is too old
 *	to have the attribute).
 *
 * Reads the sysfs attributes of the card's PCI device: no file descriptor
 * is opened on the card and a runtime-suspended card stays suspended.
 * Anyone may call it (the attributes are world-readable).
 * Errors: -EINVAL (NULL argument, or @desc->pci_addr not a PCI address),
 * -ENODEV (the card is gone or its driver is not bound), -EIO (an
 * attribute did not parse).
 */
SPYRE_API int spyre_device_telemetry(const struct spyre_device_desc *desc,
				     struct spyre_telemetry *out);

/**
 * spyre_device_open() - open a card by logical index.
 * @index: 0..spyre_device_count()-1.
 * @out: receives the device handle, to release with spyre_device_close().
 *
 * Each open creates a new context (card address space) with the file
 * descriptor opened O_RDWR | O_CLOEXEC.
 * Errors: -ENODEV (no such index), -EINVAL (bad SPYRE_VISIBLE_DEVICES or
 * NULL @out), -EACCES (no permission on the node), -EPROTO (a spyre
 * driver older than 0.2, which reports no SUBMIT limits), -ENOMEM, or an
 * errno from open(2) / the DEVICE_INFO query.
 */
SPYRE_API int spyre_device_open(unsigned int index, struct spyre_device **out);

/**
 * spyre_device_open_pci() - open a card by PCI address.
 * @pci_addr: "dddd:bb:dd.f" or "bb:dd.f" (domain 0), hex, case-insensitive.
 * @out: receives the device handle.
 *
 * Only visible cards (SPYRE_VISIBLE_DEVICES) can be opened.
 * Errors: -EINVAL (unparsable address), -ENODEV (no visible Spyre card
 * there), as spyre_device_open() otherwise.
 */
SPYRE_API int spyre_device_open_pci(const char *pci_addr,
				    struct spyre_device **out);

/**
 * spyre_device_open_path() - open a card by device node path, bypassing
 * discovery (e.g. "/dev/accel/accel0").
 * @path: the accel node, e.g. "/dev/accel/accel0".
 * @out: receives the device handle; release it with spyre_device_close().
 *
 * The node must belong to the spyre driver (checked with drmGetVersion).
 * Errors: -ENODEV (not a spyre node), errno of open(2).
 */
SPYRE_API int spyre_device_open_path(const char *path,
				     struct spyre_device **out);

/**
 * spyre_device_close() - drop the caller's reference on @dev.
 * @dev: the device (from spyre_device_open()).
 *
 * The file is closed once all BOs, queues and streams of @dev are freed too.
 * NULL is ignored.
 */
SPYRE_API void spyre_device_close(struct spyre_device *dev);

/**
 * struct spyre_device_info - static properties of an opened card.
 * @reserved: zero; room for later fields.
 * @desc: discovery data (index fields are those at open time; for
 *	spyre_device_open_path() index and phys_index are UINT32_MAX).
 * @hw_version: register interface version, major << 16 | minor.
 * @num_cores: AI cores.
 * @num_queues: hardware queues on the card.
 * @num_contexts: address spaces the card MMU supports.
 * @devmem_size: device memory in bytes.
 * @caps: SPYRE_DEV_CAP_* bits (fp16, bf16, fp8, int8, mmu, semaphores,
 *	kernels).
 * @va_start: first device VA handed to BOs, bytes.
 * @va_end: end of the device VA range handed to BOs (exclusive), bytes.
 * @max_cmd_size: largest command stream one job may name, bytes.
 * @pci_domain: PCI domain, as the driver reports it.
 * @pci_bus: PCI bus, as the driver reports it.
 * @pci_devfn: PCI device and function (device << 3 | function).
 * @driver_name: DRM driver name ("spyre").
 * @driver_major: DRM driver version, major.
 * @driver_minor: DRM driver version, minor.
 * @driver_patch: DRM driver version, patch level.
 */
struct spyre_device_info {
	struct spyre_device_desc desc;
	uint32_t hw_version;
	uint32_t num_cores;
	uint32_t num_queues;
	uint32_t num_contexts;
	uint64_t devmem_size;
	uint64_t caps;
	uint64_t va_start;
	uint64_t va_end;
	uint32_t max_cmd_size;
	uint32_t pci_domain;
	uint32_t pci_bus;
	uint32_t pci_devfn;
	char driver_name[32];
	int32_t driver_major;
	int32_t driver_minor;
	int32_t driver_patch;
	uint32_t reserved[9];
};

/**
 * spyre_device_get_info() - copy the card's properties to @info.
 * @dev: the device (from spyre_device_open()).
 * @info: receives the properties.
 *
 * The data is read once at open; the call does not enter the kernel.
 * Errors: -EINVAL (NULL argument), -ECHILD (used after fork()).
 */
SPYRE_API int spyre_device_get_info(struct spyre_device *dev,
				    struct spyre_device_info *info);

/**
 * spyre_device_fd() - the accel file descriptor of @dev, for interop with
 * libdrm (syncobjs, dma-buf).
 * @dev: the device (from spyre_device_open()).
 *
 * Owned by @dev: do not close it.
 * Returns the fd, or -EINVAL / -ECHILD.
 */
SPYRE_API int spyre_device_fd(struct spyre_device *dev);

/**
 * spyre_device_error() - the sticky error of the device's context.
 * @dev: the device (from spyre_device_open()).
 *
 * Returns 0 while no job has failed, else the first job error libspyre
 * observed (from a fence or a -ECANCELED submission), e.g. -EFAULT for an MMU
 * fault.  Once set it stays set: open the device again to recover.
 * Returns -EINVAL / -ECHILD for a bad handle.
 */
SPYRE_API int spyre_device_error(struct spyre_device *dev);

/* ------------------------------------------------------------------ */
/* Buffer objects                                                     */
/* ------------------------------------------------------------------ */

/*
 * Placement flags for spyre_bo_alloc() (equal to DRM_SPYRE_BO_*).
 *  SPYRE_BO_FLAGS_NONE	system memory: shmem pages the card reaches by DMA,
 *			zero-filled, charged to the caller's memory cgroup,
 *			cached CPU mapping.
 *  SPYRE_BO_DEVICE	the card's own memory (LPDDR), cleared before the
 *			caller sees it; the CPU mapping goes through the
 *			PCI BAR and is write-combined (fast to write, slow
 *			to read).  Can be exported as dma-buf only to the
 *			same card.
 */
#define SPYRE_BO_FLAGS_NONE	0u
#define SPYRE_BO_DEVICE		(1u << 0)

/** Flags for spyre_bo_register_host() (equal to DRM_SPYRE_USERPTR_*). */
#define SPYRE_HOST_READONLY	(1u << 0)	/* the card may only read */

/** Where a BO's memory lives: spyre_bo_placement() (DRM_SPYRE_PLACEMENT_*). */
enum spyre_bo_placement {
	SPYRE_PLACEMENT_SYSTEM = 1,	/* shmem system memory */
	SPYRE_PLACEMENT_DEVICE = 2,	/* card memory */
	SPYRE_PLACEMENT_HOST = 3,	/* registered host memory (userptr) */
	SPYRE_PLACEMENT_IMPORTED = 4,	/* foreign dma-buf (dma-heap, udmabuf,
					 * another card's system BO) */
};

/**
 * spyre_bo_alloc() - allocate a zero-filled buffer object mapped at a
 * device VA in @dev's context.
 * @dev: the device (from spyre_device_open()).
 * @size: bytes, > 0; rounded up to SPYRE_BO_PAGE_SIZE (see spyre_bo_size()).
 * @flags: SPYRE_BO_FLAGS_NONE (system memory) or SPYRE_BO_DEVICE.
 * @out: receives the BO; free it with spyre_bo_free().
 *
 * The BO's VA is SPYRE_BO_PAGE_SIZE aligned and followed by at least one
 * unmapped guard page, so a command that runs past the end faults.
 * System BOs are limited to spyre_memory_info.max_bo_size bytes, device
 * BOs to the card's memory.  One ioctl; the CPU mapping is made on the
 * first spyre_bo_map().
 * Errors: -EINVAL (size 0, unknown flags, NULL argument), -E2BIG (above
 * max_bo_size, or a device BO larger than the card's memory), -ENOMEM
 * (out of host memory, free device memory or device VA space), -ECHILD,
 * -ENODEV (card unplugged).
 */
SPYRE_API int spyre_bo_alloc(struct spyre_device *dev, uint64_t size,
			     uint32_t flags, struct spyre_bo **out);

/**
 * spyre_bo_register_host() - let the card use ordinary host memory
 * (malloc'd, mmap'ed anonymous or shmem memory) without a copy.
 * @dev: the device (from spyre_device_open()).
 * @ptr: start of the range, SPYRE_BO_PAGE_SIZE aligned (use
 *	aligned_alloc()/posix_memalign() or mmap()).
 * @size: bytes, > 0, multiple of SPYRE_BO_PAGE_SIZE.
 * @flags: 0, or SPYRE_HOST_READONLY: the card may only read the range (a
 *	card write faults); required for memory mapped without PROT_WRITE.
 * @out: receives the BO (placement SPYRE_PLACEMENT_HOST).
 *
 * The kernel pins the pages (they cannot be swapped or migrated) until
 * spyre_bo_free(), and maps them at a device VA with a guard page after
 * them.  Ownership: the caller keeps the memory and must keep the range
 * mapped until spyre_bo_free() returns; the pinned pages stay what the
 * card sees even if the range is later unmapped or remapped by the
 * process.  The CPU keeps using the range as usual: its writes are seen
 * by jobs submitted afterwards and the card's writes once the job's fence
 * has signalled.  spyre_bo_map() returns @ptr.  Such a BO cannot be
 * exported as dma-buf.  Pinned memory is reported as userptr_used in
 * spyre_device_memory_info().
 * Errors: -EINVAL (NULL or misaligned @ptr, @size 0 or not a page
 * multiple, unknown flags), -EFAULT (part of the range is not mapped, is
 * not anonymous or shmem memory, or is read-only without
 * SPYRE_HOST_READONLY), -E2BIG (above max_bo_size), -ENOMEM (cannot pin:
 * RLIMIT_MEMLOCK, memory cgroup, VA space), -ECHILD, -ENODEV.
 */
SPYRE_API int spyre_bo_register_host(struct spyre_device *dev, void *ptr,
				     uint64_t size, uint32_t flags,
				     struct spyre_bo **out);

/**
 * spyre_bo_free() - unmap @bo from the CPU (if spyre_bo_map() was called) and
 * release its handle.
 * @bo: the buffer object.
 *
 * For a registered host range the pages are unpinned; the memory itself stays
 * the caller's.  The kernel keeps the memory alive for jobs that listed the
 * BO; a job that uses the BO's VA without listing it may fault once it is
 * freed.  NULL is ignored.
 */
SPYRE_API void spyre_bo_free(struct spyre_bo *bo);

/**
 * spyre_bo_map() - map @bo into the process (MAP_SHARED, read/write).
 * @bo: the buffer object.
 * @ptr: receives the address of the first byte; spyre_bo_size() bytes are
 *	accessible.  The mapping is created once and shared by later calls;
 *	it stays valid until spyre_bo_unmap() or spyre_bo_free().  For a
 *	registered host range this is the caller's own pointer.
 * CPU writes are seen by jobs submitted afterwards; card writes are
 * visible once the job's fence has signalled.  Device-memory BOs are
 * mapped write-combined through the card's BAR: reading them from the CPU
 * is slow, copy them to a system BO with the card instead.
 * Errors: -EINVAL, -ECHILD, -EOPNOTSUPP (a BO the driver cannot map),
 * errno of mmap(2) (e.g. -ENOMEM).
 */
SPYRE_API int spyre_bo_map(struct spyre_bo *bo, void **ptr);

/**
 * spyre_bo_unmap() - drop the CPU mapping made by spyre_bo_map(), if any.
 * @bo: the buffer object.
 *
 * Pointers obtained from spyre_bo_map() are invalid afterwards (no other
 * thread may use them meanwhile); a later spyre_bo_map() maps again, possibly
 * at another address.  The BO and its contents are unaffected. Does nothing
 * for a registered host range.
 * Errors: -EINVAL (NULL), -ECHILD.
 */
SPYRE_API int spyre_bo_unmap(struct spyre_bo *bo);

/**
 * spyre_bo_va() - device VA of @bo's first byte (page aligned); 0 for NULL.
 * @bo: the buffer object.
 */
SPYRE_API uint64_t spyre_bo_va(const struct spyre_bo *bo);

/**
 * spyre_bo_size() - size of @bo in bytes (page multiple); 0 for NULL.
 * @bo: the buffer object.
 */
SPYRE_API uint64_t spyre_bo_size(const struct spyre_bo *bo);

/**
 * spyre_bo_handle() - GEM handle of @bo in its device's file; 0 for NULL.
 * @bo: the buffer object.
 */
SPYRE_API uint32_t spyre_bo_handle(const struct spyre_bo *bo);

/**
 * spyre_bo_placement() - where @bo's memory lives: an enum
 * spyre_bo_placement value (as reported by the kernel), or -EINVAL.
 * @bo: the buffer object.
 */
SPYRE_API int spyre_bo_placement(const struct spyre_bo *bo);

/**
 * spyre_bo_wait() - wait until no submitted job that listed @bo (in
 * spyre_submit()'s @bos, or a stream operation on it) is still running:
 * jobs of any queue, and for a buffer shared through dma-buf also the
 * jobs other contexts and cards (and other drivers) run on it.
 * @bo: the buffer object.
 * @timeout_ns: relative timeout in ns; 0 polls; SPYRE_TIMEOUT_INFINITE
 *	waits forever.
 * Returns 0 once idle (also when the jobs failed: their errors are
 * reported by their fences), -ETIMEDOUT if jobs were still running at the
 * deadline, -EINTR (signal), -EINVAL, -ECHILD, -ENOENT (the handle is
 * gone), -ENODEV.
 */
SPYRE_API int spyre_bo_wait(struct spyre_bo *bo, uint64_t timeout_ns);

/* ------------------------------------------------------------------ */
/* dma-buf                                                            */
/* ------------------------------------------------------------------ */

/**
 * spyre_bo_export_dmabuf() - export @bo as a dma-buf.
 * @bo: the buffer object.
 * @fd: receives the dma-buf file descriptor (O_RDWR | O_CLOEXEC), owned
 *	by the caller (close(2) it); it keeps the memory alive on its own.
 *
 * A system-memory BO can be imported by any Spyre card, and by other
 * drivers; a device-memory BO only by the card that owns it.
 * Errors: -EINVAL, -ECHILD, -EOPNOTSUPP (a registered host range),
 * -EMFILE, -ENOMEM, -ENODEV.
 */
SPYRE_API int spyre_bo_export_dmabuf(struct spyre_bo *bo, int *fd);

/**
 * spyre_bo_import_dmabuf() - import a dma-buf into @dev's context.
 * @dev: the device (from spyre_device_open()).
 * @fd: dma-buf file descriptor (from spyre_bo_export_dmabuf() of this or
 *	another card, a /dev/dma_heap heap, /dev/udmabuf, another driver).
 *	Not consumed: the caller still owns and closes it.
 * @out: receives a new BO mapped at a device VA of @dev's context (with a
 *	guard page); free it with spyre_bo_free().  Its memory stays alive
 *	as long as the BO exists, whatever happens to @fd or the exporter.
 *
 * Importing a buffer that @dev's file already holds (e.g. exported from
 * @dev itself) gives a new spyre_bo sharing the kernel handle and VA;
 * each must be freed, the handle goes with the last.  spyre_bo_map()
 * works for Spyre BOs; foreign dma-bufs may refuse it (-EOPNOTSUPP):
 * mmap the dma-buf fd instead.
 * Errors: -EBADF (bad fd), -EINVAL (not a dma-buf, NULL argument),
 * -EOPNOTSUPP (device memory of another card), -ENOMEM, -ECHILD, -ENODEV.
 */
SPYRE_API int spyre_bo_import_dmabuf(struct spyre_device *dev, int fd,
				     struct spyre_bo **out);

/* ------------------------------------------------------------------ */
/* Memory and context state                                           */
/* ------------------------------------------------------------------ */

/**
 * struct spyre_memory_info - memory use of a card, in bytes.
 * @reserved: zero; room for later fields.
 * @devmem_total: device memory the driver manages.
 * @devmem_used: device memory held by BOs of all contexts.
 * @sysmem_used: system memory held by BOs of all contexts.
 * @userptr_used: host memory pinned by registered ranges (all contexts).
 * @file_devmem_used: device memory held by BOs this device handle created.
 * @file_sysmem_used: system memory held by BOs this device handle created.
 * @file_userptr_used: host memory pinned by this device handle.
 * @max_bo_size: largest system-memory BO spyre_bo_alloc() accepts.
 * Imported BOs are counted by the context that created them, once.
 */
struct spyre_memory_info {
	uint64_t devmem_total;
	uint64_t devmem_used;
	uint64_t sysmem_used;
	uint64_t userptr_used;
	uint64_t file_devmem_used;
	uint64_t file_sysmem_used;
	uint64_t file_userptr_used;
	uint64_t max_bo_size;
	uint64_t reserved[8];
};

/**
 * spyre_device_memory_info() - read the card's current memory use.
 * @dev: the device (from spyre_device_open()).
 * @info: receives the memory use.
 *
 * The device-wide figures are also in sysfs (mem_devmem_total,
 * mem_devmem_used, mem_sysmem_used, mem_userptr_used under the PCI device).
 * Errors: -EINVAL, -ECHILD, -ENODEV, -EPROTO (old driver).
 */
SPYRE_API int spyre_device_memory_info(struct spyre_device *dev,
				       struct spyre_memory_info *info);

/**
 * struct spyre_context_info - state of the device handle's context.
 * @reserved: zero; room for later fields.
 * @error: 0, or the sticky error of the first job that failed on the card
 *	(-EFAULT MMU fault, -EIO invalid command, -ETIMEDOUT hang); once
 *	set, submissions fail with -ECANCELED until the device is reopened.
 * @context_id: the card's address-space id of this context.
 * @faults: MMU faults the context has taken.
 * @fault_va: device VA of the first fault, 0 if none.
 */
struct spyre_context_info {
	int32_t error;
	uint32_t context_id;
	uint64_t faults;
	uint64_t fault_va;
	uint64_t reserved[5];
};

/**
 * spyre_device_context_info() - ask the kernel for the context's state.
 * @dev: the device (from spyre_device_open()).
 * @info: receives the context's state.
 *
 * Unlike spyre_device_error(), which reports what libspyre observed, this also
 * sees failures of jobs nobody waited for; a kernel error found here becomes
 * spyre_device_error() too.
 * Errors: -EINVAL, -ECHILD, -ENODEV, -EPROTO (old driver).
 */
SPYRE_API int spyre_device_context_info(struct spyre_device *dev,
					struct spyre_context_info *info);

/* ------------------------------------------------------------------ */
/* Command buffers (pure host-side encoding, no device needed)        */
/* ------------------------------------------------------------------ */

/**
 * spyre_cmdbuf_create() - create an empty, growable command buffer.
 * @out: receives the command buffer; free it with spyre_cmdbuf_destroy().
 *
 * The buffer holds encoded commands in the <drm/spyre_cmd.h> format; it can be
 * submitted many times (spyre_submit()) or written into a BO
 * (spyre_cmdbuf_upload()).
 * Errors: -EINVAL, -ENOMEM.
 */
SPYRE_API int spyre_cmdbuf_create(struct spyre_cmdbuf **out);

/**
 * spyre_cmdbuf_destroy() - free @cb; NULL is ignored.
 * @cb: the command buffer.
 */
SPYRE_API void spyre_cmdbuf_destroy(struct spyre_cmdbuf *cb);

/**
 * spyre_cmdbuf_reset() - drop all commands (and the list of BOs they
 * name, see struct spyre_mem), keep the allocation.
 * @cb: the command buffer.
 */
SPYRE_API void spyre_cmdbuf_reset(struct spyre_cmdbuf *cb);

/**
 * spyre_cmdbuf_size() - bytes of encoded commands (a multiple of 8).
 * @cb: the command buffer.
 */
SPYRE_API size_t spyre_cmdbuf_size(const struct spyre_cmdbuf *cb);

/**
 * spyre_cmdbuf_count() - number of commands encoded.
 * @cb: the command buffer.
 */
SPYRE_API size_t spyre_cmdbuf_count(const struct spyre_cmdbuf *cb);

/**
 * spyre_cmdbuf_data() - the encoded bytes, spyre_cmdbuf_size() long, valid
 * until the next call that modifies @cb.
 * @cb: the command buffer.
 *
 * NULL when empty.
 */
SPYRE_API const void *spyre_cmdbuf_data(const struct spyre_cmdbuf *cb);

/*
 * Encoders.  Each appends one command and returns 0, or -EINVAL for an
 * argument the card would refuse (listed per function) or -ENOMEM; on
 * error @cb is unchanged.  Addresses are device VAs in the context that
 * will run the command; the card checks them with its MMU when it runs.
 */

/**
 * spyre_cmdbuf_nop() - append NOP (8 bytes).
 * @cb: the command buffer.
 */
SPYRE_API int spyre_cmdbuf_nop(struct spyre_cmdbuf *cb);

/**
 * spyre_cmdbuf_fill() - append FILL: @count elements of @elem_size bytes at
 * @dst get the low @elem_size bytes of @value (little-endian).
 * @cb: the command buffer.
 * @dst: device VA of the first element.
 * @count: elements, >= 1.
 * @elem_size: bytes per element: 1, 2, 4 or 8.
 * @value: the pattern; its low @elem_size bytes are stored.
 *
 * -EINVAL: @elem_size not 1, 2, 4 or 8, or @count 0.
 */
SPYRE_API int spyre_cmdbuf_fill(struct spyre_cmdbuf *cb, uint64_t dst,
				uint64_t count, uint32_t elem_size,
				uint64_t value);

/**
 * spyre_cmdbuf_copy() - append a 1-D byte COPY of @size bytes from @src to
 * @dst (U8 -> U8, height 1).
 * @cb: the command buffer.
 * @dst: destination device VA.
 * @src: source device VA.
 * @size: bytes, >= 1.
 *
 * -EINVAL: @size 0.
 */
SPYRE_API int spyre_cmdbuf_copy(struct spyre_cmdbuf *cb, uint64_t dst,
				uint64_t src, uint64_t size);

/**
 * spyre_cmdbuf_copy_2d() - append a 2-D COPY with dtype conversion.
 * @cb: the command buffer.
 * @dst: VA of the destination's element (0, 0).
 * @src: VA of the source's element (0, 0).
 * @dst_pitch: bytes between rows of @dst (ignored when @height is 1).
 * @src_pitch: bytes between rows of @src (ignored when @height is 1).
 * @dst_dtype: SPYRE_DTYPE_*; U8 pairs only with U8 and INT32 only with INT32;
 *	float types and INT8 convert among themselves.
 * @src_dtype: as @dst_dtype.
 * @width: elements per row (>= 1).
 * @height: rows (>= 1).
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 * -EINVAL: zero width/height, bad dtype pair, unknown flags.
 */
SPYRE_API int spyre_cmdbuf_copy_2d(struct spyre_cmdbuf *cb,
				   uint64_t dst, uint64_t dst_pitch,
				   uint32_t dst_dtype,
				   uint64_t src, uint64_t src_pitch,
				   uint32_t src_dtype,
				   uint64_t width, uint64_t height,
				   uint32_t flags);

/**
 * spyre_cmdbuf_timestamp() - append TIMESTAMP: the 64-bit device clock (ns) is
 * written to @dst (8-byte aligned).
 * @cb: the command buffer.
 * @dst: device VA the clock is written to, 8-byte aligned.
 *
 * -EINVAL: misaligned @dst.
 */
SPYRE_API int spyre_cmdbuf_timestamp(struct spyre_cmdbuf *cb, uint64_t dst);

/**
 * spyre_cmdbuf_sem_wait() - append SEM_WAIT: the queue stalls until the 64-bit
 * value at @addr (8-byte aligned) is >= @value.
 * @cb: the command buffer.
 * @addr: device VA of the 64-bit semaphore, 8-byte aligned.
 * @value: the value to wait for (the queue goes on at >= @value).
 *
 * -EINVAL: misaligned @addr.
 */
SPYRE_API int spyre_cmdbuf_sem_wait(struct spyre_cmdbuf *cb, uint64_t addr,
				    uint64_t value);

/**
 * spyre_cmdbuf_sem_signal() - append SEM_SIGNAL: store @value at @addr, or add
 * it atomically when @flags has SPYRE_SEM_F_ADD.
 * @cb: the command buffer.
 * @addr: device VA of the 64-bit semaphore, 8-byte aligned.
 * @value: the value to store, or to add.
 * @flags: 0 or SPYRE_SEM_F_ADD.
 *
 * -EINVAL: misaligned @addr, unknown flags.
 */
SPYRE_API int spyre_cmdbuf_sem_signal(struct spyre_cmdbuf *cb, uint64_t addr,
				      uint64_t value, uint32_t flags);

/**
 * spyre_cmdbuf_raw() - append @size bytes of already encoded command(s)
 * verbatim (for commands without an encoder yet, or tests).
 * @cb: the command buffer.
 * @cmd: the encoded command bytes.
 * @size: bytes, a multiple of 8.
 *
 * -EINVAL: @size 0 or not a multiple of 8, NULL @cmd.
 */
SPYRE_API int spyre_cmdbuf_raw(struct spyre_cmdbuf *cb, const void *cmd,
			       size_t size);

/* ---- Compute commands (0.4) --------------------------------------- */

/**
 * struct spyre_mem - where an operand lives: @offset bytes into @bo, or,
 * when @bo is NULL, the raw device VA @offset.
 * @bo: the BO holding the operand, or NULL.
 * @offset: byte offset into @bo, or a device VA when @bo is NULL.
 *
 * With a BO, the encoders below check that the whole operand (its span
 * from shape, leading dimension and batch stride) lies inside the BO
 * (-ERANGE otherwise), so a wrong shape fails on the host instead of
 * faulting on the card (which would end the context), and they record
 * the BO in the command buffer's BO list (spyre_cmdbuf_bos()), which
 * spyre_submit(), spyre_stream_submit() and spyre_graph_create() list for
 * the job.  No reference is taken: the BO must outlive the command buffer
 * (and any graph made from it).  With a raw VA nothing is checked or
 * recorded.  An optional operand is absent when it equals SPYRE_MEM_NONE
 * (@bo NULL and @offset 0).
 */
struct spyre_mem {
	struct spyre_bo *bo;
	uint64_t offset;
};

/** Operand at byte @off of BO @b. */
#define SPYRE_MEM(b, off)	((struct spyre_mem){ (b), (off) })
/** Operand at the raw device VA @va (not range-checked, not recorded). */
#define SPYRE_MEM_VA(va)	((struct spyre_mem){ NULL, (va) })
/** An absent optional operand. */
#define SPYRE_MEM_NONE		((struct spyre_mem){ NULL, 0 })

/**
 * struct spyre_gemm - one GEMM command (struct spyre_cmd_gemm): C[i] = alpha *
 * sa * sb * op(A[i]) op(B[i]) + beta * C[i] + bias for i in 0..batch-1, op(A)
 * M x K, op(B) K x N, C M x N, all row-major.
 * @flags: SPYRE_GEMM_F_TRANS_A (A stored K x M), SPYRE_GEMM_F_TRANS_B
 *	(B stored N x K), SPYRE_CMD_F_NOSAT (no effect: no GEMM output is fp8).
 * @a_dtype: A's dtype; equal to @b_dtype, one of FP32, FP16, BF16, FP8_E4M3,
 *	FP8_E5M2, INT8; or the mixed pair FP8_E4M3 x FP8_E5M2 (either order).
 * @b_dtype: B's dtype, see @a_dtype.
 * @c_dtype: FP32, FP16 or BF16 for float inputs (fp32 accumulation);
 *	INT32 for INT8 inputs (int32 accumulation, wraps; alpha, scales and
 *	bias are ignored by the card; @beta must be 0 or 1).
 * @bias_dtype: 0 (no bias) or FP32/FP16/BF16; set exactly when @bias is.
 * @m: rows of op(A) and C, >= 1.
 * @n: columns of op(B) and C, >= 1.
 * @k: columns of op(A) and rows of op(B), >= 1.
 * @batch: matrices, 0 is taken as 1.
 * @pad: must be zero.
 * @a: element (0, 0) of matrix 0 of A (required).
 * @b: element (0, 0) of matrix 0 of B (required).
 * @c: element (0, 0) of matrix 0 of C (required).
 * @lda: leading dimension of A in elements; 0 selects the dense value (the
 *	stored row length: K, or M with TRANS_A), else at least that.
 * @ldb: leading dimension of B; 0: dense (N, or K with TRANS_B).
 * @ldc: leading dimension of C; 0: dense (N).
 * @stride_a: elements between consecutive A matrices (used when @batch >
 *	1); 0 broadcasts one A to every batch (attention over heads uses e.g.
 *	stride = head_dim on a [seq x heads*head_dim] matrix).
 * @stride_b: elements between consecutive B matrices; 0 broadcasts one B.
 * @stride_c: elements between consecutive C matrices: they must not
 *	overlap, so @stride_c 0 with @batch > 1 is refused.
 * @alpha: multiplier of the product.
 * @beta: multiplier of C (0: C is not read, so it may hold anything, NaN
 *	included).
 * @scale_a: binary32 per-tensor scale sa of A (4 bytes), or SPYRE_MEM_NONE
 *	for 1.0.  Scaled fp8 GEMM as torch._scaled_mm: A and B hold x / sa and
 *	w / sb in fp8, the card multiplies the scales back.
 * @scale_b: the scale sb of B, as @scale_a.
 * @bias: @n elements of @bias_dtype added to every row, or SPYRE_MEM_NONE.
 * @amax: receives a binary32 max |result| over all batches before the
 *	conversion to @c_dtype (the statistic fp8 scaling recipes need), or
 *	SPYRE_MEM_NONE.
 * @reserved: must be zero.
 *
 * Zero-initialise it and set what you need (designated initialisers).
 */
struct spyre_gemm {
	uint32_t flags;
	uint32_t a_dtype;
	uint32_t b_dtype;
	uint32_t c_dtype;
	uint32_t bias_dtype;
	uint32_t m;
	uint32_t n;
	uint32_t k;
	uint32_t batch;
	uint32_t pad;
	struct spyre_mem a;
	struct spyre_mem b;
	struct spyre_mem c;
	uint64_t lda;
	uint64_t ldb;
	uint64_t ldc;
	uint64_t stride_a;
	uint64_t stride_b;
	uint64_t stride_c;
	float alpha;
	float beta;
	struct spyre_mem scale_a;
	struct spyre_mem scale_b;
	struct spyre_mem bias;
	struct spyre_mem amax;
	uint64_t reserved[4];
};

/*
 * The encoders below return 0, or on error leave @cb unchanged and return
 * -EINVAL (NULL @cb or argument, bad dtype or dtype combination, unknown
 * op or flag, zero size, leading dimension below the row length, missing
 * required operand, non-zero reserved field), -E2BIG (above the card's
 * per-command limits: GEMM batch * M * N * K > 2^36 multiply-adds,
 * ELTWISE/REDUCE/ROWOP more than 2^30 elements, COPY more than 4 GiB),
 * -ERANGE (an operand with a BO does not fit inside it, or its span
 * overflows 64 bits) or -ENOMEM.  Dtypes are SPYRE_DTYPE_*; every size
 * is in elements unless it says bytes; leading dimensions 0 mean dense.
 * These checks cover the arguments; the card still checks addresses.
 */

/**
 * spyre_cmdbuf_gemm() - append a GEMM command (152 bytes) built from @g;
 * see struct spyre_gemm for the fields and their rules.
 * @cb: the command buffer.
 * @g: the GEMM: operands, shapes and dtypes.
 */
SPYRE_API int spyre_cmdbuf_gemm(struct spyre_cmdbuf *cb,
				const struct spyre_gemm *g);

/**
 * spyre_cmdbuf_eltwise() - append ELTWISE (56 bytes): out[i] = f(a[i],
 * b[i]) for i < @count, computed in fp32.
 * @cb: the command buffer.
 * @a: first input operand.
 * @b: second input operand for ADD and MUL; the other ops ignore it.
 * @alpha: SCALE's factor; the other ops ignore it.
 * @op: SPYRE_ELT_ADD, MUL (use @b), SCALE (@alpha * a), RELU, GELU, SILU,
 *	EXP (@b ignored and encoded as 0).
 * @dtype: FP32, FP16 or BF16 for @out, @a and @b.
 * @count: elements, >= 1.
 * @out: may equal @a or @b (in place); other overlaps are undefined.
 */
SPYRE_API int spyre_cmdbuf_eltwise(struct spyre_cmdbuf *cb, uint32_t op,
				   uint32_t dtype, uint64_t count,
				   struct spyre_mem out, struct spyre_mem a,
				   struct spyre_mem b, float alpha);

/**
 * spyre_cmdbuf_reduce() - append REDUCE (48 bytes): dst[r] = sum or max
 * of row r of the @rows x @cols matrix @src (leading dimension @ld),
 * accumulated in fp32.
 * @cb: the command buffer.
 * @rows: rows of @src (elements of @dst), >= 1.
 * @cols: elements per row, >= 1.
 * @dst: output operand, @rows elements.
 * @src: input matrix.
 * @ld: leading dimension of @src in elements (0: @cols).
 * @op: SPYRE_REDUCE_SUM or SPYRE_REDUCE_MAX.
 * @dtype: FP32, FP16 or BF16 for @src and @dst (@rows elements).
 */
SPYRE_API int spyre_cmdbuf_reduce(struct spyre_cmdbuf *cb, uint32_t op,
				  uint32_t dtype, uint32_t rows,
				  uint32_t cols, struct spyre_mem dst,
				  struct spyre_mem src, uint64_t ld);

/**
 * spyre_cmdbuf_rowop() - append ROWOP (80 bytes): a row-wise softmax or
 * normalisation of the @rows x @cols matrix @src into @dst, in fp32.
 * @cb: the command buffer.
 * @rows: rows of the matrix, >= 1.
 * @cols: elements per row, >= 1.
 * @dst: output matrix (may be @src).
 * @src: input matrix.
 * @op: SPYRE_ROW_SOFTMAX (exp(x - max) / sum; @gamma and @beta must be
 *	absent), SPYRE_ROW_LAYERNORM ((x - mean) / sqrt(var + eps) * gamma
 *	+ beta, biased variance), SPYRE_ROW_RMSNORM (x / sqrt(mean(x^2) +
 *	eps) * gamma; @beta must be absent).
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @ld_dst: leading dimension of @dst (0: @cols).  @dst may equal @src.
 * @ld_src: leading dimension of @src (0: @cols).
 * @gamma: binary32 vector of @cols elements, or SPYRE_MEM_NONE (1.0).
 * @beta: binary32 vector of @cols elements, or SPYRE_MEM_NONE (0.0).
 * @eps: >= 0 (a negative or NaN @eps is -EINVAL).
 */
SPYRE_API int spyre_cmdbuf_rowop(struct spyre_cmdbuf *cb, uint32_t op,
				 uint32_t dtype, uint32_t rows, uint32_t cols,
				 struct spyre_mem dst, uint64_t ld_dst,
				 struct spyre_mem src, uint64_t ld_src,
				 struct spyre_mem gamma, struct spyre_mem beta,
				 float eps);

/**
 * spyre_cmdbuf_convert() - append a 1-D COPY of @count elements with dtype
 * conversion (64 bytes): @src of @src_dtype to @dst of @dst_dtype.
 * @cb: the command buffer.
 * @dst: output operand, @count elements of @dst_dtype.
 * @dst_dtype: SPYRE_DTYPE_* of @dst.
 * @src: input operand, @count elements of @src_dtype.
 * @src_dtype: SPYRE_DTYPE_* of @src.
 * @count: elements, >= 1.
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 *
 * U8 pairs only with U8 and INT32 only with INT32 (byte copies); FP32, FP16,
 * BF16, FP8_E4M3, FP8_E5M2 and INT8 convert among themselves with
 * round-to-nearest-even; fp8 narrowing saturates unless @flags has
 * SPYRE_CMD_F_NOSAT.  @dst and @src must not overlap.
 */
SPYRE_API int spyre_cmdbuf_convert(struct spyre_cmdbuf *cb,
				   struct spyre_mem dst, uint32_t dst_dtype,
				   struct spyre_mem src, uint32_t src_dtype,
				   uint64_t count, uint32_t flags);

/* ---- Range-checked data movement (0.5) ---------------------------- */

/*
 * FILL and 2-D COPY with struct spyre_mem operands, for runtimes that put
 * many strided copies into one job (a framework's copy of a
 * non-contiguous tensor is one 2-D COPY per outer index): the operand span
 * is checked against its BO on the host (-ERANGE, instead of a card fault
 * that would end the context) and the BO is recorded in @cb's BO list as
 * for the compute encoders.  Raw VAs (SPYRE_MEM_VA) are not checked.
 */

/**
 * spyre_cmdbuf_fill_mem() - append FILL (40 bytes): @count elements of
 * @elem_size bytes (1, 2, 4 or 8) at @dst get the low @elem_size bytes of
 * @value (little-endian).
 * @cb: the command buffer.
 * @dst: the operand to fill (required).
 * @count: elements, >= 1.
 * @elem_size: bytes per element: 1, 2, 4 or 8.
 * @value: the pattern; its low @elem_size bytes are stored.
 *
 * @dst is recorded as written. -EINVAL: NULL @cb, absent @dst, @count 0, bad
 * @elem_size; -ERANGE: the @count * @elem_size bytes do not fit in @dst's BO
 * (or overflow).
 */
SPYRE_API int spyre_cmdbuf_fill_mem(struct spyre_cmdbuf *cb,
				    struct spyre_mem dst, uint64_t count,
				    uint32_t elem_size, uint64_t value);

/**
 * spyre_cmdbuf_copy_mem() - append a 2-D COPY with dtype conversion (64
 * bytes): @height rows of @width elements, row r of @src (at @src + r *
 * @src_pitch bytes, @src_dtype) to row r of @dst (@dst_dtype).
 * @cb: the command buffer.
 * @dst: destination operand (row 0).
 * @src: source operand (row 0).
 * @dst_pitch: bytes between rows of @dst, at least the row's bytes
 *	(@width * dtype size) when @height > 1 (the card refuses less);
 *	ignored when @height is 1.
 * @src_pitch: the same for @src.
 * @dst_dtype: as spyre_cmdbuf_copy_2d(): U8 only with U8 (raw bytes, any
 *	element type), INT32 only with INT32, float types and INT8 convert among
 *	themselves (round to nearest even; fp8 narrowing saturates unless @flags
 *	has SPYRE_CMD_F_NOSAT).
 * @src_dtype: as @dst_dtype.
 * @width: elements per row, >= 1.
 * @height: rows, >= 1.
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 * Each operand's span, (@height - 1) * pitch + @width * dtype size bytes,
 * must lie in its BO; @dst is recorded as written, @src as read.  @dst and
 * @src must not overlap.
 * -EINVAL: NULL @cb, absent operand, zero size, pitch below the row,
 * bad dtype pair or flag; -E2BIG: more than 4 GiB on either side;
 * -ERANGE: a span outside its BO.
 */
SPYRE_API int spyre_cmdbuf_copy_mem(struct spyre_cmdbuf *cb,
				    struct spyre_mem dst, uint64_t dst_pitch,
				    uint32_t dst_dtype,
				    struct spyre_mem src, uint64_t src_pitch,
				    uint32_t src_dtype,
				    uint64_t width, uint64_t height,
				    uint32_t flags);

/**
 * spyre_cmdbuf_bos() - the BOs named by @cb's operands (struct
 * spyre_mem with a BO), each once, in first-use order.
 * @cb: the command buffer.
 * @bos: if not NULL, receives a pointer to the array, valid until the
 *	next call that modifies @cb.
 * Returns the number of BOs (0 for NULL @cb).
 */
SPYRE_API size_t spyre_cmdbuf_bos(const struct spyre_cmdbuf *cb,
				  struct spyre_bo *const **bos);

/**
 * spyre_cmdbuf_upload() - allocate a BO on @dev holding @cb's commands, to
 * replay with spyre_submit_va(bo's VA, size).
 * @cb: the command buffer.
 * @dev: the device the BO is allocated on.
 * @out: receives the BO holding the commands; free it with spyre_bo_free().
 *
 * The caller owns *@out.
 * Errors: -EINVAL (empty @cb), as spyre_bo_alloc()/spyre_bo_map().
 */
SPYRE_API int spyre_cmdbuf_upload(const struct spyre_cmdbuf *cb,
				  struct spyre_device *dev,
				  struct spyre_bo **out);

/* ------------------------------------------------------------------ */
/* Queues, submission, fences                                         */
/* ------------------------------------------------------------------ */

/** Queue priorities (equal to DRM_SPYRE_PRIORITY_*). */
enum spyre_priority {
	SPYRE_PRIORITY_LOW = 0,
	SPYRE_PRIORITY_NORMAL = 1,
	SPYRE_PRIORITY_HIGH = 2,
};

/**
 * struct spyre_fence - completion of one submission: a point on the queue's
 * timeline syncobj.
 * @queue: queue the job was submitted to.
 * @point: timeline point (>= 1).
 *
 * A plain value: copy it freely.  It stays usable while its queue exists.  A
 * zeroed fence ({NULL, 0}) is "already signalled" for spyre_fence_wait() and
 * is skipped as a wait dependency.
 */
struct spyre_fence {
	struct spyre_queue *queue;
	uint64_t point;
};

/**
 * spyre_queue_create() - create a command queue (own hardware queue, own
 * timeline syncobj).
 * @dev: the device (from spyre_device_open()).
 * @priority: enum spyre_priority.  SPYRE_PRIORITY_HIGH needs CAP_SYS_NICE
 *	(the card serves high-priority queues first): an unprivileged caller
 *	gets -EACCES, and no queue (libspyre does not fall back to a lower
 *	priority).
 * @out: receives the queue; free with spyre_queue_destroy().
 * Errors: -EINVAL (bad priority), -EACCES (SPYRE_PRIORITY_HIGH without
 * CAP_SYS_NICE), -EBUSY (no free hardware queue), -ENOMEM, -ECHILD,
 * -ENODEV.
 */
SPYRE_API int spyre_queue_create(struct spyre_device *dev, int priority,
				 struct spyre_queue **out);

/**
 * spyre_queue_destroy() - destroy @q.
 * @q: the queue.
 *
 * First waits (up to 120 s) for the jobs already submitted on @q, because they
 * may still read the queue's command upload ring; then destroys the kernel
 * queue and the syncobjs. Fences of @q become invalid.  NULL is ignored.
 */
SPYRE_API void spyre_queue_destroy(struct spyre_queue *q);

/**
 * spyre_queue_id() - the kernel queue id of @q (> 0), 0 for NULL.
 * @q: the queue.
 */
SPYRE_API uint32_t spyre_queue_id(const struct spyre_queue *q);

/**
 * spyre_queue_syncobj() - handle of @q's timeline syncobj (owned by @q).
 * @q: the queue.
 */
SPYRE_API uint32_t spyre_queue_syncobj(const struct spyre_queue *q);

/**
 * spyre_submit() - submit @cb as one job on @q.
 * @q: the queue.
 * @nbos: entries in @bos.
 * @nwaits: entries in @waits.
 * @cb: commands (copied into a queue-owned upload ring BO, so @cb may be
 *	changed or destroyed as soon as the call returns); at most
 *	max_cmd_size bytes.
 * @bos: the BOs the commands touch (@nbos entries, NULL if 0); they are
 *	kept alive by the kernel until the job ends.  The BOs that @cb's
 *	encoders recorded (spyre_cmdbuf_bos()) are listed too.  For
 *	implicit synchronisation (spyre_bo_wait(), dma-buf importers) the
 *	job counts as a writer of every BO in @bos and of the recorded BOs
 *	that a command writes (GEMM C and amax, element-wise, norm and
 *	conversion outputs); of the other recorded BOs it is a reader.
 * @waits: fences (of queues on the same device) the job waits for before
 *	it starts (@nwaits entries); zeroed fences are skipped.
 * @out: if not NULL, receives the job's fence.
 *
 * Jobs on one queue run in submission order.
 * Errors: -EINVAL (empty @cb, bad arguments), -E2BIG (@cb larger than
 * max_cmd_size), -EXDEV (a wait fence of another device), -ENOENT (a BO
 * or queue the kernel does not know), -ECANCELED (the context is in error,
 * see spyre_device_error()), -ECHILD, -ENOMEM, -ENODEV.
 */
SPYRE_API int spyre_submit(struct spyre_queue *q,
			   const struct spyre_cmdbuf *cb,
			   struct spyre_bo *const *bos, unsigned int nbos,
			   const struct spyre_fence *waits,
			   unsigned int nwaits,
			   struct spyre_fence *out);

/**
 * spyre_submit_va() - submit a command stream already in device memory.
 * @q: the queue.
 * @nbos: entries in @bos.
 * @waits: as spyre_submit().
 * @nwaits: entries in @waits.
 * @out: as spyre_submit().
 * @cmd_va: VA of the stream, 8-byte aligned.
 * @cmd_size: bytes, multiple of 8, 8..max_cmd_size.
 * @bos: must include the BO holding the stream.
 * Other arguments and errors as spyre_submit(); argument checks on
 * @cmd_va/@cmd_size are left to the kernel (-EINVAL).
 */
SPYRE_API int spyre_submit_va(struct spyre_queue *q, uint64_t cmd_va,
			      uint32_t cmd_size,
			      struct spyre_bo *const *bos, unsigned int nbos,
			      const struct spyre_fence *waits,
			      unsigned int nwaits,
			      struct spyre_fence *out);

/**
 * spyre_fence_wait() - wait until @f has signalled.
 * @f: the fence.
 * @timeout_ns: relative timeout in ns; 0 polls; SPYRE_TIMEOUT_INFINITE
 *	waits forever.
 *
 * Returns 0 when the job completed successfully, -ETIMEDOUT when the
 * timeout expired first, or the job's error: -EFAULT (card MMU fault, e.g.
 * an unmapped VA), -EIO (invalid command), -ECANCELED (cancelled because
 * the context was already in error), -ETIME/-ETIMEDOUT-style errors the
 * driver reports for hung jobs, -ENODEV (card gone).  A job error also
 * sets spyre_device_error() (for a cancellation, the context's own error
 * from the kernel when it has one).  The precise error of a job is
 * available for the last 64 submissions of its queue; for older ones
 * libspyre falls back to what the kernel's timeline still holds (0 if it
 * dropped the fence).  Other errors: -EINVAL (bad fence), -ECHILD.
 */
SPYRE_API int spyre_fence_wait(const struct spyre_fence *f,
			       uint64_t timeout_ns);

/**
 * spyre_fence_query() - like spyre_fence_wait() with a 0 timeout but
 * returns -EBUSY while the job is pending.
 * @f: the fence.
 */
SPYRE_API int spyre_fence_query(const struct spyre_fence *f);

/**
 * spyre_fence_export_sync_file() - export @f as a sync_file fd (owned by the
 * caller, O_CLOEXEC) for poll(2) or another driver.
 * @f: the fence.
 * @fd: receives the sync_file descriptor.
 *
 * The sync_file becomes readable when the job ends; its status carries the job
 * error.
 * Errors: -EINVAL (bad or zeroed fence), -ECHILD, -ENOMEM, -EMFILE.
 */
SPYRE_API int spyre_fence_export_sync_file(const struct spyre_fence *f,
					   int *fd);

/* ------------------------------------------------------------------ */
/* Streams: a queue plus helpers that encode and submit one command   */
/* ------------------------------------------------------------------ */

/**
 * spyre_stream_create() - create an in-order stream on its own queue.
 * @dev: the device (from spyre_device_open()).
 * @priority: enum spyre_priority.
 * @out: receives the stream; free it with spyre_stream_destroy().
 *
 * Errors as spyre_queue_create().
 */
SPYRE_API int spyre_stream_create(struct spyre_device *dev, int priority,
				  struct spyre_stream **out);

/**
 * spyre_stream_destroy() - destroy @s and its queue (waits for its jobs as
 * spyre_queue_destroy() does; device-to-host copies not yet delivered are
 * dropped).
 * @s: the stream.
 *
 * NULL is ignored.
 */
SPYRE_API void spyre_stream_destroy(struct spyre_stream *s);

/**
 * spyre_stream_queue() - the queue under @s (owned by @s).
 * @s: the stream.
 */
SPYRE_API struct spyre_queue *spyre_stream_queue(struct spyre_stream *s);

/**
 * spyre_stream_fill() - asynchronously fill @count elements of @elem_size (1,
 * 2, 4, 8) bytes at @dst + @offset with @value.
 * @s: the stream.
 * @dst: the BO to fill.
 * @offset: byte offset into @dst.
 * @count: elements, >= 1.
 * @elem_size: bytes per element: 1, 2, 4 or 8.
 * @value: the pattern; its low @elem_size bytes are stored.
 *
 * Errors: -EINVAL (bad elem_size, count 0), -ERANGE (outside @dst), -EXDEV
 * (@dst of another device), submission errors, or the stream's sticky error.
 */
SPYRE_API int spyre_stream_fill(struct spyre_stream *s, struct spyre_bo *dst,
				uint64_t offset, uint64_t count,
				uint32_t elem_size, uint64_t value);

/**
 * spyre_stream_copy() - asynchronously copy @size bytes from @src + @src_off
 * to @dst + @dst_off (must not overlap).
 * @s: the stream.
 * @dst: destination BO.
 * @dst_off: byte offset into @dst.
 * @src: source BO.
 * @src_off: byte offset into @src.
 * @size: bytes, >= 1.
 *
 * Errors: -EINVAL (size 0), -ERANGE, -EXDEV, as spyre_stream_fill().
 */
SPYRE_API int spyre_stream_copy(struct spyre_stream *s,
				struct spyre_bo *dst, uint64_t dst_off,
				struct spyre_bo *src, uint64_t src_off,
				uint64_t size);

/**
 * spyre_stream_copy_2d() - asynchronously copy @height rows of @width_bytes
 * bytes; rows are @src_pitch / @dst_pitch bytes apart.
 * @s: the stream.
 * @dst: destination BO.
 * @dst_off: byte offset into @dst.
 * @dst_pitch: bytes between rows of @dst.
 * @src: source BO.
 * @src_off: byte offset into @src.
 * @src_pitch: bytes between rows of @src.
 * @width_bytes: bytes per row, >= 1.
 * @height: rows, >= 1.
 *
 * Errors: -EINVAL (zero width/height, pitch < width when height > 1), -ERANGE,
 * -EXDEV, as spyre_stream_fill().
 */
SPYRE_API int spyre_stream_copy_2d(struct spyre_stream *s,
				   struct spyre_bo *dst, uint64_t dst_off,
				   uint64_t dst_pitch,
				   struct spyre_bo *src, uint64_t src_off,
				   uint64_t src_pitch,
				   uint64_t width_bytes, uint64_t height);

/**
 * spyre_stream_last_fence() - the fence of the last operation enqueued on @s
 * (zeroed if none).
 * @s: the stream.
 * @f: receives the fence.
 *
 * Errors: -EINVAL.
 */
SPYRE_API int spyre_stream_last_fence(struct spyre_stream *s,
				      struct spyre_fence *f);

/* Most commands one batched job may hold (spyre_stream_set_batch()). */
#define SPYRE_STREAM_BATCH_MAX 4096

/**
 * spyre_stream_set_batch() - batch the stream's operations: submit up to
 * @max_cmds of them as one job instead of one job each.
 * @s: the stream.
 * @max_cmds: 0 (the default: every operation is submitted before its call
 *	returns) or 1..SPYRE_STREAM_BATCH_MAX: commands per job at most.
 *
 * With batching on, the operations that encode one command -
 * spyre_stream_fill(), _copy(), _copy_2d(), _convert(), _gemm(),
 * _kernel(), _eltwise(), _reduce(), _softmax(), _rmsnorm(),
 * _layernorm(), _timestamp() - check their arguments and encode as before, then append
 * the command to the stream's open batch instead of submitting it (no
 * system call).  The batch is submitted as one job, in stream order, at
 * these flush points:
 *  - spyre_stream_flush(), spyre_stream_sync(), spyre_stream_query(),
 *    spyre_stream_last_fence(), and spyre_stream_set_batch() itself;
 *  - before every operation that is not batched: host copies
 *    (spyre_stream_copy_h2d(), _copy_d2h()), peer copies,
 *    spyre_stream_submit(), graph launches, spyre_event_record() and
 *    spyre_stream_wait_event() (so an event records, and a wait orders,
 *    exactly the work enqueued before it);
 *  - spyre_bo_free() of a BO an open batch names (every batching stream
 *    of the device that names it is flushed first, so the job keeps the
 *    BO's memory alive as for an unbatched operation);
 *  - an operation on another stream, or spyre_submit()/spyre_submit_va()
 *    on a queue, that names a BO an open batch names (as an operand, in
 *    its BO list or command buffer): that batch is submitted first, so
 *    jobs sharing a BO reach the kernel in the order they were queued and
 *    its BO fences order them as without batching (graph launches do not
 *    look: order them with events);
 *  - when the batch holds @max_cmds commands, or the next command would
 *    take it past the device's command-buffer size (max_cmd_size) or BO
 *    count per job;
 *  - spyre_stream_destroy().
 * Errors: argument errors are returned by the operation's own call, as
 * without batching.  A submission that fails at a flush point the caller
 * called (sync, query, flush, last_fence, a non-batched operation)
 * returns its error there; one that fails at an implicit flush (a full
 * batch, spyre_bo_free()) is kept and returned, once, by the stream's next
 * flush point.  The commands of a failed batch did not run.  Errors of
 * the job itself come through its fence, as for any job, and -ECANCELED
 * is sticky as always; a stream in error discards its open batch.  A
 * batch of one command may be rerun after a reset as its operation would
 * be (DRM_SPYRE_JOB_RESTARTABLE); a batch of several is not marked
 * restartable (a later command may overwrite what an earlier one read).
 * Turning batching off or changing @max_cmds flushes first; the new
 * setting applies even when that flush fails.  Not inherited by anything;
 * costs no memory while off.
 *
 * Returns 0, -EINVAL (@max_cmds too large; nothing changed), -ECHILD, or
 * the error of the flush (see above; a stream in error returns its error).
 */
SPYRE_API int spyre_stream_set_batch(struct spyre_stream *s,
				     unsigned int max_cmds);

/* spyre_stream_timestamp(): never open a batch with the stamp. */
#define SPYRE_TIMESTAMP_EAGER	(1u << 0)

/**
 * spyre_stream_timestamp() - enqueue a TIMESTAMP on @s: when the card
 * reaches it in stream order (everything enqueued on @s before it has
 * completed, nothing after it has started), it writes its 64-bit clock
 * (ns, the clock of spyre_event_timestamp()) to @bo at @offset.
 * @s: the stream.
 * @bo: the BO written; must outlive the command (freeing it flushes a
 *	batch that names it, as for any operand).
 * @offset: byte offset into @bo, 8-byte aligned; 8 bytes are written.
 * @flags: 0, or SPYRE_TIMESTAMP_EAGER: when the stream batches but has no
 *	open batch (its last operation was submitted already), submit the
 *	stamp at once as a job of its own, so it marks the end of that work
 *	instead of waiting in a new batch for the next flush point.
 *
 * Batched like the other single-command operations (it is not a flush
 * point), so stamps between the operations of one batch give each its
 * card time: a profiler's per-operation timestamps inside one job (a
 * stamp before an operation plain, one after it EAGER).  The value is
 * there once the stream has been synchronized past it (e.g.
 * spyre_stream_sync(), or an event recorded after it); read it through a
 * mapping of @bo.
 * Errors: -EINVAL (NULL, misaligned @offset, unknown @flags), -ERANGE
 * (past @bo's end),
 * -EXDEV (@bo of another device), -ECHILD, the stream's sticky error,
 * submission errors when not batching.
 */
SPYRE_API int spyre_stream_timestamp(struct spyre_stream *s,
				     struct spyre_bo *bo, uint64_t offset,
				     uint32_t flags);

/**
 * spyre_stream_enqueued() - how many operations @s has accepted so far.
 * @s: the stream.
 * @count: receives the count: every operation that queued card work
 *	(batched or submitted; a host or peer copy split into several jobs
 *	counts one per job; event records and waits count as they submit),
 *	since the stream was created.  Monotonic; never a flush point.
 *
 * For observers that need to know whether code in between queued work on
 * the stream without forcing its batch out (spyre_stream_last_fence()
 * flushes).  Errors: -EINVAL.
 */
SPYRE_API int spyre_stream_enqueued(struct spyre_stream *s, uint64_t *count);

/**
 * spyre_stream_flush() - submit the open batch of @s now (no wait).
 * @s: the stream.
 *
 * Returns 0 (also when nothing is open or batching is off), the stream's
 * sticky error, the submission's error, or the error an earlier implicit
 * flush kept (see spyre_stream_set_batch()).
 */
SPYRE_API int spyre_stream_flush(struct spyre_stream *s);

/**
 * spyre_stream_sync() - wait for everything enqueued on @s (event waits
 * included: pending ones are first enqueued as an empty job), then deliver the
 * data of its device-to-host copies (spyre_stream_copy_d2h()).
 * @s: the stream.
 * @timeout_ns: relative timeout in ns; 0 polls; SPYRE_TIMEOUT_INFINITE waits
 *	forever.
 *
 * Returns 0, -ETIMEDOUT, -EINTR, or the stream's error (the first job error
 * seen on the stream, which stays sticky: later operations on @s fail with it;
 * see "Asynchronous errors").
 */
SPYRE_API int spyre_stream_sync(struct spyre_stream *s, uint64_t timeout_ns);

/* ---- Stream operations (0.4) -------------------------------------- */

/*
 * Every operation below is enqueued as one job on the stream's queue and
 * returns once it is submitted (nothing waits for the card).  It first
 * returns the stream's sticky error if there is one.  Operands are
 * struct spyre_mem (BO + offset, checked against the BO: -ERANGE) and
 * BOs of another device give -EXDEV.  Besides the argument errors of the
 * matching spyre_cmdbuf_*() encoder, they return submission errors
 * (-ECANCELED and the others of spyre_submit()).  Jobs of one stream run
 * in order; different streams run concurrently unless ordered with
 * events.
 */

/**
 * spyre_stream_submit() - enqueue the commands of @cb as one job (several
 * commands in one job save dispatch cost).
 * @s: the stream.
 * @cb: the job's commands.
 * @bos: BOs the job uses besides those @cb recorded.
 * @nbos: entries in @bos.
 *
 * @cb may be changed as soon as the call returns.  @bos (@nbos entries) are
 * listed besides the BOs @cb's encoders recorded.  Errors as spyre_submit().
 */
SPYRE_API int spyre_stream_submit(struct spyre_stream *s,
				  const struct spyre_cmdbuf *cb,
				  struct spyre_bo *const *bos,
				  unsigned int nbos);

/**
 * spyre_stream_copy_h2d() - copy @size bytes from host memory @src to
 * @dst + @dst_off, in stream order.
 * @s: the stream.
 * @dst: destination BO.
 * @dst_off: byte offset into @dst.
 * @src: host memory holding @size bytes.
 * @size: bytes, >= 1.
 *
 * Staged: the bytes are copied into a stream-owned staging area in system
 * memory (the queue's upload ring) during the call, so @src may be reused
 * as soon as it returns, and the card copies them to @dst asynchronously;
 * large copies are split into jobs of just under 4 MiB.  To avoid the
 * host copy, register the host memory instead (spyre_bo_register_host())
 * and use spyre_stream_copy(): the card then reads it in place.
 * Errors: -EINVAL (NULL, size 0), -ERANGE, -EXDEV, -ENOMEM, submission
 * errors, the stream's sticky error.
 */
SPYRE_API int spyre_stream_copy_h2d(struct spyre_stream *s,
				    struct spyre_bo *dst, uint64_t dst_off,
				    const void *src, uint64_t size);

/**
 * spyre_stream_copy_d2h() - copy @size bytes from @src + @src_off to host
 * memory @dst, in stream order.
 * @s: the stream.
 * @dst: host memory that receives @size bytes.
 * @src: source BO.
 * @src_off: byte offset into @src.
 * @size: bytes, >= 1.
 *
 * Staged: the card copies into a stream-owned staging area, and libspyre
 * copies the bytes to @dst once the job has completed successfully: at
 * the latest in the spyre_stream_sync() or spyre_stream_query() that
 * reports the stream complete (0), which is when @dst may be read.  @dst
 * must stay valid until then; a failed job leaves @dst untouched, and a
 * stream destroyed before such a call drops the data.  Waiting for the
 * stream's fences or events does not deliver the data.  For a zero-copy,
 * fence-complete transfer register the host memory
 * (spyre_bo_register_host()) and use spyre_stream_copy().
 * Errors as spyre_stream_copy_h2d().
 */
SPYRE_API int spyre_stream_copy_d2h(struct spyre_stream *s, void *dst,
				    struct spyre_bo *src, uint64_t src_off,
				    uint64_t size);

/**
 * spyre_stream_copy_peer() - copy @size bytes from @src + @src_off (on
 * @src_s's device) to @dst + @dst_off (on @dst_s's device).
 * @dst_s: a stream on the destination card.
 * @dst: destination BO, on the card of @dst_s.
 * @dst_off: byte offset into @dst.
 * @src_s: a stream on the source card.
 * @src: source BO, on the card of @src_s.
 * @src_off: byte offset into @src.
 * @size: bytes, >= 1.
 *
 * With two cards the copy goes through system memory (the guest has no
 * card-to-card DMA): for each chunk of at most 16 MiB a system BO is
 * allocated on the source card, exported as dma-buf and imported into the
 * destination card; a job on @src_s copies into it, and a job on @dst_s,
 * which waits for the first through a sync_file (no host blocking),
 * copies it out.  The bounce BOs are released as soon as the jobs end.
 * The copy is ordered after earlier work on both streams; it is complete
 * when @dst_s's work is (spyre_stream_sync(@dst_s), or an event recorded
 * on @dst_s).  On one device (@src_s and @dst_s of the same card) it is a
 * plain copy on @dst_s that waits for @src_s's earlier work.
 * Errors: -EINVAL, -ERANGE, -EXDEV (a BO not on its stream's device),
 * -ENOMEM, -EOPNOTSUPP (the destination card cannot import the bounce
 * buffer), submission errors and either stream's sticky error.
 */
SPYRE_API int spyre_stream_copy_peer(struct spyre_stream *dst_s,
				     struct spyre_bo *dst, uint64_t dst_off,
				     struct spyre_stream *src_s,
				     struct spyre_bo *src, uint64_t src_off,
				     uint64_t size);

/**
 * spyre_stream_convert() - enqueue spyre_cmdbuf_convert(): @count
 * elements of @src_dtype to @dst_dtype (e.g. fp16 activations to fp8).
 * @s: the stream.
 * @dst: output operand, @count elements of @dst_dtype.
 * @dst_dtype: SPYRE_DTYPE_* of @dst.
 * @src: input operand, @count elements of @src_dtype.
 * @src_dtype: SPYRE_DTYPE_* of @src.
 * @count: elements, >= 1.
 * @flags: 0 or SPYRE_CMD_F_NOSAT.
 */
SPYRE_API int spyre_stream_convert(struct spyre_stream *s,
				   struct spyre_mem dst, uint32_t dst_dtype,
				   struct spyre_mem src, uint32_t src_dtype,
				   uint64_t count, uint32_t flags);

/**
 * spyre_stream_gemm() - enqueue one (batched, optionally scaled fp8) GEMM;
 * see struct spyre_gemm.
 * @s: the stream.
 * @g: the GEMM: operands, shapes and dtypes.
 */
SPYRE_API int spyre_stream_gemm(struct spyre_stream *s,
				const struct spyre_gemm *g);

/**
 * spyre_stream_eltwise() - enqueue spyre_cmdbuf_eltwise().
 * @s: the stream.
 * @op: SPYRE_ELT_*, as spyre_cmdbuf_eltwise().
 * @dtype: FP32, FP16 or BF16 for @out, @a and @b.
 * @count: elements, >= 1.
 * @out: output operand (may be @a or @b).
 * @a: first input operand.
 * @b: second input operand for ADD and MUL; the other ops ignore it.
 * @alpha: SCALE's factor; the other ops ignore it.
 */
SPYRE_API int spyre_stream_eltwise(struct spyre_stream *s, uint32_t op,
				   uint32_t dtype, uint64_t count,
				   struct spyre_mem out, struct spyre_mem a,
				   struct spyre_mem b, float alpha);

/**
 * spyre_stream_reduce() - enqueue spyre_cmdbuf_reduce().
 * @s: the stream.
 * @op: SPYRE_REDUCE_SUM or SPYRE_REDUCE_MAX.
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @rows: rows of @src (elements of @dst), >= 1.
 * @cols: elements per row, >= 1.
 * @dst: output operand, @rows elements.
 * @src: input matrix.
 * @ld: leading dimension of @src in elements (0: @cols).
 */
SPYRE_API int spyre_stream_reduce(struct spyre_stream *s, uint32_t op,
				  uint32_t dtype, uint32_t rows,
				  uint32_t cols, struct spyre_mem dst,
				  struct spyre_mem src, uint64_t ld);

/**
 * spyre_stream_softmax() - enqueue a row-wise softmax (ROWOP SOFTMAX) of
 * the @rows x @cols matrix @src into @dst (may be @src).
 * @s: the stream.
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @rows: rows of the matrix, >= 1.
 * @cols: elements per row, >= 1.
 * @dst: output matrix (may be @src).
 * @ld_dst: leading dimension of @dst in elements (0: @cols).
 * @src: input matrix.
 * @ld_src: leading dimension of @src in elements (0: @cols).
 */
SPYRE_API int spyre_stream_softmax(struct spyre_stream *s, uint32_t dtype,
				   uint32_t rows, uint32_t cols,
				   struct spyre_mem dst, uint64_t ld_dst,
				   struct spyre_mem src, uint64_t ld_src);

/**
 * spyre_stream_rmsnorm() - enqueue ROWOP RMSNORM: dst = src /
 * sqrt(mean(src^2) + @eps) * @gamma, row by row; @gamma is a binary32
 * @cols-vector or SPYRE_MEM_NONE.
 * @s: the stream.
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @rows: rows of the matrix, >= 1.
 * @cols: elements per row, >= 1.
 * @dst: output matrix (may be @src).
 * @ld_dst: leading dimension of @dst in elements (0: @cols).
 * @src: input matrix.
 * @ld_src: leading dimension of @src in elements (0: @cols).
 * @gamma: binary32 vector of @cols elements, or SPYRE_MEM_NONE (1.0).
 * @eps: added to the mean of the squares, >= 0.
 */
SPYRE_API int spyre_stream_rmsnorm(struct spyre_stream *s, uint32_t dtype,
				   uint32_t rows, uint32_t cols,
				   struct spyre_mem dst, uint64_t ld_dst,
				   struct spyre_mem src, uint64_t ld_src,
				   struct spyre_mem gamma, float eps);

/**
 * spyre_stream_layernorm() - enqueue ROWOP LAYERNORM: dst = (src - mean)
 * / sqrt(var + @eps) * @gamma + @beta, row by row (binary32 vectors or
 * SPYRE_MEM_NONE).
 * @s: the stream.
 * @dtype: FP32, FP16 or BF16 for @src and @dst.
 * @rows: rows of the matrix, >= 1.
 * @cols: elements per row, >= 1.
 * @dst: output matrix (may be @src).
 * @ld_dst: leading dimension of @dst in elements (0: @cols).
 * @src: input matrix.
 * @ld_src: leading dimension of @src in elements (0: @cols).
 * @gamma: binary32 vector of @cols elements, or SPYRE_MEM_NONE (1.0).
 * @beta: binary32 vector of @cols elements, or SPYRE_MEM_NONE (0.0).
 * @eps: added to the variance, >= 0.
 */
SPYRE_API int spyre_stream_layernorm(struct spyre_stream *s, uint32_t dtype,
				     uint32_t rows, uint32_t cols,
				     struct spyre_mem dst, uint64_t ld_dst,
				     struct spyre_mem src, uint64_t ld_src,
				     struct spyre_mem gamma,
				     struct spyre_mem beta, float eps);

/**
 * spyre_stream_query() - non-blocking status of everything enqueued on
 * @s: 0 when complete (pending device-to-host copies are delivered), -EBUSY
 * while work is pending, or the stream's sticky error (set by this call
 * if it finds a failed job).  Errors: -EINVAL, -ECHILD.
 */
SPYRE_API int spyre_stream_query(struct spyre_stream *s);

/**
 * spyre_stream_error() - the stream's sticky error, 0 if none; does not look
 * at the card (see spyre_stream_query()).
 * @s: the stream.
 *
 * -EINVAL, -ECHILD.
 */
SPYRE_API int spyre_stream_error(struct spyre_stream *s);

/**
 * spyre_stream_wait_event() - make the next job enqueued on @s wait for the
 * work @e captured (its last spyre_event_record() or import), without blocking
 * the host.
 * @s: the stream.
 * @e: the event to wait for.
 *
 * The state of @e is captured now: recording @e again later does not change
 * what @s waits for.  An event never recorded is complete (no wait).  @e may
 * belong to another card (the fence crosses as a sync_file).  Up to 16 waits
 * accumulate; more make libspyre enqueue an empty job that consumes them, and
 * so do spyre_stream_sync() and spyre_stream_query().
 * Errors: -EINVAL, -ECHILD, -ENOMEM, the stream's sticky error, and errors of
 * the syncobj ioctls.
 */
SPYRE_API int spyre_stream_wait_event(struct spyre_stream *s,
				      struct spyre_event *e);

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

/** spyre_event_create() flag: no timestamps (record is an empty job). */
#define SPYRE_EVENT_DISABLE_TIMING	(1u << 0)

/**
 * spyre_event_create() - create an event on @dev.
 * @dev: the device (from spyre_device_open()).
 * @flags: 0 or SPYRE_EVENT_DISABLE_TIMING.
 * @out: receives the event; free it with spyre_event_destroy().
 *
 * An event is a point in a stream's work: spyre_event_record() enqueues a
 * job that writes the device clock (a TIMESTAMP command) into a small
 * event BO (4 KiB of system memory) and whose fence the event keeps (in a
 * binary syncobj of its own).  Host waits, stream waits, sync_file export
 * and elapsed times all use that job.  A new event is complete.
 * Errors: -EINVAL, -ECHILD, -ENOMEM, -ENODEV.
 */
SPYRE_API int spyre_event_create(struct spyre_device *dev, uint32_t flags,
				 struct spyre_event **out);

/**
 * spyre_event_destroy() - free @e.
 * @e: the event.
 *
 * A pending record job still completes (the kernel keeps the event BO alive);
 * streams that wait for @e are not affected.  NULL is ignored.
 */
SPYRE_API void spyre_event_destroy(struct spyre_event *e);

/**
 * spyre_event_record() - capture the work enqueued on @s so far: enqueue the
 * record job (one TIMESTAMP command) on @s.
 * @e: the event.
 * @s: the stream whose work @e captures.
 *
 * @e completes when that job does, i.e. after all earlier work of @s.
 * Re-recording replaces what @e captures.
 * Errors: -EINVAL, -ECHILD, -EXDEV (@s on another device), the stream's sticky
 * error, submission errors.
 */
SPYRE_API int spyre_event_record(struct spyre_event *e,
				 struct spyre_stream *s);

/**
 * spyre_event_wait() - block until @e completes.
 * @e: the event.
 * @timeout_ns: relative; 0 polls; SPYRE_TIMEOUT_INFINITE.
 * Returns 0, -ETIMEDOUT, or the error of the record job (-ECANCELED when
 * earlier work of its stream failed, -EFAULT/-EIO/... for an imported
 * fence that failed); such an error also becomes the device error.
 * Errors: -EINVAL, -ECHILD, -EINTR.
 */
SPYRE_API int spyre_event_wait(struct spyre_event *e, uint64_t timeout_ns);

/**
 * spyre_event_query() - as spyre_event_wait() with no wait, but -EBUSY
 * while @e is pending.
 * @e: the event.
 */
SPYRE_API int spyre_event_query(struct spyre_event *e);

/**
 * spyre_event_timestamp() - device clock (ns since the card's last reset) when
 * @e's record job ran.
 * @e: the event.
 * @ns: receives the device clock, in ns.
 *
 * Errors: -EBUSY (pending), -ENODATA (never recorded, imported, or created
 * with SPYRE_EVENT_DISABLE_TIMING), the record job's error, -EINVAL, -ECHILD.
 */
SPYRE_API int spyre_event_timestamp(struct spyre_event *e, uint64_t *ns);

/**
 * spyre_event_elapsed_ns() - device time from @start to @end in ns (negative
 * if @end ran first), from the device clock: both events must be recorded on
 * streams of the same card.
 * @start: the earlier event.
 * @end: the later event.
 * @ns: receives @end's device time minus @start's, in ns.
 *
 * The time includes the scheduling between jobs, as it would for any work
 * between the records.
 * Errors: as spyre_event_timestamp() for either event, -EXDEV (events of
 * different devices).
 */
SPYRE_API int spyre_event_elapsed_ns(struct spyre_event *start,
				     struct spyre_event *end, int64_t *ns);

/**
 * spyre_event_export_sync_file() - a sync_file fd (owned by the caller,
 * O_CLOEXEC) that signals when @e completes, with the job's error as its
 * status; for poll(2), another driver or another card.
 * @e: the event.
 * @fd: receives the sync_file descriptor.
 *
 * A never-recorded event exports an already-signalled sync_file.
 * Errors: -EINVAL, -ECHILD, -EMFILE, -ENOMEM.
 */
SPYRE_API int spyre_event_export_sync_file(struct spyre_event *e, int *fd);

/**
 * spyre_event_import_sync_file() - make @e stand for the fence of the
 * sync_file @fd (from another driver, card or process; not consumed).
 * @e: the event.
 * @fd: a sync_file descriptor (not consumed).
 *
 * Afterwards @e can be waited for by the host and by streams, exported and
 * queried, but carries no timestamp (-ENODATA).
 * Errors: -EINVAL (not a sync_file), -EBADF, -ECHILD.
 */
SPYRE_API int spyre_event_import_sync_file(struct spyre_event *e, int fd);

/* ------------------------------------------------------------------ */
/* Graphs: command lists recorded once, launched many times            */
/* ------------------------------------------------------------------ */

/**
 * spyre_graph_create() - freeze @cb into a graph on @dev.
 * @dev: the device (from spyre_device_open()).
 * @nbos: entries in @bos.
 * @cb: the commands (any encoders; spyre_cmdbuf_timestamp() inside a
 *	graph gives per-step device times).  Copied: @cb may change
 *	afterwards.  At most max_cmd_size bytes (-E2BIG).
 * @bos: BOs the commands use besides those @cb recorded (e.g. those
 *	named by raw VA in fill/copy/timestamp commands); @nbos entries.
 * @flags: SPYRE_BO_FLAGS_NONE (commands in system memory) or
 *	SPYRE_BO_DEVICE (commands in the card's memory).
 * @out: receives the graph; free it with spyre_graph_destroy().
 *
 * The commands are written once into a BO of their own.  Every BO listed
 * (and recorded) must outlive the graph.  Errors: -EINVAL (empty @cb,
 * flags), -E2BIG, -EXDEV (a BO of another device), -ECHILD, -ENOMEM and
 * errors of spyre_bo_alloc().
 */
SPYRE_API int spyre_graph_create(struct spyre_device *dev,
				 const struct spyre_cmdbuf *cb,
				 struct spyre_bo *const *bos, unsigned int nbos,
				 uint32_t flags, struct spyre_graph **out);

/**
 * spyre_graph_destroy() - free @g.
 * @g: the graph.
 *
 * Launches already submitted still run (their jobs keep the command BO alive).
 * NULL is ignored.
 */
SPYRE_API void spyre_graph_destroy(struct spyre_graph *g);

/**
 * spyre_graph_launch() - enqueue @g on @s @repeat times.
 * @g: the graph.
 * @s: the stream its jobs are enqueued on.
 * @repeat: >= 1.  Each repetition is one job running the whole command
 *	list; up to 256 jobs go into one submit ioctl (so a launch costs
 *	one ioctl, and the BO list is looked up once per ioctl, not per
 *	job).  Jobs run back to back in order on @s.
 * Nothing is copied or encoded per launch.  The launch's completion is
 * the stream's (spyre_stream_sync(), events); a failing repetition
 * cancels the ones behind it.
 * Errors: -EINVAL (@repeat 0, NULL), -EXDEV (@s on another device),
 * -ECHILD, the stream's sticky error, submission errors.
 */
SPYRE_API int spyre_graph_launch(struct spyre_graph *g,
				 struct spyre_stream *s, unsigned int repeat);

/**
 * spyre_graph_launch_staged() - enqueue @pre's commands, @g, then @post's
 * commands on @s, in one submission.
 * @g: the graph.
 * @s: the stream the jobs are enqueued on.
 * @pre: commands run before the graph, e.g. copies of this launch's inputs
 *	into the buffers the graph reads (any encoders; the BOs they record
 *	are listed for the job); NULL or empty: none.
 * @post: commands run after the graph, e.g. copies of its outputs out of
 *	its buffers; NULL or empty: none.
 *
 * The same as spyre_stream_submit(@s, @pre), spyre_graph_launch(@g, @s, 1)
 * and spyre_stream_submit(@s, @post) one after the other, but the three
 * jobs go into one submit ioctl (the kernel runs them as one scheduler job
 * where it can) and complete as one: the stream's next fence (events,
 * spyre_stream_sync()) covers all three, and a failing job cancels the
 * ones behind it.  @pre's and @post's commands are copied into the
 * stream's upload ring (both may change or be freed on return); the
 * graph's are not copied.  This is what a framework's compiled graph costs
 * per call when its inputs and outputs live outside the graph's own
 * buffers: one ioctl instead of three.
 * Errors: -EINVAL (NULL @g or @s), -E2BIG (@pre or @post above
 * max_cmd_size, or too many BOs for one job), -EXDEV (@s, or a BO @pre or
 * @post recorded, on another device), -ECHILD, the stream's sticky error,
 * submission errors.
 */
SPYRE_API int spyre_graph_launch_staged(struct spyre_graph *g,
					struct spyre_stream *s,
					const struct spyre_cmdbuf *pre,
					const struct spyre_cmdbuf *post);

/**
 * spyre_graph_size() - bytes of commands in @g (0 for NULL).
 * @g: the graph.
 */
SPYRE_API size_t spyre_graph_size(const struct spyre_graph *g);

/* ------------------------------------------------------------------ */
/* Kernels (0.8): programs for the KERNEL command                     */
/* ------------------------------------------------------------------ */

/*
 * Kernels.  A KERNEL command runs a verified program over an iteration space of up
 * to 6 pointwise and 3 reduction dimensions, reading and writing up to 32
 * strided operands (docs/spyre-hw.rst, "The KERNEL command", is the
 * contract; <drm/spyre_cmd.h> has its codes).  libspyre gives:
 *
 *  - a builder (struct spyre_kernel, spyre_kernel_*()) that emits the
 *    program of one signature (operand dtypes, parameter count, pointwise
 *    and reduction dimension counts) instruction by instruction, checking
 *    each one as the card's verifier would, so that a finalized program is
 *    always valid.  Values are typed SSA values named by their number
 *    (an int >= 0); SPYRE_KERNEL_NONE stands for an absent optional
 *    source.  Programs are shape-generic: take sizes, strides and scalars
 *    from parameters (spyre_kernel_param(), spyre_kernel_affine(),
 *    SPYRE_KSIZE_PARAM()), so one program serves every shape;
 *  - spyre_kernel_disasm(): program bytes to text;
 *  - spyre_kernel_upload(), spyre_cmdbuf_kernel() and
 *    spyre_stream_kernel(): put a program in a BO and launch it;
 *  - spyre_ref_kernel() (spyre_ref.h): the host reference interpreter.
 *
 * Errors of the builder are sticky: the first failing call returns a
 * negative errno (-EINVAL: misuse, such as a source of the wrong type, a
 * value not visible where it is used, an index out of range, a pass not
 * opened or left open; -E2BIG: beyond the limits of SPYRE_KERNEL_MAX_*;
 * -ENOMEM), and every later call, spyre_kernel_finalize() included,
 * returns the same error.  A source that is itself a negative errno (the
 * result of an earlier failed call) fails with that errno, so a generator
 * may chain calls and check once, at spyre_kernel_finalize().
 *
 * Environment: SPYRE_KERNEL_DUMP=1 (or "stderr") prints, to stderr, the
 * disassembly of every program when a KERNEL is encoded
 * (spyre_cmdbuf_kernel(), spyre_stream_kernel()); any other non-empty
 * value is a file the listings are appended to.
 */

/** An absent optional source value (a mask, a LOAD's other value, ...). */
#define SPYRE_KERNEL_NONE	((int)SPYRE_KVAL_NONE)

struct spyre_kernel;

/**
 * spyre_kernel_create() - start a program of one signature.
 * @dtypes: @noperands SPYRE_DTYPE_* (any data type but 0), operand i's
 *	dtype; may be NULL when @noperands is 0.
 * @noperands: operands, 0..32.
 * @nparams: parameters, 0..64.
 * @npdims: pointwise dimensions, 0..6 (0: a single point).
 * @nrdims: reduction dimensions, 0..3; a program with reduction dimensions
 *	has 1..8 passes (spyre_kernel_pass()).
 * @out: receives the builder; free it with spyre_kernel_destroy().
 *
 * Returns 0, -EINVAL (a count beyond its limit, an invalid dtype, NULL
 * @out) or -ENOMEM.
 */
SPYRE_API int spyre_kernel_create(const uint32_t *dtypes,
				  unsigned int noperands, unsigned int nparams,
				  unsigned int npdims, unsigned int nrdims,
				  struct spyre_kernel **out);

/**
 * spyre_kernel_destroy() - free a builder and the program bytes it owns.
 * @k: the builder (NULL is a no-op).
 */
SPYRE_API void spyre_kernel_destroy(struct spyre_kernel *k);

/**
 * spyre_kernel_error() - the builder's sticky error: 0 or a negative errno.
 * @k: the builder (NULL gives -EINVAL).
 */
SPYRE_API int spyre_kernel_error(const struct spyre_kernel *k);

/**
 * spyre_kernel_type() - the SPYRE_KTYPE_* of value @v.
 * @k: the builder.
 * @v: a value defined so far.
 *
 * Returns SPYRE_KTYPE_BOOL, _I32, _I64 or _F32, or -EINVAL (no such
 * value).  Does not touch the sticky error.
 */
SPYRE_API int spyre_kernel_type(const struct spyre_kernel *k, int v);

/**
 * spyre_kernel_dtype_type() - the value type of an operand dtype: the
 * SPYRE_KTYPE_* a LOAD of an operand of @dtype yields and a STORE to it
 * takes.
 * @dtype: SPYRE_DTYPE_*.
 *
 * Returns SPYRE_KTYPE_I32 for U8, INT8, INT16 and INT32, _I64 for INT64,
 * _BOOL for BOOL, _F32 for the float dtypes, SPYRE_KTYPE_NONE for a dtype
 * a kernel operand cannot have.
 */
SPYRE_API unsigned int spyre_kernel_dtype_type(uint32_t dtype);

/**
 * spyre_kernel_const() - a constant (CONST).
 * @k: the builder.
 * @type: SPYRE_KTYPE_BOOL, _I32, _I64 or _F32.
 * @bits: the value: an i64, an i32 (sign or zero bits 63:32 are ignored),
 *	0 or non-zero for a bool; for F32 use spyre_kernel_const_f32().
 *
 * Returns the new value's number, or a negative errno (see "Kernels"
 * above spyre_kernel_create()).
 */
SPYRE_API int spyre_kernel_const(struct spyre_kernel *k, uint32_t type,
				 int64_t bits);

/**
 * spyre_kernel_const_f32() - an f32 constant (CONST), bit-exact (NaN
 *	payloads and -0 kept).
 * @k: the builder.
 * @x: the value.
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_const_f32(struct spyre_kernel *k, float x);

/**
 * spyre_kernel_param() - parameter @index read as @type (PARAM): I64 all
 * 64 bits, I32 and F32 bits 31:0 (two's complement, binary32), BOOL
 * non-zero.
 * @k: the builder.
 * @type: SPYRE_KTYPE_*, not NONE.
 * @index: the parameter, below the signature's count.
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_param(struct spyre_kernel *k, uint32_t type,
				 unsigned int index);

/**
 * spyre_kernel_idx() - the loop index along dimension @dim (IDX).
 * @k: the builder.
 * @type: SPYRE_KTYPE_I32 (bits 31:0) or _I64.
 * @dim: 0..npdims-1 for p0..p5, SPYRE_KDIM_R0 + 0..nrdims-1 for r0..r2
 *	(inside a pass only), SPYRE_KDIM_POINT (the linear point index) or
 *	SPYRE_KDIM_RINDEX (the linear reduction index, inside a pass only).
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_idx(struct spyre_kernel *k, uint32_t type,
			       unsigned int dim);

/**
 * spyre_kernel_size() - the size of dimension @dim (SIZE): as
 * spyre_kernel_idx(), SPYRE_KDIM_POINT giving P and SPYRE_KDIM_RINDEX R;
 * allowed anywhere.
 * @k: the builder.
 * @type: SPYRE_KTYPE_I32 or _I64.
 * @dim: as spyre_kernel_idx().
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_size(struct spyre_kernel *k, uint32_t type,
				unsigned int dim);

/**
 * spyre_kernel_affine() - an element offset (AFFINE): @base + sum over the
 * dimensions d set in @dims, in increasing d, of IDX(d) * P[@param + j]
 * (j counting them), computed in i64 (wrapping) and narrowed to @type.
 * @k: the builder.
 * @type: SPYRE_KTYPE_I32 or _I64.
 * @base: an int value of @type, or SPYRE_KERNEL_NONE (0).
 * @dims: bit d for dimension d: bits 0..npdims-1 (p0..), bits
 *	6..6+nrdims-1 (r0.., inside a pass only).
 * @param: the first of popcount(@dims) consecutive parameters (strides, in
 *	elements); must be 0 when @dims is 0.
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_affine(struct spyre_kernel *k, uint32_t type,
				  int base, uint32_t dims, unsigned int param);

/**
 * spyre_kernel_load() - load operand @operand at element offset @offset
 * (LOAD); the value has the operand dtype's value type (I32 for U8, INT8,
 * INT16, INT32; I64 for INT64; BOOL for BOOL; F32 for the float types).
 * @k: the builder.
 * @operand: the operand, below the signature's count.
 * @offset: an int value (an i32 offset is sign-extended).
 * @mask: a bool value, or SPYRE_KERNEL_NONE (every lane active); inactive
 *	lanes neither access nor check their offset.
 * @other: the value of inactive lanes (of the load's type), or
 *	SPYRE_KERNEL_NONE (zero / false).
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_load(struct spyre_kernel *k, unsigned int operand,
				int offset, int mask, int other);

/**
 * spyre_kernel_store() - store @value to operand @operand at element
 * offset @offset (STORE), converting it to the operand's dtype.
 * @k: the builder.
 * @operand: the operand.
 * @offset: an int value.
 * @value: a value of the operand dtype's value type.
 * @mask: a bool value, or SPYRE_KERNEL_NONE.
 * @flags: 0, or SPYRE_KMOD_SAT (fp8 operands only): overflow saturates to
 *	the largest finite value instead of giving NaN (E4M3) or infinity.
 *
 * Returns 0, or a negative errno.
 */
SPYRE_API int spyre_kernel_store(struct spyre_kernel *k, unsigned int operand,
				 int offset, int value, int mask,
				 uint32_t flags);

/**
 * spyre_kernel_op() - an arithmetic, comparison, logic, selection or math
 * instruction.
 * @k: the builder.
 * @op: SPYRE_KOP_ADD .. _POW (sources of one num type T; DIV f32 only;
 *	NEG and ABS take @a only, FMA and CLAMP @a, @b, @c), _CMP (@mod a
 *	SPYRE_KCMP_*, @a and @b of one type, bool only EQ/NE; the result is
 *	BOOL), _AND, _OR, _XOR (bool or int), _NOT (@a), _SHL, _SHR (int),
 *	_SELECT (@a bool, @b and @c of one type, the result's), the f32 math
 *	functions of @a: _EXP .. _ATAN, _SINH .. _TRUNC, _SIGN and _LGAMMA
 *	(0x40-0x5f and 0x64 but 0x53), of @a and @b: _ATAN2 (@a is y),
 *	_COPYSIGN and _HYPOT, and _ISNAN, _ISINF (f32 @a, BOOL result).
 * @mod: SPYRE_KCMP_* for CMP; 0 or SPYRE_KMOD_IGNORE_NAN for MIN and MAX
 *	(f32: a NaN source gives the other); 0 otherwise.
 * @a: first source.
 * @b: second source, or SPYRE_KERNEL_NONE when the opcode has one source.
 * @c: third source, or SPYRE_KERNEL_NONE.
 *
 * The result type is @a's (@b's for SELECT; BOOL for CMP, ISNAN, ISINF).
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_op(struct spyre_kernel *k, uint32_t op,
			      uint32_t mod, int a, int b, int c);

/**
 * spyre_kernel_cvt() - convert @a to @type (CVT), optionally through a
 * data type: with @via_dtype non-zero the converted value is then stored
 * to that dtype and loaded back (to_dtype to a narrow type: FP16 rounds,
 * INT8 wraps, ...).
 * @k: the builder.
 * @type: SPYRE_KTYPE_BOOL, _I32, _I64 or _F32.
 * @a: any value.
 * @via_dtype: 0, or a SPYRE_DTYPE_* whose value type is @type.
 * @flags: 0, or SPYRE_KMOD_SAT with an fp8 @via_dtype.
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_cvt(struct spyre_kernel *k, uint32_t type, int a,
			       uint32_t via_dtype, uint32_t flags);

/**
 * spyre_kernel_bitcast() - the bits of @a (f32 or i32) as @type (BITCAST).
 * @k: the builder.
 * @type: SPYRE_KTYPE_I32 or _F32.
 * @a: an f32 or i32 value.
 *
 * Returns the new value's number, or a negative errno.
 */
SPYRE_API int spyre_kernel_bitcast(struct spyre_kernel *k, uint32_t type,
				   int a);

/**
 * spyre_kernel_check() - a device-side assertion (CHECK): an active lane
 * whose @cond is false ends the job with SPYRE_STATUS_ASSERT.
 * @k: the builder.
 * @cond: a bool value.
 * @mask: a bool value, or SPYRE_KERNEL_NONE (every lane checks).
 *
 * Returns 0, or a negative errno.
 */
SPYRE_API int spyre_kernel_check(struct spyre_kernel *k, int cond, int mask);

/**
 * spyre_kernel_pass() - begin the next pass (PASS): the instructions until
 * spyre_kernel_endpass() run for every reduction index of a point.
 * @k: the builder; its signature has reduction dimensions.
 *
 * Returns 0, or -EINVAL (no reduction dimensions, a pass already open),
 * -E2BIG (a ninth pass).
 */
SPYRE_API int spyre_kernel_pass(struct spyre_kernel *k);

/**
 * spyre_kernel_endpass() - end the open pass (ENDPASS); its reductions'
 * results become visible to the code that follows.
 * @k: the builder.
 *
 * Returns 0, or -EINVAL (no pass open).
 */
SPYRE_API int spyre_kernel_endpass(struct spyre_kernel *k);

/**
 * spyre_kernel_reduce() - a reduction over the open pass's reduction
 * indices (REDUCE), in the contract's fixed order.
 * @k: the builder; a pass is open.
 * @kind: SPYRE_KRED_SUM, _PROD, _MAX, _MIN (@a num; the result is @a's
 *	type), _ARGMAX, _ARGMIN (@a num; I64 result), _ANY, _ALL (@a bool),
 *	_XOR_SUM (@a int), _WELFORD (@a f32: three f32 values mean, m2,
 *	weight), _WELFORD_COMBINE (@a, @b, @c f32 partials: three values).
 * @a: the contribution of a reduction index.
 * @b: WELFORD_COMBINE's m2, else SPYRE_KERNEL_NONE.
 * @c: WELFORD_COMBINE's weight, else SPYRE_KERNEL_NONE.
 * @mask: a bool value (inactive indices contribute nothing), or
 *	SPYRE_KERNEL_NONE.
 *
 * The result is visible after spyre_kernel_endpass().  Returns the
 * (first) result's number (WELFORD's are it, +1 and +2), or a negative
 * errno (-E2BIG: a 33rd REDUCE).
 */
SPYRE_API int spyre_kernel_reduce(struct spyre_kernel *k, uint32_t kind,
				  int a, int b, int c, int mask);

/**
 * spyre_kernel_scatter() - a store whose lanes run in sequential order
 * (SCATTER, part 2): @value to operand @operand at element offset
 * @offset of each active lane, lane after lane (points in increasing
 * linear order, in a pass their reduction indices in increasing order),
 * so when lanes collide the last one wins (SPYRE_KSCAT_STORE) or every
 * one adds in that order (SPYRE_KSCAT_ADD: ``index_put_(accumulate)``,
 * ``scatter_add``, ``index_add_``).
 * @k: the builder.
 * @operand: the operand; no other LOAD, STORE or SCATTER of the program
 *	may name it.
 * @offset: an int value, the element offset (e.g. a loaded index).
 * @value: a value of the operand's value type (ADD: not bool).
 * @mask: a bool value or SPYRE_KERNEL_NONE (every lane active).
 * @mode: SPYRE_KSCAT_STORE or SPYRE_KSCAT_ADD, or'ed with SPYRE_KMOD_SAT
 *	for an fp8 operand.
 *
 * The card runs a kernel with a SCATTER on one core (docs/spyre-hw.rst).
 * Needs a card of VERSION 1.2 (spyre_kernel_upload() and launches refuse
 * it on an older one with -EOPNOTSUPP).  Returns 0 or the sticky error
 * (-EINVAL: a bad operand, type or mode, or a second access of the
 * operand).
 */
SPYRE_API int spyre_kernel_scatter(struct spyre_kernel *k,
				   unsigned int operand, int offset, int value,
				   int mask, uint32_t mode);

/**
 * spyre_kernel_scan() - an inclusive scan along the linear reduction
 * index (SCAN, part 2, in a pass only): lane (point, r) gets the
 * combination of its point's active elements 0..r, left to right.
 * @k: the builder.
 * @kind: SPYRE_KRED_SUM, _PROD, _MAX, _MIN (of @a's type T: i32, i64,
 *	f32), or _ARGMAX, _ARGMIN (i64: the reduction index the running
 *	maximum or minimum came from, torch.cummax's ``indices``).
 * @a: the element, a value of the open pass.
 * @mask: a bool value or SPYRE_KERNEL_NONE; an inactive lane adds
 *	nothing (its result is the running value so far).
 *
 * Returns the result's value number (visible in the same pass only), or
 * a negative errno (-E2BIG: a ninth SCAN, -EINVAL).  Needs VERSION 1.2.
 */
SPYRE_API int spyre_kernel_scan(struct spyre_kernel *k, uint32_t kind, int a,
				int mask);

/**
 * spyre_kernel_rand() - counter-based random numbers (RAND, part 2):
 * Philox4x32-10 keyed by @seed, for element @index of the stream
 * @offset; the value depends on (seed, offset, index) only.
 * @k: the builder.
 * @kind: SPYRE_KRAND_BITS (an i32 word), SPYRE_KRAND_UNIFORM (f32 in
 *	[0, 1), multiples of 2^-24) or SPYRE_KRAND_NORMAL (f32, Box-Muller).
 * @seed: an i64 value (e.g. a PARAM).
 * @offset: an i64 value (e.g. a PARAM).
 * @index: an int value, the element's index (e.g. IDX of the point).
 *
 * docs/spyre-hw.rst gives which Philox word each index gets.  Returns the
 * result's value number or a negative errno.  Needs VERSION 1.2.
 */
SPYRE_API int spyre_kernel_rand(struct spyre_kernel *k, uint32_t kind,
				int seed, int offset, int index);

/**
 * spyre_kernel_finalize() - the program's bytes (header and instructions).
 * @k: the builder; no pass open, and one pass at least when the signature
 *	has reduction dimensions.
 * @prog: receives a pointer to the bytes, owned by @k: valid until
 *	spyre_kernel_destroy() or the next call that adds to @k (which may
 *	add instructions and finalize again).
 * @size: receives their size in bytes, 64 + 16 * instructions (the
 *	KERNEL's prog_size).
 *
 * Returns 0, the sticky error, or -EINVAL (a pass open, or none in a
 * reduction kernel).
 */
SPYRE_API int spyre_kernel_finalize(struct spyre_kernel *k, const void **prog,
				    size_t *size);

/**
 * spyre_kernel_disasm() - a program as text, one instruction a line
 * (docs/spyre-hw.rst, "Examples": "%4 = add.f32 %2, %3", operands oN,
 * parameters PN, dimensions p0..p5 and r0..r2), after a first line
 * naming the operand dtypes and the counts.
 * @prog: the program bytes.
 * @size: their size.
 * @buf: receives the NUL-terminated text, truncated to @len bytes (as
 *	snprintf()); may be NULL when @len is 0.
 * @len: bytes at @buf.
 *
 * Decodes any bytes without judging them (a malformed instruction is
 * printed as raw fields; the card's verifier judges).  Returns the length
 * the whole text needs (without the NUL), or -EINVAL (NULL @prog, @size
 * not 64 + 16 * n, a bad magic or version).
 */
SPYRE_API int spyre_kernel_disasm(const void *prog, size_t size, char *buf,
				  size_t len);

/**
 * spyre_kernel_upload() - copy a program into a new BO of @dev, ready to
 * launch.
 * @dev: the device.
 * @prog: the program bytes (e.g. from spyre_kernel_finalize()).
 * @size: their size, 64 + 16 * n.
 * @bo_flags: SPYRE_BO_FLAGS_NONE (system memory) or SPYRE_BO_DEVICE.
 * @out: receives the BO (its start is the program); the caller owns it
 *	and frees it with spyre_bo_free() once no job uses it.
 *
 * Returns 0, -EINVAL (NULL argument, bad @size), -EOPNOTSUPP (the program
 * uses part 2's SCATTER, SCAN or RAND and the card's VERSION is below
 * 1.2), or as spyre_bo_alloc() and spyre_bo_map().
 */
SPYRE_API int spyre_kernel_upload(struct spyre_device *dev, const void *prog,
				  size_t size, uint32_t bo_flags,
				  struct spyre_bo **out);

/**
 * struct spyre_kernel_arg - one operand of a kernel launch.
 * @mem: element 0 (aligned to the element size); with a BO the @extent
 *	elements must lie in it (-ERANGE) and the BO is listed for the job.
 *	An operand no active lane touches may be SPYRE_MEM_NONE with @extent 0.
 * @extent: elements the program may access (offsets 0..@extent-1).
 * @dtype: SPYRE_DTYPE_*, as the program declares.
 * @pad: must be zero.
 */
struct spyre_kernel_arg {
	struct spyre_mem mem;
	uint64_t extent;
	uint32_t dtype;
	uint32_t pad;
};

/**
 * struct spyre_kernel_launch - one KERNEL command.
 * @prog: the program (e.g. the BO of spyre_kernel_upload() at offset 0),
 *	8-byte aligned; with a BO, libspyre reads the program through the
 *	BO's CPU mapping to check the launch against its signature, to find
 *	the operands it stores to and for SPYRE_KERNEL_DUMP.
 * @prog_size: bytes of the program.
 * @noperands: entries at @operands, 0..32.
 * @nparams: entries at @params, 0..64.
 * @npdims: pointwise dimensions, 0..6.
 * @nrdims: reduction dimensions, 0..3.
 * @pad: must be zero.
 * @operands: the operands (may be NULL when @noperands is 0).
 * @params: the 64-bit parameters (binary32 values in bits 31:0).
 * @size: p0..p5 in @size[0..@npdims-1], r0..r2 in @size[6..6+@nrdims-1],
 *	other entries zero; SPYRE_KSIZE_PARAM(i) takes a size from
 *	parameter i.
 * @reserved: must be zero.
 *
 * Zero-initialise it and set what you need.
 */
struct spyre_kernel_launch {
	struct spyre_mem prog;
	uint32_t prog_size;
	uint32_t noperands;
	uint32_t nparams;
	uint32_t npdims;
	uint32_t nrdims;
	uint32_t pad;
	const struct spyre_kernel_arg *operands;
	const uint64_t *params;
	uint64_t size[9];
	uint64_t reserved[4];
};

/**
 * spyre_cmdbuf_kernel() - append a KERNEL command (104 + 24 * noperands +
 * 8 * nparams bytes) launching @l.
 * @cb: the command buffer.
 * @l: the launch.
 *
 * Checks what the host can: counts, dtypes, sizes (a SPYRE_KSIZE_PARAM
 * naming a parameter that exists), the program size and alignment, every
 * operand's extent against its BO (-ERANGE), and, when @l->prog has a BO,
 * the program's header against the launch (signature).  The BOs of the
 * program and of the operands are recorded (those the program stores to
 * as written).  Returns 0, or -EINVAL, -ERANGE, -ENOMEM; @cb is unchanged
 * on error.
 */
SPYRE_API int spyre_cmdbuf_kernel(struct spyre_cmdbuf *cb,
				  const struct spyre_kernel_launch *l);

/**
 * spyre_stream_kernel() - run one KERNEL on @s (a job of one command).
 * @s: the stream.
 * @l: the launch, as spyre_cmdbuf_kernel().
 *
 * The job is restartable when no operand it stores to shares a BO with
 * another operand.  A job that fails (BAD_PROGRAM, OUT_OF_BOUNDS, ASSERT,
 * a fault) sets the stream's and the context's error as any job error.
 * Returns 0 or a negative errno (as spyre_cmdbuf_kernel(), -EXDEV for a BO
 * of another device, the stream's sticky error, submission errors).
 */
SPYRE_API int spyre_stream_kernel(struct spyre_stream *s,
				  const struct spyre_kernel_launch *l);

#ifdef __cplusplus
}
#endif

#endif /* SPYRE_SPYRE_H */
