/*
 * QTest for the Spyre AI-accelerator card model
 *
 * Drives the card as a driver would, without a guest kernel: registers,
 * page tables built in guest memory, job rings, completion records,
 * MSI-X, MMU faults, bounds checks and resets.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <math.h>
#include "qemu/bswap.h"
#include "libqtest.h"
#include "libqos/pci.h"
#include "libqos/pci-pc.h"
#include "hw/pci/pci_regs.h"
#include "qobject/qdict.h"

#include "spyre_hw.h"
#include "drm/spyre_accel.h"
#include "spyre/spyre_encode.h"

#define SPYRE_DEVFN         QPCI_DEVFN(4, 0)
#define RP_DEVFN            QPCI_DEVFN(3, 0)
#define DEV_BEHIND_RP       (1 << 8 | QPCI_DEVFN(0, 0))     /* bus 1 */
#define MEM_SIZE            (16 * 1024 * 1024)
#define NVECTORS            5
#define PAGE                SPYRE_PAGE_SIZE
#define GUEST_POOL          0x01000000ULL     /* page pool for tests */
#define MSI_ADDR            0x00f00000ULL     /* MSI-X writes land here */
/* How long a wait may take: SPYRE_QTEST_SLOW times more (sanitizers). */
#define WAIT_US             (5 * G_USEC_PER_SEC * slow)

static int slow = 1;

typedef struct Spyre {
    QTestState *qts;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIDevice *rp;
    QPCIBar bar0;
    QPCIBar bar2;
    uint64_t next_page;
} Spyre;

typedef struct TestQueue {
    unsigned int id;
    uint32_t entries;
    uint32_t tail;
    uint64_t ring;
    uint64_t compl;
} TestQueue;

typedef struct Stream {
    uint8_t buf[4096];
    uint32_t len;
} Stream;

/* ---- plumbing ------------------------------------------------------- */

static uint32_t rd32(Spyre *sp, uint64_t reg)
{
    return qpci_io_readl(sp->dev, sp->bar0, reg);
}

static void wr32(Spyre *sp, uint64_t reg, uint32_t val)
{
    qpci_io_writel(sp->dev, sp->bar0, reg, val);
}

static uint64_t rd64(Spyre *sp, uint64_t reg)
{
    return qpci_io_readq(sp->dev, sp->bar0, reg);
}

static void wr64(Spyre *sp, uint64_t reg, uint64_t val)
{
    qpci_io_writeq(sp->dev, sp->bar0, reg, val);
}

static uint32_t qrd32(Spyre *sp, unsigned int q, unsigned int r)
{
    return rd32(sp, SPYRE_QUEUE_REG(q, r));
}

static void qwr32(Spyre *sp, unsigned int q, unsigned int r, uint32_t v)
{
    wr32(sp, SPYRE_QUEUE_REG(q, r), v);
}

static void spyre_map_bars(Spyre *sp)
{
    qpci_device_enable(sp->dev);
    sp->bar0 = qpci_iomap(sp->dev, SPYRE_BAR_REGS, NULL);
    sp->bar2 = qpci_iomap(sp->dev, SPYRE_BAR_DEVMEM, NULL);
}

/*
 * Program the root port at 00:03.0 as a bridge to bus 1 forwarding the
 * MMIO range libqos allocates BARs from.
 */
static void rootport_setup(Spyre *sp)
{
    sp->rp = qpci_device_find(sp->bus, RP_DEVFN);
    g_assert_nonnull(sp->rp);
    qpci_config_writeb(sp->rp, PCI_PRIMARY_BUS, 0);
    qpci_config_writeb(sp->rp, PCI_SECONDARY_BUS, 1);
    qpci_config_writeb(sp->rp, PCI_SUBORDINATE_BUS, 1);
    qpci_config_writew(sp->rp, PCI_MEMORY_BASE, 0xe000);
    qpci_config_writew(sp->rp, PCI_MEMORY_LIMIT, 0xeff0);
    qpci_config_writew(sp->rp, PCI_PREF_MEMORY_BASE, 0xe000);
    qpci_config_writew(sp->rp, PCI_PREF_MEMORY_LIMIT, 0xeff0);
    qpci_config_writel(sp->rp, PCI_PREF_BASE_UPPER32, 0);
    qpci_config_writel(sp->rp, PCI_PREF_LIMIT_UPPER32, 0);
    qpci_device_enable(sp->rp);
}

static void spyre_attach(Spyre *sp)
{
    g_free(sp->dev);
    sp->dev = qpci_device_find(sp->bus, sp->rp ? DEV_BEHIND_RP :
                               SPYRE_DEVFN);
    g_assert_nonnull(sp->dev);
    spyre_map_bars(sp);
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
}

/*
 * Start QEMU with @pre before the card (e.g. an IOMMU) and @extra
 * appended to the card's -device option.  With @rootport the card sits
 * behind a pcie-root-port (id rp1), else on pcie.0.
 */

static Spyre *spyre_start_vm(const char *pre, const char *extra,
                             bool rootport, const char *incoming)
{
    Spyre *sp = g_new0(Spyre, 1);
    const char *fw = getenv("SPYRE_FIRMWARE_DIR");
    g_autofree char *args = NULL;

    args = g_strdup_printf("-M q35 -nodefaults %s%s %s "
                           "-device pcie-root-port,id=rp1,chassis=1,addr=03.0 "
                           "-device spyre,id=sp0,%s,mem-size=%d,"
                           "vectors=%d,queues=8,contexts=16%s%s",
                           fw ? "-L " : "", fw ? fw : "", pre ? pre : "",
                           rootport ? "bus=rp1" : "addr=04.0",
                           MEM_SIZE, NVECTORS, extra ? extra : "",
                           incoming ? " -incoming defer" : "");
    sp->qts = qtest_init(args);
    sp->bus = qpci_new_pc(sp->qts, NULL);
    sp->next_page = GUEST_POOL;
    if (incoming) {
        /*
         * Config space and BARs arrive with the migration stream.  A
         * failed load leaves the VM running (exit-on-error off), so the
         * test reads the destination's own verdict instead of racing
         * its exit.
         */
        qtest_qmp_assert_success(sp->qts, "{'execute': 'migrate-incoming',"
                                 " 'arguments': {'uri': %s,"
                                 " 'exit-on-error': false}}", incoming);
        return sp;
    }
    if (rootport) {
        rootport_setup(sp);
    }
    spyre_attach(sp);
    return sp;
}

static Spyre *spyre_start_full(const char *pre, const char *extra,
                               bool rootport)
{
    return spyre_start_vm(pre, extra, rootport, NULL);
}

static Spyre *spyre_start(const char *extra)
{
    return spyre_start_full(NULL, extra, false);
}

static void spyre_stop(Spyre *sp)
{
    g_free(sp->dev);
    g_free(sp->rp);
    qpci_free_pc(sp->bus);
    qtest_quit(sp->qts);
    g_free(sp);
}

static uint64_t page_alloc(Spyre *sp, unsigned int n)
{
    uint64_t a = sp->next_page;

    sp->next_page += (uint64_t)n * PAGE;
    qtest_memset(sp->qts, a, 0, (size_t)n * PAGE);
    return a;
}

/* ---- device MMU page tables in guest memory ------------------------ */

static uint64_t ctx_create(Spyre *sp, unsigned int ctx)
{
    uint64_t root = page_alloc(sp, 1);

    wr64(sp, SPYRE_REG_CTX_ROOT(ctx), root | SPYRE_PTE_VALID);
    return root;
}

static void pt_map(Spyre *sp, uint64_t root, uint64_t va, uint64_t pte)
{
    uint64_t table = root;
    int lvl;

    for (lvl = 0; lvl < SPYRE_PT_LEVELS - 1; lvl++) {
        uint64_t ea = table + 8 * SPYRE_PT_INDEX(va, lvl);
        uint64_t e = qtest_readq(sp->qts, ea);

        if (!(e & SPYRE_PTE_VALID)) {
            e = page_alloc(sp, 1) | SPYRE_PTE_VALID;
            qtest_writeq(sp->qts, ea, e);
        }
        table = e & SPYRE_PTE_ADDR_MASK;
    }
    qtest_writeq(sp->qts, table + 8 * SPYRE_PT_INDEX(va, 3), pte);
}

/* Map @n fresh system-memory pages at @va; returns their guest address. */
static uint64_t map_sys(Spyre *sp, uint64_t root, uint64_t va,
                        unsigned int n, bool writable)
{
    uint64_t pa = page_alloc(sp, n);
    unsigned int i;

    for (i = 0; i < n; i++) {
        pt_map(sp, root, va + i * PAGE,
               (pa + i * PAGE) | SPYRE_PTE_VALID |
               (writable ? SPYRE_PTE_WRITE : 0));
    }
    return pa;
}

/* Map @n pages of device memory starting at BAR offset @off at @va. */
static void map_dev(Spyre *sp, uint64_t root, uint64_t va, uint64_t off,
                    unsigned int n)
{
    unsigned int i;

    for (i = 0; i < n; i++) {
        pt_map(sp, root, va + i * PAGE, (off + i * PAGE) | SPYRE_PTE_VALID |
               SPYRE_PTE_WRITE | SPYRE_PTE_DEVMEM);
    }
}

/* ---- command streams ----------------------------------------------- */

static void *emit(Stream *st, unsigned int op, uint32_t size)
{
    struct spyre_cmd_header *h;

    g_assert_cmpuint(st->len + size, <=, sizeof(st->buf));
    h = (void *)(st->buf + st->len);
    memset(h, 0, size);
    h->opcode = op;
    h->size = size;
    st->len += size;
    return h;
}

/*
 * The encoders of <drm/spyre_cmd.h> fill commands reserved with emit();
 * tests that build bad commands on purpose write the fields by hand.
 */
static void emit_nop(Stream *st)
{
    spyre_cmd_nop_init(emit(st, SPYRE_OP_NOP, sizeof(struct spyre_cmd_nop)));
}

static void emit_fill(Stream *st, uint64_t dst, uint64_t count,
                      uint64_t value, uint32_t esz)
{
    spyre_cmd_fill_init(emit(st, SPYRE_OP_FILL, sizeof(struct spyre_cmd_fill)),
                        dst, count, esz, value);
}

static struct spyre_cmd_copy *emit_copy(Stream *st, uint64_t src,
                                        uint64_t dst, uint64_t width,
                                        uint64_t height, uint64_t spitch,
                                        uint64_t dpitch)
{
    struct spyre_cmd_copy *c = emit(st, SPYRE_OP_COPY, sizeof(*c));

    spyre_cmd_copy_init(c, 0, dst, dpitch, SPYRE_DTYPE_U8, src, spitch,
                        SPYRE_DTYPE_U8, width, height);
    return c;
}

static void emit_timestamp(Stream *st, uint64_t dst)
{
    spyre_cmd_timestamp_init(emit(st, SPYRE_OP_TIMESTAMP,
                                  sizeof(struct spyre_cmd_timestamp)), dst);
}

static void emit_sem(Stream *st, unsigned int op, uint16_t flags,
                     uint64_t addr, uint64_t value)
{
    spyre_cmd_sem_init(emit(st, op, sizeof(struct spyre_cmd_sem)), op, flags,
                       addr, value);
}

/*
 * A GEMM of dense row-major matrices (lda = K, ldb = N, ldc = N), batch
 * strides 0 (every batch reads the same A and B and writes the same C).
 */
static struct spyre_cmd_gemm *emit_gemm(Stream *st, uint32_t ab_dtype,
                                        uint32_t c_dtype, uint32_t m,
                                        uint32_t n, uint32_t k,
                                        uint32_t batch, uint64_t a,
                                        uint64_t b, uint64_t c)
{
    struct spyre_cmd_gemm *g = emit(st, SPYRE_OP_GEMM, sizeof(*g));

    spyre_cmd_gemm_init(g, 0, ab_dtype, ab_dtype, c_dtype, m, n, k, a, k, b,
                        n, c, n);
    spyre_cmd_gemm_batch(g, batch, 0, 0, 0);
    return g;
}

/* ---- queues ----------------------------------------------------------- */

static uint32_t q_control(unsigned int vector, unsigned int prio)
{
    return SPYRE_Q_CONTROL_ENABLE | SPYRE_Q_CONTROL_PRIO(prio) |
           SPYRE_Q_CONTROL_VECTOR(vector);
}

static void queue_init(Spyre *sp, TestQueue *tq, unsigned int id,
                       uint32_t entries, unsigned int vector)
{
    tq->id = id;
    tq->entries = entries;
    tq->tail = 0;
    tq->ring = page_alloc(sp, (entries * 64 + PAGE - 1) / PAGE);
    tq->compl = page_alloc(sp, 1);

    wr64(sp, SPYRE_QUEUE_REG(id, SPYRE_Q_RING_BASE), tq->ring);
    qwr32(sp, id, SPYRE_Q_RING_ENTRIES, entries);
    wr64(sp, SPYRE_QUEUE_REG(id, SPYRE_Q_COMPL_ADDR), tq->compl);
    qwr32(sp, id, SPYRE_Q_CONTROL, q_control(vector, SPYRE_Q_PRIO_NORMAL));
    g_assert_cmpuint(qrd32(sp, id, SPYRE_Q_STATUS), ==, SPYRE_QS_IDLE);
}

static void submit_raw(Spyre *sp, TestQueue *tq, const struct spyre_hw_job *j)
{
    qtest_memwrite(sp->qts, tq->ring + tq->tail * 64, j, sizeof(*j));
    tq->tail = (tq->tail + 1) & (tq->entries - 1);
    qwr32(sp, tq->id, SPYRE_Q_DOORBELL, tq->tail);
}

static void submit(Spyre *sp, TestQueue *tq, uint64_t seqno, uint16_t ctx,
                   uint64_t cmd_va, uint32_t size, uint16_t flags)
{
    struct spyre_hw_job j = {
        .seqno = seqno,
        .cmd_va = cmd_va,
        .cmd_size = size,
        .ctx = ctx,
        .flags = flags,
    };

    submit_raw(sp, tq, &j);
}

/* Write @st to guest memory at @pa (mapped at some VA by the caller). */
static void stream_put(Spyre *sp, uint64_t pa, const Stream *st)
{
    qtest_memwrite(sp->qts, pa, st->buf, st->len);
}

/* Wait up to @us (times SPYRE_QTEST_SLOW) for @seqno's record. */
static void wait_compl_us(Spyre *sp, TestQueue *tq, uint64_t seqno,
                          struct spyre_hw_completion *c, gint64 us)
{
    gint64 end = g_get_monotonic_time() + us * slow;

    for (;;) {
        qtest_memread(sp->qts, tq->compl, c, sizeof(*c));
        if (c->seqno == seqno) {
            return;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(100);
    }
}

static void wait_compl(Spyre *sp, TestQueue *tq, uint64_t seqno,
                       struct spyre_hw_completion *c)
{
    wait_compl_us(sp, tq, seqno, c, WAIT_US / slow);
}

static void wait_qstatus(Spyre *sp, unsigned int q, uint32_t status)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    while (qrd32(sp, q, SPYRE_Q_STATUS) != status) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(100);
    }
}

/* Run one stream on @tq and return the completion status. */
static uint32_t run_stream(Spyre *sp, TestQueue *tq, uint16_t ctx,
                           uint64_t root, uint64_t va, const Stream *st,
                           uint64_t seqno, struct spyre_hw_completion *c)
{
    uint64_t pa = map_sys(sp, root, va, 1, false);

    stream_put(sp, pa, st);
    submit(sp, tq, seqno, ctx, va, st->len, 0);
    wait_compl(sp, tq, seqno, c);
    return c->status;
}

/* ---- tests ------------------------------------------------------------ */

static void test_identity(void)
{
    Spyre *sp = spyre_start(NULL);
    uint8_t cap;

    g_assert_cmphex(qpci_config_readw(sp->dev, PCI_VENDOR_ID), ==,
                    SPYRE_PCI_VENDOR_ID);
    g_assert_cmphex(qpci_config_readw(sp->dev, PCI_DEVICE_ID), ==,
                    SPYRE_PCI_DEVICE_ID);
    g_assert_cmphex(qpci_config_readw(sp->dev, PCI_CLASS_DEVICE), ==,
                    SPYRE_PCI_CLASS);
    g_assert_cmphex(qpci_config_readb(sp->dev, PCI_REVISION_ID), ==,
                    SPYRE_PCI_REVISION);
    g_assert_cmphex(qpci_config_readw(sp->dev, PCI_SUBSYSTEM_VENDOR_ID), ==,
                    SPYRE_PCI_SUBVENDOR_ID);
    g_assert_cmphex(qpci_config_readw(sp->dev, PCI_SUBSYSTEM_ID), ==,
                    SPYRE_PCI_SUBDEVICE_ID);

    /* PCIe endpoint with FLR, and MSI-X with our vector count. */
    cap = qpci_find_capability(sp->dev, PCI_CAP_ID_EXP, 0);
    g_assert_cmpuint(cap, !=, 0);
    g_assert_true(qpci_config_readl(sp->dev, cap + PCI_EXP_DEVCAP) &
                  PCI_EXP_DEVCAP_FLR);
    g_assert_cmpuint(qpci_msix_table_size(sp->dev), ==, NVECTORS);

    g_assert_cmphex(rd32(sp, SPYRE_REG_ID), ==, SPYRE_ID_MAGIC);
    g_assert_cmphex(rd32(sp, SPYRE_REG_VERSION), ==,
                    SPYRE_HW_VERSION_MAJOR << 16 | SPYRE_HW_VERSION_MINOR);
    g_assert_cmphex(rd64(sp, SPYRE_REG_CAPS), ==,
                    SPYRE_CAP_FP16 | SPYRE_CAP_BF16 | SPYRE_CAP_FP8 |
                    SPYRE_CAP_INT8 | SPYRE_CAP_MMU | SPYRE_CAP_SEM |
                    SPYRE_CAP_KERNEL);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_NUM_QUEUES), ==, 8);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_NUM_CORES), ==, 32);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_NUM_CONTEXTS), ==, 16);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_NUM_VECTORS), ==, NVECTORS);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_DEVMEM_SIZE), ==, MEM_SIZE);
    /* 64-bit register read as two 32-bit halves, low first. */
    g_assert_cmpuint(rd32(sp, SPYRE_REG_DEVMEM_SIZE), ==, MEM_SIZE);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_DEVMEM_SIZE + 4), ==, 0);
    g_assert_true(rd32(sp, SPYRE_REG_STATUS) & SPYRE_DEV_STATUS_READY);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    /* Queue pages beyond NUM_QUEUES read as zero. */
    g_assert_cmpuint(qrd32(sp, 8, SPYRE_Q_RING_ENTRIES), ==, 0);

    /* 64-bit registers written as two 32-bit halves, low first. */
    wr32(sp, SPYRE_REG_CTX_ROOT(15), 0x12345001);
    wr32(sp, SPYRE_REG_CTX_ROOT(15) + 4, 0xabc);
    g_assert_cmphex(rd64(sp, SPYRE_REG_CTX_ROOT(15)), ==, 0xabc12345001ULL);
    wr32(sp, SPYRE_REG_CTX_ROOT(15), 0xffffffff);   /* keeps addr | VALID */
    g_assert_cmphex(rd64(sp, SPYRE_REG_CTX_ROOT(15)), ==, 0xabcfffff001ULL);
    wr64(sp, SPYRE_REG_CTX_ROOT(16), 0x5001);        /* beyond contexts */
    g_assert_cmphex(rd64(sp, SPYRE_REG_CTX_ROOT(16)), ==, 0);

    spyre_stop(sp);
}

static void test_scratch_clock(void)
{
    Spyre *sp = spyre_start(NULL);
    uint64_t t0, t1;

    g_assert_cmphex(rd32(sp, SPYRE_REG_SCRATCH), ==, 0);
    wr32(sp, SPYRE_REG_SCRATCH, 0xdeadbeef);
    g_assert_cmphex(rd32(sp, SPYRE_REG_SCRATCH), ==, 0xdeadbeef);
    wr32(sp, SPYRE_REG_SCRATCH, 0x12345678);
    g_assert_cmphex(rd32(sp, SPYRE_REG_SCRATCH), ==, 0x12345678);
    /* Read-only registers ignore writes. */
    wr32(sp, SPYRE_REG_ID, 0);
    g_assert_cmphex(rd32(sp, SPYRE_REG_ID), ==, SPYRE_ID_MAGIC);

    t0 = rd64(sp, SPYRE_REG_CLOCK);
    qtest_clock_step(sp->qts, 1000000);
    t1 = rd64(sp, SPYRE_REG_CLOCK);
    g_assert_cmpuint(t1, >=, t0 + 1000000);
    qtest_clock_step(sp->qts, 5000);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_CLOCK), >=, t1 + 5000);

    spyre_stop(sp);
}

static void do_jobs(Spyre *sp)
{
    const uint64_t va_cmd = 0x100000, va_sys = 0x200000, va_dev = 0x400000;
    const uint64_t va_out = 0x7f0000001000ULL;     /* high VA, level 0 */
    struct spyre_hw_completion c;
    uint8_t src[3 * PAGE], out[3 * PAGE], dev[2 * PAGE];
    uint64_t root, pa_cmd, pa_sys, pa_out, ts;
    TestQueue tq;
    Stream st = { 0 };
    unsigned int i, r;

    root = ctx_create(sp, 3);
    pa_cmd = map_sys(sp, root, va_cmd, 1, false);
    pa_sys = map_sys(sp, root, va_sys, 3, true);
    pa_out = map_sys(sp, root, va_out, 3, true);
    map_dev(sp, root, va_dev, 0x10000, 2);
    queue_init(sp, &tq, 2, 4, 1);

    for (i = 0; i < sizeof(src); i++) {
        src[i] = i * 7 + 3;
    }
    qtest_memwrite(sp->qts, pa_sys, src, sizeof(src));

    /*
     * NOP; FILL 16-bit into the first out page (odd start, crossing into
     * the second); COPY a 2-D block sys -> devmem (rows crossing a page
     * boundary); COPY it back devmem -> sys; TIMESTAMP.
     */
    emit_nop(&st);
    emit_fill(&st, va_out + 1, 3000, 0xa55a, 2);
    emit_copy(&st, va_sys + 100, va_dev + 50, 700, 9, 1000, 900);
    emit_copy(&st, va_dev + 50, va_out + 2 * PAGE, 700, 1, 0, 0);
    emit_timestamp(&st, va_out + 2 * PAGE + 1000);
    emit_nop(&st);
    stream_put(sp, pa_cmd, &st);

    qtest_clock_step(sp->qts, 1000);
    submit(sp, &tq, 41, 3, va_cmd, st.len, 0);
    wait_compl(sp, &tq, 41, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(c.cmd_offset, ==, 0);
    g_assert_cmpuint(c.error_va, ==, 0);
    g_assert_cmpuint(c.start_ns, <=, c.end_ns);
    g_assert_cmpuint(c.detail | c.detail2 | c.reserved, ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(2, SPYRE_Q_LAST_SEQNO)), ==,
                     41);
    g_assert_cmpuint(qrd32(sp, 2, SPYRE_Q_HEAD), ==, 1);
    wait_qstatus(sp, 2, SPYRE_QS_IDLE);

    /* FILL */
    qtest_memread(sp->qts, pa_out, out, sizeof(out));
    g_assert_cmpuint(out[0], ==, 0);
    for (i = 0; i < 3000; i++) {
        g_assert_cmphex(out[1 + 2 * i], ==, 0x5a);
        g_assert_cmphex(out[2 + 2 * i], ==, 0xa5);
    }
    g_assert_cmpuint(out[6001], ==, 0);

    /* COPY sys -> devmem, checked through BAR2 */
    qpci_memread(sp->dev, sp->bar2, 0x10000, dev, sizeof(dev));
    for (r = 0; r < 9; r++) {
        g_assert_cmpmem(dev + 50 + r * 900, 700, src + 100 + r * 1000, 700);
    }
    g_assert_cmpuint(dev[49], ==, 0);
    g_assert_cmpuint(dev[750], ==, 0);

    /* COPY devmem -> sys and TIMESTAMP */
    g_assert_cmpmem(out + 2 * PAGE, 700, src + 100, 700);
    ts = ldq_le_p(out + 2 * PAGE + 1000);
    g_assert_cmpuint(ts, >=, c.start_ns);
    g_assert_cmpuint(ts, <=, c.end_ns);

    /* Several jobs, wrapping the 4-entry ring twice. */
    for (i = 0; i < 8; i++) {
        Stream s2 = { 0 };
        uint64_t pa = map_sys(sp, root, 0x800000 + i * PAGE, 1, false);

        emit_fill(&s2, va_sys, 4, 0x11 * (i + 1), 1);
        stream_put(sp, pa, &s2);
        submit(sp, &tq, 100 + i, 3, 0x800000 + i * PAGE, s2.len, 0);
        if (i % 3 == 2) {
            wait_compl(sp, &tq, 100 + i, &c);
        }
    }
    wait_compl(sp, &tq, 107, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmphex(qtest_readl(sp->qts, pa_sys), ==, 0x88888888);
    g_assert_cmpuint(qrd32(sp, 2, SPYRE_Q_HEAD), ==, tq.tail);

    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_JOBS), ==, 9);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_CMDS), ==, 14);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_BYTES), >=,
                     6000 + 2 * 6300 + 2 * 700 + 8);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_FAULTS), ==, 0);
}

