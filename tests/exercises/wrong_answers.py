"""Plausible wrong answers, one per exercise, and the parts each must fail.

Each entry replaces some answer cells (by ``grade_id``) of a correct submission. The
grader must give partial credit: exactly the listed parts fail, the others pass. Many of
these pass the visible tests and are caught only by the hidden ones.
"""

WRONG = {
    "01_learned_absolute_positions": (
        {
            # off by one: a sequence of length L reaches rows 0..L-1, not row L
            "answer_rows": """
def rows_with_gradient(max_positions, train_lengths):
    return torch.arange(max_positions) <= max(train_lengths)
""",
        },
        {"test_rows"},
    ),
    "02_why_attention_needs_positions": (
        {
            # permutes both sides: compares attn(x[perm])[perm] with attn(x)[perm]
            "answer_gap": """
def equivariance_gap(attn, x, perm):
    return (attn(x[perm])[perm] - attn(x)[perm]).abs().max().item()
""",
        },
        {"test_gap"},
    ),
    "03_alibi": (
        {
            # right for powers of two; for 12 heads takes the first 4 of the 16-head
            # sequence instead of every other one (visible tests pass, hidden ones do not)
            "answer_slopes": """
def alibi_slopes(num_heads):
    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    m = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = geometric(m)
    if m < num_heads:
        slopes += geometric(2 * m)[: num_heads - m]
    return torch.tensor(slopes, dtype=torch.float64)
""",
        },
        {"test_slopes_12"},
    ),
    "09_sinusoidal_positional_encodings": (
        {
            # exponent i/d instead of 2i/d: the first wavelength is still 2*pi and they still
            # grow, so only the hidden tests see it
            "answer_wavelengths": """
def wavelengths(dim, base=10000.0):
    return 2 * math.pi * base ** (torch.arange(dim // 2, dtype=torch.float64) / dim)
""",
        },
        {"test_wavelengths"},
    ),
}
