"""Every circuit method on every engine, on a construction's weights, under each ablation, run for real (the fuzz in
test_cli_fuzz.py stubs the work): each call writes its results or is refused in one line with exit 2 — never a
traceback. A construction held as bare weights once reached hook-only code this way (``--engine hooks``)."""

from __future__ import annotations

import pytest

from sandbox_lens.interp.circuits.methods import METHODS

CONSTRUCTIONS = {
    "counter": ["modular_counter", "--automaton", "C3", "-T", "8"],
    "dyck": ["dyck", "--dyck", "2,3", "-T", "8"],
}
OURS = sorted(name for name in METHODS if ":" not in name)  # auto-circuit's have their own venv and tests


@pytest.mark.parametrize("construction", sorted(CONSTRUCTIONS))
@pytest.mark.parametrize("engine", ["auto", "hooks"])
@pytest.mark.parametrize("ablation", ["resample", "zero"])
def test_every_method_runs_or_is_refused_in_one_line(construction, engine, ablation, tmp_path, interp_run):
    for method in OURS:
        out = tmp_path / method
        argv = ["circuit", *CONSTRUCTIONS[construction], "--method", method, "--engine", engine]
        code, stdout, err = interp_run(*argv, "--ablation", ablation, "--pairs", "16", "--no-curve", "--out", out)
        call = " ".join(argv)
        assert code in (0, 2), f"{call}: exit {code}\n{err}"
        if code == 0:
            assert (out / "circuit.json").is_file(), call
        else:
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, f"{call}: {err}"
            assert not out.exists(), f"{call}: a refusal wrote {out}"
