"""The three eager modes (debug, strict, fused): selection, equivalence of
results (bitwise for integers, bools and random streams), what fused mode
materializes and why, its compilation cache, and errors at the failing op."""

import copy
import os
import subprocess
import sys
import threading

import pytest
import torch

transformers = pytest.importorskip("transformers")

MODES = ("debug", "strict", "fused")


@pytest.fixture(autouse=True)
def _restore_mode():
    before = torch.tpu.get_eager_mode()
    yield
    torch.tpu.set_eager_mode(None, thread_local=True)
    torch.tpu.set_eager_mode(before)


@pytest.fixture(autouse=True)
def _fuse_at_the_first_run(monkeypatch):
    """Most tests here are about segment programs: they compile a segment at
    its first run (TPUC_FUSE_AFTER=1; children inherit it). By default a
    segment runs op by op once first; the tests of that unset it."""
    monkeypatch.setenv("TPUC_FUSE_AFTER", "1")


# ------------------------------------------------------------- selection


def test_mode_selection_global_thread_context_decorator():
    torch.tpu.set_eager_mode("strict")
    assert torch.tpu.get_eager_mode() == "strict"
    with torch.tpu.eager_mode("fused"):
        assert torch.tpu.get_eager_mode() == "fused"
        with torch.tpu.eager_mode("debug"):
            assert torch.tpu.get_eager_mode() == "debug"
        assert torch.tpu.get_eager_mode() == "fused"
        # Another thread follows the global mode, not this thread's.
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.tpu.get_eager_mode()))
        t.start()
        t.join()
        assert seen == ["strict"]
    assert torch.tpu.get_eager_mode() == "strict"

    @torch.tpu.eager_mode("debug")
    def f():
        return torch.tpu.get_eager_mode()

    assert f() == "debug" and torch.tpu.get_eager_mode() == "strict"
    torch.tpu.set_eager_mode("fused", thread_local=True)
    assert torch.tpu.get_eager_mode() == "fused"
    torch.tpu.set_eager_mode(None, thread_local=True)
    assert torch.tpu.get_eager_mode() == "strict"
    with pytest.raises(ValueError, match="debug, strict or fused|'debug'"):
        torch.tpu.set_eager_mode("lazy")
    with pytest.raises(ValueError):
        torch.tpu.eager_mode("sometimes")


def _child(code, **env):
    """Runs `code` after `import torch` in a new process, with `env` over
    this one's environment (a None value removes the variable); returns
    its last line of output."""
    return _child_all(code, **env).splitlines()[-1]


def _child_all(code, **env):
    """As _child, but all of the output."""
    e = dict(os.environ)
    e.update(env)
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
    out = subprocess.run([sys.executable, "-c", "import torch\n" + code], env=e,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_mode_from_environment():
    assert _child("print(torch.tpu.get_eager_mode())", TPUC_EAGER_MODE="debug") == "debug"
    assert _child("print(torch.tpu.get_eager_mode())", TPUC_EAGER_MODE="strict") == "strict"


# ------------------------------------------------------------- equivalence


def _program(seed=0):
    """A mix of float, integer, bool, in-place, view and random ops."""
    torch.tpu.manual_seed(seed)  # dropout draws from the default generator
    g = torch.Generator(device="tpu").manual_seed(seed)
    x = torch.randn(6, 5, device="tpu", generator=g)
    w = torch.rand(5, 4, device="tpu", generator=g)
    i = torch.randint(0, 100, (6, 4), device="tpu", generator=g)
    y = torch.nn.functional.gelu(x @ w) * 0.5 + 1.0
    y[1:3].mul_(2.0)
    v = y.t()[0]
    v.add_(i[:, 0].float())
    z = torch.softmax(y, dim=-1).cumsum(0)
    ints = (i * 3 + 7) % 11
    ints.add_(i.sum(0, keepdim=True))
    mask = (y > 1.2) & (ints % 2 == 0)
    drop = torch.nn.functional.dropout(y, 0.3, training=True)
    return {"y": y, "z": z, "ints": ints, "mask": mask, "drop": drop,
            "idx": torch.argsort(y, dim=1), "noise": torch.randn(3, 3, device="tpu", generator=g)}


def test_modes_agree_on_ops_bitwise_for_integers_bools_and_rng():
    results = {}
    for mode in MODES:
        with torch.tpu.eager_mode(mode):
            results[mode] = {k: v.cpu() for k, v in _program().items()}
    ref = results["strict"]
    for mode in ("debug", "fused"):
        got = results[mode]
        for k in ("ints", "mask", "idx"):
            assert torch.equal(got[k], ref[k]), (mode, k)
        for k in ("y", "z", "drop", "noise"):
            torch.testing.assert_close(got[k], ref[k], atol=1e-6, rtol=1e-6, msg=f"{mode} {k}")
        # The random stream is the same numbers in every mode.
        assert torch.equal(got["noise"], ref["noise"]), mode
        assert torch.equal(got["drop"] == 0, ref["drop"] == 0), mode


def _models():
    torch.manual_seed(0)
    out = []
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64)
    out.append(("bert", transformers.BertForMaskedLM(cfg), "lm"))
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32)
    out.append(("gpt2", transformers.GPT2LMHeadModel(cfg), "lm"))
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    out.append(("llama", transformers.LlamaForCausalLM(cfg), "lm"))
    cfg = transformers.Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
    out.append(("qwen3", transformers.Qwen3ForCausalLM(cfg), "lm"))
    cfg = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                                decoder_start_token_id=0, pad_token_id=0)
    out.append(("t5", transformers.T5ForConditionalGeneration(cfg), "lm"))
    cfg = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, num_labels=5)
    out.append(("vit", transformers.ViTForImageClassification(cfg), "image"))
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 5))
    out.append(("cnn", cnn, "cnn"))
    return out


