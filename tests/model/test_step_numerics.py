"""The training step's fast path computes what the readable one does, bit for bit.

The model's rotary layers run on :data:`pecourse.kernels.FAST_ROPE` (cached tables, the C
kernel, queries and keys rotated in one call, reading and writing the projections' strided
views without copies). The reference is the same model on the readable rotary core
(:data:`pecourse.positions.rotary.REFERENCE`): at one thread the same loss and gradients,
and the same loss curve over thirty AdamW steps."""

import copy

import pytest
import torch

from pecourse.attention import MultiHeadAttention
from pecourse.lab.model import ModelConfig, TinyGPT
from pecourse.lab.train import TrainConfig, make_optimizer, train_step
from pecourse.lab.train import _batch as draw_batch
from pecourse.positions.rotary import REFERENCE


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def on_reference_core(model: TinyGPT) -> TinyGPT:
    """A copy of ``model`` whose rotary layers (inside a window too) use the readable core."""
    ref = copy.deepcopy(model)
    swapped = 0
    for block in ref.blocks:
        scheme = block.attn.scheme
        scheme = getattr(scheme, "inner", scheme)
        if hasattr(scheme, "backend"):
            assert scheme.backend is not REFERENCE  # the model runs the fast one
            scheme.backend = REFERENCE
            swapped += 1
    assert swapped  # a plan with rotary layers
    return ref


PLANS = [
    ("rope", {}),
    ("xpos", {}),
    ("swa_rope", {"swa_rope": {"window": 16}}),
    ("rope,nope,rope,rope", {"rope": {"pairing": "interleaved"}}),
]


@pytest.mark.parametrize(("plan", "options"), PLANS, ids=[p for p, _ in PLANS])
def test_fast_rotary_layers_give_the_readable_cores_loss_and_gradients(plan, options, one_thread):
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(plan=plan, position_options=options)).train()
    reference = on_reference_core(model)
    cfg = TrainConfig(batch_size=4)
    x, y, _ = draw_batch(cfg, 64, torch.Generator().manual_seed(1))
    runs = []
    for net in (model, reference):
        _, loss = net(x, targets=y)
        loss.backward()
        runs.append([loss.detach()] + [p.grad for p in net.parameters()])
    for got, want in zip(*runs, strict=True):
        assert torch.equal(got, want)


def _loss_curve(model: TinyGPT, steps: int) -> list[float]:
    cfg = TrainConfig(steps=steps, warmup=5, threads=1)
    opt = make_optimizer(model, cfg)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, y, answer = draw_batch(cfg, model.config.train_len, g)
        losses.append(train_step(model, opt, cfg, x, y, answer).item())
    return losses


def test_training_gives_the_readable_cores_loss_curve(one_thread):
    """Thirty AdamW steps at the shipped size (d_model 64, 4 layers, 64 tokens) from one
    seed: the same loss at every step, while the model learns (the loss falls by > 0.5)."""
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(plan="rope")).train()
    reference = on_reference_core(model)
    fast, plain = _loss_curve(model, 30), _loss_curve(reference, 30)
    assert fast == plain
    assert fast[-1] < fast[0] - 0.5


def test_a_hooked_projection_is_the_layer_that_runs():
    """A forward hook on q_proj or k_proj (chapter 10 reads CoPE's queries and keys so) sees
    the projection's output, and what the hook returns is what the attention uses: each
    projection runs as its own layer."""
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
    assert torch.equal(hooked, plain)
    # a hook that replaces the values reaches the output (v_proj: zeros in, zeros out)
    handle = mha.v_proj.register_forward_hook(lambda module, inputs, output: output * 0)
    try:
        assert torch.equal(mha(x), mha.o_proj(torch.zeros(2, 6, 32)))
    finally:
        handle.remove()
