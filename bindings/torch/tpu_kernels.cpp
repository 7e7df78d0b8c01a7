// ATen kernels the tpu device must provide itself (allocation, views,
// copies, resize, scalar reads), and the boxed CPU fallback for every other
// op. Copies and views are carried out by the C runtime (tpuc/storage.h);
// the fallback's policy and counts live in C (tpuc/fallback.h).
#include <ATen/CPUFunctions.h>
#include <ATen/EmptyTensor.h>
#include <ATen/NativeFunctions.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "tpu_runtime.h"

namespace tpuc_torch {

namespace {

constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout,
                   std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "tpu tensors are strided; layout ", *layout, " is not supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "pin_memory is for CPU tensors only");
}

at::Tensor empty_memory_format(c10::IntArrayRef size,
                               std::optional<at::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> format) {
  check_options(layout, pin_memory);
  auto dev = c10::device_or_default(device);
  to_tpuc_dtype(c10::dtype_or_default(dtype));
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, c10::GetAllocator(dev.type()),
                                   kTpuKeys, c10::dtype_or_default(dtype),
                                   format);
}

// PyTorch's backward formulas make their zero gradients (sgn's, round's)
// with _efficientzerotensor: a tpu storage never written reads as zeros, so
// an empty tensor is one, with no device work and no host copy.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size,
                                 std::optional<at::ScalarType> dtype,
                                 std::optional<c10::Layout> layout,
                                 std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory) {
  return empty_memory_format(size, dtype, layout, device, pin_memory,
                             std::nullopt);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype,
                         std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  auto dev = c10::device_or_default(device);
  to_tpuc_dtype(c10::dtype_or_default(dtype));
  c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(
      size, stride, c10::GetAllocator(dev.type()), kTpuKeys,
      c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::cpu::as_strided_symint(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

// unfold is a view with a per-backend kernel; its strides are computed
// the same way for every strided tensor.
at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size,
                  int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

// view_as_real / view_as_complex reinterpret a strided tensor's elements
// as (real, imaginary) pairs and back: views on the same storage, computed
// the same way for every strided tensor.
at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

// Dense row-major CPU copy of a tpu tensor's logical value (its storage
// bytes, with a pending conjugation or negation applied).
at::Tensor to_host(const at::Tensor& src) {
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (src.numel() > 0) {
    tpuc_view v = view_of(src);
    check(tpuc_view_to_host(&v, host.data_ptr(), host.nbytes()));
  }
  if (src.is_conj()) host = host.conj_physical();
  if (src.is_neg()) host = host.neg();
  return host;
}

// True when the two tensors' bytes mean the same values (no pending
// conjugation or negation on one side only).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

// dst (tpu) <- src (tpu or CPU), with dtype conversion and broadcasting.
void copy_into_tpu(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  at::Tensor s = src;
  if (s.is_privateuseone()) {
    if (same_bits(s, dst) && !s.is_conj() && !s.is_neg() &&
        s.device() == dst.device()) {
      // On the device: broadcast, convert and write through dst's view in
      // one program (complex dtypes take the host path below).
      tpuc_view dv = view_of(dst), sv = view_of(s);
      tpuc_status* st = tpuc_op_copy(client(), &dv, &sv);
      if (st == nullptr) return;
      if (tpuc_status_code(st) != TPUC_UNIMPLEMENTED) check(st);
      tpuc_status_free(st);
    }
    if (s.scalar_type() == dst.scalar_type() && s.sizes() == dst.sizes() &&
        same_bits(s, dst)) {
      tpuc_view dv = view_of(dst), sv = view_of(s);
      check(tpuc_view_copy(&dv, &sv));
      return;
    }
    s = to_host(s);
  }
  at::Tensor host = s.to(dst.scalar_type()).expand(dst.sizes());
  // dst's bytes hold conj/neg of its logical value where its bits say so.
  if (dst.is_conj()) host = host.conj_physical();
  if (dst.is_neg()) host = host.neg();
  host = host.resolve_conj().resolve_neg().contiguous();
  tpuc_view dv = view_of(dst);
  check(tpuc_view_from_host(&dv, host.data_ptr(), host.nbytes()));
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool) {
  if (self.is_privateuseone()) {
    copy_into_tpu(self, src);
  } else {
    TORCH_CHECK(src.is_privateuseone(), "copy_: expected a tpu tensor");
    if (self.is_contiguous() && self.scalar_type() == src.scalar_type() &&
        self.sizes() == src.sizes() && !src.is_conj() && !src.is_neg() &&
        !self.is_conj() && !self.is_neg() && src.numel() > 0) {
      // Straight into the destination (t.cpu(), h.copy_(t)): no temporary
      // host tensor, whose fresh pages cost more than the copy.
      tpuc_view v = view_of(src);
      check(tpuc_view_to_host(&v, self.data_ptr(), self.nbytes()));
      return self;
    }
    self.copy_(to_host(src));
  }
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  at::Tensor d = dst;
  copy_(d, self, non_blocking);
  return dst;
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> format) {
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  for (auto s : sizes)
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s,
                ": ", sizes);
  // Same sizes: nothing to do (a view keeps its strides, as on the CPU).
  if (self.sizes() == sizes &&
      (!format.has_value() || *format == c10::MemoryFormat::Preserve))
    return self;
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(sizes);
  if (format.has_value() && *format != c10::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*format);
  size_t need = at::detail::computeStorageNbytes(
      sizes, impl->strides(), self.dtype().itemsize(), self.storage_offset());
  if (need > self.storage().nbytes()) resize_storage(self.storage(), need);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_(dst, self.sym_sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return to_host(self).item();
}

at::Tensor& set_storage_offset(at::Tensor& self, at::Storage storage,
                               int64_t offset, c10::IntArrayRef size,
                               c10::IntArrayRef stride) {
  TORCH_CHECK(storage.device().type() == c10::DeviceType::PrivateUse1,
              "set_: expected a tpu storage, got one on ", storage.device());
  TORCH_CHECK(offset >= 0, "set_: storage offset must be non-negative");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(storage));
  impl->set_sizes_and_strides(size, stride, offset);
  size_t need = at::detail::computeStorageNbytes(
      size, stride, self.dtype().itemsize(), static_cast<size_t>(offset));
  if (need > self.storage().nbytes()) resize_storage(self.storage(), need);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage storage) {
  int64_t n = static_cast<int64_t>(storage.nbytes() / self.dtype().itemsize());
  return set_storage_offset(self, std::move(storage), 0, {n}, {1});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_storage_offset(self, src.storage(), src.storage_offset(),
                            src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0,
                     c10::GetAllocator(c10::DeviceType::PrivateUse1), true);
  return set_storage_offset(self, std::move(empty), 0, {0}, {1});
}

// Random ops running on the CPU draw from the tpu generator's CPU stream:
// an explicit tpu generator is swapped for it, and a missing one for the
// current device's default tpu generator.
void use_cpu_generators(const c10::OperatorHandle& op,
                        torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  size_t base = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); i++) {
    auto type = args[i].type();
    if (auto opt = type->cast<c10::OptionalType>())
      type = opt->getElementType();
    if (type->kind() != c10::TypeKind::GeneratorType) continue;
    c10::IValue& v = (*stack)[base + i];
    if (v.isGenerator()) {
      at::Generator g = v.toGenerator();
      if (g.device().is_privateuseone()) v = c10::IValue(cpu_generator_for(g));
    } else if (v.isNone()) {
      v = c10::IValue(cpu_generator_for(default_generator(current_device())));
    }
  }
}

