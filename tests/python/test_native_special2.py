"""More special functions lowered in src/ops/special.c run natively (no CPU
fallback) and agree with the CPU: the orthogonal polynomials (Chebyshev
T/U/V/W and their shifted forms, Hermite H/He, Laguerre, Legendre) with
the recurrence run as a device while loop to the largest n, their special
cases (|x| == 1, large n inside (-1, 1), negative, NaN or huge n, Hermite's
n limit) and scalar overloads; airy_ai, erfcx, log_ndtr, ndtri over their
whole range; zeta with its scalar forms; igamma / igammac (all four
methods: series, continued fraction, upper series, asymptotic expansion,
and the boundaries); out= and in-place variants, non-contiguous inputs."""

import math

import pytest
import torch

import tpuc

S = torch.special


def dev(a):
    return a.to("tpu") if isinstance(a, torch.Tensor) else a


def check(fn, *args, **kw):
    tpuc.fallback_reset()
    cpu = fn(*args)
    out = fn(*[dev(a) for a in args])
    report = tpuc.fallback_report()
    assert out.device.type == "tpu"
    assert out.dtype == cpu.dtype and out.shape == cpu.shape
    torch.testing.assert_close(out.cpu(), cpu, equal_nan=True, **kw)
    assert report == {}, report


POLYS = [
    S.chebyshev_polynomial_t, S.chebyshev_polynomial_u,
    S.chebyshev_polynomial_v, S.chebyshev_polynomial_w,
    S.shifted_chebyshev_polynomial_t, S.shifted_chebyshev_polynomial_u,
    S.shifted_chebyshev_polynomial_v, S.shifted_chebyshev_polynomial_w,
    S.hermite_polynomial_h, S.hermite_polynomial_he,
    S.laguerre_polynomial_l, S.legendre_polynomial_p,
]

# x = NaN with n >= 2 is left out: the CPU returns an uninitialized value
# there (its loop never runs); the device gives NaN.
XS = [-1.5, -1.0, -0.999, -0.5, -0.3, 0.0, 0.25, 0.5, 0.7, 0.999, 1.0, 1.3,
      2.0, 1e-4, 0.9999]
NS = [-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0,
      30.0, 100.0, 129.0, 300.0, 600.0, math.nan, math.inf, -math.inf,
      1e30, 2.7]


def grid(dtype):
    x = torch.tensor(XS, dtype=dtype)[:, None].expand(-1, len(NS))
    n = torch.tensor(NS, dtype=dtype)[None, :].expand(len(XS), -1)
    return x.contiguous(), n.contiguous()


@pytest.mark.parametrize("fn", POLYS, ids=lambda f: f.__name__)
def test_polynomial_grid_f64(fn):
    x, n = grid(torch.float64)
    check(fn, x, n, rtol=1e-9, atol=1e-9)
    # NaN x with n < 2 and NaN n are well defined
    check(fn, torch.tensor([math.nan] * 4, dtype=torch.float64),
          torch.tensor([-1.0, 0.0, 1.0, math.nan], dtype=torch.float64))


@pytest.mark.parametrize("fn", [S.chebyshev_polynomial_t,
                                S.shifted_chebyshev_polynomial_u,
                                S.hermite_polynomial_h,
                                S.laguerre_polynomial_l,
                                S.legendre_polynomial_p],
                         ids=lambda f: f.__name__)
def test_polynomial_grid_f32(fn):
    # long float recurrences agree because the CPU's fma is emulated
    x, n = grid(torch.float32)
    check(fn, x, n, rtol=1e-4, atol=1e-5)


def test_polynomial_ints_scalars_out():
    torch.manual_seed(0)
    xi = torch.randint(-3, 4, (40,))
    ni = torch.randint(-2, 12, (40,))
    fn = S.chebyshev_polynomial_w
    check(fn, xi, ni)                       # int -> default float
    check(fn, 0.5, ni)                      # x_scalar
    check(fn, torch.linspace(-2, 2, 40), 5)  # n_scalar
    check(fn, xi.bool(), ni.to(torch.int16))
    # broadcast, non-contiguous
    x = torch.linspace(-1.2, 1.2, 24, dtype=torch.float64).view(4, 6).t()
    check(S.legendre_polynomial_p, x, torch.arange(4.0, dtype=torch.float64))
    # out=
    tpuc.fallback_reset()
    out = torch.empty(40, device="tpu")
    r = S.hermite_polynomial_he(xi.float().to("tpu"), ni.float().to("tpu"),
                                out=out)
    assert r.data_ptr() == out.data_ptr()
    torch.testing.assert_close(
        out.cpu(), S.hermite_polynomial_he(xi.float(), ni.float()))
    assert tpuc.fallback_report() == {}


