"""What every rank of the distributed tests runs (test_distributed.py).

Run in processes started like torchrun starts them (``python
dist_scenarios.py SCENARIO``, with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT set: one tpu device per process, host staging
over Gloo), or on threads of one process (``tpuc.distributed.run_threads``:
one device per rank, in-program collectives). A scenario raises on any
difference; in a process, a line ``SCENARIO-OK <json>`` on stdout reports
success and what it measured.
"""

import contextlib
import json
import os
import sys
import threading
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]
# The dtypes Gloo itself takes, for the reference runs on CPU tensors.
GLOO_DTYPES = {
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
}
SMALL_DTYPES = [torch.bool, torch.int16, torch.uint64, torch.bfloat16, torch.float32, torch.complex64]
R = dist.ReduceOp
SHAPE = (4, 3)


def _np(dtype):
    return {
        torch.bool: np.bool_,
        torch.uint8: np.uint8,
        torch.int8: np.int8,
        torch.int16: np.int16,
        torch.int32: np.int32,
        torch.int64: np.int64,
        torch.uint16: np.uint16,
        torch.uint32: np.uint32,
        torch.uint64: np.uint64,
    }[dtype]


def make(rank, dtype, shape=SHAPE, salt=0):
    """Rank `rank`'s input: small whole numbers (so float sums, products
    and averages are exact in every dtype and order); unsigned ints also
    get values past the signed range, where min/max and sums differ from
    signed arithmetic."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + DTYPES.index(dtype))
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        re = torch.randint(-3, 4, shape, generator=g).to(torch.float64)
        im = torch.randint(-3, 4, shape, generator=g).to(torch.float64)
        return torch.complex(re, im).to(dtype)
    if dtype.is_floating_point:
        return torch.randint(-3, 4, shape, generator=g).to(dtype)
    if dtype in (torch.uint16, torch.uint32, torch.uint64):
        bits = {torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}[dtype]
        small = np.random.default_rng(n + rank * 7 + salt).integers(0, 4, size=n)
        high = np.random.default_rng(n + rank * 11 + salt).integers(0, 2, size=n)
        v = small.astype(np.uint64) + (high.astype(np.uint64) << np.uint64(bits - 1))
        return torch.from_numpy(v.astype(_np(dtype)).reshape(shape))
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=g).to(dtype)
    return torch.randint(-3, 4, shape, generator=g).to(dtype)


def ops_for(dtype):
    if dtype.is_complex:
        return [R.SUM, R.AVG, "premul"]
    ops = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX]
    if dtype == torch.bool or not dtype.is_floating_point:
        ops += [R.BAND, R.BOR, R.BXOR]
    else:
        ops += ["premul"]
    return ops


def reduce_ref(xs, op, dtype):
    """The reduction of the ranks' inputs, computed here."""
    n = len(xs)
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.complex128 if dtype.is_complex else torch.float64
        s = torch.stack([x.to(wide) for x in xs])
        if op == "premul":
            return (s * 0.5).sum(0).to(dtype)
        out = {
            R.SUM: lambda: s.sum(0),
            R.AVG: lambda: s.sum(0) / n,
            R.PRODUCT: lambda: s.prod(0),
            R.MIN: lambda: s.min(0).values,
            R.MAX: lambda: s.max(0).values,
        }[op]()
        return out.to(dtype)
    a = np.stack([x.numpy() for x in xs])
    if dtype == torch.bool:
        f = {
            R.SUM: np.logical_or,
            R.AVG: np.logical_or,
            R.PRODUCT: np.logical_and,
            R.MIN: np.logical_and,
            R.MAX: np.logical_or,
            R.BAND: np.logical_and,
            R.BOR: np.logical_or,
            R.BXOR: np.logical_xor,
        }[op]
        return torch.from_numpy(f.reduce(a, axis=0).astype(np.bool_))
    f = {
        R.SUM: np.add,
        R.AVG: np.add,
        R.PRODUCT: np.multiply,
        R.MIN: np.minimum,
        R.MAX: np.maximum,
        R.BAND: np.bitwise_and,
        R.BOR: np.bitwise_or,
        R.BXOR: np.bitwise_xor,
    }[op]
    with np.errstate(over="ignore"):
        r = f.reduce(a, axis=0, dtype=a.dtype)  # wraps, as the device does
        if op == R.AVG:  # the wrapped sum divided, truncated toward zero
            s = r.astype(object)
            r = np.array([int(v) // n if v >= 0 else -(-int(v) // n) for v in s.reshape(-1)], dtype=object)
            r = r.astype(a.dtype).reshape(a.shape[1:])
    return torch.from_numpy(np.ascontiguousarray(r))


def rop(op):
    return dist._make_nccl_premul_sum(0.5) if op == "premul" else op


def same(got, want, what):
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.dtype}{list(got.shape)} {got.flatten()[:8].tolist()}, want {want.dtype}{list(want.shape)} {want.flatten()[:8].tolist()}")


def gloo_too(dtype):
    """Whether the CPU tensors of this dtype can go through Gloo as a check
    of the reference (the same process group, CPU tensors)."""
    return dtype in GLOO_DTYPES or dtype.is_complex


# ---------------------------------------------------------------------------


def collectives(rank, size, dtypes=None, backend=None):
    """Every ProcessGroup operation on tpu tensors against the result
    computed from every rank's input here, and against Gloo's on CPU tensors
    where Gloo takes the dtype. `backend`: what get_backend() must say."""
    if backend is not None:
        assert dist.get_backend() == backend, dist.get_backend()
    dtypes = DTYPES if dtypes is None else [getattr(torch, d) if isinstance(d, str) else d for d in dtypes]
    dev = torch.device("tpu", torch.tpu.current_device())
    checked = 0
    for dt in dtypes:
        xs = [make(r, dt) for r in range(size)]
        # all_reduce, every op of the dtype; a non-contiguous view too.
        for op in ops_for(dt):
            want = reduce_ref(xs, op, dt)
            t = xs[rank].to(dev)
            dist.all_reduce(t, op=rop(op))
            same(t, want, f"all_reduce {op} {dt}")
            checked += 1
            if gloo_too(dt) and op not in (R.AVG, "premul"):
                c = xs[rank].clone()
                dist.all_reduce(c, op=op)
                same(c, want, f"gloo all_reduce {op} {dt} (the reference)")
        big = torch.stack([xs[rank], xs[rank]], 1).to(dev)  # [4, 2, 3]
        view = big[:, 1]
        dist.all_reduce(view)
        same(view, reduce_ref(xs, R.SUM, dt), f"all_reduce of a strided view {dt}")
        same(big[:, 0], xs[rank], f"all_reduce of a view left the rest {dt}")
        # broadcast, reduce
        root = size - 1
        t = xs[rank].to(dev)
        dist.broadcast(t, src=root)
        same(t, xs[root], f"broadcast {dt}")
        t = xs[rank].to(dev)
        dist.reduce(t, dst=0, op=R.MAX if dt.is_complex is False else R.SUM)
        if rank == 0:
            same(t, reduce_ref(xs, R.MAX if not dt.is_complex else R.SUM, dt), f"reduce {dt}")
        # all_gather (list and into one tensor)
        outs = [torch.empty(SHAPE, dtype=dt, device=dev) for _ in range(size)]
        dist.all_gather(outs, xs[rank].to(dev))
        for r in range(size):
            same(outs[r], xs[r], f"all_gather part {r} {dt}")
        out = torch.empty((size * SHAPE[0],) + SHAPE[1:], dtype=dt, device=dev)
        dist.all_gather_into_tensor(out, xs[rank].to(dev))
        same(out, torch.cat(xs), f"all_gather_into_tensor {dt}")
        if gloo_too(dt) and not dt.is_complex:
            c = torch.empty_like(torch.cat(xs))
            dist.all_gather_into_tensor(c, xs[rank])
            same(c, torch.cat(xs), f"gloo all_gather_into_tensor {dt} (the reference)")
        # reduce_scatter (tensor and list)
        if not dt.is_complex:
            ins = [make(r, dt, (size * 2, 3), salt=1) for r in range(size)]
            for op in [R.SUM, R.MAX, R.AVG] if dt != torch.bool else [R.SUM]:
                o = torch.empty((2, 3), dtype=dt, device=dev)
                dist.reduce_scatter_tensor(o, ins[rank].to(dev), op=op)
                same(o, reduce_ref(ins, op, dt)[2 * rank : 2 * rank + 2], f"reduce_scatter_tensor {op} {dt}")
            o = torch.empty((2, 3), dtype=dt, device=dev)
            dist.reduce_scatter(o, list(ins[rank].to(dev).split(2)))
            same(o, reduce_ref(ins, R.SUM, dt)[2 * rank : 2 * rank + 2], f"reduce_scatter {dt}")
        # all_to_all_single, even and uneven; all_to_all of a list
        a = make(rank, dt, (size * 2, 3), salt=2)
        o = torch.empty_like(a, device=dev)
        dist.all_to_all_single(o, a.to(dev))
        want = torch.cat([make(r, dt, (size * 2, 3), salt=2)[2 * rank : 2 * rank + 2] for r in range(size)])
        same(o, want, f"all_to_all_single {dt}")
        # rank r sends r+1+s rows to rank s
        splits = lambda r: [r + 1 + s for s in range(size)]  # noqa: E731
        srcs = [make(r, dt, (sum(splits(r)), 3), salt=3) for r in range(size)]
        outs_n = [splits(r)[rank] for r in range(size)]
        o = torch.empty((sum(outs_n), 3), dtype=dt, device=dev)
        dist.all_to_all_single(o, srcs[rank].to(dev), output_split_sizes=outs_n, input_split_sizes=splits(rank))
        want = torch.cat([srcs[r].split(splits(r))[rank] for r in range(size)])
        same(o, want, f"all_to_all_single uneven {dt}")
        ins = [make(rank, dt, (s + 1, 2), salt=4) for s in range(size)]
        outs = [torch.empty((rank + 1, 2), dtype=dt, device=dev) for _ in range(size)]
        dist.all_to_all(outs, [t.to(dev) for t in ins])
        for r in range(size):
            same(outs[r], make(r, dt, (rank + 1, 2), salt=4), f"all_to_all part {r} {dt}")
        # gather, scatter
        g = [torch.empty(SHAPE, dtype=dt, device=dev) for _ in range(size)] if rank == 0 else None
        dist.gather(xs[rank].to(dev), g, dst=0)
        if rank == 0:
            for r in range(size):
                same(g[r], xs[r], f"gather part {r} {dt}")
        src = size - 1
        o = torch.empty(SHAPE, dtype=dt, device=dev)
        sl = [make(src, dt, salt=5 + r).to(dev) for r in range(size)] if rank == src else None
        dist.scatter(o, sl, src=src)
        same(o, make(src, dt, salt=5 + rank), f"scatter {dt}")
        checked += 12
    dist.barrier()
    return checked


def point_to_point(rank, size):
    """send/recv, isend/irecv and batch_isend_irecv around a ring."""
    dev = torch.device("tpu", torch.tpu.current_device())
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for dt in [torch.float32, torch.int64, torch.bool, torch.uint16, torch.complex128]:
        mine = make(rank, dt)
        got = torch.empty(SHAPE, dtype=dt, device=dev)
        if rank % 2 == 0:
            dist.send(mine.to(dev), dst=nxt)
            dist.recv(got, src=prv)
        else:
            dist.recv(got, src=prv)
            dist.send(mine.to(dev), dst=nxt)
        same(got, make(prv, dt), f"send/recv {dt}")
        got = torch.empty(SHAPE, dtype=dt, device=dev)
        reqs = [dist.isend(mine.to(dev), dst=nxt), dist.irecv(got, src=prv)]
        for q in reqs:
            q.wait()
        same(got, make(prv, dt), f"isend/irecv {dt}")
        got = torch.empty(SHAPE, dtype=dt, device=dev)
        ops = [dist.P2POp(dist.isend, mine.to(dev), nxt), dist.P2POp(dist.irecv, got, prv)]
        for q in dist.batch_isend_irecv(ops):
            q.wait()
        same(got, make(prv, dt), f"batch_isend_irecv {dt}")
    return True


def integer_averages(rank, size, rounds=40):
    """Integer AVG all_reduces back to back: each divides its result on the
    device with an op that checks its argument there (the caller waits for
    that check under the fused lock, for a value the staging thread still
    has to deliver) while the previous call's completion records its
    event. Once, completing a call waited for that lock: a deadlock."""
    dev = torch.device("tpu", torch.tpu.current_device())
    works = []
    for i in range(rounds):
        t = torch.full((64,), rank * 10 + i, dtype=torch.int64, device=dev)
        works.append((i, t, dist.all_reduce(t, op=R.AVG, async_op=True)))
    for i, t, w in works:
        w.wait()
        want = sum(r * 10 + i for r in range(size)) // size
        same(t, torch.full((64,), want, dtype=torch.int64), f"integer average {i}")
    return rounds


def async_work(rank, size):
    """Work objects: wait, is_completed, get_future and its callbacks; the
    value read after the call without waiting is the collective's."""
    dev = torch.device("tpu", torch.tpu.current_device())
    xs = [make(r, torch.float32) for r in range(size)]
    want = reduce_ref(xs, R.SUM, torch.float32)
    t = xs[rank].to(dev)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    w.wait()
    assert w.is_completed() and w.is_success()
    same(t, want, "async all_reduce")
    same(fut.wait()[0], want, "future value")
    same(chained.wait(), want * 2, "future callback")
    # Reading the result right after the call (no wait) still sees it: the
    # value arrives on the device before anything reads it.
    t = xs[rank].to(dev)
    dist.all_reduce(t, async_op=True)
    same(t + 1, want + 1, "read without wait")
    out = torch.empty(size * 4, 3, device=dev)
    w = dist.all_gather_into_tensor(out, xs[rank].to(dev), async_op=True)
    w.wait()
    same(out, torch.cat(xs), "async all_gather_into_tensor")
    return True


def functional(rank, size):
    """torch.distributed._functional_collectives (what DTensor and
    torch.compile use) and the object collectives."""
    import torch.distributed._functional_collectives as fc

    dev = torch.device("tpu", torch.tpu.current_device())
    group = dist.group.WORLD
    xs = [make(r, torch.float32) for r in range(size)]
    t = fc.all_reduce(xs[rank].to(dev), "sum", group)
    same(fc.wait_tensor(t), reduce_ref(xs, R.SUM, torch.float32), "funcol all_reduce")
    t = fc.all_gather_tensor(xs[rank].to(dev), 0, group)
    same(fc.wait_tensor(t), torch.cat(xs), "funcol all_gather_tensor")
    big = [make(r, torch.float32, (size * 2, 3), salt=1) for r in range(size)]
    t = fc.reduce_scatter_tensor(big[rank].to(dev), "sum", 0, group)
    same(fc.wait_tensor(t), reduce_ref(big, R.SUM, torch.float32)[2 * rank : 2 * rank + 2], "funcol reduce_scatter_tensor")
    t = fc.all_to_all_single(big[rank].to(dev), None, None, group)
    want = torch.cat([big[r][2 * rank : 2 * rank + 2] for r in range(size)])
    same(fc.wait_tensor(t), want, "funcol all_to_all_single")

    # Inside a compiled graph: the graph is split at the collective (staged
    # through the host, or a program across the threads' devices), which
    # runs eagerly; the parts around it are compiled and replayed.
    from tpuc.compile import stats

    def step(x):
        r = fc.all_reduce(x * 2 + 1, "sum", group)
        return fc.wait_tensor(r) * 3 - x

    cstep = torch.compile(step, backend="tpu")
    before = stats()
    for i in range(3):
        x = make(rank, torch.float32, salt=2 + i).to(dev)
        same(cstep(x), step(x).cpu(), f"compiled funcol all_reduce, call {i}")
    after = stats()
    assert after["split_graphs"] > before["split_graphs"], after
    assert after["replays"] > before["replays"] and after["eager_graphs"] == before["eager_graphs"], after
    # Every call's wait ran (replays too): c10d's registry of works that
    # wait_tensor has not waited for is empty. The replayed graph used to
    # skip the wait, leaving each call's work and tensors to process exit.
    dist.barrier()
    assert torch._C._distributed_c10d._get_work_registry_size() == 0
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "x": [rank] * 3})
    assert objs == [{"rank": r, "x": [r] * 3} for r in range(size)], objs
    lst = [f"from {size - 1}"] if rank == size - 1 else [None]
    dist.broadcast_object_list(lst, src=size - 1)
    assert lst == [f"from {size - 1}"], lst
    return True


