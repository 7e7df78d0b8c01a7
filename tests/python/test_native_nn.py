"""Neural-network ops with a native lowering (src/ops/nn.c): layer norm,
activations and their backwards, softmax backwards, losses. Each runs on
the device without the CPU fallback and agrees with the CPU: dtypes, shapes,
values, in-place and out= forms, non-contiguous inputs, errors."""

import pytest
import torch
import torch.nn.functional as F

import tpuc

FLOAT = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def tpu(x):
    return x.to("tpu") if isinstance(x, torch.Tensor) else x


def close(dev, cpu, **tol):
    devs = dev if isinstance(dev, (tuple, list)) else [dev]
    cpus = cpu if isinstance(cpu, (tuple, list)) else [cpu]
    assert len(devs) == len(cpus)
    for d, c in zip(devs, cpus):
        if c is None:  # an undefined result (output_mask)
            assert d is None
            continue
        assert d.device.type == "tpu"
        assert d.dtype == c.dtype and d.shape == c.shape, (d.dtype, c.dtype,
                                                           d.shape, c.shape)
        torch.testing.assert_close(d.cpu(), c, equal_nan=True, **tol)


def check_native(fn, *args, **tol):
    cpu = fn(*args)
    tpuc.fallback_reset()
    dev = fn(*[tpu(a) for a in args])
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()
    close(dev, cpu, **tol)


def rand(shape, dtype, scale=3.0):
    return (torch.randn(shape) * scale).to(dtype)


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
def test_layer_norm(dtype):
    x, w, b = rand((2, 3, 8), dtype), rand((3, 8), dtype), rand((3, 8), dtype)
    ln = torch.ops.aten.native_layer_norm
    check_native(lambda x, w, b: ln(x, [3, 8], w, b, 1e-5), x, w, b)
    check_native(lambda x: ln(x, [8], None, None, 1e-3), x)
    check_native(lambda x, w: F.layer_norm(x, [8], w), x, w[0])
    # non-contiguous input
    check_native(lambda x: ln(x.transpose(0, 1), [8], None, None, 1e-5), x)
    if dtype in (torch.bfloat16, torch.float16):
        # half input with f32 parameters: f32 statistics
        check_native(lambda x, w, b: ln(x, [8], w, b, 1e-5), x,
                     w[0].float(), b[0].float())


def test_layer_norm_out_and_errors():
    x, w = rand((4, 6), torch.float32), rand((6,), torch.float32)
    outs = [torch.empty(0, device="tpu") for _ in range(3)]
    tpuc.fallback_reset()
    torch.ops.aten.native_layer_norm.out(tpu(x), [6], tpu(w), None, 1e-5,
                                         out0=outs[0], out1=outs[1],
                                         out2=outs[2])
    assert tpuc.fallback_report() == {}
    close(outs, torch.ops.aten.native_layer_norm(x, [6], w, None, 1e-5))
    # shape errors come from the CPU, as there
    with pytest.raises(RuntimeError):
        F.layer_norm(tpu(x), [5])


ACTS = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 1.5),
    "relu6": F.relu6,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": lambda x: F.elu(x, 0.7),
    "selu": F.selu,
    "celu": F.celu,
    "softplus": lambda x: F.softplus(x, 2.0, 5.0),
    "logsigmoid": F.logsigmoid,
}


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
@pytest.mark.parametrize("name", list(ACTS))
def test_activation_forward_backward(name, dtype):
    x = rand((5, 7), dtype)
    x[0, :3] = torch.tensor([0.0, -3.0, 3.0], dtype=dtype)
    check_native(ACTS[name], x)
    if dtype == torch.float16:
        return
    # autograd runs the backward op on the device too
    g = rand((5, 7), dtype, 1.0)

    def grad(x, g):
        x = x.detach().requires_grad_()
        (gx,) = torch.autograd.grad(ACTS[name](x), x, g)
        return gx

    check_native(grad, x, g)


