/*
 * Spyre card model: the KERNEL engine's core
 *
 * Owns the kernel program verifier (spyre_kernel_verify), the interpreter
 * that runs a verified program over a tile of points one instruction at
 * a time over a vector of lanes (spyre_kernel_tile), its host code paths
 * (the lane loops built for the baseline and for AVX2, chosen at run
 * time, bit-identical), the reductions in their fixed order; the math
 * functions are spyre-kmath.c's.  No QEMU dependency and no locks: guest
 * memory is reached through SpyreKIO (spyre-kexec.c).  Built with
 * -ffp-contract=off (meson.build).
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* HOST_X86_64: QEMU's build configuration (the native harness's own). */
#include "config-host.h"

#ifdef HOST_X86_64
#include <immintrin.h>
#endif

#include "spyre-math.h"
#include "spyre-kernel.h"
#include "spyre-kmath.h"

#define KNONE       SPYRE_KVAL_NONE
#define KB          SPYRE_KTYPE_BOOL
#define KI32        SPYRE_KTYPE_I32
#define KI64        SPYRE_KTYPE_I64
#define KF32        SPYRE_KTYPE_F32
#define KMIN(a, b)  ((a) < (b) ? (a) : (b))
#define KMAX(a, b)  ((a) > (b) ? (a) : (b))

/*
 * The interpreter's hot functions are inlined (KALWAYS) into each host
 * code path (krun_generic, krun_avx2): one copy per instruction set.
 * KFOR and KFOR_N, the lane loops GCC vectorises: spyre-kmath.h.
 */

/*
 * Two 64-bit lanes in GCC's generic vectors (one SSE2 register; wider
 * ones go through the stack on the baseline), where -O2's vectoriser
 * leaves 64-bit integer loops scalar.
 */
typedef uint64_t KVU64x2 __attribute__((vector_size(16)));

/* @d[j] = @q + j for the lanes j < @n (and up to KBLK past, as KFOR). */
static inline KALWAYS void kramp(uint64_t *d, uint64_t q, uint32_t n)
{
    KVU64x2 v0 = { q, q + 1 }, v1 = { q + 2, q + 3 };
    uint32_t j;

    for (j = 0; j < n; j += 4) {
        memcpy(d + j, &v0, sizeof(v0));
        memcpy(d + j + 2, &v1, sizeof(v1));
        v0 += 4;
        v1 += 4;
    }
}

/* All ones if @c, else zero. */
static inline uint32_t kmask(bool c)
{
    return -(uint32_t)c;
}

/* @x where mask @m has ones, else @y: a select without a branch. */
static inline uint32_t ksel(uint32_t m, uint32_t x, uint32_t y)
{
    return (x & m) | (y & ~m);
}

static inline uint16_t ld16(const uint8_t *p)
{
    return p[0] | (uint16_t)p[1] << 8;
}

static inline uint32_t ld32(const uint8_t *p)
{
    return ld16(p) | (uint32_t)ld16(p + 2) << 16;
}

static inline uint64_t ld64(const uint8_t *p)
{
    return ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

/* Value type of a dtype's loads and stores, 0 if invalid. */
static unsigned int kvtype(uint32_t dt)
{
    switch (dt) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_FP16:
    case SPYRE_DTYPE_BF16:
    case SPYRE_DTYPE_FP8_E4M3:
    case SPYRE_DTYPE_FP8_E5M2:
        return KF32;
    case SPYRE_DTYPE_U8:
    case SPYRE_DTYPE_INT8:
    case SPYRE_DTYPE_INT16:
    case SPYRE_DTYPE_INT32:
        return KI32;
    case SPYRE_DTYPE_INT64:
        return KI64;
    case SPYRE_DTYPE_BOOL:
        return KB;
    default:
        return 0;
    }
}

static bool is_fp8(uint32_t dt)
{
    return dt == SPYRE_DTYPE_FP8_E4M3 || dt == SPYRE_DTYPE_FP8_E5M2;
}

/* ---- Verifier ----------------------------------------------------------- */

/* Source requirements. */
enum {
    S_NONE,     /* must be NONE */
    S_T,        /* required, of type T */
    S_TOPT,     /* NONE, or of type T */
    S_BOOL,     /* required bool */
    S_BOOLOPT,  /* NONE, or bool */
    S_INT,      /* required i32 or i64 */
    S_INTOPT,   /* NONE, or int of type T */
    S_ANY,      /* required, any type */
    S_SAMEA,    /* required, the type of a */
    S_NUM,      /* required i32, i64 or f32 */
    S_F32,      /* required f32 */
    S_BITS,     /* required f32 or i32 */
    S_I64,      /* required i64 */
};

#define TM(t)       (1u << (t))
#define TM_NUM      (TM(KI32) | TM(KI64) | TM(KF32))
#define TM_INT      (TM(KI32) | TM(KI64))
#define TM_ANY      (TM(KB) | TM_NUM)

/*
 * The kinds REDUCE and SCAN share: the result types of @kind in *@tmask
 * and what its value operand must be in *@req0; false for another kind.
 */
static bool kfold_types(unsigned int kind, unsigned int *tmask, int *req0)
{
    switch (kind) {
    case SPYRE_KRED_SUM:
    case SPYRE_KRED_PROD:
    case SPYRE_KRED_MAX:
    case SPYRE_KRED_MIN:
        *tmask = TM_NUM;
        *req0 = S_T;
        return true;
    case SPYRE_KRED_ARGMAX:
    case SPYRE_KRED_ARGMIN:
        *tmask = TM(KI64);
        *req0 = S_NUM;
        return true;
    default:
        return false;
    }
}

static uint32_t kbad(uint64_t *detail, uint32_t idx, unsigned int reason)
{
    *detail = (uint64_t)reason << 32 | idx;
    return SPYRE_STATUS_BAD_PROGRAM;
}

/* Does a source meet its requirement's type (given T and type of a)? */
static bool src_type_ok(int req, unsigned int t, unsigned int T,
                        unsigned int ta)
{
    switch (req) {
    case S_T:
    case S_TOPT:
    case S_INTOPT:
        return t == T;
    case S_BOOL:
    case S_BOOLOPT:
        return t == KB;
    case S_INT:
        return t == KI32 || t == KI64;
    case S_SAMEA:
        return t == ta;
    case S_NUM:
        return t == KI32 || t == KI64 || t == KF32;
    case S_F32:
        return t == KF32;
    case S_BITS:
        return t == KF32 || t == KI32;
    case S_I64:
        return t == KI64;
    default:
        return true;
    }
}

/* Is value @v (defined) visible in the current section? */
static bool kvisible(const SpyreKProg *p, uint16_t v, bool in_pass,
                     uint32_t pass, uint32_t closed)
{
    if (p->vpass[v] & 0x80) {
        return (p->vpass[v] & 0x7f) < closed;
    }
    return !p->vpass[v] || (in_pass && p->vpass[v] == pass);
}

/*
 * Is dimension @d valid for IDX/SIZE (@idx: IDX) in or out of a pass?
 * 0, or the reason: INDEX for a dimension the launch does not have (the
 * linear reduction index included when nrdims is 0), STRUCTURE for the
 * index of a reduction dimension outside a pass.
 */
static unsigned int dim_err(const SpyreKLaunch *l, uint32_t d, bool idx,
                            bool in_pass)
{
    if (d < l->npdims || d == SPYRE_KDIM_POINT) {
        return 0;
    }
    if ((d >= SPYRE_KDIM_R0 && d < SPYRE_KDIM_R0 + l->nrdims) ||
        (d == SPYRE_KDIM_RINDEX && l->nrdims)) {
        return !idx || in_pass ? 0 : SPYRE_KERR_STRUCTURE;
    }
    return SPYRE_KERR_INDEX;
}

/* SCATTER's mod: a defined kind, ADD of a number, SAT for fp8 only. */
static bool kscatter_mod_ok(uint16_t mod, uint32_t dt)
{
    unsigned int kind = mod & 0xff;

    return !(mod & ~(0xffu | SPYRE_KMOD_SAT)) &&
           (kind == SPYRE_KSCAT_STORE ||
            (kind == SPYRE_KSCAT_ADD && kvtype(dt) != KB)) &&
           (!(mod & SPYRE_KMOD_SAT) || is_fp8(dt));
}

/*
 * A SCATTER's operand is touched by no other LOAD, STORE or SCATTER of
 * the program (so lane order alone decides its contents).  Accounts for
 * the SCATTER @in if it passes.
 */
static bool kscatter_structure_ok(SpyreKProg *p, const SpyreKInst *in)
{
    uint32_t bit = 1u << in->imm;

    if (in->op != SPYRE_KOP_SCATTER) {
        return !(p->scattered & bit);
    }
    if ((p->loaded | p->stored | p->scattered) & bit) {
        return false;
    }
    p->scattered |= bit;
    p->stored |= bit;
    if ((in->mod & 0xff) == SPYRE_KSCAT_ADD) {
        p->loaded |= bit;       /* it reads what it writes */
    }
    return true;
}

/* Slots of kept math lanes, and the comparisons kplan_keep() may spend. */
#define KKEEP_SLOTS     2
#define KKEEP_WORK      (1u << 18)

/* Does @in compute the same lanes wherever it runs in a pass? */
static bool kpure(const SpyreKProg *p, const SpyreKInst *in)
{
    switch (in->op) {
    case SPYRE_KOP_LOAD:
        /* Memory no instruction of the launch writes. */
        return !((p->stored | p->scattered) & (1u << in->imm));
    case SPYRE_KOP_STORE:
    case SPYRE_KOP_CHECK:
    case SPYRE_KOP_SCATTER:
    case SPYRE_KOP_SCAN:
    case SPYRE_KOP_RAND:
    case SPYRE_KOP_REDUCE:
    case SPYRE_KOP_PASS:
    case SPYRE_KOP_ENDPASS:
        return false;
    default:
        return in->dst != KNONE;
    }
}

/*
 * Mark the instructions of passes that need not run while kept lanes are
 * taken (SpyreKInst.idle): pure ones whose results only taken or idle
 * instructions read (their lanes come from the kept slot), walking back
 * from the end.  A LOAD is idle only if value numbering found an earlier
 * twin (@vn: the same operand, offsets and mask in an earlier
 * instruction), which accesses the same lanes first, so any fault it
 * could report comes first in sequential order from the twin.
 */
static void kplan_idle(SpyreKProg *p, const uint16_t *vn)
{
    bool used[SPYRE_KERNEL_MAX_VALUES] = { false };
    uint32_t i;

    for (i = p->ninsts; i-- > 0;) {
        SpyreKInst *in = &p->inst[i];

        in->idle = p->sec_pass[in->sec] && !in->keep && kpure(p, in) &&
                   in->dst != KNONE && !used[in->dst] &&
                   (in->op != SPYRE_KOP_LOAD || vn[in->dst] != in->dst);
        if (in->idle || in->take) {
            continue;
        }
        if (in->a != KNONE && in->op != SPYRE_KOP_CONST) {
            used[in->a] = true;
        }
        if (in->b != KNONE && in->op != SPYRE_KOP_CONST) {
            used[in->b] = true;
        }
        if (in->c != KNONE && in->op != SPYRE_KOP_CONST) {
            used[in->c] = true;
        }
        if ((in->op == SPYRE_KOP_REDUCE || in->op == SPYRE_KOP_SCAN) &&
            in->imm != KNONE) {
            used[in->imm] = true;
        }
    }
}

/*
 * Plan the kept math lanes of a verified program.  Passes run over the
 * same (point, reduction index) lanes, in the same vectors, so an
 * instruction of a pass whose operation and sources are those of an
 * instruction of an earlier pass computes the same lanes; for a math
 * instruction (the costly ones: one-kernel softmax computes its EXP in
 * two passes) the earlier one keeps its lanes and the later one takes
 * them instead of computing (SpyreKInst.keep, take).  Sources compare by
 * value number: a value defined outside the passes is its own, one
 * defined in a pass the number of the first instruction found equal
 * (same opcode, type, modifiers, immediate, source type and sources'
 * numbers; a LOAD only of an operand no instruction writes).  Gives up
 * after KKEEP_WORK comparisons (the plan is an optimisation only).
 */
static void kplan_keep(SpyreKProg *p)
{
    uint16_t vn[SPYRE_KERNEL_MAX_VALUES];
    uint32_t i, j, v, work = 0;

    p->nkeep = 0;
    if (p->npasses < 2) {
        return;
    }
    for (v = 0; v < p->nvalues; v++) {
        vn[v] = v;
    }
    for (i = 0; i < p->ninsts; i++) {
        SpyreKInst *in = &p->inst[i];

        if (!p->sec_pass[in->sec] || !kpure(p, in)) {
            continue;
        }
        for (j = 0; j < i; j++) {
            SpyreKInst *jn = &p->inst[j];

            if (++work > KKEEP_WORK) {
                return;
            }
            if (jn->op != in->op || jn->type != in->type ||
                jn->mod != in->mod || jn->imm != in->imm ||
                jn->stype != in->stype || !p->sec_pass[jn->sec] ||
                !kpure(p, jn)) {
                continue;
            }
            if (in->op == SPYRE_KOP_CONST ? jn->k != in->k :
                (in->a != KNONE ? jn->a == KNONE || vn[jn->a] != vn[in->a] :
                                  jn->a != KNONE) ||
                (in->b != KNONE ? jn->b == KNONE || vn[jn->b] != vn[in->b] :
                                  jn->b != KNONE) ||
                (in->c != KNONE ? jn->c == KNONE || vn[jn->c] != vn[in->c] :
                                  jn->c != KNONE)) {
                continue;
            }
            vn[in->dst] = vn[jn->dst];
            if (jn->sec != in->sec && spyre_kmath_arity(in->op)) {
                if (!jn->keep && p->nkeep < KKEEP_SLOTS) {
                    jn->keep = ++p->nkeep;
                }
                in->take = jn->keep;
            }
            break;
        }
    }
    if (p->nkeep) {
        kplan_idle(p, vn);
    }
}

