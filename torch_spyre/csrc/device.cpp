// SPDX-License-Identifier: MIT
// Cards, streams and events of the spyre backend: the lazily opened
// libspyre device per card, the per-thread current device and stream, the
// DeviceGuardImplInterface PyTorch uses for torch.Stream / torch.Event /
// torch.accelerator, the PrivateUse1HooksInterface, the error mapping to
// Python exceptions, the fork() check and the card's properties
// (torch.spyre.get_device_properties).
#include "spyre_torch.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <pthread.h>
#include <unistd.h>

namespace spyre_torch {

namespace {

constexpr int kMaxCards = 16;
// Streams handed out by torch.Stream() per card and priority class: every
// spyre stream is a hardware queue of the card, so they are pooled (as
// CUDA pools its streams) instead of created per torch.Stream object.
constexpr int kPoolSize = 4;

struct Card {
	std::mutex mu;
	struct spyre_device *dev = nullptr;
	// streams[0] is the default stream; the rest are pooled streams, in
	// creation order (stream id = index).
	std::vector<struct spyre_stream *> streams;
	int next_normal = 0, next_high = 0;
	std::vector<int> normal_ids, high_ids;
};

std::mutex g_mu;
Card g_cards[kMaxCards];
int g_count = -1;		// discovery result, read once
pid_t g_owner = 0;		// process that opened a card first
bool g_forked = false;

thread_local int t_device = 0;
thread_local int64_t t_stream[kMaxCards];	// current stream id per card

void on_fork_child() { if (g_owner) g_forked = true; }

// Commands per submitted job on every stream of the backend
// (spyre_stream_set_batch()): SPYRE_TORCH_BATCH, default 256, 0 turns
// batching off (one job per op, submitted before the op returns);
// torch.ops.spyre._set_batch changes it at run time.
constexpr unsigned int kDefaultBatch = 256;

unsigned int env_batch()
{
	const char *e = getenv("SPYRE_TORCH_BATCH");
	if (!e || !*e)
		return kDefaultBatch;
	char *end = nullptr;
	unsigned long v = strtoul(e, &end, 10);
	if (*end || v > SPYRE_STREAM_BATCH_MAX)
		return kDefaultBatch;
	return static_cast<unsigned int>(v);
}

std::atomic<unsigned int> g_batch{env_batch()};

// A new stream of card @index with the backend's batching; destroys it
// and throws on failure.
void setup_stream(struct spyre_stream *s, int index)
{
	int rc = spyre_stream_set_batch(s, g_batch.load());
	if (rc < 0)
		spyre_stream_destroy(s);
	check(rc, "setting up a stream", index);
}

std::string where(int dev)
{
	return dev >= 0 ? "spyre:" + std::to_string(dev) + ": " : "spyre: ";
}

void check_index(int index)
{
	int n = device_count();
	TORCH_CHECK_INDEX(index >= 0 && index < n, "spyre: device ", index,
			  " does not exist (", n, " card(s) visible)");
}

} // namespace

void check_not_forked()
{
	TORCH_CHECK(!g_forked,
		    "spyre: cannot use the card in a fork() child of the "
		    "process that opened it (the card context belongs to the "
		    "parent); start worker processes with the 'spawn' method");
}

void check(int rc, const char *what, int dev)
{
	if (rc >= 0)
		return;
	if (rc == -ENOMEM)
		TORCH_CHECK_WITH(OutOfMemoryError, false, where(dev), what,
				 ": out of device memory (", spyre_strerror(rc),
				 ")");
	if (rc == -EDQUOT)
		TORCH_CHECK_WITH(OutOfMemoryError, false, where(dev), what,
				 ": the driver's per-file device-memory cap is "
				 "reached (", spyre_strerror(rc), ")");
	if (rc == -ECHILD)
		check_not_forked();
	if (rc == -ECANCELED || rc == -EFAULT || rc == -EIO) {
		int err = 0;
		if (dev >= 0 && device_opened(dev))
			err = spyre_device_error(g_cards[dev].dev);
		TORCH_CHECK(false, where(dev), what, " failed: ",
			    spyre_strerror(rc), "; the card context is in "
			    "error", err ? std::string(" (first error: ") +
			    spyre_strerror(err) + ")" : std::string(),
			    " and stays so for this process");
	}
	TORCH_CHECK(false, where(dev), what, " failed: ", spyre_strerror(rc),
		    " (errno ", -rc, ")");
}

int device_count() noexcept
{
	std::lock_guard<std::mutex> l(g_mu);
	if (g_count < 0) {
		int n = spyre_device_count();
		g_count = n < 0 ? 0 : (n > kMaxCards ? kMaxCards : n);
	}
	return g_count;
}

bool device_opened(int index) noexcept
{
	return index >= 0 && index < kMaxCards && g_cards[index].dev;
}

struct spyre_device *device(int index)
{
	check_not_forked();
	check_index(index);
	Card &c = g_cards[index];
	std::lock_guard<std::mutex> l(c.mu);
	if (!c.dev) {
		struct spyre_device *d = nullptr;
		struct spyre_stream *s = nullptr;
		check(spyre_device_open(index, &d), "opening the card", index);
		int rc = spyre_stream_create(d, SPYRE_PRIORITY_NORMAL, &s);
		if (rc < 0) {
			spyre_device_close(d);
			check(rc, "creating the default stream", index);
		}
		rc = spyre_stream_set_batch(s, g_batch.load());
		if (rc < 0) {
			spyre_stream_destroy(s);
			spyre_device_close(d);
			check(rc, "setting up the default stream", index);
		}
		c.streams.push_back(s);
		{
			std::lock_guard<std::mutex> g(g_mu);
			if (!g_owner) {
				g_owner = getpid();
				pthread_atfork(nullptr, nullptr, on_fork_child);
			}
		}
		c.dev = d;
	}
	return c.dev;
}

int current_device() noexcept { return t_device; }

void set_current_device(int index)
{
	check_index(index);
	t_device = index;
}

struct spyre_stream *stream(const c10::Stream &s)
{
	int index = s.device_index();
	device(index);
	Card &c = g_cards[index];
	std::lock_guard<std::mutex> l(c.mu);
	auto id = static_cast<size_t>(s.id());
	TORCH_CHECK(id < c.streams.size(), where(index), "unknown stream ",
		    s.id());
	return c.streams[id];
}

c10::Stream current_stream(int index)
{
	check_index(index);
	return c10::Stream(c10::Stream::UNSAFE,
			   c10::Device(c10::DeviceType::PrivateUse1, index),
			   t_stream[index]);
}

c10::Stream exchange_stream(const c10::Stream &s)
{
	c10::Stream old = current_stream(s.device_index());	// checks index
	t_stream[s.device_index()] = s.id();
	return old;
}

c10::Stream new_stream(int index, int priority)
{
	device(index);
	Card &c = g_cards[index];
	std::lock_guard<std::mutex> l(c.mu);
	bool high = priority < 0;
	std::vector<int> &ids = high ? c.high_ids : c.normal_ids;
	int &next = high ? c.next_high : c.next_normal;
	if (ids.size() < kPoolSize) {
		struct spyre_stream *s = nullptr;
		int rc = spyre_stream_create(c.dev, high ? SPYRE_PRIORITY_HIGH :
					     SPYRE_PRIORITY_NORMAL, &s);
		TORCH_CHECK(!(high && rc == -EACCES), where(index),
			    "a high-priority stream (priority < 0) needs the "
			    "CAP_SYS_NICE capability, which this process "
			    "lacks; ask for priority 0 instead");
		check(rc, "creating a stream", index);
		setup_stream(s, index);
		c.streams.push_back(s);
		ids.push_back(static_cast<int>(c.streams.size() - 1));
	}
	int id = ids[next++ % ids.size()];
	return c10::Stream(c10::Stream::UNSAFE,
			   c10::Device(c10::DeviceType::PrivateUse1, index), id);
}

struct spyre_stream *cur(int index)
{
	// every op asks: one lock when the card is open (the checks of
	// device() and current_stream() were passed when it was opened)
	if (index >= 0 && index < kMaxCards && !g_forked) {
		Card &c = g_cards[index];
		auto id = static_cast<size_t>(t_stream[index]);
		std::lock_guard<std::mutex> l(c.mu);
		if (c.dev && id < c.streams.size())
			return c.streams[id];
	}
	return stream(current_stream(index));
}

void synchronize_device(int index)
{
	if (!device_opened(index))
		return;
	Card &c = g_cards[index];
	std::vector<struct spyre_stream *> all;
	{
		std::lock_guard<std::mutex> l(c.mu);
		all = c.streams;
	}
	for (auto *s : all)
		check(spyre_stream_sync(s, SPYRE_TIMEOUT_INFINITE),
		      "synchronizing", index);
}

namespace {

// ---- DeviceGuardImplInterface ------------------------------------------------

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
	c10::DeviceType type() const override
	{
		return c10::DeviceType::PrivateUse1;
	}
	c10::Device exchangeDevice(c10::Device d) const override
	{
		c10::Device old = getDevice();
		if (d.index() >= 0 && d.index() != old.index())
			setDevice(d);
		return old;
	}
	c10::Device getDevice() const override
	{
		return c10::Device(c10::DeviceType::PrivateUse1,
				   static_cast<c10::DeviceIndex>(t_device));
	}
	void setDevice(c10::Device d) const override
	{
		set_current_device(d.index());
	}
	void uncheckedSetDevice(c10::Device d) const noexcept override
	{
		if (d.index() >= 0)
			t_device = d.index();
	}
	c10::Stream getStream(c10::Device d) const noexcept override
	{
		int i = d.index() < 0 ? t_device : d.index();
		return c10::Stream(c10::Stream::UNSAFE,
				   c10::Device(c10::DeviceType::PrivateUse1,
					       static_cast<c10::DeviceIndex>(i)),
				   i < kMaxCards ? t_stream[i] : 0);
	}
	c10::Stream getDefaultStream(c10::Device d) const override
	{
		int i = d.index() < 0 ? t_device : d.index();
		check_index(i);
		return c10::Stream(c10::Stream::UNSAFE,
				   c10::Device(c10::DeviceType::PrivateUse1,
					       static_cast<c10::DeviceIndex>(i)),
				   0);
	}
	c10::Stream getStreamFromGlobalPool(c10::Device d,
					    bool high) const override
	{
		return new_stream(d.index() < 0 ? t_device : d.index(),
				  high ? -1 : 0);
	}
	c10::Stream getNewStream(c10::Device d, int priority) const override
	{
		return new_stream(d.index() < 0 ? t_device : d.index(),
				  priority);
	}
	c10::Stream exchangeStream(c10::Stream s) const noexcept override
	{
		c10::Stream old = getStream(s.device());
		// a stream of a card that does not exist is not current anywhere
		// (stream() refuses it when it is used)
		if (s.device_index() >= 0 && s.device_index() < kMaxCards)
			t_stream[s.device_index()] = s.id();
		return old;
	}
	void destroyEvent(void *event, const c10::DeviceIndex) const
		noexcept override
	{
		spyre_event_destroy(static_cast<struct spyre_event *>(event));
	}
	// Events always keep timestamps: a record is one TIMESTAMP job
	// either way, so elapsed_time() works whatever the flag says.
	void record(void **event, const c10::Stream &s,
		    const c10::DeviceIndex index,
		    const c10::EventFlag) const override
	{
		TORCH_CHECK(index == -1 || index == s.device_index(),
			    "spyre: event of device ", (int)index,
			    " recorded on a stream of device ",
			    (int)s.device_index());
		struct spyre_stream *ss = stream(s);
		if (!*event) {
			struct spyre_event *e = nullptr;
			check(spyre_event_create(device(s.device_index()), 0, &e),
			      "creating an event", s.device_index());
			*event = e;
		}
		check(spyre_event_record(static_cast<struct spyre_event *>(*event),
					 ss), "recording an event",
		      s.device_index());
	}
	void block(void *event, const c10::Stream &s) const override
	{
		if (!event)
			return;
		check(spyre_stream_wait_event(stream(s),
				static_cast<struct spyre_event *>(event)),
		      "making a stream wait for an event", s.device_index());
	}
	bool queryEvent(void *event) const override
	{
		if (!event)
			return true;
		int rc = spyre_event_query(static_cast<struct spyre_event *>(event));
		if (rc == -EBUSY)
			return false;
		check(rc, "querying an event");
		return true;
	}
	c10::DeviceIndex deviceCount() const noexcept override
	{
		return static_cast<c10::DeviceIndex>(device_count());
	}
	bool queryStream(const c10::Stream &s) const override
	{
		int rc = spyre_stream_query(stream(s));
		if (rc == -EBUSY)
			return false;
		check(rc, "querying a stream", s.device_index());
		return true;
	}
	void synchronizeStream(const c10::Stream &s) const override
	{
		check(spyre_stream_sync(stream(s), SPYRE_TIMEOUT_INFINITE),
		      "synchronizing a stream", s.device_index());
	}
	void synchronizeEvent(void *event) const override
	{
		if (!event)
			return;
		check(spyre_event_wait(static_cast<struct spyre_event *>(event),
				       SPYRE_TIMEOUT_INFINITE),
		      "waiting for an event");
	}
	void synchronizeDevice(const c10::DeviceIndex index) const override
	{
		synchronize_device(index < 0 ? t_device : index);
	}
	void recordDataPtrOnStream(const c10::DataPtr &p,
				   const c10::Stream &s) const override
	{
		record_stream(p, stream(s));
	}
	double elapsedTime(void *e1, void *e2,
			   const c10::DeviceIndex index) const override
	{
		TORCH_CHECK(e1 && e2, "spyre: elapsed_time() needs two "
			    "recorded events");
		int64_t ns = 0;
		check(spyre_event_elapsed_ns(static_cast<struct spyre_event *>(e1),
					     static_cast<struct spyre_event *>(e2),
					     &ns),
		      "reading the events' timestamps (both recorded and "
		      "complete?)", index);
		return static_cast<double>(ns) / 1e6;
	}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

// ---- PrivateUse1HooksInterface ----------------------------------------------

struct Hooks final : public at::PrivateUse1HooksInterface {
	bool hasPrimaryContext(c10::DeviceIndex index) const override
	{
		return device_opened(index);
	}
	c10::DeviceIndex deviceCount() const override
	{
		return static_cast<c10::DeviceIndex>(device_count());
	}
	void setCurrentDevice(c10::DeviceIndex index) const override
	{
		set_current_device(index);
	}
	c10::DeviceIndex getCurrentDevice() const override
	{
		return static_cast<c10::DeviceIndex>(t_device);
	}
	c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override
	{
		int old = t_device;
		set_current_device(index);
		return static_cast<c10::DeviceIndex>(old);
	}
	c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override
	{
		return exchangeDevice(index);
	}
	// The card's own default generator (generator.cpp).
	const at::Generator &getDefaultGenerator(c10::DeviceIndex index)
		const override
	{
		return default_generator(index);
	}
	// pinned host memory: pinned.cpp's caching host allocator
	bool isPinnedPtr(const void *p) const override
	{
		return is_pinned_ptr(p);
	}
	at::Allocator *getPinnedMemoryAllocator() const override
	{
		return pinned_allocator();
	}
	// the card that owns the storage address (allocator.cpp's tag)
	at::Device getDeviceFromPtr(void *p) const override
	{
		int card = card_of_ptr(p);
		TORCH_CHECK(card >= 0, "spyre: ", p, " is not the address of a "
			    "spyre storage");
		return at::Device(c10::DeviceType::PrivateUse1,
				  static_cast<c10::DeviceIndex>(card));
	}
	void resizePrivateUse1Bytes(const c10::Storage &storage,
				    size_t newsize) const override;
};

Hooks g_hooks;

struct RegisterHooks {
	RegisterHooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); }
} g_register_hooks;

