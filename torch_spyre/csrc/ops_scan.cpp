// SPDX-License-Identifier: MIT
// Scans on the card, generated on the card's SCAN instruction: cumsum and
// cumprod (functional, in-place, out=) and cummax / cummin (ATen's
// _cummax_helper / _cummin_helper: values and indices).  The scanned dim
// is the kernel's one reduction dim, the others its pointwise dims (any
// layout); a point's elements are combined left to right, one running
// value, as PyTorch's CPU kernel does (floats in f32, so half types
// accumulate in f32; integers in i64 for cumsum/cumprod's int64 result).
#include "kernels.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace spyre_torch {
namespace {

using namespace kgen;


enum SKind : uint8_t { SC_SUM = 1, SC_PROD, SC_MAX, SC_MIN };

struct ScanBuild {
	SKind kind;
	uint32_t acc;		// the running value's type
	uint32_t dts[3];	// x, out (values), indices (cummax/cummin)
	int nout, np;
};

// One reduction dim (the scanned one); params: each operand's strides
// (np + 1).
int build_scan(struct spyre_kernel **kp, const void *ctx)
{
	const ScanBuild &p = *static_cast<const ScanBuild *>(ctx);
	unsigned int w = static_cast<unsigned int>(p.np + 1);
	int no = 1 + p.nout;
	int rc = spyre_kernel_create(p.dts, no, w * no, p.np, 1, kp);
	if (rc)
		return rc;
	B b{*kp};
	int base[3];
	for (int i = 0; i < no; i++)
		base[i] = point_offset(b, p.np, i * w);
	auto off = [&](int i) { return rindex_offset(b, base[i], p.np, 1, i * w); };
	spyre_kernel_pass(b.k);
	int x = b.cvt(spyre_kernel_load(b.k, 0, off(0), NONE, NONE), p.acc);
	static const uint32_t kind[] = {0, SPYRE_KRED_SUM, SPYRE_KRED_PROD,
					SPYRE_KRED_MAX, SPYRE_KRED_MIN};
	int v = spyre_kernel_scan(b.k, kind[p.kind], x, NONE);
	spyre_kernel_store(b.k, 1, off(1), b.cvt(v, vtype(p.dts[1])), NONE, 0);
	if (p.nout > 1) {
		uint32_t ak = p.kind == SC_MAX ? SPYRE_KRED_ARGMAX :
			      SPYRE_KRED_ARGMIN;
		int i = spyre_kernel_scan(b.k, ak, x, NONE);
		spyre_kernel_store(b.k, 2, off(2), b.cvt(i, vtype(p.dts[2])),
				   NONE, 0);
	}
	spyre_kernel_endpass(b.k);
	return spyre_kernel_error(b.k);
}

bool on_card(const at::Tensor &t)
{
	return t.device().type() == c10::DeviceType::PrivateUse1 &&
	       kdtype(t.scalar_type()) != 0;
}

// Scan @x along @dim into @out (and @idx), which have @x's sizes; @x has
// the values' dtype.  False when the card cannot (dtypes, refusal): the
// caller falls back.
bool scan(SKind kind, const at::Tensor &x, int64_t dim, const at::Tensor &out,
	  const at::Tensor &idx)
{
	if (!on_card(x) || !on_card(out) || out.device() != x.device() ||
	    (idx.defined() && (!on_card(idx) || idx.device() != x.device())))
		return false;
	c10::DeviceGuard g(x.device());
	int card = x.device().index();
	if (out.numel() == 0)
		return true;
	int64_t nd = x.dim();
	int64_t d = at::maybe_wrap_dim(dim, nd);
	Space s;
	s.init(x.sizes(), nd ? 1ull << d : 0);
	s.add(x);
	s.add(out);
	if (idx.defined())
		s.add(idx);
	if (!s.collapse(true))
		return false;
	ScanBuild sb;
	sb.kind = kind;
	sb.acc = ctype(out.scalar_type());
	sb.nout = idx.defined() ? 2 : 1;
	sb.np = s.np;
	sb.dts[0] = kdtype(x.scalar_type());
	sb.dts[1] = kdtype(out.scalar_type());
	sb.dts[2] = idx.defined() ? kdtype(idx.scalar_type()) : 0;
	Key key;
	key.op = kOpScan + kind;
	key.ct = static_cast<uint8_t>(sb.acc);
	key.npdims = static_cast<uint8_t>(s.np);
	key.nrdims = 1;
	key.nops = static_cast<uint8_t>(1 + sb.nout);
	for (int i = 0; i < 3; i++)
		key.dt[i] = static_cast<uint8_t>(sb.dts[i]);
	const Prog *prog = program(card, key, build_scan, &sb);
	if (prog->err < 0)
		return false;
	Launch L;
	unsigned int w = static_cast<unsigned int>(s.np + 1);
	int no = 1 + sb.nout;
	L.operand(0, x, s.extent(0));
	L.operand(1, out, s.extent(1));
	if (idx.defined())
		L.operand(2, idx, s.extent(2));
	for (int i = 0; i < no; i++)
		L.strides(s, i, i * w);
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(no), w * no);
	return true;
}

