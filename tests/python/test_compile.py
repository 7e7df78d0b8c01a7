"""torch.compile on tpu: each graph becomes one PJRT program, replayed from
C with no per-op dispatch, with eager semantics (in-place inputs, aliasing,
random numbers, graph breaks, fallbacks, recompiles, the disk cache)."""

import copy
import os
import json
import subprocess
import sys
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")



@pytest.fixture(autouse=True)
def _fresh_dynamo(monkeypatch):
    # These tests count captures in one process; a record of the same graph
    # left in the disk cache by an earlier run would replace a capture.
    # Records across processes are tested below (children with their own
    # cache folder), and the model zoo runs with them on.
    monkeypatch.setenv("TPUC_GRAPH_RECORDS", "0")
    torch._dynamo.reset()
    torch.tpu.compile_reset_stats()
    yield
    torch._dynamo.reset()


def stats():
    return torch.tpu.compile_stats()


def recorded():
    torch.tpu.synchronize()
    return torch.tpu.fused_stats()["ops_recorded"]


def test_inference_graph_is_one_program_replayed_without_dispatch():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                            torch.nn.Linear(16, 4)).to("tpu")
    c = torch.compile(m, backend="tpu")
    x = torch.randn(3, 8, device="tpu")
    with torch.no_grad():
        c(x)
        assert stats()["captures"] == 1
        before, replays = recorded(), stats()["replays"]
        for _ in range(3):
            y = c(x)
        # No op went through the eager kernels: three replays of one program.
        assert recorded() == before
        assert stats()["replays"] == replays + 3
        torch.testing.assert_close(y.cpu(), m.cpu()(x.cpu()), atol=1e-5, rtol=1e-5)
    assert stats()["eager_graphs"] == 0


def test_default_backend_on_tpu_tensors_is_the_tpu_backend():
    m = torch.nn.Linear(4, 2).to("tpu")
    x = torch.randn(2, 4, device="tpu")
    with torch.no_grad():
        y = torch.compile(m)(x)  # Inductor has no tpu code generator
    assert y.is_tpu
    assert stats()["captures"] == 1
    torch.testing.assert_close(y.cpu(), m(x).cpu())


def test_mode_values_are_accepted():
    x = torch.randn(5, device="tpu")
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        torch._dynamo.reset()
        f = torch.compile(lambda a: a.sin() * 2, mode=mode)
        torch.testing.assert_close(f(x).cpu(), x.cpu().sin() * 2)
    f = torch.compile(lambda a: a.cos(), backend="tpu", mode="max-autotune")
    torch.testing.assert_close(f(x).cpu(), x.cpu().cos())


def test_input_mutation_updates_in_place_and_donates():
    def step(w, g, lr):
        w.sub_(g * lr)
        return w.sum()

    c = torch.compile(step, backend="tpu")
    w = torch.ones(64, 64, device="tpu")
    view = w[1]  # a view sees the in-place update
    g = torch.full((64, 64), 0.5, device="tpu")
    for _ in range(3):
        s = c(w, g, 0.1)
    torch.testing.assert_close(w.cpu(), torch.full((64, 64), 1 - 3 * 0.05))
    torch.testing.assert_close(view.cpu(), torch.full((64,), 1 - 3 * 0.05))
    torch.testing.assert_close(s.cpu(), torch.tensor(64 * 64 * (1 - 3 * 0.05)))
    # Nothing else held w's old values: their memory went to the new ones.
    assert stats()["donated"] >= 1


def test_held_input_is_not_donated_and_keeps_its_value():
    def bump(w):
        w.add_(1)
        return w * 2

    c = torch.compile(bump, backend="tpu")
    w = torch.zeros(4, device="tpu")
    c(w)
    keep = w.clone()  # a separate tensor: w's value is shared until written
    c(w)
    torch.testing.assert_close(keep.cpu(), torch.ones(4))
    torch.testing.assert_close(w.cpu(), torch.full((4,), 2.0))


