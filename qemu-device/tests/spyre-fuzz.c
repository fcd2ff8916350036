/*
 * libFuzzer target "spyre-cmds" for the Spyre card model
 *
 * QEMU's generic-fuzz reaches the card's registers but rarely a job: a
 * job needs page tables, a ring, a completion address and a command
 * stream in guest memory first.  This target builds all of that before
 * every input (two contexts with data, command and device-memory pages,
 * four queues of 16 entries) and reads the input as a list of records
 * that submit command streams, write registers and PTEs and change the
 * data the commands work on.  After the input it waits a bounded time for
 * the queues to go idle and resets the machine.
 *
 * Built only by scripts/build-qemu.sh --fuzz (copied into
 * tests/qtest/fuzz/); run by scripts/fuzz-card.sh.  With SPYRE_FUZZ_SEEDS
 * set to a directory, the target writes seed inputs there when it starts
 * (one valid job per command kind, two kernels, a fault, a queue reset
 * under a GEMM),
 * before libFuzzer reads its corpus directories.
 *
 * Copyright (c) 2026 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/main-loop.h"
#include "tests/qtest/libqtest.h"
#include "tests/qtest/libqos/pci.h"
#include "tests/qtest/libqos/pci-pc.h"
#include "fuzz.h"

#include "spyre_hw.h"
#include "drm/spyre_accel.h"
#include "spyre/spyre_encode.h"

#define PAGE            SPYRE_PAGE_SIZE
#define NQUEUES         4
#define NCTX            2                       /* contexts 1 and 2 */
#define RING_ENTRIES    16
#define DEV_SIZE        (16 * 1024 * 1024)

/* Device VAs, the same in both contexts. */
#define DATA_VA         0x00100000ULL           /* 64 pages, RW, system */
#define DATA_PAGES      64
#define CMD_VA          0x00180000ULL           /* 16 pages, RO, system */
#define CMD_PAGES       16
#define DEV_VA          0x00400000ULL           /* 256 pages, device */
#define DEV_PAGES       256

/* Guest physical layout (-m 128M). */
#define PT_PA(c)        (0x01000000ULL + (c) * 0x10000ULL)
#define DATA_PA(c)      (0x02000000ULL + (c) * 0x100000ULL)
#define CMD_PA(c)       (DATA_PA(c) + DATA_PAGES * PAGE)
#define RING_PA(q)      (0x03000000ULL + (q) * PAGE)
#define COMPL_PA(q)     (0x03100000ULL + (q) * PAGE)

/* How long the end of an input waits for the queues, at most. */
#define IDLE_WAIT_US    (100 * 1000)

enum {
    REC_JOB,        /* q|ctx, flags, len16, stream[len] */
    REC_REG32,      /* off24, val32 */
    REC_REG64,      /* off24, val64 */
    REC_MEM,        /* ctx|off24, len8, bytes[len]: data pages */
    REC_DEV,        /* off24, len8, bytes[len]: BAR2 */
    REC_WAIT,       /* ms8 */
    REC_READ,       /* off24 */
    REC_PTE,        /* ctx, index16, pte64: a leaf entry */
    REC_COUNT
};

typedef struct Fuzz {
    QPCIBus *bus;
    QPCIDevice *dev;
    uint64_t mmio_alloc_start;
    QPCIBar bar0;
    QPCIBar bar2;
    uint32_t tail[NQUEUES];
    uint64_t seqno[NQUEUES];
    uint32_t cmd_off[NCTX];
} Fuzz;

static Fuzz fz;

static void wr32(uint64_t reg, uint32_t val)
{
    qpci_io_writel(fz.dev, fz.bar0, reg, val);
}

static void wr64(uint64_t reg, uint64_t val)
{
    qpci_io_writeq(fz.dev, fz.bar0, reg, val);
}

static uint32_t rd32(uint64_t reg)
{
    return qpci_io_readl(fz.dev, fz.bar0, reg);
}

/*
 * Page tables of context @c (0 or 1 here, card context c + 1): root,
 * one table per inner level and two leaf tables, one for the first
 * 2 MiB of VA (data and commands), one for the device pages at 4 MiB.
 */
static uint64_t leaf_pa(unsigned int c, unsigned int i)
{
    return PT_PA(c) + (3 + i) * PAGE;
}

