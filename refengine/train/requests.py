"""Chat-shaped prompts from the training split, so the drafter also learns what the target writes
after a request rendered through the chat template, not only after a cut of a file.

A request is the first paragraph of a docstring in a training file (module, class or function),
once as written and once as an instruction ("Write a Python function that ..."). Both go through
the same chat template the server uses. Held-out files and the load-test prompts are never read.
"""

from __future__ import annotations

import ast

import numpy as np
from tokenizers import Tokenizer

from refengine.train import tokens
from refengine.train.tokenizer import render_chat

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
ASK = {ast.Module: "Write a Python module: {}", ast.ClassDef: "Write a Python class: {}",
       ast.FunctionDef: "Write a Python function {}", ast.AsyncFunctionDef: "Write a Python coroutine {}"}


def docstring_requests(texts: list[str], min_chars: int = 20, max_chars: int = 200) -> list[str]:
    """Distinct requests, sorted, so the set is the same on every machine with the same corpus."""
    out = set()
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:  # a few stdlib test files hold deliberately broken code
            continue
        for node in ast.walk(tree):
            if type(node) not in ASK or not (doc := ast.get_docstring(node)):
                continue
            first = " ".join(doc.strip().split("\n\n")[0].split())
            if min_chars <= len(first) <= max_chars and first[0].isalpha():
                out.add(first)
                out.add(ASK[type(node)].format(_clause(first) if type(node) in FUNCTIONS else first))
    return sorted(out)


def _clause(doc: str) -> str:
    """'Returns x.' -> 'that returns x.'; 'Return x.' -> 'to return x.' (docstrings are written both ways)."""
    word, _, rest = doc.partition(" ")
    if not word[1:].islower():  # an acronym or a name leads: keep it as written
        return f"for: {doc}"
    lead = word.lower()
    return f"that {lead} {rest}" if lead.endswith("s") and not lead.endswith("ss") else f"to {lead} {rest}"


def encode(tok: Tokenizer, requests: list[str], max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(stream, starts) like a token split: each request's rendered ids, those longer than max_tokens dropped."""
    encs = tok.encode_batch([render_chat([{"role": "user", "content": r}]) for r in requests],
                            add_special_tokens=False)
    return tokens.pack([np.asarray(e.ids, dtype=np.uint16) for e in encs if len(e.ids) <= max_tokens])
