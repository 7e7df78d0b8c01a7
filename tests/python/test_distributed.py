"""torch.distributed on tpu: the `tpu` c10d backend.

Ranks run as processes started the way torchrun starts them (one tpu device
each, collectives staged through the host over Gloo) and as threads of one
process (tpuc.distributed.run_threads: one device each, in-program
collectives). Every multi-process run is on 127.0.0.1 and bounded in time.
The scenarios themselves are in dist_scenarios.py.
"""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "dist_scenarios.py")

pytestmark = pytest.mark.skipif(not torch.tpu.is_available(), reason="the tpu device is not available")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra):
    env = dict(os.environ)
    env.update(
        MASTER_ADDR="127.0.0.1",
        GLOO_SOCKET_IFNAME="lo",
        TORCH_SHOW_CPP_STACKTRACES="0",
    )
    env.update(extra)
    return env


def _finish(procs, timeout):
    """Waits for every process (at most `timeout` seconds in all; the
    rest are killed) and returns their (returncode, output)."""
    deadline = time.monotonic() + timeout
    out = []
    for p in procs:
        try:
            o, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            o, _ = p.communicate()
            out.append((None, o))
            continue
        out.append((p.returncode, o))
    return out


def _results(runs, name):
    results = []
    for i, (rc, o) in enumerate(runs):
        lines = [ln for ln in o.splitlines() if ln.startswith("SCENARIO-OK ")]
        assert rc == 0 and lines, f"{name}: process {i} ended with {rc}:\n{o[-6000:]}"
        results.append(json.loads(lines[-1][len("SCENARIO-OK ") :]))
    return results


def launch(scenario, nprocs, args=None, env=None, timeout=600):
    """Runs `scenario` on `nprocs` processes (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR/PORT as torchrun sets them); returns each rank's result."""
    port = str(free_port())
    procs = []
    for r in range(nprocs):
        e = _env(
            {
                "RANK": str(r),
                "WORLD_SIZE": str(nprocs),
                "LOCAL_RANK": str(r),
                "MASTER_PORT": port,
                "TPUC_TEST_ARGS": json.dumps(args or {}),
            }
        )
        e.update(env or {})
        procs.append(
            subprocess.Popen(
                [sys.executable, SCENARIOS, scenario],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=e,
            )
        )
    return _results(_finish(procs, timeout), scenario)


def threads(scenario, n, args=None, timeout=600, env=None):
    """Runs `scenario` on `n` threads of one process (a child process, so a
    failure cannot take pytest down); returns the ranks' results."""
    e = _env({"TPUC_TEST_THREADS": str(n), "TPUC_TEST_ARGS": json.dumps(args or {}), **(env or {})})
    p = subprocess.Popen([sys.executable, SCENARIOS, scenario], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e)
    return _results(_finish([p], timeout), scenario)[0]


# ---- every ProcessGroup operation ------------------------------------------


def test_collectives_two_processes():
    res = launch("collectives", 2)
    assert res[0] == res[1] > 0


def test_a_gloo_group_takes_tpu_tensors():
    # init_process_group("gloo") as CUDA programs (and transformers' tests)
    # write it: tpu tensors go through a tpu backend of the group, CPU
    # tensors through Gloo, and the group still says it is Gloo's.
    res = launch("collectives", 2, args={"dtypes": ["int32", "float32", "bfloat16"], "backend": "gloo"}, env={"TPUC_TEST_BACKEND": "gloo"})
    assert res[0] == res[1] > 0


def test_collectives_four_processes():
    res = launch("collectives", 4, args={"dtypes": ["bool", "int16", "uint64", "bfloat16", "float32", "complex64"]})
    assert len(res) == 4 and len(set(res)) == 1


def test_collectives_threads_in_program():
    res = threads("collectives", 4)
    assert len(res) == 4 and len(set(res)) == 1


def test_collectives_two_threads():
    res = threads("collectives", 2, args={"dtypes": ["bool", "uint8", "int32", "float16", "float64", "complex128"]})
    assert len(res) == 2


def test_point_to_point():
    assert launch("point_to_point", 2) == [True, True]
    assert threads("point_to_point", 4) == [True] * 4


def test_completions_never_wait_for_the_callers_lock():
    assert launch("integer_averages", 2, timeout=300) == [40, 40]


def test_async_work_and_futures():
    assert launch("async_work", 2) == [True, True]
    assert threads("async_work", 2) == [True, True]


def test_functional_collectives():
    assert launch("functional", 2) == [True, True]
    assert threads("functional", 2) == [True, True]


def test_mismatched_calls_and_bad_input():
    assert launch("errors", 2) == [True, True]
    assert threads("errors", 2) == [True, True]


# ---- the libraries on top ----------------------------------------------------


