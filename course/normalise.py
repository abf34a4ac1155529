"""What a source file computes, as the record's keys see it: its tokens, without comments or layout.

A GPU item's key (course/programs.py Run.content_hash, course/items.py block_hash) must change when
what the item builds and runs changes, and not otherwise. So a source is hashed through its tokens:
comments, blank lines, indentation and line wrapping drop out; string literals, numbers, names and
operators stay, each token whole (`x - -1` and `x--1` stay apart). The lexers are small and lexical on
purpose: keys are computed by `mkdocs build` and by CI, where there is no compiler to ask, and the same
text must give the same key under every Python the course runs on (3.11 here, 3.12 on the GPU machines),
which rules out the `tokenize` module (3.12 splits f-strings into parts).

- C, C++ and CUDA: a preprocessor directive keeps its end of line (`#define A 1` then `int b;` is not
  `#define A 1 int b;`); every other line break is layout. Line splices (backslash-newline) join first.
- Python: logical lines keep their ends and their nesting (INDENT and DEDENT markers), not their
  columns; lines inside brackets and after a backslash are one logical line.
- Anything else (data a program loads, a diff): its bytes.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

C_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp", ".hpp", ".cc"}
PYTHON_SUFFIXES = {".py"}


def _operators(spelled: str) -> str:
    """An alternation of operators, longest first, so that each is read whole (maximal munch)."""
    return "|".join(re.escape(op) for op in sorted(spelled.split(), key=len, reverse=True))


# Each lexer is one alternation, tried left to right at every position: layout, comments, then a
# token (a literal, a name, a number, an operator, or any other single character).
_C_LEXER = re.compile(r"""
    (?P<space>[ \t\r\f\v]+) | (?P<newline>\n) | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<token>(?:u8|[uUL])?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"    # raw string
             | "(?:\\.|[^"\\\n])*"? | '(?:\\.|[^'\\\n])*'?                    # string, character
             | [A-Za-z_$][\w$]*                                                # name (u8 of u8'a')
             | \.?\d(?:[eEpP][+-]|[\w.'])*                                     # pp-number: 1e-5f, 1'000
             | """ + _operators("<<= >>= ->* <=> ... :: -> ++ -- << >> <= >= == != && || += -= *= /= %= &= "
                                "|= ^= ## .*") + r""" | .)
""", re.S | re.X)
_PY_LEXER = re.compile(r"""
    (?P<space>[ \t\f\r]+) | (?P<newline>\n) | (?P<splice>\\\r?\n) | (?P<comment>\#[^\n]*)
  | (?P<token>(?:[rR][bBfF]?|[bBfF][rR]?|[uU])?                                 # string, with its prefix
                 (?:'{3}(?:\\.|.)*?(?:'{3}|\Z) | "{3}(?:\\.|.)*?(?:"{3}|\Z)
                  | '(?:\\.|[^'\\\n])*'? | "(?:\\.|[^"\\\n])*"?)
             | [A-Za-z_]\w*                                                    # name
             | \.?\d(?:[eE][+-]|[\w.])*                                        # number: 1e-5, 1_000, 2j
             | """ + _operators("**= //= >>= <<= ... -> := ** // << >> <= >= == != += -= *= /= %= &= |= ^= @=")
                   + r""" | .)
""", re.S | re.X)


def c_tokens(text: str) -> str:
    """The tokens of C, C++ or CUDA source, one space apart; each directive ends with a line break."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")  # line splices join first
    out: list[str] = []
    line_start, in_directive = True, False
    for m in _C_LEXER.finditer(text):
        if m["newline"]:
            if in_directive:
                out.append("\n")
                in_directive = False
            line_start = True
        elif m["token"] is not None:  # (a comment is one space, even across lines: a directive goes on)
            if line_start and m[0] == "#":
                in_directive = True
            line_start = False
            out.append(m[0])
    return " ".join(out).replace(" \n ", "\n").strip()


