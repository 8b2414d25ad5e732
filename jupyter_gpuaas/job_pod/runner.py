"""The notebook Job's runner (its pod's only process; docs/jobs.md).

Environment (set by the Job, culler/gpuaas_service/jobs/build.py): ``GPUAAS_JOB_SERVICE_URL``,
``GPUAAS_JOB_NAMESPACE``, ``GPUAAS_JOB_NAME`` and ``GPUAAS_JOB_TOKEN`` (from the Job's Secret,
never a literal in the spec). With the token it

1. fetches its input from the service (``GET api/job-runner/input``): the notebook, the
   papermill-style parameters, the kernel name;
2. injects the parameters (:func:`inject_parameters`: a cell tagged ``injected-parameters``
   after the one tagged ``parameters``, or first), executes the notebook with nbclient,
   posting the log so far every few seconds (``POST api/job-runner/log``);
3. sends the executed notebook, with its outputs, and how it ended — or the failing cell's
   error (``POST api/job-runner/result``), and exits 0 (succeeded) or 1 (failed).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

__all__ = ["format_parameters", "inject_parameters", "main"]

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
LOG_EVERY = 3.0
MAX_LOG = 256 * 1024


def format_parameters(parameters: Mapping[str, Any]) -> str:
    """The injected cell's source: one ``name = value`` line per parameter (Python literals;
    values are JSON values, whose ``repr`` is valid Python)."""
    lines = ["# Parameters (injected by the GPU job)"]
    lines += [f"{name} = {value!r}" for name, value in parameters.items()]
    return "\n".join(lines) + "\n"


def _tags(cell: Mapping[str, Any]) -> list[str]:
    tags = (cell.get("metadata") or {}).get("tags") or []
    return [t for t in tags if isinstance(t, str)]


def inject_parameters(notebook: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``notebook`` with the parameters cell injected (as papermill does): after the
    first cell tagged ``parameters``, else first; an earlier injected cell is replaced. No
    parameters: the notebook unchanged."""
    nb = copy.deepcopy(dict(notebook))
    if not parameters:
        return nb
    cells = [c for c in nb.get("cells", []) if INJECTED_TAG not in _tags(c)]
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": None,
        "id": "gpuaas-injected-parameters",
        "metadata": {"tags": [INJECTED_TAG]},
        "outputs": [],
        "source": format_parameters(parameters),
    }
    at = next((i + 1 for i, c in enumerate(cells) if PARAMETERS_TAG in _tags(c)), 0)
    cells.insert(at, cell)
    nb["cells"] = cells
    return nb


class _Service:
    def __init__(self, url: str, namespace: str, name: str, token: str) -> None:
        self.base = url.rstrip("/") + "/api/job-runner/"
        self.headers = {
            "Authorization": f"Bearer {token}",
            "X-GPUaaS-Job": f"{namespace}/{name}",
            "Content-Type": "application/json",
        }

    def call(self, path: str, body: Any = None, attempts: int = 5) -> Any:
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(attempts):
            req = urllib.request.Request(
                self.base + path, data=data, headers=self.headers, method="POST" if data else "GET"
            )
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                if e.code < 500 or attempt == attempts - 1:
                    raise
            except OSError:
                if attempt == attempts - 1:
                    raise
            time.sleep(min(2**attempt, 10))
        return None