def _train_steps(model, kind, device, steps=2):
    torch.manual_seed(1)
    ids = torch.randint(1, 64, (2, 8))
    pixels = torch.randn(2, 3, 16, 16)
    labels = torch.tensor([1, 4])
    model = copy.deepcopy(model).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        if kind == "lm":
            loss = model(input_ids=ids.to(device), labels=ids.to(device)).loss
        elif kind == "image":
            loss = model(pixel_values=pixels.to(device), labels=labels.to(device)).loss
        else:
            loss = torch.nn.functional.cross_entropy(model(pixels.to(device)),
                                                     labels.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(l.cpu()) for l in losses], {k: v.cpu() for k, v in model.state_dict().items()}


def _zoo_model(name):
    """A model of the zoo with dropout off (the same program everywhere)."""
    model, kind = {n: (m, k) for n, m, k in _models()}[name]
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model, kind


def _assert_states_close(state, ref_state, msg):
    for k, v in ref_state.items():
        if k.endswith(("k_proj.bias", "key.bias")):
            # The key projection's bias shifts every score of a query
            # by the same amount, which softmax cancels: its gradient is
            # rounding noise, and AdamW scales noise up to lr-sized
            # steps of either sign (the CPU differs from strict there
            # as much as fused does).
            continue
        if v.is_floating_point():
            torch.testing.assert_close(state[k], v, atol=1e-4, rtol=1e-3, msg=f"{msg} {k}")
        else:
            assert torch.equal(state[k], v), (msg, k)


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen3", "t5", "vit", "cnn"])
def test_models_train_the_same_in_every_mode(name):
    model, kind = _zoo_model(name)
    runs = {}
    for mode in MODES:
        torch.tpu.set_eager_mode(mode)
        runs[mode] = _train_steps(model, kind, "tpu")
    ref_losses, ref_state = runs["strict"]
    for mode in ("debug", "fused"):
        losses, state = runs[mode]
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses),
                                   atol=1e-5, rtol=1e-5, msg=mode)
        _assert_states_close(state, ref_state, mode)
    cpu_losses, _ = _train_steps(model, kind, "cpu")
    torch.testing.assert_close(torch.tensor(runs["fused"][0]), torch.tensor(cpu_losses),
                               atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------- fused mode


def _last_event():
    return torch.tpu.fused_log()[-1]


def test_dead_intermediates_are_not_materialized():
    torch.tpu.set_eager_mode("fused")
    x = torch.randn(64, device="tpu")
    torch.tpu.synchronize()
    torch.tpu.fused_reset_stats()
    a = x * 2
    b = a + 1
    c = b.exp()
    del a, b
    s = c.sum()
    assert s.item() == pytest.approx(float((x.cpu() * 2 + 1).exp().sum()), rel=1e-5)
    ev = _last_event()
    assert ev["ops"] == 4 and ev["reason"] == "value needed"
    # c and s are live; a and b were never materialized.
    assert ev["outputs"] == 2, ev
    # Nothing held at all: the segment does not run.
    torch.tpu.fused_reset_stats()
    for _ in range(3):
        (x * 3).relu()
    torch.tpu.synchronize()
    assert torch.tpu.fused_stats()["segments_dropped"] >= 1
    assert torch.tpu.fused_stats()["segments"] == 0


@pytest.mark.parametrize("sync", ["item", "cpu", "tolist", "print", "nonzero", "synchronize",
                                  "save", "event"])
def test_host_syncs_materialize(sync, tmp_path, capsys):
    torch.tpu.set_eager_mode("fused")
    x = torch.arange(6.0, device="tpu")
    torch.tpu.synchronize()
    torch.tpu.fused_reset_stats()
    y = (x - 2) * (x + 1)
    if sync == "item":
        assert y[3].item() == 4.0
    elif sync == "cpu":
        assert y.cpu().tolist() == [-2.0, -2.0, 0.0, 4.0, 10.0, 18.0]
    elif sync == "tolist":
        assert y.tolist() == [-2.0, -2.0, 0.0, 4.0, 10.0, 18.0]
    elif sync == "print":
        print(y)
        assert "18." in capsys.readouterr().out
    elif sync == "nonzero":
        assert torch.nonzero(y).flatten().cpu().tolist() == [0, 1, 3, 4, 5]
    elif sync == "synchronize":
        torch.tpu.synchronize()
    elif sync == "save":
        torch.save(y, tmp_path / "y.pt")
        assert torch.load(tmp_path / "y.pt").tolist() == [-2.0, -2.0, 0.0, 4.0, 10.0, 18.0]
    else:
        torch.tpu.Event().record()
    stats = torch.tpu.fused_stats()
    assert stats["segments"] >= 1, stats


@pytest.mark.parametrize("loss_fn", ["cross_entropy", "mse"])
def test_training_loop_stops_compiling(loss_fn):
    torch.tpu.set_eager_mode("fused")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 4)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16, device="tpu")
    y = torch.randint(0, 4, (8,), device="tpu")
    target = torch.randn(8, 4, device="tpu")
    compiles = []
    losses = []
    torch.tpu.fused_reset_stats()
    for step in range(8):
        opt.zero_grad()
        if loss_fn == "mse":
            loss = torch.nn.functional.mse_loss(model(x), target)
        else:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        st = torch.tpu.fused_stats()
        # Segment programs made so far: compiled, or loaded from the
        # compile cache (a warm disk cache from an earlier run).
        compiles.append(st["compiles"] + st["cache_hits"])
    torch.tpu.synchronize()
    stats = torch.tpu.fused_stats()
    # Steps are recorded, detected as a repeated sequence and replayed: the
    # last steps compile nothing new.
    assert compiles[-1] == compiles[3], (compiles, torch.tpu.fused_summary())
    # Each step ran as segments (cut where the step repeats, or at an op
    # that checks its arguments, like the loss's target check) whose
    # programs the later steps find in the program table.
    reasons = stats["by_reason"]
    assert reasons["repeated op sequence"] + reasons["argument check"] >= 4, reasons
    assert stats["table_hits"] >= 4, torch.tpu.fused_summary()
    if loss_fn == "mse":
        # No op syncs: the step boundary is found by repetition alone.
        assert reasons["repeated op sequence"] >= 4, reasons
    assert float(losses[-1].cpu()) < float(losses[0].cpu())