def test_outputs_that_alias_inputs_and_each_other():
    def f(a):
        b = a.view(2, 3)
        c = (a * 2).view(3, 2)
        return b, c, c.t(), a

    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        a = torch.arange(6.0, device="tpu")
        b, c, ct, same = cf(a)
    a.add_(1)  # b views a's storage
    torch.testing.assert_close(b.cpu(), torch.arange(1.0, 7.0).view(2, 3))
    c.mul_(10)  # ct views c's storage
    torch.testing.assert_close(ct.cpu(), (torch.arange(6.0) * 20).view(3, 2).t())
    assert same is a


def test_kv_cache_written_in_place():
    def write(cache, pos, val):
        cache.index_copy_(1, pos, val)
        return cache.sum(-1)

    cw = torch.compile(write, backend="tpu")
    cache = torch.zeros(2, 6, 4, device="tpu")
    ref = torch.zeros(2, 6, 4)
    for i in range(4):
        v = torch.full((2, 1, 4), float(i + 1))
        out = cw(cache, torch.tensor([i], device="tpu"), v.to("tpu"))
        ref.index_copy_(1, torch.tensor([i]), v)
    torch.testing.assert_close(cache.cpu(), ref)
    torch.testing.assert_close(out.cpu(), ref.sum(-1))
    assert stats()["replays"] >= 3


def test_dropout_draws_from_the_tpu_generator_like_eager():
    drop = torch.nn.Dropout(0.5)

    def f(a):
        return drop(a) + 1

    x = torch.ones(256, device="tpu")
    torch.manual_seed(7)
    eager = [f(x).cpu() for _ in range(3)]
    after_eager = torch.tpu.default_generator(0).get_offset()
    cf = torch.compile(f, backend="tpu")
    torch.manual_seed(7)
    compiled = [cf(x).cpu() for _ in range(3)]
    # The same numbers as eager, call by call, and the generator advanced as
    # eager advances it.
    for e, c in zip(eager, compiled):
        assert torch.equal(e, c)
    assert not torch.equal(compiled[0], compiled[1])
    assert torch.tpu.default_generator(0).get_offset() == after_eager
    assert stats()["replays"] == 2


def test_graph_break_runs_the_rest_eagerly():
    def f(a):
        b = a * 2
        torch._dynamo.graph_break()
        return b + 1

    explain = torch._dynamo.explain(f)(torch.ones(3, device="tpu"))
    assert explain.graph_break_count == 1
    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        y = cf(torch.ones(3, device="tpu"))
    torch.testing.assert_close(y.cpu(), torch.full((3,), 3.0))
    assert stats()["captures"] == 2


def test_fallback_op_in_a_graph_splits_it_and_is_warned_counted_and_correct():
    import tpuc

    def f(a):
        # no native binomial: its CPU result is 0..2, clamped to 0
        return torch.binomial(a * 0 + 2.0, a * 0 + 0.5).clamp(max=0) + a * 3

    cf = torch.compile(f, backend="tpu")
    x = torch.ones(8, device="tpu")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y1 = cf(x)
    msgs = [str(i.message) for i in w]
    assert any("is split at torch.binomial" in m for m in msgs), msgs
    before = stats()
    ys = [cf(x * (i + 1)) for i in range(3)]
    torch.testing.assert_close(y1.cpu(), torch.full((8,), 3.0))
    for i, y in enumerate(ys):
        torch.testing.assert_close(y.cpu(), torch.full((8,), 3.0 * (i + 1)))
    st = stats()
    # The parts before and after binomial are programs of their own: each
    # later call replays both, binomial runs eagerly between them.
    assert st["split_graphs"] == 1 and st["split_parts"] == 2, st
    assert st["eager_graphs"] == 0, st["eager_reasons"]
    # (the first of those calls captures them)
    assert st["replays"] - before["replays"] >= 2 * 2, (before, st)
    assert any(r.startswith("torch.binomial") for r in st["split_reasons"]), st["split_reasons"]
    assert tpuc.fallback_report().get("aten::binomial", 0) >= 4


