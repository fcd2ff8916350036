// SPDX-License-Identifier: MIT
/*
 * Streams: in-order helpers that encode an operation and submit it as one
 * job on the stream's queue, with a sticky per-stream error and pending
 * cross-stream waits (events) that the next job consumes; and, when the
 * stream batches (spyre_stream_set_batch()), the open batch those
 * operations are appended to and its flush points.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include <xf86drm.h>

SPYRE_API int spyre_stream_create(struct spyre_device *dev, int priority,
				  struct spyre_stream **out)
{
	struct spyre_stream *s;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!out)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	ret = spyre_queue_create(dev, priority, &s->q);
	if (ret) {
		free(s);
		return ret;
	}
	s->dev = dev;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

static void batch_unlist(struct spyre_stream *s);
static int batch_flush_locked(struct spyre_stream *s);
static void batch_discard_locked(struct spyre_stream *s);

SPYRE_API void spyre_stream_destroy(struct spyre_stream *s)
{
	if (!s)
		return;
	if (s->batch_max) {
		batch_unlist(s);
		pthread_mutex_lock(&s->lock);
		if (spyre__same_process(s->dev))
			batch_flush_locked(s);
		else
			batch_discard_locked(s);
		pthread_mutex_unlock(&s->lock);
	}
	if (spyre__same_process(s->dev)) {
		for (unsigned int i = 0; i < SPYRE__STREAM_WAITS; i++)
			if (s->waits[i])
				drmSyncobjDestroy(s->dev->fd, s->waits[i]);
	}
	spyre_queue_destroy(s->q);
	spyre__cmdbuf_fini(&s->cb);
	spyre__cmdbuf_fini(&s->batch);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

SPYRE_API struct spyre_queue *spyre_stream_queue(struct spyre_stream *s)
{
	return s ? s->q : NULL;
}

/* Check that [off, off + len) lies inside @bo. */
static int range_ok(const struct spyre_bo *bo, uint64_t off, uint64_t len)
{
	return off <= bo->size && len <= bo->size - off;
}

/* Record @err as the stream's error (under s->lock), refined if it is a
 * cancellation; returns the stream's error. */
static int stream_fail_locked(struct spyre_stream *s, int err)
{
	if (!s->error) {
		err = spyre__queue_refine_error(s->q, s->last.point, err);
		s->error = err;
	}
	return s->error;
}

/* ---- batches ------------------------------------------------------------ */

/*
 * Submit the open batch of @s (under s->lock) as one job; its BOs are no
 * longer held by it whatever the outcome (a failed batch's commands never
 * run).  Returns 0, the submission's error, or the error an earlier
 * implicit flush kept for this one (reported once).
 */
/* Empty the open batch of @s (under s->lock), releasing its BOs. */
static void batch_discard_locked(struct spyre_stream *s)
{
	for (size_t i = 0; i < s->batch.nbos; i++)
		atomic_fetch_sub(&s->batch.bos[i]->batched, 1);
	spyre_cmdbuf_reset(&s->batch);
}

static int batch_flush_locked(struct spyre_stream *s)
{
	struct spyre__sub sub;
	int ret = 0;

	if (s->error) {
		/* a stream in error runs nothing more */
		batch_discard_locked(s);
		return s->error;
	}
	if (s->batch.count) {
		memset(&sub, 0, sizeof(sub));
		sub.cb = &s->batch;
		sub.restartable = s->batch.count == 1 && s->batch_restartable;
		ret = spyre__stream_submit_locked(s, &sub);
		batch_discard_locked(s);
	}
	if (!ret && s->batch_err)
		ret = s->batch_err;
	s->batch_err = 0;
	return ret;
}

/* A flush nobody asked for: its error waits for the next flush point. */
static void batch_flush_implicit_locked(struct spyre_stream *s)
{
	int ret = batch_flush_locked(s);

	if (ret && !s->batch_err)
		s->batch_err = ret;
}

/*
 * Append the operation encoded in s->cb (and the written BOs @bos) to the
 * open batch of @s (under s->lock), flushing first when it would not fit
 * in one job and after when the batch is full.
 */
