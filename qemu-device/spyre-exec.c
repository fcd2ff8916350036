/*
 * Spyre card model: jobs and commands
 *
 * Owns a job's life on an execution context (SpyreExec): fetching and
 * checking its descriptor (and the DBG_INJECT faults that apply per job
 * or per completion record), running its command stream (through a
 * prefetch buffer) command by command, parking it on SEM_WAIT or handing
 * it from the doorbell executor to a worker, and its end (completion
 * record, LAST_SEQNO, HEAD, interrupts); and every command but GEMM
 * (spyre-gemm.c) and the data path of byte copies (spyre-copy.c).
 *
 * Locks: everything here runs with the device lock held (the doorbell
 * executor: and the BQL), and takes memory phases (spyre_e_mem_begin)
 * for guest memory; commands compute their tiles with no lock held.
 * Between tiles they call spyre_e_boundary(), which may give the device
 * lock up for a moment and run other jobs nested on the same thread;
 * after it, a command re-reads nothing it cached from guest memory.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "trace.h"

#include "spyre.h"

/* Host time per command (byte limits: SPYRE_CMD_MAX_* in spyre_cmd.h). */
#define SPYRE_CMD_MAX_NS        (5 * NANOSECONDS_PER_SECOND)

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
    [SPYRE_OP_KERNEL] = sizeof(struct spyre_cmd_kernel),    /* at least */
};

/* ---- Commands ----------------------------------------------------------- */

/*
 * Commands run with the device lock held (the doorbell executor: the BQL
 * too), take memory phases for their accesses and compute their tiles
 * with no lock held (spyre_e_map_tile .. spyre_e_end_tile).
 */

