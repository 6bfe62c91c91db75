#!/usr/bin/env bash
# Runs this bundle's test executables, then `cuzk demo`, on a machine without
# cargo (the GPU machine). Written by `cargo xtask bundle` (xtask/src/bundle.rs
# and bundle_run.sh); the bundle is rebuilt, not edited.
#
#   bash .device/bundle/run.sh [FILTER] [TEST ARGS...]
#   bash .device/bundle/run.sh --unpack    # prints the folder of the unpacked
#                                          # files (bin/cuzk, bin/<example>)
#
# FILTER     run only the executables whose name contains FILTER (names are in
#            tests.tsv, e.g. cuzk-groth16-cuda.test.groth16_cuda; the demo is
#            cuzk-demo); empty or `all` runs everything.
# TEST ARGS  passed to every test executable (libtest: a test-name filter,
#            --nocapture, --test-threads=1, ...), not to the demo.
#
# The executables travel packed in payload.tar.xz and are unpacked once per
# payload into ${TMPDIR:-/tmp}/cuzk-bundle-<checksum>/ (by xz, or by python3's
# lzma module where xz is missing). Run it from the root of
# the copied working tree. Environment: OUT (where
# logs go; default ./out), CUZK_REQUIRE_GPU (default 1: GPU tests fail instead
# of skipping when no GPU is usable), CUZK_TEST_TIMEOUT (seconds per
# executable; default 300).
#
# Each executable runs in its crate's directory, as under `cargo test`, with
# its output in $OUT/<name>.log; one summary line per executable goes to the
# terminal and to $OUT/summary.txt, and the end of every failing log to the
# terminal. When more than 6 logs were written, all of them also go into
# $OUT/logs.tar.gz and only the failing ones stay as files (the transfer to the GPU machine
# returns at most 8 files). Exit status: 0 all passed, 1 some failed, 2 nothing
# matched FILTER.
set -uo pipefail

BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# The workspace the executables were built in: paths compiled into them
# (env!("CARGO_MANIFEST_DIR"), env!("CARGO_BIN_EXE_cuzk")) start with it.
BUILD_ROOT='@BUILD_ROOT@'

PAYLOAD=$BUNDLE/payload.tar.xz
if [ ! -f "$PAYLOAD" ]; then
    echo "run.sh: $PAYLOAD is missing; make the bundle again with cargo xtask bundle" >&2
    exit 2
