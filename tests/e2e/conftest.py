"""The browser tests' fixtures come from the shared support package (tests/support/lab.py)."""

from tests.support.lab import browser, lab, page

__all__ = ["browser", "lab", "page"]
