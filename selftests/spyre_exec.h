/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the execution suites (spyre_exec_*): a card context with its
 * own command BO, data buffers placed at the very end of their own BO (so
 * an operand that runs one byte too far hits the guard page), a local
 * command-stream encoder built on the <drm/spyre_cmd.h> structs (no
 * libspyre encoder is used), a seeded generator of element values per
 * dtype, and the capability gate of the compute engine.
 *
 * Include after kselftest_harness.h and spyre_test.h.
 *
 * Compute-engine tests (GEMM, ELTWISE, REDUCE, ROWOP, converting COPY)
 * SKIP on a card whose CAPS lack the dtype they need (the compute engine
 * announces itself with DRM_SPYRE_CAP_FP16); set SPYRE_EXEC_REQUIRE=1 to
 * turn those skips into failures.
 */
#ifndef SPYRE_EXEC_H
#define SPYRE_EXEC_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <spyre/spyre_ref.h>

#define X_CMD_BO_SIZE	(1u << 20)
#define X_MAX_BOS	1024

/* One data BO, mapped. */
struct xbo {
	uint32_t h;
	uint64_t va;
	uint8_t *map;
	uint64_t size;
};

/* A buffer: @bytes at the end of its own BO (va/p point at byte 0). */
struct xbuf {
	uint32_t h;
	uint64_t va;
	uint8_t *p;
	uint64_t bytes;
	uint64_t bo_va;		/* start of the BO */
	uint64_t bo_size;
};

struct xdev {
	int fd;
	struct drm_spyre_device_info di;
	uint32_t qid;
	uint32_t sync;
	struct xbo cmd;
	uint32_t cmd_off;
	struct xbo bos[X_MAX_BOS];
	uint32_t handles[X_MAX_BOS + 1];
	unsigned int nbos;
	uint32_t bo_flags;	/* placement of x_buf() buffers */
};

static inline int x_bo_new(int fd, uint64_t size, uint32_t flags,
			   struct xbo *bo)
{
	int ret;

	memset(bo, 0, sizeof(*bo));
	size = (size + PAGE - 1) & ~(PAGE - 1);
	if (!size)
		size = PAGE;
	ret = spyre_bo_new_flags(fd, size, flags, &bo->h, &bo->va);
	if (ret)
		return ret;
	bo->size = size;
	bo->map = spyre_bo_mmap(fd, bo->h, size);
	if (bo->map == MAP_FAILED) {
		bo->map = NULL;
		return -errno;
	}
	return 0;
}

static inline void x_bo_free(int fd, struct xbo *bo)
{
	if (bo->map)
		munmap(bo->map, bo->size);
	if (bo->h)
		drmCloseBufferHandle(fd, bo->h);
	memset(bo, 0, sizeof(*bo));
}

/* Open card @card with one queue of @prio, a 1 MiB command BO, a syncobj. */
static inline int x_open(struct xdev *x, unsigned int card, uint32_t prio)
{
	int ret;

	memset(x, 0, sizeof(*x));
	x->fd = spyre_open_card(card);
	if (x->fd < 0)
		return -ENODEV;
	ret = spyre_query_info(x->fd, &x->di);
	if (!ret)
		ret = spyre_queue_new(x->fd, prio, &x->qid);
	if (!ret)
		ret = x_bo_new(x->fd, X_CMD_BO_SIZE, 0, &x->cmd);
	if (!ret && drmSyncobjCreate(x->fd, 0, &x->sync))
		ret = -errno;
	if (!ret)
		x->handles[0] = x->cmd.h;
	return ret;
}

static inline void x_close(struct xdev *x)
{
	if (x->fd < 0)
		return;
	for (unsigned int i = 0; i < x->nbos; i++)
		if (x->bos[i].map)
			munmap(x->bos[i].map, x->bos[i].size);
	if (x->cmd.map)
		munmap(x->cmd.map, x->cmd.size);
	close(x->fd);
	x->fd = -1;
}

/* Free every data buffer (between independent sub-cases). */
static inline void x_free_bufs(struct xdev *x)
{
	for (unsigned int i = 0; i < x->nbos; i++)
		x_bo_free(x->fd, &x->bos[i]);
	x->nbos = 0;
}

/*
 * New buffer of @bytes (> 0) placed at the end of its own system BO (or
 * device BO with @flags DRM_SPYRE_BO_DEVICE): its last byte is the last
 * mapped byte before the guard page.  The rest of the BO is 0.
 */
static inline int x_buf_flags(struct xdev *x, uint64_t bytes, uint32_t flags,
			      struct xbuf *b)
{
	struct xbo *bo;
	uint64_t off;
	int ret;

