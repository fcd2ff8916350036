// SPDX-License-Identifier: MIT
/* Host-side command encoding (<drm/spyre_cmd.h>).  No device access. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct spyre_cmd_header) == 8, "header");
_Static_assert(sizeof(struct spyre_cmd_nop) == 8, "nop");
_Static_assert(sizeof(struct spyre_cmd_fill) == 40, "fill");
_Static_assert(sizeof(struct spyre_cmd_copy) == 64, "copy");
_Static_assert(sizeof(struct spyre_cmd_timestamp) == 16, "timestamp");
_Static_assert(sizeof(struct spyre_cmd_sem) == 24, "sem");

SPYRE_API int spyre_cmdbuf_create(struct spyre_cmdbuf **out)
{
	struct spyre_cmdbuf *cb;

	if (!out)
		return -EINVAL;
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	*out = cb;
	return 0;
}

SPYRE_API void spyre_cmdbuf_destroy(struct spyre_cmdbuf *cb)
{
	if (!cb)
		return;
	free(cb->data);
	free(cb);
}

SPYRE_API void spyre_cmdbuf_reset(struct spyre_cmdbuf *cb)
{
	if (!cb)
		return;
	cb->size = 0;
	cb->count = 0;
}

SPYRE_API size_t spyre_cmdbuf_size(const struct spyre_cmdbuf *cb)
{
	return cb ? cb->size : 0;
}

SPYRE_API size_t spyre_cmdbuf_count(const struct spyre_cmdbuf *cb)
{
	return cb ? cb->count : 0;
}

SPYRE_API const void *spyre_cmdbuf_data(const struct spyre_cmdbuf *cb)
{
	return cb && cb->size ? cb->data : NULL;
}

/* Reserve @size bytes (multiple of 8) at the end, zeroed. */
static void *cmdbuf_reserve(struct spyre_cmdbuf *cb, size_t size)
{
	void *p;

	if (size > SIZE_MAX / 4 - cb->size)
		return NULL;
	if (cb->size + size > cb->cap) {
		size_t ncap = cb->cap ? cb->cap : 256;
		uint8_t *nd;

		while (ncap < cb->size + size)
			ncap *= 2;
		nd = realloc(cb->data, ncap);
		if (!nd)
			return NULL;
		cb->data = nd;
		cb->cap = ncap;
	}
	p = cb->data + cb->size;
	memset(p, 0, size);
	return p;
}

static void cmdbuf_commit(struct spyre_cmdbuf *cb, size_t size, size_t ncmds)
{
	cb->size += size;
	cb->count += ncmds;
}

#define EMIT(cb, type, op, flg, var)					\
	type *var = cmdbuf_reserve(cb, sizeof(type));			\
	if (!var)							\
		return -ENOMEM;						\
	var->hdr.opcode = (op);						\
	var->hdr.flags = (flg);						\
	var->hdr.size = sizeof(type)