def test_gelu_extremes_and_erf_accuracy():
    x = torch.tensor([-40.0, -8.0, -5.5, -1.0, -0.5, 0.0, 1e-20, 0.5, 1.0,
                      2.5, 9.0, 1e30, -float("inf"), float("nan")])
    check_native(F.gelu, x)
    # (the CPU's vectorized f32 erf makes gelu(inf) NaN; f64 and the device
    # give inf)
    check_native(F.gelu, torch.cat([x, torch.tensor([float("inf")])]).double())
    xs = torch.linspace(-7, 7, 4001, dtype=torch.float64)
    check_native(F.gelu, xs, rtol=1e-13, atol=1e-15)
    check_native(F.gelu, xs.float())


def test_activation_inplace_and_out_forms():
    x = rand((4, 5), torch.float32)
    for fn in (lambda t: F.gelu(t.clone()), lambda t: torch.ops.aten.gelu_(t.clone()),
               lambda t: F.silu(t.clone(), inplace=True),
               lambda t: F.hardtanh(t.clone(), inplace=True),
               lambda t: F.leaky_relu(t.clone(), 0.1, inplace=True),
               lambda t: F.elu(t.clone(), inplace=True),
               lambda t: F.hardswish(t.clone(), inplace=True),
               lambda t: F.mish(t.clone(), inplace=True)):
        check_native(fn, x)
    # in place through a non-contiguous view
    def view_inplace(t):
        t = t.clone()
        F.silu(t.t(), inplace=True)
        return t

    check_native(view_inplace, x)
    out = torch.empty(4, 5, device="tpu")
    tpuc.fallback_reset()
    torch.ops.aten.gelu.out(tpu(x), approximate="tanh", out=out)
    assert tpuc.fallback_report() == {}
    close(out, F.gelu(x, approximate="tanh"))


def test_backward_ops_direct():
    g, x = rand((3, 4), torch.float32, 1.0), rand((3, 4), torch.float32)
    a = torch.ops.aten
    check_native(lambda g, x: a.threshold_backward(g, x, 0.5), g, x)
    check_native(lambda g, y: a.sigmoid_backward(g, y), g, x.sigmoid())
    check_native(lambda g, y: a.tanh_backward(g, y), g, x.tanh())
    check_native(lambda g, x: a.hardtanh_backward(g, x, -1.0, 2.0), g, x)
    check_native(lambda g, x: a.elu_backward(g, 1.0, 1.2, 0.8, False, x), g, x)
    check_native(lambda g, y: a.elu_backward(g, 1.0, 1.0, 1.0, True, y), g,
                 F.elu(x))
    check_native(lambda g, x: a.softplus_backward(g, x, 1.0, 20.0), g, x)
    # grad_output broadcast against self
    check_native(lambda g, x: a.silu_backward(g, x), g[0], x)
    for dt in FLOAT:
        gg, y = g.to(dt), x.softmax(1).to(dt)
        check_native(lambda g, y: a._softmax_backward_data(g, y, 1, y.dtype),
                     gg, y)
        check_native(lambda g, y: a._log_softmax_backward_data(g, y, 0, y.dtype),
                     gg, y.log())


def test_inplace_negative_slope_errors_like_cpu():
    for dev in ("cpu", "tpu"):
        x = torch.randn(4, requires_grad=True)
        y = F.leaky_relu_(x.to(dev) * 1, -0.1)
        with pytest.raises(RuntimeError, match="negative slope"):
            y.sum().backward()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_and_cross_entropy(reduction, dtype):
    x = torch.randn(6, 5).log_softmax(1).to(dtype)
    t = torch.tensor([1, 0, 4, -100, 2, 2])
    w = (torch.rand(5) + 0.5).to(dtype)
    check_native(lambda x, t: F.nll_loss(x, t, reduction=reduction), x, t)
    check_native(lambda x, t, w: F.nll_loss(x, t, w, reduction=reduction,
                                            ignore_index=2), x, t.clamp(min=0), w)
    check_native(lambda x, t: F.nll_loss(x[0], t[0], reduction=reduction), x, t)
    x4 = torch.randn(2, 3, 4, 5).log_softmax(1).to(dtype)
    t4 = torch.randint(0, 3, (2, 4, 5))
    check_native(lambda x, t: F.nll_loss(x, t, reduction=reduction), x4, t4)
    if dtype != torch.float64:
        return

    def grad(x, t, w):
        x = x.detach().requires_grad_()
        loss = F.nll_loss(x, t, w, reduction=reduction)
        (gx,) = torch.autograd.grad(loss, x, torch.ones_like(loss))
        return gx

    check_native(grad, x, t, w)
    check_native(grad, x4, t4, None)


