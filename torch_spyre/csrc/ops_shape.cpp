// SPDX-License-Identifier: MIT
// Shape ops of ATen's composite set that the backend widens: tensor_split
// with its indices (or section count) in a spyre tensor.  ATen's
// composite reads that tensor on the host and refuses any device but the
// CPU; here a card tensor is copied to the host first (one wait for the
// card), then ATen's own composite runs (views of self, autograd as
// usual).  channel_shuffle (a CPU kernel in ATen) as ATen's composite
// native_channel_shuffle: a view, a permute and a copy on the card.
#include "kernels.h"

#include <ATen/ops/native_channel_shuffle.h>
#include <ATen/ops/tensor_split_native.h>
#include <torch/library.h>

namespace spyre_torch {
namespace {

// tensor_split.tensor_indices_or_sections: registered for PrivateUse1 and
// AutogradPrivateUse1 (the composite's place for spyre tensors), so that
// it runs with or without autograd.
std::vector<at::Tensor> k_tensor_split(const at::Tensor &self,
				       const at::Tensor &indices, int64_t dim)
{
	if (indices.device().type() == c10::DeviceType::PrivateUse1) {
		count_native("aten::tensor_split.tensor_indices_or_sections");
		return at::native::tensor_split(self, indices.cpu(), dim);
	}
	return at::native::tensor_split(self, indices, dim);
}

at::Tensor k_channel_shuffle(const at::Tensor &self, c10::SymInt groups)
{
	count_native("aten::channel_shuffle");
	return at::native_channel_shuffle_symint(self, std::move(groups));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("tensor_split.tensor_indices_or_sections",
	       TORCH_FN(k_tensor_split));
	m.impl("channel_shuffle", TORCH_FN(k_channel_shuffle));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m)
{
	m.impl("tensor_split.tensor_indices_or_sections",
	       TORCH_FN(k_tensor_split));
}

} // namespace spyre_torch
