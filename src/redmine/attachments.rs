//! Redmine adapter (HTTP): attaching a file to an issue, and downloading one. Redmine takes
//! the bytes first (`POST /uploads.json`, answered with a token), then the issue update
//! names the token.

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use super::client::{RedmineClient, Reply};
use super::issue::url_encode;

/// Uploads `bytes` as `file_name` (Markdown) and returns the `uploads` value of the issue
/// update that attaches it.
pub async fn upload(client: &RedmineClient, bytes: Vec<u8>, file_name: &str) -> Result<Value> {
    upload_as(client, bytes, file_name, "text/markdown").await
}

/// Uploads `bytes` as `file_name` with `content_type`; returns the `uploads` value.
pub async fn upload_as(
    client: &RedmineClient,
    bytes: Vec<u8>,
    file_name: &str,
    content_type: &str,
) -> Result<Value> {
    let path = format!("/uploads.json?filename={}", url_encode(file_name));
    let a = client
        .send(
            reqwest::Method::POST,
            &path,
            Some((bytes, "application/octet-stream")),
        )
        .await?;
    if a.status != 201 && a.status != 200 {
        return Err(client.refusal("POST", &path, &a));
    }
    let v: Value =
        serde_json::from_str(&a.body).context("POST /uploads.json: the body is not JSON")?;
    let token = v["upload"]["token"]
        .as_str()
        .ok_or_else(|| anyhow!("POST /uploads.json: no upload token in the reply"))?;
    Ok(serde_json::json!([{"token": token, "filename": file_name, "content_type": content_type}]))
}

/// Streams attachment `id` named `file_name` into `sink`, piece by piece, as stored; at
/// most `max_bytes` are accepted (a bigger file is an error naming `limit`, the config key
/// of the bound, found before or while reading, not a truncation). The bytes always come
/// from the tracker's own download path, whatever URL the issue names.
pub async fn download_into(
    client: &RedmineClient,
    id: u64,
    file_name: &str,
    (max_bytes, limit): (u64, &str),
    sink: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
) -> Result<()> {
    let path = format!("/attachments/download/{id}/{}", url_encode(file_name));
    let mut resp = match client.send_streaming(&path).await? {
        Reply::Body(resp) => resp,
        Reply::Answer(a) => return Err(client.refusal("GET", &path, &a)),
    };
    let too_big = |n: u64| anyhow!("GET {path}: {n} bytes, more than {limit} ({max_bytes})");
    if let Some(n) = resp.content_length().filter(|&n| n > max_bytes) {
        return Err(too_big(n));
    }
    let mut read: u64 = 0;
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| anyhow!("GET {path}: {}", crate::http::transport_message(&e)))?
    {
        read += chunk.len() as u64;
        if read > max_bytes {
            return Err(too_big(read));
        }
        sink(&chunk)?;
    }
    Ok(())
}
