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


@pytest.mark.parametrize("padding", ["left", "none"])
def test_float16_eager_and_sdpa_attention_differ_as_on_the_cpu(padding):
    # transformers' test_eager_matches_sdpa_inference (fp16) compares tpu at
    # 1e-7 / 1e-4, the tolerance it gives devices missing from its table,
    # and the skip list classifies those failures. This checks what the
    # classification claims: no NaN, tpu within the CPU's tolerance (5e-3),
    # and tpu's eager-SDPA difference no larger than the CPU's own.
    import copy

    import transformers as tf

    torch.manual_seed(42)
    cfg = tf.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=64, type_vocab_size=16)
    base = tf.BertModel(cfg).eval().half()
    ids = torch.randint(0, 99, (7, 7))
    mask = torch.ones(7, 7, dtype=torch.long)
    if padding == "left":
        mask[-1, :2] = 0
    out = {}
    for dev in ("cpu", DEV):
        for impl in ("eager", "sdpa"):
            m = copy.deepcopy(base)
            m.set_attn_implementation(impl)
            m = m.to(dev)
            with torch.no_grad():
                h = m(input_ids=ids.to(dev), attention_mask=mask.to(dev)).last_hidden_state
            h = h.float().cpu()
            h[-1, : 2 if padding == "left" else 0] = 0  # masked positions are not compared
            out[dev, impl] = h
    assert not any(torch.isnan(v).any() for v in out.values())
    diff = {dev: (out[dev, "eager"] - out[dev, "sdpa"]).abs().max().item() for dev in ("cpu", DEV)}
    torch.testing.assert_close(out[DEV, "sdpa"], out[DEV, "eager"], atol=5e-3, rtol=5e-3)
    assert diff[DEV] <= diff["cpu"] + 1e-3, diff


def test_default_compile_of_a_graph_without_tensor_inputs_runs_on_tpu():
    # transformers' test_flex_attention_with_grads: FlexAttention's masks come
    # from torch.compile(create_block_mask) with the default backend, a graph
    # whose only tensors are made inside it on tpu. It went to Inductor,
    # which has no code generator for tpu ("No interface for device tpu").
    import torch._dynamo
    from torch.nn.attention.flex_attention import create_block_mask

    def causal(b, h, q, kv):
        return q >= kv

    torch._dynamo.reset()
    compiled = torch.compile(create_block_mask)(causal, 1, 1, 300, 300, device=DEV)
    eager = create_block_mask(causal, 1, 1, 300, 300, device="cpu")
    assert compiled.kv_num_blocks.device.type == DEV
    assert torch.equal(compiled.kv_num_blocks.cpu(), eager.kv_num_blocks)
    assert torch.equal(compiled.kv_indices.cpu(), eager.kv_indices)
    assert torch.equal(compiled.to_dense().cpu(), eager.to_dense())


@pytest.mark.parametrize("qdtype", [torch.quint8, torch.qint8, torch.qint32])
def test_quantized_tensors_live_on_tpu(qdtype):
    # PyTorch's test_view_ops.py (flatten, ravel of _empty_affine_quantized)
    # and test_shape_ops.py (flip of quantize_per_tensor): quantized tensors
    # on tpu hold the same integers as on the CPU and view, flip and copy.
    x = torch.randn(3, 4, 5)
    qc = torch.quantize_per_tensor(x, 0.1, 5, qdtype)
    qt = torch.quantize_per_tensor(x.to(DEV), 0.1, 5, qdtype)
    assert qt.device.type == DEV and qt.dtype == qdtype and qt.is_quantized
    assert (qt.q_scale(), qt.q_zero_point(), qt.qscheme()) == (0.1, 5, torch.per_tensor_affine)
    assert torch.equal(qt.int_repr().cpu(), qc.int_repr())
    assert torch.equal(qt.dequantize().cpu(), qc.dequantize())
    assert torch.equal(qt.cpu().int_repr(), qc.int_repr())
    assert torch.equal(qc.to(DEV).int_repr().cpu(), qc.int_repr())
    for f in (lambda q: q.flip(0, 2), lambda q: q.flatten(1), lambda q: q.ravel(),
              lambda q: q.transpose(0, 2).contiguous(), lambda q: q[1:, ::2]):
        assert torch.equal(f(qt).int_repr().cpu(), f(qc).int_repr())
    e = torch._empty_affine_quantized([2, 3], scale=2, zero_point=3, dtype=qdtype, device=DEV)
    assert e.is_quantized and e.flatten(0, 1).shape == (6,) and e.view(-1).is_contiguous()
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        e.flatten(1, 0)


