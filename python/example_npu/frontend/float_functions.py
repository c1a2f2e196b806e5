"""Elementwise float ops as float32 numpy functions, the way TVM's build computes them.

float32 arithmetic; transcendental functions evaluated in float64 and rounded once to float32.
The QDQ canonicalization (:mod:`.qdq`) evaluates elementwise islands with them to build tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def f32(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def _from_f64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A transcendental function evaluated in float64 and rounded once to float32."""
    return lambda x: f32(fn(x.astype(np.float64)))


_ERF = np.vectorize(math.erf)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# Elementwise ops of one or two float operands, as float32 functions.
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relax.nn.relu": lambda x: np.maximum(x, np.float32(0)),
    "relax.negative": np.negative,
    "relax.abs": np.abs,
    "relax.sigmoid": _from_f64(_sigmoid),
    "relax.tanh": _from_f64(np.tanh),
    "relax.exp": _from_f64(np.exp),
    "relax.erf": _from_f64(_ERF),
    "relax.nn.silu": _from_f64(lambda x: x * _sigmoid(x)),
    "relax.nn.gelu": _from_f64(lambda x: 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))),
    "relax.nn.gelu_tanh": _from_f64(
        lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    ),
}
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "relax.add": np.add,
    "relax.subtract": np.subtract,
    "relax.multiply": np.multiply,
    "relax.divide": np.divide,
    "relax.maximum": np.maximum,
    "relax.minimum": np.minimum,
}
