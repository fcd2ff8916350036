// SPDX-License-Identifier: MIT
/* Opening cards, device info, error strings. */
#include "internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"

_Static_assert(SPYRE_PRIORITY_LOW == DRM_SPYRE_PRIORITY_LOW, "prio");
_Static_assert(SPYRE_PRIORITY_NORMAL == DRM_SPYRE_PRIORITY_NORMAL, "prio");
_Static_assert(SPYRE_PRIORITY_HIGH == DRM_SPYRE_PRIORITY_HIGH, "prio");
_Static_assert(SPYRE_DEV_CAP_FP16 == DRM_SPYRE_CAP_FP16, "caps");
_Static_assert(SPYRE_DEV_CAP_BF16 == DRM_SPYRE_CAP_BF16, "caps");
_Static_assert(SPYRE_DEV_CAP_FP8 == DRM_SPYRE_CAP_FP8, "caps");
_Static_assert(SPYRE_DEV_CAP_INT8 == DRM_SPYRE_CAP_INT8, "caps");
_Static_assert(SPYRE_DEV_CAP_MMU == DRM_SPYRE_CAP_MMU, "caps");
_Static_assert(SPYRE_DEV_CAP_SEM == DRM_SPYRE_CAP_SEM, "caps");
_Static_assert(SPYRE_DEV_CAP_KERNEL == DRM_SPYRE_CAP_KERNEL, "caps");

SPYRE_API const char *spyre_version(void)
{
#define S_(x) #x
#define S(x) S_(x)
	return S(SPYRE_VERSION_MAJOR) "." S(SPYRE_VERSION_MINOR) "."
	       S(SPYRE_VERSION_PATCH);
#undef S
#undef S_
}

int64_t spyre__deadline(uint64_t timeout_ns)
{
	struct timespec ts;
	int64_t now;

	if (timeout_ns == SPYRE_TIMEOUT_INFINITE)
		return INT64_MAX;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
	if (timeout_ns > (uint64_t)(INT64_MAX - now))
		return INT64_MAX;
	return now + (int64_t)timeout_ns;
}

void spyre__device_get(struct spyre_device *dev)
{
	atomic_fetch_add(&dev->refs, 1);
}

static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
static atomic_int cached_pid;

static void pid_refresh(void)
{
	atomic_store(&cached_pid, (int)getpid());
}

static void pid_init(void)
{
	pid_refresh();
	pthread_atfork(NULL, NULL, pid_refresh);
}

pid_t spyre__getpid(void)
{
	pthread_once(&pid_once, pid_init);
	return (pid_t)atomic_load(&cached_pid);
}

void spyre__device_put(struct spyre_device *dev)
{
	if (atomic_fetch_sub(&dev->refs, 1) != 1)
		return;
	/* The fd is this process's own copy even after fork(): close it. */
	close(dev->fd);
	pthread_mutex_destroy(&dev->bo_lock);
	pthread_mutex_destroy(&dev->batch_lock);
	free(dev);
}

static void set_error_raw(struct spyre_device *dev, int err)
{
	int zero = 0;

	if (err < 0)
		atomic_compare_exchange_strong(&dev->error, &zero, err);
}

static int query_block(struct spyre_device *dev, uint32_t query, void *buf,
		       uint32_t len, uint32_t min);

void spyre__refresh_error(struct spyre_device *dev)
{
	struct drm_spyre_context_info ci;

	if (!query_block(dev, DRM_SPYRE_QUERY_CONTEXT, &ci, sizeof(ci),
			 offsetof(struct drm_spyre_context_info, reserved)))
		set_error_raw(dev, ci.error);
}

void spyre__set_error(struct spyre_device *dev, int err)
{
	/*
	 * A cancellation is the consequence of an earlier failure: record
	 * the kernel's (first) error of the context instead when there is
	 * one.
	 */
	if (err == -ECANCELED && !atomic_load(&dev->error))
		spyre__refresh_error(dev);
	set_error_raw(dev, err);
}

