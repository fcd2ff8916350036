/*
 * Spyre card model: DMA and the device MMU
 *
 * Owns DMA to system memory (spyre_dma_rw: RAM only, never the card's own
 * BARs), the page walk of a context, the per-worker TLB and leaf-table
 * cache (valid while their epoch is SpyreState.mmu_epoch), fault records,
 * the accesses of a running job to its device VAs (spyre_e_translate,
 * spyre_e_translate_run for runs of pages, spyre_e_access, spyre_e_rw),
 * and spyre_drain_copies(), which waits for the copies spyre-gemm.c and
 * spyre-copy.c run without the BQL.
 *
 * Locks: every function here runs with the BQL held (a vIOMMU fault takes
 * it; translations and resets are ordered by it).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/rcu.h"
#include "hw/pci/pci_device.h"
#include "system/dma.h"
#include "exec/memory.h"
#include "trace.h"

#include "spyre.h"

static const MemTxAttrs spyre_dma_attrs = { .memory = 1 };

/*
 * DMA to or from system memory through the device's PCI address space
 * (and thus through a vIOMMU if there is one).  Only RAM is reachable
 * (MemTxAttrs.memory), and never the device's own BARs.
 */
MemTxResult spyre_dma_rw(SpyreState *s, dma_addr_t addr, void *buf,
                         dma_addr_t len, DMADirection dir)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    AddressSpace *as = pci_get_address_space(pdev);
    bool is_write = dir == DMA_DIRECTION_FROM_DEVICE;
    dma_addr_t a = addr, left = len;
    MemTxResult r;

    assert(bql_locked());
    if (len == 0) {
        return MEMTX_OK;
    }
    if (addr + len < addr) {
        return MEMTX_DECODE_ERROR;
    }

    WITH_RCU_READ_LOCK_GUARD() {
        while (left) {
            hwaddr xlat, plen = left;
            MemoryRegion *mr;

            mr = address_space_translate(as, a, &xlat, &plen, is_write,
                                         spyre_dma_attrs);
            if (memory_region_owner(mr) == OBJECT(s)) {
                trace_spyre_dma_self(a, len);
                return MEMTX_ACCESS_ERROR;
            }
            if (!memory_region_is_ram(mr) || plen == 0) {
                trace_spyre_dma_error(a, len, is_write, MEMTX_DECODE_ERROR);
                return MEMTX_DECODE_ERROR;
            }
            a += plen;
            left -= plen;
        }
    }

    r = pci_dma_rw(pdev, addr, buf, len, dir, spyre_dma_attrs);
    if (r != MEMTX_OK) {
        trace_spyre_dma_error(addr, len, is_write, r);
    }
    return r;
}

/*
 * Walk the page tables of @ctx for @va, starting from the level-3 table
 * in *@leaf if it is not 0, else from the root (and then set *@leaf).
 * Returns 0 and the target of the byte at @va (and whether its page is
 * writable), or a SPYRE_FAULT_* reason.
 */
