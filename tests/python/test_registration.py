"""The tpu device as PyTorch and libraries see it: registration, autoload,
device module, accelerator API, a failed load that does not break torch."""

import os
import subprocess
import sys
import textwrap

import torch


def run_python(code, **env):
    e = dict(os.environ)
    e.update(env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=300)
    return p


def test_device_and_tensor_methods():
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    t = torch.arange(4.0).tpu()
    assert t.is_tpu and t.device == torch.device("tpu", 0)
    assert torch.tpu.device_count() >= 1
    m = torch.nn.Linear(2, 3).tpu()
    assert m.weight.is_tpu
    assert torch.backends.tpu.is_available() and torch.backends.tpu.is_built()


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    torch.accelerator.synchronize()


def test_device_context_and_properties():
    n = torch.tpu.device_count()
    with torch.tpu.device(n - 1):
        assert torch.tpu.current_device() == n - 1
        assert torch.empty(2, device="tpu").device.index == n - 1
    assert torch.tpu.current_device() == 0
    props = torch.tpu.get_device_properties(0)
    assert props.platform and props.pjrt_api.startswith("0.")
    assert props.plugin_package and props.xla_version
    assert "PJRT" in torch.tpu.get_device_name()
    assert torch.tpu.is_bf16_supported()
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()


def test_memory_stats_follow_storages():
    before = torch.tpu.memory_allocated()
    x = torch.empty(1024, 1024, device="tpu")
    assert torch.tpu.memory_allocated() == before + 4 * 1024 * 1024
    assert torch.tpu.max_memory_allocated() >= before + 4 * 1024 * 1024
    del x
    assert torch.tpu.memory_allocated() == before
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == before
    assert torch.tpu.memory_stats()["allocated_bytes.all.current"] == before


def test_autoload_can_be_turned_off():
    p = run_python("""
        import torch
        assert not hasattr(torch, "tpu"), "autoloaded despite the opt-out"
        import tpuc
        assert torch.tpu.is_available()
        print("ok")
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"


def test_missing_plugin_does_not_break_import_torch():
    p = run_python("""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import torch
        assert torch.ones(2).sum().item() == 2.0
        assert not torch.tpu.is_available()
        reason = torch.tpu.unavailable_reason()
        assert "/nonexistent/plugin.so" in reason, reason
        assert any("not available" in str(x.message) for x in w)
        print("ok")
    """, TPUC_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"


def test_module_to_keeps_parameter_objects_and_ties():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied, as in GPT-2
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    before = emb.weight
    model.to("tpu")
    assert emb.weight is before and head.weight is emb.weight
    assert emb.weight.is_tpu


def test_no_native_kernel_hides_an_autograd_decomposition():
    # A PrivateUse1 kernel for a CompositeImplicitAutograd op replaces its
    # decomposition, which autograd differentiates; the op table names one
    # only where the CPU has a kernel of its own too (same behaviour).
    import glob
    import re

    root = os.path.join(os.path.dirname(__file__), "..", "..", "src", "ops")
    names = set()
    for path in glob.glob(os.path.join(root, "*.c")):
        names.update(re.findall(r'"(aten::[A-Za-z0-9_.]+)"', open(path).read()))
    assert len(names) > 500
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    implicit = sorted(n for n in names
                      if has(n, "CompositeImplicitAutograd") and not has(n, "CPU"))
    assert implicit == []
    z = torch.randn(3, dtype=torch.complex64, device="tpu", requires_grad=True)
    assert torch.conj_physical(z).grad_fn is not None
    x = torch.randn(3, device="tpu", requires_grad=True)
    assert torch.nn.functional.silu(x).grad_fn is not None


EXIT_AFTER_BACKWARD = (
    "import torch\n"
    "x = torch.randn(64, 64, device='tpu', requires_grad=True)\n"
    "g, = torch.autograd.grad(x.tanh(), x, torch.ones(64, 64, device='tpu'))\n"
)


def test_exit_right_after_a_backward_does_not_abort(tmp_path):
    # Autograd's tpu device thread drops the backward's last task (holding
    # the grad_outputs tensor made in Python) after the caller has its
    # gradient; at an immediate exit it took the GIL during finalization
    # and Python 3.11 unwound it through a noexcept frame: "terminate
    # called without an active exception" (24 of 75 processes, three at a
    # time on 2 cores, before tpuc waited for the threads at exit).
    env = dict(os.environ, TPUC_CACHE_DIR=str(tmp_path))
    for _ in range(4):
        procs = [subprocess.Popen([sys.executable, "-c", EXIT_AFTER_BACKWARD], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-2000:]
