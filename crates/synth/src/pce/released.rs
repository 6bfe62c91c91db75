//! A PCE whose matrices were dropped from host memory
//! ([`Pce::release_matrices`]): what it keeps (counts, densities, the
//! coefficient table, the fingerprint), and where [`Pce::with_matrices`]
//! reads the matrices again ([`MatrixSource`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::{Csr, Pce, PceMemo};
use crate::{Result, SynthError};

/// Where the matrices of a released PCE ([`Pce::release_matrices`]) are
/// read again: a loader returning the whole PCE (e.g. from its file), and
/// what it reads, for messages.
#[derive(Clone)]
pub struct MatrixSource {
    what: Arc<str>,
    load: Arc<dyn Fn() -> std::result::Result<Pce, String> + Send + Sync>,
}

impl MatrixSource {
    /// `load` returns the whole PCE again, or what went wrong; `what` names
    /// where from (e.g. "the PCE file /var/cache/cuzk/x.pce").
    pub fn new(
        what: impl Into<Arc<str>>,
        load: impl Fn() -> std::result::Result<Pce, String> + Send + Sync + 'static,
    ) -> Self {
        MatrixSource {
            what: what.into(),
            load: Arc::new(load),
        }
    }

    /// Where the matrices are read from.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Debug for MatrixSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MatrixSource").field(&self.what).finish()
    }
}

/// What a released PCE's matrices were ([`Pce::release_matrices`]), and
/// where they come back from.
#[derive(Clone, Debug)]
pub struct Released {
    /// Constraints (rows of each matrix).
    pub rows: usize,
    /// Stored entries of A, B and C.
    pub nnz: [usize; 3],
    /// Host bytes the three matrices took.
    pub bytes: usize,
    /// [`Pce::fingerprint`] of the whole PCE.
    pub fingerprint: u64,
    /// Where [`Pce::with_matrices`] reads them again.
    pub source: MatrixSource,
}

impl PartialEq for Released {
    fn eq(&self, other: &Self) -> bool {
        (self.rows, self.nnz, self.bytes, self.fingerprint)
            == (other.rows, other.nnz, other.bytes, other.fingerprint)
    }
}

impl Pce {
    /// Whether the matrices were dropped from host memory
    /// ([`Pce::release_matrices`]).
    pub fn is_released(&self) -> bool {
        self.released.is_some()
    }

    /// This PCE without its matrices (the bulk of its host memory: 8.9 GB
    /// of 32 GiB PoRep's), for holders that need only its counts,
    /// densities, coefficient table and fingerprint, e.g. while a GPU keeps
    /// the matrices. Everything that reads the matrices goes through
    /// [`Pce::with_matrices`], which reads them from `source` again (and
    /// checks they are the same). Computes the fingerprint if not yet
    /// known (reading the whole PCE). A PCE released already is returned as
    /// it is (its source kept).
    pub fn release_matrices(&self, source: MatrixSource) -> Pce {
        let released = match &self.released {
            Some(r) => r.clone(),
            None => Released {
                rows: self.num_constraints(),
                nnz: self.nnz(),
                bytes: self.matrix_bytes(),
                fingerprint: self.fingerprint(),
                source,
            },
        };
        Pce {
            num_inputs: self.num_inputs,
            num_aux: self.num_aux,
            // Valid matrices of no rows (not `Csr::default()`, whose empty
            // row index has no `rows()`).
            a: Csr::new(),
            b: Csr::new(),
            c: Csr::new(),
            coeff_table: self.coeff_table.clone(),
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
            names: self.names.clone(),
            released: Some(released),
            memo: PceMemo::default(),
        }
    }