def unary_inputs(dtype):
    torch.manual_seed(0)
    edge = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.09, -2.09, 50.0, 50.5,
                         -6.1, -26.7, -27.0, 1e8, 103.9, 8.3203353, 5e7,
                         math.inf, -math.inf, math.nan], dtype=torch.float64)
    return torch.cat([torch.linspace(-120, 120, 801, dtype=torch.float64),
                      torch.randn(100, dtype=torch.float64) * 3,
                      edge]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fn", [S.airy_ai, S.erfcx, S.log_ndtr],
                         ids=lambda f: f.__name__)
def test_unary(fn, dtype):
    check(fn, unary_inputs(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ndtri(dtype):
    torch.manual_seed(0)
    y = torch.cat([torch.rand(300, dtype=torch.float64),
                   torch.tensor([0, 1, -0.1, 1.1, 1e-20, 1 - 1e-7, 0.5, 0.135,
                                 0.865, 1e-14, 1e-100, math.nan],
                                dtype=torch.float64)]).to(dtype)
    check(S.ndtri, y)


def test_unary_ints_out_noncontiguous():
    check(S.erfcx, torch.arange(-10, 10, dtype=torch.int32))
    check(S.ndtri, torch.tensor([True, False]))
    x = torch.linspace(-5, 5, 60).view(6, 10)[:, ::2]
    check(S.airy_ai, x)
    tpuc.fallback_reset()
    out = torch.empty(0, device="tpu", dtype=torch.float64)
    xd = torch.linspace(-5, 5, 30, dtype=torch.float64)
    S.log_ndtr(xd.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), S.log_ndtr(xd))
    assert tpuc.fallback_report() == {}


def test_zeta():
    torch.manual_seed(0)
    x = torch.cat([torch.rand(200, dtype=torch.float64) * 10,
                   torch.tensor([1.0, 0.5, 2.0, 3.0, 2.0, math.nan])])
    q = torch.cat([torch.rand(200, dtype=torch.float64) * 20 - 5,
                   torch.tensor([2.0, 2.0, 0.0, -2.0, -2.5, 1.0])])
    check(S.zeta, x, q)
    check(S.zeta, x.float(), q.float())
    check(S.zeta, 2.5, q)           # self_scalar
    check(S.zeta, x, 3)             # other_scalar
    check(S.zeta, torch.arange(2, 8), torch.arange(1, 7))  # ints


def igamma_inputs(dtype):
    torch.manual_seed(0)
    r = lambda n, s: torch.rand(n, dtype=torch.float64) * s  # noqa: E731
    a = torch.cat([r(300, 10), r(100, 300), r(50, 2000),
                   torch.tensor([0, 0, 0, -1, 1, math.inf, math.inf,
                                 math.nan, 1, 2, 25, 250, 1e-3, 0.3],
                                dtype=torch.float64)])
    x = torch.cat([r(300, 12), r(100, 350), r(50, 2200),
                   torch.tensor([1, 0, -1, 1, -1, 1, math.inf, 1, math.nan,
                                 math.inf, 24, 251, 1.05, 0.7],
                                dtype=torch.float64)])
    return a.to(dtype), x.to(dtype)


@pytest.mark.parametrize("fn,dtype", [
    (torch.igammac, torch.float64), (torch.igamma, torch.float32)])
def test_igamma(fn, dtype):
    a, x = igamma_inputs(dtype)
    kw = dict(rtol=1e-7, atol=1e-7) if dtype == torch.float64 else {}
    check(fn, a, x, **kw)


def test_igamma_inplace_out():
    a, x = igamma_inputs(torch.float64)
    tpuc.fallback_reset()
    at = a.to("tpu")
    at.igammac_(x.to("tpu"))
    torch.testing.assert_close(at.cpu(), torch.igammac(a, x), equal_nan=True)
    out = torch.empty_like(at)
    torch.igamma(a.to("tpu"), x.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), torch.igamma(a, x), equal_nan=True)
    assert tpuc.fallback_report() == {}
