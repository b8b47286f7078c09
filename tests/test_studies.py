"""pecourse.lab.studies: intervals, per-sample scores, the studies' shapes and their recordings."""

import inspect
import json

import pytest
import torch

from pecourse.lab import evaluate, studies
from pecourse.lab.data import corpus
from pecourse.lab.model import checkpoint_info, load_checkpoint
from pecourse.lab.results import recorded
from pecourse.lab.train import recipe
from pecourse.positions.multidim import AxialRoPE
from pecourse.positions.rope import RoPE

# --- bootstrap_interval -----------------------------------------------------------------------


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_more_data():
    g = torch.Generator().manual_seed(0)
    small = (torch.rand(20, generator=g) < 0.7).double()
    large = (torch.rand(2000, generator=g) < 0.7).double()
    lo_s, hi_s = studies.bootstrap_interval(small)
    lo_l, hi_l = studies.bootstrap_interval(large)
    assert lo_s <= float(small.mean()) <= hi_s and lo_l <= float(large.mean()) <= hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 4  # ~ 1/sqrt(n): 10x fewer points, ~3x wider
    # a binomial proportion near 0.7 with n = 2000: half-width ~ 1.96 * sqrt(.21 / 2000) = 0.02
    assert 0.015 < (hi_l - lo_l) / 2 < 0.025


def test_bootstrap_interval_is_reproducible_and_degenerate_on_constants():
    x = torch.rand(50, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert studies.bootstrap_interval(x) == studies.bootstrap_interval(x)
    assert studies.bootstrap_interval(x, seed=1) != studies.bootstrap_interval(x, seed=2)
    assert studies.bootstrap_interval([0.5] * 7) == (0.5, 0.5)
    lo90, hi90 = studies.bootstrap_interval(x, level=0.9)
    lo99, hi99 = studies.bootstrap_interval(x, level=0.99)
    assert lo99 <= lo90 and hi90 <= hi99


@pytest.mark.parametrize(
    "values, kwargs, match",
    [
        ([], {}, "at least one"),
        ([1.0, float("nan")], {}, "finite"),
        ([1.0], {"level": 1.0}, "level"),
        ([1.0], {"level": 0.0}, "level"),
        ([1.0], {"resamples": 10}, "resamples"),
    ],
)
def test_bootstrap_interval_refuses(values, kwargs, match):
    with pytest.raises(ValueError, match=match):
        studies.bootstrap_interval(values, **kwargs)


def test_wilson_interval():
    lo, hi = studies.wilson_interval(0, 20)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / 23.8415, abs=1e-4)  # z^2 / (n + z^2)
    lo, hi = studies.wilson_interval(20, 20)
    assert hi == 1.0 and lo == pytest.approx(20 / 23.8415, abs=1e-4)
    lo, hi = studies.wilson_interval(50, 100)
    assert (lo + hi) / 2 == pytest.approx(0.5) and 0.09 < hi - 0.5 < 0.1
    with pytest.raises(ValueError, match="successes"):
        studies.wilson_interval(5, 4)
    with pytest.raises(ValueError, match="trials"):
        studies.wilson_interval(0, 0)


# --- per_sample_accuracy ----------------------------------------------------------------------


def test_per_sample_accuracy_agrees_with_task_accuracy():
    model = load_checkpoint("rope_selective_copy")
    per = studies.per_sample_accuracy(model, "selective_copy", 64, samples=24)
    assert per.shape == (24,) and per.dtype == torch.float64
    # every sequence has the same 8 answers, so the mean over sequences is the token accuracy
    want = evaluate.task_accuracy(model, "selective_copy", 64, samples=24)
    assert float(per.mean()) == pytest.approx(want, abs=1e-6)
    exact = studies.per_sample_accuracy(model, "selective_copy", 64, samples=24, exact=True)
    assert set(exact.tolist()) <= {0.0, 1.0}
    assert torch.all(exact <= per)  # exact match only where every answer token is right
    assert torch.equal(exact == 1.0, per == 1.0)


def test_per_sample_accuracy_refuses_other_models():
    with pytest.raises(TypeError, match="TinyGPT"):
        studies.per_sample_accuracy(torch.nn.Linear(2, 2), "selective_copy", 64)


# --- the studies, on a tiny budget ------------------------------------------------------------


def test_grid_attention_picks_offsets_with_either_scheme():
    for scheme, pos in (
        (RoPE(8), torch.arange(12)),
        (AxialRoPE(8), studies._grid_positions("2d", 3, 4)),
    ):
        model = studies.GridAttention(scheme, vocab=5, d=8)
        logits, probs = model(torch.randint(0, 5, (2, 12)), pos, return_probs=True)
        assert logits.shape == (2, 12, 5) and probs.shape == (2, 12, 12)
        torch.testing.assert_close(probs.sum(-1), torch.ones(2, 12))


def test_grid_width_transfer_runs_and_summarises():
    out = studies.grid_width_transfer(seeds=(3,), steps=2, samples=4, test_widths=(4, 6))
    assert out["seeds"] == [3] and len(out["rows"]) == 2  # 1d and 2d
    for run in out["rows"]:
        for w in (4, 6):
            score = run[f"width_{w}"]
            assert 0 <= score["ci95"][0] <= score["mean"] <= score["ci95"][1] <= 1
            assert 0 <= score["attention_unseen_offsets"] <= 1
        assert run["width_4"]["attention_unseen_offsets"] == 0.0  # narrower than trained: none
    assert out["summary"]["1d"]["width_4"]["per_seed"] == [out["rows"][0]["width_4"]["mean"]]


def test_cope_selective_copy_runs_on_a_tiny_budget():
    out = studies.cope_selective_copy(seeds=(0,), steps=1, samples=2, splits={"dense": 32})
    assert [(r["model"], r["seed"]) for r in out["rows"]] == [
        ("cope_selective_copy", 0),
        ("rope_selective_copy_4000", 0),
    ]
    assert set(out["rows"][0]["dense"]) == {"accuracy", "exact_match"}
    assert [r["train_steps"] for r in out["rows"]] == [1, 1]


def test_text_window_losses_score_the_same_characters_with_and_without_a_marker():
    model = load_checkpoint("nope")
    plain = studies.text_window_losses(model, tokens=256)
    marked = studies.text_window_losses(model, bos=True, tokens=256)
    assert plain.shape == marked.shape == (4, 63)
    text = corpus("validation")[:64]
    with torch.no_grad():  # the first scored prediction of window 0: character 1 from character 0
        first = torch.nn.functional.cross_entropy(model(text[None, :1])[0][0], text[1:2])
    assert float(plain[0, 0]) == pytest.approx(float(first), rel=1e-5)
    assert not torch.allclose(plain, marked)  # the marker changes what NoPE sees


