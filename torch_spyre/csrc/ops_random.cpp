// SPDX-License-Identifier: MIT
// Random ops on the card: one generated kernel per distribution draws the
// card's counter-based Philox4x32-10 numbers (the KERNEL command's RAND
// instruction) for every element of its output.  The generator's state
// (seed, offset) lives in generator.cpp; an op takes the counter range of
// its numel there (philox_reserve()) and passes the seed and the range's
// offset to the kernel as parameters, and element n of the output (its
// linear index in row-major order, whatever its strides) draws Philox's
// element n of the stream at that offset.  So a value depends on (seed,
// offset, n) only: the same seed gives the same tensor on every card and
// tiling, and two ops never share a stream (the card's counter puts the
// offset above the element's block number: distinct offsets are distinct
// streams, and the offset advances by numel rounded up to 4, at least 4,
// as CUDA's philox offset does, so an op may also use offset + 1..3 for a
// second draw per element).
//
// Ops: uniform_, normal_ (and normal's tensor overloads), log_normal_,
// cauchy_, exponential_, geometric_, bernoulli_ (p a float or a tensor),
// bernoulli.out, random_ (all three overloads; rand, randn, randint and
// bernoulli's functional forms reach these through ATen's composites),
// native_dropout (mask and output in one kernel) and
// native_dropout_backward.  Arguments PyTorch refuses raise the error
// PyTorch's CPU kernels raise; a dtype the card does not hold, or a range
// the kernels do not cover (random_ beyond 63 bits), goes to the counted
// CPU fallback, which still draws from the card's generator.
#include "kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace spyre_torch {

using namespace kgen;

