"""The timeline figures on docs/first-kernels/cuda-graphs.md are what scripts/timeline_svg.py draws from
the record's run of kernels/first-kernels/timeline.py (or its placeholder, before any such run)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("timeline_svg", ROOT / "scripts" / "timeline_svg.py")
timeline_svg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timeline_svg)


def test_committed_figures_match_the_record():
    if timeline_svg.recorded() is None:
        pytest.skip(f"the record has no passing run of {timeline_svg.PROGRAM} for its current code: "
                    "the committed figures are placeholders until a GPU run")
    for path, text in timeline_svg.figures().items():
        assert path.is_file(), f"{path} is missing: run python scripts/timeline_svg.py"
        assert path.read_text() == text, f"{path} is stale: run python scripts/timeline_svg.py"


def test_placeholders_are_committed_before_a_run():
    for path, text in timeline_svg.figures().items():
        assert path.is_file(), f"{path} is missing: run python scripts/timeline_svg.py"
        if timeline_svg.recorded() is None:
            assert path.read_text() == text


def test_drawing_a_trace():
    trace = {"names": ["Memcpy HtoD", "sin", "Memcpy DtoH"],
             "events": [[7, 0.0, 10.0, 0], [7, 10.0, 5.0, 1], [9, 12.0, 4.0, 0], [7, 15.0, 10.0, 2]]}
    text = timeline_svg.svg(trace, "test", "a GPU")
    assert text.count("<rect") == 4 + 3  # four bars, a legend of copy in, copy out and one kernel
    assert "stream 7" in text and "stream 9" in text and "\n\n" not in text