def test_fallback_op_on_a_graph_input_is_not_a_constant_of_replays():
    # binomial (no native lowering) reads only the graph's inputs (no
    # pending value to flush): its CPU result must still be recomputed at
    # every call, not replayed.
    cf = torch.compile(lambda a, p: torch.binomial(a, p) + a, backend="tpu")
    p = torch.full((64,), 0.5, device="tpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            y0 = cf(torch.zeros(64, device="tpu"), p).cpu()
            y1 = cf(torch.full((64,), 1e6, device="tpu"), p).cpu()
            torch.testing.assert_close(y0, torch.zeros(64))
            assert bool(((y1 - 1.5e6).abs() < 2e4).all()), y1
    assert stats()["split_graphs"] == 1


def test_graph_that_cannot_be_split_runs_op_by_op():
    # The only op of the graph breaks its capture: nothing is left to
    # compile, so the graph runs through the eager kernels and says why.
    cf = torch.compile(lambda a: torch.binomial(a, a), backend="tpu")
    x = torch.ones(4, device="tpu")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = cf(x)
    assert any("runs op by op" in str(i.message) for i in w), [str(i.message) for i in w]
    cf(x)
    assert y.shape == (4,) and bool((y.cpu() >= 0).all())
    st = stats()
    assert st["eager_graphs"] == 1 and st["eager_calls"] >= 1 and st["split_graphs"] == 0, st


def test_fallback_error_mode_raises_inside_a_graph():
    code = (
        "import torch\n"
        "f = torch.compile(lambda a: torch.binomial(a, a) + 1, backend='tpu')\n"
        "try:\n"
        "    f(torch.ones(3, device='tpu'))\n"
        "except NotImplementedError as e:\n"
        "    print('raised', 'binomial' in str(e))\n"
        "print(torch.ones(2, device='tpu').add(1).cpu().tolist())\n")
    env = dict(os.environ, TPUC_FALLBACK="error")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["raised", "True", "[2.0,", "2.0]"], out.stdout


def test_fullgraph_and_recompile_per_shape():
    def f(a):
        return (a * a).sum(0)

    cf = torch.compile(f, backend="tpu", fullgraph=True, dynamic=False)
    for n in (3, 5, 3):
        torch.testing.assert_close(cf(torch.ones(n, 2, device="tpu")).cpu(),
                                   torch.full((2,), float(n)))
    assert stats()["captures"] == 2  # 3 came back: its program is cached
    cd = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 5, 7, 5):
        torch.testing.assert_close(cd(torch.ones(n, 2, device="tpu")).cpu(),
                                   torch.full((2,), float(n)))
    st = stats()
    # dynamic=True: one program per concrete shape (the stated policy).
    assert st["captures"] == 5 and st["recompiles"] >= 2
    assert any("shape (3, 2)" in why for _, why in st["recompile_log"]), st["recompile_log"]
    x = torch.ones(4, 2, device="tpu")
    torch._dynamo.mark_dynamic(x, 0)
    torch.testing.assert_close(torch.compile(f, backend="tpu")(x).cpu(), torch.full((2,), 4.0))


def test_bad_inputs_raise_pytorchs_errors():
    cf = torch.compile(lambda a, b: a + b, backend="tpu")
    with pytest.raises(RuntimeError, match="same device|device"):
        cf(torch.ones(3, device="tpu"), torch.ones(3))
    # An unsupported dtype for the op: PyTorch's error type, device usable.
    cm = torch.compile(lambda a: a.matmul(a), backend="tpu")
    with pytest.raises((RuntimeError, TypeError)):
        cm(torch.ones(2, 2, dtype=torch.bool, device="tpu"))
    ci = torch.compile(lambda t, i: t[i], backend="tpu")
    t = torch.arange(4.0, device="tpu")
    ci(t, torch.tensor([1], device="tpu"))
    with pytest.raises(IndexError):
        ci(t, torch.tensor([9], device="tpu"))
    # Two index checks in one graph (one flag read for both): the second
    # fails, with PyTorch's error.
    c2 = torch.compile(lambda t, i, j: t[i] + t[j], backend="tpu")
    one = torch.tensor([1], device="tpu")
    torch.testing.assert_close(c2(t, one, one).cpu(), torch.tensor([2.0]))
    torch.testing.assert_close(c2(t, one, torch.tensor([3], device="tpu")).cpu(),
                               torch.tensor([4.0]))
    with pytest.raises(IndexError):
        c2(t, one, torch.tensor([7], device="tpu"))
    assert torch.ones(2, device="tpu").add(1).cpu().tolist() == [2.0, 2.0]


