"""The ``torch.tpu`` device module: the ``torch.cuda``-like API libraries
probe, over the tpuc runtime."""

import atexit
import contextlib
import os
import types

import torch

_unavailable = None


def _set_unavailable(reason):
    global _unavailable
    _unavailable = reason


def _C():
    from . import _C as c

    return c


def is_available():
    if _unavailable is not None:
        return False
    return bool(_C().is_available())


def unavailable_reason():
    """Why the device is not available ("" when it is)."""
    if _unavailable is not None:
        return _unavailable
    return _C()._runtime_error()


def is_initialized():
    return is_available()


def _lazy_init():
    if not is_available():
        raise RuntimeError(f"the tpu device is not available: {unavailable_reason()}")


def _is_in_bad_fork():
    """True in a process forked after the tpu device was initialized: the
    device cannot be used there (use the 'spawn' start method)."""
    return _unavailable is None and bool(_C()._is_in_bad_fork())


_exit_keep = []


def _autograd_device_threads_started():
    """Whether autograd's device threads ("pt_autograd_N") run in this
    process (they start with the first backward on an accelerator)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True  # cannot tell: wait for them anyway
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                if f.read().startswith("pt_autograd_"):
                    return True
        except OSError:
            pass
    return False


def _quiesce_autograd_at_exit():
    """Lets autograd's tpu device threads finish before the interpreter
    finalizes. A device thread releases a backward's last task after the
    caller has its gradients; when that release drops the last reference
    to a tensor made in Python (a ``grad_outputs`` tensor), it needs the
    GIL, and a thread that takes the GIL once finalization has begun is
    ended by Python 3.11 with a forced unwind, which aborts the process
    ("terminate called without an active exception"). A device thread
    runs its tasks one at a time, so a backward of an empty tensor on each
    device, run here while the interpreter is still whole, returns only
    after the thread is done with what came before (4 ms for 4 devices;
    through the engine itself, as torch.autograd.backward's argument
    checks import sympy, 0.8 s). Its own tensors are kept until the end,
    so its release drops no Python object."""
    if _unavailable is not None or not is_available() or _is_in_bad_fork():
        return
    if not _autograd_device_threads_started():
        return
    try:
        from torch.autograd.variable import Variable

        with torch.inference_mode(False), torch.enable_grad():
            for d in range(device_count()):
                x = torch.empty(0, device=f"tpu:{d}", requires_grad=True)
                g = torch.empty(0, device=f"tpu:{d}")
                y = x.view(0)
                _exit_keep.append((x, y, g))
                # (outputs, their gradients, keep_graph, create_graph,
                # inputs, allow_unreachable, accumulate_grad)
                Variable._execution_engine.run_backward((y,), (g,), False, False, (), True, True)
    except Exception:  # an exiting process reports nothing more
        pass


atexit.register(_quiesce_autograd_at_exit)


def device_count():
    return int(_C().device_count()) if is_available() else 0


def current_device():
    _lazy_init()
    return int(_C().current_device())


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "tpu":
        raise ValueError(f"expected a tpu device, got {d}")
    return current_device() if d.index is None else d.index


def set_device(device):
    _lazy_init()
    _C().set_device(_index(device))


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device):
        self.idx = _index(device) if device is not None else None
        self.prev = None

    def __enter__(self):
        if self.idx is not None:
            self.prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev is not None:
            set_device(self.prev)
        return False


def synchronize(device=None):
    _lazy_init()
    _C().synchronize()


def get_device_name(device=None):
    _lazy_init()
    info = _C().device_info(_index(device))
    plat = _C().plugin_info()
    return f"{info['kind']} ({plat['platform']}, PJRT {plat['package'] or plat['path']})"


def get_device_properties(device=None):
    _lazy_init()
    idx = _index(device)
    info = _C().device_info(idx)
    plat = _C().plugin_info()
    props = types.SimpleNamespace(
        name=info["kind"],
        index=idx,
        platform=plat["platform"],
        platform_version=plat["platform_version"],
        plugin=plat["path"],
        plugin_package=plat["package"],
        plugin_version=plat["package_version"],
        pjrt_api=plat["pjrt_api"],
        xla_version=plat["xla_version"],
        stablehlo=plat["stablehlo"],
        total_memory=_or_unknown(_memory_limit(info)),
    )
    return props


def _or_unknown(n):
    return -1 if n is None else n


def is_bf16_supported(including_emulation=True):
    return is_available()


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


# ----------------------------- memory ------------------------------------


def memory_stats(device=None):
    _lazy_init()
    return dict(_C().memory_stats(_index(device)))


def memory_allocated(device=None):
    return int(memory_stats(device)["allocated_bytes.all.current"])


def max_memory_allocated(device=None):
    return int(memory_stats(device)["allocated_bytes.all.peak"])


def memory_reserved(device=None):
    return int(memory_stats(device)["reserved_bytes.all.current"])


def max_memory_reserved(device=None):
    return int(memory_stats(device)["reserved_bytes.all.peak"])


def reset_peak_memory_stats(device=None):
    _lazy_init()
    _C().reset_peak_memory_stats(_index(device))


def empty_cache():
    """tpuc holds no cached blocks: storages free their buffers at once."""


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _parse_size(text, name):
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m and m.group(2).lower()
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"{name}={text!r}: expected a byte count such as 17179869184, 16GB or 16GiB")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def _host_memory_total():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _memory_limit(info):
    """A device's memory in bytes: the plugin's figure, else
    TPUC_MEMORY_LIMIT, else (CPU plugin, whose devices use host memory) the
    host's memory shared among its devices; None when nothing says."""
    total = info["memory_limit"]
    if total is not None and total >= 0:
        return total
    env = os.environ.get("TPUC_MEMORY_LIMIT")
    if env:
        return _parse_size(env, "TPUC_MEMORY_LIMIT")
    if _C().plugin_info()["platform"] == "cpu":
        host = _host_memory_total()
        if host:
            return host // max(device_count(), 1)
    return None


