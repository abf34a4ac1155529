"""Helpers for the browser tests (tests/test_browser_*.py): build the site, serve it on 127.0.0.1, and
the scripts run in its pages (browser_driver.py drives headless Chromium with them).

The browser is Debian's `chromium` package, driven by Playwright's Python package (never Playwright's
own browser download). Set COURSE_CHROMIUM to use another Chromium binary.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCREENSHOTS = ROOT / "build" / "screenshots"

CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-default-apps", "--disable-domain-reliability", "--no-default-browser-check",
]
INSTALL_HINT = ("install Debian's chromium and Playwright's Python package: "
                "apt-get install -y chromium && pip install -e '.[browser]' "
                "(never `playwright install`: the tests use the system Chromium)")


def chromium_path() -> str | None:
    env = os.environ.get("COURSE_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


def site_config() -> Path:
    """The MkDocs config the tests build with."""
    return Path(os.environ.get("COURSE_SITE_CONFIG") or ROOT / "mkdocs.yml")


PRINT_PAGE = "print_page/"  # the whole course on one page (mkdocs-print-site-plugin)
# The site is built and served under a sub-path, as a GitHub Pages project site is
# (https://OWNER.github.io/REPO/): a link or asset that climbs out of it fails the tests.
SUBPATH = "/cuda-course/"


def build_site(dest: Path, config: Path | None = None) -> Path:
    """`mkdocs build --strict` into dest; the course's own site must also print no warning
    (COURSE_SITE_CONFIG names another config file, for trying a change to mkdocs.yml before making it)."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(dest)]
    the_course = config is None
    if config is None and os.environ.get("COURSE_SITE_CONFIG"):
        config = Path(os.environ["COURSE_SITE_CONFIG"])
    if config is not None:
        cmd += ["--config-file", str(config)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "SITE_URL": f"http://127.0.0.1:8000{SUBPATH}"})
    if proc.returncode != 0:
        raise RuntimeError(f"mkdocs build failed:\n{proc.stdout}\n{proc.stderr}")
    # The course's site prints no warning at all, not even one strict mode let through (tests/test_site.py).
    if the_course and "WARNING" in proc.stderr:
        raise RuntimeError(f"mkdocs build printed a warning:\n{proc.stderr}")
    return dest


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site under SUBPATH only: anything outside it is a 404, as on a project site."""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def send_head(self):
        if not self.path.startswith(SUBPATH):
            self.send_error(404, f"outside {SUBPATH}")
            return None
        return super().send_head()

    def translate_path(self, path):
        return super().translate_path("/" + path[len(SUBPATH):] if path.startswith(SUBPATH) else path)


@contextlib.contextmanager
def serve(directory: Path):
    """Serve a folder on 127.0.0.1 at a free port under SUBPATH; yields the base URL
    ("http://127.0.0.1:PORT/cuda-course/")."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{SUBPATH}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def site_pages(site: Path) -> list[str]:
    """Every HTML page of the built site, as URL paths ("", "setup/", ...), the home page first."""
    pages = []
    for html in sorted(site.rglob("index.html")):
        rel = html.parent.relative_to(site).as_posix()
        if rel.split("/")[0] in ("assets", "search", "css", "js"):
            continue
        pages.append("" if rel == "." else rel + "/")
    return sorted(pages, key=lambda p: (p != "", p))


def source_for(url_path: str) -> Path | None:
    """The Markdown page a URL path was built from (use_directory_urls), or None."""
    stem = url_path.rstrip("/")
    candidates = [DOCS / "index.md"] if not stem else [DOCS / f"{stem}.md", DOCS / stem / "index.md"]
    return next((c for c in candidates if c.is_file()), None)


