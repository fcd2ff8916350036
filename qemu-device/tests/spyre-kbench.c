/*
 * Native benchmark and bit-exactness harness of the KERNEL engine's core
 * (../spyre-kernel.c), no QEMU: programs are built with libspyre's
 * builder (kbuild.c, compiled in), run tile by tile through a SpyreKIO
 * on host buffers, and compared bit for bit (outputs, status, details)
 * with the same runs of a frozen copy of the core (BASE in
 * Makefile.kernel, renamed base_*), and part 2's instructions, which the
 * base lacks, with libspyre's reference interpreter (kref.c, compiled
 * in).  See Makefile.kernel.
 *
 *   spyre-kbench check [N]   the issue's three kernels plus N random
 *                            programs (default 300) against the base,
 *                            once per host code path of the core
 *                            (spyre_kernel_isas()), the fp16
 *                            conversions swept, MAX and MIN over rows
 *                            of special values, memory reached
 *                            through SpyreKIO.map in one piece, in
 *                            4 KiB pieces, or through access only
 *                            then the Philox known answers and N random
 *                            part 2 programs (SCATTER, SCAN, RAND, rows
 *                            gathered and scattered) against libspyre's
 *                            reference interpreter
 *   spyre-kbench check-part2 [N]  the part 2 half alone
 *   spyre-kbench bench-part2 [NAME]  part 2's figures (gather, scatter,
 *                            scatter-add, uniform, normal, cumsum, or
 *                            only NAME) beside memcpy, one core (the
 *                            best of 5 runs or $KB_REPS; $KB_RAND_N
 *                            random numbers instead of 4 Mi)
 *   spyre-kbench rand-digest  the RAND digest of the check, per path
 *   spyre-kbench bench       ns/element of the issue's kernels, new core
 *                            (wall time and this thread's CPU time; the
 *                            best of 3 runs or $KB_REPS, only kernel
 *                            $KB_ONLY: 0 fused8, 1 rowsum, 2 softmax;
 *                            $KB_N: fused8's elements, 4 Mi;
 *                            $KB_ROWS: the row kernels' rows, 1024;
 *                            $KB_ONES: rows of ones, as spyre-bench's)
 *   spyre-kbench bench-base  the same with the base core
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spyre/spyre.h>
#include <spyre/spyre_encode.h>
#include <spyre/spyre_ref.h>
#include "spyre-kernel.h"

#define KMAXU(a, b) ((a) > (b) ? (a) : (b))

/* The frozen core, its symbols renamed (Makefile.kernel). */
uint32_t base_kernel_verify(SpyreKProg *p, const uint8_t *bytes,
                            uint32_t size, const SpyreKLaunch *l,
                            uint64_t *detail);
bool base_kernel_prepare(SpyreKRun *r, const SpyreKProg *p,
                         const SpyreKLaunch *l, const SpyreKIO *io);
void base_kernel_free(SpyreKRun *r);
uint32_t base_kernel_tile(SpyreKRun *r, uint64_t pt0);

#define N_ SPYRE_KERNEL_NONE

typedef struct Buf {
    uint8_t *data;
    uint64_t extent;
    uint32_t dtype;
    uint64_t fault;             /* offsets >= fault: MMU fault */
} Buf;

typedef struct Host {
    Buf *b;
    uint64_t faults;
} Host;

/* How the new core's runs reach memory: 0 access only, else map too. */
static int map_mode = 1;
#define MAP_PIECE   4096        /* map_mode 2: pieces end at 4 KiB */

static uint8_t *h_map(void *opaque, unsigned int opnd, bool write,
                      uint64_t off, uint64_t *n)
{
    Host *h = opaque;
    Buf *b = &h->b[opnd];
    size_t es = spyre_cmd_dtype_size(b->dtype);
    uint64_t end = b->fault < b->extent ? b->fault : b->extent;

    if (off >= end) {
        return NULL;            /* access reports the fault */
    }
    if (end - off < *n) {
        *n = end - off;
    }
    if (map_mode == 2) {
        uint64_t left = (MAP_PIECE - off * es % MAP_PIECE) / es;

        if (!left) {
            return NULL;        /* an element across the piece's end */
        }
        if (left < *n) {
            *n = left;
        }
    }
    return b->data + off * es;
}

static uint32_t h_access(void *opaque, unsigned int opnd, bool write,
                         const int64_t *off, const uint8_t *act, uint32_t n,
                         void *buf, uint32_t *lane)
{
    Host *h = opaque;
    Buf *b = &h->b[opnd];
    size_t es = spyre_cmd_dtype_size(b->dtype);
    uint8_t *p = buf;
    uint32_t j;

    uint32_t next;

    /* As spyre_kx_access: a run of consecutive offsets in one memcpy. */
    for (j = 0; j < n; j = next) {
        next = j + 1;
        if (!act[j]) {
            continue;
        }
        if ((uint64_t)off[j] >= b->fault) {
            *lane = j;
            return SPYRE_STATUS_MMU_FAULT;
        }
        while (next < n && act[next] && off[next] == off[next - 1] + 1 &&
               (uint64_t)off[next] < b->fault) {
            next++;
        }
        if (write) {
            memcpy(b->data + off[j] * es, p + j * es, (next - j) * es);
        } else {
            memcpy(p + j * es, b->data + off[j] * es, (next - j) * es);
        }
    }
    return SPYRE_STATUS_OK;
}

static void h_keep(void *opaque)
{
    ((Host *)opaque)->faults++;
}

static uint32_t h_boundary(void *opaque)
{
    return SPYRE_STATUS_OK;
}

typedef struct Launch {
    SpyreKLaunch l;
    const void *prog;
    uint32_t size;
} Launch;

typedef struct Res {
    uint32_t st;
    uint64_t detail, detail2;
} Res;

static SpyreKRun runs[2];

/* Run @lk on @b with the new core (@base false) or the frozen one. */
static Res run(const Launch *lk, Buf *b, bool base)
{
    static SpyreKProg prog;
    SpyreKRun *r = &runs[base];
    Host h = { .b = b };
    SpyreKIO io = { &h, map_mode && !base ? h_map : NULL, h_access, h_keep,
                    h_boundary };
    Res res = { 0 };
    uint64_t pt;
    uint32_t st;

    st = base ? base_kernel_verify(&prog, lk->prog, lk->size, &lk->l,
                                   &res.detail) :
         spyre_kernel_verify(&prog, lk->prog, lk->size, &lk->l, &res.detail);
    if (st) {
        res.st = st;
        return res;
    }
    if (!lk->l.P) {
        return res;
    }
    if (!(base ? base_kernel_prepare(r, &prog, &lk->l, &io) :
          spyre_kernel_prepare(r, &prog, &lk->l, &io))) {
        res.st = 0xdead;
        return res;
    }
    for (pt = 0; pt < lk->l.P; pt += r->tile) {
        st = base ? base_kernel_tile(r, pt) : spyre_kernel_tile(r, pt);
        if (st) {
            res.st = st;
            return res;
        }
        if (r->status) {
            break;
        }
    }
    res.st = r->status;
    res.detail = res.st ? r->detail : 0;
    res.detail2 = res.st ? r->detail2 : 0;
    return res;
}

static void mklaunch(Launch *lk, struct spyre_kernel *k, Buf *b,
                     uint32_t nb, const uint64_t *params, uint32_t np,
                     uint32_t npd, uint32_t nrd, const uint64_t *size)
{
    const void *prog;
    size_t psize;
    uint32_t i;

    memset(lk, 0, sizeof(*lk));
    if (spyre_kernel_finalize(k, &prog, &psize)) {
        fprintf(stderr, "finalize failed\n");
        exit(2);
    }
    lk->prog = prog;
    lk->size = psize;
    lk->l.noperands = nb;
    lk->l.nparams = np;
    lk->l.npdims = npd;
    lk->l.nrdims = nrd;
    if (np) {
        memcpy(lk->l.param, params, np * 8);
    }
    memcpy(lk->l.size, size, 9 * 8);
    for (i = 0; i < nb; i++) {
        lk->l.va[i] = 0x100000 * (i + 1);
        lk->l.extent[i] = b[i].extent;
        lk->l.dtype[i] = b[i].dtype;
    }
    lk->l.P = lk->l.R = 1;
    for (i = 0; i < npd; i++) {
        lk->l.P *= size[i];
    }
    for (i = 0; i < nrd; i++) {
        lk->l.R *= size[6 + i];
    }
}

/* ---- The issue's kernels (as spyre-bench's) ---- */

static struct spyre_kernel *k_fused8(void)
{
    const uint32_t dt[3] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32,
                             SPYRE_DTYPE_FP32 };
    struct spyre_kernel *k;
    int i, x, y, t, s;

    spyre_kernel_create(dt, 3, 1, 1, 0, &k);
    i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
    x = spyre_kernel_load(k, 0, i, N_, N_);
    y = spyre_kernel_load(k, 1, i, N_, N_);
    s = spyre_kernel_param(k, SPYRE_KTYPE_F32, 0);
    t = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, x, y, N_);
    t = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, t, x, N_);
    t = spyre_kernel_op(k, SPYRE_KOP_SUB, 0, t, y, N_);
    t = spyre_kernel_op(k, SPYRE_KOP_MAX, 0, t, y, N_);
    t = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, t, s, N_);
    t = spyre_kernel_op(k, SPYRE_KOP_FMA, 0, t, x, y);
    t = spyre_kernel_op(k, SPYRE_KOP_SIGMOID, 0, t, N_, N_);
    t = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, t, x, N_);
    spyre_kernel_store(k, 2, i, t, N_, 0);
    return k;
}

/*
 * A REDUCE @kind of each row of operand 0 (@dt[0], rows of P0 elements)
 * into operand 1 (@dt[1]); with @softmax (@kind MAX) the one-kernel
 * softmax of the rows instead.
 */