// PyTorch's rule for device kernels: every tensor argument is on the same
// device, except CPU scalars (0-d) and, for indexing ops, CPU indices.
void check_same_device(const c10::OperatorHandle& op,
                       const torch::jit::Stack& stack,
                       const std::string& name) {
  static const char* const kCpuIndicesAllowed[] = {
      "aten::index",         "aten::index_put",
      "aten::index_put_",    "aten::_index_put_impl_",
      "aten::_unsafe_index", "aten::_unsafe_index_put"};
  bool allow_cpu = false;
  for (const char* n : kCpuIndicesAllowed)
    allow_cpu |= op.schema().operator_name().name == n;
  const auto& schema_args = op.schema().arguments();
  size_t nargs = schema_args.size();
  std::optional<c10::Device> seen;
  bool written = false;  // a CPU scalar is an input, never an out= target
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.is_cpu() && !written && (t.dim() == 0 || allow_cpu)) return;
    if (!seen) {
      seen = t.device();
      return;
    }
    TORCH_CHECK(*seen == t.device(),
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                *seen, " and ", t.device(), "! (when checking arguments for ",
                name, ")");
  };
  for (size_t i = stack.size() - nargs; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    const auto* alias = schema_args[i - (stack.size() - nargs)].alias_info();
    written = alias != nullptr && alias->isWrite();
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) visit(t);
    } else if (v.isOptionalTensorList()) {
      for (std::optional<at::Tensor> t : v.toOptionalTensorList())
        if (t.has_value()) visit(*t);
    }
  }
}

}  // namespace

