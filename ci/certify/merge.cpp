#include "merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "attest/properties/file_io.h"
#include "attest/properties/safe_text.h"
#include "certificate_format.h"
#include "json_fields.h"

namespace attest {
namespace {

using nlohmann::json;
using namespace json_fields;

// Text from a file in a one-line message: bounded, printable, no line breaks.
std::string one_line(const std::string& s, std::size_t max_bytes) {
  std::string out = safe_text(s, max_bytes);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\t'; }, '?');
  return out;
}

std::string shown(const std::string& s) { return one_line(s, 120); }
std::string shown(const json& j) { return safe_text(j.dump(-1, ' ', false, json::error_handler_t::replace), 60); }

FeatureSet feature_set(const json& object, const std::string& where, const char* key) {
  FeatureSet out;
  const std::vector<std::string> names = texts(object, where, key);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::optional<Feature> f = feature_named(names[i]);
    if (!f) bad(fmt::format("{}.{}[{}]", where, key, i), "is not a feature: \"" + shown(names[i]) + "\"");
    out.insert(*f);
  }
  return out;
}

Scalar scalar(const json& object, const std::string& where, const char* key) {
  Scalar s = Scalar::kF32;
  if (!parse_scalar(text(object, where, key), s)) bad(where + "." + key, "must be f32, bf16 or f16");
  return s;
}

// A precision object; the fields added after the first certificates are optional.
Precision precision_of(const json& precision, const std::string& p) {
  Precision out;
  if (!precision.is_object()) bad(p, "must be an object");
  for (auto [key, field] : {std::pair{"q", &Precision::q},
                            {"k", &Precision::k},
                            {"v", &Precision::v},
                            {"o", &Precision::o},
                            {"scores", &Precision::scores},
                            {"p", &Precision::p},
                            {"accumulator", &Precision::accumulator}})
    out.*field = scalar(precision, p, key);
  for (auto [key, field] : {std::pair{"bias", &Precision::bias},
                            {"q_entry", &Precision::q_entry},
                            {"k_entry", &Precision::k_entry},
                            {"v_entry", &Precision::v_entry}})
    if (precision.contains(key)) out.*field = scalar(precision, p, key);
  if (precision.contains("weight_sum"))
    if (const Scalar sum = scalar(precision, p, "weight_sum"); sum != out.accumulator) out.weight_sum = sum;
  out.pv_unnormalised = flag_or_false(precision, p, "pv_unnormalised");
  out.flush_subnormals = flag_or_false(precision, p, "flush_subnormals");
  return out;
}

Range range(const json& object, const std::string& where, const char* key) {
  const json& r = member(object, where, key);
  if (r.is_null()) return {};
  if (!r.is_array() || r.size() != 2) bad(where + "." + key, "must be null or [min, max]");
  const std::string at = where + "." + key;
  return {integer_value(r[0], at + "[0]", INT64_MIN, INT64_MAX), integer_value(r[1], at + "[1]", INT64_MIN, INT64_MAX)};
}

int small_integer(const json& object, const std::string& where, const char* key) {
  return static_cast<int>(integer(object, where, key, INT32_MIN, INT32_MAX));
}

// The descriptor as capabilities_json writes it; derived fields (summaries, the top-level
// key_tile) are compared when the certificate is written again.
Capabilities capabilities_of(const json& d, const std::string& where) {
  Capabilities c;
  c.features = feature_set(d, where, "features");
  const std::string empty_rows = text(d, where, "empty_rows");
  if (empty_rows != to_string(EmptyRowPolicy::kZero) && empty_rows != to_string(EmptyRowPolicy::kNan))
    bad(where + ".empty_rows", "must be \"zero\" or \"nan\"");
  c.empty_rows = empty_rows == to_string(EmptyRowPolicy::kZero) ? EmptyRowPolicy::kZero : EmptyRowPolicy::kNan;
  // Added after the first certificates: absent means the default domain.
  if (d.contains("inputs")) {
    const std::string inputs = text(d, where, "inputs");
    if (!parse_input_domain(inputs, c.inputs)) bad(where + ".inputs", "must be " + input_domain_names());
  }
  if (d.contains("deterministic_backward")) {  // added with ABI 2.3: absent means no promise
    const json& flag = member(d, where, "deterministic_backward");
    if (!flag.is_boolean()) bad(where + ".deterministic_backward", "must be true or false");
    c.deterministic_backward = flag.get<bool>();
  }
  c.precision = precision_of(member(d, where, "precision"), where + ".precision");
  c.precision.exp_ulps = finite_number(d, where, "exp_ulps");
  if (d.contains("path_precision")) {
    const json& paths = member(d, where, "path_precision");
    if (!paths.is_object()) bad(where + ".path_precision", "must be an object");
    for (const auto& [path, precision] : paths.items()) {
      Precision& pp = c.path_precision[path] = precision_of(precision, where + ".path_precision." + path);
      pp.exp_ulps = c.precision.exp_ulps;
    }
  }
  if (d.contains("cache")) {  // added with cache policies: absent means a cache that keeps everything
    const json& cache = member(d, where, "cache");
    const std::string at = where + ".cache", policy = text(cache, at, "policy");
    bool known = false;
    for (auto kind : {CachePolicy::Kind::kFull, CachePolicy::Kind::kWindow, CachePolicy::Kind::kSinksRecent,
                      CachePolicy::Kind::kExplicit})
      if (policy == to_string(kind)) c.cache.kind = kind, known = true;
    if (!known) bad(at + ".policy", "must be \"full\", \"window\", \"sinks_recent\" or \"explicit\"");
    c.cache.sinks = static_cast<int>(integer(cache, at, "sinks", 0, std::numeric_limits<int>::max()));
    c.cache.recent = static_cast<int>(integer(cache, at, "recent", 0, std::numeric_limits<int>::max()));
    if (cache.contains("page_tokens"))  // added with block tables: absent means none
      c.page_tokens = static_cast<int>(integer(cache, at, "page_tokens", 0, std::numeric_limits<int>::max()));
    try {
      c.cache.validate();
    } catch (const std::invalid_argument& e) {
      bad(at, e.what());
    }
  }
  if (d.contains("declared_paths")) {  // added with ABI 2.2
    const json& paths = array(d, where, "declared_paths");
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const std::string at = fmt::format("{}.declared_paths[{}]", where, i);
      PathPredicate p;
      p.path = text(paths[i], at, "path");
      p.batch = range(paths[i], at, "batch"), p.heads = range(paths[i], at, "heads");
      p.q_len = range(paths[i], at, "q_len"), p.k_len = range(paths[i], at, "k_len");
      p.head_dim = range(paths[i], at, "head_dim"), p.value_dim = range(paths[i], at, "value_dim");
      p.head_dim_multiple = small_integer(paths[i], at, "head_dim_multiple");
      p.value_dim_multiple = small_integer(paths[i], at, "value_dim_multiple");
      p.k_len_multiple = small_integer(paths[i], at, "k_len_multiple");
      p.k_len_not_multiple = flag(paths[i], at, "k_len_not_multiple");
      p.required = feature_set(paths[i], at, "required");
      p.excluded = feature_set(paths[i], at, "excluded");
      p.no_mask = flag(paths[i], at, "no_mask");
      if (paths[i].contains("key_tile")) p.key_tile = small_integer(paths[i], at, "key_tile");  // ABI 2.7
      if (const std::string why = p.invalid_because(); !why.empty()) bad(at, why);
      c.paths.push_back(p);
    }
  }
  const std::string t = where + ".contract";
  const json& contract = member(d, where, "contract");
  const json& dims = array(contract, t, "head_dims");
  for (std::size_t i = 0; i < dims.size(); ++i)
    c.contract.head_dims.push_back(
        static_cast<int>(integer_value(dims[i], fmt::format("{}.head_dims[{}]", t, i), INT32_MIN, INT32_MAX)));
  c.contract.head_dim = range(contract, t, "head_dim");
  c.contract.batch = range(contract, t, "batch");
  c.contract.heads = range(contract, t, "heads");
  c.contract.q_len = range(contract, t, "q_len");
  c.contract.k_len = range(contract, t, "k_len");
  c.contract.q_offset = range(contract, t, "q_offset");
  c.contract.dk_equals_dv = flag(contract, t, "dk_equals_dv");
  c.contract.default_scale_only = flag(contract, t, "default_scale_only");
  c.contract.causal_required = flag(contract, t, "causal_required");
  c.contract.decode_only = flag(contract, t, "decode_only");
  c.contract.self_attention_only = flag_or_false(contract, t, "self_attention_only");
  if (contract.contains("alibi_slopes")) {  // added after the first certificates
    const std::string slopes = text(contract, t, "alibi_slopes");
    if (slopes != "standard" && slopes != "arbitrary")
      bad(t + ".alibi_slopes", "must be \"standard\" or \"arbitrary\"");
    c.contract.alibi_slopes = slopes == "standard" ? AlibiSlopes::kStandard : AlibiSlopes::kArbitrary;
    c.contract.alibi_max_bias = finite_number(contract, t, "alibi_max_bias");
  }
  if (contract.contains("max_abs_value")) c.contract.max_abs_value = finite_number(contract, t, "max_abs_value");
  c.contract.query_tile = small_integer(contract, t, "query_tile");
  c.contract.key_tile = small_integer(contract, t, "key_tile");
  c.contract.decode_lse_optional = flag(contract, t, "decode_lse_optional");
  if (contract.contains("value_dims")) {  // ABI 2.7, written only when declared
    const json& values = array(contract, t, "value_dims");
    for (std::size_t i = 0; i < values.size(); ++i)
      c.contract.value_dims.push_back(
          static_cast<int>(integer_value(values[i], fmt::format("{}.value_dims[{}]", t, i), INT32_MIN, INT32_MAX)));
  }
  if (contract.contains("value_dim")) c.contract.value_dim = range(contract, t, "value_dim");
  c.contract.alibi_excludes_bias = flag_or_false(contract, t, "alibi_excludes_bias");
  return c;
}

