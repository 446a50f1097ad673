"""Which build serves which comparison: a profile's backend decides the arm kinds its servers can express.

Stock SGLang (backend.ddtree unset) has DFLASH but no DDTREE algorithm: it compares AR with linear DFlash.
Chains and trees need the pinned DDTree fork with ddbench's patches (backend.ddtree: fork), which every SGLang
image, offline bundle and `just sglang-venv` that ddbench builds carries. The reference engine serves every kind.
"""

from __future__ import annotations

FORK_BUILDS = "ddbench's SGLang images, the offline GPU bundles or `just sglang-venv`"


def served(kind: str, ddtree: str | None = None) -> tuple[str, ...]:
    """The arm kinds a backend of this kind and DDTree build can serve; () where ddbench cannot tell (servers
    it did not start)."""
    if kind == "sglang" and ddtree != "fork":
        return ("ar", "linear")
    if kind == "external":
        return ()
    return ("ar", "linear", "chain", "tree")


def kinds(profile) -> tuple[str, ...]:
    return served(profile.backend.kind, profile.backend.ddtree)


def describe(profile) -> str:
    """One line for `check`: the build, and the comparisons it can and cannot make."""
    b = profile.backend
    version = b.version or "of the server's environment"
    if b.kind == "refengine":
        return "the reference engine: every arm kind (ar, linear, chain, tree)"
    if b.kind == "external":
        return "servers ddbench did not start: each arm is what its server serves"
    if b.ddtree == "pr29907":
        return (f"the retired DDTree PR overlay, which no build ddbench ships serves (its recorded runs still load): "
                f"ar and linear (DFLASH) only; chain and tree arms need backend.ddtree: fork ({FORK_BUILDS})")
    if b.ddtree == "fork":
        return (f"SGLang {version} + the pinned DDTree fork with ddbench's patches: ar, linear (DFLASH), chain "
                f"and tree arms; the tree-vs-chain comparisons need this build")
    return (f"stock SGLang {version}: ar and linear (DFLASH) only, AR-vs-DFLASH comparisons; chain and tree arms "
            f"need backend.ddtree: fork ({FORK_BUILDS})")


def unservable(profile) -> list[str]:
    """Arms the build cannot serve, each naming the arm and the build it needs."""
    can = kinds(profile)
    if not can:
        return []
    return [f"arms[{i}] '{a.id}': a {a.kind} arm; {describe(profile)}"
            for i, a in enumerate(profile.arms) if a.kind not in can]
