/*
 * Spyre card model: bulk byte copies
 *
 * Owns spyre_copy_bytes(), the data path of a COPY without conversion:
 * a batch of both operands is translated in one memory phase (runs of
 * device-MMU pages from one leaf-table read) into pieces, which are then
 * mapped (device memory as pointers into the BAR, system memory with
 * dma_memory_map()) and copied with no lock held by the job's worker
 * and, for large batches, by idle workers that help (spyre_pick_copy,
 * spyre_copy_help); whoever copies a piece maps it and releases its
 * mappings, marking what it wrote dirty.  Behind a vIOMMU, which
 * translates under the BQL, the memory phase maps the pieces instead.
 * The batch counts as one tile in flight until its last piece is copied.
 * What cannot be mapped that way (not plain RAM, the card's own BARs, a
 * failed translation) goes a page at a time through spyre_e_rw(), which
 * reports the error as every other command does.
 *
 * Locks: spyre_copy_bytes(), spyre_pick_copy() and spyre_copy_help() are
 * called with the device lock held; batches are translated in data
 * phases (spyre_e_data_begin) and copied with no lock held.
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

/* Bytes of one batch: mapped in one memory phase, one tile. */
#define SPYRE_COPY_BATCH        (8 * MiB)
/* Largest piece: the unit workers share. */
#define SPYRE_COPY_PIECE        (512 * KiB)
/* Batches smaller than this are copied by the job's worker alone. */
#define SPYRE_COPY_SPLIT_MIN    (1 * MiB)
/* Longest a memory phase maps pages for (then the batch is cut). */
#define SPYRE_COPY_MAP_NS       (50 * SCALE_US)

/*
 * No lock held.  Copy piece @p: map it first unless its memory phase did
 * (without a vIOMMU mapping needs only RCU, so the copiers share that
 * work too), then release the mappings.  A piece that cannot be mapped
 * stops at p->copied < p->len; the batch's owner takes it from there.
 */
static void spyre_copy_piece(SpyreState *s, SpyreCopyPiece *p)
{
    SpyreTarget ts = p->ts, td = p->td;
    uint64_t left = p->len;

    if (p->mapped) {
        /* Overlapping operands are undefined; memmove keeps that harmless. */
        memmove(p->dst.host, p->src.host, p->dst.len);
        spyre_map_release(s, &p->dst, true);
        spyre_map_release(s, &p->src, false);
        p->copied = p->len;
        return;
    }
    while (left) {
        uint64_t n = left;
        SpyreMap src, dst;

        if (!spyre_map_target(s, &ts, &n, false, &src)) {
            break;
        }
        if (!spyre_map_target(s, &td, &n, true, &dst)) {
            spyre_map_release(s, &src, false);
            break;
        }
        memmove(dst.host, src.host, n);
        spyre_map_release(s, &dst, true);
        spyre_map_release(s, &src, false);
        ts.addr += n;
        td.addr += n;
        left -= n;
    }
    p->copied = p->len - left;
}

/* No lock held: copy the pieces of @c nobody has claimed yet. */
static void spyre_copy_claim_all(SpyreState *s, SpyreCopySplit *c)
{
    uint32_t i;

    while ((i = qatomic_fetch_inc(&c->next)) < c->npieces) {
        spyre_copy_piece(s, &c->pieces[i]);
    }
}

static bool spyre_copy_open(const SpyreCopySplit *c)
{
    return qatomic_read(&c->next) < c->npieces && c->active < c->max_active;
}

/* Device lock held.  The open copy batch of highest priority above @floor. */
SpyreCopySplit *spyre_pick_copy(SpyreState *s, int floor)
{
    SpyreCopySplit *c, *best = NULL;

    QLIST_FOREACH(c, &s->copies, link) {
        if (spyre_copy_open(c) && (int)c->prio > floor &&
            (!best || c->prio > best->prio)) {
            best = c;
        }
    }
    return best;
}

/*
 * Device lock held (released meanwhile).  An idle worker copies pieces of
 * @c until none is left.  The owner waits for @c->active to drop to 0
 * before it reuses @c, so @c stays valid throughout.
 */
void spyre_copy_help(SpyreState *s, SpyreCopySplit *c)
{
    c->active++;
    spyre_unlock(s);
    spyre_copy_claim_all(s, c);
    spyre_lock(s);
    c->active--;
    qemu_cond_broadcast(&s->gang_cond);
}

/*
 * Data phase.  Translate the next batch of the copy of @len bytes from
 * @src to @dst into e->split's pieces, mapping them behind a vIOMMU (its
 * translations need the BQL the phase holds).  Returns SPYRE_STATUS_OK
 * with the batch (possibly empty: then *@slow bytes at the start go
 * through the slow path), or the fault of the first page.
 */
