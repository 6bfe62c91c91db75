#!/usr/bin/env bash
# Session 12 on the H200: one partition of a 32 GiB Filecoin proof proved by
# cuzk and by bellperson with SupraSeal (cuzk-peers, supraseal build) on the
# same circuit, fake parameters, r and s. $1: seal|snap|post. Results
# straight into $OUT (what is there comes back even on a timeout).
set -u
export CUZK_REQUIRE_GPU=1
WHAT=$1
PHASE=${2:-both}   # save: cuzk's side, the parameter file kept; peer: the peer's side from it
REV=$(cat .device/peers/rev)
BIN=/tmp/peers-bin/cuzk-peers
if [ ! -x "$BIN" ]; then
    mkdir -p /tmp/peers-bin && xz -dc .device/peers/cuzk-peers.xz > "$BIN" && chmod +x "$BIN"
fi
log() { echo "$1 $(date +%T)" | tee -a "$OUT/job.log"; }
log "start $WHAT rev $REV nproc $(nproc) $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader)"
df -h . /tmp /dev/shm | tee -a "$OUT/job.log"; free -g | tee -a "$OUT/job.log"
WORK=$PWD/.device/peers-work; mkdir -p "$WORK"
case $WHAT in
    seal) ARGS="--seal-proof StackedDrg32GiBV1_1 --partition 0 --runs 2 --peer-runs 1";;
    snap) ARGS="--update-proof StackedDrg32GiBV1 --partition 0 --runs 2 --peer-runs 1";;
    post) ARGS="--post-proof StackedDrgWindow32GiBV1_2 --partition 0 --runs 2 --peer-runs 1";;
esac
case $PHASE in
    save) ARGS="$ARGS --save $WORK/$WHAT";;
    peer) ARGS="$ARGS --peer-from $WORK/$WHAT";;
esac
CMD="cuzk-peers REV CMD $ARGS --workdir DIR --out FILE (cuzk-peers built with --features supraseal; .device/peers/job.sh $WHAT $PHASE)"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$OUT/smi-$WHAT-$PHASE.csv" &
SMI=$!
timeout ${LIMIT:-560} /usr/bin/time -v "$BIN" "$REV" "$CMD" $ARGS --workdir "$WORK" --out "$OUT/peers-$WHAT-$PHASE.json" \
    > /dev/null 2> "$OUT/peers-$WHAT-$PHASE.log"
log "cuzk-peers rc $?"
kill $SMI
[ "$PHASE" = save ] || rm -rf "$WORK"
ls -la "$WORK"/* 2>/dev/null
grep -v "^\s*at \|^ *[0-9]*: " "$OUT/peers-$WHAT-$PHASE.log" | tail -n 40
awk -F', ' '{gsub(" MiB","",$2); if ($2+0>m) m=$2+0} END {print "device memory peak MiB", m}' "$OUT/smi-$WHAT-$PHASE.csv" | tee -a "$OUT/job.log"
