// Quantized tensors on tpu (the QuantizedPrivateUse1 key): per-tensor and
// per-channel affine quint8 / qint8 / qint32, as CUDA holds them. A
// quantized tpu tensor is PyTorch's QTensorImpl over a tpu storage; every
// computation runs on its integer values (a plain tpu tensor of the
// underlying integer type over the same storage), so nothing here needs a
// kernel of its own. Ops PyTorch's quantized CPU kernels have beyond these
// (quantized conv, linear, add) stay unsupported and raise PyTorch's
// NotImplementedError, as on CUDA.

#include <ATen/ATen.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

namespace tpuc_torch {
namespace {

void check_qdtype(at::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      t == at::kQUInt8 || t == at::kQInt8 || t == at::kQInt32,
      "tpu holds quantized tensors of quint8, qint8 and qint32, not ", t);
}

// A new quantized tpu tensor of `sizes` (contiguous in `format`).
at::Tensor new_qtensor(at::IntArrayRef sizes, c10::Device device,
                       at::ScalarType qtype, at::QuantizerPtr quantizer,
                       at::MemoryFormat format) {
  check_qdtype(qtype);
  at::native::check_size_nonnegative(sizes);
  auto meta = c10::scalarTypeToTypeMeta(qtype);
  int64_t nbytes = c10::multiply_integers(sizes) * (int64_t)meta.itemsize();
  at::Storage storage =
      at::empty({nbytes}, at::TensorOptions().device(device).dtype(at::kByte))
          .storage();
  at::Tensor t = at::detail::make_tensor<at::QTensorImpl>(
      std::move(storage),
      c10::DispatchKeySet(c10::DispatchKey::QuantizedPrivateUse1), meta,
      std::move(quantizer));
  auto* impl = at::get_qtensorimpl(t);
  impl->set_sizes_contiguous(sizes);
  impl->empty_tensor_restride(format);
  return t;
}

// The integer values of quantized tensor `q` (on tpu or the CPU): a plain
// tensor of the underlying type over the same storage, sizes and strides.
at::Tensor int_view(const at::Tensor& q) {
  check_qdtype(q.scalar_type());
  auto key = q.is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1;
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(q.storage()),
      c10::DispatchKeySet(key),
      c10::scalarTypeToTypeMeta(c10::toUnderlying(q.scalar_type())));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(q.sizes(), q.strides(),
                                                 q.storage_offset());
  return t;
}

at::MemoryFormat format_of(std::optional<at::MemoryFormat> f) {
  return f.value_or(at::MemoryFormat::Contiguous);
}

c10::Device device_of(std::optional<at::Device> d) {
  c10::Device dev = d.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  TORCH_CHECK(dev.is_privateuseone(), "expected a tpu device, got ", dev);
  return dev;
}

at::Tensor q_empty_affine(at::IntArrayRef size,
                          std::optional<at::ScalarType> dtype,
                          std::optional<at::Layout> layout,
                          std::optional<at::Device> device,
                          std::optional<bool> pin_memory, double scale,
                          int64_t zero_point,
                          std::optional<at::MemoryFormat> format) {
  at::ScalarType t = dtype.value_or(at::kQUInt8);
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "quantized tensors are strided");
  return new_qtensor(size, device_of(device), t,
                     at::make_per_tensor_affine_quantizer(scale, zero_point, t),
                     format_of(format));
}

at::Tensor q_empty_per_channel(at::IntArrayRef size, const at::Tensor& scales,
                               const at::Tensor& zero_points, int64_t axis,
                               std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout,
                               std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> format) {
  at::ScalarType t = dtype.value_or(at::kQUInt8);
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "quantized tensors are strided");
  return new_qtensor(
      size, device_of(device), t,
      at::make_per_channel_affine_quantizer(scales, zero_points, axis, t),
      format_of(format));
}

// A quantized tpu tensor shaped `like` with `q`'s quantizer.
at::Tensor empty_with_quantizer(const at::Tensor& like, const at::Tensor& q) {
  return new_qtensor(like.sizes(), q.device(), q.scalar_type(),
                     at::get_qtensorimpl(q)->quantizer(),
                     at::MemoryFormat::Contiguous);
}

