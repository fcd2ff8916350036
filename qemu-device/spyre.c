/*
 * Spyre AI-accelerator PCIe card model
 *
 * The device: QOM type and properties, realize (BARs, MSI-X, the worker
 * threads), exit and finalize, device reset, migration (VMState: parked
 * jobs migrate and resume, pre_save refuses a job mid-command, post_load
 * validates everything).  The execution model and the map of the other
 * files are in spyre.h.
 *
 * Locks: everything here runs with the BQL held (qdev and QOM callbacks,
 * migration, finalize in the main loop or the RCU thread) and takes the
 * device lock for the card's state.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/error-report.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "exec/address-spaces.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/pcie.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/vmstate.h"
#include "system/runstate.h"
#include "trace.h"

#include "spyre.h"
#include "drm/spyre_accel.h"

QEMU_BUILD_BUG_ON(sizeof(struct spyre_hw_job) != 64);
QEMU_BUILD_BUG_ON(sizeof(struct spyre_hw_completion) != 64);
QEMU_BUILD_BUG_ON(sizeof(struct spyre_cmd_header) != 8);
QEMU_BUILD_BUG_ON(SPYRE_QUEUE_BASE + SPYRE_MAX_QUEUES * SPYRE_QUEUE_STRIDE >
                  SPYRE_BAR0_SIZE);
QEMU_BUILD_BUG_ON(SPYRE_REG_CTX_ROOT(SPYRE_MAX_CONTEXTS) > SPYRE_REG_TEL_JOBS);

/* Largest "workers" property (host threads; also caps host_cpus). */
#define SPYRE_MAX_WORKERS       64

/* ---- Reset -------------------------------------------------------------- */

/*
 * BQL and device lock held.  Device reset: drop all work, return every
 * register to its reset value.
 */
void spyre_reset(SpyreState *s)
{
    uint32_t i;

    assert(bql_locked());
    trace_spyre_reset();
    /* Nothing in flight reads what follows (page walks read ctx_root). */
    spyre_drain_tiles(s);
    for (i = 0; i < s->nqueues; i++) {
        SpyreQueue *q = &s->queues[i];
        uint32_t gen = q->gen + 1;

        memset(q, 0, sizeof(*q));
        q->id = i;
        q->gen = gen;
        q->status = SPYRE_QS_DISABLED;
    }
    s->nparked = 0;
    s->njobs = 0;
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
    s->fatal = false;
    spyre_mmu_changed(s);
    qatomic_set(&s->irq_pending, 0);
    s->irq_now = 0;
    qatomic_set(&s->dup_pending, 0);
    timer_del(s->dup_timer);
    spyre_kick(s);
}

/* ---- Device ------------------------------------------------------------- */

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
    /* AER, so that the guest's recovery (and aer_inject) can reach us. */
    if (pcie_aer_init(pdev, PCI_ERR_VER, 0x100, PCI_ERR_SIZEOF, errp) < 0) {
        goto err_pcie;
    }

    memory_region_init_io(&s->mmio, OBJECT(s), &spyre_mmio_ops, s,
                          "spyre-regs", SPYRE_BAR0_SIZE);
    pci_register_bar(pdev, SPYRE_BAR_REGS, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->mmio);

    if (!memory_region_init_ram(&s->devmem, OBJECT(s), "spyre-devmem",
                                s->mem_size, errp)) {
        goto err_aer;
    }
    s->devmem_ptr = memory_region_get_ram_ptr(&s->devmem);
    pci_register_bar(pdev, SPYRE_BAR_DEVMEM,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->devmem);

    if (msix_init_exclusive_bar(pdev, s->nvectors, SPYRE_BAR_MSIX, errp)) {
        goto err_aer;
    }
    for (i = 0; i < s->nvectors; i++) {
        msix_vector_use(pdev, i);
    }

    s->queues = g_new0(SpyreQueue, s->nqueues);
    s->irq_bh = qemu_bh_new_guarded(spyre_irq_bh, s,
                                    &DEVICE(pdev)->mem_reentrancy_guard);
    s->dup_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, spyre_dup_irq_timer, s);
    qemu_mutex_init(&s->lock);
    qemu_cond_init(&s->tiles_cond);
    qemu_cond_init(&s->gang_cond);
    qemu_cond_init(&s->run_cond);
    QLIST_INIT(&s->gangs);
    QLIST_INIT(&s->copies);
    QLIST_INIT(&s->kernels);
    spyre_lock(s);
    spyre_reset(s);
    spyre_unlock(s);

    /*
     * GEMM parts run in parallel on the workers, each with a
     * single-threaded BLAS call (process-wide OpenBLAS setting).
     */
    spyre_math_set_blas_threads(1);

    s->dma_bql = pci_device_iommu_address_space(pdev) !=
                 &address_space_memory;
    s->vm_running = runstate_is_running();
    s->vmse = qemu_add_vm_change_state_handler(spyre_vm_state_change, s);

    s->stopping = false;
    s->host_cpus = MAX(1, MIN(sysconf(_SC_NPROCESSORS_ONLN),
                              SPYRE_MAX_WORKERS));
    /*
     * The workers, and last the doorbell executor (no thread of its own).
     * Each worker holds a reference to the device until it is joined
     * (see the lifetime rule in spyre.h).
     */
    s->workers = g_new0(SpyreWorker, s->nworkers + 1);
    s->idle = g_new0(SpyreWorker *, s->nworkers);
    for (i = 0; i <= s->nworkers; i++) {
        SpyreWorker *w = &s->workers[i];
        g_autofree char *name = g_strdup_printf("spyre-w%u", i);
        unsigned int l;

        w->s = s;
        w->index = i;
        qemu_cond_init(&w->wake);
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
                           QEMU_THREAD_JOINABLE);
    }
    return;

