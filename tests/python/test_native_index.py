"""Indexing, shape and fill ops lowered natively (src/ops/index.c): cat,
index_select, embedding, gather, scatter and its reductions,
index_add/copy/fill, advanced indexing (index.Tensor, index_put_),
masked_fill, flip, roll, tril/triu, constant_pad_nd, repeat. Each agrees
with the CPU (dtype, shape, values, errors) without the CPU fallback,
except where the CPU must decide (bad indices, duplicate writes)."""

import pytest
import torch
import torch.nn.functional as F

import tpuc

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16,
          torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]
# fewer for the ops whose lowering does not depend on the dtype much
SOME = [torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool]


def make(shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -5, 9, shape).to(dtype)


def to_dev(a):
    if isinstance(a, torch.Tensor):
        return a.to("tpu")
    if isinstance(a, (list, tuple)):
        return type(a)(to_dev(t) for t in a)
    return a


def check(fn, *args, native=True, exact=True):
    """fn on the CPU and on the tpu agree; no CPU fallback when native."""
    cpu = fn(*args)
    tpuc.fallback_reset()
    dev = fn(*to_dev(list(args)))
    report = tpuc.fallback_report()
    assert dev.device.type == "tpu"
    assert dev.dtype == cpu.dtype, (dev.dtype, cpu.dtype)
    assert dev.shape == cpu.shape, (dev.shape, cpu.shape)
    if exact:
        assert torch.equal(dev.cpu(), cpu), (dev.cpu(), cpu)
    else:
        torch.testing.assert_close(dev.cpu(), cpu)
    if native:
        assert report == {}, report
    return report


