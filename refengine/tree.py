"""DDTree: build a draft tree from per-depth marginals, and walk it against the target's choices.

Node 0 is the root (the last committed token); nodes 1..N are drafts in pop order, which is
a topological order (a parent always precedes its children).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass
class Tree:
    tokens: list[int]  # per node, root included
    parents: list[int]  # parent node per node (root: -1)
    depths: list[int]  # root: 0
    children: list[dict[int, int]]  # per node: token -> child node

    @property
    def size(self) -> int:
        return len(self.tokens) - 1

    def visible(self) -> np.ndarray:
        """[N+1, N+1] bool: a node sees its ancestors and itself."""
        n = len(self.tokens)
        vis = np.zeros((n, n), dtype=bool)
        for i, p in enumerate(self.parents):
            if p >= 0:
                vis[i] = vis[p]
            vis[i, i] = True
        return vis


def build(root: int, values: list[list[float]], ids: list[list[int]], budget: int,
          depth_bonus: float = 0.0) -> Tree:
    """Best-first tree from each depth's top-k log-probs, ranked (values, ids: [L][k]; depth d uses
    row d-1): the `budget` most probable prefixes.

    A prefix scores the sum of its tokens' log-probs plus `depth_bonus` per edge. Each depth
    offers its top-k tokens; a node's children are the next depth's, ranked the same way.
    """
    depth_max, k = len(values), len(values[0])
    tree = Tree([root], [-1], [0], [{}])
    # heap entries: (-score, tiebreak, depth, rank, parent node, parent score)
    heap = [(-(values[0][0] + depth_bonus), 0, 1, 0, 0, 0.0)]
    count = 1
    while heap and tree.size < budget:
        neg, _, d, r, parent, parent_score = heapq.heappop(heap)
        node = len(tree.tokens)
        token = ids[d - 1][r]
        tree.tokens.append(token)
        tree.parents.append(parent)
        tree.depths.append(d)
        tree.children.append({})
        tree.children[parent][token] = node
        if r + 1 < k:
            heapq.heappush(heap, (-(parent_score + values[d - 1][r + 1] + depth_bonus), count, d, r + 1,
                                  parent, parent_score))
            count += 1
        if d < depth_max:
            heapq.heappush(heap, (neg - values[d][0] - depth_bonus, count, d + 1, 0, node, -neg))
            count += 1
    return tree


def walk(tree: Tree, choice: list[int]) -> list[int]:
    """Accepted path (node ids, root first): follow the target's choice while it is a child."""
    path = [0]
    while (child := tree.children[path[-1]].get(choice[path[-1]])) is not None:
        path.append(child)
    return path
