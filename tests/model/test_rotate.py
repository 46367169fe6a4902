"""Rotated constructions (`interp build --rotate`): the same exact function with every named subspace spread
over all coordinates of a wider residual stream, and the card says where each subspace went."""

import numpy as np
import pytest
import torch

from sandbox_lens.constructions import build
from sandbox_lens.interp.errors import ConstructionError
from sandbox_lens.interp.model.hooked import to_hooked
from sandbox_lens.interp.model.rotate import rotate_state_dict, rotation, subspace_basis
from sandbox_lens.interp.tasks.catalogue import get_automaton
from sandbox_lens.interp.tasks.dyck import Dyck
from sandbox_lens.interp.verify import verify

FAMILIES = [
    ("modular_counter", "C3", 32, {}),
    ("prefix_scan", "S3", 16, {}),
    ("gridworld", "grid5", 32, {}),
    ("krohn_rhodes", "S3", 16, {}),
    ("memory", "flipflop", 32, {}),
    ("dyck", None, 40, {"variant": "uniform"}),
    ("ffl", None, 32, {}),
]


def _source(name, automaton):
    return Dyck(2, 4) if name == "dyck" else (None if name == "ffl" else get_automaton(automaton))


def test_rotations_are_orthonormal_seeded_and_dense():
    P = rotation(5, 7, seed=3)
    assert P.shape == (5, 12) and np.allclose(P @ P.T, np.eye(5), atol=1e-12)
    assert np.array_equal(P, rotation(5, 7, seed=3)) and not np.allclose(P, rotation(5, 7, seed=4))
    assert (np.abs(P) > 1e-6).mean() > 0.95  # no variable left on a coordinate
    with pytest.raises(ConstructionError):
        rotation(0, 3)


@pytest.mark.parametrize("name, automaton, T, options", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_every_family_stays_exact_when_rotated(name, automaton, T, options):
    spec = build(name, _source(name, automaton), T, **options)
    model = to_hooked(spec, rotate={"pad": spec.d_model // 2 + 3, "seed": 1})
    assert model.cfg.d_model == spec.d_model + spec.d_model // 2 + 3
    r = verify(model, samples=100, seed=2)
    assert r.exact, r.summary()


def test_the_rotated_residual_is_the_original_times_P_and_each_subspace_is_found_again():
    spec = build("modular_counter", get_automaton("C3"), 16)
    plain, rotated = to_hooked(spec), to_hooked(spec, rotate={"pad": 9, "seed": 5})
    tokens = torch.from_numpy(plain.card.io.encode(get_automaton("C3").sample(4, 16, seed=0)))
    name = "blocks.0.hook_resid_post"
    _, a = plain.run_with_cache(tokens, names_filter=[name])
    _, b = rotated.run_with_cache(tokens, names_filter=[name])
    P = rotation(spec.d_model, 9, 5)
    x, y = a[name][0].double().numpy(), b[name][0].double().numpy()
    assert np.allclose(y, x @ P, atol=1e-4)
    labels = rotated.card.options["rotate"]["labels"]
    basis = subspace_basis(rotated.card.options, labels, "state")  # the count's one-hot, read back through P
    rows = [i for i, label in enumerate(labels) if label.startswith("state:")]
    assert np.allclose(y @ basis.T, x[:, rows], atol=1e-4)
    with pytest.raises(ConstructionError, match="no residual subspace"):
        subspace_basis(rotated.card.options, labels, "nothing")
    with pytest.raises(ConstructionError, match="not rotated"):
        subspace_basis(plain.card.options, labels, "state")


def test_layernorm_is_refused():
    with pytest.raises(ConstructionError, match="LayerNorm"):
        rotate_state_dict({"blocks.0.ln1.w": np.ones(3), "embed.W_E": np.eye(3)}, rotation(3, 1))


def test_cli_build_rotate_saves_an_exact_model(tmp_path, capsys):
    from sandbox_lens.interp.cli import main

    out = tmp_path / "rot"
    assert (
        main(["build", "prefix_scan", "--automaton", "parity", "-T", "16", "--rotate", "--pad", "5", "--out", str(out)])
        == 0
    )
    assert "rotated: d_model" in capsys.readouterr().out
    assert main(["verify", "--model", str(out), "--samples", "50"]) == 0
    assert "EXACT" in capsys.readouterr().out
    assert (
        main(["build", "prefix_scan", "--automaton", "parity", "-T", "16", "--pad", "5", "--out", str(tmp_path / "x")])
        == 2
    )
    assert "go with --rotate" in capsys.readouterr().err and not (tmp_path / "x").exists()
