"""What analysis needs from manifest.json, read strictly where it matters (the profile), leniently
elsewhere: a missing host detail is shown as 'not recorded', never invented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ddbench.core.profile import Profile
from ddbench.core.results import read_json
from ddbench.core.validation import first_error


class Git(BaseModel):
    model_config = ConfigDict(extra="allow")
    sha: str | None = None
    dirty: bool | None = None


class Host(BaseModel):
    model_config = ConfigDict(extra="allow")
    cpu: str | None = None
    cpu_id: str | None = None   # vendor family/model/stepping (ddbench.core.manifest.cpu_id)
    cores: int | None = None
    memory_bytes: int | None = None
    os: str | None = None
    gpus: list[Any] = []
    driver: str | None = None


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")
    profile: Profile
    profile_digest: str | None = None
    prompt_set_digest: str | None = None
    models: dict[str, Any] = {}   # role -> {path, sha256, files}: the checkpoints' contents when recorded
    git: Git = Git()
    host: Host = Host()
    packages: dict[str, str] = {}
    seeds: dict[str, Any] = {}
    started: str | None = None
    ended: str | None = None
    images: dict[str, str] | list[Any] = {}

    def weights(self, role: str) -> str | None:
        """The recorded digest of a checkpoint's contents (None: a hub id, or a run from before they were recorded)."""
        return (self.models.get(role) or {}).get("sha256")

    @property
    def sglang_build(self) -> dict:
        """The SGLang source that served the run, as its bundle layer recorded it (repo, commit,
        cherry-picks, head); {} for a run not served from an offline bundle of the DDTree fork."""
        return ((self.model_extra or {}).get("sglang_source") or {}).get("source") or {}

    @property
    def digest_matches(self) -> bool | None:
        """Whether profile_digest is the hash of the profile it travels with."""
        return None if self.profile_digest is None else self.profile_digest == self.profile.digest()


def twin(manifest) -> dict | None:
    """The record of the one twin a run served (ddbench.core.manifest.twin_record: shape, seed, its files' and its
    source pair's digests), or None. Takes any object with a `models` mapping, a Manifest or a stand-in."""
    rec = (getattr(manifest, "models", None) or {}).get("twin")
    return rec if isinstance(rec, dict) else None


class ManifestError(ValueError):
    pass


def load_manifest(path: Path) -> Manifest:
    data = read_json(path)
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        raise ManifestError(f"{path}: {first_error(e)}") from None
