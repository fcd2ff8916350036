/* SPDX-License-Identifier: MIT */
/*
 * libspyre internals.  Not installed.  Functions named spyre__* are hidden
 * from the shared library but reachable from the static archive, which the
 * host unit tests (tests/) link against.
 */
#ifndef SPYRE_INTERNAL_H
#define SPYRE_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include <spyre/spyre.h>

#define SPYRE_HIDDEN __attribute__((visibility("hidden")))

/* Match values of the card model (hw/spyre_hw.h). */
#define SPYRE__VENDOR		0x1014
#define SPYRE__DEVICE		0x06a7
#define SPYRE__SUBVENDOR	0x1af4
#define SPYRE__SUBDEVICE	0x1100

/* Most entries SPYRE_VISIBLE_DEVICES may hold. */
#define SPYRE__MAX_VISIBLE	256
/* Binary syncobjs per queue that keep the exact fence of recent jobs. */
#define SPYRE__FENCE_SLOTS	64
/* Initial size of a queue's command upload ring. */
#define SPYRE__RING_SIZE	(64u * 1024u)
/* Internal waits (ring reuse) give up after this long. */
#define SPYRE__INTERNAL_WAIT_NS	(120ull * 1000000000ull)

/* Buckets of a device's handle table (power of two). */
#define SPYRE__HANDLE_BUCKETS	256

struct spyre_device {
	atomic_int refs;
	int fd;
	pid_t pid;
	atomic_int error;		/* sticky context error (<= 0) */
	struct spyre_device_info info;
	/*
	 * Live BOs by GEM handle.  PRIME import of a buffer the file already
	 * holds returns the existing handle, so several spyre_bo may share
	 * one; the handle is closed with the last of them.
	 */
	pthread_mutex_t bo_lock;
	struct spyre_bo *bo_table[SPYRE__HANDLE_BUCKETS];
};

struct spyre_bo {
	struct spyre_device *dev;
	struct spyre_bo *hnext;		/* handle table chain (dev->bo_lock) */
	uint32_t handle;
	uint32_t placement;		/* enum spyre_bo_placement */
	uint64_t size;
	uint64_t va;
	void *host_ptr;			/* registered host range, else NULL */
	pthread_mutex_t map_lock;	/* serialises map/unmap */
	_Atomic(void *) map;		/* CPU mapping made by spyre_bo_map */
};

struct spyre__ring_rec {
	uint64_t off;
	uint64_t len;
	uint64_t point;
};

struct spyre_queue {
	struct spyre_device *dev;
	uint32_t id;
	uint32_t timeline;		/* timeline syncobj */
	pthread_mutex_t lock;		/* protects everything below */
	uint64_t last_point;
	uint32_t tmp_syncobj;		/* binary, for exports (lazy) */
	uint32_t slots[SPYRE__FENCE_SLOTS];	/* binary, lazy */
	/* command upload ring */
	struct spyre_bo *ring;
	uint8_t *ring_map;
	uint64_t ring_head;
	struct spyre__ring_rec *recs;	/* circular FIFO */
	unsigned int rec_first, rec_count, rec_cap;
};

struct spyre_cmdbuf {
	uint8_t *data;
	size_t size;
	size_t cap;
	size_t count;
};

/* device.c */
SPYRE_HIDDEN void spyre__device_get(struct spyre_device *dev);
SPYRE_HIDDEN void spyre__device_put(struct spyre_device *dev);
SPYRE_HIDDEN void spyre__set_error(struct spyre_device *dev, int err);

/* True if @dev may be used by this process. */
static inline bool spyre__same_process(const struct spyre_device *dev)
{
	return dev->pid == getpid();
}

/* Standard entry check: NULL -> -EINVAL, wrong process -> -ECHILD. */
#define SPYRE__CHECK_DEV(dev) do {				\
		if (!(dev))					\
			return -EINVAL;				\
		if (!spyre__same_process(dev))			\
			return -ECHILD;				\
	} while (0)

/* discover.c: pure helpers, exported to the host tests via the archive. */
SPYRE_HIDDEN int spyre__parse_visible(const char *s, unsigned int *idx,
				      unsigned int max);
SPYRE_HIDDEN int spyre__parse_pci_addr(const char *s, unsigned int *domain,
				       unsigned int *bus, unsigned int *dev,
				       unsigned int *fn);
SPYRE_HIDDEN int spyre__scan(const char *sysfs_root, const char *visible,
			     struct spyre_device_desc *descs,
			     unsigned int max);

/* queue.c */
SPYRE_HIDDEN int spyre__wait_point(struct spyre_queue *q, uint64_t point,
				   uint64_t timeout_ns);

/* Absolute CLOCK_MONOTONIC deadline for a relative timeout. */
SPYRE_HIDDEN int64_t spyre__deadline(uint64_t timeout_ns);

#endif
