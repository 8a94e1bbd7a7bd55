"""The YAML blocks of README.md and of every page under docs/ as run configs, for the
tests that run each of them (tests/plugins/mlflow/test_mlflow_readme_configs.py,
tests/plugins/ray/test_ray_readme_configs.py), and their other code blocks
(:func:`readme_blocks`; tests/plugins/test_readme_blocks.py runs the Python and bash ones).
Each block knows its page and line (``where``: ``docs/ray.md:40``).

Every ```yaml block is a config. A block with an ``env`` key is a whole
config; a block without one is a fragment, pasted into the README's first whole config:
its top-level keys replace that config's. Each is then shortened with
:data:`SHORT_OVERRIDES` (``--set`` overrides: one iteration, small budgets) so it runs in
seconds.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import attrs
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """README.md, then every Markdown page under docs/, sorted."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def pages_text() -> str:
    """The text of every page, README.md first: what the docs say, wherever they say it."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


def _sources(text: str | None) -> list[tuple[str, str]]:
    if text is not None:
        return [("README.md", text)]
    return [(page.relative_to(ROOT).as_posix(), page.read_text(encoding="utf-8")) for page in pages()]
#: The ``--set`` overrides every README config runs with.
SHORT_OVERRIDES = ("stopping.max_iterations=1", "training.max_env_steps=200", "evaluation.episodes_per_entry=20")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```yaml[ \t]*\n(?P<body>.*?)^(?P=indent)```", re.MULTILINE | re.DOTALL)


@attrs.frozen
class ReadmeConfig:
    """A block (``line``: where its fence starts, in ``path``) as the config it stands for."""

    line: int
    block: dict[str, Any]
    config: dict[str, Any]
    path: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def uses_ray(self) -> bool:
        backend = self.config.get("backend")
        return (backend.get("name") if isinstance(backend, dict) else backend) == "ray"


def readme_configs(text: str | None = None) -> list[ReadmeConfig]:
    """Every YAML block of the README and the docs (or of ``text``, as README.md), as a
    config (before :data:`SHORT_OVERRIDES`)."""
    blocks = []
    for path, page in _sources(text):
        for match in _FENCE.finditer(page):
            line = page.count("\n", 0, match.start()) + 1
            if match.group("body").lstrip().startswith("--8<--"):
                continue  # a file included whole (pymdownx.snippets): the tests of that file run it
            block = yaml.safe_load(textwrap.dedent(match.group("body")))
            assert isinstance(block, dict), f"{path}:{line}: a yaml block must be a mapping"
            blocks.append((path, line, block))
    bases = [block for _, _, block in blocks if "env" in block]
    assert bases, "README.md: no yaml block with a whole config (an 'env' key)"
    return [ReadmeConfig(line, block, block if "env" in block else {**bases[0], **block}, path)
            for path, line, block in blocks]


#: A fenced block of any language.
_ANY_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```",
                        re.MULTILINE | re.DOTALL)
#: The line right above a block that the tests do not run, with the reason (a GPU, a cluster,
#: the network, a server): ``<!-- not run by the tests: needs a CUDA GPU -->``.
_NOT_RUN = re.compile(r"<!-- not run by the tests: (?P<reason>.+?) -->")


@attrs.frozen
class ReadmeBlock:
    """A fenced code block (``line``: where its fence starts, in ``path``); ``not_run``:
    the reason its marker gives for leaving it out, else None."""

    line: int
    language: str
    code: str
    not_run: str | None
    path: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def readme_blocks(text: str | None = None) -> list[ReadmeBlock]:
    """Every fenced block of the README and the docs (or of ``text``, as README.md), in
    order, dedented."""
    blocks = []
    for path, page in _sources(text):
        for match in _ANY_FENCE.finditer(page):
            above = page[:match.start()].rstrip("\n").rpartition("\n")[2]
            marker = _NOT_RUN.search(above)
            blocks.append(ReadmeBlock(line=page.count("\n", 0, match.start()) + 1, language=match.group("language"),
                                      code=textwrap.dedent(match.group("body")),
                                      not_run=marker.group("reason") if marker else None, path=path))
    return blocks


def short(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with :data:`SHORT_OVERRIDES` applied."""
    from popmarl.config.loading import apply_overrides

    return apply_overrides(config, SHORT_OVERRIDES)
