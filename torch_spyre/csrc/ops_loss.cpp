// SPDX-License-Identifier: MIT
// Losses on the card, generated.
//
// Element-wise losses (mse_loss, smooth_l1_loss, huber_loss,
// binary_cross_entropy with its weight, and log_sigmoid, which
// binary_cross_entropy_with_logits is made of) share one kernel family:
// the loss of each element (times the weight), either stored per element
// (reduction none) or summed over every element in the same kernel (sum,
// mean); their backward is the derivative of each element times the
// incoming gradient (a 0-dim tensor for sum and mean, scaled by 1 / N for
// mean).  The formulas are PyTorch's CPU kernels'.
//
// nll_loss / nll_loss2d: the forward reads each sample's class from the
// target and the input's value at it (a gathered load), checks the class
// on the card (an index out of range is a device-side assertion, as on
// CUDA: the kernel ends with an ASSERT status and the next synchronizing
// call raises), and stores the per-sample loss or sums the losses and
// the weights in one kernel (output and total_weight); the backward writes
// every element of grad_input in one kernel (-weight[t] * grad at the
// target's class, 0 elsewhere), so no zero fill and no scatter.
// cross_entropy is ATen's composition of log_softmax and nll_loss; l1_loss
// and kl_div are compositions of native pointwise ops and reductions.
//
// Arguments PyTorch refuses raise PyTorch's errors (same messages); dtypes
// the card lacks go to the CPU fallback.
#include "kernels.h"

#include <ATen/ExpandUtils.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

