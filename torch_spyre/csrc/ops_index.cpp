// SPDX-License-Identifier: MIT
// Indexing ops on the card, on three generated kernels of the KERNEL
// command:
//  - a gather: out[p] = src[off_src(p) + idx[off_idx(p)] * stride] (a LOAD
//    at a loaded offset): index_select (and embedding, which ATen composes
//    of it), gather, take, x[idx] (index.Tensor);
//  - a scatter: dst[off_dst(p) + idx[off_idx(p)] * stride] = (or +=)
//    src[off_src(p)] (part 2's SCATTER: lanes in sequential order, so
//    colliding indices give the last value or the sum in element order,
//    the same on every card and run): scatter (also reduce="add"),
//    scatter_add, index_add_,
//    index_copy_, embedding_dense_backward, index_put_ (accumulate or
//    not), and through it index_fill_ and put_;
//  - a strided copy with signed strides and a base offset: flip.
// Several index tensors (and bool masks of several dims, read as the
// indices of their true elements) become one offset per index tuple,
// computed on the card (tuple_offsets()).
// Each index is checked on the card against its dimension (a device-side
// assertion, as CUDA's: an index out of range ends the kernel with an
// ASSERT status that the next synchronizing call raises as RuntimeError,
// and the context's error is sticky); take wraps negative indices as
// PyTorch does.  cat (and stack, which ATen composes of it) and roll are
// copies into slices of the output (copy_on_card()).  A dtype the card
// does not hold, more than 6 dims that do not collapse, or an argument
// form not handled here goes to the counted CPU fallback.
#include "kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace spyre_torch {

using namespace kgen;

namespace {


enum XKind : uint32_t {
	XK_GATHER = 1,
	XK_SCATTER,	// SCATTER STORE
	XK_SCATTER_ADD,	// SCATTER ADD (times alpha with XV_ALPHA)
	XK_STRIDED,	// out[p] = src[base + off_src(p)], signed strides
};

enum XVariant : uint32_t {
	XV_WRAP = 1,	// a negative index counts from the end
	XV_SKIP = 2,	// lanes whose index equals P[kPSkip] do nothing
	XV_ALPHA = 4,	// the scattered value times P[kPAlpha] (bool: and)
	XV_OR = 8,	// bool accumulation: a SCATTER STORE of true where the
			// value is true (element |= value)
};

// Parameters: the indexed dim's size and stride (in the operand the index
// addresses), alpha (bits of the value type), the index to skip, the base
// offset (XK_STRIDED), then each operand's strides in operand order.
constexpr unsigned int kPSize = 0, kPStride = 1, kPAlpha = 2, kPSkip = 3,
		       kPBase = 4, kPStrides = 5;

struct XBuild {
	XKind kind;
	uint32_t variant;
	int np;
	uint32_t src_dt, idx_dt, dst_dt;	// idx_dt 0 for XK_STRIDED
};

int build_index(struct spyre_kernel **kp, const void *ctx)
{
	const XBuild &x = *static_cast<const XBuild *>(ctx);
	uint32_t dts[3];
	unsigned int nops = 0;
	dts[nops++] = x.src_dt;
	if (x.idx_dt)
		dts[nops++] = x.idx_dt;
	unsigned int dst = nops;
	dts[nops++] = x.dst_dt;
	unsigned int np = static_cast<unsigned int>(x.np);
	int rc = spyre_kernel_create(dts, nops, kPStrides + nops * np, np, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64;
	auto off_of = [&](unsigned int op) {
		return point_offset(b, x.np, kPStrides + op * np);
	};
	if (x.kind == XK_STRIDED) {
		int v = spyre_kernel_load(b.k, 0, b.add(off_of(0),
							b.param(I, kPBase)),
					  NONE, NONE);
		spyre_kernel_store(b.k, dst, off_of(dst), v, NONE, 0);
		return spyre_kernel_error(b.k);
	}
	int size = b.param(I, kPSize);
	int ix = b.cvt(spyre_kernel_load(b.k, 1, off_of(1), NONE, NONE), I);
	if (x.variant & XV_WRAP)
		ix = b.sel(b.cmp(SPYRE_KCMP_LT, ix, b.c(I, 0.0)), b.add(ix, size),
			   ix);
	int mask = NONE;
	if (x.variant & XV_SKIP)
		mask = b.cmp(SPYRE_KCMP_NE, ix, b.param(I, kPSkip));
	spyre_kernel_check(b.k, b.op(SPYRE_KOP_AND,
				     b.cmp(SPYRE_KCMP_GE, ix, b.c(I, 0.0)),
				     b.cmp(SPYRE_KCMP_LT, ix, size)), mask);
	int moved = b.mul(ix, b.param(I, kPStride));
	if (x.kind == XK_GATHER) {
		int v = spyre_kernel_load(b.k, 0, b.add(off_of(0), moved), NONE,
					  NONE);
		spyre_kernel_store(b.k, dst, off_of(dst), v, NONE, 0);
		return spyre_kernel_error(b.k);
	}
	int v = spyre_kernel_load(b.k, 0, off_of(0), NONE, NONE);
	if (x.variant & XV_OR) {
		if (x.variant & XV_ALPHA)
			v = b.op(SPYRE_KOP_AND, v,
				 b.param(SPYRE_KTYPE_BOOL, kPAlpha));
		mask = mask == NONE ? v : b.op(SPYRE_KOP_AND, mask, v);
	} else if (x.variant & XV_ALPHA) {
		v = b.mul(v, b.param(vtype(x.src_dt), kPAlpha));
	}
	spyre_kernel_scatter(b.k, dst, b.add(off_of(dst), moved), v, mask,
			     x.kind == XK_SCATTER_ADD ? SPYRE_KSCAT_ADD :
			     SPYRE_KSCAT_STORE);
	return spyre_kernel_error(b.k);
}

// One launch of an indexing kernel over a space of sizes @shape, the
// operands' element strides over it given per dim (@idx undefined for
// XK_STRIDED).  @size and @stride: the indexed dim of the operand the index
// addresses (src for a gather, dst for a scatter).  Returns false, nothing
// done, when the card cannot run it (more than 6 dims left after
// collapsing, a program refused).
struct XArgs {
	XKind kind;
	uint32_t variant = 0;
	at::IntArrayRef shape;
	at::Tensor src, idx, dst;
	std::vector<int64_t> src_st, idx_st, dst_st;
	int64_t size = 0, stride = 0, skip = 0, base = 0;
	uint64_t alpha = 0;
	// extra elements the operand the index moves in spans past what its
	// strides cover (the indexed dim: (size - 1) * stride), and the
	// extent of a flipped source
	uint64_t src_extent = 0;
};

bool xlaunch(XArgs &a)
{
	if (a.shape.size() > static_cast<size_t>(kMaxDims))
		return false;
	int64_t numel = 1;
	for (int64_t s : a.shape)
		numel *= s;
	if (numel == 0)
		return true;
	Space s;
	s.init(a.shape);
	s.add_strides(a.src_st.data());
	if (a.idx.defined())
		s.add_strides(a.idx_st.data());
	s.add_strides(a.dst_st.data());
	if (!s.collapse())
		return false;
	XBuild xb{a.kind, a.variant, s.np, kdtype(a.src.scalar_type()),
		  a.idx.defined() ? kdtype(a.idx.scalar_type()) : 0,
		  kdtype(a.dst.scalar_type())};
	if (!xb.src_dt || !xb.dst_dt || (a.idx.defined() && !xb.idx_dt))
		return false;
	Key key;
	key.op = kOpIndex + a.kind;
	key.variant = a.variant;
	key.npdims = static_cast<uint8_t>(s.np);
	key.dt[0] = static_cast<uint8_t>(xb.src_dt);
	key.dt[1] = static_cast<uint8_t>(xb.idx_dt);
	key.dt[2] = static_cast<uint8_t>(xb.dst_dt);
	int card = a.dst.device().index();
	c10::DeviceGuard g(a.dst.device());
	const Prog *prog = program(card, key, build_index, &xb);
	if (prog->err < 0)
		return false;
	Launch L;
	L.params[kPSize] = static_cast<uint64_t>(a.size);
	L.params[kPStride] = static_cast<uint64_t>(a.stride);
	L.params[kPAlpha] = a.alpha;
	L.params[kPSkip] = static_cast<uint64_t>(a.skip);
	L.params[kPBase] = static_cast<uint64_t>(a.base);
	unsigned int np = static_cast<unsigned int>(s.np);
	uint64_t moved = a.size > 0 ?
		static_cast<uint64_t>(a.size - 1) * static_cast<uint64_t>(a.stride) :
		0;
	unsigned int n = 0;
	auto add = [&](const at::Tensor &t, int op, uint64_t extra) {
		L.operand(n, t, extra ? extra : s.extent(op));
		L.strides(s, op, kPStrides + n * np);
		n++;
	};
	bool gather = a.kind == XK_GATHER;
	int op = 0;
	add(a.src, op++, a.kind == XK_STRIDED ? a.src_extent :
	    gather ? s.extent(0) + moved : 0);
	if (a.idx.defined())
		add(a.idx, op++, 0);
	add(a.dst, op, a.kind == XK_SCATTER || a.kind == XK_SCATTER_ADD ?
	    s.extent(op) + moved : 0);
	L.sizes(s);
	run(card, prog, L, n, kPStrides + n * np);
	return true;
}

bool on_card(const at::Tensor &t)
{
	return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 &&
	       kdtype(t.scalar_type()) != 0;
}

bool index_dtype(const at::Tensor &i)
{
	return i.scalar_type() == at::kLong || i.scalar_type() == at::kInt;
}

std::vector<int64_t> strides_of(const at::Tensor &t)
{
	return std::vector<int64_t>(t.strides().begin(), t.strides().end());
}

// @t's strides with dim @dim's replaced by @s
std::vector<int64_t> strides_with(const at::Tensor &t, int64_t dim, int64_t s)
{
	std::vector<int64_t> r = strides_of(t);
	r[static_cast<size_t>(dim)] = s;
	return r;
}

// The index on the card of @like (a CPU index is copied there).
at::Tensor card_index(const at::Tensor &index, const at::Tensor &like)
{
	return index.device() == like.device() ? index : index.to(like.device());
}

// ---- gathers ---------------------------------------------------------------------

// index_select of @self (dim >= 1) along @dim by the 0-/1-D @index into
// @out (already of the result's sizes).
bool index_select_into(const at::Tensor &self, int64_t dim,
		       const at::Tensor &index, const at::Tensor &out)
{
	if (!on_card(self) || !on_card(out) || self.dim() == 0 ||
	    !index_dtype(index) || out.scalar_type() != self.scalar_type())
		return false;
	XArgs a;
	a.kind = XK_GATHER;
	a.shape = out.sizes();
	a.src = self;
	a.idx = card_index(index, self);
	a.dst = out;
	a.src_st = strides_with(self, dim, 0);
	a.idx_st.assign(static_cast<size_t>(out.dim()), 0);
	a.idx_st[static_cast<size_t>(dim)] = index.dim() ? a.idx.stride(0) : 0;
	a.dst_st = strides_of(out);
	a.size = self.size(dim);
	a.stride = self.stride(dim);
	return xlaunch(a);
}

std::vector<int64_t> index_select_shape(const at::Tensor &self, int64_t dim,
					const at::Tensor &index)
{
	TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed "
			  "to be a vector");
	TORCH_CHECK(index_dtype(index), "index_select(): Expected dtype int32 "
		    "or int64 for index");
	std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
	if (!shape.empty())
		shape[static_cast<size_t>(dim)] = index.numel();
	return shape;
}

at::Tensor k_index_select(const at::Tensor &self, int64_t dim,
			  const at::Tensor &index)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (on_card(self)) {
		// a scalar is a 1-element vector, and so is its result
		bool zd = self.dim() == 0;
		TORCH_CHECK_INDEX(!zd || index.numel() == 1, "index_select(): "
				  "Index to scalar can have only 1 value, got ",
				  index.numel(), " value(s)");
		at::Tensor s1 = zd ? self.view({1}) : self;
		at::Tensor out = at::empty(index_select_shape(s1, dim, index),
					   self.options());
		if (index_select_into(s1, dim, index, out)) {
			count_native("aten::index_select");
			return zd ? out.view(at::IntArrayRef()) : out;
		}
	}
	return SPYRE_FALLBACK(index_select, self, dim, index);
}

