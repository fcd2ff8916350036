// SPDX-License-Identifier: MIT
// Pooling and upsampling on the card, generated: max pooling with indices,
// average and adaptive average pooling, adaptive max pooling (2-D and 3-D)
// and their backward; upsampling nearest, nearest-exact and (bi/tri)linear
// in 1-D, 2-D and 3-D (forward); max unpooling (2-D, 3-D) as a scatter.
//
// A forward kernel runs one point per output element and a reduction over
// its window (masked where the window leaves the image: padding never
// counts as a value); max pooling also stores the index of the maximum
// (the flat index in the input plane or volume, as PyTorch's).  A
// backward kernel runs one point per input element and a reduction over
// the windows that cover it (a gather, so no two lanes write one element
// and the order of the sums is fixed): max pooling adds the gradients of
// the windows whose index names this element, average pooling each
// window's gradient over its divisor.  The divisor is computed the same
// way in both directions (PyTorch's: count_include_pad counts the padding
// but not what ceil_mode adds past it; divisor_override replaces it).
//
// Arguments PyTorch's own checks refuse (and dtypes the card lacks) go to
// the CPU fallback, so the errors are PyTorch's.
#include "kernels.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace spyre_torch {
namespace {

using namespace kgen;

constexpr int kMaxD = 3;		// spatial dims: the *_pool2d and *_pool3d ops

enum Mode : uint8_t {
	MAX_FWD = 1, AVG_FWD, ADAPT_FWD, MAX_BWD, AVG_BWD, ADAPT_BWD,
	AMAX_FWD, AMAX_BWD,		// adaptive max pooling
};

bool is_max(Mode m)
{
	return m == MAX_FWD || m == MAX_BWD || m == AMAX_FWD || m == AMAX_BWD;
}

// One pooling problem over D spatial dims: the image (the input) has
// sizes S, the output O; window j along dim i covers j * s - p + t * d,
// t in [0, k) (adaptive: [floor(j S / O), ceil((j + 1) S / O)), and k is
// R).  R is the reduction size per dim: k, or the largest adaptive window
// (forward) or number of windows covering an element (backward).
struct Pool {
	int D = 2;
	int64_t S[kMaxD], O[kMaxD], k[kMaxD], s[kMaxD], p[kMaxD], d[kMaxD],
		R[kMaxD];
};

struct PoolBuild {
	Mode mode;
	uint32_t dt;
	unsigned int D;
};

// Parameters: the read operand's n and c strides (0, 1); the written
// operand's n, c and spatial strides (2..); per spatial dim i a block at
// blk + 8 i: read stride, s, d, -p, S, O, k, p; then has_override (bool),
// the override (f32), count_include_pad (bool), the override (i64).
constexpr unsigned int kBlk = 4 + kMaxD;
constexpr unsigned int kScal = kBlk + 8 * kMaxD;
constexpr unsigned int kNParams = kScal + 4;

int build_pool(struct spyre_kernel **kp, const void *ctx)
{
	const PoolBuild &pb = *static_cast<const PoolBuild *>(ctx);
	const Mode m = pb.mode;
	const unsigned int D = std::min(pb.D, static_cast<unsigned int>(kMaxD));
	const bool max = is_max(m);
	const bool bwd_ind = m == MAX_BWD || m == AMAX_BWD;
	const bool adapt_fwd = m == ADAPT_FWD || m == AMAX_FWD;
	const bool adapt_bwd = m == ADAPT_BWD || m == AMAX_BWD;
	uint32_t dts[3] = {pb.dt, pb.dt, SPYRE_DTYPE_INT64};
	if (bwd_ind)	// grad_out, indices, grad_in
		dts[1] = SPYRE_DTYPE_INT64, dts[2] = pb.dt;
	int rc = spyre_kernel_create(dts, max ? 3 : 2, kNParams, 2 + D, D, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64, F = SPYRE_KTYPE_F32;
	const unsigned int out_op = bwd_ind ? 2 : 1;
	auto P = [&](unsigned int i, unsigned int f) {
		return b.param(I, kBlk + 8 * i + f);
	};
	auto idx = [&](unsigned int dim) {
		return spyre_kernel_idx(b.k, I, dim);
	};
	auto AND = [&](int x, int y) {
		return x == NONE ? y : b.op(SPYRE_KOP_AND, x, y);
	};
	auto cmp = [&](uint32_t c, int x, int y) { return b.cmp(c, x, y); };
	auto tdiv = [&](int x, int y) { return b.op(SPYRE_KOP_TRUNCDIV, x, y); };
	int zero = b.c(I, 0), one = b.c(I, 1);
	// adaptive window [start, end) of output position j along dim i
	auto astart = [&](unsigned int i, int j) {
		return tdiv(b.mul(j, P(i, 4)), P(i, 5));
	};
	auto aend = [&](unsigned int i, int j) {
		return tdiv(b.add(b.mul(b.add(j, one), P(i, 4)),
				  b.sub(P(i, 5), one)), P(i, 5));
	};
	// average pooling's divisor of output position j[]: f32, or i64
	// for an integer dtype (whose average is the sum's truncating
	// division, as the CPU's)
	const bool ints = vtype(pb.dt) != F;
	auto divisor = [&](const int *j) {
		int n = one;
		for (unsigned int i = 0; i < D; i++) {
			if (m == ADAPT_FWD || m == ADAPT_BWD) {
				n = b.mul(n, b.sub(aend(i, j[i]), astart(i, j[i])));
				continue;
			}
			int st = b.add(b.mul(j[i], P(i, 1)), P(i, 3));
			int en = b.min(b.add(st, P(i, 6)), b.add(P(i, 4), P(i, 7)));
			int pool = b.sub(en, st);
			int valid = b.sub(b.min(en, P(i, 4)), b.max(st, zero));
			n = b.mul(n, b.sel(b.param(SPYRE_KTYPE_BOOL, kScal + 2),
					   pool, valid));
		}
		int dv = ints ? n : b.cvt(n, F);
		if (m == ADAPT_FWD || m == ADAPT_BWD)
			return dv;
		return b.sel(b.param(SPYRE_KTYPE_BOOL, kScal),
			     ints ? b.param(I, kScal + 3) :
				    b.param(F, kScal + 1), dv);
	};
	// the flat index of image element y[] in its plane or volume
	auto flat = [&](const int *y) {
		int f = y[0];
		for (unsigned int i = 1; i < D; i++)
			f = b.add(b.mul(f, P(i, 4)), y[i]);
		return f;
	};
	int out_off = spyre_kernel_affine(b.k, I, NONE, (1u << (2 + D)) - 1, 2);
	int yflat = NONE;
	if (bwd_ind) {
		int y[kMaxD] = {};
		for (unsigned int i = 0; i < D; i++)
			y[i] = idx(2 + i);
		yflat = flat(y);
	}
	spyre_kernel_pass(b.k);
	int off = spyre_kernel_affine(b.k, I, NONE, 3u, 0);
	int mask = NONE;
	int j[kMaxD] = {};
	for (unsigned int i = 0; i < D; i++) {
		int p = idx(2 + i), t = idx(SPYRE_KDIM_R0 + i);
		int pos;	// forward: the image element; backward: the window
		if (m == MAX_FWD || m == AVG_FWD) {
			pos = b.add(b.add(b.mul(p, P(i, 1)), b.mul(t, P(i, 2))),
				    P(i, 3));
			mask = AND(mask, b.op(SPYRE_KOP_AND, cmp(SPYRE_KCMP_GE, pos, zero),
					      cmp(SPYRE_KCMP_LT, pos, P(i, 4))));
		} else if (adapt_fwd) {
			int st = astart(i, p);
			pos = b.add(st, t);
			mask = AND(mask, cmp(SPYRE_KCMP_LT, pos, aend(i, p)));
		} else if (adapt_bwd) {
			// windows covering p: [floor(p O / S), ceil((p + 1) O / S))
			int first = tdiv(b.mul(p, P(i, 5)), P(i, 4));
			int last = tdiv(b.add(b.mul(b.add(p, one), P(i, 5)),
					      b.sub(P(i, 4), one)), P(i, 4));
			pos = b.add(first, t);
			mask = AND(mask, cmp(SPYRE_KCMP_LT, pos, last));
		} else {
			// p + pad - t d = pos * s
			int u = b.sub(b.sub(p, P(i, 3)), b.mul(t, P(i, 2)));
			pos = tdiv(u, P(i, 1));
			int ok = b.op(SPYRE_KOP_AND, cmp(SPYRE_KCMP_GE, u, zero),
				      cmp(SPYRE_KCMP_EQ,
					  b.op(SPYRE_KOP_REM, u, P(i, 1)), zero));
			mask = AND(mask, b.op(SPYRE_KOP_AND, ok,
					      cmp(SPYRE_KCMP_LT, pos, P(i, 5))));
		}
		j[i] = pos;
		off = b.add(off, b.mul(pos, P(i, 0)));
	}
	int v = spyre_kernel_load(b.k, 0, off, mask, NONE);
	int r = NONE, arg = NONE;
	switch (m) {
	case MAX_FWD:
	case AMAX_FWD:
		r = spyre_kernel_reduce(b.k, SPYRE_KRED_MAX, v, NONE, NONE, mask);
		arg = spyre_kernel_reduce(b.k, SPYRE_KRED_ARGMAX, v, NONE, NONE,
					  mask);
		break;
	case AVG_FWD:
	case ADAPT_FWD:
		r = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, v, NONE, NONE, mask);
		break;
	case MAX_BWD:
	case AMAX_BWD: {
		// indices is laid out as grad_out (both contiguous)
		int hit = cmp(SPYRE_KCMP_EQ,
			      spyre_kernel_load(b.k, 1, off, mask, NONE), yflat);
		int mm = AND(mask, hit);
		r = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, v, NONE, NONE, mm);
		break;
	}
	default:
		r = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM,
					b.div(v, divisor(j)), NONE, NONE, mask);
		break;
	}
	spyre_kernel_endpass(b.k);
	if (m == AVG_FWD || m == ADAPT_FWD) {
		int jp[kMaxD] = {};
		for (unsigned int i = 0; i < D; i++)
			jp[i] = idx(2 + i);
		r = ints ? tdiv(r, b.cvt(divisor(jp), vtype(pb.dt))) :
			   b.div(r, divisor(jp));
	}
	spyre_kernel_store(b.k, out_op, out_off, r, NONE, 0);
	if (m == MAX_FWD || m == AMAX_FWD) {
		// the window offset of the maximum, then its image element
		int y[kMaxD] = {};
		int rest = arg;
		for (int i = static_cast<int>(D) - 1; i >= 0; i--) {
			unsigned int u = static_cast<unsigned int>(i);
			int t = b.op(SPYRE_KOP_REM, rest, P(u, 6));
			rest = tdiv(rest, P(u, 6));
			if (m == AMAX_FWD)
				y[i] = b.add(astart(u, idx(2 + u)), t);
			else
				y[i] = b.add(b.add(b.mul(idx(2 + u), P(u, 1)),
						   b.mul(t, P(u, 2))), P(u, 3));
		}
		spyre_kernel_store(b.k, 2, out_off, flat(y), NONE, 0);
	}
	return spyre_kernel_error(b.k);
}

