"""Pages generated at build time: the backend table, benchmarks, executed examples.

A page asks for generated Markdown with a MyST comment line (so an unknown
or unprocessed marker never shows up as text)::

    % xpkit: backends            the table of xpkit._adapters.ADAPTERS
    % xpkit: benchmarks          benchmarks/results/*.md and *.png
    % xpkit: api xpkit           a summary and an entry for each of xpkit.__all__
    % xpkit: api xpkit A B       ... for A and B, in that order
    % xpkit: api-rest xpkit -C   ... for the names of xpkit.__all__ that no api
                                 marker of the page lists (but C), if any
    % xpkit: run-script PATH     the script's source, run, and its output
    % xpkit: exec                run the ```python block that follows, saved as a
                                 script; show its output

The marker is replaced in ``source-read``, before MyST parses the page, so
the generated text is ordinary Markdown (headings, tables, directives).
``run-script`` is skipped in fast builds (``xpkit_docs_fast``, set from
``DOCS_FAST=1``); ``exec`` blocks are short and always run. A failing
example fails the build. Pages with markers are rebuilt on every build.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from docutils.nodes import Element, Node
from sphinx.application import Sphinx
from sphinx.domains.python import PyXRefRole
from sphinx.errors import ExtensionError, PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

LOG = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
MARKER = re.compile(r"^% xpkit: ([\w-]+)(?: (.*))?$")
TIMEOUT_S = 300
#: The modules whose ``__all__`` the API reference must cover.
PUBLIC = ("xpkit", "xpkit.testing")


def _backends() -> str:
    from xpkit._adapters import ADAPTERS

    rows = [
        "| `Backend(...)` | library | extra | capabilities | test modes | GPUs |",
        "|---|---|---|---|---|---|",
    ]
    for key, adapter in ADAPTERS.items():
        extra = (
            f'`pip install "xpkit[{adapter.extra}]"`'
            if adapter.extra
            else "none: a core dependency (`pip install xpkit`)"
        )
        caps = ", ".join(f"`{c}`" for c in sorted(adapter.capabilities)) or "none"
        modes = ", ".join(f"`{m}`" for m in adapter.test_modes) or "eager only"
        gpus = adapter.gpu_kinds or "none"
        rows.append(
            f'| `"{key}"` | {adapter.label} | {extra} | {caps} | {modes} | {gpus} |'
        )
    return "\n".join(rows) + "\n"


def _shift_headings(text: str, top: int) -> str:
    """Shift the Markdown headings of ``text`` so its highest is level ``top``."""
    levels = [len(m) for m in re.findall(r"^(#+) ", text, flags=re.MULTILINE)]
    if not levels:
        return text
    shift = top - min(levels)
    return re.sub(
        r"^(#+) ",
        lambda m: "#" * max(1, len(m.group(1)) + shift) + " ",
        text,
        flags=re.MULTILINE,
    )


#: The section title of each results file (a file not listed: its name).
BENCHMARK_TITLES = {
    "dispatch": "Call overhead of the facade",
    "create": "Creating arrays on the device: `b.create`",
    "batches": "Peak memory of map_batches on real workloads",
    "meter": "What fn costs: the meter against a true peak",
    "oom": "Recovering from out-of-memory errors",
    "cluster": "Executors: a dask cluster and joblib",
    "compile": "Compiled functions and the last, shorter batch",
    "out_of_core": "Outputs larger than memory: out= and iter_batches",
    "history": "History of the runs",
}
BENCHMARK_ORDER = list(BENCHMARK_TITLES)


def _benchmark_title(md: Path) -> str:
    return BENCHMARK_TITLES.get(md.stem, f"`{md.name}`")


def _benchmarks(docname: str) -> str:
    up = "../" * docname.count("/") + "../"  # from the page to the repository
    parts = []
    order = {stem: i for i, stem in enumerate(BENCHMARK_ORDER)}
    for md in sorted(
        RESULTS.glob("*.md"), key=lambda p: (order.get(p.stem, len(order)), p.name)
    ):
        text = md.read_text(encoding="utf-8")
        if text.startswith("# "):  # its own title: the section's is enough
            text = text.split("\n", 1)[1].lstrip("\n")
        source = f"(`benchmarks/results/{md.name}`)"
        parts.append(
            f"## {_benchmark_title(md)}\n\n{source}\n\n{_shift_headings(text, 3)}\n"
        )
        for png in sorted(RESULTS.glob(f"{md.stem}*.png")):
            parts.append(
                f"```{{image}} {up}benchmarks/results/{png.name}\n"
                f":alt: {png.name}, the plot of {md.name}\n:width: 100%\n```\n"
            )
    shown = {p.stem for p in RESULTS.glob("*.md")}
    for png in sorted(RESULTS.glob("*.png")):
        if not any(png.stem.startswith(s) for s in shown):
            parts.append(
                f"## `{png.name}`\n\n```{{image}} {up}benchmarks/results/{png.name}"
                f"\n:alt: {png.name}\n:width: 100%\n```\n"
            )
    return "\n".join(parts)


#: What a public constant is, where its module has no ``#:`` comment for it.
DATA_FALLBACK = {"__version__": "The version of xpkit."}


def _data_doc(name: str) -> list[str]:
    """The ``#:`` comment of the xpkit module that defines the constant ``name``.

    autodoc would show the docstring of the value's type (``int``, ``float``)
    for a constant imported into ``xpkit`` from the module that defines it.
    """
    for modname in sorted(m for m in sys.modules if m.split(".")[0] == "xpkit"):
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", name) in docs:
            return [line for line in docs["", name] if line.strip()]
    if name in DATA_FALLBACK:
        return [DATA_FALLBACK[name]]
    LOG.warning("the public constant %s has no #: comment to document it", name)
    return []


def _is_data(obj: object) -> bool:
    return not isinstance(obj, type) and (
        not callable(obj) or getattr(obj, "__origin__", None) is not None
    )


def _directive(qualname: str, obj: object) -> str:
    if isinstance(obj, type):
        # A public or standard base (UserWarning, Generic) says what it is.
        options = "   :members:\n   :show-inheritance:\n"
        return f".. autoclass:: {qualname}\n{options}"
    if not _is_data(obj):
        return f".. autofunction:: {qualname}\n"
    doc = "".join(f"   {line}\n" for line in _data_doc(qualname.rsplit(".", 1)[1]))
    value = repr(obj).replace("\n", " ")
    module_name, name = qualname.rsplit(".", 1)
    return (
        f".. py:data:: {name}\n   :module: {module_name}\n   :value: {value}\n\n{doc}"
    )


def _summary(name: str, obj: object) -> str:
    """The first paragraph of ``obj``'s documentation, on one line."""
    if _is_data(obj):
        lines = _data_doc(name)
    else:
        lines = (inspect.getdoc(obj) or "").split("\n\n")[0].splitlines()
    return " ".join(line.strip() for line in lines).split(". ")[0].rstrip(".") + "."


