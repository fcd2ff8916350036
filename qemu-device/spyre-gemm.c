/*
 * Spyre card model: the GEMM command
 *
 * Owns spyre_cmd_gemm(): byte order and validation, the split of a large
 * GEMM into parts (a SpyreGang registered in SpyreState.gangs) that the
 * owner and idle workers run in parallel, each part stepped one K block
 * at a time by spyre-math.c, and the operand I/O callbacks of those steps.
 *
 * Locks: spyre_cmd_gemm(), spyre_gang_help(), spyre_gemm_part() and the
 * gang bookkeeping run with the device lock held; spyre_gemm_part()
 * releases it around each spyre_gemm_step(), which computes on private
 * buffers.  The SpyreGemmIO callbacks (spyre_part_read/write ->
 * spyre_part_rows) are called with no lock held: each batch of operand
 * rows is mapped in a memory phase and copied as a tile with no lock
 * held.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <math.h>
#include "qemu/main-loop.h"
#include "trace.h"

#include "spyre.h"

/*
 * GEMM parts: at least about 1 ms of single-core host BLAS (64 GMAC/s),
 * well above the cost of waking a worker, and at most about 4 ms, so that
 * helpers come back to the scheduler often.
 */
#define SPYRE_GANG_MIN_MACS     (1ULL << 26)
#define SPYRE_GANG_MAX_MACS     (1ULL << 28)
#define SPYRE_GANG_MAX_PARTS    65536

bool spyre_gang_open(const SpyreGang *g)
{
    return !g->stop && g->err_part == SPYRE_NO_PART &&
           g->next < g->nparts && g->active < g->max_active;
}

static void spyre_gemm_to_host(struct spyre_cmd_gemm *h,
                               const struct spyre_cmd_gemm *g)
{
    memset(h, 0, sizeof(*h));
    h->hdr.opcode = le16_to_cpu(g->hdr.opcode);
    h->hdr.flags = le16_to_cpu(g->hdr.flags);
    h->hdr.size = le32_to_cpu(g->hdr.size);
    h->a_dtype = le32_to_cpu(g->a_dtype);
    h->b_dtype = le32_to_cpu(g->b_dtype);
    h->c_dtype = le32_to_cpu(g->c_dtype);
    h->bias_dtype = le32_to_cpu(g->bias_dtype);
    h->m = le32_to_cpu(g->m);
    h->n = le32_to_cpu(g->n);
    h->k = le32_to_cpu(g->k);
    h->batch = le32_to_cpu(g->batch);
    h->a = le64_to_cpu(g->a);
    h->b = le64_to_cpu(g->b);
    h->c = le64_to_cpu(g->c);
    h->lda = le64_to_cpu(g->lda);
    h->ldb = le64_to_cpu(g->ldb);
    h->ldc = le64_to_cpu(g->ldc);
    h->stride_a = le64_to_cpu(g->stride_a);
    h->stride_b = le64_to_cpu(g->stride_b);
    h->stride_c = le64_to_cpu(g->stride_c);
    h->alpha = le32_to_cpu(g->alpha);
    h->beta = le32_to_cpu(g->beta);
    h->scale_a = le64_to_cpu(g->scale_a);
    h->scale_b = le64_to_cpu(g->scale_b);
    h->bias = le64_to_cpu(g->bias);
    h->amax = le64_to_cpu(g->amax);
}

/*
 * How to split @g's GEMM into parts: none below 2 * SPYRE_GANG_MIN_MACS,
 * else enough parts for min(cores, workers, host CPUs) cores to share and
 * none above SPYRE_GANG_MAX_MACS (as far as the shape allows); whole
 * batches when there are enough of them, else one matrix per part cut into
 * the grid of M x N blocks (at least 16 x 16) that fetches the fewest
 * operand elements.  At most that many parts run at once: more threads of
 * arithmetic than the host has CPUs only thrash its caches.
 */