def test_quantized_per_channel_and_unsupported_types():
    x = torch.randn(3, 4)
    s, z = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1, 2, 3])
    qc = torch.quantize_per_channel(x, s, z, 0, torch.qint8)
    qt = torch.quantize_per_channel(x.to(DEV), s, z, 0, torch.qint8)
    assert torch.equal(qt.int_repr().cpu(), qc.int_repr())
    torch.testing.assert_close(qt.dequantize().cpu(), qc.dequantize())
    # Sub-byte types and ops without a tpu kernel raise NotImplementedError,
    # as they do on CUDA, and the device stays usable.
    with pytest.raises(NotImplementedError):
        torch.quantize_per_tensor(x.to(DEV), 0.1, 5, torch.quint4x2)
    with pytest.raises(NotImplementedError):
        torch.quantize_per_tensor(x.to(DEV), 0.1, 5, torch.quint8) + 1
    assert (x.to(DEV) * 2).cpu().equal(x * 2)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_copy_into_a_permuted_dense_layout(mode):
    # PyTorch's test_view_ops.py::test_view: clone() of a twice-transposed
    # 8-d tensor keeps its strides, and the copy into that layout compiled
    # for more than 10 minutes (a scatter of 8-d indices). It is now written
    # as a block transposed into storage order.
    torch.tpu.set_eager_mode(mode)
    try:
        base = torch.rand(4, 2, 5, 1, 6, 2, 9, 3)
        t = base.transpose(-1, 2).transpose(-2, 3)
        x = base.to(DEV).transpose(-1, 2).transpose(-2, 3)
        y = x.clone()
        assert y.stride() == t.clone().stride() and torch.equal(y.cpu(), t)
        view_size = [8, 1, 3, 3, 3, 4, 1, 3, 5]
        assert torch.equal(x.view(*view_size).cpu(), y.view(*view_size).cpu())
        t2 = base[:, :1].transpose(0, 4)
        x2 = base.to(DEV)[:, :1].transpose(0, 4)
        z = torch.empty_like(x2)
        z.copy_(x2 * 2)
        assert torch.equal(z.cpu(), t2 * 2)
    finally:
        torch.tpu.set_eager_mode("fused")


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_writes_to_columns_and_cache_slices_compile_once(mode):
    # A decoding loop writing its KV cache at each position
    # (`cache[:, :, p:p + 1] = kv`) and a loop writing columns (`x[:, p] =
    # v`, PyTorch's test_index_copy_deterministic) write through views with
    # gaps: their offset is an operand of the program (one compile per
    # shape, not per position), the write a dynamic_update_slice of the
    # view's box.
    import tpuc

    with torch.tpu.eager_mode(mode):
        cache, col = torch.zeros(2, 3, 12, 4), torch.zeros(6, 12)
        ct, cc = cache.to(DEV), col.to(DEV)
        blk = torch.zeros(10, 6, 5)
        bt = blk.to(DEV)

        def step(p):
            kv, v, w = torch.randn(2, 3, 1, 4), torch.randn(6), torch.randn(5, 3, 2)
            cache[:, :, p:p + 1] = kv
            ct[:, :, p:p + 1] = kv.to(DEV)
            col[:, p] = v
            cc[:, p] = v.to(DEV)
            # a transposed block with gaps, at a row and column offset
            blk[p % 9:p % 9 + 2, 1:4].transpose(0, 2).copy_(w)
            bt[p % 9:p % 9 + 2, 1:4].transpose(0, 2).copy_(w.to(DEV))
            torch.tpu.synchronize()

        for p in range(3):  # fused mode compiles a segment at its 3rd run
            step(p)
        st = tpuc._C.compile_cache_stats()
        before = st["misses"] + st["disk_hits"]
        for p in range(3, 12):
            step(p)
        st = tpuc._C.compile_cache_stats()
        assert st["misses"] + st["disk_hits"] == before
        assert torch.equal(ct.cpu(), cache) and torch.equal(cc.cpu(), col)
        assert torch.equal(bt.cpu(), blk)


F8 = [torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e5m2fnuz, torch.float8_e4m3fnuz]


