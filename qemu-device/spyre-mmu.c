/*
 * Spyre card model: DMA, the device MMU and tiles
 *
 * Owns DMA to system memory (spyre_map_sys, spyre_dma_rw: RAM only,
 * never the card's own BARs, always through dma_memory_map()), mapping a
 * translated target of either memory (spyre_map_target), the page
 * walk of a context, the per-worker TLB and leaf-table cache (valid
 * while their epoch is SpyreState.mmu_epoch), fault records, memory
 * phases (spyre_e_mem_begin/end: behind a vIOMMU, with the BQL),
 * the accesses of a running job to its device VAs (spyre_e_translate,
 * spyre_e_translate_run for runs of pages, spyre_e_access, spyre_e_rw),
 * tiles (operands mapped to host memory in a memory phase, computed with
 * no lock held: spyre_e_map_tile, spyre_e_end_tile) and
 * spyre_drain_tiles(), which waits for the tiles in flight.
 *
 * Locks: the functions that translate or map run in a memory phase (the
 * device lock held, and the BQL behind a vIOMMU); spyre_map_release(),
 * spyre_span_release() and the spyre_tile_* accessors need no lock; the
 * rest say what they need.
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
 * Memory phase.  Map up to *@len bytes of system memory at DMA address
 * @addr (through the device's PCI address space, so through a vIOMMU if
 * there is one) into @m, shortening *@len to what maps as one piece.
 * Only RAM is reachable, and never the card's own BARs: what
 * dma_memory_map() can only bounce (MMIO, unassigned addresses) or what
 * belongs to this card is refused with nothing read or written.
 * Returns false if nothing could be mapped.
 */
bool spyre_map_sys(SpyreState *s, dma_addr_t addr, uint64_t *len, bool write,
                   SpyreMap *m)
{
    AddressSpace *as = pci_get_address_space(PCI_DEVICE(s));
    DMADirection dir = write ? DMA_DIRECTION_FROM_DEVICE :
                               DMA_DIRECTION_TO_DEVICE;
    dma_addr_t n = *len;
    MemoryRegion *mr = NULL;
    ram_addr_t off;
    void *p;

    assert(!s->dma_bql || bql_locked());
    if (!n || addr + n < addr) {
        return false;
    }
    p = dma_memory_map(as, addr, &n, dir, spyre_dma_attrs);
    if (!p) {
        trace_spyre_dma_error(addr, *len, write, MEMTX_DECODE_ERROR);
        return false;
    }
    if (n) {
        mr = memory_region_from_host(p, &off);
    }
    if (!mr || memory_region_owner(mr) == OBJECT(s)) {
        if (mr) {
            trace_spyre_dma_self(addr, *len);
        } else {
            trace_spyre_dma_error(addr, *len, write, MEMTX_DECODE_ERROR);
        }
        dma_memory_unmap(as, p, n, dir, 0);
        return false;
    }
    m->host = p;
    m->len = n;
    m->dev_off = 0;
    m->sys = true;
    *len = n;
    return true;
}

/*
 * Memory phase.  Map up to *@len bytes at translated target @t into @m:
 * device memory as a pointer into the BAR, system memory with
 * spyre_map_sys() (*@len may shrink).  Returns false as spyre_map_sys().
 */
bool spyre_map_target(SpyreState *s, const SpyreTarget *t, uint64_t *len,
                      bool write, SpyreMap *m)
{
    if (t->devmem) {
        m->host = s->devmem_ptr + t->addr;
        m->len = *len;
        m->dev_off = t->addr;
        m->sys = false;
        return true;
    }
    return spyre_map_sys(s, t->addr, len, write, m);
}

/* No lock needed.  Unmap @m (marking it dirty if @write). */
void spyre_map_release(SpyreState *s, const SpyreMap *m, bool write)
{
    if (m->sys) {
        dma_memory_unmap(pci_get_address_space(PCI_DEVICE(s)), m->host,
                         m->len, write ? DMA_DIRECTION_FROM_DEVICE :
                                         DMA_DIRECTION_TO_DEVICE,
                         write ? m->len : 0);
    } else if (write) {
        memory_region_set_dirty(&s->devmem, m->dev_off, m->len);
    }
}

