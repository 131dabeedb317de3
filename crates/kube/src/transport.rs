//! The client's transport: a tower `Service` that parks each request in a queue with
//! a oneshot for its answer. Nothing is sent from here: the bridge takes the queue's
//! requests when its handler runs and answers them when the simulated API server does,
//! so a request's latency, loss and order are the simulation's.

use bytes::Bytes;
use kube::client::Body;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// A request the client made, waiting for the simulation.
pub struct Exchange {
    pub method: http::Method,
    /// The path and query, as the client wrote them.
    pub uri: String,
    /// The `Content-Type` header: which kind of patch a PATCH is.
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub answer: tokio::sync::oneshot::Sender<http::Response<WireBody>>,
}

/// A response body: a whole buffer, or a watch's stream of event lines, fed by the
/// bridge as the simulated API server's events arrive and ended when it drops the
/// sender (the process crashed, the watch closed).
pub struct WireBody {
    full: Option<Bytes>,
    stream: Option<tokio::sync::mpsc::UnboundedReceiver<Bytes>>,
}

impl WireBody {
    pub fn full(bytes: Vec<u8>) -> Self {
        WireBody {
            full: Some(bytes.into()),
            stream: None,
        }
    }

    pub fn stream(rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>) -> Self {
        WireBody {
            full: None,
            stream: Some(rx),
        }
    }
}

impl http_body::Body for WireBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(b) = self.full.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(b))));
        }
        match &mut self.stream {
            None => Poll::Ready(None),
            Some(rx) => rx
                .poll_recv(cx)
                .map(|b| b.map(|b| Ok(http_body::Frame::data(b)))),
        }
    }
}

/// The requests made and not yet taken, in the order the client made them.
pub type Queue = Arc<Mutex<VecDeque<Exchange>>>;

/// The service `kube::Client::new` is given.
#[derive(Clone)]
pub struct SimService {
    pub queue: Queue,
}

impl tower::Service<http::Request<Body>> for SimService {
    type Response = http::Response<WireBody>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let queue = self.queue.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            // The client's bodies are whole buffers: collecting them never waits.
            let body = body.collect_bytes().await.map_err(std::io::Error::other)?;
            let (answer, answered) = tokio::sync::oneshot::channel();
            queue
                .lock()
                .expect("the queue's lock is never held across a panic")
                .push_back(Exchange {
                    method: parts.method,
                    uri: parts
                        .uri
                        .path_and_query()
                        .map_or_else(|| parts.uri.to_string(), |p| p.to_string()),
                    content_type: parts
                        .headers
                        .get(http::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string),
                    body: body.to_vec(),
                    answer,
                });
            // A dropped sender (the process crashed) is a broken connection.
            answered.await.map_err(std::io::Error::other)
        })
    }
}
