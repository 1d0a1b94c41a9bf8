"""ConvertOptions: everything `edgert.convert` and `edgert convert` take besides the
model and the output path, checked in one place.

    opts = edgert.ConvertOptions(input_shapes={"x": [1, 3, (32, 960), (32, 960)]}, prune=0.5)
    edgert.convert("m.onnx", "m.edgert", opts)
    edgert.convert("m.onnx", "m.edgert", opts, quantize="int8", calibration="c.npz")  # overrides

An options object is immutable and valid once built: a wrong value raises
ConversionError naming the option (as the command line spells it) and what it accepts.
The stages of the pipeline (pipeline.py) read it; none changes it.
"""
from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Any

from ..errors import ConversionError
from .bounds import is_bounded
from .partitioner import DEFAULT_MAX_PARTITIONS, FALLBACKS
from .quant import METHODS as CALIBRATION_METHODS, MODES as QUANTIZE_MODES

PRUNE_METHODS = ("magnitude", "channel")
PRUNE_SCOPES = ("layer", "global")
SPARSE_MODES = (True, "storage", False)


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """The converter's options (docs in edgert.converter.pipeline.convert).

    Shapes: input_shapes ({name: [dims]}, a dim an int or a (LO, HI) bounds pair),
    input_values ({name: value}: inputs frozen to constants).
    Graph: optimize (graph passes), sparse (True, "storage" or False).
    Pruning: prune (fraction in [0, 1) or None), prune_method, prune_scope, prune_exclude.
    Quantization: quantize (None, "int8", "fp16", "dynamic"), calibration,
    calibration_method, calibration_samples, keep_fp32, sqnr_target.
    Fallback partitions: fallback ("off", "onnxruntime", "litert"), fallback_ops,
    delegate, max_partitions.
    State: state (pairs OUT=IN: a model output the next run reads back as input IN; a
    dict {output: input}, "OUT=IN" strings or (output, input) tuples; docs/runtime.md "State").
    Output: report (a JSON path), progress (a bar on stderr; None: when a terminal)."""

    input_shapes: dict[str, list] | None = None
    input_values: dict[str, Any] | None = None
    optimize: bool = True
    sparse: bool | str = True
    prune: float | None = None
    prune_method: str = "magnitude"
    prune_scope: str = "layer"
    prune_exclude: tuple[str, ...] = ()
    calibration: Any = None
    report: str | os.PathLike | None = None
    quantize: str | None = None
    calibration_method: str = "percentile"
    keep_fp32: tuple[str, ...] = ()
    sqnr_target: float | None = None
    calibration_samples: int | None = None
    progress: bool | None = None
    fallback: str = "off"
    fallback_ops: tuple[str, ...] = ()
    delegate: str | None = None
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    state: Any = ()

    def __post_init__(self) -> None:
        for name, value in _normalized(self).items():
            object.__setattr__(self, name, value)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def build(cls, options: "ConvertOptions | None" = None, **overrides: Any) -> "ConvertOptions":
        """`options` (defaults when None) with `overrides` applied; an unknown name is a
        TypeError listing the valid ones, as Python reports a wrong keyword."""
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"options must be an edgert.ConvertOptions, not {type(options).__name__}; the "
                            "converter's settings are keyword arguments (input_shapes=..., quantize=...) or "
                            "fields of ConvertOptions")
        unknown = sorted(set(overrides) - set(cls.names()))
        if unknown:
            raise TypeError(f"convert() got unknown option(s) {', '.join(map(repr, unknown))}; valid options: "
                            + ", ".join(cls.names()))
        base = options if options is not None else cls()
        return dataclasses.replace(base, **overrides) if overrides else base

    @property
    def bounded(self) -> bool:
        """True when a dimension of input_shapes has bounds (LO, HI)."""
        return any(is_bounded(d) for dims in (self.input_shapes or {}).values() for d in dims)

    @property
    def partitions(self) -> bool:
        return self.fallback != "off"


