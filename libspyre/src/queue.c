// SPDX-License-Identifier: MIT
/*
 * Queues, submission and fences.
 *
 * Each queue owns a timeline syncobj; submission N signals point N.  Each
 * submission also replaces the fence of one of SPYRE__FENCE_SLOTS binary
 * syncobjs (slot N % SLOTS): exporting that slot as a sync_file gives the
 * job's own fence and with it the job's error (SYNC_IOC_FILE_INFO status).
 * The timeline alone cannot always tell: the kernel drops signalled chain
 * nodes, after which a point resolves to a stub fence without the error.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sync_file.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"

SPYRE_API int spyre_queue_create(struct spyre_device *dev, int priority,
				 struct spyre_queue **out)
{
	struct drm_spyre_queue_create qc;
	struct drm_spyre_queue_destroy qd;
	struct spyre_queue *q;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!out || priority < SPYRE_PRIORITY_LOW ||
	    priority > SPYRE_PRIORITY_HIGH)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	memset(&qc, 0, sizeof(qc));
	qc.priority = (uint32_t)priority;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &qc)) {
		ret = -errno;
		free(q);
		return ret;
	}
	if (drmSyncobjCreate(dev->fd, 0, &q->timeline)) {
		ret = -errno;
		memset(&qd, 0, sizeof(qd));
		qd.queue_id = qc.queue_id;
		drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &qd);
		free(q);
		return ret;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->dev = dev;
	q->id = qc.queue_id;
	spyre__device_get(dev);
	*out = q;
	return 0;
}

int spyre__wait_point(struct spyre_queue *q, uint64_t point,
		      uint64_t timeout_ns)
{
	uint64_t pt = point;
	uint32_t h = q->timeline;
	int ret;

	if (!point)
		return 0;
	ret = drmSyncobjTimelineWait(q->dev->fd, &h, &pt, 1,
				     spyre__deadline(timeout_ns),
				     DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
				     NULL);
	if (ret) {
		ret = -errno;
		if (ret == -ETIME)
			ret = -ETIMEDOUT;
		return ret;
	}
	return 0;
}

SPYRE_API void spyre_queue_destroy(struct spyre_queue *q)
{
	struct spyre_device *dev;

	if (!q)
		return;
	dev = q->dev;
	if (spyre__same_process(dev)) {
		struct drm_spyre_queue_destroy qd;

		/* Jobs may still read the upload ring: let them finish. */
		spyre__wait_point(q, q->last_point, SPYRE__INTERNAL_WAIT_NS);
		memset(&qd, 0, sizeof(qd));
		qd.queue_id = q->id;
		drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &qd);
		drmSyncobjDestroy(dev->fd, q->timeline);
		if (q->tmp_syncobj)
			drmSyncobjDestroy(dev->fd, q->tmp_syncobj);
		for (int i = 0; i < SPYRE__FENCE_SLOTS; i++)
			if (q->slots[i])
				drmSyncobjDestroy(dev->fd, q->slots[i]);
	}
	spyre_bo_free(q->ring);
	free(q->recs);
	pthread_mutex_destroy(&q->lock);
	free(q);
	spyre__device_put(dev);
}

SPYRE_API uint32_t spyre_queue_id(const struct spyre_queue *q)
{
	return q ? q->id : 0;
}

SPYRE_API uint32_t spyre_queue_syncobj(const struct spyre_queue *q)
{
	return q ? q->timeline : 0;
}

/* ---- upload ring (all under q->lock) -------------------------------- */

static int export_locked(struct spyre_queue *q, uint64_t point, int *fd,
			 bool *exact);