	memset(b, 0, sizeof(*b));
	if (x->nbos >= X_MAX_BOS)
		return -ENOSPC;
	bo = &x->bos[x->nbos];
	ret = x_bo_new(x->fd, bytes ? bytes : 1, flags, bo);
	if (ret)
		return ret;
	x->handles[1 + x->nbos] = bo->h;
	x->nbos++;
	off = bo->size - bytes;
	b->h = bo->h;
	b->va = bo->va + off;
	b->p = bo->map + off;
	b->bytes = bytes;
	b->bo_va = bo->va;
	b->bo_size = bo->size;
	return 0;
}

static inline int x_buf(struct xdev *x, uint64_t bytes, struct xbuf *b)
{
	return x_buf_flags(x, bytes, x->bo_flags, b);
}

/* ---- command streams --------------------------------------------------- */

struct xcs {
	uint8_t buf[64 * 1024];
	uint32_t len;
	uint32_t overflow;
};

/* Append a zeroed command of @size bytes with its header filled in. */
static inline void *xcs_add(struct xcs *cs, uint16_t op, uint16_t flags,
			    uint32_t size)
{
	struct spyre_cmd_header *h;

	if (cs->len + size > sizeof(cs->buf)) {
		cs->overflow = 1;
		return &cs->buf[0];	/* scribble; x_submit refuses it */
	}
	h = (struct spyre_cmd_header *)(cs->buf + cs->len);
	memset(h, 0, size);
	h->opcode = op;
	h->flags = flags;
	h->size = size;
	cs->len += size;
	return h;
}

#define XCS(cs, OP, flags, type) \
	((struct type *)xcs_add((cs), SPYRE_OP_##OP, (flags), \
				sizeof(struct type)))

static inline void xcs_reset(struct xcs *cs)
{
	cs->len = 0;
	cs->overflow = 0;
}

/*
 * Encoders: the <drm/spyre_cmd.h> fillers on room reserved with XCS().
 * Tests that build bad commands on purpose set the fields by hand.
 */
static inline void xcs_fill(struct xcs *cs, uint64_t dst, uint64_t count,
			    uint32_t esz, uint64_t value)
{
	spyre_cmd_fill_init(XCS(cs, FILL, 0, spyre_cmd_fill), dst, count, esz,
			    value);
}

static inline void xcs_copy(struct xcs *cs, uint16_t flags, uint64_t dst,
			    uint32_t ddt, uint64_t dpitch, uint64_t src,
			    uint32_t sdt, uint64_t spitch, uint64_t width,
			    uint64_t height)
{
	spyre_cmd_copy_init(XCS(cs, COPY, flags, spyre_cmd_copy), flags, dst,
			    dpitch, ddt, src, spitch, sdt, width, height);
}

static inline void xcs_bytes(struct xcs *cs, uint64_t dst, uint64_t src,
			     uint64_t n)
{
	xcs_copy(cs, 0, dst, SPYRE_DTYPE_U8, 0, src, SPYRE_DTYPE_U8, 0, n, 1);
}

static inline void xcs_timestamp(struct xcs *cs, uint64_t dst)
{
	spyre_cmd_timestamp_init(XCS(cs, TIMESTAMP, 0, spyre_cmd_timestamp),
				 dst);
}

static inline void xcs_sem(struct xcs *cs, bool signal, uint16_t flags,
			   uint64_t addr, uint64_t value)
{
	uint16_t op = signal ? SPYRE_OP_SEM_SIGNAL : SPYRE_OP_SEM_WAIT;

	spyre_cmd_sem_init(xcs_add(cs, op, flags, sizeof(struct spyre_cmd_sem)),
			   op, flags, addr, value);
}

/*
 * A dense row-major GEMM C = A B (lda = K, ldb = N, ldc = N, batch 1,
 * alpha 1, beta 0); the caller may change fields of the result.
 */
static inline struct spyre_cmd_gemm *
xcs_gemm(struct xcs *cs, uint32_t ab_dtype, uint32_t c_dtype, uint32_t m,
	 uint32_t n, uint32_t k, uint64_t a, uint64_t b, uint64_t c)
{
	struct spyre_cmd_gemm *g = XCS(cs, GEMM, 0, spyre_cmd_gemm);

	spyre_cmd_gemm_init(g, 0, ab_dtype, ab_dtype, c_dtype, m, n, k, a, k, b,
			    n, c, n);
	return g;
}

/* ---- submission -------------------------------------------------------- */

