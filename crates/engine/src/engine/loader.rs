//! Where a parameter set that is not resident comes from: its file
//! ([`ParamsRef::File`]) or the loader registered under its key
//! ([`Engine::register_params_loader`]). Both are charged and loaded the
//! same way, through admission: one load at a time, counted in
//! `params_loads`, a `PARAMS_LOAD` span on the job's timeline, and an
//! evictable cache entry that the same source loads again after an
//! eviction.

use super::*;

/// Makes the parameter set registered under a key. Called each time the
/// set is needed and not resident (its first use, and again after every
/// eviction), so it must make the same set every time: proofs made before
/// and after a reload are then the same.
pub type ParamsLoader = Arc<
    dyn Fn() -> std::result::Result<Parameters<Bls12>, Box<dyn std::error::Error + Send + Sync>>
        + Send
        + Sync,
>;

/// A key's loader and the bytes its set is charged when loaded.
#[derive(Clone)]
pub(super) struct Registered {
    bytes: u64,
    load: ParamsLoader,
}

/// The loaders registered, by key.
#[derive(Default)]
pub(super) struct Loaders(Mutex<std::collections::HashMap<String, Registered>>);

impl Loaders {
    fn lock(&self) -> MutexGuard<'_, std::collections::HashMap<String, Registered>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `params` is a key with a loader.
    pub(super) fn has(&self, params: &ParamsRef) -> bool {
        matches!(params, ParamsRef::Key(k) if self.lock().contains_key(k))
    }
}

/// Where a set that is not resident is loaded from.
pub(super) enum Source<'a> {
    /// The file, or that file already opened by the caller.
    File(&'a std::path::Path, Option<&'a std::fs::File>),
    Loader(&'a str, Registered),
}

impl<'a> Source<'a> {
    /// The source of `params`; a key without a loader has none.
    pub(super) fn of(
        shared: &Shared,
        params: &'a ParamsRef,
        file: Option<&'a std::fs::File>,
    ) -> Result<Source<'a>> {
        match params {
            ParamsRef::File(path) => Ok(Source::File(path, file)),
            ParamsRef::Key(key) => match shared.loaders.lock().get(key) {
                Some(r) => Ok(Source::Loader(key, r.clone())),
                None => Err(EngineError::ParamsNotRegistered { key: key.clone() }),
            },
        }
    }

    /// The bytes the set is charged: the file's length, or the loader's
    /// registered size.
    pub(super) fn bytes(&self) -> Result<u64> {
        match self {
            Source::File(path, file) => file_len(path, *file),
            Source::Loader(_, r) => Ok(r.bytes),
        }
    }

    /// Reads the file or calls the loader; counted in `loads.params`.
    pub(super) fn load(&self, shared: &Shared) -> Result<Parameters<Bls12>> {
        let (key, r) = match self {
            Source::File(path, file) => return load_params(shared, path, *file),
            Source::Loader(key, r) => (*key, r),
        };
        let _s = tracing::info_span!("params_loader", key).entered();
        // The loader is the caller's code: its panic fails the load, not
        // the thread holding the admission slot.
        let made = match panic::catch_unwind(AssertUnwindSafe(|| (r.load)())) {
            Ok(Ok(p)) => p,
            Ok(Err(source)) => {
                return Err(EngineError::ParamsLoader {
                    key: key.to_owned(),
                    source,
                });
            }
            Err(panic) => {
                return Err(EngineError::ParamsLoader {
                    key: key.to_owned(),
                    source: panic_message(&*panic).into(),
                });
            }
        };
        let actual = params_bytes(&made);
        if actual > r.bytes {
            // Charged by the registered size: the budget undercounts.
            tracing::warn!(
                key,
                registered = r.bytes,
                actual,
                "the loader's set is larger than registered"
            );
        }
        Loads::count(&shared.loads.params);
        Ok(made)
    }
}

impl Engine {
    /// Registers `loader` under `key` (for [`ParamsRef::Key`]): the set is
    /// made by calling it when a job (or [`Engine::preload_params`]) needs
    /// it and it is not resident, exactly as a parameter file is read: in
    /// admission, one load at a time, charged `bytes` (its size in memory,
    /// [`params_bytes`]) beforehand. Unlike a set handed over with
    /// [`Engine::register_params`], it is evicted under memory pressure
    /// like a file's, and made again by the loader when next needed.
    /// Nothing is loaded now; registering a key again replaces its loader.
    ///
    /// # Errors
    /// [`EngineError::NeverFits`] if `bytes` exceed the whole budget.
    pub fn register_params_loader(
        &self,
        key: impl Into<String>,
        bytes: u64,
        loader: ParamsLoader,
    ) -> Result<()> {
        let total = self.shared.budget.total();
        if bytes > total {
            return Err(EngineError::NeverFits {
                what: "a parameter set",
                need_bytes: bytes,
                budget_bytes: total,
            });
        }
        self.shared.loaders.lock().insert(
            key.into(),
            Registered {
                bytes,
                load: loader,
            },
        );
        Ok(())
    }
}
