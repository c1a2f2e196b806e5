"""Our estimate for the Ethos-U presets against Arm's Vela 5.2.0 on the committed TFLite models
(tests/python/data/vela_reference.json, made by tools/vela_reference.py; Vela never runs here),
each model read by ``example_npu.load_model`` as a user's .tflite file is.

Every ratio is printed (``pytest -s``); docs/ethos-u.md shows the table and what the model does
not capture. The asserted tolerances are what the presets reach today: the goals of the issue
that asked for them (20% cycles, 25% off-chip bytes) on U55-256 and U65-256, but for one
model's off-chip bytes on U65-256: see that page for the gap.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import example_npu
import pytest
from example_npu import NPUConfig
from example_npu.config import PRESETS
from tflite_models import model_path

DATA = Path(__file__).parent / "data" / "vela_reference.json"
TABLE = json.loads(DATA.read_text())
ROWS = [row for row in TABLE["rows"] if row["accelerator"] in PRESETS]
# Ours / Vela, total cycles and off-chip bytes, that every row stays within (see the docstring):
# every model runs as one int8 NPU program. The issue's presets meet its cycle goal (within 20%:
# 0.81x-1.01x today) and its off-chip goal (within 25%: 0.88x-1.19x); the other two presets are
# looser on cycles (0.77x-1.27x) and meet the off-chip goal too (0.80x-1.00x).
CYCLE_RATIO = {"ethos-u55-256": (0.8, 1.2), "ethos-u65-256": (0.8, 1.2)}
OTHER_CYCLE_RATIO = (0.75, 1.35)
OFF_CHIP_RATIO = {"ethos-u55-256": (0.75, 1.25), "ethos-u65-256": (0.75, 1.25)}
OTHER_OFF_CHIP_RATIO = (0.75, 1.25)


@dataclass(frozen=True)
class Comparison:
    """One (model, preset) row: Vela's numbers beside ours."""

    model: str
    preset: str
    vela: dict
    cycles: int
    latency_us: float
    off_chip_bytes: int
    sram_bytes: int
    macs: int
    mac_utilization: float

    @property
    def cycle_ratio(self) -> float:
        return self.cycles / self.vela["cycles"]

    @property
    def off_chip_ratio(self) -> float:
        return self.off_chip_bytes / max(1, self.vela["off_chip_bytes"])


@functools.cache
def _module(model: str):
    return example_npu.load_model(model_path(model)).mod


def compare(row: dict) -> Comparison:
    """Our estimate of `row`'s model for the preset named like its accelerator."""
    config = NPUConfig.preset(row["accelerator"])
    prof = example_npu.estimate(_module(row["model"]), config)
    macs_per_cycle = config.mac_block_pixels * config.mac_block_channels * config.mac_block_depth
    return Comparison(
        model=row["model"],
        preset=row["accelerator"],
        vela=row,
        cycles=prof.total_cycles,
        latency_us=prof.latency_us,
        off_chip_bytes=prof.bytes_moved["DRAM"],
        sram_bytes=prof.bytes_moved["L2"],
        macs=prof.macs,
        mac_utilization=prof.macs / (prof.total_cycles * macs_per_cycle),
    )


def test_the_reference_covers_every_model_and_the_two_issue_presets():
    models = {row["model"] for row in ROWS}
    assert len(models) == 5 and TABLE["vela"] == "5.2.0"
    for preset in ("ethos-u55-256", "ethos-u65-256"):
        assert {row["model"] for row in ROWS if row["accelerator"] == preset} == models
    for row in ROWS:  # what the presets describe is what Vela ran
        config = NPUConfig.preset(row["accelerator"])
        assert row["clock_mhz"] == config.clock_mhz
        assert row["memory_mode"] == (
            "Shared_Sram" if config.feature_map_memory == "sram" else "Dedicated_Sram_384KB"
        )


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['model']}-{r['accelerator']}")
def test_estimate_against_vela(row):
    ours = compare(row)
    print(
        f"\nvela {ours.model:<20} {ours.preset:<14} cycles {ours.cycles:>9} / "
        f"{row['cycles']:>9} = {ours.cycle_ratio:5.2f}   off-chip bytes "
        f"{ours.off_chip_bytes:>8} / {row['off_chip_bytes']:>8} = {ours.off_chip_ratio:5.2f}   "
        f"MACs {ours.macs} / {row['macs']}"
    )
    low, high = CYCLE_RATIO.get(ours.preset, OTHER_CYCLE_RATIO)
    assert low <= ours.cycle_ratio <= high
    low, high = OFF_CHIP_RATIO.get(ours.preset, OTHER_OFF_CHIP_RATIO)
    assert low <= ours.off_chip_ratio <= high


