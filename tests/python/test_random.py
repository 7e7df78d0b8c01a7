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
