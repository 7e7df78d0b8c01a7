"""Linear algebra lowered natively (src/ops/linalg.c): Cholesky
(linalg_cholesky_ex, cholesky), triangular solves (linalg_solve_triangular,
triangular_solve), cholesky_solve, cholesky_inverse, LU with partial
pivoting (linalg_lu_factor_ex, linalg_lu, lu_unpack, linalg_lu_solve) and
det, slogdet, inv, solve on top of it. Real f32/f64 agree with the CPU
without the fallback; failed factorizations and argument errors rerun on
the CPU and behave exactly like it."""

import pytest
import torch

import tpuc

FLOATS = [torch.float32, torch.float64]


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else \
        dict(rtol=1e-9, atol=1e-9)


def spd(*shape, dtype=torch.float64):
    m = torch.randn(*shape, dtype=dtype)
    n = shape[-1]
    return m @ m.mT + n * torch.eye(n, dtype=dtype)


def to_dev(xs):
    return [x.to("tpu") if isinstance(x, torch.Tensor) else x for x in xs]


def check(fn, *args, native=True, dtype=torch.float64):
    cpu = fn(*args)
    tpuc.fallback_reset()
    dev = fn(*to_dev(args))
    if native:
        assert not tpuc.fallback_report()
    cpu = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
    dev = dev if isinstance(dev, (tuple, list)) else (dev,)
    assert len(cpu) == len(dev)
    for c, d in zip(cpu, dev):
        assert d.device.type == "tpu"
        assert c.dtype == d.dtype and c.shape == d.shape
        if c.dtype.is_floating_point:
            torch.testing.assert_close(d.cpu(), c, **tol(dtype))
        else:
            assert torch.equal(d.cpu(), c)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, upper):
    a = spd(2, 3, 4, 4, dtype=dtype)
    check(lambda x: torch.linalg.cholesky_ex(x, upper=upper), a, dtype=dtype)
    check(lambda x: torch.linalg.cholesky(x, upper=upper), a, dtype=dtype)
    check(lambda x: torch.cholesky(x, upper), a, dtype=dtype)
    # only one triangle is read
    b = a + torch.triu(torch.ones_like(a), 1) * (5.0 if not upper else 0.0)
    check(lambda x: torch.linalg.cholesky(x, upper=upper), b, dtype=dtype)
    check(lambda x: torch.linalg.cholesky(x), spd(0, 3, 3, dtype=dtype))


def test_cholesky_out_and_grad():
    a = spd(3, 3)
    L, info = torch.empty(0, device="tpu"), torch.empty(0, device="tpu",
                                                        dtype=torch.int32)
    L = L.double()
    tpuc.fallback_reset()
    torch.linalg.cholesky_ex(a.to("tpu"), out=(L, info))
    assert not tpuc.fallback_report()
    torch.testing.assert_close(L.cpu(), torch.linalg.cholesky(a))
    assert info.item() == 0
    x = a.clone().requires_grad_()
    xd = a.to("tpu").requires_grad_()
    g = torch.randn(3, 3, dtype=torch.float64)
    torch.linalg.cholesky(x).backward(g)
    torch.linalg.cholesky(xd).backward(g.to("tpu"))
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_cholesky_not_positive_definite():
    a = torch.stack([spd(2, 2), torch.tensor([[1., 2.], [2., 1.]]).double()])
    # _ex: the CPU reruns it (LAPACK's partial factor and info)
    check(torch.linalg.cholesky_ex, a, native=False)
    for fn in (torch.linalg.cholesky, torch.cholesky):
        with pytest.raises(RuntimeError) as cpu:
            fn(a)
        with pytest.raises(RuntimeError) as dev:
            fn(a.to("tpu"))
        assert str(dev.value) == str(cpu.value)


def test_cholesky_unsupported_dtypes():
    a = spd(3, 3)
    for dt in (torch.float16, torch.int64):
        with pytest.raises(RuntimeError) as cpu:
            torch.linalg.cholesky(a.to(dt))
        with pytest.raises(RuntimeError) as dev:
            torch.linalg.cholesky(a.to(dt).to("tpu"))
        assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", FLOATS)
def test_solve_triangular(dtype):
    A = torch.randn(4, 4, dtype=dtype) + 4 * torch.eye(4, dtype=dtype)
    b = torch.randn(3, 1, 4, 2, dtype=dtype)
    for upper in (False, True):
        for left in (True, False):
            for unit in (False, True):
                B = b if left else b.mT
                check(lambda a, bb: torch.linalg.solve_triangular(
                    a, bb, upper=upper, left=left, unitriangular=unit),
                    A, B, dtype=dtype)
        for tr in (False, True):
            check(lambda bb, a: torch.triangular_solve(bb, a, upper, tr),
                  b, A, dtype=dtype)
    # non-contiguous operands, out=
    check(lambda a, bb: torch.linalg.solve_triangular(a.mT, bb, upper=True),
          A, b[0].mT.contiguous().mT, dtype=dtype)
    out = torch.empty(0, dtype=dtype, device="tpu")
    tpuc.fallback_reset()
    torch.linalg.solve_triangular(A.to("tpu"), b.to("tpu"), upper=False,
                                  out=out)
    assert not tpuc.fallback_report()
    torch.testing.assert_close(
        out.cpu(), torch.linalg.solve_triangular(A, b, upper=False),
        **tol(dtype))


