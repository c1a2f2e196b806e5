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

# What the matrix engine's cells hold during a fold, or "block" for a MAC array that computes
# blocks of pixels x channels x depth per cycle (src/config/matrix_engine.h).
DATAFLOWS = ("output_stationary", "weight_stationary", "block")
# Which engine's timeline depthwise / elementwise work occupies.
WORK_ENGINES = ("vector", "matrix")
# Where constant weights are read from.
WEIGHT_MEMORIES = ("dram", "flash")
# How weights are stored: in their tensor layout (a weight tile is a strided read of whole
# bursts) or encoded offline in the order the MAC array reads them (one contiguous run per tile).
WEIGHT_LAYOUTS = ("tensor", "encoded")
# Which weights are staged in L2 before their layer: those later tiles read again, or all that fit
# (a weight buffer the DMA fills while the previous layer computes).
WEIGHT_STAGINGS = ("reused", "always")
# Which feature maps live in the SRAM arena: none, all, or only the intermediates.
FEATURE_MAP_MEMORIES = ("dram", "sram", "sram_intermediates")

# The allowed values of every string field.
STRING_CHOICES: dict[str, tuple[str, ...]] = {
    "power_mode": tuple(POWER_MODES),
    "dataflow": DATAFLOWS,
    "depthwise_engine": WORK_ENGINES,
    "elementwise_engine": WORK_ENGINES,
    "weight_memory": WEIGHT_MEMORIES,
    "weight_layout": WEIGHT_LAYOUTS,
    "weight_staging": WEIGHT_STAGINGS,
    "feature_map_memory": FEATURE_MAP_MEMORIES,
}

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
    "weight_dma_channels": (0, 64),
    "mac_block_pixels": (1, 1024),
    "mac_block_channels": (1, 1024),
    "mac_block_depth": (1, 1024),
    "depthwise_macs_per_cycle": (1, 1 << 20),
    "op_setup_cycles": (0, 1_000_000),
    "sram_arena_kb": (0, 1 << 20),
    "sram_latency_cycles": (1, 1_000_000),
    "fm_read_granule_bytes": (0, 1024),
    "dram_burst_bytes": (1, 65536),
    "sram_burst_bytes": (1, 65536),
    "narrow_input_reread_channels": (0, 65536),
    "cascade_stripe_rows": (0, 65536),
    "weight_record_bytes": (0, 1024),
    "l1_latency_cycles": (1, 1_000_000),
    "l2_latency_cycles": (1, 1_000_000),
    "dram_mb": (1, 1 << 20),
    "max_tiles": (1, 1 << 24),
    "l1_bandwidth_bytes_per_cycle": (1e-3, 1e6),
    "l2_bandwidth_bytes_per_cycle": (1e-3, 1e6),
    "dram_bandwidth_gb_per_s": (1e-3, 1e6),
    "dram_latency_ns": (1e-3, 1e6),
    "flash_bandwidth_gb_per_s": (1e-3, 1e6),
    "flash_latency_ns": (1e-3, 1e6),
    "sram_bandwidth_bytes_per_cycle": (1e-3, 1e6),
    "peak_clock_mhz": (1, 1e5),
    "elementwise_elements_per_cycle": (1e-3, 1e6),
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
    # Off-chip weight reads: 0 (on the dma_channels, beside feature maps), or on this many
    # channels of their own (Ethos-U's DMA streams weights while its core moves feature maps).
    weight_dma_channels: int = 0
    dataflow: str = "output_stationary"
    # The "block" dataflow's block: output pixels x output channels per cycle, each reduced over
    # mac_block_depth products.
    mac_block_pixels: int = 4
    mac_block_channels: int = 8
    mac_block_depth: int = 8
    # Depthwise convolutions: on the vector unit at its lane rate ("vector") or on the MAC array
    # at depthwise_macs_per_cycle ("matrix").
    depthwise_engine: str = "vector"
    depthwise_macs_per_cycle: int = 256
    # Vector and pooling work: on their own units at their lane rates, overlapping the MAC array
    # ("vector"), or on the MAC array's timeline, one op at a time, at
    # elementwise_elements_per_cycle 8-bit elements ("matrix"; activations and requantization then
    # run in the array's output stage, the activation unit).
    elementwise_engine: str = "vector"
    elementwise_elements_per_cycle: float = 16.0
    # Fixed cycles of every fused op (programming the engines for it).
    op_setup_cycles: int = 0
    # Bandwidth and latency per tier.
    l1_bandwidth_bytes_per_cycle: float = 128.0
    l2_bandwidth_bytes_per_cycle: float = 64.0
    dram_bandwidth_gb_per_s: float = 16.0
    l1_latency_cycles: int = 2
    l2_latency_cycles: int = 20
    dram_latency_ns: float = 100.0
    # Weights in "dram" or in off-chip "flash" (its own port, bandwidth and latency).
    weight_memory: str = "dram"
    # Weights in their tensor layout ("tensor") or in the array's read order ("encoded").
    weight_layout: str = "tensor"
    # Per output channel of a quantized layer, bytes of parameters (bias, requantization scale
    # and shift) stored beside its weights and read with every weight tile.
    weight_record_bytes: int = 0
    # Weights staged in L2 before their layer reads them: those later tiles read again
    # ("reused"), or every weight that fits ("always": the DMA fills the buffer while the
    # previous layer computes).
    weight_staging: str = "reused"
    flash_bandwidth_gb_per_s: float = 0.5
    flash_latency_ns: float = 1000.0
    # Feature maps in "dram", or in an on-chip SRAM arena of sram_arena_kb on its own port: all of
    # them ("sram") or only the intermediates ("sram_intermediates"), when they fit.
    feature_map_memory: str = "dram"
    sram_arena_kb: int = 0
    sram_bandwidth_bytes_per_cycle: float = 16.0
    sram_latency_cycles: int = 32
    # Intermediates only the next fused group reads: 0 (the arena holds them whole or not at
    # all), or the rows (per image) of one the arena holds at a time while the two groups run
    # as a cascade, the consumer reading each stripe as the producer writes it (Vela cascades
    # such layers through SRAM when their maps do not fit it).
    cascade_stripe_rows: int = 0
    # Feature-map reads: 0 (the DMA reads contiguous runs), or the bytes of one position's
    # channels the NPU fetches at a time; a feature map whose innermost run is shorter (a 1- or
    # 3-channel image) is read element by element, each element costing the memory's burst over
    # this granule.
    fm_read_granule_bytes: int = 0
    dram_burst_bytes: int = 32
    sram_burst_bytes: int = 32
    # Convolution inputs of at most fm_read_granule_bytes per position (1 to 8 int8 channels): 0
    # (read once per tile), or the output channels of one block of the MAC array's work; the
    # input is read again for every such block (Ethos-U reads the input feature map once per
    # output block, as deep as Vela's blocks: docs/ethos-u.md).
    narrow_input_reread_channels: int = 0
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
    # Operating point: clock and core voltage (POWER_MODES, whose clocks are quoted for a
    # peak_clock_mhz of 1000 and scale with it).
    power_mode: str = "balanced"
    peak_clock_mhz: float = 1000.0

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
        for name, choices in STRING_CHOICES.items():
            value = getattr(self, name)
            if not isinstance(value, str) or value not in choices:
                raise InvalidConfigError(
                    f"NPUConfig.{name} {value!r} is not one of {list(choices)}"
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
        return POWER_MODES[self.power_mode][0] * self.peak_clock_mhz / 1000.0

    @property
    def voltage(self) -> float:
        return POWER_MODES[self.power_mode][1]

    @classmethod
    def preset(cls, name: str, **changes: object) -> NPUConfig:
        """The NPUConfig of a named NPU (``PRESETS``: ``ethos-u55-256`` ...), with ``changes``
        to its fields; an unknown name raises InvalidConfigError listing the known ones."""
        if name not in PRESETS:
            raise InvalidConfigError(f"unknown NPU preset {name!r}: one of {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **changes})

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


def _ethos_u(macs: int, system: dict[str, object]) -> dict[str, object]:
    """An Arm Ethos-U NPU with `macs` int8 MACs per cycle in `system` (docs/ethos-u.md gives the
    source of every figure). The MAC array computes blocks of output pixels x 8 output channels,
    each over 8 input channels of one kernel tap per cycle (Arm: 2x2x8 output micro-blocks with
    8-deep input blocks on the 256-MAC configurations, 2x1x8 on U55-128; U65-512 is two
    256-MAC cores splitting the output channels). Depthwise convolutions, pooling and elementwise
    ops run on the same array, one op at a time; activations in its output stage.
    """
    pixels = 2 if macs == 128 else 4
    return {
        "dataflow": "block",
        "matrix_engine_dim": 16,
        "mac_block_pixels": pixels,
        "mac_block_channels": macs // (pixels * 8),
        "mac_block_depth": 8,
        "depthwise_engine": "matrix",
        "depthwise_macs_per_cycle": macs // 16,
        "elementwise_engine": "matrix",
        "elementwise_elements_per_cycle": 4 / 3,
        "op_setup_cycles": 16,
        "weight_layout": "encoded",  # Vela encodes each weight stream in the array's read order
        "weight_record_bytes": 10,  # 40-bit bias, 32-bit scale, 6-bit shift per output channel
        "weight_staging": "always",  # Vela buffers each layer's weights in SRAM ahead of it
        "fm_read_granule_bytes": 8,  # a position's 8 channels (one brick) per feature-map access
        "cascade_stripe_rows": 16,  # Vela cascades layers through SRAM in stripes of 3-19 rows
        "activation_unit_lanes": macs // 8,  # the output stage: one micro-block per cycle
        "l1_sram_kb": 48 * max(1, macs // 256),  # SHRAM: 48 banks of 1 KB per 256-MAC core
        "l1_bandwidth_bytes_per_cycle": 64.0,
        "power_mode": "high_performance",
        **system,
    }


# Vela's Ethos_U55_High_End_Embedded system with its Shared_Sram memory mode: 500 MHz, feature
# maps in on-chip SRAM (64-bit AXI at the core clock: 8 bytes per cycle, 32 cycles latency),
# weights in off-chip flash at 1/8 of the core clock (1 byte per cycle = 0.5 GB/s, 64 flash
# cycles = 1024 ns latency).
_U55_HIGH_END_EMBEDDED: dict[str, object] = {
    "peak_clock_mhz": 500.0,
    "feature_map_memory": "sram",
    "sram_arena_kb": 1 << 20,  # Shared_Sram sets no arena size: whatever the network needs
    "sram_bandwidth_bytes_per_cycle": 8.0,
    "sram_latency_cycles": 32,
    "sram_burst_bytes": 32,
    "narrow_input_reread_channels": 32,  # Vela's U55 blocks on first layers: 32 channels deep
    "weight_dma_channels": 1,  # flash is on its own AXI port: weights stream beside feature maps
    "l2_cmx_kb": 64,
    "l2_bandwidth_bytes_per_cycle": 8.0,
    "l2_latency_cycles": 32,
    "weight_memory": "flash",
    "flash_bandwidth_gb_per_s": 0.5,
    "flash_latency_ns": 1024.0,
    "dram_bandwidth_gb_per_s": 4.0,
}
# Vela's Ethos_U65_Client_Server system with its Dedicated_Sram_384KB memory mode: 1 GHz, weights
# and feature maps in DRAM (128-bit AXI at 3/4 of the core clock: 12 GB/s, 500 DRAM cycles
# latency), a 384 KB SRAM (16 bytes per cycle) caching the intermediates that fit.
_U65_CLIENT_SERVER: dict[str, object] = {
    "peak_clock_mhz": 1000.0,
    "feature_map_memory": "sram_intermediates",
    "sram_arena_kb": 384,
    "sram_bandwidth_bytes_per_cycle": 16.0,
    "sram_latency_cycles": 32,
    "sram_burst_bytes": 32,
    "dram_burst_bytes": 128,
    "narrow_input_reread_channels": 16,  # Vela's U65 blocks on first layers: 16 channels deep
    "l2_cmx_kb": 64,
    "l2_bandwidth_bytes_per_cycle": 16.0,
    "l2_latency_cycles": 32,
    "weight_memory": "dram",
    "dram_bandwidth_gb_per_s": 12.0,
    "dram_latency_ns": 667.0,
}

# Named NPUs: NPUConfig.preset(name) and the CLI's --config NAME.
PRESETS: dict[str, dict[str, object]] = {
    "ethos-u55-128": _ethos_u(128, _U55_HIGH_END_EMBEDDED),
    "ethos-u55-256": _ethos_u(256, _U55_HIGH_END_EMBEDDED),
    "ethos-u65-256": _ethos_u(256, _U65_CLIENT_SERVER),
    "ethos-u65-512": _ethos_u(512, _U65_CLIENT_SERVER),
}
