// PrivateUse1 hooks (availability, devices, storage resize) and the tpu
// generator: a counter-based state (seed, offset) per device.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "tpu_runtime.h"

namespace tpuc_torch {

namespace {

// The tpu generator: a counter-based state (seed, offset) per device. Each
// native random op takes (seed, offset) as its Threefry state and advances
// the offset by one (each call gets its own 2^32-counter range). Random ops
// without a native lowering run on the CPU; the generator therefore also
// carries a CPU generator, which the fallback hands to them. Seeding seeds
// both (and resets the offset), independently of the CPU's default
// generator, so the same seed gives the same numbers on every run.
struct TpuGeneratorImpl final : public c10::GeneratorImpl {
  explicit TpuGeneratorImpl(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        cpu_(at::make_generator<at::CPUGeneratorImpl>(kDefaultSeed)) {}

  void set_current_seed(uint64_t seed) override {
    cpu_.set_current_seed(seed);
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return cpu_.current_seed(); }
  uint64_t seed() override {
    offset_ = 0;
    return cpu_.seed();
  }
  // The state: the CPU generator's state bytes, then the offset (8 bytes).
  void set_state(const c10::TensorImpl& state) override {
    at::Tensor t(c10::intrusive_ptr<c10::TensorImpl>::unsafe_reclaim_from_nonowning(
        const_cast<c10::TensorImpl*>(&state)));
    TORCH_CHECK(t.scalar_type() == at::kByte && t.dim() == 1 && t.numel() > 8,
                "RNG state must be a torch.ByteTensor of a tpu generator");
    int64_t n = t.numel() - 8;
    at::Tensor c = t.contiguous();
    cpu_.set_state(c.narrow(0, 0, n).clone());
    std::memcpy(&offset_, c.data_ptr<uint8_t>() + n, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor c = cpu_.get_state();
    at::Tensor out = at::empty({c.numel() + 8}, c.options());
    out.narrow(0, 0, c.numel()).copy_(c);
    std::memcpy(out.data_ptr<uint8_t>() + c.numel(), &offset_, 8);
    return out.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  const at::Generator& cpu_generator() const { return cpu_; }
  // (seed, counter) for one native random op; advances the offset.
  void draw(uint64_t out[2]) {
    out[0] = cpu_.current_seed();
    out[1] = offset_ << 32;
    offset_++;
  }

 private:
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;
  TpuGeneratorImpl* clone_impl() const override {
    auto* g = new TpuGeneratorImpl(device().index());
    g->cpu_ = cpu_.clone();
    g->offset_ = offset_;
    return g;
  }
  at::Generator cpu_;
  uint64_t offset_ = 0;
};

// Host memory for `pin_memory=True` with the tpu accelerator. PJRT copies
// from any host memory, so "pinned" buffers are ordinary allocations that
// are remembered, so that is_pinned() answers truthfully.
struct PinnedAllocator final : public c10::Allocator {
  std::mutex mu;
  std::unordered_set<void*> live;

  static void release(void* p);

  c10::DataPtr allocate(size_t n) override {
    void* p = std::malloc(n ? n : 1);
    TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr,
                     "out of host memory allocating ", n, " pinned bytes");
    {
      std::lock_guard<std::mutex> lock(mu);
      live.insert(p);
    }
    return {p, p, &PinnedAllocator::release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &PinnedAllocator::release;
  }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    std::memcpy(dest, src, n);
  }
  bool contains(const void* p) {
    std::lock_guard<std::mutex> lock(mu);
    return live.count(const_cast<void*>(p)) > 0;
  }
};

PinnedAllocator g_pinned;

void PinnedAllocator::release(void* p) {
  {
    std::lock_guard<std::mutex> lock(g_pinned.mu);
    g_pinned.live.erase(p);
  }
  std::free(p);
}

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    return runtime_ready() && device_count() > 0;
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override { client(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    set_current_device(d);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= device_count()) return current_device();
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex index) const override {
    static std::once_flag once;
    static std::vector<at::Generator> gens;
    std::call_once(once, [] {
      for (int i = 0; i < std::max(device_count(), 1); i++)
        gens.push_back(at::make_generator<TpuGeneratorImpl>(
            static_cast<c10::DeviceIndex>(i)));
    });
    c10::DeviceIndex i = index < 0 ? current_device() : index;
    TORCH_CHECK_INDEX(i >= 0 && i < static_cast<int>(gens.size()),
                      "no tpu device ", static_cast<int>(i));
    return gens[i];
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TpuGeneratorImpl>(index < 0 ? current_device()
                                                          : index);
  }
  at::Device getDeviceFromPtr(void*) const override {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "tpu memory cannot be wrapped from a raw pointer");
  }
  bool isPinnedPtr(const void* p) const override {
    return g_pinned.contains(p);
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }
  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t newsize) const override {
    resize_storage(storage, newsize);
  }
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  return at::detail::getPrivateUse1Hooks().getDefaultGenerator(index);
}

// (seed, counter) for one native random op from `gen` (a tpu generator).
void draw_rng(const at::Generator& gen, uint64_t out[2]) {
  at::Generator g = gen;
  std::lock_guard<std::mutex> lock(g.mutex());
  g.get<TpuGeneratorImpl>()->draw(out);
}

// The CPU generator that random ops falling back to the CPU use for `gen`
// (a tpu generator).
at::Generator cpu_generator_for(const at::Generator& gen) {
  auto* impl = dynamic_cast<TpuGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "expected a tpu generator, got one for ",
              gen.device());
  return impl->cpu_generator();
}

void register_hooks() {
  static TpuHooks hooks;
  static std::once_flag once;
  std::call_once(once, [] { at::RegisterPrivateUse1HooksInterface(&hooks); });
}

}  // namespace tpuc_torch