static void build_tables(QTestState *s, unsigned int c)
{
    uint64_t t[SPYRE_PT_ENTRIES];
    unsigned int lvl, i;

    for (lvl = 0; lvl < SPYRE_PT_LEVELS - 1; lvl++) {
        memset(t, 0, sizeof(t));
        if (lvl < SPYRE_PT_LEVELS - 2) {
            t[SPYRE_PT_INDEX(DATA_VA, lvl)] =
                cpu_to_le64((PT_PA(c) + (lvl + 1) * PAGE) | SPYRE_PTE_VALID);
        } else {
            t[SPYRE_PT_INDEX(DATA_VA, lvl)] =
                cpu_to_le64(leaf_pa(c, 0) | SPYRE_PTE_VALID);
            t[SPYRE_PT_INDEX(DEV_VA, lvl)] =
                cpu_to_le64(leaf_pa(c, 1) | SPYRE_PTE_VALID);
        }
        qtest_memwrite(s, PT_PA(c) + lvl * PAGE, t, sizeof(t));
    }

    memset(t, 0, sizeof(t));
    for (i = 0; i < DATA_PAGES; i++) {
        t[SPYRE_PT_INDEX(DATA_VA + i * PAGE, 3)] =
            cpu_to_le64((DATA_PA(c) + i * PAGE) | SPYRE_PTE_VALID |
                        SPYRE_PTE_WRITE);
    }
    for (i = 0; i < CMD_PAGES; i++) {
        t[SPYRE_PT_INDEX(CMD_VA + i * PAGE, 3)] =
            cpu_to_le64((CMD_PA(c) + i * PAGE) | SPYRE_PTE_VALID);
    }
    qtest_memwrite(s, leaf_pa(c, 0), t, sizeof(t));

    /* Context 2's device pages overlap half of context 1's. */
    memset(t, 0, sizeof(t));
    for (i = 0; i < DEV_PAGES; i++) {
        t[SPYRE_PT_INDEX(DEV_VA + i * PAGE, 3)] =
            cpu_to_le64((c * DEV_PAGES / 2 + i) * PAGE | SPYRE_PTE_VALID |
                        SPYRE_PTE_WRITE | SPYRE_PTE_DEVMEM);
    }
    qtest_memwrite(s, leaf_pa(c, 1), t, sizeof(t));
}

/* Everything a driver sets up before its first job; the machine is fresh. */
static void card_setup(QTestState *s)
{
    unsigned int q, c;

    fz.bus->mmio_alloc_ptr = fz.mmio_alloc_start;
    qpci_device_enable(fz.dev);
    fz.bar0 = qpci_iomap(fz.dev, SPYRE_BAR_REGS, NULL);
    fz.bar2 = qpci_iomap(fz.dev, SPYRE_BAR_DEVMEM, NULL);
    qpci_msix_enable(fz.dev);

    for (c = 0; c < NCTX; c++) {
        build_tables(s, c);
        wr64(SPYRE_REG_CTX_ROOT(c + 1), PT_PA(c) | SPYRE_PTE_VALID);
        fz.cmd_off[c] = 0;
    }
    for (q = 0; q < NQUEUES; q++) {
        qtest_memset(s, RING_PA(q), 0, RING_ENTRIES * 64);
        qtest_memset(s, COMPL_PA(q), 0, 64);
        wr64(SPYRE_QUEUE_REG(q, SPYRE_Q_RING_BASE), RING_PA(q));
        wr32(SPYRE_QUEUE_REG(q, SPYRE_Q_RING_ENTRIES), RING_ENTRIES);
        wr64(SPYRE_QUEUE_REG(q, SPYRE_Q_COMPL_ADDR), COMPL_PA(q));
        /* Queue 3 is high priority; vectors 1..4 (0 reports errors). */
        wr32(SPYRE_QUEUE_REG(q, SPYRE_Q_CONTROL),
             SPYRE_Q_CONTROL_ENABLE | SPYRE_Q_CONTROL_VECTOR(q + 1) |
             SPYRE_Q_CONTROL_PRIO(q == 3 ? SPYRE_Q_PRIO_HIGH :
                                  SPYRE_Q_PRIO_NORMAL));
        fz.tail[q] = 0;
        fz.seqno[q] = 0;
    }
    wr32(SPYRE_REG_IRQ_MASK, ~0u);
    wr32(SPYRE_REG_CONTROL, SPYRE_CONTROL_ENABLE);
}

