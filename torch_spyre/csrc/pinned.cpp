// SPDX-License-Identifier: MIT
// Pinned host memory of the spyre backend: the caching host allocator behind
// Tensor.pin_memory() / torch.empty(pin_memory=True) (ATen's
// CachingHostAllocatorImpl with libspyre events), whose blocks are
// registered with the cards (spyre_bo_register_host(): the card reads and
// writes them in place), and the copies between pinned memory and a card
// that non_blocking=True makes asynchronous on the current stream.
#include "spyre_torch.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <sys/mman.h>
#include <sys/resource.h>
#include <utility>

namespace spyre_torch {

namespace {

constexpr int kMaxCards = 16;
constexpr uint64_t kPage = SPYRE_BO_PAGE_SIZE;

// A block: @size_ usable bytes (a power of two) at @ptr_, @mapped bytes
// mmap'ed (@size_ rounded up to a page), and its registration with each card
// that used it (made on first use; the allocating thread's card at once).
struct PinnedBlock : at::HostBlock<c10::Stream> {
	explicit PinnedBlock(size_t size) : at::HostBlock<c10::Stream>(size) {}
	PinnedBlock(size_t size, void *ptr)
		: at::HostBlock<c10::Stream>(size, ptr) {}
	uint64_t mapped = 0;
	std::array<struct spyre_bo *, kMaxCards> bos{};
};

// A libspyre event that owns itself (what the allocator's event queue
// holds: the last use of a freed block on one stream).
struct PinEvent {
	struct spyre_event *e = nullptr;
	PinEvent() = default;
	explicit PinEvent(struct spyre_event *ev) : e(ev) {}
	PinEvent(PinEvent &&o) noexcept : e(std::exchange(o.e, nullptr)) {}
	PinEvent &operator=(PinEvent &&o) noexcept
	{
		std::swap(e, o.e);
		return *this;
	}
	PinEvent(const PinEvent &) = delete;
	PinEvent &operator=(const PinEvent &) = delete;
	~PinEvent() { spyre_event_destroy(e); }
};

// Why the kernel refused to pin @bytes for card @index (@rc < 0): a
// RuntimeError naming RLIMIT_MEMLOCK for -ENOMEM.
[[noreturn]] void refuse(int rc, uint64_t bytes, int index)
{
	struct rlimit rl = {};
	getrlimit(RLIMIT_MEMLOCK, &rl);
	std::string lim = rl.rlim_cur == RLIM_INFINITY ? "unlimited" :
		std::to_string(rl.rlim_cur) + " bytes";
	TORCH_CHECK(rc != -ENOMEM, "spyre:", index, ": pinning ", bytes,
		    " bytes of host memory failed: the kernel cannot pin more "
		    "pages for this process (RLIMIT_MEMLOCK is ", lim,
		    "; raise it with `ulimit -l`, or free pinned tensors and "
		    "call torch.spyre.empty_host_cache()): ",
		    spyre_strerror(rc));
	check(rc, "registering pinned host memory", index);
	TORCH_CHECK(false, "unreachable");
}

struct PinnedImpl final
	: at::CachingHostAllocatorImpl<c10::Stream, PinEvent, PinnedBlock> {
	using Base = at::CachingHostAllocatorImpl<c10::Stream, PinEvent,
						  PinnedBlock>;

	std::mutex reg_mu;
	// live blocks by start address (isPinnedPtr, copies)
	std::map<uintptr_t, PinnedBlock *> regions;
	// registration of a block mmap'ed by allocate_host_memory() that the
	// base class has not wrapped in its PinnedBlock yet: address ->
	// (mapped bytes, card, BO)
	std::map<void *, std::tuple<uint64_t, int, struct spyre_bo *>> fresh;
	int64_t pinned_bytes = 0;

	std::pair<void *, void *> allocate(size_t size) override
	{
		auto r = Base::allocate(size);
		if (!r.second)
			return r;
		auto *b = static_cast<PinnedBlock *>(r.second);
		std::lock_guard<std::mutex> l(reg_mu);
		auto it = fresh.find(b->ptr_);
		if (it != fresh.end()) {	// a new block: adopt its BO
			b->mapped = std::get<0>(it->second);
			b->bos[std::get<1>(it->second)] = std::get<2>(it->second);
			fresh.erase(it);
			regions[reinterpret_cast<uintptr_t>(b->ptr_)] = b;
		}
		return r;
	}

	void copy_data(void *dest, const void *src, std::size_t count) const
		override
	{
		std::memcpy(dest, src, count);
	}

	// The block holding [@p, @p + @n), or nullptr.
	PinnedBlock *find(const void *p, uint64_t n, uint64_t *off)
	{
		auto a = reinterpret_cast<uintptr_t>(p);
		std::lock_guard<std::mutex> l(reg_mu);
		auto it = regions.upper_bound(a);
		if (it == regions.begin())
			return nullptr;
		--it;
		PinnedBlock *b = it->second;
		if (a - it->first >= b->size_ || n > b->size_ - (a - it->first))
			return nullptr;
		*off = a - it->first;
		return b;
	}

	// @b's BO on card @index, registered now if it is the first use there.
	struct spyre_bo *bo(PinnedBlock *b, int index)
	{
		{
			std::lock_guard<std::mutex> l(reg_mu);
			if (b->bos[index])
				return b->bos[index];
		}
		struct spyre_bo *bo = nullptr;
		int rc = spyre_bo_register_host(device(index), b->ptr_, b->mapped,
						0, &bo);
		if (rc < 0)
			refuse(rc, b->mapped, index);
		std::lock_guard<std::mutex> l(reg_mu);
		if (b->bos[index]) {		// another thread was faster
			spyre_bo_free(bo);
			return b->bos[index];
		}
		b->bos[index] = bo;
		pinned_bytes += static_cast<int64_t>(b->mapped);
		return bo;
	}

	void allocate_host_memory(size_t size, void **ptr) override
	{
		uint64_t mapped = (size + kPage - 1) / kPage * kPage;
		int index = current_device();
		struct spyre_device *d = device(index);
		void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "spyre: "
				 "cannot map ", mapped, " bytes of host memory "
				 "to pin: ", std::strerror(errno));
		struct spyre_bo *bo = nullptr;
		int rc = spyre_bo_register_host(d, p, mapped, 0, &bo);
		if (rc < 0) {
			munmap(p, mapped);
			refuse(rc, mapped, index);
		}
		std::lock_guard<std::mutex> l(reg_mu);
		fresh[p] = {mapped, index, bo};
		pinned_bytes += static_cast<int64_t>(mapped);
		*ptr = p;
	}

