// DeviceGuard for PrivateUse1: device index per thread, one stream per
// device; events are host-side markers (execution is ordered per client, and
// synchronization waits for everything issued).
#include <c10/core/impl/DeviceGuardImplInterface.h>

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
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }

  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    // Marks the point; queries and waits synchronize the client.
    *event = reinterpret_cast<void*>(1);
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void synchronizeEvent(void*) const override {
    if (runtime_ready()) check(tpuc_client_synchronize(client()));
  }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    if (runtime_ready()) check(tpuc_client_synchronize(client()));
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {
    if (runtime_ready()) check(tpuc_client_synchronize(client()));
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace tpuc_torch
