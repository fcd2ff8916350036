// SPDX-License-Identifier: MIT
// The kernel generator of the spyre backend (TensorIterator's role for the
// card's KERNEL command): iteration spaces over strided operands (broadcast,
// dims dropped and collapsed, reduction dims split off), the program cache
// (one program per signature and card, uploaded once, a refusal cached as
// well), the program builder's helpers the op families write their
// expressions with, and the launch.  Shapes, strides and scalars are launch
// parameters: a new shape never builds a program.
#pragma once

#include "spyre_torch.h"

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>

#include <array>
#include <cstring>

namespace spyre_torch {

// The boxed CPU fallback (fallback.cpp), and calling it for aten operator
// OP from an unboxed kernel.
void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);
#define SPYRE_FALLBACK(op, ...) \
	at::native::call_fallback_fn<&::spyre_torch::fallback, \
				     ATEN_OP(op)>::call(__VA_ARGS__)
#define SPYRE_FALLBACK2(op, ovl, ...) \
	at::native::call_fallback_fn<&::spyre_torch::fallback, \
				     ATEN_OP2(op, ovl)>::call(__VA_ARGS__)

// The integer matrix products (ops_reduce.cpp, a generated reduction: the
// card's GEMM has no integer path): @out = beta * @self + alpha * @a @ @b
// for 2-D @a (M, K), @b (K, N), @out (M, N), or the same with a batch dim
// in front of all three; @self (undefined: none; ignored when beta is 0)
// broadcasts to @out.  Products and sums wrap in int32 (int64 for int64),
// and a floating alpha or beta is truncated to an integer (0.6 is 0), as
// on the CPU.  Every tensor on @out's card with @out's dtype, any strides;
// @out must not partially overlap an input (RuntimeError, as ATen).
// Returns false, with nothing done, when it does not apply (a floating or
// bool dtype, a complex alpha or beta, another device): the caller falls
// back.
bool int_matmul(const at::Tensor &out, const at::Tensor &a,
		const at::Tensor &b, const at::Tensor &self,
		const at::Scalar &beta, const at::Scalar &alpha);

namespace kgen {

constexpr int NONE = SPYRE_KERNEL_NONE;
constexpr int kMaxDims = 16;		// dims of a tensor we iterate over
constexpr int kMaxOps = 8;		// tensor operands of one iteration space

// ---- dtypes ------------------------------------------------------------------

// SPYRE_KTYPE_* of the values of card dtype @dtype (SPYRE_DTYPE_*).
inline uint32_t vtype(uint32_t dtype)
{
	return spyre_kernel_dtype_type(dtype);
}

// The card dtype of @t for a KERNEL operand (every card dtype, the integer
// and bool ones included), or 0.
uint32_t kdtype(at::ScalarType t);

// The compute type for values of dtype @t: F32 for the floating types
// (opmath: half types compute in f32 and round once, at the store), I64
// for int64, I32 for the other integers, @bool_ct for bool.
uint32_t ctype(at::ScalarType t, uint32_t bool_ct = SPYRE_KTYPE_I32);

// A scalar's 64-bit parameter for a value read as @type.
uint64_t scalar_param(const at::Scalar &s, uint32_t type);
uint64_t f32_param(double v);

// ---- the builder's helpers -------------------------------------------------

// A thin layer over struct spyre_kernel for the expressions: every call
// returns a value number or a negative errno (the builder's sticky error),
// and a negative source propagates, so an expression is written straight
// and checked once, at the end.
struct B {
	struct spyre_kernel *k;

