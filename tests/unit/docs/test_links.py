"""Every relative link of the README, CONTRIBUTING.md and docs/ reaches a file of the repository,
and every ``#anchor`` a heading of the page it names (as GitHub makes a heading's anchor)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")
HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    found = []
    for target, fragment in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a URL: not ours to check here
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            found.append(f"{page.name}: {target} does not exist")
        elif fragment and path.suffix == ".md":
            anchors = {anchor(h) for h in HEADING.findall(path.read_text(encoding="utf-8"))}
            if fragment not in anchors:
                found.append(f"{page.name}: {target}#{fragment}: no such heading")
    return found


def test_a_heading_anchor_is_githubs() -> None:
    assert anchor("What the dev cluster emulates, against the real components") == (
        "what-the-dev-cluster-emulates-against-the-real-components"
    )
    assert anchor("`gpuaas/api/resize`: the ways up") == "gpuaasapiresize-the-ways-up"


def test_every_link_of_the_docs_reaches_its_page_and_heading() -> None:
    assert len(PAGES) > 15
    assert [b for page in PAGES for b in broken_links(page)] == []