def test_recompile_says_what_changed():
    torch.tpu.set_eager_mode("fused")
    torch.tpu.fused_reset_stats()
    for n in (5, 7):
        x = torch.randn(n, 3, device="tpu")
        ((x * 2).sin() + 1).sum().item()
    log = [e for e in torch.tpu.fused_log() if e["program"] == "compiled"]
    if len(log) >= 2:  # (a warm disk cache finds both)
        assert "op 0" in log[-1]["changed"] or log[-1]["changed"], log
    summary = torch.tpu.fused_summary()
    assert "value needed" in summary


def test_errors_are_reported_at_the_op_and_device_stays_usable():
    torch.tpu.set_eager_mode("fused")
    w = torch.randn(10, 4, device="tpu")
    a = w * 2
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(torch.tensor([3, 12], device="tpu"), a)
    with pytest.raises(RuntimeError, match="size"):
        a + torch.ones(3, device="tpu")
    b = torch.nn.functional.embedding(torch.tensor([3, 9], device="tpu"), a)
    torch.testing.assert_close(b.cpu(), w.cpu()[[3, 9]] * 2)


def test_segment_programs_come_from_the_disk_cache_in_a_new_process(tmp_path):
    code = (
        "x = torch.arange(12.0, device='tpu').reshape(3, 4)\n"
        "y = ((x * 0.5).exp() @ x.t()).tanh().sum()\n"
        "v = y.item()\n"
        "e = torch.tpu.fused_log()[-1]\n"
        "print(e['program'], round(v, 4))\n"
    )
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused"}
    first = _child(code, **env)
    second = _child(code, **env)
    assert first.split()[-1] == second.split()[-1]
    assert first.startswith("compiled"), first
    assert second.startswith("compile cache (disk)"), second
    # A corrupted entry is detected and compiled again, with the same result.
    for root, _, files in os.walk(tmp_path):
        for f in files:
            with open(os.path.join(root, f), "r+b") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(size // 2)
                fh.write(b"\xff" * 16)
    third = _child(code, **env)
    assert third.split()[-1] == first.split()[-1]
    assert third.startswith("compiled"), third


FIRST_RUNS = (
    "x = torch.arange(12.0, device='tpu').reshape(3, 4) / 7\n"
    "def f(x):\n"
    "    return ((x * 0.5).exp() @ x.t()).tanh().sum(0)\n"
    "want = f(x.cpu())\n"
    "torch.tpu.fused_reset_stats()\n"
    "for _ in range(3):\n"
    "    torch.testing.assert_close(f(x).cpu(), want)\n"
    "    print(torch.tpu.fused_log()[-1]['program'])\n"
    "s = torch.tpu.fused_stats()\n"
    "print(torch.tpu.fused_summary())\n"
    "print(s['by_ops'], s['compiles'], s['disk_hits'])\n"
)


def _runs(out):
    lines = out.splitlines()
    return lines[:3], lines[-1].split()


def test_a_segment_runs_op_by_op_first_and_is_compiled_when_it_runs_again(tmp_path):
    # TPUC_FUSE_AFTER set: every segment, small ones too (this one is).
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused", "TPUC_FUSE_AFTER": "3"}
    out = _child_all(FIRST_RUNS, **env)
    programs, (by_ops, compiles, disk) = _runs(out)
    assert programs == ["op by op", "op by op", "compiled"], out
    assert (by_ops, compiles) == ("2", "1"), out
    assert "2 op by op (first runs)" in out, out
    # A process with that program in its disk cache runs the same way (so
    # its results are the same): op by op first, then the program, loaded.
    programs, (by_ops, compiles, disk) = _runs(_child_all(FIRST_RUNS, **env))
    assert programs == ["op by op", "op by op", "compile cache (disk)"], programs
    assert (by_ops, compiles, disk) == ("2", "0", "1")


SMALL_AND_LARGE = (
    "import tpuc\n"
    "def f(x):\n"
    "    return ((x * 0.5).exp() @ x.t()).tanh().sum(0)\n"
    "for rows, cols in ((3, 4), (300, 256)):\n"
    "    x = torch.linspace(-1, 1, rows * cols, device='tpu').reshape(rows, cols)\n"
    "    want = f(x.cpu())\n"
    "    runs = []\n"
    "    for _ in range(70):\n"
    "        torch.testing.assert_close(f(x).cpu(), want)\n"
    "        runs.append(torch.tpu.fused_log()[-1]['program'])\n"
    "    first = runs.index('compiled') + 1\n"
    "    print(first, sorted(set(runs[first:])))\n"
    "s = torch.tpu.fused_stats()\n"
    "print(s['fuse_after'], s['fuse_after_small'], s['small_compiled'])\n"
)


def test_small_segments_are_compiled_only_when_a_loop_runs_them_often(tmp_path):
    # A segment whose values are all small (at most 256 KiB) saves little
    # per run with its program and costs as much to compile: it runs op by
    # op until its 64th run in a loop. A large one compiles at its third.
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused", "TPUC_FUSE_AFTER": None}
    out = _child_all(SMALL_AND_LARGE, **env).splitlines()
    assert out == ["64 ['program table']", "3 ['program table']", "3 64 1"], out
    # TPUC_FUSE_AFTER set holds for every segment.
    out = _child_all(SMALL_AND_LARGE, **dict(env, TPUC_FUSE_AFTER="5",
                                             TPUC_CACHE_DIR=str(tmp_path / "b"))).splitlines()
    assert out == ["5 ['program table']", "5 ['program table']", "5 5 1"], out


@pytest.mark.parametrize("after", ["1", "2"])
def test_fuse_after_sets_the_run_that_compiles(tmp_path, after):
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused", "TPUC_FUSE_AFTER": after}
    programs, (by_ops, compiles, _) = _runs(_child_all(FIRST_RUNS, **env))
    want = {"1": ["compiled", "program table", "program table"],
            "2": ["op by op", "compiled", "program table"]}[after]
    assert programs == want
    assert (by_ops, compiles) == (str(int(after) - 1), "1")


FAR_RUNS = (
    "x = torch.arange(12.0, device='tpu').reshape(3, 4) / 7\n"
    "def f(x):\n"
    "    return ((x * 0.5).exp() @ x.t()).tanh().sum(0)\n"
    "want = f(x.cpu())\n"
    "for _ in range(13):\n"
    "    torch.testing.assert_close(f(x).cpu(), want)\n"
    "    print(torch.tpu.fused_log()[-1]['program'])\n"
    "    for k in range(5):\n"
    "        torch.ones(k + 1, device='tpu').mul(2).cpu()\n"
)


def test_a_segment_that_recurs_only_far_apart_is_compiled_late(tmp_path):
    # Runs separated by more segments than TPUC_FUSE_NEAR (as each step of a
    # generate whose cache grows recurs only with the next call) go op by op
    # until the segment's 4 x TPUC_FUSE_AFTER-th run.
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused", "TPUC_FUSE_AFTER": "3",
           "TPUC_FUSE_NEAR": "4"}
    programs = _child_all(FAR_RUNS, **env).splitlines()
    assert programs == ["op by op"] * 11 + ["compiled", "program table"], programs
    # Near enough, they count as a loop's: compiled at the third run.
    programs = _child_all(FAR_RUNS, **dict(env, TPUC_FUSE_NEAR="6")).splitlines()
    assert programs == ["op by op"] * 2 + ["compile cache (disk)"] + ["program table"] * 10, programs


