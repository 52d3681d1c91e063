"""What the PyTorch frontend captures around a user's module: its outputs as tensors, and a loss.

``torch.export`` accepts outputs made of tensors and the containers it knows (tuples,
lists, dicts, and classes registered with ``torch.utils._pytree``). Models as people
run them return more: Hugging Face's ``ModelOutput`` dataclasses and caches
(``DynamicCache`` holds the new keys and values of every layer in objects of its own).
:class:`CaptureAdapter` runs the module and returns the tensors of whatever it
returned, in order, so every model captures with its defaults, cache included: the
cache's tensors are outputs (live to the end of the program), as they are for a
caller that keeps them.

For a training step it also computes the loss (:data:`LOSSES`) from the module's
outputs, so that a model needs no hand-written wrapper.

The adapter shares the module's parameter, buffer and submodule dictionaries: the
captured graph names every weight exactly as ``module.named_parameters()`` does (a tied
parameter and a module used under several names: under their first name,
:func:`parameters_tied_once`, :func:`modules_shared_once`).
Errors raised while the module runs (a missing ``labels``, logits and labels of
different shapes) are :class:`AdapterError` s, so the frontend can name the stage.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any, ClassVar

from mallocgame.errors import MallocGameError

__all__ = [
    "LOSSES",
    "NEEDS_LABELS",
    "AdapterError",
    "CaptureAdapter",
    "modules_shared_once",
    "output_tensors",
    "parameters_tied_once",
]

LOSSES = ("output", "model", "sum", "mean", "cross-entropy")
"""How a training step's loss is made:

- ``output``: the module's first output is the loss (a scalar); the module computes it;
- ``model``: the model's own loss: it is called with ``labels=LABELS`` and its ``loss``
  output is taken (Hugging Face models shift a causal LM's labels themselves);
- ``sum``, ``mean``: of the module's first output (a ``ModelOutput``'s ``logits``);
- ``cross-entropy``: of the first output, logits ``[..., C]``, against ``LABELS``
  ``[...]`` (int64 class ids), averaged, as ``torch.nn.functional.cross_entropy``.
"""
NEEDS_LABELS = ("model", "cross-entropy")
"""The losses that take labels (the keyword argument ``labels``)."""
_SCALARS = (bool, int, float, complex, str, bytes)


class AdapterError(MallocGameError):
    """The module's outputs cannot give what the capture asks for (the message says why)."""


def output_tensors(value: Any, found: list[str] | None = None) -> list[Any]:
    """Every tensor in ``value``, depth first in order: tensors, tuples, lists, dicts
    (``ModelOutput`` is one), and any other object's attributes (a cache's layers and their
    keys and values). Objects are visited once. ``found`` collects the names of the
    non-builtin container types that held tensors."""
    import torch

    seen: set[int] = set()

    def visit(v: Any) -> list[Any]:
        if isinstance(v, torch.Tensor):
            return [v]
        if v is None or isinstance(v, _SCALARS) or id(v) in seen:
            return []
        seen.add(id(v))
        if isinstance(v, (list, tuple)):
            items = list(v)
        elif isinstance(v, dict):
            items = list(v.values())
        elif isinstance(v, (type, torch.nn.Module)):
            return []
        elif hasattr(v, "__dict__") or _slot_names(v):
            items = list(getattr(v, "__dict__", {}).values())
            items += [getattr(v, n) for n in _slot_names(v) if hasattr(v, n)]
        else:
            return []
        tensors = [t for item in items for t in visit(item)]
        kind = type(v).__name__
        if (
            tensors
            and found is not None
            and type(v) not in (list, tuple, dict)
            and kind not in found
        ):
            found.append(kind)
        return tensors

    return visit(value)


def _slot_names(value: Any) -> list[str]:
    """The ``__slots__`` attribute names of ``value``'s class and its bases (a
    ``dataclass(slots=True)``'s fields), ``__dict__`` and ``__weakref__`` aside."""
    names: list[str] = []
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


def _first_output(value: Any) -> Any:
    """The tensor a loss is made of: a ``ModelOutput``'s ``logits``, else the first tensor."""
    logits = value.get("logits") if isinstance(value, dict) else None
    if logits is not None:
        return logits
    tensors = output_tensors(value)
    if not tensors:
        raise AdapterError("the module returned no tensor to make a loss of")
    return tensors[0]