    /// This PCE with its matrices: itself when it holds them, else the
    /// whole PCE read again from its [`MatrixSource`] (slow: seconds at
    /// 32 GiB, and as much host memory as the matrices take, until the
    /// result is dropped).
    ///
    /// # Errors
    /// [`SynthError::MatricesUnavailable`] when the source fails or returns
    /// a different PCE (other counts, densities or fingerprint).
    pub fn with_matrices(&self) -> Result<Cow<'_, Pce>> {
        let Some(r) = &self.released else {
            return Ok(Cow::Borrowed(self));
        };
        let _s = tracing::info_span!("pce_reload", rows = r.rows, from = %r.source.what).entered();
        tracing::warn!(
            rows = r.rows,
            bytes = r.bytes,
            from = %r.source.what,
            "reading the released matrices of a PCE again"
        );
        let unavailable = |detail: String| SynthError::MatricesUnavailable {
            from: r.source.what.to_string(),
            detail,
        };
        let full = (r.source.load)().map_err(unavailable)?;
        if full.is_released() {
            return Err(unavailable(
                "the source returned a PCE without matrices".into(),
            ));
        }
        let same = full.num_inputs == self.num_inputs
            && full.num_aux == self.num_aux
            && full.num_constraints() == r.rows
            && full.nnz() == r.nnz
            && full.coeff_table == self.coeff_table
            && full.a_aux_density == self.a_aux_density
            && full.b_input_density == self.b_input_density
            && full.b_aux_density == self.b_aux_density;
        if !same || full.fingerprint() != r.fingerprint {
            return Err(unavailable(format!(
                "it holds another circuit shape ({} inputs, {} aux, {} constraints, {:?} entries, \
                 fingerprint {:016x}; released: {} inputs, {} aux, {} constraints, {:?} entries, \
                 fingerprint {:016x})",
                full.num_inputs,
                full.num_aux,
                full.num_constraints(),
                full.nnz(),
                full.fingerprint(),
                self.num_inputs,
                self.num_aux,
                r.rows,
                r.nnz,
                r.fingerprint
            )));
        }
        Ok(Cow::Owned(full))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pce::COEFF_MINUS_ONE;
    use crate::pce::tests::Coeffs;

    #[test]
    fn a_released_pce_keeps_its_counts_and_fingerprint_and_reads_its_matrices_again() {
        let pce = Pce::record(Coeffs).unwrap();
        let copy = pce.clone();
        let released = pce.release_matrices(MatrixSource::new("a copy", move || Ok(copy.clone())));
        assert!(released.is_released() && !pce.is_released());
        assert_eq!(released.num_constraints(), pce.num_constraints());
        assert_eq!(released.nnz(), pce.nnz());
        assert_eq!(released.matrix_bytes(), pce.matrix_bytes());
        assert_eq!(released.fingerprint(), pce.fingerprint());
        // A clone keeps what was released (its memo starts empty, the
        // fingerprint does not depend on it).
        assert_eq!(released.clone().fingerprint(), pce.fingerprint());
        assert_eq!(
            pce.bytes() - released.bytes(),
            pce.matrix_bytes() - 3 * 8,
            "only the matrices go; each keeps a row index of one entry"
        );
        assert_eq!(
            [released.a.rows(), released.b.rows(), released.c.rows()],
            [0; 3]
        );
        assert_eq!(
            released.release_matrices(MatrixSource::new("x", || unreachable!())),
            released
        );
        assert!(matches!(pce.with_matrices().unwrap(), Cow::Borrowed(_)));
        match released.with_matrices().unwrap() {
            Cow::Owned(full) => assert_eq!(full, pce),
            Cow::Borrowed(_) => panic!("a released PCE lent itself"),
        }
        // A source holding another circuit's PCE, or one released itself,
        // is refused.
        let mut other = pce.clone();
        other.c.coeffs[0] = COEFF_MINUS_ONE;
        let wrong = pce.release_matrices(MatrixSource::new("the wrong file", move || {
            Ok(other.clone())
        }));
        let msg = wrong.with_matrices().unwrap_err().to_string();
        assert!(
            msg.contains("the wrong file") && msg.contains("another circuit shape"),
            "{msg}"
        );
        let hollow = released.clone();
        let twice = pce.release_matrices(MatrixSource::new("a hollow copy", move || {
            Ok(hollow.clone())
        }));
        let msg = twice.with_matrices().unwrap_err().to_string();
        assert!(msg.contains("without matrices"), "{msg}");
    }
}
