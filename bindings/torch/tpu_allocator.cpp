// PrivateUse1 allocator: every allocation is a tpuc storage. The data
// pointer is a handle in a private address range (never dereferenced); each
// storage gets a range of its own so PyTorch's pointer-based overlap checks
// never see two storages overlap.
#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>

#include "tpu_runtime.h"

namespace tpuc_torch {
namespace {

constexpr uintptr_t kHandleBase = uintptr_t{1} << 46;
std::atomic<uintptr_t> g_next_handle{kHandleBase};

void* reserve_handle(size_t nbytes) {
  size_t span = ((nbytes + 4095) & ~size_t{4095}) + 4096;
  return reinterpret_cast<void*>(g_next_handle.fetch_add(span));
}

void release_storage(void* ctx) {
  // A forked child cannot touch the parent's device buffers: what it
  // inherited is left as it is (it goes with the child's memory).
  if (in_bad_fork()) return;
  tpuc_storage_release(static_cast<tpuc_storage*>(ctx));
}

struct TpuAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex dev = current_device();
    tpuc_storage* s = nullptr;
    check(tpuc_storage_create(client(), dev, nbytes, &s));
    return {reserve_handle(nbytes), s, &release_storage,
            c10::Device(c10::DeviceType::PrivateUse1, dev)};
  }

  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "tpu storages are copied through tensors, not raw pointers");
  }

  bool initialized() override { return runtime_ready(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex device) override {
    int64_t in_use = 0, peak = 0;
    check(tpuc_storage_bytes(client(), device, &in_use, &peak));
    c10::CachingDeviceAllocator::DeviceStats stats;
    for (auto* arr : {&stats.allocated_bytes, &stats.reserved_bytes,
                      &stats.active_bytes, &stats.requested_bytes}) {
      (*arr)[0].current = in_use;
      (*arr)[0].peak = peak;
    }
    return stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex device) override {
    check(tpuc_storage_reset_peak(client(), device));
  }
};

TpuAllocator g_allocator;

}  // namespace

// Gives `storage` `nbytes` bytes, keeping its content prefix, and a handle
// range that fits the new size.
void resize_storage(const c10::Storage& storage, size_t nbytes) {
  auto* s = static_cast<tpuc_storage*>(storage.data_ptr().get_context());
  TORCH_CHECK(s != nullptr, "not a tpu storage");
  check(tpuc_storage_resize(s, nbytes));
  tpuc_storage_retain(s);  // the new DataPtr's reference
  c10::DataPtr fresh(reserve_handle(nbytes), s, &release_storage,
                     storage.device());
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace tpuc_torch
