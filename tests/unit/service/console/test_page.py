"""The console page's HTML: every module its build makes is preloaded with it (fetched at
once, not one import level at a time), and nothing else is."""

from __future__ import annotations

import json
import re
from pathlib import Path

CONSOLE = Path(__file__).resolve().parents[4] / "culler/gpuaas_service/console"
PRELOAD = re.compile(r'<link rel="modulepreload" href="static/js/([^"]+)">')
ENTRY = re.compile(r'<script type="module" src="static/js/([^"]+)"></script>')


def built_modules() -> set[str]:
    """What ``npm run build:console`` writes under static/js and the page loads: each file of
    the tsconfig's ``include``, as ``.js``, at its path from the repository root (``rootDir``),
    but those that only declare types (the generated API types): their imports are ``import
    type``, which the compiler removes, so the page never fetches them."""
    config = json.loads((CONSOLE / "tsconfig.json").read_text())
    root = (CONSOLE / config["compilerOptions"]["rootDir"]).resolve()
    return {
        str(source.resolve().relative_to(root).with_suffix(".js"))
        for pattern in config["include"]
        for source in CONSOLE.glob(pattern)
        if not types_only(source.read_text())
    }


def types_only(source: str) -> bool:
    """Whether a TypeScript module exports nothing but types and interfaces."""
    exports = re.findall(r"^export\s+(\w+)", source, flags=re.MULTILINE)
    return bool(exports) and set(exports) <= {"type", "interface"}


def test_a_module_of_types_only_is_told_apart() -> None:
    assert types_only("export interface paths {}\nexport type webhooks = Record<string, never>;")
    assert not types_only("export type Row = {a: 1};\nexport function draw(): void {}")
    assert not types_only("const x = 1;")


def test_every_module_of_the_build_is_preloaded_and_nothing_else() -> None:
    page = (CONSOLE / "static/console.html").read_text()
    (entry,) = ENTRY.findall(page)
    preloaded = PRELOAD.findall(page)
    assert len(preloaded) == len(set(preloaded)), preloaded
    modules = built_modules()
    assert entry in modules
    assert "labextension/src/dom.js" in modules  # the shared DOM helper, compiled in
    assert set(preloaded) == modules - {entry}
