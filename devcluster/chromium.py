"""Debian's Chromium as the browser tests and the benchmarks launch it (headless, by Playwright).

``make chromium`` installs it; ``CHROMIUM`` names another binary. The arguments keep the browser
off the network: no background requests, component updates or sync, only the pages it is sent to
on this machine's loopback."""

from __future__ import annotations

import os

__all__ = ["CHROMIUM", "CHROMIUM_ARGS"]

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
