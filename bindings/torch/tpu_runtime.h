// Shared pieces of the thin C++ binding: the process-wide client, status ->
// exception translation, and PyTorch tensor -> tpuc view description.
// No tensor semantics live here (see shared/DESIGN.md).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

#include "tpuc/tpuc.h"

namespace tpuc_torch {

// Creates the client from the plugin found in `site_dirs` (once).
void init_runtime(const std::vector<std::string>& site_dirs);
bool runtime_ready();
// True in a child process forked after the device was initialized, where
// every use of it raises (storages it inherited are not freed there).
bool in_bad_fork();
// Why the runtime could not start ("" when it did).
const std::string& runtime_error();
// The client; raises a RuntimeError if the runtime is not initialized.
tpuc_client* client();
int device_count();

// Raises the PyTorch exception that matches the status code, with its
// message, and frees the status. No-op for NULL.
void check(tpuc_status* status);

tpuc_dtype to_tpuc_dtype(at::ScalarType type);
at::ScalarType to_scalar_type(tpuc_dtype dtype);
// The tpuc storage behind a tpu tensor.
tpuc_storage* storage_of(const at::Tensor& tensor);
// (storage, dtype, sizes, strides, offset) of a tpu tensor.
tpuc_view view_of(const at::Tensor& tensor);

// Runs what fused mode recorded and waits for all work on the device
// (torch.tpu.synchronize, stream/event synchronization); raises the first
// error.
void synchronize_all();
// The same, returning the error instead (the caller frees it).
tpuc_status* synchronize_status();

// TPUC_LAUNCH_BLOCKING=1 (read once): every op waits for its result, so
// errors surface at the failing op (the synchronous debug mode).
bool launch_blocking();

// The binding's own background threads (the distributed backend's staging
// and completion threads) mark themselves: they never wait for what the
// user's threads recorded in fused mode, because a user thread may hold
// the fused lock while it waits for a result those threads deliver.
void mark_service_thread();
bool is_service_thread();

// Current device of this thread.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// The tpu generator of device `index` (tpu_hooks.cpp).
const at::Generator& default_generator(c10::DeviceIndex index);
// (seed, counter) for one native random op from `gen`, a tpu generator.
void draw_rng(const at::Generator& gen, uint64_t out[2]);
// The CPU generator that random ops falling back to the CPU use for `gen`.
at::Generator cpu_generator_for(const at::Generator& gen);
// Gives a tpu storage `nbytes` bytes, keeping its content prefix
// (tpu_allocator.cpp).
void resize_storage(const c10::Storage& storage, size_t nbytes);

// Runs `op` on the CPU with the stack's tpu tensors copied there
// (tpu_kernels.cpp).
void cpu_fallback_kernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack);
// Rebuilds the Tensor[] / Tensor?[] arguments TorchScript passes into the
// typed lists eager calls pass.
void normalize_tensor_lists(const c10::OperatorHandle& op,
                            torch::jit::Stack* stack);

}  // namespace tpuc_torch
