"""Native math lowerings (src/ops/math.c): unary functions, clamps and
remainders, matrix-vector products, scans, arg reductions, statistics and
sort agree with the CPU (dtypes, promotion, NaN/inf, in-place and out=,
non-contiguous inputs, errors) without the CPU fallback."""

import math

import pytest
import torch

import tpuc

FLOAT = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INT = [torch.int64, torch.int32, torch.uint8]
SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0]


def make(shape, dtype, special=False, lo=-4):
    torch.manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        x = torch.randn(shape) * 3
        if special:
            flat = x.view(-1)
            n = min(len(SPECIAL), flat.numel())
            flat[:n] = torch.tensor(SPECIAL[:n])
        return x.to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else lo, 9, shape).to(dtype)


def to_dev(a):
    return a.to("tpu") if isinstance(a, torch.Tensor) else a


def same(dev, cpu, exact):
    if isinstance(cpu, (tuple, list)):
        for d, c in zip(dev, cpu):
            same(d, c, exact)
        return
    assert dev.device.type == "tpu"
    assert dev.dtype == cpu.dtype, (dev.dtype, cpu.dtype)
    assert dev.shape == cpu.shape, (dev.shape, cpu.shape)
    if exact:
        torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(dev.cpu(), cpu, equal_nan=True)


def check_native(fn, *args, exact=False):
    cpu = fn(*args)
    tpuc.fallback_reset()
    dev = fn(*[to_dev(a) for a in args])
    same(dev, cpu, exact)
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()


def check_error(fn, *args):
    with pytest.raises(Exception) as cpu_err:
        fn(*args)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(*[to_dev(a) for a in args])
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


UNARY = ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
         "erf", "erfc", "erfinv", "exp2", "log2", "log10", "deg2rad", "rad2deg",
         "trunc", "frac", "sgn", "isnan", "isinf", "isposinf", "isneginf",
         "signbit", "logical_not", "nan_to_num"]


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
@pytest.mark.parametrize("op", UNARY)
def test_unary_float(op, dtype):
    x = make((40,), dtype, special=True)
    if op in ("asin", "acos", "atanh", "erfinv"):
        x = torch.cat([torch.rand(30) * 2 - 1,
                       torch.tensor([0.0, -0.0, 1, -1, 0.7, -0.71, 1.5, float("nan")])]).to(dtype)
    check_native(getattr(torch, op), x)


@pytest.mark.parametrize("op", ["asin", "erf", "exp2", "log2", "trunc", "sgn", "isnan",
                                "signbit", "logical_not", "nan_to_num", "deg2rad"])
@pytest.mark.parametrize("dtype", INT + [torch.bool], ids=str)
def test_unary_integer(op, dtype):
    if op == "trunc" and dtype == torch.bool:
        return
    check_native(getattr(torch, op), make((12,), dtype), exact=True)


def test_unary_exact_values():
    x = torch.tensor([1.0, 8, 1024, 0.125, 1000, 1e-3, 100000])
    check_native(torch.log2, x[:4], exact=True)
    check_native(torch.log10, x[4:], exact=True)
    check_native(torch.exp2, torch.tensor([3.0, -2, 10]), exact=True)
    check_native(lambda t: torch.nan_to_num(t, nan=1.5, posinf=9.0), make((10,), torch.float32, True))


def test_unary_inplace_out_views():
    x = make((6, 5), torch.float32)
    check_native(lambda t: t.clone().asinh_(), x)
    check_native(lambda t: torch.erf(t, out=torch.empty(30, device=t.device)[:30].view(6, 5)), x)
    check_native(lambda t: torch.sinh(t.t()[1:]), x)
    check_native(lambda t: torch.atan(t[:, ::2]), x)
    check_error(lambda t: t.clone().erf_(), make((4,), torch.int64))


@pytest.mark.parametrize("dtype", FLOAT + INT, ids=str)
def test_clamp_family(dtype):
    a, b = make((5, 6), dtype, True), make((6,), dtype)
    check_native(lambda x: torch.clamp(x, -2, 3), a)
    check_native(lambda x: torch.clamp(x, min=1.5), a)
    check_native(lambda x, y: torch.clamp(x, y, y + 2), a, b)
    check_native(lambda x, y: torch.clamp_max(x, y), a, b)
    check_native(lambda x: x.clone().clamp_min_(1), a)
    if dtype.is_floating_point:
        check_native(lambda x: torch.clamp(x, min=float("nan")), a)
        check_native(lambda x: torch.clamp(x, min=float("nan"), max=1), a)


@pytest.mark.parametrize("dtype", FLOAT + INT, ids=str)
def test_division_family(dtype):
    a, b = make((30,), dtype, True), make((30,), dtype, lo=-9)
    if not dtype.is_floating_point:
        b = torch.where(b == 0, torch.ones_like(b), b)
    exact = not dtype.is_floating_point
    check_native(torch.remainder, a, b, exact=exact)
    check_native(lambda x: torch.remainder(x, -3), a, exact=exact)
    check_native(lambda y: torch.remainder(5, y), b, exact=exact)
    check_native(torch.floor_divide, a, b, exact=exact)
    check_native(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b, exact=exact)
    check_native(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b, exact=exact)
    check_native(lambda x: torch.div(x, 2, rounding_mode="trunc"), a, exact=exact)
    check_native(lambda x, y: x.clone().floor_divide_(y), a, b, exact=exact)


