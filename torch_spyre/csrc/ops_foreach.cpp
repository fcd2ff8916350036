// SPDX-License-Identifier: MIT
// The _foreach_* ops torch.optim's foreach paths use (SGD with momentum,
// Adam, AdamW, ...) on the card: one boxed kernel per overload reads the
// tensor lists, scalars and scalar lists off the stack and queues one
// generated KERNEL per index on the current stream (one program per op,
// dtype and layout, found in the cache; the commands go into the stream's
// open batch): one C++ call per foreach op, no dispatcher round trip and
// no host wait per tensor.
//
// Ops: add, sub (Scalar, List with alpha, ScalarList), mul, div, maximum,
// minimum (Scalar, List, ScalarList), addcmul, addcdiv (Scalar,
// ScalarList), lerp (List, Scalar, ScalarList), sqrt, neg, reciprocal and
// zero_, each functional and in place.  Values are computed in f32 and
// rounded once at the store (CUDA's opmath), except add and sub of two
// lists in the half types, which round as the CPU's foreach (a per-tensor
// add) does in ATen's scalar kernel, computed in the dtype: alpha to the
// dtype, then alpha * other, then the sum (a CPU without AVX, as the
// guest's, runs it for every element; with AVX2 the vector body rounds
// alpha, then alpha * other + self once).  A call whose tensors the
// card cannot take this way (another dtype than float32/float16/bfloat16,
// tensors of one index with different dtypes, sizes or cards, a complex
// scalar, lists of different lengths) runs ATen's per-tensor composite
// kernel instead (its checks and errors, and each per-tensor op native or
// the counted fallback); so do the .Tensor overloads (a scalar in a
// tensor).
#include "kernels.h"

#include <ATen/MemoryOverlap.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <string>
#include <vector>

