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

COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4",
           "#b2df8a", "#fb9a99", "#666666", "#cab2d6"]
ROLE_COLOURS = {"ours": "#1b9e77", "peer": "#d95f02", "reference": "#888888"}
ROLE_TAGS = {"peer": " (peer)", "reference": " (reference)"}
ROLE_DASHES = {"peer": "7 4", "reference": "2 3"}


def ticks(lo: float, hi: float, log: bool) -> list[float]:
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


def tick_label(x: float) -> str:
    """A short tick label (at most about five characters, so it fits the axis margin): 512, 4k, 1.5M, 2G."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


GREYED = "#9aa0a6"  # series beyond the highlighted few
HIGHLIGHTED = 6     # at most this many series in colour: the rest grey


def _figure(width: int, height: float, title: str, body: list[str], caption: str) -> str:
    """An inline chart: the svg (its title for screen readers), then a visible caption (HTML)."""
    tid = f"t-{abs(hash(title))}"
    head = el("svg", None, viewBox=f"0 0 {width} {height}", role="img", aria_labelledby=tid, xmlns=XMLNS,
              font_size="13", font_family="sans-serif")[:-2] + ">"
    return "\n".join([f'<figure class="course-plot">{head}', el("title", html.escape(title), id=tid), *body, "</svg>",
                      f"<figcaption>{caption}</figcaption></figure>"]) + "\n"


def line_chart(series: dict[str, list[tuple[float, float]]], roles: dict[str, str], xlabel: str, ylabel: str,
               logx: bool, logy: bool, title: str, caption: str, highlight: set[str] | None = None) -> str:
    """One line per series (points sorted by x), peers dashed and references dotted (roles: series name
    -> "ours", "peer" or "reference"), the legend under the axes with whole names. With more than HIGHLIGHTED
    series, only those in `highlight` (else the first HIGHLIGHTED) are drawn in colour, the rest grey."""
    if highlight is None:
        highlight = set(list(series)[:HIGHLIGHTED])
    xs = [p[0] for pts in series.values() for p in pts]
    ys = [p[1] for pts in series.values() for p in pts]
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = (min(ys), max(ys)) if logy else (0.0, max(ys) * 1.05)
    if xlo == xhi:
        xlo, xhi = xlo * 0.9, xhi * 1.1 or 1.0
    W, H, L, R, T, B = 720, 380, 70, 20, 20, 50
    legend_h = 12 + 18 * len(series)
    fx = (lambda v: math.log10(v)) if logx else (lambda v: v)
    fy = (lambda v: math.log10(v)) if logy else (lambda v: v)
    def X(v): return L + (fx(v) - fx(xlo)) / ((fx(xhi) - fx(xlo)) or 1) * (W - L - R)
    def Y(v): return H - B - (fy(v) - fy(ylo)) / ((fy(yhi) - fy(ylo)) or 1) * (H - T - B)
    axis = "currentColor"
    out = [el("line", x1=L, y1=H - B, x2=W - R, y2=H - B, stroke=axis), el("line", x1=L, y1=T, x2=L, y2=H - B, stroke=axis)]
    for t in ticks(xlo, xhi, logx):
        if xlo <= t <= xhi:
            out.append(el("line", x1=f"{X(t):.1f}", y1=H - B, x2=f"{X(t):.1f}", y2=H - B + 5, stroke=axis)
                       + el("text", tick_label(t), x=f"{X(t):.1f}", y=H - B + 18, text_anchor="middle", fill=axis))
    for t in ticks(ylo if logy else 0.0, yhi, logy):
        if ylo <= t <= yhi:
            out.append(el("line", x1=L - 5, y1=f"{Y(t):.1f}", x2=W - R, y2=f"{Y(t):.1f}", stroke=axis, stroke_opacity="0.15")
                       + el("text", tick_label(t), x=L - 8, y=f"{Y(t)+4:.1f}", text_anchor="end", fill=axis))
    out.append(el("text", html.escape(xlabel), x=(L + W - R) / 2, y=H - 10, text_anchor="middle", fill=axis))
    out.append(el("text", html.escape(ylabel), transform=f"translate(16,{(T + H - B) / 2}) rotate(-90)",
                  text_anchor="middle", fill=axis))
    # Grey series first, so that the highlighted ones are drawn over them.
    order = sorted(series.items(), key=lambda kv: kv[0] in highlight)
    legend = [n for n in series if n in highlight] + [n for n in series if n not in highlight]
    coloured = iter(COLOURS)
    colour_of = {name: next(coloured) if name in highlight else GREYED for name in legend}
    for name, pts in order:
        i = legend.index(name)
        colour = colour_of[name]
        pts.sort()
        dash = ROLE_DASHES.get(roles[name])
        out.append(el("polyline", points=" ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts), fill="none",
                      stroke=colour, stroke_width="2" if name in highlight else "1.2", stroke_dasharray=dash))
        out += [el("circle", el("title", f"{html.escape(name)}: {number(y)} {html.escape(ylabel)} at "
                                         f"{html.escape(xlabel)} {number(x)}"),
                   cx=f"{X(x):.1f}", cy=f"{Y(y):.1f}", r="3", fill=colour) for x, y in pts]
        ly = H + 14 + 18 * i
        tag = ROLE_TAGS.get(roles[name], "")
        out.append(el("line", x1=L, y1=ly - 4, x2=L + 24, y2=ly - 4, stroke=colour, stroke_width="2", stroke_dasharray=dash)
                   + el("text", html.escape(name[:90] + tag) + el("title", html.escape(name)), x=L + 30, y=ly, fill=axis))
    return _figure(W, H + legend_h, title, out, caption)


def bar_chart(groups: dict[str, list[tuple[str, str, float]]], unit: str, title: str, caption: str) -> str:
    """One horizontal bar chart per group (a case): bars of (name, role, value), each group on its own
    scale (the longest bar is its largest value); peers and references outlined with dashes."""
    W, L, R, bar, gap = 720, 300, 90, 16, 4
    body, y = [], 8
    for group, bars in groups.items():
        top = max(v for _, _, v in bars) or 1.0
        body.append(el("text", html.escape(group), x="4", y=y + 12, font_weight="bold", fill="currentColor"))
        y += 20
        for name, role, v in bars:
            wdt = (W - L - R) * v / top
            tag = ROLE_TAGS.get(role, "")
            outline = {"stroke": "currentColor", "stroke_dasharray": "3 2"} if role != "ours" else {}
            body.append(el("text", html.escape(name[:44 - len(tag)] + tag) + el("title", html.escape(name)),
                           x=L - 6, y=y + 12, text_anchor="end", fill="currentColor")
                        + el("rect", el("title", f"{html.escape(name)}: {number(v)} {html.escape(unit)}"),
                             x=L, y=y, width=f"{wdt:.1f}", height=bar, fill=ROLE_COLOURS[role], **outline)
                        + el("text", number(v), x=f"{L + wdt + 4:.1f}", y=y + 12, fill="currentColor"))
            y += bar + gap
        y += 10
    return _figure(W, y, title, body, caption)
