"""pecourse: positional encoding in transformers, built from scratch.

The package is organised around the four places where position enters attention
(see ``pecourse.attention``): the input, the queries and keys, the scores, and the
values and outputs. Each family of schemes lives in one module of ``pecourse.positions``.

Three parts: the schemes (``attention``, ``positions``, ``kernels``, ``derivations``), the lab
(``lab``: the tiny trained models, their recordings and the studies that make them), and the
course tooling (``course``, ``exercises``, ``flashcards`` and ``cards``, ``book``, ``report``).
"""

__version__ = "0.1.0"
