/*
 * Spyre card model: scheduling and the worker pool
 *
 * Owns the interrupts (MSI-X moderation, the bottom half, the timer of
 * DBG_DUP_IRQ's second messages), queue
 * readiness, priorities and aging, picking work for a free worker, the
 * worker threads and their end, what a running job does at a tile or
 * chunk boundary (share the device lock, wait while the VM is stopped,
 * preemption by nesting: spyre_e_boundary), the doorbell executor, and
 * the VM run state.
 *
 * Locks: the scheduler runs under the device lock (workers wait on their
 * conditions with it); msix_notify() needs the BQL *without* the device
 * lock (a message the guest aims at this card's own registers comes
 * back into its MMIO handler), so interrupts are raised by
 * spyre_irq_flush() (for callers that hold the BQL), the bottom half
 * (for everyone else: a worker never takes the BQL to send a message)
 * and the DUP_IRQ timer, which let the device lock go first.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/rcu.h"
#include "qemu/units.h"
#include "hw/pci/msix.h"
#include "trace.h"

#include "spyre.h"

/* Completions on one vector closer than this share an MSI-X message. */
#define SPYRE_IRQ_MODERATE_NS   (20 * SCALE_US)
/* A running job looks for higher-priority work at least this often. */
#define SPYRE_SCAN_NS           SCALE_MS
/* Virtual time between the two messages of a DBG_DUP_IRQ completion. */
#define SPYRE_DUP_IRQ_NS        (20 * SCALE_MS)

QEMU_BUILD_BUG_ON(SPYRE_MAX_VECTORS > 64);     /* SpyreState.dup_pending */

/* ---- Interrupts --------------------------------------------------------- */

/* Vectors in @bits, with the BQL and without the device lock. */
static void spyre_irq_send(SpyreState *s, uint64_t bits, bool dup)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    unsigned int v;

    assert(bql_locked());
    for (v = 0; bits; v++, bits >>= 1) {
        if (bits & 1) {
            if (dup) {
                trace_spyre_irq_dup(v);
            } else {
                trace_spyre_irq(v);
            }
            msix_notify(pdev, v);
        }
    }
}

/*
 * BQL held, device lock not: send the vectors in *@pending (a field of
 * @s that is set with atomic ORs) and clear them.  No device lock: the
 * bottom half must not keep the BQL while it waits for a worker.
 */
static void spyre_irq_send_pending(SpyreState *s, uint64_t *pending,
                                   bool dup)
{
    spyre_irq_send(s, qatomic_xchg(pending, 0), dup);
}

/* The irq bottom half (main loop, BQL held): the moderated messages. */
void spyre_irq_bh(void *opaque)
{
    SpyreState *s = opaque;

    spyre_irq_send_pending(s, &s->irq_pending, false);
}

/*
 * BQL and device lock held.  Send the messages spyre_notify() left for
 * the caller (@direct ones: the doorbell executor's, a memory phase's
 * behind a vIOMMU), letting the device lock go meanwhile.
 */
void spyre_irq_flush(SpyreState *s)
{
    uint64_t bits = s->irq_now;

    if (!bits) {
        return;
    }
    assert(bql_locked());
    s->irq_now = 0;
    spyre_unlock(s);
    spyre_irq_send(s, bits, false);
    spyre_lock(s);
}

/*
 * Device lock held.  Raise MSI-X vector @v.  A caller that holds the BQL
 * and sends its messages itself when its access ends (@direct:
 * spyre_irq_flush()) sends it then, unless the same vector was raised
 * directly less than SPYRE_IRQ_MODERATE_NS ago.  Everything else goes
 * through the bottom half: the messages of a worker that holds no BQL
 * (a worker never waits for the BQL to send one), moderated ones, and
 * MMIO-side events.  Completions that follow in a burst merge there into
 * one message (the driver reads the completion record, which covers
 * every job up to its seqno).  The memory writes of a completion are
 * done before its message is queued, so the guest sees them first.
 */
void spyre_notify(SpyreState *s, unsigned int v, bool direct)
{
    int64_t now;

    if (v >= s->nvectors) {
        return;
    }
    if (direct && bql_locked() &&
        !(qatomic_read(&s->irq_pending) & BIT_ULL(v))) {
        now = spyre_now();
        if (now - s->irq_direct_ns[v] >= SPYRE_IRQ_MODERATE_NS) {
            s->irq_direct_ns[v] = now;
            s->irq_now |= BIT_ULL(v);
            return;
        }
    }
    qatomic_or(&s->irq_pending, BIT_ULL(v));
    qemu_bh_schedule(s->irq_bh);
}

