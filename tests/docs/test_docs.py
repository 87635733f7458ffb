"""The documentation site builds, its internal links resolve, and its pages render.

One fast build (``DOCS_FAST=1``: the examples' scripts are not run, the short
code blocks are) is made in a temporary folder per test session, with
warnings as errors and nitpicky references, as ``nox -s docs`` builds it.
Then:

- a link checker (``html.parser``, no network) follows every internal
  ``href`` and ``src`` of every built page to an existing file, and every
  ``#fragment`` to an ``id`` in the target page;
- headless Chromium renders the landing page, one guide page and one API
  page (``--dump-dom``, after the theme's scripts ran), and each shows its
  title, the site navigation and a highlighted code block;
- every page's references: a name of xpkit in single backticks (a
  docstring's, or a page's) is a link, never italic text or unlinked code;
- in Chromium at 1400 px, no table is wider than the content area (a table
  that cannot fit scrolls inside its own box), and the left sidebar shows the
  site's pages and the sections of the page, leaf pages included;
- every Python block of the docs runs as a saved script
  (``tests/code_blocks.py``); the blocks marked ``% xpkit: exec`` run in the
  build itself, as saved scripts, where the docs tools are installed.

The build takes about 5 s and Chromium about 1 s a page, so these tests run in
the default ``python -m pytest`` (marker ``docs``; ``-m "not docs"`` leaves them
out). They skip, naming the ``docs`` extra, where Sphinx and its extensions
are not installed, and the Chromium test skips where ``/usr/bin/chromium``
(or ``chromium`` on the PATH) is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from code_blocks import Block, blocks, missing_modules, printed_as_stated, run_block

ROOT = Path(__file__).resolve().parents[2]
DOCS_TOOLS = ("sphinx", "pydata_sphinx_theme", "numpydoc", "myst_parser")
HAVE_DOCS_TOOLS = all(importlib.util.find_spec(m) is not None for m in DOCS_TOOLS)
pytestmark = pytest.mark.docs


@dataclass
class Page:
    """What the link checker and the rendering checks read from one HTML page."""

    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    title: str = ""
    nav_links: list[str] = field(default_factory=list)
    code_blocks: int = 0
    html_attrs: dict[str, str] = field(default_factory=dict)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._in_title = False
        self._nav_depth = 0
        self._highlight_depth = 0
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.page.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) and tag in {"a", "link", "img", "script", "iframe"}:
                self.page.links.append(a[key])
        if tag == "html":
            self.page.html_attrs = a
        if tag == "title":
            self._in_title = True
        if tag in {"br", "img", "link", "meta", "input", "hr", "source", "wbr"}:
            return  # void elements have no end tag
        self._stack.append(tag)
        classes = a.get("class", "").split()
        if tag == "nav" or self._nav_depth:
            self._nav_depth += 1
            if tag == "a" and a.get("href"):
                self.page.nav_links.append(a["href"])
        if "highlight" in classes or self._highlight_depth:
            self._highlight_depth += 1
            if tag == "pre":
                self.page.code_blocks += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag not in self._stack:
            return
        while self._stack:
            popped = self._stack.pop()
            self._nav_depth = max(0, self._nav_depth - 1) if self._nav_depth else 0
            if self._highlight_depth:
                self._highlight_depth -= 1
            if popped == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.page.title += data


def read_page(text: str) -> Page:
    reader = _Reader()
    reader.feed(text)
    reader.close()
    return reader.page


def broken_links(site: Path) -> tuple[list[str], int]:
    """Internal links of every page under ``site`` that lead nowhere.

    Returns the broken ones (``page: link (why)``) and how many were checked.
    External links (any scheme) are not followed. Files under ``_static/``
    are the theme's assets (a Jinja template among them), not pages: links
    to them are checked, links in them are not.
    """
    pages = {
        p: read_page(p.read_text(encoding="utf-8"))
        for p in site.rglob("*.html")
        if "_static" not in p.relative_to(site).parts  # the theme's templates
    }
    broken, checked = [], 0
    for path, page in sorted(pages.items()):
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("//"):
                continue  # https:, mailto:, data:, javascript: ...
            checked += 1
            target = (
                (path.parent / unquote(parts.path)).resolve() if parts.path else path
            )
            if target.is_dir():
                target /= "index.html"
            where = f"{path.relative_to(site)}: {link}"
            if not target.is_file():
                broken.append(f"{where} (no file {target})")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{where} (no id {parts.fragment!r})")
    return broken, checked


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fast build of docs/ per session, warnings as errors, nitpicky."""
    missing = [m for m in DOCS_TOOLS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"the docs tools are not installed ({', '.join(missing)}): "
            "pip install -e '.[docs]' (the docs extra)"
        )
    out = tmp_path_factory.mktemp("docs") / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q",
         "-b", "html", "-d", str(out.parent / "doctrees"), "docs", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "DOCS_FAST": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