uint32_t spyre_kernel_verify(SpyreKProg *p, const uint8_t *bytes,
                             uint32_t size, const SpyreKLaunch *l,
                             uint64_t *detail)
{
    uint32_t ninsts, nvalues, i, nval = 0, closed = 0, pass = 0;
    unsigned int npasses, nred = 0, nscan = 0, nsecs = 1, j;
    bool in_pass = false;

    *detail = 0;
    if (size < 64) {
        return kbad(detail, SPYRE_KINST_HEADER, SPYRE_KERR_HEADER);
    }
    ninsts = ld32(bytes + 8);
    nvalues = ld32(bytes + 12);
    npasses = bytes[20];
    if (ld32(bytes) != SPYRE_KPROG_MAGIC ||
        ld16(bytes + 4) != SPYRE_KPROG_VERSION || ld16(bytes + 6) ||
        ninsts > SPYRE_KERNEL_MAX_INSTS || size != 64 + 16 * ninsts ||
        nvalues > SPYRE_KERNEL_MAX_VALUES ||
        bytes[16] > SPYRE_KERNEL_MAX_OPERANDS ||
        bytes[17] > SPYRE_KERNEL_MAX_PARAMS ||
        bytes[18] > SPYRE_KERNEL_MAX_PDIMS ||
        bytes[19] > SPYRE_KERNEL_MAX_RDIMS ||
        (bytes[19] ? npasses < 1 || npasses > SPYRE_KERNEL_MAX_PASSES :
                     npasses != 0) ||
        bytes[21] || bytes[22] || bytes[23] || ld64(bytes + 56)) {
        return kbad(detail, SPYRE_KINST_HEADER, SPYRE_KERR_HEADER);
    }
    for (j = 0; j < SPYRE_KERNEL_MAX_OPERANDS; j++) {
        if (j < bytes[16] ? !kvtype(bytes[24 + j]) : bytes[24 + j] != 0) {
            return kbad(detail, SPYRE_KINST_HEADER, SPYRE_KERR_HEADER);
        }
    }
    if (bytes[16] != l->noperands || bytes[17] != l->nparams ||
        bytes[18] != l->npdims || bytes[19] != l->nrdims) {
        return kbad(detail, SPYRE_KINST_HEADER, SPYRE_KERR_SIGNATURE);
    }
    for (j = 0; j < l->noperands; j++) {
        if (bytes[24 + j] != l->dtype[j]) {
            return kbad(detail, SPYRE_KINST_HEADER, SPYRE_KERR_SIGNATURE);
        }
    }

    p->ninsts = ninsts;
    p->nvalues = nvalues;
    p->npasses = npasses;
    p->loaded = p->stored = p->scattered = 0;
    p->idxdims = 0;
    p->sec_start[0] = 0;
    p->sec_pass[0] = false;
    for (i = 0; i < ninsts; i++) {
        const uint8_t *b = bytes + 64 + 16 * i;
        SpyreKInst *in = &p->inst[i];
        unsigned int tmask = 0, ndef = 1, T, ta = 0;
        int req[3] = { S_NONE, S_NONE, S_NONE };
        uint16_t src[3];
        bool imm_used = false, mod_ok;
        uint32_t d;

        in->op = b[0];
        in->type = T = b[1];
        in->mod = ld16(b + 2);
        in->dst = ld16(b + 4);
        in->a = src[0] = ld16(b + 6);
        in->b = src[1] = ld16(b + 8);
        in->c = src[2] = ld16(b + 10);
        in->imm = ld32(b + 12);
        in->k = ld64(b + 8);
        in->bcast = 0;
        in->red = 0;
        in->keep = in->take = in->idle = 0;

        /* Opcode, result types and sources. */
        switch (in->op) {
        case SPYRE_KOP_PASS:
        case SPYRE_KOP_ENDPASS:
            tmask = TM(0);
            ndef = 0;
            break;
        case SPYRE_KOP_CONST:
            tmask = TM_ANY;
            src[1] = src[2] = KNONE;
            break;
        case SPYRE_KOP_PARAM:
        case SPYRE_KOP_IDX:
        case SPYRE_KOP_SIZE:
            tmask = in->op == SPYRE_KOP_PARAM ? TM_ANY : TM_INT;
            imm_used = true;
            break;
        case SPYRE_KOP_AFFINE:
            tmask = TM_INT;
            req[0] = S_INTOPT;
            imm_used = true;
            break;
        case SPYRE_KOP_CHECK:
            tmask = TM(0);
            ndef = 0;
            req[0] = S_BOOL;
            req[1] = S_BOOLOPT;
            break;
        case SPYRE_KOP_LOAD:
            tmask = TM_ANY;
            req[0] = S_INT;
            req[1] = S_BOOLOPT;
            req[2] = S_TOPT;
            imm_used = true;
            break;
        case SPYRE_KOP_STORE:
        case SPYRE_KOP_SCATTER:
            tmask = TM(0);
            ndef = 0;
            req[0] = S_INT;
            req[1] = S_BOOLOPT;
            req[2] = S_ANY;
            imm_used = true;
            break;
        case SPYRE_KOP_SCAN:
            if (!kfold_types(in->mod & 0xff, &tmask, &req[0])) {
                return kbad(detail, i, SPYRE_KERR_FIELD);
            }
            imm_used = true;
            break;
        case SPYRE_KOP_RAND:
            switch (in->mod) {
            case SPYRE_KRAND_BITS:
                tmask = TM(KI32);
                break;
            case SPYRE_KRAND_UNIFORM:
            case SPYRE_KRAND_NORMAL:
                tmask = TM(KF32);
                break;
            default:
                return kbad(detail, i, SPYRE_KERR_FIELD);
            }
            req[0] = req[1] = S_I64;
            req[2] = S_INT;
            break;
        case SPYRE_KOP_ADD:
        case SPYRE_KOP_SUB:
        case SPYRE_KOP_MUL:
        case SPYRE_KOP_TRUNCDIV:
        case SPYRE_KOP_FLOORDIV:
        case SPYRE_KOP_FMOD:
        case SPYRE_KOP_REM:
        case SPYRE_KOP_MIN:
        case SPYRE_KOP_MAX:
        case SPYRE_KOP_POW:
            tmask = TM_NUM;
            req[0] = req[1] = S_T;
            break;
        case SPYRE_KOP_DIV:
            tmask = TM(KF32);
            req[0] = req[1] = S_T;
            break;
        case SPYRE_KOP_FMA:
        case SPYRE_KOP_CLAMP:
            tmask = TM_NUM;
            req[0] = req[1] = req[2] = S_T;
            break;
        case SPYRE_KOP_NEG:
        case SPYRE_KOP_ABS:
            tmask = TM_NUM;
            req[0] = S_T;
            break;
        case SPYRE_KOP_CMP:
            tmask = TM(KB);
            req[0] = S_ANY;
            req[1] = S_SAMEA;
            break;
        case SPYRE_KOP_AND:
        case SPYRE_KOP_OR:
        case SPYRE_KOP_XOR:
            tmask = TM(KB) | TM_INT;
            req[0] = req[1] = S_T;
            break;
        case SPYRE_KOP_NOT:
            tmask = TM(KB) | TM_INT;
            req[0] = S_T;
            break;
        case SPYRE_KOP_SHL:
        case SPYRE_KOP_SHR:
            tmask = TM_INT;
            req[0] = req[1] = S_T;
            break;
        case SPYRE_KOP_SELECT:
            tmask = TM_ANY;
            req[0] = S_BOOL;
            req[1] = req[2] = S_T;
            break;
        case SPYRE_KOP_CVT:
            tmask = TM_ANY;
            req[0] = S_ANY;
            break;
        case SPYRE_KOP_BITCAST:
            tmask = TM(KI32) | TM(KF32);
            req[0] = S_BITS;
            break;
        case SPYRE_KOP_EXP ... SPYRE_KOP_ATAN:
        case SPYRE_KOP_SINH ... SPYRE_KOP_SIGN:
        case SPYRE_KOP_LGAMMA:
            tmask = TM(KF32);
            req[0] = S_F32;
            break;
        case SPYRE_KOP_ATAN2:
        case SPYRE_KOP_COPYSIGN:
        case SPYRE_KOP_HYPOT:
            tmask = TM(KF32);
            req[0] = req[1] = S_F32;
            break;
        case SPYRE_KOP_ISNAN:
        case SPYRE_KOP_ISINF:
            tmask = TM(KB);
            req[0] = S_F32;
            break;
        case SPYRE_KOP_REDUCE:
            switch (in->mod & 0xff) {
            case SPYRE_KRED_ANY:
            case SPYRE_KRED_ALL:
                tmask = TM(KB);
                req[0] = S_T;
                break;
            case SPYRE_KRED_XOR_SUM:
                tmask = TM_INT;
                req[0] = S_T;
                break;
            case SPYRE_KRED_WELFORD:
                tmask = TM(KF32);
                req[0] = S_T;
                ndef = 3;
                break;
            case SPYRE_KRED_WELFORD_COMBINE:
                tmask = TM(KF32);
                req[0] = req[1] = req[2] = S_T;
                ndef = 3;
                break;
            default:
                if (!kfold_types(in->mod & 0xff, &tmask, &req[0])) {
                    return kbad(detail, i, SPYRE_KERR_FIELD);
                }
            }
            imm_used = true;
            break;
        default:
            return kbad(detail, i, SPYRE_KERR_OPCODE);
        }
        if (T > KF32 || !(tmask & TM(T))) {
            return kbad(detail, i, SPYRE_KERR_TYPE);
        }

        /* Values: dst, then sources defined, visible, present. */
        if (ndef ? in->dst != nval || nval + ndef > nvalues :
                   in->dst != KNONE) {
            return kbad(detail, i, SPYRE_KERR_VALUE);
        }
        for (j = 0; j < 3; j++) {
            uint16_t v = src[j];

            if (v == KNONE) {
                if (req[j] != S_NONE && req[j] != S_TOPT &&
                    req[j] != S_BOOLOPT && req[j] != S_INTOPT) {
                    return kbad(detail, i, SPYRE_KERR_VALUE);
                }
                continue;
            }
            if (req[j] == S_NONE) {
                return kbad(detail, i, SPYRE_KERR_FIELD);
            }
            if (v >= nval) {
                return kbad(detail, i, SPYRE_KERR_VALUE);
            }
            if (!kvisible(p, v, in_pass, pass, closed)) {
                return kbad(detail, i, SPYRE_KERR_VALUE);
            }
            if (in_pass && (!p->vpass[v] || (p->vpass[v] & 0x80))) {
                in->bcast |= 1 << j;
            }
            if (p->vsec[v] != nsecs - 1) {
                p->vlocal[v] = false;
            }
        }
        if ((in->op == SPYRE_KOP_REDUCE || in->op == SPYRE_KOP_SCAN) &&
            in->imm != KNONE) {
            uint16_t v = in->imm;

            if (in->imm > KNONE || v >= nval ||
                !kvisible(p, v, in_pass, pass, closed)) {
                return kbad(detail, i, SPYRE_KERR_VALUE);
            }
            if (p->vtype[v] != KB) {
                return kbad(detail, i, SPYRE_KERR_TYPE);
            }
            if (in_pass && (!p->vpass[v] || (p->vpass[v] & 0x80))) {
                in->bcast |= 1 << 3;
            }
            if (p->vsec[v] != nsecs - 1) {
                p->vlocal[v] = false;
            }
        }
        /* Source types. */
        ta = src[0] != KNONE ? p->vtype[src[0]] : 0;
        in->stype = ta;
        for (j = 0; j < 3; j++) {
            if (src[j] != KNONE &&
                !src_type_ok(req[j], p->vtype[src[j]], T, ta)) {
                return kbad(detail, i, SPYRE_KERR_TYPE);
            }
        }

        /* Indices. */
        d = in->imm;
        switch (in->op) {
        case SPYRE_KOP_PARAM:
            if (d >= l->nparams) {
                return kbad(detail, i, SPYRE_KERR_INDEX);
            }
            break;
        case SPYRE_KOP_IDX:
        case SPYRE_KOP_SIZE: {
            unsigned int why = dim_err(l, d, in->op == SPYRE_KOP_IDX,
                                       in_pass);

            if (why) {
                return kbad(detail, i, why);
            }
            if (in->op == SPYRE_KOP_IDX) {
                p->idxdims |= 1u << d;
            }
            break;
        }
        case SPYRE_KOP_AFFINE: {
            unsigned int nb = __builtin_popcount(in->mod & 0x1ff);

            if (in->mod & ~0x1ffu) {
                return kbad(detail, i, SPYRE_KERR_FIELD);
            }
            for (j = 0; j < 9; j++) {
                if ((in->mod & (1u << j)) &&
                    !(j < 6 ? j < l->npdims : j - 6 < l->nrdims)) {
                    return kbad(detail, i, SPYRE_KERR_INDEX);
                }
            }
            if ((in->mod & 0x1c0) && !in_pass) {
                return kbad(detail, i, SPYRE_KERR_STRUCTURE);
            }
            if (nb ? (uint64_t)d + nb > l->nparams : d != 0) {
                return kbad(detail, i, nb ? SPYRE_KERR_INDEX :
                                            SPYRE_KERR_FIELD);
            }
            p->idxdims |= in->mod & 0x1ff;
            break;
        }
        case SPYRE_KOP_LOAD:
        case SPYRE_KOP_STORE:
            if (d >= l->noperands) {
                return kbad(detail, i, SPYRE_KERR_INDEX);
            }
            if (in->op == SPYRE_KOP_LOAD ? T != kvtype(l->dtype[d]) :
                p->vtype[src[2]] != kvtype(l->dtype[d])) {
                return kbad(detail, i, SPYRE_KERR_TYPE);
            }
            if (in->op == SPYRE_KOP_LOAD) {
                p->loaded |= 1u << d;
            } else {
                p->stored |= 1u << d;
            }
            break;
        case SPYRE_KOP_SCATTER:
            if (d >= l->noperands) {
                return kbad(detail, i, SPYRE_KERR_INDEX);
            }
            if (p->vtype[src[2]] != kvtype(l->dtype[d])) {
                return kbad(detail, i, SPYRE_KERR_TYPE);
            }
            break;
        default:
            if (!imm_used && in->op != SPYRE_KOP_CONST && d) {
                return kbad(detail, i, SPYRE_KERR_FIELD);
            }
            break;
        }

        /* mod and the other fields. */
        switch (in->op) {
        case SPYRE_KOP_CONST:
            mod_ok = !in->mod && src[0] == KNONE &&
                     (T == KI64 || (T == KB ? in->k <= 1 : !(in->k >> 32)));
            break;
        case SPYRE_KOP_AFFINE:
            mod_ok = true;
            break;
        case SPYRE_KOP_STORE:
            mod_ok = !in->mod || (in->mod == SPYRE_KMOD_SAT &&
                                  is_fp8(l->dtype[in->imm]));
            break;
        case SPYRE_KOP_MIN:
        case SPYRE_KOP_MAX:
            mod_ok = !(in->mod & ~SPYRE_KMOD_IGNORE_NAN);
            break;
        case SPYRE_KOP_CMP:
            mod_ok = in->mod <= SPYRE_KCMP_GE &&
                     (ta != KB || in->mod <= SPYRE_KCMP_NE);
            break;
        case SPYRE_KOP_CVT: {
            unsigned int dt = in->mod & 0xff;

            mod_ok = !(in->mod & ~(0xffu | SPYRE_KMOD_SAT)) &&
                     (!dt || (dt < SPYRE_DTYPE_COUNT && kvtype(dt) == T)) &&
                     (!(in->mod & SPYRE_KMOD_SAT) || is_fp8(dt));
            break;
        }
        case SPYRE_KOP_REDUCE:
        case SPYRE_KOP_SCAN:
            mod_ok = !(in->mod & ~0xffu);
            break;
        case SPYRE_KOP_SCATTER:
            mod_ok = kscatter_mod_ok(in->mod, l->dtype[in->imm]);
            break;
        case SPYRE_KOP_RAND:
            mod_ok = true;      /* the kind, checked with the opcode */
            break;
        default:
            mod_ok = !in->mod;
            break;
        }
        if (!mod_ok) {
            return kbad(detail, i, SPYRE_KERR_FIELD);
        }

        /* Structure. */
        switch (in->op) {
        case SPYRE_KOP_PASS:
            if (!l->nrdims || in_pass || pass >= npasses) {
                return kbad(detail, i, SPYRE_KERR_STRUCTURE);
            }
            in_pass = true;
            pass++;
            p->sec_start[nsecs] = i + 1;
            p->sec_pass[nsecs++] = true;
            break;
        case SPYRE_KOP_ENDPASS:
            if (!in_pass) {
                return kbad(detail, i, SPYRE_KERR_STRUCTURE);
            }
            in_pass = false;
            closed++;
            p->sec_start[nsecs] = i + 1;
            p->sec_pass[nsecs++] = false;
            break;
        case SPYRE_KOP_REDUCE:
            if (!in_pass || nred >= SPYRE_KERNEL_MAX_REDUCE) {
                return kbad(detail, i, SPYRE_KERR_STRUCTURE);
            }
            in->red = nred++;
            break;
        case SPYRE_KOP_SCAN:
            if (!in_pass || nscan >= SPYRE_KERNEL_MAX_SCAN) {
                return kbad(detail, i, SPYRE_KERR_STRUCTURE);
            }
            in->red = nscan++;
            break;
        case SPYRE_KOP_LOAD:
        case SPYRE_KOP_STORE:
        case SPYRE_KOP_SCATTER:
            if (!kscatter_structure_ok(p, in)) {
                return kbad(detail, i, SPYRE_KERR_STRUCTURE);
            }
            break;
        default:
            break;
        }
        in->sec = nsecs - 1;
        for (j = 0; j < ndef; j++) {
            p->vtype[nval + j] = T;
            p->vpass[nval + j] = !in_pass ? 0 :
                in->op == SPYRE_KOP_REDUCE ? 0x80 | (pass - 1) : pass;
            p->vsec[nval + j] = in->sec;
            p->vlocal[nval + j] = true;
        }
        nval += ndef;
    }
    if (in_pass || pass != npasses) {
        return kbad(detail, ninsts, SPYRE_KERR_STRUCTURE);
    }
    if (nval != nvalues) {
        return kbad(detail, ninsts, SPYRE_KERR_VALUE);
    }
    p->nreduce = nred;
    p->nscan = nscan;
    p->nsecs = nsecs;
    p->sec_start[nsecs] = ninsts + 1;
    kplan_keep(p);
    return SPYRE_STATUS_OK;
}

/* ---- Interpreter -------------------------------------------------------- */

#define VS(r, v)    ((r)->vp[v])

/* The path that runs (-1 until the first prepare picks the best). */
static int kisa = -1;

unsigned int spyre_kernel_isas(void)
{
    return spyre_kmath_isas();
}

bool spyre_kernel_set_isa(unsigned int isa)
{
    if (isa > SPYRE_KISA_AVX512 || !(spyre_kernel_isas() & (1u << isa))) {
        return false;
    }
    __atomic_store_n(&kisa, (int)isa, __ATOMIC_RELAXED);
    return true;
}


bool spyre_kernel_prepare(SpyreKRun *r, const SpyreKProg *p,
                          const SpyreKLaunch *l, const SpyreKIO *io)
{
    uint32_t vl = l->nrdims ? SPYRE_KRED_BLOCK : SPYRE_KVL_MAX, tile;
    size_t need, nv = p->nvalues, kept = 0;
    uint8_t *m;

    while (vl > SPYRE_KVL_MIN && nv * vl * 8 > (4u << 20)) {
        vl /= 2;
    }
    if (__atomic_load_n(&kisa, __ATOMIC_RELAXED) < 0) {
        /* The highest path the host has. */
        int best = 31 - __builtin_clz(spyre_kernel_isas());

        __atomic_store_n(&kisa, best, __ATOMIC_RELAXED);
    }
    tile = vl;
    if (p->nreduce) {
        tile = KMIN(vl, KMAX(1, 2048 / p->nreduce));
    }
    if (l->nrdims) {
        /* About 64 Ki iterations per tile: tiles are what cores share. */
        tile = KMIN(tile, KMAX(1, 65536 / KMAX(l->R, 1)));
    } else if (l->npdims >= 2 &&
               (p->idxdims & ((1u << (l->npdims - 1)) - 1)) &&
               l->size[l->npdims - 1] >= SPYRE_KRED_BLOCK / 4 &&
               l->size[l->npdims - 1] < vl) {
        /*
         * Point code that reads an outer dimension's index (a gather's
         * row) over rows of at least 256 points: a tile per row,
         * so that the index is uniform over a vector's lanes and the
         * row's offsets affine ("Affine lanes" below).
         */
        tile = l->size[l->npdims - 1];
    }
    /* Kept math lanes: a tile's (point, index) lanes, up to 4 MiB. */
    if (p->nkeep && l->nrdims &&
        l->R <= (4u << 20) / 4 / p->nkeep / tile) {
        kept = (size_t)p->nkeep * tile * l->R * 4;
    }
    if (kept) {
        kept += KBLK * 8;       /* lanes KFOR reads past the last */
    }
    need = nv * vl * 8 + 5 * (size_t)vl * 8 + vl + vl * 4 + vl * 8 +
           (size_t)p->nreduce * tile * sizeof(SpyreKRed) +
           nv * (sizeof(SpyreKAff) + sizeof(void *) + 1) + kept + 64;
    if (need > r->bytes) {
        free(r->mem);
        r->mem = malloc(need);
        r->bytes = r->mem ? need : 0;
        if (!r->mem) {
            return false;
        }
    }
    m = r->mem;
    r->vals = (uint64_t *)m;
    m += nv * vl * 8;
    r->tmp = (uint64_t *)m;
    m += 5 * (size_t)vl * 8;
    r->lr = (uint64_t *)m;
    m += (size_t)vl * 8;
    r->red = (SpyreKRed *)m;
    m += (size_t)p->nreduce * tile * sizeof(SpyreKRed);
    r->aff = (SpyreKAff *)m;
    m += nv * sizeof(SpyreKAff);
    r->vp = (void **)m;
    m += nv * sizeof(void *);
    for (size_t v = 0; v < nv; v++) {
        r->vp[v] = r->vals + v * vl;
    }
    r->kept = kept ? (float *)m : NULL;
    m += kept;
    r->lpt = (uint32_t *)m;
    m += (size_t)vl * 4;
    r->lazy = m;
    memset(r->lazy, 0, nv);
    m += nv;
    r->act = m;
    r->p = p;
    r->l = l;
    r->io = io;
    r->vl = vl;
    r->tile = tile;
    r->row = false;
    r->status = 0;
    r->detail = r->detail2 = 0;
    return true;
}

void spyre_kernel_free(SpyreKRun *r)
{
    free(r->mem);
    r->mem = NULL;
    r->bytes = 0;
}

/* Pass lane @j's point in the tile and its reduction index. */
static inline uint32_t klpt(const SpyreKRun *r, uint32_t j)
{
    return r->row ? r->row_pt : r->lpt[j];
}

static inline uint64_t klr(const SpyreKRun *r, uint32_t j)
{
    return r->row ? r->row_r0 + j : r->lr[j];
}

/* Record an error at lane @j of instruction @idx if it comes first. */
static void kerr(SpyreKRun *r, uint32_t idx, uint32_t j, uint32_t st,
                 uint64_t detail, uint64_t detail2, bool fault)
{
    uint64_t key[4] = {
        r->pt0 + (r->in_pass ? klpt(r, j) : j), r->p->inst[idx].sec,
        r->in_pass ? klr(r, j) : 0, idx
    };
    int i;

    if (r->status) {
        for (i = 0; i < 4 && key[i] == r->ekey[i]; i++) {
            continue;
        }
        if (i == 4 || key[i] > r->ekey[i]) {
            return;
        }
    }
    memcpy(r->ekey, key, sizeof(key));
    r->status = st;
    r->detail = detail;
    r->detail2 = detail2;
    if (fault) {
        r->io->keep_fault(r->io->opaque);
    }
}

/* Point index (in the launch) and reduction index of lane @j. */
static inline uint64_t lane_pt(const SpyreKRun *r, uint32_t j)
{
    return r->pt0 + (r->in_pass ? klpt(r, j) : j);
}

/* Lanes [0, @n) of @d, a value of type @t, all @x (its low bytes). */
static inline KALWAYS void kfill(void *d, unsigned int t, uint64_t x,
                                 uint32_t n)
{
    size_t j;

    switch (t) {
    case KB:
        memset(d, (uint8_t)x, n);
        break;
    case KI64: {
        uint64_t *restrict d64 = d;

        KFOR(j, n, { d64[j] = x; });
        break;
    }
    default: {
        uint32_t *restrict d32 = d, x32 = (uint32_t)x;

        KFOR(j, n, { d32[j] = x32; });
        break;
    }
    }
}

/* Write the lanes of lazy value @v (see "Affine lanes" below). */
static inline KALWAYS void kaff_lanes(SpyreKRun *r, uint16_t v)
{
    uint64_t *restrict d = VS(r, v);
    uint64_t b = r->aff[v].base, sl = r->aff[v].slope;
    size_t j;

    KFOR(j, r->nl, { d[j] = b + sl * j; });
    r->lazy[v] = 0;
}

/* Source @i of @in, broadcast to pass lanes if it is a point value. */
static inline KALWAYS const void *ksrc(SpyreKRun *r, const SpyreKInst *in,
                                       int i, uint16_t v)
{
    const uint64_t *s = VS(r, v);
    uint64_t *d = r->tmp + (size_t)i * r->vl;
    uint32_t n = r->nl;
    size_t j;

    if (!(in->bcast & (1 << i))) {
        if (r->lazy[v]) {
            kaff_lanes(r, v);
        }
        return s;
    }
    if (n && klpt(r, 0) == klpt(r, n - 1)) {
        /* One point's lanes (lpt does not decrease): a fill. */
        uint32_t p0 = klpt(r, 0);
        unsigned int t = r->p->vtype[v];

        kfill(d, t, t == KB ? ((const uint8_t *)s)[p0] :
                    t == KI64 ? s[p0] : ((const uint32_t *)s)[p0], n);
        return d;
    }
    /* Lanes of several points: lpt written (r->row clear). */
    switch (r->p->vtype[v]) {
    case KB:
        for (j = 0; j < n; j++) {
            ((uint8_t *)d)[j] = ((const uint8_t *)s)[r->lpt[j]];
        }
        break;
    case KI64:
        for (j = 0; j < n; j++) {
            d[j] = s[r->lpt[j]];
        }
        break;
    default:
        for (j = 0; j < n; j++) {
            ((uint32_t *)d)[j] = ((const uint32_t *)s)[r->lpt[j]];
        }
        break;
    }
    return d;
}

static inline int64_t geti(const void *s, unsigned int t, uint32_t j)
{
    switch (t) {
    case KB:
        return ((const uint8_t *)s)[j];
    case KI32:
        return ((const int32_t *)s)[j];
    default:
        return ((const int64_t *)s)[j];
    }
}