def _inputs(kind, device):
    torch.manual_seed(1)
    ids = torch.randint(1, 64, (2, 8))
    if kind == "lm":
        return {"input_ids": ids.to(device), "labels": ids.to(device)}
    if kind == "image":
        return {"pixel_values": torch.randn(2, 3, 16, 16).to(device),
                "labels": torch.tensor([1, 4]).to(device)}
    return {"input": torch.randn(2, 3, 16, 16).to(device)}


def _compiled_train(model, kind, steps=3):
    torch.manual_seed(1)
    ids = torch.randint(1, 64, (2, 8))
    pixels = torch.randn(2, 3, 16, 16)
    labels = torch.tensor([1, 4])
    model = copy.deepcopy(model).to("tpu").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    cm = torch.compile(model, backend="tpu")

    @torch.compile(backend="tpu")
    def opt_step():
        opt.step()

    losses, replays = [], []
    for _ in range(steps):
        before = stats()["replays"]
        if kind == "lm":
            loss = cm(input_ids=ids.to("tpu"), labels=ids.to("tpu")).loss
        elif kind == "image":
            loss = cm(pixel_values=pixels.to("tpu"), labels=labels.to("tpu")).loss
        else:
            loss = torch.nn.functional.cross_entropy(cm(pixels.to("tpu")), labels.to("tpu"))
        loss.backward()
        opt_step()
        opt.zero_grad()
        replays.append(stats()["replays"] - before)
        losses.append(float(loss.detach().cpu()))
    return losses, {k: v.cpu() for k, v in model.state_dict().items()}, replays


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen3", "t5", "vit", "cnn"])
def test_model_zoo_compiled_training(name, monkeypatch):
    monkeypatch.setenv("TPUC_GRAPH_RECORDS", "1")
    from test_eager_modes import _assert_states_close, _train_steps, _zoo_model

    model, kind = _zoo_model(name)
    # Graph breaks: only those the model has on any device (the CPU's
    # count, what CUDA gets too), none of tpu's own.
    breaks = {}
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(dev).train()
        torch._dynamo.reset()
        breaks[dev] = torch._dynamo.explain(m)(**_inputs(kind, dev)).graph_break_count
    assert breaks["tpu"] == breaks["cpu"], breaks
    torch._dynamo.reset()
    losses, state, replays = _compiled_train(model, kind)
    st = stats()
    assert st["eager_graphs"] == 0, st["eager_reasons"]
    # The last step: one program per forward graph, per backward graph and
    # for the optimizer (3 in all for a model without graph breaks; ViT
    # recompiles its forward once, on any device, as its loss sets
    # config.problem_type on the first call).
    if breaks["cpu"] == 0:
        assert replays[-1] == 3, (replays, st)
    else:
        assert 3 < replays[-1] <= 2 * (breaks["cpu"] + 1) + 1, (replays, breaks)
    eager_losses, eager_state = _train_steps(model, kind, "tpu", steps=3)
    cpu_losses, _ = _train_steps(model, kind, "cpu", steps=3)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(cpu_losses),
                               atol=1e-4, rtol=1e-4)
    _assert_states_close(state, eager_state, "compiled")