def test_integer_division_by_zero():
    a, b = torch.tensor([1, 2, 3]), torch.tensor([1, 0, 2])
    for fn in (torch.remainder, torch.floor_divide,
               lambda x, y: torch.div(x, y, rounding_mode="trunc")):
        check_error(fn, a, b)
    check_native(torch.floor_divide, torch.tensor([1.0, -2, 0]), torch.tensor([0.0, 0, 0]))


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
def test_binary_float(dtype):
    a, b = make((4, 8), dtype, True), make((8,), dtype)
    for op in ("xlogy", "hypot", "copysign", "logaddexp", "logaddexp2",
               "heaviside", "fmax", "fmin", "logical_and", "logical_xor"):
        check_native(getattr(torch, op), a, b)
    check_native(lambda x: torch.xlogy(2, x), b)
    check_native(lambda x: torch.copysign(x, -0.0), a)
    check_native(lambda x, y: torch.rsub(x, y, alpha=2), a, b)
    check_native(lambda x, y: torch.lerp(x, y, 0.3), a, b.expand(4, 8))
    check_native(lambda x, y: torch.lerp(x, y, y), a, b.expand(4, 8))
    check_native(lambda x, y: torch.addcmul(x, y, x, value=2), a, b)
    check_native(lambda x, y: torch.addcdiv(x, y, x, value=0.5), a, b)


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
def test_lerp_with_a_number_weight_is_the_cpus_bitwise(dtype):
    # A number weight picks lerp's formula on the number (self + w (end -
    # self) below 1/2, end - (end - self)(1 - w) from it on); both, their
    # edge, infinities, NaN and signed zeros, out of place and in place.
    a, b = make((4, 8), dtype, True), make((4, 8), dtype)
    b.view(-1)[-3:] = torch.tensor([0.0, -0.0, float("inf")]).to(dtype)
    for w in (0.0, -0.0, 0.3, -0.3, 0.5, -0.5, 0.75, 1.0, 1.7, -2.5,
              float("inf"), -float("inf"), float("nan")):
        check_native(lambda x, y: torch.lerp(x, y, w), a, b, exact=True)
        check_native(lambda x, y: x.clone().lerp_(y, w), a, b, exact=True)
        check_native(lambda x, y: torch.lerp(x, y[0], w), a, b, exact=True)


def test_binary_integer_promotion():
    i, f = make((6,), torch.int32), make((6,), torch.float16)
    check_native(torch.xlogy, i, i)
    check_native(torch.copysign, i, f)
    check_native(torch.floor_divide, i, f)
    check_native(lambda x: torch.clamp(x, 0.5, 3.5), i)
    check_native(lambda x, y: torch.addcmul(x, y, y, value=3), i, i, exact=True)
    check_native(torch.logical_or, i, f, exact=True)
    with pytest.raises(RuntimeError, match="can't be cast"):
        to_dev(i).clamp_(0.5, 3.5)


@pytest.mark.parametrize("dtype", FLOAT + [torch.int64, torch.int32], ids=str)
def test_products(dtype):
    def r(*s):
        return make(s, dtype)
    check_native(lambda s, a, b: torch.addmm(s, a, b, beta=2, alpha=3), r(3, 5), r(3, 4), r(4, 5))
    check_native(lambda s, a, b: torch.addmm(s, a.t(), b), r(5), r(4, 3), r(4, 5))
    check_native(lambda s, a, b: s.clone().addmm_(a, b), r(3, 5), r(3, 4), r(4, 5))
    check_native(lambda s, a, b: torch.addmv(s, a, b, beta=0), r(3), r(3, 4), r(4))
    check_native(torch.mv, r(3, 4), r(4))
    check_native(torch.dot, r(7), r(7))
    check_native(torch.vdot, r(7), r(7))
    check_native(lambda s, a, b: torch.baddbmm(s, a, b, alpha=2), r(2, 3, 5), r(2, 3, 4), r(2, 4, 5))
    check_native(torch.addbmm, r(3, 5), r(2, 3, 4), r(2, 4, 5))
    check_native(lambda s, a, b: torch.addr(s, a, b, alpha=2), r(3, 5), r(3), r(5))


def test_product_errors_and_beta_zero():
    nan = torch.full((3, 5), float("nan"))
    check_native(lambda s, a, b: torch.addmm(s, a, b, beta=0), nan, make((3, 4), torch.float32),
                 make((4, 5), torch.float32))
    check_error(torch.mv, torch.randn(3, 4), torch.randn(5))
    check_error(torch.addmm, torch.randn(3, 5), torch.randn(3, 4).double(), torch.randn(4, 5))


