// tpuc._C's compiled-graph entry points (tpuc/graph.h): tensors in, views
// to C, new storages and tensors out. The capture, the program and the
// replay are the C runtime's; this file only translates.
#include <c10/core/CPUAllocator.h>
#include <torch/extension.h>

#include <memory>
#include <string>

#include "tpu_runtime.h"

namespace tpuc_torch {

namespace py = pybind11;

namespace {

// A captured graph, owned by Python.
struct Graph {
  tpuc_graph* g = nullptr;
  int device = 0;
  explicit Graph(tpuc_graph* graph, int dev) : g(graph), device(dev) {}
  ~Graph() { tpuc_graph_release(g); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
};

// Views of the tpu tensors of `inputs` on `device`; false (and `why`) for
// anything a graph cannot take.
bool views_of(const std::vector<at::Tensor>& inputs, int device,
              std::vector<tpuc_view>* out, std::string* why) {
  out->clear();
  out->reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); i++) {
    const at::Tensor& t = inputs[i];
    if (!t.defined()) {
      *why = "input " + std::to_string(i) + " is an undefined tensor";
      return false;
    }
    if (!t.is_privateuseone() || t.device().index() != device) {
      *why = "input " + std::to_string(i) + " is on " + t.device().str() +
             ", the graph runs on tpu:" + std::to_string(device);
      return false;
    }
    if (t.layout() != c10::kStrided || t.is_conj() || t.is_neg() ||
        t.is_quantized() || t.dim() > TPUC_MAX_RANK) {
      *why = "input " + std::to_string(i) +
             " is not a plain strided tensor "
             "(sparse, quantized, a lazy conj/neg bit, or too many dims)";
      return false;
    }
    out->push_back(view_of(t));
  }
  return true;
}

// The generator state (seed, offset) of `device`'s default generator.
void rng_state(int device, uint64_t* seed, uint64_t* offset) {
  at::Generator gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  *seed = gen.current_seed();
  *offset = gen.get_offset();
}

// Takes `n` draws from `device`'s default generator: their seed and first
// offset.
void rng_reserve(int device, uint64_t n, uint64_t* seed, uint64_t* offset) {
  at::Generator gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  *seed = gen.current_seed();
  *offset = gen.get_offset();
  if (n > 0) gen.set_offset(*offset + n);
}

// Starts capturing; returns "" or why the inputs cannot be captured (then
// nothing was started).
std::string capture_begin(int device, const std::vector<at::Tensor>& inputs) {
  std::vector<tpuc_view> views;
  std::string why;
  if (!views_of(inputs, device, &views, &why)) return why;
  uint64_t seed = 0, offset = 0;
  rng_state(device, &seed, &offset);
  tpuc_status* st = nullptr;
  {
    py::gil_scoped_release release;
    st = tpuc_graph_capture_begin(client(), device, views.data(), views.size(),
                                  seed, offset);
  }
  if (st != nullptr && tpuc_status_code(st) == TPUC_FAILED_PRECONDITION) {
    // A capture already running on this thread or device (a compiled
    // function called while another graph is captured): run eagerly.
    std::string msg = tpuc_status_message(st);
    tpuc_status_free(st);
    return msg;
  }
  check(st);
  return "";
}

// Ends the capture: (Graph or None, why).
py::tuple capture_end(int device, const std::vector<at::Tensor>& outputs,
                      bool abandon) {
  std::vector<tpuc_view> views;
  std::string why;
  if (!abandon && !views_of(outputs, device, &views, &why)) {
    abandon = true;
    why = "output: " + why;
  }
  tpuc_graph* g = nullptr;
  char buf[256] = {0};
  tpuc_status* st = nullptr;
  {
    py::gil_scoped_release release;
    st = tpuc_graph_capture_end(client(), device, views.data(), views.size(),
                                abandon, &g, buf, sizeof buf);
  }
  if (st != nullptr && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
    // An argument check leaves the decision to the CPU: the caller runs
    // the call eagerly.
    tpuc_status_free(st);
    return py::make_tuple(py::bool_(false), std::string());
  }
  check(st);
  if (why.empty()) why = buf;
  if (g == nullptr) return py::make_tuple(py::none(), why);
  return py::make_tuple(std::make_shared<Graph>(g, device), why);
}

// Runs the graph on `inputs`; None when they do not match it, False when
// an argument check leaves the decision to the CPU (the caller runs the
// call eagerly, which raises PyTorch's own error).
py::object replay(const std::shared_ptr<Graph>& graph,
                  const std::vector<at::Tensor>& inputs) {
  tpuc_graph* g = graph->g;
  int device = graph->device;
  std::vector<tpuc_view> views;
  std::string why;
  if (!views_of(inputs, device, &views, &why) ||
      !tpuc_graph_matches(g, views.data(), views.size()))
    return py::none();
  // New storages for the outputs, on the graph's device.
  c10::Allocator* alloc = c10::GetAllocator(c10::DeviceType::PrivateUse1);
  size_t nnew = tpuc_graph_num_storages(g);
  std::vector<c10::Storage> storages;
  std::vector<tpuc_storage*> raw(nnew);
  storages.reserve(nnew);
  c10::DeviceIndex before = current_device();
  if (before != device)
    set_current_device(static_cast<c10::DeviceIndex>(device));
  for (size_t j = 0; j < nnew; j++) {
    storages.emplace_back(c10::Storage::use_byte_size_t(),
                          tpuc_graph_storage_nbytes(g, j), alloc,
                          /*resizable=*/true);
    raw[j] =
        static_cast<tpuc_storage*>(storages.back().data_ptr().get_context());
  }
  if (before != device) set_current_device(before);
  uint64_t seed = 0, offset = 0;
  rng_reserve(device, tpuc_graph_rng_draws(g), &seed, &offset);
  tpuc_status* st = nullptr;
  {
    py::gil_scoped_release release;
    st = tpuc_graph_replay(g, views.data(), views.size(), raw.data(), nnew,
                           seed, offset);
  }
  if (st != nullptr && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
    tpuc_status_free(st);
    return py::bool_(false);
  }
  check(st);
  size_t nout = tpuc_graph_num_outputs(g);
  py::list out(nout);
  c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  for (size_t k = 0; k < nout; k++) {
    const tpuc_graph_output* o = tpuc_graph_output_at(g, k);
    c10::Storage s =
        o->input >= 0 ? inputs[o->input].storage() : storages[o->storage];
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(s), keys,
        caffe2::TypeMeta::fromScalarType(to_scalar_type(o->dtype)));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(
        c10::IntArrayRef(o->sizes, o->rank),
        c10::IntArrayRef(o->strides, o->rank), o->offset);
    out[k] = py::cast(t);
  }
  return std::move(out);
}