static struct spyre_kernel *k_rows_of(const uint32_t dt[2], uint32_t kind,
                                      bool softmax)
{
    struct spyre_kernel *k;
    int row, o, x, m, e, s;

    spyre_kernel_create(dt, 2, 1, 1, 1, &k);
    row = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N_, 1, 0);
    spyre_kernel_pass(k);
    o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
                        spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0),
                        N_);
    x = spyre_kernel_load(k, 0, o, N_, N_);
    m = spyre_kernel_reduce(k, kind, x, N_, N_, N_);
    spyre_kernel_endpass(k);
    if (!softmax) {
        spyre_kernel_store(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0),
                           m, N_, 0);
    } else {
        int pass;

        for (pass = 0; pass < 2; pass++) {
            spyre_kernel_pass(k);
            o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
                                spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                                 SPYRE_KDIM_R0), N_);
            x = spyre_kernel_load(k, 0, o, N_, N_);
            e = spyre_kernel_op(k, SPYRE_KOP_EXP, 0,
                                spyre_kernel_op(k, SPYRE_KOP_SUB, 0, x, m,
                                                N_), N_, N_);
            if (!pass) {
                s = spyre_kernel_reduce(k, SPYRE_KRED_SUM, e, N_, N_, N_);
            } else {
                spyre_kernel_store(k, 1, o,
                                   spyre_kernel_op(k, SPYRE_KOP_DIV, 0, e,
                                                   s, N_), N_, 0);
            }
            spyre_kernel_endpass(k);
        }
    }
    if (spyre_kernel_error(k)) {
        fprintf(stderr, "builder: %d\n", spyre_kernel_error(k));
        exit(2);
    }
    return k;
}

/* (x) a row sum, fp16 in, fp32 out, or (xi) a softmax, fp16 in and out. */
static struct spyre_kernel *k_rows(bool softmax)
{
    const uint32_t dt[2] = { SPYRE_DTYPE_FP16,
                             softmax ? SPYRE_DTYPE_FP16 : SPYRE_DTYPE_FP32 };

