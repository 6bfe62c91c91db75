//! The engine: one test executable, one module per area.

mod common;
mod dispatch_idle;
mod engine;
mod gpu_engine;
mod loader;
mod mixed;
mod reload_on_device;
mod stress;
