"""Sphinx configuration: the API reference is generated from kassign's docstrings, offline."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "kassign"
author = "kassign developers"
release = "0.1.0"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Optional client libraries may be absent where the docs are built.
autodoc_mock_imports = ["aiokafka", "confluent_kafka", "pyspark", "prometheus_client", "opentelemetry"]
html_theme = "alabaster"
exclude_patterns = ["_build"]
