"""Random ops, data-dependent shapes and masked_scatter lowered natively:
cauchy_, geometric_, log_normal_, normal.Tensor_Tensor/Tensor_float/
float_Tensor, multinomial, rrelu_with_noise, complex uniform_/normal_
(src/ops/random.c); _unique2, _unique, unique_consecutive, unique_dim,
unique_dim_consecutive, complex nonzero/masked_select (src/ops/dynamic.c);
masked_scatter and complex scatter (src/ops/index.c).

Random ops differ from the CPU's generator, so they are checked for dtype,
shape, same-seed reproducibility and their distribution (moments on a
large sample); the others agree with the CPU exactly, errors included."""

import math

import pytest
import torch

import tpuc


def to_dev(a):
    if isinstance(a, torch.Tensor):
        return a.to("tpu")
    if isinstance(a, (list, tuple)):
        return type(a)(to_dev(t) for t in a)
    return a


def flat(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def check(fn, *args, native=True, exact=True):
    """fn on the CPU and on the tpu agree; no CPU fallback when native."""
    cpu = flat(fn(*args))
    tpuc.fallback_reset()
    dev = flat(fn(*to_dev(list(args))))
    report = tpuc.fallback_report()
    assert len(cpu) == len(dev)
    for c, d in zip(cpu, dev):
        assert d.device.type == "tpu"
        assert d.dtype == c.dtype, (d.dtype, c.dtype)
        assert d.shape == c.shape, (d.shape, c.shape)
        if exact:
            torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0,
                                       equal_nan=True)
        else:
            torch.testing.assert_close(d.cpu(), c)
    if native:
        assert report == {}, report