def _make_class() -> type:
    """A fresh adapter class: its ``found`` list is a class attribute, so that it is the same list
    whatever copies of the instance the capture makes."""
    import torch

    class _CaptureAdapter(torch.nn.Module):
        found: ClassVar[list[str]] = []
        _inner: Any  # the user's module, set in __init__ (an attribute, not a submodule)

        def __init__(self, module: Any, loss: str | None) -> None:
            super().__init__()
            object.__setattr__(self, "_inner", module)  # not a submodule: no name prefix
            self._parameters = module._parameters
            self._buffers = module._buffers
            self._modules = module._modules
            self.training = module.training
            self.loss_kind = loss

        def forward(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
            if self.loss_kind is None:
                return tuple(output_tensors(self._inner(*args, **kwargs), self.found))
            labels = kwargs.pop("labels", None) if self.loss_kind in NEEDS_LABELS else None
            if self.loss_kind in NEEDS_LABELS and labels is None:
                raise AdapterError(f"the loss {self.loss_kind!r} needs labels=")
            return (self._loss(args, kwargs, labels),)

        def _loss(self, args: tuple[Any, ...], kwargs: dict[str, Any], labels: Any) -> Any:
            F = torch.nn.functional
            if self.loss_kind == "model":
                out = self._inner(*args, **kwargs, labels=labels)
                loss = out.get("loss") if isinstance(out, dict) else None
                if loss is None:
                    raise AdapterError(
                        "the model returned no 'loss' when called with labels=: use "
                        "--loss cross-entropy (or sum, mean)"
                    )
                return loss
            out = self._inner(*args, **kwargs)
            if self.loss_kind == "output":
                tensors = output_tensors(out)
                loss = tensors[0] if tensors else None
                if loss is None or loss.dim() != 0:
                    raise AdapterError(
                        "the module's first output is not a scalar loss: name one with "
                        "--loss model|sum|mean|cross-entropy"
                    )
                return loss
            logits = _first_output(out)
            if self.loss_kind == "sum":
                return logits.float().sum()
            if self.loss_kind == "mean":
                return logits.float().mean()
            if tuple(logits.shape[:-1]) != tuple(labels.shape):
                raise AdapterError(
                    f"cross-entropy: logits {list(logits.shape)} need labels of shape "
                    f"{list(logits.shape[:-1])}, got {list(labels.shape)}"
                )
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))

    return _CaptureAdapter


def CaptureAdapter(module: Any, loss: str | None = None) -> Any:
    """A module that runs ``module`` and returns the tensors of its outputs (``loss`` ``None``),
    or, for a training step, ``(loss,)`` with ``loss`` one of :data:`LOSSES`; where the loss
    needs labels, they are the keyword argument ``labels``. Its ``found`` lists the
    container types whose tensors were read (filled while the capture traces it)."""
    if loss is not None and loss not in LOSSES:
        raise AdapterError(f"unknown loss {loss!r} (have: {', '.join(LOSSES)})")
    if loss == "model" and not _takes_labels(module):
        raise AdapterError(
            f"{type(module).__name__}.forward takes no labels=, so it has no loss of its own: "
            "use --loss cross-entropy (or sum, mean)"
        )
    adapter_class = _make_class()
    adapter_class.forward.__signature__ = _signature(module, loss in NEEDS_LABELS)  # type: ignore[attr-defined]
    return adapter_class(module, loss)


def _takes_labels(module: Any) -> bool:
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "labels" or p.kind == inspect.Parameter.VAR_KEYWORD for p in params)


