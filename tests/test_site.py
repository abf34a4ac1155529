"""The site builds strictly, offline, with badges and generated tables in place."""

import os
import re
import subprocess
import sys

import pytest

from course import programs

ROOT = programs.ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def test_no_asset_comes_from_another_host(site):
    external = []
    for page in site.rglob("*.html"):
        text = page.read_text()
        for m in re.finditer(r"""<(?:script|link|img|iframe|source)[^>]+(?:src|href)=["'](https?:)?//[^"']+""", text):
            if re.search(r"""rel=["'](canonical|alternate)""", m.group(0)):
                continue  # a link for search engines, never fetched by the browser
            external.append(f"{page.relative_to(site)}: {m.group(0)[:120]}")
    assert not external, "assets loaded from other hosts:\n" + "\n".join(external)


def test_pages_with_gpu_examples_carry_a_verification_badge(site):
    html = (site / "setup" / "device-query" / "index.html").read_text()
    assert "course-verified" in html or "course-unverified" in html


def test_generated_results_table_is_present(site):
    html = (site / "setup" / "bandwidth" / "index.html").read_text()
    # The implementation names appear only in the table generated from the record's BENCH lines.
    assert "<td>copy_kernel</td>" in html and "Measured on" in html


def test_results_sections_open_with_headline_and_plot(site):
    """Every generated results section: the headline table, then a plot, then every row folded."""
    html = (site / "memory-model" / "reduction" / "index.html").read_text()
    head, plot, folded = html.find("Headline"), html.find('<figure class="course-plot">'), html.find("Every row measured")
    assert -1 < head < plot < folded, (head, plot, folded)
