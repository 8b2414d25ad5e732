"""The README's layout block agrees with the tree: every folder it names exists, and it names
every package of ``jupyter_gpuaas/``, every part of the service and every test folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SERVICE = ROOT / "culler" / "gpuaas_service"


def layout_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Layout\n") :]
    return re.search(r"^```\n(.*?)^```", section, re.MULTILINE | re.DOTALL)[1]  # type: ignore[index]


def packages(folder: Path) -> list[str]:
    return sorted(p.parent.name for p in folder.glob("*/__init__.py"))


def test_every_folder_the_block_names_exists() -> None:
    named = [line.split()[0] for line in layout_block().splitlines() if line[:1].strip()]
    assert len(named) >= 15
    assert [p for p in named if not (ROOT / p).exists()] == []


def test_the_block_names_every_package_part_and_test_folder() -> None:
    block = layout_block()
    words = set(re.findall(r"\w+", block))
    expected = {
        *packages(ROOT / "jupyter_gpuaas"),
        *packages(SERVICE),
        *(p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()),
    }
    assert sorted(expected - words) == []
