// SPDX-License-Identifier: MIT
// Sorting and selection on the card.  The card has no sort instruction:
// rows are sorted by a bitonic network of KERNEL launches over a work
// copy, and the ops read their results out of it.
//
//  - A work copy (sort_rows()): the rows of @x along @dim, each padded to
//    N2 = the next power of two of its length n, as (key, index) pairs in
//    two contiguous [B, N2] tensors (keys in f32 for the float dtypes,
//    which holds fp16/bf16 exactly, i64 for int64, i32 for the other
//    integers and bool; indices i64, the element's position in its row;
//    a pad is marked by its index >= n).
//  - The network: for k = 2, 4, .., N2 and j = k/2, .., 1, one launch of
//    B * N2/2 lanes, lane t of a row comparing positions lo (t with a zero
//    bit inserted at log2(j)) and lo + j and exchanging them when they are
//    out of order for their block's direction (ascending when lo & k is 0).
//    The order is a strict total order on (value, index): values by <
//    (descending: >) with NaN above every number (PyTorch's rule; NaNs
//    compare equal), equal values by index, pads after everything.  With
//    every key distinct the network's result is the unique sorted order,
//    so the sort is stable whatever the network does, and -0 and +0 keep
//    their order as equal values.
//  - Cost: log2(N2) * (log2(N2) + 1) / 2 launches of N2/2 lanes per row
//    (a row of 1000: 55 launches of 512 lanes; of 2^16: 136 of 2^15), plus
//    one to fill the work copy and one to read it out; memory 12 or 16
//    bytes per padded element.
//
// On top of it: sort (stable or not: the result is the stable one),
// argsort and msort (ATen composes them of sort), topk (the first k of
// the descending or ascending order: ties by index), kthvalue, median and
// nanmedian along a dim (a kernel counts a row's NaNs to find the
// position) and over all elements, unique (sorted; return_inverse and
// return_counts: a SCAN numbers the runs of equal values, one host read
// of the count as on CUDA, then the first of each run, the inverse and
// the counts are stored by one kernel; unique_consecutive of all elements
// is the same on the unsorted elements), and searchsorted and bucketize,
// which need no sort: each value runs PyTorch's binary search unrolled
// into ceil(log2(n + 1)) steps of masked gathers (a program per step
// count), so the NaN and sorter rules are the CPU's.  A dtype the card
// does not hold, more than 6 dims that do not collapse, or an argument
// form not handled here goes to the counted CPU fallback (which also
// raises PyTorch's errors for malformed arguments).
#include "kernels.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <vector>

