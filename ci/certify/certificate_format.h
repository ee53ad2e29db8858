// The certificate file's identity: what `--json` writes and `--baseline` reads.
#pragma once

namespace attest {

inline constexpr const char* kCertificateFormat = "attest-certificate";
inline constexpr int kCertificateVersion = 2;  // 2: effective cases, coverage, contract

}  // namespace attest
