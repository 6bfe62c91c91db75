#!/usr/bin/env bash
# Session 13 on the H200: cuzk beside bellperson with SupraSeal (cuzk-peers,
# supraseal build, its kernels now compiled without nvcc -G). Steps, in
# order, each a word: small (porep:20,22 in one process), seal-save,
# seal-peer, snap-save, snap-peer, post-save, post-peer. Results straight into $OUT.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/peers/rev)
BIN=/tmp/peers-bin/cuzk-peers
if [ ! -x "$BIN" ]; then
    mkdir -p /tmp/peers-bin && xz -dc .device/peers/cuzk-peers.xz > "$BIN" && chmod +x "$BIN"
fi
T0=$(date +%s)
log() { echo "$1 $(date +%T) +$(( $(date +%s) - T0 ))s" | tee -a "$OUT/job.log"; }
log "start $* rev $REV nproc $(nproc) $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader)"
df -h . /tmp /dev/shm | tee -a "$OUT/job.log"; free -g | tee -a "$OUT/job.log"
WORK=$PWD/.device/peers-work; mkdir -p "$WORK"
for STEP in "$@"; do
    WHAT=${STEP%-*}; PHASE=${STEP#*-}
    case $WHAT in
        small) ARGS="--sizes 20,22 --runs 3 --peer-runs 2";;
        seal) ARGS="--seal-proof StackedDrg32GiBV1_1 --partition 0 --runs 2 --peer-runs 1";;
        snap) ARGS="--update-proof StackedDrg32GiBV1 --partition 0 --runs 2 --peer-runs 1";;
        post) ARGS="--post-proof StackedDrgWindow32GiBV1_2 --partition 0 --runs 1 --peer-runs 1";;
    esac
    # The WindowPoSt file (~61 GB) does not fit the disk beside the system: /dev/shm.
    W=$WORK; [ $WHAT = post ] && W=/dev/shm/peers-work && mkdir -p $W
    case $PHASE in
        save) ARGS="$ARGS --save $W/$WHAT";;
        peer) ARGS="$ARGS --peer-from $W/$WHAT --remove-params";;
    esac
    CMD="cuzk-peers REV CMD $ARGS --workdir DIR --out FILE (cuzk-peers built with --features supraseal; .device/peers/job.sh $STEP)"
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$OUT/smi-$STEP.csv" &
    SMI=$!
    LEFT=$(( ${LIMIT:-570} - ($(date +%s) - T0) ))
    log "$STEP: limit ${LEFT}s"
    timeout $LEFT /usr/bin/time -v "$BIN" "$REV" "$CMD" $ARGS --workdir "$W" --out "$OUT/peers-$STEP.json" \
        > /dev/null 2> "$OUT/peers-$STEP.log"
    log "$STEP: cuzk-peers rc $?"
    kill $SMI
    [ "$PHASE" = save ] || rm -rf "$W/$WHAT"
    ls -la "$W"/* 2>/dev/null; df -h . /dev/shm | tail -2
    grep -v "^\s*at \|^ *[0-9]*: " "$OUT/peers-$STEP.log" | tail -n 40
    awk -F', ' '{gsub(" MiB","",$2); if ($2+0>m) m=$2+0} END {print "device memory peak MiB", m}' "$OUT/smi-$STEP.csv" | tee -a "$OUT/job.log"
done
