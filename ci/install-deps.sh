#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent:
# packages already present are skipped, so a second run costs one dpkg query.
# --minimal leaves out python3-torch (and with it Qt5, OpenCV and GDAL): enough to build attest and
# certify a C, C++ or Python kernel; only the PyTorch certificates' tests need torch, and only the
# WebGPU kernels' tests need chromium (its SwiftShader gives WebGPU a CPU adapter).
set -euo pipefail

minimal=0
case "${1:-}" in
  "") ;;
  --minimal) minimal=1 ;;
  *) echo "install-deps: unknown argument '$1' (expected nothing or --minimal)" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config git
  clang-14 libclang-rt-14-dev clang-format-14 clang-tidy-14 pycodestyle
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libboost-dev libmpfr-dev libgmp-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libopenblas-dev libssl-dev python3 python3-numpy python3-jsonschema python3-pytest python3-yaml zip unzip
  python3-venv python3-pip python3-setuptools python3-wheel
)
[ "$minimal" -eq 1 ] || packages+=(python3-torch chromium)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
