// SPDX-License-Identifier: MIT
// Attention on the card.
//
// scaled_dot_product_attention takes PyTorch 2.6's PrivateUse1 route: the
// backend's _fused_sdp_choice_stub picks the "overrideable" backend for
// what the card does (sdp_choice() below), so F.scaled_dot_product_attention
// calls _scaled_dot_product_fused_attention_overrideable, and autograd its
// backward.  Both are two GEMMs (QK^T and PV on the card's GEMM, batched
// over batch x heads) around one generated kernel, the scaled masked
// softmax: per query row, scores * scale + bias (the float bias, which is
// what a bool mask arrives as), the causal mask (key index <= query index,
// top-left aligned as in PyTorch), softmax and its logsumexp.  The backward
// recomputes the probabilities from the logsumexp with the same kernel and
// composes the rest of native ops.
//
// Grouped-query attention: 2.6 passes enable_gqa to the choice but not to
// the op, so the op reads it from the shapes (the choice took it only when
// enable_gqa was set): with Hq = G * Hk query heads, query head h uses key
// head h / G (repeat_interleave's order), and the GEMMs see the query as
// [B * Hk, G * L, E] against the [B * Hk, S, E] keys, so the key and value
// heads are never copied (and their gradients sum over the group in the
// GEMM).  Dropout goes to the math path (the choice returns it), whose
// native_dropout draws its mask on the card from the card's generator.
//
// The modules' fast paths in eval (nn.MultiheadAttention,
// nn.TransformerEncoderLayer): _transform_bias_rescale_qkv, _masked_softmax
// and its backward, _addmm_activation (the feed-forward's fused linear) as
// compositions of native ops, and ATen's own
// device-generic _native_multi_head_attention and
// _transformer_encoder_layer_fwd registered for the card.
#include "kernels.h"

#include <ATen/SDPBackend.h>
#include <ATen/native/Resize.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <vector>