def test_the_site_has_every_page_and_every_public_name(site):
    for page in ["index", "getting-started", "guide/memory", "guide/testing",
                 "backends", "benchmarks", "examples", "api/backend", "api/xpkit",
                 "api/testing"]:  # fmt: skip
        assert (site / f"{page}.html").is_file(), page
    import xpkit
    import xpkit.testing

    api = {p: read_page((site / f"api/{p}.html").read_text(encoding="utf-8")).ids
           for p in ("backend", "xpkit", "testing")}  # fmt: skip
    ids = set().union(*api.values())
    for module in (xpkit, xpkit.testing):
        for name in module.__all__:
            assert f"{module.__name__}.{name}" in ids, name


def test_the_generated_pages_hold_the_adapters_and_the_benchmarks(site):
    from xpkit._adapters import ADAPTERS

    backends = (site / "backends.html").read_text(encoding="utf-8")
    for key, adapter in ADAPTERS.items():
        assert f"&quot;{key}&quot;" in backends, key
        assert adapter.label in backends, key
    assert "Backend.svd" in backends  # docs/capabilities.md, included
    bench = (site / "benchmarks.html").read_text(encoding="utf-8")
    results = ROOT / "benchmarks" / "results"
    for md in results.glob("*.md"):
        assert md.name in bench, md.name
    for png in results.glob("*.png"):
        assert (site / "_images" / png.name).is_file(), png.name
    examples = (site / "examples.html").read_text(encoding="utf-8")
    assert "BatchPlan(" in examples  # a code block ran at build time


def test_no_internal_link_is_broken(site):
    broken, checked = broken_links(site)
    assert checked > 500, checked  # the checker really read the pages
    assert not broken, "\n".join(broken[:30])


def test_the_link_checker_finds_broken_links(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/a.html#here">ok</a><a href="sub/a.html#gone">bad id</a>'
        '<a href="missing.html">no file</a><a href="https://example.org/x">ext</a>'
        '<img src="sub/a.html"><a href="#top" id="top">self</a>',
        encoding="utf-8",
    )
    (tmp_path / "sub" / "a.html").write_text(
        '<h1 id="here">A</h1><a href="../index.html#top">up</a>', encoding="utf-8"
    )
    broken, checked = broken_links(tmp_path)
    assert checked == 6
    assert len(broken) == 2
    assert "no id 'gone'" in broken[0] or "no id 'gone'" in broken[1]
    assert any("missing.html" in b for b in broken)


def _chromium() -> str | None:
    found = Path("/usr/bin/chromium")
    return str(found) if found.is_file() else shutil.which("chromium")


@pytest.mark.parametrize(
    ("page", "title"),
    [
        ("index.html", "xpkit"),
        ("guide/memory.html", "Memory and OOM recovery"),
        ("api/backend.html", "xpkit.Backend"),
    ],
)
def test_pages_render_in_headless_chromium(site, tmp_path, page, title):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path}",
         "--dump-dom", (site / page).as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = read_page(proc.stdout)
    assert dom.title.startswith(title), dom.title
    assert " — xpkit " in dom.title or page == "index.html", dom.title
    # The theme's script ran (it sets the colour theme on <html>).
    assert dom.html_attrs.get("data-theme") in {"light", "dark"}, dom.html_attrs
    # The header navigation leads to every top-level page.
    targets = {Path(urlsplit(h).path).name for h in dom.nav_links}
    assert {"getting-started.html", "backends.html", "examples.html"} <= targets
    assert any(h.endswith("api/index.html") or h == "index.html" for h in dom.nav_links)
    assert dom.code_blocks >= 1


