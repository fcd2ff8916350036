// SPDX-License-Identifier: MIT
// The global boxed CPU fallback of the spyre backend (every aten op without
// a spyre kernel runs on the CPU: arguments copied to the host, results
// back), its per-op counts next to the native kernels' counts, the strict
// mode that turns a fallback into an error, and the torch.ops.spyre.*
// functions the Python module torch.spyre is built on (plus a libspyre-only
// copy benchmark for bench_torch.py).
#include "spyre_torch.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace spyre_torch {

namespace {

// The op counts (and the set of ops warned about) are function-local
// statics: generated kernels take their counter while the library's static
// registrations run, before this file's globals would be constructed.
// Per op: native and fallback calls; entries are never erased (generated
// kernels keep a pointer to their counter), reset_op_counts() zeroes them.
struct Count {
	std::atomic<int64_t> native{0}, fb{0};
};
struct Counts {
	std::mutex mu;
	std::map<std::string, Count> counts;
	std::set<std::string> warned;
};

Counts &counts()
{
	static Counts c;
	return c;
}

std::atomic<bool> g_strict{false};

} // namespace

void count_native(const char *op)
{
	Counts &C = counts();
	std::lock_guard<std::mutex> l(C.mu);
	C.counts[op].native++;
}

std::atomic<int64_t> *native_counter(const std::string &name)
{
	Counts &C = counts();
	std::lock_guard<std::mutex> l(C.mu);
	return &C.counts[name].native;
}

void count_fallback(const std::string &name)
{
	bool warn;
	{
		Counts &C = counts();
		std::lock_guard<std::mutex> l(C.mu);
		C.counts[name].fb++;
		warn = C.warned.insert(name).second;
	}
	TORCH_CHECK(!g_strict.load(), "spyre: ", name, " has no kernel on the "
		    "card and strict mode (torch.spyre.set_strict(True)) "
		    "forbids the CPU fallback");
	if (warn)
		TORCH_WARN("spyre: ", name, " runs on the CPU (no kernel on the "
			   "card yet); its tensors are copied to the host and "
			   "back. Warned once per op; torch.spyre.op_counts() "
			   "counts every call.");
}

void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &n = op.schema().operator_name();
	count_fallback(n.name + (n.overload_name.empty() ? "" :
				 "." + n.overload_name));
	seed_random_op(op, stack);
	at::native::cpu_fallback(op, stack);
}

