// SPDX-License-Identifier: MIT
// The pointwise ATen ops on the card: one table line per op (its result
// dtype rule and its expression in the card's kernel instructions), one
// boxed kernel that reads any of the op's overloads (functional, in-place,
// out=; tensor or scalar operands) off the dispatcher's stack and runs the
// generated program: PyTorch's type promotion (at::result_type, wrapped
// numbers and CPU scalars as launch parameters), broadcasting, opmath
// (values computed in f32, rounded once at the store), out= resizing
// (at::native::resize_output), the overlap checks, any layout.  A program
// the card's builder refuses falls back to the CPU (fallback.cpp), the
// refusal cached.  Also the index-driven kernels (arange, linspace, eye,
// tril, triu) and dtype casts.
#include "kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace spyre_torch {

namespace {

using namespace kgen;

constexpr int kMaxIn = 6;		// tensor and scalar inputs of an op

// What an expression sees besides its inputs.
struct X {
	uint32_t ct;			// compute type (SPYRE_KTYPE_*)
	const int *raw;			// the inputs as loaded (before cvt)
	uint32_t present;		// bit i: optional input i given
	uint32_t attr;			// 2 bits per str/bool argument
	uint32_t rdt;			// F_ROUNDSTEPS: the half dtype (else 0)
	bool has(int i) const { return (present >> i) & 1; }
	int at(int i) const { return (attr >> (2 * i)) & 3; }
};

using Expr = int (*)(B &b, const int *in, const X &x);

// Result dtype rules.
enum Kind : uint8_t {
	K_SAME,		// the common dtype
	K_FLOAT,	// the common dtype, integers and bool to the default float
	K_CMP,		// bool, computed in the common dtype
	K_LOGIC,	// bool, computed on bools
	K_BITS,		// integers and bool only, computed in them
};

enum Flag : uint16_t {
	F_NOBOOL = 1 << 0,	// a bool result dtype: the CPU (PyTorch raises)
	F_FLOATONLY = 1 << 1,	// integer or bool inputs: the CPU
	F_ALPHA = 1 << 2,	// alpha_check on the scalar "alpha"
	F_SUBCHK = 1 << 3,	// sub_check (no bool)
	F_DIVMODE = 1 << 4,	// attr 0 a rounding mode: none -> K_FLOAT
	F_SELFTYPE = 1 << 5,	// the result dtype is self's (masked_fill)
	F_NAN2NUM = 1 << 6,	// nan_to_num's dtype-dependent defaults
	F_DECIMALS = 1 << 7,	// round.decimals: input 1 is 10^|d|, attr 3 d<0
	F_ARG0COND = 1 << 8,	// input 0 is a condition (no promotion)
	F_NEEDONE = 1 << 9,	// at least one optional scalar (clamp)
	F_INTDIV = 1 << 10,	// integer division by input 1: a zero raises
	F_OUTER = 1 << 11,	// addr: inputs 1 and 2 are vectors, the outer
				// product's; inputs 3 and 4 beta and alpha
	F_ROUNDSTEPS = 1 << 12,	// half types round after every step, as
				// the CPU kernel computes in the dtype
	F_SAMEDT = 1 << 13,	// tensors of different dtypes: the CPU
				// (heaviside raises)
};

struct Entry {
	const char *names;	// the overloads, '@' for the base name
	const char *base;
	Kind kind;
	uint16_t flags;
	Expr expr;
	Expr alt;		// used when the builder refuses expr
};

#define E(...) [](B &b, const int *in, const X &x) -> int { \
	(void)b; (void)in; (void)x; __VA_ARGS__ }

// a unary math function of the card (f32)
#define MATH(KOP) E(return b.un(SPYRE_KOP_##KOP, in[0]);)

const char *const U = "@ @_ @.out";
const char *const BIN = "@.Tensor @_.Tensor @.out @.Scalar @_.Scalar "
			"@.Scalar_out";
const char *const CMPN = "@.Tensor @_.Tensor @.Tensor_out @.Scalar @_.Scalar "
			 "@.Scalar_out";
const char *const BITN = "@.Tensor @_.Tensor @.Tensor_out @.Scalar @_.Scalar "
			 "@.Scalar_out @.Scalar_Tensor @.Scalar_Tensor_out";

int one(B &b, const X &x) { return b.c(x.ct, 1.0); }
int zero(B &b, const X &x) { return b.c(x.ct, 0.0); }

// sign(a): (a > 0) - (a < 0) in the compute type (NaN gives 0)
int sign_of(B &b, int a, const X &x)
{
	int z = zero(b, x), o = one(b, x);
	int p = b.sel(b.cmp(SPYRE_KCMP_GT, a, z), o, z);
	int n = b.sel(b.cmp(SPYRE_KCMP_LT, a, z), o, z);
	return b.sub(p, n);
}

// gelu(a): erf or tanh form (PyTorch's CPU formulas)
int gelu_of(B &b, int a, bool tanh_form)
{
	int half = b.f(0.5f), o = b.f(1.0f);
	if (!tanh_form) {
		int e = b.un(SPYRE_KOP_ERF,
			     b.mul(a, b.f(static_cast<float>(M_SQRT1_2))));
		return b.mul(b.mul(a, half), b.add(o, e));
	}
	const float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
	int cube = b.mul(b.mul(a, a), a);
	int inner = b.mul(b.f(kBeta), b.add(a, b.mul(b.f(0.044715f), cube)));
	return b.mul(b.mul(half, a), b.add(o, b.un(SPYRE_KOP_TANH, inner)));
}

int softplus_log1p(B &b, int a) // log1p(exp(a))
{
	return b.un(SPYRE_KOP_LOG1P, b.un(SPYRE_KOP_EXP, a));
}

int softplus_log(B &b, int a) // log(1 + exp(a)), before LOG1P
{
	return b.un(SPYRE_KOP_LOG, b.add(b.f(1.0f), b.un(SPYRE_KOP_EXP, a)));
}

int hardsig_of(B &b, int a) // min(max(a + 3, 0), 6) / 6
{
	int t = b.op(SPYRE_KOP_CLAMP, b.add(a, b.f(3.0f)), b.f(0.0f), b.f(6.0f));
	return b.div(t, b.f(6.0f));
}

int copysign_of(B &b, int a, int s)
{
	int ab = b.op(SPYRE_KOP_AND, spyre_kernel_bitcast(b.k, SPYRE_KTYPE_I32, a),
		      b.c(SPYRE_KTYPE_I32, 0x7fffffff));
	int sb = b.op(SPYRE_KOP_AND, spyre_kernel_bitcast(b.k, SPYRE_KTYPE_I32, s),
		      spyre_kernel_const(b.k, SPYRE_KTYPE_I32, INT32_MIN));
	return spyre_kernel_bitcast(b.k, SPYRE_KTYPE_F32, b.op(SPYRE_KOP_OR, ab, sb));
}

int is_f32(const X &x) { return x.ct == SPYRE_KTYPE_F32; }

// @v rounded to the dtype the CPU kernel computes in (F_ROUNDSTEPS), so
// that a chain of steps rounds where PyTorch's CPU kernel does
int rnd(B &b, int v, const X &x)
{
	return x.rdt ? spyre_kernel_cvt(b.k, SPYRE_KTYPE_F32, v, x.rdt, 0) : v;
}

// min/max with a NaN-ignoring flag that only floats take
uint32_t ignore_nan(const X &x)
{
	return is_f32(x) ? SPYRE_KMOD_IGNORE_NAN : 0;
}