static void spyre_gang_split(SpyreState *s, SpyreGang *g)
{
    const struct spyre_cmd_gemm *c = &g->cmd;
    uint64_t macs = (uint64_t)c->batch * c->m * c->n * c->k;
    uint64_t cost, best_cost = UINT64_MAX, r, pm, pn, best_pm = 1;
    uint64_t best_pn = 1, target;

    g->max_active = MIN(MIN(s->ncores, s->nworkers), s->host_cpus);
    g->bsz = c->batch;
    g->msz = c->m;
    g->nsz = c->n;
    g->pm = g->pn = 1;
    g->nparts = 1;
    if (g->max_active < 2) {
        return;             /* one core: K-block steps are preemptible */
    }
    target = MAX(MIN(g->max_active, macs / SPYRE_GANG_MIN_MACS),
                 DIV_ROUND_UP(macs, SPYRE_GANG_MAX_MACS));
    target = MIN(target, SPYRE_GANG_MAX_PARTS);
    if (target <= 1) {
        return;
    }
    if (c->batch >= target) {
        g->bsz = DIV_ROUND_UP(c->batch, target);
        g->nparts = DIV_ROUND_UP(c->batch, g->bsz);
        return;
    }
    g->bsz = 1;
    r = DIV_ROUND_UP(target, c->batch);
    for (pm = 1; pm <= r; pm++) {
        pn = DIV_ROUND_UP(r, pm);
        if ((pm > 1 && c->m / pm < 16) || (pn > 1 && c->n / pn < 16)) {
            continue;
        }
        /* Ties go to more M blocks: whole rows are fewer, longer segments. */
        cost = pn * c->m * c->k + pm * c->k * c->n;
        if (cost <= best_cost) {
            best_cost = cost;
            best_pm = pm;
            best_pn = pn;
        }
    }
    g->msz = MIN(c->m, ROUND_UP(DIV_ROUND_UP((uint64_t)c->m, best_pm), 8));
    g->nsz = MIN(c->n, ROUND_UP(DIV_ROUND_UP((uint64_t)c->n, best_pn), 16));
    g->pm = DIV_ROUND_UP(c->m, g->msz);
    g->pn = DIV_ROUND_UP(c->n, g->nsz);
    g->nparts = c->batch * g->pm * g->pn;
}

/* Part @idx of @g as a GEMM command of its own (host byte order). */
static void spyre_gang_part_cmd(const SpyreGang *g, uint32_t idx,
                                struct spyre_cmd_gemm *sub)
{
    const struct spyre_cmd_gemm *c = &g->cmd;
    bool ta = c->hdr.flags & SPYRE_GEMM_F_TRANS_A;
    bool tb = c->hdr.flags & SPYRE_GEMM_F_TRANS_B;
    uint64_t b0 = (uint64_t)(idx / (g->pm * g->pn)) * g->bsz;
    uint64_t m0 = (uint64_t)(idx / g->pn % g->pm) * g->msz;
    uint64_t n0 = (uint64_t)(idx % g->pn) * g->nsz;

    *sub = *c;
    sub->batch = MIN(g->bsz, c->batch - b0);
    sub->m = MIN(g->msz, c->m - m0);
    sub->n = MIN(g->nsz, c->n - n0);
    sub->a = c->a + (b0 * c->stride_a + (ta ? m0 : m0 * c->lda)) *
                    spyre_math_dtype_size(c->a_dtype);
    sub->b = c->b + (b0 * c->stride_b + (tb ? n0 * c->ldb : n0)) *
                    spyre_math_dtype_size(c->b_dtype);
    sub->c = c->c + (b0 * c->stride_c + m0 * c->ldc + n0) *
                    spyre_math_dtype_size(c->c_dtype);
    if (c->bias_dtype && c->a_dtype != SPYRE_DTYPE_INT8) {
        sub->bias = c->bias + n0 * spyre_math_dtype_size(c->bias_dtype);
    }
    sub->amax = 0;
}

/*
 * No lock held.  Enter a data phase for operand I/O of the GEMM part @e
 * runs: SPYRE_STATUS_OK holding the phase's locks, or (with the device
 * lock only) SPYRE_EXEC_DROPPED (queue reset) or SPYRE_EXEC_STOP (the
 * part is no longer needed).
 */
static uint32_t spyre_part_phase(SpyreExec *e)
{
    SpyreGang *g = e->part_gang;

    spyre_lock(e->s);
    if (g->stop || g->err_part < e->part_idx) {
        return SPYRE_EXEC_STOP;
    }
    return spyre_e_data_begin(e);
}

/*
 * Per data phase, spyre_part_rows() maps at most about this many
 * bytes, in at most this many pieces (runs of pages contiguous in device
 * memory, or system-memory mappings), checked between ranges of rows: a
 * batch may end with one more range.  A whole 512 x 512 fp32 tile is one
 * batch when its pages are contiguous, as device-memory BOs mostly are.
 */
#define SPYRE_ROWS_BATCH_BYTES  (1u << 20)
#define SPYRE_ROWS_BATCH_SEGS   128

