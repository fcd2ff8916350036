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
#include "drm/spyre_accel.h"

#define SPYRE_HIDDEN __attribute__((visibility("hidden")))

/* Match values of the card model (hw/spyre_hw.h). */

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
	/* SUBMIT limits from the kernel's device info */
	uint32_t max_jobs;
	uint32_t max_bos_per_job;
	uint32_t max_syncs_per_job;
	/*
	 * Live BOs by GEM handle.  PRIME import of a buffer the file already
	 * holds returns the existing handle, so several spyre_bo may share
	 * one; the handle is closed with the last of them.
	 */
	pthread_mutex_t bo_lock;
	struct spyre_bo *bo_table[SPYRE__HANDLE_BUCKETS];
	/*
	 * Streams with batching on (spyre_stream_set_batch()), chained by
	 * spyre_stream.batch_next, so that freeing a BO an open batch names
	 * can flush it.  Lock order: batch_lock, then a stream's lock.
	 */
	pthread_mutex_t batch_lock;
	struct spyre_stream *batching;
	atomic_uint nbatching;		/* streams on that list */
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
	atomic_uint batched;		/* open stream batches naming it */
};

/*
 * A region of a queue's upload ring in use by the job at @point.  A staged
 * device-to-host copy also names where its data goes once the job has
 * succeeded (@out, @out_len bytes from ring offset @out_off).
 */
struct spyre__ring_rec {
	uint64_t off;
	uint64_t len;
	uint64_t point;
	void *out;
	uint64_t out_off;
	uint64_t out_len;
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
	/* BOs named by struct spyre_mem operands (each once, no reference) */
	struct spyre_bo **bos;
	bool *bo_written;		/* per entry of @bos: a command writes it */
	size_t nbos;
	size_t bos_cap;
};

/* Pending cross-stream waits a stream keeps for its next job. */
#define SPYRE__STREAM_WAITS	16
/* Largest staged host copy per job, and bounce chunk of peer copies. */
#define SPYRE__STAGE_CHUNK	((4ull << 20) - 4096)	/* ring stays 4 MiB */
#define SPYRE__PEER_CHUNK	(16ull << 20)

struct spyre_stream {
	struct spyre_queue *q;
	struct spyre_device *dev;
	pthread_mutex_t lock;		/* protects the fields below */
	struct spyre_cmdbuf cb;		/* scratch for one operation */
	struct spyre_fence last;
	uint64_t enqueued;		/* spyre_stream_enqueued() */
	int error;			/* sticky job error */
	uint32_t waits[SPYRE__STREAM_WAITS];	/* binary syncobjs, lazy */
	unsigned int nwaits;		/* pending for the next job */
	/*
	 * The open batch (spyre_stream_set_batch()): operations appended
	 * since the last flush, submitted as one job; each of its BOs has
	 * its @batched count raised while it is listed here.
	 */
	struct spyre_cmdbuf batch;
	unsigned int batch_max;		/* commands per job; 0: no batching */
	bool batch_restartable;		/* its one command may rerun */
	int batch_err;			/* of an implicit flush, for the next */
	struct spyre_stream *batch_next;	/* dev->batching (batch_lock) */
};

/*
 * stream.c: flush every open batch of @bo's device that names @bo, except
 * the one of @self (may be NULL).  Called, without any stream lock held,
 * before a job or batched command that names @bo is queued (so jobs that
 * share a BO reach the kernel in the order the program queued them, and
 * its implicit BO fences order them) and before @bo is freed.
 */
SPYRE_HIDDEN void spyre__stream_flush_bo(struct spyre_bo *bo,
					 struct spyre_stream *self);
/* stream.c: spyre__stream_flush_bo() for each BO of @mems / @bos. */
SPYRE_HIDDEN void spyre__stream_claim(struct spyre_stream *self,
				      const struct spyre_mem *mems, size_t n);
SPYRE_HIDDEN void spyre__stream_claim_bos(struct spyre_stream *self,
					  struct spyre_bo *const *bos,
					  size_t n);

/*
 * One submission (internal): the commands come from @cb (copied into the
 * queue's upload ring), from a staged host copy (@stage_*: one COPY
 * between the ring and @stage_va, built here), or are already at
 * @cmd_va/@cmd_size.  @repeat > 1 (only with @cmd_va) submits that many
 * identical jobs in one ioctl: the first one waits, the last one lists
 * the BOs and signals.
 */
struct spyre__sub {
	const struct spyre_cmdbuf *cb;
	uint64_t cmd_va;
	uint32_t cmd_size;
	unsigned int repeat;
	struct spyre_bo *extra_bo;		/* e.g. a graph's command BO */
	bool extra_bo_written;			/* a command writes extra_bo */
	struct spyre_bo *const *bos;
	const bool *bos_written;		/* per BO; NULL: all written */
	unsigned int nbos;
	const struct spyre_fence *waits;
	unsigned int nwaits;
	const uint32_t *wait_syncobjs;		/* binary, point 0 */
	unsigned int nwait_syncobjs;
	uint32_t signal_syncobj;		/* binary, or 0 */
	bool restartable;			/* DRM_SPYRE_JOB_RESTARTABLE */
	/*
	 * A launch of the commands at cmd_va with staging
	 * (spyre_graph_launch_staged()): one job of @pre's commands before
	 * the @repeat jobs and one of @post's after them, both written into
	 * the ring, all in one ioctl; NULL or empty: no such job.
	 */
	const struct spyre_cmdbuf *pre;
	const struct spyre_cmdbuf *post;
	/* staged host copy */
	uint64_t stage_size;
	uint64_t stage_va;			/* device side of the copy */
	const void *stage_in;			/* host -> device, or */
	void *stage_out;			/* device -> host */
};