static inline float getf(const void *s, unsigned int t, uint32_t j)
{
    return t == KF32 ? ((const float *)s)[j] : (float)geti(s, t, j);
}

static inline void puti(void *d, unsigned int t, uint32_t j, int64_t v)
{
    switch (t) {
    case KB:
        ((uint8_t *)d)[j] = v != 0;
        break;
    case KI32:
        ((int32_t *)d)[j] = (int32_t)v;
        break;
    default:
        ((int64_t *)d)[j] = v;
        break;
    }
}

/* f32 to an integer type: truncation; NaN and out of range give MIN. */
static inline int64_t f2i(float f, unsigned int t)
{
    if (t == KI32) {
        return f >= -2147483648.0f && f < 2147483648.0f ? (int32_t)f :
               INT32_MIN;
    }
    return f >= -9223372036854775808.0f && f < 9223372036854775808.0f ?
           (int64_t)f : INT64_MIN;
}

/* Per-lane index along dimension @d (0-8, 14, 15); SIZE if @size. */
static uint64_t kdim(const SpyreKRun *r, uint32_t d, uint32_t j)
{
    const SpyreKLaunch *l = r->l;
    uint64_t lin, stride = 1;
    uint32_t k, end;

    if (d == SPYRE_KDIM_POINT) {
        return lane_pt(r, j);
    }
    if (d == SPYRE_KDIM_RINDEX) {
        return klr(r, j);
    }
    if (d < SPYRE_KDIM_R0) {
        lin = lane_pt(r, j);
        end = l->npdims;
    } else {
        lin = klr(r, j);
        end = SPYRE_KDIM_R0 + l->nrdims;
    }
    for (k = d + 1; k < end; k++) {
        stride *= l->size[k];
    }
    return lin / stride % l->size[d];
}

/*
 * kdim() for lanes [0, r->nl) into @out: consecutive linear indices step
 * the index without a division.
 */
static void kdims(const SpyreKRun *r, uint32_t d, uint64_t *out)
{
    const SpyreKLaunch *l = r->l;
    uint64_t stride = 1, size, lin, prev = 0, q = 0, c = 0;
    uint32_t k, end, n = r->nl;
    size_t j;
    bool rdim = d >= SPYRE_KDIM_R0 && d != SPYRE_KDIM_POINT;

    if (d == SPYRE_KDIM_POINT || d == SPYRE_KDIM_RINDEX) {
        for (j = 0; j < n; j++) {
            out[j] = kdim(r, d, j);
        }
        return;
    }
    end = rdim ? SPYRE_KDIM_R0 + l->nrdims : l->npdims;
    for (k = d + 1; k < end; k++) {
        stride *= l->size[k];
    }
    size = l->size[d];
    lin = rdim ? klr(r, 0) : lane_pt(r, 0);
    if (n && stride == 1 && lin % size + n <= size &&
        (rdim ? klr(r, n - 1) : lane_pt(r, n - 1)) == lin + n - 1 &&
        (rdim || !r->in_pass)) {
        /*
         * Consecutive linear indices (point code, or one run of a pass's
         * reduction indices) within one row: a ramp.
         */
        kramp(out, lin % size, n);
        return;
    }
    for (j = 0; j < n; j++) {
        lin = rdim ? klr(r, j) : lane_pt(r, j);
        if (j && lin == prev + 1) {
            if (++c == stride) {
                c = 0;
                if (++q == size) {
                    q = 0;
                }
            }
        } else {
            c = lin % stride;
            q = lin / stride % size;
        }
        prev = lin;
        out[j] = q;
    }
}

/* ---- Affine lanes ------------------------------------------------------ */

/*
 * Index arithmetic mostly gives i64 lanes that are base + slope * j in
 * one vector (j the lane): the reduction index of one point's run, a
 * point-level row offset plus it, a dimension's index in point code.
 * The instructions that compute such values from such values (IDX,
 * AFFINE, CONST, PARAM, ADD, SUB, MUL of i64) keep the pair instead of
 * writing lanes (the value is *lazy*); a LOAD or STORE at offsets of
 * slope 1 and no mask goes straight to its contiguous run, with no
 * offset lanes read, compared or bounds-checked one by one; any other
 * reader gets the lanes written first (ksrc()).  Lazy values of the
 * vector are written or dropped when it ends (krun_insts()).  All
 * arithmetic is modulo 2^64 as the lanes' own (-fwrapv), so the pair
 * gives exactly the lanes the instructions would have written.
 */

/*
 * Is dimension @d's index (kdim()) over the vector's lanes base + slope
 * * j?  As kdims()' cases; false where it cannot tell cheaply.
 */
static bool kdim_aff(const SpyreKRun *r, uint32_t d, uint64_t *base,
                     uint64_t *slope)
{
    const SpyreKLaunch *l = r->l;
    uint32_t n = r->nl, k, end;
    uint64_t stride = 1, size, lin;
    bool rdim = d >= SPYRE_KDIM_R0 && d != SPYRE_KDIM_POINT;

    if (!n) {
        return false;
    }
    if (r->in_pass && klpt(r, 0) != klpt(r, n - 1)) {
        return false;           /* lanes of several points */
    }
    if (d == SPYRE_KDIM_POINT) {
        *base = lane_pt(r, 0);
        *slope = !r->in_pass;
        return true;
    }
    if (rdim && (!r->in_pass || klr(r, n - 1) - klr(r, 0) != n - 1)) {
        return false;
    }
    if (d == SPYRE_KDIM_RINDEX) {
        *base = klr(r, 0);
        *slope = 1;
        return true;
    }
    end = rdim ? SPYRE_KDIM_R0 + l->nrdims : l->npdims;
    for (k = d + 1; k < end; k++) {
        stride *= l->size[k];
    }
    size = l->size[d];
    if (!size || !stride) {
        return false;
    }
    /* The lanes' linear indices: lin + j (one point's run, or points). */
    lin = rdim ? klr(r, 0) : lane_pt(r, 0);
    if (r->in_pass && !rdim) {
        *base = lin / stride % size;        /* one point: uniform */
        *slope = 0;
        return true;
    }
    if (stride == 1 && lin % size + n <= size) {
        *base = lin % size;
        *slope = 1;
        return true;
    }
    if (lin / stride == (lin + n - 1) / stride) {
        *base = lin / stride % size;
        *slope = 0;
        return true;
    }
    return false;
}

/* Is source @i (value @v) of @in an affine i64 over the lanes? */
static inline bool kaff_src(const SpyreKRun *r, const SpyreKInst *in, int i,
                            uint16_t v, SpyreKAff *a)
{
    uint32_t n = r->nl;

    if (in->bcast & (1 << i)) {
        /* A point value over one point's lanes: uniform. */
        if (r->p->vtype[v] != KI64 || !n || klpt(r, 0) != klpt(r, n - 1)) {
            return false;
        }
        a->base = ((const uint64_t *)VS(r, v))[klpt(r, 0)];
        a->slope = 0;
        return true;
    }
    if (!r->lazy[v]) {
        return false;
    }
    *a = r->aff[v];
    return true;
}

/*
 * If @in computes an affine i64 from affine sources, make its result
 * lazy and return true (nothing else to do); else false.
 */
static bool kaff_op(SpyreKRun *r, const SpyreKInst *in)
{
    const SpyreKLaunch *l = r->l;
    SpyreKAff x = { 0, 0 }, y, t;
    uint32_t d, pi;

    if (in->type != KI64 || !r->nl) {
        return false;
    }
    switch (in->op) {
    case SPYRE_KOP_CONST:
        x.base = (uint64_t)(int64_t)in->k;
        break;
    case SPYRE_KOP_PARAM:
        x.base = l->param[in->imm];
        break;
    case SPYRE_KOP_IDX:
        if (!kdim_aff(r, in->imm, &t.base, &t.slope)) {
            return false;
        }
        x.base = t.base;
        x.slope = t.slope;
        break;
    case SPYRE_KOP_AFFINE:
        if (in->a != KNONE && !kaff_src(r, in, 0, in->a, &x)) {
            return false;
        }
        for (d = 0, pi = in->imm; d < 9; d++) {
            uint64_t s;

            if (!(in->mod & (1u << d))) {
                continue;
            }
            s = l->param[pi++];
            if (!kdim_aff(r, d, &t.base, &t.slope)) {
                return false;
            }
            x.base += t.base * s;
            x.slope += t.slope * s;
        }
        break;
    case SPYRE_KOP_ADD:
    case SPYRE_KOP_SUB:
    case SPYRE_KOP_MUL:
        if (in->stype != KI64 || r->p->vtype[in->b] != KI64 ||
            !kaff_src(r, in, 0, in->a, &x) ||
            !kaff_src(r, in, 1, in->b, &y)) {
            return false;
        }
        if (in->op == SPYRE_KOP_ADD) {
            x.base += y.base;
            x.slope += y.slope;
        } else if (in->op == SPYRE_KOP_SUB) {
            x.base -= y.base;
            x.slope -= y.slope;
        } else if (!x.slope || !y.slope) {
            /* (b + s j) c: one factor uniform. */
            t.base = x.base * y.base;
            t.slope = x.slope * y.base + y.slope * x.base;
            x = t;
        } else {
            return false;
        }
        break;
    default:
        return false;
    }
    /* Field by field: kdim_aff()'s 8-byte stores forward to 8-byte loads. */
    r->aff[in->dst].base = x.base;
    r->aff[in->dst].slope = x.slope;
    r->lazy[in->dst] = 1;
    return true;
}

/*
 * MIN or MAX (@max); with @ign a NaN operand loses to a number.  Masks,
 * no branch, every comparison evaluated: the lane loops vectorise.
 */
static inline float fminmax(float a, float b, bool max, bool ign)
{
    uint32_t ua = f2u(a), ub = f2u(b), res;
    uint32_t an = kmask(a != a), bn = kmask(b != b), eq = kmask(a == b);
    uint32_t wins = kmask(max ? a < b : b < a);     /* b, unless equal */
    uint32_t neg = -(ua >> 31);                     /* a is -0 (if equal) */

    /* Equal: MAX takes b when a is -0, MIN when a is +0. */
    res = ksel((eq & (max ? neg : ~neg)) | (~eq & wins), ub, ua);
    if (ign) {
        res = ksel(an, ksel(bn, CANON_NAN, ub), ksel(bn, ua, res));
    } else {
        res = ksel(an | bn, CANON_NAN, res);
    }
    return u2f(res);
}

static float ffloordiv(float a, float b)
{
    float m, d, q;

    if (b == 0.0f) {
        return a / b;
    }
    m = fmodf(a, b);
    d = (a - m) / b;
    if (m != 0.0f && (b < 0) != (m < 0)) {
        d -= 1.0f;
    }
    if (d == 0.0f) {
        return copysignf(0.0f, a / b);
    }
    q = floorf(d);
    if (d - q > 0.5f) {
        q += 1.0f;
    }
    return q;
}

static float frem(float a, float b)
{
    float m = fmodf(a, b);

    if (m != 0.0f && (b < 0) != (m < 0)) {
        m += b;
    }
    return m;
}

/* Integer binary operations in width @bits (32 or 64), wrapping. */
static inline int64_t kiop(unsigned int op, int64_t a, int64_t b, int64_t c,
                    unsigned int bits)
{
    int64_t mn = bits == 32 ? INT32_MIN : INT64_MIN;
    uint64_t ua = a, ub = b, res;
    int64_t q, m;

    switch (op) {
    case SPYRE_KOP_ADD:
        return ua + ub;
    case SPYRE_KOP_SUB:
        return ua - ub;
    case SPYRE_KOP_MUL:
        return ua * ub;
    case SPYRE_KOP_FMA:
        return ua * ub + (uint64_t)c;
    case SPYRE_KOP_TRUNCDIV:
    case SPYRE_KOP_FLOORDIV:
        if (b == 0) {
            return -1;
        }
        if (a == mn && b == -1) {
            return mn;
        }
        q = a / b;
        if (op == SPYRE_KOP_FLOORDIV && a % b && ((a < 0) != (b < 0))) {
            q--;
        }
        return q;
    case SPYRE_KOP_FMOD:
    case SPYRE_KOP_REM:
        if (b == 0) {
            return a;
        }
        if (b == -1) {
            return 0;
        }
        m = a % b;
        if (op == SPYRE_KOP_REM && m && ((m < 0) != (b < 0))) {
            m += b;
        }
        return m;
    case SPYRE_KOP_POW:
        if (b < 0) {
            return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
        }
        res = 1;
        while (b) {
            if (b & 1) {
                res *= ua;
            }
            ua *= ua;
            b >>= 1;
        }
        return res;
    case SPYRE_KOP_MIN:
        return a < b ? a : b;
    case SPYRE_KOP_MAX:
        return a > b ? a : b;
    case SPYRE_KOP_CLAMP:
        a = a > b ? a : b;
        return a < c ? a : c;
    case SPYRE_KOP_NEG:
        return 0 - ua;
    case SPYRE_KOP_ABS:
        return a < 0 ? 0 - ua : ua;
    case SPYRE_KOP_AND:
        return a & b;
    case SPYRE_KOP_OR:
        return a | b;
    case SPYRE_KOP_XOR:
        return a ^ b;
    case SPYRE_KOP_NOT:
        return ~a;
    case SPYRE_KOP_SHL:
        return b < 0 || b >= bits ? 0 : (int64_t)(ua << b);
    case SPYRE_KOP_SHR:
        return b < 0 || b >= bits ? a >> (bits - 1) : a >> b;
    default:
        return 0;
    }
}

static inline float kfop(unsigned int op, float a, float b, float c,
                         uint16_t mod)
{
    switch (op) {
    case SPYRE_KOP_TRUNCDIV:
        return truncf(a / b);
    case SPYRE_KOP_FLOORDIV:
        return ffloordiv(a, b);
    case SPYRE_KOP_FMOD:
        return fmodf(a, b);
    case SPYRE_KOP_REM:
        return frem(a, b);
    case SPYRE_KOP_POW:
        return spyre_kmath_pow(a, b);
    default:
        return 0.0f;
    }
}

/* Every NaN of lanes [0, @n) of @d made the canonical one. */
static inline KALWAYS void kcanon_lanes(float *restrict d, uint32_t n)
{
    size_t j;

    KFOR(j, n, {
        uint32_t u = f2u(d[j]);

        d[j] = u2f(ksel(kmask(d[j] != d[j]), CANON_NAN, u));
    });
}

/*
 * The lane loops of kalu(), as functions whose pointer parameters are
 * restrict (value slots never overlap: a result is a new value), which
 * GCC keeps when it inlines them, so that their loops vectorise.
 */

/* f32 results of EXPR over x, y (and zs[j]), NaN canonical. */
#define KDEF_F(name, EXPR) \
static inline KALWAYS void name(float *restrict ds, const float *restrict xs, \
                                const float *restrict ys, \
                                const float *restrict zs, uint32_t n) \
{ \
    size_t j; \
    \
    (void)zs; \
    KFOR(j, n, { \
        float x = xs[j], y = ys[j], res = (EXPR); \
        \
        ds[j] = u2f(ksel(kmask(res != res), CANON_NAN, f2u(res))); \
    }); \
}

KDEF_F(kf_add, x + y)
KDEF_F(kf_sub, x - y)
KDEF_F(kf_mul, x * y)
KDEF_F(kf_div, x / y)

/* The same with one y for every lane (a point value over one point's). */
#define KDEF_FS(name, EXPR) \
static inline KALWAYS void name(float *restrict ds, const float *restrict xs, \
                                float y, uint32_t n) \
{ \
    size_t j; \
    \
    KFOR(j, n, { \
        float x = xs[j], res = (EXPR); \
        \
        ds[j] = u2f(ksel(kmask(res != res), CANON_NAN, f2u(res))); \
    }); \
}

KDEF_FS(kfs_add, x + y)
KDEF_FS(kfs_sub, x - y)
KDEF_FS(kfs_mul, x * y)
KDEF_FS(kfs_div, x / y)
KDEF_F(kf_max, fminmax(x, y, true, false))
KDEF_F(kf_max_ign, fminmax(x, y, true, true))
KDEF_F(kf_min, fminmax(x, y, false, false))
KDEF_F(kf_min_ign, fminmax(x, y, false, true))
KDEF_F(kf_clamp, fminmax(fminmax(x, y, true, false), zs[j], false, false))
KDEF_F(kf_fma, fmaf(x, y, zs[j]))

/* CMP of every lane: @xs and @ys of type T, bool results. */
#define KDEF_CMP(name, lane_t) \
static inline KALWAYS void name(uint8_t *restrict res, \
                                const lane_t *restrict xs, \
                                const lane_t *restrict ys, uint32_t n, \
                                unsigned int mod) \
{ \
    size_t j; \
    \
    switch (mod) { \
    case SPYRE_KCMP_EQ: \
        KFOR(j, n, { res[j] = xs[j] == ys[j]; }); \
        break; \
    case SPYRE_KCMP_NE: \
        KFOR(j, n, { res[j] = xs[j] != ys[j]; }); \
        break; \
    case SPYRE_KCMP_LT: \
        KFOR(j, n, { res[j] = xs[j] < ys[j]; }); \
        break; \
    case SPYRE_KCMP_LE: \
        KFOR(j, n, { res[j] = xs[j] <= ys[j]; }); \
        break; \
    case SPYRE_KCMP_GT: \
        KFOR(j, n, { res[j] = xs[j] > ys[j]; }); \
        break; \
    default: \
        KFOR(j, n, { res[j] = xs[j] >= ys[j]; }); \
        break; \
    } \
}

KDEF_CMP(kcmp_f32, float)
KDEF_CMP(kcmp_i64, int64_t)
KDEF_CMP(kcmp_i32, int32_t)
KDEF_CMP(kcmp_b, uint8_t)

/*
 * The integer operations of type T (int32_t or int64_t), @bits wide:
 * the ones that cannot fail in blocks, the rest lane by lane (kiop()).
 */
#define KDEF_INT(name, lane_t, bits) \
static inline KALWAYS void name(lane_t *restrict d, const lane_t *restrict x, \
                                const lane_t *restrict y, \
                                const lane_t *restrict z, uint32_t n, \
                                unsigned int op) \
{ \
    size_t j; \
    \
    switch (op) { \
    case SPYRE_KOP_ADD: \
        KFOR(j, n, { d[j] = (lane_t)((uint64_t)x[j] + (uint64_t)y[j]); }); \
        return; \
    case SPYRE_KOP_SUB: \
        KFOR(j, n, { d[j] = (lane_t)((uint64_t)x[j] - (uint64_t)y[j]); }); \
        return; \
    case SPYRE_KOP_MUL: \
        KFOR(j, n, { d[j] = (lane_t)((uint64_t)x[j] * (uint64_t)y[j]); }); \
        return; \
    case SPYRE_KOP_MIN: \
        KFOR(j, n, { d[j] = x[j] < y[j] ? x[j] : y[j]; }); \
        return; \
    case SPYRE_KOP_MAX: \
        KFOR(j, n, { d[j] = x[j] > y[j] ? x[j] : y[j]; }); \
        return; \
    case SPYRE_KOP_AND: \
        KFOR(j, n, { d[j] = x[j] & y[j]; }); \
        return; \
    case SPYRE_KOP_OR: \
        KFOR(j, n, { d[j] = x[j] | y[j]; }); \
        return; \
    case SPYRE_KOP_XOR: \
        KFOR(j, n, { d[j] = x[j] ^ y[j]; }); \
        return; \
    default: \
        break; \
    } \
    for (j = 0; j < n; j++) { \
        d[j] = (lane_t)kiop(op, x[j], y ? y[j] : 0, z ? z[j] : 0, bits); \
    } \
}

KDEF_INT(kint_i32, int32_t, 32)
KDEF_INT(kint_i64, int64_t, 64)

/* SELECT of values @size bytes wide: @m ? @x : @y. */
#define KDEF_SEL(name, lane_t) \
static inline KALWAYS void name(lane_t *restrict d, \
                                const uint8_t *restrict m, \
                                const lane_t *restrict x, \
                                const lane_t *restrict y, uint32_t n) \
{ \
    size_t j; \
    \
    KFOR(j, n, { d[j] = m[j] ? x[j] : y[j]; }); \
}

KDEF_SEL(ksel_b, uint8_t)
KDEF_SEL(ksel_32, uint32_t)
KDEF_SEL(ksel_64, uint64_t)

