/*
 * Spyre AI-accelerator PCIe card model: private header
 *
 * The programming interface (BAR layout, registers, job descriptors,
 * completion records, page tables, fault records) is defined once in the
 * project's hw/spyre_hw.h, the command-stream format in
 * uapi/drm/spyre_cmd.h; both are shared with the kernel driver.  The
 * numerics (dtype conversion, GEMM, element-wise, reductions, row
 * operations) live in spyre-math.c, which has no QEMU dependency.
 *
 * This header holds the state structs, the internal SPYRE_EXEC_* results,
 * inline helpers and the functions the files of the model share.  Files
 * (each opens with what it owns and which locks its functions expect):
 *  spyre.c        QOM type, properties, realize/exit/finalize, device
 *                 reset, VMState;
 *  spyre-regs.c   BAR0 MMIO: global registers, queue pages, the 64-bit
 *                 read latch;
 *  spyre-mmu.c    DMA, page walk, TLB, fault records, memory phases and
 *                 tiles (guest memory of a job mapped for compute), the
 *                 drain of tiles in flight;
 *  spyre-sched.c  interrupts, queue readiness, priorities and aging, the
 *                 worker threads and their end, pauses and preemption,
 *                 the doorbell executor, VM run state;
 *  spyre-exec.c   job descriptors (start, end, completion), command-stream
 *                 fetch, the commands other than GEMM;
 *  spyre-gemm.c   GEMM: splitting into parts, parts run by several
 *                 workers, operand I/O;
 *  spyre-kexec.c  KERNEL: decode, the program read at command start, the
 *                 run in chunks of tiles shared with idle workers (guest
 *                 memory through windows mapped in data phases);
 *  spyre-kernel.c the kernel verifier and interpreter (no QEMU dependency,
 *                 no locks, built with -ffp-contract=off);
 *  spyre-copy.c   bulk byte copies (COPY without conversion): batches of
 *                 pages mapped at once into host-memory pieces, copied
 *                 with no lock held by several workers;
 *  spyre-math.c   the numeric core (no QEMU dependency, no locks).
 *
 * Execution model and locks
 * -------------------------
 * Two locks, always taken in this order: the BQL, then the device lock
 * (SpyreState.lock).  A thread that holds the device lock never waits
 * for the BQL.
 *  - The device lock protects the card's state: registers, queues and
 *    their jobs, the scheduler, GEMM gangs and copy batches, the MMU
 *    epoch, the fault FIFO, telemetry, the tile count.  MMIO handlers
 *    (which QEMU runs under the BQL) take it for every access; workers
 *    hold it to pick and account work.  Fields that resets and
 *    invalidations change (SpyreQueue.gen, mmu_epoch, ctx_root, stopping,
 *    vm_running) are written with both locks held, so either lock is
 *    enough to read them.
 *  - Guest memory is reached in *memory phases*: translating through the
 *    device MMU (its page walk is DMA), mapping guest memory for a tile
 *    with dma_memory_map(), small DMA.  A *state phase*
 *    (spyre_e_mem_begin/end: job start and end, semaphores) holds the
 *    device lock throughout.  A *data phase* (spyre_e_data_begin/end:
 *    mapping tiles, copy batches and GEMM operand rows, the command
 *    stream, TIMESTAMP) changes no card state: it is counted like a tile
 *    (ntiles) and, without a vIOMMU, lets the device lock go, so that a
 *    long page walk never holds up MMIO handlers; its byte and write
 *    counts are added under the lock at its end.  Behind a vIOMMU
 *    (dma_bql) every memory phase holds the BQL and the device lock,
 *    since a vIOMMU translates, and may fault, under the BQL.  Without
 *    one, dma_memory_map() needs only RCU, as for QEMU's I/O threads,
 *    and a worker never takes the BQL: the MSI-X messages of the jobs
 *    it ends (msix_notify() needs the BQL) are sent by the bottom half,
 *    which takes them from irq_pending without the device lock.  Only
 *    callers that already hold the BQL (the doorbell executor, a memory
 *    phase behind a vIOMMU) send theirs directly (spyre_irq_flush).  A
 *    page walk reads mmu_epoch and ctx_root atomically: a data phase in
 *    flight when they change is drained before the change is
 *    acknowledged.
 *  - Compute holds no lock.  A command works in tiles: a memory phase
 *    maps the tile's operands (host pointers into device memory, system
 *    memory mapped with dma_memory_map()) and counts the tile in
 *    SpyreState.ntiles; the tile is computed with no lock held, unmapped
 *    (marking what it wrote dirty), and uncounted under the device lock.
 *    GEMM steps compute on private buffers, their operand I/O is tiles.
 *  - Resets, MMU invalidation, CTX_ROOT writes, VM stop and unplug run
 *    under the BQL and wait (spyre_drain_tiles) until no tile is in
 *    flight: no memory phase starts while one drains
 *    (SpyreState.draining), so the wait is bounded by one tile's work per
 *    worker (SPYRE_TILE_BYTES of element-wise work, a GEMM operand batch,
 *    a COPY batch), and when
 *    their MMIO write returns no access uses an old translation or
 *    touches memory of a reset queue.  A worker re-checks its queue's
 *    generation whenever it re-takes a lock and drops a job whose queue
 *    was reset without touching guest memory or queue state again.
 *
 * A doorbell write itself runs the queue's jobs on the writing vCPU (BQL
 * and device lock held) for as long as they hold only short commands,
 * within a budget (spyre_db_run); a job that goes further is left to the
 * workers at that command.
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
 * Lifetime: workers are joinable threads holding a reference to the
 * device.  spyre_exit() stops them (SpyreState.stopping) and drains the
 * tiles in flight, so no guest memory is touched once it returns; it
 * does not join them, since a worker behind a vIOMMU may be waiting for
 * the BQL that unrealize holds.  Each worker, as its last act, hands
 * itself to a main-loop bottom half that joins it and drops its
 * reference there, so the device is never finalized by a worker: it is
 * finalized, BQL held, in that bottom half or, when the last reference
 * is a FlatView's (its BARs), in QEMU's RCU thread after a grace period.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_MISC_SPYRE_SPYRE_H
#define HW_MISC_SPYRE_SPYRE_H

#include "qemu/bitops.h"
#include "qemu/queue.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "exec/memory.h"
#include "hw/pci/pci_device.h"
#include "system/dma.h"
#include "system/runstate.h"
#include "qom/object.h"

#include "spyre_hw.h"
#include "drm/spyre_cmd.h"
#include "spyre-math.h"
#include "spyre-kernel.h"

#define TYPE_SPYRE "spyre"
OBJECT_DECLARE_SIMPLE_TYPE(SpyreState, SPYRE)

#define SPYRE_VA_LIMIT          (1ULL << SPYRE_VA_BITS)
#define SPYRE_PAGE_MASK         (SPYRE_PAGE_SIZE - 1)
#define SPYRE_RING_ENTRY_SIZE   64
#define SPYRE_COMPL_ALIGN       64

/* Longest a worker keeps the device lock before letting others have it. */
#define SPYRE_LOCK_SLICE_NS     (50 * SCALE_US)
/*
 * Bytes of one operand of an element-wise, conversion, fill, reduction
 * or row tile: mapped in one memory phase, computed with no lock held.
 * The work of one tile bounds how long a reset or VM stop waits.
 */
