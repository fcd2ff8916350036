// SPDX-License-Identifier: MIT
// Shared declarations of the spyre PyTorch backend (libtorch_spyre.so): the
// per-card state (lazily opened libspyre device, its streams), the error
// mapping from libspyre's negative errno to Python exceptions, the caching
// allocator's entry points, operand helpers for the native kernels and the
// op counters.  Everything here sits on libspyre's public API
// (<spyre/spyre.h>) and PyTorch's public extension points.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include <spyre/spyre.h>
}

namespace spyre_torch {

// ---- errors ---------------------------------------------------------------

// Throw the Python exception that fits libspyre error @rc (< 0) raised while
// doing @what on card @dev (-1: none): torch.OutOfMemoryError for -ENOMEM /
// -EDQUOT, RuntimeError otherwise, with spyre_strerror()'s text.  Returns
// normally when @rc >= 0.
void check(int rc, const char *what, int dev = -1);

// Raise RuntimeError if this process is a fork() child of the process that
// first used the card (a child must start with the spawn method).
void check_not_forked();

// ---- devices and streams ----------------------------------------------------

// Number of visible cards (discovery through sysfs; opens nothing).  Never
// throws: a discovery error counts as 0 cards.
int device_count() noexcept;

// The opened libspyre device of card @index (opened, with its default
// stream, on first use).  Throws IndexError-like c10::Error for a card that
// does not exist and RuntimeError when it cannot be opened.
struct spyre_device *device(int index);

// Whether card @index has been opened by this process.
bool device_opened(int index) noexcept;

// The card index the calling thread works on (torch.spyre.set_device()).
int current_device() noexcept;
void set_current_device(int index);

// The libspyre stream behind PyTorch stream @s (id 0: the card's default
// stream; others from new_stream()).
struct spyre_stream *stream(const c10::Stream &s);

// The calling thread's current PyTorch stream on card @index.
c10::Stream current_stream(int index);
// Make @s the calling thread's current stream on its card; returns the old.
c10::Stream exchange_stream(const c10::Stream &s);
// A new stream on card @index (priority < 0: high, else normal).
c10::Stream new_stream(int index, int priority);
// Wait for all streams of card @index.
void synchronize_device(int index);

// Shorthand: the current libspyre stream of card @index.
struct spyre_stream *cur(int index);

// ---- memory -----------------------------------------------------------------

// The caching allocator over device-memory BOs (one per process).
c10::Allocator *allocator();

// Where a spyre tensor's first element lives: its BO and byte offset.
struct spyre_mem mem_of(const at::Tensor &t);
// Tensor.record_stream(): the block behind @p is also used on @s, so when
// it is freed its own stream first waits for @s's work queued so far.
void record_stream(const c10::DataPtr &p, struct spyre_stream *s);
// The card whose storage address (a DataPtr's data of allocator()) @p is:
// its tag, not the current card; -1 for an address without a card's tag.
int card_of_ptr(const void *p);
// The BO (offset 0) behind a DataPtr made by allocator().
struct spyre_mem block_mem(const c10::DataPtr &p);

// Allocator statistics of card @index in bytes: allocated (held by live
// tensors), peak of allocated since the last reset, reserved (allocated
// plus cached BOs).
struct MemStats {
	int64_t allocated, peak, reserved;
};
MemStats mem_stats(int index);
void reset_peak(int index);
// Free every cached (unused) BO of every opened card.
void empty_cache();

// ---- pinned host memory (pinned.cpp) ------------------------------------------

// The caching allocator of pinned host memory (CPU storages registered with
// the cards): what PyTorch's pin_memory() and empty(pin_memory=True) use
// through the PrivateUse1 hooks.  Blocks are powers of two, page aligned,
// registered with the allocating thread's current card at once (and with
// another card on first use there), and reused only after the card work
// recorded on them (pinned_record_use()) completed.  Pinning refused by
// RLIMIT_MEMLOCK raises RuntimeError naming the limit (nothing allocated).
c10::Allocator *pinned_allocator();

// Whether host address @p lies in a pinned block (PrivateUse1 hooks'
// isPinnedPtr).  Never throws.
bool is_pinned_ptr(const void *p);

// If [@p, @p + @nbytes) lies in one pinned block: set @out to its BO on
// card @index (registering the block with that card on first use; may
// throw as pinned_allocator() does) and @p's offset in it; return true.
// False when the range is not pinned memory.
bool pinned_mem(const void *p, uint64_t nbytes, int index,
		struct spyre_mem *out);

// Host tensor @host's pinned block is used by work queued on @s so far:
// when the tensor is freed the block waits for that work before reuse.
// Does nothing for a tensor that is not pinned.
void pinned_record_use(const at::Tensor &host, const c10::Stream &s);

// The copy between pinned host memory and a card, if it applies: @dst and
// @src one a contiguous CPU tensor in pinned memory and the other a
// contiguous spyre tensor, same dtype and sizes.  Host -> card only with
// @non_blocking (the staged copy of copy_() is as cheap and leaves @src
// free at once); card -> host with or without it.  The card reads or
// writes the pinned pages in place, in order on the current stream;
// with @non_blocking nothing waits (the host sees a card -> host copy
// once that stream's later sync or event says so), without it the host
// waits for the stream.  Returns false (nothing done) when it does not
// apply.
bool copy_pinned(const at::Tensor &dst, const at::Tensor &src,
		 bool non_blocking);

// ---- random numbers (generator.cpp) -----------------------------------------

// A counter range of the card's Philox generator: a random op draws the
// 32-bit Philox outputs at counters [offset, offset + values rounded up to
// 4) of key @seed.
struct PhiloxState {
	uint64_t seed, offset;
};

// The default generator of card @index (-1: the current card), made on
// first use, seeded 67280421310721 like CUDA's; owned by the backend for
// the process's life.  IndexError for a card that does not exist.
const at::Generator &default_generator(int index);

// The generator a random op on card @index uses: @gen when given (it must
// be a spyre generator, else RuntimeError naming its device), else the
// card's default generator.
at::Generator spyre_generator(const std::optional<at::Generator> &gen,
			      int index);

// Take the next range for @values outputs from spyre generator @gen (under
// its mutex): returns the seed and the offset to start at and advances the
// offset by @values rounded up to a multiple of 4 (at least 4), as CUDA's
// philox_cuda_state does.  The card's random kernels start from this.
PhiloxState philox_reserve(const at::Generator &gen, uint64_t values);

// A new CPU generator whose stream is a function of @p alone: the
// stand-in the CPU path of random ops draws from until card kernels exist.
at::Generator cpu_stand_in(const PhiloxState &p);

// Called by the boxed CPU fallback before it runs @op: if the op's schema
// takes a Generator, replace the argument on @stack by cpu_stand_in() of a
// range reserved from the spyre generator it names (or the default
// generator of the card of the op's first spyre tensor, else the current
// card) for as many values as its largest tensor argument holds.  A
// generator of another device raises RuntimeError (nothing reserved).
void seed_random_op(const c10::OperatorHandle &op, torch::jit::Stack *stack);

// ---- tensors and op bookkeeping ---------------------------------------------

// The SPYRE_DTYPE_* of @t, or 0 when the card has no such dtype.
uint32_t spyre_dtype(at::ScalarType t);

// Count one native (on the card) call of @op, e.g. "aten::mm".
void count_native(const char *op);

// Count one CPU fallback call of @op (e.g. "aten::convolution_overrideable")
// for a kernel that runs its op on the CPU by hand rather than through the
// boxed fallback (an op the CPU has no kernel of under the same name); warns
// once per op.  Raises RuntimeError in strict mode.
void count_fallback(const std::string &op);

// An empty contiguous spyre tensor like @t's device with @sizes and @dtype.
at::Tensor empty_on(const at::Tensor &like, at::IntArrayRef sizes,
		    at::ScalarType dtype);

// Copy @src into @dst, both on one card, any shapes that broadcast-match
// (same numel, same sizes): same dtype or the card's floats by strided 2-D
// COPY commands, other conversions by cast_on_card().  Returns false
// (nothing done) when the card cannot do it (a dtype it does not hold,
// too many commands).
bool copy_on_card(const at::Tensor &dst, const at::Tensor &src);

// Copy @src into @dst (same card, same sizes: @src may be a broadcast view)
// converting between any two card dtypes (integers and bool included) with
// PyTorch's rules, by a generated kernel.  Returns false (nothing done) for
// a dtype the card does not hold.
bool cast_on_card(const at::Tensor &dst, const at::Tensor &src);

} // namespace spyre_torch
