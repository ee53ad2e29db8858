"""Round trips of frames and payloads, and the worked example of impl/PROTOCOL.md, byte for byte."""
import math

import numpy as np
import pytest

from attest_kernel import Contract, Declaration, DeclarationError, Precision, abi, wire
from attest_kernel.wire import ProtocolError, Reader, Writer

# impl/PROTOCOL.md, "A worked example: softcap and sinks": the FORWARD payload, 228 bytes.
WORKED_EXAMPLE = """
01000000 02000000 01000000 02000000 02000000 01000000 01000000
00000000 0000f03f
00000000 00000000
00000000
03000000 00000000 00000000 00000000 00000000
00000000
00000000 0088c340
00000000 00000000
00000000 00000000
00000000 00000000
00000000 00000000
04000000 00000000 01010000
00000000 00000040
00000000 00000000
00000000 00000000
01000000 01000000
02000000 00000000 00000000 0000803f
10000000 00000000 00004040 0000003f 000080bf 00000040
08000000 00000000 00000040 000080bf
08000000 00000000 0000803f 000000c0
"""
F32 = {"q": "f32", "k": "f32", "v": "f32", "bias": "f32"}


def worked_example():
    return bytes.fromhex("".join(WORKED_EXAMPLE.split()))


def test_frame_header_round_trip():
    frame = wire.encode_frame(wire.FORWARD, b"abc")
    assert frame[:4] == b"ATST" and len(frame) == 19
    assert wire.parse_header(frame[:16]) == (wire.FORWARD, 3)
    assert wire.split_frames(frame + wire.encode_frame(wire.BYE)) == [(wire.FORWARD, b"abc"), (wire.BYE, b"")]


@pytest.mark.parametrize("header, message", [
    (b"XTST" + bytes(12), "bad frame magic"),
    (wire.frame_header(0, 0), "unknown message type 0"),
    (wire.frame_header(wire.LAST_TYPE + 1, 0), "unknown message type %d" % (wire.LAST_TYPE + 1)),
    (wire.frame_header(wire.FORWARD, wire.MAX_PAYLOAD + 1), "too large"),
])
def test_bad_headers_refused(header, message):
    with pytest.raises(ProtocolError, match=message):
        wire.parse_header(header)


def test_truncated_frames_refused():
    with pytest.raises(ProtocolError, match="inside a message"):
        wire.split_frames(wire.encode_frame(wire.FORWARD, b"abcdef")[:-1])


def test_scalars_strings_arrays_round_trip():
    w = Writer().u32(0xFFFFFFFF).i32(-7).u64(1 << 63).i64(-(1 << 62)).f64(-0.1).str("é-path").str("")
    w.array([1.5, -2.0], "<f4").array([-1, 2, 3], "<i4").array([], "u1").bytes_array(np.arange(3, dtype=np.uint16))
    r = Reader(w.bytes())
    assert (r.u32(), r.i32(), r.u64(), r.i64(), r.f64(), r.str(), r.str()) == \
        (0xFFFFFFFF, -7, 1 << 63, -(1 << 62), -0.1, "é-path", "")
    assert r.array("<f4").tolist() == [1.5, -2.0]
    assert r.array("<i4").tolist() == [-1, 2, 3]
    assert r.array("u1").size == 0
    assert r.array("u1").view("<u2").tolist() == [0, 1, 2]
    r.expect_end()


def test_short_payloads_refused():
    with pytest.raises(ProtocolError, match="ends early"):
        Reader(b"\x01\x00").u32()
    with pytest.raises(ProtocolError, match="longer than its message"):
        Reader(Writer().u64(5).bytes() + b"\x00" * 8).array("<f4")
    with pytest.raises(ProtocolError, match="trailing bytes"):
        Reader(b"\x00" * 5).expect_end()


