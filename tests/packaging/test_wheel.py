"""The wheel is what users install: build the sdist, the wheel from it, and use the wheel alone.

``python -m build`` makes the sdist from the checkout and then the wheel from the sdist, so the
wheel's build shows the sdist holds what a rebuild needs. The wheel (with its ``hub`` extra, and
JupyterLab, as a user installs it) goes into a fresh virtual environment under a temporary
directory; there, with the Jupyter paths and HOME pointed at empty folders, the server extension
and the labextension must be listed as enabled, the console scripts must run, JupyterHub's entry
point must load the spawner, and every import must come from the installed wheel, not the
checkout.

The build runs without isolation in the test environment (``build``, ``hatchling`` and the
Jupyter build hooks are in the ``test`` extra) so that it takes seconds, not a second download of
JupyterLab; the prebuilt labextension and console modules (``make install``) are packed as they
are. The fresh environment is made and filled by uv (in the ``test`` extra) from the package
registry, as a user's pip would, with the interpreter running the tests: pip took 1 to over 7
minutes for the ~150 packages on a loaded 2-core machine, uv under 30 s cold and seconds from
its cache.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VERSION = json.loads((REPO / "package.json").read_text())["version"]
DIST_NAME = "jupyter_gpuaas"
# the build, a fresh venv with the wheel's dependencies and JupyterLab: under a minute here
pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]

# What building the wheel again from the sdist needs, beside the Python packages: the npm build's
# inputs (so a rebuild from source works) and its prebuilt outputs (so a plain pip one does).
SDIST_NEEDS = (
    "pyproject.toml",
    "package.json",
    "package-lock.json",
    "tsconfig.json",
    "install.json",
    "LICENSE",
    "README.md",
    "jupyter-config/server-config/jupyter_gpuaas.json",
    "jupyter-config/labconfig/jupyter_gpuaas.json",
    "labextension/src/index.ts",
    "labextension/schema/plugin.json",
    "culler/gpuaas_service/console/tsconfig.json",
    "culler/gpuaas_service/console/src/main.ts",
    "jupyter_gpuaas/labextension/package.json",
    "jupyter_gpuaas/labextension/static/style.js",
    "culler/gpuaas_service/console/static/js/culler/gpuaas_service/console/src/main.js",
)
# Caches and local state that must never ship.
SDIST_NEVER = (
    ".venv",
    ".venv-hub55",
    ".venv-py310",
    ".venv-py313",
    "node_modules",
    ".import_linter_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".demo",
    "build",
)
# The only top-level names the wheel puts in site-packages: specific to this project.
IMPORT_NAMES = {"jupyter_gpuaas", "gpuaas_spawner", "gpuaas_service"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    venv: Path
    env: dict[str, str]
    cwd: Path

    def run(self, *args: str) -> str:
        """Run a command in the venv's environment; its output without colours."""
        return _run(list(args), self.cwd, self.env)


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``args`` with no input; fail the test, with the output, if it fails."""
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = ANSI.sub("", done.stdout + done.stderr)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{output}"
    return output


def _clean_env(home: Path) -> dict[str, str]:
    """This process's environment without the checkout's venv, with empty Jupyter folders."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not k.startswith("JUPYTER")
    }
    env |= {
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_DATA_DIR": str(home / ".local/share/jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / ".local/share/jupyter/runtime"),
        "JUPYTER_PLATFORM_DIRS": "0",
        "PIP_NO_INPUT": "1",
    }
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("packaging")
    dist = root / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO)], REPO)
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    home = root / "home"
    home.mkdir()
    env = _clean_env(home)
    venv = root / "venv"
    # uv with the caller's own cache (not the empty HOME), never a Python of its own
    uv_env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    uv_env |= {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    uv = str(Path(sys.executable).with_name("uv"))
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], root, uv_env)
    python = str(venv / "bin" / "python")
    install = [f"{wheel}[hub]", "jupyterlab>=4.6,<5"]
    _run([uv, "pip", "install", "--quiet", "--python", python, *install], root, uv_env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return Built(sdist=sdist, wheel=wheel, venv=venv, env=env, cwd=home)


def test_sdist_holds_what_a_rebuild_needs_and_no_local_state(built: Built) -> None:
    with tarfile.open(built.sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = [path for path in SDIST_NEEDS if path not in names]
    assert not missing, f"the sdist lacks {missing}"
    local = sorted({n.split("/")[0] for n in names if n.split("/")[0] in SDIST_NEVER})
    assert not local, f"the sdist carries local state: {local}"
    assert built.sdist.name == f"{DIST_NAME}-{VERSION}.tar.gz"


def test_wheel_holds_only_the_projects_import_names_and_its_jupyter_files(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as whl:
        names = whl.namelist()
    top = {n.split("/")[0] for n in names}
    data = f"{DIST_NAME}-{VERSION}.data"
    assert top == IMPORT_NAMES | {f"{DIST_NAME}-{VERSION}.dist-info", data}
    assert f"{data}/data/etc/jupyter/jupyter_server_config.d/jupyter_gpuaas.json" in names
    assert f"{data}/data/etc/jupyter/labconfig/page_config.d/jupyter_gpuaas.json" in names
    lab = f"{data}/data/share/jupyter/labextensions/jupyter-gpuaas"
    assert {f"{lab}/package.json", f"{lab}/install.json", f"{lab}/static/style.js"} <= set(names)
    assert "gpuaas_service/console/static/js/culler/gpuaas_service/console/src/main.js" in names


def test_server_extension_is_enabled_from_the_wheel(built: Built) -> None:
    listed = built.run("jupyter", "server", "extension", "list")
    # the venv's own config folder enables it (the wheel's etc/jupyter), and it validates
    section = listed.split(f"Config dir: {built.venv}/etc/jupyter", 1)[1].split("Config dir:")[0]
    assert re.search(r"^\s*jupyter_gpuaas enabled\s*$", section, re.M), listed
    assert re.search(rf"^\s*jupyter_gpuaas {re.escape(VERSION)} OK\s*$", section, re.M), listed


def test_labextension_is_installed_and_enabled_from_the_wheel(built: Built) -> None:
    listed = built.run("jupyter", "labextension", "list")
    section = listed.split(f"{built.venv}/share/jupyter/labextensions", 1)[1]
    line = rf"^\s*jupyter-gpuaas v{re.escape(VERSION)} enabled OK \(python, jupyter-gpuaas\)\s*$"
    assert re.search(line, section, re.M), listed
    assert "disabled" not in listed, listed


def test_console_scripts_run_from_the_wheel(built: Built) -> None:
    # the service is a traitlets application (its options by class), the policy tool argparse's
    # gpuaas-culler: the admin tool's first name, kept for scripts that still call it
    for script, says in (
        ("gpuaas-service", "--GPUaaSService."),
        ("gpuaas-admin", "usage:"),
        ("gpuaas-culler", "usage:"),
    ):
        path = built.venv / "bin" / script
        assert path.is_file(), f"the wheel installs no {script} script"
        assert says in built.run(str(path), "--help"), f"{script} --help"


def test_imports_and_the_spawner_entry_point_come_from_the_installed_wheel(built: Built) -> None:
    code = (
        "import json, importlib, importlib.metadata as md\n"
        "spawner = md.entry_points(group='jupyterhub.spawners')['gpuaas'].load()\n"
        f"files = {{n: importlib.import_module(n).__file__ for n in {sorted(IMPORT_NAMES)!r}}}\n"
        "print(json.dumps({'spawner': spawner.__name__, 'files': files,"
        " 'version': md.version('jupyter-gpuaas')}))\n"
    )
    found = json.loads(built.run(str(built.venv / "bin" / "python"), "-c", code))
    assert found["spawner"] == "GPUaaSSpawner"
    assert found["version"] == VERSION
    site = (built.venv / "lib").resolve()
    for name, file in found["files"].items():
        assert Path(file).resolve().is_relative_to(site), f"{name} imported from {file}"
