// The ONE generic boxed kernel: registered for every op in the C op table
// (tpuc/ops.h). It translates the call (tensors -> views of their storages,
// scalars -> numbers) into tpuc_op_run and wraps the results as tensors;
// where C answers UNIMPLEMENTED for these arguments, the op runs on the CPU
// through the fallback.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/library.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "tpu_runtime.h"

namespace tpuc_torch {

void cpu_fallback_kernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack);

namespace {

int table_index(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<std::string, int> cache;
  const auto& name = op.schema().operator_name();
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(full);
  if (it != cache.end()) return it->second;
  int i = tpuc_op_find(full.c_str());
  cache.emplace(full, i);
  return i;
}

// Fills `out` from `v`, whose schema type is `type`; false when the native
// path cannot take it. Ints, bools, int lists and dtypes that the schema
// declares as such are static arguments of the op; numbers declared as
// Scalar (and CPU 0-d tensors) are values. `lists` keeps int lists alive.
bool marshal(const c10::IValue& v, const c10::TypePtr& declared,
             tpuc_op_arg* out, std::optional<c10::Device>* device,
             std::vector<std::vector<int64_t>>* lists) {
  *out = tpuc_op_arg{};
  if (v.isNone()) {
    out->kind = TPUC_OP_ARG_NONE;
    return true;
  }
  c10::TypePtr type = declared;
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  switch (type->kind()) {
    case c10::TypeKind::IntType:
      out->kind = TPUC_OP_ARG_INT;
      out->i = v.toInt();
      return true;
    case c10::TypeKind::BoolType:
      out->kind = TPUC_OP_ARG_BOOL;
      out->i = v.toBool();
      return true;
    case c10::TypeKind::ScalarTypeType:
      out->kind = TPUC_OP_ARG_DTYPE;
      out->dtype = to_tpuc_dtype(static_cast<at::ScalarType>(v.toInt()));
      return true;
    case c10::TypeKind::ListType:
      if (!v.isIntList()) return false;
      lists->push_back(v.toIntVector());
      out->kind = TPUC_OP_ARG_INT_LIST;
      out->list = lists->back().data();
      out->list_len = lists->back().size();
      return true;
    default:
      break;
  }
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      out->kind = TPUC_OP_ARG_NONE;
      return true;
    }
    if (t.is_privateuseone()) {
      if (*device && **device != t.device()) return false;
      if (t.is_conj() || t.is_neg()) return false;  // lazy bits: CPU path
      *device = t.device();
      out->kind = TPUC_OP_ARG_TENSOR;
      out->view = view_of(t);
      return true;
    }
    if (!t.is_cpu() || t.dim() != 0 || t.is_complex()) return false;
    // A CPU 0-d tensor (a Python number, or a real 0-d tensor) is a scalar.
    out->kind = TPUC_OP_ARG_SCALAR;
    out->scalar_is_tensor = !t.unsafeGetTensorImpl()->is_wrapped_number();
    out->scalar_dtype = to_tpuc_dtype(t.scalar_type());
    at::Scalar s = t.item();
    if (s.isFloatingPoint()) {
      out->scalar = TPUC_SCALAR_FLOAT;
      out->f = s.toDouble();
    } else {
      out->scalar = s.isBoolean() ? TPUC_SCALAR_BOOL : TPUC_SCALAR_INT;
      out->i = s.toLong();
    }
    return true;
  }
  if (v.isDouble()) {
    out->kind = TPUC_OP_ARG_SCALAR;
    out->scalar = TPUC_SCALAR_FLOAT;
    out->f = v.toDouble();
    return true;
  }
  if (v.isBool()) {
    out->kind = TPUC_OP_ARG_SCALAR;
    out->scalar = TPUC_SCALAR_BOOL;
    out->i = v.toBool();
    return true;
  }
  if (v.isInt()) {
    out->kind = TPUC_OP_ARG_SCALAR;
    out->scalar = TPUC_SCALAR_INT;
    out->i = v.toInt();
    return true;
  }
  return false;
}

void native_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  int index = table_index(op);
  size_t nargs = op.schema().arguments().size();
  std::vector<tpuc_op_arg> args(nargs);
  std::vector<std::vector<int64_t>> lists;
  lists.reserve(nargs);
  std::optional<c10::Device> device;
  const auto& schema_args = op.schema().arguments();
  bool ok = index >= 0;
  for (size_t i = 0; ok && i < nargs; i++)
    ok = marshal((*stack)[stack->size() - nargs + i],
                 schema_args[i].real_type(), &args[i], &device, &lists);
  if (!ok || !device) return cpu_fallback_kernel(op, stack);
  c10::DeviceGuard guard(*device);
  tpuc_op_options opts{};
  opts.default_float =
      to_tpuc_dtype(c10::typeMetaToScalarType(c10::get_default_dtype()));
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST:
      opts.matmul_precision = TPUC_HLO_PRECISION_HIGHEST;
      break;
    case at::Float32MatmulPrecision::HIGH:
      opts.matmul_precision = TPUC_HLO_PRECISION_HIGH;
      break;
    default:
      opts.matmul_precision = TPUC_HLO_PRECISION_DEFAULT;
  }
  tpuc_op_result results[4];
  size_t nres = 0;
  tpuc_status* st = tpuc_op_run(client(), device->index(), index, args.data(),
                                nargs, &opts, results, 4, &nres);
  if (st != nullptr && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
    tpuc_status_free(st);
    return cpu_fallback_kernel(op, stack);
  }
  check(st);
  torch::jit::drop(*stack, nargs);
  for (size_t k = 0; k < nres; k++) {
    at::ScalarType type = at::kFloat;
    for (auto s : {at::kBool, at::kChar, at::kShort, at::kInt, at::kLong,
                   at::kByte, at::kUInt16, at::kUInt32, at::kUInt64, at::kHalf,
                   at::kBFloat16, at::kFloat, at::kDouble})
      if (to_tpuc_dtype(s) == results[k].dtype) type = s;
    at::Tensor out =
        at::empty(c10::IntArrayRef(results[k].sizes, results[k].rank),
                  at::TensorOptions().dtype(type).device(*device));
    tpuc_status* set = nullptr;
    if (out.numel() > 0)
      set = tpuc_storage_set_value(storage_of(out), results[k].value);
    tpuc_buffer_release(results[k].value);
    check(set);
    torch::jit::push(*stack, std::move(out));
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (size_t i = 0; i < tpuc_op_table_size(); i++) {
    std::string name = tpuc_op_table_name(i);
    if (name.rfind("aten::", 0) == 0) name = name.substr(6);
    m.impl(name.c_str(),
           torch::CppFunction::makeFromBoxedFunction<&native_kernel>());
  }
}

}  // namespace tpuc_torch