at::Tensor &k_index_select_out(const at::Tensor &self, int64_t dim,
			       const at::Tensor &index, at::Tensor &out)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (on_card(self) && on_card(out) && self.dim() > 0 &&
	    out.scalar_type() == self.scalar_type()) {
		at::native::resize_output(out, index_select_shape(self, dim,
								  index));
		check_overlap(out, {self, index});
		if (index_select_into(unalias(self, out), dim, index, out)) {
			count_native("aten::index_select.out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(index_select, out, self, dim, index, out);
}

// gather along @dim: out[i][j][k] = self[index[i][j][k]][j][k] (dim 0).
bool gather_into(const at::Tensor &self, int64_t dim, const at::Tensor &index,
		 const at::Tensor &out)
{
	if (!on_card(self) || !on_card(out) || self.dim() == 0 ||
	    out.scalar_type() != self.scalar_type())
		return false;
	XArgs a;
	a.kind = XK_GATHER;
	a.shape = index.sizes();
	a.src = self;
	a.idx = card_index(index, self);
	a.dst = out;
	a.src_st = strides_with(self, dim, 0);
	a.idx_st = strides_of(a.idx);
	a.dst_st = strides_of(out);
	a.size = self.size(dim);
	a.stride = self.stride(dim);
	return xlaunch(a);
}

// PyTorch's shape rules of gather / scatter: same number of dims, the
// index no larger than @other (self for gather and scatter, also src for
// scatter) in every dim but @dim (not for @other2).
void check_gather_shapes(const char *name, const at::Tensor &self,
			 int64_t dim, const at::Tensor &index,
			 const at::Tensor &src)
{
	TORCH_CHECK(index.numel() == 0 || index.scalar_type() == at::kLong,
		    name, "(): Expected dtype int64 for index");
	TORCH_CHECK(std::max<int64_t>(index.dim(), 1) ==
		    std::max<int64_t>(self.dim(), 1), "Index tensor must have "
		    "the same number of dimensions as ",
		    src.defined() ? "self tensor" : "input tensor");
	for (int64_t d = 0; d < index.dim(); d++) {
		if (d != dim)
			TORCH_CHECK(index.size(d) <= self.size(d), "Size does not "
				    "match at dimension ", d, " expected index ",
				    index.sizes(), " to be smaller than self ",
				    self.sizes(), " apart from dimension ", dim);
		if (src.defined())
			TORCH_CHECK(index.size(d) <= src.size(d), "Expected "
				    "index ", index.sizes(), " to be smaller "
				    "than self ", self.sizes(), " apart from "
				    "dimension ", dim, " and to be smaller size "
				    "than src ", src.sizes());
	}
}

at::Tensor k_gather(const at::Tensor &self, int64_t dim,
		    const at::Tensor &index, bool sparse_grad)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	// an empty index gathers nothing, whatever its dtype and dims (as
	// ATen's gather, which checks neither then)
	if (on_card(self) && index.numel() == 0) {
		count_native("aten::gather");
		return at::empty(index.sizes(), self.options());
	}
	if (on_card(self) && self.dim() > 0 && index.dim() == self.dim()) {
		check_gather_shapes("gather", self, dim, index, {});
		at::Tensor out = at::empty(index.sizes(), self.options());
		if (gather_into(self, dim, index, out)) {
			count_native("aten::gather");
			return out;
		}
	}
	return SPYRE_FALLBACK(gather, self, dim, index, sparse_grad);
}

at::Tensor &k_gather_out(const at::Tensor &self, int64_t dim,
			 const at::Tensor &index, bool sparse_grad,
			 at::Tensor &out)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (on_card(self) && on_card(out) && self.dim() > 0 &&
	    index.dim() == self.dim() && out.scalar_type() == self.scalar_type()) {
		check_gather_shapes("gather", self, dim, index, {});
		at::native::resize_output(out, index.sizes());
		check_overlap(out, {self, index});
		if (gather_into(unalias(self, out), dim, index, out)) {
			count_native("aten::gather.out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(gather, out, self, dim, index, sparse_grad, out);
}

// take: @self as a flat row-major vector, gathered at @index (negative
// indices count from the end); the result has @index's sizes.
at::Tensor k_take(const at::Tensor &self, const at::Tensor &index)
{
	TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long "
		    "tensor for index, but got ", index.scalar_type());
	if (on_card(self)) {
		TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0,
				  "take(): tried to take from an empty tensor");
		at::Tensor flat = self.reshape({-1});
		at::Tensor idx = card_index(index, self);
		at::Tensor out = at::empty(index.sizes(), self.options());
		XArgs a;
		a.kind = XK_GATHER;
		a.variant = XV_WRAP;
		a.shape = index.sizes();
		a.src = flat;
		a.idx = idx;
		a.dst = out;
		a.src_st.assign(static_cast<size_t>(index.dim()), 0);
		a.idx_st = strides_of(idx);
		a.dst_st = strides_of(out);
		a.size = flat.numel();
		a.stride = flat.numel() ? flat.stride(0) : 1;
		if (xlaunch(a)) {
			count_native("aten::take");
			return out;
		}
	}
	return SPYRE_FALLBACK(take, self, index);
}

// ---- scatters ----------------------------------------------------------------------

// @src, or a copy of it when it shares memory with @dst: a SCATTER's
// operand must be the only access to its memory in the kernel.
at::Tensor apart(const at::Tensor &src, const at::Tensor &dst)
{
	if (src.defined() && src.device() == dst.device() &&
	    src.storage().is_alias_of(dst.storage()))
		return src.clone();
	return src;
}

// scatter / scatter_add of @src (a tensor over @index's space) into @self
// in place along @dim.
bool scatter_into(const at::Tensor &self, int64_t dim, const at::Tensor &index,
		  const at::Tensor &src, bool add)
{
	if (!on_card(self) || !on_card(src) || self.dim() == 0 ||
	    src.scalar_type() != self.scalar_type())
		return false;
	at::assert_no_internal_overlap(self);
	bool bool_or = add && self.scalar_type() == at::kBool;
	XArgs a;
	a.kind = add && !bool_or ? XK_SCATTER_ADD : XK_SCATTER;
	a.variant = bool_or ? uint32_t(XV_OR) : 0u;
	a.shape = index.sizes();
	a.src = apart(src, self);
	a.idx = apart(card_index(index, self), self);
	a.dst = self;
	a.src_st = strides_of(a.src);
	a.idx_st = strides_of(a.idx);
	a.dst_st = strides_with(self, dim, 0);
	a.size = self.size(dim);
	a.stride = self.stride(dim);
	return xlaunch(a);
}

// scatter_src_()'s checks, @dim wrapped: false when the card does not
// take it (the caller falls back); PyTorch's errors raised.
bool scatter_ok(const at::Tensor &self, int64_t &dim, const at::Tensor &index,
		const at::Tensor &src, const char *name)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (!on_card(self) || self.dim() == 0 || index.dim() != self.dim())
		return false;
	check_gather_shapes(name, self, dim, index, src);
	TORCH_CHECK(self.scalar_type() == src.scalar_type(), name, "(): "
		    "Expected self.dtype to be equal to src.dtype");
	return true;
}