/*
 * Device lock held.  DBG_DUP_IRQ: raise completion vector @v once more,
 * SPYRE_DUP_IRQ_NS of virtual time from now (so not while the VM is
 * stopped), as a message of its own that no moderation merges with the
 * one spyre_notify() just sent or queued.
 */
void spyre_notify_again(SpyreState *s, unsigned int v)
{
    if (v >= s->nvectors) {
        return;
    }
    qatomic_or(&s->dup_pending, BIT_ULL(v));
    timer_mod_anticipate(s->dup_timer,
                         qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                         SPYRE_DUP_IRQ_NS);
}

/* The dup_timer (main loop, BQL held): the second messages. */
void spyre_dup_irq_timer(void *opaque)
{
    SpyreState *s = opaque;

    spyre_irq_send_pending(s, &s->dup_pending, true);
}

/* Device lock held.  Latch @bits in IRQ_STATUS, raise the error vector. */
void spyre_raise_error(SpyreState *s, uint32_t bits, bool direct)
{
    s->irq_status |= bits;
    if (bits & s->irq_mask) {
        spyre_notify(s, SPYRE_ERROR_VECTOR, direct);
    }
}

/* ---- Queues: readiness, priorities and aging ---------------------------- */

/*
 * Device lock held (as for everything below unless it says otherwise).
 * Wake everyone: for rare events (enable, reset, VM state, unplug).
 */
void spyre_kick(SpyreState *s)
{
    s->sched_seq++;
    spyre_wake(s, s->idle_workers);
    qemu_cond_broadcast(&s->gang_cond);
    qemu_cond_broadcast(&s->run_cond);
}

/* Wake up to @n idle workers, the most recently idle first. */
void spyre_wake(SpyreState *s, uint32_t n)
{
    while (n-- && s->idle_workers) {
        s->waking++;
        qemu_cond_signal(&s->idle[--s->idle_workers]->wake);
    }
}

/* Idle workers: on the stack, or woken and not yet back (see above). */
static uint32_t spyre_idle_count(SpyreState *s)
{
    return s->idle_workers + s->waking;
}

/*
 * @w waits until spyre_wake() takes it off the idle stack, or for @ms
 * (the SEM_WAIT poller, which goes to the bottom: woken last).
 */
static void spyre_idle_wait(SpyreWorker *w, int ms)
{
    SpyreState *s = w->s;
    uint32_t i;

    if (ms) {
        memmove(&s->idle[1], &s->idle[0],
                s->idle_workers * sizeof(s->idle[0]));
        s->idle[0] = w;
        s->idle_workers++;
        qemu_cond_timedwait(&w->wake, &s->lock, ms);
    } else {
        s->idle[s->idle_workers++] = w;
        qemu_cond_wait(&w->wake, &s->lock);
    }
    for (i = 0; i < s->idle_workers; i++) {
        if (s->idle[i] == w) {
            /* Not woken (a timeout, or a spurious return): off it. */
            memmove(&s->idle[i], &s->idle[i + 1],
                    (s->idle_workers - i - 1) * sizeof(s->idle[0]));
            s->idle_workers--;
            return;
        }
    }
    s->waking--;
}

void spyre_set_job_state(SpyreState *s, SpyreQueue *q, uint32_t st)
{
    if (q->job_state == SPYRE_JOB_SEM_WAIT) {
        s->nparked--;
    }
    if (st == SPYRE_JOB_SEM_WAIT) {
        s->nparked++;
    }
    /*
     * TEL_ACTIVE_NS: the union of the jobs' spans, not their sum; the
     * spans are the ones TEL_BUSY_NS adds up (spyre_job_start() sets
     * start_ns first, spyre_end_job() end_ns), so ACTIVE <= BUSY holds
     * whenever no job is in progress.
     */
    if (q->job_state == SPYRE_JOB_NONE && st != SPYRE_JOB_NONE &&
        s->njobs++ == 0) {
        s->active_start = q->job.start_ns;
    } else if (q->job_state != SPYRE_JOB_NONE && st == SPYRE_JOB_NONE &&
               --s->njobs == 0) {
        uint64_t end = q->job.end_ns ? q->job.end_ns : spyre_clock(s);

        s->tel[SPYRE_TEL_ACTIVE_NS] += end > s->active_start ?
                                       end - s->active_start : 0;
    }
    q->job_state = st;
}

