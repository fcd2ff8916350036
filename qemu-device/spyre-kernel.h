/*
 * Spyre card model: the KERNEL engine's core (verifier and interpreter)
 *
 * Plain C with no QEMU dependency, like spyre-math.c; built with
 * -ffp-contract=off so that no a * b + c is fused.  spyre-kexec.c runs it
 * for the KERNEL command: it decodes the command into a SpyreKLaunch,
 * reads the program, verifies it into a SpyreKProg and runs it tile by
 * tile with a SpyreKRun (one per worker running tiles), whose SpyreKIO
 * callbacks reach guest memory.
 * docs/spyre-hw.rst, "The KERNEL command", is the contract.
 *
 * Copyright (c) 2025 The Spyre open stack authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_MISC_SPYRE_KERNEL_H
#define HW_MISC_SPYRE_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drm/spyre_cmd.h"

/* Largest command: 104 + 24 * 32 + 8 * 64 bytes. */
#define SPYRE_KCMD_MAX          SPYRE_CMD_KERNEL_SIZE(32, 64)
#define SPYRE_KPROG_MAX         (64 + 16 * SPYRE_KERNEL_MAX_INSTS)
/*
 * Lanes of one vector (powers of two): a kernel with reduction dimensions
 * feeds at most one block of the fixed order (SPYRE_KRED_BLOCK reduction
 * indices) per vector, a pointwise one SPYRE_KVL_MAX lanes.
 */
#define SPYRE_KRED_BLOCK        1024
#define SPYRE_KVL_MAX           2048
#define SPYRE_KVL_MIN           16

/* A decoded, checked launch (host byte order). */
typedef struct SpyreKLaunch {
    uint32_t noperands, nparams, npdims, nrdims;
    uint64_t size[9];           /* resolved from parameters */
    uint64_t P, R;
    uint64_t va[SPYRE_KERNEL_MAX_OPERANDS];
    uint64_t extent[SPYRE_KERNEL_MAX_OPERANDS];
    uint32_t dtype[SPYRE_KERNEL_MAX_OPERANDS];
    uint64_t param[SPYRE_KERNEL_MAX_PARAMS];
} SpyreKLaunch;

/* A verified instruction. */
typedef struct SpyreKInst {
    uint8_t op, type;
    uint16_t mod;
    uint16_t dst, a, b, c;
    uint32_t imm;
    uint64_t k;                 /* CONST: the immediate */
    uint8_t sec;                /* section number (program order) */
    uint8_t bcast;              /* bit i: source i is point-level, in a pass */
    uint8_t red;                /* REDUCE, SCAN: its accumulator slot */
    uint8_t stype;              /* type of source a */
    /*
     * A math instruction of a pass that an earlier pass computes the same
     * way: 1 + the slot its lanes are kept in (@keep, the earlier one) or
     * taken from (@take), 0 if neither (spyre-kernel.c, kplan_keep()).
     * @idle: the instruction computes only what taken ones would read,
     * so it need not run while lanes are kept (SpyreKRun.kept).
     */
    uint8_t keep, take, idle;
} SpyreKInst;

typedef struct SpyreKProg {
    uint32_t ninsts, nvalues, npasses, nreduce, nsecs;
    uint32_t loaded, stored;    /* operand bit masks */
    uint32_t scattered;         /* operands of SCATTERs (one core runs) */
    uint32_t nscan;             /* SCAN instructions */
    uint32_t nkeep;             /* slots of kept math lanes */
    uint32_t idxdims;           /* bit d: IDX or AFFINE reads dim d */
    uint8_t vtype[SPYRE_KERNEL_MAX_VALUES];
    uint8_t vpass[SPYRE_KERNEL_MAX_VALUES]; /* 1 + pass of a pass value */
    uint8_t vsec[SPYRE_KERNEL_MAX_VALUES];  /* section that defines it */
    /* Read only by instructions of its own section (or never). */
    bool vlocal[SPYRE_KERNEL_MAX_VALUES];
    uint16_t sec_start[2 * SPYRE_KERNEL_MAX_PASSES + 2];
    bool sec_pass[2 * SPYRE_KERNEL_MAX_PASSES + 2];
    SpyreKInst inst[SPYRE_KERNEL_MAX_INSTS];
} SpyreKProg;

/*
 * Verify the program @bytes (@size bytes, little-endian) for launch @l.
 * Returns SPYRE_STATUS_OK, or SPYRE_STATUS_BAD_PROGRAM with the
 * completion record's detail in *@detail.
 */
uint32_t spyre_kernel_verify(SpyreKProg *p, const uint8_t *bytes,
                             uint32_t size, const SpyreKLaunch *l,
                             uint64_t *detail);

/* Guest memory for a run (spyre-kexec.c). */
typedef struct SpyreKIO {
    void *opaque;
    /*
     * The fast path: a host pointer to elements [@off, @off + *@n) of
     * operand @opnd (@off in its extent, *@n >= 1 elements wanted), for
     * writing if @write, with *@n shortened to what is one piece of host
     * memory.  NULL if @off is not reachable that way now: the caller
     * then goes through @access, which reports errors.  No other effect
     * (mappings are kept for later calls); the pointer is valid until
     * the next @boundary call.  The caller counts the bytes it accesses
     * in SpyreKRun.bytes_io and its stores in SpyreKRun.stores.
     */
    uint8_t *(*map)(void *opaque, unsigned int opnd, bool write,
                    uint64_t off, uint64_t *n);
    /*
     * Access operand @opnd at element offsets @off[i] (in its extent) of
     * the lanes i < @n with @act[i] set, in lane order: elements packed
     * in @buf.  Returns SPYRE_STATUS_OK, MMU_FAULT or DMA_ERROR with
     * *@lane the lane that failed (the lanes before it done), or another
     * status, which ends the run.
     */
    uint32_t (*access)(void *opaque, unsigned int opnd, bool write,
                       const int64_t *off, const uint8_t *act, uint32_t n,
                       void *buf, uint32_t *lane);
    /* The last failed access is the one reported: keep its details. */
    void (*keep_fault)(void *opaque);
    /* Between vectors: SPYRE_STATUS_OK, or a status that ends the run. */
    uint32_t (*boundary)(void *opaque);
} SpyreKIO;

