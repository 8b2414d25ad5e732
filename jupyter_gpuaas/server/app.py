"""The jupyter-server extension: configuration (``c.GPUaaS.*``), and the one
:class:`~jupyter_gpuaas.server.context.ServerState` it builds and hands to its handlers."""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Enum, Float, Int, List, TraitError, Unicode, Union, validate

from jupyter_gpuaas.core.kernel_state import DIRECTORY_ENV, KernelStateOutcome
from jupyter_gpuaas.gpu import processes
from jupyter_gpuaas.gpu.fake_nvml import from_environment
from jupyter_gpuaas.gpu.hami import hami_env
from jupyter_gpuaas.gpu.nvml import NvmlReader
from jupyter_gpuaas.gpu.sampler import Sampler
from jupyter_gpuaas.gpu.simulate import (
    DRIVER_BEHAVIOURS,
    DriverBehaviour,
    DriverState,
    read_node,
    reset_driver,
    state_dir,
)
from jupyter_gpuaas.gpu.spec import DEFAULT_SIMULATED_DEVICES, SpecError, parse_devices
from jupyter_gpuaas.gpu.usage import KernelInfo
from jupyter_gpuaas.server.activity_payload import (
    current_activity,
    kernel_models,
    latest_user_activity,
)
from jupyter_gpuaas.server.context import ServerState
from jupyter_gpuaas.server.handlers import handlers
from jupyter_gpuaas.server.jobs import Collector
from jupyter_gpuaas.server.kernel_requests import (
    KernelStateSettings,
    StateSizes,
    snapshot_all_kernels,
)
from jupyter_gpuaas.server.reporter import Reporter, Snapshot
from jupyter_gpuaas.server.service_client import ServiceClient


