// The certificate file's identity: what `--json` writes and `--baseline` reads.
#pragma once

namespace attest {

inline constexpr const char* kCertificateFormat = "attest-certificate";
inline constexpr int kCertificateVersion = 2;  // 2: effective cases, coverage, contract

// The descriptor's fields the regression gate compares whole (beside features, precision and the
// contract, which it compares by meaning): a field absent from an older baseline is not compared.
inline constexpr const char* kComparedDeclarationFields[] = {
    "empty_rows", "inputs", "deterministic_backward", "path_precision", "key_tile", "declared_paths", "cache"};

}  // namespace attest
