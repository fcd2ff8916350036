// SPDX-License-Identifier: MIT
// The card's random-number generators: SpyreGenerator (a counter-based
// Philox state, a 64-bit seed and a 64-bit offset, as CUDA's philox
// generator holds), one default generator per card handed to PyTorch
// through both of 2.6's registrations (PrivateUse1HooksInterface::
// getDefaultGenerator, in device.cpp, and REGISTER_GENERATOR_PRIVATEUSE1
// for torch.Generator("spyre")), philox_reserve() with which a random op
// takes its counter range, and the torch.ops.spyre.* seed and state
// functions torch.spyre's random API is built on.  The random ops with card
// kernels (ops_random.cpp) draw the card's Philox numbers at the range they
// took; the others run on the CPU (the boxed fallback) with a CPU engine
// seeded from the counter range they took (seed_random_op()): no random op
// on a spyre tensor reads or advances the CPU's default generator.
#include "spyre_torch.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>

namespace spyre_torch {

namespace {

constexpr int kMaxCards = 16;
// bytes of get_state(): the seed, then the offset, each 8 bytes in host
// (little-endian) order, as CUDA's generator lays out its philox state
constexpr int64_t kStateBytes = 16;

class SpyreGenerator final : public c10::GeneratorImpl {
public:
	explicit SpyreGenerator(c10::DeviceIndex index)
		: c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1,
						 index),
				     c10::DispatchKeySet(
					     c10::DispatchKey::PrivateUse1))
	{
	}

	void set_current_seed(uint64_t seed) override
	{
		seed_ = seed;
		offset_ = 0;
	}
	void set_offset(uint64_t offset) override
	{
		TORCH_CHECK_VALUE(offset % 4 == 0, "spyre: a generator's offset "
				  "counts 32-bit Philox outputs in blocks of "
				  "4: it must be a multiple of 4, got ", offset);
		offset_ = offset;
	}
	uint64_t get_offset() const override { return offset_; }
	uint64_t current_seed() const override { return seed_; }
	uint64_t seed() override
	{
		uint64_t s = c10::detail::getNonDeterministicRandom();
		set_current_seed(s);
		return s;
	}
	void set_state(const c10::TensorImpl &st) override
	{
		TORCH_CHECK(st.device().is_cpu() &&
			    st.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
			    st.is_contiguous(),
			    "spyre: an RNG state must be a contiguous uint8 CPU "
			    "tensor (torch.spyre.get_rng_state() gives one), "
			    "got ", st.dtype(), " on ", st.device());
		TORCH_CHECK(st.numel() == kStateBytes, "spyre: an RNG state of "
			    "the card's generator is ", kStateBytes, " bytes "
			    "(Philox seed and offset), got ", st.numel(),
			    " bytes (the RNG state of another device?)");
		uint64_t v[2];
		std::memcpy(v, st.data(), sizeof(v));
		TORCH_CHECK(v[1] % 4 == 0, "spyre: the RNG state's offset ", v[1],
			    " is not a multiple of 4 (not a spyre RNG state?)");
		seed_ = v[0];
		offset_ = v[1];
	}
	c10::intrusive_ptr<c10::TensorImpl> get_state() const override
	{
		at::Tensor t = at::empty({kStateBytes}, at::kByte);
		uint64_t v[2] = {seed_, offset_};
		std::memcpy(t.data_ptr(), v, sizeof(v));
		return t.getIntrusivePtr();
	}

	static c10::DeviceType device_type()
	{
		return c10::DeviceType::PrivateUse1;
	}

	// The caller holds mutex_.
	PhiloxState reserve(uint64_t values)
	{
		PhiloxState p{seed_, offset_};
		uint64_t n = (values + 3) / 4 * 4;
		offset_ += n ? n : 4;
		return p;
	}

private:
	SpyreGenerator *clone_impl() const override
	{
		auto *g = new SpyreGenerator(device_.index());
		g->seed_ = seed_;
		g->offset_ = offset_;
		return g;
	}

	uint64_t seed_ = c10::default_rng_seed_val;
	uint64_t offset_ = 0;
};

std::once_flag g_once[kMaxCards];
at::Generator g_default[kMaxCards];

int resolve_index(int index)
{
	int i = index < 0 ? current_device() : index;
	TORCH_CHECK_INDEX(i >= 0 && i < device_count(), "spyre: device ", i,
			  " does not exist (", device_count(),
			  " card(s) visible)");
	return i;
}

// torch.Generator(device="spyre:N"): a new generator, seeded as the
// default ones start (seed 67280421310721, offset 0).
at::Generator make_generator(c10::DeviceIndex index)
{
	int i = resolve_index(index);
	return at::make_generator<SpyreGenerator>(
		static_cast<c10::DeviceIndex>(i));
}

