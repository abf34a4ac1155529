"""Every build and run command the course writes down is one that works.

Text kept by hand drifts from the code it describes, and a reader who copies a command that the code
no longer accepts is stopped at the first step. The commands checked here:

- the `Build:` and `Run:` lines of every file's header comment under kernels/ (a labelled line and
  the comment lines aligned under it, one command per line unless a line carries on the one before);
- every command in a page's shell blocks, and every inline code span on a page that starts with
  `python -m course.` or `./build/`.

Each is checked against the real thing, without a GPU:

- `python -m course.MODULE ARGS`: the module's own command line, run as a dry run (DRY_RUNS: its parser
  or its main with the part that does the work replaced), so a module, subcommand, option or
  argument that does not exist fails. A span holding a placeholder (an upper-case word such as NAME,
  or `...`) is a template: only its module is checked.
- `./build/CHAPTER/NAME ARGS` and `python kernels/CHAPTER/NAME.py ARGS`: the program exists, and it
  accepts ARGS. The program is built as tests/test_cli.py builds it and run with ARGS followed by an
  option it does not know, with no GPU visible: programs parse their whole command line before any
  work and reject an unknown option by naming it (tests/test_cli.py holds every program to that), so a
  program that names the planted option, and no option of ARGS, accepted every one of ARGS. Nothing
  is computed.
- `nvcc ...`, `gcc ...`, `g++ ...`: every source file named exists, the output is the program's own
  build/ path, every CUDA library the program declares (`course: libs`) is linked, and the flags are
  ones the compiler knows: nvcc checks them itself in a dry run (`--dryrun`), gcc and g++ compile the
  (small, CPU-only) program into a temporary folder.

`a|b|c` in an argument stands for three commands; `[--n 1000]` is an optional part and is checked as
given; a parenthesis opened after a space, and `# ...` in a shell block, are the reader's notes.
"""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import UNKNOWN_OPTION, run_without_gpu
from pytest_codeblocks.main import extract_from_file

from course import programs
from course.paths import DOCS, KERNELS, ROOT

PAGES = sorted(p for p in DOCS.rglob("*.md") if "vendor" not in p.parts)
# The words that start a command the course documents; other shell lines (cd, export, pip) are not its.
_STARTS = re.compile(r"^(?:\./build/|build/|nvcc\b|gcc\b|g\+\+|python3?\b|compute-sanitizer\b|mkdir\b)")
_LABEL = re.compile(r"\b(?P<label>Build|Run):\s+(?P<text>\S.*)$")
_COMMENT_LEAD = re.compile(r"^\s*(?://|#|/?\*)?\s*$")
_PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{1,}\b|\.\.\.|<[^>]+>")


@dataclass(frozen=True)
class Command:
    where: str   # file:line, for the failure message
    text: str    # the command, notes removed
    # (output, source) of the compile commands beside it (a page block that builds a variant under a
    # name of its own, then runs it)
    built_beside: tuple[tuple[str, str], ...] = ()
    # beside a make or cmake command: programs under build/ that the build tool made, not the harness
    made_by_build_tool: bool = False

    @property
    def id(self) -> str:
        return f"{self.where}: {self.text}"


# ---------------------------------------------------------------------------------------------------
# Finding the commands


def _strip_notes(lines: list[str], shell: bool) -> list[str]:
    """The lines without the reader's notes: a parenthesis opened after a space (it may close on a
    later line), and in a shell block a `#` comment."""
    out, depth = [], 0
    for line in lines:
        kept = []
        for i, ch in enumerate(line):
            if depth:
                depth += {"(": 1, ")": -1}.get(ch, 0)
                continue
            if ch == "(" and (i == 0 or line[i - 1].isspace()):
                depth = 1
                continue
            if shell and ch == "#" and (i == 0 or line[i - 1].isspace()):
                break
            kept.append(ch)
        out.append("".join(kept).rstrip())
    return out


def _split_commands(lines: list[str], shell: bool) -> list[str]:
    """Lines to commands. In a header comment a line that starts with a command word starts a new
    one and any other line carries on the one before (a wrapped nvcc line); in a shell block every
    line is its own. `a && b` and `a; b` are two commands; a command followed by `||` is one whose
    failure the block expects, and is left to the block's own run; output redirections go."""
    commands: list[str] = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if shell or _STARTS.match(_without_prefix(text)) or not commands:
            commands.append(text)
        else:
            commands[-1] += " " + text
    parts = [p.strip() for c in commands for p in re.split(r"\s*(?:&&|;)\s*", c)]
    return [re.split(r"\s+(?:\||\d?>)", p)[0] for p in parts if p and "||" not in p]


