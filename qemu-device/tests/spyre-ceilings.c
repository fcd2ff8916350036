// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Native ceilings of the Spyre card's figures, measured on the host by
 * `make bench` (scripts/run-bench.sh) in the same run as the card's
 * figures: the same work the card model does, done natively, on the same
 * number of threads, through the card model's own numeric core
 * (qemu-device/spyre-math.c, linked in) where the card uses it.
 *
 *   spyre-ceilings [--threads T] [--reps R] [--size MIB]
 *
 * prints one line per ceiling, "ceiling KEY MEDIAN MIN MAX" over R
 * repetitions (default 5), each repetition its own timed measurement:
 *   memcpy-1t, memcpy-Tt     GB/s, memcpy of --size MiB (default 64) on 1
 *                            and on T threads (each copies 1/T of it)
 *   sgemm-Tt                 GFLOPS, OpenBLAS sgemm 512^3 on T threads
 *   sgemm-2048-Tt            GFLOPS, OpenBLAS sgemm 2048^3 on T threads
 *   gemm-DTYPE-Tt            GFLOPS, 512^3 GEMM through spyre_gemm_host()
 *                            (widening + sgemm, or int8 products) on T
 *                            threads, each an M slice with one BLAS thread,
 *                            as the card's GEMM parts run
 *   elt-OP-N, reduce-OP-N, rowop-OP-N
 *                            ns per element of one spyre_eltwise(),
 *                            spyre_reduce() or spyre_rowop() call on N fp16
 *                            elements (N = 4Ki, 64Ki, 1Mi; rows of 1024)
 *   elt-add-4096-call        ns per spyre_eltwise() ADD call of 4Ki fp16
 *   block-fp16, block-fp8    us per block of spyre-demo's transformer block
 *                            (libspyre/tools/spyre-block.h: the same
 *                            parameters, tensors, dtypes, steps and scales
 *                            as the card runs it, the activation scales
 *                            calibrated on this fp16 run as spyre-demo
 *                            does on the card's), every operation through
 *                            the card's math code on host buffers
 *
 * The block runs on one thread whatever --threads, with one BLAS thread:
 * the card runs a job's commands one after the other, and it splits a GEMM
 * across its workers only from 2^27 multiply-adds (spyre-gemm.c) while the
 * block's largest has 1.6 M, so on the card too the whole block is one
 * host thread's work at a time.  What the card adds to it (operand
 * translation and DMA, command decoding, job dispatch) is what its ratio
 * to this ceiling measures.  The native result is not compared with the
 * card's; it must be finite, and the fp8 block's update y - x must stay
 * within 0.16 (normwise) of the fp16 block's.
 *
 * Timings are printed, never judged.  Build: make -f Makefile.math
 * ceilings (see Makefile.math).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "spyre-math.h"
#include "spyre-block.h"

#define MIB         (1024u * 1024u)
#define MAX_REPS    32
#define MAX_THREADS 64
#define GEMM_N      512u
#define GEMM_BIG    2048u
/* fp8 vs fp16 block update: spyre-demo's two tolerances, added */
#define BLOCK_TOL   0.16

static int nthreads = 1, nreps = 5;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static void report(const char *key, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    printf("ceiling %s %.6g %.6g %.6g\n", key, v[n / 2], v[0], v[n - 1]);
    fflush(stdout);
}

/* Seconds per call of @fn(@ctx), calls repeated for at least 20 ms. */
static double time_calls(void (*fn)(void *ctx), void *ctx)
{
    double t0 = now(), t;
    long calls = 0;

    do {
        fn(ctx);
        calls++;
        t = now() - t0;
    } while (t < 0.02);
    return t / calls;
}

static void *xalloc(size_t size)
{
    void *p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);

    if (!p) {
        fprintf(stderr, "spyre-ceilings: out of memory\n");
        exit(1);
    }
    memset(p, 0, size);
    return p;
}

/* ---- threads: run fn(i) on T threads at once, timed ------------------- */

typedef void (*work_fn)(void *ctx, int i);