def test_op_by_op_runs_keep_checks_randomness_and_in_place_updates(monkeypatch):
    monkeypatch.delenv("TPUC_FUSE_AFTER")
    # The runtime reports the run a segment compiles at (tpuc check reads it).
    assert torch.tpu.fused_stats()["fuse_after"] == 3
    torch.tpu.set_eager_mode("fused")
    # Random ops: the same seed draws the same numbers op by op (first runs)
    # as in the compiled segment (third run) and in strict mode.
    draws = []
    for mode in ("fused", "fused", "fused", "strict"):
        torch.tpu.set_eager_mode(mode)
        torch.manual_seed(5)
        a = torch.rand(13, 7, device="tpu")
        b = torch.nn.functional.dropout(a + 1, 0.5)
        draws.append((a * 2 + b).cpu())
    assert all(torch.equal(draws[0], d) for d in draws[1:])
    torch.tpu.set_eager_mode("fused")
    # An argument check fails at its op, op by op as when compiled.
    w = torch.randn(11, 5, device="tpu")
    for _ in range(3):
        with pytest.raises(IndexError):
            torch.nn.functional.embedding(torch.tensor([2, 11], device="tpu"), w * 3)
    # In-place updates of whole storages (an optimizer's), op by op.
    p = torch.randn(17, 3)
    g = torch.randn(17, 3)
    pt, gt = p.to("tpu"), g.to("tpu")
    m = torch.zeros(17, 3, device="tpu")
    mc = torch.zeros(17, 3)
    for _ in range(3):
        for t, gg, mm in ((pt, gt, m), (p, g, mc)):
            mm.mul_(0.9).add_(gg, alpha=0.1)
            t.sub_(mm * 0.01)
    torch.testing.assert_close(pt.cpu(), p)
    torch.testing.assert_close(m.cpu(), mc)
    assert torch.tpu.fused_stats()["by_ops"] >= 1


