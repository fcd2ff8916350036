/*
 * Spyre card model: numeric core (dtype conversion, GEMM, element-wise,
 * reduction and row operations).
 *
 * Plain C11 with no QEMU headers, so that the same file builds into the
 * device model and into a host unit test (qemu-device/tests/).  The
 * command semantics are those of uapi/drm/spyre_cmd.h and the "Command
 * streams" part of docs/spyre-hw.rst.
 *
 * Conventions:
 *  - Every guest buffer (a "raw" pointer, const void *) holds little-endian
 *    elements of a SPYRE_DTYPE_* and may have any alignment; the code reads
 *    and writes it byte-wise, so a big-endian host works too.  Host-side
 *    float arrays (float *) are native.
 *  - Functions that can fail return SPYRE_STATUS_* (0 == SPYRE_STATUS_OK);
 *    nothing here aborts, allocates memory, or keeps global state.  All
 *    functions are reentrant; GEMM calls cblas_sgemm, so its thread-safety
 *    is the BLAS library's (OpenBLAS: yes).
 *  - dtype arguments are SPYRE_DTYPE_* values; flags are SPYRE_CMD_F_*
 *    bits (only SPYRE_CMD_F_NOSAT matters for conversions).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_MISC_SPYRE_MATH_H
#define HW_MISC_SPYRE_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drm/spyre_cmd.h"

/*
 * Limits: SPYRE_CMD_MAX_* in drm/spyre_cmd.h (a command beyond them ends
 * with SPYRE_STATUS_LIMIT).
 */

/*
 * ------------------------------------------------------------------------
 * Data types and conversions
 *
 * Narrowing rounds to nearest, ties to even, subnormals included.
 *  - FP16 / BF16: IEEE behaviour, overflow gives infinity.
 *  - FP8 E4M3 (OCP OFP8: bias 7, max 448, NaN = S.1111.111, no infinity)
 *    and E5M2 (bias 15, max 57344, IEEE-like inf/NaN): by default a value
 *    that rounds beyond the largest finite value, infinities included,
 *    saturates to +-max (OCP "satfinite"); with SPYRE_CMD_F_NOSAT it gives
 *    +-inf (E5M2) or NaN (E4M3).  A value between max and the overflow
 *    threshold (max + half an ulp; E4M3 464, E5M2 61440) rounds to max in
 *    both modes, except that E5M2's tie 61440 goes to inf with NOSAT.
 *  - INT8 / INT32: round to nearest even, saturate; NaN gives 0.
 *  - NaN stays NaN and keeps its sign: binary16/bf16/fp32 quieten it and
 *    keep the top payload bits; fp8 NaNs are written as S.1111111 (0x7f or
 *    0xff, a quiet NaN in both fp8 formats); E4M3 NaN widens to the fp32
 *    default quiet NaN, E5M2 NaN keeps its payload.
 *  - Widening is exact.  -0 stays -0.
 * Conversions round on the integer encoding, so they never depend on the
 * host's floating-point rounding mode (the arithmetic of GEMM, ELTWISE,
 * REDUCE and ROWOP assumes the default round-to-nearest mode).
 * ------------------------------------------------------------------------
 */

/* Element size in bytes of @dtype, or 0 if the fixed commands refuse it. */
size_t spyre_math_dtype_size(int dtype);

float spyre_fp16_to_fp32(uint16_t h);
uint16_t spyre_fp32_to_fp16(float f);
float spyre_bf16_to_fp32(uint16_t h);
uint16_t spyre_fp32_to_bf16(float f);
float spyre_e4m3_to_fp32(uint8_t v);
uint8_t spyre_fp32_to_e4m3(float f, unsigned flags);
float spyre_e5m2_to_fp32(uint8_t v);
uint8_t spyre_fp32_to_e5m2(float f, unsigned flags);
int8_t spyre_fp32_to_int8(float f);
int32_t spyre_fp32_to_int32(float f);
float spyre_int32_to_fp32(int32_t i);

/*
 * Whether COPY may convert @src_dtype to @dst_dtype: U8 only with U8,
 * INT32 only with INT32, and any pair among FP32, FP16, BF16, FP8_E4M3,
 * FP8_E5M2 and INT8.  Returns SPYRE_STATUS_OK or SPYRE_STATUS_INVALID_OPERAND.
 */
