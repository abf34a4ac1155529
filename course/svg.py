"""The one SVG writer: the figures of course/figures/ and the site's charts of recorded rows.

- el(): one element, attributes in the order given (`stroke_width` is written stroke-width), with a
  body or self-closed. Every SVG the course draws is built from it.
- Svg: a standalone figure (a light card with its own background), written to docs/assets/figures/.
- line_chart() and bar_chart(): inline charts for pages (`<figure class="course-plot">`), drawn in
  currentColor so that they follow the page's palette; the site (course/site/plots.py) picks the
  rows and the series, these draw them.
"""

from __future__ import annotations

import html
import math

XMLNS = "http://www.w3.org/2000/svg"


def el(tag: str, body: str | None = None, **attrs) -> str:
    """<tag a="v" ...>body</tag>, or <tag a="v" .../> without a body; None attributes are left out."""
    text = "".join(f' {k.rstrip("_").replace("_", "-")}="{v}"' for k, v in attrs.items() if v is not None)
    return f"<{tag}{text}/>" if body is None else f"<{tag}{text}>{body}</{tag}>"


def number(x: float, digits: int = 3) -> str:
    """A figure as charts and tables print it: `digits` significant digits, whole below 1000 and up."""
    return f"{x:.{digits}g}" if x < 1000 else f"{x:,.0f}"


# ----------------------------------------------------------------------------- standalone figures

# Palette: text and outlines dark on the card; fills mid-tone and light enough for dark text on them.
CARD = "#ffffff"
INK = "#1f2328"        # text and outlines: 16:1 on the card
MUTED = "#4b5563"      # secondary text: 7.6:1 on the card
BLUE = "#cfe0f5"
GREEN = "#d3ecd6"
ORANGE = "#fbe0bd"
RED = "#f6cfcb"
GREY = "#e5e7eb"
PURPLE = "#e4daf3"
STRONG_BLUE = "#3b6fb6"
STRONG_RED = "#b93d33"
STRONG_GREEN = "#2e7d32"
DEEP_ORANGE = "#d9822b"  # the highlighted one among ORANGE tiles
STRONG_ORANGE = "#b36b1f"  # lines and arrows beside ORANGE, as STRONG_BLUE beside BLUE
PANEL = "#f7f9fc"  # a panel that groups boxes on the card
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


class Svg:
    def __init__(self, width: int, height: int, title: str):
        self.w, self.h, self.items = width, height, []
        self.title = title

    def rect(self, x, y, w, h, fill=GREY, stroke=INK, width=1.0, rx=4, dash=None):
        self.items.append(el("rect", x=f"{x:g}", y=f"{y:g}", width=f"{w:g}", height=f"{h:g}", rx=f"{rx:g}", fill=fill,
                             stroke=stroke, stroke_width=f"{width:g}", stroke_dasharray=dash))

    def text(self, x, y, s, size=13, anchor="middle", weight="normal", fill=INK, italic=False):
        self.items.append(el("text", html.escape(s), x=f"{x:g}", y=f"{y:g}", font_size=f"{size:g}", text_anchor=anchor,
                             font_weight=weight, fill=fill, font_style="italic" if italic else None))

    def heading(self, s, size=15):
        """The figure's heading, bold and centred at the top."""
        self.text(self.w / 2, 26, s, size, weight="bold")

    def caption(self, y, s, size=11):
        """The figure's closing note: small, muted, italic and centred."""
        self.text(self.w / 2, y, s, size, fill=MUTED, italic=True)

    def lines(self, x, y, texts, step=18, size=12, **style):
        """A paragraph: one text a line, the first at y, each next one `step` lower."""
        for i, s in enumerate(texts):
            self.text(x, y + i * step, s, size, **style)

    def key(self, x, y, fill, label, rx=0, width=1.0):
        """A legend entry: a 16-pixel swatch of the fill and its label."""
        self.rect(x, y, 16, 16, fill=fill, rx=rx, width=width)
        self.text(x + 24, y + 13, label, 12, anchor="start")

    def panel(self, x, y, w, h, title):
        """A panel that groups boxes (host memory, the device, a binary), its title centred at its top."""
        self.rect(x, y, w, h, fill=PANEL, width=1.2)
        self.text(x + w / 2, y + 20, title, 13, weight="bold")

    def grid(self, x, y, w, h, cols, rows, stroke=MUTED, width=0.5):
        """Thin lines dividing the rectangle (x, y, w, h) into cols x rows cells."""
        for c in range(1, cols):
            self.line(x + c * w / cols, y, x + c * w / cols, y + h, stroke=stroke, width=width)
        for r in range(1, rows):
            self.line(x, y + r * h / rows, x + w, y + r * h / rows, stroke=stroke, width=width)

    def box(self, x, y, w, h, label, fill=GREY, size=12, weight="normal", sub=None):
        self.rect(x, y, w, h, fill)
        if sub:
            self.text(x + w / 2, y + h / 2 - 2, label, size, weight=weight)
            self.text(x + w / 2, y + h / 2 + size, sub, max(size - 2, 10), fill=MUTED)
        else:
            self.text(x + w / 2, y + h / 2 + size * 0.35, label, size, weight=weight)

    def chain(self, x, y, items, h=44, gap=16, size=12, title=None):
        """Boxes left to right, each joined to the next by an arrow: items are (label, sub or None, fill,
        width), under an optional bold title. Returns the x just past the last box."""
        if title:
            self.text(x, y - 12, title, 13, anchor="start", weight="bold")
        for i, (label, sub, fill, w) in enumerate(items):
            if i:
                self.line(x - gap, y + h / 2, x - 2, y + h / 2, arrow=True)
            self.box(x, y, w, h, label, fill, size=size, weight="bold", sub=sub)
            x += w + gap
        return x - gap

    def line(self, x1, y1, x2, y2, stroke=INK, width=1.0, arrow=False, dash=None):
        self.items.append(el("line", x1=f"{x1:g}", y1=f"{y1:g}", x2=f"{x2:g}", y2=f"{y2:g}", stroke=stroke,
                             stroke_width=f"{width:g}", marker_end="url(#arrow)" if arrow else None,
                             stroke_dasharray=dash))

    def render(self) -> str:
        head = (f'<svg xmlns="{XMLNS}" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}" role="img" {FONT}>\n'
                f'<title>{html.escape(self.title)}</title>\n'
                '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
                f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{INK}"/></marker></defs>\n'
                f'<rect x="0" y="0" width="{self.w}" height="{self.h}" rx="8" fill="{CARD}" stroke="{GREY}"/>\n')
        return head + "\n".join(self.items) + "\n</svg>\n"


