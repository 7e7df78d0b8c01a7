"""``tpuc check``: does my model run on tpu, correctly, repeatably, and how
fast. The porting method TorchTPU's release recommends, as a tool: run a
small case on tpu and on a reference device (the CPU, or CUDA with
``--reference cuda``), then judge each question separately, with evidence:

- **runs**: both runs finish their steps, and the tpu run used tpu;
- **agreement**: each step's loss (and, for ``--model``, the first
  forward's logits) against the reference, max abs/rel error per output and
  the tolerance judged by;
- **repeatability**: a second tpu run with the same seed is bitwise equal,
  or where it first differs;
- **ops**: every ATen op the step used (counted in a fourth run),
  which ran on the CPU fallback, and the call site of each fallback's
  first call;
- **host syncs** per step by reason, fused mode's segments, recompiles
  after the first steps;
- **speed and memory**: first-step (compile) and steady step time on both
  devices, peak device memory;
- **real sizes** (``--real-sizes BxS``, with ``--model``): the case again
  at the user's batch and sequence length: runs, agreement, speed, memory.

Usage::

    tpuc check [options] -- python train.py [args...]
    tpuc check [options] --model hf:PATH_OR_NAME --task causal-lm
    python -m tpuc.check ...   # the same

A script runs unchanged: device requests for ``cuda`` or ``tpu`` become the
run's device (``tpu``, or the reference's); in the tpu run
``torch.cuda.is_available()`` says yes, ``torch.cuda``'s device calls
(``synchronize``, ``manual_seed``, ``device_count``, memory statistics) act
on tpu and ``torch.autocast("cuda")`` autocasts on tpu, so a script that
picks ``"cuda" if torch.cuda.is_available() else "cpu"`` runs on tpu. Each
``optimizer.step()`` is a step (the run stops after ``--steps``), and each
``loss.backward()`` records its loss. ``--model`` builds a Hugging Face
model from a config (a local folder with ``config.json``, or one of the
built-in tiny configs: gpt2, bert, llama, qwen3-moe) with random weights and
trains it with AdamW on random tokens.

Writes ``report.json`` (for CI), ``report.md`` and a self-contained
``report.html`` (plots as inline SVG) under ``--out``; exits 1 when a check
fails, 2 on bad usage.
"""

import argparse
import datetime
import hashlib
import html
import json
import os
import subprocess
import sys
import time
import traceback

TASKS = ("causal-lm", "seq-cls", "masked-lm")
BUILTIN = ("gpt2", "bert", "llama", "qwen3-moe")


class _Stop(BaseException):
    """Ends a script's run after its last checked step (not an Exception, so
    the script's own ``except Exception`` does not take it)."""


# ----------------------------------------------------------------- child run


def _remap_device(dev, target):
    import torch

    if isinstance(dev, str):
        try:
            dev_obj = torch.device(dev)
        except (RuntimeError, ValueError):
            return dev
    elif isinstance(dev, torch.device):
        dev_obj = dev
    else:
        return dev
    if dev_obj.type in ("cuda", "tpu") and dev_obj.type != target:
        return torch.device(target) if target == "cpu" else torch.device(target, dev_obj.index or 0)
    return dev


class _Recorder:
    """What one run records: step times, losses, per-step counters."""

    def __init__(self, device, steps, count_ops, script=False, progress=None):
        self.device = device
        self.script = script
        self.progress = progress
        self.steps = steps
        # The timed runs wait for each step's work at its end; the census
        # run does not, so its segments are the script's own.
        self.timed = not count_ops
        self.losses = []  # detached tensors, read at the end
        self.step_times = []
        self.step_syncs = []
        self.step_compiles = []
        self.step_small = []  # of them, small segments' (fuse_after_small)
        self.step_fallbacks = []
        self.ops = {} if count_ops else None
        self.fallback_sites = {}
        self.t_last = None
        self.stats_last = None

    def sync(self):
        import torch

        if self.device == "tpu":
            torch.tpu.synchronize()
        elif self.device == "cuda":
            torch.cuda.synchronize()

    def fused(self):
        """Fused mode's counters, with compiled graphs' captures (each a
        program built) counted among the compiles."""
        import torch

        if self.device != "tpu":
            return {}
        s = torch.tpu.fused_stats()
        s["compiles"] = s.get("compiles", 0) + torch.tpu.compile_stats().get("captures", 0)
        return s

    def start(self):
        import tpuc

        tpuc.fallback_reset()
        self.sync()
        self.stats_last = self.fused()
        self.fallbacks_last = {}
        self.t_last = time.perf_counter()

    def step_done(self):
        import tpuc

        if self.timed:  # the step's work, its compiles included, is done
            self.sync()
        now = time.perf_counter()
        stats = self.fused()
        self.step_times.append(now - self.t_last)
        by_now = stats.get("by_reason", {})
        by_last = (self.stats_last or {}).get("by_reason", {})
        delta = {k: by_now.get(k, 0) - by_last.get(k, 0) for k in by_now}
        self.step_syncs.append({k: v for k, v in delta.items() if v})
        self.step_compiles.append(stats.get("compiles", 0) - (self.stats_last or {}).get("compiles", 0))
        self.step_small.append(stats.get("small_compiled", 0) -
                               (self.stats_last or {}).get("small_compiled", 0))
        fb = tpuc.fallback_report() if self.device == "tpu" else {}
        self.step_fallbacks.append({k: v - self.fallbacks_last.get(k, 0) for k, v in fb.items()
                                    if v - self.fallbacks_last.get(k, 0)})
        self.fallbacks_last = fb
        self.stats_last = stats
        if self.progress:  # the parent's progress bar reads the step count
            with open(self.progress, "a") as f:
                f.write(".")
        self.t_last = time.perf_counter()
        if len(self.step_times) >= self.steps:
            raise _Stop()


