// The ONE generic boxed kernel: registered for every op in the C op table
// (tpuc/ops.h). It translates the call (tensors -> views of their storages,
// scalars -> numbers) into tpuc_op_run and wraps the results as tensors;
// where C answers UNIMPLEMENTED for these arguments, the op runs on the CPU
// through the fallback.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tpu_runtime.h"

namespace tpuc_torch {

namespace {

// The op table index of `op`, remembered per operator (by the address of
// its schema, which lives as long as the registration).
int table_index(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<const void*, int> cache;
  const void* key = &op.schema();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const auto& name = op.schema().operator_name();
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  int i = tpuc_op_find(full.c_str());
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(key, i);
  return i;
}

// Fills `out` from `v`, whose schema type is `type`; false when the native
// path cannot take it. Ints, bools, int lists and dtypes that the schema
// declares as such are static arguments of the op; numbers declared as
// Scalar (and CPU 0-d tensors) are values. `lists` keeps int lists alive.
// Storage for what marshalled arguments point at during one call.
// (deques: what earlier arguments point at never moves.)
struct Marshalled {
  std::deque<std::vector<int64_t>> lists;
  std::deque<std::vector<tpuc_view>> views;
  std::deque<std::string> strings;
};

// A tpu tensor as a view; false when the native path cannot take it (lazy
// conj/neg bits, or another device than the call's).
bool tensor_view(const at::Tensor& t, std::optional<c10::Device>* device,
                 tpuc_view* out) {
  if (!t.is_privateuseone()) return false;
  if (*device && **device != t.device()) return false;
  if (t.is_conj() || t.is_neg()) return false;  // lazy bits: CPU path
  *device = t.device();
  *out = view_of(t);
  return true;
}

bool marshal(const c10::IValue& v, const c10::TypePtr& declared,
             tpuc_op_arg* out, std::optional<c10::Device>* device,
             Marshalled* keep) {
  *out = tpuc_op_arg{};
  if (v.isNone()) {
    out->kind = TPUC_OP_ARG_NONE;
    return true;
  }
  c10::TypePtr type = declared;
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  if (type->kind() == c10::TypeKind::DeviceObjType) {
    // A factory's device= (arange): it names the device of the call.
    c10::Device d = v.toDevice();
    if (!d.is_privateuseone()) return false;
    if (!d.has_index()) d = c10::Device(d.type(), current_device());
    if (*device && **device != d) return false;
    *device = d;
    out->kind = TPUC_OP_ARG_NONE;
    return true;
  }
  if (type->kind() == c10::TypeKind::LayoutType) {
    if (v.toLayout() != c10::kStrided) return false;
    out->kind = TPUC_OP_ARG_NONE;
    return true;
  }
  if (type->kind() == c10::TypeKind::GeneratorType) {
    // Random ops draw from it through options.rng (native_kernel).
    if (!v.toGenerator().device().is_privateuseone()) return false;
    out->kind = TPUC_OP_ARG_NONE;
    return true;
  }
  if (type->kind() == c10::TypeKind::StringType) {
    keep->strings.push_back(v.toStringRef());
    out->kind = TPUC_OP_ARG_STRING;
    out->str = keep->strings.back().c_str();
    return true;
  }
  if (v.isTensorList() || v.isOptionalTensorList()) {
    std::vector<tpuc_view> views;
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        views.emplace_back();
        if (!tensor_view(t, device, &views.back())) return false;
      }
    } else {
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
        views.emplace_back(tpuc_view{});
        if (t.has_value() && t->defined() &&
            !tensor_view(*t, device, &views.back()))
          return false;
      }
    }
    keep->views.push_back(std::move(views));
    out->kind = TPUC_OP_ARG_TENSOR_LIST;
    out->views = keep->views.back().data();
    out->num_views = keep->views.back().size();
    return true;
  }
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      // Sizes, dims, strides, groups: static arguments of the program.
      if (!v.isInt()) return false;  // a symbolic int
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
      if (v.isBoolList()) {
        // bool[] (output_mask): an int list of 0/1.
        std::vector<int64_t> bits;
        for (bool b : v.toBoolList()) bits.push_back(b ? 1 : 0);
        keep->lists.push_back(std::move(bits));
        out->kind = TPUC_OP_ARG_INT_LIST;
        out->list = keep->lists.back().data();
        out->list_len = keep->lists.back().size();
        return true;
      }
      if (!v.isIntList()) return false;
      keep->lists.push_back(v.toIntVector());
      out->kind = TPUC_OP_ARG_INT_LIST;
      out->list = keep->lists.back().data();
      out->list_len = keep->lists.back().size();
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
    if (t.is_privateuseone() && (t.is_conj() || t.is_neg())) {
      // Lazy conj/neg bits: applied when the program reads the tensor.
      if (*device && **device != t.device()) return false;
      *device = t.device();
      out->kind = TPUC_OP_ARG_TENSOR;
      out->view = view_of(t);
      out->conj = t.is_conj();
      out->neg = t.is_neg();
      return true;
    }
    if (t.is_privateuseone()) {
      out->kind = TPUC_OP_ARG_TENSOR;
      return tensor_view(t, device, &out->view);
    }
    if (!t.is_cpu() || t.dim() != 0 ||
        (t.is_complex() && t.scalar_type() != at::kComplexFloat &&
         t.scalar_type() != at::kComplexDouble))
      return false;
    // A CPU 0-d tensor (a Python number, or a 0-d tensor) is a scalar.
    out->kind = TPUC_OP_ARG_SCALAR;
    out->scalar_is_tensor = !t.unsafeGetTensorImpl()->is_wrapped_number();
    out->scalar_dtype = to_tpuc_dtype(t.scalar_type());
    at::Scalar s = t.item();
    if (s.isComplex()) {
      c10::complex<double> z = s.toComplexDouble();
      out->scalar = TPUC_SCALAR_COMPLEX;
      out->f = z.real();
      out->f_im = z.imag();
    } else if (s.isFloatingPoint()) {
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
  if (v.isComplexDouble()) {
    c10::complex<double> z = v.toComplexDouble();
    out->kind = TPUC_OP_ARG_SCALAR;
    out->scalar = TPUC_SCALAR_COMPLEX;
    out->f = z.real();
    out->f_im = z.imag();
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

bool whole_storage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.nbytes() == t.storage().nbytes();
}

// A new contiguous tpu tensor holding a result's value.
at::Tensor wrap_result(tpuc_op_result* r, c10::Device device) {
  at::Tensor out =
      at::empty(c10::IntArrayRef(r->sizes, r->rank),
                at::TensorOptions().dtype(to_scalar_type(r->dtype)).device(
                    device));
  tpuc_status* set = nullptr;
  if (out.numel() > 0) set = tpuc_storage_set_value(storage_of(out), r->value);
  tpuc_buffer_release(r->value);
  r->value = nullptr;
  check(set);
  return out;
}

// Writes a result into an out= tensor: PyTorch's casting check, then
// resize_output (which warns when a non-empty out changes shape), then the
// value (swapped in when `out` is its whole storage, else copied through
// its view on the device).
void write_out(const c10::OperatorHandle& op, tpuc_op_result* r,
               at::Tensor& out, c10::Device device) {
  at::ScalarType rt = to_scalar_type(r->dtype);
  // nonzero's coordinates go only into a long tensor (PyTorch's check and
  // message, which has no space before the type).
  if (op.schema().operator_name().name == "aten::nonzero" &&
      out.scalar_type() != at::kLong) {
    tpuc_buffer_release(r->value);
    r->value = nullptr;
    TORCH_CHECK(false,
                "nonzero: Expected out tensor to have scalar type Long but "
                "got scalar type",
                out.scalar_type());
  }
  if (!at::canCast(rt, out.scalar_type())) {
    tpuc_buffer_release(r->value);
    r->value = nullptr;
    TORCH_CHECK(false, "result type ", rt,
                " can't be cast to the desired output type ",
                out.scalar_type());
  }
  at::native::resize_output(out, c10::IntArrayRef(r->sizes, r->rank));
  if (out.scalar_type() == rt && whole_storage(out) && !out.is_conj() &&
      !out.is_neg()) {
    tpuc_status* set = nullptr;
    if (out.numel() > 0)
      set = tpuc_storage_set_value(storage_of(out), r->value);
    tpuc_buffer_release(r->value);
    r->value = nullptr;
    check(set);
    return;
  }
  at::Tensor tmp = wrap_result(r, device);
  out.copy_(tmp);
}

// Boolean (and uint8) masks among an indexing op's indices mean "the
// positions where the mask is true": like PyTorch's own index kernels, they
// become long index tensors (one per masked dim, from nonzero, itself a
// native two-phase op) before the op runs.
void expand_mask_indices(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name().name;
  if (name != "aten::index" && name != "aten::index_put" &&
      name != "aten::index_put_" && name != "aten::_index_put_impl_")
    return;
  size_t nargs = op.schema().arguments().size();
  c10::IValue& v = (*stack)[stack->size() - nargs + 1];
  if (!v.isOptionalTensorList()) return;
  auto list = v.toOptionalTensorList();
  bool any = false;
  for (std::optional<at::Tensor> t : list)
    any |= t.has_value() && t->defined() && t->is_privateuseone() &&
           (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte);
  if (!any) return;
  const at::Tensor& self = (*stack)[stack->size() - nargs].toTensor();
  c10::List<std::optional<at::Tensor>> expanded;
  int64_t pos = 0;  // the dim of self this index entry starts at
  for (std::optional<at::Tensor> t : list) {
    if (!(t.has_value() && t->defined() && t->is_privateuseone() &&
          (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte))) {
      expanded.push_back(t);
      pos++;
      continue;
    }
    if (t->scalar_type() == at::kByte)  // PyTorch's own warning
      TORCH_WARN(
          "indexing with dtype torch.uint8 is now deprecated, please use a "
          "dtype torch.bool instead.");
    at::Tensor mask = t->scalar_type() == at::kByte ? t->to(at::kBool) : *t;
    for (int64_t j = 0; j < mask.dim(); j++) {
      TORCH_CHECK_INDEX(pos + j < self.dim(), "too many indices for tensor of "
                        "dimension ", self.dim());
      TORCH_CHECK_INDEX(mask.size(j) == self.size(pos + j), "The shape of the "
                        "mask ", mask.sizes(), " at index ", j,
                        " does not match the shape of the indexed tensor ",
                        self.sizes(), " at index ", pos + j);
    }
    pos += mask.dim();
    at::Tensor nz = at::nonzero(mask);
    for (int64_t d = 0; d < mask.dim(); d++)
      expanded.push_back(std::optional<at::Tensor>(nz.select(1, d)));
  }
  v = c10::IValue(expanded);
}

void native_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  int index = table_index(op);
  normalize_tensor_lists(op, stack);
  expand_mask_indices(op, stack);
  const auto& schema = op.schema();
  const auto& schema_args = schema.arguments();
  size_t nargs = schema_args.size();
  std::vector<tpuc_op_arg> args(nargs);
  Marshalled keep;
  std::optional<c10::Device> device;
  // Arguments the op writes: an in-place self is read and written in the
  // op's program; an out= tensor only receives the result.
  std::vector<size_t> written;
  std::vector<bool> is_out(nargs, false);
  bool ok = index >= 0;
  for (size_t i = 0; ok && i < nargs; i++) {
    const c10::IValue& v = (*stack)[stack->size() - nargs + i];
    const auto* alias = schema_args[i].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      ok = v.isTensor() && v.toTensor().is_privateuseone() &&
           !v.toTensor().is_conj() && !v.toTensor().is_neg();
      written.push_back(i);
      if (schema_args[i].kwarg_only()) {
        is_out[i] = true;
        if (ok && device && *device != v.toTensor().device()) ok = false;
        args[i].kind = TPUC_OP_ARG_NONE;
        continue;
      }
    }
    if (ok)
      ok = marshal(v, schema_args[i].real_type(), &args[i], &device, &keep);
  }
  // Written arguments are the op's returns (add_, add.out: results 0..;
  // _amp_update_scale_ returns the first of the two it writes), or, for
  // ops that also mutate arguments they do not return
  // (_native_batch_norm_legit's running stats), extra results after the
  // returns, written in place.
  size_t nreturns = schema.returns().size();
  bool returns_alias = nreturns > 0;
  for (const auto& r : schema.returns())
    returns_alias &= r.alias_info() != nullptr;
  size_t base = 0;
  if (ok && !written.empty()) {
    if (returns_alias) {
      // Return k must be written argument k (the same alias set).
      ok = written.size() >= nreturns;
      for (size_t k = 0; ok && k < nreturns; k++)
        ok = schema.returns()[k].alias_info()->beforeSets() ==
             schema_args[written[k]].alias_info()->beforeSets();
    } else {
      base = nreturns;
      for (size_t i : written) ok &= !is_out[i];
    }
    ok &= base + written.size() <= TPUC_OP_MAX_RESULTS;
  }
  if (ok && !device && !written.empty())
    device = (*stack)[stack->size() - nargs + written[0]].toTensor().device();
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
  std::vector<at::Tensor> targets;
  for (size_t k = 0; k < written.size(); k++)
    targets.push_back((*stack)[stack->size() - nargs + written[k]].toTensor());
  // PyTorch's memory-overlap rules for written tensors, as TensorIterator
  // checks them on the CPU.
  for (const at::Tensor& t : targets) {
    at::assert_no_internal_overlap(t);
    for (size_t i = 0; i < nargs; i++) {
      const c10::IValue& v = (*stack)[stack->size() - nargs + i];
      if (v.isTensor() && v.toTensor().defined() && !v.toTensor().is_cpu())
        at::assert_no_partial_overlap(t, v.toTensor());
    }
  }
  for (size_t k = 0; k < written.size(); k++)
    if (!is_out[written[k]]) opts.write_to[base + k] = &args[written[k]].view;
  if (tpuc_op_is_random(index)) {
    // The op's generator (a tpu one; marshal refused others), or the
    // device's default.
    std::optional<at::Generator> gen;
    for (size_t i = 0; i < nargs; i++) {
      const c10::IValue& v = (*stack)[stack->size() - nargs + i];
      if (v.isGenerator()) gen = v.toGenerator();
    }
    draw_rng(gen ? *gen : default_generator(device->index()), opts.rng);
  }
  tpuc_op_result results[TPUC_OP_MAX_RESULTS];
  size_t nres = 0;
  tpuc_status* st =
      tpuc_op_run(client(), device->index(), index, args.data(), nargs, &opts,
                  results, TPUC_OP_MAX_RESULTS, &nres);
  if (st != nullptr && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
    tpuc_status_free(st);
    return cpu_fallback_kernel(op, stack);
  }
  check(st);
  if (launch_blocking()) {
    // TPUC_LAUNCH_BLOCKING=1: wait for this op, so an asynchronous failure
    // is reported here, at the op that caused it.
    tpuc_status* sync = synchronize_status();
    if (sync != nullptr)
      for (size_t k = 0; k < nres; k++) tpuc_buffer_release(results[k].value);
    check(sync);
  }
  if (!written.empty() && nres != base + written.size()) {
    for (size_t k = 0; k < nres; k++) tpuc_buffer_release(results[k].value);
    TORCH_CHECK(false, op.schema().name(), ": ", nres, " results for ",
                base + written.size(), " outputs");
  }
  torch::jit::drop(*stack, nargs);
  for (size_t k = 0; k < nres; k++) {
    if (results[k].value == nullptr && !results[k].written) {
      // A result the op leaves undefined (output_mask false).
      torch::jit::push(*stack, at::Tensor());
      continue;
    }
    if (k < nreturns &&
        schema.returns()[k].type()->kind() == c10::TypeKind::BoolType) {
      // A bool result (equal): the host waits for the value.
      uint8_t b = 0;
      tpuc_status* rd = results[k].rank == 0 && results[k].dtype == TPUC_DTYPE_PRED
                            ? tpuc_value_to_host(results[k].value, &b, 1)
                            : tpuc_status_make(TPUC_INTERNAL,
                                               "a bool result must be rank-0 "
                                               "pred");
      tpuc_buffer_release(results[k].value);
      results[k].value = nullptr;
      if (rd != nullptr)
        for (size_t j = k + 1; j < nres; j++)
          tpuc_buffer_release(results[j].value);
      check(rd);
      torch::jit::push(*stack, c10::IValue(b != 0));
      continue;
    }
    if (written.empty() || k < base) {
      torch::jit::push(*stack, wrap_result(&results[k], *device));
      continue;
    }
    at::Tensor& t = targets[k - base];
    if (results[k].written && results[k].value == nullptr) {
      // zero_ of a storage that already reads as zeros: nothing to set.
    } else if (results[k].written) {
      tpuc_status* set = tpuc_storage_set_value(storage_of(t), results[k].value);
      tpuc_buffer_release(results[k].value);
      results[k].value = nullptr;
      // A failure leaves the remaining results unreleased only if check()
      // throws; release them first.
      if (set != nullptr)
        for (size_t j = k + 1; j < nres; j++)
          tpuc_buffer_release(results[j].value);
      check(set);
    } else {
      try {
        write_out(op, &results[k], t, *device);
      } catch (...) {
        for (size_t j = k + 1; j < nres; j++)
          tpuc_buffer_release(results[j].value);
        throw;
      }
    }
    if (base == 0 && k < nreturns) torch::jit::push(*stack, t);
  }
}