def check_error(fn, *args):
    """fn raises the same exception type and message on both devices."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(Exception) as dev:
        fn(*to_dev(list(args)))
    assert type(dev.value) is type(cpu.value), (dev.value, cpu.value)
    assert str(dev.value).split("\n")[0] == str(cpu.value).split("\n")[0]


# ---------------------------------------------------------------- cat

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cat_dtypes(dtype):
    a, b = make((2, 3), dtype), make((4, 3), dtype)
    check(lambda a, b: torch.cat([a, b]), a, b)
    check(lambda a, b: torch.cat([a.t(), b.t()], -1), a, b)


def test_cat_promotion_and_legacy_empty():
    a, b = make((2, 3), torch.int32), make((1, 3), torch.float16)
    check(lambda a, b: torch.cat([a, b]), a, b)
    # a 1-D empty tensor is skipped but still promotes
    e = torch.tensor([], dtype=torch.float64)
    check(lambda a, e: torch.cat([a, e, a], 1), a, e)
    check(lambda a, b: torch.cat([a, b], 0),
          make((2, 3), torch.int8), make((2, 3), torch.uint8))
    check(lambda a: torch.cat([a[:, :0], a, a[:, 1:]], 1), make((2, 3)))


def test_cat_out_and_errors():
    a, b = make((2, 3)), make((2, 2))
    out = torch.empty(0)

    def f(a, b):
        o = out.to(a.device)
        torch.cat([a, b], 1, out=o)
        return o
    check(f, a, b)
    check_error(lambda a, b: torch.cat([a, b]), a, b)
    check_error(lambda a, b: torch.cat([a, b], 2), a, b)


def test_cat_of_more_tensors_than_one_program_takes_is_native():
    """FSDP2 joins every gradient chunk of a module in one cat: past the
    64 tensors one program takes, groups are joined, then the groups."""
    import tpuc

    xs = [make((2, k % 3 + 1), torch.int32 if k == 70 else torch.float32) for k in range(150)]
    tpuc.fallback_reset()
    check(lambda *xs: torch.cat(xs, 1), *xs)

    def f(*xs):
        o = torch.empty(0, device=xs[0].device)
        torch.cat(xs, 1, out=o)
        return o
    check(f, *xs)
    assert "aten::cat" not in tpuc.fallback_report()


# ------------------------------------------------------ index_select

@pytest.mark.parametrize("dtype", SOME, ids=str)
def test_index_select_dtypes(dtype):
    x = make((4, 5, 3), dtype)
    check(lambda x, i: x.index_select(1, i), x, torch.tensor([4, 0, 0, 2]))
    check(lambda x, i: x.index_select(-1, i), x,
          torch.tensor([2, 1], dtype=torch.int32))


def test_index_select_forms():
    x = make((6, 4))
    check(lambda x, i: x.index_select(0, i), x, torch.tensor(3))
    check(lambda x, i: x.index_select(0, i), x,
          torch.tensor([], dtype=torch.long))
    check(lambda x, i: x.t().index_select(0, i), x, torch.tensor([1, 3]))
    check(lambda x, i: x.index_select(0, i), torch.tensor(2.5),
          torch.tensor([0]))

    def out(x, i):
        o = torch.empty(0, device=x.device)
        return torch.index_select(x, 1, i, out=o)
    check(out, x, torch.tensor([0, 2]))


def test_index_select_errors():
    x = make((6, 4))
    check_error(lambda x, i: x.index_select(0, i), x, torch.tensor([6]))
    check_error(lambda x, i: x.index_select(0, i), x, torch.tensor([-1]))
    check_error(lambda x, i: x.index_select(0, i), x[0], torch.tensor([1, 9]))


def test_embedding():
    w = make((10, 3))
    idx = torch.tensor([[0, 9, 2], [4, 4, 1]])
    check(F.embedding, idx, w)
    check(F.embedding, idx.int(), w.to(torch.bfloat16))
    check_error(F.embedding, torch.tensor([10]), w)


# ------------------------------------------------------------ gather

@pytest.mark.parametrize("dtype", SOME, ids=str)
def test_gather_dtypes(dtype):
    x = make((4, 5, 3), dtype)
    idx = torch.randint(0, 4, (2, 5, 3))
    check(lambda x, i: x.gather(0, i), x, idx)
    check(lambda x, i: x.gather(-1, i), x, torch.randint(0, 3, (4, 2, 2)))


def test_gather_forms_and_errors():
    x = make((4, 5))
    check(lambda x, i: x.gather(1, i), x, torch.randint(0, 5, (2, 7)).int())
    check(lambda x, i: x.gather(0, i), torch.tensor(1.5), torch.tensor(0))
    check(lambda x, i: x.t().gather(0, i), x, torch.randint(0, 5, (3, 4)))

    def out(x, i):
        o = torch.empty(0, device=x.device)
        return torch.gather(x, 1, i, out=o)
    check(out, x, torch.randint(0, 5, (4, 2)))
    check_error(lambda x, i: x.gather(0, i), x, torch.tensor([[4]]))
    check_error(lambda x, i: x.gather(0, i), x, torch.tensor([[-1]]))


# ----------------------------------------------------------- scatter

@pytest.mark.parametrize("dtype", SOME, ids=str)
def test_scatter_dtypes(dtype):
    x, src = make((4, 5), dtype), make((3, 6), dtype)
    # a permutation per column: no duplicate targets
    idx = torch.stack([torch.randperm(4)[:3] for _ in range(5)], 1)
    check(lambda x, i, s: x.scatter(0, i, s), x, idx, src)
    check(lambda x, i: x.scatter(0, i, 1), x, idx)
    if dtype != torch.bool:
        check(lambda x, i, s: x.scatter_add(0, i, s), x,
              torch.randint(0, 4, (3, 5)), src, exact=False)


@pytest.mark.filterwarnings("ignore:The reduce argument")
def test_scatter_forms():
    x, src = make((4, 5)), make((4, 5))
    idx = torch.randint(0, 5, (4, 3))

    def inplace(x, i, s):
        y = x.clone()
        y.scatter_(1, i, s, reduce="add")
        return y
    check(inplace, x, idx, src, exact=False)
    check(lambda x, i: x.scatter(1, i, 2.0, reduce="multiply"), x, idx)
    check(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), x, idx, src,
          exact=False)

    def out(x, i, s):
        o = torch.empty(0, device=x.device)
        return torch.scatter_add(x, 1, i, s, out=o)
    check(out, x, idx, src, exact=False)
    check(lambda x, i, s: x.scatter(0, i, s), torch.tensor(1.0),
          torch.tensor(0), torch.tensor(3.0))
    # duplicate targets: the CPU decides which write wins
    check(lambda x, i, s: x.scatter(1, i, s), x,
          torch.tensor([[0, 0]] * 4), src, native=False)
    # ... unless the duplicates write the same bits (transformers'
    # repetition penalty writes each token's score back at every position
    # that token holds): native, whatever the order
    ids = torch.tensor([[3, 5, 3, 7, 5], [1, 1, 1, 2, 9]])
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool):
        scores = make((2, 10), dtype)
        check(lambda x, i: x.scatter(1, i, torch.gather(x, 1, i).clone()), scores, ids)
    zeros = torch.tensor([[0.0, -0.0]])  # same value, other bits: the CPU
    check(lambda x, i, s: x.scatter(1, i, s), torch.ones(1, 3),
          torch.tensor([[1, 1]]), zeros, native=False)
    check_error(lambda x, i, s: x.scatter(0, i, s), x, torch.tensor([[4]]), src)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16],
                         ids=str)
def test_scatter_reduce(reduce, include_self, dtype):
    x, src = make((5, 3), dtype), make((6, 3), dtype)
    idx = torch.randint(0, 5, (6, 3))
    idx[0, 0] = idx[1, 0]
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce,
                                           include_self=include_self),
          x, idx, src, exact=not dtype.is_floating_point)


# ----------------------------------------------- index_add/copy/fill

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_add_copy_fill(dtype):
    x = make((5, 4), dtype)
    idx = torch.tensor([3, 0, 3])
    src = make((5, 3), dtype)
    exact = not dtype.is_floating_point
    check(lambda x, i, s: x.index_add(1, i, s), x, torch.tensor([1, 1, 2]),
          src, exact=exact)
    if dtype != torch.bool:
        alpha = 2.5 if dtype.is_floating_point else 3
        # half floats with an alpha other than 1: the CPU rounds each
        # product and sum, which XLA does not keep; the CPU runs those
        half = dtype in (torch.float16, torch.bfloat16)
        check(lambda x, i, s: x.index_add(1, i, s, alpha=alpha), x,
              torch.tensor([1, 1, 2]), src, exact=exact, native=not half)
    check(lambda x, i, s: x.index_copy(1, i, s), x, torch.tensor([2, 0, 1]),
          src)
    check(lambda x, i: x.index_fill(0, i, 1), x, idx)
    check(lambda x, i, v: x.index_fill(1, i, v), x, torch.tensor([-1, 0]),
          make((), dtype))


def test_index_add_copy_fill_forms():
    x = make((5, 4))
    idx = torch.tensor([4, 1])

    def inplace(x, i, s):
        y = x.clone()
        y.t().index_add_(1, i, s)  # through a transposed view
        y.index_fill_(0, i, -1.5)
        y.index_copy_(0, i, s.t())
        return y
    check(inplace, x, idx, make((4, 2)), exact=False)
    check(lambda x, i, s: x.index_add(0, i, s), torch.tensor(1.0),
          torch.tensor([0]), torch.tensor(2.0))
    # duplicate rows of index_copy: the CPU decides
    check(lambda x, i, s: x.index_copy(0, i, s), x, torch.tensor([1, 1]),
          make((2, 4)), native=False)
    check_error(lambda x, i, s: x.index_add(0, i, s), x, torch.tensor([5]),
                make((1, 4)))
    check_error(lambda x, i, s: x.index_copy(0, i, s), x, torch.tensor([-1]),
                make((1, 4)))
    check_error(lambda x, i: x.index_fill(0, i, 2.0), x, torch.tensor([-6]))


# ---------------------------------------------- advanced indexing

@pytest.mark.parametrize("dtype", SOME, ids=str)
def test_index_dtypes(dtype):
    x = make((4, 5, 3), dtype)
    i = torch.tensor([3, -1, 0, 3])
    check(lambda x, i: x[i], x, i)
    check(lambda x, i: x[:, i], x, i)
    check(lambda x, i: x[i, :, i.int() % 3], x, i)


def test_index_patterns():
    x = make((4, 5, 6, 3))
    a, b = torch.tensor([[0, 1], [3, 2]]), torch.tensor([4, -5])
    check(lambda x, a, b: x[a, b], x, a, b)           # adjacent: in place
    check(lambda x, a, b: x[:, a, b], x, a, b)
    check(lambda x, a, b: x[a, :, b], x, a, b)        # apart: batch dims first
    check(lambda x, a, b: x[..., a, :], x, a, b)
    check(lambda x, a: x[None, a], x, a)
    check(lambda x, a: x.t()[a], make((3, 4)), a)
    check(lambda x, a: x[a[:0]], x, a)


def test_index_errors_and_masks():
    x = make((4, 5))
    check_error(lambda x, i: x[i], x, torch.tensor([4]))
    check_error(lambda x, i: x[:, i], x, torch.tensor([-6]))
    # a bool mask has a data-dependent shape: the CPU runs it
    check(lambda x: x[x > 0], x, native=False)


def put(x, idx, v, accumulate=False):
    y = x.clone()
    y.index_put_(idx, v, accumulate=accumulate)
    return y


@pytest.mark.parametrize("dtype", SOME, ids=str)
def test_index_put_dtypes(dtype):
    x = make((4, 5), dtype)
    i = torch.tensor([2, 0])
    check(lambda x, i, v: put(x, (i,), v), x, i, make((2, 5), dtype))

    def setitem(x, i, v):
        y = x.clone()
        y[:, i] = v
        return y
    check(setitem, x, i, make((4, 1), dtype))
    check(lambda x, i, v: put(x, (i, i), v), x, i, make((), dtype))
    if dtype != torch.bool:
        check(lambda x, i, v: put(x, (i,), v, True), x,
              torch.tensor([1, 1, -1]), make((5,), dtype),
              exact=not dtype.is_floating_point)


def test_setitem_and_masks():
    x = make((4, 5, 3))
    i = torch.tensor([3, 1])

    def setitem(x, i, v):
        y = x.clone()
        y[:, i] = v
        y[i, 0, i - 1] = 7.0
        return y
    check(setitem, x, i, make((4, 2, 3)))

    def mask_set(x):
        y = x.clone()
        y[y > 0] = 0.5
        y[y[:, :, 0] < 0] = y.new_tensor([1.0, 2.0, 3.0])
        return y
    check(mask_set, x)
    m = torch.tensor([True, False, True, True])
    check(lambda x, m, v: put(x, (m,), v, True), x, m, make((5, 1)),
          exact=False)
    # values along the true elements: data-dependent, the CPU runs it
    check(lambda x, m, v: put(x, (m,), v), x, m, make((3, 5, 3)), native=False)
    # duplicates with distinct values: the CPU decides
    check(lambda x, i, v: put(x, (i,), v), x, torch.tensor([1, 1]),
          make((2, 5, 3)), native=False)
    check_error(lambda x, i, v: put(x, (i,), v), x, torch.tensor([4]),
                make(()))


# ----------------------------------------------------- masked_fill

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_fill(dtype):
    x = make((3, 4), dtype)
    m = torch.rand(3, 4) > 0.5
    check(lambda x, m: x.masked_fill(m, 1), x, m)
    check(lambda x, m, v: x.masked_fill(m, v), x, m[0], make((), dtype))
    check(lambda x, m, v: x.masked_fill(m, v), x, m, torch.tensor(0.0))

    def inplace(x, m):
        y = x.clone()
        y.t().masked_fill_(m.t(), 0)
        return y
    check(inplace, x, m)


def test_masked_fill_broadcast_and_overflow():
    check(lambda x, m: x.masked_fill(m, -2.5), make((4,)),
          torch.rand(3, 1) > 0.5)
    check(lambda x, m: x.masked_fill(m, float("-inf")), make((2, 3)),
          torch.rand(2, 3) > 0.5)
    x8 = make((3,), torch.int8)
    m = torch.tensor([True, False, True])
    check_error(lambda x, m: x.masked_fill(m, 300), x8, m)
    check_error(lambda x, m: x.masked_fill(m, 1e6),
                make((3,), torch.float16), m)
    check(lambda x, m: x.masked_fill(m, -1), make((3,), torch.uint8), m)


# -------------------------------------------------------- shape ops

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool,
                                   torch.bfloat16], ids=str)
def test_shape_ops(dtype):
    x = make((3, 4, 5), dtype)
    check(lambda x: x.flip([0, -1]), x)
    check(lambda x: x.transpose(0, 2).flip(1), x)
    check(lambda x: x.roll([1, -7], [0, 2]), x)
    check(lambda x: x.roll(5), x)
    check(lambda x: x.tril(), x)
    check(lambda x: x.triu(-1), x)
    check(lambda x: x.repeat(2, 1, 1, 3), x)
    if dtype != torch.bool:
        check(lambda x: F.pad(x, (1, 2, -1, 0), value=3), x)


def test_triangle_diagonal_and_inplace():
    x = make((4, 6))
    for k in (-2, 0, 1, 3):  # the diagonal is a program argument
        check(lambda x: x.tril(k), x)
        check(lambda x: x.triu(k), x)

    def inplace(x):
        y = x.clone()
        y.tril_(1)
        return y
    check(inplace, x)

    def out(x):
        o = torch.empty(0, device=x.device)
        return torch.triu(x, 2, out=o)
    check(out, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   torch.bfloat16], ids=str)
@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_embedding_dense_backward(dtype, padding_idx):
    idx = torch.randint(0, 6, (4, 5))
    g = make((4, 5, 3), dtype)
    ebw = torch.ops.aten.embedding_dense_backward
    # rows add one by one in index order, as on the CPU
    check(lambda g, i: ebw(g, i, 6, padding_idx, False), g, idx)
    half = dtype in (torch.float16, torch.bfloat16)
    check(lambda g, i: ebw(g, i, 6, padding_idx, True), g, idx, exact=False,
          native=not half)


def test_embedding_grad():
    w = make((6, 3)).requires_grad_()
    wd = w.detach().to("tpu").requires_grad_()
    idx = torch.tensor([[1, 2, 1], [5, 0, 1]])
    F.embedding(idx, w, padding_idx=1).pow(2).sum().backward()
    tpuc.fallback_reset()
    F.embedding(idx.to("tpu"), wd, padding_idx=1).pow(2).sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad)
    assert "aten::embedding_dense_backward" not in tpuc.fallback_report()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64,
                                   torch.complex64])
def test_unfold_backward_is_native(dtype):
    # Tensor.unfold's gradient (and istft's overlap-add) ran on the CPU:
    # overlapping, touching and gapped windows, any dim, a 0-d input,
    # complex gradients, exactly the CPU's.
    import tpuc
    g = torch.Generator().manual_seed(0)
    for shape, dim, size, step in [((10,), 0, 3, 2), ((4, 12, 3), 1, 4, 4), ((4, 12, 3), 1, 5, 2),
                                   ((2, 3, 9), 2, 9, 1), ((7, 2), 0, 2, 3), ((3, 8), 1, 3, 1),
                                   ((), 0, 1, 1)]:
        windows = torch.empty(shape).unfold(dim, size, step).shape
        grad = (torch.randn(windows, generator=g) * 4).round().to(dtype)
        if dtype.is_complex:
            grad = grad + 1j * (torch.randn(windows, generator=g) * 4).round()
        want = torch.ops.aten.unfold_backward(grad, list(shape), dim, size, step)
        tpuc.fallback_reset()
        got = torch.ops.aten.unfold_backward(grad.to("tpu"), list(shape), dim, size, step)
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (shape, dim, size, step)
    if dtype == torch.float32:
        x = torch.randn(2, 400, generator=g)
        win = torch.hann_window(64)
        spec = torch.stft(x, 64, hop_length=16, window=win, return_complex=True)
        tpuc.fallback_reset()
        y = torch.istft(spec.to("tpu"), 64, hop_length=16, window=win.to("tpu"), length=400)
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        torch.testing.assert_close(y.cpu(), torch.istft(spec, 64, hop_length=16, window=win,
                                                        length=400), atol=1e-5, rtol=1e-5)


def _bag_run(dev, w, idx, offs, ps, g, **kw):
    wd = w.detach().to(dev).requires_grad_()
    pd = ps.detach().to(dev).requires_grad_() if ps is not None else None
    out = F.embedding_bag(idx.to(dev), wd, offs.to(dev) if offs is not None else None,
                          per_sample_weights=pd, **kw)
    out.backward(g.to(dev))
    return out.detach().cpu(), wd.grad.cpu(), (pd.grad.cpu() if pd is not None else None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag_forward_and_backward(dtype, mode, padding_idx, last):
    # nn.EmbeddingBag ran on the CPU fallback (_embedding_bag and its
    # backward): bags of 3, 0 (empty), 3, 3 and 2 entries, padding entries,
    # repeated indices, int32 and int64 indices, per-sample weights (sum).
    g = torch.Generator().manual_seed(0)
    for idt in (torch.int64, torch.int32):
        w = torch.randn(10, 5, generator=g).to(dtype)
        idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 2, 2, 7], dtype=idt)
        offs = torch.tensor([0, 3, 3, 6, 9] + ([11] if last else []), dtype=idt)
        for psw in ([False, True] if mode == "sum" else [False]):
            ps = torch.randn(11, generator=g).to(dtype) if psw else None
            grad = torch.randn(5, 5, generator=g).to(dtype)
            kw = dict(mode=mode, include_last_offset=last, padding_idx=padding_idx)
            want = _bag_run("cpu", w, idx, offs, ps, grad, **kw)
            tpuc.fallback_reset()
            got = _bag_run("tpu", w, idx, offs, ps, grad, **kw)
            assert tpuc.fallback_report() == {}, tpuc.fallback_report()
            tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
            for a, b in zip(got, want):
                if b is None:
                    assert a is None
                    continue
                assert a.dtype == b.dtype and a.shape == b.shape
                torch.testing.assert_close(a, b, **tol)


def test_embedding_bag_module_2d_input_scale_grad_and_errors():
    # scale_grad_by_freq divides each row's gradient by its index's count
    # in the batch, as CUDA does. (PyTorch's CPU kernel divides by the
    # count of another index -- it reads counts[indices[i]] with i the
    # group's number, not its position -- so the reference is the CPU's
    # unscaled gradient over the counts.)
    g = torch.Generator().manual_seed(1)
    for mode in ("sum", "mean"):
        m = torch.nn.EmbeddingBag(12, 4, mode=mode)
        dm = torch.nn.EmbeddingBag(12, 4, mode=mode, scale_grad_by_freq=True).to("tpu")
        dm.load_state_dict(m.state_dict())
        x = torch.randint(0, 12, (3, 5), generator=g)
        m(x).pow(2).sum().backward()
        tpuc.fallback_reset()
        y = dm(x.to("tpu"))
        y.pow(2).sum().backward()
        assert tpuc.fallback_report() == {}, tpuc.fallback_report()
        torch.testing.assert_close(y.cpu(), m(x))
        counts = torch.bincount(x.reshape(-1), minlength=12).clamp_min(1).unsqueeze(1)
        torch.testing.assert_close(dm.weight.grad.cpu(), m.weight.grad / counts)
    # the no-grad path (_embedding_bag_forward_only) in each mode
    w = torch.randn(12, 4, generator=g)
    x = torch.randint(0, 12, (4, 3), generator=g)
    for mode in ("sum", "mean", "max"):
        with torch.no_grad():
            check(lambda w, x: F.embedding_bag(x, w, mode=mode), w, x, exact=False)
    # PyTorch's errors: an index out of range, offsets not starting at 0
    w, wd = torch.randn(5, 3), torch.randn(5, 3).to("tpu")
    for idx, offs in [([0, 7, 1], [0, 2]), ([0, 1, 2], [1, 2])]:
        with pytest.raises(RuntimeError) as cpu_err:
            F.embedding_bag(torch.tensor(idx), w, torch.tensor(offs))
        with pytest.raises(RuntimeError) as dev_err:
            F.embedding_bag(torch.tensor(idx).to("tpu"), wd, torch.tensor(offs).to("tpu")).cpu()
        assert str(dev_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
    assert (wd * 2).sum().item() == pytest.approx((wd.cpu() * 2).sum().item(), rel=1e-6)


def test_embedding_bag_max_ties_and_nan_as_on_the_cpu():
    # ties: the first entry holding the max gets the gradient; a NaN after
    # a bag's first entry is skipped by the CPU's scan (the CPU decides)
    w = torch.tensor([[1.0, 2.0], [1.0, 5.0], [0.0, 5.0], [float("nan"), 0.0]])
    grad = torch.tensor([[1.0, 10.0], [100.0, 1000.0]])
    for idx, offs in [([0, 1, 2, 1], [0, 3]), ([1, 3, 2, 3], [0, 2])]:
        want = _bag_run("cpu", w, torch.tensor(idx), torch.tensor(offs), None, grad, mode="max")
        got = _bag_run("tpu", w, torch.tensor(idx), torch.tensor(offs), None, grad, mode="max")
        for a, b in zip(got[:2], want[:2]):
            torch.testing.assert_close(a, b, equal_nan=True)


def test_eye_is_native():
    # torch.eye on tpu (identity inits, contrastive labels, matrix_power(x,
    # 0)) ran on the CPU and was copied over.
    import tpuc
    tpuc.fallback_reset()
    for dt in (torch.float32, torch.int64, torch.bool, torch.complex64, torch.bfloat16, torch.uint8):
        assert torch.equal(torch.eye(3, device="tpu", dtype=dt).cpu(), torch.eye(3, dtype=dt))
        assert torch.equal(torch.eye(3, 5, device="tpu", dtype=dt).cpu(), torch.eye(3, 5, dtype=dt))
    assert torch.eye(0, device="tpu").shape == (0, 0) and torch.eye(2, 0, device="tpu").shape == (2, 0)
    out = torch.empty(0, dtype=torch.float64, device="tpu")
    torch.eye(4, 2, out=out)
    assert out.dtype == torch.float64 and torch.equal(out.cpu(), torch.eye(4, 2, dtype=torch.float64))
    x = torch.randn(3, 3)
    torch.testing.assert_close(torch.linalg.matrix_power(x.to("tpu"), 0).cpu(), torch.eye(3))
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        torch.eye(-1, device="tpu")


def test_tril_and_triu_indices_are_native():
    # Pairwise-interaction models (DLRM) index triangles with these; they
    # ran on the CPU. Every offset sign, wide and tall shapes, int32/int64.
    import tpuc
    tpuc.fallback_reset()
    for r, c in [(4, 5), (5, 3), (0, 3), (3, 0), (1, 1), (7, 7)]:
        for off in (-3, -1, 0, 1, 2, 6):
            for f in (torch.tril_indices, torch.triu_indices):
                for dt in (torch.int64, torch.int32):
                    got = f(r, c, off, device="tpu", dtype=dt).cpu()
                    assert got.dtype == dt and torch.equal(got, f(r, c, off, dtype=dt)), (f, r, c, off)
    assert tpuc.fallback_report() == {}, tpuc.fallback_report()
