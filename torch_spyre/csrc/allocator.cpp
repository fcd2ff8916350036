// SPDX-License-Identifier: MIT
// The caching allocator of the spyre backend: every tensor storage is one
// device-memory BO (SPYRE_BO_DEVICE); a freed BO goes to a free list of its
// card and stream and is handed out again for a request of about its size
// (as CUDA's caching allocator does), so steady-state training and
// inference allocate nothing from the kernel.  empty_cache() returns the
// cached BOs.  It keeps CUDA's memory statistics (memory_stats(): bytes
// and counts of allocations, reserved BOs ("segments"), active blocks, per
// pool: all, small (blocks up to 1 MiB, 4 KiB pages) and large (2 MiB
// granules)) and honours a per-process memory fraction.  The DataPtr's
// address is the BO's device VA with the card's index + 1 in its top byte
// (never dereferenced by the CPU; tagged so that storages of two cards, whose
// VAs live in separate address spaces, never share an address: PyTorch keys
// storages by address, e.g. in torch.save); its context is the block, from which the
// kernels get the BO for libspyre's range-checked operands.  It also makes
// host aliases: spyre tensors over registered host memory
// (torch.ops.spyre.host_alias, for torch_spyre.distributed's staging).
#include "spyre_torch.h"

#include <torch/library.h>

#include <c10/util/Exception.h>

