"""The Python package is laid out by stage and data flows one way through it.

Every import between the package's modules (function-local ones included) is read from the
source with ``ast``: no module imports a later stage, there is no import circle, and no module
grows past the size a reader can take in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "example_npu"

# Pipeline order: a module may import its own stage or an earlier one, never a later one.
STAGES = (
    ("base", ("config", "relax_types", "_library")),
    ("quantize", ("quantize",)),
    ("frontend", ("frontend",)),
    ("partition", ("partition",)),
    ("codegen", ("codegen",)),
    ("registration", ("registration",)),
    ("analysis", ("analysis",)),
    ("cli", ("cli", "__main__")),
    ("package", ("__init__",)),
)
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _stage(module: str) -> int:
    top = module.split(".")[0]
    for rank, (_, tops) in enumerate(STAGES):
        if top in tops:
            return rank
    raise AssertionError(f"example_npu.{module} belongs to no stage: add it to STAGES")


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """The package modules an ``from ... import`` names (a name may itself be a module)."""
    if node.level == 0:
        if not (node.module or "").startswith("example_npu"):
            return []
        base = (node.module or "").removeprefix("example_npu").lstrip(".")
    else:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        if module == "__init__":
            package = []
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    modules = _modules()
    found = [f"{base}.{alias.name}".lstrip(".") for alias in node.names]
    found = [name for name in found if name in modules]
    return found or ([base] if base in modules else [])


def _imports() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                targets.update(_resolve(module, path, node))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name.removeprefix("example_npu").lstrip(".")
                    if alias.name.startswith("example_npu") and name in modules:
                        targets.add(name)
        targets.discard(module)
        graph[module] = targets
    return graph


def test_every_module_belongs_to_a_stage():
    for module in _modules():
        _stage(module)


def test_no_module_imports_a_later_stage():
    wrong = [
        f"example_npu.{module} imports example_npu.{target}"
        for module, targets in _imports().items()
        for target in sorted(targets)
        if _stage(target) > _stage(module)
    ]
    assert not wrong, "data flows one way through the stages:\n" + "\n".join(wrong)


def test_no_import_circles():
    graph = _imports()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import circle: " + " -> ".join(cycle))


def test_modules_stay_short():
    long = {
        module: count
        for module, path in _modules().items()
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_import_graph_is_read():
    """The checks above see real edges (a parser bug would make them pass vacuously)."""
    graph = _imports()
    assert "frontend.canonicalize" in graph["partition.pipeline"]
    assert "codegen.attrs" in graph["codegen.quantized"]
    assert "partition.checks.quantized" in graph["codegen.quantized"]
