"""Data-parallel training of a small GPT-2 on tpu with DistributedDataParallel.

The same script as on CUDA, with "tpu" for "cuda" and the backend "tpu" for
"nccl":

    torchrun --nproc-per-node 2 examples/ddp_gpt2.py
    python examples/ddp_gpt2.py --spawn 2      # torch.multiprocessing.spawn

Each process drives one tpu device (its LOCAL_RANK). The model has random
weights (no download); every rank trains on its own slice of each batch and
DDP averages the gradients, so the loss printed by rank 0 is the same as
one device would get on the whole batch.
"""

import argparse
import os

import torch
import torch.distributed as dist
import transformers
from torch.nn.parallel import DistributedDataParallel as DDP


def train(local_rank, args):
    torch.tpu.set_device(local_rank)
    dist.init_process_group("tpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=args.vocab, n_embd=args.width, n_layer=args.layers, n_head=4,
        n_positions=args.seq, bos_token_id=0, eos_token_id=0,
        # No dropout, so that any number of ranks computes the same thing.
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    model = DDP(transformers.GPT2LMHeadModel(cfg).to("tpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1)
    for step in range(args.steps):
        batch = torch.randint(0, args.vocab, (args.batch * world, args.seq), generator=data)
        ids = batch[rank * args.batch : (rank + 1) * args.batch].to("tpu")
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        # The mean loss over all ranks, for the log line.
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step}: loss {mean.item():.4f} ({world} ranks)", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=4, help="sequences per rank")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--spawn", type=int, default=0, help="start this many ranks with torch.multiprocessing.spawn")
    args = p.parse_args()
    if args.spawn:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29512")
        os.environ["WORLD_SIZE"] = str(args.spawn)
        torch.multiprocessing.spawn(_spawned, args=(args,), nprocs=args.spawn)
    else:
        train(int(os.environ.get("LOCAL_RANK", "0")), args)


def _spawned(rank, args):
    os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(rank)
    train(rank, args)


if __name__ == "__main__":
    main()