namespace {


enum RKind : uint32_t {
	RK_UNIFORM = 1,	// from + (to - from) * U, to mapped back to from
	RK_NORMAL,	// mean + std * N
	RK_LOG_NORMAL,	// exp(mean + std * N)
	RK_CAUCHY,	// median + sigma * tan(pi * (U - 1/2))
	RK_EXPONENTIAL,	// -log(1 - U) / lambda, never 0
	RK_GEOMETRIC,	// ceil(log(1 - U) / log1p(-p))
	RK_BERN_P,	// U < p (p a scalar)
	RK_BERN_T,	// U < p[i] (p a tensor, checked in [0, 1] on the card)
	RK_RANDOM,	// from + bits mod range (integers)
	RK_DROPOUT,	// mask = U < keep, out = x * mask * scale
};

// RK_RANDOM's variants: how many Philox words a value takes
enum RVariant : uint32_t {
	RV_32 = 0,	// range <= 2^32: one word (unsigned) mod range
	RV_63,		// range < 2^63: two words, 63 bits, mod range
	RV_63_FULL,	// range == 2^63: two words, 63 bits
};

// Parameters: 0 seed, 1 offset, 2..4 the kind's scalars, then each
// operand's strides (np of them) in operand order.
constexpr unsigned int kPSeed = 0, kPOffset = 1, kPA = 2, kPB = 3, kPC = 4;
constexpr unsigned int kPStrides = 5;

struct RandBuild {
	RKind kind;
	uint32_t variant;
	int np;
	uint32_t out_dt, in_dt, mask_dt;	// in_dt/mask_dt 0 when absent
};

unsigned int n_operands(const RandBuild &r)
{
	return 1 + (r.in_dt != 0) + (r.mask_dt != 0);
}

int build_rand(struct spyre_kernel **kp, const void *ctx)
{
	const RandBuild &r = *static_cast<const RandBuild *>(ctx);
	uint32_t dts[3];
	unsigned int nops = 0;
	if (r.in_dt)
		dts[nops++] = r.in_dt;
	unsigned int out = nops;
	dts[nops++] = r.out_dt;
	unsigned int mask = nops;
	if (r.mask_dt)
		dts[nops++] = r.mask_dt;
	unsigned int np = static_cast<unsigned int>(r.np);
	int rc = spyre_kernel_create(dts, nops, kPStrides + nops * np, np, 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64, F = SPYRE_KTYPE_F32;
	int seed = b.param(I, kPSeed), off = b.param(I, kPOffset);
	int n = spyre_kernel_idx(b.k, I, SPYRE_KDIM_POINT);
	auto draw = [&](uint32_t kind, int o) {
		return spyre_kernel_rand(b.k, kind, seed, o, n);
	};
	auto off_of = [&](unsigned int op) {
		return point_offset(b, r.np, kPStrides + op * np);
	};
	int u = NONE, v;
	if (r.kind != RK_NORMAL && r.kind != RK_LOG_NORMAL &&
	    r.kind != RK_RANDOM)
		u = draw(SPYRE_KRAND_UNIFORM, off);
	switch (r.kind) {
	case RK_UNIFORM: {
		// CUDA's rule: computed in f32, rounded to the dtype, and a value
		// that rounds to `to` becomes `from` ([from, to) holds)
		int from = b.param(F, kPA);
		int x = b.fma(u, b.param(F, kPB), from);
		x = spyre_kernel_cvt(b.k, F, x, r.out_dt, 0);
		v = b.sel(b.cmp(SPYRE_KCMP_EQ, x, b.param(F, kPC)), from, x);
		break;
	}
	case RK_NORMAL:
	case RK_LOG_NORMAL:
		v = b.fma(draw(SPYRE_KRAND_NORMAL, off), b.param(F, kPB),
			  b.param(F, kPA));
		if (r.kind == RK_LOG_NORMAL)
			v = b.un(SPYRE_KOP_EXP, v);
		break;
	case RK_CAUCHY: {
		int t = b.mul(b.sub(u, b.f(0.5f)), b.f(3.14159265358979323846f));
		v = b.fma(b.un(SPYRE_KOP_TAN, t), b.param(F, kPB),
			  b.param(F, kPA));
		break;
	}
	case RK_EXPONENTIAL: {
		// 1 - U is in [2^-24, 1], exact; its log is at most -2^-24
		// but for U = 0, which takes -2^-24 too (CUDA's rule: an
		// exponential sample is never 0)
		int lg = b.un(SPYRE_KOP_LOG, b.sub(b.f(1.0f), u));
		lg = b.min(lg, b.f(-0x1p-24f));
		v = b.mul(lg, b.param(F, kPA));		// P[a] = -1 / lambda
		break;
	}
	case RK_GEOMETRIC: {
		int lg = b.un(SPYRE_KOP_LOG, b.sub(b.f(1.0f), u));
		v = b.un(SPYRE_KOP_CEIL, b.div(lg, b.param(F, kPA)));
		break;
	}
	case RK_BERN_P:
		v = b.cmp(SPYRE_KCMP_LT, u, b.param(F, kPA));
		break;
	case RK_BERN_T: {
		int p = b.cvt(spyre_kernel_load(b.k, 0, off_of(0), NONE, NONE), F);
		// CUDA's device-side assertion: a p outside [0, 1] (or NaN)
		// ends the job with an ASSERT status
		spyre_kernel_check(b.k, b.op(SPYRE_KOP_AND,
					     b.cmp(SPYRE_KCMP_GE, p, b.f(0.0f)),
					     b.cmp(SPYRE_KCMP_LE, p, b.f(1.0f))),
				   NONE);
		v = b.cmp(SPYRE_KCMP_LT, u, p);
		break;
	}
	case RK_RANDOM: {
		int lo = b.op(SPYRE_KOP_AND, b.cvt(draw(SPYRE_KRAND_BITS, off), I),
			      b.c(I, 4294967295.0));
		int x = lo;
		if (r.variant != RV_32) {
			int hi = b.cvt(draw(SPYRE_KRAND_BITS,
					    b.add(off, b.c(I, 1.0))), I);
			x = b.op(SPYRE_KOP_OR, b.op(SPYRE_KOP_SHL, hi,
						     b.c(I, 32.0)), lo);
			x = b.op(SPYRE_KOP_AND, x, spyre_kernel_const(
					 b.k, I, std::numeric_limits<int64_t>::max()));
		}
		if (r.variant != RV_63_FULL)
			x = b.op(SPYRE_KOP_REM, x, b.param(I, kPB));
		v = b.add(x, b.param(I, kPA));
		break;
	}
	case RK_DROPOUT: {
		int keep = b.cmp(SPYRE_KCMP_LT, u, b.param(F, kPA));
		int x = b.cvt(spyre_kernel_load(b.k, 0, off_of(0), NONE, NONE), F);
		// x * mask * scale, as PyTorch's kernels (an inf dropped is NaN)
		v = b.mul(b.mul(x, b.cvt(keep, F)), b.param(F, kPB));
		spyre_kernel_store(b.k, mask, off_of(mask), b.cvt(keep, vtype(r.mask_dt)),
				   NONE, 0);
		break;
	}
	default:
		return -EINVAL;
	}
	spyre_kernel_store(b.k, out, off_of(out), b.cvt(v, vtype(r.out_dt)), NONE, 0);
	return spyre_kernel_error(b.k);
}

// The largest finite value of floating dtype @t, and its significand bits
double max_of(at::ScalarType t)
{
	return AT_DISPATCH_FLOATING_TYPES_AND4(
		at::kHalf, at::kBFloat16, at::kFloat8_e4m3fn, at::kFloat8_e5m2,
		t, "max_of", [] {
			return static_cast<double>(
				std::numeric_limits<scalar_t>::max());
		});
}

int digits_of(at::ScalarType t)
{
	return AT_DISPATCH_FLOATING_TYPES_AND4(
		at::kHalf, at::kBFloat16, at::kFloat8_e4m3fn, at::kFloat8_e5m2,
		t, "digits_of", [] {
			return std::numeric_limits<scalar_t>::digits;
		});
}

bool card_tensor(const at::Tensor &t)
{
	return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 &&
	       kdtype(t.scalar_type()) != 0;
}

bool card_float(const at::Tensor &t)
{
	return card_tensor(t) && at::isFloatingType(t.scalar_type());
}

// Run kernel @kind over @out (and @in, broadcast to @out's sizes, and
// @mask, of @out's sizes) with the kind's scalars @a, @b, @c (parameter
// bits), drawing from generator @gen.  Returns false, nothing drawn, when
// the card cannot run it (too many dims after collapsing, a refused
// program): the caller falls back.
bool launch(RKind kind, uint32_t variant, const at::Tensor &out,
	    const at::Tensor &in, const at::Tensor &mask,
	    const std::optional<at::Generator> &gen, uint64_t a, uint64_t b,
	    uint64_t c)
{
	if (out.dim() > kMaxDims)
		return false;
	at::assert_no_internal_overlap(out);
	Space s;
	s.init(out.sizes());
	if (in.defined())
		s.add(in.expand(out.sizes()));
	int oi = s.add(out);
	if (mask.defined())
		s.add(mask);
	if (!s.collapse())
		return false;
	RandBuild rb{kind, variant, s.np, kdtype(out.scalar_type()),
		     in.defined() ? kdtype(in.scalar_type()) : 0,
		     mask.defined() ? kdtype(mask.scalar_type()) : 0};
	Key key;
	key.op = kOpRand + kind;
	key.variant = variant;
	key.npdims = static_cast<uint8_t>(s.np);
	key.nops = static_cast<uint8_t>(n_operands(rb));
	key.dt[0] = static_cast<uint8_t>(rb.out_dt);
	key.dt[1] = static_cast<uint8_t>(rb.in_dt);
	key.dt[2] = static_cast<uint8_t>(rb.mask_dt);
	if (out.numel() == 0)
		return true;
	int card = out.device().index();
	c10::DeviceGuard g(out.device());
	const Prog *prog = program(card, key, build_rand, &rb);
	if (prog->err < 0)
		return false;
	at::Generator gn = spyre_generator(gen, card);
	PhiloxState ps = philox_reserve(gn, static_cast<uint64_t>(out.numel()));
	Launch L;
	L.params[kPSeed] = ps.seed;
	L.params[kPOffset] = ps.offset;
	L.params[kPA] = a;
	L.params[kPB] = b;
	L.params[kPC] = c;
	unsigned int np = static_cast<unsigned int>(s.np);
	for (int i = 0; i < s.nops; i++) {
		const at::Tensor &t = i == oi ? out : i < oi ? in : mask;
		L.operand(static_cast<unsigned int>(i), t, s.extent(i));
		L.strides(s, i, kPStrides + static_cast<unsigned int>(i) * np);
	}
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(s.nops),
	    kPStrides + static_cast<unsigned int>(s.nops) * np);
	return true;
}

// ---- continuous distributions ---------------------------------------------------

// PyTorch's check_uniform_bounds for @self's dtype
void check_uniform(const at::Tensor &self, double from, double to)
{
	double hi = max_of(self.scalar_type());
	TORCH_CHECK(from >= -hi && from <= hi, "from is out of bounds for ",
		    self.scalar_type());
	TORCH_CHECK(to >= -hi && to <= hi, "to is out of bounds for ",
		    self.scalar_type());
	TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, "
		    "but found from=", from, " > to=", to);
	TORCH_CHECK(to - from <= hi, "uniform_ expects to-from <= "
		    "std::numeric_limits<", self.scalar_type(), ">::max(), but "
		    "found to=", to, " and from=", from, " which result in "
		    "to-from to exceed the limit");
}