namespace spyre_torch {
namespace {

using namespace kgen;

enum Red : int64_t { NONE_R = 0, MEAN_R = 1, SUM_R = 2 };

bool defined(const std::optional<at::Tensor> &t)
{
	return t.has_value() && t->defined();
}

// A float dtype the card holds (not fp8).
bool float_ok(at::ScalarType t)
{
	return (t == at::kFloat || t == at::kHalf || t == at::kBFloat16);
}

// ---- element-wise losses ------------------------------------------------------

enum Kind : uint32_t { MSE = 1, SMOOTH_L1, HUBER, BCE, LOGSIG };

enum Mode : uint32_t {
	FWD_NONE = 1,	// out[i] = loss(i) [* w]
	FWD_RED,	// out = sum(loss [* w]) * scale
	BWD,		// out[i] = dloss/dx(i) [* w] * grad * scale
};

// Operands: x, [y], [w], [grad] (BWD), out.
struct EwBuild {
	Kind kind;
	Mode mode;
	bool has_y, has_w, has_g;
	uint32_t dts[5];
	int nops, np, nr;
};

// the loss of one element (f32), p the op's float argument (beta, delta)
int ew_loss(B &b, Kind kind, int x, int y, int p)
{
	int half = b.f(0.5f), one = b.f(1.0f);
	switch (kind) {
	case MSE: {
		int d = b.sub(x, y);
		return b.mul(d, d);
	}
	case SMOOTH_L1: {	// z < beta ? 0.5 z^2 / beta : z - 0.5 beta
		int z = b.un(SPYRE_KOP_ABS, b.sub(x, y));
		return b.sel(b.cmp(SPYRE_KCMP_LT, z, p),
			     b.div(b.mul(b.mul(half, z), z), p),
			     b.sub(z, b.mul(half, p)));
	}
	case HUBER: {		// z < delta ? 0.5 z^2 : delta (z - 0.5 delta)
		int z = b.un(SPYRE_KOP_ABS, b.sub(x, y));
		return b.sel(b.cmp(SPYRE_KCMP_LT, z, p),
			     b.mul(b.mul(half, z), z),
			     b.mul(p, b.sub(z, b.mul(half, p))));
	}
	case BCE: {	// (y - 1) max(log(1 - x), -100) - y max(log(x), -100)
		int lo = b.f(-100.0f);
		int l1 = b.max(b.un(SPYRE_KOP_LOG1P, b.neg(x)), lo);
		int l0 = b.max(b.un(SPYRE_KOP_LOG, x), lo);
		return b.sub(b.mul(b.sub(y, one), l1), b.mul(y, l0));
	}
	case LOGSIG:	// min(x, 0) - log1p(exp(-|x|))
		return b.sub(b.min(x, b.f(0.0f)),
			     b.un(SPYRE_KOP_LOG1P,
				  b.un(SPYRE_KOP_EXP,
				       b.neg(b.un(SPYRE_KOP_ABS, x)))));
	}
	return -EINVAL;
}

// the derivative of ew_loss() by x (f32)
int ew_grad(B &b, Kind kind, int x, int y, int p)
{
	int one = b.f(1.0f);
	switch (kind) {
	case MSE:
		return b.mul(b.f(2.0f), b.sub(x, y));
	case SMOOTH_L1: {	// d < -beta ? -1 : d > beta ? 1 : d / beta
		// (beta 0 is l1_loss's: 0 at d = 0)
		int d = b.sub(x, y), z = b.f(0.0f);
		int mid = b.sel(b.cmp(SPYRE_KCMP_EQ, p, z), z, b.div(d, p));
		return b.sel(b.cmp(SPYRE_KCMP_LT, d, b.neg(p)), b.neg(one),
			     b.sel(b.cmp(SPYRE_KCMP_GT, d, p), one, mid));
	}
	case HUBER: {		// d < -delta ? -delta : d > delta ? delta : d
		int d = b.sub(x, y);
		return b.sel(b.cmp(SPYRE_KCMP_LT, d, b.neg(p)), b.neg(p),
			     b.sel(b.cmp(SPYRE_KCMP_GT, d, p), p, d));
	}
	case BCE: {		// (x - y) / max((1 - x) x, 1e-12)
		int den = b.max(b.mul(b.sub(one, x), x), b.f(1e-12f));
		return b.div(b.sub(x, y), den);
	}
	case LOGSIG: {	// x < 0 ? 1 - z / (1 + z) : z / (1 + z), z = exp(-|x|)
		int z = b.un(SPYRE_KOP_EXP, b.neg(b.un(SPYRE_KOP_ABS, x)));
		int q = b.div(z, b.add(one, z));
		return b.sel(b.cmp(SPYRE_KCMP_LT, x, b.f(0.0f)), b.sub(one, q), q);
	}
	}
	return -EINVAL;
}

// Parameters: every operand's strides (np + nr each), then p and scale
// (f32).
int build_ew(struct spyre_kernel **kp, const void *ctx)
{
	const EwBuild &e = *static_cast<const EwBuild *>(ctx);
	const unsigned int w = static_cast<unsigned int>(e.np + e.nr);
	const unsigned int n = static_cast<unsigned int>(e.nops);
	const unsigned int sp = w * n;
	int rc = spyre_kernel_create(e.dts, n, sp + 2,
				     static_cast<unsigned int>(e.np),
				     static_cast<unsigned int>(e.nr), kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32;
	bool red = e.mode == FWD_RED;
	int base[5];
	for (unsigned int i = 0; i < n; i++)
		base[i] = point_offset(b, e.np, i * w);
	auto off = [&](unsigned int i) {
		return red ? rindex_offset(b, base[i], e.np, e.nr, i * w) : base[i];
	};
	auto ld = [&](unsigned int i) {
		return b.cvt(spyre_kernel_load(b.k, i, off(i), NONE, NONE), F);
	};
	int p = b.param(F, sp), scale = b.param(F, sp + 1);
	if (red)
		spyre_kernel_pass(b.k);
	unsigned int o = 0;
	int x = ld(o++);
	int y = e.has_y ? ld(o++) : NONE;
	int wt = e.has_w ? ld(o++) : NONE;
	int g = e.has_g ? ld(o++) : NONE;
	if (e.kind == BCE) {
		// PyTorch's CPU check of the input (CUDA asserts too)
		int in01 = b.op(SPYRE_KOP_AND, b.cmp(SPYRE_KCMP_GE, x, b.f(0.0f)),
				b.cmp(SPYRE_KCMP_LE, x, b.f(1.0f)));
		spyre_kernel_check(b.k, in01, NONE);
	}
	int v = e.mode == BWD ? ew_grad(b, e.kind, x, y, p) :
		ew_loss(b, e.kind, x, y, p);
	if (e.has_w)
		v = b.mul(v, wt);
	if (e.mode == BWD)
		v = b.mul(b.mul(v, g), scale);
	if (red) {
		int s = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, v, NONE, NONE,
					    NONE);
		spyre_kernel_endpass(b.k);
		v = b.mul(s, scale);
	}
	spyre_kernel_store(b.k, o, base[o], b.cvt(v, vtype(e.dts[o])), NONE, 0);
	return spyre_kernel_error(b.k);
}

// Run element-wise loss @kind over @out's shape (the inputs broadcast to
// it) with inputs @ins (x, [y], [w], [grad], in that order; flags say
// which are there).  False when the space has too many dims or the
// builder refuses.
bool ew_run(Kind kind, Mode mode, const std::vector<at::Tensor> &ins,
	    bool has_y, bool has_w, bool has_g, const at::Tensor &out,
	    double p, double scale, at::IntArrayRef shape)
{
	Space s;
	uint64_t all = (1ull << shape.size()) - 1;
	s.init(shape, mode == FWD_RED ? all : 0);
	EwBuild e;
	std::memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.mode = mode;
	e.has_y = has_y;
	e.has_w = has_w;
	e.has_g = has_g;
	std::vector<at::Tensor> ops(ins);
	ops.push_back(out);
	for (const at::Tensor &t : ins)
		s.add(t);
	if (mode == FWD_RED) {
		int64_t zero[kMaxDims] = {};
		s.add_strides(zero);
	} else {
		s.add(out);
	}
	if (!s.collapse(mode == FWD_RED))
		return false;
	e.nops = static_cast<int>(ops.size());
	e.np = s.np;
	e.nr = s.nr;
	Key key;
	key.op = kOpLoss + kind;
	key.variant = mode | has_y << 4 | has_w << 5 | has_g << 6;
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = static_cast<uint8_t>(s.nr);
	key.nops = static_cast<uint8_t>(ops.size());
	for (size_t j = 0; j < ops.size(); j++) {
		e.dts[j] = kdtype(ops[j].scalar_type());
		key.dt[j] = static_cast<uint8_t>(e.dts[j]);
	}
	int card = out.device().index();
	const Prog *prog = program(card, key, build_ew, &e);
	if (prog->err < 0)
		return false;
	Launch L;
	const unsigned int w = static_cast<unsigned int>(s.np + s.nr);
	for (size_t j = 0; j < ops.size(); j++) {
		unsigned int u = static_cast<unsigned int>(j);
		L.operand(u, ops[j], s.extent(static_cast<int>(j)));
		L.strides(s, static_cast<int>(j), u * w);
	}
	unsigned int sp = w * static_cast<unsigned int>(ops.size());
	L.params[sp] = f32_param(p);
	L.params[sp + 1] = f32_param(scale);
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(ops.size()), sp + 2);
	return true;
}

// The forward of element-wise loss @kind: per element, or reduced.  An
// undefined result means the caller falls back.
at::Tensor ew_forward(Kind kind, const at::Tensor &x, const at::Tensor &y,
		      const at::Tensor &w, int64_t reduction, double p)
{
	TORCH_CHECK(reduction >= 0 && reduction <= 2, "spyre: reduction ",
		    reduction, " is not none (0), mean (1) or sum (2)");
	if (!float_ok(x.scalar_type()))
		return {};
	for (const at::Tensor &t : {y, w})
		if (t.defined() && (t.scalar_type() != x.scalar_type() ||
				    t.device() != x.device()))
			return {};
	c10::DeviceGuard guard(x.device());
	c10::DimVector shape(x.sizes().begin(), x.sizes().end());
	if (y.defined())
		shape = at::infer_size_dimvector(shape, y.sizes());
	if (w.defined())
		shape = at::infer_size_dimvector(shape, w.sizes());
	std::vector<at::Tensor> ins{x};
	if (y.defined())
		ins.push_back(y);
	if (w.defined())
		ins.push_back(w);
	int64_t numel = c10::multiply_integers(shape);
	at::Tensor out;
	if (reduction == NONE_R || numel == 0) {
		out = at::empty(shape, x.options());
		if (numel && !ew_run(kind, FWD_NONE, ins, y.defined(), w.defined(),
				     false, out, p, 1.0, shape))
			return {};
		if (reduction == NONE_R)
			return out;
		return reduction == MEAN_R ? out.mean() : out.sum();
	}
	out = at::empty({}, x.options());
	double scale = reduction == MEAN_R ? 1.0 / static_cast<double>(numel) : 1.0;
	if (ew_run(kind, FWD_RED, ins, y.defined(), w.defined(), false, out, p,
		   scale, shape))
		return out;
	// more dims than one reduction takes: per element, then reduce
	out = at::empty(shape, x.options());
	if (!ew_run(kind, FWD_NONE, ins, y.defined(), w.defined(), false, out,
		    p, 1.0, shape))
		return {};
	return reduction == MEAN_R ? out.mean() : out.sum();
}

// The backward of element-wise loss @kind: grad_input of @x's shape.
at::Tensor ew_backward(Kind kind, const at::Tensor &grad, const at::Tensor &x,
		       const at::Tensor &y, const at::Tensor &w,
		       int64_t reduction, double p)
{
	TORCH_CHECK(reduction >= 0 && reduction <= 2, "spyre: reduction ",
		    reduction, " is not none (0), mean (1) or sum (2)");
	if (!float_ok(x.scalar_type()))
		return {};
	for (const at::Tensor &t : {y, w, grad})
		if (t.defined() && (t.scalar_type() != x.scalar_type() ||
				    t.device() != x.device()))
			return {};
	c10::DeviceGuard guard(x.device());
	at::Tensor out = at::empty(x.sizes(), x.options());
	std::vector<at::Tensor> ins{x};
	for (const at::Tensor &t : {y, w, grad}) {
		if (!t.defined())
			continue;
		// a gradient, target or weight of another shape than the
		// input's: the CPU's
		if (!at::is_expandable_to(t.sizes(), x.sizes()))
			return {};
		ins.push_back(t);
	}
	if (x.numel() == 0)
		return out;
	double scale = reduction == MEAN_R ?
		       1.0 / static_cast<double>(x.numel()) : 1.0;
	if (!ew_run(kind, BWD, ins, y.defined(), w.defined(), true, out, p,
		    scale, x.sizes()))
		return {};
	return out;
}

at::Tensor k_mse_loss(const at::Tensor &self, const at::Tensor &target,
		      int64_t reduction)
{
	at::Tensor r = ew_forward(MSE, self, target, {}, reduction, 0.0);
	if (!r.defined())
		return SPYRE_FALLBACK(mse_loss, self, target, reduction);
	count_native("aten::mse_loss");
	return r;
}

at::Tensor k_mse_loss_backward(const at::Tensor &grad, const at::Tensor &self,
			       const at::Tensor &target, int64_t reduction)
{
	at::Tensor r = ew_backward(MSE, grad, self, target, {}, reduction, 0.0);
	if (!r.defined())
		return SPYRE_FALLBACK(mse_loss_backward, grad, self, target,
				      reduction);
	count_native("aten::mse_loss_backward");
	return r;
}

at::Tensor k_smooth_l1_loss(const at::Tensor &self, const at::Tensor &target,
			    int64_t reduction, double beta)
{
	TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative "
		    "values for beta.")
	at::Tensor r = ew_forward(SMOOTH_L1, self, target, {}, reduction, beta);
	if (!r.defined())
		return SPYRE_FALLBACK(smooth_l1_loss, self, target, reduction,
				      beta);
	count_native("aten::smooth_l1_loss");
	return r;
}

