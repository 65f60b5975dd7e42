"""MkDocs hook: the reference pages generated at build time, so that they cannot drift from the code.

- `reference/cli.md`: every command of the typer app (`proctor.cli.commands.app`), walked through click: usage,
  help, arguments and options with their types and defaults;
- `reference/config/*.md`: every config, from its pydantic model: field, type, default, description, with each
  nested section (a model used as a field's type) under it. `config_models()` lists them all (the test that every
  field has a description walks it).

Nothing generated is committed: `on_files` adds the pages to the build. `mkdocs.yml` names this file under `hooks:`;
the tests import it by path (`tests/test_docs.py`).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

GENERATED_NOTE = ("*Generated at build time by `docs/hooks/reference.py` from the code; edit the code's help "
                  "texts and field descriptions, not this page.*")


# ---------------------------------------------------------------------------------------------------------------
# Markdown helpers


def cell(text: Any) -> str:
    """Text for one table cell: one line, pipes escaped outside code spans (the table extension leaves a pipe
    inside backticks alone, and would show the backslash there)."""
    parts = re.split(r"(`[^`]*`)", re.sub(r"\s+", " ", str(text)).strip())
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in parts)


def code(text: str) -> str:
    """A code span for a table cell."""
    text = re.sub(r"\s+", " ", text).strip()
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def plain(help_text: str | None) -> str:
    """A help string without rich markup (typer prints help through rich: `\\[` is a literal bracket)."""
    if not help_text:
        return ""
    try:
        from rich.text import Text

        return Text.from_markup(help_text).plain
    except Exception:  # noqa: BLE001  (not markup after all: keep it as written)
        return help_text


def anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# ---------------------------------------------------------------------------------------------------------------
# The CLI


def cli_page() -> str:
    import typer

    from proctor.cli.commands import app

    root = typer.main.get_command(app)
    out = ["# CLI reference", "", GENERATED_NOTE, "",
           ("Every command prints one line on an error (`proctor --debug ...` prints the traceback). "
            "`proctor COMMAND --help` prints the same text at the terminal."), ""]
    # typer vendors its own click (`typer._click` in recent versions): commands and groups are told apart by
    # what they have, and a context is made by the command's own `context_class`
    commands: list[tuple[str, Any, Any]] = []

    def walk(cmd: Any, path: list[str], parent: Any) -> None:
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
        commands.append((" ".join(path), cmd, ctx))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], ctx)

    walk(root, ["proctor"], None)
    out += ["| command | what it does |", "|---|---|"]
    for name, cmd, _ in commands[1:]:
        out.append(f"| [`{name}`](#{anchor(name)}) | {cell(first_sentence(plain(cmd.help)))} |")
    out.append("")
    for name, cmd, ctx in commands:
        out += [f"## `{name}` {{#{anchor(name)}}}", ""]
        usage = " ".join([name, *cmd.collect_usage_pieces(ctx)])
        out += ["```text", usage, "```", ""]
        if cmd.help:
            out += [help_markdown(plain(cmd.help)), ""]
        rows = [param_row(p, ctx) for p in cmd.get_params(ctx) if not getattr(p, "hidden", False)]
        if rows:
            out += ["| argument / option | type | default | description |", "|---|---|---|---|", *rows, ""]
        if hasattr(cmd, "list_commands"):
            subs = [n for n in cmd.list_commands(ctx) if n]
            out += ["Subcommands: " + ", ".join(f"[`{name} {s}`](#{anchor(f'{name} {s}')})" for s in subs), ""]
    return "\n".join(out)


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


def help_markdown(text: str) -> str:
    """A command's help: paragraphs kept; an indented block (typer keeps `\\b` blocks) as text."""
    text = text.replace("\b\n", "\n")
    blocks = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = para.splitlines()
        if len(lines) > 1 and all(line.startswith((" ", "\t")) for line in lines):
            blocks.append("```text\n" + "\n".join(line.strip() for line in lines) + "\n```")
        else:
            blocks.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(blocks)


def param_row(param: Any, ctx: Any) -> str:
    if param.param_type_name == "argument":
        name = code(param.name.upper())
    else:
        name = " / ".join(code(o) for o in [*param.opts, *param.secondary_opts])
    kind = "flag" if getattr(param, "is_flag", False) else param.display_type(ctx).strip("<>")
    if param.multiple or param.nargs == -1:
        kind += ", repeatable"
    default = "required" if param.required else ""
    value = param.default.value if isinstance(param.default, enum.Enum) else param.default
    if not param.required and value not in (None, [], ()) and not callable(value) and param.name != "help":
        default = code(json.dumps(value, default=str))
    desc = plain(getattr(param, "help", None) or "")
    return f"| {name} | {cell(kind)} | {default} | {cell(desc)} |"


