// Process-wide runtime state of the binding and status translation.
#include "tpu_runtime.h"

#include <cstdlib>

#include <c10/util/Exception.h>

#include <pthread.h>

#include <mutex>

namespace tpuc_torch {
namespace {

std::mutex g_mu;
tpuc_client* g_client = nullptr;
// Set in a child forked after the client was created: the plugin's threads
// and its device state did not come along, so the device cannot be used
// there (as CUDA after a fork).
bool g_bad_fork = false;

void on_fork_child() {
  if (g_client != nullptr) g_bad_fork = true;
}

void check_not_forked() {
  TORCH_CHECK(!g_bad_fork,
              "Cannot re-initialize tpu in forked subprocess. To use tpu "
              "with multiprocessing, you must use the 'spawn' start method "
              "(torch.multiprocessing.spawn, or "
              "multiprocessing.set_start_method('spawn')), or torchrun");
}
std::string g_error = "tpuc runtime not initialized";
thread_local c10::DeviceIndex t_device = 0;
thread_local bool t_service = false;

}  // namespace

bool launch_blocking() {
  static const bool on = [] {
    const char* v = std::getenv("TPUC_LAUNCH_BLOCKING");
    return v != nullptr && v[0] != '\0' && std::string(v) != "0";
  }();
  return on;
}

void check(tpuc_status* st) {
  if (st == nullptr) return;
  std::string msg = tpuc_status_message(st);
  tpuc_code code = tpuc_status_code(st);
  tpuc_status_free(st);
  switch (code) {
    case TPUC_OUT_OF_RANGE:
      TORCH_CHECK_INDEX(false, msg);
    case TPUC_RESOURCE_EXHAUSTED:
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu: ", msg);
    case TPUC_UNIMPLEMENTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    default:
      TORCH_CHECK(false, msg);
  }
}

bool in_bad_fork() { return g_bad_fork; }

void init_runtime(const std::vector<std::string>& site_dirs) {
  std::lock_guard<std::mutex> lock(g_mu);
  check_not_forked();
  if (g_client != nullptr) return;
  static bool once = [] {
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
  }();
  (void)once;
  std::vector<const char*> dirs;
  for (const auto& d : site_dirs) dirs.push_back(d.c_str());
  tpuc_plugin* plugin = nullptr;
  tpuc_status* st =
      tpuc_plugin_load(nullptr, dirs.data(), dirs.size(), &plugin);
  // TPUC_CPU_DEVICE_COUNT: how many devices the CPU plugin makes (its own
  // default otherwise); other plugins ignore it.
  tpuc_client_options options{};
  if (const char* n = std::getenv("TPUC_CPU_DEVICE_COUNT")) {
    char* end = nullptr;
    long v = std::strtol(n, &end, 10);
    if (end == n || *end != '\0' || v < 1 || v > 4096) {
      g_error = std::string("TPUC_CPU_DEVICE_COUNT must be a positive "
                            "number, got '") + n + "'";
      TORCH_CHECK_VALUE(false, g_error);
    }
    options.cpu_device_count = static_cast<int>(v);
  }
  if (st == nullptr) st = tpuc_client_create(plugin, &options, &g_client);
  if (st != nullptr) {
    g_error = tpuc_status_message(st);
    g_client = nullptr;
  }
  check(st);
  g_error.clear();
}

bool runtime_ready() { return g_client != nullptr; }
const std::string& runtime_error() { return g_error; }

tpuc_status* synchronize_status() {
  tpuc_client* c = client();
  tpuc_status* st = tpuc_fused_flush(c, TPUC_FUSED_SYNC);
  tpuc_status* st2 = tpuc_client_synchronize(c);
  if (st == nullptr) return st2;
  tpuc_status_free(st2);
  return st;
}

void synchronize_all() { check(synchronize_status()); }

tpuc_client* client() {
  check_not_forked();
  TORCH_CHECK(g_client != nullptr,
              "the tpu device is not available: ", g_error);
  return g_client;
}

int device_count() {
  if (g_client == nullptr) return 0;
  int n = 0;
  check(tpuc_client_device_count(g_client, &n));
  return n;
}

tpuc_dtype to_tpuc_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBool:
      return TPUC_DTYPE_PRED;
    case at::kChar:
      return TPUC_DTYPE_S8;
    case at::kShort:
      return TPUC_DTYPE_S16;
    case at::kInt:
      return TPUC_DTYPE_S32;
    case at::kLong:
      return TPUC_DTYPE_S64;
    case at::kByte:
      return TPUC_DTYPE_U8;
    case at::kUInt16:
      return TPUC_DTYPE_U16;
    case at::kUInt32:
      return TPUC_DTYPE_U32;
    case at::kUInt64:
      return TPUC_DTYPE_U64;
    case at::kHalf:
      return TPUC_DTYPE_F16;
    case at::kBFloat16:
      return TPUC_DTYPE_BF16;
    case at::kFloat:
      return TPUC_DTYPE_F32;
    case at::kDouble:
      return TPUC_DTYPE_F64;
    case at::kComplexFloat:
      return TPUC_DTYPE_C64;
    case at::kComplexDouble:
      return TPUC_DTYPE_C128;
    case at::kFloat8_e5m2:
      return TPUC_DTYPE_F8E5M2;
    case at::kFloat8_e4m3fn:
      return TPUC_DTYPE_F8E4M3FN;
    case at::kFloat8_e5m2fnuz:
      return TPUC_DTYPE_F8E5M2FNUZ;
    case at::kFloat8_e4m3fnuz:
      return TPUC_DTYPE_F8E4M3FNUZ;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t);
  }
}

