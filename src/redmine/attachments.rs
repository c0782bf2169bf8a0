//! Redmine adapter (HTTP): attaching a file to an issue. Redmine takes the bytes first
//! (`POST /uploads.json`, answered with a token), then the issue update names the token.

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use super::client::RedmineClient;
use super::issue::url_encode;

/// Uploads `bytes` as `file_name` (Markdown) and returns the `uploads` value of the issue
/// update that attaches it.
pub async fn upload(client: &RedmineClient, bytes: Vec<u8>, file_name: &str) -> Result<Value> {
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
    Ok(
        serde_json::json!([{"token": token, "filename": file_name, "content_type": "text/markdown"}]),
    )
}
