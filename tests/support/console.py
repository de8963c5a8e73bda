"""The web console's screenshots: to $MARTLET_SCREENSHOTS when set, else to a throwaway folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from playwright.sync_api import Page


def screenshot(page: Page, name: str) -> None:
    folder = Path(os.environ.get("MARTLET_SCREENSHOTS") or Path(tempfile.gettempdir()) / "martlet-console")
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)