/* Data phase.  A free piece slot of @io (grown on demand). */
static SpyreMap *spyre_part_seg(SpyrePartIO *io, size_t nsegs)
{
    if (nsegs == io->nsegs_max) {
        io->nsegs_max = MAX(64, io->nsegs_max * 2);
        io->segs = g_renew(SpyreMap, io->segs, io->nsegs_max);
    }
    return &io->segs[nsegs];
}

/*
 * Operand I/O of a GEMM part (SpyreGemmIO): @nrows segments of @len
 * bytes, @stride bytes apart from @off, to or from @buf where they are
 * packed.  Called by spyre_gemm_step() with no lock held.  Rows are
 * mapped in data phases, a batch (SPYRE_ROWS_BATCH_*) each: rows that
 * lie back to back (@stride == @len) as one range, each range as runs of
 * pages through the worker's leaf-table cache (spyre_e_translate_run()),
 * device memory as pointers into the BAR (a run that continues the
 * previous piece joins it), system memory mapped with spyre_map_sys().
 * The batch is then copied, still counted as the phase's tile, with no
 * lock held, and released.
 */
static int spyre_part_rows(SpyrePartIO *io, int opnd, uint64_t off,
                           uint64_t stride, uint32_t nrows, void *buf,
                           size_t len, bool write)
{
    SpyreExec *e = io->e;
    SpyreState *s = e->s;
    uint8_t *p = buf;
    uint32_t st = SPYRE_STATUS_OK, r = 0, r1, n;
    size_t nsegs, i;
    uint64_t bytes;

    /* The doorbell executor hands GEMMs over: it never drops its locks. */
    assert(!e->w->doorbell);
    if (opnd < 0 || opnd > SPYRE_GEMM_OPND_BIAS) {
        return SPYRE_STATUS_INTERNAL;
    }
    while (r < nrows) {
        nsegs = 0;
        bytes = 0;
        st = spyre_part_phase(e);
        if (st != SPYRE_STATUS_OK) {
            spyre_unlock(s);
            return st;
        }
        for (r1 = r; st == SPYRE_STATUS_OK && r1 < nrows &&
             nsegs < SPYRE_ROWS_BATCH_SEGS &&
             bytes < SPYRE_ROWS_BATCH_BYTES; r1 += n) {
            uint64_t va = io->base[opnd] + off + r1 * stride;
            uint64_t left, run;

            n = 1;
            if (stride == len && len) {
                n = MIN(nrows - r1,
                        MAX(1, (SPYRE_ROWS_BATCH_BYTES - bytes) / len));
            }
            left = (uint64_t)n * len;
            while (left && st == SPYRE_STATUS_OK) {
                SpyreTarget t;

                st = spyre_e_translate_run(e, va, left, write, &t, &run);
                while (st == SPYRE_STATUS_OK && run) {
                    SpyreMap *prev = nsegs ? &io->segs[nsegs - 1] : NULL;
                    uint64_t piece = run;

                    if (t.devmem && prev && !prev->sys &&
                        prev->dev_off + prev->len == t.addr) {
                        prev->len += piece;
                    } else if (spyre_map_target(s, &t, &piece, write,
                                                spyre_part_seg(io, nsegs))) {
                        nsegs++;
                    } else {
                        e->err_va = va;
                        st = SPYRE_STATUS_DMA_ERROR;
                        break;
                    }
                    va += piece;
                    left -= piece;
                    run -= piece;
                    t.addr += piece;
                }
            }
            bytes += (uint64_t)n * len;
        }
        spyre_e_data_unlock(e);
        if (st != SPYRE_STATUS_OK) {
            for (i = 0; i < nsegs; i++) {
                spyre_map_release(s, &io->segs[i], false);
            }
            spyre_e_data_end(e);
            spyre_unlock(s);
            return st;
        }
        e->io_writes += write ? nsegs : 0;
        e->io_bytes += bytes;
        for (i = 0; i < nsegs; i++) {
            if (write) {
                memcpy(io->segs[i].host, p, io->segs[i].len);
            } else {
                memcpy(p, io->segs[i].host, io->segs[i].len);
            }
            spyre_map_release(s, &io->segs[i], write);
            p += io->segs[i].len;
        }
        spyre_e_data_end(e);
        spyre_unlock(s);
        r = r1;
    }
    return st;
}

static int spyre_part_read(void *opaque, int opnd, uint64_t off,
                           uint64_t stride, uint32_t nrows, void *dst,
                           size_t len)
{
    return spyre_part_rows(opaque, opnd, off, stride, nrows, dst, len, false);
}

static int spyre_part_write(void *opaque, int opnd, uint64_t off,
                            uint64_t stride, uint32_t nrows, const void *src,
                            size_t len)
{
    return spyre_part_rows(opaque, opnd, off, stride, nrows, (void *)src,
                           len, true);
}

