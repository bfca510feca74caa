"""Every reference to a project document resolves (`docs/ARCHITECTURE.md` decision 24).

A reference is a path ending in `.md` (`docs/ABI.md`, `README.md`, ...) in any text file of the
repository, optionally followed by sections (`§3.2`, `§5.2 and §7.8`, `section 1`, or the old
bare `3.2`) or decisions (`decision 6`, `decisions 12-24`). It must name a file inside the
repository, written as its path from the repository root (so a bare file name of a document
fails: the documents live under docs/); a Markdown link target is resolved from the
linking file's folder. Every cited section needs a numbered heading (`## 3.` / `### 3.2`) and every
cited decision a `### Decision N` heading in that file. In Markdown files, a `§x.y` that follows no
document name refers to the file itself. Nothing may point at the shared folder beside the
repository (`..` + `/shared`).

Run as a script to list every problem: `python tests/python/test_doc_references.py`.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]

SKIP_DIRS = {".git", ".devcarry", "__pycache__", ".pytest_cache", "node_modules", ".mypy_cache"}
BUILD_MARKERS = ("CMakeCache.txt", "pyvenv.cfg")   # build trees and virtual environments
MAX_FILE_BYTES = 2 << 20

# A path ending in .md that does not start in the middle of a longer path or a URL.
DOC = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)*[\w-][\w.-]*\.md)(?![\w-])")
# A line break inside a comment: blanks, at most one newline and the next line's comment leader.
WRAP = r"[ \t]*(?:\n[ \t]*(?://+|#+|\*+|--)?[ \t]*)?"
# Between a document name and its section list: closing quotes/brackets, then a possible wrap.
GAP = re.compile(r"[`'\"*)\]]*" + WRAP)
KEYWORD = re.compile(r"(§§?|sections?\b|decisions?\b)[ \t]*", re.IGNORECASE)
NUMBER = re.compile(r"\d+(?:\.\d+)*(?!\w)")
OLD_STYLE_NUMBER = re.compile(r"\d+\.\d+(?:\.\d+)*(?!\w)")  # a name then `3.2`, no keyword
JOIN = re.compile(WRAP + r"(?:,|/|&|\band\b|\bor\b)" + WRAP, re.IGNORECASE)
RANGE = re.compile(r"[ \t]*(?:-|–|—|\bto\b)[ \t]*", re.IGNORECASE)
BARE_SECTION = re.compile(r"(?<![\w.])§§?[ \t]*(?=\d)")
SECTION_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?:§[ \t]*)?(\d+(?:\.\d+)*)\.?(?=\s|$)")
DECISION_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+decision[ \t]+(\d+)\b", re.IGNORECASE)
SHARED = ".." + "/shared"   # spelled apart so that this file does not match itself
OUTSIDE = re.compile(re.escape(SHARED) + r"\b")


@dataclass(frozen=True)
class Reference:
    source: Path          # the citing file
    line: int
    target: str           # as written
    kind: str = ""        # "", "section" or "decision"
    number: str = ""

    def where(self, root: Path) -> str:
        cited = f"{self.target} {self.kind} {self.number}".rstrip()
        return f"{self.source.relative_to(root)}:{self.line}: {cited}"


@dataclass
class Headings:
    sections: Set[str]
    decisions: Set[str]


def text_files(root: Path) -> Iterator[Path]:
    """Every text file of the checkout, minus version control, build trees and venvs."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not any((here / d / m).exists() for m in BUILD_MARKERS))
        for name in sorted(files):
            path = here / name
            try:
                if path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
                    continue
                head = path.read_bytes()[:8192]
            except OSError:
                continue
            if b"\0" not in head:
                yield path


def _numbers(text: str, pos: int, kind: str) -> Tuple[List[Tuple[str, str]], int]:
    """The section/decision list starting at pos (`3.2`, `5.2 and §7.8`, `12-24`, `6 and 7`) and
    the position after it."""
    found: List[Tuple[str, str]] = []
    while True:
        number = NUMBER.match(text, pos)
        if not number:
            return found, pos
        found.append((kind, number.group()))
        pos = number.end()
        dash = RANGE.match(text, pos)
        end = dash and NUMBER.match(text, dash.end())
        if end and kind == "decision" and "." not in number.group() + end.group():
            first, last = int(number.group()), int(end.group())
            found += [(kind, str(n)) for n in range(first + 1, last + 1)]
            pos = end.end()
        joined = JOIN.match(text, pos)
        if not joined or not (KEYWORD.match(text, joined.end()) or
                              NUMBER.match(text, joined.end())):
            return found, pos
        pos = joined.end()
        keyword = KEYWORD.match(text, pos)
        if keyword:
            kind = "decision" if keyword.group(1).lower().startswith("decision") else "section"
            pos = keyword.end()


