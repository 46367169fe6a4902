"""Which algorithm: the constructions identified as the algorithm each one builds, random-init models as none,
the batched sweep equal to one interchange per forward, the rule on synthetic numbers, and the command."""

import json

import numpy as np
import pytest
import torch

import sandbox_lens as sl
from sandbox_lens.interp.causal.align import nulls_of
from sandbox_lens.interp.causal.identify import _passes, _sentence, component_sites, identify, residual_sites, sweep
from sandbox_lens.interp.causal.interchange import Site, answer, interchange, word_pairs
from sandbox_lens.interp.causal.verdict import FLOOR, MIN_OUTPUTS
from sandbox_lens.interp.model.bare import bare_rest


@pytest.mark.parametrize(
    "construction, source, T, expected",
    [
        ("prefix_scan", "C3", 8, "scan"),
        ("modular_counter", "C3", 8, "counter"),
        ("krohn_rhodes", "S3", 8, "cascade"),
        ("prefix_scan", "S3", 8, "scan"),
        ("prefix_scan", "S5", 8, "scan"),  # its windows hold S5's 120 permutations and 5 constant maps
        ("dyck", "2,4", 12, "stack"),
    ],
)
def test_each_construction_is_identified_as_its_algorithm(construction, source, T, expected):
    """The proof's algorithm passes with abstraction score 1 and every testable edge passing — through the outputs,
    and by path and joint interchanges where the record names them — beside two nulls; the rivals fail."""
    model = sl.load(construction, source, length=T)
    r = identify(model, "all", nulls=nulls_of(model, 0, n=2), pairs=64)
    assert r["identified"] == expected and r["stability"] >= 0.8
    row = next(c for c in r["candidates"] if c["algorithm"] == expected)
    assert row["status"] == "passes" and row["score"]["iia"] == 1.0 and row["score"]["interval"][0] == 1.0
    assert all(e["status"] in ("passes", "untestable") for v in row["variables"] for e in v["edges"])
    graph = [e["path"] for v in row["variables"] for e in v["edges"] if "path" in e]
    graph += [v["joint"] for v in row["variables"] if v["joint"]]
    assert all(t["status"] == "passes" and t["iia"] == 1.0 for t in graph)  # the proof's graph, by intervention
    assert len(graph) == {"scan": 6, "counter": 1, "cascade": 0, "stack": 1}[expected]
    assert row["null_score"] < 0.8
    for cells in row["partitions"].values():  # every variable's test intervention falls in one cell of each
        assert sum(c["outputs"] for c in cells.values()) == sum(v["outputs"] for v in row["variables"])
        assert all(c["iia"] == 1.0 for c in cells.values() if c["outputs"])
    for other in r["candidates"]:
        if other["algorithm"] != expected and len(other["variables"]) >= len(row["variables"]):
            assert other["status"] != "passes"


def test_a_random_init_model_runs_none_of_them():
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.train import ModelShape, random_init

    shape = ModelShape(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64)
    model = random_init(AutomatonTask(get_automaton("C3"), 8), shape, 99)
    r = identify(model, "all", nulls=nulls_of(model, 0, n=2), pairs=48)
    assert r["identified"] == "none" and r["verdict"].startswith("none of these")
    assert all(c["status"] != "passes" for c in r["candidates"])


