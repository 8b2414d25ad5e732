"""Write docs/options.md, the reference of every option, from the traitlets that define them.

Walks every module of the three packages that run somewhere (``jupyter_gpuaas``: the server
extension and the code in kernels and Job pods; ``gpuaas_spawner``: the hub's spawner;
``gpuaas_service``: the gpuaas hub service), finds each traitlets ``Configurable`` class defined
there, and writes each option the class itself defines (``config=True``): its ``c.Class.name``,
type, default and help text. The page is never edited by hand:

    python docs/options.py          # rewrite docs/options.md
    python docs/options.py --check  # exit 1 if docs/options.md is not what this writes (make lint)

It lives beside the page it writes, as a documentation build script does: it is not product
code (it imports the spawner and the service together, which no product module may) and not a
test.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from traitlets import Enum, TraitType, Union
from traitlets.config import Configurable

PAGE = Path(__file__).resolve().parent / "options.md"

# Where each process's classes are configured, in the order the page gives them.
PROCESSES: tuple[tuple[str, str, str], ...] = (
    (
        "gpuaas_spawner",
        "The spawner (in the hub)",
        "Set in `jupyterhub_config.py` (z2jh: `hub.extraConfig`), with"
        ' `c.JupyterHub.spawner_class = "gpuaas"`. Only the options `GPUaaSSpawner` adds or'
        " changes are listed; KubeSpawner's own are in KubeSpawner's documentation.",
    ),
    (
        "jupyter_gpuaas",
        "The server extension (in each user's server)",
        "Set in `jupyter_server_config.py` of the user's image, or on the command line as"
        " `--GPUaaS.name=value`; `jupyter server --help-all` prints the same texts. The code that"
        " runs in kernels (`jupyter_gpuaas/kernel/`) and in a GPU Job's pod"
        " (`jupyter_gpuaas/job_pod/`) has no options of its own: the server extension's settings"
        " are passed to it.",
    ),
    (
        "gpuaas_service",
        "The gpuaas hub service",
        "Set in the service's config file (`gpuaas-service --config FILE`, e.g."
        " `gpuaas_service_config.py`) or on its command line as `--GPUaaSService.name=value`;"
        " `gpuaas-service --help-all` prints the same texts. The reclaim policy file's fields are"
        " in [culler.md](culler.md).",
    ),
)


def configurables(package: str) -> Iterator[type[Configurable]]:
    """Each Configurable class defined in ``package`` with options of its own, in module order."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if not info.name.endswith(".__main__"):  # a command, run on import
            names.append(info.name)
    for name in sorted(names):
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == name
                and issubclass(cls, Configurable)
                and cls.class_own_traits(config=True)
            ):
                yield cls


def trait_type(trait: TraitType[Any, Any]) -> str:
    """The trait's type as a reader needs it: the class name, an Enum's values, a Union's parts."""
    if isinstance(trait, Enum):
        return "one of " + ", ".join(f"`{v!r}`" for v in trait.values or ())
    if isinstance(trait, Union):
        return " or ".join(trait_type(t) for t in trait.trait_types)
    return type(trait).__name__


def default_text(cls: type[Configurable], name: str, trait: TraitType[Any, Any]) -> str:
    """The default as written in ``c.Class.name = ...``; a computed one is said to be."""
    computed = name in getattr(cls, "_trait_default_generators", {})
    if computed:
        return "computed when not set (see below)"
    return f"`{trait.default_value_repr()}`"


def _wrap(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), 100, break_long_words=False)


def section(cls: type[Configurable]) -> list[str]:
    own = cls.class_own_traits(config=True)
    base = next(b for b in cls.__mro__[1:] if issubclass(b, Configurable))
    lines = [f"### {cls.__name__}", ""]
    summary = inspect.getdoc(cls)
    if summary:
        lines += [_wrap(summary.split("\n\n")[0]), ""]
    lines += [f"`{cls.__module__}.{cls.__name__}`, a `{base.__name__}`.", ""]
    inherited = set(base.class_traits(config=True))
    for name in sorted(own):
        trait = own[name]
        changed = f" (overrides {base.__name__}'s)" if name in inherited else ""
        lines += [
            f"#### `c.{cls.__name__}.{name}`",
            "",
            f"{trait_type(trait)}, default {default_text(cls, name, trait)}{changed}",
            "",
        ]
        help_text = inspect.cleandoc(trait.help or "").strip()
        if help_text:
            lines += ["```text", help_text, "```", ""]
        else:
            lines += ["(no help text)", ""]
    return lines


def render() -> str:
    lines = [
        "# Options",
        "",
        _wrap(
            "Every option of jupyter-gpuaas, by the process that reads it: its `c.Class.name`,"
            " type, default and help text. Written by `python docs/options.py` from the"
            " traitlets themselves; `make lint` checks it is current. Do not edit it by hand."
        ),
        "",
    ]
    for package, title, where in PROCESSES:
        lines += [f"## {title}", "", _wrap(where), ""]
        for cls in configurables(package):
            lines += section(cls)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is not current")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(
                f"{PAGE.relative_to(Path.cwd()) if PAGE.is_relative_to(Path.cwd()) else PAGE}"
                " is not current: run `python docs/options.py` and commit it",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
