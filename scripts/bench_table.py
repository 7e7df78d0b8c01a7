#!/usr/bin/env python3
"""Prints the figures of every benchmark result as one table.

Reads bench/results/*.json (or the directory / files given as arguments).
Every numeric value, at any depth, becomes one row named by its key path
(e.g. ``results.matmul_512.ms``); string values that describe where the
figures come from (machine, plugin, versions, ...) are printed above each
file's rows. Standard library only.
"""

import json
import math
import os
import sys
from pathlib import Path

# A string whose key path contains one of these words describes the setup.
CONTEXT_WORDS = ("machine", "host", "cpu", "device", "plugin", "version",
                 "platform", "compiler", "commit", "date", "time", "name")


def walk(value, path=()):
    """Yields (key path tuple, leaf value) for every leaf of a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, path + (str(key),))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, path + (str(index),))
    else:
        yield path, value


# Key paths with one of these words hold details (model configs, stats
# dumps) rather than the benchmark's figures; the JSON keeps them.
DETAIL_WORDS = ("config", "fused_stats", "cache_stats", "load_avg", "details",
                "summary", "fused_log")


def is_detail(path):
    joined = ".".join(path).lower()
    return any(word in joined for word in DETAIL_WORDS)


def is_figure(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_context(path):
    joined = ".".join(path).lower()
    return any(word in joined for word in CONTEXT_WORDS)


def format_number(value):
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        return f"{value:.4g}"
    return f"{value:.4f}".rstrip("0").rstrip(".")


def result_files(args):
    if not args:
        args = [str(Path(__file__).resolve().parent.parent / "bench" /
                    "results")]
    files = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        else:
            files.append(path)
    return files


def print_table(rows, headers):
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line.rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1])]
        cells.append(row[-1].rjust(widths[-1]))
        print("  ".join(cells))


def main(argv):
    files = result_files(argv[1:])
    if not files:
        print("bench_table: no results (bench/results/*.json)")
        return 0
    rows = []
    status = 0
    for path in files:
        name = os.path.basename(str(path))
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as error:
            print(f"bench_table: {path}: {error}", file=sys.stderr)
            status = 1
            continue
        context = []
        for key_path, value in walk(data):
            key = ".".join(key_path) or "(value)"
            if is_detail(key_path):
                continue
            if is_figure(value):
                rows.append((name, key, format_number(value)))
            elif isinstance(value, str) and is_context(key_path):
                context.append(f"{key}={value}")
        if context:
            print(f"{name}: " + "; ".join(context))
    if rows:
        print()
        print_table(rows, ("file", "figure", "value"))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