CheckResult check_of(const json& j, const std::string& where, const std::string& kernel) {
  CheckResult r{kernel, text(j, where, "stage"), text(j, where, "check")};
  const std::string verdict = text(j, where, "verdict");
  if (verdict != "pass" && verdict != "fail" && verdict != "not covered" && verdict != "insufficient")
    bad(where + ".verdict", "is not a verdict: \"" + shown(verdict) + "\"");
  r.cases = count(j, where, "cases");
  r.effective = count(j, where, "effective_cases");
  r.floor = count(j, where, "floor");
  const json& longest = member(j, where, "longest");
  r.longest_q = static_cast<int>(count(longest, where + ".longest", "q_len"));
  r.longest_k = static_cast<int>(count(longest, where + ".longest", "k_len"));
  r.skipped = counts(j, where, "skipped");
  r.failures = count(j, where, "failures");
  r.worst_utilisation = number_or_null(j, where, "worst_utilisation").value_or(INFINITY);
  r.seconds = finite_number(j, where, "seconds");
  if (r.effective > r.cases) bad(where + ".effective_cases", "is more than cases");
  if (r.seconds < 0) bad(where + ".seconds", "is negative");
  // Optional fields: certificate_json leaves out empty ones.
  if (j.contains("not_covered")) r.not_covered = text(j, where, "not_covered");
  if (j.contains("feature_cases")) r.feature_cases = counts(j, where, "feature_cases");
  if (j.contains("seed")) r.seed = unsigned_integer(j, where, "seed");
  if (j.contains("first_failure")) r.first_failure = text(j, where, "first_failure");
  if (j.contains("failing_case")) r.failing_case = text(j, where, "failing_case");
  if (j.contains("counterexample")) r.counterexample_path = text(j, where, "counterexample");
  if (j.contains("reproduce")) r.reproduce = text(j, where, "reproduce");
  if (j.contains("path_shortfall")) {
    const json& list = array(j, where, "path_shortfall");
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) bad(fmt::format("{}.path_shortfall[{}]", where, i), "must be a string");
      r.path_shortfall.push_back(list[i].get<std::string>());
    }
  }
  if (j.contains("shape_classes")) r.shape_classes = counts(j, where, "shape_classes");
  if (j.contains("probes_off_path")) {
    const json& off = member(j, where, "probes_off_path");
    r.probes_redone = count(off, where + ".probes_off_path", "redone");
    r.probes_kept_off_path = count(off, where + ".probes_off_path", "kept");
  }
  if (j.contains("time_budget_seconds")) r.time_budget = finite_number(j, where, "time_budget_seconds");
  if (j.contains("not_reached")) r.not_reached = texts(j, where, "not_reached");
  if (j.contains("required_length")) {
    r.required_len = static_cast<int>(integer(j, where, "required_length", 1, 1 << 30));
    r.reached_len = static_cast<int>(integer(j, where, "reached_length", 0, 1 << 30));
  }
  if (j.contains("paths")) {
    const json& paths = member(j, where, "paths");
    if (!paths.is_object()) bad(where + ".paths", "must be an object");
    for (const auto& [path, stats] : paths.items()) {
      const std::string at = where + ".paths." + shown(path);
      r.paths[path] = {count(stats, at, "cases"), number_or_null(stats, at, "worst_utilisation").value_or(INFINITY)};
      // Added after certificates were first written: an older shard has no pairs to sum.
      if (stats.contains("pair_cases")) r.paths[path].targets = counts(stats, at, "pair_cases");
    }
  }
  if (j.contains("coverage")) {
    const json& coverage = member(j, where, "coverage");
    if (!coverage.is_object()) bad(where + ".coverage", "must be an object");
    for (const auto& [path, c] : coverage.items()) {
      const std::string at = where + ".coverage." + shown(path);
      PathStats& stats = r.paths[path];
      stats.targets_required = count(c, at, "required");
      stats.targets_uncovered = texts(c, at, "uncovered");
      stats.targets_unexercised = texts(c, at, "unexercised");
      stats.targets_not_taken = texts(c, at, "not_taken");
      if (count(c, at, "covered") != stats.targets_required - static_cast<long>(stats.targets_uncovered.size()))
        bad(at + ".covered", "must be required minus the uncovered targets");
    }
  }
  return r;
}

