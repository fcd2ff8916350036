/*
 * Spyre card model: BAR0 registers
 *
 * Owns the MMIO dispatch of BAR0 (32- and 64-bit accesses, the latch that
 * makes a 64-bit register read as two halves consistent), the global
 * registers (identity, SCRATCH, CONTROL, RESET, interrupts, MMU
 * invalidation, fault FIFO, context roots, telemetry, DBG_INJECT with
 * the FATAL stop of the card) and the queue pages (configuration,
 * CONTROL, DOORBELL, RESET).
 *
 * Locks: every function here runs with the BQL (MMIO dispatch takes it;
 * so does QOM for the dbg-inject property) and the device lock held.  A
 * DOORBELL write runs the doorbell executor (spyre_db_run) in the
 * writing vCPU; the messages of the jobs it ends are sent when the
 * access is done (spyre_irq_flush).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "trace.h"

#include "spyre.h"

bool spyre_queue_config_valid(SpyreState *s, SpyreQueue *q,
                              uint32_t control)
{
    unsigned int vector = SPYRE_Q_CONTROL_VECTOR_GET(control);

    if (vector == SPYRE_ERROR_VECTOR || vector >= s->nvectors) {
        return false;
    }
    if (SPYRE_Q_CONTROL_PRIO_GET(control) > SPYRE_Q_PRIO_HIGH) {
        return false;
    }
    if (q->entries < SPYRE_RING_MIN_ENTRIES ||
        q->entries > SPYRE_RING_MAX_ENTRIES || !is_power_of_2(q->entries)) {
        return false;
    }
    if (q->ring_base & (SPYRE_RING_ENTRY_SIZE - 1) ||
        q->ring_base + (uint64_t)q->entries * SPYRE_RING_ENTRY_SIZE <
        q->ring_base) {
        return false;
    }
    if (q->compl_addr & (SPYRE_COMPL_ALIGN - 1) ||
        q->compl_addr + sizeof(struct spyre_hw_completion) < q->compl_addr) {
        return false;
    }
    return true;
}

/* Q_RESET: abort the job in progress, if any, and disable the queue. */
static void spyre_queue_reset(SpyreState *s, SpyreQueue *q)
{
    assert(bql_locked());
    trace_spyre_queue_reset(q->id, q->job_state);
    spyre_drain_tiles(s);
    /* Disarmed first: the ABORTED record is written as it is. */
    q->inject = 0;
    q->inject_count = 0;
    if (q->job_state != SPYRE_JOB_NONE) {
        spyre_end_job(s, q, SPYRE_STATUS_ABORTED, 0, false, false);
    }
    q->gen++;
    spyre_set_job_state(s, q, SPYRE_JOB_NONE);
    q->head = 0;
    q->tail = 0;
    q->busy_ns = 0;
    q->control &= ~SPYRE_Q_CONTROL_ENABLE;
    q->status = SPYRE_QS_DISABLED;
    /* Waiters (paused workers, GEMM owners) notice the new generation. */
    spyre_kick(s);
}

static bool spyre_reg_is_64(SpyreState *s, hwaddr reg)
{
    switch (reg) {
    case SPYRE_REG_CAPS:
    case SPYRE_REG_DEVMEM_SIZE:
    case SPYRE_REG_CLOCK:
    case SPYRE_REG_MMU_INVAL:
    case SPYRE_REG_FAULT_VA:
    case SPYRE_REG_FAULT_INFO:
    case SPYRE_REG_TEL_JOBS:
    case SPYRE_REG_TEL_CMDS:
    case SPYRE_REG_TEL_BUSY_NS:
    case SPYRE_REG_TEL_BYTES:
    case SPYRE_REG_TEL_FAULTS:
    case SPYRE_REG_TEL_ACTIVE_NS:
        return true;
    }
    if (reg >= SPYRE_REG_CTX_ROOT(0) &&
        reg < SPYRE_REG_CTX_ROOT(SPYRE_MAX_CONTEXTS)) {
        return true;
    }
    if (reg >= SPYRE_QUEUE_BASE) {
        switch ((reg - SPYRE_QUEUE_BASE) % SPYRE_QUEUE_STRIDE) {
        case SPYRE_Q_RING_BASE:
        case SPYRE_Q_COMPL_ADDR:
        case SPYRE_Q_LAST_SEQNO:
        case SPYRE_Q_BUSY_NS:
            return true;
        }
    }
    return false;
}

