"""Random ops on the device: counter-based (seed, offset) generator state,
the same numbers for the same seed, sensible distributions, CPU-like
errors, and no CPU fallback."""

import pytest
import torch

import tpuc


@pytest.fixture
def native_only():
    tpuc.fallback_reset()
    yield
    assert not tpuc.fallback_report()


def test_same_seed_same_numbers_and_fresh_draws(native_only):
    torch.tpu.manual_seed(123)
    a = torch.rand(1000, device="tpu")
    b = torch.randn(1000, device="tpu")
    torch.tpu.manual_seed(123)
    assert torch.equal(a.cpu(), torch.rand(1000, device="tpu").cpu())
    assert torch.equal(b.cpu(), torch.randn(1000, device="tpu").cpu())
    assert not torch.equal(a.cpu(), torch.rand(1000, device="tpu").cpu())
    state = torch.tpu.get_rng_state()
    x = torch.rand(7, device="tpu")
    torch.tpu.set_rng_state(state)
    assert torch.equal(x.cpu(), torch.rand(7, device="tpu").cpu())
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    first = torch.randn(9, device="tpu", generator=g)
    assert g.get_offset() == 1
    g.manual_seed(5)
    assert torch.equal(first.cpu(), torch.randn(9, device="tpu", generator=g).cpu())


def _threefry2x32(k0, k1, c0, c1):
    """Threefry-2x32 with 20 rounds (Random123), in Python."""
    m = 0xFFFFFFFF
    ks = [k0, k1, 0x1BD11BDA ^ k0 ^ k1]
    x0, x1 = (c0 + k0) & m, (c1 + k1) & m
    rot = [13, 15, 26, 6, 17, 29, 16, 24]
    for r in range(20):
        x0 = (x0 + x1) & m
        x1 = (((x1 << rot[r % 8]) | (x1 >> (32 - rot[r % 8]))) & m) ^ x0
        if r % 4 == 3:
            j = r // 4 + 1
            x0 = (x0 + ks[j % 3]) & m
            x1 = (x1 + ks[(j + 1) % 3] + j) & m
    return x0, x1


def test_bits_are_threefry_2x32_20(native_only):
    # The reference implementation against Random123's known answers.
    assert _threefry2x32(0, 0, 0, 0) == (0x6B200159, 0x99BA4EFE)
    assert _threefry2x32(2**32 - 1, 2**32 - 1, 2**32 - 1, 2**32 - 1) == (0x1CB996FC, 0xBB002BE7)
    assert _threefry2x32(0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3) == (0xC4923A9C, 0x483DF7A0)

    # rand's float32 numbers are the top 23 bits of successive words: the
    # seed is the key, the n-th draw of a generator starts at counter
    # n * 2^32, and counter i gives words 2i and 2i + 1.
    def uniform(word):
        return (word >> 9) / 2.0**23

    for seed in (0, 12345, (7 << 32) | 99):
        g = torch.Generator(device="tpu")
        g.manual_seed(seed)
        for draw, n in enumerate((7, 2, 64)):
            got = torch.rand(n, device="tpu", generator=g).cpu().double().tolist()
            words = [w for i in range((n + 1) // 2)
                     for w in _threefry2x32(seed & 0xFFFFFFFF, seed >> 32, i, draw)]
            assert got == [uniform(w) for w in words[:n]], (seed, draw)


def test_distributions(native_only):
    torch.tpu.manual_seed(0)
    n = 200_000
    u = torch.rand(n, device="tpu").cpu()
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.01
    z = torch.randn(n, device="tpu", dtype=torch.float64).cpu()
    assert abs(z.mean().item()) < 0.01 and abs(z.std().item() - 1.0) < 0.01
    w = torch.empty(n, device="tpu").uniform_(-2, 3).cpu()
    assert -2 <= w.min() and w.max() < 3
    m = torch.empty(n, device="tpu").normal_(4.0, 0.5).cpu()
    assert abs(m.mean().item() - 4.0) < 0.01 and abs(m.std().item() - 0.5) < 0.01
    r = torch.randint(-3, 4, (n,), device="tpu").cpu()
    assert r.dtype == torch.int64 and r.min() == -3 and r.max() == 3
    assert torch.bincount(r + 3).min() > n / 7 * 0.9
    bern = torch.bernoulli(torch.full((n,), 0.25, device="tpu")).cpu()
    assert abs(bern.mean().item() - 0.25) < 0.01
    e = torch.empty(n, device="tpu").exponential_(2.0).cpu()
    assert abs(e.mean().item() - 0.5) < 0.01
    h = torch.randn(n, device="tpu", dtype=torch.bfloat16)
    assert h.dtype == torch.bfloat16 and abs(h.float().mean().item()) < 0.02


def test_dropout_forward_and_backward(native_only):
    torch.tpu.manual_seed(1)
    x = torch.ones(400, 250, device="tpu", requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.3, training=True)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.01
    vals = y.detach().cpu().unique()
    torch.testing.assert_close(vals, torch.tensor([0.0, 1 / 0.7]))
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), y.detach().cpu())
    same = torch.nn.functional.dropout(x, 0.3, training=False)
    assert torch.equal(same.detach().cpu(), x.detach().cpu())