// Copies between quantized tensors (tpu <-> tpu, tpu <-> CPU) move their
// integer values; PyTorch's copy_ has already checked that both have the
// same scheme and type and given `dst` the quantizer of `src`.
at::Tensor q_copy_from(const at::Tensor& src, const at::Tensor& dst,
                       bool non_blocking) {
  TORCH_CHECK(src.is_quantized() && dst.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not "
              "allowed, please use dequantize to get a float Tensor from a "
              "quantized Tensor");
  TORCH_CHECK(src.scalar_type() == dst.scalar_type() &&
                  src.sizes() == dst.sizes(),
              "Quantized Copy only works with same qtype and same Tensor "
              "sizes");
  int_view(dst).copy_(int_view(src), non_blocking);
  return dst;
}

// Broadcasts per-channel parameters of `q` along its axis.
at::Tensor along_axis(const at::Tensor& p, const at::Tensor& q, int64_t axis) {
  std::vector<int64_t> shape(q.dim(), 1);
  shape[axis] = p.numel();
  return p.to(q.device()).reshape(shape);
}

at::Tensor q_dequantize(const at::Tensor& q) {
  at::Tensor v = int_view(q).to(at::kFloat);
  at::QScheme s = q.qscheme();
  if (s == at::kPerTensorAffine || s == at::kPerTensorSymmetric)
    return (v - (double)q.q_zero_point()) * q.q_scale();
  TORCH_CHECK_NOT_IMPLEMENTED(
      s == at::kPerChannelAffine || s == at::kPerChannelSymmetric,
      "tpu cannot dequantize scheme ", toString(s));
  int64_t axis = q.q_per_channel_axis();
  return (v -
          along_axis(q.q_per_channel_zero_points().to(at::kFloat), q, axis)) *
         along_axis(q.q_per_channel_scales().to(at::kFloat), q, axis);
}

at::Tensor q_int_repr(const at::Tensor& q) {
  return int_view(q).clone(at::MemoryFormat::Preserve);
}

// Quantized values of float tensor `x`: round half to even of x / scale,
// plus the zero point, clamped to the type's range (PyTorch's formula).
at::Tensor quantized_values(const at::Tensor& x, const at::Tensor& inv_scale,
                            const at::Tensor& zero_point, at::ScalarType t) {
  double lo = 0, hi = 0;
  switch (t) {
    case at::kQUInt8:
      lo = 0, hi = 255;
      break;
    case at::kQInt8:
      lo = -128, hi = 127;
      break;
    default:
      lo = (double)INT32_MIN, hi = (double)INT32_MAX;
      break;
  }
  at::Tensor v = at::round(x.to(at::kDouble) * inv_scale) + zero_point;
  return v.clamp(lo, hi).to(c10::toUnderlying(t));
}

at::Tensor q_per_tensor(const at::Tensor& self, double scale,
                        int64_t zero_point, at::ScalarType dtype) {
  check_qdtype(dtype);
  TORCH_CHECK(self.is_floating_point(),
              "quantize_per_tensor expects a floating point input, got ",
              self.scalar_type());
  at::Tensor q = new_qtensor(
      self.sizes(), self.device(), dtype,
      at::make_per_tensor_affine_quantizer(scale, zero_point, dtype),
      self.suggest_memory_format());
  at::Tensor inv =
      at::scalar_tensor(1.0 / scale, self.options().dtype(at::kDouble));
  at::Tensor zp = at::scalar_tensor((double)zero_point, inv.options());
  int_view(q).copy_(quantized_values(self, inv, zp, dtype));
  return q;
}

at::Tensor quantize_per_tensor_tensor(const at::Tensor& self,
                                      const at::Tensor& scale,
                                      const at::Tensor& zero_point,
                                      at::ScalarType dtype) {
  return q_per_tensor(self, scale.item<double>(), zero_point.item<int64_t>(),
                      dtype);
}

