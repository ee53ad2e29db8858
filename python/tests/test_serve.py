"""The serve loop in a real child process, spoken to as attest does: handshake, forward calls,
errors of the kernel function as statuses, stdout kept off the protocol, decode, bad requests."""
import numpy as np
import pytest

from attest_kernel import abi, wire
from attest_kernel.storage import to_float32

from conftest import PYTHON, REPO, Served


def forward(served, **fields):
    kind, payload = served.request(wire.FORWARD, wire.encode_problem(**fields))
    assert kind == wire.FORWARD_RESULT, (kind, payload)
    return wire.decode_forward_result(payload)


def small_problem(seed=0, B=1, H=2, Hkv=1, Tq=3, Tk=4, D=2):
    rng = np.random.default_rng(seed)
    return dict(q=rng.standard_normal((B, H, Tq, D), dtype=np.float32),
                k=rng.standard_normal((B, Hkv, Tk, D), dtype=np.float32),
                v=rng.standard_normal((B, Hkv, Tk, D), dtype=np.float32), scale=0.5, causal=True)


def test_hello_gives_the_descriptor_and_bye_exits_0(serve_kernel):
    served = serve_kernel("kernels.py:reference")
    kind, payload = served.hello()
    assert kind == wire.DESCRIPTOR
    d = wire.decode_descriptor(payload)
    assert d["name"] == "test-reference" and "sinks" in d["features"] and d["abi_version"] == 2
    assert served.finish() == (0, "")


def test_end_of_input_exits_0(serve_kernel):
    served = serve_kernel("kernels.py:reference")
    assert served.finish(bye=False)[0] == 0


def test_another_protocol_version_is_refused(serve_kernel):
    served = serve_kernel("kernels.py:reference")
    kind, payload = served.hello(version=2)
    assert kind == wire.ERROR
    assert wire.decode_string(payload) == "protocol version 2 not supported (this kernel speaks 3)"
    assert served.finish(bye=False)[0] == 2


def test_worked_example_of_the_protocol(serve_kernel):
    # impl/PROTOCOL.md's softcap-and-sinks example; the reference values are the document's.
    from test_wire import worked_example
    served = serve_kernel("kernels.py:reference")
    served.hello()
    kind, payload = served.request(wire.FORWARD, worked_example())
    result = wire.decode_forward_result(payload)
    assert result["status"] == 0 and result["error"] == "" and result["path"] == "float64"
    np.testing.assert_allclose(result["o"].view("<f4"), [0.824195, 0, -0.883734, 0], atol=2e-6)
    np.testing.assert_allclose(result["lse"], [2.137703, 0, 1.696759, 1], atol=2e-6)
    assert served.finish()[0] == 0


def test_many_calls_on_one_process(serve_kernel):
    served = serve_kernel("kernels.py:reference")
    served.hello()
    for seed in range(20):
        fields = small_problem(seed, B=2, H=4, Hkv=2, Tq=5, Tk=9, D=3)
        result = forward(served, **fields, kv_valid=[9, seed % 9 + 1])
        assert result["status"] == 0 and result["o"].size == 2 * 4 * 5 * 3 * 4 and result["lse"].size == 2 * 4 * 5
    assert served.finish()[0] == 0


def test_an_exception_is_status_3_with_its_message(serve_kernel):
    served = serve_kernel("kernels.py:raises")
    served.hello()
    for _ in range(5):  # and the process keeps serving
        result = forward(served, **small_problem())
        assert result["status"] == abi.INTERNAL_ERROR
        assert result["error"].startswith("ValueError: the kernel broke on purpose at Tq=3 (at kernels.py:")
        assert result["error"].endswith(" in raises)")
        assert result["o"].size == 0 and result["lse"].size == 0
    code, stderr = served.finish()
    assert code == 0 and stderr.count("Traceback") == 3 and "later tracebacks are not printed" in stderr


@pytest.mark.parametrize("spec, message", [
    ("kernels.py:wrong_shape", "o has shape (1, 2, 3); this problem needs [B][H][Tq][Dv] = (1, 2, 3, 2)"),
    ("kernels.py:wrong_dtype", "o has dtype int64; its storage is f32: return floating-point values (float32)"),
    ("kernels.py:no_lse", "returned no lse, and the declaration has the feature \"lse\": return (o, lse)"),
    ("kernels.py:returns_string", "returned a str, not a tuple (o, lse)"),
    ("kernels.py:exits", "SystemExit: 3"),
])
def test_wrong_outputs_are_clear_status_errors(serve_kernel, spec, message):
    served = serve_kernel(spec)
    served.hello()
    result = forward(served, **small_problem())
    assert result["status"] == abi.INTERNAL_ERROR and message in result["error"], result["error"]
    assert served.finish()[0] == 0