def test_nll_loss_errors():
    x = torch.randn(3, 5).log_softmax(1)
    for bad in ([1, 9, 2], [1, -3, 2]):
        with pytest.raises(IndexError, match="out of bounds"):
            F.nll_loss(tpu(x), tpu(torch.tensor(bad)))
    # all targets ignored: 0 / 0 as on the CPU
    t = torch.full((3,), -100)
    check_native(lambda x, t: torch.ops.aten.nll_loss_forward(x, t, None, 1, -100),
                 x, t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses(reduction, dtype):
    a, b = rand((4, 6), dtype, 1.0), rand((4, 6), dtype, 1.0)
    p, q = a.float().sigmoid().to(dtype), b.float().sigmoid().to(dtype)
    w = torch.rand(6).to(dtype)
    losses = [
        (lambda a, b: F.mse_loss(a, b, reduction=reduction), a, b),
        (lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5), a, b),
        (lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.0), a, b),
        (lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.7), a, b),
        (lambda p, q: F.binary_cross_entropy(p, q, reduction=reduction), p, q),
        (lambda p, q, w: F.binary_cross_entropy(p, q, w, reduction=reduction),
         p, q, w),
    ]
    for fn, *args in losses:
        check_native(fn, *args)

        def grad(x, *rest):
            x = x.detach().requires_grad_()
            loss = fn(x, *rest)
            (gx,) = torch.autograd.grad(loss, x, torch.ones_like(loss))
            return gx

        check_native(grad, *args)


def test_loss_errors_like_cpu():
    x, y = torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(tpu(x), tpu(y))
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(tpu(x), tpu(y), beta=-1.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        F.huber_loss(tpu(x), tpu(y), delta=0.0)


def test_small_training_step_matches_cpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.GELU(),
                            torch.nn.Dropout(0.0), torch.nn.SiLU())
    x = torch.randn(5, 8)
    t = torch.tensor([0, 1, 2, 3, 1])
    loss = F.cross_entropy(m(x), t)
    loss.backward()
    ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m.to("tpu")
    tpuc.fallback_reset()
    loss_dev = F.cross_entropy(m(tpu(x)), tpu(t))
    loss_dev.backward()
    report = tpuc.fallback_report()
    # layer_norm's backward has a bool[] argument the binding does not
    # marshal yet: it alone may run on the CPU.
    report.pop("aten::native_layer_norm_backward", None)
    assert report == {}, report
    torch.testing.assert_close(loss_dev.cpu(), loss)
    for r, p in zip(ref, m.parameters()):
        torch.testing.assert_close(p.grad.cpu(), r)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.uint8], ids=str)
def test_integer_hardtanh(dtype):
    x = torch.arange(0 if dtype == torch.uint8 else -6, 9).to(dtype)
    check_native(F.relu6, x)
    if dtype != torch.uint8:
        check_native(lambda x: F.hardtanh(x, -1.5, 2.5), x)