// torch.optim's fused=True optimizers (Adam, AdamW, SGD, Adagrad): one
// tpuc step program per parameter, writing the parameter and its state
// (and the unscaled gradient when there is a grad_scale) in place.

tpuc_op_arg step_scalar(double f) {
  tpuc_op_arg a{};
  a.kind = TPUC_OP_ARG_SCALAR;
  a.scalar = TPUC_SCALAR_FLOAT;
  a.f = f;
  return a;
}

tpuc_op_arg step_tensor(const at::Tensor& t) {
  tpuc_op_arg a{};
  a.kind = TPUC_OP_ARG_TENSOR;
  a.view = view_of(t);
  return a;
}

tpuc_op_arg step_flag(bool b) {
  tpuc_op_arg a{};
  a.kind = TPUC_OP_ARG_BOOL;
  a.i = b;
  return a;
}

bool step_on_tpu(const at::Tensor& t) {
  return t.is_privateuseone() && !t.is_conj() && !t.is_neg();
}

bool step_opt_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined();
}

// The learning rate argument: a tpu tensor stays a tensor, anything else
// is read on the host.
tpuc_op_arg step_lr(const c10::IValue& lr) {
  if (lr.isTensor() && lr.toTensor().is_privateuseone())
    return step_tensor(lr.toTensor());
  return step_scalar(lr.isTensor() ? lr.toTensor().item<double>()
                                   : lr.toDouble());
}

