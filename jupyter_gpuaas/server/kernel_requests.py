"""Ask this server's kernels to save and restore their variables (docs/kernel-state.md).

The server never unpickles anything: it sends a kernel a silent ``execute_request``
(``silent=True, store_history=False``: no output, no execution count) whose user expression
calls the package's kernel-side code (:mod:`jupyter_gpuaas.kernel`), and reads the JSON answer
from the reply. A busy kernel is never asked (its cell runs on; the request would wait behind
it): one still busy after :data:`BUSY_GRACE` is reported ``skipped_busy``. Every wait is
bounded; the kernel bounds its own work by the same deadline, so a snapshot that runs late
stops itself.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.session import new_id
from jupyter_core.utils import ensure_async

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.kernel_state import (
    KernelStateOutcome,
    Refused,
    is_outcome_file,
    save_seconds,
    state_key,
)
from jupyter_gpuaas.statefiles import read_manifest, read_outcome_file, state_directory

__all__ = [
    "KernelEstimate",
    "KernelStateSettings",
    "KernelStateUnavailable",
    "StateSizes",
    "as_its_user_left_it",
    "restore_kernel",
    "snapshot_all_kernels",
    "snapshot_info",
    "snapshot_kernel",
    "state_estimate",
]

GiB = 1 << 30
log = logging.getLogger("gpuaas.server.kernel_state")
REPLY_MARGIN = 2.0
"""Seconds of a deadline kept for the kernel's answer to travel back: the kernel's own bound
is this much shorter than the server's wait."""


@dataclass(frozen=True)
class KernelStateSettings:
    """The extension's ``kernel_state_*`` settings (see their help texts in the app)."""

    directory: str = "~/.jupyter-gpuaas/kernel-state"
    max_bytes: int = 8 * GiB
    reserve_bytes: int = 1 * GiB
    timeout: float = 60.0
    restore_timeout: float = 300.0


ALIVE_CHECK = 1.0
"""Seconds between looks at whether a kernel that has not answered yet still runs."""

BUSY_GRACE = 2.0
"""Seconds a busy kernel may take to go idle before it counts as running a cell: a kernel is
busy for a moment with JupyterLab's own requests (kernel and comm info) as a notebook opens."""


async def _idle_soon(km: Any, kernel_id: str, within: float) -> bool:
    """Whether the kernel is, or within ``within`` seconds becomes, other than busy."""
    loop = asyncio.get_running_loop()
    until = loop.time() + within
    while True:
        try:
            if km.kernel_model(kernel_id).get("execution_state") != "busy":
                return True
        except KeyError:
            return True  # gone: the caller says so
        if loop.time() >= until:
            return False
        await asyncio.sleep(0.05)


OWN_REQUEST = "gpuaas_own_request_since"
"""Set on a kernel (jupyter-server's kernel object) while this extension's own request runs
in it: the kernel's last activity before the request."""

SETTLE = 5.0
"""Seconds to wait, after the kernel's answer, for its "idle" status to reach jupyter-server
(the status follows the reply; a loaded machine may take a while); a kernel still busy then
runs a cell of its user's. Until then the activity report shows the kernel as before, so a
cell its user starts at that moment counts at most this much later."""


def as_its_user_left_it(
    kernel: Any, execution_state: str | None, last_activity: datetime | str | None
) -> tuple[str | None, datetime | str | None]:
    """A kernel's execution state and last activity for the activity report: while this
    extension's own request runs in it (a snapshot before a reclaim), idle and as active as it
    was before: a snapshot is not its user's activity, and must not put its own reclaim off."""
    if not hasattr(kernel, OWN_REQUEST):
        return execution_state, last_activity
    return "idle", getattr(kernel, OWN_REQUEST)