namespace spyre_torch {

using namespace kgen;

namespace {

constexpr uint32_t I = SPYRE_KTYPE_I64;

enum SortKind : uint32_t {
	SK_INIT = 1,	// work copy of the rows
	SK_STAGE,	// one compare-exchange stage of the network
	SK_EMIT,	// a range of sorted positions out of the work copy
	SK_MEDIAN,	// the median position of each row (NaN count)
	SK_SEARCH,	// searchsorted's binary search
	SK_UNIQ_SCAN,	// unique: the run number of each sorted element
	SK_UNIQ_OUT,	// unique: values, inverse, counts
};

bool on_card(const at::Tensor &t)
{
	return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 &&
	       kdtype(t.scalar_type()) != 0;
}

// The work copy's key dtype for values of dtype @t.
at::ScalarType key_type(at::ScalarType t)
{
	if (at::isFloatingType(t))
		return at::kFloat;
	return t == at::kLong ? at::kLong : at::kInt;
}

int64_t pow2_ceil(int64_t n)
{
	int64_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

int log2_exact(int64_t p)
{
	int s = 0;
	while ((int64_t{1} << s) < p)
		s++;
	return s;
}

// The work copy of the rows of a tensor: keys and indices [B, N2], row b
// being the b-th (row-major) index of the batch dims @bsz.
struct Work {
	at::Tensor kv, ki;
	std::vector<int64_t> bsz;
	int64_t n = 0, n2 = 0, rows = 0;
};

// The element strides of the work copy over a space of @bsz followed by
// one dim along the row.
std::vector<int64_t> work_strides(const Work &w)
{
	std::vector<int64_t> st(w.bsz.size() + 1);
	int64_t s = w.n2;
	for (size_t d = w.bsz.size(); d-- > 0;) {
		st[d] = s;
		s *= w.bsz[d];
	}
	st[w.bsz.size()] = 1;
	return st;
}

// ---- the work copy ---------------------------------------------------------------

struct InitBuild {
	int np;
	uint32_t x_dt, k_dt;
};

// Operands x, kv, ki; params P0 = N2 - 1, P1 = n, then the strides of x
// and of kv (ki's are kv's).  kv = x (pads 0), ki = the position in the
// row (the kv offset's low bits).
constexpr unsigned int kInitStrides = 2;

int build_init(struct spyre_kernel **kp, const void *ctx)
{
	const InitBuild &p = *static_cast<const InitBuild *>(ctx);
	uint32_t dts[3] = {p.x_dt, p.k_dt, SPYRE_DTYPE_INT64};
	unsigned int np = static_cast<unsigned int>(p.np);
	int rc = spyre_kernel_create(dts, 3, kInitStrides + 2 * np, np, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	int ox = point_offset(b, p.np, kInitStrides);
	int ok = point_offset(b, p.np, kInitStrides + np);
	int j = b.op(SPYRE_KOP_AND, ok, b.param(I, 0));
	int live = b.cmp(SPYRE_KCMP_LT, j, b.param(I, 1));
	int v = b.cvt(spyre_kernel_load(b.k, 0, ox, live, NONE), vtype(p.k_dt));
	spyre_kernel_store(b.k, 1, ok, v, NONE, 0);
	spyre_kernel_store(b.k, 2, ok, j, NONE, 0);
	return spyre_kernel_error(b.k);
}

struct StageBuild {
	uint32_t k_dt;
	bool desc;
};

// Params of a stage: P0 N2 (row stride), P1 log2(j), P2 log2(j) + 1,
// P3 j - 1, P4 j, P5 k, P6 n.
int build_stage(struct spyre_kernel **kp, const void *ctx)
{
	const StageBuild &p = *static_cast<const StageBuild *>(ctx);
	uint32_t dts[2] = {p.k_dt, SPYRE_DTYPE_INT64};
	int rc = spyre_kernel_create(dts, 2, 7, 2, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	int row = b.mul(spyre_kernel_idx(b.k, I, 0), b.param(I, 0));
	int t = spyre_kernel_idx(b.k, I, 1);
	int lo = b.op(SPYRE_KOP_OR,
		      b.op(SPYRE_KOP_SHL, b.op(SPYRE_KOP_SHR, t, b.param(I, 1)),
			   b.param(I, 2)),
		      b.op(SPYRE_KOP_AND, t, b.param(I, 3)));
	int hi = b.add(lo, b.param(I, 4));
	int asc = b.cmp(SPYRE_KCMP_EQ, b.op(SPYRE_KOP_AND, lo, b.param(I, 5)),
			b.c(I, 0));
	int olo = b.add(row, lo), ohi = b.add(row, hi);
	int va = spyre_kernel_load(b.k, 0, olo, NONE, NONE);
	int vb = spyre_kernel_load(b.k, 0, ohi, NONE, NONE);
	int ia = spyre_kernel_load(b.k, 1, olo, NONE, NONE);
	int ib = spyre_kernel_load(b.k, 1, ohi, NONE, NONE);
	int n = b.param(I, 6);
	bool fl = p.k_dt == SPYRE_DTYPE_FP32;
	// before(x, y): x precedes y in the final order
	auto before = [&](int vx, int ix, int vy, int iy) {
		int px = b.cmp(SPYRE_KCMP_GE, ix, n);
		int py = b.cmp(SPYRE_KCMP_GE, iy, n);
		int ilt = b.cmp(SPYRE_KCMP_LT, ix, iy);
		int strict, eq;
		if (fl) {
			int nx = b.un(SPYRE_KOP_ISNAN, vx);
			int ny = b.un(SPYRE_KOP_ISNAN, vy);
			// ascending: x < y, NaN above everything; descending:
			// x > y, NaN first
			strict = p.desc ?
				b.op(SPYRE_KOP_AND, b.un(SPYRE_KOP_NOT, ny),
				     b.op(SPYRE_KOP_OR, nx,
					  b.cmp(SPYRE_KCMP_GT, vx, vy))) :
				b.op(SPYRE_KOP_AND, b.un(SPYRE_KOP_NOT, nx),
				     b.op(SPYRE_KOP_OR, ny,
					  b.cmp(SPYRE_KCMP_LT, vx, vy)));
			eq = b.op(SPYRE_KOP_OR, b.cmp(SPYRE_KCMP_EQ, vx, vy),
				  b.op(SPYRE_KOP_AND, nx, ny));
		} else {
			strict = b.cmp(p.desc ? SPYRE_KCMP_GT : SPYRE_KCMP_LT,
				       vx, vy);
			eq = b.cmp(SPYRE_KCMP_EQ, vx, vy);
		}
		int real = b.op(SPYRE_KOP_OR, strict, b.op(SPYRE_KOP_AND, eq, ilt));
		// a pad follows every element and the pads with a larger index
		return b.sel(px, b.op(SPYRE_KOP_AND, py, ilt),
			     b.op(SPYRE_KOP_OR, py, real));
	};
	int swap = b.sel(asc, before(vb, ib, va, ia), before(va, ia, vb, ib));
	spyre_kernel_store(b.k, 0, olo, b.sel(swap, vb, va), NONE, 0);
	spyre_kernel_store(b.k, 0, ohi, b.sel(swap, va, vb), NONE, 0);
	spyre_kernel_store(b.k, 1, olo, b.sel(swap, ib, ia), NONE, 0);
	spyre_kernel_store(b.k, 1, ohi, b.sel(swap, ia, ib), NONE, 0);
	return spyre_kernel_error(b.k);
}

// Sort the rows of @x (on the card, dim() >= 1, numel() > 0) along @dim
// (wrapped) into @w.  False, nothing launched, when the card cannot (more
// than 6 dims left after collapsing, a program refused).
bool sort_rows(const at::Tensor &x, int64_t dim, bool desc, Work &w)
{
	at::Tensor xm = x.movedim(dim, -1);
	w.bsz.assign(xm.sizes().begin(), xm.sizes().end() - 1);
	w.n = xm.size(-1);
	w.n2 = pow2_ceil(w.n);
	w.rows = 1;
	for (int64_t s : w.bsz)
		w.rows *= s;
	int card = x.device().index();
	c10::DeviceGuard g(x.device());
	at::ScalarType kt = key_type(x.scalar_type());
	w.kv = at::empty({w.rows, w.n2}, x.options().dtype(kt));
	w.ki = at::empty({w.rows, w.n2}, x.options().dtype(at::kLong));

	// the work copy: a space of [batch..., N2] over x's strides, the lanes
	// past n masked
	std::vector<int64_t> shape = w.bsz;
	shape.push_back(w.n2);
	std::vector<int64_t> xst(xm.strides().begin(), xm.strides().end());
	std::vector<int64_t> kst = work_strides(w);
	Space s;
	s.init(shape);
	s.add_strides(xst.data());
	s.add_strides(kst.data());
	if (!s.collapse())
		return false;
	InitBuild ib{s.np, kdtype(x.scalar_type()), kdtype(kt)};
	Key key;
	key.op = kOpSort + SK_INIT;
	key.npdims = static_cast<uint8_t>(s.np);
	key.dt[0] = static_cast<uint8_t>(ib.x_dt);
	key.dt[1] = static_cast<uint8_t>(ib.k_dt);
	const Prog *init = program(card, key, build_init, &ib);
	StageBuild sb{kdtype(kt), desc};
	Key skey;
	skey.op = kOpSort + SK_STAGE;
	skey.variant = desc;
	skey.dt[0] = static_cast<uint8_t>(sb.k_dt);
	const Prog *stage = program(card, skey, build_stage, &sb);
	if (init->err < 0 || stage->err < 0)
		return false;

	uint64_t xext = 1;
	for (int64_t d = 0; d < xm.dim(); d++)
		xext += static_cast<uint64_t>(xm.size(d) - 1) *
			static_cast<uint64_t>(xm.stride(d));
	uint64_t wext = static_cast<uint64_t>(w.rows * w.n2);
	unsigned int np = static_cast<unsigned int>(s.np);
	{
		Launch L;
		L.params[0] = static_cast<uint64_t>(w.n2 - 1);
		L.params[1] = static_cast<uint64_t>(w.n);
		L.operand(0, xm, xext);
		L.operand(1, w.kv, wext);
		L.operand(2, w.ki, wext);
		L.strides(s, 0, kInitStrides);
		L.strides(s, 1, kInitStrides + np);
		L.sizes(s);
		run(card, init, L, 3, kInitStrides + 2 * np);
	}
	for (int64_t k = 2; k <= w.n2; k <<= 1) {
		for (int64_t j = k >> 1; j > 0; j >>= 1) {
			Launch L;
			int sj = log2_exact(j);
			L.params[0] = static_cast<uint64_t>(w.n2);
			L.params[1] = static_cast<uint64_t>(sj);
			L.params[2] = static_cast<uint64_t>(sj + 1);
			L.params[3] = static_cast<uint64_t>(j - 1);
			L.params[4] = static_cast<uint64_t>(j);
			L.params[5] = static_cast<uint64_t>(k);
			L.params[6] = static_cast<uint64_t>(w.n);
			L.operand(0, w.kv, wext);
			L.operand(1, w.ki, wext);
			L.l.npdims = 2;
			L.l.size[0] = static_cast<uint64_t>(w.rows);
			L.l.size[1] = static_cast<uint64_t>(w.n2 / 2);
			run(card, stage, L, 2, 7);
		}
	}
	return true;
}

// ---- reading the work copy out ------------------------------------------------------

// In a pick program (operands: the work copy's keys and indices, then
// values and indices out), load the key and index at work element @ok and
// store them, converted to @v_dt and @i_dt, at the point's offsets into
// values and indices (their strides: params @first + np and @first + 2 np).
void store_pick(B &b, int np, unsigned int first, int ok, uint32_t v_dt,
		uint32_t i_dt)
{
	unsigned int n = static_cast<unsigned int>(np);
	int v = spyre_kernel_load(b.k, 0, ok, NONE, NONE);
	int i = spyre_kernel_load(b.k, 1, ok, NONE, NONE);
	spyre_kernel_store(b.k, 2, point_offset(b, np, first + n),
			   b.cvt(v, vtype(v_dt)), NONE, 0);
	spyre_kernel_store(b.k, 3, point_offset(b, np, first + 2 * n),
			   b.cvt(i, vtype(i_dt)), NONE, 0);
}

// @s: the points of @vals with the strides of the work copy (@kst, one per
// dim of @vals), @vals and @idx, collapsed; false if that fails.
bool pick_space(Space &s, const std::vector<int64_t> &kst,
		const at::Tensor &vals, const at::Tensor &idx)
{
	std::vector<int64_t> vst(vals.strides().begin(), vals.strides().end());
	std::vector<int64_t> ist(idx.strides().begin(), idx.strides().end());
	s.init(vals.sizes());
	s.add_strides(kst.data());
	s.add_strides(vst.data());
	s.add_strides(ist.data());
	return s.collapse();
}

// A pick launch's operands (@w's work copy, @vals, @idx), the strides of
// space @s from param @first, and its sizes.
void pick_launch(Launch &L, const Work &w, const at::Tensor &vals,
		 const at::Tensor &idx, const Space &s, unsigned int first)
{
	unsigned int np = static_cast<unsigned int>(s.np);
	uint64_t wext = static_cast<uint64_t>(w.rows * w.n2);
	L.operand(0, w.kv, wext);
	L.operand(1, w.ki, wext);
	L.operand(2, vals, s.extent(1));
	L.operand(3, idx, s.extent(2));
	for (int o = 0; o < 3; o++)
		L.strides(s, o, first + o * np);
	L.sizes(s);
}

struct EmitBuild {
	int np;
	uint32_t k_dt, v_dt, i_dt;
};

// Operands kv, ki, values, indices; params P0 the first position, then
// the strides of kv, values, indices.
constexpr unsigned int kEmitStrides = 1;

int build_emit(struct spyre_kernel **kp, const void *ctx)
{
	const EmitBuild &p = *static_cast<const EmitBuild *>(ctx);
	uint32_t dts[4] = {p.k_dt, SPYRE_DTYPE_INT64, p.v_dt, p.i_dt};
	unsigned int np = static_cast<unsigned int>(p.np);
	int rc = spyre_kernel_create(dts, 4, kEmitStrides + 3 * np, np, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	int ok = b.add(point_offset(b, p.np, kEmitStrides), b.param(I, 0));
	store_pick(b, p.np, kEmitStrides, ok, p.v_dt, p.i_dt);
	return spyre_kernel_error(b.k);
}

// Positions [@pos, @pos + count) of the sorted rows of @w into @vals and
// @idx, both of sizes [batch..., count] (the sorted dim moved last).
bool emit(const Work &w, const at::Tensor &vals, const at::Tensor &idx,
	  int64_t pos)
{
	if (vals.numel() == 0)
		return true;
	int card = vals.device().index();
	Space s;
	if (!pick_space(s, work_strides(w), vals, idx))
		return false;
	EmitBuild eb{s.np, kdtype(w.kv.scalar_type()), kdtype(vals.scalar_type()),
		     kdtype(idx.scalar_type())};
	Key key;
	key.op = kOpSort + SK_EMIT;
	key.npdims = static_cast<uint8_t>(s.np);
	key.dt[0] = static_cast<uint8_t>(eb.k_dt);
	key.dt[1] = static_cast<uint8_t>(eb.v_dt);
	key.dt[2] = static_cast<uint8_t>(eb.i_dt);
	const Prog *prog = program(card, key, build_emit, &eb);
	if (prog->err < 0)
		return false;
	unsigned int np = static_cast<unsigned int>(s.np);
	Launch L;
	L.params[0] = static_cast<uint64_t>(pos);
	pick_launch(L, w, vals, idx, s, kEmitStrides);
	run(card, prog, L, 4, kEmitStrides + 3 * np);
	return true;
}

struct MedianBuild {
	int np;
	uint32_t v_dt, i_dt;
	bool ignore_nan;
};

// Operands kv (f32), ki, values, indices; one reduction dim along the row
// (size n); params P0 n, then the strides of kv, values, indices over the
// batch dims.  Position: median: the first NaN (n - #NaN) when the row has
// one, else (n - 1) / 2; nanmedian: (n - #NaN - 1) / 2 truncated (0 for an
// all-NaN row), as PyTorch's CPU kernels.
constexpr unsigned int kMedStrides = 1;

int build_median(struct spyre_kernel **kp, const void *ctx)
{
	const MedianBuild &p = *static_cast<const MedianBuild *>(ctx);
	uint32_t dts[4] = {SPYRE_DTYPE_FP32, SPYRE_DTYPE_INT64, p.v_dt, p.i_dt};
	unsigned int np = static_cast<unsigned int>(p.np);
	int rc = spyre_kernel_create(dts, 4, kMedStrides + 3 * np, np, 1, kp);
	if (rc)
		return rc;
	B b{*kp};
	int base = point_offset(b, p.np, kMedStrides);
	spyre_kernel_pass(b.k);
	int r = spyre_kernel_idx(b.k, I, SPYRE_KDIM_R0);
	int x = spyre_kernel_load(b.k, 0, b.add(base, r), NONE, NONE);
	int nan = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM,
				      b.cvt(b.un(SPYRE_KOP_ISNAN, x), I), NONE,
				      NONE, NONE);
	spyre_kernel_endpass(b.k);
	int n = b.param(I, 0);
	int one = b.c(I, 1), two = b.c(I, 2);
	int pos;
	if (p.ignore_nan) {
		pos = b.op(SPYRE_KOP_TRUNCDIV, b.sub(b.sub(n, nan), one), two);
	} else {
		pos = b.sel(b.cmp(SPYRE_KCMP_GT, nan, b.c(I, 0)), b.sub(n, nan),
			    b.op(SPYRE_KOP_TRUNCDIV, b.sub(n, one), two));
	}
	store_pick(b, p.np, kMedStrides, b.add(base, pos), p.v_dt, p.i_dt);
	return spyre_kernel_error(b.k);
}

// The median (nanmedian with @ignore_nan) of the sorted rows of @w into
// @vals and @idx of sizes [batch...].
bool emit_median(const Work &w, const at::Tensor &vals, const at::Tensor &idx,
		 bool ignore_nan)
{
	if (w.kv.scalar_type() != at::kFloat)	// no NaN: the middle
		return emit(w, vals.unsqueeze(-1), idx.unsqueeze(-1),
			    (w.n - 1) / 2);
	if (vals.numel() == 0)
		return true;
	int card = vals.device().index();
	std::vector<int64_t> kst = work_strides(w);
	kst.pop_back();
	Space s;
	if (!pick_space(s, kst, vals, idx))
		return false;
	MedianBuild mb{s.np, kdtype(vals.scalar_type()),
		       kdtype(idx.scalar_type()), ignore_nan};
	Key key;
	key.op = kOpSort + SK_MEDIAN;
	key.variant = ignore_nan;
	key.npdims = static_cast<uint8_t>(s.np);
	key.dt[0] = static_cast<uint8_t>(mb.v_dt);
	key.dt[1] = static_cast<uint8_t>(mb.i_dt);
	const Prog *prog = program(card, key, build_median, &mb);
	if (prog->err < 0)
		return false;
	unsigned int np = static_cast<unsigned int>(s.np);
	Launch L;
	L.params[0] = static_cast<uint64_t>(w.n);
	pick_launch(L, w, vals, idx, s, kMedStrides);
	L.l.nrdims = 1;
	L.l.size[SPYRE_KDIM_R0] = static_cast<uint64_t>(w.n);
	run(card, prog, L, 4, kMedStrides + 3 * np);
	return true;
}

// ---- the ops -------------------------------------------------------------------

// @t (an output of a reduction along @dim) as [batch..., 1]: with
// @keepdim it has the dim already.
at::Tensor reduced_view(const at::Tensor &t, int64_t dim, bool keepdim)
{
	at::Tensor v = keepdim ? t : t.unsqueeze(dim);
	return v.movedim(dim, -1);
}

// The output sizes of a selection along @dim of @self: the dim becomes
// @count, or is dropped (!@keepdim with @drop).
std::vector<int64_t> sel_sizes(const at::Tensor &self, int64_t dim,
			       int64_t count, bool drop)
{
	std::vector<int64_t> s(self.sizes().begin(), self.sizes().end());
	if (s.empty())
		return s;
	if (drop)
		s.erase(s.begin() + dim);
	else
		s[static_cast<size_t>(dim)] = count;
	return s;
}

bool outputs_ok(const at::Tensor &self, const at::Tensor &values,
		const at::Tensor &indices)
{
	return on_card(self) && on_card(values) && on_card(indices) &&
	       values.device() == self.device() &&
	       indices.device() == self.device() &&
	       values.scalar_type() == self.scalar_type() &&
	       indices.scalar_type() == at::kLong;
}

// Sort / select positions [@pos, @pos + @count) of @self's rows along
// @dim into @values and @indices (already of their sizes, the dim of
// size @count, or dropped when @count is -1: one position).
bool select_into(const at::Tensor &self, int64_t dim, bool desc, int64_t pos,
		 int64_t count, const at::Tensor &values,
		 const at::Tensor &indices)
{
	bool zd = self.dim() == 0;
	at::Tensor x = zd ? self.view({1}) : self;
	at::Tensor v = zd ? values.view({1}) : values;
	at::Tensor i = zd ? indices.view({1}) : indices;
	if (x.numel() == 0 || v.numel() == 0)
		return true;
	check_overlap(values, {self});
	check_overlap(indices, {self, values});
	Work w;
	if (!sort_rows(x, dim, desc, w))
		return false;
	at::Tensor vm = count < 0 && !zd ? reduced_view(v, dim, false) :
		v.movedim(dim, -1);
	at::Tensor im = count < 0 && !zd ? reduced_view(i, dim, false) :
		i.movedim(dim, -1);
	return emit(w, vm, im, pos);
}

std::tuple<at::Tensor &, at::Tensor &>
k_sort_out(const at::Tensor &self, std::optional<bool> stable, int64_t dim,
	   bool descending, at::Tensor &values, at::Tensor &indices)
{
	if (outputs_ok(self, values, indices)) {
		dim = at::maybe_wrap_dim(dim, self.dim());
		at::native::resize_output(values, self.sizes());
		at::native::resize_output(indices, self.sizes());
		int64_t n = self.dim() ? self.size(dim) : 1;
		if (select_into(self, dim, descending, 0, n, values, indices)) {
			count_native("aten::sort.values_stable");
			return {values, indices};
		}
	}
	return SPYRE_FALLBACK2(sort, values_stable, self, stable, dim,
			       descending, values, indices);
}

std::tuple<at::Tensor, at::Tensor>
k_sort(const at::Tensor &self, std::optional<bool> stable, int64_t dim,
       bool descending)
{
	if (on_card(self)) {
		dim = at::maybe_wrap_dim(dim, self.dim());
		at::Tensor values = at::empty_like(self,
						   at::MemoryFormat::Contiguous);
		at::Tensor indices = at::empty(self.sizes(),
					       self.options().dtype(at::kLong));
		int64_t n = self.dim() ? self.size(dim) : 1;
		if (select_into(self, dim, descending, 0, n, values, indices)) {
			count_native("aten::sort.stable");
			return {values, indices};
		}
	}
	return SPYRE_FALLBACK2(sort, stable, self, stable, dim, descending);
}

std::tuple<at::Tensor &, at::Tensor &>
k_topk_out(const at::Tensor &self, int64_t k, int64_t dim, bool largest,
	   bool sorted, at::Tensor &values, at::Tensor &indices)
{
	if (outputs_ok(self, values, indices)) {
		dim = at::maybe_wrap_dim(dim, self.dim(), true);
		int64_t n = self.dim() ? self.size(dim) : 1;
		TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
		std::vector<int64_t> sz = sel_sizes(self, dim, k, false);
		at::native::resize_output(values, sz);
		at::native::resize_output(indices, sz);
		if (select_into(self, dim, largest, 0, k, values, indices)) {
			count_native("aten::topk.values");
			return {values, indices};
		}
	}
	return SPYRE_FALLBACK2(topk, values, self, k, dim, largest, sorted,
			       values, indices);
}

std::tuple<at::Tensor, at::Tensor>
k_topk(const at::Tensor &self, int64_t k, int64_t dim, bool largest,
       bool sorted)
{
	if (on_card(self)) {
		at::Tensor values = at::empty({0}, self.options());
		at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
		k_topk_out(self, k, dim, largest, sorted, values,
			   indices);
		return {values, indices};
	}
	return SPYRE_FALLBACK(topk, self, k, dim, largest, sorted);
}

std::tuple<at::Tensor &, at::Tensor &>
k_kthvalue_out(const at::Tensor &self, int64_t k, int64_t dim, bool keepdim,
	       at::Tensor &values, at::Tensor &indices)
{
	if (outputs_ok(self, values, indices)) {
		dim = at::maybe_wrap_dim(dim, self.dim(), true);
		int64_t n = self.dim() ? self.size(dim) : 1;
		TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k "
			    "out of range for dimension ", dim);
		std::vector<int64_t> sz = sel_sizes(self, dim, 1, !keepdim);
		at::native::resize_output(values, sz);
		at::native::resize_output(indices, sz);
		if (select_into(self, dim, false, k - 1, keepdim ? 1 : -1,
				values, indices)) {
			count_native("aten::kthvalue.values");
			return {values, indices};
		}
	}
	return SPYRE_FALLBACK2(kthvalue, values, self, k, dim, keepdim, values,
			       indices);
}

// median / nanmedian along @dim into @values, @indices (resized here).
bool median_into(const at::Tensor &self, int64_t dim, bool keepdim,
		 bool ignore_nan, at::Tensor &values, at::Tensor &indices)
{
	if (self.dim() && self.size(dim) == 0)
		return false;	// the CPU raises
	std::vector<int64_t> sz = sel_sizes(self, dim, 1, !keepdim);
	at::native::resize_output(values, sz);
	at::native::resize_output(indices, sz);
	bool zd = self.dim() == 0;
	at::Tensor x = zd ? self.view({1}) : self;
	if (x.numel() == 0)
		return true;
	check_overlap(values, {self});
	check_overlap(indices, {self, values});
	Work w;
	if (!sort_rows(x, dim, false, w))
		return false;
	at::Tensor vm = zd ? values.view({1}) : reduced_view(values, dim, keepdim);
	at::Tensor im = zd ? indices.view({1}) : reduced_view(indices, dim, keepdim);
	// [batch..., 1] -> [batch...]
	return emit_median(w, vm.squeeze(-1), im.squeeze(-1), ignore_nan);
}

#define MEDIAN(name, IGNORE)                                                   \
	std::tuple<at::Tensor &, at::Tensor &>                                 \
	k_##name##_out(const at::Tensor &self, int64_t dim, bool keepdim,      \
		       at::Tensor &values, at::Tensor &indices)                \
	{                                                                      \
		if (outputs_ok(self, values, indices)) {                       \
			int64_t d = at::maybe_wrap_dim(dim, self.dim(), true); \
			if (median_into(self, d, keepdim, IGNORE, values,      \
					indices)) {                            \
				count_native("aten::" #name ".dim_values");    \
				return {values, indices};                      \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK2(name, dim_values, self, dim, keepdim,   \
				       values, indices);                       \
	}                                                                      \
	at::Tensor k_##name##_all(const at::Tensor &self)                      \
	{                                                                      \
		if (on_card(self) && self.numel() > 0) {                       \
			at::Tensor values = at::empty({}, self.options());     \
			at::Tensor indices = at::empty(                        \
				{}, self.options().dtype(at::kLong));          \
			if (median_into(self.reshape({-1}), 0, false, IGNORE,  \
					values, indices)) {                    \
				count_native("aten::" #name);                  \
				return values;                                 \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK(name, self);                             \
	}

MEDIAN(median, false)
MEDIAN(nanmedian, true)

// ---- searchsorted, bucketize -----------------------------------------------------

struct SearchBuild {
	int np, steps;
	uint32_t seq_dt, x_dt, out_dt, sorter_dt;	// sorter_dt 0: none
	bool right;
};

// Operands seq, x, out (, sorter); params P0 n, P1 seq's stride along the
// sequence, P2 sorter's, then the strides over the space (x's shape) of
// seq (its row: 0 along the last dim), x, out (, sorter).
constexpr unsigned int kSearchStrides = 3;

int build_search(struct spyre_kernel **kp, const void *ctx)
{
	const SearchBuild &p = *static_cast<const SearchBuild *>(ctx);
	uint32_t dts[4] = {p.seq_dt, p.x_dt, p.out_dt, p.sorter_dt};
	unsigned int nops = p.sorter_dt ? 4 : 3;
	unsigned int np = static_cast<unsigned int>(p.np);
	int rc = spyre_kernel_create(dts, nops, kSearchStrides + nops * np, np,
				     0, kp);
	if (rc)
		return rc;
	B b{*kp};
	int sb = point_offset(b, p.np, kSearchStrides);
	int x = spyre_kernel_load(b.k, 1, point_offset(b, p.np,
						      kSearchStrides + np),
				  NONE, NONE);
	int n = b.param(I, 0);
	int sst = b.param(I, 1);
	int sob = NONE, sost = NONE;
	if (p.sorter_dt) {
		sob = point_offset(b, p.np, kSearchStrides + 3 * np);
		sost = b.param(I, 2);
	}
	int start = b.c(I, 0), end = n, one = b.c(I, 1), zero = b.c(I, 0);
	for (int s = 0; s < p.steps; s++) {
		int act = b.cmp(SPYRE_KCMP_LT, start, end);
		int mid = b.add(start, b.op(SPYRE_KOP_SHR, b.sub(end, start), one));
		int pos = mid;
		if (p.sorter_dt) {
			pos = b.cvt(spyre_kernel_load(b.k, 3, b.add(sob,
								 b.mul(mid, sost)),
						     act, NONE), I);
			spyre_kernel_check(b.k, b.op(SPYRE_KOP_AND,
						     b.cmp(SPYRE_KCMP_GE, pos, zero),
						     b.cmp(SPYRE_KCMP_LT, pos, n)),
					   act);
		}
		int v = spyre_kernel_load(b.k, 0, b.add(sb, b.mul(pos, sst)), act,
					  NONE);
		// PyTorch's test: lower bound !(v >= x), upper bound !(v > x)
		int go = b.un(SPYRE_KOP_NOT, b.cmp(p.right ? SPYRE_KCMP_GT :
						   SPYRE_KCMP_GE, v, x));
		int up = b.op(SPYRE_KOP_AND, act, go);
		int down = b.op(SPYRE_KOP_AND, act, b.un(SPYRE_KOP_NOT, go));
		start = b.sel(up, b.add(mid, one), start);
		end = b.sel(down, mid, end);
	}
	spyre_kernel_store(b.k, 2, point_offset(b, p.np, kSearchStrides + 2 * np),
			   b.cvt(start, vtype(p.out_dt)), NONE, 0);
	return spyre_kernel_error(b.k);
}

// searchsorted of @x in @seq (the last dim; 1-D, or @x's leading dims)
// into @out (@x's sizes); false when the card cannot or the arguments are
// not the plain forms (the CPU then decides, errors included).
bool search_into(const at::Tensor &seq, const at::Tensor &x, bool right,
		 const at::Tensor &sorter, const at::Tensor &out)
{
	if (!on_card(seq) || !on_card(x) || !on_card(out) ||
	    x.device() != seq.device() || out.device() != seq.device() ||
	    seq.scalar_type() != x.scalar_type() || seq.scalar_type() == at::kBool ||
	    seq.dim() == 0 || out.sizes() != x.sizes())
		return false;
	if (sorter.defined() && (!on_card(sorter) || sorter.device() != seq.device() ||
				 sorter.scalar_type() != at::kLong ||
				 sorter.sizes() != seq.sizes()))
		return false;
	bool flat = seq.dim() == 1;
	if (!flat) {
		if (seq.dim() != x.dim() ||
		    seq.sizes().slice(0, seq.dim() - 1) !=
		    x.sizes().slice(0, x.dim() - 1))
			return false;
	}
	check_overlap(out, {seq, x});
	if (out.numel() == 0)
		return true;
	int64_t n = seq.size(-1);
	int steps = 0;
	while ((int64_t{1} << steps) <= n)
		steps++;
	// the space: x's sizes (a 0-d x: one point)
	at::Tensor x1 = x.dim() ? x : x.view({1});
	at::Tensor o1 = x.dim() ? out : out.view({1});
	int64_t nd = x1.dim();
	std::vector<int64_t> sst(static_cast<size_t>(nd), 0), orst(sst);
	if (!flat) {
		for (int64_t d = 0; d + 1 < nd; d++) {
			sst[static_cast<size_t>(d)] = seq.stride(d);
			if (sorter.defined())
				orst[static_cast<size_t>(d)] = sorter.stride(d);
		}
	}
	std::vector<int64_t> xst(x1.strides().begin(), x1.strides().end());
	std::vector<int64_t> ost(o1.strides().begin(), o1.strides().end());
	Space s;
	s.init(x1.sizes());
	s.add_strides(sst.data());
	s.add_strides(xst.data());
	s.add_strides(ost.data());
	if (sorter.defined())
		s.add_strides(orst.data());
	if (!s.collapse())
		return false;
	SearchBuild sb{s.np, steps, kdtype(seq.scalar_type()),
		       kdtype(x.scalar_type()), kdtype(out.scalar_type()),
		       sorter.defined() ? SPYRE_DTYPE_INT64 : 0u, right};
	Key key;
	key.op = kOpSort + SK_SEARCH;
	key.variant = static_cast<uint32_t>(steps) << 2 | (right ? 1 : 0) |
		      (sorter.defined() ? 2 : 0);
	key.npdims = static_cast<uint8_t>(s.np);
	key.dt[0] = static_cast<uint8_t>(sb.seq_dt);
	key.dt[1] = static_cast<uint8_t>(sb.out_dt);
	int card = seq.device().index();
	c10::DeviceGuard g(seq.device());
	const Prog *prog = program(card, key, build_search, &sb);
	if (prog->err < 0)
		return false;
	unsigned int np = static_cast<unsigned int>(s.np);
	unsigned int nops = sorter.defined() ? 4 : 3;
	Launch L;
	L.params[0] = static_cast<uint64_t>(n);
	L.params[1] = static_cast<uint64_t>(seq.stride(-1));
	L.params[2] = sorter.defined() ? static_cast<uint64_t>(sorter.stride(-1)) :
		      0;
	L.operand(0, seq, n ? span(seq) : 0);
	L.operand(1, x1, s.extent(1));
	L.operand(2, o1, s.extent(2));
	if (sorter.defined())
		L.operand(3, sorter, n ? span(sorter) : 0);
	for (unsigned int o = 0; o < nops; o++)
		L.strides(s, static_cast<int>(o), kSearchStrides + o * np);
	L.sizes(s);
	run(card, prog, L, nops, kSearchStrides + nops * np);
	return true;
}

// side= wins over right= (PyTorch raises when they disagree: the fallback
// does); -1 when they disagree.
int side_right(bool right, std::optional<c10::string_view> side)
{
	if (!side.has_value())
		return right;
	if (*side == c10::string_view("right"))
		return 1;
	if (*side == c10::string_view("left"))
		return right ? -1 : 0;
	return -1;
}

at::Tensor &k_searchsorted_out(const at::Tensor &seq, const at::Tensor &self,
			       bool out_int32, bool right,
			       std::optional<c10::string_view> side,
			       const std::optional<at::Tensor> &sorter,
			       at::Tensor &out)
{
	int r = side_right(right, side);
	at::ScalarType ot = out_int32 ? at::kInt : at::kLong;
	if (r >= 0 && on_card(out) && out.scalar_type() == ot &&
	    on_card(self)) {
		at::native::resize_output(out, self.sizes());
		if (search_into(seq, self, r, sorter.value_or(at::Tensor()),
				out)) {
			count_native("aten::searchsorted.Tensor_out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(searchsorted, Tensor_out, seq, self, out_int32,
			       right, side, sorter, out);
}

at::Tensor k_searchsorted(const at::Tensor &seq, const at::Tensor &self,
			  bool out_int32, bool right,
			  std::optional<c10::string_view> side,
			  const std::optional<at::Tensor> &sorter)
{
	int r = side_right(right, side);
	if (r >= 0 && on_card(self)) {
		at::Tensor out = at::empty(self.sizes(), self.options().dtype(
			out_int32 ? at::kInt : at::kLong));
		if (search_into(seq, self, r, sorter.value_or(at::Tensor()),
				out)) {
			count_native("aten::searchsorted.Tensor");
			return out;
		}
	}
	return SPYRE_FALLBACK2(searchsorted, Tensor, seq, self, out_int32, right,
			       side, sorter);
}

at::Tensor k_searchsorted_scalar(const at::Tensor &seq, const at::Scalar &self,
				 bool out_int32, bool right,
				 std::optional<c10::string_view> side,
				 const std::optional<at::Tensor> &sorter)
{
	int r = side_right(right, side);
	if (r >= 0 && on_card(seq) && seq.dim() == 1) {
		at::Tensor x = at::scalar_tensor(self, seq.options());
		at::Tensor out = at::empty({}, seq.options().dtype(
			out_int32 ? at::kInt : at::kLong));
		if (search_into(seq, x, r, sorter.value_or(at::Tensor()), out)) {
			count_native("aten::searchsorted.Scalar");
			return out;
		}
	}
	return SPYRE_FALLBACK2(searchsorted, Scalar, seq, self, out_int32, right,
			       side, sorter);
}

at::Tensor k_bucketize(const at::Tensor &self, const at::Tensor &boundaries,
		       bool out_int32, bool right)
{
	if (on_card(self) && boundaries.dim() == 1) {
		at::Tensor out = at::empty(self.sizes(), self.options().dtype(
			out_int32 ? at::kInt : at::kLong));
		if (search_into(boundaries, self, right, at::Tensor(), out)) {
			count_native("aten::bucketize.Tensor");
			return out;
		}
	}
	return SPYRE_FALLBACK2(bucketize, Tensor, self, boundaries, out_int32,
			       right);
}

at::Tensor &k_bucketize_out(const at::Tensor &self,
			    const at::Tensor &boundaries, bool out_int32,
			    bool right, at::Tensor &out)
{
	if (on_card(self) && on_card(out) && boundaries.dim() == 1 &&
	    out.scalar_type() == (out_int32 ? at::kInt : at::kLong)) {
		at::native::resize_output(out, self.sizes());
		if (search_into(boundaries, self, right, at::Tensor(), out)) {
			count_native("aten::bucketize.Tensor_out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(bucketize, Tensor_out, self, boundaries,
			       out_int32, right, out);
}

at::Tensor k_bucketize_scalar(const at::Scalar &self,
			      const at::Tensor &boundaries, bool out_int32,
			      bool right)
{
	if (on_card(boundaries) && boundaries.dim() == 1) {
		at::Tensor x = at::scalar_tensor(self, boundaries.options());
		at::Tensor out = at::empty({}, boundaries.options().dtype(
			out_int32 ? at::kInt : at::kLong));
		if (search_into(boundaries, x, right, at::Tensor(), out)) {
			count_native("aten::bucketize.Scalar");
			return out;
		}
	}
	return SPYRE_FALLBACK2(bucketize, Scalar, self, boundaries, out_int32,
			       right);
}

// ---- unique ------------------------------------------------------------------------

// Operands kv, G (i64): one point, one reduction dim over the N sorted
// elements; G[r] = the number of runs of equal values (NaNs all
// distinct, as on the CPU) that start at or before r, minus 1.
int build_uniq_scan(struct spyre_kernel **kp, const void *ctx)
{
	uint32_t kdt = *static_cast<const uint32_t *>(ctx);
	uint32_t dts[2] = {kdt, SPYRE_DTYPE_INT64};
	int rc = spyre_kernel_create(dts, 2, 0, 0, 1, kp);
	if (rc)
		return rc;
	B b{*kp};
	spyre_kernel_pass(b.k);
	int r = spyre_kernel_idx(b.k, I, SPYRE_KDIM_R0);
	int first = b.cmp(SPYRE_KCMP_EQ, r, b.c(I, 0));
	int v = spyre_kernel_load(b.k, 0, r, NONE, NONE);
	int pv = spyre_kernel_load(b.k, 0, b.sub(r, b.c(I, 1)),
				   b.un(SPYRE_KOP_NOT, first), NONE);
	int mark = b.op(SPYRE_KOP_OR, first, b.cmp(SPYRE_KCMP_NE, v, pv));
	int g = spyre_kernel_scan(b.k, SPYRE_KRED_SUM, b.cvt(mark, I), NONE);
	spyre_kernel_store(b.k, 1, r, b.sub(g, b.c(I, 1)), NONE, 0);
	spyre_kernel_endpass(b.k);
	return spyre_kernel_error(b.k);
}

struct UniqBuild {
	uint32_t k_dt, v_dt;
	bool inverse, counts;
};

// Operands kv, ki, G, values, inverse, counts over the N sorted elements:
// the first element of each run to values[G], G to inverse[ki], and 1
// added to counts[G] (a SCATTER ADD).
int build_uniq_out(struct spyre_kernel **kp, const void *ctx)
{
	const UniqBuild &p = *static_cast<const UniqBuild *>(ctx);
	uint32_t dts[6] = {p.k_dt, SPYRE_DTYPE_INT64, SPYRE_DTYPE_INT64, p.v_dt,
			   SPYRE_DTYPE_INT64, SPYRE_DTYPE_INT64};
	int rc = spyre_kernel_create(dts, 6, 0, 1, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	int r = spyre_kernel_idx(b.k, I, 0);
	int first = b.cmp(SPYRE_KCMP_EQ, r, b.c(I, 0));
	int v = spyre_kernel_load(b.k, 0, r, NONE, NONE);
	int pv = spyre_kernel_load(b.k, 0, b.sub(r, b.c(I, 1)),
				   b.un(SPYRE_KOP_NOT, first), NONE);
	int mark = b.op(SPYRE_KOP_OR, first, b.cmp(SPYRE_KCMP_NE, v, pv));
	int g = spyre_kernel_load(b.k, 2, r, NONE, NONE);
	spyre_kernel_store(b.k, 3, g, b.cvt(v, vtype(p.v_dt)), mark, 0);
	if (p.inverse)
		spyre_kernel_store(b.k, 4, spyre_kernel_load(b.k, 1, r, NONE,
							     NONE), g, NONE, 0);
	if (p.counts)
		spyre_kernel_scatter(b.k, 5, g, b.c(I, 1), NONE,
				     SPYRE_KSCAT_ADD);
	return spyre_kernel_error(b.k);
}

// The runs of equal values of @kv (keys of dtype @kdt, @N of them in order,
// @kext elements long) as unique's results for @self: the first value of
// each run, with @inverse the run of each element of @self (element ki[r]
// of @self is kv[r]), with @counts each run's length.  False when the card
// cannot.
bool runs_into(const at::Tensor &self, const at::Tensor &kv,
	       const at::Tensor &ki, uint64_t kext, bool inverse, bool counts,
	       std::tuple<at::Tensor, at::Tensor, at::Tensor> &res)
{
	int64_t N = self.numel();
	int card = self.device().index();
	c10::DeviceGuard g(self.device());
	uint32_t kdt = kdtype(kv.scalar_type());
	Key k1;
	k1.op = kOpSort + SK_UNIQ_SCAN;
	k1.dt[0] = static_cast<uint8_t>(kdt);
	const Prog *scan = program(card, k1, build_uniq_scan, &kdt);
	UniqBuild ub{kdt, kdtype(self.scalar_type()), inverse, counts};
	Key k2;
	k2.op = kOpSort + SK_UNIQ_OUT;
	k2.variant = (inverse ? 1 : 0) | (counts ? 2 : 0);
	k2.dt[0] = static_cast<uint8_t>(kdt);
	k2.dt[1] = static_cast<uint8_t>(ub.v_dt);
	const Prog *outp = program(card, k2, build_uniq_out, &ub);
	if (scan->err < 0 || outp->err < 0)
		return false;
	at::Tensor G = at::empty({N}, self.options().dtype(at::kLong));
	{
		Launch L;
		L.operand(0, kv, kext);
		L.operand(1, G, static_cast<uint64_t>(N));
		L.l.nrdims = 1;
		L.l.size[SPYRE_KDIM_R0] = static_cast<uint64_t>(N);
		run(card, scan, L, 2, 0);
	}
	// the one host read: the number of runs
	int64_t U = G[N - 1].item<int64_t>() + 1;
	at::Tensor vals = at::empty({U}, self.options());
	std::vector<int64_t> isz{0};
	if (inverse)
		isz.assign(self.sizes().begin(), self.sizes().end());
	at::Tensor inv = at::empty(isz, self.options().dtype(at::kLong));
	at::Tensor cnt = counts ? at::zeros({U}, self.options().dtype(at::kLong)) :
		at::empty({0}, self.options().dtype(at::kLong));
	Launch L;
	L.operand(0, kv, kext);
	L.operand(1, ki, inverse ? kext : 0);
	L.operand(2, G, static_cast<uint64_t>(N));
	L.operand(3, vals, static_cast<uint64_t>(U));
	L.operand(4, inv, inverse ? static_cast<uint64_t>(N) : 0);
	L.operand(5, cnt, counts ? static_cast<uint64_t>(U) : 0);
	L.l.npdims = 1;
	L.l.size[0] = static_cast<uint64_t>(N);
	run(card, outp, L, 6, 0);
	res = {vals, inv, cnt};
	return true;
}

// unique's results when @self is empty
void empty_unique(const at::Tensor &self, bool inverse,
		  std::tuple<at::Tensor, at::Tensor, at::Tensor> &res)
{
	std::vector<int64_t> isz{0};
	if (inverse)
		isz.assign(self.sizes().begin(), self.sizes().end());
	res = {at::empty({0}, self.options()),
	       at::empty(isz, self.options().dtype(at::kLong)),
	       at::empty({0}, self.options().dtype(at::kLong))};
}

// torch.unique of all elements (always sorted, as the CPU's): the runs of
// the sorted work copy.  False when the card cannot.
bool unique_into(const at::Tensor &self, bool inverse, bool counts,
		 std::tuple<at::Tensor, at::Tensor, at::Tensor> &res)
{
	if (self.numel() == 0) {
		empty_unique(self, inverse, res);
		return true;
	}
	Work w;
	if (!sort_rows(self.reshape({-1}), 0, false, w))
		return false;
	return runs_into(self, w.kv, w.ki, static_cast<uint64_t>(w.n2),
			 inverse, counts, res);
}

// torch.unique_consecutive of all elements: the runs of the elements in
// their order (NaNs all distinct, as on the CPU).  False when the card
// cannot.
bool unique_consecutive_into(const at::Tensor &self, bool inverse,
			     bool counts,
			     std::tuple<at::Tensor, at::Tensor, at::Tensor> &res)
{
	int64_t N = self.numel();
	if (N == 0) {
		empty_unique(self, inverse, res);
		return true;
	}
	// the sort's key types: f32 holds the half types exactly
	at::ScalarType kt = at::isFloatingType(self.scalar_type()) ? at::kFloat :
		self.scalar_type() == at::kLong ? at::kLong : at::kInt;
	at::Tensor kv = self.reshape({-1}).to(kt).contiguous();
	at::Tensor ki = at::arange(N, self.options().dtype(at::kLong));
	return runs_into(self, kv, ki, static_cast<uint64_t>(N), inverse,
			 counts, res);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_unique2(const at::Tensor &self, bool sorted, bool return_inverse,
	  bool return_counts)
{
	if (on_card(self)) {
		std::tuple<at::Tensor, at::Tensor, at::Tensor> res;
		if (unique_into(self, return_inverse, return_counts,
				res)) {
			count_native("aten::_unique2");
			return res;
		}
	}
	return SPYRE_FALLBACK(_unique2, self, sorted, return_inverse,
			      return_counts);
}

std::tuple<at::Tensor, at::Tensor>
k_unique(const at::Tensor &self, bool sorted, bool return_inverse)
{
	if (on_card(self)) {
		std::tuple<at::Tensor, at::Tensor, at::Tensor> res;
		if (unique_into(self, return_inverse, false, res)) {
			count_native("aten::_unique");
			return {std::get<0>(res), std::get<1>(res)};
		}
	}
	return SPYRE_FALLBACK(_unique, self, sorted, return_inverse);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_unique_consecutive(const at::Tensor &self, bool return_inverse,
		     bool return_counts, std::optional<int64_t> dim)
{
	if (on_card(self) && !dim.has_value()) {
		std::tuple<at::Tensor, at::Tensor, at::Tensor> res;
		if (unique_consecutive_into(self, return_inverse,
					    return_counts, res)) {
			count_native("aten::unique_consecutive");
			return res;
		}
	}
	return SPYRE_FALLBACK(unique_consecutive, self, return_inverse,
			      return_counts, dim);
}

// ---- randperm, repeat_interleave ---------------------------------------------------

// randperm: random 63-bit keys from the card's generator, sorted (stable:
// equal keys, rare, keep their order); the permutation is the sort's
// indices.
at::Tensor &k_randperm_out(int64_t n, std::optional<at::Generator> gen,
			   at::Tensor &out)
{
	TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
	if (on_card(out) && out.scalar_type() != at::kBool &&
	    (out.scalar_type() == at::kLong ||
	     (out.scalar_type() == at::kInt && n <= (int64_t{1} << 31)) ||
	     (at::isFloatingType(out.scalar_type()) && n <= (1 << 11)))) {
		at::native::resize_output(out, {n});
		if (n == 0) {
			count_native("aten::randperm.generator_out");
			return out;
		}
		at::Tensor keys = at::empty({n}, out.options().dtype(at::kLong));
		keys.random_(gen);
		at::Tensor vals = at::empty({n}, keys.options());
		at::Tensor perm = out.scalar_type() == at::kLong &&
			out.is_contiguous() ? out : at::empty({n}, keys.options());
		if (select_into(keys, 0, false, 0, n, vals, perm)) {
			if (!perm.is_same(out))
				out.copy_(perm);
			count_native("aten::randperm.generator_out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(randperm, generator_out, n, gen, out);
}

// repeat_interleave(repeats): index i repeated repeats[i] times, which is
// searchsorted(cumsum(repeats), arange(total), right=True); the total
// (and the check that no repeat is negative) is one host read.
at::Tensor k_repeat_interleave(const at::Tensor &repeats,
			       std::optional<int64_t> output_size)
{
	if (on_card(repeats) && repeats.dim() == 1 &&
	    (repeats.scalar_type() == at::kLong ||
	     repeats.scalar_type() == at::kInt)) {
		if (repeats.numel() == 0) {
			count_native("aten::repeat_interleave.Tensor");
			return at::empty({0}, repeats.options());
		}
		at::Tensor cs = at::cumsum(repeats, 0, at::kLong);
		at::Tensor host = at::stack({cs[-1], repeats.min().to(at::kLong)})
			.cpu();
		TORCH_CHECK(host[1].item<int64_t>() >= 0,
			    "repeats can not be negative");
		int64_t total = output_size.value_or(host[0].item<int64_t>());
		at::Tensor t = at::arange(total, cs.options());
		at::Tensor out = at::empty({total}, repeats.options());
		if (search_into(cs, t, true, at::Tensor(), out)) {
			count_native("aten::repeat_interleave.Tensor");
			return out;
		}
	}
	return SPYRE_FALLBACK2(repeat_interleave, Tensor, repeats, output_size);
}

// multinomial from the card's generator, PyTorch's argument checks (one
// host read for the distribution's checks, as the CPU's): with
// replacement, inverse transform sampling (a uniform draw scaled by the
// row's total, searchsorted right in the row's cumsum: a category of
// probability 0 is never drawn); without, the exponential race CUDA uses
// (E / p for E ~ Exp(1), the k smallest by topk).
at::Tensor k_multinomial(const at::Tensor &self, int64_t n_sample,
			 bool replacement, std::optional<at::Generator> gen)
{
	if (on_card(self) && at::isFloatingType(self.scalar_type()) &&
	    (self.dim() == 1 || self.dim() == 2) && self.numel() > 0) {
		int64_t n = self.size(-1);
		TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
		TORCH_CHECK(replacement || n_sample <= n, "cannot sample "
			    "n_sample > prob_dist.size(-1) samples without "
			    "replacement");
		at::Tensor p = self.to(at::kFloat);
		at::Tensor st = at::stack({p.min(), at::isfinite(p).all().to(at::kFloat),
					   p.sum(-1).min(),
					   (p > 0).sum(-1).min().to(at::kFloat)})
			.cpu();
		const float *h = st.data_ptr<float>();
		TORCH_CHECK(h[0] >= 0 && h[1] != 0, "probability tensor contains "
			    "either `inf`, `nan` or element < 0");
		TORCH_CHECK(h[2] > 0, "invalid multinomial distribution (sum of "
			    "probabilities <= 0)");
		TORCH_CHECK(replacement || h[3] >= n_sample, "invalid multinomial "
			    "distribution (with replacement=False, not enough "
			    "non-negative category to sample)");
		std::vector<int64_t> osz(self.sizes().begin(), self.sizes().end());
		osz.back() = n_sample;
		at::Tensor out;
		if (replacement) {
			at::Tensor cdf = at::cumsum(p, -1);
			at::Tensor u = at::empty(osz, p.options()).uniform_(0, 1, gen);
			u = u * cdf.narrow(-1, n - 1, 1);
			out = at::empty(osz, self.options().dtype(at::kLong));
			if (!search_into(cdf, u, true, at::Tensor(), out))
				out = at::Tensor();
			else
				out.clamp_max_(n - 1);
		} else {
			at::Tensor e = at::empty_like(p).exponential_(1.0, gen);
			out = std::get<1>(at::topk(e / p, n_sample, -1, false));
		}
		if (out.defined()) {
			count_native("aten::multinomial");
			return out;
		}
	}
	return SPYRE_FALLBACK(multinomial, self, n_sample, replacement, gen);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("sort.stable", TORCH_FN(k_sort));
	m.impl("sort.values_stable", TORCH_FN(k_sort_out));
	m.impl("topk", TORCH_FN(k_topk));
	m.impl("topk.values", TORCH_FN(k_topk_out));
	m.impl("kthvalue.values", TORCH_FN(k_kthvalue_out));
	m.impl("median", TORCH_FN(k_median_all));
	m.impl("median.dim_values", TORCH_FN(k_median_out));
	m.impl("nanmedian", TORCH_FN(k_nanmedian_all));
	m.impl("nanmedian.dim_values", TORCH_FN(k_nanmedian_out));
	m.impl("searchsorted.Tensor", TORCH_FN(k_searchsorted));
	m.impl("searchsorted.Tensor_out", TORCH_FN(k_searchsorted_out));
	m.impl("searchsorted.Scalar", TORCH_FN(k_searchsorted_scalar));
	m.impl("bucketize.Tensor", TORCH_FN(k_bucketize));
	m.impl("bucketize.Tensor_out", TORCH_FN(k_bucketize_out));
	m.impl("bucketize.Scalar", TORCH_FN(k_bucketize_scalar));
	m.impl("_unique2", TORCH_FN(k_unique2));
	m.impl("_unique", TORCH_FN(k_unique));
	m.impl("unique_consecutive", TORCH_FN(k_unique_consecutive));
	m.impl("randperm.generator_out", TORCH_FN(k_randperm_out));
	m.impl("repeat_interleave.Tensor", TORCH_FN(k_repeat_interleave));
	m.impl("multinomial", TORCH_FN(k_multinomial));
}

} // namespace spyre_torch
