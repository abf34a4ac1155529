"""Where the course's files are: the repository root, the programs, their build outputs, the pages."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
BUILD = ROOT / "build"
DOCS = ROOT / "docs"