at::Tensor q_per_channel(const at::Tensor& self, const at::Tensor& scales,
                         const at::Tensor& zero_points, int64_t axis,
                         at::ScalarType dtype) {
  check_qdtype(dtype);
  TORCH_CHECK(self.is_floating_point(),
              "quantize_per_channel expects a floating point input, got ",
              self.scalar_type());
  axis = c10::maybe_wrap_dim(axis, self.dim());
  TORCH_CHECK(scales.numel() == self.size(axis) &&
                  zero_points.numel() == self.size(axis),
              "quantize_per_channel: expected ", self.size(axis),
              " scales and zero points along axis ", axis);
  at::Tensor q = new_qtensor(
      self.sizes(), self.device(), dtype,
      at::make_per_channel_affine_quantizer(scales, zero_points, axis, dtype),
      self.suggest_memory_format());
  at::Tensor inv = along_axis(scales.to(at::kDouble).reciprocal(), self, axis);
  at::Tensor zp = along_axis(zero_points.to(at::kDouble), self, axis);
  int_view(q).copy_(quantized_values(self, inv, zp, dtype));
  return q;
}

// A quantized tensor over given integer values (torch._make_per_tensor_...).
at::Tensor make_per_tensor_quantized(const at::Tensor& self, double scale,
                                     int64_t zero_point) {
  at::ScalarType t = self.scalar_type() == at::kByte   ? at::kQUInt8
                     : self.scalar_type() == at::kChar ? at::kQInt8
                     : self.scalar_type() == at::kInt  ? at::kQInt32
                                                       : at::kFloat;
  TORCH_CHECK(t != at::kFloat,
              "_make_per_tensor_quantized_tensor expects uint8, int8 or int32 "
              "values, got ",
              self.scalar_type());
  at::Tensor q =
      new_qtensor(self.sizes(), self.device(), t,
                  at::make_per_tensor_affine_quantizer(scale, zero_point, t),
                  self.suggest_memory_format());
  int_view(q).copy_(self);
  return q;
}

at::Tensor q_flip(const at::Tensor& self, at::IntArrayRef dims) {
  at::Tensor out = empty_with_quantizer(self, self);
  int_view(out).copy_(int_view(self).flip(dims));
  return out;
}

at::Tensor q_clone(const at::Tensor& self,
                   std::optional<at::MemoryFormat> format) {
  at::Tensor out = new_qtensor(
      self.sizes(), self.device(), self.scalar_type(),
      at::get_qtensorimpl(self)->quantizer(),
      format.value_or(at::MemoryFormat::Preserve) == at::MemoryFormat::Preserve
          ? self.suggest_memory_format()
          : *format);
  int_view(out).copy_(int_view(self));
  return out;
}

bool q_equal(const at::Tensor& self, const at::Tensor& other) {
  if (!other.is_quantized() || self.qscheme() != other.qscheme() ||
      self.scalar_type() != other.scalar_type() ||
      self.sizes() != other.sizes())
    return false;
  if (self.qscheme() == at::kPerTensorAffine &&
      (self.q_scale() != other.q_scale() ||
       self.q_zero_point() != other.q_zero_point()))
    return false;
  return at::equal(int_view(self), int_view(other.to(self.device())));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", q_empty_affine);
  m.impl("_empty_per_channel_affine_quantized", q_empty_per_channel);
  m.impl("empty_quantized", at::native::empty_quantized);
  m.impl("_copy_from", q_copy_from);
  m.impl("dequantize.self", q_dequantize);
  m.impl("int_repr", q_int_repr);
  m.impl("q_scale", at::native::q_scale_quant);
  m.impl("q_zero_point", at::native::q_zero_point_quant);
  m.impl("qscheme", at::native::qscheme_quant);
  m.impl("q_per_channel_scales", at::native::q_per_channel_scales);
  m.impl("q_per_channel_zero_points", at::native::q_per_channel_zero_points);
  m.impl("q_per_channel_axis", at::native::q_per_channel_axis);
  m.impl("as_strided", at::native::as_strided_qtensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("flip", q_flip);
  m.impl("clone", q_clone);
  m.impl("equal", q_equal);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_empty_affine_quantized", q_empty_affine);
  m.impl("_empty_per_channel_affine_quantized", q_empty_per_channel);
  m.impl("quantize_per_tensor", q_per_tensor);
  m.impl("quantize_per_tensor.tensor_qparams", quantize_per_tensor_tensor);
  m.impl("quantize_per_channel", q_per_channel);
  m.impl("_make_per_tensor_quantized_tensor", make_per_tensor_quantized);
}

}  // namespace tpuc_torch
