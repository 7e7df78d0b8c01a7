"""Integrations with libraries that name their devices in code.

Hugging Face ``accelerate`` and ``transformers`` choose a device, check
bfloat16 support, size ``device_map="auto"`` and place pipelines from fixed
lists (CUDA, XPU, NPU, MPS, ...) with no hook for a PrivateUse1 device.
When tpu is the process's accelerator (``torch.accelerator`` says ``tpu``
and there is no CUDA), tpuc teaches them about it, so unchanged code that
runs on CUDA runs on tpu with no environment variable:

- accelerate's ``PartialState`` (so ``Accelerator`` and ``Trainer``): one
  process uses ``tpu``; launched ranks (``accelerate launch --multi_gpu``,
  ``torchrun``) initialize the ``tpu`` process group, each takes the tpu
  device of its local rank, and accelerate runs its multi-device path
  (``DistributedType.MULTI_GPU``: DDP, gathers through torch.distributed);
- accelerate's ``Accelerator(mixed_precision="fp16")``: accepted on tpu,
  with a tpu ``GradScaler``;
- transformers' ``TrainingArguments``: the device is ``tpu:0`` and
  ``bf16=True`` is accepted (``fp16=True`` too, through ``Accelerator``);
- ``device_map="auto"`` (accelerate's ``get_max_memory``): tpu devices with
  their free memory (``torch.tpu.mem_get_info``), then the CPU;
- ``pipeline()`` with no device, or an integer device, runs on tpu.

And PyTorch's own FlexAttention (``torch.nn.attention.flex_attention``),
which refuses devices outside a fixed list before it runs, takes tpu
tensors (eager and compiled, forward and backward).

Each change is applied when its module is first imported (an import hook
installed by ``import torch``; ``TPUC_INTEGRATIONS=0`` turns it off), and
decides at call time, so nothing changes where tpu is not the accelerator.
``tpuc.integrations.accelerate()`` and ``transformers()`` apply them at once.

The upstream changes that would make this unnecessary: accelerate and
transformers asking ``torch.accelerator.current_accelerator()`` for the
device (and ``torch.get_device_module(type)`` for ``mem_get_info``,
``is_bf16_supported`` and ``set_device``), ``Accelerator`` taking fp16
on any device ``torch.amp.GradScaler`` supports, and
``torch.distributed.Backend.default_device_backend_map`` for the process
group backend, when none of their named devices is there; for
FlexAttention, ``_validate_device`` accepting the PrivateUse1 backend
(``torch._C._get_privateuse1_backend_name()``).
"""

import importlib
import importlib.abc
import logging
import os
import sys

import torch

_logger = logging.getLogger("tpuc.integrations")
_applied = set()


def _tpu_is_the_accelerator():
    acc = getattr(torch, "accelerator", None)
    return (
        acc is not None
        and acc.is_available()
        and acc.current_accelerator().type == "tpu"
        and not torch.cuda.is_available()
    )


# ------------------------------ accelerate ---------------------------------


def _patch_accelerate_state(st):
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


def _patch_accelerator(acc):
    """``Accelerator(mixed_precision="fp16")`` (and ``TrainingArguments(
    fp16=True)``): accelerate accepts fp16 only on devices in a tuple
    written into ``Accelerator.__init__`` and builds a CUDA GradScaler
    elsewhere. tpu joins that tuple, and the scaler is ``torch.amp.
    GradScaler("tpu")``, whose unscale and update run on the device."""
    from accelerate.utils import DistributedType

    init = acc.Accelerator.__init__
    code = init.__code__
    consts = list(code.co_consts)
    found = [i for i, c in enumerate(consts)
             if isinstance(c, tuple) and "cuda" in c and "xpu" in c]
    if len(found) != 1:
        raise RuntimeError("Accelerator.__init__ has no single fp16 device tuple")
    if "tpu" not in consts[found[0]]:
        consts[found[0]] = consts[found[0]] + ("tpu",)
        init.__code__ = code.replace(co_consts=tuple(consts))
    grad_scaler = acc.get_grad_scaler

    def get_grad_scaler(distributed_type=None, **kwargs):
        if _tpu_is_the_accelerator() and distributed_type != DistributedType.FSDP:
            return torch.amp.GradScaler("tpu", **kwargs)
        return grad_scaler(distributed_type, **kwargs)

    get_grad_scaler.__wrapped__ = grad_scaler
    acc.get_grad_scaler = get_grad_scaler