NEW_PROGRAMS = (
    "import tpuc\n"
    "torch.tpu.set_eager_mode('fused')\n"
    "x = torch.linspace(-2, 2, 391).reshape(17, 23).to('tpu')\n"
    "y = (x.exp() * 3 - x.tanh()).sigmoid() @ x.t()\n"
    "z = torch.cat([y.erf(), y.softmax(1), y.cumsum(0)], 1).mean(0)\n"
    "print(z.cpu().double().numpy().tobytes().hex())\n"
    "print(torch.tpu.compile_cache_stats()['compiled_ahead'])\n"
)


def test_a_first_runs_new_programs_compile_on_helper_threads(tmp_path):
    # A segment's op-by-op run hands its new programs to helper threads
    # (TPUC_COMPILE_THREADS, default one fewer than the CPUs), which compile
    # them while the ops before them run. Results are the same bits.
    base = {"TPUC_EAGER_MODE": None, "TPUC_FUSE_AFTER": None, "TPUC_CACHE_PREFETCH": "0"}
    alone = _child_all(NEW_PROGRAMS, TPUC_CACHE_DIR=str(tmp_path / "a"),
                       TPUC_COMPILE_THREADS="0", **base).split()
    helped = _child_all(NEW_PROGRAMS, TPUC_CACHE_DIR=str(tmp_path / "b"),
                        TPUC_COMPILE_THREADS="2", **base).split()
    assert alone[0] == helped[0]
    assert int(alone[1]) == 0
    assert int(helped[1]) >= 2, helped


def test_compiler_flags_have_their_own_disk_cache_entries(tmp_path):
    # XLA's plugins read XLA_FLAGS when they start: a program compiled under
    # other flags is another program, and a process must not load it.
    code = (
        "x = torch.arange(12.0, device='tpu').reshape(3, 4)\n"
        "v = ((x * 0.25).exp() @ x.t()).tanh().sum().item()\n"
        "e = torch.tpu.fused_log()[-1]\n"
        "print(e['program'], '|', torch.tpu.compile_cache_stats()['cache_dir'])\n"
    )
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused"}
    flags = "--xla_cpu_enable_fast_min_max=true"
    plain = _child(code, XLA_FLAGS="", **env).split(" | ")
    flagged = _child(code, XLA_FLAGS=flags, **env).split(" | ")
    assert plain[0] == flagged[0] == "compiled", (plain, flagged)
    assert plain[1] != flagged[1], (plain, flagged)
    # Each setting finds its own entries again; unset is the same as empty.
    again = _child(code, XLA_FLAGS=flags, **env).split(" | ")
    assert again == ["compile cache (disk)", flagged[1]], again
    unset = _child(code, XLA_FLAGS=None, **env).split(" | ")
    assert unset == ["compile cache (disk)", plain[1]], unset


def test_size_limit_cuts_segments():
    code = (
        "torch.tpu.fused_reset_stats()\n"
        "x = torch.randn(4, device='tpu')\n"
        "ys = []\n"
        "for k in range(40):\n"
        "    x = x * 1.01 + k\n"
        "    ys.append(x)\n"
        "v = x.sum().item()\n"
        "s = torch.tpu.fused_stats()\n"
        "print(s['by_reason']['size limit'])\n"
    )
    n = _child(code, TPUC_EAGER_MODE="fused", TPUC_FUSED_MAX_OPS="16",
               TPUC_FUSED_MIN_PERIOD="1000")
    assert int(n) >= 4