static int rec_push(struct spyre_queue *q, const struct spyre__ring_rec *rec)
{
	if (q->rec_count == q->rec_cap) {
		unsigned int ncap = q->rec_cap ? q->rec_cap * 2 : 64;
		struct spyre__ring_rec *n = malloc(ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		for (unsigned int i = 0; i < q->rec_count; i++)
			n[i] = q->recs[(q->rec_first + i) % q->rec_cap];
		free(q->recs);
		q->recs = n;
		q->rec_cap = ncap;
		q->rec_first = 0;
	}
	q->recs[(q->rec_first + q->rec_count) % q->rec_cap] = *rec;
	q->rec_count++;
	return 0;
}

static const struct spyre__ring_rec *rec_front(struct spyre_queue *q)
{
	return q->rec_count ? &q->recs[q->rec_first] : NULL;
}

/*
 * Status of the job at @point (signalled): 1 OK, < 0 its error.  *@exact
 * (if not NULL) tells whether it came from the job's own fence; beyond the
 * last SPYRE__FENCE_SLOTS points the timeline may have dropped the error.
 */
static int point_status_locked(struct spyre_queue *q, uint64_t point,
			       bool *exact)
{
	bool ex;
	int fd, ret;

	ret = export_locked(q, point, &fd, &ex);
	if (ret)
		return ret;
	ret = spyre__sync_file_status(fd);
	close(fd);
	if (exact)
		*exact = ex;
	return ret;
}

/* Whether the job at @point surely succeeded (its data may be used). */
static bool point_ok_locked(struct spyre_queue *q, uint64_t point)
{
	bool exact = false;

	if (point_status_locked(q, point, &exact) != 1)
		return false;
	/* without the job's own fence, trust it only in a healthy context */
	return exact || !atomic_load(&q->dev->error);
}

/* Drop the oldest record, whose job has ended; deliver its staged data. */
static void rec_pop(struct spyre_queue *q)
{
	const struct spyre__ring_rec *r = rec_front(q);

	if (r->out && point_ok_locked(q, r->point))
		memcpy(r->out, q->ring_map + r->out_off, r->out_len);
	q->rec_first = (q->rec_first + 1) % q->rec_cap;
	q->rec_count--;
}

static int rec_pop_wait(struct spyre_queue *q)
{
	const struct spyre__ring_rec *r = rec_front(q);
	int ret = spyre__wait_point(q, r->point, SPYRE__INTERNAL_WAIT_NS);

	/* A job error is fine here: the job is over either way. */
	if (ret == -ETIMEDOUT || ret == -EINTR)
		return ret;
	rec_pop(q);
	return 0;
}

int spyre__queue_retire(struct spyre_queue *q)
{
	uint64_t done = 0;
	uint32_t h;
	int ret = 0;

	pthread_mutex_lock(&q->lock);
	h = q->timeline;
	if (q->rec_count && drmSyncobjQuery(q->dev->fd, &h, &done, 1))
		ret = -errno;
	while (!ret && q->rec_count && rec_front(q)->point <= done)
		rec_pop(q);
	pthread_mutex_unlock(&q->lock);
	return ret;
}

static int ring_alloc(struct spyre_queue *q, uint64_t size, uint64_t *off)
{
	const struct spyre__ring_rec *r;
	uint64_t head;
	int ret;

	if (!q->ring || size > q->ring->size) {
		uint64_t nsize = SPYRE__RING_SIZE;
		struct spyre_bo *bo;
		void *map;

		while (nsize < size)
			nsize *= 2;
		ret = spyre_bo_alloc(q->dev, nsize, 0, &bo);
		if (ret)
			return ret;
		ret = spyre_bo_map(bo, &map);
		if (ret) {
			spyre_bo_free(bo);
			return ret;
		}
		if (q->ring) {
			while (q->rec_count) {
				ret = rec_pop_wait(q);
				if (ret) {
					spyre_bo_free(bo);
					return ret;
				}
			}
			spyre_bo_free(q->ring);
		}
		q->ring = bo;
		q->ring_map = map;
		q->ring_head = 0;
	}

	head = q->ring_head;
	if (head + size > q->ring->size) {
		/* Wrap: the tail [head, end) and [0, size) must be idle. */
		while ((r = rec_front(q)) &&
		       (r->off >= head || r->off < size)) {
			ret = rec_pop_wait(q);
			if (ret)
				return ret;
		}
		head = 0;
	} else {
		while ((r = rec_front(q)) && r->off < head + size &&
		       r->off + r->len > head) {
			ret = rec_pop_wait(q);
			if (ret)
				return ret;
		}
	}
	*off = head;
	return 0;
}

/* ---- submission ------------------------------------------------------ */

static int get_slot(struct spyre_queue *q, uint64_t point, uint32_t *h)
{
	uint32_t *slot = &q->slots[point % SPYRE__FENCE_SLOTS];

	if (!*slot && drmSyncobjCreate(q->dev->fd, 0, slot))
		return -errno;
	*h = *slot;
	return 0;
}

/* Jobs of one ioctl on the stack up to this many. */
#define STACK_JOBS	8

/* Commands of @cb that go into the ring, if any (NULL or empty: none). */
static const struct spyre_cmdbuf *ring_cb(const struct spyre_cmdbuf *cb)
{
	return cb && cb->size ? cb : NULL;
}

/*
 * List @bo at @refs[*@nh] as read (and written if @written); -EINVAL /
 * -EXDEV for a BO that is missing or of another device.
 */
static int add_ref(struct spyre_queue *q, const struct spyre_bo *bo,
		   bool written, struct drm_spyre_bo_ref *refs,
		   unsigned int *nh)
{
	if (!bo)
		return -EINVAL;
	if (bo->dev != q->dev)
		return -EXDEV;
	refs[*nh].handle = bo->handle;
	refs[*nh].flags = DRM_SPYRE_BO_REF_READ |
			  (written ? DRM_SPYRE_BO_REF_WRITE : 0);
	(*nh)++;
	return 0;
}

/* List the BOs @cb recorded, as its encoders say they are used. */
static int add_cb_refs(struct spyre_queue *q, const struct spyre_cmdbuf *cb,
		       struct drm_spyre_bo_ref *refs, unsigned int *nh)
{
	int ret = 0;

	for (size_t i = 0; !ret && cb && i < cb->nbos; i++)
		ret = add_ref(q, cb->bos[i], spyre__cmdbuf_bo_written(cb, i),
			      refs, nh);
	return ret;
}

/*
 * Submit @sub: @repeat jobs of the commands at @cmd_va (@cmd_size bytes),
 * preceded by a job of sub->pre's commands at @pre_va and followed by one
 * of sub->post's at @post_va when those are given, one ioctl per max_jobs
 * jobs.
 */
static int submit_locked(struct spyre_queue *q, const struct spyre__sub *sub,
			 uint64_t cmd_va, uint32_t cmd_size, uint64_t pre_va,
			 uint64_t post_va, struct spyre_bo *ring,
			 struct spyre_fence *out)
{
	const struct spyre_cmdbuf *cb = sub->cb;
	const struct spyre_cmdbuf *pre = ring_cb(sub->pre);
	const struct spyre_cmdbuf *post = ring_cb(sub->post);
	unsigned int ncb = cb ? (unsigned int)cb->nbos : 0;
	unsigned int nbos = sub->nbos + ncb + 2, nw = sub->nwaits +
			    sub->nwait_syncobjs;
	unsigned int repeat = sub->repeat ? sub->repeat : 1;
	unsigned int total = repeat + (pre ? 1 : 0) + (post ? 1 : 0);
	struct drm_spyre_sync *in = NULL, outs[3];
	struct drm_spyre_job stack_jobs[STACK_JOBS], *jobs = stack_jobs;
	struct drm_spyre_submit submit;
	struct drm_spyre_bo_ref *refs = NULL;
	unsigned int nh = 0, nin = 0, nout = 0, done = 0;
	uint64_t point = q->last_point + 1;
	uint32_t slot = 0;
	int ret;

	if (pre)
		nbos += (unsigned int)pre->nbos;
	if (post)
		nbos += (unsigned int)post->nbos;
	if (nbos > q->dev->max_bos_per_job || nw > q->dev->max_syncs_per_job)
		return -E2BIG;
	refs = malloc(nbos * sizeof(*refs));
	if (!refs)
		return -ENOMEM;
	/*
	 * Every BO is listed as read, and as written when a command may
	 * write it (the job's fence then goes in as a writer): the ring
	 * (staged device-to-host copies land there), an extra BO as the
	 * caller says, the caller's BOs unless it says otherwise (raw-VA
	 * commands may write them), and the command buffers' BOs as their
	 * encoders recorded.  GEMM weights and other inputs thus carry
	 * reader fences only.
	 */
	if (ring)
		refs[nh++] = (struct drm_spyre_bo_ref){
			ring->handle, DRM_SPYRE_BO_REF_READ |
				      DRM_SPYRE_BO_REF_WRITE };
	if (sub->extra_bo)
		refs[nh++] = (struct drm_spyre_bo_ref){
			sub->extra_bo->handle, DRM_SPYRE_BO_REF_READ |
			(sub->extra_bo_written ? DRM_SPYRE_BO_REF_WRITE : 0) };
	ret = 0;
	for (unsigned int i = 0; !ret && i < sub->nbos; i++)
		ret = add_ref(q, sub->bos[i],
			      !sub->bos_written || sub->bos_written[i], refs,
			      &nh);
	if (!ret)
		ret = add_cb_refs(q, cb, refs, &nh);
	if (!ret)
		ret = add_cb_refs(q, pre, refs, &nh);
	if (!ret)
		ret = add_cb_refs(q, post, refs, &nh);
	if (ret)
		goto out;
	if (nw) {
		in = calloc(nw, sizeof(*in));
		if (!in) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (unsigned int i = 0; i < sub->nwaits; i++) {
		const struct spyre_fence *w = &sub->waits[i];

		if (!w->queue || !w->point)
			continue;
		if (w->queue->dev != q->dev) {
			ret = -EXDEV;
			goto out;
		}
		in[nin].handle = w->queue->timeline;
		in[nin].point = w->point;
		nin++;
	}
	for (unsigned int i = 0; i < sub->nwait_syncobjs; i++)
		in[nin++].handle = sub->wait_syncobjs[i];
	ret = get_slot(q, point, &slot);
	if (ret)
		goto out;
	memset(outs, 0, sizeof(outs));
	outs[nout].handle = q->timeline;
	outs[nout++].point = point;
	outs[nout++].handle = slot;
	if (sub->signal_syncobj)
		outs[nout++].handle = sub->signal_syncobj;

	if (total > STACK_JOBS) {
		unsigned int n = total < q->dev->max_jobs ? total :
				 q->dev->max_jobs;

		jobs = malloc(n * sizeof(*jobs));
		if (!jobs) {
			ret = -ENOMEM;
			goto out;
		}
	}
	/*
	 * One ioctl per max_jobs jobs.  Jobs of a queue run in
	 * order, so the first job waits and the last one lists the BOs
	 * (keeping them alive past the others) and signals.  The kernel
	 * runs the jobs of one ioctl as one scheduler job where it can.
	 */
	while (done < total) {
		unsigned int n = total - done;
		bool first = done == 0, last;

		if (n > q->dev->max_jobs)
			n = q->dev->max_jobs;
		last = done + n == total;
		memset(jobs, 0, n * sizeof(*jobs));
		for (unsigned int i = 0; i < n; i++) {
			unsigned int j = done + i;

			jobs[i].queue_id = q->id;
			if (pre && j == 0) {
				jobs[i].cmd_va = pre_va;
				jobs[i].cmd_size = (uint32_t)pre->size;
			} else if (post && j == total - 1) {
				jobs[i].cmd_va = post_va;
				jobs[i].cmd_size = (uint32_t)post->size;
			} else {
				jobs[i].cmd_va = cmd_va;
				jobs[i].cmd_size = cmd_size;
				if (sub->restartable)
					jobs[i].flags =
						DRM_SPYRE_JOB_RESTARTABLE;
			}
		}
		if (first && nin) {
			jobs[0].in_syncs = (uintptr_t)in;
			jobs[0].in_sync_count = nin;
		}
		/* the last job of every ioctl keeps the BOs alive */
		jobs[n - 1].bo_count = nh;
		jobs[n - 1].bos = (uintptr_t)refs;
		if (last) {
			jobs[n - 1].out_syncs = (uintptr_t)outs;
			jobs[n - 1].out_sync_count = nout;
		}
		memset(&submit, 0, sizeof(submit));
		submit.jobs = (uintptr_t)jobs;
		submit.job_count = n;
		submit.job_stride = sizeof(*jobs);
		if (drmIoctl(q->dev->fd, DRM_IOCTL_SPYRE_SUBMIT, &submit)) {
			ret = -errno;
			if (ret == -ECANCELED)
				spyre__set_error(q->dev, ret);
			goto out;
		}
		done += n;
	}
	q->last_point = point;
	if (out) {
		out->queue = q;
		out->point = point;
	}
	ret = 0;
out:
	if (jobs != stack_jobs)
		free(jobs);
	free(in);
	free(refs);
	return ret;
}

/* Encode the one COPY of a staged host copy at @p (ring VA @ring_va). */
static void encode_stage_copy(void *p, const struct spyre__sub *sub,
			      uint64_t ring_va)
{
	struct spyre_cmd_copy c;

	memset(&c, 0, sizeof(c));
	c.hdr.opcode = SPYRE_OP_COPY;
	c.hdr.size = sizeof(c);
	c.src = sub->stage_in ? ring_va : sub->stage_va;
	c.dst = sub->stage_in ? sub->stage_va : ring_va;
	c.width = sub->stage_size;
	c.height = 1;
	c.src_dtype = SPYRE_DTYPE_U8;
	c.dst_dtype = SPYRE_DTYPE_U8;
	memcpy(p, &c, sizeof(c));
}

int spyre__submit(struct spyre_queue *q, const struct spyre__sub *sub,
		  struct spyre_fence *out)
{
	struct spyre__ring_rec rec;
	const struct spyre_cmdbuf *pre = ring_cb(sub->pre);
	const struct spyre_cmdbuf *post = ring_cb(sub->post);
	uint64_t off = 0, len = 0, cmd_va = sub->cmd_va, pre_va = 0,
		 post_va = 0;
	uint32_t cmd_size = sub->cmd_size;
	bool staged = sub->stage_size != 0;
	int ret = 0;

	if (sub->cb) {
		len = sub->cb->size;
		cmd_size = (uint32_t)len;
	} else if (staged) {
		cmd_size = sizeof(struct spyre_cmd_copy);
		len = cmd_size + ((sub->stage_size + 63) & ~63ull);
	} else {
		/* a launch with staging: pre's and post's commands */
		len = (pre ? pre->size : 0) + (post ? post->size : 0);
	}
	if ((sub->cb || staged) && sub->repeat > 1)
		return -EINVAL;
	if ((sub->cb || staged) && (pre || post))
		return -EINVAL;
	if ((pre && pre->size > q->dev->info.max_cmd_size) ||
	    (post && post->size > q->dev->info.max_cmd_size))
		return -E2BIG;

	pthread_mutex_lock(&q->lock);
	if (len) {
		ret = ring_alloc(q, len, &off);
		if (ret)
			goto out;
		if (pre || post) {
			uint64_t pre_len = pre ? pre->size : 0;

			if (pre)
				memcpy(q->ring_map + off, pre->data, pre_len);
			if (post)
				memcpy(q->ring_map + off + pre_len,
				       post->data, post->size);
			pre_va = q->ring->va + off;
			post_va = pre_va + pre_len;
		} else if (sub->cb) {
			cmd_va = q->ring->va + off;
			memcpy(q->ring_map + off, sub->cb->data, len);
		} else {
			cmd_va = q->ring->va + off;
			encode_stage_copy(q->ring_map + off, sub,
					  cmd_va + cmd_size);
			if (sub->stage_in)
				memcpy(q->ring_map + off + cmd_size,
				       sub->stage_in, sub->stage_size);
		}
	}
	ret = submit_locked(q, sub, cmd_va, cmd_size, pre_va, post_va,
			    len ? q->ring : NULL, out);
	if (ret || !len)
		goto out;
	q->ring_head = off + len;
	memset(&rec, 0, sizeof(rec));
	rec.off = off;
	rec.len = len;
	rec.point = q->last_point;
	if (sub->stage_out) {
		rec.out = sub->stage_out;
		rec.out_off = off + cmd_size;
		rec.out_len = sub->stage_size;
	}
	if (rec_push(q, &rec)) {
		/* Cannot track the region: wait for the job instead. */
		spyre__wait_point(q, q->last_point, SPYRE__INTERNAL_WAIT_NS);
		if (rec.out && point_ok_locked(q, rec.point))
			memcpy(rec.out, q->ring_map + rec.out_off, rec.out_len);
	}
out:
	pthread_mutex_unlock(&q->lock);
	return ret;
}

SPYRE_API int spyre_submit(struct spyre_queue *q,
			   const struct spyre_cmdbuf *cb,
			   struct spyre_bo *const *bos, unsigned int nbos,
			   const struct spyre_fence *waits,
			   unsigned int nwaits,
			   struct spyre_fence *out)
{
	struct spyre__sub sub;

	if (!q)
		return -EINVAL;
	SPYRE__CHECK_DEV(q->dev);
	if (!cb || !cb->size || (nbos && !bos) || (nwaits && !waits))
		return -EINVAL;
	if (cb->size > q->dev->info.max_cmd_size || cb->size > UINT32_MAX)
		return -E2BIG;
	/* streams' open batches that name these BOs go first */
	spyre__stream_claim_bos(NULL, bos, nbos);
	spyre__stream_claim_bos(NULL, cb->bos, cb->nbos);
	memset(&sub, 0, sizeof(sub));
	sub.cb = cb;
	sub.bos = bos;
	sub.nbos = nbos;
	sub.waits = waits;
	sub.nwaits = nwaits;
	return spyre__submit(q, &sub, out);
}

SPYRE_API int spyre_submit_va(struct spyre_queue *q, uint64_t cmd_va,
			      uint32_t cmd_size,
			      struct spyre_bo *const *bos, unsigned int nbos,
			      const struct spyre_fence *waits,
			      unsigned int nwaits,
			      struct spyre_fence *out)
{
	struct spyre__sub sub;

	if (!q)
		return -EINVAL;
	SPYRE__CHECK_DEV(q->dev);
	if ((nbos && !bos) || (nwaits && !waits))
		return -EINVAL;
	spyre__stream_claim_bos(NULL, bos, nbos);
	memset(&sub, 0, sizeof(sub));
	sub.cmd_va = cmd_va;
	sub.cmd_size = cmd_size;
	sub.bos = bos;
	sub.nbos = nbos;
	sub.waits = waits;
	sub.nwaits = nwaits;
	return spyre__submit(q, &sub, out);
}

/* ---- fences ------------------------------------------------------------ */

/* Export the fence of @point as a sync_file fd (under q->lock). */
static int export_locked(struct spyre_queue *q, uint64_t point, int *fd,
			 bool *exact)
{
	uint32_t slot = q->slots[point % SPYRE__FENCE_SLOTS];
	int ret;

	if (slot && point + SPYRE__FENCE_SLOTS > q->last_point) {
		*exact = true;
		if (drmSyncobjExportSyncFile(q->dev->fd, slot, fd))
			return -errno;
		return 0;
	}
	*exact = false;
	if (!q->tmp_syncobj && drmSyncobjCreate(q->dev->fd, 0, &q->tmp_syncobj))
		return -errno;
	ret = drmSyncobjTransfer(q->dev->fd, q->tmp_syncobj, 0, q->timeline,
				 point, 0);
	if (ret)
		return -errno;
	if (drmSyncobjExportSyncFile(q->dev->fd, q->tmp_syncobj, fd))
		return -errno;
	return 0;
}

/*
 * Status of a sync_file: 1 signalled OK, 0 pending, < 0 error.  Looks at
 * each fence inside (dma_fence_chain nodes carry no error themselves).
 */
int spyre__sync_file_status(int fd)
{
	struct sync_file_info info;
	struct sync_fence_info *fi;
	int status;

	memset(&info, 0, sizeof(info));
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	if (info.status <= 0 || info.num_fences == 0)
		return info.status;
	fi = calloc(info.num_fences, sizeof(*fi));
	if (!fi)
		return -ENOMEM;
	info.sync_fence_info = (uintptr_t)fi;
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info)) {
		free(fi);
		return -errno;
	}
	status = info.status;
	free(fi);
	return status;
}