# ----------------------------------------------------------------------------- charts on pages

# A chart is drawn twice, for a desktop's column and for a phone's, and course.css shows the one that fits
# the column it is in: one drawing scaled to both would print its labels at 14 px on one and 5 px on the
# other. Text is CHART_FONT units in both, about that many pixels where each is shown.
WIDTHS = {"wide": 1000, "narrow": 400}
CHART_FONT = 14
COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4",
           "#b2df8a", "#fb9a99", "#666666", "#cab2d6"]
ROLE_COLOURS = {"ours": "#1b9e77", "peer": "#d95f02", "reference": "#888888"}
ROLE_TAGS = {"peer": " (peer)", "reference": " (reference)"}
ROLE_DASHES = {"peer": "7 4", "reference": "2 3"}
ROLE_WORDS = {"ours": "versions (what the page teaches)", "peer": "peers (what one would use instead)",
              "reference": "references"}


def ticks(lo: float, hi: float, log: bool, binary: bool = False) -> list[float]:
    if log and binary:  # powers of two a few doublings apart: 1 KiB, 32 KiB, 1 MiB, ...
        a, b = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
        step = next(s for s in (1, 2, 5, 10, 20) if (b - a) / s <= 7)
        return [2.0 ** e for e in range(a - a % step, b + 1, step)]
    if log:
        decades = [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
        inside = [t for t in decades if lo <= t <= hi]
        if len(inside) >= 3:
            return decades
        # Less than three decades: 1-2-5 steps, so that the axis still has several labelled ticks.
        return [t * m for t in decades for m in (1, 2, 5)]
    step = 10 ** math.floor(math.log10((hi - lo) or 1.0))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def tick_label(x: float, binary: bool = False) -> str:
    """A short tick label (at most about six characters, so it fits the axis margin): 512, 4k, 1.5M, 2G;
    a byte count in binary units: 32K, 1M, 1G (the axis title says bytes)."""
    steps = ((2.0 ** 40, "T"), (2.0 ** 30, "G"), (2.0 ** 20, "M"), (2.0 ** 10, "K")) if binary else \
        ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
    for scale, suffix in steps:
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def wrap(text: str, width_units: float, size: float = CHART_FONT) -> list[str]:
    """Lines of at most the characters that fit `width_units` at `size` (a sans-serif character is about
    0.56 em wide on average), broken at spaces, a word longer than a line cut."""
    room = max(8, int(width_units / (0.56 * size)))
    lines, line = [], ""
    for word in text.split():
        while len(word) > room:
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:room])
            word = word[room:]
        if line and len(line) + 1 + len(word) > room:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


