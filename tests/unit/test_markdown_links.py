"""Every relative link and image in the repository's Markdown resolves: the file or folder exists, and an
anchor into a Markdown file names one of its headings. http(s) and mail links are not fetched."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
COMMENT = re.compile(r"<!--.*?-->", re.S)
# [text](target) and ![alt](target); the text may hold one level of brackets ([`x`](y), [![img](a)](b))
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML_SRC = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']", re.I)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)     # http:, https:, mailto:, ...


def markdown_files() -> list[Path]:
    """The Markdown files git knows of: tracked, and new ones not ignored."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
                             cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    names = sorted({n for n in out.decode().split("\0") if n})
    return [REPO / n for n in names if (REPO / n).is_file()]


def prose(text: str, spans: bool = True) -> str:
    """The text without fenced code blocks, code spans (unless spans is False) and HTML comments, where a
    link is not a link."""
    kept, fenced = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            kept.append(CODE_SPAN.sub("", line) if spans else line)
    return COMMENT.sub("", "\n".join(kept))


def links(text: str) -> list[str]:
    body = prose(text)
    found = [m.group(1) for m in INLINE.finditer(body)]
    found += [m.group(1) for m in REFERENCE.finditer(body)]
    found += [m.group(1) for m in HTML_SRC.finditer(body)]
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in found]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (links as their text, no HTML), lower case, every character
    but letters, digits, '_', '-' and spaces dropped, spaces to hyphens."""
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    h = re.sub(r"<[^>]+>", "", h).strip().lower()
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path.read_text(encoding="utf-8"), spans=False).splitlines():
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def problems(path: Path) -> list[str]:
    """What does not resolve among one file's relative links, as 'target: why'."""
    bad = []
    for target in links(path.read_text(encoding="utf-8")):
        if not target or EXTERNAL.match(target):
            continue
        file_part, _, fragment = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        if file_part:
            dest = (REPO / file_part.lstrip("/")) if file_part.startswith("/") else (path.parent / file_part)
        else:
            dest = path
        dest = dest.resolve()
        if not dest.exists():
            bad.append(f"{target}: {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest} does not exist")
            continue
        if fragment and dest.is_file() and dest.suffix.lower() == ".md" and not fragment.startswith("L"):
            if unquote(fragment).lower() not in anchors(dest):
                bad.append(f"{target}: no heading #{fragment} in {dest.relative_to(REPO)}")
    return bad


FILES = markdown_files()


def test_there_is_markdown_to_check():
    assert REPO / "README.md" in FILES


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REPO)) for p in FILES])
def test_relative_links_resolve(path: Path):
    assert problems(path) == []


def test_the_checker_finds_what_it_should(tmp_path, monkeypatch):
    """Links and images count, code and external links do not, anchors are checked against headings."""
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## What you get (in short)\n")
    (tmp_path / "pic.png").write_bytes(b"")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [anchor](docs/a.md#what-you-get-in-short) ![img](pic.png) [web](https://example.com/x)\n"
        "[root](/docs/a.md) [self](#top) [`code` text](docs/a.md) [span](#base-a-local-base)\n"
        "`[not a link](nowhere.md)`\n```\n[nor this](nowhere.md)\n```\n<!-- [hidden](nowhere.md) -->\n"
        "[gone](missing.md) ![gone too](missing.png) [bad anchor](docs/a.md#nope)\n\n[ref]: docs/missing-ref.md\n"
        "# Top\n\n## `base/`: a local base\n")
    found = problems(page)
    assert [b.split(":")[0] for b in found] == ["missing.md", "missing.png", "docs/a.md#nope", "docs/missing-ref.md"]


def test_the_readme_is_a_front_door_of_at_most_150_lines():
    # detail belongs in docs/ and the stage READMEs, which the README links
    assert len((REPO / "README.md").read_text().splitlines()) <= 150