def test_studies_refuse_bad_arguments():
    with pytest.raises(ValueError, match="seeds"):
        studies.grid_width_transfer(seeds=())
    with pytest.raises(TypeError, match="steps"):
        studies.cope_selective_copy(seeds=(0,), steps=1.5)
    with pytest.raises(ValueError, match="name"):
        studies.load("no_such_study")
    with pytest.raises(TypeError, match="name"):
        studies.record({"rows": []})


# --- the recordings the chapters load ---------------------------------------------------------


def _defaults(fn) -> dict:
    if isinstance(fn, studies.Study):  # a declared study: its seeds, models and settings
        return {"seeds": (0, 1, 2), "names": fn.models, **fn.settings}
    return {
        k: p.default
        for k, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _check_summary(rec):
    seeds = sorted({r["seed"] for r in rec["rows"]})
    assert seeds == sorted(rec["seeds"]) and len(seeds) >= 3
    for scheme, splits in rec["summary"].items():
        for split, entry in splits.items():
            metrics = entry if "per_seed" not in entry else {None: entry}
            for metric, spread in metrics.items():
                values = [
                    r[split]["mean"] if metric is None else r[split][metric]["mean"]
                    for r in rec["rows"]
                    if r["scheme"] == scheme
                ]
                assert spread["per_seed"] == values
                assert spread["min"] == min(values) and spread["max"] == max(values)


def test_grid_width_transfer_recording():
    """The summary is the runs, and a changed default makes the shipped recording stale."""
    grid, defaults = studies.load("grid_width_transfer"), _defaults(studies.grid_width_transfer)
    _check_summary(grid)
    assert list(defaults["seeds"]) == grid["seeds"]
    assert grid["protocol"]["train"]["steps"] == defaults["steps"]
    assert grid["protocol"]["test_widths"] == list(defaults["test_widths"])
    assert grid["protocol"]["eval_samples"] == defaults["samples"]
    assert grid["protocol"]["train_width"] == defaults["train_width"]


def test_cope_selective_copy_recording():
    """RoPE got more than six times CoPE's budget, read from the recipes the runs used."""
    from pecourse.lab.train import recipe

    copy = studies.load("cope_selective_copy")
    assert copy["protocol"]["splits"] == studies.COPY_SPLITS
    steps = {r["model"]: r["train_steps"] for r in copy["rows"]}
    assert steps == {m: recipe(m)["train"]["steps"] for m in copy["protocol"]["models"]}
    assert steps["rope_selective_copy_4000"] > 6 * steps["cope_selective_copy"]


def test_windowed_passkey_recording():
    """Three seeds of the base and of every arm, each arm continued from its own seed's base;
    the summary is the runs'; each accuracy is k / samples inside its Wilson interval."""
    rec = studies.load("windowed_passkey")
    assert rec["seeds"] == list(_defaults(studies.windowed_passkey)["seeds"])
    assert rec["protocol"]["models"] == ["rope_passkey", *studies.WINDOWED_ARMS]
    assert rec["protocol"]["distances"] == list(studies.PASSKEY_DISTANCES)
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in rec["protocol"]["models"] for s in rec["seeds"]}
    for arm in studies.WINDOWED_ARMS:  # before continuing: the base's weights in the arm's plan
        for d, spread in rec["summary"]["rope_passkey"]["step0"][arm].items():
            got = [runs["rope_passkey", s]["step0"][arm][d]["accuracy"] for s in rec["seeds"]]
            assert spread["per_seed"] == got
    samples = rec["protocol"]["samples"]
    for r in rec["rows"]:
        for scores in [r["by_distance"], *r.get("step0", {}).values()]:
            for v in scores.values():
                k = round(v["accuracy"] * samples)
                lo, hi = studies.wilson_interval(k, samples)
                assert v["ci95"] == [round(lo, 4), round(hi, 4)]
                assert v["ci95"][0] <= v["accuracy"] <= v["ci95"][1]


def test_windowed_passkey_arms_continue_their_seeds_base(tmp_path):
    """On a tiny budget: seed 1's arms start from seed 1's base, not from the shipped one."""
    out = studies.windowed_passkey(
        seeds=(1,), steps=2, samples=8, distances=(4, 16), log=tmp_path / "log.jsonl"
    )
    kept = tmp_path / "weights"
    for arm in studies.WINDOWED_ARMS:
        info = load_checkpoint(kept / f"{arm}-seed1-steps2").checkpoint
        assert info["train"]["init_from"] == str(kept / "rope_passkey-seed1-steps2")
        assert info["config"]["plan"] == recipe(arm)["model"]["plan"]
    assert out["checkpoints"] == {} and set(out["summary"]) >= set(studies.WINDOWED_ARMS)


def test_counting_and_anchor_recordings():
    counting = studies.load("counting_length_generalisation")
    assert counting["seeds"] == list(_defaults(studies.counting_length_generalisation)["seeds"])
    runs = _runs_by(counting)
    learned_at = _defaults(studies.counting_length_generalisation)["learned_at"]
    ranking = counting["ranking"]  # only models that learned the task at 64 are ranked
    for name in counting["protocol"]["models"]:
        at_64 = [runs[name, s]["length_64"]["mean"] for s in counting["seeds"]]
        assert ranking["learned"][name] == (min(at_64) >= learned_at)
    assert all(ranking["learned"][n] for n in ranking["learned_models"])
    top = [
        counting["summary"][n][f"length_{ranking['at']}"]["mean"] for n in ranking["learned_models"]
    ]
    assert top == sorted(top, reverse=True)
    anchor = studies.load("nope_anchor")
    # seed 0 of rope and nope is the shipped checkpoint: its recorded loss curve is the shipped one
    from pecourse.lab.model import checkpoint_info

    shipped = _runs_by(anchor)["nope", 0]
    assert shipped["loss_curve"] == checkpoint_info("nope")["loss_curve"]


def test_evaluation_recordings_match_their_protocols():
    for name in ("text_extrapolation", "imposed_windows"):
        rec = studies.load(name)
        assert rec["protocol"]["tokens"] == rec["eval_tokens"] == 65536
        for row in rec["rows"]:
            for cells in (row.get(part, row) for part in ("as_trained", "windowed")):
                for n in rec["protocol"]["lengths"]:
                    cell = cells[str(n)]
                    assert cell["ci95"][0] <= cell["perplexity"] <= cell["ci95"][1]


