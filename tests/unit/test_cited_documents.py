"""Code cites only documents in the repository: every '*.md' a module, profile, template or recipe names is
a file here (docs/metrics.md, a README), never a note that lives elsewhere."""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITED = re.compile(r"(?<![\w/.-])([\w./-]*[A-Za-z0-9_-]\.md)\b")


def test_every_cited_document_is_in_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    names = {Path(f).name for f in files} | set(files)
    missing = []
    for f in files:
        if f.startswith("tests/") or not f.endswith((".py", ".yaml", ".j2", ".toml")) and Path(f).name != "justfile":
            continue   # the tests make documents of their own
        for n, line in enumerate((REPO / f).read_text(errors="replace").splitlines(), start=1):
            for doc in CITED.findall(line):
                if "://" in line[:line.find(doc)][-12:] or doc.startswith("docs/DDTREE"):
                    continue   # a URL's page, or another project's document named with its repository
                if doc not in names and Path(doc).name not in names:
                    missing.append(f"{f}:{n}: {doc}")
    assert missing == []