#define SPYRE_TILE_BYTES        (64 * KiB)
/* Host-memory pieces of one operand of a tile (pages, plus a split). */
#define SPYRE_TILE_MAPS         (2 * (SPYRE_TILE_BYTES / SPYRE_PAGE_SIZE) + 2)
/* Operands of one tile. */
#define SPYRE_TILE_OPNDS        4
/* Host-time interval at which blocked SEM_WAIT queues are re-polled. */
#define SPYRE_SEM_POLL_MS       1
/*
 * Jobs one worker can hold at once: the one it picked, one that preempted
 * it by aging, and then one per higher priority (see spyre_e_preempt).
 */
#define SPYRE_MAX_NEST          4
/* SpyreGang.err_part while no part failed. */
#define SPYRE_NO_PART           UINT32_MAX

/*
 * Commands the doorbell executor may run per doorbell write: each is
 * short (NOP, TIMESTAMP, SEM_*), so this bounds the time the writing vCPU
 * spends, and a count (not a clock) keeps the split reproducible.
 */
#define SPYRE_DB_BUDGET_CMDS    64

/* Per-worker translation caches (entries, powers of two). */
#define SPYRE_TLB_SIZE          1024    /* 4 KiB pages */
#define SPYRE_PWC_SIZE          64      /* leaf tables (2 MiB of VA each) */
#define SPYRE_PWC_SHIFT         (SPYRE_PAGE_SHIFT + 9)
#define SPYRE_LEAF_CACHE        4       /* leaf tables' contents */

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
    SPYRE_TEL_ACTIVE_NS,        /* closed intervals only: see njobs */
    SPYRE_TEL_COUNT,
};