static uint32_t spyre_copy_batch(SpyreExec *e, uint64_t dst, uint64_t src,
                                 uint64_t len, uint64_t *batch,
                                 uint64_t *slow)
{
    SpyreState *s = e->s;
    SpyreCopySplit *c = &e->split;
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
        if (c->npieces == e->npieces_max) {
            e->npieces_max = MAX(256, e->npieces_max * 2);
            e->pieces = g_renew(SpyreCopyPiece, e->pieces, e->npieces_max);
        }
        p = &e->pieces[c->npieces];
        n = MIN(MIN(srun, drun), SPYRE_COPY_PIECE);
        p->ts = ts;
        p->td = td;
        p->mapped = s->dma_bql;
        if (p->mapped) {
            if (!spyre_map_target(s, &ts, &n, false, &p->src)) {
                *slow = done ? 0 : n;
                break;
            }
            /* A shorter destination shortens the piece: the source's too. */
            if (!spyre_map_target(s, &td, &n, true, &p->dst)) {
                spyre_map_release(s, &p->src, false);
                *slow = done ? 0 : n;
                break;
            }
            p->src.len = n;
        }
        p->len = n;
        c->npieces++;
        done += n;
        srun -= n;
        ts.addr += n;
        drun -= n;
        td.addr += n;
        /* Keep a mapping memory phase short; pages map by the thousand. */
        if (p->mapped && spyre_now() - t0 >= SPYRE_COPY_MAP_NS) {
            break;
        }
    }
    *batch = done;
    return SPYRE_STATUS_OK;
}

/*
 * The bytes of the first @npieces pieces of @c copied before the first
 * that stopped short (all of them if none did).
 */
static uint64_t spyre_copy_done(const SpyreCopySplit *c)
{
    uint64_t done = 0;
    uint32_t i;

    for (i = 0; i < c->npieces; i++) {
        done += c->pieces[i].copied;
        if (c->pieces[i].copied < c->pieces[i].len) {
            break;
        }
    }
    return done;
}

/*
 * Device lock held.  Copy the @len bytes at @src to @dst (device VAs of
 * the job of @e) as a COPY command does.  Returns a SPYRE_STATUS_*, or
 * SPYRE_EXEC_DROPPED.
 */
uint32_t spyre_copy_bytes(SpyreExec *e, uint64_t dst, uint64_t src,
                          uint64_t len)
{
    SpyreState *s = e->s;
    SpyreCopySplit *c = &e->split;
    uint64_t done = 0, batch, slow, copied;
    bool stopped = false;
    uint32_t st;

    assert(!e->w->doorbell);    /* it drops the locks: COPY is handed off */
    c->pieces = NULL;
    while (done < len) {
        st = spyre_e_data_begin(e);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        if (stopped) {
            /* Where a copier's mapping failed: the slow path reports. */
            st = SPYRE_STATUS_OK;
            slow = len - done;
            stopped = false;
        } else {
            st = spyre_copy_batch(e, dst + done, src + done, len - done,
                                  &batch, &slow);
        }
        if (st == SPYRE_STATUS_OK && slow) {
            /* One page through the bounce buffer: reports its error. */
            slow = MIN(slow, sizeof(e->buf));
            st = spyre_e_rw(e, src + done, e->buf, slow, false);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_e_rw(e, dst + done, e->buf, slow, true);
            }
            done += slow;
        }
        spyre_e_data_unlock(e);
        if (st == SPYRE_STATUS_OK && !slow) {
            /* The batch, still counted as the phase's tile, is copied. */
            e->io_writes++;
            e->io_bytes += 2 * batch;
            trace_spyre_copy_batch(e->q->id, dst + done, src + done, batch,
                                   c->npieces);
            c->pieces = e->pieces;
            c->next = 0;
            c->active = 1;
            c->prio = e->prio;
            c->max_active = MIN(MIN(s->ncores, s->nworkers), s->host_cpus);
            if (batch < SPYRE_COPY_SPLIT_MIN || c->npieces < 2) {
                c->max_active = 1;
            }
            if (c->max_active > 1) {
                spyre_lock(s);
                QLIST_INSERT_HEAD(&s->copies, c, link);
                s->sched_seq++;
                spyre_wake(s, c->max_active - 1);
                spyre_unlock(s);
            }
            spyre_copy_claim_all(s, c);
            spyre_lock(s);
            if (c->max_active > 1) {
                QLIST_REMOVE(c, link);
            }
            c->active--;
            while (c->active) {
                qemu_cond_wait(&s->gang_cond, &s->lock);
            }
            spyre_unlock(s);
            /*
             * A piece a copier could not map is not plain RAM (or is the
             * card's own BAR): the slow path takes it next, and reports.
             */
            copied = spyre_copy_done(c);
            stopped = copied < batch;
            done += copied;
        }
        spyre_e_data_end(e);
        if (st != SPYRE_STATUS_OK) {
            return st;
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