static SpyreQueue *spyre_reg_queue(SpyreState *s, hwaddr reg, hwaddr *off)
{
    uint64_t qid;

    if (reg < SPYRE_QUEUE_BASE) {
        return NULL;
    }
    qid = (reg - SPYRE_QUEUE_BASE) / SPYRE_QUEUE_STRIDE;
    *off = (reg - SPYRE_QUEUE_BASE) % SPYRE_QUEUE_STRIDE;
    return qid < s->nqueues ? &s->queues[qid] : NULL;
}

static uint64_t spyre_caps(void)
{
    return SPYRE_CAP_FP16 | SPYRE_CAP_BF16 | SPYRE_CAP_FP8 | SPYRE_CAP_INT8 |
           SPYRE_CAP_MMU | SPYRE_CAP_SEM | SPYRE_CAP_KERNEL;
}

/* Read the register at @reg (8-aligned for 64-bit ones). */
static uint64_t spyre_reg_read(SpyreState *s, hwaddr reg)
{
    SpyreQueue *q;
    hwaddr off;

    switch (reg) {
    case SPYRE_REG_ID:
        return SPYRE_ID_MAGIC;
    case SPYRE_REG_VERSION:
        return SPYRE_HW_VERSION_MAJOR << 16 | SPYRE_HW_VERSION_MINOR;
    case SPYRE_REG_CAPS:
        return spyre_caps();
    case SPYRE_REG_NUM_QUEUES:
        return s->nqueues;
    case SPYRE_REG_NUM_CORES:
        return s->ncores;
    case SPYRE_REG_NUM_CONTEXTS:
        return s->ncontexts;
    case SPYRE_REG_NUM_VECTORS:
        return s->nvectors;
    case SPYRE_REG_DEVMEM_SIZE:
        return s->mem_size;
    case SPYRE_REG_SCRATCH:
        return s->scratch;
    case SPYRE_REG_CLOCK:
        return spyre_clock(s);
    case SPYRE_REG_CONTROL:
        return s->control;
    case SPYRE_REG_STATUS:
        return SPYRE_DEV_STATUS_READY |
               (s->fatal ? SPYRE_DEV_STATUS_FATAL : 0);
    case SPYRE_REG_IRQ_STATUS:
        return s->irq_status;
    case SPYRE_REG_IRQ_MASK:
        return s->irq_mask;
    case SPYRE_REG_MMU_INVAL_REQ:
        return s->inval_req;
    case SPYRE_REG_MMU_INVAL_ACK:
        return s->inval_ack;
    case SPYRE_REG_FAULT_COUNT:
        return s->fault_count;
    case SPYRE_REG_FAULT_LOST:
        return s->fault_lost;
    case SPYRE_REG_FAULT_VA:
        return s->fault_count ? s->fault_va[s->fault_head] : 0;
    case SPYRE_REG_FAULT_INFO:
        return s->fault_count ? s->fault_info[s->fault_head] : 0;
    case SPYRE_REG_TEL_JOBS:
    case SPYRE_REG_TEL_CMDS:
    case SPYRE_REG_TEL_BUSY_NS:
    case SPYRE_REG_TEL_BYTES:
    case SPYRE_REG_TEL_FAULTS:
        return s->tel[(reg - SPYRE_REG_TEL_JOBS) / 8];
    case SPYRE_REG_TEL_ACTIVE_NS:
        return s->tel[SPYRE_TEL_ACTIVE_NS] +
               (s->njobs ? spyre_clock(s) - s->active_start : 0);
    }
    if (reg >= SPYRE_REG_CTX_ROOT(0) &&
        reg < SPYRE_REG_CTX_ROOT(SPYRE_MAX_CONTEXTS)) {
        uint64_t ctx = (reg - SPYRE_REG_CTX_ROOT(0)) / 8;

        return ctx < s->ncontexts ? s->ctx_root[ctx] : 0;
    }

    q = spyre_reg_queue(s, reg, &off);
    if (q) {
        switch (off) {
        case SPYRE_Q_DOORBELL:
            return q->tail;
        case SPYRE_Q_HEAD:
            return q->head;
        case SPYRE_Q_RING_BASE:
            return q->ring_base;
        case SPYRE_Q_RING_ENTRIES:
            return q->entries;
        case SPYRE_Q_CONTROL:
            return q->control;
        case SPYRE_Q_COMPL_ADDR:
            return q->compl_addr;
        case SPYRE_Q_STATUS:
            return q->status;
        case SPYRE_Q_LAST_SEQNO:
            return q->last_seqno;
        case SPYRE_Q_BUSY_NS:
            return q->busy_ns;
        }
    }
    return 0;
}