class GPUaaS(ExtensionApp):
    """GPU usage per kernel for the JupyterLab GPU panel, and activity for idle cullers."""

    name = "jupyter_gpuaas"
    load_other_extensions = True

    gpu_source = Enum(
        ["auto", "nvml", "simulated"],
        default_value="auto",
        help="""Where GPU figures come from.

        "auto" (default): the NVIDIA driver through NVML if it initialises, otherwise the panel
        says "unavailable" and why (no driver, ...), and retries with a growing delay (up to a
        minute). "nvml": the same, for machines that must have a GPU (failures log as warnings).
        "simulated": a fake NVML library with the devices of simulated_devices, for trying the
        panel without a GPU (the UI labels it "simulated"; never chosen automatically).
        Example: c.GPUaaS.gpu_source = "simulated"
        """,
    ).tag(config=True)

    simulated_devices = Union(
        [Unicode(), List()],
        default_value=DEFAULT_SIMULATED_DEVICES,
        help="""The GPUs of gpu_source = "simulated".

        A spec string: comma-separated groups [COUNTx]MODEL-MEMORYGB[:options], options
        "mig=NxPROFILE[+NxPROFILE]" (MIG devices) and "other=SIZE" (memory used by processes
        this server cannot see, e.g. other pods). Or a list of dicts with the keys model, count,
        mig and other. GPU memory sizes in the model name are GiB, as vendors write them.
        Default: "2xH100-80GB,1xA100-40GB:mig=7x1g.5gb" (two H100 80GB and one A100 40GB split
        into seven 1g.5gb MIG devices).
        Not used on a node of the dev cluster, whose node agent hands each pod its devices
        (the state directory holds the node's GPUs, NVIDIA_VISIBLE_DEVICES the pod's).
        Example: c.GPUaaS.simulated_devices = "4xA100-80GB,1xL4-24GB:other=6GiB"
        """,
    ).tag(config=True)

    simulated_shared = List(
        Unicode(),
        default_value=[],
        help="""Which simulated devices are time-shared with other pods: GPU indexes ("0"),
        MIG devices as "GPU:MIG" ("2:3"), UUIDs, or "all". Their used memory is shown as
        possibly other users', and their utilisation never counts as this server's activity.
        Default: none.
        Example: c.GPUaaS.simulated_shared = ["1"]
        """,
    ).tag(config=True)

    simulated_driver = Enum(
        list(DRIVER_BEHAVIOURS),
        default_value="565",
        help="""How the simulated driver reports processes, as drivers do inside a pod's PID
        namespace: "565" (pod PIDs with their memory; drivers 565.57+), "535.113" (pod PIDs,
        memory reported as 0; drivers 535.113-560), "535.104" (host PIDs that match nothing;
        drivers up to 535.104), "no_driver" (nvmlInit fails). Processes can change it later
        with jupyter_gpuaas.gpu.simulate.set_driver(). Default: "565".
        Example: c.GPUaaS.simulated_driver = "535.113"
        """,
    ).tag(config=True)

    shared_devices = List(
        Unicode(),
        default_value=[],
        help="""With the real driver, which GPUs are time-shared with other pods (NVML cannot
        tell): GPU indexes, "GPU:MIG" pairs, UUIDs, or "all" (e.g. for a pod that requested
        nvidia.com/gpu.shared). Their used memory is shown as possibly other users', and their
        utilisation never counts as this server's activity. Default: none.
        Example: c.GPUaaS.shared_devices = ["all"]
        """,
    ).tag(config=True)

    sample_ttl = Float(
        1.0,
        min=0.0,
        help="""Seconds a GPU sample is served again before the next NVML read, so that many
        open tabs cost one read. 0 reads on every request (concurrent requests still share
        one read). Default: 1.0.
        Example: c.GPUaaS.sample_ttl = 2.0
        """,
    ).tag(config=True)

    busy_utilization_percent = Int(
        5,
        min=0,
        max=100,
        help="""GPU utilisation (percent) above which a whole, unshared GPU of this server
        counts as busy in the activity endpoint (idle_since is then null). Default: 5.
        Example: c.GPUaaS.busy_utilization_percent = 10
        """,
    ).tag(config=True)

    queue_service_url = Unicode(
        "",
        help="""URL of the gpuaas hub service that answers the Queue section of the sidebar,
        e.g. "http://proxy-public/services/gpuaas/" (through the hub's proxy) or the service's
        own address. The server asks it with its hub token (JUPYTERHUB_API_TOKEN), which needs
        the scope access:services!service=gpuaas (docs/queue.md). Default: "" (then the
        environment variable GPUAAS_SERVICE_URL; with neither, the section says so).
        Example: c.GPUaaS.queue_service_url = "http://127.0.0.1:8000/services/gpuaas/"
        """,
    ).tag(config=True)

    queue_timeout = Float(
        5.0,
        min=0.1,
        help="""Seconds to wait for the gpuaas hub service before the Queue section reports it
        unreachable. Default: 5.0.
        Example: c.GPUaaS.queue_timeout = 10
        """,
    ).tag(config=True)

    activity_report_interval = Float(
        60.0,
        min=0.0,
        help="""Seconds between reports of this server's activity (the activity endpoint's
        payload) to the gpuaas hub service at queue_service_url, made with the server's hub token
        (scope access:services!service=gpuaas). The culler judges idleness by these reports; a
        server that stops reporting is "unknown". 0 turns reporting off; it is also off when the
        server does not run under JupyterHub (no JUPYTERHUB_API_TOKEN) or no service URL is set.
        Keep it well under the culler's report_stale_after (default 10m). Default: 60.
        Example: c.GPUaaS.activity_report_interval = 30
        """,
    ).tag(config=True)

    activity_watch_interval = Float(
        2.0,
        min=0.0,
        help="""Seconds between cheap checks, while waiting for the next activity report, of
        whether a person came back to this server (ran a cell, typed in a terminal) after a
        quiet spell of at least activity_report_interval. When one did, the report goes at once
        instead of at the end of the interval, so that the culler never warns someone by a
        report from before they came back. Each check reads the kernels' and terminals' times
        in memory (no GPU sample, no request). 0: reports only every activity_report_interval.
        Default: 2.
        Example: c.GPUaaS.activity_watch_interval = 5
        """,
    ).tag(config=True)

    jobs_collect_interval = Float(
        30.0,
        min=0.0,
        help="""Seconds between looks for finished GPU jobs of this user whose executed notebook
        has not been written back yet (docs/jobs.md); each is written beside its source as
        <name>-<job>.ipynb, never over an existing file, also while no browser is open. The
        sidebar's poll collects too. 0 turns the background look off. Off outside JupyterHub.
        Default: 30.
        Example: c.GPUaaS.jobs_collect_interval = 60
        """,
    ).tag(config=True)

    kernel_state_dir = Unicode(
        "~/.jupyter-gpuaas/kernel-state",
        help="""Folder in the user's home where kernels save their variables, one snapshot per
        notebook (files mode 0600; docs/kernel-state.md). "~" is the home; a relative path is
        taken from the home. It must lie in the home (on the persistent volume): a kernel
        reads and writes state nowhere else, and refuses a folder outside it.
        Default: "~/.jupyter-gpuaas/kernel-state".
        Example: c.GPUaaS.kernel_state_dir = "~/.cache/kernel-state"
        """,
    ).tag(config=True)

    kernel_state_max_bytes = Int(
        8 * 1024**3,
        min=0,
        help="""Size budget of one kernel's snapshot, in bytes. Variables are saved smallest
        first; one that would pass the budget is not saved and is named with the reason
        ("over the size budget"). 0 saves modules only. Default: 8589934592 (8 GiB).
        Example: c.GPUaaS.kernel_state_max_bytes = 2 * 1024**3
        """,
    ).tag(config=True)

    kernel_state_reserve = Int(
        1024**3,
        min=0,
        help="""Bytes of free space a snapshot leaves on the home volume: the free space is
        checked first, and a snapshot never writes into the last kernel_state_reserve bytes
        (variables that would are named as lost). Default: 1073741824 (1 GiB).
        Example: c.GPUaaS.kernel_state_reserve = 512 * 1024**2
        """,
    ).tag(config=True)

    kernel_state_timeout = Float(
        60.0,
        min=1.0,
        help="""Seconds a snapshot the user asks for ("Save variables now") may take, the
        kernel's pause included; the kernel stops at the bound and names what it had not
        saved. (A reclaim's snapshot has the service's own bound.) Default: 60.
        Example: c.GPUaaS.kernel_state_timeout = 120
        """,
    ).tag(config=True)

    kernel_state_on_reclaim = Bool(
        True,
        help="""Whether this server keeps its kernels' variables through a reclaim and a move to
        a bigger GPU. Reclaim: it tells the gpuaas hub service so in its activity reports, and
        when the service asks before it stops the server, saves every idle kernel's variables
        (within the time the service gives: its snapshot_timeout) and reports each kernel's
        outcome at once; the service may then reclaim it sooner (its policies'
        idle_after_when_kept). Move: every idle kernel saves its variables (within
        kernel_state_timeout) before the service is asked to move the server. Each notebook
        gets its variables back when it opens in the new server. False: the server says it
        keeps nothing, and a reclaim or a move ends its kernels as before. Default: True.
        Example: c.GPUaaS.kernel_state_on_reclaim = False
        """,
    ).tag(config=True)

    kernel_state_restore_timeout = Float(
        300.0,
        min=1.0,
        help="""Seconds the server waits for a kernel to load a snapshot back before it answers
        that the restore is still running (the kernel carries on). Default: 300.
        Example: c.GPUaaS.kernel_state_restore_timeout = 600
        """,
    ).tag(config=True)

    @validate("simulated_devices")
    def _check_devices(self, proposal: dict[str, Any]) -> Any:
        try:
            parse_devices(proposal["value"])
        except (SpecError, TypeError, ValueError) as err:
            raise TraitError(f"GPUaaS.simulated_devices: {err}") from err
        return proposal["value"]

    def initialize_settings(self) -> None:
        serverapp: Any = self.serverapp
        sampler = Sampler(self._reader(), self._kernel_infos, ttl=self.sample_ttl)
        activity_now = functools.partial(
            current_activity,
            sampler,
            serverapp.web_app.settings,
            busy_utilization_percent=self.busy_utilization_percent,
        )
        client = ServiceClient.for_app(self)
        kernel_state = self.kernel_state_settings()
        # The kernels this server starts inherit its environment: a notebook's restore as it
        # opens runs in its kernel and finds the snapshots there (jupyter_gpuaas.kernel.restore)
        os.environ[DIRECTORY_ENV] = kernel_state.directory
        keeps = self.kernel_state_on_reclaim
        # One estimate of the kernels' state for the report and the sidebar: asked once for both.
        sizes = StateSizes() if keeps else None
        reporter = collector = None
        if self.activity_report_interval > 0 and client.configured:
            reporter = Reporter(
                activity_now,
                client,
                self.activity_report_interval,
                self.log,
                snapshot=self._reclaim_snapshot(kernel_state) if keeps else None,
                state_size=self._state_size(sizes) if sizes is not None else None,
                latest_activity=functools.partial(latest_user_activity, serverapp.web_app.settings),
                watch_interval=self.activity_watch_interval,
            )
            # The loop runs once the server starts (initialize_settings runs before).
            serverapp.io_loop.add_callback(reporter.start)
        if self.jobs_collect_interval > 0 and client.configured:
            collector = Collector(client, serverapp.contents_manager, self.jobs_collect_interval)
            serverapp.io_loop.add_callback(collector.start)
        self.state = ServerState(
            sampler=sampler,
            activity_now=activity_now,
            client=client,
            reporter=reporter,
            collector=collector,
            kernel_state=kernel_state,
            keeps_state_on_moves=self.kernel_state_on_reclaim,
            state_sizes=sizes,
        )

    def _reclaim_snapshot(self, settings: KernelStateSettings) -> Snapshot:
        """What the reporter calls when the service asks for a snapshot before a reclaim."""
        serverapp = self.serverapp

        async def snapshot(seconds: float) -> list[KernelStateOutcome]:
            return await snapshot_all_kernels(serverapp, settings, deadline_s=seconds)

        return snapshot

    def _state_size(self, sizes: StateSizes) -> Callable[[], Awaitable[int]]:
        """The kernels' estimated state size, for the activity report."""
        serverapp = self.serverapp

        async def total() -> int:
            return await sizes.total(getattr(serverapp, "kernel_manager", None))

        return total

    def kernel_state_settings(self) -> KernelStateSettings:
        """The kernel_state_* settings, as the snapshot and restore code takes them."""
        return KernelStateSettings(
            directory=self.kernel_state_dir,
            max_bytes=self.kernel_state_max_bytes,
            reserve_bytes=self.kernel_state_reserve,
            timeout=self.kernel_state_timeout,
            restore_timeout=self.kernel_state_restore_timeout,
        )

    def _reader(self) -> NvmlReader:
        # HAMi's device plugin says in the environment what HAMi-core enforces here.
        hami = hami_env(os.environ)
        if self.gpu_source != "simulated":
            return NvmlReader(
                shared=frozenset(self.shared_devices),
                log=self.log,
                expect_gpu=self.gpu_source == "nvml",
                hami=hami,
            )
        directory: Path = state_dir()
        if read_node(directory) is None:
            # A new server starts with the configured driver, not what a session left behind
            # (a node's driver is the node's: its other pods' servers read it too).
            reset_driver(directory)
        lib, what = from_environment(
            self.simulated_devices,
            directory,
            DriverState(behaviour=cast("DriverBehaviour", self.simulated_driver)),
            os.environ,
        )
        self.log.info("GPUaaS: %s; processes join them through %s", what, directory)
        return NvmlReader(lib, shared=frozenset(self.simulated_shared), log=self.log, hami=hami)

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers(self.state))

    async def _kernel_infos(self) -> list[KernelInfo]:
        serverapp: Any = self.serverapp
        km = serverapp.kernel_manager
        sessions: dict[str, dict[str, Any]] = {}
        for session in await serverapp.session_manager.list_sessions():
            sessions.setdefault(session["kernel"]["id"], session)
        infos = []
        for kernel_id, model in kernel_models(km):
            session = sessions.get(kernel_id, {})
            infos.append(
                KernelInfo(
                    kernel_id=kernel_id,
                    name=model.get("name"),
                    path=session.get("path"),
                    session_type=session.get("type"),
                    execution_state=model.get("execution_state"),
                    pid=processes.kernel_pid(km, kernel_id),
                )
            )
        return infos

    async def stop_extension(self) -> None:
        state: ServerState | None = getattr(self, "state", None)  # None if loading failed
        if state is None:
            return
        if state.reporter is not None:
            await state.reporter.stop()
        if state.collector is not None:
            await state.collector.stop()
        await state.sampler.close()