def _tpu_max_memory(max_memory):
    """accelerate's get_max_memory for tpu: integer keys are tpu indices."""
    import psutil
    from accelerate.utils.modeling import convert_file_size_to_int

    if max_memory is None:
        out = {}
        for i in range(torch.tpu.device_count()):
            try:
                out[i] = torch.tpu.mem_get_info(i)[0]
            except RuntimeError as e:  # no statistic and no TPUC_MEMORY_LIMIT
                _logger.info("tpu:%d has no memory figure (%s); not used by device_map", i, e)
        out["cpu"] = psutil.virtual_memory().available
        return out
    # In place, as accelerate's does (transformers reads the converted
    # sizes back from the caller's dict): "tpu:N" keys become N.
    for k in [k for k in max_memory if isinstance(k, str) and (k == "tpu" or k.startswith("tpu:"))]:
        max_memory[torch.device(k).index or 0] = max_memory.pop(k)
    for k, v in max_memory.items():
        if isinstance(v, str):
            max_memory[k] = convert_file_size_to_int(v)
    given = max_memory
    n = torch.tpu.device_count()
    devices = sorted(k for k in given if isinstance(k, int))
    for d in devices:
        if d < 0 or d >= n:
            _logger.warning("Device %d is not available, available devices are %s", d, list(range(n)))
    order = devices + [k for k in ("cpu", "disk") if k in given]
    for k in given:
        if k not in order:
            raise ValueError(
                f"Device {k} is not recognized, available devices are integers (tpu indices), "
                "'tpu:N', 'cpu' and 'disk'"
            )
    return {k: given[k] for k in order}


def _patch_accelerate_modeling(m):
    orig = m.get_max_memory

    def get_max_memory(max_memory=None):
        if _tpu_is_the_accelerator():
            return _tpu_max_memory(max_memory)
        return orig(max_memory)

    get_max_memory.__doc__ = orig.__doc__
    get_max_memory.__wrapped__ = orig
    m.get_max_memory = get_max_memory
    # Names bound by value before this ran (when patched late).
    for name, attr in (
        ("accelerate.utils", "get_max_memory"),
        ("transformers.integrations.accelerate", "accelerate_max_memory"),
    ):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, attr, None) is orig:
            setattr(mod, attr, get_max_memory)


# ------------------------------ transformers -------------------------------


def _patch_training_args(ta):
    # TrainingArguments picks tpu:0 in its branch for a "tpu" device
    # (transformers' is_torch_tpu_available means Google's torch_tpu
    # package), and its bf16 check knows no PrivateUse1 device.
    tpu_available = ta.is_torch_tpu_available
    bf16_available = ta.is_torch_bf16_gpu_available

    def is_torch_tpu_available(*args, **kwargs):
        return tpu_available(*args, **kwargs) or _tpu_is_the_accelerator()

    def is_torch_bf16_gpu_available(*args, **kwargs):
        return bf16_available(*args, **kwargs) or (
            _tpu_is_the_accelerator() and torch.tpu.is_bf16_supported()
        )

    ta.is_torch_tpu_available = is_torch_tpu_available
    ta.is_torch_bf16_gpu_available = is_torch_bf16_gpu_available