# ---------------------------------------------------------------------------------------------------------------
# Configs


def type_name(tp: Any, seen: list[type[BaseModel]]) -> str:
    """A readable annotation; every pydantic model met is appended to `seen` (to be documented below)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if origin is typing.Annotated:
        return type_name(args[0], seen)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a, seen) for a in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is not None:
        base = getattr(origin, "__name__", str(origin))
        return f"{base}[{', '.join(type_name(a, seen) for a in args)}]" if args else base
    if inspect.isclass(tp) and issubclass(tp, BaseModel):
        if tp not in seen:
            seen.append(tp)
        return tp.__name__
    if inspect.isclass(tp) and issubclass(tp, enum.Enum):
        return " | ".join(json.dumps(m.value) for m in tp)
    if isinstance(tp, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):
        return type_name(tp.__value__, seen)
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def default_text(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory taking the validated data
            return "computed"
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    elif isinstance(value, enum.Enum):
        value = value.value
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) > 80:
        text = text[:77] + "..."
    return code(text)


def model_doc(cls: type[BaseModel]) -> str:
    doc = inspect.getdoc(cls) or ""
    if cls.__doc__ is None or doc == inspect.getdoc(BaseModel):
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def parts_of(cls: type[BaseModel]) -> list[type[BaseModel]]:
    """The config parts `cls` is composed of (`proctor.parts`), outermost only: a part inside another is the
    other's."""
    from proctor.parts import is_part

    found = [c for c in cls.__mro__[1:] if is_part(c)]
    return [p for p in found if not any(p in q.__mro__[1:] for q in found)]


def shown_fields(cls: type[BaseModel]) -> dict[str, Any]:
    """`cls`'s fields but those of its parts (documented once, on the parts page); a part's field that `cls`
    redeclares (another default) is its own."""
    parts = parts_of(cls)

    def declared_by(name: str) -> type:
        return next((c for c in cls.__mro__ if name in vars(c).get("__annotations__", {})), cls)

    return {name: field for name, field in cls.model_fields.items()
            if not any(name in p.model_fields and declared_by(name) in p.__mro__ for p in parts)}


def field_models(cls: type[BaseModel]) -> list[type[BaseModel]]:
    """The models that appear in the types of `cls`'s shown fields (`shown_fields`), in field order."""
    found: list[type[BaseModel]] = []
    for field in shown_fields(cls).values():
        type_name(field.annotation, found)
    return found


def nested_models(roots: Iterable[type[BaseModel]]) -> list[type[BaseModel]]:
    """Every model met in the field types of `roots`, of those models, and so on, each once, in the order a page
    documents them under "Nested sections" (the roots themselves left out)."""
    seen, out = list(roots), []
    pending = [c for root in seen for c in field_models(root)]
    while pending:
        cls = pending.pop(0)
        if cls not in seen:
            seen.append(cls)
            out.append(cls)
            pending += field_models(cls)
    return out


def models_markdown(title: str, intro: str, roots: Iterable[tuple[str, type[BaseModel], str]]) -> str:
    """One page: each root model (with a heading and a lead), then every nested model once."""
    roots = list(roots)
    out = [f"# {title}", "", GENERATED_NOTE, "", intro, ""]
    for heading, cls, lead in roots:
        out += [f"## {heading} {{#{anchor(heading)}}}", ""]
        out += [f"`{cls.__module__}.{cls.__qualname__}`" + (f": {lead}" if lead else ""), ""]
        out += model_table(cls)
    nested = nested_models(cls for _, cls, _ in roots)
    if nested:
        out += ["## Nested sections", "", "The models that appear as field types above.", ""]
    for cls in nested:
        out += [f"### {cls.__name__} {{#{anchor('model-' + cls.__name__)}}}", ""]
        out += [f"`{cls.__module__}.{cls.__qualname__}`", ""]
        out += model_table(cls)
    return "\n".join(out)


def part_link(part: type[BaseModel]) -> str:
    return f"[{part.__name__}](parts.md#{anchor(part.__name__)})"


def model_table(cls: type[BaseModel]) -> list[str]:
    doc = model_doc(cls)
    out = [doc, ""] if doc else []
    parts = parts_of(cls)
    if parts:
        out += [f"With the fields of {', '.join(part_link(p) for p in parts)}, and:", ""]
    fields = shown_fields(cls)
    if not fields:
        return [*out, "No fields.", ""]
    out += ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in fields.items():
        found: list[type[BaseModel]] = []
        tp = type_name(field.annotation, found)
        shown = code(tp)
        if found:
            links = ", ".join(f"[{c.__name__}](#{anchor('model-' + c.__name__)})" for c in found)
            shown += f" (see {links})"
        alias = f" (YAML: `{field.alias}`)" if field.alias and field.alias != name else ""
        out.append(f"| `{name}`{alias} | {shown} | {default_text(field)} | {cell(field.description or '')} |")
    return [*out, ""]