	int type(int v) const { return v < 0 ? v : spyre_kernel_type(k, v); }
	int op(uint32_t kop, int a, int b = NONE, int c = NONE,
	       uint32_t mod = 0)
	{
		return spyre_kernel_op(k, kop, mod, a, b, c);
	}
	// @v converted to @t (no instruction when it already is)
	int cvt(int v, uint32_t t)
	{
		int vt = type(v);
		if (vt < 0)
			return vt;
		return static_cast<uint32_t>(vt) == t ? v :
		       spyre_kernel_cvt(k, t, v, 0, 0);
	}
	int f(float x) { return spyre_kernel_const_f32(k, x); }
	// a constant @x of type @t (F32, I32, I64 or BOOL)
	int c(uint32_t t, double x);
	int add(int a, int b) { return op(SPYRE_KOP_ADD, a, b); }
	int sub(int a, int b) { return op(SPYRE_KOP_SUB, a, b); }
	int mul(int a, int b) { return op(SPYRE_KOP_MUL, a, b); }
	int div(int a, int b) { return op(SPYRE_KOP_DIV, a, b); }
	int fma(int a, int b, int c) { return op(SPYRE_KOP_FMA, a, b, c); }
	int neg(int a) { return op(SPYRE_KOP_NEG, a); }
	int un(uint32_t kop, int a) { return op(kop, a); }
	int cmp(uint32_t kcmp, int a, int b)
	{
		return op(SPYRE_KOP_CMP, a, b, NONE, kcmp);
	}
	int sel(int cond, int a, int b) { return op(SPYRE_KOP_SELECT, cond, a, b); }
	int min(int a, int b) { return op(SPYRE_KOP_MIN, a, b); }
	int max(int a, int b) { return op(SPYRE_KOP_MAX, a, b); }
	int param(uint32_t t, unsigned int i)
	{
		return spyre_kernel_param(k, t, i);
	}
};

// ---- the program cache -------------------------------------------------------

// The signature of a program: which generator made it (@op, @variant) and
// what it was made for (compute type, dims, operand dtypes).  Zero-filled
// on construction so that it can be hashed and compared as bytes.
struct Key {
	uint32_t op = 0, variant = 0;
	uint8_t ct = 0, npdims = 0, nrdims = 0, nops = 0;
	uint8_t dt[16] = {};

	Key() { std::memset(static_cast<void *>(this), 0, sizeof(*this)); }
	bool operator==(const Key &o) const
	{
		return std::memcmp(this, &o, sizeof(*this)) == 0;
	}
};

// Key::op of each generator family, all here so that no two collide (the
// pointwise table's own ids are below kOpReduce; a family adds its kinds
// to its base, below the next base).
constexpr uint32_t kOpReduce = 0x1000;		// ops_reduce.cpp reductions
constexpr uint32_t kOpSoftmax = 0x1100;		// ops_reduce.cpp softmax family
constexpr uint32_t kOpLayerNorm = 0x1200;	// ops_norm.cpp
constexpr uint32_t kOpPointwiseIdx = 0x1300;	// ops_pointwise.cpp index kernels
constexpr uint32_t kOpRand = 0x1400;		// ops_random.cpp
constexpr uint32_t kOpIndex = 0x1500;		// ops_index.cpp
constexpr uint32_t kOpScan = 0x1600;		// ops_scan.cpp
constexpr uint32_t kOpAttention = 0x1700;	// ops_attention.cpp
constexpr uint32_t kOpIntMatmul = 0x1800;	// ops_reduce.cpp integer mm/bmm
constexpr uint32_t kOpSort = 0x1900;		// ops_sort.cpp
constexpr uint32_t kOpUnfold = 0x2000;		// ops_conv.cpp
constexpr uint32_t kOpFold = 0x2001;		// ops_conv.cpp
constexpr uint32_t kOpPool = 0x2100;		// ops_pool.cpp
constexpr uint32_t kOpUpsample = 0x2101;	// ops_pool.cpp
constexpr uint32_t kOpRnn = 0x2200;		// ops_rnn.cpp
constexpr uint32_t kOpLoss = 0x2300;		// ops_loss.cpp
constexpr uint32_t kOpForeach = 0x2400;		// ops_foreach.cpp

// A program of one card: its BO (system memory, the start is the program)
// and size, or the builder's refusal (@err < 0: the op falls back).
struct Prog {
	struct spyre_bo *bo = nullptr;
	uint32_t size = 0;
	int err = 0;
};

// Build a program into the (created, empty) builder @k for @ctx; return 0
// or a negative errno.  Called once per signature and card.
using BuildFn = int (*)(struct spyre_kernel **k, const void *ctx);

// The program of signature @key on card @card: on the first use, @build
// makes it (its refusal is cached too) and it is uploaded.  Returns the
// cache's entry (owned by the cache for the process's life); check
// Prog::err.  Thread-safe.
const Prog *program(int card, const Key &key, BuildFn build, const void *ctx);

// Number of programs built (and refused) so far, for torch.spyre.kernel_stats.
struct CacheStats {
	int64_t built, refused, hits, launches;
};
CacheStats cache_stats();

// ---- iteration spaces --------------------------------------------------------

// Elements @t spans from its first one: the extent of an operand that is
// @t (its strides non-negative); 0 when @t is empty.
inline uint64_t span(const at::Tensor &t)
{
	if (t.numel() == 0)
		return 0;
	uint64_t e = 1;
	for (int64_t d = 0; d < t.dim(); d++)
		e += static_cast<uint64_t>(t.size(d) - 1) *
		     static_cast<uint64_t>(t.stride(d));
	return e;
}

// Up to kMaxOps operands over a shape of up to kMaxDims dims, some of them
// reduction dims.  collapse() drops size-1 dims and merges neighbours
// (within the pointwise dims and within the reduction dims, keeping the
// row-major order of each group) where every operand allows it.
struct Space {
	int ndim = 0;
	int64_t size[kMaxDims];
	bool red[kMaxDims];
	int nops = 0;
	int64_t st[kMaxOps][kMaxDims];
	// after collapse(): dims [0, np) pointwise, [np, np + nr) reduction
	int np = 0, nr = 0;

