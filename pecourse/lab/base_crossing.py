r"""Does retrieval break where Men et al.'s $B_m$ turns negative? A one-head test.

Men et al. (2024, arXiv:2405.14591, Theorem 1) show that, for random queries and keys, a
key similar to the query out-scores a random key at distance ``m`` in expectation only while
$B_m = \sum_i \cos(m\theta_i) \ge 0$. This module asks whether a *trained* head obeys that:
one RoPE attention head (``head_dim`` 16) learns a content-retrieval task whose answer sits
at a known distance, and its accuracy is read off distance by distance, for bases whose
$B_m$ turns negative inside the window and for one whose does not.

The task (:func:`retrieval_batch`): a sequence of ``length - 1`` distinct *key* symbols,
each carrying a random *payload* symbol, then a query that repeats one of the keys, ``m``
positions back (``m`` uniform in 1 .. length - 1). The answer is that key's payload. The
only way to solve it is to attend from the query to the matching key, so the head's score
``q·R_m k`` must rank the match first among ``length - 1`` keys at every distance.

``python -m pecourse.lab.base_crossing`` trains every (base, seed) pair and writes the recording
``pecourse/lab/results/rope_base_crossing.json`` that chapter 16 reads (minutes on two cores).
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import check_float, check_int
from ..positions.rope import apply_rope

log = logging.getLogger(__name__)

__all__ = [
    "RetrievalTask",
    "retrieval_batch",
    "OneHeadRetriever",
    "train_retriever",
    "accuracy_by_distance",
    "matching_advantage",
    "record",
    "BASES",
    "SEEDS",
]

#: Bases of the recording: B_m first < 0 at m = 16 (100) and m = 34 (300) for head_dim 16;
#: 10,000 stays positive up to m = 63 (the smallest base that does is about 1,706).
BASES = (100.0, 300.0, 10_000.0)
SEEDS = (0, 1, 2)


@dataclass
class RetrievalTask:
    """One batch: ``keys``/``payloads`` ``[n, length - 1]``, ``query_key`` ``[n]``,
    ``distance`` ``[n]`` (how far back the matching key is) and ``target`` ``[n]``."""

    keys: Tensor
    payloads: Tensor
    query_key: Tensor
    distance: Tensor
    target: Tensor


def retrieval_batch(
    batch_size: int,
    *,
    length: int = 64,
    num_keys: int = 64,
    num_payloads: int = 8,
    generator: torch.Generator | None = None,
) -> RetrievalTask:
    """A batch of the retrieval task (module docstring); the query sits at ``length - 1``.

    Keys in a sequence are distinct, so exactly one matches the query. Refuses
    ``batch_size < 1``, ``length < 2``, ``num_keys < length - 1`` and ``num_payloads < 2``.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    length = check_int("length", length, minimum=2)
    num_keys = check_int("num_keys", num_keys, minimum=length - 1)
    num_payloads = check_int("num_payloads", num_payloads, minimum=2)
    n = length - 1
    keys = torch.rand(batch_size, num_keys, generator=generator).argsort(-1)[:, :n]
    payloads = torch.randint(num_payloads, (batch_size, n), generator=generator)
    distance = torch.randint(1, length, (batch_size,), generator=generator)
    source = (length - 1) - distance  # the key the query repeats
    rows = torch.arange(batch_size)
    return RetrievalTask(keys, payloads, keys[rows, source], distance, payloads[rows, source])


class OneHeadRetriever(nn.Module):
    """One RoPE attention head from the query (position ``length - 1``) to the keys.

    ``q = W_Q e(query key)``, ``k_j = W_K e(key_j)``, both rotated by RoPE (base ``base``,
    half pairing) at their positions; the values read each key and its payload; a linear
    layer turns the head's output into payload logits.
    """

    def __init__(
        self, base: float, *, head_dim: int = 16, num_keys: int = 64, num_payloads: int = 8
    ):
        super().__init__()
        self.base = check_float("base", base, minimum=1.0)
        self.head_dim = check_int("head_dim", head_dim, minimum=2)
        self.key_embedding = nn.Embedding(num_keys, head_dim)
        self.payload_embedding = nn.Embedding(num_payloads, head_dim)
        self.w_q = nn.Linear(head_dim, head_dim, bias=False)
        self.w_k = nn.Linear(head_dim, head_dim, bias=False)
        self.w_v = nn.Linear(2 * head_dim, head_dim, bias=False)
        self.readout = nn.Linear(head_dim, num_payloads)

    def scores(self, keys: Tensor, query_key: Tensor) -> Tensor:
        """``q·R_m k_j / sqrt(d)`` for every key: ``[n, length - 1]``."""
        n = keys.shape[-1]
        q = self.w_q(self.key_embedding(query_key))[:, None, None, :]  # [batch, 1, 1, d]
        k = self.w_k(self.key_embedding(keys))[:, None]  # [batch, 1, n, d]
        q = apply_rope(q, torch.tensor([n]), base=self.base)  # the query sits at position n
        k = apply_rope(k, torch.arange(n), base=self.base)
        return (q @ k.transpose(-1, -2))[:, 0, 0] / math.sqrt(self.head_dim)

    def forward(self, keys: Tensor, payloads: Tensor, query_key: Tensor) -> Tensor:
        weights = torch.softmax(self.scores(keys, query_key), dim=-1)
        values = self.w_v(
            torch.cat([self.key_embedding(keys), self.payload_embedding(payloads)], -1)
        )
        return self.readout((weights[..., None] * values).sum(1))


