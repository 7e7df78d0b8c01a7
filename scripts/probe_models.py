#!/usr/bin/env python3
"""Breadth probe: tiny random-weight Hugging Face models of many
architectures, forward and backward on tpu against the CPU.

    .venv/bin/python scripts/probe_models.py             # everything (~15 min)
    .venv/bin/python scripts/probe_models.py llama bert  # some architectures
    .venv/bin/python scripts/probe_models.py --json out.json

Each transformers architecture is built from its config (shrunk to a few
layers of width 32), in a fresh interpreter with a time limit, and run on
both devices with the same weights and inputs: the outputs, a weighted sum
of them as the loss, and every parameter's gradient are compared (the
largest difference relative to the CPU's largest value), and the ops that
ran on the CPU fallback are listed. Diffusers models (UNet, VAE,
transformers) run the same way in one interpreter. A row that fails to
build a model is a probe limitation (its config wants other sizes), shown
as such. Nothing here is a test of `make test`: tests/python holds one
regression test for each problem this probe found.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import time

# transformers model type -> inputs ("lm" causal LM; "enc" encoder or
# encoder-decoder; "img" images; "audio" log-mel features; "wave" raw
# audio; "clip" text and images)
TRANSFORMERS = {
    "lm": ["llama", "mistral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "mixtral", "gemma",
           "gemma2", "gemma3_text", "phi", "phi3", "phimoe", "gpt2", "gpt_neo", "gptj",
           "gpt_neox", "gpt_bigcode", "codegen", "opt", "bloom", "falcon", "mpt", "xglm",
           "stablelm", "starcoder2", "olmo", "olmo2", "cohere", "granite", "granitemoe",
           "nemotron", "persimmon", "gpt_oss", "llama4_text", "exaone4", "glm", "glm4", "helium",
           "minimax", "smollm3", "ministral", "arcee", "hunyuan_v1_dense", "ernie4_5", "mamba",
           "mamba2"],
    "enc": ["bert", "roberta", "distilbert", "albert", "electra", "deberta-v2", "xlm-roberta",
            "mobilebert", "ernie", "rembert", "big_bird", "longformer", "bart", "mbart",
            "pegasus", "marian", "t5", "mt5", "umt5", "longt5", "led", "prophetnet",
            "blenderbot", "m2m_100", "switch_transformers"],
    "img": ["vit", "deit", "dinov2", "beit", "swin", "convnext", "resnet", "regnet",
            "mobilevit", "poolformer", "levit"],
    "audio": ["whisper"],
    "wave": ["wav2vec2", "hubert", "wavlm", "unispeech", "data2vec-audio", "sew"],
    "clip": ["clip", "siglip"],
}

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64, vocab_size=128, max_position_embeddings=64, d_model=32,
             encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, d_ff=64, d_kv=8,
             num_layers=2, num_heads=4, n_embd=32, n_layer=2, n_head=4, n_positions=64,
             ffn_dim=64, head_dim=8, image_size=32, patch_size=8, num_channels=3,
             num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
             state_size=8, conv_kernel=4, num_mel_bins=16, max_source_positions=32,
             max_target_positions=32, decoder_start_token_id=0, pad_token_id=0,
             sliding_window=16)

# Architectures whose sizes do not follow the common names.
OWN = {
    "gptj": dict(rotary_dim=4), "codegen": dict(rotary_dim=4),
    "swin": dict(embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=2, image_size=32,
                 patch_size=4),
    "convnext": dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
    "resnet": dict(hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16),
    "regnet": dict(hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16, groups_width=8),
    "mobilevit": dict(hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                      num_attention_heads=2, image_size=32),
    "poolformer": dict(hidden_sizes=[16, 32], depths=[1, 1], num_encoder_blocks=2,
                       patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1]),
    "levit": dict(hidden_sizes=[16, 32, 48], key_dim=[8, 8, 8], num_attention_heads=[1, 2, 3],
                  depths=[1, 1, 1], image_size=32),
    "mamba": dict(hidden_size=32, num_hidden_layers=2, vocab_size=128, state_size=8, expand=2),
    "mamba2": dict(hidden_size=32, num_hidden_layers=2, vocab_size=128, state_size=8, expand=2,
                   num_heads=8, head_dim=8, n_groups=1, chunk_size=8),
}


def compare(cpu_outs, tpu_outs, cpu_grads, tpu_grads):
    """The largest difference of each output, and of each gradient,
    relative to the CPU's largest value of it; a gradient that is zero up
    to rounding (an attention key bias's: softmax ignores it) is measured
    against a thousandth of the model's largest gradient instead."""
    def rel(a, b, floor=1e-12):
        a, b = a.double(), b.double()
        if not a.numel():
            return 0.0
        return ((a - b).abs().max() / max(a.abs().max().item(), floor)).item()

    out = max((rel(a, b) for a, b in zip(cpu_outs, tpu_outs)), default=0.0)
    scale = max((g.abs().max().item() for g in cpu_grads.values() if g.numel()), default=0.0)
    grad, worst = 0.0, None
    for name, g in cpu_grads.items():
        if name not in tpu_grads:
            return out, float("inf"), name + " (no gradient on tpu)"
        e = rel(g, tpu_grads[name], max(1e-3 * scale, 1e-12))
        if e > grad:
            grad, worst = e, name
    return out, grad, worst


def weighted_loss(tensors, dev):
    import torch
    return sum((t.float() * torch.linspace(0, 1, t.numel(), device=dev).reshape(t.shape)).sum()
               for t in tensors)


def one_transformers(model_type, kind):
    """Runs in a child: builds, runs on both devices, prints one JSON row."""
    print("ROW " + json.dumps(transformers_row(model_type, kind)), flush=True)


def transformers_row(model_type, kind):
    import torch
    import tpuc
    import transformers

    row = {"library": "transformers", "model": model_type}
    try:
        cfg = transformers.AutoConfig.for_model(model_type)
        if model_type in OWN:
            for k, v in OWN[model_type].items():
                setattr(cfg, k, v)
        else:
            subs = [cfg] + [getattr(cfg, n) for n in ("text_config", "vision_config")
                            if getattr(cfg, n, None) is not None]
            for c in subs:
                for k, v in SMALL.items():
                    if hasattr(c, k):
                        try:
                            setattr(c, k, v)
                        except Exception:
                            pass
                if getattr(c, "layer_types", None) is not None:
                    try:
                        c.layer_types = c.layer_types[:c.num_hidden_layers]
                    except Exception:
                        pass
        if model_type == "siglip":
            cfg.text_config.projection_size = 32
        torch.manual_seed(0)
        if kind == "lm":
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        else:
            model = transformers.AutoModel.from_config(cfg)
        model.eval()
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(3, 100, (2, 12), generator=g)
        inputs = {
            "lm": lambda: {"input_ids": ids},
            "enc": lambda: {"input_ids": ids, "attention_mask": torch.ones(2, 12, dtype=torch.long)},
            "img": lambda: {"pixel_values": torch.randn(2, 3, 32, 32, generator=g)},
            "audio": lambda: {"input_features": torch.randn(2, 16, 64, generator=g)},
            "wave": lambda: {"input_values": torch.randn(2, 4000, generator=g)},
            "clip": lambda: {"input_ids": ids,
                             "pixel_values": torch.randn(2, 3, 32, 32, generator=g)},
        }[kind]()
        if getattr(cfg, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = torch.randint(3, 100, (2, 7), generator=g)
    except Exception as e:
        row["probe_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return row

    def run(dev):
        m = copy.deepcopy(model).to(dev)
        out = m(**{k: v.to(dev) for k, v in inputs.items()})
        tensors = [v for v in out.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
        weighted_loss(tensors, dev).backward()
        return ([t.detach().cpu() for t in tensors],
                {n: p.grad.cpu() for n, p in m.named_parameters() if p.grad is not None})

    try:
        cpu_outs, cpu_grads = run("cpu")
    except Exception as e:
        row["probe_error"] = f"on the CPU: {type(e).__name__}: {str(e)[:200]}"
        return row
    tpuc.fallback_reset()
    start = time.time()
    try:
        tpu_outs, tpu_grads = run("tpu")
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return row
    row["tpu_seconds"] = round(time.time() - start, 2)
    row["fallback"] = dict(tpuc.fallback_report())
    row["out_rel"], row["grad_rel"], row["grad_worst"] = compare(cpu_outs, tpu_outs,
                                                                 cpu_grads, tpu_grads)
    return row


def diffusers_rows(only):
    import torch
    import tpuc
    import diffusers as D

    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g)

    models = {
        "UNet2DConditionModel": (lambda: D.UNet2DConditionModel(
            block_out_channels=(32, 64), layers_per_block=1, sample_size=16, in_channels=4,
            out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
            attention_head_dim=8, norm_num_groups=8),
            dict(sample=r(2, 4, 16, 16), timestep=torch.tensor([10, 20]),
                 encoder_hidden_states=r(2, 7, 32))),
        "AutoencoderKL": (lambda: D.AutoencoderKL(
            block_out_channels=[32, 64], in_channels=3, out_channels=3,
            down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
            latent_channels=4, norm_num_groups=8), dict(sample=r(2, 3, 16, 16))),
        "VQModel": (lambda: D.VQModel(
            block_out_channels=[32, 64], in_channels=3, out_channels=3,
            down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
            latent_channels=3, norm_num_groups=8), dict(sample=r(2, 3, 16, 16))),
        "FluxTransformer2DModel": (lambda: D.FluxTransformer2DModel(
            patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
            axes_dims_rope=[4, 4, 8]),
            dict(hidden_states=r(1, 16, 4), encoder_hidden_states=r(1, 8, 32),
                 pooled_projections=r(1, 32), timestep=torch.tensor([0.5]),
                 img_ids=torch.randint(0, 4, (16, 3), generator=g).float(),
                 txt_ids=torch.zeros(8, 3))),
        "SD3Transformer2DModel": (lambda: D.SD3Transformer2DModel(
            sample_size=8, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8,
            num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=32,
            pooled_projection_dim=64, out_channels=4),
            dict(hidden_states=r(2, 4, 8, 8), encoder_hidden_states=r(2, 7, 32),
                 pooled_projections=r(2, 64), timestep=torch.tensor([10, 20]))),
        "DiTTransformer2DModel": (lambda: D.DiTTransformer2DModel(
            num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
            num_layers=1, sample_size=8, patch_size=2),
            dict(hidden_states=r(2, 4, 8, 8), timestep=torch.tensor([10, 20]),
                 class_labels=torch.tensor([1, 2]))),
        "PixArtTransformer2DModel": (lambda: D.PixArtTransformer2DModel(
            sample_size=8, num_layers=1, patch_size=2, attention_head_dim=8,
            num_attention_heads=3, caption_channels=32, in_channels=4, cross_attention_dim=24,
            out_channels=8, norm_type="ada_norm_single"),
            dict(hidden_states=r(2, 4, 8, 8), encoder_hidden_states=r(2, 7, 32),
                 timestep=torch.tensor([10, 20]),
                 added_cond_kwargs={"resolution": None, "aspect_ratio": None})),
    }

    def to(x, dev):
        if isinstance(x, torch.Tensor):
            return x.to(dev)
        if isinstance(x, dict):
            return {k: to(v, dev) for k, v in x.items()}
        return x

    rows = []
    for name, (make, inputs) in models.items():
        if only and name not in only:
            continue
        row = {"library": "diffusers", "model": name}
        try:
            torch.manual_seed(0)
            model = make().eval()
            res = {}
            for dev in ("cpu", "tpu"):
                m = copy.deepcopy(model).to(dev)
                tpuc.fallback_reset()
                out = m(**to(inputs, dev))
                o = out[0] if isinstance(out, tuple) else out.sample
                weighted_loss([o], dev).backward()
                res[dev] = ([o.detach().cpu()],
                            {n: p.grad.cpu() for n, p in m.named_parameters()
                             if p.grad is not None}, dict(tpuc.fallback_report()))
            row["fallback"] = res["tpu"][2]
            row["out_rel"], row["grad_rel"], row["grad_worst"] = compare(
                res["cpu"][0], res["tpu"][0], res["cpu"][1], res["tpu"][1])
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("only", nargs="*", help="model types (transformers) or class names (diffusers)")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per transformers model")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return one_transformers(*args.child)
    rows = []
    for kind, names in TRANSFORMERS.items():
        for name in names:
            if args.only and name not in args.only:
                continue
            try:
                p = subprocess.run([sys.executable, __file__, "--child", name, kind],
                                   capture_output=True, text=True, timeout=args.timeout,
                                   env=dict(os.environ, HF_HUB_OFFLINE="1"))
                got = [l for l in p.stdout.splitlines() if l.startswith("ROW ")]
                row = json.loads(got[-1][4:]) if got else {
                    "library": "transformers", "model": name,
                    "error": f"the interpreter ended (rc {p.returncode}): {p.stderr[-300:]}"}
            except subprocess.TimeoutExpired:
                row = {"library": "transformers", "model": name,
                       "error": f"no result after {args.timeout:.0f} s"}
            rows.append(row)
            print(fmt(row), flush=True)
    try:
        for row in diffusers_rows(args.only):
            rows.append(row)
            print(fmt(row), flush=True)
    except ImportError:
        pass
    ran = [r for r in rows if "out_rel" in r]
    print(f"\n{len(ran)} ran on tpu; {sum(1 for r in rows if 'error' in r)} failed on tpu; "
          f"{sum(1 for r in rows if r.get('fallback'))} used the CPU fallback; "
          f"{sum(1 for r in rows if 'probe_error' in r)} not built (probe limitation)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def fmt(row):
    if "probe_error" in row:
        return f"{row['library']}:{row['model']}: not built ({row['probe_error'][:100]})"
    if "error" in row:
        return f"{row['library']}:{row['model']}: FAILED {row['error'][:160]}"
    fb = f" fallback {row['fallback']}" if row.get("fallback") else ""
    return (f"{row['library']}:{row['model']}: outputs {row['out_rel']:.1e}, gradients "
            f"{row['grad_rel']:.1e} ({row['grad_worst']}){fb}")


if __name__ == "__main__":
    main()
