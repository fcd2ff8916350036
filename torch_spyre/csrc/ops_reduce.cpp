// SPDX-License-Identifier: MIT
// Reductions on the card, generated: sum, nansum, prod, mean (half types
// accumulate in f32), amax/amin, aminmax, max/min (with indices),
// argmax/argmin, var/std
// (Welford) and var_mean/std_mean, linalg_vector_norm (and torch.norm's
// vector norms), logsumexp,
// any/all, count_nonzero over any dims with keepdim, and softmax /
// log_softmax (and their backward) over any dim.  The reduced dims become
// the kernel's reduction dims (collapsed where the layout allows, at most
// 3), the kept ones its pointwise dims; any layout, out= variants resized
// as PyTorch does.
#include "kernels.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

namespace spyre_torch {
namespace {

using namespace kgen;

enum RKind : uint8_t {
	RK_SUM = 1, RK_PROD, RK_MEAN, RK_MAX, RK_MIN, RK_ARGMAX, RK_ARGMIN,
	RK_MAXI, RK_MINI, RK_VAR, RK_STD, RK_VARMEAN, RK_STDMEAN, RK_NORM2,
	RK_NORM1, RK_NORMINF, RK_NORMNINF, RK_NORM0, RK_NORMP, RK_LSE, RK_ANY,
	RK_ALL, RK_CNZ, RK_NANSUM, RK_AMINMAX,
};


struct RedBuild {
	RKind kind;
	uint32_t acc;		// accumulation type
	uint32_t dts[3];	// x, out0, out1
	int nout, np, nr;
};

// params: x's strides (np + nr), each output's (np), two f32 scalars
int build_red(struct spyre_kernel **kp, const void *ctx)
{
	const RedBuild &p = *static_cast<const RedBuild *>(ctx);
	unsigned int np = static_cast<unsigned int>(p.np);
	unsigned int nparams = np + p.nr + p.nout * np + 2;
	unsigned int s0 = nparams - 2;
	int rc = spyre_kernel_create(p.dts, 1 + p.nout, nparams, np, p.nr, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32;
	int base = point_offset(b, p.np, 0);
	int r = NONE, r2 = NONE;
	int pw = p.kind == RK_NORMP ? b.param(F, s0) : NONE;
	spyre_kernel_pass(b.k);
	int v = spyre_kernel_load(b.k, 0, rindex_offset(b, base, p.np, p.nr, 0),
				  NONE, NONE);
	int a = b.cvt(v, p.acc);
	auto red = [&](uint32_t kind, int val) {
		return spyre_kernel_reduce(b.k, kind, val, NONE, NONE, NONE);
	};
	switch (p.kind) {
	case RK_SUM: case RK_MEAN: r = red(SPYRE_KRED_SUM, a); break;
	case RK_NANSUM:
		r = red(SPYRE_KRED_SUM, p.acc != F ? a :
			b.sel(b.un(SPYRE_KOP_ISNAN, a), b.f(0.0f), a));
		break;
	case RK_AMINMAX:
		r = red(SPYRE_KRED_MIN, a);
		r2 = red(SPYRE_KRED_MAX, a);
		break;
	case RK_PROD: r = red(SPYRE_KRED_PROD, a); break;
	case RK_MAX: case RK_LSE: r = red(SPYRE_KRED_MAX, a); break;
	case RK_MIN: r = red(SPYRE_KRED_MIN, a); break;
	case RK_ARGMAX: r = red(SPYRE_KRED_ARGMAX, a); break;
	case RK_ARGMIN: r = red(SPYRE_KRED_ARGMIN, a); break;
	case RK_MAXI:
		r = red(SPYRE_KRED_MAX, a);
		r2 = red(SPYRE_KRED_ARGMAX, a);
		break;
	case RK_MINI:
		r = red(SPYRE_KRED_MIN, a);
		r2 = red(SPYRE_KRED_ARGMIN, a);
		break;
	case RK_VAR: case RK_STD: case RK_VARMEAN: case RK_STDMEAN:
		r = red(SPYRE_KRED_WELFORD, a);
		break;
	case RK_NORM2: r = red(SPYRE_KRED_SUM, b.mul(a, a)); break;
	case RK_NORM1: r = red(SPYRE_KRED_SUM, b.un(SPYRE_KOP_ABS, a)); break;
	case RK_NORMINF: r = red(SPYRE_KRED_MAX, b.un(SPYRE_KOP_ABS, a)); break;
	case RK_NORMNINF: r = red(SPYRE_KRED_MIN, b.un(SPYRE_KOP_ABS, a)); break;
	case RK_NORM0:
		r = red(SPYRE_KRED_SUM, b.sel(b.cmp(SPYRE_KCMP_NE, a, b.f(0.0f)),
					      b.f(1.0f), b.f(0.0f)));
		break;
	case RK_NORMP:
		r = red(SPYRE_KRED_SUM, b.op(SPYRE_KOP_POW, b.un(SPYRE_KOP_ABS, a),
					     pw));
		break;
	case RK_ANY: r = red(SPYRE_KRED_ANY, b.cvt(v, SPYRE_KTYPE_BOOL)); break;
	case RK_ALL: r = red(SPYRE_KRED_ALL, b.cvt(v, SPYRE_KTYPE_BOOL)); break;
	case RK_CNZ:
		r = red(SPYRE_KRED_SUM, b.cvt(b.cvt(v, SPYRE_KTYPE_BOOL),
					      SPYRE_KTYPE_I64));
		break;
	}
	spyre_kernel_endpass(b.k);
	switch (p.kind) {
	case RK_MEAN:
		r = b.div(r, b.param(F, s0));
		break;
	case RK_VAR: case RK_STD: case RK_VARMEAN: case RK_STDMEAN: {
		int mean = r;
		r = b.div(r + 1, b.param(F, s0));
		if (p.kind == RK_STD || p.kind == RK_STDMEAN)
			r = b.un(SPYRE_KOP_SQRT, r);
		if (p.kind == RK_VARMEAN || p.kind == RK_STDMEAN)
			r2 = mean;
		break;
	}
	case RK_NORM2:
		r = b.un(SPYRE_KOP_SQRT, r);
		break;
	case RK_NORMP:
		r = b.op(SPYRE_KOP_POW, r, b.param(F, s0 + 1));
		break;
	case RK_LSE: {
		// shift by the max, or by 0 when it is infinite (PyTorch)
		int m = b.sel(b.un(SPYRE_KOP_ISINF, r), b.f(0.0f), r);
		spyre_kernel_pass(b.k);
		int x2 = spyre_kernel_load(b.k, 0, rindex_offset(b, base, p.np,
								 p.nr, 0),
					   NONE, NONE);
		int s = red(SPYRE_KRED_SUM, b.un(SPYRE_KOP_EXP,
					b.sub(b.cvt(x2, F), m)));
		spyre_kernel_endpass(b.k);
		r = b.add(b.un(SPYRE_KOP_LOG, s), m);
		break;
	}
	default:
		break;
	}
	unsigned int op0 = np + p.nr;
	spyre_kernel_store(b.k, 1, point_offset(b, p.np, op0),
			   b.cvt(r, vtype(p.dts[1])), NONE, 0);
	if (p.nout > 1)
		spyre_kernel_store(b.k, 2, point_offset(b, p.np, op0 + np),
				   b.cvt(r2, vtype(p.dts[2])), NONE, 0);
	return spyre_kernel_error(b.k);
}

// Bit d for each dim of @dim (None or empty: every dim), wrapped and
// checked as PyTorch does.
uint64_t dim_mask(at::OptionalIntArrayRef dim, int64_t ndim)
{
	TORCH_CHECK(ndim <= kMaxDims, "spyre: too many dims");
	uint64_t all = ndim ? (1ull << ndim) - 1 : 0;
	if (!dim.has_value() || dim->empty())
		return all;
	uint64_t m = 0;
	for (int64_t d : *dim) {
		int64_t w = at::maybe_wrap_dim(d, ndim);
		if (ndim == 0)
			continue;
		TORCH_CHECK(!((m >> w) & 1), "dim ", w, " appears multiple times "
			    "in the list of dims");
		m |= 1ull << w;
	}
	return m;
}

std::vector<int64_t> reduced_shape(at::IntArrayRef sizes, uint64_t mask,
				   bool keepdim)
{
	std::vector<int64_t> r;
	for (size_t d = 0; d < sizes.size(); d++) {
		if ((mask >> d) & 1) {
			if (keepdim)
				r.push_back(1);
		} else {
			r.push_back(sizes[d]);
		}
	}
	return r;
}

// Strides of output @out (reduced shape) over the input's dims: 0 along
// the reduced ones.
void out_strides(const at::Tensor &out, uint64_t mask, int64_t ndim,
		 bool keepdim, int64_t *st)
{
	int64_t od = 0;
	for (int64_t d = 0; d < ndim; d++) {
		bool r = (mask >> d) & 1;
		if (r) {
			st[d] = 0;
			if (keepdim)
				od++;
		} else {
			st[d] = out.size(od) == 1 ? 0 : out.stride(od);
			od++;
		}
	}
}

at::Tensor new_out(const at::Tensor &x, at::IntArrayRef shape,
		   at::ScalarType dt)
{
	return at::empty(shape, x.options().dtype(dt));
}

// Run reduction @kind of @x over @mask into @out0 (and @out1), which have
// the reduced shape.  False when the card cannot (dtype, layout, refusal):
// the caller falls back.
bool reduce(RKind kind, const at::Tensor &x0, uint64_t mask, bool keepdim,
	    const at::Tensor &out0, const at::Tensor &out1, uint32_t acc,
	    double s0 = 0.0, double s1 = 0.0)
{
	if (x0.device().type() != c10::DeviceType::PrivateUse1 ||
	    kdtype(x0.scalar_type()) == 0 || kdtype(out0.scalar_type()) == 0 ||
	    (out1.defined() && kdtype(out1.scalar_type()) == 0) ||
	    out0.device() != x0.device() ||
	    (out1.defined() && out1.device() != x0.device()))
		return false;
	c10::DeviceGuard g(x0.device());
	int card = x0.device().index();
	check_overlap(out0, {x0});
	if (out1.defined())
		check_overlap(out1, {x0, out0});
	if (out0.numel() == 0)
		return true;
	at::Tensor x = x0;
	int64_t nd = x.dim();
	Space s;
	for (int attempt = 0; attempt < 2; attempt++) {
		s.init(x.sizes(), mask);
		s.add(x);
		int64_t st[kMaxDims];
		out_strides(out0, mask, nd, keepdim, st);
		s.add_strides(st);
		if (out1.defined()) {
			out_strides(out1, mask, nd, keepdim, st);
			s.add_strides(st);
		}
		if (s.collapse(true))
			break;
		if (attempt || x.is_contiguous())
			return false;
		x = x.contiguous();
	}
	RedBuild rb;
	rb.kind = kind;
	rb.acc = acc;
	rb.dts[0] = kdtype(x.scalar_type());
	rb.dts[1] = kdtype(out0.scalar_type());
	rb.dts[2] = out1.defined() ? kdtype(out1.scalar_type()) : 0;
	rb.nout = out1.defined() ? 2 : 1;
	rb.np = s.np;
	rb.nr = s.nr;
	Key key;
	key.op = kOpReduce + kind;
	key.ct = static_cast<uint8_t>(acc);
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = static_cast<uint8_t>(s.nr);
	key.nops = static_cast<uint8_t>(rb.nout + 1);
	for (int i = 0; i < 3; i++)
		key.dt[i] = static_cast<uint8_t>(rb.dts[i]);
	const Prog *prog = program(card, key, build_red, &rb);
	if (prog->err < 0)
		return false;
	Launch L;
	unsigned int np = static_cast<unsigned int>(s.np);
	L.bind(0, x, s, 0, 0);
	L.bind(1, out0, s, 1, np + s.nr);
	unsigned int n = np + s.nr + np;
	if (out1.defined()) {
		L.bind(2, out1, s, 2, n);
		n += np;
	}
	L.params[n++] = f32_param(s0);
	L.params[n++] = f32_param(s1);
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(rb.nout + 1), n);
	return true;
}

int64_t rcount(const at::Tensor &x, uint64_t mask)
{
	int64_t n = 1;
	for (int64_t d = 0; d < x.dim(); d++)
		if ((mask >> d) & 1)
			n *= x.size(d);
	return n;
}

bool on_card(const at::Tensor &t)
{
	return t.device().type() == c10::DeviceType::PrivateUse1 &&
	       kdtype(t.scalar_type()) != 0;
}

// ---- sum, prod, mean ----------------------------------------------------------

at::ScalarType sum_dtype(const at::Tensor &x, std::optional<at::ScalarType> dt)
{
	if (dt.has_value())
		return *dt;
	return at::isIntegralType(x.scalar_type(), true) ? at::kLong :
	       x.scalar_type();
}

at::Tensor &k_sum_out(const at::Tensor &self, at::OptionalIntArrayRef dim,
		      bool keepdim, std::optional<at::ScalarType> dtype,
		      at::Tensor &out)
{
	uint64_t m = dim_mask(dim, self.dim());
	at::native::resize_output(out, reduced_shape(self.sizes(), m, keepdim));
	at::ScalarType od = out.scalar_type();
	if (!on_card(self) || !reduce(RK_SUM, self, m, keepdim, out, at::Tensor(),
				      ctype(od)))
		return SPYRE_FALLBACK2(sum, IntList_out, self, dim, keepdim, dtype,
				       out);
	count_native("aten::sum.IntList_out");
	return out;
}

at::Tensor k_sum(const at::Tensor &self, at::OptionalIntArrayRef dim,
		 bool keepdim, std::optional<at::ScalarType> dtype)
{
	uint64_t m = dim_mask(dim, self.dim());
	at::ScalarType od = sum_dtype(self, dtype);
	if (!on_card(self) || kdtype(od) == 0)
		return SPYRE_FALLBACK2(sum, dim_IntList, self, dim, keepdim, dtype);
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim), od);
	if (!reduce(RK_SUM, self, m, keepdim, out, at::Tensor(), ctype(od)))
		return SPYRE_FALLBACK2(sum, dim_IntList, self, dim, keepdim, dtype);
	count_native("aten::sum.dim_IntList");
	return out;
}

