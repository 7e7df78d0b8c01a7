#!/usr/bin/env python3
"""The libraries' own test suites on tpu, against the same files on cpu.

Other projects' test files are never part of this repository: `extract`
copies them into a folder outside git and records where each came from;
`run` runs them there and writes tests/upstream/report.json.

    # once, from the sources named below (a PyPI sdist, git mirrors, and a
    # folder of PyTorch test files with a .commit file beside each)
    scripts/upstream_tests.py extract DIR --transformers-sdist T.tar.gz \\
        --transformers-git GITDIR --diffusers-git GITDIR --pytorch-files D
    # every time (make test-upstream UPSTREAM_TESTS=DIR)
    scripts/upstream_tests.py run DIR [--only SUITE[:FILE]] [--timeout S]

Each file runs twice, on cpu and on tpu, in child interpreters of its own.
A pytest plugin (upstream_plugin.py, beside this script) writes every
test's start and outcome to a log as it happens, so a child that crashes or
hangs (each test gets --timeout seconds, then the child is ended) is
recorded against the test it was running, and the file resumes after that
test in a new child. The report compares, per file, the tests that passed
on cpu with what they did on tpu; failures are grouped by exception and
message. A test classified in tests/upstream/skiplist.txt (one reason per
entry; it asserts something no non-CUDA accelerator can do, or CPU-only
behaviour) is counted as classified, not as passed, and every run prints
the list. The tpu run of a file starts with an empty compile cache (what a
first run costs), or with --warm one kept across files and runs (DIR/.tpuc-cache;
run twice, the second run is what rerunning a file costs): a warm run's
row goes under "warm" in the report, beside the file's cold one.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "tests" / "upstream" / "report.json"
SKIPLIST = ROOT / "tests" / "upstream" / "skiplist.txt"

# What runs: suite -> (folder under DIR, files, how the device is chosen).
# The five files issue 17 names, then more architectures (encoders,
# decoders with generation, encoder-decoders, vision, vision-text, speech).
TRANSFORMERS_MODELS = ["bert", "gpt2", "llama", "t5", "vit",
                       "distilbert", "roberta", "deberta_v2", "clip", "resnet", "mistral", "bart",
                       "whisper", "qwen2", "qwen3", "gemma", "mixtral"]
SUITES = {
    "transformers": [f"tests/models/{m}/test_modeling_{m}.py" for m in TRANSFORMERS_MODELS],
    "pytorch": ["test/test_view_ops.py", "test/test_indexing.py", "test/test_shape_ops.py"],
    "diffusers": [
        "tests/models/unets/test_models_unet_2d.py",
        "tests/pipelines/ddpm/test_ddpm.py",
        "tests/pipelines/ddim/test_ddim.py",
    ],
}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# extract


def git_ls(gitdir, rev, paths, recursive=False):
    """The paths `git ls-tree` lists under `paths` at `rev` of a bare repo."""
    cmd = ["git", "--git-dir", gitdir, "ls-tree", *(["-r"] if recursive else []), "--name-only", rev, "--", *paths]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()


def git_files(gitdir, rev, paths):
    """{path: bytes} of every file under `paths` at `rev` of a bare repo."""
    out = git_ls(gitdir, rev, paths, recursive=True)
    files = {}
    for p in out:
        files[p] = subprocess.run(["git", "--git-dir", gitdir, "show", f"{rev}:{p}"], check=True, capture_output=True).stdout
    return files


def git_commit(gitdir, rev):
    return subprocess.run(["git", "--git-dir", gitdir, "rev-parse", rev], check=True, capture_output=True, text=True).stdout.strip()


def extract(args):
    dest = Path(args.dest).resolve()
    if (ROOT / ".git").exists() and str(dest).startswith(str(ROOT) + os.sep):
        sys.exit(f"{dest} is inside the repository: extract other projects' tests outside git")
    prov = {"files": {}}

    def put(rel, data, source):
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        prov["files"][rel] = dict(source, sha256=sha256(data))

    if args.transformers_git or args.transformers_sdist:
        # The repository's tests (models, generation, utils, the root
        # conftest and the top-level helpers), then the sdist's top-level
        # tests/*.py over them: the released version where it has the file.
        if args.transformers_git:
            rev = args.transformers_rev
            commit = git_commit(args.transformers_git, rev)
            src = {"from": args.transformers_repo, "commit": commit}
            # Everything under tests/ but the other models' folders (the
            # common mixins import the pipeline, exporter and generation
            # tests), the root conftest, and the helper it imports.
            paths = ["conftest.py", "utils/fetch_hub_objects_for_ci.py", "utils/test_module", "tests/models/__init__.py"]
            paths += [f"tests/models/{m}" for m in TRANSFORMERS_MODELS]
            top = git_ls(args.transformers_git, rev, ["tests/"])
            paths += [p for p in top if p != "tests/models"]
            for rel, data in git_files(args.transformers_git, rev, paths).items():
                put(f"transformers/{rel}", data, src)
            prov["transformers_git"] = src
        if args.transformers_sdist:
            name = Path(args.transformers_sdist).name
            src = {"from": f"PyPI sdist {name}", "sha256_of_archive": sha256(Path(args.transformers_sdist).read_bytes())}
            with tarfile.open(args.transformers_sdist) as tf:
                for m in tf.getmembers():
                    parts = m.name.split("/")
                    if m.isfile() and len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py"):
                        put(f"transformers/tests/{parts[2]}", tf.extractfile(m).read(), src)
            prov["transformers_sdist"] = src
    if args.diffusers_git:
        rev = args.diffusers_rev
        commit = git_commit(args.diffusers_git, rev)
        src = {"from": args.diffusers_repo, "commit": commit}
        # Everything under tests/ but the other pipelines' folders.
        top = git_ls(args.diffusers_git, rev, ["tests/", "tests/pipelines/"])
        paths = [p for p in top if p != "tests/pipelines" and (not p.startswith("tests/pipelines/") or p.endswith(".py"))]
        paths += ["tests/pipelines/ddpm", "tests/pipelines/ddim"]
        for rel, data in git_files(args.diffusers_git, rev, paths).items():
            put(f"diffusers/{rel}", data, src)
        prov["diffusers_git"] = src
    if args.pytorch_files:
        for f in sorted(Path(args.pytorch_files).glob("*.py")):
            commit_file = f.with_name(f.name + ".commit")
            if not commit_file.exists():
                sys.exit(f"{f}: no {commit_file.name} beside it (the pytorch/pytorch commit it came from)")
            src = {"from": "github.com/pytorch/pytorch", "commit": commit_file.read_text().strip(), "path": f"test/{f.name}"}
            put(f"pytorch/test/{f.name}", f.read_bytes(), src)
    old = dest / "provenance.json"
    if old.exists():  # extraction in several calls keeps what came before
        before = json.loads(old.read_text())
        before["files"].update(prov.pop("files"))
        before.update(prov)
        prov = before
    old.write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    print(f"extracted {len(prov['files'])} files into {dest} (provenance.json)")


# ---------------------------------------------------------------------------
# run


def load_skiplist():
    """[(suite, [(on, regex), ...], reason)] from tests/upstream/skiplist.txt:
    `suite | regex | reason`, where the regex matches the test's node id, or
    with a `msg:` prefix its outcome on tpu ("Exception: message"); several
    joined by ` && ` must all match; '#' starts a comment line."""
    out = []
    for ln in SKIPLIST.read_text().splitlines():
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        suite, pats, reason = (x.strip() for x in ln.split("|", 2))
        conds = []
        for pat in pats.split(" && "):
            on = "msg" if pat.startswith("msg:") else "id"
            conds.append((on, re.compile(pat[4:] if on == "msg" else pat)))
        out.append((suite, conds, reason))
    return out


def classified(skiplist, suite, nodeid, said):
    """The reason of the first skip-list entry that the test (its node id
    and its outcome on tpu) matches, else None."""
    for s, conds, why in skiplist:
        if s == suite and all(p.search(said if on == "msg" else nodeid) for on, p in conds):
            return why
    return None


def device_env(suite, device):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "scripts"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TPUC_FALLBACK"] = "silent"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    if suite == "transformers":
        env["TRANSFORMERS_TEST_DEVICE"] = device
    elif suite == "diffusers":
        env["DIFFUSERS_TEST_DEVICE"] = device
    elif suite == "pytorch":
        # The device-type machinery names the PrivateUse1 classes by the
        # key (TestFooPRIVATEUSE1) and filters on it.
        env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1" if device == "tpu" else device
    if device == "cpu":
        # The baseline without the device: nothing of tpuc is loaded.
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return env


def run_file(base, suite, rel, device, timeout, logdir, select=None, cache_dir=None):
    """Runs one file on one device until every test has an outcome; returns
    {nodeid: record} and the seconds it took. `cache_dir`: tpuc's compile
    cache folder for the run."""
    cwd = base / suite
    log = logdir / f"{suite}-{rel.replace('/', '_')}-{device}.jsonl"
    log.unlink(missing_ok=True)
    results = {}
    t0 = time.monotonic()
    for attempt in range(500):
        skip = log.with_suffix(".skip")
        skip.write_text("\n".join(list(results)))
        cmd = [sys.executable, "-m", "pytest", rel, "-p", "upstream_plugin", "-p", "no:cacheprovider", "-q", "-rN", "--tb=no", "-o", "addopts=", "--rootdir", str(cwd), "-W", "ignore"]
        if select:
            cmd += ["-k", select]
        env = device_env(suite, device)
        if cache_dir is not None:
            env["TPUC_CACHE_DIR"] = str(cache_dir)
        env["UPSTREAM_LOG"] = str(log)
        env["UPSTREAM_SKIP"] = str(skip)
        env["UPSTREAM_TIMEOUT"] = str(timeout)
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        started, finished_all = None, False
        for ln in log.read_text().splitlines() if log.exists() else []:
            r = json.loads(ln)
            if "start" in r:
                started = r
            elif "nodeid" in r:
                results[r["nodeid"]] = r
                if started and started["start"] == r["nodeid"]:
                    started = None
            elif r.get("session_finished"):
                finished_all = True
        log.unlink(missing_ok=True)
        if started is not None and started["start"] not in results:
            hung = time.time() - started["t"] >= timeout - 1
            results[started["start"]] = {"nodeid": started["start"], "outcome": "hung" if hung else "crashed", "exc": "Timeout" if hung else f"interpreter ended ({p.returncode})", "msg": f"no outcome after {timeout} s" if hung else tail(p.stdout), "seconds": time.time() - started["t"]}
            continue  # resume after it
        if not finished_all and p.returncode not in (0, 1, 5):
            # Ended between tests, or at interpreter exit after the last one.
            results[f"{rel}::<interpreter exit>"] = {"nodeid": f"{rel}::<interpreter exit>", "outcome": "crashed", "exc": f"interpreter ended ({p.returncode})", "msg": tail(p.stdout), "seconds": 0.0}
        if not results and p.returncode not in (0, 1, 5):
            raise SystemExit(f"{suite} {rel} on {device}: pytest ended with {p.returncode} before any test:\n{tail(p.stdout, 3000)}")
        break
    return results, time.monotonic() - t0


def tail(text, n=600):
    text = (text or "").strip()
    return text[-n:]


def norm_msg(msg):
    """A failure message with its numbers and addresses blanked, so one
    cause groups as one."""
    msg = (msg or "").strip().splitlines()[0] if msg else ""
    msg = re.sub(r"0x[0-9a-f]+", "0x…", msg)
    msg = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", msg)
    return msg[:200]


def same_test(suite, nodeid):
    """The name a test has on both devices: PyTorch's device-type classes
    are TestFooCPU / TestFooPRIVATEUSE1 and their tests test_bar_cpu /
    test_bar_tpu."""
    if suite != "pytorch":
        return nodeid
    nodeid = re.sub(r"(CPU|PRIVATEUSE1|TPU)::", "DEVICE::", nodeid, count=1)
    return re.sub(r"(::test\w*?)_(cpu|tpu)(_|$|\[)", r"\1_DEVICE\3", nodeid, count=1)


def compare(suite, rel, cpu, tpu, skiplist):
    cpu = {same_test(suite, n): r for n, r in cpu.items()}
    tpu = {same_test(suite, n): r for n, r in tpu.items()}
    passed_cpu = sorted(n for n, r in cpu.items() if r["outcome"] == "passed")
    row = {"passed_cpu": len(passed_cpu), "passed_tpu": 0, "failed": 0, "errored": 0, "skipped_tpu_only": 0, "crashed": 0, "hung": 0, "classified": 0, "failures": {}, "classified_tests": {}}
    for n in passed_cpu:
        r = tpu.get(n, {"outcome": "missing", "exc": "NotRun", "msg": "not collected on tpu"})
        o = r["outcome"]
        if o == "passed":
            row["passed_tpu"] += 1
            continue
        said = f"{r.get('exc', o)}: {r.get('msg', '')}"
        reason = classified(skiplist, suite, n, said)
        if reason is not None:
            row["classified"] += 1
            row["classified_tests"][n] = reason
            continue
        key = {"failed": "failed", "error": "errored", "skipped": "skipped_tpu_only", "crashed": "crashed", "hung": "hung"}.get(o, "failed")
        row[key] += 1
        group = f"{r.get('exc', o)}: {norm_msg(r.get('msg', ''))}"
        row["failures"].setdefault(group, []).append(n)
    # Crashes on tpu outside the cpu-passing set count too (no test may end
    # the interpreter).
    for n, r in tpu.items():
        if r["outcome"] in ("crashed", "hung") and n not in passed_cpu:
            row[r["outcome"]] += 1
            row["failures"].setdefault(f"{r['exc']}: {norm_msg(r.get('msg', ''))}", []).append(n)
    row["pass_rate"] = round(100.0 * row["passed_tpu"] / row["passed_cpu"], 2) if row["passed_cpu"] else None
    row["pass_rate_applicable"] = applicable_rate(row)
    return row


def applicable_rate(row):
    """The pass rate over the tests that can pass on a non-CUDA accelerator:
    those passing on cpu less the classified ones (skip list)."""
    n = row["passed_cpu"] - row["classified"]
    return round(100.0 * row["passed_tpu"] / n, 2) if n > 0 else None


def run(args):
    base = Path(args.dir).resolve()
    prov_file = base / "provenance.json"
    if not prov_file.exists():
        sys.exit(f"{base}: no provenance.json; run `scripts/upstream_tests.py extract` first (see the README)")
    prov = json.loads(prov_file.read_text())
    skiplist = load_skiplist()
    print(f"skip list ({SKIPLIST.relative_to(ROOT)}): {len(skiplist)} classified entries")
    for s, conds, why in skiplist:
        pats = " && ".join(f"{'msg:' if on == 'msg' else ''}{p.pattern}" for on, p in conds)
        print(f"  {s}: {pats} -- {why}")
    # transformers' pipeline tests import the package from the checkout's
    # src/: that is the installed package here.
    src = base / "transformers" / "src" / "transformers"
    if (base / "transformers").exists() and not src.exists():
        import importlib.util

        src.parent.mkdir(exist_ok=True)
        src.symlink_to(Path(importlib.util.find_spec("transformers").origin).parent)
    logdir = base / ".logs"
    logdir.mkdir(exist_ok=True)
    report = json.loads(REPORT.read_text()) if REPORT.exists() and args.only else {"files": {}}
    import torch  # versions for the report

    import transformers

    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0]}
    try:
        import diffusers

        versions["diffusers"] = diffusers.__version__
    except ImportError:
        pass
    written = {}
    for suite, files in SUITES.items():
        for rel in files:
            key = f"{suite}:{rel}"
            if args.only and not any(key == o or (":" not in o and suite == o) for o in args.only):
                continue
            if not (base / suite / rel).exists():
                print(f"{key}: not extracted, left out")
                continue
            print(f"{key}: cpu ...", flush=True)
            cpu, tc = run_file(base, suite, rel, "cpu", args.timeout, logdir, args.select)
            # Cold: an empty compile cache for the file (its child
            # interpreters share it, as a user's processes share theirs);
            # warm: one folder kept across files and runs.
            cache = base / ".tpuc-cache" if args.warm else Path(tempfile.mkdtemp(prefix="tpuc-upstream-"))
            print(f"{key}: tpu ({'warm' if args.warm else 'cold'} compile cache) ...", flush=True)
            try:
                tpu, tt = run_file(base, suite, rel, "tpu", args.timeout, logdir, args.select, cache)
            finally:
                if not args.warm:
                    shutil.rmtree(cache, ignore_errors=True)
            for dev, res in (("cpu", cpu), ("tpu", tpu)):
                (logdir / f"{suite}-{rel.replace('/', '_')}-{dev}.json").write_text(json.dumps(res, indent=1))
            row = compare(suite, rel, cpu, tpu, skiplist)
            row["seconds_cpu"] = round(tc, 1)
            row["seconds_tpu"] = round(tt, 1)
            row["time_ratio"] = round(tt / tc, 2) if tc else None
            row["tests_cpu"] = len(cpu)
            row["tests_tpu"] = len(tpu)
            row["files"] = {k: v for k, v in prov["files"].items() if k == f"{suite}/{rel}"}
            row["select"] = args.select  # a -k expression the run was limited to
            row["eager_mode"] = os.environ.get("TPUC_EAGER_MODE", "fused")
            row["compile_cache"] = "warm" if args.warm else "cold"
            # Other runs may have written rows since this one started: only
            # the rows this run made replace what the file holds now.
            # A run with a warm cache is recorded beside the file's first
            # (cold) run, not over it: both costs are part of the answer.
            part = "warm" if args.warm else "files"
            written[key] = row
            if REPORT.exists() and args.only:
                now = json.loads(REPORT.read_text())
                report["files"], report["warm"] = now["files"], now.get("warm", {})
            report.setdefault(part, {}).update(written)
            print_row(key, row)
            report["versions"] = versions
            # (each extract folder holds some suites: merge, do not replace)
            report.setdefault("provenance", {}).update({k: v for k, v in prov.items() if k != "files"})
            report["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            REPORT.parent.mkdir(parents=True, exist_ok=True)
            REPORT.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    table(report)


def print_row(key, r):
    print(f"{key}: {r['passed_tpu']}/{r['passed_cpu']} ({r['pass_rate']} %), failed {r['failed']}, errored {r['errored']}, skipped on tpu only {r['skipped_tpu_only']}, crashed {r['crashed']}, hung {r['hung']}, classified {r['classified']}; {r['seconds_tpu']} s against {r['seconds_cpu']} s on cpu ({r['time_ratio']}x)", flush=True)


def table(report):
    print()
    warm = report.get("warm", {})
    print("| file | passed on cpu | of those on tpu | rate | failed | errored | skipped on tpu only | crashed / hung | classified | rate less classified | tpu/cpu time | with a warm cache |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, r in sorted(report["files"].items()):
        w = f"{warm[key]['time_ratio']}x" if key in warm else "not run"
        print(f"| {key} | {r['passed_cpu']} | {r['passed_tpu']} | {r['pass_rate']} % | {r['failed']} | {r['errored']} | {r['skipped_tpu_only']} | {r['crashed']} / {r['hung']} | {r['classified']} | {applicable_rate(r)} % | {r['time_ratio']}x | {w} |")
    for key, r in sorted(report["files"].items()):
        for group, tests in sorted(r["failures"].items(), key=lambda kv: -len(kv[1])):
            print(f"  {key}: {len(tests)} x {group}")
    for key, r in sorted(warm.items()):
        print(f"  {key}, warm cache: {r['passed_tpu']}/{r['passed_cpu']} passed, {r['seconds_tpu']} s against {r['seconds_cpu']} s on cpu")
        for group, tests in sorted(r["failures"].items(), key=lambda kv: -len(kv[1])):
            print(f"  {key}, warm cache: {len(tests)} x {group}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="copy the test files into DIR, with provenance.json")
    e.add_argument("dest")
    e.add_argument("--transformers-sdist", help="transformers-X.tar.gz (pip download --no-binary :all: --no-deps transformers==X)")
    e.add_argument("--transformers-git", help="a bare clone of huggingface/transformers (or an unmodified mirror)")
    e.add_argument("--transformers-rev", default="HEAD")
    e.add_argument("--transformers-repo", default="github.com/jiqing-feng/transformers (an unmodified mirror of huggingface/transformers' main branch)")
    e.add_argument("--diffusers-git", help="a bare clone of huggingface/diffusers")
    e.add_argument("--diffusers-rev", default="HEAD")
    e.add_argument("--diffusers-repo", default="github.com/huggingface/diffusers")
    e.add_argument("--pytorch-files", help="a folder of pytorch/pytorch test/*.py files, each with NAME.commit beside it")
    r = sub.add_parser("run", help="run the extracted files on cpu and tpu, write tests/upstream/report.json")
    r.add_argument("dir")
    r.add_argument("--only", nargs="*", help="SUITE or SUITE:FILE (the report keeps the other files' rows)")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds a test may take before it counts as hung")
    r.add_argument("--select", help="a pytest -k expression limiting the run (recorded in the report)")
    r.add_argument("--warm", action="store_true",
                   help="keep tpuc's compile cache in DIR/.tpuc-cache across files and runs "
                        "(default: an empty one per file, what a first run costs; recorded in the report)")
    t = sub.add_parser("table", help="print the committed report's table")
    args = ap.parse_args()
    if args.cmd == "extract":
        extract(args)
    elif args.cmd == "run":
        run(args)
    else:
        table(json.loads(REPORT.read_text()))


if __name__ == "__main__":
    main()