// Run mode @m: @rd the tensor read through windows ([N, C, ...]: the
// input forward, grad_out backward), @out the written one (contiguous
// [N, C, ...]: output forward, grad_input backward), @ind the indices (max
// pooling: written forward, read backward, laid out as grad_out).
void run_pool(Mode m, const Pool &g, const at::Tensor &rd, const at::Tensor &out,
	      const at::Tensor &ind, bool has_ovr, double ovr, bool cip)
{
	if (out.numel() == 0)
		return;
	const int D = g.D;
	PoolBuild pb{m, kdtype(rd.scalar_type()), static_cast<unsigned int>(D)};
	Key key;
	key.op = kOpPool;
	key.variant = m;
	key.npdims = static_cast<uint8_t>(2 + D);
	key.nrdims = static_cast<uint8_t>(D);
	key.dt[0] = static_cast<uint8_t>(pb.dt);
	int card = rd.device().index();
	const Prog *prog = program(card, key, build_pool, &pb);
	TORCH_CHECK(prog->err == 0, "spyre: the card refused a pooling kernel "
		    "(error ", prog->err, ")");
	Launch L;
	L.params[0] = static_cast<uint64_t>(rd.stride(0));
	L.params[1] = static_cast<uint64_t>(rd.stride(1));
	for (int i = 0; i < 2 + D; i++)
		L.params[2 + i] = static_cast<uint64_t>(out.stride(i));
	for (int i = 0; i < D; i++) {
		uint64_t *q = L.params + kBlk + 8 * i;
		q[0] = static_cast<uint64_t>(rd.stride(2 + i));
		q[1] = static_cast<uint64_t>(g.s[i]);
		q[2] = static_cast<uint64_t>(g.d[i]);
		q[3] = static_cast<uint64_t>(-g.p[i]);
		q[4] = static_cast<uint64_t>(g.S[i]);
		q[5] = static_cast<uint64_t>(g.O[i]);
		q[6] = static_cast<uint64_t>(g.k[i]);
		q[7] = static_cast<uint64_t>(g.p[i]);
	}
	L.params[kScal] = has_ovr;
	L.params[kScal + 1] = f32_param(ovr);
	L.params[kScal + 2] = cip;
	L.params[kScal + 3] = static_cast<uint64_t>(static_cast<int64_t>(ovr));
	L.l.npdims = static_cast<uint32_t>(2 + D);
	L.l.nrdims = static_cast<uint32_t>(D);
	for (int i = 0; i < 2 + D; i++)
		L.l.size[i] = static_cast<uint64_t>(out.size(i));
	for (int i = 0; i < D; i++)
		L.l.size[SPYRE_KDIM_R0 + i] = static_cast<uint64_t>(g.R[i]);
	L.operand(0, rd, span(rd));
	if (m == MAX_BWD || m == AMAX_BWD) {
		L.operand(1, ind, span(ind));
		L.operand(2, out, span(out));
	} else {
		L.operand(1, out, span(out));
		if (m == MAX_FWD || m == AMAX_FWD)
			L.operand(2, ind, span(ind));
	}
	run(card, prog, L, is_max(m) ? 3 : 2, kNParams);
}

