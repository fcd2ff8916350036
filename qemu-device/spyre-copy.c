/*
 * Spyre card model: bulk byte copies
 *
 * Owns spyre_copy_bytes(), the data path of a COPY without conversion:
 * a batch of pages of both operands is translated under the BQL at once
 * (runs of device-MMU pages from one leaf-table read; system memory
 * mapped with dma_memory_map(), through a vIOMMU if there is one) into
 * pieces of host memory, which are then copied with the BQL released by
 * the job's worker and, for large batches, by idle workers that help
 * (spyre_pick_copy, spyre_copy_help); whoever copies a piece marks what
 * it wrote dirty (device memory: memory_region_set_dirty() once per
 * piece; system memory: dma_memory_unmap()).  What cannot be reached that
 * way (not plain RAM, the card's own BARs, a failed translation) goes a
 * page at a time through spyre_e_rw(), which reports the error as every
 * other command does.
 *
 * Locks: spyre_copy_bytes(), spyre_pick_copy() and spyre_copy_help() are
 * called with the BQL held; the copies run without it, each copier
 * counted in SpyreState.ncopying, so that translation changes, resets and
 * VM stops wait for them (spyre_drain_copies()).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/rcu.h"
#include "qemu/units.h"
#include "hw/pci/pci_device.h"
#include "system/dma.h"
#include "exec/memory.h"
#include "trace.h"

#include "spyre.h"

/* Bytes of one batch: translated under one hold of the BQL. */
#define SPYRE_COPY_BATCH        (8 * MiB)
/* Largest piece: the unit workers share. */
#define SPYRE_COPY_PIECE        (512 * KiB)
/* Batches smaller than this are copied by the job's worker alone... */
#define SPYRE_COPY_SPLIT_MIN    (1 * MiB)
/* ... and smaller than this with the BQL held: shorter than a hand-off. */
#define SPYRE_COPY_UNLOCKED_MIN (64 * KiB)

static const MemTxAttrs spyre_copy_attrs = { .memory = 1 };

/*
 * DMA addresses found to be plain RAM this device may reach directly, in
 * one hold of the BQL (a batch): later pages in it skip the check, and
 * reads use @host (RAM of @mr, referenced until the batch is copied)
 * without a mapping of their own.
 */
typedef struct SpyreRamRange {
    uint64_t base;
    uint64_t end;               /* base == end: none */
    uint8_t *host;              /* base's host address, or NULL */
} SpyreRamRange;

/*
 * BQL held.  Hold a reference to @mr until the batch is copied (one per
 * region: scattered pages of one RAM region find it again and again).
 */
static bool spyre_copy_ref(SpyreExec *e, MemoryRegion *mr)
{
    uint32_t i;

    for (i = 0; i < e->nrefs; i++) {
        if (e->refs[i] == mr) {
            return true;
        }
    }
    if (e->nrefs == ARRAY_SIZE(e->refs)) {
        return false;
    }
    memory_region_ref(mr);
    e->refs[e->nrefs++] = mr;
    return true;
}

/*
 * BQL held.  A host pointer to @len bytes of system memory at DMA
 * address @addr (*@len may shrink), or NULL when they are not plain RAM
 * this device may reach directly (then spyre_e_rw() reports why).  Reads
 * point into the RAM block found (*@mapped false); writes are mapped with
 * dma_memory_map() (*@mapped true), whose unmap marks them dirty.
 */
static void *spyre_copy_map(SpyreExec *e, SpyreRamRange *ok, uint64_t addr,
                            uint64_t *len, bool write, bool *mapped)
{
    SpyreState *s = e->s;
    AddressSpace *as = pci_get_address_space(PCI_DEVICE(s));
    DMADirection dir = write ? DMA_DIRECTION_FROM_DEVICE :
                               DMA_DIRECTION_TO_DEVICE;
    MemoryRegion *mr;
    hwaddr xlat, plen;
    dma_addr_t mlen;
    void *p;

    assert(bql_locked());
    if (addr < ok->base || addr >= ok->end) {
        plen = UINT64_MAX - addr;
        WITH_RCU_READ_LOCK_GUARD() {
            mr = address_space_translate(as, addr, &xlat, &plen, write,
                                         spyre_copy_attrs);
            if (memory_region_owner(mr) == OBJECT(s) || plen == 0 ||
                !memory_region_is_ram(mr) ||
                !memory_access_is_direct(mr, write, spyre_copy_attrs)) {
                return NULL;
            }
            ok->host = NULL;
            if (!write && spyre_copy_ref(e, mr)) {
                ok->host = (uint8_t *)memory_region_get_ram_ptr(mr) + xlat;
            }
        }
        ok->base = addr;
        ok->end = addr + plen;
    }
    mlen = MIN(*len, ok->end - addr);
    if (ok->host) {
        *len = mlen;
        *mapped = false;
        return ok->host + (addr - ok->base);
    }
    p = dma_memory_map(as, addr, &mlen, dir, spyre_copy_attrs);
    if (!p) {
        return NULL;
    }
    if (!mlen) {
        dma_memory_unmap(as, p, 0, dir, 0);
        return NULL;
    }
    *len = mlen;
    *mapped = true;
    return p;
}

