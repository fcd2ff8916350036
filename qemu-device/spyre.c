/*
 * Spyre AI-accelerator PCIe card model
 *
 * The programming interface (BAR layout, registers, job descriptors,
 * completion records, page tables, fault records) is defined once in the
 * project's hw/spyre_hw.h, the command-stream format in
 * uapi/drm/spyre_cmd.h; both are shared with the kernel driver.
 *
 * Execution model
 * ---------------
 * Every piece of state shared between the register file and the execution
 * engine is protected by the BQL: MMIO handlers, the interrupt bottom half
 * and the worker threads all hold it while they touch it.  Workers are a
 * pool of host threads ("cores") that pick ready queues by priority.  They
 * move data in chunks of at most one page; each chunk (translate through
 * the device MMU, DMA in, DMA out) runs with the BQL held, so that
 *  - DMA through a vIOMMU may fault (which takes the BQL) safely,
 *  - no translation survives a BQL release: an MMU invalidation written by
 *    the driver is complete as soon as its MMIO write is, and is
 *    acknowledged at once;
 *  - a queue or device reset, which runs under the BQL, takes effect
 *    immediately: each queue carries a generation number, and a worker
 *    re-checks it every time it re-acquires the BQL, dropping a job whose
 *    queue was reset without touching guest memory or queue state again.
 * Compute that needs no guest memory may run with the BQL released.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/thread.h"
#include "qemu/rcu.h"
#include "qemu/timer.h"
#include "qemu/bitops.h"
#include "qemu/error-report.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/pcie.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/vmstate.h"
#include "system/runstate.h"
#include "system/dma.h"
#include "exec/memory.h"
#include "qom/object.h"
#include "trace.h"

#include "spyre_hw.h"
#include "drm/spyre_cmd.h"

#define TYPE_SPYRE "spyre"
OBJECT_DECLARE_SIMPLE_TYPE(SpyreState, SPYRE)

QEMU_BUILD_BUG_ON(sizeof(struct spyre_hw_job) != 64);
QEMU_BUILD_BUG_ON(sizeof(struct spyre_hw_completion) != 64);
QEMU_BUILD_BUG_ON(sizeof(struct spyre_cmd_header) != 8);
QEMU_BUILD_BUG_ON(SPYRE_QUEUE_BASE + SPYRE_MAX_QUEUES * SPYRE_QUEUE_STRIDE >
                  SPYRE_BAR0_SIZE);
QEMU_BUILD_BUG_ON(SPYRE_REG_CTX_ROOT(SPYRE_MAX_CONTEXTS) > SPYRE_REG_TEL_JOBS);

#define SPYRE_VA_LIMIT          (1ULL << SPYRE_VA_BITS)
#define SPYRE_PAGE_MASK         (SPYRE_PAGE_SIZE - 1)
#define SPYRE_RING_ENTRY_SIZE   64
#define SPYRE_COMPL_ALIGN       64

/* Per-command limits: bytes moved and host time spent. */
#define SPYRE_CMD_MAX_BYTES     (1ULL << 30)
#define SPYRE_CMD_MAX_NS        (5 * NANOSECONDS_PER_SECOND)
/* Commands run between two BQL releases in the command loop. */
#define SPYRE_CMDS_PER_YIELD    16
/* Host-time interval at which blocked SEM_WAIT queues are re-polled. */
#define SPYRE_SEM_POLL_MS       1

#define SPYRE_MAX_WORKERS       64

#define SPYRE_Q_CONTROL_MASK    (SPYRE_Q_CONTROL_ENABLE | \
                                 SPYRE_Q_CONTROL_PRIO(3) | \
                                 SPYRE_Q_CONTROL_VECTOR(0x3ff))

/* Internal command results besides SPYRE_STATUS_*. */
#define SPYRE_EXEC_PARK         0x100   /* SEM_WAIT not satisfied */
#define SPYRE_EXEC_DROPPED      0x101   /* queue reset under our feet */

enum {
    SPYRE_TEL_JOBS,
    SPYRE_TEL_CMDS,
    SPYRE_TEL_BUSY_NS,
    SPYRE_TEL_BYTES,
    SPYRE_TEL_FAULTS,
    SPYRE_TEL_COUNT,
};

/* Where a queue's current job is. */
enum {
    SPYRE_JOB_NONE,         /* no job: next one is fetched at HEAD */
    SPYRE_JOB_RUNNING,      /* owned by a worker */
    SPYRE_JOB_SEM_WAIT,     /* parked on a SEM_WAIT, resumable */
    SPYRE_JOB_HUNG,         /* parked forever (DBG_HANG) */
};

typedef struct SpyreJob {
    uint64_t seqno;
    uint64_t cmd_va;
    uint32_t cmd_size;
    uint16_t ctx;
    uint16_t flags;
    uint32_t cmd_offset;        /* next command to run */
    uint64_t start_ns;          /* device clock at job start */
} SpyreJob;

typedef struct SpyreQueue {
    /* Guest-visible registers (migrated). */
    uint64_t ring_base;
    uint64_t compl_addr;
    uint64_t last_seqno;
    uint32_t entries;
    uint32_t control;
    uint32_t head;
    uint32_t tail;
    uint32_t status;
    uint32_t inject;            /* SPYRE_DBG_* for the next job, or 0 */

    /* Execution state (not migrated: see spyre_pre_save). */
    uint32_t id;
    uint32_t vector;            /* completion vector checked at enable */
    uint32_t gen;               /* bumped by every reset of the queue */
    uint32_t job_state;
    SpyreJob job;
    uint64_t sem_epoch;         /* device sem_epoch when parked */
    int64_t sem_poll_ns;        /* host time of the next re-poll */
} SpyreQueue;

typedef struct SpyreWorker SpyreWorker;

struct SpyreState {
    PCIDevice parent_obj;

    MemoryRegion mmio;
    MemoryRegion devmem;
    uint8_t *devmem_ptr;

    /* Properties. */
    uint64_t mem_size;
    uint32_t nqueues;
    uint32_t ncores;
    uint32_t ncontexts;
    uint32_t nvectors;
    uint32_t nworkers;

    /* Global registers. */
    uint32_t scratch;
    uint32_t control;
    uint32_t irq_status;
    uint32_t irq_mask;
    int64_t clock_base;
    uint32_t inval_req;
    uint32_t inval_ack;
    uint32_t inval_lo;          /* MMU_INVAL low half, written first */
    uint64_t fault_va[SPYRE_FAULT_FIFO_DEPTH];
    uint64_t fault_info[SPYRE_FAULT_FIFO_DEPTH];
    uint32_t fault_head;
    uint32_t fault_count;
    uint32_t fault_lost;
    uint64_t ctx_root[SPYRE_MAX_CONTEXTS];
    uint64_t tel[SPYRE_TEL_COUNT];
    uint64_t read_latch_addr;   /* 64-bit read split into 32-bit halves */
    uint64_t read_latch_val;