def _api(arg: str) -> str:
    """The names of ``module.__all__`` (or ``module.Name``): a table, then autodoc.

    ``xpkit -Backend`` leaves out a name documented on a page of its own.
    """
    module_name, *rest = arg.split()
    skip = {r[1:] for r in rest if r.startswith("-")}
    only = [r for r in rest if not r.startswith("-")]
    module = importlib.import_module(module_name)
    names = only or sorted(
        (n for n in module.__all__ if n not in skip),
        key=lambda n: (n.startswith("_"), n.lower()),
    )  # names given are kept in their order: a topic's most used first
    objects = {n: getattr(module, n) for n in names}
    body = "\n".join(_directive(f"{module_name}.{n}", o) for n, o in objects.items())
    head = f".. currentmodule:: {module_name}\n\n"
    if len(names) > 1:
        rows = "".join(
            f"   * - :py:obj:`{n}`\n     - {_summary(n, o)}\n"
            for n, o in objects.items()
        )
        head += f".. list-table::\n   :widths: 35 65\n\n{rows}\n"
    return f"```{{eval-rst}}\n{head}{body}```\n"


def _api_rest(arg: str, listed: set[str]) -> str:
    """The names of ``module.__all__`` that no ``api`` marker of the page lists.

    A new public name is documented (under "More names") until it is given
    its topic. Nothing when every name has one.
    """
    module_name, *rest = arg.split()
    skip = {r[1:] for r in rest if r.startswith("-")}
    module = importlib.import_module(module_name)
    names = [n for n in module.__all__ if n not in listed and n not in skip]
    if not names:
        return ""
    return "## More names\n\n" + _api(" ".join([module_name, *names]))


