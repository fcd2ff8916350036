// SPDX-License-Identifier: MIT
/*
 * Graphs: a command list written once into a BO of its own and launched
 * with one submit ioctl per launch (up to the kernel's max_jobs
 * repetitions each), with the BO list prepared at creation; a staged
 * launch adds a job of commands before and after it (copies into and out
 * of the graph's buffers) to the same ioctl.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "drm/spyre_accel.h"

struct spyre_graph {
	struct spyre_device *dev;
	struct spyre_bo *cmd;		/* the commands */
	uint32_t size;			/* bytes of commands */
	struct spyre_bo **bos;		/* listed + recorded BOs */
	bool *written;			/* per BO: a command may write it */
	unsigned int nbos;
};

SPYRE_API int spyre_graph_create(struct spyre_device *dev,
				 const struct spyre_cmdbuf *cb,
				 struct spyre_bo *const *bos, unsigned int nbos,
				 uint32_t flags, struct spyre_graph **out)
{
	struct spyre_graph *g;
	void *map;
	size_t total;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!cb || !cb->size || !out || (nbos && !bos) ||
	    (flags & ~SPYRE_BO_DEVICE))
		return -EINVAL;
	if (cb->size > dev->info.max_cmd_size || cb->size > UINT32_MAX)
		return -E2BIG;
	total = (size_t)nbos + cb->nbos;
	if (total + 1 > dev->max_bos_per_job)
		return -E2BIG;
	for (size_t i = 0; i < total; i++) {
		struct spyre_bo *bo = i < nbos ? bos[i] : cb->bos[i - nbos];

		if (!bo)
			return -EINVAL;
		if (bo->dev != dev)
			return -EXDEV;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->bos = calloc(total ? total : 1, sizeof(*g->bos));
	g->written = calloc(total ? total : 1, sizeof(*g->written));
	if (!g->bos || !g->written) {
		free(g->bos);
		free(g->written);
		free(g);
		return -ENOMEM;
	}
	/* The caller's BOs may be written by raw-VA commands. */
	for (size_t i = 0; i < total; i++) {
		g->bos[i] = i < nbos ? bos[i] : cb->bos[i - nbos];
		g->written[i] = i < nbos ||
				spyre__cmdbuf_bo_written(cb, i - nbos);
	}
	g->nbos = (unsigned int)total;
	g->size = (uint32_t)cb->size;

	ret = spyre_bo_alloc(dev, cb->size, flags, &g->cmd);
	if (!ret)
		ret = spyre_bo_map(g->cmd, &map);
	if (ret) {
		spyre_bo_free(g->cmd);
		free(g->bos);
		free(g->written);
		free(g);
		return ret;
	}
	memcpy(map, cb->data, cb->size);
	/* Drain write-combining buffers (device memory) before any launch. */
	atomic_thread_fence(memory_order_seq_cst);
	spyre_bo_unmap(g->cmd);
	g->dev = dev;
	spyre__device_get(dev);
	*out = g;
	return 0;
}

SPYRE_API void spyre_graph_destroy(struct spyre_graph *g)
{
	if (!g)
		return;
	spyre_bo_free(g->cmd);
	free(g->bos);
	free(g->written);
	spyre__device_put(g->dev);
	free(g);
}

SPYRE_API size_t spyre_graph_size(const struct spyre_graph *g)
{
	return g ? g->size : 0;
}

/* Launch @g @repeat times on @s, with @pre's and @post's jobs around. */
static int graph_launch(struct spyre_graph *g, struct spyre_stream *s,
			unsigned int repeat, const struct spyre_cmdbuf *pre,
			const struct spyre_cmdbuf *post)
{
	struct spyre__sub sub;
	int ret;

	if (!g || !s || !repeat)
		return -EINVAL;
	SPYRE__CHECK_DEV(g->dev);
	if (s->dev != g->dev)
		return -EXDEV;
	ret = spyre__stream_begin(s);
	if (ret)
		return ret;
	memset(&sub, 0, sizeof(sub));
	sub.cmd_va = g->cmd->va;
	sub.cmd_size = g->size;
	sub.repeat = repeat;
	sub.extra_bo = g->cmd;
	sub.bos = g->bos;
	sub.bos_written = g->written;
	sub.nbos = g->nbos;
	sub.pre = pre;
	sub.post = post;
	ret = spyre__stream_submit_locked(s, &sub);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_API int spyre_graph_launch(struct spyre_graph *g,
				 struct spyre_stream *s, unsigned int repeat)
{
	return graph_launch(g, s, repeat, NULL, NULL);
}

SPYRE_API int spyre_graph_launch_staged(struct spyre_graph *g,
					struct spyre_stream *s,
					const struct spyre_cmdbuf *pre,
					const struct spyre_cmdbuf *post)
{
	return graph_launch(g, s, 1, pre, post);
}