/*
 * cmdbuf.c: append @src's commands and BOs to @dst, and @bos[0..@nbos) as
 * written BOs; each BO is listed once.  Returns 0 or -ENOMEM (@dst is then
 * unchanged).  Sets *@nnew to the number of BOs new to @dst (they are
 * the last ones of dst's list).
 */
SPYRE_HIDDEN int spyre__cmdbuf_append(struct spyre_cmdbuf *dst,
				      const struct spyre_cmdbuf *src,
				      struct spyre_bo *const *bos,
				      unsigned int nbos, size_t *nnew);
/* cmdbuf.c: does a command of @cb write its BO number @i? */
SPYRE_HIDDEN bool spyre__cmdbuf_bo_written(const struct spyre_cmdbuf *cb,
					   size_t i);
/* cmdbuf.c: spyre_cmdbuf_kernel(), also giving the mask of the operands
 * the program stores to (all of them when its bytes are not readable). */
SPYRE_HIDDEN int spyre__cmdbuf_kernel(struct spyre_cmdbuf *cb,
				      const struct spyre_kernel_launch *l,
				      uint32_t *written);

/* cmdbuf.c: can @dev's card run program @prog (part 2 needs VERSION 1.2)? */
SPYRE_HIDDEN bool spyre__kernel_runs(const struct spyre_device *dev,
				     const void *prog, size_t size);

/* device.c */
SPYRE_HIDDEN void spyre__device_get(struct spyre_device *dev);
SPYRE_HIDDEN void spyre__device_put(struct spyre_device *dev);
/* Record @err (< 0) as the device's sticky error unless one is set; a
 * -ECANCELED is replaced by the kernel's context error when it has one. */
SPYRE_HIDDEN void spyre__set_error(struct spyre_device *dev, int err);

/* True if @dev may be used by this process. */
/*
 * device.c: this process's pid without a system call on every check (a
 * cached value, refreshed in the child by a pthread_atfork() handler; a
 * child made by a raw clone() without fork()'s handlers is not seen).
 */
SPYRE_HIDDEN pid_t spyre__getpid(void);

static inline bool spyre__same_process(const struct spyre_device *dev)
{
	return dev->pid == spyre__getpid();
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
SPYRE_HIDDEN int spyre__telemetry(const char *sysfs_root, const char *pci_addr,
				  struct spyre_telemetry *out);

/* queue.c */
SPYRE_HIDDEN int spyre__wait_point(struct spyre_queue *q, uint64_t point,
				   uint64_t timeout_ns);
SPYRE_HIDDEN int spyre__submit(struct spyre_queue *q,
			       const struct spyre__sub *sub,
			       struct spyre_fence *out);
/* Deliver staged device-to-host copies of jobs that have completed. */
SPYRE_HIDDEN int spyre__queue_retire(struct spyre_queue *q);
/*
 * Refine a job error of @q seen at @point: if it is -ECANCELED, the error
 * of the first failed job of @q among the recent ones up to @point, if
 * any.  Waits (at most SPYRE__INTERNAL_WAIT_NS) for @point to end first:
 * the kernel may refuse a submission for the context's error before it
 * has signalled the failed job's fence.
 */
SPYRE_HIDDEN int spyre__queue_refine_error(struct spyre_queue *q,
					   uint64_t point, int err);
/* Status of a sync_file: 1 signalled OK, 0 pending, < 0 its error. */
SPYRE_HIDDEN int spyre__sync_file_status(int fd);

/*
 * stream.c: spyre__stream_begin() locks @s and fails with its sticky
 * error (unlocking); then encode into s->cb, submit with
 * spyre__stream_submit_locked() (adds the pending waits, keeps the fence,
 * records a refused submission as the stream's error) and unlock s->lock.
 */
SPYRE_HIDDEN int spyre__stream_begin(struct spyre_stream *s);
SPYRE_HIDDEN int spyre__stream_submit_locked(struct spyre_stream *s,
					     struct spyre__sub *sub);
/* Make the next job of @s wait for a sync_file / a binary syncobj of
 * @s's device (under s->lock). */
SPYRE_HIDDEN int spyre__stream_wait_sync_file_locked(struct spyre_stream *s,
						     int fd);
SPYRE_HIDDEN int spyre__stream_wait_syncobj_locked(struct spyre_stream *s,
						   uint32_t src);

/* cmdbuf.c */
SPYRE_HIDDEN void spyre__cmdbuf_fini(struct spyre_cmdbuf *cb);

/* device.c: record the kernel's context error (QUERY_CONTEXT), if any. */
SPYRE_HIDDEN void spyre__refresh_error(struct spyre_device *dev);

/* Absolute CLOCK_MONOTONIC deadline for a relative timeout. */
SPYRE_HIDDEN int64_t spyre__deadline(uint64_t timeout_ns);

#endif