int spyre_convert_check(int dst_dtype, int src_dtype);

/*
 * Convert @n elements of @src_dtype at @src to @dst_dtype at @dst (COPY's
 * conversion).  Conversions go through fp32, which holds every value of
 * the narrower types exactly, so there is exactly one rounding.  Equal
 * dtypes copy bytes unchanged (NaN payloads included).  @src and @dst
 * must not overlap unless they are equal and so are the dtypes (the
 * result is undefined otherwise, but the call is memory-safe).
 * Returns SPYRE_STATUS_OK or SPYRE_STATUS_INVALID_OPERAND (bad pair).
 */
int spyre_convert(void *dst, int dst_dtype, const void *src, int src_dtype,
                  size_t n, unsigned flags);

/*
 * Widen @n elements at @src (FP32, FP16, BF16, FP8_E4M3, FP8_E5M2, INT8)
 * to native floats, or narrow @n native floats to @dst in one of those
 * dtypes.  Returns SPYRE_STATUS_OK or SPYRE_STATUS_INVALID_OPERAND.
 */
int spyre_load_fp32(float *dst, const void *src, int src_dtype, size_t n);
int spyre_store_fp32(void *dst, int dst_dtype, const float *src, size_t n,
                     unsigned flags);

/*
 * Validate a COPY command's dtypes, shape, pitches and flags (not its
 * header size or addresses).  On success *@src_bytes / *@dst_bytes (when
 * non-NULL) get the byte span from src / dst that the copy touches.
 */
int spyre_copy_check(const struct spyre_cmd_copy *cmd, uint64_t *src_bytes,
                     uint64_t *dst_bytes);

/*
 * ------------------------------------------------------------------------
 * GEMM
 *
 * C[b] = alpha * sa * sb * op(A[b]) op(B[b]) + beta * C[b] + bias, as
 * struct spyre_cmd_gemm describes.  Float inputs are widened exactly to
 * fp32 and multiplied with cblas_sgemm (fp32 accumulation); the epilogue
 * computes r = (alpha * sa * sb) * acc + beta * c + bias[j] in double and
 * rounds it once to fp32: r is "the result" that amax sees and that is
 * rounded (RNE) to c_dtype.  With beta == 0 (+0 or -0) C is not read.
 * INT8 inputs accumulate exactly in int32 with two's-complement wrap-around
 * (products and sums modulo 2^32), then add C when beta == 1; alpha,
 * scales and bias are ignored.  amax (max |r| over all batches) is
 * NaN if any r is NaN; for INT8 it is |r| rounded to binary32.
 *
 * The work is split into output tiles of at most 512 x 512 elements, each
 * computed in K blocks of at most 512 (tiles shrink to fit the caller's
 * tile buffer, the only memory used).  One spyre_gemm_step() does one
 * K block, so the caller may stop between steps (yield to another queue,
 * check a time budget, ...).  Operands are fetched through callbacks in
 * batches of stored row segments, so they need not be contiguous in host
 * memory.  The tiling (hence the tile buffer size) can change the last bits
 * of fp32 results through the summation order; INT8 results are exact.
 *
 * Typical device-model use (e.g. in a worker thread):
 *     st = spyre_gemm_check(cmd, &span);        validate, get byte spans
 *     ... read scale_a / scale_b, check VA + span ranges ...
 *     st = spyre_gemm_init(&g, cmd, sa, sb, &io, tile_buf, size);
 *     while (!st && !spyre_gemm_done(&g)) {
 *         st = spyre_gemm_step(&g);
 *         ... yield / budget check ...
 *     }
 *     if (!st && cmd->amax) store spyre_gemm_amax(&g) at cmd->amax
 * ------------------------------------------------------------------------
 */

/* Tile buffer the GEMM engine needs: SIZE gives full 512^3 tiles. */
#define SPYRE_GEMM_TILE_BUF_SIZE    (4u << 20)
#define SPYRE_GEMM_TILE_BUF_MIN     (64u << 10)
/*
 * Bytes of converted-dtype rows staged per I/O batch, at least: the stage
 * gets what the tiles leave of the tile buffer (with
 * SPYRE_GEMM_TILE_BUF_SIZE, a whole tile of any dtype but fp32).
 */