// sum with NaN as 0 (integers: sum)
at::Tensor k_nansum(const at::Tensor &self, at::OptionalIntArrayRef dim,
		    bool keepdim, std::optional<at::ScalarType> dtype)
{
	uint64_t m = dim_mask(dim, self.dim());
	at::ScalarType od = sum_dtype(self, dtype);
	if (!on_card(self) || kdtype(od) == 0)
		return SPYRE_FALLBACK(nansum, self, dim, keepdim, dtype);
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim), od);
	if (!reduce(RK_NANSUM, self, m, keepdim, out, at::Tensor(), ctype(od)))
		return SPYRE_FALLBACK(nansum, self, dim, keepdim, dtype);
	count_native("aten::nansum");
	return out;
}

at::Tensor &k_nansum_out(const at::Tensor &self, at::OptionalIntArrayRef dim,
			 bool keepdim, std::optional<at::ScalarType> dtype,
			 at::Tensor &out)
{
	uint64_t m = dim_mask(dim, self.dim());
	if (!on_card(self) || !on_card(out) || out.device() != self.device() ||
	    (dtype.has_value() && *dtype != out.scalar_type()))
		return SPYRE_FALLBACK2(nansum, out, self, dim, keepdim, dtype, out);
	at::native::resize_output(out, reduced_shape(self.sizes(), m, keepdim));
	if (!reduce(RK_NANSUM, self, m, keepdim, out, at::Tensor(),
		    ctype(out.scalar_type())))
		return SPYRE_FALLBACK2(nansum, out, self, dim, keepdim, dtype, out);
	count_native("aten::nansum.out");
	return out;
}

