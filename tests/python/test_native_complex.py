"""Native complex lowerings: abs, sgn, rsqrt, Scalar arithmetic, real and
complex mixes, constant_pad_nd, masked_fill, index_add / index_copy /
index_fill / scatter_add / index_put / advanced indexing, cumsum /
cumprod, addmm / addmv / mv / dot / vdot / baddbmm and
linalg_vector_norm agree with the CPU for complex64 and complex128
(in-place and out= forms, non-contiguous and conjugated inputs) without
the CPU fallback; what the CPU refuses still fails."""

import pytest
import torch

import tpuc

COMPLEX = [torch.complex64, torch.complex128]
REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}


def tol(dtype):
    if dtype in (torch.float64, torch.complex128):
        return dict(rtol=1e-9, atol=1e-9)
    return dict(rtol=1e-4, atol=1e-4)


def dev(x):
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(dev(v) for v in x)
    return x


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def check(fn, *args, native=True):
    """fn on the CPU and on tpu: same dtype, shape, values (and no
    fallback when native)."""
    cpu = fn(*args)
    tpuc.fallback_reset()
    out = fn(*dev(args))
    report = tpuc.fallback_report()
    assert out.device.type == "tpu"
    assert out.dtype == cpu.dtype, (out.dtype, cpu.dtype)
    assert out.shape == cpu.shape, (out.shape, cpu.shape)
    torch.testing.assert_close(out.cpu(), cpu, equal_nan=True,
                               **tol(cpu.dtype))
    if native:
        assert report == {}, report
    return out


# ------------------------------ elementwise ------------------------------


@pytest.mark.parametrize("dtype", COMPLEX)
def test_abs(dtype):
    x = rand((4, 5), dtype)
    x[0, 0] = 0
    out = check(torch.abs, x)
    assert out.dtype == REAL_OF[dtype]
    # non-contiguous and conjugated views
    check(lambda t: torch.abs(t.t()), x)
    check(lambda t: torch.abs(t.conj()), x)
    # out= of the real type
    check(lambda t: torch.abs(t, out=torch.empty(0, dtype=REAL_OF[dtype],
                                                 device=t.device)), x)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_abs_inplace_refused(dtype):
    x = rand((3,), dtype)
    with pytest.raises(RuntimeError):
        x.clone().abs_()
    with pytest.raises(RuntimeError):
        dev(x).abs_()


@pytest.mark.parametrize("dtype", COMPLEX)
def test_sgn(dtype):
    x = rand((3, 4), dtype)
    x[1] = 0
    check(torch.sgn, x)
    check(lambda t: t.clone().sgn_(), x)
    check(lambda t: torch.sgn(t.conj()), x)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("fn", [torch.rsqrt, torch.sqrt, torch.reciprocal])
def test_unary(dtype, fn):
    x = rand((3, 4), dtype)
    check(fn, x)
    check(lambda t: fn(t[:, ::2]), x)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_scalar_and_mixed(dtype, op):
    f = getattr(torch, op)
    x, y = rand((3, 4), dtype), rand((3, 4), dtype, 1)
    r = y.real.contiguous()
    check(lambda t: f(t, 2.5), x)
    check(lambda t: f(t, 3), x)
    check(lambda t, u: f(t, u), x, r)
    check(lambda t, u: f(u, t), x, r)
    check(lambda t, u: f(t, u.double()), x, r)
    check(lambda t, u: f(t, u[0]), x, y)
    check(lambda t: getattr(t.clone(), op + "_")(1.5), x)
    check(lambda t, u: getattr(t.clone(), op + "_")(u), x, r)
    check(lambda t, u: f(t, u, out=torch.empty(0, dtype=dtype,
                                               device=t.device)), x, y)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_into_real_refused(dtype):
    x, r = rand((3,), dtype), torch.randn(3)
    with pytest.raises(RuntimeError):
        r.clone().add_(x)
    with pytest.raises(RuntimeError):
        dev(r).add_(dev(x))


# -------------------------------- indexing -------------------------------


