"""Op conformance: PyTorch's own OpInfo database run on the tpu device
against the CPU, for every (op, dtype) pair the CPU supports.

Each pair ends as one of:
  pass_native    results agree and no op of the call ran on the CPU
  pass_fallback  results agree, at least one op ran through the CPU fallback
  fail           the tpu result differs from the CPU result
  error          the tpu call raised where the CPU did not
  skipped        with a reason (no usable sample, random op, dtype the
                 device does not hold)

Usage:
  python tests/conformance/opinfo.py --out tests/conformance/report.json
  python tests/conformance/opinfo.py --check tests/conformance/report.json
    (fails when a pair that passed in the committed report no longer does)
Each pair is also run backward where the OpInfo supports autograd for that
dtype: input gradients for random cotangents, tpu against CPU, recorded in
results_backward / summary_backward.

--jobs N runs the pairs in N processes (every N-th pair each) and merges
their results. Each pair draws its samples right after torch.manual_seed(0),
so its inputs do not depend on which pairs ran before it, or in which
process.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten

import tpuc

warnings.filterwarnings("ignore")
MAX_SAMPLES = 2
UNSUPPORTED = {torch.complex32, torch.bits8,
               torch.quint8, torch.qint8, torch.qint32}


# Ops whose outputs the comparison cannot judge: uninitialized memory
# (compared by dtype and shape only), and as_strided over the CPU storage of
# a view input, which `.to()` does not carry over (CUDA alike).
UNINITIALIZED = {"empty", "empty_like", "new_empty", "empty_strided",
                 "new_empty_strided", "empty_permuted"}
STORAGE_LAYOUT = {"as_strided.partial_views"}


def flat(x):
    leaves, _ = tree_flatten(x)
    return leaves


def to_cpu(leaves):
    return [l.cpu() if isinstance(l, torch.Tensor) else l for l in leaves]


HALF = (torch.float16, torch.bfloat16)


def tolerance(dtype):
    """assert_close's defaults, widened for half floats to PyTorch's own
    cross-device OpInfo comparison (test_ops.py test_compare_cpu compares
    CUDA to CPU with atol = rtol = 1e-3): a device that computes a half op
    in float32 and rounds once differs by an ulp from the CPU kernels that
    round each step."""
    if dtype in HALF:
        return {"atol": 1e-3, "rtol": 1.6e-2 if dtype == torch.bfloat16 else 1e-3}
    return {}


def same(a, b, values=True):
    if len(a) != len(b):
        return False, f"{len(a)} vs {len(b)} outputs"
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False, "output kinds differ"
        if isinstance(x, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape:
                return False, f"{y.dtype}{list(y.shape)} vs {x.dtype}{list(x.shape)}"
            if not values:
                continue
            try:
                torch.testing.assert_close(y, x, equal_nan=True, check_device=False,
                                           **tolerance(x.dtype))
            except AssertionError as e:
                return False, str(e).splitlines()[0][:200]
        elif x != y and not (x != x and y != y):
            return False, f"{y!r} vs {x!r}"
    return True, ""


def seeds_itself(op):
    """OpInfos of random ops wrap them in wrapper_set_seed, which seeds the
    generator inside the call (so reseeding outside changes nothing)."""
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def run_pair(op, dtype):
    if dtype in UNSUPPORTED:
        return "skipped", "dtype not held by the tpu device"
    full = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
    if full in STORAGE_LAYOUT:
        return "skipped", "reads the CPU storage around a view input, which .to() does not copy"
    values = op.name not in UNINITIALIZED
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:MAX_SAMPLES]
    except Exception as e:  # noqa: BLE001
        return "skipped", f"no samples: {type(e).__name__}"
    if not samples:
        return "skipped", "no samples"
    fell_back = set()
    checked = 0
    any_random = False
    for s in samples:
        try:
            torch.manual_seed(0)
            expected = to_cpu(flat(s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))))
            torch.manual_seed(0)
            again = to_cpu(flat(s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))))
        except Exception:  # noqa: BLE001
            continue  # the CPU reference itself refuses this sample
        if not same(expected, again, values)[0]:
            return "skipped", "random op: results differ between runs"
        try:
            torch.manual_seed(1)
            other = to_cpu(flat(s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))))
        except Exception:  # noqa: BLE001
            other = expected
        random = values and (seeds_itself(op) or not same(expected, other, values)[0])
        try:
            ds = s.transform(lambda t: t.to("tpu") if isinstance(t, torch.Tensor) else t)
        except Exception as e:  # noqa: BLE001
            return "skipped", f"sample not movable: {type(e).__name__}"
        tpuc.fallback_reset()
        try:
            torch.manual_seed(0)
            got = to_cpu(flat(ds.output_process_fn_grad(op(ds.input, *ds.args, **ds.kwargs))))
            if random:
                torch.manual_seed(0)
                got_again = to_cpu(flat(ds.output_process_fn_grad(op(ds.input, *ds.args, **ds.kwargs))))
            torch.tpu.synchronize()
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()[0][:200] if str(e) else ""
            if isinstance(e, TypeError) and "tpu does not support dtype" in msg:
                return "skipped", f"output dtype not held by the tpu device ({msg})"
            if "to be on cpu" in msg:
                return "skipped", "the op requires a CPU tensor argument (as on CUDA)"
            return "error", f"{type(e).__name__}: {msg}"
        fell_back |= set(tpuc.fallback_report())
        if random:
            # The device's generator is not the CPU's: the same seed must
            # give the same values on the device, with the CPU's dtypes and
            # shapes.
            ok, why = same(expected, got, values=False)
            if ok:
                ok, why = same(got, got_again)
                why = why and "same seed, different values: " + why
        else:
            ok, why = same(expected, got, values)
        if not ok:
            return "fail", why
        checked += 1
        any_random = any_random or random
    if checked == 0:
        return "skipped", "the CPU refuses every sample"
    if any_random:
        note = "random op: dtype, shape and same-seed reproducibility checked"
        if fell_back:
            return "pass_fallback", note + "; via " + ", ".join(sorted(fell_back))
        return "pass_native", note
    if fell_back:
        return "pass_fallback", "via " + ", ".join(sorted(fell_back))
    return "pass_native", ""


def grad_leaves(sample):
    return [t for t in flat([sample.input, list(sample.args), sample.kwargs])
            if isinstance(t, torch.Tensor) and t.requires_grad]


def vjp(op, sample, device, cotangents=None):
    """Gradients of the sample's differentiable inputs for random
    cotangents of the op's floating outputs (drawn on the CPU, seed 0)."""
    # As PyTorch's test_compare_cpu: output_process_fn_grad removes what
    # is not unique (the signs of singular vectors, say).
    out = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    outs = [o for o in flat(out) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs:
        return None, None
    if cotangents is None:
        g = torch.Generator().manual_seed(0)
        cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outs]
    leaves = grad_leaves(sample)
    grads = torch.autograd.grad(outs, leaves,
                                [c.to(o.device) for c, o in zip(cotangents, outs)],
                                allow_unused=True)
    return [None if x is None else x.detach().cpu() for x in grads], cotangents


