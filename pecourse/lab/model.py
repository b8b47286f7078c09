r"""A tiny decoder-only transformer whose position handling is a per-layer *plan*.

The model is GPT-2 shaped and small enough to train on a laptop CPU in a minute:
token embedding, ``n_layers`` pre-LayerNorm blocks (causal multi-head attention, then a
GELU MLP, each added back to the residual stream), a final LayerNorm, and an output layer
that reuses the embedding matrix (tied embeddings, Press & Wolf 2017, arXiv:1608.05859).

Position enters wherever the plan says (see :mod:`pecourse.attention`):

* ``plan="learned"`` or ``"sinusoidal"`` — an *input* scheme, added once to the token
  embeddings; the attention layers then use no position at all.
* ``plan="rope"``, ``"alibi"``, ``"t5"``, ``"xpos"``, ``"cope"``, ``"nope"``, … — a
  *per-layer* scheme, one instance inside every layer's :class:`MultiHeadAttention`.
* ``plan="rope,rope,rope,nope"`` — one name per layer. iRoPE (Llama 4) interleaves
  RoPE layers with NoPE layers: it is a plan, not a new architecture. ``swa_rope`` and
  ``chunk_rope`` are RoPE over a sliding window or fixed chunks
  (:mod:`pecourse.positions.window`), for the Command A and Llama 4 layouts.

``ModelConfig.position_options`` maps a scheme name to its keyword arguments
(``{"rope": {"base": 500.0}}``). :func:`build_scheme` is the one factory from a name to a
scheme. Shipped checkpoints are listed by :func:`list_checkpoints` and loaded, offline,
by :func:`load_checkpoint`.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .._validate import check_choice, check_int, check_positions, check_tensor
from ..attention import MultiHeadAttention, NoPE, PositionScheme
from ..kernels import FAST_ROPE
from ..positions.absolute import LearnedAbsolute, Sinusoidal
from ..positions.alibi import ALiBi
from ..positions.cope import CoPE
from ..positions.relative import ShawRelative, T5RelativeBias
from ..positions.rope import RoPE
from ..positions.window import Chunked, SlidingWindow
from ..positions.xpos import XPos
from .data import VOCAB_SIZE

__all__ = [
    "SCHEMES",
    "input_schemes",
    "build_scheme",
    "ModelConfig",
    "TinyGPT",
    "replace_rope",
    "save_checkpoint",
    "load_checkpoint",
    "list_checkpoints",
    "checkpoint_dir",
    "checkpoint_info",
    "checkpoint_sha256",
]


@dataclass(frozen=True)
class Sizes:
    """What the model tells a scheme about itself (see :data:`SCHEMES`)."""

    d_model: int
    num_heads: int
    train_len: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


#: Scheme name -> (scheme class, its constructor arguments for a model of these sizes).
#: The model's rotary layers run on the fast backend (cached tables, C kernel), which gives
#: the readable core's numbers (``docs/architecture.md``). ``position_options`` override any
#: of these arguments.
def _swa_rope(*, head_dim: int, window: int, **rope_options) -> PositionScheme:
    return SlidingWindow(RoPE(head_dim, **rope_options), window)


def _chunk_rope(*, head_dim: int, chunk: int, **rope_options) -> PositionScheme:
    return Chunked(RoPE(head_dim, **rope_options), chunk)


SCHEMES: dict[str, tuple[Callable[..., PositionScheme], Callable[[Sizes], dict]]] = {
    "learned": (LearnedAbsolute, lambda s: dict(max_positions=s.train_len, d_model=s.d_model)),
    "sinusoidal": (Sinusoidal, lambda s: dict(d_model=s.d_model)),
    "rope": (RoPE, lambda s: dict(head_dim=s.head_dim, backend=FAST_ROPE)),
    "xpos": (XPos, lambda s: dict(head_dim=s.head_dim, backend=FAST_ROPE)),
    "alibi": (ALiBi, lambda s: dict(num_heads=s.num_heads)),
    # A decoder: keys never come after the query, so every bucket looks back.
    "t5": (T5RelativeBias, lambda s: dict(num_heads=s.num_heads, bidirectional=False)),
    # k = 16 as in the paper.
    "shaw": (ShawRelative, lambda s: dict(head_dim=s.head_dim, max_distance=16)),
    "cope": (CoPE, lambda s: dict(head_dim=s.head_dim, max_position=s.train_len)),
    "nope": (NoPE, lambda s: {}),
    # RoPE over a limited span (chapter 11): position_options {"swa_rope": {"window": W}}
    # or {"chunk_rope": {"chunk": C}}, plus any RoPE option.
    "swa_rope": (_swa_rope, lambda s: dict(head_dim=s.head_dim, backend=FAST_ROPE)),
    "chunk_rope": (_chunk_rope, lambda s: dict(head_dim=s.head_dim, backend=FAST_ROPE)),
}


def input_schemes() -> tuple[str, ...]:
    """The names in :data:`SCHEMES` whose scheme adds position to the input embedding (its
    ``places`` include ``"input"``): applied once, before layer 1, never inside a layer.
    Read off the registry each time, so a scheme registered later is recognised too."""
    return tuple(n for n, (make, _) in SCHEMES.items() if "input" in getattr(make, "places", ()))


def build_scheme(
    name: str, *, d_model: int = 64, num_heads: int = 4, train_len: int = 64, **options
) -> PositionScheme:
    """The scheme called ``name`` (a key of :data:`SCHEMES`) for a model of this size.

    ``options`` go to the scheme's constructor (``build_scheme("rope", base=500.0)``,
    ``build_scheme("rope", scaling="yarn", factor=4.0, original_max_position=64)``).
    ``train_len`` sizes what depends on the context: the rows of a learned table and
    CoPE's ``max_position`` (both overridable).
    """
    check_choice("scheme", name, tuple(SCHEMES))
    cls, arguments = SCHEMES[name]
    kwargs = {**arguments(Sizes(d_model, num_heads, train_len)), **options}
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as exc:
        raise TypeError(f"position_options for scheme {name!r} were not accepted: {exc}") from None
    return cls(**kwargs)


#: Token-embedding setups (:attr:`ModelConfig.embed_scale`).
EMBED_SCALES = ("scheme", "sqrt_d", "none")


@dataclass
class ModelConfig:
    """Everything that defines a :class:`TinyGPT`; round-trips through JSON.

    ``plan`` is one scheme name for every layer, or ``n_layers`` comma-separated names
    (``"rope,rope,rope,nope"``). An input scheme (``learned``, ``sinusoidal``) must be the
    whole plan: it is applied once, at the embedding. ``position_options`` maps a scheme
    name to its constructor's keyword arguments. ``train_len`` is the context length the
    model is (or was) trained at. ``embed_scale`` is the token embedding's setup: ``"scheme"``
    follows the input scheme's convention (√d for the sinusoidal table, 1 otherwise);
    ``"sqrt_d"`` and ``"none"`` impose one setup on every scheme, so schemes can be compared
    without the setup differing (chapter 06's control).
    """

    vocab_size: int = VOCAB_SIZE
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    train_len: int = 64
    plan: str = "rope"
    position_options: dict = field(default_factory=dict)
    mlp_ratio: int = 4
    embed_scale: str = "scheme"

    def __post_init__(self):
        check_int("vocab_size", self.vocab_size, minimum=1)
        check_int("d_model", self.d_model, minimum=1)
        check_int("n_layers", self.n_layers, minimum=1)
        check_int("n_heads", self.n_heads, minimum=1)
        check_int("train_len", self.train_len, minimum=1)
        check_int("mlp_ratio", self.mlp_ratio, minimum=1)
        check_choice("embed_scale", self.embed_scale, EMBED_SCALES)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if not isinstance(self.position_options, dict):
            raise TypeError(
                f"position_options must be a dict, got {type(self.position_options).__name__}"
            )
        for name in self.position_options:
            check_choice("position_options key", name, tuple(SCHEMES))
        self.layer_plan()  # validates the plan

    def layer_plan(self) -> list[str]:
        """The scheme name of each attention layer (input schemes give ``nope`` layers)."""
        if not isinstance(self.plan, str) or not self.plan:
            raise TypeError(f"plan must be a non-empty str of scheme names, got {self.plan!r}")
        names = [n.strip() for n in self.plan.split(",")]
        for n in names:
            check_choice("plan", n, tuple(SCHEMES))
        inputs = input_schemes()
        if any(n in inputs for n in names):
            if len(names) != 1:
                raise ValueError(
                    f"plan {self.plan!r} mixes an input scheme ({', '.join(inputs)}) with "
                    "per-layer schemes; an input scheme must be the whole plan"
                )
            return ["nope"] * self.n_layers
        if len(names) == 1:
            return names * self.n_layers
        if len(names) != self.n_layers:
            raise ValueError(
                f"plan names {len(names)} layers but n_layers is {self.n_layers}: "
                f"give one scheme or exactly {self.n_layers}"
            )
        return names

    @property
    def input_scheme(self) -> str:
        return self.plan if self.plan in input_schemes() else "nope"

    def scales_embeddings(self) -> bool:
        """Whether token embeddings are multiplied by √d_model (and drawn with std d^-½)."""
        if self.embed_scale == "scheme":
            return SCHEMES[self.input_scheme][0].scale_embeddings
        return self.embed_scale == "sqrt_d"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"config has unknown fields {unknown}; accepted: {sorted(known)}")
        return cls(**d)


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(LN(x))``, then ``x + mlp(LN(x))``."""

    def __init__(self, cfg: ModelConfig, scheme: PositionScheme):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        # fused: PyTorch's one-kernel softmax·V where the scheme allows (set_fused(False)
        # switches every layer to the course's step-by-step attention; a test checks both agree).
        self.attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, scheme, fused=True)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        hidden = cfg.mlp_ratio * cfg.d_model
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, hidden), nn.GELU(), nn.Linear(hidden, cfg.d_model)
        )

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x), positions)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """Decoder-only, pre-LN, causal, tied embeddings; position from ``config.plan``.

    ``forward(idx, positions=None, targets=None)``: ``idx`` ``[batch, seq]`` token ids;
    ``positions`` ``[seq]`` or ``[batch, seq]`` integer ids (default ``0..seq-1``; pass
    others for randomized positions, PoSE or a cache offset); ``targets`` ``[batch, seq]``
    with ``-100`` where nothing is scored. Returns ``(logits [batch, seq, vocab], loss)``
    (``loss`` is ``None`` without targets). A learned table refuses positions past its rows.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        opts = config.position_options
        sizes = dict(d_model=config.d_model, num_heads=config.n_heads, train_len=config.train_len)
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        inp = config.input_scheme
        self.input_scheme = build_scheme(inp, **sizes, **opts.get(inp, {}))
        self.blocks = nn.ModuleList(
            Block(config, build_scheme(n, **sizes, **opts.get(n, {}))) for n in config.layer_plan()
        )
        self.ln_f = nn.LayerNorm(config.d_model)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections
            if name.endswith(("o_proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * config.n_layers))
        #: √d_model when forward() scales token vectors, else None: decided once here, so
        #: forward() (and torch.compile's graph of it) reads no registry on every call.
        self.token_scale = math.sqrt(config.d_model) if config.scales_embeddings() else None
        if self.token_scale is not None:
            # forward() multiplies a token vector by √d (Vaswani et al. 2017, §3.4). With the
            # GPT-2 std of 0.02 a scaled token vector has norm ≈ 0.02·√d·√d = 0.02·d (1.3 at
            # d = 64) while every sinusoidal position vector has norm √(d/2) (5.7): position
            # drowns the token. The √d convention pairs the scale with std d^(-1/2), as
            # fairseq's Embedding() does for its embed_scale = √d (facebookresearch/fairseq
            # @3d262bb, fairseq/models/transformer/transformer_base.py, Embedding();
            # transformer_decoder.py, embed_scale): a scaled token vector then has norm
            # ≈ √d (8.0 at d = 64), comparable to the position vector's √(d/2) (5.7).
            nn.init.normal_(self.tok_emb.weight, std=config.d_model**-0.5)

    @staticmethod
    def _init(m: nn.Module):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding) and m.weight.shape[0] > 0:
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx: Tensor, positions: Tensor | None = None, targets: Tensor | None = None):
        check_tensor("idx", idx, ndim=2, floating=False)
        b, s = idx.shape
        # Reading values on an accelerator is a host sync, and under torch.compile a graph
        # break; an id out of range still fails there, in the embedding lookup.
        read_values = idx.device.type == "cpu" and not torch.compiler.is_compiling()
        if read_values and idx.numel():
            low, high = torch.aminmax(idx)  # one pass over the ids
            if int(low) < 0 or int(high) >= self.config.vocab_size:
                raise ValueError(f"idx must hold token ids in 0..{self.config.vocab_size - 1}")
        if positions is None:  # 0..seq-1: valid by construction, nothing to check
            positions = torch.arange(s, device=idx.device)
        else:
            if not torch.compiler.is_compiling():  # reading values would break the graph
                check_positions("positions", positions)
            if positions.shape[-1] != s or (
                positions.ndim == 2 and positions.shape[0] not in (1, b)
            ):
                raise ValueError(
                    f"positions must be [seq={s}] or [batch={b}, seq={s}], got "
                    f"{tuple(positions.shape)}"
                )
        x = self.tok_emb(idx)
        if self.token_scale is not None:  # Vaswani et al. 2017, section 3.4: scale by √d
            x = x * self.token_scale  # so the fixed table does not drown the tokens
        x = self.input_scheme.embed(x, positions)
        for block in self.blocks:
            x = block(x, positions)
        logits = self.ln_f(x) @ self.tok_emb.weight.T  # tied output layer
        loss = None
        if targets is not None:
            check_tensor("targets", targets, ndim=2, floating=False)
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100
            )
        return logits, loss

    def set_fused(self, fused: bool = True) -> TinyGPT:
        """Choose the fused attention kernel (default) or the course's step-by-step one."""
        for block in self.blocks:
            block.attn.fused = bool(fused)
        return self


