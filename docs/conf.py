"""Sphinx configuration: the documentation site (Markdown pages through myst-parser) and the API
reference generated from kassign's docstrings, built offline with warnings as errors
(tests/docs/test_docs_build.py)."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

from kassign import __version__  # noqa: E402 - importable once the checkout is on the path

project = "kassign"
author = "kassign developers"
release = __version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# Links to a section of another page: [text](brokers.md#which-broker-a-test-run-uses)
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Optional client libraries may be absent where the docs are built.
autodoc_mock_imports = ["aiokafka", "confluent_kafka", "pyspark", "prometheus_client", "opentelemetry"]
html_theme = "alabaster"
html_title = "kassign"
exclude_patterns = ["_build"]
# The benchmark tables and command lines are wide.
html_theme_options = {"page_width": "1200px", "sidebar_width": "230px"}
