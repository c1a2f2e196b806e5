"""Sphinx configuration of the example-npu docs site (Markdown pages through MyST).

Built by scripts/test.sh in strict mode: ``sphinx-build -W --keep-going -n -b html docs
build/docs/html``. Any warning fails the build: a broken link or anchor, a page missing from the
table of contents, a reference that does not resolve. Why Sphinx: docs/contributing/docs.md.
"""

project = "example-npu"
author = "example-npu developers"
copyright = "example-npu developers, Apache-2.0"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Links to headings within and across pages (`page.md#a-heading`) are checked like page links.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "furo"
html_title = "example-npu"
html_static_path: list[str] = []