REDUCTIONS = [
    ("any", torch.any), ("all_dims", lambda x: torch.all(x, (0, 1), keepdim=True)),
    ("any_dim", lambda x: torch.any(x, 1)),
    ("prod", torch.prod), ("prod_dim", lambda x: torch.prod(x, 0, keepdim=True)),
    ("nansum", lambda x: torch.nansum(x, 1)), ("max", torch.max), ("min", torch.min),
    ("count_nonzero", lambda x: torch.count_nonzero(x, (0,))),
    ("max_dim", lambda x: torch.max(x, 1)), ("min_dim", lambda x: torch.min(x, 0, keepdim=True)),
    ("cumsum", lambda x: torch.cumsum(x, 1)), ("cumprod", lambda x: torch.cumprod(x, 0)),
    ("sort_stable", lambda x: torch.sort(x, stable=True, dim=1, descending=True)),
]
FLOAT_REDUCTIONS = [
    ("argmax", torch.argmax), ("argmin", lambda x: torch.argmin(x, 1, keepdim=True)),
    ("var", torch.var), ("std", lambda x: torch.std(x, 1, correction=0)),
    ("var_mean", lambda x: torch.var_mean(x, 0, keepdim=True)),
    ("logsumexp", lambda x: torch.logsumexp(x, 1)),
    ("norm2", torch.linalg.vector_norm), ("norm1", lambda x: torch.linalg.vector_norm(x, 1, 1)),
    ("norminf", lambda x: torch.linalg.vector_norm(x, float("inf"), 0)),
    ("norm0", lambda x: torch.linalg.vector_norm(x, 0, 1, keepdim=True)),
    ("norm3", lambda x: torch.linalg.vector_norm(x, 3.5)),
    ("torch_norm", lambda x: torch.norm(x, 1, dim=1)),
    ("logcumsumexp", lambda x: torch.logcumsumexp(x, 1)),
]


@pytest.mark.parametrize("dtype", FLOAT + INT + [torch.bool], ids=str)
def test_reductions(dtype):
    x = make((4, 6), dtype)
    for name, fn in REDUCTIONS:
        check_native(fn, x, exact=not dtype.is_floating_point)
    if dtype.is_floating_point:
        for name, fn in FLOAT_REDUCTIONS:
            check_native(fn, x)
        if dtype in (torch.float32, torch.float64):
            check_native(lambda t: torch.sort(t, 0), x)  # unstable: wide only
        check_native(lambda t: torch.cumsum(t, 1, dtype=torch.float64), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_reductions_nan_inf(dtype):
    x = make((4, 6), dtype, special=True)
    for name, fn in REDUCTIONS + FLOAT_REDUCTIONS:
        if name in ("var_mean",):
            continue  # the CPU's Welford mean of inf is NaN
        check_native(fn, x)
    check_native(lambda t: torch.sort(t, 1), x)


def test_reduction_dtypes_and_out():
    check_native(lambda t: torch.cumsum(t, 0), make((5,), torch.int32), exact=True)
    check_native(lambda t: torch.any(t), make((5,), torch.uint8), exact=True)
    check_native(lambda t: torch.prod(t, dtype=torch.float32), make((5,), torch.int8))
    check_native(lambda t: torch.max(t, 1, keepdim=True), make((3, 4), torch.int64), exact=True)
    ties = torch.tensor([[1.0, 3, 3, 0], [2, 2, 1, 2]])
    check_native(lambda t: torch.max(t, 1), ties, exact=True)
    check_native(lambda t: torch.argmin(t, 1), ties, exact=True)
    x = make((4, 6), torch.float32)

    def outs(t):
        v = torch.empty(0, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.max(t, 0, out=(v, i))
        return v, i
    check_native(outs, x)
    check_native(lambda t: torch.cumsum(t[:, 1::2], 0), x)
    check_native(lambda t: t.clone().cumsum_(1), x)
    check_error(lambda t: torch.argmax(t), torch.tensor([True, False]))
    check_error(lambda t: torch.max(t), torch.empty(0))


def test_scalar_values_share_programs():
    x = make((8,), torch.float32).to("tpu")
    for ordv in (1, 2, 3.0, float("inf"), 0):
        torch.testing.assert_close(torch.linalg.vector_norm(x, ordv).cpu(),
                                   torch.linalg.vector_norm(x.cpu(), ordv))
    for lo in (-1.0, 0.5):
        torch.testing.assert_close(torch.clamp(x, lo, 2.0).cpu(), torch.clamp(x.cpu(), lo, 2.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_pow_scalar_exponents_the_cpu_computes_without_pow(dtype):
    # 2, 3, 0.5, -0.5, -1 and -2 are computed as products, sqrt, rsqrt and
    # reciprocals (as the CPU kernel does); any other exponent is a pow.
    # Each exponent gets its right result, whichever program ran before.
    torch.manual_seed(0)
    x = torch.randn(64, 33, dtype=torch.float64).to(dtype)
    for k in (2, 3, 0.5, -0.5, -1, -2, 2.5, 3.0, 2, -3):
        xa = x.abs() if k in (0.5, -0.5, 2.5) else x
        torch.testing.assert_close(xa.to("tpu").pow(k).cpu(), xa.pow(k), equal_nan=True,
                                   msg=f"x ** {k}")
    y = x.clone().to("tpu")
    y.pow_(3)
    torch.testing.assert_close(y.cpu(), x.pow(3))
