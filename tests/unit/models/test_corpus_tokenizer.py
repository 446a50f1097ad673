"""Corpus manifest and tokenizer: pinned, deterministic, and loss-free."""

import json
from pathlib import Path

import pytest

from refengine.train import corpus, tokenizer

REPO = Path(__file__).resolve().parents[3]
SHIPPED_TOKENIZER = REPO / "models" / "qwen3-stdlib-13m"


@pytest.fixture()
def tree(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "a.py").write_text("import os\n\n\ndef f(x):\n    return x  # é ✓\n")
    (tmp_path / "pkg" / "b.py").write_text('"""Doc."""\nclass B:\n\tpass\n')
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "c.py").write_text("x = 1\n")
    (tmp_path / "bad.py").write_bytes(b"\xff\xfe not utf-8")
    return tmp_path


def test_manifest_lists_hashes_and_splits(tree, tmp_path):
    m = corpus.build_manifest(tree)
    assert [f["path"] for f in m["files"]] == ["a.py", "pkg/b.py"]  # no site-packages, no non-UTF-8
    assert m["hash"] == corpus.build_manifest(tree)["hash"]
    path = tmp_path / "manifest.json"
    corpus.write_manifest(m, path)
    assert corpus.load_manifest(path)["hash"] == m["hash"]
    edited = json.loads(path.read_text())
    edited["files"][0]["split"] = "heldout" if edited["files"][0]["split"] == "train" else "train"
    path.write_text(json.dumps(edited))
    with pytest.raises(ValueError, match="manifest.json: field 'hash'"):
        corpus.load_manifest(path)


def test_read_texts_names_a_changed_file(tree):
    m = corpus.build_manifest(tree)
    (tree / "pkg" / "b.py").write_text("changed\n")
    with pytest.raises(ValueError, match="b.py: sha256 differs"):
        corpus.read_texts(m, tree)


def test_split_is_by_path_and_stable():
    assert corpus.split_of("json/decoder.py") == corpus.split_of("json/decoder.py")
    m = json.loads((REPO / "refengine" / "train" / "corpus_manifest.json").read_text())
    held = [f for f in m["files"] if f["split"] == "heldout"]
    assert 0 < len(held) < 0.06 * len(m["files"])
    assert all(corpus.split_of(f["path"]) == f["split"] for f in m["files"])


def test_tokenizer_round_trips_the_corpus():
    """Every held-out file of the pinned corpus, plus every 10th training file, where this machine
    has the same CPython; awkward text always."""
    tok = tokenizer.load(SHIPPED_TOKENIZER)
    texts = ["", " \t\n  trailing  \n", "naïve café ✓ 日本語 🐍", "<|bos|> not special in text?", "\r\n\x00\x7f"]
    m = json.loads((REPO / "refengine" / "train" / "corpus_manifest.json").read_text())
    root = Path(m["root"])
    picked = [f for i, f in enumerate(m["files"]) if f["split"] == "heldout" or i % 10 == 0]
    matching = [f for f in picked if (root / f["path"]).is_file()
                and corpus.hashlib.sha256((root / f["path"]).read_bytes()).hexdigest() == f["sha256"]]
    texts += [(root / f["path"]).read_text() for f in matching]
    for t in texts:
        assert tok.decode(tok.encode(t, add_special_tokens=False).ids, skip_special_tokens=False) == t
    if not matching:
        pytest.skip(f"{root}: not the pinned CPython {m['python']}; only the awkward strings were checked")


def test_specials_and_template():
    tok = tokenizer.load(SHIPPED_TOKENIZER)
    assert tok.get_vocab_size() == tokenizer.VOCAB_SIZE
    assert tokenizer.special_ids(tok) == {"eos": 0, "bos": 1, "im_start": 2, "im_end": 3, "mask": 4}
    assert tok.encode("<|mask|>", add_special_tokens=False).ids == [4]
    text = tokenizer.render_chat([{"role": "user", "content": "  sum a list  "},
                                  {"role": "assistant", "content": "def s(x):\n    return sum(x)"}])
    assert text == '<|bos|>"""sum a list\n"""\n\ndef s(x):\n    return sum(x)\n\n'