def _user_site(stack):
    """The innermost frame of the user's code (not torch, tpuc, or a library)."""
    import sysconfig

    skip = (os.sep + "torch" + os.sep, os.sep + "tpuc" + os.sep, "site-packages", "<frozen")
    stdlib = sysconfig.get_paths()["stdlib"]
    for fr in reversed(stack):
        if not any(s in fr.filename for s in skip) and not fr.filename.startswith(stdlib):
            return f"{fr.filename}:{fr.lineno} in {fr.name}"
    return None


def _install_hooks(rec, target):
    """Device remapping, loss recording, op counting and fallback call sites
    for one run; returns the TorchFunctionMode to enter."""
    import warnings

    import torch
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = _remap_device(kwargs["device"], target)
            if func is torch.Tensor.to or func is torch.Tensor.cuda:
                if func is torch.Tensor.cuda:
                    func, args = torch.Tensor.to, (args[0], target)
                args = tuple(_remap_device(a, target) for a in args)
            elif func is torch.Tensor.backward and args and args[0].numel() == 1:
                rec.losses.append(args[0].detach().float().clone())
            return func(*args, **kwargs)

    if rec.ops is not None:
        from torch.utils._python_dispatch import TorchDispatchMode

        class Census(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func.overloadpacket.__name__) + (
                    "." + func._overloadname if func._overloadname != "default" else "")
                if not name.startswith("_record_function"):  # the profiler's marks
                    rec.ops["aten::" + name] = rec.ops.get("aten::" + name, 0) + 1
                return func(*args, **(kwargs or {}))

        rec.census = Census
    else:
        rec.census = None

    show = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "has no native lowering" in text:
            op = text.split("'")[1] if text.count("'") >= 2 else text[:60]
            rec.fallback_sites.setdefault(op, _user_site(traceback.extract_stack()[:-1]))
        return show(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning
    warnings.simplefilter("always")  # every fallback's first call reaches the hook
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(lambda opt, a, k: rec.step_done())
    if target == "tpu" and rec.script and not torch.cuda.is_available():
        _cuda_means_tpu(rec)
    elif target != "cuda" and not torch.cuda.is_available():
        torch.cuda.synchronize = lambda device=None: rec.sync()
    return Mode()


def _cuda_means_tpu(rec):
    """The tpu run of a script written for CUDA: ``torch.cuda.is_available()``
    says yes to the script's own code (so ``"cuda" if
    torch.cuda.is_available() else "cpu"`` picks the device that the run maps
    to tpu; torch and the libraries still see the truth), ``torch.cuda``'s
    device calls act on tpu, and ``torch.autocast("cuda")`` autocasts on
    tpu."""
    import torch

    tpu, cuda = torch.tpu, torch.cuda
    real_is_available = cuda.is_available

    def is_available():
        caller = sys._getframe(1).f_code.co_filename
        return _user_site([traceback.FrameSummary(caller, 0, "")]) is not None or real_is_available()

    cuda.is_available = is_available
    cuda.device_count = tpu.device_count
    cuda.current_device = tpu.current_device
    cuda.set_device = lambda device: tpu.set_device(_remap_device(device, "tpu"))
    cuda.synchronize = lambda device=None: rec.sync()
    cuda.manual_seed = tpu.manual_seed
    cuda.manual_seed_all = tpu.manual_seed_all
    cuda.get_device_name = lambda device=None: "tpu (tpuc check maps cuda to tpu)"
    cuda.is_bf16_supported = lambda *a, **k: True
    cuda.empty_cache = tpu.empty_cache
    cuda.memory_allocated = lambda device=None: tpu.memory_allocated()
    cuda.max_memory_allocated = lambda device=None: tpu.max_memory_allocated()
    cuda.reset_peak_memory_stats = lambda device=None: tpu.reset_peak_memory_stats()
    autocast = torch.amp.autocast_mode.autocast
    init = autocast.__init__

    def remapped(self, device_type, *args, **kwargs):
        init(self, "tpu" if device_type == "cuda" else device_type, *args, **kwargs)

    autocast.__init__ = remapped


def _logits_file(result):
    """Where a run whose result is the file `result` saves its first logits."""
    return result + ".logits.pt"


def _hash(t):
    import torch

    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]


def _build_model(spec):
    import torch
    import transformers as tf

    name = spec["model"]
    torch.manual_seed(spec["seed"])
    if os.path.isdir(name):
        cfg = tf.AutoConfig.from_pretrained(name)
    elif name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=128)
    elif name == "bert":
        cfg = tf.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=128)
    elif name == "llama":
        cfg = tf.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    elif name == "qwen3-moe":  # a mixture of experts: grouped_mm experts
        cfg = tf.Qwen3MoeConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2,
                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    else:
        raise SystemExit(f"tpuc check: --model hf:{name}: not a folder with config.json, "
                         f"nor one of {', '.join(BUILTIN)}")
    cls = {"causal-lm": tf.AutoModelForCausalLM, "seq-cls": tf.AutoModelForSequenceClassification,
           "masked-lm": tf.AutoModelForMaskedLM}[spec["task"]]
    if spec["task"] == "seq-cls" and getattr(cfg, "pad_token_id", None) is None:
        cfg.pad_token_id = 0
    return cls.from_config(cfg), cfg