def test_the_batched_sweep_is_one_interchange_per_forward():
    """Every (site, position) of the batched sweep gives the answers of the plain interchange at that site."""
    model = sl.load("prefix_scan", "parity", length=6)
    base, source = word_pairs(model, 10, seed=4)
    rotation = np.linalg.qr(np.random.default_rng(0).standard_normal((model.cfg.d_model, 3)))[0]
    sites = [(h, None) for h in residual_sites(model.cfg.n_layers)] + [("blocks.1.hook_resid_mid", rotation)]
    assert bare_rest(model) is not None  # the residual swaps run on the bare forward from their hook
    batched = sweep(model, sites, base, source, None)
    P = len(model.card.io.prefix)
    for s, (hook, basis) in enumerate(sites):
        for p in range(base.shape[1]):
            logits = interchange(model, base, source, Site(hook, p, basis))
            assert np.array_equal(batched[s, p], answer(logits[:, P : P + base.shape[1]], None))
    # a head's output: its hook_z slice at one position, the rest of the model untouched
    heads = [h for h in component_sites(model) if "#" in h]
    assert heads and all(h.split("#")[0].endswith("attn.hook_z") for h in heads)
    batched = sweep(model, [(h, None) for h in heads], base, source, None)
    tokens, src = model.card.io.encode(base), model.card.io.encode(source)
    for s, site in enumerate(heads):
        hook, head = site.split("#")
        _, cache = model.run_with_cache(torch.as_tensor(src), names_filter=[hook])
        for p in range(base.shape[1]):

            def patch(z, hook, p=p):
                z = z.clone()
                z[:, P + p, int(head)] = cache[hook.name][:, P + p, int(head)]
                return z

            logits = model.run_with_hooks(torch.as_tensor(tokens), fwd_hooks=[(hook, patch)])
            assert np.array_equal(batched[s, p], answer(logits[:, P : P + base.shape[1]], None))


def test_the_sweep_on_the_bare_forward_answers_as_hooked_runs_do(monkeypatch):
    """On a trained-shape twin (random weights, LayerNorm, an MLP), swaps run from the cached stream on the bare
    forward — residual ones from their hook, heads' and components' from their block, as edits — give the answers
    of hooked runs of the whole model, site by site."""
    from sandbox_lens.interp.causal import sweep as sweep_module
    from sandbox_lens.interp.tasks.batches import AutomatonTask
    from sandbox_lens.interp.tasks.catalogue import get_automaton
    from sandbox_lens.interp.train import ModelShape, random_init

    model = random_init(AutomatonTask(get_automaton("C3"), 8), ModelShape(n_layers=2, d_model=32, n_heads=2), 5)
    base, source = word_pairs(model, 24, seed=1)
    rotation = np.linalg.qr(np.random.default_rng(1).standard_normal((model.cfg.d_model, 2)))[0]
    sites = [(h, None) for h in residual_sites(2)] + [(h, rotation) for h in residual_sites(2)]
    sites += [(h, None) for h in component_sites(model)] + [("blocks.1.hook_mlp_out", rotation)]
    assert {h.split(".")[-1].split("#")[0] for h, _ in sites} >= {"hook_attn_out", "hook_z", "hook_mlp_out"}
    hooked_run = sweep_module.run_with_hooks
    with monkeypatch.context() as m:  # no hooked run at all: every site's swap is bare
        m.setattr(sweep_module, "run_with_hooks", lambda *a, **k: pytest.fail("a hooked run"))
        bare = sweep(model, sites, base, source, None)
    monkeypatch.setattr(sweep_module, "bare_rest", lambda _: None)
    assert sweep_module.run_with_hooks is hooked_run
    assert np.array_equal(bare, sweep(model, sites, base, source, None))


def test_the_rule_on_synthetic_numbers():
    """A pass needs the bar, a lower bound FLOOR above chance and above the nulls; too few outputs: untestable.
    The accuracy-0.40 twin of the audit (IIA 0.40, chance 1/3) is refused by the floor."""
    chance = 1 / 3
    good = {"iia": 0.99, "interval": (0.97, 1.0), "outputs": 500}
    assert _passes(good, 0.95, chance, 0.4) == "passes"
    assert _passes(good, 0.95, chance, 0.98) == "fails"  # not above the null
    assert _passes({**good, "outputs": MIN_OUTPUTS - 1}, 0.95, chance, None) == "untestable"
    weak = {"iia": 0.40, "interval": (0.37, 0.43), "outputs": 500}
    assert _passes(weak, max(0.95 * 0.40, chance + FLOOR), chance, 0.35) == "fails"
    assert _passes({**good, "iia": 0.94}, 0.95, chance, None) == "fails"  # below the bar


