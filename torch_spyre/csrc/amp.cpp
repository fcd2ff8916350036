// SPDX-License-Identifier: MIT
// Gradient scaling on the card (torch.amp.GradScaler's two ops for the
// PrivateUse1 key): _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_, composed of the card's generated kernels (no host
// wait, no CPU fallback).  torch_spyre/amp.py holds the GradScaler that
// calls them without PyTorch 2.6's float64 reciprocal.
#include "spyre_torch.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

namespace spyre_torch {

namespace {

// CUDA's argument rules: @t a one-element float32 tensor on the card @dev.
void check_scalar(const at::Tensor &t, const char *name, c10::Device dev)
{
	TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
	TORCH_CHECK(t.scalar_type() == at::kFloat, name,
		    " must be a float tensor.");
	TORCH_CHECK(t.device() == dev, name, " must be on ", dev, ", got ",
		    t.device());
}

// _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale):
// every tensor of @grads (floating point, on @found_inf's card) is
// multiplied in place by @inv_scale (one float32 element) in the
// tensor's opmath (half types in float32, rounded once), and @found_inf
// (one float32 element) is set to 1.0 if any element of any of them was
// inf or NaN before (left as is otherwise), as CUDA's kernel does.
void k_unscale(at::TensorList grads, at::Tensor &found_inf,
	       const at::Tensor &inv_scale)
{
	c10::Device dev = found_inf.device();
	check_scalar(inv_scale, "inv_scale", dev);
	check_scalar(found_inf, "found_inf", dev);
	count_native("aten::_amp_foreach_non_finite_check_and_unscale_");
	c10::DeviceGuard g(dev);
	for (const at::Tensor &t : grads) {
		TORCH_CHECK(t.device() == dev, "scaled_grads must be on ", dev,
			    ", got ", t.device());
		TORCH_CHECK(t.is_floating_point(), "scaled_grads must be "
			    "floating point, got ", t.scalar_type());
		if (!t.numel())
			continue;
		at::Tensor bad = at::logical_or(at::isnan(t), at::isinf(t))
					 .any();
		found_inf.masked_fill_(bad, 1.0);
		at::Tensor m = t;
		m.mul_(inv_scale);
	}
}

// _amp_update_scale_(scale, growth_tracker, found_inf, growth, backoff,
// interval): CUDA's rule, on the card: if @found_inf (float32, one
// element) is nonzero, scale *= backoff and the tracker restarts at 0;
// else the tracker counts one more successful step and, when it reaches
// @interval, scale *= growth (kept only if finite) and the tracker
// restarts.  @scale: one float32 element; @growth_tracker: one int32
// element.  Returns @scale.  The factors are applied in float32 (CUDA
// multiplies in double then rounds: equal for powers of two, the
// defaults).
at::Tensor &k_update_scale(at::Tensor &scale, at::Tensor &growth_tracker,
			   const at::Tensor &found_inf, double growth,
			   double backoff, int64_t interval)
{
	c10::Device dev = scale.device();
	check_scalar(scale, "current_scale", dev);
	check_scalar(found_inf, "found_inf", dev);
	TORCH_CHECK(growth_tracker.numel() == 1 &&
		    growth_tracker.scalar_type() == at::kInt &&
		    growth_tracker.device() == dev, "growth_tracker must be a "
		    "1-element int32 tensor on ", dev);
	count_native("aten::_amp_update_scale_");
	c10::DeviceGuard g(dev);
	at::Tensor inf = found_inf.ne(0);
	at::Tensor steps = at::where(inf, at::zeros_like(growth_tracker),
				     growth_tracker.add(1));
	at::Tensor grow = steps.ge(interval);
	at::Tensor grown = scale.mul(growth);
	at::Tensor grow_ok = at::logical_and(grow, at::isfinite(grown));
	at::Tensor next = at::where(inf, scale.mul(backoff),
				    at::where(grow_ok, grown, scale));
	growth_tracker.copy_(at::where(grow, at::zeros_like(steps), steps));
	scale.copy_(next);
	return scale;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_amp_foreach_non_finite_check_and_unscale_",
	       TORCH_FN(k_unscale));
	m.impl("_amp_update_scale_", TORCH_FN(k_update_scale));
}

} // namespace spyre_torch