KernelReport kernel_of(const json& j, const std::string& where, std::optional<ShardId> shard, std::string& descriptor) {
  KernelReport k;
  k.source = text(j, where, "source");
  k.name = text(j, where, "name");
  k.capabilities = capabilities_of(member(j, where, "descriptor"), where + ".descriptor");
  descriptor = member(j, where, "descriptor").dump();
  k.required = feature_set(j, where, "required_features");
  k.identity = strings(j, where, "identity");
  k.shard = shard;
  // What the writer derives from the checks is typed here and compared when written again.
  flag(j, where, "certified");
  counts(j, where, "covered_features");
  feature_set(j, where, "exercised_features");
  feature_set(j, where, "not_covered_features");
  const json& paths = array(j, where, "paths");
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string at = fmt::format("{}.paths[{}]", where, i);
    text(paths[i], at, "path");
    count(paths[i], at, "cases");
    number_or_null(paths[i], at, "worst_utilisation");
    if (paths[i].contains("targets_required"))
      count(paths[i], at, "targets_required"), count(paths[i], at, "targets_covered");
    if (paths[i].contains("pair_cases")) k.path_pairs[text(paths[i], at, "path")] = counts(paths[i], at, "pair_cases");
  }
  const json& checks = array(j, where, "checks");
  for (std::size_t c = 0; c < checks.size(); ++c)
    k.checks.push_back(check_of(checks[c], fmt::format("{}.checks[{}]", where, c), k.name));
  return k;
}