def check_error(fn, *args):
    """fn raises the same exception type and message on both devices."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(Exception) as dev:
        fn(*to_dev(list(args)))
    assert type(dev.value) is type(cpu.value), (dev.value, cpu.value)
    assert str(cpu.value).split("\n")[0] in str(dev.value), (dev.value,
                                                              cpu.value)


@pytest.fixture
def native_only():
    tpuc.fallback_reset()
    yield
    assert not tpuc.fallback_report()


N = 200_000


def reproducible(fn):
    """fn() twice from one seed gives the same tensor, a third draw not."""
    torch.tpu.manual_seed(7)
    a = fn().cpu()
    torch.tpu.manual_seed(7)
    b = fn().cpu()
    c = fn().cpu()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    return a


# ------------------------------- random ops ------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.bfloat16])
def test_cauchy(native_only, dtype):
    x = reproducible(lambda: torch.empty(N, device="tpu",
                                         dtype=dtype).cauchy_(1.0, 2.0))
    assert x.dtype == dtype
    x = x.double()
    # median 1, quartiles at median -+ sigma
    assert abs(x.median().item() - 1.0) < 0.05
    q = torch.quantile(x[:100_000], torch.tensor([0.25, 0.75],
                                                 dtype=torch.float64))
    assert abs(q[0].item() + 1.0) < 0.08 and abs(q[1].item() - 3.0) < 0.08
    y = torch.ops.aten.cauchy(torch.empty(3, 4, device="tpu"))  # functional
    assert y.shape == (3, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   torch.int32, torch.uint8])
def test_geometric(native_only, dtype):
    x = reproducible(lambda: torch.empty(N, device="tpu",
                                         dtype=dtype).geometric_(0.25))
    assert x.dtype == dtype
    x = x.double()
    assert x.min().item() >= 1
    assert abs(x.mean().item() - 4.0) < 0.05  # 1 / p
    assert abs(x.var().item() - 12.0) < 0.5  # (1 - p) / p^2
    assert abs((x == 1).double().mean().item() - 0.25) < 0.01


def test_log_normal(native_only):
    x = reproducible(lambda: torch.empty(N, device="tpu",
                                         dtype=torch.float64).log_normal_(
                                             0.5, 0.25))
    assert x.min().item() > 0
    lx = x.log()
    assert abs(lx.mean().item() - 0.5) < 0.01
    assert abs(lx.std().item() - 0.25) < 0.01
    h = torch.empty(100, device="tpu", dtype=torch.float16).log_normal_()
    assert h.dtype == torch.float16 and (h.cpu() > 0).all()


def test_normal_tensor_forms(native_only):
    mean = torch.full((N,), 3.0, device="tpu")
    std = torch.full((N,), 2.0, device="tpu")
    x = reproducible(lambda: torch.normal(mean, std))
    assert abs(x.mean().item() - 3.0) < 0.02
    assert abs(x.std().item() - 2.0) < 0.02
    x = torch.normal(mean.to(torch.bfloat16), 0.5).cpu()
    assert x.dtype == torch.bfloat16
    assert abs(x.float().std().item() - 0.5) < 0.01
    x = torch.normal(-1.0, std.double()).cpu()
    assert x.dtype == torch.float64 and abs(x.mean().item() + 1.0) < 0.02
    # broadcast of mean and std; per-element means
    m = torch.arange(4.0, device="tpu").view(4, 1)
    s = torch.zeros(3, device="tpu")
    x = torch.normal(m, s).cpu()
    assert x.shape == (4, 3)
    assert torch.equal(x, torch.arange(4.0).view(4, 1).expand(4, 3))
    # the mean's dtype wins over the std's, as on the CPU
    assert torch.normal(m, s.double()).dtype == torch.float32
    out = torch.empty(0, device="tpu")
    torch.normal(m, s, out=out)
    assert out.shape == (4, 3)
    torch.normal(m, 1.0, out=out)
    assert out.shape == (4, 1)
    torch.normal(0.0, s, out=out)
    assert out.shape == (3,)


def test_normal_bad_std():
    check_error(lambda m, s: torch.normal(m, s), torch.zeros(3),
                torch.tensor([1.0, -1.0, 1.0]))
    check_error(lambda m: torch.normal(m, -1.0), torch.zeros(3))
    check_error(lambda m, s: torch.normal(m, s), torch.zeros(3),
                torch.ones(4))
    check_error(lambda x: x.cauchy_(0.0, -1.0), torch.empty(3))
    check_error(lambda x: x.geometric_(1.5), torch.empty(3))
    check_error(lambda x: x.log_normal_(1.0, 0.0), torch.empty(3))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_normal_uniform(native_only, dtype):
    z = reproducible(lambda: torch.empty(N, device="tpu",
                                         dtype=dtype).normal_(1.0, 2.0))
    assert z.dtype == dtype
    # real and imaginary parts each N(mean, std / sqrt(2))
    for part in (z.real, z.imag):
        assert abs(part.mean().item() - 1.0) < 0.02
        assert abs(part.std().item() - 2.0 / math.sqrt(2)) < 0.02
    assert abs(torch.corrcoef(torch.stack([z.real, z.imag]))[0, 1]) < 0.01
    r = torch.randn(N, device="tpu", dtype=dtype).cpu()
    assert abs((r.abs() ** 2).mean().item() - 1.0) < 0.02
    u = torch.empty(N, device="tpu", dtype=dtype).uniform_(-1.0, 3.0).cpu()
    for part in (u.real, u.imag):
        assert part.min() >= -1.0 and part.max() < 3.0
        assert abs(part.mean().item() - 1.0) < 0.02
    u = torch.rand_like(torch.empty(10, 3, device="tpu", dtype=dtype))
    assert u.dtype == dtype and u.shape == (10, 3)


def test_multinomial_with_replacement(native_only):
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], device="tpu")
    m = reproducible(lambda: torch.multinomial(p, 50_000, True))
    assert m.dtype == torch.int64 and m.shape == (50_000,)
    freq = torch.bincount(m, minlength=4).double() / 50_000
    assert freq[1] == 0
    assert torch.allclose(freq, torch.tensor([0.1, 0, 0.6, 0.3],
                                             dtype=torch.float64), atol=0.01)
    # unnormalized weights, 2-D, half precision
    w = torch.tensor([[1.0, 3.0], [0.0, 5.0]], device="tpu",
                     dtype=torch.float16)
    m = torch.multinomial(w, 4000, replacement=True).cpu()
    assert m.shape == (2, 4000)
    assert (m[1] == 1).all()
    assert abs(m[0].double().mean().item() - 0.75) < 0.03


def test_multinomial_without_replacement(native_only):
    w = torch.tensor([1.0, 0.0, 2.0, 1.0], device="tpu")
    counts = torch.zeros(4)
    torch.tpu.manual_seed(3)
    for _ in range(200):
        m = torch.multinomial(w, 2).cpu()
        assert m.shape == (2,) and m[0] != m[1]
        counts[m] += 1
    # P(category in the pair) = 7/12, 0, 5/6, 7/12
    assert counts[1] == 0
    assert abs(counts[0].item() / 200 - 7 / 12) < 0.12
    assert abs(counts[2].item() / 200 - 5 / 6) < 0.1
    # a full permutation; the first draw follows the weights
    m = torch.multinomial(torch.ones(3, 5, device="tpu"), 5).cpu()
    assert torch.equal(m.sort(dim=1).values, torch.arange(5).expand(3, 5))
    first = torch.multinomial(
        torch.tensor([[1.0, 3.0]], device="tpu").expand(4000, 2), 1).cpu()
    assert abs(first.double().mean().item() - 0.75) < 0.03
    out = torch.empty(0, dtype=torch.long, device="tpu")
    torch.multinomial(w, 3, out=out)
    assert out.shape == (3,)


def test_multinomial_errors():
    for p in ([1.0, -1.0, 0.0], [0.0, 0.0, 0.0], [1.0, float("nan"), 0.0]):
        check_error(lambda t: torch.multinomial(t, 1), torch.tensor(p))
    check_error(lambda t: torch.multinomial(t, 4), torch.ones(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.bfloat16])
def test_rrelu_with_noise(native_only, dtype):
    x = torch.randn(N, dtype=dtype)
    noise = torch.zeros(N, device="tpu", dtype=dtype)
    torch.tpu.manual_seed(1)
    y = torch.ops.aten.rrelu_with_noise(x.to("tpu"), noise, 0.1, 0.3, True)
    y, nz = y.cpu(), noise.cpu()
    assert y.dtype == dtype
    neg = x <= 0
    assert torch.equal(nz[~neg], torch.ones_like(nz[~neg]))
    r = nz[neg].double()
    slack = 2e-3 if dtype == torch.bfloat16 else 0  # the rounded slopes
    assert r.min() >= 0.1 - slack and r.max() <= 0.3 + slack
    assert abs(r.mean().item() - 0.2) < 0.005
    assert abs(r.var().item() - 0.04 / 12) < 0.0005
    torch.testing.assert_close(y, x * nz)
    # evaluation: leaky relu with the mean slope, noise untouched
    check(lambda t, n: torch.ops.aten.rrelu_with_noise(t, n, 0.1, 0.3, False),
          x[:100], torch.zeros(100, dtype=dtype))
    y = torch.nn.functional.rrelu(x[:10].to("tpu"), training=True)
    assert y.shape == (10,)


# --------------------------- data-dependent shapes ----------------------


UDTYPES = [torch.float32, torch.float16, torch.int64,
           torch.uint8, torch.bool]


def make(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(-3 if dtype != torch.uint8 else 0, 4, shape).to(dtype)


@pytest.mark.parametrize("dtype", UDTYPES)
def test_unique(dtype):
    x = make((6, 7), dtype)
    for flags in [(True, False, False), (False, True, True),
                  (True, True, False), (True, False, True)]:
        check(lambda t: torch._unique2(t, *flags), x)
    check(lambda t: torch._unique(t, True, True), x)
    check(lambda t: torch._unique(t, False, False), x)
    check(lambda t: torch.unique(t, return_inverse=True, return_counts=True),
          x.t())  # non-contiguous


@pytest.mark.parametrize("dtype", UDTYPES)
def test_unique_consecutive(dtype):
    x = make((40,), dtype)
    for flags in [(False, False), (True, True), (True, False)]:
        check(lambda t: torch.ops.aten.unique_consecutive(t, *flags), x)
    check(lambda t: torch.unique_consecutive(t, return_inverse=True,
                                             return_counts=True),
          make((5, 4), dtype).t())


def test_unique_special_values():
    x = torch.tensor([3.0, float("nan"), 1.0, float("nan"), -0.0, 0.0,
                      float("inf"), -float("inf"), 1.0])
    check(lambda t: torch._unique2(t, True, True, True), x)
    check(lambda t: torch.ops.aten.unique_consecutive(t, True, True), x)
    for x in (torch.tensor(5), torch.zeros(0, 3), torch.ones(1)):
        check(lambda t: torch._unique2(t, True, True, True), x)
        check(lambda t: torch.ops.aten.unique_consecutive(t, True, True), x)
    big = torch.randint(0, 1000, (5000,))
    check(lambda t: torch._unique2(t, True, True, True), big)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique_over_a_dim(dtype):
    x = make((6, 3, 2), dtype).clamp(0, 1)
    for dim in (0, 1, -1):
        check(lambda t: torch.ops.aten.unique_dim(t, dim, True, True, True), x)
        check(lambda t: torch.ops.aten.unique_dim(t, dim, True, False, False),
              x)
        check(lambda t: torch.ops.aten.unique_dim_consecutive(t, dim, False,
                                                              False), x)
        check(lambda t: torch.ops.aten.unique_consecutive(t, True, True, dim),
              x)
    check(lambda t: torch.unique(t, dim=0, return_inverse=True,
                                 return_counts=True), x.transpose(0, 1))


def test_unique_over_a_dim_special():
    # -0 equals 0 in the lexicographic order, as on the CPU
    x = torch.tensor([[-0.0, 1], [0, 0], [-0.0, 2], [0.0, 1]])
    check(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True), x)
    runs = torch.tensor([[3, float("nan")], [3, float("nan")], [1, 2]])
    check(lambda t: torch.ops.aten.unique_dim_consecutive(t, 0, True, True),
          runs)
    # NaN slices, empty, 0-d and bad dims: the CPU decides
    check(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True),
          runs, native=False)
    check(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True),
          torch.ones(0, 2), native=False)
    check_error(lambda t: torch.ops.aten.unique_dim(t, 3, True, True, True),
                torch.ones(2, 2))
    check_error(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True),
                torch.tensor(1.0))


def test_unique_out():
    x = torch.randint(0, 5, (20,))

    def fn(t):
        outs = [torch.empty(0, dtype=t.dtype, device=t.device),
                torch.empty(0, dtype=torch.long, device=t.device),
                torch.empty(0, dtype=torch.long, device=t.device)]
        torch.ops.aten._unique2.out(t, True, True, True, out0=outs[0],
                                    out1=outs[1], out2=outs[2])
        return outs
    check(fn, x)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_nonzero_masked_select(dtype):
    z = torch.randn(4, 5, dtype=dtype)
    z[z.real > 0.3] = 0
    z[0, 0] = complex(0, 1)  # zero real part, nonzero imaginary
    z[1, 1] = complex(2, 0)
    check(torch.nonzero, z)
    check(lambda t: torch.nonzero(t, as_tuple=False), z[:, 1:].t())
    m = torch.rand(4, 5) > 0.5
    check(torch.masked_select, z, m)
    check(torch.masked_select, z, m[0])


# ----------------------------- masked_scatter ---------------------------


MDTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
           torch.int64, torch.int16, torch.uint8, torch.bool,
           torch.complex64, torch.complex128]


def make_any(shape, dtype):
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return make(shape, dtype)


@pytest.mark.parametrize("dtype", MDTYPES)
def test_masked_scatter(dtype):
    x = make_any((5, 5), dtype)
    src = make_any((5, 6), dtype)
    for mshape in [(5, 5), (5,), ()]:
        m = torch.rand(mshape) > 0.4
        check(lambda a, b, c: a.masked_scatter(b, c), x, m, src)
        check(lambda a, b, c: a.clone().masked_scatter_(b, c), x, m, src)
    # self broadcast to the mask's shape (out of place only)
    check(lambda a, b, c: a.masked_scatter(b, c), x[0], torch.rand(5, 5) > 0.5,
          src)
    # non-contiguous self, mask, source
    check(lambda a, b, c: a.masked_scatter(b, c), x.t(),
          (torch.rand(5, 5) > 0.5).t(), src.t())
    out = torch.empty(0, dtype=dtype)
    check(lambda a, b, c, o: torch.ops.aten.masked_scatter.out(a, b, c, out=o),
          x, torch.rand(5, 5) > 0.5, src, out)


def test_masked_scatter_errors():
    ones = torch.ones(5, dtype=torch.bool)
    check_error(lambda a, b, c: a.masked_scatter(b, c), torch.zeros(5), ones,
                torch.ones(3))
    check_error(lambda a, b, c: a.masked_scatter(b, c), torch.zeros(5), ones,
                torch.ones(0))
    check(lambda a, b, c: a.masked_scatter(b, c), torch.zeros(5), ~ones,
          torch.ones(0))
    check_error(lambda a, b, c: a.clone().masked_scatter_(b, c),
                torch.zeros(2, 1), torch.tensor([True, False, True]),
                torch.arange(10.0))
    check_error(lambda a, b, c: a.masked_scatter(b, c), torch.zeros(5),
                ones.float(), torch.ones(5))
    check_error(lambda a, b, c: a.masked_scatter(b, c), torch.zeros(5), ones,
                torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_scatter(dtype):
    x = torch.randn(3, 4, dtype=dtype)
    s = torch.randn(3, 4, dtype=dtype)
    i = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1]])
    check(lambda a, b, c: a.scatter(0, b, c), x, i, s)
    check(lambda a, b, c: a.clone().scatter_(0, b, c), x, i, s)
    check(lambda a, b, c: a.scatter(0, b, c, reduce="add"), x, i, s,
          exact=False)
    check(lambda a, b, c: a.scatter(0, b, c, reduce="multiply"), x, i, s,
          exact=False)
    check(lambda a, b: a.scatter(1, b, 2.5), x, i)
