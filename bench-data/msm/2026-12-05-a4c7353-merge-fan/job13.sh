#!/bin/bash
# [Q] a4c7353: the bucket reduction's merge fans and the new NTT default
# (stage pairs at 128 threads, fused bit-reversal, small tables), one run,
# foreground, each result written to $OUT at once, most valuable first:
#   msm_bench variants only: merge fans 1,2,4,8 (G1 2^24 plain and with
#     window multiples, G2 2^22), each sum checked against fan 1's;
#   gpu_prover (proofs byte-identical with the new NTT default);
#   gpu_msm (merge fans 3, 4, 5, 8 among the configurations);
#   proof_bench porep:26 with the new default.
#   NEW=<rev> bash .device/q13/job13.sh
cd "$(dirname "$0")/../.."
export CUZK_REQUIRE_GPU=1
NEW=${NEW:-unknown}
mkdir -p $OUT
cp .device/q13/job13.sh $OUT/
DN=$(bash .device/q13/new/run.sh --unpack)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/smi.txt
echo "== msm_bench merge fans $(date +%T)"
V="MSM_BENCH_VARIANTS_ONLY=1 MSM_BENCH_MAX_LOG2=24 MSM_BENCH_G2_MAX_LOG2=22 MSM_BENCH_ACCUMULATE=PlainV4 MSM_BENCH_MERGE_FAN=1,2,4,8"
env $V $DN/bin/msm_bench $NEW "$V msm_bench (bash .device/q13/job13.sh)" > $OUT/msm_bench_fan.json 2> $OUT/msm_bench_fan.err; echo rc=$?
grep -E "fan|rror" $OUT/msm_bench_fan.err | tail -14
for t in gpu_prover gpu_msm; do
  echo "== $t $(date +%T)"
  OUT=$OUT/t_$t bash .device/q13/new/run.sh $t > $OUT/t_$t.log 2>&1; echo rc=$?; tail -2 $OUT/t_$t.log
done
echo "== proof_bench default $(date +%T)"
$DN/bin/proof_bench $NEW "proof_bench --sizes 26 --runs 2 --bellperson-max 0 (bash .device/q13/job13.sh)" --sizes 26 --runs 2 --bellperson-max 0 > $OUT/proof_bench_default.json 2> $OUT/proof_bench_default.err; echo rc=$?
grep -E "run [0-9]|rror" $OUT/proof_bench_default.err | tail -6
echo "== end $(date +%T)"