def _listed_names(lines: list[str]) -> set[str]:
    """Every name that an ``api`` marker of the page lists by name."""
    listed: set[str] = set()
    for line in lines:
        match = MARKER.match(line)
        if match and match.group(1) == "api":
            listed.update(n for n in (match.group(2) or "").split()[1:] if n[0] != "-")
    return listed


def _run(argv: list[str], what: str) -> str:
    # A block that runs pytest (the testing guides) runs it without zarr's
    # and Hypothesis's pytest plugins, which xpkit's does not read and which
    # take 1.4 s of imports a run; it prints the same.
    addopts = (
        os.environ.get("PYTEST_ADDOPTS", "") + " -p no:zarr -p no:hypothesispytest"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTEST_ADDOPTS": addopts}
    try:
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"{what} ran over {TIMEOUT_S} s"
        raise ExtensionError(msg) from exc
    if proc.returncode != 0:
        msg = f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        raise ExtensionError(msg)
    return proc.stdout.rstrip()


def _output_block(output: str, label: str) -> str:
    return f"{label}\n\n```text\n{output}\n```\n"


def _run_script(path: str, docname: str, fast: bool) -> str:
    script = ROOT / path
    if not script.is_file():
        msg = f"{docname}: run-script {path}: no such file"
        raise ExtensionError(msg)
    up = "../" * docname.count("/") + "../"
    source = f"```{{literalinclude}} {up}{path}\n:language: python\n```\n"
    if fast:
        return source + "\n(A fast build: the script was not run.)\n"
    output = _run([sys.executable, str(script)], f"{path} (in {docname})")
    return source + "\n" + _output_block(output, f"`python {path}` printed:")


def _exec_block(lines: list[str], start: int, docname: str) -> tuple[str, int]:
    """Run the ```python fence at ``lines[start]``; return it and its output."""
    if start >= len(lines) or lines[start].strip() != "```python":
        msg = f"{docname}: '% xpkit: exec' must be followed by a ```python block"
        raise ExtensionError(msg)
    end = start + 1
    while end < len(lines) and lines[end].strip() != "```":
        end += 1
    code = "\n".join(lines[start + 1 : end])
    with tempfile.TemporaryDirectory() as tmp:  # a saved script, as a reader runs it
        script = Path(tmp) / "example.py"
        script.write_text(code + "\n", encoding="utf-8")
        output = _run([sys.executable, str(script)], f"a code block of {docname}")
    block = "\n".join(lines[start : end + 1])
    return block + "\n\n" + _output_block(output, "It prints:"), end + 1


def _generate(app: Sphinx, docname: str, source: list[str]) -> None:
    if "% xpkit: " not in source[0]:
        return
    fast = bool(app.config.xpkit_docs_fast)
    lines = source[0].split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = MARKER.match(lines[i])
        i += 1
        if not match:
            out.append(lines[i - 1])
            continue
        kind, arg = match.group(1), (match.group(2) or "").strip()
        if kind == "backends":
            out.append(_backends())
        elif kind == "benchmarks":
            out.append(_benchmarks(docname))
        elif kind == "api":
            out.append(_api(arg))
        elif kind == "api-rest":
            out.append(_api_rest(arg, _listed_names(lines)))
        elif kind == "run-script":
            out.append(_run_script(arg, docname, fast))
        elif kind == "exec":
            text, i = _exec_block(lines, i, docname)
            out.append(text)
        else:
            msg = f"{docname}: unknown marker '% xpkit: {kind}'"
            raise ExtensionError(msg)
    source[0] = "\n".join(out)


def _always_outdated(
    app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Pages with markers: their inputs live outside the source tree."""
    del env, added, changed, removed
    srcdir = Path(app.srcdir)
    return [
        str(path.relative_to(srcdir).with_suffix("")).replace(os.sep, "/")
        for path in srcdir.rglob("*.md")
        if "_build" not in path.parts
        and "% xpkit: " in path.read_text(encoding="utf-8")
    ]


def _check_api(app: Sphinx, env: Any) -> None:
    """Warn about a public name that the API reference does not document."""
    del app
    documented = env.get_domain("py").objects
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if f"{module_name}.{name}" not in documented:
                LOG.warning(
                    "the API reference has no entry for %s.%s", module_name, name
                )


# -- `name` in a docstring: a link to xpkit's object, or code ------------------
class _XpkitRef(PyXRefRole):
    """``py:obj`` that also finds ``Backend.move`` from ``xpkit.testing``'s pages.

    The leading-dot search of the Python domain (any object whose full name
    ends with the target), so a docstring need not spell the module.
    """

    def process_link(
        self,
        env: Any,
        refnode: Element,
        has_explicit_title: bool,
        title: str,
        target: str,
    ) -> tuple[str, str]:
        title, target = super().process_link(
            env, refnode, has_explicit_title, title, target
        )
        refnode["refspecific"] = True
        refnode["xpkit_default_role"] = True
        return title, target


_XREF = _XpkitRef()


def _default_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Any,
    options: dict[str, Any] | None = None,
    content: list[str] | None = None,
) -> tuple[list[Node], list[Any]]:
    """The default role (single backticks): `xpkit_docs.ref` in ``conf.py``."""
    del name
    return _XREF("py:obj", rawtext, text, lineno, inliner, options or {}, content or [])


def _public_names() -> set[str]:
    names: set[str] = set()
    for module_name in PUBLIC:
        names.update(importlib.import_module(module_name).__all__)
    return names


def names_xpkit(target: str) -> bool:
    """Whether a target in single backticks means one of xpkit's public objects.

    ``xpkit.…`` and a public name (``Backend``, ``Backend.move``,
    ``map_batches``) do; a parameter name (`dtype`, `device`) does not.
    """
    target = target.lstrip(".~").removesuffix("()")
    return target.startswith("xpkit.") or target.split(".")[0] in _public_names()


def _unlinked_default_role(
    app: Sphinx, env: Any, node: Element, contnode: Element
) -> Node | None:
    """A single-backtick name that is no object of xpkit: shown as code, no warning.

    Numpydoc writes parameter names in single backticks (`dtype`); they
    are not references. A name of xpkit that does not resolve keeps its
    warning (an error under ``-W``).
    """
    del app, env
    if not node.get("xpkit_default_role") or names_xpkit(node["reftarget"]):
        return None
    return contnode


# -- a class's Attributes section: entries with anchors ------------------------
_FIELD = re.compile(r"^:(\w[\w ]*):\s*$")
_ITEM = re.compile(r"^    \*\*(\w+)\*\*(?: : (.*))?$")


def _attribute_entries(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: Any,
    lines: list[str],
) -> None:
    """Turn numpydoc's rendered Attributes list of a class into attribute entries.

    numpydoc renders ``Attributes`` as a list of names without anchors; each
    becomes a ``py:attribute`` (``xpkit.Backend.xp``), which pages link to.
    Runs after numpydoc (a later priority) on its reStructuredText.
    """
    del app, name, obj, options
    if what != "class":
        return
    try:
        start = lines.index(":Attributes:")
    except ValueError:
        return
    end = start + 1
    while end < len(lines) and (not lines[end] or lines[end].startswith(" ")):
        end += 1
    block, entries = lines[start + 1 : end], [".. rubric:: Attributes", ""]
    indent = "   "
    for line in block:
        item = _ITEM.match(line)
        if item:  # an attribute documented here only: an entry of its own
            entries += ["", f".. py:attribute:: {item.group(1)}", ""]
            if item.group(2):
                entries += [f"   Type: {item.group(2)}", ""]
            indent = "   "
        elif line.startswith("    ") and line.strip() and line[4] != " ":
            # a property with its own entry, linked by numpydoc: a paragraph
            entries += ["", line.strip() + " —"]
            indent = "   "
            indent = ""
        elif line.startswith("        "):
            entries.append(indent + line[8:])
    lines[start:end] = [*entries, ""]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the ``xpkit_docs_fast`` setting, the generators and the roles."""
    app.add_config_value("xpkit_docs_fast", default=False, rebuild="env")
    app.add_role("xpkit-ref", _default_role)
    app.connect("source-read", _generate)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("env-check-consistency", _check_api)
    app.connect("missing-reference", _unlinked_default_role)
    # numpydoc's handler has the default priority (500): this one runs after it.
    app.connect("autodoc-process-docstring", _attribute_entries, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