/* Status of a queue with no job in progress. */
uint32_t spyre_queue_rest_status(SpyreQueue *q)
{
    if (q->status == SPYRE_QS_ERROR) {
        return SPYRE_QS_ERROR;
    }
    return (q->control & SPYRE_Q_CONTROL_ENABLE) ? SPYRE_QS_IDLE :
                                                    SPYRE_QS_DISABLED;
}

static bool spyre_queue_ready(SpyreState *s, SpyreQueue *q, int64_t now,
                              bool *sem_waiters)
{
    switch (q->job_state) {
    case SPYRE_JOB_NONE:
        return q->status == SPYRE_QS_IDLE && q->head != q->tail;
    case SPYRE_JOB_SEM_WAIT:
        *sem_waiters = true;
        return q->sem_epoch != s->sem_epoch || now >= q->sem_poll_ns;
    case SPYRE_JOB_READY:
        return true;
    default:
        return false;
    }
}

/*
 * The ready queue of highest effective priority among those whose base
 * priority (or, with @aged, effective priority) is above @floor (-1: all),
 * round-robin among equals.  The effective priority is the base one plus
 * a level per age-ms the queue has been waiting, at most HIGH.
 */
static SpyreQueue *spyre_pick_queue(SpyreState *s, int floor, bool aged,
                                    int *eff_out, bool *sem_waiters)
{
    int64_t now = spyre_now();
    SpyreQueue *best = NULL;
    int best_eff = -1;
    uint32_t i, qi = s->rr_next;

    if (!(s->control & SPYRE_CONTROL_ENABLE)) {
        return NULL;
    }
    for (i = 0; i < s->nqueues; i++, qi = qi + 1 == s->nqueues ? 0 : qi + 1) {
        SpyreQueue *q = &s->queues[qi];
        int base, eff;

        if (!spyre_queue_ready(s, q, now, sem_waiters)) {
            continue;
        }
        base = SPYRE_Q_CONTROL_PRIO_GET(q->control);
        eff = base;
        if (s->age_ms && eff < SPYRE_Q_PRIO_HIGH && now > q->ready_ns) {
            eff = MIN(SPYRE_Q_PRIO_HIGH,
                      base + (now - q->ready_ns) /
                             ((int64_t)s->age_ms * SCALE_MS));
        }
        if (base <= floor && !(aged && eff > floor)) {
            continue;
        }
        if (eff > best_eff) {
            best = q;
            best_eff = eff;
        }
    }
    *eff_out = best_eff;
    return best;
}

/* The GEMM of highest priority above @floor with parts left to claim. */
static SpyreGang *spyre_pick_gang(SpyreState *s, int floor)
{
    SpyreGang *g, *best = NULL;

    QLIST_FOREACH(g, &s->gangs, link) {
        if (spyre_gang_open(g) && (int)g->prio > floor &&
            (!best || g->prio > best->prio)) {
            best = g;
        }
    }
    return best;
}

/* ---- A running job: time slices, pauses, preemption --------------------- */

/* Is the job of @e still wanted (no reset of its queue, no unplug)? */
bool spyre_e_alive(SpyreExec *e)
{
    return !e->s->stopping && e->q->gen == e->gen;
}

/* Time spent paused or preempted does not count against a command. */
static void spyre_e_extend(SpyreExec *e, int64_t ns)
{
    e->deadline += ns;
    if (e->part_gang) {
        e->part_gang->deadline += ns;
    }
}

/* Block while the VM is stopped; the time goes to @e's budget. */
void spyre_e_wait_running(SpyreExec *e)
{
    SpyreState *s = e->s;
    int64_t t0;

    if (s->vm_running || !spyre_e_alive(e)) {
        return;
    }
    t0 = spyre_now();
    while (spyre_e_alive(e) && !s->vm_running) {
        qemu_cond_wait(&s->run_cond, &s->lock);
    }
    e->w->lock_ns = spyre_now();
    spyre_e_extend(e, e->w->lock_ns - t0);
}

/*
 * Give the device lock up for a moment and come back.  Returns false if
 * the job must be dropped (its queue was reset, or the device is going
 * away).
 */
static bool spyre_e_yield(SpyreExec *e)
{
    spyre_unlock(e->s);
    g_thread_yield();       /* a plain unlock+lock can starve vCPUs */
    spyre_lock(e->s);
    e->w->lock_ns = spyre_now();
    spyre_e_wait_running(e);
    return spyre_e_alive(e);
}

