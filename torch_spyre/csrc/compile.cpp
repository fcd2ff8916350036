// SPDX-License-Identifier: MIT
// Compiled graphs of the spyre backend (torch.compile(backend="spyre")):
// the program format that torch_spyre/compiler.py lowers a segment of an
// ATen graph into, its encoding into one libspyre command list frozen as a
// spyre_graph (commands in device memory, intermediates at offsets of one
// arena tensor planned by the compiler), and its launch: the segment's
// inputs staged into the arena by one copy job, the graph, the outputs
// staged out into new tensors by one copy job, all three on the caller's
// current stream in one submission (spyre_graph_launch_staged()).  A graph
// that is a whole compiled program is also callable with the program's own
// arguments (graph_call: the Dynamo call's flat arguments in, its outputs
// out, everything per call in this one C++ call).  Exposed as
// torch.ops.spyre.graph_* (registered here).
//
// Program format (int64 list @code, float list @fvals; every memory
// operand is a pair (buffer index, byte offset) into @bufs, buffer -1 is
// "absent"; dtype codes: 1 fp32, 2 fp16, 3 bf16, 4 fp8 e4m3, 5 fp8 e5m2,
// 6 u8 (raw bytes)):
//   1 COPY    dst, dst_pitch, dst_dt, src, src_pitch, src_dt, width, height,
//             flags                                        (copy_mem)
//   2 FILL    dst, count, elem_size, bits                   (fill_mem)
//   3 GEMM    flags (1: A transposed, 2: B transposed), a_dt, b_dt, c_dt,
//             bias_dt (0: none), m, n, k, batch, a, b, c, lda, ldb, ldc,
//             stride_a, stride_b, stride_c, bias; floats alpha, beta
//                                                           (gemm)
//   4 ELT     op (1 add 2 mul 3 scale 4 relu 5 gelu 6 silu 7 exp), dt,
//             count, out, a, b; float alpha                 (eltwise)
//   5 REDUCE  op (1 sum 2 max), dt, rows, cols, dst, src, ld (reduce)
//   6 ROWOP   op (1 softmax 2 layernorm 3 rmsnorm), dt, rows, cols, dst,
//             ld_dst, src, ld_src, gamma, beta; float eps   (rowop)
//   7 CONVERT dst, dst_dt, src, src_dt, count, flags        (convert)
// Everything is checked: a malformed program is a ValueError, an operand
// outside its buffer an error of libspyre's range checks (RuntimeError),
// never a fault on the card.
#include "spyre_torch.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>

namespace spyre_torch {
namespace {

enum : int64_t {
	OP_COPY = 1, OP_FILL, OP_GEMM, OP_ELT, OP_REDUCE, OP_ROWOP, OP_CONVERT,
};

uint32_t dtype_code(int64_t c)
{
	switch (c) {
	case 1: return SPYRE_DTYPE_FP32;
	case 2: return SPYRE_DTYPE_FP16;
	case 3: return SPYRE_DTYPE_BF16;
	case 4: return SPYRE_DTYPE_FP8_E4M3;
	case 5: return SPYRE_DTYPE_FP8_E5M2;
	case 6: return SPYRE_DTYPE_U8;
	default:
		TORCH_CHECK_VALUE(false, "spyre: program names dtype code ", c);
	}
	return 0;
}

at::ScalarType scalar_type_code(int64_t c)
{
	switch (c) {
	case 1: return at::kFloat;
	case 2: return at::kHalf;
	case 3: return at::kBFloat16;
	case 4: return at::kFloat8_e4m3fn;
	case 5: return at::kFloat8_e5m2;
	case 6: return at::kByte;
	default:
		TORCH_CHECK_VALUE(false, "spyre: program names dtype code ", c);
	}
	return at::kFloat;
}

uint32_t elt_code(int64_t c)
{
	static const uint32_t m[] = {0, SPYRE_ELT_ADD, SPYRE_ELT_MUL,
		SPYRE_ELT_SCALE, SPYRE_ELT_RELU, SPYRE_ELT_GELU, SPYRE_ELT_SILU,
		SPYRE_ELT_EXP};
	TORCH_CHECK_VALUE(c >= 1 && c <= 7, "spyre: program names eltwise op ",
			  c);
	return m[c];
}

// One compiled segment.
struct Graph {
	int card = 0;
	std::vector<at::Tensor> bufs;	// [0] the arena, then bound tensors
	std::vector<const void *> ptrs;	// their storages' addresses at create
	struct spyre_graph *g = nullptr;
	std::vector<std::pair<int64_t, int64_t>> ins;	// arena offset, bytes
	struct Out {
		int64_t off;
		at::ScalarType dt;
		std::vector<int64_t> sizes;
	};
	std::vector<Out> outs;
	int64_t ncmds = 0;
	// graph_call: where the staged inputs and the bound tensors are among
	// the call's arguments (-1: a bound tensor that is no argument), the
	// call's outputs as indices into @outs, ATen nodes per call
	bool callable = false;
	std::vector<int64_t> call_ins, call_bound, call_outs;
	int64_t call_nodes = 0;
	struct spyre_stream *last = nullptr;	// stream of the last launch
	std::mutex mu;				// one launch at a time

