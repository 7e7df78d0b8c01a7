// tpuc._C: the Python entry points of the binding (runtime start-up, device
// queries, memory statistics, fallback report, compile-cache statistics).
#include <ATen/ThreadLocalPythonObjects.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/extension.h>

#include "tpu_runtime.h"

namespace tpuc_torch {
void register_hooks();
void register_graph(pybind11::module& m);
void register_distributed(pybind11::module& m);
}  // namespace tpuc_torch

namespace py = pybind11;
using namespace tpuc_torch;

namespace {

py::dict plugin_info() {
  tpuc_plugin* plugin = nullptr;
  check(tpuc_client_plugin(client(), &plugin));
  tpuc_plugin_info info;
  check(tpuc_plugin_get_info(plugin, &info));
  const char *name = nullptr, *version = nullptr;
  check(tpuc_client_platform(client(), &name, &version));
  py::dict d;
  d["path"] = info.path;
  d["package"] = info.package;
  d["package_version"] = info.package_version;
  d["pjrt_api"] =
      std::to_string(info.api_major) + "." + std::to_string(info.api_minor);
  d["xla_version"] = info.xla_version;
  d["stablehlo"] = std::to_string(info.stablehlo_current[0]) + "." +
                   std::to_string(info.stablehlo_current[1]) + "." +
                   std::to_string(info.stablehlo_current[2]);
  d["platform"] = name;
  d["platform_version"] = version;
  return d;
}

py::dict device_info(int device) {
  tpuc_device_info info;
  check(tpuc_client_device_info(client(), device, &info));
  tpuc_memory_stats ms;
  check(tpuc_client_memory_stats(client(), device, &ms));
  py::dict d;
  d["kind"] = info.kind;
  d["description"] = info.description;
  d["id"] = info.id;
  d["memory_limit"] = ms.available ? ms.bytes_limit : -1;
  d["memory_in_use"] = ms.available ? ms.bytes_in_use : -1;
  return d;
}

py::dict memory_stats(int device) {
  int64_t in_use = 0, peak = 0;
  check(tpuc_storage_bytes(client(), device, &in_use, &peak));
  py::dict d;
  d["allocated_bytes.all.current"] = in_use;
  d["allocated_bytes.all.peak"] = peak;
  d["reserved_bytes.all.current"] = in_use;
  d["reserved_bytes.all.peak"] = peak;
  return d;
}

py::dict fallback_report() {
  const tpuc_fallback_entry* e = nullptr;
  size_t n = 0;
  check(tpuc_fallback_report(&e, &n));
  py::dict d;
  for (size_t i = 0; i < n; i++) d[py::str(e[i].op)] = e[i].count;
  return d;
}

py::dict cache_stats() {
  tpuc_cache_stats s;
  check(tpuc_cache_get_stats(client(), &s));
  py::dict d;
  d["memory_hits"] = s.memory_hits;
  d["disk_hits"] = s.disk_hits;
  d["misses"] = s.misses;
  d["disk_writes"] = s.disk_writes;
  d["disk_corrupt"] = s.disk_corrupt;
  d["compile_seconds"] = s.compile_seconds;
  d["load_seconds"] = s.load_seconds;
  d["memory_entries"] = s.memory_entries;
  d["disk_bytes_written"] = s.disk_bytes_written;
  d["inflight_waits"] = s.inflight_waits;
  d["prefetched"] = s.prefetched;
  d["prefetch_seconds"] = s.prefetch_seconds;
  d["prefetch_hits"] = s.prefetch_hits;
  d["compiled_ahead"] = s.compiled_ahead;
  d["cache_dir"] = tpuc_cache_dir(client());
  return d;
}

// A per-thread eager mode also holds on the threads PyTorch runs work of
// that thread on (autograd's device threads): it is kept in PyTorch's
// thread-local Python objects, which at::ThreadLocalState carries there.
// The value is one of three objects made at import, so a reader compares
// pointers and needs no GIL.
const char kModeKey[] = "tpuc_eager_mode";
PyObject* g_mode_objects[3];

int inherited_eager_mode() {
  static const std::string key(kModeKey);
  if (!at::impl::ThreadLocalPythonObjects::contains(key)) return -1;
  const auto& o = at::impl::ThreadLocalPythonObjects::get(key);
  if (!o) return -1;
  PyObject* p = o->ptr(&o->pyinterpreter());
  for (int i = 0; i < 3; i++)
    if (p == g_mode_objects[i]) return i;
  return -1;
}

// Under the GIL: what this thread's override is now (-1: none).
void stash_thread_mode(int mode) {
  PyObject* obj = mode >= 0 ? g_mode_objects[mode] : Py_None;
  Py_INCREF(obj);
  at::impl::ThreadLocalPythonObjects::set(
      kModeKey, std::make_shared<c10::SafePyObject>(obj, getPyInterpreter()));
}

py::dict fused_stats() {
  tpuc_fused_stats s;
  tpuc_fused_get_stats(&s);
  py::dict d;
  d["ops_recorded"] = s.ops_recorded;
  d["segments"] = s.segments;
  d["segments_dropped"] = s.segments_dropped;
  d["ops_run"] = s.ops_run;
  d["outputs"] = s.outputs;
  d["compiles"] = s.compiles;
  d["table_hits"] = s.table_hits;
  d["cache_hits"] = s.cache_hits;
  d["disk_hits"] = s.disk_hits;
  d["recompiles"] = s.recompiles;
  d["donated"] = s.donated;
  d["background"] = s.background;
  d["by_ops"] = s.by_ops;
  d["fuse_after"] = s.fuse_after;
  d["fuse_after_small"] = s.fuse_after_small;
  d["small_compiled"] = s.small_compiled;
  d["group_segments"] = s.group_segments;
  d["compile_seconds"] = s.compile_seconds;
  py::dict why;
  for (int r = 0; r < TPUC_FUSED_REASONS; r++)
    why[tpuc_fused_reason_name((tpuc_fused_reason)r)] = s.by_reason[r];
  d["by_reason"] = why;
  return d;
}

py::list fused_events() {
  std::vector<tpuc_fused_event> ev(256);
  size_t n = tpuc_fused_events(ev.data(), ev.size());
  static const char* kSource[] = {"program table", "compiled",
                                  "compile cache (memory)",
                                  "compile cache (disk)", "op by op"};
  py::list out;
  for (size_t i = 0; i < n; i++) {
    py::dict d;
    d["reason"] = tpuc_fused_reason_name(ev[i].reason);
    d["ops"] = ev[i].ops;
    d["outputs"] = ev[i].outputs;
    d["ran"] = !ev[i].dropped;
    d["program"] = ev[i].dropped ? "" : kSource[ev[i].source >= 0 && ev[i].source <= 4 ? ev[i].source : 1];
    d["seconds"] = ev[i].seconds;
    d["background"] = ev[i].background;
    d["first_op"] = ev[i].first_op;
    d["last_op"] = ev[i].last_op;
    d["changed"] = ev[i].changed;
    out.append(d);
  }
  return out;
}

void set_fallback_mode(const std::string& mode) {
  if (mode == "warn")
    tpuc_fallback_set_mode(TPUC_FALLBACK_WARN);
  else if (mode == "silent")
    tpuc_fallback_set_mode(TPUC_FALLBACK_SILENT);
  else if (mode == "error")
    tpuc_fallback_set_mode(TPUC_FALLBACK_ERROR);
  else
    TORCH_CHECK_VALUE(false,
                      "fallback mode must be warn, silent or error, "
                      "got '",
                      mode, "'");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tpuc: PyTorch's tpu device over the PJRT C API";
  for (int i = 0; i < 3; i++)
    g_mode_objects[i] =
        PyUnicode_FromString(tpuc_eager_mode_name((tpuc_eager_mode)i));
  tpuc_eager_set_inherited(inherited_eager_mode);
  m.def("_init", [](const std::vector<std::string>& site_dirs) {
    register_hooks();
    init_runtime(site_dirs);
  });
  m.def("_register_hooks", &register_hooks);
  m.def("_runtime_error", [] { return runtime_error(); });
  m.def("_is_in_bad_fork", [] { return in_bad_fork(); });
  m.def("is_available", [] { return runtime_ready() && device_count() > 0; });
  m.def("device_count", [] { return device_count(); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device",
        [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("synchronize", [] {
    py::gil_scoped_release release;
    synchronize_all();
  });
  m.def("eager_mode", [] {
    return std::string(tpuc_eager_mode_name(tpuc_eager_mode_current()));
  });
  m.def("eager_mode_global", [] {
    return std::string(tpuc_eager_mode_name(tpuc_eager_mode_global()));
  });
  m.def("eager_thread_override", [] {
    int m = tpuc_eager_thread_override();
    return m < 0 ? std::string()
                 : std::string(tpuc_eager_mode_name((tpuc_eager_mode)m));
  });
  m.def("set_eager_mode", [](const std::string& mode, bool thread) {
    int m = mode.empty() && thread ? -1 : tpuc_eager_mode_parse(mode.c_str());
    TORCH_CHECK_VALUE(m >= 0 || (thread && mode.empty()),
                      "eager mode must be 'debug', 'strict' or 'fused', got '",
                      mode, "'");
    if (thread) stash_thread_mode(m);
    py::gil_scoped_release release;
    if (thread)
      check(tpuc_eager_set_thread_override(m));
    else
      check(tpuc_eager_set_global((tpuc_eager_mode)m));
  });
  m.def("fused_flush", [] {
    py::gil_scoped_release release;
    check(tpuc_fused_flush(client(), TPUC_FUSED_SYNC));
  });
  m.def("fused_stats", &fused_stats);
  m.def("fused_events", &fused_events);
  m.def("fused_pending", [] { return tpuc_fused_pending(); });
  m.def("fused_reset_stats", [] { tpuc_fused_reset_stats(); });
  m.def("plugin_info", &plugin_info);
  m.def("device_info", &device_info);
  m.def("memory_stats", &memory_stats);
  m.def("reset_peak_memory_stats",
        [](int d) { check(tpuc_storage_reset_peak(client(), d)); });
  m.def("fallback_report", &fallback_report);
  m.def("fallback_reset", [] { tpuc_fallback_reset(); });
  m.def("set_fallback_mode", &set_fallback_mode);
  m.def("compile_cache_stats", &cache_stats);
  m.def("default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  register_graph(m);
  register_distributed(m);
  m.def("compile_cache_clear",
        [](bool disk) { check(tpuc_cache_clear(client(), disk)); });
}
