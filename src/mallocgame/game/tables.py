"""Static per-instance arrays the game kernels read (built once per instance).

Everything here is derived from an :class:`~mallocgame.instance.Instance` and never
changes during a game. Column layouts are named by the ``*_COL`` constants so the
kernels and the Python side agree.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from mallocgame.instance import Instance, RooflineLatency
from mallocgame.latency import reward_normalizer

__all__ = ["GameTables", "build_tables"]

# Columns of GameTables.buf_int [B, 7]
B_TIME, B_IS_OUT, B_TENSOR, B_GROUP, B_SIZE, B_ALIGNED, B_BIT = range(7)
# Columns of GameTables.ins_int [T, 4]; kind: 0 roofline, 1 table; buffers ins_buf[FIRST:LAST]
I_KIND, I_FIRST, I_LAST, I_TABLE = range(4)
# Columns of GameTables.ins_float [T, 4]
I_COUNT, I_COMPUTE, I_FIXED, I_SUPPLY = range(4)
# Columns of GameTables.ten_int [X, 4]
X_DEF, X_LAST_USE, X_LIVE_OUT, X_DEF_BUFFER = range(4)
# Entries of GameTables.hw [4]
H_CAPACITY, H_ALIGN, H_FAST_BW, H_SLOW_BW = range(4)


@dataclass(frozen=True)
class GameTables:
    """Read-only arrays describing one instance (``B`` buffers, ``T`` instructions,
    ``X`` tensors, ``G`` alias groups).

    ``buf_int``  [B, 7] int64: target time, is_output, tensor, dense group id, size,
                 aligned size, bit in its instruction's latency table (-1 if none).
    ``buf_demand`` [B] float64: copy seconds.
    ``ins_int``  [T, 4] int64: latency kind, first/last+1 index into ``ins_buf``,
                 offset of its table in ``table_s``.
    ``ins_float`` [T, 4] float64: count, compute_s, fixed_s, supply_s.
    ``ins_buf``  [sum of buffers] int64: every instruction's buffers in list order.
    ``table_s``  [*] float64: latency tables, concatenated.
    ``ten_int``  [X, 4] int64: def_time, last_use_time, live_out, defining buffer (-1).
    ``group_size`` [G] int64: buffers per alias group.
    ``hw``       [4] float64: capacity (bytes), alignment (bytes), fast/slow bandwidth (B/s).
    ``normalizer_s``: R of SPEC section 5 (seconds).
    ``instance_sha256``: the instance's hash (SPEC section 7).

    Every array is read-only (made so when the tables are made or unpickled; writing
    into one raises ``ValueError``): many games share one instance's tables. The named
    columns below are read-only views of these arrays, or new arrays.
    """

    buf_int: np.ndarray
    buf_demand: np.ndarray
    ins_int: np.ndarray
    ins_float: np.ndarray
    ins_buf: np.ndarray
    table_s: np.ndarray
    ten_int: np.ndarray
    group_size: np.ndarray
    hw: np.ndarray
    capacity: int
    alignment: int
    normalizer_s: float
    instance_sha256: str  # whose tables these are: a game of another instance refuses them

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self.__post_init__()  # unpickled arrays are writable again

    @property
    def num_buffers(self) -> int:
        return int(self.buf_int.shape[0])

    @property
    def num_instructions(self) -> int:
        return int(self.ins_int.shape[0])

    @property
    def num_tensors(self) -> int:
        return int(self.ten_int.shape[0])

    @property
    def num_groups(self) -> int:
        return int(self.group_size.shape[0])

    # Named columns (views, no copies) for the Python side; the kernels index the arrays.

    @property
    def buffer_time(self) -> np.ndarray:
        """[B] int64: each buffer's target time (its instruction)."""
        return self.buf_int[:, B_TIME]

    @property
    def buffer_is_out(self) -> np.ndarray:
        """[B] bool: the buffer is its instruction's output."""
        return self.buf_int[:, B_IS_OUT] != 0

    @property
    def buffer_tensor(self) -> np.ndarray:
        """[B] int64: each buffer's tensor id."""
        return self.buf_int[:, B_TENSOR]

    @property
    def buffer_group(self) -> np.ndarray:
        """[B] int64: each buffer's dense alias-group id (index into ``group_size``)."""
        return self.buf_int[:, B_GROUP]

    @property
    def buffer_aligned(self) -> np.ndarray:
        """[B] int64: each buffer's size rounded up to the alignment, bytes."""
        return self.buf_int[:, B_ALIGNED]

    @property
    def buffer_has_bit(self) -> np.ndarray:
        """[B] bool: the buffer is a bit of its instruction's latency table."""
        return self.buf_int[:, B_BIT] >= 0

    @property
    def tensor_def(self) -> np.ndarray:
        """[X] int64: each tensor's def_time (-1: a program input)."""
        return self.ten_int[:, X_DEF]

    @property
    def tensor_last_use(self) -> np.ndarray:
        """[X] int64: each tensor's last_use_time."""
        return self.ten_int[:, X_LAST_USE]

    @property
    def tensor_live_out(self) -> np.ndarray:
        """[X] bool: the tensor is a program result."""
        return self.ten_int[:, X_LIVE_OUT] != 0

    @property
    def supply_s(self) -> np.ndarray:
        """[T] float64: each instruction's copy supply, seconds."""
        return self.ins_float[:, I_SUPPLY]