at::Tensor &k_uniform_(at::Tensor &self, double from, double to,
		       std::optional<at::Generator> gen)
{
	if (card_float(self)) {
		check_uniform(self, from, to);
		if (launch(RK_UNIFORM, 0, self, {}, {}, gen, f32_param(from),
			   f32_param(to - from), f32_param(to))) {
			count_native("aten::uniform_");
			return self;
		}
	}
	return SPYRE_FALLBACK(uniform_, self, from, to, gen);
}

#define CHECK_STD(std_)                                                        \
	TORCH_CHECK((std_) >= 0.0, "normal expects std >= 0.0, but found std ",\
		    (std_))

at::Tensor &k_normal_(at::Tensor &self, double mean, double std,
		      std::optional<at::Generator> gen)
{
	CHECK_STD(std);
	if (card_float(self) &&
	    launch(RK_NORMAL, 0, self, {}, {}, gen, f32_param(mean),
		   f32_param(std), 0)) {
		count_native("aten::normal_");
		return self;
	}
	return SPYRE_FALLBACK(normal_, self, mean, std, gen);
}

// normal's tensor overloads (ATen's rule): standard normal values of the
// broadcast shape, times std, plus mean -- each a kernel on the card.
// A negative std raises as on the CPU (which reads the values: a host
// wait here too).
at::Tensor normal_tensors(const at::Tensor &mean, const at::Tensor &std,
			  double mean_s, double std_s,
			  std::optional<at::Generator> gen, const char *name)
{
	const at::Tensor &like = mean.defined() ? mean : std;
	TORCH_CHECK(!std.defined() ||
		    at::all(std.ge(0)).item<bool>(),
		    "normal expects all elements of std >= 0.0");
	at::DimVector shape(like.sizes().begin(), like.sizes().end());
	if (mean.defined() && std.defined())
		shape = at::infer_size_dimvector(mean.sizes(), std.sizes());
	at::ScalarType dt = mean.defined() ? mean.scalar_type() :
			    std.scalar_type();
	at::Tensor out = at::empty(shape, like.options().dtype(dt));
	k_normal_(out, 0.0, 1.0, gen);
	if (std.defined())
		out.mul_(std);
	else
		out.mul_(std_s);
	if (mean.defined())
		out.add_(mean);
	else
		out.add_(mean_s);
	count_native(name);
	return out;
}