/* Where a queue's current job is. */
enum {
    SPYRE_JOB_NONE,         /* no job: next one is fetched at HEAD */
    SPYRE_JOB_RUNNING,      /* owned by a worker */
    SPYRE_JOB_SEM_WAIT,     /* parked on a SEM_WAIT, resumable */
    SPYRE_JOB_READY,        /* begun at the doorbell, for a worker to go on */
    SPYRE_JOB_HUNG,         /* parked forever (DBG_HANG, DBG_FATAL) */
};

typedef struct SpyreJob {
    uint64_t seqno;
    uint64_t cmd_va;
    uint32_t cmd_size;
    uint16_t ctx;
    uint16_t flags;
    uint32_t cmd_offset;        /* next command to run */
    uint64_t start_ns;          /* device clock at job start */
    uint64_t end_ns;            /* ... at its end (its record), or 0 */
    uint64_t writes;            /* memory writes: semaphores may change */
    bool restartable;           /* its command may run again from its start */
    uint64_t detail;            /* the completion record's, if it failed */
    uint64_t detail2;
} SpyreJob;

typedef struct SpyreQueue {
    /* Guest-visible registers (migrated). */
    uint64_t ring_base;
    uint64_t compl_addr;
    uint64_t last_seqno;
    uint64_t busy_ns;           /* BUSY_NS: sum of job run times */
    uint32_t entries;
    uint32_t control;
    uint32_t head;
    uint32_t tail;
    uint32_t status;
    uint32_t inject;            /* SPYRE_DBG_* armed (never FATAL), or 0 */
    uint32_t inject_count;      /* applications of it left (0 if none) */

    /* Execution state (a parked job is migrated: spyre_pre_save). */
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
typedef struct SpyreKernel SpyreKernel;

/*
 * A GEMM split into parts: tiles of (batch, M, N) that workers run in
 * parallel, each as a GEMM of its own.  Lives in its owner's SpyreExec;
 * registered in SpyreState.gangs while other workers may help.  All
 * fields are protected by the device lock.
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

/*
 * A piece of guest memory mapped for a tile: @len bytes at @host, in
 * device memory (at offset @dev_off, marked dirty when written) or, with
 * @sys, in system memory mapped with dma_memory_map() (unmapped, and
 * marked dirty when written, by spyre_map_release()).
 */
typedef struct SpyreMap {
    uint8_t *host;
    uint64_t len;
    uint64_t dev_off;
    bool sys;
} SpyreMap;

/* One operand of a tile: [va, va + len) as pieces of host memory. */
typedef struct SpyreSpan {
    SpyreMap map[SPYRE_TILE_MAPS];
    uint32_t nmaps;
    uint64_t len;
    bool write;
} SpyreSpan;

/* An operand range a tile maps (spyre_e_map_tile). */
typedef struct SpyreOpnd {
    uint64_t va;
    uint64_t len;
    bool write;
} SpyreOpnd;

/* A translated device VA: where its bytes are. */
typedef struct SpyreTarget {
    bool devmem;
    uint64_t addr;      /* DMA address, or offset into device memory */
} SpyreTarget;

/*
 * A piece of a byte copy (spyre-copy.c): @len bytes from target @ts to
 * @td.  Behind a vIOMMU the batch's memory phase maps it (@mapped: @src
 * and @dst, released by whoever copies it); else whoever copies it maps
 * it, and sets @copied to the bytes it copied before a mapping failed.
 */
typedef struct SpyreCopyPiece {
    SpyreTarget ts;
    SpyreTarget td;
    uint64_t len;
    uint64_t copied;
    bool mapped;
    SpyreMap dst;
    SpyreMap src;
} SpyreCopyPiece;

/*
 * A batch of copy pieces that idle workers may help with, registered in
 * SpyreState.copies (device lock) while @next < @npieces.  Pieces are
 * claimed with an atomic increment of @next, with no lock held; @active
 * (device lock) counts the workers that joined, the owner included.
 */
typedef struct SpyreCopySplit {
    QLIST_ENTRY(SpyreCopySplit) link;
    SpyreCopyPiece *pieces;
    uint32_t npieces;
    uint32_t next;
    uint32_t active;
    uint32_t max_active;
    uint32_t prio;
} SpyreCopySplit;

/* Operand base VAs of the GEMM part an exec runs. */
typedef struct SpyrePartIO {
    SpyreExec *e;
    uint64_t base[SPYRE_GEMM_OPND_BIAS + 1];
    SpyreMap *segs;             /* spyre_part_rows() pieces */
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

/* A leaf table's contents (least recently used one replaced). */
typedef struct SpyreLeaf {
    uint64_t epoch;             /* 0: invalid */
    uint64_t table;             /* its DMA address */
    uint64_t used;              /* SpyreWorker.leaf_clock when last used */
    uint64_t ptes[SPYRE_PAGE_SIZE / 8];
} SpyreLeaf;

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
 * The buffers are the only temporary storage the engine uses: small
 * accesses go through @buf, a tile's operands that are not one piece of
 * host memory through @tbuf (SPYRE_TILE_BYTES each), GEMM tiles through
 * @tile_buf (SPYRE_GEMM_TILE_BUF_SIZE); the big ones are allocated on
 * first use.
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
    /* Counted in memory phases, added under the device lock (fold). */
    uint64_t io_bytes;          /* to TEL_BYTES */
    uint64_t io_writes;         /* to the job's writes */
    SpyreGang *part_gang;       /* gang whose part we run, or NULL */
    uint32_t part_idx;
    SpyreGang gang;             /* the GEMM we own */
    SpyreCopySplit split;       /* the copy batch we own */
    SpyreCopyPiece *pieces;     /* its pieces (grown on demand) */
    uint32_t npieces_max;
    SpyreSpan span[SPYRE_TILE_OPNDS];   /* the tile being computed */
    uint8_t *tbuf[SPYRE_TILE_OPNDS];
    SpyreGemm gemm;
    SpyrePartIO io;
    void *tile_buf;
    SpyreKernel *kernel;        /* KERNEL's state, allocated on first use */
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
        uint8_t raw[SPYRE_KCMD_MAX];
    } cmd;
    uint8_t buf[SPYRE_PAGE_SIZE];
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
    /*
     * The last KERNEL's program bytes may serve the next one
     * (spyre-kexec.c): cleared when a job starts or resumes here and by
     * every command but KERNEL and NOP.
     */
    bool kprog_kept;
};

