"""`pip wheel .` builds tpuc (the C library and the PyTorch binding, with
CMake through scikit-build-core) against the torch already installed, and
the wheel installed into a fresh virtual environment gives a working tpu
device through `import torch` alone."""

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def project_files():
    """The project's files as a clean checkout has them (tracked, plus new
    files not ignored): no build trees, no binding built into python/tpuc."""
    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("needs the project's git checkout to copy a clean source tree")
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]


def test_wheel_builds_and_runs_in_a_fresh_venv(tmp_path):
    src = tmp_path / "src"
    for f in project_files():
        os.makedirs(src / os.path.dirname(f), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), src / f)
    assert not list((src / "python" / "tpuc").glob("_C*.so"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The new environment gets this one's packages (torch, pip, the build
    # backend, the CPU plugin) after its own, as a user's has torch.
    with open(os.path.join(site, "outer.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TPUC_CACHE_DIR"] = str(tmp_path / "cache")

    wheels = tmp_path / "wheels"
    build = subprocess.run([py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                            "-w", str(wheels), str(src)],
                           capture_output=True, text=True, env=env, timeout=1500)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-5000:]
    (wheel,) = wheels.glob("tpuc-*.whl")
    inst = subprocess.run([py, "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert inst.returncode == 0, inst.stdout[-3000:] + inst.stderr[-3000:]

    check = textwrap.dedent("""
        import importlib.metadata as md, json, os, sys
        import torch  # loads tpuc through its torch.backends entry point
        out = {"available": torch.tpu.is_available(), "reason": torch.tpu.unavailable_reason()}
        import tpuc, tpuc._C
        out["pkg"] = os.path.dirname(tpuc.__file__)
        out["binding"] = tpuc._C.__file__
        x = torch.arange(6.0, device="tpu").reshape(2, 3)
        out["matmul"] = (x @ x.T).cpu().tolist()
        out["backends"] = sorted(e.name for e in md.entry_points(group="torch.backends"))
        out["dynamo"] = "tpu" in torch._dynamo.list_backends()
        print("RESULT", json.dumps(out))
    """)
    run = subprocess.run([py, "-c", check], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=300)
    lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-5000:]
    import json

    out = json.loads(lines[-1][len("RESULT "):])
    assert out["available"], out["reason"]
    assert out["pkg"].startswith(str(venv)), out  # the wheel's package, not the checkout's
    assert out["binding"].startswith(out["pkg"]), out
    assert out["matmul"] == [[5.0, 14.0], [14.0, 50.0]]
    assert "tpuc" in out["backends"] and out["dynamo"]