CONVS = [
    (F.conv1d, (3, 4, 10), (4, 1, 3), dict(groups=4, padding=2)),
    (F.conv2d, (2, 4, 9, 8), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    (F.conv2d, (2, 3, 7, 7), (5, 3, 2, 3),
     dict(stride=(1, 2), padding=(0, 2), dilation=(2, 1))),
    (F.conv2d, (1, 2, 8, 8), (2, 2, 3, 3), dict(stride=3)),
    (F.conv3d, (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(stride=(2, 1, 1))),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_convolution(case, dtype):
    conv, xs, ws, kw = CONVS[case]
    x, w, b = rand(xs, dtype, 1.0), rand(ws, dtype, 1.0), rand(ws[:1], dtype, 1.0)
    tol = dict(atol=5e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    check_native(lambda x, w, b: conv(x, w, b, **kw), x, w, b, **tol)
    check_native(lambda x, w: conv(x, w, None, **kw), x, w, **tol)

    # autograd: convolution_backward has a bool[] argument the binding does
    # not marshal yet (CPU for now), but the gradients must agree
    def grads(x, w, b):
        x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
        y = conv(x, w, b, **kw)
        return torch.autograd.grad(y, (x, w, b), torch.ones_like(y))

    cpu = grads(x, w, b)
    dev = grads(tpu(x), tpu(w), tpu(b))
    close(dev, cpu, **(dict(atol=1e-1, rtol=2e-2) if dtype == torch.bfloat16
                       else {}))


def test_transposed_convolution_runs_on_cpu_correctly():
    x, w = torch.randn(2, 4, 5, 5), torch.randn(4, 3, 3, 3)
    fn = lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1)
    close(fn(tpu(x), tpu(w)), fn(x, w))


# ---- batch norm, group norm, pooling, upsampling, padding ----

A = torch.ops.aten
ALL_MASKS = [[True, True, True], [True, False, False], [False, True, True]]


def bn_legit(training, momentum=0.1, eps=1e-5):
    """_native_batch_norm_legit with its updated running stats returned."""

    def fn(x, w, b, rm, rv):
        rm, rv = rm.clone(), rv.clone()
        out = A._native_batch_norm_legit(x, w, b, rm, rv, training, momentum,
                                         eps)
        return list(out) + [rm, rv]

    return fn


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_forward(dtype, training):
    torch.manual_seed(0)
    x = rand((4, 3, 5, 6), dtype)
    w, b = rand((3,), dtype), rand((3,), dtype)
    rm, rv = rand((3,), dtype), (torch.rand(3) + 0.5).to(dtype)
    check_native(bn_legit(training), x, w, b, rm, rv)
    check_native(bn_legit(training, 0.3, 1e-3), x, None, None, rm, rv)
    # 2-d and 3-d inputs, non-contiguous (the CPU's strided path rounds
    # half floats differently)
    half_tol = {"atol": 2e-2, "rtol": 2e-2} if dtype in (
        torch.bfloat16, torch.float16) else {}
    check_native(bn_legit(training), x[:, :, 0, 0].contiguous(), w, b, rm, rv)
    check_native(bn_legit(training), x[:, :, 0, 0], w, b, rm, rv, **half_tol)
    check_native(bn_legit(training), x[:, :, 1].transpose(0, 2), None, b,
                 rm, rv, **half_tol)
    check_native(lambda x, rm, rv: A._native_batch_norm_legit_no_training(
        x, None, None, rm, rv, 0.1, 1e-5), x, rm, rv)
    if training:
        check_native(lambda x, w: A._native_batch_norm_legit.no_stats(
            x, w, None, True, 0.1, 1e-5), x, w)
    if dtype in (torch.bfloat16, torch.float16):
        # half input with f32 parameters and stats: f32 statistics
        f = [t.float() for t in (w, b, rm, rv)]
        check_native(bn_legit(training), x, *f)
        check_native(bn_legit(training), x, None, None, f[2], f[3])


def test_batch_norm_modules_update_running_stats_in_place():
    torch.manual_seed(0)
    x = rand((8, 4, 3, 3), torch.float32)
    for kw in ({}, {"momentum": None}, {"track_running_stats": False},
               {"affine": False}):
        cpu = torch.nn.BatchNorm2d(4, **kw)
        dev = torch.nn.BatchNorm2d(4, **kw).to("tpu")
        tpuc.fallback_reset()
        for _ in range(3):
            yc, yd = cpu(x), dev(tpu(x))
        cpu.eval()
        dev.eval()
        yc2, yd2 = cpu(x), dev(tpu(x))
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        close([yd, yd2], [yc, yc2])
        if cpu.running_mean is not None:
            close([dev.running_mean, dev.running_var, dev.num_batches_tracked],
                  [cpu.running_mean, cpu.running_var,
                   cpu.num_batches_tracked])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.bfloat16], ids=str)
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_backward(dtype, train):
    torch.manual_seed(0)
    g, x = rand((4, 3, 5, 2), dtype, 1.0), rand((4, 3, 5, 2), dtype)
    w = rand((3,), dtype)
    sm, si = rand((3,), dtype, 1.0), (torch.rand(3) + 0.5).to(dtype)
    rm, rv = rand((3,), dtype, 1.0), (torch.rand(3) + 0.5).to(dtype)
    for mask in ALL_MASKS:
        check_native(lambda g, x, w, rm, rv, sm, si: A.native_batch_norm_backward(
            g, x, w, rm, rv, sm, si, train, 1e-5, mask), g, x, w, rm, rv, sm,
            si)
    check_native(lambda g, x, rm, rv, sm, si: A.native_batch_norm_backward(
        g, x, None, rm, rv, sm, si, train, 1e-5, ALL_MASKS[0]), g, x, rm, rv,
        sm, si)


def test_batch_norm_autograd_and_masked_results():
    torch.manual_seed(0)
    x = rand((6, 3, 4, 4), torch.float32)
    w, b = rand((3,), torch.float32), rand((3,), torch.float32)

    def grads(x, w, b, need_x):
        x = x.detach().requires_grad_(need_x)
        w, b = w.detach().requires_grad_(), b.detach().requires_grad_()
        y = F.batch_norm(x, None, None, w, b, training=True)
        ins = [x, w, b] if need_x else [w, b]
        return torch.autograd.grad((y * y).sum(), ins)

    check_native(lambda x, w, b: grads(x, w, b, True), x, w, b, rtol=1e-4,
                 atol=1e-4)
    check_native(lambda x, w, b: grads(x, w, b, False), x, w, b, rtol=1e-4,
                 atol=1e-4)
    # the binding returns None for a masked-out result
    tpuc.fallback_reset()
    r = A.native_batch_norm_backward(tpu(x), tpu(x), tpu(w), None, None,
                                     tpu(w), tpu(b), True, 1e-5,
                                     [False, True, False])
    assert tpuc.fallback_report() == {}
    assert r[0] is None and r[2] is None and r[1].device.type == "tpu"


@pytest.mark.parametrize("dtype", FLOAT, ids=str)
def test_group_norm(dtype):
    torch.manual_seed(0)
    x = rand((2, 6, 4, 5), dtype)
    w, b = rand((6,), dtype), rand((6,), dtype)
    gn = A.native_group_norm
    check_native(lambda x, w, b: gn(x, w, b, 2, 6, 20, 3, 1e-5), x, w, b)
    check_native(lambda x: gn(x, None, None, 2, 6, 20, 6, 1e-3), x)
    check_native(lambda x: gn(x, None, None, 2, 6, 1, 2, 1e-5),
                 x[:, :, 0, 0].contiguous())
    if dtype in (torch.bfloat16, torch.float16):
        check_native(lambda x, w: gn(x, w, None, 2, 6, 20, 3, 1e-5), x,
                     w.float())
    if dtype == torch.float16:
        return
    mean, rstd = gn(x, None, None, 2, 6, 20, 3, 1e-5)[1:]
    g = rand((2, 6, 4, 5), dtype, 1.0)
    for mask in ALL_MASKS:
        check_native(lambda g, x, m, r, w: A.native_group_norm_backward(
            g, x, m, r, w, 2, 6, 20, 3, mask), g, x, mean, rstd, w)
    check_native(lambda g, x, m, r: A.native_group_norm_backward(
        g, x, m, r, None, 2, 6, 20, 3, [True, False, False]), g, x, mean,
        rstd)


def test_group_norm_module_autograd():
    x = rand((3, 8, 5), torch.float32)
    for affine in (True, False):
        torch.manual_seed(0)
        cpu = torch.nn.GroupNorm(4, 8, affine=affine)
        torch.manual_seed(0)
        dev = torch.nn.GroupNorm(4, 8, affine=affine).to("tpu")

        def run(m, x):
            x = x.detach().requires_grad_()
            y = m(x)
            params = [x] + list(m.parameters())
            return [y] + list(torch.autograd.grad((y * y).sum(), params))

        cpu_out = run(cpu, x)
        tpuc.fallback_reset()
        dev_out = run(dev, tpu(x))
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        close(dev_out, cpu_out, rtol=1e-4, atol=1e-4)


POOLS = [  # kernel, stride, padding, dilation, ceil_mode
    ([2, 2], [], [0, 0], [1, 1], False),
    ([3, 3], [2, 2], [1, 1], [1, 1], True),
    ([3, 2], [2, 1], [1, 0], [2, 1], False),
    ([2, 2], [3, 3], [1, 1], [1, 1], True),
    ([3], [1], [1], [1], False),
]


@pytest.mark.parametrize("case", range(len(POOLS)))
def test_max_pool2d(case):
    args = POOLS[case]
    torch.manual_seed(0)
    x = rand((2, 3, 9, 11), torch.float32)
    x[0, 0, 1, 1:3] = float("nan")
    x[1, 1, :3, :3] = float("-inf")
    x[1, 2, 4, :] = x[1, 2, 5, :]  # ties
    mp = A.max_pool2d_with_indices
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.int32):
        xx = x.nan_to_num(0.0, 100.0, -100.0).to(dt) if dt == torch.int32 \
            else x.to(dt)
        check_native(lambda x: mp(x, *args), xx)
    check_native(lambda x: mp(x, *args), x[0].transpose(1, 2))  # 3-d, strided
    out, idx = mp(x, *args)
    g = rand(out.shape, torch.float32, 1.0)
    check_native(lambda g, x, i: A.max_pool2d_with_indices_backward(
        g, x, *args, i), g, x, idx)


