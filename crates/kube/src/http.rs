//! The seam for a program's own external services over HTTP: a cloud SDK, a payments
//! API, a DNS provider. Real code talks to them through an HTTP client; here that client
//! is [`HttpClient`], a tower `Service` (as kube's `Client` is built on one), so an SDK
//! that takes a tower service, or code written against `http::Request`, runs unchanged
//! with its requests carried through the simulated network to a simulated service.
//!
//! The service is a process of the world: a [`Handler`] the user writes (what the real
//! service answers), run by [`HttpServer`] and registered by name
//! (`Extensions::service("payments", |_| HttpServer::boxed(MyPayments::default()))`), on
//! a host of its own, so a partition can cut it off and a fault plan can crash or pause
//! it. A program reaches it as `HttpClient::to("payments")`.
//!
//! Each request is one message and its response one back: an interleaving point as an
//! API request is, delayed by the network, held or lost under a partition (the call
//! fails with [`CallError::ConnectionLost`] when the connection gives up), and never
//! answered by a crashed service.

use crate::handle::{CallError, Handle};
use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt, Full};
use reconsim_sim::{ProcId, SimTime};
use reconsim_world::component::{Component, WorldCtx};
use reconsim_world::msg::Msg;
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// An HTTP request as it travels to a simulated service: plain data, hashed into the
/// trace as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct HttpRequest {
    pub method: String,
    /// The path and query (`/v1/charges?limit=3`), or the whole URI as the client gave it.
    pub uri: String,
    /// Name and value of each header, in the client's order (names lower-case, as
    /// `http` keeps them).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A simulated service's answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

fn headers(map: &http::HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Header names and values as `http` takes them; a pair it refuses is left out.
fn header_map(pairs: &[(String, String)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (k, v) in pairs {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v),
        ) {
            map.append(k, v);
        }
    }
    map
}

/// Why an [`HttpClient`] request got no response.
#[derive(Debug)]
pub enum HttpError {
    /// The request's body could not be read (the client's own body failed).
    Body(Box<dyn std::error::Error + Send + Sync>),
    /// The call failed on the way: the connection gave up, or the answer was not HTTP.
    Call(CallError),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Body(e) => write!(f, "reading the request body: {e}"),
            HttpError::Call(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// A tower `Service` whose requests go to the simulated service process `to`. Cheap to
/// clone; `Send`, so it lives in a controller's context or an SDK's config.
///
/// ```no_run
/// use reconsim_kube::http::HttpClient;
/// use tower::ServiceExt;
///
/// # async fn charge() -> Result<(), Box<dyn std::error::Error>> {
/// // Inside a program a `KubeBridge` runs (a `reconsim_kube::custom` entry's pod).
/// let payments = HttpClient::to("payments").expect("registered with Extensions::service");
/// let request = http::Request::post("/v1/charges")
///     .header("idempotency-key", "order-7")
///     .body(String::from(r#"{"amount": 700}"#))?;
/// let response = payments.oneshot(request).await?;
/// assert!(response.status().is_success());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct HttpClient {
    handle: Handle,
    to: ProcId,
}

impl HttpClient {
    /// Requests to the service process `to`, through `handle`.
    pub fn new(handle: Handle, to: ProcId) -> Self {
        HttpClient { handle, to }
    }

    /// Requests to the service the program's bridge knows as `name` (a service the
    /// scenario's families or `Extensions::service` registered), through the program's
    /// current handle; `None` if there is none of that name.
    ///
    /// # Panics
    /// Outside a program a `KubeBridge` runs, as [`Handle::current`] does.
    pub fn to(name: &str) -> Option<Self> {
        let handle = Handle::current();
        let to = handle.service(name)?;
        Some(HttpClient::new(handle, to))
    }

    /// Send `request`; the service's response.
    pub async fn send<B>(
        &self,
        request: http::Request<B>,
    ) -> Result<http::Response<Full<Bytes>>, HttpError>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| HttpError::Body(e.into()))?
            .to_bytes();
        let sent = HttpRequest {
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            headers: headers(&parts.headers),
            body: body.to_vec(),
        };
        let answer: HttpResponse = self
            .handle
            .call(self.to, sent)
            .await
            .map_err(HttpError::Call)?;
        let mut response = http::Response::new(Full::new(Bytes::from(answer.body)));
        *response.status_mut() =
            http::StatusCode::from_u16(answer.status).unwrap_or(http::StatusCode::BAD_GATEWAY);
        *response.headers_mut() = header_map(&answer.headers);
        Ok(response)
    }
}

impl<B> tower::Service<http::Request<B>> for HttpClient
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<Full<Bytes>>;
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, HttpError>> + Send>>;

    /// Always ready: each request is its own message (no connection limit is modelled).
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HttpError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let client = self.clone();
        Box::pin(async move { client.send(request).await })
    }
}

/// What a simulated HTTP service answers: the user's model of the real one. Its state
/// is its memory; a crash of its process calls [`Handler::on_crash`].
pub trait Handler: fmt::Debug + Send + 'static {
    /// The response to `request`, received at `now` (the service's clock).
    fn handle(&mut self, request: http::Request<Bytes>, now: SimTime) -> http::Response<Bytes>;

    /// The process crashed: forget what a restart would not remember (default: keep
    /// everything, as a service whose state is in a database keeps it).
    fn on_crash(&mut self) {}
}

/// The process that runs a [`Handler`]: each request that arrives is answered at once,
/// in arrival order.
#[derive(Debug)]
pub struct HttpServer<H> {
    handler: H,
}

impl<H: Handler> HttpServer<H> {
    pub fn new(handler: H) -> Self {
        HttpServer { handler }
    }

    /// As a world component, for `Extensions::service`.
    pub fn boxed(handler: H) -> Box<dyn Component> {
        Box::new(HttpServer::new(handler))
    }

    /// Its handler, for a checker that reads the service's state.
    pub fn handler(&self) -> &H {
        &self.handler
    }
}

fn request_of(sent: HttpRequest) -> http::Request<Bytes> {
    let mut request = http::Request::new(Bytes::from(sent.body));
    *request.method_mut() = http::Method::from_bytes(sent.method.as_bytes()).unwrap_or_default();
    *request.uri_mut() = sent.uri.parse().unwrap_or_default();
    *request.headers_mut() = header_map(&sent.headers);
    request
}

impl<H: Handler> Component for HttpServer<H> {
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let Msg::Request { id, body } = msg else {
            return;
        };
        let answer = match body.take::<HttpRequest>() {
            Ok(sent) => {
                let response = self.handler.handle(request_of(sent), ctx.now());
                HttpResponse {
                    status: response.status().as_u16(),
                    headers: headers(response.headers()),
                    body: response.into_body().to_vec(),
                }
            }
            // Not HTTP: what a server answers bytes it cannot parse.
            Err(_) => HttpResponse {
                status: 400,
                headers: Vec::new(),
                body: b"not an HTTP request".to_vec(),
            },
        };
        ctx.send(from, Msg::response(id, answer));
    }

    fn on_crash(&mut self) {
        self.handler.on_crash();
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
