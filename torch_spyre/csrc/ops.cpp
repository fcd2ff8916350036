// SPDX-License-Identifier: MIT
// The ATen kernels of the spyre backend (dispatch key PrivateUse1): the
// factory / view / copy set every backend needs, and the native ops that
// run on the card through libspyre's stream operations (GEMM, element-wise,
// reductions, row operations, conversions).  Each native kernel handles the
// dtypes and layouts the card's commands can take and hands everything else
// to the boxed CPU fallback (fallback.cpp), which counts it.
#include "spyre_torch.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spyre_torch {

void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);

// Call the CPU fallback for the aten operator OP from an unboxed kernel.
#define SPYRE_FALLBACK(op, ...) \
	at::native::call_fallback_fn<&fallback, ATEN_OP(op)>::call(__VA_ARGS__)
#define SPYRE_FALLBACK2(op, ovl, ...) \
	at::native::call_fallback_fn<&fallback, ATEN_OP2(op, ovl)>::call( \
		__VA_ARGS__)

uint32_t spyre_dtype(at::ScalarType t)
{
	switch (t) {
	case at::kFloat: return SPYRE_DTYPE_FP32;
	case at::kHalf: return SPYRE_DTYPE_FP16;
	case at::kBFloat16: return SPYRE_DTYPE_BF16;
	case at::kFloat8_e4m3fn: return SPYRE_DTYPE_FP8_E4M3;
	case at::kFloat8_e5m2: return SPYRE_DTYPE_FP8_E5M2;
	case at::kChar: return SPYRE_DTYPE_INT8;
	case at::kInt: return SPYRE_DTYPE_INT32;
	default: return 0;
	}
}

namespace {

// fp32/fp16/bf16: what the card computes in (fp32 inside).
bool compute_dtype(at::ScalarType t)
{
	return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

// The floats the card's COPY converts among with PyTorch's rounding.
bool float_family(at::ScalarType t)
{
	return compute_dtype(t) || t == at::kFloat8_e4m3fn ||
	       t == at::kFloat8_e5m2;
}

bool is_fp8(at::ScalarType t)
{
	return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2;
}

void check_storable(at::ScalarType t)
{
	TORCH_CHECK_TYPE(t != at::kDouble && !at::isComplexType(t),
			 "spyre: dtype ", t, " is not supported on the card (it "
			 "has no float64 or complex arithmetic); use float32, "
			 "float16, bfloat16 or float8");
}

int dev_of(const at::Tensor &t) { return t.device().index(); }

bool on_spyre(const at::Tensor &t)
{
	return t.device().type() == c10::DeviceType::PrivateUse1;
}

// A CPU 0-dim tensor (a wrapped Python number or scalar tensor), which
// PyTorch lets mix with tensors of any device.
bool cpu_scalar(const at::Tensor &t)
{
	return t.device().is_cpu() && t.dim() == 0;
}

// Bit pattern of @v in dtype @t, for FILL.
uint64_t bits_of(const at::Scalar &v, at::ScalarType t)
{
	at::Tensor c = at::scalar_tensor(v, at::TensorOptions().dtype(t));
	uint64_t b = 0;
	std::memcpy(&b, c.const_data_ptr(), c.element_size());
	return b;
}

// Thread-local command buffer for multi-command jobs.
struct Cmd {
	struct spyre_cmdbuf *cb = nullptr;
	Cmd()
	{
		check(spyre_cmdbuf_create(&cb), "creating a command buffer");
	}
	~Cmd() { spyre_cmdbuf_destroy(cb); }
};

struct spyre_cmdbuf *cmdbuf()
{
	thread_local Cmd c;
	spyre_cmdbuf_reset(c.cb);
	return c.cb;
}

at::Tensor contig(const at::Tensor &t)
{
	return t.is_contiguous() ? t : t.contiguous();
}

} // namespace

at::Tensor empty_on(const at::Tensor &like, at::IntArrayRef sizes,
		    at::ScalarType dtype)
{
	return at::empty(sizes, like.options().dtype(dtype));
}

// ---- copies ----------------------------------------------------------------

namespace {

constexpr uint64_t kMaxCopyCmds = 1u << 20;

} // namespace

bool copy_on_card(const at::Tensor &dst, const at::Tensor &src)
{
	TORCH_INTERNAL_ASSERT(dst.sizes() == src.sizes());
	if (dst.numel() == 0)
		return true;
	at::ScalarType dt = dst.scalar_type(), st = src.scalar_type();
	bool conv = dt != st;
	if (conv && !(float_family(dt) && float_family(st)))
		return false;
	uint64_t des = dst.element_size(), ses = src.element_size();
	// dims of size > 1, adjacent ones merged where both sides allow
	std::vector<int64_t> sz, ds, ss;
	for (int64_t i = 0; i < dst.dim(); i++) {
		if (dst.size(i) == 1)
			continue;
		if (!sz.empty() && ds.back() == dst.stride(i) * dst.size(i) &&
		    ss.back() == src.stride(i) * dst.size(i)) {
			sz.back() *= dst.size(i);
			ds.back() = dst.stride(i);
			ss.back() = src.stride(i);
			continue;
		}
		sz.push_back(dst.size(i));
		ds.push_back(dst.stride(i));
		ss.push_back(src.stride(i));
	}
	if (sz.empty()) {
		sz.push_back(1);
		ds.push_back(1);
		ss.push_back(1);
	}
	int L = static_cast<int>(sz.size()) - 1;
	uint64_t width = 1, height = 1, dp = 0, sp = 0;
	if (ds[L] == 1 && ss[L] == 1)
		width = sz[L--];
	if (L >= 0) {
		uint64_t d = ds[L] * des, s = ss[L] * ses;
		if (d >= width * des && s >= width * ses && d && s) {
			height = sz[L--];
			dp = d;
			sp = s;
		}
	}
	uint64_t total = 1;
	for (int i = 0; i <= L; i++)
		total *= sz[i];
	if (total > kMaxCopyCmds)
		return false;
	// same dtype: raw bytes (any dtype); else a converting COPY
	uint32_t ddt = SPYRE_DTYPE_U8, sdt = SPYRE_DTYPE_U8;
	uint64_t w = width * des;
	uint32_t flags = 0;
	if (conv) {
		ddt = spyre_dtype(dt);
		sdt = spyre_dtype(st);
		w = width;
		if (is_fp8(dt))
			flags = SPYRE_CMD_F_NOSAT;	// PyTorch: NaN / inf
	}
	struct spyre_mem dm = mem_of(dst), sm = mem_of(src);
	int index = dev_of(dst);
	struct spyre_stream *s = cur(index);
	struct spyre_cmdbuf *cb = cmdbuf();
	std::vector<int64_t> idx(L + 1, 0);
	for (uint64_t n = 0; n < total; n++) {
		int64_t doff = 0, soff = 0;
		for (int i = 0; i <= L; i++) {
			doff += idx[i] * ds[i];
			soff += idx[i] * ss[i];
		}
		check(spyre_cmdbuf_copy_mem(cb,
				SPYRE_MEM(dm.bo, dm.offset + doff * des), dp, ddt,
				SPYRE_MEM(sm.bo, sm.offset + soff * ses), sp, sdt,
				w, height, flags), "encoding a copy", index);
		for (int i = L; i >= 0; i--) {
			if (++idx[i] < sz[i])
				break;
			idx[i] = 0;
		}
		if (spyre_cmdbuf_count(cb) == 2048 || n + 1 == total) {
			check(spyre_stream_submit(s, cb, nullptr, 0), "copying",
			      index);
			spyre_cmdbuf_reset(cb);
		}
	}
	return true;
}

namespace {

// A contiguous CPU copy of spyre tensor @src (the host waits for it).
at::Tensor to_host(const at::Tensor &src)
{
	at::Tensor s = src;
	if (!s.is_contiguous()) {
		at::Tensor t = empty_on(s, s.sizes(), s.scalar_type());
		TORCH_CHECK(copy_on_card(t, s), "spyre: tensor layout too "
			    "fragmented to copy");
		s = t;
	}
	at::Tensor host = at::empty(s.sizes(), s.options().device(at::kCPU));
	int index = dev_of(s);
	if (s.numel()) {
		struct spyre_mem m = mem_of(s);
		struct spyre_stream *st = cur(index);
		check(spyre_stream_copy_d2h(st, host.mutable_data_ptr(), m.bo,
					    m.offset, s.nbytes()),
		      "copying to the host", index);
		check(spyre_stream_sync(st, SPYRE_TIMEOUT_INFINITE),
		      "waiting for a copy to the host", index);
	}
	return host;
}

// Whether @a and @b are both contiguous with the same sizes and dtype: a
// copy between them is one block of bytes (tensor.to() and .cpu()).
bool same_block(const at::Tensor &a, const at::Tensor &b)
{
	return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
	       a.is_contiguous() && b.is_contiguous();
}

// Host tensor @src (any layout and dtype, broadcast to @dst) into @dst.
void from_host(const at::Tensor &dst, const at::Tensor &src)
{
	if (dst.numel() && same_block(dst, src)) {	// tensor.to(): no temporaries
		int index = dev_of(dst);
		struct spyre_mem m = mem_of(dst);
		check(spyre_stream_copy_h2d(cur(index), m.bo, m.offset,
					    src.const_data_ptr(), src.nbytes()),
		      "copying from the host", index);
		return;
	}
	at::Tensor s = src.to(dst.scalar_type()).expand(dst.sizes())
			   .contiguous();
	at::Tensor d = dst.is_contiguous() ? dst :
		       empty_on(dst, dst.sizes(), dst.scalar_type());
	int index = dev_of(dst);
	if (d.numel()) {
		struct spyre_mem m = mem_of(d);
		check(spyre_stream_copy_h2d(cur(index), m.bo, m.offset,
					    s.const_data_ptr(), s.nbytes()),
		      "copying from the host", index);
	}
	if (!d.is_same(dst))
		TORCH_CHECK(copy_on_card(dst, d), "spyre: tensor layout too "
			    "fragmented to copy");
}

// spyre -> spyre, same card or two cards.
void copy_device(const at::Tensor &dst, const at::Tensor &src)
{
	at::Tensor s = src.expand(dst.sizes());
	if (dev_of(dst) == dev_of(s)) {
		c10::DeviceGuard g(dst.device());
		if (copy_on_card(dst, s))
			return;
		// a conversion the card cannot do with PyTorch's semantics
		from_host(dst, to_host(s));
		return;
	}
	// two cards: contiguous in dst's dtype on the source card, then one
	// peer copy (through system memory, no host wait)
	at::Tensor a;
	{
		c10::DeviceGuard g(s.device());
		a = s;
		if (!a.is_contiguous() || a.scalar_type() != dst.scalar_type()) {
			a = empty_on(s, s.sizes(), dst.scalar_type());
			copy_device(a, s);
		}
	}
	c10::DeviceGuard g(dst.device());
	at::Tensor b = dst.is_contiguous() ? dst :
		       empty_on(dst, dst.sizes(), dst.scalar_type());
	if (b.numel()) {
		struct spyre_mem bm = mem_of(b), am = mem_of(a);
		check(spyre_stream_copy_peer(cur(dev_of(b)), bm.bo, bm.offset,
					     cur(dev_of(a)), am.bo, am.offset,
					     b.nbytes()),
		      "copying between cards", dev_of(b));
	}
	if (!b.is_same(dst))
		copy_device(dst, b);
}

// ---- factory / view / copy kernels -----------------------------------------

c10::Device target(std::optional<c10::Device> d)
{
	c10::Device dev = d.value_or(c10::Device(c10::DeviceType::PrivateUse1,
						 -1));
	if (dev.index() < 0)
		dev = c10::Device(c10::DeviceType::PrivateUse1,
				  static_cast<c10::DeviceIndex>(current_device()));
	return dev;
}

at::Tensor k_empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
		   std::optional<at::Layout>, std::optional<at::Device> device,
		   std::optional<bool>, std::optional<at::MemoryFormat> mf)
{
	at::ScalarType dt = dtype.value_or(at::get_default_dtype_as_scalartype());
	check_storable(dt);
	c10::DeviceGuard g(target(device));
	return at::detail::empty_generic(size, allocator(),
		c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dt, mf);
}

at::Tensor k_empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
			   std::optional<at::ScalarType> dtype,
			   std::optional<at::Layout>,
			   std::optional<at::Device> device, std::optional<bool>)
{
	at::ScalarType dt = dtype.value_or(at::get_default_dtype_as_scalartype());
	check_storable(dt);
	c10::DeviceGuard g(target(device));
	return at::detail::empty_strided_generic(size, stride, allocator(),
		c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dt);
}