// The checks every fused step shares: each list has one tensor per
// parameter on the parameters' tpu device, grad_scale and found_inf are
// tpu tensors, the learning rate a number or a tpu/CPU tensor.
bool step_lists_ok(const std::vector<std::vector<at::Tensor>>& lists,
                   const c10::IValue& lr, const c10::IValue& grad_scale,
                   const c10::IValue& found_inf) {
  if (lists.empty() || lists[0].empty()) return false;
  size_t n = lists[0].size();
  for (const auto& l : lists) {
    if (l.size() != n) return false;
    for (const at::Tensor& t : l)
      if (!step_on_tpu(t) || t.device() != lists[0][0].device()) return false;
  }
  if (step_opt_tensor(grad_scale) && !step_on_tpu(grad_scale.toTensor()))
    return false;
  if (step_opt_tensor(found_inf) && !step_on_tpu(found_inf.toTensor()))
    return false;
  if (lr.isTensor() && !step_on_tpu(lr.toTensor()) && !lr.toTensor().is_cpu())
    return false;
  return true;
}

// Runs the tpuc op `index` once per parameter: args_of(i, args) fills its
// arguments (nargs of them), targets_of(i) gives the arguments its results
// replace, in order. If the first call is unimplemented, nothing has been
// written yet and the CPU runs the whole op instead.
template <class ArgsOf, class TargetsOf>
void run_steps(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               int index, size_t nparams, c10::Device device, size_t nargs,
               ArgsOf args_of, TargetsOf targets_of) {
  c10::DeviceGuard guard(device);
  for (size_t i = 0; i < nparams; i++) {
    tpuc_op_arg args[16] = {};
    args_of(i, args);
    // Result k replaces argument targets[k]: its view is written through.
    std::vector<int> targets = targets_of(i);
    tpuc_op_options opts{};
    opts.default_float = TPUC_DTYPE_F32;
    for (size_t k = 0; k < targets.size(); k++)
      opts.write_to[k] = &args[targets[k]].view;
    tpuc_op_result results[TPUC_OP_MAX_RESULTS];
    size_t nres = 0;
    tpuc_status* st = tpuc_op_run(client(), device.index(), index, args, nargs,
                                  &opts, results, TPUC_OP_MAX_RESULTS, &nres);
    if (st != nullptr && i == 0 && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
      tpuc_status_free(st);  // nothing written yet: the CPU does it all
      return cpu_fallback_kernel(op, stack);
    }
    check(st);
    tpuc_status* set = nullptr;
    for (size_t k = 0; k < nres; k++) {
      if (set == nullptr && k < targets.size() && results[k].value != nullptr)
        set = tpuc_storage_set_value(args[targets[k]].view.storage,
                                     results[k].value);
      tpuc_buffer_release(results[k].value);
    }
    check(set);
  }
  torch::jit::drop(*stack, op.schema().arguments().size());
}