# ----------------------------------------------------------------------------- code blocks as pasted

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_SNIPPET_LINE = re.compile(r"""^(?P<indent>[ \t]*)-{1,}8<-{1,}[ \t]+(?P<q>["'])(?P<target>[^"']+)(?P=q)[ \t]*$""")
_SECTION_MARK = re.compile(r"-{1,}8<-{1,}[ \t]+\[[ \t]*(?P<type>start|end)[ \t]*:[ \t]*(?P<name>[a-z][-_0-9a-z]*)[ \t]*\]")


def _section(path: Path, name: str | None) -> list[str]:
    text = path.read_text()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    if name is None:
        return [line for line in lines if not _SECTION_MARK.search(line)]
    out, inside = [], False
    for line in lines:
        m = _SECTION_MARK.search(line)
        if m and m["name"] == name:
            if m["type"] == "start":
                inside = True
                continue
            break
        if m:  # another section's marker inside ours: the snippets extension drops it
            continue
        if inside:
            out.append(line)
    return out


def expected_code_blocks(page: Path) -> list[tuple[str, str]]:
    """(info string, text a reader should get from the copy button) for each fenced block of a page.

    Written independently of the snippets extension: a `--8<-- "file:section"` line stands for the lines
    between that section's start and end markers in the file. Mermaid diagrams are left out (they are
    drawn, not shown as code). The text is what Material's copy button promises: the block's text
    without its trailing newline.
    """
    blocks = []
    lines = page.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].strip()
        body = []
        i += 1
        while i < len(lines):
            line = lines[i]
            stripped = line[len(indent):] if line.startswith(indent) else line.lstrip()
            if re.match(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", stripped):
                break
            body.append(stripped)
            i += 1
        i += 1
        lang = info.split()[0].lstrip(".").lower() if info else ""
        if lang == "mermaid":
            continue
        expanded = []
        for line in body:
            s = _SNIPPET_LINE.match(line)
            if re.match(r"^\s*;-{1,3}8<", line):  # an escaped snippet line is shown without its ';'
                expanded.append(line.replace(";", "", 1))
            elif re.search(r"-{1,3}8<-{1,3}\s*\[(start|end):[\w-]+\]\s*$", line):
                continue  # a section marker: the snippets extension removes it wherever it stands
            elif s:
                target = s["target"]
                path, _, name = target.partition(":")
                expanded += [s["indent"] + x if x else x for x in _section(ROOT / path, name or None)]
            else:
                expanded.append(line)
        blocks.append((info, "\n".join(expanded).rstrip()))
    return blocks


# ----------------------------------------------------------------------------- in-page scripts

# Everything the tests need from one page, gathered in one round trip.
COPY_BUTTON = "button[data-md-type=copy], button.md-clipboard"  # Material 9.6+, and before

COLLECT_JS = r"""
() => {
  const COPY_BUTTON = "button[data-md-type=copy], button.md-clipboard";
  const article = document.querySelector("article.md-content__inner");
  const ids = Array.from(document.querySelectorAll("[id]"), e => e.id)
    .concat(Array.from(document.querySelectorAll("a[name]"), e => e.getAttribute("name")));
  const links = Array.from(document.querySelectorAll("a[href]"), a => ({
    href: a.href, raw: a.getAttribute("href"), text: (a.textContent || "").trim().slice(0, 60)}));
  const images = Array.from(document.querySelectorAll("img"), img => ({
    src: img.getAttribute("src"), alt: img.getAttribute("alt"), naturalWidth: img.naturalWidth,
    decorative: img.getAttribute("role") === "presentation" || img.getAttribute("aria-hidden") === "true"}));
  const headings = article ? Array.from(article.querySelectorAll("h1, h2, h3, h4, h5, h6"), h => ({
    level: Number(h.tagName[1]), text: (h.textContent || "").replace("\u00b6", "").trim().slice(0, 80)})) : [];
  const prev = document.querySelector("a.md-footer__link--prev");
  const next = document.querySelector("a.md-footer__link--next");
  const diagrams = Array.from(document.querySelectorAll(".mermaid"), d => ({
    tag: d.tagName, height: d.getBoundingClientRect().height}));
  const maths = Array.from(document.querySelectorAll(".arithmatex"), m => !!m.querySelector(".katex"));
  // Whether Mermaid's script reached this page, and how many diagrams Material drew with it (it replaces
  // each <pre class="mermaid"> by a <div class="mermaid"> holding the SVG).
  const mermaidLoaded = performance.getEntriesByType("resource").some(e => /\/mermaid(\.min)?\.js(\?|$)/.test(e.name))
    || (typeof window.mermaid !== "undefined" && !(window.mermaid instanceof Element));
  const diagramsDrawn = document.querySelectorAll("div.mermaid").length;
  return {
    title: document.title,
    ids, links, images, headings,
    prev: prev ? prev.href : null, next: next ? next.href : null,
    abbrs: Array.from(document.querySelectorAll("article abbr"), a => a.getAttribute("title") || ""),
    badge: !!document.querySelector(".course-badge"),
    results: !!article && article.textContent.includes("Measured on"),
    diagrams, maths, mermaidLoaded, diagramsDrawn,
    tabSets: Array.from(document.querySelectorAll("article .tabbed-set"), t =>
      Array.from(t.querySelectorAll(":scope > .tabbed-labels > label"), l => (l.textContent || "").trim())),
    // Profile cards (course/site/profile_card.py): the labels of the card elements and one-line notices
    cards: Array.from(document.querySelectorAll("article [data-card]"),
      e => [e.getAttribute("data-card"), e.getAttribute("data-vs")]).flat().filter(Boolean),
    codeBlocks: document.querySelectorAll("article pre > code").length,
    copyButtons: document.querySelectorAll(`article :is(${COPY_BUTTON})`).length,
  };
}
"""

# Make an element visible as a reader would: open the folds around it and select the tabs holding it.
REVEAL_JS = r"""
(el) => {
  for (let e = el; e; e = e.parentElement) {
    if (e.tagName === "DETAILS") e.open = true;
    if (e.classList && e.classList.contains("tabbed-block")) {
      const set = e.closest(".tabbed-set");
      const blocks = Array.from(e.parentElement.children);
      const input = set.querySelectorAll(":scope > input")[blocks.indexOf(e)];
      if (input && !input.checked) input.click();
    }
  }
}
"""

# Click every copy button in the content (revealing it first) and read what reached the clipboard.
# The click is the element's own click(), as Material's handler receives it; test_browser_controls.py
# also checks one button with a real mouse click.
# A clipboard call can wait forever in a page that has lost focus (two browsers crawling side by side on
# a busy machine), and page.evaluate has no timeout of its own: each call is raced against a timer, so a
# stuck call fails with a message (browser_driver.py's _copy_all then focuses the page and tries again)
# instead of hanging the crawl.
COPY_ALL_JS = r"""
async ([selector, reveal, limitMs]) => {
  const revealFn = eval(reveal);
  const bounded = (promise, what) => Promise.race([promise, new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`clipboard ${what} took over ${limitMs} ms`)), limitMs))]);
  const texts = [];
  for (const button of document.querySelectorAll(`article :is(${selector})`)) {
    revealFn(button);
    const nothing = "\u2400 nothing was copied";
    await bounded(navigator.clipboard.writeText(nothing), "write");
    button.click();
    // The handler may write asynchronously: on a busy machine, read until the copy has arrived (or
    // 2 s have passed, when the button copied nothing and the marker is what the check reports).
    let text = nothing;
    for (const until = Date.now() + 2000; text === nothing && Date.now() < until;) {
      await new Promise(r => setTimeout(r, 10));
      text = await bounded(navigator.clipboard.readText(), "read");
    }
    texts.push(text);
  }
  return texts;
}
"""

# Wait until Material has drawn the diagrams and KaTeX has typeset the maths.
RENDERED_JS = r"""
() => !document.querySelector("pre.mermaid")
  && Array.from(document.querySelectorAll(".arithmatex")).every(m => m.querySelector(".katex, .katex-error"))
"""

# Wait until Material has given every code block of the content its copy button: on a busy machine its
# scripts can still be at work after the load event (the print view is not checked for copy buttons).
COPY_BUTTONS_READY_JS = r"""
() => document.querySelectorAll("article pre > code").length
      <= document.querySelectorAll("article :is(COPY_BUTTON)").length
""".replace("COPY_BUTTON", COPY_BUTTON)

# Code blocks that scroll sideways (after opening every fold, as a reader reading the answers would):
# the longest line of each, in characters, and the block's width. Program output (`text` blocks: tables
# from profilers, BENCH lines, generated code) keeps its lines, since wrapping would break its columns.
CODE_OVERFLOW_JS = r"""
() => {
  for (const d of document.querySelectorAll("article details")) d.open = true;
  return Array.from(document.querySelectorAll("article pre > code"))
    .filter(c => !(c.closest(".highlight") || c).classList.contains("language-text"))
    .filter(c => c.offsetParent !== null && c.scrollWidth > c.clientWidth + 1)
    .map(c => {
      const lines = (c.textContent || "").split("\n");
      const longest = lines.reduce((a, l) => (l.length > a.length ? l : a), "");
      return {columns: longest.length, width: c.clientWidth, line: longest.trim().slice(0, 60)};
    });
}
"""

# Elements wider than the viewport (for the phone test's message).
OVERFLOW_JS = r"""
() => {
  const doc = document.documentElement;
  const width = doc.clientWidth;
  const wide = [];
  if (doc.scrollWidth > width) {
    for (const el of document.querySelectorAll("body *")) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > width + 1) {
        // Report the outermost culprit only.
        let p = el.parentElement, inner = false;
        while (p) { const pr = p.getBoundingClientRect(); if (pr.right > width + 1) { inner = true; break; } p = p.parentElement; }
        if (!inner || el.parentElement === document.body)
          wide.push(`${el.tagName.toLowerCase()}.${(el.className || "").toString().split(" ").join(".")} right=${Math.round(r.right)}`);
        if (wide.length > 5) break;
      }
    }
  }
  return {scrollWidth: doc.scrollWidth, clientWidth: width, wide};
}
"""

# WCAG 2 contrast of every visible piece of text in the page's header, content and footer against the
# background it sits on (ancestors' backgrounds composited, opacity applied). Text over an image or a
# gradient is skipped: its background cannot be known from styles alone.
CONTRAST_JS = r"""
(selectors) => {
  const parse = (c) => {
    const m = c.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, bottom) => {
    const a = top[3] + bottom[3] * (1 - top[3]);
    if (a === 0) return [0, 0, 0, 0];
    return [0, 1, 2].map(i => (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / a).concat([a]);
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  // Memoised along the tree: each element's composited background and effective opacity.
  const bgCache = new Map(), opCache = new Map(), styles = new Map();
  const style = (e) => { let s = styles.get(e); if (!s) { s = getComputedStyle(e); styles.set(e, s); } return s; };
  const background = (el) => {
    if (!el) return [255, 255, 255, 1];  // the canvas
    if (bgCache.has(el)) return bgCache.get(el);
    const s = style(el);
    let bg;
    if (s.backgroundImage && s.backgroundImage !== "none") bg = null;  // an image or a gradient
    else {
      const c = parse(s.backgroundColor);
      if (c && c[3] >= 1) bg = c;
      else {
        const below = background(el.parentElement);
        bg = below && c && c[3] > 0 ? over(c, below) : below;
      }
    }
    bgCache.set(el, bg);
    return bg;
  };
  const opacity = (el) => {
    if (!el) return 1;
    if (opCache.has(el)) return opCache.get(el);
    const o = Number(style(el).opacity) * opacity(el.parentElement);
    opCache.set(el, o);
    return o;
  };
  const results = [];
  const seen = new Set();
  for (const root of document.querySelectorAll(selectors)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const el = node.parentElement;
      if (!el || seen.has(el)) continue;
      seen.add(el);
      if (el.closest("svg, .katex, [hidden], .md-search, .md-tooltip, .md-tooltip2, .headerlink, .md-annotation, script, style, noscript")) continue;
      const rects = el.getClientRects();
      if (!rects.length || rects[0].width === 0) continue;
      const s = style(el);
      if (s.visibility !== "visible") continue;
      const bg = background(el);
      if (!bg) continue;
      let fg = parse(s.color);
      if (!fg) continue;
      const alpha = fg[3] * opacity(el);
      if (alpha < 0.1) continue;  // faded out (a header title between two states): not shown
      fg = [fg[0], fg[1], fg[2], alpha];
      const shown = over(fg, bg);
      const l1 = lum(shown), l2 = lum(bg);
      const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
      const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
      const large = size >= 24 || (bold && size >= 18.66);
      const need = large ? 3 : 4.5;
      if (ratio + 1e-6 < need) {
        const cls = (el.className && el.className.toString()) || "";
        results.push({text: node.textContent.trim().slice(0, 50), tag: el.tagName.toLowerCase(), cls,
                      ratio: Math.round(ratio * 100) / 100, need, color: s.color,
                      background: `rgb(${bg.slice(0, 3).map(Math.round).join(", ")})`});
      }
    }
  }
  return results;
}
"""

# Where a page's first prose starts (the top of its first paragraph or list item of a sentence's length,
# outside the verification box, the prerequisites line, figures and tables), read on load, every fold as
# the page ships it: on a phone it must start within the first screen.
FIRST_PROSE_JS = r"""
() => {
  const article = document.querySelector("article.md-content__inner");
  if (!article) return null;
  for (const el of article.querySelectorAll("p, li")) {
    if (el.closest(".course-badge, .course-prereqs, .course-run-note, figure, table, nav, .md-source-file")) continue;
    const text = (el.textContent || "").trim();
    const r = el.getBoundingClientRect();
    if (text.length < 40 || r.height === 0) continue;
    return {top: Math.round(r.top + window.scrollY), screen: window.innerHeight, text: text.slice(0, 60)};
  }
  return null;
}
"""

# Tables that scroll sideways in their box (every fold open): Material puts a table in a scrolling wrapper.
TABLE_OVERFLOW_JS = r"""
() => Array.from(document.querySelectorAll("article table")).filter(t => t.offsetParent !== null).map(t => {
  const boxes = [t, t.closest(".md-typeset__scrollwrap")].filter(Boolean);
  const over = Math.max(...boxes.map(b => b.scrollWidth - b.clientWidth));
  const head = Array.from(t.querySelectorAll("thead th"), th => (th.textContent || "").trim());
  return {over, width: t.clientWidth, head: head.join(" | ").slice(0, 100)};
}).filter(o => o.over > 1)
"""

# Each chart drawn from the record (course/svg.py): the drawing shown, its width against its figure's
# (the column's), and the size its labels come out at, in CSS pixels.
PLOTS_JS = r"""
() => Array.from(document.querySelectorAll("article figure.course-plot")).filter(f => f.offsetParent !== null).map(f => {
  const shown = Array.from(f.querySelectorAll(":scope > svg")).filter(s => s.getBoundingClientRect().width > 0);
  const title = (f.querySelector("svg > title") || {}).textContent || "";
  if (shown.length !== 1) return {title: title.slice(0, 80), shown: shown.length};
  const svg = shown[0], width = svg.getBoundingClientRect().width;
  return {title: title.slice(0, 80), shown: 1, layout: svg.getAttribute("class"), fill: width / f.clientWidth,
          textPx: width / svg.viewBox.baseVal.width * Number(svg.getAttribute("font-size"))};
})
"""
