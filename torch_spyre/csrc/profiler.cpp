// SPDX-License-Identifier: MIT
// Per-op card time for torch.profiler: a Kineto child profiler (registered
// with libkineto's registerProfilerFactory when the library loads) whose
// session, while torch.profiler.profile(activities=[..., PrivateUse1])
// records, brackets every op that queues card work with two card
// TIMESTAMP events on the op's stream and reports the time between them as
// a device activity (Kineto's CONCURRENT_KERNEL, which PyTorch 2.6 files
// under PrivateUse1 for a renamed backend) linked to the op through the
// correlation id Kineto hands its child sessions, in host time.  The first
// TIMESTAMP is queued when the op starts: for an op the host submits slower
// than the card runs it, the span includes the card's wait for its jobs.
#define FMT_HEADER_ONLY		// kineto's headers use fmt; keep it inside us
#include "spyre_torch.h"

#include <libkineto.h>
#include <time_since_epoch.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace spyre_torch {

namespace {

constexpr int kMaxCards = 16;

int64_t host_ns()
{
	return libkineto::timeSinceEpoch(std::chrono::system_clock::now());
}

// Events made once and reused by later sessions (each is a small BO).
struct EventPool {
	std::mutex mu;
	std::vector<struct spyre_event *> free[kMaxCards];

	struct spyre_event *get(int card)
	{
		{
			std::lock_guard<std::mutex> l(mu);
			if (!free[card].empty()) {
				auto *e = free[card].back();
				free[card].pop_back();
				return e;
			}
		}
		struct spyre_event *e = nullptr;
		check(spyre_event_create(device(card), 0, &e),
		      "creating a profiler event", card);
		return e;
	}
	void put(int card, struct spyre_event *e)
	{
		std::lock_guard<std::mutex> l(mu);
		free[card].push_back(e);
	}
};

EventPool &pool()
{
	static auto *p = new EventPool();	// outlives every session
	return *p;
}

// One op's card work: between @start and @end on stream @stream_id of
// @card, queued by the op of Kineto correlation id @corr on thread @tid.
struct Span {
	uint64_t corr;
	int card;
	int64_t stream_id;
	int32_t tid;
	struct spyre_event *start, *end;
};

bool same_fence(const struct spyre_fence &a, const struct spyre_fence &b)
{
	return a.queue == b.queue && a.point == b.point;
}

struct spyre_fence fence_of(struct spyre_stream *s)
{
	struct spyre_fence f = {};
	spyre_stream_last_fence(s, &f);
	return f;
}

// An op being run on this thread, while a session records.
struct Frame {
	uint64_t corr;
	int card;				// -1: no opened card
	c10::Stream stream = c10::Stream(c10::Stream::DEFAULT,
					 c10::Device(c10::DeviceType::CPU));
	struct spyre_stream *ss = nullptr;
	struct spyre_event *start = nullptr;
	bool worked = false;		// queued card work itself
	bool child_reported = false;	// an op it called was reported
};

class Session;

// The calling thread's open ops for the session numbered @gen.
struct ThreadFrames {
	uint64_t gen = 0;
	std::vector<Frame> stack;
	// fence of this thread's last own TIMESTAMP per stream (queue)
	std::vector<std::pair<struct spyre_stream *, struct spyre_fence>> own;

	struct spyre_fence *own_fence(struct spyre_stream *s)
	{
		for (auto &p : own)
			if (p.first == s)
				return &p.second;
		own.push_back({s, {}});
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
			f.start = pool().get(f.card);
			check(spyre_event_record(f.start, f.ss),
			      "recording a profiler event", f.card);
			*tf.own_fence(f.ss) = fence_of(f.ss);
		} catch (const std::exception &e) {
			note_error(e.what());
			if (f.start)
				pool().put(f.card, f.start);
			f.start = nullptr;
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
		if (f.card < 0 || !f.start)
			return;
		note_work(tf, f);
		bool report = f.worked && !f.child_reported && !stopped_;
		if (!tf.stack.empty() && (report || f.child_reported))
			tf.stack.back().child_reported = true;
		if (!report) {
			pool().put(f.card, f.start);
			return;
		}
		struct spyre_event *end = nullptr;
		try {
			end = pool().get(f.card);
			check(spyre_event_record(end, f.ss),
			      "recording a profiler event", f.card);
			*tf.own_fence(f.ss) = fence_of(f.ss);
		} catch (const std::exception &e) {
			note_error(e.what());
			if (end)
				pool().put(f.card, end);
			pool().put(f.card, f.start);
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

	// wait for the spans' events and log one device activity per span
	// in host time (the card clock's offset measured now, per card)
	void processTrace(libkineto::ActivityLogger &logger,
			  libkineto::getLinkedActivityCallback linked,
			  int64_t, int64_t) override
	{
		std::vector<Span> spans;
		{
			std::lock_guard<std::mutex> l(mu_);
			spans.swap(spans_);
		}
		buf_ = std::make_unique<libkineto::CpuTraceBuffer>();
		buf_->span = libkineto::TraceSpan(0, 0, "spyre");
		buf_->gpuOpCount = 0;
		int64_t offset[kMaxCards];
		bool have[kMaxCards] = {};
		for (const Span &s : spans) {
			uint64_t t0 = 0, t1 = 0;
			if (spyre_event_wait(s.start, SPYRE_TIMEOUT_INFINITE) ||
			    spyre_event_wait(s.end, SPYRE_TIMEOUT_INFINITE) ||
			    spyre_event_timestamp(s.start, &t0) ||
			    spyre_event_timestamp(s.end, &t1)) {
				note_error("a card event of the trace failed");
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
			pool().put(s.card, s.start);
			pool().put(s.card, s.end);
		}
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

	// @f's stream got work since this thread's last own TIMESTAMP on it
	void note_work(ThreadFrames &tf, Frame &f)
	{
		if (f.card < 0 || !f.ss)
			return;
		if (!same_fence(fence_of(f.ss), *tf.own_fence(f.ss)))
			f.worked = true;
	}

	void note_error(const char *what)
	{
		std::lock_guard<std::mutex> l(mu_);
		if (errors_.size() < 8)
			errors_.push_back(std::string("spyre profiler: ") + what);
	}

	// host ns minus card ns, from the pair with the shortest host
	// window of three (record a TIMESTAMP, wait for it)
	int64_t clock_offset(int card)
	{
		int64_t best = 0, width = INT64_MAX;
		struct spyre_event *e = pool().get(card);
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
		pool().put(card, e);
		return best;
	}

	// events of spans never processed go back to the pool once done
	void release()
	{
		for (const Span &s : spans_) {
			spyre_event_wait(s.start, SPYRE_TIMEOUT_INFINITE);
			spyre_event_wait(s.end, SPYRE_TIMEOUT_INFINITE);
			pool().put(s.card, s.start);
			pool().put(s.card, s.end);
		}
		spans_.clear();
	}

	uint64_t gen_;
	std::atomic<bool> stopped_{false};
	std::mutex mu_;
	std::vector<Span> spans_;
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