/* Copy @cs into the command BO (bump allocator, 64-byte aligned); its VA. */
static inline int x_put(struct xdev *x, const struct xcs *cs, uint64_t *va)
{
	uint32_t off = (x->cmd_off + 63) & ~63u;

	if (cs->overflow || !cs->len)
		return -E2BIG;
	if (off + cs->len > X_CMD_BO_SIZE)
		off = 0;	/* callers reset between batches of jobs */
	memcpy(x->cmd.map + off, cs->buf, cs->len);
	x->cmd_off = off + cs->len;
	*va = x->cmd.va + off;
	return 0;
}

/*
 * Submit @cs on queue @qid listing every BO of @x; waits on @in (@nin),
 * signals @out_syncobj at @out_point (0 = binary).
 */
static inline int x_submit_q(struct xdev *x, uint32_t qid,
			     const struct xcs *cs,
			     const struct drm_spyre_sync *in, uint32_t nin,
			     uint32_t out_syncobj, uint64_t out_point)
{
	uint64_t va;
	int ret = x_put(x, cs, &va);

	if (ret)
		return ret;
	return spyre_submit_job(x->fd, qid, va, cs->len, x->handles,
				x->nbos + 1, in, nin, out_syncobj, out_point,
				NULL);
}

/* Fence status of binary syncobj @h after waiting: 0 OK or the error. */
static inline int x_wait_status(int fd, uint32_t h, uint64_t ns)
{
	int ret = spyre_sync_wait(fd, h, ns);

	if (ret)
		return ret;
	ret = spyre_sync_status(fd, h);
	return ret == 1 ? 0 : (ret == 0 ? -EINPROGRESS : ret);
}

/* Run @cs on x's queue and wait: 0, the submit error, -ETIME, or the
 * fence error. */
static inline int x_run(struct xdev *x, const struct xcs *cs)
{
	int ret = x_submit_q(x, x->qid, cs, NULL, 0, x->sync, 0);

	if (ret)
		return ret;
	ret = x_wait_status(x->fd, x->sync, 3 * SPYRE_TEST_TIMEOUT_NS);
	x->cmd_off = 0;
	return ret;
}

/* ---- capabilities ------------------------------------------------------ */

static inline bool x_require(void)
{
	const char *e = getenv("SPYRE_EXEC_REQUIRE");

	return e && *e && strcmp(e, "0");
}

/* Caps a dtype needs (0 for FP32 / U8 / INT32 beyond the engine itself). */
static inline uint64_t x_dtype_caps(uint32_t dt)
{
	switch (dt) {
	case SPYRE_DTYPE_FP16:
		return DRM_SPYRE_CAP_FP16;
	case SPYRE_DTYPE_BF16:
		return DRM_SPYRE_CAP_BF16;
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
		return DRM_SPYRE_CAP_FP8;
	case SPYRE_DTYPE_INT8:
		return DRM_SPYRE_CAP_INT8;
	default:
		return 0;
	}
}

/*
 * In a FIXTURE_SETUP or TEST: x_open() card @card with a queue of @prio,
 * skipping the test when there is no card and failing it on any other
 * error.
 */
#define X_OPEN(x, card, prio) do {					\
		int __ret = x_open((x), (card), (prio));		\
		if (__ret == -ENODEV)					\
			SKIP(return, "no Spyre card (/dev/accel)");	\
		ASSERT_EQ(0, __ret);					\
	} while (0)

/*
 * SKIP (or fail with SPYRE_EXEC_REQUIRE=1) unless the card has the
 * compute engine (CAP_FP16) and every cap in @caps.
 */
#define X_NEED_CAPS(x, want) do {					\
		uint64_t __need = (want) | DRM_SPYRE_CAP_FP16;		\
		if (((x)->di.caps & __need) != __need) {		\
			if (x_require()) {				\
				TH_LOG("card caps %#llx lack %#llx",	\
				       (unsigned long long)(x)->di.caps, \
				       (unsigned long long)__need);	\
				ASSERT_TRUE(0);				\
			}						\
			SKIP(return, "card caps %#llx lack %#llx (compute engine)", \
			     (unsigned long long)(x)->di.caps,		\
			     (unsigned long long)__need);		\
		}							\
	} while (0)

/* ---- values ------------------------------------------------------------ */

static inline uint64_t x_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform double in [lo, hi). */
static inline double x_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * ((double)(x_rand(s) >> 11) * 0x1p-53);
}

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Format of a float dtype: exponent bits, mantissa bits. */
static inline void x_fmt(uint32_t dt, int *eb, int *mb)
{
	switch (dt) {
	case SPYRE_DTYPE_FP32: *eb = 8; *mb = 23; break;
	case SPYRE_DTYPE_FP16: *eb = 5; *mb = 10; break;
	case SPYRE_DTYPE_BF16: *eb = 8; *mb = 7; break;
	case SPYRE_DTYPE_FP8_E4M3: *eb = 4; *mb = 3; break;
	case SPYRE_DTYPE_FP8_E5M2: *eb = 5; *mb = 2; break;
	default: *eb = 0; *mb = 0; break;
	}
}