static void test_jobs(void)
{
    Spyre *sp = spyre_start(NULL);

    do_jobs(sp);
    spyre_stop(sp);
}

/* The same behind a root port, with an (inactive) vIOMMU. */
static void test_jobs_rootport_iommu(void)
{
    Spyre *sp = spyre_start_full("-device intel-iommu", NULL, true);

    do_jobs(sp);
    spyre_stop(sp);
}

/*
 * Jobs of short commands run during the doorbell write itself; a job with
 * another command goes to a worker whole, and one that runs past the
 * doorbell's budget of 64 commands goes on on a worker from there:
 * nothing is lost or run twice.
 */
static void test_doorbell(void)
{
    const uint64_t va_cmd = 0x100000, va_out = 0x200000, va_long = 0x400000;
    enum { LONG_PAGES = 16, SIGNALS = 170 };
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    struct spyre_hw_job j[2] = { 0 };
    uint64_t root, pa_cmd, pa_out, pa_long;
    TestQueue tq;
    Stream st = { 0 };
    unsigned int i;

    root = ctx_create(sp, 1);
    pa_cmd = map_sys(sp, root, va_cmd, 4, false);
    pa_out = map_sys(sp, root, va_out, 1, true);
    pa_long = map_sys(sp, root, va_long, LONG_PAGES, false);
    queue_init(sp, &tq, 0, 8, 1);

    /* NOP, TIMESTAMP, SEM_SIGNAL (+1), NOP: done when the write returns. */
    qtest_clock_step(sp->qts, 1000);
    emit_nop(&st);
    emit_timestamp(&st, va_out);
    emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, va_out + 8, 1);
    emit_nop(&st);
    stream_put(sp, pa_cmd, &st);
    submit(sp, &tq, 7, 1, va_cmd, st.len, SPYRE_JOB_F_IRQ);
    qtest_memread(sp->qts, tq.compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 7);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_out), >=, c.start_ns);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_out), <=, c.end_ns);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_out + 8), ==, 1);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_IDLE);

    /* Two jobs behind one doorbell write: both done. */
    for (i = 0; i < 2; i++) {
        j[i] = (struct spyre_hw_job) {
            .seqno = 8 + i, .cmd_va = va_cmd, .cmd_size = st.len, .ctx = 1,
        };
        qtest_memwrite(sp->qts, tq.ring + ((tq.tail + i) & 7) * 64, &j[i],
                       sizeof(j[i]));
    }
    tq.tail = (tq.tail + 2) & 7;
    qwr32(sp, 0, SPYRE_Q_DOORBELL, tq.tail);
    qtest_memread(sp->qts, tq.compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 9);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_out + 8), ==, 3);

    /* SEM_SIGNAL (+1), FILL, SEM_SIGNAL (+1): the job goes to a worker. */
    st.len = 0;
    emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, va_out + 8, 1);
    emit_fill(&st, va_out + 16, 8, 0x5a, 1);
    emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, va_out + 8, 1);
    stream_put(sp, pa_cmd + PAGE, &st);
    submit(sp, &tq, 10, 1, va_cmd + PAGE, st.len, 0);
    wait_compl(sp, &tq, 10, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_out + 8), ==, 5);
    g_assert_cmphex(qtest_readq(sp->qts, pa_out + 16), ==,
                    0x5a5a5a5a5a5a5a5aULL);

    /*
     * LONG_PAGES pages of SIGNALS adds and two NOPs each, one job: more
     * than a doorbell's budget, so it is handed over mid-stream.
     */
    st.len = 0;
    for (i = 0; i < SIGNALS; i++) {
        emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, va_out + 24, 1);
    }
    emit_nop(&st);
    emit_nop(&st);
    g_assert_cmpuint(st.len, ==, PAGE);
    for (i = 0; i < LONG_PAGES; i++) {
        stream_put(sp, pa_long + i * PAGE, &st);
    }
    submit(sp, &tq, 11, 1, va_long, LONG_PAGES * PAGE, 0);
    wait_compl(sp, &tq, 11, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_out + 24), ==,
                     LONG_PAGES * SIGNALS);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_JOBS), ==, 5);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_CMDS), ==,
                     3 * 4 + 3 + LONG_PAGES * (SIGNALS + 2));

    spyre_stop(sp);
}

static void test_msix(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };
    uint64_t root, pa;
    unsigned int v = 3;

    qpci_msix_enable(sp->dev);
    /* Vector 3 -> a dword in guest RAM, unmasked. */
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   sp->dev->msix_table_off + v * PCI_MSIX_ENTRY_SIZE +
                   PCI_MSIX_ENTRY_LOWER_ADDR, MSI_ADDR);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   sp->dev->msix_table_off + v * PCI_MSIX_ENTRY_SIZE +
                   PCI_MSIX_ENTRY_UPPER_ADDR, 0);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   sp->dev->msix_table_off + v * PCI_MSIX_ENTRY_SIZE +
                   PCI_MSIX_ENTRY_DATA, 0x5959);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   sp->dev->msix_table_off + v * PCI_MSIX_ENTRY_SIZE +
                   PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
    qtest_writel(sp->qts, MSI_ADDR, 0);

    root = ctx_create(sp, 0);
    pa = map_sys(sp, root, 0x1000, 1, false);
    emit_nop(&st);
    stream_put(sp, pa, &st);
    queue_init(sp, &tq, 0, 2, v);

    /* Without SPYRE_JOB_F_IRQ: no interrupt. */
    submit(sp, &tq, 1, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 1, &c);
    g_usleep(20000);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);

    /* With it: the message is written after the completion record. */
    submit(sp, &tq, 2, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_compl(sp, &tq, 2, &c);
    {
        gint64 end = g_get_monotonic_time() + WAIT_US;

        while (qtest_readl(sp->qts, MSI_ADDR) != 0x5959) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(100);
        }
    }
    g_assert_false(qpci_msix_pending(sp->dev, v));

    /* Masked vector: the interrupt stays pending in the PBA. */
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   sp->dev->msix_table_off + v * PCI_MSIX_ENTRY_SIZE +
                   PCI_MSIX_ENTRY_VECTOR_CTRL, PCI_MSIX_ENTRY_CTRL_MASKBIT);
    qtest_writel(sp->qts, MSI_ADDR, 0);
    submit(sp, &tq, 3, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_compl(sp, &tq, 3, &c);
    {
        gint64 end = g_get_monotonic_time() + WAIT_US;

        while (!qpci_msix_pending(sp->dev, v)) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(100);
        }
    }
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);

    qpci_msix_disable(sp->dev);
    spyre_stop(sp);
}

static void test_mmu_fault(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq, tq2;
    Stream st = { 0 }, ok = { 0 };
    uint64_t root, info, pa;
    unsigned int i;

    qpci_msix_enable(sp->dev);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   sp->dev->msix_table_off + PCI_MSIX_ENTRY_VECTOR_CTRL,
                   PCI_MSIX_ENTRY_CTRL_MASKBIT);
    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);

    root = ctx_create(sp, 5);
    map_sys(sp, root, 0x10000, 1, true);
    map_sys(sp, root, 0x20000, 1, false);
    queue_init(sp, &tq, 1, 4, 2);
    queue_init(sp, &tq2, 3, 4, 2);

    /* A read of an unmapped VA in the second command. */
    emit_nop(&st);
    emit_copy(&st, 0x10000, 0x10800, 16, 1, 0, 0);
    emit_copy(&st, 0x5550000, 0x10000, 16, 1, 0, 0);
    emit_nop(&st);
    g_assert_cmpuint(run_stream(sp, &tq, 5, root, 0x30000, &st, 7, &c), ==,
                     SPYRE_STATUS_MMU_FAULT);
    g_assert_cmpuint(c.cmd_offset, ==, 8 + sizeof(struct spyre_cmd_copy));
    g_assert_cmphex(c.error_va, ==, 0x5550000);
    wait_qstatus(sp, 1, SPYRE_QS_ERROR);
    g_assert_cmpuint(qrd32(sp, 1, SPYRE_Q_HEAD), ==, 1);
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(1, SPYRE_Q_LAST_SEQNO)), ==,
                     7);

    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 1);
    g_assert_cmphex(rd64(sp, SPYRE_REG_FAULT_VA), ==, 0x5550000);
    info = rd64(sp, SPYRE_REG_FAULT_INFO);
    g_assert_cmpuint(SPYRE_FAULT_INFO_CTX(info), ==, 5);
    g_assert_cmpuint(SPYRE_FAULT_INFO_QUEUE(info), ==, 1);
    g_assert_cmpuint(SPYRE_FAULT_INFO_WRITE(info), ==, 0);
    g_assert_cmpuint(SPYRE_FAULT_INFO_REASON(info), ==, SPYRE_FAULT_UNMAPPED);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_FAULTS), ==, 1);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==,
                    SPYRE_IRQ_FAULT | SPYRE_IRQ_QUEUE_ERROR);
    {
        gint64 end = g_get_monotonic_time() + WAIT_US;

        while (!qpci_msix_pending(sp->dev, SPYRE_ERROR_VECTOR)) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(100);
        }
    }
    wr32(sp, SPYRE_REG_IRQ_STATUS, SPYRE_IRQ_FAULT);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==,
                    SPYRE_IRQ_QUEUE_ERROR);
    wr32(sp, SPYRE_REG_FAULT_POP, 1);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_FAULT_INFO), ==, 0);

    /* The halted queue runs nothing more... */
    emit_nop(&ok);
    pa = map_sys(sp, root, 0x40000, 1, false);
    stream_put(sp, pa, &ok);
    submit(sp, &tq, 8, 5, 0x40000, ok.len, 0);

    /* ...while another queue of the same context carries on. */
    submit(sp, &tq2, 9, 5, 0x40000, ok.len, 0);
    wait_compl(sp, &tq2, 9, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(qrd32(sp, 1, SPYRE_Q_STATUS), ==, SPYRE_QS_ERROR);
    qtest_memread(sp->qts, tq.compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 7);

    /* A write to a read-only page. */
    st.len = 0;
    emit_fill(&st, 0x20010, 4, 1, 4);
    g_assert_cmpuint(run_stream(sp, &tq2, 5, root, 0x50000, &st, 10, &c), ==,
                     SPYRE_STATUS_MMU_FAULT);
    g_assert_cmphex(c.error_va, ==, 0x20010);
    info = rd64(sp, SPYRE_REG_FAULT_INFO);
    g_assert_cmpuint(SPYRE_FAULT_INFO_QUEUE(info), ==, 3);
    g_assert_cmpuint(SPYRE_FAULT_INFO_WRITE(info), ==, 1);
    g_assert_cmpuint(SPYRE_FAULT_INFO_REASON(info), ==, SPYRE_FAULT_READONLY);
    wait_qstatus(sp, 3, SPYRE_QS_ERROR);

    /* Device memory beyond the BAR. */
    qwr32(sp, 3, SPYRE_Q_RESET, 1);
    wait_qstatus(sp, 3, SPYRE_QS_DISABLED);
    queue_init(sp, &tq2, 3, 4, 2);
    map_dev(sp, root, 0x60000, MEM_SIZE, 1);
    st.len = 0;
    emit_fill(&st, 0x60000, 1, 1, 1);
    g_assert_cmpuint(run_stream(sp, &tq2, 5, root, 0x70000, &st, 11, &c), ==,
                     SPYRE_STATUS_MMU_FAULT);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 2);
    wr32(sp, SPYRE_REG_FAULT_POP, 1);
    info = rd64(sp, SPYRE_REG_FAULT_INFO);
    g_assert_cmpuint(SPYRE_FAULT_INFO_REASON(info), ==,
                     SPYRE_FAULT_BAD_TARGET);

    /* The fault FIFO holds 16 records; more are counted as lost. */
    for (i = 0; i < SPYRE_FAULT_FIFO_DEPTH + 2; i++) {
        qwr32(sp, 3, SPYRE_Q_RESET, 1);
        queue_init(sp, &tq2, 3, 4, 2);
        st.len = 0;
        emit_fill(&st, 0x7770000 + i * PAGE, 1, 1, 1);
        g_assert_cmpuint(run_stream(sp, &tq2, 5, root, 0x90000 + i * PAGE,
                                    &st, 100 + i, &c), ==,
                         SPYRE_STATUS_MMU_FAULT);
    }
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==,
                     SPYRE_FAULT_FIFO_DEPTH);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_LOST), ==, 3);
    g_assert_cmphex(rd64(sp, SPYRE_REG_FAULT_VA), ==, 0x60000);
    for (i = 0; i < SPYRE_FAULT_FIFO_DEPTH; i++) {
        wr32(sp, SPYRE_REG_FAULT_POP, 1);
    }
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 0);

    /* Invalidation requests are counted and acknowledged. */
    wr64(sp, SPYRE_REG_MMU_INVAL, 5);
    wr32(sp, SPYRE_REG_MMU_INVAL, SPYRE_MMU_INVAL_ALL & 0xffffffff);
    wr32(sp, SPYRE_REG_MMU_INVAL + 4, SPYRE_MMU_INVAL_ALL >> 32);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_MMU_INVAL_REQ), ==, 2);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_MMU_INVAL_ACK), ==, 2);

    /* An unmapped page after invalidation faults. */
    qwr32(sp, 3, SPYRE_Q_RESET, 1);
    queue_init(sp, &tq2, 3, 4, 2);
    pt_map(sp, root, 0x10000, 0);
    wr64(sp, SPYRE_REG_MMU_INVAL, 5);
    st.len = 0;
    emit_fill(&st, 0x10000, 1, 1, 1);
    g_assert_cmpuint(run_stream(sp, &tq2, 5, root, 0x80000, &st, 12, &c), ==,
                     SPYRE_STATUS_MMU_FAULT);

    qpci_msix_disable(sp->dev);
    spyre_stop(sp);
}

static void test_bad_input(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    struct spyre_hw_job j;
    struct spyre_cmd_copy *cp;
    TestQueue tq;
    Stream st = { 0 };
    uint64_t root, pa;
    uint32_t bad_entries[] = { 0, 1, 3, 6, SPYRE_RING_MAX_ENTRIES * 2 };
    unsigned int i, seq = 1;

    root = ctx_create(sp, 1);
    map_sys(sp, root, 0x10000, 1, true);

    /* Bad vectors: error vector, beyond NUM_VECTORS, huge. */
    queue_init(sp, &tq, 0, 4, 1);
    qwr32(sp, 0, SPYRE_Q_RESET, 1);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(0, 1));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(NVECTORS, 1));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(0x3ff, 1));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    /* Bad priority. */
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, 3));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);

    /* Bad ring sizes and alignments. */
    for (i = 0; i < ARRAY_SIZE(bad_entries); i++) {
        qwr32(sp, 0, SPYRE_Q_RING_ENTRIES, bad_entries[i]);
        qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, 1));
        g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    }
    qwr32(sp, 0, SPYRE_Q_RING_ENTRIES, 4);
    wr64(sp, SPYRE_QUEUE_REG(0, SPYRE_Q_RING_BASE), tq.ring + 8);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, 1));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    wr64(sp, SPYRE_QUEUE_REG(0, SPYRE_Q_RING_BASE), UINT64_MAX - 63);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, 1));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    wr64(sp, SPYRE_QUEUE_REG(0, SPYRE_Q_RING_BASE), tq.ring);
    wr64(sp, SPYRE_QUEUE_REG(0, SPYRE_Q_COMPL_ADDR), tq.compl + 32);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, 1));
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);

    /* A good configuration; config registers then locked. */
    queue_init(sp, &tq, 0, 4, 1);
    qwr32(sp, 0, SPYRE_Q_RING_ENTRIES, 8);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_RING_ENTRIES), ==, 4);

    /* Doorbell beyond the ring is ignored. */
    qwr32(sp, 0, SPYRE_Q_DOORBELL, 4);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_DOORBELL), ==, 0);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_IDLE);

    /* Bad descriptors: each fails INVALID_JOB and halts the queue. */
    for (i = 0; i < 8; i++) {
        pa = map_sys(sp, root, 0x100000 + i * PAGE, 1, false);
        st.len = 0;
        emit_nop(&st);
        stream_put(sp, pa, &st);
        memset(&j, 0, sizeof(j));
        j.seqno = ++seq;
        j.cmd_va = 0x100000 + i * PAGE;
        j.cmd_size = 8;
        j.ctx = 1;
        switch (i) {
        case 0:
            j.ctx = 16;             /* beyond NUM_CONTEXTS */
            break;
        case 1:
            j.ctx = 2;              /* no root */
            break;
        case 2:
            j.reserved[4] = 1;
            break;
        case 3:
            j.flags = 0x8000;
            break;
        case 4:
            j.cmd_size = 12;
            break;
        case 5:
            j.cmd_size = SPYRE_MAX_CMD_STREAM + 8;
            break;
        case 6:
            j.cmd_va += 4;
            break;
        case 7:
            j.cmd_va = (1ULL << SPYRE_VA_BITS) - 8;
            j.cmd_size = 16;
            break;
        }
        submit_raw(sp, &tq, &j);
        wait_compl(sp, &tq, seq, &c);
        g_assert_cmpuint(c.status, ==, SPYRE_STATUS_INVALID_JOB);
        wait_qstatus(sp, 0, SPYRE_QS_ERROR);
        qwr32(sp, 0, SPYRE_Q_RESET, 1);
        queue_init(sp, &tq, 0, 4, 1);
    }
    st.len = 0;

#define EXPECT_STATUS(want) do {                                          \
        uint64_t va = 0x200000 + seq * PAGE;                              \
        g_assert_cmpuint(run_stream(sp, &tq, 1, root, va, &st, ++seq,     \
                                    &c), ==, (want));                     \
        if ((want) != SPYRE_STATUS_OK) {                                  \
            wait_qstatus(sp, 0, SPYRE_QS_ERROR);                          \
            qwr32(sp, 0, SPYRE_Q_RESET, 1);                               \
            queue_init(sp, &tq, 0, 4, 1);                                 \
        }                                                                 \
        st.len = 0;                                                       \
    } while (0)

    /* Unknown opcode. */
    emit_nop(&st);
    emit(&st, SPYRE_OP_COUNT, 8);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPCODE);
    g_assert_cmpuint(c.cmd_offset, ==, 8);

    /* Wrong size, flags, pad; command running past the stream. */
    emit(&st, SPYRE_OP_NOP, 16);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_COMMAND);
    emit_nop(&st);
    ((struct spyre_cmd_header *)st.buf)->flags = 1;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_COMMAND);
    emit_fill(&st, 0x10000, 1, 0, 1);
    ((struct spyre_cmd_fill *)st.buf)->pad = 1;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_COMMAND);
    emit_fill(&st, 0x10000, 1, 0, 1);
    st.len -= 8;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_COMMAND);

    /* Bad operands. */
    emit_fill(&st, 0x10000, 1, 0, 3);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    emit_fill(&st, UINT64_MAX - 2, 2, 0, 4);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    emit_copy(&st, 0x10000, 0x10800, 0, 1, 0, 0);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    cp = emit_copy(&st, 0x10000, 0x10800, 4, 1, 0, 0);
    cp->src_dtype = SPYRE_DTYPE_FP16;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    cp = emit_copy(&st, 0x10000, 0x10800, 4, 1, 0, 0);
    cp->src_dtype = SPYRE_DTYPE_INT32;
    cp->dst_dtype = SPYRE_DTYPE_FP32;     /* INT32 only with INT32 */
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    cp = emit_copy(&st, 0x10000, 0x10800, 16, 2, 8, 16);
    cp->src_dtype = SPYRE_DTYPE_FP16;     /* pitch shorter than a row */
    cp->dst_dtype = SPYRE_DTYPE_FP32;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    cp = emit_copy(&st, 0x10000, 0x10800, 4, 1, 0, 0);
    cp->hdr.flags = 2;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_COMMAND);
    emit_timestamp(&st, 0x10004);         /* not 8-byte aligned */
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    cp = emit_copy(&st, 0x10000, 0x10800, 4, 1, 0, 0);
    cp->src_dtype = 0;
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    cp = emit_copy(&st, 0x10000, 0x10800, 16, 3, UINT64_MAX / 2, 16);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    emit_sem(&st, SPYRE_OP_SEM_SIGNAL, 0, 0x10004, 1);
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);
    emit(&st, SPYRE_OP_GEMM, sizeof(struct spyre_cmd_gemm));
    EXPECT_STATUS(SPYRE_STATUS_INVALID_OPERAND);

    /* Beyond per-command limits. */
    emit_fill(&st, 0x10000, 1ULL << 40, 0, 8);
    EXPECT_STATUS(SPYRE_STATUS_LIMIT);
    cp = emit_copy(&st, 0x10000, 0x10800, 1 << 20, 1 << 20, 1 << 20,
                   1 << 20);
    EXPECT_STATUS(SPYRE_STATUS_LIMIT);

    /* Same-dtype COPY of INT32 is a plain copy. */
    cp = emit_copy(&st, 0x10000, 0x10800, 4, 1, 0, 0);
    cp->src_dtype = cp->dst_dtype = SPYRE_DTYPE_INT32;
    EXPECT_STATUS(SPYRE_STATUS_OK);

    /* A system-memory PTE aimed at the card's own BARs is refused. */
    pt_map(sp, root, 0x30000,
           sp->bar2.addr | SPYRE_PTE_VALID | SPYRE_PTE_WRITE);
    pt_map(sp, root, 0x31000,
           sp->bar0.addr | SPYRE_PTE_VALID | SPYRE_PTE_WRITE);
    emit_fill(&st, 0x30000, 8, 0x77, 1);
    EXPECT_STATUS(SPYRE_STATUS_DMA_ERROR);
    g_assert_cmphex(c.error_va, ==, 0x30000);
    emit_fill(&st, 0x31000, 1, 0x77, 4);
    EXPECT_STATUS(SPYRE_STATUS_DMA_ERROR);
    /* So is a byte COPY's piece, to or from them, whoever maps it. */
    emit_copy(&st, 0x10000, 0x30000, 8, 1, 0, 0);
    EXPECT_STATUS(SPYRE_STATUS_DMA_ERROR);
    g_assert_cmphex(c.error_va, ==, 0x30000);
    emit_copy(&st, 0x31000, 0x10000, 8, 1, 0, 0);
    EXPECT_STATUS(SPYRE_STATUS_DMA_ERROR);
    g_assert_cmphex(c.error_va, ==, 0x31000);
    g_assert_cmphex(qpci_io_readl(sp->dev, sp->bar2, 0), ==, 0);
    g_assert_cmphex(rd32(sp, SPYRE_REG_SCRATCH), ==, 0);

    /* The queue still works after all that. */
    emit_nop(&st);
    EXPECT_STATUS(SPYRE_STATUS_OK);