namespace spyre_torch {
namespace {

using namespace kgen;

bool sdpa_dtype(at::ScalarType t)
{
	return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

// @t's sizes with the last one @last.
std::vector<int64_t> with_last(const at::Tensor &t, int64_t last)
{
	std::vector<int64_t> s(t.sizes().begin(), t.sizes().end());
	s.back() = last;
	return s;
}

// The shapes of one attention call: query [lead..., Hq, L, E], key
// [lead..., Hk, S, E], value [lead..., Hk, S, Ev] with Hq = G * Hk; B is
// the product of the lead dims (1 for 3-D inputs).
struct Att {
	int64_t B, Hk, G, L, S, E, Ev;
};

// Whether @q, @k, @v (and @mask) are shapes the card's attention takes;
// @gqa allows Hq a multiple of Hk.  Sets @a.  Never throws.
bool att_shapes(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
		const at::Tensor &mask, bool gqa, Att &a)
{
	int64_t nd = q.dim();
	if (nd < 3 || k.dim() != nd || v.dim() != nd)
		return false;
	a.B = 1;
	for (int64_t d = 0; d < nd - 3; d++) {
		if (k.size(d) != q.size(d) || v.size(d) != q.size(d))
			return false;
		a.B *= q.size(d);
	}
	int64_t hq = q.size(-3);
	a.Hk = k.size(-3);
	a.L = q.size(-2);
	a.S = k.size(-2);
	a.E = q.size(-1);
	a.Ev = v.size(-1);
	if (v.size(-3) != a.Hk || v.size(-2) != a.S || k.size(-1) != a.E ||
	    a.Hk <= 0 || hq % a.Hk != 0 || (hq != a.Hk && !gqa))
		return false;
	a.G = hq / a.Hk;
	if (mask.defined() && (mask.dim() > nd ||
			       !at::is_expandable_to(mask.sizes(),
						     with_last(q, a.S))))
		return false;
	return true;
}

// Whether the card runs this attention call: spyre tensors of one card, of
// one float dtype the card computes, and a mask of a float dtype (or bool
// with @bool_mask: scaled_dot_product_attention turns it into a float
// bias before the op).
bool att_ok(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
	    const at::Tensor &mask, bool gqa, Att &a, bool bool_mask = false)
{
	const at::Device dev = q.device();
	if (dev.type() != c10::DeviceType::PrivateUse1 || q.is_nested() ||
	    k.is_nested() || v.is_nested() || k.device() != dev ||
	    v.device() != dev || !sdpa_dtype(q.scalar_type()) ||
	    k.scalar_type() != q.scalar_type() ||
	    v.scalar_type() != q.scalar_type())
		return false;
	if (mask.defined() && (mask.device() != dev || mask.is_nested() ||
			       !(sdpa_dtype(mask.scalar_type()) ||
				 (bool_mask && mask.scalar_type() == at::kBool))))
		return false;
	return att_shapes(q, k, v, mask, gqa, a);
}

// ---- the scaled masked softmax kernel ------------------------------------------

// Operands over the space [B, Hk, G, L | S] (4 pointwise dims, the key
// index the reduction dim): x (the raw scores), [bias], p (probabilities),
// lse (per row, f32).  Forward: p and lse written; from_lse: lse read and
// p = exp(x * scale + bias - lse) written (the backward's recomputation).
// Params: each operand's 5 strides, then scale (f32) and causal (i32).
struct SmaBuild {
	uint32_t dts[4];
	bool has_bias, from_lse;
};

constexpr int kNp = 4;

int build_sma(struct spyre_kernel **kp, const void *ctx)
{
	const SmaBuild &p = *static_cast<const SmaBuild *>(ctx);
	const unsigned int w = kNp + 1;
	const int no = 3 + p.has_bias;
	const int ip = 1 + p.has_bias, il = 2 + p.has_bias;
	const unsigned int sp = w * no;
	int rc = spyre_kernel_create(p.dts, no, sp + 2, kNp, 1, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32;
	int base[4];
	for (int i = 0; i < no; i++)
		base[i] = point_offset(b, kNp, i * w);
	auto off = [&](int i) { return rindex_offset(b, base[i], kNp, 1, i * w); };
	auto ld = [&](int i) {
		return b.cvt(spyre_kernel_load(b.k, i, off(i), NONE, NONE), F);
	};
	int scale = b.param(F, sp);
	int causal = b.cmp(SPYRE_KCMP_NE, b.param(SPYRE_KTYPE_I32, sp + 1),
			   b.c(SPYRE_KTYPE_I32, 0));
	int row = spyre_kernel_idx(b.k, SPYRE_KTYPE_I64, kNp - 1);
	int ninf = b.f(-std::numeric_limits<float>::infinity());
	int zero = b.f(0.0f);
	// inside a pass: whether the key index is visible from this row, and
	// the biased scaled score
	auto visible = [&]() {
		int col = spyre_kernel_idx(b.k, SPYRE_KTYPE_I64, SPYRE_KDIM_R0);
		return b.op(SPYRE_KOP_OR, b.op(SPYRE_KOP_NOT, causal),
			    b.cmp(SPYRE_KCMP_LE, col, row));
	};
	auto score = [&]() {
		int v = b.mul(ld(0), scale);
		return p.has_bias ? b.add(v, ld(1)) : v;
	};
	auto store_p = [&](int v) {
		spyre_kernel_store(b.k, ip, off(ip), b.cvt(v, vtype(p.dts[ip])),
				   NONE, 0);
	};
	if (p.from_lse) {
		int lse = b.cvt(spyre_kernel_load(b.k, il, base[il], NONE, NONE),
				F);
		int dead = b.cmp(SPYRE_KCMP_EQ, lse, ninf);
		spyre_kernel_pass(b.k);
		int e = b.un(SPYRE_KOP_EXP, b.sub(score(), lse));
		int keep = b.op(SPYRE_KOP_AND, visible(), b.op(SPYRE_KOP_NOT, dead));
		store_p(b.sel(keep, e, zero));
		spyre_kernel_endpass(b.k);
		return spyre_kernel_error(b.k);
	}
	// max over the visible keys; a row with none (or all -inf) has
	// m = -inf and is taken about 0 so that its exps are 0, not NaN
	spyre_kernel_pass(b.k);
	int m = spyre_kernel_reduce(b.k, SPYRE_KRED_MAX, score(), NONE, NONE,
				    visible());
	spyre_kernel_endpass(b.k);
	int m0 = b.sel(b.cmp(SPYRE_KCMP_EQ, m, ninf), zero, m);
	spyre_kernel_pass(b.k);
	int s = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM,
				    b.un(SPYRE_KOP_EXP, b.sub(score(), m0)),
				    NONE, NONE, visible());
	spyre_kernel_endpass(b.k);
	// a row without mass gives zeros (the math path's _safe_softmax)
	int has = b.cmp(SPYRE_KCMP_GT, s, zero);
	int inv = b.sel(has, b.un(SPYRE_KOP_RECIP, s), zero);
	spyre_kernel_pass(b.k);
	int e = b.un(SPYRE_KOP_EXP, b.sub(score(), m0));
	store_p(b.sel(visible(), b.mul(e, inv), zero));
	spyre_kernel_endpass(b.k);
	int lse = b.sel(has, b.add(m0, b.un(SPYRE_KOP_LOG, s)), ninf);
	spyre_kernel_store(b.k, il, base[il], b.cvt(lse, vtype(p.dts[il])),
			   NONE, 0);
	return spyre_kernel_error(b.k);
}

// @t (broadcastable to the query's shape with the last dim S) as
// [B, Hq, L, S] (a view when its layout allows, else a copy on the card)
// and its element strides over the space [B, Hk, G, L, S].
at::Tensor space_view(const at::Tensor &t, const at::Tensor &q, const Att &a,
		      int64_t st[5])
{
	at::Tensor x = t.expand(with_last(q, a.S))
			       .reshape({a.B, a.Hk * a.G, a.L, a.S});
	st[0] = x.stride(0);
	st[1] = a.G * x.stride(1);
	st[2] = x.stride(1);
	st[3] = x.stride(2);
	st[4] = x.stride(3);
	return x;
}

// Run the scaled masked softmax: @x the scores [B * Hk, G * L, S], @bias
// (or undefined), @p [B * Hk, G * L, S] out, @lse [B * Hk * G * L] f32
// (written, or read with @from_lse).
void sma_run(const at::Tensor &q, const Att &a, const at::Tensor &x,
	     const at::Tensor &bias, const at::Tensor &p, const at::Tensor &lse,
	     double scale, bool causal, bool from_lse)
{
	SmaBuild sb;
	std::memset(&sb, 0, sizeof(sb));
	sb.has_bias = bias.defined();
	sb.from_lse = from_lse;
	std::vector<at::Tensor> ops{x};
	if (sb.has_bias)
		ops.push_back(bias);
	ops.push_back(p);
	ops.push_back(lse);
	Space s;
	s.init({a.B, a.Hk, a.G, a.L, a.S}, 1ull << 4);
	const int64_t GL = a.G * a.L;
	const int64_t row_st[5] = {a.Hk * GL * a.S, GL * a.S, a.L * a.S, a.S, 1};
	const int64_t lse_st[5] = {a.Hk * GL, GL, a.L, 1, 0};
	s.add_strides(row_st);
	if (sb.has_bias) {
		int64_t bst[5];
		ops[1] = space_view(bias, q, a, bst);
		s.add_strides(bst);
	}
	s.add_strides(row_st);
	s.add_strides(lse_st);
	s.np = kNp;
	s.nr = 1;
	for (size_t j = 0; j < ops.size(); j++)
		sb.dts[j] = kdtype(ops[j].scalar_type());
	Key key;
	key.op = kOpAttention;
	key.variant = sb.has_bias | sb.from_lse << 1;
	key.npdims = kNp;
	key.nrdims = 1;
	for (int j = 0; j < 4; j++)
		key.dt[j] = static_cast<uint8_t>(sb.dts[j]);
	int card = q.device().index();
	const Prog *prog = program(card, key, build_sma, &sb);
	TORCH_CHECK(prog->err == 0, "spyre: the attention kernel was refused (",
		    prog->err, ")");
	Launch L;
	const unsigned int w = kNp + 1;
	for (size_t j = 0; j < ops.size(); j++) {
		L.operand(j, ops[j], s.extent(j));
		L.strides(s, j, j * w);
	}
	unsigned int sp = w * ops.size();
	L.params[sp] = f32_param(scale);
	L.params[sp + 1] = causal ? 1 : 0;
	L.sizes(s);
	run(card, prog, L, ops.size(), sp + 2);
}

double att_scale(std::optional<double> scale, const Att &a)
{
	return scale.has_value() ? *scale
				 : 1.0 / std::sqrt(static_cast<double>(a.E));
}

// The query [lead..., Hq, L, E] as [B * Hk, G * L, E] (a view when its
// layout allows, else a copy on the card), the keys and values as
// [B * Hk, S, E or Ev].
at::Tensor q3(const at::Tensor &q, const Att &a)
{
	return q.reshape({a.B * a.Hk, a.G * a.L, q.size(-1)});
}

at::Tensor kv3(const at::Tensor &k, const Att &a)
{
	return k.reshape({a.B * a.Hk, a.S, k.size(-1)});
}

using SdpaOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor,
			   c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
			   at::Tensor>;

// The outputs' shapes (the card's op and the Meta kernel): output
// [lead..., Hq, L, Ev] in the query's dtype, logsumexp [lead..., Hq, L]
// float32; the cumulative sequence lengths, Philox state and debug mask
// (unused: no nested inputs, no dropout, no debug mask) empty.
SdpaOut sdpa_outputs(const at::Tensor &q, const at::Tensor &k,
		     const at::Tensor &v)
{
	at::Tensor out = at::empty(with_last(q, v.size(-1)), q.options());
	std::vector<int64_t> ls(q.sizes().begin(), q.sizes().end() - 1);
	at::Tensor lse = at::empty(ls, q.options().dtype(at::kFloat));
	at::Tensor none = at::empty({0}, q.options().dtype(at::kLong));
	return {out, lse, none, none, c10::SymInt(q.size(-2)),
		c10::SymInt(k.size(-2)), none, none,
		at::empty({0}, q.options())};
}

void check_sdpa(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
		const at::Tensor &bias, double dropout_p, bool is_causal,
		Att &a)
{
	TORCH_CHECK(dropout_p == 0.0, "spyre: _scaled_dot_product_fused_"
		    "attention_overrideable takes no dropout (dropout_p=",
		    dropout_p, "); scaled_dot_product_attention runs dropout "
		    "on the math path");
	TORCH_CHECK(!(is_causal && bias.defined()), "spyre: _scaled_dot_product"
		    "_fused_attention_overrideable: an attn_bias with "
		    "is_causal=True");
	TORCH_CHECK(att_ok(q, k, v, bias, true, a), "spyre: _scaled_dot_product"
		    "_fused_attention_overrideable takes query [..., Hq, L, E], "
		    "key [..., Hk, S, E] and value [..., Hk, S, Ev] of one card "
		    "and one float dtype (float32, float16, bfloat16) with Hq a "
		    "multiple of Hk, and an attn_bias that broadcasts to [..., "
		    "Hq, L, S]; got query ", q.sizes(), " ", q.scalar_type(),
		    " on ", q.device(), ", key ", k.sizes(), " ",
		    k.scalar_type(), " on ", k.device(), ", value ", v.sizes(),
		    " ", v.scalar_type(), " on ", v.device(), bias.defined() ?
		    ", attn_bias " : "", bias.defined() ? bias.sizes() :
		    at::IntArrayRef());
}

// _scaled_dot_product_fused_attention_overrideable on the card.
SdpaOut k_sdpa(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
	       const std::optional<at::Tensor> &attn_bias, double dropout_p,
	       bool is_causal, bool return_debug_mask,
	       std::optional<double> scale)
{
	(void)return_debug_mask;	// no debug mask without dropout
	at::Tensor bias = attn_bias.has_value() ? *attn_bias : at::Tensor();
	Att a;
	check_sdpa(q, k, v, bias, dropout_p, is_causal, a);
	c10::DeviceGuard guard(q.device());
	count_native("aten::_scaled_dot_product_fused_attention_overrideable");
	SdpaOut r = sdpa_outputs(q, k, v);
	at::Tensor &out = std::get<0>(r), &lse = std::get<1>(r);
	if (out.numel() == 0)
		return r;
	if (a.S == 0) {
		// no keys: the rows have no mass (zeros, logsumexp -inf, as
		// the kernel gives a fully masked row)
		out.zero_();
		lse.fill_(-std::numeric_limits<double>::infinity());
		return r;
	}
	at::Tensor qq = q3(q, a), kk = kv3(k, a), vv = kv3(v, a);
	at::Tensor x = at::bmm(qq, kk.transpose(1, 2));
	at::Tensor p = at::empty_like(x);
	sma_run(q, a, x, bias, p, lse, att_scale(scale, a), is_causal, false);
	at::Tensor o3 = out.view({a.B * a.Hk, a.G * a.L, a.Ev});
	at::bmm_out(o3, p, vv);
	return r;
}

// Its backward: P recomputed from the logsumexp, then with dX the
// gradient of the biased scaled scores:
//   dV = P^T dO,  dP = dO V^T,  dX = P * (dP - rowsum(dO * O)),
//   dQ = scale * dX K,  dK = scale * dX^T Q,  dBias = dX summed to its shape.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
k_sdpa_backward(const at::Tensor &grad_out, const at::Tensor &q,
		const at::Tensor &k, const at::Tensor &v,
		const at::Tensor &attn_bias, std::array<bool, 4> mask,
		const at::Tensor &out, const at::Tensor &logsumexp,
		const at::Tensor &cum_seq_q, const at::Tensor &cum_seq_k,
		int64_t max_q, int64_t max_k, double dropout_p, bool is_causal,
		const at::Tensor &philox_seed, const at::Tensor &philox_offset,
		std::optional<double> scale)
{
	(void)cum_seq_q, (void)cum_seq_k, (void)max_q, (void)max_k;
	(void)philox_seed, (void)philox_offset;
	Att a;
	check_sdpa(q, k, v, attn_bias, dropout_p, is_causal, a);
	TORCH_CHECK(grad_out.device() == q.device() &&
		    out.device() == q.device() &&
		    logsumexp.device() == q.device() &&
		    grad_out.sizes() == out.sizes() &&
		    out.sizes().equals(with_last(q, a.Ev)) &&
		    logsumexp.numel() == a.B * a.Hk * a.G * a.L,
		    "spyre: _scaled_dot_product_fused_attention_overrideable_"
		    "backward: grad_out ", grad_out.sizes(), ", out ",
		    out.sizes(), " and logsumexp ", logsumexp.sizes(),
		    " do not fit query ", q.sizes(), " and value ", v.sizes());
	c10::DeviceGuard guard(q.device());
	count_native("aten::_scaled_dot_product_fused_attention_overrideable_"
		     "backward");
	at::Tensor gq, gk, gv, gb;
	bool want_b = mask[3] && attn_bias.defined();
	if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0 ||
	    a.S == 0) {
		gq = at::zeros_like(q);
		gk = at::zeros_like(k);
		gv = at::zeros_like(v);
		if (want_b)
			gb = at::zeros_like(attn_bias);
		return {gq, gk, gv, gb};
	}
	double sc = att_scale(scale, a);
	at::Tensor qq = q3(q, a), kk = kv3(k, a), vv = kv3(v, a);
	at::Tensor go = grad_out.reshape({a.B * a.Hk, a.G * a.L, a.Ev});
	at::Tensor oo = out.reshape({a.B * a.Hk, a.G * a.L, a.Ev});
	at::Tensor x = at::bmm(qq, kk.transpose(1, 2));
	at::Tensor p = at::empty_like(x);
	at::Tensor lse = logsumexp.to(at::kFloat).contiguous();
	sma_run(q, a, x, attn_bias, p, lse, sc, is_causal, true);
	if (mask[2])
		gv = at::bmm(p.transpose(1, 2), go).reshape(v.sizes());
	at::Tensor dp = at::bmm(go, vv.transpose(1, 2));
	at::Tensor d = (go * oo).sum({-1}, true);
	at::Tensor dx = p * (dp - d);
	if (want_b)
		gb = dx.view(with_last(q, a.S)).sum_to_size(attn_bias.sizes())
			.to(attn_bias.scalar_type());
	at::Tensor ds = dx * sc;
	if (mask[0])
		gq = at::bmm(ds, kk).reshape(q.sizes());
	if (mask[1])
		gk = at::bmm(ds.transpose(1, 2), qq).reshape(k.sizes());
	return {gq, gk, gv, gb};
}

// The Meta kernels (2.6 has none; torch.compile's fake tensors need them).
SdpaOut meta_sdpa(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
		  const std::optional<at::Tensor> &attn_bias, double dropout_p,
		  bool is_causal, bool return_debug_mask,
		  std::optional<double> scale)
{
	(void)attn_bias, (void)dropout_p, (void)is_causal;
	(void)return_debug_mask, (void)scale;
	TORCH_CHECK(q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim(),
		    "_scaled_dot_product_fused_attention_overrideable: query, "
		    "key and value of one rank >= 3, got ", q.sizes(), ", ",
		    k.sizes(), ", ", v.sizes());
	return sdpa_outputs(q, k, v);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
meta_sdpa_backward(const at::Tensor &grad_out, const at::Tensor &q,
		   const at::Tensor &k, const at::Tensor &v,
		   const at::Tensor &attn_bias, std::array<bool, 4> mask,
		   const at::Tensor &out, const at::Tensor &logsumexp,
		   const at::Tensor &cum_seq_q, const at::Tensor &cum_seq_k,
		   int64_t max_q, int64_t max_k, double dropout_p,
		   bool is_causal, const at::Tensor &philox_seed,
		   const at::Tensor &philox_offset, std::optional<double> scale)
{
	(void)grad_out, (void)out, (void)logsumexp, (void)cum_seq_q;
	(void)cum_seq_k, (void)max_q, (void)max_k, (void)dropout_p;
	(void)is_causal, (void)philox_seed, (void)philox_offset, (void)scale;
	return {mask[0] ? at::empty_like(q) : at::Tensor(),
		mask[1] ? at::empty_like(k) : at::Tensor(),
		mask[2] ? at::empty_like(v) : at::Tensor(),
		mask[3] && attn_bias.defined() ? at::empty_like(attn_bias) :
						 at::Tensor()};
}

// The backend's SDPA choice: the overrideable backend (the card's op above)
// for what it runs, the math path (composed of native ops) otherwise:
// dropout, a mask with is_causal (the math path raises PyTorch's error),
// Hq != Hk without enable_gqa (the math path broadcasts or raises), dtypes
// or layouts the card's op does not take.
int64_t sdp_choice(const at::Tensor &q, const at::Tensor &k,
		   const at::Tensor &v, const std::optional<at::Tensor> &mask,
		   double dropout_p, bool is_causal, std::optional<double> scale,
		   bool enable_gqa)
{
	(void)scale;
	const auto math = static_cast<int64_t>(at::SDPBackend::math);
	at::Tensor m = mask.has_value() ? *mask : at::Tensor();
	if (dropout_p != 0.0 || (is_causal && m.defined()))
		return math;
	Att a;
	return att_ok(q, k, v, m, enable_gqa, a, true) ?
	       static_cast<int64_t>(at::SDPBackend::overrideable) : math;
}

// ---- the modules' fast paths ----------------------------------------------------

// q = (qkv + bias)[:, :, :D] / sqrt(D / heads), k and v the next thirds,
// each as [B, heads, T, D / heads] (the CPU kernel's results).
std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_transform_bias_rescale_qkv(const at::Tensor &qkv, const at::Tensor &bias,
			     int64_t num_heads)
{
	bool ok = !qkv.is_nested() && qkv.dim() == 3 && bias.dim() == 1 &&
		  bias.size(0) == qkv.size(2) && bias.device() == qkv.device() &&
		  sdpa_dtype(qkv.scalar_type()) &&
		  bias.scalar_type() == qkv.scalar_type();
	if (!ok)
		return SPYRE_FALLBACK(_transform_bias_rescale_qkv, qkv, bias,
				      num_heads);
	int64_t B = qkv.size(0), T = qkv.size(1), D3 = qkv.size(2);
	TORCH_CHECK(D3 % 3 == 0 && num_heads > 0 && (D3 / 3) % num_heads == 0,
		    "_transform_bias_rescale_qkv: the last dim of qkv (", D3,
		    ") must be 3 * embed_dim with embed_dim a multiple of "
		    "num_heads (", num_heads, ")");
	c10::DeviceGuard guard(qkv.device());
	count_native("aten::_transform_bias_rescale_qkv");
	int64_t dh = D3 / 3 / num_heads;
	at::Tensor t = (qkv + bias).view({B, T, 3, num_heads, dh})
		.permute({2, 0, 3, 1, 4});
	at::Tensor q = t.select(0, 0) *
		       (1.0 / std::sqrt(static_cast<double>(dh)));
	return {q.contiguous(), t.select(0, 1).contiguous(),
		t.select(0, 2).contiguous()};
}

// The bool mask of _masked_softmax expanded to @x's shape (True: left
// out): mask_type 0 an [L, L] attention mask, 1 a [B, L] key padding mask
// of a [B, H, L, L] input, 2 (or any other input) a mask of @x's shape;
// PyTorch's checks and messages.
at::Tensor full_mask(const at::Tensor &x, const at::Tensor &mask,
		     std::optional<int64_t> mask_type)
{
	TORCH_CHECK(mask.scalar_type() == at::kBool,
		    "Mask should be a boolean tensor");
	int64_t mt = mask_type.value_or(2);
	if (mask.dim() != 2 || x.dim() != 4)
		mt = 2;
	if (mt == 1) {
		TORCH_CHECK(x.size(0) == mask.size(0) && x.size(2) == mask.size(1),
			    "For mask_type == 1 mask shape should be (B, L)");
		return mask.reshape({x.size(0), 1, 1, x.size(2)})
			.expand(x.sizes());
	}
	if (mt == 0) {
		TORCH_CHECK(x.size(2) == mask.size(0) && x.size(2) == mask.size(1),
			    "For mask_type == 0 mask shape should be (L, L)");
		return mask.reshape({1, 1, x.size(2), x.size(2)})
			.expand(x.sizes());
	}
	TORCH_CHECK(x.sizes() == mask.sizes(),
		    "For mask_type == 2 mask shape should match input shape");
	return mask;
}

bool masked_ok(const at::Tensor &x, const at::Tensor &mask)
{
	return !x.is_nested() && sdpa_dtype(x.scalar_type()) &&
	       mask.device() == x.device();
}

// softmax over @dim of @x with the masked elements left out; a row with
// every element masked gives zeros, as the CPU kernel.
at::Tensor k_masked_softmax(const at::Tensor &x, const at::Tensor &mask,
			    std::optional<int64_t> dim,
			    std::optional<int64_t> mask_type)
{
	if (!masked_ok(x, mask))
		return SPYRE_FALLBACK(_masked_softmax, x, mask, dim, mask_type);
	at::Tensor m = full_mask(x, mask, mask_type);
	c10::DeviceGuard guard(x.device());
	count_native("aten::_masked_softmax");
	int64_t d = at::maybe_wrap_dim(dim.value_or(x.dim() - 1), x.dim());
	at::Tensor y = at::_safe_softmax(
		x.masked_fill(m, -std::numeric_limits<double>::infinity()), d);
	return y.masked_fill(m, 0);
}

// y * (g - sum(g * y)) over @dim, zero where masked.
at::Tensor k_masked_softmax_backward(const at::Tensor &grad,
				     const at::Tensor &out,
				     const at::Tensor &mask,
				     std::optional<int64_t> dim)
{
	if (!masked_ok(grad, mask) || out.device() != grad.device())
		return SPYRE_FALLBACK(_masked_softmax_backward, grad, out, mask,
				      dim);
	TORCH_CHECK(grad.sizes() == mask.sizes(),
		    "Mask shape should match grad shape");
	TORCH_CHECK(mask.scalar_type() == at::kBool,
		    "Mask should be a boolean tensor");
	c10::DeviceGuard guard(grad.device());
	count_native("aten::_masked_softmax_backward");
	int64_t d = grad.dim() ? at::maybe_wrap_dim(dim.value_or(grad.dim() - 1),
						    grad.dim()) : 0;
	at::Tensor g = grad.dim() ? grad : grad.view(1);
	at::Tensor y = out.dim() ? out : out.view(1);
	at::Tensor r = y * (g - (g * y).sum({d}, true));
	r = r.masked_fill(mask.dim() ? mask : mask.view(1), 0);
	return grad.dim() ? r : r.view({});
}

// The fused linear + activation of the encoder layer's feed-forward
// (ATen's _addmm_activation): addmm on the card's GEMM, then relu or gelu
// (the exact form, as the CPU kernel) in place.
bool addmm_act_ok(const at::Tensor &self, const at::Tensor &m1,
		  const at::Tensor &m2)
{
	return self.device() == m1.device() && m2.device() == m1.device() &&
	       sdpa_dtype(m1.scalar_type()) &&
	       self.scalar_type() == m1.scalar_type() &&
	       m2.scalar_type() == m1.scalar_type();
}

at::Tensor k_addmm_activation(const at::Tensor &self, const at::Tensor &m1,
			      const at::Tensor &m2, const at::Scalar &beta,
			      const at::Scalar &alpha, bool use_gelu)
{
	if (!addmm_act_ok(self, m1, m2))
		return SPYRE_FALLBACK(_addmm_activation, self, m1, m2, beta,
				      alpha, use_gelu);
	c10::DeviceGuard guard(m1.device());
	count_native("aten::_addmm_activation");
	at::Tensor r = at::addmm(self, m1, m2, beta, alpha);
	return use_gelu ? at::gelu_(r) : at::relu_(r);
}

at::Tensor &k_addmm_activation_out(const at::Tensor &self,
				   const at::Tensor &m1, const at::Tensor &m2,
				   const at::Scalar &beta,
				   const at::Scalar &alpha, bool use_gelu,
				   at::Tensor &out)
{
	if (!addmm_act_ok(self, m1, m2) || out.device() != m1.device() ||
	    out.scalar_type() != m1.scalar_type())
		return SPYRE_FALLBACK2(_addmm_activation, out, self, m1, m2,
				       beta, alpha, use_gelu, out);
	c10::DeviceGuard guard(m1.device());
	count_native("aten::_addmm_activation.out");
	at::Tensor r = at::addmm(self, m1, m2, beta, alpha);
	r = use_gelu ? at::gelu_(r) : at::relu_(r);
	at::native::resize_output(out, r.sizes());
	out.copy_(r);
	return out;
}

// ATen's device-generic fast paths, counted as the card's.
std::tuple<at::Tensor, at::Tensor>
k_native_mha(const at::Tensor &query, const at::Tensor &key,
	     const at::Tensor &value, int64_t embed_dim, int64_t num_head,
	     const at::Tensor &qkv_weight, const at::Tensor &qkv_bias,
	     const at::Tensor &proj_weight, const at::Tensor &proj_bias,
	     const std::optional<at::Tensor> &mask, bool need_weights,
	     bool average_attn_weights, std::optional<int64_t> mask_type)
{
	c10::DeviceGuard guard(query.device());
	count_native("aten::_native_multi_head_attention");
	return at::native::native_multi_head_attention_cpu(
		query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
		proj_weight, proj_bias, mask, need_weights,
		average_attn_weights, mask_type);
}

at::Tensor k_encoder_layer(const at::Tensor &src, int64_t embed_dim,
			   int64_t num_heads, const at::Tensor &qkv_weight,
			   const at::Tensor &qkv_bias,
			   const at::Tensor &proj_weight,
			   const at::Tensor &proj_bias, bool use_gelu,
			   bool norm_first, double eps,
			   const at::Tensor &norm_weight_1,
			   const at::Tensor &norm_bias_1,
			   const at::Tensor &norm_weight_2,
			   const at::Tensor &norm_bias_2,
			   const at::Tensor &ffn_weight_1,
			   const at::Tensor &ffn_bias_1,
			   const at::Tensor &ffn_weight_2,
			   const at::Tensor &ffn_bias_2,
			   const std::optional<at::Tensor> &mask,
			   std::optional<int64_t> mask_type)
{
	c10::DeviceGuard guard(src.device());
	count_native("aten::_transformer_encoder_layer_fwd");
	return at::native::transformer_encoder_layer_forward(
		src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
		proj_bias, use_gelu, norm_first, eps, norm_weight_1,
		norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
		ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_fused_sdp_choice", TORCH_FN(sdp_choice));
	m.impl("_scaled_dot_product_fused_attention_overrideable",
	       TORCH_FN(k_sdpa));
	m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
	       TORCH_FN(k_sdpa_backward));
	m.impl("_transform_bias_rescale_qkv",
	       TORCH_FN(k_transform_bias_rescale_qkv));
	m.impl("_masked_softmax", TORCH_FN(k_masked_softmax));
	m.impl("_masked_softmax_backward", TORCH_FN(k_masked_softmax_backward));
	m.impl("_addmm_activation", TORCH_FN(k_addmm_activation));
	m.impl("_addmm_activation.out", TORCH_FN(k_addmm_activation_out));
	m.impl("_native_multi_head_attention", TORCH_FN(k_native_mha));
	m.impl("_transformer_encoder_layer_fwd", TORCH_FN(k_encoder_layer));
}

TORCH_LIBRARY_IMPL(aten, Meta, m)
{
	m.impl("_scaled_dot_product_fused_attention_overrideable",
	       TORCH_FN(meta_sdpa));
	m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
	       TORCH_FN(meta_sdpa_backward));
}

} // namespace spyre_torch

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &spyre_torch::sdp_choice)
} // namespace at::native
