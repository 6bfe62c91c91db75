#!/usr/bin/env bash
# Session 11 on the H200: one 32 GiB PoRep partition's witness, cuzk's
# parallel witness and bellperson's one-thread synthesis of the same
# partition in the same run; then the GPU test of parameter copies freed on
# eviction; then the filecoin synthetic C2 tests through the engine (GPU).
# Results straight into $OUT (what is there comes back even on a timeout).
set -u
export CUZK_REQUIRE_GPU=1
FILES=$(bash .device/bundle/run.sh --unpack)
REV=$(cat .device/rev)
log() { echo "$1 $(date +%T)" | tee -a "$OUT/job.log"; }
log "start rev $REV nproc $(nproc) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
CMD="witness_bench --seal-proof StackedDrg32GiBV1_1 --seed 1 --partition 0 --skip-sequential --runs 1 --json REV CMD (.device/x_job.sh)"
timeout 200 /usr/bin/time -v "$FILES/bin/witness_bench" --seal-proof StackedDrg32GiBV1_1 --seed 1 --partition 0 --skip-sequential --runs 1 \
    --json "$REV" "$CMD" > "$OUT/witness.json" 2> "$OUT/witness.log"
log "witness_bench rc $?"
grep -v "INFO\|DEBUG" "$OUT/witness.log" | head -12
OUT=/tmp/xo/evict timeout 60 bash .device/bundle/run.sh gpu_evict > "$OUT/evict.txt" 2>&1
log "gpu_evict rc $?"
tail -n 6 "$OUT/evict.txt"
OUT=/tmp/xo/syn timeout 120 bash .device/bundle/run.sh synthetic > "$OUT/synthetic.txt" 2>&1
log "synthetic rc $?"
tail -n 6 "$OUT/synthetic.txt"
(cd /tmp/xo && tar -czf "$OUT/tests.tar.gz" .)