def test_descriptor_round_trip():
    declaration = Declaration(
        name="round-trip", features=["causal", "gqa", "lse", "lookahead", "bias"], empty_rows="nan",
        precision=Precision(scores="f32", exp_ulps=0.5, bias="bf16", k_entry="f16"),
        contract=Contract(head_dims=[64, 128], batch=(1, 8), q_len=(1, 4096), q_offset=(-5, 10), query_tile=64,
                          key_tile=128, dk_equals_dv=True, inputs_finite=True, max_abs_value=4.0,
                          alibi_slopes="standard"),
        paths=[("fast", Precision(bias="bf16", p="bf16", k_entry="f16", weight_sum="f32", pv_unnormalised=True))])
    d = wire.decode_descriptor(wire.encode_descriptor(declaration))
    assert d["abi_version"] == 2 and d["name"] == "round-trip" and d["empty_rows"] == abi.EMPTY_ROWS["nan"]
    assert d["features"] == ["causal", "gqa", "lse", "bias", "lookahead"]
    assert d["capabilities"] == (1 << 0) | (1 << 6) | (1 << 7) | (1 << 13) | (1 << 15)
    assert d["precision"]["exp_ulps"] == 0.5 and d["precision"]["bias"] == "bf16" and d["precision"]["k_entry"] == "f16"
    c = d["contract"]
    assert c["head_dims"] == [64, 128] and c["batch"] == (1, 8) and c["q_offset"] == (-5, 10)
    assert c["heads"] == (0, 0) and c["query_tile"] == 64 and c["key_tile"] == 128 and c["dk_equals_dv"] == 1
    assert c["inputs"] == 1 and c["max_abs_value"] == 4.0 and c["alibi_slopes"] == 1
    assert c["deterministic_backward"] == 0 and d["declared_paths"] == []
    assert [name for name, _ in d["paths"]] == ["fast"] and d["paths"][0][1]["p"] == "bf16"
    assert d["paths"][0][1]["weight_sum"] == "f32" and d["paths"][0][1]["pv_unnormalised"]


def test_an_additive_mask_declares_masked_scored():
    for contract, value in ((Contract(inputs="masked_scored"), 2), (Contract(inputs_finite=True), 1), (Contract(), 0)):
        d = wire.decode_descriptor(wire.encode_descriptor(Declaration(name="additive", contract=contract)))
        assert d["contract"]["inputs"] == value == abi.INPUT_DOMAINS[contract.inputs]


def test_value_widths_and_alibi_or_bias_travel_in_the_2_7_section():
    contract = Contract(value_dims=[32, 64], value_dim=(16, 256), alibi_excludes_bias=True)
    d = wire.decode_descriptor(wire.encode_descriptor(Declaration(name="ggml", features=["alibi", "bias"],
                                                                  contract=contract)))
    c = d["contract"]
    assert c["value_dims"] == [32, 64] and c["value_dim"] == (16, 256) and c["alibi_excludes_bias"] == 1
    assert d["cache_policy"] == "full" and d["page_tokens"] == 0  # 2.4's section, zeros, before 2.7's
    assert "value_dims" not in wire.decode_descriptor(wire.encode_descriptor(Declaration(name="plain")))["contract"]
    with pytest.raises(DeclarationError, match="contract.value_dims"):
        Contract(dk_equals_dv=True, value_dims=[32])


def test_flushed_subnormals_travel_in_the_2_9_section():
    d = wire.decode_descriptor(wire.encode_descriptor(Declaration(name="wasm", precision=Precision(
        flush_subnormals=True))))
    assert d["precision"]["flush_subnormals"] is True
    assert d["cache_policy"] == "full" and d["contract"]["value_dims"] == []  # 2.4's and 2.7's zeros before it
    assert "flush_subnormals" not in wire.decode_descriptor(wire.encode_descriptor(Declaration(name="plain")))[
        "precision"]
    with pytest.raises(DeclarationError, match="flush_subnormals is the kernel's"):
        Declaration(name="k", paths=[("fast", Precision(flush_subnormals=True))])


