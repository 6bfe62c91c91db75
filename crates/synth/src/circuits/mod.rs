//! Built-in circuits.
