"""The ``tpu`` backend of ``torch.distributed``.

Registered with ``torch.distributed.Backend.register_backend(..., devices=["tpu"])``
when tpuc loads, so ``init_process_group("tpu")``, ``init_process_group()``
with tpu as the accelerator, ``init_process_group("cpu:gloo,tpu:tpu")`` and
``init_device_mesh("tpu", ...)`` work as they do with ``nccl`` on cuda.

Which transport a process group gets is decided when it is created, from
where its ranks live (each rank writes its host and process id to the
group's store):

- every rank in this process (threads, each on its own tpu device): each
  collective is ONE program compiled for all their devices (XLA's
  all_reduce, all_gather, reduce_scatter, all_to_all across replicas), and
  sends are device-to-device copies; the data never leaves the devices;
- ranks in other processes (``torchrun``, ``torch.multiprocessing.spawn``,
  several machines): the tensors are staged through the host and the
  collective runs on torch.distributed's own Gloo engine on CPU tensors,
  which spans processes and machines. The staging is asynchronous: the call
  takes its inputs' values and returns, a worker thread copies them out,
  runs Gloo, and sends the results back; work recorded after the call that
  reads a result waits for it on the device.

``run_threads(fn, world_size)`` runs ranks as threads of one process (one
tpu device each), the way to use several devices of one process (a
multi-chip host, the CPU plugin's devices) with torch.distributed.

Each collective's shape and dtype are compared across the ranks before
Gloo sees them (a mismatch raises naming every rank's call instead of
aborting inside Gloo); ``TPUC_DIST_CHECK=0`` skips that exchange.
"""

import os
import socket
import sys
import threading
from datetime import timedelta

import torch

BACKEND = "tpu"
_registered = False
_created = False  # a tpu backend was made in this process


def _create(dist_opts, pg_options):
    import torch.distributed as dist

    from . import _C

    global _created
    _created = True
    store = dist_opts.store
    rank = dist_opts.group_rank
    size = dist_opts.group_size
    timeout = dist_opts.timeout
    timeout_ms = int(timeout.total_seconds() * 1000)
    # Where each rank lives: all in this process -> in-program collectives.
    where = f"{socket.gethostname()}:{os.getpid()}"
    store.set(f"tpuc/where/{rank}", where)
    peers = [store.get(f"tpuc/where/{r}").decode() for r in range(size)]
    in_process = size > 1 and all(p == where for p in peers)
    group_key = ""
    if in_process:
        if rank == 0:
            store.set("tpuc/key", f"{where}:{os.urandom(8).hex()}")
        group_key = store.get("tpuc/key").decode()
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("tpuc/gloo/", store), rank, size, timeout)
    return _C._TpuBackend(
        gloo,
        dist.PrefixStore("tpuc/", store),
        rank,
        size,
        timeout_ms,
        group_key,
        int(torch.tpu.current_device()),
    )


def register():
    """Registers the ``tpu`` backend with torch.distributed (idempotent)."""
    global _registered
    if _registered:
        return
    import torch.distributed as dist

    if not dist.is_available():
        return
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["tpu"])
    _gloo_takes_tpu(dist)
    import atexit

    atexit.register(_at_exit)
    _registered = True


def _gloo_takes_tpu(dist):
    """A group created with the plain backend name ``gloo``
    (``init_process_group("gloo")``, ``new_group(backend="gloo")``) also
    takes tpu tensors, through a tpu backend of its own, as such a group
    takes CUDA tensors where CUDA is: programs and tests that hard-code
    Gloo (transformers' tensor-parallel tests do) run on tpu unchanged.
    ``get_backend()`` still says ``gloo``. PyTorch maps a plain backend name
    to the devices in ``Backend.backend_capability``, which has no room for
    a second backend on another device, so its BackendConfig is extended
    here; the upstream change that would make this unnecessary is a
    per-device fallback backend in ``Backend.default_device_backend_map``
    used for devices the named backend does not take."""
    c10d = dist.distributed_c10d
    base = c10d.BackendConfig
    if getattr(base, "_tpuc_gloo", False):
        return

    class BackendConfig(base):
        _tpuc_gloo = True
        __doc__ = base.__doc__

        def __init__(self, backend):
            super().__init__(backend)
            if str(backend).lower() == "gloo" and "tpu" not in self.device_backend_map and torch.tpu.is_available():
                self.device_backend_map["tpu"] = dist.Backend(BACKEND)
                # With two backends each device gets its own: no Gloo
                # context for a CUDA that is not there.
                if not torch.cuda.is_available():
                    self.device_backend_map.pop("cuda", None)

    BackendConfig.__name__ = BackendConfig.__qualname__ = base.__name__
    BackendConfig.__module__ = base.__module__
    c10d.BackendConfig = BackendConfig


