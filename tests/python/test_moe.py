"""What transformers runs differently on accelerators than on the CPU:
grouped matrix products and histograms of integer expert ids (its default
"grouped_mm" experts), bincount, SDPA's backend selections, FlexAttention,
static and sliding-window caches. Each runs natively on tpu (no CPU
fallback) and agrees with the CPU."""

import pytest
import torch
import torch.nn.functional as F

import tpuc

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def _tpu(*xs):
    return [x.to("tpu") for x in xs]


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def _grouped(layout, dt):
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float32).to(dt)
    if layout == "2d3d":  # rows of a split by offs; rows past 8 unused
        return r(10, 16), r(3, 16, 8), _offs(2, 5, 8)
    if layout == "3d2d":  # columns of b split by offs
        return r(3, 8, 16), r(16, 24).t().contiguous().t(), _offs(8, 8, 20)
    if layout == "2d2d":  # the contraction split by offs (weight gradients)
        return r(16, 8).t(), r(16, 8), _offs(3, 3, 14)
    return r(3, 8, 16), r(3, 16, 8), None  # 3d3d: a batched product


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["2d3d", "3d2d", "2d2d", "3d3d"])
def test_grouped_mm_matches_cpu(layout, dt):
    a, b, offs = _grouped(layout, dt)
    ref = torch._grouped_mm(a, b, offs=offs)
    tpuc.fallback_reset()
    out = torch._grouped_mm(*_tpu(a, b), offs=None if offs is None else offs.to("tpu"))
    assert tpuc.fallback_report() == {}
    assert out.dtype == dt and out.shape == ref.shape
    got = out.cpu()
    if layout == "2d3d":
        # The CPU leaves rows past offs[-1] unwritten; tpu writes zeros.
        assert torch.equal(got[8:], torch.zeros_like(got[8:]))
        got, ref = got[:8], ref[:8]
    if layout == "3d2d":
        got, ref = got[:, :20], ref[:, :20]
    torch.testing.assert_close(got, ref, atol=TOL[dt], rtol=TOL[dt])


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
def test_grouped_mm_tiled_matches_cpu(dt):
    # Enough rows for the tiled lowering (cut every 64 rows and at each
    # group end): uneven groups, an empty one, rows past the last.
    g = torch.Generator().manual_seed(4)
    r = lambda *s: torch.randn(*s, generator=g).to(dt)
    offs = _offs(10, 10, 150, 200, 290)
    for a, b, rows in [(r(300, 16), r(5, 16, 24), 290),  # rows split
                       (r(300, 16).t(), r(300, 24), None)]:  # contraction split
        ref = torch._grouped_mm(a, b, offs=offs)
        tpuc.fallback_reset()
        got = torch._grouped_mm(*_tpu(a, b), offs=offs.to("tpu")).cpu()
        assert tpuc.fallback_report() == {}
        if rows is not None:
            assert torch.equal(got[rows:], torch.zeros_like(got[rows:]))
            got, ref = got[:rows], ref[:rows]
        torch.testing.assert_close(got, ref, atol=TOL[dt] * 3, rtol=TOL[dt] * 3)
    a, w = torch.randn(300, 16, generator=g), torch.randn(5, 16, 24, generator=g)
    grad = torch.randn(300, 24, generator=g)
    grad[290:] = 0
    ac, wc = a.clone().requires_grad_(), w.clone().requires_grad_()
    torch._grouped_mm(ac, wc, offs=offs).backward(grad)
    at, wt = (x.to("tpu").requires_grad_() for x in (a, w))
    torch._grouped_mm(at, wt, offs=offs.to("tpu")).backward(grad.to("tpu"))
    torch.testing.assert_close(at.grad.cpu()[:290], ac.grad[:290], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(wt.grad.cpu(), wc.grad, atol=1e-4, rtol=1e-4)


def test_grouped_mm_gradients_match_cpu():
    a, b, offs = _grouped("2d3d", torch.float32)
    grad = torch.randn(10, 8)
    grad[8:] = 0
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch._grouped_mm(ac, bc, offs=offs).backward(grad)
    at, bt = (x.to("tpu").requires_grad_() for x in (a, b))
    tpuc.fallback_reset()
    torch._grouped_mm(at, bt, offs=offs.to("tpu")).backward(grad.to("tpu"))
    assert tpuc.fallback_report() == {}
    torch.testing.assert_close(at.grad.cpu()[:8], ac.grad[:8])
    torch.testing.assert_close(bt.grad.cpu(), bc.grad)


BAD_GROUPED = {
    "double": lambda d: (torch.randn(10, 8, device=d, dtype=torch.float64),
                         torch.randn(3, 8, 8, device=d, dtype=torch.float64),
                         dict(offs=_offs(2, 5, 8).to(d))),
    "int64 offs": lambda d: (torch.randn(10, 8, device=d), torch.randn(3, 8, 8, device=d),
                             dict(offs=_offs(2, 5, 8).long().to(d))),
    "bias": lambda d: (torch.randn(10, 8, device=d), torch.randn(3, 8, 8, device=d),
                       dict(offs=_offs(2, 5, 8).to(d), bias=torch.randn(3, 8, device=d))),
    "mixed dtypes": lambda d: (torch.randn(10, 8, device=d),
                               torch.randn(3, 8, 8, device=d, dtype=torch.bfloat16),
                               dict(offs=_offs(2, 5, 8).to(d))),
    "no offs": lambda d: (torch.randn(10, 8, device=d), torch.randn(3, 8, 8, device=d), {}),
    "contraction": lambda d: (torch.randn(10, 16, device=d), torch.randn(3, 8, 8, device=d),
                              dict(offs=_offs(2, 5, 8).to(d))),
    "groups": lambda d: (torch.randn(10, 8, device=d), torch.randn(3, 8, 8, device=d),
                         dict(offs=_offs(2, 8).to(d))),
    "1-D": lambda d: (torch.randn(8, device=d), torch.randn(3, 8, 8, device=d),
                      dict(offs=_offs(2, 5, 8).to(d))),
    "out_dtype": lambda d: (torch.randn(10, 8, device=d), torch.randn(3, 8, 8, device=d),
                            dict(offs=_offs(2, 5, 8).to(d), out_dtype=torch.bfloat16)),
}


@pytest.mark.parametrize("case", sorted(BAD_GROUPED))
def test_grouped_mm_bad_input_raises_as_cpu(case):
    a, b, kw = BAD_GROUPED[case]("cpu")
    with pytest.raises(Exception) as cpu:
        torch._grouped_mm(a, b, **kw)
    a, b, kw = BAD_GROUPED[case]("tpu")
    with pytest.raises(type(cpu.value)) as tpu:
        torch._grouped_mm(a, b, **kw)
    assert str(cpu.value).splitlines()[0] in str(tpu.value)


def _same(cpu, tpu):
    assert tpu.dtype == cpu.dtype and tpu.device.type == "tpu"
    assert torch.equal(tpu.cpu(), cpu), (cpu, tpu.cpu())


@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_histc_floats_match_cpu(dt):
    g = torch.Generator().manual_seed(0)
    x = torch.tensor([0.0, 1, 2, 3, 3, 2.5, float("nan"), -1, 4]).to(dt)
    # Counts stay small: the CPU counts in the input dtype, which is not
    # exact past 256 in bfloat16.
    r = torch.randn(400, generator=g).to(dt)
    cases = [
        (x, dict(bins=4, min=0, max=3)),
        (x, dict(bins=4, min=0.5, max=3.5)),
        (r, dict(bins=37, min=-2, max=2.5)),
        (r, dict(bins=13)),  # the data's range
        (torch.arange(0, 1.0001, 0.01).to(dt), dict(bins=10, min=0, max=1)),  # edges
        (torch.tensor([2.0, 2, 2]).to(dt), dict(bins=4)),  # one value: widened
        (torch.tensor([]).to(dt), dict(bins=4)),
        (torch.randn(7, 9, generator=g).to(dt), dict(bins=5, min=-1, max=1)),
    ]
    tpuc.fallback_reset()
    for v, kw in cases:
        _same(torch.histc(v, **kw), torch.histc(v.to("tpu"), **kw))
    assert tpuc.fallback_report() == {}


@pytest.mark.parametrize("dt", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_histc_of_integer_expert_ids(dt):
    # The CPU refuses integer histc; CUDA takes it, and transformers'
    # grouped_mm experts count tokens per expert with it on accelerators.
    ids = torch.randint(0, 8, (1000,), generator=torch.Generator().manual_seed(0)).to(dt)
    tpuc.fallback_reset()
    got = torch.histc(ids.to("tpu"), bins=8, min=0, max=7)
    assert tpuc.fallback_report() == {}
    assert got.dtype == dt
    assert torch.equal(got.cpu(), torch.bincount(ids.long(), minlength=8).to(dt))
    auto = torch.histc(ids.to("tpu"), bins=8)  # range from the data
    assert torch.equal(auto.cpu(), torch.histc(ids.float(), bins=8).to(dt))
    # Ids outside [min, max] (expert-parallel sentinels) are not counted.
    wide = torch.tensor([-3, 0, 1, 7, 8, 11], dtype=torch.int32)
    assert torch.histc(wide.to("tpu"), bins=8, min=0, max=7).cpu().tolist() == [1, 1, 0, 0, 0, 0, 0, 1]


def test_bincount_matches_cpu():
    # Older MoE code counts tokens per expert with bincount (its length
    # depends on the data: one host read, as on CUDA).
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 9, (500,), generator=g)
    w = torch.rand(500, generator=g)
    tpuc.fallback_reset()
    for x, kw in [(ids, {}), (ids, dict(minlength=20)), (ids.int(), {}), (ids.to(torch.uint8), {}),
                  (ids, dict(weights=w)), (ids, dict(weights=w.double())), (ids, dict(weights=ids)),
                  (torch.tensor([], dtype=torch.long), dict(minlength=3))]:
        kwt = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        ref, got = torch.bincount(x, **kw), torch.bincount(x.to("tpu"), **kwt)
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got.cpu(), ref)
    assert tpuc.fallback_report() == {}
    for x, kw in [(torch.tensor([-1, 2]), {}), (torch.tensor([[1]]), {}), (ids, dict(minlength=-1)),
                  (ids, dict(weights=torch.ones(3)))]:
        with pytest.raises(RuntimeError) as cpu:
            torch.bincount(x, **kw)
        kwt = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        with pytest.raises(RuntimeError) as tpu:
            torch.bincount(x.to("tpu"), **kwt)
        assert str(cpu.value) in str(tpu.value)