// The table.  Inputs are numbered in schema order over the tensor and
// scalar arguments (str/bool arguments are attributes).
const Entry kTable[] = {
	// ---- unary math, integers and bool to float ----
	{U, "exp", K_FLOAT, 0, MATH(EXP), nullptr},
	{U, "exp2", K_FLOAT, 0, MATH(EXP2), nullptr},
	{U, "expm1", K_FLOAT, 0, MATH(EXPM1), nullptr},
	{U, "log", K_FLOAT, 0, MATH(LOG), nullptr},
	{U, "log2", K_FLOAT, 0, MATH(LOG2),
	 E(return b.mul(b.un(SPYRE_KOP_LOG, in[0]),
			b.f(static_cast<float>(1.0 / M_LN2)));)},
	{U, "log10", K_FLOAT, 0, MATH(LOG10),
	 E(return b.mul(b.un(SPYRE_KOP_LOG, in[0]),
			b.f(static_cast<float>(1.0 / M_LN10)));)},
	{U, "log1p", K_FLOAT, 0, MATH(LOG1P), nullptr},
	{U, "sqrt", K_FLOAT, 0, MATH(SQRT), nullptr},
	{U, "rsqrt", K_FLOAT, 0, MATH(RSQRT), nullptr},
	{U, "reciprocal", K_FLOAT, 0, MATH(RECIP), nullptr},
	{U, "sin", K_FLOAT, 0, MATH(SIN), nullptr},
	{U, "cos", K_FLOAT, 0, MATH(COS), nullptr},
	{U, "tan", K_FLOAT, 0, MATH(TAN), nullptr},
	{U, "asin", K_FLOAT, 0, MATH(ASIN), nullptr},
	{U, "acos", K_FLOAT, 0, MATH(ACOS), nullptr},
	{U, "atan", K_FLOAT, 0, MATH(ATAN), nullptr},
	{U, "sinh", K_FLOAT, 0, MATH(SINH), nullptr},
	{U, "cosh", K_FLOAT, 0, MATH(COSH), nullptr},
	{U, "asinh", K_FLOAT, 0, MATH(ASINH), nullptr},
	{U, "acosh", K_FLOAT, 0, MATH(ACOSH), nullptr},
	{U, "atanh", K_FLOAT, 0, MATH(ATANH), nullptr},
	{U, "tanh", K_FLOAT, 0, MATH(TANH), nullptr},
	{U, "sigmoid", K_FLOAT, 0, MATH(SIGMOID), nullptr},
	{U, "erf", K_FLOAT, 0, MATH(ERF), nullptr},
	{U, "erfc", K_FLOAT, 0, MATH(ERFC), nullptr},
	{U, "erfinv", K_FLOAT, 0, MATH(ERFINV), nullptr},
	// sinc(a): 1 at 0, else sin(pi a) / (pi a)
	{U, "sinc", K_FLOAT, 0, E(
		int pa = b.mul(b.f(static_cast<float>(M_PI)), in[0]);
		return b.sel(b.cmp(SPYRE_KCMP_EQ, in[0], b.f(0.0f)), b.f(1.0f),
			     b.div(b.un(SPYRE_KOP_SIN, pa), pa));), nullptr},
	{U, "lgamma", K_FLOAT, 0, MATH(LGAMMA), nullptr},
	{"@ @.out", "logit", K_FLOAT, 0, E(
		int a = in[0];
		if (x.has(1)) {
			int hi = b.sub(b.f(1.0f), in[1]);
			a = b.sel(b.cmp(SPYRE_KCMP_LT, a, in[1]), in[1],
				  b.sel(b.cmp(SPYRE_KCMP_GT, a, hi), hi, a));
		}
		return b.un(SPYRE_KOP_LOG, b.div(a, b.sub(b.f(1.0f), a)));),
	 nullptr},
	// ---- unary, the input's dtype ----
	{U, "abs", K_SAME, F_NOBOOL, E(return b.un(SPYRE_KOP_ABS, in[0]);), nullptr},
	{U, "neg", K_SAME, F_NOBOOL, E(return b.neg(in[0]);), nullptr},
	{U, "floor", K_SAME, F_NOBOOL,
	 E(return is_f32(x) ? b.un(SPYRE_KOP_FLOOR, in[0]) : in[0];), nullptr},
	{U, "ceil", K_SAME, F_NOBOOL,
	 E(return is_f32(x) ? b.un(SPYRE_KOP_CEIL, in[0]) : in[0];), nullptr},
	{U, "round", K_SAME, F_NOBOOL,
	 E(return is_f32(x) ? b.un(SPYRE_KOP_ROUND, in[0]) : in[0];), nullptr},
	{"@.decimals @_.decimals @.decimals_out", "round", K_SAME,
	 F_NOBOOL | F_FLOATONLY | F_DECIMALS, E(
		if (x.at(3))	// decimals < 0: round(a / p) * p
			return b.mul(b.un(SPYRE_KOP_ROUND, b.div(in[0], in[1])),
				     in[1]);
		return b.div(b.un(SPYRE_KOP_ROUND, b.mul(in[0], in[1])), in[1]);),
	 nullptr},
	{U, "trunc", K_SAME, F_NOBOOL,
	 E(return is_f32(x) ? b.un(SPYRE_KOP_TRUNC, in[0]) : in[0];), nullptr},
	{U, "frac", K_SAME, F_FLOATONLY,
	 E(return b.sub(in[0], b.un(SPYRE_KOP_TRUNC, in[0]));), nullptr},
	{U, "sign", K_SAME, 0, E(return sign_of(b, in[0], x);), nullptr},
	{U, "sgn", K_SAME, 0, E(return sign_of(b, in[0], x);), nullptr},
	{"@ @_", "relu", K_SAME, F_NOBOOL, E(return b.max(in[0], zero(b, x));),
	 nullptr},
	{"@ @_ @.out", "nan_to_num", K_SAME, F_NAN2NUM, E(
		if (!is_f32(x))
			return in[0];
		int a = in[0];
		int inf = b.f(INFINITY);
		a = b.sel(b.cmp(SPYRE_KCMP_EQ, a, inf), in[2], a);
		a = b.sel(b.cmp(SPYRE_KCMP_EQ, a, b.neg(inf)), in[3], a);
		return b.sel(b.un(SPYRE_KOP_ISNAN, in[0]), in[1], a);),
	 nullptr},
	{"@ @_ @.out", "hardtanh", K_SAME, F_NOBOOL,
	 E(return b.op(SPYRE_KOP_CLAMP, in[0], in[1], in[2]);), nullptr},
	{"@ @_ @.out", "leaky_relu", K_SAME, F_FLOATONLY, E(
		return b.sel(b.cmp(SPYRE_KCMP_GT, in[0], b.f(0.0f)), in[0],
			     b.mul(in[0], in[1]));), nullptr},
	{"@ @_ @.out", "elu", K_SAME, F_FLOATONLY, E(
		// a <= 0 ? (exp(a * input_scale) - 1) * alpha * scale : a * scale
		int neg = b.mul(b.sub(b.un(SPYRE_KOP_EXP, b.mul(in[0], in[3])),
				      b.f(1.0f)), b.mul(in[1], in[2]));
		return b.sel(b.cmp(SPYRE_KCMP_LE, in[0], b.f(0.0f)), neg,
			     b.mul(in[0], in[2]));), nullptr},
	{"@ @_ @.out", "gelu", K_SAME, F_FLOATONLY,
	 E(return gelu_of(b, in[0], x.at(0) == 1);), nullptr},
	{"@ @_ @.out", "silu", K_SAME, F_FLOATONLY, E(
		return b.div(in[0], b.add(b.f(1.0f),
					  b.un(SPYRE_KOP_EXP, b.neg(in[0]))));),
	 nullptr},
	{"@ @_ @.out", "mish", K_SAME, F_FLOATONLY, E(
		return b.mul(in[0], b.un(SPYRE_KOP_TANH,
					 softplus_log1p(b, in[0])));),
	 E(return b.mul(in[0], b.un(SPYRE_KOP_TANH, softplus_log(b, in[0])));)},
	{"@ @.out", "softplus", K_SAME, F_FLOATONLY, E(
		int z = b.mul(in[0], in[1]);
		return b.sel(b.cmp(SPYRE_KCMP_GT, z, in[2]), in[0],
			     b.div(softplus_log1p(b, z), in[1]));),
	 E(
		int z = b.mul(in[0], in[1]);
		return b.sel(b.cmp(SPYRE_KCMP_GT, z, in[2]), in[0],
			     b.div(softplus_log(b, z), in[1]));)},
	{"@ @_ @.out", "hardswish", K_SAME, F_FLOATONLY, E(
		int t = b.op(SPYRE_KOP_CLAMP, b.add(in[0], b.f(3.0f)), b.f(0.0f),
			     b.f(6.0f));
		return b.div(b.mul(in[0], t), b.f(6.0f));), nullptr},
	{"@ @_ @.out", "hardsigmoid", K_SAME, F_FLOATONLY,
	 E(return hardsig_of(b, in[0]);), nullptr},
	{"@ @_ @.out", "threshold", K_SAME, F_NOBOOL, E(
		return b.sel(b.cmp(SPYRE_KCMP_LE, in[0], in[1]), in[2], in[0]);),
	 nullptr},
	// ---- backward formulas autograd calls ----
	{"@ @.grad_input", "threshold_backward", K_SAME, F_NOBOOL, E(
		return b.sel(b.cmp(SPYRE_KCMP_LE, in[1], in[2]), zero(b, x),
			     in[0]);), nullptr},
	{"@ @.grad_input", "sigmoid_backward", K_SAME, F_FLOATONLY, E(
		return b.mul(b.mul(in[0], b.sub(b.f(1.0f), in[1])), in[1]);),
	 nullptr},
	{"@ @.grad_input", "tanh_backward", K_SAME, F_FLOATONLY, E(
		return b.mul(in[0], b.sub(b.f(1.0f), b.mul(in[1], in[1])));),
	 nullptr},
	{"@ @.grad_input", "gelu_backward", K_SAME, F_FLOATONLY, E(
		int a = in[1];
		int half = b.f(0.5f), o = b.f(1.0f);
		if (x.at(0) != 1) {
			int cdf = b.mul(half, b.add(o, b.un(SPYRE_KOP_ERF,
				b.mul(a, b.f(static_cast<float>(M_SQRT1_2))))));
			int pdf = b.mul(b.un(SPYRE_KOP_EXP,
					     b.mul(b.f(-0.5f), b.mul(a, a))),
					b.f(static_cast<float>(M_2_SQRTPI *
							       M_SQRT1_2 * 0.5)));
			return b.mul(in[0], b.add(cdf, b.mul(a, pdf)));
		}
		const float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
		const float kKappa = 0.044715f;
		int sq = b.mul(a, a);
		int inner = b.mul(b.f(kBeta), b.add(a, b.mul(b.f(kKappa),
							     b.mul(sq, a))));
		int t = b.un(SPYRE_KOP_TANH, inner);
		int left = b.mul(half, a);
		int right = b.add(o, t);
		int ld = b.mul(half, right);
		int rd = b.mul(b.mul(b.mul(left, b.sub(o, b.mul(t, t))),
				     b.f(kBeta)),
			       b.add(o, b.mul(b.f(3.0f * kKappa), sq)));
		return b.mul(in[0], b.add(ld, rd));), nullptr},
	{"@ @.grad_input", "silu_backward", K_SAME, F_FLOATONLY, E(
		int s = b.un(SPYRE_KOP_SIGMOID, in[1]);
		int o = b.f(1.0f);
		return b.mul(b.mul(in[0], s),
			     b.add(o, b.mul(in[1], b.sub(o, s))));), nullptr},
	{"@ @.grad_input", "hardtanh_backward", K_SAME, F_FLOATONLY, E(
		int out = b.op(SPYRE_KOP_OR, b.cmp(SPYRE_KCMP_LE, in[1], in[2]),
			       b.cmp(SPYRE_KCMP_GE, in[1], in[3]));
		return b.sel(out, b.f(0.0f), in[0]);), nullptr},
	{"@ @.grad_input", "leaky_relu_backward", K_SAME, F_FLOATONLY, E(
		return b.sel(b.cmp(SPYRE_KCMP_GT, in[1], b.f(0.0f)), in[0],
			     b.mul(in[0], in[2]));), nullptr},
	{"@ @.grad_input", "softplus_backward", K_SAME, F_FLOATONLY, E(
		int z = b.un(SPYRE_KOP_EXP, b.mul(in[1], in[2]));
		return b.sel(b.cmp(SPYRE_KCMP_GT, b.mul(in[1], in[2]), in[3]),
			     in[0], b.div(b.mul(in[0], z),
					  b.add(z, b.f(1.0f))));), nullptr},
	{"@ @.out", "hardswish_backward", K_SAME, F_FLOATONLY, E(
		int a = in[1];
		int mid = b.mul(in[0], b.add(b.div(a, b.f(3.0f)), b.f(0.5f)));
		return b.sel(b.cmp(SPYRE_KCMP_LT, a, b.f(-3.0f)), b.f(0.0f),
			     b.sel(b.cmp(SPYRE_KCMP_LE, a, b.f(3.0f)), mid,
				   in[0]));), nullptr},
	{"@ @.grad_input", "hardsigmoid_backward", K_SAME, F_FLOATONLY, E(
		int a = in[1];
		int in_range = b.op(SPYRE_KOP_AND,
				    b.cmp(SPYRE_KCMP_GT, a, b.f(-3.0f)),
				    b.cmp(SPYRE_KCMP_LT, a, b.f(3.0f)));
		return b.sel(in_range, b.div(in[0], b.f(6.0f)), b.f(0.0f));),
	 nullptr},
	// ---- predicates ----
	{"@ @.out", "isnan", K_CMP, 0, E(
		return is_f32(x) ? b.un(SPYRE_KOP_ISNAN, in[0]) :
		       b.c(SPYRE_KTYPE_BOOL, 0);), nullptr},
	{"@", "isinf", K_CMP, 0, E(
		return is_f32(x) ? b.un(SPYRE_KOP_ISINF, in[0]) :
		       b.c(SPYRE_KTYPE_BOOL, 0);), nullptr},
	{"@ @.out", "isposinf", K_CMP, 0, E(
		return is_f32(x) ? b.cmp(SPYRE_KCMP_EQ, in[0], b.f(INFINITY)) :
		       b.c(SPYRE_KTYPE_BOOL, 0);), nullptr},
	{"@ @.out", "isneginf", K_CMP, 0, E(
		return is_f32(x) ? b.cmp(SPYRE_KCMP_EQ, in[0], b.f(-INFINITY)) :
		       b.c(SPYRE_KTYPE_BOOL, 0);), nullptr},
	{"@ @.out", "signbit", K_CMP, 0, E(
		if (is_f32(x))
			return b.cmp(SPYRE_KCMP_LT,
				     spyre_kernel_bitcast(b.k, SPYRE_KTYPE_I32,
							  in[0]),
				     b.c(SPYRE_KTYPE_I32, 0));
		return b.cmp(SPYRE_KCMP_LT, in[0], zero(b, x));), nullptr},
	// ---- binary arithmetic ----
	{BIN, "add", K_SAME, F_ALPHA,
	 E(return b.fma(in[1], in[2], in[0]);), nullptr},
	{BIN, "sub", K_SAME, F_ALPHA | F_SUBCHK,
	 E(return b.fma(in[1], b.neg(in[2]), in[0]);), nullptr},
	{"@.Tensor @.Scalar @.Tensor_out @.Scalar_out", "rsub", K_SAME,
	 F_ALPHA | F_SUBCHK, E(return b.fma(in[0], b.neg(in[2]), in[1]);),
	 nullptr},
	{BIN, "mul", K_SAME, 0, E(return b.mul(in[0], in[1]);), nullptr},
	{BIN, "div", K_FLOAT, 0, E(return b.div(in[0], in[1]);), nullptr},
	{"@.Tensor_mode @_.Tensor_mode @.out_mode @.Scalar_mode @_.Scalar_mode "
	 "@.Scalar_mode_out", "div", K_FLOAT,
	 F_DIVMODE | F_NOBOOL | F_INTDIV | F_ROUNDSTEPS, E(
		switch (x.at(0)) {
		case 2:	// the half types truncate the quotient rounded to
			// the dtype, as the CPU kernel does
			if (x.rdt)
				return b.un(SPYRE_KOP_TRUNC,
					    rnd(b, b.div(in[0], in[1]), x));
			return b.op(SPYRE_KOP_TRUNCDIV, in[0], in[1]);
		case 3: return b.op(SPYRE_KOP_FLOORDIV, in[0], in[1]);
		default: return b.div(in[0], in[1]);
		}), nullptr},
	{"@ @_.Tensor @.out @.Scalar @_.Scalar", "floor_divide", K_SAME, F_NOBOOL | F_INTDIV,
	 E(return b.op(SPYRE_KOP_FLOORDIV, in[0], in[1]);), nullptr},
	{"@.Tensor @_.Tensor @.Tensor_out @.Scalar @_.Scalar @.Scalar_out "
	 "@.Scalar_Tensor @.Scalar_Tensor_out", "remainder", K_SAME,
	 F_NOBOOL | F_INTDIV,
	 E(return b.op(SPYRE_KOP_REM, in[0], in[1]);), nullptr},
	{"@.Tensor @_.Tensor @.Tensor_out @.Scalar @_.Scalar @.Scalar_out",
	 "fmod", K_SAME, F_NOBOOL | F_INTDIV,
	 E(return b.op(SPYRE_KOP_FMOD, in[0], in[1]);), nullptr},
	{"@.Tensor_Tensor @_.Tensor @.Tensor_Tensor_out @.Tensor_Scalar "
	 "@_.Scalar @.Tensor_Scalar_out @.Scalar @.Scalar_out", "pow", K_SAME,
	 F_NOBOOL, E(return b.op(SPYRE_KOP_POW, in[0], in[1]);), nullptr},
	{"@ @_ @.out", "atan2", K_FLOAT, 0,
	 E(return b.op(SPYRE_KOP_ATAN2, in[0], in[1]);), nullptr},
	{"@ @_ @.out", "hypot", K_FLOAT, F_FLOATONLY,
	 E(return b.op(SPYRE_KOP_HYPOT, in[0], in[1]);),
	 E(return b.un(SPYRE_KOP_SQRT, b.fma(in[0], in[0],
					     b.mul(in[1], in[1])));)},
	// logaddexp(2): equal infinities give themselves, else
	// max + log1p(exp(-|a - b|)) (base 2: log1p(exp2(..)) / ln 2), the
	// CPU's formulas
	{"@ @.out", "logaddexp", K_SAME, F_FLOATONLY, E(
		int d = b.neg(b.un(SPYRE_KOP_ABS, b.sub(in[0], in[1])));
		int r = b.add(b.max(in[0], in[1]),
			      b.un(SPYRE_KOP_LOG1P, b.un(SPYRE_KOP_EXP, d)));
		int inf = b.op(SPYRE_KOP_AND, b.un(SPYRE_KOP_ISINF, in[0]),
			       b.cmp(SPYRE_KCMP_EQ, in[0], in[1]));
		return b.sel(inf, in[0], r);), nullptr},
	{"@ @.out", "logaddexp2", K_SAME, F_FLOATONLY, E(
		int d = b.neg(b.un(SPYRE_KOP_ABS, b.sub(in[0], in[1])));
		int l = b.un(SPYRE_KOP_LOG1P, b.un(SPYRE_KOP_EXP2, d));
		int r = b.add(b.max(in[0], in[1]),
			      b.mul(l, b.f(static_cast<float>(1.0 / M_LN2))));
		int inf = b.op(SPYRE_KOP_AND, b.un(SPYRE_KOP_ISINF, in[0]),
			       b.cmp(SPYRE_KCMP_EQ, in[0], in[1]));
		return b.sel(inf, in[0], r);), nullptr},
	// heaviside(x, values): values where x is 0, else x > 0 (NaN: 0)
	{"@ @_ @.out", "heaviside", K_SAME, F_SAMEDT, E(
		int z = zero(b, x);
		return b.sel(b.cmp(SPYRE_KCMP_EQ, in[0], z), in[1],
			     b.sel(b.cmp(SPYRE_KCMP_GT, in[0], z), one(b, x),
				   z));), nullptr},
	{BIN, "copysign", K_FLOAT, 0,
	 E(return copysign_of(b, in[0], in[1]);), nullptr},
	{"@ @.out", "maximum", K_SAME, 0, E(return b.max(in[0], in[1]);), nullptr},
	{"@ @.out", "minimum", K_SAME, 0, E(return b.min(in[0], in[1]);), nullptr},
	{"@ @.out", "fmax", K_SAME, 0,
	 E(return b.op(SPYRE_KOP_MAX, in[0], in[1], NONE, ignore_nan(x));),
	 nullptr},
	{"@ @.out", "fmin", K_SAME, 0,
	 E(return b.op(SPYRE_KOP_MIN, in[0], in[1], NONE, ignore_nan(x));),
	 nullptr},
	{"@.Tensor @_.Tensor @.OutTensor @.Scalar_Self @.Scalar_Other "
	 "@_.Scalar_Other @.OutScalar_Self @.OutScalar_Other", "xlogy", K_FLOAT,
	 0, E(
		int z = b.f(0.0f);
		int r = b.sel(b.cmp(SPYRE_KCMP_EQ, in[0], z), z,
			      b.mul(in[0], b.un(SPYRE_KOP_LOG, in[1])));
		return b.sel(b.un(SPYRE_KOP_ISNAN, in[1]), in[1], r);), nullptr},
	// special_xlog1py(a, b): NaN where b is, else 0 where a is 0, else
	// a * log1p(b)
	{"@ @.self_scalar @.other_scalar @.out @.self_scalar_out "
	 "@.other_scalar_out", "special_xlog1py", K_FLOAT, 0, E(
		int z = b.f(0.0f);
		int r = b.sel(b.cmp(SPYRE_KCMP_EQ, in[0], z), z,
			      b.mul(in[0], b.un(SPYRE_KOP_LOG1P, in[1])));
		return b.sel(b.un(SPYRE_KOP_ISNAN, in[1]), in[1], r);), nullptr},
	{"@.Scalar @_.Scalar @.Scalar_out @.Tensor @_.Tensor @.Tensor_out",
	 "lerp", K_SAME, F_FLOATONLY, E(
		int d = b.sub(in[1], in[0]);
		int lo = b.fma(in[2], d, in[0]);
		int hi = b.sub(in[1], b.mul(d, b.sub(b.f(1.0f), in[2])));
		return b.sel(b.cmp(SPYRE_KCMP_LT, b.un(SPYRE_KOP_ABS, in[2]),
				   b.f(0.5f)), lo, hi);), nullptr},
	{"@ @_ @.out", "addcmul", K_SAME, F_NOBOOL,
	 E(return b.add(in[0], b.mul(b.mul(in[3], in[1]), in[2]));), nullptr},
	// beta * self + alpha * vec1 (x) vec2, rounded as the CPU kernel
	// (beta and alpha in the dtype, then step by step); beta 0 ignores
	// self (NaN included)
	{"@ @_ @.out", "addr", K_SAME, F_OUTER | F_ROUNDSTEPS, E(
		int z = zero(b, x);
		int beta = rnd(b, in[3], x), alpha = rnd(b, in[4], x);
		int r = rnd(b, b.mul(rnd(b, b.mul(alpha, in[1]), x), in[2]), x);
		int s = b.sel(b.cmp(SPYRE_KCMP_EQ, beta, z), z,
			      rnd(b, b.mul(beta, in[0]), x));
		return rnd(b, b.add(s, r), x);), nullptr},
	{"@ @_ @.out", "addcdiv", K_SAME, F_FLOATONLY,
	 E(return b.add(in[0], b.mul(in[3], b.div(in[1], in[2])));), nullptr},
	// ---- clamp: scalar or tensor bounds, either optional ----
	{"@ @_ @.out @.Tensor @_.Tensor @.Tensor_out", "clamp", K_SAME,
	 F_NOBOOL | F_NEEDONE, E(
		if (x.has(1) && x.has(2))
			return b.op(SPYRE_KOP_CLAMP, in[0], in[1], in[2]);
		return x.has(1) ? b.max(in[0], in[1]) : b.min(in[0], in[2]);),
	 nullptr},
	{"@ @_ @.out @.Tensor @_.Tensor @.Tensor_out", "clamp_min", K_SAME,
	 0, E(return b.max(in[0], in[1]);), nullptr},
	{"@ @_ @.out @.Tensor @_.Tensor @.Tensor_out", "clamp_max", K_SAME,
	 0, E(return b.min(in[0], in[1]);), nullptr},
	// ---- comparisons, logic, bits ----
	{CMPN, "eq", K_CMP, 0, E(return b.cmp(SPYRE_KCMP_EQ, in[0], in[1]);), nullptr},
	{CMPN, "ne", K_CMP, 0, E(return b.cmp(SPYRE_KCMP_NE, in[0], in[1]);), nullptr},
	{CMPN, "lt", K_CMP, 0, E(return b.cmp(SPYRE_KCMP_LT, in[0], in[1]);), nullptr},
	{CMPN, "le", K_CMP, 0, E(return b.cmp(SPYRE_KCMP_LE, in[0], in[1]);), nullptr},
	{CMPN, "gt", K_CMP, 0, E(return b.cmp(SPYRE_KCMP_GT, in[0], in[1]);), nullptr},
	{CMPN, "ge", K_CMP, 0, E(return b.cmp(SPYRE_KCMP_GE, in[0], in[1]);), nullptr},
	{U, "logical_and", K_LOGIC, 0,
	 E(return b.op(SPYRE_KOP_AND, in[0], in[1]);), nullptr},
	{U, "logical_or", K_LOGIC, 0,
	 E(return b.op(SPYRE_KOP_OR, in[0], in[1]);), nullptr},
	{U, "logical_xor", K_LOGIC, 0,
	 E(return b.op(SPYRE_KOP_XOR, in[0], in[1]);), nullptr},
	{U, "logical_not", K_LOGIC, 0, E(return b.op(SPYRE_KOP_NOT, in[0]);),
	 nullptr},
	{BITN, "bitwise_and", K_BITS, 0,
	 E(return b.op(SPYRE_KOP_AND, in[0], in[1]);), nullptr},
	{BITN, "bitwise_or", K_BITS, 0,
	 E(return b.op(SPYRE_KOP_OR, in[0], in[1]);), nullptr},
	{BITN, "bitwise_xor", K_BITS, 0,
	 E(return b.op(SPYRE_KOP_XOR, in[0], in[1]);), nullptr},
	{U, "bitwise_not", K_BITS, 0, E(return b.op(SPYRE_KOP_NOT, in[0]);),
	 nullptr},
	{"@.Tensor @_.Tensor @.Tensor_out @.Tensor_Scalar @_.Tensor_Scalar "
	 "@.Tensor_Scalar_out @.Scalar_Tensor @.Scalar_Tensor_out",
	 "bitwise_left_shift", K_BITS, F_NOBOOL,
	 E(return b.op(SPYRE_KOP_SHL, in[0], in[1]);), nullptr},
	{"@.Tensor @_.Tensor @.Tensor_out @.Tensor_Scalar @_.Tensor_Scalar "
	 "@.Tensor_Scalar_out @.Scalar_Tensor @.Scalar_Tensor_out",
	 "bitwise_right_shift", K_BITS, F_NOBOOL,
	 E(return b.op(SPYRE_KOP_SHR, in[0], in[1]);), nullptr},
	{"@.Scalar @.Tensor", "__lshift__", K_BITS, F_NOBOOL,
	 E(return b.op(SPYRE_KOP_SHL, in[0], in[1]);), nullptr},
	{"@.Scalar @.Tensor", "__rshift__", K_BITS, F_NOBOOL,
	 E(return b.op(SPYRE_KOP_SHR, in[0], in[1]);), nullptr},
	// ---- selection ----
	{"@.self @.self_out", "where", K_SAME, F_ARG0COND,
	 E(return b.sel(b.cvt(x.raw[0], SPYRE_KTYPE_BOOL), in[1], in[2]);),
	 nullptr},
	{"@_.Scalar @_.Tensor", "masked_fill", K_SAME, F_SELFTYPE, E(
		return b.sel(b.cvt(x.raw[1], SPYRE_KTYPE_BOOL), in[2], in[0]);),
	 nullptr},
	// a copy in the output's dtype (fill_ with a tensor value, casts)
	{"@.Tensor", "fill_", K_SAME, F_SELFTYPE, E(return in[1];), nullptr},
};

