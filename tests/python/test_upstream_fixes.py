"""Regression tests for what the libraries' own test suites found on tpu
(make test-upstream, tests/upstream/report.json): each bug fixed in tpuc
gets its test here, so `make test` keeps it fixed without the upstream
files."""

import pytest
import torch

DEV = "tpu"


def test_nonzero_out_must_be_long():
    # PyTorch's test_shape_ops.py::test_nonzero: a float out= raises.
    t = torch.tensor([1.0, 0.0, 2.0], device=DEV)
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(t, out=torch.empty([], dtype=torch.float, device=DEV))
    out = torch.empty([], dtype=torch.long, device=DEV)
    torch.nonzero(t, out=out)
    assert out.cpu().tolist() == [[0], [2]]


@pytest.mark.parametrize("shape", [[], [3]])
def test_out_on_the_cpu_is_refused_like_cuda(shape):
    # A CPU out= tensor for a tpu op raises PyTorch's device error, a 0-d
    # one too (0-d CPU tensors are allowed only as inputs).
    t = torch.tensor([1.0, 0.0, 2.0], device=DEV)
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.nonzero(t, out=torch.empty(shape, dtype=torch.long))
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.add(t, t, out=torch.empty(shape))
    # A 0-d CPU tensor as an input is still a scalar.
    assert (t * torch.tensor(2.0)).cpu().tolist() == [2.0, 0.0, 4.0]


def test_uint8_mask_indexing_warns_as_pytorch():
    # PyTorch's test_indexing.py::test_byte_mask: one deprecation warning
    # per uint8 mask, as on the CPU.
    import warnings

    v = torch.arange(5.0, device=DEV)
    mask = torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8, device=DEV)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = v[mask]
    assert len(w) == 1
    assert str(w[0].message).startswith("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.")
    assert got.cpu().tolist() == [0.0, 2.0, 3.0]


def test_views_of_up_to_25_dimensions():
    # PyTorch's test_view_ops.py::test_view views 18 dimensions.
    x = torch.arange(2**17, dtype=torch.float32, device=DEV).view(*([2] * 17))
    y = x.view(*([2] * 16 + [1, 2]))
    assert y.dim() == 18 and y.shape[-2:] == (1, 2)
    assert float(y.reshape(-1)[12345]) == 12345.0 and float((y * 2)[(1,) * 16 + (0, 1)]) == 2.0 * (2**17 - 1)
    z = torch.ones([1] * 25, device=DEV) * 3
    assert z.dim() == 25 and float(z.sum()) == 3.0
    with pytest.raises(RuntimeError, match="at most 25 dimensions"):
        torch.ones([1] * 26, device=DEV) * 3