def _at_exit():
    """The backends' threads finish their queued collectives while the
    interpreter can still run what completing them needs. Then, with the
    GIL released for a moment, the worker threads of torch.distributed's
    Gloo groups (which outlive destroy_process_group once functional
    collectives have cached the group) drop the tensors of the collective
    they just completed: a tensor whose Python object went first needs the
    GIL to go, and a thread that asks for it once the interpreter is
    finalizing is ended mid-C++ (std::terminate, seen after an object
    collective ended a 2-rank program)."""
    from . import _C

    _C._dist_drain()
    if _created:
        import time

        time.sleep(0.05)


def _thread_world():
    """torch.distributed's world kept per thread (PyTorch's own
    multi-threaded process-group machinery, which its distributed tests use),
    with the fields this torch's world has that it lacks."""
    from torch.testing._internal.distributed import multi_threaded_pg as mtp

    class ThreadWorld(mtp.ThreadLocalWorld):
        @property
        def comms(self):
            w = self._get_world()
            if not hasattr(w, "comms"):
                w.comms = []
            return w.comms

    return ThreadWorld()


def run_threads(fn, world_size, args=(), backend=BACKEND, timeout=timedelta(minutes=30)):
    """Runs ``fn(rank, *args)`` on ``world_size`` threads of this process,
    one rank each: rank r's current device is ``tpu:r`` and its default
    process group is initialized (``backend``, rendezvous through an
    in-memory store) before ``fn`` runs and destroyed after. With the tpu
    backend, the ranks' collectives compile into one program across their
    devices. Returns the ranks' results in rank order; if a rank raised, the
    lowest rank's exception is raised once every thread has ended.

    While it runs, torch.distributed's state is per thread in this process,
    and autograd runs each backward on the thread that calls it (so a rank's
    backward issues its own collectives). Needs ``world_size`` tpu devices
    (``torch.tpu.device_count()``; the CPU plugin has ``TPUC_CPU_DEVICE_COUNT``).
    """
    import torch.distributed as dist

    if world_size < 1:
        raise ValueError(f"world_size must be positive, got {world_size}")
    if world_size > torch.tpu.device_count():
        raise ValueError(
            f"run_threads needs one tpu device per rank: {world_size} ranks, "
            f"{torch.tpu.device_count()} device(s) (the CPU plugin takes "
            "TPUC_CPU_DEVICE_COUNT)"
        )
    register()
    store = dist.HashStore()
    results = [None] * world_size
    errors = [None] * world_size
    c10d = dist.distributed_c10d
    saved_world = c10d._world
    saved_threads = torch._C._is_multithreading_enabled()
    c10d._world = _thread_world()
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    torch.autograd.set_multithreading_enabled(False)

    def body(rank):
        try:
            torch.tpu.set_device(rank)
            dist.init_process_group(backend, rank=rank, world_size=world_size, store=store, timeout=timeout)
            try:
                results[rank] = fn(rank, *args)
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # reported to the caller below
            errors[rank] = e
            # Said at once: the other ranks may wait for this one until
            # their collectives time out.
            import traceback

            sys.stderr.write(f"[tpuc rank {rank}] " + "".join(traceback.format_exception(e)))
            sys.stderr.flush()

    # PyTorch's fake-tensor mode (DTensor's sharding propagation) sets up
    # CUDA's device guard the first time it is entered where CUDA is not
    # available; rank threads doing that first setup at once crashed the
    # process (3 of 16 runs of the 4-thread DTensor scenario on a loaded
    # machine, 0 of 22 with it done here first).
    if not torch.cuda.is_available() and hasattr(torch._C, "_ensureCUDADeviceGuardSet"):
        torch._C._ensureCUDADeviceGuardSet()
    threads = [threading.Thread(target=body, args=(r,), name=f"tpuc-rank-{r}") for r in range(world_size)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        torch.autograd.set_multithreading_enabled(saved_threads)
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        c10d._world = saved_world
    for e in errors:
        if e is not None:
            raise e
    return results