namespace {

int resolve(int64_t d)
{
	return d < 0 ? current_device() : static_cast<int>(d);
}

void check_index(int d)
{
	TORCH_CHECK_INDEX(d >= 0 && d < device_count(), "spyre: device ", d,
			  " does not exist (", device_count(),
			  " card(s) visible)");
}

std::vector<int64_t> memory_stats(int64_t d)
{
	MemStats s = mem_stats(resolve(d));
	return {s.allocated, s.peak, s.reserved};
}

std::vector<int64_t> mem_get_info(int64_t d)
{
	int i = resolve(d);
	struct spyre_memory_info mi;
	check(spyre_device_memory_info(device(i), &mi), "reading memory use",
	      i);
	return {static_cast<int64_t>(mi.devmem_total - mi.devmem_used),
		static_cast<int64_t>(mi.devmem_total)};
}

std::tuple<std::vector<std::string>, std::vector<int64_t>,
	   std::vector<int64_t>> op_counts()
{
	Counts &C = counts();
	std::lock_guard<std::mutex> l(C.mu);
	std::vector<std::string> names;
	std::vector<int64_t> native, fb;
	for (auto &kv : C.counts) {
		int64_t n = kv.second.native.load(), f = kv.second.fb.load();
		if (!n && !f)
			continue;
		names.push_back(kv.first);
		native.push_back(n);
		fb.push_back(f);
	}
	return {names, native, fb};
}

// Test hook: submit one job that reads an unmapped device VA, so the card
// faults and the context's sticky error is set (for the error tests), and
// wait for it; with @wait false, queue the faulting command on the current
// stream as an op does (in its open batch) and return at once: the error
// then surfaces at the next synchronisation.
void inject_fault(int64_t d, bool wait)
{
	int i = resolve(d);
	struct spyre_device *dev = device(i);
	struct spyre_device_info info;
	check(spyre_device_get_info(dev, &info), "reading device info", i);
	uint64_t dst = info.va_end - 2 * SPYRE_BO_PAGE_SIZE,
		 src = info.va_end - 4 * SPYRE_BO_PAGE_SIZE;
	if (!wait) {
		check(spyre_stream_convert(cur(i), SPYRE_MEM_VA(dst),
					   SPYRE_DTYPE_FP32, SPYRE_MEM_VA(src),
					   SPYRE_DTYPE_FP32, 16, 0),
		      "queueing the faulting command", i);
		return;
	}
	struct spyre_cmdbuf *cb = nullptr;
	check(spyre_cmdbuf_create(&cb), "creating a command buffer", i);
	int rc = spyre_cmdbuf_copy(cb, dst, src, 64);
	if (rc == 0)
		rc = spyre_stream_submit(cur(i), cb, nullptr, 0);
	spyre_cmdbuf_destroy(cb);
	check(rc, "submitting the faulting job", i);
	rc = spyre_stream_sync(cur(i), SPYRE_TIMEOUT_INFINITE);
	TORCH_CHECK(rc < 0, "spyre: the faulting job did not fault");
}

// Benchmark helper (bench_torch.py): mean ns of one host -> card copy of
// @nbytes from ordinary host memory into a device-memory tensor of the
// current card, waited for, through libspyre alone (spyre_stream_copy_h2d,
// the call tensor.to("spyre") ends in), over @iters copies after one
// warm-up copy.
double bench_copy_h2d(int64_t nbytes, int64_t iters)
{
	TORCH_CHECK_VALUE(nbytes > 0 && iters > 0, "spyre: bench_copy_h2d "
			  "needs nbytes > 0 and iters > 0");
	int i = current_device();
	check_index(i);
	at::Tensor d = at::empty({nbytes}, at::TensorOptions()
				 .dtype(at::kByte)
				 .device(c10::Device(c10::DeviceType::PrivateUse1,
						     static_cast<c10::DeviceIndex>(i))));
	std::vector<uint8_t> h(static_cast<size_t>(nbytes), 1);
	struct spyre_mem m = mem_of(d);
	struct spyre_stream *s = cur(i);
	auto once = [&] {
		check(spyre_stream_copy_h2d(s, m.bo, m.offset, h.data(),
					    static_cast<size_t>(nbytes)),
		      "copying from the host", i);
		check(spyre_stream_sync(s, SPYRE_TIMEOUT_INFINITE),
		      "waiting for a copy", i);
	};
	once();
	auto t0 = std::chrono::steady_clock::now();
	for (int64_t n = 0; n < iters; n++)
		once();
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() /
	       static_cast<double>(iters);
}

} // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

TORCH_LIBRARY(spyre, m)
{
	m.def("device_count() -> int",
	      [] { return static_cast<int64_t>(device_count()); });
	m.def("current_device() -> int",
	      [] { return static_cast<int64_t>(current_device()); });
	m.def("set_device(int device) -> ()", [](int64_t d) {
		set_current_device(static_cast<int>(d));
	});
	m.def("is_initialized(int device) -> bool", [](int64_t d) {
		return device_opened(resolve(d));
	});
	m.def("synchronize(int device) -> ()", [](int64_t d) {
		int i = resolve(d);
		check_index(i);
		device(i);
		synchronize_device(i);
	});
	m.def("memory_stats(int device) -> int[]", &memory_stats);
	m.def("reset_peak_memory_stats(int device) -> ()",
	      [](int64_t d) { reset_peak(resolve(d)); });
	m.def("mem_get_info(int device) -> int[]", &mem_get_info);
	m.def("empty_cache() -> ()", [] { empty_cache(); });
	m.def("op_counts() -> (str[], int[], int[])", &op_counts);
	m.def("reset_op_counts() -> ()", [] {
		Counts &C = counts();
		std::lock_guard<std::mutex> l(C.mu);
		for (auto &kv : C.counts) {
			kv.second.native = 0;
			kv.second.fb = 0;
		}
	});
	m.def("set_strict(bool on) -> bool",
	      [](bool on) { return g_strict.exchange(on); });
	m.def("context_error(int device) -> int", [](int64_t d) {
		int i = resolve(d);
		struct spyre_context_info ci;
		check(spyre_device_context_info(device(i), &ci),
		      "reading the context state", i);
		return static_cast<int64_t>(ci.error);
	});
	m.def("_inject_fault(int device, bool wait=True) -> ()", &inject_fault);
	// test hook: the card PyTorch's PrivateUse1 hooks say owns the
	// storage address of @t (getDeviceFromPtr)
	m.def("_device_from_ptr(Tensor t) -> int", [](const at::Tensor &t) {
		return static_cast<int64_t>(at::detail::getPrivateUse1Hooks()
			.getDeviceFromPtr(t.storage().mutable_data()).index());
	});
	m.def("bench_copy_h2d(int nbytes, int iters) -> float",
	      &bench_copy_h2d);
}

} // namespace spyre_torch