def run_backward(op, dtype):
    """The backward pass of (op, dtype): input gradients on tpu vs CPU."""
    if dtype in UNSUPPORTED:
        return "skipped", "dtype not held by the tpu device"
    if not op.supports_autograd or dtype not in op.supported_backward_dtypes("cpu"):
        return None, None
    full = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
    if full in STORAGE_LAYOUT or op.name in UNINITIALIZED:
        return "skipped", "output values not comparable"
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=True))[:MAX_SAMPLES]
    except Exception as e:  # noqa: BLE001
        return "skipped", f"no samples: {type(e).__name__}"
    fell_back = set()
    checked = 0
    for s in samples:
        if not grad_leaves(s):
            continue
        try:
            torch.manual_seed(0)
            expected, cot = vjp(op, s, "cpu")
            torch.manual_seed(0)
            again, _ = vjp(op, s, "cpu", cot)
        except Exception:  # noqa: BLE001
            continue
        if expected is None:
            continue
        if not same([e for e in expected if e is not None],
                    [a for a in again if a is not None])[0]:
            return "skipped", "random op: gradients differ between runs"
        try:
            ds = s.transform(lambda t: t.detach().to("tpu").requires_grad_(t.requires_grad)
                             if isinstance(t, torch.Tensor) else t)
        except Exception as e:  # noqa: BLE001
            return "skipped", f"sample not movable: {type(e).__name__}"
        tpuc.fallback_reset()
        try:
            torch.manual_seed(0)
            got, _ = vjp(op, ds, "tpu", cot)
            torch.tpu.synchronize()
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()[0][:200] if str(e) else ""
            if isinstance(e, TypeError) and "tpu does not support dtype" in msg:
                return "skipped", f"dtype not held by the tpu device ({msg})"
            if "to be on cpu" in msg:
                return "skipped", "the op requires a CPU tensor argument (as on CUDA)"
            return "error", f"{type(e).__name__}: {msg}"
        fell_back |= set(tpuc.fallback_report())
        if got is None or [g is None for g in got] != [e is None for e in expected]:
            return "fail", "different gradients are defined"
        if seeds_itself(op):
            # A random op: the device's numbers are not the CPU's; its
            # gradients must still have the CPU's dtypes and shapes.
            ok, why = same([e for e in expected if e is not None],
                           [g for g in got if g is not None], values=False)
            if not ok:
                return "fail", why
            checked += 1
            continue
        ok, why = same([e for e in expected if e is not None], [g for g in got if g is not None])
        if not ok:
            return "fail", why
        checked += 1
    if checked == 0:
        return "skipped", "no differentiable sample the CPU accepts"
    if fell_back:
        return "pass_fallback", "via " + ", ".join(sorted(fell_back))
    return "pass_native", ""


