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