class _Log:
    """The job's log: what each cell printed, as it finished; sent every few seconds."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.lock = threading.Lock()
        self.changed = False

    def add(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
        with self.lock:
            self.parts.append(text)
            self.changed = True

    def text(self) -> str:
        with self.lock:
            whole = "".join(self.parts)
        return whole[-MAX_LOG:]


def _cell_text(cell: Mapping[str, Any]) -> str:
    out: list[str] = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            text = o.get("text", "")
            out.append("".join(text) if isinstance(text, list) else str(text))
        elif o.get("output_type") == "error":
            out.append(f"{o.get('ename')}: {o.get('evalue')}\n")
        elif o.get("output_type") in ("execute_result", "display_data"):
            plain = (o.get("data") or {}).get("text/plain")
            if plain:
                out.append(("".join(plain) if isinstance(plain, list) else str(plain)) + "\n")
    return "".join(out)


def _execute(nb: dict[str, Any], kernel_name: str | None, log: _Log) -> dict[str, Any] | None:
    """Execute in place; ``None`` when every cell ran, else the error (cell, name, value)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    node = nbformat.from_dict(nb)  # type: ignore[no-untyped-call]
    code_cells = [i for i, c in enumerate(node.cells) if c.cell_type == "code"]
    total = len(code_cells)

    def started(cell: Any, cell_index: int, **_: Any) -> None:
        log.add(f"[cell {cell_index + 1}/{len(node.cells)}] running\n")

    def executed(cell: Any, cell_index: int, **_: Any) -> None:
        log.add(_cell_text(cell))

    kwargs: dict[str, Any] = {"timeout": None, "allow_errors": False}
    if kernel_name:
        kwargs["kernel_name"] = kernel_name
    client = NotebookClient(node, on_cell_start=started, on_cell_executed=executed, **kwargs)
    log.add(f"executing {total} code cell(s)\n")
    error: dict[str, Any] | None = None
    try:
        client.execute()
    except CellExecutionError as e:
        failing = next(
            (
                i
                for i in code_cells
                if any(o.get("output_type") == "error" for o in node.cells[i].get("outputs", []))
            ),
            None,
        )
        error = {"cell_index": failing, "ename": e.ename, "evalue": e.evalue}
    except Exception as e:  # noqa: BLE001 - the kernel died, would not start...: report it
        error = {"cell_index": None, "ename": type(e).__name__, "evalue": str(e)[:2000]}
    nb.clear()
    nb.update(json.loads(nbformat.writes(node)))  # type: ignore[no-untyped-call]
    return error


def main() -> int:
    env = os.environ
    missing = [
        k
        for k in (
            "GPUAAS_JOB_SERVICE_URL",
            "GPUAAS_JOB_NAMESPACE",
            "GPUAAS_JOB_NAME",
            "GPUAAS_JOB_TOKEN",
        )
        if not env.get(k)
    ]
    if missing:
        print(f"gpuaas job runner: {', '.join(missing)} not set (run by a notebook Job only)")
        return 2
    service = _Service(
        env["GPUAAS_JOB_SERVICE_URL"],
        env["GPUAAS_JOB_NAMESPACE"],
        env["GPUAAS_JOB_NAME"],
        env["GPUAAS_JOB_TOKEN"],
    )
    log = _Log()
    job_input = service.call("input")
    nb = inject_parameters(job_input["notebook"], job_input.get("parameters") or {})
    stop = threading.Event()

    def send_log() -> None:
        while not stop.wait(LOG_EVERY):
            if log.changed:
                log.changed = False
                try:
                    service.call("log", {"log": log.text()}, attempts=1)
                except (OSError, urllib.error.HTTPError) as e:
                    print(f"gpuaas job runner: log not sent: {e}", file=sys.stderr)

    sender = threading.Thread(target=send_log, daemon=True)
    sender.start()
    error = _execute(nb, job_input.get("kernel_name"), log)
    stop.set()
    status = "failed" if error else "succeeded"
    log.add(f"{status}\n" if not error else f"failed: {error['ename']}: {error['evalue']}\n")
    result = {"status": status, "notebook": nb, "error": error, "log": log.text()}
    try:
        service.call("result", result)
    except urllib.error.HTTPError as e:
        if e.code != 413:
            raise
        # Too large for the service (outputs with big images): keep the source and the error.
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"] = []
        result["error"] = error or {
            "cell_index": None,
            "ename": "OutputTooLarge",
            "evalue": "the executed notebook was too large to send back; outputs removed",
        }
        service.call("result", result)
    return 1 if error else 0
