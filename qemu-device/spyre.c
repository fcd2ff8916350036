/*
 * Spyre AI-accelerator PCIe card model
 *
 * The programming interface (BAR layout, registers, job descriptors,
 * completion records, page tables, fault records) is defined once in the
 * project's hw/spyre_hw.h, the command-stream format in
 * uapi/drm/spyre_cmd.h; both are shared with the kernel driver.  The
 * numerics (dtype conversion, GEMM, element-wise, reductions, row
 * operations) live in spyre-math.c, which has no QEMU dependency.
 *
 * Execution model
 * ---------------
 * Every piece of state shared between the register file and the execution
 * engine is protected by the BQL: MMIO handlers, the interrupt bottom half
 * and the worker threads all hold it while they touch it.  Workers are a
 * pool of host threads that pick ready queues by priority.  Every guest
 * memory access (translate through the device MMU, then DMA) runs with the
 * BQL held, one page at a time (but see GEMM operands below), so that
 *  - DMA through a vIOMMU may fault (which takes the BQL) safely;
 *  - a translation cached by a worker (TLB, leaf tables) is checked against
 *    the MMU epoch, which MMU_INVAL, CTX_ROOT writes and resets bump under
 *    the BQL: an MMU invalidation is complete as soon as its MMIO write
 *    is, and is acknowledged at once;
 *  - a queue or device reset, which runs under the BQL, takes effect
 *    immediately: each queue carries a generation number, and a worker
 *    re-checks it every time it re-acquires the BQL, dropping a job whose
 *    queue was reset without touching guest memory or queue state again.
 * Compute runs with the BQL released: a GEMM drops it for each K-block
 * step (spyre_gemm_step) and takes it back to translate each batch of
 * operand rows (or each row segment); a batch that lies wholly in device
 * memory is then copied with the BQL released (spyre_part_rows), counted
 * in SpyreState.ncopying, and everything that changes translations, resets
 * a queue or stops the VM waits for such copies to end
 * (spyre_drain_copies), so the rules above still hold when its MMIO write
 * returns.  Workers give the BQL up at least every SPYRE_BQL_SLICE_NS.
 *
 * A doorbell write itself runs the queue's jobs on the writing vCPU for as
 * long as they hold only short commands, within a budget (spyre_db_run);
 * a job that goes further is left to the workers at that command.
 *
 * Scheduling: a free worker takes the ready queue of highest effective
 * priority (its own plus one level per "age-ms" waited), round-robin
 * among equals; with more than one worker, the last free one takes
 * high-priority queues only, so they never wait behind other work.  At
 * every tile or chunk boundary a running job checks for a ready queue of
 * a higher priority (or, for the job at the bottom of a worker, of a
 * higher effective priority); when no worker is idle to take it, it runs
 * that queue's job on the same thread, nested (at most SPYRE_MAX_NEST
 * levels, see spyre_e_preempt), and then resumes.  A large GEMM is split
 * into parts of bounded size, up to min(cores, workers, host CPUs) of
 * them running at once, that free workers help with.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <math.h>
#include "qemu/units.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/queue.h"
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
#include "spyre-math.h"

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

/* Per-command limits: bytes of FILL/COPY (docs: "Limits"), host time. */
#define SPYRE_CMD_MAX_BYTES     SPYRE_MATH_MAX_COPY_BYTES
#define SPYRE_CMD_MAX_NS        (5 * NANOSECONDS_PER_SECOND)
/* Longest a worker keeps the BQL before letting vCPUs have it. */
#define SPYRE_BQL_SLICE_NS      (50 * SCALE_US)
/*
 * Commands the doorbell executor may run per doorbell write: each is
 * short (NOP, TIMESTAMP, SEM_*), so this bounds the time the writing vCPU
 * spends, and a count (not a clock) keeps the split reproducible.
 */
#define SPYRE_DB_BUDGET_CMDS    64
/* Completions on one vector closer than this share an MSI-X message. */
#define SPYRE_IRQ_MODERATE_NS   (20 * SCALE_US)
/* Host-time interval at which blocked SEM_WAIT queues are re-polled. */
#define SPYRE_SEM_POLL_MS       1
/*
 * A ready queue gains one priority level per "age-ms" (default 10) of
 * waiting; 0 turns aging off (strict priority).
 */
/* A running job looks for higher-priority work at least this often. */
#define SPYRE_SCAN_NS           SCALE_MS
/*
 * Jobs one worker can hold at once: the one it picked, one that preempted
 * it by aging, and then one per higher priority (see spyre_e_preempt).
 */
#define SPYRE_MAX_NEST          4
/*
 * GEMM parts: at least about 1 ms of single-core host BLAS (64 GMAC/s),
 * well above the cost of waking a worker, and at most about 4 ms, so that
 * helpers come back to the scheduler often.
 */
#define SPYRE_GANG_MIN_MACS     (1ULL << 26)
#define SPYRE_GANG_MAX_MACS     (1ULL << 28)
#define SPYRE_GANG_MAX_PARTS    65536
#define SPYRE_NO_PART           UINT32_MAX

#define SPYRE_MAX_WORKERS       64
/* Per-worker translation caches (entries, powers of two). */
#define SPYRE_TLB_SIZE          1024    /* 4 KiB pages */
#define SPYRE_PWC_SIZE          64      /* leaf tables (2 MiB of VA each) */
#define SPYRE_PWC_SHIFT         (SPYRE_PAGE_SHIFT + 9)

#define SPYRE_Q_CONTROL_MASK    (SPYRE_Q_CONTROL_ENABLE | \
                                 SPYRE_Q_CONTROL_PRIO(3) | \
                                 SPYRE_Q_CONTROL_VECTOR(0x3ff))

/* Internal command results besides SPYRE_STATUS_*. */
#define SPYRE_EXEC_PARK         0x100   /* SEM_WAIT not satisfied */
#define SPYRE_EXEC_DROPPED      0x101   /* queue reset under our feet */
#define SPYRE_EXEC_STOP         0x102   /* GEMM part no longer needed */
#define SPYRE_EXEC_HANDOFF      0x103   /* not for the doorbell: to a worker */

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
    SPYRE_JOB_READY,        /* begun at the doorbell, for a worker to go on */
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
    uint64_t writes;            /* memory writes: semaphores may change */
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
    int64_t ready_ns;           /* host time it started waiting (aging) */
} SpyreQueue;

typedef struct SpyreWorker SpyreWorker;
typedef struct SpyreExec SpyreExec;

/*
 * A GEMM split into parts: tiles of (batch, M, N) that workers run in
 * parallel, each as a GEMM of its own.  Lives in its owner's SpyreExec;
 * registered in SpyreState.gangs while other workers may help.  All
 * fields are protected by the BQL.
 */
typedef struct SpyreGang {
    QLIST_ENTRY(SpyreGang) link;
    SpyreQueue *q;
    uint32_t gen;
    uint16_t ctx;
    uint32_t prio;
    struct spyre_cmd_gemm cmd;  /* host byte order, validated */
    float sa, sb;
    uint32_t pm, pn;            /* parts along M and N (per batch group) */
    uint32_t bsz, msz, nsz;     /* extent of one part along batch, M, N */
    uint32_t nparts;
    uint32_t next;              /* next part to claim */
    uint32_t active;            /* parts being run */
    uint32_t max_active;        /* cores one GEMM may use at once */
    uint32_t err_part;          /* lowest failed part, or SPYRE_NO_PART */
    uint32_t status;            /* its status */
    uint64_t err_va;
    uint32_t fault_reason;
    bool fault_write;
    bool stop;                  /* everyone stops: dropped or LIMIT */
    bool dropped;
    bool limit;
    float amax;
    int64_t deadline;           /* host time, extended by pauses */
} SpyreGang;