	~Graph()
	{
		// the arena goes back to the allocator: the launches that use it
		// must be done first if they ran on another stream than its own
		if (last)
			(void)spyre_stream_sync(last, SPYRE_TIMEOUT_INFINITE);
		spyre_graph_destroy(g);
	}
};

std::mutex g_mu;
// never destroyed: a graph still alive at exit must not sync a stream that
// device.cpp's statics already tore down
std::map<int64_t, std::shared_ptr<Graph>> &g_graphs =
	*new std::map<int64_t, std::shared_ptr<Graph>>;
int64_t g_next = 1;

// counters (torch.spyre.compile_stats())
std::atomic<int64_t> c_created{0}, c_launches{0}, c_commands{0},
	c_copy_jobs{0}, c_bytes_in{0}, c_bytes_out{0},
	c_calls{0}, c_call_nodes{0};

std::shared_ptr<Graph> lookup(int64_t h)
{
	std::lock_guard<std::mutex> l(g_mu);
	auto it = g_graphs.find(h);
	TORCH_CHECK_VALUE(it != g_graphs.end(), "spyre: no compiled graph ", h,
			  " (destroyed, or never created)");
	return it->second;
}

// Reads @code / @fvals front to back; running past the end is an error.
struct Reader {
	const std::vector<int64_t> &code;
	const std::vector<double> &fv;
	const std::vector<at::Tensor> &bufs;
	size_t pc = 0, fc = 0;