err_aer:
    pcie_aer_exit(pdev);
err_pcie:
    pcie_cap_exit(pdev);
}

static void spyre_exit(PCIDevice *pdev)
{
    SpyreState *s = SPYRE(pdev);

    assert(bql_locked());
    trace_spyre_life_exit();

    /*
     * From here on no worker touches guest memory: each checks
     * s->stopping whenever it takes a lock (and stops), and the tiles
     * in flight end before this returns.  A worker may be waiting for
     * the BQL, which our caller holds, so the workers are joined later,
     * from the main loop (spyre_worker_reap).
     */
    spyre_lock(s);
    s->stopping = true;
    spyre_kick(s);
    spyre_drain_tiles(s);
    spyre_unlock(s);

    qemu_del_vm_change_state_handler(s->vmse);
    qemu_bh_delete(s->irq_bh);
    timer_free(s->dup_timer);
    s->dup_timer = NULL;
    msix_unuse_all_vectors(pdev);
    msix_uninit_exclusive_bar(pdev);
    pcie_aer_exit(pdev);
    pcie_cap_exit(pdev);
}

/*
 * BQL held, in the main loop or the RCU thread (a FlatView's reference
 * can be the last): every reference is gone, every worker joined.
 */
static void spyre_instance_finalize(Object *obj)
{
    SpyreState *s = SPYRE(obj);
    unsigned int i, l, k;

    trace_spyre_life_finalize();
    if (s->workers) {
        qemu_cond_destroy(&s->gang_cond);
        qemu_cond_destroy(&s->run_cond);
        qemu_cond_destroy(&s->tiles_cond);
        qemu_mutex_destroy(&s->lock);
        for (i = 0; i <= s->nworkers; i++) {
            qemu_cond_destroy(&s->workers[i].wake);
            for (l = 0; l < SPYRE_MAX_NEST; l++) {
                SpyreExec *e = &s->workers[i].exec[l];

                g_free(e->tile_buf);
                spyre_kernel_exec_free(e);
                g_free(e->pieces);
                g_free(e->io.segs);
                for (k = 0; k < SPYRE_TILE_OPNDS; k++) {
                    g_free(e->tbuf[k]);
                }
            }
        }
    }
    g_free(s->workers);
    g_free(s->idle);
    g_free(s->queues);
}

static void spyre_qdev_reset(DeviceState *dev)
{
    SpyreState *s = SPYRE(dev);

    spyre_lock(s);
    spyre_reset(s);
    spyre_unlock(s);
}

/* ---- Migration ---------------------------------------------------------- */