/* Write @len bytes of the @esz-byte pattern, starting at phase @ph. */
static void spyre_fill_piece(SpyreExec *e, uint8_t *dst, uint64_t len,
                             unsigned int ph)
{
    while (len) {
        uint64_t n = MIN(len, SPYRE_PAGE_SIZE);

        memcpy(dst, e->pattern + ph, n);
        dst += n;
        len -= n;
    }
}

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
    if (count > SPYRE_CMD_MAX_COPY_BYTES / esz) {
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
        SpyreOpnd o = { dst + done, MIN(bytes - done, SPYRE_TILE_BYTES), true };
        SpyreSpan *sp = &e->span[0];
        uint64_t off = done;
        uint32_t k, st;

        st = spyre_e_map_tile(e, &o, 1);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        for (k = 0; k < sp->nmaps; k++) {
            spyre_fill_piece(e, sp->map[k].host, sp->map[k].len, off % esz);
            off += sp->map[k].len;
        }
        spyre_e_end_tile(e, 1);
        done += o.len;
        if (done < bytes) {
            st = spyre_e_boundary(e, true);
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
    e->q->job.restartable = !spyre_spans_meet(c.src, sspan, c.dst, dspan);
    if (c.height == 1) {
        c.src_pitch = c.dst_pitch = 0;
    }
    ses = spyre_math_dtype_size(c.src_dtype);
    des = spyre_math_dtype_size(c.dst_dtype);
    chunk = SPYRE_TILE_BYTES / MAX(ses, des);

    if (c.src_dtype == c.dst_dtype) {
        /* Bytes as they are: in batches, by several workers (spyre-copy.c). */
        for (r = 0; r < c.height; r++) {
            st = spyre_copy_bytes(e, c.dst + r * c.dst_pitch,
                                  c.src + r * c.src_pitch, c.width * ses);
            if (st == SPYRE_STATUS_OK && r + 1 < c.height) {
                st = spyre_e_boundary(e, true);
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
        return SPYRE_STATUS_OK;
    }

    for (r = 0; r < c.height; r++) {
        for (done = 0; done < c.width;) {
            uint64_t n = MIN(c.width - done, chunk);
            SpyreOpnd o[2] = {
                { c.src + r * c.src_pitch + done * ses, n * ses, false },
                { c.dst + r * c.dst_pitch + done * des, n * des, true },
            };
            void *out;

            st = spyre_e_map_tile(e, o, 2);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            out = spyre_tile_dst(e, 1);
            spyre_convert(out, c.dst_dtype, spyre_tile_src(e, 0),
                          c.src_dtype, n, c.hdr.flags & SPYRE_CMD_F_NOSAT);
            spyre_tile_dst_done(e, 1, out);
            spyre_e_end_tile(e, 2);
            done += n;
            if (done < c.width || r + 1 < c.height) {
                st = spyre_e_boundary(e, true);
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
    unsigned int no = binary ? 2 : 1;
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
    e->q->job.restartable = !spyre_spans_meet(c.out, bytes, c.a, bytes) &&
        !(binary && spyre_spans_meet(c.out, bytes, c.b, bytes));
    es = spyre_math_dtype_size(c.dtype);
    chunk = SPYRE_TILE_BYTES / es;

    for (done = 0; done < c.count;) {
        uint64_t n = MIN(c.count - done, chunk);
        SpyreOpnd o[3] = {
            { c.a + done * es, n * es, false },
            { c.b + done * es, n * es, false },
            { c.out + done * es, n * es, true },
        };
        void *out;

        if (!binary) {
            o[1] = o[2];
        }
        st = spyre_e_map_tile(e, o, no + 1);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        out = spyre_tile_dst(e, no);
        st = spyre_eltwise(c.op, c.dtype, spyre_f32(c.alpha),
                           spyre_tile_src(e, 0),
                           binary ? spyre_tile_src(e, 1) : NULL, out, n);
        spyre_tile_dst_done(e, no, out);
        spyre_e_end_tile(e, no + 1);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        done += n;
        if (done < c.count) {
            st = spyre_e_boundary(e, true);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    }
    return SPYRE_STATUS_OK;
}

/*
 * Rows of a REDUCE or ROWOP: a row whose binary32 image fits a tile is
 * computed whole in one tile, with as many following rows as fit the
 * tile too (spyre_rows_per_tile); a longer row goes pass by pass, chunk
 * by chunk, a tile each (spyre_row_chunked).
 */
#define SPYRE_ROW_CHUNK         (SPYRE_TILE_BYTES / sizeof(float))

/* Rows from @r that one tile takes: each of @nld strided operands fits. */
static uint32_t spyre_rows_per_tile(uint32_t r, uint32_t rows, uint64_t cols,
                                    size_t es, const uint64_t *ld,
                                    unsigned int nld)
{
    uint64_t k = rows - r;
    unsigned int i;

    for (i = 0; i < nld; i++) {
        k = MIN(k, 1 + (SPYRE_TILE_BYTES - cols * es) / (ld[i] * es));
    }
    return k;
}

/* Tile compute: feed one whole row at @src to the passes of @rs. */
static uint32_t spyre_row_whole(SpyreRow *rs, const uint8_t *src,
                                uint64_t cols, int dtype)
{
    unsigned int p;
    uint32_t st = SPYRE_STATUS_OK;

    for (p = 0; p < spyre_row_passes(rs) && st == SPYRE_STATUS_OK; p++) {
        st = spyre_row_feed(rs, src, dtype, cols);
        if (st == SPYRE_STATUS_OK) {
            st = spyre_row_end_pass(rs);
        }
    }
    return st;
}

/* Feed the row at VA @row to the passes of @rs, a tile per chunk. */
static uint32_t spyre_row_chunked(SpyreExec *e, SpyreRow *rs, uint64_t row,
                                  uint64_t cols, int dtype, size_t es)
{
    uint64_t done;
    unsigned int p;
    uint32_t st;

    for (p = 0; p < spyre_row_passes(rs); p++) {
        for (done = 0; done < cols;) {
            uint64_t n = MIN(cols - done, SPYRE_ROW_CHUNK);
            SpyreOpnd o = { row + done * es, n * es, false };

            st = spyre_e_map_tile(e, &o, 1);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            st = spyre_row_feed(rs, spyre_tile_src(e, 0), dtype, n);
            spyre_e_end_tile(e, 1);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_e_boundary(e, true);
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            done += n;
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
    uint64_t sbytes, dbytes;
    uint32_t r, k, i, st;
    size_t es;

    st = spyre_reduce_check(&c, &sbytes, &dbytes);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    if (spyre_span_wraps(c.src, sbytes) || spyre_span_wraps(c.dst, dbytes)) {
        return SPYRE_STATUS_INVALID_OPERAND;
    }
    e->q->job.restartable = !spyre_spans_meet(c.dst, dbytes, c.src, sbytes);
    es = spyre_math_dtype_size(c.dtype);

    for (r = 0; r < c.rows; r += k) {
        SpyreRow rs;
        float v;

        if (c.cols > SPYRE_ROW_CHUNK) {
            /* A long row: chunk by chunk, its result through a phase. */
            k = 1;
            st = spyre_row_init(&rs, SPYRE_OP_REDUCE, c.op, c.cols, 0.0f);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_row_chunked(e, &rs, c.src + (uint64_t)r * c.ld * es,
                                       c.cols, c.dtype, es);
            }
            if (st == SPYRE_STATUS_OK) {
                v = spyre_row_result(&rs);
                spyre_store_fp32(e->buf, c.dtype, &v, 1, 0);
                st = spyre_e_rw_phase(e, c.dst + (uint64_t)r * es, e->buf,
                                      es, true);
            }
        } else {
            uint64_t ld = c.ld;
            uint8_t *out;
            const uint8_t *src;
            SpyreOpnd o[2];

            k = spyre_rows_per_tile(r, c.rows, c.cols, es, &ld, 1);
            o[0] = (SpyreOpnd){ c.src + (uint64_t)r * c.ld * es,
                                ((uint64_t)(k - 1) * c.ld + c.cols) * es,
                                false };
            o[1] = (SpyreOpnd){ c.dst + (uint64_t)r * es, (uint64_t)k * es,
                                true };
            st = spyre_e_map_tile(e, o, 2);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            src = spyre_tile_src(e, 0);
            out = spyre_tile_dst(e, 1);
            for (i = 0; i < k && st == SPYRE_STATUS_OK; i++) {
                st = spyre_row_init(&rs, SPYRE_OP_REDUCE, c.op, c.cols, 0.0f);
                if (st == SPYRE_STATUS_OK) {
                    st = spyre_row_whole(&rs, src + (uint64_t)i * c.ld * es,
                                         c.cols, c.dtype);
                }
                v = spyre_row_result(&rs);
                spyre_store_fp32(out + i * es, c.dtype, &v, 1, 0);
            }
            if (st == SPYRE_STATUS_OK) {
                spyre_tile_dst_done(e, 1, out);
            }
            spyre_e_end_tile(e, 2);
        }
        if (st == SPYRE_STATUS_OK && r + k < c.rows) {
            st = spyre_e_boundary(e, true);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    return SPYRE_STATUS_OK;
}

/* A long ROWOP row: the passes, then the output chunk by chunk. */
static uint32_t spyre_rowop_chunked(SpyreExec *e, SpyreRow *rs,
                                    const struct spyre_cmd_rowop *c,
                                    uint64_t src, uint64_t dst,
                                    uint64_t gamma, uint64_t beta, size_t es)
{
    uint64_t done;
    uint32_t st;

    st = spyre_row_chunked(e, rs, src, c->cols, c->dtype, es);
    for (done = 0; st == SPYRE_STATUS_OK && done < c->cols;) {
        uint64_t n = MIN(c->cols - done, SPYRE_ROW_CHUNK);
        SpyreOpnd o[4] = {
            { src + done * es, n * es, false },
            { dst + done * es, n * es, true },
            { gamma + done * sizeof(float), gamma ? n * sizeof(float) : 0,
              false },
            { beta + done * sizeof(float), beta ? n * sizeof(float) : 0,
              false },
        };
        void *out;

        st = spyre_e_map_tile(e, o, 4);
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
        out = spyre_tile_dst(e, 1);
        st = spyre_row_apply(rs, out, c->dtype, spyre_tile_src(e, 0), n,
                             gamma ? spyre_tile_src(e, 2) : NULL,
                             beta ? spyre_tile_src(e, 3) : NULL);
        if (st == SPYRE_STATUS_OK) {
            spyre_tile_dst_done(e, 1, out);
        }
        spyre_e_end_tile(e, 4);
        done += n;
        if (st == SPYRE_STATUS_OK && done < c->cols) {
            st = spyre_e_boundary(e, true);
        }
    }
    return st;
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
    uint64_t sbytes, dbytes, vbytes;
    uint64_t gamma = 0, beta = 0;
    float eps = spyre_f32(c.eps);
    uint32_t r, k, i, st;
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
    e->q->job.restartable = !spyre_spans_meet(c.dst, dbytes, c.src, sbytes) &&
        !(gamma && spyre_spans_meet(c.dst, dbytes, gamma, vbytes)) &&
        !(beta && spyre_spans_meet(c.dst, dbytes, beta, vbytes));
    es = spyre_math_dtype_size(c.dtype);

    for (r = 0; r < c.rows; r += k) {
        uint64_t src = c.src + (uint64_t)r * c.ld_src * es;
        uint64_t dst = c.dst + (uint64_t)r * c.ld_dst * es;
        SpyreRow rs;

        if (c.cols > SPYRE_ROW_CHUNK) {
            k = 1;
            st = spyre_row_init(&rs, SPYRE_OP_ROWOP, c.op, c.cols, eps);
            if (st == SPYRE_STATUS_OK) {
                st = spyre_rowop_chunked(e, &rs, &c, src, dst, gamma, beta,
                                         es);
            }
        } else {
            uint64_t ld[2] = { c.ld_src, c.ld_dst };
            const uint8_t *in, *gv = NULL, *bv = NULL;
            uint8_t *out;
            SpyreOpnd o[4];

            k = spyre_rows_per_tile(r, c.rows, c.cols, es, ld, 2);
            o[0] = (SpyreOpnd){ src, ((uint64_t)(k - 1) * c.ld_src + c.cols) *
                                     es, false };
            o[1] = (SpyreOpnd){ dst, ((uint64_t)(k - 1) * c.ld_dst + c.cols) *
                                     es, true };
            o[2] = (SpyreOpnd){ gamma, gamma ? vbytes : 0, false };
            o[3] = (SpyreOpnd){ beta, beta ? vbytes : 0, false };
            st = spyre_e_map_tile(e, o, 4);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            in = spyre_tile_src(e, 0);
            out = spyre_tile_dst(e, 1);
            if (k > 1 && c.ld_dst > c.cols && e->span[1].nmaps != 1) {
                /* Gathered strided rows: keep what lies between them. */
                spyre_tile_src(e, 1);
            }
            if (gamma) {
                gv = spyre_tile_src(e, 2);
            }
            if (beta) {
                bv = spyre_tile_src(e, 3);
            }
            for (i = 0; i < k && st == SPYRE_STATUS_OK; i++) {
                const uint8_t *x = in + (uint64_t)i * c.ld_src * es;

                st = spyre_row_init(&rs, SPYRE_OP_ROWOP, c.op, c.cols, eps);
                if (st == SPYRE_STATUS_OK) {
                    st = spyre_row_whole(&rs, x, c.cols, c.dtype);
                }
                if (st == SPYRE_STATUS_OK) {
                    st = spyre_row_apply(&rs,
                                         out + (uint64_t)i * c.ld_dst * es,
                                         c.dtype, x, c.cols, gv, bv);
                }
            }
            if (st == SPYRE_STATUS_OK) {
                spyre_tile_dst_done(e, 1, out);
            }
            spyre_e_end_tile(e, 4);
        }
        if (st == SPYRE_STATUS_OK && r + k < c.rows) {
            st = spyre_e_boundary(e, true);
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    return SPYRE_STATUS_OK;
}

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
    return spyre_e_rw_phase(e, dst, &now, sizeof(now), true);
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
    st = spyre_e_mem_begin(e);
    if (st != SPYRE_STATUS_OK) {
        return st;
    }
    st = spyre_e_translate(e, addr, signal, &t);
    if (st == SPYRE_STATUS_OK && (!signal || (flags & SPYRE_SEM_F_ADD))) {
        st = spyre_e_access(e, &t, addr, &cur, sizeof(cur), false);
        cur = le64_to_cpu(cur);
    }
    if (st != SPYRE_STATUS_OK) {
        spyre_e_mem_end(e);
        return st;
    }
    if (!signal) {
        spyre_e_mem_end(e);
        trace_spyre_sem_wait(e->q->id, addr, cur, value);
        return cur >= value ? SPYRE_STATUS_OK : SPYRE_EXEC_PARK;
    }
    /*
     * The read-modify-write is one memory phase: atomic with respect to
     * every other SEM command of this card, not to CPUs writing the same
     * word nor to a tile written over it.
     */
    cur = cpu_to_le64(flags & SPYRE_SEM_F_ADD ? cur + value : value);
    st = spyre_e_access(e, &t, addr, &cur, sizeof(cur), true);
    spyre_e_mem_end(e);
    if (st == SPYRE_STATUS_OK) {
        s->sem_epoch++;
        s->sched_seq++;
        spyre_wake(s, s->nparked);
    }
    return st;
}

/* ---- Command stream ----------------------------------------------------- */

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
            return spyre_e_rw_phase(e, va, dst, len, false);
        }
        e->sbuf_len = 0;
        st = spyre_e_rw_phase(e, va, e->sbuf, n, false);
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

/* May the doorbell executor run command @op (see spyre_db_run)? */
static bool spyre_op_short(unsigned int op)
{
    return op == SPYRE_OP_NOP || op == SPYRE_OP_TIMESTAMP ||
           op == SPYRE_OP_SEM_WAIT || op == SPYRE_OP_SEM_SIGNAL;
}

/*
 * The doorbell executor, at a job's start: are the job's first
 * SPYRE_DB_BUDGET_CMDS commands short ones?  A job with another command
 * there (or a header that does not read back or is not a short command's
 * own: the worker reports it) goes to a worker before any of its commands
 * runs, so that all run on one thread in order, none of them before a
 * worker's wake-up and the rest after.  Reads only whole headers the
 * stream holds, each behind the commands before it.
 */
static bool spyre_job_short(SpyreExec *e)
{
    SpyreJob *job = &e->q->job;
    uint32_t off = job->cmd_offset, n = SPYRE_DB_BUDGET_CMDS, size;
    struct spyre_cmd_header h;
    unsigned int op;

    for (; off < job->cmd_size && n; n--, off += size) {
        if (job->cmd_size - off < sizeof(h) ||
            spyre_stream_read(e, job->cmd_va + off, &h, sizeof(h)) !=
            SPYRE_STATUS_OK) {
            return false;
        }
        op = le16_to_cpu(h.opcode);
        size = le32_to_cpu(h.size);
        if (!spyre_op_short(op) || size != spyre_cmd_size[op] ||
            size > job->cmd_size - off) {
            return false;
        }
    }
    return true;
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
    if (op >= SPYRE_OP_COUNT || !spyre_cmd_size[op]) {
        return SPYRE_STATUS_INVALID_OPCODE;
    }
    if (op != SPYRE_OP_KERNEL && op != SPYRE_OP_NOP) {
        e->kprog_kept = false;      /* may order others' writes, or write */
    }
    if ((op == SPYRE_OP_KERNEL ?
         size < spyre_cmd_size[op] || size > SPYRE_KCMD_MAX || size % 8 :
         size != spyre_cmd_size[op]) ||
        size > job->cmd_size - job->cmd_offset) {
        return SPYRE_STATUS_INVALID_COMMAND;
    }
    if (e->w->doorbell && !spyre_op_short(op)) {
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
    /* Until the command says it reads what it writes. */
    job->restartable = true;
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
    case SPYRE_OP_KERNEL:
        return spyre_cmd_kernel(e);
    default:
        return spyre_cmd_sem(e, true);
    }
}

/* ---- Jobs --------------------------------------------------------------- */

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
 * If DBG_INJECT armed one of @kinds (a 0-terminated list) on @q, use one
 * application of it up and return it; else return 0.
 */
static uint32_t spyre_inject_take(SpyreQueue *q, const uint32_t *kinds)
{
    uint32_t kind = q->inject;

    for (; *kinds; kinds++) {
        if (kind == *kinds) {
            if (!--q->inject_count) {
                q->inject = 0;
            }
            return kind;
        }
    }
    return 0;
}

/* Injections that apply per job started, and per completion record. */
static const uint32_t spyre_inject_job[] = {
    SPYRE_DBG_HANG, SPYRE_DBG_ERROR, SPYRE_DBG_MMU_FAULT, 0
};
static const uint32_t spyre_inject_compl[] = {
    SPYRE_DBG_DROP_IRQ, SPYRE_DBG_DUP_IRQ, SPYRE_DBG_CORRUPT_SEQNO,
    SPYRE_DBG_CORRUPT_STATUS, 0
};

/*
 * Memory phase.  Start the job at HEAD of @q.  Returns false if there is
 * nothing to run (the job failed at once, or hangs by injection).
 */
static bool spyre_job_start(SpyreState *s, SpyreQueue *q)
{
    struct spyre_hw_job d;
    SpyreJob *job = &q->job;
    uint32_t st, inject;

    SPYRE_ASSERT_PHASE(s);
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
    trace_spyre_job_start(pci_get_bdf(PCI_DEVICE(s)), q->id, job->seqno,
                          job->ctx, job->start_ns, job->cmd_va, job->cmd_size);

    inject = spyre_inject_take(q, spyre_inject_job);
    if (inject == SPYRE_DBG_HANG) {
        spyre_set_job_state(s, q, SPYRE_JOB_HUNG);
        trace_spyre_job_hang(q->id, job->seqno);
        return false;
    }
    if (inject == SPYRE_DBG_ERROR) {
        spyre_end_job(s, q, SPYRE_STATUS_INTERNAL, 0, true, true);
        return false;
    }
    st = spyre_job_check(s, &d);
    if (st != SPYRE_STATUS_OK) {
        spyre_end_job(s, q, st, 0, true, true);
        return false;
    }
    if (inject == SPYRE_DBG_MMU_FAULT) {
        /* As a fault on the fetch of the first command would. */
        trace_spyre_inject_fault(q->id, job->seqno, job->cmd_va);
        spyre_record_fault(s, job->ctx, q->id, job->cmd_va, false,
                           SPYRE_FAULT_INJECTED, true);
        spyre_end_job(s, q, SPYRE_STATUS_MMU_FAULT, job->cmd_va, true, true);
        return false;
    }
    return true;
}

/*
 * BQL and device lock held.  End the current job of @q: write the
 * completion record (all fields, then seqno), update LAST_SEQNO and
 * HEAD, raise interrupts.
 * @halt: the job failed, halt the queue in SPYRE_QS_ERROR.
 * @direct: called by a worker or the doorbell executor, which send the
 * message themselves when they hold the BQL (see spyre_notify).
 */
void spyre_end_job(SpyreState *s, SpyreQueue *q, uint32_t status,
                   uint64_t err_va, bool halt, bool direct)
{
    SpyreJob *job = &q->job;
    struct spyre_hw_completion c = { 0 };
    uint64_t end = spyre_clock(s);
    uint32_t inject = spyre_inject_take(q, spyre_inject_compl);
    uint64_t seqno = cpu_to_le64(job->seqno);
    bool ok, irq;

    SPYRE_ASSERT_PHASE(s);
    trace_spyre_job_end(pci_get_bdf(PCI_DEVICE(s)), q->id, job->seqno, end,
                        status, job->cmd_offset, err_va);

    c.status = cpu_to_le32(status);
    if (inject == SPYRE_DBG_CORRUPT_SEQNO) {
        seqno = cpu_to_le64(job->seqno + SPYRE_DBG_SEQNO_SKEW);
        trace_spyre_inject_record(q->id, job->seqno, inject);
    } else if (inject == SPYRE_DBG_CORRUPT_STATUS) {
        c.status = cpu_to_le32(SPYRE_DBG_BAD_STATUS);
        trace_spyre_inject_record(q->id, job->seqno, inject);
    }
    c.cmd_offset = cpu_to_le32(status == SPYRE_STATUS_OK ? 0 :
                               job->cmd_offset);
    c.error_va = cpu_to_le64(status == SPYRE_STATUS_MMU_FAULT ||
                             status == SPYRE_STATUS_DMA_ERROR ? err_va : 0);
    if (status != SPYRE_STATUS_OK) {
        c.detail = cpu_to_le64(job->detail);
        c.detail2 = cpu_to_le64(job->detail2);
    }
    c.start_ns = cpu_to_le64(job->start_ns);
    c.end_ns = cpu_to_le64(end);
    ok = spyre_dma_rw(s, q->compl_addr + 8, (uint8_t *)&c + 8,
                      sizeof(c) - 8, DMA_DIRECTION_FROM_DEVICE) == MEMTX_OK &&
         spyre_dma_rw(s, q->compl_addr, &seqno, sizeof(seqno),
                      DMA_DIRECTION_FROM_DEVICE) == MEMTX_OK;

    q->last_seqno = job->seqno;
    q->head = (q->head + 1) & (q->entries - 1);
    job->end_ns = end;
    spyre_set_job_state(s, q, SPYRE_JOB_NONE);
    q->ready_ns = spyre_now();
    s->tel[SPYRE_TEL_JOBS]++;
    s->tel[SPYRE_TEL_BUSY_NS] += end > job->start_ns ? end - job->start_ns : 0;
    q->busy_ns += end > job->start_ns ? end - job->start_ns : 0;
    s->sched_seq++;

    if (!ok) {
        trace_spyre_compl_error(q->id, q->compl_addr);
        halt = true;
    }
    q->status = halt ? SPYRE_QS_ERROR : spyre_queue_rest_status(q);
    irq = (halt || status != SPYRE_STATUS_OK ||
           (job->flags & SPYRE_JOB_F_IRQ)) && q->vector != SPYRE_ERROR_VECTOR;
    if (irq && inject == SPYRE_DBG_DROP_IRQ) {
        trace_spyre_irq_drop(q->id, q->vector);
        irq = false;
    }
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
        if (inject == SPYRE_DBG_DUP_IRQ) {
            spyre_notify_again(s, q->vector);
        }
        spyre_notify(s, q->vector, direct);
    }
}

/*
 * Memory phase.  A worker behind a vIOMMU, whose memory phases hold the
 * BQL, sends the messages of the job it ended now; without one
 * spyre_notify() left them to the bottom half, and the doorbell executor
 * sends them when its MMIO write ends.
 */
static void spyre_e_irq_flush(SpyreExec *e)
{
    if (!e->w->doorbell && e->s->dma_bql) {
        spyre_irq_flush(e->s);
    }
}

/*
 * Device lock held.  Read the descriptor at HEAD of @q and start its job
 * (spyre_job_start) in a memory phase; returns false if there is nothing
 * to run, also when the queue changed (another worker took it, a reset)
 * while this one waited for the BQL.
 */
static bool spyre_e_job_start(SpyreExec *e, SpyreQueue *q)
{
    SpyreState *s = e->s;
    bool ok;

    if (spyre_e_mem_begin(e) != SPYRE_STATUS_OK) {
        return false;
    }
    ok = q->job_state == SPYRE_JOB_NONE && q->status == SPYRE_QS_IDLE &&
         q->head != q->tail && !s->fatal &&
         (s->control & SPYRE_CONTROL_ENABLE) && spyre_job_start(s, q);
    spyre_e_irq_flush(e);
    spyre_e_mem_end(e);
    return ok;
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
void spyre_run_queue(SpyreExec *e, SpyreQueue *q, int floor)
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
    e->kprog_kept = false;
    if (q->job_state == SPYRE_JOB_SEM_WAIT ||
        q->job_state == SPYRE_JOB_READY) {
        spyre_set_job_state(s, q, SPYRE_JOB_RUNNING);
        q->status = SPYRE_QS_BUSY;
    } else if (!spyre_e_job_start(e, q)) {
        return;
    }
    e->ctx = job->ctx;
    /* A job the doorbell executor starts: the whole of it, or none. */
    if (e->w->doorbell && !spyre_job_short(e)) {
        spyre_job_handoff(s, q);
        return;
    }

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
            st = spyre_e_boundary(e, false);
            if (st == SPYRE_EXEC_DROPPED) {
                return;
            }
        }
    }
    if (spyre_e_mem_begin(e) != SPYRE_STATUS_OK) {
        return;                 /* reset meanwhile: it ended the job */
    }
    if (st == SPYRE_STATUS_MMU_FAULT && e->fault_reason) {
        spyre_record_fault(s, e->ctx, q->id, e->err_va, e->fault_write,
                           e->fault_reason, true);
    }
    spyre_end_job(s, q, st, e->err_va, st != SPYRE_STATUS_OK, true);
    spyre_e_irq_flush(e);
    spyre_e_mem_end(e);
    /*
     * A worker at level 0 picks the next job itself; one running this job
     * nested goes back to the job it preempted, so let an idle one in.
     */
    if (e->level && q->status == SPYRE_QS_IDLE && q->head != q->tail) {
        spyre_wake(s, 1);
    }
}