GREYED = "#9aa0a6"  # series beyond the highlighted few
HIGHLIGHTED = 6     # at most this many series in colour: the rest grey


def _svg(layout: str, height: float, title: str, body: list[str]) -> str:
    """One drawing of a chart (course.css shows the layout that fits the column), its title for screen
    readers."""
    tid = f"t-{abs(hash(title))}-{layout}"
    head = el("svg", None, viewBox=f"0 0 {WIDTHS[layout]} {height:.0f}", class_=f"course-plot-{layout}", role="img",
              aria_labelledby=tid, xmlns=XMLNS, font_size=str(CHART_FONT), font_family="sans-serif")[:-2] + ">"
    return "\n".join([head, el("title", html.escape(title), id=tid), *body, "</svg>"])


def _figure(drawings: list[str], caption: str, legend: str = "") -> str:
    """An inline chart: its drawings, a legend (HTML, so that names wrap on a phone) and a caption (HTML)."""
    return "\n".join(['<figure class="course-plot">', *drawings, legend, f"<figcaption>{caption}</figcaption></figure>"]) + "\n"


def _swatch(colour: str, dash: str | None, bar: bool = False) -> str:
    """A legend's sample of a line (or a bar), drawn inline before a name."""
    mark = (el("rect", x="1", y="1", width="26", height="10", fill=colour, stroke="currentColor" if dash else None,
               stroke_dasharray="3 2" if dash else None) if bar else
            el("line", x1="0", y1="6", x2="28", y2="6", stroke=colour, stroke_width="3", stroke_dasharray=dash))
    return el("svg", mark, width="28", height="12", viewBox="0 0 28 12", aria_hidden="true")


def line_chart(series: dict[str, list[tuple[float, float]]], roles: dict[str, str], xlabel: str, ylabel: str,
               logx: bool, logy: bool, title: str, caption: str, highlight: set[str] | None = None,
               binary: tuple[bool, bool] = (False, False), fmt_x=number, fmt_y=number) -> str:
    """One line per series (points sorted by x), peers dashed and references dotted (roles: series name
    -> "ours", "peer" or "reference"), the legend under the axes with whole names. With more than HIGHLIGHTED
    series, only those in `highlight` (else the first HIGHLIGHTED) are drawn in colour, the rest grey.
    `ylabel` stands above the plot, where a phone has room for it; `binary` says which axes count bytes;
    fmt_x and fmt_y write a point's figures in its tooltip."""
    if highlight is None:
        highlight = set(list(series)[:HIGHLIGHTED])
    for pts in series.values():
        pts.sort()
    legend = [n for n in series if n in highlight] + [n for n in series if n not in highlight]
    coloured = iter(COLOURS)
    colour_of = {name: next(coloured) if name in highlight else GREYED for name in legend}
    drawings = [_line_axes(layout, series, roles, colour_of, highlight, xlabel, ylabel, logx, logy, binary, fmt_x, fmt_y, title)
                for layout in WIDTHS]
    items = [f'<li>{_swatch(colour_of[n], ROLE_DASHES.get(roles[n]))} {html.escape(n)}'
             f'{html.escape(ROLE_TAGS.get(roles[n], ""))}</li>' for n in legend]
    return _figure(drawings, caption, '<ul class="course-plot-legend">' + "".join(items) + "</ul>")