/*
 * The VM is stopped: the tiles in flight have ended and the workers wait
 * at their next memory phase or boundary.  A job parked in SEM_WAIT,
 * READY or HUNG is migrated with its queue and resumes after load.  A job
 * a worker holds in the middle of a command is parked READY at that
 * command, which runs again from its start, when the command is
 * restartable (it reads nothing it writes: SpyreJob.restartable); its
 * worker lets it go (a new generation), and should the migration fail,
 * the command runs again here.  Migration is refused (the VM goes on) only
 * for a command that reads what it writes, such as a GEMM with beta or
 * an in-place element-wise operation.
 */
static int spyre_pre_save(void *opaque)
{
    SpyreState *s = opaque;
    int ret = 0;
    uint32_t i;

    spyre_lock(s);
    for (i = 0; i < s->nqueues && !ret; i++) {
        SpyreQueue *q = &s->queues[i];

        if (q->job_state != SPYRE_JOB_RUNNING) {
            continue;
        }
        if (!q->job.restartable) {
            error_report("spyre: cannot migrate while queue %u is in the "
                         "middle of a command that reads what it writes "
                         "(offset %u of its job)", i, q->job.cmd_offset);
            ret = -EBUSY;
            break;
        }
        trace_spyre_job_park(q->id, q->job.seqno, q->job.cmd_offset);
        q->gen++;
        spyre_set_job_state(s, q, SPYRE_JOB_READY);
        q->ready_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    }
    spyre_kick(s);
    spyre_unlock(s);
    return ret;
}

/* The job of a queue before a load, if the stream brings none. */
static int spyre_queue_pre_load(void *opaque)
{
    SpyreQueue *q = opaque;

    q->job_state = SPYRE_JOB_NONE;
    memset(&q->job, 0, sizeof(q->job));
    return 0;
}

/* Is @q's loaded state (registers and parked job) consistent? */
static bool spyre_queue_loaded_valid(SpyreState *s, SpyreQueue *q)
{
    const SpyreJob *job = &q->job;

    if (q->control & ~SPYRE_Q_CONTROL_MASK) {
        return false;
    }
    /* Armed: a valid kind but FATAL (never armed), 1..256 times. */
    if (q->inject ? !spyre_dbg_inject_valid(s, q->id, q->inject) ||
                    q->inject == SPYRE_DBG_FATAL ||
                    q->inject_count < 1 ||
                    q->inject_count > SPYRE_DBG_INJECT_COUNT(~0U) :
                    q->inject_count) {
        return false;
    }
    switch (q->job_state) {
    case SPYRE_JOB_NONE:
        if (q->status == SPYRE_QS_DISABLED) {
            return !(q->control & SPYRE_Q_CONTROL_ENABLE);
        }
        if (q->status != SPYRE_QS_IDLE && q->status != SPYRE_QS_ERROR) {
            return false;       /* BUSY and SEM_WAIT come with a job */
        }
        break;
    case SPYRE_JOB_SEM_WAIT:
    case SPYRE_JOB_READY:
        if (q->status != (q->job_state == SPYRE_JOB_SEM_WAIT ?
                          SPYRE_QS_SEM_WAIT : SPYRE_QS_BUSY) ||
            job->ctx >= s->ncontexts || job->cmd_va % 8 ||
            job->cmd_va >= SPYRE_VA_LIMIT || job->cmd_size % 8 ||
            job->cmd_size < sizeof(struct spyre_cmd_header) ||
            job->cmd_size > SPYRE_MAX_CMD_STREAM ||
            job->cmd_size > SPYRE_VA_LIMIT - job->cmd_va ||
            job->cmd_offset % 8 || job->cmd_offset >= job->cmd_size ||
            job->flags & ~SPYRE_JOB_F_ALL) {
            return false;
        }
        break;
    case SPYRE_JOB_HUNG:
        /* Never run again (until a reset): only its seqno is reported. */
        if (q->status != SPYRE_QS_BUSY) {
            return false;
        }
        break;
    default:
        return false;           /* RUNNING is never saved */
    }
    if (!spyre_queue_config_valid(s, q, q->control) ||
        q->head >= q->entries || q->tail >= q->entries) {
        return false;
    }
    return true;
}