/* Let the card's workers and bottom halves run for about @us. */
static void run_for(QTestState *s, int64_t us)
{
    int64_t end = g_get_monotonic_time() + us;
    unsigned int q;

    while (g_get_monotonic_time() < end) {
        bool busy = false;

        flush_events(s);
        for (q = 0; q < NQUEUES; q++) {
            uint32_t st = rd32(SPYRE_QUEUE_REG(q, SPYRE_Q_STATUS));

            busy |= st == SPYRE_QS_BUSY || st == SPYRE_QS_SEM_WAIT;
        }
        if (!busy) {
            return;
        }
        bql_unlock();
        g_usleep(50);   /* as a vCPU waits, without the BQL */
        bql_lock();     /* back: QEMU's fuzz targets run with it held */
    }
}

/*
 * Put @len bytes of stream in the command pages of table set @c and ring
 * it on queue @q for card context @ctx (1 and 2 have tables, c = ctx - 1;
 * 0 and 3 have none and run on the pages of set ctx % 2 to fail).
 */
static void submit(QTestState *s, unsigned int q, unsigned int ctx,
                   uint16_t flags, const uint8_t *stream, uint32_t len)
{
    struct spyre_hw_job j = { 0 };
    unsigned int c = (ctx + 1) % NCTX;
    uint32_t off = fz.cmd_off[c];

    if (off + len > CMD_PAGES * PAGE) {
        off = 0;
    }
    qtest_memwrite(s, CMD_PA(c) + off, stream, len);
    fz.cmd_off[c] = ROUND_UP(off + len, 8);

    j.seqno = cpu_to_le64(++fz.seqno[q]);
    j.cmd_va = cpu_to_le64(CMD_VA + off);
    j.cmd_size = cpu_to_le32(len);
    j.ctx = cpu_to_le16(ctx);
    j.flags = cpu_to_le16(flags);
    qtest_memwrite(s, RING_PA(q) + fz.tail[q] * 64, &j, sizeof(j));
    fz.tail[q] = (fz.tail[q] + 1) % RING_ENTRIES;
    wr32(SPYRE_QUEUE_REG(q, SPYRE_Q_DOORBELL), fz.tail[q]);
}

static uint32_t ld24(const uint8_t *p)
{
    return p[0] | p[1] << 8 | p[2] << 16;
}

/* Bytes before each record's payload (the whole record if it has none). */
static const uint8_t rec_head[REC_COUNT] = {
    [REC_JOB] = 5, [REC_REG32] = 8, [REC_REG64] = 12, [REC_MEM] = 5,
    [REC_DEV] = 5, [REC_WAIT] = 2, [REC_READ] = 4, [REC_PTE] = 12,
};

static void spyre_fuzz(QTestState *s, const unsigned char *d, size_t size)
{
    const uint8_t *end = d + size;

    card_setup(s);
    while (d < end) {
        unsigned int kind = d[0] % REC_COUNT;
        size_t left;
        uint32_t n = 0;     /* payload bytes */

        if ((size_t)(end - d) < rec_head[kind]) {
            break;
        }
        left = end - d - rec_head[kind];
        switch (kind) {
        case REC_JOB:
            n = MIN(MIN(lduw_le_p(d + 3), left), CMD_PAGES * PAGE);
            submit(s, d[1] % NQUEUES, (d[1] >> 2) % 4, d[2], d + 5, n);
            break;
        case REC_REG32:
            wr32(ld24(d + 1) % SPYRE_BAR0_SIZE & ~3u, ldl_le_p(d + 4));
            break;
        case REC_REG64:
            wr64(ld24(d + 1) % SPYRE_BAR0_SIZE & ~7u, ldq_le_p(d + 4));
            break;
        case REC_MEM:
            n = MIN(d[4], left);
            qtest_memwrite(s, DATA_PA(d[1] & 1) +
                           ld24(d + 1) % (DATA_PAGES * PAGE - 256),
                           d + 5, n);
            break;
        case REC_DEV:
            n = MIN(d[4], left);
            qpci_memwrite(fz.dev, fz.bar2, ld24(d + 1) % (DEV_SIZE - 256),
                          d + 5, n);
            break;
        case REC_WAIT:
            run_for(s, (d[1] % 16) * 1000);
            break;
        case REC_READ:
            rd32(ld24(d + 1) % SPYRE_BAR0_SIZE & ~3u);
            break;
        case REC_PTE:
            qtest_writeq(s, leaf_pa(d[1] & 1, d[1] >> 1 & 1) +
                         8 * (lduw_le_p(d + 2) % SPYRE_PT_ENTRIES),
                         ldq_le_p(d + 4));
            break;
        }
        d += rec_head[kind] + n;
    }
    run_for(s, IDLE_WAIT_US);
    fuzz_reset(s);
}