@pytest.mark.slow
def test_text_extrapolation_recording_recomputes():
    """Evaluation only (about 10 s): ALiBi's recorded perplexity at 512, recomputed on the same text."""
    from pecourse.lab.evaluate import perplexity_interval, window_losses

    old = _runs_by(studies.load("text_extrapolation"))["alibi", 0]
    again = perplexity_interval(window_losses(load_checkpoint("alibi"), 512))
    assert again["perplexity"] == pytest.approx(old["512"]["perplexity"], abs=2e-3)
    assert again["ci95"] == pytest.approx(old["512"]["ci95"], abs=2e-4)


def test_record_writes_what_load_reads(tmp_path):
    rec = studies.load("cope_counting")
    path = studies.record(rec, tmp_path)
    assert json.loads(path.read_text()) == rec


@pytest.mark.slow
def test_cope_counting_recording_recomputes():
    """Evaluation only (a few seconds): the shipped RoPE counting model gives the recorded numbers."""
    rec = studies.load("cope_counting")
    row = _runs_by(rec)["rope_counting", 0]
    model = load_checkpoint("rope_counting")
    for n in rec["protocol"]["lengths"]:
        samples = rec["protocol"]["samples"]
        again = studies.per_sample_accuracy(model, "counting", n, samples=samples)
        assert float(again.mean()) == pytest.approx(row[f"length_{n}"]["mean"], abs=1e-4)


def test_extrapolation_seeds_runs_on_a_tiny_budget_and_resumes_from_its_log(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    kw = dict(models=("learned", "alibi"), lengths=(32, 64, 128), tokens=512, steps=1, log=log)
    out = studies.extrapolation_seeds(seeds=(2, 1), **kw)
    assert out["seeds"] == [1, 2] and out["checkpoints"] == {}  # nothing shipped was read
    assert [(r["model"], r["seed"]) for r in out["rows"]] == [
        ("learned", 1),
        ("alibi", 1),
        ("learned", 2),
        ("alibi", 2),
    ]
    learned = out["rows"][0]
    assert learned["128"] is None and learned["64"]["windows"] == 8  # no table rows past 64
    assert out["context_used"] == {
        m: [r["context_used"] for r in out["rows"] if r["model"] == m] for m in ("learned", "alibi")
    }
    assert set(out["summary"]["learned"]) == {
        "32",
        "64",
        "context_used",
        "context_gain",
    }  # no ratio
    alibi = [r for r in out["rows"] if r["model"] == "alibi"]
    assert out["summary"]["alibi"]["ratio"]["per_seed"] == [
        round(r["128"]["perplexity"] / r["32"]["perplexity"], 4) for r in alibi
    ]
    assert len(log.read_text().splitlines()) == 4
    # an interrupted call resumes from the log: nothing is trained again
    monkeypatch.setattr(studies, "_train_one", lambda *a: pytest.fail("retrained a logged run"))
    assert studies.extrapolation_seeds(seeds=(1, 2), **kw)["rows"] == out["rows"]
    with pytest.raises(ValueError, match="models"):
        studies.extrapolation_seeds(models=("rope_pose2",), steps=1)


def test_extrapolation_seeds_recording():
    """Seed 0 of every model is the shipped checkpoint; the other seeds were trained by the study;
    the summary is the runs'."""
    rec = studies.load("extrapolation_seeds")
    assert len(rec["seeds"]) >= 3 and rec["eval_tokens"] == 65536
    models = rec["protocol"]["models"]
    assert {(r["model"], r["seed"]) for r in rec["rows"]} == {
        (m, s) for m in models for s in rec["seeds"]
    }
    for run in rec["rows"]:
        assert run["source"] == (
            "shipped checkpoint" if run["seed"] == 0 else "trained for the studies"
        )
        for n in rec["protocol"]["lengths"]:
            cell = run[str(n)]
            if cell is not None:
                assert cell["ci95"][0] <= cell["perplexity"] <= cell["ci95"][1]
    for m in models:
        mine = sorted((r for r in rec["rows"] if r["model"] == m), key=lambda r: r["seed"])
        for n in map(str, rec["protocol"]["lengths"]):
            if n in rec["summary"][m]:
                spread = rec["summary"][m][n]
                assert spread["per_seed"] == [round(r[n]["perplexity"], 4) for r in mine]


# --- retrieval_seeds and augmentation_seeds ---------------------------------------------------


def test_retrieval_seeds_trains_each_recipe_with_its_own_budget_and_refuses_other_recipes(
    tmp_path, monkeypatch
):
    budgets = []

    def fake_train(model_kwargs, train_kwargs):  # the budget, not the training, is under test
        budgets.append((model_kwargs["plan"], train_kwargs["steps"], train_kwargs["seed"]))
        return load_checkpoint("rope_passkey"), [[0, 1.0]], 0.0

    monkeypatch.setattr(studies, "_train_one", fake_train)
    out = studies.retrieval_seeds(
        seeds=(1,),
        models=("rope_passkey", "alibi_passkey"),
        distances=(8, 96),
        short_distances=(8,),
        samples=16,
        log=tmp_path / "log.jsonl",
    )
    assert budgets == [("rope", 1000, 1), ("alibi", 2500, 1)]
    assert [r["train_steps"] for r in out["rows"]] == [1000, 2500]
    run = out["rows"][0]  # the shipped weights stood in, asked 16 samples
    kept = _runs_by(recorded("retrieval_seeds"))["rope_passkey", 0]["retrieval"]
    assert run["retrieval"]["8"]["trials"] == 16 and kept["8"]["trials"] == 256
    assert run["short"]["8"]["trials"] == 16 and set(run["retrieval"]) == {"8", "96"}
    assert run["learned"] is (run["short"]["8"]["accuracy"] > studies.LEARNED_ACCURACY)
    with pytest.raises(ValueError, match="models"):
        studies.retrieval_seeds(models=("rope",), steps=1)
    with pytest.raises(ValueError, match="seeds"):
        studies.retrieval_seeds(seeds=())


def _runs_by(rec):
    return {(r["model"], r["seed"]): r for r in rec["rows"]}


def test_retrieval_seeds_recording():
    """Seed 0 is the shipped checkpoint; every cell's Wilson interval is recomputed from
    its counts; each run keeps its recipe's budget; the summary is the runs'."""
    from pecourse.lab.train import RECIPES

    rec = studies.load("retrieval_seeds")
    p = rec["protocol"]
    assert len(rec["seeds"]) >= 3 and p["samples"] >= 256
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in p["models"] for s in rec["seeds"]}
    for (m, s), run in runs.items():
        assert run["source"] == ("shipped checkpoint" if s == 0 else "trained for the studies")
        assert run["train_steps"] == RECIPES[m]["train"]["steps"]
        inside = min(run["short"][str(d)]["accuracy"] for d in p["short_distances"])
        assert run["learned"] is (inside > p["learned_above"])
        for part, ds in (("retrieval", p["distances"]), ("short", p["short_distances"])):
            curve = {d: run[part][str(d)]["accuracy"] for d in ds}
            assert run[f"{part}_effective"]["effective"] == evaluate.effective_context_length(curve)
            for d in ds:
                cell = run[part][str(d)]
                assert cell["trials"] == p["samples"]
                lo, hi = evaluate.wilson_interval(cell["successes"], cell["trials"])
                assert cell["ci95"] == [round(lo, 4), round(hi, 4)]
    assert runs["alibi_passkey", 0]["train_steps"] == 2500
    for m in p["models"]:
        mine = [runs[m, s] for s in rec["seeds"]]
        for d in p["distances"]:
            per_seed = rec["summary"][m]["retrieval"][str(d)]["per_seed"]
            assert per_seed == [r["retrieval"][str(d)]["accuracy"] for r in mine]
        effective = [r["retrieval_effective"]["effective"] for r in mine]
        assert rec["summary"][m]["retrieval_effective"]["per_seed"] == effective