@pytest.mark.parametrize("case", range(len(POOLS)))
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor", [None, 5])
def test_avg_pool2d(case, count_include_pad, divisor):
    k, s, p, _, ceil = POOLS[case]
    torch.manual_seed(0)
    x = rand((2, 3, 9, 11), torch.float32)
    extra = (ceil, count_include_pad, divisor)
    check_native(lambda x: A.avg_pool2d(x, k, s, p, *extra), x)
    check_native(lambda x: A.avg_pool2d(x, k, s, p, *extra), x[0].bfloat16())
    out = A.avg_pool2d(x, k, s, p, *extra)
    g = rand(out.shape, torch.float32, 1.0)
    check_native(lambda g, x: A.avg_pool2d_backward(g, x, k, s, p, *extra),
                 g, x)


def test_pool_modules_1d_out_and_errors():
    torch.manual_seed(0)
    x = rand((2, 3, 12), torch.float32)
    # the 1-d pools reach the device as the 2-d ops
    for m in (torch.nn.MaxPool1d(3, 2, 1), torch.nn.AvgPool1d(3, 2, 1),
              torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(2, ceil_mode=True)):
        xx = x if "1d" in type(m).__name__ else x.view(2, 3, 3, 4)

        def grad(x):
            x = x.detach().requires_grad_()
            y = m(x)
            return [y] + list(torch.autograd.grad((y * y).sum(), x))

        check_native(grad, xx)
    x4 = x.view(2, 3, 3, 4)
    outs = [torch.empty(0, device="tpu"),
            torch.empty(0, device="tpu", dtype=torch.long)]
    tpuc.fallback_reset()
    A.max_pool2d_with_indices.out(tpu(x4), [2, 2], out=outs[0],
                                  indices=outs[1])
    o = torch.empty(0, device="tpu")
    A.avg_pool2d.out(tpu(x4), [2, 2], out=o)
    assert tpuc.fallback_report() == {}
    close(outs, A.max_pool2d_with_indices(x4, [2, 2]))
    close(o, A.avg_pool2d(x4, [2, 2]))
    # bad windows are the CPU's errors
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(tpu(x4), 3, padding=2)
    with pytest.raises(RuntimeError):
        F.avg_pool2d(tpu(x4), 5)


