//! HTTP/1.1 on a Go program's connection, as bytes: the requests Go's `net/http`
//! client writes (a head, then a body of `Content-Length` bytes or chunks), and the
//! responses the simulated API server's answers become (a whole body, or a chunked
//! stream for a watch, one chunk per event line).

/// One request, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: http::Method,
    pub uri: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub body: Vec<u8>,
    /// The client asked to close the connection after this exchange.
    pub close: bool,
}

/// Heads longer than this are refused (Go's `DefaultMaxHeaderBytes` is 1 MB for a
/// server; a client's request head is far smaller).
const HEAD_MAX: usize = 1 << 20;
const HEADERS_MAX: usize = 64;

/// The first whole request in `buf`, taken out of it; `None` while it is not whole.
/// A request that cannot be read is an error in words (the connection is broken).
pub fn take_request(buf: &mut Vec<u8>) -> Result<Option<Request>, String> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > HEAD_MAX => {
            return Err("a request head over 1 MB".into());
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("not an HTTP/1.1 request: {e}")),
    };
    let method = http::Method::from_bytes(req.method.unwrap_or("").as_bytes())
        .map_err(|e| format!("a method: {e}"))?;
    let uri = req.path.unwrap_or("/").to_string();
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).into_owned())
    };
    let content_type = header("content-type");
    let accept = header("accept");
    let close = header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
    let chunked =
        header("transfer-encoding").is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    let (body, used) = if chunked {
        match dechunk(&buf[head_len..])? {
            Some((body, used)) => (body, head_len + used),
            None => return Ok(None),
        }
    } else {
        let len: usize = match header("content-length") {
            Some(l) => l
                .trim()
                .parse()
                .map_err(|_| format!("a Content-Length: {l:?}"))?,
            None => 0,
        };
        if buf.len() < head_len + len {
            return Ok(None);
        }
        (buf[head_len..head_len + len].to_vec(), head_len + len)
    };
    buf.drain(..used);
    Ok(Some(Request {
        method,
        uri,
        content_type,
        accept,
        body,
        close,
    }))
}

/// A chunked body from the start of `b`: the body and the bytes it took, or `None`
/// while the last chunk has not come.
fn dechunk(b: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut at = 0;
    let mut body = Vec::new();
    loop {
        let Some(eol) = b[at..].windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&b[at..at + eol]).map_err(|_| "a chunk size")?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("a chunk size: {line:?}"))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(eol) = b[at..].windows(2).position(|w| w == b"\r\n") else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, at)));
                }
            }
        }
        if b.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&b[at..at + size]);
        at += size + 2;
    }
}

fn status_line(out: &mut Vec<u8>, status: u16) {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown");
    out.extend_from_slice(format!("HTTP/1.1 {status} {reason}\r\n").as_bytes());
}

/// A whole response: status, JSON body.
pub fn response(status: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 96);
    status_line(&mut out, status);
    out.extend_from_slice(b"Content-Type: application/json\r\n");
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

/// The head of a streamed response (a watch): its body follows as chunks.
pub fn stream_head(status: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    status_line(&mut out, status);
    out.extend_from_slice(b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    out
}

/// One chunk of a streamed body.
pub fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The end of a streamed body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_taken_once_whole_and_the_next_one_stays() {
        let mut buf = b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: kubernetes\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{".to_vec();
        assert_eq!(take_request(&mut buf), Ok(None));
        buf.extend_from_slice(b"}GET /api HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = take_request(&mut buf).unwrap().unwrap();
        assert_eq!(r.method, http::Method::POST);
        assert_eq!(r.body, b"{}");
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        let r = take_request(&mut buf).unwrap().unwrap();
        assert_eq!((r.method, r.uri.as_str()), (http::Method::GET, "/api"));
        assert!(buf.is_empty());
    }

    #[test]
    fn a_chunked_body_is_read_to_its_last_chunk() {
        let mut buf =
            b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n"
                .to_vec();
        assert_eq!(take_request(&mut buf), Ok(None));
        buf.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(take_request(&mut buf).unwrap().unwrap().body, b"abcde");
    }

    #[test]
    fn garbage_is_an_error() {
        let mut buf = b"\x00\x01 nonsense\r\n\r\n".to_vec();
        assert!(take_request(&mut buf).is_err());
    }

    #[test]
    fn responses_are_written_as_go_reads_them() {
        assert_eq!(
            response(404, b"{}"),
            b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        );
        let mut s = stream_head(200);
        chunk(&mut s, b"{\"type\":\"ADDED\"}\n");
        s.extend_from_slice(LAST_CHUNK);
        assert!(s.ends_with(b"\r\n\r\n11\r\n{\"type\":\"ADDED\"}\n\r\n0\r\n\r\n"));
    }
}
