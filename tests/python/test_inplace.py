"""In-place and out= variants, device-side copies, fill_ and zero_: the
result is written through the target's view in the op's own program (or
into the out= tensor, resized and cast as PyTorch does), and views of the
same storage see it."""

import pytest
import torch

import tpuc


def both(fn, base):
    cpu = base.clone()
    dev = base.to("tpu")
    fn(cpu)
    fn(dev)
    torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0)


@pytest.fixture
def native_only():
    tpuc.fallback_reset()
    yield
    assert not tpuc.fallback_report()


def test_inplace_through_views(native_only):
    base = torch.arange(24.0).reshape(4, 6)
    both(lambda t: t[:, 1].mul_(10), base)          # strided column
    both(lambda t: t[1:3].add_(1.5), base)          # contiguous rows, offset
    both(lambda t: t.t()[2].sub_(t[0, :4]), base)   # transposed view
    both(lambda t: t[::2, ::3].neg_(), base)         # 2-D strided
    both(lambda t: t[1:].add_(t[0]), base)            # same storage, disjoint
    both(lambda t: t[0].copy_(t[1]), base)


def test_out_variants_resize_and_cast(native_only):
    a = torch.randn(3, 4)
    b = torch.randn(4)
    out = torch.empty(0, device="tpu")
    torch.add(a.to("tpu"), b.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)
    wide = torch.empty(3, 4, dtype=torch.float64, device="tpu")
    torch.mul(a.to("tpu"), 2, out=wide)
    assert wide.dtype == torch.float64
    torch.testing.assert_close(wide.cpu(), (a * 2).double())
    cmp = torch.empty(3, 4, dtype=torch.bool, device="tpu")
    torch.lt(a.to("tpu"), 0, out=cmp)
    assert torch.equal(cmp.cpu(), a < 0)


def test_out_into_a_view():
    a = torch.randn(3, 4)
    dev = torch.zeros(4, 3, device="tpu")
    cpu = torch.zeros(4, 3)
    torch.sin(a.t(), out=cpu)
    torch.sin(a.to("tpu").t(), out=dev)
    torch.testing.assert_close(dev.cpu(), cpu)
    dev2, cpu2 = torch.zeros(3, 8, device="tpu"), torch.zeros(3, 8)
    torch.cos(a, out=cpu2[:, ::2])
    torch.cos(a.to("tpu"), out=dev2[:, ::2])
    torch.testing.assert_close(dev2.cpu(), cpu2)


def test_casting_errors_match_cpu():
    for dev in ("cpu", "tpu"):
        ints = torch.ones(3, dtype=torch.long, device=dev)
        with pytest.raises(RuntimeError, match="can't be cast"):
            ints.add_(1.5)
        with pytest.raises(RuntimeError, match="can't be cast"):
            torch.add(torch.ones(3, device=dev), 1, out=ints)
        small = torch.ones(3, device=dev)
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            small.add_(torch.ones(2, 3, device=dev))
        assert small.cpu().tolist() == [1.0, 1.0, 1.0]


def test_overlap_errors_match_cpu():
    for dev in ("cpu", "tpu"):
        t = torch.arange(24.0, device=dev).reshape(4, 6)
        with pytest.raises(RuntimeError, match="single memory location"):
            t.add_(t[0])
        with pytest.raises(RuntimeError, match="single memory location"):
            t[0].expand(4, 6).mul_(2)
        with pytest.raises(RuntimeError, match="single memory location"):
            torch.add(t[0], 1, out=t[0].as_strided((6,), (0,)))