static int query_info(struct spyre_device *dev)
{
	struct drm_spyre_device_info di;
	struct drm_spyre_query q;
	struct spyre_device_info *info = &dev->info;
	drmVersionPtr ver;

	ver = drmGetVersion(dev->fd);
	if (!ver)
		return -ENODEV;	/* not a DRM node at all */
	if (!ver->name || strcmp(ver->name, "spyre")) {
		drmFreeVersion(ver);
		return -ENODEV;
	}
	snprintf(info->driver_name, sizeof(info->driver_name), "%s",
		 ver->name);
	info->driver_major = ver->version_major;
	info->driver_minor = ver->version_minor;
	info->driver_patch = ver->version_patchlevel;
	drmFreeVersion(ver);

	memset(&di, 0, sizeof(di));
	memset(&q, 0, sizeof(q));
	q.query = DRM_SPYRE_QUERY_DEVICE_INFO;
	q.size = sizeof(di);
	q.data = (uintptr_t)&di;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUERY, &q))
		return -errno;
	if (q.size < offsetof(struct drm_spyre_device_info, reserved) ||
	    !di.max_jobs || !di.max_bos_per_job || !di.max_syncs_per_job)
		return -EPROTO;
	dev->max_jobs = di.max_jobs;
	dev->max_bos_per_job = di.max_bos_per_job;
	dev->max_syncs_per_job = di.max_syncs_per_job;

	info->hw_version = di.hw_version;
	info->num_cores = di.num_cores;
	info->num_queues = di.num_queues;
	info->num_contexts = di.num_contexts;
	info->devmem_size = di.devmem_size;
	info->caps = di.caps;
	info->va_start = di.va_start;
	info->va_end = di.va_end;
	info->max_cmd_size = di.max_cmd_size;
	info->pci_domain = di.pci_domain;
	info->pci_bus = di.pci_bus;
	info->pci_devfn = di.pci_devfn;
	if (!info->desc.vendor_id) {
		info->desc.vendor_id = (uint16_t)di.vendor_id;
		info->desc.device_id = (uint16_t)di.device_id;
		info->desc.subsystem_vendor_id = (uint16_t)di.subsystem_vendor_id;
		info->desc.subsystem_id = (uint16_t)di.subsystem_id;
	}
	if (!info->desc.pci_addr[0])
		snprintf(info->desc.pci_addr, sizeof(info->desc.pci_addr),
			 "%04x:%02x:%02x.%x", di.pci_domain & 0xffff,
			 di.pci_bus & 0xff, (di.pci_devfn >> 3) & 0x1f,
			 di.pci_devfn & 7);
	return 0;
}

static int open_desc(const struct spyre_device_desc *desc, const char *path,
		     struct spyre_device **out)
{
	struct spyre_device *dev;
	int ret;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	atomic_init(&dev->refs, 1);
	atomic_init(&dev->error, 0);
	pthread_mutex_init(&dev->bo_lock, NULL);
	pthread_mutex_init(&dev->batch_lock, NULL);
	dev->pid = spyre__getpid();
	if (desc) {
		dev->info.desc = *desc;
	} else {
		struct stat st;

		dev->info.desc.index = UINT32_MAX;
		dev->info.desc.phys_index = UINT32_MAX;
		snprintf(dev->info.desc.devnode, sizeof(dev->info.desc.devnode),
			 "%s", path);
		if (!stat(path, &st))
			dev->info.desc.accel_minor = minor(st.st_rdev);
	}
	dev->fd = open(path, O_RDWR | O_CLOEXEC);
	if (dev->fd < 0) {
		ret = -errno;
		pthread_mutex_destroy(&dev->bo_lock);
		pthread_mutex_destroy(&dev->batch_lock);
		free(dev);
		return ret;
	}
	ret = query_info(dev);
	if (ret) {
		close(dev->fd);
		pthread_mutex_destroy(&dev->bo_lock);
		pthread_mutex_destroy(&dev->batch_lock);
		free(dev);
		return ret;
	}
	*out = dev;
	return 0;
}