#undef E
#undef MATH

// ---- argument layouts -----------------------------------------------------

enum Role : uint8_t {
	R_TENSOR,	// a tensor input (a CPU 0-dim one becomes a scalar)
	R_TENSOR_OPT,
	R_SCALAR,	// Scalar, float or int
	R_SCALAR_OPT,
	R_STR,		// attribute: str or str?
	R_BOOL,		// attribute: bool
	R_OUT,		// the out= tensor
};

struct Arg {
	Role role;
	bool promote;	// takes part in type promotion
	bool alpha;	// the "alpha" scalar (alpha_check)
	bool is_self;	// in-place: the written self
};

// The boxed kernel of one overload.
struct PwKernel final : public c10::OperatorKernel {
	const Entry *e;
	uint32_t id;		// the table line
	std::string name;	// "aten::add.Tensor", for the counts
	std::atomic<int64_t> *counter = nullptr;
	std::vector<Arg> args;
	bool inplace = false;
	size_t outarg = 0;	// the out= argument's index
	int nin = 0;		// tensor and scalar inputs

	void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet,
			torch::jit::Stack *stack);
	bool run(torch::jit::Stack *stack);
};

// A string attribute's code: 0 None/"none", 1 "tanh", 2 "trunc",
// 3 "floor"; -1 anything else.
int str_code(const c10::IValue &v)
{
	if (v.isNone())
		return 0;
	const std::string &s = v.toStringRef();
	if (s == "none")
		return 0;
	if (s == "tanh")
		return 1;
	if (s == "trunc")
		return 2;
	if (s == "floor")
		return 3;
	return -1;
}

