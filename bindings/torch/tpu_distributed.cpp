// The `tpu` c10d backend: torch.distributed's ProcessGroup operations on tpu
// tensors. Two transports, both driven from C:
//  - ranks that are threads of this process, each on its own device: every
//    collective is ONE program across their devices (tpuc/group.h,
//    tpuc/collective.h), and point-to-point messages are device-to-device
//    copies;
//  - ranks in other processes (torchrun, mp.spawn): the tensors are staged
//    through the host and the collective runs on torch.distributed's own
//    Gloo engine over CPU tensors. The input values are taken when the op is
//    called (a fused segment is cut and issued, not waited for), the
//    outputs get values that arrive later from the host (tpuc_transfer),
//    and a worker thread per backend does the copies and the Gloo op in
//    call order, so the caller goes on recording while the data moves.
// This file translates c10d's calls into those; it holds no tensor
// semantics of its own beyond laying lists out flat.
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/exception.h>
#include <torch/csrc/utils/pybind.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <tuple>

#include "tpu_runtime.h"

namespace tpuc_torch {

namespace py = pybind11;

namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// ---- tensors as flat storage values ----------------------------------------

bool whole_storage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         static_cast<size_t>(t.numel() * t.element_size()) ==
             t.storage().nbytes();
}

// The tensor's bytes as they are now: a flat storage value (retained).
tpuc_buffer* flat_value(const at::Tensor& t) {
  at::Tensor src = whole_storage(t) ? t : t.clone(at::MemoryFormat::Contiguous);
  tpuc_buffer* b = nullptr;
  check(tpuc_storage_value(storage_of(src), &b));
  return b;
}

// Makes `flat` (a storage value of out's byte size) the value of out's
// elements.
void assign_flat(const at::Tensor& out, tpuc_buffer* flat) {
  if (whole_storage(out)) {
    check(tpuc_storage_set_value(storage_of(out), flat));
    return;
  }
  at::Tensor tmp = at::empty(out.sizes(), out.options());
  check(tpuc_storage_set_value(storage_of(tmp), flat));
  out.copy_(tmp);
}

// The element type a storage keeps `type`'s bytes in.
tpuc_dtype value_type_of(at::ScalarType type) {
  tpuc_dtype d = to_tpuc_dtype(type);
  if (d == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(d)) return TPUC_DTYPE_U8;
  return d;
}

// "float32", as torch prints dtypes.
std::string dtype_name(at::ScalarType t) { return c10::getDtypeNames(t).first; }

// The torch.distributed function an op type comes from.
const char* op_name(OpType t) {
  switch (t) {
    case OpType::BROADCAST:
      return "broadcast";
    case OpType::ALLREDUCE:
      return "all_reduce";
    case OpType::ALLREDUCE_COALESCED:
      return "all_reduce_coalesced";
    case OpType::REDUCE:
      return "reduce";
    case OpType::ALLGATHER:
      return "all_gather";
    case OpType::_ALLGATHER_BASE:
      return "all_gather_into_tensor";
    case OpType::ALLGATHER_COALESCED:
      return "all_gather_coalesced";
    case OpType::GATHER:
      return "gather";
    case OpType::SCATTER:
      return "scatter";
    case OpType::REDUCE_SCATTER:
      return "reduce_scatter";
    case OpType::_REDUCE_SCATTER_BASE:
      return "reduce_scatter_tensor";
    case OpType::ALLTOALL_BASE:
      return "all_to_all_single";
    case OpType::ALLTOALL:
      return "all_to_all";
    case OpType::SEND:
      return "send";
    case OpType::RECV:
      return "recv";
    case OpType::BARRIER:
      return "barrier";
    case OpType::COALESCED:
      return "coalesced collectives";
    default:
      return "collective";
  }
}

// An exception's message without the C++ backtrace c10 appends.
std::string message_of(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e))
    return c->what_without_backtrace();
  return e.what();
}

std::string shape_str(const at::Tensor& t) {
  std::ostringstream s;
  s << dtype_name(t.scalar_type()) << t.sizes();
  return s.str();
}

void check_tpu(const at::Tensor& t, const char* op) {
  TORCH_CHECK_VALUE(
      t.defined() && t.is_privateuseone() && t.layout() == c10::kStrided,
      "tpu ", op, ": tensors must be dense tpu tensors, got ",
      t.defined() ? t.toString() : "an undefined tensor");
  TORCH_CHECK_VALUE(!t.is_conj() && !t.is_neg(), "tpu ", op,
                    ": resolve the lazy conj/neg of a tensor first "
                    "(resolve_conj / resolve_neg)");
}

int tpu_index(const at::Tensor& t) { return t.device().index(); }

// ---- how host tensors travel through Gloo ----------------------------------
// Gloo moves and reduces fewer dtypes than tpu holds (no int16, no
// unsigned ints past uint8, no complex gathers). Collectives that only
// move data carry every tensor as its bytes (dim 0 kept, for all-to-all's
// row splits); reductions carry int16 and uint16 as int32, uint32 as int64
// (results truncated back: sums and products wrap as on the device), and
// uint64 as int64 (the same bits; min and max with the sign bit flipped,
// which maps unsigned order onto signed order).

enum class Carry { kBytes, kReduce };

at::Tensor bytes_of(const at::Tensor& h) {
  int64_t rows = h.dim() ? h.size(0) : 1;
  int64_t per = rows ? h.numel() / rows : 0;
  return h.reshape({rows, per}).view(at::kByte);
}

at::ScalarType reduce_carrier(at::ScalarType t) {
  switch (t) {
    case at::kShort:
    case at::kUInt16:
      return at::kInt;
    case at::kUInt32:
    case at::kUInt64:
      return at::kLong;
    default:
      return t;
  }
}

bool flips(at::ScalarType t, const c10d::ReduceOp& op) {
  return t == at::kUInt64 &&
         (op.op_ == c10d::ReduceOp::MIN || op.op_ == c10d::ReduceOp::MAX);
}

void flip_sign(const at::Tensor& h) {
  h.bitwise_xor_(std::numeric_limits<int64_t>::min());
}

// Reductions are elementwise: their host tensors go flat (1-D), so a list
// laid out in one tensor meets Gloo's shape checks.
at::Tensor to_carrier(const at::Tensor& h, const c10d::ReduceOp& op) {
  at::Tensor flat = h.reshape({-1});
  if (h.scalar_type() == at::kUInt64) {
    at::Tensor v = flat.view(at::kLong);
    if (flips(h.scalar_type(), op)) flip_sign(v);
    return v;
  }
  at::ScalarType c = reduce_carrier(h.scalar_type());
  return c == h.scalar_type() ? flat : flat.to(c);
}

at::Tensor carrier_like(const at::Tensor& h) {
  return at::empty({h.numel()},
                   h.options().dtype(reduce_carrier(h.scalar_type())));
}

