"""torch.tpu streams, events and autocast, and the synchronous debug mode."""

import os
import subprocess
import sys

import pytest
import torch


def test_streams_are_torch_streams():
    s = torch.tpu.Stream(priority=-1)
    assert isinstance(s, torch.Stream) and isinstance(s, torch.tpu.Stream)
    assert s.device == torch.device("tpu", 0)
    assert not isinstance(torch.Stream(device="cpu"), torch.tpu.Stream)
    default = torch.tpu.current_stream()
    assert default == torch.tpu.default_stream()
    assert s != default
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        assert torch.accelerator.current_stream() == s
        y = torch.ones(8, device="tpu") * 3
    assert torch.tpu.current_stream() == default
    s.wait_stream(default)
    s.synchronize()
    assert s.query()
    assert y.cpu().tolist() == [3.0] * 8


def test_events_record_query_and_time():
    x = torch.randn(128, 128, device="tpu")
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    assert isinstance(start, torch.Event) and isinstance(start, torch.tpu.Event)
    start.record()
    for _ in range(3):
        x = x @ x / 128
    end.record()
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert ms >= 0
    plain = torch.tpu.Event()
    plain.record()
    plain.wait()
    plain.synchronize()
    assert plain.query()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        plain.elapsed_time(end)


def test_autocast_tpu():
    x = torch.randn(16, 16, device="tpu")
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.amp.is_autocast_available("tpu")
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        mm = x @ x
        lin = torch.nn.functional.linear(x, x)
        soft = torch.softmax(mm, -1)          # a float32 op under autocast
        added = x + x                         # not an autocast op
    assert mm.dtype == lin.dtype == torch.bfloat16
    assert soft.dtype == torch.float32
    assert added.dtype == torch.float32
    with torch.autocast("tpu", dtype=torch.float16):
        assert (x @ x).dtype == torch.float16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = x.cpu() @ x.cpu()
    torch.testing.assert_close(mm.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_autocast_backward():
    lin = torch.nn.Linear(8, 4).to("tpu")
    x = torch.randn(3, 8, device="tpu")
    with torch.autocast("tpu"):
        loss = lin(x).float().pow(2).mean()
    loss.backward()
    assert lin.weight.grad.dtype == torch.float32
    assert torch.isfinite(lin.weight.grad.cpu()).all()


def test_launch_blocking_mode_runs_the_same():
    code = ("import torch\n"
            "x = torch.arange(6.0, device='tpu').reshape(2, 3)\n"
            "y = (x * 2 + 1).sum(0)\n"
            "print(y.cpu().tolist())\n")
    env = dict(os.environ, TPUC_LAUNCH_BLOCKING="1", TPUC_FALLBACK="silent")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[8.0, 12.0, 16.0]"


def test_torch_compile_backend_tpu():
    assert "tpu" in torch._dynamo.list_backends()
    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.Linear(5, 3))
    dev = lin.to("tpu")
    compiled = torch.compile(dev, backend="tpu")
    x = torch.randn(4, 6, device="tpu", requires_grad=True)
    y = compiled(x)
    assert y.is_tpu
    torch.testing.assert_close(y.cpu(), dev(x).cpu())
    y.pow(2).sum().backward()
    assert x.grad is not None and x.grad.is_tpu


def test_static_cache_generate_compiles_with_the_tpu_backend():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=32)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (1, 5))
    ref = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)
    dev = model.to("tpu")
    out = dev.generate(ids.to("tpu"), max_new_tokens=3, do_sample=False, pad_token_id=0,
                       cache_implementation="static")
    assert torch.equal(out.cpu(), ref)
