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
  title, the site navigation and a highlighted code block.

The build takes about 5 s and Chromium about 1 s a page, so these tests run in
the default ``python -m pytest`` (marker ``docs``; ``-m "not docs"`` leaves them
out). They skip, naming the ``docs`` extra, where Sphinx and its extensions
are not installed, and the Chromium test skips where ``/usr/bin/chromium``
(or ``chromium`` on the PATH) is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS_TOOLS = ("sphinx", "pydata_sphinx_theme", "numpydoc", "myst_parser")
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