at::Tensor k_prod(const at::Tensor &self, std::optional<at::ScalarType> dtype)
{
	at::ScalarType od = sum_dtype(self, dtype);
	uint64_t m = dim_mask(std::nullopt, self.dim());
	if (!on_card(self) || kdtype(od) == 0)
		return SPYRE_FALLBACK(prod, self, dtype);
	at::Tensor out = new_out(self, {}, od);
	if (!reduce(RK_PROD, self, m, false, out, at::Tensor(), ctype(od)))
		return SPYRE_FALLBACK(prod, self, dtype);
	count_native("aten::prod");
	return out;
}

at::Tensor k_prod_dim(const at::Tensor &self, int64_t dim, bool keepdim,
		      std::optional<at::ScalarType> dtype)
{
	at::ScalarType od = sum_dtype(self, dtype);
	int64_t d = dim;
	uint64_t m = dim_mask(at::IntArrayRef(d), self.dim());
	if (!on_card(self) || kdtype(od) == 0)
		return SPYRE_FALLBACK2(prod, dim_int, self, dim, keepdim, dtype);
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim), od);
	if (!reduce(RK_PROD, self, m, keepdim, out, at::Tensor(), ctype(od)))
		return SPYRE_FALLBACK2(prod, dim_int, self, dim, keepdim, dtype);
	count_native("aten::prod.dim_int");
	return out;
}

at::Tensor &k_mean_out(const at::Tensor &self, at::OptionalIntArrayRef dim,
		       bool keepdim, std::optional<at::ScalarType> dtype,
		       at::Tensor &out)
{
	uint64_t m = dim_mask(dim, self.dim());
	at::ScalarType od = dtype.value_or(self.scalar_type());
	if (!on_card(self) || !at::isFloatingType(od))
		return SPYRE_FALLBACK2(mean, out, self, dim, keepdim, dtype, out);
	at::native::resize_output(out, reduced_shape(self.sizes(), m, keepdim));
	if (!reduce(RK_MEAN, self, m, keepdim, out, at::Tensor(),
		    SPYRE_KTYPE_F32, static_cast<double>(rcount(self, m))))
		return SPYRE_FALLBACK2(mean, out, self, dim, keepdim, dtype, out);
	count_native("aten::mean.out");
	return out;
}

at::Tensor k_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
		  bool keepdim, std::optional<at::ScalarType> dtype)
{
	uint64_t m = dim_mask(dim, self.dim());
	at::ScalarType od = dtype.value_or(self.scalar_type());
	if (!on_card(self) || !at::isFloatingType(od) || kdtype(od) == 0)
		return SPYRE_FALLBACK2(mean, dim, self, dim, keepdim, dtype);
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim), od);
	if (!reduce(RK_MEAN, self, m, keepdim, out, at::Tensor(), SPYRE_KTYPE_F32,
		    static_cast<double>(rcount(self, m))))
		return SPYRE_FALLBACK2(mean, dim, self, dim, keepdim, dtype);
	count_native("aten::mean.dim");
	return out;
}

// ---- max and min --------------------------------------------------------------

at::Tensor k_amax(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	uint64_t m = dim_mask(dim, self.dim());
	if (!on_card(self) || (self.numel() == 0 && m))
		return SPYRE_FALLBACK(amax, self, dim, keepdim);
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim),
				 self.scalar_type());
	if (!reduce(RK_MAX, self, m, keepdim, out, at::Tensor(),
		    ctype(self.scalar_type())))
		return SPYRE_FALLBACK(amax, self, dim, keepdim);
	count_native("aten::amax");
	return out;
}

at::Tensor k_amin(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	uint64_t m = dim_mask(dim, self.dim());
	if (!on_card(self) || (self.numel() == 0 && m))
		return SPYRE_FALLBACK(amin, self, dim, keepdim);
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim),
				 self.scalar_type());
	if (!reduce(RK_MIN, self, m, keepdim, out, at::Tensor(),
		    ctype(self.scalar_type())))
		return SPYRE_FALLBACK(amin, self, dim, keepdim);
	count_native("aten::amin");
	return out;
}

at::Tensor &k_amax_out(const at::Tensor &self, at::IntArrayRef dim,
		       bool keepdim, at::Tensor &out)
{
	uint64_t m = dim_mask(dim, self.dim());
	if (!on_card(self) || (self.numel() == 0 && m))
		return SPYRE_FALLBACK2(amax, out, self, dim, keepdim, out);
	at::native::resize_output(out, reduced_shape(self.sizes(), m, keepdim));
	if (!reduce(RK_MAX, self, m, keepdim, out, at::Tensor(),
		    ctype(self.scalar_type())))
		return SPYRE_FALLBACK2(amax, out, self, dim, keepdim, out);
	count_native("aten::amax.out");
	return out;
}

at::Tensor &k_amin_out(const at::Tensor &self, at::IntArrayRef dim,
		       bool keepdim, at::Tensor &out)
{
	uint64_t m = dim_mask(dim, self.dim());
	if (!on_card(self) || (self.numel() == 0 && m))
		return SPYRE_FALLBACK2(amin, out, self, dim, keepdim, out);
	at::native::resize_output(out, reduced_shape(self.sizes(), m, keepdim));
	if (!reduce(RK_MIN, self, m, keepdim, out, at::Tensor(),
		    ctype(self.scalar_type())))
		return SPYRE_FALLBACK2(amin, out, self, dim, keepdim, out);
	count_native("aten::amin.out");
	return out;
}

at::Tensor k_max(const at::Tensor &self)
{
	if (!on_card(self) || self.numel() == 0)
		return SPYRE_FALLBACK(max, self);
	at::Tensor out = new_out(self, {}, self.scalar_type());
	if (!reduce(RK_MAX, self, dim_mask(std::nullopt, self.dim()), false, out,
		    at::Tensor(), ctype(self.scalar_type())))
		return SPYRE_FALLBACK(max, self);
	count_native("aten::max");
	return out;
}