// Keeps `graph`'s record under `key` (with `extra`): whether it was
// written.
bool save(const std::shared_ptr<Graph>& graph, const py::bytes& key,
          const py::bytes& extra) {
  std::string k = key, e = extra;
  bool saved = false;
  tpuc_status* st = nullptr;
  {
    py::gil_scoped_release release;
    st = tpuc_graph_save(graph->g, k.data(), k.size(), e.data(), e.size(),
                         &saved);
  }
  check(st);
  return saved;
}

// The graph recorded under `key` for `inputs` on `device`: (Graph, extra),
// or None.
py::object load(int device, const py::bytes& key,
                const std::vector<at::Tensor>& inputs) {
  std::vector<tpuc_view> views;
  std::string why;
  if (!views_of(inputs, device, &views, &why)) return py::none();
  std::string k = key;
  tpuc_graph* g = nullptr;
  char* extra = nullptr;
  size_t extra_len = 0;
  tpuc_status* st = nullptr;
  {
    py::gil_scoped_release release;
    st = tpuc_graph_load(client(), device, k.data(), k.size(), views.data(),
                         views.size(), &g, &extra, &extra_len);
  }
  check(st);
  if (g == nullptr) return py::none();
  py::bytes e(extra, extra_len);
  free(extra);
  return py::make_tuple(std::make_shared<Graph>(g, device), e);
}

py::dict graph_stats() {
  tpuc_graph_stats s;
  tpuc_graph_get_stats(&s);
  py::dict d;
  d["captures"] = s.captures;
  d["capture_failures"] = s.capture_failures;
  d["replays"] = s.replays;
  d["ops_replayed"] = s.ops_replayed;
  d["compiles"] = s.compiles;
  d["cache_hits"] = s.cache_hits;
  d["disk_hits"] = s.disk_hits;
  d["variants"] = s.variants;
  d["donated"] = s.donated;
  d["compile_seconds"] = s.compile_seconds;
  d["execute_seconds"] = s.execute_seconds;
  d["records_saved"] = s.records_saved;
  d["records_loaded"] = s.records_loaded;
  return d;
}

}  // namespace

void register_graph(py::module& m) {
  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph")
      .def_property_readonly(
          "num_ops", [](const Graph& g) { return tpuc_graph_num_ops(g.g); })
      .def_property_readonly("rng_draws", [](const Graph& g) {
        return tpuc_graph_rng_draws(g.g);
      });
  m.def("graph_capture_begin", &capture_begin);
  m.def("graph_capture_end", &capture_end);
  m.def("graph_capture_broken",
        [](int device) { return tpuc_graph_capture_broken(client(), device); });
  m.def("graph_capture_break", [](const std::string& why) {
    tpuc_graph_capture_break(client(), why.c_str());
  });
  m.def("graph_replay", &replay);
  m.def("graph_save", &save);
  m.def("graph_load", &load);
  m.def("graph_stats", &graph_stats);
  m.def("graph_reset_stats", [] { tpuc_graph_reset_stats(); });
  m.def("graph_set_timing", [](bool on) { tpuc_graph_set_timing(on); });
}

}  // namespace tpuc_torch