@pytest.mark.parametrize("body", ["copy", "scale"])
def test_a_loop_with_a_short_body_is_cut_every_few_iterations(monkeypatch, body):
    """A Python loop whose body is fewer ops than the shortest step
    (TPUC_FUSED_MIN_PERIOD, 16) -- a row written per iteration, as in
    PyTorch's test_index_copy_deterministic -- is cut at the first multiple
    of its body from 16 ops on, and those segments replay one program. It
    used to grow to the size limit: a 4096-op program that XLA took 82 s to
    compile for 40,000 column copies."""
    # Compiled at the third run (the default for all but small segments;
    # these are small).
    monkeypatch.setenv("TPUC_FUSE_AFTER", "3")
    torch.manual_seed(0)
    src = torch.rand(5, 300, 3)
    idx = torch.randint(0, 40, (300,)).tolist()
    want = torch.zeros(5, 40, 3)
    x0 = want.to("tpu")
    s = src.to("tpu")
    torch.tpu.synchronize()
    with torch.tpu.eager_mode("fused"):
        torch.tpu.fused_reset_stats()
        for i, j in enumerate(idx):
            if body == "copy":  # one op: a column copy
                x0[:, j, :] = s[:, i, :]
                want[:, j, :] = src[:, i, :]
            else:  # three: multiply, add, copy
                x0[:, j, :] = s[:, i, :] * 2 + 1
                want[:, j, :] = src[:, i, :] * 2 + 1
        got = x0.cpu()
        stats = torch.tpu.fused_stats()
        log = torch.tpu.fused_log()
    assert torch.equal(got, want)
    assert stats["by_reason"]["size limit"] == 0
    period = 1 if body == "copy" else 3
    cuts = [e for e in log if e["reason"] == "repeated op sequence"]
    assert stats["by_reason"]["repeated op sequence"] >= 300 * period // 24
    # After the first segments (the views' first offsets are constants),
    # every cut holds whole bodies, 16 to 16 + period ops, one program.
    steady = cuts[len(cuts) // 2:]
    assert {e["ops"] for e in steady} == {16 + (-16) % period}
    assert {e["program"] for e in steady} == {"program table"}
    assert stats["compiles"] <= 6


def test_whole_storage_updates_donate_their_buffers():
    torch.tpu.set_eager_mode("fused")
    # Ones, not zeros: never-written zeros would be computed inside the
    # segment (see below), leaving it no input to give away.
    p = torch.ones(1000, device="tpu")
    view = p[10:20]
    torch.tpu.synchronize()
    torch.tpu.fused_reset_stats()
    for _ in range(3):
        p.mul_(0.5).add_(1.0)
    # The storage's old value is held by nothing but the segment: its
    # memory becomes the new value's.
    assert view.cpu().tolist() == [1.875] * 10
    assert torch.tpu.fused_stats()["donated"] >= 1, torch.tpu.fused_stats()
    # A value something still holds is never donated.
    q = torch.ones(8, device="tpu")
    keep = q.clone()
    torch.tpu.synchronize()
    q.add_(1.0)
    assert q.tolist() == [2.0] * 8 and keep.tolist() == [1.0] * 8


def _minor_faults():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_inplace_lerp_of_a_matrix_writes_its_storage_in_place():
    # AdamW's exp_avg.lerp_(grad, 1 - beta1) on every weight matrix. With
    # the formula's select over reshaped operands, XLA computed the result
    # into a temporary the size of the matrix and copied it into the
    # donated storage: a fresh 64 MiB each step (glibc maps allocations
    # that large anew each time: 16384 page faults), and a copy. (Strict
    # mode writes each op's result to a new buffer: it does not donate.)
    torch.tpu.set_eager_mode("fused")
    m = torch.ones(4096, 4096, device="tpu")
    g = torch.full((4096, 4096), 3.0, device="tpu")
    for w in (0.1, 0.75):  # both of lerp's formulas, compiled once each
        m.lerp_(g, w)
        torch.tpu.synchronize()
    faults = []
    for w in (0.1, 0.75, 0.1, 0.75):
        before = _minor_faults()
        m.lerp_(g, w)
        torch.tpu.synchronize()
        faults.append(_minor_faults() - before)
    assert max(faults) < 4096, faults
    # The values: the CPU's, bitwise.
    ref = torch.ones(4, 4)
    for w in (0.1, 0.75, 0.1, 0.75, 0.1, 0.75):
        ref.lerp_(torch.full((4, 4), 3.0), w)
    assert torch.equal(m[:4, :4].cpu(), ref), (m[:4, :4].cpu(), ref)


def test_an_optimizer_step_gives_each_parameter_its_own_memory_back():
    # AdamW over three parameters of one shape, in fused mode: each
    # parameter's old memory goes to its own new value (the chain of in-place
    # updates that starts from it), not to the first result of its shape.
    # Paired the other way, XLA copied each parameter and each result: 82 K
    # page faults at every step here (64 MiB each), and 168 K in the first.
    torch.tpu.set_eager_mode("fused")

    def make():
        ps = [torch.nn.Parameter(torch.full((4096, 4096), 1.0 + i, device="tpu"))
              for i in range(3)]
        for p in ps:
            p.grad = torch.full((4096, 4096), 0.5, device="tpu")
        return ps, torch.optim.AdamW(ps, lr=0.1)

    # Compile the first and later steps' programs first: the compiler's own
    # memory is not what this counts.
    ps, opt = make()
    for _ in range(2):
        opt.step()
    torch.tpu.synchronize()
    del ps, opt
    ps, opt = make()
    torch.tpu.synchronize()
    faults = []
    for _ in range(3):
        before = _minor_faults()
        opt.step()
        torch.tpu.synchronize()
        faults.append(_minor_faults() - before)
    # The first step writes its new state (exp_avg, exp_avg_sq: 6 x 16384
    # pages) and nothing more; later steps write in place.
    assert faults[0] < 6 * 16384 * 1.1 and max(faults[1:]) < 4096, faults
    ref = [torch.nn.Parameter(torch.full((4, 4), 1.0 + i)) for i in range(3)]
    for r in ref:
        r.grad = torch.full((4, 4), 0.5)
    ref_opt = torch.optim.AdamW(ref, lr=0.1)
    for _ in range(3):
        ref_opt.step()
    for p, r in zip(ps, ref):
        torch.testing.assert_close(p.detach()[:4, :4].cpu(), r.detach())


def test_never_written_zeros_are_computed_in_the_segment_that_reads_them():
    # torch.zeros leaves its storage unwritten. In fused mode the op that
    # first reads it records the zeros as a node of its own segment, instead
    # of a fill program that runs first (4 MiB: filled on the device before).
    torch.tpu.set_eager_mode("fused")
    torch.tpu.synchronize()
    torch.tpu.fused_reset_stats()
    y = torch.zeros(1 << 20, device="tpu").add(1.5)
    assert torch.equal(y.cpu(), torch.full((1 << 20,), 1.5))
    ev = _last_event()
    assert (ev["first_op"], ev["ops"], ev["outputs"]) == ("zeros", 2, 1), ev
    # Zeros that something still holds become a result of the segment; other
    # dtypes and sizes (kept as f32 or bytes) read back exactly.
    for dtype, shape in [(torch.int32, (3, 5)), (torch.bool, (7,)), (torch.float16, (3,)),
                         (torch.int64, (2, 2)), (torch.complex64, (4,))]:
        z = torch.zeros(shape, dtype=dtype, device="tpu")
        w = z + 1
        assert torch.equal(w.cpu(), torch.zeros(shape, dtype=dtype) + 1), dtype
        assert torch.equal(z.cpu(), torch.zeros(shape, dtype=dtype)), dtype
    # An optimizer's zeros_like state: its first step computes the state in
    # the step's program, with the same result as strict mode.
    def first_step(mode):
        torch.tpu.set_eager_mode(mode)
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Tanh(),
                                torch.nn.Linear(512, 4)).to("tpu")
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        m(torch.randn(8, 512).to("tpu")).square().sum().backward()
        torch.tpu.synchronize()
        torch.tpu.fused_reset_stats()
        opt.step()
        torch.tpu.synchronize()
        log = torch.tpu.fused_log()
        state = [opt.state[p][k].cpu() for p in m.parameters()
                 for k in ("exp_avg", "exp_avg_sq")]
        return [p.detach().cpu() for p in m.parameters()] + state, log

    strict, _ = first_step("strict")
    fused, log = first_step("fused")
    assert [e["first_op"] for e in log] == ["zeros"], log
    for a, b in zip(strict, fused):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------ background compile