def test_augmentation_seeds_recording():
    """Seed 0 is the shipped checkpoint; plain RoPE's seeds are trained exactly as extrapolation_seeds trains them, so they read
    the same at every length; the summary is the runs'."""
    rec = studies.load("augmentation_seeds")
    p = rec["protocol"]
    assert len(rec["seeds"]) >= 3 and rec["eval_tokens"] == 65536
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in p["models"] for s in rec["seeds"]}
    plain = _runs_by(studies.load("extrapolation_seeds"))
    for s in rec["seeds"]:  # the same training run; the recordings were measured apart, so the
        assert (
            runs["rope", s]["loss_curve"] == plain["rope", s]["loss_curve"]
        )  # bootstrap may round
        for n in p["lengths"]:
            mine, theirs = runs["rope", s][str(n)], plain["rope", s][str(n)]
            assert mine["perplexity"] == pytest.approx(theirs["perplexity"], abs=2e-4)
            assert mine["ci95"] == pytest.approx(theirs["ci95"], abs=2e-4)
    for m in p["models"]:
        mine = [runs[m, s] for s in rec["seeds"]]
        assert mine[0]["source"] == "shipped checkpoint"
        for n in p["lengths"]:
            cell = mine[-1][str(n)]
            assert cell["ci95"][0] <= cell["perplexity"] <= cell["ci95"][1]
            per_seed = rec["summary"][m][str(n)]["per_seed"]
            assert per_seed == [round(r[str(n)]["perplexity"], 4) for r in mine]


# --- extension_seeds --------------------------------------------------------------------------

_TINY = dict(lengths=(32, 64, 128), tokens=1024, distances=(8, 16), samples=4, steps=1)


def test_extension_seeds_continues_each_seeds_own_base_and_resumes(tmp_path, monkeypatch):
    """A fine-tune of seed s starts from the base trained with seed s (not the shipped one);
    a resumed call retrains only what its log lacks, and a parent whose weights were lost is
    retrained (the same weights: training is deterministic) before its child."""
    from pecourse.lab.model import load_checkpoint as load

    names = ("rope", "rope_pose_pi_finetune")
    log = tmp_path / "runs.jsonl"
    train_one, started = studies._train_one, []

    def spy(model_kwargs, train_kwargs):
        started.append((train_kwargs.get("init_from"), train_kwargs["seed"]))
        return train_one(model_kwargs, train_kwargs)

    monkeypatch.setattr(studies, "_train_one", spy)
    out = studies.extension_seeds(seeds=(1,), models=names, log=log, **_TINY)
    kept = tmp_path / "weights" / "rope-seed1-steps1"
    assert started == [(None, 1), (str(kept), 1)]
    assert out["checkpoints"] == {}  # nothing shipped: every run had the tiny budget
    base = load(kept)
    shipped = load_checkpoint("rope")
    assert not torch.equal(
        base.state_dict()["tok_emb.weight"], shipped.state_dict()["tok_emb.weight"]
    )
    rows = {r["model"]: r for r in out["rows"]}
    assert set(rows["rope"]["scaled"]) == set(studies.EXTENSION_SCALINGS)
    assert (
        "sliding" in rows["rope"]["scaled"]["none"]
        and "sliding" not in rows["rope"]["scaled"]["PI"]
    )
    assert set(rows["rope_pose_pi_finetune"]["bands"]) == {"0-64", "64-128"}
    assert out["summary"]["rope_pose_pi_finetune"]["64"]["per_seed"] == [
        round(rows["rope_pose_pi_finetune"]["64"]["perplexity"], 4)
    ]

    def numbers(result):  # the runs without their CPU time, which no rerun repeats
        return [{k: v for k, v in r.items() if k != "cpu_seconds"} for r in result["rows"]]

    # drop the last run from the log: its kept weights are read back, nothing is trained
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:-1]) + "\n")
    started.clear()
    again = studies.extension_seeds(seeds=(1,), models=names, log=log, **_TINY)
    assert started == [] and numbers(again) == numbers(out)
    # lose its weights too: only it is trained again, from the kept base
    log.write_text("\n".join(lines[:-1]) + "\n")
    for f in kept.parent.glob("rope_pose_pi_finetune-seed1*"):
        f.unlink()
    started.clear()
    again = studies.extension_seeds(seeds=(1,), models=names, log=log, **_TINY)
    assert started == [(str(kept), 1)] and numbers(again) == numbers(out)
    # lose the base's weights as well: it is retrained, identically, before its child
    log.write_text("\n".join(lines[:-1]) + "\n")
    for f in kept.parent.glob("rope*-seed1*"):
        f.unlink()
    started.clear()
    assert numbers(studies.extension_seeds(seeds=(1,), models=names, log=log, **_TINY)) == numbers(
        out
    )
    assert started == [(None, 1), (str(kept), 1)]