// storage.resize_(): a new block on the storage's card (whatever the
// current card is), the old bytes copied over on that card's current
// stream.
void Hooks::resizePrivateUse1Bytes(const c10::Storage &storage,
				   size_t newsize) const
{
	c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
	size_t n = std::min(impl->nbytes(), newsize);
	int index = impl->device().index();
	c10::DeviceGuard guard(impl->device());
	at::DataPtr fresh = allocator()->allocate(newsize);
	if (n) {
		struct spyre_mem s = block_mem(impl->data_ptr());
		struct spyre_mem d = block_mem(fresh);
		check(spyre_stream_copy(cur(index), d.bo, d.offset, s.bo,
					s.offset, n), "resizing a storage",
		      index);
	}
	impl->set_data_ptr_noswap(std::move(fresh));
	impl->set_nbytes(newsize);
}

// torch.ops.spyre.device_properties(device): the properties of card
// @device (-1: the current one; opens it) as (integer names, their values,
// string names, their values): CUDA's fields where they apply (name,
// total_memory, multi_processor_count = cores, pci_bus_id,
// pci_device_id, pci_domain_id) and the card's own (queues, contexts,
// hardware, driver and library versions, VA range, largest command).
// IndexError for a card that does not exist, RuntimeError when it cannot
// be opened.
std::tuple<std::vector<std::string>, std::vector<int64_t>,
	   std::vector<std::string>, std::vector<std::string>>
