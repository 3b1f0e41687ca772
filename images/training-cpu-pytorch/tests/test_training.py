"""training-cpu-pytorch really trains: a tiny step in PyTorch, and a tiny transformers model
built from a local config (no hub download) trained through accelerate."""

from __future__ import annotations

import json
from typing import Any


def _python(host: Any, spec: dict[str, Any], script: str) -> Any:
    result = host.run(f"{spec['python']} - <<'PY'\n{script}\nPY")
    assert result.rc == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_training_step_lowers_the_loss(host: Any, spec: dict[str, Any]) -> None:
    losses = _python(host, spec, """
import json, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 8)
y = x.sum(dim=1, keepdim=True)
losses = []
for _ in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(json.dumps(losses))
""")
    assert len(losses) == 20
    assert losses[-1] < losses[0] * 0.9


def test_a_tiny_transformers_model_trains_through_accelerate(host: Any, spec: dict[str, Any]) -> None:
    out = _python(host, spec, """
import json, torch
from accelerate import Accelerator
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=128, n_positions=32))
accelerator = Accelerator(cpu=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, opt = accelerator.prepare(model, opt)
ids = torch.randint(0, 128, (4, 16))
losses = []
for _ in range(5):
    opt.zero_grad()
    loss = model(input_ids=ids, labels=ids).loss
    accelerator.backward(loss)
    opt.step()
    losses.append(loss.item())
print(json.dumps({"losses": losses, "device": str(accelerator.device), "params": sum(p.numel() for p in model.parameters())}))
""")
    assert out["device"] == "cpu"
    assert out["params"] > 1000
    assert out["losses"][-1] < out["losses"][0]
