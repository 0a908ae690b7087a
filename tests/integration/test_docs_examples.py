"""The README's and the learning notes' examples marked runnable run as written.

A fenced block is runnable when the line just before its fence is ``<!-- runnable -->`` (invisible once rendered).
Each document's runnable blocks run in their order, from the repository's root, against a real API server and
worker of this test session: ``HANGO_URL`` and ``HANGO_TOKEN`` (a new tenant's owner) are set as the document tells
its reader to set them, and nothing else is prepared. ``bash`` blocks run with ``-euo pipefail``; ``python`` blocks
with the interpreter the tests run in. A block that fails, or prints a traceback, fails the test with its output.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hango.kernel.config import Settings
from tests.support.processes import ROOT, settings_env

pytestmark = pytest.mark.usefixtures("worker_process")

MARK = "<!-- runnable -->"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs" / "learning").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>\w*)\s*$")
LANGUAGES = {"bash", "python"}


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of its opening fence, from 1
    language: str
    code: str


def runnable_blocks(document: Path) -> list[Block]:
    """The blocks of ``document`` marked runnable, in order, their common indentation removed."""
    lines = document.read_text().splitlines()
    blocks = []
    for index, line in enumerate(lines):
        opening = FENCE.match(line)
        if opening is None or index == 0 or lines[index - 1].strip() != MARK:
            continue
        indent = len(opening["indent"])
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        code = "\n".join(body[indent:] for body in lines[index + 1 : end]) + "\n"
        assert opening["language"] in LANGUAGES, f"{document.name}:{index + 1}: a runnable block needs bash or python"
        blocks.append(Block(document, index + 1, opening["language"], code))
    return blocks


def test_the_marked_blocks_are_found() -> None:
    found = {str(document.relative_to(ROOT)): len(runnable_blocks(document)) for document in DOCUMENTS}
    # README: the first agent's commands, the client, the webhook check; note 15: a tool module; note 17: an MCP
    # tool's definition digest recomputed.
    assert found["README.md"] >= 3
    assert found["docs/learning/15-human-in-the-loop.md"] >= 1
    assert found["docs/learning/17-mcp-and-approval.md"] >= 1


@pytest.fixture(scope="module")
def base(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


@pytest.mark.parametrize(
    "document", [d for d in DOCUMENTS if runnable_blocks(d)], ids=lambda d: str(d.relative_to(ROOT))
)
def test_each_runnable_block_runs_as_written(document: Path, settings: Settings, base: str, make_tenant: Any) -> None:
    tenant = make_tenant()
    env = {
        **settings_env(settings),
        "HANGO_URL": base,
        "HANGO_TOKEN": tenant.owner.token,
        "PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin",
    }
    for block in runnable_blocks(document):
        command = ["bash", "-euo", "pipefail", "-c", block.code] if block.language == "bash" else [sys.executable]
        stdin = block.code if block.language == "python" else None
        done = subprocess.run(command, cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=120)
        where = f"{document.relative_to(ROOT)}:{block.line}"
        assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr}"
