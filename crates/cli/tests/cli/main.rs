//! The cuzk binary and daemon: one test executable, one module per area; the Filecoin fixtures (parameters, sealed sectors) are made once in `common` and shared.

mod cli;
mod common;
mod daemon;
mod daemon_curio;
mod daemon_filecoin;
mod daemon_filecoin_load;
mod filecoin;
mod params_check;
mod setup_gpu;