#include <cerrno>
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace spyre_torch {

namespace {

constexpr int kMaxCards = 16;
constexpr uint64_t kPage = SPYRE_BO_PAGE_SIZE;
constexpr uint64_t kLarge = 1ull << 20;		// above: 2 MiB granules
constexpr uint64_t kGranule = 2ull << 20;

using FreeMap = std::multimap<std::pair<struct spyre_stream *, uint64_t>,
			       struct Block *>;
using LiveMap = std::map<uint64_t, struct Block *>;

struct Block {
	struct spyre_bo *bo;
	uint64_t size;			// bytes, as allocated (rounded)
	uint64_t requested;		// bytes the live tensor asked for
	int device;
	struct spyre_stream *stream;	// stream current at allocation
	// other streams that used the block (Tensor.record_stream())
	std::vector<struct spyre_stream *> uses;
	// the map node the block is not in at the moment (moved between
	// the pool's free and live maps, so reuse allocates nothing)
	FreeMap::node_type free_node;
	LiveMap::node_type live_node;
};

// A host alias: the BO registers the host storage @host, which it keeps
// alive; never cached, never counted as allocated.
struct HostBlock : Block {
	c10::Storage host;
};

// One statistic as CUDA's allocator keeps it: the current value, its peak
// since the last reset, and the sums of increases and decreases since the
// last reset of the accumulated statistics.
struct Stat {
	int64_t current = 0, peak = 0, allocated = 0, freed = 0;
	void add(int64_t n)
	{
		current += n;
		if (n > 0)
			allocated += n;
		else
			freed -= n;
		peak = std::max(peak, current);
	}
};

// the statistics of memory_stats(), each for the pools all, small, large
enum { kAll, kSmall, kLarge3, kPools };
enum { kAllocBytes, kReservedBytes, kRequestedBytes, kAllocCount,
       kSegmentCount, kStats };
const char *const kStatNames[kStats] = {
	"allocated_bytes", "reserved_bytes", "requested_bytes", "allocation",
	"segment"};
const char *const kPoolNames[kPools] = {"all", "small_pool", "large_pool"};

struct Pool {
	std::mutex mu;
	// free blocks by (stream, size); a block is reused only on the
	// stream it was last allocated on, so stream order keeps its old
	// jobs ahead of its new ones
	FreeMap free;
	LiveMap live;			// by VA, for copy_data()
	int64_t allocated = 0, peak = 0, reserved = 0;
	Stat stats[kStats][kPools];
	int64_t alloc_retries = 0, ooms = 0, device_allocs = 0,
		device_frees = 0;
	// reserved bytes allowed by set_per_process_memory_fraction (-1: no
	// cap), and the fraction it came from
	int64_t cap = -1;
	double fraction = 1.0;

	// account @n (+/-) bytes in statistic @st for a block of @size
	void account(int st, uint64_t size, int64_t n)
	{
		stats[st][kAll].add(n);
		stats[st][size <= kLarge ? kSmall : kLarge3].add(n);
	}
};

Pool g_pools[kMaxCards];

// DataPtr addresses: device VA | (card + 1) << kCardShift
constexpr int kCardShift = 56;
constexpr uint64_t kVaMask = (1ull << kCardShift) - 1;

void *tagged(struct spyre_bo *bo, int card)
{
	uint64_t va = spyre_bo_va(bo);
	TORCH_CHECK(va <= kVaMask, "spyre: device VA ", va, " does not fit "
		    "the allocator's address tag");
	return reinterpret_cast<void *>(
		va | static_cast<uint64_t>(card + 1) << kCardShift);
}

} // namespace

int card_of_ptr(const void *p)
{
	uint64_t tag = reinterpret_cast<uint64_t>(p) >> kCardShift;
	return tag >= 1 && tag <= static_cast<uint64_t>(kMaxCards) ?
	       static_cast<int>(tag - 1) : -1;
}

namespace {

uint64_t round_size(uint64_t n)
{
	if (n <= kLarge)
		return (n + kPage - 1) / kPage * kPage;
	return (n + kGranule - 1) / kGranule * kGranule;
}

void free_cached(Pool &p)
{
	for (auto &kv : p.free) {
		p.reserved -= static_cast<int64_t>(kv.second->size);
		p.account(kReservedBytes, kv.second->size,
			  -static_cast<int64_t>(kv.second->size));
		p.account(kSegmentCount, kv.second->size, -1);
		p.device_frees++;
		spyre_bo_free(kv.second->bo);
		delete kv.second;
	}
	p.free.clear();
}

void free_block(void *ctx)
{
	auto *b = static_cast<Block *>(ctx);
	Pool &p = g_pools[b->device];
	// the block's next user runs on its own stream: make that stream wait
	// for the work the other streams queued on it so far (no host wait)
	// (best effort: a deleter must not throw, e.g. in a fork() child)
	try {
		for (auto *s : b->uses) {
			struct spyre_event *e = nullptr;
			if (spyre_event_create(device(b->device),
					       SPYRE_EVENT_DISABLE_TIMING,
					       &e) == 0) {
				if (spyre_event_record(e, s) == 0)
					spyre_stream_wait_event(b->stream, e);
				spyre_event_destroy(e);
			}
		}
	} catch (...) {
	}
	b->uses.clear();
	std::lock_guard<std::mutex> l(p.mu);
	b->live_node = p.live.extract(spyre_bo_va(b->bo));
	p.allocated -= static_cast<int64_t>(b->size);
	p.account(kAllocBytes, b->size, -static_cast<int64_t>(b->size));
	p.account(kRequestedBytes, b->size, -static_cast<int64_t>(b->requested));
	p.account(kAllocCount, b->size, -1);
	if (b->free_node.empty()) {
		p.free.emplace(std::make_pair(b->stream, b->size), b);
	} else {
		b->free_node.key() = std::make_pair(b->stream, b->size);
		p.free.insert(std::move(b->free_node));
	}
}

// Whether a new BO of @size would take @p's reserved bytes past the
// memory-fraction cap.
bool over_cap(Pool &p, uint64_t size)
{
	std::lock_guard<std::mutex> l(p.mu);
	return p.cap >= 0 &&
	       p.reserved + static_cast<int64_t>(size) > p.cap;
}

struct CachingAllocator final : public c10::Allocator {
	c10::DataPtr allocate(size_t n) override
	{
		int index = current_device();
		c10::Device dev(c10::DeviceType::PrivateUse1,
				static_cast<c10::DeviceIndex>(index));
		if (n == 0)
			return c10::DataPtr(nullptr, nullptr,
					    &c10::detail::deleteNothing, dev);
		struct spyre_device *d = device(index);
		struct spyre_stream *s = cur(index);
		uint64_t size = round_size(n);
		Pool &p = g_pools[index];
		Block *b = nullptr;
		{
			std::lock_guard<std::mutex> l(p.mu);
			auto it = p.free.lower_bound({s, size});
			if (it != p.free.end() && it->first.first == s &&
			    it->first.second <= size + size / 4) {
				b = it->second;
				b->free_node = p.free.extract(it);
			}
		}
		if (!b) {
			struct spyre_bo *bo = nullptr;
			int rc = over_cap(p, size) ? -EDQUOT :
				spyre_bo_alloc(d, size, SPYRE_BO_DEVICE, &bo);
			if (rc == -ENOMEM || rc == -EDQUOT || rc == -E2BIG) {
				// give the cache back and try once more
				std::lock_guard<std::mutex> l(p.mu);
				free_cached(p);
				p.alloc_retries++;
			}
			if (rc < 0 && over_cap(p, size)) {
				std::lock_guard<std::mutex> l(p.mu);
				p.ooms++;
				TORCH_CHECK_WITH(OutOfMemoryError, false,
					"spyre:", index, ": allocating ", size,
					" bytes would take the memory this "
					"process reserves on the card past its "
					"limit of ", p.cap, " bytes (",
					p.fraction, " of the card, set by "
					"torch.spyre.set_per_process_memory_"
					"fraction; ", p.reserved, " bytes "
					"reserved, ", p.allocated,
					" allocated)");
			}
			if (rc == -ENOMEM || rc == -EDQUOT || rc == -E2BIG)
				rc = spyre_bo_alloc(d, size, SPYRE_BO_DEVICE, &bo);
			if (rc == -E2BIG)
				rc = -ENOMEM;	// larger than the card's memory
			if (rc < 0) {
				{
					std::lock_guard<std::mutex> l(p.mu);
					p.ooms++;
				}
				std::string what = "allocating " +
					std::to_string(size) + " bytes (" +
					std::to_string(p.allocated) +
					" allocated by this process)";
				check(rc, what.c_str(), index);
			}
			b = new Block{bo, size, 0, index, s, {}, {}, {}};
			std::lock_guard<std::mutex> l(p.mu);
			p.reserved += static_cast<int64_t>(size);
			p.account(kReservedBytes, size,
				  static_cast<int64_t>(size));
			p.account(kSegmentCount, size, 1);
			p.device_allocs++;
		}
		b->stream = s;
		b->requested = n;
		std::lock_guard<std::mutex> l(p.mu);
		p.allocated += static_cast<int64_t>(b->size);
		p.account(kAllocBytes, b->size, static_cast<int64_t>(b->size));
		p.account(kRequestedBytes, b->size, static_cast<int64_t>(n));
		p.account(kAllocCount, b->size, 1);
		if (p.allocated > p.peak)
			p.peak = p.allocated;
		if (b->live_node.empty()) {
			p.live[spyre_bo_va(b->bo)] = b;
		} else {
			b->live_node.mapped() = b;
			p.live.insert(std::move(b->live_node));
		}
		return c10::DataPtr(tagged(b->bo, index), b, &free_block, dev);
	}

	c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

	// Storage-to-storage byte copy (used by storage clones): on the card,
	// on the current stream of the destination's card.
	void copy_data(void *dest, const void *src, std::size_t count) const
		override
	{
		if (!count)
			return;
		Block *d = nullptr, *s = nullptr;
		uint64_t doff = 0, soff = 0;
		auto find = [](uint64_t addr, Block **b, uint64_t *off) {
			uint64_t card = (addr >> kCardShift) - 1;
			uint64_t va = addr & kVaMask;
			if (card >= kMaxCards)
				return;
			Pool &p = g_pools[card];
			std::lock_guard<std::mutex> l(p.mu);
			auto it = p.live.upper_bound(va);
			if (it == p.live.begin())
				return;
			--it;
			if (va < it->first + it->second->size) {
				*b = it->second;
				*off = va - it->first;
			}
		};
		find(reinterpret_cast<uint64_t>(dest), &d, &doff);
		find(reinterpret_cast<uint64_t>(src), &s, &soff);
		TORCH_CHECK(d && s && d->device == s->device,
			    "spyre: copy_data() on memory the allocator does "
			    "not own");
		check(spyre_stream_copy(cur(d->device), d->bo, doff, s->bo, soff,
					count), "copying a storage", d->device);
	}
};

CachingAllocator g_allocator;

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace

c10::Allocator *allocator() { return &g_allocator; }

void record_stream(const c10::DataPtr &p, struct spyre_stream *s)
{
	if (p.get_deleter() != &free_block || !p.get_context())
		return;
	auto *b = static_cast<Block *>(p.get_context());
	std::lock_guard<std::mutex> l(g_pools[b->device].mu);
	if (s != b->stream &&
	    std::find(b->uses.begin(), b->uses.end(), s) == b->uses.end())
		b->uses.push_back(s);
}

void free_host_block(void *ctx)
{
	auto *b = static_cast<HostBlock *>(ctx);

	// the kernel keeps the pages pinned for the jobs that listed the BO
	spyre_bo_free(b->bo);
	delete b;
}

struct spyre_mem block_mem(const c10::DataPtr &p)
{
	TORCH_CHECK((p.get_deleter() == &free_block ||
		     p.get_deleter() == &free_host_block) && p.get_context(),
		    "spyre: a storage the spyre allocator did not make");
	return SPYRE_MEM(static_cast<Block *>(p.get_context())->bo, 0);
}

struct spyre_mem mem_of(const at::Tensor &t)
{
	TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
		    "spyre: expected a spyre tensor, got one on ", t.device());
	struct spyre_mem m = block_mem(t.storage().data_ptr());
	m.offset = static_cast<uint64_t>(t.storage_offset()) *
		   static_cast<uint64_t>(t.element_size());
	return m;
}

MemStats mem_stats(int index)
{
	TORCH_CHECK_INDEX(index >= 0 && index < device_count(),
			  "spyre: device ", index, " does not exist");
	Pool &p = g_pools[index];
	std::lock_guard<std::mutex> l(p.mu);
	return MemStats{p.allocated, p.peak, p.reserved};
}

// torch.ops.spyre.host_alias(host, device): a uint8 spyre tensor on card
// @device over the whole storage of CPU tensor @host (registered host
// memory, spyre_bo_register_host(): no copy; the card reads and writes the
// host's pages).  @host's storage must start on a SPYRE_BO_PAGE_SIZE
// boundary and be a multiple of it in bytes (mmap'ed or shared memory, as
// torch.from_file(shared=True) gives), and not resizable (the card keeps
// the pages it was given).  The alias keeps the storage alive
// and the pages pinned until it is freed.  The host sees the card's writes
// once the job that made them has completed (synchronize or an event), the
// card sees the host's writes in jobs queued after them.
// Errors: ValueError (not a CPU tensor, misaligned or odd-sized storage,
// no such card), RuntimeError (the kernel refused the registration, e.g.
// RLIMIT_MEMLOCK: the message names the errno).
at::Tensor host_alias(const at::Tensor &host, int64_t device_index)
{
	TORCH_CHECK_VALUE(host.device().is_cpu(), "spyre: host_alias needs a "
			  "CPU tensor, got one on ", host.device());
	TORCH_CHECK_VALUE(device_index >= 0 && device_index < device_count(),
			  "spyre: device ", device_index, " does not exist");
	c10::Storage st = host.storage();
	auto addr = reinterpret_cast<uintptr_t>(st.data());
	uint64_t n = st.nbytes();
	TORCH_CHECK_VALUE(!st.resizable(), "spyre: host_alias needs a storage "
			  "that cannot be resized (torch.from_file, shared "
			  "memory): the card keeps the pages it was given");
	TORCH_CHECK_VALUE(n && addr % kPage == 0 && n % kPage == 0,
			  "spyre: host_alias needs a storage that starts on a ",
			  kPage, "-byte page and is a multiple of it (got ",
			  n, " bytes at ", st.data(), ")");
	int index = static_cast<int>(device_index);
	struct spyre_bo *bo = nullptr;
	check(spyre_bo_register_host(device(index), st.mutable_data(), n, 0,
				     &bo), "registering host memory", index);
	auto *b = new HostBlock;
	b->bo = bo;
	b->size = n;
	b->requested = n;
	b->device = index;
	b->stream = nullptr;
	b->host = st;
	c10::Device dev(c10::DeviceType::PrivateUse1,
			static_cast<c10::DeviceIndex>(index));
	c10::DataPtr dp(tagged(bo, index), b, &free_host_block, dev);
	c10::Storage alias(c10::Storage::use_byte_size_t(), n, std::move(dp),
			   nullptr, false);
	return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(dev))
		.set_(alias, 0, {static_cast<int64_t>(n)}, {1});
}