SPYRE_API int spyre_device_open(unsigned int index, struct spyre_device **out)
{
	struct spyre_device_desc *descs;
	int n, ret;

	if (!out)
		return -EINVAL;
	n = spyre_device_count();
	if (n < 0)
		return n;
	if (index >= (unsigned int)n)
		return -ENODEV;
	descs = calloc((size_t)n, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	ret = spyre_device_list(descs, (unsigned int)n);
	if (ret >= 0 && index >= (unsigned int)ret)
		ret = -ENODEV;	/* a card went away meanwhile */
	if (ret >= 0)
		ret = open_desc(&descs[index], descs[index].devnode, out);
	free(descs);
	return ret;
}

SPYRE_API int spyre_device_open_pci(const char *pci_addr,
				    struct spyre_device **out)
{
	unsigned int d, b, s, f;
	struct spyre_device_desc *descs;
	char want[16];
	int n, ret;

	if (!out || spyre__parse_pci_addr(pci_addr, &d, &b, &s, &f))
		return -EINVAL;
	snprintf(want, sizeof(want), "%04x:%02x:%02x.%x", d, b, s, f);
	n = spyre_device_count();
	if (n <= 0)
		return n ? n : -ENODEV;
	descs = calloc((size_t)n, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	ret = spyre_device_list(descs, (unsigned int)n);
	if (ret > n)
		ret = n;
	if (ret >= 0) {
		int i, cnt = ret;

		ret = -ENODEV;
		for (i = 0; i < cnt; i++) {
			if (!strcmp(descs[i].pci_addr, want)) {
				ret = open_desc(&descs[i], descs[i].devnode,
						out);
				break;
			}
		}
	}
	free(descs);
	return ret;
}

SPYRE_API int spyre_device_open_path(const char *path,
				     struct spyre_device **out)
{
	if (!path || !out)
		return -EINVAL;
	return open_desc(NULL, path, out);
}

SPYRE_API void spyre_device_close(struct spyre_device *dev)
{
	if (dev)
		spyre__device_put(dev);
}

SPYRE_API int spyre_device_get_info(struct spyre_device *dev,
				    struct spyre_device_info *info)
{
	SPYRE__CHECK_DEV(dev);
	if (!info)
		return -EINVAL;
	*info = dev->info;
	return 0;
}

SPYRE_API int spyre_device_fd(struct spyre_device *dev)
{
	SPYRE__CHECK_DEV(dev);
	return dev->fd;
}

SPYRE_API int spyre_device_error(struct spyre_device *dev)
{
	SPYRE__CHECK_DEV(dev);
	return atomic_load(&dev->error);
}

/* Read query block @query into @buf (@len bytes, zero-filled first); the
 * kernel must write at least @min bytes. */
static int query_block(struct spyre_device *dev, uint32_t query, void *buf,
		       uint32_t len, uint32_t min)
{
	struct drm_spyre_query q;

	memset(buf, 0, len);
	memset(&q, 0, sizeof(q));
	q.query = query;
	q.size = len;
	q.data = (uintptr_t)buf;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUERY, &q))
		return -errno;
	return q.size < min ? -EPROTO : 0;
}

SPYRE_API int spyre_device_memory_info(struct spyre_device *dev,
				       struct spyre_memory_info *info)
{
	struct drm_spyre_memory_info mi;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!info)
		return -EINVAL;
	ret = query_block(dev, DRM_SPYRE_QUERY_MEMORY, &mi, sizeof(mi),
			  offsetof(struct drm_spyre_memory_info, reserved));
	if (ret)
		return ret;
	memset(info, 0, sizeof(*info));
	info->devmem_total = mi.devmem_total;
	info->devmem_used = mi.devmem_used;
	info->sysmem_used = mi.sysmem_used;
	info->userptr_used = mi.userptr_used;
	info->file_devmem_used = mi.file_devmem_used;
	info->file_sysmem_used = mi.file_sysmem_used;
	info->file_userptr_used = mi.file_userptr_used;
	info->max_bo_size = mi.max_bo_size;
	return 0;
}