/* ---- seeds: one valid job per command kind ---------------------------- */

/*
 * A seed is a list of JOB records.  seed_job() returns an aligned buffer
 * for the command's encoder; the record is appended when the next one
 * starts or the seed is written.
 */
typedef struct Seed {
    uint8_t buf[1024];
    size_t len;
    uint64_t cmd[32];
    uint32_t cmd_len;
} Seed;

static void seed_flush(Seed *sd)
{
    memcpy(sd->buf + sd->len - sd->cmd_len, sd->cmd, sd->cmd_len);
    sd->cmd_len = 0;
}

static void *seed_job(Seed *sd, unsigned int q, unsigned int ctx,
                      uint32_t len)
{
    uint8_t *r;

    seed_flush(sd);
    g_assert(sd->len + 5 + len <= sizeof(sd->buf) && len <= sizeof(sd->cmd));
    r = sd->buf + sd->len;
    r[0] = REC_JOB;
    r[1] = q | ctx << 2;
    r[2] = SPYRE_JOB_F_IRQ;
    stw_le_p(r + 3, len);
    sd->len += 5 + len;
    sd->cmd_len = len;
    memset(sd->cmd, 0, len);
    return sd->cmd;
}

static void seed_write(const char *dir, const char *name, Seed *sd)
{
    g_autofree char *path = g_strdup_printf("%s/seed-%s", dir, name);

    seed_flush(sd);
    if (!g_file_set_contents(path, (const char *)sd->buf, sd->len, NULL)) {
        fprintf(stderr, "spyre-cmds: cannot write %s\n", path);
    }
}

/*
 * A kernel program written into context 1's data pages at DATA_VA + @off
 * (a REC_MEM record: at most 11 instructions), then a job running it:
 * libFuzzer mutates both, so the verifier and the engine see random and
 * mutated programs.
 */
static void seed_kernel(Seed *sd, uint32_t off,
                        const struct spyre_kprog_header *h,
                        const struct spyre_kinst *in,
                        const struct spyre_kernel_operand *ops,
                        const uint64_t *params, const uint64_t *size)
{
    uint32_t psize = 64 + 16 * h->ninsts;
    uint32_t len = SPYRE_CMD_KERNEL_SIZE(h->noperands, h->nparams);
    struct spyre_cmd_kernel *k;
    uint8_t *r;

    seed_flush(sd);
    g_assert(psize <= 255 && sd->len + 5 + psize <= sizeof(sd->buf));
    r = sd->buf + sd->len;
    r[0] = REC_MEM;
    r[1] = off;
    r[2] = off >> 8;
    r[3] = off >> 16;
    r[4] = psize;
    memcpy(r + 5, h, 64);
    memcpy(r + 5 + 64, in, 16 * h->ninsts);
    sd->len += 5 + psize;
    k = seed_job(sd, 1, 1, len);
    k->hdr.opcode = cpu_to_le16(SPYRE_OP_KERNEL);
    k->hdr.size = cpu_to_le32(len);
    k->prog = cpu_to_le64(DATA_VA + off);
    k->prog_size = cpu_to_le32(psize);
    k->noperands = cpu_to_le16(h->noperands);
    k->nparams = cpu_to_le16(h->nparams);
    k->npdims = cpu_to_le16(h->npdims);
    k->nrdims = cpu_to_le16(h->nrdims);
    memcpy(k->size, size, sizeof(k->size));
    memcpy(k + 1, ops, h->noperands * sizeof(*ops));
    memcpy((uint8_t *)(k + 1) + h->noperands * sizeof(*ops), params,
           h->nparams * 8);
}