def _run_model(spec, rec, mode_cm):
    import torch

    model, cfg = _build_model(spec)
    dev = spec["device"]
    g = torch.Generator().manual_seed(spec["seed"] + 1)
    b, s = spec["batch"], spec["seq"]
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=g)
    labels = ids if spec["task"] != "seq-cls" else torch.randint(0, 2, (b,), generator=g)
    model = model.to(dev).train()
    for m in model.modules():  # repeatable and comparable: no dropout
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step_model = model
    if spec["mode"] == "compile" and dev == "tpu":
        step_model = torch.compile(model, backend="tpu")
    ids, labels = ids.to(dev), labels.to(dev)
    outputs = {}
    with mode_cm:
        rec.start()
        try:
            for i in range(spec["steps"]):
                out = step_model(input_ids=ids, labels=labels)
                if i == 0:
                    outputs["logits"] = out.logits.detach()
                out.loss.backward()
                opt.step()
                opt.zero_grad()
        except _Stop:
            pass
    if "logits" in outputs:
        torch.save(outputs["logits"].cpu(), _logits_file(spec["result"]))
        return {"logits": _hash(outputs["logits"])}
    return {}


def _run_script(spec, rec, mode_cm):
    import runpy

    argv = spec["argv"]
    if argv and os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    if not argv:
        raise SystemExit("tpuc check: nothing to run after --")
    if argv[0] == "-m":
        run, target = runpy.run_module, argv[1]
        sys.argv = argv[1:]
    else:
        run, target = runpy.run_path, argv[0]
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    with mode_cm:
        rec.start()
        try:
            run(target, run_name="__main__")
        except _Stop:
            pass
        except SystemExit as e:
            if e.code not in (None, 0):
                raise
    return {}


