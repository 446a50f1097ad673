"""A KV cache with a batch dim and a length per row: each row is one request's cache.

A forward writes its T new entries at slots [length, length + T) of each row *tentatively*;
nothing is kept until the decoder commits: `advance(counts)` keeps the first counts[r] entries
of each row (AR's append, linear's crop to the accepted prefix) and `compact(keeps)` keeps
chosen entries (the tree's accepted path), moved to the front of the free space.

`rows(lo, hi)` is a view of some rows over the same storage: the engine runs a forward over
the rows of the running requests only, and prefills one row at a time.
"""

from __future__ import annotations

import torch


class CacheFullError(RuntimeError):
    pass


class KVCache:
    def __init__(self, n_layers: int, batch: int, n_kv_heads: int, capacity: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str):
        shape = (n_layers, batch, n_kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)
        # a host copy of `lengths` (shared by views), so eager code never syncs to learn a size
        self._host, self._off = [0] * batch, 0

    def rows(self, lo: int, hi: int) -> KVCache:
        view = object.__new__(KVCache)
        view.k, view.v, view.lengths = self.k[:, lo:hi], self.v[:, lo:hi], self.lengths[lo:hi]
        view._host, view._off = self._host, self._off + lo
        return view

    @property
    def batch(self) -> int:
        return self.k.shape[1]

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def length(self, row: int = 0) -> int:
        return self._host[self._off + row]

    def host_lengths(self) -> list[int]:
        return self._host[self._off:self._off + self.batch]

    def span(self, new: int) -> int:
        """Keys an eager forward of `new` tokens must look at."""
        need = max(self.host_lengths()) + new
        if need > self.capacity:
            raise CacheFullError(f"KV cache holds {self.capacity} entries; this forward needs {need}")
        return need

    def slots(self, new: int) -> torch.Tensor:
        """[B, new] cache slots of the tentative entries of a forward."""
        return self.lengths[:, None] + torch.arange(new, device=self.lengths.device)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor) -> None:
        index = slots[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        self.k[layer].scatter_(2, index, k)
        self.v[layer].scatter_(2, index, v)

    def advance(self, counts: list[int]) -> None:
        """Keep the first counts[r] tentative entries of each row r."""
        self.set_lengths([n + c for n, c in zip(self.host_lengths(), counts, strict=True)])

    def compact(self, keeps: list[list[int]]) -> None:
        """Keep tentative entries keeps[r] of each row (ascending ids into the last forward's block)."""
        starts = self.host_lengths()
        width = max(map(len, keeps))
        # pad each row with identity moves, so that one gather/scatter serves all rows
        src = [[s + (keep[j] if j < len(keep) else j) for j in range(width)]
               for s, keep in zip(starts, keeps, strict=True)]
        if any(row[j] != s + j for s, row in zip(starts, src, strict=True) for j in range(width)):
            device = self.k.device
            src_t = torch.tensor(src, device=device)
            dst_t = torch.tensor(starts, device=device)[:, None] + torch.arange(width, device=device)
            shape = (self.k.shape[0], self.batch, self.k.shape[2], width, self.k.shape[4])
            src_i = src_t[None, :, None, :, None].expand(shape)
            dst_i = dst_t[None, :, None, :, None].expand(shape)
            for cache in (self.k, self.v):
                cache.scatter_(3, dst_i, cache.gather(3, src_i))
        self.advance([len(keep) for keep in keeps])

    def set_lengths(self, lengths: list[int]) -> None:
        if max(lengths) > self.capacity:
            raise CacheFullError(f"KV cache holds {self.capacity} entries; a commit needs {max(lengths)}")
        self._host[self._off:self._off + self.batch] = lengths
        self.lengths.copy_(torch.tensor(lengths), non_blocking=True)

    def set_length(self, row: int, length: int) -> None:
        """Crop (or, for a fresh row, reset) a row to `length` entries."""
        lengths = self.host_lengths()
        lengths[row] = length
        self.set_lengths(lengths)

    def move_row(self, src: int, dst: int) -> None:
        """Row dst takes row src's committed entries (a request moving into a freed row)."""
        n = self.length(src)
        self.k[:, dst, :, :n] = self.k[:, src, :, :n]
        self.v[:, dst, :, :n] = self.v[:, src, :, :n]
        lengths = self.host_lengths()
        lengths[dst], lengths[src] = n, 0
        self.set_lengths(lengths)
