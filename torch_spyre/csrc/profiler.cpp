// SPDX-License-Identifier: MIT
// Per-op card time for torch.profiler: a Kineto child profiler (registered
// with libkineto's registerProfilerFactory when the library loads) whose
// session, while torch.profiler.profile(activities=[..., PrivateUse1])
// records, brackets every op that queues card work with two card
// TIMESTAMPs on the op's stream (spyre_stream_timestamp(): batched like
// the op's own commands, so profiling keeps the stream's batches) and
// reports the time between them as a device activity (Kineto's
// CONCURRENT_KERNEL, which PyTorch 2.6 files under PrivateUse1 for a
// renamed backend) linked to the op through the correlation id Kineto
// hands its child sessions, in host time.  The first TIMESTAMP runs when
// the card has finished what came before the op on its stream: inside one
// batch the span is the card time of the op's commands; when a flush
// falls inside the op (a full batch, a host copy), it also holds the
// card's wait for the host's next job.
#define FMT_HEADER_ONLY		// kineto's headers use fmt; keep it inside us
#include "spyre_torch.h"

#include <libkineto.h>
#include <time_since_epoch.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

namespace spyre_torch {

namespace {

constexpr int kMaxCards = 16;

int64_t host_ns()
{
	return libkineto::timeSinceEpoch(std::chrono::system_clock::now());
}

// Card-written timestamp slots: 8-byte words in mapped BOs of one card,
// handed out in order by a session and given back (after the streams that
// write them are synchronized) for later sessions.
constexpr uint64_t kStampBytes = 64 << 10;

struct StampPage {
	struct spyre_bo *bo = nullptr;
	volatile uint64_t *words = nullptr;
};

struct StampPool {
	std::mutex mu;
	std::vector<StampPage> free[kMaxCards];

	StampPage get(int card)
	{
		{
			std::lock_guard<std::mutex> l(mu);
			if (!free[card].empty()) {
				StampPage p = free[card].back();
				free[card].pop_back();
				return p;
			}
		}
		StampPage p;
		void *map = nullptr;
		check(spyre_bo_alloc(device(card), kStampBytes, 0, &p.bo),
		      "allocating profiler timestamps", card);
		int rc = spyre_bo_map(p.bo, &map);
		if (rc) {
			spyre_bo_free(p.bo);
			check(rc, "mapping profiler timestamps", card);
		}
		p.words = static_cast<volatile uint64_t *>(map);
		return p;
	}
	void put(int card, const StampPage &p)
	{
		std::lock_guard<std::mutex> l(mu);
		free[card].push_back(p);
	}
};

StampPool &stamp_pool()
{
	static auto *p = new StampPool();	// outlives every session
	return *p;
}

// Events for the clock offset, made once per card and reused.
struct spyre_event *clock_event(int card)
{
	static std::mutex mu;
	static struct spyre_event *ev[kMaxCards];
	std::lock_guard<std::mutex> l(mu);
	if (!ev[card])
		check(spyre_event_create(device(card), 0, &ev[card]),
		      "creating a profiler event", card);
	return ev[card];
}

// A timestamp slot: word @word of page @page of a session's card.
struct Stamp {
	uint32_t page = 0, word = 0;
};

// One op's card work: between stamps @start and @end on stream @stream_id
// of @card, queued by the op of Kineto correlation id @corr on thread
// @tid.
struct Span {
	uint64_t corr;
	int card;
	int64_t stream_id;
	int32_t tid;
	Stamp start, end;
};

uint64_t enqueued(struct spyre_stream *s)
{
	uint64_t n = 0;
	spyre_stream_enqueued(s, &n);
	return n;
}

// An op being run on this thread, while a session records.
struct Frame {
	uint64_t corr;
	int card;				// -1: no opened card
	c10::Stream stream = c10::Stream(c10::Stream::DEFAULT,
					 c10::Device(c10::DeviceType::CPU));
	struct spyre_stream *ss = nullptr;
	Stamp start;
	bool stamped = false;		// start is queued
	bool worked = false;		// queued card work itself
	bool child_reported = false;	// an op it called was reported
};

class Session;

// The calling thread's open ops for the session numbered @gen.
struct ThreadFrames {
	uint64_t gen = 0;
	std::vector<Frame> stack;
	// operations a stream had accepted after this thread's last own stamp
	std::vector<std::pair<struct spyre_stream *, uint64_t>> own;

	uint64_t *own_count(struct spyre_stream *s)
	{
		for (auto &p : own)
			if (p.first == s)
				return &p.second;
		own.push_back({s, UINT64_MAX});
		return &own.back().second;
	}
};

thread_local ThreadFrames t_frames;
std::atomic<uint64_t> g_gen{0};

class Session final : public libkineto::IActivityProfilerSession {
public:
	Session() : gen_(++g_gen) {}
	~Session() override { release(); }

	void start() override { status_ = libkineto::TraceStatus::RECORDING; }
	void stop() override
	{
		stopped_ = true;
		status_ = libkineto::TraceStatus::PROCESSING;
	}
	std::vector<std::string> errors() override { return errors_; }

