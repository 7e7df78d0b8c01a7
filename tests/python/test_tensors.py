"""Tensor model: copies both ways for every dtype, views sharing storage,
in-place writes through views, as_strided, resize_, set_, view(dtype),
0-size and 0-d tensors, item/tolist/print."""

import pytest
import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.bool, torch.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip(dtype):
    x = (torch.randn(5, 7) * 10).to(dtype)
    t = x.to("tpu")
    assert t.dtype == dtype and t.shape == x.shape
    assert torch.equal(t.cpu(), x)


def test_dtype_conversion_during_copy():
    x = torch.randn(4, 3)
    t = x.to("tpu", dtype=torch.float64)
    assert t.dtype == torch.float64
    assert torch.equal(t.cpu(), x.double())
    back = torch.empty(4, 3, dtype=torch.float16)
    back.copy_(t)
    assert torch.equal(back, x.half())


def test_views_share_storage_and_inplace_through_view():
    t = torch.zeros(3, 4, device="tpu")
    row = t[1]
    col = t[:, 2]
    row.copy_(torch.arange(4.0))
    col.copy_(torch.tensor([7.0, 8.0, 9.0]))
    expect = torch.zeros(3, 4)
    expect[1] = torch.arange(4.0)
    expect[:, 2] = torch.tensor([7.0, 8.0, 9.0])
    assert torch.equal(t.cpu(), expect)
    assert row.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()


def test_noncontiguous_and_strides():
    x = torch.randn(4, 5, 6)
    t = x.to("tpu")
    for f in [lambda a: a.transpose(0, 2), lambda a: a[:, 1:4, ::2],
              lambda a: a.permute(2, 0, 1)[1], lambda a: a.expand(2, 4, 5, 6)]:
        assert torch.equal(f(t).cpu(), f(x))
    assert torch.equal(t.transpose(1, 2).contiguous().cpu(),
                       x.transpose(1, 2).contiguous())


def test_as_strided_and_storage_offset():
    x = torch.arange(20.0)
    t = x.to("tpu")
    v = t.as_strided((3, 3), (5, 1), 2)
    assert v.storage_offset() == 2
    assert torch.equal(v.cpu(), x.as_strided((3, 3), (5, 1), 2))


def test_channels_last():
    x = torch.randn(2, 3, 4, 5)
    t = x.to("tpu").contiguous(memory_format=torch.channels_last)
    assert t.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(t.cpu(), x)


def test_resize_and_set():
    t = torch.arange(6.0, device="tpu")
    t.resize_(2, 3)
    assert torch.equal(t.cpu(), torch.arange(6.0).view(2, 3))
    t.resize_(4, 4)  # grows the storage, keeps the first elements
    assert t.shape == (4, 4)
    assert torch.equal(t.cpu().flatten()[:6], torch.arange(6.0))
    s = torch.empty(0, device="tpu")
    s.set_(t)
    assert s.shape == t.shape and torch.equal(s.cpu(), t.cpu())
    u = torch.empty(0, device="tpu")
    u.set_(t.untyped_storage(), 2, (3,), (1,))
    assert torch.equal(u.cpu(), t.cpu().flatten()[2:5])


def test_view_dtype():
    x = torch.randn(8)
    t = x.to("tpu")
    assert torch.equal(t.view(torch.int32).cpu(), x.view(torch.int32))
    assert torch.equal(t.view(torch.uint8).cpu(), x.view(torch.uint8))


def test_zero_size_and_scalar():
    e = torch.empty(0, 3, device="tpu")
    assert e.cpu().shape == (0, 3)
    s = torch.tensor(3.5).to("tpu")
    assert s.dim() == 0 and s.item() == 3.5
    assert torch.tensor([1, 2, 3]).to("tpu").tolist() == [1, 2, 3]
    assert "device='tpu:0'" in repr(torch.ones(2, device="tpu"))


@pytest.mark.parametrize("make", [
    lambda: torch.arange(12.).reshape(3, 4) / 7,
    lambda: torch.randn(3000, generator=torch.Generator().manual_seed(0)),  # summarized
    lambda: torch.randn(40, 50, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16),
    lambda: torch.tensor([[1, -2], [3, 4]], dtype=torch.int64),
    lambda: torch.tensor([True, False]),
    lambda: torch.tensor([1 + 2j, -0.5j]),
    lambda: torch.tensor([0.5, 1.0, 1e-8, float("inf"), float("nan")]),
    lambda: torch.tensor(2.5),
])
def test_printing_is_pytorchs_own(make, monkeypatch):
    # tpuc formats a tpu tensor's values from one host copy; the text is
    # what PyTorch's own formatter prints reading them on the device.
    import torch._tensor_str as tensor_str

    t = make().to("tpu")
    views = [t, (t * 2)[..., :1] if t.dim() > 0 else t * 2]
    fast = [repr(v) for v in views]
    monkeypatch.setattr(tensor_str, "_tensor_str", tensor_str._tensor_str._original)
    slow = [repr(v) for v in views]
    assert fast == slow
    assert all("device='tpu:0'" in f for f in fast)


def test_non_blocking_copy_and_second_device():
    x = torch.randn(16)
    t = x.to("tpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(t.cpu(), x)
    if torch.tpu.device_count() > 1:
        u = t.to("tpu:1")
        assert u.device.index == 1 and torch.equal(u.cpu(), x)


def test_save_and_load(tmp_path):
    t = torch.randn(3, 4, device="tpu")
    torch.save({"t": t}, tmp_path / "t.pt")
    on_cpu = torch.load(tmp_path / "t.pt", map_location="cpu")["t"]
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, t.cpu())
    back = torch.load(tmp_path / "t.pt", map_location="tpu")["t"]
    assert back.is_tpu and torch.equal(back.cpu(), t.cpu())


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="tpu does not support dtype"):
        torch.empty(3, dtype=torch.bits8, device="tpu")


@pytest.mark.parametrize("shape,perm", [
    ((2, 3, 2, 3, 2, 3, 2, 2), (7, 1, 5, 3, 4, 2, 6, 0)),  # one run merges
    ((2, 3, 2, 3, 2, 3, 2, 2), (7, 6, 5, 4, 3, 2, 1, 0)),  # nothing merges
    ((2, 3, 2, 3, 2, 3, 2, 2), (1, 0, 2, 3, 4, 5, 6, 7)),  # a 2-d swap
    ((3, 1, 2, 1, 2, 3), (5, 3, 0, 4, 1, 2)),  # size-1 dims
])
def test_high_rank_transposes_copy_in_bounded_time(shape, perm):
    # XLA's CPU backend took minutes to emit an 8-d transpose (a copy of a
    # twice-transposed tensor never finished): tpuc now emits transposes of
    # at most 5 merged dims. Values and gradients as on the CPU.
    x = torch.randn(shape)
    t = x.to("tpu").requires_grad_()
    y = torch.empty_like(t.permute(perm)).copy_(t.permute(perm) * 2)
    assert torch.equal(y.detach().cpu(), x.permute(perm) * 2)
    y.backward(torch.ones_like(y))
    assert torch.equal(t.grad.cpu(), torch.full(shape, 2.0))
    assert torch.equal(t.permute(perm).contiguous().cpu(), x.permute(perm).contiguous())