def header_commands(path: Path) -> list[Command]:
    """The Build: and Run: commands of a kernel file's header comment."""
    lines = path.read_text(errors="replace").splitlines()[:80]
    rel = path.relative_to(ROOT).as_posix()
    found: list[Command] = []
    for i, line in enumerate(lines):
        m = _LABEL.search(line)
        if not m:
            continue
        column = m.start("text")
        block = [m["text"]]
        for more in lines[i + 1:]:
            # A comment line whose text starts in the label's text column (or further right) goes on.
            if len(more) <= column or not _COMMENT_LEAD.match(more[:column]) or not more[column:].strip():
                break
            if _LABEL.search(more):
                break
            block.append(more[column:])
        found += [Command(f"{rel}:{i + 1}", c) for c in _split_commands(_strip_notes(block, shell=False), shell=False)]
    return found


def page_commands(page: Path) -> list[Command]:
    """The commands of a page's shell blocks, and its inline spans that start with `python -m course.`
    or `./build/`."""
    rel = page.relative_to(ROOT).as_posix()
    found: list[Command] = []
    for block in extract_from_file(page):
        if (block.syntax or "").strip() not in ("sh", "bash"):
            continue
        joined = block.code.replace("\\\n", " ").splitlines()
        # After a `cd` the block's paths are relative to somewhere else: its own run checks the rest.
        joined = joined[:next((i for i, line in enumerate(joined) if re.match(r"(.*&&)?\s*cd\s", line)), len(joined))]
        commands = [c for c in _split_commands(_strip_notes(joined, shell=True), shell=True)
                    if _STARTS.match(_without_prefix(c))]
        built = tuple(_output_and_source(c) for c in commands if re.match(r"(nvcc|gcc|g\+\+)\s.*\s-o\s", c))
        made = any(re.match(r"(make|cmake)\s", line.strip()) for line in joined)
        found += [Command(f"{rel}:{block.lineno}", c, built, made) for c in commands]
    # Code blocks blanked, their lines kept, so that a span's line number is the page's.
    text = re.sub(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", lambda m: "\n" * m.group(0).count("\n"),
                  page.read_text(), flags=re.S | re.M)
    for lineno, line in enumerate(text.splitlines(), 1):
        for span in re.findall(r"`(python3? -m course\.[^`]*|\./build/[^`]*)`", line):
            found.append(Command(f"{rel}:{lineno} (inline)", span))
    return found


def _output_and_source(command: str) -> tuple[str, str]:
    words = command.split()
    sources = [w for w in words if Path(w).suffix in programs.SOURCE_SUFFIXES and not w.startswith("-")]
    return words[words.index("-o") + 1], sources[0] if sources else ""


def _without_prefix(command: str) -> str:
    """The command without `time` and environment assignments in front."""
    return re.sub(r"^(?:time\s+|[A-Z_][A-Z0-9_]*=\S*\s+)*", "", command)


def _expand(command: Command) -> list[Command]:
    """`[...]` taken as given, and `a|b|c` as one command per alternative."""
    text = re.sub(r"(?<!\S)\[([^\]]*)\]", r"\1", command.text)
    words = text.split()
    for j, w in enumerate(words):
        if "|" in w and not w.startswith("|"):
            return [c for alt in w.split("|")
                    for c in _expand(Command(command.where, " ".join(words[:j] + [alt] + words[j + 1:]),
                                             command.built_beside, command.made_by_build_tool))]
    return [Command(command.where, text, command.built_beside, command.made_by_build_tool)]


def all_commands() -> list[Command]:
    found: list[Command] = []
    for prog in programs.all_programs():
        found += header_commands(prog.path)
    for page in PAGES:
        found += page_commands(page)
    return [e for c in found for e in _expand(c) if not _without_prefix(e.text).startswith("mkdir")]


COMMANDS = all_commands()


# ---------------------------------------------------------------------------------------------------
# Checking one command


def _dry_run_toolchain(argv, monkeypatch):
    from course.toolchain import __main__ as toolchain_command
    monkeypatch.setattr(toolchain_command, "build_all", lambda jobs, only=None: 0)
    toolchain_command.main(argv)


def _dry_run_exercise(argv, monkeypatch):
    from course import exercise
    done = subprocess.CompletedProcess([], 0)
    monkeypatch.setattr(exercise, "check", lambda *a, **k: done)
    monkeypatch.setattr(exercise, "_list", lambda: 0)
    return exercise.main(argv)