def train_retriever(
    base: float, seed: int, *, steps: int = 300, batch_size: int = 64, lr: float = 1e-2
) -> tuple[OneHeadRetriever, list[float]]:
    """Train a :class:`OneHeadRetriever` with Adam; returns the model and its loss curve.

    Deterministic for a given ``seed`` (initialisation and data). Refuses ``steps < 1``.
    """
    steps = check_int("steps", steps, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = OneHeadRetriever(base)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        task = retrieval_batch(batch_size, generator=generator)
        loss = nn.functional.cross_entropy(
            model(task.keys, task.payloads, task.query_key), task.target
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return model.eval(), losses


@torch.no_grad()
def accuracy_by_distance(
    model: OneHeadRetriever, *, samples: int = 16_384, length: int = 64, seed: int = 1234
) -> tuple[Tensor, Tensor]:
    """Accuracy and sample count at each distance ``m = 0 .. length - 1`` (``m = 0`` is empty).

    One fixed evaluation set (``seed``), the same for every model. Returns two float64
    tensors ``[length]``: accuracy (nan where no sample) and count.
    """
    task = retrieval_batch(samples, length=length, generator=torch.Generator().manual_seed(seed))
    correct = (model(task.keys, task.payloads, task.query_key).argmax(-1) == task.target).double()
    count = torch.zeros(length, dtype=torch.float64).index_add_(
        0, task.distance, torch.ones_like(correct)
    )
    hits = torch.zeros(length, dtype=torch.float64).index_add_(0, task.distance, correct)
    return hits / count.where(count > 0, torch.nan), count


@torch.no_grad()
def matching_advantage(model: OneHeadRetriever, *, length: int = 64) -> dict:
    r"""What the trained head actually rewards at each distance: its analogue of Men et al.'s $B_m$.

    Over every pair of key symbols ``(a, b)``, the score ``q_a·R_m k_b / sqrt(d)`` of a query
    repeating ``a`` against a key ``b`` ``m`` back; ``advantage[m]`` is the mean score of the
    matching key (``a = b``) minus the mean score of a non-matching one, for ``m = 0 ..
    length - 1``. Men et al.'s Theorem 1 gives this difference as $2\sigma^2 B_m$ for random
    queries and keys, every pair weighted alike; here each rotating pair ``i`` (half pairing:
    dimensions ``i`` and ``i + d/2``) carries its own weight: the advantage at ``m`` is
    ``Σ_i w_i cos(m θ_i) + u_i sin(m θ_i)``, and ``pair_weights`` are the ``w_i`` (the same
    mean difference taken at ``m = 0``, pair by pair, over ``sqrt(d)``).
    """
    length = check_int("length", length, minimum=2)
    e = model.key_embedding.weight
    q, k = model.w_q(e), model.w_k(e)  # [keys, d]
    n, h = q.shape[0], model.head_dim // 2
    match = torch.eye(n, dtype=torch.bool)
    ks = apply_rope(k[None, None], torch.zeros(n, dtype=torch.long), base=model.base)[0, 0]
    advantage = []
    for m in range(length):
        qm = apply_rope(q[None, None], torch.full((n,), m), base=model.base)[0, 0]
        scores = qm @ ks.T / math.sqrt(model.head_dim)  # query rotated m further than every key
        advantage.append(float(scores[match].mean() - scores[~match].mean()))
    per_pair = q[:, None, :] * k[None, :, :]  # [a, b, d]: q_a,j k_b,j
    per_pair = (per_pair[..., :h] + per_pair[..., h:]) / math.sqrt(model.head_dim)
    weights = per_pair[match].mean(0) - per_pair[~match].mean(0)
    return {"advantage": advantage, "pair_weights": weights.tolist()}


def record(folder=None, *, bases=BASES, seeds=SEEDS, steps: int = 300) -> dict:
    """Train every (base, seed), measure accuracy by distance, and write the recording
    ``rope_base_crossing.json`` to ``folder`` (default ``pecourse/lab/results``) through
    :func:`pecourse.lab.results.write`."""
    import platform
    import time

    from .results import write

    start = time.process_time()
    rows = []
    for base in bases:
        for seed in seeds:
            model, losses = train_retriever(base, seed, steps=steps)
            accuracy, count = accuracy_by_distance(model)
            rows.append(
                {
                    "base": base,
                    "seed": seed,
                    "final_loss": sum(losses[-20:]) / 20,
                    "accuracy": [None if math.isnan(a) else a for a in accuracy.tolist()],
                    "count": count.tolist(),
                    **matching_advantage(model),
                }
            )
            log.info("base %g seed %d: final loss %.3f", base, seed, rows[-1]["final_loss"])
    result = {
        "name": "rope_base_crossing",
        "protocol": {
            "head_dim": 16,
            "length": 64,
            "num_keys": 64,
            "num_payloads": 8,
            "steps": steps,
            "batch_size": 64,
            "lr": 1e-2,
            "eval_samples": 16_384,
            "eval_seed": 1234,
        },
        "bases": list(bases),
        "seeds": list(seeds),
        "checkpoints": {},  # it trains its own one-head models
        "rows": rows,
        "cpu_seconds": round(time.process_time() - start, 1),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }
    write(result, folder)
    return result


def main(argv=None) -> int:
    """``python -m pecourse.lab.base_crossing [FOLDER]``: write the recording (default: shipped)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    argv = sys.argv[1:] if argv is None else argv
    record(argv[0] if argv else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
