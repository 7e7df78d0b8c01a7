"""Eager-mode benchmark (not a test): GPT-2 (12 and 2 layers) and a Llama of
the same size with random weights, batch 1 x 128 tokens, forward (no_grad)
and AdamW training step, in the tpu device's three eager modes ('debug',
'strict', 'fused') and on PyTorch's CPU; plus the first training step in
fused mode in a fresh process, with an empty compile cache (cold) and with
the disk cache that run filled (warm), and PyTorch's own first CPU step
(the same fresh gradients and optimizer state), with the page faults of
each step; these child processes run first,
before this process builds any model. The steady-state steps of the four
configurations are timed in rounds, one step of each per round. Then each
kind of matrix product of a model's forward is timed, eight to a fused
program on the tpu device and on PyTorch's CPU ("matmuls" in the JSON): how
much of the forward the products alone take on each side.

Writes eager_modes.json and eager_modes.png (when matplotlib is installed)
to $TPUC_BENCH_RESULTS_DIR or bench/results, and prints a table of figures
and ratios. A mode that fails, or whose forward logits do not match
PyTorch's CPU, gets the error string in place of its figure (the traceback
goes to stderr and to "errors" in the JSON); the run goes on.

  python bench/bench_eager.py [--models gpt2_2layer,llama] [--steps N]
                              [--warmup N] [--quick] [--no-first-step]
                              [--no-matmuls]

The first-step figures run this script as a child (prints one JSON line):
  python bench/bench_eager.py --first-step MODEL [--first-step-device cpu]
"""

import argparse
import copy
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import torch

import tpuc  # noqa: F401  (registers the tpu device)

warnings.filterwarnings("ignore", message="tpu:.*has no native lowering")

MODELS = ("gpt2", "gpt2_2layer", "llama")
MODES = ("debug", "strict", "fused")
CONFIGS = MODES + ("torch_cpu",)
BATCH, SEQ = 1, 128
VOCAB = 8192
LR = 1e-4
# Fused forward logits vs PyTorch CPU: |a - b| <= ATOL + RTOL * |b|.
ATOL, RTOL = 1e-2, 1e-2
# After the minimum warm-up, a step that still compiled something (a new
# op program or fused segment program) is taken as warm-up too, up to this.
MAX_WARMUP = 12
BUILD = None  # build_id() of this process, set by main()
TARGETS = {
    "fused_vs_strict_train_step_min": 2.0,
    "fused_vs_cpu_gpt2_forward_max": 1.0,
    "warm_first_step_vs_steady_max": 1.5,
}


# --------------------------------------------------------------- the models

def model_config(name):
    import transformers

    if name in ("gpt2", "gpt2_2layer"):
        return transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=768, n_layer=12 if name == "gpt2" else 2,
            n_head=12, n_positions=1024,
            bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    if name == "llama":
        return transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=768, intermediate_size=2048,
            num_hidden_layers=12, num_attention_heads=12,
            num_key_value_heads=12, max_position_embeddings=1024)
    raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")


def build_model(name):
    """The model on the CPU, random weights from a fixed seed."""
    import transformers

    torch.manual_seed(0)
    cfg = model_config(name)
    cls = (transformers.LlamaForCausalLM if name == "llama"
           else transformers.GPT2LMHeadModel)
    return cls(cfg)


def describe(name, model):
    cfg = model.config
    keys = ["model_type", "vocab_size", "n_embd", "n_layer", "n_head",
            "n_positions", "resid_pdrop", "embd_pdrop", "attn_pdrop",
            "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads",
            "max_position_embeddings", "attention_dropout",
            "tie_word_embeddings", "hidden_act", "activation_function"]
    out = {"class": type(model).__name__}
    for k in keys:
        v = getattr(cfg, k, None)
        if v is not None and not callable(v):
            out[k] = v
    out["attn_implementation"] = getattr(cfg, "_attn_implementation", None)
    out["parameters"] = sum(p.numel() for p in model.parameters())
    out["dtype"] = str(next(model.parameters()).dtype).replace("torch.", "")
    out["batch"], out["seq_len"] = BATCH, SEQ
    out["optimizer"] = f"AdamW(lr={LR})"
    return out


def input_ids():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


# ------------------------------------------------------------------ running

