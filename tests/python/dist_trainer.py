"""transformers' Trainer on tpu, run by test_distributed.py as
``accelerate launch --multi_gpu --num_processes 2 dist_trainer.py OUT`` (DDP
over the tpu backend) and as a plain one-process script. Prints one line
``TRAINER <json>`` per rank: the device, the parallel setup, the losses, and
a checksum of the trained weights."""

import json
import sys

import torch
import transformers
from torch.utils.data import Dataset

# No tpuc call and no environment variable: importing torch loads tpuc,
# which teaches accelerate and transformers about the tpu device.


class Tokens(Dataset):
    def __init__(self):
        self.ids = torch.randint(0, 64, (16, 8), generator=torch.Generator().manual_seed(3))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(cfg)
    args = transformers.TrainingArguments(
        output_dir=sys.argv[1], per_device_train_batch_size=2, max_steps=4, learning_rate=1e-2,
        logging_steps=1, report_to=[], save_strategy="no", dataloader_drop_last=True, seed=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens())
    trainer.train()
    st = trainer.accelerator.state
    weights = torch.cat([p.detach().float().cpu().flatten() for p in model.parameters()])
    print(
        "TRAINER "
        + json.dumps(
            {
                "rank": st.process_index,
                "device": str(args.device),
                "world": st.num_processes,
                "distributed_type": str(st.distributed_type),
                "backend": st.backend,
                "wrapped": type(trainer.model_wrapped).__name__,
                "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
                "weights": [float(weights.sum()), float(weights.abs().sum())],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
