"""One block-table call (ABI 2.4's decode_paged, attest_abi.h's attest_paged_step) as a Python
decoder receives it: attest owns the pages and the tables; the kernel writes its new tokens' slots
into `pool` (in its own layout of page_bytes bytes a page) and attends each new query causally over
its sequence. Position t of sequence b lives in slot t % page_tokens of page tables[b][t // page_tokens]."""
import numpy as np

from . import quantized
from .storage import numpy_dtype


class PagedStep:
    """pool: uint8 [pages][page_bytes], writable (what the kernel writes is sent back to attest);
    tables: int32 [B][table_width]; lengths: int64 [B] (tokens a sequence held before the call);
    counts: int32 [B] (tokens it appends now, 0 or more); want_lse; page_tokens.
    sequence(b) gives sequence b's new q [H][n][Dk], k [Hkv][n][Dk], v [Hkv][n][Dv] (storage
    formats; quantized K/V as QuantizedRows, q8_head with its configured scales)."""

    def __init__(self, fields, config, page_tokens):
        self.config, self.page_tokens = config, page_tokens
        self.page_bytes = fields["page_bytes"]
        self.pool = np.array(fields["pool"], dtype=np.uint8).reshape(-1, self.page_bytes)
        self.table_width = fields["table_width"]
        self.tables = fields["tables"].reshape(config.batch, self.table_width)
        self.lengths, self.counts, self.want_lse = fields["lengths"], fields["counts"], fields["want_lse"]
        self._raw = {name: fields[name] for name in ("q", "k", "v")}
        self._offsets = {name: np.concatenate([[0], np.cumsum([self._bytes(name, b) for b in range(config.batch)])])
                         for name in ("q", "k", "v")}

    def _shape(self, name, b):
        c, n = self.config, int(self.counts[b])
        heads = c.heads if name == "q" else c.kv_heads
        return (heads, n, c.value_dim if name == "v" else c.head_dim)

    def _bytes(self, name, b):
        fmt, shape = self.config.storage[name], self._shape(name, b)
        if fmt in quantized.QUANTIZED:
            return quantized.stored_size(fmt, shape, head_scales=fmt == "q8_head")
        return int(np.prod(shape)) * numpy_dtype(fmt).itemsize

    def sequence(self, b):
        """(q, k, v) of sequence b's new tokens (each with 0 tokens when counts[b] == 0)."""
        out = []
        for name in ("q", "k", "v"):
            fmt, shape = self.config.storage[name], self._shape(name, b)
            raw = self._raw[name][self._offsets[name][b]:self._offsets[name][b + 1]]
            if fmt in quantized.QUANTIZED:
                scales = getattr(self.config, name + "_scales", None) if fmt == "q8_head" else None
                out.append(quantized.decode(raw, fmt, shape, None if scales is None else scales[b]))
            else:
                out.append(raw.view(numpy_dtype(fmt)).reshape(shape))
        return tuple(out)

    def check_sizes(self):
        """ValueError unless q, k and v hold exactly the counts' tokens."""
        for name in ("q", "k", "v"):
            if self._offsets[name][-1] != self._raw[name].size:
                raise ValueError("paged step: %s does not match the counts and the configuration" % name)
        for b in range(self.config.batch):
            used = (int(self.lengths[b]) + int(self.counts[b]) + self.page_tokens - 1) // self.page_tokens
            pages = self.tables[b, :used]
            if used > self.table_width or np.any(pages < 0) or np.any(pages >= len(self.pool)):
                raise ValueError("paged step: sequence %d's table names a page outside the pool" % b)

    def slot(self, b, position):
        """(page, slot): where position `position` of sequence b lives."""
        return int(self.tables[b, position // self.page_tokens]), position % self.page_tokens
