#include "html_report_pairs.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attest/properties/coverage_model.h"
#include "html_report.h"

namespace attest {
namespace html_pairs {

// What the checks say of one path's pairs.
struct PathPairs {
  std::vector<std::string> classes;                    // in the order the targets name them
  std::map<std::string, long> reached;                 // pair -> effective cases over the checks
  std::map<std::string, std::set<std::string>> never;  // pair -> the checks that required it
};

void add_classes(PathPairs& p, const std::vector<std::string>& classes) {
  for (const std::string& c : classes)
    if (std::find(p.classes.begin(), p.classes.end(), c) == p.classes.end()) p.classes.push_back(c);
}

void add_reached(PathPairs& p, const std::map<std::string, long>& targets) {
  for (const auto& [target, n] : targets) {
    const std::vector<std::string> classes = target_classes(target);
    if (classes.size() != 2 || n <= 0) continue;
    add_classes(p, classes);
    p.reached[target] += n;
  }
}

std::map<std::string, PathPairs> pairs_per_path(const KernelReport& k) {
  std::map<std::string, PathPairs> paths;
  // A certificate keeps the pairs per kernel path; a run (or a shard) per check.
  for (const auto& [path, targets] : k.path_pairs) add_reached(paths[path], targets);
  for (const CheckResult& r : k.checks)
    for (const auto& [path, stats] : r.paths) {
      if (k.path_pairs.empty()) add_reached(paths[path], stats.targets);
      for (const std::string& target : stats.targets_uncovered) {
        const std::vector<std::string> classes = target_classes(target);
        if (classes.size() != 2) continue;
        add_classes(paths[path], classes);
        paths[path].never[target].insert(r.check);
      }
    }
  return paths;
}

// Classes grouped by axis, each axis where its first class first appeared.
std::vector<std::string> grouped_by_axis(const std::vector<std::string>& classes) {
  std::vector<std::string> axes, out;
  for (const std::string& c : classes)
    if (std::find(axes.begin(), axes.end(), axis_of(c)) == axes.end()) axes.push_back(axis_of(c));
  for (const std::string& axis : axes)
    for (const std::string& c : classes)
      if (axis_of(c) == axis) out.push_back(c);
  return out;
}

// The pair's name as the targets spell it (either order), and its cell.
std::string pair_cell(const PathPairs& p, const std::string& a, const std::string& b) {
  if (axis_of(a) == axis_of(b)) return "<td class=\"same-axis\"></td>";
  std::string name = target_name({a, b});
  if (!p.reached.contains(name) && !p.never.contains(name)) name = target_name({b, a});
  if (const auto never = p.never.find(name); never != p.never.end()) {
    std::string checks;
    for (const std::string& c : never->second) checks += (checks.empty() ? "" : ", ") + c;
    return fmt::format(
        R"html(<td class="pair never" data-pair="{}" title="{}: never reached by {}, which required it">&#10007;</td>)html",
        html_page::escaped(name), html_page::escaped(name), html_page::escaped(checks));
  }
  if (const auto reached = p.reached.find(name); reached != p.reached.end())
    return fmt::format(R"html(<td class="pair reached" data-pair="{}" title="{}: {} effective cases">{}</td>)html",
                       html_page::escaped(name), html_page::escaped(name), reached->second, reached->second);
  return fmt::format(
      R"html(<td class="pair unreached" data-pair="{}" title="{}: never reached (not required)"></td>)html",
      html_page::escaped(name), html_page::escaped(name));
}

std::string path_matrix(const std::string& path, const PathPairs& p) {
  const std::vector<std::string> classes = grouped_by_axis(p.classes);
  std::size_t possible = 0;
  for (std::size_t i = 0; i < classes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) possible += axis_of(classes[i]) != axis_of(classes[j]);
  std::string out = fmt::format(
      "<h4>path {}: {} of {} pairs of classes reached, {} required pair{} never reached</h4>\n"
      "<table class=\"pairs\" data-path=\"{}\"><tr><th></th>",
      html_page::escaped(path.empty() ? "(one path)" : path), p.reached.size(), possible, p.never.size(),
      p.never.size() == 1 ? "" : "s", html_page::escaped(path));
  for (std::size_t j = 0; j + 1 < classes.size(); ++j)
    out += "<th class=\"column\">" + html_page::escaped(classes[j]) + "</th>";
  out += "</tr>\n";
  // The lower triangle: each pair once.
  for (std::size_t i = 1; i < classes.size(); ++i) {
    out += "<tr><th>" + html_page::escaped(classes[i]) + "</th>";
    for (std::size_t j = 0; j < i; ++j) out += pair_cell(p, classes[i], classes[j]);
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace html_pairs

std::string html_pair_matrices(const KernelReport& k) {
  const auto paths = html_pairs::pairs_per_path(k);
  if (paths.empty()) return "<p>No pairs of classes: this certificate records no pair evidence.</p>\n";
  std::string out;
  for (const auto& [path, pairs] : paths) out += html_pairs::path_matrix(path, pairs);
  return out;
}

}  // namespace attest
