#!/usr/bin/env bash
# The public API of the published crates against its snapshot in api/: rustdoc JSON (nightly)
# rendered by ci/public-api.py, one line per item. Any change of the surface shows as a diff
# here; to accept one, run `bash ci/api.sh --bless` and commit api/.
source "$(dirname "$0")/env.sh"
reclaim target/api
crates=(stream-hal stream-par memmap-core hugetlb-init stream-vm-memory)
export CARGO_TARGET_DIR=target/api
mkdir -p api
fail=0
for c in "${crates[@]}"; do
    cargo +nightly rustdoc --locked -q -p "$c" --lib --all-features -- -Zunstable-options --output-format json
    json="$CARGO_TARGET_DIR/doc/${c//-/_}.json"
    python3 ci/public-api.py "$json" >"$CARGO_TARGET_DIR/$c.txt"
    if [ "${1:-}" = "--bless" ]; then
        cp "$CARGO_TARGET_DIR/$c.txt" "api/$c.txt"
    elif ! diff -u "api/$c.txt" "$CARGO_TARGET_DIR/$c.txt"; then
        echo "api: the public API of $c changed (above); if intended: bash ci/api.sh --bless"
        fail=1
    fi
    echo "api: $c: $(grep -vc '^impl ' "$CARGO_TARGET_DIR/$c.txt") items, $(grep -c '^impl ' "$CARGO_TARGET_DIR/$c.txt") trait impls"
done
exit $fail