    return k_rows_of(dt, softmax ? SPYRE_KRED_MAX : SPYRE_KRED_SUM, softmax);
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void fill(Buf *b)
{
    size_t es = spyre_cmd_dtype_size(b->dtype), i;

    for (i = 0; i < b->extent * es; i++) {
        b->data[i] = rnd();
    }
    if (b->dtype == SPYRE_DTYPE_FP32) {         /* mostly sane values */
        for (i = 0; i < b->extent; i++) {
            float f = (float)((int64_t)(rnd() % 20001) - 10000) / 1000.0f;

            if (rnd() % 64) {
                memcpy(b->data + 4 * i, &f, 4);
            }
        }
    } else if (b->dtype == SPYRE_DTYPE_FP16) {
        for (i = 0; i < b->extent; i++) {
            if (rnd() % 64) {
                b->data[2 * i + 1] = 0x30 + rnd() % 0x1c;
            }
        }
    }
    /* No -0 in memory: ERF(-0) is -0 since spyre-kmath.c, +0 in BASE. */
    for (i = 0; spyre_dtype_is_float(b->dtype) && i < b->extent; i++) {
        uint32_t u = 0;
        double v;

        memcpy(&u, b->data + i * es, es);
        v = spyre_ref_decode(b->dtype, u);
        if (v == 0.0 && signbit(v)) {
            b->data[i * es + es - 1] = 0;   /* the sign bit's byte */
        }
    }
}

static Buf mkbuf(uint64_t extent, uint32_t dtype)
{
    Buf b = { .extent = extent, .dtype = dtype, .fault = UINT64_MAX };

    b.data = calloc(extent ? extent : 1, spyre_cmd_dtype_size(dtype));
    return b;
}

/*
 * Seconds on clock @id: CLOCK_MONOTONIC (wall time), or
 * CLOCK_THREAD_CPUTIME_ID (this thread's CPU time, steadier on a loaded
 * host).
 */
static double secs(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return secs(CLOCK_MONOTONIC);
}

static int failures, ran, st_count[4];

/* Run @lk on copies of @b with both cores; compare everything. */
static void differ(const char *name, const Launch *lk, Buf *b, uint32_t nb)
{
    Buf c[SPYRE_KERNEL_MAX_OPERANDS];
    Res x, y;
    uint32_t i;

    for (i = 0; i < nb; i++) {
        size_t sz = b[i].extent * spyre_cmd_dtype_size(b[i].dtype);

        c[i] = b[i];
        c[i].data = malloc(sz ? sz : 1);
        memcpy(c[i].data, b[i].data, sz);
    }
    x = run(lk, b, true);
    y = run(lk, c, false);
    ran++;
    st_count[x.st == 0 ? 0 : x.st == SPYRE_STATUS_OUT_OF_BOUNDS ? 1 :
             x.st == SPYRE_STATUS_MMU_FAULT ? 2 : 3]++;
    if (x.st != y.st || x.detail != y.detail || x.detail2 != y.detail2) {
        printf("not ok %s: status %#x/%#llx/%#llx, base %#x/%#llx/%#llx\n",
               name, y.st, (unsigned long long)y.detail,
               (unsigned long long)y.detail2, x.st,
               (unsigned long long)x.detail, (unsigned long long)x.detail2);
        failures++;
    }
    for (i = 0; i < nb; i++) {
        size_t sz = b[i].extent * spyre_cmd_dtype_size(b[i].dtype);

        if (memcmp(b[i].data, c[i].data, sz) && !x.st) {
            printf("not ok %s: operand %u differs\n", name, i);
            failures++;
        }
        free(c[i].data);
    }
}

/* The issue's kernels at size @n (fused8: n elements; rows: n x 4096). */
static void issue_kernels(bool bench, bool base, uint64_t n, uint64_t rows)
{
    uint64_t size[9] = { 0 }, param[1];
    Launch lk;
    Buf b[3];
    int which;

    for (which = 0; which < 3; which++) {
        struct spyre_kernel *k = which ? k_rows(which == 2) : k_fused8();
        const char *name = which == 0 ? "fused8 4Mi fp32" :
                           which == 1 ? "rowsum 1024x4096 fp16" :
                           "softmax 1024x4096 fp16";
        uint64_t elems;
        double t0, c0, best = 1e30, cbest = 1e30;
        int rep;

        if (getenv("KB_ONLY") && atoi(getenv("KB_ONLY")) != which) {
            spyre_kernel_destroy(k);
            continue;
        }
        memset(size, 0, sizeof(size));
        if (!which) {
            float s = 0.75f;
            uint32_t u;

            memcpy(&u, &s, 4);
            param[0] = u;
            size[0] = n;
            elems = n;
            b[0] = mkbuf(n, SPYRE_DTYPE_FP32);
            b[1] = mkbuf(n, SPYRE_DTYPE_FP32);
            b[2] = mkbuf(n, SPYRE_DTYPE_FP32);
            fill(&b[0]);
            fill(&b[1]);
            mklaunch(&lk, k, b, 3, param, 1, 1, 0, size);
        } else {
            param[0] = 4096;
            size[0] = rows;
            size[6] = 4096;
            elems = rows * 4096;
            b[0] = mkbuf(elems, SPYRE_DTYPE_FP16);
            b[1] = which == 1 ? mkbuf(rows, SPYRE_DTYPE_FP32) :
                                mkbuf(elems, SPYRE_DTYPE_FP16);
            fill(&b[0]);
            if (bench && getenv("KB_ONES")) {
                /* spyre-bench's data: every element 1.0 */
                for (uint64_t e = 0; e < elems; e++) {
                    b[0].data[2 * e] = 0x00;
                    b[0].data[2 * e + 1] = 0x3c;
                }
            }
            mklaunch(&lk, k, b, 2, param, 1, 1, 1, size);
        }
        if (!bench) {
            differ(name, &lk, b, which ? 2 : 3);
        } else {
            int reps = getenv("KB_REPS") ? atoi(getenv("KB_REPS")) : 3;

            for (rep = 0; rep < reps; rep++) {
                Res r;

                t0 = now();
                c0 = secs(CLOCK_THREAD_CPUTIME_ID);
                r = run(&lk, b, base);
                c0 = secs(CLOCK_THREAD_CPUTIME_ID) - c0;
                t0 = now() - t0;
                if (r.st) {
                    printf("%s: status %#x\n", name, r.st);
                }
                best = t0 < best ? t0 : best;
                cbest = c0 < cbest ? c0 : cbest;
            }
            printf("%-26s %8.2f ns/element (%s core, best of %d; "
                   "CPU time %.2f)\n", name, best * 1e9 / elems,
                   base ? "base" : "new", reps, cbest * 1e9 / elems);
        }
        spyre_kernel_destroy(k);
        free(b[0].data);
        free(b[1].data);
        if (!which) {
            free(b[2].data);
        }
    }
    if (bench) {
        struct spyre_kernel *k;
        const uint32_t dt = SPYRE_DTYPE_FP32;
        double t0;
        int rep;

        /* The empty kernel: verify + prepare of a 0-point launch. */
        memset(size, 0, sizeof(size));
        spyre_kernel_create(&dt, 1, 0, 1, 0, &k);
        b[0] = mkbuf(1, dt);
        mklaunch(&lk, k, b, 1, NULL, 0, 1, 0, size);
        t0 = now();
        for (rep = 0; rep < 100000; rep++) {
            run(&lk, b, base);
        }
        printf("%-26s %8.1f ns/launch (%s core)\n", "empty kernel",
               (now() - t0) * 1e9 / 100000, base ? "base" : "new");
        spyre_kernel_destroy(k);
        free(b[0].data);
    }
}

/* ---- Random programs ---- */

static const uint32_t fops[] = {
    SPYRE_KOP_ADD, SPYRE_KOP_SUB, SPYRE_KOP_MUL, SPYRE_KOP_DIV,
    SPYRE_KOP_MAX, SPYRE_KOP_MIN, SPYRE_KOP_FMA, SPYRE_KOP_EXP,
    SPYRE_KOP_LOG, SPYRE_KOP_TANH, SPYRE_KOP_SIGMOID, SPYRE_KOP_SQRT,
    SPYRE_KOP_NEG, SPYRE_KOP_ABS, SPYRE_KOP_RECIP, SPYRE_KOP_ERF,
    SPYRE_KOP_POW, SPYRE_KOP_FLOOR, SPYRE_KOP_SELECT, SPYRE_KOP_CMP,
    SPYRE_KOP_REM, SPYRE_KOP_FLOORDIV, SPYRE_KOP_RSQRT,
};
static const uint32_t dtypes[] = {
    SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16,
    SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP8_E5M2, SPYRE_DTYPE_INT32, SPYRE_DTYPE_INT8,
    SPYRE_DTYPE_U8, SPYRE_DTYPE_INT64, SPYRE_DTYPE_INT16, SPYRE_DTYPE_BOOL,
};
static const uint32_t reds[] = {
    SPYRE_KRED_SUM, SPYRE_KRED_PROD, SPYRE_KRED_MAX, SPYRE_KRED_MIN,
    SPYRE_KRED_ARGMAX, SPYRE_KRED_ARGMIN, SPYRE_KRED_WELFORD,
};

static bool is_fp8(uint32_t d)
{
    return d == SPYRE_DTYPE_FP8_E4M3 || d == SPYRE_DTYPE_FP8_E5M2;
}

/* A value of type F32 from pool @v of @nv (converted when needed). */
static int pickf(struct spyre_kernel *k, const int *v, int nv)
{
    int x = v[rnd() % nv];

    if (spyre_kernel_type(k, x) != SPYRE_KTYPE_F32) {
        x = spyre_kernel_cvt(k, SPYRE_KTYPE_F32, x, 0, 0);
    }
    return x;
}

static void random_one(int it)
{
    uint32_t nb = 2 + rnd() % 3, dt[4], i, npd = 1 + rnd() % 2;
    uint32_t nrd = rnd() % 3 ? 0 : 1;
    uint64_t size[9] = { 0 }, P = 1, R = 1, param[4];
    struct spyre_kernel *k;
    int v[64], nv = 0, j, n, off, offr = -1, red = -1;
    Buf b[4];
    Launch lk;
    char name[32];

    for (i = 0; i < nb; i++) {
        dt[i] = dtypes[rnd() % (sizeof(dtypes) / 4)];
    }
    for (i = 0; i < npd; i++) {
        static const uint64_t sz[] = { 1, 3, 17, 64, 100, 1000, 1500 };

        size[i] = sz[rnd() % 7];
        P *= size[i];
    }
    if (nrd) {
        static const uint64_t rz[] = { 1, 5, 16, 100, 1024, 1500, 3000 };

        size[6] = rz[rnd() % 7];
        R = size[6];
    }
    if (P * R > 200000) {
        size[0] = 7;
        P = 7 * (npd > 1 ? size[1] : 1);
    }
    for (i = 0; i < 4; i++) {
        param[i] = rnd() % 3 ? (uint64_t)((int64_t)(rnd() % 5) - 1) :
                   0x3f400000u;
    }
    param[0] = 1 + (nrd ? R : 0);
    spyre_kernel_create(dt, nb, 4, npd, nrd, &k);
    off = spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_POINT);
    if (rnd() % 3 == 0) {       /* strided or gathered offsets */
        off = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N_, 1, 0);
    }
    for (i = 0; i < nb - 1; i++) {
        int mask = N_;

        if (rnd() % 4 == 0) {
            mask = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_LT,
                                   spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0),
                                   spyre_kernel_const(k, SPYRE_KTYPE_I64,
                                                      rnd() % 50), N_);
        }
        v[nv++] = spyre_kernel_load(k, i, off, mask, N_);
    }
    v[nv++] = spyre_kernel_param(k, SPYRE_KTYPE_F32, 3);
    v[nv++] = spyre_kernel_const_f32(k, 0.5f);
    n = 2 + rnd() % 10;
    for (j = 0; j < n; j++) {
        uint32_t op = fops[rnd() % (sizeof(fops) / 4)];
        int a = pickf(k, v, nv), b2 = pickf(k, v, nv), c = pickf(k, v, nv);
        int x;

        switch (op) {
        case SPYRE_KOP_CMP:
            x = spyre_kernel_op(k, op, rnd() % 6, a, b2, N_);
            break;
        case SPYRE_KOP_SELECT:
            x = spyre_kernel_op(k, op, 0,
                                spyre_kernel_op(k, SPYRE_KOP_CMP,
                                                SPYRE_KCMP_GT, a, b2, N_),
                                b2, c);
            break;
        case SPYRE_KOP_FMA:
            x = spyre_kernel_op(k, op, 0, a, b2, c);
            break;
        case SPYRE_KOP_ADD: case SPYRE_KOP_SUB: case SPYRE_KOP_MUL:
        case SPYRE_KOP_DIV: case SPYRE_KOP_MAX: case SPYRE_KOP_MIN:
        case SPYRE_KOP_POW: case SPYRE_KOP_REM: case SPYRE_KOP_FLOORDIV:
            x = spyre_kernel_op(k, op, 0, a, b2, N_);
            break;
        default:
            x = spyre_kernel_op(k, op, 0, a, N_, N_);
            break;
        }
        if (x >= 0 && nv < 64) {
            v[nv++] = x;
        }
    }
    if (nrd) {
        uint32_t kind = reds[rnd() % (sizeof(reds) / 4)];
        int row = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N_, 1, 0);
        int x;

        spyre_kernel_pass(k);
        offr = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
                               spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                                SPYRE_KDIM_R0), N_);
        x = spyre_kernel_load(k, 0, offr, N_, N_);
        if (spyre_kernel_type(k, x) != SPYRE_KTYPE_F32 && rnd() % 2) {
            x = spyre_kernel_cvt(k, SPYRE_KTYPE_F32, x, 0, 0);
        }
        if (spyre_kernel_type(k, x) == SPYRE_KTYPE_F32 && rnd() % 2) {
            x = spyre_kernel_op(k, SPYRE_KOP_MUL, 0, x, pickf(k, v, nv),
                                N_);
        }
        if (kind == SPYRE_KRED_WELFORD &&
            spyre_kernel_type(k, x) != SPYRE_KTYPE_F32) {
            kind = SPYRE_KRED_SUM;
        }
        red = spyre_kernel_reduce(k, kind, x, N_, N_, N_);
        spyre_kernel_endpass(k);
        if (red >= 0) {
            v[nv++] = red;
        }
    }
    if (spyre_kernel_error(k)) {
        if (getenv("KB_DEBUG")) {
            printf("build 1: %d at %d\n", spyre_kernel_error(k), nv);
        }
        spyre_kernel_destroy(k);
        return;
    }
    {
        int val = v[nv - 1];
        int o = off;

        if (rnd() % 4 == 0) {   /* a gather-style store, maybe OOB */
            o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, off,
                                spyre_kernel_const(k, SPYRE_KTYPE_I64,
                                                   rnd() % 3), N_);
        }
        uint32_t want = dt[nb - 1] == SPYRE_DTYPE_INT64 ? SPYRE_KTYPE_I64 :
                        dt[nb - 1] == SPYRE_DTYPE_BOOL ? SPYRE_KTYPE_BOOL :
                        dt[nb - 1] == SPYRE_DTYPE_INT32 ||
                        dt[nb - 1] == SPYRE_DTYPE_INT16 ||
                        dt[nb - 1] == SPYRE_DTYPE_INT8 ||
                        dt[nb - 1] == SPYRE_DTYPE_U8 ? SPYRE_KTYPE_I32 :
                        SPYRE_KTYPE_F32;

        if (spyre_kernel_type(k, val) != (int)want) {
            val = want == SPYRE_KTYPE_F32 || rnd() % 2 ?
                  spyre_kernel_cvt(k, want, val, 0, 0) :
                  spyre_kernel_cvt(k, want, val, dt[nb - 1], 0);
        }
        spyre_kernel_store(k, nb - 1, o, val, N_,
                           is_fp8(dt[nb - 1]) && rnd() % 2 ?
                           SPYRE_KMOD_SAT : 0);
        if (rnd() % 5 == 0) {
            spyre_kernel_check(k, spyre_kernel_op(k, SPYRE_KOP_CMP,
                                                  SPYRE_KCMP_LT,
                                                  pickf(k, v, nv),
                                                  spyre_kernel_const_f32(k,
                                                  9.0f), N_), N_);
        }
    }
    if (spyre_kernel_error(k)) {
        if (getenv("KB_DEBUG")) {
            printf("build 2: %d\n", spyre_kernel_error(k));
        }
        spyre_kernel_destroy(k);
        return;
    }
    for (i = 0; i < nb; i++) {
        uint64_t ext = P * (nrd ? R + 1 : 2) + 2;

        if (rnd() % 8 == 0) {
            ext = P / 2 + 1;    /* out of bounds somewhere */
        }
        b[i] = mkbuf(ext, dt[i]);
        fill(&b[i]);
        if (rnd() % 10 == 0) {
            b[i].fault = rnd() % ext;
        }
    }
    mklaunch(&lk, k, b, nb, param, 4, npd, nrd, size);
    snprintf(name, sizeof(name), "random %d", it);
    differ(name, &lk, b, nb);
    for (i = 0; i < nb; i++) {
        free(b[i].data);
    }
    spyre_kernel_destroy(k);
}

/*
 * EXP, SIGMOID, TANH, LOG of random bit patterns and edge values (not -0:
 * TANH(-0) is -0 since spyre-kmath.c, +0 in BASE).
 */
