// SPDX-License-Identifier: MIT
// Convolutions on the card: convolution_overrideable (1-D, 2-D and 3-D,
// groups, stride, padding, dilation, transposed with output_padding) and
// convolution_backward_overrideable (grad_input, grad_weight, grad_bias);
// im2col (nn.functional.unfold) on the same unfold kernel.
//
// Every case is two generated kernels around the card's GEMM:
//  - unfold (im2col): the window elements of an image as columns, a
//    masked load per element (padding reads as zero), no arithmetic;
//  - fold (col2im): each image element as the sum of the column entries
//    whose window covers it (the stride's divisibility and the bounds as
//    the reduction's mask), in f32 rounded once, the bias added on the way
//    out; in the half types, a transposed convolution's fold instead adds
//    the columns into the image in the dtype, one by one in col2im's
//    order (fold_seq(), a SCATTER ADD), as the CPU's slow_conv_transpose
//    kernels do;
//  - the GEMM (mm/bmm/baddbmm on the card), batched over groups.
// Forward: out = W @ unfold(x).  Transposed: out = fold(W^T @ x) + bias
// (the half types: the GEMM's columns in the dtype, fold_seq(), the bias
// added after, each rounding where the CPU's kernel does).
// Backward of a convolution: grad_input = fold(W^T @ grad_out), grad_weight
// = grad_out @ unfold(x)^T over the whole batch in one GEMM per group;
// of a transposed one: grad_input = W @ unfold(grad_out), grad_weight =
// x @ unfold(grad_out)^T.  grad_bias is a sum of grad_out.  A batch whose
// columns pass kColBytes runs in chunks of images; an unfold or fold goes
// as KERNEL commands of at most kSplitWork element iterations each (the
// card's 5 s per-command budget).  Integer convolutions (the CPU's types:
// every integer undilated forward, int64 otherwise) run the same way on the integer
// matmul kernel (the GEMM has no integer path) and an exact fold; their
// backward (autograd has none) runs on the CPU.
#include "kernels.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

namespace spyre_torch {
namespace {

using namespace kgen;

constexpr int kMaxSpatial = 3;

// The geometry of a sliding window over D spatial dims: window position j
// along dim i covers image elements j * s[i] - p[i] + t * d[i] for t in
// [0, k[i]).  img: the image's sizes (input of a convolution, output of a
// transposed one); pos: the window positions (the other side).
struct Geo {
	int D = 0;
	int64_t img[kMaxSpatial] = {}, pos[kMaxSpatial] = {};
	int64_t k[kMaxSpatial] = {}, s[kMaxSpatial] = {}, p[kMaxSpatial] = {},
		d[kMaxSpatial] = {};

