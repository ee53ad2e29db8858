"""The quantized formats as the Python package reads them (attest_kernel.quantized): bytes built
by hand from the format's definition decode to the values it defines, and a serving decoder per
format is CERTIFIED by attest through decode sessions and block tables, while one misreading its
cache is not. The certify runs need ATTEST; skipped without it."""
import numpy as np
import pytest

from attest_kernel import quantized
from test_end_to_end import ATTEST, certify  # noqa: F401 (ATTEST: the skip condition)

HALF = (0x00, 0x38)  # f16 0.5, little endian
QUARTER = (0x00, 0x34)  # f16 0.25


def values(raw, fmt, shape, head_scales=None):
    return quantized.decode(np.array(raw, dtype=np.uint8), fmt, shape, head_scales).float32()


def test_q8_groups_of_32_each_with_its_scale():
    codes = list(range(-16, 16)) + [127, -127, 3]  # 35 values: a group of 32, then one of 3
    raw = [*HALF, *[c & 0xFF for c in codes[:32]], *QUARTER, *[c & 0xFF for c in codes[32:]]]
    got = values(raw, "q8", (1, 35))
    assert got.tolist() == [[0.5 * c for c in codes[:32]] + [0.25 * c for c in codes[32:]]]


def test_q4_two_codes_a_byte_low_nibble_first_offset_by_8():
    # codes -8, 7, 0, 1, -1 in a 5-wide row: bytes (0+8)|(7+8)<<4, (0+8)|(1+8)<<4, (-1+8)
    raw = [*HALF, 0x00 | 0xF0, 0x08 | 0x90, 0x07]
    assert values(raw, "q4", (1, 5)).tolist() == [[-4.0, 3.5, 0.0, 0.5, -0.5]]


def test_q4_0_is_ggml_block_q4_0_byte_j_holds_values_j_and_j_plus_16():
    codes = [(j % 16) - 8 for j in range(32)]  # -8 .. 7, twice
    raw = [*HALF, *[(codes[j] + 8) | (codes[j + 16] + 8) << 4 for j in range(16)]]
    assert values(raw, "q4_0", (1, 32)).tolist() == [[0.5 * c for c in codes]]
    # a group of 5 pairs j with j + 3: codes -8, 7, 0, 1, -1
    raw = [*HALF, 0x00 | 0x90, 0x0F | 0x70, 0x08 | 0x80]
    assert values(raw, "q4_0", (1, 5)).tolist() == [[-4.0, 3.5, 0.0, 0.5, -0.5]]


def test_q8_token_one_scale_per_row_of_any_width():
    raw = [*HALF, *([2] * 40), *QUARTER, *([0xFE] * 40)]
    got = values(raw, "q8_token", (2, 40))
    assert got[0].tolist() == [1.0] * 40 and got[1].tolist() == [-0.5] * 40


def test_q8_head_one_scale_per_head_in_a_problem_and_none_in_a_step():
    block = [*HALF, 1, 2, 3, 4]  # one kv head, 2 tokens of width 2
    assert values(block, "q8_head", (1, 2, 2)).tolist() == [[[0.5, 1.0], [1.5, 2.0]]]
    step = values([1, 2, 3, 4], "q8_head", (1, 2, 2), head_scales=np.array([0.25], dtype=np.float32))
    assert step.tolist() == [[[0.25, 0.5], [0.75, 1.0]]]


@pytest.mark.parametrize("fmt, bits, value", [
    ("e4m3", 0x38, 1.0), ("e4m3", 0x7E, 448.0), ("e4m3", 0x01, 2.0 ** -9), ("e4m3", 0xC0, -2.0),
    ("e5m2", 0x3C, 1.0), ("e5m2", 0x7B, 57344.0), ("e5m2", 0x01, 2.0 ** -16), ("e5m2", 0x7C, np.inf),
])
def test_fp8_bit_patterns(fmt, bits, value):
    assert values([bits], fmt, (1, 1))[0, 0] == value


@pytest.mark.parametrize("fmt, bits", [("e4m3", 0x7F), ("e4m3", 0xFF), ("e5m2", 0x7D), ("e5m2", 0xFF)])
def test_fp8_nan_patterns(fmt, bits):
    assert np.isnan(values([bits], fmt, (1, 1))[0, 0])


def test_a_wrong_size_is_refused_by_name():
    with pytest.raises(ValueError, match="q4 data of 4 bytes, expected 5"):
        values([0, 0, 0, 0], "q4", (1, 5))


CHECKS = "decode_matches_prefill,ragged_batch_equals_single"


@pytest.mark.parametrize("fmt", ["q4", "q8_token", "q8_head", "e4m3", "e5m2"])
def test_a_serving_decoder_of_each_format_is_certified(tmp_path, fmt):
    run = certify("serving_kernels.py:serving_" + fmt, tmp_path, "--check", CHECKS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "CERTIFIED numpy-serving-%s for causal, gqa, lse, decode" % fmt.replace("_", "-") in run.stdout
    assert "k %s, v %s" % (fmt, fmt) in run.stdout


def test_a_decoder_misreading_its_cache_is_not_certified(tmp_path):
    run = certify("serving_kernels.py:e4m3_read_as_e5m2", tmp_path, "--check", CHECKS)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert "NOT CERTIFIED numpy-serving-e4m3-read-as-e5m2: failed: decode_matches_prefill" in run.stdout


@pytest.mark.parametrize("fmt", quantized.QUANTIZED)
def test_no_rows_decode_to_no_values(fmt):
    # A sequence with no new token in a paged step: its K and V are empty (q4 once failed here).
    heads = np.ones(1, dtype=np.float32) if fmt == "q8_head" else None
    assert values([], fmt, (1, 0, 5), heads).shape == (1, 0, 5)