static void math_sweep(uint64_t n)
{
    static const float edge[] = {
        0.0f, INFINITY, -INFINITY, NAN, 800.0f, -800.0f,
        800.00006f, -800.00006f, 88.72f, 88.73f, -103.9f, -87.3f, 1e-30f,
        -1e-30f, 1.0f, -1.0f, 0.5f, 20.0f, -20.0f, 3.4e38f, -3.4e38f,
    };
    const uint32_t dt[5] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32,
                             SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32,
                             SPYRE_DTYPE_FP32 };
    static const uint32_t ops[4] = { SPYRE_KOP_EXP, SPYRE_KOP_SIGMOID,
                                     SPYRE_KOP_TANH, SPYRE_KOP_LOG };
    uint64_t size[9] = { n };
    struct spyre_kernel *k;
    Launch lk;
    Buf b[5];
    int i, x, o;
    uint64_t e;

    spyre_kernel_create(dt, 5, 0, 1, 0, &k);
    i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
    x = spyre_kernel_load(k, 0, i, N_, N_);
    for (o = 0; o < 4; o++) {
        spyre_kernel_store(k, 1 + o, i,
                           spyre_kernel_op(k, ops[o], 0, x, N_, N_), N_, 0);
    }
    for (o = 0; o < 5; o++) {
        b[o] = mkbuf(n, SPYRE_DTYPE_FP32);
    }
    for (e = 0; e < n; e++) {
        uint32_t u = rnd();

        if (e < sizeof(edge) / 4) {
            memcpy(&u, &edge[e], 4);
        } else if (e % 3) {     /* the interesting exponents */
            u = (u & 0x807fffff) | (uint32_t)(0x3c + rnd() % 12) << 24;
        }
        memcpy(b[0].data + 4 * e, &u, 4);
    }
    mklaunch(&lk, k, b, 5, NULL, 0, 1, 0, size);
    differ("math sweep", &lk, b, 5);
    for (o = 0; o < 5; o++) {
        free(b[o].data);
    }
    spyre_kernel_destroy(k);
}

/*
 * The fp16 conversions (F16C on the AVX2 path, the portable ones on the
 * baseline): every fp16 value loaded to f32, and f32 values stored to
 * fp16 at every sign, exponent and mantissa bits 22:13 with the 13 low
 * bits at each rounding boundary (exact, above it, below, at and around
 * the tie, below the next); the low bits zero and 0x1fff make the ties
 * of fp16 subnormals, higher up, too.  Against the base.
 */
static void half_sweep(void)
{
    static const uint32_t low[8] = { 0, 1, 0x7ff, 0xfff, 0x1000, 0x1001,
                                     0x1800, 0x1fff };
    uint64_t size[9] = { 0 }, e;
    struct spyre_kernel *k;
    Launch lk;
    Buf b[2];
    int way, i;

    for (way = 0; way < 2; way++) {
        const uint32_t dt[2] = {
            way ? SPYRE_DTYPE_FP32 : SPYRE_DTYPE_FP16,
            way ? SPYRE_DTYPE_FP16 : SPYRE_DTYPE_FP32 };
        uint64_t n = way ? 8u << 19 : 1u << 16;

        spyre_kernel_create(dt, 2, 0, 1, 0, &k);
        i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
        spyre_kernel_store(k, 1, i, spyre_kernel_load(k, 0, i, N_, N_), N_,
                           0);
        b[0] = mkbuf(n, dt[0]);
        b[1] = mkbuf(n, dt[1]);
        for (e = 0; e < n; e++) {
            if (way) {
                uint32_t u = (uint32_t)(e >> 3) << 13 | low[e & 7];

                memcpy(b[0].data + 4 * e, &u, 4);
            } else {
                uint16_t h = e;

                memcpy(b[0].data + 2 * e, &h, 2);
            }
        }
        size[0] = n;
        mklaunch(&lk, k, b, 2, NULL, 0, 1, 0, size);
        differ(way ? "fp16 stores" : "fp16 loads", &lk, b, 2);
        free(b[0].data);
        free(b[1].data);
        spyre_kernel_destroy(k);
    }
}

/*
 * Kept math lanes (a pass taking the EXP lanes an earlier pass computed
 * the same way): two passes each summing exp(x) over a row, rows longer
 * and shorter than a vector; with @overwrite, point code between the
 * passes stores the first sum over the row's first x, which the second
 * pass must see (its LOAD reads memory the kernel writes: nothing is
 * kept).  Against the base.
 */
static void keep_sweep(void)
{
    const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
    static const uint64_t cols[2] = { 4096, 200 };
    uint64_t size[9] = { 0 }, param[1], e;
    int overwrite, c, pass, row, o, s;
    struct spyre_kernel *k;
    Launch lk;
    Buf b[2];

    for (overwrite = 0; overwrite < 2; overwrite++) {
        spyre_kernel_create(dt, 2, 1, 1, 1, &k);
        row = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N_, 1, 0);
        s = N_;
        for (pass = 0; pass < 2; pass++) {
            spyre_kernel_pass(k);
            o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
                                spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                                 SPYRE_KDIM_R0), N_);
            s = spyre_kernel_reduce(k, SPYRE_KRED_SUM,
                                    spyre_kernel_op(k, SPYRE_KOP_EXP, 0,
                                                    spyre_kernel_load(k, 0,
                                                                      o, N_,
                                                                      N_),
                                                    N_, N_), N_, N_, N_);
            spyre_kernel_endpass(k);
            if (!pass && overwrite) {
                spyre_kernel_store(k, 0, row, s, N_, 0);
            }
        }
        spyre_kernel_store(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0),
                           s, N_, 0);
        if (spyre_kernel_error(k)) {
            printf("not ok keep sweep: builder %d\n", spyre_kernel_error(k));
            failures++;
        }
        for (c = 0; c < 2; c++) {
            param[0] = cols[c];
            size[0] = 64;
            size[6] = cols[c];
            b[0] = mkbuf(64 * cols[c], SPYRE_DTYPE_FP32);
            b[1] = mkbuf(64, SPYRE_DTYPE_FP32);
            for (e = 0; e < 64 * cols[c]; e++) {    /* finite sums */
                float f = (float)((int64_t)(rnd() % 8001) - 4000) / 1000.0f;

                memcpy(b[0].data + 4 * e, &f, 4);
            }
            mklaunch(&lk, k, b, 2, param, 1, 1, 1, size);
            differ(overwrite ? "keep sweep, overwritten" : "keep sweep", &lk,
                   b, 2);
            free(b[0].data);
            free(b[1].data);
        }
        spyre_kernel_destroy(k);
    }
}

/*
 * MAX and MIN reductions over rows of special values (both zeros, both
 * infinities, NaNs with payloads, subnormals, extremes, a few numbers)
 * at lengths around the stripes' and blocks' edges, against the base:
 * the ordered-key stripes and block merges must give fminmax()'s bits.
 */
static void minmax_sweep(void)
{
    static const uint32_t pool[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
        0xffc00001, 0x7f800001, 0xff812345, 0x00000001, 0x80000001,
        0x007fffff, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000,
        0xbf800000, 0x3f800001, 0xbf800001,
    };
    static const uint64_t cols[] = { 1, 15, 16, 17, 31, 33, 1023, 1024,
                                     1040, 4101 };
    const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
    uint64_t size[9] = { 0 }, param[1], e;
    struct spyre_kernel *k;
    unsigned int kind, c, npool = sizeof(pool) / sizeof(pool[0]);
    Launch lk;
    Buf b[2];

    for (kind = 0; kind < 2; kind++) {
        k = k_rows_of(dt, kind ? SPYRE_KRED_MIN : SPYRE_KRED_MAX, false);
        for (c = 0; c < sizeof(cols) / sizeof(cols[0]); c++) {
            param[0] = cols[c];
            size[0] = 64;
            size[6] = cols[c];
            b[0] = mkbuf(64 * cols[c], SPYRE_DTYPE_FP32);
            b[1] = mkbuf(64, SPYRE_DTYPE_FP32);
            for (e = 0; e < 64 * cols[c]; e++) {
                /*
                 * Row r draws from the first 2 + r / 4 % 17 pool
                 * entries (zeros only, then more kinds; the NaNs come
                 * last, so many rows have none); in rows 4i + 1 one
                 * element in eight is a random number instead, rows
                 * 4i + 3 hold negative numbers a few ulps apart.
                 */
                uint64_t r = e / cols[c], lim = 2 + r / 4 % (npool - 1);
                uint32_t u = r % 4 == 3 ? 0xbf800000 | (uint32_t)rnd() % 7 :
                             r % 4 == 1 && !(rnd() % 8) ?
                             (uint32_t)rnd() & 0xbf7fffff :
                             pool[rnd() % lim];

                memcpy(b[0].data + 4 * e, &u, 4);
            }
            mklaunch(&lk, k, b, 2, param, 1, 1, 1, size);
            differ(kind ? "min sweep" : "max sweep", &lk, b, 2);
            free(b[0].data);
            free(b[1].data);
        }
        spyre_kernel_destroy(k);
    }
}

/* ---- Part 2 (SCATTER, SCAN, RAND) against libspyre's reference ---- */

