"""The demo hub's state lives and dies with the demo's cluster.

Each ``make demo`` starts a new cluster (devcluster wipes its state directory), so the servers,
home volumes and Kueue objects of the last run are gone. The hub's database in ``.demo/hub``
would outlive them: KubeSpawner's saved state of each user names a home claim and a pod of a
cluster that no longer exists. So the database is kept only for the cluster it was made with:
``.demo/hub/cluster-id`` names that cluster (its devcluster ``state.json``'s creation time), and a
database made with another cluster, or with none recorded, is removed before the hub starts
(the hub creates a new one from its configuration: the demo's users, teams and roles). The
console's history (``.demo/prometheus``) is kept: it is only figures.
"""

from __future__ import annotations

from pathlib import Path

from devcluster import procs
from devcluster.config import Settings

__all__ = ["CLUSTER_MARK", "HUB_DATABASE", "cluster_identity", "hub_state_for"]

HUB_DATABASE = "jupyterhub.sqlite"
"""The hub's database in its state directory (devcluster/hub.py's ``db_url``)."""
CLUSTER_MARK = "cluster-id"
"""The file beside it naming the cluster the database was made with."""


def cluster_identity(settings: Settings) -> str:
    """The running cluster's identity: when devcluster created it ("" if not known)."""
    state = procs.read_json(settings.state_file) or {}
    created = state.get("created")
    return repr(float(created)) if isinstance(created, int | float) else ""


def hub_state_for(hub_dir: Path, cluster: str) -> bool:
    """Keep the hub's database in ``hub_dir`` only if it was made with ``cluster``; remove it
    otherwise (and its SQLite journal). Records ``cluster`` as the database's. ``True`` when a
    database was removed."""
    hub_dir.mkdir(parents=True, exist_ok=True)
    mark = hub_dir / CLUSTER_MARK
    kept = mark.read_text().strip() if mark.exists() else None
    database = hub_dir / HUB_DATABASE
    removed = False
    if database.exists() and (not cluster or kept != cluster):
        for suffix in ("", "-journal", "-wal", "-shm"):
            (hub_dir / f"{HUB_DATABASE}{suffix}").unlink(missing_ok=True)
        removed = True
    mark.write_text(cluster + "\n")
    return removed