// "/kernels/0/checks/3/verdict" -> "kernels[0].checks[3].verdict"
std::string field_name(const std::string& pointer) {
  std::string out;
  std::size_t i = 1;
  while (i <= pointer.size()) {
    const std::size_t end = std::min(pointer.find('/', i), pointer.size());
    std::string token;  // JSON pointer escapes: ~1 is '/', ~0 is '~'
    for (std::size_t c = i; c < end; ++c) {
      const bool escape = pointer[c] == '~' && c + 1 < end;
      token += escape ? (pointer[c + 1] == '1' ? '/' : '~') : pointer[c];
      c += escape;
    }
    const bool index = !token.empty() && token.find_first_not_of("0123456789") == std::string::npos;
    out += index ? "[" + token + "]" : (out.empty() ? "" : ".") + token;
    i = end + 1;
  }
  return shown(out.empty() ? std::string("the document") : out);
}

// The file must be what this attest writes for its checks, byte for byte but the time it was
// written: so nothing the merge recomputes (verdicts, coverage, certified) was edited, and no
// field is unknown.
void check_as_written(const json& doc, const CertificateInfo& info) {
  json again = json::parse(certificate_json(info));
  again["created"] = doc["created"];
  if (again == doc) return;
  const json difference = json::diff(doc, again).at(0);
  const std::string op = difference["op"].get<std::string>(), field = field_name(difference["path"].get<std::string>());
  if (op == "add") bad(field, "is missing");
  if (op == "remove") bad(field, "is not a field of an attest certificate");
  bad(field, fmt::format("is {}, but attest writes {} for these checks (edited, or not written by attest certify)",
                         shown(doc.at(json::json_pointer(difference["path"].get<std::string>()))),
                         shown(difference["value"])));
}