namespace spyre_torch {

std::atomic<int64_t> *native_counter(const std::string &name);

namespace {

using namespace kgen;

enum FeKind : uint32_t {
	ADD = 1, SUB, MUL, DIV, MAXIMUM, MINIMUM, ADDCMUL, ADDCDIV, LERP,
	SQRT, NEG, RECIP, ZERO,
};

constexpr int kMaxLists = 3;

struct FeEntry {
	const char *base;	// aten::_foreach_<base>
	FeKind kind;
	const char *overloads;	// space-separated; "-" is the plain name
};

const FeEntry kOps[] = {
	{"add", ADD, "Scalar List ScalarList"},
	{"sub", SUB, "Scalar List ScalarList"},
	{"mul", MUL, "Scalar List ScalarList"},
	{"div", DIV, "Scalar List ScalarList"},
	{"maximum", MAXIMUM, "Scalar List ScalarList"},
	{"minimum", MINIMUM, "Scalar List ScalarList"},
	{"addcmul", ADDCMUL, "Scalar ScalarList"},
	{"addcdiv", ADDCDIV, "Scalar ScalarList"},
	{"lerp", LERP, "List Scalar ScalarList"},
	{"sqrt", SQRT, "-"},
	{"neg", NEG, "-"},
	{"reciprocal", RECIP, "-"},
	{"zero", ZERO, "-"},
};

// Whether add/sub of two lists of card dtype @dt rounds alpha * other to
// the dtype before the sum (the half types: see the top of the file).
bool fe_round_product(FeKind kind, int nl, uint32_t dt)
{
	return (kind == ADD || kind == SUB) && nl >= 2 &&
	       (dt == kdtype(at::kHalf) || dt == kdtype(at::kBFloat16));
}

// @v rounded to the half type @t as the CPU's Scalar::to<scalar_t>() does
// (through float).
double in_dtype(double v, at::ScalarType t)
{
	float f = static_cast<float>(v);
	return t == at::kHalf ? static_cast<float>(c10::Half(f)) :
		static_cast<float>(c10::BFloat16(f));
}

// The element's value from the lists' values @t (f32), the scalar @sc and
// alpha @alpha (f32 parameters); @nl tensor lists of card dtype @dt.
int fe_expr(B &b, FeKind kind, int nl, uint32_t dt, const int *t, int sc,
	    int alpha)
{
	switch (kind) {
	case ADD:
	case SUB: {
		if (nl < 2)
			return kind == ADD ? b.add(t[0], sc) : b.sub(t[0], sc);
		int a = kind == ADD ? alpha : b.neg(alpha);
		if (!fe_round_product(kind, nl, dt))
			return b.fma(t[1], a, t[0]);
		int prod = spyre_kernel_cvt(b.k, SPYRE_KTYPE_F32, b.mul(a, t[1]),
					    dt, 0);
		return b.add(t[0], prod);
	}
	case MUL:
		return b.mul(t[0], nl >= 2 ? t[1] : sc);
	case DIV:
		return b.div(t[0], nl >= 2 ? t[1] : sc);
	case MAXIMUM:
		return b.max(t[0], nl >= 2 ? t[1] : sc);
	case MINIMUM:
		return b.min(t[0], nl >= 2 ? t[1] : sc);
	case ADDCMUL:
		return b.add(t[0], b.mul(b.mul(sc, t[1]), t[2]));
	case ADDCDIV:
		return b.add(t[0], b.mul(sc, b.div(t[1], t[2])));
	case LERP: {	// ATen's: the end nearer the weight is exact
		int w = nl >= 3 ? t[2] : sc;
		int d = b.sub(t[1], t[0]);
		int lo = b.fma(w, d, t[0]);
		int hi = b.sub(t[1], b.mul(d, b.sub(b.f(1.0f), w)));
		return b.sel(b.cmp(SPYRE_KCMP_LT, b.un(SPYRE_KOP_ABS, w),
				   b.f(0.5f)), lo, hi);
	}
	case SQRT:
		return b.un(SPYRE_KOP_SQRT, t[0]);
	case NEG:
		return b.neg(t[0]);
	case RECIP:
		return b.un(SPYRE_KOP_RECIP, t[0]);
	case ZERO:
		return b.f(0.0f);
	}
	return -EINVAL;
}

struct FeBuild {
	FeKind kind;
	int nl;			// tensor lists read (ZERO: none)
	uint32_t dt;		// every operand's card dtype
	int np;
};

// Operands: the nl lists' tensors, then the output.  Parameters: their
// strides (np each), then the scalar and alpha (f32).
int build_fe(struct spyre_kernel **kp, const void *ctx)
{
	const FeBuild &p = *static_cast<const FeBuild *>(ctx);
	const unsigned int n = static_cast<unsigned int>(p.nl) + 1;
	const unsigned int np = static_cast<unsigned int>(p.np);
	uint32_t dts[kMaxLists + 1] = {p.dt, p.dt, p.dt, p.dt};
	int rc = spyre_kernel_create(dts, n, n * np + 2, np, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32;
	int t[kMaxLists];
	for (unsigned int i = 0; i + 1 < n; i++)
		t[i] = b.cvt(spyre_kernel_load(b.k, i, point_offset(b, p.np, i * np),
					       NONE, NONE), F);
	int sc = b.param(F, n * np), alpha = b.param(F, n * np + 1);
	int v = fe_expr(b, p.kind, p.nl, p.dt, t, sc, alpha);
	spyre_kernel_store(b.k, n - 1, point_offset(b, p.np, (n - 1) * np),
			   b.cvt(v, vtype(p.dt)), NONE, 0);
	return spyre_kernel_error(b.k);
}

// The boxed kernel of one overload.
struct FeKernel final : public c10::OperatorKernel {
	FeKind kind;
	int nl = 0;		// tensor-list arguments (self first)
	int scalar = -1;	// the Scalar argument's index, or -1
	int slist = -1;		// the Scalar[] argument's index, or -1
	int alpha = -1;		// the alpha argument's index, or -1
	bool inplace = false;
	size_t nargs = 0;
	std::atomic<int64_t> *counter = nullptr;

	void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet,
			torch::jit::Stack *stack)
	{
		if (!run(stack))
			op.callBoxedForDispatchKey(
				c10::DispatchKey::CompositeExplicitAutograd,
				*stack);
	}
	bool run(torch::jit::Stack *stack);
};

bool float_ok(at::ScalarType t)
{
	return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

bool FeKernel::run(torch::jit::Stack *stack)
{
	auto iv = torch::jit::last(*stack, nargs);
	std::vector<at::Tensor> lists[kMaxLists];
	int l = 0;
	for (size_t a = 0; a < nargs && l < nl; a++)
		if (iv[a].isTensorList())
			lists[l++] = iv[a].toTensorVector();
	const size_t n = lists[0].size();
	if (n == 0)
		return false;
	for (int j = 1; j < nl; j++)
		if (lists[j].size() != n)
			return false;
	at::Scalar sc = scalar >= 0 ? iv[scalar].toScalar() : at::Scalar(0.0);
	at::Scalar al = alpha >= 0 ? iv[alpha].toScalar() : at::Scalar(1.0);
	std::vector<at::Scalar> sl;
	if (slist >= 0) {
		for (const c10::IValue &v : iv[slist].toListRef())
			sl.push_back(v.toScalar());
		if (sl.size() != n)
			return false;
	}
	if (sc.isComplex() || al.isComplex())
		return false;
	for (const at::Scalar &s : sl)
		if (s.isComplex())
			return false;
	// every index on the card, one dtype and size per index
	for (size_t i = 0; i < n; i++) {
		const at::Tensor &s = lists[0][i];
		if (!s.defined() || s.device().type() != c10::DeviceType::PrivateUse1 ||
		    !float_ok(s.scalar_type()))
			return false;
		for (int j = 1; j < nl; j++) {
			const at::Tensor &t = lists[j][i];
			if (!t.defined() || t.device() != s.device() ||
			    t.scalar_type() != s.scalar_type() ||
			    t.sizes() != s.sizes())
				return false;
		}
	}
	// every index's space and program first, so that a call the card
	// cannot take changes nothing before the composite kernel runs
	const int nread = kind == ZERO ? 0 : nl;
	std::vector<Space> spaces(n);
	std::vector<const Prog *> progs(n, nullptr);
	for (size_t i = 0; i < n; i++) {
		const at::Tensor &s = lists[0][i];
		if (s.numel() == 0)
			continue;
		Space &sp = spaces[i];
		sp.init(s.sizes());
		for (int j = 0; j < nread; j++)
			sp.add(lists[j][i]);
		sp.add(s);	// the output: self's layout (in place) or dense
		if (!inplace && !s.is_non_overlapping_and_dense())
			return false;
		// in place: self without internal overlap, and every input
		// either self's very view or memory self does not share (the
		// composite kernel's checks and errors otherwise)
		if (inplace && at::has_internal_overlap(s) != at::MemOverlap::No)
			return false;
		for (int j = 1; inplace && j < nread; j++) {
			const at::Tensor &t = lists[j][i];
			bool same = t.storage_offset() == s.storage_offset() &&
				    t.strides() == s.strides();
			if (t.storage().is_alias_of(s.storage()) && !same)
				return false;
		}
		if (!sp.collapse())
			return false;
		FeBuild fb{kind, nread, kdtype(s.scalar_type()), sp.np};
		Key key;
		key.op = kOpForeach + kind;
		key.variant = static_cast<uint32_t>(nread);
		key.npdims = static_cast<uint8_t>(sp.np);
		key.dt[0] = static_cast<uint8_t>(fb.dt);
		progs[i] = program(s.device().index(), key, build_fe, &fb);
		if (progs[i]->err < 0)
			return false;
	}
	std::vector<at::Tensor> outs(n);
	for (size_t i = 0; i < n; i++) {
		const at::Tensor &s = lists[0][i];
		c10::DeviceGuard g(s.device());
		// empty_like keeps a dense self's strides: the space above
		at::Tensor out = inplace ? s : at::empty_like(s);
		outs[i] = out;
		if (s.numel() == 0)
			continue;
		const Space &sp = spaces[i];
		Launch L;
		const unsigned int np = static_cast<unsigned int>(sp.np);
		for (int j = 0; j <= nread; j++) {
			unsigned int u = static_cast<unsigned int>(j);
			const at::Tensor &t = j < nread ? lists[j][i] : out;
			L.operand(u, t, sp.extent(j));
			L.strides(sp, j, u * np);
		}
		unsigned int pp = static_cast<unsigned int>(nread + 1) * np;
		L.params[pp] = f32_param((slist >= 0 ? sl[i] : sc).toDouble());
		double a = al.toDouble();
		if (fe_round_product(kind, nread, kdtype(s.scalar_type())))
			a = in_dtype(a, s.scalar_type());
		L.params[pp + 1] = f32_param(a);
		L.sizes(sp);
		kgen::run(s.device().index(), progs[i], L,
			  static_cast<unsigned int>(nread + 1), pp + 2);
	}
	if (counter)
		(*counter)++;
	torch::jit::drop(*stack, nargs);
	if (!inplace)
		stack->push_back(c10::IValue(outs));
	return true;
}

// The layout of @schema's arguments, or false when the kernel cannot read
// it (a plain Tensor argument: the .Tensor overloads).
bool fe_layout(const c10::FunctionSchema &schema, FeKernel &k)
{
	const auto &as = schema.arguments();
	k.nargs = as.size();
	k.inplace = schema.returns().empty();
	for (size_t i = 0; i < as.size(); i++) {
		const c10::TypePtr &t = as[i].type();
		if (t->kind() == c10::TypeKind::ListType) {
			c10::TypePtr el = t->castRaw<c10::ListType>()->getElementType();
			if (el->kind() == c10::TypeKind::TensorType) {
				if (k.nl == kMaxLists)
					return false;
				k.nl++;
			} else {
				k.slist = static_cast<int>(i);
			}
			continue;
		}
		switch (t->kind()) {
		case c10::TypeKind::NumberType:
		case c10::TypeKind::FloatType:
		case c10::TypeKind::IntType:
			if (as[i].name() == "alpha")
				k.alpha = static_cast<int>(i);
			else
				k.scalar = static_cast<int>(i);
			break;
		default:
			return false;
		}
	}
	return k.nl >= 1;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	for (const FeEntry &e : kOps) {
		std::string ovls = e.overloads;
		size_t pos = 0;
		while (pos < ovls.size()) {
			size_t sp = ovls.find(' ', pos);
			if (sp == std::string::npos)
				sp = ovls.size();
			std::string ovl = ovls.substr(pos, sp - pos);
			pos = sp + 1;
			if (ovl == "-")
				ovl.clear();
			for (bool inplace : {false, true}) {
				std::string base = std::string("_foreach_") + e.base +
						   (inplace ? "_" : "");
				auto h = c10::Dispatcher::singleton().findSchema(
					{"aten::" + base, ovl});
				if (!h)
					continue;
				auto k = std::make_unique<FeKernel>();
				k->kind = e.kind;
				if (!fe_layout(h->schema(), *k))
					continue;
				std::string name = ovl.empty() ? base : base + "." + ovl;
				k->counter = native_counter("aten::" + name);
				m.impl(name.c_str(),
				       torch::CppFunction::makeFromBoxedFunctor(
					       std::move(k)));
			}
		}
	}
}

} // namespace spyre_torch