	int64_t i()
	{
		TORCH_CHECK_VALUE(pc < code.size(), "spyre: truncated program");
		return code[pc++];
	}
	uint64_t u()
	{
		int64_t v = i();
		TORCH_CHECK_VALUE(v >= 0, "spyre: negative size in program");
		return static_cast<uint64_t>(v);
	}
	uint32_t u32()
	{
		uint64_t v = u();
		TORCH_CHECK_VALUE(v <= UINT32_MAX, "spyre: size ", v,
				  " in program exceeds 32 bits");
		return static_cast<uint32_t>(v);
	}
	float f()
	{
		TORCH_CHECK_VALUE(fc < fv.size(), "spyre: truncated program "
				  "(float values)");
		return static_cast<float>(fv[fc++]);
	}
	struct spyre_mem mem()
	{
		int64_t b = i(), off = i();
		if (b == -1)
			return SPYRE_MEM_NONE;
		TORCH_CHECK_VALUE(b >= 0 && b < static_cast<int64_t>(bufs.size()),
				  "spyre: program names buffer ", b, " of ",
				  bufs.size());
		TORCH_CHECK_VALUE(off >= 0, "spyre: negative offset in program");
		struct spyre_mem m = mem_of(bufs[b]);
		m.offset += static_cast<uint64_t>(off);
		return m;
	}
};

void encode(struct spyre_cmdbuf *cb, Reader &r, int card)
{
	int64_t op = 0, n = 0;
	auto ck = [&](int rc) {
		if (rc < 0)
			check(rc, ("encoding command " + std::to_string(n) +
				   " (opcode " + std::to_string(op) +
				   ") of a compiled graph").c_str(), card);
	};
	for (; r.pc < r.code.size(); n++) {
		op = r.i();
		switch (op) {
		case OP_COPY: {
			struct spyre_mem d = r.mem();
			uint64_t dp = r.u();
			uint32_t ddt = dtype_code(r.i());
			struct spyre_mem s = r.mem();
			uint64_t sp = r.u();
			uint32_t sdt = dtype_code(r.i());
			uint64_t w = r.u(), h = r.u();
			uint32_t fl = r.u32();
			ck(spyre_cmdbuf_copy_mem(cb, d, dp, ddt, s, sp, sdt, w, h,
						 fl));
			break;
		}
		case OP_FILL: {
			struct spyre_mem d = r.mem();
			uint64_t n = r.u();
			uint32_t es = r.u32();
			uint64_t bits = static_cast<uint64_t>(r.i());
			ck(spyre_cmdbuf_fill_mem(cb, d, n, es, bits));
			break;
		}
		case OP_GEMM: {
			struct spyre_gemm g;
			std::memset(&g, 0, sizeof(g));
			uint32_t fl = r.u32();
			TORCH_CHECK_VALUE(!(fl & ~3u), "spyre: program names GEMM "
					  "flags ", fl);
			g.flags = ((fl & 1) ? SPYRE_GEMM_F_TRANS_A : 0) |
				  ((fl & 2) ? SPYRE_GEMM_F_TRANS_B : 0);
			g.a_dtype = dtype_code(r.i());
			g.b_dtype = dtype_code(r.i());
			g.c_dtype = dtype_code(r.i());
			int64_t bdt = r.i();
			g.bias_dtype = bdt ? dtype_code(bdt) : 0;
			g.m = r.u32();
			g.n = r.u32();
			g.k = r.u32();
			g.batch = r.u32();
			g.a = r.mem();
			g.b = r.mem();
			g.c = r.mem();
			g.lda = r.u();
			g.ldb = r.u();
			g.ldc = r.u();
			g.stride_a = r.u();
			g.stride_b = r.u();
			g.stride_c = r.u();
			g.bias = r.mem();
			g.alpha = r.f();
			g.beta = r.f();
			ck(spyre_cmdbuf_gemm(cb, &g));
			break;
		}
		case OP_ELT: {
			uint32_t o = elt_code(r.i());
			uint32_t dt = dtype_code(r.i());
			uint64_t n = r.u();
			struct spyre_mem out = r.mem(), a = r.mem(), b = r.mem();
			ck(spyre_cmdbuf_eltwise(cb, o, dt, n, out, a, b, r.f()));
			break;
		}
		case OP_REDUCE: {
			int64_t o = r.i();
			TORCH_CHECK_VALUE(o == 1 || o == 2, "spyre: program names "
					  "reduction ", o);
			uint32_t dt = dtype_code(r.i());
			uint32_t rows = r.u32(), cols = r.u32();
			struct spyre_mem d = r.mem(), s = r.mem();
			uint64_t ld = r.u();
			ck(spyre_cmdbuf_reduce(cb, o == 1 ? SPYRE_REDUCE_SUM :
					       SPYRE_REDUCE_MAX, dt, rows, cols,
					       d, s, ld));
			break;
		}
		case OP_ROWOP: {
			int64_t o = r.i();
			TORCH_CHECK_VALUE(o >= 1 && o <= 3, "spyre: program names "
					  "row op ", o);
			static const uint32_t m[] = {0, SPYRE_ROW_SOFTMAX,
				SPYRE_ROW_LAYERNORM, SPYRE_ROW_RMSNORM};
			uint32_t dt = dtype_code(r.i());
			uint32_t rows = r.u32(), cols = r.u32();
			struct spyre_mem d = r.mem();
			uint64_t ldd = r.u();
			struct spyre_mem s = r.mem();
			uint64_t lds = r.u();
			struct spyre_mem gm = r.mem(), bt = r.mem();
			ck(spyre_cmdbuf_rowop(cb, m[o], dt, rows, cols, d, ldd, s,
					      lds, gm, bt, r.f()));
			break;
		}
		case OP_CONVERT: {
			struct spyre_mem d = r.mem();
			uint32_t ddt = dtype_code(r.i());
			struct spyre_mem s = r.mem();
			uint32_t sdt = dtype_code(r.i());
			uint64_t n = r.u();
			uint32_t fl = r.u32();
			ck(spyre_cmdbuf_convert(cb, d, ddt, s, sdt, n, fl));
			break;
		}
		default:
			TORCH_CHECK_VALUE(false, "spyre: unknown program opcode ",
					  op, " at ", r.pc - 1);
		}
	}
	TORCH_CHECK_VALUE(r.fc == r.fv.size(), "spyre: ", r.fv.size() - r.fc,
			  " unused float values in program");
}

struct CmdBuf {
	struct spyre_cmdbuf *cb = nullptr;
	CmdBuf() { check(spyre_cmdbuf_create(&cb), "creating a command buffer"); }
	~CmdBuf() { spyre_cmdbuf_destroy(cb); }
	CmdBuf(const CmdBuf &) = delete;
	CmdBuf &operator=(const CmdBuf &) = delete;
};

// graph_create(card, bufs, code, fvals, ins, outs) -> handle
//   bufs[0]: the arena (a contiguous spyre uint8 tensor); bufs[1..]: tensors
//   the graph reads or writes in place (held until graph_destroy).
//   ins: pairs (arena offset, bytes) of the staged inputs, in run order.
//   outs: per output: arena offset, dtype code, ndim, sizes...
int64_t graph_create(int64_t card, std::vector<at::Tensor> bufs,
		     std::vector<int64_t> code, std::vector<double> fvals,
		     std::vector<int64_t> ins, std::vector<int64_t> outs)
{
	TORCH_CHECK_INDEX(card >= 0 && card < device_count(), "spyre: device ",
			  card, " does not exist");
	int c = static_cast<int>(card);
	TORCH_CHECK_VALUE(!bufs.empty(), "spyre: a graph needs its arena");
	for (size_t i = 0; i < bufs.size(); i++) {
		const at::Tensor &t = bufs[i];
		TORCH_CHECK_VALUE(t.defined() && t.device().type() ==
				  c10::DeviceType::PrivateUse1 &&
				  t.device().index() == c, "spyre: graph buffer ",
				  i, " is not a tensor on spyre:", c);
	}
	const at::Tensor &arena = bufs[0];
	TORCH_CHECK_VALUE(arena.is_contiguous() && arena.numel() > 0,
			  "spyre: the arena must be a contiguous tensor");
	int64_t asize = static_cast<int64_t>(arena.nbytes());
	auto g = std::make_shared<Graph>();
	g->card = c;
	TORCH_CHECK_VALUE(ins.size() % 2 == 0, "spyre: ins must be pairs");
	for (size_t i = 0; i < ins.size(); i += 2) {
		TORCH_CHECK_VALUE(ins[i] >= 0 && ins[i + 1] >= 0 &&
				  ins[i] + ins[i + 1] <= asize,
				  "spyre: staged input ", i / 2,
				  " lies outside the arena");
		g->ins.emplace_back(ins[i], ins[i + 1]);
	}
	for (size_t i = 0; i < outs.size();) {
		TORCH_CHECK_VALUE(i + 3 <= outs.size(), "spyre: truncated outs");
		Graph::Out o;
		o.off = outs[i];
		o.dt = scalar_type_code(outs[i + 1]);
		int64_t nd = outs[i + 2];
		i += 3;
		TORCH_CHECK_VALUE(nd >= 0 && i + nd <= outs.size(),
				  "spyre: truncated outs");
		int64_t n = 1;
		for (int64_t d = 0; d < nd; d++) {
			TORCH_CHECK_VALUE(outs[i + d] >= 0, "spyre: negative size");
			o.sizes.push_back(outs[i + d]);
			n *= outs[i + d];
		}
		i += nd;
		TORCH_CHECK_VALUE(o.off >= 0 && o.off + n *
				  static_cast<int64_t>(c10::elementSize(o.dt)) <=
				  asize, "spyre: output ", g->outs.size(),
				  " lies outside the arena");
		g->outs.push_back(std::move(o));
	}
	c10::DeviceGuard guard(arena.device());
	struct spyre_device *dev = device(c);
	CmdBuf cb;
	Reader r{code, fvals, bufs};
	encode(cb.cb, r, c);
	g->ncmds = static_cast<int64_t>(spyre_cmdbuf_count(cb.cb));
	TORCH_CHECK_VALUE(g->ncmds > 0, "spyre: empty program");
	check(spyre_graph_create(dev, cb.cb, nullptr, 0, SPYRE_BO_DEVICE, &g->g),
	      "creating a graph", c);
	g->bufs = std::move(bufs);
	for (const at::Tensor &t : g->bufs)
		g->ptrs.push_back(t.storage().data_ptr().get());
	c_created++;
	std::lock_guard<std::mutex> l(g_mu);
	int64_t h = g_next++;
	g_graphs[h] = g;
	return h;
}

// Whether a tensor @g reads in place got new storage since graph_create
// (e.g. param.data = ...): its commands name the old memory.
bool stale(const Graph &g)
{
	for (size_t i = 0; i < g.bufs.size(); i++)
		if (g.bufs[i].storage().data_ptr().get() != g.ptrs[i])
			return true;
	return false;
}

// Stage @inputs in, launch, stage the outputs out (into @outs when given,
// else into new tensors), on the current stream, in one submission: the
// input copies, the graph and the output copies are three jobs of one
// spyre_graph_launch_staged().  Returns the outputs.
std::vector<at::Tensor> run(Graph &g, const std::vector<at::Tensor> &inputs,
			    std::vector<at::Tensor> *into)
{
	TORCH_CHECK_VALUE(!stale(g), "spyre: a tensor this compiled graph "
			  "reads in place has new storage; rebuild the graph");
	TORCH_CHECK_VALUE(inputs.size() == g.ins.size(), "spyre: compiled "
			  "graph takes ", g.ins.size(), " staged inputs, got ",
			  inputs.size());
	const at::Device dev = g.bufs[0].device();
	c10::DeviceGuard guard(dev);
	std::vector<at::Tensor> in(inputs.size());
	for (size_t i = 0; i < inputs.size(); i++) {
		const at::Tensor &t = inputs[i];
		TORCH_CHECK_VALUE(t.defined() && t.device() == dev,
				  "spyre: input ", i, " of a compiled graph is "
				  "not on ", dev);
		in[i] = t.is_contiguous() ? t : t.contiguous();
		TORCH_CHECK_VALUE(static_cast<int64_t>(in[i].nbytes()) ==
				  g.ins[i].second, "spyre: input ", i, " has ",
				  in[i].nbytes(), " bytes, the compiled graph "
				  "expects ", g.ins[i].second);
	}
	std::vector<at::Tensor> out;
	if (into) {
		out = *into;
	} else {
		out.reserve(g.outs.size());
		for (const auto &o : g.outs)
			out.push_back(at::detail::empty_generic(o.sizes,
				allocator(), c10::DispatchKeySet(
				c10::DispatchKey::PrivateUse1), o.dt,
				std::nullopt));
	}
	std::lock_guard<std::mutex> l(g.mu);
	struct spyre_stream *s = cur(g.card);
	if (g.last && g.last != s)	// the arena is shared by launches
		check(spyre_stream_sync(g.last, SPYRE_TIMEOUT_INFINITE),
		      "waiting for the previous launch", g.card);
	g.last = s;
	thread_local CmdBuf pre, post;
	struct spyre_mem arena = mem_of(g.bufs[0]);
	spyre_cmdbuf_reset(pre.cb);
	spyre_cmdbuf_reset(post.cb);
	int64_t bytes_in = 0, bytes_out = 0;
	for (size_t i = 0; i < in.size(); i++) {
		if (!g.ins[i].second)
			continue;
		check(spyre_cmdbuf_copy_mem(pre.cb,
			SPYRE_MEM(arena.bo, arena.offset + g.ins[i].first), 0,
			SPYRE_DTYPE_U8, mem_of(in[i]), 0, SPYRE_DTYPE_U8,
			g.ins[i].second, 1, 0), "staging an input", g.card);
		bytes_in += g.ins[i].second;
	}
	for (size_t i = 0; i < g.outs.size(); i++) {
		int64_t n = static_cast<int64_t>(out[i].nbytes());
		if (!n)
			continue;
		check(spyre_cmdbuf_copy_mem(post.cb, mem_of(out[i]), 0,
			SPYRE_DTYPE_U8, SPYRE_MEM(arena.bo, arena.offset +
			g.outs[i].off), 0, SPYRE_DTYPE_U8, n, 1, 0),
		      "staging an output", g.card);
		bytes_out += n;
	}
	check(spyre_graph_launch_staged(g.g, s, pre.cb, post.cb),
	      "launching a compiled graph", g.card);
	c_launches++;
	c_commands += g.ncmds;
	c_copy_jobs += (spyre_cmdbuf_count(pre.cb) ? 1 : 0) +
		       (spyre_cmdbuf_count(post.cb) ? 1 : 0);
	c_bytes_in += bytes_in;
	c_bytes_out += bytes_out;
	return out;
}

std::vector<at::Tensor> graph_run(int64_t h, std::vector<at::Tensor> inputs)
{
	std::shared_ptr<Graph> g = lookup(h);
	return run(*g, inputs, nullptr);
}

// graph_set_call(handle, input_args, bound_args, out_order, nodes): make
// the graph callable by graph_call with a compiled program's own argument
// list: staged input i is argument input_args[i], bound tensor j (bufs[j +
// 1]) must be argument bound_args[j] itself (-1: a constant, no argument),
// the call's output k is output out_order[k] of the graph, and one call
// runs @nodes ATen nodes (for the counters).
void graph_set_call(int64_t h, std::vector<int64_t> input_args,
		    std::vector<int64_t> bound_args,
		    std::vector<int64_t> out_order, int64_t nodes)
{
	std::shared_ptr<Graph> g = lookup(h);
	TORCH_CHECK_VALUE(input_args.size() == g->ins.size(), "spyre: "
			  "graph_set_call: ", input_args.size(), " input "
			  "indices for ", g->ins.size(), " staged inputs");
	TORCH_CHECK_VALUE(bound_args.size() + 1 == g->bufs.size(), "spyre: "
			  "graph_set_call: ", bound_args.size(), " bound "
			  "indices for ", g->bufs.size() - 1, " bound tensors");
	for (int64_t i : input_args)
		TORCH_CHECK_VALUE(i >= 0, "spyre: graph_set_call: negative "
				  "input index");
	for (int64_t i : bound_args)
		TORCH_CHECK_VALUE(i >= -1, "spyre: graph_set_call: bad bound "
				  "index ", i);
	for (int64_t o : out_order)
		TORCH_CHECK_VALUE(o >= 0 && o < static_cast<int64_t>(
				  g->outs.size()), "spyre: graph_set_call: no "
				  "output ", o);
	TORCH_CHECK_VALUE(nodes >= 0, "spyre: graph_set_call: negative "
			  "node count");
	std::lock_guard<std::mutex> l(g->mu);
	g->call_ins = std::move(input_args);
	g->call_bound = std::move(bound_args);
	g->call_outs = std::move(out_order);
	g->call_nodes = nodes;
	g->callable = true;
}

// graph_call(handle, args) -> outputs: one call of a compiled program that
// is this one graph, with the program's own (flat) arguments.  The bound
// tensors must be the arguments they were bound from, with the storage
// they had (else ValueError: the caller rebuilds); the staged inputs are
// picked from @args and the launch is graph_run's.
std::vector<at::Tensor> graph_call(int64_t h, std::vector<at::Tensor> args)
{
	std::shared_ptr<Graph> g = lookup(h);
	TORCH_CHECK_VALUE(g->callable, "spyre: compiled graph ", h, " has no "
			  "call signature (graph_set_call)");
	const int64_t nargs = static_cast<int64_t>(args.size());
	for (size_t j = 0; j < g->call_bound.size(); j++) {
		int64_t a = g->call_bound[j];
		TORCH_CHECK_VALUE(a < nargs, "spyre: compiled call has ", nargs,
				  " arguments, the graph binds argument ", a);
		TORCH_CHECK_VALUE(a < 0 || args[a].unsafeGetTensorImpl() ==
				  g->bufs[j + 1].unsafeGetTensorImpl(),
				  "spyre: argument ", a, " of the compiled call "
				  "is not the tensor the graph reads in place; "
				  "rebuild the graph");
	}
	std::vector<at::Tensor> in;
	in.reserve(g->call_ins.size());
	for (int64_t a : g->call_ins) {
		TORCH_CHECK_VALUE(a < nargs, "spyre: compiled call has ", nargs,
				  " arguments, the graph stages argument ", a);
		in.push_back(args[a]);
	}
	std::vector<at::Tensor> res = run(*g, in, nullptr);
	std::vector<at::Tensor> out;
	out.reserve(g->call_outs.size());
	for (int64_t o : g->call_outs)
		out.push_back(res[o]);
	c_calls++;
	c_call_nodes += g->call_nodes;
	return out;
}

void graph_destroy(int64_t h)
{
	std::shared_ptr<Graph> g;
	{
		std::lock_guard<std::mutex> l(g_mu);
		auto it = g_graphs.find(h);
		if (it == g_graphs.end())
			return;
		g = it->second;
		g_graphs.erase(it);
	}
}

// [commands, command bytes, arena bytes, buffers, staged inputs, outputs]
std::vector<int64_t> graph_info(int64_t h)
{
	std::shared_ptr<Graph> g = lookup(h);
	return {g->ncmds, static_cast<int64_t>(spyre_graph_size(g->g)),
		static_cast<int64_t>(g->bufs[0].nbytes()),
		static_cast<int64_t>(g->bufs.size()),
		static_cast<int64_t>(g->ins.size()),
		static_cast<int64_t>(g->outs.size())};
}

// The same launches as graph_run @iters times, from C++ through libspyre
// only (no Python, no dispatcher), each waited for: mean ns per launch.
// With @h2d_input >= 0, each launch is preceded by a host -> card copy of
// that input's bytes (from ordinary memory, spyre_stream_copy_h2d), and
// with @d2h_output >= 0 followed by a card -> host copy of that output
// (spyre_stream_copy_d2h): a decode step's token in and logits out.
// What the framework costs on top is the difference to a compiled call.
double graph_bench(int64_t h, std::vector<at::Tensor> inputs, int64_t iters,
		   int64_t h2d_input, int64_t d2h_output)
{
	TORCH_CHECK_VALUE(iters >= 1, "spyre: graph_bench needs iters >= 1");
	std::shared_ptr<Graph> g = lookup(h);
	TORCH_CHECK_VALUE(h2d_input < static_cast<int64_t>(inputs.size()) &&
			  d2h_output < static_cast<int64_t>(g->outs.size()),
			  "spyre: graph_bench: no such input or output");
	c10::DeviceGuard guard(g->bufs[0].device());
	std::vector<at::Tensor> outs = run(*g, inputs, nullptr);
	struct spyre_stream *s = cur(g->card);
	std::vector<uint8_t> hin, hout;
	struct spyre_mem min = SPYRE_MEM_NONE, mout = SPYRE_MEM_NONE;
	if (h2d_input >= 0) {
		const at::Tensor &t = inputs[h2d_input];
		TORCH_CHECK_VALUE(t.is_contiguous(), "spyre: graph_bench: the "
				  "host-copied input must be contiguous");
		hin.assign(t.nbytes(), 0);
		min = mem_of(t);
	}
	if (d2h_output >= 0) {
		hout.assign(outs[d2h_output].nbytes(), 0);
		mout = mem_of(outs[d2h_output]);
	}
	check(spyre_stream_sync(s, SPYRE_TIMEOUT_INFINITE),
	      "waiting for a launch", g->card);
	auto t0 = std::chrono::steady_clock::now();
	for (int64_t i = 0; i < iters; i++) {
		if (!hin.empty())
			check(spyre_stream_copy_h2d(s, min.bo, min.offset,
						    hin.data(), hin.size()),
			      "copying from the host", g->card);
		run(*g, inputs, &outs);
		if (!hout.empty())
			check(spyre_stream_copy_d2h(s, hout.data(), mout.bo,
						    mout.offset, hout.size()),
			      "copying to the host", g->card);
		check(spyre_stream_sync(s, SPYRE_TIMEOUT_INFINITE),
		      "waiting for a launch", g->card);
	}
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() /
	       static_cast<double>(iters);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("graph_create(int device, Tensor[] bufs, int[] code, float[] "
	      "fvals, int[] ins, int[] outs) -> int", &graph_create);
	m.def("graph_run(int handle, Tensor[] inputs) -> Tensor[]", &graph_run);
	m.def("graph_set_call(int handle, int[] input_args, int[] bound_args, "
	      "int[] out_order, int nodes) -> ()", &graph_set_call);
	m.def("graph_call(int handle, Tensor[] args) -> Tensor[]", &graph_call);
	m.def("graph_destroy(int handle) -> ()", &graph_destroy);
	m.def("graph_info(int handle) -> int[]", &graph_info);
	m.def("graph_stale(int handle) -> bool",
	      [](int64_t h) { return stale(*lookup(h)); });
	m.def("graph_bench(int handle, Tensor[] inputs, int iters, "
	      "int h2d_input=-1, int d2h_output=-1) -> float", &graph_bench);
	m.def("graph_stats() -> int[]", [] {
		std::lock_guard<std::mutex> l(g_mu);
		return std::vector<int64_t>{
			static_cast<int64_t>(g_graphs.size()), c_created.load(),
			c_launches.load(), c_commands.load(), c_copy_jobs.load(),
			c_bytes_in.load(), c_bytes_out.load(),
			c_calls.load(), c_call_nodes.load()};
	});
	m.def("graph_reset_stats() -> ()", [] {
		c_created = 0;
		c_launches = 0;
		c_commands = 0;
		c_copy_jobs = 0;
		c_bytes_in = 0;
		c_bytes_out = 0;
		c_calls = 0;
		c_call_nodes = 0;
	});
}

} // namespace spyre_torch
