"""docs/compat.md's client sections agree with the client tests (tests/compat/clients_doc.py).

These run after every other test of the session (tests/outcomes.py), and check:

* that the registry names real tests, and every test of the client test files (each parameter
  of the ones collected in this session) is named by some row: a new test needs its claim;
* that the doc's block is the rendering of the registry with this session's outcomes: a test
  that failed where the doc says ✅, or passed where it says ❌, a row added or gone, a version
  changed, all fail here. Run alone, it checks the rows, the versions and the marks it can.

After a change, with the client tests run:

    SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest tests/compat tests/txn/test_clients.py \\
        tests/groups/test_groups_clients.py tests/cluster/test_kafka_tools_cluster.py \\
        tests/spark/test_kafka_connector.py tests/cluster/test_spark_kafka_connector_cluster.py
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from tests import outcomes
from tests.compat import clients_doc as cd

# differential tests (their tables are the vs-kafka sections) and Samsa's own tools beside Kafka's
NOT_CLIENT_TESTS = ("tests/compat/test_vs_kafka.py", "tests/compat/test_admin_vs_kafka.py",
                    "tests/compat/test_vs_kafka_configs.py", "tests/compat/test_dump_log.py",
                    "tests/compat/test_offset_tools.py", "tests/compat/test_clients_doc.py")


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_client_test_is_in_the_doc_and_every_row_names_real_tests() -> None:
    ids = cd.all_test_ids()
    files = {i.split("::")[0] for i in ids}
    named = {i.split("[")[0] for i in ids}
    for f in sorted(files):
        path = cd.REPO / f
        assert path.is_file(), f"docs/compat.md rows name tests in {f}, which does not exist"
        functions = _functions(path)
        gone = sorted(i for i in named if i.startswith(f + "::") and i.split("::")[1] not in functions)
        assert not gone, f"rows of docs/compat.md name tests that are not in {f}: {gone}"
        unnamed = sorted(fn for fn in functions if f"{f}::{fn}" not in named)
        assert not unnamed, f"{f} has tests no row of tests/compat/clients_doc.py names: {unnamed}"
    for f in sorted((cd.REPO / "tests" / "compat").glob("test_*.py")):
        rel = str(f.relative_to(cd.REPO))
        assert rel in files or rel in NOT_CLIENT_TESTS, f"{rel}: a client test file the doc does not cover"
    # the parameters, where this session collected the file
    collected = {i for i in outcomes.COLLECTED if i.split("::")[0] in files}
    assert not sorted(collected - ids), f"collected tests no row names: {sorted(collected - ids)}"
    seen_files = {i.split("::")[0] for i in collected}
    missing = sorted(i for i in ids if i.split("::")[0] in seen_files and i not in collected)
    assert not missing, f"rows name tests that were not collected: {missing}"


def test_the_compat_doc_shows_the_client_tests_results() -> None:
    text = cd.DOC.read_text()
    has_block = cd.CLIENTS_START in text and cd.CLIENTS_END in text
    current = text[text.index(cd.CLIENTS_START):text.index(cd.CLIENTS_END) + len(cd.CLIENTS_END)] if has_block else ""
    block = cd.render(outcomes.OUTCOMES, cd.versions(), current)
    if os.environ.get("SAMSA_UPDATE_COMPAT_DOC"):
        if has_block:
            text = text.replace(current, block)
        else:
            text = text.rstrip("\n") + "\n\n## Per client\n\n" + block + "\n"
        cd.DOC.write_text(text)
        current = block
    ran = sorted(i for i in cd.all_test_ids() if outcomes.OUTCOMES.get(i) in ("passed", "failed"))
    assert current == block, (
        f"docs/compat.md's client sections are not these results ({len(ran)} of {len(cd.all_test_ids())} of their "
        "tests ran in this session): SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest tests/compat "
        "tests/txn/test_clients.py tests/groups/test_groups_clients.py ... rewrites them "
        "(see tests/compat/clients_doc.py)\n" + _diff(current, block))


def _diff(old: str, new: str) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "docs/compat.md", "results",
                                          lineterm="", n=0))