const at::Tensor &k_resize_(const at::Tensor &self, at::IntArrayRef size,
			    std::optional<at::MemoryFormat> mf)
{
	c10::DeviceGuard g(self.device());
	auto *impl = self.unsafeGetTensorImpl();
	impl->set_sizes_contiguous(size);
	int64_t n = impl->numel();
	if (n) {
		uint64_t need = static_cast<uint64_t>(impl->storage_offset() + n) *
				self.element_size();
		if (need > impl->storage().nbytes())
			at::native::resize_bytes_nocuda(impl->storage(),
							c10::SymInt(need));
	}
	if (mf.has_value() && *mf != at::MemoryFormat::Preserve)
		impl->empty_tensor_restride(*mf);
	return self;
}

at::Tensor &k_set_storage(at::Tensor &self, at::Storage src, int64_t offset,
			  at::IntArrayRef size, at::IntArrayRef stride)
{
	TORCH_CHECK(src.device() == self.device() || !src.data(),
		    "spyre: set_() with a storage on ", src.device());
	auto *impl = self.unsafeGetTensorImpl();
	impl->set_storage_keep_dtype(std::move(src));
	impl->set_storage_offset(offset);
	if (stride.empty())
		impl->set_sizes_contiguous(size);
	else
		impl->set_sizes_and_strides(size, stride);
	return self;
}

at::Tensor &k_set_source(at::Tensor &self, at::Storage src)
{
	int64_t n = static_cast<int64_t>(src.nbytes() / self.element_size());
	return k_set_storage(self, std::move(src), 0, {n}, {});
}

at::Tensor k_copy_from(const at::Tensor &self, const at::Tensor &dst, bool)
{
	if (dst.numel() == 0)
		return dst;
	if (on_spyre(dst) && on_spyre(self)) {
		count_native("aten::_copy_from");
		copy_device(dst, self);
	} else if (on_spyre(dst)) {
		TORCH_CHECK(self.device().is_cpu(), "spyre: copy from ",
			    self.device(), " is not supported");
		count_native("aten::_copy_from");
		c10::DeviceGuard g(dst.device());
		from_host(dst, self);
	} else {
		TORCH_CHECK(dst.device().is_cpu(), "spyre: copy to ",
			    dst.device(), " is not supported");
		count_native("aten::_copy_from");
		c10::DeviceGuard g(self.device());
		if (same_block(dst, self)) {	// straight into @dst (.cpu())
			int index = dev_of(self);
			struct spyre_mem m = mem_of(self);
			struct spyre_stream *st = cur(index);
			check(spyre_stream_copy_d2h(st, dst.mutable_data_ptr(),
						    m.bo, m.offset,
						    self.nbytes()),
			      "copying to the host", index);
			check(spyre_stream_sync(st, SPYRE_TIMEOUT_INFINITE),
			      "waiting for a copy to the host", index);
			return dst;
		}
		at::Tensor s = self.expand(dst.sizes());
		at::Tensor h = to_host(s);
		dst.copy_(h);
	}
	return dst;
}

at::Tensor k_copy_from_and_resize(const at::Tensor &self,
				  const at::Tensor &dst)
{
	if (dst.sizes() != self.sizes())
		dst.resize_(self.sizes());
	return k_copy_from(self, dst, false);
}

void k_record_stream(at::Tensor &self, at::Stream s)
{
	TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1 &&
		    s.device_index() == self.device().index(),
		    "spyre: record_stream() with a stream of ", s.device(),
		    " for a tensor on ", self.device());
	record_stream(self.storage().data_ptr(), stream(s));
}

