"""The lab: the tiny trained models and the studies the chapters read.

``model`` (TinyGPT: a decoder whose position handling is a plan of schemes from
:mod:`pecourse.positions`), ``data`` (the King James Bible as characters, and the synthetic
tasks), ``train`` (the training loop, the shipped recipes and the studies' own), ``evaluate``
(the evaluation protocol: window losses, retrieval outcomes, intervals), ``studies`` (studies
declared as data and the one runner that trains, measures and records them), ``base_crossing`` (chapter 16's one-head retriever),
``results`` (the recordings and their schema) and ``checkpoints`` (the shipped weights).
"""