def _normalized(o: ConvertOptions) -> dict[str, Any]:
    """The canonical value of every field (tuples for lists, "off" for no fallback, ...);
    ConversionError for a value the converter cannot take."""
    return {
        "input_shapes": _shapes(o.input_shapes),
        "input_values": None if o.input_values is None else dict(_mapping("input_values", o.input_values)),
        "optimize": bool(o.optimize),
        "sparse": _choice("sparse", o.sparse, SPARSE_MODES),
        "prune": _prune(o.prune),
        "prune_method": _choice("--prune-method", o.prune_method, PRUNE_METHODS),
        "prune_scope": _choice("prune scope", o.prune_scope, PRUNE_SCOPES),
        "prune_exclude": _names("prune_exclude", o.prune_exclude),
        "calibration": o.calibration,
        "report": o.report,
        "quantize": None if o.quantize is None else _choice("quantize", o.quantize, QUANTIZE_MODES),
        "calibration_method": _choice("calibration method", o.calibration_method, CALIBRATION_METHODS),
        "keep_fp32": _names("keep_fp32", o.keep_fp32),
        "sqnr_target": None if o.sqnr_target is None else _number("sqnr_target", o.sqnr_target),
        "calibration_samples": _count("calibration_samples", o.calibration_samples, allow_none=True),
        "progress": None if o.progress is None else bool(o.progress),
        **_fallback(o),
        "state": _state(o),
    }


def _state(o: ConvertOptions) -> tuple[tuple[str, str], ...]:
    from .state import parse
    pairs = parse(o.state)
    if pairs and o.bounded:
        raise ConversionError("--state with bounded input dimensions is not supported: give the inputs fixed shapes")
    return pairs


def _choice(what: str, value: Any, allowed: tuple) -> Any:
    """value when it is one of `allowed` (booleans by identity: 1 is not True)."""
    if not any(value is a if isinstance(a, bool) else isinstance(value, str) and value == a for a in allowed):
        raise ConversionError(f"{what} must be one of {', '.join(map(str, allowed))}, got {value!r}")
    return value


def _names(what: str, value: Any) -> tuple[str, ...]:
    """A str or an iterable of str -> a tuple of str."""
    items = [value] if isinstance(value, str) else list(value or ())
    if not all(isinstance(v, str) for v in items):
        raise ConversionError(f"{what} must be node names (strings), got {value!r}")
    return tuple(items)


def _number(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConversionError(f"{what} must be a number, got {value!r}")
    return float(value)


def _count(what: str, value: Any, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConversionError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _prune(value: Any) -> float | None:
    if value is None or value is False:
        return None
    f = _number("--prune", value)
    if not 0.0 <= f < 1.0:
        raise ConversionError(f"--prune must be in [0, 1), got {value}")
    return f or None  # 0 prunes nothing


def _mapping(what: str, value: Any) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConversionError(f"{what} must be a dict keyed by input name, got {type(value).__name__}")
    return value


def _shapes(value: Any) -> dict[str, list] | None:
    """input_shapes with each dim an int or an (LO, HI) tuple; bounds themselves are
    checked against the model later (bounds.resolve)."""
    if value is None:
        return None
    out = {}
    for name, dims in _mapping("input_shapes", value).items():
        if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__"):
            raise ConversionError(f"input_shapes[{name!r}] must be a list of dimensions, got {dims!r}")
        shape = []
        for d in dims:
            if is_bounded(d) and all(isinstance(v, numbers.Integral) for v in d):
                shape.append((int(d[0]), int(d[1])))
            elif isinstance(d, numbers.Integral) and not isinstance(d, bool):
                shape.append(int(d))
            else:
                raise ConversionError(f"input_shapes[{name!r}]: dimension {d!r} must be an integer or a (LO, HI) "
                                      "pair of integers")
        out[name] = shape
    return out


def _fallback(o: ConvertOptions) -> dict[str, Any]:
    fallback = "off" if o.fallback in (None, False) else o.fallback
    if fallback not in FALLBACKS:
        raise ConversionError(f"fallback {fallback!r} is not one of {', '.join(FALLBACKS)}")
    ops = _names("fallback_ops", o.fallback_ops)
    if ops and fallback == "off":
        raise ConversionError("--fallback-ops needs a fallback runtime: --fallback onnxruntime or --fallback litert")
    if o.delegate is not None and fallback == "off":
        raise ConversionError("--delegate needs a fallback runtime: --fallback onnxruntime or --fallback litert")
    max_partitions = o.max_partitions
    if isinstance(max_partitions, bool) or not isinstance(max_partitions, int) or max_partitions < 1:
        raise ConversionError(f"max_partitions must be a positive integer, got {max_partitions!r}")
    delegate = None if o.delegate is None else os.fspath(o.delegate) if isinstance(o.delegate, os.PathLike) \
        else str(o.delegate)
    return {"fallback": fallback, "fallback_ops": ops, "delegate": delegate, "max_partitions": max_partitions}