/* BQL held.  A batch is copied: drop the references its reads took. */
static void spyre_copy_unref(SpyreExec *e)
{
    assert(bql_locked());
    while (e->nrefs) {
        memory_region_unref(e->refs[--e->nrefs]);
    }
}

/* Copy piece @p and mark what it wrote.  Without the BQL. */
static void spyre_copy_piece(SpyreState *s, const SpyreCopyPiece *p)
{
    AddressSpace *as = pci_get_address_space(PCI_DEVICE(s));

    /* Overlapping operands are undefined; memmove keeps that harmless. */
    memmove(p->dst, p->src, p->len);
    if (p->dst_dev) {
        memory_region_set_dirty(&s->devmem, p->dst_off, p->len);
    }
    if (p->dst_map) {
        dma_memory_unmap(as, p->dst, p->len, DMA_DIRECTION_FROM_DEVICE,
                         p->len);
    }
    if (p->src_map) {
        dma_memory_unmap(as, (void *)p->src, p->len, DMA_DIRECTION_TO_DEVICE,
                         p->len);
    }
}

/* Without the BQL: copy the pieces of @c nobody has claimed yet. */
static void spyre_copy_claim_all(SpyreState *s, SpyreCopySplit *c)
{
    uint32_t i;

    while ((i = qatomic_fetch_inc(&c->next)) < c->npieces) {
        spyre_copy_piece(s, &c->pieces[i]);
    }
}

static void spyre_copy_uncount(SpyreState *s)
{
    if (qatomic_fetch_dec(&s->ncopying) == 1) {
        qemu_event_set(&s->copy_done);
    }
}

static bool spyre_copy_open(const SpyreCopySplit *c)
{
    return qatomic_read(&c->next) < c->npieces && c->active < c->max_active;
}

/* BQL held.  The open copy batch of highest priority above @floor. */
SpyreCopySplit *spyre_pick_copy(SpyreState *s, int floor)
{
    SpyreCopySplit *c, *best = NULL;

    assert(bql_locked());
    QLIST_FOREACH(c, &s->copies, link) {
        if (spyre_copy_open(c) && (int)c->prio > floor &&
            (!best || c->prio > best->prio)) {
            best = c;
        }
    }
    return best;
}

/*
 * BQL held (released meanwhile).  An idle worker copies pieces of @c
 * until none is left.  The owner waits for @c->active to drop to 0 before
 * it reuses @c, so @c stays valid throughout.
 */
void spyre_copy_help(SpyreState *s, SpyreCopySplit *c)
{
    assert(bql_locked());
    c->active++;
    qatomic_inc(&s->ncopying);
    bql_unlock();
    spyre_copy_claim_all(s, c);
    spyre_copy_uncount(s);
    bql_lock();
    c->active--;
    qemu_cond_broadcast(&s->gang_cond);
}

/*
 * BQL held.  Translate the next batch of the copy of @len bytes from @src
 * to @dst into e->split's pieces.  Returns SPYRE_STATUS_OK with the batch
 * (possibly empty: then *@slow bytes at the start go through the slow
 * path), or the fault of the first page.
 */