at::Tensor k_smooth_l1_loss_backward(const at::Tensor &grad,
				     const at::Tensor &self,
				     const at::Tensor &target, int64_t reduction,
				     double beta)
{
	at::Tensor r = ew_backward(SMOOTH_L1, grad, self, target, {}, reduction,
				   beta);
	if (!r.defined())
		return SPYRE_FALLBACK(smooth_l1_loss_backward, grad, self,
				      target, reduction, beta);
	count_native("aten::smooth_l1_loss_backward");
	return r;
}

at::Tensor k_huber_loss(const at::Tensor &self, const at::Tensor &target,
			int64_t reduction, double delta)
{
	TORCH_CHECK(delta > 0, "huber_loss does not support non-positive "
		    "values for delta.")
	at::Tensor r = ew_forward(HUBER, self, target, {}, reduction, delta);
	if (!r.defined())
		return SPYRE_FALLBACK(huber_loss, self, target, reduction, delta);
	count_native("aten::huber_loss");
	return r;
}

at::Tensor k_huber_loss_backward(const at::Tensor &grad, const at::Tensor &self,
				 const at::Tensor &target, int64_t reduction,
				 double delta)
{
	at::Tensor r = ew_backward(HUBER, grad, self, target, {}, reduction,
				   delta);
	if (!r.defined())
		return SPYRE_FALLBACK(huber_loss_backward, grad, self, target,
				      reduction, delta);
	count_native("aten::huber_loss_backward");
	return r;
}