// A floating input of D spatial dims, batched or not; max pooling's
// forward takes int32 and int64 too, average pooling's int64 (@ints:
// exact in them).
bool pool_dtype(const at::Tensor &t, int D, bool ints = false)
{
	at::ScalarType s = t.scalar_type();
	bool ok = s == at::kFloat || s == at::kHalf || s == at::kBFloat16 ||
		  (ints && (s == at::kInt || s == at::kLong));
	return ok && (t.dim() == D + 1 || t.dim() == D + 2);
}

// One of a pooling argument's D values (a single value stands for all).
int64_t argn(at::IntArrayRef a, int i, int64_t dflt)
{
	if (a.empty())
		return dflt;
	return a.size() == 1 ? a[0] : a[i];
}

// PyTorch's pooling_output_shape.
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil,
		 bool ceil_mode)
{
	int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
	int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
	if (ceil_mode && (out - 1) * s >= in + pad)
		out--;
	return out;
}

// The geometry of a max/avg pool over the last @D dims of @self, or false
// when PyTorch's checks refuse the arguments (the fallback then raises
// its error).
bool pool_geo(int D, const at::Tensor &self, at::IntArrayRef kernel,
	      at::IntArrayRef stride, at::IntArrayRef padding,
	      at::IntArrayRef dilation, bool ceil_mode, Pool &g,
	      bool ints = false)
{
	auto bad = [D](at::IntArrayRef a, bool may_be_empty) {
		return (a.empty() && !may_be_empty) ||
		       (a.size() != 1 && a.size() != static_cast<size_t>(D) &&
			!a.empty());
	};
	if (!pool_dtype(self, D, ints) || bad(kernel, false) ||
	    bad(stride, true) || bad(padding, false) || bad(dilation, false))
		return false;
	g.D = D;
	int64_t nd = self.dim();
	for (int i = 0; i < D; i++) {
		g.k[i] = argn(kernel, i, 1);
		g.s[i] = argn(stride, i, g.k[i]);
		g.p[i] = argn(padding, i, 0);
		g.d[i] = argn(dilation, i, 1);
		g.S[i] = self.size(nd - D + i);
		if (g.k[i] <= 0 || g.s[i] <= 0 || g.d[i] <= 0 || g.p[i] < 0 ||
		    g.p[i] > g.k[i] / 2)
			return false;
		g.O[i] = pool_out(g.S[i], g.k[i], g.p[i], g.s[i], g.d[i],
				  ceil_mode);
		if (g.O[i] < 1)
			return false;
		g.R[i] = g.k[i];
	}
	for (int64_t i = nd == D + 2 ? 1 : 0; i < nd; i++)
		if (self.size(i) == 0)
			return false;
	return true;
}

// @t as [N, C, ...] (an unbatched [C, ...] gets N = 1).
at::Tensor batched(const at::Tensor &t, int D)
{
	return t.dim() == D + 1 ? t.unsqueeze(0) : t;
}

std::vector<int64_t> out_shape(const at::Tensor &self, const Pool &g)
{
	std::vector<int64_t> s(self.sizes().begin(), self.sizes().end() - g.D);
	s.insert(s.end(), g.O, g.O + g.D);
	return s;
}

std::tuple<at::Tensor, at::Tensor> max_pool_fwd(const at::Tensor &self,
						const Pool &g)
{
	const int D = g.D;
	c10::DeviceGuard guard(self.device());
	std::vector<int64_t> os = out_shape(self, g);
	at::Tensor out = at::empty(os, self.options());
	at::Tensor ind = at::empty(os, self.options().dtype(at::kLong));
	run_pool(MAX_FWD, g, batched(self, D), batched(out, D),
		 batched(ind, D), false, 0.0, false);
	return {out, ind};
}

std::tuple<at::Tensor, at::Tensor>
k_max_pool2d_with_indices(const at::Tensor &self, at::IntArrayRef kernel,
			  at::IntArrayRef stride, at::IntArrayRef padding,
			  at::IntArrayRef dilation, bool ceil_mode)
{
	Pool g;
	if (!pool_geo(2, self, kernel, stride, padding, dilation, ceil_mode, g,
		      true))
		return SPYRE_FALLBACK(max_pool2d_with_indices, self, kernel,
				      stride, padding, dilation, ceil_mode);
	count_native("aten::max_pool2d_with_indices");
	return max_pool_fwd(self, g);
}

std::tuple<at::Tensor, at::Tensor>
k_max_pool3d_with_indices(const at::Tensor &self, at::IntArrayRef kernel,
			  at::IntArrayRef stride, at::IntArrayRef padding,
			  at::IntArrayRef dilation, bool ceil_mode)
{
	Pool g;
	if (!pool_geo(3, self, kernel, stride, padding, dilation, ceil_mode, g,
		      true))
		return SPYRE_FALLBACK(max_pool3d_with_indices, self, kernel,
				      stride, padding, dilation, ceil_mode);
	count_native("aten::max_pool3d_with_indices");
	return max_pool_fwd(self, g);
}

