"""Corpus -> token streams: uint16 arrays, one document after another as <|bos|> text <|endoftext|>."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from refengine.train.tokenizer import BOS, EOS


def encode_docs(tok: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The stream and each document's start offset in it."""
    if tok.get_vocab_size() > np.iinfo(np.uint16).max:
        raise ValueError(f"vocabulary of {tok.get_vocab_size()} does not fit uint16 token arrays")
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    encs = tok.encode_batch(texts, add_special_tokens=False)
    return pack([np.asarray([bos, *e.ids, eos], dtype=np.uint16) for e in encs])


def pack(pieces: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Token sequences -> (stream, each one's start offset): the layout of every token split."""
    if not pieces:
        return np.zeros(0, np.uint16), np.zeros(0, np.int64)
    starts = np.cumsum([0] + [len(p) for p in pieces[:-1]]).astype(np.int64)
    return np.concatenate(pieces), starts


def unpack(stream: np.ndarray, starts: np.ndarray) -> list[np.ndarray]:
    """pack's inverse: the split's sequences, one array each."""
    return np.split(stream, starts[1:]) if len(starts) else []


def save(out_dir: Path, split: str, stream: np.ndarray, starts: np.ndarray) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / f"{split}.npy", stream)
    np.save(out_dir / f"{split}_starts.npy", starts)


def load(out_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    path = out_dir / f"{split}.npy"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no token stream; run `python -m refengine.train tokens` first")
    return np.load(path), np.load(out_dir / f"{split}_starts.npy")
