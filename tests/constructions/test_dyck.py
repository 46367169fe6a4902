"""Balanced Dyck: the language task, three exact two-layer constructions, and the attention metrics."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_lens.constructions import build
from sandbox_lens.constructions.dyck import MAX_LENGTH, build_dyck
from sandbox_lens.interp.errors import AutomatonError, ConstructionError, LengthError, VocabularyError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.tasks.dyck import Dyck, parse_dyck_spec
from sandbox_lens.interp.verify import verify
from sandbox_lens.interp.verify.dyck import default_bands
from sandbox_lens.probes.dyck import (
    PROBE_INPUT,
    attention_variation,
    balance_violation,
    layer_patterns,
    random_attention_baseline,
    random_attention_baseline_mc,
    stack_top_mass,
)

VARIANTS = ["stack", "uniform", "balanced"]


# -- the language ------------------------------------------------------------------------------
def test_sampler_is_reproducible_valid_and_follows_the_exact_distribution():
    lang = Dyck(2, 3, q=0.6)
    words = lang.sample(3000, 12, seed=4)
    assert np.array_equal(words, lang.sample(3000, 12, seed=4))
    for w in words[:200]:
        lang.check(w)
    # next-token frequencies after the fixed prefix "(" match the exact distribution
    prefix = lang.encode("(")
    follow = words[words[:, 0] == prefix[0]][:, 1]
    freq = np.bincount(follow, minlength=4) / len(follow)
    assert np.abs(freq - lang.next_token_distribution(prefix)).max() < 0.04


@given(st.integers(1, 3), st.integers(1, 4), st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_exact_distributions_are_distributions_over_valid_brackets(k, D, seed):
    lang = Dyck(k, D)
    w = lang.sample(1, 15, seed=seed)[0]
    dists = lang.distributions(w)
    assert np.allclose(dists.sum(axis=1), 1.0)
    for t in range(len(w)):  # every sampled bracket had positive probability
        assert dists[t, w[t]] > 0


def test_enumeration_and_closing_prefixes():
    assert {Dyck(1, 2).decode(w) for w in Dyck(1, 2).all_prefixes(3)} == {"(()", "()("}
    assert {Dyck(2, 2).decode(w) for w in Dyck(2, 2).all_prefixes(2)} == {"((", "([", "[(", "[[", "()", "[]"}
    for w in Dyck(2, 4).closing_prefixes(50, (5, 9), seed=1):
        assert 5 <= len(w) <= 9 and w[-1] % 2 == 1


def test_bad_words_and_specs():
    lang = Dyck(2, 2)
    with pytest.raises(AutomatonError, match="unmatched"):
        lang.check(lang.encode("(]"))
    with pytest.raises(AutomatonError, match="depth exceeds"):
        lang.check(lang.encode("((("))
    with pytest.raises(VocabularyError):
        lang.encode("(x")
    with pytest.raises(AutomatonError):
        parse_dyck_spec("2;4")
    with pytest.raises(AutomatonError):
        Dyck(0, 3)


# -- the constructions -------------------------------------------------------------------------
def assert_exact(r):
    assert r.accuracy == 1.0, r.mismatches
    assert r.details["max_tv"] < 1e-5


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("k, D", [(2, 4), (1, 3), (3, 2)])
def test_exact_in_distribution_and_at_400_500_and_900_1000(variant, k, D):
    r = verify(build_dyck(Dyck(k, D), 1000, variant), samples=12, exhaustive_upto=6, seed=1)
    assert_exact(r)
    assert set(r.details["bands"]) == {"all prefixes of length 6", "2-28", "400-500", "900-1000"}
    assert all(v["accuracy"] == 1.0 for v in r.details["bands"].values())


@pytest.mark.parametrize("variant", ["uniform", "balanced"])
def test_a_minimal_first_layer_is_exact_and_its_layer_2_input_ignores_positions(variant):
    """first_layer=minimal (Assumption 10 exactly): still exact far beyond the training band, and layer 2's
    input at a bracket of fixed type and depth is the same wherever the bracket sits; the full first layer's
    moves with it (its positional coordinates) and β is refused there unless positions are subtracted."""
    from sandbox_lens.probes.dyck import (
        MINIMAL_TOLERANCE,
        balance_violation_of_model,
        layer_input_by_type_and_depth,
        minimal_first_layer_gap,
    )

    lang = Dyck(2, 4)
    spec = build_dyck(lang, 600, variant, first_layer="minimal")
    assert_exact(verify(spec, samples=12, exhaustive_upto=6, seed=2))
    model = to_hooked(spec)
    for moved in (1, 5, 40):
        here = layer_input_by_type_and_depth(model, lang)
        there = layer_input_by_type_and_depth(model, lang, moved=moved)
        assert all(np.array_equal(here[key], there[key]) for key in here)
    assert minimal_first_layer_gap(model, lang) == 0.0
    assert balance_violation_of_model(model, lang) == pytest.approx(balance_violation(spec), abs=1e-6)
    full = to_hooked(build_dyck(lang, 600, variant))
    assert minimal_first_layer_gap(full, lang) > 50 * MINIMAL_TOLERANCE  # 4 positions in 600: log_sink and pos move
    with pytest.raises(ConstructionError, match="not minimal"):
        balance_violation_of_model(full, lang)
    with pytest.raises(ConstructionError, match="stack"):
        build_dyck(lang, 10, "stack", first_layer="minimal")
    with pytest.raises(ConstructionError, match="first_layer"):
        build("dyck", lang, 10, variant="uniform", first_layer="tiny")


def test_two_attention_layers_and_declared_length():
    for variant in VARIANTS:
        spec = build_dyck(Dyck(2, 4), 100, variant)
        assert (spec.n_layers, spec.attention_layers, spec.n_heads) == (2, 2, 1)
    with pytest.raises(LengthError):
        verify(build_dyck(Dyck(2, 4), 100, "stack"), bands=[(400, 500)])
    assert default_bands(600) == [(2, 28), (400, 500), (591, 600)]


@pytest.mark.parametrize("variant, control", [("balanced", "unscaled"), ("uniform", "zeroed")])
def test_negative_controls_fail(variant, control):
    r = verify(build_dyck(Dyck(2, 4), 500, variant, as_printed=control), samples=60, exhaustive_upto=6)
    assert r.details["bands"]["2-28"]["accuracy"] < 0.9
    assert r.details["bands"]["400-500"]["accuracy"] < 0.7
    assert r.details["max_tv"] > 0.1


def test_float32_refused_where_the_balanced_gain_is_too_large():
    spec = build_dyck(Dyck(2, 4), 1000, "balanced", seed=0, sigma=3.0)
    assert spec.verified_dtypes == ("float64",)
    with pytest.raises(ConstructionError, match="float64"):
        verify(spec, samples=1)
    assert_exact(verify(spec, samples=5, exhaustive_upto=4, dtype="float64", bands=[(2, 28), (900, 1000)]))


def test_bad_options():
    with pytest.raises(ConstructionError, match="variant"):
        build_dyck(Dyck(2, 4), 10, "queue")
    with pytest.raises(ConstructionError, match="as_printed"):
        build_dyck(Dyck(2, 4), 10, "stack", as_printed="zeroed")
    with pytest.raises(LengthError):
        build("dyck", Dyck(2, 4), 10**6)


# -- the metrics -------------------------------------------------------------------------------
def test_stack_top_mass_separates_the_variants():
    lang = Dyck(2, 4)
    words = lang.sample(10, 28, seed=2)
    mass = {v: stack_top_mass(to_hooked(build_dyck(lang, 64, v)), lang, words)[0] for v in VARIANTS}
    assert mass["stack"] > 0.999
    uniform_share = np.mean([1.0 / (t + 1) for _ in words for t in range(29)])
    assert abs(mass["uniform"] - uniform_share) < 1e-6
    assert mass["balanced"] < 0.3


def test_balance_violation_is_zero_exactly_for_the_balanced_constructions():
    lang = Dyck(2, 4)
    assert balance_violation(build_dyck(lang, 64, "uniform")) < 1e-12
    for seed in range(3):
        assert balance_violation(build_dyck(lang, 64, "balanced", seed=seed)) < 1e-12
    assert balance_violation(build_dyck(lang, 64, "balanced", as_printed="unscaled")) > 0.1
    assert balance_violation(build_dyck(lang, 64, "uniform", as_printed="zeroed")) > 0.1
    assert balance_violation(build_dyck(lang, 64, "stack")) > 0.1  # exact, but by positions, not balance


def test_attention_variation_and_random_baseline():
    lang = Dyck(2, 4)
    probe = lang.encode(PROBE_INPUT)
    pats = {v: layer_patterns(to_hooked(build_dyck(lang, 32, v)), probe, 1)[0] for v in VARIANTS}
    assert attention_variation(pats["stack"], pats["stack"]) == 0.0
    assert attention_variation(pats["stack"], pats["uniform"]) == attention_variation(pats["uniform"], pats["stack"])
    assert attention_variation(pats["stack"], pats["uniform"]) > 5.0
    baseline = random_attention_baseline(len(probe) + 1)
    assert baseline == pytest.approx(3.1013272675, abs=1e-9)  # 2 Σ_{m=1..17} (2/(m+1) − 1/m)
    assert random_attention_baseline(1) == 0.0  # one key: every pattern is the same
    mc = random_attention_baseline_mc(len(probe) + 1, samples=3000, seed=0)
    assert abs(mc - baseline) < 0.03  # Monte Carlo agrees within its error (sd ≈ 0.01 at 3000 samples)
    with pytest.raises(VocabularyError):
        attention_variation(np.zeros((2, 2)), np.zeros((3, 3)))


# -- CLI and saved models -------------------------------------------------------------------------
def test_cli_verify_dyck_json_and_saved_model(tmp_path, capsys):
    # In-process (test_cli covers the subprocess entry points): the same code, no interpreter start-up.
    from sandbox_lens.interp.cli import main

    out = tmp_path / "dyck"
    assert (
        main(["build", "dyck", "--dyck", "2,4", "--variant", "balanced", "--seed", "5", "-T", "500", "--out", str(out)])
        == 0
    )
    capsys.readouterr()
    assert main(["verify", "--model", str(out), "--samples", "10", "--exhaustive-upto", "5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["accuracy"] == 1.0 and d["task"] == "Dyck_{2,4}" and d["kind"] == "dyck" and d["attention_layers"] == 2
    assert (
        set(d["details"]["bands"]) == {"all prefixes of length 5", "2-28", "400-500"} and d["details"]["max_tv"] < 1e-5
    )
    assert (
        main(
            [
                "verify",
                "dyck",
                "--dyck",
                "2,4",
                "--variant",
                "uniform",
                "-T",
                "50",
                "-O",
                "as_printed=zeroed",
                "--samples",
                "20",
                "--exhaustive-upto",
                "4",
            ]
        )
        == 1
    )
    assert "NOT EXACT" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("T, samples", [(1000, 200), (MAX_LENGTH, 100)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_exact_with_many_samples_at_long_lengths(variant, T, samples):
    assert_exact(verify(build_dyck(Dyck(2, 4), T, variant), samples=samples, seed=9))


def test_balance_read_off_a_model_matches_the_spec_and_the_contrastive_penalty():
    """β from a model's own weights equals β from the spec on the constructions; the contrastive
    regulariser (eq. 3.40) costs an exact construction nothing and a random network something."""
    import torch

    from sandbox_lens.constructions import build, build_model
    from sandbox_lens.interp.tasks.batches import DyckTask, step_rng
    from sandbox_lens.interp.train import ModelShape
    from sandbox_lens.interp.train import build_twin as twin_model
    from sandbox_lens.interp.train.regularise import contrastive_penalty
    from sandbox_lens.probes.dyck import balance_violation_of_model

    lang = Dyck(2, 4)
    for variant, control in (("uniform", ""), ("balanced", ""), ("stack", ""), ("balanced", "unscaled")):
        spec = build("dyck", lang, 40, variant=variant, as_printed=control)
        model = to_hooked(spec)  # float32; the full first layer's positions come from W_pos
        assert balance_violation_of_model(model, lang, subtract_positions=True) == pytest.approx(
            balance_violation(spec), abs=1e-6
        )
    task = DyckTask(lang, 28)
    batch = task.batch(step_rng(0, 0), 16)
    exact = build_model("dyck", lang, 40, variant="balanced")
    random = twin_model(task, ModelShape(n_layers=2, d_model=32, n_heads=1, n_ctx=40), seed=0)
    with torch.inference_mode():
        costs = {}
        for name, model in (("exact", exact), ("random", random)):
            logits = model(torch.from_numpy(batch.tokens), return_type="logits")
            costs[name] = float(contrastive_penalty(model, batch.tokens, logits, lang, seed=0, step=3))
    assert costs["exact"] < 1e-6 < 1e-2 < costs["random"]