// What build_pw() needs to make the program of one call's signature.
struct PwBuild {
	const Entry *e;
	Expr expr;
	int nin;
	bool scalar[kMaxIn];		// input i is a launch parameter
	bool present[kMaxIn];
	uint32_t in_dt[kMaxIn];		// tensor inputs' card dtypes
	uint32_t out_dt;
	uint32_t ct;
	int np;
	X x;
};

int build_pw(struct spyre_kernel **kp, const void *ctx)
{
	const PwBuild &p = *static_cast<const PwBuild *>(ctx);
	uint32_t dts[kMaxIn + 1];
	int nt = 0;
	for (int i = 0; i < p.nin; i++)
		if (p.present[i] && !p.scalar[i])
			dts[nt++] = p.in_dt[i];
	dts[nt] = p.out_dt;
	int nscal = 0;
	for (int i = 0; i < p.nin; i++)
		nscal += p.present[i] && p.scalar[i];
	unsigned int nparams = static_cast<unsigned int>((nt + 1) * p.np + nscal);
	int rc = spyre_kernel_create(dts, static_cast<unsigned int>(nt + 1),
				     nparams, static_cast<unsigned int>(p.np), 0,
				     kp);
	if (rc)
		return rc;
	B b{*kp};
	int raw[kMaxIn], in[kMaxIn];
	unsigned int t = 0, sp = static_cast<unsigned int>((nt + 1) * p.np);
	for (int i = 0; i < p.nin; i++) {
		raw[i] = in[i] = NONE;
		if (!p.present[i])
			continue;
		if (p.scalar[i]) {
			raw[i] = b.param(p.ct, sp++);
		} else {
			int off = point_offset(b, p.np, t * p.np);
			raw[i] = spyre_kernel_load(b.k, t, off, NONE, NONE);
			t++;
		}
		in[i] = b.cvt(raw[i], p.ct);
	}
	X x = p.x;
	x.raw = raw;
	int r = p.expr(b, in, x);
	r = b.cvt(r, vtype(p.out_dt));
	int off = point_offset(b, p.np, t * p.np);
	spyre_kernel_store(b.k, t, off, r, NONE, 0);
	return spyre_kernel_error(b.k);
}