// _to_cpu (the CPU fallback's argument transfer): every spyre tensor's
// copy is enqueued first, then each card's current stream is waited for
// once, instead of once per tensor.
std::vector<at::Tensor> k_to_cpu(at::TensorList ts)
{
	std::vector<at::Tensor> out(ts.size());
	std::vector<int> cards;
	for (size_t i = 0; i < ts.size(); i++) {
		const at::Tensor &t = ts[i];
		if (!t.defined() || !on_spyre(t)) {
			out[i] = t.defined() ? t.cpu() : t;
			continue;
		}
		c10::DeviceGuard g(t.device());
		at::Tensor s = t;
		if (!s.is_contiguous()) {
			s = empty_on(t, t.sizes(), t.scalar_type());
			TORCH_CHECK(copy_on_card(s, t), "spyre: tensor layout too "
				    "fragmented to copy");
		}
		at::Tensor h = at::empty(s.sizes(), s.options().device(at::kCPU));
		if (s.numel()) {
			struct spyre_mem m = mem_of(s);
			check(spyre_stream_copy_d2h(cur(dev_of(s)),
						    h.mutable_data_ptr(), m.bo,
						    m.offset, s.nbytes()),
			      "copying to the host", dev_of(s));
			if (std::find(cards.begin(), cards.end(), dev_of(s)) ==
			    cards.end())
				cards.push_back(dev_of(s));
		}
		out[i] = h;
	}
	for (int c : cards)
		check(spyre_stream_sync(cur(c), SPYRE_TIMEOUT_INFINITE),
		      "waiting for copies to the host", c);
	return out;
}

at::Scalar k_local_scalar_dense(const at::Tensor &self)
{
	c10::DeviceGuard g(self.device());
	return to_host(self).item();
}

// ---- native ops -------------------------------------------------------------

struct spyre_stream *stream_of(const at::Tensor &t) { return cur(dev_of(t)); }

// The output of an element-wise op: @out when it is given and can be
// written directly (contiguous, right dtype and shape), else a new one.
at::Tensor out_like(const at::Tensor &like, at::IntArrayRef shape,
		    at::ScalarType dt)
{
	return empty_on(like, shape, dt);
}

// Copy @r into @self (in-place variants), unless they are the same.
at::Tensor &assign(at::Tensor &self, const at::Tensor &r)
{
	if (!r.is_same(self))
		copy_device(self, r);
	return self;
}

// @t in dtype @dt broadcast to @shape, contiguous.  Broadcasts the card
// does with one GEMM (an outer product with a ones vector; exact, as every
// element is one product by 1.0): @t repeated along the leading dims
// (ones[P x 1] @ t[1 x Q], e.g. a bias row) or along the trailing dims
// (t[P x 1] @ ones[1 x Q], e.g. per-row statistics; a one-element @t is
// the case P = 1).  Other broadcasts are strided copies.
at::Tensor spread(const at::Tensor &t0, at::ScalarType dt,
		  at::IntArrayRef shape)
{
	at::Tensor t = t0.to(dt);
	if (t.sizes() == shape)
		return contig(t);
	int64_t nd = static_cast<int64_t>(shape.size());
	int64_t n = c10::multiply_integers(shape);
	if (n <= 1 || !compute_dtype(dt) || t.dim() > nd)
		return contig(t.expand(shape));
	// t's sizes right-aligned to shape
	std::vector<int64_t> ts(nd, 1);
	for (int64_t i = 0; i < t.dim(); i++)
		ts[nd - t.dim() + i] = t.size(i);
	// leading broadcast: ts == 1 for dims < k, == shape for dims >= k
	// trailing broadcast: ts == shape for dims < k, == 1 for dims >= k
	int64_t lead = 0, trail = nd;
	while (lead < nd && ts[lead] == 1)
		lead++;
	bool lead_ok = true;
	for (int64_t i = lead; i < nd; i++)
		lead_ok = lead_ok && ts[i] == shape[i];
	while (trail > 0 && ts[trail - 1] == 1)
		trail--;
	bool trail_ok = true;
	for (int64_t i = 0; i < trail; i++)
		trail_ok = trail_ok && ts[i] == shape[i];
	int64_t P, Q;
	bool rows;	// true: t is the row (leading broadcast)
	if (lead_ok) {
		Q = t.numel();
		P = n / Q;
		rows = true;
	} else if (trail_ok) {
		P = t.numel();
		Q = n / P;
		rows = false;
	} else {
		return contig(t.expand(shape));
	}
	if (P > UINT32_MAX || Q > UINT32_MAX)
		return contig(t.expand(shape));
	at::Tensor v = contig(t).reshape({t.numel()});
	at::Tensor ones = empty_on(t, {rows ? P : Q}, dt);
	at::Tensor out = empty_on(t, shape, dt);
	int index = dev_of(t);
	struct spyre_cmdbuf *cb = cmdbuf();
	check(spyre_cmdbuf_fill_mem(cb, mem_of(ones), ones.numel(),
				ones.element_size(),
				bits_of(at::Scalar(1.0), dt)), "encoding", index);
	struct spyre_gemm g;
	std::memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = g.c_dtype = spyre_dtype(dt);
	g.m = static_cast<uint32_t>(P);
	g.n = static_cast<uint32_t>(Q);
	g.k = 1;
	g.a = rows ? mem_of(ones) : mem_of(v);
	g.b = rows ? mem_of(v) : mem_of(ones);
	g.c = mem_of(out);
	g.alpha = 1.0f;
	check(spyre_cmdbuf_gemm(cb, &g), "encoding", index);
	check(spyre_stream_submit(cur(index), cb, nullptr, 0), "broadcast",
	      index);
	return out;
}

// out = op(a, b) (b may be undefined for unary ops); a and b are made
// contiguous in @dt and broadcast to @shape first.
at::Tensor eltwise(uint32_t op, const at::Tensor &a, const at::Tensor &b,
		   float alpha, at::ScalarType dt, at::IntArrayRef shape,
		   const at::Tensor *into = nullptr)
{
	c10::DeviceGuard g(a.device());
	at::Tensor x = spread(a, dt, shape);
	at::Tensor y = b.defined() ? spread(b, dt, shape) : at::Tensor();
	at::Tensor out = into && into->is_contiguous() &&
			 into->scalar_type() == dt && into->sizes() == shape ?
			 *into : out_like(a, shape, dt);
	// the card takes up to 2^30 elements per command: chunks of 2^29
	const int64_t chunk = 1ll << 29;
	uint64_t es = out.element_size();
	for (int64_t done = 0; done < out.numel(); done += chunk) {
		int64_t n = std::min(chunk, out.numel() - done);
		struct spyre_mem o = mem_of(out), xm = mem_of(x);
		struct spyre_mem ym = y.defined() ? mem_of(y) : SPYRE_MEM_NONE;
		o.offset += done * es;
		xm.offset += done * es;
		if (y.defined())
			ym.offset += done * es;
		check(spyre_stream_eltwise(stream_of(a), op, spyre_dtype(dt), n,
					   o, xm, ym, alpha),
		      "element-wise op", dev_of(a));
	}
	return out;
}

// out = x + alpha * y with y a scalar value: FILL + ADD in one job.
at::Tensor add_scalar_value(const at::Tensor &a, double v, at::ScalarType dt,
			    const at::Tensor *into = nullptr)
{
	c10::DeviceGuard g(a.device());
	at::Tensor x = contig(a.to(dt));
	at::Tensor out = into && into->is_contiguous() &&
			 into->scalar_type() == dt && into->sizes() == x.sizes() ?
			 *into : out_like(a, x.sizes(), dt);
	if (out.numel() == 0)
		return out;
	at::Tensor tmp = out_like(a, x.sizes(), dt);
	struct spyre_cmdbuf *cb = cmdbuf();
	int index = dev_of(a);
	check(spyre_cmdbuf_fill_mem(cb, mem_of(tmp), tmp.numel(), tmp.element_size(),
				bits_of(at::Scalar(v), dt)), "encoding", index);
	check(spyre_cmdbuf_eltwise(cb, SPYRE_ELT_ADD, spyre_dtype(dt),
				   out.numel(), mem_of(out), mem_of(x),
				   mem_of(tmp), 1.0f), "encoding", index);
	struct spyre_bo *bos[1] = {mem_of(tmp).bo};
	check(spyre_stream_submit(stream_of(a), cb, bos, 1), "add", index);
	return out;
}

