//! Per-circuit-shape device state of the GPU prover, each made once per
//! shape and cached: the MSMs' densities, the streamed MSMs' chunk plans and
//! the PCE kept for a/b/c on the GPU.

use std::sync::Arc;

use cuzk_synth::{Density, Pce};

use super::{GpuProver, poisoned};
use crate::Result;
use crate::msm::DeviceDensity;
use crate::spmv::{DevicePce, PceShapeKey};
use crate::streamed::{ShapeKey, StreamedShape};

/// Densities of one circuit shape on the device, over `[inputs | aux]`.
pub(super) struct ShapeDensities {
    key: ShapeKey,
    /// H: the first m-1 of m coefficients.
    pub(super) h: DeviceDensity,
    /// L: the aux variables.
    pub(super) l: DeviceDensity,
    /// A: every input, then the aux used in A.
    pub(super) a: DeviceDensity,
    /// B: the inputs and aux used in B.
    pub(super) b: DeviceDensity,
}

impl ShapeDensities {
    /// The density of query `q`'s bases over its scalars (B_G1 and B_G2
    /// share B's).
    pub(super) fn of(&self, q: crate::streamed::Query) -> &DeviceDensity {
        use crate::streamed::Query;
        match q {
            Query::H => &self.h,
            Query::L => &self.l,
            Query::A => &self.a,
            Query::BG1 | Query::BG2 => &self.b,
        }
    }
}

impl ShapeDensities {
    pub(super) fn device_bytes(&self) -> u64 {
        [&self.h, &self.l, &self.a, &self.b]
            .iter()
            .map(|d| d.device_bytes())
            .sum()
    }
}

/// A circuit shape's key in the prover's caches: its sizes and densities.
fn shape_key(pce: &Pce) -> ShapeKey {
    (
        pce.num_inputs,
        pce.num_aux,
        pce.num_constraints(),
        density_hash(&pce.a_aux_density)
            ^ density_hash(&pce.b_input_density).rotate_left(21)
            ^ density_hash(&pce.b_aux_density).rotate_left(42),
    )
}

fn density_hash(d: &Density) -> u64 {
    // FNV-1a over the bitmap's words, not its bits (every kernel region
    // asks): cheap, and enough to tell shapes apart in a cache that also
    // compares the counts.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ d.len() as u64;
    for &w in d.words() {
        h = (h ^ w).wrapping_mul(0x100_0000_01b3);
    }
    h
}

impl GpuProver {
    /// The plan of `pce`'s streamed MSMs for this prover's chunk size,
    /// made and put on the device once per shape.
    pub(super) fn streamed_shape(&self, pce: &Pce) -> Result<Arc<StreamedShape>> {
        let key = shape_key(pce);
        let chunk = self.chunk_for(pce, self.stages_on_device(pce));
        let mut cache = self.streamed.lock().map_err(|_| poisoned())?;
        if let Some(s) = cache.iter().find(|s| s.key == key && s.chunk == chunk) {
            return Ok(s.clone());
        }
        let s = Arc::new(StreamedShape::new(&self.gpu, pce, key, chunk)?);
        cache.push(s.clone());
        Ok(s)
    }

    /// The shape's PCE on the device, uploaded now if needed. Matrices
    /// released from host memory are read again (seconds at 32 GiB) by one
    /// worker at a time, under `pce_reload` rather than the cache's lock:
    /// other workers' lookups and `held_device_bytes` after each phase do
    /// not wait for the read, and a second worker needing the same PCE
    /// waits for the first's upload instead of reading the file too.
    pub(super) fn device_pce(&self, pce: &Pce, key: &PceShapeKey) -> Result<Arc<DevicePce>> {
        let resident = |cache: &[Arc<DevicePce>]| cache.iter().find(|d| d.key() == key).cloned();
        let (_reload, whole);
        let pce = if pce.is_released() {
            if let Some(d) = resident(&self.pces.lock().map_err(|_| poisoned())?) {
                return Ok(d);
            }
            _reload = self.pce_reload.lock().map_err(|_| poisoned())?;
            // Uploaded by the worker this one waited for?
            if let Some(d) = resident(&self.pces.lock().map_err(|_| poisoned())?) {
                return Ok(d);
            }
            whole = pce.with_matrices()?;
            &*whole
        } else {
            pce
        };
        let mut cache = self.pces.lock().map_err(|_| poisoned())?;
        if let Some(d) = resident(&cache) {
            return Ok(d);
        }
        self.gpu.ensure_free(crate::spmv::device_bytes(pce), || {
            "to keep the circuit's matrices (PCE) on the device".into()
        })?;
        let d = Arc::new(DevicePce::upload(&self.gpu, pce)?);
        cache.push(d.clone());
        Ok(d)
    }

    /// Drops the device PCEs no proof is using.
    pub fn evict_pces(&self) {
        if let Ok(mut cache) = self.pces.lock() {
            cache.retain(|r| Arc::strong_count(r) > 1);
        }
    }

    pub(super) fn densities(&self, pce: &Pce) -> Result<Arc<ShapeDensities>> {
        let key = shape_key(pce);
        let mut cache = self.shapes.lock().map_err(|_| poisoned())?;
        if let Some(s) = cache.iter().find(|s| s.key == key) {
            return Ok(s.clone());
        }
        let (ni, na, m) = (pce.num_inputs, pce.num_aux, pce.domain_size());
        let vars = ni + na;
        let g = &self.gpu;
        let s = Arc::new(ShapeDensities {
            key,
            h: DeviceDensity::upload(g, (0..m).map(|i| i + 1 < m), m)?,
            l: DeviceDensity::upload(g, (0..vars).map(|i| i >= ni), vars)?,
            a: DeviceDensity::upload(
                g,
                (0..ni).map(|_| true).chain(pce.a_aux_density.iter()),
                vars,
            )?,
            b: DeviceDensity::upload(
                g,
                pce.b_input_density.iter().chain(pce.b_aux_density.iter()),
                vars,
            )?,
        });
        cache.push(s.clone());
        Ok(s)
    }
}
