#!/usr/bin/env bash
# Installs the Debian packages mori-symm builds and tests with (as root).
# Without root it only checks that they are present.
set -euo pipefail
# libamdhip64-5 and libhiprtc-builtins5: Debian's ROCm 5.2 runtime, whose
# hiprtc compiles the signal kernels' HIP source in tests/kernels (no GPU);
# libamdhip64-dev: the real <hip/hip_runtime_api.h>, beside which every
# installed header must compile (tests/install/headers_compile.sh); both
# are also the real HIP 5.2.3 the rocm-labelled tests check the hip backend's
# bring-up and the shim's ABI facts against.
# python3-venv and python3-pip: tests/python installs the package's wheel
# and a stand-in of AMD's mori into a fresh venv (local wheels, no index).
# libssl-dev: OpenSSL's libcrypto, whose HMAC-SHA256 seals a job's store
# entries (core/src/rendezvous/seal.c; without it the build has no job seal).
pkgs=(cmake ninja-build gcc clang libcmocka-dev valgrind afl++ libclang-rt-14-dev python3 pkgconf
      libamdhip64-5 libhiprtc-builtins5 libamdhip64-dev python3-venv python3-pip libssl-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]} (run as root to install)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
