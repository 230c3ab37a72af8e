//! Where the owner's evaluations live, and their results as a body may read
//! them: the two paths both the kernel's evaluations and its cage's plans
//! name (the one is never in a body's cage, the other is read-only there).

/// The owner's evaluation files, one per evaluation, in the individual's
/// directory. In no body's cage.
pub const EVALS_DIR: &str = "evals";

/// The body's read-only copy of its own generation's results, written by
/// the kernel before each start of a body.
pub const RESULTS_PATH: &str = "memory/evals.json";