def _column(indent: str) -> int:
    column = 0
    for c in indent:
        column = (column // 8 + 1) * 8 if c == "\t" else column + 1
    return column


def python_tokens(text: str) -> str:
    """The tokens of Python source, one space apart, a logical line per line, nesting as INDENT and
    DEDENT markers (as Python's tokenizer places them)."""
    out: list[str] = []
    line: list[str] = []
    indents = [0]
    depth = 0  # open brackets: inside them a line break is layout
    at_line_start, column = True, 0
    for m in _PY_LEXER.finditer(text):
        token = m["token"]
        if m["newline"]:
            if depth == 0:
                if line:
                    out.append(" ".join(line))
                    line = []
                at_line_start, column = True, 0
        elif m["space"] is not None:
            if at_line_start:
                column = _column(m[0])
        elif token is not None:
            if at_line_start:  # the first token of a logical line: its nesting
                if column > indents[-1]:
                    indents.append(column)
                    line.append("INDENT")
                while column < indents[-1]:
                    indents.pop()
                    line.append("DEDENT")
                at_line_start = False
            if token in ("(", "[", "{"):
                depth += 1
            elif token in (")", "]", "}") and depth > 0:
                depth -= 1
            line.append(token)
    if line:
        out.append(" ".join(line))
    if len(indents) > 1:
        out.append(" ".join(["DEDENT"] * (len(indents) - 1)))
    return "\n".join(out)


def _blank_comment(m: re.Match) -> str:
    """A comment becomes a space and the line breaks it spanned; anything else stays as it is."""
    return " " + "\n" * m[0].count("\n") if m["comment"] else m[0]


def without_comments(text: str, suffix: str) -> str:
    """Source text with its comments blanked out and its layout kept: what a file includes, imports or
    names is read from this (an `#include` or a path in a comment is not a file the program uses)."""
    if suffix in C_SUFFIXES:
        return _C_LEXER.sub(_blank_comment, text)
    if suffix in PYTHON_SUFFIXES:
        return _PY_LEXER.sub(_blank_comment, text)
    return text


def computed_text(text: str, suffix: str) -> str | None:
    """The normal form of source text with this file suffix, or None for a file that is not source."""
    if suffix in C_SUFFIXES:
        return c_tokens(text)
    if suffix in PYTHON_SUFFIXES:
        return python_tokens(text)
    return None


def _per_file_version(read):
    """read(path), computed once for each version of the file (its modification time and size): the
    keys of a thousand items read the same few headers again and again."""
    cached = lru_cache(maxsize=4096)(lambda path, _mtime_ns, _size: read(path))

    def per_version(path: Path):
        stat = path.stat()
        return cached(path, stat.st_mtime_ns, stat.st_size)
    per_version.__doc__ = read.__doc__
    return per_version


@_per_file_version
def code_of(path: Path) -> str:
    """without_comments of a file."""
    return without_comments(path.read_text(errors="replace"), path.suffix)


@_per_file_version
def computed_bytes(path: Path) -> bytes:
    """What a file contributes to a key: the normal form of a source, the bytes of anything else."""
    return computed_content(path.name, path.read_bytes())


def computed_content(name: str, data: bytes) -> bytes:
    """computed_bytes of content already read, named by its file name."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data
    form = computed_text(text, Path(name).suffix)
    return data if form is None else form.encode()


@lru_cache(maxsize=64)
def python_tokens_cached(text: str) -> str:
    """python_tokens of a text the harness hashes again and again (judge()'s source)."""
    return python_tokens(text)


def block_text(syntax: str, code: str) -> str:
    """A page block as its key sees it: Python by its tokens; a shell block by its lines, less blank
    lines and the white space around them (a shell's comments stay: `#` inside a heredoc or a string
    is not one)."""
    if syntax == "python":
        return python_tokens(code)
    return "\n".join(line.strip() for line in code.splitlines() if line.strip())