def test_histc_bad_input_raises_as_cpu():
    x = torch.tensor([0.0, 1, float("nan")])
    for kw in [dict(bins=0), dict(bins=4, min=3, max=1), dict(bins=4, min=0, max=float("inf")), dict(bins=4)]:
        with pytest.raises(RuntimeError) as cpu:
            torch.histc(x, **kw)
        with pytest.raises(RuntimeError) as tpu:
            torch.histc(x.to("tpu"), **kw)
        assert str(cpu.value) in str(tpu.value)
    out = torch.empty(4, device="tpu")
    torch.histc(x.to("tpu"), bins=4, min=0, max=1, out=out)
    assert out.cpu().tolist() == [1, 0, 0, 1]


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_sdpa_backend_selections_run_natively(dt):
    # Code written for CUDA pins SDPA backends; on tpu each selection runs
    # the native attention and agrees with the CPU.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 7, 16, generator=g).to(dt)
    k, v = (torch.randn(2, 2, 7, 16, generator=g).to(dt) for _ in range(2))
    mask = torch.ones(2, 1, 7, 7, dtype=torch.bool).tril()
    mask[0, :, :, :3] = False  # left padding: fully masked rows
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    tpuc.fallback_reset()
    for backend in [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.MATH, SDPBackend.OVERRIDEABLE]:
        with sdpa_kernel([backend]):
            out = F.scaled_dot_product_attention(*_tpu(q, k, v), attn_mask=mask.to("tpu"), enable_gqa=True)
        torch.testing.assert_close(out.cpu(), ref, atol=TOL[dt] * 5, rtol=TOL[dt] * 5)
    assert tpuc.fallback_report() == {}