/* The KAT of Random123's kat_vectors for philox4x32_10. */
static void philox_kat(void)
{
    static const uint32_t kat[3][10] = {
        { 0, 0, 0, 0, 0, 0,
          0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
        { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
          0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
        { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822,
          0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
    };
    int i;

    for (i = 0; i < 3; i++) {
        uint32_t x[4], y[4];

        memcpy(x, kat[i], 16);
        memcpy(y, kat[i], 16);
        spyre_kernel_philox(x, kat[i][4], kat[i][5]);
        spyre_ref_philox4x32_10(y, kat[i] + 4);
        ran++;
        if (memcmp(x, kat[i] + 6, 16) || memcmp(y, kat[i] + 6, 16)) {
            printf("not ok philox KAT %d: card %08x.., reference %08x..\n",
                   i, x[0], y[0]);
            failures++;
        }
    }
}

/* Units in the last place between two f32 (bit patterns ordered). */
static uint64_t ulps(uint32_t a, uint32_t b)
{
    int64_t x = (a & 0x80000000u) ? -(int64_t)(a & 0x7fffffffu) : a;
    int64_t y = (b & 0x80000000u) ? -(int64_t)(b & 0x7fffffffu) : b;

    return x > y ? x - y : y - x;
}

/* Is the element at @p of @dtype a floating-point NaN? */
static bool elem_isnan(uint32_t dtype, const uint8_t *p)
{
    uint32_t u = 0;

    if (!spyre_dtype_is_float(dtype)) {
        return false;
    }
    memcpy(&u, p, spyre_cmd_dtype_size(dtype));
    return isnan(spyre_ref_decode(dtype, u));
}

/*
 * Run @lk on copies of @b with the new core and with libspyre's
 * reference; compare status, details and (if it ran clean) memory, the
 * last operand's f32 elements within @tol ulps (RAND's NORMAL: the
 * reference's log and cos are libm's, the card's its own).
 */
static void differ_ref(const char *name, const Launch *lk, Buf *b,
                       uint32_t nb, uint64_t tol)
{
    struct spyre_ref_kernel_operand ro[SPYRE_KERNEL_MAX_OPERANDS];
    struct spyre_ref_kernel_launch rl;
    struct spyre_ref_kernel_result rr;
    Buf c[SPYRE_KERNEL_MAX_OPERANDS];
    Res y;
    uint32_t i;

    memset(&rl, 0, sizeof(rl));
    for (i = 0; i < nb; i++) {
        size_t sz = b[i].extent * spyre_cmd_dtype_size(b[i].dtype);

        c[i] = b[i];
        c[i].data = malloc(sz ? sz : 1);
        memcpy(c[i].data, b[i].data, sz);
        ro[i] = (struct spyre_ref_kernel_operand) {
            .data = c[i].data, .extent = c[i].extent, .dtype = c[i].dtype,
        };
    }
    rl.prog = lk->prog;
    rl.prog_size = lk->size;
    rl.noperands = nb;
    rl.nparams = lk->l.nparams;
    rl.npdims = lk->l.npdims;
    rl.nrdims = lk->l.nrdims;
    rl.operands = ro;
    rl.params = lk->l.param;
    memcpy(rl.size, lk->l.size, sizeof(rl.size));
    if (spyre_ref_kernel(&rl, &rr)) {
        printf("not ok %s: the reference refused the launch\n", name);
        failures++;
    }
    y = run(lk, b, false);
    ran++;
    if (getenv("KB_DEBUG")) {
        printf("%s: status %#x detail %#llx\n", name, y.st,
               (unsigned long long)y.detail);
    }
    st_count[y.st == 0 ? 0 : y.st == SPYRE_STATUS_OUT_OF_BOUNDS ? 1 : 3]++;
    if (rr.status != y.st || rr.detail != y.detail ||
        rr.detail2 != y.detail2) {
        printf("not ok %s: status %#x/%#llx/%#llx, reference "
               "%#x/%#llx/%#llx\n", name, y.st,
               (unsigned long long)y.detail, (unsigned long long)y.detail2,
               rr.status, (unsigned long long)rr.detail,
               (unsigned long long)rr.detail2);
        failures++;
    }
    for (i = 0; i < nb; i++) {
        size_t es = spyre_cmd_dtype_size(b[i].dtype), sz = b[i].extent * es;
        uint64_t e, worst = 0;

        if (!y.st && tol && i == nb - 1 && b[i].dtype == SPYRE_DTYPE_FP32) {
            for (e = 0; e < b[i].extent; e++) {
                uint32_t u, v;

                memcpy(&u, b[i].data + 4 * e, 4);
                memcpy(&v, c[i].data + 4 * e, 4);
                worst = KMAXU(worst, ulps(u, v));
            }
            if (worst > tol) {
                printf("not ok %s: operand %u is %llu ulps off\n", name, i,
                       (unsigned long long)worst);
                failures++;
            }
        } else if (!y.st && memcmp(b[i].data, c[i].data, sz)) {
            /* The reference keeps no NaN payloads: NaNs compare as isnan. */
            for (e = 0; e * es < sz &&
                 (!memcmp(b[i].data + e * es, c[i].data + e * es, es) ||
                  (elem_isnan(b[i].dtype, b[i].data + e * es) &&
                   elem_isnan(b[i].dtype, c[i].data + e * es))); e++) {
                continue;
            }
            if (e * es < sz) {
                printf("not ok %s: operand %u differs (element %llu)\n",
                       name, i, (unsigned long long)e);
                failures++;
            }
        }
        free(c[i].data);
    }
}

/* Index values in [-1, top] (-1 and top out of range, rarely). */
static void fill_index(Buf *b, uint64_t top)
{
    uint64_t e;

    for (e = 0; e < b->extent; e++) {
        int64_t v = (int64_t)(rnd() % top);

        if (rnd() % 500 == 0) {
            v = rnd() % 2 ? -1 : (int64_t)top;
        }
        if (b->dtype == SPYRE_DTYPE_INT64) {
            memcpy(b->data + 8 * e, &v, 8);
        } else {
            int32_t w = (int32_t)v;

            memcpy(b->data + 4 * e, &w, 4);
        }
    }
}

static const uint32_t p2_dtypes[] = {
    SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP16, SPYRE_DTYPE_BF16, SPYRE_DTYPE_INT32,
    SPYRE_DTYPE_INT64, SPYRE_DTYPE_INT8, SPYRE_DTYPE_FP8_E4M3,
};

/*
 * One random gather/scatter kernel: o2[idx1[...]] (op)= o0[idx0[...]]
 * (or o0 at the point), optionally masked, in point code or in a pass.
 */
static void p2_scatter(int it)
{
    uint32_t dt[4], npd = 1 + rnd() % 2, nrd = rnd() % 3 ? 0 : 1, i;
    uint32_t kind = rnd() % 2 ? SPYRE_KSCAT_ADD : SPYRE_KSCAT_STORE;
    uint64_t size[9] = { 0 }, P = 1, R = 1, param[2] = { 0 }, top;
    struct spyre_kernel *k;
    int lin, gi, si, x, mask = N_;
    Buf b[4];
    Launch lk;
    char name[48];

    dt[0] = p2_dtypes[rnd() % 7];
    dt[1] = rnd() % 2 ? SPYRE_DTYPE_INT64 : SPYRE_DTYPE_INT32;
    dt[2] = dt[1];
    dt[3] = p2_dtypes[rnd() % 7];
    for (i = 0; i < npd; i++) {
        static const uint64_t sz[] = { 1, 3, 17, 64, 100, 1000, 1500 };

        size[i] = sz[rnd() % 7];
        P *= size[i];
    }
    if (nrd) {
        static const uint64_t rz[] = { 1, 5, 16, 100, 1024, 1500 };

        size[6] = rz[rnd() % 6];
        R = size[6];
    }
    if (P * R > 100000) {
        size[0] = 7;
        P = 7 * (npd > 1 ? size[1] : 1);
    }
    top = 1 + rnd() % (rnd() % 2 ? 8 : 4096);   /* few: collisions */
    spyre_kernel_create(dt, 4, 2, npd, nrd, &k);
    if (nrd) {
        spyre_kernel_pass(k);
        lin = spyre_kernel_affine(k, SPYRE_KTYPE_I64,
                                  spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                                   SPYRE_KDIM_RINDEX),
                                  1, 0);
    } else {
        lin = spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_POINT);
    }
    gi = spyre_kernel_load(k, 1, lin, N_, N_);
    si = spyre_kernel_load(k, 2, lin, N_, N_);
    if (rnd() % 3 == 0) {
        mask = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_NE,
                               spyre_kernel_op(k, SPYRE_KOP_AND, 0, lin,
                                               spyre_kernel_const(k,
                                                   SPYRE_KTYPE_I64, 3),
                                               N_),
                               spyre_kernel_const(k, SPYRE_KTYPE_I64, 1),
                               N_);
    }
    x = spyre_kernel_load(k, 0, rnd() % 2 ? gi : lin, mask, N_);
    {
        int want = spyre_kernel_type(k, x);
        int tt = dt[3] == SPYRE_DTYPE_INT64 ? SPYRE_KTYPE_I64 :
                 dt[3] == SPYRE_DTYPE_INT32 || dt[3] == SPYRE_DTYPE_INT8 ?
                 SPYRE_KTYPE_I32 : SPYRE_KTYPE_F32;

        if (want != tt) {
            x = spyre_kernel_cvt(k, tt, x, 0, 0);
        }
    }
    spyre_kernel_scatter(k, 3, si, x, mask,
                         kind | (dt[3] == SPYRE_DTYPE_FP8_E4M3 && rnd() % 2 ?
                                 SPYRE_KMOD_SAT : 0));
    if (nrd) {
        spyre_kernel_endpass(k);
    }
    if (spyre_kernel_error(k)) {
        printf("not ok scatter %d: build %d\n", it, spyre_kernel_error(k));
        failures++;
        spyre_kernel_destroy(k);
        return;
    }
    param[0] = nrd ? R : 0;
    for (i = 0; i < 4; i++) {
        uint64_t ext = i == 0 ? KMAXU(top, P * R) : i == 3 ? top : P * R;

        b[i] = mkbuf(ext, dt[i]);
        fill(&b[i]);
    }
    fill_index(&b[1], b[0].extent);
    fill_index(&b[2], top);
    mklaunch(&lk, k, b, 4, param, 2, npd, nrd, size);
    snprintf(name, sizeof(name), "scatter %d (%s)", it,
             kind == SPYRE_KSCAT_ADD ? "add" : "store");
    differ_ref(name, &lk, b, 4, 0);
    for (i = 0; i < 4; i++) {
        free(b[i].data);
    }
    spyre_kernel_destroy(k);
}