	void free_block(PinnedBlock *b) override
	{
		{
			std::lock_guard<std::mutex> l(reg_mu);
			regions.erase(reinterpret_cast<uintptr_t>(b->ptr_));
			for (auto *bo : b->bos)
				if (bo)
					pinned_bytes -=
						static_cast<int64_t>(b->mapped);
		}
		// the kernel keeps the pages pinned for jobs still listing a BO
		for (auto *&bo : b->bos) {
			spyre_bo_free(bo);
			bo = nullptr;
		}
		munmap(b->ptr_, b->mapped);
	}

	// a freed block's last use on @s: an event the block waits for
	// before it is handed out again (best effort: this runs in a
	// deleter; without an event the stream is waited for here)
	void record_stream(std::optional<std::vector<PinEvent>> &events,
			   c10::Stream s) override
	{
		struct spyre_event *e = nullptr;
		try {
			struct spyre_stream *ss = stream(s);
			int rc = spyre_event_create(device(s.device_index()),
						    SPYRE_EVENT_DISABLE_TIMING,
						    &e);
			if (rc == 0 && spyre_event_record(e, ss) == 0) {
				events->emplace_back(e);
				return;
			}
			spyre_event_destroy(e);
			spyre_stream_sync(ss, SPYRE_TIMEOUT_INFINITE);
		} catch (...) {
		}
		events->emplace_back();		// a never-recorded event: complete
	}

	bool query_event(PinEvent &ev) override
	{
		// complete, or failed (the card will not touch the block again)
		return !ev.e || spyre_event_query(ev.e) != -EBUSY;
	}
};

void free_pinned(void *ctx);

struct PinnedAllocator final
	: at::CachingHostAllocatorInterface<PinnedImpl> {
	at::DataPtr allocate(size_t size) override
	{
		auto r = impl_->allocate(size);
		return {r.first, r.second, &free_pinned,
			at::Device(at::DeviceType::CPU)};
	}
	at::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
};

// leaked on purpose: tensors may be freed during static destruction
PinnedAllocator *g_pinned = new PinnedAllocator();

void free_pinned(void *ctx) { g_pinned->free(ctx); }

} // namespace

c10::Allocator *pinned_allocator() { return g_pinned; }