def _signature(module: Any, labels: bool) -> inspect.Signature:
    """The adapter's ``forward`` signature: the module's (so the capture names the inputs as
    the module does), with a keyword ``labels`` where the loss needs one the module lacks."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        params = [
            inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
            inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
        ]
    kinds = {p.kind for p in params}
    if (
        labels
        and inspect.Parameter.VAR_KEYWORD not in kinds
        and "labels" not in {p.name for p in params}
    ):
        params.append(inspect.Parameter("labels", inspect.Parameter.KEYWORD_ONLY))
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return inspect.Signature([self_param, *params])


@contextlib.contextmanager
def modules_shared_once(module: Any) -> Iterator[list[str]]:
    """While the block runs, a submodule reached under several names (``self.b = self.a``,
    ``nn.ModuleList([block] * 3)``) is registered under its first name only: every later name
    holds a stand-in without parameters that calls the module and reads its attributes. The
    capture then has one input per parameter, under its first name (``torch.export`` would lift
    it once per name, all reads on one of them, the others unread; a training step's joint
    graph would refuse the unread ones); afterwards the module is as it was. Yields
    ``"NAME is FIRST"`` for every later name."""
    import torch

    class _SharedModule(torch.nn.Module):
        """A later name of a module used under several: calls it, reads its attributes."""

        def __init__(self, target: Any) -> None:
            super().__init__()
            object.__setattr__(self, "_target", target)  # not a submodule: no parameters
            self.training = target.training

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self._target(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.__dict__["_target"], name)

    first: dict[int, str] = {id(module): ""}
    shared: list[tuple[Any, str, Any, str, str]] = []  # (parent, key, module, name, first name)
    stack: list[tuple[Any, str]] = [(module, "")]
    while stack:
        parent, path = stack.pop()
        children = []
        for key, child in parent._modules.items():
            if child is None:
                continue
            name = _dotted_name(path, key)
            if id(child) in first:
                shared.append((parent, key, child, name, first[id(child)]))
            else:
                first[id(child)] = name
                children.append((child, name))
        stack.extend(reversed(children))  # depth first, in registration order
    try:
        for parent, key, child, _, _ in shared:
            parent._modules[key] = _SharedModule(child)
        yield [f"{name} is {first_name or '<root>'}" for _, _, _, name, first_name in shared]
    finally:
        for parent, key, child, _, _ in shared:
            parent._modules[key] = child


@contextlib.contextmanager
def parameters_tied_once(module: Any) -> Iterator[list[str]]:
    """While the block runs, a parameter registered under several names (tied weights: a
    language model's output layer and its embedding) is registered under its first name
    only, and the other names look it up there each time ``module`` is called (before
    any of its code, which may read a tied weight without calling its module); afterwards the module is
    as it was. The capture then has one input for it, which receives one gradient (torch's
    joint graph refuses a parameter registered twice: one of its names gets no gradient).
    Yields ``"NAME is FIRST"`` for every tie. A module used under several names
    (``self.b = self.a``, ``nn.ModuleList([block] * 3)``) ties nothing: its parameters sit in one
    slot, reached through several paths, and are one input each (under their first name)."""
    first: dict[int, tuple[Any, str, str]] = {}  # parameter -> (its module, name, module's name)
    ties: list[tuple[Any, str, Any, str, str]] = []
    for module_name, sub in module.named_modules(remove_duplicate=False):
        for name, param in list(sub._parameters.items()):
            if param is None:
                continue
            owner, owner_name, owner_path = first.setdefault(id(param), (sub, name, module_name))
            if owner is sub and owner_name == name:
                continue  # its own slot, reached again through a module used under two names
            if not any(t[0] is sub and t[1] == name for t in ties):
                ties.append((sub, name, param, owner_path, owner_name))
    handles = []
    try:
        looked_up = []  # (module, name, owner, owner's name): every tie, set at once
        for sub, name, _, owner_module, owner_name in ties:
            del sub._parameters[name]
            looked_up.append((sub, name, module.get_submodule(owner_module), owner_name))

        def look_up(*_: Any) -> None:
            # before the root's code runs, not only the tied module's own: code elsewhere
            # may read a tied weight without calling its module (Mamba's lm_head.weight.dtype)
            for sub, name, owner, owner_name in looked_up:
                object.__setattr__(sub, name, owner._parameters[owner_name])

        if looked_up:
            handles.append(module.register_forward_pre_hook(look_up))
        yield [f"{_dotted(m, n, module)} is {_dotted_name(om, on)}" for m, n, _, om, on in ties]
    finally:
        for handle in handles:
            handle.remove()
        for sub, name, param, _, _ in ties:
            sub.__dict__.pop(name, None)
            sub._parameters[name] = param


def _dotted_name(module_name: str, name: str) -> str:
    return f"{module_name}.{name}" if module_name else name


def _dotted(sub: Any, name: str, root: Any) -> str:
    path = next((n for n, m in root.named_modules(remove_duplicate=False) if m is sub), "")
    return _dotted_name(path, name)