def mem_get_info(device=None):
    """(free, total) bytes: the plugin's statistics; where it has none,
    ``TPUC_MEMORY_LIMIT`` (or, on the CPU plugin, the host's memory shared
    among its devices) less what this process's tensors hold."""
    _lazy_init()
    idx = _index(device)
    info = _C().device_info(idx)
    total = _memory_limit(info)
    if total is None:
        raise RuntimeError(
            "the PJRT plugin reports no memory limit for this device; set "
            "TPUC_MEMORY_LIMIT (bytes, or e.g. 16GiB) to give it one")
    used = info["memory_in_use"]
    if used is None or used < 0:
        used = memory_reserved(idx)
    return (max(total - used, 0), total)


# ------------------------------ RNG --------------------------------------


def default_generator(device=None):
    """The default torch.Generator of a tpu device."""
    _lazy_init()
    return _C().default_generator(_index(device))


def manual_seed(seed):
    """Seeds the current tpu device's default generator."""
    if is_available():
        default_generator().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds every tpu device's default generator (torch.manual_seed calls
    this)."""
    for i in range(device_count()):
        default_generator(i).manual_seed(int(seed))


def seed():
    """Seeds the current device's generator with a non-deterministic seed."""
    if is_available():
        default_generator().seed()


def seed_all():
    for i in range(device_count()):
        default_generator(i).seed()


def initial_seed():
    return default_generator().initial_seed()


def get_rng_state(device="tpu"):
    return default_generator(device).get_state()


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state, device="tpu"):
    default_generator(device).set_state(new_state)


def set_rng_state_all(new_states):
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# ----------------------------- streams -----------------------------------


class _OnTpu(type):
    """isinstance(x, torch.tpu.Stream) holds for any torch.Stream of the tpu
    device (and likewise for Event): the objects are plain torch.Stream /
    torch.Event, which PyTorch's own methods require (elapsed_time and
    wait_stream accept nothing else)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._base) and obj.device.type == "tpu"


class Stream(metaclass=_OnTpu):
    """A tpu stream: a torch.Stream on the tpu device. All streams of a
    device run in one issue order on the PJRT client; `priority` is
    accepted."""

    _base = torch.Stream

    def __new__(cls, device=None, priority=0, **kwargs):
        return torch.Stream(device=torch.device("tpu", _index(device)), priority=priority, **kwargs)


class Event(metaclass=_OnTpu):
    """A tpu event: a torch.Event on the current tpu device."""

    _base = torch.Event

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device=torch.device("tpu", current_device()),
                           enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def current_stream(device=None):
    return torch.accelerator.current_stream(torch.device("tpu", _index(device)))


def default_stream(device=None):
    cur = current_stream(device)
    return torch.Stream(stream_id=0, device_index=cur.device_index,
                        device_type=cur.device_type)


def set_stream(s):
    if s is not None:
        torch.accelerator.set_stream(s)


@contextlib.contextmanager
def stream(s):
    """Makes `s` the current stream of its device inside the block."""
    if s is None:
        yield
        return
    prev = torch.accelerator.current_stream(s.device)
    torch.accelerator.set_stream(s)
    try:
        yield s
    finally:
        torch.accelerator.set_stream(prev)


backends = types.ModuleType("torch.backends.tpu")
backends.is_available = is_available
backends.is_built = lambda: True


# ---------------------------------------------------------------- eager modes

EAGER_MODES = ("debug", "strict", "fused")


def get_eager_mode():
    """The eager mode of the calling thread: 'debug' (each op runs and is
    waited for; errors at the failing op), 'strict' (each op runs
    asynchronously) or 'fused' (ops are recorded and run as fused
    segments). Set by TPUC_EAGER_MODE, set_eager_mode or eager_mode()."""
    _lazy_init()
    return _C().eager_mode()


def set_eager_mode(mode, thread_local=False):
    """Sets the eager mode for the process, or with ``thread_local=True``
    for the calling thread only (``mode=None`` then clears the thread's
    choice). Leaving 'fused' runs what was recorded."""
    _lazy_init()
    if mode is None and not thread_local:
        raise ValueError("eager mode must be 'debug', 'strict' or 'fused', got None")
    _C().set_eager_mode("" if mode is None else str(mode), bool(thread_local))


class eager_mode(contextlib.ContextDecorator):
    """``with torch.tpu.eager_mode("fused"): ...`` or ``@torch.tpu.eager_mode("debug")``:
    the mode for the calling thread inside the block or function."""

    def __init__(self, mode):
        if mode not in EAGER_MODES:
            raise ValueError(f"eager mode must be 'debug', 'strict' or 'fused', got {mode!r}")
        self.mode = mode
        self._saved = []

    def __enter__(self):
        _lazy_init()
        self._saved.append(_C().eager_thread_override())
        _C().set_eager_mode(self.mode, True)
        return self

    def __exit__(self, *exc):
        prev = self._saved.pop()
        _C().set_eager_mode(prev, True)
        return False


def fused_stats():
    """Counters of fused mode since the last reset: ops recorded, segments
    run and dropped (no live result), ops and results per run, segment
    programs compiled vs found in the caches, recompiles, compile seconds,
    segments compiled and run on the background thread, and segments per
    reason. Waits for the background thread's work submitted so far."""
    _lazy_init()
    return dict(_C().fused_stats())


