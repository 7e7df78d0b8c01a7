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
Forward only in this version; backward is not checked yet.
"""

import argparse
import json
import os
import sys
import time
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten

import tpuc

warnings.filterwarnings("ignore")
MAX_SAMPLES = 2
UNSUPPORTED = {torch.complex32, torch.float8_e4m3fn, torch.float8_e5m2,
               torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.bits8,
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
                torch.testing.assert_close(y, x, equal_nan=True, check_device=False)
            except AssertionError as e:
                return False, str(e).splitlines()[0][:200]
        elif x != y and not (x != x and y != y):
            return False, f"{y!r} vs {x!r}"
    return True, ""


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
    for s in samples:
        try:
            torch.manual_seed(0)
            expected = to_cpu(flat(op(s.input, *s.args, **s.kwargs)))
            torch.manual_seed(0)
            again = to_cpu(flat(op(s.input, *s.args, **s.kwargs)))
        except Exception:  # noqa: BLE001
            continue  # the CPU reference itself refuses this sample
        if not same(expected, again, values)[0]:
            return "skipped", "random op: results differ between runs"
        try:
            ds = s.transform(lambda t: t.to("tpu") if isinstance(t, torch.Tensor) else t)
        except Exception as e:  # noqa: BLE001
            return "skipped", f"sample not movable: {type(e).__name__}"
        tpuc.fallback_reset()
        try:
            torch.manual_seed(0)
            got = to_cpu(flat(op(ds.input, *ds.args, **ds.kwargs)))
            torch.tpu.synchronize()
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()[0][:200] if str(e) else ""
            if isinstance(e, TypeError) and "tpu does not support dtype" in msg:
                return "skipped", f"output dtype not held by the tpu device ({msg})"
            if "to be on cpu" in msg:
                return "skipped", "the op requires a CPU tensor argument (as on CUDA)"
            return "error", f"{type(e).__name__}: {msg}"
        fell_back |= set(tpuc.fallback_report())
        ok, why = same(expected, got, values)
        if not ok:
            return "fail", why
        checked += 1
    if checked == 0:
        return "skipped", "the CPU refuses every sample"
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


def run_all(shard, num_shards, limit, only=None):
    results = {}
    pairs = [(op, dt) for op in op_db for dt in sorted(op.supported_dtypes("cpu"), key=str)
             if not only or op.name in only]
    pairs = pairs[shard::num_shards]
    if limit:
        pairs = pairs[:limit]
    t0 = time.time()
    for i, (op, dt) in enumerate(pairs):
        key = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}|{str(dt).replace('torch.', '')}"
        res, why = run_pair(op, dt)
        results[key] = {"result": res, **({"reason": why} if why else {})}
        if (i + 1) % 250 == 0:
            print(f"  {i + 1}/{len(pairs)} pairs, {time.time() - t0:.0f}s", file=sys.stderr)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names (a subset, for development)")
    ap.add_argument("--show", action="store_true", help="print every pair's result")
    args = ap.parse_args()
    t0 = time.time()
    only = set(filter(None, args.ops.split(",")))
    results = run_all(0, 1, args.limit, only)
    if args.show:
        for k, v in sorted(results.items()):
            print(f"{v['result']:14s} {k:40s} {v.get('reason', '')}")
    summary = summarize(results)
    summary["seconds"] = round(time.time() - t0, 1)
    props = torch.tpu.get_device_properties(0)
    report = {"summary": summary, "torch": torch.__version__,
              "plugin": f"{props.plugin_package} {props.plugin_version}",
              "platform": props.platform, "forward_only": True, "results": results}
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
            f.write("\n")
    if args.check:
        with open(args.check) as f:
            before = {k: v for k, v in json.load(f)["results"].items() if not only or k in results}
        regressed = [k for k, v in before.items()
                     if v["result"].startswith("pass") and
                     not results.get(k, {"result": "missing"})["result"].startswith("pass")]
        native_lost = [k for k, v in before.items()
                       if v["result"] == "pass_native" and results.get(k, {}).get("result") == "pass_fallback"]
        for k in regressed[:50]:
            print(f"REGRESSED {k}: {results.get(k)}")
        for k in native_lost[:50]:
            print(f"NO LONGER NATIVE {k}")
        if regressed or native_lost:
            print(f"{len(regressed)} regressed, {len(native_lost)} no longer native")
            sys.exit(1)
        print(f"conformance: {summary['pass_native'] + summary['pass_fallback']} passed, "
              f"{summary['fail'] + summary['error']} failed, {summary['skipped']} skipped "
              f"(native {summary['pass_native']}); no regression against {args.check}")


if __name__ == "__main__":
    main()