def test_the_verdict_says_when_the_variables_pass_but_the_edges_do_not():
    """An imposed twin can carry every variable of an algorithm at its sites and still compute them another way
    (a scan whose window1 → window2 edge fails): "none", said as such, not as "no variable passes"."""

    def row(name, statuses, edges=(), joint=None):
        variables = [{"variable": f"v{i}", "status": s, "edges": [], "joint": None} for i, s in enumerate(statuses)]
        variables[0]["edges"] = list(edges)
        variables[-1]["joint"] = joint
        return {"algorithm": name, "variables": variables}

    path_fails = {"edge": "v0 → v2 2 positions later", "status": "passes", "path": {"status": "fails"}}
    scan = row("scan", ["passes"] * 3, [path_fails], {"status": "fails"})
    nodes = {"identified": "none", "candidates": [scan, row("cascade", ["fails", "passes"])]}
    said = _sentence("none", nodes, 1.0)
    assert said.startswith("none of these: scan (v0 → v2 2 positions later by path interchange, v2 from all its ")
    assert "not every test of the graph" in said and "cascade" not in said
    nothing = {"identified": "none", "candidates": [row("cascade", ["fails", "passes"])]}
    assert _sentence("none", nothing, 1.0) == "none of these: no candidate's variables all pass at any site"


def test_the_command_ranks_and_refuses(interp_run, tmp_path):
    model_dir = tmp_path / "counter"
    assert interp_run("build", "modular_counter", "--automaton", "C3", "--length", "6", "--out", model_dir)[0] == 0
    out = tmp_path / "al"
    code, stdout, err = interp_run("align", "--model", model_dir, "--candidates", "all", "--pairs", "32", "--out", out)
    assert code == 0, err
    assert "verdict: runs counter" in stdout and "cascade       not applicable" in stdout
    found = json.loads((out / "align.json").read_text())["candidates"]
    assert found["identified"] == "counter" and (out / "candidates.png").read_bytes()[:4] == b"\x89PNG"
    das = tmp_path / "das"
    args = ("align", "--model", model_dir, "--candidates", "counter", "--das", "--das-steps", "5", "--pairs", "16")
    code, stdout, err = interp_run(*args, "--out", das)
    assert code == 0, err
    assert "DAS for state: best at" in stdout and "das" in json.loads((das / "align.json").read_text())["candidates"]
    target = tmp_path / "no-candidates"
    code, _, err = interp_run("align", "--model", model_dir, "--das", "--out", target)
    assert code == 2 and "add --candidates" in err and len(err.strip().splitlines()) == 1 and not target.exists()
    for bad, says in (("cascade", "abelian"), ("bogus", "unknown algorithm"), ("stack", "dyck tasks")):
        target = tmp_path / f"no-{bad}"
        code, stdout, err = interp_run("align", "--model", model_dir, "--candidates", bad, "--out", target)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and not target.exists()


def test_over_training_aligns_every_kept_model(interp_run, tmp_path):
    """A run trained with --keep-checkpoints keeps log-spaced models; --checkpoints identifies each and the last step
    on the same pairs beside the same nulls. A run that kept none, or a --model, is refused in one line."""
    run = tmp_path / "run"
    assert (
        interp_run(
            "-q",
            "train",
            "automaton",
            "--automaton",
            "parity",
            "--length",
            "6",
            "--steps",
            "60",
            "--eval-every",
            "20",
            "--keep-checkpoints",
            "2",
            "--out",
            run,
        )[0]
        == 0
    )
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_000020", "step_000060"]
    out = tmp_path / "over"
    args = ("align", "--run", run, "--checkpoints", "--candidates", "counter", "--das", "--das-steps", "3")
    code, stdout, err = interp_run(*args, "--pairs", "16", "--out", tmp_path / "over-das")
    assert code == 0 and json.loads((tmp_path / "over-das" / "align.json").read_text())["over_training"]["das"], err
    code, stdout, err = interp_run("align", "--run", run, "--checkpoints", "--pairs", "16", "--out", out)
    assert code == 0, err
    rows = json.loads((out / "align.json").read_text())["over_training"]["steps"]
    assert [r["step"] for r in rows] == [20, 60] and all(r["accuracy"] is not None for r in rows)
    assert set(rows[0]["candidates"]) == {"sequential", "scan", "counter"}
    assert (out / "over_training.png").read_bytes()[:4] == b"\x89PNG" and "step     20" in stdout
    plain = tmp_path / "plain"
    assert (
        interp_run(
            "-q",
            "train",
            "automaton",
            "--automaton",
            "parity",
            "--length",
            "6",
            "--steps",
            "20",
            "--eval-every",
            "20",
            "--out",
            plain,
        )[0]
        == 0
    )
    for argv, says in ((["--run", plain], "kept no checkpoints"), (["--model", plain], "give --run DIR")):
        code, _, err = interp_run("align", *argv, "--checkpoints", "--out", tmp_path / "no")
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()


