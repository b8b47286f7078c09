"""The deck's number checks: every number or formula a card states, recomputed.

A card's ``checks`` is a list of objects, each one of two kinds:

- **number**: ``{"fn": name, "args": {...}, "text": "54{,}400", "sig": 3}``. ``CHECKS[name]
  (**args)`` computes the number from the package (or sympy, or the library the package
  mirrors: torch for dtype facts, transformers for a released config). ``text`` must occur
  verbatim in the card, and the computed value must round to it: the tolerance is half a
  unit in the last written digit (``sig`` says how many digits count when an integer ends in
  zeros that are not significant). A check whose function returns a bool (a predicate)
  receives the written value as ``written`` and must return True.
- **formula**: ``{"fn": name, "args": {...} or [{...}, ...], "formula": "b' = b\\,s^{d/(d-2)}"}``.
  ``formula`` must occur verbatim in the card; its right-hand side is read into sympy
  (:func:`pecourse.flashcards.numbers.formula_to_sympy`) and evaluated with the symbol values
  the function returns next to ``"value"``; the two must agree to ``rel_tol`` (1e-6, float32
  round-off, unless the card calls the formula approximate and the check says so). A formula that starts with
  ``\\sum_i`` is summed over the array-valued symbols.

A check may also read numbers it depends on from the card: ``"from_text": {"share":
"90\\%"}`` passes the value of the last number in that phrase of the card (which must occur
in it) as the argument ``share`` of every call, so a number of the question that sets up the
computation (a head count, a share, a config value) is checked with it: change it on the card
and the computed value moves away from the card's answer.

Every function here imports what it computes from ``pecourse`` (or sympy, torch,
transformers); ``tests/flashcards/test_numbers.py`` fails a check whose function does not,
a numeric card without a check, and a check whose function is missing.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from functools import cache

CHECKS: dict[str, Callable] = {}
# Package values come out of float32 tensors; a relative error of 1e-6 is float32 round-off,
# and the written number's own half-unit tolerance is added on top.
DEFAULT_REL_TOL = 1e-6


def check(fn: Callable) -> Callable:
    """Register a check function under its name."""
    CHECKS[fn.__name__] = fn
    return fn


# -- 01 learned absolute -----------------------------------------------------------------


@check
def gpt2_config(field: str) -> float:
    """A field of transformers' default GPT2Config (the released GPT-2 small)."""
    from transformers import GPT2Config

    return float(getattr(GPT2Config(), field))


@check
def roberta_position_rows(tokens: int) -> int:
    """Rows a RoBERTa position table needs for ``tokens`` real tokens: the largest position
    id plus one, from transformers' own ids (``create_position_ids_from_input_ids``, after
    fairseq's ``make_positions``: ids start after the padding index) with the padding index
    of transformers' ``RobertaConfig``."""
    import torch
    from transformers import RobertaConfig
    from transformers.models.roberta import modeling_roberta

    make_ids = getattr(modeling_roberta.RobertaEmbeddings, "create_position_ids_from_input_ids",
                       None) or modeling_roberta.create_position_ids_from_input_ids  # fmt: skip
    pad = RobertaConfig().pad_token_id
    ids = torch.full((1, tokens), pad + 1)  # any token that is not padding
    return int(make_ids(ids, pad).max()) + 1


# -- 03 ALiBi ------------------------------------------------------------------------------


def alibi_slope(num_heads: int, head: int) -> float:
    """Slope of head ``head`` (1-based, as in the paper) of ``num_heads``."""
    from pecourse.positions.alibi import slopes

    return float(slopes(num_heads).double()[head - 1])


@check
def alibi_slope_formula(num_heads: int, head: int) -> dict:
    from pecourse.positions.alibi import slopes

    return {"value": float(slopes(num_heads).double()[head - 1]), "h": head, "n": num_heads}


@check
def alibi_slopes_non_power_of_two(num_heads: int, pick: str = "every other") -> bool:
    """The card's rule for any head count (the power of two ``p`` below ``n`` gives its ``p``
    geometric slopes, then every other slope of ``2p``), written out here and compared with
    transformers' BLOOM ``build_alibi_tensor``, the released implementation."""
    import torch
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    p = 2 ** math.floor(math.log2(num_heads))
    rule = [2 ** (-8 * h / p) for h in range(1, p + 1)]
    step = {"every other": 2, "each": 1}[pick]  # how the next power's slopes are taken
    rule += [2 ** (-8 * h / (2 * p)) for h in range(1, 2 * p + 1)][0::step][: num_heads - p]
    mask = torch.ones(1, 2, dtype=torch.long)
    bloom = build_alibi_tensor(mask, num_heads, torch.float64)[:, 0, 1]  # slope × key index 1
    return bool(torch.allclose(bloom, torch.tensor(rule, dtype=torch.float64), rtol=1e-6))


@check
def alibi_bias_entry(num_heads: int, head: int, i: int, j: int) -> dict:
    from pecourse.positions.alibi import alibi_bias

    bias = alibi_bias(num_heads, i + 1, i + 1)  # queries 0..i, keys 0..i
    return {"value": float(bias[head - 1, i, j]), "m_h": alibi_slope(num_heads, head),
            "i": i, "j": j}  # fmt: skip