def build_id():
    """Which build of the binding this process loaded: the sha256 (16 hex
    digits) of tpuc/_C's file as it is on disk now, and its mtime. A
    rebuild during a run shows up as a child with another id."""
    import hashlib

    from tpuc import _C

    path = _C.__file__
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    mtime = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(path)))
    return f"{h.hexdigest()[:16]} ({os.path.basename(path)}, {mtime})"


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def compiles_so_far():
    """Programs compiled so far in this process (op programs and fused
    segment programs); a step that raises it was not steady state."""
    c = torch.tpu.compile_cache_stats()
    f = torch.tpu.fused_stats()
    return int(c.get("misses", 0)) + int(f.get("compiles", 0))


class Run:
    """One configuration ('torch_cpu' or an eager mode) of one kind
    ('forward' or 'train_step'): its own copy of the model on its device,
    and one step of it at a time."""

    def __init__(self, kind, cfg, base, ids):
        self.kind, self.cfg = kind, cfg
        self.device = "cpu" if cfg == "torch_cpu" else "tpu"
        self.enter()
        self.model = copy.deepcopy(base)
        self.model = (self.model.eval() if kind == "forward"
                      else self.model.train()).to(self.device)
        self.opt = (torch.optim.AdamW(self.model.parameters(), lr=LR)
                    if kind == "train_step" else None)
        self.ids = ids.to(self.device)
        sync(self.device)
        self.last = None
        self.losses = []
        self.warm_ms, self.times, self.compiles = [], [], 0

    def enter(self):
        if self.device == "tpu":
            set_mode(self.cfg)

    def timed_step(self):
        """One step and a synchronize: (ms, whether it compiled anything)."""
        self.enter()
        before = compiles_so_far() if self.device == "tpu" else 0
        t0 = time.perf_counter()
        if self.kind == "forward":
            with torch.no_grad():
                self.last = self.model(input_ids=self.ids).logits
        else:
            loss = self.model(input_ids=self.ids, labels=self.ids).loss
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
            self.losses.append(loss.detach())
            self.last = loss
        sync(self.device)
        ms = (time.perf_counter() - t0) * 1e3
        return ms, self.device == "tpu" and compiles_so_far() != before

    def warm_up(self, warmup):
        """At least `warmup` steps, more while a step still compiles (up to
        MAX_WARMUP)."""
        for i in range(MAX_WARMUP):
            ms, compiled = self.timed_step()
            self.warm_ms.append(ms)
            if i + 1 >= warmup and not compiled:
                break

    def detail(self):
        detail = {
            "median_ms": round(statistics.median(self.times), 3),
            "min_ms": round(min(self.times), 3),
            "max_ms": round(max(self.times), 3),
            "steps": len(self.times),
            "warmup_steps": len(self.warm_ms),
            "warmup_ms": [round(t, 1) for t in self.warm_ms],
        }
        if self.device == "tpu":
            detail["compiles_in_timed_steps"] = self.compiles
        return detail


def check_losses(values):
    """A loose check of a training run: finite, near ln(vocab) at the start
    (random init), lower at the end (the same batch every step)."""
    if not all(math.isfinite(v) for v in values):
        return f"non-finite loss: {values}"
    if abs(values[0] - math.log(VOCAB)) > 1.0:
        return (f"first loss {values[0]:.4f} is far from ln(vocab) = "
                f"{math.log(VOCAB):.4f}")
    if len(values) >= 4 and not values[-1] < values[0]:
        return f"loss did not go down over {len(values)} steps: {values[0]:.4f} -> {values[-1]:.4f}"
    return None


def error_string(exc):
    return f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def set_mode(mode):
    torch.tpu.set_eager_mode(mode)
    if torch.tpu.get_eager_mode() != mode:
        raise RuntimeError(f"set_eager_mode({mode!r}) left the mode at "
                           f"{torch.tpu.get_eager_mode()!r}")


def recover():
    """After a failure: run or drop what is recorded, so that the next
    configuration starts clean."""
    try:
        torch.tpu.synchronize()
    except Exception as exc:  # noqa: BLE001
        print(f"  (synchronize after the failure also failed: {error_string(exc)})",
              file=sys.stderr)