struct SpyreWorker {
    SpyreState *s;
    QemuThread thread;
    unsigned int index;
    bool doorbell;              /* the doorbell executor: see spyre_db_run */
    uint32_t db_budget;         /* doorbell executor: commands left */
    int64_t lock_ns;            /* when it last took the device lock */
    uint64_t sched_seen;        /* sched_seq at its last preemption scan */
    int64_t scan_ns;            /* and when that was */
    QemuCond wake;              /* it waits here while idle */
    SpyreTlbEntry tlb[SPYRE_TLB_SIZE];
    SpyrePwcEntry pwc[SPYRE_PWC_SIZE];
    /*
     * Leaf tables as read (spyre_e_translate_run), valid like the TLB: a
     * copy reads one for its source and one for its destination.
     */
    SpyreLeaf leaf[SPYRE_LEAF_CACHE];
    uint64_t leaf_clock;
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
    uint32_t scratch;           /* the SCRATCH register */
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
    bool fatal;                 /* STATUS.FATAL: no job starts (DBG_FATAL) */

    SpyreQueue *queues;

    /* Engine. */
    QemuMutex lock;             /* the device lock: see the top */
    bool dma_bql;               /* DMA goes through a vIOMMU: see the top */
    bool draining;              /* spyre_drain_tiles() waits: no new tile */
    SpyreWorker *workers;       /* nworkers threads, then db_worker */
    SpyreWorker *db_worker;     /* the doorbell executor (spyre_db_run) */
    uint32_t ntiles;            /* tiles mapped and not yet released */
    QemuCond tiles_cond;        /* broadcast when ntiles drops to 0 */
    QemuCond gang_cond;         /* GEMM owners wait for their helpers */
    QemuCond run_cond;          /* workers wait here while the VM is stopped */
    /*
     * Idle workers, each waiting on its own SpyreWorker.wake, the one
     * idle the shortest last: spyre_wake() wakes from the top, so that
     * the worker whose TLB, leaf and program caches are warmest runs
     * the next job (a condition variable wakes its oldest waiter).
     */
    SpyreWorker **idle;
    uint32_t idle_workers;
    /* Taken off the stack by spyre_wake(), not yet running: idle too. */
    uint32_t waking;
    uint32_t nparked;           /* queues in SPYRE_JOB_SEM_WAIT */
    uint32_t njobs;             /* queues with a job (!SPYRE_JOB_NONE) */
    uint64_t active_start;      /* device clock when njobs left 0 */
    bool sem_poller;            /* an idle worker polls parked queues */
    bool stopping;
    bool vm_running;
    uint32_t rr_next;           /* round-robin start of the queue scan */
    uint64_t sem_epoch;         /* bumped when memory may have changed */
    uint64_t sched_seq;         /* bumped when new work may be ready */
    uint64_t mmu_epoch;         /* bumped when cached translations die */
    QLIST_HEAD(, SpyreGang) gangs;
    QLIST_HEAD(, SpyreCopySplit) copies;
    QLIST_HEAD(, SpyreKernel) kernels;  /* KERNELs idle workers may help */
    VMChangeStateEntry *vmse;