def test_flex_attention_on_tpu():
    # PyTorch's FlexAttention refuses devices outside its list;
    # tpuc.integrations lets tpu tensors through, and both its paths run
    # natively: eager (the dense reference) and compiled, with a block mask
    # built on tpu, a score_mod, and gradients.
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 4, 128, 16, generator=g) for _ in range(3))
    causal = lambda b, h, qi, ki: qi >= ki
    bias = lambda s, b, h, qi, ki: s + (qi - ki) * 0.01
    # The same attention written out on the CPU, for values and gradients.
    qc, kc, vc = (x.clone().requires_grad_() for x in (q, k, v))
    i = torch.arange(128)
    s = qc @ kc.transpose(-1, -2) / 4.0 + (i[:, None] - i[None, :]) * 0.01
    ref = s.masked_fill(i[:, None] < i[None, :], float("-inf")).softmax(-1) @ vc
    ref.sum().backward()
    mask = create_block_mask(causal, 2, 4, 128, 128, device="tpu")
    tpuc.fallback_reset()
    for run in (flex_attention, torch.compile(flex_attention)):
        qt, kt, vt = (x.to("tpu").requires_grad_() for x in (q, k, v))
        out = run(qt, kt, vt, score_mod=bias, block_mask=mask)
        out.sum().backward()
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
        for a, b in ((qt, qc), (kt, kc), (vt, vc)):
            torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-5, rtol=1e-4)
    assert tpuc.fallback_report() == {}