struct worker {
    pthread_t th;
    pthread_barrier_t *start;
    work_fn fn;
    void *ctx;
    int i;
    double t0, t1;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    pthread_barrier_wait(w->start);
    w->t0 = now();
    w->fn(w->ctx, w->i);
    w->t1 = now();
    return NULL;
}

/*
 * Seconds from the first start of the @t runs of @fn to the end of the
 * last, as the threads themselves saw them (the waiting caller may be
 * scheduled late on a small host).
 */
static double run_threads(int t, work_fn fn, void *ctx)
{
    struct worker w[MAX_THREADS];
    pthread_barrier_t start;
    double t0 = 1e300, t1 = 0;
    int i;

    if (t == 1) {
        t0 = now();
        fn(ctx, 0);
        return now() - t0;
    }
    pthread_barrier_init(&start, NULL, (unsigned)t);
    for (i = 0; i < t; i++) {
        w[i] = (struct worker){ .start = &start, .fn = fn, .ctx = ctx,
                                .i = i };
        if (pthread_create(&w[i].th, NULL, worker_main, &w[i])) {
            fprintf(stderr, "spyre-ceilings: pthread_create failed\n");
            exit(1);
        }
    }
    for (i = 0; i < t; i++) {
        pthread_join(w[i].th, NULL);
        t0 = w[i].t0 < t0 ? w[i].t0 : t0;
        t1 = w[i].t1 > t1 ? w[i].t1 : t1;
    }
    pthread_barrier_destroy(&start);
    return t1 - t0;
}

/* ---- memcpy ------------------------------------------------------------ */

struct copy_ctx {
    uint8_t *dst, *src;
    size_t size;
    int t;
};

static void copy_part(void *opaque, int i)
{
    struct copy_ctx *c = opaque;
    size_t part = (c->size / (size_t)c->t + 4095) & ~(size_t)4095;
    size_t off = part * (size_t)i;

    if (off < c->size) {
        memcpy(c->dst + off, c->src + off,
               off + part > c->size ? c->size - off : part);
    }
}

static void bench_memcpy(size_t size, int t)
{
    struct copy_ctx c = { xalloc(size), xalloc(size), size, t };
    double v[MAX_REPS];
    char key[32];
    int r;

    memset(c.src, 0x5a, size);
    run_threads(t, copy_part, &c);          /* warm-up */
    for (r = 0; r < nreps; r++) {
        v[r] = (double)size / run_threads(t, copy_part, &c) / 1e9;
    }
    if (c.dst[size / 2] != 0x5a) {
        fprintf(stderr, "spyre-ceilings: memcpy lost data\n");
        exit(1);
    }
    snprintf(key, sizeof(key), "memcpy-%dt", t);
    report(key, v, nreps);
    free(c.dst);
    free(c.src);
}

/* ---- GEMM -------------------------------------------------------------- */

struct gemm_ctx {
    int dtype, c_dtype;
    size_t es;
    uint8_t *a, *b, *c;
    void *tile[MAX_THREADS];
    int t;
    int err;
};

/* One M slice of the 512^3 GEMM, through the card's numeric core. */
static void gemm_part(void *opaque, int i)
{
    struct gemm_ctx *g = opaque;
    uint32_t rows = GEMM_N / (uint32_t)g->t;
    uint32_t m0 = rows * (uint32_t)i;
    struct spyre_cmd_gemm cmd = {
        .a_dtype = g->dtype, .b_dtype = g->dtype, .c_dtype = g->c_dtype,
        .m = i == g->t - 1 ? GEMM_N - m0 : rows, .n = GEMM_N, .k = GEMM_N,
        .batch = 1, .lda = GEMM_N, .ldb = GEMM_N, .ldc = GEMM_N,
        .alpha = 0x3f800000,
    };
    SpyreGemmHostBufs bufs = {
        .a = g->a + (size_t)m0 * GEMM_N * g->es,
        .a_size = (size_t)cmd.m * GEMM_N * g->es,
        .b = g->b, .b_size = (size_t)GEMM_N * GEMM_N * g->es,
        .c = g->c + (size_t)m0 * GEMM_N * 4,
        .c_size = (size_t)cmd.m * GEMM_N * 4,
    };
    cmd.hdr.opcode = SPYRE_OP_GEMM;
    cmd.hdr.size = sizeof(cmd);

    if (spyre_gemm_host(&cmd, 1.0f, 1.0f, &bufs, g->tile[i],
                        SPYRE_GEMM_TILE_BUF_SIZE, NULL) != SPYRE_STATUS_OK) {
        g->err = 1;
    }
}