/* A translated piece of a device-memory operand batch (spyre_part_rows). */
typedef struct SpyreSeg {
    uint64_t addr;              /* offset in device memory */
    uint32_t len;
} SpyreSeg;

/* Operand base VAs of the GEMM part an exec runs. */
typedef struct SpyrePartIO {
    SpyreExec *e;
    uint64_t base[SPYRE_GEMM_OPND_BIAS + 1];
    SpyreSeg *segs;             /* spyre_part_rows() scratch */
    size_t nsegs_max;
} SpyrePartIO;

/*
 * Cached translations.  An entry is valid while its @epoch equals
 * SpyreState.mmu_epoch, which MMU_INVAL, CTX_ROOT writes and resets bump.
 */
typedef struct SpyreTlbEntry {
    uint64_t epoch;
    uint64_t vpn;               /* VA >> SPYRE_PAGE_SHIFT */
    uint64_t page;              /* DMA address or device-memory offset */
    uint16_t ctx;
    bool writable;
    bool devmem;
} SpyreTlbEntry;

typedef struct SpyrePwcEntry {
    uint64_t epoch;
    uint64_t tag;               /* VA >> SPYRE_PWC_SHIFT */
    uint64_t table;             /* DMA address of the level-3 table */
    uint16_t ctx;
} SpyrePwcEntry;

/*
 * One job (or one GEMM part) being executed by a worker.  A worker has
 * SPYRE_MAX_NEST of them: level 0 for the work it picked when idle, the
 * others for jobs that preempted it at a tile boundary.
 * The buffers are the only temporary storage the engine uses: data moves
 * through them a page at a time, and GEMM tiles through @scratch (a
 * fixed SPYRE_GEMM_SCRATCH_SIZE, allocated on first use).
 */
struct SpyreExec {
    SpyreState *s;
    SpyreWorker *w;
    unsigned int level;
    SpyreQueue *q;              /* queue whose job we run */
    uint32_t gen;               /* its generation when we took it */
    uint16_t ctx;
    uint32_t prio;              /* base priority of the job */
    int floor;                  /* preemptors need a priority above this */
    uint64_t err_va;
    uint32_t fault_reason;      /* SPYRE_FAULT_* of err_va, or 0 */
    bool fault_write;
    int64_t deadline;           /* host time budget of the command */
    SpyreGang *part_gang;       /* gang whose part we run, or NULL */
    uint32_t part_idx;
    SpyreGang gang;             /* the GEMM we own */
    SpyreGemm gemm;
    SpyrePartIO io;
    void *scratch;
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
    uint8_t buf[4][SPYRE_PAGE_SIZE];
    uint8_t pattern[SPYRE_PAGE_SIZE + 8];
    /*
     * Command-stream prefetch: the rest of the page of the current
     * command, valid while nothing was written and no translation died.
     */
    uint8_t sbuf[SPYRE_PAGE_SIZE];
    uint64_t sbuf_va;
    uint32_t sbuf_len;
    uint64_t sbuf_epoch;
    uint64_t sbuf_writes;
};

struct SpyreWorker {
    SpyreState *s;
    QemuThread thread;
    unsigned int index;
    bool doorbell;              /* the doorbell executor: see spyre_db_run */
    uint32_t db_budget;         /* doorbell executor: commands left */
    int64_t bql_ns;             /* when it last took (or yielded) the BQL */
    uint64_t sched_seen;        /* sched_seq at its last preemption scan */
    int64_t scan_ns;            /* and when that was */
    SpyreTlbEntry tlb[SPYRE_TLB_SIZE];
    SpyrePwcEntry pwc[SPYRE_PWC_SIZE];
    SpyreExec exec[SPYRE_MAX_NEST];
};

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
    uint32_t host_cpus;         /* online host CPUs, at realize */
    uint32_t age_ms;            /* aging period, 0 = strict priority */

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
    SpyreWorker *workers;       /* nworkers threads, then db_worker */
    SpyreWorker *db_worker;     /* the doorbell executor (spyre_db_run) */
    uint32_t ncopying;          /* spyre_part_rows() copies without the BQL */
    QemuEvent copy_done;        /* set when ncopying drops to 0 */
    QemuCond work_cond;         /* idle workers wait here */
    QemuCond gang_cond;         /* GEMM owners wait for their helpers */
    QemuCond run_cond;          /* workers wait here while the VM is stopped */
    uint32_t idle_workers;
    uint32_t nparked;           /* queues in SPYRE_JOB_SEM_WAIT */
    bool sem_poller;            /* an idle worker polls parked queues */
    bool stopping;
    bool vm_running;
    uint32_t rr_next;           /* round-robin start of the queue scan */
    uint64_t sem_epoch;         /* bumped when memory may have changed */
    uint64_t sched_seq;         /* bumped when new work may be ready */
    uint64_t mmu_epoch;         /* bumped when cached translations die */
    QLIST_HEAD(, SpyreGang) gangs;
    VMChangeStateEntry *vmse;

    /* MSI-X vectors to raise from the bottom half. */
    QEMUBH *irq_bh;
    unsigned long irq_pending[BITS_TO_LONGS(SPYRE_MAX_VECTORS)];
    int64_t irq_direct_ns[SPYRE_MAX_VECTORS];   /* last direct message */
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

static int64_t spyre_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
}