static void spyre_mmu_inval(SpyreState *s, uint64_t val)
{
    assert(bql_locked());
    /*
     * Workers translate in memory phases (the BQL held) and check their
     * TLB against mmu_epoch at each; spyre_mmu_changed() drains the tiles
     * mapped before: once this write returns, no access uses a
     * translation read before it.  Acknowledge at once.
     */
    spyre_mmu_changed(s);
    s->inval_req++;
    trace_spyre_mmu_inval(val, s->inval_req);
    s->inval_ack = s->inval_req;
}

static void spyre_q_write_control(SpyreState *s, SpyreQueue *q, uint32_t val)
{
    bool enable = val & SPYRE_Q_CONTROL_ENABLE;

    val &= SPYRE_Q_CONTROL_MASK;
    if (enable && !spyre_queue_config_valid(s, q, val)) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "spyre: queue %u: bad configuration, not enabled "
                      "(control 0x%x entries %u ring 0x%" PRIx64
                      " compl 0x%" PRIx64 ")\n", q->id, val, q->entries,
                      q->ring_base, q->compl_addr);
        trace_spyre_queue_bad_config(q->id, val);
        return;
    }
    if (enable && !(q->control & SPYRE_Q_CONTROL_ENABLE)) {
        q->ready_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    }
    q->control = val;
    if (enable) {
        q->vector = SPYRE_Q_CONTROL_VECTOR_GET(val);
    }
    if (q->job_state == SPYRE_JOB_NONE) {
        q->status = spyre_queue_rest_status(q);
    }
    trace_spyre_queue_control(q->id, val, q->status);
    spyre_kick(s);
}

static void spyre_q_write(SpyreState *s, SpyreQueue *q, hwaddr off,
                          uint64_t val, unsigned size)
{
    bool config_ok = q->status == SPYRE_QS_DISABLED &&
                     q->job_state == SPYRE_JOB_NONE;

    switch (off) {
    case SPYRE_Q_DOORBELL:
        if (q->status == SPYRE_QS_DISABLED) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "spyre: queue %u: doorbell while disabled\n", q->id);
            return;
        }
        if (val >= q->entries) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "spyre: queue %u: doorbell %" PRIu64
                          " beyond ring of %u\n", q->id, val, q->entries);
            trace_spyre_doorbell_bad(q->id, val);
            return;
        }
        trace_spyre_doorbell(q->id, val, q->head);
        if (q->job_state == SPYRE_JOB_NONE && q->head == q->tail) {
            q->ready_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        }
        q->tail = val;
        s->sched_seq++;
        spyre_db_run(s, q);
        return;
    case SPYRE_Q_RING_BASE:
    case SPYRE_Q_RING_BASE + 4:
    case SPYRE_Q_COMPL_ADDR:
    case SPYRE_Q_COMPL_ADDR + 4:
    case SPYRE_Q_RING_ENTRIES:
        if (!config_ok) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "spyre: queue %u: configuration write while "
                          "enabled\n", q->id);
            return;
        }
        break;
    }

    switch (off) {
    case SPYRE_Q_RING_BASE:
        q->ring_base = size == 8 ? val : deposit64(q->ring_base, 0, 32, val);
        break;
    case SPYRE_Q_RING_BASE + 4:
        q->ring_base = deposit64(q->ring_base, 32, 32, val);
        break;
    case SPYRE_Q_COMPL_ADDR:
        q->compl_addr = size == 8 ? val :
                        deposit64(q->compl_addr, 0, 32, val);
        break;
    case SPYRE_Q_COMPL_ADDR + 4:
        q->compl_addr = deposit64(q->compl_addr, 32, 32, val);
        break;
    case SPYRE_Q_RING_ENTRIES:
        q->entries = val;
        break;
    case SPYRE_Q_CONTROL:
        spyre_q_write_control(s, q, val);
        break;
    case SPYRE_Q_RESET:
        if (val == 1) {
            spyre_queue_reset(s, q);
        }
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "spyre: queue %u: write to read-only offset 0x%"
                      HWADDR_PRIx "\n", q->id, off);
        break;
    }
}

