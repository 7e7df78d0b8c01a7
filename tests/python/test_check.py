"""`tpuc check` (python -m tpuc.check): the porting report on the model
zoo (every check passes), on a script with a deliberately non-repeatable
op, and on a script written for CUDA (it picks its device with
torch.cuda.is_available()) with a CPU-fallback op and a host read in its
loop, and on a script that never uses tpu; the reports' content and exit
status."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest


def check(tmp_path, *args, script=None, name="out"):
    if script is not None:
        with open(tmp_path / "train.py", "w") as f:
            f.write(textwrap.dedent(script))
    out = tmp_path / name
    p = subprocess.run([sys.executable, "-m", "tpuc.check", "--out", str(out), *args],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=900)
    report = None
    if (out / "report.json").exists():
        with open(out / "report.json") as f:
            report = json.load(f)
    return p, report, out


@pytest.mark.parametrize("model,task", [("gpt2", "causal-lm"), ("bert", "seq-cls"),
                                        ("llama", "causal-lm"), ("qwen3-moe", "causal-lm")])
def test_model_zoo_passes(tmp_path, model, task):
    # 5 steps: fused mode compiles a segment at its third run, and the first
    # step's segments differ (the optimizer creates its state), so the loop
    # settles after step 4.
    p, r, out = check(tmp_path, "--model", f"hf:{model}", "--task", task, "--steps", "5",
                      "--seq", "16")
    assert p.returncode == 0, p.stdout + p.stderr
    c = r["checks"]
    for name in ("runs", "agreement", "repeatability", "ops", "recompiles"):
        assert c[name]["verdict"] == "pass", (name, c[name]["detail"])
    assert r["verdict"] == "pass"
    assert len(r["runs"]["tpu"]["losses"]) == 5
    assert "no program compiled after step 4" in c["recompiles"]["detail"]
    assert c["agreement"]["max_abs"] <= 1e-4 + 2e-3 * max(abs(x) for x in r["runs"]["reference"]["losses"])
    assert "logits_max_abs" in c["agreement"]
    assert c["ops"]["native"] and not c["ops"]["fallback"]
    assert c["speed"]["tpu"]["first_step_s"] > 0 and c["speed"]["tpu"]["steady_step_s"] > 0
    assert r["runs"]["tpu"]["peak_memory"] > 0
    md = (out / "report.md").read_text()
    assert "| repeatability | **PASS** |" in md and "Overall: **PASS**" in md
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 4 and "Overall: PASS" in page and "<polyline" in page
    assert "error per output" in page and "logits, first forward" in page
    assert [o["output"] for o in c["agreement"]["per_output"]][-1] == "logits, first forward"
    assert all(o["error_over_tolerance"] <= 1 for o in c["agreement"]["per_output"])
    assert "PASS" in p.stdout and "report." in p.stdout  # the terminal summary


def test_compiled_mode_and_real_sizes(tmp_path):
    p, r, out = check(tmp_path, "--model", "hf:gpt2", "--steps", "3", "--seq", "16",
                      "--mode", "compile", "--real-sizes", "4x48")
    assert p.returncode == 0, p.stdout + p.stderr
    c = r["checks"]
    for name in ("runs", "agreement", "repeatability", "real sizes"):
        assert c[name]["verdict"] == "pass", (name, c[name]["detail"])
    comp = r["runs"]["tpu"]["compile"]
    # The steps ran as compiled graphs (captured, or loaded from records).
    assert comp["captures"] + comp["records_loaded"] > 0, comp
    real = c["real sizes"]
    assert (real["batch"], real["seq"]) == (4, 48) and real["tpu"]["steady_step_s"] > 0
    assert "batch 4 x sequence 48" in real["detail"]
    assert "| real sizes | **PASS** |" in (out / "report.md").read_text()


def test_non_repeatable_op_fails(tmp_path):
    p, r, _ = check(tmp_path, "--steps", "3", "--", "python", "train.py", script="""
        import os, torch
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.ones(4, device="tpu"))
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(10):
            # Deliberately not repeatable: noise from the OS, not from the seed.
            noise = torch.tensor(os.urandom(1)[0] / 100.0 + 0.01, device="tpu")
            loss = (w * noise).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
    """)
    assert p.returncode == 1, p.stdout + p.stderr
    c = r["checks"]
    assert c["runs"]["verdict"] == "pass"
    assert c["repeatability"]["verdict"] == "fail"
    assert "first differ at loss of step 0" in c["repeatability"]["detail"]
    assert r["verdict"] == "fail"
    assert "FAIL" in p.stdout


def test_a_run_that_never_uses_tpu_fails(tmp_path):
    p, r, _ = check(tmp_path, "--steps", "2", "--", "python", "train.py", script="""
        import torch
        w = torch.nn.Parameter(torch.ones(4, device="cpu"))  # never leaves the CPU
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(5):
            (w * 2).sum().backward()
            opt.step()
    """)
    assert p.returncode == 1, p.stdout + p.stderr
    c = r["checks"]["runs"]
    assert c["verdict"] == "fail" and "without putting a tensor on tpu" in c["detail"]


def test_fallback_and_host_reads_are_reported(tmp_path):
    p, r, out = check(tmp_path, "--steps", "3", "--", "python", "train.py", script="""
        import torch
        # A CUDA script, unchanged: the checker runs it on tpu and on the CPU.
        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.cuda.manual_seed(0)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 1)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(32, 8).to(device), torch.randn(32, 1).to(device)
        for step in range(100):
            loss = torch.nn.functional.mse_loss(model(x), y)
            e = torch.linalg.matrix_exp(x[:8] * 0.01)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if loss.item() < 0:
                break
    """)
    assert p.returncode == 0, p.stdout + p.stderr
    c = r["checks"]
    assert c["runs"]["verdict"] == "pass" and c["agreement"]["verdict"] == "pass"
    assert c["repeatability"]["verdict"] == "pass"
    assert c["ops"]["verdict"] == "warn"
    assert r["runs"]["tpu"]["tpu_used"]
    assert c["ops"]["fallback"] == {"aten::linalg_matrix_exp": 3}
    assert c["ops"]["fallback_sites"]["aten::linalg_matrix_exp"].endswith("train.py:13 in <module>")
    assert "aten::addmm" in c["ops"]["native"]
    # loss.item() in the loop: one segment per steady step runs for a value.
    assert "value needed 1.0" in c["syncs"]["detail"], c["syncs"]
    md = (out / "report.md").read_text()
    assert "## CPU fallbacks" in md and "train.py:13" in md
    assert "| loss, step 2 |" in md  # the error per output
    screenshot(out / "report.html", tmp_path / "report.png")


def screenshot(page, png):
    """Opens the HTML report in headless Chromium and checks the screenshot:
    the page rendered, its plots included (their line colours are there)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium (scripts/setup.sh installs Debian's) to render the HTML report")
    p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--disable-dev-shm-usage",
                        f"--screenshot={png}", "--window-size=1000,1500", f"file://{page}"],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0 and png.exists(), p.stderr[-3000:]
    from PIL import Image

    img = Image.open(png).convert("RGB")
    assert img.size == (1000, 1500)
    colours = img.getcolors(maxcolors=1 << 20)
    assert len(colours) > 50  # text, table, plots: not a blank page
    pixels = {c for _, c in colours}
    near = lambda rgb: any(sum(abs(a - b) for a, b in zip(rgb, c)) < 30 for c in pixels)
    assert near((31, 119, 180)) and near((214, 39, 40))  # the tpu and reference curves
    assert near((26, 127, 55))  # a PASS verdict


def test_bad_usage(tmp_path):
    p = subprocess.run([sys.executable, "-m", "tpuc.check"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2 and "--model" in p.stderr
    p = subprocess.run([sys.executable, "-m", "tpuc.check", "--real-sizes", "8", "--model",
                        "hf:gpt2"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "expected BxS" in p.stderr
    import torch

    if not torch.cuda.is_available():
        p = subprocess.run([sys.executable, "-m", "tpuc.check", "--reference", "cuda", "--model",
                            "hf:gpt2"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and "CUDA is not available here" in p.stderr
    p = subprocess.run([sys.executable, "-m", "tpuc.check", "--model", "hf:nonesuch",
                        "--out", str(tmp_path / "o"), "--quiet"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1
    with open(tmp_path / "o" / "report.json") as f:
        r = json.load(f)
    assert r["checks"]["runs"]["verdict"] == "fail"
    assert "not a folder with config.json" in r["checks"]["runs"]["detail"]
    p = subprocess.run([sys.executable, "-c", "import sys; from tpuc.check import cli; "
                        "sys.argv = ['tpuc']; sys.exit(cli())"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2 and "tpuc check" in p.stderr