def _patch_pipelines(base):
    import inspect

    cls = base.Pipeline
    init = cls.__init__
    sig = inspect.signature(init)

    def __init__(self, *args, **kwargs):
        if _tpu_is_the_accelerator():
            bound = sig.bind(self, *args, **kwargs)
            dev = bound.arguments.get("device")
            model = bound.arguments.get("model")
            if getattr(model, "hf_device_map", None) is None:
                # As for CUDA: no device or an index means the accelerator.
                if dev is None:
                    dev = torch.device("tpu", torch.tpu.current_device())
                elif isinstance(dev, int) and not isinstance(dev, bool) and dev >= 0:
                    dev = torch.device("tpu", dev)
                bound.arguments["device"] = dev
                args, kwargs = bound.args[1:], bound.kwargs
        init(self, *args, **kwargs)
        hf_map = getattr(getattr(self, "model", None), "hf_device_map", None)
        if _tpu_is_the_accelerator() and hf_map:
            first = next(iter(hf_map.values()))
            if isinstance(first, int):
                self.device = torch.device("tpu", first)

    __init__.__wrapped__ = init
    cls.__init__ = __init__


# ------------------------------ flex attention ------------------------------


def _patch_flex_attention(fa):
    """PyTorch's FlexAttention refuses every device but CUDA, CPU, XPU and
    HPU before it runs; on tpu its eager path (the dense reference, backward
    included) and its compiled path (torch.compile, the tpu backend) both
    work, so tpu tensors pass the check."""
    validate = fa._validate_device

    def _validate_device(query, key, value):
        if query.device.type == "tpu":
            return None
        return validate(query, key, value)

    _validate_device.__wrapped__ = validate
    fa._validate_device = _validate_device


_PATCHES = {
    "torch.nn.attention.flex_attention": _patch_flex_attention,
    "accelerate.state": _patch_accelerate_state,
    "accelerate.accelerator": _patch_accelerator,
    "accelerate.utils.modeling": _patch_accelerate_modeling,
    "transformers.training_args": _patch_training_args,
    "transformers.pipelines.base": _patch_pipelines,
}


def _apply(name, module):
    if name in _applied:
        return
    _applied.add(name)
    try:
        _PATCHES[name](module)
    except Exception as e:  # a library version this was not written for
        _logger.warning("tpuc: could not teach %s about the tpu device: %s: %s",
                        name, type(e).__name__, e)


class _Loader:
    """The module's own loader, with the patch run after its code."""

    def __init__(self, name, loader):
        self._name = name
        self._loader = loader

    def __getattr__(self, attr):  # get_source, is_package, resources, ...
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply(self._name, module)


class _Finder(importlib.abc.MetaPathFinder):
    """Applies a patch when its module has finished executing."""

    def find_spec(self, name, path=None, target=None):
        if name not in _PATCHES or name in _applied:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(name, spec.loader)
        return spec


_finder = None


def install():
    """Applies the patches to the modules already imported and to the
    others when they are. Called by ``import torch`` (unless
    ``TPUC_INTEGRATIONS=0``). Idempotent."""
    global _finder
    if _finder is None:
        _finder = _Finder()
        sys.meta_path.insert(0, _finder)
    for name in _PATCHES:
        if name in sys.modules:
            _apply(name, sys.modules[name])


def _import_and_apply(names):
    for name in names:
        _apply(name, importlib.import_module(name))


def accelerate():
    """Teaches accelerate (``PartialState``, ``get_max_memory``, fp16) about tpu
    now. Idempotent."""
    _import_and_apply(["accelerate.state", "accelerate.utils.modeling",
                       "accelerate.accelerator"])


def flex_attention():
    """Lets ``torch.nn.attention.flex_attention`` (and transformers'
    ``attn_implementation="flex_attention"``) take tpu tensors now.
    Idempotent."""
    _import_and_apply(["torch.nn.attention.flex_attention"])


def transformers():
    """Teaches transformers (``TrainingArguments``, pipelines) and the
    accelerate it uses about tpu now. Idempotent."""
    accelerate()
    _import_and_apply(["transformers.training_args", "transformers.pipelines.base"])