bool scatter_src_(at::Tensor &self, int64_t dim, const at::Tensor &index,
		  const at::Tensor &src, bool add, const char *name)
{
	return scatter_ok(self, dim, index, src, name) &&
	       scatter_into(self, dim, index, src, add);
}

at::Tensor &k_scatter_src_(at::Tensor &self, int64_t dim,
			   const at::Tensor &index, const at::Tensor &src)
{
	if (scatter_src_(self, dim, index, src, false, "scatter")) {
		count_native("aten::scatter_.src");
		return self;
	}
	return SPYRE_FALLBACK2(scatter_, src, self, dim, index, src);
}

at::Tensor k_scatter_src(const at::Tensor &self, int64_t dim,
			 const at::Tensor &index, const at::Tensor &src)
{
	if (on_card(self)) {
		at::Tensor out = self.clone();
		if (scatter_src_(out, dim, index, src, false, "scatter")) {
			count_native("aten::scatter.src");
			return out;
		}
	}
	return SPYRE_FALLBACK2(scatter, src, self, dim, index, src);
}

at::Tensor &k_scatter_value_(at::Tensor &self, int64_t dim,
			     const at::Tensor &index, const at::Scalar &value)
{
	if (on_card(self)) {
		at::Tensor v = at::scalar_tensor(value, self.options())
			.expand(index.sizes());
		if (scatter_src_(self, dim, index, v, false, "scatter")) {
			count_native("aten::scatter_.value");
			return self;
		}
	}
	return SPYRE_FALLBACK2(scatter_, value, self, dim, index, value);
}

at::Tensor k_scatter_value(const at::Tensor &self, int64_t dim,
			   const at::Tensor &index, const at::Scalar &value)
{
	if (on_card(self)) {
		at::Tensor out = self.clone();
		at::Tensor v = at::scalar_tensor(value, self.options())
			.expand(index.sizes());
		if (scatter_src_(out, dim, index, v, false, "scatter")) {
			count_native("aten::scatter.value");
			return out;
		}
	}
	return SPYRE_FALLBACK2(scatter, value, self, dim, index, value);
}

at::Tensor &k_scatter_add_(at::Tensor &self, int64_t dim,
			   const at::Tensor &index, const at::Tensor &src)
{
	if (scatter_src_(self, dim, index, src, true, "scatter_add")) {
		count_native("aten::scatter_add_");
		return self;
	}
	return SPYRE_FALLBACK(scatter_add_, self, dim, index, src);
}

at::Tensor k_scatter_add(const at::Tensor &self, int64_t dim,
			 const at::Tensor &index, const at::Tensor &src)
{
	if (on_card(self)) {
		at::Tensor out = self.clone();
		if (scatter_src_(out, dim, index, src, true, "scatter_add")) {
			count_native("aten::scatter_add");
			return out;
		}
	}
	return SPYRE_FALLBACK(scatter_add, self, dim, index, src);
}

// scatter with reduce="add" (scatter_add's kernel); "multiply": the CPU
at::Tensor &k_scatter_reduce_(at::Tensor &self, int64_t dim,
			      const at::Tensor &index, const at::Tensor &src,
			      c10::string_view reduce)
{
	if (reduce == "add" &&
	    scatter_src_(self, dim, index, src, true, "scatter")) {
		count_native("aten::scatter_.reduce");
		return self;
	}
	return SPYRE_FALLBACK2(scatter_, reduce, self, dim, index, src, reduce);
}

at::Tensor k_scatter_reduce(const at::Tensor &self, int64_t dim,
			    const at::Tensor &index, const at::Tensor &src,
			    c10::string_view reduce)
{
	if (on_card(self) && reduce == "add") {
		at::Tensor out = self.clone();
		if (scatter_src_(out, dim, index, src, true, "scatter")) {
			count_native("aten::scatter.reduce");
			return out;
		}
	}
	return SPYRE_FALLBACK2(scatter, reduce, self, dim, index, src, reduce);
}

at::Tensor &k_scatter_reduce_out(const at::Tensor &self, int64_t dim,
				 const at::Tensor &index, const at::Tensor &src,
				 c10::string_view reduce, at::Tensor &out)
{
	// self copied into out after the checks (an error leaves out as it
	// was), then scattered there; out sharing memory with an operand
	// other than being self: the CPU (and its overlap errors)
	int64_t d = dim;
	if (on_card(self) && on_card(out) && out.device() == self.device() &&
	    out.scalar_type() == self.scalar_type() && reduce == "add" &&
	    !out.storage().is_alias_of(index.storage()) &&
	    !out.storage().is_alias_of(src.storage()) &&
	    (out.is_same(self) || !out.storage().is_alias_of(self.storage())) &&
	    scatter_ok(self, d, index, src, "scatter")) {
		if (!out.is_same(self)) {
			at::native::resize_output(out, self.sizes());
			out.copy_(self);
		}
		if (scatter_into(out, d, index, src, true)) {
			count_native("aten::scatter.reduce_out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(scatter, reduce_out, self, dim, index, src,
			       reduce, out);
}

// index_scatter_()'s checks, @dim wrapped: false when the card does not
// take it (the caller falls back); PyTorch's errors raised.
bool index_scatter_ok(const at::Tensor &self, int64_t &dim,
		      const at::Tensor &index, const at::Tensor &source,
		      const char *name)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (!on_card(self) || !on_card(source) || self.dim() == 0 ||
	    source.dim() != self.dim() || !index_dtype(index))
		return false;
	TORCH_CHECK_INDEX(index.dim() <= 1, name, "(): Index is supposed to "
			  "be a vector");
	TORCH_CHECK(source.scalar_type() == self.scalar_type(), name, "(): "
		    "self (", self.scalar_type(), ") and source (",
		    source.scalar_type(), ") must have the same scalar type");
	TORCH_CHECK(index.numel() == source.size(dim), name, "(): Number of "
		    "indices (", index.numel(), ") should be equal to "
		    "source.size(dim) (", source.size(dim), ")");
	for (int64_t d = 0; d < self.dim(); d++)
		if (d != dim)
			TORCH_CHECK(self.size(d) == source.size(d), name, "(): "
				    "self and source must have the same sizes "
				    "apart from dim ", dim);
	return true;
}

// index_add_ / index_copy_: @source's slices along @dim go to @self's
// slices index[i] (added times @alpha, or stored).
bool index_scatter_(const at::Tensor &self, int64_t dim,
		    const at::Tensor &index, const at::Tensor &source, bool add,
		    const at::Scalar &alpha, const char *name)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (self.dim() == 0 && source.dim() == 0)	// as 1-element vectors
		return index_scatter_(self.view({1}), 0, index, source.view({1}),
				      add, alpha, name);
	if (!index_scatter_ok(self, dim, index, source, name))
		return false;
	at::assert_no_internal_overlap(self);
	bool bool_or = add && self.scalar_type() == at::kBool;
	XArgs a;
	a.kind = add && !bool_or ? XK_SCATTER_ADD : XK_SCATTER;
	a.variant = bool_or ? uint32_t(XV_OR) : 0u;
	uint32_t vt = vtype(kdtype(self.scalar_type()));
	if (add && !(alpha.isIntegral(true) && alpha.toLong() == 1)) {
		a.variant |= XV_ALPHA;
		a.alpha = scalar_param(alpha, vt);
	}
	a.shape = source.sizes();
	a.src = apart(source, self);
	a.idx = apart(card_index(index, self), self);
	a.dst = self;
	a.src_st = strides_of(a.src);
	a.idx_st.assign(static_cast<size_t>(self.dim()), 0);
	a.idx_st[static_cast<size_t>(dim)] = index.dim() ? a.idx.stride(0) : 0;
	a.dst_st = strides_with(self, dim, 0);
	a.size = self.size(dim);
	a.stride = self.stride(dim);
	return xlaunch(a);
}

at::Tensor &k_index_add_(at::Tensor &self, int64_t dim,
			 const at::Tensor &index, const at::Tensor &source,
			 const at::Scalar &alpha)
{
	if (index_scatter_(self, dim, index, source, true, alpha, "index_add")) {
		count_native("aten::index_add_");
		return self;
	}
	return SPYRE_FALLBACK(index_add_, self, dim, index, source, alpha);
}

at::Tensor k_index_add(const at::Tensor &self, int64_t dim,
		       const at::Tensor &index, const at::Tensor &source,
		       const at::Scalar &alpha)
{
	if (on_card(self)) {
		at::Tensor out = self.clone();
		if (index_scatter_(out, dim, index, source, true, alpha,
				   "index_add")) {
			count_native("aten::index_add");
			return out;
		}
	}
	return SPYRE_FALLBACK(index_add, self, dim, index, source, alpha);
}