bool is_pinned_ptr(const void *p)
{
	uint64_t off = 0;
	return p && g_pinned->impl_->find(p, 1, &off) != nullptr;
}

bool pinned_mem(const void *p, uint64_t nbytes, int index,
		struct spyre_mem *out)
{
	uint64_t off = 0;
	PinnedBlock *b = p ? g_pinned->impl_->find(p, nbytes, &off) : nullptr;
	if (!b)
		return false;
	*out = SPYRE_MEM(g_pinned->impl_->bo(b, index), off);
	return true;
}

void pinned_record_use(const at::Tensor &host, const c10::Stream &s)
{
	const c10::DataPtr &dp = host.storage().data_ptr();
	if (dp.get_deleter() == &free_pinned)
		g_pinned->record_event(dp.get(), dp.get_context(), s);
}

bool copy_pinned(const at::Tensor &dst, const at::Tensor &src,
		 bool non_blocking)
{
	bool to_card = dst.device().type() == c10::DeviceType::PrivateUse1;
	const at::Tensor &host = to_card ? src : dst;
	const at::Tensor &card = to_card ? dst : src;
	if (!host.device().is_cpu() || host.scalar_type() != card.scalar_type() ||
	    host.sizes() != card.sizes() || !host.is_contiguous() ||
	    !card.is_contiguous() || !card.numel() ||
	    (to_card && !non_blocking))
		return false;
	int index = card.device().index();
	struct spyre_mem h;
	if (!pinned_mem(host.const_data_ptr(), host.nbytes(), index, &h))
		return false;
	struct spyre_mem c = mem_of(card);
	c10::Stream s = current_stream(index);
	struct spyre_stream *ss = stream(s);
	if (to_card)
		check(spyre_stream_copy(ss, c.bo, c.offset, h.bo, h.offset,
					host.nbytes()),
		      "copying from pinned host memory", index);
	else
		check(spyre_stream_copy(ss, h.bo, h.offset, c.bo, c.offset,
					host.nbytes()),
		      "copying to pinned host memory", index);
	pinned_record_use(host, s);
	if (!non_blocking)
		check(spyre_stream_sync(ss, SPYRE_TIMEOUT_INFINITE),
		      "waiting for a copy to the host", index);
	return true;
}

namespace {

// torch.ops.spyre.pinned_stats(): (bytes registered with the cards (a
// block used with two cards counts twice), blocks the cache holds).
std::vector<int64_t> pinned_stats()
{
	std::lock_guard<std::mutex> l(g_pinned->impl_->reg_mu);
	return {g_pinned->impl_->pinned_bytes,
		static_cast<int64_t>(g_pinned->impl_->regions.size())};
}

// Test hook: torch.ops.spyre._stream_wait_value(sem, value): the current
// stream of the current card stalls (a SEM_WAIT job, on the card) until
// the first int64 of @sem is >= @value.  @sem is a pinned CPU tensor (the
// host releases the stream by writing it) or a spyre tensor of that card.
void stream_wait_value(const at::Tensor &sem, int64_t value)
{
	TORCH_CHECK_VALUE(sem.scalar_type() == at::kLong && sem.numel() >= 1,
			  "spyre: _stream_wait_value needs an int64 tensor");
	int index = current_device();
	struct spyre_mem m;
	if (sem.device().is_cpu()) {
		TORCH_CHECK_VALUE(pinned_mem(sem.const_data_ptr(), 8, index, &m),
				  "spyre: _stream_wait_value needs pinned "
				  "memory or a spyre tensor");
	} else {
		TORCH_CHECK_VALUE(sem.device().index() == index, "spyre: "
				  "_stream_wait_value on a tensor of another "
				  "card");
		m = mem_of(sem);
	}
	struct spyre_cmdbuf *cb = nullptr;
	check(spyre_cmdbuf_create(&cb), "creating a command buffer", index);
	int rc = spyre_cmdbuf_sem_wait(cb, spyre_bo_va(m.bo) + m.offset,
				       static_cast<uint64_t>(value));
	if (rc == 0)
		rc = spyre_stream_submit(cur(index), cb, &m.bo, 1);
	spyre_cmdbuf_destroy(cb);
	check(rc, "submitting a semaphore wait", index);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("pinned_stats() -> int[]", &pinned_stats);
	m.def("empty_host_cache() -> ()", [] { g_pinned->empty_cache(); });
	m.def("_stream_wait_value(Tensor sem, int value) -> ()",
	      &stream_wait_value);
}

} // namespace spyre_torch
