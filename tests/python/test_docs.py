"""Every code block of the README and of the docs runs (docs/contributing/docs.md).

One test per page: its python blocks run in order in one namespace, its bash blocks with
``bash -e -o pipefail`` and the venv's bin first on PATH, all in a scratch directory of the page
in which the checkout's top-level entries are linked. Blocks marked ``(not run in CI: reason)``
are listed with their reasons in the "results" section; every other block must pass.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Checkout entries the scratch directory does not link: generated trees, and git's own.
NOT_LINKED = {".git", "build", "__pycache__", ".pytest_cache", ".ruff_cache"}
SHELL_TIMEOUT_S = 1200


def _load_doc_blocks():
    spec = importlib.util.spec_from_file_location("doc_blocks", ROOT / "tools" / "doc_blocks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


doc_blocks = _load_doc_blocks()
PAGES = {path.relative_to(ROOT).as_posix(): doc_blocks.blocks(path) for path in doc_blocks.pages()}
# The tutorial's blocks change the tree: test_porting_tutorial.py runs them on a copy.
RUNNABLE_PAGES = [
    page
    for page, blocks in PAGES.items()
    if page not in doc_blocks.TUTORIAL_PAGES and any(b.runs for b in blocks)
]


def _scratch_dir(tmp_path: Path) -> Path:
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def _run_python(block, module: types.ModuleType, scratch: Path, index: int) -> None:
    # The block is a real file: TVMScript (and inspect) read the source of the classes it parses.
    source = scratch / f"_block_{index}.py"
    source.write_text(block.code)
    module.__file__ = str(source)
    try:
        exec(compile(block.code, str(source), "exec"), module.__dict__)  # noqa: S102
    except Exception as error:
        raise AssertionError(f"{block.where}: the python block failed: {error!r}") from error


def _run_bash(block, scratch: Path, index: int) -> None:
    script = scratch / f"_block_{index}.sh"
    script.write_text(block.code)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", script.name],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"{block.where}: the bash block exited with {result.returncode}\n"
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
    )


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_code_blocks_of_the_page_run(page, tmp_path, monkeypatch):
    scratch = _scratch_dir(tmp_path)
    monkeypatch.chdir(scratch)
    name = "docs_page_" + "".join(c if c.isalnum() else "_" for c in page)
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)  # inspect finds classes' source through it
    for index, block in enumerate(PAGES[page]):
        if not block.runs:
            continue
        if block.lang == "python":
            _run_python(block, module, scratch, index)
        else:
            _run_bash(block, scratch, index)


def test_blocks_not_run_are_listed_with_their_reasons(summary_line):
    """Every page parses (each fence has a known language), and each block that is not run says
    why where a reader sees it."""
    every = [b for blocks in PAGES.values() for b in blocks]
    edits = [b for b in every if b.edit]
    runnable = [b for b in every if b.lang in doc_blocks.RUN and not b.edit]
    not_run = [b for b in runnable if not b.runs]
    summary_line(
        f"docs code blocks: {len(runnable) - len(not_run)} run, {len(not_run)} marked not run "
        f"(python and bash; README + {len(PAGES) - 1} docs pages; the porting tutorial's run by "
        f"test_porting_tutorial.py with its {len(edits)} edits)"
    )
    for block in edits:
        assert block.page in doc_blocks.TUTORIAL_PAGES, f"{block.where}: edit outside a tutorial"
    for block in not_run:
        assert block.not_run_reason, block.where
        summary_line(f"  not run: {block.where} ({block.lang}): {block.not_run_reason}")
    assert len(runnable) > len(not_run)
