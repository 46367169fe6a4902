"""The top-level API (``import sandbox_lens``): light to import, one call to load any construction by strings,
errors in one line that name the Python call, and the public names listed."""

import subprocess
import sys

import pytest

import sandbox_lens as sl


def test_importing_the_root_loads_neither_torch_nor_transformer_lens():
    code = "import sys, sandbox_lens; print('torch' in sys.modules, 'transformer_lens' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize(
    "args,length",
    [
        (("prefix_scan", "S5"), 16),
        (("modular_counter", "C3"), 8),
        (("krohn_rhodes", "Q8"), 8),
        (("gridworld", "grid3"), 8),
        (("dyck", "2,4"), 12),
        (("ffl",), 8),
    ],
)
def test_every_kind_of_source_loads_by_string_and_verifies_exact(args, length):
    model = sl.load(*args, length=length)
    assert model.card.construction == args[0]
    assert sl.verify(model, samples=20).accuracy == 1.0


def test_objects_and_json_files_load_too(tmp_path):
    import json

    assert sl.load("dyck", sl.Dyck(2, 3), length=10).card.construction == "dyck"
    path = tmp_path / "flip.json"
    path.write_text(
        json.dumps(
            {"name": "flip", "states": ["a", "b"], "alphabet": ["x", "y"], "delta": {"x": ["a", "b"], "y": ["b", "a"]}}
        )
    )
    assert sl.verify(sl.load("prefix_scan", str(path), length=8), samples=10).accuracy == 1.0


@pytest.mark.parametrize(
    "args,message",
    [
        (("dyck",), r"sandbox_lens.load\('dyck', SOURCE\) needs a source: a Dyck spec"),
        (("prefix_scan",), "catalogue automaton's name"),
        (("ffl", "S5"), "ffl takes no source"),
        (("magic", "S5"), "unknown construction 'magic'"),
        (("prefix_scan", "S99"), "got 99"),
    ],
)
def test_bad_calls_are_one_line_errors(args, message):
    with pytest.raises(sl.SandboxError, match=message) as e:
        sl.load(*args, length=8)
    assert "\n" not in str(e.value) and "--" not in str(e.value).split("needs a source")[-1]


def test_the_public_names_resolve():
    for name in sl.__all__:
        assert getattr(sl, name) is not None, name
    assert {"load", "verify", "align", "compare", "train"} <= set(dir(sl))
    with pytest.raises(AttributeError):
        sl.no_such_name  # noqa: B018