def test_ddp_gpt2_and_llama_against_one_device():
    for model in ("gpt2", "llama"):
        res = launch("train", 2, args={"model": model, "mode": "ddp"})
        assert res[0] == res[1] and len(res[0]) == 5


def test_ddp_features():
    assert launch("ddp_features", 2) == [6, 6]


def test_fsdp2_against_one_device():
    res = launch("train", 2, args={"model": "gpt2", "mode": "fsdp"})
    assert res[0] == res[1]
    res = launch("train", 2, args={"model": "llama", "mode": "fsdp", "reshard": False})
    assert res[0] == res[1]
    # bf16 parameters with float32 gradient reduction, within bf16's rounding
    res = launch("train", 2, args={"model": "llama", "mode": "fsdp", "mixed": True})
    assert res[0] == res[1]


def test_fsdp2_with_tensor_parallel_2d():
    for model in ("llama", "gpt2"):
        res = launch("train", 4, args={"model": model, "mode": "fsdp", "tp": 2})
        assert len(set(map(tuple, res))) == 1


def test_training_on_threads_in_program():
    # TPUC_FUSE_AFTER=2: a tiny model's segments are compiled from their
    # second run (not their 64th), so from the second step on DDP's and
    # FSDP2's collectives run with the ops before them as one program
    # across the ranks (group segments); the first step's go alone.
    env = {"TPUC_FUSE_AFTER": "2"}
    res = threads("train", 2, args={"model": "gpt2", "mode": "ddp", "report_group": True}, env=env)
    assert res[0]["mean"] == res[1]["mean"] and res[0]["group_segments"] > 0, res
    res = threads("train", 4, args={"model": "llama", "mode": "fsdp", "tp": 2, "report_group": True}, env=env)
    assert len({tuple(r["mean"]) for r in res}) == 1 and res[0]["group_segments"] > 0, res


def test_fused_mode_runs_a_collective_with_the_ops_before_it():
    # Ranks as threads, TPUC_FUSE_AFTER=2 so that a segment is compiled at
    # its second run: group segments per step, values, a rank with other
    # ops, a rank in strict mode, a rank that does not come (timeout).
    res = threads("fused_collectives", 2, env={"TPUC_FUSE_AFTER": "2"})
    assert "did not call it" in res[0]["timeout"], res


def test_dtensor():
    assert launch("dtensor", 2) == [True, True]
    assert threads("dtensor", 4) == [True] * 4


def test_checkpoint_round_trip(tmp_path):
    res = launch("checkpoint", 2, args={"path": str(tmp_path / "ckpt")})
    assert len(res) == 2 and all(isinstance(r, float) for r in res)
    assert any(tmp_path.joinpath("ckpt").iterdir())


# ---- faults ------------------------------------------------------------------


def _survivor(how, timeout_s):
    port = str(free_port())
    procs = []
    for r in range(2):
        e = _env(
            {
                "RANK": str(r),
                "WORLD_SIZE": "2",
                "LOCAL_RANK": str(r),
                "MASTER_PORT": port,
                "TPUC_TEST_ARGS": json.dumps({"how": how}),
                "TPUC_TEST_TIMEOUT": str(timeout_s),
                "TPUC_TEST_BACKEND": "tpu",
            }
        )
        procs.append(subprocess.Popen([sys.executable, SCENARIOS, "faults"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e))
    start = time.monotonic()
    try:
        out, _ = procs[0].communicate(timeout=timeout_s + 120)
    finally:
        for p in procs:
            p.kill()
            p.communicate()
    elapsed = time.monotonic() - start
    lines = [ln for ln in out.splitlines() if ln.startswith("SCENARIO-OK ")]
    assert lines, out[-4000:]
    return json.loads(lines[-1][len("SCENARIO-OK ") :]), elapsed


def test_a_rank_that_dies_ends_the_others_collective():
    res, _ = _survivor("exit", 60)
    assert res["error"] == "DistBackendError", res
    assert "all_reduce" in res["message"], res
    assert res["seconds"] < 60, res
    assert res["after"] == 8.0


def test_a_rank_that_hangs_ends_the_others_collective_at_the_timeout():
    res, _ = _survivor("hang", 10)
    assert res["error"] == "DistBackendError", res
    assert "all_reduce" in res["message"] and "imed out" in res["message"], res
    assert 9 < res["seconds"] < 60, res
    assert res["after"] == 8.0


# ---- launchers and libraries --------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "ddp_gpt2.py")


def _run(cmd, env=None, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(env or {}), timeout=timeout)
    assert p.returncode == 0, p.stdout[-6000:]
    return p.stdout


def _losses(out):
    return [float(ln.split("loss ")[1].split()[0]) for ln in out.splitlines() if ln.startswith("step ")]


def test_torchrun_runs_the_readme_example_as_one_device_would():
    """The README's example under torchrun on 2 processes: the loss of each
    step is what one process gets on the same global batch."""
    port = str(free_port())
    two = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                "--master-port", port, EXAMPLE, "--steps", "3", "--batch", "2"])
    one = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
                "--master-port", str(free_port()), EXAMPLE, "--steps", "3", "--batch", "4"])
    a, b = _losses(two), _losses(one)
    assert len(a) == len(b) == 3 and "(2 ranks)" in two and "(1 ranks)" in one
    for x, y in zip(a, b):
        assert abs(x - y) < 2e-4, (a, b)