_STEPS_CODE = (
    "import time\n"
    "torch.tpu.set_eager_mode('fused')\n"
    "torch.manual_seed(0)\n"
    "m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256),\n"
    "                        torch.nn.GELU(), torch.nn.Linear(256, 8)).to('tpu')\n"
    "opt = torch.optim.AdamW(m.parameters(), lr=1e-2)\n"
    "x = torch.randn(32, 64, device='tpu')\n"
    "t = torch.randn(32, 8, device='tpu')\n"
    "pending = []\n"
    "losses = []\n"
    "for step in range(6):\n"
    "    opt.zero_grad()\n"
    "    loss = torch.nn.functional.mse_loss(m(x), t)\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    losses.append(loss.detach())\n"
    "    pending.append(torch.tpu.fused_pending())\n"
    "vals = [float(l.cpu()) for l in losses]\n"
    "s = torch.tpu.fused_stats()\n"
    "c = torch.tpu.compile_cache_stats()\n"
    "print(json.dumps({'pending': pending, 'losses': vals, 'background': s['background'],\n"
    "                  'compiles': s['compiles'], 'table_hits': s['table_hits'],\n"
    "                  'misses': c['misses'], 'corrupt': c['disk_corrupt']}))\n"
)


def _steps(env, popen=False):
    e = dict(os.environ)
    e.update(env)
    args = [sys.executable, "-c", "import json, torch\n" + _STEPS_CODE]
    if popen:
        return subprocess.Popen(args, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = subprocess.run(args, env=e, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_step_programs_compile_in_the_background_while_recording_goes_on(tmp_path):
    # A cold cache: each step's segment program takes far longer to compile
    # than a step takes to record, so the calling thread records the next
    # steps while the first is still compiling (pending > 0 after a step).
    bg = _steps({"TPUC_CACHE_DIR": str(tmp_path / "a")})
    assert bg["background"] >= 4, bg
    assert max(bg["pending"]) >= 1, bg
    # Steps submitted while their program was still compiling wait for that
    # compile instead of compiling it again: each distinct segment program
    # is compiled once.
    assert bg["compiles"] <= 4 and bg["table_hits"] >= 2, bg
    # The same steps with compilation on the calling thread: identical
    # losses, bit for bit (the same programs run in the same order).
    fg = _steps({"TPUC_CACHE_DIR": str(tmp_path / "b"), "TPUC_FUSED_ASYNC": "0"})
    assert fg["background"] == 0 and max(fg["pending"]) == 0, fg
    assert fg["losses"] == bg["losses"], (fg, bg)
    assert bg["losses"][-1] < bg["losses"][0]


def test_two_processes_fill_one_cache_directory_at_once(tmp_path):
    env = {"TPUC_CACHE_DIR": str(tmp_path)}
    procs = [_steps(env, popen=True) for _ in range(2)]
    import json
    res = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        res.append(json.loads(out.strip().splitlines()[-1]))
    assert res[0]["losses"] == res[1]["losses"], res
    assert res[0]["corrupt"] == res[1]["corrupt"] == 0, res
    # Every program was compiled by exactly one of the two: each compile
    # writes one entry, and a program both compiled would be one entry for
    # two compiles.
    entries = sum(f.endswith(".tpx") for _, _, fs in os.walk(tmp_path) for f in fs)
    assert entries == res[0]["misses"] + res[1]["misses"], (entries, res)
    # And a third process finds all of them on disk.
    third = _steps(env)
    assert third["misses"] == 0 and third["losses"] == res[0]["losses"], third


def test_a_warm_process_finds_its_programs_prefetched(tmp_path):
    # A new process starts loading, as soon as the device is initialized,
    # the programs the last process on its cache folder started with: here
    # every program of the training loop is loaded before the loop runs,
    # and the results are the same.
    code = (
        "import json, os, time\n"
        "torch.tpu.synchronize()\n"
        "want = int(os.environ['WANT'])\n"
        "t0 = time.time()\n"
        "while (torch.tpu.compile_cache_stats()['prefetched'] < want\n"
        "       and time.time() - t0 < 120):\n"
        "    time.sleep(0.05)\n"
        "before = torch.tpu.compile_cache_stats()\n"
        "torch.manual_seed(0)\n"
        "emb = torch.nn.Embedding(50, 16).to('tpu')\n"
        "lin = torch.nn.Linear(16, 50).to('tpu')\n"
        "opt = torch.optim.AdamW([*emb.parameters(), *lin.parameters()], lr=1e-2)\n"
        "ids = torch.arange(40, device='tpu') % 50\n"
        "losses = []\n"
        "for step in range(3):\n"
        "    loss = torch.nn.functional.cross_entropy(lin(emb(ids).relu()), ids)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "    losses.append(round(loss.item(), 5))\n"
        "s = torch.tpu.compile_cache_stats()\n"
        "print(json.dumps({'before': before, 's': s, 'losses': losses}))\n"
    )
    import json
    env = {"TPUC_CACHE_DIR": str(tmp_path), "TPUC_EAGER_MODE": "fused"}
    first = json.loads(_child(code, WANT="0", **env))
    n = first["s"]["misses"]
    assert n >= 3 and first["s"]["prefetched"] == 0, first
    second = json.loads(_child(code, WANT=str(n), **env))
    assert second["losses"] == first["losses"]
    b, s = second["before"], second["s"]
    assert b["prefetched"] == n and b["prefetch_seconds"] > 0, b
    assert b["disk_hits"] == 0 and b["misses"] == 0, b
    assert s["misses"] == 0 and s["disk_hits"] == n and s["prefetch_hits"] == n, s
    off = json.loads(_child(code, WANT="0", TPUC_CACHE_PREFETCH="0", **env))
    assert off["s"]["prefetched"] == 0 and off["s"]["prefetch_hits"] == 0, off
    assert off["s"]["disk_hits"] == n and off["losses"] == first["losses"], off


# ------------------------------------------------- per-thread mode, autograd


@pytest.mark.parametrize("outer,inner", [("strict", "fused"), ("fused", "debug")])
def test_backward_runs_in_the_mode_of_the_thread_that_started_it(outer, inner):
    # Autograd runs a tpu backward on its own device thread; the mode set
    # for the calling thread goes with it.
    torch.tpu.set_eager_mode(outer)
    torch.manual_seed(0)
    xc = torch.randn(6, 8)
    wc = torch.randn(8, 5)
    x = xc.to("tpu").requires_grad_()
    w = wc.to("tpu").requires_grad_()
    torch.tpu.synchronize()
    with torch.tpu.eager_mode(inner):
        torch.tpu.fused_reset_stats()
        y = (x @ w).tanh().pow(2).sum()
        forward = torch.tpu.fused_stats()["ops_recorded"]
        y.backward()
        total = torch.tpu.fused_stats()["ops_recorded"]
    if inner == "fused":
        assert forward > 0 and total > forward, (forward, total)
    else:
        assert forward == 0 and total == 0, (forward, total)
    xr = xc.clone().requires_grad_()
    wr = wc.clone().requires_grad_()
    (xr @ wr).tanh().pow(2).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), xr.grad)
    torch.testing.assert_close(w.grad.cpu(), wr.grad)