bool same_card(const at::Tensor &a, const at::Tensor &b)
{
	return on_spyre(a) && on_spyre(b) && a.device() == b.device();
}

// self + alpha * other, written into @into when it fits (in-place ops).
at::Tensor add_impl(const at::Tensor &self, const at::Tensor &other,
		    double al, at::ScalarType dt, const at::Tensor *into)
{
	if (cpu_scalar(other))
		return add_scalar_value(self, other.item().toDouble() * al, dt,
					into);
	auto shape = at::infer_size(self.sizes(), other.sizes());
	if (al == 1.0)
		return eltwise(SPYRE_ELT_ADD, self, other, 1.0f, dt, shape, into);
	at::Tensor y = eltwise(SPYRE_ELT_SCALE, other, at::Tensor(),
			       static_cast<float>(al), dt, other.sizes());
	return eltwise(SPYRE_ELT_ADD, self, y, 1.0f, dt, shape, into);
}

at::Tensor k_add(const at::Tensor &self, const at::Tensor &other,
		 const at::Scalar &alpha)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt) || !on_spyre(self) ||
	    !(cpu_scalar(other) || same_card(self, other)))
		return SPYRE_FALLBACK2(add, Tensor, self, other, alpha);
	count_native("aten::add.Tensor");
	return add_impl(self, other, alpha.toDouble(), dt, nullptr);
}

at::Tensor &k_add_(at::Tensor &self, const at::Tensor &other,
		   const at::Scalar &alpha)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt) || dt != self.scalar_type() ||
	    !(cpu_scalar(other) || same_card(self, other)))
		return SPYRE_FALLBACK2(add_, Tensor, self, other, alpha);
	count_native("aten::add_.Tensor");
	return assign(self, add_impl(self, other, alpha.toDouble(), dt, &self));
}

at::Tensor k_sub(const at::Tensor &self, const at::Tensor &other,
		 const at::Scalar &alpha)
{
	return k_add(self, other, at::Scalar(-alpha.toDouble()));
}

at::Tensor &k_sub_(at::Tensor &self, const at::Tensor &other,
		   const at::Scalar &alpha)
{
	return k_add_(self, other, at::Scalar(-alpha.toDouble()));
}

at::Tensor k_add_scalar(const at::Tensor &self, const at::Scalar &other,
			const at::Scalar &alpha)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt))
		return SPYRE_FALLBACK2(add, Scalar, self, other, alpha);
	count_native("aten::add.Scalar");
	return add_scalar_value(self, other.toDouble() * alpha.toDouble(), dt);
}

at::Tensor mul_impl(const at::Tensor &self, const at::Tensor &other,
		    at::ScalarType dt, const at::Tensor *into)
{
	if (cpu_scalar(other))
		return eltwise(SPYRE_ELT_SCALE, self, at::Tensor(),
			       static_cast<float>(other.item().toDouble()), dt,
			       self.sizes(), into);
	auto shape = at::infer_size(self.sizes(), other.sizes());
	return eltwise(SPYRE_ELT_MUL, self, other, 1.0f, dt, shape, into);
}

at::Tensor k_mul(const at::Tensor &self, const at::Tensor &other)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt) || !on_spyre(self) ||
	    !(cpu_scalar(other) || same_card(self, other)))
		return SPYRE_FALLBACK2(mul, Tensor, self, other);
	count_native("aten::mul.Tensor");
	return mul_impl(self, other, dt, nullptr);
}

at::Tensor &k_mul_(at::Tensor &self, const at::Tensor &other)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt) || dt != self.scalar_type() ||
	    !(cpu_scalar(other) || same_card(self, other)))
		return SPYRE_FALLBACK2(mul_, Tensor, self, other);
	count_native("aten::mul_.Tensor");
	return assign(self, mul_impl(self, other, dt, &self));
}

at::Tensor k_mul_scalar(const at::Tensor &self, const at::Scalar &other)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt))
		return SPYRE_FALLBACK2(mul, Scalar, self, other);
	count_native("aten::mul.Scalar");
	return eltwise(SPYRE_ELT_SCALE, self, at::Tensor(),
		       static_cast<float>(other.toDouble()), dt, self.sizes());
}

// Division: by a scalar on the card (multiply by its reciprocal); a tensor
// divisor goes to the CPU (the card has no reciprocal or divide command).
at::Tensor k_div(const at::Tensor &self, const at::Tensor &other)
{
	at::ScalarType dt = at::result_type(self, other);
	if (cpu_scalar(other) && compute_dtype(dt) && on_spyre(self)) {
		count_native("aten::div.Tensor");
		return eltwise(SPYRE_ELT_SCALE, self, at::Tensor(),
			       static_cast<float>(1.0 / other.item().toDouble()),
			       dt, self.sizes());
	}
	return SPYRE_FALLBACK2(div, Tensor, self, other);
}

at::Tensor &k_div_(at::Tensor &self, const at::Tensor &other)
{
	at::ScalarType dt = at::result_type(self, other);
	if (cpu_scalar(other) && compute_dtype(dt) && dt == self.scalar_type()) {
		count_native("aten::div_.Tensor");
		return assign(self, eltwise(SPYRE_ELT_SCALE, self, at::Tensor(),
			static_cast<float>(1.0 / other.item().toDouble()), dt,
			self.sizes(), &self));
	}
	return SPYRE_FALLBACK2(div_, Tensor, self, other);
}

at::Tensor k_div_scalar(const at::Tensor &self, const at::Scalar &other)
{
	at::ScalarType dt = at::result_type(self, other);
	if (!compute_dtype(dt))
		return SPYRE_FALLBACK2(div, Scalar, self, other);
	count_native("aten::div.Scalar");
	return eltwise(SPYRE_ELT_SCALE, self, at::Tensor(),
		       static_cast<float>(1.0 / other.toDouble()), dt,
		       self.sizes());
}

at::Tensor k_neg(const at::Tensor &self)
{
	if (!compute_dtype(self.scalar_type()))
		return SPYRE_FALLBACK(neg, self);
	count_native("aten::neg");
	return eltwise(SPYRE_ELT_SCALE, self, at::Tensor(), -1.0f,
		       self.scalar_type(), self.sizes());
}