def _line_axes(layout, series, roles, colour_of, highlight, xlabel, ylabel, logx, logy, binary, fmt_x, fmt_y,
               title) -> str:
    xs = [p[0] for pts in series.values() for p in pts]
    ys = [p[1] for pts in series.values() for p in pts]
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = (min(ys), max(ys)) if logy else (0.0, max(ys) * 1.05)
    if xlo == xhi:
        xlo, xhi = xlo * 0.9, xhi * 1.1 or 1.0
    if logy and ylo == yhi:
        ylo, yhi = ylo * 0.9, yhi * 1.1
    W = WIDTHS[layout]
    H, L, R, T, B = (420, 64, 24, 44, 52) if layout == "wide" else (330, 52, 14, 44, 52)
    fx = (lambda v: math.log10(v)) if logx else (lambda v: v)
    fy = (lambda v: math.log10(v)) if logy else (lambda v: v)
    def X(v): return L + (fx(v) - fx(xlo)) / ((fx(xhi) - fx(xlo)) or 1) * (W - L - R)
    def Y(v): return H - B - (fy(v) - fy(ylo)) / ((fy(yhi) - fy(ylo)) or 1) * (H - T - B)
    axis = "currentColor"
    out = [el("line", x1=L, y1=H - B, x2=W - R, y2=H - B, stroke=axis), el("line", x1=L, y1=T, x2=L, y2=H - B, stroke=axis)]
    xt = [t for t in ticks(xlo, xhi, logx, binary[0]) if xlo <= t <= xhi]
    if layout == "narrow" and len(xt) > 5:  # room for about five labels on a phone
        xt = xt[::2]
    for t in xt:
        out.append(el("line", x1=f"{X(t):.1f}", y1=H - B, x2=f"{X(t):.1f}", y2=H - B + 5, stroke=axis)
                   + el("text", tick_label(t, binary[0]), x=f"{X(t):.1f}", y=H - B + 20, text_anchor="middle", fill=axis))
    for t in ticks(ylo if logy else 0.0, yhi, logy, binary[1]):
        if ylo <= t <= yhi:
            out.append(el("line", x1=L - 5, y1=f"{Y(t):.1f}", x2=W - R, y2=f"{Y(t):.1f}", stroke=axis, stroke_opacity="0.15")
                       + el("text", tick_label(t, binary[1]), x=L - 8, y=f"{Y(t)+5:.1f}", text_anchor="end", fill=axis))
    out.append(el("text", html.escape(xlabel), x=(L + W - R) / 2, y=H - 10, text_anchor="middle", fill=axis))
    out += [el("text", html.escape(line), x=4, y=18 + 18 * i, fill=axis, font_weight="bold")
            for i, line in enumerate(wrap(ylabel, W - 8)[:2])]
    # Grey series first, so that the highlighted ones are drawn over them.
    for name, pts in sorted(series.items(), key=lambda kv: kv[0] in highlight):
        colour, dash = colour_of[name], ROLE_DASHES.get(roles[name])
        out.append(el("polyline", points=" ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts), fill="none",
                      stroke=colour, stroke_width="2.5" if name in highlight else "1.2", stroke_dasharray=dash))
        out += [el("circle", el("title", f"{html.escape(name)}: {html.escape(fmt_y(y))} at {html.escape(xlabel)} "
                                         f"{html.escape(fmt_x(x))}"),
                   cx=f"{X(x):.1f}", cy=f"{Y(y):.1f}", r="3.5", fill=colour) for x, y in pts]
    return _svg(layout, H, title, out)


def bar_chart(groups: dict[str, list[tuple[str, str, float]]], title: str, caption: str,
              best: dict[str, str] | None = None, fmt=number) -> str:
    """One horizontal bar chart per group (a case): bars of (name, role, value), each group on its own
    scale (the longest bar is its largest value); peers and references outlined with dashes. Each bar's
    whole name stands above it (wrapped on a phone); `best` names each group's best bar, drawn bold."""
    return _figure([_bars(layout, groups, title, best or {}, fmt) for layout in WIDTHS], caption)


def _bars(layout: str, groups, title: str, best: dict[str, str], fmt) -> str:
    W, bar, gap = WIDTHS[layout], 18, 10
    room = W - 8 - 90  # the value is written after the bar
    body, y = [], 4
    for group, bars in groups.items():
        top = max(v for _, _, v in bars) or 1.0
        for line in wrap(group, W - 8):
            body.append(el("text", html.escape(line), x="4", y=y + 16, font_weight="bold", fill="currentColor"))
            y += 20
        y += 4
        for name, role, v in bars:
            is_best = best.get(group) == name
            for line in wrap(name + ROLE_TAGS.get(role, "") + (" (best)" if is_best else ""), W - 8):
                body.append(el("text", html.escape(line), x="4", y=y + 14, fill="currentColor",
                               font_weight="bold" if is_best else None))
                y += 18
            wdt = room * v / top
            outline = {"stroke": "currentColor", "stroke_dasharray": "3 2"} if role != "ours" else {}
            body.append(el("rect", el("title", f"{html.escape(name)}: {html.escape(fmt(v))}"),
                           x="4", y=y + 2, width=f"{max(wdt, 1):.1f}", height=bar, fill=ROLE_COLOURS[role], **outline)
                        + el("text", html.escape(fmt(v)), x=f"{4 + max(wdt, 1) + 6:.1f}", y=y + 16, fill="currentColor"))
            y += bar + gap
        y += 12
    return _svg(layout, y, title, body)