static uint32_t spyre_copy_batch(SpyreExec *e, uint64_t dst, uint64_t src,
                                 uint64_t len, uint64_t *batch,
                                 uint64_t *slow)
{
    SpyreState *s = e->s;
    SpyreCopySplit *c = &e->split;
    SpyreRamRange rd = { 0, 0 }, wr = { 0, 0 };
    int64_t t0 = spyre_now();
    uint64_t done = 0, srun = 0, drun = 0;
    SpyreTarget ts = { 0 }, td = { 0 };
    uint32_t st;

    c->npieces = 0;
    *slow = 0;
    *batch = 0;
    while (done < len && done < SPYRE_COPY_BATCH) {
        uint64_t left = MIN(len - done, SPYRE_COPY_BATCH - done);
        uint64_t n;
        SpyreCopyPiece *p;
        bool smap = false, dmap = false;
        void *sp, *dp;

        /*
         * A side's run outlives the pieces cut from it: a contiguous
         * operand is translated once per run, not once per page of a
         * scattered other side (which rescanned its leaf table each time).
         */
        st = SPYRE_STATUS_OK;
        if (!srun) {
            st = spyre_e_translate_run(e, src + done, left, false, &ts,
                                       &srun);
        }
        if (st == SPYRE_STATUS_OK && !drun) {
            st = spyre_e_translate_run(e, dst + done, left, true, &td, &drun);
        }
        if (st != SPYRE_STATUS_OK) {
            if (!done) {
                return st;
            }
            break;      /* copy what is before it; the next batch faults */
        }
        n = MIN(MIN(srun, drun), SPYRE_COPY_PIECE);
        if (ts.devmem) {
            sp = s->devmem_ptr + ts.addr;
        } else {
            sp = spyre_copy_map(e, &rd, ts.addr, &n, false, &smap);
        }
        if (!sp) {
            *slow = done ? 0 : n;
            break;
        }
        /*
         * (If the destination's mapping is shorter, the source's is longer
         * than the piece: unmapping a read needs no length.)
         */
        if (td.devmem) {
            dp = s->devmem_ptr + td.addr;
        } else {
            dp = spyre_copy_map(e, &wr, td.addr, &n, true, &dmap);
        }
        if (!dp) {
            if (smap) {
                dma_memory_unmap(pci_get_address_space(PCI_DEVICE(s)), sp,
                                 n, DMA_DIRECTION_TO_DEVICE, 0);
            }
            *slow = done ? 0 : n;
            break;
        }
        if (c->npieces == e->npieces_max) {
            e->npieces_max = MAX(256, e->npieces_max * 2);
            e->pieces = g_renew(SpyreCopyPiece, e->pieces, e->npieces_max);
        }
        p = &e->pieces[c->npieces++];
        p->dst = dp;
        p->src = sp;
        p->len = n;
        p->dst_off = td.addr;
        p->dst_dev = td.devmem;
        p->dst_map = dmap;
        p->src_map = smap;
        done += n;
        srun -= n;
        ts.addr += n;
        drun -= n;
        td.addr += n;
        /* Keep the hold of the BQL short; pages map by the thousand. */
        if (spyre_now() - t0 >= SPYRE_BQL_SLICE_NS) {
            break;
        }
    }
    *batch = done;
    return SPYRE_STATUS_OK;
}

/* BQL held.  A batch of @len bytes is about to be copied. */
static void spyre_copy_account(SpyreExec *e, uint64_t dst, uint64_t src,
                               uint64_t len)
{
    SpyreCopySplit *c = &e->split;

    e->q->job.writes++;
    e->s->tel[SPYRE_TEL_BYTES] += 2 * len;
    trace_spyre_copy_batch(e->q->id, dst, src, len, c->npieces);
    c->pieces = e->pieces;
    c->next = 0;
    c->active = 0;
    c->max_active = 1;
    c->prio = e->prio;
}

/*
 * BQL held.  Copy the @len bytes at @src to @dst (device VAs of the job of
 * @e) as a COPY command does.  Returns a SPYRE_STATUS_*, or
 * SPYRE_EXEC_DROPPED.
 */
uint32_t spyre_copy_bytes(SpyreExec *e, uint64_t dst, uint64_t src,
                          uint64_t len)
{
    SpyreState *s = e->s;
    SpyreCopySplit *c = &e->split;
    uint64_t done = 0, batch, slow;
    uint32_t st;

    assert(bql_locked());
    assert(!e->w->doorbell);    /* it drops the BQL: COPY is handed off */
    c->pieces = NULL;
    while (done < len) {
        st = spyre_copy_batch(e, dst + done, src + done, len - done, &batch,
                              &slow);
        if (st != SPYRE_STATUS_OK || slow) {
            spyre_copy_unref(e);    /* nothing copied from what it found */
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        if (slow) {
            /* One page through the bounce buffer: reports its error. */
            slow = MIN(slow, sizeof(e->buf[0]));
            st = spyre_e_rw(e, src + done, e->buf[0], slow, false);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_e_rw(e, dst + done, e->buf[0], slow, true);
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            done += slow;
        } else if (batch < SPYRE_COPY_UNLOCKED_MIN) {
            /* Short: with the BQL held, sooner done than handed off. */
            spyre_copy_account(e, dst + done, src + done, batch);
            spyre_copy_claim_all(s, c);
            spyre_copy_unref(e);
            done += batch;
        } else {
            spyre_copy_account(e, dst + done, src + done, batch);
            c->max_active = MIN(MIN(s->ncores, s->nworkers), s->host_cpus);
            if (batch < SPYRE_COPY_SPLIT_MIN || c->npieces < 2) {
                c->max_active = 1;
            }
            c->active = 1;
            if (c->max_active > 1) {
                QLIST_INSERT_HEAD(&s->copies, c, link);
                s->sched_seq++;
                spyre_wake(s, c->max_active - 1);
            }
            qatomic_inc(&s->ncopying);
            bql_unlock();
            spyre_copy_claim_all(s, c);
            spyre_copy_uncount(s);
            bql_lock();
            if (c->max_active > 1) {
                QLIST_REMOVE(c, link);
            }
            c->active--;
            while (c->active) {
                qemu_cond_wait_bql(&s->gang_cond);
            }
            spyre_copy_unref(e);
            e->w->bql_ns = spyre_now();
            spyre_e_wait_running(e);
            done += batch;
        }
        if (!spyre_e_alive(e)) {
            return SPYRE_EXEC_DROPPED;
        }
        if (done < len) {
            st = spyre_e_boundary(e, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    return SPYRE_STATUS_OK;
}