def test_static_cache_generate_compiles_once_and_matches_eager():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                                  n_positions=64)
    model = transformers.GPT2LMHeadModel(cfg).eval().to("tpu")
    ids = torch.randint(0, 64, (1, 5), device="tpu")
    ref = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
    out = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0,
                         cache_implementation="static",
                         compile_config=transformers.CompileConfig(backend="tpu"))
    assert torch.equal(out.cpu(), ref.cpu())
    st = stats()
    assert st["replays"] >= 4 and st["eager_graphs"] == 0, st
    # A second generate compiles nothing: every decoding step replays.
    again = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0,
                           cache_implementation="static",
                           compile_config=transformers.CompileConfig(backend="tpu"))
    assert torch.equal(again.cpu(), ref.cpu())
    st2 = stats()
    assert st2["captures"] == st["captures"], (st, st2)
    assert st2["replays"] >= st["replays"] + 7, (st, st2)


_DISK_CHILD = (
    "import torch\n"
    "m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()).to('tpu')\n"
    "torch.manual_seed(0)\n"
    "for p in m.parameters():\n"
    "    torch.nn.init.constant_(p, 0.1)\n"
    "with torch.no_grad():\n"
    "    y = torch.compile(m, backend='tpu')(torch.ones(2, 16, device='tpu'))\n"
    "s = torch.tpu.compile_stats()\n"
    "print(s['compiles'], s['disk_hits'], round(float(y.sum().cpu()), 4))\n")