	// A space of @shape with reduction dims where @red_mask has bit d.
	void init(at::IntArrayRef shape, uint64_t red_mask = 0);
	// Add operand @t (its sizes broadcast to the space: right-aligned,
	// size-1 dims get stride 0); returns its index.
	int add(const at::Tensor &t);
	// Add an operand with explicit element strides over the space's dims.
	int add_strides(const int64_t *strides);
	// Collapse; false when more than 6 pointwise or 3 reduction dims
	// remain.  With @reduction, a space left without reduction dims gets
	// one of size 1 (a reduction over a single element).
	bool collapse(bool reduction = false);
	int64_t points() const;
	int64_t rindices() const;
	// Elements operand @i spans from its first one (0 when it moves along
	// an empty dim: no lane touches it).
	uint64_t extent(int i) const;
};

// One KERNEL launch being assembled.
struct Launch {
	struct spyre_kernel_launch l;
	struct spyre_kernel_arg ops[SPYRE_KERNEL_MAX_OPERANDS];
	uint64_t params[SPYRE_KERNEL_MAX_PARAMS];
	// what run() needs to split the launch (see bind()): each bound
	// operand's stride along pointwise dim 0 and element size, which
	// operands are bound (bit i), whether sizes() set the sizes
	int64_t st0[SPYRE_KERNEL_MAX_OPERANDS];
	uint32_t esize[SPYRE_KERNEL_MAX_OPERANDS];
	uint64_t bound;
	bool sized;

	Launch()
	{
		std::memset(static_cast<void *>(this), 0, sizeof(*this));
	}
	// Operand @i: tensor @t's first element with @extent elements.
	void operand(unsigned int i, const at::Tensor &t, uint64_t extent);
	// Space @s's sizes into the launch, and operand @op's strides (first
	// the pointwise dims, then the reduction dims) into the parameters
	// at @param.
	void sizes(const Space &s);
	void strides(const Space &s, int op, unsigned int param);
	// Operand @i: tensor @t as operand @op of space @s, its strides at
	// parameter @param (operand() and strides() in one), and a promise
	// that lets run() split the launch: the program's values depend on
	// its operands' elements only, never on point indices (IDX of a
	// pointwise dim, the linear point index) or on the sizes of the
	// pointwise dims, so a launch over a slice of dim 0 computes that
	// slice's part of the result.
	void bind(unsigned int i, const at::Tensor &t, const Space &s, int op,
		  unsigned int param);
};

// Element iterations (points x reduction indices) of one KERNEL command
// when run() splits a launch: about 0.25 s of the card model's host time
// for a simple kernel when idle, so that a command stays far below the
// card's 5 s per-command budget (SPYRE_STATUS_LIMIT, reported as -EIO)
// on a loaded host.
constexpr uint64_t kSplitWork = 1ull << 22;

// Launch @p with @L on card @card's current stream (counts, the program,
// operand and parameter pointers are filled here).  When sizes() set the
// sizes, every operand was bound (Launch::bind) and the launch is bigger
// than kSplitWork element iterations, it goes as several KERNEL commands
// in stream order, each over a slice of pointwise dim 0 (the outermost)
// of about kSplitWork iterations; a launch without pointwise dims (a
// reduction to one point) is not split.  Errors as check() (RuntimeError
// naming the card).
void run(int card, const Prog *p, Launch &L, unsigned int noperands,
	 unsigned int nparams);

// In a program of @np pointwise and @nr reduction dims whose operand
// strides sit at parameters @param (pointwise first), the element offset
// of the point (point code) or, with @base from a first call and inside a
// pass, of the (point, reduction index).
int point_offset(B &b, int np, unsigned int param);
int rindex_offset(B &b, int base, int np, int nr, unsigned int param);

// ---- outputs -------------------------------------------------------------------

// Check an output PyTorch's way before a kernel writes it: no internal
// overlap, no partial overlap with any of @inputs (ATen's MemoryOverlap).
void check_overlap(const at::Tensor &out, at::ArrayRef<at::Tensor> inputs);

// @in, or a copy of it when it shares memory with @out other than as the
// same view (a kernel reading one layout while writing another).
at::Tensor unalias(const at::Tensor &in, const at::Tensor &out);

} // namespace kgen
} // namespace spyre_torch