def references(path: Path, text: str) -> List[Reference]:
    """Every document reference in one file, one Reference per cited section or decision (a
    reference citing none yields one with an empty kind)."""
    line_of = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    found: List[Reference] = []
    consumed: List[Tuple[int, int]] = []  # spans of section lists that follow a document name
    for match in DOC.finditer(text):
        target, line = match.group(1), line_of(match.start())
        pos = GAP.match(text, match.end()).end()
        keyword = KEYWORD.match(text, pos)
        cited: List[Tuple[str, str]] = []
        if keyword:
            kind = "decision" if keyword.group(1).lower().startswith("decision") else "section"
            cited, end = _numbers(text, keyword.end(), kind)
            consumed.append((pos, end))
        elif OLD_STYLE_NUMBER.match(text, pos):
            cited, end = _numbers(text, pos, "section")
            consumed.append((pos, end))
        link = text[max(0, match.start() - 2):match.start()] == "]("
        target = f"./{target}" if link and not target.startswith(".") else target
        found.append(Reference(path, line, target))
        found += [Reference(path, line, target, kind, number) for kind, number in cited]
    if path.suffix == ".md":  # a bare § refers to the file itself
        for match in BARE_SECTION.finditer(text):
            if any(start <= match.start() < end for start, end in consumed):
                continue
            cited, end = _numbers(text, match.end(), "section")
            consumed.append((match.start(), end))
            found += [Reference(path, line_of(match.start()), f"/{path.name}", kind, number)
                      for kind, number in cited]
    return found


def headings(path: Path) -> Headings:
    sections, decisions, fenced = set(), set(), False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if (m := SECTION_HEADING.match(line)):
            sections.add(m.group(1))
        if (m := DECISION_HEADING.match(line)):
            decisions.add(m.group(1))
    return Headings(sections, decisions)


def resolve(root: Path, ref: Reference) -> Optional[Path]:
    """The file a reference names, or None when it is not a file inside the repository."""
    if ref.target.startswith("/"):  # the citing file itself
        return ref.source
    base = ref.source.parent if ref.target.startswith("./") else root
    path = (base / ref.target).resolve()
    try:
        path.relative_to(root.resolve())
    except ValueError:
        return None
    return path if path.is_file() else None


def check(root: Path) -> Tuple[List[str], int]:
    """(problems, number of references checked) for the tree under root."""
    problems: List[str] = []
    count = 0
    cache: Dict[Path, Headings] = {}
    for path in text_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in OUTSIDE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path.relative_to(root)}:{line}: points at {SHARED}, outside the "
                            "repository; state the fact here or cite docs/")
        missing: Set[Tuple[int, str]] = set()
        for ref in references(path, text):
            count += 1
            target = resolve(root, ref)
            if target is None:
                if (ref.line, ref.target) in missing:
                    continue  # reported once per line and document
                missing.add((ref.line, ref.target))
                problems.append(f"{ref.where(root)}: no such file in the repository (write the "
                                "path from the repository root; documents live under docs/)")
                continue
            if not ref.kind:
                continue
            if target not in cache:
                cache[target] = headings(target)
            known = cache[target].sections if ref.kind == "section" else cache[target].decisions
            if ref.number not in known:
                problems.append(f"{ref.where(root)}: {target.relative_to(root.resolve())} has no "
                                f"heading for {ref.kind} {ref.number}")
    return problems, count


# ------------------------------------------------------------------------------------------------
# The checker on a synthetic tree: it must catch each kind of bad reference. Sample texts spell the
# suffix through MD so that this file itself holds no reference to a missing section.
MD = ".md"


