//! The HTTP edge: the router, the API-key middleware, the handlers and their one error
//! type. Handlers are thin: they extract, call the pipeline, and turn its answers and
//! errors into HTTP. Nothing below imports this floor.

pub mod error;
pub mod metrics;
pub mod server;