// The value of CPU 0-dim tensor @t (wrapped numbers without a dispatch).
at::Scalar cpu_scalar(const at::Tensor &t)
{
	const void *p = t.const_data_ptr();
	switch (t.scalar_type()) {
	case at::kDouble: return *static_cast<const double *>(p);
	case at::kFloat: return *static_cast<const float *>(p);
	case at::kLong: return *static_cast<const int64_t *>(p);
	case at::kInt: return *static_cast<const int32_t *>(p);
	case at::kBool: return *static_cast<const bool *>(p);
	default: return t.item();
	}
}

at::ScalarType default_float()
{
	return c10::typeMetaToScalarType(c10::get_default_dtype());
}

// The largest finite value of float dtype @t (nan_to_num's default).
double max_finite(at::ScalarType t)
{
	switch (t) {
	case at::kHalf: return 65504.0;
	case at::kBFloat16: return 3.3895313892515355e38;
	case at::kFloat8_e4m3fn: return 448.0;
	case at::kFloat8_e5m2: return 57344.0;
	default: return FLT_MAX;
	}
}

void PwKernel::operator()(const c10::OperatorHandle &op, c10::DispatchKeySet,
			  torch::jit::Stack *stack)
{
	if (!run(stack))
		fallback(op, stack);
}

bool PwKernel::run(torch::jit::Stack *stack)
{
	const size_t nargs = args.size();
	auto iv = torch::jit::last(*stack, nargs);
	const at::Tensor *tin[kMaxIn] = {};
	at::Scalar sval[kMaxIn];
	bool scalar[kMaxIn] = {}, present[kMaxIn] = {};
	const at::Tensor *out = nullptr;
	uint32_t attr = 0;
	int nattr = 0, card = -1, k = 0;
	at::native::ResultTypeState st{};
	at::ScalarType self_type = at::ScalarType::Undefined;
	const at::Scalar *alpha = nullptr;
	for (size_t a = 0; a < nargs; a++) {
		const Arg &A = args[a];
		const c10::IValue &v = iv[a];
		switch (A.role) {
		case R_TENSOR:
		case R_TENSOR_OPT: {
			if (v.isNone()) {
				k++;
				break;
			}
			const at::Tensor &t = v.toTensor();
			if (!t.defined()) {
				k++;
				break;
			}
			if (t.device().type() == c10::DeviceType::PrivateUse1) {
				if (card < 0)
					card = t.device().index();
				else if (card != t.device().index())
					return false;
				if (kdtype(t.scalar_type()) == 0)
					return false;
				tin[k] = &t;
			} else if (t.device().is_cpu() && t.dim() == 0) {
				if (t.is_complex() || A.is_self)
					return false;
				scalar[k] = true;
				sval[k] = cpu_scalar(t);
			} else {
				return false;
			}
			present[k] = true;
			if (self_type == at::ScalarType::Undefined)
				self_type = t.scalar_type();
			if (A.promote)
				st = at::native::update_result_type_state(t, st);
			if (A.is_self)
				out = &t;
			k++;
			break;
		}
		case R_SCALAR:
		case R_SCALAR_OPT:
			if (!v.isNone()) {
				sval[k] = v.toScalar();
				scalar[k] = present[k] = true;
				if (sval[k].isComplex())
					return false;
				if (A.promote)
					st = at::native::update_result_type_state(
						sval[k], st);
				if (A.alpha)
					alpha = &sval[k];
			}
			k++;
			break;
		case R_STR: {
			int c = str_code(v);
			if (c < 0)
				return false;
			attr |= static_cast<uint32_t>(c) << (2 * nattr++);
			break;
		}
		case R_BOOL:
			attr |= static_cast<uint32_t>(v.toBool()) << (2 * nattr++);
			break;
		case R_OUT: {
			const at::Tensor &t = v.toTensor();
			if (t.device().type() != c10::DeviceType::PrivateUse1)
				return false;
			if (card < 0)
				card = t.device().index();
			else if (card != t.device().index())
				return false;
			out = &t;
			break;
		}
		}
	}
	if (card < 0)
		return false;
	if ((e->flags & F_NEEDONE) && !present[1] && !present[2])
		return false;
	if (e->flags & F_SAMEDT)
		for (int i = 1; i < kMaxIn; i++)
			if (tin[i] && tin[0] &&
			    tin[i]->scalar_type() != tin[0]->scalar_type())
				return false;
	at::Tensor outer[2];
	if (e->flags & F_OUTER) {
		// addr: the CPU's checks; mixed dtypes or operands off the
		// card are the CPU's to refuse
		for (int i = 0; i < 3; i++)
			if (!tin[i] || tin[i]->scalar_type() != self_type)
				return false;
		TORCH_CHECK(tin[1]->dim() == 1, "addr: Expected 1-D argument "
			    "vec1, but got ", tin[1]->dim(), "-D");
		TORCH_CHECK(tin[2]->dim() == 1, "addr: Expected 1-D argument "
			    "vec2, but got ", tin[2]->dim(), "-D");
		for (int i = 3; i <= 4; i++) {
			const char *n = i == 3 ? "beta" : "alpha";
			TORCH_CHECK(!sval[i].isBoolean() || self_type == at::kBool,
				    "Boolean ", n, " only supported for Boolean "
				    "results.");
			TORCH_CHECK(at::isFloatingType(self_type) ||
				    sval[i].isIntegral(true), "For integral "
				    "input tensors, argument ", n, " must not "
				    "be a floating point number.");
		}
		c10::DimVector want{tin[1]->size(0), tin[2]->size(0)};
		if (at::IntArrayRef(at::infer_size_dimvector(tin[0]->sizes(),
							     want)) !=
		    at::IntArrayRef(want))
			return false;
		outer[0] = tin[1]->unsqueeze(1);
		outer[1] = tin[2]->unsqueeze(0);
		tin[1] = &outer[0];
		tin[2] = &outer[1];
	}
	at::ScalarType common = (e->flags & F_SELFTYPE) ? self_type :
				at::native::result_type(st);
	if (common == at::ScalarType::Undefined || kdtype(common) == 0)
		return false;
	bool is_int = at::isIntegralType(common, true);
	if ((e->flags & F_NOBOOL) && common == at::kBool)
		return false;
	if ((e->flags & F_FLOATONLY) && is_int)
		return false;
	Kind kind = e->kind;
	if ((e->flags & F_DIVMODE) && (attr & 3))
		kind = K_SAME;
	if (kind == K_BITS && !is_int)
		return false;
	if ((e->flags & F_ALPHA) && alpha)
		at::native::alpha_check(common, *alpha);
	if ((e->flags & F_INTDIV) && is_int && !((e->flags & F_DIVMODE) &&
						  !(attr & 3))) {
		// PyTorch's CPU kernels raise on an integer division by zero
		// (before anything is written, here): a tensor divisor is
		// checked on the card, which waits for it
		bool zero;
		if (scalar[1])
			zero = sval[1].isFloatingPoint() ?
			       sval[1].toDouble() == 0.0 : sval[1].toLong() == 0;
		else
			zero = tin[1] && tin[1]->numel() &&
			       at::eq(*tin[1], 0).any().item<bool>();
		TORCH_CHECK(!zero, "ZeroDivisionError");
	}
	if (e->flags & F_SUBCHK) {
		for (int i = 0; i < 2; i++)
			TORCH_CHECK(!present[i] || !((tin[i] && tin[i]->scalar_type() ==
				    at::kBool) || (scalar[i] && sval[i].isBoolean())),
				    "Subtraction, the `-` operator, with a bool "
				    "tensor is not supported. If you are trying to "
				    "invert a mask, use the `~` or `logical_not()` "
				    "operator instead.");
	}
	at::ScalarType res = common;
	uint32_t ct;
	switch (kind) {
	case K_FLOAT:
		if (is_int)
			res = default_float();
		ct = SPYRE_KTYPE_F32;
		break;
	case K_CMP:
		res = at::kBool;
		ct = ctype(common);
		break;
	case K_LOGIC:
		res = at::kBool;
		ct = SPYRE_KTYPE_BOOL;
		break;
	case K_BITS:
		ct = ctype(common, SPYRE_KTYPE_BOOL);
		break;
	default:
		ct = ctype(common);
		break;
	}
	// shape
	c10::DimVector shape;
	for (int i = 0; i < nin; i++)
		if (tin[i])
			shape = at::infer_size_dimvector(shape, tin[i]->sizes());
	c10::DeviceGuard g(c10::Device(c10::DeviceType::PrivateUse1,
				       static_cast<c10::DeviceIndex>(card)));
	at::Tensor result;
	if (out) {
		TORCH_CHECK(at::canCast(res, out->scalar_type()),
			    "result type ", res, " can't be cast to the desired "
			    "output type ", out->scalar_type());
		if (kdtype(out->scalar_type()) == 0)
			return false;
		if (inplace) {
			TORCH_CHECK(out->sizes() == at::IntArrayRef(shape),
				    "output with shape ", out->sizes(),
				    " doesn't match the broadcast shape ",
				    at::IntArrayRef(shape));
		} else {
			at::native::resize_output(*out, shape);
		}
		result = *out;
	} else {
		result = at::empty(shape, at::TensorOptions().dtype(res).device(
			c10::DeviceType::PrivateUse1, card));
	}
	if (result.numel() == 0)
		goto done;
	{
		at::Tensor held[kMaxIn];
		if (out) {
			c10::SmallVector<at::Tensor, kMaxIn> ins;
			for (int i = 0; i < nin; i++)
				if (tin[i])
					ins.push_back(*tin[i]);
			check_overlap(result, ins);
			for (int i = 0; i < nin; i++)
				if (tin[i]) {
					held[i] = unalias(*tin[i], result);
					tin[i] = &held[i];
				}
		}
		Space s;
		s.init(shape);
		for (int i = 0; i < nin; i++)
			if (tin[i])
				s.add(*tin[i]);
		int oi = s.add(result);
		if (!s.collapse())
			return false;
		PwBuild pb;
		pb.e = e;
		pb.expr = e->expr;
		pb.nin = nin;
		pb.ct = ct;
		pb.np = s.np;
		pb.out_dt = kdtype(result.scalar_type());
		Key key;
		key.op = id;
		key.ct = static_cast<uint8_t>(ct);
		key.npdims = static_cast<uint8_t>(s.np);
		key.nops = static_cast<uint8_t>(nin);
		for (int i = 0; i < nin; i++) {
			pb.scalar[i] = scalar[i];
			pb.present[i] = present[i];
			pb.in_dt[i] = tin[i] ? kdtype(tin[i]->scalar_type()) : 0;
			key.dt[i] = static_cast<uint8_t>(!present[i] ? 0 :
				    scalar[i] ? 0x40 : pb.in_dt[i]);
		}
		key.dt[kMaxIn] = static_cast<uint8_t>(pb.out_dt);
		// the op's extra launch values
		if (e->flags & F_NAN2NUM) {
			double m = max_finite(result.scalar_type());
			double def[3] = {0.0, m, -m};
			for (int i = 1; i <= 3; i++)
				if (!present[i]) {
					sval[i] = at::Scalar(def[i - 1]);
					scalar[i] = present[i] = true;
					pb.scalar[i] = pb.present[i] = true;
				}
			for (int i = 1; i <= 3; i++)
				key.dt[i] = 0x40;
		}
		if (e->flags & F_DECIMALS) {
			int64_t d = sval[1].toLong();
			if (d < 0)
				attr |= 3u << 6;
			sval[1] = at::Scalar(static_cast<double>(
				static_cast<float>(std::pow(10.0, std::abs(d)))));
		}
		uint32_t pres = 0;
		for (int i = 0; i < nin; i++)
			pres |= static_cast<uint32_t>(present[i]) << i;
		key.variant = attr | (pres << 16);
		uint32_t rdt = 0;
		if ((e->flags & F_ROUNDSTEPS) &&
		    (common == at::kHalf || common == at::kBFloat16))
			rdt = kdtype(common);
		key.dt[kMaxIn + 1] = static_cast<uint8_t>(rdt);
		pb.x = X{ct, nullptr, pres, attr, rdt};
		const Prog *prog = program(card, key, build_pw, &pb);
		if (prog->err < 0 && e->alt) {
			pb.expr = e->alt;
			key.variant |= 1u << 31;
			prog = program(card, key, build_pw, &pb);
		}
		if (prog->err < 0)
			return false;
		Launch L;
		unsigned int t = 0;
		for (int i = 0; i < nin; i++)
			if (tin[i]) {
				L.bind(t, *tin[i], s, static_cast<int>(t),
				       t * s.np);
				t++;
			}
		L.bind(t, result, s, oi, t * s.np);
		unsigned int sp = (t + 1) * s.np;
		for (int i = 0; i < nin; i++)
			if (present[i] && scalar[i])
				L.params[sp++] = scalar_param(sval[i], ct);
		L.sizes(s);
		kgen::run(card, prog, L, t + 1, sp);
	}
done:
	if (counter)
		(*counter)++;
	if (out) {
		c10::IValue r = iv[inplace ? 0 : outarg];
		torch::jit::drop(*stack, nargs);
		stack->push_back(std::move(r));
	} else {
		torch::jit::drop(*stack, nargs);
		stack->push_back(std::move(result));
	}
	return true;
}