def bench_model(name, args, report_errors, first_steps):
    base = build_model(name)
    ids = input_ids()
    entry = {"config": describe(name, base), "forward_ms": {},
             "train_step_ms": {}, "details": {"forward": {}, "train_step": {}}}
    errors = {}

    # Each configuration is set up and warmed up in turn; then the timed
    # steps run in rounds, one step of each configuration per round in an
    # order that rotates, so that a change in the machine's speed during
    # the run (this VM's is large) falls on all of them alike.
    saved_mode = torch.tpu.get_eager_mode()
    order = ("torch_cpu",) + MODES  # torch_cpu's logits are the reference

    def fail(kind, cfg, exc):
        tb = traceback.format_exc()
        msg = error_string(exc)
        entry[f"{kind}_ms"][cfg] = msg
        errors[f"{kind}.{cfg}"] = tb
        print(f"  {name + ' ' + kind + ' ' + cfg:36s} FAILED: {msg}\n{tb}",
              file=sys.stderr, flush=True)
        if cfg != "torch_cpu":
            recover()

    for kind in ("forward", "train_step"):
        torch.tpu.fused_reset_stats()
        runs = {}
        for cfg in order:
            try:
                run = Run(kind, cfg, base, ids)
                run.warm_up(args.warmup)
                runs[cfg] = run
            except Exception as exc:  # noqa: BLE001
                fail(kind, cfg, exc)
        t0 = time.perf_counter()
        for i in range(args.steps):
            names = list(runs)
            if not names:
                break
            for cfg in names[i % len(names):] + names[:i % len(names)]:
                run = runs[cfg]
                try:
                    ms, compiled = run.timed_step()
                    run.times.append(ms)
                    run.compiles += compiled
                except Exception as exc:  # noqa: BLE001
                    fail(kind, cfg, exc)
                    del runs[cfg]
        wall = time.perf_counter() - t0
        ref_logits = None
        for cfg, run in runs.items():
            try:
                run.enter()
                detail = run.detail()
                if kind == "forward":
                    logits = run.last.to("cpu")
                    if cfg == "torch_cpu":
                        ref_logits = logits
                    elif ref_logits is None:
                        detail["check"] = "not checked: torch_cpu gave no logits"
                    else:
                        diff = (logits - ref_logits).abs()
                        tol = ATOL + RTOL * ref_logits.abs()
                        detail["max_abs_diff_vs_cpu"] = float(diff.max())
                        detail["check"] = f"logits vs torch_cpu within atol {ATOL} + rtol {RTOL}"
                        if not bool(torch.isfinite(logits).all()) or bool((diff > tol).any()):
                            raise AssertionError(
                                f"{cfg} forward logits differ from torch_cpu: max |diff| "
                                f"{float(diff.max()):.4g} (tolerance {ATOL} + {RTOL}*|ref|), "
                                f"{int((diff > tol).sum())} of {diff.numel()} out of tolerance")
                else:
                    values = [float(l.item()) for l in run.losses]
                    detail["loss_first"] = round(values[0], 4)
                    detail["loss_last"] = round(values[-1], 4)
                    problem = check_losses(values)
                    if problem:
                        raise AssertionError(f"{cfg} training: {problem}")
                entry[f"{kind}_ms"][cfg] = detail["median_ms"]
                entry["details"][kind][cfg] = detail
                print(f"  {name + ' ' + kind + ' ' + cfg:36s} {detail['median_ms']:10.1f} ms  "
                      f"(warm-up {detail['warmup_steps']}, timed rounds {wall:.0f} s)",
                      flush=True)
            except Exception as exc:  # noqa: BLE001
                fail(kind, cfg, exc)
        try:
            entry.setdefault("fused_stats", {})[kind] = torch.tpu.fused_stats()
            entry.setdefault("fused_summary", {})[kind] = torch.tpu.fused_summary()
        except Exception as exc:  # noqa: BLE001
            entry.setdefault("fused_stats", {})[kind] = error_string(exc)
        runs.clear()
    try:
        set_mode(saved_mode)
    except Exception:  # noqa: BLE001
        pass
    for key in ("forward_ms", "train_step_ms"):
        entry[key] = {c: entry[key][c] for c in CONFIGS if c in entry[key]}

    # The first-step children ran before this process built any model
    # (main() runs them first); their figures join the entry here.
    pre = first_steps.get(name, {})
    for key, value in pre.get("values", {}).items():
        entry[key] = value
    entry["details"].update(pre.get("details", {}))
    if pre.get("warnings"):
        entry.setdefault("warnings", []).extend(pre["warnings"])
    errors.update(pre.get("errors", {}))
    if errors:
        report_errors[name] = errors
    return entry


