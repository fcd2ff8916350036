// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: SUBMIT.
 *
 * DRM_IOCTL_SPYRE_SUBMIT copies and checks an array of jobs, waits (with
 * no lock held) for in-syncs flagged WAIT_FOR_SUBMIT, and queues the jobs
 * in order: consecutive jobs of one queue become one scheduler job with
 * one descriptor each (spyre_group_len()).  Each scheduler job takes
 * references on the BOs it lists and their mappings in its context, waits
 * for its in-syncs (syncobjs, timeline points) as scheduler dependencies,
 * puts its fence into the BOs' reservation objects (reader or writer) and
 * into its out-syncs.
 */

#include <linux/dma-fence-chain.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_exec.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_syncobj.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_job.h"
#include "spyre_mmu.h"
#include "spyre_queue.h"
#include "spyre_submit.h"
#include "spyre_trace.h"

/* The smallest stride that can name a command stream (8-byte multiples). */
#define SPYRE_JOB_STRIDE_MIN	ALIGN(offsetofend(struct drm_spyre_job, \
					      cmd_size), 8)
#define SPYRE_JOB_STRIDE_MAX		PAGE_SIZE
/* BO references copied from userspace at once. */
#define SPYRE_BO_REF_CHUNK		32
/* Jobs of a SUBMIT copied to the stack rather than to an allocation. */
#define SPYRE_SUBMIT_STACK_JOBS		4
/* Out-syncs of a job looked up into the stack (libspyre uses two). */
#define SPYRE_OUT_SYNCS_STACK		4

/**
 * struct spyre_out_sync - an out-sync of the job being queued, looked up.
 * @syncobj: the syncobj (reference held).
 * @chain: preallocated chain node for a timeline point, NULL for a binary
 *	syncobj (or once consumed).
 * @point: timeline point, 0 for binary.
 */
struct spyre_out_sync {
	struct drm_syncobj *syncobj;
	struct dma_fence_chain *chain;
	u64 point;
};

/**
 * struct spyre_submit_signal - what one job of a SUBMIT will signal, as
 * userspace wrote it (not looked up): lets a WAIT_FOR_SUBMIT in-sync of a
 * later job of the same SUBMIT see that an earlier job provides it.
 * @job: index of the job in the SUBMIT.
 * @handle: syncobj handle.
 * @point: timeline point, 0 for binary.
 */
struct spyre_submit_signal {
	u32 job;
	u32 handle;
	u64 point;
};

/*
 * The out-syncs of the @count jobs at @uj, in job order, into *@outs
 * (kvfree() it); *@n gets their number.
 */
static int spyre_submit_signals_get(const struct drm_spyre_job *uj, u32 count,
				    struct spyre_submit_signal **outs, u32 *n)
{
	struct spyre_submit_signal *o;
	struct drm_spyre_sync s;
	u32 i, k, total = 0;

	for (i = 0; i < count; i++)
		total += uj[i].out_sync_count;
	*n = 0;
	*outs = NULL;
	if (!total)
		return 0;
	o = kvmalloc_array(total, sizeof(*o), GFP_KERNEL);
	if (!o)
		return -ENOMEM;
	for (i = 0; i < count; i++) {
		struct drm_spyre_sync __user *us =
			u64_to_user_ptr(uj[i].out_syncs);

		for (k = 0; k < uj[i].out_sync_count; k++) {
			if (copy_from_user(&s, &us[k], sizeof(s))) {
				kvfree(o);
				return -EFAULT;
			}
			o[*n].job = i;
			o[*n].handle = s.handle;
			o[(*n)++].point = s.point;
		}
	}
	*outs = o;
	return 0;
}

/*
 * Before anything of a SUBMIT is queued, wait, holding no lock, until every
 * in-sync of the @count jobs at @uj flagged DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT
 * has a fence, unless an earlier job of the same SUBMIT signals it (the
 * same handle: binary, or a timeline point at or past the one waited for).
 * A signal ends the wait with -ERESTARTSYS: nothing is queued yet, so the
 * ioctl restarts as it came.
 */