def attr(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


#: a documented config: its heading, its class, and the line under the heading
Root = tuple[str, type[BaseModel], str]


def pipeline_roots() -> list[Root]:
    return [("PipelineConfig", attr("proctor.pipeline.config:PipelineConfig"), "the loop of `proctor run`"),
            ("QuickstartConfig", attr("proctor.quickstart:QuickstartConfig"), "the options of `proctor quickstart`")]


def prm_roots() -> list[Root]:
    return [("PRMTrainConfig", attr("proctor.prm.config:PRMTrainConfig"), "`proctor prm train`"),
            ("LikelihoodPRMConfig", attr("proctor.prm.likelihood:LikelihoodPRMConfig"),
             "`proctor prm train-likelihood`")]


def rollout_roots() -> list[Root]:
    return [("RolloutConfig", attr("proctor.rollout.config:RolloutConfig"), "`proctor rollout`"),
            ("TargetsConfig", attr("proctor.credit.stage:TargetsConfig"), "`proctor targets`"),
            ("EvalConfig", attr("proctor.evaluation.config:EvalConfig"), "`proctor eval`"),
            ("SearchRunConfig", attr("proctor.search.run:SearchRunConfig"), "a search method's run")]


def trainer_roots() -> list[Root]:
    from proctor.rl.trainers import TRAINERS

    roots = []
    for method, entry in TRAINERS.items():
        config, _ = entry.load()
        roots.append((f"train {method}", config, f"`proctor train {method}`: {entry.summary}"))
    return roots


def agent_roots() -> list[Root]:
    import proctor.search  # noqa: F401  (registers the agent kind best-of-n)
    from proctor.agents.registry import agent_class, agent_kinds

    return [(f"kind: {kind}", agent_class(kind), text) for kind, text in agent_kinds().items()]


def search_roots() -> list[Root]:
    from proctor.search.registry import search_methods

    return [(f"method: {name}", m.config, m.description) for name, m in search_methods().items()]


def credit_roots() -> list[Root]:
    import proctor.credit  # noqa: F401  (registers every method)
    from proctor.credit.registry import methods

    return [(f"method: {name}", m.config, m.description + (f" (needs {', '.join(m.needs)})" if m.needs else ""))
            for name, m in methods().items()]


def parts_roots() -> list[Root]:
    """Every part of the configs the other pages document, with the configs (and parts) composed of it."""
    documented = config_models(CONFIG_ROOTS)
    parts: list[type[BaseModel]] = []
    pending = [p for cls in documented for p in parts_of(cls)]
    while pending:
        part = pending.pop(0)
        if part not in parts:
            parts.append(part)
            pending += parts_of(part)
    roots = []
    for part in parts:
        users = list(dict.fromkeys(c for c in [*documented, *parts] if part in parts_of(c)))
        users = [c for c in users if not any(u in c.__mro__[1:] for u in users)]  # not a user's subclass too
        roots.append((part.__name__, part, "used by " + ", ".join(f"`{c.__name__}`" for c in users)))
    return roots


def pipeline_page() -> str:
    return models_markdown(
        "Pipeline and quickstart configs",
        "`proctor run CONFIG.yaml` reads a `PipelineConfig`; `proctor quickstart` builds one from a preset "
        "(`QuickstartConfig`). A ready example: `examples/pipeline/quickstart-household.yaml`.", pipeline_roots())


def prm_page() -> str:
    return models_markdown(
        "PRM configs",
        "`proctor prm train CONFIG.yaml` reads a `PRMTrainConfig` (a backbone with a head); `proctor prm "
        "train-likelihood CONFIG.yaml` a `LikelihoodPRMConfig` (the policy's LM as the PRM). Examples: "
        "`examples/stages/prm.yaml`, `examples/prm/`.", prm_roots())


def rollout_page() -> str:
    return models_markdown(
        "Rollout, targets, search and evaluation configs",
        "What `proctor rollout --config`, `proctor targets`, `proctor eval` read; the command-line options "
        "fill the same fields. Example: `examples/rollout/cand16.yaml`.", rollout_roots())


def trainers_page() -> str:
    return models_markdown(
        "Trainer configs",
        "`proctor train METHOD CONFIG.yaml`: one config class per method, from the trainer registry "
        "(`proctor.rl.trainers.TRAINERS`). Examples: `examples/rl/`.", trainer_roots())


def agents_page() -> str:
    return models_markdown(
        "Agent configs",
        "Every agent is a config with a `kind` (the agent registry, `proctor.agents.registry`): in YAML as "
        "`agent: {kind: choice, model: ...}`, on the command line as `--agent KIND --agent-arg key=value`.",
        agent_roots())


def search_page() -> str:
    return models_markdown(
        "Search configs",
        "Every search method is a config with a `method` (the search registry, `proctor.search.registry`): "
        "`proctor eval --search METHOD --search-arg key=value`, or `search: {method: ...}` in a pipeline's "
        "evaluation entries.", search_roots())


def parts_page() -> str:
    return models_markdown(
        "Config parts",
        "The groups of fields that several configs share, each declared once (`proctor.parts`): a config composed "
        "of a part takes its fields as its own, flat in the YAML (`env: household` at the top of a rollout, an "
        "evaluation or a trainer config), and may give one of them another default (it is then listed in the "
        "config's own table).", parts_roots())


def credit_page() -> str:
    return models_markdown(
        "Credit (targets) configs",
        "`proctor targets --method NAME -p key=value`: the parameters of each method of the credit registry "
        "(`proctor.credit.registry`).", credit_roots())


#: every config reference page's roots but the parts page's (its roots are the parts of these)
CONFIG_ROOTS: tuple[Callable[[], list[Root]], ...] = (pipeline_roots, prm_roots, rollout_roots, trainer_roots,
                                                      agent_roots, search_roots, credit_roots)


def config_models(pages: Iterable[Callable[[], list[Root]]] = (*CONFIG_ROOTS, parts_roots)) -> list[type[BaseModel]]:
    """Every config model the reference documents (on `pages`: all of them): each page's roots and the models
    nested in them, once."""
    roots = [cls for make in pages for _, cls, _ in make()]
    return list(dict.fromkeys(roots)) + [c for c in nested_models(roots) if c not in roots]


#: generated page (relative to docs/) → its maker
PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/config/pipeline.md": pipeline_page,
    "reference/config/prm.md": prm_page,
    "reference/config/rollout.md": rollout_page,
    "reference/config/trainers.md": trainers_page,
    "reference/config/agents.md": agents_page,
    "reference/config/search.md": search_page,
    "reference/config/credit.md": credit_page,
    "reference/config/parts.md": parts_page,
}


