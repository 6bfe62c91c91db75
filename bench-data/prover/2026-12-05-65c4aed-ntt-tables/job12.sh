#!/bin/bash
# [Q] batch-affine MSM accumulation + NTT variants, one run:
#   gpu_msm (every accumulation variant incl. batch-affine vs bellperson);
#   msm_bench variants only: PlainV4 vs BatchAffine128/256 (G1 2^24, G2 2^22);
# NTT variants (8eaef12 / cf3910e): pass kernels (radix-2 / stage pairs,
# threads, register bounds) and whole tables, one run:
#   tests gpu_ntt (every variant vs CPU), gpu_prover (a prover with stage
#   pairs + whole tables byte-identical);
#   ntt_bench at 2^24, 2^26 (every variant beside the default, same data);
#   proof_bench porep:24,26 with whole NTT tables off, then on (same bundle).
#   bash .device/q12/job12.sh start | wait SECS     (env NEW=<rev>)
cd "$(dirname "$0")/../.."
R=/tmp/q12
NEW=${NEW:-unknown}
case "$1" in
start)
  mkdir -p $R
  setsid nohup bash .device/q12/job12.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  DN=$(bash .device/q12/new/run.sh --unpack)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  echo "== msm_bench batch-affine $(date +%T)"
  MSM_BENCH_VARIANTS_ONLY=1 MSM_BENCH_ACCUMULATE=PlainV4,BatchAffine128,BatchAffine256 $DN/bin/msm_bench $NEW "MSM_BENCH_VARIANTS_ONLY=1 MSM_BENCH_ACCUMULATE=PlainV4,BatchAffine128,BatchAffine256 msm_bench (bash .device/q12/job12.sh)" > $R/msm_bench_ba.json 2> $R/msm_bench_ba.err; echo rc=$?
  tail -8 $R/msm_bench_ba.err
  echo "== ntt_bench $(date +%T)"
  NTT_BENCH_SIZES=24,26 $DN/bin/ntt_bench $NEW "NTT_BENCH_SIZES=24,26 ntt_bench (bash .device/q12/job12.sh)" > $R/ntt_bench.json 2> $R/ntt_bench.err; echo rc=$?
  grep -E "2\^|rate|bandwidth|rror" $R/ntt_bench.err | tail -40
  for t in gpu_msm gpu_ntt; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q12/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -2 $R/t_$t.log; done
  for wt in false true; do
    echo "== proof_bench whole-ntt-tables $wt $(date +%T)"
    $DN/bin/proof_bench $NEW "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 --whole-ntt-tables $wt --ntt-fused-bitrev $wt (bash .device/q12/job12.sh)" --sizes 24,26 --runs 3 --bellperson-max 0 --whole-ntt-tables $wt --ntt-fused-bitrev $wt > $R/proof_bench_wt_$wt.json 2> $R/proof_bench_wt_$wt.err; echo rc=$?
    grep -E "warm-up|run [0-9]|rror" $R/proof_bench_wt_$wt.err | tail -10
  done
  for t in gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q12/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -2 $R/t_$t.log; done
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz -C /tmp q12 2>/dev/null
  tail -80 $R/job.log
  [ -f $R/DONE ] && echo ALLDONE ;;
esac