at::Tensor &k_index_copy_(at::Tensor &self, int64_t dim,
			  const at::Tensor &index, const at::Tensor &source)
{
	if (index.scalar_type() == at::kLong &&
	    index_scatter_(self, dim, index, source, false, 1, "index_copy")) {
		count_native("aten::index_copy_");
		return self;
	}
	return SPYRE_FALLBACK(index_copy_, self, dim, index, source);
}

at::Tensor k_index_copy(const at::Tensor &self, int64_t dim,
			const at::Tensor &index, const at::Tensor &source)
{
	if (on_card(self) && index.scalar_type() == at::kLong) {
		at::Tensor out = self.clone();
		if (index_scatter_(out, dim, index, source, false, 1,
				   "index_copy")) {
			count_native("aten::index_copy");
			return out;
		}
	}
	return SPYRE_FALLBACK(index_copy, self, dim, index, source);
}

// The "sum" and "mean" reductions of scatter_reduce and index_reduce on
// @out, which holds self's values: the targeted elements zeroed first
// unless @include_self (@zero), then the contributions added in source
// order (@add: SCATTER ADD, false if the card does not take it); "mean"
// divides by their count (self's counting one when included; at least
// 1), flooring for the integer types: PyTorch's definition, step for
// step.  The caller has made the checks.
template <typename Zero, typename Add>
bool sum_mean_(at::Tensor &out, const at::Tensor &src, bool mean,
	       bool include_self, Zero zero, Add add)
{
	if (!include_self)
		zero(out);
	if (!add(out, src))
		return false;
	if (!mean)
		return true;
	at::Tensor count = include_self ? at::ones_like(out) :
					  at::zeros_like(out);
	if (!add(count, at::ones_like(src)))
		return false;
	count.masked_fill_(count == 0, 1);
	if (at::isFloatingType(out.scalar_type()))
		out.div_(count);
	else
		out.div_(count, "floor");
	return true;
}

// scatter_reduce(dim, index, src, reduce, include_self) in place: "sum"
// and "mean" on the card; "prod", "amax", "amin" (the engine's SCATTER
// stores or adds only), bool, and float16/bfloat16 (the CPU sums those in
// float and rounds once, SCATTER ADD after each add) through the CPU.
bool scatter_reduce_two_(at::Tensor &self, int64_t dim,
			 const at::Tensor &index, const at::Tensor &src,
			 c10::string_view reduce, bool include_self)
{
	at::ScalarType dt = self.scalar_type();
	if ((reduce != "sum" && reduce != "mean") || !on_card(src) ||
	    dt == at::kBool || dt == at::kHalf || dt == at::kBFloat16 ||
	    !scatter_ok(self, dim, index, src, "scatter_reduce"))
		return false;
	at::assert_no_internal_overlap(self);
	at::assert_no_overlap(self, index);
	at::assert_no_overlap(self, src);
	return sum_mean_(self, src, reduce == "mean", include_self,
			 [&](at::Tensor &t) { t.scatter_(dim, index, 0); },
			 [&](at::Tensor &t, const at::Tensor &v) {
				 return scatter_into(t, dim, index, v, true);
			 });
}

at::Tensor &k_scatter_reduce_two_(at::Tensor &self, int64_t dim,
				  const at::Tensor &index,
				  const at::Tensor &src, c10::string_view reduce,
				  bool include_self)
{
	if (scatter_reduce_two_(self, dim, index, src, reduce, include_self)) {
		count_native("aten::scatter_reduce_.two");
		return self;
	}
	return SPYRE_FALLBACK2(scatter_reduce_, two, self, dim, index, src,
			       reduce, include_self);
}

at::Tensor k_scatter_reduce_two(const at::Tensor &self, int64_t dim,
				const at::Tensor &index, const at::Tensor &src,
				c10::string_view reduce, bool include_self)
{
	if (on_card(self)) {
		at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
		if (scatter_reduce_two_(out, dim, index, src, reduce,
					include_self)) {
			count_native("aten::scatter_reduce.two");
			return out;
		}
	}
	return SPYRE_FALLBACK2(scatter_reduce, two, self, dim, index, src,
			       reduce, include_self);
}

// index_reduce(dim, index, source, reduce, include_self) in place: "mean"
// on the card; "prod", "amax", "amin" and bool through the CPU.
bool index_reduce_(at::Tensor &self, int64_t dim, const at::Tensor &index,
		   const at::Tensor &source, c10::string_view reduce,
		   bool include_self)
{
	dim = at::maybe_wrap_dim(dim, self.dim());
	if (self.dim() == 0 && source.dim() == 0) {	// as 1-element vectors
		at::Tensor v = self.view({1});
		return index_reduce_(v, 0, index, source.view({1}), reduce,
				     include_self);
	}
	if (reduce != "mean" || self.scalar_type() == at::kBool ||
	    !index_scatter_ok(self, dim, index, source, "index_reduce"))
		return false;
	at::assert_no_internal_overlap(self);
	at::assert_no_overlap(self, index);
	at::assert_no_overlap(self, source);
	at::Tensor i64 = index.to(at::kLong);
	return sum_mean_(self, source, true, include_self,
			 [&](at::Tensor &t) { t.index_fill_(dim, i64, 0); },
			 [&](at::Tensor &t, const at::Tensor &v) {
				 return index_scatter_(t, dim, index, v, true, 1,
						       "index_reduce");
			 });
}

at::Tensor &k_index_reduce_(at::Tensor &self, int64_t dim,
			    const at::Tensor &index, const at::Tensor &source,
			    c10::string_view reduce, bool include_self)
{
	if (index_reduce_(self, dim, index, source, reduce, include_self)) {
		count_native("aten::index_reduce_");
		return self;
	}
	return SPYRE_FALLBACK(index_reduce_, self, dim, index, source, reduce,
			      include_self);
}

at::Tensor k_index_reduce(const at::Tensor &self, int64_t dim,
			  const at::Tensor &index, const at::Tensor &source,
			  c10::string_view reduce, bool include_self)
{
	if (on_card(self)) {
		at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
		if (index_reduce_(out, dim, index, source, reduce,
				  include_self)) {
			count_native("aten::index_reduce");
			return out;
		}
	}
	return SPYRE_FALLBACK(index_reduce, self, dim, index, source, reduce,
			      include_self);
}

// embedding's backward: the rows of @grad (indices' sizes + [D]) added
// into a zero [num_weights, D] gradient at their index, in element order;
// rows of @padding_idx skipped.
at::Tensor k_embedding_dense_backward(const at::Tensor &grad,
				      const at::Tensor &indices,
				      int64_t num_weights, int64_t padding_idx,
				      bool scale_grad_by_freq)
{
	if (on_card(grad) && !scale_grad_by_freq && index_dtype(indices) &&
	    grad.scalar_type() != at::kBool && grad.dim() >= 1) {
		int64_t d = grad.size(-1);
		at::Tensor idx = card_index(indices, grad).reshape({-1});
		at::Tensor g2 = grad.reshape({idx.numel(), d});
		at::Tensor gw = at::zeros({num_weights, d}, grad.options());
		XArgs a;
		a.kind = XK_SCATTER_ADD;
		a.variant = padding_idx >= 0 ? uint32_t(XV_SKIP) : 0u;
		a.skip = padding_idx;
		int64_t shape[2] = {idx.numel(), d};
		a.shape = shape;
		a.src = g2;
		a.idx = idx;
		a.dst = gw;
		a.src_st = strides_of(g2);
		a.idx_st = {idx.numel() ? idx.stride(0) : 0, 0};
		a.dst_st = {0, gw.stride(1)};
		a.size = num_weights;
		a.stride = gw.stride(0);
		if (xlaunch(a)) {
			count_native("aten::embedding_dense_backward");
			return gw;
		}
	}
	return SPYRE_FALLBACK(embedding_dense_backward, grad, indices,
			      num_weights, padding_idx, scale_grad_by_freq);
}

// ---- compaction: nonzero, masked_select -------------------------------------------

struct CBuild {
	int nr;			// reduction dims of the space (the elements)
	uint32_t src_dt, mask_dt;	// mask_dt 0: nonzero (src is the mask)
	int ndim;		// nonzero: the coordinates per element
};