#undef EXPECT_STATUS

    spyre_stop(sp);
}

static void test_queue_reset(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq, tq2;
    Stream st = { 0 };
    uint64_t root, pa, active;

    root = ctx_create(sp, 0);
    pa = map_sys(sp, root, 0x1000, 1, false);
    emit_nop(&st);
    stream_put(sp, pa, &st);
    queue_init(sp, &tq, 4, 4, 1);
    queue_init(sp, &tq2, 5, 4, 2);

    /* An injected hang keeps the queue busy... */
    wr32(sp, SPYRE_REG_DBG_INJECT, 4 | SPYRE_DBG_HANG << 16);
    submit(sp, &tq, 1, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    submit(sp, &tq, 2, 0, 0x1000, st.len, 0);
    wait_qstatus(sp, 4, SPYRE_QS_BUSY);
    /* TEL_ACTIVE_NS grows with the clock while a job is in progress */
    active = rd64(sp, SPYRE_REG_TEL_ACTIVE_NS);
    qtest_clock_step(sp->qts, 1000000);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_ACTIVE_NS), ==, active + 1000000);

    /* ...but does not block another queue. */
    submit(sp, &tq2, 10, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq2, 10, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    /* BUSY_NS: the run time of the one job that ended there */
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(5, SPYRE_Q_BUSY_NS)), ==,
                     c.end_ns - c.start_ns);
    g_usleep(10000);
    g_assert_cmpuint(qrd32(sp, 4, SPYRE_Q_STATUS), ==, SPYRE_QS_BUSY);
    qtest_memread(sp->qts, tq.compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 0);

    /* Q_RESET aborts it and disables the queue. */
    qwr32(sp, 4, SPYRE_Q_RESET, 1);
    wait_qstatus(sp, 4, SPYRE_QS_DISABLED);
    wait_compl(sp, &tq, 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_ABORTED);
    g_assert_cmpuint(qrd32(sp, 4, SPYRE_Q_HEAD), ==, 0);
    g_assert_cmpuint(qrd32(sp, 4, SPYRE_Q_DOORBELL), ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(4, SPYRE_Q_BUSY_NS)), ==, 0);
    g_assert_false(qrd32(sp, 4, SPYRE_Q_CONTROL) & SPYRE_Q_CONTROL_ENABLE);
    /* ...and stops when no queue has one: the union of spans, not a sum */
    active = rd64(sp, SPYRE_REG_TEL_ACTIVE_NS);
    qtest_clock_step(sp->qts, 1000000);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_ACTIVE_NS), ==, active);
    g_assert_cmpuint(active, <=, rd64(sp, SPYRE_REG_CLOCK));

    /* Doorbells on a disabled queue are ignored. */
    qwr32(sp, 4, SPYRE_Q_DOORBELL, 1);
    g_assert_cmpuint(qrd32(sp, 4, SPYRE_Q_DOORBELL), ==, 0);

    /* Re-enabled, it runs again; an injected error fails one job. */
    queue_init(sp, &tq, 4, 4, 1);
    submit(sp, &tq, 3, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 3, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    /* (through the QOM knob this time) */
    qtest_qmp_assert_success(sp->qts, "{'execute': 'qom-set', 'arguments':"
                             " {'path': '/machine/peripheral/sp0',"
                             " 'property': 'dbg-inject', 'value': %d}}",
                             4 | SPYRE_DBG_ERROR << 16);
    submit(sp, &tq, 4, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 4, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_INTERNAL);
    wait_qstatus(sp, 4, SPYRE_QS_ERROR);
    g_assert_cmpuint(qrd32(sp, 4, SPYRE_Q_HEAD), ==, 2);
    g_assert_true(rd32(sp, SPYRE_REG_IRQ_STATUS) & SPYRE_IRQ_QUEUE_ERROR);
    qwr32(sp, 4, SPYRE_Q_RESET, 1);
    wait_qstatus(sp, 4, SPYRE_QS_DISABLED);

    /* A long job is aborted mid-way by Q_RESET. */
    queue_init(sp, &tq, 4, 4, 1);
    map_sys(sp, root, 0x100000, 256, true);
    st.len = 0;
    emit_fill(&st, 0x100000, 256 * PAGE / 8, 1, 8);
    emit_fill(&st, 0x100000, 256 * PAGE / 8, 2, 8);
    emit_fill(&st, 0x100000, 256 * PAGE / 8, 3, 8);
    emit_fill(&st, 0x100000, 256 * PAGE / 8, 4, 8);
    pa = map_sys(sp, root, 0x2000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &tq, 5, 0, 0x2000, st.len, 0);
    qwr32(sp, 4, SPYRE_Q_RESET, 1);
    g_assert_cmpuint(qrd32(sp, 4, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    qtest_memread(sp->qts, tq.compl, &c, sizeof(c));
    g_assert_true(c.seqno == 0 || (c.seqno == 5 &&
                  (c.status == SPYRE_STATUS_ABORTED ||
                   c.status == SPYRE_STATUS_OK)));

    spyre_stop(sp);
}

static void test_semaphores(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue qa, qb;
    Stream st = { 0 };
    uint64_t root, pa_sem, pa;

    root = ctx_create(sp, 2);
    pa_sem = map_sys(sp, root, 0x10000, 1, true);
    queue_init(sp, &qa, 0, 4, 1);
    queue_init(sp, &qb, 1, 4, 1);

    /* A waits for sem >= 2, then fills. */
    emit_sem(&st, SPYRE_OP_SEM_WAIT, 0, 0x10000, 2);
    emit_fill(&st, 0x10008, 1, 0xab, 1);
    pa = map_sys(sp, root, 0x20000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &qa, 1, 2, 0x20000, st.len, 0);
    wait_qstatus(sp, 0, SPYRE_QS_SEM_WAIT);

    /* B adds 1 twice in separate jobs; A is blocked, B is not. */
    st.len = 0;
    emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, 0x10000, 1);
    pa = map_sys(sp, root, 0x30000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &qb, 1, 2, 0x30000, st.len, 0);
    wait_compl(sp, &qb, 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_sem), ==, 1);
    g_usleep(5000);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_SEM_WAIT);

    submit(sp, &qb, 2, 2, 0x30000, st.len, 0);
    wait_compl(sp, &qb, 2, &c);
    wait_compl(sp, &qa, 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmphex(qtest_readb(sp->qts, pa_sem + 8), ==, 0xab);

    /* A CPU store satisfies a wait too (the card re-polls). */
    st.len = 0;
    emit_sem(&st, SPYRE_OP_SEM_WAIT, 0, 0x10000, 100);
    pa = map_sys(sp, root, 0x40000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &qa, 2, 2, 0x40000, st.len, 0);
    wait_qstatus(sp, 0, SPYRE_QS_SEM_WAIT);
    qtest_writeq(sp->qts, pa_sem, 100);
    wait_compl(sp, &qa, 2, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    /* Plain store. */
    st.len = 0;
    emit_sem(&st, SPYRE_OP_SEM_SIGNAL, 0, 0x10000, 7);
    pa = map_sys(sp, root, 0x50000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &qb, 3, 2, 0x50000, st.len, 0);
    wait_compl(sp, &qb, 3, &c);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_sem), ==, 7);

    /* A queue reset releases a waiter. */
    submit(sp, &qa, 3, 2, 0x40000, 24, 0);
    wait_qstatus(sp, 0, SPYRE_QS_SEM_WAIT);
    qwr32(sp, 0, SPYRE_Q_RESET, 1);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    wait_compl(sp, &qa, 3, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_ABORTED);

    spyre_stop(sp);
}

static void check_reset_state(Spyre *sp)
{
    unsigned int q;

    g_assert_cmphex(rd32(sp, SPYRE_REG_ID), ==, SPYRE_ID_MAGIC);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_SCRATCH), ==, 0);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_CONTROL), ==, 0);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_IRQ_STATUS), ==, 0);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_IRQ_MASK), ==, 0);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_CTX_ROOT(0)), ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_JOBS), ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_FAULTS), ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_CLOCK), <, 1000000000ULL);
    for (q = 0; q < 8; q++) {
        g_assert_cmpuint(qrd32(sp, q, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
        g_assert_cmpuint(qrd32(sp, q, SPYRE_Q_HEAD), ==, 0);
        g_assert_cmpuint(qrd32(sp, q, SPYRE_Q_DOORBELL), ==, 0);
        g_assert_cmpuint(qrd32(sp, q, SPYRE_Q_CONTROL), ==, 0);
        g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(q, SPYRE_Q_RING_BASE)), ==,
                         0);
    }
}

/* Put the card in a busy, faulted, dirty state. */
static void dirty_state(Spyre *sp, TestQueue *tq)
{
    Stream st = { 0 };
    uint64_t root, pa;
    struct spyre_hw_completion c;

    wr32(sp, SPYRE_REG_SCRATCH, 0x1234);
    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
    root = ctx_create(sp, 0);
    pa = map_sys(sp, root, 0x1000, 1, false);
    emit_fill(&st, 0x9000, 1, 0, 1);        /* faults */
    stream_put(sp, pa, &st);
    queue_init(sp, tq, 0, 4, 1);
    queue_init(sp, tq + 1, 1, 4, 1);
    submit(sp, tq, 1, 0, 0x1000, st.len, 0);
    wait_compl(sp, tq, 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_MMU_FAULT);
    wr32(sp, SPYRE_REG_DBG_INJECT, 1 | SPYRE_DBG_HANG << 16);
    submit(sp, tq + 1, 1, 0, 0x1000, st.len, 0);
    wait_qstatus(sp, 1, SPYRE_QS_BUSY);
    qtest_clock_step(sp->qts, 2000000000LL);
}

static void test_global_reset(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq[2];
    Stream st = { 0 };
    uint64_t root, pa;

    dirty_state(sp, tq);
    wr32(sp, SPYRE_REG_RESET, 0x1234);      /* wrong magic: nothing */
    g_assert_cmpuint(rd32(sp, SPYRE_REG_SCRATCH), ==, 0x1234);
    wr32(sp, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
    check_reset_state(sp);
    /* The hung job is dropped without a completion. */
    g_usleep(5000);
    qtest_memread(sp->qts, tq[1].compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 0);

    /* The card works again after re-initialisation. */
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    root = ctx_create(sp, 0);
    pa = map_sys(sp, root, 0x1000, 1, false);
    emit_nop(&st);
    stream_put(sp, pa, &st);
    queue_init(sp, &tq[0], 0, 4, 1);
    submit(sp, &tq[0], 5, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq[0], 5, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    /* Jobs do not start while CONTROL.ENABLE is clear. */
    wr32(sp, SPYRE_REG_CONTROL, 0);
    submit(sp, &tq[0], 6, 0, 0x1000, st.len, 0);
    g_usleep(10000);
    qtest_memread(sp->qts, tq[0].compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 5);
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    wait_compl(sp, &tq[0], 6, &c);

    spyre_stop(sp);
}

static void test_flr(void)
{
    Spyre *sp = spyre_start(NULL);
    TestQueue tq[2];
    uint8_t cap = qpci_find_capability(sp->dev, PCI_CAP_ID_EXP, 0);
    uint64_t bar0 = sp->bar0.addr, bar2 = sp->bar2.addr;

    dirty_state(sp, tq);
    qpci_config_writew(sp->dev, cap + PCI_EXP_DEVCTL,
                       qpci_config_readw(sp->dev, cap + PCI_EXP_DEVCTL) |
                       PCI_EXP_DEVCTL_BCR_FLR);
    /* FLR clears the BARs: put them back where they were. */
    qpci_config_writel(sp->dev, PCI_BASE_ADDRESS_0, bar0);
    qpci_config_writel(sp->dev, PCI_BASE_ADDRESS_2, bar2);
    qpci_device_enable(sp->dev);
    check_reset_state(sp);
    spyre_stop(sp);
}

/* One worker, so the order in which queues run is the scheduler's. */
static void test_priority(void)
{
    /* strict priority: aging off, or a loaded host reorders the queues */
    Spyre *sp = spyre_start(",workers=1,age-ms=0");
    static const unsigned int prio[3] = {
        SPYRE_Q_PRIO_LOW, SPYRE_Q_PRIO_NORMAL, SPYRE_Q_PRIO_HIGH,
    };
    struct spyre_hw_completion c;
    TestQueue tq[3];
    uint64_t root, pa_cnt;
    unsigned int q, k;

    root = ctx_create(sp, 0);
    pa_cnt = map_sys(sp, root, 0x10000, 1, true);
    wr32(sp, SPYRE_REG_CONTROL, 0);
    for (q = 0; q < 3; q++) {
        queue_init(sp, &tq[q], q, 4, 1);
        qwr32(sp, q, SPYRE_Q_CONTROL, q_control(1, prio[q]));
        for (k = 0; k < 2; k++) {
            Stream st = { 0 };
            uint64_t va = 0x100000 + (q * 2 + k) * PAGE;
            uint64_t pa = map_sys(sp, root, va, 1, false);

            /* Count, and record the count in this job's slot. */
            emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, 0x10000, 1);
            emit_copy(&st, 0x10000, 0x10000 + 8 * (1 + q * 2 + k), 8, 1,
                      0, 0);
            stream_put(sp, pa, &st);
            submit(sp, &tq[q], k + 1, 0, va, st.len, 0);
        }
    }
    g_usleep(10000);
    g_assert_cmpuint(qtest_readq(sp->qts, pa_cnt), ==, 0);
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    for (q = 0; q < 3; q++) {
        wait_compl(sp, &tq[q], 2, &c);
        g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    }
    for (q = 0; q < 3; q++) {
        for (k = 0; k < 2; k++) {
            g_assert_cmpuint(qtest_readq(sp->qts,
                                         pa_cnt + 8 * (1 + q * 2 + k)), ==,
                             (2 - q) * 2 + k + 1);
        }
    }
    spyre_stop(sp);
}

static void wait_deleted(QTestState *qts, const char *id)
{
    for (;;) {
        QDict *resp = qtest_qmp_eventwait_ref(qts, "DEVICE_DELETED");
        QDict *data = qdict_get_qdict(resp, "data");
        const char *dev = data ? qdict_get_try_str(data, "device") : NULL;
        bool match = dev && !strcmp(dev, id);

        qobject_unref(resp);
        if (match) {
            return;
        }
    }
}

static void slot_power(Spyre *sp, bool on)
{
    uint8_t cap = qpci_find_capability(sp->rp, PCI_CAP_ID_EXP, 0);
    uint16_t ctl = qpci_config_readw(sp->rp, cap + PCI_EXP_SLTCTL);

    ctl &= ~(PCI_EXP_SLTCTL_PIC | PCI_EXP_SLTCTL_PCC);
    ctl |= on ? PCI_EXP_SLTCTL_PWR_IND_ON :
                PCI_EXP_SLTCTL_PWR_IND_OFF | PCI_EXP_SLTCTL_PCC;
    qpci_config_writew(sp->rp, cap + PCI_EXP_SLTCTL, ctl);
}

/*
 * Native PCIe hot-plug: unplug a busy card from a root port (the guest
 * answers the attention button by powering the slot off), then hot-plug
 * a new one.
 */
static void test_hotplug(void)
{
    Spyre *sp = spyre_start_full("-global ICH9-LPC.acpi-pci-hotplug-with-"
                                 "bridge-support=off", NULL, true);
    struct spyre_hw_completion c;
    TestQueue tq[3];
    Stream st = { 0 };
    uint64_t root, pa;
    unsigned int i;

    root = ctx_create(sp, 0);
    map_sys(sp, root, 0x10000, 1, true);
    for (i = 0; i < 3; i++) {
        queue_init(sp, &tq[i], i, 4, 1);
    }
    /* A long job: 2^15 broadcast 128^3 fp32 GEMMs (seconds of work). */
    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 128, 128, 128,
              1 << 15, 0x100000, 0x100000, 0x100000);
    map_sys(sp, root, 0x100000, 16, true);
    pa = map_sys(sp, root, 0x1000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &tq[0], 1, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    st.len = 0;
    emit_sem(&st, SPYRE_OP_SEM_WAIT, 0, 0x10000, 1);
    pa = map_sys(sp, root, 0x2000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &tq[1], 1, 0, 0x2000, st.len, SPYRE_JOB_F_IRQ);
    wr32(sp, SPYRE_REG_DBG_INJECT, 2 | SPYRE_DBG_HANG << 16);
    submit(sp, &tq[2], 1, 0, 0x2000, st.len, SPYRE_JOB_F_IRQ);
    wait_qstatus(sp, 1, SPYRE_QS_SEM_WAIT);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_BUSY);

    qtest_qmp_device_del_send(sp->qts, "sp0");
    slot_power(sp, false);                 /* the guest's answer */
    wait_deleted(sp->qts, "sp0");
    g_assert_cmphex(qpci_config_readw(sp->dev, PCI_VENDOR_ID), ==, 0xffff);

    qtest_qmp_device_add(sp->qts, "spyre", "sp1",
                         "{'bus': 'rp1', 'mem-size': %d, 'queues': 8}",
                         MEM_SIZE);
    slot_power(sp, true);
    spyre_attach(sp);
    g_assert_cmphex(rd32(sp, SPYRE_REG_ID), ==, SPYRE_ID_MAGIC);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_JOBS), ==, 0);
    sp->next_page = GUEST_POOL;
    root = ctx_create(sp, 0);
    pa = map_sys(sp, root, 0x1000, 1, false);
    st.len = 0;
    emit_nop(&st);
    stream_put(sp, pa, &st);
    queue_init(sp, &tq[0], 0, 4, 1);
    submit(sp, &tq[0], 9, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq[0], 9, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    qtest_qmp_device_del_send(sp->qts, "sp1");
    slot_power(sp, false);
    wait_deleted(sp->qts, "sp1");
    spyre_stop(sp);
}

/* ACPI hot-plug (q35's default for root ports): removal at reset. */
static void test_unplug_acpi(void)
{
    Spyre *sp = spyre_start_full(NULL, NULL, true);
    TestQueue tq;
    Stream st = { 0 };
    uint64_t root, pa;

    root = ctx_create(sp, 0);
    map_sys(sp, root, 0x10000, 1, true);
    emit_sem(&st, SPYRE_OP_SEM_WAIT, 0, 0x10000, 1);
    pa = map_sys(sp, root, 0x2000, 1, false);
    stream_put(sp, pa, &st);
    queue_init(sp, &tq, 0, 4, 1);
    submit(sp, &tq, 1, 0, 0x2000, st.len, SPYRE_JOB_F_IRQ);
    wait_qstatus(sp, 0, SPYRE_QS_SEM_WAIT);

    qtest_qmp_device_del_send(sp->qts, "sp0");
    qtest_system_reset_nowait(sp->qts);
    wait_deleted(sp->qts, "sp0");
    spyre_stop(sp);
}

/* Wait until @qts's migration (either side) ends; returns its status. */
static char *migration_wait(QTestState *qts)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    for (;;) {
        QDict *rsp = qtest_qmp(qts, "{'execute': 'query-migrate'}");
        QDict *ret = qdict_get_qdict(rsp, "return");
        const char *status = ret ? qdict_get_try_str(ret, "status") : NULL;

        if (status && (!strcmp(status, "completed") ||
                       !strcmp(status, "failed"))) {
            char *r = g_strdup(status);

            qobject_unref(rsp);
            return r;
        }
        qobject_unref(rsp);
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(1000);
    }
}

/* Migrate @src to a new VM listening on @uri; returns the final status. */
static char *migrate(Spyre *src, const char *uri)
{
    qtest_qmp_assert_success(src->qts, "{'execute': 'migrate',"
                             " 'arguments': {'uri': %s}}", uri);
    return migration_wait(src->qts);
}

