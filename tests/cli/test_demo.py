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