at::Tensor k_normal_tf(const at::Tensor &mean, double std,
		       std::optional<at::Generator> gen)
{
	CHECK_STD(std);
	if (!card_float(mean))
		return SPYRE_FALLBACK2(normal, Tensor_float, mean, std, gen);
	return normal_tensors(mean, {}, 0.0, std, gen,
			      "aten::normal.Tensor_float");
}

at::Tensor k_normal_ft(double mean, const at::Tensor &std,
		       std::optional<at::Generator> gen)
{
	if (!card_float(std))
		return SPYRE_FALLBACK2(normal, float_Tensor, mean, std, gen);
	return normal_tensors({}, std, mean, 0.0, gen,
			      "aten::normal.float_Tensor");
}

at::Tensor k_normal_tt(const at::Tensor &mean, const at::Tensor &std,
		       std::optional<at::Generator> gen)
{
	if (!card_float(mean) || !card_float(std) ||
	    mean.device() != std.device())
		return SPYRE_FALLBACK2(normal, Tensor_Tensor, mean, std, gen);
	return normal_tensors(mean, std, 0.0, 0.0, gen,
			      "aten::normal.Tensor_Tensor");
}

at::Tensor &k_log_normal_(at::Tensor &self, double mean, double std,
			  std::optional<at::Generator> gen)
{
	TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=",
		    std);
	if (card_float(self) &&
	    launch(RK_LOG_NORMAL, 0, self, {}, {}, gen, f32_param(mean),
		   f32_param(std), 0)) {
		count_native("aten::log_normal_");
		return self;
	}
	return SPYRE_FALLBACK(log_normal_, self, mean, std, gen);
}

