"""Everything a JupyterLab tab said about a reclaim while a test watched it (tests/real_hub).

A warning may come and go between two looks of a test (one is withdrawn a cycle later), so the
page keeps its own record: every notification's text, the page title's mark and the GPU tab's
mark, as each appears. :func:`watch_alerts` starts it; :func:`alerts_seen` reads it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RECLAIM_WORDS", "about_reclaim", "alerts_seen", "forget_alerts", "watch_alerts"]

RECLAIM_WORDS = ("will be freed", "would be freed", "GPU freed", "tab-warned", "stopped at about")
"""What any reclaim warning or stop says in a tab (labextension/src/messages.ts: the toast and
title, ``warn.pageTitle``; alerts.ts: the GPU tab's class while warned; the stop's notice)."""

_WATCH = """() => {
  if (window.__gpuaasAlerts !== undefined) { return; }
  const seen = window.__gpuaasAlerts = [];
  const add = text => { if (text && !seen.includes(text) && seen.length < 500) seen.push(text); };
  const look = () => {
    for (const toast of document.querySelectorAll('.Toastify__toast')) {
      add('toast: ' + toast.innerText.trim().slice(0, 300));
    }
    if (document.title.includes('GPU freed')) { add('title: GPU freed'); }
    for (const tab of document.querySelectorAll('.jp-gpuaas-tab-warned')) {
      add('tab: ' + tab.className);
    }
  };
  new MutationObserver(look).observe(document.documentElement, {
    childList: true, subtree: true, characterData: true, attributes: true,
    attributeFilter: ['class']
  });
  look();
}"""


async def watch_alerts(page: Any) -> None:
    """From now on, ``page`` notes each notification and reclaim mark it shows (until it is
    loaded again)."""
    await page.evaluate(_WATCH)


async def alerts_seen(page: Any) -> list[str]:
    """What ``page`` showed since :func:`watch_alerts` (or :func:`forget_alerts`), in order."""
    return list(await page.evaluate("() => window.__gpuaasAlerts || []"))


async def forget_alerts(page: Any) -> None:
    """Start the record again, empty (what the page shows now is noted again at its change)."""
    await page.evaluate("() => { (window.__gpuaasAlerts || []).length = 0; }")


def about_reclaim(seen: list[str]) -> list[str]:
    """The entries of ``seen`` that tell of a reclaim warning or stop."""
    return [s for s in seen if any(w in s for w in RECLAIM_WORDS)]
