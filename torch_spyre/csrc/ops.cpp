// SPDX-License-Identifier: MIT
// The ATen kernels of the spyre backend (dispatch key PrivateUse1) that are
// not generated: the factory / view / copy set every backend needs (copies
// and float conversions by the card's COPY command, other conversions by a
// generated cast kernel, FILL), and the matrix products on the card's GEMM
// (mm, bmm, addmm, baddbmm, their out= and in-place variants, _scaled_mm;
// dot, vdot, addmv and addbmm as addmm/mm; equal).
// The generated ops live in ops_pointwise.cpp, ops_reduce.cpp and
// ops_norm.cpp.
#include "kernels.h"

#include <ATen/MemoryOverlap.h>

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
		return cast_on_card(dst, src);
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
	// as PyTorch's resize_: the same sizes keep the strides
	if (self.sizes() == size && (!mf.has_value() ||
				     *mf == at::MemoryFormat::Preserve))
		return self;
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

// set_(storage, offset, size, stride) as ATen's set_storage_cpu_: the
// checks of checkSetStorage (same device, offset >= 0, as many strides as
// sizes), the view set, and the storage grown (on its card, through the
// storage-resize hook) when the view reaches past its end; a storage that
// cannot be resized raises PyTorch's RuntimeError.
at::Tensor &k_set_storage(at::Tensor &self, at::Storage src, int64_t offset,
			  at::IntArrayRef size, at::IntArrayRef stride)
{
	at::native::checkSetStorage(self, std::move(src), offset, size, stride);
	auto *impl = self.unsafeGetTensorImpl();
	impl->set_storage_offset(offset);
	if (stride.data())
		impl->set_sizes_and_strides(size, stride);
	else
		impl->set_sizes_contiguous(size);
	int64_t n = impl->numel();
	if (n) {
		uint64_t need = (static_cast<uint64_t>(offset) +
				 static_cast<uint64_t>(
					 at::detail::computeStorageNbytes(
						 impl->sizes(), impl->strides(), 1))) *
				self.element_size();
		if (need > impl->storage().nbytes()) {
			c10::DeviceGuard g(self.device());
			at::native::resize_bytes_nocuda(impl->storage(),
							c10::SymInt(need));
		}
	}
	return self;
}

at::Tensor &k_set_source(at::Tensor &self, at::Storage src)
{
	int64_t n = static_cast<int64_t>(src.nbytes() / self.element_size());
	return k_set_storage(self, std::move(src), 0, {n}, {});
}

// x.set_(y): x becomes a view of y's storage with y's offset, sizes and
// strides (an alias, as on every backend).
at::Tensor &k_set_tensor(at::Tensor &self, const at::Tensor &src)
{
	TORCH_CHECK(self.dtype() == src.dtype(), "Could not set tensor of type ",
		    src.dtype(), " to a tensor of type ", self.dtype());
	if (self.is_same(src))
		return self;
	return k_set_storage(self, src.storage(), src.storage_offset(),
			     src.sizes(), src.strides());
}

// x.set_(): an empty storage on x's card.
at::Tensor &k_set_empty(at::Tensor &self)
{
	c10::DeviceGuard g(self.device());
	at::Storage st(at::Storage::use_byte_size_t(), 0, allocator(), true);
	return k_set_storage(self, std::move(st), 0, {0}, {});
}

