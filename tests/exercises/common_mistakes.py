"""The common mistakes each exercise's hints name, and the parts whose *visible* tests must
catch them (``pecourse check`` runs only those: a mistake they miss gets a false [PASS]).

``MISTAKES[slug]`` is a list of ``(kind, answers, parts)``: ``answers`` maps an answer
cell's grade_id to the code typed instead (the other answers are the solution's), ``parts``
are the test cells whose visible part must fail. ``kind`` is one of ``KINDS``. Entries are
new here or taken from the graded wrong answers (``wrong_answers*.py``, ``regressions.py``),
with the parts whose visible test sees the mistake (a part that fails in grading only
because it calls a wrong earlier part is left to grading).

``RIGHT[slug]`` holds right answers written differently from the solution (another dtype
where the part asks none, another route): the visible tests must pass them.
"""

from .regressions import REGRESSIONS
from .wrong_answers import WRONG
from .wrong_answers_more import WRONG_MORE

KINDS = (
    "frequency ladder",
    "pairing",
    "sign",
    "off-by-one",
    "dtype",
    "in-place change",
    "formula",
)


def _graded(table, slug, parts=None):
    answers, failing = table[slug]
    return answers, set(failing if parts is None else parts)


# RoPE's ladder with exponent i/d instead of 2i/d (the mistake of issue 28)
_LADDER_HALF = """
def rope_half(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., : d // 2].float(), x[..., d // 2 :].float()
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)
"""