/*
 * Run work on exec level @level of @w: a queue whose priority is above
 * @floor (-1: any), or with @aged whose effective priority is, or a part
 * of a GEMM or pieces of a copy batch whose priority is.  Returns false
 * if there was none.
 * *@sem_waiters (if not NULL) tells whether queues are parked in SEM_WAIT.
 */
static bool spyre_run_work(SpyreWorker *w, unsigned int level, int floor,
                           bool aged, bool *sem_waiters)
{
    SpyreState *s = w->s;
    bool dummy = false;
    SpyreCopySplit *c;
    SpyreKernel *k;
    SpyreQueue *q;
    SpyreGang *g;
    int eff = -1;

    if (s->stopping || !s->vm_running || s->fatal) {
        return false;
    }
    /* Copy batches first: their pieces are short, their owner waits. */
    c = spyre_pick_copy(s, floor);
    if (c) {
        spyre_copy_help(s, c);
        return true;
    }
    q = spyre_pick_queue(s, floor, aged, &eff,
                         sem_waiters ? sem_waiters : &dummy);
    g = spyre_pick_gang(s, floor);
    /* Start a job of at least the same priority before helping a GEMM. */
    if (g && (!q || (int)g->prio > eff)) {
        spyre_gang_help(&w->exec[level], g, floor);
        return true;
    }
    /* Or a KERNEL's chunks, likewise. */
    k = spyre_pick_kernel(s, floor, q ? eff : -1);
    if (k) {
        spyre_kernel_help(&w->exec[level], k, floor);
        return true;
    }
    if (q) {
        s->rr_next = q->id + 1 == s->nqueues ? 0 : q->id + 1;
        spyre_run_queue(&w->exec[level], q, floor);
        return true;
    }
    return false;
}

/*
 * At a tile or chunk boundary of @e's job: if a queue of a priority above
 * @e's floor is ready and no worker is idle to take it, run its job now on
 * this thread (nested), then come back.  The floor of a job is its own
 * priority, or the floor of the job it preempted if that is higher.  The
 * job a worker picked when idle (level 0) may also be preempted by a
 * queue whose *effective* (aged) priority is above its floor: a queue
 * waits for at most about age-ms plus a tile behind work of its own
 * or lower priority.  Floors never decrease along the nest and only the
 * first nesting may be by aging, hence SPYRE_MAX_NEST levels suffice for
 * any higher priority to get in.
 */
void spyre_e_preempt(SpyreExec *e)
{
    SpyreWorker *w = e->w;
    SpyreState *s = e->s;
    int64_t now, t0;

    /* An idle worker takes the work, unless it is the last (see above). */
    if (e->level + 1 >= SPYRE_MAX_NEST ||
        spyre_idle_count(s) > (s->nworkers > 1)) {
        return;
    }
    now = spyre_now();
    if (s->sched_seq == w->sched_seen && now - w->scan_ns < SPYRE_SCAN_NS) {
        return;
    }
    w->sched_seen = s->sched_seq;
    w->scan_ns = now;
    t0 = now;
    if (spyre_run_work(w, e->level + 1, e->floor, e->level == 0, NULL)) {
        trace_spyre_preempt(e->q->id, e->level, spyre_now() - t0);
        spyre_e_extend(e, spyre_now() - t0);
    }
}

/*
 * A tile or chunk boundary: share the device lock, honour pauses and
 * preemption.  @in_cmd: enforce the command's time budget.  Returns
 * SPYRE_STATUS_OK, SPYRE_STATUS_LIMIT or SPYRE_EXEC_DROPPED.
 */
uint32_t spyre_e_boundary(SpyreExec *e, bool in_cmd)
{
    spyre_e_wait_running(e);
    if (!e->w->doorbell &&
        spyre_now() - e->w->lock_ns >= SPYRE_LOCK_SLICE_NS &&
        !spyre_e_yield(e)) {
        return SPYRE_EXEC_DROPPED;
    }
    spyre_e_preempt(e);
    if (!spyre_e_alive(e)) {
        return SPYRE_EXEC_DROPPED;
    }
    if (in_cmd && spyre_now() > e->deadline) {
        return SPYRE_STATUS_LIMIT;
    }
    return SPYRE_STATUS_OK;
}

/* ---- Workers, the doorbell executor, VM run state ----------------------- */

