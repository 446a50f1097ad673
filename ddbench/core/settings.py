"""Each arm's serving settings as it runs: the value, and why it is that value.

A fair comparison runs each arm as it would be deployed. Where the build forces a setting on some
arms (DDTree needs page size 1 and, for a real tree, the triton attention backend), only those arms
get it; every other arm keeps the server's default or the profile's choice. SGLang runs every arm,
AR, DFLASH and DDTree alike, on its overlap scheduler (speculative decoding on the V2 worker). A
switch held equal for symmetry alone is an ablation arm (`ablation:`, e.g. the overlap held off),
never the headline. The launch commands (containers/launch.py) read this one table, and a run's
manifest records it (`arm_settings`), whose differences page 1 lists; a recorded run keeps the
settings it was launched with.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

DEFAULT = "server default"


@dataclass(frozen=True)
class Setting:
    name: str        # 'overlap scheduler', 'page size', 'attention backend', 'CUDA graphs'
    value: str       # 'on', 'off', '1', 'triton', 'server default'
    reason: str      # why this arm has this value


def needs_triton(arm) -> bool:
    """A DDTree tree wider than its chain verifies with a tree mask: triton's attention backend."""
    return arm.kind == "tree" and arm.tree_budget > arm.block_size - 1


def overlap(profile, arm) -> Setting | None:
    """SGLang's overlap scheduler (None on a server that has none)."""
    if profile.backend.kind != "sglang":
        return None
    name = "overlap scheduler"
    if arm.overlap_scheduler is not None:
        on = arm.overlap_scheduler
        return Setting(name, "on" if on else "off", arm.ablation or f"set by arm '{arm.id}'")
    if not profile.runtime.overlap_scheduler:
        return Setting(name, "off", "runtime.overlap_scheduler false: held off for every arm")
    return Setting(name, "on", "SGLang's default" + ("" if arm.kind == "ar" else " (the V2 speculative worker)"))


def page_size(profile, arm) -> Setting | None:
    if profile.backend.kind != "sglang":
        return None
    if arm.kind in ("chain", "tree"):
        return Setting("page size", "1", "DDTree's KV layout needs page size 1")
    if profile.runtime.page_size:
        return Setting("page size", str(profile.runtime.page_size), "runtime.page_size")
    return Setting("page size", DEFAULT, "SGLang's default")


def attention(profile, arm) -> Setting | None:
    if profile.backend.kind != "sglang":
        return None
    rt = profile.runtime
    if rt.attention_backend:
        return Setting("attention backend", rt.attention_backend,
                       rt.attention_backend_reason or "runtime.attention_backend, for every arm")
    if needs_triton(arm):
        return Setting("attention backend", "triton", "a DDTree tree verify needs triton's tree mask")
    return Setting("attention backend", DEFAULT, "the server's default for the GPU")


def graphs(profile, arm) -> Setting | None:
    if profile.placement.device != "cuda" or profile.backend.kind == "external":
        return None
    on = profile.cuda_graphs(arm)
    why = f"arm '{arm.id}'" if arm.cuda_graphs is not None else "runtime.cuda_graphs"
    return Setting("CUDA graphs", "on" if on else "off", why)


def arm_settings(profile, arm) -> list[Setting]:
    """The settings one arm's server runs with, in a fixed order."""
    return [s for s in (overlap(profile, arm), page_size(profile, arm), attention(profile, arm),
                        graphs(profile, arm)) if s is not None]


def record(profile) -> dict[str, list[dict]]:
    """What a run's manifest keeps (`arm_settings`): each arm's settings as it was launched."""
    return {a.id: [asdict(s) for s in arm_settings(profile, a)] for a in profile.arms}


def differing_lines(recorded: dict[str, list[dict]]) -> list[str]:
    """One line per setting whose value differs between the arms of a record: 'overlap scheduler: on for ar,
    linear-b16 (SGLang's default); off for linear-b16-no-overlap (overlap scheduler held off ...)'."""
    names = list(dict.fromkeys(s["name"] for row in recorded.values() for s in row))
    lines = []
    for name in names:
        col = {arm: s for arm, row in recorded.items() for s in row if s["name"] == name}
        if len({s["value"] for s in col.values()}) < 2:
            continue
        groups: dict[tuple[str, str], list[str]] = {}
        for arm, s in col.items():
            groups.setdefault((s["value"], s["reason"]), []).append(arm)
        lines.append(f"{name}: " + "; ".join(f"{v} for {', '.join(arms)} ({why})" for (v, why), arms in groups.items()))
    return lines