static void test_migration(void)
{
    g_autofree char *uri = g_strdup_printf("unix:%s/spyre-mig-%d.sock",
                                           g_get_tmp_dir(), getpid());
    Spyre *src = spyre_start(NULL), *dst;
    struct spyre_hw_completion c;
    TestQueue tq[3];
    Stream st = { 0 }, st2 = { 0 };
    uint64_t root, pa, pa2, pa_sem, pa_out;
    g_autofree char *status = NULL;

    wr32(src, SPYRE_REG_SCRATCH, 0xfeedbeef);
    wr32(src, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_FAULT);
    root = ctx_create(src, 7);
    pa = map_sys(src, root, 0x1000, 1, false);
    pa2 = map_sys(src, root, 0x3000, 1, false);
    pa_out = map_sys(src, root, 0x10000, 1, true);
    pa_sem = map_sys(src, root, 0x20000, 1, true);
    emit_fill(&st, 0x10000, 16, 0x42, 1);
    stream_put(src, pa, &st);
    emit_sem(&st2, SPYRE_OP_SEM_WAIT, 0, 0x20000, 1);
    emit_fill(&st2, 0x10000, 16, 0x77, 1);
    stream_put(src, pa2, &st2);
    queue_init(src, &tq[0], 0, 4, 1);
    queue_init(src, &tq[1], 1, 8, 2);
    queue_init(src, &tq[2], 2, 4, 3);
    submit(src, &tq[0], 1, 7, 0x1000, st.len, 0);
    wait_compl(src, &tq[0], 1, &c);
    submit(src, &tq[1], 1, 7, 0x9000, 8, 0);      /* faults */
    wait_compl(src, &tq[1], 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_MMU_FAULT);
    wait_qstatus(src, 1, SPYRE_QS_ERROR);

    /*
     * Parked jobs migrate: one hung (by injection) and one waiting on a
     * semaphore, which resumes on the destination once it is signalled.
     */
    wr32(src, SPYRE_REG_DBG_INJECT, 0 | SPYRE_DBG_HANG << 16);
    submit(src, &tq[0], 2, 7, 0x1000, st.len, 0);
    wait_qstatus(src, 0, SPYRE_QS_BUSY);
    submit(src, &tq[2], 1, 7, 0x3000, st2.len, 0);
    wait_qstatus(src, 2, SPYRE_QS_SEM_WAIT);

    dst = spyre_start_vm(NULL, NULL, false, uri);
    status = migrate(src, uri);
    g_assert_cmpstr(status, ==, "completed");
    qtest_qmp_eventwait(dst->qts, "RESUME");
    dst->dev = qpci_device_find(dst->bus, SPYRE_DEVFN);
    dst->bar0 = src->bar0;
    dst->bar2 = src->bar2;
    dst->next_page = src->next_page;

    g_assert_cmphex(rd32(dst, SPYRE_REG_SCRATCH), ==, 0xfeedbeef);
    g_assert_cmphex(rd32(dst, SPYRE_REG_IRQ_MASK), ==, SPYRE_IRQ_FAULT);
    g_assert_cmphex(rd32(dst, SPYRE_REG_IRQ_STATUS), ==,
                    SPYRE_IRQ_FAULT | SPYRE_IRQ_QUEUE_ERROR);
    g_assert_cmpuint(rd32(dst, SPYRE_REG_FAULT_COUNT), ==, 1);
    g_assert_cmphex(rd64(dst, SPYRE_REG_FAULT_VA), ==, 0x9000);
    g_assert_cmpuint(rd64(dst, SPYRE_REG_TEL_JOBS), ==, 2);
    g_assert_cmpuint(qrd32(dst, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_BUSY);
    g_assert_cmpuint(qrd32(dst, 2, SPYRE_Q_STATUS), ==, SPYRE_QS_SEM_WAIT);
    g_assert_cmphex(qtest_readb(dst->qts, pa_out), ==, 0x42);
    qtest_writeq(dst->qts, pa_sem, 1);
    wait_compl(dst, &tq[2], 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmphex(qtest_readb(dst->qts, pa_out + 15), ==, 0x77);
    qwr32(dst, 0, SPYRE_Q_RESET, 1);
    wait_compl(dst, &tq[0], 2, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_ABORTED);
    queue_init(dst, &tq[0], 0, 4, 1);
    g_assert_cmpuint(qrd32(dst, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_IDLE);
    g_assert_cmpuint(qrd32(dst, 1, SPYRE_Q_STATUS), ==, SPYRE_QS_ERROR);
    g_assert_cmpuint(qrd32(dst, 1, SPYRE_Q_RING_ENTRIES), ==, 8);
    g_assert_cmpuint(rd64(dst, SPYRE_QUEUE_REG(1, SPYRE_Q_LAST_SEQNO)), ==,
                     1);

    /* The destination runs jobs with the page tables it received. */
    submit(dst, &tq[0], 3, 7, 0x1000, st.len, 0);
    wait_compl(dst, &tq[0], 3, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(qrd32(dst, 0, SPYRE_Q_HEAD), ==, 1);
    g_assert_cmphex(qtest_readb(dst->qts, pa_out), ==, 0x42);

    spyre_stop(dst);
    spyre_stop(src);
}

/* ---- compute commands ------------------------------------------------ */

/*
 * One context, one queue and a bump allocator of VAs: every buffer is
 * fresh system memory followed by an unmapped guard page.
 */
typedef struct Card {
    Spyre *sp;
    TestQueue tq;
    uint64_t root;
    uint64_t next_va;
    uint64_t seq;
    unsigned int ctx;
} Card;

typedef struct Buf {
    uint64_t va;
    uint64_t pa;
} Buf;

static void card_init(Card *cd, Spyre *sp, unsigned int ctx, unsigned int q)
{
    cd->sp = sp;
    cd->ctx = ctx;
    cd->root = ctx_create(sp, ctx);
    cd->next_va = 0x10000000;
    cd->seq = 0;
    queue_init(sp, &cd->tq, q, 8, 1);
}

static Buf buf_new(Card *cd, uint64_t size)
{
    unsigned int n = DIV_ROUND_UP(size, PAGE);
    Buf b = { .va = cd->next_va };

    b.pa = map_sys(cd->sp, cd->root, b.va, n, true);
    cd->next_va += (uint64_t)(n + 1) * PAGE;
    return b;
}

static Buf buf_put(Card *cd, const void *data, uint64_t size)
{
    Buf b = buf_new(cd, size);

    qtest_bufwrite(cd->sp->qts, b.pa, data, size);
    return b;
}

static Buf buf_f32(Card *cd, const float *v, unsigned int n)
{
    return buf_put(cd, v, n * sizeof(float));
}

static void buf_get(Card *cd, Buf b, void *data, uint64_t size)
{
    qtest_bufread(cd->sp->qts, b.pa, data, size);
}

/* Run @st as one job; on failure reset the queue for the next one. */
static uint32_t card_run(Card *cd, Stream *st, struct spyre_hw_completion *c)
{
    struct spyre_hw_completion dummy;
    uint32_t status;

    c = c ? c : &dummy;
    status = run_stream(cd->sp, &cd->tq, cd->ctx, cd->root,
                        buf_new(cd, PAGE).va, st, ++cd->seq, c);
    if (status != SPYRE_STATUS_OK) {
        wait_qstatus(cd->sp, cd->tq.id, SPYRE_QS_ERROR);
        qwr32(cd->sp, cd->tq.id, SPYRE_Q_RESET, 1);
        queue_init(cd->sp, &cd->tq, cd->tq.id, 8, 1);
    }
    st->len = 0;
    return status;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

/*
 * @f as IEEE binary16, rounded to nearest even (infinity past the largest
 * finite value): the reference for fp16 results, without _Float16, which
 * clang 14 (the TSan and fuzz builds) does not take on x86-64.
 */
static uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), man = u & 0x7fffff, h, rem, half;
    uint16_t sign = (u >> 16) & 0x8000;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    unsigned int shift;

    if (((u >> 23) & 0xff) == 0xff) {
        return sign | 0x7c00 | (man ? 0x200 : 0);
    }
    if (e >= 31) {
        return sign | 0x7c00;
    }
    if (e > 0) {
        man |= (uint32_t)e << 23;      /* exponent and fraction, 13 bits on */
        shift = 13;
    } else {
        man |= 0x800000;                /* a subnormal: units of 2^-24 */
        shift = 14 - e;
        if (shift > 24) {
            return sign;
        }
    }
    h = man >> shift;
    rem = man & ((1u << shift) - 1);
    half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) {
        h++;                            /* may carry into the exponent */
    }
    return sign | h;
}

static void assert_close(float got, float want)
{
    double tol = 0.00001 * MAX(1.0, fabs(want));

    g_assert_cmpfloat_with_epsilon(got, want, tol);
}

static struct spyre_cmd_copy *emit_cvt(Stream *st, Buf src, uint32_t sdt,
                                       Buf dst, uint32_t ddt, uint64_t n,
                                       uint16_t flags)
{
    struct spyre_cmd_copy *c = emit_copy(st, src.va, dst.va, n, 1, 0, 0);

    c->src_dtype = sdt;
    c->dst_dtype = ddt;
    c->hdr.flags = flags;
    return c;
}

/* COPY with dtype conversion: fp32 to every type and back. */
static void do_copy_convert(Card *cd)
{
    static const float in[8] = {
        1.0f, -2.0f, 0.5f, 3.0f, 1000.0f, 1e6f, -1e6f, NAN,
    };
    static const uint16_t want_fp16[8] = {
        0x3c00, 0xc000, 0x3800, 0x4200, 0x63d0, 0x7c00, 0xfc00,
    };
    static const uint16_t want_bf16[8] = {
        0x3f80, 0xc000, 0x3f00, 0x4040, 0x447a, 0x4974, 0xc974,
    };
    static const uint8_t want_e4m3[2][8] = {
        { 0x38, 0xc0, 0x30, 0x44, 0x7e, 0x7e, 0xfe, 0x7f },
        { 0x38, 0xc0, 0x30, 0x44, 0x7f, 0x7f, 0xff, 0x7f },  /* NOSAT */
    };
    static const uint8_t want_e5m2[2][8] = {
        { 0x3c, 0xc0, 0x38, 0x42, 0x64, 0x7b, 0xfb, 0x7f },
        { 0x3c, 0xc0, 0x38, 0x42, 0x64, 0x7c, 0xfc, 0x7f },  /* NOSAT */
    };
    static const int8_t want_int8[8] = { 1, -2, 0, 3, 127, 127, -128, 0 };
    static const uint8_t fp8_in[6] = { 0x38, 0xc0, 0x7e, 0x01, 0x80, 0x7f };
    static const float e4m3_out[5] = { 1.0f, -2.0f, 448.0f, 0.001953125f,
                                       -0.0f };
    static const float e5m2_out[5] = { 0.5f, -2.0f, NAN, 1.0f / 65536,
                                       -0.0f };
    Stream st = { 0 };
    Buf src = buf_f32(cd, in, 8), out = buf_new(cd, 64), back = buf_new(cd, 64);
    Buf b8 = buf_put(cd, fp8_in, sizeof(fp8_in));
    uint16_t h[8];
    uint8_t b[8];
    float f[8], g[16];
    unsigned int i, ns;

    /* fp32 -> fp16 -> fp32 */
    emit_cvt(&st, src, SPYRE_DTYPE_FP32, out, SPYRE_DTYPE_FP16, 8, 0);
    emit_cvt(&st, out, SPYRE_DTYPE_FP16, back, SPYRE_DTYPE_FP32, 8, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, out, h, sizeof(h));
    buf_get(cd, back, f, sizeof(f));
    for (i = 0; i < 7; i++) {
        g_assert_cmphex(h[i], ==, want_fp16[i]);
        if (i < 5) {
            g_assert_cmpfloat(f[i], ==, in[i]);
        }
    }
    g_assert_true((h[7] & 0x7c00) == 0x7c00 && (h[7] & 0x3ff));
    g_assert_true(isinf(f[5]) && f[5] > 0 && isnan(f[7]));

    /* fp32 -> bf16 -> fp32 */
    emit_cvt(&st, src, SPYRE_DTYPE_FP32, out, SPYRE_DTYPE_BF16, 8, 0);
    emit_cvt(&st, out, SPYRE_DTYPE_BF16, back, SPYRE_DTYPE_FP32, 8, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, out, h, sizeof(h));
    buf_get(cd, back, f, sizeof(f));
    for (i = 0; i < 7; i++) {
        g_assert_cmphex(h[i], ==, want_bf16[i]);
    }
    g_assert_cmpfloat(f[5], ==, 999424.0f);
    g_assert_true(isnan(f[7]));

    /* fp32 -> fp8 (both formats, saturating and NOSAT), int8 */
    for (ns = 0; ns < 2; ns++) {
        uint16_t fl = ns ? SPYRE_CMD_F_NOSAT : 0;

        emit_cvt(&st, src, SPYRE_DTYPE_FP32, out, SPYRE_DTYPE_FP8_E4M3, 8,
                 fl);
        g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
        buf_get(cd, out, b, 8);
        g_assert_cmpmem(b, 8, want_e4m3[ns], 8);
        emit_cvt(&st, src, SPYRE_DTYPE_FP32, out, SPYRE_DTYPE_FP8_E5M2, 8,
                 fl);
        g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
        buf_get(cd, out, b, 8);
        g_assert_cmpmem(b, 8, want_e5m2[ns], 8);
    }
    emit_cvt(&st, src, SPYRE_DTYPE_FP32, out, SPYRE_DTYPE_INT8, 8, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, out, b, 8);
    g_assert_cmpmem(b, 8, want_int8, 8);

    /* fp8 -> fp32, subnormals and NaN included; E5M2 -> E4M3 direct */
    emit_cvt(&st, b8, SPYRE_DTYPE_FP8_E4M3, out, SPYRE_DTYPE_FP32, 6, 0);
    emit_cvt(&st, b8, SPYRE_DTYPE_FP8_E5M2, back, SPYRE_DTYPE_FP32, 6, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, out, g, 6 * sizeof(float));
    buf_get(cd, back, g + 8, 6 * sizeof(float));
    for (i = 0; i < 5; i++) {
        g_assert_cmphex(f32_bits(g[i]), ==, f32_bits(e4m3_out[i]));
        if (i != 2) {
            g_assert_cmphex(f32_bits(g[8 + i]), ==, f32_bits(e5m2_out[i]));
        }
    }
    g_assert_true(isnan(g[5]) && isnan(g[10]) && isnan(g[13]));
    emit_cvt(&st, b8, SPYRE_DTYPE_FP8_E5M2, out, SPYRE_DTYPE_FP8_E4M3, 3, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, out, b, 3);
    g_assert_cmphex(b[0], ==, 0x30);      /* 0.5 */
    g_assert_cmphex(b[1], ==, 0xc0);      /* -2.0 */
    g_assert_cmphex(b[2], ==, 0x7f);      /* NaN */

    /* 2-D with pitches: 2 rows of 3 fp32 -> fp16, rows 16 and 8 apart. */
    {
        static const float m[8] = { 1, 2, 3, 99, 4, 5, 6, 99 };
        Buf s2 = buf_f32(cd, m, 8), d2 = buf_new(cd, 16);
        struct spyre_cmd_copy *c = emit_copy(&st, s2.va, d2.va, 3, 2, 16, 8);

        c->src_dtype = SPYRE_DTYPE_FP32;
        c->dst_dtype = SPYRE_DTYPE_FP16;
        g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
        buf_get(cd, d2, h, 16);
        g_assert_cmphex(h[0], ==, 0x3c00);
        g_assert_cmphex(h[2], ==, 0x4200);
        g_assert_cmphex(h[3], ==, 0);         /* gap untouched */
        g_assert_cmphex(h[4], ==, 0x4400);
        g_assert_cmphex(h[6], ==, 0x4600);
    }
}

/* Hand-checked GEMMs: fp32, transposes, lds, batch, bias, scales, amax. */
static void do_gemm_fp32(Card *cd)
{
    /* A 2x3, B 3x2: AB = [[58, 64], [139, 154]]. */
    static const float a[6] = { 1, 2, 3, 4, 5, 6 };
    static const float b[6] = { 7, 8, 9, 10, 11, 12 };
    /* A^T stored 3x2 with lda 4; B^T stored 2x3 with ldb 5. */
    static const float at[12] = { 1, 4, 0, 0, 2, 5, 0, 0, 3, 6, 0, 0 };
    static const float bt[10] = { 7, 9, 11, 0, 0, 8, 10, 12, 0, 0 };
    /* batch 1 of B: identity-ish, gives A's first two columns. */
    static const float b2[12] = { 7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0 };
    static const float c0[4] = { 1, -1, 2, -2 };
    static const float bias[2] = { 100, -300 };
    float sa = 0.5f, sb = 4.0f, c[12], amax;
    Buf ba = buf_f32(cd, a, 6), bb = buf_f32(cd, b, 6);
    Buf bat = buf_f32(cd, at, 12), bbt = buf_f32(cd, bt, 10);
    Buf bb2 = buf_f32(cd, b2, 12), bc = buf_new(cd, 64);
    Buf bbias = buf_f32(cd, bias, 2), bsa = buf_f32(cd, &sa, 1);
    Buf bsb = buf_f32(cd, &sb, 1), bamax = buf_new(cd, 4);
    struct spyre_cmd_gemm *g;
    Stream st = { 0 };

    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 2, 2, 3, 1, ba.va,
              bb.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, c, 16);
    g_assert_cmpfloat(c[0], ==, 58);
    g_assert_cmpfloat(c[1], ==, 64);
    g_assert_cmpfloat(c[2], ==, 139);
    g_assert_cmpfloat(c[3], ==, 154);

    /* Both transposed, ldc 3, C = 2 AB + 1 * C. */
    qtest_bufwrite(cd->sp->qts, bc.pa, (float[]){ 1, -1, 7, 2, -2, 7 }, 24);
    g = emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 2, 2, 3, 1,
                  bat.va, bbt.va, bc.va);
    g->hdr.flags = SPYRE_GEMM_F_TRANS_A | SPYRE_GEMM_F_TRANS_B;
    g->lda = 4;
    g->ldb = 5;
    g->ldc = 3;
    g->alpha = f32_bits(2.0f);
    g->beta = f32_bits(1.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, c, 24);
    g_assert_cmpfloat(c[0], ==, 117);
    g_assert_cmpfloat(c[1], ==, 127);
    g_assert_cmpfloat(c[2], ==, 7);       /* beyond N: untouched */
    g_assert_cmpfloat(c[3], ==, 280);
    g_assert_cmpfloat(c[4], ==, 306);
    g_assert_cmpfloat(c[5], ==, 7);

    /* Batch 2: A shared (stride 0), B and C strided. */
    g = emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 2, 2, 3, 2, ba.va,
                  bb2.va, bc.va);
    g->stride_b = 6;
    g->stride_c = 4;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, c, 32);
    g_assert_cmpfloat(c[0], ==, 58);
    g_assert_cmpfloat(c[3], ==, 154);
    g_assert_cmpfloat(c[4], ==, 1);
    g_assert_cmpfloat(c[5], ==, 2);
    g_assert_cmpfloat(c[6], ==, 4);
    g_assert_cmpfloat(c[7], ==, 5);

    /* Scales (0.5 * 4), alpha 1.5, beta -1, bias, amax. */
    qtest_bufwrite(cd->sp->qts, bc.pa, c0, 16);
    g = emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 2, 2, 3, 1, ba.va,
                  bb.va, bc.va);
    g->alpha = f32_bits(1.5f);
    g->beta = f32_bits(-1.0f);
    g->scale_a = bsa.va;
    g->scale_b = bsb.va;
    g->bias_dtype = SPYRE_DTYPE_FP32;
    g->bias = bbias.va;
    g->amax = bamax.va;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, c, 16);
    g_assert_cmpfloat(c[0], ==, 3 * 58 - 1 + 100);
    g_assert_cmpfloat(c[1], ==, 3 * 64 + 1 - 300);
    g_assert_cmpfloat(c[2], ==, 3 * 139 - 2 + 100);
    g_assert_cmpfloat(c[3], ==, 3 * 154 + 2 - 300);
    buf_get(cd, bamax, &amax, 4);
    g_assert_cmpfloat(amax, ==, 3 * 139 - 2 + 100);
}

static void do_gemm_lowp(Card *cd)
{
    static const uint16_t a16[4] = { 0x3c00, 0x4000, 0x4200, 0x4400 };
    static const uint16_t b16[4] = { 0x3800, 0xbc00, 0x4000, 0x3400 };
    static const uint16_t ab16[4] = { 0x3f80, 0x4000, 0x4040, 0x4080 };
    static const uint16_t bb16[4] = { 0x3f00, 0xbf80, 0x4000, 0x3e80 };
    static const int8_t a8[4] = { 1, -2, 127, -128 };
    static const int8_t b8[4] = { 3, 4, 5, -6 };
    static const int32_t c8[4] = { 1, 1, 1, 1 };
    static const uint8_t e4[2] = { 0x38, 0x40 };      /* 1, 2 */
    static const uint8_t e5[2] = { 0x38, 0x42 };      /* 0.5, 3 */
    float sa = 2.0f, amax, f;
    Buf pa16 = buf_put(cd, a16, 8), pb16 = buf_put(cd, b16, 8);
    Buf pab16 = buf_put(cd, ab16, 8), pbb16 = buf_put(cd, bb16, 8);
    Buf pa8 = buf_put(cd, a8, 4), pb8 = buf_put(cd, b8, 4);
    Buf pe4 = buf_put(cd, e4, 2), pe5 = buf_put(cd, e5, 2);
    Buf bsa = buf_f32(cd, &sa, 1), bc = buf_new(cd, 64);
    Buf bamax = buf_new(cd, 4);
    struct spyre_cmd_gemm *g;
    Stream st = { 0 };
    uint16_t h[4];
    int32_t i32[4];

    /* fp16 [[1,2],[3,4]] x [[0.5,-1],[2,0.25]] = [[4.5,-0.5],[9.5,-2]] */
    emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16, 2, 2, 2, 1, pa16.va,
              pb16.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, h, 8);
    g_assert_cmphex(h[0], ==, 0x4480);
    g_assert_cmphex(h[1], ==, 0xb800);
    g_assert_cmphex(h[2], ==, 0x48c0);
    g_assert_cmphex(h[3], ==, 0xc000);

    /* The same in bf16, written as bf16. */
    emit_gemm(&st, SPYRE_DTYPE_BF16, SPYRE_DTYPE_BF16, 2, 2, 2, 1, pab16.va,
              pbb16.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, h, 8);
    g_assert_cmphex(h[0], ==, 0x4090);
    g_assert_cmphex(h[1], ==, 0xbf00);
    g_assert_cmphex(h[2], ==, 0x4118);
    g_assert_cmphex(h[3], ==, 0xc000);

    /* int8 -> int32, beta 1, amax. */
    qtest_bufwrite(cd->sp->qts, bc.pa, c8, 16);
    g = emit_gemm(&st, SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32, 2, 2, 2, 1,
                  pa8.va, pb8.va, bc.va);
    g->beta = f32_bits(1.0f);
    g->alpha = f32_bits(5.0f);        /* ignored */
    g->amax = bamax.va;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, i32, 16);
    g_assert_cmpint(i32[0], ==, -6);
    g_assert_cmpint(i32[1], ==, 17);
    g_assert_cmpint(i32[2], ==, -258);
    g_assert_cmpint(i32[3], ==, 1277);
    buf_get(cd, bamax, &amax, 4);
    g_assert_cmpfloat(amax, ==, 1277);

    /* Mixed fp8: E4M3 [1, 2] x E5M2 [0.5; 3] * scale_a 2 = 13. */
    g = emit_gemm(&st, SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP32, 1, 1, 2, 1,
                  pe4.va, pe5.va, bc.va);
    g->b_dtype = SPYRE_DTYPE_FP8_E5M2;
    g->ldb = 1;
    g->scale_a = bsa.va;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, &f, 4);
    g_assert_cmpfloat(f, ==, 13);

    /* Unsupported combinations. */
    g = emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32, 2, 2, 2, 1,
                  pa16.va, pb16.va, bc.va);
    g->b_dtype = SPYRE_DTYPE_BF16;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    emit_gemm(&st, SPYRE_DTYPE_INT8, SPYRE_DTYPE_FP32, 2, 2, 2, 1, pa8.va,
              pb8.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_INT32, 2, 2, 2, 1, pa8.va,
              pb8.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    g = emit_gemm(&st, SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP32, 1, 1, 2, 1,
                  pe4.va, pa8.va, bc.va);
    g->b_dtype = SPYRE_DTYPE_INT8;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    g = emit_gemm(&st, SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32, 2, 2, 2, 1,
                  pa8.va, pb8.va, bc.va);
    g->beta = f32_bits(0.5f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    g = emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16, 2, 2, 2, 1,
                  pa16.va, pb16.va, bc.va);
    g->bias_dtype = SPYRE_DTYPE_INT8;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    g = emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16, 2, 2, 2, 1,
                  pa16.va, pb16.va, bc.va);
    g->lda = 1;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    g = emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16, 2, 2, 2, 1,
                  pa16.va, pb16.va, bc.va);
    g->hdr.flags = 1 << 3;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_COMMAND);
    /* 2^37 multiply-adds: LIMIT before the span overflow check. */
    emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16, 1 << 16, 1 << 16,
              1 << 5, 1, UINT64_MAX - 8, 0, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_LIMIT);
    /* A running past the 64-bit space. */
    emit_gemm(&st, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16, 2, 2, 2, 1,
              UINT64_MAX - 4, pb16.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
}

/*
 * Byte COPYs in batches (spyre-copy.c): over 1 MiB (split across workers)
 * from system memory whose pages are mapped in reverse order (one piece
 * per page) to device memory, back to contiguous system memory, and
 * device to device; then a copy that runs into an unmapped page: the
 * pages before it are copied, the fault names its first byte.
 */
