import json
import re

from sandbox_lens.interp.demo import run_demo


def test_demo_report_is_self_contained(tmp_path):
    index = run_demo(tmp_path / "demo", samples=8)
    page = index.read_text()
    metrics = json.loads((tmp_path / "demo" / "metrics.json").read_text())
    assert [m["task"] for m in metrics] == ["parity", "S5"]
    assert all(m["accuracy"] == 1.0 for m in metrics)
    assert (tmp_path / "demo" / "attention_S5.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.count("data:image/png;base64,") == 2
    assert page.count("CircuitsVis") >= 2  # the inlined circuitsvis bundle, once per view
    # nothing is loaded from the network
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=[\"']?https?:", page)


HOSTILE = "</script><script>document.documentElement.setAttribute('pwned','1')</script><img src=x onerror=\"x\">"


def test_hostile_names_in_the_demo_page_are_text(tmp_path, monkeypatch):
    """An automaton whose name, description, states and symbols are markup (as an automaton file could carry):
    the page shows them as text, in the table, the headings, the token list and circuitsvis's inline script;
    checked in headless Chromium where there is one."""
    import pytest

    from sandbox_lens.interp import demo
    from sandbox_lens.interp.tasks.automata import parse_automaton_json

    hostile = parse_automaton_json(
        json.dumps(
            {
                "name": "p" + HOSTILE,
                "description": HOSTILE,
                "states": ["e" + HOSTILE, "o" + HOSTILE],
                "alphabet": ["0" + HOSTILE, "1" + HOSTILE],
                "delta": {"0" + HOSTILE: ["e" + HOSTILE, "o" + HOSTILE], "1" + HOSTILE: ["o" + HOSTILE, "e" + HOSTILE]},
            }
        )
    )
    monkeypatch.setattr(demo, "DEMO_AUTOMATA", ("hostile",))
    monkeypatch.setattr(demo, "VERIFY_LENGTH", 8)
    monkeypatch.setattr(demo, "get_automaton", lambda name: hostile)
    page = demo.run_demo(tmp_path / "demo", samples=4).read_text()
    assert HOSTILE not in page and "<img src=x" not in page and "<script>document" not in page
    assert "&lt;/script&gt;" in page  # shown, as text
    from browser import find_chromium, render

    if find_chromium() is None:
        pytest.skip("no chromium")
    dom = render(tmp_path / "demo" / "report.html", tmp_path / "p.png", height=3000).dom
    assert not re.search(r"<html[^>]*pwned", dom), "a script from the automaton ran"