def test_extension_seeds_refuses_a_fine_tune_before_its_base():
    with pytest.raises(ValueError, match="'rope' before 'rope_pi_finetune'"):
        studies.extension_seeds(models=("rope_pi_finetune", "rope"), **_TINY)
    with pytest.raises(ValueError, match="factor"):
        studies.extension_seeds(factor=0.5, **_TINY)


def test_extension_seeds_recording():
    """Seed 0 is the shipped checkpoints; the base text
    model of every seed is trained exactly as extrapolation_seeds trains it, so it reads the
    same; every fine-tune of a seed continued that seed's base; the summary is the runs'."""
    rec = studies.load("extension_seeds")
    p = rec["protocol"]
    assert len(rec["seeds"]) >= 3 and rec["eval_tokens"] == 65536 and p["samples"] >= 256
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in p["models"] for s in rec["seeds"]}
    plain = _runs_by(studies.load("extrapolation_seeds"))
    for s in rec["seeds"]:  # the same run, measured apart: equal up to the last rounded digit
        for n in p["lengths"]:
            mine, theirs = runs["rope", s]["scaled"]["none"][str(n)], plain["rope", s][str(n)]
            assert mine["perplexity"] == pytest.approx(theirs["perplexity"], abs=2e-4)
            assert mine["ci95"] == pytest.approx(theirs["ci95"], abs=2e-4)
        for m in p["models"]:
            assert runs[m, s]["source"] == (
                "shipped checkpoint" if s == 0 else "trained for the studies"
            )
    for m in ("rope_pi_finetune", "rope_pose_pi_finetune"):
        mine = [runs[m, s] for s in rec["seeds"]]
        for n in p["lengths"]:
            assert rec["summary"][m][str(n)]["per_seed"] == [
                round(r[str(n)]["perplexity"], 4) for r in mine
            ]
            assert rec["summary"][m][f"sliding {n}"]["per_seed"] == [
                round(r["sliding"][str(n)]["perplexity"], 4) for r in mine
            ]
    for d in p["distances"]:
        mine = [runs["rope_passkey_pose_pi_finetune", s]["retrieval"][str(d)] for s in rec["seeds"]]
        got = rec["summary"]["rope_passkey_pose_pi_finetune"][f"d{d}"]["per_seed"]
        assert got == [c["accuracy"] for c in mine]
        for c in mine:
            lo, hi = evaluate.wilson_interval(c["successes"], c["trials"])
            assert c["ci95"] == [round(lo, 4), round(hi, 4)] and c["trials"] == p["samples"]


def test_extension_seeds_recording_recomputes():
    """The shipped PoSE-as-published checkpoint, one cell under the full protocol."""
    rec = studies.load("extension_seeds")
    run = _runs_by(rec)["rope_pose_pi_finetune", 0]
    n = rec["protocol"]["extended_window"]
    fresh = evaluate.perplexity_interval(
        evaluate.window_losses(
            load_checkpoint("rope_pose_pi_finetune"), n, tokens=rec["eval_tokens"]
        )
    )
    lo, hi = run[str(n)]["ci95"]
    assert lo <= fresh["perplexity"] <= hi
    assert fresh["perplexity"] == pytest.approx(run[str(n)]["perplexity"], rel=2e-3)


# --- needle_seeds -----------------------------------------------------------------------------


def test_needle_seeds_measures_what_the_evaluation_measures(monkeypatch):
    """A stand-in for training (the shipped weights) makes the study's cells the evaluation's
    cells at the same sample count; non-passkey recipes are refused."""

    def fresh_copy(model_kwargs, train_kwargs):  # the shipped weights, as training returns them:
        from pecourse.lab.model import TinyGPT  # a model without a checkpoint record

        model = TinyGPT(load_checkpoint("t5_passkey").config)
        model.load_state_dict(load_checkpoint("t5_passkey").state_dict())
        return model.eval(), [[0, 1.0]], 0.0

    monkeypatch.setattr(studies, "_train_one", fresh_copy)
    kw = dict(
        lengths=(64, 128), distances=(16, 96), keys=(1, 2), multikey_distances=(16,), samples=8
    )
    out = studies.needle_seeds(seeds=(1,), models=("t5_passkey",), **kw)
    run = out["rows"][0]
    model = load_checkpoint("t5_passkey")
    assert run["grid"] == evaluate.needle_grid(model, (64, 128), (16, 96), key_len=2, samples=8)
    assert set(run["grid"]["64"]) == {"16"}  # 96 does not fit in 64
    cells = evaluate.multikey_cells(model, (1, 2), (16,), samples=8)
    assert {k: run[k] for k in cells} == cells
    assert out["summary"]["t5_passkey"]["accuracy"]["2"]["16"]["per_seed"] == [
        run["accuracy"]["2"]["16"]["accuracy"]
    ]
    with pytest.raises(ValueError, match="models"):
        studies.needle_seeds(models=("rope",), **kw)


def test_needle_seeds_recording():
    """Seed 0 is the shipped checkpoints; each
    run keeps its recipe's budget; every Wilson interval is its counts'; the summary is the runs'."""
    from pecourse.lab.train import RECIPES

    rec = studies.load("needle_seeds")
    p = rec["protocol"]
    assert len(rec["seeds"]) >= 3 and p["samples"] >= 256
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in p["models"] for s in rec["seeds"]}
    for (m, s), run in runs.items():
        assert run["source"] == ("shipped checkpoint" if s == 0 else "trained for the studies")
        assert run["train_steps"] == RECIPES[m]["train"]["steps"]
        cells = [c for row in run["grid"].values() for c in row.values()]
        cells += [c for row in run["accuracy"].values() for c in row.values()]
        for cell in cells:
            lo, hi = evaluate.wilson_interval(cell["successes"], cell["trials"])
            assert cell["ci95"] == [round(lo, 4), round(hi, 4)]
            assert cell["trials"] == p["samples"]
    for m in p["models"]:
        mine = [runs[m, s] for s in rec["seeds"]]
        for n, row in rec["summary"][m]["grid"].items():
            for d, spread in row.items():
                assert spread["per_seed"] == [r["grid"][n][d]["accuracy"] for r in mine]
        for k, row in rec["summary"][m]["accuracy"].items():
            for d, spread in row.items():
                assert spread["per_seed"] == [r["accuracy"][k][d]["accuracy"] for r in mine]


