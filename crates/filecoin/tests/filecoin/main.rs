//! cuzk-filecoin: one test executable, one module per proof kind; the parameters and sealed sectors are made once in `common` and shared.

mod blank_pce;
mod common;
mod mixed;
mod porep;
mod post;
mod post_witness;
mod synthetic;
mod update;
mod update_witness;
