// SPDX-License-Identifier: MIT
// The fused RNN cells on the card: _thnn_fused_lstm_cell,
// _thnn_fused_gru_cell and their backward ops, one generated pointwise
// kernel each.  ATen's LSTM and GRU layers (and nn.LSTMCell / nn.GRUCell)
// choose these cells on a PrivateUse1 device: the gate matrix products run
// on the card's GEMM, and the cell's element-wise part (gate activations,
// the new cell and hidden state, the workspace the backward reads) runs
// here.  Autograd's fused backward (the one a plain backward() takes)
// comes to the *_backward ops; the bias gradients are the batch sums of
// the gate gradients (a native reduction).
//
// Layouts are PyTorch's (the CUDA kernels' contract): gates (B, G*H) with
// the gates in the order i, f, g, o (LSTM) or r, z, n (GRU); biases (G*H);
// the LSTM workspace (B, 4H) holds the activated gates, the GRU workspace
// (B, 5H) holds r, z, n, hx and the hidden n gate with its bias.  Values
// are computed in f32 and rounded once at each store (as CUDA's opmath).
#include "kernels.h"

#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace spyre_torch {
namespace {

using namespace kgen;

enum Cell : uint32_t { LSTM_FWD = 1, LSTM_BWD, GRU_FWD, GRU_BWD };

// Operands of each cell kernel, in this order (optional ones may be
// absent; a present operand's kernel index counts the present ones before
// it):
//   LSTM_FWD: input gates, hidden gates, cx, [input bias, hidden bias],
//             hy, cy, workspace
//   LSTM_BWD: [grad hy], [grad cy], cx, cy, workspace, grad gates, grad cx
//   GRU_FWD:  input gates, hidden gates, hx, [input bias, hidden bias],
//             hy, workspace
//   GRU_BWD:  grad hy, workspace, grad input gates, grad hidden gates,
//             grad hx
constexpr int kMaxCellOps = 8;

// One operand over the (batch, hidden) space: the tensor, its element
// strides along batch and hidden, and the element distance between two
// of its gates (0 for a tensor of one gate).
struct CellOp {
	at::Tensor t;
	int64_t st[2];
	int64_t gate;
};

struct CellBuild {
	Cell cell;
	int nops;			// logical operands (present or not)
	uint32_t present;		// bit i: logical operand i is given
	uint32_t dts[kMaxCellOps];	// the present ones' card dtypes
	int np;
};

// Parameters: per present operand, its np strides and its gate distance.
int build_cell(struct spyre_kernel **kp, const void *ctx)
{
	const CellBuild &p = *static_cast<const CellBuild *>(ctx);
	int phys[kMaxCellOps];
	unsigned int n = 0;
	for (int i = 0; i < p.nops; i++)
		phys[i] = (p.present >> i) & 1 ? static_cast<int>(n++) : -1;
	const unsigned int w = static_cast<unsigned int>(p.np) + 1;
	int rc = spyre_kernel_create(p.dts, n, n * w,
				     static_cast<unsigned int>(p.np), 0, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t F = SPYRE_KTYPE_F32, I = SPYRE_KTYPE_I64;
	int base[kMaxCellOps];
	for (int i = 0; i < p.nops; i++)
		base[i] = phys[i] < 0 ? NONE :
			  point_offset(b, p.np, static_cast<unsigned int>(phys[i]) * w);
	auto off = [&](int i, int g) {
		if (g == 0)
			return base[i];
		unsigned int gp = static_cast<unsigned int>(phys[i]) * w +
				  static_cast<unsigned int>(p.np);
		return b.add(base[i], b.mul(b.param(I, gp), b.c(I, g)));
	};
	// an absent operand reads as 0 (a gradient autograd did not give)
	auto ld = [&](int i, int g) {
		if (phys[i] < 0)
			return b.f(0.0f);
		return b.cvt(spyre_kernel_load(b.k, static_cast<unsigned int>(phys[i]),
					       off(i, g), NONE, NONE), F);
	};
	auto st = [&](int i, int g, int v) {
		uint32_t dt = p.dts[phys[i]];
		spyre_kernel_store(b.k, static_cast<unsigned int>(phys[i]), off(i, g),
				   b.cvt(v, vtype(dt)), NONE, 0);
	};
	auto sig = [&](int x) { return b.un(SPYRE_KOP_SIGMOID, x); };
	auto tnh = [&](int x) { return b.un(SPYRE_KOP_TANH, x); };
	int one = b.f(1.0f);
	// x * (1 - x): the sigmoid's derivative from its value
	auto dsig = [&](int x) { return b.mul(b.sub(one, x), x); };
	// 1 - x * x: tanh's derivative from its value
	auto dtanh = [&](int x) { return b.sub(one, b.mul(x, x)); };
	bool bias = (p.present >> 3) & 1;
	// gate g's pre-activation: input + hidden [+ input bias + hidden bias]
	auto pre = [&](int g) {
		int v = b.add(ld(0, g), ld(1, g));
		return bias ? b.add(b.add(v, ld(3, g)), ld(4, g)) : v;
	};
	switch (p.cell) {
	case LSTM_FWD: {
		int ig = sig(pre(0)), fg = sig(pre(1));
		int cg = tnh(pre(2)), og = sig(pre(3));
		int cy = b.add(b.mul(fg, ld(2, 0)), b.mul(ig, cg));
		st(5, 0, b.mul(og, tnh(cy)));
		st(6, 0, cy);
		st(7, 0, ig);
		st(7, 1, fg);
		st(7, 2, cg);
		st(7, 3, og);
		break;
	}
	case LSTM_BWD: {
		int go = ld(0, 0), goc = ld(1, 0);
		int ig = ld(4, 0), fg = ld(4, 1), cg = ld(4, 2), og = ld(4, 3);
		int tc = tnh(ld(3, 0));
		int gog = b.mul(go, tc);
		int gcx = b.add(b.mul(b.mul(go, og), dtanh(tc)), goc);
		st(5, 0, b.mul(b.mul(gcx, cg), dsig(ig)));
		st(5, 1, b.mul(b.mul(gcx, ld(2, 0)), dsig(fg)));
		st(5, 2, b.mul(b.mul(gcx, ig), dtanh(cg)));
		st(5, 3, b.mul(gog, dsig(og)));
		st(6, 0, b.mul(gcx, fg));
		break;
	}
	case GRU_FWD: {
		int rg = sig(pre(0)), zg = sig(pre(1));
		int hn = ld(1, 2), in = ld(0, 2);
		if (bias) {
			hn = b.add(hn, ld(4, 2));
			in = b.add(in, ld(3, 2));
		}
		int ng = tnh(b.add(in, b.mul(rg, hn)));
		int hx = ld(2, 0);
		st(5, 0, b.add(ng, b.mul(zg, b.sub(hx, ng))));
		st(6, 0, rg);
		st(6, 1, zg);
		st(6, 2, ng);
		st(6, 3, hx);
		st(6, 4, hn);
		break;
	}
	case GRU_BWD: {
		int go = ld(0, 0);
		int rg = ld(1, 0), zg = ld(1, 1), ng = ld(1, 2), hx = ld(1, 3),
		    hn = ld(1, 4);
		int gzg = b.mul(b.mul(go, b.sub(hx, ng)), dsig(zg));
		int gin = b.mul(b.mul(go, b.sub(one, zg)), dtanh(ng));
		int grg = b.mul(b.mul(gin, hn), dsig(rg));
		st(2, 0, grg);
		st(2, 1, gzg);
		st(2, 2, gin);
		st(3, 0, grg);
		st(3, 1, gzg);
		st(3, 2, b.mul(gin, rg));
		st(4, 0, b.mul(go, zg));
		break;
	}
	}
	return spyre_kernel_error(b.k);
}

// A (B, G*H) tensor as an operand over (B, H).
CellOp gates(const at::Tensor &t, int64_t H)
{
	return {t, {t.stride(0), t.stride(1)}, H * t.stride(1)};
}

// A (G*H) bias, the same for every batch row.
CellOp bias_op(const at::Tensor &t, int64_t H)
{
	return {t, {0, t.stride(0)}, H * t.stride(0)};
}

// Run cell kernel @cell over (@B, @H) with logical operands @ops (an
// undefined tensor is an absent operand).  False when the builder refuses
// (the caller falls back).
bool run_cell(Cell cell, const std::vector<CellOp> &ops, int64_t B, int64_t H)
{
	CellBuild cb;
	std::memset(&cb, 0, sizeof(cb));
	cb.cell = cell;
	cb.nops = static_cast<int>(ops.size());
	Space s;
	s.init({B, H});
	std::vector<const CellOp *> given;
	for (size_t i = 0; i < ops.size(); i++) {
		if (!ops[i].t.defined())
			continue;
		cb.present |= 1u << i;
		cb.dts[given.size()] = kdtype(ops[i].t.scalar_type());
		s.add_strides(ops[i].st);
		given.push_back(&ops[i]);
	}
	if (B * H == 0)
		return true;
	s.collapse();
	cb.np = s.np;
	Key key;
	key.op = kOpRnn + cell;
	key.variant = cb.present;
	key.npdims = static_cast<uint8_t>(s.np);
	key.nops = static_cast<uint8_t>(given.size());
	for (size_t j = 0; j < given.size(); j++)
		key.dt[j] = static_cast<uint8_t>(cb.dts[j]);
	int card = given[0]->t.device().index();
	const Prog *prog = program(card, key, build_cell, &cb);
	if (prog->err < 0)
		return false;
	Launch L;
	const unsigned int w = static_cast<unsigned int>(s.np) + 1;
	for (size_t j = 0; j < given.size(); j++) {
		unsigned int u = static_cast<unsigned int>(j);
		L.operand(u, given[j]->t, span(given[j]->t));
		L.strides(s, static_cast<int>(j), u * w);
		L.params[u * w + static_cast<unsigned int>(s.np)] =
			static_cast<uint64_t>(given[j]->gate);
	}
	L.sizes(s);
	run(card, prog, L, static_cast<unsigned int>(given.size()),
	    static_cast<unsigned int>(given.size()) * w);
	return true;
}

bool defined(const std::optional<at::Tensor> &t)
{
	return t.has_value() && t->defined();
}

at::Tensor opt(const std::optional<at::Tensor> &t)
{
	return defined(t) ? *t : at::Tensor();
}

// Whether every given tensor of @ts is on @like's card with @like's
// dtype, a float type the card holds.
bool same_kind(const at::Tensor &like, std::initializer_list<at::Tensor> ts)
{
	at::ScalarType dt = like.scalar_type();
	if (!at::isFloatingType(dt) || !kdtype(dt) || dt == at::kFloat8_e4m3fn ||
	    dt == at::kFloat8_e5m2)
		return false;
	for (const at::Tensor &t : ts)
		if (t.defined() && (t.device() != like.device() ||
				    t.scalar_type() != dt))
			return false;
	return true;
}

// PyTorch's argument checks of the fused cells (the CUDA kernels' checks,
// with their messages).
void check_cell(const char *c, const at::Tensor &ig, const at::Tensor &hg,
		const at::Tensor &ib, const at::Tensor &hb, int64_t factor,
		const at::Tensor &prev)
{
	at::TensorArg aig{ig, "input_gates", 1}, ahg{hg, "hidden_gates", 2},
		aib{ib, "input_bias", 3}, ahb{hb, "hidden_bias", 4},
		aprev{prev, "prev_hidden", 5};
	at::checkDim(c, aig, 2);
	at::checkSameSize(c, aig, ahg);
	int64_t gates_size = ig.size(1);
	TORCH_CHECK(ib.defined() == hb.defined(), c, ": input_bias and "
		    "hidden_bias must both be given or both be None");
	if (ib.defined()) {
		at::checkDim(c, aib, 1);
		at::checkNumel(c, aib, gates_size);
		at::checkSameSize(c, aib, ahb);
	}
	at::checkDim(c, aprev, 2);
	at::checkNumel(c, aprev, ig.size(0) * gates_size / factor);
	TORCH_CHECK(gates_size % factor == 0, c, ": the gates' size ",
		    gates_size, " is not a multiple of ", factor);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_lstm_cell(const at::Tensor &input_gates, const at::Tensor &hidden_gates,
	    const at::Tensor &cx, const std::optional<at::Tensor> &input_bias,
	    const std::optional<at::Tensor> &hidden_bias)
{
	at::Tensor ib = opt(input_bias), hb = opt(hidden_bias);
	check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, ib, hb,
		   4, cx);
	if (same_kind(input_gates, {hidden_gates, cx, ib, hb})) {
		c10::DeviceGuard guard(input_gates.device());
		int64_t B = input_gates.size(0), H = input_gates.size(1) / 4;
		at::Tensor x = cx.reshape({B, H});
		at::Tensor ws = at::empty_like(input_gates,
					       at::MemoryFormat::Contiguous);
		at::Tensor hy = at::empty_like(cx, at::MemoryFormat::Contiguous);
		at::Tensor cy = at::empty_like(cx, at::MemoryFormat::Contiguous);
		std::vector<CellOp> ops{
			gates(input_gates, H), gates(hidden_gates, H),
			{x, {x.stride(0), x.stride(1)}, 0},
			ib.defined() ? bias_op(ib, H) : CellOp{},
			hb.defined() ? bias_op(hb, H) : CellOp{},
			{hy, {H, 1}, 0}, {cy, {H, 1}, 0}, gates(ws, H)};
		if (run_cell(LSTM_FWD, ops, B, H)) {
			count_native("aten::_thnn_fused_lstm_cell");
			return {hy, cy, ws};
		}
	}
	return SPYRE_FALLBACK(_thnn_fused_lstm_cell, input_gates, hidden_gates,
			      cx, input_bias, hidden_bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_lstm_cell_backward(const std::optional<at::Tensor> &grad_hy,
		     const std::optional<at::Tensor> &grad_cy,
		     const at::Tensor &cx, const at::Tensor &cy,
		     const at::Tensor &workspace, bool has_bias)
{
	at::Tensor ghy = opt(grad_hy), gcy = opt(grad_cy);
	if (!ghy.defined() && !gcy.defined())
		return {};
	const char *c = "fused_lstm_cell_backward";
	at::TensorArg aghy{ghy, "grad_hy", 1}, agcy{gcy, "grad_cy", 2},
		acx{cx, "cx", 3}, acy{cy, "cy", 4}, aws{workspace, "workspace", 5};
	const at::TensorArg &dg = ghy.defined() ? aghy : agcy;
	at::checkDim(c, dg, 2);
	auto exp = dg->sizes();
	if (ghy.defined())
		at::checkSize(c, aghy, exp);
	if (gcy.defined())
		at::checkSize(c, agcy, exp);
	at::checkSize(c, acx, exp);
	at::checkSize(c, acy, exp);
	at::checkDim(c, aws, 2);
	at::checkNumel(c, aws, exp[0] * exp[1] * 4);
	if (same_kind(workspace, {ghy, gcy, cx, cy})) {
		c10::DeviceGuard guard(workspace.device());
		int64_t B = exp[0], H = exp[1];
		at::Tensor ws = workspace.reshape({B, 4 * H});
		at::Tensor gg = at::empty({B, 4 * H}, workspace.options());
		at::Tensor gcx = at::empty({B, H}, cx.options());
		auto plain = [](const at::Tensor &t) {
			return t.defined() ? CellOp{t, {t.stride(0), t.stride(1)}, 0} :
			       CellOp{};
		};
		std::vector<CellOp> ops{plain(ghy), plain(gcy), plain(cx),
					plain(cy), gates(ws, H), gates(gg, H),
					plain(gcx)};
		if (run_cell(LSTM_BWD, ops, B, H)) {
			count_native("aten::_thnn_fused_lstm_cell_backward_impl");
			at::Tensor gb = has_bias ? gg.sum(0) : at::Tensor();
			return {gg, gcx, gb};
		}
	}
	return SPYRE_FALLBACK(_thnn_fused_lstm_cell_backward_impl, grad_hy,
			      grad_cy, cx, cy, workspace, has_bias);
}

std::tuple<at::Tensor, at::Tensor>
k_gru_cell(const at::Tensor &input_gates, const at::Tensor &hidden_gates,
	   const at::Tensor &hx, const std::optional<at::Tensor> &input_bias,
	   const std::optional<at::Tensor> &hidden_bias)
{
	at::Tensor ib = opt(input_bias), hb = opt(hidden_bias);
	check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, ib, hb, 3,
		   hx);
	if (same_kind(input_gates, {hidden_gates, hx, ib, hb})) {
		c10::DeviceGuard guard(input_gates.device());
		int64_t B = input_gates.size(0), H = input_gates.size(1) / 3;
		at::Tensor x = hx.reshape({B, H});
		at::Tensor ws = at::empty({B, 5 * H}, hx.options());
		at::Tensor hy = at::empty_like(hx, at::MemoryFormat::Contiguous);
		std::vector<CellOp> ops{
			gates(input_gates, H), gates(hidden_gates, H),
			{x, {x.stride(0), x.stride(1)}, 0},
			ib.defined() ? bias_op(ib, H) : CellOp{},
			hb.defined() ? bias_op(hb, H) : CellOp{},
			{hy, {H, 1}, 0}, gates(ws, H)};
		if (run_cell(GRU_FWD, ops, B, H)) {
			count_native("aten::_thnn_fused_gru_cell");
			return {hy, ws};
		}
	}
	return SPYRE_FALLBACK(_thnn_fused_gru_cell, input_gates, hidden_gates,
			      hx, input_bias, hidden_bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
k_gru_cell_backward(const at::Tensor &grad_hy, const at::Tensor &workspace,
		    bool has_bias)
{
	const char *c = "fused_gru_cell_backward";
	at::TensorArg aghy{grad_hy, "grad_hy", 1}, aws{workspace, "workspace", 2};
	at::checkDim(c, aghy, 2);
	at::checkSize(c, aws, {grad_hy.size(0), grad_hy.size(1) * 5});
	if (same_kind(workspace, {grad_hy})) {
		c10::DeviceGuard guard(workspace.device());
		int64_t B = grad_hy.size(0), H = grad_hy.size(1);
		at::Tensor gig = at::empty({B, 3 * H}, workspace.options());
		at::Tensor ghg = at::empty({B, 3 * H}, workspace.options());
		at::Tensor ghx = at::empty({B, H}, grad_hy.options());
		std::vector<CellOp> ops{
			{grad_hy, {grad_hy.stride(0), grad_hy.stride(1)}, 0},
			gates(workspace, H), gates(gig, H), gates(ghg, H),
			{ghx, {H, 1}, 0}};
		if (run_cell(GRU_BWD, ops, B, H)) {
			count_native("aten::_thnn_fused_gru_cell_backward");
			at::Tensor gib, ghb;
			if (has_bias) {
				gib = gig.sum(0);
				ghb = ghg.sum(0);
			}
			return {gig, ghg, ghx, gib, ghb};
		}
	}
	return SPYRE_FALLBACK(_thnn_fused_gru_cell_backward, grad_hy, workspace,
			      has_bias);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_thnn_fused_lstm_cell", TORCH_FN(k_lstm_cell));
	m.impl("_thnn_fused_lstm_cell_backward_impl",
	       TORCH_FN(k_lstm_cell_backward));
	m.impl("_thnn_fused_gru_cell", TORCH_FN(k_gru_cell));
	m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(k_gru_cell_backward));
}

} // namespace spyre_torch
