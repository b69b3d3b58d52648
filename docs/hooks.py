"""MkDocs hooks: the README is the home page, and the API reference is one page per module.

The README and ``deploy/README.md`` live outside ``docs/`` (GitHub shows them there); they are added
to the site as generated pages. Every page's links into the repository are written as they work on
GitHub and rewritten here to the site's pages (:func:`_rewrite`). Each module of
:data:`API_MODULES` gets ``api/<module>.md``, rendered by mkdocstrings from its docstrings, listed
at the end of the navigation's Reference section.
"""

from __future__ import annotations

import posixpath
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
    "uss_stream.core.units",
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

#: Repository files shown as generated site pages, and their page.
SITE_PAGES = {"README.md": "index.md", "deploy/README.md": "deploy.md", "CHANGELOG.md": "changelog.md"}

#: The navigation section the API reference is appended to.
REFERENCE_SECTION = "Reference"


def _rewrite(markdown: str, folder: str, page: str) -> str:
    """Point the links of a file in the repository's ``folder`` at the site pages, from ``page``.

    A link to a file under ``docs/`` becomes a link to its page, a link to one of
    :data:`SITE_PAGES` a link to the generated page; anything else (URLs, anchors) is left alone.
    """
    here = posixpath.dirname(page) or "."

    def link(match: re.Match) -> str:
        target, hash_, anchor = match.group(1).partition("#")
        if "://" in target or target.startswith("mailto:"):
            return match.group(0)
        resolved = posixpath.normpath(posixpath.join(folder, target))
        if resolved.startswith("docs/"):
            site = resolved[len("docs/") :]
        elif resolved in SITE_PAGES:
            site = SITE_PAGES[resolved]
        else:
            return match.group(0)
        return f"]({posixpath.relpath(site, here)}{hash_}{anchor})"

    return re.sub(r"\]\(([^)#][^)]*)\)", link, markdown)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    api = {"API reference": [{module: f"api/{module}.md"} for module in API_MODULES]}
    sections = [item for item in config.nav if isinstance(item, dict) and REFERENCE_SECTION in item]
    if sections:
        sections[0][REFERENCE_SECTION].append(api)
    else:
        config.nav.append(api)
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = {
        page: _rewrite((ROOT / source).read_text(), posixpath.dirname(source), page)
        for source, page in SITE_PAGES.items()
    }
    for module in API_MODULES:
        pages[f"api/{module}.md"] = f"# `{module}`\n\n::: {module}\n"
    for src_uri, content in pages.items():
        files.append(File.generated(config, src_uri, content=content))
    return files


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    """Pages under ``docs/`` link to files outside it as GitHub shows them; point them at the site."""
    if page.file.src_uri in SITE_PAGES.values():
        return markdown  # generated from a file outside docs/, rewritten in on_files
    uri = page.file.src_uri
    return _rewrite(markdown, posixpath.join("docs", posixpath.dirname(uri)), uri)