static int spyre_submit_wait_for_submit(struct spyre_file *sfile,
					struct drm_file *file,
					const struct drm_spyre_job *uj,
					u32 count)
{
	struct spyre_submit_signal *outs = NULL;
	struct drm_spyre_sync s;
	struct dma_fence *fence;
	bool have_outs = false;
	u32 i, k, j, nouts = 0;
	int ret = 0;

	for (i = 0; !ret && i < count; i++) {
		struct drm_spyre_sync __user *usync =
			u64_to_user_ptr(uj[i].in_syncs);

		for (k = 0; !ret && k < uj[i].in_sync_count; k++) {
			if (copy_from_user(&s, &usync[k], sizeof(s))) {
				ret = -EFAULT;
				break;
			}
			if (s.flags & ~DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT) {
				ret = -EINVAL;
				break;
			}
			if (!s.flags)
				continue;
			if (!have_outs) {
				ret = spyre_submit_signals_get(uj, count, &outs,
							       &nouts);
				have_outs = true;
				if (ret)
					break;
			}
			for (j = 0; j < nouts && outs[j].job < i; j++)
				if (outs[j].handle == s.handle &&
				    (s.point ? outs[j].point >= s.point :
					       !outs[j].point))
					break;
			if (j < nouts && outs[j].job < i)
				continue;	/* an earlier job signals it */
			if (atomic_read(&sfile->ctx->error)) {
				ret = -ECANCELED;
				break;
			}
			ret = drm_syncobj_find_fence(file, s.handle, s.point,
						     DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
						     &fence);
			if (!ret)
				dma_fence_put(fence);
		}
		cond_resched();
	}
	kvfree(outs);
	return ret;
}

static int spyre_job_add_in_syncs(struct spyre_job *job,
				  struct drm_file *file,
				  const struct drm_spyre_job *uj)
{
	struct drm_spyre_sync __user *usync = u64_to_user_ptr(uj->in_syncs);
	struct drm_spyre_sync s;
	struct dma_fence *fence;
	u32 i;
	int ret;

	for (i = 0; i < uj->in_sync_count; i++) {
		if (copy_from_user(&s, &usync[i], sizeof(s)))
			return -EFAULT;
		if (s.flags & ~DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT)
			return -EINVAL;

		ret = drm_syncobj_find_fence(file, s.handle, s.point, 0,
					     &fence);
		if (ret)
			return ret;

		ret = drm_sched_job_add_dependency(&job->base, fence);
		if (ret)
			return ret;
	}
	return 0;
}

/* Release @outs (@count entries); @stack is the caller's small array. */
static void spyre_out_syncs_free(struct spyre_out_sync *outs, u32 count,
				 struct spyre_out_sync *stack)
{
	u32 i;

	if (!outs)
		return;
	for (i = 0; i < count; i++) {
		if (outs[i].syncobj)
			drm_syncobj_put(outs[i].syncobj);
		dma_fence_chain_free(outs[i].chain);
	}
	if (outs != stack)
		kvfree(outs);
}

/*
 * Look up the syncobjs @uj signals into *@outs_out: @stack (zeroed, of
 * SPYRE_OUT_SYNCS_STACK entries) when they fit, else an allocation.
 * *@outs_out is set even on failure, for spyre_out_syncs_free().
 */
static int spyre_out_syncs_get(struct drm_file *file,
			       const struct drm_spyre_job *uj,
			       struct spyre_out_sync *stack,
			       struct spyre_out_sync **outs_out)
{
	struct drm_spyre_sync __user *usync = u64_to_user_ptr(uj->out_syncs);
	struct spyre_out_sync *outs = stack;
	struct drm_spyre_sync s;
	u32 i;

	*outs_out = NULL;
	if (!uj->out_sync_count)
		return 0;

	if (uj->out_sync_count > SPYRE_OUT_SYNCS_STACK) {
		outs = kvcalloc(uj->out_sync_count, sizeof(*outs),
				GFP_KERNEL);
		if (!outs)
			return -ENOMEM;
	}
	*outs_out = outs;

	for (i = 0; i < uj->out_sync_count; i++) {
		if (copy_from_user(&s, &usync[i], sizeof(s)))
			return -EFAULT;
		if (s.flags)
			return -EINVAL;

		outs[i].syncobj = drm_syncobj_find(file, s.handle);
		if (!outs[i].syncobj)
			return -ENOENT;

		if (s.point) {
			outs[i].chain = dma_fence_chain_alloc();
			if (!outs[i].chain)
				return -ENOMEM;
			outs[i].point = s.point;
		}
	}
	return 0;
}

static void spyre_out_syncs_signal(struct spyre_out_sync *outs, u32 count,
				   struct dma_fence *fence)
{
	u32 i;

	for (i = 0; i < count; i++) {
		if (outs[i].chain) {
			drm_syncobj_add_point(outs[i].syncobj, outs[i].chain,
					      fence, outs[i].point);
			outs[i].chain = NULL;	/* consumed */
		} else {
			drm_syncobj_replace_fence(outs[i].syncobj, fence);
		}
	}
}

