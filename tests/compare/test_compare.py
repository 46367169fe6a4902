"""`interp compare`: canonical coordinates, the comparison's findings, the report, the CLI."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.compare import TWIN, compare
from sandbox_lens.interp.compare.analyse import comparison_for
from sandbox_lens.interp.compare.automaton import AutomatonComparison
from sandbox_lens.interp.compare.canonical import canonical
from sandbox_lens.interp.compare.dyck import DyckComparison
from sandbox_lens.interp.errors import CheckpointError, ConstructionError
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.train import ModelShape, TrainConfig, train

ROOT = Path(__file__).resolve().parents[2]
TINY_TRAIN = TrainConfig(steps=40, batch=16, eval_every=20, eval_size=64, warmup=5, lr=3e-3)
FAST = dict(samples=40, examples=3, mask_steps=20, causal_pairs=0, progress=False)  # causal: where checked


def test_canonical_coordinates_fold_the_prefix_into_one_key():
    p = np.tril(np.random.default_rng(0).random((6, 6)))
    p /= p.sum(1, keepdims=True)
    c = canonical(p, 2)  # two prefix tokens, a word of 4
    assert c.shape == (4, 5)
    assert np.allclose(c.sum(1), 1.0) and np.allclose(c[:, 0], p[2:, :2].sum(1))
    assert np.array_equal(canonical(p, 1), p[1:])


def test_dyck_latents_and_references_follow_the_stack():
    comp = DyckComparison(Dyck(2, 4))
    word = comp.lang.encode("[(())]")
    data = comp.inputs(None, word[None])
    depth, _ = data.latents["depth"]
    top, _ = data.latents["stack-top type"]
    assert depth[0].tolist() == [0, 1, 2, 3, 2, 1, 0]
    assert top[0].tolist() == [2, 1, 0, 0, 0, 1, 2]  # ( is type 0, [ type 1, k = 2 "empty"
    refs = comp.references(word)
    assert refs["stack top"].shape == (6, 7) and refs["stack top"][3].argmax() == 2  # after [(() the top is the ( at 2
    assert all(np.allclose(r.sum(1), 1.0) for r in refs.values())
    assert data.score_mask[0].tolist() == [False, False, False, True, True, True, False]


def test_gridworld_latent_and_boundary_reference():
    comp = AutomatonComparison(get_automaton("grid3"), 6)
    assert "last boundary" in comp.reference_names and comp.latent_names[-1] == "distance to the last boundary"
    model = comp.constructions(["gridworld"], 0)["gridworld"]
    word = np.array([1, 1, 0, 1, 1, 1])  # R R L R R R from state 0: 1 2 1 2 2 2
    data = comp.inputs(model, word[None])
    P = data.prefix
    assert data.targets[0, P:].tolist() == [1, 2, 1, 2, 2, 2]
    assert data.latents["distance to the last boundary"][0][0, P:].tolist() == [1, 0, 1, 0, 0, 0]
    assert comp.references(word)["last boundary"].argmax(1).tolist() == [0, 2, 2, 4, 5, 6]


@pytest.fixture(scope="module")
def dyck_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare_dyck")
    comp = DyckComparison(Dyck(2, 4))
    train(comp.task, ModelShape(n_layers=2, d_model=24, n_heads=1, d_mlp=24), TINY_TRAIN, out / "twin")
    report = compare(comp, out, theorem3_steps=30, corollary3_steps=10, **FAST)
    return report, json.loads((out / "metrics.json").read_text())


def test_dyck_comparison_finds_what_the_constructions_do(dyck_report):
    _, m = dyck_report
    assert set(m) >= {"probes", "attention", "ablation", "pruning", "circuits"}
    assert set(m["models"]) == {"stack", "uniform", "balanced", TWIN}
    for name in ("stack", "uniform", "balanced"):
        assert m["models"][name]["accuracy"] == 1.0
        depth = m["probes"][name]["depth"]
        # the layer-1 head writes the depth: readable right after it, not before it
        assert depth["first_readable"] == "blocks.0.hook_resid_mid"
        assert (
            depth["accuracy"]["blocks.0.hook_resid_mid"] == 1.0 and depth["accuracy"]["blocks.0.hook_resid_pre"] < 0.9
        )
        # the layer-2 head writes the stack-top type
        assert m["probes"][name]["stack-top type"]["first_readable"] == "blocks.1.hook_resid_mid"
        # the second-layer head is essential (others fixed) and survives pruning
        ab = m["ablation"][name]
        assert ab["zero"]["L1H0"] <= ab["chance"] + 0.05
        assert "L1H0" in m["pruning"][name]["greedy"]["surviving"]
    stack = m["attention"]["stack"]["L1H0"]
    assert stack["best_reference"] == "stack top" and stack["references"]["stack top"]["argmax_agreement"] == 1.0
    assert m["attention"]["uniform"]["L1H0"]["references"]["stack top"]["argmax_agreement"] < 0.9
    assert len(m["attention"]["matching"]["stack"]) == 2  # the twin's two heads, each matched to one
    t3 = m["pruning"]["theorem3"]
    assert abs(t3["kept_fraction"] - 0.5) < 1e-3 and 0.0 <= t3["max_tv"] <= 1.0 and t3["target"] == "stack"
    c3 = t3["corollary3"]
    assert c3["shared_identical"] and set(c3["targets"]) == {"stack", "uniform"}


def test_report_is_one_self_contained_file(dyck_report):
    report, _ = dyck_report
    page = report.read_text()
    assert page.count("data:image/png;base64,") >= 3  # attention side by side, probes, ablation
    assert "CircuitsVis" in page and "stack top" in page and "Corollary 3" in page
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=[\"']?(https?:|//)", page)
    assert not re.search(r"<img[^>]+src=[\"'](?!data:)", page)  # every picture inlined


def test_interp_report_rebuilds_the_page_from_files_without_a_model(dyck_report, tmp_path):
    """`interp report DIR` re-renders report.html from metrics.json + patterns.npz: no model, no analysis."""
    import shutil

    report, _ = dyck_report
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("metrics.json", "patterns.npz"):
        shutil.copy(report.parent / name, copy / name)
    probe = (
        "import sys; from sandbox_lens.interp.cli import main; code = main(['report', sys.argv[1]]); "
        "loaded = [m for m in ('sandbox_lens.interp.compare.analyse', 'transformer_lens', 'sandbox_lens.probes.ablation') if m in sys.modules]; "
        "print('LOADED', loaded); sys.exit(code)"
    )
    r = subprocess.run([sys.executable, "-c", probe, str(copy)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "LOADED []" in r.stdout
    ids = re.compile(r"circuits-vis-[0-9a-f-]+|\bid=\"[^\"]*\"|getElementById\(\"[^\"]*\"\)")
    assert ids.sub("", (copy / "report.html").read_text()) == ids.sub("", report.read_text())
    (copy / "patterns.npz").unlink()
    code = main(["report", str(copy)])
    assert code == 2  # a one-line refusal, not a traceback


def test_report_renders_in_headless_chromium(dyck_report, tmp_path):
    from browser import render, require_chromium

    require_chromium()
    report, _ = dyck_report
    # a window taller than the page: the screenshot holds all of it, down to the last line
    r = render(report, tmp_path / "report.png", height=16000)
    assert r.external_requests == []
    assert "Constructed vs trained circuits" in r.dom and "<canvas" in r.dom  # circuitsvis drew its view
    import matplotlib.image

    pixels = matplotlib.image.imread(r.screenshot)[..., :3]
    ink = (pixels.mean(-1) < 0.9).any(1)  # rows with anything drawn on them
    last = int(np.nonzero(ink)[0].max())
    assert last < pixels.shape[0] - 200, "the page is longer than the screenshot"
    # every part of the page has content: no section rendered blank (images failing to decode, an empty plot)
    for part in np.array_split(ink[: last + 1], 8):
        assert part.mean() > 0.2, "a stretch of the page is blank"
    assert pixels[: last + 1].std() > 0.05 and (pixels[: last + 1].mean(-1) < 0.5).mean() > 0.01


# slow: the dyck comparison (dyck_report) keeps compare end to end in `make test`
@pytest.mark.slow
def test_automaton_comparison_on_parity(tmp_path):
    comp = comparison_for("parity", length=8)
    train(comp.task, ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32), TINY_TRAIN, tmp_path / "twin")
    compare(comp, tmp_path, constructions=["modular_counter", "prefix_scan"], **{**FAST, "causal_pairs": 64})
    m = json.loads((tmp_path / "metrics.json").read_text())
    counter = m["probes"]["modular_counter"]["state"]
    assert counter["first_readable"] == "blocks.0.hook_resid_post"  # Lemma 15's one layer writes the state
    assert m["probes"]["prefix_scan"]["state"]["first_readable"] == "blocks.5.hook_resid_post"  # after the last MLP
    scan = m["attention"]["prefix_scan"]
    assert scan["L0H0"]["best_reference"] == "previous token" and scan["L2H0"]["best_reference"] == "look-back 2"
    assert scan["L4H0"]["best_reference"] == "look-back 4"
    assert m["ablation"]["modular_counter"]["zero"]["L0H0"] <= m["ablation"]["modular_counter"]["chance"] + 0.05
    runs = m["pruning"]["prefix_scan"]["learned_masks"]["runs"]
    assert [r["sparsity"] for r in runs] == [0.1, 0.3, 1.0]
    assert all(r["surviving"] == ["L0H0", "L2H0", "L4H0"] and r["kept_accuracy"] for r in runs)  # all essential
    assert len(m["attention"]["matching"]["prefix_scan"]) == 2  # the twin has 2 heads
    assert "theorem3" not in m["pruning"]
    circuits = m["circuits"]["models"]
    for name in ("modular_counter", "prefix_scan"):  # ACDC on a proof: no spurious edge, faithful
        assert circuits[name]["precision"] == 1.0 and circuits[name]["faithfulness"] == 1.0
    assert circuits["modular_counter"]["heads"] == ["L0H0"] and circuits["modular_counter"]["recall"] == 1.0
    assert circuits["prefix_scan"]["heads"] == ["L0H0", "L2H0", "L4H0"]
    assert circuits[TWIN]["relevant_edges"] is None and 0 <= circuits[TWIN]["faithfulness"] <= 1
    overlap = m["circuits"]["overlap"]["prefix_scan"]
    assert set(overlap["mapped"]) <= {"L0H0", "L2H0", "L4H0"} and set(overlap["shared"]) <= set(overlap["mapped"])
    causal = m["causal"]["variables"]["state"]  # where the state is computed, causally, with a verdict per construction
    assert causal["constructions"]["modular_counter"]["first_sites"]["4"] == "blocks.0.hook_resid_mid"
    assert (
        causal["constructions"]["prefix_scan"]["first_sites"]["4"] == "blocks.4.hook_resid_mid"
    )  # Theorem 10's windows
    for name in ("modular_counter", "prefix_scan"):
        c = causal["constructions"][name]
        assert c["verdict"]["verdict"] and "IIA" in c["verdict"]["rule"] and c["das_verdict"]["verdict"]
        assert [s["role"] for s in c["named_sites"]][-1] == "inert" and c["named_sites"][-1]["iia"] == 0.0
    # the random-init null at chance (position 0's state is its token's image: a token swap carries it by luck)
    assert all(v is None or v < 0.95 for p, v in causal["null"]["best"].items() if p != "0")
    assert causal["null"]["das"]["iia"] < 0.95
    assert "Causal alignment: where each variable is computed" in (tmp_path / "report.html").read_text()


def test_bad_requests_get_clear_errors(tmp_path):
    with pytest.raises(ConstructionError, match="dyck constructions"):
        DyckComparison(Dyck(2, 4)).constructions(["stacky"], 0)
    with pytest.raises(ConstructionError):
        comparison_for("parity").constructions(["gridworld"], 0)
    cli = [sys.executable, "-m", "sandbox_lens.interp", "compare"]
    r = subprocess.run(
        [*cli, "nosuchautomaton", "--out", str(tmp_path / "a")], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 2 and "nosuchautomaton" in r.stderr
    # a twin trained on another task is refused, and nothing is overwritten
    comp = comparison_for("parity", length=8)
    train(
        comp.task,
        ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32),
        TrainConfig(steps=2, eval_every=1, eval_size=8, warmup=1),
        tmp_path / "twin",
    )
    r = subprocess.run(
        [*cli, "dyck", "--trained", str(tmp_path / "twin"), "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "not on the requested task" in r.stderr
    assert not (tmp_path / "b" / "report.html").exists()
    with pytest.raises(CheckpointError):
        compare(comparison_for("C3", length=8), tmp_path / "c", trained=tmp_path / "twin", **FAST)


def test_the_twin_is_trained_once_and_reused(tmp_path):
    comp = comparison_for("parity", length=6)
    compare(comp, tmp_path, constructions=["modular_counter"], train_steps=30, **FAST)
    weights = tmp_path / "twin" / "checkpoint.safetensors"
    before = weights.stat().st_mtime_ns
    compare(comp, tmp_path, constructions=["modular_counter"], train_steps=30, **FAST)
    assert weights.stat().st_mtime_ns == before


def test_a_twin_below_its_target_is_flagged_and_more_minutes_continue_it(tmp_path, monkeypatch):
    """An under-trained twin is named as such in metrics.json and the report; a larger budget resumes it."""
    import sandbox_lens.interp.compare.analyse as analyse

    comp = comparison_for("parity", length=8)
    monkeypatch.setattr(comp, "train_defaults", lambda: {"steps": 400, "lr": 3e-3, "target_accuracy": 1.0})
    compare(
        comp,
        tmp_path,
        constructions=["modular_counter"],
        train_minutes=0.0,
        masks=False,
        **{k: v for k, v in FAST.items() if k != "mask_steps"},
    )
    m = json.loads((tmp_path / "metrics.json").read_text())
    t = m["twin_training"]
    assert t["stopped_by"] == "time" and t["reached_target"] is False and t["steps"] < 400
    assert "The twin did not reach its target" in (tmp_path / "report.html").read_text()
    first_steps = t["steps"]
    compare(
        comp,
        tmp_path,
        constructions=["modular_counter"],
        train_minutes=0.05,
        masks=False,
        **{k: v for k, v in FAST.items() if k != "mask_steps"},
    )
    again = json.loads((tmp_path / "metrics.json").read_text())["twin_training"]
    assert again["steps"] > first_steps  # the same run, continued
    assert analyse.twin_training(tmp_path / "nowhere") == {"known": False}


def test_the_theorem3_headings_say_what_the_numbers_show(dyck_report):
    """30 mask steps do not reproduce the construction: the heading must not claim it was found."""
    report, m = dyck_report
    page = report.read_text()
    t3 = m["pruning"]["theorem3"]
    found = t3["accuracy"] >= t3["target_accuracy"] - 0.02
    assert ("construction found inside a random network" in page) == found
    assert ("did <b>not</b> reproduce" in page) == (not found)


def test_what_we_conclude_follows_the_numbers(dyck_report, tmp_path):
    """The conclusions, the Theorem 3 heading and the twin's flag change when the numbers do."""
    import copy
    import shutil

    from sandbox_lens.interp.compare.report import conclusions, write_report

    report, m = dyck_report
    said = " ".join(conclusions(m))
    assert "Every construction is exact" in said
    t3 = m["pruning"]["theorem3"]
    found = t3["accuracy"] >= t3["target_accuracy"] - 0.02
    assert ("does NOT reproduce" in said) == (not found)
    worse = copy.deepcopy(m)
    worse["models"]["stack"]["accuracy"] = 0.9
    worse["twin_training"].update(reached_target=False, final_accuracy=0.5, target_accuracy=0.97)
    worse["pruning"]["theorem3"]["accuracy"] = 0.1
    worse["pruning"]["stack"]["learned_masks"]["runs"][0]["kept_accuracy"] = False
    said = " ".join(conclusions(worse))
    assert "below accuracy 1 on these words: stack 0.900" in said
    assert "The twin did NOT reach its target" in said and "does NOT reproduce" in said
    assert "Learned head masks lost accuracy for stack at λ" in said
    for name in ("patterns.npz",):
        shutil.copy(report.parent / name, tmp_path / name)
    (tmp_path / "metrics.json").write_text(json.dumps(worse))
    page = write_report(tmp_path).read_text()
    assert "did <b>not</b> reproduce" in page and "The twin did not reach its target" in page
    assert page.count("stack 0.900") == 1


