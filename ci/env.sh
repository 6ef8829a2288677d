# Sourced by every CI script: shared environment.
set -euo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd))"
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0
# Real aarch64 execution without Docker: Debian's cross linker and qemu-user.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
# proptest: keep failure files out of the tree in CI.
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=1

# reclaim PATH...: with CI_RECLAIM=1 (.ci/run sets it) these build directories are deleted when
# the script exits, pass or fail, so one step's artifacts do not fill a small CI disk for the
# steps after it (docs/testing.md, "CI disk use"). Run by hand, a step keeps them as caches.
# Only directories no step of the other lane uses belong here.
_reclaim_paths=()
reclaim() {
    _reclaim_paths+=("$@")
    if [ "${CI_RECLAIM:-0}" = 1 ]; then trap _reclaim_exit EXIT; fi
}
_reclaim_exit() {
    local rc=$? p freed=0 kib
    for p in "${_reclaim_paths[@]}"; do
        [ -e "$p" ] || continue
        kib=$(du -sk "$p" 2>/dev/null | cut -f1)
        rm -rf -- "$p" && freed=$(( freed + ${kib:-0} ))
    done
    echo "reclaim: $(( freed / 1024 )) MiB of build directories deleted (${_reclaim_paths[*]})"
    exit "$rc"
}