// binary_cross_entropy: PyTorch checks the sizes (same message); an input
// outside [0, 1] is a device-side assertion.
void check_bce(const at::Tensor &self, const at::Tensor &target)
{
	TORCH_CHECK(self.sizes() == target.sizes(), "Using a target size (",
		    target.sizes(), ") that is different to the input size (",
		    self.sizes(), ") is deprecated. Please ensure they have the "
		    "same size.");
}

at::Tensor k_bce(const at::Tensor &self, const at::Tensor &target,
		 const std::optional<at::Tensor> &weight, int64_t reduction)
{
	check_bce(self, target);
	at::Tensor w = defined(weight) ? *weight : at::Tensor();
	at::Tensor r = ew_forward(BCE, self, target, w, reduction, 0.0);
	if (!r.defined())
		return SPYRE_FALLBACK(binary_cross_entropy, self, target, weight,
				      reduction);
	count_native("aten::binary_cross_entropy");
	return r;
}

at::Tensor k_bce_backward(const at::Tensor &grad, const at::Tensor &self,
			  const at::Tensor &target,
			  const std::optional<at::Tensor> &weight,
			  int64_t reduction)
{
	check_bce(self, target);
	at::Tensor w = defined(weight) ? *weight : at::Tensor();
	at::Tensor r = ew_backward(BCE, grad, self, target, w, reduction, 0.0);
	if (!r.defined())
		return SPYRE_FALLBACK(binary_cross_entropy_backward, grad, self,
				      target, weight, reduction);
	count_native("aten::binary_cross_entropy_backward");
	return r;
}

// log_sigmoid_forward: the output and an empty buffer (the backward
// recomputes from the input, as CUDA's does).
std::tuple<at::Tensor, at::Tensor> k_log_sigmoid(const at::Tensor &self)
{
	at::Tensor r = ew_forward(LOGSIG, self, {}, {}, NONE_R, 0.0);
	if (!r.defined())
		return SPYRE_FALLBACK(log_sigmoid_forward, self);
	count_native("aten::log_sigmoid_forward");
	return {r, at::empty({0}, self.options())};
}

