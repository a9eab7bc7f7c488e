//! The analysis side: what the runtime reads in tool code and venvs without running any
//! of it — the template grammar (`templates`), import detection and requirement
//! planning (`imports`), and the embedded CPython that does the parsing and look-ups
//! (`py`). It imports nothing else of this crate; the worker processes that run it
//! against untrusted code are `process::analysts`.

pub mod imports;
pub mod py;
pub mod templates;
