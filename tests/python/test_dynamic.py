"""Ops whose result shape depends on the data (nonzero, masked_select,
boolean-mask indexing) run natively in two programs: one counts, the host
waits for the count, the second builds the result."""

import pytest
import torch

import tpuc


@pytest.fixture
def native_only():
    tpuc.fallback_reset()
    yield
    assert not tpuc.fallback_report()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_nonzero_and_masked_select(native_only, dtype):
    torch.manual_seed(0)
    x = (torch.randn(5, 4, 3) * 2).to(dtype)
    d = x.to("tpu")
    assert torch.equal(torch.nonzero(d).cpu(), torch.nonzero(x))
    assert torch.equal(torch.nonzero(d, as_tuple=True)[1].cpu(), torch.nonzero(x, as_tuple=True)[1])
    mask = torch.randn(4, 3) > 0
    assert torch.equal(torch.masked_select(d, mask.to("tpu")).cpu(), torch.masked_select(x, mask))
    assert torch.nonzero(torch.zeros(3, 2, device="tpu")).shape == (0, 2)
    assert torch.nonzero(torch.tensor(2.0, device="tpu")).shape == (1, 0)


def test_boolean_mask_indexing(native_only):
    torch.manual_seed(1)
    x = torch.randn(6, 5)
    m = x > 0
    d, dm = x.to("tpu"), m.to("tpu")
    assert torch.equal(d[dm].cpu(), x[m])
    assert torch.equal(d[:, dm[0]].cpu(), x[:, m[0]])
    assert torch.equal(d[dm[:, 0], 1:].cpu(), x[m[:, 0], 1:])
    y, e = x.clone(), d.clone()
    y[m] = 0.0
    e[dm] = 0.0
    assert torch.equal(e.cpu(), y)
    vals = torch.arange(float(m.sum()))
    y[m] = vals
    e[dm] = vals.to("tpu")
    assert torch.equal(e.cpu(), y)
    y[m] += 1.0
    e[dm] += 1.0
    assert torch.equal(e.cpu(), y)


def test_mask_shape_errors_match_cpu():
    for dev in ("cpu", "tpu"):
        x = torch.randn(6, 5, device=dev)
        with pytest.raises(IndexError, match="shape of the mask"):
            x[torch.ones(3, dtype=torch.bool, device=dev)]