@pytest.mark.parametrize("layout", ["tensor", "encoded"])
def test_encoded_weights_are_read_once_from_flash(layout):
    """The FC autoencoder at batch 1 reads each int8 weight once (Vela's MAC count is the weight
    count); its feature maps stay in the SRAM arena, so off-chip bytes are the weights'. Encoded
    weights stream contiguously; in their tensor layout a narrow weight tile's rows are strided
    reads rounded up to whole bursts."""
    (row,) = [
        r for r in ROWS if (r["model"], r["accelerator"]) == ("ad_autoencoder", "ethos-u55-256")
    ]
    config = NPUConfig.preset("ethos-u55-256", weight_layout=layout, weight_record_bytes=0)
    prof = example_npu.estimate(_module("ad_autoencoder"), config)
    if layout == "encoded":
        assert prof.bytes_moved["DRAM"] == row["macs"]
    else:
        assert prof.bytes_moved["DRAM"] > row["macs"]


def test_per_channel_records_are_read_with_the_weights():
    """Each output channel's bias, scale and shift (10 bytes) travel with its weights: the FC
    autoencoder's 1,672 output channels add 16,720 bytes to its 264,192 weights, 0.2% below
    Vela's 281,504 off-chip bytes for it on U55."""
    (row,) = [
        r for r in ROWS if (r["model"], r["accelerator"]) == ("ad_autoencoder", "ethos-u55-256")
    ]

    def off_chip(**changes) -> int:
        config = NPUConfig.preset("ethos-u55-256", **changes)
        return example_npu.estimate(_module("ad_autoencoder"), config).bytes_moved["DRAM"]

    with_records = off_chip()
    assert with_records - off_chip(weight_record_bytes=0) == 10 * (4 * 128 + 8 + 4 * 128 + 640)
    assert abs(with_records / row["off_chip_bytes"] - 1) < 0.01


def test_an_arena_too_small_for_every_intermediate_still_holds_some():
    """Intermediates that fit beside those already kept over their whole life stay in SRAM, the
    rest go to DRAM: a smaller arena moves more bytes off chip, never fewer than a larger one,
    but fewer than no arena at all (whole intermediates: no cascades)."""
    module = _module("mobilenet_v2_035_96")

    def off_chip(**changes) -> int:
        config = NPUConfig.preset("ethos-u65-256", cascade_stripe_rows=0, **changes)
        return example_npu.estimate(module, config).bytes_moved["DRAM"]

    all_in_sram, some_in_sram = off_chip(), off_chip(sram_arena_kb=64)
    assert all_in_sram < some_in_sram < off_chip(feature_map_memory="dram")
    sweep = [off_chip(sram_arena_kb=kb) for kb in (16, 32, 64, 128, 256)]
    assert sweep == sorted(sweep, reverse=True) and sweep[-1] >= all_in_sram


def test_a_three_channel_input_is_read_element_by_element_from_dram():
    """U65 keeps the network input in DRAM and fetches it a position's channels at a time: a
    3-channel int8 image is read element by element, each element a 128-byte burst over the
    8-byte granule, 16 bytes (Vela: 62,480 DRAM feature-map bytes for ResNet-8's 3,072-byte
    input, 16 x 1.27 for the 3x3 kernel's halo; our tiles' halos differ, within 25%). Without the
    rule the input is read once."""
    module = _module("ic_resnet8")

    def off_chip(**changes) -> int:
        config = NPUConfig.preset("ethos-u65-256", **changes)
        return example_npu.estimate(module, config).bytes_moved["DRAM"]

    input_bytes = 32 * 32 * 3
    extra = off_chip() - off_chip(fm_read_granule_bytes=0)
    assert 16 * input_bytes <= extra <= 1.25 * 62_480