// The backward of max pooling (adaptive too): whether it runs on the card
// (grad_out and indices shaped as the forward's output @os).
bool max_bwd_ok(const at::Tensor &grad_out, const at::Tensor &self,
		const at::Tensor &indices, at::IntArrayRef os)
{
	return grad_out.scalar_type() == self.scalar_type() &&
	       grad_out.device() == self.device() &&
	       indices.device() == self.device() &&
	       indices.scalar_type() == at::kLong &&
	       grad_out.sizes() == indices.sizes() && grad_out.sizes() == os;
}

at::Tensor max_bwd(Mode m, const Pool &g, const at::Tensor &grad_out,
		   const at::Tensor &self, const at::Tensor &indices)
{
	c10::DeviceGuard guard(self.device());
	at::Tensor gi = at::empty(self.sizes(), self.options());
	run_pool(m, g, batched(grad_out.contiguous(), g.D), batched(gi, g.D),
		 batched(indices.contiguous(), g.D), false, 0.0, false);
	return gi;
}

at::Tensor k_max_pool2d_with_indices_backward(
	const at::Tensor &grad_out, const at::Tensor &self,
	at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
	at::IntArrayRef dilation, bool ceil_mode, const at::Tensor &indices)
{
	Pool g;
	if (!pool_geo(2, self, kernel, stride, padding, dilation, ceil_mode, g) ||
	    !max_bwd_ok(grad_out, self, indices, out_shape(self, g)))
		return SPYRE_FALLBACK(max_pool2d_with_indices_backward, grad_out,
				      self, kernel, stride, padding, dilation,
				      ceil_mode, indices);
	count_native("aten::max_pool2d_with_indices_backward");
	return max_bwd(MAX_BWD, g, grad_out, self, indices);
}

at::Tensor k_max_pool3d_with_indices_backward(
	const at::Tensor &grad_out, const at::Tensor &self,
	at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
	at::IntArrayRef dilation, bool ceil_mode, const at::Tensor &indices)
{
	Pool g;
	if (!pool_geo(3, self, kernel, stride, padding, dilation, ceil_mode, g) ||
	    !max_bwd_ok(grad_out, self, indices, out_shape(self, g)))
		return SPYRE_FALLBACK(max_pool3d_with_indices_backward, grad_out,
				      self, kernel, stride, padding, dilation,
				      ceil_mode, indices);
	count_native("aten::max_pool3d_with_indices_backward");
	return max_bwd(MAX_BWD, g, grad_out, self, indices);
}

// @fwd: the forward, which takes int64 too, as the CPU's (the sum's
// truncating division by the divisor).
bool avg_ok(int D, const at::Tensor &self, at::IntArrayRef kernel,
	    at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
	    std::optional<int64_t> divisor_override, Pool &g, bool fwd)
{
	int64_t one = 1;
	return self.scalar_type() != at::kInt &&
	       pool_geo(D, self, kernel, stride, padding, at::IntArrayRef(one),
			ceil_mode, g, fwd) &&
	       (!divisor_override.has_value() || *divisor_override != 0);
}

at::Tensor avg_fwd(const Pool &g, const at::Tensor &self,
		   bool count_include_pad,
		   std::optional<int64_t> divisor_override)
{
	c10::DeviceGuard guard(self.device());
	at::Tensor out = at::empty(out_shape(self, g), self.options());
	run_pool(AVG_FWD, g, batched(self, g.D), batched(out, g.D), at::Tensor(),
		 divisor_override.has_value(),
		 static_cast<double>(divisor_override.value_or(1)),
		 count_include_pad);
	return out;
}

at::Tensor avg_bwd(const Pool &g, const at::Tensor &grad_out,
		   const at::Tensor &self, bool count_include_pad,
		   std::optional<int64_t> divisor_override)
{
	c10::DeviceGuard guard(self.device());
	at::Tensor gi = at::empty(self.sizes(), self.options());
	run_pool(AVG_BWD, g, batched(grad_out, g.D), batched(gi, g.D),
		 at::Tensor(), divisor_override.has_value(),
		 static_cast<double>(divisor_override.value_or(1)),
		 count_include_pad);
	return gi;
}

bool avg_bwd_ok(const at::Tensor &grad_out, const at::Tensor &self,
		const Pool &g)
{
	return grad_out.scalar_type() == self.scalar_type() &&
	       grad_out.device() == self.device() &&
	       grad_out.sizes() == at::IntArrayRef(out_shape(self, g));
}

at::Tensor k_avg_pool2d(const at::Tensor &self, at::IntArrayRef kernel,
			at::IntArrayRef stride, at::IntArrayRef padding,
			bool ceil_mode, bool count_include_pad,
			std::optional<int64_t> divisor_override)
{
	Pool g;
	if (!avg_ok(2, self, kernel, stride, padding, ceil_mode,
		    divisor_override, g, true))
		return SPYRE_FALLBACK(avg_pool2d, self, kernel, stride, padding,
				      ceil_mode, count_include_pad,
				      divisor_override);
	count_native("aten::avg_pool2d");
	return avg_fwd(g, self, count_include_pad, divisor_override);
}

at::Tensor k_avg_pool3d(const at::Tensor &self, at::IntArrayRef kernel,
			at::IntArrayRef stride, at::IntArrayRef padding,
			bool ceil_mode, bool count_include_pad,
			std::optional<int64_t> divisor_override)
{
	Pool g;
	if (!avg_ok(3, self, kernel, stride, padding, ceil_mode,
		    divisor_override, g, true))
		return SPYRE_FALLBACK(avg_pool3d, self, kernel, stride, padding,
				      ceil_mode, count_include_pad,
				      divisor_override);
	count_native("aten::avg_pool3d");
	return avg_fwd(g, self, count_include_pad, divisor_override);
}

at::Tensor k_avg_pool2d_backward(const at::Tensor &grad_out,
				 const at::Tensor &self, at::IntArrayRef kernel,
				 at::IntArrayRef stride, at::IntArrayRef padding,
				 bool ceil_mode, bool count_include_pad,
				 std::optional<int64_t> divisor_override)
{
	Pool g;
	if (!avg_ok(2, self, kernel, stride, padding, ceil_mode,
		    divisor_override, g, false) ||
	    !avg_bwd_ok(grad_out, self, g))
		return SPYRE_FALLBACK(avg_pool2d_backward, grad_out, self,
				      kernel, stride, padding, ceil_mode,
				      count_include_pad, divisor_override);
	count_native("aten::avg_pool2d_backward");
	return avg_bwd(g, grad_out, self, count_include_pad, divisor_override);
}

