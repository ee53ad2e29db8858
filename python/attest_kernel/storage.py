"""Storage formats: float32 arrays, and bf16 / f16 buffers held as uint16 bit patterns."""
import numpy as np

STORAGE_FORMATS = ("f32", "bf16", "f16")


def _check_format(fmt):
    if fmt not in STORAGE_FORMATS:
        raise ValueError("unknown storage format %r (expected one of %s)" % (fmt, ", ".join(STORAGE_FORMATS)))


def to_float32(array, fmt):
    """The values of `array` held in storage format `fmt` ("f32", "bf16" or "f16") as float32.

    A bf16 or f16 array is a uint16 array of bit patterns (as the problem's q, k, v arrive); every
    value is exactly representable in float32, so this never rounds."""
    _check_format(fmt)
    array = np.asarray(array)
    if fmt == "f32":
        return array.astype(np.float32, copy=False)
    if array.dtype != np.uint16:
        raise TypeError("a %s array holds uint16 bit patterns, not %s" % (fmt, array.dtype))
    if fmt == "f16":
        return array.view(np.float16).astype(np.float32)
    return (array.astype(np.uint32) << 16).view(np.float32)


def from_float32(array, fmt):
    """`array` (any float values) rounded to storage format `fmt`, to nearest even.

    "f32" gives float32; "bf16" and "f16" give uint16 bit patterns. NaN stays NaN; values past
    the format's range become infinities."""
    _check_format(fmt)
    array = np.asarray(array)
    if fmt == "f32":
        return array.astype(np.float32)
    if fmt == "f16":
        with np.errstate(over="ignore"):  # past 65504: infinity, as the format says
            return array.astype(np.float16).view(np.uint16)  # numpy rounds to nearest even
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(bits.view(np.float32)), quiet_nan, rounded)


def itemsize(fmt):
    """Bytes per element of a storage format."""
    _check_format(fmt)
    return 4 if fmt == "f32" else 2


def numpy_dtype(fmt):
    """The dtype a buffer in storage format `fmt` arrives as: float32, or uint16 bit patterns."""
    _check_format(fmt)
    return np.dtype("<f4") if fmt == "f32" else np.dtype("<u2")


# --- torch (optional: only when torch is importable) ---------------------------------------------

def torch_available():
    import importlib.util
    return importlib.util.find_spec("torch") is not None


def to_torch(array, fmt):
    """A numpy buffer in storage format `fmt` as a torch tensor of that type (float32, bfloat16 or
    float16), sharing memory where it can. Raises ImportError without torch."""
    import torch
    _check_format(fmt)
    array = np.asarray(array)
    if fmt == "f32":
        return torch.from_numpy(np.array(array, dtype=np.float32, copy=not array.flags.writeable))
    bits = np.array(array, dtype=np.uint16, copy=True).view(np.int16)  # torch has no uint16 before 2.3
    return torch.from_numpy(bits).view(torch.bfloat16 if fmt == "bf16" else torch.float16)


def is_torch_tensor(value):
    module = type(value).__module__
    return module.startswith("torch") and hasattr(value, "detach") and hasattr(value, "dtype")


def torch_to_numpy(tensor):
    """(array, kind): a torch tensor as numpy; kind is "bf16" when the array holds bf16 bit patterns."""
    import torch
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16), "bf16"
    return tensor.numpy(), None
