"""torch.distributed benchmark (not a test): the `tpu` c10d backend.

- Bus bandwidth of all_reduce, all_gather_into_tensor and
  reduce_scatter_tensor on 2 ranks, for 1 KiB ... 256 MiB (the size of the
  large buffer: the all_reduce tensor, the all_gather output, the
  reduce_scatter input), as nccl-tests reports it (algorithm bandwidth
  bytes / time, times 2(n-1)/n for all_reduce and (n-1)/n for the others):
    * tpu, one process per rank: staged through the host over Gloo;
    * Gloo on CPU tensors of the same size, in the same processes (the same
      engine without the device);
    * tpu, 2 ranks as threads of one process on two of the CPU plugin's
      devices: in-program collectives (one XLA program across the devices).
  Each figure is the median of rounds of `iters` calls, each call waited
  for (the tensor's value on the device, or Gloo's work).
- DDP and FSDP2 training steps of GPT-2 (12 layers, 768 wide, vocabulary
  8192, batch 1 x 128 per rank, f32, AdamW) on 2 ranks against one rank
  training alone with the same per-rank batch, each process pinned to its
  own core (taskset), so compute is the same and only communication
  differs: cost = 2-rank step / 1-rank step - 1.
- DDP training steps of the same GPT-2 on 2 ranks as threads of one
  process (in-program collectives), with each bucket's all_reduce run with
  the backward ops recorded before it as one program across the ranks
  (fused mode's group segments) and with it alone after a cut
  (TPUC_FUSED_COLLECTIVES=0).

Writes distributed.json and distributed.png to $TPUC_BENCH_RESULTS_DIR or
bench/results and prints a table.

  python bench/bench_distributed.py [--quick] [--no-training] [--sizes a,b]
  (children: --collectives-rank, --collectives-threads, --train-rank,
  --train-threads)
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import torch

import tpuc  # noqa: F401  (registers the tpu device)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_device import machine  # noqa: E402

KIB = 1024
SIZES = [KIB * 4**k for k in range(10)]  # 1 KiB ... 256 MiB
OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
TARGETS = {
    "staged_all_reduce_vs_gloo_min_from_1MiB": 0.8,
    "in_program_all_reduce_vs_gloo_min": 1.0,
    "ddp_communication_cost_max": 0.15,
}


def bus_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def iters_for(nbytes):
    if nbytes <= 256 * KIB:
        return 20
    if nbytes <= 4 * 1024 * KIB:
        return 8
    return 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------- collectives


def one_collective(op, nbytes, device, n):
    """(call, wait) for `op` with a large buffer of `nbytes` on `device`."""
    import torch.distributed as dist

    count = nbytes // 4
    part = max(count // n, 1)
    if op == "all_reduce":
        t = torch.zeros(count, device=device)

        def call():
            dist.all_reduce(t)

    elif op == "all_gather_into_tensor":
        out = torch.zeros(part * n, device=device)
        inp = torch.zeros(part, device=device)

        def call():
            dist.all_gather_into_tensor(out, inp)

    else:
        out = torch.zeros(part, device=device)
        inp = torch.zeros(part * n, device=device)

        def call():
            dist.reduce_scatter_tensor(out, inp)

    def wait():
        if device != "cpu":
            torch.tpu.synchronize()

    return call, wait


def measure(op, nbytes, device, n, rounds):
    import torch.distributed as dist

    call, wait = one_collective(op, nbytes, device, n)
    call()  # warm-up (programs, connections)
    call()
    wait()
    times = []
    iters = iters_for(nbytes)
    for _ in range(rounds):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        wait()
        times.append((time.perf_counter() - t0) / iters)
    sec = statistics.median(times)
    algbw = nbytes / sec / 1e9
    return {"us": sec * 1e6, "algbw_GBps": algbw, "busbw_GBps": algbw * bus_factor(op, n)}


def collectives_rank(args):
    """A process of the 2-process run: every op and size, on tpu (staged)
    and on CPU tensors through Gloo."""
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.tpu.set_device(rank % torch.tpu.device_count())
    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=timedelta(minutes=10))
    n = dist.get_world_size()
    out = {"tpu_staged": {}, "gloo_cpu": {}}
    for op in OPS:
        for key, device in (("tpu_staged", "tpu"), ("gloo_cpu", "cpu")):
            out[key][op] = {str(s): measure(op, s, device, n, args.rounds) for s in args.sizes}
    dist.destroy_process_group()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(out, f)


def collectives_threads(args):
    """2 ranks as threads of this process, one CPU-plugin device each: the
    collectives compile into one program across the devices."""
    import tpuc.distributed

    def rank_fn(rank):
        import torch.distributed as dist

        n = dist.get_world_size()
        be = dist.distributed_c10d._get_default_group()._get_backend(torch.device("tpu"))
        assert be.in_program, "the ranks did not get in-program collectives"
        res = {op: {str(s): measure(op, s, "tpu", n, args.rounds) for s in args.sizes} for op in OPS}
        return res if rank == 0 else None

    res = tpuc.distributed.run_threads(rank_fn, 2, timeout=timedelta(minutes=10))
    with open(args.out, "w") as f:
        json.dump({"tpu_in_program": res[0]}, f)


def run_collectives(args, sizes):
    out = {}
    with tempfile.TemporaryDirectory() as d:
        port = str(free_port())
        path = os.path.join(d, "procs.json")
        procs = []
        for r in range(2):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, GLOO_SOCKET_IFNAME="lo")
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--collectives-rank", "--out", path,
                 "--sizes", ",".join(map(str, sizes)), "--rounds", str(args.rounds)], env=env))
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError("a collectives process failed")
        with open(path) as f:
            out.update(json.load(f))
        path = os.path.join(d, "threads.json")
        subprocess.run(
            [sys.executable, __file__, "--collectives-threads", "--out", path,
             "--sizes", ",".join(map(str, sizes)), "--rounds", str(args.rounds)],
            check=True, env=dict(os.environ, GLOO_SOCKET_IFNAME="lo"))
        with open(path) as f:
            out.update(json.load(f))
    return out


# ---------------------------------------------------------------- training


def train_rank(args):
    """One process of a training run: steady step time (median) after the
    warm-up steps, on its own core."""
    import torch.distributed as dist

    import bench_eager

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.tpu.set_device(rank % torch.tpu.device_count())
    model = bench_eager.build_model(args.model).to("tpu")
    model.config.use_cache = False
    if world > 1:
        dist.init_process_group("tpu", timeout=timedelta(minutes=20))
        if args.mode == "ddp":
            model = torch.nn.parallel.DistributedDataParallel(model)
        else:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh("tpu", (world,))
            for block in model.transformer.h:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=bench_eager.LR)
    ids = bench_eager.input_ids().to("tpu")
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        loss.item()  # the step is done (and, with DDP, its gradients averaged)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    if world > 1:
        dist.destroy_process_group()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"step_ms": statistics.median(times) * 1e3, "steps_ms": [t * 1e3 for t in times]}, f)


def train_threads(args):
    """DDP on 2 ranks as threads of this process (in-program collectives):
    steady step time, with each bucket's all_reduce run with the backward
    ops recorded before it as one program across the ranks (fused mode's
    group segments), or alone after a cut (TPUC_FUSED_COLLECTIVES=0, set
    by the parent)."""
    import torch.distributed as dist

    import bench_eager
    import tpuc.distributed
    import transformers

    # Resolved here: transformers' lazy imports race when several threads
    # touch them first.
    transformers.GPT2LMHeadModel, transformers.GPT2Config, transformers.LlamaForCausalLM  # noqa: B018

    def rank_fn(rank):
        torch.manual_seed(0)
        model = bench_eager.build_model(args.model).to("tpu")
        model.config.use_cache = False
        model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(model.parameters(), lr=bench_eager.LR)
        ids = bench_eager.input_ids().to("tpu")
        times = []
        for step in range(args.warmup + args.steps):
            dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            loss.item()
            dist.barrier()
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
        return times

    before = torch.tpu.fused_stats()["group_segments"]
    res = tpuc.distributed.run_threads(rank_fn, 2, timeout=timedelta(minutes=20))
    group = torch.tpu.fused_stats()["group_segments"] - before
    with open(args.out, "w") as f:
        json.dump({"step_ms": statistics.median(res[0]) * 1e3, "steps_ms": [t * 1e3 for t in res[0]],
                   "group_segments": group}, f)


def run_training_threads(args, fused_collectives):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "threads.json")
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", TPUC_FUSED_COLLECTIVES="1" if fused_collectives else "0")
        subprocess.run([sys.executable, __file__, "--train-threads", "--out", path, "--model", args.model,
                        "--steps", str(args.steps), "--warmup", str(args.warmup)], check=True, env=env)
        with open(path) as f:
            return json.load(f)


def run_training(args, mode, world):
    taskset = "taskset" if subprocess.run(["which", "taskset"], capture_output=True).returncode == 0 else None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "train.json")
        port = str(free_port())
        procs = []
        for r in range(world):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
            cmd = [sys.executable, __file__, "--train-rank", "--out", path, "--mode", mode,
                   "--model", args.model, "--steps", str(args.steps), "--warmup", str(args.warmup)]
            if taskset:
                cmd = [taskset, "-c", str(r % os.cpu_count())] + cmd
            procs.append(subprocess.Popen(cmd, env=env))
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError(f"a {mode} training process failed")
        with open(path) as f:
            res = json.load(f)
    res["pinned"] = bool(taskset)
    return res


# ------------------------------------------------------------------ report


def plot(report, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    coll = report["collectives"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, op in zip(axes, OPS):
        for key, label in (("gloo_cpu", "Gloo, CPU tensors"), ("tpu_staged", "tpu, staged over Gloo"),
                           ("tpu_in_program", "tpu, in-program (2 devices, 1 process)")):
            if key not in coll:
                continue
            sizes = sorted(int(s) for s in coll[key][op])
            ax.plot(sizes, [coll[key][op][str(s)]["busbw_GBps"] for s in sizes], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(f"{op}, 2 ranks")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{report['machine']['machine']}; {report['machine']['plugin']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def print_table(report):
    coll = report["collectives"]
    print(f"\n{report['machine']['machine']}; torch {report['machine']['torch']}; {report['machine']['plugin']}")
    for op in OPS:
        print(f"\n{op}, 2 ranks: bus bandwidth GB/s")
        print(f"{'bytes':>12} {'gloo cpu':>10} {'staged':>10} {'in-program':>11} {'staged/gloo':>12} {'prog/gloo':>10}")
        for s in sorted(int(k) for k in coll["gloo_cpu"][op]):
            g = coll["gloo_cpu"][op][str(s)]["busbw_GBps"]
            t = coll["tpu_staged"][op][str(s)]["busbw_GBps"]
            p = coll.get("tpu_in_program", {}).get(op, {}).get(str(s), {}).get("busbw_GBps", float("nan"))
            print(f"{s:>12} {g:>10.3f} {t:>10.3f} {p:>11.3f} {t / g:>12.2f} {p / g:>10.2f}")
    for mode in ("ddp", "fsdp2"):
        r = report.get("training", {}).get(mode)
        if r is None:
            continue
        print(f"\n{mode}: GPT-2 step 1 rank {r['one_rank']['step_ms']:.1f} ms, 2 ranks {r['two_ranks']['step_ms']:.1f} ms, "
              f"communication cost {r['communication_cost']:.2f}")
    r = report.get("training_threads", {}).get("ddp")
    if r is not None:
        print(f"\nddp, 2 ranks as threads (in-program): step {r['collectives_alone']['step_ms']:.1f} ms with each "
              f"collective alone, {r['collectives_with_their_ops']['step_ms']:.1f} ms with the ops before it "
              f"({r['collectives_with_their_ops']['group_segments']} group segments), {r['speedup']:.2f}x")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="sizes up to 16 MiB, 2-layer GPT-2")
    p.add_argument("--no-training", action="store_true")
    p.add_argument("--sizes", default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model", default=None)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--mode", default="ddp")
    p.add_argument("--out", default=None)
    p.add_argument("--collectives-rank", action="store_true")
    p.add_argument("--collectives-threads", action="store_true")
    p.add_argument("--train-rank", action="store_true")
    p.add_argument("--train-threads", action="store_true")
    args = p.parse_args()
    if args.sizes:
        args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.collectives_rank:
        return collectives_rank(args)
    if args.collectives_threads:
        return collectives_threads(args)
    if args.train_rank:
        return train_rank(args)
    if args.train_threads:
        return train_threads(args)

    import transformers

    sizes = args.sizes or (SIZES[:8] if args.quick else SIZES)
    args.model = args.model or ("gpt2_2layer" if args.quick else "gpt2")
    info = tpuc._C.plugin_info()
    report = {
        "machine": {"machine": machine(), "torch": torch.__version__, "transformers": transformers.__version__,
                    "plugin": f"{info['package']} {info['package_version']}", "pjrt_api": info["pjrt_api"],
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "targets": TARGETS,
        "method": {"ranks": 2, "rounds": args.rounds, "iters": {str(s): iters_for(s) for s in sizes},
                   "busbw": "algbw * 2(n-1)/n (all_reduce), algbw * (n-1)/n (all_gather, reduce_scatter)"},
        "collectives": run_collectives(args, sizes),
    }
    coll = report["collectives"]
    ratios = {"staged_vs_gloo": {}, "in_program_vs_gloo": {}}
    for op in OPS:
        for key, name in (("tpu_staged", "staged_vs_gloo"), ("tpu_in_program", "in_program_vs_gloo")):
            ratios[name][op] = {s: coll[key][op][s]["busbw_GBps"] / coll["gloo_cpu"][op][s]["busbw_GBps"]
                                for s in coll["gloo_cpu"][op]}
    report["ratios"] = ratios
    big = [s for s in map(str, sizes) if int(s) >= 1024 * KIB]
    report["measured"] = {
        "staged_all_reduce_vs_gloo_min_from_1MiB": min(ratios["staged_vs_gloo"]["all_reduce"][s] for s in big) if big else None,
        "in_program_all_reduce_vs_gloo_min": min(ratios["in_program_vs_gloo"]["all_reduce"].values()),
    }
    if not args.no_training:
        report["training"] = {"model": args.model}
        # One rank trains alone (no wrapper, nothing to communicate).
        one = run_training(args, "ddp", 1)
        for mode in ("ddp", "fsdp2"):
            two = run_training(args, mode, 2)
            report["training"][mode] = {"one_rank": one, "two_ranks": two,
                                        "communication_cost": two["step_ms"] / one["step_ms"] - 1}
        report["measured"]["ddp_communication_cost"] = report["training"]["ddp"]["communication_cost"]
        # Ranks as threads: DDP's all_reduces with the ops before them (one
        # program across the ranks) or alone.
        alone = run_training_threads(args, False)
        fused = run_training_threads(args, True)
        report["training_threads"] = {"model": args.model, "ddp": {
            "collectives_alone": alone, "collectives_with_their_ops": fused,
            "speedup": alone["step_ms"] / fused["step_ms"]}}
    out_dir = os.environ.get("TPUC_BENCH_RESULTS_DIR", os.path.join(HERE, "results"))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "distributed.json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, os.path.join(out_dir, "distributed.png"))
    print_table(report)


if __name__ == "__main__":
    main()
