"""Building ahead (tests/build_ahead.py) changes when programs are built, never what a test sees: a
build that failed in the pool fails the test that needs it, with the compiler's messages, and builds
of one output asked for at once run the compiler once."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

import build_ahead
from course import toolchain

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def _unit(tmp_path, text: str) -> toolchain.Compilation:
    source = tmp_path / "p.c"
    source.write_text(text)
    return toolchain.Compilation(source, "c", tmp_path / "p", inputs=(source,))


def test_a_build_that_failed_ahead_fails_the_test_with_the_compilers_messages(tmp_path):
    unit = _unit(tmp_path, "int main(void) { return undeclared; }\n")
    pool = build_ahead.Pool([(unit, False)], jobs=2)
    pool.drain()
    proc = toolchain.build(unit)  # what the test that needs the program gets
    assert proc.returncode != 0 and "undeclared" in proc.stderr
    assert not (tmp_path / "p").exists()


def test_one_output_asked_for_at_once_is_built_once(tmp_path, monkeypatch):
    unit = _unit(tmp_path, "int main(void) { return 0; }\n")
    compilers = []
    real_run = toolchain.subprocess.run

    def counting_run(cmd, **kwargs):
        compilers.append(cmd[0])
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(toolchain.subprocess, "run", counting_run)
    with ThreadPoolExecutor(4) as threads:
        procs = list(threads.map(lambda _: toolchain.build(unit), range(4)))
    assert [p.returncode for p in procs] == [0] * 4
    assert compilers.count("gcc") == 1, compilers
    assert (tmp_path / "p.stamp").is_file() and (tmp_path / "p").is_file()


def test_an_edited_source_is_built_again(tmp_path):
    unit = _unit(tmp_path, "int main(void) { return 0; }\n")
    assert toolchain.build(unit).returncode == 0
    unit.source.write_text("int main(void) { return missing; }\n")
    assert toolchain.build(unit).returncode != 0


def test_a_program_built_ahead_is_found_built(tmp_path, monkeypatch):
    unit = _unit(tmp_path, "int main(void) { return 0; }\n")
    build_ahead.Pool([(unit, False)], jobs=1).drain()  # under nice: the stamp is the same
    monkeypatch.setattr(toolchain, "default_arch", lambda: "sm_90")  # (it asks nvidia-smi)
    monkeypatch.setattr(toolchain.subprocess, "run", lambda cmd, **kwargs: pytest.fail(f"compiled again: {cmd}"))
    assert toolchain.build(unit).returncode == 0