at::Tensor k_log_sigmoid_backward(const at::Tensor &grad,
				  const at::Tensor &self, const at::Tensor &buffer)
{
	at::Tensor r = ew_backward(LOGSIG, grad, self, {}, {}, NONE_R, 0.0);
	if (!r.defined())
		return SPYRE_FALLBACK(log_sigmoid_backward, grad, self, buffer);
	count_native("aten::log_sigmoid_backward");
	return r;
}

// ---- nll_loss -----------------------------------------------------------------

enum NllMode : uint32_t { NLL_NONE = 1, NLL_RED, NLL_BWD };

// Forward operands: input, target, [weight], out, [total_weight] (NLL_RED);
// backward: grad_input, target, grad_output, [weight], [total_weight]
// (mean).  Parameters: the space's strides of each operand but the
// weight and total weight (nd each), then the input's class stride (the
// forward) and the weight's stride, C, ignore_index (i64).
struct NllBuild {
	NllMode mode;
	bool has_w, mean;
	uint32_t dts[5];
	int nops, nd;
};

int build_nll(struct spyre_kernel **kp, const void *ctx)
{
	const NllBuild &p = *static_cast<const NllBuild *>(ctx);
	const unsigned int nd = static_cast<unsigned int>(p.nd);
	const unsigned int n = static_cast<unsigned int>(p.nops);
	bool red = p.mode == NLL_RED;
	unsigned int nstrided = p.mode == NLL_BWD ? 3 : red ? 2 : 3;
	const unsigned int sp = nd * nstrided;
	int rc = spyre_kernel_create(p.dts, n, sp + 4, red ? 0 : nd,
				     red ? nd : 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32, I = SPYRE_KTYPE_I64;
	int zero = b.c(I, 0);
	auto off = [&](unsigned int i) {
		return red ? rindex_offset(b, zero, 0, p.nd, i * nd) :
		       point_offset(b, p.nd, i * nd);
	};
	int cstride = b.param(I, sp), wstride = b.param(I, sp + 1);
	int C = b.param(I, sp + 2), ignore = b.param(I, sp + 3);
	const unsigned int tg = 1;
	const unsigned int wop = p.mode == NLL_BWD ? 3 : 2;
	if (red)
		spyre_kernel_pass(b.k);
	int t = b.cvt(spyre_kernel_load(b.k, tg, off(tg), NONE, NONE), I);
	int kept = b.cmp(SPYRE_KCMP_NE, t, ignore);
	int inrange = b.op(SPYRE_KOP_AND, b.cmp(SPYRE_KCMP_GE, t, zero),
			   b.cmp(SPYRE_KCMP_LT, t, C));
	int valid = b.op(SPYRE_KOP_AND, kept, inrange);
	int fz = b.f(0.0f);
	int wv = p.has_w ?
		 b.cvt(spyre_kernel_load(b.k, wop, b.mul(t, wstride), valid,
					 NONE), F) :
		 b.f(1.0f);
	wv = b.sel(valid, wv, fz);
	if (p.mode == NLL_BWD) {
		// grad_input[..., c] = c == t ? -w[t] * g [/ total_weight] : 0
		int c = spyre_kernel_idx(b.k, I, nd - 1);
		int g = b.cvt(spyre_kernel_load(b.k, 2, off(2), NONE, NONE), F);
		int v = b.neg(b.mul(wv, g));
		if (p.mean)
			v = b.div(v, b.cvt(spyre_kernel_load(b.k, n - 1, zero,
							     NONE, NONE), F));
		v = b.sel(b.op(SPYRE_KOP_AND, valid, b.cmp(SPYRE_KCMP_EQ, c, t)),
			  v, fz);
		spyre_kernel_store(b.k, 0, off(0), b.cvt(v, vtype(p.dts[0])),
				   NONE, 0);
		return spyre_kernel_error(b.k);
	}
	// the class an ignored sample names is not checked (as PyTorch)
	spyre_kernel_check(b.k, b.op(SPYRE_KOP_OR, b.op(SPYRE_KOP_NOT, kept),
				     inrange), NONE);
	int x = b.cvt(spyre_kernel_load(b.k, 0, b.add(off(0), b.mul(t, cstride)),
					valid, NONE), F);
	int loss = b.sel(valid, b.neg(b.mul(x, wv)), fz);
	unsigned int out = p.has_w ? 3 : 2;
	if (!red) {
		spyre_kernel_store(b.k, out, off(2), b.cvt(loss, vtype(p.dts[out])),
				   NONE, 0);
		return spyre_kernel_error(b.k);
	}
	int s = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, loss, NONE, NONE, NONE);
	int tw = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, wv, NONE, NONE, NONE);
	spyre_kernel_endpass(b.k);
	if (p.mean)
		s = b.div(s, tw);
	spyre_kernel_store(b.k, out, zero, b.cvt(s, vtype(p.dts[out])), NONE, 0);
	spyre_kernel_store(b.k, out + 1, zero, b.cvt(tw, vtype(p.dts[out + 1])),
			   NONE, 0);
	return spyre_kernel_error(b.k);
}