@contextlib.asynccontextmanager
async def _not_the_users_activity(km: Any, kernel_id: str, kernel: Any) -> AsyncIterator[None]:
    """Run an own request in ``kernel`` without it counting as activity: jupyter-server marks
    every execute request's messages as activity (the kernel's and the server's last activity,
    which JupyterHub and idle cullers read); once the kernel is idle again after it, both are
    set back. A kernel that stays busy (its user's cell runs) keeps its marks."""
    if hasattr(kernel, OWN_REQUEST):  # nested in another own request, which sets them back
        yield
        return
    before = getattr(kernel, "last_activity", None)
    server_before = getattr(km, "last_kernel_activity", None)
    setattr(kernel, OWN_REQUEST, before)
    asked = datetime.now(timezone.utc)
    try:
        yield
    finally:
        # In the background: the caller's wait is bounded, and a kernel stuck in the request
        # would keep it waiting for nothing.
        task = asyncio.ensure_future(_set_back(km, kernel_id, kernel, before, server_before, asked))
        _SETTING_BACK.add(task)
        task.add_done_callback(_SETTING_BACK.discard)


_SETTING_BACK: set[asyncio.Future[None]] = set()
"""The tasks of :func:`_set_back` that run (a reference keeps each alive)."""


async def _set_back(
    km: Any,
    kernel_id: str,
    kernel: Any,
    before: datetime | None,
    server_before: datetime | None,
    asked: datetime,
) -> None:
    """Once the kernel is idle after an own request sent at ``asked``, set its and
    the server's last activity back to ``before`` and ``server_before``; a kernel still busy
    after :data:`SETTLE` keeps the marks (a cell of its user's runs, or the request is stuck)."""
    try:
        settled = await _settled_since(kernel, asked, SETTLE)
    finally:
        delattr(kernel, OWN_REQUEST)
    if settled and before is not None:
        kernel.last_activity = before
        if server_before is not None:
            km.last_kernel_activity = max([server_before, *_others_activity(km, kernel_id)])


async def _settled_since(kernel: Any, asked: datetime, within: float) -> bool:
    """Whether, within ``within`` seconds, the kernel is other than busy with a status that
    came after ``asked`` (its last activity since then: the "idle" that ends the request)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + within
    while True:
        last = getattr(kernel, "last_activity", None)
        if (
            getattr(kernel, "execution_state", None) != "busy"
            and isinstance(last, datetime)
            and last >= asked
        ):
            return True
        if loop.time() >= until:
            return False
        await asyncio.sleep(0.02)


def _others_activity(km: Any, kernel_id: str) -> list[datetime]:
    """The last activity of the server's other kernels."""
    out = []
    for other in list(km.list_kernel_ids()):
        if other == kernel_id:
            continue
        try:
            last = getattr(km.get_kernel(other), "last_activity", None)
        except KeyError:
            continue
        if isinstance(last, datetime):
            out.append(last)
    return out


class KernelStateUnavailable(Exception):
    """The kernel could not be asked, or did not answer in time; the message says which."""


async def _ask_kernel(km: Any, kernel_id: str, expression: str, timeout: float) -> Any:
    """Evaluate ``expression`` in the kernel as a silent request's user expression; its value
    (a Python literal, read back with ``ast.literal_eval``)."""
    kernel = km.get_kernel(kernel_id)
    async with _not_the_users_activity(km, kernel_id, kernel):
        return await _ask_kernel_once(km, kernel_id, kernel, expression, timeout)


async def _ask_kernel_once(
    km: Any, kernel_id: str, kernel: Any, expression: str, timeout: float
) -> Any:
    # A connection of its own: a client made by the kernel manager shares the manager's
    # session, whose id is its connection's identity, and the kernel routes each reply to the
    # newest connection with that identity (ipykernel sets ROUTER_HANDOVER). Two requests at
    # once (a restore as the notebook opens and a snapshot) would leave the first unanswered.
    session = kernel.session.clone()
    session.session = new_id()
    client = kernel.client(session=session)
    process = _process(kernel)
    client.start_channels()
    until = asyncio.get_running_loop().time() + timeout
    try:
        # A kernel that is still starting (a notebook just opened) may not yet hear a request
        # sent on a new connection: wait until it answers kernel_info first.
        try:
            await client.wait_for_ready(timeout=timeout)
        except RuntimeError as e:  # jupyter_client's words for "not ready in time" or "died"
            raise KernelStateUnavailable(f"the kernel is not ready: {e}") from e
        if _process(kernel) != process:
            # Restarted while this waited (the user's "Restart kernel"): the new process starts
            # clean; what was asked of the old one is not done to it.
            raise KernelStateUnavailable(RESTARTED)
        msg_id = client.execute(
            "", silent=True, store_history=False, user_expressions={"answer": expression}
        )
        reply = await _reply_to(km, kernel_id, kernel, client, msg_id, process, until, timeout)
    finally:
        client.stop_channels()
    return _answer_of(reply)


