"""Hugging Face libraries pick the tpu device with no environment variable
(tpuc.integrations): accelerate's PartialState, TrainingArguments (bf16
too), Trainer, device_map="auto" sized by torch.tpu.mem_get_info, and
pipeline() with no device. Each scenario runs in a fresh interpreter, as a
user's script would (the libraries keep process-wide state)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

# Builds a tiny BERT classifier with a local word-level tokenizer (no hub).
MAKE_MODEL = """
import os, torch, transformers
def make_model(path):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "good", "bad", "movie"]
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\\n".join(words) + "\\n")
    transformers.BertTokenizer(os.path.join(path, "vocab.txt")).save_pretrained(path)
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64, num_labels=2)
    transformers.BertForSequenceClassification(cfg).save_pretrained(path)
"""


def run(body, tmp_path, **env_over):
    env = dict(os.environ)
    for k in ("ACCELERATE_TORCH_DEVICE", "ACCELERATE_MIXED_PRECISION", "TPUC_INTEGRATIONS",
              "TPUC_MEMORY_LIMIT", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    env.update(env_over)
    env["HF_HUB_OFFLINE"] = "1"
    script = MAKE_MODEL + "\nimport json\nout = {}\n" + textwrap.dedent(body) + "\nprint('RESULT', json.dumps(out))\n"
    p = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=600)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, f"rc={p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_accelerate_and_trainer_pick_tpu_without_env(tmp_path):
    out = run("""
        import torch
        from accelerate import Accelerator, PartialState
        out["state"] = str(PartialState().device)
        out["accelerator"] = str(Accelerator(mixed_precision="bf16").device)
        args = transformers.TrainingArguments(output_dir="run", bf16=True, max_steps=2,
                                              per_device_train_batch_size=4, report_to=[],
                                              logging_steps=1, save_strategy="no")
        out["args_device"] = str(args.device)
        out["bf16"] = args.bf16
        make_model("m")
        model = transformers.AutoModelForSequenceClassification.from_pretrained("m")
        g = torch.Generator().manual_seed(0)
        data = [{"input_ids": torch.randint(5, 10, (6,), generator=g), "labels": i % 2}
                for i in range(8)]
        seen = []
        model.bert.encoder.layer[0].attention.self.query.register_forward_hook(
            lambda m, i, o: seen.append((str(o.device), str(o.dtype))))
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
        result = trainer.train()
        out["loss"] = result.training_loss
        out["param_device"] = str(next(model.parameters()).device)
        out["seen"] = sorted(set(d for d, _ in seen))
        out["dtypes"] = sorted(set(t for _, t in seen))
        out["mixed"] = str(trainer.accelerator.state.mixed_precision)
    """, tmp_path)
    assert out["state"] == "tpu"
    assert out["accelerator"] == "tpu"
    assert out["args_device"] == "tpu:0" and out["bf16"] is True
    assert out["param_device"] == "tpu:0"
    assert out["seen"] == ["tpu:0"], out  # every batch ran on tpu
    assert out["mixed"] == "bf16" and "torch.bfloat16" in out["dtypes"], out
    assert out["loss"] == out["loss"] and 0 < out["loss"] < 10


def test_device_map_auto_and_pipeline_use_tpu(tmp_path):
    out = run("""
        import torch
        import accelerate.utils
        make_model("m")
        mm = accelerate.utils.get_max_memory()
        out["keys"] = [str(k) for k in mm]
        out["free0"] = mm[0]
        out["mem"] = list(torch.tpu.mem_get_info(0))
        ref = transformers.AutoModelForSequenceClassification.from_pretrained("m")
        tok = transformers.AutoTokenizer.from_pretrained("m")
        batch = tok(["hello world", "good movie"], return_tensors="pt", padding=True)
        want = ref(**batch).logits
        one = transformers.AutoModelForSequenceClassification.from_pretrained(
            "m", device_map="auto", max_memory={"tpu:0": "1GiB", "cpu": "1GiB"})
        out["one_devices"] = sorted({str(q.device) for q in one.parameters()})
        # No limits: balanced over the process's tpu devices, as over GPUs.
        m = transformers.AutoModelForSequenceClassification.from_pretrained("m", device_map="auto")
        out["map"] = sorted({str(v) for v in m.hf_device_map.values()})
        out["map_devices"] = sorted({str(q.device) for q in m.parameters()})
        got = m(**{k: v.to("tpu") for k, v in batch.items()}).logits.cpu()
        out["map_err"] = (got - want).abs().max().item()
        out["first"] = str(next(iter(m.hf_device_map.values())))
        p = transformers.pipeline("text-classification", model="m")
        out["pipe"] = str(p.device)
        out["pipe_model"] = str(p.model.device)
        cpu = transformers.pipeline("text-classification", model="m", device="cpu")
        out["pipe_cpu"] = str(cpu.device)
        a, b = p("good movie")[0], cpu("good movie")[0]
        out["same_label"] = a["label"] == b["label"]
        out["score_err"] = abs(a["score"] - b["score"])
        out["pipe_index"] = str(transformers.pipeline("text-classification", model="m", device=1).device)
        out["pipe_mapped"] = str(transformers.pipeline("text-classification", model=m, tokenizer=tok).device)
    """, tmp_path)
    assert out["keys"][-1] == "cpu" and "0" in out["keys"], out
    assert out["free0"] > 0 and out["mem"][0] <= out["mem"][1]
    assert out["one_devices"] == ["tpu:0"], out
    n = len(out["keys"]) - 1  # tpu devices
    assert len(out["map"]) >= 2 and set(out["map"]) <= {str(i) for i in range(n)}, out
    assert out["map_devices"] == [f"tpu:{i}" for i in out["map"]], out
    assert out["map_err"] < 1e-4
    assert out["pipe"] == "tpu:0" and out["pipe_model"] == "tpu:0"
    assert out["pipe_cpu"] == "cpu"
    assert out["same_label"] and out["score_err"] < 1e-4
    assert out["pipe_index"] == "tpu:1"
    assert out["pipe_mapped"] == "tpu:" + out["first"]


def test_memory_limit_env_and_opt_out(tmp_path):
    out = run("""
        import torch, accelerate.utils
        out["total"] = torch.tpu.mem_get_info(0)[1]
        out["props"] = torch.tpu.get_device_properties(0).total_memory
        x = torch.ones(1 << 20, device="tpu")  # 4 MiB held
        free, total = torch.tpu.mem_get_info(0)
        out["held"] = total - free
        out["max0"] = accelerate.utils.get_max_memory()[0]
        out["given"] = {str(k): v for k, v in
                        accelerate.utils.get_max_memory({"tpu:1": "1GiB", "cpu": "2GB"}).items()}
        try:
            accelerate.utils.get_max_memory({"gpu": 1})
        except ValueError as e:
            out["bad_key"] = str(e)
    """, tmp_path, TPUC_MEMORY_LIMIT="64MiB")
    assert out["total"] == out["props"] == 64 << 20
    assert out["held"] >= 4 << 20
    assert out["max0"] == (64 << 20) - out["held"]
    assert out["given"] == {"1": 1 << 30, "cpu": 2 * 10**9}
    assert "Device gpu is not recognized" in out["bad_key"]

    # Opted out: accelerate keeps its own choice (the CPU here).
    out = run("""
        from accelerate import PartialState
        out["state"] = str(PartialState().device)
    """, tmp_path, TPUC_INTEGRATIONS="0")
    assert out["state"] == "cpu"

    bad = subprocess.run(
        [sys.executable, "-c", "import torch; torch.tpu.mem_get_info(0)"],
        env=dict(os.environ, TPUC_MEMORY_LIMIT="lots"), capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0
    assert "ValueError" in bad.stderr and "TPUC_MEMORY_LIMIT='lots'" in bad.stderr


def test_fp16_accelerator_and_trainer_scale_losses_on_tpu(tmp_path):
    # accelerate lists the devices it takes fp16 on and builds a CUDA
    # GradScaler elsewhere; on tpu it gets a tpu GradScaler whose unscale
    # and update run natively, and an overflow skips the step.
    out = run("""
        import torch, tpuc
        from accelerate import Accelerator
        acc = Accelerator(mixed_precision="fp16")
        out["scaler_device"] = acc.scaler._device
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 4))
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m, opt = acc.prepare(m, opt)
        x = torch.randn(16, 8, device=acc.device)
        tpuc.fallback_reset()
        inner = []
        m[0].register_forward_hook(lambda mod, i, o: inner.append(str(o.dtype)))
        steps = []
        for i in range(3):
            before = m[1].weight.detach().cpu().clone()
            with acc.autocast():
                loss = m(x * (float("inf") if i == 1 else 1.0)).float().pow(2).mean()
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            moved = not torch.equal(before, m[1].weight.detach().cpu())
            steps.append([moved, acc.scaler.get_scale()])
        out["steps"] = steps
        out["inner"] = sorted(set(inner))
        out["fallbacks"] = sorted(k for k in tpuc.fallback_report() if "amp" in k)
        args = transformers.TrainingArguments(output_dir="run", fp16=True, max_steps=2,
                                              per_device_train_batch_size=4, report_to=[],
                                              logging_steps=1, save_strategy="no")
        make_model("m")
        model = transformers.AutoModelForSequenceClassification.from_pretrained("m")
        g = torch.Generator().manual_seed(0)
        data = [{"input_ids": torch.randint(5, 10, (6,), generator=g), "labels": i % 2}
                for i in range(8)]
        seen = []
        model.bert.encoder.layer[0].attention.self.query.register_forward_hook(
            lambda m, i, o: seen.append((str(o.device), str(o.dtype))))
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
        out["loss"] = trainer.train().training_loss
        out["seen"] = sorted(set(seen))
        out["mixed"] = str(trainer.accelerator.state.mixed_precision)
        out["trainer_scaler"] = trainer.accelerator.scaler._device
    """, tmp_path)
    assert out["scaler_device"] == "tpu"
    assert out["inner"] == ["torch.float16"], out
    # The step with an infinite loss is skipped and halves the scale.
    assert out["steps"] == [[True, 65536.0], [False, 32768.0], [True, 32768.0]], out
    assert out["fallbacks"] == [], out
    assert out["mixed"] == "fp16" and out["trainer_scaler"] == "tpu"
    assert out["seen"] == [["tpu:0", "torch.float16"]], out
    assert out["loss"] == out["loss"] and 0 < out["loss"] < 10
