/*
 * Spyre card model: the KERNEL command
 *
 * Owns spyre_cmd_kernel(): the command's decode and checks in the
 * documented order, the program read once into the card's memory at
 * command start, and the run of the verified program (spyre-kernel.c)
 * tile by tile: guest memory reached per LOAD/STORE instruction of a
 * vector in a data phase, compute with no lock held, a boundary (pauses,
 * preemption, the time budget, resets) between vectors and tiles.
 *
 * Locks: spyre_cmd_kernel() is called with the device lock held, as every
 * command; it lets it go while it verifies and computes.  The SpyreKIO
 * callbacks are called with no lock held and take the device lock (and
 * their data phase) themselves.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "trace.h"

#include "spyre.h"

struct SpyreKernel {
    SpyreExec *e;
    SpyreKLaunch l;
    SpyreKRun run;
    SpyreKIO io;
    /* The fault of the last failed access, and the one reported. */
    uint64_t cand_va, win_va;
    uint32_t cand_reason, win_reason;
    bool cand_write, win_write;
    uint8_t bytes[SPYRE_KPROG_MAX];
    SpyreKProg prog;
    /*
     * The last program verified (a cache keyed by its full bytes and the
     * launch fields the verifier reads): @vsize 0 when there is none.
     */
    uint32_t vsize;
    uint32_t vsig[4];
    uint32_t vdtype[SPYRE_KERNEL_MAX_OPERANDS];
    uint8_t vbytes[SPYRE_KPROG_MAX];
};

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

/*
 * SpyreKIO.access, no lock held: the active lanes' elements, in lane
 * order, in one data phase.  Device memory is reached through the BAR's
 * host pointer (one translation per page), system memory by DMA.
 */
static uint32_t spyre_kx_access(void *opaque, unsigned int opnd, bool write,
                                const int64_t *off, const uint8_t *act,
                                uint32_t n, void *buf, uint32_t *lane)
{
    SpyreKernel *k = opaque;
    SpyreExec *e = k->e;
    SpyreState *s = e->s;
    size_t es = spyre_cmd_dtype_size(k->l.dtype[opnd]);
    uint64_t base = k->l.va[opnd], page = 1, bytes = 0;
    uint64_t dlo = UINT64_MAX, dhi = 0;
    uint8_t *p = buf;
    SpyreTarget t = { 0 };
    uint32_t st, j, next;
    bool alive;

    spyre_lock(s);
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
    SpyreKernel *k = opaque;

    k->win_va = k->cand_va;
    k->win_reason = k->cand_reason;
    k->win_write = k->cand_write;
}

/* SpyreKIO.boundary, no lock held. */
static uint32_t spyre_kx_boundary(void *opaque)
{
    SpyreKernel *k = opaque;
    SpyreExec *e = k->e;
    uint32_t st;

    spyre_lock(e->s);
    st = spyre_e_boundary(e, true);
    spyre_unlock(e->s);
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

uint32_t spyre_cmd_kernel(SpyreExec *e)
{
    SpyreState *s = e->s;
    SpyreJob *job = &e->q->job;
    SpyreKernel *k;
    uint64_t prog, pt, detail;
    uint32_t prog_size, st;

    if (!e->kernel) {
        e->kernel = g_new0(SpyreKernel, 1);
    }
    k = e->kernel;
    k->e = e;
    st = spyre_kx_decode(e, &k->l, &prog, &prog_size);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }

    /* 4: the program, read once. */
    if (prog % 8 || prog_size < 64 || (prog_size - 64) % 16 ||
        prog_size > SPYRE_KPROG_MAX) {
        job->detail = (uint64_t)SPYRE_KERR_HEADER << 32 | SPYRE_KINST_HEADER;
        return SPYRE_STATUS_BAD_PROGRAM;
    }
    st = spyre_e_rw_phase(e, prog, k->bytes, prog_size, false);
    if (st == SPYRE_STATUS_MMU_FAULT || st == SPYRE_STATUS_DMA_ERROR) {
        job->detail = (uint64_t)SPYRE_KINST_HEADER << 32 |
                      SPYRE_KOPERAND_PROGRAM;
        job->detail2 = e->err_va - prog;
    }
    if (st != SPYRE_STATUS_OK) {
        return st;
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
    k->io = (SpyreKIO) {
        .opaque = k,
        .access = spyre_kx_access,
        .keep_fault = spyre_kx_keep_fault,
        .boundary = spyre_kx_boundary,
    };
    if (!spyre_kernel_prepare(&k->run, &k->prog, &k->l, &k->io)) {
        return SPYRE_STATUS_INTERNAL;
    }

    /* 6: run, tile by tile. */
    for (pt = 0; pt < k->l.P; pt += k->run.tile) {
        spyre_unlock(s);
        st = spyre_kernel_tile(&k->run, pt);
        spyre_lock(s);
        e->w->lock_ns = spyre_now();
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        if (k->run.status) {
            break;
        }
        if (pt + k->run.tile < k->l.P) {
            st = spyre_e_boundary(e, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    if (!spyre_e_alive(e)) {
        return SPYRE_EXEC_DROPPED;
    }
    st = k->run.status;
    if (st) {
        job->detail = k->run.detail;
        job->detail2 = k->run.detail2;
        e->err_va = 0;
        e->fault_reason = 0;
        if (st == SPYRE_STATUS_MMU_FAULT || st == SPYRE_STATUS_DMA_ERROR) {
            e->err_va = k->win_va;
            e->fault_reason = st == SPYRE_STATUS_MMU_FAULT ? k->win_reason :
                                                            0;
            e->fault_write = k->win_write;
        }
    }
    return st;
}

void spyre_kernel_exec_free(SpyreExec *e)
{
    if (e->kernel) {
        spyre_kernel_free(&e->kernel->run);
        g_free(e->kernel);
        e->kernel = NULL;
    }
}
