// `attest merge`: joins the certificates of `attest certify --shard K/N` runs into the
// certificate of the unsharded run with the same seed. Shard certificates are read as strictly
// as baselines (size and depth limits, every field typed, a one-line error naming the field),
// and each must be exactly what this attest writes for its checks: the merged certificate is
// then rebuilt from the checks by the one writer, certificate_json.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "certificate.h"

namespace attest {

class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShardCertificate {
  std::string path;  // as named, for messages
  std::string harness_version;
  CertificateInfo info;                  // its share of the checks; info.shard is set
  std::vector<std::string> descriptors;  // each kernel's descriptor as written (compared across shards)
};

// Reads one shard's certificate; throws MergeError naming the file and the field.
ShardCertificate read_shard_certificate(const std::string& path);

// Any certificate attest writes, a shard's or a whole run's, read as strictly (attest report);
// throws MergeError naming the file and the field. An unsharded certificate's checks keep no
// paths: its kernels' reports have no path table.
CertificateInfo read_certificate(const std::string& path);

// The unsharded run's certificate from all N shards of one run (checks in the unsharded order);
// throws MergeError when the shards do not belong together or do not split one run.
CertificateInfo merge_shards(const std::vector<ShardCertificate>& shards);

}  // namespace attest