def test_the_report_shows_chance_the_learning_curve_and_no_uniform_mass(dyck_report):
    report, m = dyck_report
    page = report.read_text()
    for name in m["models"]:
        for _latent, p in m["probes"][name].items():
            assert 0 < p["chance"] < 1  # the commonest value's share, drawn on the probe plot
        assert "mass" not in m["attention"][name]["L0H0"]["references"]["uniform"]
    assert [h["step"] for h in m["twin_training"]["history"]] == sorted(
        h["step"] for h in m["twin_training"]["history"]
    )
    assert "learning curve of the trained twin" in page and "What we conclude" in page


HOSTILE = "</script><script>document.documentElement.setAttribute('pwned','1')</script><img src=x onerror=\"document.documentElement.setAttribute('pwned','2')\">"


def test_hostile_strings_in_metrics_never_reach_the_page_as_markup(dyck_report, tmp_path):
    """A token or name `</script><script>…` in metrics.json (tokens reach circuitsvis's inline script) is shown as
    text: the rebuilt page has no script or element of the file's making (checked in headless Chromium too). Names
    the report looks things up by, edited, are refused in one line."""
    import json
    import shutil

    report, _ = dyck_report
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(report.parent / "patterns.npz", copy / "patterns.npz")
    metrics = json.loads((report.parent / "metrics.json").read_text())
    metrics["example"]["tokens"] = [t + HOSTILE for t in metrics["example"]["tokens"]]  # into circuitsvis's script
    for key in ("task", "twin"):  # into the title, headings and text
        metrics[key] += HOSTILE
    (copy / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(copy)]) == 0
    page = (copy / "report.html").read_text()
    assert "<script>document" not in page and "<img src=x" not in page
    from browser import find_chromium, render

    if find_chromium() is None:
        pytest.skip("no chromium")
    dom = render(copy / "report.html", tmp_path / "p.png", height=4000).dom
    assert not re.search(r"<html[^>]*pwned", dom), "a script from metrics.json ran"
    metrics["latents"] = [name + HOSTILE for name in metrics["latents"]]
    (copy / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(copy)]) == 2