def _dry_run_record(argv, monkeypatch):
    from course import record
    monkeypatch.setattr(record, "merge", lambda target, sources: 0)
    monkeypatch.setattr(record, "prune_command", lambda target, listing: 0)
    monkeypatch.setattr(record, "rekey_command", lambda target, old, new: 0)
    return record.main(argv)


def _dry_run_gpu_run(argv, monkeypatch):
    from course import gpu_run
    gpu_run.parser().parse_known_args(argv)  # what it does not know goes to pytest


def _dry_run_figures(argv, monkeypatch):
    import tempfile

    from course import figures
    monkeypatch.setattr(figures, "FIGURES", {})  # draw nothing, write nothing into docs/
    monkeypatch.setattr(figures, "OUT", Path(tempfile.mkdtemp()))
    assert not argv, "python -m course.figures takes no arguments"
    return figures.main(argv)


# python -m course.MODULE: how to parse a command line without doing the work. A module whose command
# line a page or a header shows needs an entry here.
DRY_RUNS = {
    "course.toolchain": _dry_run_toolchain,
    "course.exercise": _dry_run_exercise,
    "course.record": _dry_run_record,
    "course.gpu_run": _dry_run_gpu_run,
    "course.figures": _dry_run_figures,
}


def _check_course_module(command: Command, words: list[str], monkeypatch) -> None:
    module, argv = words[2], words[3:]
    importlib.import_module(module)  # a module that does not exist fails here
    assert module in DRY_RUNS, f"{command.id}: no dry run for {module}'s command line (add one to DRY_RUNS)"
    if _PLACEHOLDER.search(" ".join(argv)):
        return  # a template such as `python -m course.exercise NAME --mistake MISTAKE`
    try:
        code = DRY_RUNS[module](argv, monkeypatch)
    except SystemExit as e:
        code = e.code
    assert code in (0, None), f"{command.id}: {module} rejects this command line (exit {code!r})"


def _program_of(path_text: str) -> programs.Program | None:
    """The program a ./build/... path or a kernels/... path names."""
    found = programs.paths_named_in(path_text.removeprefix("./"))
    return programs.parse(found[0]) if found else None