def _child(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    res = {"device": spec["device"], "ok": False}
    t0 = time.perf_counter()
    try:
        import torch

        torch.manual_seed(spec["seed"])
        import random

        random.seed(spec["seed"])
        try:
            import numpy

            numpy.random.seed(spec["seed"])
        except ImportError:
            pass
        rec = _Recorder(spec["device"], spec["steps"], spec["count_ops"],
                        script=spec["kind"] == "script", progress=spec.get("progress"))
        mode = _install_hooks(rec, spec["device"])
        import contextlib

        cm = contextlib.ExitStack()
        cm.enter_context(mode)
        if rec.census is not None:
            cm.enter_context(rec.census())
        if spec["device"] == "tpu":
            torch.tpu.reset_peak_memory_stats()
        elif spec["device"] == "cuda":
            torch.cuda.reset_peak_memory_stats()
        outs = (_run_model if spec["kind"] == "model" else _run_script)(spec, rec, cm)
        res["outputs"] = outs
        res["losses"] = [float(t.item()) for t in rec.losses]
        res["loss_hashes"] = [_hash(t) for t in rec.losses]
        res["step_times"] = rec.step_times
        res["step_syncs"] = rec.step_syncs
        res["step_compiles"] = rec.step_compiles
        res["step_small_compiles"] = rec.step_small
        res["step_fallbacks"] = rec.step_fallbacks
        res["fallback_sites"] = rec.fallback_sites
        res["ops"] = rec.ops
        if spec["device"] == "tpu":
            import tpuc

            res["fallbacks"] = tpuc.fallback_report()
            fs = torch.tpu.fused_stats()
            res["fused"] = {k: fs[k] for k in ("segments", "compiles", "recompiles", "compile_seconds",
                                                 "fuse_after", "fuse_after_small", "small_compiled")
                            if k in fs}
            res["fused_log"] = [{k: e[k] for k in ("reason", "ops", "program", "first_op", "last_op",
                                                   "changed")} for e in torch.tpu.fused_log()[-200:]]
            res["compile"] = {k: v for k, v in torch.tpu.compile_stats().items()
                              if isinstance(v, (int, float, str, list))}
            res["peak_memory"] = torch.tpu.max_memory_allocated()
            res["tpu_used"] = res["peak_memory"] > 0
        elif spec["device"] == "cuda":
            res["peak_memory"] = torch.cuda.max_memory_allocated()
        else:
            import resource

            res["peak_memory"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        res["ok"] = True
    except BaseException as e:  # the run's failure is the report's subject
        res["error"] = f"{type(e).__name__}: {e}"
        res["traceback"] = traceback.format_exc()[-4000:]
    res["seconds"] = time.perf_counter() - t0
    with open(spec["result"], "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the result is written; skip interpreter teardown


# ---------------------------------------------------------------- the parent


def _run_child(spec, out_dir, name, env_extra, timeout, on_step=None):
    """Runs one case in a fresh process; `on_step(steps_done)` is called as
    its steps finish (the child marks each in a progress file)."""
    spec = dict(spec, result=os.path.join(out_dir, name + ".json"),
                progress=os.path.join(out_dir, name + ".progress"))
    path = os.path.join(out_dir, name + ".spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    open(spec["progress"], "w").close()
    env = dict(os.environ, **env_extra)
    log = os.path.join(out_dir, name + ".log")
    t0 = time.perf_counter()
    with open(log, "w") as lf:
        p = subprocess.Popen([sys.executable, "-m", "tpuc.check", "--_child", path], env=env,
                             stdout=lf, stderr=subprocess.STDOUT)
        rc, seen = None, -1
        while rc is None:
            try:
                rc = p.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                if time.perf_counter() - t0 > timeout:
                    p.kill()
                    p.wait()
                    rc = "timeout"
            done = os.path.getsize(spec["progress"])
            if on_step is not None and done != seen:
                seen = done
                on_step(done)
    try:
        with open(spec["result"]) as f:
            res = json.load(f)
    except (OSError, ValueError):
        res = {"ok": False, "error": f"the run ended without a result (exit status {rc}); see {log}"}
    res["wall_seconds"] = time.perf_counter() - t0
    res["log"] = log
    return res


class _Progress:
    """The terminal's progress: on a terminal, one line redrawn with a bar
    of all runs' steps; elsewhere (a log, CI) one line per finished run."""

    def __init__(self, runs, steps, quiet):
        self.n, self.steps, self.quiet = len(runs), steps, quiet
        self.tty = sys.stdout.isatty() and not quiet
        self.total = self.n * steps
        self.before = 0

    def start(self, k, title):
        self.k, self.title = k, title
        if self.tty:
            self.step(0)
        elif not self.quiet:
            print(f"tpuc check [{k + 1}/{self.n}] {title} ...", end="", flush=True)

    def step(self, done):
        if not self.tty:
            return
        done = min(done, self.steps)
        frac = (self.before + done) / max(self.total, 1)
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        print(f"\rtpuc check [{bar}] run {self.k + 1}/{self.n} {self.title}: step {done}/{self.steps}"
              "\033[K", end="", flush=True)

    def end(self, r):
        self.before += self.steps
        if self.quiet:
            return
        if self.tty:
            print("\r\033[K", end="")
            print(f"tpuc check [{self.k + 1}/{self.n}] {self.title} ...", end="")
        print(f" {'done' if r.get('ok') else 'FAILED'} ({r['wall_seconds']:.1f} s)", flush=True)


def _close(a, b, rtol, atol):
    return abs(a - b) <= atol + rtol * abs(b)


def _agreement(ref, tpu, ok, lt, lr, args):
    """Losses step by step, and the first forward's logits where saved."""
    ag = {"rtol": args.rtol, "atol": args.atol}
    la, lb = tpu.get("losses", []), ref.get("losses", [])
    if ok and la and len(la) == len(lb):
        errs = [abs(a - b) for a, b in zip(la, lb)]
        rel = [e / max(abs(b), 1e-12) for e, b in zip(errs, lb)]
        bad = [i for i, (a, b) in enumerate(zip(la, lb)) if not _close(a, b, args.rtol, args.atol)]
        ag.update(max_abs=max(errs), max_rel=max(rel), per_step_abs=errs,
                  first_bad_step=bad[0] if bad else None)
        ag["per_output"] = [
            {"output": f"loss, step {i}", "max_abs": e, "max_rel": r,
             "error_over_tolerance": e / (args.atol + args.rtol * abs(b))}
            for i, (e, r, b) in enumerate(zip(errs, rel, lb))]
        verdict = "pass" if not bad else "fail"
        detail = (f"{len(la)} losses within |tpu - ref| <= {args.atol} + {args.rtol} * |ref|"
                  if not bad else f"loss of step {bad[0]} differs: {la[bad[0]]!r} vs {lb[bad[0]]!r}")
    elif ok and not la:
        verdict, detail = "fail", "no loss was recorded (no loss.backward() call)"
    elif ok:
        verdict, detail = "fail", f"{len(la)} losses on tpu, {len(lb)} on the reference"
    else:
        verdict, detail = "fail", "not judged: a run failed"
    if verdict == "pass" and lt and lr and os.path.exists(lt) and os.path.exists(lr):
        import torch

        a, b = torch.load(lt), torch.load(lr)
        err = (a.double() - b.double()).abs()
        ag["logits_max_abs"] = float(err.max())
        ag["logits_max_rel"] = float((err / b.double().abs().clamp_min(1e-6)).max())
        close = torch.allclose(a.double(), b.double(), rtol=args.rtol, atol=args.atol)
        ratio = float((err / (args.atol + args.rtol * b.double().abs())).max())
        ag.setdefault("per_output", []).append(
            {"output": "logits, first forward", "max_abs": ag["logits_max_abs"],
             "max_rel": ag["logits_max_rel"], "error_over_tolerance": ratio})
        if not close:
            verdict = "fail"
            detail += f"; first forward's logits differ (max abs {ag['logits_max_abs']:.3g})"
        else:
            detail += "; first forward's logits too"
    ag.update(verdict=verdict, detail=detail)
    return ag


def _times(r):
    """First step, and the median of the later ones (seconds)."""
    t = r.get("step_times") or []
    steady_t = sorted(t[1:]) if len(t) > 1 else t
    med = steady_t[len(steady_t) // 2] if steady_t else None
    return {"first_step_s": t[0] if t else None, "steady_step_s": med, "all": t}


def _judge_real(ref, tpu, args, out_dir):
    """The case again at the user's real batch and sequence sizes."""
    b, s = args.real_sizes
    ok = bool(ref.get("ok") and tpu.get("ok"))
    ag = _agreement(ref, tpu, ok, _logits_file(os.path.join(out_dir, "tpu-real.json")),
                    _logits_file(os.path.join(out_dir, "reference-real.json")), args)
    t, r = _times(tpu), _times(ref)
    if not ok:
        why = "; ".join(f"{n}: {x.get('error')}" for n, x in (("reference", ref), ("tpu", tpu))
                        if not x.get("ok"))
        detail = f"batch {b} x sequence {s}: a run failed: {why}"
    else:
        detail = (f"batch {b} x sequence {s}: {ag['detail']}; steady step "
                  f"{t['steady_step_s'] * 1e3:.1f} ms on tpu, {r['steady_step_s'] * 1e3:.1f} ms on "
                  f"{args.reference}; peak tpu memory {tpu.get('peak_memory', 0) / 2**20:.1f} MiB")
    return {"verdict": "pass" if ok and ag["verdict"] == "pass" else "fail", "detail": detail,
            "batch": b, "seq": s, "agreement": ag, "tpu": t, "reference": r,
            "peak_memory": tpu.get("peak_memory")}


def _judge(ref, tpu, tpu2, census, args):
    checks = {}
    named = (("reference", ref), ("tpu", tpu), ("tpu again", tpu2), ("op census", census))
    why = [f"{n}: {r.get('error')}" for n, r in named if not r.get("ok")]
    if tpu.get("ok") and not tpu.get("tpu_used", True):
        why.append("tpu: the run finished without putting a tensor on tpu (the script chose "
                   "its device itself; tpuc check maps the devices it asks for, \"cuda\" or "
                   "\"tpu\", and says yes to torch.cuda.is_available())")
    ok = not why
    checks["runs"] = {"verdict": "pass" if ok else "fail",
                      "detail": "all four runs finished" if ok else "; ".join(why),
                      "steps": {"reference": len(ref.get("step_times", [])),
                                "tpu": len(tpu.get("step_times", []))}}
    checks["agreement"] = _agreement(ref, tpu, ok, args.out_paths.get("tpu.logits"),
                                     args.out_paths.get("reference.logits"), args)
    # Repeatability.
    rp = {}
    if tpu.get("ok") and tpu2.get("ok"):
        h1, h2 = tpu.get("loss_hashes", []), tpu2.get("loss_hashes", [])
        diff = [i for i, (a, b) in enumerate(zip(h1, h2)) if a != b]
        same_out = tpu.get("outputs") == tpu2.get("outputs")
        if not diff and len(h1) == len(h2) and same_out:
            rp.update(verdict="pass", detail=f"bitwise equal: {len(h1)} losses" +
                      (" and the first forward's logits" if tpu.get("outputs") else ""))
        else:
            where = (f"loss of step {diff[0]} ({tpu['losses'][diff[0]]!r} vs {tpu2['losses'][diff[0]]!r})"
                     if diff else "the first forward's logits" if not same_out else "the number of losses")
            rp.update(verdict="fail", detail=f"two tpu runs with the same seed first differ at {where}",
                      first_difference=where)
    else:
        rp.update(verdict="fail", detail="not judged: a run failed")
    checks["repeatability"] = rp
    # Ops.
    fb = tpu.get("fallbacks") or {}
    ops = census.get("ops") or {}
    checks["ops"] = {
        "verdict": "pass" if not fb else "warn",
        "detail": (f"{len(ops)} distinct ATen ops, all native" if not fb else
                   f"{len(fb)} of {len(ops)} distinct ATen ops ran on the CPU fallback: " +
                   ", ".join(f"{k} ({v} calls, first at {tpu.get('fallback_sites', {}).get(k) or '?'})"
                             for k, v in sorted(fb.items()))),
        "native": {k: v for k, v in sorted(ops.items()) if k not in fb},
        "fallback": fb,
        "fallback_sites": tpu.get("fallback_sites", {}),
    }
    # Host syncs per step (the census run, which adds no sync of its own; it
    # runs otherwise than the timed runs, so it is not the repeatability run).
    per = census.get("step_syncs", [])
    steady = per[1:] or per
    reasons = {}
    for s in steady:
        for k, v in s.items():
            reasons[k] = reasons.get(k, 0) + v
    n = max(len(steady), 1)
    avg = {k: v / n for k, v in reasons.items()}
    checks["syncs"] = {
        "verdict": "info",
        "detail": ("segments run per steady step, by reason: " +
                   ", ".join(f"{k} {v:.1f}" for k, v in sorted(avg.items())) if avg
                   else "no segment ran inside a steady step: the step is cut only where the "
                        "next one begins"),
        "per_step": per,
        "segments": tpu.get("fused_log", [])[-50:],
    }
    # Recompiles: programs still compiled once the first steps have compiled
    # the step's own (a training loop should settle). Fused mode runs a
    # segment op by op until its fuse_after-th run (TPUC_FUSE_AFTER, as the
    # tpu run's runtime read it), and a first step's segments differ from
    # later ones (optimizer state is created), so the loop's own programs
    # are all compiled by step fuse_after + 1 -- a small segment's (all its
    # values small) by step fuse_after_small + 1.
    fz = tpu.get("fused") or {}
    after = max(1, int(fz.get("fuse_after") or 1))
    settle = after + 1 if args.mode == "fused" else 2
    small_settle = max(1, int(fz.get("fuse_after_small") or after)) + 1 if args.mode == "fused" else 2
    per_c = tpu.get("step_compiles", [])
    per_s = tpu.get("step_small_compiles", []) + [0] * len(per_c)
    late = sum(max(0, c - per_s[i]) for i, c in enumerate(per_c) if i >= settle) + \
        sum(min(c, per_s[i]) for i, c in enumerate(per_c) if i >= small_settle)
    changed = [e for e in tpu.get("fused_log", []) if e.get("changed")]
    what = "; ".join(f"{e['first_op']}: {e['changed']}" for e in changed[:5])
    checks["recompiles"] = {
        "verdict": "warn" if late else "pass",
        "detail": (f"{late} programs compiled after step {settle}" + (f" (what changed: {what})" if what else "")
                   if late else
                   f"no program compiled after step {settle} ({sum(per_c)} compiled in the first steps)"
                   if len(per_c) > settle else
                   f"{sum(per_c)} programs compiled; run {settle + 1} or more steps to see whether "
                   f"the loop settles"),
        "compiled_per_step": per_c,
        "recompiles": (tpu.get("fused") or {}).get("recompiles", 0),
        "what_changed": [e["changed"] for e in changed],
        "compile_seconds": (tpu.get("fused") or {}).get("compile_seconds"),
    }
    # Speed and memory.
    sp = {"tpu": _times(tpu), "reference": _times(ref),
          "peak_memory": {"tpu": tpu.get("peak_memory"), "reference (process RSS)": ref.get("peak_memory")}}
    a, b = sp["tpu"]["steady_step_s"], sp["reference"]["steady_step_s"]
    sp["verdict"] = "info"
    sp["detail"] = (f"steady step {a * 1e3:.1f} ms on tpu, {b * 1e3:.1f} ms on {args.reference} "
                    f"(first step {sp['tpu']['first_step_s']:.2f} s and "
                    f"{sp['reference']['first_step_s']:.2f} s)" if a and b else "not measured")
    checks["speed"] = sp
    return checks


def _svg_lines(series, title, ylabel, w=560, h=220):
    """A small self-contained SVG line plot of {name: [y...]}."""
    pts = [y for ys in series.values() for y in ys if y is not None]
    if not pts:
        return f"<p>{html.escape(title)}: no data</p>"
    lo, hi = min(pts), max(pts)
    if hi == lo:
        hi = lo + (abs(lo) or 1.0) * 1e-3
    n = max(len(ys) for ys in series.values())
    px = lambda i: 70 + (w - 90) * (i / max(n - 1, 1))
    py = lambda y: h - 30 - (h - 50) * ((y - lo) / (hi - lo))
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
           f'<title>{html.escape(title)}</title>',
           f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
           f'<line x1="70" y1="{h - 30}" x2="{w - 20}" y2="{h - 30}" stroke="#444"/>',
           f'<line x1="70" y1="24" x2="70" y2="{h - 30}" stroke="#444"/>',
           f'<text x="66" y="{py(hi) + 4:.1f}" text-anchor="end" font-size="10">{hi:.4g}</text>',
           f'<text x="66" y="{py(lo) + 4:.1f}" text-anchor="end" font-size="10">{lo:.4g}</text>',
           f'<text x="{w / 2}" y="{h - 6}" text-anchor="middle" font-size="11">step</text>',
           f'<text x="12" y="{h / 2}" font-size="11" transform="rotate(-90 12 {h / 2})" '
           f'text-anchor="middle">{html.escape(ylabel)}</text>']
    for k, (name, ys) in enumerate(series.items()):
        c = colors[k % len(colors)]
        pl = " ".join(f"{px(i):.1f},{py(y):.1f}" for i, y in enumerate(ys) if y is not None)
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{pl}"/>')
        for i, y in enumerate(ys):
            if y is not None:
                out.append(f'<circle cx="{px(i):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>')
        out.append(f'<text x="{w - 150}" y="{34 + 14 * k}" font-size="11" fill="{c}">'
                   f'{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _svg_bars(items, title, w=560):
    """Horizontal bars of error/tolerance per output on a log scale, with
    the tolerance (1) marked: a bar that crosses the line fails."""
    if not items:
        return f"<p>{html.escape(title)}: no data</p>"
    import math

    lv = [math.log10(max(v, 1e-12)) for _, v in items]
    lo, hi = min(min(lv), -3.0), max(max(lv), 0.5)
    x0, x1, row = 170, w - 20, 18
    h = 50 + row * len(items)
    px = lambda v: x0 + (x1 - x0) * ((v - lo) / (hi - lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
           f'<title>{html.escape(title)}</title>',
           f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>']
    for k, ((name, v), l) in enumerate(zip(items, lv)):
        y = 26 + row * k
        c = "#1a7f37" if v <= 1 else "#cf222e"
        out.append(f'<text x="{x0 - 6}" y="{y + 12}" text-anchor="end" font-size="11">'
                   f'{html.escape(name)}</text>')
        out.append(f'<rect x="{x0}" y="{y + 2}" width="{max(px(l) - x0, 1):.1f}" height="{row - 5}" '
                   f'fill="{c}"><title>{v:.3g}</title></rect>')
    one = px(0.0)
    out.append(f'<line x1="{one:.1f}" y1="22" x2="{one:.1f}" y2="{h - 22}" stroke="#444" '
               f'stroke-dasharray="4 3"/>')
    out.append(f'<text x="{one:.1f}" y="{h - 8}" text-anchor="middle" font-size="10">tolerance</text>')
    out.append(f'<text x="{x0}" y="{h - 8}" font-size="10">1e{lo:.0f}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _write_reports(report, out_dir):
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    c = report["checks"]
    md = [f"# tpuc check: {report['target']}", "",
          f"{report['when']} · device `tpu` ({report['mode']} mode) against `{report['reference']}` · "
          f"{report['steps']} steps · seed {report['seed']}", "",
          "| check | verdict | evidence |", "|---|---|---|"]
    for name, v in c.items():
        md.append(f"| {name} | **{v['verdict'].upper()}** | {v['detail'].replace('|', '/')} |")
    md += ["", f"Overall: **{report['verdict'].upper()}**", ""]
    if c["ops"]["fallback"]:
        md += ["## CPU fallbacks", "", "| op | calls | first call |", "|---|---|---|"]
        for k, v in sorted(c["ops"]["fallback"].items()):
            md.append(f"| `{k}` | {v} | {c['ops']['fallback_sites'].get(k) or '?'} |")
        md.append("")
    md += ["## Losses", "", "| step | tpu | reference | abs error | step time tpu (ms) | reference (ms) |",
           "|---|---|---|---|---|---|"]
    lt, lr = report["runs"]["tpu"].get("losses", []), report["runs"]["reference"].get("losses", [])
    tt = c["speed"]["tpu"]["all"]
    tr = c["speed"]["reference"]["all"]
    for i in range(max(len(lt), len(lr))):
        g = lambda xs, j, f="{:.6g}": f.format(xs[j]) if j < len(xs) else "-"
        err = f"{abs(lt[i] - lr[i]):.3g}" if i < len(lt) and i < len(lr) else "-"
        md.append(f"| {i} | {g(lt, i)} | {g(lr, i)} | {err} | "
                  f"{g([x * 1e3 for x in tt], i, '{:.1f}')} | {g([x * 1e3 for x in tr], i, '{:.1f}')} |")
    per = c["agreement"].get("per_output", [])
    if per:
        md += ["", "## Error per output", "",
               f"Tolerance: |tpu - ref| <= {c['agreement']['atol']} + {c['agreement']['rtol']} * |ref|.", "",
               "| output | max abs error | max rel error | error / tolerance |", "|---|---|---|---|"]
        for o in per:
            md.append(f"| {o['output']} | {o['max_abs']:.3g} | {o['max_rel']:.3g} | "
                      f"{o['error_over_tolerance']:.3g} |")
    md += ["", "## ATen ops used (the census run)", ""]
    for k, v in sorted(c["ops"]["native"].items()):
        md.append(f"- `{k}`: {v}")
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    err = c["agreement"].get("per_step_abs", [])
    colour = {"pass": "#1a7f37", "fail": "#cf222e", "warn": "#9a6700", "info": "#0969da"}
    rows = "\n".join(
        f"<tr><td>{n}</td><td style='color:{colour[c[n]['verdict']]};font-weight:bold'>"
        f"{c[n]['verdict'].upper()}</td><td>{html.escape(c[n]['detail'])}</td></tr>" for n in c)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tpuc check: {html.escape(report['target'])}</title>
<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto;color:#1f2328}}
table{{border-collapse:collapse}}td,th{{border:1px solid #d0d7de;padding:4px 8px;vertical-align:top}}
.verdict{{font-size:1.4em;font-weight:bold;color:{colour['pass' if report['verdict'] == 'pass' else 'fail']}}}</style>
</head><body>
<h1>tpuc check: {html.escape(report['target'])}</h1>
<p>{html.escape(report['when'])} · tpu ({html.escape(report['mode'])} mode) against
{html.escape(report['reference'])} · {report['steps']} steps · seed {report['seed']}</p>
<p class="verdict" id="verdict">Overall: {report['verdict'].upper()}</p>
<table><tr><th>check</th><th>verdict</th><th>evidence</th></tr>
{rows}</table>
<h2>Loss</h2>
{_svg_lines({'tpu': lt, report['reference']: lr}, 'loss per step', 'loss')}
<h2>Step time</h2>
{_svg_lines({'tpu': [x * 1e3 for x in tt], report['reference']: [x * 1e3 for x in tr]}, 'step time', 'ms')}
<h2>Error against the reference</h2>
{_svg_lines({'|tpu - reference|': err}, 'absolute loss error per step', 'abs error')}
{_svg_bars([(o['output'], o['error_over_tolerance']) for o in per], 'error per output, over its tolerance')}
</body></html>
"""
    with open(os.path.join(out_dir, "report.html"), "w") as f:
        f.write(page)


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="tpuc check",
        description="Runs a script or a Hugging Face model on tpu and on a reference device and "
                    "reports whether it runs, agrees, repeats, which ops it used and how fast.")
    p.add_argument("--model", help="hf:PATH (a folder with config.json) or hf:NAME "
                                   "(gpt2, bert, llama, qwen3-moe)")
    p.add_argument("--task", choices=TASKS, default="causal-lm")
    p.add_argument("--steps", type=int, default=5, help="optimizer steps per run (default 5)")
    p.add_argument("--mode", choices=("fused", "strict", "debug", "compile"), default="fused",
                   help="tpu's execution path (compile: torch.compile(backend='tpu'), --model only)")
    p.add_argument("--reference", default="cpu",
                   help="reference device: cpu (default) or cuda where CUDA is available")
    p.add_argument("--out", help="report folder (default tpuc-check-<time>)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=2, help="--model: batch size (default 2)")
    p.add_argument("--seq", type=int, default=32, help="--model: sequence length (default 32)")
    p.add_argument("--real-sizes", metavar="BxS",
                   help="--model: check again at batch B and sequence length S (e.g. 8x512)")
    p.add_argument("--rtol", type=float, default=2e-3, help="agreement tolerance (relative)")
    p.add_argument("--atol", type=float, default=1e-4, help="agreement tolerance (absolute)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- python SCRIPT [ARGS...]")
    args = p.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if bool(script) == bool(args.model):
        p.error("give either --model hf:... or -- python SCRIPT ...")
    if args.model and not args.model.startswith("hf:"):
        p.error("--model takes hf:PATH or hf:NAME")
    if args.mode == "compile" and not args.model:
        p.error("--mode compile needs --model (a script compiles with torch.compile itself)")
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if args.reference not in ("cpu", "cuda"):
        p.error("--reference: cpu or cuda")
    if args.reference == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.error("--reference cuda: CUDA is not available here")
    if args.real_sizes is not None:
        if not args.model:
            p.error("--real-sizes needs --model (a script runs at its own sizes)")
        try:
            b, s = (int(v) for v in args.real_sizes.lower().split("x"))
            assert b > 0 and s > 0
        except (ValueError, AssertionError):
            p.error(f"--real-sizes {args.real_sizes}: expected BxS, e.g. 8x512")
        args.real_sizes = (b, s)
    args.script = script
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--_child"]:
        _child(argv[1])
        return 0
    if argv[:1] == ["check"]:
        argv = argv[1:]
    try:
        args = _parse(argv)
    except SystemExit as e:
        return 2 if e.code not in (0, None) else 0
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out_dir = os.path.abspath(args.out or f"tpuc-check-{when.replace(':', '')}")
    os.makedirs(out_dir, exist_ok=True)
    target = args.model if args.model else " ".join(args.script)
    spec = {"kind": "model" if args.model else "script", "steps": args.steps, "seed": args.seed,
            "mode": args.mode, "count_ops": False}
    if args.model:
        spec.update(model=args.model[3:], task=args.task, batch=args.batch, seq=args.seq)
    else:
        spec.update(argv=args.script)
    eager = {} if args.mode == "compile" else {"TPUC_EAGER_MODE": args.mode}
    runs = [("reference", dict(spec, device=args.reference), {}),
            ("tpu", dict(spec, device="tpu"), eager),
            ("tpu-again", dict(spec, device="tpu"), eager),
            ("tpu-census", dict(spec, device="tpu", count_ops=True), eager)]
    titles = {"reference": f"reference run on {args.reference}", "tpu": "tpu run",
              "tpu-again": "tpu again (repeatability)",
              "tpu-census": "tpu, counting ops and host syncs"}
    if args.real_sizes:
        b, s = args.real_sizes
        runs += [("reference-real", dict(spec, device=args.reference, batch=b, seq=s), {}),
                 ("tpu-real", dict(spec, device="tpu", batch=b, seq=s), eager)]
        titles["reference-real"] = f"reference at real sizes ({b}x{s})"
        titles["tpu-real"] = f"tpu at real sizes ({b}x{s})"
    results = {}
    progress = _Progress(runs, args.steps, args.quiet)
    for k, (name, s, env) in enumerate(runs):
        progress.start(k, titles[name])
        results[name] = _run_child(s, out_dir, name, env, args.timeout, progress.step)
        progress.end(results[name])
    args.out_paths = {"tpu.logits": _logits_file(os.path.join(out_dir, "tpu.json")),
                      "reference.logits": _logits_file(os.path.join(out_dir, "reference.json"))}
    checks = _judge(results["reference"], results["tpu"], results["tpu-again"],
                    results["tpu-census"], args)
    if args.real_sizes:
        checks["real sizes"] = _judge_real(results["reference-real"], results["tpu-real"], args,
                                           out_dir)
    verdict = "fail" if any(v["verdict"] == "fail" for v in checks.values()) else "pass"
    report = {"target": target, "when": when, "mode": args.mode, "reference": args.reference,
              "steps": args.steps, "seed": args.seed, "verdict": verdict, "checks": checks,
              "runs": results}
    _write_reports(report, out_dir)
    if not args.quiet:
        for name, v in checks.items():
            print(f"  {name:<14} {v['verdict'].upper():<5} {v['detail']}")
        print(f"tpuc check: {verdict.upper()}; reports in {out_dir}/report.{{md,html,json}}")
    return 1 if verdict == "fail" else 0


def cli():
    """The ``tpuc`` console script: ``tpuc check ...``."""
    argv = sys.argv[1:]
    if argv[:1] != ["check"]:
        print("usage: tpuc check [options] -- python SCRIPT [ARGS...]\n"
              "       tpuc check [options] --model hf:PATH_OR_NAME --task causal-lm\n"
              "(tpuc check --help for the options)", file=sys.stderr)
        return 2
    return main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