static void do_copy_bulk(Card *cd)
{
    const unsigned int n = 272;                 /* 1 MiB + 64 KiB */
    const uint64_t size = (uint64_t)n * PAGE, off = 8 << 20;
    Spyre *sp = cd->sp;
    struct spyre_hw_completion c;
    g_autofree uint8_t *pat = g_malloc(size);
    g_autofree uint8_t *got = g_malloc(size);
    uint64_t src_va = cd->next_va, src_pa, dev_va, dev2_va;
    Stream st = { 0 };
    Buf back, part;
    unsigned int i;

    src_pa = page_alloc(sp, n);
    for (i = 0; i < n; i++) {
        pt_map(sp, cd->root, src_va + (uint64_t)i * PAGE,
               (src_pa + (uint64_t)(n - 1 - i) * PAGE) | SPYRE_PTE_VALID);
    }
    cd->next_va += size + PAGE;
    for (i = 0; i < size; i++) {
        pat[i] = (uint8_t)(i * 7 + (i >> 12));
    }
    for (i = 0; i < n; i++) {
        qtest_bufwrite(sp->qts, src_pa + (uint64_t)(n - 1 - i) * PAGE,
                       pat + (uint64_t)i * PAGE, PAGE);
    }
    dev_va = cd->next_va;
    map_dev(sp, cd->root, dev_va, off, n);
    dev2_va = dev_va + size + PAGE;
    map_dev(sp, cd->root, dev2_va, off + size, n);
    cd->next_va = dev2_va + size + PAGE;
    back = buf_new(cd, size);

    emit_copy(&st, src_va, dev_va, size, 1, 0, 0);
    emit_copy(&st, dev_va, dev2_va, size, 1, 0, 0);
    emit_copy(&st, dev2_va + 1, back.va + 1, size - 2, 1, 0, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, back, got, size);
    g_assert_cmpuint(got[0], ==, 0);
    g_assert_cmpuint(got[size - 1], ==, 0);
    g_assert_cmpint(memcmp(got + 1, pat + 1, size - 2), ==, 0);

    /* Three pages mapped, then the guard page. */
    part = buf_new(cd, 3 * PAGE);
    emit_copy(&st, src_va, part.va + 100, 4 * PAGE, 1, 0, 0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_MMU_FAULT);
    g_assert_cmphex(c.error_va, ==, part.va + 3 * PAGE);
    buf_get(cd, part, got, 3 * PAGE);
    g_assert_cmpuint(got[99], ==, 0);
    g_assert_cmpint(memcmp(got + 100, pat, 3 * PAGE - 100), ==, 0);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 1);
    wr32(sp, SPYRE_REG_FAULT_POP, 1);
}

static void do_vector_ops(Card *cd)
{
    static const float x[4] = { 1.0f, -2.0f, 0.5f, 3.0f };
    static const float one[4] = { 1, 1, 1, 1 };
    static const float m23[8] = { 1, 2, 3, 0, 4, -5, 6, 0 };
    static const float ln[4] = { 1, 2, 3, 4 };
    static const float gam[4] = { 2, 2, 2, 2 };
    static const uint16_t xh[4] = { 0x3c00, 0xc000, 0x3800, 0x4200 };
    Buf bx = buf_f32(cd, x, 4), b1 = buf_f32(cd, one, 4);
    Buf bm = buf_f32(cd, m23, 8), bln = buf_f32(cd, ln, 4);
    Buf bg = buf_f32(cd, gam, 4), bxh = buf_put(cd, xh, 8);
    Buf bo = buf_new(cd, 64);
    struct spyre_cmd_eltwise *el;
    struct spyre_cmd_reduce *rd;
    struct spyre_cmd_rowop *ro;
    Stream st = { 0 };
    float o[4];
    uint16_t h[4];
    unsigned int i;

#define ELT(op_, dt_, a_, b_, n_, alpha_) do {                            \
        el = emit(&st, SPYRE_OP_ELTWISE, sizeof(*el));                    \
        spyre_cmd_eltwise_init(el, (op_), (dt_), (n_), bo.va, (a_), (b_), \
                               f32_bits(alpha_));                         \
    } while (0)

    ELT(SPYRE_ELT_ADD, SPYRE_DTYPE_FP32, bx.va, b1.va, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    g_assert_cmpfloat(o[0], ==, 2);
    g_assert_cmpfloat(o[1], ==, -1);
    g_assert_cmpfloat(o[3], ==, 4);
    ELT(SPYRE_ELT_MUL, SPYRE_DTYPE_FP32, bx.va, bx.va, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    g_assert_cmpfloat(o[1], ==, 4);
    g_assert_cmpfloat(o[2], ==, 0.25);
    ELT(SPYRE_ELT_SCALE, SPYRE_DTYPE_FP32, bx.va, 0, 4, 3.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    g_assert_cmpfloat(o[1], ==, -6);
    ELT(SPYRE_ELT_RELU, SPYRE_DTYPE_FP32, bx.va, 0, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    g_assert_cmpfloat(o[0], ==, 1);
    g_assert_cmpfloat(o[1], ==, 0);
    g_assert_cmpfloat(o[3], ==, 3);
    ELT(SPYRE_ELT_GELU, SPYRE_DTYPE_FP32, bx.va, 0, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    assert_close(o[0], 0.8413447f);
    assert_close(o[1], -0.0455003f);
    ELT(SPYRE_ELT_SILU, SPYRE_DTYPE_FP32, bx.va, 0, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    assert_close(o[0], 0.7310586f);
    assert_close(o[3], 2.8577223f);
    ELT(SPYRE_ELT_EXP, SPYRE_DTYPE_FP32, bx.va, 0, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    assert_close(o[0], 2.7182818f);
    assert_close(o[1], 0.1353353f);
    /* fp16 in place: x * x */
    ELT(SPYRE_ELT_MUL, SPYRE_DTYPE_FP16, bxh.va, bxh.va, 4, 0);
    el->out = bxh.va;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bxh, h, 8);
    g_assert_cmphex(h[0], ==, 0x3c00);
    g_assert_cmphex(h[1], ==, 0x4400);
    g_assert_cmphex(h[2], ==, 0x3400);
    g_assert_cmphex(h[3], ==, 0x4880);
    ELT(SPYRE_ELT_ADD, SPYRE_DTYPE_INT8, bx.va, b1.va, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    ELT(8, SPYRE_DTYPE_FP32, bx.va, b1.va, 4, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    ELT(SPYRE_ELT_ADD, SPYRE_DTYPE_FP32, bx.va, b1.va, 1ULL << 31, 0);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_LIMIT);
#undef ELT

    /* REDUCE of [[1, 2, 3], [4, -5, 6]] (ld 4). */
    for (i = SPYRE_REDUCE_SUM; i <= SPYRE_REDUCE_MAX; i++) {
        rd = emit(&st, SPYRE_OP_REDUCE, sizeof(*rd));
        spyre_cmd_reduce_init(rd, i, SPYRE_DTYPE_FP32, 2, 3, bo.va, bm.va, 4);
        g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
        buf_get(cd, bo, o, 8);
        g_assert_cmpfloat(o[0], ==, i == SPYRE_REDUCE_SUM ? 6 : 3);
        g_assert_cmpfloat(o[1], ==, i == SPYRE_REDUCE_SUM ? 5 : 6);
    }
    rd = emit(&st, SPYRE_OP_REDUCE, sizeof(*rd));
    rd->op = 3;
    rd->dtype = SPYRE_DTYPE_FP32;
    rd->rows = rd->cols = rd->ld = 1;
    rd->src = rd->dst = bo.va;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);

#define ROW(op_, src_, dst_, rows_, cols_, g_, b_, eps_) do {             \
        ro = emit(&st, SPYRE_OP_ROWOP, sizeof(*ro));                      \
        spyre_cmd_rowop_init(ro, (op_), SPYRE_DTYPE_FP32, (rows_), (cols_), \
                             (dst_), (cols_), (src_), (cols_), (g_), (b_),  \
                             f32_bits(eps_));                             \
    } while (0)

    ROW(SPYRE_ROW_SOFTMAX, b1.va, bo.va, 1, 4, bg.va, 0, 0.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    for (i = 0; i < 4; i++) {
        g_assert_cmpfloat(o[i], ==, 0.25);    /* gamma ignored */
    }
    ROW(SPYRE_ROW_SOFTMAX, bx.va, bo.va, 2, 2, 0, 0, 0.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    assert_close(o[0], 0.9525741f);
    assert_close(o[1], 0.0474259f);
    assert_close(o[2], 0.0758582f);
    assert_close(o[3], 0.9241418f);
    ROW(SPYRE_ROW_LAYERNORM, bln.va, bo.va, 1, 4, 0, 0, 0.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 16);
    assert_close(o[0], -1.3416408f);
    assert_close(o[2], 0.4472136f);
    /* In place, with gamma 2 and beta 1. */
    ROW(SPYRE_ROW_LAYERNORM, bln.va, bln.va, 1, 4, bg.va, b1.va, 0.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bln, o, 16);
    assert_close(o[0], -1.6832816f);
    assert_close(o[3], 3.6832816f);
    ROW(SPYRE_ROW_RMSNORM, bx.va + 8, bo.va, 1, 2, bg.va, b1.va, 0.0f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bo, o, 8);
    assert_close(o[0], 0.5f / sqrtf(4.625f) * 2);   /* beta ignored */
    assert_close(o[1], 3.0f / sqrtf(4.625f) * 2);
    ROW(SPYRE_ROW_LAYERNORM, bln.va, bo.va, 1, 4, 0, 0, -0.00001f);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    ROW(SPYRE_ROW_RMSNORM, bln.va, bo.va, 1, 4, 0, 0, NAN);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_OPERAND);
    ROW(SPYRE_ROW_LAYERNORM, bln.va, bo.va, 1, 4, 0, 0, 0.0f);
    ro->pad = 1;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==,
                     SPYRE_STATUS_INVALID_COMMAND);
#undef ROW
}

/*
 * GEMMs large enough to be split across the workers, checked against a
 * reference on small integers (exact in fp32); then an operand that runs
 * past its mapping.
 */
static void do_gemm_parts(Card *cd)
{
    const uint32_t m = 192, n = 320, k = 256;
    float *a = g_new(float, m * k), *b = g_new(float, k * n);
    float *c = g_new(float, m * n);
    int8_t *a8 = g_new(int8_t, 256 * 256), *b8 = g_new(int8_t, 256 * 256);
    int32_t *c32 = g_new(int32_t, 256 * 256);
    struct spyre_hw_completion cpl;
    struct spyre_cmd_gemm *g;
    Stream st = { 0 };
    uint64_t info;
    uint32_t i, j, kk;
    Buf ba, bb, bc;

    for (i = 0; i < m * k; i++) {
        a[i] = (float)((int)(i * 7 % 13) - 6);
    }
    for (i = 0; i < k * n; i++) {
        b[i] = (float)((int)(i * 5 % 11) - 5);
    }
    ba = buf_f32(cd, a, m * k);
    bb = buf_f32(cd, b, k * n);
    bc = buf_new(cd, (uint64_t)m * n * 4);
    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, m, n, k, 1, ba.va,
              bb.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, c, (uint64_t)m * n * 4);
    for (i = 0; i < m; i++) {
        for (j = 0; j < n; j++) {
            float ref = 0;

            for (kk = 0; kk < k; kk++) {
                ref += a[i * k + kk] * b[kk * n + j];
            }
            g_assert_cmpfloat(c[i * n + j], ==, ref);
        }
    }

    for (i = 0; i < 256 * 256; i++) {
        a8[i] = (int8_t)(i * 37 + 11);
        b8[i] = (int8_t)(i * 101 + 3);
    }
    ba = buf_put(cd, a8, 256 * 256);
    bb = buf_put(cd, b8, 256 * 256);
    bc = buf_new(cd, 256 * 256 * 4);
    g = emit_gemm(&st, SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32, 256, 256, 256, 1,
                  ba.va, bb.va, bc.va);
    g->hdr.flags = SPYRE_GEMM_F_TRANS_B;
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    buf_get(cd, bc, c32, 256 * 256 * 4);
    for (i = 0; i < 256; i++) {
        for (j = 0; j < 256; j++) {
            int32_t ref = 0;

            for (kk = 0; kk < 256; kk++) {
                ref += a8[i * 256 + kk] * b8[j * 256 + kk];
            }
            g_assert_cmpint(c32[i * 256 + j], ==, ref);
        }
    }

    /*
     * A of 192 x 256 fp32 read as 200 rows: rows 192.. are in the guard
     * page after A, the first unmapped VA is the end of A.
     */
    ba = buf_f32(cd, a, m * k);
    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, m + 8, n, k, 1, ba.va,
              bb.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, &cpl), ==, SPYRE_STATUS_MMU_FAULT);
    g_assert_cmphex(cpl.error_va, ==, ba.va + (uint64_t)m * k * 4);
    g_assert_cmpuint(rd32(cd->sp, SPYRE_REG_FAULT_COUNT), ==, 1);
    g_assert_cmphex(rd64(cd->sp, SPYRE_REG_FAULT_VA), ==, cpl.error_va);
    info = rd64(cd->sp, SPYRE_REG_FAULT_INFO);
    g_assert_cmpuint(SPYRE_FAULT_INFO_WRITE(info), ==, 0);
    g_assert_cmpuint(SPYRE_FAULT_INFO_REASON(info), ==, SPYRE_FAULT_UNMAPPED);
    wr32(cd->sp, SPYRE_REG_FAULT_POP, 1);

    /* C written into a read-only page: a write fault at C. */
    bc.va = buf_new(cd, PAGE).va + PAGE * 2;
    map_sys(cd->sp, cd->root, bc.va, 1, false);
    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 4, 4, 4, 1, ba.va,
              ba.va, bc.va);
    g_assert_cmpuint(card_run(cd, &st, &cpl), ==, SPYRE_STATUS_MMU_FAULT);
    g_assert_cmphex(cpl.error_va, ==, bc.va);
    info = rd64(cd->sp, SPYRE_REG_FAULT_INFO);
    g_assert_cmpuint(SPYRE_FAULT_INFO_WRITE(info), ==, 1);
    g_assert_cmpuint(SPYRE_FAULT_INFO_REASON(info), ==, SPYRE_FAULT_READONLY);
    wr32(cd->sp, SPYRE_REG_FAULT_POP, 1);
    cd->next_va += 4 * PAGE;

    g_free(a);
    g_free(b);
    g_free(c);
    g_free(a8);
    g_free(b8);
    g_free(c32);
}

/* Wait until the card has moved more than @bytes bytes in all. */
static void wait_bytes_above(Spyre *sp, uint64_t bytes)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    while (rd64(sp, SPYRE_REG_TEL_BYTES) <= bytes) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(1000);
    }
}

/*
 * A GEMM split across all workers (2^36 multiply-adds, seconds of work)
 * is aborted by a queue reset; the queue then works again.  Then the same
 * under a device reset.
 */
static void do_gemm_resets(Card *cd)
{
    Spyre *sp = cd->sp;
    struct spyre_hw_completion c;
    Buf m = buf_new(cd, 128 * 128 * 4);
    Stream st = { 0 }, big = { 0 };
    uint64_t va;
    unsigned int i;

    emit_gemm(&big, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 128, 128, 128,
              1 << 15, m.va, m.va, m.va);
    va = buf_new(cd, PAGE).va;
    stream_put(sp, map_sys(sp, cd->root, va + 2 * PAGE, 1, false), &big);
    cd->next_va += 4 * PAGE;
    for (i = 0; i < 2; i++) {
        uint64_t bytes = rd64(sp, SPYRE_REG_TEL_BYTES);

        submit(sp, &cd->tq, ++cd->seq, cd->ctx, va + 2 * PAGE, big.len, 0);
        wait_qstatus(sp, cd->tq.id, SPYRE_QS_BUSY);
        wait_bytes_above(sp, bytes + (1 << 20));
        if (i == 0) {
            qwr32(sp, cd->tq.id, SPYRE_Q_RESET, 1);
            wait_compl(sp, &cd->tq, cd->seq, &c);
            g_assert_cmpuint(c.status, ==, SPYRE_STATUS_ABORTED);
            queue_init(sp, &cd->tq, cd->tq.id, 8, 1);
            emit_nop(&st);
            g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
        } else {
            wr32(sp, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
            g_assert_cmpuint(qrd32(sp, cd->tq.id, SPYRE_Q_STATUS), ==,
                             SPYRE_QS_DISABLED);
            bytes = rd64(sp, SPYRE_REG_TEL_BYTES);
            g_usleep(20000);
            g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_BYTES), ==, bytes);
        }
    }
}

/*
 * Hostile compute commands: random but mostly well-formed commands (any
 * dtype, shapes up to 80, leading dimensions, strides, flags), operands
 * anywhere in or past a 16-page buffer, and one word in three commands
 * replaced by a random value.  Every job must end with a status and the
 * card must keep working.
 */
static uint32_t fz_dt(GRand *r)
{
    return g_rand_int_range(r, 0, 3) ? g_rand_int_range(r, 2, 5) :
                                       g_rand_int_range(r, 0, 10);
}

static uint32_t fz_n(GRand *r)
{
    return g_rand_int_range(r, 0, 8) ? g_rand_int_range(r, 1, 81) :
                                       g_rand_int(r);
}

static void do_fuzz(Card *cd)
{
    Buf b = buf_new(cd, 16 * PAGE);
    GRand *r = g_rand_new_with_seed(0x5eed);
    struct spyre_hw_completion c;
    Stream st = { 0 };
    unsigned int i, counts[16] = { 0 };

#define FZ_VA() (b.va + g_rand_int_range(r, 0, 17 * PAGE))
    for (i = 0; i < 400; i++) {
        struct spyre_cmd_header *h = NULL;

        switch (g_rand_int_range(r, 0, 5)) {
        case 0: {
            struct spyre_cmd_copy *cp = emit_copy(&st, FZ_VA(), FZ_VA(),
                                                  fz_n(r), fz_n(r),
                                                  g_rand_int_range(r, 0, 400),
                                                  g_rand_int_range(r, 0, 400));
            cp->src_dtype = fz_dt(r);
            cp->dst_dtype = fz_dt(r);
            cp->hdr.flags = g_rand_int_range(r, 0, 2);
            h = &cp->hdr;
            break;
        }
        case 1: {
            struct spyre_cmd_gemm *g;

            g = emit_gemm(&st, fz_dt(r), fz_dt(r), fz_n(r), fz_n(r), fz_n(r),
                          g_rand_int_range(r, 1, 4), FZ_VA(), FZ_VA(),
                          FZ_VA());
            g->b_dtype = g_rand_int_range(r, 0, 2) ? g->a_dtype : fz_dt(r);
            g->hdr.flags = g_rand_int_range(r, 0, 8);
            g->lda += g_rand_int_range(r, 0, 80);
            g->ldb += g_rand_int_range(r, 0, 80);
            g->ldc += g_rand_int_range(r, 0, 80);
            g->stride_a = g_rand_int_range(r, 0, 4000);
            g->stride_b = g_rand_int_range(r, 0, 4000);
            g->stride_c = g_rand_int_range(r, 0, 8000);
            g->beta = g_rand_int_range(r, 0, 2) ? f32_bits(1.0f) : 0;
            if (g_rand_int_range(r, 0, 2)) {
                g->bias_dtype = fz_dt(r);
                g->bias = FZ_VA();
            }
            g->scale_a = g_rand_int_range(r, 0, 2) ? FZ_VA() : 0;
            g->amax = g_rand_int_range(r, 0, 2) ? FZ_VA() : 0;
            h = &g->hdr;
            break;
        }
        case 2: {
            struct spyre_cmd_eltwise *el = emit(&st, SPYRE_OP_ELTWISE,
                                                sizeof(*el));

            el->op = g_rand_int_range(r, 0, 9);
            el->dtype = fz_dt(r);
            el->count = fz_n(r) * g_rand_int_range(r, 1, 40);
            el->a = FZ_VA();
            el->b = FZ_VA();
            el->out = FZ_VA();
            el->alpha = g_rand_int(r);
            h = &el->hdr;
            break;
        }
        case 3: {
            struct spyre_cmd_reduce *rd = emit(&st, SPYRE_OP_REDUCE,
                                               sizeof(*rd));

            rd->op = g_rand_int_range(r, 0, 4);
            rd->dtype = fz_dt(r);
            rd->rows = fz_n(r);
            rd->cols = fz_n(r) * g_rand_int_range(r, 1, 40);
            rd->ld = rd->cols + g_rand_int_range(r, 0, 9);
            rd->src = FZ_VA();
            rd->dst = FZ_VA();
            h = &rd->hdr;
            break;
        }
        default: {
            struct spyre_cmd_rowop *ro = emit(&st, SPYRE_OP_ROWOP,
                                              sizeof(*ro));

            ro->op = g_rand_int_range(r, 0, 5);
            ro->dtype = fz_dt(r);
            ro->rows = fz_n(r);
            ro->cols = fz_n(r) * g_rand_int_range(r, 1, 40);
            ro->ld_src = ro->cols + g_rand_int_range(r, 0, 9);
            ro->ld_dst = ro->cols + g_rand_int_range(r, 0, 9);
            ro->src = FZ_VA();
            ro->dst = g_rand_int_range(r, 0, 2) ? ro->src : FZ_VA();
            ro->gamma = g_rand_int_range(r, 0, 2) ? FZ_VA() : 0;
            ro->beta = g_rand_int_range(r, 0, 2) ? FZ_VA() : 0;
            ro->eps = f32_bits(g_rand_int_range(r, 0, 8) ? 0.00001f : -1.0f);
            h = &ro->hdr;
            break;
        }
        }
        if (g_rand_int_range(r, 0, 3) == 0) {
            uint32_t *w = (uint32_t *)h;

            w[g_rand_int_range(r, 2, h->size / 4)] = g_rand_int(r);
        }
        counts[card_run(cd, &st, &c) & 15]++;
    }
#undef FZ_VA
    for (i = 0; i < 16; i++) {
        if (counts[i]) {
            g_test_message("fuzz: status %u x %u", i, counts[i]);
        }
    }
    g_assert_cmpuint(counts[SPYRE_STATUS_OK], >, 40);
    g_assert_cmpuint(counts[SPYRE_STATUS_MMU_FAULT], >, 40);
    while (rd32(cd->sp, SPYRE_REG_FAULT_COUNT)) {
        wr32(cd->sp, SPYRE_REG_FAULT_POP, 1);
    }
    emit_nop(&st);
    g_assert_cmpuint(card_run(cd, &st, NULL), ==, SPYRE_STATUS_OK);
    g_rand_free(r);
}

/* All compute commands on one card (4 workers, GEMMs split in parts). */
static void test_compute(void)
{
    Spyre *sp = spyre_start(NULL);
    Card cd;

    card_init(&cd, sp, 4, 2);
    do_copy_convert(&cd);
    do_copy_bulk(&cd);
    do_gemm_fp32(&cd);
    do_gemm_lowp(&cd);
    do_vector_ops(&cd);
    do_gemm_parts(&cd);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 0);
    do_fuzz(&cd);
    do_gemm_resets(&cd);
    spyre_stop(sp);
}

/*
 * Preemption at tile boundaries: with a single worker, a high-priority
 * NOP completes while a long low-priority GEMM still runs.
 */