@pytest.mark.parametrize("size", [[1, 1], [3, 3], [4, 5], [9, 11], [7, 3],
                                  [12, 13]], ids=str)
def test_adaptive_pools(size):
    torch.manual_seed(0)
    x = rand((2, 3, 9, 11), torch.float32)
    for dt in (torch.float32, torch.float64, torch.bfloat16):
        check_native(lambda x: A._adaptive_avg_pool2d(x, size), x.to(dt))
        check_native(lambda x: A.adaptive_max_pool2d(x, size), x.to(dt))
    xn = x.clone()
    xn[0, 0, 1, 1:3] = float("nan")
    xn[1, 1, :3, :3] = float("-inf")
    check_native(lambda x: A.adaptive_max_pool2d(x, size), xn)
    check_native(lambda x: A._adaptive_avg_pool2d(x, size), x[0].transpose(1, 2))
    g = rand((2, 3, *size), torch.float32, 1.0)
    check_native(lambda g, x: A._adaptive_avg_pool2d_backward(g, x), g, x)
    idx = A.adaptive_max_pool2d(x, size)[1]
    check_native(lambda g, x, i: A.adaptive_max_pool2d_backward(g, x, i), g,
                 x, idx)


UPSAMPLES = [([18, 22], None), ([9, 11], None), ([5, 7], None),
             ([20, 25], None), ([13, 17], (1.5, 1.6))]


