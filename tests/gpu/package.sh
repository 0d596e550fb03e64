#!/usr/bin/env bash
# Sourced by the GPU scripts that run torch with the mori package
# (kill_peer.sh, heal_torch.sh): mori_package NAME makes `import
# mori.allocator` work, or prints "NAME: FAIL: ..." and returns 1.  The
# package is installed by the torch part of run.sh, or staged by its CMake
# fallback (build-torch-stage); else it is installed here the same way.
# Needs PY (the Python to use) and the repository root as the working
# directory.
mori_package() {
  local name=$1
  (cd /tmp && "$PY" -c 'import mori.allocator') >/dev/null 2>&1 && return 0
  if [ -d build-torch-stage ]; then
    export PYTHONPATH=$PWD/build-torch-stage${PYTHONPATH:+:$PYTHONPATH}
    return 0
  fi
  PIP_NO_INDEX=1 "$PY" -m pip install --no-build-isolation -q . && return 0
  echo "$name: FAIL: cannot install the mori package"
  return 1
}
