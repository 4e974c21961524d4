"""`make lab` starts a JupyterLab that serves notebooks/; the CLI answers --help."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_the_notebooks():
    port, token = free_port(), os.urandom(8).hex()
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"PORT={port}", f"LAB_ARGS=--IdentityProvider.token={token}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "DISPLAY"})
    try:
        deadline, listing = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=5) as r:
                    listing = json.load(r)
                break
            except OSError:
                time.sleep(1)
        log = proc.stdout.read1().decode() if proc.poll() is not None else ""
        assert listing is not None, f"JupyterLab did not answer: {log}"
        names = {item["name"] for item in listing["content"]}
        expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
        assert expected <= names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10) as r:
            assert r.status == 200 and b"JupyterLab" in r.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def test_cli_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "ssog_lab", "--help"], capture_output=True, text=True, check=True)
    for name in ("train", "bench", "params"):
        assert name in out.stdout