def test_transformers_flex_attention_trains_like_sdpa():
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("llama", vocab_size=96, hidden_size=32, intermediate_size=48,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                               max_position_embeddings=64)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(6))
    am = torch.ones(2, 12, dtype=torch.long)
    am[0, :3] = 0  # left padding
    ref = model(ids, attention_mask=am, labels=ids)
    ref.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.set_attn_implementation("flex_attention")  # refused for tpu without tpuc
    model.to("tpu")
    tpuc.fallback_reset()
    out = model(ids.to("tpu"), attention_mask=am.to("tpu"), labels=ids.to("tpu"))
    out.loss.backward()
    assert tpuc.fallback_report() == {}
    torch.testing.assert_close(out.logits.cpu()[1], ref.logits[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss.cpu(), ref.loss, atol=1e-5, rtol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad.cpu(), grads[n], atol=1e-5, rtol=1e-4, msg=n)


def _moe_config(arch):
    from transformers import AutoConfig

    base = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                num_experts_per_tok=2, head_dim=8)
    extra = {
        "qwen3_moe": dict(num_experts=4, moe_intermediate_size=16),
        "mixtral": dict(num_local_experts=4),
        "gpt_oss": dict(num_local_experts=4, sliding_window=8),  # biases, transposed weights, sinks
    }[arch]
    return AutoConfig.for_model(arch, **base, **extra)


@pytest.mark.parametrize("arch,impl", [("qwen3_moe", None), ("mixtral", None), ("gpt_oss", None),
                                       ("qwen3_moe", "batched_mm"), ("qwen3_moe", "eager")])
def test_moe_model_trains_natively_like_cpu(arch, impl):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    kw = {} if impl is None else dict(experts_implementation=impl)
    model = AutoModelForCausalLM.from_config(_moe_config(arch), **kw)
    assert model.config._experts_implementation == (impl or "grouped_mm")
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    ref = model(ids, labels=ids)
    ref.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.to("tpu")
    tpuc.fallback_reset()
    out = model(ids.to("tpu"), labels=ids.to("tpu"))
    out.loss.backward()
    assert tpuc.fallback_report() == {}
    torch.testing.assert_close(out.logits.cpu(), ref.logits, atol=1e-5, rtol=1e-5)
    for n, p in model.named_parameters():
        if n in grads:
            torch.testing.assert_close(p.grad.cpu(), grads[n], atol=1e-5, rtol=1e-4, msg=n)


CACHE_ARCHS = {
    "llama": dict(),
    "mistral": dict(sliding_window=6),  # every layer a sliding window
    "gemma3_text": dict(sliding_window=6, head_dim=8, query_pre_attn_scalar=8,
                        sliding_window_pattern=2),  # sliding and full layers
}


@pytest.mark.parametrize("arch", sorted(CACHE_ARCHS))
@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_generate_with_static_and_sliding_caches_matches_cpu(arch, cache):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(arch, vocab_size=96, hidden_size=32, intermediate_size=48,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                               max_position_embeddings=64, pad_token_id=0, eos_token_id=None,
                               bos_token_id=1, **CACHE_ARCHS[arch])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.randint(2, 96, (2, 5), generator=torch.Generator().manual_seed(2))
    # 12 new tokens after 5: past the sliding window of 6.
    kw = dict(max_new_tokens=12, do_sample=False,
              cache_implementation=None if cache == "dynamic" else cache)
    with torch.no_grad():
        ref = model.generate(ids, **kw)
        model.to("tpu")
        tpuc.fallback_reset()
        out = model.generate(ids.to("tpu"), **kw)
    assert tpuc.fallback_report() == {}
    assert torch.equal(out.cpu(), ref)