def test_staged_weights_load_while_the_previous_layer_computes():
    """With weight_staging "always" each layer's weights go to the L2 weight buffer while the
    previous layer computes, as Ethos-U's DMA fills its SRAM weight buffers: KWS's pointwise
    layers no longer wait for their flash weights after the depthwise layer before them
    (Vela: 58,356 cycles; 71,573 when weights wait, 54,909 staged)."""
    module = _module("kws_dscnn")

    def cycles(staging: str) -> int:
        config = NPUConfig.preset("ethos-u55-256", weight_staging=staging)
        return example_npu.estimate(module, config).total_cycles

    (row,) = [r for r in ROWS if (r["model"], r["accelerator"]) == ("kws_dscnn", "ethos-u55-256")]
    staged, reused = cycles("always"), cycles("reused")
    assert staged < reused
    assert abs(staged / row["cycles"] - 1) <= 0.2 < abs(reused / row["cycles"] - 1)


def test_a_narrow_input_is_read_once_per_block_of_output_channels():
    """With narrow_input_reread_channels=16 (U65's preset) a convolution input of at most 8 int8
    channels is read once per 16 output channels, as Vela reads it when it picks 16-deep output
    blocks (one-conv probes on U65-256, 32x32 maps of 1, 3 or 8 channels, 16 to 128 output
    channels: DRAM bytes grow by one input read per 16 channels). KWS's first convolution
    (1-channel 49x10 input, 64 output channels) then reads its input 4 times instead of once, and
    U65-256's off-chip bytes come within 25% of Vela's (0.58x without it)."""
    module = _module("kws_dscnn")

    def off_chip(**changes) -> int:
        config = NPUConfig.preset("ethos-u65-256", **changes)
        return example_npu.estimate(module, config).bytes_moved["DRAM"]

    once = off_chip(narrow_input_reread_channels=0)
    blocks_of_16 = off_chip()
    blocks_of_32 = off_chip(narrow_input_reread_channels=32)
    assert blocks_of_16 - once == 3 * (blocks_of_32 - once) > 0
    assert off_chip(narrow_input_reread_channels=64) == once
    (row,) = [r for r in ROWS if (r["model"], r["accelerator"]) == ("kws_dscnn", "ethos-u65-256")]
    assert once / row["off_chip_bytes"] < 0.75 <= blocks_of_16 / row["off_chip_bytes"] <= 1.25


def test_layers_cascaded_through_sram_keep_their_intermediates_on_chip():
    """With cascade_stripe_rows an intermediate that only the next layer reads takes a stripe of
    rows of the SRAM arena, not its whole size (Vela cascades such layers, e.g. MobileNetV2's
    expansion, depthwise and projection, through SRAM in stripes of 3 to 19 rows): in an arena
    too small for MobileNetV2-0.35's 48x48 maps fewer bytes go off chip than without cascades,
    as many as with no arena only when every stripe is a whole map; with the preset's 384 KB
    arena everything fits whole, so cascades change nothing."""
    module = _module("mobilenet_v2_035_96")

    def off_chip(**changes) -> int:
        config = NPUConfig.preset("ethos-u65-256", **changes)
        return example_npu.estimate(module, config).bytes_moved["DRAM"]

    small = {"sram_arena_kb": 48}
    whole = off_chip(cascade_stripe_rows=0, **small)
    striped = [off_chip(cascade_stripe_rows=rows, **small) for rows in (4, 16, 48)]
    assert striped[0] <= striped[1] < whole == striped[2]
    assert off_chip() == off_chip(cascade_stripe_rows=0)


def test_weights_from_flash_stream_beside_the_feature_maps():
    """On U55 the weights come from flash over an AXI port of their own (Vela's system
    configuration), so the presets give off-chip weight reads a DMA channel of their own: a long
    weight transfer no longer holds a channel that feature maps need. VWW's cycles drop and come
    closer to Vela's; its bytes do not change."""
    module = _module("vww_mobilenet_v1")
    (row,) = [
        r for r in ROWS if (r["model"], r["accelerator"]) == ("vww_mobilenet_v1", "ethos-u55-256")
    ]

    def profile(channels: int):
        config = NPUConfig.preset("ethos-u55-256", weight_dma_channels=channels)
        return example_npu.estimate(module, config)

    shared, own = profile(0), profile(1)
    assert own.total_cycles < shared.total_cycles
    assert own.bytes_moved == shared.bytes_moved
    assert abs(own.total_cycles / row["cycles"] - 1) < abs(shared.total_cycles / row["cycles"] - 1)