def test_fill_and_zero(native_only):
    for dtype in (torch.float32, torch.bfloat16, torch.int32, torch.uint8, torch.bool):
        both(lambda t: t.fill_(3), torch.zeros(5, 2, dtype=dtype))
        both(lambda t: t[:, 1].fill_(1), torch.zeros(5, 2, dtype=dtype))
        both(lambda t: t[1:].zero_(), torch.ones(5, 2, dtype=dtype))
    both(lambda t: t.fill_(2.7), torch.zeros(4, dtype=torch.int64))
    both(lambda t: t.fill_(torch.tensor(1.25)), torch.zeros(4))
    both(lambda t: t.fill_(torch.tensor(-2.0, device=t.device)), torch.zeros(4))
    assert torch.full((2, 3), 7.0, device="tpu").cpu().tolist() == [[7.0] * 3] * 2
    assert torch.zeros(3, dtype=torch.int16, device="tpu").cpu().tolist() == [0, 0, 0]


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("n", [10, 300_000, 3_000_000])
def test_never_written_storages_read_as_zeros(native_only, mode, n):
    # zero_ of a whole never-written storage runs nothing (it already reads
    # as zeros); large ones get their zeros from a fill on the device, kept
    # as f32; every reader sees zeros whatever its dtype and view.
    with torch.tpu.eager_mode(mode):
        z = torch.zeros(n, device="tpu")
        assert z.cpu().abs().sum() == 0
        e = torch.empty(n, device="tpu")
        e.zero_()
        e.add_(2)
        assert (e.cpu() == 2).all()
        m = torch.zeros_like(e)
        m.lerp_(e, 0.5)
        assert (m.cpu() == 1).all()
        # zero_ of part of a storage, the rest written: both kept.
        b = torch.empty(2, n, device="tpu")
        b[1].zero_()
        b[0].fill_(3)
        bc = b.cpu()
        assert (bc[0] == 3).all() and (bc[1] == 0).all()
        i = torch.zeros(n, dtype=torch.int64, device="tpu")
        i += 7
        assert (i.cpu() == 7).all()
        h = torch.zeros(n, dtype=torch.float16, device="tpu").zero_()
        assert h.cpu().abs().sum() == 0
        v = torch.zeros(n, device="tpu").view(torch.int32)
        assert (v.cpu() == 0).all()
        t = torch.empty(n // 2, 2, device="tpu").t()
        t.zero_()
        t += 1
        assert (t.cpu() == 1).all()
        # A written storage is still zeroed by zero_.
        w = torch.ones(n, device="tpu")
        w.zero_()
        assert w.cpu().abs().sum() == 0


def test_zeros_of_a_fresh_tensor_record_no_op():
    with torch.tpu.eager_mode("fused"):
        torch.tpu.synchronize()
        torch.tpu.fused_reset_stats()
        z = torch.zeros(4096, device="tpu")
        m = torch.zeros_like(z)
        assert torch.tpu.fused_stats()["ops_recorded"] == 0
        # fill_ with 1 does run, after the zeros it overwrites (a node of
        # its segment).
        o = torch.ones(4096, device="tpu")
        assert torch.tpu.fused_stats()["ops_recorded"] == 2
        m.zero_()                             # still never written: nothing
        assert torch.tpu.fused_stats()["ops_recorded"] == 2
        o.zero_()                             # written: zero_ runs
        assert torch.tpu.fused_stats()["ops_recorded"] == 3
        assert o.cpu().sum() == 0 and m.cpu().sum() == 0 and z.cpu().sum() == 0


def test_fill_errors_match_cpu():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="0-dimension"):
            torch.zeros(3, device=dev).fill_(torch.ones(2, device=dev))
        with pytest.raises(RuntimeError):
            torch.zeros(3, dtype=torch.int32, device=dev).fill_(float("nan"))


def test_device_copy_casts_and_broadcasts(native_only):
    src = torch.tensor([[1.7, -2.5, 3.2]])
    for dtype in (torch.int32, torch.float16, torch.bool, torch.uint8, torch.float64):
        dst = torch.zeros(4, 3, dtype=dtype, device="tpu")
        dst.copy_(src.to("tpu"))
        assert torch.equal(dst.cpu(), torch.zeros(4, 3, dtype=dtype).copy_(src))
    y = torch.arange(12.0).reshape(3, 4)
    d = y.to("tpu")
    d[:, :3].copy_(d[:, 1:])  # overlapping source and destination
    y[:, :3].copy_(y[:, 1:].clone())
    assert torch.equal(d.cpu(), y)


def test_fallback_inplace_on_view_keeps_strides():
    # An op with no native lowering, in place on a strided view: the CPU
    # fallback writes its result back through the view.
    x = torch.arange(12.0).reshape(3, 4) + 1
    d = x.to("tpu")
    d[:, 1].lgamma_()
    x[:, 1].lgamma_()
    torch.testing.assert_close(d.cpu(), x)
    d2, x2 = (torch.arange(12.0).reshape(3, 4) + 1).to("tpu"), torch.arange(12.0).reshape(3, 4) + 1
    torch.lgamma(d2[:, 0], out=d2[:, 2])
    torch.lgamma(x2[:, 0], out=x2[:, 2])
    torch.testing.assert_close(d2.cpu(), x2)