SPYRE_API int spyre_device_context_info(struct spyre_device *dev,
					struct spyre_context_info *info)
{
	struct drm_spyre_context_info ci;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!info)
		return -EINVAL;
	ret = query_block(dev, DRM_SPYRE_QUERY_CONTEXT, &ci, sizeof(ci),
			  offsetof(struct drm_spyre_context_info, reserved));
	if (ret)
		return ret;
	memset(info, 0, sizeof(*info));
	info->error = ci.error;
	info->context_id = ci.context_id;
	info->faults = ci.faults;
	info->fault_va = ci.fault_va;
	if (ci.error < 0)
		set_error_raw(dev, ci.error);
	return 0;
}

struct err_desc {
	int err;
	const char *msg;
};

static const struct err_desc err_table[] = {
	{ EPERM, "operation not permitted" },
	{ ENOENT, "not found (device node, BO, queue or syncobj handle)" },
	{ EINTR, "interrupted by a signal" },
	{ EIO, "the card failed a command: invalid opcode, command or operand, or past a limit of the card (a command's time budget or sizes)" },
	{ ENXIO, "no such device or address" },
	{ E2BIG, "size above the driver or card limit" },
	{ EBADF, "bad file descriptor" },
	{ ECHILD, "handle used in a child after fork(); reopen the device" },
	{ EAGAIN, "resource temporarily unavailable, try again" },
	{ ENOMEM, "out of host memory or device address space" },
	{ EACCES, "permission denied: no access to the accel device node, or a high-priority queue without CAP_SYS_NICE" },
	{ EFAULT, "bad address: the card hit an MMU fault (unmapped or read-only VA) or a bad user pointer" },
	{ EBUSY, "busy: no free hardware queue, or the job has not completed" },
	{ EEXIST, "object already exists" },
	{ EXDEV, "objects belong to different devices" },
	{ ENODEV, "no such Spyre device, or it was unplugged" },
	{ EINVAL, "invalid argument" },
	{ ENFILE, "too many open files in the system" },
	{ EMFILE, "too many open files" },
	{ ENOSPC, "no space left on the device" },
	{ ENODATA, "no data: the event carries no timestamp (not recorded, imported, or timing disabled)" },
	{ ERANGE, "offset or size outside the buffer object, or a kernel's access outside an operand's extent" },
	{ EDOM, "a kernel's index check failed: an index outside its dimension (an out-of-range index in gather, scatter or indexing)" },
	{ ENOEXEC, "the card refused a kernel program (see the job's status detail)" },
	{ ENOSYS, "not implemented by the driver" },
	{ ENOTTY, "ioctl not supported by this device node" },
	{ EPROTO, "driver returned an unexpected answer (ABI mismatch)" },
	{ EOVERFLOW, "value too large" },
	{ EOPNOTSUPP, "operation not supported on this device or buffer (e.g. device memory shared with another card, export of registered host memory)" },
	{ ETIME, "the job timed out on the card (hang)" },
	{ ETIMEDOUT, "timed out waiting" },
	{ ECANCELED, "context is in error after an earlier job failed (sticky); reopen the device" },
	{ ENOTRECOVERABLE, "the device is in an unrecoverable state" },
};

SPYRE_API const char *spyre_strerror(int err)
{
	if (err == 0)
		return "success";
	if (err == INT_MIN)
		return "unknown error";
	if (err < 0)
		err = -err;
	for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
		if (err_table[i].err == err)
			return err_table[i].msg;
	return "unknown error";
}