#define KI(op_, t_, mod_, dst_, a_, b_, c_, imm_) \
    { .op = (op_), .type = (t_), .mod = (mod_), .dst = (dst_), .a = (a_), \
      .b = (b_), .c = (c_), .imm = (imm_) }
#define KN SPYRE_KVAL_NONE

static void write_kernel_seeds(const char *dir, uint64_t a, uint64_t o)
{
    static const struct spyre_kinst pw[] = {
        KI(SPYRE_KOP_IDX, SPYRE_KTYPE_I64, 0, 0, KN, KN, KN, 0),
        KI(SPYRE_KOP_LOAD, SPYRE_KTYPE_F32, 0, 1, 0, KN, KN, 0),
        KI(SPYRE_KOP_EXP, SPYRE_KTYPE_F32, 0, 2, 1, KN, KN, 0),
        KI(SPYRE_KOP_TANH, SPYRE_KTYPE_F32, 0, 3, 2, KN, KN, 0),
        KI(SPYRE_KOP_CVT, SPYRE_KTYPE_I32, SPYRE_DTYPE_INT8, 4, 3, KN, KN, 0),
        KI(SPYRE_KOP_CVT, SPYRE_KTYPE_F32, 0, 5, 4, KN, KN, 0),
        KI(SPYRE_KOP_FMA, SPYRE_KTYPE_F32, 0, 6, 5, 1, 3, 0),
        KI(SPYRE_KOP_STORE, 0, SPYRE_KMOD_SAT, KN, 0, KN, 6, 1),
    };
    static const struct spyre_kinst red[] = {
        KI(SPYRE_KOP_AFFINE, SPYRE_KTYPE_I64, 1, 0, KN, KN, KN, 0),
        KI(SPYRE_KOP_PASS, 0, 0, KN, KN, KN, KN, 0),
        KI(SPYRE_KOP_AFFINE, SPYRE_KTYPE_I64, 1 << 6, 1, 0, KN, KN, 1),
        KI(SPYRE_KOP_LOAD, SPYRE_KTYPE_F32, 0, 2, 1, KN, KN, 0),
        KI(SPYRE_KOP_REDUCE, SPYRE_KTYPE_F32, SPYRE_KRED_WELFORD, 3, 2, KN,
           KN, KN),
        KI(SPYRE_KOP_REDUCE, SPYRE_KTYPE_I64, SPYRE_KRED_ARGMAX, 6, 2, KN,
           KN, KN),
        KI(SPYRE_KOP_ENDPASS, 0, 0, KN, KN, KN, KN, 0),
        KI(SPYRE_KOP_IDX, SPYRE_KTYPE_I64, 0, 7, KN, KN, KN, 0),
        KI(SPYRE_KOP_STORE, 0, 0, KN, 7, KN, 4, 1),
    };
    struct spyre_kprog_header h = {
        .magic = cpu_to_le32(SPYRE_KPROG_MAGIC),
        .version = cpu_to_le16(SPYRE_KPROG_VERSION),
        .noperands = 2,
    };
    struct spyre_kernel_operand ops[2] = {
        { .va = cpu_to_le64(a), .extent = cpu_to_le64(4096),
          .dtype = cpu_to_le32(SPYRE_DTYPE_FP16) },
        { .va = cpu_to_le64(o), .extent = cpu_to_le64(4096),
          .dtype = cpu_to_le32(SPYRE_DTYPE_FP8_E4M3) },
    };
    uint64_t params[2] = { cpu_to_le64(64), cpu_to_le64(1) };
    uint64_t size[9] = { cpu_to_le64(2048) };
    Seed sd;

    sd = (Seed){ 0 };
    h.ninsts = cpu_to_le32(ARRAY_SIZE(pw));
    h.nvalues = cpu_to_le32(7);
    h.npdims = 1;
    h.dtype[0] = SPYRE_DTYPE_FP16;
    h.dtype[1] = SPYRE_DTYPE_FP8_E4M3;
    seed_kernel(&sd, 0x18000, &h, pw, ops, params, size);
    seed_write(dir, "kernel", &sd);

    sd = (Seed){ 0 };
    h.ninsts = cpu_to_le32(ARRAY_SIZE(red));
    h.nvalues = cpu_to_le32(8);
    h.nparams = 2;
    h.nrdims = 1;
    h.npasses = 1;
    h.dtype[0] = SPYRE_DTYPE_FP32;
    h.dtype[1] = SPYRE_DTYPE_FP32;
    ops[0].dtype = cpu_to_le32(SPYRE_DTYPE_FP32);
    ops[1].dtype = cpu_to_le32(SPYRE_DTYPE_FP32);
    size[0] = cpu_to_le64(16);
    size[6] = cpu_to_le64(64);
    seed_kernel(&sd, 0x18000, &h, red, ops, params, size);
    seed_write(dir, "kernel-reduce", &sd);
}

