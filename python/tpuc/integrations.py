"""Opt-in integrations with libraries that name their devices in code.

Hugging Face ``accelerate`` (and so transformers' ``Trainer``) picks its
device and its distributed backend from a fixed list (CUDA, XPU, NPU, ...)
with no hook for a PrivateUse1 device. ``tpuc.integrations.accelerate()``
teaches its ``PartialState`` about tpu:

- one process: the default device is ``tpu`` (for transformers'
  ``TrainingArguments`` too, which reads ``ACCELERATE_TORCH_DEVICE``: in a
  process that was not launched as a rank, the call sets it to ``tpu``
  unless it is set);
- ``accelerate launch`` / ``torchrun`` with several processes: the process
  group is initialized with the ``tpu`` backend, each process takes the tpu
  device of its local rank, and accelerate runs its multi-device code path
  (``DistributedType.MULTI_GPU``: DistributedDataParallel, gathers and
  reductions through torch.distributed), as for CUDA with ``nccl``.

Call it before the first ``Accelerator``, ``PartialState`` or
``TrainingArguments`` is created. The upstream change that would make it
unnecessary: accelerate asking ``torch.accelerator.current_accelerator()``
for the device and ``torch.distributed.Backend.default_device_backend_map``
for its backend when none of its named devices is there.
"""

import os

import torch

_done = False


def _tpu_is_the_accelerator():
    acc = getattr(torch, "accelerator", None)
    return (
        acc is not None
        and acc.is_available()
        and acc.current_accelerator().type == "tpu"
        and not torch.cuda.is_available()
    )


def accelerate():
    """Makes accelerate's ``PartialState`` (and everything built on it)
    use the tpu device and the ``tpu`` process-group backend. Idempotent."""
    global _done
    if _done:
        return
    from accelerate import state as st
    from accelerate.utils import DistributedType

    from . import distributed

    distributed.register()
    cls = st.PartialState
    prepare_backend = cls._prepare_backend
    set_device = cls.set_device
    default_device = cls.default_device

    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        launched = int(os.environ.get("LOCAL_RANK", -1)) != -1
        if launched and not cpu and not sagemaker_dp and _tpu_is_the_accelerator():
            # Each rank on its own device before the group is created.
            local = int(os.environ["LOCAL_RANK"])
            torch.tpu.set_device(local % torch.tpu.device_count())
            return backend or distributed.BACKEND, DistributedType.MULTI_GPU
        return prepare_backend(self, cpu, sagemaker_dp, backend)

    def _set_device(self):
        if self.device is None and self.backend == distributed.BACKEND:
            index = self.local_process_index % torch.tpu.device_count()
            self.device = torch.device("tpu", index)
            torch.tpu.set_device(index)
            return
        set_device(self)

    def _default_device(self):
        if _tpu_is_the_accelerator():
            return torch.device("tpu")
        return default_device.fget(self)

    cls._prepare_backend = _prepare_backend
    cls.set_device = _set_device
    cls.default_device = property(_default_device)
    # transformers' TrainingArguments picks a one-process device itself
    # (CUDA, else this variable, else the CPU): the same device as
    # accelerate's.
    # (One process only: launched ranks each take their local rank's device.)
    if _tpu_is_the_accelerator() and int(os.environ.get("LOCAL_RANK", -1)) == -1:
        os.environ.setdefault("ACCELERATE_TORCH_DEVICE", f"tpu:{torch.tpu.current_device()}")
    _done = True