// One point, the elements as its reduction indices in row-major order:
// operands src, mask, out, count (i64).  A SCAN numbers the selected
// elements; element r, when selected, goes to slot (its number - 1) of
// out: masked_select its value, nonzero its ndim coordinates (r / inner
// % size per dim); the epilogue stores how many were selected.  Params:
// the strides of src and mask (nr each), then per coordinate its inner
// size and size.
int build_compact(struct spyre_kernel **kp, const void *ctx)
{
	const CBuild &c = *static_cast<const CBuild *>(ctx);
	uint32_t dts[4] = {c.src_dt, c.mask_dt ? c.mask_dt : c.src_dt,
			   c.mask_dt ? c.src_dt : SPYRE_DTYPE_INT64,
			   SPYRE_DTYPE_INT64};
	unsigned int nr = static_cast<unsigned int>(c.nr);
	unsigned int pc = 2 * nr;
	int rc = spyre_kernel_create(dts, 4, pc + 2 * c.ndim, 0, nr, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64;
	int zero = b.c(I, 0.0);
	spyre_kernel_pass(b.k);
	int so = rindex_offset(b, zero, 0, c.nr, 0);
	int m, v = NONE;
	if (c.mask_dt) {
		int mo = rindex_offset(b, zero, 0, c.nr, nr);
		m = b.cvt(spyre_kernel_load(b.k, 1, mo, NONE, NONE),
			  SPYRE_KTYPE_BOOL);
		v = spyre_kernel_load(b.k, 0, so, m, NONE);
	} else {
		m = b.cvt(spyre_kernel_load(b.k, 0, so, NONE, NONE),
			  SPYRE_KTYPE_BOOL);
	}
	int one = b.cvt(m, I);
	int slot = b.sub(spyre_kernel_scan(b.k, SPYRE_KRED_SUM, one, NONE),
			 b.c(I, 1.0));
	if (c.mask_dt) {
		spyre_kernel_store(b.k, 2, slot, v, m, 0);
	} else {
		int r = spyre_kernel_idx(b.k, I, SPYRE_KDIM_RINDEX);
		int row = b.mul(slot, b.c(I, c.ndim));
		for (int d = 0; d < c.ndim; d++) {
			unsigned int pd = pc + 2 * static_cast<unsigned int>(d);
			int coord = b.op(SPYRE_KOP_REM,
					 b.op(SPYRE_KOP_TRUNCDIV, r, b.param(I, pd)),
					 b.param(I, pd + 1));
			spyre_kernel_store(b.k, 2, b.add(row, b.c(I, d)), coord, m,
					   0);
		}
	}
	int cnt = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, one, NONE, NONE, NONE);
	spyre_kernel_endpass(b.k);
	spyre_kernel_store(b.k, 3, zero, cnt, NONE, 0);
	return spyre_kernel_error(b.k);
}

// The elements of @src (of sizes @shape, strides @src_st) where @mask (or
// @src itself when @mask is undefined: nonzero) is true, in row-major
// order: their values (masked_select: 1-D) or coordinates (nonzero:
// [count, ndim]).  The count is read on the host once, as on CUDA.
// Undefined when the card cannot.
at::Tensor compact(const at::Tensor &src, const std::vector<int64_t> &src_st,
		   const at::Tensor &mask, const std::vector<int64_t> &mask_st,
		   at::IntArrayRef shape)
{
	int64_t ndim = static_cast<int64_t>(shape.size());
	int64_t N = 1;
	for (int64_t s : shape)
		N *= s;
	bool select = mask.defined();
	if (N == 0 || ndim > kMaxDims)
		return {};
	Space s;
	s.init(shape, (uint64_t{1} << ndim) - 1);
	s.add_strides(src_st.data());
	if (select)
		s.add_strides(mask_st.data());
	if (!s.collapse(true))
		return {};
	CBuild cb{s.nr, kdtype(src.scalar_type()),
		  select ? kdtype(mask.scalar_type()) : 0,
		  select ? 0 : static_cast<int>(ndim)};
	if (!cb.src_dt || (select && !cb.mask_dt))
		return {};
	Key key;
	key.op = kOpIndex + 0x10;
	key.variant = static_cast<uint32_t>(cb.ndim);
	key.nrdims = static_cast<uint8_t>(s.nr);
	key.dt[0] = static_cast<uint8_t>(cb.src_dt);
	key.dt[1] = static_cast<uint8_t>(cb.mask_dt);
	int card = src.device().index();
	c10::DeviceGuard g(src.device());
	const Prog *prog = program(card, key, build_compact, &cb);
	if (prog->err < 0)
		return {};
	at::Tensor out = select ? at::empty({N}, src.options()) :
		at::empty({N * ndim}, src.options().dtype(at::kLong));
	at::Tensor count = at::empty({1}, src.options().dtype(at::kLong));
	Launch L;
	unsigned int nr = static_cast<unsigned int>(s.nr);
	L.operand(0, src, s.extent(0));
	if (select)
		L.operand(1, mask, s.extent(1));
	else
		L.operand(1, src, 0);	// declared, unused
	L.operand(2, out, static_cast<uint64_t>(out.numel()));
	L.operand(3, count, 1);
	L.strides(s, 0, 0);
	if (select)
		L.strides(s, 1, nr);
	int64_t inner = 1;
	for (int64_t d = ndim - 1; d >= 0 && !select; d--) {
		L.params[2 * nr + 2 * d] = static_cast<uint64_t>(inner);
		L.params[2 * nr + 2 * d + 1] = static_cast<uint64_t>(shape[d]);
		inner *= shape[d];
	}
	L.sizes(s);
	run(card, prog, L, 4, 2 * nr + 2 * static_cast<unsigned int>(cb.ndim));
	int64_t n = count.item<int64_t>();
	if (select)
		return out.narrow(0, 0, n).clone();
	return out.narrow(0, 0, n * ndim).view({n, ndim}).clone();
}

// nonzero_static: nonzero's first @size rows, padded with @fill_value to
// @size rows (one wait for nonzero's count, as nonzero)
at::Tensor k_nonzero_static(const at::Tensor &self, int64_t size,
			    int64_t fill_value)
{
	if (!on_card(self) || size < 0)
		return SPYRE_FALLBACK(nonzero_static, self, size, fill_value);
	count_native("aten::nonzero_static");
	c10::DeviceGuard g(self.device());
	at::Tensor nz = at::nonzero(self);
	at::Tensor out = at::full({size, nz.size(1)}, fill_value, nz.options());
	int64_t k = std::min(nz.size(0), size);
	if (k > 0 && nz.size(1) > 0)
		out.narrow(0, 0, k).copy_(nz.narrow(0, 0, k));
	return out;
}

at::Tensor k_nonzero(const at::Tensor &self)
{
	if (on_card(self) && self.dim() == 0) {
		// [1, 0] or [0, 0]: whether the one element is non-zero
		at::Tensor r = compact(self.view({1}), {0}, at::Tensor(), {},
				       {1});
		if (r.defined()) {
			count_native("aten::nonzero");
			return r.narrow(1, 0, 0).clone();
		}
	}
	if (on_card(self) && self.dim() > 0) {
		if (self.numel() == 0) {
			count_native("aten::nonzero");
			return at::empty({0, self.dim()},
					 self.options().dtype(at::kLong));
		}
		at::Tensor r = compact(self, strides_of(self), at::Tensor(), {},
				       self.sizes());
		if (r.defined()) {
			count_native("aten::nonzero");
			return r;
		}
	}
	return SPYRE_FALLBACK(nonzero, self);
}

// masked_select of @self by @mask (bool), broadcast together.
at::Tensor masked_select_on_card(const at::Tensor &self, const at::Tensor &mask)
{
	if (!on_card(self) || !on_card(mask) || mask.device() != self.device() ||
	    mask.scalar_type() != at::kBool)
		return {};
	std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
	at::Tensor x = self.expand(shape), m = mask.expand(shape);
	if (x.numel() == 0)
		return at::empty({0}, self.options());
	return compact(x, strides_of(x), m, strides_of(m), shape);
}

at::Tensor k_masked_select(const at::Tensor &self, const at::Tensor &mask)
{
	at::Tensor r = masked_select_on_card(self, mask);
	if (r.defined()) {
		count_native("aten::masked_select");
		return r;
	}
	return SPYRE_FALLBACK(masked_select, self, mask);
}

// A bool (or uint8) mask in an advanced-indexing list as PyTorch reads it:
// @mask of k dims at dim @dim of @self selects the positions where it is
// true.  A 1-D mask becomes the integer index of those positions (a
// nonzero on the card); undefined otherwise.
at::Tensor mask_index(const at::Tensor &self, const at::Tensor &mask,
		      int64_t dim)
{
	if (mask.dim() != 1 || dim >= self.dim() || !on_card(mask) ||
	    mask.device() != self.device())
		return {};
	TORCH_CHECK_INDEX(mask.size(0) == self.size(dim), "The shape of the "
			  "mask ", mask.sizes(), " at index 0 does not match "
			  "the shape of the indexed tensor ", self.sizes(),
			  " at index ", dim);
	at::Tensor nz = k_nonzero(mask);
	return nz.view({-1});
}

// The one tensor of an advanced-indexing list and its dim, whatever its
// dtype; undefined when there are several.
at::Tensor only_index(const c10::List<std::optional<at::Tensor>> &indices,
		      int64_t &dim)
{
	at::Tensor found;
	int64_t d = 0;
	for (const std::optional<at::Tensor> &o : indices) {
		if (o.has_value() && o->defined()) {
			if (found.defined())
				return {};
			found = *o;
			dim = d;
		}
		d++;
	}
	return found;
}

bool is_mask(const at::Tensor &t)
{
	return t.defined() && (t.scalar_type() == at::kBool ||
			       t.scalar_type() == at::kByte);
}

// ---- advanced indexing: index.Tensor, index_put_ -----------------------------------

// The one integer index tensor of an advanced-indexing list (the others
// None), its dim in @dim; undefined when the list has a bool mask, or more
// or fewer than one tensor (those go to the fallback).
at::Tensor single_index(const c10::List<std::optional<at::Tensor>> &indices,
			int64_t &dim)
{
	at::Tensor found;
	int64_t d = 0;
	for (const std::optional<at::Tensor> &o : indices) {
		if (o.has_value() && o->defined()) {
			if (found.defined() || !index_dtype(*o))
				return {};
			found = *o;
			dim = d;
		}
		d++;
	}
	return found;
}

