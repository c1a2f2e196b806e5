"""The generated reference pages under docs/reference/ are what their generators in tools/ print
now: the supported-ops coverage table (from the pattern table), the CLI reference (from the
argparse parser) and the NPUConfig reference (from the dataclass and FIELD_RANGES)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import example_npu
import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATORS = ("coverage_table", "cli_reference", "npu_config_reference")


def load_tool(name: str):
    """A generator from tools/: they live outside the installed package."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", GENERATORS)
def test_committed_reference_page_is_current(name):
    tool = load_tool(name)
    generated = tool.table() if name == "coverage_table" else tool.generate()
    page = ROOT / tool.OUTPUT
    committed = page.read_text() if page.exists() else ""
    assert committed == generated, (
        f"{tool.OUTPUT} differs from what its generator prints now; regenerate it from the "
        f"repository root with: .venv/bin/{tool.REGENERATE}"
    )


def test_every_registered_pattern_appears_in_the_coverage_table():
    text = (ROOT / load_tool("coverage_table").OUTPUT).read_text()
    for name in example_npu.REGISTERED_PATTERNS:
        assert name.removeprefix("example_npu.") in text, name


def test_every_npu_config_field_and_cli_command_is_documented():
    config_page = (ROOT / load_tool("npu_config_reference").OUTPUT).read_text()
    for field in example_npu.NPUConfig.__dataclass_fields__:
        assert f"| `{field}` |" in config_page, field
    cli_page = (ROOT / load_tool("cli_reference").OUTPUT).read_text()
    for command in ("demo", "compile", "profile", "sweep"):
        assert f"## example-npu {command}\n" in cli_page, command
