"""What TransformerLens 4.x's bridge cannot run is refused at parse time, in one line naming the version that can:
before any model is built or loaded (the back end read from the package metadata), nothing written."""

import time

import pytest

from sandbox_lens.interp.cli import main
from sandbox_lens.interp.cli.common import BRIDGE_REFUSALS


@pytest.mark.parametrize(
    "argv, says",
    [
        (["train", "automaton", "--automaton", "parity", "--init-from", "prefix_scan"], "TransformerLens 3.9"),
        (["circuit", "run", "--engine", "hooks", "--model", "no-such-model"], "--engine bare"),
        (["train", "automaton", "--automaton", "C3", "--align", "modular_counter"], "--align"),
        (["train", "scratchpad", "--automaton", "parity", "--pos", "alibi"], "ALiBi"),
    ],
)
def test_refused_before_any_work_on_the_bridge(monkeypatch, tmp_path, capsys, argv, says):
    monkeypatch.setattr("sandbox_lens.interp.model.hooked.backend", lambda: "TransformerBridge")
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert main([*argv, "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 5
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("interp: error:") and says in err
    assert not out.exists()


def test_nothing_is_refused_on_hooked_transformer(monkeypatch):
    from argparse import Namespace

    from sandbox_lens.interp.cli.common import bridge_refusal

    monkeypatch.setattr("sandbox_lens.interp.model.hooked.backend", lambda: "HookedTransformer")
    assert bridge_refusal(Namespace(init_from="prefix_scan", engine="hooks", align="dyck", positional="alibi")) is None
    monkeypatch.setattr("sandbox_lens.interp.model.hooked.backend", lambda: "TransformerBridge")
    assert bridge_refusal(Namespace(init_from=None, engine="bare", align=None, positional="learned")) is None
    assert len(BRIDGE_REFUSALS) == 4