/*
 * An i64 value whose lanes [0, nl) in the current vector are base +
 * slope * j, modulo 2^64 (spyre-kernel.c, "Affine lanes").
 */
typedef struct SpyreKAff {
    uint64_t base, slope;
} SpyreKAff;

/* Reduction accumulator (one stripe, partial or result). */
typedef struct SpyreKAcc {
    union {
        float f;
        int64_t i;
    } v;
    float m2, w;                /* WELFORD: v.f is the mean */
    int64_t idx;                /* ARGMAX/ARGMIN: -1 while empty */
} SpyreKAcc;

#define SPYRE_KSTACK            40

typedef struct SpyreKRed {
    SpyreKAcc stripe[16];
    SpyreKAcc stack[SPYRE_KSTACK];
    uint8_t level[SPYRE_KSTACK];
    uint32_t n;
} SpyreKRed;

typedef struct SpyreKRun {
    const SpyreKProg *p;
    const SpyreKLaunch *l;
    const SpyreKIO *io;
    uint32_t vl;                /* lanes per vector */
    uint32_t tile;              /* points per tile */
    uint64_t *vals;             /* nvalues slots of vl 8-byte lanes */
    /*
     * Where each value's lanes are: its slot in @vals, or for a math
     * instruction's kept lanes (keep, take) the current vector's place in
     * @kept, set each time the instruction runs.
     */
    void **vp;
    uint64_t *tmp;              /* 3 broadcast slots, offsets, raw bytes */
    uint8_t *act;
    /*
     * Pass lane j: its point in the tile and its reduction index, in
     * lpt[j] and lr[j], or, while @row is set (a run of one point's
     * indices: spyre-kernel.c, klpt() and klr()), point row_pt and index
     * row_r0 + j, the arrays unwritten.
     */
    uint32_t *lpt;
    uint64_t *lr;
    bool row;
    uint32_t row_pt;
    uint64_t row_r0;
    SpyreKRed *red;             /* nreduce * tile */
    /*
     * Per value: lazy[v] set while v's lanes are not written and aff[v]
     * says what they are (within one vector; all clear between vectors).
     */
    SpyreKAff *aff;
    uint8_t *lazy;
    /* Kept math lanes: nkeep slots of tile * R f32, or NULL (none). */
    float *kept;
    size_t bytes;       /* allocated: vals, tmp, act, lpt, lr, red, aff */
    void *mem;
    /* Current vector. */
    uint64_t pt0;               /* first point of the tile */
    uint32_t np;                /* points in the tile */
    uint32_t nl;                /* lanes */
    bool in_pass;
    /* The first error in sequential order (status 0: none). */
    uint32_t status;
    uint64_t ekey[4];           /* point, section, reduction index, inst */
    uint64_t detail, detail2;
    /* Through SpyreKIO.map: the caller adds them up and clears them. */
    uint64_t bytes_io;          /* bytes of active lanes accessed */
    uint64_t stores;            /* STOREs that wrote bytes */
    /* SCAN: each one's running value (idx -1 before a point's first). */
    SpyreKAcc scan[SPYRE_KERNEL_MAX_SCAN];
} SpyreKRun;

/*
 * Set @r up for program @p and launch @l (memory from malloc, kept in
 * @r across runs and grown as needed: at most about 8 MiB).  r->tile, the
 * points per tile, depends on @p and @l only.  Returns false if memory
 * is short.
 */
bool spyre_kernel_prepare(SpyreKRun *r, const SpyreKProg *p,
                          const SpyreKLaunch *l, const SpyreKIO *io);
void spyre_kernel_free(SpyreKRun *r);

/*
 * Run points [@pt0, @pt0 + r->tile) (clipped to P).  Returns
 * SPYRE_STATUS_OK (r->status then says whether an access or CHECK
 * failed: the first in sequential order, with r->detail and r->detail2)
 * or a status from the IO callbacks that ended the run.
 */
uint32_t spyre_kernel_tile(SpyreKRun *r, uint64_t pt0);

/*
 * Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC'11), RAND's
 * generator: the counter block @x (words c0..c3) replaced by its output
 * under key (@k0, @k1).  Exposed for the native harness's known-answer
 * test.
 */
void spyre_kernel_philox(uint32_t x[4], uint32_t k0, uint32_t k1);

/*
 * The host code the interpreter's lane loops run: SPYRE_KISA_GENERIC
 * (the build's baseline) or, on x86-64 hosts with AVX2, FMA and F16C,
 * SPYRE_KISA_AVX2, or on those with AVX-512 F, DQ and VL too,
 * SPYRE_KISA_AVX512 (the AVX2 interpreter, its math functions' lanes in
 * 512-bit vectors); the best is chosen at the first run.  Results are
 * bit-identical whichever runs.  spyre_kernel_isas() is the mask of
 * those the host can run; spyre_kernel_set_isa() picks one of them for
 * the following runs of every SpyreKRun (tests), returning false if the
 * host cannot.
 */
#define SPYRE_KISA_GENERIC      0
#define SPYRE_KISA_AVX2         1
#define SPYRE_KISA_AVX512       2
unsigned int spyre_kernel_isas(void);
bool spyre_kernel_set_isa(unsigned int isa);

#endif