async def _reply_to(
    km: Any,
    kernel_id: str,
    kernel: Any,
    client: Any,
    msg_id: str,
    process: object,
    until: float,
    timeout: float,
) -> dict[str, Any]:
    """The kernel's reply to ``msg_id``, by the loop time ``until``; a kernel that stops or
    restarts meanwhile is said so at once rather than at the end of the wait."""
    loop = asyncio.get_running_loop()
    while True:
        left = until - loop.time()
        if left <= 0:
            raise KernelStateUnavailable(f"the kernel did not answer within {timeout:.0f} s")
        try:
            reply: dict[str, Any] = await client.get_shell_msg(timeout=min(left, ALIVE_CHECK))
        except Empty:
            if kernel_id not in km or not await ensure_async(kernel.is_alive()):
                raise KernelStateUnavailable("the kernel stopped before it answered") from None
            if _process(kernel) != process:
                raise KernelStateUnavailable(RESTARTED) from None
            continue
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            return reply


def _answer_of(reply: Mapping[str, Any]) -> Any:
    """The value of the request's user expression (a Python literal), or why there is none."""
    content = reply["content"]
    if content.get("status") != "ok":
        raise KernelStateUnavailable(f"the kernel refused the request: {content.get('ename')}")
    answer = content.get("user_expressions", {}).get("answer", {})
    if answer.get("status") != "ok":
        error = f"{answer.get('ename')}: {answer.get('evalue')}"
        raise KernelStateUnavailable(f"the kernel's state code failed ({error[:300]})")
    return ast.literal_eval(answer["data"]["text/plain"])


RESTARTED = "the kernel restarted before it answered: ask again (it starts clean)"


def _process(kernel: Any) -> object:
    """The kernel's current process (its id), which a restart changes; ``None`` if unknown."""
    return getattr(getattr(kernel, "provisioner", None), "pid", None)


def _call(module: str, function: str, arguments: Mapping[str, Any]) -> str:
    """A user expression that calls ``module.function(arguments as JSON)`` in the kernel,
    leaving no name behind in its namespace."""
    request = json.dumps(dict(arguments))
    return f"__import__({module!r}, fromlist=['_']).{function}({request!r})"


async def snapshot_kernel(
    km: Any, kernel_id: str, notebook: str, settings: KernelStateSettings, *, deadline_s: float
) -> KernelStateOutcome:
    """Snapshot one kernel's variables as ``notebook``'s, within ``deadline_s`` seconds."""
    started = time.monotonic()

    def failed(error: str) -> KernelStateOutcome:
        seconds = time.monotonic() - started
        return KernelStateOutcome(kernel_id, notebook, "failed", error=error, seconds=seconds)

    if not await _idle_soon(km, kernel_id, min(BUSY_GRACE, deadline_s / 4)):
        return KernelStateOutcome(kernel_id, notebook, "skipped_busy")
    try:
        model = km.kernel_model(kernel_id)
    except KeyError:
        return failed("the kernel is gone")
    language = await _language(km, model.get("name"))
    if language not in ("python", None):
        return failed(f"not a Python kernel ({language}): its variables cannot be saved")
    arguments = {
        "directory": settings.directory,
        "key": state_key(notebook, kernel_id),
        "notebook": notebook,
        "kernel_id": kernel_id,
        "max_bytes": settings.max_bytes,
        "reserve_bytes": settings.reserve_bytes,
        "deadline": time.time() + max(deadline_s - REPLY_MARGIN, 0.0),
    }
    expression = _call("jupyter_gpuaas.kernel.snapshot", "snapshot_request", arguments)
    try:
        answer = json.loads(await _ask_kernel(km, kernel_id, expression, deadline_s))
        if "writing" in answer:  # the kernel goes on; its writer leaves the outcome in a file
            log.info(
                "kernel-state: kernel %s paused %.3f s for its snapshot, written in the background",
                kernel_id,
                float(answer.get("paused_s", 0.0)),
            )
            left = deadline_s - (time.monotonic() - started)
            outcome = await _outcome_left(settings, str(answer["writing"]), left)
        else:
            outcome = KernelStateOutcome.from_json(answer["outcome"])
    except (KernelStateUnavailable, ValueError, SyntaxError, KeyError, TypeError) as e:
        return failed(str(e))
    # The server's clock: it includes the wait for the kernel and the answer's way back.
    return KernelStateOutcome(**{**outcome.__dict__, "seconds": time.monotonic() - started})