def test_hostile_strings_in_a_population_section_are_text(dyck_report, tmp_path):
    """The population section (``compare --population``) rebuilt from a metrics.json whose directory, cell,
    variable, verdict, rule and hook names are markup: every one shown as text."""
    import json
    import shutil

    report, _ = dyck_report
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(report.parent / "patterns.npz", copy / "patterns.npz")
    metrics = json.loads((report.parent / "metrics.json").read_text())
    estimate = {"value": 0.5, "interval": [0.4, 0.6], "n": 3, "unit": "seeds", "method": HOSTILE, "values": []}
    summary = {
        "das_iia": estimate,
        "null_das_iia": estimate,
        "median_first_block": estimate,
        "construction_median_first_block": HOSTILE,
        "das_hooks": {"blocks.1.hook_resid_post" + HOSTILE: 3},
        "das_k": [2, HOSTILE],
        "implements": {"seeds": 2, "of": 3, "interval": [0.2, 0.9]},
        "verdict": {"verdict": HOSTILE, "rule": HOSTILE},
    }
    metrics["causal_population"] = {
        "directory": "/runs/" + HOSTILE,
        "cells": {"cell" + HOSTILE: {"variables": {"depth" + HOSTILE: {"summary": summary}}}},
    }
    (copy / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(copy)]) == 0
    page = (copy / "report.html").read_text()
    assert "Causal alignment of a population" in page and "&lt;/script&gt;&lt;script&gt;" in page
    assert "<script>document" not in page and "<img src=x" not in page