struct sgemm_ctx {
    float *a, *b, *c;
};

static void sgemm_all(void *opaque, int i)
{
    struct sgemm_ctx *g = opaque;

    (void)i;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_N, GEMM_N,
                GEMM_N, 1.0f, g->a, GEMM_N, g->b, GEMM_N, 0.0f, g->c, GEMM_N);
}

/* GFLOPS of @calls runs of @fn on @t threads (after one warm-up). */
static double gemm_rate(int t, work_fn fn, void *ctx, int calls)
{
    double sum = 0;
    int i;

    run_threads(t, fn, ctx);
    for (i = 0; i < calls; i++) {
        sum += run_threads(t, fn, ctx);
    }
    return 2.0 * GEMM_N * GEMM_N * GEMM_N * calls / sum / 1e9;
}

static void bench_gemm(int t)
{
    static const struct {
        const char *name;
        int dtype, c_dtype;
        uint64_t one;
    } dt[] = {
        { "fp32", SPYRE_DTYPE_FP32, SPYRE_DTYPE_FP32, 0x3f800000 },
        { "fp16", SPYRE_DTYPE_FP16, SPYRE_DTYPE_FP32, 0x3c00 },
        { "bf16", SPYRE_DTYPE_BF16, SPYRE_DTYPE_FP32, 0x3f80 },
        { "fp8-e4m3", SPYRE_DTYPE_FP8_E4M3, SPYRE_DTYPE_FP32, 0x38 },
        { "int8", SPYRE_DTYPE_INT8, SPYRE_DTYPE_INT32, 0x01 },
    };
    const size_t nn = (size_t)GEMM_N * GEMM_N;
    struct sgemm_ctx sg = { xalloc(nn * 4), xalloc(nn * 4), xalloc(nn * 4) };
    double v[MAX_REPS];
    char key[48];
    size_t i, j;
    int r;

    for (j = 0; j < nn; j++) {
        sg.a[j] = 1.0f;
        sg.b[j] = 1.0f;
    }

    /* The card's parts each use one BLAS thread (spyre.c). */
    spyre_math_set_blas_threads(1);
    for (i = 0; i < sizeof(dt) / sizeof(dt[0]); i++) {
        struct gemm_ctx g = {
            .dtype = dt[i].dtype, .c_dtype = dt[i].c_dtype,
            .es = spyre_math_dtype_size(dt[i].dtype), .t = t,
        };

        g.a = xalloc(nn * g.es);
        g.b = xalloc(nn * g.es);
        g.c = xalloc(nn * 4);
        for (j = 0; j < nn; j++) {
            memcpy(g.a + j * g.es, &dt[i].one, g.es);
            memcpy(g.b + j * g.es, &dt[i].one, g.es);
        }
        for (j = 0; j < (size_t)t; j++) {
            g.tile[j] = xalloc(SPYRE_GEMM_TILE_BUF_SIZE);
        }
        for (r = 0; r < nreps; r++) {
            v[r] = gemm_rate(t, gemm_part, &g, 3);
        }
        if (g.err) {
            fprintf(stderr, "spyre-ceilings: GEMM %s failed\n", dt[i].name);
            exit(1);
        }
        snprintf(key, sizeof(key), "gemm-%s-%dt", dt[i].name, t);
        report(key, v, nreps);
        for (j = 0; j < (size_t)t; j++) {
            free(g.tile[j]);
        }
        free(g.a);
        free(g.b);
        free(g.c);
    }
    /*
     * Last: OpenBLAS's own threads keep spinning for a while after a call
     * and would steal the CPUs of the measurements above.
     */
    {
        const size_t big = (size_t)GEMM_BIG * GEMM_BIG;
        float *a = xalloc(big * 4), *b = xalloc(big * 4), *c = xalloc(big * 4);
        double t0;

        openblas_set_num_threads(t);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_BIG,
                    GEMM_BIG, GEMM_BIG, 1.0f, a, GEMM_BIG, b, GEMM_BIG, 0.0f,
                    c, GEMM_BIG);
        for (r = 0; r < nreps; r++) {
            t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_BIG,
                        GEMM_BIG, GEMM_BIG, 1.0f, a, GEMM_BIG, b, GEMM_BIG,
                        0.0f, c, GEMM_BIG);
            v[r] = 2.0 * GEMM_BIG * GEMM_BIG * GEMM_BIG / (now() - t0) / 1e9;
        }
        snprintf(key, sizeof(key), "sgemm-%u-%dt", GEMM_BIG, t);
        report(key, v, nreps);
        free(a);
        free(b);
        free(c);
    }
    openblas_set_num_threads(t);
    for (r = 0; r < nreps; r++) {
        v[r] = gemm_rate(1, sgemm_all, &sg, 5);
    }
    snprintf(key, sizeof(key), "sgemm-%dt", t);
    report(key, v, nreps);
    free(sg.a);
    free(sg.b);
    free(sg.c);
}

