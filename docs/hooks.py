"""MkDocs hooks: the README is the home page, and the API reference is one page per module.

The README and ``deploy/README.md`` live outside ``docs/`` (GitHub shows them there); they are added
to the site as generated pages, with their links rewritten to the site's pages. Each module of
:data:`API_MODULES` gets ``api/<module>.md``, rendered by mkdocstrings from its docstrings.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent

#: Modules documented in the API reference, in the navigation's order.
API_MODULES = (
    "uss_stream",
    "uss_stream.cascade.classifier",
    "uss_stream.cascade.active",
    "uss_stream.cascade.summary",
    "uss_stream.cascade.stage",
    "uss_stream.policies",
    "uss_stream.policies.base",
    "uss_stream.policies.uss_ucb",
    "uss_stream.policies.uss_kl_ucb",
    "uss_stream.policies.uss_ts",
    "uss_stream.policies.hanawal2017",
    "uss_stream.policies.supervised_ucb",
    "uss_stream.policies.fixed_depth",
    "uss_stream.policies.oracle",
    "uss_stream.policies.audited_uss",
    "uss_stream.policies.uee_ucb",
    "uss_stream.policies.sequential_kl_ucb",
    "uss_stream.policies.stagewise",
    "uss_stream.policies.thresholds",
    "uss_stream.core.stats",
    "uss_stream.core.instances",
    "uss_stream.replay.engine",
    "uss_stream.policies.kernel",
    "uss_stream.replay.io",
    "uss_stream.replay.delayed",
    "uss_stream.pending",
    "uss_stream.replay.labelled",
    "uss_stream.labels.wd_monitor",
    "uss_stream.policies.learning_state",
    "uss_stream.core.context_stats",
    "uss_stream.replay.sequential",
    "uss_stream.replay.shared",
    "uss_stream.core.forgetting",
    "uss_stream.cascade.feature_costs",
    "uss_stream.datasets.bsc",
    "uss_stream.datasets.paper",
    "uss_stream_kafka",
    "uss_stream_kafka.clients",
    "uss_stream_kafka.clients.base",
)

#: Links of the generated pages that point into the repository, and the site page they become.
LINKS = {
    "docs/": "",
    "../docs/": "",
    "../deploy/README.md": "deploy.md",
    "deploy/README.md": "deploy.md",
    "CHANGELOG.md": "changelog.md",
    "../CHANGELOG.md": "changelog.md",
}


def _rewrite(markdown: str) -> str:
    def link(match: re.Match) -> str:
        target = match.group(1)
        for prefix, replacement in LINKS.items():
            if target.startswith(prefix):
                return f"]({replacement}{target[len(prefix) :]})"
        return match.group(0)

    return re.sub(r"\]\(([^)#][^)]*)\)", link, markdown)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    config.nav.append({"API reference": [{module: f"api/{module}.md"} for module in API_MODULES]})
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = {
        "index.md": _rewrite((ROOT / "README.md").read_text()),
        "deploy.md": _rewrite((ROOT / "deploy" / "README.md").read_text()),
        "changelog.md": (ROOT / "CHANGELOG.md").read_text(),
    }
    for module in API_MODULES:
        pages[f"api/{module}.md"] = f"# `{module}`\n\n::: {module}\n"
    for src_uri, content in pages.items():
        files.append(File.generated(config, src_uri, content=content))
    return files


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    """Pages under ``docs/`` link to the deployment guide outside it; point them at its page."""
    return _rewrite(markdown) if page.file.src_uri in ("kafka.md", "orchestration.md") else markdown