def matmul_shapes(name):
    """The matrix products of one forward of `name` (batch x seq rows):
    (label, rows, k, n, weight layout, count per forward). 'kn' is a weight
    stored (k, n) and used as x @ w (GPT-2's Conv1D); 'nk' is stored (n, k)
    and used as x @ w.t() (nn.Linear, and the tied or untied LM head).
    'attn' is one head-batched attention product (heads, rows, k) @ (heads,
    k, n)."""
    cfg = model_config(name)
    t = BATCH * SEQ
    if name in ("gpt2", "gpt2_2layer"):
        d, L, h = cfg.n_embd, cfg.n_layer, cfg.n_head
        out = [("attn qkv", t, d, 3 * d, "kn", L), ("attn out", t, d, d, "kn", L),
               ("mlp fc", t, d, 4 * d, "kn", L), ("mlp proj", t, 4 * d, d, "kn", L)]
    else:
        d, L, h = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads
        f = cfg.intermediate_size
        out = [("attn q/k/v/o", t, d, d, "nk", 4 * L),
               ("mlp gate/up", t, d, f, "nk", 2 * L), ("mlp down", t, f, d, "nk", L)]
    hd = d // h
    out += [("attn scores", SEQ, hd, SEQ, "attn", BATCH * L),
            ("attn values", SEQ, SEQ, hd, "attn", BATCH * L),
            ("lm head", t, d, VOCAB, "nk", 1)]
    return out, h


def bench_matmuls(name, rounds, per_program=8):
    """Each kind of matrix product of `name`'s forward, timed on the tpu
    device and on PyTorch's CPU in interleaved rounds. A round runs
    `per_program` products of the kind one after the other, each with its
    own operands (as the layers have their own weights): on the tpu device
    in fused mode, so they are one program and one synchronize, like the
    forward's segment; the time per product is the round's over
    `per_program` (with, on both sides, the small add that chains each
    product to the one before). The sums over one forward
    (`forward_sum_ms`: count x median) say how much of the forward the
    products alone take on each side."""
    shapes, heads = matmul_shapes(name)
    g = torch.Generator().manual_seed(2)
    saved = torch.tpu.get_eager_mode()
    set_mode("fused")
    cases = []
    for label, m, k, n, layout, count in shapes:
        cpu = []
        for _ in range(per_program):
            if layout == "attn":
                a = torch.randn(heads, m, k, generator=g)
                b = torch.randn(heads, k, n, generator=g)
            else:
                a = torch.randn(m, k, generator=g)
                b = torch.randn(*((k, n) if layout == "kn" else (n, k)), generator=g)
            cpu.append((a, b))
        cases.append({
            "label": label, "m": m, "k": k, "n": n, "layout": layout,
            "count": count, "flop": 2 * m * k * n * (heads if layout == "attn" else 1),
            "fn": (lambda a, b: a @ b.t()) if layout == "nk" else (lambda a, b: a @ b),
            "cpu": cpu, "tpu": [(a.to("tpu"), b.to("tpu")) for a, b in cpu],
            "times": {"tpu": [], "torch_cpu": []}})

    def once(c, which):
        # Each product's left operand gets one element of the product before
        # (an add of a broadcast number): the products run one after the
        # other, as a forward's do, and not side by side.
        t0 = time.perf_counter()
        y = None
        for a, b in c["cpu" if which == "torch_cpu" else "tpu"]:
            y = c["fn"](a if y is None else a + y.reshape(-1)[:1], b)
        if which == "tpu":
            torch.tpu.synchronize()
        ms = (time.perf_counter() - t0) * 1e3 / per_program
        del y
        return ms

    try:
        with torch.no_grad():
            for c in cases:  # compile, and the first run of each
                for which in ("tpu", "torch_cpu"):
                    once(c, which)
                    once(c, which)
            for _ in range(rounds):
                for c in cases:
                    for which in ("tpu", "torch_cpu"):
                        c["times"][which].append(once(c, which))
    finally:
        set_mode(saved)
    products, sums = {}, {"tpu": 0.0, "torch_cpu": 0.0}
    for c in cases:
        med = {w: round(statistics.median(v), 3) for w, v in c["times"].items()}
        products[c["label"]] = {
            "shape": f"({c['m']}x{c['k']}) @ ({c['k']}x{c['n']})"
                     + (f" x {heads} heads" if c["layout"] == "attn" else "")
                     + (", weight stored (n, k)" if c["layout"] == "nk" else ""),
            "count_per_forward": c["count"],
            "tpu_ms": med["tpu"], "torch_cpu_ms": med["torch_cpu"],
            "tpu_gflops": round(c["flop"] / med["tpu"] / 1e6, 1),
            "torch_cpu_gflops": round(c["flop"] / med["torch_cpu"] / 1e6, 1),
        }
        for w in sums:
            sums[w] += c["count"] * med[w]
    return {"rounds": rounds, "products_per_program": per_program,
            "products": products,
            "forward_sum_ms": {k: round(v, 1) for k, v in sums.items()}}