def test_a_recorded_seed_retraces_from_its_recipe():
    """The seeds the studies trained and kept only as numbers come from the shipped recipe
    with that seed: retraining rope with seed 1 for its first 61 steps lands on the loss curve
    that extrapolation_seeds, augmentation_seeds and extension_seeds recorded for it."""
    from pecourse.lab.train import train_recipe

    curves = [
        _runs_by(studies.load(name))["rope", 1]["loss_curve"]
        for name in ("extrapolation_seeds", "augmentation_seeds", "extension_seeds")
    ]
    assert curves[0] == curves[1] == curves[2]  # one training run, measured three ways
    _, rec = train_recipe("rope", out_dir=False, progress=False, seed=1, stop_after=61)
    recorded_curve = dict(map(tuple, curves[0]))
    assert [s for s, _ in rec["loss_curve"]] == [0, 20, 40, 60]
    for step, loss in rec["loss_curve"]:  # bit-identical where it was trained; other CPUs round
        assert abs(loss - recorded_curve[step]) < 0.05, (step, loss, recorded_curve[step])
    assert checkpoint_info("rope")["train"]["seed"] == 0  # seed 1 is not the shipped run
    shipped = dict(map(tuple, checkpoint_info("rope")["loss_curve"]))
    assert abs(shipped[20] - recorded_curve[20]) > 1e-3  # ... and differs from it


def test_sliding_seeds_recording():
    """Seed 0 is the shipped checkpoints; plain RoPE's
    seeds are the runs extension_seeds trained and read the same; the summary is the runs'."""
    rec = studies.load("sliding_seeds")
    p = rec["protocol"]
    assert len(rec["seeds"]) >= 3 and rec["eval_tokens"] == 65536
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in p["models"] for s in rec["seeds"]}
    for m in p["models"]:
        mine = [runs[m, s] for s in rec["seeds"]]
        for n in p["lengths"]:
            assert rec["summary"][m]["sliding"][str(n)]["per_seed"] == [
                round(r["sliding"][str(n)]["perplexity"], 4) for r in mine
            ]
    extension = _runs_by(studies.load("extension_seeds"))
    for s in rec["seeds"]:
        theirs = extension["rope", s]["scaled"]["none"]["sliding"]
        for n, cell in runs["rope", s]["sliding"].items():  # the same weights, measured apart
            assert cell["perplexity"] == pytest.approx(theirs[n]["perplexity"], abs=5e-4)


def test_make_results_reruns_every_recording():
    """`make results` must rewrite every recording: each study is in the Makefile's STUDIES
    list, and every file in pecourse/lab/results comes from a study or the base-crossing run."""
    import re
    from pathlib import Path

    from pecourse.lab.results import recordings

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    listed = set(
        re.search(r"STUDIES := (.*?)\n\n", makefile, re.S).group(1).replace("\\", " ").split()
    )
    assert listed == set(studies.STUDIES)
    made = listed | {"rope_base_crossing"}
    assert set(recordings()) <= made, set(recordings()) - made


def test_the_studies_command_logs_cpu_time_and_resumes_from_its_log_dir(
    tmp_path, monkeypatch, caplog
):
    import logging

    logs, out = tmp_path / "logs", tmp_path / "out"

    def tiny(*, log=None):  # extrapolation_seeds on a budget a test can pay
        return studies.extrapolation_seeds(
            seeds=(1,), models=("alibi",), lengths=(32,), tokens=512, steps=1, log=log
        )

    monkeypatch.setitem(studies.STUDIES, "extrapolation_seeds", tiny)
    monkeypatch.setattr(studies, "PROGRESS", False)  # main turns the bars on
    caplog.set_level(logging.INFO, logger="pecourse.lab.studies")
    argv = ["run", "extrapolation_seeds", "--out", str(out), "--log-dir", str(logs)]
    assert studies.main(argv) == 0
    first = json.loads((out / "extrapolation_seeds.json").read_text())
    assert len((logs / "extrapolation_seeds.jsonl").read_text().splitlines()) == 1
    assert "alibi seed 1, trained for the studies" in caplog.text
    assert f"extrapolation_seeds: {first['cpu_seconds']:.0f} CPU s" in caplog.text
    assert "1 studies:" in caplog.text
    # run again: the logged model is read back, not retrained, and the recording is the same
    monkeypatch.setattr(studies, "_train_one", lambda *a: pytest.fail("retrained a logged run"))
    caplog.clear()
    assert studies.main(argv) == 0
    assert "alibi seed 1 read from" in caplog.text
    again = json.loads((out / "extrapolation_seeds.json").read_text())
    assert again["rows"] == first["rows"]


def test_context_use_scores_each_model_at_its_own_training_length(tmp_path):
    from pecourse.lab.results import validate

    out = studies.context_use(
        seeds=(1,), models=("alibi", "rope_long"), tokens=512, steps=1, log=tmp_path / "log"
    )
    validate(out)
    rows = {r["model"]: r for r in out["rows"]}
    assert rows["alibi"]["train_len"] == 64 and rows["rope_long"]["train_len"] == 256
    assert list(rows["alibi"]["gain"]) == ["2", "4", "8", "16", "32"]
    assert list(rows["rope_long"]["gain"])[-1] == "128"  # up to half of 256
    assert out["context_used"] == {n: [rows[n]["context_used"]] for n in ("alibi", "rope_long")}
    assert out["summary"]["alibi"]["context_used"]["per_seed"] == [rows["alibi"]["context_used"]]


def test_context_use_recording():
    """Every model at every default seed; the summary is the rows'; seed 0 of a recipe is its
    shipped checkpoint, recomputed here for the 64-character RoPE model (a few seconds)."""
    from pecourse.lab.evaluate import context_losses, context_used
    from pecourse.lab.model import load_checkpoint

    rec, defaults = studies.load("context_use"), _defaults(studies.context_use)
    assert rec["protocol"]["models"] == list(defaults["names"])
    assert rec["seeds"] == list(defaults["seeds"]) and rec["eval_tokens"] == defaults["tokens"]
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in defaults["names"] for s in defaults["seeds"]}
    for m in defaults["names"]:
        mine = [runs[m, s] for s in rec["seeds"]]
        assert rec["context_used"][m] == [r["context_used"] for r in mine]
        assert rec["summary"][m]["context_used"]["per_seed"] == rec["context_used"][m]
        assert runs[m, 0]["source"] == "shipped checkpoint"
    # what the recipes' comments say of them (pecourse.lab.train.RECIPES): the long-window model
    # gains from 64 characters and more at every seed, the 64-character ones from fewer
    assert min(rec["context_used"]["rope_long"]) >= 64
    assert max(rec["context_used"]["rope"] + rec["context_used"]["alibi"]) <= 16
    again = context_used(context_losses(load_checkpoint("rope"), tokens=rec["eval_tokens"]))
    assert (
        again["gain"] == runs["rope", 0]["gain"]
        and again["context_used"] == runs["rope", 0]["context_used"]
    )


