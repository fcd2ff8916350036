/* SPDX-License-Identifier: MIT */
/*
 * Kernel programs inside libspyre (not installed): the host-side verifier
 * that the builder runs on every instruction it emits and the reference
 * interpreter runs before it interprets, and the opcode table the
 * builder, the verifier and the disassembler share.  Written from
 * docs/spyre-hw.rst "The KERNEL command", not from the card's code.
 */
#ifndef SPYRE_KPROG_H
#define SPYRE_KPROG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <drm/spyre_cmd.h>

#ifndef SPYRE_HIDDEN
#define SPYRE_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Sets of SPYRE_KTYPE_*: bit t for type t. */
#define KT_BOOL		(1u << SPYRE_KTYPE_BOOL)
#define KT_I32		(1u << SPYRE_KTYPE_I32)
#define KT_I64		(1u << SPYRE_KTYPE_I64)
#define KT_F32		(1u << SPYRE_KTYPE_F32)
#define KT_INT		(KT_I32 | KT_I64)
#define KT_NUM		(KT_INT | KT_F32)
#define KT_ANY		(KT_NUM | KT_BOOL)

/* How an opcode's fields are checked (and printed). */
enum kop_class {
	KC_INVALID = 0,
	KC_PASS, KC_ENDPASS, KC_CONST, KC_PARAM, KC_IDX, KC_SIZE, KC_AFFINE,
	KC_CHECK, KC_LOAD, KC_STORE,
	KC_UN,		/* a of T */
	KC_BIN,		/* a, b of T */
	KC_TER,		/* a, b, c of T */
	KC_MINMAX,	/* a, b of T; mod IGNORE_NAN */
	KC_CMP, KC_SELECT, KC_CVT, KC_BITCAST,
	KC_PRED,	/* bool from f32 a */
	KC_REDUCE,
	KC_SCATTER,	/* part 2: STORE in lane order, or accumulating */
	KC_SCAN,	/* part 2: in a pass, kinds as REDUCE's first six */
	KC_RAND,	/* part 2: Philox4x32-10 */
};

struct kop_desc {
	const char *name;
	uint8_t cls;	/* enum kop_class */
	uint8_t types;	/* KT_* allowed for the result */
};

/* The descriptor of @op; cls KC_INVALID for unknown and reserved codes. */
SPYRE_HIDDEN const struct kop_desc *spyre__kop(unsigned int op);

/* The value type (SPYRE_KTYPE_*) of a dtype; SPYRE_KTYPE_NONE if invalid. */
SPYRE_HIDDEN unsigned int spyre__kdtype_vtype(unsigned int dtype);

/* Name of a dtype as the disassembler prints it ("FP16"); NULL if bad. */
SPYRE_HIDDEN const char *spyre__kdtype_name(unsigned int dtype);

/* Name of a reduction kind ("sum"); NULL if undefined. */
SPYRE_HIDDEN const char *spyre__kred_name(unsigned int kind);

/* The signature a program is verified against. */
struct spyre__ksig {
	unsigned int noperands, nparams, npdims, nrdims;
	uint8_t dtype[32];
};

/*
 * Incremental verifier.  Values carry their type, their section (0: point
 * code, k: pass k) and whether REDUCE made them.
 */
struct spyre__kverify {
	struct spyre__ksig sig;
	uint32_t ninsts;	/* instructions accepted */
	uint32_t nvalues;
	uint32_t npasses;	/* PASS seen */
	uint32_t nreduce;
	uint32_t nscan;
	uint32_t loaded, stored, scattered;	/* operand masks */
	bool in_pass;
	uint8_t vtype[SPYRE_KERNEL_MAX_VALUES];
	uint8_t vsect[SPYRE_KERNEL_MAX_VALUES];
	uint8_t vreduce[SPYRE_KERNEL_MAX_VALUES];
};

SPYRE_HIDDEN void spyre__kverify_init(struct spyre__kverify *v,
				      const struct spyre__ksig *sig);
/*
 * Check the next instruction; on success account for it and return 0,
 * else return a SPYRE_KERR_* reason and change nothing.
 */
SPYRE_HIDDEN int spyre__kverify_inst(struct spyre__kverify *v,
				     const struct spyre_kinst *in);
/* Check the end of the program (no pass open, pass count); 0 or a reason. */
SPYRE_HIDDEN int spyre__kverify_end(const struct spyre__kverify *v,
				    unsigned int npasses);

/*
 * Verify a whole program against a launch's signature (NULL: its own
 * header's).  Returns 0, or sets *@detail as the completion record's
 * BAD_PROGRAM detail and returns SPYRE_STATUS_BAD_PROGRAM.  The verifier
 * state is large: it is allocated (-ENOMEM).
 */
SPYRE_HIDDEN int spyre__kverify_program(const void *prog, uint64_t size,
					const struct spyre__ksig *launch,
					uint64_t *detail);

/*
 * Does the program (@size bytes, its instructions read up to their
 * number in @size) use part 2's instructions (SCATTER, SCAN, RAND),
 * which need VERSION 1.2?
 */
SPYRE_HIDDEN bool spyre__kprog_part2(const void *prog, size_t size);

/* Number of values instruction @in defines (0, 1 or 3). */
SPYRE_HIDDEN unsigned int spyre__kinst_ndefs(const struct spyre_kinst *in);

/*
 * SPYRE_KERNEL_DUMP: print a KERNEL's program (NULL: not readable) as it
 * is encoded, with its VA and sizes (kdisasm.c).
 */
SPYRE_HIDDEN void spyre__kernel_dump(const void *prog, size_t size,
				     uint64_t prog_va, const uint64_t *sizes,
				     unsigned int npdims, unsigned int nrdims);

#endif /* SPYRE_KPROG_H */