#define SPYRE_GEMM_STAGE            (16u << 10)

/* Operand ids passed to the I/O callbacks. */
enum {
    SPYRE_GEMM_OPND_A,
    SPYRE_GEMM_OPND_B,
    SPYRE_GEMM_OPND_C,
    SPYRE_GEMM_OPND_BIAS,
};

/* Byte spans of the operands from their base addresses (as VAs in cmd). */
typedef struct SpyreGemmSpan {
    uint64_t a, b, c;
    uint64_t bias;              /* 0 without bias (or for INT8) */
} SpyreGemmSpan;

/*
 * Operand access, in batches of row segments: @nrows segments of @len
 * bytes, the first at byte offset @off from the operand's base address
 * (cmd->a, cmd->b, cmd->c or cmd->bias) and each @stride bytes after the
 * one before, to or from @dst / @src where they lie packed, @len bytes
 * apart.  Every segment is contiguous in the device VA space and lies
 * within the span that spyre_gemm_check() reported.  A batch holds whole
 * tile rows of an fp32 operand, or as many as fit the stage (at least
 * SPYRE_GEMM_STAGE bytes) of other dtypes, so an implementation can take
 * its locks once per batch rather than once per row.  Return
 * SPYRE_STATUS_OK, or an error status (MMU_FAULT, DMA_ERROR, ...) that
 * ends the GEMM with that status; the
 * segments before the failing one may have been moved.  C is read (when
 * beta != 0) and then written batch by batch, tile by tile.
 */
typedef struct SpyreGemmIO {
    int (*read)(void *opaque, int opnd, uint64_t off, uint64_t stride,
                uint32_t nrows, void *dst, size_t len);
    int (*write)(void *opaque, int opnd, uint64_t off, uint64_t stride,
                 uint32_t nrows, const void *src, size_t len);
    void *opaque;
} SpyreGemmIO;

/*
 * GEMM state.  Treat every field as private; it lives wherever the caller
 * wants (job state, stack) together with the tile buffer it points to.
 */
typedef struct SpyreGemm {
    struct spyre_cmd_gemm cmd;
    SpyreGemmIO io;
    int status;
    bool done;
    bool is_int;
    bool read_c;
    bool has_bias;
    bool plain_fp32;            /* fp32 C written from acc as is */
    double scale;               /* alpha * sa * sb */
    double beta;
    size_t es_a, es_b, es_c, es_bias;
    uint32_t tm, tn, tk;        /* tile sizes */
    float *a_tile, *b_tile;     /* operand tiles as stored, widened */
    void *acc;                  /* fp32, or int32 for INT8 */
    float *block;               /* INT8: one K block's products */
    void *row;                  /* one row of fp32 values */
    uint8_t *raw;               /* staged rows of raw bytes */
    size_t stage;               /* bytes at raw */
    float *bias_row;
    uint32_t batch, m0, n0;     /* current output tile */
    uint64_t k0;                /* next K block of it */
    uint64_t a_cached;          /* batch << 32 | m0 of the A tile held */
    uint64_t bias_cached;       /* n0 of bias_row */
    float amax;
    uint32_t amax_int;
    uint64_t steps_done, steps_total;
} SpyreGemm;

/*
 * Validate a GEMM command, in this order: header flags (only
 * SPYRE_GEMM_F_ALL, else INVALID_COMMAND); dtype combination, bias_dtype,
 * beta in {0, 1} for INT8, shapes >= 1, leading dimensions (else
 * INVALID_OPERAND); batch * M * N * K <= SPYRE_CMD_MAX_GEMM_MACS (else
 * LIMIT); operand spans fit in 64 bits (else INVALID_OPERAND).  Batch
 * strides may be anything (0 broadcasts a matrix; overlapping C batches
 * give an undefined result).  Does not look at the header size/opcode or
 * at addresses.  On success, fills *@span when non-NULL.
 */
int spyre_gemm_check(const struct spyre_cmd_gemm *cmd, SpyreGemmSpan *span);