at::Tensor &k_cauchy_(at::Tensor &self, double median, double sigma,
		      std::optional<at::Generator> gen)
{
	TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found "
		    "sigma=", sigma);
	if (card_float(self) &&
	    launch(RK_CAUCHY, 0, self, {}, {}, gen, f32_param(median),
		   f32_param(sigma), 0)) {
		count_native("aten::cauchy_");
		return self;
	}
	return SPYRE_FALLBACK(cauchy_, self, median, sigma, gen);
}

at::Tensor &k_exponential_(at::Tensor &self, double lambd,
			   std::optional<at::Generator> gen)
{
	TORCH_CHECK(lambd > 0 && !std::isinf(lambd) && !std::isnan(lambd),
		    "exponential_ expects lambda > 0.0, but found lambda=",
		    lambd);
	if (card_float(self) &&
	    launch(RK_EXPONENTIAL, 0, self, {}, {}, gen, f32_param(-1.0 / lambd),
		   0, 0)) {
		count_native("aten::exponential_");
		return self;
	}
	return SPYRE_FALLBACK(exponential_, self, lambd, gen);
}

at::Tensor &k_geometric_(at::Tensor &self, double p,
			 std::optional<at::Generator> gen)
{
	TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), "
		    "but got p=", p);
	if (card_tensor(self) && self.scalar_type() != at::kBool &&
	    launch(RK_GEOMETRIC, 0, self, {}, {}, gen, f32_param(std::log1p(-p)),
		   0, 0)) {
		count_native("aten::geometric_");
		return self;
	}
	return SPYRE_FALLBACK(geometric_, self, p, gen);
}

// ---- bernoulli -------------------------------------------------------------------

at::Tensor &k_bernoulli_p_(at::Tensor &self, double p,
			   std::optional<at::Generator> gen)
{
	TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], "
		    "but got p=", p);
	if (card_tensor(self) &&
	    launch(RK_BERN_P, 0, self, {}, {}, gen, f32_param(p), 0, 0)) {
		count_native("aten::bernoulli_.float");
		return self;
	}
	return SPYRE_FALLBACK2(bernoulli_, float, self, p, gen);
}

// bernoulli_ with a tensor of probabilities: @p broadcast to @self's
// sizes (a CPU p is copied to the card first); a value of @p outside
// [0, 1] ends the kernel with a device-side assertion, as on CUDA.
bool bernoulli_tensor(const at::Tensor &self, const at::Tensor &p,
		      const std::optional<at::Generator> &gen)
{
	if (!card_tensor(self) || !p.defined() ||
	    !at::isFloatingType(p.scalar_type()) || !kdtype(p.scalar_type()))
		return false;
	at::Tensor pc = p.device() == self.device() ? p : p.to(self.device());
	if (!card_float(pc))
		return false;
	pc = kgen::unalias(pc, self);
	return launch(RK_BERN_T, 0, self, pc, {}, gen, 0, 0, 0);
}

