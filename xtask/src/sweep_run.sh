#!/usr/bin/env bash
# Runs this bundle's cuzk-sweep on a machine without cargo (the GPU machine).
# Written by `cargo xtask sweep bundle` (xtask/src/sweep.rs and
# sweep_run.sh); the bundle is rebuilt, not edited.
#
#   bash .device/sweep/run.sh [RUN ARGS...]       # cuzk-sweep run --out "$OUT" --rev <rev> RUN ARGS
#   bash .device/sweep/run.sh plot JSON... [--out DIR]   # redraw the SVGs of saved results
#   bash .device/sweep/run.sh bench [FILTER] [CRITERION ARGS...]
#                                                 # the criterion benches whose name holds
#                                                 # FILTER (msm, ntt, proof, synth; all), when
#                                                 # bundled with --with-benches
#   bash .device/sweep/run.sh --unpack            # print the folder holding bin/
#
# e.g. bash .device/sweep/run.sh --circuit porep:20,porep:22 --partitions 10 \
#          --repeats 3 --grid workers_per_device=1,2,3 --engine backend=gpu --fake-params
#
# OUT: where the results go (default ./out); a later --out in RUN ARGS wins.
# Benches: each one's output also goes to $OUT/bench-<name>.log; criterion's
# own files to $CRITERION_HOME (default: beside the unpacked binaries);
# CUZK_REQUIRE_GPU defaults to 1 (no GPU is a failure, not a skip).
# The revision recorded is the one the bundle was built from (@REV@); a later
# --rev wins. The binary is packed in payload.tar.gz and unpacked once per
# payload into ${TMPDIR:-/tmp}/cuzk-sweep-<checksum>/.
set -euo pipefail

BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REV='@REV@'
PAYLOAD=$BUNDLE/payload.tar.gz
if [ ! -f "$PAYLOAD" ]; then
    echo "run.sh: $PAYLOAD is missing; make the bundle again with cargo xtask sweep bundle" >&2
    exit 2
fi
FILES=${TMPDIR:-/tmp}/cuzk-sweep-$(cksum <"$PAYLOAD" | cut -d' ' -f1)
if [ ! -f "$FILES/.unpacked" ]; then
    if ! { rm -rf "$FILES" && mkdir -p "$FILES" && tar -xzf "$PAYLOAD" -C "$FILES" &&
        chmod +x "$FILES"/bin/cuzk* && touch "$FILES/.unpacked"; }; then
        echo "run.sh: cannot unpack $PAYLOAD into $FILES" >&2
        exit 2
    fi
fi
SWEEP=$FILES/bin/cuzk-sweep

case "${1:-}" in
--unpack)
    echo "$FILES"
    exit 0
    ;;
plot | help | --help | -h)
    exec "$SWEEP" "$@"
    ;;
bench)
    shift
    FILTER=${1:-}
    [ $# -gt 0 ] && shift
    [ "$FILTER" = all ] && FILTER=
    OUT=${OUT:-./out}
    mkdir -p "$OUT"
    export CUZK_REQUIRE_GPU=${CUZK_REQUIRE_GPU:-1}
    export CRITERION_HOME=${CRITERION_HOME:-$FILES/criterion}
    found=0
    status=0
    for exe in "$FILES"/bin/bench-*; do
        [ -e "$exe" ] || continue
        name=${exe##*/bench-}
        if [ -n "$FILTER" ] && [[ "$name" != *"$FILTER"* ]]; then continue; fi
        found=1
        echo "== bench $name ($REV)" >&2
        "$exe" --bench "$@" 2>&1 | tee "$OUT/bench-$name.log" || status=1
    done
    if [ $found -eq 0 ]; then
        echo "run.sh: no bench matches '$FILTER' (make the bundle with --with-benches)" >&2
        exit 2
    fi
    exit $status
    ;;
esac

OUT=${OUT:-./out}
mkdir -p "$OUT"
echo "cuzk-sweep $REV on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), results in $OUT" >&2
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 |
        sed 's/^/gpu: /' >&2 || true
else
    echo "gpu: nvidia-smi not found" >&2
fi
exec "$SWEEP" run --out "$OUT" --rev "$REV" "$@"