static void test_preempt(void)
{
    Spyre *sp = spyre_start(",workers=1");
    struct spyre_hw_completion c;
    TestQueue lo, hi, eq;
    Stream st = { 0 }, nop = { 0 };
    uint64_t root, pa, pa_cnt, t0, t1;
    unsigned int i;

    root = ctx_create(sp, 0);
    map_sys(sp, root, 0x1000000, 256, true);      /* 1 MiB: 512x512 fp32 */
    queue_init(sp, &lo, 0, 4, 1);
    queue_init(sp, &hi, 1, 4, 2);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, SPYRE_Q_PRIO_LOW));
    qwr32(sp, 1, SPYRE_Q_CONTROL, q_control(2, SPYRE_Q_PRIO_HIGH));
    pa = map_sys(sp, root, 0x1000, 1, false);
    emit_nop(&nop);
    stream_put(sp, pa, &nop);

    /* 64 broadcast 512^3 fp32 GEMMs: seconds of work on one worker. */
    emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 512, 512, 512, 64,
              0x1000000, 0x1000000, 0x1000000);
    pa = map_sys(sp, root, 0x2000, 1, false);
    stream_put(sp, pa, &st);
    submit(sp, &lo, 1, 0, 0x2000, st.len, 0);
    wait_qstatus(sp, 0, SPYRE_QS_BUSY);
    g_usleep(20000);

    t0 = g_get_monotonic_time();
    submit(sp, &hi, 1000, 0, 0x1000, nop.len, 0);
    wait_compl(sp, &hi, 1000, &c);
    t1 = g_get_monotonic_time();
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_test_message("high-priority NOP behind a low-priority GEMM: %.1f ms",
                   (t1 - t0) / 1000.0);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_BUSY);
    qtest_memread(sp->qts, lo.compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 0);

    /*
     * A LOW NOP behind the LOW GEMM: after waiting age-ms its
     * effective priority is above the GEMM's, which it preempts.
     */
    queue_init(sp, &eq, 2, 4, 1);
    qwr32(sp, 2, SPYRE_Q_CONTROL, q_control(1, SPYRE_Q_PRIO_LOW));
    t0 = g_get_monotonic_time();
    submit(sp, &eq, 1, 0, 0x1000, nop.len, 0);
    wait_compl(sp, &eq, 1, &c);
    t1 = g_get_monotonic_time();
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_test_message("LOW NOP behind a LOW GEMM (aging): %.1f ms",
                   (t1 - t0) / 1000.0);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_BUSY);
    qtest_memread(sp->qts, lo.compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 0);

    /* While the VM is stopped the GEMM makes no progress. */
    qtest_qmp_assert_success(sp->qts, "{'execute': 'stop'}");
    t0 = rd64(sp, SPYRE_REG_TEL_BYTES);
    g_usleep(20000);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_BYTES), ==, t0);
    qtest_qmp_assert_success(sp->qts, "{'execute': 'cont'}");
    wait_bytes_above(sp, t0);

    /* The GEMM is aborted mid-way by a queue reset. */
    qwr32(sp, 0, SPYRE_Q_RESET, 1);
    wait_compl(sp, &lo, 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_ABORTED);

    /*
     * Aging: a LOW job queued behind three HIGH jobs of 8 GEMM tiles each
     * (well over 10 ms apiece) gains a level per 10 ms waited and runs
     * before the last of them; strict priority would run it last.
     */
    pa_cnt = map_sys(sp, root, 0x20000, 1, true);   /* counter, slots */
    wr32(sp, SPYRE_REG_CONTROL, 0);
    queue_init(sp, &lo, 0, 4, 1);
    qwr32(sp, 0, SPYRE_Q_CONTROL, q_control(1, SPYRE_Q_PRIO_LOW));
    for (i = 0; i < 4; i++) {
        TestQueue *q = i < 3 ? &hi : &lo;

        st.len = 0;
        if (q == &hi) {
            emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 512, 512, 512,
                      8, 0x1000000, 0x1000000, 0x1000000);
        }
        emit_sem(&st, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, 0x20000, 1);
        emit_copy(&st, 0x20000, 0x20008 + 8 * i, 8, 1, 0, 0);
        pa = map_sys(sp, root, 0x3000 + i * PAGE, 1, false);
        stream_put(sp, pa, &st);
        submit(sp, q, 2000 + i, 0, 0x3000 + i * PAGE, st.len, 0);
    }
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    wait_compl(sp, &lo, 2003, &c);
    wait_compl(sp, &hi, 2002, &c);
    for (i = 0; i < 3; i++) {
        g_assert_cmpuint(qtest_readq(sp->qts, pa_cnt + 8 + 8 * i), <=, 4);
    }
    g_test_message("LOW job ran as job %" PRIu64 " of 4",
                   qtest_readq(sp->qts, pa_cnt + 8 + 8 * 3));
    g_assert_cmpuint(qtest_readq(sp->qts, pa_cnt + 8 + 8 * 3), <, 4);
    spyre_stop(sp);
}

/*
 * Wait until the completion record of @tq shows @seqno: spinning, or
 * polling every @poll_us (which leaves the BQL alone, as a guest waiting
 * for an interrupt does).
 */
static void spin_compl(Spyre *sp, TestQueue *tq, uint64_t seqno,
                       unsigned int poll_us)
{
    gint64 end = g_get_monotonic_time() + 60 * G_USEC_PER_SEC * slow;

    while (qtest_readq(sp->qts, tq->compl) != seqno) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        if (poll_us) {
            g_usleep(poll_us);
        }
    }
}

/*
 * Timings (g_test_perf only: "spyre-test -m perf"): NOP round trip and
 * batch throughput, GEMM time through the card.  Each qtest access is a
 * socket round trip, which the NOP figures include.
 */
static void do_perf(const char *workers)
{
    g_autofree char *extra = g_strdup_printf(",workers=%s", workers);
    Spyre *sp = spyre_start(extra);
    const uint32_t nb = 1000, nbatch = 10;
    struct spyre_hw_job *jobs = g_new0(struct spyre_hw_job, nb);
    TestQueue tq;
    Stream nop = { 0 };
    uint64_t root, pa, seq = 0;
    const char *reps_env = getenv("SPYRE_PERF_REPS");
    unsigned int reps = reps_env ? atoi(reps_env) : 5;
    gint64 t0, t1;
    double best;
    unsigned int i, b, r, sz;

    root = ctx_create(sp, 0);
    pa = map_sys(sp, root, 0x1000, 1, false);
    emit_nop(&nop);
    stream_put(sp, pa, &nop);
    queue_init(sp, &tq, 0, 4096, 1);

    /* Single NOP job round trip. */
    t0 = g_get_monotonic_time();
    for (i = 0; i < 1000; i++) {
        submit(sp, &tq, ++seq, 0, 0x1000, nop.len, SPYRE_JOB_F_IRQ);
        spin_compl(sp, &tq, seq, 0);
    }
    t1 = g_get_monotonic_time();
    g_test_message("workers=%s: NOP job round trip %.1f us (qtest socket "
                   "included)", workers, (t1 - t0) / 1000.0);

    /* 10 batches of 1000 NOP jobs, one doorbell per batch. */
    t0 = g_get_monotonic_time();
    for (b = 0; b < nbatch; b++) {
        for (i = 0; i < nb; i++) {
            jobs[i].seqno = ++seq;
            jobs[i].cmd_va = 0x1000;
            jobs[i].cmd_size = nop.len;
        }
        for (i = 0; i < nb;) {
            uint32_t n = MIN(nb - i, tq.entries - tq.tail);

            qtest_bufwrite(sp->qts, tq.ring + tq.tail * 64, jobs + i, n * 64);
            tq.tail = (tq.tail + n) & (tq.entries - 1);
            i += n;
        }
        qwr32(sp, tq.id, SPYRE_Q_DOORBELL, tq.tail);
        spin_compl(sp, &tq, seq, 0);
    }
    t1 = g_get_monotonic_time();
    g_test_message("workers=%s: %u NOP jobs in batches of %u: %.2f us/job",
                   workers, nb * nbatch, nb, (t1 - t0) / (double)(nb * nbatch));

    /* One job of 1000 NOP commands (a replayed command list), 100 times. */
    {
        Stream *big = g_new0(Stream, 1);
        uint64_t pb = map_sys(sp, root, 0x100000, 2, false);

        for (i = 0; i < 500; i++) {
            emit_nop(big);
        }
        stream_put(sp, pb, big);
        stream_put(sp, pb + big->len, big);
        t0 = g_get_monotonic_time();
        for (i = 0; i < 100; i++) {
            submit(sp, &tq, ++seq, 0, 0x100000, 2 * big->len, 0);
        }
        spin_compl(sp, &tq, seq, 0);
        t1 = g_get_monotonic_time();
        g_test_message("workers=%s: job of 1000 NOP commands: %.1f us/job",
                       workers, (t1 - t0) / 100.0);
        g_free(big);
    }

    /*
     * A chain of 1000 dependent jobs alternating between two queues: job
     * k waits for the semaphore to reach k, then adds 1.
     */
    {
        TestQueue q2;
        uint64_t sem = map_sys(sp, root, 0x200000, 1, true);
        uint64_t cs = map_sys(sp, root, 0x300000, 250, false);
        struct spyre_hw_job *jl[2];
        unsigned int nj[2] = { 0, 0 };

        queue_init(sp, &q2, 1, 1024, 2);
        jl[0] = g_new0(struct spyre_hw_job, 1000);
        jl[1] = g_new0(struct spyre_hw_job, 1000);
        for (i = 0; i < 1000; i++) {
            Stream s1 = { 0 };

            emit_sem(&s1, SPYRE_OP_SEM_WAIT, 0, 0x200000, i);
            emit_sem(&s1, SPYRE_OP_SEM_SIGNAL, SPYRE_SEM_F_ADD, 0x200000, 1);
            qtest_memwrite(sp->qts, cs + i * 64, s1.buf, s1.len);
            jl[i & 1][nj[i & 1]++] = (struct spyre_hw_job) {
                .seqno = ++seq, .cmd_va = 0x300000 + i * 64,
                .cmd_size = s1.len,
            };
        }
        qtest_writeq(sp->qts, sem, 0);
        for (i = 0; i < 500; i++) {
            qtest_memwrite(sp->qts, tq.ring + tq.tail * 64, &jl[0][i], 64);
            tq.tail = (tq.tail + 1) & (tq.entries - 1);
        }
        qtest_bufwrite(sp->qts, q2.ring, jl[1], 500 * 64);
        q2.tail = 500;
        t0 = g_get_monotonic_time();
        qwr32(sp, tq.id, SPYRE_Q_DOORBELL, tq.tail);
        qwr32(sp, q2.id, SPYRE_Q_DOORBELL, q2.tail);
        while (qtest_readq(sp->qts, sem) != 1000) {
            g_usleep(100);
        }
        t1 = g_get_monotonic_time();
        g_test_message("workers=%s: 1000 jobs chained by semaphores across "
                       "2 queues: %.1f us/job", workers, (t1 - t0) / 1000.0);
        g_free(jl[0]);
        g_free(jl[1]);
        qwr32(sp, q2.id, SPYRE_Q_RESET, 1);
    }

    /* GEMMs with operands in system memory. */
    map_sys(sp, root, 0x10000000, 3 * 1024, true);     /* 3 x 4 MiB */
    for (sz = 256; sz <= 1024; sz *= 2) {
        Stream st = { 0 };
        uint64_t va = 0x2000 + (sz / 256) * PAGE;

        emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, sz, sz, sz, 1,
                  0x10000000, 0x10400000, 0x10800000);
        pa = map_sys(sp, root, va, 1, false);
        stream_put(sp, pa, &st);
        best = 1e9;
        for (r = 0; r < reps; r++) {
            t0 = g_get_monotonic_time();
            submit(sp, &tq, ++seq, 0, va, st.len, SPYRE_JOB_F_IRQ);
            spin_compl(sp, &tq, seq, 100);
            t1 = g_get_monotonic_time();
            best = MIN(best, (t1 - t0) / 1000.0);
        }
        g_test_message("workers=%s: fp32 GEMM %u^3 (system memory): %.2f ms, "
                       "%.1f GFLOPS", workers, sz, best,
                       2.0 * sz * sz * sz / best / 1e6);
    }
    g_free(jobs);
    spyre_stop(sp);
}

static void test_perf(void)
{
    do_perf("1");
    do_perf("2");
    do_perf("4");
}

/* ---- fault injection (DBG_INJECT kinds 3-8, COUNT) ------------------ */

#define MSI_ERR_ADDR        (MSI_ADDR + 0x10)   /* error vector's dword */
#define MSI_COMPL_DATA      0x5959
#define MSI_ERR_DATA        0xe0e0

/* Point MSI-X vector @v at the dword @addr with @data, unmasked. */
static void inj_msix_vector(Spyre *sp, unsigned int v, uint64_t addr,
                            uint32_t data)
{
    uint64_t e = sp->dev->msix_table_off + v * PCI_MSIX_ENTRY_SIZE;

    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   e + PCI_MSIX_ENTRY_LOWER_ADDR, addr);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   e + PCI_MSIX_ENTRY_UPPER_ADDR, addr >> 32);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   e + PCI_MSIX_ENTRY_DATA, data);
    qpci_io_writel(sp->dev, sp->dev->msix_table_bar,
                   e + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
    qtest_writel(sp->qts, addr, 0);
}

static void inj_wait_msi(Spyre *sp, uint64_t addr, uint32_t data)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    while (qtest_readl(sp->qts, addr) != data) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_usleep(100);
    }
}

/* Let the card deliver anything it still would (host and virtual time). */
static void inj_settle(Spyre *sp)
{
    g_usleep(20000);
    qtest_clock_step(sp->qts, 10 * 1000 * 1000);
    g_usleep(5000);
}

static void inj_arm(Spyre *sp, unsigned int q, unsigned int kind,
                    unsigned int count)
{
    wr32(sp, SPYRE_REG_DBG_INJECT, SPYRE_DBG_INJECT_VAL(q, kind, count));
}

/* A one-NOP stream at VA 0x1000 of a new context @ctx; returns the root. */
static uint64_t inj_nop_ctx(Spyre *sp, unsigned int ctx, Stream *st)
{
    uint64_t root = ctx_create(sp, ctx);
    uint64_t pa = map_sys(sp, root, 0x1000, 1, false);

    st->len = 0;
    emit_nop(st);
    stream_put(sp, pa, st);
    return root;
}

static void test_inject_fatal(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c, c2;
    TestQueue tq[4];
    Stream st = { 0 }, sem = { 0 }, fill = { 0 };
    uint64_t root, pa, pa_sem, pa_fill, before[16];
    unsigned int i;

    qpci_msix_enable(sp->dev);
    inj_msix_vector(sp, SPYRE_ERROR_VECTOR, MSI_ERR_ADDR, MSI_ERR_DATA);
    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
    root = inj_nop_ctx(sp, 0, &st);
    for (i = 0; i < 4; i++) {
        queue_init(sp, &tq[i], i, 4, 1);
    }

    /* Queue 0: a hung job; queue 1: a job parked on SEM_WAIT. */
    inj_arm(sp, 0, SPYRE_DBG_HANG, 1);
    submit(sp, &tq[0], 1, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_qstatus(sp, 0, SPYRE_QS_BUSY);
    pa_sem = map_sys(sp, root, 0x10000, 1, true);
    emit_sem(&sem, SPYRE_OP_SEM_WAIT, 0, 0x10000, 1);
    pa = map_sys(sp, root, 0x20000, 1, false);
    stream_put(sp, pa, &sem);
    submit(sp, &tq[1], 1, 0, 0x20000, sem.len, SPYRE_JOB_F_IRQ);
    wait_qstatus(sp, 1, SPYRE_QS_SEM_WAIT);

    /* Queue 2: a long job, perhaps still running when the card stops. */
    pa_fill = map_sys(sp, root, 0x100000, 256, true);
    for (i = 0; i < 4; i++) {
        emit_fill(&fill, 0x100000, 256 * PAGE / 8, i + 1, 8);
    }
    pa = map_sys(sp, root, 0x30000, 1, false);
    stream_put(sp, pa, &fill);
    submit(sp, &tq[2], 1, 0, 0x30000, fill.len, 0);

    inj_arm(sp, 3, SPYRE_DBG_FATAL, 1);
    g_assert_cmphex(rd32(sp, SPYRE_REG_STATUS), ==,
                    SPYRE_DEV_STATUS_READY | SPYRE_DEV_STATUS_FATAL);
    g_assert_true(rd32(sp, SPYRE_REG_IRQ_STATUS) & SPYRE_IRQ_FATAL);
    inj_wait_msi(sp, MSI_ERR_ADDR, MSI_ERR_DATA);

    /* Long job: dropped in progress (no record, BUSY) or done before. */
    for (i = 0; i < 16; i++) {
        before[i] = qtest_readq(sp->qts, pa_fill + i * 16 * PAGE);
    }
    qtest_memread(sp->qts, tq[2].compl, &c2, sizeof(c2));
    g_assert_true(c2.seqno == 0 || c2.status == SPYRE_STATUS_OK);

    /* Nothing moves any more, even with its semaphore satisfied. */
    qtest_writeq(sp->qts, pa_sem, 5);
    submit(sp, &tq[3], 7, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    g_assert_cmpuint(qrd32(sp, 3, SPYRE_Q_DOORBELL), ==, 1);
    qtest_writel(sp->qts, MSI_ERR_ADDR, 0);
    inj_settle(sp);
    for (i = 0; i < 2; i++) {
        qtest_memread(sp->qts, tq[i].compl, &c, sizeof(c));
        g_assert_cmpuint(c.seqno, ==, 0);
        g_assert_cmpuint(qrd32(sp, i, SPYRE_Q_STATUS), ==, SPYRE_QS_BUSY);
        g_assert_cmpuint(qrd32(sp, i, SPYRE_Q_HEAD), ==, 0);
        g_assert_cmpuint(qrd32(sp, i, SPYRE_Q_DOORBELL), ==, 1);
        g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(i, SPYRE_Q_LAST_SEQNO)),
                         ==, 0);
    }
    qtest_memread(sp->qts, tq[2].compl, &c, sizeof(c));
    g_assert_cmpmem(&c, sizeof(c), &c2, sizeof(c2));
    g_assert_cmpuint(qrd32(sp, 2, SPYRE_Q_STATUS), ==,
                     c2.seqno ? SPYRE_QS_IDLE : SPYRE_QS_BUSY);
    for (i = 0; i < 16; i++) {
        g_assert_cmphex(qtest_readq(sp->qts, pa_fill + i * 16 * PAGE), ==,
                        before[i]);
    }
    qtest_memread(sp->qts, tq[3].compl, &c, sizeof(c));
    g_assert_cmpuint(c.seqno, ==, 0);
    g_assert_cmpuint(qrd32(sp, 3, SPYRE_Q_HEAD), ==, 0);
    g_assert_cmpuint(qrd32(sp, 3, SPYRE_Q_STATUS), ==, SPYRE_QS_IDLE);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ERR_ADDR), ==, 0);

    /* Registers still work; clearing IRQ_STATUS leaves STATUS.FATAL. */
    wr32(sp, SPYRE_REG_SCRATCH, 0xf00d);
    g_assert_cmphex(rd32(sp, SPYRE_REG_SCRATCH), ==, 0xf00d);
    wr32(sp, SPYRE_REG_IRQ_STATUS, SPYRE_IRQ_FATAL);
    g_assert_false(rd32(sp, SPYRE_REG_IRQ_STATUS) & SPYRE_IRQ_FATAL);
    g_assert_true(rd32(sp, SPYRE_REG_STATUS) & SPYRE_DEV_STATUS_FATAL);

    /* Q_RESET still aborts the job in progress with a record. */
    qwr32(sp, 0, SPYRE_Q_RESET, 1);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_STATUS), ==, SPYRE_QS_DISABLED);
    wait_compl(sp, &tq[0], 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_ABORTED);
    /* A re-enabled queue takes doorbells but runs nothing. */
    queue_init(sp, &tq[0], 0, 4, 1);
    submit(sp, &tq[0], 2, 0, 0x1000, st.len, 0);
    inj_settle(sp);
    qtest_memread(sp->qts, tq[0].compl, &c, sizeof(c));     /* a new page */
    g_assert_cmpuint(c.seqno, ==, 0);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_DOORBELL), ==, 1);
    g_assert_cmpuint(qrd32(sp, 0, SPYRE_Q_HEAD), ==, 0);
    g_assert_true(rd32(sp, SPYRE_REG_STATUS) & SPYRE_DEV_STATUS_FATAL);

    /* Only a device reset clears it; then the card runs again. */
    wr32(sp, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
    g_assert_cmphex(rd32(sp, SPYRE_REG_STATUS), ==, SPYRE_DEV_STATUS_READY);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==, 0);
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq[0], 0, 4, 1);
    submit(sp, &tq[0], 3, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq[0], 3, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    /* The QOM knob stops it too, with IRQ_MASK respected. */
    wr32(sp, SPYRE_REG_IRQ_MASK, 0);
    qtest_qmp_assert_success(sp->qts, "{'execute': 'qom-set', 'arguments':"
                             " {'path': '/machine/peripheral/sp0',"
                             " 'property': 'dbg-inject', 'value': %d}}",
                             SPYRE_DBG_INJECT_VAL(0, SPYRE_DBG_FATAL, 1));
    g_assert_cmphex(rd32(sp, SPYRE_REG_STATUS), ==,
                    SPYRE_DEV_STATUS_READY | SPYRE_DEV_STATUS_FATAL);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==, SPYRE_IRQ_FATAL);
    inj_settle(sp);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ERR_ADDR), ==, 0);

    qpci_msix_disable(sp->dev);
    spyre_stop(sp);
}

static void test_inject_irq(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };
    unsigned int v = 2;

    qpci_msix_enable(sp->dev);
    inj_msix_vector(sp, v, MSI_ADDR, MSI_COMPL_DATA);
    inj_msix_vector(sp, SPYRE_ERROR_VECTOR, MSI_ERR_ADDR, MSI_ERR_DATA);
    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq, 0, 8, v);

    /* DROP_IRQ: the record is written, its message never sent. */
    inj_arm(sp, 0, SPYRE_DBG_DROP_IRQ, 1);
    submit(sp, &tq, 1, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_compl(sp, &tq, 1, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    inj_settle(sp);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);
    g_assert_false(qpci_msix_pending(sp->dev, v));
    /* Used up: the next completion raises its vector. */
    submit(sp, &tq, 2, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_compl(sp, &tq, 2, &c);
    inj_wait_msi(sp, MSI_ADDR, MSI_COMPL_DATA);

    /*
     * DUP_IRQ: one message at the completion, the second one 20 ms of
     * virtual time later (qtest drives the virtual clock).
     */
    qtest_writel(sp->qts, MSI_ADDR, 0);
    inj_arm(sp, 0, SPYRE_DBG_DUP_IRQ, 1);
    submit(sp, &tq, 3, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_compl(sp, &tq, 3, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    inj_wait_msi(sp, MSI_ADDR, MSI_COMPL_DATA);
    qtest_writel(sp->qts, MSI_ADDR, 0);
    g_usleep(20000);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);
    qtest_clock_step(sp->qts, 40 * 1000 * 1000);
    inj_wait_msi(sp, MSI_ADDR, MSI_COMPL_DATA);
    qtest_writel(sp->qts, MSI_ADDR, 0);
    inj_settle(sp);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);
    g_assert_false(qpci_msix_pending(sp->dev, v));

    /* A device reset forgets a duplicate not yet sent. */
    inj_arm(sp, 0, SPYRE_DBG_DUP_IRQ, 1);
    submit(sp, &tq, 4, 0, 0x1000, st.len, SPYRE_JOB_F_IRQ);
    wait_compl(sp, &tq, 4, &c);
    inj_wait_msi(sp, MSI_ADDR, MSI_COMPL_DATA);
    qtest_writel(sp->qts, MSI_ADDR, 0);
    wr32(sp, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
    inj_settle(sp);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);

    /* DROP_IRQ on a failed job: the error vector is still raised. */
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq, 0, 8, v);
    inj_arm(sp, 0, SPYRE_DBG_DROP_IRQ, 1);
    submit(sp, &tq, 5, 15, 0x1000, st.len, SPYRE_JOB_F_IRQ); /* no root */
    wait_compl(sp, &tq, 5, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_INVALID_JOB);
    wait_qstatus(sp, 0, SPYRE_QS_ERROR);
    inj_wait_msi(sp, MSI_ERR_ADDR, MSI_ERR_DATA);
    inj_settle(sp);
    g_assert_cmphex(qtest_readl(sp->qts, MSI_ADDR), ==, 0);
    g_assert_false(qpci_msix_pending(sp->dev, v));

    qpci_msix_disable(sp->dev);
    spyre_stop(sp);
}