at::Tensor k_avg_pool3d_backward(const at::Tensor &grad_out,
				 const at::Tensor &self, at::IntArrayRef kernel,
				 at::IntArrayRef stride, at::IntArrayRef padding,
				 bool ceil_mode, bool count_include_pad,
				 std::optional<int64_t> divisor_override)
{
	Pool g;
	if (!avg_ok(3, self, kernel, stride, padding, ceil_mode,
		    divisor_override, g, false) ||
	    !avg_bwd_ok(grad_out, self, g))
		return SPYRE_FALLBACK(avg_pool3d_backward, grad_out, self,
				      kernel, stride, padding, ceil_mode,
				      count_include_pad, divisor_override);
	count_native("aten::avg_pool3d_backward");
	return avg_bwd(g, grad_out, self, count_include_pad, divisor_override);
}

// The adaptive geometry of an input of spatial sizes S and output O: the
// reduction sizes are the largest window (forward) or the most windows
// covering one element (backward); k is the reduction size too (max
// pooling's forward decomposes the position of the maximum by it).
Pool adapt_geo(const at::Tensor &self, at::IntArrayRef osz, bool backward)
{
	Pool g;
	g.D = static_cast<int>(osz.size());
	int64_t nd = self.dim();
	for (int i = 0; i < g.D; i++) {
		int64_t S = self.size(nd - g.D + i), O = osz[i];
		g.S[i] = S;
		g.O[i] = O;
		g.s[i] = g.d[i] = 1;
		g.p[i] = 0;
		int64_t r = 0;
		if (!backward) {
			for (int64_t j = 0; j < O; j++)
				r = std::max(r, ((j + 1) * S + O - 1) / O -
						j * S / O);
		} else {
			for (int64_t y = 0; y < S; y++)
				r = std::max(r, ((y + 1) * O + S - 1) / S -
						y * O / S);
		}
		g.R[i] = g.k[i] = r;
	}
	return g;
}

// Whether an adaptive pool of @self to @osz runs on the card.
bool adapt_ok(const at::Tensor &self, at::IntArrayRef osz)
{
	int D = static_cast<int>(osz.size());
	bool ok = (D == 2 || D == 3) && pool_dtype(self, D);
	for (int64_t i = 0; ok && i < D; i++)
		ok = osz[i] >= 0;
	for (int64_t i = self.dim() == D + 2 ? 1 : 0; ok && i < self.dim(); i++)
		ok = self.size(i) > 0;
	return ok;
}

std::vector<int64_t> adapt_shape(const at::Tensor &self, at::IntArrayRef osz)
{
	std::vector<int64_t> os(self.sizes().begin(),
				self.sizes().end() - osz.size());
	os.insert(os.end(), osz.begin(), osz.end());
	return os;
}

at::Tensor adapt_avg_fwd(const at::Tensor &self, at::IntArrayRef osz)
{
	c10::DeviceGuard guard(self.device());
	at::Tensor out = at::empty(adapt_shape(self, osz), self.options());
	int D = static_cast<int>(osz.size());
	run_pool(ADAPT_FWD, adapt_geo(self, osz, false), batched(self, D),
		 batched(out, D), at::Tensor(), false, 0.0, false);
	return out;
}

at::Tensor k_adaptive_avg_pool2d(const at::Tensor &self,
				 at::IntArrayRef output_size)
{
	if (output_size.size() != 2 || !adapt_ok(self, output_size))
		return SPYRE_FALLBACK(_adaptive_avg_pool2d, self, output_size);
	count_native("aten::_adaptive_avg_pool2d");
	return adapt_avg_fwd(self, output_size);
}

// In the half types it does not run on the card: the CPU's result differs
// from the float32 mean rounded once beyond the OpInfo tolerance, and
// where the CPU rounds is not known yet.
at::Tensor k_adaptive_avg_pool3d(const at::Tensor &self,
				 at::IntArrayRef output_size)
{
	if (output_size.size() != 3 || !adapt_ok(self, output_size) ||
	    self.scalar_type() != at::kFloat)
		return SPYRE_FALLBACK(_adaptive_avg_pool3d, self, output_size);
	count_native("aten::_adaptive_avg_pool3d");
	return adapt_avg_fwd(self, output_size);
}

// The backward of an adaptive pool of @D dims: whether it runs on the
// card.
bool adapt_bwd_ok(int D, const at::Tensor &grad_out, const at::Tensor &self)
{
	bool ok = pool_dtype(self, D) && grad_out.dim() == self.dim() &&
		  grad_out.scalar_type() == self.scalar_type() &&
		  grad_out.device() == self.device();
	for (int64_t i = 0; ok && i < self.dim() - D; i++)
		ok = grad_out.size(i) == self.size(i);
	return ok;
}

at::Tensor adapt_avg_bwd(int D, const at::Tensor &grad_out,
			 const at::Tensor &self)
{
	c10::DeviceGuard guard(self.device());
	at::Tensor gi = at::empty(self.sizes(), self.options());
	at::IntArrayRef osz = grad_out.sizes().slice(grad_out.dim() - D);
	run_pool(ADAPT_BWD, adapt_geo(self, osz, true), batched(grad_out, D),
		 batched(gi, D), at::Tensor(), false, 0.0, false);
	return gi;
}

at::Tensor k_adaptive_avg_pool2d_backward(const at::Tensor &grad_out,
					  const at::Tensor &self)
{
	if (!adapt_bwd_ok(2, grad_out, self))
		return SPYRE_FALLBACK(_adaptive_avg_pool2d_backward, grad_out,
				      self);
	count_native("aten::_adaptive_avg_pool2d_backward");
	return adapt_avg_bwd(2, grad_out, self);
}

at::Tensor k_adaptive_avg_pool3d_backward(const at::Tensor &grad_out,
					  const at::Tensor &self)
{
	if (!adapt_bwd_ok(3, grad_out, self))
		return SPYRE_FALLBACK(_adaptive_avg_pool3d_backward, grad_out,
				      self);
	count_native("aten::_adaptive_avg_pool3d_backward");
	return adapt_avg_bwd(3, grad_out, self);
}

