/*
 * Spyre card model: the KERNEL command
 *
 * Owns spyre_cmd_kernel(): the command's decode and checks in the
 * documented order, the program read once into the card's memory at
 * command start, and the run of the verified program (spyre-kernel.c):
 * the pointwise space cut into chunks of tiles that the job's worker and
 * idle workers claim (spyre_pick_kernel, spyre_kernel_help), each
 * running its chunks with a SpyreKRun of its own.  Guest memory is
 * reached through windows (up to SPYRE_KX_WINS pieces of host memory)
 * that stay mapped from one vector to the next until a boundary, all in
 * one data phase, counted as one tile in flight: the first window opens
 * it under the device lock, the next ones are translated and mapped in
 * it with no lock taken (while no drain, VM stop or reset is pending,
 * which nothing can complete while the tile counts); accesses
 * the windows cannot serve go through a data phase each, lane by lane
 * (the slow path, which also reports faults).  A boundary (pauses,
 * preemption, the time budget, resets; windows released first) comes
 * every SPYRE_KX_PERIOD_BYTES of memory or SPYRE_KX_PERIOD_NS, and at
 * the next vector whenever a drain, a VM stop or new work is pending.
 *
 * Locks: spyre_cmd_kernel() and spyre_kernel_help() are called with the
 * device lock held, as every command; they let it go while they verify
 * and compute.  The SpyreKIO callbacks are called with no lock held and
 * take the device lock (and their data phase) themselves.  A split's
 * fields are protected by the device lock; its launch and program are
 * read-only while chunks run.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "qemu/main-loop.h"
#include "trace.h"

#include "spyre.h"

/* Windows a part keeps mapped (the least recently used one replaced). */
#define SPYRE_KX_WINS           8
/*
 * A window that continues another (streaming) maps at least this much
 * (less at the operand's end); any other (a gathered run) only the pages
 * of the run asked for...
 */
#define SPYRE_KX_WIN_BYTES      SPYRE_TILE_BYTES
/* ... and at most this (a gather's range above it takes the slow path). */
#define SPYRE_KX_WIN_MAX        (1 * MiB)
/* Memory accessed, or time, between boundaries of a running chunk. */
#define SPYRE_KX_PERIOD_BYTES   (512 * KiB)
#define SPYRE_KX_PERIOD_NS      (500 * SCALE_US)
/* Iterations (points times max(R, 1)) per chunk, about. */
#define SPYRE_KX_CHUNK_ITERS    65536

/* A piece of an operand's memory mapped for the fast path. */
typedef struct SpyreKWin {
    uint64_t va;
    uint64_t len;
    SpyreMap m;
    uint64_t used;              /* SpyreKPart.win_clock at its last use */
    bool write;
} SpyreKWin;

/* What one exec needs to run chunks of a launch (its own or helped). */
typedef struct SpyreKPart {
    SpyreKernel *own;           /* the launch's owner */
    SpyreExec *e;               /* the exec running it */
    SpyreKRun run;
    SpyreKIO io;
    SpyreKWin win[SPYRE_KX_WINS];
    uint32_t nwin;
    uint64_t win_clock;         /* counts window uses */
    uint8_t hint[SPYRE_KERNEL_MAX_OPERANDS];    /* an operand's last window */
    /* Since the last boundary (the bytes: run.bytes_io). */
    int64_t period_ns;
    uint64_t period_seq;        /* SpyreState.sched_seq then */
    /* The fault of the last failed access, and the one reported. */
    uint64_t cand_va, win_va;
    uint32_t cand_reason, win_reason;
    bool cand_write, win_write;
} SpyreKPart;

