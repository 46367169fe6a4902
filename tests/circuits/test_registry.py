"""The circuit-method registry: one record per method, read by everything that runs or refuses a method; no
code outside the registry branches on a method's name; a method added by one record runs end to end."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from sandbox_lens.interp.circuits.analyse import analyse, check_settings
from sandbox_lens.interp.circuits.config import CircuitConfig, MethodError
from sandbox_lens.interp.circuits.methods import METHODS, CircuitMethod, Found, method_of, names, register

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox_lens"


def test_every_method_is_one_record_and_the_builtin_ones_need_no_package():
    assert set(names(optional=False)) == {
        "patching",
        "path",
        "attribution",
        "peap",
        "eap-ig",
        "atp-star",
        "gim",
        "acdc",
        "masks",
        "ugs",
        "random",
        "magnitude",
    }
    assert all(n.startswith("auto-circuit:") for n in set(names()) - set(names(optional=False)))
    assert {m.level for m in METHODS.values()} == {"node", "edge"}
    assert [m.name for m in METHODS.values() if m.steps] == ["eap-ig"]
    assert [m.name for m in METHODS.values() if m.positions] == ["patching", "peap"]
    with pytest.raises(MethodError, match="unknown method 'magic' \\(choose from patching, path"):
        method_of("magic")
    with pytest.raises(ValueError, match="registered twice"):
        register(METHODS["path"])


@pytest.mark.parametrize(
    "method, settings, message",
    [
        ("attribution", {"metric": "kl"}, "gradient is zero"),
        ("eap-ig", {"metric": "kl"}, "gradient is zero"),
        ("masks", {"metric": "logit_diff"}, "train on the KL"),
        ("random", {"metric": "kl"}, "baseline measures no metric"),
        ("path", {"steps": 8}, "--steps goes with --method eap-ig"),
        ("acdc", {"per_position": True}, "--per-position goes with --method patching"),
        ("path", {"acdc_mode": "reference"}, "goes with --method acdc"),
        ("acdc", {"acdc_mode": "reference", "metric": "logit_diff"}, "reference mode measures the KL"),
        ("acdc", {"acdc_mode": "sideways"}, "unknown ACDC mode"),
        ("path", {"agreement": True}, "--agreement compares an estimate"),
        ("path", {"threshold": float("inf")}, "positive and finite"),
        ("path", {"threshold": float("nan")}, "positive and finite"),
        ("path", {"source": "noise"}, "unknown ablation"),
        ("path", {"level": "deep"}, "unknown ground-truth level"),
        ("eap-ig", {"steps": 0}, "1 to 1024 steps"),
        ("auto-circuit:eap", {"metric": "kl"}, "leave out --metric"),
        ("auto-circuit:acdc", {"source": "zero"}, "resample ablation"),
    ],
)
def test_a_setting_a_method_cannot_take_is_refused_by_its_record(method, settings, message):
    with pytest.raises(MethodError, match=message.replace("(", "\\(")):
        method_of(method).check(CircuitConfig().with_(**settings))


def test_the_default_metric_is_the_records_first_and_unknown_settings_are_refused():
    assert check_settings("acdc") == "kl" and check_settings("path") == "logit_diff"
    assert check_settings("masks") == "kl" and check_settings("magnitude") == "logit_diff"
    with pytest.raises(TypeError, match="unknown circuit setting"):
        CircuitConfig().with_(paris=3)


def _method_names_compared(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) for every comparison of a registered method's name with something called *method*."""
    registered = set(METHODS) | {"auto-circuit:"}
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any("method" in ast.unparse(s) for s in sides)
            strings = [
                c.value for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
            hits += [(node.lineno, v) for v in strings if named and v in registered]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
            if "method" in ast.unparse(node.func.value) and any(
                isinstance(a, ast.Constant) and a.value == "auto-circuit:" for a in node.args
            ):
                hits.append((node.lineno, "auto-circuit:"))
    return hits


def test_no_code_outside_the_registry_branches_on_a_methods_name():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "methods.py" and path.parent.name == "circuits":
            continue
        hits = _method_names_compared(ast.parse(path.read_text()))
        if hits:
            found[str(path.relative_to(PACKAGE))] = hits
    assert found == {}, f"branches on a method's name outside circuits/methods.py: {found}"


def test_the_branch_finder_finds_a_branch():
    assert _method_names_compared(ast.parse('if method == "acdc": pass\nif args.method in ("path",): pass')) == [
        (1, "acdc"),
        (2, "path"),
    ]


def test_a_method_added_by_one_record_runs_and_is_scored_like_the_others():
    """The recipe's toy method: every edge scored by its receiver's layer (a deliberately poor ranking)."""
    from circuit_families import FAMILIES

    from sandbox_lens.interp.circuits.truth import ground_truth
    from sandbox_lens.interp.model.hooked import to_hooked

    def by_layer(patcher, pairs, ablation, config):
        scores = np.array([float(len(e.receiver)) for e in patcher.graph.edges])
        top = scores.max()
        return Found(scores, [e for e, v in zip(patcher.graph.edges, scores) if v >= top], scores)

    record = CircuitMethod("toy-layer", "edge", "a toy: the receiver's name length", by_layer, metrics=())
    register(record)
    try:
        spec = FAMILIES["modular_counter/C3"]()
        r = analyse(to_hooked(spec), "toy-layer", ground_truth(spec), pairs=16, curve=False)
        assert r["method"] == "toy-layer" and r["level"] == "edge" and 0.0 <= r["auroc"] <= 1.0
        assert r["circuit"]["edges"] and r["faithfulness"] is not None
        with pytest.raises(MethodError, match="baseline measures no metric"):
            analyse(to_hooked(spec), "toy-layer", None, metric="kl")
    finally:
        del METHODS["toy-layer"]


def test_bare_only_methods_are_refused_on_hooks_by_their_record():
    """masks, UGS, atp-star and gim work on the bare forward: ``--engine hooks`` is refused by the record before any
    model is built, and an engine that fell back to hooks (``auto`` on a model the bare forward does not cover) is
    refused before any pair is drawn — one check, one exception type."""
    from circuit_families import FAMILIES

    from sandbox_lens.interp.circuits.patching import Patcher
    from sandbox_lens.interp.model.hooked import to_hooked

    bare_only = [m.name for m in METHODS.values() if m.bare]
    assert bare_only == ["atp-star", "gim", "masks", "ugs"]
    model = to_hooked(FAMILIES["modular_counter/C3"]())
    for name in bare_only:
        with pytest.raises(MethodError, match=f"^{name} runs on the bare engine only"):
            check_settings(name, CircuitConfig(engine="hooks"))
        with pytest.raises(MethodError, match="the bare engine does not cover this model"):
            METHODS[name].check_engine(Patcher(model))
    for name in ("path", "attribution", "acdc"):
        check_settings(name, CircuitConfig(engine="hooks"))
        METHODS[name].check_engine(Patcher(model))