def _check_program_accepts(command: Command, prog: programs.Program, args: list[str]) -> None:
    assert prog.runnable, f"{command.id}: {prog.rel} is not a program one runs"
    proc = run_without_gpu(prog, (*args, *UNKNOWN_OPTION))
    said = proc.stdout + proc.stderr
    named = [line for line in said.splitlines() if UNKNOWN_OPTION[0] in line]
    own = [a for a in args if a.startswith("--")]
    assert proc.returncode == programs.EXIT_FAIL and named, (
        f"{command.id}: {prog.rel} stopped before reaching the option planted after the command's own "
        f"(exit {proc.returncode}), so it rejects one of {args}:\n{said[-2000:]}")
    rejected = [a for a in own if any(re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", line) for line in named)]
    assert not rejected, f"{command.id}: {prog.rel} does not accept {rejected}:\n{said[-2000:]}"


def _check_run(command: Command, words: list[str]) -> None:
    if words[0] == "compute-sanitizer":
        # compute-sanitizer [--tool TOOL] PROGRAM ARGS: the tool is one it has, the program as any other
        rest = words[1:]
        while rest and rest[0].startswith("--"):
            if rest[0] == "--tool":
                assert rest[1] in programs.SANITIZER_TOOLS, f"{command.id}: no compute-sanitizer tool {rest[1]!r}"
            rest = rest[2:]
        assert rest, f"{command.id}: compute-sanitizer with no program"
        return _check_run(command, rest)
    built_beside = dict(command.built_beside)
    prog = _program_of(built_beside.get(words[0].removeprefix("./"), words[0]))
    if prog is None and command.made_by_build_tool:
        return  # make or cmake built it under its own name: the block's own run is its check
    assert prog is not None, f"{command.id}: no program under kernels/ builds {words[0]}"
    _check_program_accepts(command, prog, words[1:])


def _check_compile(command: Command, words: list[str], tmp_path: Path) -> None:
    compiler = words[0]
    sources = [w for w in words[1:] if Path(w).suffix in programs.SOURCE_SUFFIXES and not w.startswith("-")]
    if not sources and "-o" not in words:  # a question to the compiler: nvcc --version, --list-gpu-arch
        proc = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{command.id}: {compiler} rejects it:\n{proc.stderr[-2000:]}"
        return
    missing = [s for s in sources if not (ROOT / s).is_file()]
    assert sources and not missing, f"{command.id}: no such source file {missing or '(none named)'}"
    if "-o" not in words and {"-E", "-fsyntax-only", "-M"} & set(words):  # it writes no program: run it
        proc = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{command.id}: {compiler} rejects it:\n{proc.stderr[-2000:]}"
        return
    assert "-o" in words, f"{command.id}: no -o: the output would not land where the Run line looks"
    out = words[words.index("-o") + 1]
    prog = programs.parse(ROOT / sources[0])
    want = prog.executable.relative_to(ROOT).as_posix() + (".o" if "-c" in words else "")
    run_beside = out in dict(command.built_beside)  # a variant the same block builds and runs by its name
    assert out in (want, "/dev/null") or run_beside, f"{command.id}: writes {out}, but {prog.rel} is run as {want}"
    linked = {w[2:] for w in words if w.startswith("-l")} | {w for i, w in enumerate(words) if words[i - 1] == "-l"}
    unlinked = [lib for lib in prog.libs if programs.LIBRARIES[lib][1] not in linked]
    assert not unlinked, f"{command.id}: {prog.rel} uses {unlinked} (course: libs) but the command does not link it"
    argv = list(words)
    argv[argv.index("-o") + 1] = str(tmp_path / Path(out).name)
    if compiler == "nvcc":  # nvcc checks every option in a dry run, without compiling
        argv.insert(1, "--dryrun")
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{command.id}: {compiler} rejects it:\n{proc.stderr[-2000:]}"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.id)
def test_command_works(command, monkeypatch, tmp_path):
    text = _without_prefix(command.text)
    if "$" in text or re.match(r"python3? (-c|-)(\s|$)", text):
        return  # a shell expansion or inline Python: the block's own run is its check
    words = shlex.split(text)
    if words[0] in ("python", "python3"):
        if words[1:2] == ["-m"]:
            if words[2].startswith("course."):
                return _check_course_module(command, words, monkeypatch)
            return  # python -m pytest, pip: not the course's command lines
        script = ROOT / words[1]
        assert script.is_file(), f"{command.id}: no such file {words[1]}"
        prog = _program_of(words[1])
        if prog is not None:
            _check_program_accepts(command, prog, words[2:])
        return
    if words[0] in ("nvcc", "gcc", "g++"):
        return _check_compile(command, words, tmp_path)
    _check_run(command, words)


def test_commands_are_found():
    """The finder finds the commands it is meant to: a kernel header's wrapped Build: line comes back
    as one command, a Run: block as one command per program line, and notes are left out."""
    flash = {c.text for c in header_commands(KERNELS / "attention" / "flash_hopper.cu")}
    assert ("nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o build/attention/flash_hopper "
            "kernels/attention/flash_hopper.cu") in flash
    assert "./build/attention/flash_hopper --bench" in flash
    assert "./build/attention/flash_hopper --batch 4 --heads 16 --seq 4096 --plant zeros-small" in flash
    assert not any("ping-pong" in c for c in flash), flash
    kinds = {_without_prefix(c.text).split()[0] for c in COMMANDS}
    assert {"nvcc", "gcc", "g++", "python", "compute-sanitizer"} <= kinds | {"python3"}, kinds
    assert any(c.text.startswith("./build/") for c in COMMANDS)
    assert any(c.text.startswith("python -m course.") and c.where.endswith("(inline)") for c in COMMANDS)


def test_a_wrong_command_fails(monkeypatch, tmp_path):
    """Each check can fail: an option the program does not take, a missing value, a subcommand and a
    module that do not exist, a source file that is gone, a flag nvcc does not know."""
    memory = programs.parse(KERNELS / "cpp" / "memory.c")
    _check_program_accepts(Command("t", "ok"), memory, ["--n", "1000"])
    wrong = [lambda: _check_program_accepts(Command("t", "typo"), memory, ["--nn", "1000"]),
             lambda: _check_program_accepts(Command("t", "no value"), memory, ["--n"]),
             lambda: test_command_works(Command("t", "python -m course.toolchain build kernels/cpp/memory.c"),
                                        monkeypatch, tmp_path),
             lambda: test_command_works(Command("t", "python -m course.no_such_module"), monkeypatch, tmp_path),
             lambda: test_command_works(Command("t", "gcc -std=c11 -o build/cpp/gone kernels/cpp/gone.c"),
                                        monkeypatch, tmp_path),
             lambda: test_command_works(Command("t", "nvcc -O3 --no-such-flag -o build/setup/hello_gpu "
                                                     "kernels/setup/hello_gpu.cu"), monkeypatch, tmp_path)]
    for check in wrong:
        with pytest.raises((AssertionError, ModuleNotFoundError)):
            check()