at::ScalarType to_scalar_type(tpuc_dtype d) {
  switch (d) {
    case TPUC_DTYPE_PRED:
      return at::kBool;
    case TPUC_DTYPE_S8:
      return at::kChar;
    case TPUC_DTYPE_S16:
      return at::kShort;
    case TPUC_DTYPE_S32:
      return at::kInt;
    case TPUC_DTYPE_S64:
      return at::kLong;
    case TPUC_DTYPE_U8:
      return at::kByte;
    case TPUC_DTYPE_U16:
      return at::kUInt16;
    case TPUC_DTYPE_U32:
      return at::kUInt32;
    case TPUC_DTYPE_U64:
      return at::kUInt64;
    case TPUC_DTYPE_F16:
      return at::kHalf;
    case TPUC_DTYPE_BF16:
      return at::kBFloat16;
    case TPUC_DTYPE_F32:
      return at::kFloat;
    case TPUC_DTYPE_F64:
      return at::kDouble;
    case TPUC_DTYPE_C64:
      return at::kComplexFloat;
    case TPUC_DTYPE_C128:
      return at::kComplexDouble;
    case TPUC_DTYPE_F8E5M2:
      return at::kFloat8_e5m2;
    case TPUC_DTYPE_F8E4M3FN:
      return at::kFloat8_e4m3fn;
    case TPUC_DTYPE_F8E5M2FNUZ:
      return at::kFloat8_e5m2fnuz;
    case TPUC_DTYPE_F8E4M3FNUZ:
      return at::kFloat8_e4m3fnuz;
    default:
      TORCH_CHECK(false, "invalid tpuc dtype ", static_cast<int>(d));
  }
}

tpuc_storage* storage_of(const at::Tensor& t) {
  check_not_forked();
  auto* s = static_cast<tpuc_storage*>(t.storage().data_ptr().get_context());
  TORCH_CHECK(s != nullptr, "tensor has no tpu storage");
  return s;
}

tpuc_view view_of(const at::Tensor& t) {
  TORCH_CHECK(t.dim() <= TPUC_MAX_RANK, "tpu tensors have at most ",
              TPUC_MAX_RANK, " dimensions, got ", t.dim());
  tpuc_view v{};
  v.storage = storage_of(t);
  v.dtype = to_tpuc_dtype(t.scalar_type());
  v.rank = static_cast<int>(t.dim());
  for (int i = 0; i < v.rank; i++) {
    v.sizes[i] = t.size(i);
    v.strides[i] = t.stride(i);
  }
  v.offset = t.storage_offset();
  return v;
}

void mark_service_thread() { t_service = true; }
bool is_service_thread() { return t_service; }

c10::DeviceIndex current_device() { return t_device; }

void set_current_device(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "invalid tpu device ",
              static_cast<int>(index), ": there are ", device_count(),
              " tpu device(s)");
  t_device = index;
}

}  // namespace tpuc_torch