fi
FILES=${TMPDIR:-/tmp}/cuzk-bundle-$(cksum <"$PAYLOAD" | cut -d' ' -f1)
if [ ! -f "$FILES/.unpacked" ]; then
    unpack() {
        if command -v xz >/dev/null 2>&1; then
            xz -dc "$PAYLOAD" | tar -xf - -C "$FILES"
        else
            python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
                "$PAYLOAD" "$FILES"
        fi
    }
    if ! { rm -rf "$FILES" && mkdir -p "$FILES" && unpack &&
        chmod +x "$FILES"/tests/* "$FILES"/bin/* && touch "$FILES/.unpacked"; }; then
        echo "run.sh: cannot unpack $PAYLOAD into $FILES" >&2
        exit 2
    fi
fi
if [ "${1:-}" = --unpack ]; then
    echo "$FILES"
    exit 0
fi

FILTER=${1:-}
[ $# -gt 0 ] && shift
[ "$FILTER" = all ] && FILTER=
OUT=${OUT:-./out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd -P)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
export CUZK_REQUIRE_GPU=${CUZK_REQUIRE_GPU:-1}
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}
TIMEOUT=${CUZK_TEST_TIMEOUT:-300}

say() { echo "$*" | tee -a "$SUMMARY"; }

# The copied working tree: the current directory when it is the workspace
# root, else the first folder above the bundle holding the workspace manifest.
is_root() { [ -f "$1/Cargo.toml" ] && grep -q '^\[workspace\]' "$1/Cargo.toml"; }
if is_root "$PWD"; then
    ROOT=$(pwd -P)
else
    ROOT=$BUNDLE
    while [ "$ROOT" != / ] && ! is_root "$ROOT"; do ROOT=$(dirname "$ROOT"); done
    if [ "$ROOT" = / ]; then
        echo "run.sh: no workspace root (Cargo.toml with [workspace]) here or above $BUNDLE" >&2
        exit 2
    fi
fi

say "cuzk bundle run: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), tree $ROOT"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 |
        sed 's/^/gpu: /' | tee -a "$SUMMARY"
else
    say "gpu: nvidia-smi not found"
fi
say "CUZK_REQUIRE_GPU=$CUZK_REQUIRE_GPU, filter '${FILTER:-all}', test args: ${*:-none}"

# Make the compiled-in paths resolve into this tree.
if [ "$ROOT" != "$BUILD_ROOT" ]; then
    if [ -e "$BUILD_ROOT" ] || [ -L "$BUILD_ROOT" ]; then
        if [ "$(cd "$BUILD_ROOT" 2>/dev/null && pwd -P)" != "$ROOT" ]; then
            say "warning: $BUILD_ROOT exists and is not this tree: tests that read files through compiled-in paths read it instead"
        fi
    elif mkdir -p "$(dirname "$BUILD_ROOT")" 2>/dev/null && ln -s "$ROOT" "$BUILD_ROOT" 2>/dev/null; then
        say "linked $BUILD_ROOT -> $ROOT (paths compiled into the tests)"
    else
        say "warning: cannot link $BUILD_ROOT -> $ROOT: tests that read files through compiled-in paths will fail"
    fi
fi
while IFS=$'\t' read -r have expect; do
    case "$have" in '' | '#'*) continue ;; esac
    case "$expect" in /*) ;; *) expect=$BUILD_ROOT/$expect ;; esac
    # A link is ours from an earlier run (maybe of another payload): renew it.
    if [ -L "$expect" ] || [ ! -e "$expect" ]; then
        mkdir -p "$(dirname "$expect")" && ln -sfn "$FILES/$have" "$expect" ||
            say "warning: cannot place $have at $expect, where the tests expect it"
    fi
done <"$FILES/bins.tsv"

names=()
dirs=()
while IFS=$'\t' read -r name dir _kind; do
    case "$name" in '' | '#'*) continue ;; esac
    if [ -z "$FILTER" ] || [[ "$name" == *"$FILTER"* ]]; then
        names+=("$name")
        dirs+=("$dir")
    fi
done <"$FILES/tests.tsv"
run_demo=0
if [ -z "$FILTER" ] || [[ cuzk-demo == *"$FILTER"* ]]; then run_demo=1; fi
if [ ${#names[@]} -eq 0 ] && [ $run_demo -eq 0 ]; then
    say "nothing matches '$FILTER'; the executables are listed in $FILES/tests.tsv"
    exit 2
fi

passed=()
failed=()
# run_one NAME DIR COMMAND...: runs COMMAND in DIR with its output in the log.
run_one() {
    local name=$1 dir=$2
    shift 2
    local log=$OUT/$name.log start=$EPOCHREALTIME status
    (cd "$dir" && CARGO_MANIFEST_DIR=$dir timeout "$TIMEOUT" "$@") >"$log" 2>&1
    status=$?
    local secs counts skips verdict note=""
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    counts=$(awk '/^test result:/ {
            for (i = 2; i <= NF; i++) {
                if ($i ~ /^passed;?$/) p += $(i - 1)
                if ($i ~ /^failed;?$/) f += $(i - 1)
                if ($i ~ /^ignored;?$/) g += $(i - 1)
            }
            seen = 1
        }
        END { if (seen) printf "%d passed, %d failed, %d ignored", p, f, g }' "$log")
    skips=$(grep -c '^skipping .*: no CUDA device' "$log")
    [ "$skips" -gt 0 ] && note=", $skips GPU skips"
    if [ $status -eq 0 ]; then
        verdict=PASS
        passed+=("$name")
    else
        verdict=FAIL
        failed+=("$name")
        if [ $status -eq 124 ]; then note="$note, timed out after ${TIMEOUT}s"; else note="$note, exit $status"; fi
    fi
    say "$(printf '%s  %-46s %s (%s s%s)' "$verdict" "$name" "${counts:-no libtest summary}" "$secs" "$note")"
    if [ $status -ne 0 ]; then
        echo "---- end of $log"
        tail -n 40 "$log"
        echo "----"
    fi
}

for i in "${!names[@]}"; do
    run_one "${names[$i]}" "$ROOT/${dirs[$i]}" "$FILES/tests/${names[$i]}" "$@"
done
if [ $run_demo -eq 1 ]; then
    run_one cuzk-demo "$ROOT" "$FILES/bin/cuzk" demo
fi

total=$((${#passed[@]} + ${#failed[@]}))
say "summary: ${#passed[@]} of $total passed${failed[*]:+; failed: ${failed[*]}}"

logs=("$OUT"/*.log)
if [ ${#logs[@]} -gt 6 ]; then
    (cd "$OUT" && tar -czf logs.tar.gz -- *.log) &&
        for name in "${passed[@]}"; do rm -f "$OUT/$name.log"; done &&
        say "logs: $OUT/logs.tar.gz (failing logs also as files)"
fi
[ ${#failed[@]} -eq 0 ]
