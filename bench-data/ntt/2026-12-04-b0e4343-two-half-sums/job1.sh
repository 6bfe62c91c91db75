#!/bin/bash
# [Q] round 1: the two-half-sum Montgomery multiplication (b0e4343) against
# main's kernels (1a81832), same machine, same run.
#   bash .device/q/job1.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q1
NEW=b0e4343
OLD=1a81832
case "$1" in
start)
  mkdir -p $R
  setsid nohup bash .device/q/job1.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  D=$(bash .device/q/new/run.sh --unpack)
  tar xJf .device/q/old.tar.xz -C $R
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  for t in gpu_arith gpu_ntt; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q/new/run.sh $t; done
  for b in arith_bench; do for v in old new; do
    echo "== $b $v $(date +%T)"; if [ $v = old ]; then X=$R/old/$b; REV=$OLD; else X=$D/bin/$b; REV=$NEW; fi
    $X $REV "bash .device/q/job1.sh ($v: $b)" > $R/${b}_$v.json 2> $R/${b}_$v.err; echo rc=$?; done; done
  for b in ntt_bench; do for v in old new; do
    echo "== $b $v $(date +%T)"; if [ $v = old ]; then X=$R/old/$b; REV=$OLD; else X=$D/bin/$b; REV=$NEW; fi
    $X $REV "bash .device/q/job1.sh ($v: $b)" > $R/${b}_$v.json 2> $R/${b}_$v.err; echo rc=$?; done; done
  for v in old new; do
    echo "== msm_bench $v $(date +%T)"; if [ $v = old ]; then X=$R/old/msm_bench; REV=$OLD; else X=$D/bin/msm_bench; REV=$NEW; fi
    MSM_BENCH_CPU_BUDGET_S=0 $X $REV "MSM_BENCH_CPU_BUDGET_S=0 msm_bench (bash .device/q/job1.sh, $v)" > $R/msm_bench_$v.json 2> $R/msm_bench_$v.err; echo rc=$?; done
  for v in old new; do
    echo "== proof_bench $v $(date +%T)"; if [ $v = old ]; then X=$R/old/proof_bench; REV=$OLD; else X=$D/bin/proof_bench; REV=$NEW; fi
    $X $REV "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 (bash .device/q/job1.sh, $v)" --sizes 24,26 --runs 3 --bellperson-max 0 > $R/proof_bench_$v.json 2> $R/proof_bench_$v.err; echo rc=$?; done
  for t in gpu_msm gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q/new/run.sh $t; done
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz -C /tmp q1 --exclude=q1/old 2>/dev/null
  cat $R/job.log | tail -60
  ls $R; [ -f $R/DONE ] && echo ALLDONE ;;
esac