OUTCOME_POLL = 0.1
"""Seconds between looks for a background writer's outcome file."""


async def _outcome_left(
    settings: KernelStateSettings, name: str, within: float
) -> KernelStateOutcome:
    """The outcome a kernel's background writer leaves as ``name`` in the state folder (read
    with the manifest's checks, then removed), within ``within`` seconds."""
    if not is_outcome_file(name):
        raise KernelStateUnavailable(f"the kernel named no outcome file ({name[:80]!r})")
    path = state_directory(settings.directory, Path.home()) / name
    loop = asyncio.get_running_loop()
    until = loop.time() + within
    while True:
        try:
            outcome = read_outcome_file(path)
        except FileNotFoundError:
            if loop.time() >= until:
                raise KernelStateUnavailable(
                    f"the kernel's writer did not finish within {within:.0f} s"
                ) from None
            await asyncio.sleep(OUTCOME_POLL)
            continue
        except Refused as e:
            raise KernelStateUnavailable(str(e)) from e
        with contextlib.suppress(OSError):
            path.unlink()
        return outcome


async def _language(km: Any, name: str | None) -> str | None:
    specs = getattr(km, "kernel_spec_manager", None)
    if specs is None or not name:
        return None
    try:
        spec = await ensure_async(specs.get_kernel_spec(name))
    except Exception:  # noqa: BLE001 - a spec removed since the kernel started: try anyway
        return None
    language = getattr(spec, "language", None)
    return str(language).lower() if language else None


async def _notebooks(serverapp: Any) -> dict[str, str]:
    """kernel id → the path of its session's notebook (or console)."""
    manager = getattr(serverapp, "session_manager", None)
    if manager is None:
        return {}
    paths: dict[str, str] = {}
    for session in await manager.list_sessions():
        kernel = session.get("kernel") or {}
        if kernel.get("id") and session.get("path"):
            paths.setdefault(kernel["id"], str(session["path"]))
    return paths


async def snapshot_all_kernels(
    serverapp_or_kernel_manager: Any, settings: KernelStateSettings, *, deadline_s: float
) -> list[KernelStateOutcome]:
    """Snapshot every running kernel of the server, all at once, each within ``deadline_s``
    seconds from now: idle Python kernels are saved, busy ones left alone (``skipped_busy``),
    others reported ``failed`` with the reason. Given a kernel manager rather than the server
    app, notebooks are unknown (``""``; each snapshot is then keyed by its kernel id)."""
    started = time.monotonic()
    km = getattr(serverapp_or_kernel_manager, "kernel_manager", serverapp_or_kernel_manager)
    try:
        notebooks = await asyncio.wait_for(_notebooks(serverapp_or_kernel_manager), deadline_s)
    except asyncio.TimeoutError:
        notebooks = {}
    left = max(deadline_s - (time.monotonic() - started), 0.0)
    kernel_ids = list(km.list_kernel_ids())
    return list(
        await asyncio.gather(
            *(
                snapshot_kernel(km, kid, notebooks.get(kid, ""), settings, deadline_s=left)
                for kid in kernel_ids
            )
        )
    )


async def restore_kernel(
    km: Any, kernel_id: str, notebook: str, settings: KernelStateSettings, *, force: bool
) -> api.KernelStateRestore:
    """Restore ``notebook``'s snapshot into the kernel (the ``kernel_state_restore`` payload of
    docs/api.md); a kernel that has already run cells is left alone unless ``force``."""
    if kernel_id not in km:
        raise KernelStateUnavailable("no such kernel")
    if not await _idle_soon(km, kernel_id, BUSY_GRACE):
        raise KernelStateUnavailable("a cell is running in this kernel; restore when it is done")
    arguments = {"directory": settings.directory, "key": state_key(notebook, ""), "force": force}
    expression = _call("jupyter_gpuaas.kernel.restore", "restore_request", arguments)
    answer = json.loads(await _ask_kernel(km, kernel_id, expression, settings.restore_timeout))
    return restore_answer(notebook, kernel_id, answer)