at::Tensor &k_bernoulli_t_(at::Tensor &self, const at::Tensor &p,
			   std::optional<at::Generator> gen)
{
	if (bernoulli_tensor(self, p, gen)) {
		count_native("aten::bernoulli_.Tensor");
		return self;
	}
	return SPYRE_FALLBACK2(bernoulli_, Tensor, self, p, gen);
}

at::Tensor &k_bernoulli_out(const at::Tensor &self,
			    std::optional<at::Generator> gen, at::Tensor &out)
{
	if (card_tensor(out)) {
		at::native::resize_output(out, self.sizes());
		if (bernoulli_tensor(out, self, gen)) {
			count_native("aten::bernoulli.out");
			return out;
		}
	}
	return SPYRE_FALLBACK2(bernoulli, out, self, gen, out);
}

// ---- random_ ---------------------------------------------------------------------

// random_ over [from, from + range) (range >= 1): integer dtypes whose
// range holds [from, from + range) and floats whose exact integers do run
// on the card; false for anything else (the caller falls back, where
// PyTorch's CPU kernel raises or warns as it does).
bool random_range(const at::Tensor &self, int64_t from, uint64_t range,
		  const std::optional<at::Generator> &gen)
{
	if (!card_tensor(self) || range == 0)
		return false;
	at::ScalarType t = self.scalar_type();
	int64_t lo, hi;
	if (at::isFloatingType(t)) {
		hi = int64_t(1) << digits_of(t);
		lo = -hi;
	} else if (t == at::kLong) {
		lo = std::numeric_limits<int64_t>::min();
		hi = std::numeric_limits<int64_t>::max();
	} else {
		lo = t == at::kInt ? INT32_MIN : t == at::kShort ? INT16_MIN :
		     t == at::kChar ? INT8_MIN : 0;
		hi = t == at::kInt ? INT32_MAX : t == at::kShort ? INT16_MAX :
		     t == at::kChar ? INT8_MAX : t == at::kBool ? 1 : 255;
	}
	// the last value drawn, from + range - 1, in unsigned arithmetic
	uint64_t last = static_cast<uint64_t>(from) + range - 1;
	if (from < lo || range - 1 > static_cast<uint64_t>(hi) -
	    static_cast<uint64_t>(from) || static_cast<int64_t>(last) > hi)
		return false;
	if (range > (uint64_t(1) << 63))
		return false;
	uint32_t variant = range <= (uint64_t(1) << 32) ? RV_32 :
			   range < (uint64_t(1) << 63) ? RV_63 : RV_63_FULL;
	return launch(RK_RANDOM, variant, self, {}, {}, gen,
		      static_cast<uint64_t>(from), range, 0);
}

// random_(from) without `to` draws up to the dtype's largest value (a
// float's 2^digits): the range from @from, 0 when it is empty.
uint64_t range_to_max(at::ScalarType t, int64_t from)
{
	int64_t mx = at::isFloatingType(t) ? int64_t(1) << digits_of(t) :
		     t == at::kLong ? std::numeric_limits<int64_t>::max() :
		     t == at::kInt ? INT32_MAX : t == at::kShort ? INT16_MAX :
		     t == at::kChar ? INT8_MAX : t == at::kBool ? 1 : 255;
	if (from > mx)
		return 0;
	return static_cast<uint64_t>(mx) - static_cast<uint64_t>(from) + 1;
}

at::Tensor &k_random_from_(at::Tensor &self, int64_t from,
			   std::optional<int64_t> to,
			   std::optional<at::Generator> gen)
{
	if (to.has_value())
		TORCH_CHECK(from < *to, "random_ expects 'from' to be less than "
			    "'to', but got from=", from, " >= to=", *to);
	uint64_t range = !card_tensor(self) ? 0 : to.has_value() ?
		static_cast<uint64_t>(*to) - static_cast<uint64_t>(from) :
		range_to_max(self.scalar_type(), from);
	if (random_range(self, from, range, gen)) {
		count_native("aten::random_.from");
		return self;
	}
	return SPYRE_FALLBACK2(random_, from, self, from, to, gen);
}