def test_a_2_7_section_is_read_one_key_tile_per_declared_path():
    # A declaration without declared paths: a 2.7 section after 2.4's ends with no tile or one per
    # declared path (none here), and a count other than the declared paths' is refused as attest refuses it.
    base = wire.encode_descriptor(Declaration(name="tiles"))
    section_2_4 = Writer()
    for _ in range(5):
        section_2_4.i32(0)
    for tiles, ok in (([], True), ([64], False)):
        extra = Writer()
        extra.array([], "<i4")  # value_dims, value_dim, alibi_excludes_bias: none declared
        extra.i64(0).i64(0).i32(0)
        extra.array(tiles, "<i4")
        payload = base + section_2_4.bytes() + extra.bytes()
        if ok:
            assert wire.decode_descriptor(payload)["declared_key_tiles"] == []
        else:
            with pytest.raises(ProtocolError, match="declared_key_tiles has 1 entries for 0 declared paths"):
                wire.decode_descriptor(payload)


def test_descriptor_matches_the_cpp_layout_size():
    # 2.0 fields: u32 + str + u32 + i32 + 7 i32 + f64 + i32[] + 6 ranges + 7 i32; 2.1: 3 i32 + 2 f64 + 6 i32 +
    # u32 paths; 2.2: u32; 2.3: i32.
    name = "x"
    expected = 4 + (4 + len(name)) + 4 + 4 + 7 * 4 + 8 + 8 + 6 * 16 + 7 * 4 + 3 * 4 + 2 * 8 + 6 * 4 + 4 + 4 + 4
    assert len(wire.encode_descriptor(Declaration(name=name))) == expected


def test_worked_example_decodes():
    payload = worked_example()
    assert len(payload) == 228
    r = Reader(payload)
    p = wire.decode_problem_fields(r, F32)
    r.expect_end()
    assert (p["batch"], p["heads"], p["kv_heads"], p["q_len"], p["k_len"], p["head_dim"], p["value_dim"]) == \
        (1, 2, 1, 2, 2, 1, 1)
    assert p["scale"] == 1.0 and p["q_offset"] == 0 and not p["causal"]
    assert (p["window"], p["chunk"], p["lookahead"]) == (0, 0, 0) and p["rope_base"] == 10000.0
    assert p["kv_valid"] is None and p["q_segment"] is None and p["bias"] is None and p["alibi_slopes"] is None
    assert p["explicit_mask"].tolist() == [[[True, True], [False, False]]]
    assert p["softcap"] == 2.0 and p["sinks"].tolist() == [0.0, 1.0]
    assert p["q"].reshape(-1).tolist() == [3.0, 0.5, -1.0, 2.0]
    assert p["k"].reshape(-1).tolist() == [2.0, -1.0] and p["v"].reshape(-1).tolist() == [1.0, -2.0]
    assert p["q"].shape == (1, 2, 2, 1) and not p["q"].flags.writeable


def test_problem_round_trip_f32_with_every_term():
    rng = np.random.default_rng(0)
    B, H, Hkv, Tq, Tk, Dk, Dv = 2, 4, 2, 3, 5, 4, 6
    fields = dict(q=rng.standard_normal((B, H, Tq, Dk), dtype=np.float32),
                  k=rng.standard_normal((B, Hkv, Tk, Dk), dtype=np.float32),
                  v=rng.standard_normal((B, Hkv, Tk, Dv), dtype=np.float32),
                  scale=0.3, q_offset=2, causal=True, window=3, chunk=4, lookahead=2, rope=True, rope_base=500.0,
                  kv_valid=[5, 3], q_valid=[3, 1], q_segment=np.zeros((B, Tq), np.int32),
                  k_segment=np.ones((B, Tk), np.int32), explicit_mask=np.ones((B, Tq, Tk), np.uint8), softcap=30.0,
                  alibi_slopes=np.arange(H, dtype=np.float32), bias=np.full((1, H, Tq, Tk), -np.inf, np.float32),
                  bias_per_batch=False, bias_per_head=True, sinks=np.ones(H, np.float32))
    r = Reader(wire.encode_problem(**fields))
    p = wire.decode_problem_fields(r, F32)
    r.expect_end()
    for name in ("q", "k", "v", "q_segment", "k_segment", "alibi_slopes", "bias", "sinks"):
        np.testing.assert_array_equal(p[name], fields[name], err_msg=name)
    for name in ("scale", "q_offset", "causal", "window", "chunk", "lookahead", "rope", "rope_base", "softcap",
                 "bias_per_batch", "bias_per_head"):
        assert p[name] == fields[name], name
    assert p["kv_valid"].tolist() == [5, 3] and p["explicit_mask"].dtype == bool


