#!/bin/bash
# [Q] round 3, second run: proof_bench with G1's Auto accumulation now
# PlainV4 (the default the engine uses), GPU tests of the MSM and prover.
#   bash .device/q4/job4.sh
cd "$(dirname "$0")/../.."
R=/tmp/q4; mkdir -p $R $OUT
NEW=30dcbd0
export CUZK_REQUIRE_GPU=1
D=$(bash .device/q4/new/run.sh --unpack)
echo "== proof_bench $(date +%T)"
$D/bin/proof_bench $NEW "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 (bash .device/q4/job4.sh)" --sizes 24,26 --runs 3 --bellperson-max 0 > $R/proof_bench.json 2> $R/proof_bench.err; echo rc=$?
for t in gpu_msm gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q4/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -2 $R/t_$t.log; done
echo "== end $(date +%T)"
tar czf $OUT/r.tgz -C /tmp q4