	int64_t kvol() const
	{
		int64_t v = 1;
		for (int i = 0; i < D; i++)
			v *= k[i];
		return v;
	}
	int64_t npos() const
	{
		int64_t v = 1;
		for (int i = 0; i < D; i++)
			v *= pos[i];
		return v;
	}
};

// The columns of N images of C channels: element (n, c, t, j) (t the
// window offset, j the window position, each over the D dims) at
// col[((c * kvol + t) * N + n) * npos + j], a [C * kvol, N * npos] matrix.
// Strides in the kernels' order: n, c, j[D], t[D].
void col_strides(const Geo &g, int64_t N, int64_t *st)
{
	int64_t L = g.npos(), acc = 1;
	for (int i = g.D - 1; i >= 0; i--) {
		st[2 + i] = acc;
		acc *= g.pos[i];
	}
	st[0] = L;
	acc = N * L;
	for (int i = g.D - 1; i >= 0; i--) {
		st[2 + g.D + i] = acc;
		acc *= g.k[i];
	}
	st[1] = acc;
}

// ---- launches bounded by work -------------------------------------------------

// A block of an unfold or fold launch: images [n0, n0 + nn), channels
// [c0, c0 + nc), positions [s0, s0 + ns) along the first spatial dim.
struct Block {
	int64_t n0, nn, c0, nc, s0, ns;
};

// The blocks of a launch over N images x C channels x S0 positions of the
// first spatial dim, each of @inner element iterations (the other spatial
// dims times the window), so that no block passes @K iterations unless
// one position alone does: a KERNEL command's 5 s budget is for all the
// work the card model does for it, and a fold visits every image element
// times every window offset (stride^D times the columns' size).
std::vector<Block> blocks(int64_t N, int64_t C, int64_t S0, int64_t inner,
			  int64_t K)
{
	inner = std::max<int64_t>(inner, 1);
	int64_t ns = std::min(S0, std::max<int64_t>(1, K / inner));
	int64_t nc = ns < S0 ? 1 :
		std::min(C, std::max<int64_t>(1, K / (inner * S0)));
	int64_t nn = nc < C ? 1 :
		std::min(N, std::max<int64_t>(1, K / (inner * S0 * C)));
	std::vector<Block> r;
	for (int64_t n = 0; n < N; n += nn)
		for (int64_t c = 0; c < C; c += nc)
			for (int64_t x = 0; x < S0; x += ns)
				r.push_back({n, std::min(nn, N - n), c,
					     std::min(nc, C - c), x,
					     std::min(ns, S0 - x)});
	return r;
}

// Operand @i of @L starting @off elements of @esize bytes further.
void shift(Launch &L, unsigned int i, int64_t off, int64_t esize)
{
	L.ops[i].mem.offset += static_cast<uint64_t>(off * esize);
	L.ops[i].extent -= static_cast<uint64_t>(off);
}

// The variants of kOpFold's programs
enum FoldVariant : uint32_t { FOLD_SUM, FOLD_SEQ };

// The program of the unfold or fold kernel @op (@variant) over N x C x D
// point dims and D reduction dims, its operands of card dtypes @dts (0:
// absent), built by @build from @ctx; raises RuntimeError when the card
// refuses it (@what names the kernel).
const Prog *conv_program(int card, uint32_t op, uint32_t variant, int D,
			 std::initializer_list<uint32_t> dts, BuildFn build,
			 const void *ctx, const char *what)
{
	Key key;
	key.op = op;
	key.variant = variant;
	key.npdims = static_cast<uint8_t>(2 + D);
	key.nrdims = static_cast<uint8_t>(D);
	size_t i = 0;
	for (uint32_t dt : dts)
		key.dt[i++] = static_cast<uint8_t>(dt);
	const Prog *prog = program(card, key, build, ctx);
	TORCH_CHECK(prog->err == 0, "spyre: the card refused the ", what,
		    " kernel (error ", prog->err, ")");
	return prog;
}

// @L's space: @N images x @C channels x @pts[D] points, @red[D] reduction
// indices per point.
void conv_space(Launch &L, int D, int64_t N, int64_t C, const int64_t *pts,
		const int64_t *red)
{
	L.l.npdims = static_cast<uint32_t>(2 + D);
	L.l.nrdims = static_cast<uint32_t>(D);
	L.l.size[0] = static_cast<uint64_t>(N);
	L.l.size[1] = static_cast<uint64_t>(C);
	for (int i = 0; i < D; i++) {
		L.l.size[2 + i] = static_cast<uint64_t>(pts[i]);
		L.l.size[SPYRE_KDIM_R0 + i] = static_cast<uint64_t>(red[i]);
	}
}

// Run @prog with @L (conv_space(); @nops operands, @nparams parameters)
// as the blocks() of its first three point dims of at most @work element
// iterations, in order: @move(B, k) moves the operands and parameters of
// block @k's launch @B.
template <typename Move>
void run_blocks(int card, const Prog *prog, const Launch &L,
		unsigned int nops, unsigned int nparams, uint64_t work,
		Move move)
{
	int64_t inner = 1;
	for (uint32_t i = 3; i < L.l.npdims; i++)
		inner *= static_cast<int64_t>(L.l.size[i]);
	for (uint32_t i = 0; i < L.l.nrdims; i++)
		inner *= static_cast<int64_t>(L.l.size[SPYRE_KDIM_R0 + i]);
	for (const Block &k : blocks(static_cast<int64_t>(L.l.size[0]),
				     static_cast<int64_t>(L.l.size[1]),
				     static_cast<int64_t>(L.l.size[2]), inner,
				     static_cast<int64_t>(work))) {
		Launch B = L;
		B.l.size[0] = static_cast<uint64_t>(k.nn);
		B.l.size[1] = static_cast<uint64_t>(k.nc);
		B.l.size[2] = static_cast<uint64_t>(k.ns);
		move(B, k);
		run(card, prog, B, nops, nparams);
	}
}

// ---- unfold (im2col) ----------------------------------------------------------

// What the unfold and fold_seq programs are built for: the card dtype of
// the image and the columns (one dtype), and the spatial dims.
struct ColBuild {
	uint32_t dt;
	int D;
};

// dims p0 n, p1 c, p2.. j[D]; r0.. t[D].  params: the image's strides per
// dim (n, c, s*stride j, d*stride t), the columns' (n, c, j, t), then per
// spatial dim s, d, -p, img size, then the image's base offset.
int build_unfold(struct spyre_kernel **kp, const void *ctx)
{
	const ColBuild &u = *static_cast<const ColBuild *>(ctx);
	const unsigned int D = static_cast<unsigned int>(u.D);
	const unsigned int w = 2 + 2 * D, geo = 2 * w;
	uint32_t dts[2] = {u.dt, u.dt};
	int rc = spyre_kernel_create(dts, 2, geo + 4 * D + 1, 2 + D, D, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64;
	const uint32_t all = ((1u << (2 + D)) - 1) | ((1u << D) - 1) << SPYRE_KDIM_R0;
	int zero = b.c(I, 0);
	spyre_kernel_pass(b.k);
	int xo = spyre_kernel_affine(b.k, I, b.param(I, geo + 4 * D), all, 0);
	int co = spyre_kernel_affine(b.k, I, NONE, all, w);
	int mask = NONE;
	for (unsigned int i = 0; i < D; i++) {
		unsigned int q = geo + 4 * i;
		int y = spyre_kernel_affine(b.k, I, b.param(I, q + 2),
					    1u << (2 + i) | 1u << (SPYRE_KDIM_R0 + i),
					    q);
		int ok = b.op(SPYRE_KOP_AND, b.cmp(SPYRE_KCMP_GE, y, zero),
			      b.cmp(SPYRE_KCMP_LT, y, b.param(I, q + 3)));
		mask = mask == NONE ? ok : b.op(SPYRE_KOP_AND, mask, ok);
	}
	int v = spyre_kernel_load(b.k, 0, xo, mask, NONE);
	spyre_kernel_store(b.k, 1, co, v, NONE, 0);
	spyre_kernel_endpass(b.k);
	return spyre_kernel_error(b.k);
}

// The columns of @img ([N, C, img...], any strides) for @g: a new
// [C * kvol, N * npos] tensor (col_strides()).
at::Tensor unfold(const at::Tensor &img, const Geo &g)
{
	const int D = g.D;
	int64_t N = img.size(0), C = img.size(1);
	at::Tensor col = at::empty({C * g.kvol(), N * g.npos()}, img.options());
	if (col.numel() == 0)
		return col;
	ColBuild ub{kdtype(img.scalar_type()), D};
	int card = img.device().index();
	const Prog *prog = conv_program(card, kOpUnfold, 0, D, {ub.dt},
					build_unfold, &ub, "unfold");
	Launch L;
	const unsigned int w = 2 + 2 * D, geo = 2 * w;
	int64_t cs[2 + 2 * kMaxSpatial];
	col_strides(g, N, cs);
	L.params[0] = static_cast<uint64_t>(img.stride(0));
	L.params[1] = static_cast<uint64_t>(img.stride(1));
	int64_t base = 0;
	for (int i = 0; i < D; i++) {
		int64_t xs = img.stride(2 + i);
		L.params[2 + i] = static_cast<uint64_t>(g.s[i] * xs);
		L.params[2 + D + i] = static_cast<uint64_t>(g.d[i] * xs);
		base -= g.p[i] * xs;
		unsigned int q = geo + 4 * i;
		L.params[q] = static_cast<uint64_t>(g.s[i]);
		L.params[q + 1] = static_cast<uint64_t>(g.d[i]);
		L.params[q + 2] = static_cast<uint64_t>(-g.p[i]);
		L.params[q + 3] = static_cast<uint64_t>(g.img[i]);
	}
	for (unsigned int i = 0; i < w; i++)
		L.params[w + i] = static_cast<uint64_t>(cs[i]);
	L.params[geo + 4 * D] = static_cast<uint64_t>(base);
	conv_space(L, D, N, C, g.pos, g.k);
	L.operand(0, img, span(img));
	L.operand(1, col, static_cast<uint64_t>(col.numel()));
	// blocks: the image's first element moves by the base parameter
	// (the window's first position), the columns' by their strides
	run_blocks(card, prog, L, 2, geo + 4 * D + 1, kSplitWork,
		   [&](Launch &B, const Block &k) {
		B.params[geo + 4 * D] = static_cast<uint64_t>(
			base + k.n0 * img.stride(0) + k.c0 * img.stride(1) +
			k.s0 * g.s[0] * img.stride(2));
		B.params[geo + 2] = static_cast<uint64_t>(-g.p[0] +
							  k.s0 * g.s[0]);
		shift(B, 1, k.n0 * cs[0] + k.c0 * cs[1] + k.s0 * cs[2],
		      col.element_size());
	});
	return col;
}

// ---- fold (col2im) ------------------------------------------------------------

struct FoldBuild {
	uint32_t dt, out_dt, bias_dt;
	int D;
};

// dims p0 n, p1 c, p2.. image position o[D]; r0.. window offset t[D].
// params: the output's strides (n, c, o), the columns' (n, c, t), the
// columns' j strides, per spatial dim 1, -d, p, s, npos, then the bias's
// stride.  Image element o gets column (t, j) where o + p - t * d = j * s.
int build_fold(struct spyre_kernel **kp, const void *ctx)
{
	const FoldBuild &f = *static_cast<const FoldBuild *>(ctx);
	const unsigned int D = static_cast<unsigned int>(f.D);
	const unsigned int cw = 2 + D, cj = 2 * cw, geo = cj + D;
	const unsigned int nparams = geo + 5 * D + 1;
	uint32_t dts[3] = {f.dt, f.out_dt, f.bias_dt};
	int rc = spyre_kernel_create(dts, f.bias_dt ? 3 : 2, nparams, 2 + D, D,
				     kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64;
	const uint32_t pts = (1u << (2 + D)) - 1;
	const uint32_t red = ((1u << D) - 1) << SPYRE_KDIM_R0;
	int zero = b.c(I, 0);
	spyre_kernel_pass(b.k);
	int co = spyre_kernel_affine(b.k, I, NONE, 3u | red, cw);
	int mask = NONE;
	for (unsigned int i = 0; i < D; i++) {
		unsigned int q = geo + 5 * i;
		int t = spyre_kernel_affine(b.k, I, b.param(I, q + 2),
					    1u << (2 + i) | 1u << (SPYRE_KDIM_R0 + i),
					    q);
		int s = b.param(I, q + 3);
		int j = b.op(SPYRE_KOP_TRUNCDIV, t, s);
		int ok = b.op(SPYRE_KOP_AND, b.cmp(SPYRE_KCMP_GE, t, zero),
			      b.cmp(SPYRE_KCMP_EQ, b.op(SPYRE_KOP_REM, t, s),
				    zero));
		ok = b.op(SPYRE_KOP_AND, ok,
			  b.cmp(SPYRE_KCMP_LT, j, b.param(I, q + 4)));
		mask = mask == NONE ? ok : b.op(SPYRE_KOP_AND, mask, ok);
		co = b.add(co, b.mul(j, b.param(I, cj + i)));
	}
	int v = spyre_kernel_load(b.k, 0, co, mask, NONE);
	int sum = spyre_kernel_reduce(b.k, SPYRE_KRED_SUM, v, NONE, NONE, mask);
	spyre_kernel_endpass(b.k);
	if (f.bias_dt) {
		int bo = spyre_kernel_affine(b.k, I, NONE, 2u, nparams - 1);
		sum = b.add(sum, spyre_kernel_load(b.k, 2, bo, NONE, NONE));
	}
	int oo = spyre_kernel_affine(b.k, I, NONE, pts, 0);
	spyre_kernel_store(b.k, 1, oo, b.cvt(sum, vtype(f.out_dt)), NONE, 0);
	return spyre_kernel_error(b.k);
}

// Fold columns @col (@cs: their strides n, c, j[D], t[D]) into a new image
// [N, C, img...] of @g in dtype @dt, plus @bias (C elements) when defined;
// the sums (and the bias) in f32, rounded once to @dt, or, for an integer
// @col, exact in its compute type (wrapping as the CPU's col2im does).
at::Tensor fold(const at::Tensor &col, const int64_t *cs, int64_t N,
		int64_t C, const Geo &g, const at::Tensor &bias,
		at::ScalarType dt)
{
	const int D = g.D;
	std::vector<int64_t> shape{N, C};
	shape.insert(shape.end(), g.img, g.img + D);
	at::Tensor out = at::empty(shape, col.options().dtype(dt));
	if (out.numel() == 0)
		return out;
	FoldBuild fb{kdtype(col.scalar_type()), kdtype(dt),
		     bias.defined() ? kdtype(bias.scalar_type()) : 0u, D};
	int card = col.device().index();
	const Prog *prog = conv_program(card, kOpFold, FOLD_SUM, D,
					{fb.dt, fb.out_dt, fb.bias_dt},
					build_fold, &fb, "fold");
	const unsigned int cw = 2 + D, cj = 2 * cw, geo = cj + D;
	const unsigned int nparams = geo + 5 * D + 1;
	Launch L;
	for (int i = 0; i < 2 + D; i++)
		L.params[i] = static_cast<uint64_t>(out.stride(i));
	L.params[cw] = static_cast<uint64_t>(cs[0]);
	L.params[cw + 1] = static_cast<uint64_t>(cs[1]);
	for (int i = 0; i < D; i++) {
		L.params[cw + 2 + i] = static_cast<uint64_t>(cs[2 + D + i]);
		L.params[cj + i] = static_cast<uint64_t>(cs[2 + i]);
		unsigned int q = geo + 5 * i;
		L.params[q] = 1;
		L.params[q + 1] = static_cast<uint64_t>(-g.d[i]);
		L.params[q + 2] = static_cast<uint64_t>(g.p[i]);
		L.params[q + 3] = static_cast<uint64_t>(g.s[i]);
		L.params[q + 4] = static_cast<uint64_t>(g.pos[i]);
	}
	L.params[nparams - 1] = 1;
	conv_space(L, D, N, C, g.img, g.k);
	L.operand(0, col, span(col));
	L.operand(1, out, static_cast<uint64_t>(out.numel()));
	unsigned int nops = 2;
	if (bias.defined())
		L.operand(nops++, bias, static_cast<uint64_t>(bias.numel()));
	// blocks: the output and the bias move by their strides, the columns
	// by theirs along n and c (a window position follows from the image
	// position: the first spatial dim's padding parameter moves instead)
	run_blocks(card, prog, L, nops, nparams, kSplitWork,
		   [&](Launch &B, const Block &k) {
		B.params[geo + 2] = static_cast<uint64_t>(g.p[0] + k.s0);
		shift(B, 0, k.n0 * cs[0] + k.c0 * cs[1], col.element_size());
		shift(B, 1, k.n0 * out.stride(0) + k.c0 * out.stride(1) +
		      k.s0 * out.stride(2), out.element_size());
		if (bias.defined())
			shift(B, 2, k.c0, bias.element_size());
	});
	return out;
}

// ---- fold in the dtype (col2im's rounding) ------------------------------------

// dims p0 n, p1 c, p2.. window offset t[D]; r0.. window position j[D]:
// the columns in their own order, each entry added by a SCATTER ADD into
// the image element its window covers, o = t * d + j * s - p along each
// dim (entries outside the image are inactive lanes).  A SCATTER's lanes
// run in sequential order, so an image element gets its entries by
// increasing t, each add rounded to the dtype: col2im's loop over (c, t,
// j) on an image of the dtype.  params: the columns' strides (n, c, t[D],
// j[D]), the image's (n, c, d * stride per dim, s * stride per dim), the
// image's base offset (-sum p * stride), then per spatial dim d, s, -p,
// image size.
int build_fold_seq(struct spyre_kernel **kp, const void *ctx)
{
	const ColBuild &f = *static_cast<const ColBuild *>(ctx);
	const unsigned int D = static_cast<unsigned int>(f.D);
	const unsigned int w = 2 + 2 * D, base = 2 * w, geo = base + 1;
	uint32_t dts[2] = {f.dt, f.dt};
	int rc = spyre_kernel_create(dts, 2, geo + 4 * D, 2 + D, D, kp);
	if (rc)
		return rc;
	B b{*kp};
	const uint32_t I = SPYRE_KTYPE_I64;
	const uint32_t all = ((1u << (2 + D)) - 1) | ((1u << D) - 1) << SPYRE_KDIM_R0;
	int zero = b.c(I, 0);
	spyre_kernel_pass(b.k);
	int co = spyre_kernel_affine(b.k, I, NONE, all, 0);
	int oo = spyre_kernel_affine(b.k, I, b.param(I, base), all, w);
	int mask = NONE;
	for (unsigned int i = 0; i < D; i++) {
		unsigned int q = geo + 4 * i;
		int o = spyre_kernel_affine(b.k, I, b.param(I, q + 2),
					    1u << (2 + i) | 1u << (SPYRE_KDIM_R0 + i),
					    q);
		int ok = b.op(SPYRE_KOP_AND, b.cmp(SPYRE_KCMP_GE, o, zero),
			      b.cmp(SPYRE_KCMP_LT, o, b.param(I, q + 3)));
		mask = mask == NONE ? ok : b.op(SPYRE_KOP_AND, mask, ok);
	}
	int v = spyre_kernel_load(b.k, 0, co, NONE, NONE);
	spyre_kernel_scatter(b.k, 1, oo, v, mask, SPYRE_KSCAT_ADD);
	spyre_kernel_endpass(b.k);
	return spyre_kernel_error(b.k);
}

// Fold columns @col (@cs: their strides n, c, j[D], t[D]) of a half type
// into a new image [N, C, img...] of @g in that dtype as the CPU's col2im
// does (build_fold_seq()): exact where the CPU's sums are, and rounded at
// every add where they are not (fold() rounds once, more accurately).
// The SCATTER runs on one of the card's cores.
at::Tensor fold_seq(const at::Tensor &col, const int64_t *cs, int64_t N,
		    int64_t C, const Geo &g)
{
	const int D = g.D;
	std::vector<int64_t> shape{N, C};
	shape.insert(shape.end(), g.img, g.img + D);
	at::Tensor out = at::zeros(shape, col.options());
	if (out.numel() == 0 || col.numel() == 0)
		return out;
	ColBuild fb{kdtype(col.scalar_type()), D};
	int card = col.device().index();
	const Prog *prog = conv_program(card, kOpFold, FOLD_SEQ, D,
					{fb.dt, fb.dt}, build_fold_seq, &fb,
					"fold");
	const unsigned int w = 2 + 2 * D, base = 2 * w, geo = base + 1;
	Launch L;
	L.params[0] = static_cast<uint64_t>(cs[0]);
	L.params[1] = static_cast<uint64_t>(cs[1]);
	L.params[w] = static_cast<uint64_t>(out.stride(0));
	L.params[w + 1] = static_cast<uint64_t>(out.stride(1));
	int64_t off = 0;
	for (int i = 0; i < D; i++) {
		int64_t os = out.stride(2 + i);
		L.params[2 + i] = static_cast<uint64_t>(cs[2 + D + i]);
		L.params[2 + D + i] = static_cast<uint64_t>(cs[2 + i]);
		L.params[w + 2 + i] = static_cast<uint64_t>(g.d[i] * os);
		L.params[w + 2 + D + i] = static_cast<uint64_t>(g.s[i] * os);
		off -= g.p[i] * os;
		unsigned int q = geo + 4 * i;
		L.params[q] = static_cast<uint64_t>(g.d[i]);
		L.params[q + 1] = static_cast<uint64_t>(g.s[i]);
		L.params[q + 2] = static_cast<uint64_t>(-g.p[i]);
		L.params[q + 3] = static_cast<uint64_t>(g.img[i]);
	}
	L.params[base] = static_cast<uint64_t>(off);
	conv_space(L, D, N, C, g.k, g.pos);
	L.operand(0, col, span(col));
	L.operand(1, out, static_cast<uint64_t>(out.numel()));
	// blocks, a quarter of the others' work (one core runs them, lane
	// after lane): the columns and the image move by their strides along
	// n and c; a block of first-dim window offsets from t0 on moves the
	// image positions by t0 * d (the base and the first dim's -p)
	run_blocks(card, prog, L, 2, geo + 4 * D, kSplitWork / 4,
		   [&](Launch &B, const Block &k) {
		int64_t dt0 = k.s0 * g.d[0];
		B.params[base] = static_cast<uint64_t>(off + dt0 * out.stride(2));
		B.params[geo + 2] = static_cast<uint64_t>(-g.p[0] + dt0);
		shift(B, 0, k.n0 * cs[0] + k.c0 * cs[1] + k.s0 * cs[2 + D],
		      col.element_size());
		shift(B, 1, k.n0 * out.stride(0) + k.c0 * out.stride(1),
		      out.element_size());
	});
	return out;
}

// ---- the GEMMs ----------------------------------------------------------------

// W @ columns per group: @w [A, B, k...] (A = G * Ag output rows, B * kvol
// = Bg columns' rows per group), @col [G * B * kvol, N * L]
// (col_strides()); returns [N, A, L] (+ @bias, A elements, if defined).
at::Tensor w_cols(const at::Tensor &w, const at::Tensor &col, int64_t N,
		  int64_t L, int64_t G, const at::Tensor &bias)
{
	int64_t A = w.size(0), Ag = A / G;
	int64_t BK = w.numel() / A;
	at::Tensor out = at::empty({N, A, L}, col.options());
	if (out.numel() == 0)
		return out;
	if (BK == 0)
		return bias.defined() ? out.copy_(bias.view({1, A, 1})
						  .expand_as(out)) :
			out.zero_();
	at::Tensor wm = w.reshape({G, Ag, BK});
	// column block of image n, group g: rows g*BK.., columns n*L..
	at::Tensor cv = col.view({G, BK, N, L});
	if (G == 1) {
		at::Tensor a = wm.expand({N, Ag, BK});
		at::Tensor c = cv[0].permute({1, 0, 2});
		if (bias.defined())
			at::baddbmm_out(out, bias.view({1, A, 1}), a, c);
		else
			at::bmm_out(out, a, c);
		return out;
	}
	for (int64_t n = 0; n < N; n++) {
		at::Tensor o = out[n].view({G, Ag, L});
		at::Tensor c = cv.select(2, n);
		if (bias.defined())
			at::baddbmm_out(o, bias.view({G, Ag, 1}), wm, c);
		else
			at::bmm_out(o, wm, c);
	}
	return out;
}

// W^T @ x per group: @w [A, B, k...] with A = G * Ag, @x [N, A, L];
// returns the columns [N, G * B * kvol, L] and their strides @cs (n, c,
// j[D], t[D] for @g).
at::Tensor wT_x(const at::Tensor &w, const at::Tensor &x, int64_t G,
		const Geo &g, int64_t *cs)
{
	int64_t N = x.size(0), A = w.size(0), Ag = A / G;
	int64_t BK = w.numel() / A, L = x.numel() / std::max<int64_t>(N * A, 1);
	at::Tensor col = at::empty({N, G * BK, L}, x.options());
	// strides n, c, j, t of this [N][C][t][j] layout
	int64_t acc = 1;
	for (int i = g.D - 1; i >= 0; i--) {
		cs[2 + i] = acc;
		acc *= g.pos[i];
	}
	for (int i = g.D - 1; i >= 0; i--) {
		cs[2 + g.D + i] = acc;
		acc *= g.k[i];
	}
	cs[1] = acc;
	cs[0] = G * BK * L;
	if (col.numel() == 0)
		return col;
	if (Ag == 0)
		return col.zero_();
	at::Tensor wm = w.reshape({G, Ag, BK}).transpose(1, 2);
	at::Tensor xm = x.reshape({N, G, Ag, L});
	if (G == 1) {
		at::bmm_out(col, wm.expand({N, BK, Ag}), xm.select(1, 0));
		return col;
	}
	for (int64_t n = 0; n < N; n++) {
		at::Tensor c = col[n].view({G, BK, L});
		at::bmm_out(c, wm, xm[n]);
	}
	return col;
}

// sum over the batch of a[n, g] @ col[g, n]^T: @a [N, G * Ag, L], @col
// [G * BK, N * L]; returns [G * Ag, BK] in one GEMM per group (the batch
// is part of the product's inner dimension).
at::Tensor a_colT(const at::Tensor &a, const at::Tensor &col, int64_t G)
{
	int64_t N = a.size(0), A = a.size(1), Ag = A / G;
	int64_t L = a.numel() / std::max<int64_t>(N * A, 1);
	int64_t BK = col.size(0) / G;
	if (N * L == 0)
		return at::zeros({A, BK}, a.options());
	at::Tensor am = N == 1 ? a.reshape({G, Ag, L}) :
		a.reshape({N, G, Ag, L}).permute({1, 2, 0, 3})
			.reshape({G, Ag, N * L});
	at::Tensor out = at::bmm(am, col.view({G, BK, N * L}).transpose(1, 2));
	return out.view({A, BK});
}

// ---- the ops ------------------------------------------------------------------

// @t in float32: the columns a fold sums are kept in f32, so a half-type
// result is rounded once.
at::Tensor f32(const at::Tensor &t)
{
	return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
}

// The float types, and the integer ones the CPU's slow convolutions take
// (every one undilated forward, int64 otherwise): exact products and sums,
// wrapping in the dtype like the CPU's.
bool conv_dtype(at::ScalarType t, bool transposed, at::IntArrayRef dilation)
{
	if (t == at::kFloat || t == at::kHalf || t == at::kBFloat16 ||
	    t == at::kLong)
		return true;
	if (!at::isIntegralType(t, false) || !kdtype(t) || transposed)
		return false;
	return std::all_of(dilation.begin(), dilation.end(),
			   [](int64_t d) { return d == 1; });
}

// Whether the card takes this convolution (else conv_cpu(), which gives
// PyTorch's own errors for what is wrong with it).
bool conv_ok(const at::Tensor &input, const at::Tensor &weight,
	     const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
	     at::IntArrayRef padding, at::IntArrayRef dilation,
	     bool transposed, at::IntArrayRef output_padding, int64_t groups)
{
	int64_t D = weight.dim() - 2;
	if (D < 1 || D > kMaxSpatial || input.dim() != D + 2 || groups < 1 ||
	    !conv_dtype(input.scalar_type(), transposed, dilation) ||
	    weight.scalar_type() != input.scalar_type() ||
	    weight.device() != input.device())
		return false;
	if (bias.has_value() && bias->defined() &&
	    (bias->device() != input.device() ||
	     bias->scalar_type() != input.scalar_type() || bias->dim() != 1))
		return false;
	for (at::IntArrayRef a : {stride, padding, dilation, output_padding})
		if (a.size() != static_cast<size_t>(D) &&
		    !(a.size() == 1 && D == 1))
			return false;
	for (int64_t i = 0; i < D; i++)
		if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0 ||
		    output_padding[i] < 0)
			return false;
	return true;
}

// @t on the CPU (undefined stays undefined)
at::Tensor host(const at::Tensor &t)
{
	return t.defined() ? t.cpu() : t;
}

// @t on @dev (undefined stays undefined)
at::Tensor back(const at::Tensor &t, c10::Device dev)
{
	return t.defined() ? t.to(dev) : t;
}

// A convolution the card does not take (an integer dtype, mixed dtypes,
// arguments ATen refuses), on the CPU with its results on @input's device.
// The CPU has no convolution_overrideable (the boxed fallback would raise
// NotImplementedError), so this calls at::convolution, whose checks give
// PyTorch's errors.  Tensors on two devices raise RuntimeError.
at::Tensor conv_cpu(const at::Tensor &input, const at::Tensor &weight,
		    const std::optional<at::Tensor> &bias,
		    at::IntArrayRef stride, at::IntArrayRef padding,
		    at::IntArrayRef dilation, bool transposed,
		    at::IntArrayRef output_padding, int64_t groups)
{
	bool has_bias = bias.has_value() && bias->defined();
	TORCH_CHECK(weight.device() == input.device() &&
		    (!has_bias || bias->device() == input.device()),
		    "spyre: convolution: input (", input.device(), "), weight (",
		    weight.device(), ") and bias must be on one device");
	count_fallback("aten::convolution_overrideable");
	std::optional<at::Tensor> b;
	if (has_bias)
		b = host(*bias);
	return at::convolution(host(input), host(weight), b, stride, padding,
			       dilation, transposed, output_padding, groups)
		.to(input.device());
}

// The backward of conv_cpu()'s convolutions, on the CPU likewise.
std::tuple<at::Tensor, at::Tensor, at::Tensor>
conv_backward_cpu(const at::Tensor &grad_output, const at::Tensor &input,
		  const at::Tensor &weight, at::IntArrayRef stride,
		  at::IntArrayRef padding, at::IntArrayRef dilation,
		  bool transposed, at::IntArrayRef output_padding,
		  int64_t groups, std::array<bool, 3> mask)
{
	TORCH_CHECK(weight.device() == input.device() &&
		    grad_output.device() == input.device(),
		    "spyre: convolution_backward: grad_output (",
		    grad_output.device(), "), input (", input.device(),
		    ") and weight (", weight.device(), ") must be on one "
		    "device");
	count_fallback("aten::convolution_backward_overrideable");
	std::vector<int64_t> bias_sizes{grad_output.dim() > 1 ?
					grad_output.size(1) : 0};
	auto r = at::convolution_backward(host(grad_output), host(input),
					  host(weight), bias_sizes, stride,
					  padding, dilation, transposed,
					  output_padding, groups, mask);
	c10::Device dev = input.device();
	return {back(std::get<0>(r), dev), back(std::get<1>(r), dev),
		back(std::get<2>(r), dev)};
}

// The geometry of a convolution of @input (@transposed: its image is the
// output, the window positions the input).
Geo conv_geo(const at::Tensor &input, const at::Tensor &weight,
	     at::IntArrayRef stride, at::IntArrayRef padding,
	     at::IntArrayRef dilation, bool transposed,
	     at::IntArrayRef output_padding)
{
	Geo g;
	g.D = static_cast<int>(weight.dim() - 2);
	for (int i = 0; i < g.D; i++) {
		g.k[i] = weight.size(2 + i);
		g.s[i] = stride[i];
		g.p[i] = padding[i];
		g.d[i] = dilation[i];
		int64_t in = input.size(2 + i);
		int64_t span = g.d[i] * (g.k[i] - 1) + 1;
		if (transposed) {
			g.pos[i] = in;
			g.img[i] = (in - 1) * g.s[i] - 2 * g.p[i] + span +
				   output_padding[i];
		} else {
			g.img[i] = in;
			g.pos[i] = (in + 2 * g.p[i] - span) / g.s[i] + 1;
		}
	}
	return g;
}

std::vector<int64_t> spatial(const at::Tensor &t)
{
	return std::vector<int64_t>(t.sizes().begin() + 2, t.sizes().end());
}

// Images per chunk so that one chunk's columns (@per_image elements of
// @elt bytes each image) take at most kColBytes of card memory (at least
// one image), which also bounds the GEMMs' work per command.  (unfold()
// and fold() bound their own launches: blocks().)
constexpr int64_t kColBytes = 4 << 20;

int64_t batch_chunk(int64_t per_image, int64_t elt, int64_t N)
{
	int64_t per = std::max<int64_t>(per_image * elt, 1);
	return std::max<int64_t>(1, std::min<int64_t>(N, kColBytes / per));
}

// A batch of @N images in chunks of @chunk: @f(n0, nb) computes images
// [n0, n0 + nb) and returns their [nb, ...] result or an undefined tensor;
// the results go into one new [N, ...] tensor (the one chunk's own result
// when the batch is one chunk).  Undefined when no chunk returned one.
template <typename F>
at::Tensor by_chunks(int64_t N, int64_t chunk, F f)
{
	at::Tensor out;
	for (int64_t n0 = 0; n0 < N; n0 += chunk) {
		int64_t nb = std::min(chunk, N - n0);
		at::Tensor r = f(n0, nb);
		if (!r.defined())
			continue;
		if (nb == N)
			return r;
		if (!out.defined()) {
			std::vector<int64_t> sz = r.sizes().vec();
			sz[0] = N;
			out = at::empty(sz, r.options());
		}
		out.narrow(0, n0, nb).copy_(r);
	}
	return out;
}

at::Tensor k_convolution(const at::Tensor &input, const at::Tensor &weight,
			 const std::optional<at::Tensor> &bias,
			 at::IntArrayRef stride, at::IntArrayRef padding,
			 at::IntArrayRef dilation, bool transposed,
			 at::IntArrayRef output_padding, int64_t groups)
{
	if (!conv_ok(input, weight, bias, stride, padding, dilation,
		     transposed, output_padding, groups))
		return conv_cpu(input, weight, bias, stride, padding, dilation,
				transposed, output_padding, groups);
	count_native("aten::convolution_overrideable");
	c10::DeviceGuard guard(input.device());
	Geo g = conv_geo(input, weight, stride, padding, dilation, transposed,
			 output_padding);
	for (int i = 0; i < g.D; i++)
		TORCH_CHECK(g.img[i] > 0 && g.pos[i] > 0,
			    "spyre: convolution: the output would be empty "
			    "along spatial dim ", i);
	at::Tensor b = bias.has_value() && bias->defined() ?
		bias->contiguous() : at::Tensor();
	int64_t N = input.size(0);
	at::Tensor w = weight.contiguous();
	int64_t OC = transposed ? groups * w.size(1) : w.size(0);
	std::vector<int64_t> shape{N, OC};
	const int64_t *osp = transposed ? g.img : g.pos;
	shape.insert(shape.end(), osp, osp + g.D);
	// columns per image: C_in * kvol * npos (forward), C_out * kvol *
	// npos (transposed)
	int64_t chunk = batch_chunk((transposed ? OC : input.size(1)) *
				    g.kvol() * g.npos(), input.element_size(),
				    N);
	at::Tensor in = transposed ? input.contiguous() : input;
	// A transposed convolution in a half type rounds where the CPU's
	// does: the GEMM's columns in the dtype, fold_seq(), the bias added
	// to that; in float32 the fold sums in f32 and adds the bias, in an
	// integer type exactly.
	bool half = input.scalar_type() == at::kHalf ||
		    input.scalar_type() == at::kBFloat16;
	at::Tensor out = by_chunks(N, chunk, [&](int64_t n0, int64_t nb) {
		at::Tensor x = in.narrow(0, n0, nb);
		std::vector<int64_t> sz = shape;
		sz[0] = nb;
		if (!transposed)
			return w_cols(w, unfold(x, g), nb, g.npos(), groups, b)
				.view(sz);
		int64_t cs[2 + 2 * kMaxSpatial];
		at::Tensor col = wT_x(w, x, groups, g, cs);
		if (!half)
			return fold(col, cs, nb, OC, g, b, input.scalar_type())
				.view(sz);
		at::Tensor o = fold_seq(col, cs, nb, OC, g);
		if (b.defined()) {
			std::vector<int64_t> bs(2 + g.D, 1);
			bs[1] = OC;
			o.add_(b.view(bs));
		}
		return o.view(sz);
	});
	return out.defined() ? out : at::empty(shape, input.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
k_convolution_backward(const at::Tensor &grad_output, const at::Tensor &input,
		       const at::Tensor &weight, at::IntArrayRef stride,
		       at::IntArrayRef padding, at::IntArrayRef dilation,
		       bool transposed, at::IntArrayRef output_padding,
		       int64_t groups, std::array<bool, 3> mask)
{
	if (!conv_ok(input, weight, std::nullopt, stride, padding, dilation,
		     transposed, output_padding, groups) ||
	    !at::isFloatingType(input.scalar_type()) ||
	    grad_output.scalar_type() != input.scalar_type() ||
	    grad_output.device() != input.device() ||
	    grad_output.dim() != input.dim())
		return conv_backward_cpu(grad_output, input, weight, stride,
					 padding, dilation, transposed,
					 output_padding, groups, mask);
	count_native("aten::convolution_backward_overrideable");
	c10::DeviceGuard guard(input.device());
	Geo g = conv_geo(input, weight, stride, padding, dilation, transposed,
			 output_padding);
	int64_t N = input.size(0);
	at::Tensor w = weight.contiguous();
	at::Tensor go = grad_output.contiguous();
	const int64_t *want = transposed ? g.img : g.pos;
	TORCH_CHECK(go.size(0) == N && spatial(go) ==
		    std::vector<int64_t>(want, want + g.D),
		    "spyre: convolution_backward: grad_output has sizes ",
		    grad_output.sizes(), ", not those of the convolution's "
		    "output");
	at::Tensor gi, gw, gb;
	// the image side of the geometry: the input of a convolution, the
	// output (grad_output) of a transposed one; its columns (and those of
	// grad_input, in f32) per image
	const at::Tensor &img = transposed ? go : input;
	int64_t chunk = batch_chunk(std::max(img.size(1), input.size(1)) *
				    g.kvol() * g.npos(), 4, N);
	at::Tensor w32 = mask[0] && !transposed ? f32(w) : at::Tensor();
	gi = by_chunks(N, chunk, [&](int64_t n0, int64_t nb) {
		at::Tensor in = input.narrow(0, n0, nb);
		at::Tensor gout = go.narrow(0, n0, nb);
		at::Tensor col;	// unfold(img), for the weight (and, transposed,
				// the input)
		if (mask[1] || (mask[0] && transposed))
			col = unfold(transposed ? gout : in, g);
		if (mask[1]) {
			at::Tensor p = a_colT((transposed ? in : gout).contiguous(),
					      col, groups).view(weight.sizes());
			gw = gw.defined() ? gw.add_(p) : p;
		}
		if (!mask[0])
			return at::Tensor();
		if (transposed)
			return w_cols(w, col, nb, g.npos(), groups, at::Tensor())
				.view(in.sizes());
		int64_t cs[2 + 2 * kMaxSpatial];
		at::Tensor gc = wT_x(w32, f32(gout), groups, g, cs);
		return fold(gc, cs, nb, input.size(1), g, at::Tensor(),
			    input.scalar_type()).view(in.sizes());
	});
	if (mask[0] && !gi.defined())
		gi = at::empty(input.sizes(), input.options());
	if (mask[1] && !gw.defined())
		gw = at::zeros(weight.sizes(), weight.options());
	if (mask[2]) {
		std::vector<int64_t> dims{0};
		for (int64_t i = 2; i < go.dim(); i++)
			dims.push_back(i);
		gb = go.sum(dims);
	}
	return {gi, gw, gb};
}

// im2col (nn.functional.unfold) of a [C, H, W] or [N, C, H, W] @self of a
// floating type or bool (the CPU's types): the unfold kernel's [C * kvol, N * npos] columns as
// ATen's contiguous [N, C * kvol, npos] ([C * kvol, npos] unbatched).
// Arguments PyTorch refuses go to the CPU fallback, whose error is
// PyTorch's.
at::Tensor k_im2col(const at::Tensor &self, at::IntArrayRef kernel,
		    at::IntArrayRef dilation, at::IntArrayRef padding,
		    at::IntArrayRef stride)
{
	at::ScalarType t = self.scalar_type();
	bool ok = (t == at::kFloat || t == at::kHalf || t == at::kBFloat16 ||
		   t == at::kBool) &&
		  (self.dim() == 3 || self.dim() == 4) && kernel.size() == 2 &&
		  dilation.size() == 2 && padding.size() == 2 &&
		  stride.size() == 2;
	for (int64_t i = self.dim() == 4 ? 1 : 0; ok && i < self.dim(); i++)
		ok = self.size(i) > 0;
	Geo g;
	g.D = 2;
	for (int i = 0; ok && i < 2; i++) {
		g.k[i] = kernel[i];
		g.d[i] = dilation[i];
		g.p[i] = padding[i];
		g.s[i] = stride[i];
		g.img[i] = self.size(self.dim() - 2 + i);
		int64_t span = g.img[i] + 2 * g.p[i] - g.d[i] * (g.k[i] - 1) - 1;
		ok = g.k[i] > 0 && g.d[i] > 0 && g.s[i] > 0 && g.p[i] >= 0 &&
		     span >= 0;
		g.pos[i] = ok ? span / g.s[i] + 1 : 0;
	}
	if (!ok)
		return SPYRE_FALLBACK(im2col, self, kernel, dilation, padding,
				      stride);
	count_native("aten::im2col");
	c10::DeviceGuard guard(self.device());
	at::Tensor x = self.dim() == 3 ? self.unsqueeze(0) : self;
	int64_t N = x.size(0), rows = x.size(1) * g.kvol();
	at::Tensor col = unfold(x, g)
		.view({rows, N, g.npos()})
		.permute({1, 0, 2})
		.contiguous();
	return self.dim() == 3 ? col.squeeze(0) : col;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("im2col", TORCH_FN(k_im2col));
	m.impl("convolution_overrideable", TORCH_FN(k_convolution));
	m.impl("convolution_backward_overrideable",
	       TORCH_FN(k_convolution_backward));
}

} // namespace spyre_torch
