"""docs/architecture.md's worked example (adding a scheme) runs, is short, and is right."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from pecourse.attention import attention, causal_mask
from pecourse.lab import model as model_mod

from .positions.test_package_shape import _places_in_use

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _example() -> str:
    text = DOC.read_text()
    block = re.search(
        r"<!-- worked-example:start -->\n```python\n(.*?)```\n<!-- worked-example:end -->",
        text,
        re.S,
    )
    assert block, "the worked example is missing from docs/architecture.md"
    return block.group(1)


@pytest.fixture
def kerple(monkeypatch):
    """Run the document's code, with the model's registry restored afterwards."""
    monkeypatch.setattr(model_mod, "SCHEMES", dict(model_mod.SCHEMES))
    namespace: dict = {"__name__": "worked_example"}
    exec(compile(_example(), str(DOC), "exec"), namespace)
    return namespace


def test_the_example_is_under_fifty_lines():
    lines = [line for line in _example().splitlines() if line.strip()]
    assert len(lines) < 50, len(lines)


def test_the_scheme_uses_the_scores_only(kerple):
    scheme = kerple["KerpleLog"](4)
    assert kerple["KerpleLog"].places == scheme.places == ("scores",)
    assert _places_in_use(scheme) == ("scores",) and not scheme.needs_probs


def test_the_bias_is_the_authors_formula(kerple):
    # ParallelKerpleLog.forward (github.com/chijames/KERPLE, megatron/mpu/layers.py) for a
    # square causal window: diff = tril(i - j); bias = -p * log(1 + a * diff).
    # The initialisation is random (torch.rand) and clamped at eps = 0.01 in the forward pass,
    # so fixed values keep the test independent of the RNG: the first head sits below eps.
    scheme = kerple["KerpleLog"](3)
    with torch.no_grad():
        scheme.p.copy_(torch.tensor([0.5, 1.0, 1.9]))
        scheme.a.copy_(torch.tensor([0.001, 0.3, 0.9]))
    p, a = torch.tensor([0.5, 1.0, 1.9]), torch.tensor([0.01, 0.3, 0.9])  # a clamped to eps
    length = 7
    i = torch.arange(length)
    diff = torch.tril(i[:, None] - i[None, :]).float()
    want = -p[:, None, None] * torch.log(1 + a[:, None, None] * diff)
    q = torch.zeros(1, 3, length, 8)
    got = scheme.score_bias(q, q, i, i)
    torch.testing.assert_close(got, want.detach().expand_as(got))


def test_in_attention_it_is_softmax_of_the_biased_logits(kerple):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=g, dtype=torch.float64) for _ in range(3))
    scheme = kerple["KerpleLog"](4).double()
    pos = torch.arange(9)
    bias = scheme.score_bias(q, k, pos, pos)
    logits = q @ k.transpose(-1, -2) / math.sqrt(8) + bias
    want = torch.softmax(logits.masked_fill(~causal_mask(9, 9), float("-inf")), -1) @ v
    torch.testing.assert_close(attention(q, k, v, scheme), want)
    torch.testing.assert_close(attention(q, k, v, scheme, fused=True), want)
    shifted = attention(q, k, v, scheme, q_positions=pos + 50, k_positions=pos + 50)
    torch.testing.assert_close(shifted, want)  # relative: a common shift changes nothing


def test_registered_it_trains_in_the_model(kerple):
    cfg = model_mod.ModelConfig(d_model=16, n_layers=2, n_heads=2, train_len=8, plan="kerple,rope")
    net = model_mod.TinyGPT(cfg)
    assert type(net.blocks[0].attn.scheme).__name__ == "KerpleLog"
    idx = torch.randint(0, cfg.vocab_size, (2, 8), generator=torch.Generator().manual_seed(1))
    _, loss = net(idx, targets=idx)
    loss.backward()
    scheme = net.blocks[0].attn.scheme
    assert scheme.p.grad is not None and scheme.p.grad.abs().sum() > 0
    assert scheme.a.grad is not None and scheme.a.grad.abs().sum() > 0
    with torch.no_grad():
        fused = net(idx)[0]
        torch.testing.assert_close(net.set_fused(False)(idx)[0], fused, rtol=1e-5, atol=1e-5)
