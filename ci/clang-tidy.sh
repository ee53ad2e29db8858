#!/usr/bin/env bash
# clang-tidy 14 with the repo's .clang-tidy (bugprone-*, readability-function-size), on a
# non-unity compile database (a unity TU would hide each .cpp behind unity_N.cxx).
# usage: ci/clang-tidy.sh [--all] [--base REV] [BUILD_DIR]
#   default: the C/C++ files changed since REV (HEAD~1), and for a changed header one source that
#            includes it (a header's findings are the same from any includer; one bounds the
#            cost); --all: every translation unit of the compile database (~1,000 CPU s).
#   BUILD_DIR (default build/clang-tidy) is configured from the release preset if it has no
#   compile_commands.json; nothing is built. JOBS (default 2) clang-tidy processes at a time.
# Exit 0: clean; 1: findings (printed); 2: bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0 base=HEAD~1 dir=build/clang-tidy
while [ $# -gt 0 ]; do
  case $1 in
    --all) all=1 ;;
    --base) [ $# -ge 2 ] || { echo "clang-tidy.sh: --base needs a revision" >&2; exit 2; }; base=$2; shift ;;
    -*) echo "clang-tidy.sh: unknown option $1 (usage: ci/clang-tidy.sh [--all] [--base REV] [BUILD_DIR])" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done
tidy=$(command -v clang-tidy-14) || { echo "clang-tidy.sh: clang-tidy-14 not found (ci/install-deps.sh)" >&2; exit 2; }
if [ ! -f "$dir/compile_commands.json" ]; then
  cmake -S . -B "$dir" --preset release -DCMAKE_UNITY_BUILD=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi
db=$dir/compile_commands.json
# Every translation unit of the database, relative to the repo.
mapfile -t units < <(python3 -c 'import json, os, sys
for e in json.load(open(sys.argv[1])):
    f = os.path.relpath(os.path.join(e["directory"], e["file"]))
    if not f.startswith(("..", "build")):
        print(f)' "$db" | sort -u)
if [ $all -eq 0 ]; then
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    # A shallow clone of one commit has no parent to compare with: nothing is known to have changed.
    [ "$base" = HEAD~1 ] && [ "$(git rev-parse --is-shallow-repository)" = true ] &&
      { echo "clang-tidy: skipped, a shallow clone has no HEAD~1 (ci/clang-tidy.sh --all checks every file)"; exit 0; }
    echo "clang-tidy.sh: no revision $base" >&2
    exit 2
  fi
  mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp')
  picked=()
  for f in "${changed[@]}"; do
    case $f in
      *.h | *.hpp) # a header is checked through the first source that includes it by its path
        name=${f#*/include/}
        [ "$name" != "$f" ] || name=$(basename "$f")  # a private header, included by its name
        for u in "${units[@]}"; do
          if grep -qF -e "#include \"$name\"" -e "#include <$name>" "$u"; then picked+=("$u"); break; fi
        done ;;
      *) printf '%s\n' "${units[@]}" | grep -qxF "$f" && picked+=("$f") ;;
    esac
  done
  mapfile -t units < <(printf '%s\n' "${picked[@]}" | grep . | sort -u || true)
fi
if [ ${#units[@]} -eq 0 ]; then
  echo "clang-tidy: no translation unit to check"
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
printf '%s\n' "${units[@]}" |
  xargs -P "${JOBS:-2}" -n 1 "$tidy" -p "$dir" --quiet >"$log" 2>&1 || status=1
if [ $status -ne 0 ] || grep -q 'warning:\|error:' "$log"; then
  grep -v '^[0-9]* warnings\? generated\.$\|^Suppressed [0-9]* warnings\|^Use -header-filter\|^Use -system-headers' "$log" >&2 || true
  echo "clang-tidy: findings in ${#units[@]} translation unit(s) checked" >&2
  exit 1
fi
echo "clang-tidy: ${#units[@]} translation unit(s) clean"
