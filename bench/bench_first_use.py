"""First-use benchmark (not a test): how long code that runs once takes on
the tpu device with an empty compile cache, the way a test suite, a first
training step or a new input shape does.

Three workloads, each in a fresh process with an empty compile cache:
  suite  a test file's pattern: tiny Hugging Face models of several
         architectures (BERT, GPT-2, Llama, T5, ViT, and diffusers' UNet2D
         where diffusers is installed), each built from its own config with
         random weights, run forward twice (no_grad) and forward + backward
         once; every model's shapes differ from the others'.
  train  GPT-2 with 2 layers, 768 wide, batch 1 x 128, vocabulary 8192: the
         first 3 AdamW training steps, each timed with a synchronize.
  random random ops at new shapes, as model initialization draws them:
         normal_, uniform_ and dropout at 8 shapes each, the median first
         call (on tpu: its compile); and steady calls of normal_ on 16M
         numbers and dropout on 6M (median of 15).
on: tpu in fused mode as it is by default (a segment's first run goes op by
op twice, TPUC_FUSE_AFTER=3), fused mode compiling every segment at its first
run (TPUC_FUSE_AFTER=1, what fused mode did first) and at its second
(TPUC_FUSE_AFTER=2, the default until 2026-12-03), fused mode compiling
a segment's new op programs on the calling thread only
(TPUC_COMPILE_THREADS=0, as before 2026-12-06), strict mode, and
PyTorch's CPU for reference. The
losses of each tpu run must match the CPU's (rtol 1e-3) or the run's figure
is replaced by the error.

Writes first_use.json to $TPUC_BENCH_RESULTS_DIR or bench/results and
prints a table.

  python bench/bench_first_use.py [--rounds N] [--workloads suite,train,random]

A child (prints one JSON line):
  python bench/bench_first_use.py --child WORKLOAD --device tpu|cpu
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")

_DEFAULTS = {"TPUC_FUSE_AFTER": None, "TPUC_COMPILE_THREADS": None}
CONFIGS = {
    # name: (device, environment over this one's)
    "fused": ("tpu", {**_DEFAULTS, "TPUC_EAGER_MODE": "fused"}),
    "fused_no_compile_helpers": ("tpu", {**_DEFAULTS, "TPUC_EAGER_MODE": "fused",
                                         "TPUC_COMPILE_THREADS": "0"}),
    "fused_compile_first_run": ("tpu", {**_DEFAULTS, "TPUC_EAGER_MODE": "fused",
                                        "TPUC_FUSE_AFTER": "1"}),
    "fused_compile_second_run": ("tpu", {**_DEFAULTS, "TPUC_EAGER_MODE": "fused",
                                         "TPUC_FUSE_AFTER": "2"}),
    "strict": ("tpu", {**_DEFAULTS, "TPUC_EAGER_MODE": "strict"}),
    "torch_cpu": ("cpu", {}),
}
WORKLOADS = ("suite", "train", "random")
RTOL = 1e-3


# ------------------------------------------------------------ the children

def suite_models():
    """(name, model, inputs dict, labels key) of the suite: small configs,
    each with its own sizes."""
    import torch
    import transformers as tf

    out = []
    torch.manual_seed(0)
    ids = lambda b, s, v: torch.randint(0, v, (b, s))  # noqa: E731
    out.append(("bert", tf.BertForMaskedLM(tf.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=64)), {"input_ids": ids(2, 7, 99)}))
    out.append(("gpt2", tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=101, n_embd=40, n_layer=2, n_head=4, n_positions=64,
        bos_token_id=100, eos_token_id=100)),
        {"input_ids": ids(3, 9, 101)}))
    out.append(("llama", tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=97, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)),
        {"input_ids": ids(2, 11, 97)}))
    out.append(("t5", tf.T5ForConditionalGeneration(tf.T5Config(
        vocab_size=103, d_model=24, d_kv=6, d_ff=44, num_layers=2, num_heads=4,
        decoder_start_token_id=0)),
        {"input_ids": ids(2, 8, 103), "decoder_input_ids": ids(2, 5, 103)}))
    out.append(("vit", tf.ViTForImageClassification(tf.ViTConfig(
        image_size=30, patch_size=5, num_channels=3, hidden_size=36, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=46, num_labels=5)),
        {"pixel_values": torch.randn(2, 3, 30, 30)}))
    try:
        from diffusers import UNet2DModel
    except ImportError:
        return out
    out.append(("unet2d", UNet2DModel(
        block_out_channels=(4, 8), norm_num_groups=4, layers_per_block=2, sample_size=16,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=3,
        in_channels=3, out_channels=3),
        {"sample": torch.randn(2, 3, 16, 16), "timestep": torch.tensor([10])}))
    return out


def first_output(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "sample"):
        return out.sample
    return out.logits


def child(workload, device):
    import torch

    if device == "tpu":
        import tpuc  # noqa: F401
    res = {"workload": workload, "device": device}

    def sync():
        if device == "tpu":
            torch.tpu.synchronize()

    if workload == "suite":
        models = suite_models()
        losses = {}
        t0 = time.perf_counter()
        for name, model, inputs in models:
            model = model.eval().to(device)  # no dropout: the CPU's losses compare
            inp = {k: v.to(device) for k, v in inputs.items()}
            with torch.no_grad():
                for _ in range(2):
                    first_output(model(**inp)).float().sum().item()
            loss = first_output(model(**inp)).float().pow(2).mean()
            loss.backward()
            losses[name] = loss.item()
            sync()
        res["seconds"] = round(time.perf_counter() - t0, 2)
        res["losses"] = losses
    elif workload == "random":
        import statistics

        ops = {
            "normal_": lambda n: torch.empty(n, 17, device=device).normal_(),
            "uniform_": lambda n: torch.empty(n, 17, device=device).uniform_(),
            "dropout": lambda n: torch.nn.functional.dropout(torch.ones(n, 13, device=device), 0.1),
        }
        t0 = time.perf_counter()
        first = {}
        for name, fn in ops.items():
            per = []
            for n in range(301, 309):
                t = time.perf_counter()
                fn(n).sum().item()
                per.append(time.perf_counter() - t)
            first[name] = round(statistics.median(per) * 1000, 1)
        res["seconds"] = round(time.perf_counter() - t0, 3)
        res["first_call_ms"] = first
        big = torch.empty(4096, 4096, device=device)
        act = torch.ones(64, 128, 768, device=device)
        steady = {}
        for name, fn in (("normal_16M", lambda: big.normal_()),
                         ("dropout_6M", lambda: torch.nn.functional.dropout(act, 0.1))):
            # Each result is held until the next, so fused mode computes it.
            for _ in range(3):
                keep = fn()
                sync()
            ts = []
            for _ in range(15):
                t = time.perf_counter()
                keep = fn()
                sync()
                ts.append(time.perf_counter() - t)
            steady[name] = round(statistics.median(ts) * 1000, 2)
            del keep
        res["steady_ms"] = steady
        res["losses"] = {}  # the numbers are not the CPU's (as on CUDA)
    else:
        import transformers as tf

        torch.manual_seed(0)
        model = tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=8192, n_embd=768, n_layer=2, n_head=12, n_positions=1024,
            bos_token_id=8191, eos_token_id=8191)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, 8192, (1, 128)).to(device)
        sync()
        steps, losses = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            loss = model(ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
            sync()
            steps.append(round((time.perf_counter() - t0) * 1000, 1))
        res["steps_ms"] = steps
        res["seconds"] = round(sum(steps) / 1000, 2)
        res["losses"] = {str(i): v for i, v in enumerate(losses)}
    if device == "tpu":
        c = torch.tpu.compile_cache_stats()
        f = torch.tpu.fused_stats()
        res["compiles"] = c["misses"]
        res["compile_seconds"] = round(c["compile_seconds"], 2)
        res["segments_by_ops"] = f["by_ops"]
        res["segment_compiles"] = f["compiles"]
    print(json.dumps(res), flush=True)


# ---------------------------------------------------------------- the parent

def run_child(workload, config):
    device, over = CONFIGS[config]
    env = dict(os.environ)
    for k, v in over.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    cache = tempfile.mkdtemp(prefix="tpuc-first-use-")
    env["TPUC_CACHE_DIR"] = cache
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", workload,
                            "--device", device], env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"child exited {p.returncode}: {tail}"}
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of each configuration, interleaved; the figure is the fastest")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    ap.add_argument("--device", default="tpu", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.device)
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r} (one of {', '.join(WORKLOADS)})")

    import torch
    import transformers

    import tpuc  # noqa: F401

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_device import report_head

    props = torch.tpu.get_device_properties(0)
    report = {
        **report_head("first_use"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "plugin": f"{props.plugin_package} {props.plugin_version}",
        "rounds": args.rounds,
        "workloads": {},
    }
    out_dir = os.environ.get("TPUC_BENCH_RESULTS_DIR",
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    path = os.path.join(out_dir, "first_use.json")
    try:
        # A run of some workloads keeps the others' entries (each has its
        # own date and load).
        with open(path) as fh:
            report["workloads"] = json.load(fh).get("workloads", {})
    except (OSError, ValueError):
        pass
    for w in workloads:
        load_start = round(os.getloadavg()[0], 2)
        runs = {c: [] for c in CONFIGS}
        for r in range(args.rounds):
            for c in CONFIGS:
                res = run_child(w, c)
                runs[c].append(res)
                print(f"  {w:6s} {c:24s} round {r + 1}: "
                      f"{res.get('seconds', res.get('error'))}", flush=True)
        entry = {}
        cpu = min((x for x in runs["torch_cpu"] if "seconds" in x),
                  key=lambda x: x["seconds"], default=None)
        for c, results in runs.items():
            ok = [x for x in results if "seconds" in x]
            if not ok:
                entry[c] = {"error": results[-1].get("error")}
                continue
            best = min(ok, key=lambda x: x["seconds"])
            if cpu is not None and c != "torch_cpu":
                bad = [k for k, v in best["losses"].items()
                       if abs(v - cpu["losses"][k]) > RTOL * max(1.0, abs(cpu["losses"][k]))]
                if bad:
                    entry[c] = {"error": f"losses differ from the CPU's: {bad}",
                                "details": best}
                    continue
            entry[c] = {k: v for k, v in best.items() if k not in ("workload", "device")}
        if cpu is not None:
            for c in CONFIGS:
                if c != "torch_cpu" and "seconds" in entry[c] and cpu["seconds"] > 0:
                    entry[c]["over_torch_cpu"] = round(entry[c]["seconds"] / cpu["seconds"], 2)
        f, old = entry.get("fused", {}), entry.get("fused_compile_first_run", {})
        if "seconds" in f and "seconds" in old:
            entry["fused_speedup_over_compile_first_run"] = round(old["seconds"] / f["seconds"], 2)
        entry["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entry["load_avg"] = [load_start, round(os.getloadavg()[0], 2)]
        report["workloads"][w] = entry
    os.makedirs(out_dir, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(report, fh, indent=2)
        fh.write("\n")
    print(f"\nfirst use, fresh process and empty compile cache ({report['machine']}):")
    for w, entry in report["workloads"].items():
        for c in CONFIGS:
            e = entry.get(c, {"error": "not run"})
            fig = (f"{e['seconds']:8.2f} s" if "seconds" in e else f"ERROR {e['error']}")
            extra = ""
            if "compiles" in e:
                extra = (f"  {e['compiles']} compiles, {e['compile_seconds']} s compiling, "
                         f"{e['segments_by_ops']} segments op by op")
            if "steps_ms" in e:
                extra += f"  steps {e['steps_ms']} ms"
            if "first_call_ms" in e:
                extra += f"  first call {e['first_call_ms']} ms, steady {e['steady_ms']} ms"
            print(f"  {w:6s} {c:24s} {fig}{extra}")


if __name__ == "__main__":
    main()
