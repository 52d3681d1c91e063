"""Memory backends of the runtime: where HBM and host copies live, and how copies run.

A backend gives the runtime (:mod:`mallocgame.runtime.torch_run`) two kinds of storage
and the copies between them:

- :meth:`Memory.hbm_empty`: a tensor in fast memory (CUDA: the caching allocator's HBM);
- :meth:`Memory.host_empty`: a :class:`HostTensor` in slow memory, one allocation seen two
  ways: ``kernel``, a tensor on the compute device that kernels read and write directly
  (CUDA: pinned host memory mapped into the device's address space, zero-copy over PCIe),
  and ``dma``, the same bytes as a CPU tensor for the copy engine;
- :meth:`Memory.copy_in` / :meth:`Memory.copy_out`: host -> HBM and HBM -> host copies,
  issued now and returning an event the compute stream waits on with :meth:`Memory.wait`.
- :meth:`Memory.stage_in`: a host tensor's HBM copy made on the compute stream itself (the
  kernels issued after it wait for it: a copy that stalls the step).

:class:`CudaMemory` (needs a CUDA device; else :class:`~mallocgame.runtime.errors.NoGpuError`)
runs copies on a second CUDA stream: a copy starts once the compute stream's work issued
so far is done (the game's copy interval starts at the instruction it is issued before)
and runs concurrently with later instructions. Host memory comes from
``cupy.cuda.runtime.hostAlloc(n, cudaHostAllocMapped)`` with its device pointer from
``hostGetDevicePointer``, or, where cupy is missing or fails, from torch's pinned memory,
whose pointer is the device pointer under unified addressing; either is wrapped as a CUDA
tensor through ``__cuda_array_interface__`` that keeps the allocation alive.

:class:`CpuMemory` is the stand-in for tests: both kinds are CPU tensors, host tensors
are registered (while they live) so :meth:`Memory.is_host` tells them apart, copies are
synchronous.
"""

from __future__ import annotations

import ctypes
import gc
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mallocgame.runtime.errors import ApplyError, NoGpuError

__all__ = ["HostTensor", "Memory", "CpuMemory", "CudaMemory", "make_memory"]

_ALIGN = 512  # bytes: host allocations are rounded up to this


def _torch() -> Any:
    from mallocgame.frontends.torch import _torch as frontend_torch

    return frontend_torch()


@dataclass(frozen=True)
class HostTensor:
    """One host-memory allocation shaped as a tensor: ``kernel`` on the compute device
    (kernels read it directly), ``dma`` the same bytes as a CPU tensor (copies)."""

    kernel: Any
    dma: Any
    nbytes: int


def _storage_bytes(shape: Sequence[int], stride: Sequence[int], itemsize: int) -> int:
    """Bytes of the storage a tensor of ``shape`` and ``stride`` (elements) spans, at
    ``itemsize`` bytes an element (0 for no element)."""
    if any(int(d) == 0 for d in shape):
        return 0
    span = 1 + sum((int(d) - 1) * int(s) for d, s in zip(shape, stride))
    return span * itemsize