def _alibi_row(num_heads: int, head: int, context: int):
    from pecourse.positions.alibi import alibi_bias

    # The last query's bias over every key, indexed by distance back (0 = the query itself).
    return alibi_bias(num_heads, 1, context)[head - 1, 0].double().flip(0)


@check
def alibi_needle_half_distance(num_heads: int, head: int, margin: float, context: int,
                               share: float = 0.5) -> dict:  # fmt: skip
    """The farthest distance at which a needle that out-scores every other key by ``margin``
    still gets ``share`` (half) of the attention, from the package's bias and a softmax."""
    import torch

    row = _alibi_row(num_heads, head, context)
    best = 0
    for delta in range(context):
        scores = row.clone()
        scores[delta] += margin
        if float(torch.softmax(scores, 0)[delta]) >= share:
            best = delta
    return {"value": float(best), "s": margin, "m": alibi_slope(num_heads, head)}


@check
def alibi_share_distance(num_heads: int, head: int, share: float, context: int) -> dict:
    """The distance within which ``share`` of a head's attention lies, for equal content."""
    import torch

    weights = torch.softmax(_alibi_row(num_heads, head, context), 0)
    within = int((weights.cumsum(0) < share).sum())  # first distance reaching the share
    return {"value": float(within), "m": alibi_slope(num_heads, head)}


# -- 04 effective context ----------------------------------------------------------------------


@check
def causal_offset_count(L: int, d: int) -> dict:
    import torch

    from pecourse.attention import causal_mask

    i, j = torch.nonzero(causal_mask(L, L), as_tuple=True)
    return {"value": int(((i - j) == d).sum()), "L": L, "d": d}


@check
def needle_margin(n: int, margin: float) -> dict:
    """Give a needle ``margin`` nats over ``n - 1`` other keys; read its weight from the
    package's attention. The card's formula must return the margin from that weight."""
    import torch

    from pecourse.attention import attention

    d = 4
    q = torch.zeros(1, 1, 1, d, dtype=torch.float64)
    q[..., 0] = margin * math.sqrt(d)  # scores are q·k/√d
    k = torch.zeros(1, 1, n, d, dtype=torch.float64)
    k[0, 0, 0, 0] = 1.0
    _, probs = attention(q, k, k, causal=False, return_probs=True)
    return {"value": margin, "n": n, "p": float(probs[0, 0, 0, 0])}


# -- 05 multidimensional RoPE ------------------------------------------------------------------


@check
def raster_offset(height: int, width: int, row: int, col: int, d_row: int, d_col: int) -> dict:
    from pecourse.positions.multidim import grid_positions

    coords = grid_positions(height, width)  # [2, H·W], raster order
    index = {(int(r), int(c)): t for t, (r, c) in enumerate(coords.T.tolist())}
    value = index[(row + d_row, col + d_col)] - index[(row, col)]
    return {"value": value, "W": width, "Delta_r": d_row, "Delta_c": d_col}


@check
def rope_pairs(head_dim: int) -> int:
    from pecourse.positions.rope import inv_freq

    return inv_freq(head_dim).numel()


@check
def qwen2vl_head_dim() -> int:
    """Qwen2-VL's attention head width in transformers' default config (every released size
    has 128-wide heads: 1536/12, 3584/28, 8192/64)."""
    from transformers import Qwen2VLConfig

    text = Qwen2VLConfig().text_config
    return text.hidden_size // text.num_attention_heads


