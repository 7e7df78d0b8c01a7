"""Device benchmark (not a test): per-op dispatch overhead of a cached op on
tiny tensors, a small MLP training step and a tiny GPT-2 forward, on tpu and
on PyTorch's CPU, in one run. Writes bench/results/device.json (or
$TPUC_BENCH_RESULTS_DIR) and prints the figures."""

import json
import os
import platform
import statistics
import time
import warnings

import torch

import tpuc

warnings.filterwarnings("ignore", message="tpu:.*has no native lowering")


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def timed(fn, device, repeat, rounds=7):
    """Median over rounds of the mean time of `repeat` calls, in seconds."""
    fn()
    sync(device)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        sync(device)
        times.append((time.perf_counter() - t0) / repeat)
    return statistics.median(times)


def dispatch(device):
    x = torch.randn(4, device=device)
    y = torch.randn(4, device=device)
    return timed(lambda: torch.add(x, y), device, 2000)


def mlp_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, device=device)
    y = torch.randint(0, 10, (32,), device=device)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return timed(step, device, 5, rounds=5)


def gpt2_forward(device):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4,
                                  n_positions=64)
    model = transformers.GPT2LMHeadModel(cfg).eval().to(device)
    ids = torch.randint(0, 256, (1, 32), device=device)

    def fwd():
        with torch.no_grad():
            return model(input_ids=ids).logits

    return timed(fwd, device, 3, rounds=5)


def machine():
    """"<OS> <arch>, <CPU model>, <n> cores" (also used by bench_eager)."""
    cpu_model = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{platform.system()} {platform.machine()}, {cpu_model}, "
            f"{os.cpu_count()} cores")


def report_head(benchmark):
    """The fields every benchmark's JSON starts with: its name, the date,
    the machine and the tpu device."""
    props = torch.tpu.get_device_properties(0)
    return {
        "benchmark": benchmark,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "device": f"{props.platform}: {props.name}",
    }


def cpu_peak_bytes(fn):
    """Peak of live CPU tensor memory during fn(), from the profiler: each
    op's net allocation (self_cpu_memory_usage, innermost op) and the frees
    outside ops ("[memory]" events), summed in time order. Allocations and
    frees inside one op are netted, so this is a lower bound of the true
    peak."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage),
                    key=lambda e: e.time_range.start)
    live = peak = 0
    for e in events:
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


def main():
    results = {}
    default_mode = torch.tpu.get_eager_mode()
    # The figures named *_tpu are the default eager mode's; each mode's
    # figure is also given.
    for name, fn, scale in [("dispatch_us", dispatch, 1e6),
                            ("mlp_step_ms", mlp_step, 1e3),
                            ("gpt2_tiny_forward_ms", gpt2_forward, 1e3)]:
        for mode in ("debug", "strict", "fused"):
            torch.tpu.set_eager_mode(mode)
            results[f"{name}_tpu_{mode}"] = round(fn("tpu") * scale, 3)
        torch.tpu.set_eager_mode(default_mode)
        results[f"{name}_tpu"] = results[f"{name}_tpu_{default_mode}"]
        results[f"{name}_cpu"] = round(fn("cpu") * scale, 3)
    torch.tpu.reset_peak_memory_stats()
    before = torch.tpu.memory_allocated()
    mlp_step("tpu")
    torch.tpu.synchronize()
    results["mlp_peak_device_bytes_tpu"] = torch.tpu.max_memory_allocated() - before
    results["mlp_peak_bytes_cpu"] = cpu_peak_bytes(lambda: mlp_step("cpu"))
    props = torch.tpu.get_device_properties(0)
    report = {
        "benchmark": "device",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "device": f"{props.platform}: {props.name}",
        "plugin": f"{props.plugin_package} (PJRT C API {props.pjrt_api}, "
                  f"StableHLO {props.stablehlo})",
        "plugin_version": props.plugin_version,
        "torch": torch.__version__,
        "fallback_ops": len(tpuc.fallback_report()),
        "eager_mode": default_mode,
        **results,
        "targets": {"dispatch_ratio_max": 3},
    }
    out_dir = os.environ.get("TPUC_BENCH_RESULTS_DIR",
                             os.path.join(os.path.dirname(__file__), "results"))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "device.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"bench_device ({report['machine']}; {report['plugin']}; torch {torch.__version__})")
    for k, v in results.items():
        print(f"  {k:32s} {v}")
    print(f"  dispatch tpu/cpu ratio            {results['dispatch_us_tpu'] / results['dispatch_us_cpu']:.1f} "
          f"(default mode {default_mode}; target <= 3)")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