@pytest.mark.parametrize("case", range(len(UPSAMPLES)))
def test_upsample(case):
    size, sc = UPSAMPLES[case]
    sc = sc or (None, None)
    torch.manual_seed(0)
    x = rand((2, 3, 9, 11), torch.float32)
    for dt in (torch.float32, torch.float64, torch.bfloat16):
        check_native(lambda x: A.upsample_nearest2d(x, size, *sc), x.to(dt))
        check_native(lambda x: A._upsample_nearest_exact2d(x, size, *sc),
                     x.to(dt))
        for align in (True, False):
            check_native(lambda x: A.upsample_bilinear2d(x, size, align, *sc),
                         x.to(dt))
    g = rand((2, 3, *size), torch.float32, 1.0)
    inp = [2, 3, 9, 11]
    check_native(lambda g: A.upsample_nearest2d_backward(g, size, inp, *sc),
                 g)
    check_native(lambda g: A._upsample_nearest_exact2d_backward(
        g, size, inp, *sc), g)
    for align in (True, False):
        check_native(lambda g: A.upsample_bilinear2d_backward(
            g, size, inp, align, *sc), g)


def test_interpolate_modules():
    torch.manual_seed(0)
    x = rand((2, 3, 6, 7), torch.float32)
    for kw in ({"scale_factor": 2}, {"scale_factor": 1.7},
               {"size": (10, 9)}, {"scale_factor": 2.5, "mode": "bilinear"},
               {"size": (4, 5), "mode": "bilinear", "align_corners": True},
               {"scale_factor": 1.5, "mode": "nearest-exact"}):

        def grad(x):
            x = x.detach().requires_grad_()
            y = F.interpolate(x, **kw)
            return [y] + list(torch.autograd.grad((y * y).sum(), x))

        check_native(grad, x)
    check_native(lambda x: F.interpolate(x, scale_factor=3), x[0])
    check_native(lambda x: F.interpolate(x, scale_factor=2), x[None])


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_reflection_replication_pad(mode):
    torch.manual_seed(0)
    x = rand((2, 3, 5, 6), torch.float32)
    for pad in ((1, 2), (4, 0), (2, 3, 1, 4), (0, 0, 3, 0)):
        ins = (x[0], x[0, 0]) if len(pad) == 2 else (x, x[0], x.transpose(2, 3))
        for xx in ins:
            check_native(lambda x: F.pad(x, pad, mode=mode), xx)
            check_native(lambda x: F.pad(x, pad, mode=mode), xx.int())

            def grad(x):
                x = x.detach().requires_grad_()
                y = F.pad(x, pad, mode=mode)
                return torch.autograd.grad((y * y).sum(), x)

            check_native(grad, xx)
    if mode == "replicate":  # negative padding crops
        check_native(lambda x: F.pad(x, (-2, 1, 1, -3), mode=mode), x)
    with pytest.raises(RuntimeError):
        F.pad(tpu(x), (6, 0), mode="reflect")


def test_small_cnn_trains_natively():
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(), torch.nn.Linear(16, 10))

    torch.manual_seed(0)
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    results = []
    for dev in ("cpu", "tpu"):
        m = make().to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        tpuc.fallback_reset()
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(m(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        m.eval()
        out = m(x.to(dev))
        if dev == "tpu":
            assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        results.append([torch.stack(losses), out, m[1].running_mean,
                        m[1].running_var])
    close(results[1], results[0], rtol=1e-4, atol=1e-4)
