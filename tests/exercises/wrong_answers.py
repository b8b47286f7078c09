"""Plausible wrong answers, one per exercise, and the parts each must fail.

Each entry replaces some answer cells (by ``grade_id``) of a correct submission. The
grader must give partial credit: exactly the listed parts fail, the others pass. Many of
these pass the visible tests and are caught only by the hidden ones.
"""

WRONG = {
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