/* ---- ELTWISE, REDUCE, ROWOP -------------------------------------------- */

#define ROW_COLS    1024u

enum { K_ELT, K_REDUCE, K_ROWOP };

struct vec_ctx {
    int kind, op;
    uint32_t n;
    uint16_t *a, *b, *out;
    int err;
};

static void vec_once(void *opaque)
{
    struct vec_ctx *c = opaque;
    uint32_t rows = c->n / ROW_COLS;
    int st;

    if (c->kind == K_ELT) {
        st = spyre_eltwise(c->op, SPYRE_DTYPE_FP16, 0.5f, c->a, c->b, c->out,
                           c->n);
    } else if (c->kind == K_REDUCE) {
        st = spyre_reduce(c->op, SPYRE_DTYPE_FP16, c->a, ROW_COLS, rows,
                          ROW_COLS, c->out);
    } else {
        st = spyre_rowop(c->op, SPYRE_DTYPE_FP16, c->a, ROW_COLS, c->out,
                         ROW_COLS, rows, ROW_COLS, NULL, NULL, 0.00001f);
    }
    if (st != SPYRE_STATUS_OK) {
        c->err = 1;
    }
}

/* ns per element (or per call) of one call. */
static void bench_vec(const char *name, int kind, int op, uint32_t n,
                      bool per_call)
{
    struct vec_ctx c = { kind, op, n, xalloc(n * 2), xalloc(n * 2),
                         xalloc(n * 2), 0 };
    double v[MAX_REPS];
    char key[48];
    uint32_t i;
    int r;

    for (i = 0; i < n; i++) {
        c.a[i] = spyre_fp32_to_fp16((float)(i % 61) / 16.0f - 2.0f);
        c.b[i] = spyre_fp32_to_fp16((float)(i % 29) / 8.0f - 1.5f);
    }
    vec_once(&c);
    for (r = 0; r < nreps; r++) {
        v[r] = time_calls(vec_once, &c) * 1e9 / (per_call ? 1 : n);
    }
    if (c.err) {
        fprintf(stderr, "spyre-ceilings: %s failed\n", name);
        exit(1);
    }
    snprintf(key, sizeof(key), "%s-%u%s", name, n, per_call ? "-call" : "");
    report(key, v, nreps);
    free(c.a);
    free(c.b);
    free(c.out);
}

