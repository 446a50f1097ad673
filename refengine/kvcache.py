"""A KV cache with a batch dim and a length per row, so several requests can share a forward later.

A forward writes its T new entries at slots [length, length + T) of each row *tentatively*;
nothing is kept until the decoder calls `commit(row, keep)`, which moves the chosen
tentative entries (ids relative to the block) to the front of the free space and extends
the row. That one operation is AR's append, linear's crop to the accepted prefix, and the
tree's compaction to the accepted path.
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
        self._host_lengths = [0] * batch  # mirrors `lengths` so eager code never syncs to learn a size

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def length(self, row: int = 0) -> int:
        return self._host_lengths[row]

    def span(self, new: int) -> int:
        """Keys an eager forward of `new` tokens must look at."""
        need = max(self._host_lengths) + new
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

    def commit(self, row: int, keep: torch.Tensor | int) -> None:
        """Keep tentative entries `keep` (ids into the last forward's block, ascending), or the first `keep`."""
        start = self._host_lengths[row]
        if isinstance(keep, int):
            n = keep
        else:
            n = keep.numel()
            src = keep.to(self.k.device) + start
            if not torch.equal(src, torch.arange(start, start + n, device=src.device)):
                self.k[:, row, :, start:start + n] = self.k[:, row, :, src]
                self.v[:, row, :, start:start + n] = self.v[:, row, :, src]
        if start + n > self.capacity:
            raise CacheFullError(f"KV cache holds {self.capacity} entries; commit needs {start + n}")
        self.set_length(row, start + n)

    def set_length(self, row: int, length: int) -> None:
        """Crop (or, for a fresh row, reset) a row to `length` entries."""
        self._host_lengths[row] = length
        self.lengths[row] = length