device_properties(int64_t d)
{
	int i = d < 0 ? t_device : static_cast<int>(d);
	struct spyre_device_info info;
	check(spyre_device_get_info(device(i), &info), "reading the card's "
	      "properties", i);
	struct spyre_memory_info mi;
	check(spyre_device_memory_info(device(i), &mi), "reading memory use",
	      i);
	std::vector<std::string> ik = {
		"total_memory", "multi_processor_count", "cores", "queues",
		"contexts", "hw_version", "pci_domain_id", "pci_bus_id",
		"pci_device_id", "pci_vendor_id", "pci_device", "driver_major",
		"driver_minor", "driver_patch", "va_start", "va_end",
		"max_cmd_size", "caps"};
	std::vector<int64_t> iv = {
		static_cast<int64_t>(mi.devmem_total), info.num_cores,
		info.num_cores, info.num_queues, info.num_contexts,
		info.hw_version, info.pci_domain, info.pci_bus,
		info.pci_devfn >> 3, info.desc.vendor_id, info.desc.device_id,
		info.driver_major, info.driver_minor, info.driver_patch,
		static_cast<int64_t>(info.va_start),
		static_cast<int64_t>(info.va_end), info.max_cmd_size,
		static_cast<int64_t>(info.caps)};
	char hw[32];
	std::snprintf(hw, sizeof(hw), "%u.%u", info.hw_version >> 16,
		      info.hw_version & 0xffff);
	std::string driver = std::string(info.driver_name) + " " +
		std::to_string(info.driver_major) + "." +
		std::to_string(info.driver_minor) + "." +
		std::to_string(info.driver_patch);
	std::vector<std::string> sk = {"name", "pci_address", "devnode",
				       "driver_version", "library_version",
				       "hw_version_str"};
	std::vector<std::string> sv = {
		std::string("IBM Spyre (emulated, hw ") + hw + ")",
		info.desc.pci_addr, info.desc.devnode, driver, spyre_version(),
		hw};
	return {ik, iv, sk, sv};
}