static int batch_append_locked(struct spyre_stream *s,
			       struct spyre_bo *const *bos, unsigned int nbos,
			       bool restartable)
{
	struct spyre_cmdbuf *b = &s->batch;
	size_t nnew;
	int ret;

	if (b->count && (b->size + s->cb.size > s->dev->info.max_cmd_size ||
			 b->nbos + s->cb.nbos + nbos + 2 >
				 s->dev->max_bos_per_job))
		batch_flush_implicit_locked(s);
	if (s->cb.size > s->dev->info.max_cmd_size)
		return -E2BIG;
	ret = spyre__cmdbuf_append(b, &s->cb, bos, nbos, &nnew);
	if (ret)
		return ret;
	s->enqueued++;
	for (size_t i = b->nbos - nnew; i < b->nbos; i++)
		atomic_fetch_add(&b->bos[i]->batched, 1);
	s->batch_restartable = restartable;
	if (b->count >= s->batch_max)
		batch_flush_implicit_locked(s);
	return 0;
}

/* Take @s off its device's list of batching streams (if on it). */
static void batch_unlist(struct spyre_stream *s)
{
	struct spyre_device *dev = s->dev;
	struct spyre_stream **pp;

	pthread_mutex_lock(&dev->batch_lock);
	for (pp = &dev->batching; *pp; pp = &(*pp)->batch_next) {
		if (*pp == s) {
			*pp = s->batch_next;
			atomic_fetch_sub(&dev->nbatching, 1);
			break;
		}
	}
	s->batch_next = NULL;
	pthread_mutex_unlock(&dev->batch_lock);
}

SPYRE_API int spyre_stream_set_batch(struct spyre_stream *s,
				     unsigned int max_cmds)
{
	struct spyre_device *dev;
	unsigned int old;
	int ret;

	if (!s || max_cmds > SPYRE_STREAM_BATCH_MAX)
		return -EINVAL;
	dev = s->dev;
	SPYRE__CHECK_DEV(dev);
	pthread_mutex_lock(&s->lock);
	ret = batch_flush_locked(s);
	old = s->batch_max;
	s->batch_max = max_cmds;
	pthread_mutex_unlock(&s->lock);
	if (old && !max_cmds) {
		batch_unlist(s);
	} else if (!old && max_cmds) {
		pthread_mutex_lock(&dev->batch_lock);
		s->batch_next = dev->batching;
		dev->batching = s;
		atomic_fetch_add(&dev->nbatching, 1);
		pthread_mutex_unlock(&dev->batch_lock);
	}
	return ret;
}