static int spyre_mmu_translate(SpyreState *s, unsigned int ctx, uint64_t va,
                               bool write, SpyreTarget *t, bool *writable,
                               uint64_t *leaf)
{
    uint64_t root, table, pte = 0;
    int lvl = 0;

    assert(bql_locked());
    if (va >= SPYRE_VA_LIMIT) {
        return SPYRE_FAULT_UNMAPPED;
    }
    if (*leaf) {
        table = *leaf;
        lvl = SPYRE_PT_LEVELS - 1;
    } else {
        if (ctx >= s->ncontexts) {
            return SPYRE_FAULT_BAD_CONTEXT;
        }
        root = s->ctx_root[ctx];
        if (!(root & SPYRE_PTE_VALID)) {
            return SPYRE_FAULT_BAD_CONTEXT;
        }
        table = root & SPYRE_PTE_ADDR_MASK;
    }

    for (; lvl < SPYRE_PT_LEVELS; lvl++) {
        uint64_t ea = table + 8ULL * SPYRE_PT_INDEX(va, lvl);

        if (spyre_dma_rw(s, ea, &pte, sizeof(pte),
                         DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
            return SPYRE_FAULT_PT_DMA;
        }
        if (lvl == SPYRE_PT_LEVELS - 1) {
            *leaf = table;
        }
        pte = le64_to_cpu(pte);
        if (!(pte & SPYRE_PTE_VALID)) {
            return SPYRE_FAULT_UNMAPPED;
        }
        table = pte & SPYRE_PTE_ADDR_MASK;
    }

    *writable = !!(pte & SPYRE_PTE_WRITE);
    if (write && !*writable) {
        return SPYRE_FAULT_READONLY;
    }
    t->devmem = !!(pte & SPYRE_PTE_DEVMEM);
    t->addr = table + (va & SPYRE_PAGE_MASK);
    if (t->devmem && table + SPYRE_PAGE_SIZE > s->mem_size) {
        return SPYRE_FAULT_BAD_TARGET;
    }
    return 0;
}

/* BQL held.  Queue a fault record and signal it. */
void spyre_record_fault(SpyreState *s, unsigned int ctx,
                        unsigned int queue, uint64_t va, bool write,
                        unsigned int reason, bool direct)
{
    assert(bql_locked());
    trace_spyre_fault(ctx, queue, va, write, reason);
    s->tel[SPYRE_TEL_FAULTS]++;
    if (s->fault_count < SPYRE_FAULT_FIFO_DEPTH) {
        unsigned int i = (s->fault_head + s->fault_count) %
                         SPYRE_FAULT_FIFO_DEPTH;

        s->fault_va[i] = va;
        s->fault_info[i] = (uint64_t)(ctx & 0xffff) |
                           ((uint64_t)(queue & 0xffff) << 16) |
                           ((uint64_t)write << 32) |
                           ((uint64_t)(reason & 0xff) << 40);
        s->fault_count++;
    } else {
        s->fault_lost++;
    }
    spyre_raise_error(s, SPYRE_IRQ_FAULT, direct);
}

/*
 * BQL held.  Translate @va in the context of @e's job, through the
 * worker's TLB and leaf-table cache.  A fault is noted in @e (the job
 * records it when the command ends).  Returns a SPYRE_STATUS_*.
 */
uint32_t spyre_e_translate(SpyreExec *e, uint64_t va, bool write,
                           SpyreTarget *t)
{
    SpyreWorker *w = e->w;
    SpyreState *s = e->s;
    uint64_t vpn = va >> SPYRE_PAGE_SHIFT;
    uint64_t tag = va >> SPYRE_PWC_SHIFT;
    uint64_t hash = e->ctx * 0x9e3779b1ULL;
    SpyreTlbEntry *te = &w->tlb[(vpn ^ hash) & (SPYRE_TLB_SIZE - 1)];
    SpyrePwcEntry *pe = &w->pwc[(tag ^ hash) & (SPYRE_PWC_SIZE - 1)];
    uint64_t leaf = 0;
    bool writable = false;
    int reason;

    assert(bql_locked());
    if (te->epoch == s->mmu_epoch && te->vpn == vpn && te->ctx == e->ctx &&
        (te->writable || !write)) {
        t->devmem = te->devmem;
        t->addr = te->page | (va & SPYRE_PAGE_MASK);
        return SPYRE_STATUS_OK;
    }
    if (pe->epoch == s->mmu_epoch && pe->tag == tag && pe->ctx == e->ctx) {
        leaf = pe->table;
    }
    reason = spyre_mmu_translate(s, e->ctx, va, write, t, &writable, &leaf);
    if (leaf && va < SPYRE_VA_LIMIT) {
        pe->epoch = s->mmu_epoch;
        pe->tag = tag;
        pe->ctx = e->ctx;
        pe->table = leaf;
    }
    if (reason) {
        e->err_va = va;
        e->fault_reason = reason;
        e->fault_write = write;
        return SPYRE_STATUS_MMU_FAULT;
    }
    te->epoch = s->mmu_epoch;
    te->vpn = vpn;
    te->ctx = e->ctx;
    te->writable = writable;
    te->devmem = t->devmem;
    te->page = t->addr & ~SPYRE_PAGE_MASK;
    return SPYRE_STATUS_OK;
}

/*
 * BQL held.  The contents of the leaf table at DMA address @table from the
 * worker's cache, read whole on a miss into the least recently used
 * entry; NULL if it cannot be read (the page walk reports that).
 */
static SpyreLeaf *spyre_leaf_get(SpyreWorker *w, uint64_t table)
{
    SpyreState *s = w->s;
    SpyreLeaf *lf, *old = &w->leaf[0];
    unsigned int i;

    for (i = 0; i < SPYRE_LEAF_CACHE; i++) {
        lf = &w->leaf[i];
        if (lf->epoch == s->mmu_epoch && lf->table == table) {
            lf->used = ++w->leaf_clock;
            return lf;
        }
        if (lf->used < old->used) {
            old = lf;
        }
    }
    old->epoch = 0;
    if (spyre_dma_rw(s, table, old->ptes, sizeof(old->ptes),
                     DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
        return NULL;
    }
    old->table = table;
    old->epoch = s->mmu_epoch;
    old->used = ++w->leaf_clock;
    return old;
}

/*
 * BQL held.  Translate @va as spyre_e_translate() does, and find how many
 * of the @len bytes from @va on map to one contiguous run of the same
 * target (device memory or DMA addresses) with the access allowed.  The
 * leaf table of @va is read whole, once, into the worker's leaf cache
 * (valid while the MMU epoch is), so that runs of pages cost no walk
 * each (a large contiguous translation).  *@run gets the length of the
 * run (at least to the end of @va's page, or @len); a page after the first
 * that may not be accessed ends the run, and the next call reports it.
 */
uint32_t spyre_e_translate_run(SpyreExec *e, uint64_t va, uint64_t len,
                               bool write, SpyreTarget *t, uint64_t *run)
{
    SpyreWorker *w = e->w;
    SpyreState *s = e->s;
    uint64_t tag = va >> SPYRE_PWC_SHIFT;
    uint64_t hash = e->ctx * 0x9e3779b1ULL;
    SpyrePwcEntry *pe = &w->pwc[(tag ^ hash) & (SPYRE_PWC_SIZE - 1)];
    unsigned int idx = SPYRE_PT_INDEX(va, SPYRE_PT_LEVELS - 1);
    uint64_t n, next, pte;
    SpyreLeaf *lf;
    uint32_t st;

    assert(bql_locked());
    if (pe->epoch != s->mmu_epoch || pe->tag != tag || pe->ctx != e->ctx) {
        /* Walk it (and fill the leaf-table cache entry), or fault. */
        st = spyre_e_translate(e, va, write, t);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        *run = MIN(len, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        if (pe->epoch != s->mmu_epoch || pe->tag != tag ||
            pe->ctx != e->ctx) {
            return SPYRE_STATUS_OK;
        }
    }
    lf = spyre_leaf_get(w, pe->table);
    if (!lf) {
        return spyre_e_translate(e, va, write, t);
    }
    pte = le64_to_cpu(lf->ptes[idx]);
    if (!(pte & SPYRE_PTE_VALID) || (write && !(pte & SPYRE_PTE_WRITE)) ||
        ((pte & SPYRE_PTE_DEVMEM) &&
         (pte & SPYRE_PTE_ADDR_MASK) + SPYRE_PAGE_SIZE > s->mem_size)) {
        /* The walk records the fault precisely. */
        st = spyre_e_translate(e, va, write, t);
        *run = MIN(len, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        return st;
    }
    t->devmem = !!(pte & SPYRE_PTE_DEVMEM);
    t->addr = (pte & SPYRE_PTE_ADDR_MASK) + (va & SPYRE_PAGE_MASK);
    n = MIN(len, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
    next = (pte & SPYRE_PTE_ADDR_MASK) + SPYRE_PAGE_SIZE;
    for (idx++; idx < ARRAY_SIZE(lf->ptes) && n < len;
         idx++, next += SPYRE_PAGE_SIZE) {
        pte = le64_to_cpu(lf->ptes[idx]);
        if (!(pte & SPYRE_PTE_VALID) || (write && !(pte & SPYRE_PTE_WRITE)) ||
            !!(pte & SPYRE_PTE_DEVMEM) != t->devmem ||
            (pte & SPYRE_PTE_ADDR_MASK) != next ||
            (t->devmem && next + SPYRE_PAGE_SIZE > s->mem_size)) {
            break;
        }
        n = MIN(len, n + SPYRE_PAGE_SIZE);
    }
    *run = n;
    return SPYRE_STATUS_OK;
}

/* BQL held.  Access a translated target; @len stays within one page. */
uint32_t spyre_e_access(SpyreExec *e, const SpyreTarget *t,
                        uint64_t va, void *buf, uint32_t len,
                        bool write)
{
    SpyreState *s = e->s;

    assert(bql_locked());
    e->q->job.writes += write;
    if (t->devmem) {
        if (write) {
            memcpy(s->devmem_ptr + t->addr, buf, len);
            memory_region_set_dirty(&s->devmem, t->addr, len);
        } else {
            memcpy(buf, s->devmem_ptr + t->addr, len);
        }
    } else if (spyre_dma_rw(s, t->addr, buf, len,
                            write ? DMA_DIRECTION_FROM_DEVICE :
                                    DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
        e->err_va = va;
        return SPYRE_STATUS_DMA_ERROR;
    }
    s->tel[SPYRE_TEL_BYTES] += len;
    return SPYRE_STATUS_OK;
}

/* BQL held.  Read or write @len bytes at @va, any alignment. */
uint32_t spyre_e_rw(SpyreExec *e, uint64_t va, void *buf,
                    uint64_t len, bool write)
{
    uint8_t *p = buf;

    assert(bql_locked());
    while (len) {
        uint32_t n = MIN(len, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        SpyreTarget t;
        uint32_t st;

        st = spyre_e_translate(e, va, write, &t);
        if (st == SPYRE_STATUS_OK) {
            st = spyre_e_access(e, &t, va, p, n, write);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        va += n;
        p += n;
        len -= n;
    }
    return SPYRE_STATUS_OK;
}

/*
 * BQL held.  Wait for the device-memory copies that workers run with the
 * BQL released (spyre_part_rows()): each is a memcpy of at most about
 * SPYRE_ROWS_BATCH_BYTES (1 MiB) that needs nothing else, and none can start
 * meanwhile, as each one is set up under the BQL.  Sleeps rather than
 * spins, so that on a small host the copier gets the CPU.
 */
void spyre_drain_copies(SpyreState *s)
{
    assert(bql_locked());
    while (qatomic_load_acquire(&s->ncopying)) {
        qemu_event_reset(&s->copy_done);
        /* Reset before the re-check, or a set in between would be lost. */
        smp_mb();
        if (!qatomic_load_acquire(&s->ncopying)) {
            break;
        }
        qemu_event_wait(&s->copy_done);
    }
}

/* BQL held.  Translations changed: invalidate cached ones, drain copies. */
void spyre_mmu_changed(SpyreState *s)
{
    assert(bql_locked());
    s->mmu_epoch++;
    spyre_drain_copies(s);
}