at::Tensor k_min(const at::Tensor &self)
{
	if (!on_card(self) || self.numel() == 0)
		return SPYRE_FALLBACK(min, self);
	at::Tensor out = new_out(self, {}, self.scalar_type());
	if (!reduce(RK_MIN, self, dim_mask(std::nullopt, self.dim()), false, out,
		    at::Tensor(), ctype(self.scalar_type())))
		return SPYRE_FALLBACK(min, self);
	count_native("aten::min");
	return out;
}

std::tuple<at::Tensor, at::Tensor> k_max_dim(const at::Tensor &self,
					     int64_t dim, bool keepdim)
{
	int64_t d = dim;
	uint64_t m = dim_mask(at::IntArrayRef(d), self.dim());
	if (!on_card(self) || self.numel() == 0)
		return SPYRE_FALLBACK2(max, dim, self, dim, keepdim);
	auto shape = reduced_shape(self.sizes(), m, keepdim);
	at::Tensor v = new_out(self, shape, self.scalar_type());
	at::Tensor i = new_out(self, shape, at::kLong);
	if (!reduce(RK_MAXI, self, m, keepdim, v, i, ctype(self.scalar_type())))
		return SPYRE_FALLBACK2(max, dim, self, dim, keepdim);
	count_native("aten::max.dim");
	return {v, i};
}

// (amin, amax) of @self over @dim (None: every dim) in one kernel; an
// empty @self raises the CPU's error (no identity)
std::tuple<at::Tensor, at::Tensor> k_aminmax(const at::Tensor &self,
					     std::optional<int64_t> dim,
					     bool keepdim)
{
	uint64_t m = dim.has_value() ?
		dim_mask(at::IntArrayRef(*dim), self.dim()) :
		dim_mask(std::nullopt, self.dim());
	if (!on_card(self) || self.numel() == 0)
		return SPYRE_FALLBACK(aminmax, self, dim, keepdim);
	auto shape = reduced_shape(self.sizes(), m, keepdim);
	at::Tensor lo = new_out(self, shape, self.scalar_type());
	at::Tensor hi = new_out(self, shape, self.scalar_type());
	if (!reduce(RK_AMINMAX, self, m, keepdim, lo, hi,
		    ctype(self.scalar_type())))
		return SPYRE_FALLBACK(aminmax, self, dim, keepdim);
	count_native("aten::aminmax");
	return {lo, hi};
}

std::tuple<at::Tensor &, at::Tensor &>
k_aminmax_out(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim,
	      at::Tensor &min, at::Tensor &max)
{
	uint64_t m = dim.has_value() ?
		dim_mask(at::IntArrayRef(*dim), self.dim()) :
		dim_mask(std::nullopt, self.dim());
	bool ok = on_card(self) && self.numel() > 0;
	for (const at::Tensor *t : {&min, &max})
		ok = ok && t->device() == self.device() &&
		     t->scalar_type() == self.scalar_type();
	if (ok) {
		auto shape = reduced_shape(self.sizes(), m, keepdim);
		at::native::resize_output(min, shape);
		at::native::resize_output(max, shape);
		ok = reduce(RK_AMINMAX, self, m, keepdim, min, max,
			    ctype(self.scalar_type()));
	}
	if (!ok)
		return SPYRE_FALLBACK2(aminmax, out, self, dim, keepdim, min, max);
	count_native("aten::aminmax.out");
	return {min, max};
}

std::tuple<at::Tensor, at::Tensor> k_min_dim(const at::Tensor &self,
					     int64_t dim, bool keepdim)
{
	int64_t d = dim;
	uint64_t m = dim_mask(at::IntArrayRef(d), self.dim());
	if (!on_card(self) || self.numel() == 0)
		return SPYRE_FALLBACK2(min, dim, self, dim, keepdim);
	auto shape = reduced_shape(self.sizes(), m, keepdim);
	at::Tensor v = new_out(self, shape, self.scalar_type());
	at::Tensor i = new_out(self, shape, at::kLong);
	if (!reduce(RK_MINI, self, m, keepdim, v, i, ctype(self.scalar_type())))
		return SPYRE_FALLBACK2(min, dim, self, dim, keepdim);
	count_native("aten::min.dim");
	return {v, i};
}

at::Tensor arg_red(RKind kind, const at::Tensor &self, std::optional<int64_t> dim,
		   bool keepdim)
{
	uint64_t m;
	std::vector<int64_t> shape;
	if (dim.has_value()) {
		int64_t d = *dim;
		m = dim_mask(at::IntArrayRef(d), self.dim());
		shape = reduced_shape(self.sizes(), m, keepdim);
	} else {
		m = dim_mask(std::nullopt, self.dim());
		shape = reduced_shape(self.sizes(), m, keepdim);
	}
	at::Tensor out = new_out(self, shape, at::kLong);
	if (!reduce(kind, self, m, keepdim, out, at::Tensor(),
		    ctype(self.scalar_type())))
		return at::Tensor();
	return out;
}

at::Tensor k_argmax(const at::Tensor &self, std::optional<int64_t> dim,
		    bool keepdim)
{
	if (on_card(self) && self.numel() > 0) {
		at::Tensor r = arg_red(RK_ARGMAX, self, dim, keepdim);
		if (r.defined()) {
			count_native("aten::argmax");
			return r;
		}
	}
	return SPYRE_FALLBACK(argmax, self, dim, keepdim);
}

at::Tensor k_argmin(const at::Tensor &self, std::optional<int64_t> dim,
		    bool keepdim)
{
	if (on_card(self) && self.numel() > 0) {
		at::Tensor r = arg_red(RK_ARGMIN, self, dim, keepdim);
		if (r.defined()) {
			count_native("aten::argmin");
			return r;
		}
	}
	return SPYRE_FALLBACK(argmin, self, dim, keepdim);
}

// ---- var, std -------------------------------------------------------------------

double var_div(const at::Tensor &x, uint64_t m,
	       const std::optional<at::Scalar> &correction)
{
	double c = correction.has_value() ? correction->toDouble() : 1.0;
	return std::max(0.0, static_cast<double>(rcount(x, m)) - c);
}

bool var_ok(const at::Tensor &x)
{
	return on_card(x) && at::isFloatingType(x.scalar_type());
}

at::Tensor var_std(RKind kind, const at::Tensor &self,
		   at::OptionalIntArrayRef dim,
		   const std::optional<at::Scalar> &correction, bool keepdim)
{
	uint64_t m = dim_mask(dim, self.dim());
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim),
				 self.scalar_type());
	if (!reduce(kind, self, m, keepdim, out, at::Tensor(), SPYRE_KTYPE_F32,
		    var_div(self, m, correction)))
		return at::Tensor();
	return out;
}

at::Tensor k_var(const at::Tensor &self, at::OptionalIntArrayRef dim,
		 const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (var_ok(self)) {
		at::Tensor r = var_std(RK_VAR, self, dim, correction, keepdim);
		if (r.defined()) {
			count_native("aten::var.correction");
			return r;
		}
	}
	return SPYRE_FALLBACK2(var, correction, self, dim, correction, keepdim);
}

at::Tensor k_std(const at::Tensor &self, at::OptionalIntArrayRef dim,
		 const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (var_ok(self)) {
		at::Tensor r = var_std(RK_STD, self, dim, correction, keepdim);
		if (r.defined()) {
			count_native("aten::std.correction");
			return r;
		}
	}
	return SPYRE_FALLBACK2(std, correction, self, dim, correction, keepdim);
}