// Set the commands per job of every stream, open or future, of every card
// (0: no batching); flushes what the streams hold.  Returns the old value.
int64_t set_batch(int64_t n)
{
	TORCH_CHECK_VALUE(n >= 0 && n <= SPYRE_STREAM_BATCH_MAX,
			  "spyre: a batch of ", n, " commands (0 to ",
			  SPYRE_STREAM_BATCH_MAX, ")");
	unsigned int old = g_batch.exchange(static_cast<unsigned int>(n));
	for (int i = 0; i < kMaxCards; i++) {
		if (!device_opened(i))
			continue;
		std::vector<struct spyre_stream *> all;
		{
			std::lock_guard<std::mutex> l(g_cards[i].mu);
			all = g_cards[i].streams;
		}
		for (auto *s : all) {
			int rc = spyre_stream_set_batch(
				s, static_cast<unsigned int>(n));
			// a stream in error keeps its error for its own ops
			if (rc < 0 && rc != spyre_stream_error(s))
				check(rc, "setting the stream batch", i);
		}
	}
	return old;
}

// Test hook: the fence point of the last job of card @index's current
// stream, its batch flushed first: how many jobs its queue has taken.
int64_t stream_jobs(int64_t index)
{
	int i = static_cast<int>(index);
	struct spyre_fence f = {};
	check(spyre_stream_last_fence(cur(i), &f), "reading the stream", i);
	return static_cast<int64_t>(f.point);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("device_properties(int device) -> (str[], int[], str[], str[])",
	      &device_properties);
	m.def("_set_batch(int n) -> int", &set_batch);
	m.def("_stream_jobs(int device) -> int", &stream_jobs);
}

} // namespace spyre_torch
