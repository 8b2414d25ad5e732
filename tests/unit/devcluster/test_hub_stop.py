"""After the hub ends, however it ends, ``HubProcess.stop`` (what the demo's clean-up calls) stops
what the hub started: JupyterHub starts its proxy and its services in sessions of their own, so
they outlive a hub that crashes, holding their ports.

The hub here is a stand-in ``jupyterhub`` package found first on ``PYTHONPATH`` (the environment
``HubProcess`` takes): it starts a "proxy" and a "service" as JupyterHub does (new sessions,
listening on ports) and answers ``/hub/api/`` like a hub.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from devcluster import procs
from devcluster.hub import HubProcess, HubSettings

FAKE_HUB = """
import http.server, re, socket, subprocess, sys
from pathlib import Path

config = Path(sys.argv[sys.argv.index("-f") + 1])
port = int(re.search(r"c.JupyterHub.port = (\\d+)", config.read_text()).group(1))
LISTEN = (
    "import socket, time\\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\\n"
    "print(s.getsockname()[1], flush=True)\\n"
    "time.sleep(600)\\n"
)
for name in ("proxy", "service"):
    child = subprocess.Popen(
        [sys.executable, "-c", LISTEN], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    (config.parent / f"{name}.port").write_text(child.stdout.readline().strip())

class Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Api).serve_forever()
"""


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("how", ["crashed", "running"])
def test_stop_leaves_nothing_the_hub_started(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake" / "jupyterhub"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_HUB)
    monkeypatch.setenv("CONFIGPROXY_EXECUTABLE", "/bin/true")  # the config names it only
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    state = tmp_path / "hub"
    hub = HubProcess(HubSettings(state_dir=state, kubeconfig=tmp_path / "kubeconfig"), env=env)
    hub.start(timeout=60)
    try:
        deadline = time.monotonic() + 30
        while hub.running() and len(hub.started_processes) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        ports = [int((state / f"{n}.port").read_text()) for n in ("proxy", "service")]
        assert all(listening(p) for p in ports)
        assert len(hub.started_processes) == 2
        if how == "crashed":
            assert hub.proc is not None
            os.kill(hub.proc.pid, signal.SIGKILL)  # no clean-up of its own
            hub.proc.wait(10)
            assert all(listening(p) for p in ports)  # what the demo was left with
        hub.stop(timeout=10)
        assert not any(procs.is_alive(r) for r in hub.started_processes)
        assert not any(listening(p) for p in ports)
    finally:
        if hub.proc is not None and hub.proc.poll() is None:
            hub.proc.kill()
        procs.stop_together(hub.started_processes, timeout=1)
