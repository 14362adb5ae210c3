"""The repository explains itself: every reference to the design points at docs/design.md, and
at a section that exists there (a renumbered section would leave comments pointing nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

from sagactl.paths import LAB_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("lambdas", "sagactl", *LAB_PACKAGES, "stacks", "tests", "docs", "examples")
TOP_LEVEL = ("README.md", "Makefile", "app.py", "pyproject.toml")
REFERENCE = re.compile(r"(\S*)design\.md\)?((?:[ ,]+§\d+(?:\.\d+)?(?:-§\d+(?:\.\d+)?)?)*)")
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")


def _files() -> list[Path]:
    files = [ROOT / name for name in TOP_LEVEL if (ROOT / name).exists()]
    for folder in SOURCES:
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.suffix in {".py", ".md", ".json", ".txt"} and "__pycache__" not in p.parts
        ]
    return files


def _sections() -> set[str]:
    headings = re.findall(
        r"^#{2,3} (\d+(?:\.\d+)?)\.? ", (ROOT / "docs/design.md").read_text(), re.M
    )
    return set(headings)


def test_design_references_point_into_the_repository() -> None:
    outside = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in REFERENCE.finditer(line):
                prefix = match.group(1)
                in_docs = path.parent == ROOT / "docs"
                if "shared" in prefix or not (prefix.endswith("docs/") or in_docs):
                    outside.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert outside == [], "\n".join(outside)


def test_every_cited_section_exists() -> None:
    sections = _sections()
    assert {"1", "3.1", "8", "9"} <= sections  # the parser reads the headings
    missing = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in REFERENCE.finditer(line):
                for cited in SECTION.findall(match.group(2)):
                    if cited not in sections:
                        missing.append(f"{path.relative_to(ROOT)}:{number}: §{cited}")
    assert missing == [], "\n".join(missing)