def test_a_new_process_loads_the_graph_from_the_disk_cache(tmp_path):
    env = dict(os.environ, TPUC_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", _DISK_CHILD], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first, second = (r.stdout.split() for r in runs)
    assert first[:2] == ["1", "0"], first
    assert second[:2] == ["0", "1"], second  # loaded, not compiled
    assert first[2] == second[2]


# A training step (forward + loss + backward with dropout, then AdamW, each
# compiled) and an embedding graph whose index check fails on a bad id.
_RECORD_CHILD = r'''
import json, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Dropout(0.1),
                        torch.nn.Linear(32, 4)).to("tpu")
opt = torch.optim.AdamW(m.parameters(), lr=1e-2)

@torch.compile(backend="tpu")
def step(x, y):
    loss = torch.nn.functional.mse_loss(m(x), y * 0.5)
    loss.backward()
    return loss

@torch.compile(backend="tpu")
def update():
    opt.step()
    opt.zero_grad()

g = torch.Generator().manual_seed(1)
x = torch.randn(8, 16, generator=g).to("tpu")
y = torch.randn(8, 4, generator=g).to("tpu")
losses = []
for _ in range(3):
    losses.append(step(x, y).item())
    update()
emb = torch.nn.Embedding(10, 4).to("tpu")
look = torch.compile(lambda i: emb(i) * 2, backend="tpu")
ok = look(torch.tensor([1, 2, 3], device="tpu")).sum().item()
try:
    look(torch.tensor([1, 20, 3], device="tpu")).cpu()
    bad = "no error"
except IndexError:
    bad = "IndexError"
s = torch.tpu.compile_stats()
print(json.dumps({"losses": losses, "weight": m[0].weight.sum().item(), "ok": ok,
                  "bad": bad, "rng": torch.randn(1, device="tpu").item(),
                  **{k: s[k] for k in ("captures", "records_saved", "records_loaded",
                                       "eager_graphs")}}))
'''


def _record_run(env):
    r = subprocess.run([sys.executable, "-c", _RECORD_CHILD], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_new_process_replays_recorded_graphs_without_capturing(tmp_path):
    env = dict(os.environ, TPUC_CACHE_DIR=str(tmp_path), TPUC_GRAPH_RECORDS="1")
    first = _record_run(env)
    assert first["captures"] == 4 and first["records_saved"] == 4, first
    second = _record_run(env)
    # Every graph (forward, backward, optimizer, embedding) comes from its
    # record: no capture, the same values, the same generator state after.
    assert second["captures"] == 0 and second["records_loaded"] == 4, second
    for k in ("losses", "weight", "ok", "bad", "rng"):
        assert first[k] == second[k], (k, first, second)
    assert first["bad"] == "IndexError"
    # A corrupt record is ignored: the graph is captured again, rightly.
    recs = list(tmp_path.rglob("*.tpr"))
    assert len(recs) == 4, recs
    for p in recs:
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
    third = _record_run(env)
    assert third["captures"] == 4 and third["records_loaded"] == 0, third
    assert third["losses"] == first["losses"] and third["weight"] == first["weight"]
    # Off: nothing is recorded or loaded.
    off = _record_run(dict(env, TPUC_GRAPH_RECORDS="0"))
    assert off["captures"] == 4 and off["records_loaded"] == 0 and off["records_saved"] == 0, off


_RECORD_GPT2_CHILD = r'''
import json, torch, transformers
torch.manual_seed(0)
cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=16)
model = transformers.GPT2LMHeadModel(cfg).to("tpu").train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
cm = torch.compile(model, backend="tpu")

@torch.compile(backend="tpu")
def update():
    opt.step()
    opt.zero_grad()

ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1)).to("tpu")
losses = []
for _ in range(2):
    loss = cm(input_ids=ids, labels=ids).loss
    loss.backward()
    update()
    losses.append(loss.item())
s = torch.tpu.compile_stats()
print(json.dumps({"losses": losses,
                  "params": [p.sum().item() for p in model.parameters()][:6],
                  **{k: s[k] for k in ("captures", "records_saved", "records_loaded",
                                       "eager_graphs")}}))
'''


def test_recorded_gpt2_training_graphs_replay_in_a_new_process(tmp_path):
    # AOTAutograd's forward and backward graphs of a Hugging Face model and
    # the optimizer's graph are keyed the same in every process.
    env = dict(os.environ, TPUC_CACHE_DIR=str(tmp_path), TPUC_GRAPH_RECORDS="1")
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _RECORD_GPT2_CHILD], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    # Two forward and two backward graphs (GPT-2's forward has a graph
    # break on every device) and the optimizer's, each recorded.
    assert first["captures"] == first["records_saved"] >= 3, first
    assert second["captures"] == 0 and second["records_loaded"] == first["records_saved"], second
    assert first["losses"] == second["losses"] and first["params"] == second["params"]
    assert second["eager_graphs"] == 0


def test_compiled_autograd_step_matches_eager():
    # Compiled autograd hands the backend a graph whose one input is a list
    # of tensors; its items are the program's inputs. (Dynamo's config is
    # patched with its own context manager: pytest's monkeypatch deletes a
    # config entry when it restores it.)

    def run(dev, compiled):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1)).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=0.1)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3)).to(dev)

        def step():
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        f = torch.compile(step, backend="tpu") if compiled else step
        losses = [f().item() for _ in range(4)]
        return losses, {k: v.cpu() for k, v in m.state_dict().items()}

    with torch._dynamo.config.patch(compiled_autograd=True):
        cpu_losses, cpu_state = run("cpu", False)
        torch.tpu.compile_reset_stats()
        losses, state = run("tpu", True)
    st = stats()
    assert st["eager_graphs"] == 0 and st["split_graphs"] == 0, st
    assert st["captures"] == 3 and st["replays"] == 9, st  # 3 programs a step
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(cpu_losses),
                               atol=1e-5, rtol=1e-4)
    for k in cpu_state:
        torch.testing.assert_close(state[k], cpu_state[k], atol=1e-4, rtol=1e-4)


@torch.library.custom_op("tpuc_test::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_twice.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_graph_with_a_custom_op_is_not_recorded(monkeypatch):
    # A record names ops, not their implementations: a custom op's may
    # change between processes, so its graph is captured in each.
    monkeypatch.setenv("TPUC_GRAPH_RECORDS", "1")
    f = torch.compile(lambda a: torch.ops.tpuc_test.twice(a) + 1, backend="tpu")
    y = f(torch.ones(3, device="tpu"))
    torch.testing.assert_close(y.cpu(), torch.full((3,), 3.0))
    st = stats()
    assert st["captures"] == 1 and st["records_saved"] == 0 and st["records_loaded"] == 0, st
