"""Ops with a native C lowering (tpuc/ops.h) run on the device without the
CPU fallback and agree with the CPU: dtypes, promotion, broadcasting, views,
scalars; scalar values do not create new executables."""

import pytest
import torch

import tpuc

FLOAT = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INT = [torch.int32, torch.int64, torch.int8, torch.uint8]


def make(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-5 if dtype != torch.uint8 else 0, 9, shape).to(dtype)


def check_native(fn, *args, exact=False):
    tpuc.fallback_reset()
    cpu = fn(*args)
    dev = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert dev.device.type == "tpu"
    assert dev.dtype == cpu.dtype, (dev.dtype, cpu.dtype)
    assert dev.shape == cpu.shape
    if exact:
        assert torch.equal(dev.cpu(), cpu)
    else:
        torch.testing.assert_close(dev.cpu(), cpu)
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()


@pytest.mark.parametrize("dtype", FLOAT + INT, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_same_dtype(op, dtype):
    a, b = make((3, 4), dtype), make((3, 4), dtype)
    check_native(getattr(torch, op), a, b, exact=not dtype.is_floating_point)


@pytest.mark.parametrize("dtype", FLOAT + INT, ids=str)
def test_true_division(dtype):
    a, b = make((5,), dtype), make((5,), dtype)
    if not dtype.is_floating_point:
        b = torch.where(b == 0, torch.ones_like(b), b)
    check_native(torch.div, a, b)


def test_promotion_and_broadcasting():
    check_native(torch.add, make((2, 1, 3), torch.int32), make((4, 1), torch.float16))
    check_native(torch.mul, make((3,), torch.uint8), make((2, 3), torch.int8), exact=True)
    check_native(torch.add, make((3,), torch.bfloat16), make((3,), torch.float16))
    check_native(lambda a: a * 2.5, make((3,), torch.int64))
    check_native(lambda a: a + 3, make((3,), torch.float16))
    check_native(lambda a, b: a * b, make((3,), torch.float16), torch.tensor(2.0, dtype=torch.float64))
    check_native(lambda a: torch.add(a, a, alpha=2), make((4,), torch.int64), exact=True)
    check_native(lambda a: a - 1.5, make((2, 2), torch.float32))
    check_native(lambda a: 7 / a, make((3,), torch.float32))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a, b = make((4, 3), torch.float32), make((3,), torch.float32)
    check_native(getattr(torch, op), a, b, exact=True)
    check_native(lambda x: getattr(torch, op)(x, 0.25), a, exact=True)
    check_native(lambda x, y: getattr(torch, op)(x, y), make((5,), torch.int32),
                 make((5,), torch.int64), exact=True)


@pytest.mark.parametrize("op", ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh",
                                "sigmoid", "sin", "cos", "relu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_unary(op, dtype):
    x = make((3, 5), dtype)
    if op in ("log", "sqrt", "rsqrt"):
        x = x.abs() + 1
    check_native(getattr(torch, op), x)


def test_views_as_inputs():
    x = torch.randn(6, 8)
    check_native(lambda a: a.t() * 2, x)
    check_native(lambda a: a[1:5:2, ::3] + a[0:2, 0:3], x)
    check_native(lambda a: a.expand(3, 6, 8) - a, x)
    check_native(lambda a: a[2] * a[:, 3:4], x)
    check_native(lambda a: torch.exp(a.as_strided((3, 3), (1, 8), 5)), x)
    b = torch.rand(4) > 0.5
    check_native(lambda m, a: torch.where(m, a, -a), b, torch.randn(3, 4))
    check_native(lambda a: a.view(torch.int32) + 1, torch.randn(4), exact=True)


def test_scalars_and_empty():
    check_native(lambda a: a + a, torch.tensor(3.0))
    check_native(lambda a: a * 2, torch.empty(0, 3))
    check_native(lambda a, b: a + b, torch.empty(2, 0), torch.empty(1, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_matmul(dtype):
    a, b = make((3, 5), dtype), make((5, 4), dtype)
    check_native(torch.mm, a, b)
    check_native(torch.mm, a, b.t().contiguous().t())
    check_native(torch.bmm, make((2, 3, 5), dtype), make((2, 5, 2), dtype))


def test_matmul_errors_match_cpu():
    a = torch.randn(3, 5, device="tpu")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a, torch.randn(4, 2, device="tpu"))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a, torch.randn(5, 2, device="tpu", dtype=torch.float64))
    with pytest.raises(RuntimeError, match="must match the size"):
        a + torch.randn(4, device="tpu")


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_scalar_values_share_an_executable(mode, monkeypatch):
    monkeypatch.setenv("TPUC_FUSE_AFTER", "3")  # small segments too
    with torch.tpu.eager_mode(mode):
        x = torch.randn(7, 3, device="tpu")
        torch.tpu.synchronize()
        # Fused mode runs a new segment op by op first and compiles it at
        # its third run (TPUC_FUSE_AFTER=3): warm up three times.
        for _ in range(3):
            (x * 0.5).cpu()
        before = tpuc._C.compile_cache_stats()
        for v in (0.7, 1.9, -3.0):
            (x * v).cpu()
        after = tpuc._C.compile_cache_stats()
        # No program was compiled or even looked up again (programs the
        # prefetch thread loads meanwhile are not lookups).
        for k in ("misses", "memory_hits", "disk_hits"):
            assert after[k] == before[k], k
        entries = [s["memory_entries"] - s["prefetched"] for s in (before, after)]
        assert entries[0] == entries[1], (before, after)
        torch.testing.assert_close((x * 0.7).cpu(), x.cpu() * 0.7)


def test_unsupported_cases_fall_back_correctly():
    tpuc.fallback_reset()
    a = torch.tensor([True, False], device="tpu")
    with pytest.raises(RuntimeError, match="Subtraction"):
        a - a
    i = torch.arange(4, device="tpu")
    with pytest.raises(RuntimeError, match="alpha"):
        torch.add(i, i, alpha=0.5)
    # Complex tensors run natively only for the ops reviewed for them;
    # others (std, here) run on the CPU.
    c = torch.randn(3, dtype=torch.complex64)
    torch.testing.assert_close(c.tpu().std().cpu(), c.std())
    assert "aten::std.correction" in tpuc.fallback_report()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_sum_and_extrema(dtype):
    x = make((3, 4, 5), dtype)
    check_native(lambda a: a.sum(), x)
    check_native(lambda a: a.sum(1), x)
    check_native(lambda a: a.sum((0, -1), keepdim=True), x)
    check_native(lambda a: a.sum(dtype=torch.float64), x)
    if dtype != torch.bool:
        check_native(lambda a: a.amax(1), x, exact=True)
        check_native(lambda a: a.amin((0, 2), keepdim=True), x, exact=True)


def test_mean_and_reduction_errors():
    x = make((4, 6), torch.float32)
    check_native(lambda a: a.mean(), x)
    check_native(lambda a: a.mean(0, keepdim=True), x)
    check_native(lambda a: a.t().mean(-1), x)
    t = torch.arange(6, device="tpu")
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        t.mean()
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.tpu().sum(5)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        x.tpu().sum((0, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
def test_softmax_log_softmax(dtype):
    x = make((4, 7), dtype) * 3
    check_native(lambda a: torch.softmax(a, -1), x)
    check_native(lambda a: torch.log_softmax(a, 0), x)
    check_native(lambda a: torch.softmax(a.t(), 1), x)
    check_native(lambda a: torch.softmax(a, 1, dtype=torch.float32), x)
    if dtype in (torch.bfloat16, torch.float16):
        # half log_softmax (and so cross_entropy of half logits) ran on the
        # CPU. Over the last dim the CPU rounds each row's sum and its log
        # to the dtype: the same bits here. Over other dims it computes in
        # f32 and rounds once: where a result is near 0 (x - max - log(sum)
        # cancels), f32's exp differing in its last bit shows.
        g = torch.Generator().manual_seed(0)
        for shape, dim in [((4, 7), -1), ((2, 5, 300), -1), ((6, 9), 0), ((2, 33, 4), 1),
                           ((8, 3000), -1)]:
            for scale in (1, 10, 100):
                y = (torch.randn(shape, generator=g) * scale).to(dtype)
                last = dim in (-1, len(shape) - 1)
                check_native(lambda a: torch.log_softmax(a, dim), y, exact=last)
        t = torch.randint(0, 7, (4,), generator=g)
        check_native(lambda a, t: torch.nn.functional.cross_entropy(a, t), x, t)


def test_nan_handling_matches_cpu():
    import tpuc
    x = torch.tensor([[float("nan"), -2.0, 3.0], [1.0, 2.0, 3.0]])
    d = x.to("tpu")
    tpuc.fallback_reset()
    for fn in (torch.sign, lambda t: torch.amax(t, 1), lambda t: torch.amin(t, 1),
               lambda t: t.amax(), lambda t: t.amin()):
        torch.testing.assert_close(fn(d).cpu(), fn(x), equal_nan=True)
    assert not tpuc.fallback_report()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_linspace_and_logspace_are_native_and_match_cpu(dtype):
    # Both ends exact, symmetric steps (CUDA's formula): within rounding of
    # the CPU, whose vector loop runs the first half's formula over whole
    # vectors past the middle (and computes half floats in half).
    import tpuc
    cases = [(0, 1, 10), (-3.5, 7.25, 33), (1, 1, 5), (5, -5, 1000), (0, 1, 1),
             (2, 9, 0), (1e-3, 3.0, 4097)]
    ulp = torch.finfo(dtype).eps
    for a, b, n in cases:
        for fn, kw in ((torch.linspace, {}), (torch.logspace, {"base": 2.0})):
            tpuc.fallback_reset()
            d = fn(a, b, n, dtype=dtype, device="tpu", **kw)
            assert not tpuc.fallback_report(), (fn, a, b, n)
            c = fn(a, b, n, dtype=dtype, **kw)
            assert d.dtype == c.dtype and d.shape == c.shape
            # Each value's error is an ulp of the larger bound (or of its
            # power of base).
            m = 2 * ulp * max(1.0, abs(a), abs(b))
            torch.testing.assert_close(d.cpu(), c, rtol=m, atol=m)
            if n > 1 and fn is torch.linspace:
                assert d[0].item() == c[0].item() and d[-1].item() == c[-1].item()
    d = torch.linspace(0, 1, 7, device="tpu")  # the default dtype
    assert d.dtype == torch.float32 and d.device.type == "tpu"
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
            torch.linspace(0, 1, -1, device=dev)
        with pytest.raises(RuntimeError, match="cannot be converted to type c10::Half without overflow"):
            torch.linspace(0, 1e5, 3, dtype=torch.half, device=dev)
    # Integer results keep the CPU's conversions of the bounds (through the
    # fallback): -3 wraps to 253 in uint8, -3.5 raises.
    assert torch.linspace(-3, 5, 3, dtype=torch.uint8, device="tpu").cpu().tolist() == [253, 129, 5]
    with pytest.raises(RuntimeError, match="uint8_t without overflow"):
        torch.linspace(-3.5, 5, 3, dtype=torch.uint8, device="tpu")


def test_arange_is_native_and_matches_cpu():
    import tpuc
    tpuc.fallback_reset()
    cases = [((5,), {}), ((2, 9), {}), ((0, 1, 0.1), {}), ((10, 0, -3), {}),
             ((5,), dict(dtype=torch.float32)), ((0.5, 4), {}),
             ((1, 8, 2), dict(dtype=torch.int32)), ((0, 1, 0.3), dict(dtype=torch.bfloat16))]
    for args, kw in cases:
        a = torch.arange(*args, device="tpu", **kw)
        b = torch.arange(*args, **kw)
        assert a.dtype == b.dtype and torch.equal(a.cpu(), b), (args, kw)
    out = torch.empty(0, dtype=torch.int32, device="tpu")
    torch.arange(2, 9, 3, out=out)
    assert out.dtype == torch.int32 and out.cpu().tolist() == [2, 5, 8]
    x = torch.rand(3) + 3
    torch.testing.assert_close(torch.mvlgamma(x.to("tpu"), 3).cpu(), torch.mvlgamma(x, 3))
    assert not tpuc.fallback_report()
    assert torch.arange(3, device="tpu:1").device == torch.device("tpu", 1)
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            torch.arange(0, 5, 0, device=dev)
        with pytest.raises(RuntimeError, match="inconsistent with step sign"):
            torch.arange(5, 0, 1, device=dev)
        with pytest.raises(NotImplementedError):
            torch.arange(3, dtype=torch.bool, device=dev)