// The layout of @schema's arguments for table line @e, or false when the
// kernel cannot read it (an argument type it does not know, several outputs).
bool layout(const c10::FunctionSchema &schema, const Entry &e, PwKernel &k)
{
	if (schema.returns().size() != 1)
		return false;
	int nout = 0, idx = 0;
	const auto &as = schema.arguments();
	for (size_t i = 0; i < as.size(); i++) {
		const c10::Argument &a = as[i];
		Arg A{};
		const c10::TypePtr &t = a.type();
		bool write = a.alias_info() && a.alias_info()->isWrite();
		bool opt = t->kind() == c10::TypeKind::OptionalType;
		c10::TypePtr inner = opt ? t->castRaw<c10::OptionalType>()->getElementType() : t;
		switch (inner->kind()) {
		case c10::TypeKind::TensorType:
			if (write && a.kwarg_only()) {
				A.role = R_OUT;
				k.outarg = i;
				nout++;
				break;
			}
			A.role = opt ? R_TENSOR_OPT : R_TENSOR;
			A.is_self = write && i == 0;
			if (A.is_self)
				k.inplace = true;
			A.promote = !((e.flags & F_ARG0COND) && idx == 0) &&
				    !((e.flags & F_SELFTYPE) && idx != 0);
			idx++;
			break;
		case c10::TypeKind::NumberType:
		case c10::TypeKind::FloatType:
		case c10::TypeKind::IntType:
			A.role = opt ? R_SCALAR_OPT : R_SCALAR;
			A.alpha = a.name() == "alpha";
			A.promote = inner->kind() == c10::TypeKind::NumberType &&
				    (a.name() == "other" || a.name() == "self" ||
				     a.name() == "exponent" || a.name() == "min" ||
				     a.name() == "max");
			idx++;
			break;
		case c10::TypeKind::StringType:
			A.role = R_STR;
			break;
		case c10::TypeKind::BoolType:
			A.role = R_BOOL;
			break;
		default:
			return false;
		}
		k.args.push_back(A);
	}
	if (nout > 1 || idx > kMaxIn || (nout && k.inplace))
		return false;
	k.nin = idx;
	return true;
}

} // namespace