at::Tensor &k_random_to_(at::Tensor &self, int64_t to,
			 std::optional<at::Generator> gen)
{
	TORCH_CHECK(0 < to, "random_ expects 'from' to be less than 'to', but "
		    "got from=0 >= to=", to);
	if (random_range(self, 0, static_cast<uint64_t>(to), gen)) {
		count_native("aten::random_.to");
		return self;
	}
	return SPYRE_FALLBACK2(random_, to, self, to, gen);
}

at::Tensor &k_random_(at::Tensor &self, std::optional<at::Generator> gen)
{
	if (card_tensor(self) &&
	    random_range(self, 0, range_to_max(self.scalar_type(), 0), gen)) {
		count_native("aten::random_");
		return self;
	}
	return SPYRE_FALLBACK(random_, self, gen);
}

// ---- dropout -----------------------------------------------------------------------

// aten::native_dropout: in train mode one kernel draws the keep mask
// (U < 1 - p) and writes input * mask * scale (scale 1 / (1 - p), 0 for
// p = 1, as CUDA's) and the bool mask.
std::tuple<at::Tensor, at::Tensor> k_native_dropout(
	const at::Tensor &input, double p, std::optional<bool> train)
{
	TORCH_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout probability has to be "
			  "between 0 and 1, but got ", p);
	if (input.numel() == 0 || (train.has_value() && !*train) || p == 0.0) {
		count_native("aten::native_dropout");
		return {input.clone(), at::ones_like(input, at::kBool)};
	}
	double keep = 1.0 - p;
	at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
	at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool),
					 at::MemoryFormat::Contiguous);
	if (card_float(input) &&
	    launch(RK_DROPOUT, 0, out, input, mask, std::nullopt,
		   f32_param(keep), f32_param(keep == 0.0 ? 0.0 : 1.0 / keep),
		   0)) {
		count_native("aten::native_dropout");
		return {out, mask};
	}
	return SPYRE_FALLBACK(native_dropout, input, p, train);
}

// aten::native_dropout_backward: grad * mask * scale, on the card.
at::Tensor k_native_dropout_backward(const at::Tensor &grad,
				     const at::Tensor &mask, double scale)
{
	TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool "
		    "Scalar Type", mask.scalar_type());
	if (!card_float(grad) || !card_tensor(mask))
		return SPYRE_FALLBACK(native_dropout_backward, grad, mask, scale);
	count_native("aten::native_dropout_backward");
	return grad.mul(mask).mul_(scale);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("uniform_", TORCH_FN(k_uniform_));
	m.impl("normal_", TORCH_FN(k_normal_));
	m.impl("normal.Tensor_float", TORCH_FN(k_normal_tf));
	m.impl("normal.float_Tensor", TORCH_FN(k_normal_ft));
	m.impl("normal.Tensor_Tensor", TORCH_FN(k_normal_tt));
	m.impl("log_normal_", TORCH_FN(k_log_normal_));
	m.impl("cauchy_", TORCH_FN(k_cauchy_));
	m.impl("exponential_", TORCH_FN(k_exponential_));
	m.impl("geometric_", TORCH_FN(k_geometric_));
	m.impl("bernoulli_.float", TORCH_FN(k_bernoulli_p_));
	m.impl("bernoulli_.Tensor", TORCH_FN(k_bernoulli_t_));
	m.impl("bernoulli.out", TORCH_FN(k_bernoulli_out));
	m.impl("random_.from", TORCH_FN(k_random_from_));
	m.impl("random_.to", TORCH_FN(k_random_to_));
	m.impl("random_", TORCH_FN(k_random_));
	m.impl("native_dropout", TORCH_FN(k_native_dropout));
	m.impl("native_dropout_backward", TORCH_FN(k_native_dropout_backward));
}

} // namespace spyre_torch