static void test_inject_corrupt(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };

    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq, 2, 4, 1);

    /* CORRUPT_SEQNO: the record's seqno is skewed, LAST_SEQNO is not. */
    inj_arm(sp, 2, SPYRE_DBG_CORRUPT_SEQNO, 1);
    submit(sp, &tq, 5, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 5 + SPYRE_DBG_SEQNO_SKEW, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(c.cmd_offset, ==, 0);
    g_assert_cmpuint(c.error_va, ==, 0);
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(2, SPYRE_Q_LAST_SEQNO)), ==, 5);
    wait_qstatus(sp, 2, SPYRE_QS_IDLE);
    g_assert_cmpuint(qrd32(sp, 2, SPYRE_Q_HEAD), ==, 1);
    submit(sp, &tq, 6, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 6, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    /* CORRUPT_STATUS: an unknown status, the queue not halted. */
    inj_arm(sp, 2, SPYRE_DBG_CORRUPT_STATUS, 1);
    submit(sp, &tq, 7, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 7, &c);
    g_assert_cmphex(c.status, ==, SPYRE_DBG_BAD_STATUS);
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(2, SPYRE_Q_LAST_SEQNO)), ==, 7);
    wait_qstatus(sp, 2, SPYRE_QS_IDLE);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==, 0);
    submit(sp, &tq, 8, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 8, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_JOBS), ==, 4);

    spyre_stop(sp);
}

static void test_inject_mmu_fault(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };
    uint64_t info;

    wr32(sp, SPYRE_REG_IRQ_MASK, SPYRE_IRQ_ALL);
    inj_nop_ctx(sp, 3, &st);
    queue_init(sp, &tq, 1, 4, 1);

    inj_arm(sp, 1, SPYRE_DBG_MMU_FAULT, 1);
    submit(sp, &tq, 9, 3, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 9, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_MMU_FAULT);
    g_assert_cmphex(c.error_va, ==, 0x1000);
    g_assert_cmpuint(c.cmd_offset, ==, 0);
    wait_qstatus(sp, 1, SPYRE_QS_ERROR);
    g_assert_cmpuint(qrd32(sp, 1, SPYRE_Q_HEAD), ==, 1);
    g_assert_cmpuint(rd64(sp, SPYRE_QUEUE_REG(1, SPYRE_Q_LAST_SEQNO)), ==, 9);

    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 1);
    g_assert_cmphex(rd64(sp, SPYRE_REG_FAULT_VA), ==, 0x1000);
    info = rd64(sp, SPYRE_REG_FAULT_INFO);
    g_assert_cmpuint(SPYRE_FAULT_INFO_CTX(info), ==, 3);
    g_assert_cmpuint(SPYRE_FAULT_INFO_QUEUE(info), ==, 1);
    g_assert_cmpuint(SPYRE_FAULT_INFO_WRITE(info), ==, 0);
    g_assert_cmpuint(SPYRE_FAULT_INFO_REASON(info), ==, SPYRE_FAULT_INJECTED);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_FAULTS), ==, 1);
    g_assert_cmpuint(rd64(sp, SPYRE_REG_TEL_CMDS), ==, 0);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==,
                    SPYRE_IRQ_FAULT | SPYRE_IRQ_QUEUE_ERROR);

    /* Applied once: after Q_RESET the same job runs. */
    qwr32(sp, 1, SPYRE_Q_RESET, 1);
    queue_init(sp, &tq, 1, 4, 1);
    submit(sp, &tq, 10, 3, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 10, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    g_assert_cmpuint(rd32(sp, SPYRE_REG_FAULT_COUNT), ==, 1);

    spyre_stop(sp);
}

static void test_inject_count(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };
    uint64_t seq;

    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq, 0, 16, 1);

    /* COUNT 3: three records, then no more. */
    inj_arm(sp, 0, SPYRE_DBG_CORRUPT_STATUS, 3);
    for (seq = 1; seq <= 4; seq++) {
        submit(sp, &tq, seq, 0, 0x1000, st.len, 0);
        wait_compl(sp, &tq, seq, &c);
        g_assert_cmphex(c.status, ==, seq <= 3 ? SPYRE_DBG_BAD_STATUS :
                        SPYRE_STATUS_OK);
    }

    /* A new write replaces what is armed. */
    inj_arm(sp, 0, SPYRE_DBG_CORRUPT_STATUS, 4);
    inj_arm(sp, 0, SPYRE_DBG_CORRUPT_SEQNO, 1);
    submit(sp, &tq, 5, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 5 + SPYRE_DBG_SEQNO_SKEW, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);
    submit(sp, &tq, 6, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 6, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    /* Q_RESET disarms (its ABORTED record is not corrupted either)... */
    inj_arm(sp, 0, SPYRE_DBG_CORRUPT_SEQNO, 256);
    submit(sp, &tq, 7, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 7 + SPYRE_DBG_SEQNO_SKEW, &c);
    qwr32(sp, 0, SPYRE_Q_RESET, 1);
    queue_init(sp, &tq, 0, 16, 1);
    submit(sp, &tq, 8, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 8, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    /* ...and so does a device reset. */
    inj_arm(sp, 0, SPYRE_DBG_CORRUPT_STATUS, 2);
    wr32(sp, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
    wr32(sp, SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq, 0, 16, 1);
    submit(sp, &tq, 9, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 9, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    spyre_stop(sp);
}

static void test_inject_bad(void)
{
    Spyre *sp = spyre_start(NULL);
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };
    QDict *rsp;
    static const uint32_t bad[] = {
        SPYRE_DBG_INJECT_VAL(0, 0, 1),
        SPYRE_DBG_INJECT_VAL(0, SPYRE_DBG_KIND_MAX + 1, 1),
        SPYRE_DBG_INJECT_VAL(0, 0xff, 2),
        SPYRE_DBG_INJECT_VAL(8, SPYRE_DBG_CORRUPT_SEQNO, 1),   /* queues=8 */
        SPYRE_DBG_INJECT_VAL(8, SPYRE_DBG_FATAL, 1),
        SPYRE_DBG_INJECT_VAL(0xffff, SPYRE_DBG_FATAL, 1),
    };
    unsigned int i;

    inj_nop_ctx(sp, 0, &st);
    queue_init(sp, &tq, 0, 4, 1);

    /* Ignored: what is armed stays armed, the card does not stop. */
    inj_arm(sp, 0, SPYRE_DBG_CORRUPT_STATUS, 1);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        wr32(sp, SPYRE_REG_DBG_INJECT, bad[i]);
        rsp = qtest_qmp(sp->qts, "{'execute': 'qom-set', 'arguments':"
                        " {'path': '/machine/peripheral/sp0',"
                        " 'property': 'dbg-inject', 'value': %u}}", bad[i]);
        g_assert_true(qdict_haskey(rsp, "error"));
        qobject_unref(rsp);
    }
    g_assert_cmphex(rd32(sp, SPYRE_REG_STATUS), ==, SPYRE_DEV_STATUS_READY);
    g_assert_cmphex(rd32(sp, SPYRE_REG_IRQ_STATUS), ==, 0);
    submit(sp, &tq, 1, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 1, &c);
    g_assert_cmphex(c.status, ==, SPYRE_DBG_BAD_STATUS);
    submit(sp, &tq, 2, 0, 0x1000, st.len, 0);
    wait_compl(sp, &tq, 2, &c);
    g_assert_cmpuint(c.status, ==, SPYRE_STATUS_OK);

    spyre_stop(sp);
}

/* Migrate @src to a new VM on @uri and take the card over there. */
static Spyre *inj_migrate(Spyre *src, const char *uri)
{
    Spyre *dst = spyre_start_vm(NULL, NULL, false, uri);
    g_autofree char *status = migrate(src, uri);

    g_assert_cmpstr(status, ==, "completed");
    qtest_qmp_eventwait(dst->qts, "RESUME");
    dst->dev = qpci_device_find(dst->bus, SPYRE_DEVFN);
    dst->bar0 = src->bar0;
    dst->bar2 = src->bar2;
    dst->next_page = src->next_page;
    return dst;
}

static void test_inject_migration(void)
{
    g_autofree char *uri = g_strdup_printf("unix:%s/spyre-inj-%d.sock",
                                           g_get_tmp_dir(), getpid());
    g_autofree char *uri2 = g_strdup_printf("unix:%s/spyre-inj2-%d.sock",
                                            g_get_tmp_dir(), getpid());
    Spyre *src = spyre_start(NULL), *dst, *dst2;
    struct spyre_hw_completion c;
    TestQueue tq;
    Stream st = { 0 };
    uint64_t seq;

    /* The armed kind and what is left of its count migrate... */
    inj_nop_ctx(src, 0, &st);
    queue_init(src, &tq, 0, 8, 1);
    inj_arm(src, 0, SPYRE_DBG_CORRUPT_STATUS, 3);
    submit(src, &tq, 1, 0, 0x1000, st.len, 0);
    wait_compl(src, &tq, 1, &c);
    g_assert_cmphex(c.status, ==, SPYRE_DBG_BAD_STATUS);
    dst = inj_migrate(src, uri);
    for (seq = 2; seq <= 4; seq++) {
        submit(dst, &tq, seq, 0, 0x1000, st.len, 0);
        wait_compl(dst, &tq, seq, &c);
        g_assert_cmphex(c.status, ==, seq <= 3 ? SPYRE_DBG_BAD_STATUS :
                        SPYRE_STATUS_OK);
    }

    /* ...and so does FATAL (with no job in progress). */
    wr32(dst, SPYRE_REG_DBG_INJECT,
         SPYRE_DBG_INJECT_VAL(0, SPYRE_DBG_FATAL, 1));
    dst2 = inj_migrate(dst, uri2);
    g_assert_cmphex(rd32(dst2, SPYRE_REG_STATUS), ==,
                    SPYRE_DEV_STATUS_READY | SPYRE_DEV_STATUS_FATAL);
    g_assert_cmphex(rd32(dst2, SPYRE_REG_IRQ_STATUS), ==, SPYRE_IRQ_FATAL);
    submit(dst2, &tq, 5, 0, 0x1000, st.len, 0);
    g_usleep(20000);
    g_assert_cmpuint(qrd32(dst2, 0, SPYRE_Q_HEAD), ==, 4);
    wr32(dst2, SPYRE_REG_RESET, SPYRE_RESET_MAGIC);
    g_assert_cmphex(rd32(dst2, SPYRE_REG_STATUS), ==, SPYRE_DEV_STATUS_READY);

    spyre_stop(dst2);
    spyre_stop(dst);
    spyre_stop(src);
}

/*
 * A job in the middle of a command migrates when the command reads nothing
 * it writes: parked at that command, which runs again on the destination.
 * One whose command reads what it writes (a GEMM with beta 1) refuses
 * migration, and the source goes on.  The job clears C, then runs two
 * batched GEMMs of 1024^3 fp32 products; once C shows the first part, the
 * source VM is stopped, which holds the GEMM at its next tile, and the
 * stopped VM migrates.  The batch keeps each GEMM, run again whole on the
 * destination, within the card's 5 s per command on a loaded host (64
 * ran past it at load 10), smaller still under a sanitizer.
 */
static void test_migration_running(void)
{
    g_autofree char *uri = g_strdup_printf("unix:%s/spyre-mig2-%d.sock",
                                           g_get_tmp_dir(), getpid());
    const uint32_t n = 1024, batch = slow > 1 ? 4 : 16;
    Spyre *src = spyre_start(NULL), *dst;
    struct spyre_hw_completion comp;
    Stream st = { 0 };
    Card cd;
    Buf a, b, c, cmd;
    float v;
    int beta;

    card_init(&cd, src, 3, 0);
    a = buf_new(&cd, (uint64_t)n * n * 4);
    b = buf_new(&cd, (uint64_t)n * n * 4);
    c = buf_new(&cd, (uint64_t)n * n * 4);
    emit_fill(&st, a.va, (uint64_t)n * n, f32_bits(1.0f), 4);
    emit_fill(&st, b.va, (uint64_t)n * n, f32_bits(1.0f), 4);
    g_assert_cmpuint(card_run(&cd, &st, NULL), ==, SPYRE_STATUS_OK);
    cmd = buf_new(&cd, PAGE);

    for (beta = 1; beta >= 0; beta--) {
        gint64 end = g_get_monotonic_time() + WAIT_US;
        g_autofree char *status = NULL;
        int i;

        st.len = 0;
        emit_fill(&st, c.va, (uint64_t)n * n, 0, 4);
        for (i = 0; i < 2; i++) {
            emit_gemm(&st, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, n, n, n,
                      batch, a.va, b.va, c.va)->beta = f32_bits(beta);
        }
        stream_put(src, cmd.pa, &st);
        qtest_writel(src->qts, c.pa, 0);
        submit(src, &cd.tq, ++cd.seq, cd.ctx, cmd.va, st.len, 0);
        while (!qtest_readl(src->qts, c.pa)) {
            g_assert_cmpint(g_get_monotonic_time(), <, end);
            g_usleep(100);
        }
        qtest_qmp_assert_success(src->qts, "{'execute': 'stop'}");
        g_assert_cmpuint(qrd32(src, cd.tq.id, SPYRE_Q_STATUS), ==,
                         SPYRE_QS_BUSY);
        dst = spyre_start_vm(NULL, NULL, false, uri);
        status = migrate(src, uri);
        if (beta) {
            /* Refused at the end of precopy; the job finishes here. */
            g_assert_cmpstr(status, ==, "failed");
            g_free(status);
            status = migration_wait(dst->qts);
            g_assert_cmpstr(status, ==, "failed");
            qtest_quit(dst->qts);
            qpci_free_pc(dst->bus);
            g_free(dst);
            qtest_qmp_assert_success(src->qts, "{'execute': 'cont'}");
            wait_compl_us(src, &cd.tq, cd.seq, &comp, 120 * G_USEC_PER_SEC);
            g_assert_cmpuint(comp.status, ==, SPYRE_STATUS_OK);
            continue;
        }
        g_assert_cmpstr(status, ==, "completed");
        /* The source was stopped: the destination waits to be resumed. */
        qtest_qmp_assert_success(dst->qts, "{'execute': 'cont'}");
        qtest_qmp_eventwait(dst->qts, "RESUME");
        dst->dev = qpci_device_find(dst->bus, SPYRE_DEVFN);
        dst->bar0 = src->bar0;
        dst->bar2 = src->bar2;
        dst->next_page = src->next_page;
        /* Parked at its command, on the destination it runs again. */
        g_assert_cmpuint(qrd32(dst, cd.tq.id, SPYRE_Q_STATUS), ==,
                         SPYRE_QS_BUSY);
        wait_compl_us(dst, &cd.tq, cd.seq, &comp, 120 * G_USEC_PER_SEC);
        g_assert_cmpuint(comp.status, ==, SPYRE_STATUS_OK);
        v = 0;
        qtest_memread(dst->qts, c.pa, &v, sizeof(v));
        g_assert_cmpfloat(v, ==, (float)n);
        qtest_memread(dst->qts, c.pa + (uint64_t)n * n * 4 - 4, &v,
                      sizeof(v));
        g_assert_cmpfloat(v, ==, (float)n);
        spyre_stop(dst);
    }
    spyre_stop(src);
}

/* ---- KERNEL ------------------------------------------------------------ */

/* A kernel program assembled by hand (the qtest does not use libspyre). */
typedef struct KProg {
    struct spyre_kprog_header h;
    struct spyre_kinst in[64];
    uint32_t n;
} KProg;

#define KN          SPYRE_KVAL_NONE
#define KT_B        SPYRE_KTYPE_BOOL
#define KT_I32      SPYRE_KTYPE_I32
#define KT_I64      SPYRE_KTYPE_I64
#define KT_F32      SPYRE_KTYPE_F32

static void kp_init(KProg *p, const uint8_t *dtypes, unsigned int nops,
                    unsigned int nparams, unsigned int npd, unsigned int nrd,
                    unsigned int npasses)
{
    memset(p, 0, sizeof(*p));
    p->h.magic = SPYRE_KPROG_MAGIC;
    p->h.version = SPYRE_KPROG_VERSION;
    p->h.noperands = nops;
    p->h.nparams = nparams;
    p->h.npdims = npd;
    p->h.nrdims = nrd;
    p->h.npasses = npasses;
    memcpy(p->h.dtype, dtypes, nops);
}

/* Append an instruction; returns the (first) value it defines, or KN. */
static uint16_t kp(KProg *p, uint8_t op, uint8_t type, uint16_t mod,
                   uint16_t a, uint16_t b, uint16_t c, uint32_t imm)
{
    struct spyre_kinst *in;
    unsigned int kind = mod & 0xff;
    unsigned int ndef = type == SPYRE_KTYPE_NONE ? 0 :
        op == SPYRE_KOP_REDUCE && (kind == SPYRE_KRED_WELFORD ||
                                   kind == SPYRE_KRED_WELFORD_COMBINE) ? 3 : 1;

    g_assert_cmpuint(p->n, <, ARRAY_SIZE(p->in));
    in = &p->in[p->n++];
    in->op = op;
    in->type = type;
    in->mod = mod;
    in->dst = ndef ? p->h.nvalues : KN;
    in->a = a;
    in->b = b;
    in->c = c;
    in->imm = imm;
    p->h.ninsts = p->n;
    p->h.nvalues += ndef;
    return in->dst;
}

static uint16_t kp_const(KProg *p, uint8_t type, uint64_t v)
{
    uint16_t d = kp(p, SPYRE_KOP_CONST, type, 0, KN, 0, 0, 0);
    struct spyre_kinst *in = &p->in[p->n - 1];

    in->b = v;
    in->c = v >> 16;
    in->imm = v >> 32;
    return d;
}

static uint16_t kp2(KProg *p, uint8_t op, uint8_t type, uint16_t a,
                    uint16_t b)
{
    return kp(p, op, type, 0, a, b, KN, 0);
}

static uint32_t kp_size(const KProg *p)
{
    return 64 + 16 * p->n;
}

static void emit_kernel(Stream *st, uint64_t prog, uint32_t prog_size,
                        const struct spyre_kernel_operand *ops,
                        unsigned int nops, const uint64_t *params,
                        unsigned int nparams, const uint64_t *size,
                        unsigned int npd, unsigned int nrd)
{
    uint32_t len = SPYRE_CMD_KERNEL_SIZE(nops, nparams);
    struct spyre_cmd_kernel *k = emit(st, SPYRE_OP_KERNEL, len);

    k->prog = prog;
    k->prog_size = prog_size;
    k->noperands = nops;
    k->nparams = nparams;
    k->npdims = npd;
    k->nrdims = nrd;
    memcpy(k->size, size, sizeof(k->size));
    memcpy(k + 1, ops, nops * sizeof(*ops));
    memcpy((uint8_t *)(k + 1) + nops * sizeof(*ops), params, nparams * 8);
}

/* Run program @p (put at a fresh VA) as one job. */
static uint32_t kernel_run(Card *cd, const KProg *p,
                           const struct spyre_kernel_operand *ops,
                           unsigned int nops, const uint64_t *params,
                           unsigned int nparams, const uint64_t *size,
                           struct spyre_hw_completion *c)
{
    Buf pb = buf_put(cd, p, kp_size(p));
    Stream st = { .len = 0 };

    emit_kernel(&st, pb.va, kp_size(p), ops, nops, params, nparams, size,
                p->h.npdims, p->h.nrdims);
    return card_run(cd, &st, c);
}

static struct spyre_kernel_operand kopnd(Buf b, uint64_t extent,
                                         uint32_t dtype)
{
    return (struct spyre_kernel_operand){ .va = b.va, .extent = extent,
                                          .dtype = dtype };
}

/*
 * One kernel over [N, C]: out = (x + b[col]) * s (fp32 in, fp16 out,
 * b broadcast over rows) and, in place, v = floordiv(v, 3) + rem(v, -4)
 * (int32).
 */
static void do_kernel_pointwise(Card *cd)
{
    enum { N = 37, C = 50 };
    static const uint8_t dt[4] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32,
                                   SPYRE_DTYPE_FP16, SPYRE_DTYPE_INT32 };
    g_autofree float *x = g_new(float, N * C);
    g_autofree int32_t *v = g_new(int32_t, N * C);
    g_autofree uint16_t *out = g_new(uint16_t, N * C);
    g_autofree int32_t *q = g_new(int32_t, N * C);
    float b[C], s = 0.75f;
    struct spyre_kernel_operand ops[4];
    struct spyre_hw_completion c;
    uint64_t params[4] = { C, 1, 1, f32_bits(s) };
    uint64_t size[9] = { N, C };
    uint16_t o, ob, vx, vb, t, m, vv, r1, r2;
    Buf bo, bv;
    KProg p;
    int i;

    for (i = 0; i < N * C; i++) {
        x[i] = (i % 97) * 0.37f - 11.0f;
        v[i] = i * 7919 % 2001 - 1000;
    }
    for (i = 0; i < C; i++) {
        b[i] = i * 0.125f - 2.0f;
    }
    kp_init(&p, dt, 4, 4, 2, 0, 0);
    o = kp(&p, SPYRE_KOP_AFFINE, KT_I64, 3, KN, KN, KN, 0);
    ob = kp(&p, SPYRE_KOP_AFFINE, KT_I32, 2, KN, KN, KN, 2);
    vx = kp(&p, SPYRE_KOP_LOAD, KT_F32, 0, o, KN, KN, 0);
    vb = kp(&p, SPYRE_KOP_LOAD, KT_F32, 0, ob, KN, KN, 1);
    t = kp2(&p, SPYRE_KOP_ADD, KT_F32, vx, vb);
    m = kp(&p, SPYRE_KOP_PARAM, KT_F32, 0, KN, KN, KN, 3);
    t = kp2(&p, SPYRE_KOP_MUL, KT_F32, t, m);
    kp(&p, SPYRE_KOP_STORE, 0, 0, o, KN, t, 2);
    vv = kp(&p, SPYRE_KOP_LOAD, KT_I32, 0, o, KN, KN, 3);
    r1 = kp2(&p, SPYRE_KOP_FLOORDIV, KT_I32, vv, kp_const(&p, KT_I32, 3));
    r2 = kp2(&p, SPYRE_KOP_REM, KT_I32, vv,
             kp_const(&p, KT_I32, (uint32_t)-4));
    kp(&p, SPYRE_KOP_STORE, 0, 0, o, KN, kp2(&p, SPYRE_KOP_ADD, KT_I32, r1,
                                             r2), 3);

    bo = buf_new(cd, N * C * 2);
    bv = buf_put(cd, v, N * C * 4);
    ops[0] = kopnd(buf_f32(cd, x, N * C), N * C, SPYRE_DTYPE_FP32);
    ops[1] = kopnd(buf_f32(cd, b, C), C, SPYRE_DTYPE_FP32);
    ops[2] = kopnd(bo, N * C, SPYRE_DTYPE_FP16);
    ops[3] = kopnd(bv, N * C, SPYRE_DTYPE_INT32);
    g_assert_cmpuint(kernel_run(cd, &p, ops, 4, params, 4, size, &c), ==,
                     SPYRE_STATUS_OK);
    buf_get(cd, bo, out, N * C * 2);
    buf_get(cd, bv, q, N * C * 4);
    for (i = 0; i < N * C; i++) {
        uint16_t want = f32_to_f16((x[i] + b[i % C]) * s);
        int32_t fd = v[i] / 3, rm = v[i] % -4;

        fd -= v[i] % 3 && v[i] < 0;
        rm += rm > 0 ? -4 : 0;
        g_assert_cmphex(out[i], ==, want);
        g_assert_cmpint(q[i], ==, fd + rm);
    }
}