def restore_answer(notebook: str, kernel_id: str, answer: Any) -> api.KernelStateRestore:
    """The kernel's answer (``jupyter_gpuaas.kernel.restore``'s, as JSON) as the server gives
    it: the notebook and the kernel it was for, and the fields the document names, key by key
    (what else a kernel sends is not passed on)."""
    out: api.KernelStateRestore = {
        "path": notebook,
        "kernel_id": kernel_id,
        "status": answer["status"],
        "message": answer["message"],
    }
    if "restored" in answer:
        out["restored"] = answer["restored"]
    if "not_restored" in answer:
        out["not_restored"] = answer["not_restored"]
    if "notes" in answer:
        out["notes"] = answer["notes"]
    if "bytes" in answer:
        out["bytes"] = answer["bytes"]
    if "seconds" in answer:
        out["seconds"] = answer["seconds"]
    if "saved_at" in answer:
        out["saved_at"] = answer["saved_at"]
    return out


def snapshot_info(notebook: str, settings: KernelStateSettings, home: Path) -> api.KernelStateInfo:
    """What the notebook's snapshot holds, from its manifest only (nothing is unpickled on the
    server): the ``kernel_state_info`` payload of docs/api.md."""
    info: api.KernelStateInfo = {
        "path": notebook,
        "exists": False,
        "saved_at": None,
        "bytes": 0,
        "variables": [],
        "lost": [],
        "problem": None,
    }
    try:
        folder = state_directory(settings.directory, home)
        # The reader a restore uses, with its checks on the file as opened: a link, a FIFO
        # (which would hold the server's loop), another user's file is a problem, not listed.
        fields = read_manifest(folder / f"{state_key(notebook, '')}.json").fields
    except FileNotFoundError:
        return info
    except Refused as e:
        return {**info, "exists": True, "problem": str(e)}
    except (OSError, ValueError) as e:
        return {**info, "exists": True, "problem": f"the snapshot cannot be read: {e}"}
    variables = fields.get("variables")
    lost = fields.get("lost")
    saved_at = fields.get("saved_at")
    size = fields.get("bytes")
    try:
        datetime.fromisoformat(str(saved_at).replace("Z", "+00:00"))
    except ValueError:
        saved_at = None
    return {
        **info,
        "exists": True,
        "saved_at": saved_at,
        "bytes": size if isinstance(size, int) else 0,
        "variables": [str(v.get("name")) for v in variables if isinstance(v, dict) and "name" in v]
        if isinstance(variables, list)
        else [],
        "lost": [
            {"name": str(v.get("name")), "reason": str(v.get("reason", ""))}
            for v in lost
            if isinstance(v, dict) and "name" in v
        ]
        if isinstance(lost, list)
        else [],
    }


ESTIMATE_EVERY = 300.0
"""Seconds an idle kernel's estimated state size is reused before it is asked again."""

MAX_NOT_KEPT = 50
"""Variables a kernel names as never kept that one estimate keeps (the rest are counted)."""


@dataclass(frozen=True)
class KernelEstimate:
    """One kernel's own estimate of what a snapshot of it would write (no pickling)."""

    bytes: int
    variables: int = 0
    """How many variables would be kept."""
    not_kept: tuple[tuple[str, str], ...] = ()
    """``(name, reason)`` of those that never can be (a generator, an open file, ...)."""