// cumsum/cumprod's result dtype: @dtype, else int64 for integers and
// bool, else self's (PyTorch's rule).
at::ScalarType cum_dtype(const at::Tensor &self,
			 std::optional<at::ScalarType> dtype)
{
	if (dtype.has_value())
		return *dtype;
	return at::isIntegralType(self.scalar_type(), true) ? at::kLong :
	       self.scalar_type();
}

// cumsum/cumprod of @self into @out (resized; @out's dtype is the
// result's): @self converted to that dtype first, as the CPU does.
bool cum_into(SKind kind, const at::Tensor &self, int64_t dim,
	      const at::Tensor &out)
{
	if (!on_card(self) || !on_card(out))
		return false;
	at::maybe_wrap_dim(dim, self.dim());
	at::Tensor x = self.scalar_type() == out.scalar_type() ? self :
		       self.to(out.scalar_type());
	return scan(kind, x, dim, out, at::Tensor());
}

#define CUM(name, KIND)                                                        \
	at::Tensor k_##name(const at::Tensor &self, int64_t dim,               \
			    std::optional<at::ScalarType> dtype)               \
	{                                                                      \
		at::ScalarType od = cum_dtype(self, dtype);                    \
		if (on_card(self) && kdtype(od)) {                             \
			at::Tensor out = at::empty(self.sizes(),               \
						   self.options().dtype(od));  \
			if (cum_into(KIND, self, dim, out)) {                  \
				count_native("aten::" #name);                  \
				return out;                                    \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK(name, self, dim, dtype);                 \
	}                                                                      \
	at::Tensor &k_##name##_(at::Tensor &self, int64_t dim,                 \
				std::optional<at::ScalarType> dtype)           \
	{                                                                      \
		at::ScalarType od = dtype.value_or(self.scalar_type());        \
		TORCH_CHECK(od == self.scalar_type(), "Expected out tensor "   \
			    "to have dtype ", od, ", but got ",                \
			    self.scalar_type(), " instead");                   \
		at::assert_no_internal_overlap(self);                          \
		if (on_card(self)) {                                           \
			/* the scan reads each element before it writes it */  \
			if (cum_into(KIND, self, dim, self)) {                 \
				count_native("aten::" #name "_");              \
				return self;                                   \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK(name##_, self, dim, dtype);              \
	}                                                                      \
	at::Tensor &k_##name##_out(const at::Tensor &self, int64_t dim,        \
				   std::optional<at::ScalarType> dtype,        \
				   at::Tensor &out)                            \
	{                                                                      \
		if (on_card(self) && on_card(out)) {                           \
			at::ScalarType od = dtype.value_or(out.scalar_type()); \
			TORCH_CHECK(out.scalar_type() == od, "Expected out "   \
				    "tensor to have dtype ", od, ", but got ", \
				    out.scalar_type(), " instead");            \
			at::native::resize_output(out, self.sizes());          \
			check_overlap(out, {self});                            \
			if (cum_into(KIND, unalias(self, out), dim, out)) {    \
				count_native("aten::" #name ".out");           \
				return out;                                    \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK2(name, out, self, dim, dtype, out);      \
	}

CUM(cumsum, SC_SUM)
CUM(cumprod, SC_PROD)

// _cummax_helper / _cummin_helper (what cummax / cummin call): @values
// and @indices already have self's sizes.
#define CUMEXT(name, KIND)                                                     \
	void k_##name##_helper(const at::Tensor &self, at::Tensor &values,     \
			       at::Tensor &indices, int64_t dim)               \
	{                                                                      \
		if (on_card(self) && on_card(values) && on_card(indices) &&   \
		    values.scalar_type() == self.scalar_type() &&              \
		    indices.scalar_type() == at::kLong) {                      \
			check_overlap(values, {self});                         \
			check_overlap(indices, {self, values});                \
			if (scan(KIND, unalias(self, values), dim, values,     \
				 indices)) {                                   \
				count_native("aten::_" #name "_helper");       \
				return;                                        \
			}                                                      \
		}                                                              \
		SPYRE_FALLBACK(_##name##_helper, self, values, indices, dim);  \
	}

CUMEXT(cummax, SC_MAX)
CUMEXT(cummin, SC_MIN)

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("cumsum", TORCH_FN(k_cumsum));
	m.impl("cumsum_", TORCH_FN(k_cumsum_));
	m.impl("cumsum.out", TORCH_FN(k_cumsum_out));
	m.impl("cumprod", TORCH_FN(k_cumprod));
	m.impl("cumprod_", TORCH_FN(k_cumprod_));
	m.impl("cumprod.out", TORCH_FN(k_cumprod_out));
	m.impl("_cummax_helper", TORCH_FN(k_cummax_helper));
	m.impl("_cummin_helper", TORCH_FN(k_cummin_helper));
}

} // namespace spyre_torch
