"""Render a report in headless Chromium: a screenshot, and a list of what it tried to fetch.

Chromium is pointed at a local recording proxy for every non-loopback address, so any request a
page makes to the outside world (a CDN script, a web font, an image) is recorded — and fails —
instead of going out. Used by the report test and to take the README's screenshot.
"""

from __future__ import annotations

import os
import shutil
import socketserver
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from sandbox_lens.interp.errors import SandboxError

__all__ = ["find_chromium", "render", "Rendering"]

# Flags from the machines' notes: no sandbox as root, no GPU, and no background traffic of its own.
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
    "--no-pings",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,AutofillServerCommunication",
]
# What Chromium contacts on its own (updates, sign-in, time), whatever the page: recorded apart.
BROWSER_HOSTS = frozenset(
    {
        "update.googleapis.com",
        "accounts.google.com",
        "clients2.google.com",
        "clientservices.googleapis.com",
        "safebrowsing.googleapis.com",
        "redirector.gvt1.com",
        "edgedl.me.gvt1.com",
        "optimizationguide-pa.googleapis.com",
        "content-autofill.googleapis.com",
    }
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium() -> None:
    """Skip the calling test when no Chromium is installed, or fail where `make test` promised one
    (SANDBOX_LENS_REQUIRE_BROWSER)."""
    import pytest

    if find_chromium() is None:
        if os.environ.get("SANDBOX_LENS_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required here (make test installs Debian's chromium)")
        pytest.skip("no Chromium (make test installs it)")


@dataclass
class Rendering:
    screenshot: Path
    dom: str
    external_requests: list[str]  # requests the page made to the outside world (should be none)
    browser_requests: list[str]  # Chromium's own background requests (BROWSER_HOSTS)


def _host(request_line: str) -> str:
    """``CONNECT host:443 HTTP/1.1`` or ``GET http://host/path HTTP/1.1`` → host."""
    parts = request_line.split()
    target = parts[1] if len(parts) > 1 else ""
    target = target.split("://", 1)[-1]
    return target.split("/", 1)[0].rsplit(":", 1)[0].lower()


class _Recorder(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.requests: list[str] = []

        class Handler(socketserver.StreamRequestHandler):
            def handle(inner) -> None:  # noqa: N805 - the recorder is the enclosing server
                line = inner.rfile.readline(4096).decode("latin-1").strip()
                if line:
                    self.requests.append(line)
                inner.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)


def render(
    page: str | Path, screenshot: str | Path, width: int = 1280, height: int = 2400, timeout: float = 120.0
) -> Rendering:
    """Screenshot ``page`` (a local HTML file) and return its DOM after scripts ran."""
    chromium = find_chromium()
    if chromium is None:
        raise SandboxError("no Chromium found (Debian: apt-get install chromium)")
    page = Path(page).resolve()
    if not page.is_file():
        raise SandboxError(f"{page}: no such file")
    screenshot = Path(screenshot).resolve()
    recorder = _Recorder()
    thread = threading.Thread(target=recorder.serve_forever, daemon=True)
    thread.start()
    proxy = f"--proxy-server=http://127.0.0.1:{recorder.server_address[1]}"
    try:
        with tempfile.TemporaryDirectory() as profile:
            common = [
                chromium,
                *_FLAGS,
                f"--user-data-dir={profile}",
                proxy,
                "--proxy-bypass-list=<-loopback>",
                "--virtual-time-budget=8000",
                f"--window-size={width},{height}",
            ]
            shot = subprocess.run(
                [*common, f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=timeout
            )
            dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, timeout=timeout)
    finally:
        recorder.shutdown()
        recorder.server_close()
    if shot.returncode != 0 or not screenshot.exists():
        raise SandboxError(f"chromium could not render {page}: {shot.stderr.decode(errors='replace')[-500:]}")
    own = [r for r in recorder.requests if _host(r) in BROWSER_HOSTS]
    page_made = [r for r in recorder.requests if _host(r) not in BROWSER_HOSTS]
    return Rendering(screenshot, dom.stdout.decode(errors="replace"), page_made, own)
