"""Mixed-precision training with torch.amp.GradScaler on tpu: its two ops,
_amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_, run on
the device (no CPU fallback, no host round trip per step) and give the
CPU's values bit for bit, in every eager mode."""

import pytest
import torch

import tpuc

FLOAT = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


@pytest.fixture(params=["strict", "fused"])
def mode(request):
    with torch.tpu.eager_mode(request.param):
        yield request.param


def grads_of(dtype):
    g = torch.Generator().manual_seed(1)
    big = (torch.randn(6, 5, generator=g) * 100).to(dtype)
    return [
        big,
        big.t(),  # a transposed view: written through in place
        torch.randn((), generator=g).to(dtype),
        torch.empty(0, 3, dtype=dtype),
        torch.randn(7, generator=g).to(dtype),
    ]


def unscale(grads, found, inv):
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    return grads, found


@pytest.mark.parametrize("dtype", FLOAT)
@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("inv", [0.25, 1.0, 3.0e-5])
def test_unscale_matches_the_cpu(mode, dtype, bad, inv):
    cpu = grads_of(dtype)[::2] + [grads_of(dtype)[1].clone()]
    cpu = [c.clone() for c in cpu]
    if bad is not None:
        cpu[-1][2, 1] = bad
    dev = [c.to("tpu") for c in cpu]
    found_c, found_d = torch.zeros(()), torch.zeros((), device="tpu")
    inv_c, inv_d = torch.full((), inv), torch.full((), inv, device="tpu")
    tpuc.fallback_reset()
    unscale(dev, found_d, inv_d)
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()
    unscale(cpu, found_c, inv_c)
    assert found_d.item() == found_c.item() == (0.0 if bad is None else 1.0)
    for d, c in zip(dev, cpu):
        assert d.dtype == c.dtype and d.shape == c.shape
        torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0, equal_nan=True)


def test_unscale_writes_views_in_place_and_never_clears_found_inf(mode):
    base = torch.randn(6, 5)
    dbase = base.to("tpu")
    view, dview = base.t()[1:4], dbase.t()[1:4]  # strided, at an offset
    found = torch.ones(1, device="tpu")  # an earlier group overflowed
    tpuc.fallback_reset()
    torch._amp_foreach_non_finite_check_and_unscale_([dview], found,
                                                     torch.full((1,), 0.5, device="tpu"))
    assert tpuc.fallback_report() == {}
    torch._amp_foreach_non_finite_check_and_unscale_([view], torch.ones(1),
                                                     torch.full((1,), 0.5))
    assert found.item() == 1.0
    assert torch.equal(dbase.cpu(), base)  # the rows outside the view too


# (scale, growth_tracker, found_inf, growth_factor, backoff_factor, interval)
UPDATES = [
    (65536.0, 0, 0.0, 2.0, 0.5, 2000),  # counts a clean step
    (65536.0, 1999, 0.0, 2.0, 0.5, 2000),  # grows, tracker resets
    (65536.0, 1500, 1.0, 2.0, 0.5, 2000),  # backs off, tracker resets
    (3.0e38, 4, 0.0, 2.0, 0.5, 5),  # growing would overflow: kept
    (1.0, 0, 0.0, 2.0, 0.5, 1),  # interval 1 grows every step
    (8.0, 2, 2.5, 3.0, 0.25, 7),  # any nonzero found_inf backs off
]


@pytest.mark.parametrize("case", UPDATES)
def test_update_scale_matches_the_cpu(mode, case):
    scale, tracker, found, grow, back, interval = case
    outs = {}
    for dev in ("cpu", "tpu"):
        s = torch.full((), scale, device=dev)
        t = torch.full((), tracker, dtype=torch.int32, device=dev)
        f = torch.full((), found, device=dev)
        tpuc.fallback_reset()
        r = torch._amp_update_scale_(s, t, f, grow, back, interval)
        if dev == "tpu":
            assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        assert r is s  # returns its first argument, updated in place
        outs[dev] = (s.item(), t.item())
    assert outs["tpu"] == outs["cpu"], outs


def test_bad_arguments_raise_pytorchs_errors():
    fi, inv = torch.zeros((), device="tpu"), torch.ones((), device="tpu")
    ints = [torch.ones(3, dtype=torch.int32, device="tpu")]
    with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
        torch._amp_foreach_non_finite_check_and_unscale_(ints, fi, inv)
    one = [torch.ones(3, device="tpu")]
    with pytest.raises(RuntimeError, match="found_inf must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(one, fi.double(), inv)
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            one, torch.zeros(2, device="tpu"), inv)
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(torch.ones((), device="tpu"),
                                 torch.zeros((), dtype=torch.int64, device="tpu"),
                                 fi, 2.0, 0.5, 2)
    with pytest.raises(RuntimeError, match="same device"):
        torch._amp_foreach_non_finite_check_and_unscale_(one, torch.zeros(()), inv)
    # The device is still usable.
    torch._amp_foreach_non_finite_check_and_unscale_(one, fi, inv * 0.5)
    assert one[0].cpu().tolist() == [0.5] * 3 and fi.item() == 0.0


def train(dev, steps, overflow_at):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(dev, init_scale=2.0**14, growth_interval=3)
    x = torch.randn(32, 16).to(dev)
    y = torch.randn(32, 4).to(dev)
    history = []
    for step in range(steps):
        with torch.autocast(dev, dtype=torch.float16):
            out = model(x * (6e4 if step == overflow_at else 1.0))
            loss = torch.nn.functional.mse_loss(out.float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        history.append((scaler.get_scale(), int(scaler._growth_tracker.item())))
    return history, loss.item(), [p.detach().cpu() for p in model.parameters()]


def test_gradscaler_training_matches_the_cpu(mode):
    # float16 autocast with a loss scale that grows every 3 clean steps and
    # backs off at an overflow (the step is skipped): the scale and tracker
    # follow the CPU's step for step, natively.
    cpu_hist, cpu_loss, cpu_params = train("cpu", 8, overflow_at=4)
    tpuc.fallback_reset()
    hist, loss, params = train("tpu", 8, overflow_at=4)
    assert not [k for k in tpuc.fallback_report() if "amp" in k], tpuc.fallback_report()
    assert hist == cpu_hist
    assert hist[4] == (cpu_hist[3][0] / 2, 0)  # the overflow backed off
    assert abs(loss - cpu_loss) < 1e-2 * max(1.0, abs(cpu_loss))
    for p, q in zip(params, cpu_params):
        torch.testing.assert_close(p, q, rtol=2e-2, atol=2e-3)
