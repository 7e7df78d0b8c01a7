"""Ops on the device agree with the CPU (most run through the CPU fallback
in this version), autograd works end to end, RNG is reproducible, bad input
raises what PyTorch raises, and the fallback is counted and controllable."""

import pytest
import torch

import tpuc


def both(fn, *tensors):
    cpu = fn(*tensors)
    dev = fn(*[t.to("tpu") for t in tensors])
    return cpu, dev


@pytest.mark.parametrize("name,fn", [
    ("add", lambda a, b: a + b),
    ("matmul", lambda a, b: a @ b.T),
    ("softmax", lambda a, b: torch.softmax(a, -1)),
    ("layer_norm", lambda a, b: torch.nn.functional.layer_norm(a, (5,))),
    ("cumsum", lambda a, b: a.cumsum(1)),
    ("sort", lambda a, b: a.sort(1).values),
    ("where", lambda a, b: torch.where(a > b, a, b)),
    ("index", lambda a, b: a[torch.tensor([2, 0])]),
    ("gelu", lambda a, b: torch.nn.functional.gelu(a)),
    ("cat", lambda a, b: torch.cat([a, b], 0)),
])
def test_op_matches_cpu(name, fn):
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    cpu, dev = both(fn, a, b)
    assert dev.device.type == "tpu"
    torch.testing.assert_close(dev.cpu(), cpu)


def test_inplace_and_out_variants():
    x = torch.randn(6)
    t = x.to("tpu")
    t.mul_(2).add_(1)
    torch.testing.assert_close(t.cpu(), x * 2 + 1)
    out = torch.empty(6, device="tpu")
    torch.exp(t, out=out)
    torch.testing.assert_close(out.cpu(), torch.exp(x * 2 + 1))
    v = t[2:4]
    v.zero_()
    assert t.cpu()[2:4].abs().sum().item() == 0


def test_autograd_mlp_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                torch.nn.Linear(16, 2))
    x, y = torch.randn(5, 8), torch.randint(0, 2, (5,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    cpu_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.tpu()
    loss_t = torch.nn.functional.cross_entropy(model(x.tpu()), y.tpu())
    loss_t.backward()
    torch.testing.assert_close(loss_t.cpu(), loss)
    for p, g in zip(model.parameters(), cpu_grads):
        assert p.grad.is_tpu
        torch.testing.assert_close(p.grad.cpu(), g)


def test_adamw_steps_match_cpu():
    def run(device):
        torch.manual_seed(1)
        m = torch.nn.Linear(4, 3).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=0.1)
        x = torch.randn(8, 4)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = m(x.to(device)).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses
    torch.testing.assert_close(torch.tensor(run("tpu")), torch.tensor(run("cpu")))


def test_rng_reproducible():
    torch.manual_seed(123)
    a = torch.randn(10, device="tpu").cpu()
    torch.manual_seed(123)
    b = torch.randn(10, device="tpu").cpu()
    assert torch.equal(a, b)
    g = torch.Generator(device="tpu").manual_seed(7)
    c = torch.rand(5, device="tpu", generator=g).cpu()
    g.manual_seed(7)
    assert torch.equal(c, torch.rand(5, device="tpu", generator=g).cpu())
    state = torch.tpu.get_rng_state()
    d = torch.randn(3, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(d, torch.randn(3, device="tpu").cpu())


def test_mixed_devices_raise():
    a = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError, match="same device"):
        torch.where(a > 0, a, torch.ones(3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, torch.ones(3)])
    # CPU scalars and CPU indices are allowed, as on CUDA.
    assert (a * torch.tensor(2.0)).sum().item() == 6.0
    assert a[torch.tensor([0, 1])].shape == (2,)


def test_bad_input_matches_cpu_exceptions():
    a = torch.ones(3, device="tpu")
    with pytest.raises(IndexError):
        a[torch.tensor([5])]
    with pytest.raises(RuntimeError, match="size"):
        a + torch.ones(4, device="tpu")
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, device="tpu") @ torch.ones(2, 3, device="tpu")
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.empty(-1, device="tpu")


def test_fallback_report_and_error_mode():
    # The general eigendecomposition has no native lowering (it runs on
    # the CPU).
    tpuc.fallback_reset()
    x = (torch.randn(3, 3) + 4 * torch.eye(3)).to("tpu")
    torch.linalg.eig(x)
    torch.linalg.eig(x)
    report = tpuc.fallback_report()
    assert report.get("aten::linalg_eig", 0) == 2, report
    tpuc._C.set_fallback_mode("error")
    try:
        with pytest.raises(NotImplementedError, match="TPUC_FALLBACK=error"):
            torch.linalg.eig(x)
    finally:
        tpuc._C.set_fallback_mode("warn")
    with pytest.raises(ValueError, match="warn, silent or error"):
        tpuc._C.set_fallback_mode("sometimes")
