"""Native FFT lowerings (src/ops/fft.c): aten::_fft_r2c / _fft_c2r /
_fft_c2c and the torch.fft functions built on them agree with the CPU
(dtypes, every normalization, both directions, one- and two-sided, more
than three transformed dims, non-contiguous inputs, out=) without the CPU
fallback; calls the CPU rejects still fail."""

import pytest
import torch

import tpuc

REAL = [torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]
DIMS = [[2], [1], [0, 2], [2, 0], [0, 1, 2], [0, 1, 2, 3]]


def make(shape, dtype):
    torch.manual_seed(0)
    return torch.randn(shape, dtype=dtype)


def tol(dtype):
    if dtype in (torch.float64, torch.complex128):
        return dict(rtol=1e-10, atol=1e-10)
    return dict(rtol=1e-4, atol=1e-4)


def same(dev, cpu):
    assert dev.device.type == "tpu"
    assert dev.dtype == cpu.dtype, (dev.dtype, cpu.dtype)
    assert dev.shape == cpu.shape, (dev.shape, cpu.shape)
    torch.testing.assert_close(dev.cpu(), cpu, **tol(cpu.dtype))


def check_native(fn, x, **kw):
    cpu = fn(x, **kw)
    tpuc.fallback_reset()
    dev = fn(x.to("tpu"), **kw)
    same(dev, cpu)
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("forward", [True, False])
def test_c2c(dtype, dims, norm, forward):
    x = make((3, 4, 5, 2), dtype)
    check_native(lambda t: torch._fft_c2c(t, dims, norm, forward), x)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("onesided", [True, False])
def test_r2c(dtype, dims, norm, onesided):
    x = make((3, 4, 6, 2), dtype)
    check_native(lambda t: torch._fft_r2c(t, dims, norm, onesided), x)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("last", [6, 7])
def test_c2r(dtype, dims, norm, last):
    shape = [3, 4, 5, 2]
    shape[dims[-1]] = last // 2 + 1
    x = make(shape, dtype)
    check_native(lambda t: torch._fft_c2r(t, dims, norm, last), x)


@pytest.mark.parametrize("norm", [None, "ortho", "forward", "backward"])
@pytest.mark.parametrize(
    "name",
    ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "irfft", "irfft2",
     "irfftn", "hfft"],
)
def test_public_complex_input(name, norm):
    x = make((2, 5, 6), torch.complex64)
    check_native(getattr(torch.fft, name), x, norm=norm)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize(
    "name", ["fft", "ifft", "rfft", "rfft2", "rfftn", "ihfft"]
)
def test_public_real_input(name, norm):
    x = make((2, 5, 6), torch.float64)
    check_native(getattr(torch.fft, name), x, norm=norm)


def test_many_dims_and_sizes():
    # More than three transformed dims take several stablehlo.fft steps.
    x = make((2, 3, 4, 5, 3), torch.complex128)
    check_native(torch.fft.fftn, x)
    check_native(torch.fft.ifftn, x)
    check_native(torch.fft.irfftn, x)
    check_native(torch.fft.hfftn, x, dim=(0, 1, 2, 4))
    check_native(torch.fft.rfftn, x.real.contiguous())
    check_native(torch.fft.irfft, x, n=5, dim=3)  # slices the bins
    check_native(torch.fft.fft, make((1, 1), torch.complex64))


def test_noncontiguous():
    x = make((4, 6, 5), torch.complex64)
    check_native(lambda t: torch.fft.fft(t.transpose(0, 2), dim=1), x)
    check_native(lambda t: torch.fft.ifft2(t[:, ::2]), x)
    r = make((6, 8), torch.float32)
    check_native(lambda t: torch.fft.rfft(t.t()), r)


def test_out():
    x = make((3, 8), torch.complex64)
    r = make((3, 8), torch.float32)
    cases = [
        (lambda t, o: torch._fft_c2c(t, [1], 1, False, out=o), x,
         torch.complex64),
        (lambda t, o: torch._fft_c2r(t[:, :5], [1], 2, 8, out=o), x,
         torch.float32),
        (lambda t, o: torch._fft_r2c(t, [0, 1], 0, True, out=o), r,
         torch.complex64),
        (lambda t, o: torch.fft.fft(t, out=o), x, torch.complex64),
    ]
    for fn, inp, dt in cases:
        cpu_out = torch.empty(0, dtype=dt)
        cpu = fn(inp, cpu_out)
        dev_out = torch.empty(0, dtype=dt, device="tpu")
        tpuc.fallback_reset()
        dev = fn(inp.to("tpu"), dev_out)
        assert dev is dev_out
        same(dev_out, cpu_out)
        same(dev, cpu)
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()


def test_real_to_complex_conversion_path():
    # fft2 of a real tensor converts it to complex first (a device copy).
    x = make((3, 4, 6), torch.float32)
    for name in ["fft2", "ifftn", "irfft", "hfft2"]:
        f = getattr(torch.fft, name)
        same(f(x.to("tpu")), f(x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda c, r: torch._fft_r2c(r.half(), [0], 0, True),
        lambda c, r: torch._fft_c2c(c, [0, 0], 0, True),
        lambda c, r: torch._fft_c2r(c, [0], 0, 10),
        lambda c, r: torch._fft_r2c(r, [], 0, True),
        lambda c, r: torch.fft.fft(c, n=0),
        lambda c, r: torch.fft.rfft(c),
    ],
)
def test_errors_match_cpu(fn):
    c = make((8,), torch.complex64)
    r = make((8,), torch.float32)
    with pytest.raises(RuntimeError) as cpu_err:
        fn(c, r)
    with pytest.raises(RuntimeError) as dev_err:
        fn(c.to("tpu"), r.to("tpu"))
    first_line = str(cpu_err.value).split("\n")[0]
    assert str(dev_err.value).split("\n")[0] == first_line
