"""No import cycle anywhere in the tree: two modules that import each other, however far round,
cannot be read, tested or moved one at a time.

Python: the modules of every top-level package (grimp's graph, as ``lint-imports`` builds it;
``make lint`` also keeps the ``acyclic_siblings`` contract of pyproject.toml). TypeScript: the
relative imports of the sidebar's and the console's sources, ``import type`` included (a cycle
of types is still two files that must change together).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "jupyter_gpuaas",
    "gpuaas_spawner",
    "gpuaas_service",
    "devcluster",
    "demo",
    "benchmarks",
)
TS_SOURCES = ("labextension/src", "culler/gpuaas_service/console/src")
TS_IMPORT = re.compile(r"""^\s*(?:import|export)\b[^'"]*?\bfrom\s+['"](\.{1,2}/[^'"]+)['"]""", re.M)


def reachable(graph: Mapping[str, Iterable[str]], start: str) -> set[str]:
    """Every node ``start`` reaches through one import or more."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The groups of nodes that each reach every other (the strongly connected components of
    more than one node): a few hundred modules, so one walk from each is quick enough."""
    reach = {node: reachable(graph, node) for node in graph}
    groups = {
        tuple(sorted({node} | {other for other in reach[node] if node in reach.get(other, ())}))
        for node in graph
        if node in reach[node]
    }
    return sorted(list(group) for group in groups if len(group) > 1)


def ts_graph(folders: Iterable[Path]) -> dict[str, list[str]]:
    """Each ``.ts`` file under ``folders`` → the files it imports by a relative path."""
    graph: dict[str, list[str]] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.ts")):
            imported = []
            for spec in TS_IMPORT.findall(path.read_text(encoding="utf-8")):
                target = (path.parent / spec).resolve()
                imported.append(os.path.relpath(target.with_suffix(".ts"), ROOT))
            graph[os.path.relpath(path.resolve(), ROOT)] = imported
    return graph


def python_graph() -> dict[str, list[str]]:
    grimp = pytest.importorskip(
        "grimp", reason="grimp comes with import-linter, in the dev extra (make lint's venv)"
    )
    graph = grimp.build_graph(*PACKAGES, "tests", cache_dir=None)
    ours = {m for m in graph.modules if m.split(".")[0] in {*PACKAGES, "tests"}}
    return {m: sorted(graph.find_modules_directly_imported_by(m) & ours) for m in sorted(ours)}


def test_the_cycle_finder_finds_a_cycle_however_long_and_nothing_else() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": [], "f": ["f2"], "f2": []}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": ["y"], "y": ["x"], "z": ["x"]}) == [["x", "y"]]


def test_the_typescript_reader_sees_type_imports_and_re_exports(tmp_path: Path) -> None:
    src = ROOT / "culler/gpuaas_service/console/src"
    graph = ts_graph([src])
    assert (
        "culler/gpuaas_service/console/src/consoleSection.ts"
        in graph["culler/gpuaas_service/console/src/checks.ts"]
    )  # an `import type`
    assert "labextension/src/dom.ts" in graph["culler/gpuaas_service/console/src/checks.ts"]
    assert TS_IMPORT.findall(
        "export { a } from './b.js';\nimport type {\n  C\n} from '../c.js';"
    ) == [
        "./b.js",
        "../c.js",
    ]


def test_no_python_module_imports_itself_round_a_cycle() -> None:
    assert cycles(python_graph()) == []


def test_no_typescript_module_imports_itself_round_a_cycle() -> None:
    assert cycles(ts_graph(ROOT / folder for folder in TS_SOURCES)) == []