/* Does DBG_INJECT take @kind on queue @qid? (Also for QOM, post_load.) */
bool spyre_dbg_inject_valid(SpyreState *s, unsigned int qid,
                            unsigned int kind)
{
    return qid < s->nqueues && kind >= SPYRE_DBG_HANG &&
           kind <= SPYRE_DBG_KIND_MAX;
}

/*
 * DBG_FATAL: the card stops as at a fatal error.  Every job in progress
 * is dropped as a queue reset drops it (its worker lets go without
 * touching guest memory or queue state again), but without a completion
 * record: it stays parked (SPYRE_JOB_HUNG, queue BUSY) until Q_RESET or a
 * device reset, and no job starts until spyre_reset().
 */
static void spyre_fatal(SpyreState *s)
{
    uint32_t i, njobs = 0;

    assert(bql_locked());
    if (s->fatal) {
        return;
    }
    s->fatal = true;
    spyre_drain_tiles(s);
    for (i = 0; i < s->nqueues; i++) {
        SpyreQueue *q = &s->queues[i];

        if (q->job_state != SPYRE_JOB_NONE) {
            q->gen++;
            spyre_set_job_state(s, q, SPYRE_JOB_HUNG);
            q->status = SPYRE_QS_BUSY;
            njobs++;
        }
    }
    trace_spyre_fatal(njobs);
    /* Waiters (paused workers, GEMM owners) notice the new generations. */
    spyre_kick(s);
    spyre_raise_error(s, SPYRE_IRQ_FATAL, false);
}

void spyre_dbg_inject(SpyreState *s, uint32_t val)
{
    unsigned int qid = SPYRE_DBG_INJECT_QUEUE(val);
    unsigned int kind = SPYRE_DBG_INJECT_KIND(val);
    unsigned int count = SPYRE_DBG_INJECT_COUNT(val);
    SpyreQueue *q;

    assert(bql_locked());
    if (!spyre_dbg_inject_valid(s, qid, kind)) {
        qemu_log_mask(LOG_GUEST_ERROR, "spyre: bad DBG_INJECT 0x%x\n", val);
        return;
    }
    trace_spyre_dbg_inject(qid, kind, count);
    q = &s->queues[qid];
    if (kind == SPYRE_DBG_FATAL) {
        /* Applies at once; it replaces what was armed with nothing. */
        q->inject = 0;
        q->inject_count = 0;
        spyre_fatal(s);
        return;
    }
    q->inject = kind;
    q->inject_count = count;
}

/*
 * Write the register at @reg.  For a 64-bit register written in 32-bit
 * halves, @reg is the address of the half and @size is 4.
 */