static void bench_vecs(void)
{
    static const struct {
        const char *name;
        int kind, op;
    } k[] = {
        { "elt-add", K_ELT, SPYRE_ELT_ADD },
        { "elt-mul", K_ELT, SPYRE_ELT_MUL },
        { "elt-scale", K_ELT, SPYRE_ELT_SCALE },
        { "elt-relu", K_ELT, SPYRE_ELT_RELU },
        { "elt-gelu", K_ELT, SPYRE_ELT_GELU },
        { "elt-silu", K_ELT, SPYRE_ELT_SILU },
        { "elt-exp", K_ELT, SPYRE_ELT_EXP },
        { "reduce-sum", K_REDUCE, SPYRE_REDUCE_SUM },
        { "reduce-max", K_REDUCE, SPYRE_REDUCE_MAX },
        { "rowop-softmax", K_ROWOP, SPYRE_ROW_SOFTMAX },
        { "rowop-layernorm", K_ROWOP, SPYRE_ROW_LAYERNORM },
        { "rowop-rmsnorm", K_ROWOP, SPYRE_ROW_RMSNORM },
    };
    static const uint32_t sizes[] = { 4096, 65536, 1048576 };
    size_t i, j;

    bench_vec("elt-add", K_ELT, SPYRE_ELT_ADD, 4096, true);
    for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        for (j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
            bench_vec(k[i].name, k[i].kind, k[i].op, sizes[j], false);
        }
    }
}

/* ---- the transformer block -------------------------------------------- */

/*
 * spyre-demo's block as spyre-block.h describes it, natively: the
 * operations of struct blk_ops on host buffers through the card's numeric
 * core, one after the other on this thread.
 */
struct block_ctx {
    uint8_t *t[BLK_NTENSORS];
    void *tile;
    int err;
};

static void *block_at(struct block_ctx *b, struct blk_ref r)
{
    return r.t == BLK_NONE ? NULL : b->t[r.t] + blk_offset(r);
}

/* Bytes of @r's tensor from @r on (0 for no operand). */
static size_t block_room(struct blk_ref r)
{
    return r.t == BLK_NONE ? 0 : blk_bytes(r.t) - blk_offset(r);
}