def _tree(tmp_path: Path, source: str) -> Tuple[List[str], int]:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / f"ABI{MD}").write_text(
        "# ABI\n## 3. Rules\n### 3.2 Devices\n### 3.10 Threads\n```\n## 9. in a code block\n```\n"
        "See §3.2 and §3.10.\n")
    (tmp_path / "docs" / f"ARCHITECTURE{MD}").write_text(
        "# Architecture\n## Decisions\n### Decision 6. One engine\n### Decision 7. Rows\n"
        "### Decision 8. Embeddings\n")
    (tmp_path / f"README{MD}").write_text(f"# Project\nThe contract: docs/ABI{MD} §3.2.\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "code.cpp").write_text(source)
    return check(tmp_path)


def test_checker_accepts_references_that_resolve(tmp_path):
    problems, count = _tree(tmp_path, (
        f"// docs/ABI{MD} §3.2 and §3.10; `docs/ABI{MD}` section 3\n"
        f"// docs/ARCHITECTURE{MD} decisions 6-8, docs/ARCHITECTURE{MD} decision 7\n"
        f"// see docs/ABI{MD}\n\n// §9.9 in code names no document and is not checked\n"
        f"// documented in README{MD}; https://example.org/x/docs/NOPE{MD} is a URL\n"
        f"// wrapped: docs/ABI{MD}\n// §3.2 (still checked)\n"))
    assert problems == []
    code = tmp_path / "src" / "code.cpp"
    cited = [(r.target, r.kind, r.number) for r in references(code, code.read_text())]
    abi, arch = f"docs/ABI{MD}", f"docs/ARCHITECTURE{MD}"
    assert cited == [
        (abi, "", ""), (abi, "section", "3.2"), (abi, "section", "3.10"),
        (abi, "", ""), (abi, "section", "3"),
        (arch, "", ""), (arch, "decision", "6"), (arch, "decision", "7"), (arch, "decision", "8"),
        (arch, "", ""), (arch, "decision", "7"),
        (abi, "", ""), (f"README{MD}", "", ""),
        (abi, "", ""), (abi, "section", "3.2")]
    assert count == len(cited) + 4  # and two references in each of docs/ABI and README


def test_checker_rejects_each_kind_of_bad_reference(tmp_path):
    problems, _ = _tree(tmp_path, (
        f"// 1 bare: ABI{MD} §3.2\n"
        f"// 2 outside: DESIGN{MD} decision 6\n"
        f"// 3 missing section: docs/ABI{MD} §4.4\n"
        f"// 4 heading only in a code block: docs/ABI{MD} section 9\n"
        f"// 5 second of a list: docs/ABI{MD} §3.2 and §7.8\n"
        f"// 6 missing decision: docs/ARCHITECTURE{MD} decision 12\n"
        f"// 7 end of a range: docs/ARCHITECTURE{MD} decisions 6-9\n"
        f"// 8 old style: docs/ABI{MD} 6.4\n"
        f"// 9 escapes the repository: {SHARED}/DEVICE{MD}\n"
        f"// 10 wrapped: docs/ABI{MD}\n//   §5.1\n"
        f"// 12 wrapped list: docs/ABI{MD} §3.2\n// and §6.1\n"))
    flagged = sorted({int(p.split(":")[1]) for p in problems})
    assert flagged == list(range(1, 11)) + [12], "\n".join(problems)
    assert any("no heading for section 4.4" in p for p in problems)
    assert any("no heading for decision 12" in p for p in problems)
    assert any("no heading for decision 9" in p for p in problems)
    assert any("no heading for section 5.1" in p for p in problems)
    assert any("outside the repository" in p for p in problems)


def test_checker_resolves_bare_sections_of_markdown_against_the_file_itself(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / f"GUIDE{MD}").write_text("# Guide\n## 1. Start\nSee §1 and §2.\n")
    problems, _ = check(tmp_path)
    assert len(problems) == 1 and "section 2" in problems[0], problems


def test_every_document_reference_in_the_repository_resolves():
    problems, count = check(ROOT)
    assert not problems, "unresolved document references:\n" + "\n".join(problems)
    # The scan must really have found the project's references (the code cites docs/ABI.md and
    # docs/ARCHITECTURE.md dozens of times); a scan that finds none checks nothing.
    assert count >= 100, count


if __name__ == "__main__":
    found, total = check(ROOT)
    print("\n".join(found) or f"all {total} document references resolve")
    sys.exit(1 if found else 0)