    /*
     * MSI-X vectors to raise from the bottom half: set with atomic ORs
     * under the device lock, taken with an atomic exchange by whoever
     * sends them (BQL held, device lock not needed).
     */
    QEMUBH *irq_bh;
    uint64_t irq_pending;       /* bit v: vector v (flushed at VM stop) */
    uint64_t irq_now;           /* for the caller's spyre_irq_flush() */
    int64_t irq_direct_ns[SPYRE_MAX_VECTORS];   /* last direct message */
    /* Completion vectors to raise once more (DBG_DUP_IRQ), from a timer. */
    QEMUTimer *dup_timer;
    uint64_t dup_pending;       /* bit v: vector v (migrated), as above */
};

/* In a memory phase (see the top): the BQL too behind a vIOMMU. */
#define SPYRE_ASSERT_PHASE(s)   assert(!(s)->dma_bql || bql_locked())

/*
 * The device lock.  Macros, so that QEMU's lock profiler
 * (-enable-sync-profile) tells the call sites apart.
 */
#define spyre_lock(s)           qemu_mutex_lock(&(s)->lock)
#define spyre_unlock(s)         qemu_mutex_unlock(&(s)->lock)

static inline int64_t spyre_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
}

/* CPU time of the calling thread (for trace-events), 0 if unknown. */
static inline int64_t spyre_thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) {
        return 0;
    }
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline float spyre_f32(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

static inline uint32_t spyre_f32_bits(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

/* Do [a, a + alen) and [b, b + blen) (neither wrapping) share a byte? */
static inline bool spyre_spans_meet(uint64_t a, uint64_t alen, uint64_t b,
                                    uint64_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

/* Does [base, base + span) run past the end of the 64-bit space? */
static inline bool spyre_span_wraps(uint64_t base, uint64_t span)
{
    return span && base + (span - 1) < base;
}

static inline uint64_t spyre_clock(SpyreState *s)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) - s->clock_base;
}

/* spyre.c */
void spyre_reset(SpyreState *s);

/* spyre-regs.c */
extern const MemoryRegionOps spyre_mmio_ops;
bool spyre_queue_config_valid(SpyreState *s, SpyreQueue *q, uint32_t control);
bool spyre_dbg_inject_valid(SpyreState *s, unsigned int qid,
                            unsigned int kind);
void spyre_dbg_inject(SpyreState *s, uint32_t val);

/* spyre-mmu.c */
bool spyre_map_sys(SpyreState *s, dma_addr_t addr, uint64_t *len, bool write,
                   SpyreMap *m);
bool spyre_map_target(SpyreState *s, const SpyreTarget *t, uint64_t *len,
                      bool write, SpyreMap *m);
void spyre_map_release(SpyreState *s, const SpyreMap *m, bool write);
MemTxResult spyre_dma_rw(SpyreState *s, dma_addr_t addr, void *buf,
                         dma_addr_t len, DMADirection dir);
void spyre_record_fault(SpyreState *s, unsigned int ctx, unsigned int queue,
                        uint64_t va, bool write, unsigned int reason,
                        bool direct);
uint32_t spyre_e_mem_begin(SpyreExec *e);
void spyre_e_mem_end(SpyreExec *e);
void spyre_e_fold(SpyreExec *e);
uint32_t spyre_e_data_begin(SpyreExec *e);
void spyre_e_data_unlock(SpyreExec *e);
void spyre_e_data_end(SpyreExec *e);
uint32_t spyre_e_translate(SpyreExec *e, uint64_t va, bool write,
                           SpyreTarget *t);
uint32_t spyre_e_translate_run(SpyreExec *e, uint64_t va, uint64_t len,
                               bool write, SpyreTarget *t, uint64_t *run);
uint32_t spyre_e_access(SpyreExec *e, const SpyreTarget *t, uint64_t va,
                        void *buf, uint32_t len, bool write);
uint32_t spyre_e_rw_phase(SpyreExec *e, uint64_t va, void *buf, uint64_t len,
                          bool write);
uint32_t spyre_e_rw(SpyreExec *e, uint64_t va, void *buf, uint64_t len,
                    bool write);
uint32_t spyre_e_map_span(SpyreExec *e, SpyreSpan *sp, uint64_t va,
                          uint64_t len, bool write);
void spyre_span_release(SpyreState *s, SpyreSpan *sp);
uint32_t spyre_e_map_tile(SpyreExec *e, const SpyreOpnd *o, unsigned int n);
void spyre_e_end_tile(SpyreExec *e, unsigned int n);
const void *spyre_tile_src(SpyreExec *e, unsigned int i);
void *spyre_tile_dst(SpyreExec *e, unsigned int i);
void spyre_tile_dst_done(SpyreExec *e, unsigned int i, void *p);
void spyre_tile_put(SpyreState *s);
void spyre_drain_tiles(SpyreState *s);
void spyre_mmu_changed(SpyreState *s);

/* spyre-sched.c */
void spyre_irq_bh(void *opaque);
void spyre_irq_flush(SpyreState *s);
void spyre_notify(SpyreState *s, unsigned int v, bool direct);
void spyre_notify_again(SpyreState *s, unsigned int v);
void spyre_dup_irq_timer(void *opaque);
void spyre_raise_error(SpyreState *s, uint32_t bits, bool direct);
void spyre_kick(SpyreState *s);
void spyre_wake(SpyreState *s, uint32_t n);
void spyre_set_job_state(SpyreState *s, SpyreQueue *q, uint32_t st);
uint32_t spyre_queue_rest_status(SpyreQueue *q);
bool spyre_e_alive(SpyreExec *e);
void spyre_e_wait_running(SpyreExec *e);
void spyre_e_preempt(SpyreExec *e);
uint32_t spyre_e_boundary(SpyreExec *e, bool in_cmd);
void spyre_db_run(SpyreState *s, SpyreQueue *q);
void *spyre_worker_thread(void *opaque);
void spyre_vm_state_change(void *opaque, bool running, RunState state);

/* spyre-exec.c */
void spyre_end_job(SpyreState *s, SpyreQueue *q, uint32_t status,
                   uint64_t err_va, bool halt, bool direct);
void spyre_run_queue(SpyreExec *e, SpyreQueue *q, int floor);

/* spyre-copy.c */
SpyreCopySplit *spyre_pick_copy(SpyreState *s, int floor);
void spyre_copy_help(SpyreState *s, SpyreCopySplit *c);
uint32_t spyre_copy_bytes(SpyreExec *e, uint64_t dst, uint64_t src,
                          uint64_t len);

/* spyre-kexec.c */
uint32_t spyre_cmd_kernel(SpyreExec *e);
SpyreKernel *spyre_pick_kernel(SpyreState *s, int floor, int eff);
void spyre_kernel_help(SpyreExec *e, SpyreKernel *k, int floor);
void spyre_kernel_exec_free(SpyreExec *e);

/* spyre-gemm.c */
bool spyre_gang_open(const SpyreGang *g);
void spyre_gang_help(SpyreExec *e, SpyreGang *g, int floor);
uint32_t spyre_cmd_gemm(SpyreExec *e);

#endif