// _fused_adam_ / _fused_adamw_: tpuc::adam_step.
void fused_adam_kernel(const c10::OperatorHandle& op,
                       torch::jit::Stack* stack) {
  static const int step_index = tpuc_op_find("tpuc::adam_step");
  size_t nargs = op.schema().arguments().size();
  size_t base = stack->size() - nargs;
  auto list = [&](size_t i) { return (*stack)[base + i].toTensorVector(); };
  std::vector<at::Tensor> params = list(0), grads = list(1), m1 = list(2),
                          m2 = list(3), vmax = list(4), steps = list(5);
  const c10::IValue& lr = (*stack)[base + 6];
  bool amsgrad = (*stack)[base + 11].toBool();
  bool maximize = (*stack)[base + 12].toBool();
  const c10::IValue& grad_scale = (*stack)[base + 13];
  const c10::IValue& found_inf = (*stack)[base + 14];
  bool adamw = op.schema().operator_name().name == "aten::_fused_adamw_";
  std::vector<std::vector<at::Tensor>> lists = {params, grads, m1, m2, steps};
  if (amsgrad) lists.push_back(vmax);
  bool ok = step_index >= 0 && step_lists_ok(lists, lr, grad_scale, found_inf);
  for (size_t i = 0; ok && i < steps.size(); i++) ok = steps[i].dim() == 0;
  if (!ok) return cpu_fallback_kernel(op, stack);
  run_steps(
      op, stack, step_index, params.size(), params[0].device(), 16,
      [&](size_t i, tpuc_op_arg* args) {
        args[0] = step_tensor(params[i]);
        args[1] = step_tensor(grads[i]);
        args[2] = step_tensor(m1[i]);
        args[3] = step_tensor(m2[i]);
        if (amsgrad) args[4] = step_tensor(vmax[i]);
        args[5] = step_tensor(steps[i]);
        args[6] = step_lr(lr);
        for (int k = 7; k <= 10; k++)
          args[k] = step_scalar((*stack)[base + k].toDouble());
        args[11] = step_flag(amsgrad);
        args[12] = step_flag(maximize);
        if (step_opt_tensor(grad_scale)) args[13] = step_tensor(grad_scale.toTensor());
        if (step_opt_tensor(found_inf)) args[14] = step_tensor(found_inf.toTensor());
        args[15] = step_flag(adamw);
      },
      [&](size_t) {
        std::vector<int> t = {0, 2, 3};
        if (amsgrad) t.push_back(4);
        if (step_opt_tensor(grad_scale)) t.push_back(1);
        return t;
      });
}