static int spyre_post_load(void *opaque, int version_id)
{
    SpyreState *s = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    int ret = 0;
    uint32_t i;

    spyre_lock(s);
    if (s->fault_count > SPYRE_FAULT_FIFO_DEPTH ||
        s->fault_head >= SPYRE_FAULT_FIFO_DEPTH ||
        s->irq_status & ~SPYRE_IRQ_ALL || s->irq_mask & ~SPYRE_IRQ_ALL ||
        s->control & ~SPYRE_CONTROL_ENABLE ||
        s->dup_pending & ~MAKE_64BIT_MASK(0, s->nvectors)) {
        ret = -EINVAL;
    }
    for (i = s->ncontexts; i < SPYRE_MAX_CONTEXTS; i++) {
        if (s->ctx_root[i]) {
            ret = -EINVAL;
        }
    }
    s->nparked = 0;
    s->njobs = 0;
    for (i = 0; i < s->nqueues && !ret; i++) {
        SpyreQueue *q = &s->queues[i];
        uint32_t st = q->job_state;

        q->id = i;
        if (!spyre_queue_loaded_valid(s, q)) {
            ret = -EINVAL;
            break;
        }
        q->gen++;
        q->job_state = SPYRE_JOB_NONE;
        spyre_set_job_state(s, q, st);
        q->job.writes = 0;
        q->job.end_ns = 0;
        q->ready_ns = now;
        q->sem_poll_ns = 0;     /* a parked SEM_WAIT looks again at once */
        q->vector = SPYRE_Q_CONTROL_VECTOR_GET(q->control);
        if (q->vector >= s->nvectors) {
            q->vector = SPYRE_ERROR_VECTOR;     /* i.e. none */
        }
    }
    if (!ret) {
        s->read_latch_addr = UINT64_MAX;
        spyre_mmu_changed(s);
        if (s->dup_pending) {
            timer_mod(s->dup_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL));
        }
        spyre_kick(s);
    }
    spyre_unlock(s);
    return ret;
}

static bool spyre_queue_job_needed(void *opaque)
{
    SpyreQueue *q = opaque;

    return q->job_state != SPYRE_JOB_NONE;
}

/* A parked job (SEM_WAIT, READY or HUNG): where it resumes. */
static const VMStateDescription vmstate_spyre_queue_job = {
    .name = "spyre-queue/job",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = spyre_queue_job_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(job_state, SpyreQueue),
        VMSTATE_UINT64(job.seqno, SpyreQueue),
        VMSTATE_UINT64(job.cmd_va, SpyreQueue),
        VMSTATE_UINT32(job.cmd_size, SpyreQueue),
        VMSTATE_UINT16(job.ctx, SpyreQueue),
        VMSTATE_UINT16(job.flags, SpyreQueue),
        VMSTATE_UINT32(job.cmd_offset, SpyreQueue),
        VMSTATE_UINT64(job.start_ns, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_spyre_queue = {
    .name = "spyre-queue",
    .version_id = 3,
    .minimum_version_id = 3,
    .pre_load = spyre_queue_pre_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(ring_base, SpyreQueue),
        VMSTATE_UINT64(compl_addr, SpyreQueue),
        VMSTATE_UINT64(last_seqno, SpyreQueue),
        VMSTATE_UINT64(busy_ns, SpyreQueue),
        VMSTATE_UINT32(entries, SpyreQueue),
        VMSTATE_UINT32(control, SpyreQueue),
        VMSTATE_UINT32(head, SpyreQueue),
        VMSTATE_UINT32(tail, SpyreQueue),
        VMSTATE_UINT32(status, SpyreQueue),
        VMSTATE_UINT32(inject, SpyreQueue),
        VMSTATE_UINT32(inject_count, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_spyre_queue_job,
        NULL
    },
};

static const VMStateDescription vmstate_spyre = {
    .name = "spyre",
    .version_id = 4,            /* 4: TEL_ACTIVE_NS */
    .minimum_version_id = 4,
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
        VMSTATE_BOOL(fatal, SpyreState),
        VMSTATE_UINT64(dup_pending, SpyreState),
        VMSTATE_STRUCT_VARRAY_POINTER_UINT32(queues, SpyreState, nqueues,
                                             vmstate_spyre_queue, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
};

/* ---- QOM type ----------------------------------------------------------- */

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
    if (!spyre_dbg_inject_valid(s, SPYRE_DBG_INJECT_QUEUE(value),
                                SPYRE_DBG_INJECT_KIND(value))) {
        error_setg(errp, "spyre: dbg-inject: bad queue or kind");
        return;
    }
    spyre_lock(s);
    spyre_dbg_inject(s, value);
    spyre_unlock(s);
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
