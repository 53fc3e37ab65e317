"""Refresh the inspector screenshots under docs/images/ on purpose (the tests never write there).

    .venv/bin/python docs/screenshots.py

Runs the browser tests (tests/browser: `stream-ctx run` on the embedded broker, driven in
Debian's headless chromium) with INSPECTOR_SCREENSHOTS pointing here; ~1 minute.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"

if __name__ == "__main__":
    os.environ["INSPECTOR_SCREENSHOTS"] = str(IMAGES)
    os.chdir(ROOT)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "tests/browser"]))
