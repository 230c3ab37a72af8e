//! The body's tests: one binary, one module per concern. Most drive the
//! real body binary against the kernel's event channel and the stand-in
//! model (see `common`); `shapes` and `context` test pure code directly.

mod common;

mod basics;
mod context;
mod inbox;
mod interrupts;
mod mutate;
mod retries;
mod shapes;
mod tools;