/*
 * Set up @g for @cmd (checked again here).  @scale_a / @scale_b are the
 * binary32 values read from cmd->scale_a / cmd->scale_b (1.0f when those
 * are 0; ignored for INT8).  The tile buffer @tile_buf (any alignment) must
 * stay valid and untouched until the GEMM is done; @tile_buf_size >=
 * SPYRE_GEMM_TILE_BUF_MIN (else SPYRE_STATUS_INTERNAL).
 */
int spyre_gemm_init(SpyreGemm *g, const struct spyre_cmd_gemm *cmd,
                    float scale_a, float scale_b, const SpyreGemmIO *io,
                    void *tile_buf, size_t tile_buf_size);

/*
 * Do one step: one K block (at most 512) of one output tile (at most
 * 512 x 512), so at most 2^27 multiply-adds; the step that finishes a tile
 * also writes it to C.  Returns SPYRE_STATUS_OK or the first error, which
 * is then sticky (spyre_gemm_done() stays false, further steps return it;
 * C may be partly written).  Call until spyre_gemm_done(); a caller can
 * stop between steps and resume later, for instance to let a
 * higher-priority queue run, as long as the operands do not change.
 */
int spyre_gemm_step(SpyreGemm *g);
bool spyre_gemm_done(const SpyreGemm *g);

/* Progress: steps done so far, and in all (for time slicing/budgets). */
uint64_t spyre_gemm_steps_done(const SpyreGemm *g);
uint64_t spyre_gemm_steps_total(const SpyreGemm *g);

/* After spyre_gemm_done(): the value to store at cmd->amax (if non-zero). */
float spyre_gemm_amax(const SpyreGemm *g);

/* init + step until done (no yielding).  *@amax may be NULL. */
int spyre_gemm_run(const struct spyre_cmd_gemm *cmd, float scale_a,
                   float scale_b, const SpyreGemmIO *io, void *tile_buf,
                   size_t tile_buf_size, float *amax);

/*
 * Convenience for operands already in host memory: each pointer is the
 * operand's base (what cmd->a etc. point to) and each size the bytes
 * available there; an access beyond a size fails with
 * SPYRE_STATUS_MMU_FAULT (sizes >= the spans spyre_gemm_check() reports
 * never fail).  @bias may be NULL when there is no bias.
 */
typedef struct SpyreGemmHostBufs {
    const void *a;
    size_t a_size;
    const void *b;
    size_t b_size;
    void *c;
    size_t c_size;
    const void *bias;
    size_t bias_size;
} SpyreGemmHostBufs;

int spyre_gemm_host(const struct spyre_cmd_gemm *cmd, float scale_a,
                    float scale_b, const SpyreGemmHostBufs *bufs,
                    void *tile_buf, size_t tile_buf_size, float *amax);

/*
 * Ask the BLAS library to use @n threads (OpenBLAS only; no-op otherwise).
 * The setting is process-wide.
 */
void spyre_math_set_blas_threads(int n);

/*
 * ------------------------------------------------------------------------
 * ELTWISE, REDUCE, ROWOP (FP32, FP16 or BF16 data, fp32 arithmetic,
 * results rounded to the data type with round-to-nearest-even)
 * ------------------------------------------------------------------------
 */

/*
 * Validate ELTWISE (flags and pad zero, else INVALID_COMMAND; op, dtype,
 * count >= 1, else INVALID_OPERAND; count <= SPYRE_CMD_MAX_ELEMS, else
 * LIMIT).  *@bytes (when non-NULL) gets the span of a, b and out.
 */
int spyre_eltwise_check(const struct spyre_cmd_eltwise *cmd,
                        uint64_t *bytes);

/*
 * out[i] = f(a[i], b[i]) for i < @n (@b used only by ADD and MUL, may be
 * NULL otherwise).  Element-wise, so any chunking gives the same result;
 * @out may equal @a or @b.  RELU keeps NaN and maps -0 to +0; GELU is
 * 0.5 * a * (1 + erff(a / sqrt(2))); SILU is a / (1 + expf(-a)).
 */
int spyre_eltwise(int op, int dtype, float alpha, const void *a,
                  const void *b, void *out, size_t n);

