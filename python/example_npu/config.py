"""NPUConfig: the hardware description of the emulated NPU (mirror of src/config/npu_config.h).

Users pass one at compile time, ``partition_for_npu(mod, config=NPUConfig(l1_sram_kb=64))``; it
travels in the NPU graph, so an exported library keeps the configuration it was compiled for.
docs/user-guide/npu-config.md gives the source of every default; docs/reference/npu-config.md
lists the fields, generated from this class (the comment above a group of fields is its heading).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

POWER_MODES = {
    # name: (clock MHz, core voltage V) - DVFS operating points of a mobile-class NPU.
    "high_performance": (1000.0, 0.90),
    "balanced": (800.0, 0.80),
    "low_power": (400.0, 0.65),
}

# What the matrix engine's cells hold during a fold (src/config/matrix_engine.h).
DATAFLOWS = ("output_stationary", "weight_stationary")

_DTYPE_BYTES = {"int8": 1, "int16": 2, "float16": 2, "float32": 4, "int32": 4}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of an NPU dtype (4 for anything wider, as a safe upper bound)."""
    return _DTYPE_BYTES.get(dtype, 4)


class InvalidConfigError(ValueError):
    """An NPUConfig that describes no buildable NPU.

    The message quotes what the user wrote, which may be any text (a config file is untrusted
    input), so it is escaped to printable ASCII and cut to the C++ runtime's 1000-character cap:
    it stays safe to print on any terminal or log and matches what the runtime promises.
    """

    MAX_CHARS = 1000

    def __init__(self, message: str) -> None:
        text = message.encode("ascii", "backslashreplace").decode("ascii")
        text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
        if len(text) > self.MAX_CHARS:
            text = text[: self.MAX_CHARS] + "..."
        super().__init__(text)


# Inclusive range of every numeric field, mirrored from src/config/npu_config.cc (a test compares
# them with the C++ table). The ranges keep derived cycles, bytes and energies far from overflow
# and cover any NPU worth modelling.
FIELD_RANGES: dict[str, tuple[float, float]] = {
    "l0_register_kb": (1, 1024),
    "l1_sram_kb": (1, 1 << 20),
    "l2_cmx_kb": (1, 1 << 20),
    "tile_height": (1, 1024),
    "tile_width": (1, 1024),
    "vector_elements": (1, 1024),
    "matrix_engine_dim": (1, 1024),
    "vector_unit_width": (1, 65536),
    "activation_unit_lanes": (1, 65536),
    "pooling_unit_lanes": (1, 65536),
    "dma_channels": (1, 64),
    "l1_latency_cycles": (1, 1_000_000),
    "l2_latency_cycles": (1, 1_000_000),
    "dram_mb": (1, 1 << 20),
    "max_tiles": (1, 1 << 24),
    "l1_bandwidth_bytes_per_cycle": (1e-3, 1e6),
    "l2_bandwidth_bytes_per_cycle": (1e-3, 1e6),
    "dram_bandwidth_gb_per_s": (1e-3, 1e6),
    "dram_latency_ns": (1e-3, 1e6),
    **{
        name: (1e-6, 1e6)
        for name in (
            "energy_mac_int8_pj",
            "energy_mac_int16_pj",
            "energy_mac_float16_pj",
            "energy_mac_float32_pj",
            "energy_vector_op_pj",
            "energy_l0_pj_per_byte",
            "energy_l1_pj_per_byte",
            "energy_l2_pj_per_byte",
            "energy_dram_pj_per_byte",
        )
    },
}


@dataclass(frozen=True)
class NPUConfig:
    """Architecture parameters; field names say tier and unit."""

    # Memory hierarchy (KB).
    l0_register_kb: int = 4
    l1_sram_kb: int = 256
    l2_cmx_kb: int = 512
    # Tiling granules.
    tile_height: int = 32
    tile_width: int = 32
    vector_elements: int = 16
    # Engines.
    matrix_engine_dim: int = 16
    vector_unit_width: int = 64
    activation_unit_lanes: int = 16
    pooling_unit_lanes: int = 16
    dma_channels: int = 2
    dataflow: str = "output_stationary"
    # Bandwidth and latency per tier.
    l1_bandwidth_bytes_per_cycle: float = 128.0
    l2_bandwidth_bytes_per_cycle: float = 64.0
    dram_bandwidth_gb_per_s: float = 16.0
    l1_latency_cycles: int = 2
    l2_latency_cycles: int = 20
    dram_latency_ns: float = 100.0
    # DRAM capacity: an NPU function's inputs, weights, outputs and intermediates must fit.
    dram_mb: int = 4096
    # Op tiles one NPU function may compile to: every op of a fused group counts once per tile
    # (bounds the command stream and compile time).
    max_tiles: int = 1 << 18
    # Energy at the nominal 0.9 V (pJ per MAC / vector op / byte).
    energy_mac_int8_pj: float = 0.23
    energy_mac_int16_pj: float = 0.85
    energy_mac_float16_pj: float = 1.5
    energy_mac_float32_pj: float = 4.6
    energy_vector_op_pj: float = 0.9
    energy_l0_pj_per_byte: float = 0.1
    energy_l1_pj_per_byte: float = 2.8
    energy_l2_pj_per_byte: float = 4.5
    energy_dram_pj_per_byte: float = 64.0
    # Operating point: clock and core voltage (POWER_MODES).
    power_mode: str = "balanced"

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "str":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidConfigError(f"NPUConfig.{field.name} must be a number: {value!r}")
            if field.type == "int" and not isinstance(value, int):
                raise InvalidConfigError(f"NPUConfig.{field.name} must be an int: {value!r}")
            low, high = FIELD_RANGES[field.name]
            if not low <= value <= high:  # also rejects NaN
                raise InvalidConfigError(
                    f"NPUConfig.{field.name} must be in [{low!r}, {high!r}]: {value!r}"
                )
        if not isinstance(self.power_mode, str) or self.power_mode not in POWER_MODES:
            raise InvalidConfigError(
                f"NPUConfig.power_mode {self.power_mode!r} is not one of {sorted(POWER_MODES)}"
            )
        if self.dataflow not in DATAFLOWS:
            raise InvalidConfigError(
                f"NPUConfig.dataflow {self.dataflow!r} is not one of {list(DATAFLOWS)}"
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

    @property
    def clock_mhz(self) -> float:
        return POWER_MODES[self.power_mode][0]

    @property
    def voltage(self) -> float:
        return POWER_MODES[self.power_mode][1]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> NPUConfig:
        """Parses ``to_json()`` output; anything malformed raises InvalidConfigError."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as err:  # bad JSON, bad UTF-8, deep nesting
            raise InvalidConfigError(f"NPUConfig JSON is not valid: {err}") from None
        if not isinstance(data, dict):
            raise InvalidConfigError(f"NPUConfig JSON must be an object, got {type(data).__name__}")
        known = {field.name for field in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidConfigError(f"unknown NPUConfig fields: {sorted(unknown)}")
        return cls(**data)


DEFAULT_CONFIG = NPUConfig()
