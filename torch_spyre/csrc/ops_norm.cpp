// SPDX-License-Identifier: MIT
// Normalisation on the card: native_layer_norm,
// native_group_norm and native_batch_norm's training statistics as one
// generated kernel each (Welford statistics, then the normalised output,
// mean and rstd), batch_norm's inference and running statistics (and
// batch norm's other ATen entry points: _native_batch_norm_legit,
// _batch_norm_with_update) and the backward of layer, group and batch
// norm composed of native ops.  (The losses are ops_loss.cpp's.)
// (rms_norm is ATen's composition of native pointwise ops and mean.)
#include "kernels.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace spyre_torch {
namespace {

using namespace kgen;


struct LnBuild {
	uint32_t dts[6];	// x, [w], [b], out, mean, rstd
	bool has_w, has_b;
	int np, nr;
};

// params: every operand's strides (np + nr each), then N and eps (f32)
int build_ln(struct spyre_kernel **kp, const void *ctx)
{
	const LnBuild &p = *static_cast<const LnBuild *>(ctx);
	int no = 4 + p.has_w + p.has_b;
	unsigned int w = static_cast<unsigned int>(p.np + p.nr);
	unsigned int sp = w * no;
	int rc = spyre_kernel_create(p.dts, no, sp + 2, p.np, p.nr, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32;
	int base[6];
	for (int i = 0; i < no; i++)
		base[i] = point_offset(b, p.np, i * w);
	auto off = [&](int i) {
		return rindex_offset(b, base[i], p.np, p.nr, i * w);
	};
	auto ld = [&](int i) {
		return b.cvt(spyre_kernel_load(b.k, i, off(i), NONE, NONE), F);
	};
	int n = b.param(F, sp), eps = b.param(F, sp + 1);
	spyre_kernel_pass(b.k);
	int mean = spyre_kernel_reduce(b.k, SPYRE_KRED_WELFORD, ld(0), NONE, NONE,
				       NONE);
	spyre_kernel_endpass(b.k);
	int var = b.max(b.div(mean + 1, n), b.f(0.0f));
	int rstd = b.un(SPYRE_KOP_RSQRT, b.add(var, eps));
	int bias = b.mul(b.neg(rstd), mean);
	int io = 1 + p.has_w + p.has_b;
	spyre_kernel_pass(b.k);
	int y = b.add(b.mul(ld(0), rstd), bias);
	if (p.has_w)
		y = b.mul(y, ld(1));
	if (p.has_b)
		y = b.add(y, ld(1 + p.has_w));
	spyre_kernel_store(b.k, io, off(io), b.cvt(y, vtype(p.dts[io])), NONE, 0);
	spyre_kernel_endpass(b.k);
	spyre_kernel_store(b.k, io + 1, base[io + 1],
			   b.cvt(mean, vtype(p.dts[io + 1])), NONE, 0);
	spyre_kernel_store(b.k, io + 2, base[io + 2],
			   b.cvt(rstd, vtype(p.dts[io + 2])), NONE, 0);
	return spyre_kernel_error(b.k);
}

bool defined(const std::optional<at::Tensor> &t)
{
	return t.has_value() && t->defined();
}

// PyTorch's checks of layer_norm's arguments (same messages).
void check_ln(const at::Tensor &input, at::IntArrayRef normalized_shape,
	      const std::optional<at::Tensor> &weight,
	      const std::optional<at::Tensor> &bias)
{
	const int64_t nn = static_cast<int64_t>(normalized_shape.size());
	TORCH_CHECK(nn >= 1, "Expected normalized_shape to be at least "
		    "1-dimensional, i.e., containing at least one element, but "
		    "got normalized_shape = ", normalized_shape);
	TORCH_CHECK(!defined(weight) || weight->sizes().equals(normalized_shape),
		    "Expected weight to be of same shape as normalized_shape, "
		    "but got weight of shape ", weight->sizes(),
		    " and normalized_shape = ", normalized_shape);
	TORCH_CHECK(!defined(bias) || bias->sizes().equals(normalized_shape),
		    "Expected bias to be of same shape as normalized_shape, but "
		    "got bias of shape ", bias->sizes(),
		    " and normalized_shape = ", normalized_shape);
	const auto in = input.sizes();
	const int64_t nd = input.dim();
	TORCH_CHECK(nd >= nn && in.slice(nd - nn).equals(normalized_shape),
		    "Given normalized_shape=", normalized_shape,
		    ", expected input with shape [*", [&] {
			    std::string s;
			    for (int64_t d : normalized_shape)
				    s += ", " + std::to_string(d);
			    return s;
		    }(), "], but got input of size", in);
}

// Run the statistics-and-normalise program over space @s, whose operands
// are, in order, x, [w], [b], out, mean, rstd (@ops the same tensors):
// per point, mean and rstd = 1 / sqrt(var + @eps) over the reduction dims
// (biased variance over @n elements), out = (x - mean) * rstd [* w] [+ b].
// False when the space has too many dims or the builder refuses.
bool norm_run(Space &s, const std::vector<at::Tensor> &ops, bool has_w,
	      bool has_b, double n, double eps)
{
	if (!s.collapse(true))
		return false;
	LnBuild lb;
	std::memset(&lb, 0, sizeof(lb));
	lb.has_w = has_w;
	lb.has_b = has_b;
	lb.np = s.np;
	lb.nr = s.nr;
	for (size_t j = 0; j < ops.size(); j++)
		lb.dts[j] = kdtype(ops[j].scalar_type());
	Key key;
	key.op = kOpLayerNorm;
	key.variant = lb.has_w | lb.has_b << 1;
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = static_cast<uint8_t>(s.nr);
	for (int j = 0; j < 6; j++)
		key.dt[j] = static_cast<uint8_t>(lb.dts[j]);
	int card = ops[0].device().index();
	const Prog *prog = program(card, key, build_ln, &lb);
	if (prog->err != 0)
		return false;
	Launch L;
	unsigned int w = static_cast<unsigned int>(s.np + s.nr);
	for (size_t j = 0; j < ops.size(); j++) {
		L.bind(j, ops[j], s, j, j * w);
	}
	unsigned int sp = w * ops.size();
	L.params[sp] = f32_param(n);
	L.params[sp + 1] = f32_param(eps);
	L.sizes(s);
	run(card, prog, L, ops.size(), sp + 2);
	return true;
}

// Whether @t (given) can be an operand of a norm kernel on @like's card.
bool param_ok(const std::optional<at::Tensor> &t, const at::Tensor &like)
{
	return !defined(t) || (t->device() == like.device() &&
			       kdtype(t->scalar_type()) &&
			       at::isFloatingType(t->scalar_type()));
}

// The dtype of the statistics: the parameters' float32 when a half input
// comes with float32 weight or bias (PyTorch's mixed type), else the
// input's.
at::ScalarType stat_dtype(const at::Tensor &input,
			  const std::optional<at::Tensor> &weight,
			  const std::optional<at::Tensor> &bias)
{
	at::ScalarType dt = input.scalar_type();
	bool mixed = (dt == at::kHalf || dt == at::kBFloat16) &&
		     ((defined(weight) && weight->scalar_type() == at::kFloat) ||
		      (defined(bias) && bias->scalar_type() == at::kFloat));
	return mixed ? at::kFloat : dt;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_layer_norm(const at::Tensor &input, at::IntArrayRef normalized_shape,
	     const std::optional<at::Tensor> &weight,
	     const std::optional<at::Tensor> &bias, double eps)
{
	check_ln(input, normalized_shape, weight, bias);
	bool ok = kdtype(input.scalar_type()) &&
		  at::isFloatingType(input.scalar_type()) &&
		  param_ok(weight, input) && param_ok(bias, input);
	int64_t nd = input.dim();
	int64_t axis = nd - static_cast<int64_t>(normalized_shape.size());
	if (ok) {
		c10::DeviceGuard guard(input.device());
		at::ScalarType st = stat_dtype(input, weight, bias);
		std::vector<int64_t> stat(input.sizes().begin(),
					  input.sizes().begin() + axis);
		stat.resize(nd, 1);
		at::Tensor out = at::empty(input.sizes(), input.options());
		at::Tensor mean = at::empty(stat, input.options().dtype(st));
		at::Tensor rstd = at::empty(stat, input.options().dtype(st));
		if (input.numel() == 0) {
			count_native("aten::native_layer_norm");
			return {out, mean, rstd};
		}
		uint64_t mask = ((1ull << nd) - 1) & ~((1ull << axis) - 1);
		Space s;
		s.init(input.sizes(), mask);
		std::vector<at::Tensor> ops{input};
		if (defined(weight))
			ops.push_back(*weight);
		if (defined(bias))
			ops.push_back(*bias);
		ops.push_back(out);
		ops.push_back(mean);
		ops.push_back(rstd);
		for (const at::Tensor &t : ops)
			s.add(t);
		int64_t N = 1;
		for (int64_t d : normalized_shape)
			N *= d;
		if (norm_run(s, ops, defined(weight), defined(bias),
			     static_cast<double>(N), eps)) {
			count_native("aten::native_layer_norm");
			return {out, mean, rstd};
		}
	}
	return SPYRE_FALLBACK(native_layer_norm, input, normalized_shape, weight,
			      bias, eps);
}

// native_group_norm as one kernel: input (N, C, *) seen as (N, G, C/G,
// HxW), statistics per (n, g) over (C/G, HxW), weight and bias per
// channel; PyTorch's argument checks (same messages).
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_group_norm(const at::Tensor &input, const std::optional<at::Tensor> &weight,
	     const std::optional<at::Tensor> &bias, int64_t N, int64_t C,
	     int64_t HxW, int64_t group, double eps)
{
	TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels "
		    "in input to be divisible by num_groups, but got input of "
		    "shape ", input.sizes(), " and num_groups=", group);
	for (const auto &p : {weight, bias})
		TORCH_CHECK(!defined(p) || (p->dim() == 1 && p->numel() == C),
			    "Expected weight to be a vector of size equal to "
			    "the number of channels in input, but got weight "
			    "of shape ", p->sizes(), " and input of shape ",
			    input.sizes());
	TORCH_CHECK(input.numel() == N * C * HxW, "native_group_norm: input of "
		    "shape ", input.sizes(), " is not N * C * HxW = ", N, " * ",
		    C, " * ", HxW);
	bool ok = kdtype(input.scalar_type()) &&
		  at::isFloatingType(input.scalar_type()) &&
		  param_ok(weight, input) && param_ok(bias, input);
	if (ok) {
		c10::DeviceGuard guard(input.device());
		at::ScalarType st = stat_dtype(input, weight, bias);
		at::Tensor out = at::empty(input.sizes(), input.options());
		at::Tensor mean = at::empty({N, group}, input.options().dtype(st));
		at::Tensor rstd = at::empty({N, group}, input.options().dtype(st));
		if (input.numel() == 0) {
			count_native("aten::native_group_norm");
			return {out, mean, rstd};
		}
		int64_t D = C / group;
		// a view of (N, G, D, HxW) when the layout allows one, else
		// a copy
		at::Tensor x = input.reshape({N, group, D, HxW});
		std::vector<at::Tensor> ops{x};
		Space s;
		s.init(x.sizes(), 0b1100);
		s.add(x);
		for (const auto &p : {weight, bias}) {
			if (!defined(p))
				continue;
			int64_t ps = p->stride(0);
			int64_t st4[4] = {0, D * ps, ps, 0};
			s.add_strides(st4);
			ops.push_back(*p);
		}
		at::Tensor o = out.view({N, group, D, HxW});
		s.add(o);
		ops.push_back(o);
		for (at::Tensor *t : {&mean, &rstd}) {
			int64_t st4[4] = {group, 1, 0, 0};
			s.add_strides(st4);
			ops.push_back(*t);
		}
		if (norm_run(s, ops, defined(weight), defined(bias),
			     static_cast<double>(D * HxW), eps)) {
			count_native("aten::native_group_norm");
			return {out, mean, rstd};
		}
	}
	return SPYRE_FALLBACK(native_group_norm, input, weight, bias, N, C, HxW,
			      group, eps);
}

// out = x * alpha + beta per channel (dim 1) with alpha = invstd [* w],
// beta = [b] - mean * alpha, in f32 (opmath) and rounded once, from
// @mean and @invstd as they are stored: batch norm's output as the CPU
// kernel computes it.
void bn_affine(const at::Tensor &out, const at::Tensor &input,
	       const at::Tensor &mean, const at::Tensor &invstd,
	       const std::optional<at::Tensor> &weight,
	       const std::optional<at::Tensor> &bias)
{
	if (input.numel() == 0)
		return;
	at::Tensor alpha = invstd.to(at::kFloat);
	if (defined(weight))
		alpha = alpha * weight->to(at::kFloat);
	at::Tensor beta = -mean.to(at::kFloat) * alpha;
	if (defined(bias))
		beta = beta + bias->to(at::kFloat);
	std::vector<int64_t> bshape(input.dim(), 1);
	bshape[1] = input.size(1);
	out.copy_(at::addcmul(beta.view(bshape), input, alpha.view(bshape)));
}

// native_batch_norm.  Training: one kernel over input (N, C, *) with the
// channel as its point (statistics over N and the spatial dims: save_mean
// and save_invstd, and the output), and the running statistics updated on
// the card as PyTorch does (running = (1 - momentum) * running + momentum
// * stat, the variance unbiased); in the half types the CPU computes the
// output from the statistics rounded to the dtype, and so does this.
// Inference: bn_affine() from the running statistics; save_mean and
// save_invstd empty, as on the CPU.
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_batch_norm(const at::Tensor &input, const std::optional<at::Tensor> &weight,
	     const std::optional<at::Tensor> &bias,
	     const std::optional<at::Tensor> &running_mean,
	     const std::optional<at::Tensor> &running_var, bool training,
	     double momentum, double eps)
{
	bool has_rm = defined(running_mean), has_rv = defined(running_var);
	bool ok = input.dim() >= 2 && kdtype(input.scalar_type()) &&
		  at::isFloatingType(input.scalar_type()) &&
		  param_ok(weight, input) && param_ok(bias, input) &&
		  param_ok(running_mean, input) && param_ok(running_var, input) &&
		  (training || (has_rm && has_rv));
	int64_t C = ok ? input.size(1) : 0;
	for (const auto &p : {weight, bias, running_mean, running_var})
		ok = ok && (!defined(p) || p->numel() == C);
	if (!ok)
		return SPYRE_FALLBACK(native_batch_norm, input, weight, bias,
				      running_mean, running_var, training,
				      momentum, eps);
	c10::DeviceGuard guard(input.device());
	at::ScalarType st = stat_dtype(input, weight, bias);
	int64_t nd = input.dim();
	int64_t n = input.numel() / std::max<int64_t>(C, 1);
	at::Tensor out = at::empty(input.sizes(), input.options());
	if (!training) {
		bn_affine(out, input, *running_mean,
			  (running_var->to(at::kFloat) + eps).rsqrt(), weight,
			  bias);
		count_native("aten::native_batch_norm");
		return {out, at::empty({0}, input.options().dtype(st)),
			at::empty({0}, input.options().dtype(st))};
	}
	at::Tensor mean = at::empty({C}, input.options().dtype(st));
	at::Tensor invstd = at::empty({C}, input.options().dtype(st));
	if (input.numel()) {
		Space s;
		s.init(input.sizes(), ((1ull << nd) - 1) & ~2ull);
		std::vector<at::Tensor> ops{input};
		s.add(input);
		for (const auto &p : {weight, bias}) {
			if (!defined(p))
				continue;
			std::vector<int64_t> st(nd, 0);
			st[1] = p->stride(0);
			s.add_strides(st.data());
			ops.push_back(*p);
		}
		s.add(out);
		ops.push_back(out);
		for (at::Tensor *t : {&mean, &invstd}) {
			std::vector<int64_t> st(nd, 0);
			st[1] = 1;
			s.add_strides(st.data());
			ops.push_back(*t);
		}
		if (!norm_run(s, ops, defined(weight), defined(bias),
			      static_cast<double>(n), eps))
			return SPYRE_FALLBACK(native_batch_norm, input, weight,
					      bias, running_mean, running_var,
					      training, momentum, eps);
		if (st != at::kFloat)
			bn_affine(out, input, mean, invstd, weight, bias);
	}
	if (has_rm) {
		at::Tensor rm = *running_mean;
		rm.mul_(1.0 - momentum).add_(mean.to(rm.scalar_type()), momentum);
	}
	if (has_rv && n > 0) {
		std::vector<int64_t> dims;
		for (int64_t d = 0; d < nd; d++)
			if (d != 1)
				dims.push_back(d);
		at::Tensor var = at::var(input, at::OptionalIntArrayRef(dims),
					 at::Scalar(1), false);
		at::Tensor rv = *running_var;
		rv.mul_(1.0 - momentum).add_(var.to(rv.scalar_type()), momentum);
	}
	count_native("aten::native_batch_norm");
	return {out, mean, invstd};
}

// The variants of batch norm ATen's frontends call (_batch_norm_impl_index
// in eager, the _batch_norm_with_update / _no_update pair and the
// _native_batch_norm_legit family in exported and compiled graphs): the
// same kernel as native_batch_norm, the same results as their CPU kernels
// (save_mean and save_invstd empty in inference, an empty uint8 reserve).
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_bn_legit(const at::Tensor &input, const std::optional<at::Tensor> &weight,
	   const std::optional<at::Tensor> &bias, at::Tensor &running_mean,
	   at::Tensor &running_var, bool training, double momentum, double eps)
{
	return k_batch_norm(input, weight, bias, running_mean, running_var,
			    training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_bn_legit_no_stats(const at::Tensor &input,
		    const std::optional<at::Tensor> &weight,
		    const std::optional<at::Tensor> &bias, bool training,
		    double momentum, double eps)
{
	return k_batch_norm(input, weight, bias, std::nullopt, std::nullopt,
			    training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
k_bn_with_update(const at::Tensor &input,
		 const std::optional<at::Tensor> &weight,
		 const std::optional<at::Tensor> &bias, at::Tensor &running_mean,
		 at::Tensor &running_var, double momentum, double eps)
{
	auto r = k_batch_norm(input, weight, bias, running_mean, running_var,
			      true, momentum, eps);
	return {std::get<0>(r), std::get<1>(r), std::get<2>(r),
		at::empty({0}, input.options().dtype(at::kByte))};
}

// batch norm's backward from native ops in f32, as the CPU kernel computes
// it: per channel (dim 1), over the n elements of the other dims, with
// mean and invstd the saved statistics (@train) or the running ones
// (invstd = 1 / sqrt(running_var + eps)) and w the weight (or 1):
//   sum = sum(dy), dot = sum(dy * (x - mean))
//   dx = (dy - sum / n - (x - mean) * dot * invstd^2 / n) * invstd * w
//        (inference: dx = dy * invstd * w)
//   dw = dot * invstd, db = sum
// The gradients @mask asks for in the dtypes of input and weight (input's
// statistics dtype without a weight); false (nothing done) when the card
// cannot: the caller falls back.
bool bn_backward(const at::Tensor &grad_out, const at::Tensor &input,
		 const std::optional<at::Tensor> &weight,
		 const std::optional<at::Tensor> &running_mean,
		 const std::optional<at::Tensor> &running_var,
		 const std::optional<at::Tensor> &save_mean,
		 const std::optional<at::Tensor> &save_invstd, bool train,
		 double eps, std::array<bool, 3> mask,
		 std::tuple<at::Tensor, at::Tensor, at::Tensor> &res)
{
	const std::optional<at::Tensor> &m = train ? save_mean : running_mean;
	const std::optional<at::Tensor> &v = train ? save_invstd : running_var;
	auto on = [&](const std::optional<at::Tensor> &t) {
		return defined(t) && t->device() == input.device() &&
		       kdtype(t->scalar_type()) &&
		       at::isFloatingType(t->scalar_type());
	};
	if (input.dim() < 2 || input.numel() == 0 || !on(input) ||
	    !on(grad_out) || grad_out.sizes() != input.sizes() || !on(m) ||
	    !on(v) || (defined(weight) && !on(weight)))
		return false;
	int64_t C = input.size(1), nd = input.dim();
	for (const auto *t : {&m, &v, &weight})
		if (defined(*t) && (*t)->numel() != C)
			return false;
	c10::DeviceGuard guard(input.device());
	std::vector<int64_t> dims, bshape(nd, 1);
	for (int64_t d = 0; d < nd; d++)
		if (d != 1)
			dims.push_back(d);
	bshape[1] = C;
	double n = static_cast<double>(input.numel() / C);
	at::Tensor mean = m->to(at::kFloat);
	at::Tensor invstd = train ? v->to(at::kFloat) :
				    (v->to(at::kFloat) + eps).rsqrt();
	at::Tensor x = input.to(at::kFloat);
	at::Tensor dy = grad_out.to(at::kFloat);
	at::Tensor xm = x - mean.view(bshape);
	at::Tensor sum = dy.sum(at::OptionalIntArrayRef(dims));
	at::Tensor dot = (dy * xm).sum(at::OptionalIntArrayRef(dims));
	at::Tensor gx, gw, gb;
	at::Tensor scale = defined(weight) ? invstd * weight->to(at::kFloat) :
					     invstd;
	if (mask[0]) {
		at::Tensor g = dy;
		if (train)
			g = dy - (sum / n).view(bshape) -
			    xm * (dot * invstd * invstd / n).view(bshape);
		gx = (g * scale.view(bshape)).to(input.scalar_type());
	}
	at::ScalarType pt = defined(weight) ? weight->scalar_type() :
						m->scalar_type();
	if (mask[1])
		gw = (dot * invstd).to(pt);
	if (mask[2])
		gb = sum.to(pt);
	res = {gx, gw, gb};
	return true;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_bn_backward(const at::Tensor &grad_out, const at::Tensor &input,
	      const std::optional<at::Tensor> &weight,
	      const std::optional<at::Tensor> &running_mean,
	      const std::optional<at::Tensor> &running_var,
	      const std::optional<at::Tensor> &save_mean,
	      const std::optional<at::Tensor> &save_invstd, bool train,
	      double eps, std::array<bool, 3> mask)
{
	std::tuple<at::Tensor, at::Tensor, at::Tensor> r;
	if (bn_backward(grad_out, input, weight, running_mean, running_var,
			save_mean, save_invstd, train, eps, mask, r)) {
		count_native("aten::native_batch_norm_backward");
		return r;
	}
	return SPYRE_FALLBACK(native_batch_norm_backward, grad_out, input,
			      weight, running_mean, running_var, save_mean,
			      save_invstd, train, eps, mask);
}

// batch_norm_backward (the backward of _batch_norm_with_update and
// _batch_norm_no_update): @update says which statistics, @save_var holds
// the saved invstd, @reserve is unused (as on the CPU).
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_bn_backward2(const at::Tensor &grad_out, const at::Tensor &input,
	       const at::Tensor &weight,
	       const std::optional<at::Tensor> &running_mean,
	       const std::optional<at::Tensor> &running_var,
	       const std::optional<at::Tensor> &save_mean,
	       const std::optional<at::Tensor> &save_var, bool update,
	       double eps, std::array<bool, 3> mask, const at::Tensor &reserve)
{
	std::tuple<at::Tensor, at::Tensor, at::Tensor> r;
	std::optional<at::Tensor> w;
	if (weight.defined())
		w = weight;
	if (bn_backward(grad_out, input, w, running_mean, running_var,
			save_mean, save_var, update, eps, mask, r)) {
		count_native("aten::batch_norm_backward");
		return r;
	}
	return SPYRE_FALLBACK(batch_norm_backward, grad_out, input, weight,
			      running_mean, running_var, save_mean, save_var,
			      update, eps, mask, reserve);
}

// native_group_norm_backward from native ops in f32: input (N, C, HxW)
// seen as (N, G, D, HxW), statistics per (n, g); with xhat = (x - mean) *
// rstd and g = dy * w (per channel),
//   dx = rstd * (g - mean_grp(g) - xhat * mean_grp(g * xhat))
//   dw = sum_{n, HxW}(dy * xhat),  db = sum_{n, HxW}(dy)
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_group_norm_backward(const at::Tensor &grad_out, const at::Tensor &input,
		      const at::Tensor &mean, const at::Tensor &rstd,
		      const std::optional<at::Tensor> &weight, int64_t N,
		      int64_t C, int64_t HxW, int64_t group,
		      std::array<bool, 3> mask)
{
	auto on = [&](const at::Tensor &t) {
		return t.device() == input.device() && kdtype(t.scalar_type()) &&
		       at::isFloatingType(t.scalar_type());
	};
	bool ok = group > 0 && C % group == 0 && input.numel() > 0 &&
		  input.numel() == N * C * HxW && on(input) && on(grad_out) &&
		  grad_out.sizes() == input.sizes() && on(mean) && on(rstd) &&
		  mean.numel() == N * group && rstd.numel() == N * group &&
		  (!defined(weight) || (on(*weight) && weight->numel() == C));
	if (!ok)
		return SPYRE_FALLBACK(native_group_norm_backward, grad_out, input,
				      mean, rstd, weight, N, C, HxW, group,
				      mask);
	count_native("aten::native_group_norm_backward");
	c10::DeviceGuard guard(input.device());
	int64_t D = C / group;
	at::Tensor x = input.to(at::kFloat).reshape({N, group, D, HxW});
	at::Tensor dy = grad_out.to(at::kFloat).reshape({N, group, D, HxW});
	at::Tensor mu = mean.to(at::kFloat).reshape({N, group, 1, 1});
	at::Tensor rs = rstd.to(at::kFloat).reshape({N, group, 1, 1});
	at::Tensor xhat = (x - mu) * rs;
	at::Tensor gx, gw, gb;
	if (mask[0]) {
		at::Tensor g = defined(weight) ?
			dy * weight->to(at::kFloat).reshape({1, group, D, 1}) : dy;
		at::Tensor a = g.mean({2, 3}, true);
		at::Tensor b = (g * xhat).mean({2, 3}, true);
		gx = ((g - a - xhat * b) * rs).reshape(input.sizes())
			.to(input.scalar_type());
	}
	at::ScalarType pt = defined(weight) ? weight->scalar_type() :
						input.scalar_type();
	if (mask[1])
		gw = (dy * xhat).sum(at::IntArrayRef{0, 3}).reshape({C}).to(pt);
	if (mask[2])
		gb = dy.sum(at::IntArrayRef{0, 3}).reshape({C}).to(pt);
	return {gx, gw, gb};
}

// native_layer_norm_backward from native ops, in fp32 (as the CPU kernel
// accumulates): with xhat = (x - mean) * rstd and g = dy * w,
//   dx = rstd * (g - mean_row(g) - xhat * mean_row(g * xhat))
//   dw = sum_rows(dy * xhat),  db = sum_rows(dy)
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_layer_norm_backward(const at::Tensor &grad_out, const at::Tensor &input,
		      at::IntArrayRef normalized_shape, const at::Tensor &mean,
		      const at::Tensor &rstd,
		      const std::optional<at::Tensor> &weight,
		      const std::optional<at::Tensor> &bias,
		      std::array<bool, 3> mask)
{
	int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
	bool has_w = defined(weight), has_b = defined(bias);
	auto same = [&](const at::Tensor &t) {
		return t.device() == input.device() && kdtype(t.scalar_type());
	};
	bool ok = at::isFloatingType(input.scalar_type()) && axis >= 0 &&
		  input.numel() > 0 && same(input) && same(grad_out) &&
		  same(mean) && same(rstd) && (!has_w || same(*weight)) &&
		  (!has_b || same(*bias));
	if (!ok)
		return SPYRE_FALLBACK(native_layer_norm_backward, grad_out, input,
				      normalized_shape, mean, rstd, weight,
				      bias, mask);
	count_native("aten::native_layer_norm_backward");
	c10::DeviceGuard guard(input.device());
	int64_t N = 1;
	for (auto d : normalized_shape)
		N *= d;
	int64_t M = input.numel() / N;
	at::Tensor x = input.to(at::kFloat).reshape({M, N});
	at::Tensor dy = grad_out.to(at::kFloat).reshape({M, N});
	at::Tensor mu = mean.to(at::kFloat).reshape({M, 1});
	at::Tensor rs = rstd.to(at::kFloat).reshape({M, 1});
	at::Tensor xhat = (x - mu) * rs;
	at::Tensor gx, gw, gb;
	if (mask[0]) {
		at::Tensor g = has_w ? dy * weight->to(at::kFloat).reshape({1, N}) : dy;
		at::Tensor a = g.mean({-1}, true);
		at::Tensor b = (g * xhat).mean({-1}, true);
		gx = ((g - a - xhat * b) * rs).reshape(input.sizes())
			.to(input.scalar_type());
	}
	if (mask[1] && has_w)
		gw = (dy * xhat).sum({0}).reshape(weight->sizes())
			.to(weight->scalar_type());
	if (mask[2] && has_b)
		gb = dy.sum({0}).reshape(bias->sizes()).to(bias->scalar_type());
	return {gx, gw, gb};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("native_layer_norm", TORCH_FN(k_layer_norm));
	m.impl("native_group_norm", TORCH_FN(k_group_norm));
	m.impl("native_batch_norm", TORCH_FN(k_batch_norm));
	m.impl("native_layer_norm_backward", TORCH_FN(k_layer_norm_backward));
	m.impl("_native_batch_norm_legit", TORCH_FN(k_bn_legit));
	m.impl("_native_batch_norm_legit.no_stats",
	       TORCH_FN(k_bn_legit_no_stats));
	m.impl("_batch_norm_with_update", TORCH_FN(k_bn_with_update));
	m.impl("native_batch_norm_backward", TORCH_FN(k_bn_backward));
	m.impl("batch_norm_backward", TORCH_FN(k_bn_backward2));
	m.impl("native_group_norm_backward", TORCH_FN(k_group_norm_backward));
}

} // namespace spyre_torch
