// libFuzzer target: the process protocol's readers on hostile bytes. The input is a stream of
// frames as a kernel might send them (and, for FORWARD, as a kernel server reads a request):
// every frame header is checked against a bound before its payload is allocated, and every
// payload reader either succeeds or throws ProtocolError.
#include <cstdint>
#include <cstring>
#include <string>

#include "attest/abi/process_protocol.hpp"

namespace protocol = attest::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::uint64_t kBound = 1 << 20;  // what one call could need in this target
  std::size_t at = 0;
  while (size - at >= 16) {
    char header[16];
    std::memcpy(header, data + at, 16);
    at += 16;
    protocol::Type type;
    std::uint64_t length;
    try {
      std::tie(type, length) = protocol::parse_header(header);
    } catch (const protocol::ProtocolError&) {
      return 0;
    }
    if (length > kBound || length > size - at) return 0;  // attest refuses it before allocating
    const std::string payload(reinterpret_cast<const char*>(data + at), length);
    at += length;
    protocol::Reader r(payload);
    try {
      switch (type) {
        case protocol::Type::kDescriptor:
          protocol::read_descriptor(r);
          break;
        case protocol::Type::kForwardResult:
          protocol::read_forward_result(r);
          break;
        case protocol::Type::kDecodeResult:
          protocol::read_decode_result(r);
          break;
        case protocol::Type::kDecodeOpened:
          protocol::read_decode_opened(r);
          break;
        case protocol::Type::kForward:
          protocol::read_problem(r);
          break;
        case protocol::Type::kDecodeOpen:
          protocol::read_decode_config(r);
          break;
        // ABI 2.4: quantized K/V in a problem, retained positions, block tables.
        case protocol::Type::kBackward:
          protocol::read_problem(r, ATTEST_F32, ATTEST_Q4, ATTEST_Q8_HEAD);
          break;
        case protocol::Type::kRetained:
          protocol::read_retained(r);
          break;
        case protocol::Type::kDecodePagedResult:
          protocol::read_paged_result(r);
          break;
        // ABI 2.6: partial states to merge, and the merged state.
        case protocol::Type::kMerge:
          protocol::read_merge(r);
          break;
        case protocol::Type::kMergeResult:
          protocol::read_merge_result(r);
          break;
        // ABI 2.8: a packed varlen forward, and its outputs.
        case protocol::Type::kForwardPacked:
          protocol::read_packed(r);
          break;
        case protocol::Type::kForwardPackedResult:
          protocol::read_packed_result(r);
          break;
        case protocol::Type::kDecodePaged: {
          const protocol::WireDecodeConfig config = protocol::read_decode_config(r, true);
          protocol::read_paged_step(r, config.header, 16, ATTEST_F32, ATTEST_Q8, ATTEST_E4M3);
          break;
        }
        default:
          r.str();
          break;
      }
    } catch (const protocol::ProtocolError&) {
    }
  }
  return 0;
}