/*
 * @b's fp16 and bf16 NaNs made finite (exponent cleared): which NaN a
 * narrowing writes is not specified (docs/spyre-hw.rst, "Numeric
 * formats"; the card keeps payloads quieted, the reference writes the
 * canonical one), so moved data compares bit for bit only without them.
 */
static void no_half_nan(Buf *b)
{
    uint16_t exp = b->dtype == SPYRE_DTYPE_FP16 ? 0x7c00 :
                   b->dtype == SPYRE_DTYPE_BF16 ? 0x7f80 : 0;
    uint64_t e;

    for (e = 0; exp && e < b->extent; e++) {
        uint16_t h;

        memcpy(&h, b->data + 2 * e, 2);
        if ((h & exp) == exp && (h & ~exp & 0x7fff)) {
            h &= ~exp;
            memcpy(b->data + 2 * e, &h, 2);
        }
    }
}

/*
 * One random embedding-style program over [NR, D] points: o0 a table of
 * V rows of D, o1 NR row indices (int64, or int32 converted), o2 NR rows;
 * a gather of the indexed rows into o2 (LOAD at index * D + d), or a
 * scatter of o2's rows into them (SCATTER STORE or ADD), sometimes
 * masked.  Row widths around the engine's vector (a tile per row, one
 * uniform index per vector, rows as one run) and below or above it;
 * few table rows: duplicate indices.
 */
static void p2_rows(int it)
{
    static const uint64_t vs[] = { 1, 5, 300, 2000 };
    static const uint64_t ds[] = { 1, 7, 256, 300, 512, 1000, 1024, 1500 };
    static const uint64_t nrs[] = { 1, 3, 17, 64 };
    uint32_t which = rnd() % 3, dt[3], i;
    uint64_t V = vs[rnd() % 4], D = ds[rnd() % 8], NR = nrs[rnd() % 4];
    uint64_t size[9] = { 0 }, param[1] = { D };
    struct spyre_kernel *k;
    int row, d, o, t, mask = N_;
    Buf b[3];
    Launch lk;
    char name[64];

    dt[0] = p2_dtypes[rnd() % 7];
    dt[1] = rnd() % 2 ? SPYRE_DTYPE_INT64 : SPYRE_DTYPE_INT32;
    dt[2] = dt[0];
    spyre_kernel_create(dt, 3, 1, 2, 0, &k);
    row = spyre_kernel_load(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0),
                            N_, N_);
    if (dt[1] == SPYRE_DTYPE_INT32) {
        row = spyre_kernel_cvt(k, SPYRE_KTYPE_I64, row, 0, 0);
    }
    d = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 1);
    o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, d, 1, 0);
    t = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, d,
                        spyre_kernel_op(k, SPYRE_KOP_MUL, 0, row,
                                        spyre_kernel_param(k,
                                            SPYRE_KTYPE_I64, 0), N_), N_);
    if (rnd() % 4 == 0) {
        mask = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_NE,
                               spyre_kernel_op(k, SPYRE_KOP_AND, 0, d,
                                               spyre_kernel_const(k,
                                                   SPYRE_KTYPE_I64, 3),
                                               N_),
                               spyre_kernel_const(k, SPYRE_KTYPE_I64, 1),
                               N_);
    }
    if (!which) {
        spyre_kernel_store(k, 2, o, spyre_kernel_load(k, 0, t, mask, N_),
                           mask, 0);
    } else {
        spyre_kernel_scatter(k, 0, t, spyre_kernel_load(k, 2, o, N_, N_),
                             mask, which == 1 ? SPYRE_KSCAT_STORE :
                             SPYRE_KSCAT_ADD);
    }
    if (spyre_kernel_error(k)) {
        printf("not ok rows %d: build %d\n", it, spyre_kernel_error(k));
        failures++;
        spyre_kernel_destroy(k);
        return;
    }
    b[0] = mkbuf(V * D, dt[0]);
    b[1] = mkbuf(NR, dt[1]);
    b[2] = mkbuf(NR * D, dt[2]);
    fill(&b[0]);
    fill(&b[2]);
    no_half_nan(&b[0]);
    no_half_nan(&b[2]);
    fill_index(&b[1], V);
    size[0] = NR;
    size[1] = D;
    mklaunch(&lk, k, b, 3, param, 1, 2, 0, size);
    snprintf(name, sizeof(name), "rows %d (%s, %llu x %llu of %llu, dt %u)", it,
             which == 0 ? "gather" : which == 1 ? "scatter" : "scatter-add",
             (unsigned long long)NR, (unsigned long long)D,
             (unsigned long long)V, dt[0]);
    differ_ref(name, &lk, b, 3, 0);
    for (i = 0; i < 3; i++) {
        free(b[i].data);
    }
    spyre_kernel_destroy(k);
}

/* One random scan along r0 of o0 [P, R] into o1 (and o2: a second). */
static void p2_scan(int it)
{
    static const uint32_t kinds[] = {
        SPYRE_KRED_SUM, SPYRE_KRED_PROD, SPYRE_KRED_MAX, SPYRE_KRED_MIN,
        SPYRE_KRED_ARGMAX, SPYRE_KRED_ARGMIN,
    };
    static const uint64_t rz[] = { 1, 5, 16, 100, 1023, 1024, 1500, 3000 };
    uint32_t kind = kinds[rnd() % 6], dt[3], i;
    uint64_t size[9] = { 0 }, P, R, param[1];
    struct spyre_kernel *k;
    int o, x, s, mask = N_;
    Buf b[3];
    Launch lk;
    char name[48];

    dt[0] = p2_dtypes[rnd() % 5];
    size[0] = 1 + rnd() % 40;
    size[6] = rz[rnd() % 8];
    P = size[0];
    R = size[6];
    dt[1] = kind >= SPYRE_KRED_ARGMAX ? SPYRE_DTYPE_INT64 :
            dt[0] == SPYRE_DTYPE_INT64 ? SPYRE_DTYPE_INT64 :
            dt[0] == SPYRE_DTYPE_INT32 ? SPYRE_DTYPE_INT32 :
            SPYRE_DTYPE_FP32;
    dt[2] = SPYRE_DTYPE_FP32;
    spyre_kernel_create(dt, 3, 1, 1, 1, &k);
    spyre_kernel_pass(k);
    o = spyre_kernel_affine(k, SPYRE_KTYPE_I64,
                            spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                             SPYRE_KDIM_R0), 1, 0);
    x = spyre_kernel_load(k, 0, o, N_, N_);
    if (rnd() % 3 == 0) {
        mask = spyre_kernel_op(k, SPYRE_KOP_CMP, SPYRE_KCMP_NE,
                               spyre_kernel_op(k, SPYRE_KOP_AND, 0, o,
                                               spyre_kernel_const(k,
                                                   SPYRE_KTYPE_I64, 7),
                                               N_),
                               spyre_kernel_const(k, SPYRE_KTYPE_I64, 2),
                               N_);
    }
    s = spyre_kernel_scan(k, kind, x, mask);
    spyre_kernel_store(k, 1, o, s, N_, 0);
    /* a second scan of the same values, as f32 sum */
    if (spyre_kernel_type(k, x) != SPYRE_KTYPE_F32) {
        x = spyre_kernel_cvt(k, SPYRE_KTYPE_F32, x, 0, 0);
    }
    spyre_kernel_store(k, 2, o, spyre_kernel_scan(k, SPYRE_KRED_SUM, x, N_),
                       N_, 0);
    spyre_kernel_endpass(k);
    if (spyre_kernel_error(k)) {
        printf("not ok scan %d: build %d\n", it, spyre_kernel_error(k));
        failures++;
        spyre_kernel_destroy(k);
        return;
    }
    param[0] = R;
    for (i = 0; i < 3; i++) {
        b[i] = mkbuf(P * R, dt[i]);
        fill(&b[i]);
    }
    if (rnd() % 2 && (dt[0] == SPYRE_DTYPE_INT32 ||
                      dt[0] == SPYRE_DTYPE_INT64)) {
        fill_index(&b[0], 8);   /* small values: ties */
    }
    mklaunch(&lk, k, b, 3, param, 1, 1, 1, size);
    snprintf(name, sizeof(name), "scan %d (kind %u)", it, kind);
    differ_ref(name, &lk, b, 3, 0);
    for (i = 0; i < 3; i++) {
        free(b[i].data);
    }
    spyre_kernel_destroy(k);
}