def summarize(results):
    counts = {k: 0 for k in ("pass_native", "pass_fallback", "fail", "error", "skipped")}
    for r in results.values():
        counts[r["result"]] += 1
    total = sum(counts.values())
    counts["pairs_total"] = total
    considered = total - counts["skipped"]
    counts["native_pass_rate"] = round(counts["pass_native"] / considered, 4) if considered else 0.0
    counts["pass_rate"] = round((counts["pass_native"] + counts["pass_fallback"]) / considered, 4) if considered else 0.0
    return counts


def run_all(shard, num_shards, limit, only=None, backward=True):
    results = {}
    back = {}
    pairs = [(op, dt) for op in op_db for dt in sorted(op.supported_dtypes("cpu"), key=str)
             if not only or op.name in only]
    if limit:
        pairs = pairs[:limit]
    pairs = pairs[shard::num_shards]
    t0 = time.time()
    for i, (op, dt) in enumerate(pairs):
        key = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}|{str(dt).replace('torch.', '')}"
        if os.environ.get("TPUC_CONFORMANCE_TRACE"):
            print(f"  {key}", file=sys.stderr, flush=True)
        # Seed 0, as each run below reseeds before its calls: a pair's
        # samples were drawn from (nearly) this state when every pair ran
        # in one process, one after the other.
        torch.manual_seed(0)
        res, why = run_pair(op, dt)
        results[key] = {"result": res, **({"reason": why} if why else {})}
        if backward:
            torch.manual_seed(0)
            res, why = run_backward(op, dt)
            if res is not None:
                back[key] = {"result": res, **({"reason": why} if why else {})}
        if (i + 1) % 250 == 0:
            print(f"  {i + 1}/{len(pairs)} pairs, {time.time() - t0:.0f}s", file=sys.stderr)
    return results, back


# Backward pairs that passed in the committed (strict-mode) report and now
# differ from the CPU in value, at points where the gradient is
# ill-conditioned (asin/acos near +-1) or in half precision: in fused mode
# XLA compiles a gradient's ops into one kernel and rounds their
# intermediates differently from op-by-op execution (asin float32: 6.9e-5
# at -21.28, 3e-6 relative); normalize's float16 gradient (one element 8
# ulps off) changed in strict mode too when storage values became typed,
# cause not found yet. Listed, not hidden: the check prints each one, and
# any other outcome than different values (an error, other shapes or
# dtypes, a fallback) still fails it.
KNOWN_ROUNDING = {
    "acos|float16", "asin|float16", "asin|float32", "kron|bfloat16",
    "nn.functional.normalize|float16", "nn.functional.tanhshrink|bfloat16",
}

# Pairs whose CPU reference itself rounds differently by host: the committed
# report was made on an Intel Xeon, where they pass; on an AMD EPYC host
# PyTorch's CPU kernels (half-precision convolutions, float32 addbmm) give
# other roundings, and they fail in strict mode as in fused mode there
# (addbmm float32: 1e-6 apart on random inputs; float16 conv_transpose up to
# 2 ulps, as tests/python/test_native_nn2.py measures). The same rules as
# above: printed, and only different values are let through.
HOST_ROUNDING = {
    "forward": {
        "addbmm|float32", "nn.functional.conv_transpose1d|bfloat16",
        "nn.functional.conv_transpose2d|bfloat16",
        "nn.functional.conv_transpose2d|float16",
        "nn.functional.conv_transpose3d|bfloat16",
        "nn.functional.conv_transpose3d|float16",
    },
    "backward": {"nn.functional.conv1d|float16", "nn.functional.conv2d|float16"},
}


def check_against(before_all, results, only, label, rounding=None):
    """Pairs that passed in the committed report and no longer do, or that
    were native and now fall back. `rounding`: pairs whose failure is a
    known rounding difference."""
    before = {k: v for k, v in before_all.items() if not only or k in results}
    regressed = [k for k, v in before.items()
                 if v["result"].startswith("pass") and
                 not results.get(k, {"result": "missing"})["result"].startswith("pass")]
    for k in [k for k in regressed if rounding and k in rounding]:
        r = results.get(k, {})
        if r.get("result") == "fail" and r.get("reason", "").startswith("Tensor-likes are not close"):
            print(f"KNOWN ROUNDING DIFFERENCE ({label}) {k}: {r.get('reason')}")
            regressed.remove(k)
    native_lost = [k for k, v in before.items()
                   if v["result"] == "pass_native" and results.get(k, {}).get("result") == "pass_fallback"]
    for k in regressed[:50]:
        print(f"REGRESSED ({label}) {k}: {results.get(k)}")
    for k in native_lost[:50]:
        print(f"NO LONGER NATIVE ({label}) {k}")
    return len(regressed), len(native_lost)