class Memory:
    """The interface of a backend (see the module docstring)."""

    name = "abstract"
    device: Any = None  # the torch device kernels run on

    def __init__(self) -> None:
        # data pointer -> storages of live host allocations there (a host allocation's
        # kernel and dma views may be two storages at one address); an entry goes with the
        # last of them, so an address the allocator reuses afterwards is not host memory
        self._host_ptrs: dict[int, int] = {}
        self.host_allocated = 0  # bytes of host memory allocated so far

    # -- storage
    def hbm_empty(self, shape: Sequence[int], stride: Sequence[int], dtype: Any) -> Any:
        torch = _torch()
        return torch.empty_strided(tuple(shape), tuple(stride), dtype=dtype, device=self.device)

    def host_empty(self, shape: Sequence[int], stride: Sequence[int], dtype: Any) -> HostTensor:
        torch = _torch()
        itemsize = torch.empty((), dtype=dtype).element_size()
        nbytes = max(_storage_bytes(shape, stride, itemsize), itemsize)
        nbytes = -(-nbytes // _ALIGN) * _ALIGN
        kernel_bytes, dma_bytes = self._host_bytes(nbytes)
        self.host_allocated += nbytes
        self._register_host(kernel_bytes.untyped_storage())
        self._register_host(dma_bytes.untyped_storage())
        kernel = kernel_bytes.view(dtype).as_strided(tuple(shape), tuple(stride))
        dma = dma_bytes.view(dtype).as_strided(tuple(shape), tuple(stride))
        return HostTensor(kernel, dma, nbytes)

    def _host_bytes(self, nbytes: int) -> tuple[Any, Any]:
        raise NotImplementedError

    def _register_host(self, storage: Any) -> None:
        """Count ``storage`` as host memory at its address until it is freed (torch keeps a
        storage's Python object as long as the storage lives: the finalizer runs when the
        last tensor on it is gone, before its address can be reused)."""
        ptr = storage.data_ptr()
        self._host_ptrs[ptr] = self._host_ptrs.get(ptr, 0) + 1
        weakref.finalize(storage, self._forget_host, ptr).atexit = False

    def _forget_host(self, ptr: int) -> None:
        left = self._host_ptrs.get(ptr, 0) - 1
        if left > 0:
            self._host_ptrs[ptr] = left
        else:
            self._host_ptrs.pop(ptr, None)

    def is_host(self, tensor: Any) -> bool:
        """Whether ``tensor``'s storage is a live host allocation of this backend (one that
        was freed is not, though another allocation may now have its address)."""
        return tensor.untyped_storage().data_ptr() in self._host_ptrs

    # -- copies and ordering
    def copy_in(self, dst: Any, src: HostTensor) -> Any:
        raise NotImplementedError

    def copy_out(self, dst: HostTensor, src: Any) -> Any:
        raise NotImplementedError

    def stage_in(self, src: HostTensor) -> Any:
        """A new HBM tensor holding ``src`` (its shape and strides), copied on the compute
        stream: the work issued after it waits for the copy (on a GPU, one bulk PCIe read by
        the copy engine)."""
        dst = self.hbm_empty(src.kernel.shape, src.kernel.stride(), src.kernel.dtype)
        dst.copy_(src.dma, non_blocking=True)
        return dst

    def wait(self, event: Any) -> None:
        """Make the compute stream wait for ``event`` (from a copy)."""

    def join(self) -> None:
        """Make the compute stream wait for every copy issued so far."""

    def synchronize(self) -> None:
        """Block until all work issued so far is done."""

    # -- timing and memory statistics
    def start_timer(self) -> Any:
        return time.perf_counter()

    def stop_timer(self, start: Any) -> float:
        """Seconds since ``start`` (all work issued in between done)."""
        self.synchronize()
        return time.perf_counter() - start

    def mark(self) -> Any:
        """A point on the compute stream's timeline, after the work issued so far (the CPU:
        the wall clock once that work is done); :meth:`seconds_between` reads marks."""
        self.synchronize()
        return time.perf_counter()

    def seconds_between(self, marks: Sequence[Any]) -> list[float]:
        """Seconds from each of ``marks`` to the next (``len(marks) - 1`` values); waits for
        the last."""
        return [float(b - a) for a, b in zip(marks, marks[1:])]

    def allocated(self) -> int:
        """Bytes of fast memory allocated now (0 where the backend cannot tell)."""
        return 0

    def release_dead(self) -> None:
        """Free the fast memory that only unreachable Python objects still hold, so that
        :meth:`allocated` counts what is alive (nothing to do where it cannot tell)."""

    def reset_peak(self) -> None:
        """Start a new fast-memory peak."""

    def peak(self) -> int | None:
        """Peak fast-memory bytes since :meth:`reset_peak` (None where the backend cannot
        tell)."""
        return None


class CpuMemory(Memory):
    """The CPU stand-in: HBM and host memory are both CPU tensors, copies synchronous."""

    name = "cpu"

    def __init__(self) -> None:
        super().__init__()
        self.device = _torch().device("cpu")

    def _host_bytes(self, nbytes: int) -> tuple[Any, Any]:
        torch = _torch()
        raw = torch.empty(nbytes, dtype=torch.uint8)
        return raw, raw

    def copy_in(self, dst: Any, src: HostTensor) -> Any:
        dst.copy_(src.dma)
        return None

    def copy_out(self, dst: HostTensor, src: Any) -> Any:
        dst.dma.copy_(src)
        return None


class _CudaArray:
    """``__cuda_array_interface__`` (version 3) of ``nbytes`` bytes at device pointer ``ptr``;
    holds ``owner`` (the host allocation) for as long as a tensor made from it lives."""

    def __init__(self, ptr: int, nbytes: int, owner: Any):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "strides": None,
            "version": 3,
            "stream": None,
        }


class _CupyHost:
    """A ``cudaHostAllocMapped`` allocation, freed when the last tensor on it is gone."""

    def __init__(self, runtime: Any, nbytes: int):
        self.runtime = runtime
        self.ptr = runtime.hostAlloc(nbytes, runtime.hostAllocMapped)
        self.device_ptr = runtime.hostGetDevicePointer(self.ptr, 0)

    def __del__(self) -> None:
        try:
            self.runtime.freeHost(self.ptr)
        except Exception:
            pass