/*
 * Run part @idx of @g on @e, one spyre_gemm_step() (a K block of at most
 * 512 x 512 x 512) at a time with the BQL released; between steps, the
 * usual boundary checks.  Returns a SPYRE_STATUS_*, SPYRE_EXEC_DROPPED or
 * SPYRE_EXEC_STOP.
 */
static uint32_t spyre_gemm_part(SpyreExec *e, SpyreGang *g, uint32_t idx)
{
    static const SpyreGemmIO io_ops = {
        .read = spyre_part_read,
        .write = spyre_part_write,
    };
    SpyreGemmIO io = io_ops;
    struct spyre_cmd_gemm sub;
    uint32_t st;
    float amax;
    bool traced = trace_event_get_state_backends(TRACE_SPYRE_GEMM_PART_DONE);
    int64_t wall0 = traced ? spyre_now() : 0;
    int64_t cpu0 = traced ? spyre_thread_cpu_ns() : 0;

    spyre_gang_part_cmd(g, idx, &sub);
    e->part_gang = g;
    e->part_idx = idx;
    e->io.e = e;
    e->io.base[SPYRE_GEMM_OPND_A] = sub.a;
    e->io.base[SPYRE_GEMM_OPND_B] = sub.b;
    e->io.base[SPYRE_GEMM_OPND_C] = sub.c;
    e->io.base[SPYRE_GEMM_OPND_BIAS] = sub.bias;
    io.opaque = &e->io;
    if (!e->tile_buf) {
        e->tile_buf = g_malloc(SPYRE_GEMM_TILE_BUF_SIZE);
    }
    trace_spyre_gemm_part(g->q->id, idx, g->nparts, sub.batch, sub.m, sub.n,
                          sub.k);

    st = spyre_gemm_init(&e->gemm, &sub, g->sa, g->sb, &io, e->tile_buf,
                         SPYRE_GEMM_TILE_BUF_SIZE);
    while (st == SPYRE_STATUS_OK && !spyre_gemm_done(&e->gemm)) {
        spyre_unlock(e->s);
        st = spyre_gemm_step(&e->gemm);
        spyre_lock(e->s);
        e->w->lock_ns = spyre_now();
        spyre_e_wait_running(e);
        if (!spyre_e_alive(e)) {
            return SPYRE_EXEC_DROPPED;
        }
        if (st != SPYRE_STATUS_OK) {
            break;
        }
        if (g->stop || g->err_part < idx) {
            return SPYRE_EXEC_STOP;
        }
        if (spyre_now() > g->deadline) {
            return SPYRE_STATUS_LIMIT;
        }
        if (!spyre_gemm_done(&e->gemm)) {
            spyre_e_preempt(e);
            if (!spyre_e_alive(e)) {
                return SPYRE_EXEC_DROPPED;
            }
        }
    }
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    amax = spyre_gemm_amax(&e->gemm);
    if (!isnan(g->amax) && (isnan(amax) || amax > g->amax)) {
        g->amax = amax;
    }
    if (traced) {
        trace_spyre_gemm_part_done(g->q->id, idx, spyre_now() - wall0,
                                   spyre_thread_cpu_ns() - cpu0);
    }
    return SPYRE_STATUS_OK;
}

static bool spyre_gang_claim(SpyreGang *g, uint32_t *idx)
{
    if (!spyre_gang_open(g)) {
        return false;
    }
    *idx = g->next++;
    g->active++;
    return true;
}

/*
 * Part @idx ended with @st.  The error of the lowest-numbered part wins
 * (parts are numbered in the order a single core would run them), so a
 * fault reports the same VA whichever worker hits it first.
 */
static void spyre_gang_part_done(SpyreExec *e, SpyreGang *g, uint32_t idx,
                                 uint32_t st)
{
    g->active--;
    switch (st) {
    case SPYRE_STATUS_OK:
    case SPYRE_EXEC_STOP:
        break;
    case SPYRE_EXEC_DROPPED:
        g->dropped = true;
        g->stop = true;
        break;
    default:
        if (idx < g->err_part) {
            g->err_part = idx;
            g->status = st;
            g->err_va = e->err_va;
            g->fault_reason = st == SPYRE_STATUS_MMU_FAULT ?
                              e->fault_reason : 0;
            g->fault_write = e->fault_write;
        }
        break;
    }
    if (g->nparts > 1) {
        qemu_cond_broadcast(&e->s->gang_cond);
    }
}