/* The binary32 value at @r, as the card reads a GEMM's scale; 1 without. */
static float block_f32(struct block_ctx *b, struct blk_ref r)
{
    float f = 1.0f;

    if (r.t != BLK_NONE) {
        memcpy(&f, block_at(b, r), sizeof(f));
    }
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static void block_status(struct block_ctx *b, int st)
{
    if (st != SPYRE_STATUS_OK && !b->err) {
        b->err = st;
    }
}

static void block_gemm(void *ctx, const struct blk_gemm *g)
{
    struct block_ctx *b = ctx;
    struct spyre_cmd_gemm cmd = {
        .hdr = { .opcode = SPYRE_OP_GEMM, .flags = (uint16_t)g->flags,
                 .size = sizeof(cmd) },
        .a_dtype = g->a_dtype, .b_dtype = g->b_dtype, .c_dtype = g->c_dtype,
        .m = g->m, .n = g->n, .k = g->k, .batch = g->batch,
        .lda = g->lda, .ldb = g->ldb, .ldc = g->ldc,
        .stride_a = g->stride_a, .stride_b = g->stride_b,
        .stride_c = g->stride_c,
        .alpha = f32_bits(g->alpha), .beta = f32_bits(g->beta),
    };
    SpyreGemmHostBufs bufs = {
        .a = block_at(b, g->a), .a_size = block_room(g->a),
        .b = block_at(b, g->b), .b_size = block_room(g->b),
        .c = block_at(b, g->c), .c_size = block_room(g->c),
    };
    float amax;

    block_status(b, spyre_gemm_host(&cmd, block_f32(b, g->scale_a),
                                    block_f32(b, g->scale_b), &bufs, b->tile,
                                    SPYRE_GEMM_TILE_BUF_SIZE, &amax));
    if (g->amax.t != BLK_NONE) {
        memcpy(block_at(b, g->amax), &amax, sizeof(amax));
    }
}

static void block_eltwise(void *ctx, uint32_t op, uint32_t dtype, uint64_t n,
                          struct blk_ref out, struct blk_ref a,
                          struct blk_ref bb, float alpha)
{
    struct block_ctx *b = ctx;

    block_status(b, spyre_eltwise(op, dtype, alpha, block_at(b, a),
                                  block_at(b, bb), block_at(b, out), n));
}

static void block_rowop(void *ctx, uint32_t op, uint32_t dtype, uint32_t rows,
                        uint32_t cols, struct blk_ref dst, struct blk_ref src,
                        struct blk_ref gamma, float eps)
{
    struct block_ctx *b = ctx;

    block_status(b, spyre_rowop(op, dtype, block_at(b, src), cols,
                                block_at(b, dst), cols, rows, cols,
                                block_at(b, gamma), NULL, eps));
}

static void block_convert(void *ctx, struct blk_ref dst, uint32_t dst_dtype,
                          struct blk_ref src, uint32_t src_dtype, uint64_t n)
{
    struct block_ctx *b = ctx;

    block_status(b, spyre_convert(block_at(b, dst), dst_dtype,
                                  block_at(b, src), src_dtype, n, 0));
}

static const struct blk_ops block_ops = {
    .gemm = block_gemm,
    .eltwise = block_eltwise,
    .rowop = block_rowop,
    .convert = block_convert,
};

struct block_run {
    struct block_ctx *b;
    bool fp8;
    float scales[BLK_NSCALES];
};

static void block_once(void *opaque)
{
    struct block_run *r = opaque;

    blk_run(&block_ops, r->b, r->fp8, r->scales);
}

/* fp64 -> fp16, rounded once (gcc's IEEE _Float16), as spyre-demo's are. */
static uint16_t f64_to_fp16(double d)
{
    _Float16 h = (_Float16)d;
    uint16_t u;

    memcpy(&u, &h, sizeof(u));
    return u;
}

/*
 * The block's parameters, encoded as spyre-demo uploads them (the E4M3
 * weights through binary32, which could round twice; spyre-demo rounds
 * from fp64).
 */
static void block_params(struct block_ctx *b, float *scales)
{
    static double x[BLK_SEQ * BLK_DM], g1[BLK_DM], g2[BLK_DM];
    double *w[BLK_NWEIGHTS];
    uint32_t i;
    int h, j;

    for (j = 0; j < BLK_NWEIGHTS; j++) {
        w[j] = xalloc(blk_tensors[blk_weights[j].w16].n * sizeof(double));
    }
    blk_params(x, w, g1, g2);
    for (i = 0; i < BLK_SEQ * BLK_DM; i++) {
        ((uint16_t *)b->t[BLK_X])[i] = f64_to_fp16(x[i]);
    }
    for (j = 0; j < BLK_NWEIGHTS; j++) {
        const struct blk_weight *bw = &blk_weights[j];
        double amax = 0;

        for (i = 0; i < blk_tensors[bw->w16].n; i++) {
            amax = fmax(amax, fabs(w[j][i]));
        }
        scales[j] = (float)(amax / BLK_E4M3_MAX);
        for (i = 0; i < blk_tensors[bw->w16].n; i++) {
            ((uint16_t *)b->t[bw->w16])[i] = f64_to_fp16(w[j][i]);
            b->t[bw->w8][i] = spyre_fp32_to_e4m3((float)(w[j][i] / scales[j]),
                                                 0);
        }
        free(w[j]);
    }
    for (i = 0; i < BLK_DM; i++) {
        ((float *)b->t[BLK_G1])[i] = (float)g1[i];
        ((float *)b->t[BLK_G2])[i] = (float)g2[i];
    }
    for (h = 0; h < BLK_NH; h++) {
        for (i = 0; i < BLK_SEQ * BLK_SEQ; i++) {
            ((uint16_t *)b->t[BLK_MASK])[h * BLK_SEQ * BLK_SEQ + i] =
                f64_to_fp16(blk_mask(i / BLK_SEQ, i % BLK_SEQ));
        }
    }
}

/* max |v| of fp16 tensor @t. */
static double block_amax(struct block_ctx *b, int t)
{
    const uint16_t *v = (const uint16_t *)b->t[t];
    double m = 0;
    uint32_t i;

    for (i = 0; i < blk_tensors[t].n; i++) {
        m = fmax(m, fabs(spyre_fp16_to_fp32(v[i])));
    }
    return m;
}

/* The block's update y - x as floats; false if a value is not finite. */
static bool block_update(struct block_ctx *b, float *dy)
{
    const uint16_t *x = (const uint16_t *)b->t[BLK_X];
    const uint16_t *y = (const uint16_t *)b->t[BLK_Y];
    uint32_t i;

    for (i = 0; i < BLK_SEQ * BLK_DM; i++) {
        dy[i] = spyre_fp16_to_fp32(y[i]) - spyre_fp16_to_fp32(x[i]);
        if (!isfinite(dy[i])) {
            return false;
        }
    }
    return true;
}

static void bench_block(void)
{
    static float dy16[BLK_SEQ * BLK_DM], dy8[BLK_SEQ * BLK_DM];
    struct block_ctx b = { .tile = xalloc(SPYRE_GEMM_TILE_BUF_SIZE) };
    struct block_run run = { .b = &b };
    double v[MAX_REPS], num = 0, den = 0;
    int i, r, j;

    for (i = 0; i < BLK_NTENSORS; i++) {
        b.t[i] = xalloc(blk_bytes(i));
    }
    block_params(&b, run.scales);
    spyre_math_set_blas_threads(1);
    for (i = 0; i < 2; i++) {
        run.fp8 = i;
        if (run.fp8) {
            /* activation scales from the fp16 run, as spyre-demo's */
            for (j = BLK_S_H1; j < BLK_NSCALES; j++) {
                run.scales[j] = (float)(block_amax(&b, blk_act_scale[j]) /
                                        BLK_E4M3_MAX);
            }
        }
        memcpy(b.t[BLK_SCALES], run.scales, sizeof(run.scales));
        block_once(&run);
        for (r = 0; r < nreps; r++) {
            v[r] = time_calls(block_once, &run) * 1e6;
        }
        if (b.err || !block_update(&b, run.fp8 ? dy8 : dy16)) {
            fprintf(stderr, "spyre-ceilings: block-%s failed (status %d, "
                    "or a value not finite)\n", run.fp8 ? "fp8" : "fp16",
                    b.err);
            exit(1);
        }
        report(run.fp8 ? "block-fp8" : "block-fp16", v, nreps);
    }
    /* sane: fp8 and fp16 compute the same block (see the header) */
    for (i = 0; i < BLK_SEQ * BLK_DM; i++) {
        num += (double)(dy8[i] - dy16[i]) * (dy8[i] - dy16[i]);
        den += (double)dy16[i] * dy16[i];
    }
    if (!(sqrt(num / den) <= BLOCK_TOL)) {
        fprintf(stderr, "spyre-ceilings: the fp8 block's update differs "
                "from the fp16 one's by %.3g (normwise, above %g)\n",
                sqrt(num / den), BLOCK_TOL);
        exit(1);
    }
    for (i = 0; i < BLK_NTENSORS; i++) {
        free(b.t[i]);
    }
    free(b.tile);
}

/* ---- main -------------------------------------------------------------- */

static int parse_int(const char *opt, const char *arg, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < min || v > max) {
        fprintf(stderr, "spyre-ceilings: %s: '%s' is not an integer in "
                "[%ld, %ld]\n", opt, arg, min, max);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    size_t size = 64 * (size_t)MIB;
    int i;

    for (i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--threads")) {
            nthreads = parse_int("--threads", argv[++i], 1, MAX_THREADS);
        } else if (i + 1 < argc && !strcmp(argv[i], "--reps")) {
            nreps = parse_int("--reps", argv[++i], 1, MAX_REPS);
        } else if (i + 1 < argc && !strcmp(argv[i], "--size")) {
            size = (size_t)parse_int("--size", argv[++i], 1, 4096) * MIB;
        } else {
            fprintf(stderr, "usage: spyre-ceilings [--threads T] "
                    "[--reps R] [--size MIB]\n");
            return 2;
        }
    }
    bench_memcpy(size, 1);
    if (nthreads > 1) {
        bench_memcpy(size, nthreads);
    }
    bench_block();
    bench_gemm(nthreads);
    bench_vecs();
    return 0;
}