class StateSizes:
    """What the server's kernels' variables would take in a snapshot, estimated by each kernel
    (``jupyter_gpuaas.kernel.snapshot.estimate``: sizes, no pickling), for the activity report
    (the gpuaas service waits for a reclaim's snapshot in proportion: its policy's
    ``snapshot_per_gib``) and the sidebar (``GET gpuaas/api/kernel-state/estimate``); one
    instance serves both, so a kernel is asked once for the two. An idle kernel is asked at
    most every :data:`ESTIMATE_EVERY` seconds (a silent request, not its user's activity), and
    by one caller at a time; a busy one is never asked: its last figure stands (a kernel never
    asked counts as 0)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self._known: dict[str, tuple[KernelEstimate, float]] = {}
        self._asking: set[str] = set()

    async def total(self, km: Any, timeout: float = 10.0) -> int:
        """The running kernels' estimated state, in bytes, all together."""
        return sum(e.bytes for e in (await self.kernels(km, timeout)).values() if e is not None)

    async def kernels(self, km: Any, timeout: float = 10.0) -> dict[str, KernelEstimate | None]:
        """Each running kernel's estimate (``None``: not known yet, e.g. busy since it
        started), those older than :data:`ESTIMATE_EVERY` asked again first."""
        kernel_ids = list(km.list_kernel_ids())
        self._known = {k: v for k, v in self._known.items() if k in kernel_ids}
        await asyncio.gather(*(self._refresh(km, k, timeout) for k in kernel_ids))
        return {k: self._known[k][0] if k in self._known else None for k in kernel_ids}

    async def _refresh(self, km: Any, kernel_id: str, timeout: float) -> None:
        known = self._known.get(kernel_id)
        if known is not None and self.clock() - known[1] < ESTIMATE_EVERY:
            return
        if kernel_id in self._asking:  # another caller asks it now; its figure will do
            return
        self._asking.add(kernel_id)
        try:
            estimate = await self._ask(km, kernel_id, timeout)
        finally:
            self._asking.discard(kernel_id)
        if estimate is not None:
            self._known[kernel_id] = (estimate, self.clock())

    async def _ask(self, km: Any, kernel_id: str, timeout: float) -> KernelEstimate | None:
        try:
            if km.kernel_model(kernel_id).get("execution_state") != "idle":
                return None
            if await _language(km, km.kernel_model(kernel_id).get("name")) not in ("python", None):
                return KernelEstimate(0)
            expression = _call("jupyter_gpuaas.kernel.snapshot", "estimate_request", {})
            answer = json.loads(await _ask_kernel(km, kernel_id, expression, timeout))
        except (KernelStateUnavailable, KeyError, ValueError, SyntaxError, TypeError):
            return None  # asked again at the next call
        return _estimate_of(answer)


def _estimate_of(answer: object) -> KernelEstimate | None:
    """A kernel's ``estimate_request`` answer, read; ``None`` where it is not one."""
    if not isinstance(answer, dict):
        return None
    size, count, not_kept = answer.get("bytes"), answer.get("variables", 0), answer.get("not_kept")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    names = tuple(
        (str(v.get("name", ""))[:200], str(v.get("reason", ""))[:200])
        for v in (not_kept if isinstance(not_kept, list) else [])[:MAX_NOT_KEPT]
        if isinstance(v, dict)
    )
    valid_count = isinstance(count, int) and not isinstance(count, bool) and count >= 0
    return KernelEstimate(size, count if valid_count else 0, names)


async def state_estimate(serverapp: Any, sizes: StateSizes | None) -> api.KernelStateEstimate:
    """The ``kernel_state_estimate`` payload of docs/api.md: what a reclaim now would keep of
    each kernel (its own estimate) and in all, and about how long its save would take
    (:func:`~jupyter_gpuaas.core.kernel_state.save_seconds`); ``keeps: false`` where this
    server does not save its kernels' variables (``sizes`` is ``None``)."""
    if sizes is None:
        return {"keeps": False, "bytes": 0, "seconds": 0.0, "kernels": []}
    estimates = await sizes.kernels(serverapp.kernel_manager)
    notebooks = await _notebooks(serverapp)
    total = sum(e.bytes for e in estimates.values() if e is not None)
    return {
        "keeps": True,
        "bytes": total,
        "seconds": round(save_seconds(total), 1),
        "kernels": [
            {
                "kernel_id": kernel_id,
                "path": notebooks.get(kernel_id, ""),
                "bytes": e.bytes if e is not None else None,
                "variables": e.variables if e is not None else None,
                "not_kept": [{"name": n, "reason": r} for n, r in e.not_kept]
                if e is not None
                else [],
            }
            for kernel_id, e in estimates.items()
        ],
    }