std::tuple<at::Tensor, at::Tensor> adapt_max_fwd(const at::Tensor &self,
						 at::IntArrayRef osz)
{
	c10::DeviceGuard guard(self.device());
	std::vector<int64_t> os = adapt_shape(self, osz);
	at::Tensor out = at::empty(os, self.options());
	at::Tensor ind = at::empty(os, self.options().dtype(at::kLong));
	int D = static_cast<int>(osz.size());
	run_pool(AMAX_FWD, adapt_geo(self, osz, false), batched(self, D),
		 batched(out, D), batched(ind, D), false, 0.0, false);
	return {out, ind};
}

// PyTorch's adaptive max pooling refuses an empty output size.
bool amax_ok(const at::Tensor &self, at::IntArrayRef osz)
{
	if (!adapt_ok(self, osz))
		return false;
	for (int64_t o : osz)
		if (o <= 0)
			return false;
	return true;
}

std::tuple<at::Tensor, at::Tensor>
k_adaptive_max_pool2d(const at::Tensor &self, at::IntArrayRef output_size)
{
	if (output_size.size() != 2 || !amax_ok(self, output_size))
		return SPYRE_FALLBACK(adaptive_max_pool2d, self, output_size);
	count_native("aten::adaptive_max_pool2d");
	return adapt_max_fwd(self, output_size);
}

std::tuple<at::Tensor, at::Tensor>
k_adaptive_max_pool3d(const at::Tensor &self, at::IntArrayRef output_size)
{
	if (output_size.size() != 3 || !amax_ok(self, output_size))
		return SPYRE_FALLBACK(adaptive_max_pool3d, self, output_size);
	count_native("aten::adaptive_max_pool3d");
	return adapt_max_fwd(self, output_size);
}

at::Tensor adapt_max_bwd(int D, const at::Tensor &grad_out,
			 const at::Tensor &self, const at::Tensor &indices)
{
	at::IntArrayRef osz = grad_out.sizes().slice(grad_out.dim() - D);
	return max_bwd(AMAX_BWD, adapt_geo(self, osz, true), grad_out, self,
		       indices);
}

at::Tensor k_adaptive_max_pool2d_backward(const at::Tensor &grad_out,
					  const at::Tensor &self,
					  const at::Tensor &indices)
{
	if (!adapt_bwd_ok(2, grad_out, self) ||
	    !max_bwd_ok(grad_out, self, indices, grad_out.sizes()))
		return SPYRE_FALLBACK(adaptive_max_pool2d_backward, grad_out,
				      self, indices);
	count_native("aten::adaptive_max_pool2d_backward");
	return adapt_max_bwd(2, grad_out, self, indices);
}

at::Tensor k_adaptive_max_pool3d_backward(const at::Tensor &grad_out,
					  const at::Tensor &self,
					  const at::Tensor &indices)
{
	if (!adapt_bwd_ok(3, grad_out, self) ||
	    !max_bwd_ok(grad_out, self, indices, grad_out.sizes()))
		return SPYRE_FALLBACK(adaptive_max_pool3d_backward, grad_out,
				      self, indices);
	count_native("aten::adaptive_max_pool3d_backward");
	return adapt_max_bwd(3, grad_out, self, indices);
}

// ---- upsampling ------------------------------------------------------------

enum Interp : uint8_t { NEAREST = 1, NEAREST_EXACT, LINEAR };

struct UpBuild {
	Interp mode;
	uint32_t dt;
	unsigned int D;		// spatial dims, 1..3
};

// Parameters of an upsampling kernel over [N, C, spatial D]: the input's
// strides at 0.., the output's at 5..; per spatial dim i the scale (f32)
// at 10 + i and the input size at 13 + i; align_corners (bool) at 16.
constexpr unsigned int kUpOut = 5, kUpScale = 10, kUpSize = 13, kUpAlign = 16;
constexpr unsigned int kUpParams = 17;