// The space of x[..., idx, ...] (idx at @dim of @self): @self's sizes with
// dim @dim replaced by @idx's sizes, and the strides over it of @self (0
// along idx's dims) and of @idx (0 along self's).
void index_space(const at::Tensor &self, int64_t dim, const at::Tensor &idx,
		 std::vector<int64_t> &shape, std::vector<int64_t> &self_st,
		 std::vector<int64_t> &idx_st)
{
	shape.clear();
	self_st.clear();
	idx_st.clear();
	for (int64_t d = 0; d < self.dim(); d++) {
		if (d != dim) {
			shape.push_back(self.size(d));
			self_st.push_back(self.stride(d));
			idx_st.push_back(0);
			continue;
		}
		for (int64_t j = 0; j < idx.dim(); j++) {
			shape.push_back(idx.size(j));
			self_st.push_back(0);
			idx_st.push_back(idx.stride(j));
		}
	}
}

// Advanced indexing in general: several index tensors (integer, or bool
// masks standing for the integer indices of their true elements, one per
// mask dim, as PyTorch reads them), broadcast together.  Returns the
// element offset in @self of each index tuple, each index wrapped and
// checked against its own dim on the card: a tuple with an index out of
// range gets the offset @span (one past the largest), which the indexing
// kernel's own check then raises.  @shape, @self_st and @idx_st: the space
// of x[indices] as index_space() gives it for one index; the broadcast
// index dims stand where the indexed dims were when those are adjacent,
// else first (PyTorch's rule).  Undefined, nothing done, when an index is
// neither an integer nor a bool tensor, or an indexed dim is empty.
at::Tensor tuple_offsets(const at::Tensor &self,
			 const c10::List<std::optional<at::Tensor>> &indices,
			 std::vector<int64_t> &shape,
			 std::vector<int64_t> &self_st,
			 std::vector<int64_t> &idx_st, int64_t &span)
{
	std::vector<at::Tensor> idx;	// one per indexed dim of self
	std::vector<int64_t> dims;
	int64_t d = 0;
	for (const std::optional<at::Tensor> &o : indices) {
		if (!o.has_value() || !o->defined()) {
			d++;
			continue;
		}
		const at::Tensor &t = *o;
		if (is_mask(t)) {
			if (!on_card(t) || t.device() != self.device())
				return {};
			TORCH_CHECK_INDEX(d + t.dim() <= self.dim(), "too many "
					  "indices for tensor of dimension ",
					  self.dim());
			for (int64_t j = 0; j < t.dim(); j++)
				TORCH_CHECK_INDEX(t.size(j) == self.size(d + j),
						  "The shape of the mask ",
						  t.sizes(), " at index ", j,
						  " does not match the shape of "
						  "the indexed tensor ",
						  self.sizes(), " at index ",
						  d + j);
			at::Tensor nz = k_nonzero(t);	// [n, t.dim()]
			for (int64_t j = 0; j < t.dim(); j++) {
				idx.push_back(nz.select(1, j));
				dims.push_back(d++);
			}
			continue;
		}
		if (!index_dtype(t) || d >= self.dim())
			return {};
		idx.push_back(card_index(t, self).to(at::kLong));
		dims.push_back(d++);
	}
	if (idx.empty())
		return {};
	span = 1;
	for (int64_t dd : dims) {
		if (self.size(dd) == 0)
			return {};
		span += (self.size(dd) - 1) * self.stride(dd);
	}
	at::Tensor off, ok;
	for (size_t m = 0; m < idx.size(); m++) {
		int64_t S = self.size(dims[m]);
		at::Tensor w = at::where(idx[m] < 0, idx[m] + S, idx[m]);
		at::Tensor v = (w >= 0).logical_and_(w < S);
		at::Tensor o = w * self.stride(dims[m]);
		off = off.defined() ? off + o : o;
		ok = ok.defined() ? ok.logical_and(v) : v;
	}
	off = at::where(ok, off, span);
	bool adjacent = dims.back() - dims.front() + 1 ==
			static_cast<int64_t>(dims.size());
	shape.clear();
	self_st.clear();
	idx_st.clear();
	auto index_dims = [&]() {
		for (int64_t j = 0; j < off.dim(); j++) {
			shape.push_back(off.size(j));
			self_st.push_back(0);
			idx_st.push_back(off.stride(j));
		}
	};
	if (!adjacent)
		index_dims();
	for (d = 0; d < self.dim(); d++) {
		if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
			shape.push_back(self.size(d));
			self_st.push_back(self.stride(d));
			idx_st.push_back(0);
		} else if (adjacent && d == dims.front()) {
			index_dims();
		}
	}
	return off;
}

// x[idx] with one integer index tensor (negative indices count from the
// end): a gather.
at::Tensor k_index(const at::Tensor &self,
		   const c10::List<std::optional<at::Tensor>> &indices)
{
	int64_t dim = 0;
	at::Tensor idx;
	if (on_card(self) && self.dim() > 0 &&
	    static_cast<int64_t>(indices.size()) <= self.dim()) {
		at::Tensor m = only_index(indices, dim);
		if (is_mask(m) && dim == 0 && m.sizes() == self.sizes()) {
			// x[mask] over every dim: masked_select
			at::Tensor r = masked_select_on_card(
				self, card_index(m, self).to(at::kBool));
			if (r.defined()) {
				count_native("aten::index.Tensor");
				return r;
			}
		} else if (is_mask(m)) {
			idx = mask_index(self, card_index(m, self), dim);
		} else {
			idx = single_index(indices, dim);
		}
	}
	XArgs a;
	std::vector<int64_t> shape;
	if (idx.defined()) {
		idx = card_index(idx, self);
		index_space(self, dim, idx, shape, a.src_st, a.idx_st);
		a.variant = XV_WRAP;
		a.size = self.size(dim);
		a.stride = self.stride(dim);
	} else if (on_card(self) && self.dim() > 0) {
		// several index tensors, or a mask of several dims
		idx = tuple_offsets(self, indices, shape, a.src_st, a.idx_st,
				    a.size);
		a.stride = 1;
	}
	if (idx.defined()) {
		a.kind = XK_GATHER;
		at::Tensor out = at::empty(shape, self.options());
		a.shape = shape;
		a.src = self;
		a.idx = idx;
		a.dst = out;
		a.dst_st = strides_of(out);
		if (xlaunch(a)) {
			count_native("aten::index.Tensor");
			return out;
		}
	}
	return SPYRE_FALLBACK2(index, Tensor, self, indices);
}

// x[idx] = values (or += with @accumulate) with one integer index tensor:
// a scatter in element order (the last of repeated indices wins, or all
// add up in order).  @values (of @self's dtype: PyTorch refuses others)
// broadcasts to the indexed shape.
at::Tensor &k_index_put_impl_(at::Tensor &self,
			      const c10::List<std::optional<at::Tensor>> &indices,
			      const at::Tensor &values, bool accumulate,
			      bool unsafe)
{
	int64_t dim = 0;
	bool ok = on_card(self) && on_card(values) && self.dim() > 0 &&
		values.scalar_type() == self.scalar_type() &&
		static_cast<int64_t>(indices.size()) <= self.dim() &&
		!(accumulate && self.scalar_type() == at::kBool);
	at::Tensor idx;
	if (ok) {
		at::Tensor m = only_index(indices, dim);
		if (is_mask(m) && m.dim() == 1)
			// x[mask1d] = v: the positions of the mask's trues
			idx = mask_index(self, card_index(m, self), dim);
		else if (!is_mask(m))
			idx = single_index(indices, dim);
	}
	XArgs a;
	std::vector<int64_t> shape;
	if (idx.defined()) {
		idx = apart(card_index(idx, self), self);
		index_space(self, dim, idx, shape, a.dst_st, a.idx_st);
		a.variant = XV_WRAP;
		a.size = self.size(dim);
		a.stride = self.stride(dim);
	} else if (ok) {
		// several index tensors, or a mask of several dims (the offsets
		// are a new tensor: apart from self)
		idx = tuple_offsets(self, indices, shape, a.dst_st, a.idx_st,
				    a.size);
		a.stride = 1;
	}
	if (idx.defined() && at::is_expandable_to(values.sizes(), shape)) {
		at::assert_no_internal_overlap(self);
		a.kind = accumulate ? XK_SCATTER_ADD : XK_SCATTER;
		at::Tensor v = apart(values, self).expand(shape);
		a.shape = shape;
		a.src = v;
		a.idx = idx;
		a.dst = self;
		a.src_st = strides_of(v);
		if (xlaunch(a)) {
			count_native("aten::_index_put_impl_");
			return self;
		}
	}
	return SPYRE_FALLBACK(_index_put_impl_, self, indices, values,
			      accumulate, unsafe);
}

// index_fill_: self.select(dim, i) = @value for each i of @index (int64,
// 0-D or 1-D, negative indices wrapped): index_put_ with the index at
// @dim and @value as a 0-D tensor of self's dtype.  The in-place op only:
// the functional one is ATen's clone and this.
at::Tensor &index_fill(at::Tensor &self, int64_t dim, const at::Tensor &index,
		       const at::Tensor &value)
{
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	c10::List<std::optional<at::Tensor>> idx;
	for (int64_t i = 0; i < d; i++)
		idx.push_back(std::nullopt);
	idx.push_back(index.reshape({-1}));
	// a 0-D self as its one-element view
	(self.dim() ? self : self.view({1})).index_put_(idx, value);
	return self;
}