static int spyre_job_validate(const struct drm_spyre_job *uj)
{
	if (uj->flags & ~DRM_SPYRE_JOB_RESTARTABLE)
		return -EINVAL;
	if (!IS_ALIGNED(uj->cmd_va, 8) || !IS_ALIGNED(uj->cmd_size, 8) ||
	    uj->cmd_size < 8 || uj->cmd_size > SPYRE_MAX_CMD_STREAM)
		return -EINVAL;
	if (uj->cmd_va < SPYRE_VA_START ||
	    uj->cmd_va > SPYRE_VA_END - uj->cmd_size)
		return -EINVAL;
	if (uj->bo_count > SPYRE_MAX_BOS_PER_JOB ||
	    uj->in_sync_count > SPYRE_MAX_SYNCS_PER_JOB ||
	    uj->out_sync_count > SPYRE_MAX_SYNCS_PER_JOB)
		return -EINVAL;
	return 0;
}

/*
 * How many jobs from @uj[0] (of @count) go into one scheduler job: jobs of
 * the same queue, where only the first may wait for syncobjs and only the
 * last may signal them, so that every fence a user can see still signals
 * when its own job ends and no job waits for anything a later one needs.
 */
static u32 spyre_group_len(const struct drm_spyre_job *uj, u32 count)
{
	u32 n, bos = uj[0].bo_count;

	for (n = 1; n < count && n < SPYRE_GROUP_MAX; n++) {
		if (uj[n - 1].out_sync_count ||
		    uj[n].queue_id != uj[0].queue_id || uj[n].in_sync_count ||
		    bos + uj[n].bo_count > SPYRE_MAX_BOS_PER_JOB)
			break;
		bos += uj[n].bo_count;
	}
	return n;
}

/* Drop the BOs of @job from index @keep on. */
static void spyre_job_trim_bos(struct spyre_job *job, u32 keep)
{
	while (job->bo_count > keep) {
		job->bo_count--;
		spyre_vma_put(job->bos[job->bo_count].vma);
		drm_gem_object_put(job->bos[job->bo_count].obj);
	}
}

/* Append the BOs @uj lists to @job, with their mappings in its context. */
static int spyre_job_add_bos(struct spyre_job *job, struct drm_file *file,
			     const struct drm_spyre_job *uj)
{
	struct drm_spyre_bo_ref __user *uref = u64_to_user_ptr(uj->bos);
	struct drm_spyre_bo_ref buf[SPYRE_BO_REF_CHUNK];
	u32 i, n;

	for (i = 0; i < uj->bo_count; i += n) {
		n = min_t(u32, uj->bo_count - i, SPYRE_BO_REF_CHUNK);
		if (copy_from_user(buf, uref + i, n * sizeof(*buf)))
			return -EFAULT;
		for (u32 k = 0; k < n; k++) {
			struct spyre_job_bo *jb = &job->bos[job->bo_count];
			struct drm_gem_object *obj;
			struct spyre_vma *vma;

			if (!buf[k].flags ||
			    (buf[k].flags & ~(DRM_SPYRE_BO_REF_READ |
					      DRM_SPYRE_BO_REF_WRITE)))
				return -EINVAL;
			obj = drm_gem_object_lookup(file, buf[k].handle);
			if (!obj)
				return -ENOENT;
			/* NULL if the handle was closed meanwhile */
			vma = spyre_vma_lookup(to_spyre_bo(obj),
					       job->queue->ctx);
			if (!vma) {
				drm_gem_object_put(obj);
				return -ENOENT;
			}
			jb->obj = obj;
			jb->vma = vma;
			jb->usage = buf[k].flags & DRM_SPYRE_BO_REF_WRITE ?
				    DMA_RESV_USAGE_WRITE : DMA_RESV_USAGE_READ;
			job->bo_count++;
		}
	}
	return 0;
}

/**
 * struct spyre_proxy - in ALL_OR_NOTHING mode, the dependency of a job on
 * an earlier group of the same SUBMIT: a fence of its own, added to the
 * job's dependencies when the job is prepared (which may allocate), and
 * signalled when the earlier group's scheduler fence does, once that
 * group is armed (which may not allocate).
 * @base: the fence (first: released with dma_fence_free()).
 * @lock: its lock.
 * @cb: callback on the earlier group's fence.
 * @group: index of the earlier group.
 */
struct spyre_proxy {
	struct dma_fence base;
	spinlock_t lock;		/* fence lock */
	struct dma_fence_cb cb;
	u32 group;
};

static const char *spyre_proxy_driver_name(struct dma_fence *fence)
{
	return SPYRE_DRIVER_NAME;
}

static const char *spyre_proxy_timeline_name(struct dma_fence *fence)
{
	return "spyre-submit";
}