// One point per output element, no reduction.  Source positions as
// PyTorch's CPU kernels compute them (f32); linear modes weigh the 2^D
// corners dim by dim, the first dim outermost, as PyTorch's CPU kernels.
int build_upsample(struct spyre_kernel **kp, const void *ctx)
{
	const UpBuild &u = *static_cast<const UpBuild *>(ctx);
	const unsigned int D = std::min(u.D, static_cast<unsigned int>(kMaxD));
	uint32_t dts[2] = {u.dt, u.dt};
	int rc = spyre_kernel_create(dts, 2, kUpParams, 2 + D, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64, F = SPYRE_KTYPE_F32;
	int one = b.c(I, 1);
	int base = spyre_kernel_affine(b.k, I, NONE, 3u, 0);
	int out = spyre_kernel_affine(b.k, I, NONE, (1u << (2 + D)) - 1, kUpOut);
	int lo[kMaxD] = {}, hi[kMaxD] = {}, lam[kMaxD] = {};
	for (unsigned int i = 0; i < D; i++) {
		int o = b.cvt(spyre_kernel_idx(b.k, I, 2 + i), F);
		int scale = b.param(F, kUpScale + i);
		int last = b.sub(b.param(I, kUpSize + i), one);
		if (u.mode != LINEAR) {
			if (u.mode == NEAREST_EXACT)
				o = b.add(o, b.f(0.5f));
			int src = b.un(SPYRE_KOP_FLOOR, b.mul(o, scale));
			lo[i] = b.min(b.cvt(src, I), last);
			continue;
		}
		// align_corners: scale * o; else max(scale * (o + 0.5) - 0.5, 0)
		int half = b.f(0.5f);
		int src = b.sel(b.param(SPYRE_KTYPE_BOOL, kUpAlign),
				b.mul(scale, o),
				b.max(b.sub(b.mul(scale, b.add(o, half)), half),
				      b.f(0.0f)));
		lo[i] = b.min(b.cvt(b.un(SPYRE_KOP_FLOOR, src), I), last);
		lam[i] = b.min(b.max(b.sub(src, b.cvt(lo[i], F)), b.f(0.0f)),
			       b.f(1.0f));
		hi[i] = b.add(lo[i], b.cvt(b.cmp(SPYRE_KCMP_LT, lo[i], last), I));
	}
	// the input element at the corner whose bit i picks hi[i] over lo[i]
	auto at = [&](unsigned int corner) {
		int off = base;
		for (unsigned int i = 0; i < D; i++) {
			int y = (corner >> (D - 1 - i)) & 1 ? hi[i] : lo[i];
			off = b.add(off, b.mul(y, b.param(I, 2 + i)));
		}
		return spyre_kernel_load(b.k, 0, off, NONE, NONE);
	};
	// the interpolation over dims i.. of the corners prefixed by @corner
	std::function<int(unsigned int, unsigned int)> lerp =
		[&](unsigned int i, unsigned int corner) {
		if (i == D)
			return at(corner);
		int a = lerp(i + 1, corner << 1), c = lerp(i + 1, corner << 1 | 1);
		return b.add(b.mul(b.sub(b.f(1.0f), lam[i]), a),
			     b.mul(lam[i], c));
	};
	int v = u.mode == LINEAR ? lerp(0, 0) : at(0);
	spyre_kernel_store(b.k, 1, out, v, NONE, 0);
	return spyre_kernel_error(b.k);
}

// PyTorch's scale of an output index along one dim (area_pixel_compute_
// scale / compute_scales_value, in float).
float up_scale(int64_t in, int64_t out, bool align, std::optional<double> sc)
{
	if (align)
		return out > 1 ? static_cast<float>(in - 1) /
				 static_cast<float>(out - 1) : 0.0f;
	if (sc.has_value() && *sc > 0.0)
		return static_cast<float>(1.0 / *sc);
	return static_cast<float>(in) / static_cast<float>(out);
}

// Whether an upsampling of @self to @osz runs on the card.  Trilinear in
// the half types does not: the CPU's result differs from the float32
// interpolation rounded once by more than the OpInfo tolerance, and
// where the CPU rounds is not known yet.
bool up_ok(const at::Tensor &self, at::IntArrayRef osz, Interp mode)
{
	at::ScalarType t = self.scalar_type();
	int64_t D = static_cast<int64_t>(osz.size());
	bool ok = (t == at::kFloat ||
		   ((t == at::kHalf || t == at::kBFloat16) &&
		    (mode != LINEAR || D < 3))) &&
		  D >= 1 && D <= kMaxD && self.dim() == D + 2;
	for (int64_t i = 0; ok && i < D; i++)
		ok = osz[i] > 0;
	for (int64_t i = 1; ok && i < self.dim(); i++)
		ok = self.size(i) > 0;
	return ok;
}

// Upsample [N, C, spatial] @self to the spatial sizes @osz; @sc the scales
// given per dim (PyTorch's optional scales_d/_h/_w).
at::Tensor upsample(Interp mode, const at::Tensor &self, at::IntArrayRef osz,
		    bool align, const std::optional<double> *sc)
{
	c10::DeviceGuard guard(self.device());
	const unsigned int D = static_cast<unsigned int>(osz.size());
	std::vector<int64_t> os{self.size(0), self.size(1)};
	os.insert(os.end(), osz.begin(), osz.end());
	at::Tensor out = at::empty(os, self.options());
	if (out.numel() == 0)
		return out;
	UpBuild ub{mode, kdtype(self.scalar_type()), D};
	Key key;
	key.op = kOpUpsample;
	key.variant = mode;
	key.npdims = static_cast<uint8_t>(2 + D);
	key.dt[0] = static_cast<uint8_t>(ub.dt);
	int card = self.device().index();
	const Prog *prog = program(card, key, build_upsample, &ub);
	TORCH_CHECK(prog->err == 0, "spyre: the card refused an upsampling "
		    "kernel (error ", prog->err, ")");
	Launch L;
	for (unsigned int i = 0; i < 2 + D; i++) {
		L.params[i] = static_cast<uint64_t>(self.stride(i));
		L.params[kUpOut + i] = static_cast<uint64_t>(out.stride(i));
		L.l.size[i] = static_cast<uint64_t>(out.size(i));
	}
	for (unsigned int i = 0; i < D; i++) {
		int64_t in = self.size(2 + i), o = osz[i];
		float f = up_scale(in, o, align, sc[i]);
		// nearest: PyTorch's nearest_idx takes equal and doubled sizes
		// exactly
		if (mode == NEAREST && o == in)
			f = 1.0f;
		else if (mode == NEAREST && o == 2 * in)
			f = 0.5f;
		L.params[kUpScale + i] = f32_param(f);
		L.params[kUpSize + i] = static_cast<uint64_t>(in);
	}
	L.params[kUpAlign] = align;
	L.l.npdims = 2 + D;
	L.operand(0, self, span(self));
	L.operand(1, out, static_cast<uint64_t>(out.numel()));
	run(card, prog, L, 2, kUpParams);
	return out;
}

// The registered upsampling ops, by PyTorch's name, mode and number of
// spatial dims N (the scales come last, one per spatial dim; the linear
// modes take align_corners before them).
#define SPYRE_UP_NEAREST(name, M, N)                                        \
	at::Tensor k_##name(const at::Tensor &self, at::IntArrayRef osz,      \
			    SPYRE_UP_SCALES_##N)                    \
	{                                                                     \
		std::optional<double> sc[] = {SPYRE_UP_NAMES_##N}; \
		if (!up_ok(self, osz, M))                                     \
			return SPYRE_FALLBACK(name, self, osz,                \
					      SPYRE_UP_NAMES_##N); \
		count_native("aten::" #name);                                 \
		return upsample(M, self, osz, false, sc);                     \
	}
#define SPYRE_UP_LINEAR(name, N)                                            \
	at::Tensor k_##name(const at::Tensor &self, at::IntArrayRef osz,      \
			    bool align, SPYRE_UP_SCALES_##N)        \
	{                                                                     \
		std::optional<double> sc[] = {SPYRE_UP_NAMES_##N}; \
		if (!up_ok(self, osz, LINEAR))                                \
			return SPYRE_FALLBACK(name, self, osz, align,         \
					      SPYRE_UP_NAMES_##N); \
		count_native("aten::" #name);                                 \
		return upsample(LINEAR, self, osz, align, sc);                \
	}
#define SPYRE_UP_SCALES_1 std::optional<double> s0
#define SPYRE_UP_SCALES_2 std::optional<double> s0, std::optional<double> s1
#define SPYRE_UP_SCALES_3                                                     \
	std::optional<double> s0, std::optional<double> s1,                   \
		std::optional<double> s2
#define SPYRE_UP_NAMES_1 s0
#define SPYRE_UP_NAMES_2 s0, s1
#define SPYRE_UP_NAMES_3 s0, s1, s2

SPYRE_UP_NEAREST(upsample_nearest1d, NEAREST, 1)
SPYRE_UP_NEAREST(upsample_nearest2d, NEAREST, 2)
SPYRE_UP_NEAREST(upsample_nearest3d, NEAREST, 3)
SPYRE_UP_NEAREST(_upsample_nearest_exact1d, NEAREST_EXACT, 1)
SPYRE_UP_NEAREST(_upsample_nearest_exact2d, NEAREST_EXACT, 2)
SPYRE_UP_NEAREST(_upsample_nearest_exact3d, NEAREST_EXACT, 3)
SPYRE_UP_LINEAR(upsample_linear1d, 1)
SPYRE_UP_LINEAR(upsample_bilinear2d, 2)
SPYRE_UP_LINEAR(upsample_trilinear3d, 3)

// ---- max unpooling -------------------------------------------------------------

// max_unpool2d/3d: zeros of @osz (D spatial dims) per plane, each element
// of @self written at its flat index of @indices (laid out as @self, int64)
// by the scatter kernel (the last of repeated indices wins; the CPU's
// threads make that case vary there; an index out of range is the
// scatter's device-side assertion).
// Undefined when the card does not take the arguments (the CPU's checks
// then raise PyTorch's errors).
at::Tensor unpool(const at::Tensor &self, const at::Tensor &indices,
		  at::IntArrayRef osz)
{
	const int64_t D = static_cast<int64_t>(osz.size());
	at::ScalarType t = self.scalar_type();
	if (self.device().type() != c10::DeviceType::PrivateUse1 ||
	    !kdtype(t) || t == at::kBool || indices.device() != self.device() ||
	    indices.scalar_type() != at::kLong ||
	    !indices.sizes().equals(self.sizes()) ||
	    (self.dim() != D + 1 && self.dim() != D + 2) || self.numel() == 0)
		return {};
	int64_t vol = 1;
	for (int64_t o : osz) {
		if (o <= 0)
			return {};
		vol *= o;
	}
	c10::DeviceGuard guard(self.device());
	bool batched = self.dim() == D + 2;
	at::Tensor x = batched ? self : self.unsqueeze(0);
	at::Tensor ind = batched ? indices : indices.unsqueeze(0);
	int64_t N = x.size(0), C = x.size(1);
	at::Tensor out = at::zeros({N, C, vol}, self.options());
	out.scatter_(2, ind.reshape({N, C, -1}), x.reshape({N, C, -1}));
	std::vector<int64_t> shape{N, C};
	shape.insert(shape.end(), osz.begin(), osz.end());
	out = out.view(shape);
	return batched ? out : out.squeeze(0);
}

at::Tensor k_max_unpool2d(const at::Tensor &self, const at::Tensor &indices,
			  at::IntArrayRef output_size)
{
	at::Tensor r = output_size.size() == 2 ?
		unpool(self, indices, output_size) : at::Tensor();
	if (!r.defined())
		return SPYRE_FALLBACK(max_unpool2d, self, indices, output_size);
	count_native("aten::max_unpool2d");
	return r;
}

// stride and padding only enter the CPU's checks: arguments it would
// refuse go there
at::Tensor k_max_unpool3d(const at::Tensor &self, const at::Tensor &indices,
			  at::IntArrayRef output_size, at::IntArrayRef stride,
			  at::IntArrayRef padding)
{
	bool ok = output_size.size() == 3 && stride.size() == 3 &&
		  padding.size() == 3;
	for (size_t i = 0; ok && i < 3; i++)
		ok = stride[i] > 0 && padding[i] >= 0;
	at::Tensor r = ok ? unpool(self, indices, output_size) : at::Tensor();
	if (!r.defined())
		return SPYRE_FALLBACK(max_unpool3d, self, indices, output_size,
				      stride, padding);
	count_native("aten::max_unpool3d");
	return r;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("upsample_nearest1d", TORCH_FN(k_upsample_nearest1d));
	m.impl("upsample_nearest2d", TORCH_FN(k_upsample_nearest2d));
	m.impl("upsample_nearest3d", TORCH_FN(k_upsample_nearest3d));
	m.impl("_upsample_nearest_exact1d", TORCH_FN(k__upsample_nearest_exact1d));
	m.impl("_upsample_nearest_exact2d", TORCH_FN(k__upsample_nearest_exact2d));
	m.impl("_upsample_nearest_exact3d", TORCH_FN(k__upsample_nearest_exact3d));
	m.impl("upsample_linear1d", TORCH_FN(k_upsample_linear1d));
	m.impl("upsample_bilinear2d", TORCH_FN(k_upsample_bilinear2d));
	m.impl("upsample_trilinear3d", TORCH_FN(k_upsample_trilinear3d));
	m.impl("max_pool2d_with_indices", TORCH_FN(k_max_pool2d_with_indices));
	m.impl("max_pool3d_with_indices", TORCH_FN(k_max_pool3d_with_indices));
	m.impl("max_pool2d_with_indices_backward",
	       TORCH_FN(k_max_pool2d_with_indices_backward));
	m.impl("max_pool3d_with_indices_backward",
	       TORCH_FN(k_max_pool3d_with_indices_backward));
	m.impl("max_unpool2d", TORCH_FN(k_max_unpool2d));
	m.impl("max_unpool3d", TORCH_FN(k_max_unpool3d));
	m.impl("avg_pool2d", TORCH_FN(k_avg_pool2d));
	m.impl("avg_pool3d", TORCH_FN(k_avg_pool3d));
	m.impl("avg_pool2d_backward", TORCH_FN(k_avg_pool2d_backward));
	m.impl("avg_pool3d_backward", TORCH_FN(k_avg_pool3d_backward));
	m.impl("_adaptive_avg_pool2d", TORCH_FN(k_adaptive_avg_pool2d));
	m.impl("_adaptive_avg_pool3d", TORCH_FN(k_adaptive_avg_pool3d));
	m.impl("_adaptive_avg_pool2d_backward",
	       TORCH_FN(k_adaptive_avg_pool2d_backward));
	m.impl("_adaptive_avg_pool3d_backward",
	       TORCH_FN(k_adaptive_avg_pool3d_backward));
	m.impl("adaptive_max_pool2d", TORCH_FN(k_adaptive_max_pool2d));
	m.impl("adaptive_max_pool3d", TORCH_FN(k_adaptive_max_pool3d));
	m.impl("adaptive_max_pool2d_backward",
	       TORCH_FN(k_adaptive_max_pool2d_backward));
	m.impl("adaptive_max_pool3d_backward",
	       TORCH_FN(k_adaptive_max_pool3d_backward));
}

} // namespace spyre_torch
