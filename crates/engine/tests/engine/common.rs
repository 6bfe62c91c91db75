//! Shared helpers of the engine's tests: small circuits, parameters made once
//! per shape with a seeded RNG, engines with explicit budgets.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bellperson::groth16::{Parameters, Proof, generate_random_parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_engine::{Auto, Backend, ByteSize, Engine, EngineConfig};
use cuzk_groth16_cuda::Bls12;
use cuzk_synth::circuits::{BuiltinCircuit, CircuitSpec};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// Parameters per shape, made once per test binary.
pub fn params(spec: &str) -> Arc<Parameters<Bls12>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Parameters<Bls12>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap().get(spec) {
        return Arc::clone(p);
    }
    let made = Arc::new(make_params(spec));
    cache
        .lock()
        .unwrap()
        .entry(spec.to_owned())
        .or_insert(made)
        .clone()
}

fn make_params(spec: &str) -> Parameters<Bls12> {
    let mut rng = ChaCha20Rng::seed_from_u64(0x5EED ^ spec.len() as u64);
    match spec.strip_prefix("chain:") {
        Some(n) => {
            generate_random_parameters(Chain::good(n.parse().unwrap(), 0), &mut rng).unwrap()
        }
        None => {
            let s: CircuitSpec = spec.parse().unwrap();
            generate_random_parameters(s.build(0), &mut rng).unwrap()
        }
    }
}

/// Parameters of `spec` written to a file under `dir` (once per directory).
pub fn params_file(dir: &Path, spec: &str) -> PathBuf {
    let path = dir.join(format!("{}.params", spec.replace(':', "-")));
    if !path.exists() {
        cuzk_groth16_cuda::write_params(&path, &params(spec)).unwrap();
    }
    path
}

pub fn builtin(spec: &str, seed: u64) -> BuiltinCircuit {
    spec.parse::<CircuitSpec>().unwrap().build(seed)
}

/// What a shape's job needs at once on the CPU backend: PCE + parameters +
/// one working set.
pub fn need(spec: &str) -> u64 {
    let pce = match spec.strip_prefix("chain:") {
        Some(n) => cuzk_synth::Pce::record(Chain::good(n.parse().unwrap(), 0)).unwrap(),
        None => cuzk_synth::Pce::record(builtin(spec, 0)).unwrap(),
    };
    pce.bytes() as u64
        + cuzk_engine::cache::params_bytes(&params(spec))
        + cuzk_engine::working_set_bytes(
            cuzk_engine::pce_file::ShapeCounts::of(&pce),
            &cuzk_groth16_cuda::CpuProver,
        )
}

/// A CPU engine with `budget` bytes.
pub fn engine(budget: u64) -> Engine {
    Engine::new(config(budget)).unwrap()
}

pub fn config(budget: u64) -> EngineConfig {
    EngineConfig {
        backend: Backend::Cpu,
        host_memory_budget: Auto::Value(ByteSize(budget)),
        ..EngineConfig::default()
    }
}

pub fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::with_capacity(192);
    p.write(&mut v).unwrap();
    v
}

/// Counts clones of [`Chain`]: the engine clones the first partition only to
/// record a PCE.
pub static CHAIN_CLONES: AtomicUsize = AtomicUsize::new(0);

/// x, x^2, x^4, ... n squarings, the last one a public input; a partition
/// can be made to lie (a wrong square: unsatisfied), fail (an assignment
/// error) or panic, without changing the shape.
#[derive(Debug)]
pub struct Chain {
    pub n: usize,
    pub seed: u64,
    pub lie: bool,
    pub fail: bool,
    pub panic: bool,
}

impl Clone for Chain {
    fn clone(&self) -> Self {
        CHAIN_CLONES.fetch_add(1, Ordering::SeqCst);
        Chain { ..*self }
    }
}

impl Chain {
    pub fn good(n: usize, seed: u64) -> Self {
        Chain {
            n,
            seed,
            lie: false,
            fail: false,
            panic: false,
        }
    }

    /// The public input a verifier checks.
    pub fn output(&self) -> Scalar {
        let mut v = Scalar::from(self.seed + 2);
        for _ in 0..self.n {
            v = v.square();
        }
        v
    }
}

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut v = Scalar::from(self.seed + 2);
        let mut var = cs.alloc(|| "x", || Ok(v))?;
        for i in 0..self.n {
            let special = i == self.n / 2;
            if self.panic && special {
                panic!("the circuit panicked on purpose");
            }
            let value = if self.lie && special {
                v.square() + Scalar::ONE
            } else {
                v.square()
            };
            let fail = self.fail && special;
            let out = cs.alloc(
                || format!("sq {i}"),
                || {
                    if fail {
                        Err(SynthesisError::AssignmentMissing)
                    } else {
                        Ok(value)
                    }
                },
            )?;
            cs.enforce(
                || format!("sq {i}"),
                |lc| lc + var,
                |lc| lc + var,
                |lc| lc + out,
            );
            v = value;
            var = out;
        }
        let input = cs.alloc_input(|| "out", || Ok(v))?;
        cs.enforce(
            || "out",
            |lc| lc + var,
            |lc| lc + CS::one(),
            |lc| lc + input,
        );
        Ok(())
    }
}