static const struct dma_fence_ops spyre_proxy_ops = {
	.get_driver_name = spyre_proxy_driver_name,
	.get_timeline_name = spyre_proxy_timeline_name,
};

static void spyre_proxy_signal(struct dma_fence *f, struct dma_fence_cb *cb)
{
	struct spyre_proxy *p = container_of(cb, struct spyre_proxy, cb);

	dma_fence_signal(&p->base);
	dma_fence_put(&p->base);
}

/**
 * struct spyre_group - the jobs of one scheduler job while a SUBMIT
 * prepares and queues them.
 * @job: the scheduler job (NULL once it belongs to the scheduler).
 * @stack_outs: out-syncs looked up, when they fit.
 * @outs: out-syncs of the group's last job (@stack_outs or allocated).
 * @nouts: entries in @outs.
 * @first: index in the SUBMIT of the group's first job.
 * @n: jobs in the group.
 * @inited: drm_sched_job_init() was called.
 * @proxies: dependencies on earlier groups (ALL_OR_NOTHING), @nproxies.
 * @nproxies: see @proxies.
 * @seqno: seqno of the group's last job, once armed.
 */
struct spyre_group {
	struct spyre_job *job;
	struct spyre_out_sync stack_outs[SPYRE_OUT_SYNCS_STACK];
	struct spyre_out_sync *outs;
	u32 nouts;
	u32 first;
	u32 n;
	bool inited;
	struct spyre_proxy *proxies[SPYRE_MAX_SYNCS_PER_JOB];
	u32 nproxies;
	u64 seqno;
};

static void spyre_group_release(struct spyre_group *g)
{
	spyre_out_syncs_free(g->outs, g->nouts, g->stack_outs);
	g->outs = NULL;
	g->nouts = 0;
	if (!g->job)
		return;
	if (g->inited)
		drm_sched_job_cleanup(&g->job->base);	/* drops the proxies */
	spyre_job_release(g->job);
	g->job = NULL;
}

/*
 * Which earlier group of an ALL_OR_NOTHING SUBMIT signals in-sync @s of
 * job @i (as spyre_submit_wait_for_submit() matches them), or -1.
 */
static int spyre_provider(const struct drm_spyre_job *uj, u32 i,
			  const struct drm_spyre_sync *s,
			  const struct spyre_group *groups, u32 ngroups)
{
	int best = -1;
	u64 best_point = U64_MAX;
	u32 g, k;

	for (g = 0; g < ngroups && groups[g].first < i; g++) {
		u32 last = groups[g].first + groups[g].n - 1;
		struct drm_spyre_sync __user *us =
			u64_to_user_ptr(uj[last].out_syncs);
		struct drm_spyre_sync o;

		for (k = 0; k < uj[last].out_sync_count; k++) {
			if (copy_from_user(&o, &us[k], sizeof(o)))
				return -1;
			if (o.handle != s->handle)
				continue;
			if (!s->point && !o.point) {
				best = g;	/* the last binary signal */
			} else if (s->point && o.point >= s->point &&
				   o.point < best_point) {
				best = g;	/* the lowest point past it */
				best_point = o.point;
			}
		}
	}
	return best;
}

/*
 * In-syncs of an ALL_OR_NOTHING group's first job: those an earlier group
 * of the SUBMIT signals become proxies, the others scheduler dependencies
 * as in spyre_job_add_in_syncs().
 */
