"""tpuc: PyTorch's ``tpu`` device, written in C over the PJRT C API.

``import torch`` loads the device through the ``torch.backends`` entry point
(set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` to turn that off, then
``import tpuc``). A failure to load never breaks ``import torch``: it warns
once, and ``torch.tpu.is_available()`` is False with the reason in
``torch.tpu.unavailable_reason()``.
"""

import os
import site
import sys
import sysconfig
import warnings

__version__ = "0.1.0"

_loaded = False
_error = None


def _site_dirs():
    dirs = []
    for d in [sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")]:
        if d and d not in dirs:
            dirs.append(d)
    try:
        for d in site.getsitepackages() + [site.getusersitepackages()]:
            if d not in dirs:
                dirs.append(d)
    except AttributeError:  # some embedded interpreters lack these
        pass
    for d in sys.path:
        if d.endswith("site-packages") and d not in dirs:
            dirs.append(d)
    return dirs


def _load():
    """Registers the tpu device with PyTorch. Idempotent."""
    global _loaded, _error
    if _loaded:
        return
    _loaded = True
    import torch

    from . import device as _device

    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", _device)
    torch.backends.tpu = _device.backends
    sys.modules["torch.backends.tpu"] = _device.backends
    try:
        from . import _C

        _C._init(_site_dirs())
    except Exception as e:  # no plugin, wrong version, binding not built
        _error = f"{type(e).__name__}: {e}"
        _device._set_unavailable(_error)
        warnings.warn(f"tpuc: the tpu device is not available: {_error}", stacklevel=2)
        return
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    # torch.autocast("tpu") without a dtype: bfloat16, the TPU's native
    # reduced precision (CUDA's default is float16).
    torch.set_autocast_dtype("tpu", torch.bfloat16)
    # print(tensor): one host copy, formatted there.
    _device._install_printing()
    # torch.compile(model) with no backend: graphs on tpu go to the tpu
    # backend (Inductor has no tpu code generator).
    from . import compile as _compile

    _compile.install_default_backend()
    # torch.distributed: the `tpu` c10d backend.
    from . import distributed as _distributed

    _distributed.register()
    # accelerate and transformers learn of tpu as their modules load.
    if os.environ.get("TPUC_INTEGRATIONS", "1") != "0":
        from . import integrations as _integrations

        _integrations.install()


def _autoload():
    """Entry point of the ``torch.backends`` group (called by ``import torch``)."""
    try:
        _load()
    except Exception as e:  # never break `import torch`
        warnings.warn(f"tpuc: failed to register the tpu device: {e}", stacklevel=2)


def fallback_report():
    """Ops that ran on the CPU because they have no native tpu lowering yet:
    a dict {op name: number of calls}."""
    from . import _C

    return dict(_C.fallback_report())


def fallback_reset():
    """Clears the fallback counts (and the once-per-op warnings)."""
    from . import _C

    _C.fallback_reset()


_load()
