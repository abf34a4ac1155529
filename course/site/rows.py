"""The recorded rows a results section or a plot shows: a program's passing benchmark rows for its
current code (course/record.py: passing_bench_rows, the same rows a claim reads), and the figures
derived from a row."""

from __future__ import annotations

from course import programs, record


def missing(rel_path: str, what: str) -> str:
    """The note a page shows where the record has no passing run of a program's current code."""
    return (f'!!! warning "No GPU {what} for the current version of `{rel_path}`"\n'
            f"    The GPU record has no passing run of this program's current code. "
            f"Refresh it on a GPU with `{record.REFRESH_STALE}` (see Contributing).\n")


def bench_rows(rel_paths: str, rec: dict, directive: str):
    """(rows, run descriptions, bench runs) of the passing benchmark runs of one or more programs
    (space-separated paths: a peer measured by another program in the same run joins by `case`), or
    None if any benchmark run of their current code has no passing entry."""
    rows, runs, benches = [], [], []
    for rel_path in rel_paths.split():
        prog = programs.program_for(rel_path)
        if prog is None:
            raise ValueError(f"course:{directive} names {rel_path!r}, which is not a program under kernels/")
        mine = [r for r in prog.runs() if r.bench]
        if not mine:
            raise ValueError(f"course:{directive}: {rel_path} declares no 'course: bench' run")
        try:
            found, described = record.passing_bench_rows(prog, rec)
        except record.NotRecorded:
            return None
        rows += found
        runs += described
        benches += mine
    return rows, list(dict.fromkeys(runs)), benches


def derived(b: dict, key: str, peers: dict) -> float | None:
    t = b.get("time_ms")
    if key == "gbps":
        return b["bytes"] / (t * 1e-3) / 1e9 if b.get("bytes") and t else None
    if key == "tflops":
        return b["flops"] / (t * 1e-3) / 1e12 if b.get("flops") and t else None
    if key == "pct_peer":
        peer = peers.get(b["case"])
        return 100 * peer["time_ms"] / t if peer and t else None
    v = b.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def rows_of_first_program(rel_paths: str, rows: list[dict], rec: dict) -> set[int]:
    """The ids of the rows (bench_rows of `rel_paths`) that the first program measured: bench_rows lists
    them first. They are its versions; a second program's rows are peers (course/headline.py)."""
    first, _ = record.passing_bench_rows(programs.program_for(rel_paths.split()[0]), rec)
    return {id(b) for b in rows[:len(first)]}