def test_extension_controls_continue_each_seeds_own_base(tmp_path):
    from pecourse.lab.results import validate

    kw = dict(lengths=(64, 128), tokens=1024, distances=(16,), samples=4, steps=1)
    out = studies.extension_controls(
        seeds=(1,),
        models=("rope_pi_finetune_64", "rope_passkey_finetune"),
        log=tmp_path / "l",
        **kw,
    )
    validate(out)
    runs = _runs_by(out)
    assert set(runs) == {("rope_pi_finetune_64", 1), ("rope_passkey_finetune", 1)}
    assert out["protocol"]["controls"]["rope_pi_finetune_64"] == "rope_pose_pi_finetune"
    assert runs["rope_passkey_finetune", 1]["retrieval"]["16"]["trials"] == 4
    # the text control states the context it uses (at its 256-character training length)
    assert "context_used" in runs["rope_pi_finetune_64", 1]
    assert "context_used" not in runs["rope_passkey_finetune", 1]
    assert set(out["context_used"]) == {"rope_pi_finetune_64"}
    assert out["summary"]["rope_pi_finetune_64"]["sliding 128"]["per_seed"] == [
        runs["rope_pi_finetune_64", 1]["sliding"]["128"]["perplexity"]
    ]
    # each control continued seed 1's own base, kept beside the log
    kept = sorted(p.name for p in (tmp_path / "weights").glob("*.json"))
    assert "rope-seed1-steps1.json" in kept and "rope_passkey-seed1-steps1.json" in kept
    with pytest.raises(ValueError, match="models"):
        studies.extension_controls(models=("rope_pi_finetune",), **kw)


def test_extension_controls_recording():
    """Every control at every default seed, seed 0 the shipped checkpoint; the summary is the
    rows'; one seed-0 cell recomputed from its checkpoint."""
    from pecourse.lab.evaluate import perplexity_interval, window_losses
    from pecourse.lab.model import load_checkpoint

    rec, defaults = studies.load("extension_controls"), _defaults(studies.extension_controls)
    assert rec["protocol"]["models"] == list(defaults["names"])
    assert rec["seeds"] == list(defaults["seeds"]) and rec["eval_tokens"] == defaults["tokens"]
    runs = _runs_by(rec)
    assert set(runs) == {(m, s) for m in defaults["names"] for s in defaults["seeds"]}
    controlled = {m for m, _ in _runs_by(studies.load("extension_seeds"))}
    assert set(rec["protocol"]["controls"].values()) <= controlled
    for m in defaults["names"]:
        assert runs[m, 0]["source"] == "shipped checkpoint"
        for cell, spread in rec["summary"][m].items():
            key = ("retrieval", cell[1:], "accuracy") if cell.startswith("d") else None
            if key is None:
                kind, n = ("sliding", cell.split()[1]) if " " in cell else (None, cell)
            got = [
                runs[m, s][key[0]][key[1]][key[2]]
                if key
                else (runs[m, s][kind][n] if kind else runs[m, s][n])["perplexity"]
                for s in rec["seeds"]
            ]
            assert spread["per_seed"] == got, (m, cell)
    model = load_checkpoint("rope_pi_finetune_64")
    again = perplexity_interval(window_losses(model, 64, tokens=rec["eval_tokens"], mode="sliding"))
    assert again == runs["rope_pi_finetune_64", 0]["sliding"]["64"]


# --- the study layer ---------------------------------------------------------------------------

DECLARED = [name for name, study in studies.STUDIES.items() if isinstance(study, studies.Study)]


@pytest.mark.parametrize("name", DECLARED)
def test_a_declared_studys_recording_is_its_rows_read_by_its_declaration(name):
    """Every declared study's recording: three or more seeds, every (model, seed) once, seed 0
    of a shipped recipe its checkpoint, and its protocol, summary and added fields exactly what
    the declaration reads from its rows (so a changed declaration makes the file stale)."""
    from pecourse.lab.train import RECIPES

    study, rec = studies.STUDIES[name], studies.load(name)
    assert len(rec["seeds"]) >= 3 and rec["protocol"]["models"] == list(study.models)
    runs = _runs_by(rec)
    assert len(runs) == len(rec["rows"])
    assert set(runs) == {(m, s) for m in study.models for s in rec["seeds"]}
    for (m, s), run in runs.items():
        shipped = m in RECIPES and s == 0
        assert run["source"] == ("shipped checkpoint" if shipped else "trained for the studies")
    again = study.reread(rec)
    assert set(again) == set(rec)
    for key in again:
        assert rec[key] == again[key], key


def test_summarise_reads_each_measurement_over_seeds_and_skips_what_a_seed_lacks():
    runs = [
        {
            "model": "a",
            "seed": 0,
            "64": {"perplexity": 5.0, "ci95": [4, 6]},
            "128": None,
            "gain": {"2": {"loss": 0.1}},
            "used": 8,
            "windows": 4,
        },
        {
            "model": "a",
            "seed": 1,
            "64": {"perplexity": 7.0, "ci95": [6, 8]},
            "128": {"perplexity": 9.0},
            "gain": {"2": {"loss": 0.3}},
            "used": 16,
            "windows": 4,
        },
    ]
    got = studies.summarise(runs, ["a"])["a"]
    assert got["64"] == {"per_seed": [5.0, 7.0], "mean": 6.0, "min": 5.0, "max": 7.0}
    assert "128" not in got and "windows" not in got  # missing at a seed; a size, not a number
    assert got["gain"]["2"]["per_seed"] == [0.1, 0.3] and got["used"]["max"] == 16


def test_a_declared_study_refuses_bad_settings_and_models():
    with pytest.raises(TypeError, match="lenghts"):
        studies.extrapolation_seeds(lenghts=(64,))
    with pytest.raises(ValueError, match="lengths"):
        studies.extrapolation_seeds(lengths=(0,))
    with pytest.raises(ValueError, match="models"):
        studies.extrapolation_seeds(models=("rope_long",))
    with pytest.raises(ValueError, match="steps"):
        studies.extrapolation_seeds(steps=0)


