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

# debian_suite: the host's Debian release (bookworm, trixie, ...).
debian_suite() {
    local c
    c=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$c" ] || { echo "ci: no VERSION_CODENAME in /etc/os-release" >&2; return 1; }
    echo "$c"
}

# debian_mirror: the first main-archive URI of the host's apt sources (deb822 or one-line
# format), never the security archive. Either file may be missing.
debian_mirror() {
    local uri="" f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
        [ -z "$uri" ] || break
    done
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/ && $i !~ /security/) { print $i; exit } }' \
            /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || { echo "ci: no Debian mirror found in the host's apt sources" >&2; return 1; }
    echo "$uri"
}

# with_backports SUITE COMMAND...: runs an apt-get COMMAND with the host's sources plus
# SUITE-backports, through a private source list and package lists (the machine's apt setup is
# left as it is). COMMAND is the whole command line, e.g. `sudo apt-get install ...`: the apt
# options are appended to it.
with_backports() {
    local suite=$1 dir mirror rc=0
    shift
    mirror=$(debian_mirror) || return 1
    dir=$(mktemp -d)
    mkdir -p "$dir/lists/partial" "$dir/parts"
    cp /etc/apt/sources.list.d/*.sources "$dir/parts/" 2>/dev/null || true
    { [ -r /etc/apt/sources.list ] && cat /etc/apt/sources.list
      echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite-backports main"; } >"$dir/list"
    local opts=(-o "Dir::Etc::SourceList=$dir/list" -o "Dir::Etc::SourceParts=$dir/parts" -o "Dir::State::Lists=$dir/lists")
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get "${opts[@]}" update -qq && "$@" "${opts[@]}" || rc=$?
    rm -rf "$dir"
    return $rc
}

# reclaim PATH...: with CI_RECLAIM=1 these build directories are deleted when the script exits,
# pass or fail, so one step's artifacts do not fill a small CI disk for the steps after it
# (.ci/run sets it when it keeps no build cache; docs/testing.md, "CI disk use"). Run by hand,
# or with the cache, a step keeps them. Only directories no other step uses belong here.
_reclaim_paths=()
reclaim() { _reclaim_paths+=("$@"); }
# at_exit COMMAND: runs COMMAND (a function name or a command line) when the script exits, before
# the reclaim; the script's exit status is kept.
_at_exit=()
at_exit() { _at_exit+=("$1"); }
_ci_exit() {
    local rc=$? p freed=0 kib cmd
    for cmd in "${_at_exit[@]}"; do eval "$cmd" || true; done
    if [ "${CI_RECLAIM:-0}" = 1 ] && [ ${#_reclaim_paths[@]} -gt 0 ]; then
        for p in "${_reclaim_paths[@]}"; do
            [ -e "$p" ] || continue
            kib=$(du -sk "$p" 2>/dev/null | cut -f1)
            rm -rf -- "$p" && freed=$(( freed + ${kib:-0} ))
        done
        echo "reclaim: $(( freed / 1024 )) MiB of build directories deleted (${_reclaim_paths[*]})"
    fi
    exit "$rc"
}
trap _ci_exit EXIT