/* Bitwise operations on bool or f32 bits: d = x OP y, or OP x. */
#define KDEF_BITS2(name, lane_t, EXPR) \
static inline KALWAYS void name(lane_t *restrict d, \
                                const lane_t *restrict xs, \
                                const lane_t *restrict ys, uint32_t n) \
{ \
    size_t j; \
    \
    KFOR(j, n, { lane_t x = xs[j], y = ys[j]; d[j] = (EXPR); }); \
}
#define KDEF_BITS1(name, lane_t, EXPR) \
static inline KALWAYS void name(lane_t *restrict d, \
                                const lane_t *restrict xs, uint32_t n) \
{ \
    size_t j; \
    \
    KFOR(j, n, { lane_t x = xs[j]; d[j] = (EXPR); }); \
}

KDEF_BITS2(kb_and, uint8_t, x & y)
KDEF_BITS2(kb_or, uint8_t, x | y)
KDEF_BITS2(kb_xor, uint8_t, x ^ y)
KDEF_BITS1(kb_not, uint8_t, !x)
KDEF_BITS1(kf_neg, uint32_t, x ^ 0x80000000u)
KDEF_BITS1(kf_abs, uint32_t, x & 0x7fffffffu)

/* @acc[j] += @ix[j] * @s (AFFINE's terms, wrapping). */
static inline KALWAYS void kaxpy(uint64_t *restrict acc,
                                 const uint64_t *restrict ix, uint64_t s,
                                 uint32_t n)
{
    size_t j;

    KFOR(j, n, { acc[j] += ix[j] * s; });
}

/*
 * Elementwise instructions: everything but memory, CHECK and REDUCE
 * (@isa: the host code path that runs, for the math library's lanes).
 */
static inline KALWAYS void kalu(SpyreKRun *r, const SpyreKInst *in,
                                unsigned int isa)
{
    const SpyreKLaunch *l = r->l;
    uint32_t n = r->nl;
    size_t j;
    unsigned int T = in->type, ta = in->stype;
    void *dv = VS(r, in->dst);
    float *df = dv;
    const void *a = NULL, *b = NULL, *c = NULL;
    const float *af, *bf;
    /*
     * ADD, SUB, MUL, DIV of f32 whose second source is a point value
     * over one point's lanes: that one value (@bs), no lanes filled.
     */
    bool bs = in->op >= SPYRE_KOP_ADD && in->op <= SPYRE_KOP_DIV &&
              T == KF32 && (in->bcast & 2) && n &&
              klpt(r, 0) == klpt(r, n - 1);

    if (in->a != KNONE) {
        a = ksrc(r, in, 0, in->a);
    }
    if (bs) {
        float y = ((const float *)VS(r, in->b))[klpt(r, 0)];

        switch (in->op) {
        case SPYRE_KOP_ADD:
            kfs_add(df, a, y, n);
            break;
        case SPYRE_KOP_SUB:
            kfs_sub(df, a, y, n);
            break;
        case SPYRE_KOP_MUL:
            kfs_mul(df, a, y, n);
            break;
        default:
            kfs_div(df, a, y, n);
            break;
        }
        return;
    }
    if (in->b != KNONE && in->op != SPYRE_KOP_CONST) {
        b = ksrc(r, in, 1, in->b);
    }
    if (in->c != KNONE && in->op != SPYRE_KOP_CONST) {
        c = ksrc(r, in, 2, in->c);
    }
    af = a;
    bf = b;

    switch (in->op) {
    case SPYRE_KOP_CONST:
        kfill(dv, T, T == KF32 ? (uint32_t)in->k :
                     T == KI64 ? (uint64_t)(int64_t)in->k :
                     T == KB ? (int32_t)in->k != 0 :
                     (uint32_t)(int32_t)in->k, n);
        return;
    case SPYRE_KOP_PARAM: {
        uint64_t v = l->param[in->imm];

        kfill(dv, T, T == KF32 || T == KI64 ? v : T == KB ? v != 0 :
                     (uint32_t)(int32_t)v, n);
        return;
    }
    case SPYRE_KOP_IDX: {
        uint64_t *ix = r->tmp + 3 * (size_t)r->vl;

        kdims(r, in->imm, ix);
        if (T == KI64) {
            memcpy(dv, ix, (size_t)n * 8);
        } else {
            int32_t *restrict d32 = dv;

            KFOR(j, n, { d32[j] = (int32_t)ix[j]; });
        }
        return;
    }
    case SPYRE_KOP_SIZE: {
        uint64_t v = in->imm == SPYRE_KDIM_POINT ? l->P :
                     in->imm == SPYRE_KDIM_RINDEX ? l->R : l->size[in->imm];

        for (j = 0; j < n; j++) {
            puti(dv, T, j, v);
        }
        return;
    }
    case SPYRE_KOP_AFFINE: {
        uint64_t *restrict acc = r->tmp + 3 * (size_t)r->vl;
        uint64_t *restrict ix = r->tmp + 4 * (size_t)r->vl;
        uint32_t d, pi = in->imm;

        if (!a) {
            memset(acc, 0, (size_t)n * 8);
        } else if (T == KI64) {
            memcpy(acc, a, (size_t)n * 8);
        } else {
            const int32_t *restrict x = a;

            KFOR(j, n, { acc[j] = (uint64_t)(int64_t)x[j]; });
        }
        for (d = 0; d < 9; d++) {
            uint64_t s;

            if (!(in->mod & (1u << d))) {
                continue;
            }
            s = l->param[pi++];
            kdims(r, d, ix);
            kaxpy(acc, ix, s, n);
        }
        if (T == KI64) {
            memcpy(dv, acc, (size_t)n * 8);
        } else {
            int32_t *restrict d32 = dv;

            KFOR(j, n, { d32[j] = (int32_t)acc[j]; });
        }
        return;
    }
    case SPYRE_KOP_ADD:
    case SPYRE_KOP_SUB:
    case SPYRE_KOP_MUL:
    case SPYRE_KOP_DIV:
        if (T == KF32) {
            switch (in->op) {
            case SPYRE_KOP_ADD:
                kf_add(df, af, bf, NULL, n);
                break;
            case SPYRE_KOP_SUB:
                kf_sub(df, af, bf, NULL, n);
                break;
            case SPYRE_KOP_MUL:
                kf_mul(df, af, bf, NULL, n);
                break;
            default:
                kf_div(df, af, bf, NULL, n);
                break;
            }
            return;
        }
        break;
    case SPYRE_KOP_MIN:
    case SPYRE_KOP_MAX:
        if (T == KF32) {
            bool ign = in->mod & SPYRE_KMOD_IGNORE_NAN;

            /*
             * Constant flags per loop: no branch in it.  Direct calls (a
             * call through a pointer gets the baseline's copy, not this
             * code path's inlined one).
             */
            if (in->op == SPYRE_KOP_MAX && ign) {
                kf_max_ign(df, af, bf, NULL, n);
            } else if (in->op == SPYRE_KOP_MAX) {
                kf_max(df, af, bf, NULL, n);
            } else if (ign) {
                kf_min_ign(df, af, bf, NULL, n);
            } else {
                kf_min(df, af, bf, NULL, n);
            }
            return;
        }
        break;
    case SPYRE_KOP_CLAMP:
        if (T == KF32) {
            kf_clamp(df, af, bf, c, n);
            return;
        }
        break;
    case SPYRE_KOP_FMA:
        if (T == KF32) {
            kf_fma(df, af, bf, c, n);
            return;
        }
        break;
    case SPYRE_KOP_NEG:
    case SPYRE_KOP_ABS:
        if (T == KF32) {
            if (in->op == SPYRE_KOP_NEG) {
                kf_neg(dv, a, n);
            } else {
                kf_abs(dv, a, n);
            }
            return;
        }
        break;
    case SPYRE_KOP_CMP:
        switch (ta) {
        case KF32:
            kcmp_f32(dv, a, b, n, in->mod);
            break;
        case KI64:
            kcmp_i64(dv, a, b, n, in->mod);
            break;
        case KI32:
            kcmp_i32(dv, a, b, n, in->mod);
            break;
        default:
            kcmp_b(dv, a, b, n, in->mod);
            break;
        }
        return;
    case SPYRE_KOP_AND:
    case SPYRE_KOP_OR:
    case SPYRE_KOP_XOR:
    case SPYRE_KOP_NOT:
        if (T == KB) {
            switch (in->op) {
            case SPYRE_KOP_AND:
                kb_and(dv, a, b, n);
                break;
            case SPYRE_KOP_OR:
                kb_or(dv, a, b, n);
                break;
            case SPYRE_KOP_XOR:
                kb_xor(dv, a, b, n);
                break;
            default:
                kb_not(dv, a, n);
                break;
            }
            return;
        }
        break;
    case SPYRE_KOP_SELECT:
        switch (T) {
        case KB:
            ksel_b(dv, a, b, c, n);
            break;
        case KI64:
            ksel_64(dv, a, b, c, n);
            break;
        default:
            ksel_32(dv, a, b, c, n);
            break;
        }
        return;
    case SPYRE_KOP_CVT: {
        unsigned int dt = in->mod & 0xff;

        if (T == KF32 && ta == KI32) {
            const int32_t *restrict x = a;

            KFOR(j, n, { df[j] = (float)x[j]; });
        } else if (T == KF32 && ta == KF32) {
            memcpy(df, af, (size_t)n * 4);
        } else if (T == KI32 && ta == KF32) {
            int32_t *restrict d = dv;

            for (j = 0; j < n; j++) {
                d[j] = (int32_t)f2i(af[j], KI32);
            }
        } else {
            for (j = 0; j < n; j++) {
                if (T == KF32) {
                    df[j] = getf(a, ta, j);
                } else if (T == KB) {
                    ((uint8_t *)dv)[j] = ta == KF32 ? af[j] != 0.0f :
                                         geti(a, ta, j) != 0;
                } else if (ta == KF32) {
                    puti(dv, T, j, f2i(af[j], T));
                } else {
                    puti(dv, T, j, geti(a, ta, j));
                }
            }
        }
        if (T == KF32 && dt && dt != SPYRE_DTYPE_FP32) {
            uint8_t *raw = (uint8_t *)(r->tmp + 4 * (size_t)r->vl);

            spyre_store_fp32(raw, dt, df, n, (in->mod & SPYRE_KMOD_SAT) ? 0 :
                             SPYRE_CMD_F_NOSAT);
            spyre_load_fp32(df, raw, dt, n);
        } else if (T == KI32 && dt) {
            int32_t *d = dv;

            for (j = 0; j < n; j++) {
                d[j] = dt == SPYRE_DTYPE_INT8 ? (int8_t)d[j] :
                       dt == SPYRE_DTYPE_U8 ? (uint8_t)d[j] :
                       dt == SPYRE_DTYPE_INT16 ? (int16_t)d[j] : d[j];
            }
        }
        if (T == KF32) {
            kcanon_lanes(df, n);
        }
        return;
    }
    case SPYRE_KOP_BITCAST:
        memcpy(dv, a, (size_t)n * 4);
        return;
    case SPYRE_KOP_EXP ... SPYRE_KOP_SIGN:
    case SPYRE_KOP_COPYSIGN ... SPYRE_KOP_LGAMMA:
        spyre_kmath_lanes(isa, in->op, df, af, bf, n);
        return;
    case SPYRE_KOP_ISNAN:
    case SPYRE_KOP_ISINF:
        for (j = 0; j < n; j++) {
            ((uint8_t *)dv)[j] = in->op == SPYRE_KOP_ISNAN ?
                                 af[j] != af[j] : isinf(af[j]) != 0;
        }
        return;
    default:
        break;
    }

    /* The rest, lane by lane: one loop per operation and type. */
    if (T == KF32) {
        const float *cf = c;

#define KF2(OP) do { \
            for (j = 0; j < n; j++) { \
                df[j] = kfop(OP, af[j], bf[j], 0.0f, in->mod); \
            } \
        } while (0)
        switch (in->op) {
        case SPYRE_KOP_TRUNCDIV:
            KF2(SPYRE_KOP_TRUNCDIV);
            break;
        case SPYRE_KOP_FLOORDIV:
            KF2(SPYRE_KOP_FLOORDIV);
            break;
        case SPYRE_KOP_FMOD:
            KF2(SPYRE_KOP_FMOD);
            break;
        case SPYRE_KOP_REM:
            KF2(SPYRE_KOP_REM);
            break;
        case SPYRE_KOP_POW:
            KF2(SPYRE_KOP_POW);
            break;
        default:
            for (j = 0; j < n; j++) {
                df[j] = kfop(in->op, af[j], bf ? bf[j] : 0.0f,
                             cf ? cf[j] : 0.0f, in->mod);
            }
            break;
        }
#undef KF2
        kcanon_lanes(df, n);
    } else if (T == KI32) {
        kint_i32(dv, a, b, c, n, in->op);
    } else {
        kint_i64(dv, a, b, c, n, in->op);
    }
}

/* ---- Memory ------------------------------------------------------------- */

/* Is the host little-endian, as guest memory is (a constant)? */
static inline bool khost_le(void)
{
    const uint16_t one = 1;
    uint8_t b;

    memcpy(&b, &one, 1);
    return b;
}

/* fp16 to f32 as spyre_fp16_to_fp32() (NaNs quietened), no branch. */
static inline float kh2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, mag = h & 0x7fff;
    uint32_t norm = (mag << 13) + (112u << 23);
    uint32_t sub = f2u((float)(int32_t)mag / 16777216.0f);
    uint32_t inf = norm + (112u << 23);
    uint32_t res = ksel(kmask(mag < 0x400), sub,
                        ksel(kmask(mag < 0x7c00), norm,
                             ksel(kmask(mag == 0x7c00), inf,
                                  inf | 0x400000)));

    return u2f(res | sign);
}

/* f32 to fp16 as spyre_fp32_to_fp16() (to nearest even), no branch. */
static inline uint16_t kf2h(float f)
{
    uint32_t x = f2u(f), ax = x & 0x7fffffff, sign = (x >> 16) & 0x8000;
    uint32_t nan = 0x7e00 | ((ax >> 13) & 0x3ff);
    /* Normal results: the mantissa rounded at bit 13, carries included. */
    uint32_t norm = (ax - (112u << 23) + 0xfff + ((ax >> 13) & 1)) >> 13;
    /* Below 2^-14: the FPU rounds to a multiple of 2^-24 (0.5's ulp). */
    uint32_t sub = f2u(u2f(ax) + 0.5f) - 0x3f000000;
    uint32_t res = ksel(kmask(ax > 0x7f800000), nan,
                        ksel(kmask(ax >= 0x47800000), 0x7c00,
                             ksel(kmask(ax < 0x38800000), sub, norm)));

    return (uint16_t)(res | sign);
}

/* bf16 to f32 as spyre_bf16_to_fp32() (NaNs quietened). */
static inline float kbf2f(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;

    return u2f(x | (kmask((x & 0x7fffffff) > 0x7f800000) & 0x400000));
}

/* f32 to bf16 as spyre_fp32_to_bf16() (to nearest even). */
static inline uint16_t kf2bf(float f)
{
    uint32_t x = f2u(f), ax = x & 0x7fffffff;
    uint32_t fin = ((ax + 0x7fff + ((ax >> 16) & 1)) >> 16) |
                   ((x >> 16) & 0x8000);

    return (uint16_t)ksel(kmask(ax > 0x7f800000), (x >> 16) | 0x40, fin);
}

#ifdef HOST_X86_64
/*
 * fp16 runs converted with F16C, for the AVX2 path (spyre_kmath_isas()
 * requires F16C for it), and with AVX-512's forms for the AVX-512 path:
 * VCVTPH2PS and VCVTPS2PH (to nearest even, from the immediate) give
 * exactly kh2f() and kf2h() for every input, NaNs quietened with their
 * payload kept (spyre-kbench check sweeps every fp16 value and every f32
 * rounding case).  256-bit or 512-bit vectors of f32 (GCC ends each
 * function with VZEROUPPER); AVX-512's in their masked (zeroing) forms,
 * every lane kept (KPH_HALF says why).  Whole vectors only: each
 * returns the lanes it converted, kload_half() and kstore_half() convert
 * the rest.
 */
static __attribute__((target("avx2,f16c"))) uint32_t
kload_fp16_f16c(float *restrict d, const uint8_t *restrict p, uint32_t n)
{
    uint32_t j;

    for (j = 0; j + 8 <= n; j += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(p + 2 * j));

        _mm256_storeu_ps(d + j, _mm256_cvtph_ps(h));
    }
    return j;
}

static __attribute__((target("avx2,f16c"))) uint32_t
kstore_fp16_f16c(uint8_t *restrict p, const float *restrict v, uint32_t n)
{
    uint32_t j;

    for (j = 0; j + 8 <= n; j += 8) {
        _mm_storeu_si128((__m128i *)(p + 2 * j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(v + j),
                                         _MM_FROUND_TO_NEAREST_INT));
    }
    return j;
}

static __attribute__((target("avx512f"))) uint32_t
kload_fp16_avx512(float *restrict d, const uint8_t *restrict p, uint32_t n)
{
    uint32_t j;

    for (j = 0; j + 16 <= n; j += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(p + 2 * j));

        _mm512_storeu_ps(d + j, _mm512_maskz_cvtph_ps(0xffff, h));
    }
    return j;
}

static __attribute__((target("avx512f"))) uint32_t
kstore_fp16_avx512(uint8_t *restrict p, const float *restrict v, uint32_t n)
{
    uint32_t j;

    for (j = 0; j + 16 <= n; j += 16) {
        _mm256_storeu_si256((__m256i *)(p + 2 * j),
                            _mm512_maskz_cvtps_ph(0xffff,
                                                  _mm512_loadu_ps(v + j),
                                                  _MM_FROUND_TO_NEAREST_INT));
    }
    return j;
}
#endif

/* Bytes of one lane of a value of type @t. */
static inline size_t kvsize(unsigned int t)
{
    return t == KB ? 1 : t == KI64 ? 8 : 4;
}

/*
 * @n fp16 (@bf false) or bf16 elements at @p into f32 lanes @d (@bf a
 * constant at each call: GCC -O2 does not unswitch the loop), on host
 * code path @isa (SPYRE_KISA_*).
 */
static inline KALWAYS void kload_half(float *restrict d,
                                      const uint8_t *restrict p, uint32_t n,
                                      bool bf, unsigned int isa)
{
    uint32_t j0 = 0;

#ifdef HOST_X86_64
    if (isa == SPYRE_KISA_AVX512 && !bf) {
        j0 = kload_fp16_avx512(d, p, n);
    } else if (isa == SPYRE_KISA_AVX2 && !bf) {
        j0 = kload_fp16_f16c(d, p, n);
    }
#endif
    KFOR_N(j, n - j0, {
        uint16_t h;

        memcpy(&h, p + 2 * (j0 + j), 2);
        d[j0 + j] = bf ? kbf2f(h) : kh2f(h);
    });
}

/*
 * @n f32 lanes @v to fp16 (@bf false, a constant) or bf16 elements at @p;
 * @isa as kload_half().
 */
static inline KALWAYS void kstore_half(uint8_t *restrict p,
                                       const float *restrict v, uint32_t n,
                                       bool bf, unsigned int isa)
{
    uint32_t j0 = 0;

#ifdef HOST_X86_64
    if (isa == SPYRE_KISA_AVX512 && !bf) {
        j0 = kstore_fp16_avx512(p, v, n);
    } else if (isa == SPYRE_KISA_AVX2 && !bf) {
        j0 = kstore_fp16_f16c(p, v, n);
    }
#endif
    KFOR_N(j, n - j0, {
        uint16_t h = bf ? kf2bf(v[j0 + j]) : kf2h(v[j0 + j]);

        memcpy(p + 2 * (j0 + j), &h, 2);
    });
}

/*
 * @n elements of dtype @dt at @p (guest memory) into value lanes @d;
 * @isa: the host code path (kload_half()).
 */
static inline KALWAYS void kload_run(void *restrict d,
                                     const uint8_t *restrict p,
                                     unsigned int dt, uint32_t n,
                                     unsigned int isa)
{
    switch (dt) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_INT32:
        memcpy(d, p, (size_t)n * 4);
        break;
    case SPYRE_DTYPE_INT64:
        memcpy(d, p, (size_t)n * 8);
        break;
    case SPYRE_DTYPE_FP16:
        kload_half(d, p, n, false, isa);
        break;
    case SPYRE_DTYPE_BF16:
        kload_half(d, p, n, true, isa);
        break;
    case SPYRE_DTYPE_U8: {
        int32_t *restrict di = d;

        KFOR_N(j, n, { di[j] = p[j]; });
        break;
    }
    case SPYRE_DTYPE_INT8: {
        int32_t *restrict di = d;

        KFOR_N(j, n, { di[j] = (int8_t)p[j]; });
        break;
    }
    case SPYRE_DTYPE_INT16: {
        int32_t *restrict di = d;

        KFOR_N(j, n, {
            int16_t h;

            memcpy(&h, p + 2 * j, 2);
            di[j] = h;
        });
        break;
    }
    case SPYRE_DTYPE_BOOL: {
        uint8_t *restrict db = d;

        KFOR_N(j, n, { db[j] = p[j] != 0; });
        break;
    }
    default:                    /* fp8 */
        spyre_load_fp32(d, p, dt, n);
        break;
    }
}