#define SPYRE_UNARY(name, OP)                                                  \
	at::Tensor k_##name(const at::Tensor &self)                            \
	{                                                                      \
		if (!compute_dtype(self.scalar_type()))                        \
			return SPYRE_FALLBACK(name, self);                     \
		count_native("aten::" #name);                                  \
		return eltwise(OP, self, at::Tensor(), 1.0f,                   \
			       self.scalar_type(), self.sizes());              \
	}                                                                      \
	at::Tensor &k_##name##_(at::Tensor &self)                              \
	{                                                                      \
		if (!compute_dtype(self.scalar_type()))                        \
			return SPYRE_FALLBACK(name##_, self);                  \
		count_native("aten::" #name "_");                              \
		return assign(self, eltwise(OP, self, at::Tensor(), 1.0f,      \
					    self.scalar_type(), self.sizes(),  \
					    &self));                           \
	}

SPYRE_UNARY(relu, SPYRE_ELT_RELU)
SPYRE_UNARY(silu, SPYRE_ELT_SILU)
SPYRE_UNARY(exp, SPYRE_ELT_EXP)

// sigmoid(x) = softmax([x, 0])[0]: the card's SOFTMAX row op over rows
// (x, 0) of a scratch matrix, in one job (FILL, COPY in, ROWOP, COPY out).
at::Tensor k_sigmoid(const at::Tensor &self)
{
	at::ScalarType dt = self.scalar_type();
	if (!compute_dtype(dt) || self.numel() == 0 ||
	    self.numel() >= (1ll << 29))
		return SPYRE_FALLBACK(sigmoid, self);
	count_native("aten::sigmoid");
	c10::DeviceGuard g(self.device());
	at::Tensor x = contig(self);
	int64_t n = x.numel();
	uint64_t es = x.element_size();
	uint32_t sdt = spyre_dtype(dt);
	at::Tensor R = empty_on(x, {n, 2}, dt);
	at::Tensor out = empty_on(x, x.sizes(), dt);
	int index = dev_of(x);
	struct spyre_cmdbuf *cb = cmdbuf();
	auto ck = [&](int rc) { check(rc, "encoding sigmoid", index); };
	ck(spyre_cmdbuf_fill_mem(cb, mem_of(R), 2 * n, static_cast<uint32_t>(es), 0));
	ck(spyre_cmdbuf_copy_mem(cb, mem_of(R), 2 * es, sdt, mem_of(x), es, sdt,
				1, n, 0));
	ck(spyre_cmdbuf_rowop(cb, SPYRE_ROW_SOFTMAX, sdt, (uint32_t)n, 2,
			      mem_of(R), 0, mem_of(R), 0, SPYRE_MEM_NONE,
			      SPYRE_MEM_NONE, 0.0f));
	ck(spyre_cmdbuf_copy_mem(cb, mem_of(out), es, sdt, mem_of(R), 2 * es, sdt,
				1, n, 0));
	struct spyre_bo *bos[3] = {mem_of(R).bo, mem_of(x).bo, mem_of(out).bo};
	check(spyre_stream_submit(stream_of(x), cb, bos, 3), "sigmoid", index);
	return out;
}

at::Tensor k_gelu(const at::Tensor &self, c10::string_view approximate)
{
	if (!compute_dtype(self.scalar_type()) || approximate != "none")
		return SPYRE_FALLBACK(gelu, self, approximate);
	count_native("aten::gelu");
	return eltwise(SPYRE_ELT_GELU, self, at::Tensor(), 1.0f,
		       self.scalar_type(), self.sizes());
}

at::Tensor &k_fill_(at::Tensor &self, const at::Scalar &value)
{
	if (self.numel() == 0)
		return self;
	size_t es = self.element_size();
	if (es != 1 && es != 2 && es != 4 && es != 8)
		return SPYRE_FALLBACK2(fill_, Scalar, self, value);
	count_native("aten::fill_.Scalar");
	c10::DeviceGuard g(self.device());
	at::Tensor t = self.is_contiguous() ? self :
		       empty_on(self, self.sizes(), self.scalar_type());
	struct spyre_mem m = mem_of(t);
	check(spyre_stream_fill(stream_of(t), m.bo, m.offset, t.numel(),
				static_cast<uint32_t>(es),
				bits_of(value, self.scalar_type())),
	      "fill", dev_of(t));
	if (!t.is_same(self))
		TORCH_CHECK(copy_on_card(self, t), "spyre: tensor layout too "
			    "fragmented to fill");
	return self;
}

at::Tensor &k_zero_(at::Tensor &self) { return k_fill_(self, at::Scalar(0)); }

// ---- GEMM ---------------------------------------------------------------

// A matrix operand of a GEMM: @t viewed as rows x cols (last two dims),
// row-major with leading dimension @ld, or stored transposed.
struct Mat {
	at::Tensor t;
	bool trans;
	uint64_t ld;
	uint64_t bstride;	// elements between matrices (3-D)
};

Mat mat(const at::Tensor &t)
{
	int64_t nd = t.dim();
	int64_t r = t.size(nd - 2), c = t.size(nd - 1);
	int64_t s0 = t.stride(nd - 2), s1 = t.stride(nd - 1);
	uint64_t bs = nd == 3 ? static_cast<uint64_t>(t.stride(0)) : 0;
	if ((s1 == 1 || c == 1) && (r == 1 || s0 >= c))
		return {t, false, static_cast<uint64_t>(std::max(s0, c)), bs};
	if ((s0 == 1 || r == 1) && (c == 1 || s1 >= r))
		return {t, true, static_cast<uint64_t>(std::max(s1, r)), bs};
	at::Tensor cc = t.contiguous();
	return {cc, false, static_cast<uint64_t>(c),
		nd == 3 ? static_cast<uint64_t>(r * c) : 0};
}

// C = alpha * A @ B + beta * C (+ bias), A [.., M, K], B [.., K, N], C
// contiguous [.., M, N].
void gemm(const at::Tensor &c, const at::Tensor &a, const at::Tensor &b,
	  float alpha, float beta, const at::Tensor &bias, int64_t batch)
{
	Mat A = mat(a), B = mat(b);
	int64_t nd = a.dim();
	struct spyre_gemm g;
	std::memset(&g, 0, sizeof(g));
	g.flags = (A.trans ? SPYRE_GEMM_F_TRANS_A : 0) |
		  (B.trans ? SPYRE_GEMM_F_TRANS_B : 0);
	g.a_dtype = spyre_dtype(a.scalar_type());
	g.b_dtype = spyre_dtype(b.scalar_type());
	g.c_dtype = spyre_dtype(c.scalar_type());
	g.m = static_cast<uint32_t>(a.size(nd - 2));
	g.k = static_cast<uint32_t>(a.size(nd - 1));
	g.n = static_cast<uint32_t>(b.size(nd - 1));
	g.batch = static_cast<uint32_t>(batch);
	g.a = mem_of(A.t);
	g.b = mem_of(B.t);
	g.c = mem_of(c);
	g.lda = A.ld;
	g.ldb = B.ld;
	g.ldc = g.n;
	if (batch > 1) {
		g.stride_a = A.bstride;
		g.stride_b = B.bstride;
		g.stride_c = static_cast<uint64_t>(g.m) * g.n;
	}
	g.alpha = alpha;
	g.beta = beta;
	if (bias.defined()) {
		g.bias_dtype = spyre_dtype(bias.scalar_type());
		g.bias = mem_of(bias);
	}
	check(spyre_stream_gemm(stream_of(c), &g), "GEMM", dev_of(c));
}

bool gemm_ok(const at::Tensor &a, const at::Tensor &b)
{
	for (const at::Tensor *t : {&a, &b})
		for (int64_t d : t->sizes())
			if (d > UINT32_MAX)
				return false;
	return compute_dtype(a.scalar_type()) &&
	       a.scalar_type() == b.scalar_type() && same_card(a, b);
}

at::Tensor k_mm(const at::Tensor &self, const at::Tensor &mat2)
{
	if (!gemm_ok(self, mat2) || self.dim() != 2 || mat2.dim() != 2)
		return SPYRE_FALLBACK(mm, self, mat2);
	count_native("aten::mm");
	c10::DeviceGuard g(self.device());
	at::Tensor c = empty_on(self, {self.size(0), mat2.size(1)},
				self.scalar_type());
	if (c.numel() == 0)
		return c;
	if (self.size(1) == 0)
		return c.zero_();
	gemm(c, self, mat2, 1.0f, 0.0f, at::Tensor(), 1);
	return c;
}

at::Tensor k_bmm(const at::Tensor &self, const at::Tensor &mat2)
{
	if (!gemm_ok(self, mat2) || self.dim() != 3 || mat2.dim() != 3)
		return SPYRE_FALLBACK(bmm, self, mat2);
	count_native("aten::bmm");
	c10::DeviceGuard g(self.device());
	at::Tensor c = empty_on(self, {self.size(0), self.size(1), mat2.size(2)},
				self.scalar_type());
	if (c.numel() == 0)
		return c;
	if (self.size(2) == 0)
		return c.zero_();
	gemm(c, self, mat2, 1.0f, 0.0f, at::Tensor(), self.size(0));
	return c;
}

at::Tensor k_addmm(const at::Tensor &self, const at::Tensor &m1,
		   const at::Tensor &m2, const at::Scalar &beta,
		   const at::Scalar &alpha)
{
	if (!gemm_ok(m1, m2) || !same_card(self, m1) ||
	    self.scalar_type() != m1.scalar_type() || m1.dim() != 2 ||
	    m2.dim() != 2)
		return SPYRE_FALLBACK(addmm, self, m1, m2, beta, alpha);
	count_native("aten::addmm");
	c10::DeviceGuard g(self.device());
	int64_t M = m1.size(0), N = m2.size(1);
	at::Tensor c = empty_on(self, {M, N}, self.scalar_type());
	if (c.numel() == 0)
		return c;
	float b = static_cast<float>(beta.toDouble());
	float a = static_cast<float>(alpha.toDouble());
	at::Tensor bias;
	bool row = (self.dim() == 1 && self.size(0) == N) ||
		   (self.dim() == 2 && self.size(0) == 1 && self.size(1) == N);
	if (b == 1.0f && row && self.stride(-1) == 1 && m1.size(1) > 0) {
		bias = self.reshape({N});
		b = 0.0f;
	} else if (b != 0.0f) {
		copy_device(c, self.expand({M, N}));
	}
	if (m1.size(1) == 0) {
		// no product: C = beta * self
		if (b == 0.0f && !bias.defined())
			return c.zero_();
		at::Tensor r = bias.defined() ? bias.expand({M, N}).contiguous() : c;
		return b == 1.0f || bias.defined() ? r : k_mul_scalar(r, b);
	}
	gemm(c, m1, m2, a, b, bias, 1);
	return c;
}

// ---- row operations and reductions ------------------------------------

int64_t norm_dim(int64_t d, int64_t nd) { return d < 0 ? d + nd : d; }

at::Tensor k_softmax(const at::Tensor &self, int64_t dim, bool half_to_float)
{
	int64_t nd = self.dim();
	if (!compute_dtype(self.scalar_type()) || half_to_float || nd == 0 ||
	    norm_dim(dim, nd) != nd - 1 || self.numel() == 0 ||
	    self.numel() >= (1ll << 30))
		return SPYRE_FALLBACK(_softmax, self, dim, half_to_float);
	count_native("aten::_softmax");
	c10::DeviceGuard g(self.device());
	at::Tensor x = contig(self);
	at::Tensor out = empty_on(x, x.sizes(), x.scalar_type());
	int64_t cols = x.size(-1), rows = x.numel() / cols;
	check(spyre_stream_softmax(stream_of(x), spyre_dtype(x.scalar_type()),
				   static_cast<uint32_t>(rows),
				   static_cast<uint32_t>(cols), mem_of(out), 0,
				   mem_of(x), 0), "softmax", dev_of(x));
	return out;
}

// The reduction dims @dim mean "the last dimension" (or all, for an empty
// list on a 1-D tensor / everything contiguous).
bool last_dim_only(const at::Tensor &self, at::OptionalIntArrayRef dim,
		   bool *all)
{
	int64_t nd = self.dim();
	*all = false;
	if (nd == 0)
		return false;
	if (!dim.has_value() || dim->empty()) {
		*all = true;
		return true;
	}
	if (dim->size() != 1)
		return false;
	return norm_dim((*dim)[0], nd) == nd - 1;
}

at::Tensor reduce(uint32_t op, const at::Tensor &self, bool all, bool keepdim,
		  bool mean)
{
	c10::DeviceGuard g(self.device());
	at::Tensor x = contig(self);
	int64_t cols = all ? x.numel() : x.size(-1);
	int64_t rows = all ? 1 : x.numel() / std::max<int64_t>(cols, 1);
	std::vector<int64_t> shape;
	if (all) {
		if (keepdim)
			shape.assign(x.dim(), 1);
	} else {
		shape.assign(x.sizes().begin(), x.sizes().end());
		if (keepdim)
			shape.back() = 1;
		else
			shape.pop_back();
	}
	at::Tensor out = empty_on(x, shape, x.scalar_type());
	uint32_t dt = spyre_dtype(x.scalar_type());
	int index = dev_of(x);
	struct spyre_cmdbuf *cb = cmdbuf();
	check(spyre_cmdbuf_reduce(cb, op, dt, static_cast<uint32_t>(rows),
				  static_cast<uint32_t>(cols), mem_of(out),
				  mem_of(x), 0), "encoding a reduction", index);
	if (mean)
		check(spyre_cmdbuf_eltwise(cb, SPYRE_ELT_SCALE, dt, out.numel(),
					   mem_of(out), mem_of(out),
					   SPYRE_MEM_NONE,
					   static_cast<float>(1.0 / cols)),
		      "encoding a reduction", index);
	check(spyre_stream_submit(stream_of(x), cb, nullptr, 0), "reduction",
	      index);
	return out;
}

bool reduce_ok(const at::Tensor &self, at::OptionalIntArrayRef dim, bool *all)
{
	return compute_dtype(self.scalar_type()) && self.numel() > 0 &&
	       self.numel() < (1ll << 30) && last_dim_only(self, dim, all);
}

// The reduction dims @dim are the leading k dims (0 < k < dim()): *k.
bool leading_dims(const at::Tensor &self, at::OptionalIntArrayRef dim,
		  int64_t *k)
{
	int64_t nd = self.dim();
	if (!dim.has_value() || dim->empty() || nd < 2)
		return false;
	std::vector<bool> seen(nd, false);
	for (int64_t d : *dim) {
		d = norm_dim(d, nd);
		if (d < 0 || d >= nd || seen[d])
			return false;
		seen[d] = true;
	}
	*k = static_cast<int64_t>(dim->size());
	if (*k >= nd)
		return false;
	for (int64_t i = 0; i < *k; i++)
		if (!seen[i])
			return false;
	return true;
}

// Sum (or mean) over the leading @k dims: one GEMM, ones[1 x P] @ X[P x Q]
// (fp32 accumulation, as the CPU's reductions of fp16/bf16).
at::Tensor reduce_leading(const at::Tensor &self, int64_t k, bool keepdim,
			  bool mean)
{
	c10::DeviceGuard g(self.device());
	at::Tensor x = contig(self);
	at::ScalarType dt = x.scalar_type();
	int64_t P = 1;
	for (int64_t i = 0; i < k; i++)
		P *= x.size(i);
	int64_t Q = x.numel() / P;
	std::vector<int64_t> shape(x.sizes().begin() + k, x.sizes().end());
	if (keepdim)
		shape.insert(shape.begin(), k, 1);
	at::Tensor out = empty_on(x, shape, dt);
	at::Tensor ones = empty_on(x, {P}, dt);
	int index = dev_of(x);
	struct spyre_cmdbuf *cb = cmdbuf();
	check(spyre_cmdbuf_fill_mem(cb, mem_of(ones), P, ones.element_size(),
				bits_of(at::Scalar(1.0), dt)), "encoding", index);
	struct spyre_gemm gm;
	std::memset(&gm, 0, sizeof(gm));
	gm.a_dtype = gm.b_dtype = gm.c_dtype = spyre_dtype(dt);
	gm.m = 1;
	gm.k = static_cast<uint32_t>(P);
	gm.n = static_cast<uint32_t>(Q);
	gm.a = mem_of(ones);
	gm.b = mem_of(x);
	gm.c = mem_of(out);
	gm.alpha = mean ? static_cast<float>(1.0 / P) : 1.0f;
	check(spyre_cmdbuf_gemm(cb, &gm), "encoding", index);
	check(spyre_stream_submit(stream_of(x), cb, nullptr, 0), "reduction",
	      index);
	return out;
}

at::Tensor k_sum(const at::Tensor &self, at::OptionalIntArrayRef dim,
		 bool keepdim, std::optional<at::ScalarType> dtype)
{
	bool all;
	int64_t k;
	bool same = !dtype.has_value() || *dtype == self.scalar_type();
	if (same && compute_dtype(self.scalar_type()) && self.numel() > 0 &&
	    leading_dims(self, dim, &k)) {
		count_native("aten::sum.dim_IntList");
		return reduce_leading(self, k, keepdim, false);
	}
	if (!same || !reduce_ok(self, dim, &all))
		return SPYRE_FALLBACK2(sum, dim_IntList, self, dim, keepdim,
				       dtype);
	count_native("aten::sum.dim_IntList");
	return reduce(SPYRE_REDUCE_SUM, self, all, keepdim, false);
}

at::Tensor k_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
		  bool keepdim, std::optional<at::ScalarType> dtype)
{
	bool all;
	int64_t k;
	bool same = !dtype.has_value() || *dtype == self.scalar_type();
	if (same && compute_dtype(self.scalar_type()) && self.numel() > 0 &&
	    leading_dims(self, dim, &k)) {
		count_native("aten::mean.dim");
		return reduce_leading(self, k, keepdim, true);
	}
	if (!same || !reduce_ok(self, dim, &all))
		return SPYRE_FALLBACK2(mean, dim, self, dim, keepdim, dtype);
	count_native("aten::mean.dim");
	return reduce(SPYRE_REDUCE_SUM, self, all, keepdim, true);
}

at::Tensor k_amax(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	bool all;
	if (!reduce_ok(self, dim, &all))
		return SPYRE_FALLBACK(amax, self, dim, keepdim);
	count_native("aten::amax");
	return reduce(SPYRE_REDUCE_MAX, self, all, keepdim, false);
}

// mse_loss and its backward (reduction 0 none, 1 mean, 2 sum), from
// element-wise ops and a full reduction.
bool mse_ok(const at::Tensor &a, const at::Tensor &b, int64_t reduction)
{
	return compute_dtype(a.scalar_type()) && a.scalar_type() ==
	       b.scalar_type() && same_card(a, b) && a.sizes() == b.sizes() &&
	       a.numel() > 0 && a.numel() < (1ll << 30) && reduction >= 0 &&
	       reduction <= 2;
}

at::Tensor k_mse_loss(const at::Tensor &self, const at::Tensor &target,
		      int64_t reduction)
{
	if (!mse_ok(self, target, reduction))
		return SPYRE_FALLBACK(mse_loss, self, target, reduction);
	count_native("aten::mse_loss");
	at::ScalarType dt = self.scalar_type();
	at::Tensor d = eltwise(SPYRE_ELT_ADD, self,
			       eltwise(SPYRE_ELT_SCALE, target, at::Tensor(),
				       -1.0f, dt, target.sizes()),
			       1.0f, dt, self.sizes());
	at::Tensor sq = eltwise(SPYRE_ELT_MUL, d, d, 1.0f, dt, d.sizes());
	if (reduction == 0)
		return sq;
	return reduce(SPYRE_REDUCE_SUM, sq, true, false, reduction == 1);
}

at::Tensor k_mse_loss_backward(const at::Tensor &grad, const at::Tensor &self,
			       const at::Tensor &target, int64_t reduction)
{
	if (!mse_ok(self, target, reduction) || !same_card(grad, self) ||
	    grad.scalar_type() != self.scalar_type())
		return SPYRE_FALLBACK(mse_loss_backward, grad, self, target,
				      reduction);
	count_native("aten::mse_loss_backward");
	at::ScalarType dt = self.scalar_type();
	float k = reduction == 1 ? 2.0f / static_cast<float>(self.numel()) :
		  2.0f;
	at::Tensor d = eltwise(SPYRE_ELT_ADD, self,
			       eltwise(SPYRE_ELT_SCALE, target, at::Tensor(),
				       -1.0f, dt, target.sizes()),
			       1.0f, dt, self.sizes());
	at::Tensor r = eltwise(SPYRE_ELT_MUL, d, grad, 1.0f, dt, self.sizes());
	return eltwise(SPYRE_ELT_SCALE, r, at::Tensor(), k, dt, r.sizes(), &r);
}

// native_layer_norm: the output by the card's LAYERNORM row op; mean and
// rstd (saved for the backward) on the card too, with GEMMs and an RMSNORM:
//   mean = X @ 1 / N
//   R    = [s * (X - mean 1^T) | e]      s = sqrt((N+1)/N), e = sqrt(eps (N+1))
//   RMSNORM(R) (eps 0) ends each row with e / sqrt(var + eps), so
//   rstd = that column / e.
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_layer_norm(const at::Tensor &input, at::IntArrayRef normalized_shape,
	     const std::optional<at::Tensor> &weight,
	     const std::optional<at::Tensor> &bias, double eps)
{
	at::ScalarType dt = input.scalar_type();
	int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
	bool ok = compute_dtype(dt) && axis >= 0 && input.numel() > 0 &&
		  input.numel() < (1ll << 29) && eps > 0;
	for (const auto &w : {weight, bias})
		if (w.has_value() && w->defined())
			ok = ok && same_card(*w, input);
	if (!ok)
		return SPYRE_FALLBACK(native_layer_norm, input,
				      normalized_shape, weight, bias, eps);
	count_native("aten::native_layer_norm");
	c10::DeviceGuard guard(input.device());
	at::Tensor x = contig(input);
	int64_t N = 1;
	for (auto s : normalized_shape)
		N *= s;
	int64_t M = x.numel() / N;
	auto f32 = [&](const std::optional<at::Tensor> &w) {
		if (!w.has_value() || !w->defined())
			return at::Tensor();
		return contig(w->to(at::kFloat)).reshape({N});
	};
	at::Tensor gw = f32(weight), gb = f32(bias);
	at::Tensor out = empty_on(x, x.sizes(), dt);
	std::vector<int64_t> stat_shape(x.sizes().begin(),
					x.sizes().begin() + axis);
	stat_shape.resize(x.dim(), 1);
	at::Tensor mean = empty_on(x, stat_shape, dt);
	at::Tensor rstd = empty_on(x, stat_shape, dt);
	// scratch: ones in dt (N) and fp32 (max(M, N)), e, mean32, R
	int64_t L = std::max(M, N);
	at::Tensor ones_x = empty_on(x, {N}, dt);
	at::Tensor ones = empty_on(x, {L}, at::kFloat);
	at::Tensor esc = empty_on(x, {2}, at::kFloat);
	at::Tensor mean32 = empty_on(x, {M}, at::kFloat);
	at::Tensor R = empty_on(x, {M, N + 1}, at::kFloat);
	float e = static_cast<float>(std::sqrt(eps * (N + 1)));
	float s = static_cast<float>(std::sqrt((N + 1.0) / N));
	uint32_t sdt = spyre_dtype(dt);
	int index = dev_of(x);
	struct spyre_cmdbuf *cb = cmdbuf();
	auto ck = [&](int rc) { check(rc, "encoding layer_norm", index); };
	ck(spyre_cmdbuf_rowop(cb, SPYRE_ROW_LAYERNORM, sdt, (uint32_t)M,
			      (uint32_t)N, mem_of(out), 0, mem_of(x), 0,
			      gw.defined() ? mem_of(gw) : SPYRE_MEM_NONE,
			      gb.defined() ? mem_of(gb) : SPYRE_MEM_NONE,
			      static_cast<float>(eps)));
	ck(spyre_cmdbuf_fill_mem(cb, mem_of(ones_x), N, ones_x.element_size(),
			     bits_of(at::Scalar(1.0), dt)));
	ck(spyre_cmdbuf_fill_mem(cb, mem_of(ones), L, 4,
			     bits_of(at::Scalar(1.0), at::kFloat)));
	ck(spyre_cmdbuf_fill_mem(cb, mem_of(esc), 1, 4,
			     bits_of(at::Scalar(e), at::kFloat)));
	struct spyre_gemm g;
	// mean32 = X @ ones_x / N        (M x N) (N x 1)
	std::memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = sdt;
	g.c_dtype = SPYRE_DTYPE_FP32;
	g.m = (uint32_t)M; g.n = 1; g.k = (uint32_t)N;
	g.a = mem_of(x); g.b = mem_of(ones_x); g.c = mem_of(mean32);
	g.alpha = static_cast<float>(1.0 / N);
	ck(spyre_cmdbuf_gemm(cb, &g));
	// R[:, :N] = X (as fp32)
	ck(spyre_cmdbuf_copy_mem(cb, mem_of(R), (N + 1) * 4, SPYRE_DTYPE_FP32,
				 mem_of(x), N * x.element_size(), sdt, N, M, 0));
	// R[:, :N] = s * R - s * mean32 @ ones^T    (M x 1) (1 x N)
	std::memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = g.c_dtype = SPYRE_DTYPE_FP32;
	g.m = (uint32_t)M; g.n = (uint32_t)N; g.k = 1;
	g.a = mem_of(mean32); g.b = mem_of(ones); g.c = mem_of(R);
	g.ldc = N + 1;
	g.alpha = -s; g.beta = s;
	ck(spyre_cmdbuf_gemm(cb, &g));
	// R[:, N] = ones @ [e]             (M x 1) (1 x 1)
	std::memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = g.c_dtype = SPYRE_DTYPE_FP32;
	g.m = (uint32_t)M; g.n = 1; g.k = 1;
	g.a = mem_of(ones); g.b = mem_of(esc);
	g.c = SPYRE_MEM(mem_of(R).bo, mem_of(R).offset + N * 4);
	g.ldc = N + 1;
	g.alpha = 1.0f;
	ck(spyre_cmdbuf_gemm(cb, &g));
	ck(spyre_cmdbuf_rowop(cb, SPYRE_ROW_RMSNORM, SPYRE_DTYPE_FP32,
			      (uint32_t)M, (uint32_t)(N + 1), mem_of(R), 0,
			      mem_of(R), 0, SPYRE_MEM_NONE, SPYRE_MEM_NONE,
			      0.0f));
	// rstd = R[:, N] / e ;  mean = mean32 (both as dt)
	std::memset(&g, 0, sizeof(g));
	g.a_dtype = g.b_dtype = SPYRE_DTYPE_FP32;
	g.c_dtype = sdt;
	g.m = (uint32_t)M; g.n = 1; g.k = 1;
	g.a = SPYRE_MEM(mem_of(R).bo, mem_of(R).offset + N * 4);
	g.lda = N + 1;
	g.b = mem_of(ones); g.c = mem_of(rstd);
	g.alpha = 1.0f / e;
	ck(spyre_cmdbuf_gemm(cb, &g));
	ck(spyre_cmdbuf_convert(cb, mem_of(mean), sdt, mem_of(mean32),
				SPYRE_DTYPE_FP32, M, 0));
	struct spyre_bo *bos[2] = {mem_of(R).bo, mem_of(x).bo};
	check(spyre_stream_submit(stream_of(x), cb, bos, 2), "layer_norm",
	      index);
	return {out, mean, rstd};
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
	bool has_w = weight.has_value() && weight->defined();
	bool has_b = bias.has_value() && bias->defined();
	bool ok = compute_dtype(input.scalar_type()) && axis >= 0 &&
		  input.numel() > 0 && same_card(grad_out, input) &&
		  same_card(mean, input) && same_card(rstd, input) &&
		  (!has_w || same_card(*weight, input)) &&
		  (!has_b || same_card(*bias, input));
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

// _scaled_mm on the card's scaled fp8 GEMM: out = (sa * A) @ (sb * B) +
// bias, A and B fp8 (e4m3fn / e5m2), sa and sb one-element fp32 tensors.
at::Tensor k_scaled_mm(const at::Tensor &self, const at::Tensor &mat2,
		       const at::Tensor &scale_a, const at::Tensor &scale_b,
		       const std::optional<at::Tensor> &bias,
		       const std::optional<at::Tensor> &scale_result,
		       std::optional<at::ScalarType> out_dtype,
		       bool use_fast_accum)
{
	at::ScalarType od = out_dtype.value_or(self.scalar_type());
	bool ok = is_fp8(self.scalar_type()) && is_fp8(mat2.scalar_type()) &&
		  self.dim() == 2 && mat2.dim() == 2 &&
		  same_card(self, mat2) && same_card(self, scale_a) &&
		  same_card(self, scale_b) &&
		  scale_a.scalar_type() == at::kFloat &&
		  scale_b.scalar_type() == at::kFloat &&
		  scale_a.numel() == 1 && scale_b.numel() == 1 &&
		  !(scale_result.has_value() && scale_result->defined()) &&
		  (compute_dtype(od) || is_fp8(od));
	if (bias.has_value() && bias->defined())
		ok = ok && same_card(self, *bias) && compute_dtype(bias->scalar_type());
	TORCH_CHECK(ok, "spyre: _scaled_mm takes two 2-D float8 matrices on "
		    "one card, one-element float32 scales, no scale_result, "
		    "and an out_dtype of float32/float16/bfloat16/float8");
	(void)use_fast_accum;
	count_native("aten::_scaled_mm");
	c10::DeviceGuard g(self.device());
	at::ScalarType cd = is_fp8(od) ? at::kFloat : od;
	at::Tensor c = empty_on(self, {self.size(0), mat2.size(1)}, cd);
	Mat A = mat(self), B = mat(mat2);
	struct spyre_gemm gm;
	std::memset(&gm, 0, sizeof(gm));
	gm.flags = (A.trans ? SPYRE_GEMM_F_TRANS_A : 0) |
		   (B.trans ? SPYRE_GEMM_F_TRANS_B : 0);
	gm.a_dtype = spyre_dtype(self.scalar_type());
	gm.b_dtype = spyre_dtype(mat2.scalar_type());
	gm.c_dtype = spyre_dtype(cd);
	gm.m = (uint32_t)self.size(0);
	gm.k = (uint32_t)self.size(1);
	gm.n = (uint32_t)mat2.size(1);
	gm.a = mem_of(A.t); gm.b = mem_of(B.t); gm.c = mem_of(c);
	gm.lda = A.ld; gm.ldb = B.ld; gm.ldc = gm.n;
	gm.alpha = 1.0f;
	gm.scale_a = mem_of(contig(scale_a));
	gm.scale_b = mem_of(contig(scale_b));
	at::Tensor bb;
	if (bias.has_value() && bias->defined()) {
		bb = contig(*bias);
		gm.bias_dtype = spyre_dtype(bb.scalar_type());
		gm.bias = mem_of(bb);
	}
	check(spyre_stream_gemm(stream_of(c), &gm), "_scaled_mm", dev_of(c));
	if (cd == od)
		return c;
	at::Tensor o = empty_on(c, c.sizes(), od);
	copy_device(o, c);
	return o;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	// factory / view / copy
	m.impl("empty.memory_format", TORCH_FN(k_empty));
	m.impl("empty_strided", TORCH_FN(k_empty_strided));
	m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
	m.impl("view", TORCH_FN(at::native::view));
	m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
	m.impl("unfold", TORCH_FN(at::native::unfold));
	m.impl("resize_", TORCH_FN(k_resize_));
	m.impl("set_.source_Storage", TORCH_FN(k_set_source));
	m.impl("set_.source_Storage_storage_offset", TORCH_FN(k_set_storage));
	m.impl("_copy_from", TORCH_FN(k_copy_from));
	m.impl("_copy_from_and_resize", TORCH_FN(k_copy_from_and_resize));
	m.impl("_local_scalar_dense", TORCH_FN(k_local_scalar_dense));
	m.impl("_to_cpu", TORCH_FN(k_to_cpu));
	m.impl("record_stream", TORCH_FN(k_record_stream));
	m.impl("fill_.Scalar", TORCH_FN(k_fill_));
	m.impl("zero_", TORCH_FN(k_zero_));
	// native compute
	m.impl("mm", TORCH_FN(k_mm));
	m.impl("bmm", TORCH_FN(k_bmm));
	m.impl("addmm", TORCH_FN(k_addmm));
	m.impl("_scaled_mm", TORCH_FN(k_scaled_mm));
	m.impl("add.Tensor", TORCH_FN(k_add));
	m.impl("add_.Tensor", TORCH_FN(k_add_));
	m.impl("add.Scalar", TORCH_FN(k_add_scalar));
	m.impl("sub.Tensor", TORCH_FN(k_sub));
	m.impl("sub_.Tensor", TORCH_FN(k_sub_));
	m.impl("mul.Tensor", TORCH_FN(k_mul));
	m.impl("mul_.Tensor", TORCH_FN(k_mul_));
	m.impl("mul.Scalar", TORCH_FN(k_mul_scalar));
	m.impl("div.Tensor", TORCH_FN(k_div));
	m.impl("div_.Tensor", TORCH_FN(k_div_));
	m.impl("div.Scalar", TORCH_FN(k_div_scalar));
	m.impl("neg", TORCH_FN(k_neg));
	m.impl("relu", TORCH_FN(k_relu));
	m.impl("relu_", TORCH_FN(k_relu_));
	m.impl("silu", TORCH_FN(k_silu));
	m.impl("silu_", TORCH_FN(k_silu_));
	m.impl("exp", TORCH_FN(k_exp));
	m.impl("exp_", TORCH_FN(k_exp_));
	m.impl("gelu", TORCH_FN(k_gelu));
	m.impl("sigmoid", TORCH_FN(k_sigmoid));
	m.impl("_softmax", TORCH_FN(k_softmax));
	m.impl("native_layer_norm", TORCH_FN(k_layer_norm));
	m.impl("native_layer_norm_backward", TORCH_FN(k_layer_norm_backward));
	m.impl("sum.dim_IntList", TORCH_FN(k_sum));
	m.impl("mean.dim", TORCH_FN(k_mean));
	m.impl("amax", TORCH_FN(k_amax));
	m.impl("mse_loss", TORCH_FN(k_mse_loss));
	m.impl("mse_loss_backward", TORCH_FN(k_mse_loss_backward));
}

} // namespace spyre_torch