MISTAKES = {
    "01_learned_absolute_positions": [
        ("off-by-one", *_graded(WRONG, "01_learned_absolute_positions")),
        (
            "off-by-one",
            {
                # refuses a sequence exactly as long as the table
                "answer_add": """
def add_learned_positions(hidden, table):
    if hidden.shape[1] >= table.shape[0]:
        raise ValueError(f"max_positions={table.shape[0]}")
    return hidden + table[: hidden.shape[1]]
""",
            },
            {"test_add"},
        ),
        (
            "in-place change",
            {
                "answer_add": """
def add_learned_positions(hidden, table):
    if hidden.shape[1] > table.shape[0]:
        raise ValueError(f"max_positions={table.shape[0]}")
    hidden += table[: hidden.shape[1]]
    return hidden
""",
            },
            {"test_add"},
        ),
        ("formula", *_graded(WRONG_MORE, "01_learned_absolute_positions")),
    ],
    "02_why_attention_needs_positions": [
        ("formula", *_graded(WRONG, "02_why_attention_needs_positions")),
        # scaled by sqrt(d_model): Part 3 fails in grading only through Part 1
        ("formula", *_graded(WRONG_MORE, "02_why_attention_needs_positions", {"test_attention"})),
    ],
    "03_alibi": [
        ("formula", *_graded(WRONG, "03_alibi")),
        ("off-by-one", *_graded(WRONG_MORE, "03_alibi")),
        ("dtype", *_graded(REGRESSIONS["eve"], "03_alibi")),
        (
            "sign",
            {
                "answer_bias": """
def alibi_bias(slopes, query_len, key_len):
    i = torch.arange(key_len - query_len, key_len)[:, None]
    j = torch.arange(key_len)[None, :]
    bias = slopes.to(torch.float64)[:, None, None] * (i - j).to(torch.float64)
    return bias.masked_fill((j > i)[None], float("-inf"))
""",
            },
            {"test_bias", "test_attention"},
        ),
    ],
    "04_effective_vs_nominal_context": [
        ("off-by-one", *_graded(WRONG, "04_effective_vs_nominal_context")),
        ("formula", *_graded(WRONG_MORE, "04_effective_vs_nominal_context")),
        (
            "off-by-one",
            {
                "answer_fraction": """
def fraction_at_least(train_len, distance):
    counts = train_len - torch.arange(train_len, dtype=torch.float64)
    return (counts[distance + 1 :].sum() / counts.sum()).item()
""",
            },
            {"test_fraction"},
        ),
    ],
    "05_multidimensional_rope": [
        ("off-by-one", *_graded(WRONG, "05_multidimensional_rope")),
        ("frequency ladder", *_graded(WRONG_MORE, "05_multidimensional_rope")),
        (
            # continues from the largest width id: right only for images at least as wide
            # as tall (issue 27)
            "off-by-one",
            {
                "answer_sequence": """
def mrope_ids(text_before, grid_h, grid_w, text_after):
    before = torch.arange(text_before).expand(3, -1)
    image = image_ids(grid_h, grid_w, text_before)
    after = (torch.arange(text_after) + int(image[2].max()) + 1).expand(3, -1)
    return torch.cat([before, image, after], dim=1).long()
""",
            },
            {"test_sequence"},
        ),
        (
            "pairing",
            {
                # column-major order: the height id walks first
                "answer_image": """
def image_ids(grid_h, grid_w, start):
    rows = torch.arange(grid_h).repeat(grid_w)
    cols = torch.arange(grid_w).repeat_interleave(grid_h)
    t = torch.zeros(grid_h * grid_w, dtype=torch.long)
    return torch.stack([t, rows, cols]) + start
""",
            },
            {"test_image"},
        ),
    ],
    "06_positional_encodings": [
        ("sign", *_graded(WRONG, "06_positional_encodings")),
        ("formula", *_graded(WRONG_MORE, "06_positional_encodings")),
        (
            "pairing",
            {
                "answer_rotary": """
def rotary_scores(q, k, positions):
    d = q.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angle), torch.sin(angle)

    def rotate(x):
        a, b = x[..., : d // 2].double(), x[..., d // 2 :].double()
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)

    return (rotate(q) @ rotate(k).T / math.sqrt(d)).to(q.dtype)
""",
            },
            {"test_rotary"},
        ),
        (
            "frequency ladder",
            {
                "answer_rotary": """
def rotary_scores(q, k, positions):
    d = q.shape[-1]
    theta = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angle), torch.sin(angle)

    def rotate(x):
        a, b = x[..., 0::2].double(), x[..., 1::2].double()
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    return (rotate(q) @ rotate(k).T / math.sqrt(d)).to(q.dtype)
""",
            },
            {"test_rotary"},
        ),
    ],
    "07_relative_position_representations": [
        ("sign", *_graded(WRONG, "07_relative_position_representations")),
        ("sign", *_graded(WRONG_MORE, "07_relative_position_representations")),
    ],
    "08_rope": [
        ("sign", *_graded(WRONG, "08_rope")),
        ("pairing", *_graded(WRONG_MORE, "08_rope")),
        ("frequency ladder", {"answer_half": _LADDER_HALF}, {"test_half"}),
        (
            "frequency ladder",
            {
                "answer_interleaved": """
def rope_interleaved(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2).to(x.dtype)
""",
            },
            {"test_interleaved"},
        ),
        (
            # angles in x's dtype: a bfloat16 x cannot hold position 3001
            "dtype",
            {
                "answer_half": """
def rope_half(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angle = positions.to(x.dtype)[:, None] * inv_freq
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), dim=-1)
""",
                "answer_interleaved": """
def rope_interleaved(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angle = positions.to(x.dtype)[:, None] * inv_freq
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), dim=-1).flatten(-2)
""",
            },
            {"test_half", "test_interleaved"},
        ),
        (
            "in-place change",
            {
                "answer_half": """
def rope_half(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    a, b = x[..., : d // 2].clone(), x[..., d // 2 :].clone()
    x[..., : d // 2] = a * cos - b * sin
    x[..., d // 2 :] = a * sin + b * cos
    return x
""",
            },
            {"test_half"},
        ),
        (
            "pairing",
            {
                "answer_permutation": """
def to_half_permutation(head_dim):
    return torch.arange(head_dim)
""",
            },
            {"test_permutation"},
        ),
    ],
    "09_sinusoidal_positional_encodings": [
        ("frequency ladder", *_graded(WRONG, "09_sinusoidal_positional_encodings")),
        ("pairing", *_graded(WRONG_MORE, "09_sinusoidal_positional_encodings")),
        (
            "frequency ladder",
            {
                "answer_table": """
def sinusoidal_table(num_positions, dim, base=10000.0):
    t = torch.arange(num_positions, dtype=torch.float64)[:, None]
    omega = base ** (-torch.arange(dim // 2, dtype=torch.float64) / dim)
    table = torch.empty(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(t * omega)
    table[:, 1::2] = torch.cos(t * omega)
    return table.float()
""",
            },
            {"test_table"},
        ),
    ],
    "10_contextual_position_encoding": [
        ("off-by-one", *_graded(WRONG, "10_contextual_position_encoding")),
        ("off-by-one", *_graded(WRONG_MORE, "10_contextual_position_encoding")),
    ],
    "11_interleaving_rope_and_nope": [
        ("off-by-one", *_graded(WRONG, "11_interleaving_rope_and_nope")),
        ("off-by-one", *_graded(WRONG_MORE, "11_interleaving_rope_and_nope")),
    ],
    "12_length_extrapolation": [
        ("formula", *_graded(WRONG, "12_length_extrapolation")),
        ("off-by-one", *_graded(WRONG_MORE, "12_length_extrapolation")),
    ],
    "13_position_augmented_training": [
        ("formula", *_graded(WRONG, "13_position_augmented_training")),
        ("off-by-one", *_graded(WRONG_MORE, "13_position_augmented_training")),
        ("formula", *_graded(REGRESSIONS["eve"], "13_position_augmented_training")),
    ],
    "14_rope_scaling": [
        # the wrong range breaks Part 3 in grading only through Part 2
        ("frequency ladder", *_graded(WRONG, "14_rope_scaling", {"test_ntk", "test_range"})),
        ("sign", *_graded(WRONG_MORE, "14_rope_scaling")),
        ("off-by-one", *_graded(REGRESSIONS["eve"], "14_rope_scaling")),
    ],
    "15_nope": [
        ("off-by-one", *_graded(WRONG, "15_nope")),
        ("off-by-one", *_graded(WRONG_MORE, "15_nope")),
    ],
    "16_rope_base_frequency": [
        ("formula", *_graded(WRONG, "16_rope_base_frequency")),
        ("off-by-one", *_graded(WRONG_MORE, "16_rope_base_frequency")),
        (
            "frequency ladder",
            {
                "answer_wavelengths": """
def rope_wavelengths(head_dim, base=10000.0):
    theta = base ** (-torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return 2 * math.pi / theta
""",
            },
            {"test_wavelengths"},
        ),
    ],
}

RIGHT = {
    # float64 positions: the part asks for no dtype (issue 27 saw this refused)
    "10_contextual_position_encoding": {
        "answer_positions": """
def cope_positions(q, k):
    seq = q.shape[0]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    gates = torch.sigmoid(q.double() @ k.double().T) * causal
    return gates.flip(-1).cumsum(-1).flip(-1) * causal
""",
    },
    "03_alibi": REGRESSIONS["fay"]["03_alibi"][0],
    "12_length_extrapolation": REGRESSIONS["eve"]["12_length_extrapolation"][0],
    # rotating in float64 and casting back: angles in float64 as asked
    "08_rope": {
        "answer_half": """
def rope_half(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.outer(positions.double(), theta)
    x1, x2 = x.double().chunk(2, dim=-1)
    rotated = torch.cat((x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()), -1)
    return rotated.to(x.dtype)
""",
    },
}