std::tuple<at::Tensor, at::Tensor>
var_std_mean(RKind kind, const at::Tensor &self, at::OptionalIntArrayRef dim,
	     const std::optional<at::Scalar> &correction, bool keepdim)
{
	uint64_t m = dim_mask(dim, self.dim());
	auto shape = reduced_shape(self.sizes(), m, keepdim);
	at::Tensor a = new_out(self, shape, self.scalar_type());
	at::Tensor b = new_out(self, shape, self.scalar_type());
	if (!reduce(kind, self, m, keepdim, a, b, SPYRE_KTYPE_F32,
		    var_div(self, m, correction)))
		return {};
	return {a, b};
}

std::tuple<at::Tensor, at::Tensor>
k_var_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
	   const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (var_ok(self)) {
		auto r = var_std_mean(RK_VARMEAN, self, dim, correction, keepdim);
		if (std::get<0>(r).defined()) {
			count_native("aten::var_mean.correction");
			return r;
		}
	}
	return SPYRE_FALLBACK2(var_mean, correction, self, dim, correction,
			       keepdim);
}

std::tuple<at::Tensor, at::Tensor>
k_std_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
	   const std::optional<at::Scalar> &correction, bool keepdim)
{
	if (var_ok(self)) {
		auto r = var_std_mean(RK_STDMEAN, self, dim, correction, keepdim);
		if (std::get<0>(r).defined()) {
			count_native("aten::std_mean.correction");
			return r;
		}
	}
	return SPYRE_FALLBACK2(std_mean, correction, self, dim, correction,
			       keepdim);
}

// ---- norms, logsumexp -------------------------------------------------------------

// The vector norm of order @ord (none: 2) of @self over @dim (none or
// empty: every dim) in dtype @dtype (none: self's) into @out, resized to
// the reduced shape, or into a new tensor when @out is undefined.  False,
// @out untouched, when the card does not take it (a self or dtype not
// floating, a dtype narrower than self's, a complex order, @out of
// another device or dtype or sharing memory with self, an empty
// reduction of an infinite or negative order): the caller falls back,
// for the CPU's result or error.
bool vector_norm(const at::Tensor &self, const std::optional<at::Scalar> &ord,
		 at::OptionalIntArrayRef dim, bool keepdim,
		 std::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::ScalarType od = dtype.value_or(self.scalar_type());
	if (!on_card(self) || !at::isFloatingType(self.scalar_type()) ||
	    !at::isFloatingType(od) || !kdtype(od) ||
	    at::promoteTypes(self.scalar_type(), od) != od ||
	    (ord.has_value() && ord->isComplex()) ||
	    (out.defined() &&
	     (out.device() != self.device() || out.scalar_type() != od ||
	      out.storage().is_alias_of(self.storage()))))
		return false;
	uint64_t m = dim_mask(dim, self.dim());
	double p = ord.value_or(2).toDouble();
	RKind kind;
	if (p == 2.0)
		kind = RK_NORM2;
	else if (p == 1.0)
		kind = RK_NORM1;
	else if (p == 0.0)
		kind = RK_NORM0;
	else if (std::isinf(p))
		kind = p > 0 ? RK_NORMINF : RK_NORMNINF;
	else
		kind = RK_NORMP;
	if ((kind == RK_NORMINF || kind == RK_NORMNINF || p < 0) &&
	    rcount(self, m) == 0)
		return false;	// PyTorch raises
	auto shape = reduced_shape(self.sizes(), m, keepdim);
	if (out.defined())
		at::native::resize_output(out, shape);
	else
		out = new_out(self, shape, od);
	return reduce(kind, self, m, keepdim, out, at::Tensor(), SPYRE_KTYPE_F32,
		      p, 1.0 / p);
}

at::Tensor k_vector_norm(const at::Tensor &self, const at::Scalar &ord,
			 at::OptionalIntArrayRef dim, bool keepdim,
			 std::optional<at::ScalarType> dtype)
{
	at::Tensor out;
	if (!vector_norm(self, ord, dim, keepdim, dtype, out))
		return SPYRE_FALLBACK(linalg_vector_norm, self, ord, dim, keepdim,
				      dtype);
	count_native("aten::linalg_vector_norm");
	return out;
}

at::Tensor &k_vector_norm_out(const at::Tensor &self, const at::Scalar &ord,
			      at::OptionalIntArrayRef dim, bool keepdim,
			      std::optional<at::ScalarType> dtype,
			      at::Tensor &out)
{
	if (!vector_norm(self, ord, dim, keepdim, dtype, out))
		return SPYRE_FALLBACK2(linalg_vector_norm, out, self, ord, dim,
				       keepdim, dtype, out);
	count_native("aten::linalg_vector_norm.out");
	return out;
}

// torch.norm's overloads with a number p: vector_norm() over @dim (empty:
// every dim).

at::Tensor k_norm_dim(const at::Tensor &self, const std::optional<at::Scalar> &p,
		      at::IntArrayRef dim, bool keepdim)
{
	at::Tensor r;
	if (!vector_norm(self, p, dim, keepdim, std::nullopt, r))
		return SPYRE_FALLBACK2(norm, ScalarOpt_dim, self, p, dim, keepdim);
	count_native("aten::norm.ScalarOpt_dim");
	return r;
}

at::Tensor k_norm_dim_dtype(const at::Tensor &self,
			    const std::optional<at::Scalar> &p,
			    at::IntArrayRef dim, bool keepdim,
			    at::ScalarType dtype)
{
	at::Tensor r;
	if (!vector_norm(self, p, dim, keepdim, dtype, r))
		return SPYRE_FALLBACK2(norm, ScalarOpt_dim_dtype, self, p, dim,
				       keepdim, dtype);
	count_native("aten::norm.ScalarOpt_dim_dtype");
	return r;
}

at::Tensor k_norm_scalar(const at::Tensor &self, const at::Scalar &p)
{
	at::Tensor r;
	if (!vector_norm(self, p, {}, false, std::nullopt, r))
		return SPYRE_FALLBACK2(norm, Scalar, self, p);
	count_native("aten::norm.Scalar");
	return r;
}

at::Tensor k_norm_dtype(const at::Tensor &self,
			const std::optional<at::Scalar> &p,
			at::ScalarType dtype)
{
	at::Tensor r;
	if (!vector_norm(self, p, {}, false, dtype, r))
		return SPYRE_FALLBACK2(norm, ScalarOpt_dtype, self, p, dtype);
	count_native("aten::norm.ScalarOpt_dtype");
	return r;
}

at::Tensor &k_norm_out(const at::Tensor &self, const std::optional<at::Scalar> &p,
		       at::IntArrayRef dim, bool keepdim, at::Tensor &out)
{
	if (!vector_norm(self, p, dim, keepdim, std::nullopt, out))
		return SPYRE_FALLBACK2(norm, out, self, p, dim, keepdim, out);
	count_native("aten::norm.out");
	return out;
}

at::Tensor &k_norm_dtype_out(const at::Tensor &self,
			     const std::optional<at::Scalar> &p,
			     at::IntArrayRef dim, bool keepdim,
			     at::ScalarType dtype, at::Tensor &out)
{
	if (!vector_norm(self, p, dim, keepdim, dtype, out))
		return SPYRE_FALLBACK2(norm, dtype_out, self, p, dim, keepdim,
				       dtype, out);
	count_native("aten::norm.dtype_out");
	return out;
}