	// an op starts on this thread: a TIMESTAMP on its card's stream
	void pushCorrelationId(uint64_t id) override
	{
		if (stopped_)
			return;
		ThreadFrames &tf = frames();
		Frame f;
		f.corr = id;
		f.card = current_device();
		if (!device_opened(f.card)) {
			f.card = -1;
			tf.stack.push_back(f);
			return;
		}
		try {
			f.stream = current_stream(f.card);
			f.ss = stream(f.stream);
			// work the enclosing op queued before this one
			if (!tf.stack.empty())
				note_work(tf, tf.stack.back());
			f.start = stamp(f.card, f.ss, 0);
			f.stamped = true;
			*tf.own_count(f.ss) = enqueued(f.ss);
		} catch (const std::exception &e) {
			note_error(e.what());
			f.card = -1;
		}
		tf.stack.push_back(f);
	}

	// the op ends: if it queued card work (and no op it called was
	// reported instead), a TIMESTAMP closes its span
	void popCorrelationId() override
	{
		ThreadFrames &tf = frames();
		if (tf.stack.empty())
			return;
		Frame f = tf.stack.back();
		tf.stack.pop_back();
		if (f.card < 0 || !f.stamped)
			return;
		note_work(tf, f);
		bool report = f.worked && !f.child_reported && !stopped_;
		if (!tf.stack.empty() && (report || f.child_reported))
			tf.stack.back().child_reported = true;
		if (!report)
			return;
		Stamp end;
		try {
			end = stamp(f.card, f.ss, SPYRE_TIMESTAMP_EAGER);
			*tf.own_count(f.ss) = enqueued(f.ss);
		} catch (const std::exception &e) {
			note_error(e.what());
			return;
		}
		std::lock_guard<std::mutex> l(mu_);
		spans_.push_back(Span{f.corr, f.card, f.stream.id(),
				      static_cast<int32_t>(
					      libkineto::systemThreadId()),
				      f.start, end});
	}

	void processTrace(libkineto::ActivityLogger &logger) override
	{
		processTrace(logger, [](int32_t) {
			return static_cast<const libkineto::ITraceActivity *>(
				nullptr);
		}, 0, 0);
	}

	// wait for the stamps and log one device activity per span in host
	// time (the card clock's offset measured now, per card)
	void processTrace(libkineto::ActivityLogger &logger,
			  libkineto::getLinkedActivityCallback linked,
			  int64_t, int64_t) override
	{
		std::vector<Span> spans;
		{
			std::lock_guard<std::mutex> l(mu_);
			spans.swap(spans_);
		}
		sync_streams();
		buf_ = std::make_unique<libkineto::CpuTraceBuffer>();
		buf_->span = libkineto::TraceSpan(0, 0, "spyre");
		buf_->gpuOpCount = 0;
		int64_t offset[kMaxCards];
		bool have[kMaxCards] = {};
		for (const Span &s : spans) {
			uint64_t t0 = word(s.card, s.start);
			uint64_t t1 = word(s.card, s.end);
			if (!t0 || t1 < t0) {
				note_error("a card timestamp of the trace is "
					   "missing (its stream failed)");
				continue;
			}
			if (!have[s.card]) {
				offset[s.card] = clock_offset(s.card);
				have[s.card] = true;
			}
			auto a = std::make_unique<libkineto::GenericTraceActivity>(
				buf_->span, libkineto::ActivityType::CONCURRENT_KERNEL,
				"spyre");
			const libkineto::ITraceActivity *op =
				linked(static_cast<int32_t>(s.corr));
			if (op)
				a->activityName = "spyre: " + op->name();
			a->startTime = static_cast<int64_t>(t0) + offset[s.card];
			a->endTime = static_cast<int64_t>(t1) + offset[s.card];
			a->id = static_cast<int32_t>(s.corr);
			a->device = s.card;
			a->resource = static_cast<int32_t>(s.stream_id);
			a->threadId = s.tid;
			a->linked = op;
			a->addMetadata("card ns", t1 - t0);
			a->addMetadata("stream", s.stream_id);
			a->log(logger);
			buf_->gpuOpCount++;
			if (!buf_->span.startTime ||
			    a->startTime < buf_->span.startTime)
				buf_->span.startTime = a->startTime;
			buf_->span.endTime = std::max(buf_->span.endTime,
						      a->endTime);
			buf_->activities.push_back(std::move(a));
		}
		release();
	}

	std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override
	{
		return nullptr;
	}
	std::vector<libkineto::ResourceInfo> getResourceInfos() override
	{
		return {};
	}
	std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override
	{
		return std::move(buf_);
	}

private:
	ThreadFrames &frames()
	{
		if (t_frames.gen != gen_) {
			t_frames.gen = gen_;
			t_frames.stack.clear();
			t_frames.own.clear();
		}
		return t_frames;
	}

	// @f's stream accepted work since this thread's last own stamp on it
	void note_work(ThreadFrames &tf, Frame &f)
	{
		if (f.card < 0 || !f.ss)
			return;
		if (enqueued(f.ss) != *tf.own_count(f.ss))
			f.worked = true;
	}