# -- references: names of xpkit are links ---------------------------------------
class _RefReader(HTMLParser):
    """Text of ``<cite>`` elements and of cross-reference code outside any link."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cites: list[str] = []
        self.unlinked: list[str] = []
        self._links = 0
        self._stack: list[tuple[str, str]] = []  # (tag, what is collected)
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "a":
            self._links += 1
        if tag == "cite":
            self._stack.append((tag, "cite"))
            self._text = []
        elif tag == "code" and "xref" in classes and not self._links:
            self._stack.append((tag, "unlinked"))
            self._text = []
        elif self._stack:
            self._stack.append((tag, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._links = max(0, self._links - 1)
        if not self._stack:
            return
        open_tag, what = self._stack.pop()
        if what == "cite":
            self.cites.append("".join(self._text))
        elif what == "unlinked":
            self.unlinked.append("".join(self._text))
        del open_tag

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._text.append(data)


def unresolved_references(html: str) -> list[str]:
    """xpkit names on a page that are not links, and any ``<cite>`` (italic) role."""
    import xpkit
    import xpkit.testing

    public = set(xpkit.__all__) | set(xpkit.testing.__all__)
    reader = _RefReader()
    reader.feed(html)
    found = [f"italic, not a link: {text!r}" for text in reader.cites]
    for text in reader.unlinked:
        name = text.strip().removesuffix("()").lstrip("~.")
        head = name.removeprefix("xpkit.testing.").removeprefix("xpkit.").split(".")[0]
        if name.startswith("xpkit.") or head in public:
            found.append(f"a name of xpkit without a link: {text!r}")
    return found


def test_the_reference_checker_finds_unlinked_names():
    html = (
        '<p><a href="x.html#xpkit.map_batches"><code class="xref py py-obj">'
        "map_batches</code></a> <cite>BatchPlan</cite> "
        '<code class="xref py py-obj">Backend.from_arrays</code> '
        '<code class="xref py py-obj">dtype</code> '
        '<code class="xref py py-class">numpy.ndarray</code></p>'
    )
    found = unresolved_references(html)
    assert len(found) == 2, found
    assert "'BatchPlan'" in found[0]
    assert "'Backend.from_arrays'" in found[1]


def test_every_name_of_xpkit_on_every_page_is_a_link(site):
    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)
    assert len(pages) > 10
    problems = []
    for page in pages:
        html = page.read_text(encoding="utf-8")
        problems += [
            f"{page.relative_to(site)}: {p}" for p in unresolved_references(html)
        ]
    assert not problems, "\n".join(problems[:40])
    # The names the issue found as italic text in map_batches' entry are links.
    api = (site / "api" / "xpkit.html").read_text(encoding="utf-8")
    entry = api[api.index('id="xpkit.map_batches"') :]
    entry = entry[: entry.index('id="xpkit.plan_batches"')]
    for target in ("xpkit.BatchPlan", "xpkit.compute_oom_safe", "xpkit.memory_budget"):
        assert f'href="#{target}"' in entry, target
    assert 'backend.html#xpkit.Backend.from_arrays"' in entry


def test_the_api_page_is_grouped_by_topic_with_map_batches_first(site):
    api = (site / "api" / "xpkit.html").read_text(encoding="utf-8")
    article = api[api.index("<article") :]
    titles = re.findall(r"<h2>(.*?)<a class=\"headerlink\"", article)
    assert titles[:5] == [
        "Batches and memory",
        "Backends",
        "Testing",
        "Errors and warnings",
        "Constants",
    ], titles
    entries = re.findall(r'<dt class="sig sig-object py" id="xpkit\.(\w+)"', article)
    assert entries[0] == "map_batches", entries[:3]
    backend = (site / "api" / "backend.html").read_text(encoding="utf-8")
    for attribute in ("xp", "create", "name", "device", "is_gpu"):
        assert f'id="xpkit.Backend.{attribute}"' in backend, attribute


def test_backend_docstring_agrees_with_the_readme():
    import xpkit

    doc = xpkit.Backend.__doc__ or ""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "guide" / "devices.md").read_text(encoding="utf-8")
    order = "cuda → xpu → mps → cpu"
    assert order in doc
    assert order in guide or order in readme
    for name in ("torch-xpu", "ndonnx", "torch-mps", "jax-gpu"):
        assert f'"{name}"' in doc, name


def test_the_benchmark_sections_have_titles(site):
    bench = (site / "benchmarks.html").read_text(encoding="utf-8")
    titles = re.findall(r"<h2>(.*?)<a class=\"headerlink\"", bench)
    assert len(titles) >= 5, titles
    assert not [t for t in titles if t.strip().endswith(".md</span></code>")], titles


def test_install_hints_name_the_right_extra(site):
    from xpkit._adapters import ADAPTERS

    html = (site / "backends.html").read_text(encoding="utf-8")
    backends = " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())
    assert 'xpkit[all]"' not in backends  # numpy is a core dependency
    for adapter in ADAPTERS.values():
        if adapter.extra:
            assert f'pip install "xpkit[{adapter.extra}]"' in backends, adapter.key
    assert ADAPTERS["numpy"].extra == ""
    assert "a core dependency" in backends


# -- the rendered layout: tables fit, the navigation shows sections --------------
MEASURE = """
<script>
window.addEventListener("load", () => {
  const article = document.querySelector("article.bd-article");
  const box = article.getBoundingClientRect();
  const tables = [...article.querySelectorAll("table")].map((t) => {
    const holder = t.closest(".pst-scrollable-table-container") || t;
    const r = holder.getBoundingClientRect();
    return {head: (t.rows[0] ? t.rows[0].innerText : "").slice(0, 50),
            left: r.left, right: r.right, width: t.scrollWidth,
            room: holder.clientWidth, overflow: getComputedStyle(holder).overflowX};
  });
  const nav = document.querySelector(".bd-sidebar-primary");
  const links = nav ? [...nav.querySelectorAll("a")].map((a) => a.getAttribute("href")) : [];
  document.body.setAttribute("data-xpkit-layout", JSON.stringify(
    {left: box.left, right: box.right, tables, links}));
});
</script>
"""
RENDERED = ["index", "getting-started", "backends", "examples", "benchmarks",
            "nltools", "development", "guide/memory", "guide/errors",
            "guide/executors", "api/xpkit", "api/backend"]  # fmt: skip


def render_layout(chromium: str, site: Path, page: str, profile: Path) -> dict:
    """The layout of ``page`` at 1400 x 1000 px, measured in the page itself."""
    source = site / f"{page}.html"
    probe = source.with_name(f"_layout_{source.name}")
    html = source.read_text(encoding="utf-8")
    probe.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--window-size=1400,1000", "--virtual-time-budget=5000",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'data-xpkit-layout="([^"]*)"', proc.stdout)
    assert found, f"{page}: the measuring script did not run"
    return json.loads(unescape(found.group(1)))


@pytest.mark.parametrize("page", RENDERED)
def test_no_table_is_wider_than_the_content_and_the_navigation_shows_sections(
    site, tmp_path, page
):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    layout = render_layout(chromium, site, page, tmp_path)
    for table in layout["tables"]:
        where = f"{page}: table {table['head']!r}"
        assert table["right"] <= layout["right"] + 1, f"{where} passes the article"
        assert table["width"] <= table["room"] + 1, f"{where} is cut: {table}"
        assert table["overflow"] in {"auto", "scroll"}, where  # narrower: it scrolls
    links = layout["links"]
    tops = {"getting-started.html", "backends.html", "examples.html",
            "benchmarks.html", "nltools.html"}  # fmt: skip
    tops.discard(f"{Path(page).name}.html")  # the page itself: a link to "#"
    assert tops <= {Path(urlsplit(h).path).name for h in links if h}, links
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    if '<section id="' in html[html.index("<article") :].split("</h1>", 1)[1]:
        # a page with sections lists them in the left sidebar
        assert any(h and h.startswith("#") for h in links), links


def test_the_layout_check_finds_a_table_that_is_cut(site, tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    wide = "| " + " | ".join(f"column{i:02d}xxxxxxxxxxxx" for i in range(30)) + " |"
    page = site / "wide.html"
    html = (site / "backends.html").read_text(encoding="utf-8")
    table = (
        "<table><tr>"
        + "".join(f"<td>{c}</td>" for c in wide.split("|"))
        + "</tr></table>"
    )
    page.write_text(html.replace("</h1>", "</h1>" + table, 1), encoding="utf-8")
    layout = render_layout(chromium, site, "wide", tmp_path)
    assert any(t["width"] > t["room"] + 1 or t["right"] > layout["right"] + 1
               for t in layout["tables"]), layout["tables"]  # fmt: skip


# -- every code block of the docs runs as a saved script -------------------------
DOC_PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
DOC_BLOCKS = [
    b
    for page in DOC_PAGES
    for b in blocks(page)
    if not (b.executed_by_build and HAVE_DOCS_TOOLS)  # the build runs those
]


def test_the_docs_have_code_blocks_and_the_build_runs_the_marked_ones():
    every = [b for page in DOC_PAGES for b in blocks(page)]
    assert len(every) >= 15
    executed = [b for b in every if b.executed_by_build]
    assert len(executed) >= 10  # nltools.md checks each of its claims
    assert {b.path.name for b in executed} >= {"nltools.md", "errors.md"}


def test_a_block_that_prints_other_than_its_text_says_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint(1 + 1)\n```\n\nIt prints:\n\n```text\n3\n```\n"
        "\n```python\nprint(2)\n```\n",
        encoding="utf-8",
    )
    stated, silent = blocks(page)
    assert (stated.prints, silent.prints) == ("3", None)
    assert printed_as_stated(stated, "2\n") == (
        "the text says it prints:\n3\nit printed:\n2"
    )
    assert printed_as_stated(stated, "3\n") is None
    assert printed_as_stated(silent, "anything") is None
    assert isinstance(stated, Block)


@pytest.mark.parametrize("block", DOC_BLOCKS, ids=lambda b: b.id)
def test_every_docs_code_block_runs_as_a_saved_script(block, tmp_path):
    missing = missing_modules(block.code)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: pip install -e '.[all]'")
    proc = run_block(block, tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    wrong = printed_as_stated(block, proc.stdout)
    assert wrong is None, wrong