// `shard_only`: refuse a certificate written without --shard (merge); otherwise read either kind
// (attest report), where an unsharded one cannot be compared as written (its checks keep no paths).
ShardCertificate certificate_of(const json& doc, const std::string& path, bool shard_only) {
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kCertificateFormat)
    throw MergeError(fmt::format("not an attest certificate (format must be \"{}\")", kCertificateFormat));
  if (const json& version = member(doc, "certificate", "version"); version != kCertificateVersion)
    bad("version", fmt::format("is {} (shards are version {})", shown(version), kCertificateVersion));
  if (shard_only && !doc.contains("shard"))
    throw MergeError("not a shard's certificate (no \"shard\" field: it was written without --shard)");
  ShardCertificate s;
  s.path = path;
  if (text(member(doc, "certificate", "harness"), "harness", "name") != "attest")
    bad("harness.name", "must be \"attest\"");
  s.harness_version = text(doc["harness"], "harness", "version");
  if (s.harness_version != ATTEST_VERSION)
    throw MergeError(fmt::format("written by attest {}, this is attest {} (merge with the attest that ran the shards)",
                                 shown(s.harness_version), ATTEST_VERSION));
  text(doc, "certificate", "created");
  flag(doc, "certificate", "certified");
  if (doc.contains("shard")) {
    const json& shard = member(doc, "certificate", "shard");
    const int count = static_cast<int>(integer(shard, "shard", "count", 1, 1000));
    const int index = static_cast<int>(integer(shard, "shard", "index", 1, count));
    s.info.shard = ShardId{index, count};
  }
  s.info.seed = unsigned_integer(doc, "certificate", "seed");
  s.info.property_cases = static_cast<int>(integer(doc, "certificate", "cases_per_property", 0, 1'000'000));
  s.info.options = strings(doc, "certificate", "options");
  const json& kernels = array(doc, "certificate", "kernels");
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    s.descriptors.emplace_back();
    s.info.kernels.push_back(kernel_of(kernels[k], fmt::format("kernels[{}]", k), s.info.shard, s.descriptors.back()));
  }
  if (s.info.shard) check_as_written(doc, s.info);
  if (const auto chosen = s.info.options.find("checks"); chosen != s.info.options.end())  // certify --check
    for (KernelReport& k : s.info.kernels) k.check_selection = chosen->second;
  return s;
}

std::string shard_name(const ShardCertificate& s) {
  return fmt::format("{} (shard {}/{})", shown(s.path), s.info.shard->index, s.info.shard->count);
}

// Everything but the checks must be the same in every shard of one run.
void check_belong_together(const std::vector<ShardCertificate>& shards) {
  const ShardCertificate& first = shards.front();
  const int n = first.info.shard->count;
  for (const ShardCertificate& s : shards) {
    auto differs = [&](const std::string& what, const std::string& mine, const std::string& theirs) {
      throw MergeError(fmt::format("{}: {} {} differs from {} in {} (shards of one run share it)", shard_name(s), what,
                                   shown(mine), shown(theirs), shard_name(first)));
    };
    if (s.info.shard->count != n) differs("shard count", std::to_string(s.info.shard->count), std::to_string(n));
    if (s.info.seed != first.info.seed) differs("seed", std::to_string(s.info.seed), std::to_string(first.info.seed));
    if (s.info.property_cases != first.info.property_cases)
      differs("cases per property", std::to_string(s.info.property_cases), std::to_string(first.info.property_cases));
    if (s.harness_version != first.harness_version)
      differs("harness version", s.harness_version, first.harness_version);
    if (s.info.options != first.info.options) {
      const auto [key, mine, theirs] = first_difference(s.info.options, first.info.options);
      differs("option " + key, mine, theirs);
    }
    if (s.info.kernels.size() != first.info.kernels.size())
      differs("the number of kernels", std::to_string(s.info.kernels.size()),
              std::to_string(first.info.kernels.size()));
    for (std::size_t k = 0; k < s.info.kernels.size(); ++k) {
      const KernelReport &mine = s.info.kernels[k], &theirs = first.info.kernels[k];
      const std::string at = fmt::format("kernels[{}]", k);
      if (mine.source != theirs.source) differs(at + ".source", mine.source, theirs.source);
      if (mine.name != theirs.name) differs(at + ".name", mine.name, theirs.name);
      if (s.descriptors[k] != first.descriptors[k]) differs(at + ".descriptor", s.descriptors[k], first.descriptors[k]);
      if (mine.identity != theirs.identity) {  // two builds at one path: never one certificate
        const auto [file, sha_mine, sha_theirs] = first_difference(mine.identity, theirs.identity);
        differs(at + ".identity: the SHA-256 of " + file, sha_mine, sha_theirs);
      }
      if (mine.required != theirs.required)
        differs(at + ".required_features", mine.required.empty() ? "none" : mine.required.joined(),
                theirs.required.empty() ? "none" : theirs.required.joined());
    }
  }
  std::vector<const ShardCertificate*> by_index(static_cast<std::size_t>(n) + 1, nullptr);
  for (const ShardCertificate& s : shards) {
    const ShardCertificate*& slot = by_index[static_cast<std::size_t>(s.info.shard->index)];
    if (slot)
      throw MergeError(fmt::format("shard {}/{} is given twice: {} and {}", s.info.shard->index, n, shown(slot->path),
                                   shown(s.path)));
    slot = &s;
  }
  for (int i = 1; i <= n; ++i)
    if (!by_index[static_cast<std::size_t>(i)])
      throw MergeError(fmt::format("shard {}/{} is missing ({} of {} shards given)", i, n, shards.size(), n));
}

}  // namespace

