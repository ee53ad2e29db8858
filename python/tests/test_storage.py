"""bf16 / f16 storage as uint16 bit patterns, and the optional torch view."""
import numpy as np
import pytest

from attest_kernel import from_float32, to_float32, torch_available
from attest_kernel.storage import to_torch


def test_bf16_round_trip_and_rounding():
    values = np.array([1.0, -2.5, 0.0, np.inf, -np.inf, 3.0e38], np.float32)
    bits = from_float32(values, "bf16")
    assert bits.dtype == np.uint16 and bits.tolist()[:3] == [0x3F80, 0xC020, 0x0000]
    np.testing.assert_array_equal(to_float32(bits[:5], "bf16"), values[:5])
    # 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0); just above rounds up.
    assert from_float32(np.float32(1 + 2**-8), "bf16") == 0x3F80
    assert from_float32(np.float32(1 + 2**-8 + 2**-20), "bf16") == 0x3F81
    assert from_float32(np.float32(1 + 3 * 2**-8), "bf16") == 0x3F82
    assert np.isnan(to_float32(from_float32(np.float32(np.nan), "bf16"), "bf16"))
    assert from_float32(np.float32(3.4e38), "bf16") == 0x7F80  # past bf16's largest finite value


def test_f16_round_trip():
    values = np.array([1.0, 65504.0, -0.5, 1e-8], np.float32)
    bits = from_float32(values, "f16")
    assert bits.tolist()[:3] == [0x3C00, 0x7BFF, 0xB800]
    np.testing.assert_array_equal(to_float32(bits, "f16"), np.array([1.0, 65504.0, -0.5, 0.0], np.float32))
    assert to_float32(from_float32(np.float32(1e6), "f16"), "f16") == np.inf


def test_f32_is_float32_and_bad_formats_refused():
    assert from_float32([1.0, 2.0], "f32").dtype == np.float32
    assert to_float32(np.float64(0.1), "f32") == np.float32(0.1)
    with pytest.raises(ValueError, match="unknown storage format 'fp8'"):
        to_float32(np.zeros(2), "fp8")
    with pytest.raises(TypeError, match="uint16 bit patterns"):
        to_float32(np.zeros(2, np.float32), "bf16")


@pytest.mark.skipif(not torch_available(), reason="torch is not installed")
def test_torch_views():
    import torch
    bits = from_float32(np.array([1.0, -2.0], np.float32), "bf16")
    tensor = to_torch(bits, "bf16")
    assert tensor.dtype == torch.bfloat16 and tensor.float().tolist() == [1.0, -2.0]
    assert to_torch(np.array([0.5], np.float32), "f32").dtype == torch.float32
