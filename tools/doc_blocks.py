"""The fenced code blocks of the README and of every page under docs/, as the docs test runs them.

A block's language decides what happens to it (docs/contributing/docs.md):

- ``python``: run, in page order, in one namespace per page;
- ``bash``: run with ``bash -e -o pipefail``, the venv's bin first on PATH;
- ``text`` (output, pseudo-code, diagrams) and ``cpp`` (applied by the porting tutorial's own
  test, tools/porting_tutorial.py): never run here;
- ``{directive}``: MyST directives (the README include and the tables of contents of
  docs/index.md).

A block that cannot run in CI says so in the paragraph right before it:
``(not run in CI: <reason>)``. A fence without a language, or with one not listed here, is an
error: every block is either run or declared not to be code that runs.

The porting tutorial (``TUTORIAL_PAGES``) is run by tools/porting_tutorial.py on a copy of the
tree instead: there a block whose first line is a location comment is an edit of that file,

    // src/graph/op.h, after "  kNegative,"            (or: before "<line>")
    // src/graph/validate.cc, in InferShape, after "    case OpKind::kNegative:"
    # python/example_npu/partition/checks/compute.py, at the end
    // src/kernels/softplus.h: new file

and the other blocks run in order in the copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ("python", "bash")
# Pages whose blocks change the tree: applied and run on a copy by tools/porting_tutorial.py.
TUTORIAL_PAGES = ("docs/porting/add-an-op.md",)
NEVER_RUN = ("text", "cpp")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[^\s`]*)")
_EDIT = re.compile(
    r"^(?://|#) (?P<path>[\w./-]+\.\w+)(?:: (?P<new>new file)|, (?P<end>at the end)"
    r"|(?:, in (?P<scope>[\w:]+))?, (?P<mode>after|before) \"(?P<anchor>.*)\")$"
)
# "(not run in CI: reason)", the reason may hold one level of parentheses.
_NOT_RUN = re.compile(r"\(not run in CI:\s*(?P<reason>[^()]*(?:\([^()]*\)[^()]*)*)\)")


@dataclass(frozen=True)
class Edit:
    """Where a tutorial block goes: a new file, the end of a file, or before / after the line
    ``anchor`` (the first one after the definition of ``scope``, if given)."""

    path: str
    mode: str  # "new file", "at the end", "after" or "before"
    anchor: str | None = None
    scope: str | None = None


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run_reason: str | None  # the "(not run in CI: ...)" marker before it, if any

    @property
    def edit(self) -> Edit | None:
        """The file edit this block is, when its first line is a location comment."""
        if self.lang == "text":  # examples of location comments, in prose pages
            return None
        match = _EDIT.match(self.code.split("\n", 1)[0])
        if not match:
            return None
        if match["new"] or match["end"]:
            return Edit(match["path"], match["new"] or match["end"])
        return Edit(match["path"], match["mode"], match["anchor"], match["scope"])

    @property
    def body(self) -> str:
        """The code without its location comment (what an edit inserts)."""
        return self.code.split("\n", 1)[1] if self.edit else self.code

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.not_run_reason is None and self.edit is None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = ROOT) -> list[Path]:
    """The README and every Markdown page of the docs, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _paragraph_before(lines: list[str], index: int) -> str:
    """The paragraph (consecutive non-blank lines) right before line ``index``."""
    row = index - 1
    while row >= 0 and not lines[row].strip():
        row -= 1
    start = row
    while start >= 0 and lines[start].strip() and not _FENCE.match(lines[start]):
        start -= 1
    return " ".join(line.strip() for line in lines[start + 1 : row + 1])


def blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """Every fenced block of one page, in order. Raises ValueError for an unlabelled fence, an
    unknown language or an unclosed fence."""
    page = path.relative_to(root).as_posix()
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, lang = opening["indent"], opening["fence"], opening["lang"]
        if not lang:
            raise ValueError(f"{page}:{index + 1}: a code block needs a language (text for output)")
        if not (lang in RUN or lang in NEVER_RUN or lang.startswith("{")):
            raise ValueError(f"{page}:{index + 1}: unknown code block language {lang!r}")
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end])
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{index + 1}: the code block is not closed")
        marker = _NOT_RUN.search(_paragraph_before(lines, index))
        reason = marker["reason"].strip() if marker else None
        if marker and not reason:
            raise ValueError(f"{page}:{index + 1}: '(not run in CI: ...)' needs a reason")
        found.append(Block(page, index + 1, lang, "\n".join(body) + "\n", reason))
        index = end + 1
    return found


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [block for path in pages(root) for block in blocks(path, root)]


if __name__ == "__main__":
    everything = all_blocks()
    for block in everything:
        state = "run" if block.runs else f"not run ({block.not_run_reason or block.lang})"
        if block.edit:
            state = f"edit of {block.edit.path} ({block.edit.mode})"
        print(f"{block.where:48} {block.lang:8} {state}")
    runnable = [b for b in everything if b.lang in RUN]
    print(
        f"{sum(b.runs for b in everything)} blocks run, "
        f"{sum(not b.runs for b in runnable)} marked not run"
    )
