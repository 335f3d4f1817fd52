"""Layering is checked, not hoped for: lower layers never import upper ones (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "samsa"

# package -> samsa packages it may import (besides itself)
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol", "ratelimit"},
    "metadata": {"ratelimit"},
    "coordinator": {"protocol"},
    "controller": {"protocol", "metadata", "ratelimit"},
    "server": {"protocol", "storage", "metadata", "handlers", "config", "coordinator", "controller", "ratelimit"},
    "handlers": {"protocol", "storage", "metadata", "server", "config", "coordinator", "controller", "ratelimit"},
    "spark": {"protocol"},  # runs in Spark executors: the client side only, never the broker
}


def samsa_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for n in names:
            parts = n.split(".")
            if parts[0] == "samsa" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    bad = {}
    for path in (ROOT / package).rglob("*.py"):
        extra = samsa_imports(path) - ALLOWED[package] - {package}
        if extra:
            bad[str(path.relative_to(ROOT))] = sorted(extra)
    assert not bad, f"imports reaching up a layer: {bad}"


def test_protocol_does_no_io() -> None:
    for path in (ROOT / "protocol").rglob("*.py"):
        if path.name == "gen_specs.py":  # a development tool that writes _specs.py
            continue
        mods = {n.split(".")[0] for n in _all_imports(path)}
        assert not mods & {"socket", "asyncio", "logging", "selectors"}, path


def _all_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out
