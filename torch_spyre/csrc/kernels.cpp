// SPDX-License-Identifier: MIT
// The kernel generator's machinery (kernels.h): dtype and compute-type
// rules, the per-card program cache (build once per signature, upload, keep
// refusals), iteration spaces (broadcast, drop, collapse, split reduction
// dims), launches and PyTorch's overlap checks for outputs.
#include "kernels.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace spyre_torch {
namespace kgen {

// ---- dtypes ------------------------------------------------------------------

uint32_t kdtype(at::ScalarType t)
{
	switch (t) {
	case at::kFloat: return SPYRE_DTYPE_FP32;
	case at::kHalf: return SPYRE_DTYPE_FP16;
	case at::kBFloat16: return SPYRE_DTYPE_BF16;
	case at::kFloat8_e4m3fn: return SPYRE_DTYPE_FP8_E4M3;
	case at::kFloat8_e5m2: return SPYRE_DTYPE_FP8_E5M2;
	case at::kChar: return SPYRE_DTYPE_INT8;
	case at::kByte: return SPYRE_DTYPE_U8;
	case at::kShort: return SPYRE_DTYPE_INT16;
	case at::kInt: return SPYRE_DTYPE_INT32;
	case at::kLong: return SPYRE_DTYPE_INT64;
	case at::kBool: return SPYRE_DTYPE_BOOL;
	default: return 0;
	}
}

uint32_t ctype(at::ScalarType t, uint32_t bool_ct)
{
	if (t == at::kBool)
		return bool_ct;
	if (t == at::kLong)
		return SPYRE_KTYPE_I64;
	if (at::isIntegralType(t, false))
		return SPYRE_KTYPE_I32;
	return SPYRE_KTYPE_F32;
}

uint64_t f32_param(double v)
{
	float f = static_cast<float>(v);
	uint32_t b;
	std::memcpy(&b, &f, 4);
	return b;
}

namespace {

int64_t scalar_int(const at::Scalar &s)
{
	if (s.isFloatingPoint()) {
		double d = s.toDouble();
		if (!(d == d) || d >= 9.2e18 || d <= -9.2e18)
			return std::numeric_limits<int64_t>::min();
		return static_cast<int64_t>(d);
	}
	if (s.isBoolean())
		return s.toBool() ? 1 : 0;
	return s.toLong();
}

} // namespace

uint64_t scalar_param(const at::Scalar &s, uint32_t type)
{
	switch (type) {
	case SPYRE_KTYPE_F32:
		return f32_param(s.isBoolean() ? (s.toBool() ? 1.0 : 0.0) :
				 s.toDouble());
	case SPYRE_KTYPE_I32:
		return static_cast<uint32_t>(static_cast<int32_t>(scalar_int(s)));
	case SPYRE_KTYPE_I64:
		return static_cast<uint64_t>(scalar_int(s));
	default:	// BOOL
		if (s.isFloatingPoint())
			return s.toDouble() != 0.0;
		return scalar_int(s) != 0;
	}
}

int B::c(uint32_t t, double x)
{
	switch (t) {
	case SPYRE_KTYPE_F32:
		return spyre_kernel_const_f32(k, static_cast<float>(x));
	case SPYRE_KTYPE_BOOL:
		return spyre_kernel_const(k, t, x != 0.0);
	default:
		return spyre_kernel_const(k, t, static_cast<int64_t>(x));
	}
}

// ---- the program cache -------------------------------------------------------

namespace {

struct KeyHash {
	size_t operator()(const Key &k) const
	{
		const unsigned char *p = reinterpret_cast<const unsigned char *>(&k);
		uint64_t h = 1469598103934665603ull;
		for (size_t i = 0; i < sizeof(k); i++)
			h = (h ^ p[i]) * 1099511628211ull;
		return static_cast<size_t>(h);
	}
};

constexpr int kMaxCards = 16;
std::mutex g_mu;
std::unordered_map<Key, Prog *, KeyHash> g_cache[kMaxCards];
std::atomic<int64_t> g_built{0}, g_refused{0}, g_hits{0}, g_launches{0};

} // namespace

const Prog *program(int card, const Key &key, BuildFn build, const void *ctx)
{
	TORCH_CHECK(card >= 0 && card < kMaxCards, "spyre: card ", card,
		    " out of range");
	{
		std::lock_guard<std::mutex> l(g_mu);
		auto it = g_cache[card].find(key);
		if (it != g_cache[card].end()) {
			g_hits++;
			return it->second;
		}
	}
	// build outside the lock (a racing thread may build the same
	// program; the first one inserted wins)
	auto *p = new Prog;
	struct spyre_kernel *k = nullptr;
	int rc = build(&k, ctx);
	if (rc == 0) {
		const void *bytes;
		size_t size;
		rc = spyre_kernel_finalize(k, &bytes, &size);
		if (rc == 0) {
			int up = spyre_kernel_upload(device(card), bytes, size,
						     SPYRE_BO_FLAGS_NONE, &p->bo);
			if (up < 0) {
				// not a refusal: the card's memory or the
				// driver said no; nothing is cached
				spyre_kernel_destroy(k);
				delete p;
				check(up, "uploading a kernel", card);
				return nullptr;
			}
			p->size = static_cast<uint32_t>(size);
		}
	}
	spyre_kernel_destroy(k);
	p->err = rc;
	if (rc < 0)
		g_refused++;
	else
		g_built++;
	std::lock_guard<std::mutex> l(g_mu);
	auto ins = g_cache[card].emplace(key, p);
	if (!ins.second) {
		if (p->bo)
			spyre_bo_free(p->bo);
		delete p;
	}
	return ins.first->second;
}

CacheStats cache_stats()
{
	return {g_built.load(), g_refused.load(), g_hits.load(),
		g_launches.load()};
}

// ---- iteration spaces --------------------------------------------------------

void Space::init(at::IntArrayRef shape, uint64_t red_mask)
{
	TORCH_CHECK(shape.size() <= static_cast<size_t>(kMaxDims),
		    "spyre: too many dims");
	ndim = static_cast<int>(shape.size());
	for (int d = 0; d < ndim; d++) {
		size[d] = shape[d];
		red[d] = (red_mask >> d) & 1;
	}
	nops = 0;
	np = nr = 0;
}

int Space::add(const at::Tensor &t)
{
	int64_t off = ndim - t.dim();
	TORCH_INTERNAL_ASSERT(off >= 0 && nops < kMaxOps);
	for (int d = 0; d < ndim; d++) {
		int64_t td = d - off;
		st[nops][d] = td < 0 || t.size(td) == 1 ? 0 : t.stride(td);
	}
	return nops++;
}

int Space::add_strides(const int64_t *strides)
{
	TORCH_INTERNAL_ASSERT(nops < kMaxOps);
	for (int d = 0; d < ndim; d++)
		st[nops][d] = strides[d];
	return nops++;
}

bool Space::collapse(bool reduction)
{
	int64_t nsize[kMaxDims];
	int64_t nst[kMaxOps][kMaxDims];
	int n = 0;
	bool had_red = reduction;
	for (int pass = 0; pass < 2; pass++) {
		int start = n;
		for (int d = 0; d < ndim; d++) {
			if (red[d] != (pass == 1))
				continue;
			had_red = had_red || red[d];
			if (size[d] == 1)
				continue;
			bool merge = n > start;
			for (int o = 0; merge && o < nops; o++)
				merge = nst[o][n - 1] == st[o][d] * size[d];
			if (merge) {
				nsize[n - 1] *= size[d];
				for (int o = 0; o < nops; o++)
					nst[o][n - 1] = st[o][d];
				continue;
			}
			nsize[n] = size[d];
			for (int o = 0; o < nops; o++)
				nst[o][n] = st[o][d];
			n++;
		}
		if (pass == 0)
			np = n;
	}
	nr = n - np;
	if (had_red && nr == 0 && n < kMaxDims) {
		nsize[n] = 1;
		for (int o = 0; o < nops; o++)
			nst[o][n] = 0;
		n++;
		nr = 1;
	}
	ndim = n;
	for (int d = 0; d < n; d++) {
		size[d] = nsize[d];
		red[d] = d >= np;
		for (int o = 0; o < nops; o++)
			st[o][d] = nst[o][d];
	}
	return np <= SPYRE_KERNEL_MAX_PDIMS && nr <= SPYRE_KERNEL_MAX_RDIMS;
}

int64_t Space::points() const
{
	int64_t p = 1;
	for (int d = 0; d < np; d++)
		p *= size[d];
	return p;
}

int64_t Space::rindices() const
{
	int64_t r = 1;
	for (int d = np; d < np + nr; d++)
		r *= size[d];
	return r;
}

uint64_t Space::extent(int i) const
{
	// an empty dim the operand moves along leaves it untouched; one it
	// does not move along (an output over an empty reduction) does not
	uint64_t e = 1;
	for (int d = 0; d < ndim; d++) {
		if (size[d] == 0) {
			if (st[i][d] != 0)
				return 0;
			continue;
		}
		e += static_cast<uint64_t>(size[d] - 1) *
		     static_cast<uint64_t>(st[i][d]);
	}
	return e;
}

void Launch::operand(unsigned int i, const at::Tensor &t, uint64_t extent)
{
	ops[i].mem = extent ? mem_of(t) : SPYRE_MEM_NONE;
	ops[i].extent = extent;
	ops[i].dtype = kdtype(t.scalar_type());
}

void Launch::sizes(const Space &s)
{
	sized = true;
	l.npdims = static_cast<uint32_t>(s.np);
	l.nrdims = static_cast<uint32_t>(s.nr);
	for (int d = 0; d < s.np; d++)
		l.size[d] = static_cast<uint64_t>(s.size[d]);
	for (int d = 0; d < s.nr; d++)
		l.size[SPYRE_KDIM_R0 + d] = static_cast<uint64_t>(s.size[s.np + d]);
}

void Launch::strides(const Space &s, int op, unsigned int param)
{
	for (int d = 0; d < s.np + s.nr; d++)
		params[param + d] = static_cast<uint64_t>(s.st[op][d]);
}

void Launch::bind(unsigned int i, const at::Tensor &t, const Space &s,
		  int op, unsigned int param)
{
	TORCH_INTERNAL_ASSERT(i < SPYRE_KERNEL_MAX_OPERANDS && op < s.nops);
	operand(i, t, s.extent(op));
	strides(s, op, param);
	st0[i] = s.np ? s.st[op][0] : 0;
	esize[i] = static_cast<uint32_t>(t.element_size());
	bound |= 1ull << i;
}

namespace {

// Whether @L may be split along pointwise dim 0 (see run()), and then its
// element iterations in @work.
bool splittable(const Launch &L, unsigned int noperands, uint64_t *work)
{
	uint64_t all = (1ull << noperands) - 1;
	if (!L.sized || L.l.npdims == 0 || L.l.size[0] < 2 ||
	    (L.bound & all) != all)
		return false;
	for (unsigned int i = 0; i < noperands; i++)
		if (L.st0[i] < 0)
			return false;
	uint64_t w = 1;
	for (uint32_t d = 0; d < L.l.npdims; d++)
		w *= L.l.size[d];
	for (uint32_t d = 0; d < L.l.nrdims; d++)
		w *= L.l.size[SPYRE_KDIM_R0 + d];
	*work = w;
	return w > kSplitWork;
}

} // namespace

void run(int card, const Prog *p, Launch &L, unsigned int noperands,
	 unsigned int nparams)
{
	TORCH_INTERNAL_ASSERT(noperands <= SPYRE_KERNEL_MAX_OPERANDS);
	L.l.prog = SPYRE_MEM(p->bo, 0);
	L.l.prog_size = p->size;
	L.l.noperands = noperands;
	L.l.nparams = nparams;
	L.l.operands = L.ops;
	L.l.params = L.params;
	uint64_t work = 0;
	if (!splittable(L, noperands, &work)) {
		g_launches++;
		check(spyre_stream_kernel(cur(card), &L.l), "running a kernel",
		      card);
		return;
	}
	// slices of @step rows of dim 0: each operand starts @a rows further
	// and spans (rows - n) rows less
	uint64_t rows = L.l.size[0];
	uint64_t step = std::max<uint64_t>(1, kSplitWork / (work / rows));
	struct spyre_kernel_launch c = L.l;
	struct spyre_kernel_arg ops[SPYRE_KERNEL_MAX_OPERANDS];
	c.operands = ops;
	for (uint64_t a = 0; a < rows; a += step) {
		uint64_t n = std::min(step, rows - a);
		c.size[0] = n;
		for (unsigned int i = 0; i < noperands; i++) {
			uint64_t st = static_cast<uint64_t>(L.st0[i]);
			ops[i] = L.ops[i];
			ops[i].mem.offset += a * st * L.esize[i];
			ops[i].extent -= (rows - n) * st;
		}
		g_launches++;
		check(spyre_stream_kernel(cur(card), &c), "running a kernel",
		      card);
	}
}

int point_offset(B &b, int np, unsigned int param)
{
	if (np == 0)
		return spyre_kernel_const(b.k, SPYRE_KTYPE_I64, 0);
	return spyre_kernel_affine(b.k, SPYRE_KTYPE_I64, NONE, (1u << np) - 1,
				   param);
}

int rindex_offset(B &b, int base, int np, int nr, unsigned int param)
{
	return spyre_kernel_affine(b.k, SPYRE_KTYPE_I64, base,
				   ((1u << nr) - 1) << SPYRE_KDIM_R0,
				   param + static_cast<unsigned int>(np));
}

// ---- outputs -------------------------------------------------------------------

void check_overlap(const at::Tensor &out, at::ArrayRef<at::Tensor> inputs)
{
	at::assert_no_internal_overlap(out);
	for (const at::Tensor &in : inputs)
		if (in.defined() && in.device() == out.device())
			at::assert_no_partial_overlap(out, in);
}

at::Tensor unalias(const at::Tensor &in, const at::Tensor &out)
{
	if (!in.defined() || in.device() != out.device() ||
	    !in.storage().is_alias_of(out.storage()))
		return in;
	if (in.storage_offset() == out.storage_offset() &&
	    in.sizes() == out.sizes() && in.strides() == out.strides() &&
	    in.scalar_type() == out.scalar_type())
		return in;
	return in.clone();
}

} // namespace kgen

namespace {

std::vector<int64_t> kernel_stats()
{
	kgen::CacheStats s = kgen::cache_stats();
	return {s.built, s.refused, s.hits, s.launches};
}

} // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("kernel_stats() -> int[]", &kernel_stats);
}

} // namespace spyre_torch