std::atomic<int64_t> *native_counter(const std::string &name);

namespace {

// Names of the overloads a table line registers ('@' replaced).
std::vector<std::string> overloads(const Entry &e)
{
	std::vector<std::string> r;
	std::istringstream in(e.names);
	std::string w;
	while (in >> w) {
		std::string n;
		for (char c : w)
			n += c == '@' ? std::string(e.base) : std::string(1, c);
		r.push_back(n);
	}
	return r;
}

} // namespace

namespace {

const Entry kCast = {"", "_cast", K_SAME, 0,
		     [](B &, const int *in, const X &) -> int { return in[0]; },
		     nullptr};

} // namespace

bool cast_on_card(const at::Tensor &dst, const at::Tensor &src)
{
	uint32_t dd = kdtype(dst.scalar_type()), sd = kdtype(src.scalar_type());
	if (!dd || !sd || dst.device() != src.device() ||
	    dst.sizes() != src.sizes())
		return false;
	if (dst.numel() == 0)
		return true;
	c10::DeviceGuard g(dst.device());
	Space s;
	s.init(dst.sizes());
	s.add(src);
	s.add(dst);
	if (!s.collapse())
		return false;
	PwBuild pb;
	std::memset(static_cast<void *>(&pb), 0, sizeof(pb));
	pb.e = &kCast;
	pb.expr = kCast.expr;
	pb.nin = 1;
	pb.present[0] = true;
	pb.in_dt[0] = sd;
	pb.out_dt = dd;
	pb.ct = vtype(dd);
	pb.np = s.np;
	pb.x = X{pb.ct, nullptr, 1, 0, 0};
	Key key;
	key.op = 0xffff;
	key.ct = static_cast<uint8_t>(pb.ct);
	key.npdims = static_cast<uint8_t>(s.np);
	key.dt[0] = static_cast<uint8_t>(sd);
	key.dt[1] = static_cast<uint8_t>(dd);
	int card = dst.device().index();
	const Prog *prog = program(card, key, build_pw, &pb);
	if (prog->err < 0)
		return false;
	Launch L;
	L.bind(0, src, s, 0, 0);
	L.bind(1, dst, s, 1, s.np);
	L.sizes(s);
	run(card, prog, L, 2, 2 * s.np);
	return true;
}


// ---- index-driven kernels: arange, linspace, eye, tril, triu -------------------

