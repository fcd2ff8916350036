/*
 * Native benchmark and bit-exactness harness of the KERNEL engine's core
 * (../spyre-kernel.c), no QEMU: programs are built with libspyre's
 * builder (kbuild.c, compiled in), run tile by tile through a SpyreKIO
 * on host buffers, and compared bit for bit (outputs, status, details)
 * with the same runs of a frozen copy of the core (BASE in
 * Makefile.kernel, renamed base_*).  See Makefile.kernel.
 *
 *   spyre-kbench check [N]   the issue's three kernels plus N random
 *                            programs (default 300) against the base,
 *                            once per host code path of the core
 *                            (spyre_kernel_isas()), memory reached
 *                            through SpyreKIO.map in one piece, in
 *                            4 KiB pieces, or through access only
 *   spyre-kbench bench       ns/element of the issue's kernels, new core
 *                            (wall time and this thread's CPU time)
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
#include "spyre-kernel.h"

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

static struct spyre_kernel *k_rows(bool softmax)
{
    const uint32_t dt[2] = { SPYRE_DTYPE_FP16,
                             softmax ? SPYRE_DTYPE_FP16 : SPYRE_DTYPE_FP32 };
    struct spyre_kernel *k;
    int row, o, x, m, e, s;

    spyre_kernel_create(dt, 2, 1, 1, 1, &k);
    row = spyre_kernel_affine(k, SPYRE_KTYPE_I64, N_, 1, 0);
    spyre_kernel_pass(k);
    o = spyre_kernel_op(k, SPYRE_KOP_ADD, 0, row,
                        spyre_kernel_idx(k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0),
                        N_);
    x = spyre_kernel_load(k, 0, o, N_, N_);
    m = spyre_kernel_reduce(k, softmax ? SPYRE_KRED_MAX : SPYRE_KRED_SUM,
                            x, N_, N_, N_);
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
            mklaunch(&lk, k, b, 2, param, 1, 1, 1, size);
        }
        if (!bench) {
            differ(name, &lk, b, which ? 2 : 3);
        } else {
            for (rep = 0; rep < 3; rep++) {
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
            printf("%-26s %8.2f ns/element (%s core, best of 3; "
                   "CPU time %.2f)\n", name, best * 1e9 / elems,
                   base ? "base" : "new", cbest * 1e9 / elems);
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    int i, n = argc > 2 ? atoi(argv[2]) : 300;
    unsigned int isa, isas = spyre_kernel_isas();

    if (!strcmp(mode, "bench") || !strcmp(mode, "bench-base")) {
        if (getenv("KB_ISA")) {
            spyre_kernel_set_isa(atoi(getenv("KB_ISA")));
        }
        issue_kernels(true, !strcmp(mode, "bench-base"), 4u << 20, 1024);
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
        for (map_mode = 0; map_mode < 3; map_mode++) {
            issue_kernels(false, false, 1u << 20, 256);
        }
        map_mode = 1;
        math_sweep(1u << 21);
        for (i = 0; i < n; i++) {
            map_mode = i % 3;
            random_one(i);
        }
        printf("code path %u: %d runs so far, %d failures\n", isa, ran,
               failures);
    }
    printf("%s: %d runs (%d ok, %d out of bounds, %d faults, %d other), "
           "%d failures\n", failures ? "FAIL" : "ok", ran, st_count[0],
           st_count[1], st_count[2], st_count[3], failures);
    return failures != 0;
}