// Launch an nll kernel over the sample space @shape (forward) or the
// sample space and the class dim last (backward).  @strided are the
// operands with strides over the space (@st, one row each), @ops every
// operand in kernel order.
bool nll_run(const NllBuild &nb, at::IntArrayRef shape,
	     const std::vector<at::Tensor> &ops,
	     const std::vector<std::vector<int64_t>> &st, int64_t cstride,
	     int64_t wstride, int64_t C, int64_t ignore)
{
	Space s;
	bool red = nb.mode == NLL_RED;
	uint64_t all = (1ull << shape.size()) - 1;
	s.init(shape, red ? all : 0);
	for (const auto &row : st)
		s.add_strides(row.data());
	if (nb.mode == NLL_BWD) {
		// keep every dim: the class is the last one's index
		if (s.ndim > SPYRE_KERNEL_MAX_PDIMS)
			return false;
		s.np = s.ndim;
		s.nr = 0;
	} else if (!s.collapse(red)) {
		return false;
	}
	NllBuild b = nb;
	b.nd = red ? s.nr : s.np;
	b.nops = static_cast<int>(ops.size());
	for (size_t j = 0; j < ops.size(); j++)
		b.dts[j] = kdtype(ops[j].scalar_type());
	Key key;
	key.op = kOpLoss + 0x10;
	key.variant = b.mode | b.has_w << 4 | b.mean << 5;
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = static_cast<uint8_t>(s.nr);
	key.nops = static_cast<uint8_t>(ops.size());
	for (size_t j = 0; j < ops.size(); j++)
		key.dt[j] = static_cast<uint8_t>(b.dts[j]);
	int card = ops[0].device().index();
	const Prog *prog = program(card, key, build_nll, &b);
	if (prog->err < 0)
		return false;
	Launch L;
	const unsigned int nd = static_cast<unsigned int>(b.nd);
	for (size_t j = 0; j < ops.size(); j++)
		L.operand(static_cast<unsigned int>(j), ops[j], span(ops[j]));
	for (size_t j = 0; j < st.size(); j++)
		L.strides(s, static_cast<int>(j), static_cast<unsigned int>(j) * nd);
	unsigned int sp = nd * static_cast<unsigned int>(st.size());
	L.params[sp] = static_cast<uint64_t>(cstride);
	L.params[sp + 1] = static_cast<uint64_t>(wstride);
	L.params[sp + 2] = static_cast<uint64_t>(C);
	L.params[sp + 3] = static_cast<uint64_t>(ignore);
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(ops.size()), sp + 4);
	return true;
}

// The sample dims of an nll problem: input (N, C, d...) or (C) with the
// class at dim @cdim; target (N, d...) or ().
struct NllShape {
	std::vector<int64_t> shape;	// the sample space
	std::vector<int64_t> in_st;	// the input's strides over it
	int64_t C, cstride;
};

NllShape nll_shape(const at::Tensor &self, int64_t cdim)
{
	NllShape r;
	for (int64_t d = 0; d < self.dim(); d++) {
		if (d == cdim)
			continue;
		r.shape.push_back(self.size(d));
		r.in_st.push_back(self.stride(d));
	}
	r.C = self.size(cdim);
	r.cstride = self.stride(cdim);
	return r;
}

// The target's strides over the sample space (a 0-dim target of a 1-D
// input: none).
std::vector<int64_t> strides_of(const at::Tensor &t)
{
	return std::vector<int64_t>(t.strides().begin(), t.strides().end());
}

bool nll_ok(const at::Tensor &self, const at::Tensor &target,
	    const at::Tensor &w)
{
	return float_ok(self.scalar_type()) && target.scalar_type() == at::kLong &&
	       target.device() == self.device() &&
	       (!w.defined() || (w.device() == self.device() &&
				 w.scalar_type() == self.scalar_type()));
}

// PyTorch's weight check (same message).
void check_weight(const at::Tensor &w, int64_t C)
{
	TORCH_CHECK(!w.defined() || (w.dim() <= 1 && w.numel() == C),
		    "weight tensor should be defined either for all ", C,
		    " classes or no classes but got weight tensor of shape: ",
		    w.sizes());
}