static int fence_check(const struct spyre_fence *f, struct spyre_queue **qp)
{
	struct spyre_queue *q;
	uint64_t last;

	if (!f)
		return -EINVAL;
	q = f->queue;
	if (!q)
		return f->point ? -EINVAL : 1;	/* zeroed: signalled */
	SPYRE__CHECK_DEV(q->dev);
	pthread_mutex_lock(&q->lock);
	last = q->last_point;
	pthread_mutex_unlock(&q->lock);
	if (!f->point || f->point > last)
		return -EINVAL;
	*qp = q;
	return 0;
}

SPYRE_API int spyre_fence_wait(const struct spyre_fence *f,
			       uint64_t timeout_ns)
{
	struct spyre_queue *q;
	bool exact;
	int ret, fd = -1, status;

	ret = fence_check(f, &q);
	if (ret)
		return ret > 0 ? 0 : ret;
	ret = spyre__wait_point(q, f->point, timeout_ns);
	if (ret)
		return ret;

	pthread_mutex_lock(&q->lock);
	ret = export_locked(q, f->point, &fd, &exact);
	pthread_mutex_unlock(&q->lock);
	if (ret)
		return ret;
	status = spyre__sync_file_status(fd);
	close(fd);
	if (status < 0) {
		spyre__set_error(q->dev, status);
		return status;
	}
	return 0;
}