namespace {

ShardCertificate read_certificate_file(const std::string& path, bool shard_only, const std::string& command) {
  try {
    return certificate_of(parse_json(read_file(path, kMaxCertificateBytes), shown(path)), path, shard_only);
  } catch (const FileError& e) {
    throw MergeError(command + ": " + one_line(e.what(), 400));
  } catch (const FieldError& e) {
    throw MergeError(fmt::format("{}: {}: {}", command, shown(path), one_line(e.what(), 400)));
  } catch (const MergeError& e) {
    throw MergeError(fmt::format("{}: {}: {}", command, shown(path), one_line(e.what(), 400)));
  }
}

}  // namespace

ShardCertificate read_shard_certificate(const std::string& path) { return read_certificate_file(path, true, "merge"); }

CertificateInfo read_certificate(const std::string& path) { return read_certificate_file(path, false, "report").info; }

CertificateInfo merge_shards(const std::vector<ShardCertificate>& shards) {
  if (shards.empty()) throw MergeError("merge: no shard certificates");
  try {
    check_belong_together(shards);
  } catch (const MergeError& e) {
    throw MergeError("merge: " + std::string(e.what()));
  }
  const std::size_t n = shards.size(), kernel_count = shards.front().info.kernels.size();
  std::vector<const ShardCertificate*> by_index(n);
  for (const ShardCertificate& s : shards) by_index[static_cast<std::size_t>(s.info.shard->index - 1)] = &s;

  CertificateInfo merged{
      shards.front().info.seed, shards.front().info.property_cases, {}, std::nullopt, shards.front().info.options};
  // Shard K holds the checks at positions p with p % N == K - 1 of the unsharded order, in
  // order, kernel by kernel: taking them back round-robin restores that order. A kernel has as
  // many checks as its shards hold together.
  std::vector<std::size_t> kernel_of_shard(n, 0), next_check(n, 0);
  long position = 0;
  for (std::size_t k = 0; k < kernel_count; ++k) {
    KernelReport kernel = shards.front().info.kernels[k];
    kernel.shard.reset();
    kernel.checks.clear();
    std::size_t total = 0;
    for (const ShardCertificate& s : shards) total += s.info.kernels[k].checks.size();
    std::set<std::pair<std::string, std::string>> seen;
    for (std::size_t c = 0; c < total; ++c, ++position) {
      const std::size_t s = static_cast<std::size_t>(position % static_cast<long>(n));
      // This shard's next check, skipping kernels whose checks it has used up.
      while (kernel_of_shard[s] < kernel_count &&
             next_check[s] == by_index[s]->info.kernels[kernel_of_shard[s]].checks.size())
        ++kernel_of_shard[s], next_check[s] = 0;
      if (kernel_of_shard[s] != k)
        throw MergeError(fmt::format(
            "merge: the shards do not split one run: check {} of kernel {} should be the next check of {}, which "
            "has {} (were they run with the same options, e.g. --fuzz-seconds, and kernels?)",
            c + 1, shown(kernel.name), shard_name(*by_index[s]),
            kernel_of_shard[s] < kernel_count ? "a check of a later kernel" : "no more checks"));
      const CheckResult& r = by_index[s]->info.kernels[k].checks[next_check[s]++];
      if (!seen.insert({r.stage, r.check}).second)
        throw MergeError(fmt::format("merge: kernel {}: check {} {} is in more than one shard", shown(kernel.name),
                                     shown(r.stage), shown(r.check)));
      kernel.checks.push_back(r);
    }
    merged.kernels.push_back(std::move(kernel));
  }
  return merged;
}

}  // namespace attest
