"""Notebooks run as GPU jobs, the server's side (docs/jobs.md): what a submission sends the
gpuaas hub service, and the executed copies coming back. Everything goes to the service with
this server's own token; the server holds no Kubernetes credentials. The HTTP endpoints
(``gpuaas/api/jobs...``) are in :mod:`.handlers`.

A result is written as ``<name>-<job>.ipynb`` beside the source (``-1``, ``-2``, ... when that
exists: nothing is ever overwritten), then reported as collected so no server writes it twice.
Finished jobs are collected when the sidebar lists them and by :class:`Collector`, every
``GPUaaS.jobs_collect_interval`` seconds, while the browser is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
from typing import Any

from jupyter_core.utils import ensure_async
from tornado import web

from jupyter_gpuaas.server.service_client import ServiceClient

__all__ = ["SUBMIT_TIMEOUT", "Collector", "collect_results", "job_submission", "output_path"]

log = logging.getLogger("gpuaas.server.jobs")

SUBMIT_TIMEOUT = 60.0
_FORWARDED = ("team", "offering", "count", "image", "size", "time_limit", "parameters")


def output_path(source: str, job: str, exists: Any) -> str:
    """``dir/name-<job>.ipynb`` beside ``source``, or with ``-1``, ``-2``... the first that
    ``exists(path)`` says is free."""
    folder, base = posixpath.split(source)
    stem = base[: -len(".ipynb")] if base.endswith(".ipynb") else base
    n = 0
    while True:
        name = f"{stem}-{job}{'' if n == 0 else f'-{n}'}.ipynb"
        path = posixpath.join(folder, name) if folder else name
        if not exists(path):
            return path
        n += 1


_collect_lock = asyncio.Lock()
_written: dict[tuple[str, str], str] = {}
"""Jobs this server process wrote (the sidebar's poll and the background look may overlap)."""


async def collect_results(client: ServiceClient, contents: Any, jobs: list[dict[str, Any]]) -> int:
    """Write each finished, not yet collected job's executed notebook beside its source; report
    where. Returns how many were written. Problems are logged and retried next time."""
    async with _collect_lock:
        return await _collect(client, contents, jobs)


async def _collect(client: ServiceClient, contents: Any, jobs: list[dict[str, Any]]) -> int:
    written = 0
    for job in jobs:
        key = (str(job.get("team")), str(job.get("name")))
        if key in _written and not job.get("collected"):
            job["collected"] = _written[key]
        if not job.get("result") or job.get("collected"):
            continue
        where = f"api/jobs/{job['team']}/{job['name']}"
        answer = await client.request(f"{where}/result")
        if answer.problem or not isinstance(answer.data.get("notebook"), dict):
            log.warning("job %s: result not fetched: %s", job["name"], answer.problem)
            continue
        source = str(answer.data.get("path") or job.get("notebook") or "notebook.ipynb")
        taken: set[str] = set()

        async def exists(path: str) -> bool:
            return bool(await ensure_async(contents.exists(path)))

        # output_path asks synchronously: look the candidates up first
        folder = posixpath.dirname(source)
        try:
            listing = await ensure_async(contents.get(folder, content=True, type="directory"))
            taken = {str(item["path"]) for item in listing.get("content") or []}
        except web.HTTPError as e:
            log.warning(
                "job %s: folder %r not readable (%s); writing at the root", job["name"], folder, e
            )
            source = posixpath.basename(source)
            listing = await ensure_async(contents.get("", content=True, type="directory"))
            taken = {str(item["path"]) for item in listing.get("content") or []}
        path = output_path(source, str(job["name"]), taken.__contains__)
        if await exists(path):  # written meanwhile
            continue
        model = {"type": "notebook", "format": "json", "content": answer.data["notebook"]}
        try:
            await ensure_async(contents.save(model, path))
        except Exception:
            log.exception("job %s: could not write %s", job["name"], path)
            continue
        written += 1
        job["collected"] = _written[key] = path
        mark = await client.request(f"{where}/collected", method="POST", body={"path": path})
        if mark.problem:
            log.warning("job %s: written to %s, not marked: %s", job["name"], path, mark.problem)
    return written


class Collector:
    """Collects finished jobs' results every ``interval`` seconds (the browser may be closed)."""

    def __init__(self, client: ServiceClient, contents: Any, interval: float) -> None:
        self.client = client
        self.contents = contents
        self.interval = interval
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            answer = await self.client.request("api/jobs")
            if answer.problem is None:
                try:
                    await collect_results(self.client, self.contents, answer.data.get("jobs") or [])
                except Exception:  # keep collecting: one bad result must not stop the loop
                    log.exception("collecting GPU job results")
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def job_submission(body: dict[str, Any], path: str, notebook: dict[str, Any]) -> dict[str, Any]:
    """What ``POST gpuaas/api/jobs`` sends the service: the choices of ``body`` it forwards, the
    notebook at ``path`` as plain JSON, and its kernel's name."""
    kernel = ((notebook.get("metadata") or {}).get("kernelspec") or {}).get("name")
    forward = {k: body[k] for k in _FORWARDED if k in body}
    forward.update(path=path, notebook=notebook)
    if kernel:
        forward["kernel_name"] = kernel
    return forward
