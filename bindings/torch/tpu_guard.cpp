// DeviceGuard for PrivateUse1: the device index per thread, streams and
// events. Every stream of a device runs in issue order on the one PJRT
// client (the C API has no streams), which is a valid, stricter ordering
// than PyTorch requires: work on two streams never overlaps, and waiting on
// one stream's event waits for the other's earlier work too. An event is a
// mark in that order; a timing event waits for the work before it when
// recorded, so elapsed_time measures completed work.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "tpu_runtime.h"

namespace tpuc_torch {
namespace {

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kType, current_device());
  }
  void setDevice(c10::Device d) const override {
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(d.index());
    } catch (...) {
    }
  }
  c10::Stream getStream(c10::Device d) const override {
    auto& cur = current_streams();
    auto it = cur.find(d.index());
    return c10::Stream(c10::Stream::UNSAFE, d,
                       it == cur.end() ? 0 : it->second);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    (void)priority;  // accepted; all streams share one order
    static std::atomic<c10::StreamId> next{1};
    return c10::Stream(c10::Stream::UNSAFE, d, next++);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d,
                                      bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    current_streams()[s.device_index()] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }

  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex, const c10::EventFlag flag) const override {
    auto* e = static_cast<Event*>(*event);
    if (e == nullptr) {
      e = new Event();
      *event = e;
    }
    e->device = stream.device_index();
    // torch.Event(enable_timing=True) records with BACKEND_DEFAULT.
    e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
    if (e->timing) {
      // Timing events wait for the work before them, then read the clock.
      synchronize_all();
      e->ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
    }
    // Work recorded by fused mode on the event's device starts before the
    // mark (a service thread recorded none: its mark covers what was
    // issued). Other devices' segments are left alone: an event orders
    // its own device's work, and on ranks that are threads, cutting
    // another rank's segment at a random op would keep its collectives
    // from running with the ops before them (tpuc_fused_group_run).
    if (!e->timing && !is_service_thread())
      check(tpuc_fused_flush_device(client(), e->device, TPUC_FUSED_SYNC));
    check(tpuc_client_mark(client(), &e->mark));
    e->recorded = true;
  }
  void block(void*, const c10::Stream&) const override {
    // One order for every stream: later work already follows the event.
  }
  bool queryEvent(void* event) const override {
    auto* e = static_cast<Event*>(event);
    if (e == nullptr || !e->recorded || !runtime_ready()) return true;
    bool done = false;
    check(tpuc_client_mark_done(client(), e->mark, &done));
    return done;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr && runtime_ready()) synchronize_all();
  }
  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex) const override {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    TORCH_CHECK(a != nullptr && b != nullptr && a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed "
                "time.");
    TORCH_CHECK(a->timing && b->timing,
                "Both events must be created with argument 'enable_timing=True'.");
    return b->ms - a->ms;
  }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    if (runtime_ready()) synchronize_all();
  }
  bool queryStream(const c10::Stream& stream) const override {
    if (!runtime_ready()) return true;
    uint64_t mark = 0;
    bool done = false;
    check(tpuc_fused_flush_device(client(), stream.device_index(),
                                  TPUC_FUSED_SYNC));
    check(tpuc_client_mark(client(), &mark));
    check(tpuc_client_mark_done(client(), mark, &done));
    return done;
  }
  void synchronizeStream(const c10::Stream&) const override {
    if (runtime_ready()) synchronize_all();
  }

 private:
  struct Event {
    c10::DeviceIndex device = 0;
    bool recorded = false;
    bool timing = false;
    uint64_t mark = 0;
    double ms = 0;
  };
  // The current stream per device of this thread (0: the default stream).
  static std::unordered_map<c10::DeviceIndex, c10::StreamId>&
  current_streams() {
    thread_local std::unordered_map<c10::DeviceIndex, c10::StreamId> cur;
    return cur;
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace tpuc_torch
