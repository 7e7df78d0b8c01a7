"""torch.optim on tpu: twelve optimizers (all but LBFGS, which takes a
closure, and SparseAdam, which needs sparse tensors) in their for-loop,
foreach and fused forms take three steps with the CPU's results, natively (no CPU
fallback); the fused ones (Adam, AdamW, SGD, Adagrad) also with a
GradScaler's grad_scale and found_inf, a tensor learning rate, and a
skipped step."""

import pytest
import torch

import tpuc

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.2, maximize=True)),
    ("SGD", dict(lr=0.1)),
    ("Adam", dict(lr=1e-2, amsgrad=True)),
    ("Adam", dict(lr=1e-2, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=1e-2)),
    ("Adamax", dict(lr=1e-2)),
    ("NAdam", dict(lr=1e-2, decoupled_weight_decay=True, weight_decay=0.1)),
    ("RAdam", dict(lr=1e-2)),
    ("Adagrad", dict(lr=1e-2, lr_decay=0.1, weight_decay=0.05)),
    ("Adagrad", dict(lr=1e-2, maximize=True)),
    ("Adadelta", dict(lr=1.0)),
    ("RMSprop", dict(lr=1e-2, momentum=0.5, centered=True)),
    ("Rprop", dict(lr=1e-2)),
    ("ASGD", dict(lr=1e-2)),
    ("Adafactor", dict(lr=1e-2)),
]
FUSED = {"SGD", "Adam", "AdamW", "Adagrad"}


def train(dev, name, kw, steps=3, scaler=None, inf_at=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 3)).to(dev)
    x = torch.randn(10, 8).to(dev)
    y = torch.randn(10, 3).to(dev)
    opt = getattr(torch.optim, name)(model.parameters(), **kw)
    sc = torch.amp.GradScaler(dev, init_scale=1024.0) if scaler else None
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x * (float("inf") if step == inf_at else 1.0)), y)
        if sc is None:
            loss.backward()
            opt.step()
        else:
            sc.scale(loss).backward()
            sc.step(opt)
            sc.update()
    return [p.detach().cpu() for p in model.parameters()]


def impls(name):
    out = ["for-loop", "foreach"]
    if name in FUSED:
        out.append("fused")
    return out


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}{w}" for k, w in v.items()))
def test_optimizers_match_the_cpu_natively(mode, name, kw):
    for impl in impls(name):
        extra = {"for-loop": dict(foreach=False), "foreach": dict(foreach=True),
                 "fused": dict(fused=True)}[impl]
        want = train("cpu", name, {**kw, **extra})
        tpuc.fallback_reset()
        with torch.tpu.eager_mode(mode):
            got = train("tpu", name, {**kw, **extra})
        assert tpuc.fallback_report() == {}, (impl, tpuc.fallback_report())
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=f"{name} {impl}")


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("SGD", dict(lr=0.1, weight_decay=0.1)),
    ("Adam", dict(lr=1e-2)), ("AdamW", dict(lr=1e-2, amsgrad=True)),
    ("Adagrad", dict(lr=1e-2, weight_decay=0.1))])
def test_fused_steps_with_a_grad_scaler_and_a_tensor_lr(name, kw):
    # The scaler hands the fused kernels grad_scale and found_inf: the
    # gradients are unscaled in place, and the overflowing step (1) changes
    # nothing, as on the CPU.
    for lr in (kw["lr"], torch.tensor(kw["lr"])):
        want = train("cpu", name, {**kw, "lr": lr, "fused": True}, steps=4, scaler=True, inf_at=1)
        tpuc.fallback_reset()
        got = train("tpu", name, {**kw, "lr": lr, "fused": True}, steps=4, scaler=True, inf_at=1)
        assert not [k for k in tpuc.fallback_report() if "fused" in k or "amp" in k], \
            tpuc.fallback_report()
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_fused_sgd_keeps_infinite_parameters_without_weight_decay():
    # weight_decay=0 and momentum=0 are skipped, not multiplied by 0 (an
    # infinite parameter stays infinite, as on the CPU, not NaN).
    for dev in ("cpu", "tpu"):
        p = torch.nn.Parameter(torch.tensor([float("inf"), 1.0], device=dev))
        p.grad = torch.tensor([1.0, 2.0], device=dev)
        torch.optim.SGD([p], lr=0.5, fused=True).step()
        assert p.detach().cpu().tolist() == [float("inf"), 0.0], dev
