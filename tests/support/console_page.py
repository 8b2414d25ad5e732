"""The GPU console's page as a person sees it, in a test's browser.

The page lays out and paints only what is near the screen (console.css: ``content-visibility:
auto`` on each team's card and on each section once drawn), and the browser reads the text of a
box it skipped as empty (``innerText``). So a test reads what it asserts on as a person does,
scrolled into view (:func:`seen`), and takes a whole-page screenshot as the page prints, every
box drawn (:func:`screenshot_whole`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["drawn", "screenshot_whole", "seen"]

_TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


async def drawn(locator: Any) -> None:
    """Scroll ``locator`` into view and let the browser paint it: a box that comes near the
    screen is laid out on the next frame, and until then reads as empty."""
    await locator.scroll_into_view_if_needed()
    await locator.page.evaluate(_TWO_FRAMES)


async def seen(locator: Any) -> str:
    """The text of ``locator`` (a Playwright locator) once scrolled into view and painted."""
    await drawn(locator)
    return str(await locator.inner_text())


async def screenshot_whole(page: Any, path: str) -> None:
    """A full-page screenshot of ``page`` with every box drawn (the page's print styles)."""
    await page.emulate_media(media="print")
    try:
        await page.screenshot(path=path, full_page=True)
    finally:
        await page.emulate_media(media="screen")
