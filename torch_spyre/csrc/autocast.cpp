// SPDX-License-Identifier: MIT
// Autocast for the card (dispatch key AutocastPrivateUse1): CUDA's op
// policy, from the op lists ATen's autocast_mode.h names for every backend
// (matmuls and convolutions in the autocast dtype, precision-sensitive ops
// in float32, reductions with an optional dtype in float32, mixed-input
// ops promoted to the widest type), binary_cross_entropy refused as CUDA
// refuses it, and a fallthrough for every other op.  Which dtypes autocast
// accepts for "spyre" is torch.spyre.get_amp_supported_dtype()'s answer.
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace spyre_torch {

// the signatures of AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE name these
// types unqualified
using at::DimnameList;
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

namespace {

// aten::binary_cross_entropy in an autocast region: unsafe in fp16 (as on
// CUDA); the message says what to use.
at::Tensor bce_banned(const at::Tensor &, const at::Tensor &,
		      const std::optional<at::Tensor> &, int64_t)
{
	TORCH_CHECK(false, "spyre: torch.nn.functional.binary_cross_entropy "
		    "and torch.nn.BCELoss are unsafe to autocast (their "
		    "float16 gradients can overflow).  Use "
		    "binary_cross_entropy_with_logits / BCEWithLogitsLoss, "
		    "which combine the sigmoid and the loss and autocast "
		    "safely, or compute the loss outside the autocast region "
		    "in float32.");
}

} // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m)
{
#define SPYRE_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
	AT_FORALL_LOWER_PRECISION_FP(SPYRE_LOWER)
#undef SPYRE_LOWER
#define SPYRE_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
	AT_FORALL_FP32(SPYRE_FP32)
#undef SPYRE_FP32
#define SPYRE_FP32_OPT(...) \
	KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
	AT_FORALL_FP32_SET_OPT_DTYPE(SPYRE_FP32_OPT)
#undef SPYRE_FP32_OPT
	AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
		KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define SPYRE_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
	AT_FORALL_PROMOTE(SPYRE_PROMOTE)
#undef SPYRE_PROMOTE
	m.impl("aten::binary_cross_entropy", TORCH_FN(bce_banned));
}

} // namespace spyre_torch
