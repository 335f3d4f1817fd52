"""Layering is checked, not hoped for: the import-linter contracts of pyproject.toml
(`[tool.importlinter]`: the layers of DESIGN.md, a sans-io protocol layer, handlers that use the
server only through their RequestContext, no cycles inside a package) hold, and no import cycle
runs through samsa at all (scripts/import_cycles.py, TYPE_CHECKING imports included)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    # From the repo root with this tree first on the path: the console script alone would
    # find whichever samsa is installed.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    run = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--no-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


def test_no_import_cycles() -> None:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "scripts" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.cycles(module.build_graph()) == []