namespace {

enum IKind : uint8_t { IK_ARANGE = 1, IK_LINSPACE, IK_EYE, IK_TRIL, IK_TRIU };

struct IdxBuild {
	IKind kind;
	uint32_t in_dt, out_dt, ct;
	int nd;
};

// arange / linspace: one dim; params: out stride, then the scalars.
// eye: two dims; params: out strides.  tril/triu: nd dims; params: in
// strides, out strides, diagonal.
int build_idx(struct spyre_kernel **kp, const void *ctx)
{
	const IdxBuild &p = *static_cast<const IdxBuild *>(ctx);
	bool tri = p.kind == IK_TRIL || p.kind == IK_TRIU;
	uint32_t dts[2] = {p.in_dt, p.out_dt};
	unsigned int nd = static_cast<unsigned int>(p.nd);
	unsigned int nparams = tri ? 2 * nd + 1 :
			       p.kind == IK_EYE ? 2 : p.kind == IK_ARANGE ? 3 : 5;
	int rc = spyre_kernel_create(tri ? dts : dts + 1, tri ? 2 : 1, nparams,
				     nd, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64, F = SPYRE_KTYPE_F32;
	unsigned int out = tri ? 1 : 0, po = tri ? nd : 0;
	int v;
	if (p.kind == IK_ARANGE) {
		int i = b.cvt(spyre_kernel_idx(b.k, I, 0), p.ct);
		v = b.add(b.param(p.ct, 2), b.mul(i, b.param(p.ct, 1)));
	} else if (p.kind == IK_LINSPACE) {
		// PyTorch's two halves: start + step * i below steps / 2, else
		// end - step * (steps - 1 - i)
		int i = spyre_kernel_idx(b.k, I, 0);
		int steps = b.param(I, 4), step = b.param(F, 3);
		int lo = b.add(b.param(F, 1), b.mul(step, b.cvt(i, F)));
		int back = b.sub(b.sub(steps, b.c(I, 1)), i);
		int hi = b.sub(b.param(F, 2), b.mul(step, b.cvt(back, F)));
		int half = spyre_kernel_op(b.k, SPYRE_KOP_TRUNCDIV, 0, steps,
					   b.c(I, 2), NONE);
		v = b.sel(b.cmp(SPYRE_KCMP_LT, i, half), lo, hi);
	} else if (p.kind == IK_EYE) {
		v = b.cmp(SPYRE_KCMP_EQ, spyre_kernel_idx(b.k, I, 0),
			  spyre_kernel_idx(b.k, I, 1));
	} else {
		int i = spyre_kernel_idx(b.k, I, nd - 2);
		int j = spyre_kernel_idx(b.k, I, nd - 1);
		int d = b.sub(j, i);
		int keep = b.cmp(p.kind == IK_TRIL ? SPYRE_KCMP_LE : SPYRE_KCMP_GE,
				 d, b.param(I, 2 * nd));
		int x = spyre_kernel_load(b.k, 0, point_offset(b, p.nd, 0), NONE,
					  NONE);
		v = b.sel(keep, x, b.c(b.type(x), 0.0));
	}
	spyre_kernel_store(b.k, out, point_offset(b, p.nd, po),
			   b.cvt(v, vtype(p.out_dt)), NONE, 0);
	return spyre_kernel_error(b.k);
}

const Prog *idx_prog(int card, const IdxBuild &ib)
{
	Key key;
	key.op = kOpPointwiseIdx + ib.kind;
	key.ct = static_cast<uint8_t>(ib.ct);
	key.npdims = static_cast<uint8_t>(ib.nd);
	key.dt[0] = static_cast<uint8_t>(ib.in_dt);
	key.dt[1] = static_cast<uint8_t>(ib.out_dt);
	return program(card, key, build_idx, &ib);
}

bool spyre_out(const at::Tensor &t)
{
	return t.device().type() == c10::DeviceType::PrivateUse1 &&
	       kdtype(t.scalar_type()) != 0;
}

at::Tensor &k_arange_out(const at::Scalar &start, const at::Scalar &end,
			 const at::Scalar &step, at::Tensor &out)
{
	at::ScalarType dt = out.scalar_type();
	bool integral = at::isIntegralType(dt, true);
	if (!spyre_out(out) || dt == at::kBool)
		return SPYRE_FALLBACK2(arange, start_out, start, end, step, out);
	double xs = start.toDouble(), xe = end.toDouble(), xst = step.toDouble();
	TORCH_CHECK(xst > 0 || xst < 0, "step must be nonzero");
	TORCH_CHECK(std::isfinite(xs) && std::isfinite(xe),
		    "unsupported range: ", xs, " -> ", xe);
	TORCH_CHECK((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs),
		    "upper bound and larger bound inconsistent with step sign");
	double size_d;
	if (dt == at::kLong) {
		// PyTorch's int64 rule (integer division)
		int64_t s0 = start.toLong(), e0 = end.toLong(), st = step.toLong();
		int64_t sgn = (st > 0) - (st < 0);
		size_d = static_cast<double>((e0 - s0 + st - sgn) / st);
	} else {
		size_d = std::ceil((xe - xs) / xst);
	}
	TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(
			    std::numeric_limits<int64_t>::max()),
		    "invalid size, possible overflow?");
	int64_t size = static_cast<int64_t>(size_d);
	if (out.numel() != size)
		out.resize_({size});
	count_native("aten::arange.start_out");
	if (size == 0)
		return out;
	IdxBuild ib{IK_ARANGE, 0, kdtype(dt),
		    static_cast<uint32_t>(integral ? SPYRE_KTYPE_I64 :
					  SPYRE_KTYPE_F32), 1};
	int card = out.device().index();
	c10::DeviceGuard g(out.device());
	const Prog *prog = idx_prog(card, ib);
	TORCH_CHECK(prog->err == 0, "spyre: the arange kernel was refused");
	Launch L;
	L.operand(0, out, 1 + static_cast<uint64_t>(size - 1) *
		  static_cast<uint64_t>(out.stride(0)));
	L.params[0] = static_cast<uint64_t>(out.stride(0));
	L.params[1] = scalar_param(step, ib.ct);
	L.params[2] = scalar_param(start, ib.ct);
	L.l.npdims = 1;
	L.l.size[0] = static_cast<uint64_t>(size);
	run(card, prog, L, 1, 3);
	return out;
}

// linspace into any float or integer dtype of the card: computed in f32
// with PyTorch's two halves and converted at the store (integers
// truncated); for an integer dtype start and end are that dtype's values
// first, as on the CPU.
at::Tensor &k_linspace_out(const at::Scalar &start, const at::Scalar &end,
			   int64_t steps, at::Tensor &out)
{
	TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
	at::ScalarType dt = out.scalar_type();
	bool integral = at::isIntegralType(dt, false);
	if (!spyre_out(out) || !(integral || dt == at::kFloat ||
				 dt == at::kHalf || dt == at::kBFloat16))
		return SPYRE_FALLBACK2(linspace, out, start, end, steps, out);
	if (out.numel() != steps)
		out.resize_({steps});
	count_native("aten::linspace.out");
	if (steps == 0)
		return out;
	if (steps == 1) {
		out.fill_(start);
		return out;
	}
	IdxBuild ib{IK_LINSPACE, 0, kdtype(dt), SPYRE_KTYPE_F32, 1};
	int card = out.device().index();
	c10::DeviceGuard g(out.device());
	const Prog *prog = idx_prog(card, ib);
	TORCH_CHECK(prog->err == 0, "spyre: the linspace kernel was refused");
	// the step as the CPU kernel computes it: in double for integers,
	// else in the dtype
	float fs, fe, step;
	if (integral) {
		double ds = static_cast<double>(start.toLong());
		double de = static_cast<double>(end.toLong());
		fs = static_cast<float>(ds);
		fe = static_cast<float>(de);
		step = static_cast<float>((de - ds) /
					  static_cast<double>(steps - 1));
	} else {
		auto in_dt = [dt](float v) {
			if (dt == at::kHalf)
				return static_cast<float>(c10::Half(v));
			if (dt == at::kBFloat16)
				return static_cast<float>(c10::BFloat16(v));
			return v;
		};
		fs = in_dt(static_cast<float>(start.toDouble()));
		fe = in_dt(static_cast<float>(end.toDouble()));
		step = in_dt(in_dt(fe - fs) / in_dt(static_cast<float>(steps - 1)));
	}
	Launch L;
	L.operand(0, out, 1 + static_cast<uint64_t>(steps - 1) *
		  static_cast<uint64_t>(out.stride(0)));
	L.params[0] = static_cast<uint64_t>(out.stride(0));
	L.params[1] = f32_param(fs);
	L.params[2] = f32_param(fe);
	L.params[3] = f32_param(step);
	L.params[4] = static_cast<uint64_t>(steps);
	L.l.npdims = 1;
	L.l.size[0] = static_cast<uint64_t>(steps);
	run(card, prog, L, 1, 5);
	return out;
}

at::Tensor &k_eye_out(int64_t n, int64_t m, at::Tensor &out)
{
	TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
	TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
	if (!spyre_out(out))
		return SPYRE_FALLBACK2(eye, m_out, n, m, out);
	out.resize_({n, m});
	count_native("aten::eye.m_out");
	if (n == 0 || m == 0)
		return out;
	IdxBuild ib{IK_EYE, 0, kdtype(out.scalar_type()), SPYRE_KTYPE_BOOL, 2};
	int card = out.device().index();
	c10::DeviceGuard g(out.device());
	const Prog *prog = idx_prog(card, ib);
	TORCH_CHECK(prog->err == 0, "spyre: the eye kernel was refused");
	Launch L;
	L.operand(0, out, 1 + static_cast<uint64_t>(n - 1) * out.stride(0) +
		  static_cast<uint64_t>(m - 1) * out.stride(1));
	L.params[0] = static_cast<uint64_t>(out.stride(0));
	L.params[1] = static_cast<uint64_t>(out.stride(1));
	L.l.npdims = 2;
	L.l.size[0] = static_cast<uint64_t>(n);
	L.l.size[1] = static_cast<uint64_t>(m);
	run(card, prog, L, 1, 2);
	return out;
}

// tril / triu of @self into @out (same sizes; may be @self)
bool tri(IKind kind, const at::Tensor &self, int64_t diagonal,
	 const at::Tensor &out)
{
	int64_t nd = self.dim();
	if (!spyre_out(self) || !spyre_out(out) || nd < 2 ||
	    nd > SPYRE_KERNEL_MAX_PDIMS || out.scalar_type() != self.scalar_type() ||
	    out.device() != self.device())
		return false;
	if (out.numel() == 0)
		return true;
	IdxBuild ib{kind, kdtype(self.scalar_type()), kdtype(out.scalar_type()),
		    0, static_cast<int>(nd)};
	int card = out.device().index();
	c10::DeviceGuard g(out.device());
	const Prog *prog = idx_prog(card, ib);
	if (prog->err < 0)
		return false;
	Launch L;
	uint64_t ei = 1, eo = 1;
	for (int64_t d = 0; d < nd; d++) {
		L.params[d] = static_cast<uint64_t>(self.stride(d));
		L.params[nd + d] = static_cast<uint64_t>(out.stride(d));
		L.l.size[d] = static_cast<uint64_t>(self.size(d));
		ei += static_cast<uint64_t>(self.size(d) - 1) * self.stride(d);
		eo += static_cast<uint64_t>(out.size(d) - 1) * out.stride(d);
	}
	L.params[2 * nd] = static_cast<uint64_t>(diagonal);
	L.operand(0, self, ei);
	L.operand(1, out, eo);
	L.l.npdims = static_cast<uint32_t>(nd);
	run(card, prog, L, 2, static_cast<unsigned int>(2 * nd + 1));
	return true;
}

#define TRI(name, KIND)                                                        \
	at::Tensor k_##name(const at::Tensor &self, int64_t diagonal)          \
	{                                                                      \
		if (spyre_out(self)) {                                         \
			at::Tensor out = at::empty_like(                       \
				self, at::MemoryFormat::Contiguous);           \
			if (tri(KIND, self, diagonal, out)) {                  \
				count_native("aten::" #name);                  \
				return out;                                    \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK(name, self, diagonal);                   \
	}                                                                      \
	at::Tensor &k_##name##_(at::Tensor &self, int64_t diagonal)            \
	{                                                                      \
		at::assert_no_internal_overlap(self);                          \
		if (tri(KIND, self, diagonal, self)) {                         \
			count_native("aten::" #name "_");                      \
			return self;                                           \
		}                                                              \
		return SPYRE_FALLBACK(name##_, self, diagonal);                \
	}                                                                      \
	at::Tensor &k_##name##_out(const at::Tensor &self, int64_t diagonal,   \
				   at::Tensor &out)                            \
	{                                                                      \
		if (spyre_out(self) && spyre_out(out)) {                       \
			at::native::resize_output(out, self.sizes());          \
			check_overlap(out, {self});                            \
			if (tri(KIND, unalias(self, out), diagonal, out)) {    \
				count_native("aten::" #name ".out");           \
				return out;                                    \
			}                                                      \
		}                                                              \
		return SPYRE_FALLBACK2(name, out, self, diagonal, out);        \
	}

TRI(tril, IK_TRIL)
TRI(triu, IK_TRIU)

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("arange.start_out", TORCH_FN(k_arange_out));
	m.impl("linspace.out", TORCH_FN(k_linspace_out));
	m.impl("eye.m_out", TORCH_FN(k_eye_out));
	m.impl("tril", TORCH_FN(k_tril));
	m.impl("tril_", TORCH_FN(k_tril_));
	m.impl("tril.out", TORCH_FN(k_tril_out));
	m.impl("triu", TORCH_FN(k_triu));
	m.impl("triu_", TORCH_FN(k_triu_));
	m.impl("triu.out", TORCH_FN(k_triu_out));
}

namespace {

// torch.ops.spyre.native_ops(): the aten overloads with a spyre kernel
// (generated or hand-written; the boxed fallback is not one of them).
std::vector<std::string> native_ops()
{
	std::vector<std::string> r;
	for (const c10::OperatorName &n :
	     c10::Dispatcher::singleton().getAllOpNames()) {
		auto h = c10::Dispatcher::singleton().findOp(n);
		if (!h || !h->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1))
			continue;
		r.push_back(n.overload_name.empty() ? n.name :
			    n.name + "." + n.overload_name);
	}
	return r;
}

} // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("native_ops() -> str[]", &native_ops);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	for (size_t i = 0; i < sizeof(kTable) / sizeof(kTable[0]); i++) {
		const Entry &e = kTable[i];
		for (const std::string &n : overloads(e)) {
			size_t dot = n.find('.');
			std::string base = dot == std::string::npos ? n : n.substr(0, dot);
			std::string ovl = dot == std::string::npos ? "" : n.substr(dot + 1);
			auto h = c10::Dispatcher::singleton().findSchema(
				{"aten::" + base, ovl});
			if (!h)
				continue;
			auto k = std::make_unique<PwKernel>();
			k->e = &e;
			k->id = static_cast<uint32_t>(i + 1);
			k->name = "aten::" + n;
			if (!layout(h->schema(), e, *k))
				continue;
			k->counter = native_counter(k->name);
			m.impl(n.c_str(), torch::CppFunction::makeFromBoxedFunctor(
				std::move(k)));
		}
	}
}

} // namespace spyre_torch
