"""NPUConfig: the hardware description the pattern checks plan against.

Defaults are the specification's architecture: 4 KB L0 registers, 256 KB L1 SRAM, 512 KB L2 CMX,
32x32 tiles, 16-element vectors, a 16x16 matrix engine, a 64-wide vector unit, and three power
modes. The cycle/energy model extends this type; the field names say tier and unit.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

POWER_MODES = ("high_performance", "balanced", "low_power")

_DTYPE_BYTES = {"int8": 1, "int16": 2, "float16": 2, "float32": 4, "int32": 4}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of an NPU dtype (4 for anything wider, as a safe upper bound)."""
    return _DTYPE_BYTES.get(dtype, 4)


class InvalidConfigError(ValueError):
    """An NPUConfig that describes no buildable NPU."""


@dataclass(frozen=True)
class NPUConfig:
    """Architecture parameters of the emulated NPU."""

    l0_register_kb: int = 4
    l1_sram_kb: int = 256
    l2_cmx_kb: int = 512
    tile_height: int = 32
    tile_width: int = 32
    vector_elements: int = 16
    matrix_engine_dim: int = 16
    vector_unit_width: int = 64
    power_mode: str = "balanced"

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "int" and (not isinstance(value, int) or value <= 0):
                raise InvalidConfigError(
                    f"NPUConfig.{field.name} must be a positive int: {value!r}"
                )
        if self.power_mode not in POWER_MODES:
            raise InvalidConfigError(
                f"NPUConfig.power_mode {self.power_mode!r} is not one of {POWER_MODES}"
            )
        min_tile_bytes = self.tile_height * self.tile_width * 4
        if self.l1_sram_bytes < min_tile_bytes:
            raise InvalidConfigError(
                f"NPUConfig.l1_sram_kb={self.l1_sram_kb} is smaller than one float32 "
                f"{self.tile_height}x{self.tile_width} tile ({min_tile_bytes} bytes)"
            )

    @property
    def l1_sram_bytes(self) -> int:
        return self.l1_sram_kb * 1024

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> NPUConfig:
        data = json.loads(text)
        known = {field.name for field in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidConfigError(f"unknown NPUConfig fields: {sorted(unknown)}")
        return cls(**data)


DEFAULT_CONFIG = NPUConfig()
