#!/usr/bin/env bash
# Gate a kernel repository's CI on attest. Usage (from the kernel repository):
#   ATTEST=/path/to/attest ci/gate.sh (--kernel lib.so | --kernel-cmd "PROGRAM") [BASELINE.json] [-- EXTRA]
# Builds nothing of attest; certifies the kernel with the default budget, writes
# attest-artifacts/{certificate.json,junit.xml,counterexamples/}, and, given a baseline,
# fails when a check that passed now fails or worst err/bound grew more than 2x.
# On a green run the certificate can become the next baseline.
set -uo pipefail

attest=${ATTEST:-attest}
usage() {
  echo "usage: ATTEST=/path/to/attest ci/gate.sh (--kernel PATH.so | --kernel-cmd COMMAND) [BASELINE.json] [-- EXTRA]" >&2
  exit 2  # 1 is attest's "not certified"
}
[ $# -ge 2 ] || usage
case $1 in --kernel | --kernel-cmd) ;; *) usage ;; esac
kind=$1 target=$2
shift 2
baseline=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then baseline=$1; shift; fi
[ "${1:-}" = "--" ] && shift

out=attest-artifacts
# Only this script's own outputs are cleared: the folder may hold the baseline (attest writes
# each file atomically).
mkdir -p "$out" && rm -rf "$out/counterexamples"
args=(certify "$kind" "$target" --budget "${ATTEST_BUDGET:-default}" --out "$out"
      --json "$out/certificate.json" --junit "$out/junit.xml")
# attest refuses an output that names an input: last run's certificate as the baseline is kept
# as baseline.json beside the new one.
if [ -n "$baseline" ] && [ "$baseline" -ef "$out/certificate.json" ]; then
  cp "$baseline" "$out/baseline.json" && baseline="$out/baseline.json"
fi
[ -n "$baseline" ] && args+=(--baseline "$baseline")
"$attest" "${args[@]}" "$@" | tee "$out/certificate.txt"
status=${PIPESTATUS[0]}
case $status in
  0) echo "attest gate: certified; artifacts in $out/" ;;
  1) echo "attest gate: NOT certified; counterexamples in $out/counterexamples (attest replay FILE)" ;;
  *) echo "attest gate: could not certify (usage or load error, exit $status)" ;;
esac
exit "$status"