// TorchScript passes a Tensor[] or Tensor?[] argument as a list whose
// element type is not the one IValue::isTensorList() and
// isOptionalTensorList() compare with, so kernels (the CPU fallback's too)
// took it for some other list. Give such a list the typed form that eager
// calls pass.
void normalize_tensor_lists(const c10::OperatorHandle& op,
                            torch::jit::Stack* stack) {
  const auto& schema_args = op.schema().arguments();
  size_t n = schema_args.size();
  for (size_t i = 0; i < n; i++) {
    c10::IValue& v = (*stack)[stack->size() - n + i];
    if (!v.isList() || v.isTensorList() || v.isOptionalTensorList()) continue;
    auto list = schema_args[i].real_type()->cast<c10::ListType>();
    if (!list) continue;
    c10::TypePtr elem = list->getElementType();
    bool optional = elem->kind() == c10::TypeKind::OptionalType;
    if (optional) elem = elem->castRaw<c10::OptionalType>()->getElementType();
    if (elem->kind() != c10::TypeKind::TensorType) continue;
    if (optional) {
      c10::List<std::optional<at::Tensor>> typed;
      for (const c10::IValue& e : v.toListRef())
        typed.push_back(e.isNone() ? std::nullopt
                                   : std::optional<at::Tensor>(e.toTensor()));
      v = c10::IValue(typed);
    } else {
      c10::List<at::Tensor> typed;
      for (const c10::IValue& e : v.toListRef()) typed.push_back(e.toTensor());
      v = c10::IValue(typed);
    }
  }
}

namespace {

// Applies the TPUC_FALLBACK policy to running `name` on the CPU: raises in
// error mode, counts it, warns the first time.
void note_fallback(const std::string& name) {
  tpuc_fallback_mode mode;
  check(tpuc_fallback_get_mode(&mode));
  // An op with a lowering gets here for the arguments it does not take
  // (or that the CPU must judge: an index out of range, say).
  const char* what = tpuc_op_find(name.c_str()) >= 0
                         ? " has no native lowering for these arguments"
                         : " has no native lowering yet";
  TORCH_CHECK_NOT_IMPLEMENTED(
      mode != TPUC_FALLBACK_ERROR, "'", name, "'", what,
      " on tpu, and TPUC_FALLBACK=error forbids running it on the CPU");
  bool first = false;
  check(tpuc_fallback_record(name.c_str(), &first));
  // Inside a torch.compile capture the CPU's result would be a constant
  // of every replay: the capture breaks here (the graph is split at it).
  std::string why = "'" + name + "' has no native lowering and runs on the CPU";
  tpuc_graph_capture_break(client(), why.c_str());
  if (first && mode == TPUC_FALLBACK_WARN)
    TORCH_WARN("tpu: '", name, "'", what,
               " and runs on the CPU (inputs "
               "copied to the host, results copied back). "
               "tpuc.fallback_report() counts these; TPUC_FALLBACK=error "
               "makes them raise.");
}

// A tpu generator reaches this backend through its dispatch key even when
// every tensor of the call is on the CPU: refuse it as PyTorch refuses a
// CUDA generator for CPU tensors.
void check_generator_device(const c10::OperatorHandle& op,
                            const torch::jit::Stack& stack) {
  size_t nargs = op.schema().arguments().size();
  bool tpu_gen = false, tpu_tensor = false;
  for (size_t i = stack.size() - nargs; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isGenerator() && v.toGenerator().device().is_privateuseone())
      tpu_gen = true;
    if (v.isTensor() && v.toTensor().defined() &&
        v.toTensor().is_privateuseone())
      tpu_tensor = true;
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorVector())
        tpu_tensor |= t.defined() && t.is_privateuseone();
  }
  TORCH_CHECK(!tpu_gen || tpu_tensor,
              "Expected a 'cpu' device type for generator but found 'tpu'");
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  normalize_tensor_lists(op, stack);
  const auto& name = op.schema().operator_name();
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  check_generator_device(op, *stack);
  check_same_device(op, *stack, full);
  note_fallback(full);
  use_cpu_generators(op, stack);
  at::native::cpu_fallback(op, stack);
}