void reset_peak(int index)
{
	TORCH_CHECK_INDEX(index >= 0 && index < device_count(),
			  "spyre: device ", index, " does not exist");
	Pool &p = g_pools[index];
	std::lock_guard<std::mutex> l(p.mu);
	p.peak = p.allocated;
	for (auto &st : p.stats)
		for (auto &x : st)
			x.peak = x.current;
}

namespace {

int pool_index(int64_t d)
{
	int i = d < 0 ? current_device() : static_cast<int>(d);
	TORCH_CHECK_INDEX(i >= 0 && i < device_count(), "spyre: device ", i,
			  " does not exist (", device_count(),
			  " card(s) visible)");
	return i;
}

// torch.ops.spyre.memory_stats_full(device): CUDA's flat memory_stats()
// keys ("allocated_bytes.all.current", ...) and their values, unsorted.
// active_* equals allocated_* (a block is active exactly while a tensor
// holds it: frees are not deferred) and inactive_split_* is 0 (blocks are
// never split; the rounding slack shows as reserved - requested).
std::tuple<std::vector<std::string>, std::vector<int64_t>>
memory_stats_full(int64_t d)
{
	Pool &p = g_pools[pool_index(d)];
	std::lock_guard<std::mutex> l(p.mu);
	std::vector<std::string> k;
	std::vector<int64_t> v;
	auto put = [&](const std::string &name, int64_t x) {
		k.push_back(name);
		v.push_back(x);
	};
	auto stat = [&](const std::string &name, const Stat &x) {
		put(name + ".current", x.current);
		put(name + ".peak", x.peak);
		put(name + ".allocated", x.allocated);
		put(name + ".freed", x.freed);
	};
	for (int st = 0; st < kStats; st++)
		for (int pool = 0; pool < kPools; pool++) {
			std::string suffix = std::string(".") + kPoolNames[pool];
			stat(kStatNames[st] + suffix, p.stats[st][pool]);
			if (st == kAllocBytes)
				stat("active_bytes" + suffix, p.stats[st][pool]);
			if (st == kAllocCount)
				stat("active" + suffix, p.stats[st][pool]);
			if (st == kAllocBytes)
				stat("inactive_split_bytes" + suffix, Stat{});
			if (st == kAllocCount)
				stat("inactive_split" + suffix, Stat{});
		}
	stat("oversize_allocations", Stat{});
	stat("oversize_segments", Stat{});
	put("num_alloc_retries", p.alloc_retries);
	put("num_ooms", p.ooms);
	put("num_sync_all_streams", 0);
	put("num_device_alloc", p.device_allocs);
	put("num_device_free", p.device_frees);
	put("max_split_size", -1);
	return {k, v};
}

void reset_accumulated(int64_t d)
{
	Pool &p = g_pools[pool_index(d)];
	std::lock_guard<std::mutex> l(p.mu);
	for (auto &st : p.stats)
		for (auto &x : st)
			x.allocated = x.freed = 0;
	p.alloc_retries = p.ooms = p.device_allocs = p.device_frees = 0;
}

// torch.ops.spyre.set_memory_fraction(fraction, device): cap what this
// process reserves on the card at @fraction (in [0, 1], else ValueError,
// nothing changed) of its memory; an allocation past it returns the cache
// and retries once, then raises OutOfMemoryError.  Opens the card (its
// size is needed).
void set_memory_fraction(double fraction, int64_t d)
{
	TORCH_CHECK_VALUE(fraction >= 0.0 && fraction <= 1.0, "spyre: invalid "
			  "memory fraction ", fraction, ": allowed range is "
			  "[0, 1]");
	int i = pool_index(d);
	struct spyre_memory_info mi;
	check(spyre_device_memory_info(device(i), &mi), "reading memory use",
	      i);
	Pool &p = g_pools[i];
	std::lock_guard<std::mutex> l(p.mu);
	p.fraction = fraction;
	p.cap = static_cast<int64_t>(fraction *
				     static_cast<double>(mi.devmem_total));
}

} // namespace

void empty_cache()
{
	for (auto &p : g_pools) {
		std::lock_guard<std::mutex> l(p.mu);
		free_cached(p);
	}
}

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("host_alias(Tensor host, int device) -> Tensor", &host_alias);
	m.def("memory_stats_full(int device) -> (str[], int[])",
	      &memory_stats_full);
	m.def("reset_accumulated_memory_stats(int device) -> ()",
	      &reset_accumulated);
	m.def("set_memory_fraction(float fraction, int device) -> ()",
	      &set_memory_fraction);
	m.def("get_memory_fraction(int device) -> float", [](int64_t d) {
		Pool &p = g_pools[pool_index(d)];
		std::lock_guard<std::mutex> l(p.mu);
		return p.fraction;
	});
}

} // namespace spyre_torch
