"""The training step's fast forward computes what the plain one does, to float rounding.

:class:`pecourse.attention.MultiHeadAttention` runs its three projections as one product of
the stacked weights and copies queries and keys to the layout the rotation reads. The
reference here is the plain form: each projection its own layer, strided views handed to
:func:`pecourse.attention.attention`. Same seed, same batches: the same outputs, gradients
and loss curve."""

import pytest
import torch

from pecourse.attention import MultiHeadAttention, attention
from pecourse.lab.model import ModelConfig, TinyGPT
from pecourse.lab.train import TrainConfig, make_optimizer, train_step
from pecourse.lab.train import _batch as draw_batch


def separate_projections(
    self, x, positions=None, *, causal=True, padding_mask=None, return_probs=False
):
    """MultiHeadAttention.forward written plainly: one layer per projection."""
    b, s, _ = x.shape
    q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
    k = self.k_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
    v = self.v_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
    result = attention(
        q,
        k,
        v,
        self.scheme,
        q_positions=positions,
        k_positions=positions,
        causal=causal,
        padding_mask=padding_mask,
        return_probs=return_probs,
        fused=self.fused,
    )
    out, probs = result if return_probs else (result, None)
    out = self.o_proj(out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim))
    return (out, probs) if return_probs else out


@pytest.mark.parametrize(
    ("plan", "kv_heads", "bias"), [("rope", None, False), ("xpos", 2, True), ("alibi", None, True)]
)
def test_stacked_projections_give_each_projections_product(plan, kv_heads, bias):
    """Outputs and gradients (every weight, the input) against separate projections, with
    grouped-query heads and biases too, on the fused and the step-by-step path."""
    from pecourse.lab.model import build_scheme

    torch.manual_seed(0)
    scheme = build_scheme(plan, d_model=32, num_heads=4)
    mha = MultiHeadAttention(32, 4, scheme, num_kv_heads=kv_heads, bias=bias)
    for p in mha.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(3, 10, 32, requires_grad=True)
    pos = torch.arange(5, 15)
    for fused in (True, False):
        mha.fused = fused
        runs = []
        for forward in (MultiHeadAttention.forward, separate_projections):
            mha.zero_grad(set_to_none=True)
            x.grad = None
            out = forward(mha, x, pos)
            (out * torch.linspace(-1, 1, 32)).sum().backward()
            runs.append([out.detach(), x.grad.clone()] + [p.grad.clone() for p in mha.parameters()])
        for got, want in zip(*runs, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _loss_curve(plan: str, steps: int, monkeypatch, reference: bool) -> list[float]:
    if reference:
        monkeypatch.setattr(MultiHeadAttention, "forward", separate_projections)
    else:
        monkeypatch.undo()
    cfg = TrainConfig(steps=steps, warmup=5, threads=1)
    mc = ModelConfig(plan=plan)  # the shipped recipes' size: d_model 64, 4 layers, 64 tokens
    torch.manual_seed(0)
    model = TinyGPT(mc).train()
    opt = make_optimizer(model, cfg)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, y, answer = draw_batch(cfg, mc.train_len, g)
        losses.append(train_step(model, opt, cfg, x, y, answer).item())
    return losses


@pytest.mark.parametrize("plan", ["rope", "nope"])
def test_training_from_one_seed_gives_the_plain_forwards_loss_curve(plan, monkeypatch):
    """Thirty AdamW steps at the shipped size from one seed: the loss curve is the plain
    forward's to 1e-5 at every step, while the model learns (the loss falls by > 0.5)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plain = _loss_curve(plan, 30, monkeypatch, reference=True)
        fast = _loss_curve(plan, 30, monkeypatch, reference=False)
    finally:
        torch.set_num_threads(threads)
    assert max(abs(a - b) for a, b in zip(fast, plain, strict=True)) < 1e-5, (fast, plain)
    assert fast[-1] < fast[0] - 0.5


def test_a_hooked_projection_still_runs_as_its_own_layer():
    """A forward hook on q_proj or k_proj (chapter 10 reads CoPE's queries and keys so) sees
    the projection's output, and the layer's output is the same as without the hook."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, fused=True)
    x = torch.randn(2, 6, 32)
    plain = mha(x)
    seen = {}
    hooks = [
        getattr(mha, name).register_forward_hook(
            lambda module, inputs, output, name=name: seen.__setitem__(name, output)
        )
        for name in ("q_proj", "k_proj")
    ]
    try:
        hooked = mha(x)
    finally:
        for h in hooks:
            h.remove()
    torch.testing.assert_close(seen["q_proj"], mha.q_proj(x))
    torch.testing.assert_close(seen["k_proj"], mha.k_proj(x))
    torch.testing.assert_close(hooked, plain, rtol=1e-5, atol=1e-6)