void from_carrier(const at::Tensor& c, const at::Tensor& h,
                  const c10d::ReduceOp& op) {
  at::Tensor flat = h.reshape({-1});
  if (h.scalar_type() == at::kUInt64) {
    if (flips(h.scalar_type(), op)) flip_sign(c);
    if (!c.is_alias_of(h)) flat.view(at::kLong).copy_(c);
    return;
  }
  if (!c.is_alias_of(h)) flat.copy_(c);
}

// ---- host staging buffers
// ---------------------------------------------------- Reused from one
// collective to the next: a fresh large buffer costs a page fault per 4 KiB the
// first time it is written (2.2-2.7 us a page on the CI VM, more than the copy
// itself).
class HostPool {
 public:
  at::Tensor take(at::IntArrayRef sizes, at::ScalarType dtype) {
    int64_t numel = c10::multiply_integers(sizes);
    size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
    at::Tensor raw;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(nbytes);
      if (it != free_.end()) {
        raw = std::move(it->second);
        free_.erase(it);
        cached_ -= nbytes;
      }
    }
    if (!raw.defined())
      raw = at::empty({static_cast<int64_t>(nbytes)}, at::kByte);
    return raw.view(dtype).view(sizes);
  }

  // Gives back a buffer `take` made (keeps at most kMaxBytes in all).
  void give(const at::Tensor& t) {
    if (!t.defined() || t.numel() == 0) return;
    size_t nbytes = t.storage().nbytes();
    at::Tensor raw = at::empty({0}, at::kByte)
                         .set_(t.storage(), 0, {static_cast<int64_t>(nbytes)});
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + nbytes > kMaxBytes) return;
    free_.emplace(nbytes, std::move(raw));
    cached_ += nbytes;
  }

 private:
  static constexpr size_t kMaxBytes = size_t{1} << 30;
  std::mutex mu_;
  std::multimap<size_t, at::Tensor> free_;
  size_t cached_ = 0;
};

// ---- Work ------------------------------------------------------------------