def test_an_input_a_background_segment_still_reads_is_not_given_away_early(tmp_path):
    # Step 1's segment goes to the background thread (a cold cache: it is
    # still compiling) holding x's old value as an input. Then x is updated
    # in place and read by ops that need nothing from the background and
    # whose program is compiled already: that segment runs at once and
    # donates x's old value (nothing but the background segment holds it),
    # which it must not do before the background segment has read it.
    code = (
        "torch.tpu.set_eager_mode('fused')\n"
        "x = torch.arange(1000, dtype=torch.float32, device='tpu') / 1000\n"
        "torch.tpu.synchronize()\n"
        "F = torch.nn.functional\n"
        "fns = [torch.sin, torch.cos, torch.tanh, torch.sigmoid, torch.atan, torch.asinh, torch.erf,\n"
        "       torch.sinh, F.gelu, F.silu, F.softplus, F.mish, F.elu, F.selu, F.celu, F.logsigmoid,\n"
        "       F.softsign, F.tanhshrink, F.hardswish, torch.special.expit, torch.erfc, torch.cosh]\n"
        "ops = [lambda t: torch.ones(1000, device=t.device), torch.sin, lambda t: t * 1.5, torch.cos]\n"
        "for i, f in enumerate(fns):\n"
        "    ops += [f, (lambda t: t * 0.75) if i % 2 else (lambda t: t + 0.5)]\n"
        "ops += [lambda t: t + XS, torch.tanh]\n"
        "def step(y, xs):\n"
        "    global XS\n"
        "    XS = xs\n"
        "    for f in ops:\n"
        "        y = f(y)\n"
        "    return y\n"
        "def tail(x):\n"
        "    y = x\n"
        "    for f in ops[:4]:\n"
        "        y = f(y)\n"
        "    x.add_(1.0)\n"
        "    return y, x.sum().item()\n"
        "tail(torch.zeros(1000, device='tpu'))  # its program is compiled now\n"
        "y1 = step(x, x)\n"
        "y, s = tail(x)  # its first ops cut step 1 off, to the background\n"
        "xc = torch.arange(1000, dtype=torch.float32) / 1000\n"
        "torch.testing.assert_close(y1.cpu(), step(xc, xc))\n"
        "torch.tpu.synchronize()\n"
        "print(torch.tpu.fused_stats()['donated'], round(s, 2))\n"
    )
    out = _child(code, TPUC_CACHE_DIR=str(tmp_path), TPUC_EAGER_MODE="fused")
    donated, total = out.split()
    assert int(donated) >= 1, out
    assert float(total) == round(float(sum(k / 1000 + 1 for k in range(1000))), 2), out
