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
