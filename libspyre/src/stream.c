// SPDX-License-Identifier: MIT
/* Streams: in-order helpers that encode one command and submit it. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct spyre_stream {
	struct spyre_queue *q;
	pthread_mutex_t lock;		/* protects the fields below */
	struct spyre_cmdbuf cb;
	struct spyre_fence last;
	int error;			/* sticky job error */
};

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
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

SPYRE_API void spyre_stream_destroy(struct spyre_stream *s)
{
	if (!s)
		return;
	spyre_queue_destroy(s->q);
	free(s->cb.data);
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

static int stream_begin(struct spyre_stream *s)
{
	if (!s)
		return -EINVAL;
	SPYRE__CHECK_DEV(s->q->dev);
	pthread_mutex_lock(&s->lock);
	if (s->error) {
		int e = s->error;

		pthread_mutex_unlock(&s->lock);
		return e;
	}
	spyre_cmdbuf_reset(&s->cb);
	return 0;
}

/* Submit s->cb (encoded by the caller) and unlock. */
static int stream_end(struct spyre_stream *s, int ret,
		      struct spyre_bo *const *bos, unsigned int nbos)
{
	struct spyre_fence f;

	if (!ret) {
		ret = spyre_submit(s->q, &s->cb, bos, nbos, NULL, 0, &f);
		if (!ret)
			s->last = f;
		else if (ret == -ECANCELED)
			s->error = ret;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
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
	ret = stream_begin(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_fill(&s->cb, dst->va + offset, count, elem_size,
				value);
	return stream_end(s, ret, &dst, 1);
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
	ret = stream_begin(s);
	if (ret)
		return ret;
	ret = spyre_cmdbuf_copy_2d(&s->cb, dst->va + dst_off, dst_pitch,
				   SPYRE_DTYPE_U8, src->va + src_off,
				   src_pitch, SPYRE_DTYPE_U8, width_bytes,
				   height, 0);
	bos[0] = dst;
	bos[1] = src;
	return stream_end(s, ret, bos, dst == src ? 1 : 2);
}

SPYRE_API int spyre_stream_last_fence(struct spyre_stream *s,
				      struct spyre_fence *f)
{
	if (!s || !f)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	*f = s->last;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

SPYRE_API int spyre_stream_sync(struct spyre_stream *s, uint64_t timeout_ns)
{
	struct spyre_fence f;
	int ret;

	if (!s)
		return -EINVAL;
	SPYRE__CHECK_DEV(s->q->dev);
	pthread_mutex_lock(&s->lock);
	f = s->last;
	ret = s->error;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	ret = spyre_fence_wait(&f, timeout_ns);
	if (ret && ret != -ETIMEDOUT && ret != -EINTR) {
		pthread_mutex_lock(&s->lock);
		if (!s->error)
			s->error = ret;
		pthread_mutex_unlock(&s->lock);
	}
	return ret;
}