def test_solve_triangular_errors():
    A = torch.randn(3, 3)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.solve_triangular(A, torch.randn(4, 2), upper=True)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.solve_triangular(A.to("tpu"), torch.randn(4, 2).to("tpu"),
                                      upper=True)
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_inverse(dtype, upper):
    L = torch.linalg.cholesky(spd(2, 4, 4, dtype=dtype), upper=upper)
    b = torch.randn(3, 1, 4, 2, dtype=dtype)
    check(lambda bb, l: torch.cholesky_solve(bb, l[0], upper), b, L,
          dtype=dtype)
    check(lambda l: torch.cholesky_inverse(l, upper), L[0], dtype=dtype)
    check(lambda l: torch.cholesky_inverse(l, upper), L, dtype=dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lu_factor_matches_lapack(dtype):
    torch.manual_seed(1)
    for shape in [(5, 5), (2, 3, 4, 4), (3, 5), (5, 3), (2, 0, 3, 3), (1, 1)]:
        a = torch.randn(*shape, dtype=dtype)
        cpu = torch.linalg.lu_factor_ex(a)
        tpuc.fallback_reset()
        dev = torch.linalg.lu_factor_ex(a.to("tpu"))
        assert not tpuc.fallback_report()
        # the same pivots as LAPACK, the same info
        assert torch.equal(dev.pivots.cpu(), cpu.pivots)
        assert torch.equal(dev.info.cpu(), cpu.info)
        torch.testing.assert_close(dev.LU.cpu(), cpu.LU, **tol(dtype))
        check(torch.linalg.lu, a, dtype=dtype)
        check(torch.lu_unpack, cpu.LU, cpu.pivots, dtype=dtype)


def test_lu_singular_and_ties():
    # exact zero pivot: info, ties of |value|: the first row wins
    a = torch.tensor([[1., 2., 3.], [2., 4., 6.], [1., 0., 1.]])
    check(torch.linalg.lu_factor_ex, a, dtype=torch.float32)
    t = torch.tensor([[1., 1.], [-1., 2.]])
    check(torch.linalg.lu_factor_ex, t, dtype=torch.float32)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.lu_factor(a)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.lu_factor(a.to("tpu"))
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lu_solve_det_inv_solve(dtype):
    A = torch.randn(2, 4, 4, dtype=dtype)
    B = torch.randn(2, 4, 3, dtype=dtype)
    LU, piv = torch.linalg.lu_factor(A)
    for left in (True, False):
        for adj in (False, True):
            BB = B if left else B.mT
            check(lambda lu, p, b: torch.linalg.lu_solve(
                lu, p, b, left=left, adjoint=adj), LU, piv, BB, dtype=dtype)
    for X in (A, A.mT):  # contiguous or not: the CPU factors A^T or A
        check(torch.ops.aten._linalg_det, X, dtype=dtype)
        check(torch.ops.aten._linalg_slogdet, X, dtype=dtype)
        check(torch.linalg.inv_ex, X, dtype=dtype)
        check(lambda a, b: torch.ops.aten._linalg_solve_ex(a, b), X, B,
              dtype=dtype)
        check(lambda a, b: torch.linalg.solve(a, b, left=False), X, B.mT,
              dtype=dtype)
    sing = torch.tensor([[1., 2.], [2., 4.]], dtype=dtype)
    check(torch.linalg.det, sing, dtype=dtype)
    check(torch.linalg.slogdet, sing, dtype=dtype)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.inv(sing)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.inv(sing.to("tpu"))
    assert str(dev.value) == str(cpu.value)


def test_det_solve_grad():
    A = torch.randn(3, 3, dtype=torch.float64)
    B = torch.randn(3, 2, dtype=torch.float64)
    for fn in (lambda a, b: torch.linalg.det(a) * b.sum(),
               lambda a, b: torch.linalg.solve(a, b),
               lambda a, b: torch.linalg.inv(a) @ b):
        x, y = A.clone().requires_grad_(), B.clone().requires_grad_()
        xd, yd = A.to("tpu").requires_grad_(), B.to("tpu").requires_grad_()
        out = fn(x, y)
        g = torch.randn_like(out)
        out.backward(g)
        fn(xd, yd).backward(g.to("tpu"))
        torch.testing.assert_close(xd.grad.cpu(), x.grad)
        torch.testing.assert_close(yd.grad.cpu(), y.grad)