static void write_seeds(const char *dir)
{
    const uint64_t a = DATA_VA, b = DATA_VA + 0x8000, o = DATA_VA + 0x10000;
    const uint64_t dev = DEV_VA;
    Seed sd;

    sd = (Seed){ 0 };
    spyre_cmd_nop_init(seed_job(&sd, 0, 1, sizeof(struct spyre_cmd_nop)));
    seed_write(dir, "nop", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_fill_init(seed_job(&sd, 0, 1, sizeof(struct spyre_cmd_fill)),
                        dev, 1024, 4, 0x3f800000);
    seed_write(dir, "fill", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_copy_init(seed_job(&sd, 1, 1, sizeof(struct spyre_cmd_copy)),
                        0, dev, 256, SPYRE_DTYPE_FP16, a, 512,
                        SPYRE_DTYPE_FP32, 64, 16);
    seed_write(dir, "copy-convert", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_copy_init(seed_job(&sd, 1, 2, sizeof(struct spyre_cmd_copy)),
                        0, a, 0x4000, SPYRE_DTYPE_U8, dev, 0x4000,
                        SPYRE_DTYPE_U8, 0x4000, 8);
    seed_write(dir, "copy-bytes", &sd);

    sd = (Seed){ 0 };
    {
        struct spyre_cmd_gemm *g = seed_job(&sd, 2, 1, sizeof(*g));

        spyre_cmd_gemm_init(g, 0, SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP16,
                            SPYRE_DTYPE_FP32, 32, 32, 32, a, 32, b, 32,
                            o, 32);
        spyre_cmd_gemm_batch(g, 2, 0, 0, 4096);
    }
    seed_write(dir, "gemm", &sd);

    sd = (Seed){ 0 };
    {
        struct spyre_cmd_gemm *g = seed_job(&sd, 2, 1, sizeof(*g));

        spyre_cmd_gemm_init(g, 0, SPYRE_DTYPE_FP8_E4M3,
                            SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_BF16, 16, 64,
                            64, dev, 64, dev + 0x1000, 64, o, 64);
        spyre_cmd_gemm_scales(g, b, b + 4, b + 8);
        spyre_cmd_gemm_epilogue(g, SPYRE_CMD_F32_ONE, 0, SPYRE_DTYPE_FP32,
                                b + 64);
    }
    seed_write(dir, "gemm-fp8", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_eltwise_init(seed_job(&sd, 0, 1,
                                    sizeof(struct spyre_cmd_eltwise)),
                           SPYRE_ELT_ADD, SPYRE_DTYPE_FP16, 2048, o, a, b,
                           SPYRE_CMD_F32_ONE);
    seed_write(dir, "eltwise", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_reduce_init(seed_job(&sd, 0, 1,
                                   sizeof(struct spyre_cmd_reduce)),
                          SPYRE_REDUCE_SUM, SPYRE_DTYPE_FP32, 16, 64, o, a,
                          64);
    seed_write(dir, "reduce", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_rowop_init(seed_job(&sd, 3, 1, sizeof(struct spyre_cmd_rowop)),
                         SPYRE_ROW_LAYERNORM, SPYRE_DTYPE_BF16, 8, 128, o,
                         128, a, 128, b,
                         b + 256, 0x3727c5ac);
    seed_write(dir, "rowop", &sd);

    sd = (Seed){ 0 };
    spyre_cmd_timestamp_init(seed_job(&sd, 3, 2,
                                      sizeof(struct spyre_cmd_timestamp)),
                             o);
    seed_write(dir, "timestamp", &sd);

    /* A wait on queue 0 released by a signal from queue 1. */
    sd = (Seed){ 0 };
    spyre_cmd_sem_init(seed_job(&sd, 0, 1, sizeof(struct spyre_cmd_sem)),
                       SPYRE_OP_SEM_WAIT, 0, a, 1);
    spyre_cmd_sem_init(seed_job(&sd, 1, 1, sizeof(struct spyre_cmd_sem)),
                       SPYRE_OP_SEM_SIGNAL, 0, a, 1);
    seed_write(dir, "sem", &sd);

    /* A write to an unmapped VA, a write to the read-only command pages. */
    sd = (Seed){ 0 };
    spyre_cmd_fill_init(seed_job(&sd, 0, 1, sizeof(struct spyre_cmd_fill)),
                        0x00800000, 16, 4, 0);
    spyre_cmd_fill_init(seed_job(&sd, 1, 2, sizeof(struct spyre_cmd_fill)),
                        CMD_VA, 16, 4, 0);
    seed_write(dir, "fault", &sd);

    /* A long GEMM, its queue reset under it, an MMU invalidation, a NOP. */
    sd = (Seed){ 0 };
    spyre_cmd_gemm_init(seed_job(&sd, 2, 1, sizeof(struct spyre_cmd_gemm)),
                        0, SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32,
                        SPYRE_DTYPE_FP32, 256, 256, 256, dev, 256, dev, 256,
                        dev + 0x40000, 256);
    seed_flush(&sd);
    sd.buf[sd.len++] = REC_WAIT;
    sd.buf[sd.len++] = 1;
    stl_le_p(sd.buf + sd.len, REC_REG32 |
             (uint32_t)SPYRE_QUEUE_REG(2, SPYRE_Q_RESET) << 8);
    stl_le_p(sd.buf + sd.len + 4, 1);
    sd.len += 8;
    stq_le_p(sd.buf + sd.len, REC_REG64 |
             (uint64_t)SPYRE_REG_MMU_INVAL << 8);
    stq_le_p(sd.buf + sd.len + 4, 1);
    sd.len += 12;
    spyre_cmd_nop_init(seed_job(&sd, 2, 1, sizeof(struct spyre_cmd_nop)));
    seed_write(dir, "reset", &sd);

    write_kernel_seeds(dir, a, o);
}

/* ---- registration --------------------------------------------------- */

static GString *spyre_fuzz_cmdline(FuzzTarget *t)
{
    const char *extra = getenv("QEMU_FUZZ_ARGS");
    GString *cmd = g_string_new(TARGET_NAME);

    g_string_append_printf(cmd, " -machine q35,accel=qtest -nodefaults"
                           " -m 128M -display none"
                           " -device spyre,addr=04.0,mem-size=%d,queues=%d,"
                           "contexts=8,vectors=5,workers=1 %s",
                           DEV_SIZE, NQUEUES, extra ? extra : "");
    return cmd;
}

/* Before libFuzzer reads its corpus directories: the seeds. */
static void spyre_pre_vm_init(void)
{
    const char *seeds = getenv("SPYRE_FUZZ_SEEDS");

    if (seeds) {
        write_seeds(seeds);
    }
}

static void spyre_pre_fuzz(QTestState *s)
{
    fz.bus = qpci_new_pc(s, NULL);
    fz.mmio_alloc_start = fz.bus->mmio_alloc_ptr;
    fz.dev = qpci_device_find(fz.bus, QPCI_DEVFN(4, 0));
    g_assert(fz.dev);
}

static void register_spyre_fuzz_targets(void)
{
    fuzz_add_target(&(FuzzTarget){
        .name = "spyre-cmds",
        .description = "Fuzz the Spyre card's jobs, command streams, "
                       "page tables and registers",
        .get_init_cmdline = spyre_fuzz_cmdline,
        .pre_vm_init = spyre_pre_vm_init,
        .pre_fuzz = spyre_pre_fuzz,
        .fuzz = spyre_fuzz,
    });
}

fuzz_target_init(register_spyre_fuzz_targets);
