// SPDX-License-Identifier: MIT
// Pooling and upsampling on the card, generated: max_pool2d_with_indices,
// avg_pool2d, _adaptive_avg_pool2d and their backward; upsample_nearest2d
// and upsample_bilinear2d (forward).
//
// A forward kernel runs one point per output element and a reduction over
// its window (masked where the window leaves the image: padding never
// counts as a value); max pooling also stores the index of the maximum
// (the flat index in the input plane, as PyTorch's).  A backward kernel
// runs one point per input element and a reduction over the windows that
// cover it (a gather, so no two lanes write one element and the order of
// the sums is fixed): max pooling adds the gradients of the windows whose
// index names this element, average pooling each window's gradient over
// its divisor.  The divisor is computed the same way in both directions
// (PyTorch's: count_include_pad counts the padding but not what ceil_mode
// adds past it; divisor_override replaces it).
//
// Arguments PyTorch's own checks refuse (and dtypes the card lacks) go to
// the CPU fallback, so the errors are PyTorch's.
#include "kernels.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace spyre_torch {
namespace {

using namespace kgen;

constexpr int kD = 2;			// spatial dims of the *_pool2d ops

enum Mode : uint8_t {
	MAX_FWD = 1, AVG_FWD, ADAPT_FWD, MAX_BWD, AVG_BWD, ADAPT_BWD,
};

// One pooling problem over D spatial dims: the image (the input) has
// sizes S, the output O; window j along dim i covers j * s - p + t * d,
// t in [0, k) (adaptive: [floor(j S / O), ceil((j + 1) S / O))).  R is the
// reduction size per dim: k, or the largest adaptive window (forward) or
// number of windows covering an element (backward).
struct Pool {
	int D = kD;
	int64_t S[kD], O[kD], k[kD], s[kD], p[kD], d[kD], R[kD];
};

struct PoolBuild {
	Mode mode;
	uint32_t dt;
};

// Parameters: the read operand's n and c strides (0, 1); the written
// operand's n, c and spatial strides (2..); per spatial dim i a block at
// blk + 8 i: read stride, s, d, -p, S, O, k, p; then has_override (bool),
// the override (f32), count_include_pad (bool).
constexpr unsigned int kBlk = 4 + kD;
constexpr unsigned int kScal = kBlk + 8 * kD;
constexpr unsigned int kNParams = kScal + 3;

int build_pool(struct spyre_kernel **kp, const void *ctx)
{
	const PoolBuild &pb = *static_cast<const PoolBuild *>(ctx);
	const Mode m = pb.mode;
	const unsigned int D = kD;
	bool max = m == MAX_FWD || m == MAX_BWD;
	uint32_t dts[3] = {pb.dt, pb.dt, SPYRE_DTYPE_INT64};
	if (m == MAX_BWD)	// grad_out, indices, grad_in
		dts[1] = SPYRE_DTYPE_INT64, dts[2] = pb.dt;
	int rc = spyre_kernel_create(dts, max ? 3 : 2, kNParams, 2 + D, D, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64, F = SPYRE_KTYPE_F32;
	const unsigned int out_op = m == MAX_BWD ? 2 : 1;
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
	// average pooling's divisor of output position j[] (f32)
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
		int dv = b.cvt(n, F);
		if (m == ADAPT_FWD || m == ADAPT_BWD)
			return dv;
		return b.sel(b.param(SPYRE_KTYPE_BOOL, kScal),
			     b.param(F, kScal + 1), dv);
	};
	// the flat index of image element y[] in its plane
	auto flat = [&](const int *y) {
		int f = y[0];
		for (unsigned int i = 1; i < D; i++)
			f = b.add(b.mul(f, P(i, 4)), y[i]);
		return f;
	};
	int out_off = spyre_kernel_affine(b.k, I, NONE, (1u << (2 + D)) - 1, 2);
	int yflat = NONE;
	if (m == MAX_BWD) {
		int y[kD];
		for (unsigned int i = 0; i < D; i++)
			y[i] = idx(2 + i);
		yflat = flat(y);
	}
	spyre_kernel_pass(b.k);
	int off = spyre_kernel_affine(b.k, I, NONE, 3u, 0);
	int mask = NONE;
	int j[kD];
	for (unsigned int i = 0; i < D; i++) {
		int p = idx(2 + i), t = idx(SPYRE_KDIM_R0 + i);
		int pos;	// forward: the image element; backward: the window
		if (m == MAX_FWD || m == AVG_FWD) {
			pos = b.add(b.add(b.mul(p, P(i, 1)), b.mul(t, P(i, 2))),
				    P(i, 3));
			mask = AND(mask, b.op(SPYRE_KOP_AND, cmp(SPYRE_KCMP_GE, pos, zero),
					      cmp(SPYRE_KCMP_LT, pos, P(i, 4))));
		} else if (m == ADAPT_FWD) {
			int st = astart(i, p);
			pos = b.add(st, t);
			mask = AND(mask, cmp(SPYRE_KCMP_LT, pos, aend(i, p)));
		} else if (m == ADAPT_BWD) {
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
		r = spyre_kernel_reduce(b.k, SPYRE_KRED_MAX, v, NONE, NONE, mask);
		arg = spyre_kernel_reduce(b.k, SPYRE_KRED_ARGMAX, v, NONE, NONE,
					  mask);
		break;
	case AVG_FWD:
	case ADAPT_FWD:
		r = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, v, NONE, NONE, mask);
		break;
	case MAX_BWD: {
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
		int jp[kD];
		for (unsigned int i = 0; i < D; i++)
			jp[i] = idx(2 + i);
		r = b.div(r, divisor(jp));
	}
	spyre_kernel_store(b.k, out_op, out_off, r, NONE, 0);
	if (m == MAX_FWD) {
		// the window offset of the maximum, then its image element
		int y[kD];
		int rest = arg;
		for (int i = static_cast<int>(D) - 1; i >= 0; i--) {
			unsigned int u = static_cast<unsigned int>(i);
			int t = b.op(SPYRE_KOP_REM, rest, P(u, 6));
			rest = tdiv(rest, P(u, 6));
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
	PoolBuild pb{m, kdtype(rd.scalar_type())};
	Key key;
	key.op = kOpPool;
	key.variant = m;
	key.npdims = 2 + kD;
	key.nrdims = kD;
	key.dt[0] = static_cast<uint8_t>(pb.dt);
	int card = rd.device().index();
	const Prog *prog = program(card, key, build_pool, &pb);
	TORCH_CHECK(prog->err == 0, "spyre: the card refused a pooling kernel "
		    "(error ", prog->err, ")");
	Launch L;
	L.params[0] = static_cast<uint64_t>(rd.stride(0));
	L.params[1] = static_cast<uint64_t>(rd.stride(1));
	for (int i = 0; i < 2 + kD; i++)
		L.params[2 + i] = static_cast<uint64_t>(out.stride(i));
	for (int i = 0; i < kD; i++) {
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
	L.l.npdims = 2 + kD;
	L.l.nrdims = kD;
	for (int i = 0; i < 2 + kD; i++)
		L.l.size[i] = static_cast<uint64_t>(out.size(i));
	for (int i = 0; i < kD; i++)
		L.l.size[SPYRE_KDIM_R0 + i] = static_cast<uint64_t>(g.R[i]);
	L.operand(0, rd, span(rd));
	if (m == MAX_BWD) {
		L.operand(1, ind, span(ind));
		L.operand(2, out, span(out));
	} else {
		L.operand(1, out, span(out));
		if (m == MAX_FWD)
			L.operand(2, ind, span(ind));
	}
	run(card, prog, L, m == MAX_FWD || m == MAX_BWD ? 3 : 2, kNParams);
}

bool pool_dtype(const at::Tensor &t)
{
	at::ScalarType s = t.scalar_type();
	return (s == at::kFloat || s == at::kHalf || s == at::kBFloat16) &&
	       (t.dim() == 3 || t.dim() == 4);
}

// One of a pooling argument's two values (a single value stands for both).
int64_t arg2(at::IntArrayRef a, int i, int64_t dflt)
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

// The geometry of a max/avg pool2d over @self, or false when PyTorch's
// checks refuse the arguments (the fallback then raises its error).
bool pool_geo(const at::Tensor &self, at::IntArrayRef kernel,
	      at::IntArrayRef stride, at::IntArrayRef padding,
	      at::IntArrayRef dilation, bool ceil_mode, Pool &g)
{
	if (!pool_dtype(self) || kernel.empty() || kernel.size() > 2 ||
	    stride.size() > 2 || padding.empty() || padding.size() > 2 ||
	    dilation.empty() || dilation.size() > 2)
		return false;
	int64_t nd = self.dim();
	for (int i = 0; i < kD; i++) {
		g.k[i] = arg2(kernel, i, 1);
		g.s[i] = arg2(stride, i, g.k[i]);
		g.p[i] = arg2(padding, i, 0);
		g.d[i] = arg2(dilation, i, 1);
		g.S[i] = self.size(nd - 2 + i);
		if (g.k[i] <= 0 || g.s[i] <= 0 || g.d[i] <= 0 || g.p[i] < 0 ||
		    g.p[i] > g.k[i] / 2)
			return false;
		g.O[i] = pool_out(g.S[i], g.k[i], g.p[i], g.s[i], g.d[i],
				  ceil_mode);
		if (g.O[i] < 1)
			return false;
		g.R[i] = g.k[i];
	}
	for (int64_t i = nd == 4 ? 1 : 0; i < nd; i++)
		if (self.size(i) == 0)
			return false;
	return true;
}

// @t as [N, C, H, W] (an unbatched [C, H, W] gets N = 1).
at::Tensor batched(const at::Tensor &t)
{
	return t.dim() == 3 ? t.unsqueeze(0) : t;
}

std::vector<int64_t> out_shape(const at::Tensor &self, const Pool &g)
{
	std::vector<int64_t> s(self.sizes().begin(), self.sizes().end() - 2);
	s.push_back(g.O[0]);
	s.push_back(g.O[1]);
	return s;
}

std::tuple<at::Tensor, at::Tensor>
k_max_pool2d_with_indices(const at::Tensor &self, at::IntArrayRef kernel,
			  at::IntArrayRef stride, at::IntArrayRef padding,
			  at::IntArrayRef dilation, bool ceil_mode)
{
	Pool g;
	if (!pool_geo(self, kernel, stride, padding, dilation, ceil_mode, g))
		return SPYRE_FALLBACK(max_pool2d_with_indices, self, kernel,
				      stride, padding, dilation, ceil_mode);
	count_native("aten::max_pool2d_with_indices");
	c10::DeviceGuard guard(self.device());
	std::vector<int64_t> os = out_shape(self, g);
	at::Tensor out = at::empty(os, self.options());
	at::Tensor ind = at::empty(os, self.options().dtype(at::kLong));
	run_pool(MAX_FWD, g, batched(self), batched(out), batched(ind), false,
		 0.0, false);
	return {out, ind};
}

at::Tensor k_max_pool2d_with_indices_backward(
	const at::Tensor &grad_out, const at::Tensor &self,
	at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
	at::IntArrayRef dilation, bool ceil_mode, const at::Tensor &indices)
{
	Pool g;
	if (!pool_geo(self, kernel, stride, padding, dilation, ceil_mode, g) ||
	    grad_out.scalar_type() != self.scalar_type() ||
	    grad_out.device() != self.device() ||
	    indices.device() != self.device() ||
	    indices.scalar_type() != at::kLong ||
	    grad_out.sizes() != indices.sizes() ||
	    grad_out.sizes() != at::IntArrayRef(out_shape(self, g)))
		return SPYRE_FALLBACK(max_pool2d_with_indices_backward, grad_out,
				      self, kernel, stride, padding, dilation,
				      ceil_mode, indices);
	count_native("aten::max_pool2d_with_indices_backward");
	c10::DeviceGuard guard(self.device());
	at::Tensor gi = at::empty(self.sizes(), self.options());
	run_pool(MAX_BWD, g, batched(grad_out.contiguous()), batched(gi),
		 batched(indices.contiguous()), false, 0.0, false);
	return gi;
}

bool avg_ok(const at::Tensor &self, at::IntArrayRef kernel,
	    at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
	    std::optional<int64_t> divisor_override, Pool &g)
{
	int64_t one = 1;
	return pool_geo(self, kernel, stride, padding, at::IntArrayRef(one),
			ceil_mode, g) &&
	       (!divisor_override.has_value() || *divisor_override != 0);
}

at::Tensor k_avg_pool2d(const at::Tensor &self, at::IntArrayRef kernel,
			at::IntArrayRef stride, at::IntArrayRef padding,
			bool ceil_mode, bool count_include_pad,
			std::optional<int64_t> divisor_override)
{
	Pool g;
	if (!avg_ok(self, kernel, stride, padding, ceil_mode, divisor_override,
		    g))
		return SPYRE_FALLBACK(avg_pool2d, self, kernel, stride, padding,
				      ceil_mode, count_include_pad,
				      divisor_override);
	count_native("aten::avg_pool2d");
	c10::DeviceGuard guard(self.device());
	at::Tensor out = at::empty(out_shape(self, g), self.options());
	run_pool(AVG_FWD, g, batched(self), batched(out), at::Tensor(),
		 divisor_override.has_value(),
		 static_cast<double>(divisor_override.value_or(1)),
		 count_include_pad);
	return out;
}

at::Tensor k_avg_pool2d_backward(const at::Tensor &grad_out,
				 const at::Tensor &self, at::IntArrayRef kernel,
				 at::IntArrayRef stride, at::IntArrayRef padding,
				 bool ceil_mode, bool count_include_pad,
				 std::optional<int64_t> divisor_override)
{
	Pool g;
	if (!avg_ok(self, kernel, stride, padding, ceil_mode, divisor_override,
		    g) ||
	    grad_out.scalar_type() != self.scalar_type() ||
	    grad_out.device() != self.device() ||
	    grad_out.sizes() != at::IntArrayRef(out_shape(self, g)))
		return SPYRE_FALLBACK(avg_pool2d_backward, grad_out, self,
				      kernel, stride, padding, ceil_mode,
				      count_include_pad, divisor_override);
	count_native("aten::avg_pool2d_backward");
	c10::DeviceGuard guard(self.device());
	at::Tensor gi = at::empty(self.sizes(), self.options());
	run_pool(AVG_BWD, g, batched(grad_out), batched(gi), at::Tensor(),
		 divisor_override.has_value(),
		 static_cast<double>(divisor_override.value_or(1)),
		 count_include_pad);
	return gi;
}

// The adaptive geometry of an input of spatial sizes S and output O: the
// reduction sizes are the largest window (forward) or the most windows
// covering one element (backward).
Pool adapt_geo(const at::Tensor &self, at::IntArrayRef osz, bool backward)
{
	Pool g;
	int64_t nd = self.dim();
	for (int i = 0; i < kD; i++) {
		int64_t S = self.size(nd - 2 + i), O = osz[i];
		g.S[i] = S;
		g.O[i] = O;
		g.k[i] = g.s[i] = g.d[i] = 1;
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
		g.R[i] = r;
	}
	return g;
}

at::Tensor k_adaptive_avg_pool2d(const at::Tensor &self,
				 at::IntArrayRef output_size)
{
	bool ok = pool_dtype(self) && output_size.size() == 2 &&
		  output_size[0] >= 0 && output_size[1] >= 0;
	for (int64_t i = 1; ok && i < self.dim(); i++)
		ok = self.size(i) > 0;
	if (!ok)
		return SPYRE_FALLBACK(_adaptive_avg_pool2d, self, output_size);
	count_native("aten::_adaptive_avg_pool2d");
	c10::DeviceGuard guard(self.device());
	std::vector<int64_t> os(self.sizes().begin(), self.sizes().end() - 2);
	os.insert(os.end(), output_size.begin(), output_size.end());
	at::Tensor out = at::empty(os, self.options());
	run_pool(ADAPT_FWD, adapt_geo(self, output_size, false), batched(self),
		 batched(out), at::Tensor(), false, 0.0, false);
	return out;
}

at::Tensor k_adaptive_avg_pool2d_backward(const at::Tensor &grad_out,
					  const at::Tensor &self)
{
	bool ok = pool_dtype(self) && grad_out.dim() == self.dim() &&
		  grad_out.scalar_type() == self.scalar_type() &&
		  grad_out.device() == self.device();
	for (int64_t i = 0; ok && i < self.dim() - 2; i++)
		ok = grad_out.size(i) == self.size(i);
	if (!ok)
		return SPYRE_FALLBACK(_adaptive_avg_pool2d_backward, grad_out,
				      self);
	count_native("aten::_adaptive_avg_pool2d_backward");
	c10::DeviceGuard guard(self.device());
	at::Tensor gi = at::empty(self.sizes(), self.options());
	at::IntArrayRef osz = grad_out.sizes().slice(grad_out.dim() - 2);
	run_pool(ADAPT_BWD, adapt_geo(self, osz, true), batched(grad_out), batched(gi),
		 at::Tensor(), false, 0.0, false);
	return gi;
}

// ---- upsampling ------------------------------------------------------------------


enum Interp : uint8_t { NEAREST = 1, BILINEAR };

struct UpBuild {
	Interp mode;
	uint32_t dt;
};

// One point per output element (n, c, y, x), no reduction.  Params: the
// input's strides n, c, h, w; the output's; then per spatial dim i the
// scale (f32) at 8 + i, the input size at 10 + i; align_corners (bool) at
// 12.  Source positions as PyTorch's CPU kernels compute them (f32).
int build_upsample(struct spyre_kernel **kp, const void *ctx)
{
	const UpBuild &u = *static_cast<const UpBuild *>(ctx);
	uint32_t dts[2] = {u.dt, u.dt};
	int rc = spyre_kernel_create(dts, 2, 13, 4, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64, F = SPYRE_KTYPE_F32;
	int one = b.c(I, 1);
	int base = spyre_kernel_affine(b.k, I, NONE, 3u, 0);
	int out = spyre_kernel_affine(b.k, I, NONE, 15u, 4);
	int lo[kD], hi[kD], lam[kD];
	for (unsigned int i = 0; i < kD; i++) {
		int o = b.cvt(spyre_kernel_idx(b.k, I, 2 + i), F);
		int scale = b.param(F, 8 + i);
		int last = b.sub(b.param(I, 10 + i), one);
		if (u.mode == NEAREST) {
			int src = b.un(SPYRE_KOP_FLOOR, b.mul(o, scale));
			lo[i] = b.min(b.cvt(src, I), last);
			continue;
		}
		// align_corners: scale * o; else max(scale * (o + 0.5) - 0.5, 0)
		int half = b.f(0.5f);
		int src = b.sel(b.param(SPYRE_KTYPE_BOOL, 12), b.mul(scale, o),
				b.max(b.sub(b.mul(scale, b.add(o, half)), half),
				      b.f(0.0f)));
		lo[i] = b.min(b.cvt(b.un(SPYRE_KOP_FLOOR, src), I), last);
		lam[i] = b.min(b.max(b.sub(src, b.cvt(lo[i], F)), b.f(0.0f)),
			       b.f(1.0f));
		hi[i] = b.add(lo[i], b.cvt(b.cmp(SPYRE_KCMP_LT, lo[i], last), I));
	}
	auto at = [&](int y, int x) {
		int off = b.add(base, b.add(b.mul(y, b.param(I, 2)),
					    b.mul(x, b.param(I, 3))));
		return spyre_kernel_load(b.k, 0, off, NONE, NONE);
	};
	int v;
	if (u.mode == NEAREST) {
		v = at(lo[0], lo[1]);
	} else {
		auto lerp = [&](int a, int c, int l) {
			return b.add(b.mul(b.sub(b.f(1.0f), l), a), b.mul(l, c));
		};
		v = lerp(lerp(at(lo[0], lo[1]), at(lo[0], hi[1]), lam[1]),
			 lerp(at(hi[0], lo[1]), at(hi[0], hi[1]), lam[1]), lam[0]);
	}
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

bool up_ok(const at::Tensor &self, at::IntArrayRef osz)
{
	at::ScalarType t = self.scalar_type();
	bool ok = (t == at::kFloat || t == at::kHalf || t == at::kBFloat16) &&
		  self.dim() == 4 && osz.size() == 2 && osz[0] > 0 &&
		  osz[1] > 0;
	for (int64_t i = 1; ok && i < 4; i++)
		ok = self.size(i) > 0;
	return ok;
}

at::Tensor upsample(Interp mode, const at::Tensor &self, at::IntArrayRef osz,
		    bool align, std::optional<double> sh,
		    std::optional<double> sw)
{
	c10::DeviceGuard guard(self.device());
	at::Tensor out = at::empty({self.size(0), self.size(1), osz[0], osz[1]},
				   self.options());
	if (out.numel() == 0)
		return out;
	UpBuild ub{mode, kdtype(self.scalar_type())};
	Key key;
	key.op = kOpUpsample;
	key.variant = mode;
	key.npdims = 4;
	key.dt[0] = static_cast<uint8_t>(ub.dt);
	int card = self.device().index();
	const Prog *prog = program(card, key, build_upsample, &ub);
	TORCH_CHECK(prog->err == 0, "spyre: the card refused an upsampling "
		    "kernel (error ", prog->err, ")");
	Launch L;
	uint64_t span = 1;
	for (int i = 0; i < 4; i++) {
		L.params[i] = static_cast<uint64_t>(self.stride(i));
		L.params[4 + i] = static_cast<uint64_t>(out.stride(i));
		span += static_cast<uint64_t>(self.size(i) - 1) *
			static_cast<uint64_t>(self.stride(i));
		L.l.size[i] = static_cast<uint64_t>(out.size(i));
	}
	std::optional<double> sc[2] = {sh, sw};
	for (int i = 0; i < 2; i++) {
		int64_t in = self.size(2 + i), o = osz[i];
		float f = up_scale(in, o, align, sc[i]);
		// nearest: PyTorch's nearest_idx takes equal and doubled sizes
		// exactly
		if (mode == NEAREST && o == in)
			f = 1.0f;
		else if (mode == NEAREST && o == 2 * in)
			f = 0.5f;
		L.params[8 + i] = f32_param(f);
		L.params[10 + i] = static_cast<uint64_t>(in);
	}
	L.params[12] = align;
	L.l.npdims = 4;
	L.operand(0, self, span);
	L.operand(1, out, static_cast<uint64_t>(out.numel()));
	run(card, prog, L, 2, 13);
	return out;
}

at::Tensor k_upsample_nearest2d(const at::Tensor &self,
				at::IntArrayRef output_size,
				std::optional<double> scales_h,
				std::optional<double> scales_w)
{
	if (!up_ok(self, output_size))
		return SPYRE_FALLBACK(upsample_nearest2d, self, output_size,
				      scales_h, scales_w);
	count_native("aten::upsample_nearest2d");
	return upsample(NEAREST, self, output_size, false, scales_h, scales_w);
}

at::Tensor k_upsample_bilinear2d(const at::Tensor &self,
				 at::IntArrayRef output_size,
				 bool align_corners,
				 std::optional<double> scales_h,
				 std::optional<double> scales_w)
{
	if (!up_ok(self, output_size))
		return SPYRE_FALLBACK(upsample_bilinear2d, self, output_size,
				      align_corners, scales_h, scales_w);
	count_native("aten::upsample_bilinear2d");
	return upsample(BILINEAR, self, output_size, align_corners, scales_h,
			scales_w);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("upsample_nearest2d", TORCH_FN(k_upsample_nearest2d));
	m.impl("upsample_bilinear2d", TORCH_FN(k_upsample_bilinear2d));
	m.impl("max_pool2d_with_indices", TORCH_FN(k_max_pool2d_with_indices));
	m.impl("max_pool2d_with_indices_backward",
	       TORCH_FN(k_max_pool2d_with_indices_backward));
	m.impl("avg_pool2d", TORCH_FN(k_avg_pool2d));
	m.impl("avg_pool2d_backward", TORCH_FN(k_avg_pool2d_backward));
	m.impl("_adaptive_avg_pool2d", TORCH_FN(k_adaptive_avg_pool2d));
	m.impl("_adaptive_avg_pool2d_backward",
	       TORCH_FN(k_adaptive_avg_pool2d_backward));
}

} // namespace spyre_torch