static float spyre_f32(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint32_t spyre_f32_bits(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

/* Does [base, base + span) run past the end of the 64-bit space? */
static bool spyre_span_wraps(uint64_t base, uint64_t span)
{
    return span && base + (span - 1) < base;
}

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

/*
 * BQL held.  Raise MSI-X vector @v: at once from a worker thread (@direct,
 * as hw/misc/edu does), else (MMIO handlers) from the bottom half.  A
 * vector raised directly less than SPYRE_IRQ_MODERATE_NS ago goes through
 * the bottom half too, where completions that follow in a burst merge
 * into one message (the driver reads the completion record, which covers
 * every job up to its seqno).
 */
static void spyre_notify(SpyreState *s, unsigned int v, bool direct)
{
    int64_t now;

    if (v >= s->nvectors) {
        return;
    }
    if (direct && !test_bit(v, s->irq_pending)) {
        now = spyre_now();
        if (now - s->irq_direct_ns[v] >= SPYRE_IRQ_MODERATE_NS) {
            s->irq_direct_ns[v] = now;
            trace_spyre_irq(v);
            msix_notify(PCI_DEVICE(s), v);
            return;
        }
    }
    set_bit(v, s->irq_pending);
    qemu_bh_schedule(s->irq_bh);
}

/* BQL held.  Latch @bits in IRQ_STATUS and raise the error vector. */
static void spyre_raise_error(SpyreState *s, uint32_t bits, bool direct)
{
    s->irq_status |= bits;
    if (bits & s->irq_mask) {
        spyre_notify(s, SPYRE_ERROR_VECTOR, direct);
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
static void spyre_record_fault(SpyreState *s, unsigned int ctx,
                               unsigned int queue, uint64_t va, bool write,
                               unsigned int reason, bool direct)
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
    spyre_raise_error(s, SPYRE_IRQ_FAULT, direct);
}

/*
 * BQL held.  Translate @va in the context of @e's job, through the
 * worker's TLB and leaf-table cache.  A fault is noted in @e (the job
 * records it when the command ends).  Returns a SPYRE_STATUS_*.
 */
static uint32_t spyre_e_translate(SpyreExec *e, uint64_t va, bool write,
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

/* BQL held.  Access a translated target; @len stays within one page. */
static uint32_t spyre_e_access(SpyreExec *e, const SpyreTarget *t,
                               uint64_t va, void *buf, uint32_t len,
                               bool write)
{
    SpyreState *s = e->s;

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
static uint32_t spyre_e_rw(SpyreExec *e, uint64_t va, void *buf,
                           uint64_t len, bool write)
{
    uint8_t *p = buf;

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

/* ------------------------------------------------------------------------ */
/* Queues and scheduling (BQL held)                                         */
/* ------------------------------------------------------------------------ */

/* Wake everyone: for rare events (enable, reset, VM state, unplug). */
static void spyre_kick(SpyreState *s)
{
    s->sched_seq++;
    qemu_cond_broadcast(&s->work_cond);
    qemu_cond_broadcast(&s->gang_cond);
    qemu_cond_broadcast(&s->run_cond);
}

/* Wake up to @n idle workers. */
static void spyre_wake(SpyreState *s, uint32_t n)
{
    if (!s->idle_workers || !n) {
        return;
    }
    if (n >= s->idle_workers) {
        qemu_cond_broadcast(&s->work_cond);
        return;
    }
    while (n--) {
        qemu_cond_signal(&s->work_cond);
    }
}

static void spyre_set_job_state(SpyreState *s, SpyreQueue *q, uint32_t st)
{
    if (q->job_state == SPYRE_JOB_SEM_WAIT) {
        s->nparked--;
    }
    if (st == SPYRE_JOB_SEM_WAIT) {
        s->nparked++;
    }
    q->job_state = st;
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

static bool spyre_gang_open(const SpyreGang *g)
{
    return !g->stop && g->err_part == SPYRE_NO_PART &&
           g->next < g->nparts && g->active < g->max_active;
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

/*
 * End the current job of @q: write the completion record (all fields,
 * then seqno), update LAST_SEQNO and HEAD, raise interrupts.
 * @halt: the job failed, halt the queue in SPYRE_QS_ERROR.
 * @direct: called by a worker (see spyre_notify).
 */
static void spyre_end_job(SpyreState *s, SpyreQueue *q, uint32_t status,
                          uint64_t err_va, bool halt, bool direct)
{
    SpyreJob *job = &q->job;
    struct spyre_hw_completion c = { 0 };
    uint64_t end = spyre_clock(s);
    uint64_t seqno = cpu_to_le64(job->seqno);
    bool ok, irq;

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
    spyre_set_job_state(s, q, SPYRE_JOB_NONE);
    q->ready_ns = spyre_now();
    s->tel[SPYRE_TEL_JOBS]++;
    s->tel[SPYRE_TEL_BUSY_NS] += end > job->start_ns ? end - job->start_ns : 0;
    s->sched_seq++;

    if (!ok) {
        trace_spyre_compl_error(q->id, q->compl_addr);
        halt = true;
    }
    q->status = halt ? SPYRE_QS_ERROR : spyre_queue_rest_status(q);
    irq = (halt || status != SPYRE_STATUS_OK ||
           (job->flags & SPYRE_JOB_F_IRQ)) && q->vector != SPYRE_ERROR_VECTOR;
    /* Parked queues re-check their semaphore if the job wrote memory. */
    if (job->writes) {
        s->sem_epoch++;
        spyre_wake(s, s->nparked);
    }
    /*
     * Interrupts last, with nothing of @job read after them: an MSI-X
     * message is a memory write the guest aims, possibly at this card's
     * own doorbell, which may start the next job of @q at once.
     */
    if (halt) {
        spyre_raise_error(s, SPYRE_IRQ_QUEUE_ERROR, direct);
    }
    if (irq) {
        spyre_notify(s, q->vector, direct);
    }
}

/*
 * BQL held.  Wait for the device-memory copies that workers run with the
 * BQL released (spyre_part_rows()): each is a memcpy of at most about
 * SPYRE_ROWS_BATCH_SEGS pages that needs nothing else, and none can start
 * meanwhile, as each one is set up under the BQL.  Sleeps rather than
 * spins, so that on a small host the copier gets the CPU.
 */
static void spyre_drain_copies(SpyreState *s)
{
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
static void spyre_mmu_changed(SpyreState *s)
{
    s->mmu_epoch++;
    spyre_drain_copies(s);
}

/* Q_RESET: abort the job in progress, if any, and disable the queue. */
static void spyre_queue_reset(SpyreState *s, SpyreQueue *q)
{
    trace_spyre_queue_reset(q->id, q->job_state);
    spyre_drain_copies(s);
    if (q->job_state != SPYRE_JOB_NONE) {
        spyre_end_job(s, q, SPYRE_STATUS_ABORTED, 0, false, false);
    }
    q->gen++;
    spyre_set_job_state(s, q, SPYRE_JOB_NONE);
    q->head = 0;
    q->tail = 0;
    q->inject = 0;
    q->control &= ~SPYRE_Q_CONTROL_ENABLE;
    q->status = SPYRE_QS_DISABLED;
    /* Waiters (paused workers, GEMM owners) notice the new generation. */
    spyre_kick(s);
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
    s->nparked = 0;
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
    spyre_mmu_changed(s);
    bitmap_zero(s->irq_pending, SPYRE_MAX_VECTORS);
    spyre_kick(s);
}

/* ------------------------------------------------------------------------ */
/* Worker: time slices, pauses, preemption (BQL held unless stated)         */
/* ------------------------------------------------------------------------ */

static void spyre_run_queue(SpyreExec *e, SpyreQueue *q, int floor);
static void spyre_gang_help(SpyreExec *e, SpyreGang *g, int floor);

/* Is the job of @e still wanted (no reset of its queue, no unplug)? */
static bool spyre_e_alive(SpyreExec *e)
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
static void spyre_e_wait_running(SpyreExec *e)
{
    SpyreState *s = e->s;
    int64_t t0;

    if (s->vm_running || !spyre_e_alive(e)) {
        return;
    }
    t0 = spyre_now();
    while (spyre_e_alive(e) && !s->vm_running) {
        qemu_cond_wait_bql(&s->run_cond);
    }
    e->w->bql_ns = spyre_now();
    spyre_e_extend(e, e->w->bql_ns - t0);
}

/*
 * Give the BQL up for a moment and come back.  Returns false if the job
 * must be dropped (its queue was reset, or the device is going away).
 */
static bool spyre_e_yield(SpyreExec *e)
{
    bql_unlock();
    g_thread_yield();       /* a plain unlock+lock can starve vCPUs */
    bql_lock();
    e->w->bql_ns = spyre_now();
    spyre_e_wait_running(e);
    return spyre_e_alive(e);
}

/*
 * Run work on exec level @level of @w: a queue whose priority is above
 * @floor (-1: any), or with @aged whose effective priority is, or a part
 * of a GEMM whose priority is.  Returns false if there was none.
 * *@sem_waiters (if not NULL) tells whether queues are parked in SEM_WAIT.
 */
static bool spyre_run_work(SpyreWorker *w, unsigned int level, int floor,
                           bool aged, bool *sem_waiters)
{
    SpyreState *s = w->s;
    bool dummy = false;
    SpyreQueue *q;
    SpyreGang *g;
    int eff = -1;

    if (s->stopping || !s->vm_running) {
        return false;
    }
    q = spyre_pick_queue(s, floor, aged, &eff,
                         sem_waiters ? sem_waiters : &dummy);
    g = spyre_pick_gang(s, floor);
    /* Start a job of at least the same priority before helping a GEMM. */
    if (g && (!q || (int)g->prio > eff)) {
        spyre_gang_help(&w->exec[level], g, floor);
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
static void spyre_e_preempt(SpyreExec *e)
{
    SpyreWorker *w = e->w;
    SpyreState *s = e->s;
    int64_t now, t0;

    /* An idle worker takes the work, unless it is the last (see above). */
    if (e->level + 1 >= SPYRE_MAX_NEST ||
        s->idle_workers > (s->nworkers > 1)) {
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
 * A tile or chunk boundary: share the BQL, honour pauses and preemption.
 * @in_cmd: enforce the command's time budget.  Returns SPYRE_STATUS_OK,
 * SPYRE_STATUS_LIMIT or SPYRE_EXEC_DROPPED.
 */
static uint32_t spyre_e_point(SpyreExec *e, bool in_cmd)
{
    if (spyre_now() - e->w->bql_ns >= SPYRE_BQL_SLICE_NS &&
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

/* ------------------------------------------------------------------------ */
/* Commands (BQL held)                                                      */
/* ------------------------------------------------------------------------ */

static uint32_t spyre_cmd_fill(SpyreExec *e)
{
    struct spyre_cmd_fill *c = &e->cmd.fill;
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
    if (spyre_span_wraps(dst, bytes)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }

    v_le = cpu_to_le64(value);
    for (i = 0; i + esz <= sizeof(e->pattern); i += esz) {
        memcpy(e->pattern + i, &v_le, esz);
    }

    for (done = 0; done < bytes;) {
        uint64_t va = dst + done;
        uint32_t n = MIN(bytes - done,
                         SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        uint32_t st;

        st = spyre_e_rw(e, va, e->pattern + done % esz, n, true);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        done += n;
        if (done < bytes) {
            st = spyre_e_point(e, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_copy(SpyreExec *e)
{
    const struct spyre_cmd_copy *g = &e->cmd.copy;
    struct spyre_cmd_copy c = {
        .hdr.flags = le16_to_cpu(g->hdr.flags),
        .src = le64_to_cpu(g->src),
        .dst = le64_to_cpu(g->dst),
        .width = le64_to_cpu(g->width),
        .height = le64_to_cpu(g->height),
        .src_pitch = le64_to_cpu(g->src_pitch),
        .dst_pitch = le64_to_cpu(g->dst_pitch),
        .src_dtype = le32_to_cpu(g->src_dtype),
        .dst_dtype = le32_to_cpu(g->dst_dtype),
    };
    uint64_t sspan, dspan, chunk, r, done;
    size_t ses, des;
    uint32_t st;

    st = spyre_copy_check(&c, &sspan, &dspan);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (spyre_span_wraps(c.src, sspan) || spyre_span_wraps(c.dst, dspan)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    if (c.height == 1) {
        c.src_pitch = c.dst_pitch = 0;
    }
    ses = spyre_math_dtype_size(c.src_dtype);
    des = spyre_math_dtype_size(c.dst_dtype);
    chunk = SPYRE_PAGE_SIZE / MAX(ses, des);

    for (r = 0; r < c.height; r++) {
        for (done = 0; done < c.width;) {
            uint64_t n = MIN(c.width - done, chunk);
            uint8_t *out = e->buf[0];

            st = spyre_e_rw(e, c.src + r * c.src_pitch + done * ses,
                            e->buf[0], n * ses, false);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            if (c.src_dtype != c.dst_dtype) {
                out = e->buf[1];
                spyre_convert(out, c.dst_dtype, e->buf[0], c.src_dtype, n,
                              c.hdr.flags & SPYRE_CMD_F_NOSAT);
            }
            st = spyre_e_rw(e, c.dst + r * c.dst_pitch + done * des, out,
                            n * des, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            done += n;
            if (done < c.width || r + 1 < c.height) {
                st = spyre_e_point(e, true);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
        }
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_eltwise(SpyreExec *e)
{
    const struct spyre_cmd_eltwise *g = &e->cmd.eltwise;
    struct spyre_cmd_eltwise c = {
        .hdr.flags = le16_to_cpu(g->hdr.flags),
        .op = le32_to_cpu(g->op),
        .dtype = le32_to_cpu(g->dtype),
        .count = le64_to_cpu(g->count),
        .a = le64_to_cpu(g->a),
        .b = le64_to_cpu(g->b),
        .out = le64_to_cpu(g->out),
        .alpha = le32_to_cpu(g->alpha),
        .pad = le32_to_cpu(g->pad),
    };
    bool binary = c.op == SPYRE_ELT_ADD || c.op == SPYRE_ELT_MUL;
    uint64_t bytes, done, chunk;
    size_t es;
    uint32_t st;

    st = spyre_eltwise_check(&c, &bytes);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (spyre_span_wraps(c.a, bytes) || spyre_span_wraps(c.out, bytes) ||
        (binary && spyre_span_wraps(c.b, bytes))) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    es = spyre_math_dtype_size(c.dtype);
    chunk = SPYRE_PAGE_SIZE / es;

    for (done = 0; done < c.count;) {
        uint64_t n = MIN(c.count - done, chunk);

        st = spyre_e_rw(e, c.a + done * es, e->buf[0], n * es, false);
        if (st == SPYRE_STATUS_OK && binary) {
            st = spyre_e_rw(e, c.b + done * es, e->buf[1], n * es, false);
        }
        if (st == SPYRE_STATUS_OK) {
            st = spyre_eltwise(c.op, c.dtype, spyre_f32(c.alpha), e->buf[0],
                               binary ? e->buf[1] : NULL, e->buf[2], n);
        }
        if (st == SPYRE_STATUS_OK) {
            st = spyre_e_rw(e, c.out + done * es, e->buf[2], n * es, true);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        done += n;
        if (done < c.count) {
            st = spyre_e_point(e, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    return SPYRE_STATUS_OK;
}

/*
 * Feed row @r (at VA @row, @cols elements of @es bytes) to the passes of
 * @rs.  A row that fits in one chunk is read once, into e->buf[0].
 */
static uint32_t spyre_row_passes_run(SpyreExec *e, SpyreRow *rs,
                                     uint64_t row, uint64_t cols, int dtype,
                                     size_t es, bool *cached)
{
    uint64_t chunk = SPYRE_PAGE_SIZE / sizeof(float), done;
    unsigned int p;
    uint32_t st;

    *cached = cols <= chunk;
    if (*cached) {
        st = spyre_e_rw(e, row, e->buf[0], cols * es, false);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    for (p = 0; p < spyre_row_passes(rs); p++) {
        for (done = 0; done < cols;) {
            uint64_t n = MIN(cols - done, chunk);

            if (!*cached) {
                st = spyre_e_rw(e, row + done * es, e->buf[0], n * es, false);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
            st = spyre_row_feed(rs, e->buf[0], dtype, n);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            done += n;
            if (done < cols) {
                st = spyre_e_point(e, true);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
        }
        st = spyre_row_end_pass(rs);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_reduce(SpyreExec *e)
{
    const struct spyre_cmd_reduce *g = &e->cmd.reduce;
    struct spyre_cmd_reduce c = {
        .hdr.flags = le16_to_cpu(g->hdr.flags),
        .op = le32_to_cpu(g->op),
        .dtype = le32_to_cpu(g->dtype),
        .rows = le32_to_cpu(g->rows),
        .cols = le32_to_cpu(g->cols),
        .src = le64_to_cpu(g->src),
        .dst = le64_to_cpu(g->dst),
        .ld = le64_to_cpu(g->ld),
    };
    uint64_t sbytes, dbytes, out_chunk;
    uint32_t r, nout = 0, st;
    bool cached;
    size_t es;

    st = spyre_reduce_check(&c, &sbytes, &dbytes);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (spyre_span_wraps(c.src, sbytes) || spyre_span_wraps(c.dst, dbytes)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    es = spyre_math_dtype_size(c.dtype);
    out_chunk = SPYRE_PAGE_SIZE / es;

    for (r = 0; r < c.rows; r++) {
        SpyreRow rs;
        float v;

        st = spyre_row_init(&rs, SPYRE_OP_REDUCE, c.op, c.cols, 0.0f);
        if (st == SPYRE_STATUS_OK) {
            st = spyre_row_passes_run(e, &rs, c.src + (uint64_t)r * c.ld * es,
                                      c.cols, c.dtype, es, &cached);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        v = spyre_row_result(&rs);
        spyre_store_fp32(e->buf[2] + nout * es, c.dtype, &v, 1, 0);
        if (++nout == out_chunk || r + 1 == c.rows) {
            st = spyre_e_rw(e, c.dst + (uint64_t)(r + 1 - nout) * es,
                            e->buf[2], nout * es, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            nout = 0;
        }
        if (r + 1 < c.rows) {
            st = spyre_e_point(e, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    return SPYRE_STATUS_OK;
}

static uint32_t spyre_cmd_rowop(SpyreExec *e)
{
    const struct spyre_cmd_rowop *g = &e->cmd.rowop;
    struct spyre_cmd_rowop c = {
        .hdr.flags = le16_to_cpu(g->hdr.flags),
        .op = le32_to_cpu(g->op),
        .dtype = le32_to_cpu(g->dtype),
        .rows = le32_to_cpu(g->rows),
        .cols = le32_to_cpu(g->cols),
        .src = le64_to_cpu(g->src),
        .dst = le64_to_cpu(g->dst),
        .ld_src = le64_to_cpu(g->ld_src),
        .ld_dst = le64_to_cpu(g->ld_dst),
        .gamma = le64_to_cpu(g->gamma),
        .beta = le64_to_cpu(g->beta),
        .eps = le32_to_cpu(g->eps),
        .pad = le32_to_cpu(g->pad),
    };
    uint64_t sbytes, dbytes, vbytes, chunk = SPYRE_PAGE_SIZE / sizeof(float);
    uint64_t gamma = 0, beta = 0;
    float eps = spyre_f32(c.eps);
    uint32_t r, st;
    size_t es;

    st = spyre_rowop_check(&c, &sbytes, &dbytes);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (!(eps >= 0.0f)) {
        return SPYRE_STATUS_INVALID_OPERAND;      /* negative or NaN */
    }
    if (c.op != SPYRE_ROW_SOFTMAX) {
        gamma = c.gamma;
    }
    if (c.op == SPYRE_ROW_LAYERNORM) {
        beta = c.beta;
    }
    vbytes = (uint64_t)c.cols * sizeof(float);
    if (spyre_span_wraps(c.src, sbytes) || spyre_span_wraps(c.dst, dbytes) ||
        (gamma && spyre_span_wraps(gamma, vbytes)) ||
        (beta && spyre_span_wraps(beta, vbytes))) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    es = spyre_math_dtype_size(c.dtype);

    for (r = 0; r < c.rows; r++) {
        uint64_t src = c.src + (uint64_t)r * c.ld_src * es;
        uint64_t dst = c.dst + (uint64_t)r * c.ld_dst * es;
        uint64_t done;
        bool cached;
        SpyreRow rs;

        st = spyre_row_init(&rs, SPYRE_OP_ROWOP, c.op, c.cols, eps);
        if (st == SPYRE_STATUS_OK) {
            st = spyre_row_passes_run(e, &rs, src, c.cols, c.dtype, es,
                                      &cached);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        for (done = 0; done < c.cols;) {
            uint64_t n = MIN(c.cols - done, chunk);

            if (!cached) {
                st = spyre_e_rw(e, src + done * es, e->buf[0], n * es, false);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
            if (gamma) {
                st = spyre_e_rw(e, gamma + done * sizeof(float), e->buf[1],
                                n * sizeof(float), false);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
            if (beta) {
                st = spyre_e_rw(e, beta + done * sizeof(float), e->buf[3],
                                n * sizeof(float), false);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
            st = spyre_row_apply(&rs, e->buf[2], c.dtype, e->buf[0], n,
                                 gamma ? e->buf[1] : NULL,
                                 beta ? e->buf[3] : NULL);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_e_rw(e, dst + done * es, e->buf[2], n * es, true);
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            done += n;
            if (done < c.cols || r + 1 < c.rows) {
                st = spyre_e_point(e, true);
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
        }
    }
    return SPYRE_STATUS_OK;
}

/* ---- GEMM --------------------------------------------------------------- */

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
 * Take the BQL for operand I/O of the GEMM part @e runs: once the VM runs,
 * SPYRE_STATUS_OK, or SPYRE_EXEC_DROPPED (queue reset) or SPYRE_EXEC_STOP
 * (the part is no longer needed).  The BQL is held on return either way.
 */
static uint32_t spyre_part_lock(SpyreExec *e)
{
    SpyreGang *g = e->part_gang;

    bql_lock();
    spyre_e_wait_running(e);
    if (!spyre_e_alive(e)) {
        return SPYRE_EXEC_DROPPED;
    }
    if (g->stop || g->err_part < e->part_idx) {
        return SPYRE_EXEC_STOP;
    }
    return SPYRE_STATUS_OK;
}

/*
 * One operand row segment of a GEMM part, with the BQL taken for it:
 * spyre_part_rows() moves segments outside device memory this way.
 */
static int spyre_part_io(SpyrePartIO *io, int opnd, uint64_t off, void *buf,
                         size_t len, bool write)
{
    SpyreExec *e = io->e;
    SpyreWorker *w = e->w;
    int64_t now;
    uint32_t st;

    st = spyre_part_lock(e);
    if (st == SPYRE_STATUS_OK) {
        st = spyre_e_rw(e, io->base[opnd] + off, buf, len, write);
    }
    bql_unlock();
    now = spyre_now();
    if (now - w->bql_ns >= SPYRE_BQL_SLICE_NS) {
        g_thread_yield();
        w->bql_ns = now;
    }
    return st;
}

/*
 * Segments (pages or parts of pages) spyre_part_rows() translates per hold
 * of the BQL, checked between rows: a batch may end with one more row.
 */
#define SPYRE_ROWS_BATCH_SEGS   32

/*
 * Operand I/O of a GEMM part (SpyreGemmIO): @nrows segments of @len
 * bytes, @stride bytes apart from @off, to or from @buf where they are
 * packed.  Called by spyre_gemm_step() with the BQL released.  Rows are
 * translated under the BQL in batches of about SPYRE_ROWS_BATCH_SEGS
 * pages; a batch that lies wholly in device memory is then copied with
 * the BQL released, counted in s->ncopying for spyre_drain_copies().  Rows
 * in system memory go one by one through spyre_part_io(), which holds the
 * BQL for each (DMA through a vIOMMU may fault).
 */
static int spyre_part_rows(SpyrePartIO *io, int opnd, uint64_t off,
                           uint64_t stride, uint32_t nrows, void *buf,
                           size_t len, bool write)
{
    SpyreExec *e = io->e;
    SpyreState *s = e->s;
    uint8_t *p = buf;
    uint32_t st = SPYRE_STATUS_OK, r = 0, r1;
    size_t nsegs, i;
    bool devmem = true;

    /* The doorbell executor hands GEMMs over: it never drops the BQL. */
    assert(!e->w->doorbell);
    if (opnd < 0 || opnd > SPYRE_GEMM_OPND_BIAS) {
        return SPYRE_STATUS_INTERNAL;
    }
    while (r < nrows) {
        nsegs = 0;
        st = spyre_part_lock(e);
        for (r1 = r; st == SPYRE_STATUS_OK && devmem && r1 < nrows &&
             nsegs < SPYRE_ROWS_BATCH_SEGS; r1++) {
            uint64_t va = io->base[opnd] + off + r1 * stride;
            size_t left = len;

            while (left) {
                uint32_t c = MIN(left,
                                 SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
                SpyreTarget t;

                st = spyre_e_translate(e, va, write, &t);
                if (st != SPYRE_STATUS_OK || !t.devmem) {
                    devmem = st != SPYRE_STATUS_OK;
                    break;
                }
                if (nsegs == io->nsegs_max) {
                    io->nsegs_max = MAX(64, io->nsegs_max * 2);
                    io->segs = g_renew(SpyreSeg, io->segs, io->nsegs_max);
                }
                io->segs[nsegs].addr = t.addr;
                io->segs[nsegs].len = c;
                nsegs++;
                va += c;
                left -= c;
            }
        }
        if (st != SPYRE_STATUS_OK || !devmem) {
            bql_unlock();
            break;
        }
        e->q->job.writes += write ? nsegs : 0;
        s->tel[SPYRE_TEL_BYTES] += (uint64_t)(r1 - r) * len;
        qatomic_inc(&s->ncopying);
        bql_unlock();
        for (i = 0; i < nsegs; i++) {
            if (write) {
                memcpy(s->devmem_ptr + io->segs[i].addr, p, io->segs[i].len);
                memory_region_set_dirty(&s->devmem, io->segs[i].addr,
                                        io->segs[i].len);
            } else {
                memcpy(p, s->devmem_ptr + io->segs[i].addr,
                       io->segs[i].len);
            }
            p += io->segs[i].len;
        }
        if (qatomic_fetch_dec(&s->ncopying) == 1) {
            qemu_event_set(&s->copy_done);
        }
        r = r1;
    }
    /* System memory from row r on: one row at a time under the BQL. */
    for (; st == SPYRE_STATUS_OK && r < nrows; r++) {
        st = spyre_part_io(io, opnd, off + r * stride, p, len, write);
        p += len;
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

    spyre_gang_part_cmd(g, idx, &sub);
    e->part_gang = g;
    e->part_idx = idx;
    e->io.e = e;
    e->io.base[SPYRE_GEMM_OPND_A] = sub.a;
    e->io.base[SPYRE_GEMM_OPND_B] = sub.b;
    e->io.base[SPYRE_GEMM_OPND_C] = sub.c;
    e->io.base[SPYRE_GEMM_OPND_BIAS] = sub.bias;
    io.opaque = &e->io;
    if (!e->scratch) {
        e->scratch = g_malloc(SPYRE_GEMM_SCRATCH_SIZE);
    }
    trace_spyre_gemm_part(g->q->id, idx, g->nparts, sub.batch, sub.m, sub.n,
                          sub.k);

    st = spyre_gemm_init(&e->gemm, &sub, g->sa, g->sb, &io, e->scratch,
                         SPYRE_GEMM_SCRATCH_SIZE);
    while (st == SPYRE_STATUS_OK && !spyre_gemm_done(&e->gemm)) {
        bql_unlock();
        st = spyre_gemm_step(&e->gemm);
        bql_lock();
        e->w->bql_ns = spyre_now();
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
static void spyre_gang_help(SpyreExec *e, SpyreGang *g, int floor)
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

static uint32_t spyre_cmd_gemm(SpyreExec *e)
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
    g->sa = g->sb = 1.0f;
    if (c->a_dtype != SPYRE_DTYPE_INT8) {
        if (c->scale_a) {
            st = spyre_e_rw(e, c->scale_a, &v, sizeof(v), false);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            g->sa = spyre_f32(le32_to_cpu(v));
        }
        if (c->scale_b) {
            st = spyre_e_rw(e, c->scale_b, &v, sizeof(v), false);
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
        qemu_cond_timedwait_bql(&s->gang_cond, 10);
        e->w->bql_ns = spyre_now();
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
        return spyre_e_rw(e, c->amax, &v, sizeof(v), true);
    }
    return SPYRE_STATUS_OK;
}

/* ---- the rest ----------------------------------------------------------- */

static uint32_t spyre_cmd_timestamp(SpyreExec *e)
{
    struct spyre_cmd_timestamp *c = &e->cmd.timestamp;
    uint64_t dst = le64_to_cpu(c->dst);
    uint64_t now = cpu_to_le64(spyre_clock(e->s));

    if (c->hdr.flags) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (dst & 7) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    return spyre_e_rw(e, dst, &now, sizeof(now), true);
}

static uint32_t spyre_cmd_sem(SpyreExec *e, bool signal)
{
    SpyreState *s = e->s;
    struct spyre_cmd_sem *c = &e->cmd.sem;
    uint64_t addr = le64_to_cpu(c->addr);
    uint64_t value = le64_to_cpu(c->value);
    uint16_t flags = le16_to_cpu(c->hdr.flags);
    uint64_t cur = 0;
    SpyreTarget t;
    uint32_t st;

    if (flags & ~(signal ? SPYRE_SEM_F_ADD : 0)) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (addr & 7) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    st = spyre_e_translate(e, addr, signal, &t);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (!signal || (flags & SPYRE_SEM_F_ADD)) {
        st = spyre_e_access(e, &t, addr, &cur, sizeof(cur), false);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        cur = le64_to_cpu(cur);
    }
    if (!signal) {
        trace_spyre_sem_wait(e->q->id, addr, cur, value);
        return cur >= value ? SPYRE_STATUS_OK : SPYRE_EXEC_PARK;
    }
    /*
     * The read-modify-write runs under the BQL: atomic with respect to
     * every other SEM command of this card, not to CPUs writing the same
     * word nor to a GEMM result written over it (spyre_part_rows() copies
     * device memory without the BQL).
     */
    cur = cpu_to_le64(flags & SPYRE_SEM_F_ADD ? cur + value : value);
    st = spyre_e_access(e, &t, addr, &cur, sizeof(cur), true);
    if (st == SPYRE_STATUS_OK) {
        s->sem_epoch++;
        s->sched_seq++;
        spyre_wake(s, s->nparked);
    }
    return st;
}

/*
 * Read @len bytes of the job's stream at @va (within the stream) into
 * @dst, through the prefetch buffer: a miss reads the stream up to the
 * end of @va's page (one translation, no fault a direct read would not
 * have).
 */
static uint32_t spyre_stream_read(SpyreExec *e, uint64_t va, void *dst,
                                  uint32_t len)
{
    SpyreJob *job = &e->q->job;
    uint64_t end = job->cmd_va + job->cmd_size;
    uint32_t n, st;

    if (e->sbuf_epoch != e->s->mmu_epoch || e->sbuf_writes != job->writes ||
        va < e->sbuf_va || va + len > e->sbuf_va + e->sbuf_len) {
        n = MIN(end - va, SPYRE_PAGE_SIZE - (va & SPYRE_PAGE_MASK));
        if (len > n) {
            /* Crosses a page: read it as is. */
            e->sbuf_len = 0;
            return spyre_e_rw(e, va, dst, len, false);
        }
        e->sbuf_len = 0;
        st = spyre_e_rw(e, va, e->sbuf, n, false);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        e->sbuf_va = va;
        e->sbuf_len = n;
        e->sbuf_epoch = e->s->mmu_epoch;
        e->sbuf_writes = job->writes;
    }
    memcpy(dst, e->sbuf + (va - e->sbuf_va), len);
    return SPYRE_STATUS_OK;
}

/* Fetch and run the command at the job's cmd_offset. */
static uint32_t spyre_exec_cmd(SpyreExec *e)
{
    SpyreJob *job = &e->q->job;
    uint64_t va = job->cmd_va + job->cmd_offset;
    unsigned int op;
    uint32_t size, st;

    e->err_va = 0;
    e->fault_reason = 0;
    st = spyre_stream_read(e, va, &e->cmd.hdr, sizeof(e->cmd.hdr));
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    op = le16_to_cpu(e->cmd.hdr.opcode);
    size = le32_to_cpu(e->cmd.hdr.size);
    trace_spyre_cmd(e->q->id, job->cmd_offset, op, size);
    if (op >= SPYRE_OP_COUNT) {
        return SPYRE_STATUS_INVALID_OPCODE;
    }
    if (size != spyre_cmd_size[op] ||
        size > job->cmd_size - job->cmd_offset) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (e->w->doorbell && op != SPYRE_OP_NOP && op != SPYRE_OP_TIMESTAMP &&
        op != SPYRE_OP_SEM_WAIT && op != SPYRE_OP_SEM_SIGNAL) {
        return SPYRE_EXEC_HANDOFF;
    }
    if (size > sizeof(e->cmd.hdr)) {
        st = spyre_stream_read(e, va + sizeof(e->cmd.hdr),
                               e->cmd.raw + sizeof(e->cmd.hdr),
                               size - sizeof(e->cmd.hdr));
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }

    e->deadline = spyre_now() + SPYRE_CMD_MAX_NS;
    switch (op) {
    case SPYRE_OP_NOP:
        return e->cmd.hdr.flags ? SPYRE_STATUS_INVALID_COMMAND :
                                  SPYRE_STATUS_OK;
    case SPYRE_OP_FILL:
        return spyre_cmd_fill(e);
    case SPYRE_OP_COPY:
        return spyre_cmd_copy(e);
    case SPYRE_OP_GEMM:
        return spyre_cmd_gemm(e);
    case SPYRE_OP_ELTWISE:
        return spyre_cmd_eltwise(e);
    case SPYRE_OP_REDUCE:
        return spyre_cmd_reduce(e);
    case SPYRE_OP_ROWOP:
        return spyre_cmd_rowop(e);
    case SPYRE_OP_TIMESTAMP:
        return spyre_cmd_timestamp(e);
    case SPYRE_OP_SEM_WAIT:
        return spyre_cmd_sem(e, false);
    default:
        return spyre_cmd_sem(e, true);
    }
}

/* ------------------------------------------------------------------------ */
/* Jobs (BQL held)                                                          */
/* ------------------------------------------------------------------------ */

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
    spyre_set_job_state(s, q, SPYRE_JOB_RUNNING);
    q->status = SPYRE_QS_BUSY;

    if (spyre_dma_rw(s, q->ring_base + (uint64_t)q->head * sizeof(d),
                     &d, sizeof(d), DMA_DIRECTION_TO_DEVICE) != MEMTX_OK) {
        /* No seqno to report: halt without a completion record. */
        trace_spyre_ring_error(q->id, q->head);
        spyre_set_job_state(s, q, SPYRE_JOB_NONE);
        q->head = (q->head + 1) & (q->entries - 1);
        q->status = SPYRE_QS_ERROR;
        spyre_raise_error(s, SPYRE_IRQ_QUEUE_ERROR, true);
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
        spyre_set_job_state(s, q, SPYRE_JOB_HUNG);
        trace_spyre_job_hang(q->id, job->seqno);
        return false;
    }
    if (q->inject == SPYRE_DBG_ERROR) {
        q->inject = 0;
        spyre_end_job(s, q, SPYRE_STATUS_INTERNAL, 0, true, true);
        return false;
    }
    st = spyre_job_check(s, &d);
    if (st != SPYRE_STATUS_OK) {
        spyre_end_job(s, q, st, 0, true, true);
        return false;
    }
    return true;
}

/*
 * The doorbell executor leaves the job of @q, begun, to the workers
 * (spyre_db_run() wakes one).
 */
static void spyre_job_handoff(SpyreState *s, SpyreQueue *q)
{
    spyre_set_job_state(s, q, SPYRE_JOB_READY);
    q->ready_ns = spyre_now();
    s->sched_seq++;
}

/*
 * Run (or resume) the job of @q on @e until it ends, parks, is dropped
 * or, on the doorbell executor, handed off; @floor is that of the job it
 * preempts (-1: none).
 */
static void spyre_run_queue(SpyreExec *e, SpyreQueue *q, int floor)
{
    SpyreState *s = e->s;
    SpyreJob *job = &q->job;
    uint32_t st = SPYRE_STATUS_OK;

    e->q = q;
    e->gen = q->gen;
    e->prio = SPYRE_Q_CONTROL_PRIO_GET(q->control);
    e->floor = MAX((int)e->prio, floor);
    e->part_gang = NULL;
    e->sbuf_len = 0;
    if (q->job_state == SPYRE_JOB_SEM_WAIT ||
        q->job_state == SPYRE_JOB_READY) {
        spyre_set_job_state(s, q, SPYRE_JOB_RUNNING);
        q->status = SPYRE_QS_BUSY;
    } else if (!spyre_job_start(s, q)) {
        return;
    }
    e->ctx = job->ctx;

    while (job->cmd_offset < job->cmd_size) {
        st = spyre_exec_cmd(e);
        if (st == SPYRE_EXEC_DROPPED) {
            return;
        }
        if (st == SPYRE_EXEC_PARK) {
            spyre_set_job_state(s, q, SPYRE_JOB_SEM_WAIT);
            q->status = SPYRE_QS_SEM_WAIT;
            q->sem_epoch = s->sem_epoch;
            q->ready_ns = spyre_now();
            q->sem_poll_ns = q->ready_ns + SPYRE_SEM_POLL_MS * SCALE_MS;
            s->sched_seq++;
            return;
        }
        if (st == SPYRE_EXEC_HANDOFF) {
            spyre_job_handoff(s, q);
            return;
        }
        if (st != SPYRE_STATUS_OK) {
            break;
        }
        s->tel[SPYRE_TEL_CMDS]++;
        job->cmd_offset += le32_to_cpu(e->cmd.hdr.size);
        if (e->w->doorbell) {
            e->w->db_budget--;
            if (job->cmd_offset < job->cmd_size && !e->w->db_budget) {
                spyre_job_handoff(s, q);
                return;
            }
        } else if (job->cmd_offset < job->cmd_size) {
            st = spyre_e_point(e, false);
            if (st == SPYRE_EXEC_DROPPED) {
                return;
            }
        }
    }
    if (st == SPYRE_STATUS_MMU_FAULT && e->fault_reason) {
        spyre_record_fault(s, e->ctx, q->id, e->err_va, e->fault_write,
                           e->fault_reason, true);
    }
    spyre_end_job(s, q, st, e->err_va, st != SPYRE_STATUS_OK, true);
    /*
     * A worker at level 0 picks the next job itself; one running this job
     * nested goes back to the job it preempted, so let an idle one in.
     */
    if (e->level && q->status == SPYRE_QS_IDLE && q->head != q->tail) {
        spyre_wake(s, 1);
    }
}

static void *spyre_worker_thread(void *opaque)
{
    SpyreWorker *w = opaque;
    SpyreState *s = w->s;

    rcu_register_thread();
    bql_lock();
    w->bql_ns = spyre_now();
    while (!s->stopping) {
        bool sem_waiters = false, poller;
        /*
         * The last free worker takes high-priority queues only: however
         * much other work is queued, one worker stays free for them.
         */
        int floor = s->nworkers > 1 && !s->idle_workers ?
                    SPYRE_Q_PRIO_NORMAL : -1;

        if (spyre_run_work(w, 0, floor, false, &sem_waiters)) {
            /* Back-to-back short jobs: share the BQL all the same. */
            if (spyre_now() - w->bql_ns >= SPYRE_BQL_SLICE_NS) {
                bql_unlock();
                g_thread_yield();
                bql_lock();
                w->bql_ns = spyre_now();
            }
            continue;
        }
        /* One idle worker re-polls parked SEM_WAIT queues every 1 ms. */
        poller = sem_waiters && !s->sem_poller;
        s->idle_workers++;
        if (poller) {
            s->sem_poller = true;
            qemu_cond_timedwait_bql(&s->work_cond, SPYRE_SEM_POLL_MS);
            s->sem_poller = false;
        } else {
            qemu_cond_wait_bql(&s->work_cond);
        }
        s->idle_workers--;
        w->bql_ns = spyre_now();
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
    } else {
        spyre_drain_copies(s);  /* no guest memory write after the stop */
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
    return SPYRE_CAP_FP16 | SPYRE_CAP_BF16 | SPYRE_CAP_FP8 | SPYRE_CAP_INT8 |
           SPYRE_CAP_MMU | SPYRE_CAP_SEM;
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
     * Workers translate and access memory with the BQL held, one page at
     * a time, and check their TLB against mmu_epoch before each use: once
     * this write returns, no access uses a translation read before it.
     * Acknowledge at once.
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

/*
 * A doorbell write: run the jobs at HEAD of @q at once, on the vCPU that
 * wrote it, as long as they consist of short commands (NOP, TIMESTAMP,
 * SEM_WAIT, SEM_SIGNAL), for at most SPYRE_DB_BUDGET_CMDS of them; a job
 * that reaches any other command, or the end of the budget, goes on on a
 * worker from that command (SPYRE_JOB_READY).  A submit -> completion
 * round trip of such jobs then costs no host thread wake-up.  The
 * executor runs with the BQL held throughout (it never reaches a point
 * where a worker would drop it) and takes no worker from other queues.
 */
static void spyre_db_run(SpyreState *s, SpyreQueue *q)
{
    SpyreWorker *w = s->db_worker;
    bool dummy;

    w->db_budget = SPYRE_DB_BUDGET_CMDS;
    while (!s->stopping && s->vm_running &&
           (s->control & SPYRE_CONTROL_ENABLE) &&
           q->job_state == SPYRE_JOB_NONE &&
           spyre_queue_ready(s, q, 0, &dummy) && w->db_budget) {
        w->bql_ns = spyre_now();
        spyre_run_queue(&w->exec[0], q, -1);
    }
    if (q->job_state != SPYRE_JOB_NONE ||
        (q->status == SPYRE_QS_IDLE && q->head != q->tail)) {
        spyre_wake(s, 1);               /* one idle worker is enough */
    }
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
    qemu_cond_init(&s->gang_cond);
    qemu_cond_init(&s->run_cond);
    qemu_event_init(&s->copy_done, true);
    QLIST_INIT(&s->gangs);
    spyre_reset(s);

    /*
     * GEMM parts run in parallel on the workers, each with a
     * single-threaded BLAS call (process-wide OpenBLAS setting).
     */
    spyre_math_set_blas_threads(1);

    s->vm_running = runstate_is_running();
    s->vmse = qemu_add_vm_change_state_handler(spyre_vm_state_change, s);

    s->stopping = false;
    s->host_cpus = MAX(1, MIN(sysconf(_SC_NPROCESSORS_ONLN),
                              SPYRE_MAX_WORKERS));
    /* The workers, and last the doorbell executor (no thread of its own). */
    s->workers = g_new0(SpyreWorker, s->nworkers + 1);
    for (i = 0; i <= s->nworkers; i++) {
        SpyreWorker *w = &s->workers[i];
        g_autofree char *name = g_strdup_printf("spyre-w%u", i);
        unsigned int l;

        w->s = s;
        w->index = i;
        for (l = 0; l < SPYRE_MAX_NEST; l++) {
            w->exec[l].s = s;
            w->exec[l].w = w;
            w->exec[l].level = l;
        }
        if (i == s->nworkers) {
            w->doorbell = true;
            s->db_worker = w;
            break;
        }
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
     * Workers only touch the device with the BQL held (a GEMM operand
     * copy in progress outside it ends on its own; the worker's reference
     * keeps device memory alive), and check s->stopping each time they
     * take it: from here on they do nothing but leave.  They need the BQL
     * for that, which our caller holds, so they are not joined; each
     * holds a reference to the device, and the last one to leave lets it
     * be finalized.
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
    unsigned int i, l;

    if (s->workers) {
        qemu_cond_destroy(&s->work_cond);
        qemu_cond_destroy(&s->gang_cond);
        qemu_cond_destroy(&s->run_cond);
        qemu_event_destroy(&s->copy_done);
        for (i = 0; i <= s->nworkers; i++) {
            for (l = 0; l < SPYRE_MAX_NEST; l++) {
                g_free(s->workers[i].exec[l].scratch);
                g_free(s->workers[i].exec[l].io.segs);
            }
        }
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
        q->ready_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        q->vector = SPYRE_Q_CONTROL_VECTOR_GET(q->control);
        if (q->vector >= s->nvectors) {
            q->vector = SPYRE_ERROR_VECTOR;     /* i.e. none */
        }
    }
    s->read_latch_addr = UINT64_MAX;
    s->nparked = 0;
    spyre_mmu_changed(s);
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
    DEFINE_PROP_UINT32("age-ms", SpyreState, age_ms, 10),
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