REGISTER_GENERATOR_PRIVATEUSE1(make_generator)

// splitmix64's finaliser: spreads (seed, offset) over the CPU engine's seed
uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

} // namespace

const at::Generator &default_generator(int index)
{
	int i = resolve_index(index);
	std::call_once(g_once[i], [i] {
		g_default[i] = at::make_generator<SpyreGenerator>(
			static_cast<c10::DeviceIndex>(i));
	});
	return g_default[i];
}

at::Generator spyre_generator(const std::optional<at::Generator> &gen,
			      int index)
{
	if (!gen.has_value() || !gen->defined())
		return default_generator(index);
	TORCH_CHECK(gen->device().type() == c10::DeviceType::PrivateUse1,
		    "spyre: a random op on a spyre tensor needs a spyre "
		    "generator (torch.Generator(device=\"spyre\")), got a "
		    "generator of device '", gen->device(), "'");
	return *gen;
}

PhiloxState philox_reserve(const at::Generator &gen, uint64_t values)
{
	auto *g = gen.get<SpyreGenerator>();
	std::lock_guard<std::mutex> l(g->mutex_);
	return g->reserve(values);
}

at::Generator cpu_stand_in(const PhiloxState &p)
{
	return at::detail::createCPUGenerator(mix(p.seed ^ mix(p.offset)));
}

void seed_random_op(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &args = op.schema().arguments();
	size_t base = stack->size() - args.size();
	int gen_arg = -1, index = -1;
	int64_t values = 0;
	for (size_t i = 0; i < args.size(); i++) {
		c10::TypePtr t = args[i].type();
		if (auto o = t->cast<c10::OptionalType>())
			t = o->getElementType();
		if (t->kind() == c10::TypeKind::GeneratorType && gen_arg < 0)
			gen_arg = static_cast<int>(i);
		const c10::IValue &v = (*stack)[base + i];
		auto see = [&](const at::Tensor &x) {
			if (!x.defined())
				return;
			values = std::max<int64_t>(values, x.numel());
			if (index < 0 && x.device().type() ==
			    c10::DeviceType::PrivateUse1)
				index = x.device().index();
		};
		if (v.isTensor())
			see(v.toTensor());
		else if (v.isTensorList())
			for (const at::Tensor &x : v.toTensorList().vec())
				see(x);
	}
	if (gen_arg < 0)
		return;
	c10::IValue &v = (*stack)[base + static_cast<size_t>(gen_arg)];
	std::optional<at::Generator> given;
	if (!v.isNone())
		given = v.toGenerator();
	at::Generator g = spyre_generator(given, index);
	v = c10::IValue(cpu_stand_in(philox_reserve(
		g, static_cast<uint64_t>(values))));
}

namespace {

// seeds cross the schema as int64 (Python ints of either sign): the bits
// are the unsigned seed
void manual_seed(int64_t d, int64_t seed)
{
	at::Generator g = default_generator(static_cast<int>(d));
	std::lock_guard<std::mutex> l(g.mutex());
	g.set_current_seed(static_cast<uint64_t>(seed));
}

int64_t seed(int64_t d)
{
	at::Generator g = default_generator(static_cast<int>(d));
	std::lock_guard<std::mutex> l(g.mutex());
	return static_cast<int64_t>(g.seed());
}

int64_t initial_seed(int64_t d)
{
	at::Generator g = default_generator(static_cast<int>(d));
	return static_cast<int64_t>(g.current_seed());
}

at::Tensor get_rng_state(int64_t d)
{
	at::Generator g = default_generator(static_cast<int>(d));
	std::lock_guard<std::mutex> l(g.mutex());
	return g.get_state();
}

void set_rng_state(int64_t d, const at::Tensor &state)
{
	at::Generator g = default_generator(static_cast<int>(d));
	std::lock_guard<std::mutex> l(g.mutex());
	g.set_state(state);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	// @device: card index, -1 for the current card (IndexError when there
	// is no such card).  Seeds are the 64 bits of an int64.  The state is
	// a 16-byte uint8 CPU tensor (seed, offset); set_rng_state refuses
	// any other (RuntimeError, nothing changed).
	m.def("default_generator(int device) -> Generator?", [](int64_t d) {
		return default_generator(static_cast<int>(d));
	});
	m.def("manual_seed(int device, int seed) -> ()", &manual_seed);
	m.def("seed(int device) -> int", &seed);
	m.def("initial_seed(int device) -> int", &initial_seed);
	m.def("get_rng_state(int device) -> Tensor", &get_rng_state);
	m.def("set_rng_state(int device, Tensor state) -> ()", &set_rng_state);
}

} // namespace spyre_torch