// _fused_sgd_: tpuc::sgd_step (no momentum buffers when momentum is 0).
void fused_sgd_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const int step_index = tpuc_op_find("tpuc::sgd_step");
  size_t nargs = op.schema().arguments().size();
  size_t base = stack->size() - nargs;
  auto at_ = [&](size_t i) -> const c10::IValue& { return (*stack)[base + i]; };
  std::vector<at::Tensor> params = at_(0).toTensorVector(),
                          grads = at_(1).toTensorVector(),
                          bufs = at_(2).toTensorVector();
  double weight_decay = at_(3).toDouble(), momentum = at_(4).toDouble();
  const c10::IValue& lr = at_(5);
  double dampening = at_(6).toDouble();
  bool nesterov = at_(7).toBool(), maximize = at_(8).toBool(),
       first = at_(9).toBool();
  const c10::IValue& grad_scale = at_(10);
  const c10::IValue& found_inf = at_(11);
  bool use_momentum = momentum != 0;
  std::vector<std::vector<at::Tensor>> lists = {params, grads};
  if (use_momentum) lists.push_back(bufs);
  bool ok = step_index >= 0 && step_lists_ok(lists, lr, grad_scale, found_inf);
  if (!ok) return cpu_fallback_kernel(op, stack);
  run_steps(
      op, stack, step_index, params.size(), params[0].device(), 14,
      [&](size_t i, tpuc_op_arg* args) {
        args[0] = step_tensor(params[i]);
        args[1] = step_tensor(grads[i]);
        if (use_momentum) args[2] = step_tensor(bufs[i]);
        args[3] = step_lr(lr);
        args[4] = step_scalar(weight_decay);
        args[5] = step_scalar(momentum);
        args[6] = step_scalar(dampening);
        args[7] = step_flag(nesterov);
        args[8] = step_flag(maximize);
        args[9] = step_flag(first);
        if (step_opt_tensor(grad_scale)) args[10] = step_tensor(grad_scale.toTensor());
        if (step_opt_tensor(found_inf)) args[11] = step_tensor(found_inf.toTensor());
        args[12] = step_flag(use_momentum);
        args[13] = step_flag(weight_decay != 0);
      },
      [&](size_t) {
        std::vector<int> t = {0};
        if (use_momentum) t.push_back(2);
        if (step_opt_tensor(grad_scale)) t.push_back(1);
        return t;
      });
}