/*
 * Memory phase.  DMA to or from system memory as spyre_map_sys() maps it
 * (one translation per piece).
 */
MemTxResult spyre_dma_rw(SpyreState *s, dma_addr_t addr, void *buf,
                         dma_addr_t len, DMADirection dir)
{
    bool write = dir == DMA_DIRECTION_FROM_DEVICE;
    uint8_t *p = buf;

    if (addr + len < addr) {
        return MEMTX_DECODE_ERROR;
    }
    while (len) {
        uint64_t n = len;
        SpyreMap m;

        if (!spyre_map_sys(s, addr, &n, write, &m)) {
            return MEMTX_DECODE_ERROR;
        }
        if (write) {
            memcpy(m.host, p, n);
        } else {
            memcpy(p, m.host, n);
        }
        spyre_map_release(s, &m, write);
        addr += n;
        p += n;
        len -= n;
    }
    return MEMTX_OK;
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

    SPYRE_ASSERT_PHASE(s);
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
        root = qatomic_read(&s->ctx_root[ctx]);
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

/* Device lock held.  Queue a fault record and signal it. */
void spyre_record_fault(SpyreState *s, unsigned int ctx,
                        unsigned int queue, uint64_t va, bool write,
                        unsigned int reason, bool direct)
{
    SPYRE_ASSERT_PHASE(s);
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
 * Memory phase.  Translate @va in the context of @e's job, through the
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
    uint64_t epoch = qatomic_read(&s->mmu_epoch);
    uint64_t leaf = 0;
    bool writable = false;
    int reason;

    SPYRE_ASSERT_PHASE(s);
    if (te->epoch == epoch && te->vpn == vpn && te->ctx == e->ctx &&
        (te->writable || !write)) {
        t->devmem = te->devmem;
        t->addr = te->page | (va & SPYRE_PAGE_MASK);
        return SPYRE_STATUS_OK;
    }
    if (pe->epoch == epoch && pe->tag == tag && pe->ctx == e->ctx) {
        leaf = pe->table;
    }
    reason = spyre_mmu_translate(s, e->ctx, va, write, t, &writable, &leaf);
    if (leaf && va < SPYRE_VA_LIMIT) {
        pe->epoch = epoch;
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
    te->epoch = epoch;
    te->vpn = vpn;
    te->ctx = e->ctx;
    te->writable = writable;
    te->devmem = t->devmem;
    te->page = t->addr & ~SPYRE_PAGE_MASK;
    return SPYRE_STATUS_OK;
}

/*
 * Memory phase.  The contents of the leaf table at DMA address @table from the
 * worker's cache, read whole on a miss into the least recently used
 * entry; NULL if it cannot be read (the page walk reports that).
 */
static SpyreLeaf *spyre_leaf_get(SpyreWorker *w, uint64_t table)
{
    SpyreState *s = w->s;
    SpyreLeaf *lf, *old = &w->leaf[0];
    uint64_t epoch = qatomic_read(&s->mmu_epoch);
    unsigned int i;

    for (i = 0; i < SPYRE_LEAF_CACHE; i++) {
        lf = &w->leaf[i];
        if (lf->epoch == epoch && lf->table == table) {
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
    old->epoch = epoch;
    old->used = ++w->leaf_clock;
    return old;
}

/*
 * Memory phase.  Translate @va as spyre_e_translate() does, and find how many
 * of the @len bytes from @va on map to one contiguous run of the same
 * target (device memory or DMA addresses) with the access allowed.  The
 * leaf table of @va is read whole, once, into the worker's leaf cache
 * (valid while the MMU epoch is), so that runs of pages cost no walk
 * each (a large contiguous translation); @len within @va's page
 * translates through the worker's TLB alone (a gathered row: no leaf
 * read).  *@run gets the length of the run (at least to the end of @va's
 * page, or @len); a page after the first that may not be accessed ends
 * the run, and the next call reports it.
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
    uint64_t epoch = qatomic_read(&s->mmu_epoch);
    uint64_t n, next, pte;
    SpyreLeaf *lf;
    uint32_t st;

    SPYRE_ASSERT_PHASE(s);
    if (len <= SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK)) {
        /* Within @va's page: the TLB (a gathered row), no leaf read. */
        *run = len;
        return spyre_e_translate(e, va, write, t);
    }
    if (pe->epoch != epoch || pe->tag != tag || pe->ctx != e->ctx) {
        /* Walk it (and fill the leaf-table cache entry), or fault. */
        st = spyre_e_translate(e, va, write, t);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        *run = MIN(len, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        if (pe->epoch != epoch || pe->tag != tag || pe->ctx != e->ctx) {
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

/* Memory phase.  Access a translated target; @len stays within one page. */
uint32_t spyre_e_access(SpyreExec *e, const SpyreTarget *t,
                        uint64_t va, void *buf, uint32_t len,
                        bool write)
{
    SpyreState *s = e->s;

    SPYRE_ASSERT_PHASE(s);
    e->io_writes += write;
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
    e->io_bytes += len;
    return SPYRE_STATUS_OK;
}

/* Memory phase.  Read or write @len bytes at @va, any alignment. */
uint32_t spyre_e_rw(SpyreExec *e, uint64_t va, void *buf,
                    uint64_t len, bool write)
{
    uint8_t *p = buf;

    SPYRE_ASSERT_PHASE(e->s);
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

/* ---- Memory phases ------------------------------------------------------ */

/*
 * Device lock held.  Enter a memory phase for @e once the VM runs and no
 * drain is in progress; behind a vIOMMU, take the BQL too (giving the
 * device lock up meanwhile, as the lock order requires).  Returns
 * SPYRE_STATUS_OK, or SPYRE_EXEC_DROPPED (the job's queue was reset, or
 * the card is going away) with the device lock only.  The doorbell
 * executor already holds both locks.
 */
uint32_t spyre_e_mem_begin(SpyreExec *e)
{
    SpyreState *s = e->s;

    if (e->w->doorbell) {
        assert(bql_locked());
        return spyre_e_alive(e) ? SPYRE_STATUS_OK : SPYRE_EXEC_DROPPED;
    }
    for (;;) {
        if (!spyre_e_alive(e)) {
            return SPYRE_EXEC_DROPPED;
        }
        if (!s->vm_running) {
            spyre_e_wait_running(e);
            continue;
        }
        if (s->draining) {
            qemu_cond_wait(&s->tiles_cond, &s->lock);
            continue;
        }
        if (!s->dma_bql) {
            return SPYRE_STATUS_OK;
        }
        spyre_unlock(s);
        bql_lock();     /* a vIOMMU translates and faults under it */
        spyre_lock(s);
        e->w->lock_ns = spyre_now();
        /* Drains and VM stops hold the BQL: neither is in progress. */
        if (!spyre_e_alive(e) || !s->vm_running) {
            bql_unlock();
            continue;
        }
        return SPYRE_STATUS_OK;
    }
}

/* Device lock held.  Add what @e's memory phases counted to the card's. */
void spyre_e_fold(SpyreExec *e)
{
    e->s->tel[SPYRE_TEL_BYTES] += e->io_bytes;
    e->q->job.writes += e->io_writes;
    e->io_bytes = 0;
    e->io_writes = 0;
}

/* Leave a state phase: the device lock stays held. */
void spyre_e_mem_end(SpyreExec *e)
{
    spyre_e_fold(e);
    if (!e->w->doorbell && e->s->dma_bql) {
        bql_unlock();
    }
}

/*
 * Device lock held.  Enter a data phase (see spyre.h): as
 * spyre_e_mem_begin(), then count it in ntiles and, without a vIOMMU,
 * let the device lock go.  Returns SPYRE_STATUS_OK holding the locks of
 * the phase (behind a vIOMMU: the BQL and the device lock; else none),
 * or SPYRE_EXEC_DROPPED with the device lock only.  The doorbell
 * executor's phases hold both locks and are not counted (no drain can
 * run while it holds the BQL).
 */
uint32_t spyre_e_data_begin(SpyreExec *e)
{
    SpyreState *s = e->s;
    uint32_t st = spyre_e_mem_begin(e);

    if (st != SPYRE_STATUS_OK || e->w->doorbell) {
        return st;
    }
    s->ntiles++;
    if (!s->dma_bql) {
        spyre_unlock(s);
    }
    return SPYRE_STATUS_OK;
}

/* Let the locks of a data phase go (it stays counted): compute follows. */
void spyre_e_data_unlock(SpyreExec *e)
{
    if (!e->w->doorbell && e->s->dma_bql) {
        bql_unlock();
        spyre_unlock(e->s);
    }
}

/*
 * After spyre_e_data_unlock(), no lock held: end the data phase.  The
 * device lock is held on return; the caller re-checks its job.
 */
void spyre_e_data_end(SpyreExec *e)
{
    SpyreState *s = e->s;

    if (e->w->doorbell) {
        spyre_e_fold(e);
        return;
    }
    spyre_lock(s);
    e->w->lock_ns = spyre_now();
    spyre_e_fold(e);
    spyre_tile_put(s);
}

/*
 * Device lock held.  spyre_e_rw() in a data phase of its own.  Returns a
 * SPYRE_STATUS_* or SPYRE_EXEC_DROPPED; the device lock is held on
 * return.
 */
uint32_t spyre_e_rw_phase(SpyreExec *e, uint64_t va, void *buf, uint64_t len,
                          bool write)
{
    uint32_t st = spyre_e_data_begin(e);

    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    st = spyre_e_rw(e, va, buf, len, write);
    spyre_e_data_unlock(e);
    spyre_e_data_end(e);
    return st;
}

/* ---- Tiles -------------------------------------------------------------- */

/* No lock needed.  Unmap every piece of @sp. */
void spyre_span_release(SpyreState *s, SpyreSpan *sp)
{
    uint32_t i;

    for (i = 0; i < sp->nmaps; i++) {
        spyre_map_release(s, &sp->map[i], sp->write);
    }
    sp->nmaps = 0;
}

/*
 * Memory phase.  Map [@va, @va + @len) of @e's context into @sp as
 * pieces of host memory: runs of pages from the leaf-table cache, device
 * memory as pointers into the BAR, system memory mapped with
 * spyre_map_sys().  At most SPYRE_TILE_BYTES.  Returns a SPYRE_STATUS_*
 * (a fault is noted in @e as by spyre_e_translate()); nothing stays
 * mapped on failure.
 */
uint32_t spyre_e_map_span(SpyreExec *e, SpyreSpan *sp, uint64_t va,
                          uint64_t len, bool write)
{
    SpyreState *s = e->s;
    uint32_t st;

    SPYRE_ASSERT_PHASE(s);
    assert(len <= SPYRE_TILE_BYTES);
    sp->nmaps = 0;
    sp->len = len;
    sp->write = write;
    if (len && spyre_span_wraps(va, len)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    while (len) {
        SpyreTarget t;
        uint64_t run;

        st = spyre_e_translate_run(e, va, len, write, &t, &run);
        if (st != SPYRE_STATUS_OK) {
            spyre_span_release(s, sp);
            return st;
        }
        while (run) {
            SpyreMap *m = &sp->map[sp->nmaps];
            uint64_t n = run;

            if (sp->nmaps == SPYRE_TILE_MAPS) {
                /* Pieces smaller than pages: not memory a tile can use. */
                e->err_va = va;
                spyre_span_release(s, sp);
                return SPYRE_STATUS_DMA_ERROR;
            }
            if (!spyre_map_target(s, &t, &n, write, m)) {
                e->err_va = va;
                spyre_span_release(s, sp);
                return SPYRE_STATUS_DMA_ERROR;
            }
            sp->nmaps++;
            va += n;
            len -= n;
            run -= n;
            t.addr += n;
        }
    }
    e->io_bytes += sp->len;
    e->io_writes += write;
    return SPYRE_STATUS_OK;
}

/*
 * Device lock held, not in a memory phase.  Map the @n operands @o of a
 * tile into e->span[0..n) in one memory phase and count the tile in
 * flight.  Returns SPYRE_STATUS_OK with *no lock held*: the caller
 * computes the tile, then calls spyre_e_end_tile().  Else returns a
 * SPYRE_STATUS_* or SPYRE_EXEC_DROPPED with the device lock held and
 * nothing mapped.
 */
uint32_t spyre_e_map_tile(SpyreExec *e, const SpyreOpnd *o, unsigned int n)
{
    SpyreState *s = e->s;
    unsigned int i;
    uint32_t st;

    assert(!e->w->doorbell && n <= SPYRE_TILE_OPNDS);
    st = spyre_e_data_begin(e);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    for (i = 0; i < n; i++) {
        st = spyre_e_map_span(e, &e->span[i], o[i].va, o[i].len, o[i].write);
        if (st != SPYRE_STATUS_OK) {
            while (i--) {
                spyre_span_release(s, &e->span[i]);
            }
            spyre_e_data_unlock(e);
            spyre_e_data_end(e);
            return st;
        }
    }
    spyre_e_data_unlock(e);
    return SPYRE_STATUS_OK;
}

/* No lock held.  The tile is computed: unmap it, take the device lock. */
void spyre_e_end_tile(SpyreExec *e, unsigned int n)
{
    SpyreState *s = e->s;
    unsigned int i;

    for (i = 0; i < n; i++) {
        spyre_span_release(s, &e->span[i]);
    }
    spyre_e_data_end(e);
}

static uint8_t *spyre_tbuf(SpyreExec *e, unsigned int i)
{
    if (!e->tbuf[i]) {
        e->tbuf[i] = g_malloc(SPYRE_TILE_BYTES);
    }
    return e->tbuf[i];
}

/*
 * Tile compute.  The bytes of operand @i: in place when it is one piece
 * of host memory, else gathered into a tile buffer.
 */
const void *spyre_tile_src(SpyreExec *e, unsigned int i)
{
    SpyreSpan *sp = &e->span[i];
    uint8_t *p, *b;
    uint32_t k;

    if (sp->nmaps == 1) {
        return sp->map[0].host;
    }
    b = p = spyre_tbuf(e, i);
    for (k = 0; k < sp->nmaps; k++) {
        memcpy(p, sp->map[k].host, sp->map[k].len);
        p += sp->map[k].len;
    }
    return b;
}

/*
 * Tile compute.  Where to write operand @i: in place when it is one
 * piece of host memory, else a tile buffer that spyre_tile_dst_done()
 * scatters.
 */
void *spyre_tile_dst(SpyreExec *e, unsigned int i)
{
    SpyreSpan *sp = &e->span[i];

    return sp->nmaps == 1 ? sp->map[0].host : spyre_tbuf(e, i);
}

void spyre_tile_dst_done(SpyreExec *e, unsigned int i, void *dst)
{
    SpyreSpan *sp = &e->span[i];
    const uint8_t *p = dst;
    uint32_t k;

    if (sp->nmaps == 1) {
        return;
    }
    for (k = 0; k < sp->nmaps; k++) {
        memcpy(sp->map[k].host, p, sp->map[k].len);
        p += sp->map[k].len;
    }
}

/* Device lock held.  A tile counted in ntiles is released. */
void spyre_tile_put(SpyreState *s)
{
    assert(s->ntiles);
    if (!--s->ntiles) {
        qemu_cond_broadcast(&s->tiles_cond);
    }
}

/*
 * BQL and device lock held.  Wait until no tile is in flight: no memory
 * phase starts meanwhile (s->draining), and each tile ends after its own
 * bounded work (see spyre.h).  The device lock is given up while waiting;
 * the caller keeps it from the return on, so no tile starts before it
 * has changed what it drained for.
 */
void spyre_drain_tiles(SpyreState *s)
{
    assert(bql_locked());
    if (!s->ntiles) {
        return;
    }
    s->draining = true;
    while (s->ntiles) {
        qemu_cond_wait(&s->tiles_cond, &s->lock);
    }
    s->draining = false;
    qemu_cond_broadcast(&s->tiles_cond);
}

/*
 * BQL and device lock held.  Translations changed: invalidate cached
 * ones, drain the tiles mapped through them.
 */
void spyre_mmu_changed(SpyreState *s)
{
    assert(bql_locked());
    qatomic_set(&s->mmu_epoch, s->mmu_epoch + 1);
    spyre_drain_tiles(s);
}