	void note_error(const char *what)
	{
		std::lock_guard<std::mutex> l(mu_);
		if (errors_.size() < 8)
			errors_.push_back(std::string("spyre profiler: ") + what);
	}

	// queue a TIMESTAMP on @s into this session's next slot of @card: a
	// start joins the batch (it runs right before the op's commands), an
	// end is EAGER (after an op that flushed, it is taken at once rather
	// than at the stream's next flush point).  The slot is reserved under
	// mu_; the queueing, which may submit, holds queueing_ shared only, so
	// threads stamping other streams do not wait for each other's ioctls.
	Stamp stamp(int card, struct spyre_stream *s, uint32_t flags)
	{
		std::shared_lock<std::shared_mutex> q(queueing_);
		Stamp st;
		StampPage p;
		{
			std::lock_guard<std::mutex> l(mu_);
			std::vector<StampPage> &pages = pages_[card];
			uint32_t &used = used_[card];
			if (pages.empty() || used == kStampBytes / 8) {
				pages.push_back(stamp_pool().get(card));
				used = 0;
			}
			st = Stamp{static_cast<uint32_t>(pages.size() - 1),
				   used++};
			p = pages.back();
			if (std::find(streams_.begin(), streams_.end(), s) ==
			    streams_.end())
				streams_.push_back(s);
		}
		p.words[st.word] = 0;
		check(spyre_stream_timestamp(s, p.bo, 8ull * st.word, flags),
		      "queueing a profiler timestamp", card);
		return st;
	}

	uint64_t word(int card, const Stamp &st)
	{
		std::lock_guard<std::mutex> l(mu_);
		return pages_[card][st.page].words[st.word];
	}

	// every stream this session stamped since the last call has run past
	// its stamps (so release() after processTrace() waits for nothing);
	// stamps being queued right now are waited for first
	void sync_streams()
	{
		std::vector<struct spyre_stream *> ss;
		{
			std::unique_lock<std::shared_mutex> q(queueing_);
			std::lock_guard<std::mutex> l(mu_);
			ss.swap(streams_);
		}
		for (auto *s : ss)
			if (spyre_stream_sync(s, SPYRE_TIMEOUT_INFINITE))
				note_error("a profiled stream failed");
	}

	// host ns minus card ns, from the pair with the shortest host
	// window of three (record a TIMESTAMP, wait for it)
	int64_t clock_offset(int card)
	{
		int64_t best = 0, width = INT64_MAX;
		struct spyre_event *e = clock_event(card);
		struct spyre_stream *s = cur(card);
		for (int i = 0; i < 3; i++) {
			int64_t h0 = host_ns();
			uint64_t c = 0;
			if (spyre_event_record(e, s) ||
			    spyre_event_wait(e, SPYRE_TIMEOUT_INFINITE) ||
			    spyre_event_timestamp(e, &c))
				break;
			int64_t h1 = host_ns();
			if (h1 - h0 < width) {
				width = h1 - h0;
				best = h0 + (h1 - h0) / 2 - static_cast<int64_t>(c);
			}
		}
		return best;
	}

	// the stamp pages go back to the pool once no queued stamp can
	// still write them
	void release()
	{
		sync_streams();
		std::lock_guard<std::mutex> l(mu_);
		for (int c = 0; c < kMaxCards; c++) {
			for (const StampPage &p : pages_[c])
				stamp_pool().put(c, p);
			pages_[c].clear();
			used_[c] = 0;
		}
		streams_.clear();
		spans_.clear();
	}

	uint64_t gen_;
	std::atomic<bool> stopped_{false};
	std::shared_mutex queueing_;	// held shared while a stamp is queued
	std::mutex mu_;
	std::vector<Span> spans_;
	std::vector<StampPage> pages_[kMaxCards];
	uint32_t used_[kMaxCards] = {};
	std::vector<struct spyre_stream *> streams_;
	std::vector<std::string> errors_;
	std::unique_ptr<libkineto::CpuTraceBuffer> buf_;
};

class Profiler final : public libkineto::IActivityProfiler {
public:
	const std::string &name() const override { return name_; }
	const std::set<libkineto::ActivityType> &availableActivities() const
		override
	{
		return types_;
	}
	std::unique_ptr<libkineto::IActivityProfilerSession>
	configure(const std::set<libkineto::ActivityType> &types,
		  const libkineto::Config &) override
	{
		if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL))
			return nullptr;
		return std::make_unique<Session>();
	}
	std::unique_ptr<libkineto::IActivityProfilerSession>
	configure(int64_t, int64_t,
		  const std::set<libkineto::ActivityType> &types,
		  const libkineto::Config &config) override
	{
		return configure(types, config);
	}

private:
	std::string name_ = "spyre";
	std::set<libkineto::ActivityType> types_ = {
		libkineto::ActivityType::CONCURRENT_KERNEL};
};

struct RegisterProfiler {
	RegisterProfiler()
	{
		libkineto::api().registerProfilerFactory(
			[] { return std::make_unique<Profiler>(); });
	}
} g_register_profiler;

} // namespace

} // namespace spyre_torch
