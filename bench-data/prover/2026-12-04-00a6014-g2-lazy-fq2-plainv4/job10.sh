#!/bin/bash
# [Q] round 5, final run: kernels of fa5c174 (Fq2 multiplication with lazy
# reduction) and G2's Auto accumulation PlainV4 (00a6014). Baseline: the
# bundle of main 8c55337 (.device/q7/new). Same machine, one run:
#   tests (new), proof_bench porep:24 with window multiples (base, new),
#   then porep:24/26 without them (base, new).
#   bash .device/q10/job10.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q10
NEW=${NEW:-unknown}
BASE=${BASE:-8c55337}
case "$1" in
start)
  mkdir -p $R
  setsid nohup bash .device/q10/job10.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  DB=$(bash .device/q7/new/run.sh --unpack)
  DN=$(bash .device/q10/new/run.sh --unpack)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  for t in gpu_msm gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q10/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -2 $R/t_$t.log; done
  for wm in true false; do
    if [ $wm = true ]; then S=24; else S=24,26; fi
    for v in base new; do
      if [ $v = base ]; then D=$DB; REV=$BASE; else D=$DN; REV=$NEW; fi
      echo "== proof_bench $v ($REV) window multiples $wm $(date +%T)"
      $D/bin/proof_bench $REV "proof_bench --sizes $S --runs 3 --bellperson-max 0 --window-multiples $wm ($v bundle, bash .device/q10/job10.sh)" --sizes $S --runs 3 --bellperson-max 0 --window-multiples $wm > $R/proof_bench_${v}_wm_$wm.json 2> $R/proof_bench_${v}_wm_$wm.err; echo rc=$?
      grep -E "warm-up|run [0-9]|rror" $R/proof_bench_${v}_wm_$wm.err | tail -14
    done
  done
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz -C /tmp q10 2>/dev/null
  tail -70 $R/job.log
  [ -f $R/DONE ] && echo ALLDONE ;;
esac