def test_problem_round_trip_16_bit_storage():
    storage = {"q": "bf16", "k": "f16", "v": "bf16", "bias": "f16"}
    q = np.arange(2 * 1 * 3 * 2, dtype=np.uint16).reshape(2, 1, 3, 2)
    k = np.arange(2 * 1 * 4 * 2, dtype=np.uint16).reshape(2, 1, 4, 2) + 100
    v = np.arange(2 * 1 * 4 * 3, dtype=np.uint16).reshape(2, 1, 4, 3) + 200
    bias = np.full((2, 1, 3, 4), 0x3C00, np.uint16)
    p = wire.decode_problem_fields(Reader(wire.encode_problem(storage, q=q, k=k, v=v, bias=bias)), storage)
    assert p["q"].dtype == np.uint16 and p["q"].shape == (2, 1, 3, 2)
    for name, value in (("q", q), ("k", k), ("v", v), ("bias", bias)):
        np.testing.assert_array_equal(p[name], value)
    assert p["bias"].shape == (2, 1, 3, 4)


@pytest.mark.parametrize("field, value, message", [
    ("kv_valid", [1, 2, 3], "kv_valid does not match"),
    ("explicit_mask", np.ones(5, np.uint8), "explicit_mask does not match"),
    ("q_segment", np.zeros((1, 2), np.int32), "travel together"),
])
def test_inconsistent_problems_refused(field, value, message):
    q = np.zeros((1, 1, 2, 1), np.float32)
    payload = wire.encode_problem(q=q, k=q, v=q, **{field: value})
    with pytest.raises(ProtocolError, match=message):
        wire.decode_problem_fields(Reader(payload), F32)


def test_unknown_integer_term_refused():
    q = np.zeros((1, 1, 1, 1), np.float32)
    payload = bytearray(wire.encode_problem(q=q, k=q, v=q))
    terms_at = 7 * 4 + 8 + 8 + 4  # shape, scale, q_offset, causal
    w = Writer().array([0, 0, 0, 7], "<i4").bytes()
    payload = payload[:terms_at] + w + payload[terms_at + 8 + 12:]
    with pytest.raises(ProtocolError, match="does not know"):
        wire.decode_problem_fields(Reader(bytes(payload)), F32)


def test_replies_round_trip():
    o = np.arange(4, dtype=np.float32)
    f = wire.decode_forward_result(wire.encode_forward_result(3, "boom", "p", "", o, [1.0, -math.inf]))
    assert f["status"] == 3 and f["error"] == "boom" and f["path"] == "p" and f["fault"] == ""
    assert f["o"].view("<f4").tolist() == [0, 1, 2, 3] and f["lse"].tolist() == [1.0, -math.inf]
    opened = wire.decode_decode_opened(wire.encode_decode_opened(2, "no", 9))
    assert opened == {"status": 2, "error": "no", "session": 9}
    d = wire.decode_decode_result(wire.encode_decode_result(0, "", "x", o, None))
    assert d["o"].size == 16 and d["lse"].size == 0
    config = wire.decode_decode_open(Reader(wire.encode_decode_open(1, 4, 2, 8, 8, 0.5, window=3, sinks=[0, 0, 0, 0])))
    assert config["heads"] == 4 and config["window"] == 3 and config["sinks"].tolist() == [0, 0, 0, 0]
    assert config["alibi_slopes"] is None
    assert wire.decode_string(wire.encode_string("message")) == "message"