/* An idle (or preempting) worker runs one part of someone's GEMM. */
void spyre_gang_help(SpyreExec *e, SpyreGang *g, int floor)
{
    uint32_t idx, st;

    if (!spyre_gang_claim(g, &idx)) {
        return;
    }
    e->q = g->q;
    e->gen = g->gen;
    e->ctx = g->ctx;
    e->prio = g->prio;
    e->floor = MAX((int)g->prio, floor);
    e->deadline = g->deadline;
    e->err_va = 0;
    e->fault_reason = 0;
    st = spyre_gemm_part(e, g, idx);
    spyre_gang_part_done(e, g, idx, st);
    e->part_gang = NULL;
}

uint32_t spyre_cmd_gemm(SpyreExec *e)
{
    SpyreState *s = e->s;
    SpyreGang *g = &e->gang;
    const struct spyre_cmd_gemm *c = &g->cmd;
    SpyreGemmSpan span;
    uint32_t st, idx, v;

    spyre_gemm_to_host(&g->cmd, &e->cmd.gemm);
    st = spyre_gemm_check(c, &span);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (spyre_span_wraps(c->a, span.a) || spyre_span_wraps(c->b, span.b) ||
        spyre_span_wraps(c->c, span.c) ||
        spyre_span_wraps(c->bias, span.bias)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    /* C read (beta), or written over an input: not restartable. */
    e->q->job.restartable = spyre_f32(c->beta) == 0.0f &&
        !spyre_spans_meet(c->c, span.c, c->a, span.a) &&
        !spyre_spans_meet(c->c, span.c, c->b, span.b) &&
        !spyre_spans_meet(c->c, span.c, c->bias, span.bias) &&
        !(c->scale_a && spyre_spans_meet(c->c, span.c, c->scale_a, 4)) &&
        !(c->scale_b && spyre_spans_meet(c->c, span.c, c->scale_b, 4));
    g->sa = g->sb = 1.0f;
    if (c->a_dtype != SPYRE_DTYPE_INT8) {
        if (c->scale_a) {
            st = spyre_e_rw_phase(e, c->scale_a, &v, sizeof(v), false);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            g->sa = spyre_f32(le32_to_cpu(v));
        }
        if (c->scale_b) {
            st = spyre_e_rw_phase(e, c->scale_b, &v, sizeof(v), false);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            g->sb = spyre_f32(le32_to_cpu(v));
        }
    }
    g->q = e->q;
    g->gen = e->gen;
    g->ctx = e->ctx;
    g->prio = e->prio;
    g->next = 0;
    g->active = 0;
    g->err_part = SPYRE_NO_PART;
    g->status = SPYRE_STATUS_OK;
    g->err_va = 0;
    g->fault_reason = 0;
    g->fault_write = false;
    g->stop = g->dropped = g->limit = false;
    g->amax = 0.0f;
    g->deadline = e->deadline;
    spyre_gang_split(s, g);
    e->part_gang = g;
    if (g->nparts > 1) {
        QLIST_INSERT_HEAD(&s->gangs, g, link);
        s->sched_seq++;
        spyre_wake(s, MIN(g->nparts, g->max_active) - 1);
    }

    for (;;) {
        if (spyre_gang_claim(g, &idx)) {
            st = spyre_gemm_part(e, g, idx);
            spyre_gang_part_done(e, g, idx, st);
            e->part_gang = g;
            continue;
        }
        if (!g->active) {
            break;
        }
        /* Helpers run the last parts; they stop soon after a reset. */
        qemu_cond_timedwait(&s->gang_cond, &s->lock, 10);
        e->w->lock_ns = spyre_now();
        spyre_e_wait_running(e);
        if (!spyre_e_alive(e)) {
            g->stop = true;
        } else if (spyre_now() > g->deadline) {
            g->stop = g->limit = true;
        }
    }
    if (g->nparts > 1) {
        QLIST_REMOVE(g, link);
    }
    e->part_gang = NULL;

    if (!spyre_e_alive(e) || g->dropped) {
        return SPYRE_EXEC_DROPPED;
    }
    if (g->err_part != SPYRE_NO_PART) {
        e->err_va = g->err_va;
        e->fault_reason = g->fault_reason;
        e->fault_write = g->fault_write;
        return g->status;
    }
    if (g->limit) {
        return SPYRE_STATUS_LIMIT;
    }
    if (c->amax) {
        v = cpu_to_le32(spyre_f32_bits(g->amax));
        return spyre_e_rw_phase(e, c->amax, &v, sizeof(v), true);
    }
    return SPYRE_STATUS_OK;
}
