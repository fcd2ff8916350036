# SPDX-License-Identifier: MIT
"""``torch.spyre.amp``: gradient scaling for mixed-precision training on the
card (autocast itself is ``torch.autocast("spyre", ...)``).

:class:`GradScaler` is ``torch.amp.GradScaler`` for the ``spyre`` device.
PyTorch 2.6's ``torch.amp.GradScaler.unscale_`` takes the reciprocal of the
scale in float64 on the scale's device (``scale.double().reciprocal()
.float()``); the card holds no float64 tensors (as MPS, which 2.6's
GradScaler does not handle either), so ``torch.amp.GradScaler("spyre")``
raises ``TypeError`` at its first ``step()``/``unscale_()``.  This subclass
overrides ``unscale_`` only: it takes the reciprocal in float32 on the card
and otherwise runs PyTorch's own code (the per-optimizer state machine,
``_unscale_grads_``, ``step``, ``update``, ``state_dict``), so nothing in
PyTorch is patched.  The card kernels it ends in are
``_amp_foreach_non_finite_check_and_unscale_`` and ``_amp_update_scale_``
(libtorch_spyre's amp.cpp).  With the default scales (powers of two)
float32 and float64 reciprocals are the same number; for another scale
they can differ in the last bit of float32.
"""

import torch
from torch.amp.grad_scaler import OptState

__all__ = ["GradScaler"]


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler`` on the card: same arguments and methods, the
    device defaults to ``"spyre"``, and ``unscale_`` needs no float64."""

    def __init__(self, device="spyre", init_scale=2.0 ** 16,
                 growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__(device, init_scale=init_scale,
                         growth_factor=growth_factor,
                         backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale, in place on the
        card, and record per device whether one of them held inf or NaN.
        RuntimeError when called twice before ``update()`` or after
        ``step()``, as ``torch.amp.GradScaler.unscale_``."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this "
                               "optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.reciprocal()          # float32, on the card
        found_inf = torch.zeros((), dtype=torch.float32,
                                device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(
            optimizer, inv_scale, found_inf, False)
        state["stage"] = OptState.UNSCALED