struct SpyreKernel {
    SpyreExec *e;
    SpyreKLaunch l;
    SpyreKPart part;            /* this exec's, as owner or helper */
    /*
     * What @bytes were read from: the program's VA and size, the MMU
     * epoch and the job's write count before the read (spyre_kx_kept).
     */
    uint64_t rd_va;
    uint32_t rd_size;
    uint64_t rd_epoch, rd_writes;
    /*
     * The last program verified (a cache keyed by its full bytes, @vbytes,
     * and the launch fields the verifier reads): @vsize 0 when there is
     * none.
     */
    uint32_t vsize;
    uint32_t vsig[4];
    uint32_t vdtype[SPYRE_KERNEL_MAX_OPERANDS];
    /*
     * The launch's split (device lock): chunks of @chunk points, claimed
     * in order; registered in SpyreState.kernels while others may help.
     */
    QLIST_ENTRY(SpyreKernel) link;
    SpyreQueue *q;
    uint32_t gen;
    uint16_t ctx;
    uint32_t prio;
    int64_t deadline;
    uint64_t chunk;
    uint64_t nchunks;
    uint64_t next;
    uint32_t active;            /* chunks being run */
    uint32_t max_active;
    bool stop;                  /* no more claims: @hard or the budget */
    uint32_t hard;              /* a status that ended a chunk's run */
    /* The first failure in sequential order: the lowest chunk's. */
    uint64_t err_chunk;         /* UINT64_MAX while none */
    uint32_t err_st;
    uint64_t err_detail, err_detail2;
    uint64_t err_va;
    uint32_t err_reason;
    bool err_write;
    /*
     * The large buffers last, not zeroed (spyre_kx_new): their pages are
     * touched only as far as programs fill them, each field read only
     * after it is written (@rd_size and @vsize 0 until then; the verifier
     * sets every field of @prog it reads).
     */
    uint8_t bytes[SPYRE_KPROG_MAX];
    SpyreKProg prog;
    uint8_t vbytes[SPYRE_KPROG_MAX];
};

/*
 * A new SpyreKernel for an exec: the fields before @bytes zeroed, the
 * large buffers left to their first use (some 200 KiB: zeroing them
 * cost a page fault per page on an exec's first KERNEL).
 */
static SpyreKernel *spyre_kx_new(void)
{
    SpyreKernel *k = g_malloc(sizeof(*k));

    memset(k, 0, offsetof(SpyreKernel, bytes));
    return k;
}

/*
 * Device lock held.  Are @k's bytes still what @size bytes at @prog hold?
 * They are if the previous command of this job on @e was a KERNEL (NOPs
 * aside) that read them there, and since then no translation died and
 * the job wrote nothing: memory the job does not write can change under
 * it only unordered with its commands, unless a SEM_WAIT, a job start or
 * a resume comes between (each clears SpyreExec.kprog_kept).
 */
static bool spyre_kx_kept(SpyreExec *e, const SpyreKernel *k, uint64_t prog,
                          uint32_t size)
{
    return e->kprog_kept && k->rd_size == size && k->rd_va == prog &&
           k->rd_epoch == qatomic_read(&e->s->mmu_epoch) &&
           k->rd_writes == e->q->job.writes;
}

/* Is the program in k->bytes the last one verified, for this launch? */
static bool spyre_kx_cached(const SpyreKernel *k, uint32_t size)
{
    const SpyreKLaunch *l = &k->l;
    uint32_t sig[4] = { l->noperands, l->nparams, l->npdims, l->nrdims };

    return k->vsize == size && !memcmp(k->vsig, sig, sizeof(sig)) &&
           !memcmp(k->vdtype, l->dtype, l->noperands * sizeof(l->dtype[0])) &&
           !memcmp(k->vbytes, k->bytes, size);
}

static void spyre_kx_cache(SpyreKernel *k, uint32_t size)
{
    const SpyreKLaunch *l = &k->l;

    k->vsig[0] = l->noperands;
    k->vsig[1] = l->nparams;
    k->vsig[2] = l->npdims;
    k->vsig[3] = l->nrdims;
    memcpy(k->vdtype, l->dtype, l->noperands * sizeof(l->dtype[0]));
    memcpy(k->vbytes, k->bytes, size);
    k->vsize = size;
}

static inline uint16_t kld16(const uint8_t *p)
{
    return lduw_le_p(p);
}

static inline uint32_t kld32(const uint8_t *p)
{
    return ldl_le_p(p);
}

static inline uint64_t kld64(const uint8_t *p)
{
    return ldq_le_p(p);
}

/* No lock needed.  Unmap window @i of @k (the others stay: the phase too). */
static void spyre_kx_win_drop(SpyreKPart *k, uint32_t i)
{
    spyre_map_release(k->e->s, &k->win[i].m, k->win[i].write);
    k->win[i] = k->win[--k->nwin];
}

