//! Slow bodies are cut: a request's body must arrive within `WEIR_BODY_TIMEOUT_SECS`
//! of its headers, or the request is answered 408 and its connection closed.
//!
//! The header-read timeout of the accept loop (`listener`) bounds a client that
//! never finishes its headers; this bounds one that sends a body a byte at a time
//! (a slow upload holds a worker, a buffer and a connection). The clock stops when
//! the body's last byte arrives: a prediction that runs long after reading its
//! question is never cut, and neither is a handler that answers without reading the
//! body at all (an unknown webhook address).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use super::error::error_response;

/// How long a body may take, set from `WEIR_BODY_TIMEOUT_SECS`.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// A body that says when it has been read to its end.
struct Tracked {
    inner: Body,
    done: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.done.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Answers 408 when the request's body is not all there within the limit.
pub async fn cut_slow_bodies(
    State(BodyTimeout(limit)): State<BodyTimeout>,
    req: Request,
    next: Next,
) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let done = Arc::new(AtomicBool::new(false));
    let tracked = Arc::clone(&done);
    let req = req.map(|inner| {
        Body::new(Tracked {
            inner,
            done: tracked,
        })
    });
    let run = next.run(req);
    tokio::pin!(run);
    tokio::select! {
        response = &mut run => return response,
        () = tokio::time::sleep(limit) => {}
    }
    if done.load(Ordering::Acquire) {
        return run.await;
    }
    let mut response = error_response(
        axum::http::StatusCode::REQUEST_TIMEOUT,
        format!(
            "the request's body did not arrive within {} s (WEIR_BODY_TIMEOUT_SECS)",
            limit.as_secs()
        ),
    );
    // The rest of the body may still be on its way: this connection is done.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response.into_response()
}