def fused_collectives(rank, size, steps=6):
    """Fused mode, ranks as threads (run with TPUC_FUSE_AFTER=2): a
    collective on a value the rank's segment computes runs with the ops
    before it as one program across the ranks, once that segment recurs.
    Every kind against the ranks' inputs computed on the CPU; a step where
    rank 0 records one op more, and one where the last rank runs in strict
    mode, go as cuts and collectives alone (counted: exactly the other
    steps' collectives run as group segments); a rank that does not come
    to an offered collective ends the other's at the group's timeout,
    after which its own ops' values are right and the device works."""
    dev = torch.device("tpu", rank)
    n = 8 * size
    base = torch.arange(n, dtype=torch.float32) / n

    def inputs(r, i):
        return ((base * (i + 1) + r).sin() * 2).float()

    torch.tpu.synchronize()
    dist.barrier()
    w = base.to(dev)
    kinds = 5
    per_step = []
    for i in range(steps):
        dist.barrier()
        before = torch.tpu.fused_stats()["group_segments"]
        dist.barrier()
        odd = i == steps - 2
        strict = i == steps - 1 and rank == size - 1
        with torch.tpu.eager_mode("strict") if strict else contextlib.nullcontext():
            x = ((w * (i + 1) + rank).sin() * 2).float()
            if odd and rank == 0:
                x = x * 1.0
            xs = [inputs(r, i) for r in range(size)]
            s = sum(xs)
            dist.all_reduce(x)  # sum
            y = x * 0.5 - 1
            dist.all_reduce(y, op=R.MAX)
            want_y = s * 0.5 - 1
            g = torch.empty(n * size, device=dev)
            z = y + rank
            dist.all_gather_into_tensor(g, z)
            want_g = torch.cat([want_y + r for r in range(size)])
            rs = torch.empty(n // size, device=dev)
            dist.reduce_scatter_tensor(rs, g[:n] * 2)
            want_rs = (want_g[:n] * 2 * size)[rank * (n // size) : (rank + 1) * (n // size)]
            b = rs.exp()
            dist.broadcast(b, src=size - 1)
            want_b = (want_g[:n] * 2 * size)[(size - 1) * (n // size) : size * (n // size)].exp()
            for name, got, want in (("all_reduce", x, s), ("all_reduce max", y, want_y), ("all_gather", g, want_g),
                                    ("reduce_scatter", rs, want_rs), ("broadcast", b, want_b)):
                if not torch.allclose(got.cpu(), want, rtol=1e-5, atol=1e-5):
                    raise AssertionError(f"step {i} {name}: {got.cpu()[:4]} against {want[:4]}")
        dist.barrier()
        per_step.append(torch.tpu.fused_stats()["group_segments"] - before)
    # Group segments per step, every rank's counted: none at the first
    # run (op by op, as any segment's first run), then all of them, then
    # all but the collective where rank 0 had one op more, then none
    # where a rank was in strict mode.
    want = [0] + [size * kinds] * (steps - 3) + [size * (kinds - 1), 0]
    assert per_step == want, f"group segments per step {per_step}, expected {want}"
    log = [e for e in torch.tpu.fused_log() if e["last_op"] == "collective"]
    assert log and all(e["reason"] == "collective" and e["ops"] > 1 for e in log), log
    # A rank that does not come: the other's offered collective times out,
    # its ops still run, and the device stays usable.
    # Long enough that a rank that does come is never late under load.
    short = dist.new_group(backend="tpu", timeout=timedelta(seconds=6))
    for i in range(3):
        v = (w * 3 + 1).cos()
        if i < 2 or rank == 0:
            try:
                dist.all_reduce(v, group=short)
            except Exception as e:  # noqa: BLE001 - what it says is the result
                if rank != 0 or i != 2:
                    raise
                msg = str(e).splitlines()[0]
                assert "did not call it" in msg, msg
                want = (base * 3 + 1).cos()
                assert torch.allclose(v.cpu(), want, rtol=1e-6, atol=1e-6), "the ops before the collective"
                assert float((torch.ones(4, device=dev) * 2).sum().cpu()) == 8.0
                return {"timeout": msg[:200], "per_step": per_step}
            if i == 2:
                raise AssertionError("rank 0's collective without rank 1 did not raise")
    return {"per_step": per_step}


def errors(rank, size):
    """Calls that differ across ranks raise naming every rank's call, and
    the group and the device stay usable; a CPU tensor through the tpu
    backend raises PyTorch's error."""
    dev = torch.device("tpu", torch.tpu.current_device())
    t = torch.ones(4 if rank == 0 else 8, device=dev)
    try:
        dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        msg = str(e)
        assert "all_reduce" in msg and "float32[4]" in msg and "float32[8]" in msg, msg
        assert "rank 0" in msg and "rank 1" in msg, msg
    else:
        raise AssertionError("an all_reduce of different sizes did not raise")
    t = torch.ones(3, dtype=torch.float32 if rank == 0 else torch.float64, device=dev)
    try:
        dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        assert "float32" in str(e) and "float64" in str(e), str(e)
    else:
        raise AssertionError("an all_reduce of different dtypes did not raise")
    t = torch.ones(3, device=dev) * (rank + 1)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(sum(range(1, size + 1)))), "all_reduce after errors")
    tpu_only = dist.new_group(backend="tpu")
    try:
        dist.all_reduce(torch.ones(3), group=tpu_only)
    except RuntimeError as e:  # PyTorch's own error, as for nccl and cpu
        assert "No backend type associated with device type cpu" in str(e), str(e)
    else:
        raise AssertionError("a CPU tensor through the tpu backend did not raise")
    # A bad reduce op for the dtype: Gloo's and the device's own errors.
    try:
        dist.all_reduce(torch.ones(3, device=dev), op=R.BAND)
    except (RuntimeError, ValueError) as e:
        assert "band" in str(e).lower(), str(e)
    else:
        raise AssertionError("a bitwise all_reduce of floats did not raise")
    t = torch.ones(2, device=dev)
    dist.all_reduce(t, group=tpu_only)
    same(t, torch.full((2,), float(size)), "the device after the errors")
    return True



# ---- training --------------------------------------------------------------

# Ranks that are threads share the global RNG: weights are drawn under a
# lock, so every rank gets the same ones.
_RNG_LOCK = threading.Lock()


@contextlib.contextmanager
def _seeded(seed):
    with _RNG_LOCK:
        torch.manual_seed(seed)
        yield


def _model(name):
    """A tiny model with random weights (the same on every rank), dropout
    off so every run computes the same thing."""
    import transformers

    with _seeded(0):
        if name == "gpt2":
            cfg = transformers.GPT2Config(
                vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32, resid_pdrop=0.0,
                embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
            )
            return transformers.GPT2LMHeadModel(cfg)
        if name == "llama":
            cfg = transformers.LlamaConfig(
                vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                bos_token_id=0, eos_token_id=0,
            )
            return transformers.LlamaForCausalLM(cfg)
    raise ValueError(name)


def _linear_mlp(model):
    """GPT-2's MLP with nn.Linear instead of its Conv1D (the same
    products), which tensor parallelism's styles take."""
    from transformers.pytorch_utils import Conv1D

    for block in model.transformer.h:
        for name in ("c_fc", "c_proj"):
            c = getattr(block.mlp, name)
            if isinstance(c, Conv1D):
                lin = torch.nn.Linear(c.weight.shape[0], c.weight.shape[1])
                with torch.no_grad():
                    lin.weight.copy_(c.weight.t())
                    lin.bias.copy_(c.bias)
                setattr(block.mlp, name, lin)
    return model


def _batches(steps, batch):
    g = torch.Generator().manual_seed(5)
    return [torch.randint(0, 64, (batch, 8), generator=g) for _ in range(steps)]


def _reference(name, steps, dp, per, tp_prep):
    """Single-device training on the CPU: each step's loss is the mean of
    the data-parallel ranks' losses (what DDP's and FSDP's averaged
    gradients are the gradient of)."""
    model = _model(name)
    if tp_prep:
        _linear_mlp(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for ids in _batches(steps, dp * per):
        opt.zero_grad()
        parts = [model(input_ids=ids[r * per : (r + 1) * per], labels=ids[r * per : (r + 1) * per]).loss for r in range(dp)]
        loss = sum(parts) / dp
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses, {k: v.detach() for k, v in model.state_dict().items()}


def _full_state(model):
    out = {}
    for k, v in model.state_dict().items():
        if hasattr(v, "full_tensor"):
            v = v.full_tensor()
        out[k.replace("module.", "", 1) if k.startswith("module.") else k] = v.detach().cpu()
    return out


def _close_states(state, ref, atol, rtol, what):
    for k, v in ref.items():
        if not v.is_floating_point():
            continue
        got = state[k].to(v.dtype)
        if not torch.allclose(got, v, atol=atol, rtol=rtol):
            raise AssertionError(f"{what}: {k} differs by {(got - v).abs().max().item():.3g}")


def train(rank, size, model="gpt2", mode="ddp", steps=5, tp=1, mixed=False, reshard=True, report_group=False):
    """5 AdamW steps of a tiny GPT-2 or Llama with DDP, FSDP2 or 2-D FSDP2
    x tensor parallelism, against the same training on one device."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dev = torch.device("tpu", torch.tpu.current_device())
    dp = size // tp
    per = 2
    ref_losses, ref_state = _reference(model, steps, dp, per, tp > 1 and model == "gpt2")
    m = _model(model)
    if tp > 1 and model == "gpt2":
        _linear_mlp(m)
    m.to(dev)
    dp_rank = rank
    if mode == "ddp":
        m = torch.nn.parallel.DistributedDataParallel(m)
    else:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else MixedPrecisionPolicy()
        if tp > 1:
            mesh = init_device_mesh("tpu", (dp, tp), mesh_dim_names=("dp", "tp"))
            dp_rank = mesh["dp"].get_local_rank()
            if model == "llama":
                plan = {
                    "self_attn.q_proj": ColwiseParallel(),
                    "self_attn.k_proj": ColwiseParallel(),
                    "self_attn.v_proj": ColwiseParallel(),
                    "self_attn.o_proj": RowwiseParallel(),
                    "mlp.gate_proj": ColwiseParallel(),
                    "mlp.up_proj": ColwiseParallel(),
                    "mlp.down_proj": RowwiseParallel(),
                }
                layers = m.model.layers
            else:
                plan = {"mlp.c_fc": ColwiseParallel(), "mlp.c_proj": RowwiseParallel()}
                layers = m.transformer.h
            for layer in layers:
                parallelize_module(layer, mesh["tp"], plan)
            dp_mesh = mesh["dp"]
        else:
            dp_mesh = init_device_mesh("tpu", (size,))
            layers = m.model.layers if model == "llama" else m.transformer.h
        for layer in layers:
            fully_shard(layer, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=reshard)
        fully_shard(m, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=reshard)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for ids in _batches(steps, dp * per):
        local = ids[dp_rank * per : (dp_rank + 1) * per].to(dev)
        opt.zero_grad()
        loss = m(input_ids=local, labels=local).loss
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    # The step's loss over every data-parallel rank.
    mine = torch.stack(losses).float()
    dist.all_reduce(mine)
    mean = (mine / size).cpu().tolist()  # tp ranks of one dp rank hold one loss
    atol, rtol = (3e-2, 3e-2) if mixed else (2e-4, 2e-3)
    for i, (a, b) in enumerate(zip(mean, ref_losses)):
        if abs(a - b) > atol + rtol * abs(b):
            raise AssertionError(f"{model} {mode} step {i}: loss {a} against {b} on one device")
    # Parameters after 5 AdamW steps at lr 1e-2: Adam divides by the root of
    # the squared gradients, so a weight whose gradient is near zero moves
    # on the rounding of its gradient, which differs between CPU kinds
    # (1.4e-4 on an AVX-512 Xeon, under 1e-4 on an EPYC); a wrong reduction
    # is off by ~1e-2.
    _close_states(_full_state(m), ref_state, *((5e-2, 5e-2) if mixed else (5e-4, 1e-3)), what=f"{model} {mode}")
    if report_group:  # collectives that ran with the ops before them
        return {"mean": mean, "group_segments": torch.tpu.fused_stats()["group_segments"]}
    return mean


def ddp_features(rank, size):
    """DDP's bucketing, no_sync, communication hooks and
    find_unused_parameters: the gradients are the ranks' average."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    dev = torch.device("tpu", torch.tpu.current_device())

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(6, 8)
            self.b = torch.nn.Linear(8, 3)
            self.unused = torch.nn.Linear(3, 3)  # DDP(find_unused_parameters) only

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    def without_unused(net):
        net.unused = None
        return net

    def data(r, k=0):
        g = torch.Generator().manual_seed(100 * r + k)
        return torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)

    def grads_of(net, batches):
        net.zero_grad()
        for x, y in batches:
            torch.nn.functional.mse_loss(net(x), y).backward()
        return {n: p.grad.clone() if p.grad is not None else None for n, p in net.named_parameters()}

    with _seeded(3):
        base = Net()
    # Expected: the average over ranks of each rank's local gradient.
    per_rank = [grads_of(_copy(base), [data(r)]) for r in range(size)]
    want = {n: sum(g[n] for g in per_rank) / size for n in per_rank[0] if per_rank[0][n] is not None}
    cases = [
        ("buckets", dict(bucket_cap_mb=1e-4), None, 2e-6),
        ("allreduce_hook", {}, default_hooks.allreduce_hook, 2e-6),
        ("fp16_compress_hook", {}, default_hooks.fp16_compress_hook, 3e-3),
        ("bf16_compress_hook", {}, default_hooks.bf16_compress_hook, 3e-2),
        ("find_unused", dict(find_unused_parameters=True), None, 2e-6),
    ]
    for name, kw, hook, tol in cases:
        net = _copy(base).to(dev)
        if name != "find_unused":
            without_unused(net)
        ddp = torch.nn.parallel.DistributedDataParallel(net, **kw)
        if hook is not None:
            ddp.register_comm_hook(None, hook)
        x, y = data(rank)
        ddp.zero_grad()
        torch.nn.functional.mse_loss(ddp(x.to(dev)), y.to(dev)).backward()
        for n, p in net.named_parameters():
            if n in want:
                if not torch.allclose(p.grad.cpu(), want[n], atol=tol, rtol=tol):
                    raise AssertionError(f"ddp {name}: {n} differs by {(p.grad.cpu() - want[n]).abs().max()}")
            elif p.grad is not None and p.grad.abs().sum() != 0:
                raise AssertionError(f"ddp {name}: the unused {n} got a gradient")
    # no_sync: two local micro-batches, then one synchronized: the average
    # over ranks of the sum of each rank's three gradients.
    per_rank = [grads_of(_copy(base), [data(r, 0), data(r, 1), data(r, 2)]) for r in range(size)]
    want3 = {n: sum(g[n] for g in per_rank) / size for n in per_rank[0] if per_rank[0][n] is not None}
    net = without_unused(_copy(base)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    ddp.zero_grad()
    with ddp.no_sync():
        for k in (0, 1):
            x, y = data(rank, k)
            torch.nn.functional.mse_loss(ddp(x.to(dev)), y.to(dev)).backward()
    x, y = data(rank, 2)
    torch.nn.functional.mse_loss(ddp(x.to(dev)), y.to(dev)).backward()
    for n, p in net.named_parameters():
        if n in want3 and not torch.allclose(p.grad.cpu(), want3[n], atol=1e-5, rtol=1e-5):
            raise AssertionError(f"ddp no_sync: {n} differs by {(p.grad.cpu() - want3[n]).abs().max()}")
    return len(cases) + 1


def _copy(module):
    import copy

    return copy.deepcopy(module)


def dtensor(rank, size):
    """DTensor on a tpu mesh: distribute_tensor, Shard / Replicate /
    Partial, redistribute, full_tensor, and ops on DTensors against the same
    ops on plain tensors."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("tpu", (size,))
    g = torch.Generator().manual_seed(11)
    x = torch.randn(4 * size, 6, generator=g)
    w = torch.randn(6, 5, generator=g)
    dx = distribute_tensor(x.to("tpu"), mesh, [Shard(0)])
    assert dx.to_local().shape == (4, 6)
    same(dx.to_local(), x[4 * rank : 4 * rank + 4], "Shard(0) local part")
    same(dx.full_tensor(), x, "full_tensor")
    same(dx.redistribute(mesh, [Replicate()]).to_local(), x, "Shard(0) -> Replicate")
    d1 = dx.redistribute(mesh, [Shard(1)]) if 6 % size == 0 else None
    if d1 is not None:
        same(d1.full_tensor(), x, "Shard(0) -> Shard(1)")
    dw = distribute_tensor(w.to("tpu"), mesh, [Replicate()])
    y = dx @ dw
    assert y.placements == (Shard(0),), y.placements
    torch.testing.assert_close(y.full_tensor().cpu(), x @ w, atol=1e-5, rtol=1e-5)
    s = dx.sum()
    torch.testing.assert_close(s.full_tensor().cpu(), x.sum(), atol=1e-4, rtol=1e-5)
    sm = torch.softmax(dx, dim=1)
    torch.testing.assert_close(sm.full_tensor().cpu(), torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5)
    local = torch.full((3,), float(rank + 1), device="tpu")
    part = DTensor.from_local(local, mesh, [Partial()])
    same(part.redistribute(mesh, [Replicate()]).to_local(), torch.full((3,), float(size * (size + 1) // 2)), "Partial -> Replicate")
    sc = part.redistribute(mesh, [Shard(0)]) if 3 % size == 0 else None
    if sc is not None:
        same(sc.full_tensor(), torch.full((3,), float(size * (size + 1) // 2)), "Partial -> Shard")
    # Autograd through DTensors: the gradient of a sharded product.
    dxr = distribute_tensor(x.to("tpu"), mesh, [Shard(0)]).requires_grad_()
    (dxr @ dw).sum().backward()
    torch.testing.assert_close(dxr.grad.full_tensor().cpu(), (torch.ones(4 * size, 5) @ w.t()), atol=1e-5, rtol=1e-5)
    return True


def sequence_parallel(rank, size):
    """Tensor parallelism with sequence parallelism: a norm on
    sequence-sharded activations (SequenceParallel), a column-wise then a
    row-wise linear layer, forward and backward against the plain module."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)
            self.up = torch.nn.Linear(8, 4 * size)
            self.down = torch.nn.Linear(4 * size, 8)

        def forward(self, x):
            return self.down(torch.relu(self.up(self.norm(x))))

    with _seeded(7):
        ref = Block()
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 2 * size, 8, generator=g)
    want = ref(x)
    want.sum().backward()
    mesh = init_device_mesh("tpu", (size,))
    tp = parallelize_module(
        _copy(ref).to("tpu"),
        mesh,
        {
            "norm": SequenceParallel(),
            "up": ColwiseParallel(input_layouts=Shard(1)),
            "down": RowwiseParallel(output_layouts=Shard(1)),
        },
    )
    local = x[:, 2 * rank : 2 * rank + 2].to("tpu")  # this rank's part of the sequence
    out = tp(local)
    torch.testing.assert_close(out.cpu(), want[:, 2 * rank : 2 * rank + 2].detach(), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    for name, p in tp.named_parameters():
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        torch.testing.assert_close(grad.cpu(), dict(ref.named_parameters())[name].grad, atol=1e-5, rtol=1e-4, msg=name)
    return True


def hf_tensor_parallel(rank, size, path):
    """Hugging Face's own tensor parallelism (``from_pretrained`` with
    ``DistributedConfig(tp_size=...)``: its model's TP plan over a tpu
    device mesh) on a tiny Qwen2: sharded weights, and logits, loss,
    gradients and greedy tokens against the same checkpoint unsharded on
    this rank's device."""
    from torch.distributed.tensor import DTensor
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.distributed.configuration_utils import DistributedConfig

    if rank == 0:
        cfg = Qwen2Config(
            vocab_size=128,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
        with _seeded(11):
            Qwen2ForCausalLM(cfg).save_pretrained(path)
    dist.barrier()
    tp = Qwen2ForCausalLM.from_pretrained(path, distributed_config=DistributedConfig(tp_size=size))
    dev = tp.device
    assert dev.type == "tpu", dev
    ref = Qwen2ForCausalLM.from_pretrained(path).to(dev)
    full = dict(ref.named_parameters())
    # Sharded weights are DTensors whose local part is this rank's share.
    sharded = [n for n, p in tp.named_parameters() if isinstance(p, DTensor) and any(pl.is_shard() for pl in p.placements)]
    assert any("q_proj" in n for n in sharded) and any("o_proj" in n for n in sharded), sharded
    for n in sharded:
        p = tp.get_parameter(n)
        assert p.to_local().numel() * size == full[n].numel(), (n, p.to_local().shape)
    g = torch.Generator().manual_seed(12)
    ids = torch.randint(0, 128, (2, 16), generator=g).to(dev)
    labels = torch.randint(0, 128, (2, 16), generator=g).to(dev)
    with torch.no_grad():
        torch.testing.assert_close(tp(ids).logits.cpu(), ref(ids).logits.cpu(), atol=1e-5, rtol=1e-5)
    loss_tp, loss = tp(ids, labels=labels).loss, ref(ids, labels=labels).loss
    torch.testing.assert_close(loss_tp.cpu(), loss.cpu(), atol=1e-5, rtol=1e-5)
    loss_tp.backward()
    loss.backward()
    checked = 0
    for n, p in tp.named_parameters():
        got = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        torch.testing.assert_close(got.cpu(), full[n].grad.cpu(), atol=2e-5, rtol=1e-4, msg=n)
        checked += 1
    prompt = ids[:, :4]
    out_tp = tp.generate(prompt, max_new_tokens=8, do_sample=False)
    out = ref.generate(prompt, max_new_tokens=8, do_sample=False)
    assert out_tp.cpu().tolist() == out.cpu().tolist(), (out_tp, out)
    return {"sharded": len(sharded), "grads": checked, "tokens": out_tp.shape[1]}


def reinit(rank, size, ports):
    """destroy_process_group, then a new process group in the same
    process: collectives work again."""
    dev = torch.device("tpu", torch.tpu.current_device())
    for round in range(2):
        t = torch.full((4,), float(rank + round), device=dev)
        dist.all_reduce(t)
        same(t, torch.full((4,), float(sum(range(size)) + size * round)), f"all_reduce in group {round}")
        dist.destroy_process_group()
        assert not dist.is_initialized()
        os.environ["MASTER_PORT"] = str(ports[round])
        dist.init_process_group("tpu", timeout=timedelta(seconds=60))
    return True


def checkpoint(rank, size, path):
    """torch.distributed.checkpoint: an FSDP2 model's sharded state (and its
    optimizer's) saved, loaded into a new model, and training goes on the
    same."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("tpu", (size,))

    def sharded():
        m = _model("llama").to("tpu")
        for layer in m.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
        return m, torch.optim.AdamW(m.parameters(), lr=1e-2)

    def step(m, opt, ids):
        local = ids[rank * 2 : rank * 2 + 2].to("tpu")
        opt.zero_grad()
        loss = m(input_ids=local, labels=local).loss
        loss.backward()
        opt.step()
        return float(loss)

    batches = _batches(3, 2 * size)
    m, opt = sharded()
    step(m, opt, batches[0])
    step(m, opt, batches[1])
    msd, osd = get_state_dict(m, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
    m2, opt2 = sharded()
    msd2, osd2 = get_state_dict(m2, opt2)
    state = {"model": msd2, "optim": osd2}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(m2, opt2, model_state_dict=state["model"], optim_state_dict=state["optim"])
    a, b = _full_state(m), _full_state(m2)
    for k in a:
        same(b[k], a[k], f"loaded {k}")
    la, lb = step(m, opt, batches[2]), step(m2, opt2, batches[2])
    if la != lb:
        raise AssertionError(f"the step after loading: loss {lb} against {la}")
    return la


def faults(rank, size, how):
    """A rank that dies (`exit`) or hangs (`hang`): the others' collective
    raises within the group's timeout instead of waiting forever."""
    import time

    dev = torch.device("tpu", torch.tpu.current_device())
    t = torch.ones(3, device=dev)
    dist.all_reduce(t)  # everyone is here
    torch.tpu.synchronize()
    if rank == size - 1:
        if how == "exit":
            os._exit(7)
        time.sleep(3600)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1 << 16, device=dev))
        torch.tpu.synchronize()
    except Exception as e:  # noqa: BLE001 - what it says is the result
        elapsed = time.monotonic() - start
        # The device is still usable after the error.
        after = float((torch.ones(4, device=dev) * 2).sum().cpu())
        return {"error": type(e).__name__, "message": str(e).splitlines()[0][:400], "seconds": elapsed, "after": after}
    raise AssertionError("the collective with a missing rank did not raise")


def main():
    name = sys.argv[1]
    fn = globals()[name]
    extra = json.loads(os.environ.get("TPUC_TEST_ARGS", "{}"))
    threads = int(os.environ.get("TPUC_TEST_THREADS", "0"))
    if threads:  # ranks as threads of this process, one device each
        import tpuc.distributed
        import transformers

        # Resolved once here: transformers' lazy imports race when several
        # threads touch them first.
        transformers.GPT2LMHeadModel, transformers.LlamaForCausalLM  # noqa: B018

        backend = os.environ.get("TPUC_TEST_BACKEND", "cpu:gloo,tpu:tpu")
        timeout = timedelta(seconds=float(os.environ.get("TPUC_TEST_TIMEOUT", "120")))
        results = tpuc.distributed.run_threads(lambda rank: fn(rank, threads, **extra), threads, backend=backend, timeout=timeout)
        print(f"SCENARIO-OK {json.dumps(results, default=str)}", flush=True)
        return
    rank = int(os.environ["RANK"])
    size = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.tpu.set_device(local % torch.tpu.device_count())
    backend = os.environ.get("TPUC_TEST_BACKEND", "cpu:gloo,tpu:tpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=float(os.environ.get("TPUC_TEST_TIMEOUT", "120"))))
    result = fn(rank, size, **extra)
    dist.destroy_process_group()
    print(f"SCENARIO-OK {json.dumps(result, default=str)}", flush=True)


if __name__ == "__main__":
    main()