@check
def mrope_sections_count_pairs(head_dim: int, sections: list) -> bool:
    """transformers' Qwen2-VL splits its per-pair frequencies (``head_dim / 2`` wide) by
    ``mrope_section``, then doubles them to the head: the sections, read as pairs, give a
    ``head_dim``-wide table; read as coordinates (each doubled) they do not split at all."""
    from types import SimpleNamespace

    import torch
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding

    recompose = Qwen2VLRotaryEmbedding.recomposition_frequencies
    freqs = torch.rand(3, 1, 5, head_dim // 2)
    as_pairs = recompose(SimpleNamespace(mrope_section=sections), freqs)
    try:
        recompose(SimpleNamespace(mrope_section=[2 * n for n in sections]), freqs)
        as_coordinates_fails = False
    except RuntimeError:
        as_coordinates_fails = True
    return as_pairs.shape[-1] == head_dim and as_coordinates_fails


# -- 07 relative representations -----------------------------------------------------------------


@check
def t5_last_bucket_start(bidirectional: bool, num_buckets: int = 32, max_distance: int = 128):
    import torch

    from pecourse.positions.relative import t5_bucket

    back = torch.arange(0, 4 * max_distance)
    bucket = t5_bucket(-back, bidirectional=bidirectional, num_buckets=num_buckets,
                       max_distance=max_distance)  # fmt: skip
    return int(back[bucket == bucket.max()][0])


@check
def t5_config(field: str) -> int:
    """A field of transformers' default T5Config (T5's released bucket settings)."""
    from transformers import T5Config

    return int(getattr(T5Config(), field))


@check
def t5_direction_buckets(bidirectional: bool, num_buckets: int = 32, max_distance: int = 128):
    """How many distinct buckets the offsets of one direction use (the query itself and the
    keys before it)."""
    import torch

    from pecourse.positions.relative import t5_bucket

    back = torch.arange(0, 4 * max_distance)
    bucket = t5_bucket(-back, bidirectional=bidirectional, num_buckets=num_buckets,
                       max_distance=max_distance)  # fmt: skip
    return int(bucket.unique().numel())


@check
def shaw_clip(k: int, i: int, j: int, length: int) -> dict:
    from pecourse.positions.relative import shaw_relative_ids

    value = int(shaw_relative_ids(length, length, k)[i, j]) - k  # rows are offset + k
    return {"value": value, "i": i, "j": j, "k": k}


@check
def t5_exact_offsets(bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> int:
    """How many offsets back, from 0, have a bucket to themselves (no other offset shares it)."""
    import torch

    from pecourse.positions.relative import t5_bucket

    back = torch.arange(0, 4 * max_distance)
    bucket = t5_bucket(-back, bidirectional=bidirectional, num_buckets=num_buckets,
                       max_distance=max_distance)  # fmt: skip
    alone = torch.bincount(bucket)[bucket] == 1
    return int(alone.long().cumprod(0).sum())


@check
def t5_log_buckets(bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> int:
    """How many distinct buckets the offsets past the exact ones share (one direction)."""
    import torch

    from pecourse.positions.relative import t5_bucket

    exact = t5_exact_offsets(bidirectional, num_buckets, max_distance)
    back = torch.arange(exact, 4 * max_distance)
    bucket = t5_bucket(-back, bidirectional=bidirectional, num_buckets=num_buckets,
                       max_distance=max_distance)  # fmt: skip
    return int(bucket.unique().numel())


# -- 08 RoPE ---------------------------------------------------------------------------------------


@check
def rope_theta(head_dim: int, base: float, i: int) -> dict:
    from pecourse.positions.rope import inv_freq

    return {"value": float(inv_freq(head_dim, base)[i]), "b": base, "d": head_dim, "i": i}


@check
def rope_wavelength_formula(head_dim: int, base: float, i: int) -> dict:
    from pecourse.positions.rope import inv_freq

    value = 2 * math.pi / float(inv_freq(head_dim, base)[i])
    return {"value": value, "b": base, "d": head_dim, "i": i}


@check
def rope_slowest_just_under(head_dim: int, base: float) -> bool:
    """The slowest pair's wavelength lies below ``2πb`` and above half of it."""
    from pecourse.positions.rope import inv_freq

    slowest = 2 * math.pi / float(inv_freq(head_dim, base)[-1])
    return 0.5 * 2 * math.pi * base < slowest < 2 * math.pi * base


@check
def meta_to_half_permutation(head_dim: int, num_heads: int, seq: int = 7,
                             first: str = "even") -> bool:  # fmt: skip
    """Meta's interleaved RoPE (complex multiplication, as in meta-llama's ``apply_rotary_emb``,
    written out here) against transformers' ``apply_rotary_pos_emb`` (``rotate_half``) on
    weights whose rows are reordered per head as the card says: even rows, then odd. True
    when the scores agree with the reordering and disagree without it."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    gen = torch.Generator().manual_seed(0)
    d_in = 16
    x = torch.randn(seq, d_in, dtype=torch.float64, generator=gen)
    wq, wk = (torch.randn(num_heads * head_dim, d_in, dtype=torch.float64, generator=gen)
              for _ in range(2))  # fmt: skip
    freqs = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), freqs)  # [seq, d/2]

    def meta(w):
        y = (x @ w.T).view(seq, num_heads, head_dim // 2, 2)
        rotated = torch.view_as_complex(y.contiguous()) * torch.polar(
            torch.ones_like(angles), angles)[:, None, :]  # fmt: skip
        return torch.view_as_real(rotated).flatten(2).transpose(0, 1)  # [heads, seq, d]

    def half(w, reorder):
        if reorder:
            w = w.view(num_heads, head_dim, d_in)
            start = {"even": 0, "odd": 1}[first]  # the card's order: even rows, then odd
            w = torch.cat((w[:, start::2], w[:, 1 - start :: 2]), dim=1)
            w = w.reshape(num_heads * head_dim, d_in)
        return (x @ w.T).view(seq, num_heads, head_dim).transpose(0, 1)[None]

    emb = torch.cat((angles, angles), dim=-1)[None]  # transformers' [batch, seq, d] layout
    want = meta(wq) @ meta(wk).transpose(-1, -2)
    agree = []
    for reorder in (True, False):
        q, k = apply_rotary_pos_emb(half(wq, reorder), half(wk, reorder), emb.cos(), emb.sin())
        agree.append(torch.allclose((q @ k.transpose(-1, -2))[0], want, atol=1e-9))
    return agree == [True, False]


@check
def bf16_round(n: int) -> float:
    import torch

    return float(torch.tensor(float(n)).to(torch.bfloat16))


@check
def bf16_significant_bits() -> int:
    import torch

    eps = torch.finfo(torch.bfloat16).eps  # 2^-(significant bits - 1)
    return round(-math.log2(eps)) + 1


@check
def xpos_score_factor(head_dim: int, pair: int, n: int, m: int, scale_base: float = 512.0) -> dict:
    """What xPos does to a score, measured: a query at ``n`` and a key at ``m`` that use only
    pair ``pair`` (unit vectors, two keys at right angles), scored after xPos's rotation and
    scaling; the norm of the two scores is the factor xPos puts on that pair's score. It is
    measured on rotary-embedding-torch's xPos (an implementation independent of the package,
    which measures positions from the middle of its sequence and reads ``ζ_i`` from its own
    ``scale``) and on the package's ``apply_xpos``, which must agree. Nothing here assumes
    how the query and key scales combine: a key scaled like its query, or scales that keep
    the absolute positions, give another factor. (rotary-embedding-torch comes with the
    ``dev`` extra, like the package's own cross-tests.)"""
    import torch
    from rotary_embedding_torch import RotaryEmbedding

    from pecourse.positions.xpos import apply_xpos

    reference = RotaryEmbedding(dim=head_dim, use_xpos=True, xpos_scale_base=scale_base).double()
    length = max(n, m) + 1
    q = torch.zeros(2, 1, length, head_dim, dtype=torch.float64)
    k = torch.zeros_like(q)
    q[:, 0, n, 2 * pair] = 1.0  # interleaved pairing: pair i is coordinates (2i, 2i + 1)
    k[0, 0, m, 2 * pair] = 1.0
    k[1, 0, m, 2 * pair + 1] = 1.0
    q_ref, k_ref = reference.rotate_queries_and_keys(q, k)
    measured = float((q_ref[:, 0, n] * k_ref[:, 0, m]).sum(-1).norm())
    q_pkg, k_pkg = apply_xpos(q[:, :, n : n + 1], k[:, :, m : m + 1], torch.tensor([n]),
                              torch.tensor([m]), pairing="interleaved", scale_base=scale_base)  # fmt: skip
    package = float((q_pkg[:, 0, 0] * k_pkg[:, 0, 0]).sum(-1).norm())
    if not math.isclose(package, measured, rel_tol=1e-6):
        raise AssertionError(f"apply_xpos scales the score by {package:.8g}, "
                             f"rotary-embedding-torch by {measured:.8g}")  # fmt: skip
    return {"value": measured, "zeta_i": float(reference.scale[pair]), "n": n, "m": m,
            "B": scale_base}  # fmt: skip


# -- 09 sinusoidal ---------------------------------------------------------------------------------


@check
def sinusoid_omega(dim: int, i: int) -> dict:
    from pecourse.positions.absolute import sinusoidal_frequencies

    return {"value": float(sinusoidal_frequencies(dim)[i]), "i": i, "d": dim}


@check
def sinusoid_dot(dim: int, t: int, delta: int) -> dict:
    import torch

    from pecourse.positions.absolute import sinusoidal_frequencies, sinusoidal_table

    table = sinusoidal_table(max(t, t + delta) + 1, dim, dtype=torch.float64)
    return {"value": float(table[t] @ table[t + delta]), "Delta": delta,
            "omega_i": sinusoidal_frequencies(dim).numpy()}  # fmt: skip


@check
def sinusoid_wavelength_range(dim: int, base: float = 10000.0) -> bool:
    """Read the fastest and slowest frequencies off the package's table at position 1
    (columns ``0`` and ``d-2`` hold ``sin ω_i``): wavelength 2π, and just under 2π·base."""
    import torch

    from pecourse.positions.absolute import sinusoidal_table

    row = sinusoidal_table(2, dim, dtype=torch.float64)[1]
    fastest = 2 * math.pi / math.asin(float(row[0]) if float(row[1]) >= 0 else 1.0)
    slowest = 2 * math.pi / math.asin(float(row[dim - 2]))
    return abs(fastest - 2 * math.pi) < 1e-9 and 0.5 < slowest / (2 * math.pi * base) < 1


@check
def sinusoid_norm(dim: int) -> float:
    import torch

    from pecourse.positions.absolute import sinusoidal_table

    norms = sinusoidal_table(64, dim, dtype=torch.float64).norm(dim=-1)
    if float(norms.max() - norms.min()) > 1e-9:
        raise AssertionError("sinusoidal rows should all have the same norm")
    return float(norms[0])


@check
def sinusoid_norm_formula(dim: int) -> dict:
    return {"value": sinusoid_norm(dim), "d": dim}


@check
def token_norm_at_init(d_model: int, std: float, draws: int = 4000, seed: int = 0) -> float:
    """Mean norm of token vectors initialised as GPT-2 does (``nn.init.normal_`` with
    ``std``), measured over ``draws`` sampled vectors rather than taken from std·√d."""
    import torch

    table = torch.empty(draws, d_model, dtype=torch.float64)
    torch.nn.init.normal_(table, std=std, generator=torch.Generator().manual_seed(seed))
    return float(table.norm(dim=-1).mean())


# -- 10 CoPE ---------------------------------------------------------------------------------------


@check
def cope_all_gates_open(length: int, i: int, j: int) -> dict:
    import torch

    from pecourse.positions.cope import cope_positions

    gates = torch.ones(length, length).tril()
    return {"value": float(cope_positions(gates, 4 * length)[i, j]), "i": i, "j": j}


@check
def cope_gate_entries(length: int) -> dict:
    """How many gate values the package's CoPE computes for one head over ``length`` tokens
    (the counts have the same shape): every one of them exists before the softmax."""
    import torch

    from pecourse.positions.cope import cope_gates

    q = torch.randn(1, 1, length, 8)
    return {"value": cope_gates(q, q)[0, 0].numel(), "L": length}


# -- 11 interleaving ---------------------------------------------------------------------------------


@check
def llama4_config(field: str) -> int:
    from transformers import Llama4TextConfig

    return int(getattr(Llama4TextConfig(), field))


@check
def llama4_query_temperature(i: int) -> dict:
    """The factor transformers' ``Llama4TextAttention`` puts on the query at position ``i`` of
    a NoPE layer, read back from the layer itself (identity projections, two cached keys)."""
    import torch
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextAttention

    config = Llama4TextConfig(hidden_size=4, intermediate_size=8, intermediate_size_mlp=8,
                              num_attention_heads=1, num_key_value_heads=1, head_dim=4,
                              num_hidden_layers=4, attn_temperature_tuning=True)  # fmt: skip
    config._attn_implementation = "eager"
    layer = next(n for n in range(4) if not config.no_rope_layers[n])  # a NoPE layer
    attn = Llama4TextAttention(config, layer).eval()
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
            proj.weight.copy_(torch.eye(4))

    class TwoKeys:  # a cache: the query sits at position i and sees keys 0 and e_0
        def get_seq_length(self, layer_idx):
            return i

        def update(self, keys, values, layer_idx, **kwargs):
            k = torch.zeros(1, 1, 2, 4)
            k[..., 1, 0] = 1.0
            return k, k.clone()  # the output's first coordinate is the weight on e_0

    query = torch.zeros(1, 1, 4)
    query[..., 0] = 1.0
    # The cache argument is ``cache`` in transformers 5.25 and ``past_key_values`` in 5.20
    # (the newest release for Python 3.10), which would pass ``cache`` on in **kwargs unread.
    takes = inspect.signature(attn.forward).parameters
    cache = {"cache" if "cache" in takes else "past_key_values": TwoKeys()}
    with torch.no_grad():
        weight = float(attn(query, None, None, **cache)[0][0, 0, 0])
    # weight = sigmoid(τ · q·k · scaling) with q·k = 1
    return {"value": math.log(weight / (1 - weight)) / attn.scaling, "i": i}


@check
def llama4_temperature_edge(which: str) -> int:
    """The last position whose NoPE query factor is 1 (``"last_unscaled"``) or the first
    above 1 (``"first_scaled"``), by bisection on :func:`llama4_query_temperature`."""
    low, high = 0, 1 << 16  # factor 1 at low, above 1 at high
    while high - low > 1:
        mid = (low + high) // 2
        if llama4_query_temperature(mid)["value"] > 1 + 1e-4:
            high = mid
        else:
            low = mid
    return {"last_unscaled": low, "first_scaled": high}[which]


_ORDINALS = {"second": 2, "third": 3, "fourth": 4, "fifth": 5}
_COUNTS = {"two": 2, "three": 3, "four": 4, "five": 5}
_FRACTIONS = {"half": 0.5, "a third": 1 / 3, "a quarter": 0.25}


@check
def llama4_nope_every(interval_word: str, num_hidden_layers: int = 48) -> bool:
    """transformers' Llama 4 default plan: NoPE (``no_rope_layers[l] == 0``) exactly every
    ``interval_word`` layer."""
    from transformers import Llama4TextConfig

    every = _ORDINALS[interval_word]
    plan = Llama4TextConfig(num_hidden_layers=num_hidden_layers).no_rope_layers
    nope = [layer for layer, uses_rope in enumerate(plan) if not uses_rope]
    return nope == list(range(every - 1, num_hidden_layers, every))


@check
def cohere2_block(sliding_word: str, full_word: str, num_hidden_layers: int = 8) -> bool:
    """transformers' Cohere2 (Command A) default ``layer_types``: blocks of ``sliding_word``
    sliding-window layers then ``full_word`` full-attention layer(s); its attention rotates
    only when the layer has a sliding window, so the full layers are NoPE."""
    import inspect as _inspect

    from transformers import Cohere2Config
    from transformers.models.cohere2 import modeling_cohere2

    sliding, full = _COUNTS.get(sliding_word, 0), {"one": 1, **_COUNTS}.get(full_word, 0)
    block = ["sliding_attention"] * sliding + ["full_attention"] * full
    types = Cohere2Config(num_hidden_layers=num_hidden_layers).layer_types
    source = _inspect.getsource(modeling_cohere2.Cohere2Attention.forward)
    rope_only_when_sliding = "if self.sliding_window is not None:" in source
    return types == (block * num_hidden_layers)[:num_hidden_layers] and rope_only_when_sliding


@check
def neox_rotary_fraction(fraction_word: str) -> bool:
    """GPT-NeoX-20B's share of rotated head coordinates: transformers' GPTNeoXConfig default
    (the 20B configuration) ``partial_rotary_factor``."""
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig().rope_parameters["partial_rotary_factor"] == _FRACTIONS[fraction_word]


@check
def qwen2vl_frames_per_temporal_patch(count_word: str) -> bool:
    """Frames per temporal patch in transformers' Qwen2-VL vision config."""
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig

    return Qwen2VLVisionConfig().temporal_patch_size == _COUNTS[count_word]


@check
def causal_layers_until_order(count_word: str, d: int = 16, seed: int = 0) -> bool:
    """With random weights, no positions and a causal mask, the last token's output for
    *dog bites man .* and *man bites dog .* first differs after ``count_word`` layers
    (the package's attention; a layer is attention plus residual)."""
    import torch

    from pecourse.attention import attention

    gen = torch.Generator().manual_seed(seed)
    vocab = {
        w: torch.randn(d, dtype=torch.float64, generator=gen) for w in "dog bites man .".split()
    }
    layers = [[torch.randn(d, d, dtype=torch.float64, generator=gen) / d**0.5 for _ in range(3)]
              for _ in range(4)]  # fmt: skip

    def last_after(sentence, depth):
        x = torch.stack([vocab[w] for w in sentence.split()])[None, None]
        for wq, wk, wv in layers[:depth]:
            x = x + attention(x @ wq, x @ wk, x @ wv, causal=True)
        return x[0, 0, -1]

    first = next(
        n for n in range(1, 5)
        if not torch.allclose(last_after("dog bites man .", n), last_after("man bites dog .", n))
    )  # fmt: skip
    return first == _COUNTS[count_word]


@check
def smollm3_nope_every(interval_word: str, num_hidden_layers: int = 36) -> bool:
    """transformers' SmolLM3 default plan: the layers with ``no_rope_layers[l] == 0`` (NoPE)
    are exactly every ``interval_word`` (``"fourth"``) layer."""
    from transformers import SmolLM3Config

    every = _ORDINALS[interval_word]
    plan = SmolLM3Config(num_hidden_layers=num_hidden_layers).no_rope_layers
    nope = [layer for layer, uses_rope in enumerate(plan) if not uses_rope]
    return nope == list(range(every - 1, num_hidden_layers, every))


@check
def cohere2_config(field: str) -> int:
    from transformers import Cohere2Config

    return int(getattr(Cohere2Config(), field))


# -- 13 augmentation --------------------------------------------------------------------------------


@check
def randomized_unit_gaps(n: int, L: int, draws: int = 4000, seed: int = 0) -> dict:
    import torch

    from pecourse.positions.augmentation import randomized_positions

    ids = randomized_positions(n, L, generator=torch.Generator().manual_seed(seed), batch=draws)
    unit = (ids[:, 1:] - ids[:, :-1] == 1).sum(1).double().mean()
    return {"value": float(unit), "n": n, "L": L}


@check
def randomized_unit_gaps_mean(n: int, L: int, draws: int = 4000, seed: int = 0) -> float:
    return randomized_unit_gaps(n, L, draws, seed)["value"]


# -- 14 RoPE scaling ----------------------------------------------------------------------------------


@check
def ntk_base(head_dim: int, base: float, factor: float) -> dict:
    """The new base, read back from transformers' dynamic NTK at ``factor`` 1 and a current
    length of ``s·L`` (its effective factor is then exactly ``s``): ``b' = θ_1^{-d/2}``."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    original = 2048
    config = LlamaConfig(
        hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
        max_position_embeddings=original,
        rope_parameters={"rope_type": "dynamic", "factor": 1.0, "rope_theta": base},
    )  # fmt: skip
    inv_freq, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, "cpu", seq_len=int(factor * original))
    new_base = float(inv_freq.double()[1]) ** (-head_dim / 2)  # θ_1 = b'^{-2/d}
    return {"value": new_base, "b": base, "s": factor, "d": head_dim}


@check
def yarn_cos_sin_factor(factor: float, head_dim: int = 128, base: float = 10000.0,
                        original_max_position: int = 4096, **options) -> float:  # fmt: skip
    from pecourse.positions.rope_scaling import SCALINGS

    _, attention_factor = SCALINGS["yarn"](
        head_dim, base, factor=factor, original_max_position=original_max_position, **options
    )
    return float(attention_factor)


@check
def yarn_temperature(factor: float) -> dict:
    return {"value": yarn_cos_sin_factor(factor), "s": factor}


@check
def llama3_band_edge(edge: str, factor: float = 8.0, original_max_position: int = 8192,
                     low_freq_factor: float = 1.0, high_freq_factor: float = 4.0) -> float:  # fmt: skip
    """The wavelength at which Llama 3.1's rule stops keeping a pair (``"high"``) or starts
    dividing it by the full factor (``"low"``), found by bisection on the package's ``llama3``.

    A 4-dimensional head has one slow pair, of wavelength ``2π·√b``; moving the base moves
    that wavelength continuously across the band edges.
    """
    from pecourse.positions.rope import inv_freq
    from pecourse.positions.rope_scaling import SCALINGS

    def past_edge(log_base: float) -> bool:
        base = math.exp(log_base)
        scaled, _ = SCALINGS["llama3"](4, base, factor=factor,
                                       original_max_position=original_max_position,
                                       low_freq_factor=low_freq_factor,
                                       high_freq_factor=high_freq_factor)  # fmt: skip
        ratio = float(scaled[1] / inv_freq(4, base)[1])
        return ratio < 1 - 1e-12 if edge == "high" else abs(ratio - 1 / factor) < 1e-12

    low, high = math.log(10.0), math.log(1e12)  # wavelengths from about 20 to 6e6 tokens
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (low, mid) if past_edge(mid) else (mid, high)
    return 2 * math.pi * math.exp(high / 2)  # λ = 2π b^{2·1/4}


@check
def llama3_slow_division(factor: float = 8.0, original_max_position: int = 8192,
                         low_freq_factor: float = 1.0, high_freq_factor: float = 4.0) -> float:  # fmt: skip
    """What Llama 3.1's rule divides a pair far slower than the band by (the package's
    ``llama3`` on a 4-dimensional head of base 1e12: wavelength about 6e6 tokens)."""
    from pecourse.positions.rope import inv_freq
    from pecourse.positions.rope_scaling import SCALINGS

    scaled, _ = SCALINGS["llama3"](4, 1e12, factor=factor,
                                   original_max_position=original_max_position,
                                   low_freq_factor=low_freq_factor,
                                   high_freq_factor=high_freq_factor)  # fmt: skip
    return float(inv_freq(4, 1e12)[1] / scaled[1])


# -- 15 NoPE ----------------------------------------------------------------------------------------------


@check
def nope_bos_counter(t: int) -> dict:
    import torch

    from pecourse.attention import attention

    n = t + 1
    flat = torch.zeros(1, 1, n, 2, dtype=torch.float64)  # equal scores everywhere
    values = torch.zeros(1, 1, n, 2, dtype=torch.float64)
    values[..., 0, 0] = 1.0  # only the first (BOS) token carries the marker
    out = attention(flat, flat, values, causal=True)[0, 0, t, 0]
    return {"value": float(out), "t": t}


@check
def counter_collision(dtype: str) -> int:
    """The first t at which 1/(t+1) and 1/(t+2), stored in ``dtype``, are equal (torch)."""
    import torch

    t = torch.arange(0, 1 << 16, dtype=torch.float64)
    share = (1.0 / (t + 1)).to(getattr(torch, dtype))
    hits = torch.nonzero(share[1:] == share[:-1])
    return int(hits[0])


_SHARES = {"a minority": lambda f: 0 < f < 0.5, "a majority": lambda f: 0.5 < f < 1,
           "all": lambda f: f == 1}  # fmt: skip


@check
def nope_share_in_hybrids(share: str) -> bool:
    """The share of NoPE layers in the released hybrids transformers configures by default:
    Llama 4 and SmolLM3 (``no_rope_layers[l] == 0``) and Cohere2 / Command A (full-attention
    layers, which do not rotate: see ``cohere2_block``). True when every one of them is
    ``share`` (``"a minority"``: some layers but fewer than half)."""
    from transformers import Cohere2Config, Llama4TextConfig, SmolLM3Config

    plans = [
        [not r for r in Llama4TextConfig().no_rope_layers],
        [not r for r in SmolLM3Config().no_rope_layers],
        [t == "full_attention" for t in Cohere2Config().layer_types],
    ]
    return all(_SHARES[share](sum(plan) / len(plan)) for plan in plans)


# -- 16 base frequency -------------------------------------------------------------------------------------


def _min_decay(bases, context_length: int, head_dim: int):
    """Per base, Men et al.'s ``B_m = Σ_i cos(m θ_i)`` at its worst over ``1 <= m <= L`` if
    no ``B_m`` is negative, else some negative ``B_m``. A torch float64 scan written here, not
    the package's search. Bases go in chunks, in the order given; a base is first tried at
    the distances where the previous chunk's bases failed (neighbouring bases fail at
    neighbouring distances), and only a base that passes there is scanned at every distance.
    The order of the work changes, no verdict: a negative ``B_m`` anywhere is a failure."""
    import torch

    bases = torch.as_tensor(bases, dtype=torch.float64).reshape(-1)
    exponent = -2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim
    distances = torch.arange(1, context_length + 1, dtype=torch.float64)
    worst = torch.empty_like(bases)
    watch = distances[:0]

    def decay(theta, m):  # [bases, d/2] x [distances] -> B_m as [bases, distances]
        return torch.cos(m[None, :, None] * theta[:, None, :]).sum(-1)

    for index in torch.arange(len(bases)).split(8):
        theta = bases[index, None] ** exponent
        rest = torch.ones(len(index), dtype=torch.bool)
        if len(watch):
            tried = decay(theta, watch).amin(-1)
            rest = tried >= 0
            worst[index[~rest]] = tried[~rest]
        for k in rest.nonzero().flatten().tolist():
            values = torch.cat([decay(theta[k : k + 1], m)[0] for m in distances.split(1024)])
            worst[index[k]] = values.min()
            if values.min() < 0:
                watch = distances[values.argsort()[:64]]  # its worst distances
    return worst


@cache
def _package_bound(context_length: int, head_dim: int) -> float:
    from pecourse.derivations import rope_base_lower_bound as bound

    return float(bound(context_length, head_dim))


@check
def rope_base_lower_bound(context_length: int, head_dim: int, step: float = 50.0) -> float:
    """The package's smallest admissible base ``b*`` (Men et al.: ``B_m = Σ_i cos(m θ_i) >= 0``
    for every ``m <= L``), accepted only after a scan written here in torch float64 agrees:
    ``b*`` itself passes and every base on a grid of ``step`` below it fails. (The admissible
    set has narrow windows, so a coarse grid alone would overshoot the minimum.)"""
    import torch

    b_star = _package_bound(context_length, head_dim)
    if float(_min_decay([b_star], context_length, head_dim)[0]) < -1e-9:
        raise AssertionError(f"B_m < 0 somewhere at the package's b* = {b_star:g}")
    below = torch.arange(step, b_star - step / 2, step, dtype=torch.float64)
    passing = below[_min_decay(below, context_length, head_dim) >= 0]
    if len(passing):
        raise AssertionError(f"a base below b* = {b_star:g} passes: {passing}")
    return b_star


@check
def rope_base_fails(context_length: int, head_dim: int, base: float) -> bool:
    """True when Men et al.'s condition ``B_m = Σ_i cos(m θ_i) >= 0`` fails at some
    ``m <= L`` for ``base`` (a torch float64 scan written here, not the package's search)."""
    return bool(_min_decay([float(base)], context_length, head_dim)[0] < 0)


@check
def men_base_bound(context_length: int, head_dim: int = 128) -> dict:
    """The smallest base ``b*`` with ``B_m = Σ_i cos(m θ_i) >= 0`` for every ``m <= L``
    (the package's search), to hold Men et al.'s fitted curve against. Accepted only after a
    torch float64 scan written here agrees that ``b*`` passes and a base 0.1% lower fails."""
    b_star = _package_bound(context_length, head_dim)
    worst = [float(w) for w in _min_decay([b_star, 0.999 * b_star], context_length, head_dim)]
    if worst[0] < -1e-9 or worst[1] >= 0:
        raise AssertionError(f"b* = {b_star:g} is not the edge of B_m >= 0: worst {worst}")
    return {"value": b_star, "L": context_length}


# -- running a check ------------------------------------------------------------------------------


def _card_text(card) -> str:
    return f"{card.front}\n{card.back}"


def run_check(card, spec: dict) -> list[str]:
    """Evaluate one check of ``card``; returns the problems (an empty list means it holds).

    A missing function, a text or formula that is not on the card, an error inside the
    package and a value that does not match are all problems: nothing is skipped.
    """
    import numpy as np
    import sympy as sp

    from .numbers import formula_to_sympy, number_in, written_value

    where = f"card {card.id!r}, check {spec.get('fn')!r}"
    fn = CHECKS.get(spec.get("fn"))
    if fn is None:
        return [f"{where}: no such check function in pecourse.flashcards.checks"]
    kinds = [k for k in ("text", "formula") if k in spec]
    if len(kinds) != 1:
        return [f"{where}: give exactly one of 'text' or 'formula'"]
    kind = kinds[0]
    if spec[kind] not in _card_text(card):
        return [f"{where}: {spec[kind]!r} does not occur in the card's text"]
    arg_sets = spec.get("args", {})
    arg_sets = arg_sets if isinstance(arg_sets, list) else [arg_sets]
    read = {}
    for name, phrase in spec.get("from_text", {}).items():
        if phrase not in _card_text(card):
            return [f"{where}: from_text {phrase!r} does not occur in the card's text"]
        value = number_in(phrase)
        read[name] = int(value) if float(value).is_integer() and "." not in phrase else value
    arg_sets = [{**args, **read} for args in arg_sets]
    rel_tol = float(spec.get("rel_tol", DEFAULT_REL_TOL))
    problems = []
    for args in arg_sets:
        try:
            result = fn(**args)
        except Exception as exc:  # the package failed: that is a failing check, not a skip
            problems.append(f"{where}: {fn.__name__}(**{args}) raised {type(exc).__name__}: {exc}")
            continue
        if kind == "text":
            if isinstance(result, bool):
                ok = result
                shown = result
            else:
                value, tol = written_value(spec["text"], sig=spec.get("sig"))
                ok = abs(float(result) - value) <= tol + rel_tol * abs(value)
                shown = f"{float(result):.6g} (written {spec['text']!r} = {value:g} ± {tol:g})"
            if not ok:
                problems.append(f"{where}: the package gives {shown} for {args}")
            continue
        bindings = result if isinstance(result, dict) else {"value": result}
        formula = spec["formula"]
        summed = formula.lstrip().startswith(r"\sum_i")
        expr = formula_to_sympy(formula.replace(r"\sum_i", "", 1) if summed else formula)
        names = {str(s) for s in expr.free_symbols}
        missing = names - set(bindings)
        if missing:
            problems.append(f"{where}: the formula's symbols {sorted(missing)} have no values")
            continue
        symbols = sorted(expr.free_symbols, key=str)
        evaluate = sp.lambdify(symbols, expr, modules="numpy")
        try:
            got = np.asarray(evaluate(*[bindings[str(s)] for s in symbols]), dtype=np.float64)
        except Exception as exc:  # e.g. a division by zero: the formula is wrong there
            problems.append(f"{where}: the formula cannot be evaluated at {args}: {exc}")
            continue
        got = float(got.sum()) if summed else float(got)
        want = float(bindings["value"])
        if not abs(got - want) <= 1e-9 + rel_tol * abs(want):
            problems.append(
                f"{where}: the formula gives {got:.8g} but the package gives {want:.8g} for {args}"
            )
    return problems


def run_checks(card) -> list[str]:
    """Every check of ``card``; returns the problems."""
    return [p for spec in card.checks for p in run_check(card, spec)]
