"""`interp experiment`: every reproduction runs end to end at its quick scale, its report renders
offline, a rerun reuses its runs, and bad requests get one line and lose nothing."""

import json
import pickle
import re
import shutil

import numpy as np
import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.errors import CheckpointError
from sandbox_lens.interp.experiments import EXPERIMENTS, get_experiment, run_experiment
from sandbox_lens.interp.experiments.indirect_supervision import TASKS as TASKS_OBSERVED
from sandbox_lens.interp.experiments.report import write_index, write_report
from sandbox_lens.interp.experiments.rules import VERDICTS


def quick(name, tmp_path_factory, **options):
    out = tmp_path_factory.mktemp(name) / "out"
    return out, run_experiment(get_experiment(name), out, quick=True, options=options)


def claim(results, start):
    found = [c for c in results["claims"] if c["claim"].startswith(start)]
    assert len(found) == 1, [c["claim"] for c in results["claims"]]
    return found[0]


def check_files(out, results):
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["experiment"] == results["experiment"] and on_disk["quick"] is True
    assert on_disk["claims"] and on_disk["conclusions"] and on_disk["figures"]
    for c in on_disk["claims"]:
        assert c["verdict"] in VERDICTS and c["rule"] and c["effect"]
        e = c["estimate"]  # every verdict carries its effect, its interval (or why none) and its units
        assert set(e) >= {"value", "interval", "n", "unit"} and c["threshold"] is not None
        if c["verdict"] in ("reproduced", "not reproduced", "opposite direction", "inconclusive"):
            assert e["interval"] is not None and e["n"] >= 1
        else:
            assert c["why"]
    p = on_disk["provenance"]
    assert set(p) >= {"commit", "dirty", "command", "versions", "seeds", "cpu_minutes_this_invocation"}
    assert p["versions"]["torch"] and p["seeds"] == on_disk["seeds"]
    assert "Provenance: commit" in (out / "report.html").read_text()
    for f in on_disk["figures"]:
        assert (out / f["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    assert "Thesis vs measured" in page and "What we conclude" in page and "data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page  # self-contained


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    return quick("parity-ood", tmp_path_factory)


@pytest.fixture(scope="module")
def ffl(tmp_path_factory):
    return quick("ffl-glitches", tmp_path_factory)


def test_parity_ood_quick(parity):
    out, r = parity
    check_files(out, r)
    assert claim(r, "The construction (modular_counter)")["verdict"] == "reproduced"  # exact on every shift
    rows = r["data"]["evaluation"]
    twin = min(x["accuracy"] for x in rows if x["model"].startswith("twin "))
    lstm = min(x["accuracy"] for x in rows if x["model"].startswith("lstm "))
    assert lstm >= twin  # the direction of the claim: the LSTM degrades no more than the twin
    hooks = r["data"]["count_probe"]["per_model"]["modular_counter"]
    assert len(hooks) == 3 and all(0 <= v <= 1 for v in hooks.values())


def test_a_rerun_reuses_every_run_and_rerenders_the_same_claims(parity):
    out, first = parity
    again = run_experiment(get_experiment("parity-ood"), out, quick=True)
    assert again["trained_now"] == 0 and again["runs"] == first["runs"]
    assert [c["measured"] for c in again["claims"]] == [c["measured"] for c in first["claims"]]


def test_parity_ood_takes_another_counter(tmp_path_factory):
    out, r = quick("parity-ood", tmp_path_factory, automaton="C3")
    assert r["options"] == {"automaton": "C3"}
    assert any(x["shift"] == "Pr[1] = 0.05" for x in r["data"]["evaluation"])
    assert claim(r, "The construction (modular_counter)")["verdict"] == "reproduced"


def test_ffl_glitches_quick(ffl):
    out, r = ffl
    check_files(out, r)
    assert claim(r, "Proposition 3's construction")["verdict"] == "reproduced"
    errors = r["data"]["errors"]
    assert errors["ffl (construction)"]["ood_errors"] == [0]
    # the direction of R2: the LSTM makes no more OOD read errors than the twin
    assert max(errors["lstm"]["ood_errors"]) <= min(errors["twin"]["ood_errors"])
    assert set(r["data"]["heads"]) == {"twin", "mixture", "sharpened"}


def test_dyck_seeds_quick(tmp_path_factory):
    out, r = quick("dyck-seeds", tmp_path_factory)
    check_files(out, r)
    probe = r["data"]["probe"]
    assert probe["input"] == "[[[[]]]](((())))" and probe["positions"] == 17
    built = r["data"]["constructions"]["stack_top_mass"]
    assert built["stack"] > 0.99 and built["uniform"] < 0.5  # the stack construction attends to the top
    for pos in ("linear", "none", "learned"):
        assert r["data"]["per_position"][pos]["pairs"] == 1  # two quick seeds: one pair


def test_uniform_dyck_quick(tmp_path_factory):
    out, r = quick("uniform-dyck", tmp_path_factory)
    check_files(out, r)
    assert claim(r, "The uniform twins' attention stayed uniform")["verdict"] == "reproduced"
    pops = r["data"]["populations"]
    assert set(pops) == {"uniform", "trained attention"} and all(
        d < 1e-6 for d in pops["uniform"]["departure"].values()
    )
    assert r["settings"]["uniform"]["config"]["attention"] == "uniform"
    assert r["settings"]["uniform"]["shape"]["positional"] == "none"


def test_dilution_quick(tmp_path_factory):
    out, r = quick("dilution", tmp_path_factory)
    check_files(out, r)
    assert claim(r, "Proposition 4's bound holds")["verdict"] == "reproduced"
    assert claim(r, "The constructions' own constants")["verdict"] == "reproduced"
    cells = r["data"]["cells"]
    assert set(cells) == {f"{c} T={T}" for c in ("memory", "ffl") for T in (16, 64)}
    # the largest scale is exact; the smallest makes errors in the flip-flop model at T = 64
    assert max(cells["ffl T=64"]["rows"][0]["errors"]) == 0 and max(cells["ffl T=64"]["rows"][-1]["errors"]) > 0


def test_random_automata_quick(tmp_path_factory):
    out, r = quick("random-automata", tmp_path_factory)
    check_files(out, r)
    assert claim(r, "The prefix scan is exact on every random automaton")["verdict"] == "reproduced"
    assert claim(r, "Random permutation automata decorrelate")["estimate"]["n"] >= 10
    twins = r["data"]["twins"]
    assert {t["length"] for t in twins} == {4, 8} and all(0 <= t["final"] <= 1 and 0 < t["chance"] <= 1 for t in twins)
    # each automaton's two populations: the final-state one trained with the loss on the last symbol only
    assert r["settings"]["random3-2-0-T8-final"]["task"]["supervision"] == "final"
    assert "supervision" not in r["settings"]["random3-2-0-T8-every"]["task"]
    built = r["data"]["constructions"]
    assert all(b["prefix_scan"]["exact"] for b in built) and all("krohn_rhodes" in b for b in built)


def test_pe_at_2t_quick(tmp_path_factory):
    out, r = quick("pe-at-2t", tmp_path_factory)
    check_files(out, r)
    twins = r["data"]["twins"]
    assert {(t["code"], t["seed"]) for t in twins} == {(c, s) for c in ("sinusoidal", "linear") for s in (0, 1)}
    assert all(0 <= t["at_T"] <= 1 and 0 <= t["at_2T"] <= 1 for t in twins)
    assert r["settings"]["sinusoidal"]["shape"]["positional"] == "sinusoidal"
    assert r["settings"]["linear"]["shape"]["n_ctx"] == 2 * 8 + 1
    assert claim(r, "Sinusoidal positions generalise worse")["verdict"] in VERDICTS
    # the (abab)* half: the observed recogniser under the thesis's second law, both codes, scored at T and 2T
    abab = r["data"]["abab_twins"]
    assert {(t["code"], t["seed"]) for t in abab} == {(c, s) for c in ("sinusoidal", "linear") for s in (0, 1)}
    task = r["settings"]["abab/sinusoidal"]["task"]
    assert task["observe"] == [0, 0, 0, 1, 0] and task["periodic"] == {"word": [0, 1], "share": 0.5}
    assert claim(r, "Sinusoidal positions learn (abab)*")["verdict"] in VERDICTS
    assert claim(r, "The sinusoidal advantage on (abab)*")["verdict"] in VERDICTS


def test_parity_counts_quick(tmp_path_factory):
    out, r = quick("parity-counts", tmp_path_factory)
    check_files(out, r)
    twins = r["data"]["twins"]
    assert {(t["population"], t["seed"]) for t in twins} == {(p, s) for p in ("plain", "shifted") for s in (0, 1)}
    assert all(len(t["by_count"]) == 8 - 1 and 0 <= t["low"] <= 1 for t in twins)
    # the same shape for both populations (a context of T + S); only the shifted one trains with the shift
    assert r["settings"]["plain"]["shape"] == r["settings"]["shifted"]["shape"]
    assert r["settings"]["shifted"]["config"]["pos_shift"] == 16 and not r["settings"]["plain"]["config"].get(
        "pos_shift"
    )
    for start in ("Random position shifts", "A plain twin's errors"):
        assert claim(r, start)["verdict"] in VERDICTS


def test_instability_quick(tmp_path_factory):
    out, r = quick("instability", tmp_path_factory)
    check_files(out, r)
    curves = r["data"]["curves"]
    assert set(curves) == {"parity/plain", "parity/ema", "D8/plain", "D8/dropout", "grid9/plain", "grid9/dropout"}
    assert all(0 <= a <= 1 for runs in curves.values() for c in runs for a in c)
    assert (
        r["settings"]["parity/ema"]["config"]["ema"] == 0.9 and r["settings"]["D8/dropout"]["config"]["dropout"] == 0.1
    )
    assert r["settings"]["parity/plain"]["shape"]["n_layers"] == 1
    for start in (
        "Seeds of one setting",
        "Runs that converge",
        "A moving average",
        "Dropout 0.1 helps",
        "Dropout 0.1 hurts",
    ):
        assert claim(r, start)["verdict"] in VERDICTS


def test_ffl_one_head_quick(tmp_path_factory):
    out, r = quick("ffl-one-head", tmp_path_factory)
    check_files(out, r)
    twins = r["data"]["twins"]
    assert {(t["p_noop"], t["sharpen"]) for t in twins} == {(p, s) for p in (0.5, 0.9) for s in (False, True)}
    assert all(0 <= t["masses"]["latest"] <= 1 + 1e-6 for t in twins)
    # one block, one head; the training law at p(⊥) = 0.9; sharpening only where named
    assert r["settings"]["p0.9/plain"]["task"]["probs"] == pytest.approx([0.05, 0.05, 0.9])
    assert r["settings"]["p0.5/sharpened"]["config"]["sharpen"] == 0.01
    assert r["settings"]["p0.5/plain"]["shape"]["n_layers"] == r["settings"]["p0.5/plain"]["shape"]["n_heads"] == 1
    for start in ("A sharpened one-head", "Without sharpening", "Plain twins attend", "Sharpening's bad minima"):
        assert claim(r, start)["verdict"] in VERDICTS


def test_indirect_supervision_quick(tmp_path_factory):
    out, r = quick("indirect-supervision", tmp_path_factory)
    check_files(out, r)
    runs = r["data"]["runs"]
    assert {(x["task"], x["arch"]) for x in runs} == {
        (t[0], a) for t in TASKS_OBSERVED for a in ("transformer", "lstm")
    }
    assert r["settings"]["C4/transformer"]["task"]["observe"] == [1, 0, 0, 0]
    assert "observe" not in r["settings"]["D8/lstm"]["task"]
    for label in ("C4 0 mod 4", "grid9 wall", "D8 location"):
        assert claim(r, f"Twins learn {label}")["verdict"] in VERDICTS


def test_dyck_balance_quick(tmp_path_factory):
    out, r = quick("dyck-balance", tmp_path_factory)
    check_files(out, r)
    models = r["data"]["models"]
    assert {m["contrastive"] for m in models} == {0.0, 1.0} and all(m["beta"] >= 0 for m in models)
    shape = r["settings"]["minimal"]["shape"]
    assert shape["normalization"] == "none" and shape["n_ctx"] >= 80 + 8  # the long band plus the contrastive pairs
    config = r["settings"]["minimal"]["config"]
    assert list(config["freeze"]) == ["embed", "pos_embed", "blocks.0"] and config["init"].startswith("dyck")
    assert "first_layer=minimal" in config["init"]
    # Assumption 10 on the trained twins: layer 2's input at a bracket does not move when the bracket does
    from sandbox_lens.interp.tasks.dyck import Dyck
    from sandbox_lens.interp.train import load_trained
    from sandbox_lens.probes.dyck import MINIMAL_TOLERANCE, layer_input_by_type_and_depth

    assert all(m["assumption_10_gap"] <= MINIMAL_TOLERANCE for m in models)
    twin = load_trained(next((out / "runs").rglob("checkpoint.json")).parent)
    here = layer_input_by_type_and_depth(twin, Dyck(2, 4))
    for moved in (1, 7):
        there = layer_input_by_type_and_depth(twin, Dyck(2, 4), moved=moved)
        assert all(np.array_equal(here[key], there[key]) for key in here)


def test_grid_boundary_quick(tmp_path_factory):
    out, r = quick("grid-boundary", tmp_path_factory)
    check_files(out, r)
    built = r["data"]["construction"]
    assert built["name"] == "gridworld" and built["any_head"] == 1.0  # Theorem 12: some head finds the wall, always
    twin = r["data"]["twins"]["2x2"]["0"]
    assert 0 < twin["always_bos"] < 1 and 0 < twin["always_self"] < 1
    assert claim(r, "Theorem 12's construction")["verdict"] == "reproduced"


def test_grid_boundary_refuses_a_non_grid(tmp_path, capsys):
    assert main(["experiment", "grid-boundary", "--automaton", "parity", "--quick", "--out", str(tmp_path / "o")]) == 2
    assert "needs a 1-D gridworld" in capsys.readouterr().err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["k-fold-composition", "all"])
def test_a_full_run_with_too_few_seeds_for_an_interval_is_refused(name, tmp_path, capsys):
    """Fewer than 3 seeds at full scale: every ruling would be "not tested", so the run is refused in one line before
    anything is written (for `all`, before the first experiment); --quick and an experiment whose default has
    fewer seeds (random-automata: its units are automata) take them."""
    from sandbox_lens.interp.experiments.base import check_seeds

    assert main(["experiment", name, "--seeds", "0,1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "needs at least 3 seeds, got 2 (0, 1)" in err and err.count("\n") == 1 and not (tmp_path / "o").exists()
    check_seeds("random-automata", [0], 1)  # its default is one seed: accepted


def test_length_generalisation_quick(tmp_path_factory):
    out, r = quick("length-generalisation", tmp_path_factory)
    check_files(out, r)
    assert {x["task"] for x in r["data"]["twins"]} == {"parity", "dyck"}
    assert {x["multiple"] for x in r["data"]["twins"]} == {1, 2}
    assert {x["positions"] for x in r["data"]["twins"]} == {
        "none",
        "learned+shift",
        "lstm",
    }  # the LSTM beside the twins
    assert all(x["accuracy"] == 1.0 for x in r["data"]["constructions"])  # exact at every length
    assert {x["construction"] for x in r["data"]["constructions"]} == {"modular_counter", "prefix_scan"}
    assert claim(r, "The constructions are exact")["verdict"] == "reproduced"
    # the thesis's Dyck: the stack of depth 4 with 2 types, simulated (states scored at every position)
    dyck = r["settings"]["dyck/N=8/none"]["task"]
    assert dyck["kind"] == "automaton" and dyck["automaton"]["name"] == "dyck2-depth4"
    assert len(dyck["automaton"]["states"]) == 31 + 1  # Σ_{i≤4} 2^i stacks and the reject sink
    for kind in ("parity", "dyck"):
        assert claim(r, f"{kind}: the LSTM keeps its accuracy")["verdict"] in VERDICTS


def test_report_renders_in_headless_chromium(ffl, tmp_path):
    from browser import render, require_chromium

    require_chromium()
    out, _ = ffl
    r = render(out / "report.html", tmp_path / "report.png", height=3000)
    assert r.external_requests == []
    assert "Attention glitches on the flip-flop language" in r.dom and "Thesis vs measured" in r.dom
    import matplotlib.image

    pixels = matplotlib.image.imread(r.screenshot)[..., :3]
    assert pixels.std() > 0.05 and (pixels.mean(-1) < 0.5).mean() > 0.01  # not blank


def test_the_report_is_rebuilt_from_the_files_alone(parity, tmp_path):
    out, _ = parity
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("runs"))
    (copy / "report.html").unlink()
    write_report(copy)
    assert "Thesis vs measured" in (copy / "report.html").read_text()


def test_the_index_links_every_experiment(parity, tmp_path):
    out, _ = parity
    shutil.copytree(out, tmp_path / "parity-ood", ignore=shutil.ignore_patterns("runs"))
    page = write_index(tmp_path, ["parity-ood", "ffl-glitches"]).read_text()
    assert "parity-ood/report.html" in page and "not run" in page
    # damaged or edited results are said on their row, escaped; the index is still written
    shutil.copytree(out, tmp_path / "ffl-glitches", ignore=shutil.ignore_patterns("runs"))
    r = json.loads((tmp_path / "ffl-glitches" / "results.json").read_text())
    (tmp_path / "ffl-glitches" / "results.json").write_text(json.dumps(dict(r, minutes="<b>soon</b>")))
    (tmp_path / "parity-ood" / "results.json").write_text("[" * 100 + "]" * 100)
    page = write_index(tmp_path, ["parity-ood", "ffl-glitches"]).read_text()
    assert "unreadable" in page and "does not hold a complete results file" in page and "<b>soon" not in page


def test_list_names_every_experiment(capsys):
    assert main(["experiment", "list"]) == 0
    out = capsys.readouterr().out
    for name, e in EXPERIMENTS.items():
        assert name in out and e.section in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["experiment", "no-such", "--out", "{d}"], "unknown experiment"),
        (["experiment", "parity-ood", "--dyck", "2,4", "--out", "{d}"], "parity-ood takes no --dyck"),
        (["experiment", "dyck-seeds", "--automaton", "parity", "--out", "{d}"], "dyck-seeds takes no --automaton"),
        (["experiment", "parity-ood", "--automaton", "nonsense", "--quick", "--out", "{d}"], "nonsense"),
        (["experiment", "parity-ood"], "needs --out"),
        (["experiment", "all", "--automaton", "C3", "--out", "{d}"], "default task"),
    ],
)
def test_bad_requests_get_one_line(argv, message, tmp_path, capsys):
    code = main([a.replace("{d}", str(tmp_path / "out")) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_an_out_holding_something_else_is_refused_and_kept(parity, tmp_path, capsys):
    out, _ = parity
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert main(["experiment", "ffl-glitches", "--quick", "--out", str(out)]) == 2
    assert "holds the runs of experiment 'parity-ood'" in capsys.readouterr().err
    assert main(["experiment", "parity-ood", "--out", str(out)]) == 2  # full scale over a quick run
    assert "holds a --quick run" in capsys.readouterr().err
    assert main(["experiment", "parity-ood", "--quick", "--automaton", "C3", "--out", str(out)]) == 2
    assert "task options" in capsys.readouterr().err
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert main(["experiment", "parity-ood", "--quick", "--out", str(other)]) == 2
    assert "not empty" in capsys.readouterr().err and (other / "notes.txt").read_text() == "mine"
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["experiment", "parity-ood", "--quick", "--out", str(afile)]) == 2
    assert "is a file" in capsys.readouterr().err


@pytest.mark.slow
def test_the_ray_backend_gives_the_local_pool_s_numbers(parity, tmp_path):
    pytest.importorskip("ray")
    out, local = parity
    r = run_experiment(get_experiment("parity-ood"), tmp_path / "ray", quick=True, backend="ray", workers=2)
    assert r["backend"] == "ray" and r["trained_now"] == local["runs"]
    assert [c["measured"] for c in r["claims"]] == [c["measured"] for c in local["claims"]]


def test_algorithm_census_quick(tmp_path_factory):
    """Every learned twin is put to the candidates; the census table counts the verdicts with intervals and the
    claim is ruled on the share identified as a proven algorithm."""
    out, r = quick("algorithm-census", tmp_path_factory)
    populations = r["data"]["populations"]
    twins = [t for p in populations.values() for t in p["twins"].values()]
    assert twins and all("identified" in t and 0.0 <= t["stability"] <= 1.0 for t in twins)
    assert {"scan", "counter", "sequential"} <= set(twins[0]["candidates"]) | set(twins[0]["not_applicable"])
    assert all(isinstance(c["das_variables"], list) for c in twins[0]["candidates"].values())  # DAS sites searched
    assert r["claims"][0]["verdict"] in VERDICTS
    assert r["tables"][0]["columns"][:3] == ["task", "layers", "learned"] and "--das" in r["tables"][0]["note"]
    assert r["data"]["das_steps"] > 0
    assert (out / "figures" / "census.png").is_file()
    from sandbox_lens.interp.experiments.algorithm_census import _scale, identification_job

    pickle.dumps(identification_job({0: out}, {0: 1.0}, _scale(False), False))  # a pool worker's job travels
    from sandbox_lens.interp.causal.fitted import STEPS

    assert _scale(False)["das_steps"] == STEPS  # the published census searches DAS sites as `align --das` does


def test_an_inconclusive_twin_is_identified_again_on_fresh_pairs(tmp_path_factory, monkeypatch):
    """A twin inconclusive at the census's pairs is identified once more on more pairs of their own seed, beside the
    same nulls; a twin with a verdict is not. The follow-up table and conclusion count what the second look settled
    (synthetic verdicts: the identification itself is the quick run's)."""
    from types import SimpleNamespace

    from sandbox_lens.interp.experiments import algorithm_census as census
    from sandbox_lens.interp.streams import ExperimentSeed

    out, r = quick("algorithm-census", tmp_path_factory)
    seen = []

    def fake(model, nulls, pairs, das_steps=0, seed=ExperimentSeed.ALGORITHM_PAIRS):
        seen.append((pairs, seed, len(nulls)))
        first = seed == ExperimentSeed.ALGORITHM_PAIRS
        return {
            "identified": "inconclusive" if first else "counter",
            "on_all_pairs": "counter",
            "stability": 0.7 if first else 0.95,
        }

    monkeypatch.setattr(census, "identified_row", fake)
    directory = next((out / "runs").glob("*/seed_0"))
    sc = {"pairs": 16, "follow_up_pairs": 64, "nulls": 1, "das_steps": 0}
    twins = census._identified(({0: directory}, {0: 1.0}, sc, False))
    assert seen == [(16, ExperimentSeed.ALGORITHM_PAIRS, 1), (64, ExperimentSeed.ALGORITHM_FOLLOW_UP, 1)]
    assert ExperimentSeed.ALGORITHM_FOLLOW_UP != ExperimentSeed.ALGORITHM_PAIRS
    assert twins["0"]["follow_up"] == {
        "pairs": 64,
        "identified": "counter",
        "on_all_pairs": "counter",
        "stability": 0.95,
    }
    monkeypatch.setattr(census, "identified_row", lambda *a, **k: {"identified": "counter", "stability": 0.9})
    assert "follow_up" not in census._identified(({0: directory}, {0: 1.0}, sc, False))["0"]

    ctx = SimpleNamespace(tables=[], conclusions=[])
    ctx.table = lambda title, columns, rows, note="": ctx.tables.append((title, rows))
    ctx.conclude = ctx.conclusions.append
    unresolved = {
        "identified": "inconclusive",
        "stability": 0.6,
        "follow_up": {"pairs": 64, "identified": "inconclusive", "stability": 0.5},
    }
    populations = {
        "C3-L2": {
            "task": "C3",
            "layers": 2,
            "twins": {"0": twins["0"], "1": unresolved, "2": {"identified": "none", "stability": 1.0}},
        }
    }
    census._follow_ups(ctx, populations, 16)
    ((title, rows),) = ctx.tables
    assert "inconclusive at 16 pairs" in title and [row[2] for row in rows] == ["0", "1"]
    assert ctx.conclusions == [
        "More pairs: of the 2 twins inconclusive at 16 pairs per split, 1 get a stable verdict on 64 fresh pairs "
        "(1 counter); 1 stay inconclusive."
    ]
    census._follow_ups(ctx, {"C3-L2": {"task": "C3", "layers": 2, "twins": {"2": {"identified": "none"}}}}, 16)
    assert len(ctx.tables) == 1  # no inconclusive twin: no table


def test_algorithm_confusion_quick(tmp_path):
    """Imposed twins and random-init negatives are identified and counted in a confusion matrix; the claim is
    ruled on the share identified as imposed."""
    e = EXPERIMENTS["algorithm-confusion"]
    r = run_experiment(e, tmp_path / "out", quick=True)
    twins = r["data"]["twins"]
    assert {t["imposed"] for t in twins} == {"counter", "none"}
    imposed = next(t for t in twins if t["imposed"] == "counter")
    assert set(imposed["imposed_iia"]) == {"state"} and imposed["construction"] == "modular_counter"
    assert r["settings"]["C3-counter"]["config"]["iit_variables"] == "all"  # the counter's graph has no exact edge
    matrix = r["tables"][0]
    assert matrix["columns"][:2] == ["imposed", "twins"] and [row[0] for row in matrix["rows"]] == ["counter", "none"]
    assert r["claims"][0]["verdict"] in VERDICTS


def test_the_confusions_cascade_is_wider_and_trains_longer():
    """At full scale the cascade's twins are twice as wide as the others and get twice the step budget (its sign level
    stayed below the count at width 64); every other population keeps 6000 steps."""
    from sandbox_lens.interp.experiments.algorithm_confusion import _scale

    sc = _scale(False)
    shapes = {label: shape for label, _, _, _, _, shape in sc["populations"]}
    assert shapes["S3-cascade"]["d_model"] == 128 and shapes["S3-scan"]["d_model"] == 64
    assert sc["steps_for"] == {"S3-cascade": 12000} and sc["steps"] == 6000


def test_the_confusions_positive_controls_impose_the_scans_edges():
    """The scan's windows are imposed with their edges (path interchanges); an algorithm without exact edges
    between imposed variables gets every variable swapped every step."""
    from sandbox_lens.interp.experiments.algorithm_census import automaton_task
    from sandbox_lens.interp.experiments.algorithm_confusion import imposition
    from sandbox_lens.interp.train import ModelShape

    scan, mode = imposition("prefix_scan", automaton_task("S3", 8), ModelShape(n_layers=6, d_model=64, n_heads=2))
    assert mode == "graph" and {(e["parent"], e["child"]) for e in scan["edges"]} == {
        ("window1", "window2"),
        ("window2", "state"),
    }
    counter, mode = imposition("modular_counter", automaton_task("C4", 8), ModelShape(n_layers=2, d_model=64))
    assert mode == "all" and "edges" not in counter


HOSTILE = "</script><script>document.documentElement.setAttribute('pwned','1')</script><img src=x onerror=\"document.documentElement.setAttribute('pwned','2')\">"


def _poison(x):
    if isinstance(x, dict):
        return {k: _poison(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_poison(v) for v in x]
    return x + HOSTILE if isinstance(x, str) and " " in x else x


def test_hostile_strings_in_results_never_reach_the_page_as_markup(parity, tmp_path):
    """Every sentence of results.json (title, claims, rules, conclusions, caveats, table cells, settings) with a
    script appended: the rebuilt report shows it as text, and no script of the file's making runs in Chromium.
    A field of the wrong shape is one line."""
    out, _ = parity
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("runs"))
    r = json.loads((copy / "results.json").read_text())
    poisoned = _poison({k: v for k, v in r.items() if k != "figures"})
    poisoned["figures"] = r["figures"]  # file names, looked up on disk
    for claim, original in zip(poisoned["claims"], r["claims"]):
        claim["verdict"] = original["verdict"]  # one of five words: anything else is refused by the schema (below)
    (copy / "results.json").write_text(json.dumps(poisoned))
    write_report(copy)
    page = (copy / "report.html").read_text()
    assert "<script>document" not in page and "<img src=x" not in page
    from browser import find_chromium, render

    if find_chromium() is not None:
        dom = render(copy / "report.html", tmp_path / "p.png", height=3000).dom
        assert not re.search(r"<html[^>]*pwned", dom), "a script from results.json ran"
    poisoned["claims"][0]["verdict"] = "reproduced" + HOSTILE
    (copy / "results.json").write_text(json.dumps(poisoned))
    with pytest.raises(CheckpointError, match=r"claims/0/verdict: .*'inconclusive', 'not tested'\]"):
        write_report(copy)
    poisoned["claims"] = [{"claim": "c", "thesis": "t", "verdict": "reproduced"}]  # a claim row without its rule
    (copy / "results.json").write_text(json.dumps(poisoned))
    with pytest.raises(CheckpointError, match="does not hold a complete experiment"):
        write_report(copy)