def run_shards(args):
    """Runs every args.jobs-th pair in each of args.jobs processes with the
    same options and merges what they found."""
    with tempfile.TemporaryDirectory(prefix="tpuc-opinfo-") as d:
        own = ["--limit", str(args.limit), "--ops", args.ops, "--mode", args.mode]
        if args.forward_only:
            own.append("--forward-only")
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *own,
                                   "--shard", f"{i}/{args.jobs}:{d}/{i}.json"])
                 for i in range(args.jobs)]
        codes = [p.wait() for p in procs]
        if any(codes):
            sys.exit(f"conformance: a shard process failed (exit codes {codes})")
        results, back = {}, {}
        for i in range(args.jobs):
            with open(f"{d}/{i}.json") as f:
                part = json.load(f)
            results.update(part["results"])
            back.update(part["results_backward"])
    return results, back


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names (a subset, for development)")
    ap.add_argument("--show", action="store_true", help="print every pair's result")
    ap.add_argument("--forward-only", action="store_true")
    ap.add_argument("--mode", default="strict", choices=["debug", "strict", "fused"],
                    help="eager mode to run the device side in (the committed report is strict: "
                         "it measures each op's own lowering)")
    ap.add_argument("--jobs", type=int, default=1, help="processes to run the pairs in")
    ap.add_argument("--shard", help=argparse.SUPPRESS)  # "i/n:path", for --jobs
    args = ap.parse_args()
    torch.tpu.set_eager_mode(args.mode)
    if args.mode == "fused":
        # Each pair runs once: compile its segments at that first run
        # (by default a segment's first run goes op by op), so a fused
        # check tests the segment programs.
        os.environ["TPUC_FUSE_AFTER"] = "1"
    # Fallbacks are counted per pair (tpuc.fallback_report()); their
    # once-per-op warnings would only flood the log.
    tpuc._C.set_fallback_mode("silent")
    t0 = time.time()
    only = set(filter(None, args.ops.split(",")))
    if args.shard:
        part, path = args.shard.split(":", 1)
        i, n = map(int, part.split("/"))
        results, back = run_all(i, n, args.limit, only, backward=not args.forward_only)
        with open(path, "w") as f:
            json.dump({"results": results, "results_backward": back}, f)
        return
    if args.jobs > 1:
        results, back = run_shards(args)
    else:
        results, back = run_all(0, 1, args.limit, only, backward=not args.forward_only)
    if args.show:
        for k, v in sorted(results.items()):
            print(f"{v['result']:14s} {k:40s} {v.get('reason', '')}")
        for k, v in sorted(back.items()):
            print(f"{v['result']:14s} {k + ' (backward)':40s} {v.get('reason', '')}")
    summary = summarize(results)
    summary_back = summarize(back)
    summary["seconds"] = round(time.time() - t0, 1)
    props = torch.tpu.get_device_properties(0)
    report = {"summary": summary, "summary_backward": summary_back,
              "torch": torch.__version__, "eager_mode": args.mode,
              "plugin": f"{props.plugin_package} {props.plugin_version}",
              "platform": props.platform, "results": results,
              "results_backward": back}
    print("forward:", json.dumps(summary))
    print("backward:", json.dumps(summary_back))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
            f.write("\n")
    if args.check:
        with open(args.check) as f:
            committed = json.load(f)
        r1, n1 = check_against(committed["results"], results, only, "forward",
                               rounding=HOST_ROUNDING["forward"])
        r2, n2 = (0, 0)
        if not args.forward_only:
            r2, n2 = check_against(committed.get("results_backward", {}), back, only, "backward",
                                   rounding=KNOWN_ROUNDING | HOST_ROUNDING["backward"])
        if r1 + r2 + n1 + n2:
            print(f"{r1 + r2} regressed, {n1 + n2} no longer native")
            sys.exit(1)
        print(f"conformance: forward {summary['pass_native'] + summary['pass_fallback']} passed, "
              f"{summary['fail'] + summary['error']} failed, {summary['skipped']} skipped "
              f"(native {summary['pass_native']}); backward "
              f"{summary_back['pass_native'] + summary_back['pass_fallback']} passed, "
              f"{summary_back['fail'] + summary_back['error']} failed (native "
              f"{summary_back['pass_native']}); no regression against {args.check}")


if __name__ == "__main__":
    main()
