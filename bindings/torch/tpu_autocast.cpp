// torch.autocast("tpu"): the AutocastPrivateUse1 kernels. PyTorch publishes
// its per-policy op lists (autocast_mode.h) for other backends to reuse;
// the tpu device takes the same lists as CUDA: matmuls and convolutions in
// the autocast dtype (bfloat16 by default, set in tpuc/__init__.py),
// precision-sensitive ops in float32, mixed-input ops promoted. Every
// other op passes through.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace tpuc_torch {
namespace {

// The op lists name ATen types unqualified.
using namespace at;  // NOLINT(build/namespaces)

#define TPU_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
}

}  // namespace
}  // namespace tpuc_torch