/*
 * Main loop, BQL held: a worker thread has ended (or is about to return
 * from spyre_worker_thread()): join it and drop its reference, so that
 * the device is finalized here if it was the last.
 */
static void spyre_worker_reap(void *opaque)
{
    SpyreWorker *w = opaque;

    trace_spyre_life_worker_reap(w->index);
    qemu_thread_join(&w->thread);
    object_unref(OBJECT(w->s));
}

/*
 * A worker thread, entered with no lock held.  It holds a reference to
 * the device, which spyre_worker_reap() drops once the thread has ended
 * (see the lifetime rule in spyre.h).
 */
void *spyre_worker_thread(void *opaque)
{
    SpyreWorker *w = opaque;
    SpyreState *s = w->s;

    rcu_register_thread();
    spyre_lock(s);
    w->lock_ns = spyre_now();
    while (!s->stopping) {
        bool sem_waiters = false, poller;
        /*
         * The last free worker takes high-priority queues only: however
         * much other work is queued, one worker stays free for them.
         */
        int floor = s->nworkers > 1 && !spyre_idle_count(s) ?
                    SPYRE_Q_PRIO_NORMAL : -1;

        if (spyre_run_work(w, 0, floor, false, &sem_waiters)) {
            /* Back-to-back short jobs: share the device lock all the same. */
            if (spyre_now() - w->lock_ns >= SPYRE_LOCK_SLICE_NS) {
                spyre_unlock(s);
                g_thread_yield();
                spyre_lock(s);
                w->lock_ns = spyre_now();
            }
            continue;
        }
        /* One idle worker re-polls parked SEM_WAIT queues every 1 ms. */
        poller = sem_waiters && !s->sem_poller;
        if (poller) {
            s->sem_poller = true;
            spyre_idle_wait(w, SPYRE_SEM_POLL_MS);
            s->sem_poller = false;
        } else {
            spyre_idle_wait(w, 0);
        }
        w->lock_ns = spyre_now();
    }
    spyre_unlock(s);
    rcu_unregister_thread();
    trace_spyre_life_worker_end(w->index);
    /* Last: the bottom half may finalize the device, @w with it. */
    aio_bh_schedule_oneshot(qemu_get_aio_context(), spyre_worker_reap, w);
    return NULL;
}

/*
 * A doorbell write: run the jobs at HEAD of @q at once, on the vCPU that
 * wrote it, as long as they consist of short commands (NOP, TIMESTAMP,
 * SEM_WAIT, SEM_SIGNAL), for at most SPYRE_DB_BUDGET_CMDS of them; a job
 * with any other command goes to a worker whole, before its first command
 * runs (SPYRE_JOB_READY; spyre_run_queue() looks ahead), and one that
 * reaches the end of the budget goes on on a worker from there.  A
 * submit -> completion round trip of such jobs then costs no host thread
 * wake-up.  The executor runs with the BQL and the device lock held
 * throughout (its memory phases are the MMIO handler's) and takes no
 * worker from other queues.
 */
void spyre_db_run(SpyreState *s, SpyreQueue *q)
{
    SpyreWorker *w = s->db_worker;
    bool dummy;

    assert(bql_locked());
    w->db_budget = SPYRE_DB_BUDGET_CMDS;
    while (!s->stopping && s->vm_running && !s->fatal &&
           (s->control & SPYRE_CONTROL_ENABLE) &&
           q->job_state == SPYRE_JOB_NONE &&
           spyre_queue_ready(s, q, 0, &dummy) && w->db_budget) {
        w->lock_ns = spyre_now();
        spyre_run_queue(&w->exec[0], q, -1);
    }
    if (q->job_state != SPYRE_JOB_NONE ||
        (q->status == SPYRE_QS_IDLE && q->head != q->tail)) {
        spyre_wake(s, 1);               /* one idle worker is enough */
    }
}

/*
 * BQL held.  On a stop, the tiles in flight end first (no guest memory
 * is written after it) and the moderated interrupts are sent now rather
 * than left to the bottom half (so none is lost to migration); workers
 * wait at their next memory phase or boundary.
 */
void spyre_vm_state_change(void *opaque, bool running, RunState state)
{
    SpyreState *s = opaque;

    assert(bql_locked());
    spyre_lock(s);
    s->vm_running = running;
    if (running) {
        spyre_kick(s);
    } else {
        spyre_drain_tiles(s);
    }
    spyre_unlock(s);
    if (!running) {
        spyre_irq_send_pending(s, &s->irq_pending, false);
    }
}