def layers_markdown(pyproject: Path) -> str:
    """The import-linter contracts of `pyproject.toml`: the layers, top first, and the forbidden imports."""
    import tomllib

    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    out = []
    for contract in contracts:
        if contract["type"] == "layers":
            out.append(f"{contract['name']}:")
            out.append("")
            out += [f"{i}. `{layer}`" for i, layer in enumerate(contract["layers"], 1)]
            out.append("")
        elif contract["type"] == "forbidden":
            sources = ", ".join(f"`{m}`" for m in contract["source_modules"])
            banned = ", ".join(f"`{m}`" for m in contract["forbidden_modules"])
            out += [f"{contract['name']}: {sources} never import {banned}.", ""]
    return "\n".join(out)


def results_pages(docs_dir: Path) -> list[Path]:
    """The results pages: the undated ones (benchmarks) first, then the dated ones, newest first."""
    pages = [p for p in (docs_dir / "results").glob("*.md") if p.name != "index.md"]
    dated = sorted((p for p in pages if re.match(r"\d{4}-\d{2}-\d{2}-", p.name)), key=lambda p: p.name, reverse=True)
    return sorted(p for p in pages if p not in dated) + dated


def page_title(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def results_table(docs_dir: Path) -> str:
    out = ["| date | page |", "|---|---|"]
    for path in results_pages(docs_dir):
        date = path.name[:10] if re.match(r"\d{4}-\d{2}-\d{2}", path.name) else "several"
        title = re.sub(r"^\d{4}-\d{2}-\d{2}:\s*", "", page_title(path))
        out.append(f"| {date} | [{cell(title)}]({path.name}) |")
    return "\n".join(out)


def on_config(config: Any) -> Any:
    """The Results section of the nav lists every page of docs/results/ (others add dated pages there)."""
    docs_dir = Path(config["docs_dir"])
    for item in config["nav"] or []:
        if isinstance(item, dict) and item.get("Results") == "results/index.md":
            item["Results"] = ["results/index.md", *(f"results/{p.name}" for p in results_pages(docs_dir))]
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- layers -->" in markdown:
        pyproject = Path(config["config_file_path"]).parent / "pyproject.toml"
        markdown = markdown.replace("<!-- layers -->", layers_markdown(pyproject))
    if "<!-- results -->" in markdown:
        markdown = markdown.replace("<!-- results -->", results_table(Path(config["docs_dir"])))
    return markdown


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, make in PAGES.items():
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated by {Path(__file__).name}; delete the committed copy")
        files.append(File.generated(config, uri, content=make()))
    return files