/*
 * @n value lanes @v to elements of dtype @dt at @p (guest memory); @isa
 * as kload_run().
 */
static inline KALWAYS void kstore_run(uint8_t *restrict p, unsigned int dt,
                                      const void *restrict v, uint32_t n,
                                      bool sat, unsigned int isa)
{
    switch (dt) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_INT32:
        memcpy(p, v, (size_t)n * 4);
        break;
    case SPYRE_DTYPE_INT64:
        memcpy(p, v, (size_t)n * 8);
        break;
    case SPYRE_DTYPE_BOOL:
        memcpy(p, v, n);
        break;
    case SPYRE_DTYPE_FP16:
        kstore_half(p, v, n, false, isa);
        break;
    case SPYRE_DTYPE_BF16:
        kstore_half(p, v, n, true, isa);
        break;
    case SPYRE_DTYPE_U8:
    case SPYRE_DTYPE_INT8: {
        const int32_t *restrict vi = v;

        KFOR_N(j, n, { p[j] = (uint8_t)vi[j]; });
        break;
    }
    case SPYRE_DTYPE_INT16: {
        const int32_t *restrict vi = v;

        KFOR_N(j, n, {
            uint16_t h = (uint16_t)vi[j];

            memcpy(p + 2 * j, &h, 2);
        });
        break;
    }
    default:                    /* fp8 */
        spyre_store_fp32(p, dt, v, n, sat ? 0 : SPYRE_CMD_F_NOSAT);
        break;
    }
}

#define KPIECES     8

/*
 * Zero if the @n offsets @off are consecutive from off[0], else not.  In
 * generic vectors (KVU64x2): GCC -O2 does not vectorise this reduction
 * by itself.
 */
static inline KALWAYS uint64_t kgap(const int64_t *off, uint32_t n)
{
    uint64_t o0 = off[0], gap = 0;
    KVU64x2 acc = { 0, 0 }, want = { o0, o0 + 1 };
    uint32_t j;

    for (j = 0; j + 2 <= n; j += 2) {
        KVU64x2 v;

        memcpy(&v, off + j, sizeof(v));
        acc |= v ^ want;
        want += 2;
    }
    for (; j < n; j++) {
        gap |= (uint64_t)off[j] ^ (o0 + j);
    }
    return gap | acc[0] | acc[1];
}

/*
 * The fast paths' mapping (LOAD, STORE, SCATTER): elements [@o0, @o0 +
 * @n) of operand @opnd through SpyreKIO.map, for writing if @write, for
 * reading too if @rw (the one piece both ways), in at most KPIECES
 * pieces: @pp[i] holds @pl[i] elements, in order, *@np of them.  Returns
 * false, having accessed nothing, if the run is not reachable that way.
 */
static inline KALWAYS bool kmap_pieces(SpyreKRun *r, unsigned int opnd,
                                       bool write, bool rw, uint64_t o0,
                                       uint32_t n, uint8_t **pp,
                                       uint32_t *pl, uint32_t *np)
{
    uint32_t done = 0;

    *np = 0;
    while (done < n) {
        uint64_t len = n - done, len2 = len;

        if (*np == KPIECES) {
            return false;
        }
        pp[*np] = r->io->map(r->io->opaque, opnd, write, o0 + done, &len);
        if (!pp[*np] ||
            (rw && r->io->map(r->io->opaque, opnd, false, o0 + done,
                              &len2) != pp[*np])) {
            return false;
        }
        pl[*np] = KMIN(KMIN(len, len2), n - done);
        done += pl[(*np)++];
    }
    return true;
}

/*
 * The fast path of a LOAD or STORE whose @n lanes are all active at
 * consecutive offsets from @o0, all in the extent: the elements
 * converted straight between guest memory (kmap_pieces()) and the value
 * lanes.  Returns false, having accessed nothing, if they are not all
 * reachable that way.
 */
static inline KALWAYS bool kmem_run(SpyreKRun *r, unsigned int opnd,
                                    unsigned int dt, bool write, bool sat,
                                    uint64_t o0, uint32_t n, void *v, size_t vs,
                                    unsigned int isa)
{
    uint8_t *pp[KPIECES];
    uint32_t pl[KPIECES], np, done, i;

    if (!kmap_pieces(r, opnd, write, false, o0, n, pp, pl, &np)) {
        return false;
    }
    for (i = 0, done = 0; i < np; done += pl[i++]) {
        if (write) {
            kstore_run(pp[i], dt, (const uint8_t *)v + done * vs, pl[i], sat,
                       isa);
        } else {
            kload_run((uint8_t *)v + done * vs, pp[i], dt, pl[i], isa);
        }
    }
    r->bytes_io += (uint64_t)n * spyre_cmd_dtype_size(dt);
    r->stores += write;
    return true;
}

/*
 * The fast path's other case: the active lanes' elements, packed in
 * @raw, copied from or to the one piece of host memory @hp that holds
 * elements @lo on.
 */
static inline KALWAYS void kmem_lanes(SpyreKRun *r, uint8_t *hp, uint64_t lo,
                                      bool write, const int64_t *off,
                                      const uint8_t *act, uint32_t n,
                                      uint8_t *raw, size_t es)
{
    uint32_t j, cnt = 0;

#define KLANES(W) do { \
        for (j = 0; j < n; j++) { \
            uint8_t *q = hp + ((uint64_t)off[j] - lo) * W; \
            \
            if (!act[j]) { \
                continue; \
            } \
            if (write) { \
                memcpy(q, raw + (size_t)j * W, W); \
            } else { \
                memcpy(raw + (size_t)j * W, q, W); \
            } \
            cnt++; \
        } \
    } while (0)
    switch (es) {
    case 1:
        KLANES(1);
        break;
    case 2:
        KLANES(2);
        break;
    case 4:
        KLANES(4);
        break;
    default:
        KLANES(8);
        break;
    }
#undef KLANES
    r->bytes_io += (uint64_t)cnt * es;
    r->stores += write && cnt;
}

/*
 * The fast path of a LOAD whose lanes are all active at the one offset
 * @o, in the extent: the element read once (SpyreKIO.map) and given to
 * every lane; an i64 result stays lazy (uniform), so that offsets
 * computed from it (a gather's row) stay affine.  Returns false, having
 * read nothing, if the element is not reachable that way.
 */
static inline KALWAYS bool kload_uniform(SpyreKRun *r, const SpyreKInst *in,
                                         uint64_t o, unsigned int isa)
{
    unsigned int dt = r->l->dtype[in->imm], T = in->type;
    uint64_t one = 1, x = 0;
    const uint8_t *q = r->io->map(r->io->opaque, in->imm, false, o, &one);
    void *d = VS(r, in->dst);

    if (!q) {
        return false;
    }
    kload_run(d, q, dt, 1, isa);
    memcpy(&x, d, kvsize(T));
    if (T == KI64) {
        r->aff[in->dst] = (SpyreKAff) { x, 0 };
        r->lazy[in->dst] = 1;
    } else {
        kfill(d, T, x, r->nl);
    }
    /* As if each lane read it (the general path's count). */
    r->bytes_io += (uint64_t)r->nl * spyre_cmd_dtype_size(dt);
    return true;
}

/* LOAD and STORE on host code path @isa (kload_half()). */
static inline KALWAYS uint32_t kmem(SpyreKRun *r, const SpyreKInst *in,
                                    uint32_t idx, unsigned int isa)
{
    const SpyreKLaunch *l = r->l;
    unsigned int opnd = in->imm, dt = l->dtype[opnd];
    unsigned int T = in->op == SPYRE_KOP_LOAD ? in->type :
                     r->p->vtype[in->c];
    size_t es = spyre_cmd_dtype_size(dt);
    bool write = in->op == SPYRE_KOP_STORE;
    const void *ov;
    const uint8_t *mask = in->b != KNONE ? ksrc(r, in, 1, in->b) : NULL;
    int64_t *off = (int64_t *)(r->tmp + 3 * (size_t)r->vl);
    uint8_t *raw = (uint8_t *)(r->tmp + 4 * (size_t)r->vl);
    uint8_t *act = r->act;
    uint32_t j, n = r->nl, bad = n, lane = n, st = SPYRE_STATUS_OK;
    uint64_t ext = l->extent[opnd];
    uint64_t lo = UINT64_MAX, gap = 0;
    uint8_t *hp = NULL;
    bool any = false;
    SpyreKAff af;

    if (in->b == KNONE && khost_le() && r->io->map &&
        kaff_src(r, in, 0, in->a, &af) && af.slope == 1 && af.base < ext &&
        ext - af.base >= n &&
        kmem_run(r, opnd, dt, write, in->mod & SPYRE_KMOD_SAT, af.base, n,
                 write ? (void *)ksrc(r, in, 2, in->c) : VS(r, in->dst),
                 kvsize(T), isa)) {
        /* Consecutive offsets in the extent (affine lanes), mapped. */
        return SPYRE_STATUS_OK;
    }
    if (!write && in->b == KNONE && khost_le() && r->io->map && n &&
        kaff_src(r, in, 0, in->a, &af) && !af.slope && af.base < ext &&
        kload_uniform(r, in, af.base, isa)) {
        /* One offset in the extent (a gather's index, a row's scalar). */
        return SPYRE_STATUS_OK;
    }
    ov = ksrc(r, in, 0, in->a);
    if (in->stype == KI64) {
        memcpy(off, ov, (size_t)n * 8);
    } else {
        for (j = 0; j < n; j++) {
            off[j] = ((const int32_t *)ov)[j];
        }
    }
    if (mask) {
        for (j = 0; j < n; j++) {
            act[j] = mask[j];
            any |= act[j];
        }
        for (j = 0; j < n; j++) {
            if (act[j] && (uint64_t)off[j] >= ext) {
                bad = j;
                break;
            }
        }
    } else if (n) {
        uint64_t o0 = off[0], oob = 0;

        memset(act, 1, n);
        any = true;
        /*
         * Are the offsets consecutive?  Then they are in bounds if the
         * run [o0, o0 + n) is, else each is checked.
         */
        gap = kgap(off, n);
        if (!gap) {
            oob = o0 >= ext || ext - o0 < n;
        } else {
            KFOR_N(i, n, { oob |= (uint64_t)off[i] >= ext; });
        }
        for (j = 0; oob && j < n; j++) {
            if ((uint64_t)off[j] >= ext) {
                bad = j;
                break;
            }
        }
    }

    /* Every active lane in the extent: the fast path, if it maps. */
    if (khost_le() && any && bad == n && r->io->map) {
        uint64_t hi = 0, len;

        if (!mask && !gap &&
            kmem_run(r, opnd, dt, write, in->mod & SPYRE_KMOD_SAT, off[0], n,
                     write ? (void *)ksrc(r, in, 2, in->c) : VS(r, in->dst),
                     kvsize(T), isa)) {
            return SPYRE_STATUS_OK;
        }
        for (j = 0; j < n; j++) {
            if (act[j]) {
                lo = KMIN(lo, (uint64_t)off[j]);
                hi = KMAX(hi, (uint64_t)off[j]);
            }
        }
        len = hi - lo + 1;
        hp = r->io->map(r->io->opaque, opnd, write, lo, &len);
        if (len < hi - lo + 1) {
            hp = NULL;
        }
    }
    if (write) {
        const void *v = ksrc(r, in, 2, in->c);

        switch (dt) {
        case SPYRE_DTYPE_FP32:
        case SPYRE_DTYPE_FP16:
        case SPYRE_DTYPE_BF16:
        case SPYRE_DTYPE_FP8_E4M3:
        case SPYRE_DTYPE_FP8_E5M2:
            spyre_store_fp32(raw, dt, v, n, (in->mod & SPYRE_KMOD_SAT) ? 0 :
                             SPYRE_CMD_F_NOSAT);
            break;
        case SPYRE_DTYPE_BOOL:
            memcpy(raw, v, n);
            break;
        case SPYRE_DTYPE_U8:
        case SPYRE_DTYPE_INT8:
            for (j = 0; j < n; j++) {
                raw[j] = ((const int32_t *)v)[j];
            }
            break;
        case SPYRE_DTYPE_INT16:
            for (j = 0; j < n; j++) {
                uint32_t x = ((const int32_t *)v)[j];

                raw[2 * j] = x;
                raw[2 * j + 1] = x >> 8;
            }
            break;
        case SPYRE_DTYPE_INT32:
            for (j = 0; j < n; j++) {
                uint32_t x = ((const int32_t *)v)[j];

                raw[4 * j] = x;
                raw[4 * j + 1] = x >> 8;
                raw[4 * j + 2] = x >> 16;
                raw[4 * j + 3] = x >> 24;
            }
            break;
        default:
            for (j = 0; j < n; j++) {
                uint64_t x = geti(v, T, j);
                unsigned int k;

                for (k = 0; k < es; k++) {
                    raw[j * es + k] = x >> (8 * k);
                }
            }
            break;
        }
    }
    if (hp) {
        kmem_lanes(r, hp, lo, write, off, act, n, raw, es);
    } else if (any && bad) {
        st = r->io->access(r->io->opaque, opnd, write, off, act, bad, raw,
                           &lane);
        if (st != SPYRE_STATUS_OK && st != SPYRE_STATUS_MMU_FAULT &&
            st != SPYRE_STATUS_DMA_ERROR) {
            return st;
        }
    }
    if (lane < bad) {
        kerr(r, idx, lane, st, (uint64_t)idx << 32 | opnd |
             (write ? SPYRE_KDETAIL_WRITE : 0), off[lane], true);
    } else if (bad < n) {
        kerr(r, idx, bad, SPYRE_STATUS_OUT_OF_BOUNDS, (uint64_t)idx << 32 |
             opnd | (write ? SPYRE_KDETAIL_WRITE : 0), off[bad], false);
    }
    if (write) {
        return SPYRE_STATUS_OK;
    }

    /* Widen, then give inactive lanes their value. */
    switch (dt) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_FP16:
    case SPYRE_DTYPE_BF16:
    case SPYRE_DTYPE_FP8_E4M3:
    case SPYRE_DTYPE_FP8_E5M2:
        spyre_load_fp32((float *)VS(r, in->dst), raw, dt, n);
        break;
    case SPYRE_DTYPE_U8:
        for (j = 0; j < n; j++) {
            ((int32_t *)VS(r, in->dst))[j] = raw[j];
        }
        break;
    case SPYRE_DTYPE_INT8:
        for (j = 0; j < n; j++) {
            ((int32_t *)VS(r, in->dst))[j] = (int8_t)raw[j];
        }
        break;
    case SPYRE_DTYPE_INT16:
        for (j = 0; j < n; j++) {
            ((int32_t *)VS(r, in->dst))[j] = (int16_t)ld16(raw + 2 * j);
        }
        break;
    case SPYRE_DTYPE_INT32:
        for (j = 0; j < n; j++) {
            ((int32_t *)VS(r, in->dst))[j] = (int32_t)ld32(raw + 4 * j);
        }
        break;
    default: {
        void *d = VS(r, in->dst);

        for (j = 0; j < n; j++) {
            const uint8_t *q = raw + j * es;

            switch (dt) {
            case SPYRE_DTYPE_U8:
                puti(d, T, j, q[0]);
                break;
            case SPYRE_DTYPE_INT8:
                puti(d, T, j, (int8_t)q[0]);
                break;
            case SPYRE_DTYPE_BOOL:
                puti(d, T, j, q[0] != 0);
                break;
            case SPYRE_DTYPE_INT16:
                puti(d, T, j, (int16_t)ld16(q));
                break;
            case SPYRE_DTYPE_INT32:
                puti(d, T, j, (int32_t)ld32(q));
                break;
            default:
                puti(d, T, j, (int64_t)ld64(q));
                break;
            }
        }
        break;
    }
    }
    if (mask) {
        void *d = VS(r, in->dst);
        const void *c = in->c != KNONE ? ksrc(r, in, 2, in->c) : NULL;
        size_t vs = T == KB ? 1 : T == KI64 ? 8 : 4;

        for (j = 0; j < n; j++) {
            if (!act[j]) {
                if (c) {
                    memcpy((uint8_t *)d + j * vs, (const uint8_t *)c + j * vs,
                           vs);
                } else {
                    memset((uint8_t *)d + j * vs, 0, vs);
                }
            }
        }
    }
    return SPYRE_STATUS_OK;
}

static inline KALWAYS void kcheck(SpyreKRun *r, const SpyreKInst *in,
                                  uint32_t idx)
{
    const uint8_t *a = ksrc(r, in, 0, in->a);
    const uint8_t *m = in->b != KNONE ? ksrc(r, in, 1, in->b) : NULL;
    uint32_t j;

    for (j = 0; j < r->nl; j++) {
        if ((!m || m[j]) && !a[j]) {
            kerr(r, idx, j, SPYRE_STATUS_ASSERT, (uint64_t)idx << 32, 0,
                 false);
            return;
        }
    }
}

/* ---- Reductions --------------------------------------------------------- */

static void acc_init(SpyreKAcc *x, unsigned int kind, unsigned int T)
{
    memset(x, 0, sizeof(*x));
    x->idx = -1;
    switch (kind) {
    case SPYRE_KRED_PROD:
        if (T == KF32) {
            x->v.f = 1.0f;
        } else {
            x->v.i = 1;
        }
        break;
    case SPYRE_KRED_MAX:
        if (T == KF32) {
            x->v.f = -INFINITY;
        } else {
            x->v.i = T == KI32 ? INT32_MIN : INT64_MIN;
        }
        break;
    case SPYRE_KRED_MIN:
        if (T == KF32) {
            x->v.f = INFINITY;
        } else {
            x->v.i = T == KI32 ? INT32_MAX : INT64_MAX;
        }
        break;
    case SPYRE_KRED_ALL:
        x->v.i = 1;
        break;
    default:
        break;
    }
}

/* Does (value, index) @x win over @y in ARGMAX (@max) or ARGMIN? */
static bool arg_wins(const SpyreKAcc *x, const SpyreKAcc *y, bool max,
                     bool flt)
{
    if (y->idx < 0) {
        return x->idx >= 0;
    }
    if (x->idx < 0) {
        return false;
    }
    if (flt) {
        bool xn = x->v.f != x->v.f, yn = y->v.f != y->v.f;

        if (xn || yn) {
            return xn && (!yn || x->idx < y->idx);
        }
        if (x->v.f == y->v.f) {
            return x->idx < y->idx;
        }
        return (x->v.f > y->v.f) == max;
    }
    if (x->v.i == y->v.i) {
        return x->idx < y->idx;
    }
    return (x->v.i > y->v.i) == max;
}

static void welford_combine(SpyreKAcc *a, const SpyreKAcc *b)
{
    float w, d, f;

    if (b->w == 0.0f) {
        return;
    }
    if (a->w == 0.0f) {
        *a = *b;
        return;
    }
    w = a->w + b->w;
    d = b->v.f - a->v.f;
    f = b->w / w;
    a->v.f = a->v.f + d * f;
    a->m2 = a->m2 + b->m2 + d * d * a->w * f;
    a->w = w;
}

/* @a = @a op @b (partials, in that order). */
static void acc_combine(SpyreKAcc *a, const SpyreKAcc *b, unsigned int kind,
                        unsigned int T, unsigned int ta)
{
    switch (kind) {
    case SPYRE_KRED_SUM:
        if (T == KF32) {
            a->v.f = a->v.f + b->v.f;
        } else {
            a->v.i = (uint64_t)a->v.i + (uint64_t)b->v.i;
        }
        break;
    case SPYRE_KRED_PROD:
        if (T == KF32) {
            a->v.f = a->v.f * b->v.f;
        } else {
            a->v.i = (uint64_t)a->v.i * (uint64_t)b->v.i;
        }
        break;
    case SPYRE_KRED_MAX:
    case SPYRE_KRED_MIN:
        if (T == KF32) {
            a->v.f = fminmax(a->v.f, b->v.f, kind == SPYRE_KRED_MAX, false);
        } else if ((b->v.i > a->v.i) == (kind == SPYRE_KRED_MAX)) {
            a->v.i = b->v.i;
        }
        break;
    case SPYRE_KRED_ARGMAX:
    case SPYRE_KRED_ARGMIN:
        if (arg_wins(b, a, kind == SPYRE_KRED_ARGMAX, ta == KF32)) {
            *a = *b;
        }
        break;
    case SPYRE_KRED_ANY:
        a->v.i |= b->v.i;
        break;
    case SPYRE_KRED_ALL:
        a->v.i &= b->v.i;
        break;
    case SPYRE_KRED_XOR_SUM:
        a->v.i ^= b->v.i;
        break;
    default:
        welford_combine(a, b);
        break;
    }
}