@pytest.mark.parametrize("dtype", COMPLEX)
def test_pad_and_fill(dtype):
    x = rand((3, 4), dtype)
    m = x.real > 0
    for v in [0.0, 1.5, 3, float("nan"), float("inf")]:
        check(lambda t: torch.constant_pad_nd(t, (1, 2, 0, 1), v), x)
        check(lambda t, mm: t.masked_fill(mm, v), x, m)
        check(lambda t: t.index_fill(1, torch.tensor([0, 2], device=t.device),
                                     v), x)
    check(lambda t, mm: t.clone().masked_fill_(mm, 2.0), x, m)
    check(lambda t: torch.constant_pad_nd(t, (-1, 1)), x)
    # 0-d tensor values: complex of the same dtype, or real
    for v in [torch.tensor(2 + 1j, dtype=dtype), torch.tensor(0.5)]:
        check(lambda t, mm, vv: t.masked_fill(mm, vv), x, m, v)
        check(lambda t, vv: t.index_fill(0, torch.tensor([1], device=t.device),
                                         vv), x, v)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_index_add_copy_scatter(dtype):
    x, s = rand((4, 3), dtype), rand((2, 3), dtype, 1)
    i = torch.tensor([3, 1])
    check(lambda t, ii, ss: t.index_add(0, ii, ss), x, i, s)
    check(lambda t, ii, ss: t.index_add(0, ii, ss, alpha=2.5), x, i, s)
    check(lambda t, ii, ss: t.clone().index_add_(0, ii, ss), x, i, s)
    check(lambda t, ii, ss: t.index_copy(0, ii, ss), x, i, s)
    j = torch.tensor([[0, 3, 3], [1, 1, 0]])
    check(lambda t, jj, ss: t.scatter_add(0, jj, ss), x, j, s)
    check(lambda t, jj, ss: t.clone().scatter_add_(0, jj, ss), x, j, s)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_index_and_index_put(dtype):
    x, v = rand((4, 3), dtype), rand((3, 3), dtype, 1)
    i = torch.tensor([2, 0, 2])
    check(lambda t, ii: t[ii], x, i)
    check(lambda t, ii: t[:, ii[:2]], x, i)
    check(lambda t: t[t.real > 0], x)
    check(lambda t, ii, vv: t.index_put((ii,), vv, accumulate=True), x, i, v)
    check(lambda t, ii, vv: t.index_put((ii[1:],), vv[1:]), x, i, v)
    check(lambda t, ii, vv: t.clone().index_put_((ii,), vv, True), x, i, v)
    m = torch.tensor([True, False, True, False])
    check(lambda t, mm, vv: t.index_put((mm,), vv[0], accumulate=True),
          x, m, v)


# ------------------------------- reductions ------------------------------


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scan(dtype, name):
    x = rand((3, 5), dtype) * 0.7
    f = getattr(torch, name)
    check(lambda t: f(t, 1), x)
    check(lambda t: f(t, 0), x)
    check(lambda t: f(t.t(), 0), x)
    check(lambda t: getattr(t.clone(), name + "_")(1), x)
    check(lambda t: f(t, 1, out=torch.empty(0, dtype=dtype, device=t.device)),
          x)
    check(lambda t: f(t, 1, dtype=torch.complex128), x)
    # real input, complex result dtype
    check(lambda t: f(t.real.contiguous(), 1, dtype=dtype), x)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_vector_norm(dtype):
    x = rand((3, 4), dtype)
    for ord in [2, 1, 3.5, 0, float("inf"), -float("inf")]:
        out = check(lambda t: torch.linalg.vector_norm(t, ord), x)
        assert out.dtype == REAL_OF[dtype]
        check(lambda t: torch.linalg.vector_norm(t, ord, dim=1, keepdim=True),
              x)
    check(lambda t: torch.linalg.vector_norm(t.conj().t(), dim=0), x)


# -------------------------------- products -------------------------------


