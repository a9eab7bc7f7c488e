//! Storage: what the runtime keeps on disk — per-workspace venvs and their installs
//! (`venvs`), artifacts and their quota and expiry (`artifacts`), the rule for workspace
//! ids (`workspace`), and opening what a run could have written without following
//! anything it planted (`beneath`). It uses `analysis` (facts about a venv) and the
//! run limits of `isolation`, nothing above.

pub mod artifacts;
pub mod beneath;
pub mod venvs;
pub mod workspace;