def replace_rope(model: TinyGPT, scaling: str = "default", **scaling_kwargs) -> TinyGPT:
    """A copy of ``model`` whose RoPE layers use ``scaling`` (training-free RoPE scaling).

    Keeps each layer's base and pairing; the weights are shared in value (deep copy).
    ``replace_rope(m, "linear", factor=4.0)`` is position interpolation (Chen et al. 2023,
    arXiv:2306.15595).
    """
    new = copy.deepcopy(model)
    found = False
    for block in new.blocks:
        old = block.attn.scheme
        if isinstance(old, RoPE):
            found = True
            block.attn.scheme = RoPE(
                old.head_dim,
                base=old.base,
                pairing=old.pairing,
                rotary_dim=old.rotary_dim,
                scaling=scaling,
                backend=old.backend,
                **scaling_kwargs,
            )
    if not found:
        raise ValueError(f"model has no RoPE layers (plan={model.config.plan!r}); nothing to scale")
    return new


# --- checkpoints ----------------------------------------------------------------------


def checkpoint_dir() -> Path:
    """The folder of the shipped checkpoints (``pecourse/lab/checkpoints``), package data
    found through :mod:`importlib.resources`: the same wherever pecourse is installed."""
    folder = resources.files(__package__).joinpath("checkpoints")
    if not isinstance(folder, Path):  # safetensors maps files: a zipped package has none
        raise RuntimeError(
            f"the shipped checkpoints must be files on disk, found {folder!r}: install "
            "pecourse as files (pip install, not from a zip archive)"
        )
    return folder