bool index_fill_ok(const at::Tensor &self, const at::Tensor &index)
{
	return on_card(self) && on_card(index) &&
	       index.device() == self.device() &&
	       index.scalar_type() == at::kLong && index.dim() <= 1;
}

at::Tensor &k_index_fill_scalar(at::Tensor &self, int64_t dim,
				const at::Tensor &index,
				const at::Scalar &value)
{
	if (!index_fill_ok(self, index) || value.isComplex())
		return SPYRE_FALLBACK2(index_fill_, int_Scalar, self, dim, index,
				       value);
	count_native("aten::index_fill_.int_Scalar");
	c10::DeviceGuard g(self.device());
	return index_fill(self, dim, index,
			  at::scalar_tensor(value, self.options()));
}

// a 0-D @value (on the card or the host) of any dtype, converted to
// self's as a copy
at::Tensor &k_index_fill_tensor(at::Tensor &self, int64_t dim,
				const at::Tensor &index,
				const at::Tensor &value)
{
	if (!index_fill_ok(self, index) || value.dim() != 0 ||
	    value.is_complex())
		return SPYRE_FALLBACK2(index_fill_, int_Tensor, self, dim, index,
				       value);
	count_native("aten::index_fill_.int_Tensor");
	c10::DeviceGuard g(self.device());
	return index_fill(self, dim, index, value.to(self.options()));
}

// put_: the flat (contiguous) self's elements at @index (int64, negative
// indices wrapped) = @source's (or += with @accumulate), as index_put_
// of the flat view.  A strided self: the CPU.
at::Tensor &k_put_(at::Tensor &self, const at::Tensor &index,
		   const at::Tensor &source, bool accumulate)
{
	bool ok = on_card(self) && self.is_contiguous() && on_card(index) &&
		  index.device() == self.device() &&
		  index.scalar_type() == at::kLong && on_card(source) &&
		  source.device() == self.device() &&
		  source.scalar_type() == self.scalar_type() &&
		  source.numel() == index.numel() &&
		  !(accumulate && self.scalar_type() == at::kBool);
	if (!ok)
		return SPYRE_FALLBACK(put_, self, index, source, accumulate);
	count_native("aten::put_");
	c10::DeviceGuard g(self.device());
	c10::List<std::optional<at::Tensor>> idx;
	idx.push_back(index.reshape({-1}));
	self.view({-1}).index_put_(idx, source.reshape({-1}), accumulate);
	return self;
}

// ---- copies: flip, roll, cat ---------------------------------------------------------

bool flip_into(const at::Tensor &self, at::IntArrayRef dims,
	       const at::Tensor &out)
{
	if (!on_card(self) || !on_card(out) ||
	    out.scalar_type() != self.scalar_type())
		return false;
	std::vector<bool> flip(static_cast<size_t>(self.dim()), false);
	for (int64_t d : dims) {
		int64_t w = at::maybe_wrap_dim(d, self.dim());
		TORCH_CHECK(!flip[static_cast<size_t>(w)], "dims has duplicates, "
			    "original flip dims size=", dims.size());
		flip[static_cast<size_t>(w)] = true;
	}
	XArgs a;
	a.kind = XK_STRIDED;
	a.shape = self.sizes();
	a.src = self;
	a.dst = out;
	a.src_st = strides_of(self);
	a.dst_st = strides_of(out);
	uint64_t ext = 1;
	for (int64_t d = 0; d < self.dim(); d++) {
		size_t i = static_cast<size_t>(d);
		int64_t span = (self.size(d) - 1) * self.stride(d);
		ext += static_cast<uint64_t>(std::max<int64_t>(span, 0));
		if (flip[i] && self.size(d) > 1) {
			a.base += span;
			a.src_st[i] = -self.stride(d);
		}
	}
	a.src_extent = ext;
	return xlaunch(a);
}

at::Tensor k_flip(const at::Tensor &self, at::IntArrayRef dims)
{
	if (on_card(self)) {
		at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
		if (flip_into(self, dims, out)) {
			count_native("aten::flip");
			return out;
		}
	}
	return SPYRE_FALLBACK(flip, self, dims);
}

// roll: each rolled dim moves by two slice copies on the card (the last
// dim's copies write the result; earlier dims go through a temporary).
at::Tensor k_roll(const at::Tensor &self, at::IntArrayRef shifts,
		  at::IntArrayRef dims)
{
	if (!on_card(self))
		return SPYRE_FALLBACK(roll, self, shifts, dims);
	TORCH_CHECK(!shifts.empty(), "`shifts` required");
	if (self.numel() == 0) {
		count_native("aten::roll");
		return self.clone();
	}
	if (dims.empty() && shifts.size() == 1) {
		at::Tensor r = k_roll(self.flatten(), shifts, {0});
		return r.view(self.sizes());
	}
	TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must "
		    "align. shifts: ", shifts.size(), ", dims:", dims.size());
	at::Tensor cur = self;
	for (size_t i = 0; i < dims.size(); i++) {
		int64_t d = at::maybe_wrap_dim(dims[i], self.dim());
		int64_t n = self.size(d);
		int64_t s = ((shifts[i] % n) + n) % n;
		at::Tensor next = at::empty_like(self,
						 at::MemoryFormat::Contiguous);
		if (s == 0) {
			if (!copy_on_card(next, cur))
				return SPYRE_FALLBACK(roll, self, shifts, dims);
		} else if (!copy_on_card(next.narrow(d, s, n - s),
					 cur.narrow(d, 0, n - s)) ||
			   !copy_on_card(next.narrow(d, 0, s),
					 cur.narrow(d, n - s, s))) {
			return SPYRE_FALLBACK(roll, self, shifts, dims);
		}
		cur = next;
	}
	count_native("aten::roll");
	return cur;
}

// cat: the output of the promoted dtype, each input copied (and
// converted) into its slice on the card.  1-D empty inputs are skipped,
// as PyTorch's legacy rule has it.
bool cat_into(const at::ITensorListRef &tensors, int64_t dim,
	      const at::Tensor &out)
{
	int64_t off = 0;
	for (const at::Tensor &t : tensors) {
		if (t.dim() == 1 && t.numel() == 0)
			continue;
		int64_t n = t.size(dim);
		if (n && !copy_on_card(out.narrow(dim, off, n), t))
			return false;
		off += n;
	}
	return true;
}

// the result's sizes of cat, PyTorch's checks; false when a tensor is not
// a card tensor (the fallback takes the call)
bool cat_shape(const at::ITensorListRef &tensors, int64_t &dim,
	       std::vector<int64_t> &shape, at::ScalarType &dt,
	       c10::Device &dev)
{
	TORCH_CHECK(tensors.size() > 0, "torch.cat(): expected a non-empty "
		    "list of Tensors");
	const at::Tensor *ref = nullptr;
	bool first = true;
	for (const at::Tensor &t : tensors) {
		if (!on_card(t))
			return false;
		if (first) {
			dt = t.scalar_type();
			dev = t.device();
			first = false;
		} else {
			dt = at::promote_types(dt, t.scalar_type());
			if (t.device() != dev)
				return false;
		}
		if (!(t.dim() == 1 && t.numel() == 0) && !ref)
			ref = &t;
	}
	if (!ref) {
		dim = 0;
		shape = {0};
		return true;
	}
	TORCH_CHECK(ref->dim() > 0, "zero-dimensional tensor (at position 0) "
		    "cannot be concatenated");
	dim = at::maybe_wrap_dim(dim, ref->dim());
	shape.assign(ref->sizes().begin(), ref->sizes().end());
	int64_t total = 0, i = 0;
	for (const at::Tensor &t : tensors) {
		if (t.dim() == 1 && t.numel() == 0) {
			i++;
			continue;
		}
		TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same "
			    "number of dimensions: got ", ref->dim(), " and ",
			    t.dim());
		for (int64_t d = 0; d < t.dim(); d++)
			if (d != dim)
				TORCH_CHECK(t.size(d) == ref->size(d), "Sizes of "
					    "tensors must match except in "
					    "dimension ", dim, ". Expected size ",
					    ref->size(d), " but got size ",
					    t.size(d), " for tensor number ", i,
					    " in the list.");
		total += t.size(dim);
		i++;
	}
	shape[static_cast<size_t>(dim)] = total;
	return true;
}

at::Tensor k_cat(const at::ITensorListRef &tensors, int64_t dim)
{
	std::vector<int64_t> shape;
	at::ScalarType dt = at::kFloat;
	c10::Device dev(c10::DeviceType::PrivateUse1, 0);
	if (cat_shape(tensors, dim, shape, dt, dev) && kdtype(dt)) {
		at::Tensor out = at::empty(shape, at::TensorOptions()
					   .dtype(dt).device(dev));
		if (cat_into(tensors, dim, out)) {
			count_native("aten::cat");
			return out;
		}
	}
	return SPYRE_FALLBACK(cat, tensors, dim);
}