/* One random RAND kernel: o0[p] = rand(P0, P1, p * P2 + P3). */
static void p2_rand(int it)
{
    uint32_t kind = rnd() % 3, dt[1], npd = 1 + rnd() % 2;
    uint64_t size[9] = { 0 }, P = 1, param[4];
    struct spyre_kernel *k;
    int lin, e, v;
    Buf b[1];
    Launch lk;
    char name[48];
    uint32_t i;

    dt[0] = kind == SPYRE_KRAND_BITS ? SPYRE_DTYPE_INT32 : SPYRE_DTYPE_FP32;
    for (i = 0; i < npd; i++) {
        size[i] = 1 + rnd() % 3000;
        P *= size[i];
    }
    param[0] = rnd();
    param[1] = rnd() % 2 ? rnd() : rnd() % 16;
    param[2] = 1 + rnd() % 3;
    param[3] = rnd() % 2 ? 0 : rnd();
    spyre_kernel_create(dt, 1, 4, npd, 0, &k);
    lin = spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_POINT);
    e = spyre_kernel_op(k, SPYRE_KOP_ADD, 0,
                        spyre_kernel_op(k, SPYRE_KOP_MUL, 0, lin,
                                        spyre_kernel_param(k,
                                            SPYRE_KTYPE_I64, 2), N_),
                        spyre_kernel_param(k, SPYRE_KTYPE_I64, 3), N_);
    if (rnd() % 4 == 0) {
        e = spyre_kernel_cvt(k, SPYRE_KTYPE_I32, e, 0, 0);
    }
    v = spyre_kernel_rand(k, kind, spyre_kernel_param(k, SPYRE_KTYPE_I64, 0),
                          spyre_kernel_param(k, SPYRE_KTYPE_I64, 1), e);
    spyre_kernel_store(k, 0, lin, v, N_, 0);
    if (spyre_kernel_error(k)) {
        printf("not ok rand %d: build %d\n", it, spyre_kernel_error(k));
        failures++;
        spyre_kernel_destroy(k);
        return;
    }
    b[0] = mkbuf(P, dt[0]);
    mklaunch(&lk, k, b, 1, param, 4, npd, 0, size);
    snprintf(name, sizeof(name), "rand %d (kind %u)", it, kind);
    differ_ref(name, &lk, b, 1, kind == SPYRE_KRAND_NORMAL ? 4 : 0);
    free(b[0].data);
    spyre_kernel_destroy(k);
}

/*
 * RAND's outputs frozen: FNV-1a 64 of the outputs of a fixed set of RAND
 * kernels (every kind; seed and offset words of both halves; element
 * indices consecutive from even and odd starts and across a carry into
 * the block's high word, so krand_run(), and strided or through i32,
 * so the per-lane path; sizes from one lane to several tiles).  The
 * value frozen when NORMAL took both Box-Muller branches (RAND_DIGEST;
 * the same on every code path); NORMAL's LOG, COS and SIN make it
 * depend on the card's math library too.
 */
#define RAND_DIGEST 0xad1e62ce95d823beull

static uint64_t rand_digest(void)
{
    static const uint64_t sizes[][2] = {
        { 1, 0 }, { 7, 0 }, { 130, 0 }, { 1000, 0 }, { 37, 301 },
        { 70001, 0 },
    };
    static const int64_t starts[] = { 0, 1, 3, (1ll << 33) - 5 };
    uint64_t h = 0xcbf29ce484222325ull;
    uint32_t kind, si, st, stride, ci;

    for (kind = 0; kind <= SPYRE_KRAND_NORMAL; kind++) {
        for (si = 0; si < 6; si++) {
            for (st = 0; st < 4; st++) {
                for (stride = 1; stride <= 3; stride++) {
                    for (ci = 0; ci < 2; ci++) {
                        uint64_t size[9] = { sizes[si][0], sizes[si][1] };
                        uint32_t npd = sizes[si][1] ? 2 : 1;
                        uint32_t dt = kind == SPYRE_KRAND_BITS ?
                                      SPYRE_DTYPE_INT32 : SPYRE_DTYPE_FP32;
                        uint64_t param[4] = {
                            0x9e3779b97f4a7c15ull * (kind + 1) + si,
                            st & 1 ? 0xfedcba9876543210ull : st,
                            stride, (uint64_t)starts[st],
                        };
                        uint64_t P = size[0] * (npd == 2 ? size[1] : 1), e;
                        struct spyre_kernel *k;
                        int lin, x;
                        Launch lk;
                        Buf b[1];

                        /* i32 indices: only where they do not wrap */
                        if (ci && st == 3) {
                            continue;
                        }
                        spyre_kernel_create(&dt, 1, 4, npd, 0, &k);
                        lin = spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                               SPYRE_KDIM_POINT);
                        x = spyre_kernel_op(k, SPYRE_KOP_ADD, 0,
                            spyre_kernel_op(k, SPYRE_KOP_MUL, 0, lin,
                                spyre_kernel_param(k, SPYRE_KTYPE_I64, 2),
                                N_),
                            spyre_kernel_param(k, SPYRE_KTYPE_I64, 3), N_);
                        if (ci) {
                            x = spyre_kernel_cvt(k, SPYRE_KTYPE_I32, x, 0,
                                                 0);
                        }
                        x = spyre_kernel_rand(k, kind,
                            spyre_kernel_param(k, SPYRE_KTYPE_I64, 0),
                            spyre_kernel_param(k, SPYRE_KTYPE_I64, 1), x);
                        spyre_kernel_store(k, 0, lin, x, N_, 0);
                        b[0] = mkbuf(P, dt);
                        mklaunch(&lk, k, b, 1, param, 4, npd, 0, size);
                        if (run(&lk, b, false).st) {
                            h ^= 0xbad;
                        }
                        for (e = 0; e < 4 * P; e++) {
                            h = (h ^ b[0].data[e]) * 0x100000001b3ull;
                        }
                        free(b[0].data);
                        spyre_kernel_destroy(k);
                    }
                }
            }
        }
    }
    return h;
}

static void rand_kat(void)
{
    uint64_t h = rand_digest();

    ran++;
    if (h != RAND_DIGEST) {
        printf("not ok RAND digest %#llx, frozen %#llx\n",
               (unsigned long long)h, (unsigned long long)RAND_DIGEST);
        failures++;
    }
}

/* This thread's CPU time (s): the figures below on a loaded host. */
static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * The best of 5 runs (or $KB_REPS, for profiling) of @lk on @b (CPU
 * seconds); exits on a failure.
 */
static double p2_time(const Launch *lk, Buf *b)
{
    double best = 1e30;
    int rep, reps = getenv("KB_REPS") ? atoi(getenv("KB_REPS")) : 5;

    for (rep = 0; rep < reps; rep++) {
        double t0 = cpu_now();
        Res r = run(lk, b, false);

        if (r.st) {
            printf("bench: status %#x\n", r.st);
            exit(1);
        }
        best = fmin(best, cpu_now() - t0);
    }
    return best;
}

/* The best of 5 memcpy of @bytes (CPU seconds). */
static double p2_memcpy(size_t bytes)
{
    uint8_t *a = malloc(bytes), *c = malloc(bytes);
    double best = 1e30;
    int rep;

    memset(a, 1, bytes);
    memset(c, 2, bytes);
    for (rep = 0; rep < 5; rep++) {
        double t0 = cpu_now();

        memcpy(c, a, bytes);
        best = fmin(best, cpu_now() - t0);
    }
    if (c[bytes / 2] != 1) {
        exit(1);
    }
    free(a);
    free(c);
    return best;
}

/*
 * Part 2's figures on one native core (no QEMU): an embedding gather of
 * 128 rows of a 32 Ki x 512 fp16 table and the scatter (STORE, ADD) of
 * 128 rows into it, 4 Mi normal and uniform f32, a 1024 x 4096 f32
 * cumsum, each beside the memcpy of the bytes it writes; the thread's
 * CPU time, so that a loaded host's other work does not count.
 */