// Convolutions reach a PrivateUse1 backend as convolution_overrideable,
// which the CPU does not implement: run at::convolution on the CPU instead.
at::Tensor convolution_overrideable(
    const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  note_fallback("aten::convolution_overrideable");
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = bias->cpu();
  at::Tensor out = at::convolution_symint(input.cpu(), weight.cpu(), b, stride,
                                          padding, dilation, transposed,
                                          output_padding, std::move(groups));
  return out.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
    c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  note_fallback("aten::convolution_backward_overrideable");
  c10::SymInt out_channels =
      transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  auto r = at::convolution_backward_symint(
      grad_output.cpu(), input.cpu(), weight.cpu(),
      std::vector<c10::SymInt>{std::move(out_channels)}, stride, padding,
      dilation, transposed, output_padding, std::move(groups), output_mask);
  auto back = [&](const at::Tensor& t) {
    return t.defined() ? t.to(input.device()) : t;
  };
  return {back(std::get<0>(r)), back(std::get<1>(r)), back(std::get<2>(r))};
}

// native_batch_norm updates running_mean/running_var in place although its
// schema does not mark them as written, so a boxed CPU fallback would not
// copy them back. It runs as _native_batch_norm_legit instead, whose schema
// does (natively where the op table has it, else through the fallback).
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  bool stats = running_mean.has_value() && running_mean->defined() &&
               running_var.has_value() && running_var->defined();
  if (stats) {
    at::Tensor rm = *running_mean, rv = *running_var;
    return at::_native_batch_norm_legit(input, weight, bias, rm, rv, training,
                                        momentum, eps);
  }
  return at::_native_batch_norm_legit(input, weight, bias, training, momentum,
                                      eps);
}

// arange's out= forms (mvlgamma calls one): the factory runs natively in
// the out tensor's dtype, and the out tensor is resized and filled, as the
// CPU kernel does.
at::Tensor& arange_start_out(const at::Scalar& start, const at::Scalar& end,
                             const at::Scalar& step, at::Tensor& out) {
  at::Tensor r = at::arange(start, end, step, out.options());
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor& arange_out(const at::Scalar& end, at::Tensor& out) {
  return arange_start_out(0, end, 1, out);
}

// Lets `module.to("tpu")` (and `param.data = tpu_tensor`) change a CPU
// tensor into a tpu one in place, as CUDA does: Module._apply then keeps the
// Parameter objects, so tied weights stay tied.
bool compatible_shallow_copy(const at::Tensor& self, const at::Tensor& from) {
  auto kind = [](const at::Tensor& t) {
    return t.is_cpu() || t.is_privateuseone();
  };
  if (kind(self) && kind(from) && self.layout() == c10::kStrided &&
      from.layout() == c10::kStrided)
    return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(
      from.key_set());
}

// _addmm_activation(self, mat1, mat2, beta, alpha, use_gelu): addmm, then
// relu or (exact) gelu in place, as the CPU kernel does; each a tpu op.
at::Tensor addmm_activation(const at::Tensor& self, const at::Tensor& mat1,
                            const at::Tensor& mat2, const at::Scalar& beta,
                            const at::Scalar& alpha, bool use_gelu) {
  at::Tensor out = at::addmm(self, mat1, mat2, beta, alpha);
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", compatible_shallow_copy);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", compatible_shallow_copy);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", unfold);
  m.impl("view_as_real", view_as_real);
  m.impl("view_as_complex", view_as_complex);
  m.impl("resize_", resize_);
  m.impl("copy_", copy_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_.source_Storage", set_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_", set_empty);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("arange.start_out", arange_start_out);
  m.impl("arange.out", arange_out);
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable",
         convolution_backward_overrideable);
  // nn.TransformerEncoderLayer's inference fast path (PyTorch takes it for
  // PrivateUse1 devices): PyTorch's own device-generic implementation,
  // whose linear, attention and norm calls dispatch to tpu's kernels.
  m.impl("_transformer_encoder_layer_fwd",
         TORCH_FN(at::native::transformer_encoder_layer_forward));
  m.impl("_native_multi_head_attention",
         TORCH_FN(at::native::native_multi_head_attention_cpu));
  m.impl("_addmm_activation", addmm_activation);
}

void cpu_fallback_kernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

}  // namespace tpuc_torch