at::Tensor k_logsumexp(const at::Tensor &self, at::IntArrayRef dim,
		       bool keepdim)
{
	if (on_card(self)) {
		// integers and bool: the default float, as PyTorch
		at::ScalarType od = at::isFloatingType(self.scalar_type()) ?
			self.scalar_type() :
			c10::typeMetaToScalarType(c10::get_default_dtype());
		uint64_t m = dim_mask(dim, self.dim());
		at::Tensor out = new_out(self, reduced_shape(self.sizes(), m,
							     keepdim), od);
		if (reduce(RK_LSE, self, m, keepdim, out, at::Tensor(),
			   SPYRE_KTYPE_F32)) {
			count_native("aten::logsumexp");
			return out;
		}
	}
	return SPYRE_FALLBACK(logsumexp, self, dim, keepdim);
}

// ---- any, all, count_nonzero ---------------------------------------------------

at::ScalarType anyall_dtype(const at::Tensor &x)
{
	return x.scalar_type() == at::kByte ? at::kByte : at::kBool;
}

at::Tensor anyall(RKind kind, const at::Tensor &self, uint64_t m, bool keepdim)
{
	at::Tensor out = new_out(self, reduced_shape(self.sizes(), m, keepdim),
				 anyall_dtype(self));
	if (!reduce(kind, self, m, keepdim, out, at::Tensor(), SPYRE_KTYPE_BOOL))
		return at::Tensor();
	return out;
}