    SpyreQueue *queues;

    /* Engine. */
    SpyreWorker *workers;
    QemuCond work_cond;
    bool stopping;
    bool vm_running;
    uint32_t rr_next;           /* round-robin start of the queue scan */
    uint64_t sem_epoch;         /* bumped when memory may have changed */
    VMChangeStateEntry *vmse;

    /* MSI-X vectors to raise from the bottom half. */
    QEMUBH *irq_bh;
    unsigned long irq_pending[BITS_TO_LONGS(SPYRE_MAX_VECTORS)];
};

/*
 * Per-worker execution context.  The buffers are the only temporary
 * storage the engine uses: data moves through them a page at a time.
 */
struct SpyreWorker {
    SpyreState *s;
    QemuThread thread;
    unsigned int index;
    SpyreQueue *q;              /* queue whose job we run */
    uint32_t gen;               /* its generation when we took it */
    uint64_t err_va;
    int64_t cmd_deadline;
    uint8_t buf[SPYRE_PAGE_SIZE];
    uint8_t pattern[SPYRE_PAGE_SIZE + 8];
    union {
        struct spyre_cmd_header hdr;
        struct spyre_cmd_fill fill;
        struct spyre_cmd_copy copy;
        struct spyre_cmd_gemm gemm;
        struct spyre_cmd_eltwise eltwise;
        struct spyre_cmd_reduce reduce;
        struct spyre_cmd_rowop rowop;
        struct spyre_cmd_timestamp timestamp;
        struct spyre_cmd_sem sem;
        uint8_t raw[256];
    } cmd;
};

static const MemTxAttrs spyre_dma_attrs = { .memory = 1 };

static const uint32_t spyre_cmd_size[SPYRE_OP_COUNT] = {
    [SPYRE_OP_NOP] = sizeof(struct spyre_cmd_nop),
    [SPYRE_OP_FILL] = sizeof(struct spyre_cmd_fill),
    [SPYRE_OP_COPY] = sizeof(struct spyre_cmd_copy),
    [SPYRE_OP_GEMM] = sizeof(struct spyre_cmd_gemm),
    [SPYRE_OP_ELTWISE] = sizeof(struct spyre_cmd_eltwise),
    [SPYRE_OP_REDUCE] = sizeof(struct spyre_cmd_reduce),
    [SPYRE_OP_ROWOP] = sizeof(struct spyre_cmd_rowop),
    [SPYRE_OP_TIMESTAMP] = sizeof(struct spyre_cmd_timestamp),
    [SPYRE_OP_SEM_WAIT] = sizeof(struct spyre_cmd_sem),
    [SPYRE_OP_SEM_SIGNAL] = sizeof(struct spyre_cmd_sem),
};

static const uint8_t spyre_dtype_size[SPYRE_DTYPE_COUNT] = {
    [SPYRE_DTYPE_U8] = 1,
    [SPYRE_DTYPE_FP32] = 4,
    [SPYRE_DTYPE_FP16] = 2,
    [SPYRE_DTYPE_BF16] = 2,
    [SPYRE_DTYPE_FP8_E4M3] = 1,
    [SPYRE_DTYPE_FP8_E5M2] = 1,
    [SPYRE_DTYPE_INT8] = 1,
    [SPYRE_DTYPE_INT32] = 4,
};

/* ------------------------------------------------------------------------ */
/* Clock, interrupts                                                        */
/* ------------------------------------------------------------------------ */

static uint64_t spyre_clock(SpyreState *s)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) - s->clock_base;
}

static void spyre_irq_bh(void *opaque)
{
    SpyreState *s = opaque;
    PCIDevice *pdev = PCI_DEVICE(s);
    unsigned int v;

    for (v = 0; v < s->nvectors; v++) {
        if (test_and_clear_bit(v, s->irq_pending)) {
            trace_spyre_irq(v);
            msix_notify(pdev, v);
        }
    }
}

/* BQL held.  Raise MSI-X vector @v from the bottom half. */
static void spyre_notify(SpyreState *s, unsigned int v)
{
    if (v >= s->nvectors) {
        return;
    }
    set_bit(v, s->irq_pending);
    qemu_bh_schedule(s->irq_bh);
}

/* BQL held.  Latch @bits in IRQ_STATUS and raise the error vector. */
static void spyre_raise_error(SpyreState *s, uint32_t bits)
{
    s->irq_status |= bits;
    if (bits & s->irq_mask) {
        spyre_notify(s, SPYRE_ERROR_VECTOR);
    }
}

/* ------------------------------------------------------------------------ */
/* DMA and the device MMU (BQL held)                                        */
/* ------------------------------------------------------------------------ */

/*
 * DMA to or from system memory through the device's PCI address space
 * (and thus through a vIOMMU if there is one).  Only RAM is reachable
 * (MemTxAttrs.memory), and never the device's own BARs.
 */
static MemTxResult spyre_dma_rw(SpyreState *s, dma_addr_t addr, void *buf,
                                dma_addr_t len, DMADirection dir)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    AddressSpace *as = pci_get_address_space(pdev);
    bool is_write = dir == DMA_DIRECTION_FROM_DEVICE;
    dma_addr_t a = addr, left = len;
    MemTxResult r;

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

typedef struct SpyreTarget {
    bool devmem;
    uint64_t addr;      /* DMA address, or offset into device memory */
} SpyreTarget;

/*
 * Walk the page tables of @ctx for @va.  Returns 0 and the target of the
 * byte at @va, or a SPYRE_FAULT_* reason.
 */