// _fused_adagrad_: tpuc::adagrad_step (the optimizer counted the step).
void fused_adagrad_kernel(const c10::OperatorHandle& op,
                          torch::jit::Stack* stack) {
  static const int step_index = tpuc_op_find("tpuc::adagrad_step");
  size_t nargs = op.schema().arguments().size();
  size_t base = stack->size() - nargs;
  auto at_ = [&](size_t i) -> const c10::IValue& { return (*stack)[base + i]; };
  std::vector<at::Tensor> params = at_(0).toTensorVector(),
                          grads = at_(1).toTensorVector(),
                          sums = at_(2).toTensorVector(),
                          steps = at_(3).toTensorVector();
  const c10::IValue& lr = at_(4);
  double lr_decay = at_(5).toDouble(), weight_decay = at_(6).toDouble(),
         eps = at_(7).toDouble();
  bool maximize = at_(8).toBool();
  const c10::IValue& grad_scale = at_(9);
  const c10::IValue& found_inf = at_(10);
  bool ok = step_index >= 0 &&
            step_lists_ok({params, grads, sums, steps}, lr, grad_scale, found_inf);
  for (size_t i = 0; ok && i < steps.size(); i++) ok = steps[i].dim() == 0;
  if (!ok) return cpu_fallback_kernel(op, stack);
  run_steps(
      op, stack, step_index, params.size(), params[0].device(), 12,
      [&](size_t i, tpuc_op_arg* args) {
        args[0] = step_tensor(params[i]);
        args[1] = step_tensor(grads[i]);
        args[2] = step_tensor(sums[i]);
        args[3] = step_tensor(steps[i]);
        args[4] = step_lr(lr);
        args[5] = step_scalar(lr_decay);
        args[6] = step_scalar(weight_decay);
        args[7] = step_scalar(eps);
        args[8] = step_flag(maximize);
        if (step_opt_tensor(grad_scale)) args[9] = step_tensor(grad_scale.toTensor());
        if (step_opt_tensor(found_inf)) args[10] = step_tensor(found_inf.toTensor());
        args[11] = step_flag(weight_decay != 0);
      },
      [&](size_t) {
        std::vector<int> t = {0, 2};
        if (step_opt_tensor(grad_scale)) t.push_back(1);
        return t;
      });
}

