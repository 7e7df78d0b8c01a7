"""torch.compile benchmark (not a test): GPT-2 (12 layers, 768 wide, batch
1 x 128, vocabulary 8192, f32), its 2-layer variant, the Llama of
bench_eager.py, and the tiny GPT-2 of the compile anchor (2 layers, 64
wide, 32 tokens).

For each model, in interleaved rounds in one process (one call of each
configuration per round, rotating order): the steady forward (no_grad) and
AdamW training step compiled with backend="tpu", in fused and strict eager
mode, and on PyTorch's CPU. Then the compiled step with the graph runtime's
timing on: every replay waits for its program, so the JSON gets the
plugin's own execute time of the step's programs and
overhead = compiled_step / plugin_execute_sum. The first compiled call in a
fresh process (child), with an empty compile cache (cold) and with the disk
cache that run filled (warm), against a steady call. Static-cache
generate() of GPT-2 (2 layers), compiled decoding against eager fused, in
tokens per second.

Writes compile.json and compile.png (when matplotlib is installed) to
$TPUC_BENCH_RESULTS_DIR or bench/results and prints a table.

  python bench/bench_compile.py [--models tiny,gpt2_2layer,gpt2,llama]
                                [--rounds N] [--quick] [--no-first-call]
                                [--no-generate]
  python bench/bench_compile.py --first-call MODEL   (the child)
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import torch

import tpuc  # noqa: F401  (registers the tpu device)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_eager  # noqa: E402  (model configs, build id)
from bench_device import machine  # noqa: E402

warnings.filterwarnings("ignore", message="tpu:.*has no native lowering")
warnings.filterwarnings("ignore", message=".*loss_type=None.*")

MODELS = ("tiny", "gpt2_2layer", "gpt2", "llama")
CONFIGS = ("compiled", "fused", "strict", "torch_cpu")
TARGETS = {
    "tiny_forward_ms_max": 0.40,
    "gpt2_2layer_forward_ms_max": 32.0,
    "fused_gpt2_2layer_forward_ms_max": 39.0,
    "compiled_step_overhead_max": 1.05,
    "tiny_host_overhead_us_max": 30.0,
    "warm_first_call_vs_steady_max": 1.5,
    "decode_speedup_min": 2.0,
}


def build(name):
    import transformers

    if name == "tiny":
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(vocab_size=bench_eager.VOCAB, n_embd=64, n_layer=2,
                                      n_head=2, n_positions=64,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg), 32
    return bench_eager.build_model(name), bench_eager.SEQ


def ids_for(seq):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, bench_eager.VOCAB, (1, seq), generator=g)


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


class Runner:
    """One configuration of one model: forward() and step() callables."""

    def __init__(self, config, cpu_model, seq):
        self.config = config
        self.device = "cpu" if config == "torch_cpu" else "tpu"
        self.model = copy.deepcopy(cpu_model).to(self.device)
        self.model.config.use_cache = False
        self.ids = ids_for(seq).to(self.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=bench_eager.LR)
        if config == "compiled":
            self.fwd = torch.compile(self.model, backend="tpu")
            opt = self.opt

            @torch.compile(backend="tpu")
            def opt_step():
                opt.step()

            self.opt_step = opt_step
        else:
            self.fwd = self.model
            self.opt_step = self.opt.step

    def mode(self):
        return torch.tpu.eager_mode("strict" if self.config == "strict" else "fused")

    def forward(self):
        with self.mode(), torch.no_grad():
            out = self.fwd(input_ids=self.ids).logits
            sync(self.device)
        return out

    def step(self):
        with self.mode():
            loss = self.fwd(input_ids=self.ids, labels=self.ids).loss
            loss.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)
            sync(self.device)
        return loss


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def bench_model(name, rounds, warmup):
    cpu_model, seq = build(name)
    runners = {c: Runner(c, cpu_model, seq) for c in CONFIGS}
    out = {"seq": seq, "parameters": sum(p.numel() for p in cpu_model.parameters())}
    # Logits against PyTorch's CPU with dropout off (eval mode); the timed
    # calls below run in train mode, dropout as configured, on every side.
    for r in runners.values():
        r.model.eval()
    ref = runners["torch_cpu"].forward()
    for c in CONFIGS:
        got = runners[c].forward().cpu()
        err = (got - ref).abs().max().item()
        out.setdefault("max_abs_err_vs_cpu", {})[c] = err
    for r in runners.values():
        r.model.train()
    for kind in ("forward", "step"):
        for _ in range(warmup):
            for c in CONFIGS:
                getattr(runners[c], kind)()
        times = {c: [] for c in CONFIGS}
        for r in range(rounds):
            order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
            for c in order:
                times[c].append(timed(getattr(runners[c], kind)))
        out[kind] = {c: statistics.median(t) for c, t in times.items()}
    # The plugin's own time for the compiled step's and forward's programs.
    comp = runners["compiled"]
    for kind in ("forward", "step"):
        from tpuc import _C

        _C.graph_set_timing(True)
        try:
            walls, execs = [], []
            for _ in range(rounds):
                before = torch.tpu.compile_stats()["execute_seconds"]
                walls.append(timed(getattr(comp, kind)))
                execs.append((torch.tpu.compile_stats()["execute_seconds"] - before) * 1e3)
        finally:
            _C.graph_set_timing(False)
        out[f"compiled_{kind}_timed_ms"] = statistics.median(walls)
        out[f"plugin_execute_{kind}_ms"] = statistics.median(execs)
        out[f"overhead_{kind}"] = statistics.median(walls) / max(statistics.median(execs), 1e-9)
        out[f"host_overhead_{kind}_us"] = (statistics.median(walls) - statistics.median(execs)) * 1e3
    st = torch.tpu.compile_stats()
    out["eager_graphs"] = st["eager_graphs"]
    out["eager_reasons"] = st["eager_reasons"]
    return out


def host_breakdown(calls=300, rounds=5):
    """Where a compiled tiny-model forward's host time goes (no_grad, calls
    pipelined, timing on so each replay's execution is measured): tpuc's
    replay (the graph_replay call less the plugin's execution), tpuc's
    Python around it (the backend's graph call less graph_replay), the rest
    (Dynamo, transformers' wrappers), and the floor any Dynamo backend pays
    for this model with no device work beside it (the same model compiled
    with a backend that returns its first outputs)."""
    from tpuc import _C
    from tpuc import compile as tpuc_compile

    cpu_model, seq = build("tiny")
    model = copy.deepcopy(cpu_model).to("tpu").eval()
    ids = ids_for(seq).to("tpu")
    compiled = torch.compile(model, backend="tpu")

    def noop_backend(gm, example_inputs):
        kept = []

        def run(*args):
            if not kept:
                kept.append(gm(*args))
            return kept[0]

        return run

    floor_model = torch.compile(copy.deepcopy(cpu_model).to("tpu").eval(), backend=noop_backend)
    replay = _C.graph_replay
    graph_call = tpuc_compile._Graph.__call__
    spent = [0.0, 0, 0.0]

    def timed_replay(graph, tensors):
        t = time.perf_counter()
        out = replay(graph, tensors)
        spent[0] += time.perf_counter() - t
        spent[1] += 1
        return out

    def timed_call(self, *args):
        t = time.perf_counter()
        out = graph_call(self, *args)
        spent[2] += time.perf_counter() - t
        return out

    rows = []
    with torch.no_grad():
        for _ in range(5):
            compiled(input_ids=ids)
            floor_model(input_ids=ids)
        torch.tpu.synchronize()
        _C.graph_set_timing(True)
        _C.graph_replay = timed_replay
        tpuc_compile._C.graph_replay = timed_replay
        tpuc_compile._Graph.__call__ = timed_call
        try:
            for _ in range(rounds):
                spent[:] = [0.0, 0, 0.0]
                before = torch.tpu.compile_stats()
                t = time.perf_counter()
                for _ in range(calls):
                    out = compiled(input_ids=ids)
                out.logits.cpu()
                wall = (time.perf_counter() - t) / calls
                after = torch.tpu.compile_stats()
                execute = (after["execute_seconds"] - before["execute_seconds"]) / max(
                    after["replays"] - before["replays"], 1)
                t = time.perf_counter()
                for _ in range(calls):
                    floor_model(input_ids=ids)
                floor = (time.perf_counter() - t) / calls
                per_replay = spent[0] / max(spent[1], 1)
                rows.append({"call_us": wall * 1e6, "graph_replay_us": per_replay * 1e6,
                             "graph_call_us": spent[2] / calls * 1e6,
                             "plugin_execute_us": execute * 1e6,
                             "dynamo_floor_us": floor * 1e6})
        finally:
            _C.graph_replay = replay
            tpuc_compile._C.graph_replay = replay
            tpuc_compile._Graph.__call__ = graph_call
            _C.graph_set_timing(False)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    med["tpuc_replay_us"] = statistics.median(r["graph_replay_us"] - r["plugin_execute_us"]
                                              for r in rows)
    med["tpuc_python_us"] = statistics.median(r["graph_call_us"] - r["graph_replay_us"]
                                              for r in rows)
    med["tpuc_host_us"] = med["tpuc_replay_us"] + med["tpuc_python_us"]
    med["outside_backend_us"] = statistics.median(r["call_us"] - r["graph_call_us"] for r in rows)
    med["host_over_execute_us"] = med["call_us"] - med["plugin_execute_us"]
    med["calls"], med["rounds"] = calls, rounds
    return med


def first_call_child(name):
    """Child process: the first compiled training step, then a steady one."""
    cpu_model, seq = build(name)
    r = Runner("compiled", cpu_model, seq)
    first = timed(r.step)
    r.step()
    steady = statistics.median(timed(r.step) for _ in range(3))
    st = torch.tpu.compile_stats()
    cache = torch.tpu.compile_cache_stats()
    # Where the first call's time went: Dynamo's tracing (AOTAutograd's
    # included: it runs inside the backend call), tpuc's compiles or loads
    # of the graph programs, and the rest (the captures' eager runs).
    import torch._dynamo.utils as dynamo_utils

    names, values = dynamo_utils.compile_times(repr="csv", aggregate=True)
    dynamo_s = float(dict(zip(names, values)).get("_compile.compile_inner", 0.0))
    print(json.dumps({"first_ms": first, "steady_ms": steady,
                      "compiles": st["compiles"], "disk_hits": st["disk_hits"],
                      "captures": st["captures"], "records_loaded": st["records_loaded"],
                      "load_seconds": cache["load_seconds"],
                      "dynamo_seconds": dynamo_s,
                      "graph_compile_seconds": st["compile_seconds"],
                      "capture_runs_seconds": first / 1e3 - dynamo_s - st["compile_seconds"]}))


def run_child(name, cache_dir):
    env = dict(os.environ, TPUC_CACHE_DIR=cache_dir, TPUC_CACHE_PREFETCH="0")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-call", name],
                       env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def first_calls(name):
    with tempfile.TemporaryDirectory() as d:
        cold = run_child(name, d)
        warm = run_child(name, d)
    base = warm["steady_ms"] + warm["load_seconds"] * 1e3
    warm["vs_steady_plus_load"] = warm["first_ms"] / base
    # Without Dynamo's own tracing (PyTorch's, the same for every backend).
    warm["tpuc_vs_steady_plus_load"] = (warm["first_ms"] - warm["dynamo_seconds"] * 1e3) / base
    return {"cold": cold, "warm": warm}


def bench_generate(new_tokens):
    import transformers

    torch.manual_seed(0)
    cpu_model, _ = build("gpt2_2layer")
    model = cpu_model.eval().to("tpu")
    ids = ids_for(16).to("tpu")
    res = {}
    outs = {}
    for label, kw in (("eager_fused", {}),
                      ("compiled", {"compile_config": transformers.CompileConfig(backend="tpu")})):
        args = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                    cache_implementation="static", **kw)
        if label == "eager_fused":
            args["disable_compile"] = True
        with torch.no_grad():
            model.generate(ids, **args)  # warm-up (capture / programs)
            torch.tpu.synchronize()
            t0 = time.perf_counter()
            out = model.generate(ids, **args)
            torch.tpu.synchronize()
        dt = time.perf_counter() - t0
        outs[label] = out.cpu()
        res[label] = {"tokens_per_s": new_tokens / dt, "seconds": dt}
    res["same_tokens"] = bool(torch.equal(outs["eager_fused"], outs["compiled"]))
    res["speedup"] = res["compiled"]["tokens_per_s"] / res["eager_fused"]["tokens_per_s"]
    return res


def print_table(report):
    print(f"\ntorch.compile on {report['machine']['plugin']} ({report['machine']['machine']}), ms")
    print(f"{'model':<12} {'what':<8} " + " ".join(f"{c:>10}" for c in CONFIGS)
          + f" {'plugin':>10} {'overhead':>9}")
    for name, m in report["models"].items():
        if "error" in m:
            print(f"{name:<12} error: {m['error']}")
            continue
        for kind in ("forward", "step"):
            print(f"{name:<12} {kind:<8} " + " ".join(f"{m[kind][c]:10.2f}" for c in CONFIGS)
                  + f" {m[f'plugin_execute_{kind}_ms']:10.2f} {m[f'overhead_{kind}']:9.3f}")
        fc = m.get("first_call")
        if fc and "error" not in fc:
            w = fc["warm"]
            print(f"{'':<12} first call cold {fc['cold']['first_ms']:.0f} ms, warm "
                  f"{w['first_ms']:.0f} ms (Dynamo {w['dynamo_seconds'] * 1e3:.0f}, "
                  f"programs {w['graph_compile_seconds'] * 1e3:.0f}, captures "
                  f"{w['capture_runs_seconds'] * 1e3:.0f}), steady {w['steady_ms']:.1f} ms "
                  f"(warm / (steady + load) {w['vs_steady_plus_load']:.2f}, "
                  f"without Dynamo {w['tpuc_vs_steady_plus_load']:.2f})")
    h = report.get("tiny_host_breakdown")
    if h and "error" not in h:
        print(f"tiny forward, host per call: tpuc {h['tpuc_host_us']:.1f} us (replay "
              f"{h['tpuc_replay_us']:.1f}, Python {h['tpuc_python_us']:.1f}), outside the backend "
              f"{h['outside_backend_us']:.1f} us (a no-op backend's floor, idle device: "
              f"{h['dynamo_floor_us']:.1f} us), plugin execute {h['plugin_execute_us']:.1f} us")
    g = report.get("generate")
    if isinstance(g, dict) and "error" not in g:
        print(f"static-cache generate, GPT-2 2-layer: compiled {g['compiled']['tokens_per_s']:.1f} "
              f"tok/s, eager fused {g['eager_fused']['tokens_per_s']:.1f} tok/s "
              f"({g['speedup']:.2f}x, same tokens: {g['same_tokens']})")


def plot(report, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [n for n, m in report["models"].items() if "error" not in m]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, kind in zip(axes, ("forward", "step")):
        width = 0.8 / (len(CONFIGS) + 1)
        for i, c in enumerate(CONFIGS + ("plugin",)):
            vals = [report["models"][n][f"plugin_execute_{kind}_ms"] if c == "plugin"
                    else report["models"][n][kind][c] for n in names]
            ax.bar([j + i * width for j in range(len(names))], vals, width, label=c)
        ax.set_xticks([j + 0.4 for j in range(len(names))], names)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title(f"{kind} (median)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="tiny and gpt2_2layer, 3 rounds")
    ap.add_argument("--no-first-call", action="store_true")
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--first-call", metavar="MODEL")
    args = ap.parse_args()
    if args.first_call:
        return first_call_child(args.first_call)
    models = args.models.split(",")
    if args.quick:
        models, args.rounds = ["tiny", "gpt2_2layer"], 3
    report = {"machine": describe_machine(), "targets": TARGETS, "models": {},
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # The first calls first, while this process holds no model: its memory
    # would make the children's first steps wait for the kernel to reclaim
    # pages (measured: GPT-2's warm first step 1.2 s over a steady step
    # beside an idle parent, 2.9 s beside one holding 7 GB).
    first = {}
    for name in models if not args.no_first_call else ():
        print(f"bench_compile: {name} first calls", file=sys.stderr, flush=True)
        try:
            first[name] = first_calls(name)
        except Exception as e:
            traceback.print_exc()
            first[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    for name in models:
        print(f"bench_compile: {name}", file=sys.stderr, flush=True)
        try:
            entry = bench_model(name, args.rounds, args.warmup)
            if name in first:
                entry["first_call"] = first[name]
        except Exception as e:  # the run goes on; the error is reported
            traceback.print_exc()
            entry = {"error": f"{type(e).__name__}: {e}"[:500]}
        report["models"][name] = entry
        torch._dynamo.reset()
    if "tiny" in models:
        try:
            report["tiny_host_breakdown"] = host_breakdown()
        except Exception as e:
            traceback.print_exc()
            report["tiny_host_breakdown"] = {"error": f"{type(e).__name__}: {e}"[:500]}
    if not args.no_generate:
        try:
            report["generate"] = bench_generate(32)
        except Exception as e:
            traceback.print_exc()
            report["generate"] = {"error": f"{type(e).__name__}: {e}"[:500]}
    out_dir = os.environ.get("TPUC_BENCH_RESULTS_DIR",
                             os.path.join(os.path.dirname(__file__), "results"))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compile.json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, os.path.join(out_dir, "compile.png"))
    print_table(report)


def describe_machine():
    import transformers

    info = tpuc._C.plugin_info()
    return {"machine": machine(), "torch": torch.__version__,
            "transformers": transformers.__version__,
            "plugin": f"{info['package']} {info['package_version']}",
            "pjrt_api": info["pjrt_api"], "platform": info["platform"],
            "build": bench_eager.build_id()}


if __name__ == "__main__":
    main()
