//! The two S3 bucket calls `object_store` does not make, signed with AWS Signature Version 4:
//! ListMultipartUploads (to find orphan uploads) and GetBucketLifecycleConfiguration (to warn
//! when nothing aborts them). Small on purpose: one GET, one signature, one XML shape.

use std::time::Duration;

use aws_lc_rs::{digest, hmac};
use serde::Deserialize;

use crate::{Error, Result};

/// Credentials and addressing for signed bucket-level requests.
#[derive(Debug, Clone)]
pub(crate) struct BucketClient {
    pub(crate) endpoint: url::Url,
    pub(crate) bucket: String,
    pub(crate) region: String,
    pub(crate) access_key: String,
    pub(crate) secret_key: String,
    pub(crate) session_token: Option<String>,
    pub(crate) virtual_hosted: bool,
    client: reqwest::Client,
}

/// One in-progress multipart upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upload {
    pub(crate) key: String,
    pub(crate) upload_id: String,
    pub(crate) initiated_ms: i64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListResult {
    #[serde(default)]
    is_truncated: bool,
    #[serde(default)]
    next_key_marker: Option<String>,
    #[serde(default)]
    next_upload_id_marker: Option<String>,
    #[serde(default, rename = "Upload")]
    uploads: Vec<UploadXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct UploadXml {
    key: String,
    upload_id: String,
    #[serde(default)]
    initiated: Option<String>,
}

/// The body of an S3 error answer: `<Error><Code>…</Code>…</Error>`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorXml {
    code: String,
}

/// The S3 error code of an error answer's body, if it is one.
fn error_code(body: &str) -> Option<String> {
    quick_xml::de::from_str::<ErrorXml>(body)
        .ok()
        .map(|e| e.code)
}

impl BucketClient {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        endpoint: url::Url,
        bucket: String,
        region: String,
        access_key: String,
        secret_key: String,
        session_token: Option<String>,
        virtual_hosted: bool,
    ) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| Error::Config(format!("cannot build an HTTP client: {e}")))?;
        Ok(BucketClient {
            endpoint,
            bucket,
            region,
            access_key,
            secret_key,
            session_token,
            virtual_hosted,
            client,
        })
    }

    /// Every multipart upload whose key starts with `prefix`, following pagination.
    pub(crate) async fn list_uploads(&self, prefix: &str) -> Result<Vec<Upload>> {
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        // Bounded: 10,000 pages of 1,000 uploads.
        for _ in 0..10_000 {
            let mut query = vec![
                ("prefix".to_string(), prefix.to_string()),
                ("uploads".to_string(), String::new()),
            ];
            if let Some((k, u)) = &markers {
                query.push(("key-marker".into(), k.clone()));
                query.push(("upload-id-marker".into(), u.clone()));
            }
            let (status, body) = self.get(&query).await?;
            if !status.is_success() {
                return Err(self.http_error("list multipart uploads of", status, &body));
            }
            let page: ListResult = quick_xml::de::from_str(&body)
                .map_err(|e| Error::corrupt("ListMultipartUploads response", e.to_string()))?;
            for u in page.uploads {
                let initiated_ms = u
                    .initiated
                    .as_deref()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map_or(0, |t| t.timestamp_millis());
                out.push(Upload {
                    key: u.key,
                    upload_id: u.upload_id,
                    initiated_ms,
                });
            }
            match (
                page.is_truncated,
                page.next_key_marker,
                page.next_upload_id_marker,
            ) {
                (true, Some(k), Some(u)) => markers = Some((k, u)),
                _ => return Ok(out),
            }
        }
        Err(Error::NotSupported(
            "more than ten million multipart uploads".into(),
        ))
    }

    /// Whether the bucket has a lifecycle rule that aborts incomplete multipart uploads.
    /// `None` when the store does not say (no permission, not implemented).
    pub(crate) async fn aborts_incomplete_uploads(&self) -> Result<Option<bool>> {
        let (status, body) = self
            .get(&[("lifecycle".to_string(), String::new())])
            .await?;
        if status.is_success() {
            return Ok(Some(body.contains("AbortIncompleteMultipartUpload")));
        }
        if status == reqwest::StatusCode::NOT_FOUND
            && error_code(&body).as_deref() == Some("NoSuchLifecycleConfiguration")
        {
            return Ok(Some(false));
        }
        Ok(None)
    }

    /// The error of a call the bucket answered with `status`: retryable only for a server
    /// error, a throttled (429) or timed out (408) request; a refusal (403) or a bad request
    /// stays what it is.
    fn http_error(&self, op: &str, status: reqwest::StatusCode, body: &str) -> Error {
        let retryable = status.is_server_error()
            || status == reqwest::StatusCode::TOO_MANY_REQUESTS
            || status == reqwest::StatusCode::REQUEST_TIMEOUT;
        Error::Store {
            op: "request",
            path: format!("s3://{}", self.bucket),
            retryable,
            source: format!(
                "{op} the bucket answered {status}: {}",
                body.chars().take(300).collect::<String>()
            )
            .into(),
        }
    }

    async fn get(&self, query: &[(String, String)]) -> Result<(reqwest::StatusCode, String)> {
        let now = chrono::Utc::now();
        let amz_date = now.format("%Y%m%dT%H%M%SZ").to_string();
        let date = now.format("%Y%m%d").to_string();
        let mut url = self.endpoint.clone();
        let host_base = url.host_str().unwrap_or_default().to_string();
        let (host, path) = if self.virtual_hosted {
            (format!("{}.{host_base}", self.bucket), "/".to_string())
        } else {
            (host_base, format!("/{}", uri_encode(&self.bucket, true)))
        };
        let host = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        };
        if self.virtual_hosted {
            let _ = url.set_host(Some(host.split(':').next().unwrap_or_default()));
        }
        let mut pairs: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
            .collect();
        pairs.sort();
        let canonical_query = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let payload_hash = hex(digest::digest(&digest::SHA256, b"").as_ref());
        let mut headers = vec![
            ("host".to_string(), host.clone()),
            ("x-amz-content-sha256".to_string(), payload_hash.clone()),
            ("x-amz-date".to_string(), amz_date.clone()),
        ];
        if let Some(token) = &self.session_token {
            headers.push(("x-amz-security-token".to_string(), token.clone()));
        }
        let canonical_headers: String = headers
            .iter()
            .map(|(k, v)| format!("{k}:{}\n", v.trim()))
            .collect();
        let signed_headers = headers
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(";");
        let canonical_request = format!(
            "GET\n{path}\n{canonical_query}\n{canonical_headers}\n{signed_headers}\n{payload_hash}"
        );
        let scope = format!("{date}/{}/s3/aws4_request", self.region);
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(digest::digest(&digest::SHA256, canonical_request.as_bytes()).as_ref())
        );
        let mut key = hmac_sign(
            format!("AWS4{}", self.secret_key).as_bytes(),
            date.as_bytes(),
        );
        for part in [self.region.as_bytes(), b"s3", b"aws4_request"] {
            key = hmac_sign(&key, part);
        }
        let signature = hex(&hmac_sign(&key, string_to_sign.as_bytes()));
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.access_key
        );
        url.set_path(&path);
        url.set_query(Some(&canonical_query));
        let mut request = self
            .client
            .get(url.clone())
            .header("authorization", authorization)
            .header("x-amz-date", &amz_date)
            .header("x-amz-content-sha256", &payload_hash)
            .header("host", &host);
        if let Some(token) = &self.session_token {
            request = request.header("x-amz-security-token", token);
        }
        // No answer, or half of one: the connection may come back.
        let lost = |op, e: reqwest::Error| Error::Store {
            op,
            path: url.to_string(),
            retryable: true,
            source: Box::new(e),
        };
        let response = request.send().await.map_err(|e| lost("reach", e))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| lost("read a response from", e))?;
        Ok((status, body))
    }
}