/*
 * A random element of @dt as a bit pattern: for float types a random sign
 * and mantissa with a biased exponent field in [elo, ehi] (field values,
 * clamped to finite ones), plus some zeros and subnormals; INT8/INT32/U8
 * uniform over their range.  Magnitudes stay below 2^(ehi - bias + 1).
 */
static inline uint32_t x_rand_elem_range(uint64_t *s, uint32_t dt, int elo,
					 int ehi)
{
	uint64_t r = x_rand(s);
	int eb, mb, e, emax;
	uint32_t sign, mant;

	switch (dt) {
	case SPYRE_DTYPE_INT8:
	case SPYRE_DTYPE_U8:
		return (uint32_t)(r & 0xff);
	case SPYRE_DTYPE_INT32:
		return (uint32_t)r;
	}
	x_fmt(dt, &eb, &mb);
	emax = (1 << eb) - 2;		/* largest finite field (not E4M3) */
	if (dt == SPYRE_DTYPE_FP8_E4M3)
		emax = 15;		/* 0x7e = 448 is finite, 0x7f NaN */
	if (ehi > emax)
		ehi = emax;
	if (elo < 0)
		elo = 0;
	sign = (uint32_t)(r >> 63) << (eb + mb);
	mant = (uint32_t)(r >> 8) & ((1u << mb) - 1);
	switch ((r >> 40) & 31) {
	case 0:
		return sign;			/* +-0 */
	case 1:
	case 2:
		return sign | (mant ? mant : 1);	/* subnormal */
	default:
		e = elo + (int)((r >> 45) % (uint64_t)(ehi - elo + 1));
		break;
	}
	if (dt == SPYRE_DTYPE_FP8_E4M3 && e == 15 && mant == 7)
		mant = 6;
	return sign | (uint32_t)e << mb | mant;
}

/* Random element with magnitude roughly in [2^lo, 2^(hi+1)) (unbiased
 * exponents), some zeros and subnormals. */
static inline uint32_t x_rand_elem(uint64_t *s, uint32_t dt, int lo, int hi)
{
	int eb, mb, bias;

	x_fmt(dt, &eb, &mb);
	if (!eb)
		return x_rand_elem_range(s, dt, 0, 0);
	bias = (1 << (eb - 1)) - 1;
	return x_rand_elem_range(s, dt, lo + bias, hi + bias);
}

static inline void x_store(void *buf, uint32_t dt, uint64_t i, uint32_t v)
{
	uint8_t *p = (uint8_t *)buf + i * spyre_dtype_size(dt);

	switch (spyre_dtype_size(dt)) {
	case 1: p[0] = (uint8_t)v; break;
	case 2: memcpy(p, &(uint16_t){ (uint16_t)v }, 2); break;
	default: memcpy(p, &v, 4); break;
	}
}

static inline uint32_t x_load(const void *buf, uint32_t dt, uint64_t i)
{
	const uint8_t *p = (const uint8_t *)buf + i * spyre_dtype_size(dt);
	uint16_t h;
	uint32_t w;

	switch (spyre_dtype_size(dt)) {
	case 1: return p[0];
	case 2: memcpy(&h, p, 2); return h;
	default: memcpy(&w, p, 4); return w;
	}
}

/* Bit pattern of a NaN (float dtypes) or a canary (integers) of @dt. */
static inline uint32_t x_poison(uint32_t dt)
{
	switch (dt) {
	case SPYRE_DTYPE_FP32: return 0x7fc0dead;
	case SPYRE_DTYPE_FP16: return 0x7e5a;
	case SPYRE_DTYPE_BF16: return 0x7fda;
	case SPYRE_DTYPE_FP8_E4M3: return 0x7f;
	case SPYRE_DTYPE_FP8_E5M2: return 0x7f;
	case SPYRE_DTYPE_INT8: return 0x5a;
	default: return 0x5a5aa5a5;
	}
}

/* Sticky error of @fd's context (QUERY_CONTEXT), or the ioctl error. */
static inline int x_ctx_error(int fd)
{
	struct drm_spyre_context_info ci;
	int ret = spyre_query_context(fd, &ci);

	return ret ? ret : ci.error;
}

/* Unsigned decimal module parameter of spyre.ko, or -errno. */
static inline long long x_module_param(const char *name)
{
	char path[128], buf[32];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/spyre/parameters/%s", name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	return strtoll(buf, NULL, 0);
}

#endif