def list_checkpoints() -> list[str]:
    """Names of the shipped checkpoints (each a ``.safetensors`` with a ``.json`` beside it)."""
    d = checkpoint_dir()
    return sorted(p.stem for p in d.glob("*.safetensors") if p.with_suffix(".json").exists())


def save_checkpoint(model: TinyGPT, path, **meta) -> Path:
    """Write ``path.safetensors`` (weights) and ``path.json`` (config + ``meta``).

    ``meta`` is anything JSON-serialisable: steps, training options, loss curve, metrics.
    Returns the ``.safetensors`` path.
    """
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    st = path.with_suffix(".safetensors")
    save_file(weights, str(st), metadata={"format": "pt", "pecourse": "TinyGPT"})
    info = {"name": path.stem, "config": model.config.to_dict(), **meta}
    path.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    return st


def _resolve(name_or_path) -> Path:
    if (
        isinstance(name_or_path, Path)
        or "/" in str(name_or_path)
        or str(name_or_path).endswith((".safetensors", ".json"))
    ):
        p = Path(name_or_path).with_suffix(".safetensors")
        if not p.exists():
            raise FileNotFoundError(f"checkpoint file {p} does not exist")
        return p
    names = list_checkpoints()
    if name_or_path not in names:
        raise ValueError(
            f"name must be one of the shipped checkpoints {names}; got {name_or_path!r}"
        )
    return checkpoint_dir() / f"{name_or_path}.safetensors"


