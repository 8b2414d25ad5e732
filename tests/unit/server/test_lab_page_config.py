"""The page config the package installs for JupyterLab (etc/jupyter/labconfig/page_config.d):
read through JupyterLab's own loader, as a single-user server reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyterlab_server.config import get_static_page_config

NEWS = "@jupyterlab/apputils-extension:announcements"


def test_the_installed_package_turns_jupyterlabs_news_prompt_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a user with no config of their own: only the installed (sys.prefix) files count
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    page_config = get_static_page_config(level="all")
    assert page_config.get("disabledExtensions", {}).get(NEWS) is True