/*
 * Softmax over the last dimension of x [N, R] (fp32) in 3 passes, the
 * docs' example; returns the output in @y.
 */
static void kernel_softmax(Card *cd, const float *x, float *y, uint64_t n,
                           uint64_t r)
{
    static const uint8_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
    struct spyre_kernel_operand ops[2];
    uint64_t params[2] = { r, 1 };
    uint64_t size[9] = { n, 0, 0, 0, 0, 0, r };
    struct spyre_hw_completion c;
    uint16_t row, o, v, mx, sm, e;
    Buf by = buf_new(cd, n * r * 4);
    KProg p;

    kp_init(&p, dt, 2, 2, 1, 1, 3);
    row = kp(&p, SPYRE_KOP_AFFINE, KT_I64, 1, KN, KN, KN, 0);
    kp(&p, SPYRE_KOP_PASS, 0, 0, KN, KN, KN, 0);
    o = kp(&p, SPYRE_KOP_AFFINE, KT_I64, 1 << 6, row, KN, KN, 1);
    v = kp(&p, SPYRE_KOP_LOAD, KT_F32, 0, o, KN, KN, 0);
    mx = kp(&p, SPYRE_KOP_REDUCE, KT_F32, SPYRE_KRED_MAX, v, KN, KN, KN);
    kp(&p, SPYRE_KOP_ENDPASS, 0, 0, KN, KN, KN, 0);
    kp(&p, SPYRE_KOP_PASS, 0, 0, KN, KN, KN, 0);
    o = kp(&p, SPYRE_KOP_AFFINE, KT_I64, 1 << 6, row, KN, KN, 1);
    v = kp(&p, SPYRE_KOP_LOAD, KT_F32, 0, o, KN, KN, 0);
    e = kp(&p, SPYRE_KOP_EXP, KT_F32, 0,
           kp2(&p, SPYRE_KOP_SUB, KT_F32, v, mx), KN, KN, 0);
    sm = kp(&p, SPYRE_KOP_REDUCE, KT_F32, SPYRE_KRED_SUM, e, KN, KN, KN);
    kp(&p, SPYRE_KOP_ENDPASS, 0, 0, KN, KN, KN, 0);
    kp(&p, SPYRE_KOP_PASS, 0, 0, KN, KN, KN, 0);
    o = kp(&p, SPYRE_KOP_AFFINE, KT_I64, 1 << 6, row, KN, KN, 1);
    v = kp(&p, SPYRE_KOP_LOAD, KT_F32, 0, o, KN, KN, 0);
    e = kp(&p, SPYRE_KOP_EXP, KT_F32, 0,
           kp2(&p, SPYRE_KOP_SUB, KT_F32, v, mx), KN, KN, 0);
    kp(&p, SPYRE_KOP_STORE, 0, 0, o, KN,
       kp2(&p, SPYRE_KOP_DIV, KT_F32, e, sm), 1);
    kp(&p, SPYRE_KOP_ENDPASS, 0, 0, KN, KN, KN, 0);

    ops[0] = kopnd(buf_f32(cd, x, n * r), n * r, SPYRE_DTYPE_FP32);
    ops[1] = kopnd(by, n * r, SPYRE_DTYPE_FP32);
    g_assert_cmpuint(kernel_run(cd, &p, ops, 2, params, 2, size, &c), ==,
                     SPYRE_STATUS_OK);
    buf_get(cd, by, y, n * r * 4);
}

static float *softmax_input(uint64_t n, uint64_t r)
{
    float *x = g_new(float, n * r);
    uint64_t i;

    for (i = 0; i < n * r; i++) {
        x[i] = (float)((i * 2654435761u) % 1000) / 125.0f - 4.0f;
    }
    return x;
}

/* Softmax, short rows (many per vector) and long ones (several blocks). */
static void do_kernel_softmax(Card *cd)
{
    static const uint64_t shape[2][2] = { { 40, 37 }, { 3, 2500 } };
    unsigned int s;

    for (s = 0; s < 2; s++) {
        uint64_t n = shape[s][0], r = shape[s][1], i, j;
        g_autofree float *x = softmax_input(n, r);
        g_autofree float *y = g_new(float, n * r);

        kernel_softmax(cd, x, y, n, r);
        for (i = 0; i < n; i++) {
            double mx = -INFINITY, sum = 0;

            for (j = 0; j < r; j++) {
                mx = MAX(mx, x[i * r + j]);
            }
            for (j = 0; j < r; j++) {
                sum += exp(x[i * r + j] - mx);
            }
            for (j = 0; j < r; j++) {
                double want = exp(x[i * r + j] - mx) / sum;

                g_assert_cmpfloat(fabs(y[i * r + j] - want), <=,
                                  want / 500000);
            }
        }
    }
}

/*
 * y[i] = x[i + P0] for i < 8, masked by i < P1: an active lane out of x's
 * extent ends the job OUT_OF_BOUNDS naming operand, instruction and
 * offset; the same offset in an inactive lane is not accessed.  Then a
 * failed CHECK (ASSERT).
 */
static void do_kernel_bounds(Card *cd)
{
    static const uint8_t dt[2] = { SPYRE_DTYPE_INT32, SPYRE_DTYPE_INT32 };
    static const int32_t x[8] = { 10, 11, 12, 13, 14, 15, 16, 17 };
    struct spyre_kernel_operand ops[2];
    struct spyre_hw_completion c;
    uint64_t size[9] = { 8 };
    uint64_t params[2];
    uint16_t i, o, m, v;
    int32_t y[8];
    Buf by = buf_new(cd, sizeof(y));
    KProg p;
    int k;

    kp_init(&p, dt, 2, 2, 1, 0, 0);
    i = kp(&p, SPYRE_KOP_IDX, KT_I64, 0, KN, KN, KN, 0);
    o = kp2(&p, SPYRE_KOP_ADD, KT_I64, i,
            kp(&p, SPYRE_KOP_PARAM, KT_I64, 0, KN, KN, KN, 0));
    m = kp(&p, SPYRE_KOP_CMP, KT_B, SPYRE_KCMP_LT, i,
           kp(&p, SPYRE_KOP_PARAM, KT_I64, 0, KN, KN, KN, 1), KN, 0);
    v = kp(&p, SPYRE_KOP_LOAD, KT_I32, 0, o, m, KN, 0);   /* instruction 5 */
    kp(&p, SPYRE_KOP_STORE, 0, 0, i, KN, v, 1);
    ops[0] = kopnd(buf_put(cd, x, sizeof(x)), 8, SPYRE_DTYPE_INT32);
    ops[1] = kopnd(by, 8, SPYRE_DTYPE_INT32);

    params[0] = 5;
    params[1] = 8;
    g_assert_cmpuint(kernel_run(cd, &p, ops, 2, params, 2, size, &c), ==,
                     SPYRE_STATUS_OUT_OF_BOUNDS);
    g_assert_cmphex(c.detail, ==, 5ULL << 32 | 0);
    g_assert_cmpint(c.detail2, ==, 8);

    params[1] = 3;
    g_assert_cmpuint(kernel_run(cd, &p, ops, 2, params, 2, size, &c), ==,
                     SPYRE_STATUS_OK);
    g_assert_cmphex(c.detail, ==, 0);
    buf_get(cd, by, y, sizeof(y));
    for (k = 0; k < 8; k++) {
        g_assert_cmpint(y[k], ==, k < 3 ? x[k + 5] : 0);
    }

    /* CHECK i < 6: fails first at point 6. */
    p.n = 5;
    p.h.nvalues = 5;
    m = kp(&p, SPYRE_KOP_CMP, KT_B, SPYRE_KCMP_LT, i, kp_const(&p, KT_I64, 6),
           KN, 0);
    kp(&p, SPYRE_KOP_CHECK, 0, 0, m, KN, KN, 0);      /* instruction 7 */
    params[0] = 0;
    g_assert_cmpuint(kernel_run(cd, &p, ops, 2, params, 2, size, &c), ==,
                     SPYRE_STATUS_ASSERT);
    g_assert_cmphex(c.detail, ==, 7ULL << 32);
}

/*
 * The program that runs is the one read at command start: every point
 * writes 9 over its own CONST 7 (the program is also operand 1), and
 * every point still stores 7.  The same KERNEL next in the job reads
 * the program again (the job wrote it: the bytes the first one read are
 * not kept) and stores 9.
 */
static void do_kernel_rewrite(Card *cd)
{
    enum { NP = 5000 };
    static const uint8_t dt[2] = { SPYRE_DTYPE_INT32, SPYRE_DTYPE_INT32 };
    g_autofree int32_t *y = g_new(int32_t, NP);
    struct spyre_kernel_operand ops[2];
    struct spyre_hw_completion c;
    uint64_t size[9] = { NP };
    uint16_t i, seven, nine, w;
    Buf by = buf_new(cd, NP * 4), by2 = buf_new(cd, NP * 4), pb;
    Stream st = { .len = 0 };
    uint32_t word;
    KProg p;
    int k;

    kp_init(&p, dt, 2, 0, 1, 0, 0);
    i = kp(&p, SPYRE_KOP_IDX, KT_I64, 0, KN, KN, KN, 0);
    seven = kp_const(&p, KT_I32, 7);                  /* instruction 1 */
    kp(&p, SPYRE_KOP_STORE, 0, 0, i, KN, seven, 0);
    nine = kp_const(&p, KT_I32, 9);
    w = kp_const(&p, KT_I64, (64 + 16 + 8) / 4);      /* CONST 7's value */
    kp(&p, SPYRE_KOP_STORE, 0, 0, w, KN, nine, 1);
    pb = buf_put(cd, &p, kp_size(&p));
    ops[0] = kopnd(by, NP, SPYRE_DTYPE_INT32);
    ops[1] = kopnd(pb, kp_size(&p) / 4, SPYRE_DTYPE_INT32);
    emit_kernel(&st, pb.va, kp_size(&p), ops, 2, size, 0, size, 1, 0);
    ops[0] = kopnd(by2, NP, SPYRE_DTYPE_INT32);
    emit_kernel(&st, pb.va, kp_size(&p), ops, 2, size, 0, size, 1, 0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_OK);
    buf_get(cd, by, y, NP * 4);
    for (k = 0; k < NP; k++) {
        g_assert_cmpint(y[k], ==, 7);
    }
    buf_get(cd, by2, y, NP * 4);
    for (k = 0; k < NP; k++) {
        g_assert_cmpint(y[k], ==, 9);
    }
    word = qtest_readl(cd->sp->qts, pb.pa + 64 + 16 + 8);
    g_assert_cmpuint(word, ==, 9);
}

/* One refusal per verifier reason, and the command's own checks. */
static void do_kernel_refusals(Card *cd)
{
    static const uint8_t dt[1] = { SPYRE_DTYPE_FP32 };
    struct spyre_kernel_operand op;
    struct spyre_hw_completion c;
    uint64_t size[9] = { 4 };
    uint64_t param = 1;
    Buf bx = buf_new(cd, 16), pb;
    Stream st = { .len = 0 };
    KProg p, good;
    unsigned int i;
    struct {
        unsigned int inst, reason;
    } want[8] = {
        { SPYRE_KINST_HEADER, SPYRE_KERR_HEADER },
        { SPYRE_KINST_HEADER, SPYRE_KERR_SIGNATURE },
        { 1, SPYRE_KERR_OPCODE },
        { 1, SPYRE_KERR_TYPE },
        { 1, SPYRE_KERR_VALUE },
        { 1, SPYRE_KERR_INDEX },
        { 1, SPYRE_KERR_STRUCTURE },
        { 1, SPYRE_KERR_FIELD },
    };

    op = kopnd(bx, 4, SPYRE_DTYPE_FP32);
    /* %0 = idx p0; <instruction 1>; store o0[%0] = const */
    kp_init(&good, dt, 1, 1, 1, 0, 0);
    kp(&good, SPYRE_KOP_IDX, KT_I64, 0, KN, KN, KN, 0);
    kp(&good, SPYRE_KOP_PARAM, KT_F32, 0, KN, KN, KN, 0);
    kp(&good, SPYRE_KOP_STORE, 0, 0, 0, KN, 1, 0);
    g_assert_cmpuint(kernel_run(cd, &good, &op, 1, &param, 1, size, &c), ==,
                     SPYRE_STATUS_OK);

    for (i = 0; i < ARRAY_SIZE(want); i++) {
        p = good;
        switch (want[i].reason) {
        case SPYRE_KERR_HEADER:
            p.h.magic ^= 1;
            break;
        case SPYRE_KERR_SIGNATURE:
            p.h.dtype[0] = SPYRE_DTYPE_FP16;
            break;
        case SPYRE_KERR_OPCODE:
            p.in[1].op = 0x09;
            break;
        case SPYRE_KERR_TYPE:
            p.in[1].type = 7;
            break;
        case SPYRE_KERR_VALUE:
            p.in[1].dst = 5;
            break;
        case SPYRE_KERR_INDEX:
            p.in[1].imm = 1;
            break;
        case SPYRE_KERR_STRUCTURE:
            p.in[1] = (struct spyre_kinst){ .op = SPYRE_KOP_ENDPASS,
                                            .dst = KN, .a = KN, .b = KN,
                                            .c = KN };
            break;
        default:
            p.in[1].mod = 1;
            break;
        }
        g_assert_cmpuint(kernel_run(cd, &p, &op, 1, &param, 1, size, &c), ==,
                         SPYRE_STATUS_BAD_PROGRAM);
        g_assert_cmphex(c.detail, ==,
                        (uint64_t)want[i].reason << 32 | want[i].inst);
        g_assert_cmphex(c.detail2, ==, 0);
    }

    /* The program's place and size (step 4). */
    pb = buf_put(cd, &good, kp_size(&good));
    emit_kernel(&st, pb.va + 4, kp_size(&good), &op, 1, &param, 1, size, 1,
                0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_BAD_PROGRAM);
    g_assert_cmphex(c.detail, ==, (uint64_t)SPYRE_KERR_HEADER << 32 |
                    SPYRE_KINST_HEADER);
    emit_kernel(&st, pb.va, kp_size(&good) - 8, &op, 1, &param, 1, size, 1,
                0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_BAD_PROGRAM);
    /* An unmapped program: MMU_FAULT naming the program read. */
    emit_kernel(&st, pb.va + PAGE, kp_size(&good), &op, 1, &param, 1,
                size, 1, 0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_MMU_FAULT);
    g_assert_cmphex(c.detail, ==, (uint64_t)SPYRE_KINST_HEADER << 32 |
                    SPYRE_KOPERAND_PROGRAM);
    g_assert_cmphex(c.error_va, ==, pb.va + PAGE);
    while (rd32(cd->sp, SPYRE_REG_FAULT_COUNT)) {
        wr32(cd->sp, SPYRE_REG_FAULT_POP, 1);
    }

    /* Command checks: flags, dtype, iteration count. */
    emit_kernel(&st, pb.va, kp_size(&good), &op, 1, &param, 1, size, 1, 0);
    ((struct spyre_cmd_kernel *)st.buf)->hdr.flags = 1;
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_INVALID_COMMAND);
    size[7] = 3;        /* a reduction size with no reduction dimension */
    emit_kernel(&st, pb.va, kp_size(&good), &op, 1, &param, 1, size, 1, 0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_INVALID_COMMAND);
    size[7] = 0;
    op.dtype = SPYRE_DTYPE_COUNT;
    emit_kernel(&st, pb.va, kp_size(&good), &op, 1, &param, 1, size, 1, 0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_INVALID_OPERAND);
    op.dtype = SPYRE_DTYPE_FP32;
    size[0] = SPYRE_KSIZE_PARAM(0);
    param = 1ULL << 37;
    emit_kernel(&st, pb.va, kp_size(&good), &op, 1, &param, 1, size, 1, 0);
    g_assert_cmpuint(card_run(cd, &st, &c), ==, SPYRE_STATUS_LIMIT);
}

/* Bit-identical results whatever the card's cores and workers. */
static void kernel_cores_run(const char *props, float *y, uint64_t n,
                             uint64_t r)
{
    Spyre *sp = spyre_start(props);
    g_autofree float *x = softmax_input(n, r);
    Card cd;

    card_init(&cd, sp, 1, 0);
    kernel_softmax(&cd, x, y, n, r);
    spyre_stop(sp);
}

static void test_kernel_cores(void)
{
    enum { N = 4, R = 3000 };
    g_autofree float *a = g_new(float, N * R);
    g_autofree float *b = g_new(float, N * R);

    kernel_cores_run(",cores=1,workers=1", a, N, R);
    kernel_cores_run(",cores=32,workers=4", b, N, R);
    g_assert_cmpmem(a, N * R * 4, b, N * R * 4);
}

/*
 * The verified-program cache is keyed by the full bytes and the launch's
 * signature: the same bytes with another operand dtype are verified again
 * (and refused), a program one byte apart runs as itself, and an empty
 * program over many points completes.
 */
static void do_kernel_cache(Card *cd)
{
    enum { N = 300 };
    static const uint8_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
    float x[N], y[N];
    struct spyre_kernel_operand ops[2];
    struct spyre_hw_completion c;
    uint64_t size[9] = { N };
    uint16_t i, v;
    Buf bx, by;
    KProg p, e;
    int k, run;

    for (k = 0; k < N; k++) {
        x[k] = k * 0.5f - 7.0f;
    }
    kp_init(&p, dt, 2, 0, 1, 0, 0);
    i = kp(&p, SPYRE_KOP_IDX, KT_I64, 0, KN, KN, KN, 0);
    v = kp(&p, SPYRE_KOP_LOAD, KT_F32, 0, i, KN, KN, 0);
    v = kp(&p, SPYRE_KOP_NEG, KT_F32, 0, v, KN, KN, 0);
    kp(&p, SPYRE_KOP_STORE, 0, 0, i, KN, v, 1);
    bx = buf_f32(cd, x, N);
    by = buf_new(cd, N * 4);
    ops[0] = kopnd(bx, N, SPYRE_DTYPE_FP32);
    ops[1] = kopnd(by, N, SPYRE_DTYPE_FP32);
    for (run = 0; run < 4; run++) {
        if (run == 1) {
            ops[1].dtype = SPYRE_DTYPE_INT32;   /* a store type mismatch */
            g_assert_cmpuint(kernel_run(cd, &p, ops, 2, NULL, 0, size, &c),
                             ==, SPYRE_STATUS_BAD_PROGRAM);
            ops[1].dtype = SPYRE_DTYPE_FP32;
            continue;
        }
        if (run == 3) {
            p.in[2].op = SPYRE_KOP_ABS;         /* one byte apart */
        }
        g_assert_cmpuint(kernel_run(cd, &p, ops, 2, NULL, 0, size, &c), ==,
                         SPYRE_STATUS_OK);
        buf_get(cd, by, y, N * 4);
        for (k = 0; k < N; k++) {
            g_assert_cmpfloat(y[k], ==, run == 3 ? fabsf(x[k]) : -x[k]);
        }
    }
    kp_init(&e, dt, 2, 0, 1, 0, 0);
    size[0] = 1 << 20;
    g_assert_cmpuint(kernel_run(cd, &e, ops, 2, NULL, 0, size, &c), ==,
                     SPYRE_STATUS_OK);
    g_assert_cmpuint(kernel_run(cd, &e, ops, 2, NULL, 0, size, &c), ==,
                     SPYRE_STATUS_OK);
}

static void test_kernel(void)
{
    Spyre *sp = spyre_start(NULL);
    Card cd;

    g_assert_true(rd64(sp, SPYRE_REG_CAPS) & SPYRE_CAP_KERNEL);
    card_init(&cd, sp, 3, 1);
    do_kernel_refusals(&cd);
    do_kernel_pointwise(&cd);
    do_kernel_softmax(&cd);
    do_kernel_bounds(&cd);
    do_kernel_rewrite(&cd);
    do_kernel_cache(&cd);
    spyre_stop(sp);
}

int main(int argc, char **argv)
{
    const char *s = getenv("SPYRE_QTEST_SLOW");

    g_test_init(&argc, &argv, NULL);
    if (s && atoi(s) > 1) {
        slow = atoi(s);
    }

    qtest_add_func("/spyre/identity", test_identity);
    qtest_add_func("/spyre/scratch-clock", test_scratch_clock);
    qtest_add_func("/spyre/jobs", test_jobs);
    qtest_add_func("/spyre/jobs-rootport-iommu", test_jobs_rootport_iommu);
    qtest_add_func("/spyre/priority", test_priority);
    qtest_add_func("/spyre/doorbell", test_doorbell);
    qtest_add_func("/spyre/msix", test_msix);
    qtest_add_func("/spyre/mmu-fault", test_mmu_fault);
    qtest_add_func("/spyre/bad-input", test_bad_input);
    qtest_add_func("/spyre/queue-reset", test_queue_reset);
    qtest_add_func("/spyre/semaphores", test_semaphores);
    qtest_add_func("/spyre/compute", test_compute);
    qtest_add_func("/spyre/preempt", test_preempt);
    qtest_add_func("/spyre/kernel-run", test_kernel);
    qtest_add_func("/spyre/kernel-cores", test_kernel_cores);
    qtest_add_func("/spyre/global-reset", test_global_reset);
    qtest_add_func("/spyre/flr", test_flr);
    qtest_add_func("/spyre/hotplug", test_hotplug);
    qtest_add_func("/spyre/unplug-acpi", test_unplug_acpi);
    qtest_add_func("/spyre/migration", test_migration);
    qtest_add_func("/spyre/migration-running", test_migration_running);
    qtest_add_func("/spyre/inject-fatal", test_inject_fatal);
    qtest_add_func("/spyre/inject-irq", test_inject_irq);
    qtest_add_func("/spyre/inject-corrupt", test_inject_corrupt);
    qtest_add_func("/spyre/inject-mmu-fault", test_inject_mmu_fault);
    qtest_add_func("/spyre/inject-count", test_inject_count);
    qtest_add_func("/spyre/inject-bad", test_inject_bad);
    qtest_add_func("/spyre/inject-migration", test_inject_migration);
    if (g_test_perf()) {
        qtest_add_func("/spyre/perf", test_perf);
    }

    return g_test_run();
}