static void spyre_reg_write(SpyreState *s, hwaddr reg, uint64_t val,
                            unsigned size)
{
    SpyreQueue *q;
    hwaddr off;

    switch (reg) {
    case SPYRE_REG_SCRATCH:
        s->scratch = val;
        return;
    case SPYRE_REG_CONTROL:
        if ((val & SPYRE_CONTROL_ENABLE) &&
            !(s->control & SPYRE_CONTROL_ENABLE)) {
            int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
            uint32_t i;

            /* Aging counts the time the card serves others, not this. */
            for (i = 0; i < s->nqueues; i++) {
                s->queues[i].ready_ns = now;
            }
        }
        s->control = val & SPYRE_CONTROL_ENABLE;
        spyre_kick(s);
        return;
    case SPYRE_REG_RESET:
        if (val == SPYRE_RESET_MAGIC) {
            spyre_reset(s);
        }
        return;
    case SPYRE_REG_IRQ_STATUS:
        s->irq_status &= ~val;
        return;
    case SPYRE_REG_IRQ_MASK: {
        uint32_t newly = val & ~s->irq_mask;

        s->irq_mask = val & SPYRE_IRQ_ALL;
        if (newly & s->irq_status) {
            spyre_notify(s, SPYRE_ERROR_VECTOR, false);
        }
        return;
    }
    case SPYRE_REG_MMU_INVAL:
        if (size == 8) {
            spyre_mmu_inval(s, val);
        } else {
            s->inval_lo = val;
        }
        return;
    case SPYRE_REG_MMU_INVAL + 4:
        spyre_mmu_inval(s, (val << 32) | s->inval_lo);
        return;
    case SPYRE_REG_FAULT_POP:
        if (s->fault_count) {
            s->fault_head = (s->fault_head + 1) % SPYRE_FAULT_FIFO_DEPTH;
            s->fault_count--;
        }
        return;
    case SPYRE_REG_DBG_INJECT:
        spyre_dbg_inject(s, val);
        return;
    }

    if (reg >= SPYRE_REG_CTX_ROOT(0) &&
        reg < SPYRE_REG_CTX_ROOT(SPYRE_MAX_CONTEXTS)) {
        uint64_t ctx = (reg - SPYRE_REG_CTX_ROOT(0)) / 8;
        uint64_t root;

        if (ctx >= s->ncontexts) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "spyre: CTX_ROOT of context %" PRIu64
                          " beyond NUM_CONTEXTS\n", ctx);
            return;
        }
        root = size == 8 ? val : deposit64(s->ctx_root[ctx],
                                           reg & 4 ? 32 : 0, 32, val);
        /* Page walks of data phases in flight read it (spyre.h). */
        qatomic_set(&s->ctx_root[ctx],
                    root & (SPYRE_PTE_ADDR_MASK | SPYRE_PTE_VALID));
        spyre_mmu_changed(s);
        return;
    }

    q = spyre_reg_queue(s, reg, &off);
    if (q) {
        spyre_q_write(s, q, off, val, size);
        return;
    }
    qemu_log_mask(LOG_GUEST_ERROR,
                  "spyre: write to unknown or read-only register 0x%"
                  HWADDR_PRIx "\n", reg);
}

static uint64_t spyre_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    SpyreState *s = opaque;
    hwaddr reg = addr & ~7ULL;
    uint64_t val;

    assert(bql_locked());
    spyre_lock(s);
    if (spyre_reg_is_64(s, reg)) {
        if (size == 8) {
            val = spyre_reg_read(s, reg);
        } else if (!(addr & 4)) {
            /* Low half first: latch the value so the halves match. */
            val = spyre_reg_read(s, reg);
            s->read_latch_addr = reg;
            s->read_latch_val = val;
            val = (uint32_t)val;
        } else if (s->read_latch_addr == reg) {
            val = s->read_latch_val >> 32;
            s->read_latch_addr = UINT64_MAX;
        } else {
            val = spyre_reg_read(s, reg) >> 32;
        }
    } else if (size == 8) {
        val = spyre_reg_read(s, addr) |
              spyre_reg_read(s, addr + 4) << 32;
    } else {
        val = (uint32_t)spyre_reg_read(s, addr);
    }
    trace_spyre_mmio_read(addr, size, val);
    spyre_unlock(s);
    return val;
}

static void spyre_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    SpyreState *s = opaque;

    assert(bql_locked());
    trace_spyre_mmio_write(addr, size, val);
    spyre_lock(s);
    if (size == 8 && !spyre_reg_is_64(s, addr)) {
        spyre_reg_write(s, addr, (uint32_t)val, 4);
        spyre_reg_write(s, addr + 4, val >> 32, 4);
    } else {
        spyre_reg_write(s, addr, val, size);
    }
    spyre_irq_flush(s);
    spyre_unlock(s);
}

const MemoryRegionOps spyre_mmio_ops = {
    .read = spyre_mmio_read,
    .write = spyre_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
};
