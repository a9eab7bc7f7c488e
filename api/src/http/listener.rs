//! The TCP side of the edge: accepting connections so that hostile clients cannot take
//! the server offline.
//!
//! `serve_connections` accepts while fewer than `max_connections` are open (the others
//! wait in the kernel's backlog, never as open descriptors of ours), serves each with
//! hyper's HTTP/1 and a header-read timeout (a connection that does not finish a
//! request's headers in time, the first or the next on a kept-alive connection, is
//! closed), sets TCP_NODELAY, and on shutdown stops accepting and asks every connection
//! to finish its request in flight and close. An accept error (the descriptor limit
//! reached all the same) is logged and retried after a pause instead of spinning.
//! `raise_fd_limit` lifts the process's soft descriptor limit to its hard limit at start.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// How much the edge lets clients hold.
#[derive(Debug, Clone, Copy)]
pub struct EdgeLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers.
    pub header_read_timeout: Duration,
}

/// Pause after an accept error (e.g. EMFILE) before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting and lets
/// each connection finish its request in flight; returns once all are closed (the
/// caller bounds that wait).
pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: EdgeLimits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::error!(%err, "accept error; retrying shortly");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers and SSE events are small writes: without TCP_NODELAY a token could
        // wait for the ACK of the previous segment (Nagle) before leaving.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%err, "cannot set TCP_NODELAY on a connection");
        }
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(request)
        });
        let connection = http
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(err) = result {
                            tracing::trace!(%err, "connection ended with an error");
                        }
                        break;
                    }
                    changed = stop.changed() => {
                        connection.as_mut().graceful_shutdown();
                        if changed.is_err() {
                            // The sender is gone too: nothing more to watch.
                            let _ = connection.as_mut().await;
                            break;
                        }
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it is closed.
    let _ = permits
        .acquire_many(u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX))
        .await;
}

/// Raises the soft limit on open descriptors to the hard limit (each connection is
/// one); returns `(before, after)`.
pub fn raise_fd_limit() -> std::io::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok((soft, hard))
}

/// Connections the edge may hold with `fd_limit` descriptors: what is asked for, but
/// never so many that the store, the runtime client and the logs run out.
pub fn connection_bound(asked: usize, fd_limit: u64) -> usize {
    const RESERVED: u64 = 256;
    let room = fd_limit.saturating_sub(RESERVED).max(16);
    asked
        .min(usize::try_from(room).unwrap_or(usize::MAX))
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_leave_room_for_the_rest() {
        assert_eq!(connection_bound(10_000, 1024), 768);
        assert_eq!(connection_bound(500, 20_000), 500);
        assert_eq!(connection_bound(10_000, 100), 16);
    }
}