class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, OpType type, std::vector<at::Tensor> outputs,
          const std::vector<c10::Device>& devices)
      : c10d::Work(rank, type), outputs_(std::move(outputs)) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices);
  }

  // Called once, by the worker (or at once for work already done).
  void complete(std::exception_ptr error) {
    finish(error);
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

std::vector<c10::Device> devices_of(const std::vector<at::Tensor>& ts,
                                    int fallback) {
  std::vector<c10::Device> d;
  for (const auto& t : ts)
    if (t.defined() && t.is_privateuseone() &&
        std::find(d.begin(), d.end(), t.device()) == d.end())
      d.push_back(t.device());
  if (d.empty())
    d.emplace_back(c10::DeviceType::PrivateUse1,
                   static_cast<c10::DeviceIndex>(fallback));
  return d;
}

// ---- the staging worker: one thread per backend, jobs in call order -------

class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
  }

  // Returns once every job posted before the call has finished.
  void drain() {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    post([&] {
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
  }

 private:
  void loop() {
    mark_service_thread();
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

// What a rank's call looks like, exchanged before a staged collective so
// that ranks whose calls differ get an error naming them instead of a Gloo
// abort: [kind, dtype, root, count, reduce op, 0] then per rank the
// elements it sends and receives (all-to-all only).
constexpr int kHeadFixed = 6;

std::string describe_head(const int64_t* h, int size) {
  std::ostringstream s;
  if (h[0] != static_cast<int64_t>(OpType::SEND))
    s << op_name(static_cast<OpType>(h[0])) << " of ";
  s << (h[1] >= 0 ? dtype_name(static_cast<at::ScalarType>(h[1])) : "?") << "["
    << h[3] << "]";
  if (h[2] >= 0) s << " with root " << h[2];
  if (h[0] == static_cast<int64_t>(OpType::ALLTOALL_BASE)) {
    s << " sending [";
    for (int r = 0; r < size; r++) s << (r ? ", " : "") << h[kHeadFixed + r];
    s << "] receiving [";
    for (int r = 0; r < size; r++)
      s << (r ? ", " : "") << h[kHeadFixed + size + r];
    s << "]";
  }
  return s.str();
}

bool env_flag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return dflt;
  return std::string(v) != "0";
}

// ---- the backend
// -------------------------------------------------------------

class TpuBackend;
// Backends alive in this process, so that their threads can finish their
// work before the interpreter shuts down (a job's last step may complete a
// future whose callbacks, or free tensors whose Python objects, need the
// interpreter).
std::mutex g_live_mu;
std::vector<TpuBackend*> g_live;

class TpuBackend : public c10d::Backend {
 public:
  TpuBackend(c10::intrusive_ptr<c10d::Backend> gloo,
             c10::intrusive_ptr<c10d::Store> store, int rank, int size,
             int64_t timeout_ms, const std::string& group_key, int device)
      : c10d::Backend(rank, size),
        gloo_(std::move(gloo)),
        store_(std::move(store)),
        timeout_ms_(timeout_ms),
        device_(device),
        check_calls_(env_flag("TPUC_DIST_CHECK", true)) {
    {
      std::lock_guard<std::mutex> lock(g_live_mu);
      g_live.push_back(this);
    }
    if (!group_key.empty()) {
      tpuc_group* g = nullptr;
      tpuc_status* st =
          tpuc_group_join(client(), group_key.c_str(), size, rank, device, &g);
      if (st != nullptr) {
        // Two ranks on one device (or no device of its own): stage through
        // the host instead, which needs no device per rank.
        TORCH_WARN_ONCE(
            "tpu process group: ranks in one process run their "
            "collectives through Gloo on the host: ",
            tpuc_status_message(st));
        tpuc_status_free(st);
      } else {
        group_ = g;
      }
    }
  }

  ~TpuBackend() override {
    {
      std::lock_guard<std::mutex> lock(g_live_mu);
      g_live.erase(std::find(g_live.begin(), g_live.end(), this));
    }
    worker_.reset();  // finishes the queued jobs
    channels_.clear();
    completer_.reset();
    tpuc_group_leave(group_);
  }

  const std::string getBackendName() const override { return "tpu"; }

  // Waits for every job queued so far, on the worker and the channels.
  void drain() {
    if (worker_) worker_->drain();
    std::vector<Channel*> chans;
    {
      std::lock_guard<std::mutex> lock(p2p_mu_);
      for (auto& kv : channels_) chans.push_back(kv.second.get());
    }
    for (auto* c : chans) c->worker.drain();
    if (completer_) completer_->drain();
  }
  bool in_program() const { return group_ != nullptr; }

  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_ms_ = timeout.count();
    gloo_->setTimeout(timeout);
  }
  void setSequenceNumberForGroup() override {
    gloo_->setSequenceNumberForGroup();
  }
  uint64_t getSequenceNumberForGroup() override {
    return gloo_->getSequenceNumberForGroup();
  }

  // -- collectives ------------------------------------------------------------

  WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                    const c10d::AllreduceOptions& opts) override {
    for (auto& t : tensors) check_tpu(t, "all_reduce");
    auto op = opts.reduceOp;
    std::vector<at::Tensor> ins = premultiplied(tensors, op);
    if (in_program() && !has_complex(tensors)) {
      for (size_t i = 0; i < tensors.size(); i++)
        run_collective(OpType::ALLREDUCE, TPUC_COLLECTIVE_ALL_REDUCE,
                       reduce_op(op), 0, ins[i], tensors[i],
                       timeout_of(opts.timeout));
      return done(OpType::ALLREDUCE, tensors);
    }
    c10d::AllreduceOptions g = opts;
    g.reduceOp = gloo_op(op);
    auto work = stage(
        OpType::ALLREDUCE, ins, tensors,
        head(OpType::ALLREDUCE, tensors, -1, op),
        [this, g](std::vector<at::Tensor>& in, std::vector<at::Tensor>&) {
          return gloo_->allreduce(in, g);
        },
        Carry::kReduce, /*inplace=*/true, false, op);
    average(tensors, op);
    return work;
  }

  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override {
    c10d::AllreduceOptions o;
    o.reduceOp = opts.reduceOp;
    o.timeout = opts.timeout;
    return allreduce(tensors, o);
  }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                    const c10d::BroadcastOptions& opts) override {
    for (auto& t : tensors) check_tpu(t, "broadcast");
    int root = static_cast<int>(opts.rootRank);
    if (in_program()) {
      for (auto& t : tensors)
        run_collective(OpType::BROADCAST, TPUC_COLLECTIVE_BROADCAST,
                       TPUC_REDUCE_SUM, root, t, t, timeout_of(opts.timeout));
      return done(OpType::BROADCAST, tensors);
    }
    bool me = root == getRank();
    auto empty = std::vector<at::Tensor>();
    return stage(
        OpType::BROADCAST, me ? tensors : empty, me ? empty : tensors,
        head(OpType::BROADCAST, tensors, root),
        [this, opts](std::vector<at::Tensor>& in,
                     std::vector<at::Tensor>& out) {
          return gloo_->broadcast(in.empty() ? out : in, opts);
        },
        Carry::kBytes, /*inplace=*/false, /*host_out_is_in=*/me);
  }

  WorkPtr reduce(std::vector<at::Tensor>& tensors,
                 const c10d::ReduceOptions& opts) override {
    for (auto& t : tensors) check_tpu(t, "reduce");
    int root = static_cast<int>(opts.rootRank);
    bool me = root == getRank();
    auto op = opts.reduceOp;
    std::vector<at::Tensor> ins = premultiplied(tensors, op);
    if (in_program() && !has_complex(tensors)) {
      for (size_t i = 0; i < tensors.size(); i++) {
        // Every rank computes the reduction; only the root keeps it.
        at::Tensor scratch = at::empty_like(tensors[i]);
        run_collective(OpType::REDUCE, TPUC_COLLECTIVE_ALL_REDUCE,
                       reduce_op(op), 0, ins[i], me ? tensors[i] : scratch,
                       timeout_of(opts.timeout));
      }
      return done(OpType::REDUCE, tensors);
    }
    c10d::ReduceOptions g = opts;
    g.reduceOp = gloo_op(op);
    auto empty = std::vector<at::Tensor>();
    auto work = stage(
        OpType::REDUCE, ins, me ? tensors : empty,
        head(OpType::REDUCE, tensors, root, op),
        [this, g](std::vector<at::Tensor>& in, std::vector<at::Tensor>&) {
          return gloo_->reduce(in, g);
        },
        Carry::kReduce, /*inplace=*/true, false, op);
    if (me) average(tensors, op);
    return work;
  }

  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts) override {
    check_tpu(output, "all_gather_into_tensor");
    check_tpu(input, "all_gather_into_tensor");
    check_sizes(output.numel() == input.numel() * getSize(),
                "all_gather_into_tensor", "the output must hold ", getSize(),
                " times the input's ", input.numel(), " elements, it holds ",
                output.numel());
    std::vector<at::Tensor> outs{output};
    if (in_program()) {
      run_collective(OpType::_ALLGATHER_BASE, TPUC_COLLECTIVE_ALL_GATHER,
                     TPUC_REDUCE_SUM, 0, input, output,
                     timeout_of(opts.timeout));
      return done(OpType::_ALLGATHER_BASE, outs);
    }
    std::vector<at::Tensor> ins{input};
    return stage(
        OpType::_ALLGATHER_BASE, ins, outs, head(OpType::_ALLGATHER_BASE, ins),
        [this, opts](std::vector<at::Tensor>& in,
                     std::vector<at::Tensor>& out) {
          return gloo_->_allgather_base(out[0], in[0], opts);
        },
        Carry::kBytes);
  }

  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs,
                    std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK_VALUE(inputs.size() == 1 && outputs.size() == 1,
                      "tpu all_gather: one input tensor and one list of "
                      "outputs per rank");
    auto& outs = outputs[0];
    check_tpu(inputs[0], "all_gather");
    check_sizes(static_cast<int>(outs.size()) == getSize(), "all_gather",
                "the output list must hold ", getSize(), " tensors, it holds ",
                outs.size());
    for (auto& o : outs) {
      check_tpu(o, "all_gather");
      check_sizes(o.numel() == inputs[0].numel() &&
                      o.scalar_type() == inputs[0].scalar_type(),
                  "all_gather", "each output must be like the input ",
                  shape_str(inputs[0]), ", got ", shape_str(o));
    }
    if (in_program()) {
      at::Tensor flat =
          at::empty({getSize() * inputs[0].numel()}, inputs[0].options());
      run_collective(OpType::ALLGATHER, TPUC_COLLECTIVE_ALL_GATHER,
                     TPUC_REDUCE_SUM, 0, inputs[0], flat,
                     timeout_of(opts.timeout));
      split_into(flat, outs);
      return done(OpType::ALLGATHER, outs);
    }
    return stage(
        OpType::ALLGATHER, inputs, outs, head(OpType::ALLGATHER, inputs),
        [this, opts](std::vector<at::Tensor>& in,
                     std::vector<at::Tensor>& out) {
          std::vector<std::vector<at::Tensor>> o{out};
          return gloo_->allgather(o, in, opts);
        },
        Carry::kBytes);
  }

  WorkPtr allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                      "tpu all_gather_into_tensor_coalesced: as many outputs "
                      "as inputs");
    std::vector<WorkPtr> parts;
    for (size_t i = 0; i < inputs.size(); i++)
      parts.push_back(_allgather_base(outputs[i], inputs[i], opts));
    return done(OpType::COALESCED, outputs, parts);
  }

  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                              std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                      "tpu all_gather_coalesced: one output list per input");
    std::vector<at::Tensor> all;
    std::vector<WorkPtr> parts;
    for (size_t i = 0; i < inputs.size(); i++) {
      std::vector<std::vector<at::Tensor>> o{outputs[i]};
      std::vector<at::Tensor> in{inputs[i]};
      parts.push_back(allgather(o, in, opts));
      for (auto& t : outputs[i]) all.push_back(t);
    }
    return done(OpType::ALLGATHER_COALESCED, all, parts);
  }

  WorkPtr _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override {
    check_tpu(output, "reduce_scatter_tensor");
    check_tpu(input, "reduce_scatter_tensor");
    check_sizes(input.numel() == output.numel() * getSize(),
                "reduce_scatter_tensor", "the input must hold ", getSize(),
                " times the output's ", output.numel(), " elements, it holds ",
                input.numel());
    auto op = opts.reduceOp;
    std::vector<at::Tensor> outs{output};
    std::vector<at::Tensor> ins = premultiplied({input}, op);
    if (in_program() && !input.is_complex()) {
      run_collective(OpType::_REDUCE_SCATTER_BASE,
                     TPUC_COLLECTIVE_REDUCE_SCATTER, reduce_op(op), 0, ins[0],
                     output, timeout_of(opts.timeout));
      return done(OpType::_REDUCE_SCATTER_BASE, outs);
    }
    c10d::ReduceScatterOptions g = opts;
    g.reduceOp = gloo_op(op);
    auto work = stage(
        OpType::_REDUCE_SCATTER_BASE, ins, outs,
        head(OpType::_REDUCE_SCATTER_BASE, outs, -1, op),
        [this, g](std::vector<at::Tensor>& in, std::vector<at::Tensor>& out) {
          return gloo_->_reduce_scatter_base(out[0], in[0], g);
        },
        Carry::kReduce, false, false, op);
    average(outs, op);
    return work;
  }

  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs,
                         std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                      "tpu reduce_scatter: one output and one list of inputs "
                      "per rank");
    check_sizes(static_cast<int>(inputs[0].size()) == getSize(),
                "reduce_scatter", "the input list must hold ", getSize(),
                " tensors, it holds ", inputs[0].size());
    for (auto& t : inputs[0]) {
      check_tpu(t, "reduce_scatter");
      check_sizes(t.numel() == outputs[0].numel(), "reduce_scatter",
                  "each input must be like the output ", shape_str(outputs[0]),
                  ", got ", shape_str(t));
    }
    at::Tensor flat = joined(inputs[0]);
    return _reduce_scatter_base(outputs[0], flat, opts);
  }

  WorkPtr reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                      "tpu reduce_scatter_tensor_coalesced: as many outputs "
                      "as inputs");
    std::vector<WorkPtr> parts;
    for (size_t i = 0; i < inputs.size(); i++)
      parts.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
    return done(OpType::COALESCED, outputs, parts);
  }

  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input,
                        std::vector<int64_t>& out_splits,
                        std::vector<int64_t>& in_splits,
                        const c10d::AllToAllOptions& opts) override {
    check_tpu(output, "all_to_all_single");
    check_tpu(input, "all_to_all_single");
    int n = getSize();
    bool even = in_splits.empty() && out_splits.empty();
    if (even) {
      check_sizes(input.numel() == output.numel() &&
                      (input.dim() == 0 ? 1 : input.size(0)) % n == 0,
                  "all_to_all_single", "the input ", shape_str(input),
                  " and output ", shape_str(output), " must split in ", n,
                  " equal parts along dimension 0");
    }
    std::vector<at::Tensor> outs{output};
    if (in_program() && even) {
      run_collective(OpType::ALLTOALL_BASE, TPUC_COLLECTIVE_ALL_TO_ALL,
                     TPUC_REDUCE_SUM, 0, input, output,
                     timeout_of(opts.timeout));
      return done(OpType::ALLTOALL_BASE, outs);
    }
    // Split sizes in elements along the flat tensors, for the header.
    int64_t row_in =
        input.dim() ? input.numel() / std::max<int64_t>(input.size(0), 1) : 1;
    int64_t row_out =
        output.dim() ? output.numel() / std::max<int64_t>(output.size(0), 1)
                     : 1;
    std::vector<int64_t> h = head(OpType::ALLTOALL_BASE, outs);
    for (int r = 0; r < n; r++) {
      h[kHeadFixed + r] = (even ? input.numel() / n : in_splits.at(r) * row_in);
      h[kHeadFixed + n + r] =
          (even ? output.numel() / n : out_splits.at(r) * row_out);
    }
    std::vector<at::Tensor> ins{input};
    return stage(
        OpType::ALLTOALL_BASE, ins, outs, h,
        [this, out_splits, in_splits, opts](
            std::vector<at::Tensor>& in, std::vector<at::Tensor>& out) mutable {
          return gloo_->alltoall_base(out[0], in[0], out_splits, in_splits,
                                      opts);
        },
        Carry::kBytes);
  }

  WorkPtr alltoall(std::vector<at::Tensor>& outputs,
                   std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override {
    int n = getSize();
    check_sizes(static_cast<int>(inputs.size()) == n &&
                    static_cast<int>(outputs.size()) == n,
                "all_to_all", "one input and one output tensor per rank (", n,
                "), got ", inputs.size(), " and ", outputs.size());
    for (auto& t : inputs) check_tpu(t, "all_to_all");
    for (auto& t : outputs) check_tpu(t, "all_to_all");
    at::Tensor in = joined(inputs);
    at::Tensor out = at::empty({0}, outputs[0].options());
    std::vector<int64_t> in_splits, out_splits;
    int64_t total = 0;
    for (int r = 0; r < n; r++) {
      in_splits.push_back(inputs[r].numel());
      out_splits.push_back(outputs[r].numel());
      total += outputs[r].numel();
    }
    out.resize_({total});
    bool even = true;
    for (int r = 0; r < n; r++)
      even &= in_splits[r] == in_splits[0] && out_splits[r] == in_splits[0];
    if (even) in_splits.clear(), out_splits.clear();
    WorkPtr part = alltoall_base(out, in, out_splits, in_splits, opts);
    split_into(out, outputs);
    return done(OpType::ALLTOALL, outputs, {part});
  }

  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs,
                 std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override {
    TORCH_CHECK_VALUE(inputs.size() == 1, "tpu gather: one input tensor");
    check_tpu(inputs[0], "gather");
    int root = static_cast<int>(opts.rootRank);
    bool me = root == getRank();
    std::vector<at::Tensor> outs =
        me && !outputs.empty() ? outputs[0] : std::vector<at::Tensor>();
    if (me) {
      check_sizes(static_cast<int>(outs.size()) == getSize(), "gather",
                  "the root's output list must hold ", getSize(),
                  " tensors, it holds ", outs.size());
      for (auto& o : outs) check_tpu(o, "gather");
    }
    if (in_program()) {
      at::Tensor flat =
          at::empty({getSize() * inputs[0].numel()}, inputs[0].options());
      run_collective(OpType::GATHER, TPUC_COLLECTIVE_ALL_GATHER,
                     TPUC_REDUCE_SUM, 0, inputs[0], flat,
                     timeout_of(opts.timeout));
      if (me) split_into(flat, outs);
      return done(OpType::GATHER, outs);
    }
    return stage(
        OpType::GATHER, inputs, outs, head(OpType::GATHER, inputs, root),
        [this, opts, me](std::vector<at::Tensor>& in,
                         std::vector<at::Tensor>& out) {
          std::vector<std::vector<at::Tensor>> o;
          if (me) o.push_back(out);
          return gloo_->gather(o, in, opts);
        },
        Carry::kBytes);
  }

  WorkPtr scatter(std::vector<at::Tensor>& outputs,
                  std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == 1, "tpu scatter: one output tensor");
    check_tpu(outputs[0], "scatter");
    int root = static_cast<int>(opts.rootRank);
    bool me = root == getRank();
    std::vector<at::Tensor> ins =
        me && !inputs.empty() ? inputs[0] : std::vector<at::Tensor>();
    if (me) {
      check_sizes(static_cast<int>(ins.size()) == getSize(), "scatter",
                  "the root's input list must hold ", getSize(),
                  " tensors, it holds ", ins.size());
      for (auto& t : ins) check_tpu(t, "scatter");
    }
    if (in_program()) {
      // The root's list goes to everyone; each rank keeps its part.
      at::Tensor flat = me ? joined(ins)
                           : at::empty({getSize() * outputs[0].numel()},
                                       outputs[0].options());
      run_collective(OpType::SCATTER, TPUC_COLLECTIVE_BROADCAST,
                     TPUC_REDUCE_SUM, root, flat, flat,
                     timeout_of(opts.timeout));
      outputs[0].copy_(
          flat.narrow(0, getRank() * outputs[0].numel(), outputs[0].numel())
              .view(outputs[0].sizes()));
      return done(OpType::SCATTER, outputs);
    }
    return stage(
        OpType::SCATTER, ins, outputs, head(OpType::SCATTER, outputs, root),
        [this, opts, me](std::vector<at::Tensor>& in,
                         std::vector<at::Tensor>& out) {
          std::vector<std::vector<at::Tensor>> i;
          if (me) i.push_back(in);
          return gloo_->scatter(out, i, opts);
        },
        Carry::kBytes);
  }

  WorkPtr barrier(const c10d::BarrierOptions& opts) override {
    if (in_program()) {
      check(tpuc_group_run(group_, nullptr, 0, "barrier", nullptr,
                           timeout_of(opts.timeout), nullptr));
      return done(OpType::BARRIER, {});
    }
    std::vector<at::Tensor> none;
    return stage(
        OpType::BARRIER, none, none, {},
        [this, opts](std::vector<at::Tensor>&, std::vector<at::Tensor>&) {
          return gloo_->barrier(opts);
        },
        Carry::kBytes);
  }

  // -- point to point
  // ----------------------------------------------------------

  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    TORCH_CHECK_VALUE(tensors.size() == 1, "tpu send: one tensor");
    check_tpu(tensors[0], "send");
    if (in_program()) {
      tpuc_buffer* v = flat_value(tensors[0]);
      tpuc_status* st = tpuc_group_send(group_, dst, tag, v);
      tpuc_buffer_release(v);
      check(st);
      return done(OpType::SEND, tensors);
    }
    // What is sent goes to the store first, so the receiver can check it
    // against what it expects before Gloo sees buffers that differ.
    std::vector<int64_t> h = head(OpType::SEND, tensors);
    std::string key =
        p2p_key(getRank(), dst, tag, next_seq(send_seq_, dst, tag));
    std::vector<at::Tensor> none;
    Channel& ch = channel(0, dst, tag);
    auto store = ch.store;
    return stage(
        OpType::SEND, tensors, none, {},
        [this, dst, tag, h, key, store](std::vector<at::Tensor>& in,
                                        std::vector<at::Tensor>&) {
          const auto* p = reinterpret_cast<const uint8_t*>(h.data());
          store->set(key,
                     std::vector<uint8_t>(p, p + h.size() * sizeof(int64_t)));
          return gloo_->send(in, dst, tag);
        },
        Carry::kBytes, false, false, c10d::ReduceOp::UNUSED, &ch.worker);
  }

  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return receive(tensors, src, tag);
  }
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    return receive(tensors, -1, tag);
  }

 private:
  // -- in-program collectives ------------------------------------------------

  // One collective as one program across the group's devices: `in`'s value
  // goes in, the result becomes `out`'s value.
  void run_collective(OpType type, tpuc_collective_kind kind, tpuc_reduce_op op,
                      int root, const at::Tensor& in, const at::Tensor& out,
                      int64_t timeout_ms) {
    TORCH_CHECK_VALUE(tpu_index(in) == tpuc_group_device(group_, getRank()),
                      "tpu process group: rank ", getRank(),
                      " runs on tpu:", tpuc_group_device(group_, getRank()),
                      ", the tensor is on ", in.device());
    // Every rank runs one program, so every rank's value comes in the type
    // a tensor of this dtype is kept in (a never-written storage's zeros,
    // or a value last written through another dtype, are converted).
    tpuc_buffer* arg = flat_value(in);
    if (tpuc_buffer_dtype(arg) != value_type_of(in.scalar_type())) {
      tpuc_buffer_release(arg);
      arg = flat_value(in.clone());
    }
    tpuc_collective c{};
    c.kind = kind;
    c.op = op;
    c.ranks = getSize();
    c.root = root;
    c.dtype = to_tpuc_dtype(in.scalar_type());
    c.count = in.numel();
    c.value_type = tpuc_buffer_dtype(arg);
    char* text = nullptr;
    size_t len = 0;
    tpuc_dtype out_type;
    int64_t out_count = 0;
    tpuc_status* st =
        tpuc_collective_program(&c, &text, &len, &out_type, &out_count);
    // Described as the staged calls are ("all_reduce of float32[4]").
    std::vector<int64_t> h =
        head(type, {in}, kind == TPUC_COLLECTIVE_BROADCAST ? root : -1);
    std::string what = describe_head(h.data(), getSize());
    tpuc_buffer* result = nullptr;
    if (st == nullptr) {
      // In fused mode the ops recorded before it may run with it.
      tpuc_hlo_type type = tpuc_hlo_type_make(out_type, &out_count, 1);
      st = tpuc_fused_group_run(group_, text, len, &type, what.c_str(), arg,
                                timeout_ms, &result);
    }
    free(text);
    tpuc_buffer_release(arg);
    if (st != nullptr) {
      std::string msg = "tpu " + what + ": " + tpuc_status_message(st);
      tpuc_code code = tpuc_status_code(st);
      tpuc_status_free(st);
      if (code == TPUC_DEADLINE_EXCEEDED)
        C10_THROW_ERROR(DistBackendError, msg);
      TORCH_CHECK(false, msg);
    }
    try {
      assign_flat(out, result);
    } catch (...) {
      tpuc_buffer_release(result);
      throw;
    }
    tpuc_buffer_release(result);
  }

  // -- staging through the host -----------------------------------------------

  using GlooCall = std::function<WorkPtr(std::vector<at::Tensor>&,
                                         std::vector<at::Tensor>&)>;

  // Takes the values of `ins` now, gives `outs` values that arrive later,
  // and queues the copies and the Gloo call. `inplace`: the Gloo call
  // writes its input tensors (all_reduce); `host_out_is_in`: the outputs'
  // host tensors are the inputs' (a broadcast's root).
  WorkPtr stage(OpType type, const std::vector<at::Tensor>& ins,
                const std::vector<at::Tensor>& outs,
                const std::vector<int64_t>& head, GlooCall call, Carry carry,
                bool inplace = false, bool host_out_is_in = false,
                c10d::ReduceOp op = c10d::ReduceOp::UNUSED,
                Worker* queue = nullptr) {
    auto work = c10::make_intrusive<TpuWork>(
        getRank(), type, outs, devices_of(outs.empty() ? ins : outs, device_));
    auto job = std::make_shared<Job>();
    job->pool = &pool_;
    job->head = head;
    job->what =
        head.empty() ? op_name(type) : describe_head(head.data(), getSize());
    try {
      for (const auto& t : ins) {
        job->values.push_back(flat_value(t));
        job->host_in.push_back(pool_.take(t.sizes(), t.scalar_type()));
      }
      for (const auto& t : ins)
        tpuc_fused_cut(client(), tpu_index(t), TPUC_FUSED_COLLECTIVE);
      // The inputs' programs are issued now, before any program that reads
      // the outputs can be: a plugin may run a device's programs in the
      // order they were issued (the CPU plugin does), and a reader issued
      // first would wait for outputs whose inputs wait behind it (a
      // deadlock when the cut segment compiles in the background).
      for (tpuc_buffer* v : job->values) check(tpuc_value_ensure(v));
      for (size_t i = 0; i < outs.size(); i++) {
        const at::Tensor& t = outs[i];
        job->host_out.push_back(inplace || host_out_is_in
                                    ? job->host_in[i]
                                    : pool_.take(t.sizes(), t.scalar_type()));
        size_t nbytes = t.numel() * t.element_size();
        if (nbytes == 0) {
          job->transfers.push_back(nullptr);
          continue;
        }
        tpuc_dtype vt = value_type_of(t.scalar_type());
        int64_t count = static_cast<int64_t>(nbytes / tpuc_dtype_size(vt));
        tpuc_transfer* tr = nullptr;
        tpuc_buffer* b = nullptr;
        check(tpuc_transfer_create(client(), tpu_index(t), vt, &count, 1, &tr,
                                   &b));
        job->transfers.push_back(tr);
        try {
          assign_flat(t, b);
        } catch (...) {
          tpuc_buffer_release(b);
          throw;
        }
        tpuc_buffer_release(b);
      }
    } catch (...) {
      job->fail("the collective was not started");
      throw;
    }
    int size = getSize();
    bool checked = check_calls_;
    bool shared = inplace || host_out_is_in;
    (queue ? *queue : worker())
        .post([this, job, work, call, size, checked, carry, shared, op] {
          std::exception_ptr error;
          try {
            for (size_t i = 0; i < job->values.size(); i++) {
              at::Tensor& h = job->host_in[i];
              check(tpuc_buffer_to_host(job->values[i], h.data_ptr(),
                                        h.numel() * h.element_size()));
            }
            if (checked && !job->head.empty()) agree(job->head, size);
            std::vector<at::Tensor> gin, gout;
            for (const auto& h : job->host_in)
              gin.push_back(carry == Carry::kBytes ? bytes_of(h)
                                                   : to_carrier(h, op));
            for (size_t i = 0; i < job->host_out.size(); i++) {
              const at::Tensor& h = job->host_out[i];
              if (shared)
                gout.push_back(gin[i]);
              else if (carry == Carry::kBytes)
                gout.push_back(bytes_of(h));
              else
                gout.push_back(carrier_like(h));
            }
            WorkPtr w = call(gin, gout);
            if (w) w->wait();
            if (carry == Carry::kReduce)
              for (size_t i = 0; i < job->host_out.size(); i++)
                from_carrier(gout[i], job->host_out[i], op);
            for (size_t i = 0; i < job->transfers.size(); i++) {
              if (job->transfers[i] == nullptr) continue;
              at::Tensor h = job->host_out[i].contiguous();
              check(tpuc_transfer_fill(job->transfers[i], h.data_ptr(),
                                       h.numel() * h.element_size()));
            }
          } catch (const std::exception& e) {
            std::string msg = "tpu " + job->what + ": " + message_of(e);
            if (msg.find("gloo/transport") != std::string::npos)
              msg +=
                  " (another rank of the group ended, failed, or did not "
                  "reach this collective within the group's timeout)";
            job->fail(msg);
            try {
              C10_THROW_ERROR(DistBackendError, msg);
            } catch (...) {
              error = std::current_exception();
            }
          }
          job->release();
          complete_later(work, error);
        });
    return work;
  }

  struct Job {
    HostPool* pool = nullptr;
    std::vector<int64_t> head;
    std::string what;
    std::vector<tpuc_buffer*> values;
    std::vector<at::Tensor> host_in, host_out;
    std::vector<tpuc_transfer*> transfers;
    void fail(const std::string& msg) {
      for (auto* t : transfers)
        if (t != nullptr)
          tpuc_status_free(tpuc_transfer_fail(t, TPUC_ABORTED, msg.c_str()));
    }
    void release() {
      for (auto* v : values) tpuc_buffer_release(v);
      values.clear();
      for (auto* t : transfers) tpuc_transfer_free(t);
      transfers.clear();
      // Back to the pool, each buffer once (an in-place call's outputs are
      // its inputs).
      if (pool != nullptr) {
        for (auto& h : host_in) pool->give(h);
        for (auto& h : host_out) {
          bool shared = false;
          for (auto& i : host_in) shared |= h.is_alias_of(i);
          if (!shared) pool->give(h);
        }
      }
      host_in.clear();
      host_out.clear();
    }
    ~Job() { release(); }
  };

  // Every rank's header against this one's; a difference raises naming
  // every rank's call (before Gloo sees buffers that do not match).
  void agree(const std::vector<int64_t>& head, int size) {
    at::Tensor mine = at::tensor(head, at::kLong);
    std::vector<at::Tensor> all;
    for (int r = 0; r < size; r++) all.push_back(at::empty_like(mine));
    std::vector<std::vector<at::Tensor>> out{all};
    std::vector<at::Tensor> in{mine};
    gloo_->allgather(out, in, c10d::AllgatherOptions())->wait();
    std::vector<const int64_t*> h;
    for (auto& t : all) h.push_back(t.data_ptr<int64_t>());
    bool same = true;
    bool a2a = head[0] == static_cast<int64_t>(OpType::ALLTOALL_BASE);
    for (int r = 0; r < size; r++) {
      same &= h[r][0] == head[0] && h[r][1] == head[1];
      if (!a2a) {
        same &= std::equal(head.begin(), head.end(), h[r]);
        continue;
      }
      for (int s = 0; s < size; s++)  // r sends to s what s takes from r
        same &= h[r][kHeadFixed + s] == h[s][kHeadFixed + size + r];
    }
    if (same) return;
    std::ostringstream msg;
    msg << "the ranks' calls differ:";
    for (int r = 0; r < size; r++)
      msg << (r ? ";" : "") << " rank " << r << ": "
          << describe_head(h[r], size);
    TORCH_CHECK(false, msg.str());
  }

  std::vector<int64_t> head(OpType type, const std::vector<at::Tensor>& ts,
                            int root = -1,
                            c10d::ReduceOp op = c10d::ReduceOp::UNUSED) {
    std::vector<int64_t> h(kHeadFixed + 2 * getSize(), 0);
    h[0] = static_cast<int64_t>(type);
    h[1] = ts.empty() ? -1 : static_cast<int64_t>(ts[0].scalar_type());
    h[2] = root;
    for (const auto& t : ts) h[3] += t.numel();
    h[4] = static_cast<int64_t>(op.op_);
    return h;
  }

  WorkPtr receive(std::vector<at::Tensor>& tensors, int src, int tag) {
    TORCH_CHECK_VALUE(tensors.size() == 1, "tpu recv: one tensor");
    check_tpu(tensors[0], "recv");
    if (in_program()) {
      TORCH_CHECK_VALUE(src >= 0,
                        "tpu recv: ranks in one process receive from a named "
                        "rank (recv with src=None is not supported)");
      tpuc_buffer* v = nullptr;
      tpuc_status* st = tpuc_group_recv(group_, src, tag, timeout_ms_, &v);
      if (st != nullptr) {
        std::string msg = std::string("tpu recv: ") + tpuc_status_message(st);
        tpuc_status_free(st);
        C10_THROW_ERROR(DistBackendError, msg);
      }
      bool fits =
          tpuc_buffer_byte_size(v) ==
          static_cast<size_t>(tensors[0].numel() * tensors[0].element_size());
      if (fits) {
        try {
          assign_flat(tensors[0], v);
        } catch (...) {
          tpuc_buffer_release(v);
          throw;
        }
      }
      tpuc_buffer_release(v);
      TORCH_CHECK(fits, "tpu recv: rank ", src, " sent ",
                  tpuc_buffer_byte_size(v), " bytes, the receiving tensor ",
                  shape_str(tensors[0]), " holds ",
                  tensors[0].numel() * tensors[0].element_size());
      auto work = c10::make_intrusive<TpuWork>(getRank(), OpType::RECV, tensors,
                                               devices_of(tensors, device_));
      work->complete(nullptr);
      return work;
    }
    std::vector<int64_t> mine = head(OpType::SEND, tensors);
    std::vector<at::Tensor> none;
    std::string me = describe_head(mine.data(), getSize());
    if (src < 0) {
      // From any rank: the sender is known once the message is in.
      Channel& ch = channel(1, -1, tag);
      auto store = ch.store;
      return stage(
          OpType::RECVANYSOURCE, none, tensors, {},
          [this, tag, store](std::vector<at::Tensor>&,
                             std::vector<at::Tensor>& out) {
            WorkPtr w = gloo_->recvAnysource(out, tag);
            w->wait();
            int from = w->sourceRank();
            store->deleteKey(
                p2p_key(from, getRank(), tag, next_seq(recv_seq_, from, tag)));
            return WorkPtr();
          },
          Carry::kBytes, false, false, c10d::ReduceOp::UNUSED, &ch.worker);
    }
    std::string key =
        p2p_key(src, getRank(), tag, next_seq(recv_seq_, src, tag));
    int64_t timeout_ms = timeout_ms_;
    Channel& ch = channel(1, src, tag);
    auto store = ch.store;
    return stage(
        OpType::RECV, none, tensors, {},
        [this, src, tag, mine, me, key, timeout_ms, store](
            std::vector<at::Tensor>&, std::vector<at::Tensor>& out) {
          store->wait({key}, std::chrono::milliseconds(timeout_ms));
          std::vector<uint8_t> v = store->get(key);
          store->deleteKey(key);
          std::vector<int64_t> h(v.size() / sizeof(int64_t));
          std::memcpy(h.data(), v.data(), h.size() * sizeof(int64_t));
          if (h.size() < kHeadFixed || h[1] != mine[1] || h[3] != mine[3]) {
            if (h.size() >= kHeadFixed && h[1] >= 0) {
              // Take the message anyway, so the sender is not left hanging.
              std::vector<at::Tensor> scratch{
                  at::empty({h[3] * static_cast<int64_t>(c10::elementSize(
                                        static_cast<at::ScalarType>(h[1])))},
                            at::kByte)};
              gloo_->recv(scratch, src, tag)->wait();
            }
            TORCH_CHECK(false, "rank ", src, " sent ",
                        h.size() >= kHeadFixed
                            ? describe_head(h.data(), getSize())
                            : std::string("something else"),
                        ", this rank receives ", me);
          }
          return gloo_->recv(out, src, tag);
        },
        Carry::kBytes, false, false, c10d::ReduceOp::UNUSED, &ch.worker);
  }

  // Point-to-point messages run on one thread per (direction, peer, tag):
  // in the order they were called on that channel (which is how Gloo pairs
  // them), and never behind a message to another peer (a send and a
  // receive of two ranks may be called in either order on each). Each has
  // its own connection to the store, whose blocking wait would hold up the
  // others.
  struct Channel {
    c10::intrusive_ptr<c10d::Store> store;
    Worker worker;
  };
  Channel& channel(int direction, int peer, int tag) {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    auto& c = channels_[std::make_tuple(direction, peer, tag)];
    if (!c) {
      c = std::make_unique<Channel>();
      c->store = store_->clone();
    }
    return *c;
  }

  int64_t next_seq(std::map<std::pair<int, int>, int64_t>& seqs, int peer,
                   int tag) {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    return ++seqs[std::make_pair(peer, tag)];
  }

  static std::string p2p_key(int src, int dst, int tag, int64_t seq) {
    return "p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" +
           std::to_string(tag) + "/" + std::to_string(seq);
  }

  // -- helpers
  // -----------------------------------------------------------------

  // Work is completed on a thread of its own: completing runs the future's
  // callbacks (DDP's comm hooks record tpu ops there), which may wait for
  // the fused lock while a user thread holding it waits for a result the
  // staging threads still have to deliver.
  Worker& completer() {
    std::call_once(completer_once_,
                   [this] { completer_ = std::make_unique<Worker>(); });
    return *completer_;
  }

  void complete_later(const c10::intrusive_ptr<TpuWork>& work,
                      std::exception_ptr error) {
    completer().post([work, error] { work->complete(error); });
  }

  Worker& worker() {
    std::call_once(worker_once_,
                   [this] { worker_ = std::make_unique<Worker>(); });
    return *worker_;
  }

  int64_t timeout_of(std::chrono::milliseconds t) const {
    return t.count() > 0 ? t.count() : timeout_ms_;
  }

  // Work that is done when it is returned (in-program collectives: their
  // results are values on the devices already), or, for a call made of
  // several staged ones (`parts`), when they all are; it fails with the
  // first part that failed.
  WorkPtr done(OpType type, const std::vector<at::Tensor>& outs,
               std::vector<WorkPtr> parts = {}) {
    auto work = c10::make_intrusive<TpuWork>(getRank(), type, outs,
                                             devices_of(outs, device_));
    bool pending = false;
    for (const auto& p : parts) pending |= !p->isCompleted();
    if (!pending) {
      for (const auto& p : parts)
        if (p->exception()) {
          work->complete(p->exception());
          return work;
        }
      work->complete(nullptr);
      return work;
    }
    // Completions run in order: this one after every part's.
    completer().post([work, parts] {
      std::exception_ptr error;
      for (const auto& p : parts)
        if (!error && p->exception()) error = p->exception();
      work->complete(error);
    });
    return work;
  }

  static bool has_complex(const std::vector<at::Tensor>& ts) {
    for (const auto& t : ts)
      if (t.is_complex()) return true;
    return false;
  }

  static tpuc_reduce_op reduce_op(const c10d::ReduceOp& op) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::PREMUL_SUM:
        return TPUC_REDUCE_SUM;
      case c10d::ReduceOp::AVG:
        return TPUC_REDUCE_AVG;
      case c10d::ReduceOp::PRODUCT:
        return TPUC_REDUCE_PRODUCT;
      case c10d::ReduceOp::MIN:
        return TPUC_REDUCE_MIN;
      case c10d::ReduceOp::MAX:
        return TPUC_REDUCE_MAX;
      case c10d::ReduceOp::BAND:
        return TPUC_REDUCE_BAND;
      case c10d::ReduceOp::BOR:
        return TPUC_REDUCE_BOR;
      case c10d::ReduceOp::BXOR:
        return TPUC_REDUCE_BXOR;
      default:
        break;
    }
    TORCH_CHECK_VALUE(false, "tpu: unsupported reduce op");
    return TPUC_REDUCE_SUM;
  }

  // Gloo has no AVG or PREMUL_SUM: those are sums here (the inputs are
  // premultiplied, the results averaged on the device).
  static c10d::ReduceOp gloo_op(const c10d::ReduceOp& op) {
    if (op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM)
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
    return op;
  }

  static std::vector<at::Tensor> premultiplied(
      const std::vector<at::Tensor>& ts, const c10d::ReduceOp& op) {
    if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return ts;
    auto* s =
        dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK_VALUE(s != nullptr, "tpu: PREMUL_SUM without a factor");
    std::vector<at::Tensor> out;
    for (const auto& t : ts)
      out.push_back(s->tensor_factor.defined()
                        ? t * s->tensor_factor.to(t.device())
                        : t * s->double_factor);
    return out;
  }

  void average(const std::vector<at::Tensor>& ts, const c10d::ReduceOp& op) {
    if (op.op_ != c10d::ReduceOp::AVG) return;
    for (const auto& t : ts) {
      if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false))
        t.div_(getSize(), "trunc");
      else if (t.scalar_type() != at::kBool)
        t.div_(getSize());
    }
  }

  // A list of tensors laid out one after the other in one flat tensor.
  static at::Tensor joined(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> flat;
    for (const auto& t : ts) flat.push_back(t.reshape({-1}));
    return at::cat(flat);
  }

  // The parts of a flat tensor copied into a list of tensors.
  static void split_into(const at::Tensor& flat,
                         const std::vector<at::Tensor>& outs) {
    int64_t at = 0;
    for (const auto& o : outs) {
      o.copy_(flat.narrow(0, at, o.numel()).view(o.sizes()));
      at += o.numel();
    }
  }

  template <typename... Args>
  static void check_sizes(bool ok, const char* op, const Args&... args) {
    TORCH_CHECK_VALUE(ok, "tpu ", op, ": ", args...);
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::intrusive_ptr<c10d::Store> store_;
  HostPool pool_;
  std::mutex p2p_mu_;
  struct Channel;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Channel>> channels_;
  std::map<std::pair<int, int>, int64_t> send_seq_, recv_seq_;
  int64_t timeout_ms_;
  int device_;
  bool check_calls_;
  tpuc_group* group_ = nullptr;
  std::once_flag worker_once_;
  std::unique_ptr<Worker> worker_;
  std::once_flag completer_once_;
  std::unique_ptr<Worker> completer_;
};