SPYRE_API int spyre_cmdbuf_nop(struct spyre_cmdbuf *cb)
{
	if (!cb)
		return -EINVAL;
	EMIT(cb, struct spyre_cmd_nop, SPYRE_OP_NOP, 0, c);
	(void)c;
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_fill(struct spyre_cmdbuf *cb, uint64_t dst,
				uint64_t count, uint32_t elem_size,
				uint64_t value)
{
	if (!cb || count == 0 ||
	    (elem_size != 1 && elem_size != 2 && elem_size != 4 &&
	     elem_size != 8))
		return -EINVAL;
	EMIT(cb, struct spyre_cmd_fill, SPYRE_OP_FILL, 0, c);
	c->dst = dst;
	c->count = count;
	c->value = value;
	c->elem_size = elem_size;
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

static bool dtype_is_convertible(uint32_t t)
{
	switch (t) {
	case SPYRE_DTYPE_FP32:
	case SPYRE_DTYPE_FP16:
	case SPYRE_DTYPE_BF16:
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
	case SPYRE_DTYPE_INT8:
		return true;
	default:
		return false;
	}
}

static bool copy_dtypes_ok(uint32_t dst, uint32_t src)
{
	if (dst == SPYRE_DTYPE_U8 || src == SPYRE_DTYPE_U8)
		return dst == src;
	if (dst == SPYRE_DTYPE_INT32 || src == SPYRE_DTYPE_INT32)
		return dst == src;
	return dtype_is_convertible(dst) && dtype_is_convertible(src);
}

SPYRE_API int spyre_cmdbuf_copy_2d(struct spyre_cmdbuf *cb,
				   uint64_t dst, uint64_t dst_pitch,
				   uint32_t dst_dtype,
				   uint64_t src, uint64_t src_pitch,
				   uint32_t src_dtype,
				   uint64_t width, uint64_t height,
				   uint32_t flags)
{
	if (!cb || !width || !height || (flags & ~SPYRE_CMD_F_NOSAT) ||
	    !copy_dtypes_ok(dst_dtype, src_dtype))
		return -EINVAL;
	EMIT(cb, struct spyre_cmd_copy, SPYRE_OP_COPY, (uint16_t)flags, c);
	c->src = src;
	c->dst = dst;
	c->width = width;
	c->height = height;
	c->src_pitch = src_pitch;
	c->dst_pitch = dst_pitch;
	c->src_dtype = src_dtype;
	c->dst_dtype = dst_dtype;
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_copy(struct spyre_cmdbuf *cb, uint64_t dst,
				uint64_t src, uint64_t size)
{
	if (!size)
		return -EINVAL;
	return spyre_cmdbuf_copy_2d(cb, dst, 0, SPYRE_DTYPE_U8, src, 0,
				    SPYRE_DTYPE_U8, size, 1, 0);
}

SPYRE_API int spyre_cmdbuf_timestamp(struct spyre_cmdbuf *cb, uint64_t dst)
{
	if (!cb || (dst & 7))
		return -EINVAL;
	EMIT(cb, struct spyre_cmd_timestamp, SPYRE_OP_TIMESTAMP, 0, c);
	c->dst = dst;
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_sem_wait(struct spyre_cmdbuf *cb, uint64_t addr,
				    uint64_t value)
{
	if (!cb || (addr & 7))
		return -EINVAL;
	EMIT(cb, struct spyre_cmd_sem, SPYRE_OP_SEM_WAIT, 0, c);
	c->addr = addr;
	c->value = value;
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_sem_signal(struct spyre_cmdbuf *cb, uint64_t addr,
				      uint64_t value, uint32_t flags)
{
	if (!cb || (addr & 7) || (flags & ~SPYRE_SEM_F_ADD))
		return -EINVAL;
	EMIT(cb, struct spyre_cmd_sem, SPYRE_OP_SEM_SIGNAL, (uint16_t)flags, c);
	c->addr = addr;
	c->value = value;
	cmdbuf_commit(cb, sizeof(*c), 1);
	return 0;
}

SPYRE_API int spyre_cmdbuf_raw(struct spyre_cmdbuf *cb, const void *cmd,
			       size_t size)
{
	void *p;
	size_t n = 0;

	if (!cb || !cmd || !size || (size & 7))
		return -EINVAL;
	p = cmdbuf_reserve(cb, size);
	if (!p)
		return -ENOMEM;
	memcpy(p, cmd, size);
	/* Count the headers it holds, as far as they parse. */
	for (size_t off = 0; off + 8 <= size;) {
		struct spyre_cmd_header h;

		memcpy(&h, (const uint8_t *)cmd + off, sizeof(h));
		n++;
		if (h.size < 8 || (h.size & 7) || h.size > size - off)
			break;
		off += h.size;
	}
	cmdbuf_commit(cb, size, n);
	return 0;
}

SPYRE_API int spyre_cmdbuf_upload(const struct spyre_cmdbuf *cb,
				  struct spyre_device *dev,
				  struct spyre_bo **out)
{
	struct spyre_bo *bo;
	void *map;
	int ret;

	if (!cb || !cb->size || !out)
		return -EINVAL;
	ret = spyre_bo_alloc(dev, cb->size, 0, &bo);
	if (ret)
		return ret;
	ret = spyre_bo_map(bo, &map);
	if (ret) {
		spyre_bo_free(bo);
		return ret;
	}
	memcpy(map, cb->data, cb->size);
	*out = bo;
	return 0;
}