SPYRE_API int spyre_fence_query(const struct spyre_fence *f)
{
	int ret = spyre_fence_wait(f, 0);

	return ret == -ETIMEDOUT ? -EBUSY : ret;
}

SPYRE_API int spyre_fence_export_sync_file(const struct spyre_fence *f,
					   int *fd)
{
	struct spyre_queue *q;
	bool exact;
	int ret;

	if (!fd)
		return -EINVAL;
	ret = fence_check(f, &q);
	if (ret)
		return ret > 0 ? -EINVAL : ret;
	pthread_mutex_lock(&q->lock);
	ret = export_locked(q, f->point, fd, &exact);
	pthread_mutex_unlock(&q->lock);
	return ret;
}

int spyre__queue_refine_error(struct spyre_queue *q, uint64_t point, int err)
{
	uint64_t first = 1;

	if (err != -ECANCELED || !point)
		return err;
	/*
	 * A refusal means the context is in error, so the jobs up to @point
	 * end soon (run, failed or cancelled); the kernel may refuse before
	 * it has signalled them (a timeout marks the context, then cancels).
	 * Their own errors, not this one, are what the caller wants.
	 */
	spyre__wait_point(q, point, SPYRE__INTERNAL_WAIT_NS);
	pthread_mutex_lock(&q->lock);
	/* Only the last SPYRE__FENCE_SLOTS points keep their own fence. */
	if (q->last_point >= SPYRE__FENCE_SLOTS)
		first = q->last_point - SPYRE__FENCE_SLOTS + 1;
	for (uint64_t p = first; p <= point; p++) {
		int st = point_status_locked(q, p, NULL);

		if (st < 0 && st != -ECANCELED) {
			err = st;
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return err;
}