def test_a_refusal_keeps_its_status(serve_kernel):
    served = serve_kernel("kernels.py:refuses")
    served.hello()
    result = forward(served, **small_problem())
    assert result["status"] == abi.UNSUPPORTED and result["error"] == "no problems with Tq=3 here"
    served.finish()


@pytest.mark.parametrize("mode", ["stdio", "fds"])
def test_printing_to_stdout_does_not_corrupt_the_protocol(serve_kernel, mode):
    served = serve_kernel("kernels.py:prints", mode=mode)
    assert served.hello()[0] == wire.DESCRIPTOR
    for seed in range(3):
        result = forward(served, **small_problem(seed))
        assert result["status"] == 0 and result["error"] == ""
    code, stderr = served.finish()
    assert code == 0
    if mode == "stdio":  # run by hand: what the kernel prints goes to stderr
        assert stderr.count("hello from the kernel") >= 300 and "ATSTATST" in stderr
    else:  # as attest runs it: stdout is stdout (attest's stderr), the protocol has its own descriptors
        assert served.stdout.count("hello from the kernel") >= 300


def test_bf16_output_is_rounded_to_storage(serve_kernel):
    served = serve_kernel("kernels.py:bf16")
    assert wire.decode_descriptor(served.hello()[1])["precision"]["o"] == "bf16"
    rng = np.random.default_rng(3)
    bits = lambda shape: (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    q, k, v = bits((1, 1, 2, 4)), bits((1, 1, 3, 4)), bits((1, 1, 3, 4))
    payload = wire.encode_problem({"q": "bf16", "k": "bf16", "v": "bf16"}, q=q, k=k, v=v, scale=0.5)
    result = wire.decode_forward_result(served.request(wire.FORWARD, payload)[1])
    assert result["status"] == 0 and result["o"].size == 1 * 1 * 2 * 4 * 2
    o = to_float32(result["o"].view("<u2"), "bf16").reshape(1, 1, 2, 4)
    qf, kf, vf = (to_float32(x, "bf16").astype(np.float64) for x in (q, k, v))
    s = 0.5 * qf @ kf.swapaxes(-1, -2)
    w = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(o, (w / w.sum(-1, keepdims=True)) @ vf, rtol=2**-8, atol=1e-6)
    served.finish()


def test_decode_unsupported_without_a_decode_function(serve_kernel):
    served = serve_kernel("kernels.py:reference")
    served.hello()
    kind, payload = served.request(wire.DECODE_OPEN, wire.encode_decode_open(1, 2, 1, 4, 4, 0.5))
    opened = wire.decode_decode_opened(payload)
    assert kind == wire.DECODE_OPENED and opened["status"] == abi.UNSUPPORTED and opened["session"] == 0
    assert "does not decode" in opened["error"]
    assert served.request(wire.DECODE_CLOSE, wire.Writer().u64(0).bytes()) == (wire.CLOSED, b"")
    assert served.finish()[0] == 0


def test_decode_session(serve_kernel):
    served = serve_kernel("kernels.py:decoder")
    d = wire.decode_descriptor(served.hello()[1])
    assert "decode" in d["features"]
    opened = wire.decode_decode_opened(served.request(wire.DECODE_OPEN, wire.encode_decode_open(1, 2, 1, 4, 4, 0.5))[1])
    assert opened["status"] == 0 and opened["session"] >= 1
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s, dtype=np.float32) for s in ((1, 2, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4)))
    for start, n in ((0, 2), (2, 1)):
        step = wire.encode_decode_step(opened["session"], n, True, q[:, :, start:start + n], k[:, :, start:start + n],
                                       v[:, :, start:start + n])
        kind, payload = served.request(wire.DECODE_STEP, step)
        result = wire.decode_decode_result(payload)
        assert kind == wire.DECODE_RESULT and result["status"] == 0 and result["lse"].size == 2 * n
        assert result["o"].size == 2 * n * 4 * 4
    o = result["o"].view("<f4").reshape(1, 2, 1, 4)  # the last query sees all three keys
    s = 0.5 * q[:, :, 2:3].astype(np.float64) @ np.repeat(k, 2, axis=1).swapaxes(-1, -2)
    w = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(o, (w / w.sum(-1, keepdims=True)) @ np.repeat(v, 2, axis=1), rtol=1e-5)
    assert served.request(wire.DECODE_CLOSE, wire.Writer().u64(opened["session"]).bytes())[0] == wire.CLOSED
    bad = wire.encode_decode_step(opened["session"], 1, True, q[:, :, :1], k[:, :, :1], v[:, :, :1])
    kind, payload = served.request(wire.DECODE_STEP, bad)  # the session is closed
    assert kind == wire.ERROR and "unknown session" in wire.decode_string(payload)