SPYRE_API int spyre_stream_flush(struct spyre_stream *s)
{
	int ret;

	if (!s)
		return -EINVAL;
	SPYRE__CHECK_DEV(s->dev);
	pthread_mutex_lock(&s->lock);
	ret = s->error ? s->error : batch_flush_locked(s);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void spyre__stream_flush_bo(struct spyre_bo *bo, struct spyre_stream *self)
{
	struct spyre_device *dev = bo->dev;

	if (!spyre__same_process(dev))
		return;
	pthread_mutex_lock(&dev->batch_lock);
	for (struct spyre_stream *s = dev->batching; s; s = s->batch_next) {
		if (s == self)
			continue;
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < s->batch.nbos; i++) {
			if (s->batch.bos[i] == bo) {
				batch_flush_implicit_locked(s);
				break;
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&dev->batch_lock);
}

/*
 * Whether another stream than @self may hold @bo in its open batch: the
 * count says some batch names it, and it is not only @self's (a stream
 * that batches alone on its device needs no walk).
 */
static bool claim_needed(struct spyre_bo *bo, struct spyre_stream *self)
{
	unsigned int n = atomic_load(&bo->batched);

	if (!n)
		return false;
	return !self || !self->batch_max ||
	       atomic_load(&bo->dev->nbatching) > 1;
}

void spyre__stream_claim(struct spyre_stream *self,
			 const struct spyre_mem *mems, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (mems[i].bo && claim_needed(mems[i].bo, self))
			spyre__stream_flush_bo(mems[i].bo, self);
}

void spyre__stream_claim_bos(struct spyre_stream *self,
			     struct spyre_bo *const *bos, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (bos[i] && claim_needed(bos[i], self))
			spyre__stream_flush_bo(bos[i], self);
}

/* ---- operations --------------------------------------------------------- */

/*
 * Lock @s, fail with its sticky error, and start an empty command in the
 * scratch buffer (an operation that may join the open batch).
 */
static int stream_begin_op(struct spyre_stream *s)
{
	if (!s)
		return -EINVAL;
	SPYRE__CHECK_DEV(s->dev);
	pthread_mutex_lock(&s->lock);
	if (s->error) {
		int e = s->error;

		pthread_mutex_unlock(&s->lock);
		return e;
	}
	spyre_cmdbuf_reset(&s->cb);
	return 0;
}

/*
 * As stream_begin_op(), for work that is submitted on its own: the open
 * batch is flushed first (a flush point), and its error returned.
 */
int spyre__stream_begin(struct spyre_stream *s)
{
	int ret = stream_begin_op(s);

	if (ret)
		return ret;
	ret = batch_flush_locked(s);
	if (ret) {
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	return 0;
}

/*
 * Submit @sub on @s (under s->lock) with the pending waits; keeps the
 * fence, and on a refused submission (-ECANCELED) sets the sticky error.
 */
int spyre__stream_submit_locked(struct spyre_stream *s,
				struct spyre__sub *sub)
{
	struct spyre_fence f;
	int ret;

	sub->wait_syncobjs = s->waits;
	sub->nwait_syncobjs = s->nwaits;
	ret = spyre__submit(s->q, sub, &f);
	if (!ret) {
		s->last = f;
		s->nwaits = 0;
		if (sub->cb != &s->batch)	/* batched: counted when queued */
			s->enqueued++;
	} else if (ret == -ECANCELED) {
		/* report the stream's own failure, not the refusal */
		ret = stream_fail_locked(s, ret);
	}
	return ret;
}

/*
 * May a job of one command that writes @out and reads @in[0..@n) be run
 * again from its start after a reset (DRM_SPYRE_JOB_RESTARTABLE)?  Only if
 * it does not read what it writes.  Operands are compared by BO: an input
 * in the output's BO counts as overlapping, and so does a raw device VA
 * (SPYRE_MEM_VA: unknown); an absent operand (SPYRE_MEM_NONE) does not.
 */
static bool stream_disjoint(struct spyre_mem out, const struct spyre_mem *in,
			    unsigned int n)
{
	if (!out.bo)
		return !out.offset;
	for (unsigned int i = 0; i < n; i++)
		if (in[i].bo == out.bo || (!in[i].bo && in[i].offset))
			return false;
	return true;
}

/*
 * Submit s->cb (encoded by the caller, with encoder result @ret), marked
 * @restartable, and unlock.
 */
static int stream_end_as(struct spyre_stream *s, int ret,
			 struct spyre_bo *const *bos, unsigned int nbos,
			 bool restartable, bool batch)
{
	if (!ret && batch) {
		ret = batch_append_locked(s, bos, nbos, restartable);
	} else if (!ret) {
		struct spyre__sub sub;

		memset(&sub, 0, sizeof(sub));
		sub.cb = &s->cb;
		sub.bos = bos;
		sub.nbos = nbos;
		sub.restartable = restartable;
		ret = spyre__stream_submit_locked(s, &sub);
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static int stream_end(struct spyre_stream *s, int ret,
		      struct spyre_bo *const *bos, unsigned int nbos,
		      bool restartable)
{
	return stream_end_as(s, ret, bos, nbos, restartable, s->batch_max);
}

SPYRE_API int spyre_stream_fill(struct spyre_stream *s, struct spyre_bo *dst,
				uint64_t offset, uint64_t count,
				uint32_t elem_size, uint64_t value)
{
	int ret;

	if (!s || !dst)
		return -EINVAL;
	if (dst->dev != s->q->dev)
		return -EXDEV;
	if (count == 0 || (elem_size != 1 && elem_size != 2 &&
			   elem_size != 4 && elem_size != 8))
		return -EINVAL;
	if (count > UINT64_MAX / elem_size ||
	    !range_ok(dst, offset, count * elem_size))
		return -ERANGE;
	spyre__stream_claim_bos(s, &dst, 1);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_fill(&s->cb, dst->va + offset, count, elem_size,
				value);
	return stream_end(s, ret, &dst, 1, true);
}

SPYRE_API int spyre_stream_copy(struct spyre_stream *s,
				struct spyre_bo *dst, uint64_t dst_off,
				struct spyre_bo *src, uint64_t src_off,
				uint64_t size)
{
	return spyre_stream_copy_2d(s, dst, dst_off, 0, src, src_off, 0,
				    size, 1);
}

SPYRE_API int spyre_stream_copy_2d(struct spyre_stream *s,
				   struct spyre_bo *dst, uint64_t dst_off,
				   uint64_t dst_pitch,
				   struct spyre_bo *src, uint64_t src_off,
				   uint64_t src_pitch,
				   uint64_t width_bytes, uint64_t height)
{
	struct spyre_bo *bos[2];
	uint64_t dlen, slen;
	int ret;

	if (!s || !dst || !src)
		return -EINVAL;
	if (dst->dev != s->q->dev || src->dev != s->q->dev)
		return -EXDEV;
	if (!width_bytes || !height)
		return -EINVAL;
	if (height > 1 && (dst_pitch < width_bytes || src_pitch < width_bytes))
		return -EINVAL;
	if (height > 1) {
		if (height - 1 > (UINT64_MAX - width_bytes) / dst_pitch ||
		    height - 1 > (UINT64_MAX - width_bytes) / src_pitch)
			return -ERANGE;
		dlen = (height - 1) * dst_pitch + width_bytes;
		slen = (height - 1) * src_pitch + width_bytes;
	} else {
		dlen = slen = width_bytes;
	}
	if (!range_ok(dst, dst_off, dlen) || !range_ok(src, src_off, slen))
		return -ERANGE;
	bos[0] = dst;
	bos[1] = src;
	spyre__stream_claim_bos(s, bos, 2);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_copy_2d(&s->cb, dst->va + dst_off, dst_pitch,
				   SPYRE_DTYPE_U8, src->va + src_off,
				   src_pitch, SPYRE_DTYPE_U8, width_bytes,
				   height, 0);
	return stream_end(s, ret, bos, dst == src ? 1 : 2,
			  dst != src || dst_off >= src_off + slen ||
			  src_off >= dst_off + dlen);
}

/* ---- staged host copies ------------------------------------------------- */

static int stream_host_copy(struct spyre_stream *s, struct spyre_bo *bo,
			    uint64_t off, const void *in, void *out,
			    uint64_t size)
{
	uint64_t done = 0;
	int ret = 0;

	if (!s || !bo || (!in && !out) || !size)
		return -EINVAL;
	if (bo->dev != s->q->dev)
		return -EXDEV;
	if (!range_ok(bo, off, size))
		return -ERANGE;
	spyre__stream_claim_bos(s, &bo, 1);
	while (!ret && done < size) {
		uint64_t n = size - done;
		struct spyre__sub sub;

		if (n > SPYRE__STAGE_CHUNK)
			n = SPYRE__STAGE_CHUNK;
		ret = spyre__stream_begin(s);
		if (ret)
			return ret;
		memset(&sub, 0, sizeof(sub));
		sub.bos = &bo;
		sub.nbos = 1;
		sub.stage_size = n;
		sub.stage_va = bo->va + off + done;
		sub.restartable = true;	/* between the ring and @bo */
		if (in)
			sub.stage_in = (const uint8_t *)in + done;
		else
			sub.stage_out = (uint8_t *)out + done;
		ret = spyre__stream_submit_locked(s, &sub);
		pthread_mutex_unlock(&s->lock);
		done += n;
	}
	return ret;
}

SPYRE_API int spyre_stream_copy_h2d(struct spyre_stream *s,
				    struct spyre_bo *dst, uint64_t dst_off,
				    const void *src, uint64_t size)
{
	if (!src)
		return -EINVAL;
	return stream_host_copy(s, dst, dst_off, src, NULL, size);
}

SPYRE_API int spyre_stream_copy_d2h(struct spyre_stream *s, void *dst,
				    struct spyre_bo *src, uint64_t src_off,
				    uint64_t size)
{
	if (!dst)
		return -EINVAL;
	return stream_host_copy(s, src, src_off, NULL, dst, size);
}

/* ---- peer copies -------------------------------------------------------- */

/* Consume the pending waits of @s with an empty job (under s->lock). */
static int stream_flush_waits_locked(struct spyre_stream *s)
{
	struct spyre__sub sub;
	struct spyre_cmdbuf cb;
	int ret;

	memset(&cb, 0, sizeof(cb));
	ret = spyre_cmdbuf_nop(&cb);
	if (!ret) {
		memset(&sub, 0, sizeof(sub));
		sub.cb = &cb;
		ret = spyre__stream_submit_locked(s, &sub);
	}
	spyre__cmdbuf_fini(&cb);
	return ret;
}

/* Take a free wait slot of @s (under s->lock); flushes when all are used. */
static int stream_wait_slot_locked(struct spyre_stream *s, uint32_t *h)
{
	uint32_t *slot;
	int ret;

	if (s->nwaits == SPYRE__STREAM_WAITS) {
		ret = stream_flush_waits_locked(s);
		if (ret)
			return ret;
	}
	slot = &s->waits[s->nwaits];
	if (!*slot && drmSyncobjCreate(s->dev->fd, 0, slot))
		return -errno;
	*h = *slot;
	return 0;
}

int spyre__stream_wait_sync_file_locked(struct spyre_stream *s, int fd)
{
	uint32_t h = 0;
	int ret = stream_wait_slot_locked(s, &h);

	if (ret)
		return ret;
	if (drmSyncobjImportSyncFile(s->dev->fd, h, fd))
		return -errno;
	s->nwaits++;
	return 0;
}

int spyre__stream_wait_syncobj_locked(struct spyre_stream *s, uint32_t src)
{
	uint32_t h = 0;
	int ret = stream_wait_slot_locked(s, &h);

	if (ret)
		return ret;
	if (drmSyncobjTransfer(s->dev->fd, h, 0, src, 0, 0))
		return -errno;
	s->nwaits++;
	return 0;
}

/* Same device: a plain copy on @dst_s after @src_s's earlier work. */
static int peer_copy_local(struct spyre_stream *dst_s, struct spyre_bo *dst,
			   uint64_t dst_off, struct spyre_stream *src_s,
			   struct spyre_bo *src, uint64_t src_off,
			   uint64_t size)
{
	struct spyre_bo *bos[2] = { dst, src };
	struct spyre_fence f = { NULL, 0 };
	struct spyre__sub sub;
	int ret;

	spyre__stream_claim_bos(dst_s, bos, 2);
	if (src_s != dst_s) {
		ret = spyre__stream_begin(src_s);
		if (ret)
			return ret;
		f = src_s->last;
		pthread_mutex_unlock(&src_s->lock);
	}
	ret = spyre__stream_begin(dst_s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_copy(&dst_s->cb, dst->va + dst_off,
				src->va + src_off, size);
	if (!ret) {
		memset(&sub, 0, sizeof(sub));
		sub.cb = &dst_s->cb;
		sub.bos = bos;
		sub.nbos = dst == src ? 1 : 2;
		sub.waits = &f;
		sub.nwaits = 1;
		sub.restartable = dst != src || dst_off >= src_off + size ||
				  src_off >= dst_off + size;
		ret = spyre__stream_submit_locked(dst_s, &sub);
	}
	pthread_mutex_unlock(&dst_s->lock);
	return ret;
}

/* One chunk through a bounce BO of @src_s's device shared by dma-buf. */
static int peer_copy_chunk(struct spyre_stream *dst_s, struct spyre_bo *dst,
			   uint64_t dst_off, struct spyre_stream *src_s,
			   struct spyre_bo *src, uint64_t src_off,
			   uint64_t size)
{
	struct spyre_bo *bounce = NULL, *imp = NULL, *bos[2];
	struct spyre_fence f;
	int dmabuf = -1, sync = -1, ret;

	ret = spyre_bo_alloc(src_s->dev, size, 0, &bounce);
	if (!ret)
		ret = spyre_bo_export_dmabuf(bounce, &dmabuf);
	if (!ret)
		ret = spyre_bo_import_dmabuf(dst_s->dev, dmabuf, &imp);
	if (ret)
		goto out;

	/* source card: src -> bounce */
	ret = spyre__stream_begin(src_s);
	if (ret)
		goto out;
	ret = spyre_cmdbuf_copy(&src_s->cb, bounce->va, src->va + src_off,
				size);
	bos[0] = bounce;
	bos[1] = src;
	ret = stream_end(src_s, ret, bos, 2, true);
	if (ret)
		goto out;
	ret = spyre_stream_last_fence(src_s, &f);
	if (!ret)
		ret = spyre_fence_export_sync_file(&f, &sync);
	if (ret)
		goto out;

	/* destination card: wait for it, then bounce -> dst */
	ret = spyre__stream_begin(dst_s);
	if (ret)
		goto out;
	ret = spyre__stream_wait_sync_file_locked(dst_s, sync);
	if (!ret)
		ret = spyre_cmdbuf_copy(&dst_s->cb, dst->va + dst_off,
					imp->va, size);
	bos[0] = dst;
	bos[1] = imp;
	ret = stream_end(dst_s, ret, bos, 2, true);
out:
	if (sync >= 0)
		close(sync);
	if (dmabuf >= 0)
		close(dmabuf);
	/* The jobs that listed them keep the memory alive. */
	spyre_bo_free(imp);
	spyre_bo_free(bounce);
	return ret;
}

SPYRE_API int spyre_stream_copy_peer(struct spyre_stream *dst_s,
				     struct spyre_bo *dst, uint64_t dst_off,
				     struct spyre_stream *src_s,
				     struct spyre_bo *src, uint64_t src_off,
				     uint64_t size)
{
	uint64_t done;
	int ret = 0;

	if (!dst_s || !src_s || !dst || !src || !size)
		return -EINVAL;
	SPYRE__CHECK_DEV(dst_s->dev);
	SPYRE__CHECK_DEV(src_s->dev);
	if (dst->dev != dst_s->dev || src->dev != src_s->dev)
		return -EXDEV;
	if (!range_ok(dst, dst_off, size) || !range_ok(src, src_off, size))
		return -ERANGE;
	if (dst_s->dev == src_s->dev)
		return peer_copy_local(dst_s, dst, dst_off, src_s, src,
				       src_off, size);
	for (done = 0; !ret && done < size; done += SPYRE__PEER_CHUNK) {
		uint64_t n = size - done;

		if (n > SPYRE__PEER_CHUNK)
			n = SPYRE__PEER_CHUNK;
		ret = peer_copy_chunk(dst_s, dst, dst_off + done, src_s, src,
				      src_off + done, n);
	}
	return ret;
}

/* ---- compute ------------------------------------------------------------ */

SPYRE_API int spyre_stream_submit(struct spyre_stream *s,
				  const struct spyre_cmdbuf *cb,
				  struct spyre_bo *const *bos,
				  unsigned int nbos)
{
	struct spyre__sub sub;
	int ret;

	if (!s || !cb || !cb->size || (nbos && !bos))
		return -EINVAL;
	if (cb->size > s->dev->info.max_cmd_size)
		return -E2BIG;
	spyre__stream_claim_bos(s, bos, nbos);
	spyre__stream_claim_bos(s, cb->bos, cb->nbos);
	ret = spyre__stream_begin(s);
	if (ret)
		return ret;
	memset(&sub, 0, sizeof(sub));
	sub.cb = cb;
	sub.bos = bos;
	sub.nbos = nbos;
	ret = spyre__stream_submit_locked(s, &sub);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_API int spyre_stream_convert(struct spyre_stream *s,
				   struct spyre_mem dst, uint32_t dst_dtype,
				   struct spyre_mem src, uint32_t src_dtype,
				   uint64_t count, uint32_t flags)
{
	struct spyre_mem m[2] = { dst, src };
	int ret;

	if (s)
		spyre__stream_claim(s, m, 2);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_convert(&s->cb, dst, dst_dtype, src, src_dtype,
				   count, flags);
	return stream_end(s, ret, NULL, 0, stream_disjoint(dst, &src, 1));
}

SPYRE_API int spyre_stream_gemm(struct spyre_stream *s,
				const struct spyre_gemm *g)
{
	struct spyre_mem in[5];
	int ret;

	if (s && g) {
		struct spyre_mem m[7] = { g->a, g->b, g->c, g->scale_a,
					  g->scale_b, g->bias, g->amax };

		spyre__stream_claim(s, m, 7);
	}
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_gemm(&s->cb, g);
	in[0] = g->a;
	in[1] = g->b;
	in[2] = g->scale_a;
	in[3] = g->scale_b;
	in[4] = g->bias;
	/* With beta != 0 the GEMM reads C, which it writes. */
	return stream_end(s, ret, NULL, 0, g->beta == 0.0f &&
			  stream_disjoint(g->c, in, 5) &&
			  stream_disjoint(g->amax, in, 5));
}

/*
 * A kernel job may rerun from its start when no operand it stores to
 * shares a BO with another operand (or is a raw VA).
 */
static bool kernel_restartable(const struct spyre_kernel_launch *l,
			       uint32_t written)
{
	for (unsigned int i = 0; i < l->noperands; i++) {
		const struct spyre_mem *m = &l->operands[i].mem;

		if (!(written & (1u << i)))
			continue;
		if (!m->bo && m->offset)
			return false;
		for (unsigned int j = 0; j < l->noperands; j++)
			if (j != i && m->bo && l->operands[j].mem.bo == m->bo)
				return false;
	}
	return true;
}

SPYRE_API int spyre_stream_kernel(struct spyre_stream *s,
				  const struct spyre_kernel_launch *l)
{
	uint32_t written = 0;
	int ret;

	if (!s || !l)
		return -EINVAL;
	if (l->prog.bo && l->prog.bo->dev != s->q->dev)
		return -EXDEV;
	for (unsigned int i = 0; l->operands && i < l->noperands &&
			 i < SPYRE_KERNEL_MAX_OPERANDS; i++)
		if (l->operands[i].mem.bo &&
		    l->operands[i].mem.bo->dev != s->q->dev)
			return -EXDEV;
	for (unsigned int i = 0; l->operands && i < l->noperands &&
			 i < SPYRE_KERNEL_MAX_OPERANDS; i++)
		spyre__stream_claim(s, &l->operands[i].mem, 1);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre__cmdbuf_kernel(&s->cb, l, &written);
	return stream_end(s, ret, NULL, 0, kernel_restartable(l, written));
}

SPYRE_API int spyre_stream_eltwise(struct spyre_stream *s, uint32_t op,
				   uint32_t dtype, uint64_t count,
				   struct spyre_mem out, struct spyre_mem a,
				   struct spyre_mem b, float alpha)
{
	struct spyre_mem in[2] = { a, b }, m[3] = { out, a, b };
	int ret;

	if (s)
		spyre__stream_claim(s, m, 3);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_eltwise(&s->cb, op, dtype, count, out, a, b,
				   alpha);
	return stream_end(s, ret, NULL, 0, stream_disjoint(out, in, 2));
}

SPYRE_API int spyre_stream_reduce(struct spyre_stream *s, uint32_t op,
				  uint32_t dtype, uint32_t rows,
				  uint32_t cols, struct spyre_mem dst,
				  struct spyre_mem src, uint64_t ld)
{
	struct spyre_mem m[2] = { dst, src };
	int ret;

	if (s)
		spyre__stream_claim(s, m, 2);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_reduce(&s->cb, op, dtype, rows, cols, dst, src,
				  ld);
	return stream_end(s, ret, NULL, 0, stream_disjoint(dst, &src, 1));
}

static int stream_rowop(struct spyre_stream *s, uint32_t op, uint32_t dtype,
			uint32_t rows, uint32_t cols, struct spyre_mem dst,
			uint64_t ld_dst, struct spyre_mem src, uint64_t ld_src,
			struct spyre_mem gamma, struct spyre_mem beta,
			float eps)
{
	struct spyre_mem in[3] = { src, gamma, beta },
			 m[4] = { dst, src, gamma, beta };
	int ret;

	if (s)
		spyre__stream_claim(s, m, 4);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_rowop(&s->cb, op, dtype, rows, cols, dst, ld_dst,
				 src, ld_src, gamma, beta, eps);
	return stream_end(s, ret, NULL, 0, stream_disjoint(dst, in, 3));
}

SPYRE_API int spyre_stream_softmax(struct spyre_stream *s, uint32_t dtype,
				   uint32_t rows, uint32_t cols,
				   struct spyre_mem dst, uint64_t ld_dst,
				   struct spyre_mem src, uint64_t ld_src)
{
	return stream_rowop(s, SPYRE_ROW_SOFTMAX, dtype, rows, cols, dst,
			    ld_dst, src, ld_src, SPYRE_MEM_NONE,
			    SPYRE_MEM_NONE, 0.0f);
}

SPYRE_API int spyre_stream_rmsnorm(struct spyre_stream *s, uint32_t dtype,
				   uint32_t rows, uint32_t cols,
				   struct spyre_mem dst, uint64_t ld_dst,
				   struct spyre_mem src, uint64_t ld_src,
				   struct spyre_mem gamma, float eps)
{
	return stream_rowop(s, SPYRE_ROW_RMSNORM, dtype, rows, cols, dst,
			    ld_dst, src, ld_src, gamma, SPYRE_MEM_NONE, eps);
}

SPYRE_API int spyre_stream_layernorm(struct spyre_stream *s, uint32_t dtype,
				     uint32_t rows, uint32_t cols,
				     struct spyre_mem dst, uint64_t ld_dst,
				     struct spyre_mem src, uint64_t ld_src,
				     struct spyre_mem gamma,
				     struct spyre_mem beta, float eps)
{
	return stream_rowop(s, SPYRE_ROW_LAYERNORM, dtype, rows, cols, dst,
			    ld_dst, src, ld_src, gamma, beta, eps);
}

SPYRE_API int spyre_stream_timestamp(struct spyre_stream *s,
				     struct spyre_bo *bo, uint64_t offset,
				     uint32_t flags)
{
	int ret;

	if (!s || !bo || (offset & 7) || (flags & ~SPYRE_TIMESTAMP_EAGER))
		return -EINVAL;
	if (bo->dev != s->q->dev)
		return -EXDEV;
	if (!range_ok(bo, offset, 8))
		return -ERANGE;
	spyre__stream_claim_bos(s, &bo, 1);
	ret = stream_begin_op(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_timestamp(&s->cb, bo->va + offset);
	return stream_end_as(s, ret, &bo, 1, true,
			     s->batch_max && (s->batch.count ||
					      !(flags & SPYRE_TIMESTAMP_EAGER)));
}

/* ---- state -------------------------------------------------------------- */

SPYRE_API int spyre_stream_last_fence(struct spyre_stream *s,
				      struct spyre_fence *f)
{
	int ret = 0;

	if (!s || !f)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->error)
		ret = batch_flush_locked(s);
	if (!ret)
		*f = s->last;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_API int spyre_stream_enqueued(struct spyre_stream *s, uint64_t *count)
{
	if (!s || !count)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	*count = s->enqueued;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

SPYRE_API int spyre_stream_error(struct spyre_stream *s)
{
	int ret;

	if (!s)
		return -EINVAL;
	SPYRE__CHECK_DEV(s->dev);
	pthread_mutex_lock(&s->lock);
	ret = s->error;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/*
 * Wait for the stream's last fence (after turning pending event waits into
 * a job: they are part of the stream's work); on success deliver staged
 * data.
 */
static int stream_wait(struct spyre_stream *s, uint64_t timeout_ns)
{
	struct spyre_fence f;
	int ret;

	if (!s)
		return -EINVAL;
	SPYRE__CHECK_DEV(s->dev);
	pthread_mutex_lock(&s->lock);
	ret = s->error;
	if (!ret)
		ret = batch_flush_locked(s);
	if (!ret && s->nwaits)
		ret = stream_flush_waits_locked(s);
	f = s->last;
	if (!ret)
		ret = s->error;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	ret = spyre_fence_wait(&f, timeout_ns);
	if (ret == -ETIMEDOUT || ret == -EINTR || ret == -EINVAL ||
	    ret == -ECHILD)
		return ret;
	if (ret) {
		pthread_mutex_lock(&s->lock);
		ret = stream_fail_locked(s, ret);
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	return spyre__queue_retire(s->q);
}

SPYRE_API int spyre_stream_sync(struct spyre_stream *s, uint64_t timeout_ns)
{
	return stream_wait(s, timeout_ns);
}

SPYRE_API int spyre_stream_query(struct spyre_stream *s)
{
	int ret = stream_wait(s, 0);

	return ret == -ETIMEDOUT ? -EBUSY : ret;
}