/*
 * Four f32 lanes and their masks, in GCC's generic vectors; eight for the
 * AVX2 path and sixteen for the AVX-512 one (the baseline would spill
 * them).
 */
typedef float KVF32x4 __attribute__((vector_size(16)));
typedef int32_t KVI32x4 __attribute__((vector_size(16)));
typedef float KVF32x8 __attribute__((vector_size(32)));
typedef int32_t KVI32x8 __attribute__((vector_size(32)));
typedef float KVF32x16 __attribute__((vector_size(64)));
typedef int32_t KVI32x16 __attribute__((vector_size(64)));

/*
 * MAX and MIN of f32 stripes through ordered keys: key(x) is x's bits
 * with the magnitude bits flipped when the sign is set, so that signed
 * integer order is fminmax()'s order of numbers (-0 below +0) and the
 * key of the larger (smaller) number is the larger (smaller) key; the
 * function is its own inverse.  A NaN lane sets its stripe's NaN mask,
 * which makes the stripe's result the canonical NaN, as fminmax() does
 * (the key a NaN leaves behind is then ignored).  Keys and masks are
 * exact, so the result is fminmax()'s, bit for bit, in any order.
 */
#define KKEY(k) ((k) ^ (((k) >> 31) & 0x7fffffff))

/*
 * The steps of kfeed16_blocks()'s MAX and MIN (@max) in vectors x (vf)
 * of keys k and NaN masks n (vi), with temporaries t and gt: KMM_IN
 * reads an accumulator (@p, as f32), KMM_STEP feeds it the lanes at @p,
 * KMM_MERGE merges accumulator (kb, nb) into (ka, na), KMM_OUT writes it
 * back.  The state stays in registers (named, not in arrays: GCC would
 * keep an array in memory).
 */
#define KMM_IN(k, n, p) do { \
        memcpy(&x, (p), sizeof(x)); \
        t = (__typeof__(t))x; \
        (k) = KKEY(t); \
        (n) = x != x; \
    } while (0)
#define KMM_STEP(k, n, p) do { \
        memcpy(&x, (p), sizeof(x)); \
        t = (__typeof__(t))x; \
        t = KKEY(t); \
        gt = max ? t > (k) : t < (k); \
        (k) = (t & gt) | ((k) & ~gt); \
        (n) |= x != x; \
    } while (0)
#define KMM_MERGE(ka, na, kb, nb) do { \
        gt = max ? (kb) > (ka) : (kb) < (ka); \
        (ka) = ((kb) & gt) | ((ka) & ~gt); \
        (na) |= (nb); \
    } while (0)
#define KMM_OUT(p, k, n) do { \
        t = KKEY(k); \
        t = ((n) & (int32_t)CANON_NAN) | (t & ~(n)); \
        memcpy((p), &t, sizeof(t)); \
    } while (0)

/* AVX-512: the 16 stripes in one vector, two accumulators. */
static inline KALWAYS uint32_t kminmax_blocks16(float *restrict acc, bool max,
                                                const float *restrict af,
                                                uint32_t j, uint32_t j1)
{
    KVF32x16 x;
    KVI32x16 t, gt, k0, n0, k1, n1;

    KMM_IN(k0, n0, acc);
    k1 = k0;
    n1 = n0;
    for (; j + 32 <= j1; j += 32) {
        KMM_STEP(k0, n0, af + j);
        KMM_STEP(k1, n1, af + j + 16);
    }
    if (j + 16 <= j1) {
        KMM_STEP(k0, n0, af + j);
        j += 16;
    }
    KMM_MERGE(k0, n0, k1, n1);
    KMM_OUT(acc, k0, n0);
    return j;
}

/* AVX2: the stripes in two vectors, two accumulators of them. */
static inline KALWAYS uint32_t kminmax_blocks8(float *restrict acc, bool max,
                                               const float *restrict af,
                                               uint32_t j, uint32_t j1)
{
    KVF32x8 x;
    KVI32x8 t, gt, k0, n0, k1, n1, k2, n2, k3, n3;

    KMM_IN(k0, n0, acc);
    KMM_IN(k1, n1, acc + 8);
    k2 = k0;
    n2 = n0;
    k3 = k1;
    n3 = n1;
    for (; j + 32 <= j1; j += 32) {
        KMM_STEP(k0, n0, af + j);
        KMM_STEP(k1, n1, af + j + 8);
        KMM_STEP(k2, n2, af + j + 16);
        KMM_STEP(k3, n3, af + j + 24);
    }
    if (j + 16 <= j1) {
        KMM_STEP(k0, n0, af + j);
        KMM_STEP(k1, n1, af + j + 8);
        j += 16;
    }
    KMM_MERGE(k0, n0, k2, n2);
    KMM_MERGE(k1, n1, k3, n3);
    KMM_OUT(acc, k0, n0);
    KMM_OUT(acc + 8, k1, n1);
    return j;
}

/* The baseline: the stripes in four vectors, one accumulator. */
static inline KALWAYS uint32_t kminmax_blocks4(float *restrict acc, bool max,
                                               const float *restrict af,
                                               uint32_t j, uint32_t j1)
{
    KVF32x4 x;
    KVI32x4 t, gt, k0, n0, k1, n1, k2, n2, k3, n3;

    KMM_IN(k0, n0, acc);
    KMM_IN(k1, n1, acc + 4);
    KMM_IN(k2, n2, acc + 8);
    KMM_IN(k3, n3, acc + 12);
    for (; j + 16 <= j1; j += 16) {
        KMM_STEP(k0, n0, af + j);
        KMM_STEP(k1, n1, af + j + 4);
        KMM_STEP(k2, n2, af + j + 8);
        KMM_STEP(k3, n3, af + j + 12);
    }
    KMM_OUT(acc, k0, n0);
    KMM_OUT(acc + 4, k1, n1);
    KMM_OUT(acc + 8, k2, n2);
    KMM_OUT(acc + 12, k3, n3);
    return j;
}

/*
 * Whole blocks of 16 lanes from @j on (below @j1) into the 16 stripe
 * accumulators @acc of f32 SUM, MAX or MIN (@kind, a constant at each
 * call): stripe i takes lane j + i of each block, in order, as the
 * scalar loop would (MAX and MIN, commutative and associative to the
 * bit, in any order: kminmax_blocks4() .. 16()); the stripes stay in vector
 * registers of the width of host code path @isa.  Returns the first lane
 * not fed.
 */
static inline KALWAYS uint32_t kfeed16_blocks(float *restrict acc,
                                              unsigned int kind,
                                              const float *restrict af,
                                              uint32_t j, uint32_t j1,
                                              unsigned int isa)
{
    KVF32x4 s0, s1, s2, s3, x0, x1, x2, x3;
    bool max = kind == SPYRE_KRED_MAX;

    if (kind != SPYRE_KRED_SUM) {
        return isa == SPYRE_KISA_AVX512 ?
               kminmax_blocks16(acc, max, af, j, j1) :
               isa == SPYRE_KISA_AVX2 ?
               kminmax_blocks8(acc, max, af, j, j1) :
               kminmax_blocks4(acc, max, af, j, j1);
    }
    if (isa == SPYRE_KISA_AVX512) {
        KVF32x16 z, y;

        memcpy(&z, acc, 64);
        for (; j + 16 <= j1; j += 16) {
            memcpy(&y, af + j, 64);
            z += y;
        }
        memcpy(acc, &z, 64);
        return j;
    }
    if (isa == SPYRE_KISA_AVX2) {
        KVF32x8 w0, w1, y0, y1;

        memcpy(&w0, acc, 32);
        memcpy(&w1, acc + 8, 32);
        for (; j + 16 <= j1; j += 16) {
            memcpy(&y0, af + j, 32);
            memcpy(&y1, af + j + 8, 32);
            w0 += y0;
            w1 += y1;
        }
        memcpy(acc, &w0, 32);
        memcpy(acc + 8, &w1, 32);
        return j;
    }
    memcpy(&s0, acc, 16);
    memcpy(&s1, acc + 4, 16);
    memcpy(&s2, acc + 8, 16);
    memcpy(&s3, acc + 12, 16);
    for (; j + 16 <= j1; j += 16) {
        const float *b = af + j;

        memcpy(&x0, b, 16);
        memcpy(&x1, b + 4, 16);
        memcpy(&x2, b + 8, 16);
        memcpy(&x3, b + 12, 16);
        s0 += x0;
        s1 += x1;
        s2 += x2;
        s3 += x3;
    }
    memcpy(acc, &s0, 16);
    memcpy(acc + 4, &s1, 16);
    memcpy(acc + 8, &s2, 16);
    memcpy(acc + 12, &s3, 16);
    return j;
}

/*
 * f32 SUM, MAX or MIN (@kind) of lanes [@j0, @j1) of one point, whose
 * reduction indices are consecutive from a multiple of 16: lane j0 + i
 * goes to stripe i % 16, so 16 accumulators take whole blocks of lanes
 * at once, each in increasing reduction index as the order requires.
 */
static inline KALWAYS void kfeed16(SpyreKRed *rd, unsigned int kind,
                                   const float *restrict af, uint32_t j0,
                                   uint32_t j1, unsigned int isa)
{
    float acc[16];
    uint32_t i, j;

    for (i = 0; i < 16; i++) {
        acc[i] = rd->stripe[i].v.f;
    }
    switch (kind) {
    case SPYRE_KRED_SUM:
        j = kfeed16_blocks(acc, SPYRE_KRED_SUM, af, j0, j1, isa);
        break;
    case SPYRE_KRED_MAX:
        j = kfeed16_blocks(acc, SPYRE_KRED_MAX, af, j0, j1, isa);
        break;
    default:
        j = kfeed16_blocks(acc, SPYRE_KRED_MIN, af, j0, j1, isa);
        break;
    }
    for (i = 0; j < j1; i++, j++) {
        acc[i] = kind == SPYRE_KRED_SUM ? acc[i] + af[j] :
                 fminmax(acc[i], af[j], kind == SPYRE_KRED_MAX, false);
    }
    for (i = 0; i < 16; i++) {
        rd->stripe[i].v.f = acc[i];
    }
}

/* Feed lanes [@j0, @j1) of REDUCE @in (one point's) to @rd's stripes. */
static inline KALWAYS void kfeed(SpyreKRun *r, const SpyreKInst *in,
                                 SpyreKRed *rd, const void *a, const void *b,
                                 const void *c, const uint8_t *m, uint32_t j0,
                                 uint32_t j1, unsigned int isa)
{
    unsigned int kind = in->mod & 0xff, T = in->type, ta = in->stype;
    uint32_t j;

    if (!m && T == KF32 && (kind == SPYRE_KRED_SUM ||
                            kind == SPYRE_KRED_MAX ||
                            kind == SPYRE_KRED_MIN)) {
        const float *af = a;

        if (j0 < j1 && !(klr(r, j0) & 15) &&
            klr(r, j1 - 1) - klr(r, j0) == j1 - 1 - j0) {
            kfeed16(rd, kind, af, j0, j1, isa);
            return;
        }

        for (j = j0; j < j1; j++) {
            SpyreKAcc *s = &rd->stripe[klr(r, j) & 15];

            s->v.f = kind == SPYRE_KRED_SUM ? s->v.f + af[j] :
                     fminmax(s->v.f, af[j], kind == SPYRE_KRED_MAX, false);
        }
        return;
    }
    for (j = j0; j < j1; j++) {
        SpyreKAcc *s = &rd->stripe[klr(r, j) & 15], x = { .idx = -1 };

        if (m && !m[j]) {
            continue;
        }
        switch (kind) {
        case SPYRE_KRED_WELFORD: {
            float v = ((const float *)a)[j], d;

            s->w = s->w + 1.0f;
            d = v - s->v.f;
            s->v.f = s->v.f + d / s->w;
            s->m2 = s->m2 + d * (v - s->v.f);
            continue;
        }
        case SPYRE_KRED_WELFORD_COMBINE:
            x.v.f = ((const float *)a)[j];
            x.m2 = ((const float *)b)[j];
            x.w = ((const float *)c)[j];
            break;
        case SPYRE_KRED_ARGMAX:
        case SPYRE_KRED_ARGMIN:
            if (ta == KF32) {
                x.v.f = ((const float *)a)[j];
            } else {
                x.v.i = geti(a, ta, j);
            }
            x.idx = klr(r, j);
            break;
        default:
            if (T == KF32) {
                x.v.f = ((const float *)a)[j];
            } else {
                x.v.i = geti(a, T, j);
            }
            break;
        }
        acc_combine(s, &x, kind, T, ta);
    }
}

/* @rd's stripes onto its stack (kblock()), then merged by level. */
static void kblock_push(SpyreKRed *rd, const SpyreKAcc *top,
                        unsigned int kind, unsigned int T, unsigned int ta)
{
    rd->stack[rd->n] = *top;
    rd->level[rd->n++] = 0;
    while (rd->n >= 2 && rd->level[rd->n - 1] == rd->level[rd->n - 2]) {
        acc_combine(&rd->stack[rd->n - 2], &rd->stack[rd->n - 1], kind, T,
                    ta);
        rd->level[rd->n - 2]++;
        rd->n--;
    }
}

/*
 * kblock() of f32 SUM, MAX or MIN, whose stripes hold only v.f (the other
 * fields stay as acc_init() set them): the same tree on the floats; MAX
 * and MIN, whose order does not matter, through KKEY's keys.
 */
static void kblock_f32(SpyreKRed *rd, unsigned int kind, unsigned int ta)
{
    bool sum = kind == SPYRE_KRED_SUM, max = kind == SPYRE_KRED_MAX;
    float f[16], init = sum ? 0.0f : max ? -INFINITY : INFINITY;
    SpyreKAcc top;
    unsigned int w, i;

    for (i = 0; i < 16; i++) {
        f[i] = rd->stripe[i].v.f;
    }
    if (sum) {
        for (w = 16; w > 1; w /= 2) {
            for (i = 0; i < w / 2; i++) {
                f[i] = f[2 * i] + f[2 * i + 1];
            }
        }
    } else {
        int32_t k, best = 0;
        uint32_t nan = 0;

        for (i = 0; i < 16; i++) {
            k = (int32_t)f2u(f[i]);
            k = KKEY(k);
            nan |= kmask(f[i] != f[i]);
            best = !i || (max ? k > best : k < best) ? k : best;
        }
        best = KKEY(best);
        f[0] = u2f(ksel(nan, CANON_NAN, (uint32_t)best));
    }
    top = rd->stripe[0];
    top.v.f = f[0];
    kblock_push(rd, &top, kind, KF32, ta);
    for (i = 0; i < 16; i++) {
        rd->stripe[i].v.f = init;
    }
}

/* A block of @rd ended: its stripes by the pairwise tree, onto the stack. */
static void kblock(SpyreKRed *rd, unsigned int kind, unsigned int T,
                   unsigned int ta)
{
    unsigned int w, i;

    if (T == KF32 && (kind == SPYRE_KRED_SUM || kind == SPYRE_KRED_MAX ||
                      kind == SPYRE_KRED_MIN)) {
        kblock_f32(rd, kind, ta);
        return;
    }
    for (w = 16; w > 1; w /= 2) {
        for (i = 0; i < w / 2; i++) {
            acc_combine(&rd->stripe[2 * i], &rd->stripe[2 * i + 1], kind, T,
                        ta);
            if (i) {
                rd->stripe[i] = rd->stripe[2 * i];
            }
        }
    }
    kblock_push(rd, &rd->stripe[0], kind, T, ta);
    for (i = 0; i < 16; i++) {
        acc_init(&rd->stripe[i], kind, T);
    }
}

/* The result of @rd: the stack's partials from the last back. */
static SpyreKAcc kresult(SpyreKRed *rd, unsigned int kind, unsigned int T,
                         unsigned int ta)
{
    SpyreKAcc res;
    int i;

    if (!rd->n) {
        acc_init(&res, kind, T);
        return res;
    }
    res = rd->stack[rd->n - 1];
    for (i = (int)rd->n - 2; i >= 0; i--) {
        SpyreKAcc t = rd->stack[i];

        acc_combine(&t, &res, kind, T, ta);
        res = t;
    }
    return res;
}

/* ---- Part 2: SCATTER, SCAN, RAND ---------------------------------------- */

/* One element of dtype @dt at @q as a value of type @T (a lane's bits). */
static uint64_t kelem_get(const uint8_t *q, unsigned int dt, unsigned int T)
{
    uint64_t v = 0;
    float f;

    switch (dt) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_FP16:
    case SPYRE_DTYPE_BF16:
    case SPYRE_DTYPE_FP8_E4M3:
    case SPYRE_DTYPE_FP8_E5M2:
        spyre_load_fp32(&f, q, dt, 1);
        memcpy(&v, &f, 4);
        return v;
    case SPYRE_DTYPE_U8:
        puti(&v, T, 0, q[0]);
        break;
    case SPYRE_DTYPE_INT8:
        puti(&v, T, 0, (int8_t)q[0]);
        break;
    case SPYRE_DTYPE_BOOL:
        puti(&v, T, 0, q[0] != 0);
        break;
    case SPYRE_DTYPE_INT16:
        puti(&v, T, 0, (int16_t)ld16(q));
        break;
    case SPYRE_DTYPE_INT32:
        puti(&v, T, 0, (int32_t)ld32(q));
        break;
    default:
        puti(&v, T, 0, (int64_t)ld64(q));
        break;
    }
    return v;
}

/* Store lane bits @v of type @T to the element of dtype @dt at @q. */
static void kelem_put(uint8_t *q, unsigned int dt, unsigned int T, uint64_t v,
                      bool sat)
{
    size_t es = spyre_cmd_dtype_size(dt), k;
    uint64_t x;
    float f;

    switch (dt) {
    case SPYRE_DTYPE_FP32:
    case SPYRE_DTYPE_FP16:
    case SPYRE_DTYPE_BF16:
    case SPYRE_DTYPE_FP8_E4M3:
    case SPYRE_DTYPE_FP8_E5M2:
        memcpy(&f, &v, 4);
        spyre_store_fp32(q, dt, &f, 1, sat ? 0 : SPYRE_CMD_F_NOSAT);
        return;
    case SPYRE_DTYPE_BOOL:
        q[0] = (uint8_t)v != 0;
        return;
    default:
        x = geti(&v, T, 0);
        for (k = 0; k < es; k++) {
            q[k] = x >> (8 * k);
        }
        return;
    }
}

/* @old + @add in type @T (f32 rounded once, integers wrapping). */
static uint64_t kelem_add(uint64_t old, uint64_t add, unsigned int T)
{
    uint64_t v = 0;

    if (T == KF32) {
        float a, b;

        memcpy(&a, &old, 4);
        memcpy(&b, &add, 4);
        a = kcanon(a + b);
        memcpy(&v, &a, 4);
        return v;
    }
    puti(&v, T, 0, (int64_t)((uint64_t)geti(&old, T, 0) +
                             (uint64_t)geti(&add, T, 0)));
    return v;
}

/*
 * SCATTER: the active lanes' elements written (or accumulated) one lane
 * at a time in lane order, which is the sequential order here: a
 * vector's lanes are points, or (point, reduction index) pairs, in
 * increasing order, and a kernel with a SCATTER runs its tiles in order
 * on one core (spyre-kexec.c).  Elements are reached through
 * SpyreKIO.map, one piece per run of consecutive offsets (the
 * translations are kept between calls), else one lane at a time
 * through SpyreKIO.access.  Returns a status that ends the run, or
 * SPYRE_STATUS_OK (a failure then recorded with kerr()).
 */
/*
 * The fast path of a SCATTER whose @n lanes are all active at
 * consecutive offsets from @o0, all in the extent (a row): distinct
 * elements, so the sequential order is the elementwise one; the run
 * written (STORE) or read, added and written (ADD of f32 lanes: the same
 * additions, rounded once each, as kelem_add()) straight through
 * kmap_pieces().  Returns false, having accessed nothing, if it cannot.
 */