def test_das_sites_are_gated_by_the_readout_and_lose_ties():
    """A DAS subspace is chosen only where its pooled select IIA is above the untrained readout's at the same hook;
    the readout itself never; on a tie the whole site wins over the learned one (synthetic counts)."""
    from sandbox_lens.interp.causal.algorithms import Algorithm, Variable
    from sandbox_lens.interp.causal.choice import pick_sites
    from sandbox_lens.interp.causal.fitted import admitted

    hook = "blocks.0.hook_resid_mid"
    labels = [hook, f"x: DAS k=1 @ {hook}", f"readout @ {hook}"]
    outputs = np.full((3, 2), 10)

    def hits(whole, fitted, readout):
        return np.array([[whole] * 2, [fitted] * 2, [readout] * 2])

    assert admitted(labels, hits(5, 8, 7), outputs, [0, 1, 2]) == [0, 1]
    assert admitted(labels, hits(5, 7, 7), outputs, [0, 1, 2]) == [0]  # not above the readout: out
    x = Variable("x")
    algorithm = Algorithm("a", "a", "automaton", "", "", lambda s, T: (x,))

    def chosen(h):
        counts = (h[None, :, :, None], outputs[None, :, :, None])  # [edges, site, P, n]
        entry = {"variables_of": {"a": [x]}, "select": {"counts": {x: counts}}, "layers": 1}
        return pick_sites(algorithm, entry, {x: labels}, [hook], lambda a, s: a)[1][x]

    assert list(chosen(hits(5, 8, 7))) == [1, 1]  # the DAS site, above the whole one and the readout
    assert list(chosen(hits(8, 8, 0))) == [0, 0]  # a tie: the whole site
    assert list(chosen(hits(5, 9, 9))) == [0, 0]  # the readout does as well: never the DAS site, never the readout


def test_identify_with_das_sites_in_the_model_and_its_nulls(monkeypatch):
    """With ``das=True`` every variable gets a subspace at each residual site but the last, in the model and each
    null (a null's fits remembered for the next twin), the readout swept beside them; a construction keeps its
    identification and no readout site is ever chosen."""
    from sandbox_lens.interp.causal import fitted

    fits = []
    real = fitted.das
    monkeypatch.setattr(fitted, "das", lambda model, *a, **k: fits.append(model) or real(model, *a, **k))
    model = sl.load("modular_counter", "C3", length=6)
    nulls = nulls_of(model, 0, n=1)
    r = identify(model, "counter,sequential", nulls=nulls, pairs=24, das=True, das_steps=20)
    hooks = ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_mid"]
    assert r["identified"] == "counter" and r["das"]["hooks"] == fitted.das_hooks(1) == hooks
    assert set(r["das"]["sites"]) == {"symbol", "state", "state (recurrent)"}
    assert fits.count(model) == fits.count(nulls[0]) == 3 * len(hooks)
    for rows in r["das"]["sites"].values():
        assert [x["hook"] for x in rows] == hooks
        for x in rows:
            assert x["null_select_iia"] is not None and x["readout_select_iia"] is not None
            assert x["admitted"] == (x["select_iia"] > x["readout_select_iia"])
    chosen = [s for c in r["candidates"] for v in c["variables"] for s in v["sites"].values()]
    assert chosen and not any(s.startswith("readout @ ") for s in chosen)
    again = identify(model, "counter,sequential", nulls=nulls, pairs=24, das=True, das_steps=20)
    assert again["identified"] == "counter" and again["das"]["sites"] == r["das"]["sites"]
    assert fits.count(model) == 2 * 3 * len(hooks) and fits.count(nulls[0]) == 3 * len(hooks)  # the null's remembered
