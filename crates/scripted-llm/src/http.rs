//! HTTP/1.1, one request per connection: reading a request, writing a response. I/O: the socket.

use serde_json::Value;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, PartialEq)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// Path plus query string, as sent.
    pub(crate) target: String,
    /// Lower-case names, in arrival order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub(crate) fn query_flag(&self, key: &str) -> bool {
        let query = self.target.split_once('?').map(|(_, q)| q).unwrap_or("");
        query.split('&').any(|kv| match kv.split_once('=') {
            Some((k, v)) => k == key && matches!(v, "1" | "true" | "yes"),
            None => kv == key,
        })
    }
}

pub(crate) fn bad_request(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Reads one request; `Ok(None)` when the peer closed before sending a byte. Malformed
/// requests are `InvalidData` errors, answered with 400 by the caller.
pub(crate) async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
) -> io::Result<Option<Request>> {
    let mut buf = Vec::with_capacity(4096);
    let Some(head_end) = read_head(s, &mut buf).await? else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| bad_request("request head is not UTF-8"))?;
    let mut req = parse_head(head)?;
    if req.header("transfer-encoding").is_some() {
        return Err(bad_request(
            "chunked request bodies are not supported; send Content-Length",
        ));
    }
    let len: usize = match req.header("content-length") {
        Some(v) => v.parse().map_err(|_| bad_request("bad Content-Length"))?,
        None => 0,
    };
    if len > MAX_BODY_BYTES {
        return Err(bad_request("request body too large"));
    }
    let body = buf.split_off(head_end + 4);
    req.body = read_body(s, &req, body, len).await?;
    Ok(Some(req))
}

/// Reads into `buf` until the head's blank line: the index where it starts; `None` when the
/// peer closed before sending a byte.
async fn read_head<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(i));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(bad_request("request head too large"));
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "request head cut short",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The request line and headers of `head` (without its blank line), the body still empty.
fn parse_head(head: &str) -> io::Result<Request> {
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (method, target) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None)
            if !m.is_empty() && t.starts_with('/') && v.starts_with("HTTP/1.") =>
        {
            (m.to_string(), t.to_string())
        }
        _ => return Err(bad_request(&format!("bad request line {request_line:?}"))),
    };
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad_request(&format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(Request {
        method,
        target,
        headers,
        body: Vec::new(),
    })
}

/// The `len` bytes of `req`'s body, starting with those read past its head (`body`); a
/// `100 Continue` first when the client waits for one.
async fn read_body<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    req: &Request,
    mut body: Vec<u8>,
    len: usize,
) -> io::Result<Vec<u8>> {
    let expects_continue = req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    if expects_continue && body.len() < len {
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        s.flush().await?;
    }
    let mut chunk = [0u8; 8192];
    while body.len() < len {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "request body cut short",
            ));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Ok(body)
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// A response head; `content_length: None` means a chunked body. A `Content-Type` among
/// `extra` replaces the default one.
pub(crate) fn response_head(
    status: u16,
    content_type: &str,
    extra: &[(String, String)],
    content_length: Option<usize>,
) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    if !extra
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    match content_length {
        Some(n) => head.push_str(&format!("Content-Length: {n}\r\n")),
        None => head.push_str("Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"),
    }
    head.push_str("Connection: close\r\nServer: scripted-llm\r\n");
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

pub(crate) async fn send_full<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: u16,
    content_type: &str,
    extra: &[(String, String)],
    body: &[u8],
) -> io::Result<()> {
    let head = response_head(status, content_type, extra, Some(body.len()));
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    s.flush().await?;
    s.shutdown().await
}

pub(crate) async fn send_json<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: u16,
    body: &Value,
) -> io::Result<()> {
    send_full(
        s,
        status,
        "application/json",
        &[],
        body.to_string().as_bytes(),
    )
    .await
}

/// Waits `dur` unless the client closes first; returns whether the wait completed.
pub(crate) async fn wait_or_disconnect<S: AsyncRead + Unpin>(s: &mut S, dur: Duration) -> bool {
    let sleep = tokio::time::sleep(dur);
    tokio::pin!(sleep);
    let mut scratch = [0u8; 1024];
    loop {
        tokio::select! {
            () = &mut sleep => return true,
            read = s.read(&mut scratch) => match read {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_a_request_with_body_and_answers_expect_continue() {
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        client
            .write_all(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n")
            .await
            .unwrap();
        let reader = tokio::spawn(async move { read_request(&mut server).await.unwrap().unwrap() });
        let mut buf = [0u8; 25];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 100 Continue\r\n\r\n");
        client.write_all(b"{\"a\":1}").await.unwrap();
        let req = reader.await.unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.path(), "/v1/chat/completions");
        assert_eq!(req.header("content-type"), Some("application/json"));
        assert_eq!(req.body, b"{\"a\":1}");
    }

    #[tokio::test]
    async fn rejects_bad_requests_and_reports_silent_closes() {
        let (mut a, mut b) = tokio::io::duplex(64);
        drop(a.shutdown().await);
        assert_eq!(read_request(&mut b).await.unwrap(), None);
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(b"garbage\r\n\r\n").await.unwrap();
        assert_eq!(
            read_request(&mut b).await.unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn query_flags() {
        let req = Request {
            method: "POST".into(),
            target: "/_fake/reset?keep_log=1".into(),
            headers: vec![],
            body: vec![],
        };
        assert!(req.query_flag("keep_log"));
    }
}