// DDP's per-iteration timings (its logger's avg_*_time): host times, as the
// CPU's timer takes them; on tpu they are when the work was issued.
class TpuTimer : public c10d::Timer {
 public:
  explicit TpuTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    int64_t a = getTimeRef(start), b = getTimeRef(end);
    if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a)
      return std::nullopt;
    return b - a;
  }
};

// Finishes the queued work of every live backend (at interpreter exit).
void drain_all() {
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (auto* b : g_live) b->drain();
}

}  // namespace

void register_distributed(py::module& m) {
  m.def("_dist_drain", [] {
    py::gil_scoped_release nogil;
    drain_all();
  });
  py::class_<TpuBackend, c10d::Backend, c10::intrusive_ptr<TpuBackend>>(
      m, "_TpuBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo,
                       const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int size, int64_t timeout_ms,
                       const std::string& group_key, int device) {
             return c10::make_intrusive<TpuBackend>(
                 gloo, store, rank, size, timeout_ms, group_key, device);
           }),
           py::arg("gloo"), py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout_ms"), py::arg("group_key"), py::arg("device"))
      .def_property_readonly("in_program", &TpuBackend::in_program);
}

}  // namespace tpuc_torch

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1,
                         tpuc_torch::TpuTimer);
}  // namespace c10d