// nll_loss_forward / nll_loss2d_forward for a checked problem: (output,
// total_weight), or undefined tensors to fall back.
std::tuple<at::Tensor, at::Tensor>
nll_forward(const at::Tensor &self, const at::Tensor &target,
	    const at::Tensor &w, int64_t reduction, int64_t ignore, int64_t cdim)
{
	if (!nll_ok(self, target, w))
		return {};
	c10::DeviceGuard guard(self.device());
	NllShape ns = nll_shape(self, cdim);
	at::Tensor tw = at::empty({}, self.options());
	bool none = reduction == NONE_R && self.dim() != 1;
	at::Tensor out = at::empty(none ? at::IntArrayRef(ns.shape) :
				   at::IntArrayRef(), self.options());
	int64_t samples = c10::multiply_integers(ns.shape);
	if (samples == 0 || ns.C == 0) {
		tw.zero_();
		if (!none)
			out.fill_(reduction == MEAN_R ?
				  std::numeric_limits<double>::quiet_NaN() : 0.0);
		return {out, tw};
	}
	NllBuild nb;
	std::memset(&nb, 0, sizeof(nb));
	nb.mode = none ? NLL_NONE : NLL_RED;
	nb.has_w = w.defined();
	nb.mean = reduction == MEAN_R;
	std::vector<at::Tensor> ops{self, target};
	if (w.defined())
		ops.push_back(w);
	ops.push_back(out);
	std::vector<std::vector<int64_t>> st{ns.in_st, strides_of(target)};
	if (none)
		st.push_back(strides_of(out));
	else
		ops.push_back(tw);
	int64_t wstride = w.defined() && w.dim() == 1 ? w.stride(0) : 1;
	if (!nll_run(nb, ns.shape, ops, st, ns.cstride, wstride, ns.C, ignore))
		return {};
	if (none)
		tw.zero_();
	return {out, tw};
}

at::Tensor nll_backward(const at::Tensor &grad, const at::Tensor &self,
			const at::Tensor &target, const at::Tensor &w,
			int64_t reduction, int64_t ignore,
			const at::Tensor &total_weight, int64_t cdim)
{
	if (!nll_ok(self, target, w) || grad.device() != self.device() ||
	    grad.scalar_type() != self.scalar_type() ||
	    total_weight.device() != self.device() ||
	    !float_ok(total_weight.scalar_type()))
		return {};
	c10::DeviceGuard guard(self.device());
	NllShape ns = nll_shape(self, cdim);
	at::Tensor gi = at::empty(self.sizes(), self.options());
	if (self.numel() == 0)
		return gi;
	bool none = reduction == NONE_R && self.dim() != 1;
	TORCH_CHECK(!none || grad.sizes() == at::IntArrayRef(ns.shape),
		    "Expected a tensor of dimension ", ns.shape.size(),
		    " and tensor.size[0] == ", ns.shape.empty() ? 0 : ns.shape[0],
		    " but got: dimension ", grad.dim(), " and tensor.size[0] == ",
		    grad.dim() ? grad.size(0) : 0);
	TORCH_CHECK(none || grad.numel() == 1, "Expected a single element "
		    "grad_output tensor, but got: ", grad.sizes());
	// the space: the sample dims, then the class
	std::vector<int64_t> shape = ns.shape;
	shape.push_back(ns.C);
	auto with_class = [&](std::vector<int64_t> st, int64_t c) {
		st.push_back(c);
		return st;
	};
	std::vector<int64_t> gi_st;
	for (int64_t d = 0; d < self.dim(); d++)
		if (d != cdim)
			gi_st.push_back(gi.stride(d));
	std::vector<int64_t> go_st = none ? strides_of(grad) :
				     std::vector<int64_t>(ns.shape.size(), 0);
	NllBuild nb;
	std::memset(&nb, 0, sizeof(nb));
	nb.mode = NLL_BWD;
	nb.has_w = w.defined();
	nb.mean = reduction == MEAN_R;
	std::vector<at::Tensor> ops{gi, target, grad};
	if (w.defined())
		ops.push_back(w);
	if (nb.mean)
		ops.push_back(total_weight);
	std::vector<std::vector<int64_t>> st{
		with_class(gi_st, gi.stride(cdim)),
		with_class(strides_of(target), 0), with_class(go_st, 0)};
	int64_t wstride = w.defined() && w.dim() == 1 ? w.stride(0) : 1;
	if (!nll_run(nb, shape, ops, st, 0, wstride, ns.C, ignore))
		return {};
	return gi;
}

// nll_loss_forward's checks (PyTorch's messages).
void check_nll(const at::Tensor &self, const at::Tensor &target,
	       const at::Tensor &w)
{
	TORCH_CHECK(self.dim() > 0 && self.dim() <= 2,
		    "input tensor should be 1D or 2D");
	TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, "
		    "multi-target not supported");
	auto no_batch_dim = self.dim() == 1 && target.dim() == 0;
	TORCH_CHECK(no_batch_dim || (self.size(0) == target.size(0)),
		    "size mismatch (got input: ", self.sizes(), ", target: ",
		    target.sizes(), ")")
	check_weight(w, self.size(-1));
}