def build_tables(inst: Instance) -> GameTables:
    """Flatten ``inst`` into the arrays the kernels use (O(B + T + X))."""
    num_b, num_t, num_x = inst.num_buffers, inst.num_instructions, len(inst.tensors)
    hw = inst.hardware
    align = hw.alignment_bytes

    groups = inst.group_ids
    buf_int = np.zeros((num_b, 7), dtype=np.int64)
    buf_demand = np.zeros(num_b, dtype=np.float64)
    for b in inst.buffers:
        row = buf_int[b.id]
        row[B_TIME] = b.instruction
        row[B_IS_OUT] = int(b.is_output)
        row[B_TENSOR] = b.tensor_id
        row[B_GROUP] = groups[b.id]
        row[B_SIZE] = b.size
        row[B_ALIGNED] = -(-b.size // align) * align
        row[B_BIT] = -1
        buf_demand[b.id] = b.demand_s
    group_size = np.bincount(buf_int[:, B_GROUP], minlength=inst.num_alias_groups).astype(np.int64)

    ins_int = np.zeros((num_t, 4), dtype=np.int64)
    ins_float = np.zeros((num_t, 4), dtype=np.float64)
    ins_buf: list[int] = []
    tables: list[float] = []
    for t, ins in enumerate(inst.instructions):
        ins_int[t, I_FIRST] = len(ins_buf)
        ins_buf.extend(ins.buffers)
        ins_int[t, I_LAST] = len(ins_buf)
        ins_float[t, I_COUNT] = ins.count
        ins_float[t, I_SUPPLY] = ins.supply_s
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            ins_int[t, I_KIND] = 0
            ins_float[t, I_COMPUTE] = lat.compute_s
            ins_float[t, I_FIXED] = lat.fixed_s
        else:
            ins_int[t, I_KIND] = 1
            ins_int[t, I_TABLE] = len(tables)
            tables.extend(lat.latency_s)
            for bit, varied in enumerate(lat.varied):
                buf_int[varied, B_BIT] = bit

    ten_int = np.zeros((num_x, 4), dtype=np.int64)
    for x in inst.tensors:
        ten_int[x.id] = (x.def_time, x.last_use_time, int(x.live_out), -1)
    for b in inst.buffers:
        if b.is_output:
            ten_int[b.tensor_id, X_DEF_BUFFER] = b.id

    return GameTables(
        buf_int=buf_int,
        buf_demand=buf_demand,
        ins_int=ins_int,
        ins_float=ins_float,
        ins_buf=np.asarray(ins_buf, dtype=np.int64),
        table_s=np.asarray(tables if tables else [0.0], dtype=np.float64),
        ten_int=ten_int,
        group_size=group_size,
        hw=np.array(
            [hw.fast_memory_bytes, align, hw.fast_bandwidth, hw.slow_bandwidth], dtype=np.float64
        ),
        capacity=hw.fast_memory_bytes,
        alignment=align,
        normalizer_s=reward_normalizer(inst),
        instance_sha256=inst.sha256,
    )