at::Tensor k_copy_from(const at::Tensor &self, const at::Tensor &dst,
		       bool non_blocking)
{
	if (dst.numel() == 0)
		return dst;
	if (on_spyre(dst) && on_spyre(self)) {
		count_native("aten::_copy_from");
		if (dst.device() == self.device()) {
			// PyTorch's copy_: nothing to do for the same view; no
			// written element twice, no partial overlap
			if (self.is_alias_of(dst) &&
			    self.storage_offset() == dst.storage_offset() &&
			    self.sizes() == dst.sizes() &&
			    self.strides() == dst.strides() &&
			    self.scalar_type() == dst.scalar_type())
				return dst;
			at::assert_no_internal_overlap(dst);
			at::assert_no_partial_overlap(dst, self);
			copy_device(dst, kgen::unalias(self, dst));
			return dst;
		}
		copy_device(dst, self);
	} else if (on_spyre(dst)) {
		TORCH_CHECK(self.device().is_cpu(), "spyre: copy from ",
			    self.device(), " is not supported");
		count_native("aten::_copy_from");
		c10::DeviceGuard g(dst.device());
		if (copy_pinned(dst, self, non_blocking))	// pinned.cpp
			return dst;
		from_host(dst, self);
	} else {
		TORCH_CHECK(dst.device().is_cpu(), "spyre: copy to ",
			    dst.device(), " is not supported");
		count_native("aten::_copy_from");
		c10::DeviceGuard g(self.device());
		if (copy_pinned(dst, self, non_blocking))	// pinned.cpp
			return dst;
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

struct spyre_stream *stream_of(const at::Tensor &t) { return cur(dev_of(t)); }

bool same_card(const at::Tensor &a, const at::Tensor &b)
{
	return on_spyre(a) && on_spyre(b) && a.device() == b.device();
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


// Whether @t shares memory with one of @ins (the defined ones).
bool shares(const at::Tensor &t, std::initializer_list<const at::Tensor *> ins)
{
	for (const at::Tensor *i : ins)
		if (i->defined() && i->storage().is_alias_of(t.storage()))
			return true;
	return false;
}

// A destination for a GEMM result of @shape in dtype @dt: @out (resized as
// PyTorch does) when it is of that dtype, shares no memory with @ins
// (which it must not lose before they are read) and is contiguous once
// resized, else a new tensor that finish() copies into @out.
at::Tensor dest(const at::Tensor *out, const at::Tensor &like,
		at::IntArrayRef shape, at::ScalarType dt,
		std::initializer_list<const at::Tensor *> ins)
{
	if (out && out->scalar_type() == dt && !shares(*out, ins)) {
		at::native::resize_output(*out, shape);
		if (out->is_contiguous())
			return *out;
	}
	return empty_on(like, shape, dt);
}

void finish(const at::Tensor *out, const at::Tensor &c)
{
	if (out && !c.is_same(*out)) {
		at::native::resize_output(*out, c.sizes());
		out->copy_(c);
	}
}

// c = beta * self (broadcast to c) when the product has no terms (K = 0)
void beta_only(const at::Tensor &c, const at::Tensor &self, float beta)
{
	if (beta == 0.0f) {
		c.zero_();
		return;
	}
	copy_device(c, self.expand(c.sizes()));
	if (beta != 1.0f)
		c.mul_(beta);
}

// The integer products (the GEMM has no integer path): @self (undefined:
// none) broadcast to the product's shape, beta * self + alpha * a @ b by
// int_matmul() into @out (resized as PyTorch does) or a new tensor.  An
// undefined result, with nothing done, when that does not apply (shapes,
// dtypes, devices, a complex alpha or beta): the caller falls back and
// the CPU kernel raises what PyTorch raises.
at::Tensor int_mm(const at::Tensor *out, const at::Tensor &self,
		  const at::Tensor &a, const at::Tensor &b,
		  const at::Scalar &beta, const at::Scalar &alpha)
{
	at::ScalarType dt = a.scalar_type();
	int64_t nd = a.dim();
	if (!at::isIntegralType(dt, false) || !kgen::kdtype(dt) ||
	    b.scalar_type() != dt || (nd != 2 && nd != 3) || b.dim() != nd ||
	    !same_card(a, b) || a.size(-1) != b.size(-2) ||
	    (nd == 3 && a.size(0) != b.size(0)) || alpha.isComplex() ||
	    beta.isComplex())
		return {};
	std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end());
	shape.back() = b.size(-1);
	if (self.defined() && (!same_card(self, a) || self.scalar_type() != dt ||
			       !at::is_expandable_to(self.sizes(), shape)))
		return {};
	if (out && (!same_card(*out, a) || out->scalar_type() != dt))
		return {};
	c10::DeviceGuard g(a.device());
	at::Tensor c = dest(out, a, shape, dt, {&self, &a, &b});
	if (!int_matmul(c, a, b, self, beta, alpha))
		return {};
	finish(out, c);
	return out ? *out : c;
}

at::Tensor mm_impl(const at::Tensor &self, const at::Tensor &mat2,
		   const at::Tensor *out)
{
	c10::DeviceGuard g(self.device());
	at::Tensor c = dest(out, self, {self.size(0), mat2.size(1)},
			    self.scalar_type(), {&self, &mat2});
	if (c.numel() && self.size(1) == 0)
		c.zero_();
	else if (c.numel())
		gemm(c, self, mat2, 1.0f, 0.0f, at::Tensor(), 1);
	finish(out, c);
	return out ? *out : c;
}

bool mm_ok(const at::Tensor &a, const at::Tensor &b)
{
	return gemm_ok(a, b) && a.dim() == 2 && b.dim() == 2 &&
	       a.size(1) == b.size(0);
}

at::Tensor k_mm(const at::Tensor &self, const at::Tensor &mat2)
{
	if (!mm_ok(self, mat2)) {
		at::Tensor r = int_mm(nullptr, at::Tensor(), self, mat2, 0, 1);
		if (r.defined()) {
			count_native("aten::mm");
			return r;
		}
		return SPYRE_FALLBACK(mm, self, mat2);
	}
	count_native("aten::mm");
	return mm_impl(self, mat2, nullptr);
}

at::Tensor &k_mm_out(const at::Tensor &self, const at::Tensor &mat2,
		     at::Tensor &out)
{
	if (!mm_ok(self, mat2) || !same_card(self, out) ||
	    out.scalar_type() != self.scalar_type()) {
		if (int_mm(&out, at::Tensor(), self, mat2, 0, 1).defined()) {
			count_native("aten::mm.out");
			return out;
		}
		return SPYRE_FALLBACK2(mm, out, self, mat2, out);
	}
	count_native("aten::mm.out");
	mm_impl(self, mat2, &out);
	return out;
}

at::Tensor bmm_impl(const at::Tensor &self, const at::Tensor &mat2,
		    const at::Tensor *out)
{
	c10::DeviceGuard g(self.device());
	at::Tensor c = dest(out, self, {self.size(0), self.size(1), mat2.size(2)},
			    self.scalar_type(), {&self, &mat2});
	if (c.numel() && self.size(2) == 0)
		c.zero_();
	else if (c.numel())
		gemm(c, self, mat2, 1.0f, 0.0f, at::Tensor(), self.size(0));
	finish(out, c);
	return out ? *out : c;
}

bool bmm_ok(const at::Tensor &a, const at::Tensor &b)
{
	return gemm_ok(a, b) && a.dim() == 3 && b.dim() == 3 &&
	       a.size(0) == b.size(0) && a.size(2) == b.size(1);
}

at::Tensor k_bmm(const at::Tensor &self, const at::Tensor &mat2)
{
	if (!bmm_ok(self, mat2)) {
		at::Tensor r = int_mm(nullptr, at::Tensor(), self, mat2, 0, 1);
		if (r.defined()) {
			count_native("aten::bmm");
			return r;
		}
		return SPYRE_FALLBACK(bmm, self, mat2);
	}
	count_native("aten::bmm");
	return bmm_impl(self, mat2, nullptr);
}

at::Tensor &k_bmm_out(const at::Tensor &self, const at::Tensor &mat2,
		      at::Tensor &out)
{
	if (!bmm_ok(self, mat2) || !same_card(self, out) ||
	    out.scalar_type() != self.scalar_type()) {
		if (int_mm(&out, at::Tensor(), self, mat2, 0, 1).defined()) {
			count_native("aten::bmm.out");
			return out;
		}
		return SPYRE_FALLBACK2(bmm, out, self, mat2, out);
	}
	count_native("aten::bmm.out");
	bmm_impl(self, mat2, &out);
	return out;
}

bool addmm_ok(const at::Tensor &self, const at::Tensor &m1,
	      const at::Tensor &m2)
{
	return gemm_ok(m1, m2) && same_card(self, m1) &&
	       self.scalar_type() == m1.scalar_type() && m1.dim() == 2 &&
	       m2.dim() == 2 && m1.size(1) == m2.size(0) && self.dim() <= 2;
}

// beta * self + alpha * m1 @ m2; a row bias (beta 1) is the GEMM's bias
// operand, a transposed operand its transpose flag.
at::Tensor addmm_impl(const at::Tensor &self, const at::Tensor &m1,
		      const at::Tensor &m2, const at::Scalar &beta,
		      const at::Scalar &alpha, const at::Tensor *out)
{
	c10::DeviceGuard g(self.device());
	int64_t M = m1.size(0), N = m2.size(1);
	at::Tensor c = dest(out, self, {M, N}, self.scalar_type(),
			    {&self, &m1, &m2});
	float b = static_cast<float>(beta.toDouble());
	float a = static_cast<float>(alpha.toDouble());
	if (c.numel() == 0) {
		finish(out, c);
		return out ? *out : c;
	}
	if (m1.size(1) == 0) {
		beta_only(c, self, b);
		finish(out, c);
		return out ? *out : c;
	}
	at::Tensor bias;
	bool row = (self.dim() == 1 && self.size(0) == N) ||
		   (self.dim() == 2 && self.size(0) == 1 && self.size(1) == N);
	if (b == 1.0f && row && self.stride(-1) == 1) {
		bias = self.reshape({N});
		b = 0.0f;
	} else if (b != 0.0f) {
		copy_device(c, self.expand({M, N}));
	}
	gemm(c, m1, m2, a, b, bias, 1);
	finish(out, c);
	return out ? *out : c;
}

at::Tensor k_addmm(const at::Tensor &self, const at::Tensor &m1,
		   const at::Tensor &m2, const at::Scalar &beta,
		   const at::Scalar &alpha)
{
	if (!addmm_ok(self, m1, m2)) {
		at::Tensor r = m1.dim() == 2 ?
			int_mm(nullptr, self, m1, m2, beta, alpha) : at::Tensor();
		if (r.defined()) {
			count_native("aten::addmm");
			return r;
		}
		return SPYRE_FALLBACK(addmm, self, m1, m2, beta, alpha);
	}
	count_native("aten::addmm");
	return addmm_impl(self, m1, m2, beta, alpha, nullptr);
}

at::Tensor &k_addmm_out(const at::Tensor &self, const at::Tensor &m1,
			const at::Tensor &m2, const at::Scalar &beta,
			const at::Scalar &alpha, at::Tensor &out)
{
	if (!addmm_ok(self, m1, m2) || !same_card(self, out) ||
	    out.scalar_type() != self.scalar_type()) {
		if (m1.dim() == 2 &&
		    int_mm(&out, self, m1, m2, beta, alpha).defined()) {
			count_native("aten::addmm.out");
			return out;
		}
		return SPYRE_FALLBACK2(addmm, out, self, m1, m2, beta, alpha, out);
	}
	count_native("aten::addmm.out");
	addmm_impl(self, m1, m2, beta, alpha, &out);
	return out;
}

at::Tensor &k_addmm_(at::Tensor &self, const at::Tensor &m1,
		     const at::Tensor &m2, const at::Scalar &beta,
		     const at::Scalar &alpha)
{
	bool fits = self.dim() == 2 && m1.dim() == 2 && m2.dim() == 2 &&
		    self.size(0) == m1.size(0) && self.size(1) == m2.size(1);
	if (!addmm_ok(self, m1, m2) || !fits) {
		at::Tensor r = fits ? int_mm(nullptr, self, m1, m2, beta, alpha) :
			       at::Tensor();
		if (r.defined()) {
			count_native("aten::addmm_");
			self.copy_(r);
			return self;
		}
		return SPYRE_FALLBACK(addmm_, self, m1, m2, beta, alpha);
	}
	count_native("aten::addmm_");
	at::Tensor r = addmm_impl(self, m1, m2, beta, alpha, nullptr);
	self.copy_(r);
	return self;
}

bool baddbmm_ok(const at::Tensor &self, const at::Tensor &b1,
		const at::Tensor &b2)
{
	return bmm_ok(b1, b2) && same_card(self, b1) &&
	       self.scalar_type() == b1.scalar_type() && self.dim() <= 3;
}

at::Tensor baddbmm_impl(const at::Tensor &self, const at::Tensor &b1,
			const at::Tensor &b2, const at::Scalar &beta,
			const at::Scalar &alpha, const at::Tensor *out)
{
	c10::DeviceGuard g(self.device());
	at::Tensor c = dest(out, self, {b1.size(0), b1.size(1), b2.size(2)},
			    self.scalar_type(), {&self, &b1, &b2});
	float b = static_cast<float>(beta.toDouble());
	float a = static_cast<float>(alpha.toDouble());
	if (c.numel() == 0) {
		// nothing to compute
	} else if (b1.size(2) == 0) {
		beta_only(c, self, b);
	} else {
		if (b != 0.0f)
			copy_device(c, self.expand(c.sizes()));
		gemm(c, b1, b2, a, b, at::Tensor(), b1.size(0));
	}
	finish(out, c);
	return out ? *out : c;
}

at::Tensor k_baddbmm(const at::Tensor &self, const at::Tensor &b1,
		     const at::Tensor &b2, const at::Scalar &beta,
		     const at::Scalar &alpha)
{
	if (!baddbmm_ok(self, b1, b2)) {
		at::Tensor r = b1.dim() == 3 ?
			int_mm(nullptr, self, b1, b2, beta, alpha) : at::Tensor();
		if (r.defined()) {
			count_native("aten::baddbmm");
			return r;
		}
		return SPYRE_FALLBACK(baddbmm, self, b1, b2, beta, alpha);
	}
	count_native("aten::baddbmm");
	return baddbmm_impl(self, b1, b2, beta, alpha, nullptr);
}

at::Tensor &k_baddbmm_out(const at::Tensor &self, const at::Tensor &b1,
			  const at::Tensor &b2, const at::Scalar &beta,
			  const at::Scalar &alpha, at::Tensor &out)
{
	if (!baddbmm_ok(self, b1, b2) || !same_card(self, out) ||
	    out.scalar_type() != self.scalar_type()) {
		if (b1.dim() == 3 &&
		    int_mm(&out, self, b1, b2, beta, alpha).defined()) {
			count_native("aten::baddbmm.out");
			return out;
		}
		return SPYRE_FALLBACK2(baddbmm, out, self, b1, b2, beta, alpha,
				       out);
	}
	count_native("aten::baddbmm.out");
	baddbmm_impl(self, b1, b2, beta, alpha, &out);
	return out;
}

at::Tensor &k_baddbmm_(at::Tensor &self, const at::Tensor &b1,
		       const at::Tensor &b2, const at::Scalar &beta,
		       const at::Scalar &alpha)
{
	if (!baddbmm_ok(self, b1, b2) || self.dim() != 3 ||
	    self.size(0) != b1.size(0) || self.size(1) != b1.size(1) ||
	    self.size(2) != b2.size(2)) {
		bool fits = self.dim() == 3 && b1.dim() == 3 && b2.dim() == 3 &&
			    self.size(0) == b1.size(0) &&
			    self.size(1) == b1.size(1) &&
			    self.size(2) == b2.size(2);
		at::Tensor r = fits ? int_mm(nullptr, self, b1, b2, beta, alpha) :
			       at::Tensor();
		if (r.defined()) {
			count_native("aten::baddbmm_");
			self.copy_(r);
			return self;
		}
		return SPYRE_FALLBACK(baddbmm_, self, b1, b2, beta, alpha);
	}
	count_native("aten::baddbmm_");
	at::Tensor r = baddbmm_impl(self, b1, b2, beta, alpha, nullptr);
	self.copy_(r);
	return self;
}

// ---- vector and batch-reduced products, on the same paths ----------------------

// Whether the card computes a product of @ts (the defined ones; null
// pointers are skipped): one card, one dtype that the GEMM (float32,
// float16, bfloat16: f32 accumulation, rounded once) or the integer
// matmul kernel (the integer types) takes, with real @beta and @alpha
// that an integer product takes as PyTorch does (integral ones).  Else
// the CPU fallback, whose checks raise PyTorch's errors.
bool prod_ok(std::initializer_list<const at::Tensor *> ts,
	     const at::Scalar &beta = 1, const at::Scalar &alpha = 1)
{
	const at::Tensor &a = **ts.begin();
	at::ScalarType dt = a.scalar_type();
	bool ints = at::isIntegralType(dt, false);
	if (!(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16 ||
	      (ints && kgen::kdtype(dt))) ||
	    beta.isComplex() || alpha.isComplex() ||
	    (ints && (beta.isFloatingPoint() || alpha.isFloatingPoint())))
		return false;
	for (const at::Tensor *t : ts)
		if (t && t->defined() &&
		    (t->scalar_type() != dt || !same_card(*t, a)))
			return false;
	return true;
}

// dot / vdot (real types: the same) of 1-D @self and @other of one size:
// the [1, n] x [n, 1] product.
bool dot_ok(const at::Tensor &self, const at::Tensor &other)
{
	return self.dim() == 1 && other.dim() == 1 &&
	       self.size(0) == other.size(0) && prod_ok({&self, &other});
}

at::Tensor dot_impl(const at::Tensor &self, const at::Tensor &other)
{
	c10::DeviceGuard g(self.device());
	int64_t n = self.size(0);
	return at::mm(self.view({1, n}), other.view({n, 1}))
		.view(at::IntArrayRef());
}

at::Tensor k_dot(const at::Tensor &self, const at::Tensor &other)
{
	if (!dot_ok(self, other))
		return SPYRE_FALLBACK(dot, self, other);
	count_native("aten::dot");
	return dot_impl(self, other);
}

at::Tensor k_vdot(const at::Tensor &self, const at::Tensor &other)
{
	if (!dot_ok(self, other))
		return SPYRE_FALLBACK(vdot, self, other);
	count_native("aten::vdot");
	return dot_impl(self, other);
}

// @v rounded to the half type @dt (else unchanged): the CPU's gemv takes
// alpha and beta in the dtype.
at::Scalar in_dtype(const at::Scalar &v, at::ScalarType dt)
{
	if (dt == at::kHalf)
		return static_cast<double>(static_cast<at::Half>(v.toDouble()));
	if (dt == at::kBFloat16)
		return static_cast<double>(static_cast<at::BFloat16>(v.toDouble()));
	return v;
}

// beta * self + alpha * mat @ vec (mv is this with beta 0): @mat [M, K],
// @vec [K], @self broadcast to [M]; addmm with vec as a [K, 1] matrix,
// beta and alpha rounded to a half type first, as the CPU's gemv (whose
// generic path, alpha not 1, is mirrored for a row-major @mat in the half
// types).  Into @out (resized to [M]; through a temporary when it is
// an input, dest()) when given, else a new tensor.  Undefined, nothing
// done, when the card does not take it (the caller falls back).
at::Tensor addmv_impl(const at::Tensor &self, const at::Tensor &mat,
		      const at::Tensor &vec, const at::Scalar &beta,
		      const at::Scalar &alpha, at::Tensor *out)
{
	if (mat.dim() != 2 || vec.dim() != 1 || mat.size(1) != vec.size(0) ||
	    self.dim() > 1 ||
	    !at::is_expandable_to(self.sizes(), {mat.size(0)}) ||
	    !prod_ok({&mat, &vec, &self, out}, beta, alpha))
		return {};
	c10::DeviceGuard g(mat.device());
	at::ScalarType dt = mat.scalar_type();
	at::Scalar b = in_dtype(beta, dt), a = in_dtype(alpha, dt);
	bool half = dt == at::kHalf || dt == at::kBFloat16;
	at::Tensor r = dest(out, mat, {mat.size(0)}, dt, {&self, &mat, &vec});
	if (half && mat.stride(1) == 1 && a.toDouble() != 1.0) {
		// the CPU's generic gemv for a row-major mat: each product
		// rounded to the dtype, summed in f32, then beta * self
		// (rounded to the dtype) + alpha * sum, rounded once
		at::Tensor f = at::mul(mat, vec).sum(1, false, at::kFloat).mul(a);
		if (b.toDouble() != 0.0)
			f = f.add(self.mul(b).expand({mat.size(0)}).to(at::kFloat));
		r.copy_(f);
	} else {
		at::Tensor s = self.dim() == 1 ? self.unsqueeze(1) : self;
		at::Tensor o = r.unsqueeze(1);
		at::addmm_out(o, s, mat, vec.unsqueeze(1), b, a);
	}
	finish(out, r);
	return out ? *out : r;
}

at::Tensor k_addmv(const at::Tensor &self, const at::Tensor &mat,
		   const at::Tensor &vec, const at::Scalar &beta,
		   const at::Scalar &alpha)
{
	at::Tensor r = addmv_impl(self, mat, vec, beta, alpha, nullptr);
	if (!r.defined())
		return SPYRE_FALLBACK(addmv, self, mat, vec, beta, alpha);
	count_native("aten::addmv");
	return r;
}

at::Tensor &k_addmv_out(const at::Tensor &self, const at::Tensor &mat,
			const at::Tensor &vec, const at::Scalar &beta,
			const at::Scalar &alpha, at::Tensor &out)
{
	if (!addmv_impl(self, mat, vec, beta, alpha, &out).defined())
		return SPYRE_FALLBACK2(addmv, out, self, mat, vec, beta, alpha,
				       out);
	count_native("aten::addmv.out");
	return out;
}

// beta * self + alpha * sum over b of b1[b] @ b2[b]: @b1 [B, N, K], @b2
// [B, K, P], @self broadcast to [N, P].  float32 and the integers: one
// product whose inner dim runs over the batch; the half types round where
// the CPU does, after each batch's addmm_ (beta on the first).  Into @out
// (resized to [N, P]) when given, else a new tensor.  Undefined, nothing
// done, when the card does not take it.
at::Tensor addbmm_impl(const at::Tensor &self, const at::Tensor &b1,
		       const at::Tensor &b2, const at::Scalar &beta,
		       const at::Scalar &alpha, at::Tensor *out)
{
	if (b1.dim() != 3 || b2.dim() != 3 || b1.size(0) != b2.size(0) ||
	    b1.size(2) != b2.size(1) || self.dim() > 2 ||
	    !at::is_expandable_to(self.sizes(), {b1.size(1), b2.size(2)}) ||
	    !prod_ok({&b1, &b2, &self, out}, beta, alpha))
		return {};
	c10::DeviceGuard g(b1.device());
	int64_t B = b1.size(0), N = b1.size(1), K = b1.size(2), P = b2.size(2);
	at::ScalarType dt = b1.scalar_type();
	if (B > 0 && (dt == at::kHalf || dt == at::kBFloat16)) {
		at::Tensor r = dest(out, b1, {N, P}, dt, {&self, &b1, &b2});
		copy_device(r, self.expand({N, P}));
		for (int64_t i = 0; i < B; i++)
			r.addmm_(b1[i], b2[i], i ? at::Scalar(1) : beta, alpha);
		finish(out, r);
		return out ? *out : r;
	}
	at::Tensor a = b1.permute({1, 0, 2}).reshape({N, B * K});
	at::Tensor b = b2.reshape({B * K, P});
	return out ? at::addmm_out(*out, self, a, b, beta, alpha) :
		     at::addmm(self, a, b, beta, alpha);
}

at::Tensor k_addbmm(const at::Tensor &self, const at::Tensor &b1,
		    const at::Tensor &b2, const at::Scalar &beta,
		    const at::Scalar &alpha)
{
	at::Tensor r = addbmm_impl(self, b1, b2, beta, alpha, nullptr);
	if (!r.defined())
		return SPYRE_FALLBACK(addbmm, self, b1, b2, beta, alpha);
	count_native("aten::addbmm");
	return r;
}

at::Tensor &k_addbmm_out(const at::Tensor &self, const at::Tensor &b1,
			 const at::Tensor &b2, const at::Scalar &beta,
			 const at::Scalar &alpha, at::Tensor &out)
{
	if (!addbmm_impl(self, b1, b2, beta, alpha, &out).defined())
		return SPYRE_FALLBACK2(addbmm, out, self, b1, b2, beta, alpha,
				       out);
	count_native("aten::addbmm.out");
	return out;
}

// In place: @self must already be the product's [N, P] (PyTorch's error
// otherwise, through the fallback).
at::Tensor &k_addbmm_(at::Tensor &self, const at::Tensor &b1,
		      const at::Tensor &b2, const at::Scalar &beta,
		      const at::Scalar &alpha)
{
	at::Tensor r;
	if (self.dim() == 2 && b1.dim() == 3 && b2.dim() == 3 &&
	    self.size(0) == b1.size(1) && self.size(1) == b2.size(2))
		r = addbmm_impl(self, b1, b2, beta, alpha, nullptr);
	if (!r.defined())
		return SPYRE_FALLBACK(addbmm_, self, b1, b2, beta, alpha);
	count_native("aten::addbmm_");
	return self.copy_(r);
}

// linalg_cross: the cross product of 3-vectors along @dim, broadcast over
// the other dims, as the CPU's kernel computes each element (both
// products rounded to the dtype, then their difference): r[i] = a[i+1]
// b[i+2] - a[i+2] b[i+1], indices mod 3 (rolls along @dim).  Undefined,
// nothing done, for what the card does not take or PyTorch refuses
// (the caller falls back: the CPU's result or error).
at::Tensor cross_impl(const at::Tensor &self, const at::Tensor &other,
		      int64_t dim)
{
	at::ScalarType dt = self.scalar_type();
	if (!same_card(self, other) || other.scalar_type() != dt ||
	    dt == at::kBool || !kgen::kdtype(dt) || self.dim() != other.dim() ||
	    self.dim() == 0)
		return {};
	int64_t d = at::maybe_wrap_dim(dim, self.dim());
	if (self.size(d) != 3 || other.size(d) != 3)
		return {};
	for (int64_t i = 0; i < self.dim(); i++)
		if (self.size(i) != other.size(i) && self.size(i) != 1 &&
		    other.size(i) != 1)
			return {};	// not broadcastable
	c10::DeviceGuard g(self.device());
	return at::sub(at::mul(self.roll(-1, d), other.roll(-2, d)),
		       at::mul(self.roll(-2, d), other.roll(-1, d)));
}

at::Tensor k_linalg_cross(const at::Tensor &self, const at::Tensor &other,
			  int64_t dim)
{
	at::Tensor r = cross_impl(self, other, dim);
	if (!r.defined())
		return SPYRE_FALLBACK(linalg_cross, self, other, dim);
	count_native("aten::linalg_cross");
	return r;
}

at::Tensor &k_linalg_cross_out(const at::Tensor &self, const at::Tensor &other,
			       int64_t dim, at::Tensor &out)
{
	at::Tensor r;
	if (same_card(out, self) && out.scalar_type() == self.scalar_type())
		r = cross_impl(self, other, dim);
	if (!r.defined())
		return SPYRE_FALLBACK2(linalg_cross, out, self, other, dim, out);
	count_native("aten::linalg_cross.out");
	at::native::resize_output(out, r.sizes());
	return out.copy_(r);
}

// equal: same sizes and every element equal (NaN is not), on the card;
// another dtype or device: the CPU's error.
bool k_equal(const at::Tensor &self, const at::Tensor &other)
{
	if (self.device() != other.device() ||
	    self.scalar_type() != other.scalar_type() ||
	    !kgen::kdtype(self.scalar_type()))
		return SPYRE_FALLBACK(equal, self, other);
	count_native("aten::equal");
	if (!self.sizes().equals(other.sizes()))
		return false;
	c10::DeviceGuard g(self.device());
	return self.numel() == 0 || at::eq(self, other).all().item<bool>();
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

at::Tensor &k_scaled_mm_out(const at::Tensor &self, const at::Tensor &mat2,
			    const at::Tensor &scale_a, const at::Tensor &scale_b,
			    const std::optional<at::Tensor> &bias,
			    const std::optional<at::Tensor> &scale_result,
			    std::optional<at::ScalarType> out_dtype,
			    bool use_fast_accum, at::Tensor &out)
{
	at::Tensor r = k_scaled_mm(self, mat2, scale_a, scale_b, bias,
				   scale_result, out_dtype, use_fast_accum);
	count_native("aten::_scaled_mm.out");
	at::native::resize_output(out, r.sizes());
	out.copy_(r);
	return out;
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
	m.impl("set_.source_Tensor", TORCH_FN(k_set_tensor));
	m.impl("set_", TORCH_FN(k_set_empty));
	m.impl("_copy_from", TORCH_FN(k_copy_from));
	m.impl("_copy_from_and_resize", TORCH_FN(k_copy_from_and_resize));
	m.impl("_local_scalar_dense", TORCH_FN(k_local_scalar_dense));
	m.impl("_to_cpu", TORCH_FN(k_to_cpu));
	m.impl("record_stream", TORCH_FN(k_record_stream));
	m.impl("fill_.Scalar", TORCH_FN(k_fill_));
	m.impl("zero_", TORCH_FN(k_zero_));
	// the card's GEMM
	m.impl("mm", TORCH_FN(k_mm));
	m.impl("mm.out", TORCH_FN(k_mm_out));
	m.impl("bmm", TORCH_FN(k_bmm));
	m.impl("bmm.out", TORCH_FN(k_bmm_out));
	m.impl("addmm", TORCH_FN(k_addmm));
	m.impl("addmm.out", TORCH_FN(k_addmm_out));
	m.impl("addmm_", TORCH_FN(k_addmm_));
	m.impl("baddbmm", TORCH_FN(k_baddbmm));
	m.impl("baddbmm.out", TORCH_FN(k_baddbmm_out));
	m.impl("baddbmm_", TORCH_FN(k_baddbmm_));
	m.impl("dot", TORCH_FN(k_dot));
	m.impl("vdot", TORCH_FN(k_vdot));
	m.impl("addmv", TORCH_FN(k_addmv));
	m.impl("addmv.out", TORCH_FN(k_addmv_out));
	m.impl("addbmm", TORCH_FN(k_addbmm));
	m.impl("addbmm.out", TORCH_FN(k_addbmm_out));
	m.impl("addbmm_", TORCH_FN(k_addbmm_));
	m.impl("equal", TORCH_FN(k_equal));
	m.impl("linalg_cross", TORCH_FN(k_linalg_cross));
	m.impl("linalg_cross.out", TORCH_FN(k_linalg_cross_out));
	m.impl("_scaled_mm", TORCH_FN(k_scaled_mm));
	m.impl("_scaled_mm.out", TORCH_FN(k_scaled_mm_out));
}

} // namespace spyre_torch