def test_bad_arguments_match_cpu():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="std"):
            torch.empty(3, device=dev).normal_(0.0, -1.0)
        with pytest.raises(RuntimeError):
            torch.bernoulli(torch.full((3,), 1.5, device=dev))
        with pytest.raises(RuntimeError, match="from"):
            torch.empty(3, dtype=torch.long, device=dev).random_(5, 2)
        with pytest.raises(RuntimeError):
            torch.native_dropout(torch.ones(3, device=dev), 1.5, True)


def _ks(a, b):
    """Two-sample Kolmogorov-Smirnov statistic."""
    both = torch.cat([a, b]).sort().values
    cdf = lambda x: torch.searchsorted(x.sort().values, both, right=True).double() / x.numel()
    return (cdf(a) - cdf(b)).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gamma_samples_follow_the_cpus_distribution(native_only, dtype):
    # torch.distributions' Gamma, Beta and Dirichlet sample through
    # _standard_gamma (Marsaglia-Tsang, rejections repeated in a loop on the
    # device), which ran on the CPU. 20,000 draws per alpha against the
    # CPU's: KS statistic under 0.0195 (the 0.1 % critical value), the
    # boost below alpha 1 included.
    n = 20000
    for alpha in (0.3, 1.0, 2.5, 10.0):
        a = torch.full((n,), alpha, dtype=dtype)
        torch.manual_seed(7)
        s = torch._standard_gamma(a.to("tpu")).cpu()
        assert s.dtype == dtype and bool((s > 0).all())
        assert _ks(s.double(), torch._standard_gamma(a).double()) < 0.0195, alpha
        assert abs(s.double().mean().item() - alpha) < 5 * (alpha / n) ** 0.5
    # the same seed, the same samples; edge values as the CPU's formula
    # gives them (alpha 0: the smallest normal number); a NaN or negative
    # alpha never accepts: NaN
    torch.tpu.manual_seed(3)
    a = torch.tensor([0.0, 1e-3, 2.0, float("inf"), float("nan"), -1.0], dtype=dtype, device="tpu")
    x = torch._standard_gamma(a).cpu()
    torch.tpu.manual_seed(3)
    torch.testing.assert_close(x, torch._standard_gamma(a).cpu(), rtol=0, atol=0, equal_nan=True)
    assert x[0].item() == torch.finfo(dtype).tiny and 0 < x[1].item() < 1e-3
    assert x[3].item() == float("inf") and x[4:].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gamma_rsample_gradient_is_native(native_only, dtype):
    # Gamma.rsample's backward (_standard_gamma_grad) ran on the CPU. Its
    # three regions (the series for x < 0.8, the saddle point for alpha >
    # 8 with the polynomial near x = alpha, the rational fit) against the
    # CPU's values at the same (alpha, x): float32 exactly (both compute in
    # double), float64 within 1e-13 relative, for normal (not subnormal) x.
    g = torch.Generator().manual_seed(5)
    a = torch.cat([torch.rand(3000, generator=g, dtype=torch.float64) * 3 + 0.01,
                   torch.rand(3000, generator=g, dtype=torch.float64) * 50 + 8])
    x = torch._standard_gamma(a, generator=g)
    x[-1000:] = a[-1000:] * (0.85 + 0.3 * torch.rand(1000, generator=g, dtype=torch.float64))
    a, x = a.to(dtype), x.to(dtype)
    ref = torch._standard_gamma_grad(a, x)
    got = torch._standard_gamma_grad(a.to("tpu"), x.to("tpu")).cpu()
    tol = 0 if dtype == torch.float32 else 1e-13
    # (XLA's CPU code reads subnormal floats as 0: samples that small
    # differ; here 2 of 6000 float32 ones)
    normal = x.abs() >= torch.finfo(dtype).tiny
    assert normal.sum() > 5900
    torch.testing.assert_close(got[normal], ref[normal], rtol=tol, atol=0)
    # end to end: a Gamma's reparameterized sample has the CPU's gradient
    # for the sample it drew
    alpha = torch.tensor([0.5, 2.0, 9.0], dtype=dtype, device="tpu", requires_grad=True)
    s = torch.distributions.Gamma(alpha, 1.0).rsample((50,))
    s.sum().backward()
    cpu = torch._standard_gamma_grad(alpha.detach().cpu().expand(50, 3), s.detach().cpu()).sum(0)
    torch.testing.assert_close(alpha.grad.cpu(), cpu, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_beta_and_dirichlet_rsample_gradient_is_native(native_only, dtype):
    # Beta.rsample's and Dirichlet.rsample's backward (_dirichlet_grad) ran
    # on the CPU. Its four regions (series near x = 0 and x = 1 in the
    # dtype, the saddle point for large parameters and the rational fit in
    # double) against the CPU at the same points: float64 within 1e-11,
    # float32 within 1e-5 at 99 % of the points and 1e-3 at all (its series
    # run in float and cancel, where the CPU's digamma steps round
    # differently; most points agree exactly).
    g = torch.Generator().manual_seed(6)
    n = 6000
    al = torch.cat([torch.rand(n // 2, generator=g, dtype=torch.float64) * 3 + 0.05,
                    torch.rand(n // 2, generator=g, dtype=torch.float64) * 40 + 0.05])
    be = torch.cat([torch.rand(n // 2, generator=g, dtype=torch.float64) * 3 + 0.05,
                    torch.rand(n // 2, generator=g, dtype=torch.float64) * 40 + 0.05])
    x = torch._sample_dirichlet(torch.stack([al, be], -1), generator=g)[:, 0].clamp(1e-6, 1 - 1e-6)
    al, tot, x = al.to(dtype), (al + be).to(dtype), x.to(dtype)
    ref = torch._dirichlet_grad(x, al, tot)
    got = torch._dirichlet_grad(x.to("tpu"), al.to("tpu"), tot.to("tpu")).cpu()
    if dtype == torch.float64:
        torch.testing.assert_close(got, ref, rtol=1e-11, atol=0)
    else:
        rel = (got.double() - ref.double()).abs() / ref.double().abs()
        assert rel.max() < 1e-3 and (rel < 1e-5).double().mean() > 0.99, rel.max()
    # end to end: Beta's and Dirichlet's reparameterized samples backward
    a = torch.tensor([0.7, 3.0, 12.0], dtype=dtype, device="tpu", requires_grad=True)
    b = torch.tensor([2.0, 0.4, 9.0], dtype=dtype, device="tpu", requires_grad=True)
    s = torch.distributions.Beta(a, b).rsample((40,))
    s.sum().backward()
    assert bool(torch.isfinite(a.grad).all()) and bool(torch.isfinite(b.grad).all())
    conc = torch.tensor([0.5, 1.5, 4.0], dtype=dtype, device="tpu", requires_grad=True)
    torch.distributions.Dirichlet(conc).rsample((40,))[:, 0].sum().backward()
    assert bool(torch.isfinite(conc.grad).all())


def test_poisson_is_native(native_only):
    # torch.poisson (torch.distributions.Poisson.sample) ran on the CPU.
    # The CPU's two methods (Knuth's product of uniforms below rate 10,
    # Hormann's transformed rejection from 10), 20,000 draws per rate
    # against the CPU's: KS statistic under 0.0195 (the 0.1 % critical
    # value), the mean within 5 standard errors; integers; rate 0 gives 0.
    n = 20000
    for rate in (0.5, 4.0, 9.5, 10.0, 40.0, 1000.0):
        torch.manual_seed(11)
        s = torch.poisson(torch.full((n,), rate, device="tpu")).cpu()
        assert s.dtype == torch.float32 and bool((s == s.round()).all() and (s >= 0).all())
        assert _ks(s.double(), torch.poisson(torch.full((n,), rate)).double()) < 0.0195, rate
        assert abs(s.double().mean().item() - rate) < 5 * (rate / n) ** 0.5, rate
    assert torch.poisson(torch.zeros(7, device="tpu")).abs().sum().item() == 0
    # the same seed, the same draws; every float dtype
    torch.manual_seed(2)
    a = torch.poisson(torch.full((50,), 3.0, device="tpu")).cpu()
    torch.manual_seed(2)
    assert torch.equal(a, torch.poisson(torch.full((50,), 3.0, device="tpu")).cpu())
    for dt in (torch.float64, torch.float16, torch.bfloat16):
        x = torch.poisson(torch.full((1000,), 20.0, dtype=dt, device="tpu")).cpu()
        assert x.dtype == dt and abs(x.double().mean().item() - 20) < 1.0
    d = torch.distributions.Poisson(torch.tensor([2.0, 30.0], device="tpu")).sample((2000,))
    torch.testing.assert_close(d.mean(0).cpu(), torch.tensor([2.0, 30.0]), atol=0.6, rtol=0)


def test_poisson_bad_rate_raises_as_the_cpu():
    # A negative or NaN rate: the CPU's RuntimeError, the device usable.
    for bad in (-1.0, float("nan")):
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            torch.poisson(torch.tensor([1.0, bad], device="tpu"))
    assert torch.poisson(torch.ones(3, device="tpu")).cpu().shape == (3,)


def test_half_gamma_and_dirichlet(native_only):
    # Half dtypes (the CPU has none: CUDA's set), computed in float.
    for dt in (torch.float16, torch.bfloat16):
        s = torch._standard_gamma(torch.full((20000,), 2.5, dtype=dt, device="tpu")).float().cpu()
        assert abs(s.mean().item() - 2.5) < 0.06 and abs(s.var().item() - 2.5) < 0.25
    torch.manual_seed(0)
    for dt in (torch.float32, torch.float64):
        a = torch.tensor([[0.5, 2.0, 7.0]] * 20000, dtype=dt)
        s = torch._sample_dirichlet(a.to("tpu")).cpu()
        r = torch._sample_dirichlet(a)
        assert s.dtype == dt and bool(((s > 0) & (s < 1)).all())
        torch.testing.assert_close(s.sum(-1), torch.ones(20000, dtype=dt))
        for k in range(3):
            assert _ks(s[:, k].double(), r[:, k].double()) < 0.0195, k
    # The distributions draw with no fallback.
    d = torch.distributions
    beta = d.Beta(torch.tensor([2.0], device="tpu"), torch.tensor([3.0], device="tpu")).sample((5000,))
    assert abs(beta.mean().item() - 0.4) < 0.03
    dirichlet = d.Dirichlet(torch.tensor([1.0, 2.0, 3.0], device="tpu")).sample((5000,))
    torch.testing.assert_close(dirichlet.mean(0).cpu(), torch.tensor([1 / 6, 2 / 6, 3 / 6]), atol=0.02, rtol=0)
    gamma = d.Gamma(torch.tensor([3.0], device="tpu"), torch.tensor([2.0], device="tpu")).sample((5000,))
    assert abs(gamma.mean().item() - 1.5) < 0.06


def test_randperm_is_native(native_only):
    # torch.randperm(n, device="tpu") (shuffling, mixup) ran on the CPU: the
    # order of random 64-bit keys, every dtype the out= write casts to, the
    # same seed the same permutation, and each position equally likely.
    for n in (0, 1, 5, 1000):
        for dt in (torch.int64, torch.int32, torch.float32):
            p = torch.randperm(n, device="tpu", dtype=dt).cpu()
            assert p.dtype == dt and torch.equal(p.sort().values, torch.arange(n, dtype=dt))
    torch.manual_seed(4)
    a = torch.randperm(50, device="tpu").cpu()
    torch.manual_seed(4)
    assert torch.equal(a, torch.randperm(50, device="tpu").cpu())
    assert not torch.equal(a, torch.randperm(50, device="tpu").cpu())
    first = torch.stack([torch.randperm(4, device="tpu") for _ in range(2000)]).cpu()[:, 0]
    counts = torch.bincount(first, minlength=4).double()
    chi2 = ((counts - 500) ** 2 / 500).sum().item()
    assert chi2 < 16.3, counts  # 3 degrees of freedom, p = 0.001