def checkpoint_sha256(name_or_path) -> str:
    """The sha256 (hex) of a checkpoint's weights file: what a recording stores to say which
    checkpoint its numbers came from."""
    import hashlib

    return hashlib.sha256(_resolve(name_or_path).read_bytes()).hexdigest()


def checkpoint_info(name_or_path) -> dict:
    """The JSON beside a checkpoint: config, steps, loss curve, metrics."""
    p = _resolve(name_or_path).with_suffix(".json")
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"checkpoint file {p} is corrupt (not valid JSON): {exc}") from exc


def load_checkpoint(name_or_path, *, map_location="cpu") -> TinyGPT:
    """A ready :class:`TinyGPT` (eval mode) from a shipped name or a path (no network)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    st = _resolve(name_or_path)
    info = checkpoint_info(st)
    try:
        model = TinyGPT(ModelConfig.from_dict(info["config"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"checkpoint file {st.with_suffix('.json')} has a bad config: {exc}"
        ) from exc
    try:
        weights = load_file(str(st), device=str(map_location))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise ValueError(f"checkpoint file {st} is corrupt or not safetensors: {exc}") from exc
    expected = model.state_dict()
    missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    bad = [k for k in expected if k in weights and weights[k].shape != expected[k].shape]
    if missing or extra or bad:
        raise ValueError(
            f"checkpoint file {st} does not match its config: missing {missing}, "
            f"unexpected {extra}, wrong shapes {bad}"
        )
    model.load_state_dict(weights)
    model.checkpoint = info
    return model.eval()
