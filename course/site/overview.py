"""What the overview pages generate instead of typing it, so that it cannot drift from the course:

- `<!-- course:chapters -->`: the home page's chapter table, from the nav (course/chapters.py);
- `<!-- course:clone -->`: the repository's address and the command that clones it, from mkdocs.yml's
  `extra.repository`;
- `<!-- course:cpu-exercises -->`: every exercise that runs without a GPU, from the registry
  (course/exercise.py);
- `<!-- course:exercises CHAPTER -->`, inline: how many exercises a chapter's exercises page has, linked.
"""

from __future__ import annotations

import re
import subprocess

from course import chapters
from course.exercise import EXERCISES
from course.paths import ROOT

_NUMBERS = "no one two three four five six seven eight nine ten eleven twelve".split()


def _count(n: int, noun: str) -> str:
    word = _NUMBERS[n] if n < len(_NUMBERS) else str(n)
    return f"{word} {noun}{'' if n == 1 else 's'}"


def repo_url(configured: str | None) -> str | None:
    """The repository's web address: mkdocs.yml's `extra.repository` (the REPO_URL variable, which the
    publishing workflow sets to the repository it builds), else the `origin` remote of the checkout the
    site is built from, else None (a copy with no known address)."""
    if configured:
        return configured.rstrip("/")
    try:
        origin = subprocess.run(["git", "-C", str(ROOT), "remote", "get-url", "origin"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return web_address(origin)


def web_address(remote: str) -> str | None:
    """A git remote as the web address of its repository (git@host:owner/name.git -> https://host/owner/name)."""
    m = re.fullmatch(r"(?:git@|ssh://git@)([^:/]+)[:/](.+?)(?:\.git)?/?", remote)
    if m:
        return f"https://{m[1]}/{m[2]}"
    return re.sub(r"\.git$", "", remote.rstrip("/")) if remote.startswith("https://") else None


def clone(url: str | None) -> str:
    """Markdown: the clone command for the repository at `url`, or what to do when the build did not know it."""
    if url:
        return (f"The repository is <{url}>.\n\n"
                f"<!--pytest.mark.skip(reason=\"needs the network\")-->\n"
                f"```bash\ngit clone {url}.git cuda-course && cd cuda-course\n```\n")
    return ("This copy of the site was built without the repository's address (the builder set no `REPO_URL` "
            "and its checkout has no `origin` remote), so no clone command can be shown: clone the repository "
            "from wherever you got this site, with `git clone ADDRESS cuda-course && cd cuda-course`.\n")


def cpu_exercises() -> str:
    """Markdown: a table of every exercise that runs without a GPU, by chapter, with how it runs there."""
    how = {"numba": "`--sim` (Numba's CUDA simulator)", "triton": "`--sim` (Triton's interpreter)",
           "torch": "as it is"}
    rows = ["| Exercises | Page | Runs on the CPU with |", "|---|---|---|"]
    groups: dict[tuple[str, str], list[str]] = {}
    for ex in EXERCISES:
        if not ex.needs_gpu:
            groups.setdefault((ex.chapter, ex.lang), []).append(f"`{ex.name}`")
    order = [c.folder for c in chapters.chapters()]
    for (chapter, lang), names in sorted(groups.items(), key=lambda g: order.index(g[0][0])):
        title = chapters.page_title(f"{chapter}/index.md")
        rows.append(f"| {', '.join(names)} | [{title}: exercises]({chapter}/exercises.md) | {how[lang]} |")
    total = sum(len(v) for v in groups.values())
    return (f"{_count(total, 'exercise').capitalize()} of the {len(EXERCISES)} run without a GPU:\n\n"
            + "\n".join(rows) + "\n")


def exercise_count(chapter: str, warn=None) -> str:
    """Inline: "N exercises" for a chapter, as the registry has them."""
    n = sum(ex.chapter == chapter for ex in EXERCISES)
    if n == 0 and warn:
        warn(f"course:exercises {chapter}: the registry (course/exercise.py) has no exercise in that chapter")
    return _count(n, "exercise")