@pytest.mark.parametrize("dtype", COMPLEX)
def test_products(dtype):
    a, b = rand((3, 4), dtype), rand((4, 5), dtype, 1)
    c, v = rand((3, 5), dtype, 2), rand((4,), dtype, 3)
    w = rand((4,), dtype, 4)
    check(lambda p, q, r: torch.addmm(r, p, q), a, b, c)
    check(lambda p, q, r: torch.addmm(r, p, q, beta=0.5, alpha=2), a, b, c)
    check(lambda p, q, r: torch.addmm(r[0], p, q, beta=0), a, b, c)
    check(lambda p, q, r: r.clone().addmm_(p, q), a, b, c)
    check(lambda p, q, r: torch.addmm(r, p.conj(), q.t().contiguous().t()),
          a, b, c)
    check(lambda p, vv: torch.mv(p, vv), a, v)
    check(lambda p, vv, r: torch.addmv(r[:, 0], p, vv, alpha=3), a, v, c)
    check(lambda p, vv, r: r[:, 0].clone().addmv_(p, vv), a, v, c)
    check(lambda x, y: torch.dot(x, y), v, w)
    check(lambda x, y: torch.vdot(x, y), v, w)
    check(lambda x, y: torch.vdot(x.conj(), y), v, w)
    check(lambda x, y: torch.dot(x, y, out=torch.empty((), dtype=dtype,
                                                       device=x.device)), v, w)
    p3, q3 = rand((2, 3, 4), dtype, 5), rand((2, 4, 5), dtype, 6)
    r3 = rand((2, 3, 5), dtype, 7)
    check(lambda p, q, r: torch.baddbmm(r, p, q, beta=2, alpha=0.5),
          p3, q3, r3)
    check(lambda p, q, r: r.clone().baddbmm_(p, q), p3, q3, r3)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_products_refused(dtype):
    a, b = rand((3, 4), dtype), rand((5, 5), dtype, 1)
    with pytest.raises(RuntimeError):
        torch.mm(dev(a), dev(b))
    with pytest.raises(RuntimeError):
        torch.mv(dev(a), dev(b[0]))
    with pytest.raises(RuntimeError):
        torch.dot(dev(a[0]), dev(torch.randn(4)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_and_polar_are_native(dtype):
    # torch.complex and torch.polar (Llama 4's rotary frequencies) built a
    # complex tensor on the CPU; broadcasting and autograd through them.
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 4, generator=g, dtype=dtype).abs()
    b = torch.randn(1, 4, generator=g, dtype=dtype) * 4
    for fn in (torch.complex, torch.polar):
        tpuc.fallback_reset()
        out = fn(a.to("tpu"), b.to("tpu"))
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        want = fn(a, b)
        assert out.dtype == want.dtype and out.shape == want.shape
        torch.testing.assert_close(out.cpu(), want, **tol(dtype))
        leaves = [t.clone().requires_grad_() for t in (a, b)]
        dleaves = [t.to("tpu").requires_grad_() for t in (a, b)]
        fn(*leaves).abs().sum().backward()
        fn(*dleaves).abs().sum().backward()
        for d, c in zip(dleaves, leaves):
            torch.testing.assert_close(d.grad.cpu(), c.grad, **tol(dtype))
    for devname in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Expected object of scalar type Float"):
            torch.complex(torch.ones(2, device=devname),
                          torch.ones(2, dtype=torch.float64, device=devname))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64,
                                   torch.complex128, torch.int64])
def test_complex_python_scalars_are_native(dtype):
    # x * 1j, x + (1 - 2j), a CPU 0-d complex tensor, fill_ and alpha: the
    # scalar is a complex128 program value, promoted as PyTorch does (a
    # float32 or integer tensor gives complex64, float64 complex128).
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 4, generator=g) * 3).to(dtype) if not dtype.is_complex else \
        torch.randn(3, 4, generator=g, dtype=dtype)
    cases = [lambda t: t * 1j, lambda t: t + (2 - 3j), lambda t: (1 + 1j) - t,
             lambda t: t / (2 + 1j), lambda t: t * torch.tensor(1 + 2j)]
    if dtype.is_complex:
        cases += [lambda t: t.clone().mul_(2j), lambda t: t.clone().fill_(1 + 1j),
                  lambda t: torch.add(t, t, alpha=1j)]
    for fn in cases:
        check(fn, x)
    # a complex value into a real tensor: the CPU's error
    for d in ("cpu", "tpu"):
        if not dtype.is_complex:
            with pytest.raises(RuntimeError):
                torch.ones(2, dtype=dtype, device=d).mul_(1j)