@pytest.mark.parametrize("dtype", F8, ids=str)
def test_float8_tensors_live_on_tpu(dtype):
    # PyTorch's test_indexing.py::test_index_select runs on the float8 types
    # ("tpu does not support dtype Float8_e4m3fn" before).
    # Seeded: |x| past the type's largest value (240 for e4m3fnuz) becomes
    # NaN on both devices, which torch.equal never calls equal.
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)) * 100
    ref = x.to(dtype)
    t = ref.to(DEV)
    assert t.dtype == dtype and t.is_floating_point()
    # Copies both ways are bit-exact, and the conversion on tpu rounds as
    # the CPU's does (overflow to inf or NaN included).
    assert torch.equal(t.cpu().view(torch.uint8), ref.view(torch.uint8))
    edge = torch.tensor([1e6, -1e6, 0.3, -0.0, 1e-9, 2.0**-10, 17.5])
    assert torch.equal(edge.to(DEV).to(dtype).cpu().view(torch.uint8), edge.to(dtype).view(torch.uint8))
    torch.testing.assert_close(t.float().cpu(), ref.float(), rtol=0, atol=0, equal_nan=True)
    # Views and indexing ops, as the upstream test uses them.
    idx = torch.tensor([0, 5, 5, 2])
    assert torch.equal(torch.index_select(t, 1, idx.to(DEV)).cpu().view(torch.uint8), torch.index_select(ref, 1, idx).view(torch.uint8))
    nc = t.repeat_interleave(2, dim=-1)[..., ::2]
    assert torch.equal(nc.cpu().view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(torch.cat([t, t.T.contiguous().T]).cpu().view(torch.uint8), torch.cat([ref, ref]).view(torch.uint8))
    # Scalars are encoded on the host: fill values round as the CPU's.
    for v in (0.0, 1.0, -3.3, 200.0, 1e-3, float("nan")):
        got = torch.full((2,), v, dtype=dtype, device=DEV).cpu().view(torch.uint8)
        assert torch.equal(got, torch.full((2,), v, dtype=dtype).view(torch.uint8)) or v != v
    # c10's overflow check of a fill value and its refusal to promote.
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.full((2,), 1e6, dtype=dtype, device=DEV)
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        t + torch.ones(6, device=DEV)


def test_fill_value_overflow_into_floats_raises_as_on_cpu():
    # c10 refuses a fill value a float dtype cannot hold (found with the
    # float8 types; float16 had the same gap). NaN and infinities pass.
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        torch.full((2,), 1e6, dtype=torch.float16, device=DEV)
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(2, dtype=torch.bfloat16, device=DEV).fill_(1e39)
    for v in (float("inf"), float("-inf")):
        assert torch.full((2,), v, dtype=torch.float16, device=DEV).cpu().tolist() == [v, v]
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.full((2,), float("inf"), dtype=torch.float8_e4m3fn, device=DEV)
    assert torch.full((1,), float("nan"), dtype=torch.float8_e4m3fn, device=DEV).float().cpu().isnan().all()


@pytest.mark.parametrize("out_dtype", [None, torch.bfloat16, torch.float32])
def test_scaled_mm_of_float8_runs_natively(out_dtype):
    # torch._scaled_mm, the float8 matmul of torchao and of float8 training
    # recipes, with tensor-wide scales: computed in f32 on tpu, as the CPU
    # computes it, with no CPU fallback.
    import tpuc

    a = torch.randn(16, 32).to(torch.float8_e4m3fn)
    b = torch.randn(24, 32).to(torch.float8_e4m3fn).t()
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    bias = None if out_dtype is None else torch.randn(24, dtype=out_dtype)
    before = tpuc.fallback_report().get("aten::_scaled_mm", 0)
    ref = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
    got = torch._scaled_mm(a.to(DEV), b.to(DEV), sa.to(DEV), sb.to(DEV), bias=None if bias is None else bias.to(DEV), out_dtype=out_dtype)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    torch.testing.assert_close(got.cpu().float(), ref.float(), rtol=1e-2 if out_dtype else 0.13, atol=1e-2)
    assert tpuc.fallback_report().get("aten::_scaled_mm", 0) == before


def test_torchscript_index_put_with_a_mask_runs_natively():
    # PyTorch's test_indexing.py::test_jit_indexing: TorchScript passes the
    # Tensor?[] of index_put_ as a list of another element type; tpu took
    # it for no tensor list and the CPU fallback failed on it.
    import tpuc

    def fn1(x):
        x[x < 50] = 1.0
        return x

    def fn2(x):
        x[0:50] = 1.0
        return x

    before = dict(tpuc.fallback_report())
    data = torch.arange(100, device=DEV, dtype=torch.float)
    ref = torch.cat([torch.ones(50), torch.arange(50.0, 100.0)])
    for fn in (fn1, fn2):
        assert torch.equal(torch.jit.script(fn)(data.clone()).cpu(), ref)
    assert dict(tpuc.fallback_report()) == before


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_loop_over_rows_compiles_once(mode):
    # PyTorch's test_indexing.py loops (test_index_copy_deterministic,
    # test_index_reduce) write x[i] for i in a range: a row-major view's
    # offset is an operand of its program, so a new row reuses the program
    # (it compiled one per offset before).
    import tpuc

    with torch.tpu.eager_mode(mode):
        ref = torch.randn(12, 3, 5)
        src = torch.randn(12, 3, 5)
        x, s = ref.to(DEV), src.to(DEV)

        def step(i):
            ref[i] = src[(i + 1) % 12] * 2 + ref[i]
            x[i] = s[(i + 1) % 12] * 2 + x[i]
            ref.view(-1)[i * 7:i * 7 + 4].add_(1)
            x.view(-1)[i * 7:i * 7 + 4].add_(1)
            return float(x[i].sum()), float(ref[i].sum())

        for i in range(3):  # fused mode compiles a segment at its 3rd run
            step(i)
        before = tpuc._C.compile_cache_stats()["misses"]
        got, want = zip(*[step(i) for i in range(3, 11)])
        assert tpuc._C.compile_cache_stats()["misses"] == before
        assert torch.equal(x.cpu(), ref)
        assert got == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_loop_reading_columns_stops_compiling(mode):
    # PyTorch's test_index_copy_deterministic copies 40,000 columns one by
    # one (x[:, j, :] = src[:, i, :]): each read of a view with gaps at a new
    # offset compiled a program, and the test ran past its limit. A view
    # signature read at more than 8 offsets takes its offset as an operand;
    # the same three offsets (GPT-2's q, k, v) stay constants.
    import tpuc

    with torch.tpu.eager_mode(mode):
        src = torch.randn(4, 40, 3)
        ref = torch.zeros(4, 40, 3)
        s, x = src.to(DEV), ref.to(DEV)
        for i in range(12):  # past the threshold and fused mode's 3rd run
            x[:, (i * 7) % 40, :] = s[:, i, :] * 2
            ref[:, (i * 7) % 40, :] = src[:, i, :] * 2
        before = tpuc._C.compile_cache_stats()["misses"]
        for i in range(12, 40):
            x[:, (i * 7) % 40, :] = s[:, i, :] * 2
            ref[:, (i * 7) % 40, :] = src[:, i, :] * 2
            x[0, (i * 3) % 40, 1:] = s[1, i, :2]  # a read through a column too
            ref[0, (i * 3) % 40, 1:] = src[1, i, :2]
        x.sum().item()
        assert tpuc._C.compile_cache_stats()["misses"] - before <= 4
        assert torch.equal(x.cpu(), ref)


def _draws(n):
    """Random calls as model inits and tests make them: name -> tensor of n
    numbers drawn right after torch.manual_seed(5)."""
    makers = {
        "uniform_": lambda: torch.empty(n, device=DEV).uniform_(-2, 3),
        "normal_": lambda: torch.empty(n, device=DEV).normal_(1.0, 2.0),
        "randn float64": lambda: torch.randn(n, dtype=torch.float64, device=DEV),
        "bernoulli_": lambda: torch.empty(n, device=DEV).bernoulli_(0.3),
        "randint": lambda: torch.randint(0, 1000, (n,), device=DEV),
        "exponential_": lambda: torch.empty(n, device=DEV).exponential_(),
        "dropout": lambda: torch.nn.functional.dropout(torch.ones(n, device=DEV), 0.5),
    }
    out = {}
    for name, make in makers.items():
        torch.manual_seed(5)
        out[name] = make().cpu()
    return out


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_small_random_draws_are_the_first_numbers_of_large_ones(mode):
    # A random call of up to 16384 counters takes them from a program of
    # its count's bucket, shared by every shape in the bucket (PyTorch's
    # test_index_put_accumulate_duplicate_indices draws at 511 new lengths,
    # and each compiled Threefry: it ran past the upstream runner's limit);
    # a larger call computes them in its own program. Counter k gives the
    # same words either way: the small draw is the large one's beginning.
    with torch.tpu.eager_mode(mode):
        small, large = _draws(777), _draws(300_001)
        for name in small:
            assert torch.equal(small[name], large[name][:777]), name
        again = _draws(777)
        for name in small:
            assert torch.equal(small[name], again[name]), name


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_index_put_accumulate_of_a_random_walk_matches_the_cpu(mode):
    # PyTorch's test_index_put_accumulate_duplicate_indices: indices from a
    # random walk (duplicates interleaved, negatives among them) accumulated
    # into a new length each time.
    with torch.tpu.eager_mode(mode):
        for i in (1, 2, 7, 64, 129, 511):
            delta = torch.empty(i, dtype=torch.double, device=DEV).uniform_(-1, 1)
            indices = delta.cumsum(0).long()
            inp = torch.randn(int(indices.abs().max()) + 1, device=DEV)
            values = torch.randn(indices.size(0), device=DEV)
            out = inp.index_put((indices,), values, accumulate=True)
            want = inp.cpu().index_put((indices.cpu(),), values.cpu(), accumulate=True)
            torch.testing.assert_close(out.cpu(), want, rtol=1.3e-6, atol=1e-5)