@pytest.mark.parametrize("raw, message", [
    (wire.encode_frame(wire.BACKWARD, b""), "BACKWARD sent to a kernel declared without backward"),
    (wire.encode_frame(wire.FORWARD, b"\x01\x00"), "message ends early"),
    (b"GET / HTTP/1.1\r\n\r\n", "bad frame magic"),
])
def test_bad_requests_are_error_frames(serve_kernel, raw, message):
    served = serve_kernel("kernels.py:reference")
    served.hello()
    import os
    os.write(served.to_kernel, raw)
    kind, payload = served.receive()
    assert kind == wire.ERROR and message in wire.decode_string(payload)
    assert served.finish(bye=False)[0] == 2


def test_the_numpy_example_runs_directly():
    # ci/examples/process_python/numpy_kernel.py, run the way ctest runs it (no PYTHONPATH needed).
    served = Served([PYTHON, REPO + "/ci/examples/process_python/numpy_kernel.py"], mode="fds")
    d = wire.decode_descriptor(served.hello()[1])
    assert d["name"] == "example-numpy" and "bias" in d["features"] and d["contract"]["q_len"] == (1, 4096)
    result = forward(served, **small_problem(), bias=np.zeros((1, 1, 3, 4), np.float32), bias_per_batch=False,
                     bias_per_head=False)
    assert result["status"] == 0 and result["path"] == "numpy"
    assert served.finish()[0] == 0


@pytest.mark.parametrize("kernel,path", [("packed", "varlen"), ("packed_int64", "varlen-int64")])
def test_a_packed_call_equals_the_padded_one(serve_kernel, kernel, path):
    # FORWARD_PACKED (ABI 2.8) to tests/packed_kernels.py: three sequences, one without queries, laid
    # back out padded, equal the same kernel's FORWARD of the padded batch (key and query padding).
    # packed_int64 (ABI 2.10) is declared on the wire and its function refuses offsets not int64.
    from attest_kernel.packed import encode_packed
    served = serve_kernel("packed_kernels.py:" + kernel)
    features = wire.decode_descriptor(served.hello()[1])["features"]
    assert "packed" in features and ("packed_int64" in features) == (kernel == "packed_int64")
    nq, nk, H, Hkv, D = [2, 0, 3], [3, 1, 4], 2, 1, 2
    padded = small_problem(1, B=3, H=H, Hkv=Hkv, Tq=3, Tk=4, D=D)
    padded.update(q_valid=nq, kv_valid=nk)  # causal, query i at q_offset 1 + i
    whole = forward(served, **padded)
    pad_o = whole["o"].view("<f4").reshape(3, H, 3, D)
    packed = dict(batch=3, heads=H, kv_heads=Hkv, head_dim=D, value_dim=D, max_seqlen_q=3, max_seqlen_k=4,
                  scale=0.5, q_offset=1, causal=1, cu_seqlens_q=np.cumsum([0] + nq), cu_seqlens_k=np.cumsum([0] + nk),
                  q=np.concatenate([padded["q"][b, :, :nq[b]].swapaxes(0, 1) for b in range(3)]),
                  k=np.concatenate([padded["k"][b, :, :nk[b]].swapaxes(0, 1) for b in range(3)]),
                  v=np.concatenate([padded["v"][b, :, :nk[b]].swapaxes(0, 1) for b in range(3)]))
    kind, payload = served.request(wire.FORWARD_PACKED, encode_packed(**packed))
    assert kind == wire.FORWARD_PACKED_RESULT, (kind, payload)
    result = wire.decode_message(wire.FORWARD_PACKED_RESULT, payload)
    assert result["status"] == 0 and result["path"] == path, result
    o, lse = result["o"].reshape(5, H, D), result["lse"].reshape(H, 5)
    np.testing.assert_allclose(o, np.concatenate([pad_o[b, :, :nq[b]].swapaxes(0, 1) for b in range(3)]), atol=1e-6)
    np.testing.assert_allclose(lse, np.concatenate([whole["lse"].reshape(3, H, 3)[b, :, :nq[b]] for b in range(3)],
                                                   axis=1), atol=1e-6)
    packed["cu_seqlens_k"] = np.array([0, 3, 2, 8])  # decreasing: refused before the kernel runs
    kind, payload = served.request(wire.FORWARD_PACKED, encode_packed(**packed))
    assert kind == wire.ERROR and "do not start at 0 or decrease" in wire.decode_string(payload)
