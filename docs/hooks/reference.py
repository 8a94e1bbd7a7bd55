"""A MkDocs hook: renders the config reference into docs/config.md from the attrs classes
of core/popmarl/config/schema.py, so the page cannot drift from the code.

Where docs/config.md holds the line ``<!-- config reference -->``, the hook puts one
section per config class: its docstring, then a table of its fields with each field's
type (as written in the source), default and ``#:`` comment. The page's prose around it
is written by hand.

It also expands ``<!-- api members: popmarl.api -->`` on the API pages into one
mkdocstrings block per re-exported name (:func:`api_members`).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import attrs

MARKER = "<!-- config reference -->"
SCHEMA = Path(__file__).resolve().parents[2] / "core" / "popmarl" / "config" / "schema.py"
#: How the validators of schema.py read.
BOUNDS = {"at_least_one": ">= 1", "non_negative": ">= 0", "positive": "> 0", "unit_interval": "in [0, 1]"}
#: The classes, in the order the page shows them, with the key they sit under.
CLASSES = {
    "RunConfig": "the top level",
    "ComponentConfig": "`scenario`, `env`, `algorithm`, `solver`, `backend`, each of `trackers`",
    "AgentsConfig": "`agents`",
    "StoppingConfig": "`stopping`",
    "TrainingConfig": "`training`",
    "EvaluationConfig": "`evaluation`",
}
_ROLE = re.compile(r":(?:mod|class|func|attr|data|meth):`~?([^`]+)`")


def _text(doc: str | None) -> str:
    """A docstring as Markdown: Sphinx roles become code spans, ``x`` becomes `x`."""
    text = inspect.cleandoc(doc or "")
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    return text.replace("``", "`")


def _comments(source: str) -> dict[str, dict[str, tuple[str, str, str]]]:
    """Per class of the schema module, per field: its type as written, its ``#:`` comment
    and its validator as written."""
    lines = source.splitlines()
    found: dict[str, dict[str, tuple[str, str, str]]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields = found.setdefault(node.name, {})
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                comment, row = [], item.lineno - 2
                while row >= 0 and lines[row].strip().startswith("#:"):
                    comment.insert(0, lines[row].strip()[2:].strip())
                    row -= 1
                bound = ""
                if isinstance(item.value, ast.Call):
                    for keyword in item.value.keywords:
                        if keyword.arg == "validator":
                            bound = ast.unparse(keyword.value)
                fields[item.target.id] = (ast.unparse(item.annotation), " ".join(comment), bound)
    return found


def _default(field: Any) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return "required"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = default.factory()
    if attrs.has(type(default)):
        if hasattr(default, "name"):
            return f"`{default.name}`"
        return f"see [`{type(default).__name__}`](#{type(default).__name__.lower()})"
    if isinstance(default, list):
        default = [getattr(d, "name", d) for d in default]
    return f"`{default!r}`" if default is not None else "`null`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    from popmarl.config import schema

    comments = _comments(SCHEMA.read_text(encoding="utf-8"))
    out = []
    for name, where in CLASSES.items():
        cls = getattr(schema, name)
        out += [f"### `{name}`", "", f"*Under {where}.*", "", _text(cls.__doc__), "",
                "| key | type | default | allowed | what |", "|---|---|---|---|---|"]
        for field in attrs.fields(cls):
            annotation, comment, bound = comments.get(name, {}).get(field.name, (str(field.type), "", ""))
            allowed = re.sub(r"optional\((\w+)\)", lambda m: f"null or {BOUNDS.get(m.group(1), m.group(1))}", bound)
            allowed = BOUNDS.get(allowed, allowed)
            out.append(f"| `{field.name}` | `{_cell(annotation)}` | {_cell(_default(field))} | {_cell(allowed)} | "
                       f"{_cell(_text(comment))} |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    markdown = _expand_api(markdown)
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())


API_MARKER = re.compile(r"<!-- api members: (?P<module>[\w.]+) -->")
CORE = Path(__file__).resolve().parents[2] / "core"


def api_members(module: str) -> str:
    """One mkdocstrings block per name ``module`` re-exports (``from x import A as A``),
    under the section comments of its source, so that each name is documented where it is
    defined and the page lists exactly what the module exports."""
    source = (CORE / module.replace(".", "/")).with_suffix(".py")
    if not source.exists():
        source = CORE / module.replace(".", "/") / "__init__.py"
    out: list[str] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        comment = re.match(r"^# (?P<text>[A-Z].*)$", line)
        imported = re.match(r"^from [\w.]+ import (?P<name>\w+) as (?P=name)$", line)
        if comment:
            out += ["", f"## {comment.group('text').split(':')[0].rstrip('.')}", ""]
        elif imported:
            out += [f"::: {module}.{imported.group('name')}", "    options:", "      heading_level: 3", ""]
    return "\n".join(out)


def _expand_api(markdown: str) -> str:
    return API_MARKER.sub(lambda m: api_members(m.group("module")), markdown)