std::tuple<at::Tensor, at::Tensor>
k_nll_loss(const at::Tensor &self, const at::Tensor &target,
	   const std::optional<at::Tensor> &weight, int64_t reduction,
	   int64_t ignore_index)
{
	at::Tensor w = defined(weight) ? *weight : at::Tensor();
	check_nll(self, target, w);
	auto r = nll_forward(self, target, w, reduction, ignore_index,
			     self.dim() - 1);
	if (!std::get<0>(r).defined())
		return SPYRE_FALLBACK(nll_loss_forward, self, target, weight,
				      reduction, ignore_index);
	count_native("aten::nll_loss_forward");
	return r;
}

at::Tensor k_nll_loss_backward(const at::Tensor &grad, const at::Tensor &self,
			       const at::Tensor &target,
			       const std::optional<at::Tensor> &weight,
			       int64_t reduction, int64_t ignore_index,
			       const at::Tensor &total_weight)
{
	at::Tensor w = defined(weight) ? *weight : at::Tensor();
	check_nll(self, target, w);
	at::Tensor r = nll_backward(grad, self, target, w, reduction,
				    ignore_index, total_weight, self.dim() - 1);
	if (!r.defined())
		return SPYRE_FALLBACK(nll_loss_backward, grad, self, target,
				      weight, reduction, ignore_index,
				      total_weight);
	count_native("aten::nll_loss_backward");
	return r;
}

// nll_loss2d_forward's checks (PyTorch's messages).
void check_nll2d(const at::Tensor &self, const at::Tensor &target,
		 const at::Tensor &w)
{
	TORCH_CHECK(target.dim() == 3, "only batches of spatial targets "
		    "supported (3D tensors) but got targets of dimension: ",
		    target.dim());
	TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported "
		    "(4D tensors), but got input of dimension: ", self.dim());
	check_weight(w, self.size(1));
	TORCH_CHECK(self.size(0) == target.size(0) &&
		    self.size(2) == target.size(1) &&
		    self.size(3) == target.size(2),
		    "input and target batch or spatial sizes don't match: "
		    "target ", target.sizes(), ", input ", self.sizes());
}

std::tuple<at::Tensor, at::Tensor>
k_nll_loss2d(const at::Tensor &self, const at::Tensor &target,
	     const std::optional<at::Tensor> &weight, int64_t reduction,
	     int64_t ignore_index)
{
	at::Tensor w = defined(weight) ? *weight : at::Tensor();
	check_nll2d(self, target, w);
	auto r = nll_forward(self, target, w, reduction, ignore_index, 1);
	if (!std::get<0>(r).defined())
		return SPYRE_FALLBACK(nll_loss2d_forward, self, target, weight,
				      reduction, ignore_index);
	count_native("aten::nll_loss2d_forward");
	return r;
}

at::Tensor k_nll_loss2d_backward(const at::Tensor &grad, const at::Tensor &self,
				 const at::Tensor &target,
				 const std::optional<at::Tensor> &weight,
				 int64_t reduction, int64_t ignore_index,
				 const at::Tensor &total_weight)
{
	at::Tensor w = defined(weight) ? *weight : at::Tensor();
	check_nll2d(self, target, w);
	at::Tensor r = nll_backward(grad, self, target, w, reduction,
				    ignore_index, total_weight, 1);
	if (!r.defined())
		return SPYRE_FALLBACK(nll_loss2d_backward, grad, self, target,
				      weight, reduction, ignore_index,
				      total_weight);
	count_native("aten::nll_loss2d_backward");
	return r;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("mse_loss", TORCH_FN(k_mse_loss));
	m.impl("mse_loss_backward", TORCH_FN(k_mse_loss_backward));
	m.impl("smooth_l1_loss", TORCH_FN(k_smooth_l1_loss));
	m.impl("smooth_l1_loss_backward", TORCH_FN(k_smooth_l1_loss_backward));
	m.impl("huber_loss", TORCH_FN(k_huber_loss));
	m.impl("huber_loss_backward", TORCH_FN(k_huber_loss_backward));
	m.impl("binary_cross_entropy", TORCH_FN(k_bce));
	m.impl("binary_cross_entropy_backward", TORCH_FN(k_bce_backward));
	m.impl("log_sigmoid_forward", TORCH_FN(k_log_sigmoid));
	m.impl("log_sigmoid_backward", TORCH_FN(k_log_sigmoid_backward));
	m.impl("nll_loss_forward", TORCH_FN(k_nll_loss));
	m.impl("nll_loss_backward", TORCH_FN(k_nll_loss_backward));
	m.impl("nll_loss2d_forward", TORCH_FN(k_nll_loss2d));
	m.impl("nll_loss2d_backward", TORCH_FN(k_nll_loss2d_backward));
}

} // namespace spyre_torch