/*
 * Validate REDUCE / ROWOP: flags and pad zero (else INVALID_COMMAND); op,
 * dtype, rows, cols >= 1, ld >= cols (else INVALID_OPERAND); rows * cols
 * <= SPYRE_CMD_MAX_ELEMS (else LIMIT); spans fit in 64 bits (else
 * INVALID_OPERAND).  *@src_bytes / *@dst_bytes get the spans from src /
 * dst; ROWOP's gamma and beta span cols * 4 bytes.
 */
int spyre_reduce_check(const struct spyre_cmd_reduce *cmd,
                       uint64_t *src_bytes, uint64_t *dst_bytes);
int spyre_rowop_check(const struct spyre_cmd_rowop *cmd,
                      uint64_t *src_bytes, uint64_t *dst_bytes);

/*
 * Whole-matrix REDUCE and ROWOP on host buffers (row r of src at
 * src + r * ld * element size).  @gamma / @beta are little-endian binary32
 * cols-vectors or NULL.  ROWOP may run in place (src == dst, equal ld).
 */
int spyre_reduce(int op, int dtype, const void *src, uint64_t ld,
                 uint32_t rows, uint32_t cols, void *dst);
int spyre_rowop(int op, int dtype, const void *src, uint64_t ld_src,
                void *dst, uint64_t ld_dst, uint32_t rows, uint32_t cols,
                const void *gamma, const void *beta, float eps);

/*
 * Streaming form of one row, for rows too long to hold in host memory at
 * once.  The numerics are:
 *  - fp32 sums: column j goes to lane j % 8; every 512 columns the lanes
 *    are added pairwise into a block sum, and block sums are accumulated
 *    with Kahan compensation.  The result depends only on the column
 *    index of each element, not on how the row is chunked.
 *  - MAX and softmax's max propagate NaN.
 *  - SUM: the sum.  MAX: the maximum.
 *  - SOFTMAX: pass 0 max m, pass 1 s = sum(expf(x - m)), out = expf(x - m)
 *    / s.
 *  - LAYERNORM: pass 0 mean = sum(x) / cols, pass 1 var = sum((x - mean)^2)
 *    / cols (biased), rstd = 1 / sqrtf(var + eps),
 *    out = (x - mean) * rstd * gamma + beta.
 *  - RMSNORM: pass 0 ms = sum(x^2) / cols, rstd = 1 / sqrtf(ms + eps),
 *    out = x * rstd * gamma.
 *
 * Usage:
 *   spyre_row_init(&r, SPYRE_OP_ROWOP, SPYRE_ROW_SOFTMAX, cols, eps);
 *   for (p = 0; p < spyre_row_passes(&r); p++) {
 *       for each chunk in column order: spyre_row_feed(&r, src, dtype, n);
 *       spyre_row_end_pass(&r);
 *   }
 *   REDUCE: spyre_row_result(&r);
 *   ROWOP:  for each chunk: spyre_row_apply(&r, dst, dtype, src, n,
 *                                           gamma_chunk, beta_chunk);
 * where gamma_chunk / beta_chunk point at the chunk's first element of
 * the binary32 vectors (byte offset 4 * column) or are NULL.  Each pass
 * reads the row again; spyre_row_end_pass() fails (INVALID_OPERAND)
 * unless exactly @cols elements were fed in the pass.
 */
typedef struct SpyreRow {
    int opcode;                 /* SPYRE_OP_REDUCE or SPYRE_OP_ROWOP */
    int op;
    unsigned pass, npasses;
    uint64_t cols, pos;
    float eps;
    float lane[8];
    float total, comp;
    float max;
    float mean, rstd, sum;
} SpyreRow;

int spyre_row_init(SpyreRow *r, int opcode, int op, uint64_t cols, float eps);
unsigned spyre_row_passes(const SpyreRow *r);
int spyre_row_feed(SpyreRow *r, const void *src, int dtype, size_t n);
int spyre_row_end_pass(SpyreRow *r);
float spyre_row_result(const SpyreRow *r);
int spyre_row_apply(const SpyreRow *r, void *dst, int dtype, const void *src,
                    size_t n, const void *gamma, const void *beta);

#endif /* HW_MISC_SPYRE_MATH_H */