static void bench_part2(const char *only)
{
    enum { V = 32768, D = 512, NR = 128 };
    /* $KB_RAND_N elements instead: a run in the caches, steadier */
    const uint64_t nrand = getenv("KB_RAND_N") ?
                           strtoull(getenv("KB_RAND_N"), NULL, 0) : 4u << 20;
    uint64_t size[9] = { 0 }, param[2] = { D, 0 };
    struct spyre_kernel *k;
    Launch lk;
    Buf b[3];
    double t, m;
    int i, row, d, o;

    /* gather and scatters: o0 table, o1 idx, o2 rows */
    for (int which = 0; which < 3; which++) {
        if (only && strcmp(only, which == 0 ? "gather" : which == 1 ?
                           "scatter" : "scatter-add")) {
            continue;
        }
        const uint32_t dt[3] = { SPYRE_DTYPE_FP16, SPYRE_DTYPE_INT64,
                                 SPYRE_DTYPE_FP16 };

        spyre_kernel_create(dt, 3, 1, 2, 0, &k);
        row = spyre_kernel_load(k, 1, spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                                        0), N_, N_);
        d = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 1);
        o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, d, 1, 0);
        row = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, d,
                              spyre_kernel_op(k, SPYRE_KOP_MUL, 0, row,
                                  spyre_kernel_param(k, SPYRE_KTYPE_I64,
                                                     0), N_), N_);
        if (!which) {
            spyre_kernel_store(k, 2, o, spyre_kernel_load(k, 0, row, N_, N_),
                               N_, 0);
        } else {
            spyre_kernel_scatter(k, 0, row, spyre_kernel_load(k, 2, o, N_,
                                                              N_),
                                 N_, which == 1 ? SPYRE_KSCAT_STORE :
                                 SPYRE_KSCAT_ADD);
        }
        b[0] = mkbuf((uint64_t)V * D, SPYRE_DTYPE_FP16);
        b[1] = mkbuf(NR, SPYRE_DTYPE_INT64);
        b[2] = mkbuf((uint64_t)NR * D, SPYRE_DTYPE_FP16);
        for (i = 0; i < NR; i++) {
            int64_t r = rnd() % V;

            memcpy(b[1].data + 8 * i, &r, 8);
        }
        size[0] = NR;
        size[1] = D;
        mklaunch(&lk, k, b, 3, param, 1, 2, 0, size);
        t = p2_time(&lk, b);
        m = p2_memcpy((size_t)NR * D * 2);
        printf("%-28s %8.1f us  %6.2f ns/element  memcpy %7.1f us  "
               "x%.1f\n", which == 0 ? "gather 128 rows fp16" :
               which == 1 ? "scatter 128 rows fp16" :
               "scatter-add 128 rows fp16", t * 1e6, t * 1e9 / (NR * D),
               m * 1e6, t / m);
        for (i = 0; i < 3; i++) {
            free(b[i].data);
        }
        spyre_kernel_destroy(k);
    }
    /* random numbers */
    for (uint32_t kind = SPYRE_KRAND_UNIFORM; kind <= SPYRE_KRAND_NORMAL;
         kind++) {
        const uint32_t dt[1] = { SPYRE_DTYPE_FP32 };
        uint64_t rp[2] = { 1234, 0 };

        if (only && strcmp(only, kind == SPYRE_KRAND_NORMAL ? "normal" :
                           "uniform")) {
            continue;
        }

        spyre_kernel_create(dt, 1, 2, 1, 0, &k);
        i = spyre_kernel_idx(k, SPYRE_KTYPE_I64, 0);
        spyre_kernel_store(k, 0, i,
                           spyre_kernel_rand(k, kind,
                               spyre_kernel_param(k, SPYRE_KTYPE_I64, 0),
                               spyre_kernel_param(k, SPYRE_KTYPE_I64, 1), i),
                           N_, 0);
        b[0] = mkbuf(nrand, SPYRE_DTYPE_FP32);
        memset(size, 0, sizeof(size));
        size[0] = nrand;
        mklaunch(&lk, k, b, 1, rp, 2, 1, 0, size);
        t = p2_time(&lk, b);
        m = p2_memcpy(nrand * 4);
        printf("%-28s %8.1f us  %6.2f ns/element  memcpy %7.1f us  "
               "x%.1f\n", kind == SPYRE_KRAND_NORMAL ? "4 Mi normal f32" :
               "4 Mi uniform f32", t * 1e6, t * 1e9 / nrand, m * 1e6,
               t / m);
        free(b[0].data);
        spyre_kernel_destroy(k);
    }
    /* cumsum */
    if (!only || !strcmp(only, "cumsum")) {
        const uint32_t dt[2] = { SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32 };
        uint64_t sp[1] = { 4096 };

        spyre_kernel_create(dt, 2, 1, 1, 1, &k);
        o = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N_, 1, 0);
        spyre_kernel_pass(k);
        o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, o,
                            spyre_kernel_idx(k, SPYRE_KTYPE_I64,
                                             SPYRE_KDIM_R0), N_);
        spyre_kernel_store(k, 1, o,
                           spyre_kernel_scan(k, SPYRE_KRED_SUM,
                               spyre_kernel_load(k, 0, o, N_, N_), N_),
                           N_, 0);
        spyre_kernel_endpass(k);
        b[0] = mkbuf(1024 * 4096, SPYRE_DTYPE_FP32);
        b[1] = mkbuf(1024 * 4096, SPYRE_DTYPE_FP32);
        fill(&b[0]);
        memset(size, 0, sizeof(size));
        size[0] = 1024;
        size[6] = 4096;
        mklaunch(&lk, k, b, 2, sp, 1, 1, 1, size);
        t = p2_time(&lk, b);
        m = p2_memcpy(1024 * 4096 * 4);
        printf("%-28s %8.1f us  %6.2f ns/element  memcpy %7.1f us  "
               "x%.1f\n", "cumsum 1024x4096 f32", t * 1e6,
               t * 1e9 / (1024 * 4096), m * 1e6, t / m);
        free(b[0].data);
        free(b[1].data);
        spyre_kernel_destroy(k);
    }
}

/*
 * The card's verifier and libspyre's agree where they once differed:
 * IDX or AFFINE of a reduction dimension outside a pass is STRUCTURE,
 * IDX or SIZE of the linear reduction index without reduction dims is
 * INDEX (docs/spyre-hw.rst, "Verification and errors").
 */
static void verify_align(void)
{
    static const struct {
        uint8_t op;
        uint16_t mod;
        uint32_t imm, nrdims, reason;
    } cases[] = {
        { SPYRE_KOP_IDX, 0, SPYRE_KDIM_R0, 1, SPYRE_KERR_STRUCTURE },
        { SPYRE_KOP_IDX, 0, SPYRE_KDIM_RINDEX, 1, SPYRE_KERR_STRUCTURE },
        { SPYRE_KOP_AFFINE, 1u << SPYRE_KDIM_R0, 0, 1,
          SPYRE_KERR_STRUCTURE },
        { SPYRE_KOP_IDX, 0, SPYRE_KDIM_RINDEX, 0, SPYRE_KERR_INDEX },
        { SPYRE_KOP_SIZE, 0, SPYRE_KDIM_RINDEX, 0, SPYRE_KERR_INDEX },
        { SPYRE_KOP_IDX, 0, SPYRE_KDIM_R0, 0, SPYRE_KERR_INDEX },
    };
    unsigned int i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct {
            struct spyre_kprog_header h;
            struct spyre_kinst in[3];
        } prog;
        struct spyre_ref_kernel_launch rl = { 0 };
        struct spyre_ref_kernel_result rr;
        static SpyreKProg kp;
        SpyreKLaunch l = { 0 };
        uint64_t detail, want;
        uint32_t n = cases[i].nrdims ? 3 : 1;

        spyre_kprog_header_init(&prog.h, n, 1, 0, NULL, 1, 1,
                                cases[i].nrdims, cases[i].nrdims ? 1 : 0);
        spyre_kinst_init(&prog.in[0], cases[i].op, SPYRE_KTYPE_I64,
                         cases[i].mod, 0, SPYRE_KVAL_NONE, SPYRE_KVAL_NONE,
                         SPYRE_KVAL_NONE, cases[i].imm);
        spyre_kinst_init(&prog.in[1], SPYRE_KOP_PASS, 0, 0, SPYRE_KVAL_NONE,
                         SPYRE_KVAL_NONE, SPYRE_KVAL_NONE, SPYRE_KVAL_NONE,
                         0);
        spyre_kinst_init(&prog.in[2], SPYRE_KOP_ENDPASS, 0, 0,
                         SPYRE_KVAL_NONE, SPYRE_KVAL_NONE, SPYRE_KVAL_NONE,
                         SPYRE_KVAL_NONE, 0);
        l.nparams = 1;
        l.npdims = 1;
        l.nrdims = cases[i].nrdims;
        l.size[0] = 1;
        l.size[6] = cases[i].nrdims;
        l.P = l.R = 1;
        rl.prog = &prog;
        rl.prog_size = 64 + 16 * n;
        rl.nparams = 1;
        rl.params = l.param;
        rl.npdims = 1;
        rl.nrdims = cases[i].nrdims;
        memcpy(rl.size, l.size, sizeof(rl.size));
        want = (uint64_t)cases[i].reason << 32;
        ran++;
        if (spyre_kernel_verify(&kp, (const uint8_t *)&prog, 64 + 16 * n, &l,
                                &detail) != SPYRE_STATUS_BAD_PROGRAM ||
            detail != want || spyre_ref_kernel(&rl, &rr) ||
            rr.status != SPYRE_STATUS_BAD_PROGRAM || rr.detail != want) {
            printf("not ok verify case %u: card %#llx, libspyre %#x/%#llx, "
                   "want %#llx\n", i, (unsigned long long)detail, rr.status,
                   (unsigned long long)rr.detail, (unsigned long long)want);
            failures++;
        }
    }
}

static void part2_one(int it)
{
    switch (it % 4) {
    case 0:
        p2_scatter(it);
        break;
    case 1:
        p2_scan(it);
        break;
    case 2:
        p2_rand(it);
        break;
    default:
        p2_rows(it);
        break;
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    int i, n = argc > 2 ? atoi(argv[2]) : 300;
    unsigned int isa, isas = spyre_kernel_isas();
    bool part2_only = !strcmp(mode, "check-part2");

    if (!strcmp(mode, "bench") || !strcmp(mode, "bench-base")) {
        if (getenv("KB_ISA")) {
            spyre_kernel_set_isa(atoi(getenv("KB_ISA")));
        }
        /* $KB_N, $KB_ROWS: fewer, a run in the caches */
        issue_kernels(true, !strcmp(mode, "bench-base"),
                      getenv("KB_N") ? strtoull(getenv("KB_N"), NULL, 0) :
                      4u << 20,
                      getenv("KB_ROWS") ? strtoull(getenv("KB_ROWS"), NULL,
                                                   0) : 1024);
        return 0;
    }
    if (!strcmp(mode, "rand-digest")) {
        for (isa = 0; isa < 32; isa++) {
            if ((isas & (1u << isa)) && spyre_kernel_set_isa(isa)) {
                printf("code path %u: %#llx\n", isa,
                       (unsigned long long)rand_digest());
            }
        }
        return 0;
    }
    if (!strcmp(mode, "bench-part2")) {
        bench_part2(argc > 2 ? argv[2] : NULL);
        return 0;
    }
    /* Every host code path, on the same inputs, against the base. */
    for (isa = 0; isa < 32; isa++) {
        if (!(isas & (1u << isa))) {
            continue;
        }
        if (!spyre_kernel_set_isa(isa)) {
            printf("not ok: code path %u refused\n", isa);
            failures++;
            continue;
        }
        rng = 88172645463325252ull;
        for (map_mode = 0; map_mode < 3 && !part2_only; map_mode++) {
            issue_kernels(false, false, 1u << 20, 256);
        }
        map_mode = 1;
        if (!part2_only) {
            math_sweep(1u << 21);
            half_sweep();
            keep_sweep();
            minmax_sweep();
            for (i = 0; i < n; i++) {
                map_mode = i % 3;
                random_one(i);
            }
        }
        philox_kat();
        rand_kat();
        verify_align();
        for (i = 0; i < n; i++) {
            map_mode = i % 3;
            part2_one(i);
        }
        printf("code path %u: %d runs so far, %d failures\n", isa, ran,
               failures);
    }
    printf("%s: %d runs (%d ok, %d out of bounds, %d faults, %d other), "
           "%d failures\n", failures ? "FAIL" : "ok", ran, st_count[0],
           st_count[1], st_count[2], st_count[3], failures);
    return failures != 0;
}
