"""pytest plugin of scripts/upstream_tests.py (loaded with -p upstream_plugin).

Writes each test's start and outcome to $UPSTREAM_LOG as JSON lines, as
they happen, so the runner knows which test a crashed or hung interpreter
was running; leaves out the tests named in $UPSTREAM_SKIP (those that
already have an outcome, when a file resumes after a crash); and ends the
interpreter when one test runs past $UPSTREAM_TIMEOUT seconds."""

import faulthandler
import json
import os
import sys
import time

_log = None
_outcomes = {}


def _write(rec):
    _log.write(json.dumps(rec) + "\n")
    _log.flush()


def pytest_configure(config):
    global _log
    _log = open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8")


def pytest_collection_modifyitems(session, config, items):
    path = os.environ.get("UPSTREAM_SKIP")
    done = set(open(path).read().split("\n")) if path and os.path.exists(path) else set()
    if done:
        keep = [it for it in items if it.nodeid not in done]
        config.hook.pytest_deselected(items=[it for it in items if it.nodeid in done])
        items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    _write({"start": nodeid, "t": time.time()})
    faulthandler.dump_traceback_later(float(os.environ.get("UPSTREAM_TIMEOUT", "300")), exit=True, file=sys.stderr)
    _outcomes[nodeid] = {"nodeid": nodeid, "outcome": "passed", "t0": time.monotonic()}


def _exc(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        msg = crash.message or ""
        exc, _, rest = msg.partition(":")
        if exc and " " not in exc.strip() and rest:
            return exc.strip(), rest.strip()
        return "AssertionError" if msg.startswith("assert") else "Error", msg
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return "Skipped", str(report.longrepr[2])
    return "Error", str(report.longrepr)[-400:]


def pytest_runtest_logreport(report):
    r = _outcomes.get(report.nodeid)
    if r is None:
        return
    if report.when == "call" and hasattr(report, "wasxfail"):
        r["outcome"] = "xfailed" if report.skipped else "xpassed"
    elif report.skipped and r["outcome"] == "passed":
        r["outcome"] = "skipped"
        r["exc"], r["msg"] = _exc(report)
    elif report.failed and r["outcome"] in ("passed", "skipped"):
        r["outcome"] = "failed" if report.when == "call" else "error"
        r["exc"], r["msg"] = _exc(report)


def pytest_runtest_logfinish(nodeid, location):
    faulthandler.cancel_dump_traceback_later()
    r = _outcomes.pop(nodeid, None)
    if r is not None:
        r["seconds"] = round(time.monotonic() - r.pop("t0"), 3)
        if "msg" in r:
            r["msg"] = r["msg"][:600]
        _write(r)


def pytest_sessionfinish(session, exitstatus):
    _write({"session_finished": True, "status": int(exitstatus)})