def fused_pending():
    """Segments handed to the background thread (step boundaries, size
    limit) whose compile or run has not finished yet. Does not wait."""
    _lazy_init()
    return int(_C().fused_pending())


def fused_log():
    """The most recent fused segments (oldest first): why each ran, its ops
    and live results, whether its program was compiled or found, whether
    it was compiled and run on the background thread, and for a recompile
    what changed in its key."""
    _lazy_init()
    return list(_C().fused_events())


def fused_summary():
    """One line per reason segments ran, e.g.
    ``repeated op sequence: 12 segments, 96 ops/segment, 1 compiled, 11 cached``."""
    lines = []
    by = {}
    for e in fused_log():
        r = by.setdefault(e["reason"], {"n": 0, "ops": 0, "compiled": 0, "cached": 0,
                                        "by_ops": 0, "dropped": 0, "background": 0})
        r["n"] += 1
        r["background"] += bool(e.get("background"))
        r["ops"] += e["ops"]
        if not e["ran"]:
            r["dropped"] += 1
        elif e["program"] == "compiled":
            r["compiled"] += 1
        elif e["program"] == "op by op":
            r["by_ops"] += 1
        else:
            r["cached"] += 1
    for reason, r in by.items():
        lines.append(
            f"{reason}: {r['n']} segments, {r['ops'] / r['n']:.0f} ops/segment, "
            f"{r['compiled']} compiled, {r['cached']} cached, {r['by_ops']} op by op (first runs), "
            f"{r['dropped']} dropped (nothing live), "
            f"{r['background']} in the background"
        )
    return "\n".join(lines)


def fused_reset_stats():
    """Clears fused_stats() and fused_log()."""
    _lazy_init()
    _C().fused_reset_stats()


def compile_cache_stats():
    """The compilation cache: hits per tier, misses, compile seconds, bytes."""
    _lazy_init()
    return dict(_C().compile_cache_stats())


def compile_cache_clear(disk=False):
    """Drops the in-memory tier (and with ``disk=True`` the on-disk entries)."""
    _lazy_init()
    _C().compile_cache_clear(bool(disk))


def compile_stats():
    """``torch.compile(backend="tpu")``: graphs handed to the backend, input
    signatures captured as one program each (``captures``), recompiles and
    what changed (``recompile_log``), ``replays``, programs compiled or
    found in the compile cache, seconds compiling, graphs that run op by op
    and why (``eager_reasons``), and donated input buffers."""
    _lazy_init()
    from . import compile as _compile

    return _compile.stats()


def compile_reset_stats():
    """Clears compile_stats()."""
    _lazy_init()
    from . import compile as _compile

    _compile.reset_stats()


# Printing: PyTorch formats a tensor's values where they live, reading them
# element by element (each read a device-to-host copy and, the first time
# a shape is seen, a compiled program on tpu). A tpu tensor up to this size
# is copied to the host once and formatted there, as the CPU formats it.
PRINT_COPY_MAX_BYTES = 64 << 20


def _install_printing():
    import torch
    import torch._tensor_str as tensor_str

    original = tensor_str._tensor_str
    if getattr(original, "_tpuc", False):
        return

    def _tensor_str(self, indent):
        if (self.device.type == "tpu" and not self.is_quantized and self.layout == torch.strided
                and self.numel() * self.element_size() <= PRINT_COPY_MAX_BYTES):
            with torch.no_grad():
                self = self.detach().to("cpu")
        return original(self, indent)

    _tensor_str._tpuc = True
    _tensor_str._original = original
    tensor_str._tensor_str = _tensor_str