def _lookups():
    st = torch.tpu.compile_cache_stats()
    return st["misses"] + st["memory_hits"] + st["disk_hits"]


def test_scalars_do_not_recompile(monkeypatch):
    monkeypatch.setenv("TPUC_FUSE_AFTER", "3")  # small segments too
    # x.add_(0.5) and x.add_(0.7) share one executable: scalars are program
    # arguments, never part of the cache key.
    with torch.tpu.eager_mode("strict"):
        x = torch.zeros(7, device="tpu")
        x.add_(0.5)
        before = _lookups()
        x.add_(0.7)
        x.mul_(1.5)
        x.mul_(3.0)
        torch.testing.assert_close(x.cpu(), torch.full((7,), 5.4))
        assert _lookups() == before + 1  # only mul_'s first call
    # Fused: the segment's program does not depend on the values either (it
    # runs op by op first, is compiled at its third run, and found after).
    with torch.tpu.eager_mode("fused"):
        for a, b, want in ((0.5, 2.0, 1.0), (0.7, 3.0, 2.1), (0.5, 5.0, 2.5), (0.25, 4.0, 1.0)):
            x = torch.zeros(7, device="tpu")
            torch.tpu.synchronize()
            before = _lookups()
            x.add_(a)
            x.mul_(b)
            torch.testing.assert_close(x.cpu(), torch.full((7,), want))
            if a == 0.25:
                assert _lookups() == before, "the fourth segment compiled again"


def test_complex_tensors_run_natively(native_only):
    torch.manual_seed(0)
    a = torch.randn(4, 3, dtype=torch.complex64)
    b = torch.randn(4, 3, dtype=torch.complex64)
    da, db = a.to("tpu"), b.to("tpu")
    for fn in (torch.add, torch.mul, torch.div, torch.sub):
        torch.testing.assert_close(fn(da, db).cpu(), fn(a, b))
    for fn in (torch.exp, torch.sqrt, torch.tanh, torch.neg, torch.reciprocal):
        torch.testing.assert_close(fn(da).cpu(), fn(a))
    torch.testing.assert_close(da.sum(0).cpu(), a.sum(0))
    torch.testing.assert_close(torch.cat([da, db.t().t()]).cpu(), torch.cat([a, b]))
    c = da.clone()
    c[:, 1].mul_(db[:, 2])
    a2 = a.clone()
    a2[:, 1].mul_(b[:, 2])
    torch.testing.assert_close(c.cpu(), a2)
    w = torch.zeros(2, 3, dtype=torch.complex128, device="tpu")
    w.copy_(torch.tensor([0.25, -1.5, 2.0]).to("tpu"))
    assert w.cpu().tolist() == [[0.25 + 0j, -1.5 + 0j, 2 + 0j]] * 2


def test_lazy_conj_and_neg_bits_are_read_natively(native_only):
    torch.manual_seed(0)
    a = torch.randn(3, 3, dtype=torch.complex64)
    d = a.to("tpu")
    torch.testing.assert_close((d.conj() @ d).cpu(), a.conj() @ a)
    torch.testing.assert_close((d.conj() * 2).cpu(), a.conj() * 2)
    torch.testing.assert_close(torch.add(d, d._neg_view()).cpu(), a + a._neg_view())
    z = torch.zeros(3, dtype=torch.complex128, device="tpu").fill_(1.5)
    assert z.cpu().tolist() == [1.5 + 0j] * 3


def test_view_as_real_and_complex_are_views(native_only):
    a = torch.randn(2, 3, dtype=torch.complex64)
    d = a.to("tpu")
    r = torch.view_as_real(d)
    assert r.shape == (2, 3, 2) and r.dtype == torch.float32
    assert torch.equal(r.cpu(), torch.view_as_real(a))
    r[0, 0, 1] = 5.0  # writes through to the complex tensor
    assert d[0, 0].cpu().imag.item() == 5.0
    back = torch.view_as_complex(r)
    assert torch.equal(back.cpu(), d.cpu())
    assert torch.equal(torch.conj_physical(d).cpu(), torch.conj_physical(d.cpu()))