static bool kscatter_run(SpyreKRun *r, const SpyreKInst *in, uint64_t o0,
                         uint32_t n, unsigned int isa)
{
    unsigned int opnd = in->imm, dt = r->l->dtype[opnd];
    unsigned int T = r->p->vtype[in->c];
    bool add = (in->mod & 0xff) == SPYRE_KSCAT_ADD;
    bool sat = in->mod & SPYRE_KMOD_SAT;
    const uint8_t *val;
    float *restrict sum = (float *)(r->tmp + 3 * (size_t)r->vl);
    uint8_t *pp[KPIECES];
    uint32_t pl[KPIECES], np, done, i;
    size_t vs = kvsize(T);

    /* ADD also reads: read rights too */
    if ((add && T != KF32) ||
        !kmap_pieces(r, opnd, true, add, o0, n, pp, pl, &np)) {
        return false;
    }
    val = ksrc(r, in, 2, in->c);
    for (i = 0, done = 0; i < np; done += pl[i++]) {
        if (add) {
            const float *restrict v = (const float *)val + done;
            size_t j;

            kload_run(sum, pp[i], dt, pl[i], isa);
            KFOR(j, pl[i], { sum[j] = sum[j] + v[j]; });
            kcanon_lanes(sum, pl[i]);
            kstore_run(pp[i], dt, sum, pl[i], sat, isa);
        } else {
            kstore_run(pp[i], dt, val + done * vs, pl[i], sat, isa);
        }
    }
    r->bytes_io += (uint64_t)n * spyre_cmd_dtype_size(dt) * (add ? 2 : 1);
    r->stores++;
    return true;
}

static uint32_t kscatter(SpyreKRun *r, const SpyreKInst *in, uint32_t idx,
                         unsigned int isa)
{
    const SpyreKLaunch *l = r->l;
    unsigned int opnd = in->imm, dt = l->dtype[opnd];
    unsigned int T = r->p->vtype[in->c];
    size_t es = spyre_cmd_dtype_size(dt), vs = kvsize(T);
    bool add = (in->mod & 0xff) == SPYRE_KSCAT_ADD;
    bool sat = in->mod & SPYRE_KMOD_SAT;
    const void *ov;
    const uint8_t *mask, *val;
    uint64_t ext = l->extent[opnd], clo = 0, chi = 0, cnt = 0;
    uint32_t j, k, n = r->nl;
    uint8_t *cp = NULL;
    uint64_t detail = (uint64_t)idx << 32 | opnd | SPYRE_KDETAIL_WRITE;
    SpyreKAff af;

    if (in->b == KNONE && khost_le() && r->io->map && n &&
        kaff_src(r, in, 0, in->a, &af) && af.slope == 1 && af.base < ext &&
        ext - af.base >= n && kscatter_run(r, in, af.base, n, isa)) {
        return SPYRE_STATUS_OK;
    }
    ov = ksrc(r, in, 0, in->a);
    mask = in->b != KNONE ? ksrc(r, in, 1, in->b) : NULL;
    val = ksrc(r, in, 2, in->c);
    for (j = 0; j < n; j++) {
        int64_t o = in->stype == KI64 ? ((const int64_t *)ov)[j] :
                    ((const int32_t *)ov)[j];
        uint64_t v = 0, old;
        uint8_t *q = NULL, buf[8];

        if (mask && !mask[j]) {
            continue;
        }
        if ((uint64_t)o >= ext) {
            kerr(r, idx, j, SPYRE_STATUS_OUT_OF_BOUNDS, detail, o, false);
            break;
        }
        memcpy(&v, val + j * vs, vs);
        if (khost_le() && r->io->map &&
            ((uint64_t)o < clo || (uint64_t)o >= chi)) {
            /* A new piece, as long as the run of offsets from here. */
            uint64_t len = 1, len2;

            for (k = j + 1; k < n && (!mask || mask[k]); k++) {
                int64_t ok = in->stype == KI64 ? ((const int64_t *)ov)[k] :
                             ((const int32_t *)ov)[k];

                if (ok != o + (int64_t)len || (uint64_t)ok >= ext) {
                    break;
                }
                len++;
            }
            len2 = len;
            cp = r->io->map(r->io->opaque, opnd, true, o, &len);
            if (cp && add &&
                r->io->map(r->io->opaque, opnd, false, o, &len2) != cp) {
                cp = NULL;      /* ADD also reads: read rights too */
            }
            clo = o;
            chi = cp ? o + KMIN(len, len2) : 0;
        }
        if (cp && (uint64_t)o >= clo && (uint64_t)o < chi) {
            q = cp + ((uint64_t)o - clo) * es;
        }
        if (q) {
            if (add) {
                old = kelem_get(q, dt, T);
                v = kelem_add(old, v, T);
            }
            kelem_put(q, dt, T, v, sat);
        } else {
            uint8_t one = 1;
            uint32_t lane = 0, st = SPYRE_STATUS_OK;

            if (add) {
                st = r->io->access(r->io->opaque, opnd, false, &o, &one, 1,
                                   buf, &lane);
                if (st == SPYRE_STATUS_OK) {
                    old = kelem_get(buf, dt, T);
                    v = kelem_add(old, v, T);
                }
            }
            if (st == SPYRE_STATUS_OK) {
                kelem_put(buf, dt, T, v, sat);
                st = r->io->access(r->io->opaque, opnd, true, &o, &one, 1,
                                   buf, &lane);
            }
            if (st == SPYRE_STATUS_MMU_FAULT || st == SPYRE_STATUS_DMA_ERROR) {
                kerr(r, idx, j, st, detail, o, true);
                break;
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
        cnt++;
    }
    r->bytes_io += cnt * es * (add ? 2 : 1);
    r->stores += cnt != 0;
    return SPYRE_STATUS_OK;
}

/*
 * SCAN over the pass's lanes in order: a point's reduction indices come
 * in increasing order (in one vector, or in consecutive vectors of that
 * point alone), so one running value per SCAN, restarted at reduction
 * index 0, gives every lane the combination of its point's indices 0..r
 * taken left to right.
 */
/* Lane @j of SCAN's result from running value @s (its identity if none). */
static void kscan_put(const SpyreKAcc *s, unsigned int kind, unsigned int T,
                      void *d, uint32_t j)
{
    bool none = s->idx < 0;
    int64_t e;

    if (kind == SPYRE_KRED_ARGMAX || kind == SPYRE_KRED_ARGMIN) {
        ((int64_t *)d)[j] = none ? 0 : s->idx;
        return;
    }
    if (T == KF32) {
        ((float *)d)[j] = !none ? kcanon(s->v.f) :
            kind == SPYRE_KRED_SUM ? 0.0f : kind == SPYRE_KRED_PROD ? 1.0f :
            kind == SPYRE_KRED_MAX ? -INFINITY : INFINITY;
        return;
    }
    e = kind == SPYRE_KRED_SUM ? 0 : kind == SPYRE_KRED_PROD ? 1 :
        kind == SPYRE_KRED_MAX ? (T == KI32 ? INT32_MIN : INT64_MIN) :
        (T == KI32 ? INT32_MAX : INT64_MAX);
    puti(d, T, j, none ? e : s->v.i);
}

static void kscan(SpyreKRun *r, const SpyreKInst *in)
{
    SpyreKAcc *s = &r->scan[in->red];
    unsigned int kind = in->mod & 0xff, T = in->type, ta = in->stype;
    const void *a = ksrc(r, in, 0, in->a);
    const uint8_t *m = in->imm != KNONE ? ksrc(r, in, 3, in->imm) : NULL;
    void *d = VS(r, in->dst);
    bool max = kind == SPYRE_KRED_MAX || kind == SPYRE_KRED_ARGMAX;
    uint32_t j;

    for (j = 0; j < r->nl; j++) {
        if (klr(r, j) == 0) {
            s->idx = -1;        /* a point's first index: nothing yet */
        }
        if (!m || m[j]) {
            bool first = s->idx < 0, take = true;

            if (ta == KF32) {
                float x = ((const float *)a)[j], c = s->v.f;

                if (kind == SPYRE_KRED_SUM) {
                    s->v.f = first ? x : c + x;
                } else if (kind == SPYRE_KRED_PROD) {
                    s->v.f = first ? x : c * x;
                } else {        /* torch.cummax's rule: a NaN sticks */
                    take = first || isnan(x) ||
                           (!isnan(c) && (max ? x >= c : x <= c));
                    s->v.f = take ? x : c;
                }
            } else {
                int64_t x = geti(a, ta, j), c = s->v.i;

                if (kind == SPYRE_KRED_SUM) {
                    x = first ? x : (int64_t)((uint64_t)c + (uint64_t)x);
                } else if (kind == SPYRE_KRED_PROD) {
                    x = first ? x : (int64_t)((uint64_t)c * (uint64_t)x);
                } else {
                    take = first || (max ? x >= c : x <= c);
                    x = take ? x : c;
                }
                s->v.i = ta == KI32 ? (int32_t)x : x;
            }
            if (take) {
                s->idx = klr(r, j);
            }
        }
        kscan_put(s, kind, T, d, j);
    }
}

/* Philox4x32's multipliers and key bumps. */
#define KPH_M0      0xd2511f53u
#define KPH_M1      0xcd9e8d57u
#define KPH_W0      0x9e3779b9u
#define KPH_W1      0xbb67ae85u

void spyre_kernel_philox(uint32_t x[4], uint32_t k0, uint32_t k1)
{
    unsigned int i;

    for (i = 0; i < 10; i++) {
        uint64_t p0 = (uint64_t)KPH_M0 * x[0];
        uint64_t p1 = (uint64_t)KPH_M1 * x[2];
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x[1] ^ k0;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x[3] ^ k1;

        x[1] = (uint32_t)p1;
        x[3] = (uint32_t)p0;
        x[0] = y0;
        x[2] = y2;
        k0 += KPH_W0;
        k1 += KPH_W1;
    }
}

/* Philox blocks krand() computes at once (a multiple of KBLK). */
#define KRAND_BLK   64

#ifdef HOST_X86_64
#define KPH_AVX512  "avx512f,avx512dq,avx512vl,avx2"

/*
 * One Philox round on 8 blocks in 32-bit lanes: the high and low halves
 * of the 32 x 32 -> 64-bit products from PMULUDQ on the even lanes and
 * on the odd lanes shifted down, blended back into place.
 */
static inline __attribute__((always_inline, target("avx2"))) void
kph_round_avx2(__m256i *x0, __m256i *x1, __m256i *x2, __m256i *x3,
               __m256i k0, __m256i k1)
{
    const __m256i m0 = _mm256_set1_epi32((int)KPH_M0);
    const __m256i m1 = _mm256_set1_epi32((int)KPH_M1);
    __m256i e0 = _mm256_mul_epu32(*x0, m0);
    __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(*x0, 32), m0);
    __m256i e1 = _mm256_mul_epu32(*x2, m1);
    __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(*x2, 32), m1);
    __m256i h0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xaa);
    __m256i h1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xaa);

    *x0 = _mm256_xor_si256(_mm256_xor_si256(h1, *x1), k0);
    *x2 = _mm256_xor_si256(_mm256_xor_si256(h0, *x3), k1);
    *x1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xaa);
    *x3 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xaa);
}

/*
 * Words x0..x3 of 8 blocks (a lane each) stored in element order at @w:
 * block j's four words at w[4 j .. 4 j + 3].
 */
static inline __attribute__((always_inline, target("avx2"))) void
kph_words_avx2(uint32_t *w, __m256i x0, __m256i x1, __m256i x2, __m256i x3)
{
    __m256i t0 = _mm256_unpacklo_epi32(x0, x1);
    __m256i t1 = _mm256_unpackhi_epi32(x0, x1);
    __m256i t2 = _mm256_unpacklo_epi32(x2, x3);
    __m256i t3 = _mm256_unpackhi_epi32(x2, x3);
    __m256i r0 = _mm256_unpacklo_epi64(t0, t2);   /* blocks 0, 4 */
    __m256i r1 = _mm256_unpackhi_epi64(t0, t2);   /* blocks 1, 5 */
    __m256i r2 = _mm256_unpacklo_epi64(t1, t3);   /* blocks 2, 6 */
    __m256i r3 = _mm256_unpackhi_epi64(t1, t3);   /* blocks 3, 7 */

    _mm256_storeu_si256((__m256i *)w, _mm256_permute2x128_si256(r0, r1, 0x20));
    _mm256_storeu_si256((__m256i *)(w + 8),
                        _mm256_permute2x128_si256(r2, r3, 0x20));
    _mm256_storeu_si256((__m256i *)(w + 16),
                        _mm256_permute2x128_si256(r0, r1, 0x31));
    _mm256_storeu_si256((__m256i *)(w + 24),
                        _mm256_permute2x128_si256(r2, r3, 0x31));
}

/* kphilox_lanes() with 256-bit vectors, 8 blocks at a time. */
static __attribute__((target("avx2"))) void
kphilox_avx2(uint32_t x[4][KRAND_BLK], const uint32_t *k0,
             const uint32_t *k1, uint32_t n, uint32_t *w)
{
    const __m256i w0 = _mm256_set1_epi32((int)KPH_W0);
    const __m256i w1 = _mm256_set1_epi32((int)KPH_W1);
    uint32_t j, i;

    for (j = 0; j < (n + KBLK - 1) / KBLK * KBLK; j += 8) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(x[0] + j));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(x[1] + j));
        __m256i x2 = _mm256_loadu_si256((const __m256i *)(x[2] + j));
        __m256i x3 = _mm256_loadu_si256((const __m256i *)(x[3] + j));
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(k0 + j));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(k1 + j));

        for (i = 0; i < 10; i++) {
            kph_round_avx2(&x0, &x1, &x2, &x3, a0, a1);
            a0 = _mm256_add_epi32(a0, w0);
            a1 = _mm256_add_epi32(a1, w1);
        }
        if (w) {
            kph_words_avx2(w + 4 * j, x0, x1, x2, x3);
        } else {
            _mm256_storeu_si256((__m256i *)(x[0] + j), x0);
            _mm256_storeu_si256((__m256i *)(x[1] + j), x1);
            _mm256_storeu_si256((__m256i *)(x[2] + j), x2);
            _mm256_storeu_si256((__m256i *)(x[3] + j), x3);
        }
    }
}

/*
 * One Philox round on 16 blocks in 32-bit lanes, key words @k0, @k1:
 * kph_round_avx2()'s products, their halves put in place by masked
 * shuffles (one operation each).
 */
static inline __attribute__((always_inline, target(KPH_AVX512))) void
kph_round_avx512(__m512i *x0, __m512i *x1, __m512i *x2, __m512i *x3,
                 __m512i k0, __m512i k1)
{
    const __m512i m0 = _mm512_set1_epi32((int)KPH_M0);
    const __m512i m1 = _mm512_set1_epi32((int)KPH_M1);
    const __mmask16 odd = 0xaaaa, even = 0x5555;
    __m512i e0 = _mm512_maskz_mul_epu32(0xff, *x0, m0);
    __m512i o0 = _mm512_maskz_mul_epu32(0xff,
                                        _mm512_maskz_srli_epi64(0xff, *x0, 32),
                                        m0);
    __m512i e1 = _mm512_maskz_mul_epu32(0xff, *x2, m1);
    __m512i o1 = _mm512_maskz_mul_epu32(0xff,
                                        _mm512_maskz_srli_epi64(0xff, *x2, 32),
                                        m1);
    /* high halves: odd lanes' in place, even lanes' from lane + 1 */
    __m512i h0 = _mm512_mask_shuffle_epi32(o0, even, e0, _MM_PERM_DDBB);
    __m512i h1 = _mm512_mask_shuffle_epi32(o1, even, e1, _MM_PERM_DDBB);

    *x0 = _mm512_ternarylogic_epi32(h1, *x1, k0, 0x96);
    *x2 = _mm512_ternarylogic_epi32(h0, *x3, k1, 0x96);
    /* low halves: even lanes' in place, odd lanes' from lane - 1 */
    *x1 = _mm512_mask_shuffle_epi32(e1, odd, o1, _MM_PERM_CCAA);
    *x3 = _mm512_mask_shuffle_epi32(e0, odd, o0, _MM_PERM_CCAA);
}

/*
 * Half @i of a 512-bit vector.  The masked (zeroing) forms here and in
 * kph_round_avx512(), all lanes kept: GCC 12's unmasked ones pass an
 * "undefined" vector that -Wmaybe-uninitialized reports (GCC bug 105593).
 */
#define KPH_HALF(v, i)  _mm512_maskz_extracti64x4_epi64(0xf, (v), (i))

/* Block words x0..x3 of 16 lanes into @w in element order. */
static inline __attribute__((always_inline, target(KPH_AVX512))) void
kph_words_avx512(uint32_t *w, __m512i x0, __m512i x1, __m512i x2,
                 __m512i x3)
{
    kph_words_avx2(w, KPH_HALF(x0, 0), KPH_HALF(x1, 0), KPH_HALF(x2, 0),
                   KPH_HALF(x3, 0));
    kph_words_avx2(w + 32, KPH_HALF(x0, 1), KPH_HALF(x1, 1), KPH_HALF(x2, 1),
                   KPH_HALF(x3, 1));
}

/*
 * kphilox_avx2() with 512-bit vectors, 32 blocks at a time (two
 * independent groups of 16 interleaved, rounds unrolled: the products'
 * latency overlaps), the last 16 alone.
 */
static __attribute__((target(KPH_AVX512))) void
kphilox_avx512(uint32_t x[4][KRAND_BLK], const uint32_t *k0,
               const uint32_t *k1, uint32_t n, uint32_t *w)
{
    const __m512i w0 = _mm512_set1_epi32((int)KPH_W0);
    const __m512i w1 = _mm512_set1_epi32((int)KPH_W1);
    uint32_t j, i;

    for (j = 0; j + 16 < n; j += 32) {
        __m512i a0 = _mm512_loadu_si512(x[0] + j);
        __m512i a1 = _mm512_loadu_si512(x[1] + j);
        __m512i a2 = _mm512_loadu_si512(x[2] + j);
        __m512i a3 = _mm512_loadu_si512(x[3] + j);
        __m512i b0 = _mm512_loadu_si512(x[0] + j + 16);
        __m512i b1 = _mm512_loadu_si512(x[1] + j + 16);
        __m512i b2 = _mm512_loadu_si512(x[2] + j + 16);
        __m512i b3 = _mm512_loadu_si512(x[3] + j + 16);
        __m512i ka0 = _mm512_loadu_si512(k0 + j);
        __m512i ka1 = _mm512_loadu_si512(k1 + j);
        __m512i kb0 = _mm512_loadu_si512(k0 + j + 16);
        __m512i kb1 = _mm512_loadu_si512(k1 + j + 16);

#pragma GCC unroll 10
        for (i = 0; i < 10; i++) {
            kph_round_avx512(&a0, &a1, &a2, &a3, ka0, ka1);
            kph_round_avx512(&b0, &b1, &b2, &b3, kb0, kb1);
            ka0 = _mm512_add_epi32(ka0, w0);
            ka1 = _mm512_add_epi32(ka1, w1);
            kb0 = _mm512_add_epi32(kb0, w0);
            kb1 = _mm512_add_epi32(kb1, w1);
        }
        if (w) {
            kph_words_avx512(w + 4 * j, a0, a1, a2, a3);
            kph_words_avx512(w + 4 * j + 64, b0, b1, b2, b3);
        } else {
            _mm512_storeu_si512(x[0] + j, a0);
            _mm512_storeu_si512(x[1] + j, a1);
            _mm512_storeu_si512(x[2] + j, a2);
            _mm512_storeu_si512(x[3] + j, a3);
            _mm512_storeu_si512(x[0] + j + 16, b0);
            _mm512_storeu_si512(x[1] + j + 16, b1);
            _mm512_storeu_si512(x[2] + j + 16, b2);
            _mm512_storeu_si512(x[3] + j + 16, b3);
        }
    }
    if (j < n) {
        __m512i a0 = _mm512_loadu_si512(x[0] + j);
        __m512i a1 = _mm512_loadu_si512(x[1] + j);
        __m512i a2 = _mm512_loadu_si512(x[2] + j);
        __m512i a3 = _mm512_loadu_si512(x[3] + j);
        __m512i ka0 = _mm512_loadu_si512(k0 + j);
        __m512i ka1 = _mm512_loadu_si512(k1 + j);

        for (i = 0; i < 10; i++) {
            kph_round_avx512(&a0, &a1, &a2, &a3, ka0, ka1);
            ka0 = _mm512_add_epi32(ka0, w0);
            ka1 = _mm512_add_epi32(ka1, w1);
        }
        if (w) {
            kph_words_avx512(w + 4 * j, a0, a1, a2, a3);
        } else {
            _mm512_storeu_si512(x[0] + j, a0);
            _mm512_storeu_si512(x[1] + j, a1);
            _mm512_storeu_si512(x[2] + j, a2);
            _mm512_storeu_si512(x[3] + j, a3);
        }
    }
}
#endif