fn hmac_sign(key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&key, data).as_ref().to_vec()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SigV4's URI encoding: unreserved characters stay, everything else is `%XX`; `/` stays only
/// in paths.
fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_encoding_follows_sigv4() {
        assert_eq!(uri_encode("a b/c~d", false), "a%20b%2Fc~d");
        assert_eq!(uri_encode("a b/c", true), "a%20b/c");
    }

    #[test]
    fn list_result_parses_pages() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>
  <NextKeyMarker>lake/x</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>
  <IsTruncated>true</IsTruncated>
  <Upload><Key>lake/a</Key><UploadId>u1</UploadId><Initiated>2026-11-30T01:02:03.000Z</Initiated></Upload>
  <Upload><Key>lake/x</Key><UploadId>u2</UploadId><Initiated>2026-11-30T01:02:04.000Z</Initiated></Upload>
</ListMultipartUploadsResult>"#;
        let page: ListResult = quick_xml::de::from_str(xml).unwrap();
        assert!(page.is_truncated);
        assert_eq!(page.uploads.len(), 2);
        assert_eq!(page.uploads[1].upload_id, "u2");
        assert_eq!(page.next_key_marker.as_deref(), Some("lake/x"));
    }

    #[test]
    fn error_codes_are_read_from_the_error_document() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchLifecycleConfiguration</Code><Message>none</Message><BucketName>b</BucketName></Error>"#;
        assert_eq!(
            error_code(xml).as_deref(),
            Some("NoSuchLifecycleConfiguration")
        );
        assert_eq!(error_code("<LifecycleConfiguration/>"), None);
        assert_eq!(error_code("not xml"), None);
    }

    #[test]
    fn only_transient_statuses_are_retryable() {
        let client = BucketClient::new(
            url::Url::parse("http://127.0.0.1:1").unwrap(),
            "b".into(),
            "us-east-1".into(),
            "a".into(),
            "s".into(),
            None,
            false,
        )
        .unwrap();
        for (status, retryable) in [
            (403, false),
            (400, false),
            (404, false),
            (500, true),
            (503, true),
            (429, true),
        ] {
            let status = reqwest::StatusCode::from_u16(status).unwrap();
            assert_eq!(
                client.http_error("list", status, "").is_retryable(),
                retryable,
                "{status}"
            );
        }
    }
}