static int spyre_group_add_in_syncs(struct spyre_group *g,
				    struct drm_file *file,
				    const struct drm_spyre_job *uj,
				    const struct spyre_group *groups)
{
	const struct drm_spyre_job *j = &uj[g->first];
	struct drm_spyre_sync __user *usync = u64_to_user_ptr(j->in_syncs);
	struct drm_spyre_sync s;
	struct dma_fence *fence;
	u32 i;
	int ret, prov;

	for (i = 0; i < j->in_sync_count; i++) {
		if (copy_from_user(&s, &usync[i], sizeof(s)))
			return -EFAULT;
		if (s.flags & ~DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT)
			return -EINVAL;
		prov = spyre_provider(uj, g->first, &s, groups,
				      g - groups);
		if (prov >= 0) {
			struct spyre_proxy *p = kzalloc(sizeof(*p), GFP_KERNEL);

			if (!p)
				return -ENOMEM;
			spin_lock_init(&p->lock);
			dma_fence_init(&p->base, &spyre_proxy_ops, &p->lock,
				       dma_fence_context_alloc(1), 1);
			p->group = prov;
			g->proxies[g->nproxies++] = p;
			fence = &p->base;	/* its reference goes to the job */
		} else {
			ret = drm_syncobj_find_fence(file, s.handle, s.point, 0,
						     &fence);
			if (ret)
				return ret;
		}
		ret = drm_sched_job_add_dependency(&g->job->base, fence);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Prepare the @g->n jobs at @uj[@g->first] as one scheduler job: one ring
 * descriptor per job, one hardware fence (the last descriptor's), the BOs
 * of all of them, the in-syncs of the first and the out-syncs of the
 * last; everything that may allocate or fail but arming.  A job that
 * fails stops the group there: @g->n becomes the number of jobs before it
 * and the error is returned (with @g->n == 0, @g holds nothing).  With
 * @groups (ALL_OR_NOTHING: the groups before @g, all prepared), in-syncs
 * that those signal become proxies.
 */
static int spyre_group_prepare(struct spyre_file *sfile, struct drm_file *file,
			       const struct drm_spyre_job *uj,
			       struct spyre_group *g,
			       const struct spyre_group *groups)
{
	const struct drm_spyre_job *gj = &uj[g->first];
	struct spyre_queue *q;
	struct spyre_job *job;
	u32 i, done, nbos = 0, n = g->n;
	int ret = 0;

	g->outs = NULL;
	g->nouts = 0;
	g->inited = false;
	g->nproxies = 0;
	g->n = 0;
	q = spyre_queue_lookup(sfile, gj[0].queue_id);
	if (!q)
		return -ENOENT;

	job = kzalloc(struct_size(job, descs, n), GFP_KERNEL);
	if (!job) {
		spyre_queue_put(q);
		return -ENOMEM;
	}
	spyre_live_inc(jobs);
	atomic_inc(&q->sdev->tel.jobs_in_flight);
	job->ndesc = n;
	job->queue = q;		/* the lookup reference is the job's */
	g->job = job;

	if (atomic_read(&q->ctx->error)) {
		ret = -ECANCELED;
		goto err;
	}

	job->hw_fence = kzalloc(sizeof(*job->hw_fence), GFP_KERNEL);
	for (i = 0; i < n; i++)
		nbos += gj[i].bo_count;
	if (nbos)
		job->bos = kvcalloc(nbos, sizeof(*job->bos), GFP_KERNEL);
	if (!job->hw_fence || (nbos && !job->bos)) {
		ret = -ENOMEM;
		goto err;
	}

	/* In the order a lone job checks them: BOs, in-syncs, out-syncs. */
	for (done = 0; done < n; done++) {
		u32 keep = job->bo_count;

		ret = spyre_job_add_bos(job, file, &gj[done]);
		if (!ret && !done) {
			ret = drm_sched_job_init(&job->base, &q->entity, n,
						 file);
			g->inited = !ret;
			if (!ret && groups)
				ret = spyre_group_add_in_syncs(g, file, uj,
							       groups);
			else if (!ret)
				ret = spyre_job_add_in_syncs(job, file, gj);
		}
		if (!ret && done == n - 1) {
			ret = spyre_out_syncs_get(file, &gj[done],
						  g->stack_outs, &g->outs);
			g->nouts = gj[done].out_sync_count;
		}
		if (ret) {
			spyre_job_trim_bos(job, keep);
			break;
		}
		job->descs[done].cmd_va = gj[done].cmd_va;
		job->descs[done].cmd_size = gj[done].cmd_size;
		job->descs[done].restartable =
			!!(gj[done].flags & DRM_SPYRE_JOB_RESTARTABLE);
	}
	if (!done)
		goto err;
	if (ret) {
		/* The out-syncs belonged to the job that failed. */
		spyre_out_syncs_free(g->outs, g->nouts, g->stack_outs);
		g->outs = NULL;
		g->nouts = 0;
	}
	job->ndesc = done;
	job->base.credits = done;
	g->n = done;
	return ret;

err:
	spyre_group_release(g);
	return ret;
}

/*
 * Arm and push a prepared group (its BOs locked with a fence slot each,
 * its queue's lock held by the caller), give it its seqnos and put its
 * fence into its BOs.  Nothing here allocates or fails.
 */
static void spyre_group_arm(struct spyre_group *g, struct dma_fence **deps)
{
	struct spyre_job *job = g->job;
	struct spyre_queue *q = job->queue;
	struct dma_fence *fence;
	u32 i;

	lockdep_assert_held(&q->lock);
	drm_sched_job_arm(&job->base);
	q->next_seqno += job->ndesc;
	job->seqno = q->next_seqno;
	fence = &job->base.s_fence->finished;
	/*
	 * Readers first: a BO listed more than once, as reader and writer,
	 * then ends with one writer entry (dma_resv_add_fence() replaces a
	 * reader of the same context by a writer, not the other way round),
	 * so the one slot reserved per BO and queue is enough.
	 */
	for (i = 0; i < job->bo_count; i++)
		if (job->bos[i].usage == DMA_RESV_USAGE_READ)
			dma_resv_add_fence(job->bos[i].obj->resv, fence,
					   DMA_RESV_USAGE_READ);
	for (i = 0; i < job->bo_count; i++)
		if (job->bos[i].usage == DMA_RESV_USAGE_WRITE)
			dma_resv_add_fence(job->bos[i].obj->resv, fence,
					   DMA_RESV_USAGE_WRITE);
	/* Earlier groups of the SUBMIT are armed: hook the proxies up. */
	for (i = 0; i < g->nproxies; i++) {
		struct spyre_proxy *p = g->proxies[i];
		struct dma_fence *dep = deps[p->group];

		dma_fence_get(&p->base);	/* the callback's */
		if (dma_fence_add_callback(dep, &p->cb, spyre_proxy_signal))
			spyre_proxy_signal(dep, &p->cb);
	}
	trace_spyre_submit(q->sdev->drm.dev, q->ctx->id, q->hwq, job->seqno,
			   job->ndesc, job->bo_count);
}

/* After the push: signal the out-syncs with @fence and drop them. */
static void spyre_group_signal(struct spyre_group *g, struct dma_fence *fence)
{
	spyre_out_syncs_signal(g->outs, g->nouts, fence);
	spyre_out_syncs_free(g->outs, g->nouts, g->stack_outs);
	g->outs = NULL;
	g->nouts = 0;
}

/* Write the seqnos of @g's jobs back to userspace, if the stride has them. */
static int spyre_group_seqnos(const struct spyre_group *g, u64 uptr,
			      u32 stride, u64 last)
{
	u64 first = last - g->n + 1;
	u32 i;

	if (stride < offsetofend(struct drm_spyre_job, seqno))
		return 0;
	for (i = 0; i < g->n; i++) {
		struct drm_spyre_job __user *ujob =
			u64_to_user_ptr(uptr + (u64)(g->first + i) * stride);

		if (put_user(first + i, &ujob->seqno))
			return -EFAULT;
	}
	return 0;
}

/*
 * Queue one group (the legacy SUBMIT: groups one after the other, each
 * queued before the next is prepared).  A job that fails stops the group
 * there: the jobs before it are queued anyway and *@queued counts them
 * (an error can still follow when a seqno cannot be written back).
 */
static int spyre_submit_group(struct spyre_file *sfile, struct drm_file *file,
			      const struct drm_spyre_job *uj,
			      struct spyre_group *g, u64 uptr, u32 stride,
			      u32 *queued)
{
	struct dma_fence *fence;
	struct spyre_queue *q;
	struct spyre_job *job;
	struct drm_exec exec;
	bool locked = false;
	int ret, err;
	u64 last;
	u32 i;

	*queued = 0;
	err = spyre_group_prepare(sfile, file, uj, g, NULL);
	if (!g->n)
		return err;
	job = g->job;
	q = job->queue;

	/* Reserve a fence slot in every listed BO's reservation object. */
	if (job->bo_count) {
		/*
		 * Not interruptible: jobs before this one may already be
		 * queued, and a restarted SUBMIT would queue them again.
		 */
		drm_exec_init(&exec, DRM_EXEC_IGNORE_DUPLICATES,
			      job->bo_count);
		locked = true;
		drm_exec_until_all_locked(&exec) {
			for (i = 0; i < job->bo_count; i++) {
				ret = drm_exec_prepare_obj(&exec,
							   job->bos[i].obj, 1);
				drm_exec_retry_on_contention(&exec);
				if (ret)
					goto err;
			}
		}
	}

	mutex_lock(&q->lock);
	if (q->dead) {
		mutex_unlock(&q->lock);
		ret = -ENOENT;
		goto err;
	}
	if (atomic_read(&q->ctx->error)) {
		mutex_unlock(&q->lock);
		ret = -ECANCELED;
		goto err;
	}
	spyre_group_arm(g, NULL);
	last = job->seqno;
	fence = dma_fence_get(&job->base.s_fence->finished);
	drm_sched_entity_push_job(&job->base);
	g->job = NULL;		/* the scheduler's now */
	mutex_unlock(&q->lock);
	if (locked)
		drm_exec_fini(&exec);
	*queued = g->n;

	spyre_group_signal(g, fence);
	dma_fence_put(fence);

	ret = spyre_group_seqnos(g, uptr, stride, last);
	return ret ? ret : err;

err:
	if (locked)
		drm_exec_fini(&exec);
	spyre_group_release(g);
	return ret;
}

/* The distinct queues of @groups: each needs its own fence slots per BO. */
static u32 spyre_groups_queues(const struct spyre_group *groups, u32 ngroups)
{
	u32 g, h, nq = 0;

	for (g = 0; g < ngroups; g++) {
		for (h = 0; h < g; h++)
			if (groups[h].job->queue == groups[g].job->queue)
				break;
		nq += h == g;
	}
	return nq;
}

/*
 * DRM_SPYRE_SUBMIT_ALL_OR_NOTHING: prepare every group, lock every BO with
 * its fence slots, check every queue is still the file's, and only then
 * arm and push them all; nothing after the first arm allocates or fails
 * but the write-back of the seqnos.  *@bad gets the index of the job an
 * error is about (U32_MAX: none in particular; @count when every job is
 * queued and only the write-back failed).
 */
static int spyre_submit_all(struct spyre_file *sfile, struct drm_file *file,
			    const struct drm_spyre_job *uj, u32 count,
			    u64 uptr, u32 stride, u32 *bad)
{
	struct spyre_group *groups;
	struct dma_fence **fences = NULL;
	u32 i, n, g, ngroups = 0, nq;
	struct drm_exec exec;
	bool locked = false;
	int ret = 0;

	*bad = U32_MAX;
	groups = kvcalloc(count, sizeof(*groups), GFP_KERNEL);
	fences = kvcalloc(count, sizeof(*fences), GFP_KERNEL);
	if (!groups || !fences) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < count; i += n, ngroups++) {
		struct spyre_group *gr = &groups[ngroups];

		n = spyre_group_len(&uj[i], count - i);
		gr->first = i;
		gr->n = n;
		ret = spyre_group_prepare(sfile, file, uj, gr, groups);
		if (ret || gr->n != n) {
			*bad = i + gr->n;
			if (gr->n)
				spyre_group_release(gr);
			goto out;
		}
	}

	nq = spyre_groups_queues(groups, ngroups);
	drm_exec_init(&exec, DRM_EXEC_INTERRUPTIBLE_WAIT |
		      DRM_EXEC_IGNORE_DUPLICATES, 0);
	locked = true;
	drm_exec_until_all_locked(&exec) {
		for (g = 0; g < ngroups; g++) {
			struct spyre_job *job = groups[g].job;

			for (i = 0; i < job->bo_count; i++) {
				ret = drm_exec_prepare_obj(&exec,
							   job->bos[i].obj,
							   2 * nq);
				drm_exec_retry_on_contention(&exec);
				if (ret) {
					*bad = groups[g].first;
					goto out;
				}
			}
		}
	}

	/*
	 * Under the file's lock no queue of it is destroyed: one still in the
	 * file is alive and stays so until the pushes are done.
	 */
	mutex_lock(&sfile->lock);
	for (g = 0; g < ngroups; g++) {
		struct spyre_queue *q = groups[g].job->queue;

		if (xa_load(&sfile->queues, uj[groups[g].first].queue_id) != q) {
			mutex_unlock(&sfile->lock);
			*bad = groups[g].first;
			ret = -ENOENT;
			goto out;
		}
	}
	if (atomic_read(&sfile->ctx->error)) {
		mutex_unlock(&sfile->lock);
		ret = -ECANCELED;
		goto out;
	}
	/*
	 * From here on every job is queued, in order, each armed and pushed
	 * under its queue's lock as in a plain SUBMIT.  A context error from
	 * now on ends the jobs it finds with -ECANCELED in their fences
	 * (run_job).
	 */
	for (g = 0; g < ngroups; g++) {
		struct spyre_job *job = groups[g].job;
		struct spyre_queue *q = job->queue;

		mutex_lock(&q->lock);
		spyre_group_arm(&groups[g], fences);
		groups[g].seqno = job->seqno;
		fences[g] = dma_fence_get(&job->base.s_fence->finished);
		drm_sched_entity_push_job(&job->base);
		groups[g].job = NULL;	/* the scheduler's */
		mutex_unlock(&q->lock);
	}
	mutex_unlock(&sfile->lock);
	drm_exec_fini(&exec);
	locked = false;

	for (g = 0; g < ngroups; g++) {
		spyre_group_signal(&groups[g], fences[g]);
		if (!ret) {
			ret = spyre_group_seqnos(&groups[g], uptr, stride,
						 groups[g].seqno);
			if (ret)
				*bad = count;
		}
	}
out:
	if (locked)
		drm_exec_fini(&exec);
	for (g = 0; groups && g < ngroups; g++)
		spyre_group_release(&groups[g]);
	for (g = 0; fences && g < count; g++)
		if (fences[g])
			dma_fence_put(fences[g]);
	kvfree(fences);
	kvfree(groups);
	return ret;
}

/* Copy job @i of @args into @uj and check it. */
static int spyre_job_copy(const struct drm_spyre_submit *args, u32 i,
			  struct drm_spyre_job *uj)
{
	void __user *src = u64_to_user_ptr(args->jobs + (u64)i *
					   args->job_stride);
	int ret;

	ret = copy_struct_from_user(uj, sizeof(*uj), src, args->job_stride);
	if (ret)
		return ret == -E2BIG ? -EINVAL : ret;
	return spyre_job_validate(uj);
}

/**
 * spyre_ioctl_submit() - DRM_IOCTL_SPYRE_SUBMIT.
 * @drm: device.
 * @data: struct drm_spyre_submit.
 * @file: caller.
 *
 * Without flags, jobs are validated and queued in order; on an error
 * @job_count is set to the number of jobs queued.  With
 * DRM_SPYRE_SUBMIT_ALL_OR_NOTHING every job is checked and prepared before
 * any is queued, and on an error before that nothing is: @error_index
 * names the job.  Consecutive jobs of one queue are queued as one
 * scheduler job (see spyre_group_len()): they cost one pass through the
 * scheduler, one fence and one interrupt instead of one each.
 *
 * Return: 0 or a negative errno (see the uapi header).
 */
int spyre_ioctl_submit(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct drm_spyre_submit *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct drm_spyre_job stack_jobs[SPYRE_SUBMIT_STACK_JOBS];
	struct drm_spyre_job *uj = stack_jobs;
	bool all = args->flags & DRM_SPYRE_SUBMIT_ALL_OR_NOTHING;
	u32 i, valid, queued = 0, bad;
	int idx, ret = 0, first_err = 0;

	if ((args->flags & ~DRM_SPYRE_SUBMIT_ALL_OR_NOTHING) ||
	    args->error_index ||
	    !args->job_count || args->job_count > SPYRE_MAX_JOBS ||
	    args->job_stride < SPYRE_JOB_STRIDE_MIN ||
	    args->job_stride > SPYRE_JOB_STRIDE_MAX ||
	    !IS_ALIGNED(args->job_stride, 8)) {
		if (all)
			args->error_index = U32_MAX;
		else
			args->job_count = 0;	/* nothing queued */
		return -EINVAL;
	}

	if (args->job_count > ARRAY_SIZE(stack_jobs)) {
		uj = kvmalloc_array(args->job_count, sizeof(*uj), GFP_KERNEL);
		if (!uj) {
			if (all)
				args->error_index = U32_MAX;
			else
				args->job_count = 0;
			return -ENOMEM;
		}
	}

	/* The jobs up to the first bad one are queued: find it first. */
	if (args->job_stride == sizeof(*uj) &&
	    !copy_from_user(uj, u64_to_user_ptr(args->jobs),
			    (size_t)args->job_count * sizeof(*uj))) {
		for (valid = 0; valid < args->job_count; valid++) {
			first_err = spyre_job_validate(&uj[valid]);
			if (first_err)
				break;
		}
	} else {
		for (valid = 0; valid < args->job_count; valid++) {
			first_err = spyre_job_copy(args, valid, &uj[valid]);
			if (first_err)
				break;
		}
	}
	if (all && first_err) {
		args->error_index = valid;
		ret = first_err;
		goto out;
	}

	ret = spyre_submit_wait_for_submit(sfile, file, uj, valid);
	if (ret == -ERESTARTSYS)
		goto out;	/* restarts with @args as they came */
	if (all) {
		bad = U32_MAX;
		if (!ret && !drm_dev_enter(drm, &idx)) {
			ret = -ENODEV;
		} else if (!ret) {
			ret = spyre_submit_all(sfile, file, uj, valid,
					       args->jobs, args->job_stride,
					       &bad);
			drm_dev_exit(idx);
		}
		if (ret && ret != -ERESTARTSYS)
			args->error_index = bad;
		goto out;
	}
	for (i = 0; !ret && i < valid; ) {
		struct spyre_group g = {
			.first = i,
			.n = spyre_group_len(&uj[i], valid - i),
		};
		u32 q;

		if (!drm_dev_enter(drm, &idx)) {
			ret = -ENODEV;
			break;
		}
		i += g.n;
		ret = spyre_submit_group(sfile, file, uj, &g, args->jobs,
					 args->job_stride, &q);
		drm_dev_exit(idx);
		queued += q;
	}
	if (!ret)
		ret = first_err;
	if (ret)
		args->job_count = queued;
out:
	if (uj != stack_jobs)
		kvfree(uj);
	return ret;
}
