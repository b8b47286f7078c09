"""pecourse: positional encoding in transformers, built from scratch.

The package is organised around the four places where position enters attention
(see ``pecourse.attention``): the input, the queries and keys, the scores, and the
values and outputs. Each family of schemes lives in one module of ``pecourse.positions``.
"""

__version__ = "0.1.0"