/* Device lock held.  Let every window of @k go, and the tile they count. */
static void spyre_kx_win_put_all(SpyreKPart *k)
{
    if (!k->nwin) {
        return;
    }
    while (k->nwin) {
        spyre_kx_win_drop(k, k->nwin - 1);
    }
    spyre_tile_put(k->e->s);
}

/*
 * Device lock held, before a data phase.  A phase may wait for a drain,
 * the VM or (behind a vIOMMU) the BQL, any of which may be waiting for
 * the tiles our windows count: let them go first.
 */
static void spyre_kx_unhold(SpyreKPart *k)
{
    SpyreState *s = k->e->s;

    if (s->draining || !s->vm_running || s->dma_bql) {
        spyre_kx_win_put_all(k);
    }
}

/*
 * SpyreKIO.access, no lock held: the active lanes' elements, in lane
 * order, in one data phase.  Device memory is reached through the BAR's
 * host pointer (one translation per page), system memory by DMA.
 */
static uint32_t spyre_kx_access(void *opaque, unsigned int opnd, bool write,
                                const int64_t *off, const uint8_t *act,
                                uint32_t n, void *buf, uint32_t *lane)
{
    SpyreKPart *k = opaque;
    SpyreExec *e = k->e;
    SpyreState *s = e->s;
    size_t es = spyre_cmd_dtype_size(k->own->l.dtype[opnd]);
    uint64_t base = k->own->l.va[opnd], page = 1, bytes = 0;
    uint64_t dlo = UINT64_MAX, dhi = 0;
    uint8_t *p = buf;
    SpyreTarget t = { 0 };
    uint32_t st, j, next;
    bool alive;

    spyre_lock(s);
    e->w->lock_ns = spyre_now();
    spyre_kx_unhold(k);
    st = spyre_e_data_begin(e);
    if (st != SPYRE_STATUS_OK) {
        spyre_unlock(s);
        return st;
    }
    for (j = 0; j < n; j = next) {
        uint64_t va, addr, len;
        uint32_t i;

        next = j + 1;
        if (!act[j]) {
            continue;
        }
        va = base + (uint64_t)off[j] * es;
        if ((va & ~SPYRE_PAGE_MASK) != page) {
            if (dlo < dhi) {
                memory_region_set_dirty(&s->devmem, dlo, dhi - dlo);
                dlo = UINT64_MAX;
                dhi = 0;
            }
            st = spyre_e_translate(e, va, write, &t);
            if (st != SPYRE_STATUS_OK) {
                k->cand_va = e->err_va;
                k->cand_reason = e->fault_reason;
                k->cand_write = write;
                *lane = j;
                break;
            }
            t.addr &= ~SPYRE_PAGE_MASK;
            page = va & ~SPYRE_PAGE_MASK;
        }
        addr = t.addr + (va & SPYRE_PAGE_MASK);
        /* The active lanes from j at consecutive offsets in this page. */
        len = es;
        while (next < n && act[next] &&
               (uint64_t)off[next] == (uint64_t)off[next - 1] + 1 &&
               (va & SPYRE_PAGE_MASK) + len + es <= SPYRE_PAGE_SIZE) {
            len += es;
            next++;
        }
        if (t.devmem) {
            if (write) {
                memcpy(s->devmem_ptr + addr, p + j * es, len);
                dlo = MIN(dlo, addr);
                dhi = MAX(dhi, addr + len);
            } else {
                memcpy(p + j * es, s->devmem_ptr + addr, len);
            }
        } else if (spyre_dma_rw(s, addr, p + j * es, len,
                                write ? DMA_DIRECTION_FROM_DEVICE :
                                        DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
            /* Lane by lane, to find the one that fails. */
            for (i = j; i < next; i++) {
                if (spyre_dma_rw(s, addr + (i - j) * es, p + i * es, es,
                                 write ? DMA_DIRECTION_FROM_DEVICE :
                                         DMA_DIRECTION_TO_DEVICE) !=
                    MEMTX_OK) {
                    break;
                }
            }
            bytes += (i - j) * es;
            if (i < next) {
                va += (i - j) * es;
                st = SPYRE_STATUS_DMA_ERROR;
                e->err_va = va;
                k->cand_va = va;
                k->cand_reason = 0;
                k->cand_write = write;
                *lane = i;
                break;
            }
            continue;
        }
        bytes += len;
    }
    if (dlo < dhi) {
        memory_region_set_dirty(&s->devmem, dlo, dhi - dlo);
    }
    e->io_bytes += bytes;
    e->io_writes += write && bytes;
    spyre_e_data_unlock(e);
    spyre_e_data_end(e);
    alive = spyre_e_alive(e);
    spyre_unlock(s);
    return alive ? st : SPYRE_EXEC_DROPPED;
}

static void spyre_kx_keep_fault(void *opaque)
{
    SpyreKPart *k = opaque;

    k->win_va = k->cand_va;
    k->win_reason = k->cand_reason;
    k->win_write = k->cand_write;
}

/*
 * No lock held.  Release every window and add what the fast path
 * accessed to the job's counts; returns with the device lock.
 */
static void spyre_kx_release(SpyreKPart *k)
{
    SpyreExec *e = k->e;

    spyre_lock(e->s);
    e->w->lock_ns = spyre_now();
    spyre_kx_win_put_all(k);
    e->io_bytes += k->run.bytes_io;
    e->io_writes += k->run.stores;
    k->run.bytes_io = k->run.stores = 0;
    spyre_e_fold(e);
}

/*
 * No lock held.  Map a window of operand memory at @va for at least
 * @want bytes (up to @end) in the windows' data phase: with no lock
 * while the windows hold it and nothing waits for it to end, else in a
 * new one (the windows let go first).  The window is SPYRE_KX_WIN_BYTES
 * or more if @stream (it continues a window: memory read or written in
 * order), else the pages that @want touches (a gathered run: its
 * neighbours are not likely next, and a single page translates through
 * the TLB).  Returns false if it cannot be mapped now (the slow path
 * then reports why).
 */
static bool spyre_kx_win_map(SpyreKPart *k, uint64_t va, uint64_t want,
                             uint64_t end, bool write, bool stream)
{
    SpyreExec *e = k->e;
    SpyreState *s = e->s;
    uint64_t len = stream ? MAX(want, SPYRE_KX_WIN_BYTES) :
                   ROUND_UP(va + want, SPYRE_PAGE_SIZE) - va, run = 0;
    SpyreKWin *w;
    SpyreTarget t;
    uint32_t st, i, old = 0;
    bool ok;

    if (want > SPYRE_KX_WIN_MAX) {
        return false;
    }
    len = MIN(len, end - va);
    if (k->nwin && !s->dma_bql && !qatomic_read(&s->draining) &&
        qatomic_read(&s->vm_running) &&
        qatomic_read(&e->q->gen) == e->gen) {
        /* In the windows' phase: no lock (a drain waits for its end). */
        if (k->nwin == SPYRE_KX_WINS) {
            for (i = 1; i < k->nwin; i++) {
                if (k->win[i].used < k->win[old].used) {
                    old = i;
                }
            }
            spyre_kx_win_drop(k, old);
        }
        w = &k->win[k->nwin];
        if (spyre_e_translate_run(e, va, len, write, &t, &run) !=
            SPYRE_STATUS_OK || !spyre_map_target(s, &t, &run, write, &w->m)) {
            return false;
        }
    } else {
        spyre_lock(s);
        e->w->lock_ns = spyre_now();
        spyre_kx_win_put_all(k);
        st = spyre_e_data_begin(e);
        if (st != SPYRE_STATUS_OK) {
            spyre_unlock(s);
            return false;
        }
        w = &k->win[k->nwin];
        ok = spyre_e_translate_run(e, va, len, write, &t, &run) ==
             SPYRE_STATUS_OK && spyre_map_target(s, &t, &run, write, &w->m);
        spyre_e_data_unlock(e);
        if (!ok) {
            spyre_e_data_end(e);
            spyre_unlock(s);
            return false;
        }
    }
    w->va = va;
    w->len = run;
    w->write = write;
    w->used = ++k->win_clock;
    k->nwin++;
    return true;
}

/*
 * The host address of @va in window @i of @k if it serves it (for
 * writing if @write), with *@n cut to the elements of @es bytes it
 * holds from there; else NULL.
 */
static inline uint8_t *spyre_kx_win_hit(SpyreKPart *k, uint32_t i,
                                        uint64_t va, uint64_t es, bool write,
                                        uint64_t *n)
{
    SpyreKWin *w = &k->win[i];
    uint64_t avail;

    if (va < w->va || va - w->va >= w->len || (write && !w->write)) {
        return NULL;
    }
    avail = (w->len - (va - w->va)) / es;
    if (!avail) {
        return NULL;
    }
    *n = MIN(*n, avail);
    w->used = ++k->win_clock;
    return w->m.host + (va - w->va);
}

/*
 * SpyreKIO.map, no lock held: the window that served operand @opnd last
 * first, then the others, then a new one.
 */
static uint8_t *spyre_kx_map(void *opaque, unsigned int opnd, bool write,
                             uint64_t off, uint64_t *n)
{
    SpyreKPart *k = opaque;
    const SpyreKLaunch *l = &k->own->l;
    uint64_t es = spyre_cmd_dtype_size(l->dtype[opnd]);
    uint64_t va = l->va[opnd] + off * es;
    uint64_t end = l->va[opnd] + l->extent[opnd] * es;
    uint32_t i = k->hint[opnd];
    bool stream = false;
    uint8_t *p = NULL;

    if (i < k->nwin) {
        p = spyre_kx_win_hit(k, i, va, es, write, n);
    }
    if (p) {
        return p;
    }
    for (i = 0; i < k->nwin; i++) {
        stream |= va == k->win[i].va + k->win[i].len;
        p = spyre_kx_win_hit(k, i, va, es, write, n);
        if (p) {
            k->hint[opnd] = i;
            return p;
        }
    }
    if (!spyre_kx_win_map(k, va, *n * es, end, write, stream)) {
        return NULL;
    }
    k->hint[opnd] = k->nwin - 1;
    return spyre_kx_win_hit(k, k->nwin - 1, va, es, write, n);
}

/*
 * SpyreKIO.boundary, no lock held: every SPYRE_KX_PERIOD_* (or at once
 * if a drain, a VM stop or new work waits), the windows go and the job
 * meets a boundary (spyre_e_boundary).
 */
static uint32_t spyre_kx_boundary(void *opaque)
{
    SpyreKPart *k = opaque;
    SpyreExec *e = k->e;
    SpyreState *s = e->s;
    int64_t now = spyre_now();
    uint32_t st;

    if (k->run.bytes_io < SPYRE_KX_PERIOD_BYTES &&
        now - k->period_ns < SPYRE_KX_PERIOD_NS &&
        !qatomic_read(&s->draining) && qatomic_read(&s->vm_running) &&
        qatomic_read(&s->sched_seq) == k->period_seq &&
        qatomic_read(&e->q->gen) == e->gen) {
        return SPYRE_STATUS_OK;
    }
    spyre_kx_release(k);
    st = spyre_e_boundary(e, true);
    k->period_ns = spyre_now();
    k->period_seq = s->sched_seq;
    spyre_unlock(s);
    return st;
}

/* Decode and check the command (steps 1-3 of the documented order). */
static uint32_t spyre_kx_decode(SpyreExec *e, SpyreKLaunch *l,
                                uint64_t *prog, uint32_t *prog_size)
{
    const uint8_t *c = e->cmd.raw;
    uint32_t size = kld32(c + 4), i;
    uint64_t v, iters;

    memset(l, 0, sizeof(*l));
    *prog = kld64(c + 8);
    *prog_size = kld32(c + 16);
    l->noperands = kld16(c + 20);
    l->nparams = kld16(c + 22);
    l->npdims = kld16(c + 24);
    l->nrdims = kld16(c + 26);
    if (kld16(c + 2) || kld32(c + 28) ||
        l->noperands > SPYRE_KERNEL_MAX_OPERANDS ||
        l->nparams > SPYRE_KERNEL_MAX_PARAMS ||
        l->npdims > SPYRE_KERNEL_MAX_PDIMS ||
        l->nrdims > SPYRE_KERNEL_MAX_RDIMS ||
        size != SPYRE_CMD_KERNEL_SIZE(l->noperands, l->nparams)) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    for (i = 0; i < l->nparams; i++) {
        l->param[i] = kld64(c + SPYRE_CMD_KERNEL_SIZE(l->noperands, 0) +
                            8 * i);
    }
    for (i = 0; i < 9; i++) {
        bool used = i < 6 ? i < l->npdims : i - 6 < l->nrdims;

        v = kld64(c + 32 + 8 * i);
        if (!used ? v != 0 :
            (v >> 63) && ((v & ~(SPYRE_KSIZE_PARAM(0) | 0x3f)) ||
                          (v & 0x3f) >= l->nparams)) {
            return SPYRE_STATUS_INVALID_COMMAND;
        }
        l->size[i] = (v >> 63) ? l->param[v & 0x3f] : v;
    }
    for (i = 0; i < l->noperands; i++) {
        if (kld32(c + 104 + 24 * i + 20)) {
            return SPYRE_STATUS_INVALID_COMMAND;
        }
    }
    for (i = 0; i < l->noperands; i++) {
        const uint8_t *o = c + 104 + 24 * i;
        uint32_t es;

        l->va[i] = kld64(o);
        l->extent[i] = kld64(o + 8);
        l->dtype[i] = kld32(o + 16);
        es = spyre_cmd_dtype_size(l->dtype[i]);
        if (!es || l->va[i] % es || l->extent[i] > UINT64_MAX / es ||
            spyre_span_wraps(l->va[i], l->extent[i] * es)) {
            return SPYRE_STATUS_INVALID_OPERAND;
        }
    }
    l->P = l->R = 1;
    for (i = 0; i < l->npdims; i++) {
        if (__builtin_mul_overflow(l->P, l->size[i], &l->P)) {
            return SPYRE_STATUS_LIMIT;
        }
    }
    for (i = 0; i < l->nrdims; i++) {
        if (__builtin_mul_overflow(l->R, l->size[6 + i], &l->R)) {
            return SPYRE_STATUS_LIMIT;
        }
    }
    if (__builtin_mul_overflow(l->P, MAX(l->R, 1), &iters) ||
        iters > SPYRE_KERNEL_MAX_ITERS) {
        return SPYRE_STATUS_LIMIT;
    }
    return SPYRE_STATUS_OK;
}

/* Does a kernel store to an operand it loads or that meets another? */
static bool spyre_kx_restartable(const SpyreKLaunch *l, const SpyreKProg *p)
{
    unsigned int i, j;

    if (p->loaded & p->stored) {
        return false;
    }
    for (i = 0; i < l->noperands; i++) {
        uint64_t ilen = l->extent[i] * spyre_cmd_dtype_size(l->dtype[i]);

        if (!(p->stored & (1u << i))) {
            continue;
        }
        for (j = 0; j < l->noperands; j++) {
            if (j != i &&
                spyre_spans_meet(l->va[i], ilen, l->va[j], l->extent[j] *
                                 spyre_cmd_dtype_size(l->dtype[j]))) {
                return false;
            }
        }
    }
    return true;
}

/* Device lock held.  May a worker claim a chunk of @k now? */
static bool spyre_kx_open(const SpyreKernel *k)
{
    return !k->stop && k->next < k->nchunks && k->next < k->err_chunk &&
           k->active < k->max_active;
}

/*
 * Device lock held.  Run chunk @c of @own's launch on @e (the owner's
 * exec or a helper's), with no lock held while it computes.  Returns
 * a status that ends the command (SPYRE_STATUS_OK if none: a failure in
 * the program's sequential order goes to @own's err_* fields).
 */
static uint32_t spyre_kx_chunk(SpyreExec *e, SpyreKernel *own, uint64_t c)
{
    SpyreState *s = e->s;
    SpyreKPart *k = &e->kernel->part;
    uint64_t pt = c * own->chunk, end = MIN(own->l.P, pt + own->chunk);
    uint32_t st = SPYRE_STATUS_OK;

    k->own = own;
    k->e = e;
    k->io = (SpyreKIO) {
        .opaque = k,
        .map = spyre_kx_map,
        .access = spyre_kx_access,
        .keep_fault = spyre_kx_keep_fault,
        .boundary = spyre_kx_boundary,
    };
    k->period_ns = spyre_now();
    k->period_seq = s->sched_seq;
    spyre_unlock(s);
    if (!spyre_kernel_prepare(&k->run, &own->prog, &own->l, &k->io)) {
        st = SPYRE_STATUS_INTERNAL;
    }
    k->run.bytes_io = k->run.stores = 0;
    for (; st == SPYRE_STATUS_OK && pt < end; pt += k->run.tile) {
        assert(own->chunk % k->run.tile == 0);
        st = spyre_kernel_tile(&k->run, pt);
        if (st != SPYRE_STATUS_OK || k->run.status) {
            break;
        }
        if (pt + k->run.tile < end) {
            st = spyre_kx_boundary(k);
        }
    }
    spyre_kx_release(k);
    if (!spyre_e_alive(e)) {
        return SPYRE_EXEC_DROPPED;
    }
    if (st == SPYRE_STATUS_OK && k->run.status && c < own->err_chunk) {
        own->err_chunk = c;
        own->err_st = k->run.status;
        own->err_detail = k->run.detail;
        own->err_detail2 = k->run.detail2;
        own->err_va = k->win_va;
        own->err_reason = k->win_reason;
        own->err_write = k->win_write;
    }
    return st;
}

/* Device lock held.  Chunk @c of @k ended with @st. */
static void spyre_kx_chunk_done(SpyreKernel *k, uint32_t st)
{
    k->active--;
    if (st != SPYRE_STATUS_OK) {
        k->stop = true;
        if (!k->hard || st == SPYRE_EXEC_DROPPED) {
            k->hard = st;
        }
    }
    if (k->max_active > 1) {
        qemu_cond_broadcast(&k->e->s->gang_cond);
    }
}

SpyreKernel *spyre_pick_kernel(SpyreState *s, int floor, int eff)
{
    SpyreKernel *k, *best = NULL;

    QLIST_FOREACH(k, &s->kernels, link) {
        if (spyre_kx_open(k) && (int)k->prio > MAX(floor, eff) &&
            (!best || k->prio > best->prio)) {
            best = k;
        }
    }
    return best;
}

/* An idle (or preempting) worker runs one chunk of someone's KERNEL. */
void spyre_kernel_help(SpyreExec *e, SpyreKernel *own, int floor)
{
    uint64_t c;
    uint32_t st;

    if (!spyre_kx_open(own)) {
        return;
    }
    c = own->next++;
    own->active++;
    if (!e->kernel) {
        e->kernel = spyre_kx_new();
    }
    e->kernel->e = e;
    e->q = own->q;
    e->gen = own->gen;
    e->ctx = own->ctx;
    e->prio = own->prio;
    e->floor = MAX((int)own->prio, floor);
    e->deadline = own->deadline;
    e->err_va = 0;
    e->fault_reason = 0;
    st = spyre_kx_chunk(e, own, c);
    spyre_kx_chunk_done(own, st);
}

uint32_t spyre_cmd_kernel(SpyreExec *e)
{
    SpyreState *s = e->s;
    SpyreJob *job = &e->q->job;
    SpyreKernel *k;
    uint64_t prog, detail;
    uint32_t prog_size, st;

    if (!e->kernel) {
        e->kernel = spyre_kx_new();
    }
    k = e->kernel;
    k->e = e;
    st = spyre_kx_decode(e, &k->l, &prog, &prog_size);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }

    /* 4: the program, read once (or still in hand: spyre_kx_kept). */
    if (prog % 8 || prog_size < 64 || (prog_size - 64) % 16 ||
        prog_size > SPYRE_KPROG_MAX) {
        job->detail = (uint64_t)SPYRE_KERR_HEADER << 32 | SPYRE_KINST_HEADER;
        return SPYRE_STATUS_BAD_PROGRAM;
    }
    if (!spyre_kx_kept(e, k, prog, prog_size)) {
        e->kprog_kept = false;
        k->rd_va = prog;
        k->rd_size = prog_size;
        k->rd_epoch = qatomic_read(&s->mmu_epoch);
        k->rd_writes = job->writes;
        st = spyre_e_rw_phase(e, prog, k->bytes, prog_size, false);
        if (st == SPYRE_STATUS_MMU_FAULT || st == SPYRE_STATUS_DMA_ERROR) {
            job->detail = (uint64_t)SPYRE_KINST_HEADER << 32 |
                          SPYRE_KOPERAND_PROGRAM;
            job->detail2 = e->err_va - prog;
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        e->kprog_kept = true;
    }

    /* 5: verify, with no lock held (a program just verified is kept). */
    if (!spyre_kx_cached(k, prog_size)) {
        k->vsize = 0;
        spyre_unlock(s);
        st = spyre_kernel_verify(&k->prog, k->bytes, prog_size, &k->l,
                                 &detail);
        spyre_lock(s);
        e->w->lock_ns = spyre_now();
        if (st != SPYRE_STATUS_OK) {
            job->detail = detail;
            return st;
        }
        spyre_kx_cache(k, prog_size);
    }
    trace_spyre_kernel(e->q->id, k->prog.ninsts, k->l.P, k->l.R);
    job->restartable = spyre_kx_restartable(&k->l, &k->prog);
    if (!k->l.P || !k->prog.ninsts) {
        return SPYRE_STATUS_OK;     /* nothing runs */
    }
    /*
     * 6: run, in chunks of whole tiles (the tile depends on the program
     * and the launch only), claimed in order by this worker and, for
     * large launches, idle ones (spyre_kernel_help).
     */
    k->part.own = k;
    k->part.e = e;
    if (!spyre_kernel_prepare(&k->part.run, &k->prog, &k->l, &k->part.io)) {
        return SPYRE_STATUS_INTERNAL;
    }
    k->chunk = k->part.run.tile *
               MAX(1, SPYRE_KX_CHUNK_ITERS /
                      (k->part.run.tile * MAX(k->l.R, 1)));
    k->nchunks = k->l.P / k->chunk + (k->l.P % k->chunk != 0);
    k->next = 0;
    k->active = 0;
    k->stop = false;
    k->hard = SPYRE_STATUS_OK;
    k->err_chunk = UINT64_MAX;
    k->q = e->q;
    k->gen = e->gen;
    k->ctx = e->ctx;
    k->prio = e->prio;
    k->deadline = e->deadline;
    k->max_active = MIN(MIN(s->ncores, s->nworkers), s->host_cpus);
    if (k->nchunks < 2 || k->prog.scattered) {
        /* A SCATTER's lanes go in sequential order: one core, in order. */
        k->max_active = 1;
    }
    if (k->max_active > 1) {
        QLIST_INSERT_HEAD(&s->kernels, k, link);
        s->sched_seq++;
        spyre_wake(s, MIN(k->nchunks, k->max_active) - 1);
    }
    for (;;) {
        if (spyre_kx_open(k)) {
            uint64_t c = k->next++;

            k->active++;
            spyre_kx_chunk_done(k, spyre_kx_chunk(e, k, c));
            continue;
        }
        if (!k->active) {
            break;
        }
        /* Helpers run the last chunks; they stop soon after a reset. */
        qemu_cond_timedwait(&s->gang_cond, &s->lock, 10);
        e->w->lock_ns = spyre_now();
        spyre_e_wait_running(e);
        if (!spyre_e_alive(e)) {
            k->stop = true;
        } else if (spyre_now() > e->deadline && !k->hard) {
            k->stop = true;
            k->hard = SPYRE_STATUS_LIMIT;
        }
    }
    if (k->max_active > 1) {
        QLIST_REMOVE(k, link);
    }
    if (!spyre_e_alive(e) || k->hard == SPYRE_EXEC_DROPPED) {
        return SPYRE_EXEC_DROPPED;
    }
    if (k->hard != SPYRE_STATUS_OK) {
        return k->hard;
    }
    st = k->err_chunk == UINT64_MAX ? SPYRE_STATUS_OK : k->err_st;
    if (st) {
        job->detail = k->err_detail;
        job->detail2 = k->err_detail2;
        e->err_va = 0;
        e->fault_reason = 0;
        if (st == SPYRE_STATUS_MMU_FAULT || st == SPYRE_STATUS_DMA_ERROR) {
            e->err_va = k->err_va;
            e->fault_reason = st == SPYRE_STATUS_MMU_FAULT ? k->err_reason :
                                                            0;
            e->fault_write = k->err_write;
        }
    }
    return st;
}

void spyre_kernel_exec_free(SpyreExec *e)
{
    if (e->kernel) {
        spyre_kernel_free(&e->kernel->part.run);
        g_free(e->kernel);
        e->kernel = NULL;
    }
}