static int spyre_mmu_translate(SpyreState *s, unsigned int ctx, uint64_t va,
                               bool write, SpyreTarget *t)
{
    uint64_t root, table, pte = 0;
    int lvl;

    if (va >= SPYRE_VA_LIMIT) {
        return SPYRE_FAULT_UNMAPPED;
    }
    if (ctx >= s->ncontexts) {
        return SPYRE_FAULT_BAD_CONTEXT;
    }
    root = s->ctx_root[ctx];
    if (!(root & SPYRE_PTE_VALID)) {
        return SPYRE_FAULT_BAD_CONTEXT;
    }
    table = root & SPYRE_PTE_ADDR_MASK;

    for (lvl = 0; lvl < SPYRE_PT_LEVELS; lvl++) {
        uint64_t ea = table + 8ULL * SPYRE_PT_INDEX(va, lvl);

        if (spyre_dma_rw(s, ea, &pte, sizeof(pte),
                         DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
            return SPYRE_FAULT_PT_DMA;
        }
        pte = le64_to_cpu(pte);
        if (!(pte & SPYRE_PTE_VALID)) {
            return SPYRE_FAULT_UNMAPPED;
        }
        table = pte & SPYRE_PTE_ADDR_MASK;
    }

    if (write && !(pte & SPYRE_PTE_WRITE)) {
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
static void spyre_record_fault(SpyreState *s, unsigned int ctx,
                               unsigned int queue, uint64_t va, bool write,
                               unsigned int reason)
{
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
    spyre_raise_error(s, SPYRE_IRQ_FAULT);
}

/*
 * BQL held.  Translate @va (in the running job's context) and report a
 * fault if there is one.  Returns a SPYRE_STATUS_*.
 */
static uint32_t spyre_w_translate(SpyreWorker *w, uint64_t va, bool write,
                                  SpyreTarget *t)
{
    SpyreState *s = w->s;
    int reason = spyre_mmu_translate(s, w->q->job.ctx, va, write, t);

    if (reason) {
        spyre_record_fault(s, w->q->job.ctx, w->q->id, va, write, reason);
        w->err_va = va;
        return SPYRE_STATUS_MMU_FAULT;
    }
    return SPYRE_STATUS_OK;
}

/* BQL held.  Access a translated target; @len stays within one page. */
static uint32_t spyre_w_access(SpyreWorker *w, const SpyreTarget *t,
                               uint64_t va, void *buf, uint32_t len,
                               bool write)
{
    SpyreState *s = w->s;

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
        w->err_va = va;
        return SPYRE_STATUS_DMA_ERROR;
    }
    s->tel[SPYRE_TEL_BYTES] += len;
    return SPYRE_STATUS_OK;
}

/* BQL held.  Read or write @len bytes at @va, any alignment. */
static uint32_t spyre_w_rw(SpyreWorker *w, uint64_t va, void *buf,
                           uint64_t len, bool write)
{
    uint8_t *p = buf;

    while (len) {
        uint32_t n = MIN(len, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        SpyreTarget t;
        uint32_t st;

        st = spyre_w_translate(w, va, write, &t);
        if (st == SPYRE_STATUS_OK) {
            st = spyre_w_access(w, &t, va, p, n, write);
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

/* ------------------------------------------------------------------------ */
/* Queues and scheduling (BQL held)                                         */
/* ------------------------------------------------------------------------ */

static void spyre_kick(SpyreState *s)
{
    qemu_cond_broadcast(&s->work_cond);
}

static bool spyre_queue_config_valid(SpyreState *s, SpyreQueue *q,
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

/* Status of a queue with no job in progress. */
static uint32_t spyre_queue_rest_status(SpyreQueue *q)
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
    default:
        return false;
    }
}

/* Pick the ready queue of highest priority, round-robin within one. */
static SpyreQueue *spyre_pick(SpyreState *s, bool *sem_waiters)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    SpyreQueue *best = NULL;
    int best_prio = -1;
    uint32_t i;

    *sem_waiters = false;
    if (s->stopping || !s->vm_running || !(s->control & SPYRE_CONTROL_ENABLE)) {
        return NULL;
    }
    for (i = 0; i < s->nqueues; i++) {
        SpyreQueue *q = &s->queues[(s->rr_next + i) % s->nqueues];
        int prio;

        if (!spyre_queue_ready(s, q, now, sem_waiters)) {
            continue;
        }
        prio = SPYRE_Q_CONTROL_PRIO_GET(q->control);
        if (prio > best_prio) {
            best = q;
            best_prio = prio;
        }
    }
    if (best) {
        s->rr_next = (best->id + 1) % s->nqueues;
    }
    return best;
}

/*
 * End the current job of @q: write the completion record (all fields,
 * then seqno), update LAST_SEQNO and HEAD, raise interrupts.
 * @halt: the job failed, halt the queue in SPYRE_QS_ERROR.
 */
static void spyre_end_job(SpyreState *s, SpyreQueue *q, uint32_t status,
                          uint64_t err_va, bool halt)
{
    SpyreJob *job = &q->job;
    struct spyre_hw_completion c = { 0 };
    uint64_t end = spyre_clock(s);
    uint64_t seqno = cpu_to_le64(job->seqno);
    bool ok;

    trace_spyre_job_end(q->id, job->seqno, status, job->cmd_offset, err_va);

    c.status = cpu_to_le32(status);
    c.cmd_offset = cpu_to_le32(status == SPYRE_STATUS_OK ? 0 :
                               job->cmd_offset);
    c.error_va = cpu_to_le64(status == SPYRE_STATUS_MMU_FAULT ||
                             status == SPYRE_STATUS_DMA_ERROR ? err_va : 0);
    c.start_ns = cpu_to_le64(job->start_ns);
    c.end_ns = cpu_to_le64(end);
    ok = spyre_dma_rw(s, q->compl_addr + 8, (uint8_t *)&c + 8,
                      sizeof(c) - 8, DMA_DIRECTION_FROM_DEVICE) == MEMTX_OK &&
         spyre_dma_rw(s, q->compl_addr, &seqno, sizeof(seqno),
                      DMA_DIRECTION_FROM_DEVICE) == MEMTX_OK;

    q->last_seqno = job->seqno;
    q->head = (q->head + 1) & (q->entries - 1);
    q->job_state = SPYRE_JOB_NONE;
    s->tel[SPYRE_TEL_JOBS]++;
    s->tel[SPYRE_TEL_BUSY_NS] += end > job->start_ns ? end - job->start_ns : 0;
    s->sem_epoch++;

    if (!ok) {
        trace_spyre_compl_error(q->id, q->compl_addr);
        halt = true;
    }
    if (halt) {
        q->status = SPYRE_QS_ERROR;
        spyre_raise_error(s, SPYRE_IRQ_QUEUE_ERROR);
    } else {
        q->status = spyre_queue_rest_status(q);
    }
    if ((halt || status != SPYRE_STATUS_OK ||
         (job->flags & SPYRE_JOB_F_IRQ)) &&
        q->vector != SPYRE_ERROR_VECTOR) {
        spyre_notify(s, q->vector);
    }
    spyre_kick(s);
}

/* Q_RESET: abort the job in progress, if any, and disable the queue. */
static void spyre_queue_reset(SpyreState *s, SpyreQueue *q)
{
    trace_spyre_queue_reset(q->id, q->job_state);
    if (q->job_state != SPYRE_JOB_NONE) {
        spyre_end_job(s, q, SPYRE_STATUS_ABORTED, 0, false);
    }
    q->gen++;
    q->job_state = SPYRE_JOB_NONE;
    q->head = 0;
    q->tail = 0;
    q->inject = 0;
    q->control &= ~SPYRE_Q_CONTROL_ENABLE;
    q->status = SPYRE_QS_DISABLED;
}

/* Device reset: drop all work, return every register to its reset value. */
static void spyre_reset(SpyreState *s)
{
    uint32_t i;

    trace_spyre_reset();
    for (i = 0; i < s->nqueues; i++) {
        SpyreQueue *q = &s->queues[i];
        uint32_t gen = q->gen + 1;

        memset(q, 0, sizeof(*q));
        q->id = i;
        q->gen = gen;
        q->status = SPYRE_QS_DISABLED;
    }
    s->scratch = 0;
    s->control = 0;
    s->irq_status = 0;
    s->irq_mask = 0;
    s->clock_base = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    s->inval_req = 0;
    s->inval_ack = 0;
    s->inval_lo = 0;
    memset(s->fault_va, 0, sizeof(s->fault_va));
    memset(s->fault_info, 0, sizeof(s->fault_info));
    s->fault_head = 0;
    s->fault_count = 0;
    s->fault_lost = 0;
    memset(s->ctx_root, 0, sizeof(s->ctx_root));
    memset(s->tel, 0, sizeof(s->tel));
    s->read_latch_addr = UINT64_MAX;
    s->rr_next = 0;
    bitmap_zero(s->irq_pending, SPYRE_MAX_VECTORS);
    spyre_kick(s);
}

/* ------------------------------------------------------------------------ */
/* Worker: command execution (BQL held unless stated)                       */
/* ------------------------------------------------------------------------ */

/*
 * Give the BQL up for a moment and come back.  Returns false if the job
 * must be dropped (its queue was reset, or the device is going away).
 * While the VM is stopped the job pauses here; the time spent paused does
 * not count against the command's time budget.
 */
static bool spyre_w_yield(SpyreWorker *w)
{
    SpyreState *s = w->s;
    int64_t paused = 0;

    bql_unlock();
    g_thread_yield();       /* a plain unlock+lock can starve vCPUs */
    bql_lock();
    while (!s->stopping && w->q->gen == w->gen && !s->vm_running) {
        int64_t t0 = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

        qemu_cond_wait_bql(&s->work_cond);
        paused += qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - t0;
    }
    w->cmd_deadline += paused;
    return !s->stopping && w->q->gen == w->gen;
}

/* Called between chunks of a long command. */
static uint32_t spyre_w_chunk_end(SpyreWorker *w)
{
    if (!spyre_w_yield(w)) {
        return SPYRE_EXEC_DROPPED;
    }
    if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) > w->cmd_deadline) {
        return SPYRE_STATUS_LIMIT;
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_fill(SpyreWorker *w)
{
    struct spyre_cmd_fill *c = &w->cmd.fill;
    uint64_t dst = le64_to_cpu(c->dst);
    uint64_t count = le64_to_cpu(c->count);
    uint64_t value = le64_to_cpu(c->value);
    uint32_t esz = le32_to_cpu(c->elem_size);
    uint64_t bytes, done, v_le;
    unsigned int i;

    if (c->hdr.flags || c->pad) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (esz != 1 && esz != 2 && esz != 4 && esz != 8) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (count > SPYRE_CMD_MAX_BYTES / esz) {
        return SPYRE_STATUS_LIMIT;
    }
    bytes = count * esz;
    if (dst + bytes < dst) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }

    v_le = cpu_to_le64(value);
    for (i = 0; i + esz <= sizeof(w->pattern); i += esz) {
        memcpy(w->pattern + i, &v_le, esz);
    }

    for (done = 0; done < bytes;) {
        uint64_t va = dst + done;
        uint32_t n = MIN(bytes - done,
                         SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        uint32_t st;

        st = spyre_w_rw(w, va, w->pattern + done % esz, n, true);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        done += n;
        if (done < bytes) {
            st = spyre_w_chunk_end(w);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_copy(SpyreWorker *w)
{
    struct spyre_cmd_copy *c = &w->cmd.copy;
    uint64_t src = le64_to_cpu(c->src);
    uint64_t dst = le64_to_cpu(c->dst);
    uint64_t width = le64_to_cpu(c->width);
    uint64_t height = le64_to_cpu(c->height);
    uint64_t spitch = le64_to_cpu(c->src_pitch);
    uint64_t dpitch = le64_to_cpu(c->dst_pitch);
    uint32_t sdt = le32_to_cpu(c->src_dtype);
    uint32_t ddt = le32_to_cpu(c->dst_dtype);
    uint64_t esz, row, r;

    if (le16_to_cpu(c->hdr.flags) & ~SPYRE_CMD_F_NOSAT) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (sdt == 0 || sdt >= SPYRE_DTYPE_COUNT ||
        ddt == 0 || ddt >= SPYRE_DTYPE_COUNT) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if ((sdt == SPYRE_DTYPE_U8) != (ddt == SPYRE_DTYPE_U8) ||
        (sdt == SPYRE_DTYPE_INT32) != (ddt == SPYRE_DTYPE_INT32)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (sdt != ddt) {
        /* Conversions among float types and INT8: not implemented yet. */
        trace_spyre_cmd_unimplemented(w->q->id, SPYRE_OP_COPY, sdt, ddt);
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (width == 0 || height == 0) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (height == 1) {
        spitch = dpitch = 0;
    }

    esz = spyre_dtype_size[sdt];
    if (width > SPYRE_CMD_MAX_BYTES / esz) {
        return SPYRE_STATUS_LIMIT;
    }
    row = width * esz;
    if (height > SPYRE_CMD_MAX_BYTES / row) {
        return SPYRE_STATUS_LIMIT;
    }
    /* Last byte of each operand must not wrap around 64 bits. */
    if ((height - 1) > (UINT64_MAX - row) / MAX(spitch, 1) ||
        (height - 1) > (UINT64_MAX - row) / MAX(dpitch, 1) ||
        src + (height - 1) * spitch + row < src ||
        dst + (height - 1) * dpitch + row < dst) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }

    for (r = 0; r < height; r++) {
        uint64_t srow = src + r * spitch, drow = dst + r * dpitch;
        uint64_t done;

        for (done = 0; done < row;) {
            uint64_t sva = srow + done, dva = drow + done;
            uint32_t n, st;

            n = MIN(row - done, SPYRE_PAGE_SIZE - (sva & SPYRE_PAGE_MASK));
            n = MIN(n, SPYRE_PAGE_SIZE - (dva & SPYRE_PAGE_MASK));
            st = spyre_w_rw(w, sva, w->buf, n, false);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_w_rw(w, dva, w->buf, n, true);
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            done += n;
            if (done < row || r + 1 < height) {
                st = spyre_w_chunk_end(w);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
        }
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_timestamp(SpyreWorker *w)
{
    struct spyre_cmd_timestamp *c = &w->cmd.timestamp;
    uint64_t now = cpu_to_le64(spyre_clock(w->s));

    if (c->hdr.flags) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    return spyre_w_rw(w, le64_to_cpu(c->dst), &now, sizeof(now), true);
}

static uint32_t spyre_cmd_sem(SpyreWorker *w, bool signal)
{
    struct spyre_cmd_sem *c = &w->cmd.sem;
    uint64_t addr = le64_to_cpu(c->addr);
    uint64_t value = le64_to_cpu(c->value);
    uint16_t flags = le16_to_cpu(c->hdr.flags);
    uint64_t cur;
    SpyreTarget t;
    uint32_t st;

    if (flags & ~(signal ? SPYRE_SEM_F_ADD : 0)) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (addr & 7) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    st = spyre_w_translate(w, addr, signal, &t);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (!signal || (flags & SPYRE_SEM_F_ADD)) {
        st = spyre_w_access(w, &t, addr, &cur, sizeof(cur), false);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        cur = le64_to_cpu(cur);
    }
    if (!signal) {
        trace_spyre_sem_wait(w->q->id, addr, cur, value);
        return cur >= value ? SPYRE_STATUS_OK : SPYRE_EXEC_PARK;
    }
    /*
     * The read-modify-write runs under the BQL: atomic with respect to
     * every queue of this card, not to CPUs writing the same word.
     */
    cur = cpu_to_le64(flags & SPYRE_SEM_F_ADD ? cur + value : value);
    st = spyre_w_access(w, &t, addr, &cur, sizeof(cur), true);
    if (st == SPYRE_STATUS_OK) {
        w->s->sem_epoch++;
        spyre_kick(w->s);
    }
    return st;
}

/* Known opcodes the engine does not execute yet. */
static uint32_t spyre_cmd_unimplemented(SpyreWorker *w, unsigned int op)
{
    uint16_t flags = le16_to_cpu(w->cmd.hdr.flags);

    switch (op) {
    case SPYRE_OP_GEMM:
        if (flags & ~SPYRE_GEMM_F_ALL) {
            return SPYRE_STATUS_INVALID_COMMAND;
        }
        break;
    case SPYRE_OP_ELTWISE:
        if (flags || w->cmd.eltwise.pad) {
            return SPYRE_STATUS_INVALID_COMMAND;
        }
        break;
    case SPYRE_OP_REDUCE:
        if (flags) {
            return SPYRE_STATUS_INVALID_COMMAND;
        }
        break;
    case SPYRE_OP_ROWOP:
        if (flags || w->cmd.rowop.pad) {
            return SPYRE_STATUS_INVALID_COMMAND;
        }
        break;
    }
    trace_spyre_cmd_unimplemented(w->q->id, op, 0, 0);
    return SPYRE_STATUS_INVALID_OPERAND;
}

/* Fetch and run the command at the job's cmd_offset. */
static uint32_t spyre_exec_cmd(SpyreWorker *w)
{
    SpyreJob *job = &w->q->job;
    uint64_t va = job->cmd_va + job->cmd_offset;
    unsigned int op;
    uint32_t size, st;

    st = spyre_w_rw(w, va, &w->cmd.hdr, sizeof(w->cmd.hdr), false);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    op = le16_to_cpu(w->cmd.hdr.opcode);
    size = le32_to_cpu(w->cmd.hdr.size);
    trace_spyre_cmd(w->q->id, job->cmd_offset, op, size);
    if (op >= SPYRE_OP_COUNT) {
        return SPYRE_STATUS_INVALID_OPCODE;
    }
    if (size != spyre_cmd_size[op] ||
        size > job->cmd_size - job->cmd_offset) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    st = spyre_w_rw(w, va + sizeof(w->cmd.hdr),
                    w->cmd.raw + sizeof(w->cmd.hdr),
                    size - sizeof(w->cmd.hdr), false);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }

    w->cmd_deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                      SPYRE_CMD_MAX_NS;
    switch (op) {
    case SPYRE_OP_NOP:
        return w->cmd.hdr.flags ? SPYRE_STATUS_INVALID_COMMAND :
                                  SPYRE_STATUS_OK;
    case SPYRE_OP_FILL:
        return spyre_cmd_fill(w);
    case SPYRE_OP_COPY:
        return spyre_cmd_copy(w);
    case SPYRE_OP_TIMESTAMP:
        return spyre_cmd_timestamp(w);
    case SPYRE_OP_SEM_WAIT:
        return spyre_cmd_sem(w, false);
    case SPYRE_OP_SEM_SIGNAL:
        return spyre_cmd_sem(w, true);
    default:
        return spyre_cmd_unimplemented(w, op);
    }
}

/* Validate a fetched descriptor.  Returns a SPYRE_STATUS_*. */
static uint32_t spyre_job_check(SpyreState *s, const struct spyre_hw_job *d)
{
    SpyreJob job = {
        .cmd_va = le64_to_cpu(d->cmd_va),
        .cmd_size = le32_to_cpu(d->cmd_size),
        .ctx = le16_to_cpu(d->ctx),
        .flags = le16_to_cpu(d->flags),
    };
    unsigned int i;

    for (i = 0; i < ARRAY_SIZE(d->reserved); i++) {
        if (d->reserved[i]) {
            return SPYRE_STATUS_INVALID_JOB;
        }
    }
    if (job.flags & ~SPYRE_JOB_F_ALL) {
        return SPYRE_STATUS_INVALID_JOB;
    }
    if (job.ctx >= s->ncontexts ||
        !(s->ctx_root[job.ctx] & SPYRE_PTE_VALID)) {
        return SPYRE_STATUS_INVALID_JOB;
    }
    if (job.cmd_size < sizeof(struct spyre_cmd_header) ||
        job.cmd_size > SPYRE_MAX_CMD_STREAM || job.cmd_size % 8 ||
        job.cmd_va % 8 || job.cmd_va >= SPYRE_VA_LIMIT ||
        job.cmd_size > SPYRE_VA_LIMIT - job.cmd_va) {
        return SPYRE_STATUS_INVALID_JOB;
    }
    return SPYRE_STATUS_OK;
}

/*
 * Start the job at HEAD of @q.  Returns false if there is nothing to run
 * (the job failed at once, or hangs by injection).
 */
static bool spyre_job_start(SpyreState *s, SpyreQueue *q)
{
    struct spyre_hw_job d;
    SpyreJob *job = &q->job;
    uint32_t st;

    memset(job, 0, sizeof(*job));
    job->start_ns = spyre_clock(s);
    q->job_state = SPYRE_JOB_RUNNING;
    q->status = SPYRE_QS_BUSY;

    if (spyre_dma_rw(s, q->ring_base + (uint64_t)q->head * sizeof(d),
                     &d, sizeof(d), DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
        /* No seqno to report: halt without a completion record. */
        trace_spyre_ring_error(q->id, q->head);
        q->job_state = SPYRE_JOB_NONE;
        q->head = (q->head + 1) & (q->entries - 1);
        q->status = SPYRE_QS_ERROR;
        spyre_raise_error(s, SPYRE_IRQ_QUEUE_ERROR);
        return false;
    }
    job->seqno = le64_to_cpu(d.seqno);
    job->cmd_va = le64_to_cpu(d.cmd_va);
    job->cmd_size = le32_to_cpu(d.cmd_size);
    job->ctx = le16_to_cpu(d.ctx);
    job->flags = le16_to_cpu(d.flags);
    trace_spyre_job_start(q->id, job->seqno, job->ctx, job->cmd_va,
                          job->cmd_size);

    if (q->inject == SPYRE_DBG_HANG) {
        q->inject = 0;
        q->job_state = SPYRE_JOB_HUNG;
        trace_spyre_job_hang(q->id, job->seqno);
        return false;
    }
    if (q->inject == SPYRE_DBG_ERROR) {
        q->inject = 0;
        spyre_end_job(s, q, SPYRE_STATUS_INTERNAL, 0, true);
        return false;
    }
    st = spyre_job_check(s, &d);
    if (st != SPYRE_STATUS_OK) {
        spyre_end_job(s, q, st, 0, true);
        return false;
    }
    return true;
}

/* Run (or resume) the job of @q until it ends, parks or is dropped. */
static void spyre_run_queue(SpyreWorker *w, SpyreQueue *q)
{
    SpyreState *s = w->s;
    SpyreJob *job = &q->job;
    unsigned int ncmds = 0;
    uint32_t st = SPYRE_STATUS_OK;

    w->q = q;
    w->gen = q->gen;
    if (q->job_state == SPYRE_JOB_SEM_WAIT) {
        q->job_state = SPYRE_JOB_RUNNING;
        q->status = SPYRE_QS_BUSY;
    } else if (!spyre_job_start(s, q)) {
        return;
    }

    while (job->cmd_offset < job->cmd_size) {
        w->err_va = 0;
        st = spyre_exec_cmd(w);
        if (st == SPYRE_EXEC_DROPPED) {
            return;
        }
        if (st == SPYRE_EXEC_PARK) {
            q->job_state = SPYRE_JOB_SEM_WAIT;
            q->status = SPYRE_QS_SEM_WAIT;
            q->sem_epoch = s->sem_epoch;
            q->sem_poll_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                             SPYRE_SEM_POLL_MS * SCALE_MS;
            return;
        }
        if (st != SPYRE_STATUS_OK) {
            break;
        }
        s->tel[SPYRE_TEL_CMDS]++;
        job->cmd_offset += le32_to_cpu(w->cmd.hdr.size);
        if (++ncmds % SPYRE_CMDS_PER_YIELD == 0 && !spyre_w_yield(w)) {
            return;
        }
    }
    spyre_end_job(s, q, st, w->err_va, st != SPYRE_STATUS_OK);
}

static void *spyre_worker_thread(void *opaque)
{
    SpyreWorker *w = opaque;
    SpyreState *s = w->s;

    rcu_register_thread();
    bql_lock();
    while (!s->stopping) {
        bool sem_waiters;
        SpyreQueue *q = spyre_pick(s, &sem_waiters);

        if (q) {
            spyre_run_queue(w, q);
            w->q = NULL;
        } else if (sem_waiters) {
            qemu_cond_timedwait_bql(&s->work_cond, SPYRE_SEM_POLL_MS);
        } else {
            qemu_cond_wait_bql(&s->work_cond);
        }
    }
    /* The device is gone (spyre_exit); the last worker may finalize it. */
    object_unref(OBJECT(s));
    bql_unlock();
    rcu_unregister_thread();
    return NULL;
}

static void spyre_vm_state_change(void *opaque, bool running, RunState state)
{
    SpyreState *s = opaque;

    s->vm_running = running;
    if (running) {
        spyre_kick(s);
    }
}

/* ------------------------------------------------------------------------ */
/* Registers (BQL held)                                                     */
/* ------------------------------------------------------------------------ */

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
    return SPYRE_CAP_MMU | SPYRE_CAP_SEM;
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
        return SPYRE_STATUS_READY;
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
        }
    }
    return 0;
}

static void spyre_mmu_inval(SpyreState *s, uint64_t val)
{
    /*
     * Workers translate per page and per access with the BQL held and
     * keep no translation across a BQL release, so every access that
     * started before this request has finished: acknowledge at once.
     */
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
        q->tail = val;
        qemu_cond_signal(&s->work_cond);    /* one idle worker is enough */
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

static void spyre_dbg_inject(SpyreState *s, uint32_t val)
{
    unsigned int qid = SPYRE_DBG_INJECT_QUEUE(val);
    unsigned int kind = SPYRE_DBG_INJECT_KIND(val);

    if (qid >= s->nqueues ||
        (kind != SPYRE_DBG_HANG && kind != SPYRE_DBG_ERROR)) {
        qemu_log_mask(LOG_GUEST_ERROR, "spyre: bad DBG_INJECT 0x%x\n", val);
        return;
    }
    trace_spyre_dbg_inject(qid, kind);
    s->queues[qid].inject = kind;
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
            spyre_notify(s, SPYRE_ERROR_VECTOR);
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
        uint64_t *root;

        if (ctx >= s->ncontexts) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "spyre: CTX_ROOT of context %" PRIu64
                          " beyond NUM_CONTEXTS\n", ctx);
            return;
        }
        root = &s->ctx_root[ctx];
        if (size == 8) {
            *root = val;
        } else {
            *root = deposit64(*root, reg & 4 ? 32 : 0, 32, val);
        }
        *root &= SPYRE_PTE_ADDR_MASK | SPYRE_PTE_VALID;
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
    return val;
}

static void spyre_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    SpyreState *s = opaque;

    trace_spyre_mmio_write(addr, size, val);
    if (size == 8 && !spyre_reg_is_64(s, addr)) {
        spyre_reg_write(s, addr, (uint32_t)val, 4);
        spyre_reg_write(s, addr + 4, val >> 32, 4);
    } else {
        spyre_reg_write(s, addr, val, size);
    }
}

static const MemoryRegionOps spyre_mmio_ops = {
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

/* ------------------------------------------------------------------------ */
/* Device                                                                   */
/* ------------------------------------------------------------------------ */

static void spyre_write_config(PCIDevice *pdev, uint32_t addr, uint32_t val,
                               int len)
{
    pci_default_write_config(pdev, addr, val, len);
    pcie_cap_flr_write_config(pdev, addr, val, len);
}

static bool spyre_check_props(SpyreState *s, Error **errp)
{
    if (s->mem_size < 1 * MiB || !is_power_of_2(s->mem_size) ||
        s->mem_size > 128 * GiB) {
        error_setg(errp, "spyre: mem-size must be a power of two between "
                   "1 MiB and 128 GiB");
        return false;
    }
    if (s->nqueues < 1 || s->nqueues > SPYRE_MAX_QUEUES) {
        error_setg(errp, "spyre: queues must be 1..%d", SPYRE_MAX_QUEUES);
        return false;
    }
    if (s->ncontexts < 1 || s->ncontexts > SPYRE_MAX_CONTEXTS) {
        error_setg(errp, "spyre: contexts must be 1..%d", SPYRE_MAX_CONTEXTS);
        return false;
    }
    if (s->ncores < 1 || s->ncores > 1024) {
        error_setg(errp, "spyre: cores must be 1..1024");
        return false;
    }
    if (s->nvectors < 2 || s->nvectors > SPYRE_MAX_VECTORS) {
        error_setg(errp, "spyre: vectors must be 2..%d", SPYRE_MAX_VECTORS);
        return false;
    }
    if (s->nworkers < 1 || s->nworkers > SPYRE_MAX_WORKERS) {
        error_setg(errp, "spyre: workers must be 1..%d", SPYRE_MAX_WORKERS);
        return false;
    }
    return true;
}

static void spyre_realize(PCIDevice *pdev, Error **errp)
{
    SpyreState *s = SPYRE(pdev);
    unsigned int i;

    if (!spyre_check_props(s, errp)) {
        return;
    }

    pdev->config[PCI_INTERRUPT_PIN] = 0;   /* MSI-X only */

    if (pcie_endpoint_cap_init(pdev, 0x80) < 0) {
        error_setg(errp, "spyre: cannot add PCIe capability");
        return;
    }
    pcie_cap_flr_init(pdev);
    pcie_cap_deverr_init(pdev);

    memory_region_init_io(&s->mmio, OBJECT(s), &spyre_mmio_ops, s,
                          "spyre-regs", SPYRE_BAR0_SIZE);
    pci_register_bar(pdev, SPYRE_BAR_REGS, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->mmio);

    if (!memory_region_init_ram(&s->devmem, OBJECT(s), "spyre-devmem",
                                s->mem_size, errp)) {
        goto err_pcie;
    }
    s->devmem_ptr = memory_region_get_ram_ptr(&s->devmem);
    pci_register_bar(pdev, SPYRE_BAR_DEVMEM,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->devmem);

    if (msix_init_exclusive_bar(pdev, s->nvectors, SPYRE_BAR_MSIX, errp)) {
        goto err_pcie;
    }
    for (i = 0; i < s->nvectors; i++) {
        msix_vector_use(pdev, i);
    }

    s->queues = g_new0(SpyreQueue, s->nqueues);
    s->irq_bh = qemu_bh_new_guarded(spyre_irq_bh, s,
                                    &DEVICE(pdev)->mem_reentrancy_guard);
    qemu_cond_init(&s->work_cond);
    spyre_reset(s);

    s->vm_running = runstate_is_running();
    s->vmse = qemu_add_vm_change_state_handler(spyre_vm_state_change, s);

    s->stopping = false;
    s->workers = g_new0(SpyreWorker, s->nworkers);
    for (i = 0; i < s->nworkers; i++) {
        SpyreWorker *w = &s->workers[i];
        g_autofree char *name = g_strdup_printf("spyre-w%u", i);

        w->s = s;
        w->index = i;
        object_ref(OBJECT(s));
        qemu_thread_create(&w->thread, name, spyre_worker_thread, w,
                           QEMU_THREAD_DETACHED);
    }
    return;

err_pcie:
    pcie_cap_exit(pdev);
}

static void spyre_exit(PCIDevice *pdev)
{
    SpyreState *s = SPYRE(pdev);

    /*
     * Workers only touch the device with the BQL held, and check
     * s->stopping each time they take it: from here on they do nothing
     * but leave.  They need the BQL for that, which our caller holds, so
     * they are not joined; each holds a reference to the device, and
     * the last one to leave lets it be finalized.
     */
    s->stopping = true;
    spyre_kick(s);

    qemu_del_vm_change_state_handler(s->vmse);
    qemu_bh_delete(s->irq_bh);
    msix_unuse_all_vectors(pdev);
    msix_uninit_exclusive_bar(pdev);
    pcie_cap_exit(pdev);
}

static void spyre_instance_finalize(Object *obj)
{
    SpyreState *s = SPYRE(obj);

    if (s->workers) {
        qemu_cond_destroy(&s->work_cond);
    }
    g_free(s->workers);
    g_free(s->queues);
}

static void spyre_qdev_reset(DeviceState *dev)
{
    spyre_reset(SPYRE(dev));
}

/* ------------------------------------------------------------------------ */
/* Migration                                                                */
/* ------------------------------------------------------------------------ */

static int spyre_pre_save(void *opaque)
{
    SpyreState *s = opaque;
    uint32_t i;

    /* A job in progress lives in a worker; refuse rather than lose it. */
    for (i = 0; i < s->nqueues; i++) {
        if (s->queues[i].job_state != SPYRE_JOB_NONE) {
            error_report("spyre: cannot migrate while queue %u has a job "
                         "in progress", i);
            return -EBUSY;
        }
    }
    return 0;
}

static int spyre_post_load(void *opaque, int version_id)
{
    SpyreState *s = opaque;
    uint32_t i;

    if (s->fault_count > SPYRE_FAULT_FIFO_DEPTH ||
        s->fault_head >= SPYRE_FAULT_FIFO_DEPTH ||
        s->irq_status & ~SPYRE_IRQ_ALL || s->irq_mask & ~SPYRE_IRQ_ALL ||
        s->control & ~SPYRE_CONTROL_ENABLE) {
        return -EINVAL;
    }
    for (i = s->ncontexts; i < SPYRE_MAX_CONTEXTS; i++) {
        if (s->ctx_root[i]) {
            return -EINVAL;
        }
    }
    for (i = 0; i < s->nqueues; i++) {
        SpyreQueue *q = &s->queues[i];

        if (q->control & ~SPYRE_Q_CONTROL_MASK ||
            (q->inject && q->inject != SPYRE_DBG_HANG &&
             q->inject != SPYRE_DBG_ERROR)) {
            return -EINVAL;
        }
        switch (q->status) {
        case SPYRE_QS_DISABLED:
            if (q->control & SPYRE_Q_CONTROL_ENABLE) {
                return -EINVAL;
            }
            break;
        case SPYRE_QS_IDLE:
        case SPYRE_QS_ERROR:
            if (!spyre_queue_config_valid(s, q, q->control)) {
                return -EINVAL;
            }
            break;
        default:
            /* BUSY and SEM_WAIT are never saved (spyre_pre_save). */
            return -EINVAL;
        }
        if (q->status != SPYRE_QS_DISABLED &&
            (q->head >= q->entries || q->tail >= q->entries)) {
            return -EINVAL;
        }
        q->id = i;
        q->gen++;
        q->job_state = SPYRE_JOB_NONE;
        q->vector = SPYRE_Q_CONTROL_VECTOR_GET(q->control);
        if (q->vector >= s->nvectors) {
            q->vector = SPYRE_ERROR_VECTOR;     /* i.e. none */
        }
    }
    s->read_latch_addr = UINT64_MAX;
    spyre_kick(s);
    return 0;
}

static const VMStateDescription vmstate_spyre_queue = {
    .name = "spyre-queue",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(ring_base, SpyreQueue),
        VMSTATE_UINT64(compl_addr, SpyreQueue),
        VMSTATE_UINT64(last_seqno, SpyreQueue),
        VMSTATE_UINT32(entries, SpyreQueue),
        VMSTATE_UINT32(control, SpyreQueue),
        VMSTATE_UINT32(head, SpyreQueue),
        VMSTATE_UINT32(tail, SpyreQueue),
        VMSTATE_UINT32(status, SpyreQueue),
        VMSTATE_UINT32(inject, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_spyre = {
    .name = "spyre",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = spyre_pre_save,
    .post_load = spyre_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_PCI_DEVICE(parent_obj, SpyreState),
        VMSTATE_MSIX(parent_obj, SpyreState),
        VMSTATE_UINT32_EQUAL(nqueues, SpyreState, "queues"),
        VMSTATE_UINT32_EQUAL(ncontexts, SpyreState, "contexts"),
        VMSTATE_UINT32_EQUAL(nvectors, SpyreState, "vectors"),
        VMSTATE_UINT64_EQUAL(mem_size, SpyreState, "mem-size"),
        VMSTATE_UINT32(scratch, SpyreState),
        VMSTATE_UINT32(control, SpyreState),
        VMSTATE_UINT32(irq_status, SpyreState),
        VMSTATE_UINT32(irq_mask, SpyreState),
        VMSTATE_INT64(clock_base, SpyreState),
        VMSTATE_UINT32(inval_req, SpyreState),
        VMSTATE_UINT32(inval_ack, SpyreState),
        VMSTATE_UINT32(inval_lo, SpyreState),
        VMSTATE_UINT64_ARRAY(fault_va, SpyreState, SPYRE_FAULT_FIFO_DEPTH),
        VMSTATE_UINT64_ARRAY(fault_info, SpyreState, SPYRE_FAULT_FIFO_DEPTH),
        VMSTATE_UINT32(fault_head, SpyreState),
        VMSTATE_UINT32(fault_count, SpyreState),
        VMSTATE_UINT32(fault_lost, SpyreState),
        VMSTATE_UINT64_ARRAY(ctx_root, SpyreState, SPYRE_MAX_CONTEXTS),
        VMSTATE_UINT64_ARRAY(tel, SpyreState, SPYRE_TEL_COUNT),
        VMSTATE_STRUCT_VARRAY_POINTER_UINT32(queues, SpyreState, nqueues,
                                             vmstate_spyre_queue, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
};

static const Property spyre_props[] = {
    DEFINE_PROP_SIZE("mem-size", SpyreState, mem_size, 256 * MiB),
    DEFINE_PROP_UINT32("queues", SpyreState, nqueues, 64),
    DEFINE_PROP_UINT32("cores", SpyreState, ncores, 32),
    DEFINE_PROP_UINT32("contexts", SpyreState, ncontexts, 256),
    DEFINE_PROP_UINT32("vectors", SpyreState, nvectors, 17),
    DEFINE_PROP_UINT32("workers", SpyreState, nworkers, 4),
};

/*
 * Runtime fault injection: "qom-set <card> dbg-inject <value>" does what a
 * write of <value> to DBG_INJECT does.  Reads return 0.
 */
static void spyre_get_dbg_inject(Object *obj, Visitor *v, const char *name,
                                 void *opaque, Error **errp)
{
    uint32_t value = 0;

    visit_type_uint32(v, name, &value, errp);
}

static void spyre_set_dbg_inject(Object *obj, Visitor *v, const char *name,
                                 void *opaque, Error **errp)
{
    SpyreState *s = SPYRE(obj);
    uint32_t value;

    if (!visit_type_uint32(v, name, &value, errp)) {
        return;
    }
    if (!DEVICE(obj)->realized) {
        error_setg(errp, "spyre: dbg-inject needs a realized device");
        return;
    }
    if (SPYRE_DBG_INJECT_QUEUE(value) >= s->nqueues ||
        (SPYRE_DBG_INJECT_KIND(value) != SPYRE_DBG_HANG &&
         SPYRE_DBG_INJECT_KIND(value) != SPYRE_DBG_ERROR)) {
        error_setg(errp, "spyre: dbg-inject: bad queue or kind");
        return;
    }
    spyre_dbg_inject(s, value);
}

static void spyre_instance_init(Object *obj)
{
    object_property_add(obj, "dbg-inject", "uint32", spyre_get_dbg_inject,
                        spyre_set_dbg_inject, NULL, NULL);
}

static void spyre_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = spyre_realize;
    k->exit = spyre_exit;
    k->config_write = spyre_write_config;
    k->vendor_id = SPYRE_PCI_VENDOR_ID;
    k->device_id = SPYRE_PCI_DEVICE_ID;
    k->revision = SPYRE_PCI_REVISION;
    k->class_id = SPYRE_PCI_CLASS;
    k->subsystem_vendor_id = SPYRE_PCI_SUBVENDOR_ID;
    k->subsystem_id = SPYRE_PCI_SUBDEVICE_ID;
    dc->desc = "Spyre AI accelerator (emulated)";
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
    device_class_set_props(dc, spyre_props);
    device_class_set_legacy_reset(dc, spyre_qdev_reset);
    dc->vmsd = &vmstate_spyre;
}

static const TypeInfo spyre_info = {
    .name = TYPE_SPYRE,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(SpyreState),
    .instance_init = spyre_instance_init,
    .instance_finalize = spyre_instance_finalize,
    .class_init = spyre_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_PCIE_DEVICE },
        { }
    },
};

static void spyre_register_types(void)
{
    type_register_static(&spyre_info);
}

type_init(spyre_register_types)