@pytest.mark.slow
def test_the_controls_recompute_from_their_checkpoints():
    """One row of each control recording, from a shipped checkpoint (evaluation only): the
    windowed arms' starting point (rope_passkey's weights in the swa_rope layout, step 0) and
    the sinusoidal model of the one-setup table at 64."""
    from pecourse.lab.evaluate import needle_outcomes, perplexity_interval, retrieval, window_losses
    from pecourse.lab.model import ModelConfig, TinyGPT

    rec = studies.load("windowed_passkey")
    base = load_checkpoint("rope_passkey")
    arm = TinyGPT(ModelConfig(**recipe("rope_passkey_swa_rope")["model"])).eval()
    arm.load_state_dict(base.state_dict())
    p = rec["protocol"]
    got = retrieval(
        needle_outcomes(arm, p["distances"], length=64, samples=p["samples"], key_len=2)
    )
    recorded_row = _runs_by(rec)["rope_passkey", 0]["step0"]["rope_passkey_swa_rope"]
    assert {str(d): c["accuracy"] for d, c in got.items()} == {
        d: c["accuracy"] for d, c in recorded_row.items()
    }
    setup = studies.load("embedding_setup")
    again = perplexity_interval(window_losses(load_checkpoint("sinusoidal"), 64))
    cell = _runs_by(setup)["sinusoidal", 0]["64"]
    assert again["perplexity"] == pytest.approx(cell["perplexity"], abs=2e-3)


# --- chapters 01, 03 and 07: the table, the windows and the far keys -----------------------------


def test_table_extension_measures_what_its_tables_are(tmp_path):
    """One training step at seed 1: the copied and random tables leave the first 64 slots as
    trained, interpolation ends on the old first and last rows, a rank-one table has all its
    variance on one direction, and the paired difference is the difference of the slot losses."""
    old = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    tables = studies._extended_tables(old, (3,))
    assert set(tables) == {"random 3", "copied", "interpolated"}
    assert torch.equal(tables["copied"][64:], old) and torch.equal(tables["random 3"][:64], old)
    torch.testing.assert_close(tables["interpolated"][[0, 127]], old[[0, 63]])
    ramp = torch.linspace(-1, 1, 64)[:, None] * torch.randn(1, 8)
    assert studies._dial_share(ramp) == pytest.approx(1.0)
    assert studies._dial_share(torch.eye(64)) == pytest.approx(1 / 63, rel=1e-6)
    out = studies.table_extension(seeds=(1,), tokens=1024, steps=1, log=tmp_path / "log")
    row = out["rows"][0]
    assert row["copied"]["64"] == row["trained"] and row["interpolated"]["64"] != row["trained"]
    assert row["copied"]["128"]["windows"] == 8 and isinstance(row["context_used"], int)
    diff = row["copied_minus_random"]["3"]["mean"]
    assert diff == pytest.approx(
        row["copied"]["new_slots"]["loss"] - row["random 3"]["new_slots"]["loss"], abs=2e-4
    )
    assert out["summary"]["learned"]["dial_share"]["per_seed"] == [row["dial_share"]]


def test_alibi_windows_of_a_head_without_content_are_its_prior():
    """With the queries zeroed every score is the bias alone, so each measured window is the
    prior, with an interval of width zero; the shipped model's steepest head keeps its prior."""
    model = load_checkpoint("alibi")
    blind = load_checkpoint("alibi")
    with torch.no_grad():
        for block in blind.blocks:
            block.attn.q_proj.weight.zero_()
            if block.attn.q_proj.bias is not None:
                block.attn.q_proj.bias.zero_()
    s = {"length": 256, "queries": 64, "tokens": 1024, "shares": (0.5, 0.9)}
    got = studies.alibi_windows.measure(s)(blind, "alibi")
    for cell in got["heads"].values():
        for layer in range(4):
            for share in ("0.5", "0.9"):
                w = cell[f"layer {layer}"][share]
                assert w["distance"] == cell[f"prior_{share}"] and w["ci95"] == [w["distance"]] * 2
    assert [c["prior_0.9"] for c in got["heads"].values()] == [9, 36, 131, 189]
    swap = got["slope_swap"]
    assert swap["all steepest"]["perplexity"] != swap["as trained"]["perplexity"]
    trained = studies.alibi_windows.measure(s)(model, "alibi")["heads"]["1/4"]
    assert abs(trained["layer 0"]["0.9"]["distance"] - trained["prior_0.9"]) <= 2


def test_t5_far_keys_edits_only_the_untrained_buckets():
    """A model whose far buckets already hold the last trained value is unchanged by
    copying it; the last bucket training reached at 64 is T5's bucket of distance 63."""
    from pecourse.positions.relative import t5_bucket

    model = load_checkpoint("t5")
    with torch.no_grad():
        for block in model.blocks:
            block.attn.scheme.table.weight[27:] = block.attn.scheme.table.weight[26]
    s = {"length": 128, "tokens": 1024, "mid": (20, 61)}
    got = studies.t5_far_keys.measure(s)(model, "t5")
    assert got["last_trained_bucket"] == int(t5_bucket(torch.tensor(-63), bidirectional=False))
    assert got["far buckets = last trained"]["change"] == {"mean": 0.0, "ci95": [0.0, 0.0]}
    assert got["far keys masked"]["change"]["mean"] != 0.0
    assert got["128"]["windows"] == 8 and isinstance(got["context_used"], int)


def test_table_finetune_starts_from_the_extended_tables(tmp_path):
    """A fine-tune of one step at a negligible learning rate leaves each extended model where
    table_extension measured it (same base, same tables): the fine-tune starts from the
    extended weights, not from a fresh model, and trains at 128."""
    tiny = {"seeds": (1,), "tokens": 1024, "steps": 1}
    before = studies.table_extension(**tiny, random_seeds=(3,), log=tmp_path / "a.jsonl")
    after = studies.table_finetune(
        **tiny,
        train={"steps": 1, "lr": 1e-7, "warmup": 0, "batch_size": 2, "data": "text"},
        log=tmp_path / "b.jsonl",
    )
    old, new = before["rows"][0], after["rows"][0]
    for label in ("random 3", "copied", "interpolated"):
        for n in ("64", "128"):
            assert new[label][n]["perplexity"] == pytest.approx(
                old[label][n]["perplexity"], rel=1e-3
            )
        assert new[label]["128"]["windows"] == 8 and new[label]["loss_curve"][0][0] == 0
        assert isinstance(new[label]["context_used"], int)
    assert after["summary"]["learned"]["copied"]["128"]["per_seed"] == [
        new["copied"]["128"]["perplexity"]
    ]