def test_multiprocessing_spawn():
    out = _run([sys.executable, EXAMPLE, "--spawn", "2", "--steps", "2"], env={"MASTER_PORT": str(free_port())})
    assert len(_losses(out)) == 2 and "(2 ranks)" in out


def _trainer_lines(out):
    # Anywhere in a line, and whatever follows the object on it: the two
    # ranks share the output, and the other rank's progress bar ends in a
    # carriage return, not a newline, so it can share a line with a result.
    dec = json.JSONDecoder()
    return [dec.raw_decode(ln, ln.index("TRAINER {") + len("TRAINER "))[0]
            for ln in out.splitlines() if "TRAINER {" in ln]


def test_accelerate_launch_and_trainer_with_ddp(tmp_path):
    script = os.path.join(HERE, "dist_trainer.py")
    accelerate = os.path.join(os.path.dirname(sys.executable), "accelerate")
    out = _run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_ip", "127.0.0.1",
                "--main_process_port", str(free_port()), script, str(tmp_path / "two")])
    ranks = sorted(_trainer_lines(out), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1], out[-3000:]
    for r in ranks:
        assert r["device"] == f"tpu:{r['rank']}" and r["world"] == 2, r
        assert r["backend"] == "tpu" and r["wrapped"] == "DistributedDataParallel", r
    # DDP kept the ranks' weights identical, and training moved them.
    assert ranks[0]["weights"] == ranks[1]["weights"]
    assert len(ranks[0]["losses"]) == 4 and all(x == x for x in ranks[0]["losses"])
    one = _trainer_lines(_run([sys.executable, script, str(tmp_path / "one")]))[0]
    assert one["device"] == "tpu:0" and one["world"] == 1, one
    assert one["weights"] != ranks[0]["weights"]


@pytest.mark.parametrize("backend", ["tpu", "gloo"])
def test_hugging_face_tensor_parallel(tmp_path, backend):
    # transformers' own TP (DistributedConfig(tp_size=2)) in a process group
    # named for tpu, and in the Gloo group transformers' own TP tests
    # create: sharded weights give the unsharded model's logits, loss,
    # gradients and greedy tokens.
    ranks = launch("hf_tensor_parallel", 2, {"path": str(tmp_path / "qwen2")}, env={"TPUC_TEST_BACKEND": backend})
    for r in ranks:
        assert r["sharded"] >= 8 and r["grads"] > r["sharded"] and r["tokens"] == 12, r


def test_sequence_parallel():
    assert launch("sequence_parallel", 2) == [True, True]


def test_destroy_and_init_again():
    # Each new group rendezvouses on a port of its own: on the old one a fast
    # rank could find the old store still listening in a slow rank.
    ports = []
    while len(ports) < 2:
        p = free_port()
        if p not in ports:
            ports.append(p)
    assert launch("reinit", 2, args={"ports": ports}) == [True, True]


FORK_CHILD = r"""
import os, sys, torch
x = torch.ones(3, device="tpu") * 2
y = x + 1  # recorded in fused mode, not run yet
pid = os.fork()
if pid == 0:
    ok = torch.tpu._is_in_bad_fork()
    for use in (lambda: (x * 3).cpu(), lambda: torch.zeros(2, device="tpu"), lambda: y.cpu()):
        try:
            use()
        except RuntimeError as e:
            ok = ok and "Cannot re-initialize tpu in forked subprocess" in str(e) and "spawn" in str(e)
        else:
            ok = False
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert os.WEXITSTATUS(status) == 0, status
assert not torch.tpu._is_in_bad_fork()
assert y.cpu().tolist() == [3.0, 3.0, 3.0]
# A child that does not touch the device (a DataLoader worker) just works.
import multiprocessing as mp
with mp.get_context("fork").Pool(2) as pool:
    assert pool.map(abs, [-1, -2]) == [1, 2]
print("FORK-OK")
"""


def test_device_in_a_forked_child_raises_instead_of_hanging():
    p = subprocess.run([sys.executable, "-c", FORK_CHILD], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0 and "FORK-OK" in p.stdout, p.stdout[-3000:]