def memory_now():
    """This process's resident memory and the machine's free and available
    memory, in MB, for the first-step details."""
    out = {}
    try:
        with open("/proc/self/statm") as f:
            out["parent_rss_mb"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
        names = {"MemFree": "mem_free_mb", "MemAvailable": "mem_available_mb"}
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                if key in names:
                    out[names[key]] = int(value.split()[0]) >> 10
    except (OSError, ValueError, IndexError):
        pass
    return out


def cpu_jiffies():
    """The machine's CPU time so far from /proc/stat's "cpu" line: (steal,
    total), in clock ticks; None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(v) for v in fields[1:9]]  # user .. steal (guest is in user)
    return ticks[7], sum(ticks)


def steal_percent(start, end):
    """The share of the machine's CPU time that its hypervisor gave to other
    guests between two cpu_jiffies() readings: on a shared VM the same step
    runs slower while this is high."""
    if start is None or end is None or end[1] <= start[1]:
        return None
    return round(100.0 * (end[0] - start[0]) / (end[1] - start[1]), 1)


def first_steps_of(name):
    """The first fused training step of `name` in a fresh process: once with
    an empty compile cache (cold), then with the disk cache that run filled
    (warm). main() runs these before this process builds any model, so the
    child does not share the machine with this process's heap. (Run after
    the timed rounds, the child shared it with an 11 GB parent, freed models
    that glibc keeps, and its first step measured 1.2-1.6x slower; see the
    README.)"""
    pre = {"values": {}, "details": {}, "warnings": [], "errors": {}}
    cache_dir = tempfile.mkdtemp(prefix="tpuc-bench-eager-cache-")
    try:
        for which in ("cold", "warm_disk", "torch_cpu"):
            key = f"first_step_{which}_ms"
            t0 = time.perf_counter()
            memory = memory_now()
            try:
                child = run_child(name, cache_dir,
                                  "cpu" if which == "torch_cpu" else "tpu")
                if child.get("tpuc_build") != BUILD:
                    pre["warnings"].append(
                        f"first_step_{which}: the child process ran tpuc build "
                        f"{child.get('tpuc_build')}, this process {BUILD} (rebuilt "
                        f"during the run?): its figure is not comparable")
                child["memory_at_start"] = memory
                pre["values"][key] = child["first_step_ms"]
                pre["details"][f"first_step_{which}"] = child
                print(f"  {name + ' first step ' + which:36s} "
                      f"{child['first_step_ms']:10.1f} ms  (process "
                      f"{time.perf_counter() - t0:.0f} s)", flush=True)
            except Exception as exc:  # noqa: BLE001
                msg = error_string(exc)
                pre["values"][key] = msg
                pre["errors"][key] = getattr(exc, "child_output", None) or traceback.format_exc()
                print(f"  {name + ' first step ' + which:36s} FAILED: {msg}\n"
                      f"{pre['errors'][key]}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return pre


class ChildError(RuntimeError):
    pass


def run_child(name, cache_dir, device="tpu"):
    env = dict(os.environ)
    env["TPUC_CACHE_DIR"] = cache_dir
    env["TPUC_EAGER_MODE"] = "fused"
    proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                           "--first-step", name, "--first-step-device", device],
                          env=env, capture_output=True, text=True)
    last = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not last:
        err = ChildError(f"first-step child exited {proc.returncode}: "
                         f"{(proc.stderr.strip().splitlines() or ['(no output)'])[-1]}")
        err.child_output = (proc.stdout[-4000:] + "\n" + proc.stderr[-8000:]).strip()
        raise err
    out = json.loads(last[-1])
    if "error" in out:
        err = ChildError(out["error"])
        err.child_output = out.get("traceback")
        raise err
    return out


def first_step_child(name, device):
    """In a fresh process: the first training steps on `device` ('tpu', in
    fused mode, or 'cpu', PyTorch's own, for reference), each timed with a
    synchronize, and the page faults each took (fresh memory the process
    touched); prints one JSON line."""
    import resource

    out = {"cache_dir_env": os.environ.get("TPUC_CACHE_DIR"), "device": device}
    try:
        on_tpu = device == "tpu"
        if on_tpu:
            set_mode("fused")
        out["tpuc_build"] = build_id()
        base = build_model(name)
        ids = input_ids()
        model = base.train().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        dev_ids = ids.to(device)
        sync(device)
        if on_tpu:
            torch.tpu.fused_reset_stats()
            cache_before = torch.tpu.compile_cache_stats()
        steps_ms = []
        faults = []
        losses = []
        jiffies = cpu_jiffies()
        for _ in range(3):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            loss = model(input_ids=dev_ids, labels=dev_ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            sync(device)
            steps_ms.append(round((time.perf_counter() - t0) * 1e3, 3))
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
            losses.append(loss.detach())
        out["first_step_ms"] = steps_ms[0]
        out["steps_ms"] = steps_ms
        out["page_faults"] = faults
        out["cpu_steal_percent"] = steal_percent(jiffies, cpu_jiffies())
        out["losses"] = [round(float(l.item()), 4) for l in losses]
        if on_tpu:
            out["fused_stats"] = torch.tpu.fused_stats()
            cache = torch.tpu.compile_cache_stats()
            cache.pop("cache_dir", None)
            # What the three steps did in the compile cache (op programs and
            # fused segment programs), not the model's upload before them.
            out["compile_cache_stats"] = {
                k: (round(v - cache_before.get(k, 0), 3) if isinstance(v, float)
                    else v - cache_before.get(k, 0))
                for k, v in cache.items() if num(v) and k != "memory_entries"}
    except Exception as exc:  # noqa: BLE001
        out["error"] = error_string(exc)
        out["traceback"] = traceback.format_exc()
    print(json.dumps(out), flush=True)


# ------------------------------------------------------------------ reports

from bench_device import machine  # noqa: E402  (bench/ is the script dir)



def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def ratio(a, b):
    return round(a / b, 3) if num(a) and num(b) and b else None


def ratios(entry):
    f, t = entry.get("forward_ms", {}), entry.get("train_step_ms", {})
    return {
        "forward_strict_over_fused": ratio(f.get("strict"), f.get("fused")),
        "forward_fused_over_cpu": ratio(f.get("fused"), f.get("torch_cpu")),
        "train_strict_over_fused": ratio(t.get("strict"), t.get("fused")),
        "train_fused_over_cpu": ratio(t.get("fused"), t.get("torch_cpu")),
        "warm_first_step_over_steady": ratio(entry.get("first_step_warm_disk_ms"),
                                             t.get("fused")),
        "cold_first_step_over_steady": ratio(entry.get("first_step_cold_ms"),
                                             t.get("fused")),
        # PyTorch's own first CPU step over its steady step: the same
        # fresh memory (gradients, optimizer state), for reference.
        "torch_cpu_first_step_over_steady": ratio(entry.get("first_step_torch_cpu_ms"),
                                                  t.get("torch_cpu")),
    }


def fmt(v, width=10):
    if num(v):
        return f"{v:{width}.1f}"
    if v is None:
        return f"{'-':>{width}}"
    return f"{'ERROR':>{width}}"


def fmt_ratio(v):
    return f"{v:8.2f}x" if num(v) else f"{'-':>9}"


def print_table(report):
    print()
    print(f"bench_eager ({report['machine']}; {report['plugin']}; torch {report['torch']})")
    print(f"batch {BATCH} x {SEQ} tokens, vocab {VOCAB}, times in ms (median of steady-state "
          f"steps); load average {report['load_avg_start']} at the start, "
          f"{report['load_avg_end']} at the end, {report['machine'].rsplit(', ', 1)[-1]}; "
          f"CPU time stolen by the hypervisor: {report.get('cpu_steal_percent')}%")
    hdr = f"{'model':12s} {'':8s}" + "".join(f"{c:>10s}" for c in CONFIGS)
    print(hdr)
    for name, e in report["models"].items():
        for kind, key in (("forward", "forward_ms"), ("train", "train_step_ms")):
            print(f"{name:12s} {kind:8s}" + "".join(fmt(e.get(key, {}).get(c)) for c in CONFIGS))
        print(f"{name:12s} {'1st step':8s} cold {fmt(e.get('first_step_cold_ms'))}  "
              f"warm disk {fmt(e.get('first_step_warm_disk_ms'))}  "
              f"torch_cpu {fmt(e.get('first_step_torch_cpu_ms'))}")
    print()
    t = report["targets"]
    print(f"{'model':12s} {'fwd strict/fused':>17s} {'fwd fused/cpu':>14s} "
          f"{'train strict/fused':>19s} {'train fused/cpu':>16s} {'warm 1st/steady':>16s} "
          f"{'cpu 1st/steady':>15s}")
    for name, e in report["models"].items():
        r = e["ratios"]
        print(f"{name:12s} {fmt_ratio(r['forward_strict_over_fused']):>17s} "
              f"{fmt_ratio(r['forward_fused_over_cpu']):>14s} "
              f"{fmt_ratio(r['train_strict_over_fused']):>19s} "
              f"{fmt_ratio(r['train_fused_over_cpu']):>16s} "
              f"{fmt_ratio(r['warm_first_step_over_steady']):>16s} "
              f"{fmt_ratio(r['torch_cpu_first_step_over_steady']):>15s}")
    print(f"targets: train strict/fused >= {t['fused_vs_strict_train_step_min']}, "
          f"gpt2 fwd fused/cpu <= {t['fused_vs_cpu_gpt2_forward_max']}, "
          f"warm 1st/steady <= {t['warm_first_step_vs_steady_max']}")
    for name, e in report["models"].items():
        for key in ("forward_ms", "train_step_ms"):
            for c, v in e.get(key, {}).items():
                if isinstance(v, str):
                    print(f"  {name} {key} {c}: {v}")
        for key in ("first_step_cold_ms", "first_step_warm_disk_ms",
                    "first_step_torch_cpu_ms"):
            if isinstance(e.get(key), str):
                print(f"  {name} {key}: {e[key]}")
        for w in e.get("warnings", []):
            print(f"  {name} WARNING: {w}")
    for name, e in report["models"].items():
        mm = e.get("matmuls")
        if isinstance(mm, str):
            print(f"  {name} matmuls: {mm}")
        if not isinstance(mm, dict):
            continue
        s = mm["forward_sum_ms"]
        f = e.get("forward_ms", {})
        print(f"{name}: the forward's matrix products alone, summed: tpu "
              f"{s['tpu']:.1f} ms, torch_cpu {s['torch_cpu']:.1f} ms; whole forward "
              f"fused {fmt(f.get('fused'), 0)}, torch_cpu {fmt(f.get('torch_cpu'), 0)}")
        for label, p in mm["products"].items():
            print(f"  {label:12s} x{p['count_per_forward']:<3d} tpu {p['tpu_ms']:7.3f} ms "
                  f"({p['tpu_gflops']:6.1f} GFLOP/s)  torch_cpu {p['torch_cpu_ms']:7.3f} ms "
                  f"({p['torch_cpu_gflops']:6.1f} GFLOP/s)")


def plot(report, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_eager: matplotlib is not installed, no plot")
        return None
    names = list(report["models"])
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    colors = {"debug": "#9e9e9e", "strict": "#1f77b4", "fused": "#d62728",
              "torch_cpu": "#2ca02c"}
    width = 0.8 / len(CONFIGS)
    for ax, key, title in ((axes[0], "forward_ms", "forward (no_grad)"),
                           (axes[1], "train_step_ms", "AdamW training step")):
        for i, c in enumerate(CONFIGS):
            xs, ys = [], []
            for j, n in enumerate(names):
                v = report["models"][n].get(key, {}).get(c)
                if num(v):
                    xs.append(j + (i - (len(CONFIGS) - 1) / 2) * width)
                    ys.append(v)
            bars = ax.bar(xs, ys, width, label=c, color=colors[c])
            ax.bar_label(bars, fmt="%.0f", fontsize=6)
        ax.set_xticks(range(len(names)), names)
        ax.set_yscale("log")
        ax.set_ylabel("ms per step (log)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    ax = axes[2]
    series = (("steady fused", lambda e: e.get("train_step_ms", {}).get("fused"), "#d62728"),
              ("1st step, warm disk cache", lambda e: e.get("first_step_warm_disk_ms"), "#ff7f0e"),
              ("1st step, cold cache", lambda e: e.get("first_step_cold_ms"), "#7f7f7f"),
              ("torch_cpu steady", lambda e: e.get("train_step_ms", {}).get("torch_cpu"),
               "#2ca02c"),
              ("torch_cpu 1st step", lambda e: e.get("first_step_torch_cpu_ms"), "#98df8a"))
    w = 0.8 / len(series)
    for i, (label, get, color) in enumerate(series):
        xs, ys = [], []
        for j, n in enumerate(names):
            v = get(report["models"][n])
            if num(v):
                xs.append(j + (i - (len(series) - 1) / 2) * w)
                ys.append(v)
        bars = ax.bar(xs, ys, w, label=label, color=color)
        ax.bar_label(bars, fmt="%.0f", fontsize=6)
    ax.set_xticks(range(len(names)), names)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.set_title("training: first step vs steady state")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"tpuc eager modes, batch {BATCH}x{SEQ} ({report['plugin_version']}, "
                 f"{report['machine']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per configuration (default 10, --quick 3)")
    p.add_argument("--warmup", type=int, default=None,
                   help="minimum warm-up steps (default 3, --quick 2); more "
                        f"while a step still compiles, up to {MAX_WARMUP}")
    p.add_argument("--quick", action="store_true", help="fewer steps")
    p.add_argument("--no-first-step", dest="first_step_runs", action="store_false",
                   help="skip the first-step child processes (cold and warm-disk "
                        "fused, PyTorch CPU)")
    p.add_argument("--no-matmuls", dest="matmuls", action="store_false",
                   help="skip timing the forward's matrix products by themselves")
    p.add_argument("--first-step", metavar="MODEL", help=argparse.SUPPRESS)
    p.add_argument("--first-step-device", default="tpu", choices=("tpu", "cpu"),
                   help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.first_step:
        first_step_child(args.first_step, args.first_step_device)
        return 0

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r} (one of {', '.join(MODELS)})")
    if args.steps is None:
        args.steps = 3 if args.quick else 10
    if args.warmup is None:
        args.warmup = 2 if args.quick else 3

    import transformers

    props = torch.tpu.get_device_properties(0)
    global BUILD
    BUILD = build_id()
    report = {
        "benchmark": "eager_modes",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "device": f"{props.platform}: {props.name}",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "plugin": f"{props.plugin_package} (PJRT C API {props.pjrt_api}, "
                  f"StableHLO {props.stablehlo})",
        "plugin_version": props.plugin_version,
        "tpuc_build": BUILD,
        "torch_cpu_threads": torch.get_num_threads(),
        # The machine's load average (1 min) when the run started and ended:
        # a figure taken on a busy machine is slower than it would be.
        "load_avg_start": round(os.getloadavg()[0], 2),
        # And the share of CPU time stolen by the hypervisor over the run
        # (/proc/stat): same meaning, on a shared VM.
        "cpu_steal_percent": None,
        "settings": {"steps": args.steps, "min_warmup": args.warmup,
                     "max_warmup": MAX_WARMUP, "quick": args.quick,
                     "logits_tolerance": f"atol {ATOL} + rtol {RTOL}"},
        "models": {},
        "targets": dict(TARGETS),
    }
    errors = {}
    out_dir = os.environ.get("TPUC_BENCH_RESULTS_DIR",
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "eager_modes.json")

    def write(complete):
        # Written after every model, so that a long run that is stopped
        # still leaves the models it finished ("complete": false).
        report["complete"] = complete
        report["wall_s"] = round(time.perf_counter() - t_start, 1)
        report["load_avg_end"] = round(os.getloadavg()[0], 2)
        report["cpu_steal_percent"] = steal_percent(jiffies_start, cpu_jiffies())
        if errors:
            report["errors"] = errors
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)

    t_start = time.perf_counter()
    jiffies_start = cpu_jiffies()
    first_steps = {}
    if args.first_step_runs:
        # Before anything else: each child is a fresh process, and this one
        # holds no model yet.
        print("== first steps (fresh processes)", flush=True)
        for name in models:
            first_steps[name] = first_steps_of(name)
    for i, name in enumerate(models):
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        entry = bench_model(name, args, errors, first_steps)
        entry["ratios"] = ratios(entry)
        if args.matmuls:
            try:
                entry["matmuls"] = bench_matmuls(name, 5 if args.quick else 15)
            except Exception as exc:  # noqa: BLE001
                entry["matmuls"] = error_string(exc)
                errors.setdefault(name, {})["matmuls"] = traceback.format_exc()
                print(f"  {name} matmuls FAILED: {entry['matmuls']}", file=sys.stderr)
                recover()
        entry["wall_s"] = round(time.perf_counter() - t0, 1)
        report["models"][name] = entry
        write(complete=i == len(models) - 1)
    print_table(report)
    png = plot(report, os.path.join(out_dir, "eager_modes.png"))
    print(f"wrote {path}" + (f" and {png}" if png else "") +
          f" ({report['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
