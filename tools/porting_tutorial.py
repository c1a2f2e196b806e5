"""Runs the porting tutorial (docs/porting/add-an-op.md) on a copy of the tree.

    .venv/bin/python tools/porting_tutorial.py [--keep DIR]

Copies the checkout's files (``git ls-files``, untracked ones that git does not ignore included)
into a scratch directory, links the checkout's ``.venv`` there (used, never installed into),
then goes through the page's code blocks in order, as a reader would:

- a block whose first line names a place (``// src/graph/op.h, after "  kNegative,"``) is an
  edit of that file: a new file, an append, or lines inserted before / after an anchor line that
  must exist exactly once (after the definition of ``in <scope>``, if given);
- a bash block runs with ``bash -e -o pipefail`` in the copy; what it exports is the
  environment of the blocks after it (a reader's shell);
- a python block runs as a script in the copy, in that environment;
- a block marked ``(not run in CI: reason)`` is skipped.

Exits non-zero, naming the block, when an anchor is missing or ambiguous or a block fails.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_blocks import ROOT, TUTORIAL_PAGES, Block, blocks  # noqa: E402


class TutorialError(RuntimeError):
    """A block that cannot be applied or that failed."""


def copy_tree(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if not source.exists():  # deleted in the work tree, not yet in the index
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def _scope_start(lines: list[str], scope: str, block: Block) -> int:
    """The line of scope's definition: a line starting at column 0 that names ``scope(``."""
    pattern = re.compile(rf"^\S.*\b{re.escape(scope)}\(")
    for index, line in enumerate(lines):
        if pattern.match(line):
            return index
    raise TutorialError(f"{block.where}: no definition of {scope} in {block.edit.path}")


def apply_edit(tree: Path, block: Block) -> None:
    edit = block.edit
    path = tree / edit.path
    body = block.body.split("\n")
    if body and body[-1] == "":
        body.pop()  # the newline that ends the block
    if edit.mode == "new file":
        if path.exists():
            raise TutorialError(f"{block.where}: {edit.path} exists already")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body) + "\n")
        return
    if not path.is_file():
        raise TutorialError(f"{block.where}: {edit.path} does not exist")
    lines = path.read_text().split("\n")
    if edit.mode == "at the end":
        while lines and lines[-1] == "":
            lines.pop()
        path.write_text("\n".join(lines + body) + "\n")
        return
    start = _scope_start(lines, edit.scope, block) if edit.scope else 0
    found = [i for i in range(start, len(lines)) if lines[i] == edit.anchor]
    if not found:
        raise TutorialError(f"{block.where}: no line {edit.anchor!r} in {edit.path}")
    if len(found) > 1 and not edit.scope:
        raise TutorialError(f"{block.where}: {edit.anchor!r} is not unique in {edit.path}")
    at = found[0] + (1 if edit.mode == "after" else 0)
    path.write_text("\n".join(lines[:at] + body + lines[at:]))


def _read_env(path: Path) -> dict[str, str]:
    entries = path.read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in entries if b"=" in e)


def run_block(tree: Path, block: Block, env: dict[str, str]) -> dict[str, str]:
    """Runs a bash or python block in the copy; returns the environment after it."""
    script = tree / f"_tutorial_block_{block.line}"
    env_file = tree / "_tutorial_env"
    if block.lang == "bash":
        script.write_text(block.code + f'\nenv -0 > "{env_file}"\n')
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    else:
        script.write_text(block.code)
        command = [str(ROOT / ".venv" / "bin" / "python"), str(script)]
    result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    sys.stdout.write(result.stdout[-3000:])
    if result.returncode != 0:
        raise TutorialError(
            f"{block.where}: the {block.lang} block exited with {result.returncode}\n"
            f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
        )
    return _read_env(env_file) if block.lang == "bash" else env


def run_tutorial(tree: Path, page: str) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    for block in blocks(ROOT / page):
        if block.edit:
            apply_edit(tree, block)
            print(f"applied {block.where}: {block.edit.mode} {block.edit.path}", flush=True)
        elif block.runs:
            start = time.perf_counter()
            print(f"running {block.where} ({block.lang})", flush=True)
            env = run_block(tree, block, env)
            print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
        elif block.lang in ("bash", "python"):
            print(f"not run {block.where}: {block.not_run_reason}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="make the copy here and keep it (an empty dir)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="porting-tutorial-") as scratch:
        tree = args.keep or Path(scratch)
        tree.mkdir(parents=True, exist_ok=True)
        if any(tree.iterdir()):
            parser.error(f"{tree} is not empty")
        copy_tree(tree)
        try:
            for page in TUTORIAL_PAGES:
                run_tutorial(tree, page)
        except TutorialError as error:
            print(f"porting tutorial: {error}", file=sys.stderr)
            return 1
    print(f"porting tutorial: passed in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