#define ANYALL(name, KIND)                                                     \
	at::Tensor k_##name(const at::Tensor &self)                            \
	{                                                                      \
		if (on_card(self)) {                                           \
			at::Tensor r = anyall(KIND, self,                      \
				dim_mask(std::nullopt, self.dim()), false);    \
			if (r.defined()) {                                     \
				count_native("aten::" #name);                  \
				return r;                                      \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK(name, self);                             \
	}                                                                      \
	at::Tensor k_##name##_dim(const at::Tensor &self, int64_t dim,         \
				  bool keepdim)                                \
	{                                                                      \
		if (on_card(self)) {                                           \
			int64_t d = dim;                                       \
			at::Tensor r = anyall(KIND, self,                      \
				dim_mask(at::IntArrayRef(d), self.dim()),      \
				keepdim);                                      \
			if (r.defined()) {                                     \
				count_native("aten::" #name ".dim");           \
				return r;                                      \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK2(name, dim, self, dim, keepdim);         \
	}                                                                      \
	at::Tensor k_##name##_dims(const at::Tensor &self,                     \
				   at::OptionalIntArrayRef dim, bool keepdim)  \
	{                                                                      \
		if (on_card(self) && !(dim.has_value() && dim->empty())) {     \
			at::Tensor r = anyall(KIND, self,                      \
				dim_mask(dim, self.dim()), keepdim);           \
			if (r.defined()) {                                     \
				count_native("aten::" #name ".dims");          \
				return r;                                      \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK2(name, dims, self, dim, keepdim);        \
	}

ANYALL(any, RK_ANY)
ANYALL(all, RK_ALL)

at::Tensor k_count_nonzero(const at::Tensor &self, at::IntArrayRef dim)
{
	if (on_card(self)) {
		uint64_t m = dim_mask(dim, self.dim());
		at::Tensor out = new_out(self, reduced_shape(self.sizes(), m,
							     false), at::kLong);
		if (reduce(RK_CNZ, self, m, false, out, at::Tensor(),
			   SPYRE_KTYPE_I64)) {
			count_native("aten::count_nonzero.dim_IntList");
			return out;
		}
	}
	return SPYRE_FALLBACK2(count_nonzero, dim_IntList, self, dim);
}

// ---- softmax family ------------------------------------------------------------

enum SKind : uint8_t { SM_SOFTMAX = 1, SM_LOGSOFTMAX, SM_SOFTMAX_BW, SM_LOGSOFTMAX_BW };

struct SmBuild {
	SKind kind;
	uint32_t dts[3];	// inputs (1 or 2), out
	int nin, np;
	uint32_t sum_dt;	// SM_SOFTMAX_BW: round the sum through this
				// dtype (0: keep it in f32)
};

// One reduction dim (the softmax dim); params: each operand's strides
// (np + 1)
int build_sm(struct spyre_kernel **kp, const void *ctx)
{
	const SmBuild &p = *static_cast<const SmBuild *>(ctx);
	unsigned int w = static_cast<unsigned int>(p.np + 1);
	int no = p.nin + 1;
	int rc = spyre_kernel_create(p.dts, no, w * no, p.np, 1, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32;
	int base[3];
	for (int i = 0; i < no; i++)
		base[i] = point_offset(b, p.np, i * w);
	auto ld = [&](int i) {
		int off = rindex_offset(b, base[i], p.np, 1, i * w);
		return b.cvt(spyre_kernel_load(b.k, i, off, NONE, NONE), F);
	};
	auto st = [&](int v) {
		int off = rindex_offset(b, base[p.nin], p.np, 1, p.nin * w);
		spyre_kernel_store(b.k, p.nin, off, b.cvt(v, vtype(p.dts[p.nin])),
				   NONE, 0);
	};
	auto red = [&](uint32_t kind, int val) {
		return spyre_kernel_reduce(b.k, kind, val, NONE, NONE, NONE);
	};
	if (p.kind == SM_SOFTMAX || p.kind == SM_LOGSOFTMAX) {
		spyre_kernel_pass(b.k);
		int m = red(SPYRE_KRED_MAX, ld(0));
		spyre_kernel_endpass(b.k);
		spyre_kernel_pass(b.k);
		int s = red(SPYRE_KRED_SUM, b.un(SPYRE_KOP_EXP, b.sub(ld(0), m)));
		spyre_kernel_endpass(b.k);
		if (p.kind == SM_SOFTMAX) {
			int inv = b.un(SPYRE_KOP_RECIP, s);
			spyre_kernel_pass(b.k);
			st(b.mul(b.un(SPYRE_KOP_EXP, b.sub(ld(0), m)), inv));
		} else {
			int lse = b.un(SPYRE_KOP_LOG, s);
			spyre_kernel_pass(b.k);
			st(b.sub(b.sub(ld(0), m), lse));
		}
		spyre_kernel_endpass(b.k);
	} else if (p.kind == SM_SOFTMAX_BW) {
		// inputs grad, output: y * (g - sum(g * y))
		spyre_kernel_pass(b.k);
		int s = red(SPYRE_KRED_SUM, b.mul(ld(0), ld(1)));
		spyre_kernel_endpass(b.k);
		if (p.sum_dt)
			s = spyre_kernel_cvt(b.k, F, s, p.sum_dt, 0);
		spyre_kernel_pass(b.k);
		st(b.mul(ld(1), b.sub(ld(0), s)));
		spyre_kernel_endpass(b.k);
	} else {
		// g - exp(y) * sum(g)
		spyre_kernel_pass(b.k);
		int s = red(SPYRE_KRED_SUM, ld(0));
		spyre_kernel_endpass(b.k);
		spyre_kernel_pass(b.k);
		st(b.sub(ld(0), b.mul(b.un(SPYRE_KOP_EXP, ld(1)), s)));
		spyre_kernel_endpass(b.k);
	}
	return spyre_kernel_error(b.k);
}

bool softmax_run(SKind kind, const at::Tensor &a, const at::Tensor &y,
		 int64_t dim, const at::Tensor &out)
{
	if (!on_card(a) || !at::isFloatingType(a.scalar_type()) ||
	    (y.defined() && (!on_card(y) || y.device() != a.device())) ||
	    !on_card(out) || out.device() != a.device())
		return false;
	c10::DeviceGuard g(a.device());
	int card = a.device().index();
	if (out.numel() == 0)
		return true;
	int64_t nd = a.dim();
	int64_t d = at::maybe_wrap_dim(dim, nd);
	Space s;
	s.init(a.sizes(), nd ? 1ull << d : 0);
	s.add(a);
	if (y.defined())
		s.add(y);
	s.add(out);
	if (!s.collapse(true))
		return false;
	SmBuild sb;
	std::memset(static_cast<void *>(&sb), 0, sizeof(sb));
	sb.kind = kind;
	sb.nin = y.defined() ? 2 : 1;
	sb.np = s.np;
	sb.dts[0] = kdtype(a.scalar_type());
	sb.dts[1] = y.defined() ? kdtype(y.scalar_type()) : kdtype(out.scalar_type());
	sb.dts[2] = y.defined() ? kdtype(out.scalar_type()) : 0;
	// the CPU's softmax backward over the innermost dim (nothing after
	// it) rounds sum(g * y) to a half type before y * (g - sum); over
	// another dim it keeps the sum in f32
	int64_t inner = 1;
	for (int64_t i = d + 1; i < nd; i++)
		inner *= a.size(i);
	at::ScalarType ot = out.scalar_type();
	if (kind == SM_SOFTMAX_BW && inner == 1 &&
	    (ot == at::kHalf || ot == at::kBFloat16))
		sb.sum_dt = kdtype(ot);
	Key key;
	key.op = kOpSoftmax + kind;
	key.variant = sb.sum_dt;
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = 1;
	for (int i = 0; i < 3; i++)
		key.dt[i] = static_cast<uint8_t>(sb.dts[i]);
	const Prog *prog = program(card, key, build_sm, &sb);
	if (prog->err < 0)
		return false;
	Launch L;
	unsigned int w = static_cast<unsigned int>(s.np + 1);
	int no = sb.nin + 1;
	for (int i = 0; i < no; i++)
		L.bind(i, i == 0 ? a : i == no - 1 ? out : y, s, i, i * w);
	L.sizes(s);
	run(card, prog, L, no, w * no);
	return true;
}

at::Tensor k_softmax(const at::Tensor &self, int64_t dim, bool half_to_float)
{
	if (!half_to_float) {
		at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
		if (softmax_run(SM_SOFTMAX, self, at::Tensor(), dim, out)) {
			count_native("aten::_softmax");
			return out;
		}
	}
	return SPYRE_FALLBACK(_softmax, self, dim, half_to_float);
}

at::Tensor k_log_softmax(const at::Tensor &self, int64_t dim,
			 bool half_to_float)
{
	if (!half_to_float) {
		at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
		if (softmax_run(SM_LOGSOFTMAX, self, at::Tensor(), dim, out)) {
			count_native("aten::_log_softmax");
			return out;
		}
	}
	return SPYRE_FALLBACK(_log_softmax, self, dim, half_to_float);
}

at::Tensor &k_softmax_out(const at::Tensor &self, int64_t dim,
			  bool half_to_float, at::Tensor &out)
{
	if (!half_to_float && out.scalar_type() == self.scalar_type()) {
		at::native::resize_output(out, self.sizes());
		check_overlap(out, {self});
		if (softmax_run(SM_SOFTMAX, unalias(self, out), at::Tensor(), dim,
				out)) {
			count_native("aten::_softmax.out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(_softmax, out, self, dim, half_to_float, out);
}

at::Tensor &k_log_softmax_out(const at::Tensor &self, int64_t dim,
			      bool half_to_float, at::Tensor &out)
{
	if (!half_to_float && out.scalar_type() == self.scalar_type()) {
		at::native::resize_output(out, self.sizes());
		check_overlap(out, {self});
		if (softmax_run(SM_LOGSOFTMAX, unalias(self, out), at::Tensor(),
				dim, out)) {
			count_native("aten::_log_softmax.out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(_log_softmax, out, self, dim, half_to_float, out);
}

at::Tensor k_softmax_bw(const at::Tensor &grad, const at::Tensor &output,
			int64_t dim, at::ScalarType input_dtype)
{
	if (kdtype(input_dtype) && grad.sizes() == output.sizes()) {
		at::Tensor out = at::empty(grad.sizes(),
					   grad.options().dtype(input_dtype));
		if (softmax_run(SM_SOFTMAX_BW, grad, output, dim, out)) {
			count_native("aten::_softmax_backward_data");
			return out;
		}
	}
	return SPYRE_FALLBACK(_softmax_backward_data, grad, output, dim,
			      input_dtype);
}

at::Tensor k_log_softmax_bw(const at::Tensor &grad, const at::Tensor &output,
			    int64_t dim, at::ScalarType input_dtype)
{
	if (kdtype(input_dtype) && grad.sizes() == output.sizes()) {
		at::Tensor out = at::empty(grad.sizes(),
					   grad.options().dtype(input_dtype));
		if (softmax_run(SM_LOGSOFTMAX_BW, grad, output, dim, out)) {
			count_native("aten::_log_softmax_backward_data");
			return out;
		}
	}
	return SPYRE_FALLBACK(_log_softmax_backward_data, grad, output, dim,
			      input_dtype);
}

// ---- integer matrix products ---------------------------------------------------

struct ImmBuild {
	uint32_t acc;		// I32 or I64
	uint32_t dts[4];	// a, b, [self], out
	bool has_self;
	int np, nr;
};

// out = [beta * self +] alpha * sum_k a * b over the reduction dim, in
// @acc (wrapping as the CPU's integer GEMM does).  Params: every
// operand's strides (np + nr each), then alpha and beta (@acc).
int build_imm(struct spyre_kernel **kp, const void *ctx)
{
	const ImmBuild &p = *static_cast<const ImmBuild *>(ctx);
	int no = 3 + p.has_self;
	unsigned int w = static_cast<unsigned int>(p.np + p.nr);
	unsigned int sp = w * static_cast<unsigned int>(no);
	int rc = spyre_kernel_create(p.dts, no, sp + 2, p.np, p.nr, kp);
	if (rc)
		return rc;
	B b{*kp};
	int base[4];
	for (int i = 0; i < no; i++)
		base[i] = point_offset(b, p.np, i * w);
	int alpha = b.param(p.acc, sp), beta = b.param(p.acc, sp + 1);
	spyre_kernel_pass(b.k);
	int va = spyre_kernel_load(b.k, 0, rindex_offset(b, base[0], p.np, p.nr,
							 0), NONE, NONE);
	int vb = spyre_kernel_load(b.k, 1, rindex_offset(b, base[1], p.np, p.nr,
							 w), NONE, NONE);
	int r = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM,
				    b.mul(b.cvt(va, p.acc), b.cvt(vb, p.acc)),
				    NONE, NONE, NONE);
	spyre_kernel_endpass(b.k);
	r = b.mul(r, alpha);
	if (p.has_self) {
		int v = spyre_kernel_load(b.k, 2, base[2], NONE, NONE);
		r = b.add(b.mul(b.cvt(v, p.acc), beta), r);
	}
	int o = no - 1;
	spyre_kernel_store(b.k, o, base[o], b.cvt(r, vtype(p.dts[o])), NONE, 0);
	return spyre_kernel_error(b.k);
}

} // namespace

bool int_matmul(const at::Tensor &out, const at::Tensor &a,
		const at::Tensor &b, const at::Tensor &self,
		const at::Scalar &beta, const at::Scalar &alpha)
{
	at::ScalarType dt = a.scalar_type();
	if (!at::isIntegralType(dt, false) || kdtype(dt) == 0 ||
	    b.scalar_type() != dt || out.scalar_type() != dt ||
	    (self.defined() && self.scalar_type() != dt) ||
	    alpha.isComplex() || beta.isComplex())
		return false;
	for (const at::Tensor *t : {&a, &b, &self})
		if (t->defined() && t->device() != out.device())
			return false;
	bool batched = a.dim() == 3;
	TORCH_INTERNAL_ASSERT(a.dim() == b.dim() && out.dim() == a.dim() &&
			      (a.dim() == 2 || batched));
	if (out.numel() == 0)
		return true;
	c10::DeviceGuard g(out.device());
	check_overlap(out, {a, b, self});
	int64_t nb = batched ? a.size(0) : 1;
	int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
	auto st = [](const at::Tensor &t, int64_t d) {
		return t.size(d) == 1 ? 0 : t.stride(d);
	};
	int64_t sa[4] = {batched ? st(a, 0) : 0, st(a, -2), 0, st(a, -1)};
	int64_t sb[4] = {batched ? st(b, 0) : 0, 0, st(b, -1), st(b, -2)};
	int64_t so[4] = {batched ? st(out, 0) : 0, st(out, -2), st(out, -1), 0};
	// alpha and beta truncated to integers, as the CPU kernel's
	// Scalar::to<scalar_t>() does (0.6 is 0)
	int64_t ibeta = beta.isFloatingPoint() ?
			static_cast<int64_t>(beta.toDouble()) : beta.toLong();
	bool has_self = self.defined() && ibeta != 0;
	at::Tensor sv;
	int64_t ss[4] = {0, 0, 0, 0};
	if (has_self) {
		sv = self.expand(out.sizes());
		ss[0] = batched ? st(sv, 0) : 0;
		ss[1] = st(sv, -2);
		ss[2] = st(sv, -1);
	}
	Space s;
	int64_t shape[4] = {nb, M, N, K};
	s.init(at::IntArrayRef(shape, 4), 1ull << 3);
	s.add_strides(sa);
	s.add_strides(sb);
	if (has_self)
		s.add_strides(ss);
	s.add_strides(so);
	if (!s.collapse(true))
		return false;
	std::vector<at::Tensor> ops{a, b};
	if (has_self)
		ops.push_back(sv);
	ops.push_back(out);
	ImmBuild ib;
	std::memset(&ib, 0, sizeof(ib));
	ib.acc = ctype(dt);
	ib.has_self = has_self;
	ib.np = s.np;
	ib.nr = s.nr;
	Key key;
	key.op = kOpIntMatmul;
	key.variant = has_self;
	key.ct = static_cast<uint8_t>(ib.acc);
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = static_cast<uint8_t>(s.nr);
	key.nops = static_cast<uint8_t>(ops.size());
	for (size_t i = 0; i < ops.size(); i++) {
		ib.dts[i] = kdtype(ops[i].scalar_type());
		key.dt[i] = static_cast<uint8_t>(ib.dts[i]);
	}
	int card = out.device().index();
	const Prog *prog = program(card, key, build_imm, &ib);
	if (prog->err < 0)
		return false;
	Launch L;
	unsigned int w = static_cast<unsigned int>(s.np + s.nr);
	for (size_t i = 0; i < ops.size(); i++) {
		L.bind(i, ops[i], s, static_cast<int>(i), i * w);
	}
	unsigned int sp = w * static_cast<unsigned int>(ops.size());
	L.params[sp] = scalar_param(alpha, ib.acc);
	L.params[sp + 1] = scalar_param(beta, ib.acc);
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(ops.size()), sp + 2);
	return true;
}

namespace {

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("sum.dim_IntList", TORCH_FN(k_sum));
	m.impl("sum.IntList_out", TORCH_FN(k_sum_out));
	m.impl("mean.dim", TORCH_FN(k_mean));
	m.impl("mean.out", TORCH_FN(k_mean_out));
	m.impl("nansum", TORCH_FN(k_nansum));
	m.impl("nansum.out", TORCH_FN(k_nansum_out));
	m.impl("aminmax", TORCH_FN(k_aminmax));
	m.impl("aminmax.out", TORCH_FN(k_aminmax_out));
	m.impl("prod", TORCH_FN(k_prod));
	m.impl("prod.dim_int", TORCH_FN(k_prod_dim));
	m.impl("amax", TORCH_FN(k_amax));
	m.impl("amax.out", TORCH_FN(k_amax_out));
	m.impl("amin", TORCH_FN(k_amin));
	m.impl("amin.out", TORCH_FN(k_amin_out));
	m.impl("max", TORCH_FN(k_max));
	m.impl("min", TORCH_FN(k_min));
	m.impl("max.dim", TORCH_FN(k_max_dim));
	m.impl("min.dim", TORCH_FN(k_min_dim));
	m.impl("argmax", TORCH_FN(k_argmax));
	m.impl("argmin", TORCH_FN(k_argmin));
	m.impl("var.correction", TORCH_FN(k_var));
	m.impl("std.correction", TORCH_FN(k_std));
	m.impl("var_mean.correction", TORCH_FN(k_var_mean));
	m.impl("std_mean.correction", TORCH_FN(k_std_mean));
	m.impl("linalg_vector_norm", TORCH_FN(k_vector_norm));
	m.impl("linalg_vector_norm.out", TORCH_FN(k_vector_norm_out));
	m.impl("norm.ScalarOpt_dim", TORCH_FN(k_norm_dim));
	m.impl("norm.ScalarOpt_dim_dtype", TORCH_FN(k_norm_dim_dtype));
	m.impl("norm.Scalar", TORCH_FN(k_norm_scalar));
	m.impl("norm.ScalarOpt_dtype", TORCH_FN(k_norm_dtype));
	m.impl("norm.out", TORCH_FN(k_norm_out));
	m.impl("norm.dtype_out", TORCH_FN(k_norm_dtype_out));
	m.impl("logsumexp", TORCH_FN(k_logsumexp));
	m.impl("any", TORCH_FN(k_any));
	m.impl("any.dim", TORCH_FN(k_any_dim));
	m.impl("any.dims", TORCH_FN(k_any_dims));
	m.impl("all", TORCH_FN(k_all));
	m.impl("all.dim", TORCH_FN(k_all_dim));
	m.impl("all.dims", TORCH_FN(k_all_dims));
	m.impl("count_nonzero.dim_IntList", TORCH_FN(k_count_nonzero));
	m.impl("_softmax", TORCH_FN(k_softmax));
	m.impl("_softmax.out", TORCH_FN(k_softmax_out));
	m.impl("_log_softmax", TORCH_FN(k_log_softmax));
	m.impl("_log_softmax.out", TORCH_FN(k_log_softmax_out));
	m.impl("_softmax_backward_data", TORCH_FN(k_softmax_bw));
	m.impl("_log_softmax_backward_data", TORCH_FN(k_log_softmax_bw));
}

} // namespace spyre_torch