// GradScaler's _amp_foreach_non_finite_check_and_unscale_(grads,
// found_inf, inv_scale): one tpuc::amp_unscale program per gradient,
// writing the gradient and found_inf in place. Anything the program does
// not take (a CPU tensor, an integer gradient, a found_inf that is not a
// one-element float) goes to the CPU kernel, which raises PyTorch's errors.
void amp_unscale_kernel(const c10::OperatorHandle& op,
                        torch::jit::Stack* stack) {
  static const int unscale_index = tpuc_op_find("tpuc::amp_unscale");
  size_t nargs = op.schema().arguments().size();
  size_t base = stack->size() - nargs;
  std::vector<at::Tensor> grads = (*stack)[base].toTensorVector();
  at::Tensor found_inf = (*stack)[base + 1].toTensor();
  at::Tensor inv_scale = (*stack)[base + 2].toTensor();
  auto on_tpu = [&](const at::Tensor& t) {
    return t.is_privateuseone() && !t.is_conj() && !t.is_neg() &&
           t.device() == found_inf.device();
  };
  bool ok = unscale_index >= 0 && on_tpu(found_inf) && on_tpu(inv_scale) &&
            found_inf.numel() == 1 && inv_scale.numel() == 1 &&
            found_inf.scalar_type() == at::kFloat &&
            inv_scale.scalar_type() == at::kFloat;
  for (size_t i = 0; ok && i < grads.size(); i++)
    ok = on_tpu(grads[i]) && at::isFloatingType(grads[i].scalar_type()) &&
         grads[i].layout() == at::kStrided;
  if (!ok) return cpu_fallback_kernel(op, stack);
  std::vector<at::Tensor> live;  // (an empty gradient has nothing to check)
  for (const at::Tensor& g : grads)
    if (g.numel() > 0) live.push_back(g);
  if (live.empty()) return torch::jit::drop(*stack, nargs);
  run_steps(
      op, stack, unscale_index, live.size(), found_inf.device(), 3,
      [&](size_t i, tpuc_op_arg* args) {
        args[0] = step_tensor(live[i]);
        args[1] = step_tensor(found_inf);
        args[2] = step_tensor(inv_scale);
      },
      [&](size_t) { return std::vector<int>{0, 1}; });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"_fused_adam_", "_fused_adamw_",
                           "_fused_adam_.tensor_lr",
                           "_fused_adamw_.tensor_lr"})
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&fused_adam_kernel>());
  for (const char* name : {"_fused_sgd_", "_fused_sgd_.tensor_lr"})
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&fused_sgd_kernel>());
  for (const char* name : {"_fused_adagrad_", "_fused_adagrad_.tensor_lr"})
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&fused_adagrad_kernel>());
  m.impl("_amp_foreach_non_finite_check_and_unscale_",
         torch::CppFunction::makeFromBoxedFunction<&amp_unscale_kernel>());
  for (size_t i = 0; i < tpuc_op_table_size(); i++) {
    std::string name = tpuc_op_table_name(i);
    if (name.rfind("aten::", 0) != 0) continue;  // internal to tpuc
    name = name.substr(6);
    m.impl(name.c_str(),
           torch::CppFunction::makeFromBoxedFunction<&native_kernel>());
  }
}

}  // namespace tpuc_torch