at::Tensor &k_cat_out(const at::ITensorListRef &tensors, int64_t dim,
		      at::Tensor &out)
{
	std::vector<int64_t> shape;
	at::ScalarType dt = at::kFloat;
	c10::Device dev(c10::DeviceType::PrivateUse1, 0);
	if (on_card(out) && cat_shape(tensors, dim, shape, dt, dev) &&
	    out.device() == dev) {
		TORCH_CHECK(at::canCast(dt, out.scalar_type()), "torch.cat(): "
			    "input types can't be cast to the desired output "
			    "type ", out.scalar_type());
		at::native::resize_output(out, shape);
		for (const at::Tensor &t : tensors)
			check_overlap(out, {t});
		if (cat_into(tensors, dim, out)) {
			count_native("aten::cat.out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(cat, out, tensors, dim, out);
}

// ---- reflection and replication padding, masked_scatter_ ----------------------------

// The source positions of one padded dim of size @size with @before and
// @after elements added: reflected about the edges (without repeating
// them) or replicated from them.
std::vector<int64_t> pad_positions(int64_t size, int64_t before, int64_t after,
				   bool reflect)
{
	std::vector<int64_t> pos;
	pos.reserve(static_cast<size_t>(size + before + after));
	for (int64_t o = 0; o < size + before + after; o++) {
		int64_t i = o - before;
		if (reflect)
			i = i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i;
		else
			i = i < 0 ? 0 : i >= size ? size - 1 : i;
		pos.push_back(i);
	}
	return pos;
}

// reflection_pad{1,2,3}d / replication_pad{1,2,3}d of @self (@k padded
// dims, the last ones; @padding pairs from the last dim backwards): one
// gather per padded dim (index_select along it by the positions above).
// A negative padding crops.  An empty batch gives an empty result.
// Undefined when the card does not take it (an empty dim other than the
// batch, an output dim under 1, a reflection as wide as the dim, a batch
// layout PyTorch refuses: the CPU decides and raises).
at::Tensor pad_on_card(const at::Tensor &self, at::IntArrayRef padding, int k,
		       bool reflect)
{
	if (!on_card(self) || static_cast<int>(padding.size()) != 2 * k ||
	    (self.dim() != k + 1 && self.dim() != k + 2))
		return {};
	std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
	for (int64_t d = self.dim() == k + 2 ? 1 : 0; d < self.dim(); d++)
		if (self.size(d) == 0)
			return {};
	for (int j = 0; j < k; j++) {
		int64_t dim = self.dim() - 1 - j;
		int64_t size = self.size(dim), before = padding[2 * j],
			after = padding[2 * j + 1];
		if (size + before + after < 1 ||
		    (reflect && (before >= size || after >= size)))
			return {};
		shape[static_cast<size_t>(dim)] = size + before + after;
	}
	if (self.numel() == 0)
		return at::empty(shape, self.options());
	at::Tensor x = self;
	for (int j = 0; j < k; j++) {
		int64_t dim = self.dim() - 1 - j;
		int64_t size = self.size(dim), before = padding[2 * j],
			after = padding[2 * j + 1];
		if (before == 0 && after == 0)
			continue;
		at::Tensor idx = at::tensor(pad_positions(size, before, after,
							  reflect),
					    at::TensorOptions().dtype(at::kLong))
			.to(self.device());
		at::Tensor out = at::empty(index_select_shape(x, dim, idx),
					   x.options());
		if (!index_select_into(x, dim, idx, out))
			return {};
		x = out;
	}
	return x.is_same(self) ? self.clone() : x;
}

#define PAD(name, K, REFLECT)                                                  \
	at::Tensor k_##name(const at::Tensor &self, at::IntArrayRef padding)   \
	{                                                                      \
		at::Tensor r = pad_on_card(self, padding, K, REFLECT);         \
		if (r.defined()) {                                             \
			count_native("aten::" #name);                          \
			return r;                                              \
		}                                                              \
		return SPYRE_FALLBACK(name, self, padding);                    \
	}                                                                      \
	at::Tensor &k_##name##_out(const at::Tensor &self,                     \
				   at::IntArrayRef padding, at::Tensor &out)   \
	{                                                                      \
		if (on_card(out) && out.scalar_type() == self.scalar_type()) { \
			at::Tensor r = pad_on_card(self, padding, K, REFLECT); \
			if (r.defined()) {                                     \
				at::native::resize_output(out, r.sizes());     \
				out.copy_(r);                                  \
				count_native("aten::" #name ".out");           \
				return out;                                    \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK2(name, out, self, padding, out);         \
	}

PAD(reflection_pad1d, 1, true)
PAD(reflection_pad2d, 2, true)
PAD(reflection_pad3d, 3, true)
PAD(replication_pad1d, 1, false)
PAD(replication_pad2d, 2, false)
PAD(replication_pad3d, 3, false)

// self[mask] = the first elements of @source in order: element i of the
// masked positions (numbered by a cumsum of the mask) takes source[i], a
// gather; a source with too few elements is a device-side assertion (the
// gather's bounds check), as on CUDA.
at::Tensor &k_masked_scatter_(at::Tensor &self, const at::Tensor &mask,
			      const at::Tensor &source)
{
	if (on_card(self) && on_card(mask) && on_card(source) &&
	    mask.scalar_type() == at::kBool &&
	    source.scalar_type() == self.scalar_type() &&
	    mask.device() == self.device() && source.device() == self.device() &&
	    source.numel() > 0 && self.numel() > 0 &&
	    at::is_expandable_to(mask.sizes(), self.sizes())) {
		at::assert_no_internal_overlap(self);
		at::Tensor m = mask.expand(self.sizes()).reshape({-1});
		at::Tensor pos = at::clamp_min(at::cumsum(m, 0, at::kLong) - 1, 0);
		at::Tensor got = at::take(source, pos).view(self.sizes());
		self.copy_(at::where(m.view(self.sizes()), got, self));
		count_native("aten::masked_scatter_");
		return self;
	}
	return SPYRE_FALLBACK(masked_scatter_, self, mask, source);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("index_select", TORCH_FN(k_index_select));
	m.impl("index_select.out", TORCH_FN(k_index_select_out));
	m.impl("gather", TORCH_FN(k_gather));
	m.impl("gather.out", TORCH_FN(k_gather_out));
	m.impl("take", TORCH_FN(k_take));
	m.impl("scatter.src", TORCH_FN(k_scatter_src));
	m.impl("scatter_.src", TORCH_FN(k_scatter_src_));
	m.impl("scatter.value", TORCH_FN(k_scatter_value));
	m.impl("scatter_.value", TORCH_FN(k_scatter_value_));
	m.impl("scatter.reduce", TORCH_FN(k_scatter_reduce));
	m.impl("scatter_.reduce", TORCH_FN(k_scatter_reduce_));
	m.impl("scatter.reduce_out", TORCH_FN(k_scatter_reduce_out));
	m.impl("scatter_reduce.two", TORCH_FN(k_scatter_reduce_two));
	m.impl("scatter_reduce_.two", TORCH_FN(k_scatter_reduce_two_));
	m.impl("index_reduce", TORCH_FN(k_index_reduce));
	m.impl("index_reduce_", TORCH_FN(k_index_reduce_));
	m.impl("scatter_add", TORCH_FN(k_scatter_add));
	m.impl("scatter_add_", TORCH_FN(k_scatter_add_));
	m.impl("index_add", TORCH_FN(k_index_add));
	m.impl("index_add_", TORCH_FN(k_index_add_));
	m.impl("index_copy", TORCH_FN(k_index_copy));
	m.impl("index_copy_", TORCH_FN(k_index_copy_));
	m.impl("embedding_dense_backward", TORCH_FN(k_embedding_dense_backward));
	m.impl("index.Tensor", TORCH_FN(k_index));
	m.impl("_index_put_impl_", TORCH_FN(k_index_put_impl_));
	m.impl("index_fill_.int_Scalar", TORCH_FN(k_index_fill_scalar));
	m.impl("index_fill_.int_Tensor", TORCH_FN(k_index_fill_tensor));
	m.impl("put_", TORCH_FN(k_put_));
	m.impl("flip", TORCH_FN(k_flip));
	m.impl("roll", TORCH_FN(k_roll));
	m.impl("cat", TORCH_FN(k_cat));
	m.impl("cat.out", TORCH_FN(k_cat_out));
	m.impl("nonzero", TORCH_FN(k_nonzero));
	m.impl("nonzero_static", TORCH_FN(k_nonzero_static));
	m.impl("masked_select", TORCH_FN(k_masked_select));
	m.impl("reflection_pad1d", TORCH_FN(k_reflection_pad1d));
	m.impl("reflection_pad1d.out", TORCH_FN(k_reflection_pad1d_out));
	m.impl("reflection_pad2d", TORCH_FN(k_reflection_pad2d));
	m.impl("reflection_pad2d.out", TORCH_FN(k_reflection_pad2d_out));
	m.impl("reflection_pad3d", TORCH_FN(k_reflection_pad3d));
	m.impl("reflection_pad3d.out", TORCH_FN(k_reflection_pad3d_out));
	m.impl("replication_pad1d", TORCH_FN(k_replication_pad1d));
	m.impl("replication_pad1d.out", TORCH_FN(k_replication_pad1d_out));
	m.impl("replication_pad2d", TORCH_FN(k_replication_pad2d));
	m.impl("replication_pad2d.out", TORCH_FN(k_replication_pad2d_out));
	m.impl("replication_pad3d", TORCH_FN(k_replication_pad3d));
	m.impl("replication_pad3d.out", TORCH_FN(k_replication_pad3d_out));
	m.impl("masked_scatter_", TORCH_FN(k_masked_scatter_));
}

} // namespace spyre_torch