class CudaMemory(Memory):
    """HBM through PyTorch's caching allocator, host memory mapped into the GPU, copies on a
    second stream (see the module docstring). ``host_alloc``: ``"cupy"``, ``"torch-pinned"``
    or ``"auto"`` (cupy, else torch's pinned memory)."""

    name = "cuda"

    def __init__(self, host_alloc: str = "auto") -> None:
        super().__init__()
        torch = _torch()
        if not torch.cuda.is_available():
            raise NoGpuError("no CUDA device: running an answer on HBM and host memory needs a GPU")
        if host_alloc not in ("auto", "cupy", "torch-pinned"):
            raise ApplyError(
                f"unknown host allocator {host_alloc!r} (have: auto, cupy, torch-pinned)"
            )
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.main = torch.cuda.current_stream(self.device)
        self.copy_stream = torch.cuda.Stream(self.device)
        self.host_alloc = host_alloc
        self._cupy: Any = None
        if host_alloc in ("auto", "cupy"):
            try:
                import cupy

                self._cupy = cupy.cuda.runtime
            except Exception as exc:
                if host_alloc == "cupy":
                    raise ApplyError(f"cupy is not usable: {type(exc).__name__}: {exc}") from None
        self.host_alloc = "cupy" if self._cupy is not None else "torch-pinned"
        reason = self._self_test()
        if reason and host_alloc == "auto" and self._cupy is not None:
            self._cupy, self.host_alloc = None, "torch-pinned"
            second = self._self_test()
            reason = f"cupy: {reason}; torch-pinned: {second}" if second else ""
        if reason:
            raise ApplyError(f"host-mapped memory does not work here ({self.host_alloc}): {reason}")

    def _self_test(self) -> str:
        """Why a kernel cannot read and write host-mapped memory here ('' when it can): 1024
        floats written on the host, doubled by a kernel reading them in place, and written
        back by a kernel into host memory, read on the host."""
        torch = _torch()
        try:
            kernel, dma = self._host_bytes(4096)
            k, h = kernel.view(torch.float32), dma.view(torch.float32)
            h.copy_(torch.arange(1024, dtype=torch.float32))
            doubled = (k * 2).cpu()
            if not torch.equal(doubled, torch.arange(1024, dtype=torch.float32) * 2):
                return "a kernel read other values than the host wrote"
            torch.mul(doubled.to(self.device), 3, out=k)
            torch.cuda.synchronize(self.device)
            if not torch.equal(h, torch.arange(1024, dtype=torch.float32) * 6):
                return "the host read other values than a kernel wrote"
        except Exception as exc:
            lines = str(exc).strip().splitlines()
            return f"{type(exc).__name__}: {lines[0] if lines else ''}"
        return ""

    def _host_bytes(self, nbytes: int) -> tuple[Any, Any]:
        torch = _torch()
        if self._cupy is not None:
            owner = _CupyHost(self._cupy, nbytes)
            buf = (ctypes.c_uint8 * nbytes).from_address(owner.ptr)
            # the CPU view keeps the allocation alive too (ctypes' stubs declare no
            # attributes of an array instance, which takes any)
            buf.owner = owner  # type: ignore[attr-defined]
            dma = torch.frombuffer(buf, dtype=torch.uint8)
            kernel = torch.as_tensor(
                _CudaArray(owner.device_ptr, nbytes, owner), device=self.device
            )
            return kernel, dma
        dma = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        # Pinned host memory is mapped at the same address under unified addressing.
        kernel = torch.as_tensor(_CudaArray(dma.data_ptr(), nbytes, dma), device=self.device)
        return kernel, dma

    def copy_in(self, dst: Any, src: HostTensor) -> Any:
        torch = _torch()
        self.copy_stream.wait_stream(self.main)
        with torch.cuda.stream(self.copy_stream):
            dst.copy_(src.dma, non_blocking=True)
        return self.copy_stream.record_event()

    def copy_out(self, dst: HostTensor, src: Any) -> Any:
        torch = _torch()
        self.copy_stream.wait_stream(self.main)
        with torch.cuda.stream(self.copy_stream):
            dst.dma.copy_(src, non_blocking=True)
        src.record_stream(self.copy_stream)  # not reused before the copy has read it
        return self.copy_stream.record_event()

    def wait(self, event: Any) -> None:
        if event is not None:
            self.main.wait_event(event)

    def join(self) -> None:
        self.main.wait_stream(self.copy_stream)

    def synchronize(self) -> None:
        _torch().cuda.synchronize(self.device)

    def start_timer(self) -> Any:
        torch = _torch()
        start = torch.cuda.Event(enable_timing=True)
        start.record(self.main)
        return start

    def stop_timer(self, start: Any) -> float:
        torch = _torch()
        self.join()
        end = torch.cuda.Event(enable_timing=True)
        end.record(self.main)
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def mark(self) -> Any:
        event = _torch().cuda.Event(enable_timing=True)
        event.record(self.main)
        return event

    def seconds_between(self, marks: Sequence[Any]) -> list[float]:
        if not marks:
            return []
        marks[-1].synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]

    def allocated(self) -> int:
        return int(_torch().cuda.memory_allocated(self.device))

    def release_dead(self) -> None:
        gc.collect()  # a full collection: a second or more in a process with a large heap

    def reset_peak(self) -> None:
        _torch().cuda.reset_peak_memory_stats(self.device)

    def peak(self) -> int:
        return int(_torch().cuda.max_memory_allocated(self.device))


def make_memory(device: str, host_alloc: str = "auto") -> Memory:
    """``"cuda"`` -> :class:`CudaMemory` (:class:`NoGpuError` without a GPU), ``"cpu"`` ->
    :class:`CpuMemory`."""
    if device == "cuda":
        return CudaMemory(host_alloc)
    if device == "cpu":
        return CpuMemory()
    raise ApplyError(f"unknown device {device!r} (have: cuda, cpu)")