/*
 * spyre_kernel_philox() over blocks j < @n (<= KRAND_BLK) at once: word
 * i of block j in @x[i][j], its key (@k0[j], @k1[j]); with @w, the
 * words go to @w in element order instead (block j's word i at w[4 j +
 * i]; @x is then clobbered).  Lanes up to n rounded up to KBLK are
 * computed too (KFOR).  On host code path @isa: the AVX2 and AVX-512
 * paths run 8 and 16 blocks in vector lanes (integer operations: the
 * same words as the generic loop's).
 */
static inline KALWAYS void kphilox_lanes(uint32_t x[4][KRAND_BLK],
                                         const uint32_t *restrict k0,
                                         const uint32_t *restrict k1,
                                         uint32_t n, uint32_t *restrict w,
                                         unsigned int isa)
{
    uint32_t *restrict x0 = x[0], *restrict x1 = x[1];
    uint32_t *restrict x2 = x[2], *restrict x3 = x[3];
    unsigned int i;
    size_t j;

#ifdef HOST_X86_64
    if (isa == SPYRE_KISA_AVX512) {
        kphilox_avx512(x, k0, k1, n, w);
        return;
    }
    if (isa == SPYRE_KISA_AVX2) {
        kphilox_avx2(x, k0, k1, n, w);
        return;
    }
#else
    (void)isa;
#endif
    for (i = 0; i < 10; i++) {
        /* The keys of round i: i bumps of each word (mod 2^32). */
        uint32_t a0 = i * KPH_W0, a1 = i * KPH_W1;

        KFOR(j, n, {
            uint64_t p0 = (uint64_t)KPH_M0 * x0[j];
            uint64_t p1 = (uint64_t)KPH_M1 * x2[j];
            uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1[j] ^ (k0[j] + a0);
            uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3[j] ^ (k1[j] + a1);

            x1[j] = (uint32_t)p1;
            x3[j] = (uint32_t)p0;
            x0[j] = y0;
            x2[j] = y2;
        });
    }
    if (w) {
        KFOR(j, n, {
            w[4 * j] = x0[j];
            w[4 * j + 1] = x1[j];
            w[4 * j + 2] = x2[j];
            w[4 * j + 3] = x3[j];
        });
    }
}

/* A 32-bit word as UNIFORM's f32 in [0, 1) (24 bits, exact). */
static inline float krand_unit(uint32_t w)
{
    return (float)(int32_t)(w >> 8) / 16777216.0f;
}

/* A 32-bit word as NORMAL's u1, an f32 in (0, 1] (24 bits, exact). */
static inline float krand_unit1(uint32_t w)
{
    return (float)(int32_t)((w >> 8) + 1) / 16777216.0f;
}

/*
 * RAND's words for lanes [0, n) when seed and offset are uniform and the
 * element indices consecutive from @e0 (affine lanes): each Philox
 * block (4 elements) computed once, its words given out in element
 * order, into @d (NORMAL: its two (u1, u2) pairs through
 * spyre_kmath_normal() a chunk at a time).
 */
static inline KALWAYS void krand_run(unsigned int kind, uint64_t seed,
                                     uint64_t offset, uint64_t e0,
                                     uint32_t n, float *restrict d,
                                     unsigned int isa)
{
    const unsigned int epb = 4;
    uint64_t b0 = e0 / epb;
    uint32_t ph = e0 % epb, nb = (ph + n + epb - 1) / epb, c;
    uint32_t x[4][KRAND_BLK], k0[KRAND_BLK], k1[KRAND_BLK];
    uint32_t w[4 * KRAND_BLK];
    float f[4 * KRAND_BLK], g[4 * KRAND_BLK];
    size_t j;

    KFOR(j, KRAND_BLK, {
        k0[j] = (uint32_t)seed;
        k1[j] = (uint32_t)(seed >> 32);
    });
    for (c = 0; c < nb; c += KRAND_BLK) {
        uint32_t m = KMIN(KRAND_BLK, nb - c);
        /* Elements [v0, v1) of this chunk's words are lanes v - ph. */
        uint32_t v0 = KMAX(c * epb, ph) - ph;
        uint32_t v1 = KMIN((c + m) * epb - ph, n);
        /* Lane l is element ph + l: element (ph + l - c epb) of f, w. */
        uint32_t o = ph + v0 - c * epb;

        KFOR(j, m, {
            uint64_t blk = b0 + c + j;

            x[0][j] = (uint32_t)blk;
            x[1][j] = (uint32_t)(blk >> 32);
            x[2][j] = (uint32_t)offset;
            x[3][j] = (uint32_t)(offset >> 32);
        });
        /* The words in element order, from element c * epb. */
        kphilox_lanes(x, k0, k1, m, w, isa);
        if (kind == SPYRE_KRAND_NORMAL) {
            float *u2c = f + 2 * KRAND_BLK;

            KFOR(j, 2 * m, {
                f[j] = krand_unit1(w[2 * j]);
                u2c[j] = krand_unit(w[2 * j + 1]);
            });
            spyre_kmath_normal(isa, g, f, u2c, 2 * m);
            memcpy(d + v0, g + o, (size_t)(v1 - v0) * 4);
        } else if (kind == SPYRE_KRAND_BITS) {
            memcpy(d + v0, w + o, (size_t)(v1 - v0) * 4);
        } else {
            KFOR(j, 4 * m, { f[j] = krand_unit(w[j]); });
            memcpy(d + v0, f + o, (size_t)(v1 - v0) * 4);
        }
    }
}

/*
 * RAND: element index n (source c) of (seed a, offset b), from block n /
 * 4.  BITS and UNIFORM take its word n % 4; NORMAL takes words 2 h and 2
 * h + 1, h = (n / 2) % 2, as u1 in (0, 1] and u2 in [0, 1) and gives
 * sqrt(-2 log u1) times cos(2 pi u2) for an even n, sin(2 pi u2) for an
 * odd one, each step rounded to f32 (LOG, COS and SIN the card's math
 * functions, on host code path @isa).  The
 * block of (counter, key) under (seed, offset): counter (block bits
 * 31:0, block bits 63:32, offset bits 31:0, offset bits 63:32), key
 * (seed bits 31:0, seed bits 63:32).  Blocks are computed KRAND_BLK at
 * once (kphilox_lanes()), each once when the lanes' elements are
 * consecutive under one seed and offset (krand_run()), else one per
 * lane.
 */
static inline KALWAYS void krand(SpyreKRun *r, const SpyreKInst *in,
                                 unsigned int isa)
{
    unsigned int kind = in->mod;
    uint32_t n = r->nl, x[4][KRAND_BLK], k0[KRAND_BLK], k1[KRAND_BLK];
    float *d = (float *)VS(r, in->dst);
    SpyreKAff as, ao, ae;
    size_t j;

    if (kaff_src(r, in, 0, in->a, &as) && !as.slope &&
        kaff_src(r, in, 1, in->b, &ao) && !ao.slope &&
        r->p->vtype[in->c] == KI64 && kaff_src(r, in, 2, in->c, &ae) &&
        ae.slope == 1 && n && ae.base + (n - 1) >= ae.base) {
        krand_run(kind, as.base, ao.base, ae.base, n, d, isa);
    } else {
        const int64_t *seed = ksrc(r, in, 0, in->a);
        const int64_t *offset = ksrc(r, in, 1, in->b);
        const void *ix = ksrc(r, in, 2, in->c);
        unsigned int te = r->p->vtype[in->c];
        /*
         * NORMAL's u1 and u2 (two vl-float halves of one slot), then its
         * Box-Muller pairs into the next slot (2 vl floats), the lane's
         * own (cos or sin) picked from them.
         */
        float *u1 = (float *)(r->tmp + 3 * (size_t)r->vl);
        float *u2 = u1 + r->vl;
        float *pr = (float *)(r->tmp + 4 * (size_t)r->vl);
        uint32_t c;

        for (c = 0; c < n; c += KRAND_BLK) {
            uint32_t m = KMIN(KRAND_BLK, n - c);
            uint32_t l;

            /* Lanes up to m rounded up to KBLK: in the slots (vl). */
            KFOR(j, m, {
                uint64_t blk = (uint64_t)geti(ix, te, c + j) >> 2;

                x[0][j] = (uint32_t)blk;
                x[1][j] = (uint32_t)(blk >> 32);
                x[2][j] = (uint32_t)offset[c + j];
                x[3][j] = (uint32_t)((uint64_t)offset[c + j] >> 32);
                k0[j] = (uint32_t)seed[c + j];
                k1[j] = (uint32_t)((uint64_t)seed[c + j] >> 32);
            });
            kphilox_lanes(x, k0, k1, m, NULL, isa);
            for (l = 0; l < m; l++) {
                uint64_t el = geti(ix, te, c + l);

                if (kind == SPYRE_KRAND_NORMAL) {
                    unsigned int h = el & 2;

                    u1[c + l] = krand_unit1(x[h][l]);
                    u2[c + l] = krand_unit(x[h + 1][l]);
                } else if (kind == SPYRE_KRAND_BITS) {
                    ((uint32_t *)d)[c + l] = x[el & 3][l];
                } else {
                    d[c + l] = krand_unit(x[el & 3][l]);
                }
            }
        }
        if (kind == SPYRE_KRAND_NORMAL) {
            spyre_kmath_normal(isa, pr, u1, u2, n);
            for (j = 0; j < n; j++) {
                d[j] = pr[2 * j + (geti(ix, te, j) & 1)];
            }
        }
    }
}

/* ---- Sections ----------------------------------------------------------- */

/*
 * Where kept math lanes of slot @slot (1-based) are for the current
 * vector of a pass: its lanes are (point of lane 0, indices from lane 0's) on,
 * consecutive in point-major order (whole rows of points, or one run of
 * one point's indices), at the same place in every pass.
 */
static inline float *kkept(const SpyreKRun *r, unsigned int slot)
{
    return r->kept + (size_t)(slot - 1) * r->tile * r->l->R +
           (size_t)klpt(r, 0) * r->l->R + klr(r, 0);
}

/*
 * Instructions [@from, @to) over the current vector (g: its first point)
 * on host code path @isa (SPYRE_KISA_*: the math library's lanes).
 */
static inline KALWAYS uint32_t krun_body(SpyreKRun *r, uint32_t from,
                                         uint32_t to, uint32_t g,
                                         unsigned int isa)
{
    const SpyreKProg *p = r->p;
    uint32_t i, st;

    for (i = from; i < to; i++) {
        const SpyreKInst *in = &p->inst[i];

        if (in->idle && r->kept) {
            continue;
        }
        switch (in->op) {
        case SPYRE_KOP_LOAD:
        case SPYRE_KOP_STORE:
            st = kmem(r, in, i, isa);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            break;
        case SPYRE_KOP_CHECK:
            kcheck(r, in, i);
            break;
        case SPYRE_KOP_SCATTER:
            st = kscatter(r, in, i, isa);
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
            break;
        case SPYRE_KOP_SCAN:
            kscan(r, in);
            break;
        case SPYRE_KOP_RAND:
            krand(r, in, isa);
            break;
        case SPYRE_KOP_REDUCE: {
            uint32_t R = r->l->R, per = R <= r->vl ? R : r->nl, q;
            const void *a = ksrc(r, in, 0, in->a);
            const void *b = in->b != KNONE ? ksrc(r, in, 1, in->b) : NULL;
            const void *c = in->c != KNONE ? ksrc(r, in, 2, in->c) : NULL;
            const uint8_t *m = NULL;

            if (in->imm != KNONE) {
                m = ksrc(r, in, 3, in->imm);
            }
            for (q = 0; q * per < r->nl; q++) {
                kfeed(r, in, &r->red[(size_t)in->red * r->tile + g + q],
                      a, b, c, m, q * per, (q + 1) * per, isa);
            }
            break;
        }
        default:
            if (in->take && r->kept) {
                r->vp[in->dst] = kkept(r, in->take);
                break;
            }
            if (in->keep && r->kept) {
                /* A math instruction (f32, no lazy lanes): straight there. */
                r->vp[in->dst] = kkept(r, in->keep);
            }
            if (!kaff_op(r, in)) {
                kalu(r, in, isa);
            }
            break;
        }
    }
    return SPYRE_STATUS_OK;
}

/*
 * The host code paths: krun_body() and everything it inlines compiled
 * once for the build's baseline and, on x86-64, once more for AVX2 and
 * FMA and once for AVX-512 (as QEMU's util/bufferiszero.c picks its
 * loops at run time).  All compute every operation with the same IEEE
 * operations, rounded once each (-ffp-contract=off holds in each: FMA
 * only where the program asks for fmaf), in the same order (reductions
 * by their stripes), so their results are bit-identical.  The AVX2 path
 * uses 256-bit vectors, the AVX-512 one 512-bit vectors (GCC puts a
 * VZEROUPPER before each call out; the math library's lanes and the
 * fp16 conversions have paths of their own, so no SSE code runs with
 * dirty upper halves).
 */
static uint32_t krun_generic(SpyreKRun *r, uint32_t from, uint32_t to,
                             uint32_t g)
{
    return krun_body(r, from, to, g, SPYRE_KISA_GENERIC);
}

#ifdef HOST_X86_64
#ifdef SPYRE_TARGET_WIDTH   /* see meson.build */
#define KRUN_AVX2   "avx2,fma,prefer-vector-width=256"
#else
#define KRUN_AVX2   "avx2,fma"
#endif
static __attribute__((target(KRUN_AVX2)))
uint32_t krun_avx2(SpyreKRun *r, uint32_t from, uint32_t to, uint32_t g)
{
    return krun_body(r, from, to, g, SPYRE_KISA_AVX2);
}

#ifdef SPYRE_TARGET_WIDTH
#define KRUN_AVX512 "avx512f,avx512dq,avx512vl,avx2,fma," \
                    "prefer-vector-width=512"
#else
#define KRUN_AVX512 "avx512f,avx512dq,avx512vl,avx2,fma"
#endif
static __attribute__((target(KRUN_AVX512)))
uint32_t krun_avx512(SpyreKRun *r, uint32_t from, uint32_t to, uint32_t g)
{
    return krun_body(r, from, to, g, SPYRE_KISA_AVX512);
}
#endif

/*
 * Instructions [@from, @to) over the current vector, then its lazy
 * values written if a later section reads them, else dropped.
 */
static uint32_t krun_insts(SpyreKRun *r, uint32_t from, uint32_t to,
                           uint32_t g)
{
    const SpyreKProg *p = r->p;
    uint32_t st, i;
#ifdef HOST_X86_64
    int isa = __atomic_load_n(&kisa, __ATOMIC_RELAXED);

    if (isa == SPYRE_KISA_AVX512) {
        st = krun_avx512(r, from, to, g);
    } else if (isa == SPYRE_KISA_AVX2) {
        st = krun_avx2(r, from, to, g);
    } else
#endif
    {
        st = krun_generic(r, from, to, g);
    }
    for (i = from; i < to; i++) {
        uint16_t v = p->inst[i].dst;

        if (v != KNONE && r->lazy[v]) {
            if (p->vlocal[v]) {
                r->lazy[v] = 0;
            } else {
                kaff_lanes(r, v);
            }
        }
    }
    return st;
}


/* Run pass section @s over the points of the tile. */
static uint32_t krun_pass(SpyreKRun *r, uint32_t from, uint32_t to)
{
    const SpyreKProg *p = r->p;
    uint64_t R = r->l->R, rb;
    uint32_t i, j, g, q, ppv, st;

    for (i = from; i < to; i++) {
        const SpyreKInst *in = &p->inst[i];

        if (in->op == SPYRE_KOP_REDUCE) {
            for (g = 0; g < r->np; g++) {
                SpyreKRed *rd = &r->red[(size_t)in->red * r->tile + g];

                rd->n = 0;
                for (j = 0; j < 16; j++) {
                    acc_init(&rd->stripe[j], in->mod & 0xff, in->type);
                }
            }
        }
    }
    r->in_pass = true;
    r->row = false;
    if (R && R <= r->vl) {
        ppv = r->vl / R;
        for (g = 0; g < r->np; g += ppv) {
            uint32_t m = KMIN(ppv, r->np - g);

            r->nl = m * R;
            for (q = 0; q < m; q++) {
                for (j = 0; j < R; j++) {
                    r->lpt[q * R + j] = g + q;
                    r->lr[q * R + j] = j;
                }
            }
            st = krun_insts(r, from, to, g);
            for (i = from; i < to; i++) {
                const SpyreKInst *in = &p->inst[i];

                if (in->op != SPYRE_KOP_REDUCE) {
                    continue;
                }
                for (q = 0; q < m; q++) {
                    kblock(&r->red[(size_t)in->red * r->tile + g + q],
                           in->mod & 0xff, in->type, in->stype);
                }
            }
            if (st == SPYRE_STATUS_OK) {
                st = r->io->boundary(r->io->opaque);
            }
            if (st != SPYRE_STATUS_OK) {
                return st;
            }
        }
    } else if (R) {
        for (g = 0; g < r->np; g++) {
            for (rb = 0; rb < R; rb += r->nl) {
                /* A vector of point g's reduction indices from rb. */
                r->nl = KMIN(r->vl, R - rb);
                r->row = true;
                r->row_pt = g;
                r->row_r0 = rb;
                st = krun_insts(r, from, to, g);
                if ((rb + r->nl) % SPYRE_KRED_BLOCK == 0 || rb + r->nl == R) {
                    for (i = from; i < to; i++) {
                        const SpyreKInst *in = &p->inst[i];

                        if (in->op == SPYRE_KOP_REDUCE) {
                            kblock(&r->red[(size_t)in->red * r->tile + g],
                                   in->mod & 0xff, in->type, in->stype);
                        }
                    }
                }
                if (st == SPYRE_STATUS_OK) {
                    st = r->io->boundary(r->io->opaque);
                }
                if (st != SPYRE_STATUS_OK) {
                    return st;
                }
            }
        }
    }
    r->in_pass = false;
    r->row = false;

    /* The results, as point values. */
    for (i = from; i < to; i++) {
        const SpyreKInst *in = &p->inst[i];
        unsigned int kind = in->mod & 0xff;

        if (in->op != SPYRE_KOP_REDUCE) {
            continue;
        }
        for (g = 0; g < r->np; g++) {
            SpyreKAcc res = kresult(&r->red[(size_t)in->red * r->tile + g],
                                    kind, in->type, in->stype);

            switch (kind) {
            case SPYRE_KRED_ARGMAX:
            case SPYRE_KRED_ARGMIN:
                ((int64_t *)VS(r, in->dst))[g] = res.idx < 0 ? 0 : res.idx;
                break;
            case SPYRE_KRED_WELFORD:
            case SPYRE_KRED_WELFORD_COMBINE:
                ((float *)VS(r, in->dst))[g] = kcanon(res.v.f);
                ((float *)VS(r, in->dst + 1))[g] = kcanon(res.m2);
                ((float *)VS(r, in->dst + 2))[g] = kcanon(res.w);
                break;
            default:
                if (in->type == KF32) {
                    ((float *)VS(r, in->dst))[g] = kcanon(res.v.f);
                } else {
                    puti(VS(r, in->dst), in->type, g, res.v.i);
                }
                break;
            }
        }
    }
    return SPYRE_STATUS_OK;
}

uint32_t spyre_kernel_tile(SpyreKRun *r, uint64_t pt0)
{
    const SpyreKProg *p = r->p;
    uint32_t s, st, from, to;

    r->pt0 = pt0;
    r->np = KMIN((uint64_t)r->tile, r->l->P - pt0);
    for (s = 0; s < p->nsecs; s++) {
        from = p->sec_start[s];
        to = p->sec_start[s + 1] - 1;
        if (p->sec_pass[s]) {
            st = krun_pass(r, from, to);
        } else {
            r->in_pass = false;
            r->nl = r->np;
            st = krun_insts(r, from, to, 0);
            if (st == SPYRE_STATUS_OK && s + 1 < p->nsecs) {
                st = r->io->boundary(r->io->opaque);
            }
        }
        if (st != SPYRE_STATUS_OK) {
            return st;
        }
    }
    return SPYRE_STATUS_OK;
}
