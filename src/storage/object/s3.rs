//! Opening an S3-compatible store: `s3://bucket/prefix` with the `AWS_*` environment or
//! explicit options, and the bucket client for the calls object_store lacks.

use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};

use super::{Inner, ObjectStorage};
use crate::storage::sigv4::BucketClient;
use crate::storage::Location;
use crate::{Error, Result};

impl ObjectStorage {
    /// `s3://bucket/prefix` on an S3-compatible store, configured from the usual `AWS_*`
    /// environment variables (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`,
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`).
    pub fn s3(url: &str) -> Result<Self> {
        Self::s3_from(&Self::s3_parse(url)?, AmazonS3Builder::from_env())
    }

    /// `s3://bucket/prefix` on an S3-compatible store configured by `options` alone, not by
    /// the environment: e.g. [`AmazonS3ConfigKey::Endpoint`], [`AmazonS3ConfigKey::Region`],
    /// [`AmazonS3ConfigKey::AccessKeyId`], [`AmazonS3ConfigKey::SecretAccessKey`] and, for an
    /// `http://` endpoint, `AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp)` set to
    /// `"true"`. For two stores in one process, or a store the environment does not describe.
    pub fn s3_with_options(
        url: &str,
        options: impl IntoIterator<Item = (AmazonS3ConfigKey, impl Into<String>)>,
    ) -> Result<Self> {
        let builder = options
            .into_iter()
            .fold(AmazonS3Builder::new(), |b, (k, v)| b.with_config(k, v));
        Self::s3_from(&Self::s3_parse(url)?, builder)
    }

    /// The S3 store of a parsed [`Location::S3`], configured from the `AWS_*` environment.
    pub fn s3_at(location: &Location) -> Result<Self> {
        Self::s3_from(location, AmazonS3Builder::from_env())
    }

    fn s3_parse(url: &str) -> Result<Location> {
        match Location::parse(url)? {
            s3 @ Location::S3 { .. } => Ok(s3),
            _ => Err(Error::Config(format!("`{url}` is not an s3:// URL"))),
        }
    }

    fn s3_from(location: &Location, builder: AmazonS3Builder) -> Result<Self> {
        let Location::S3 { bucket, prefix } = location else {
            return Err(Error::Config(format!("`{location}` is not an s3:// URL")));
        };
        let url = location.to_string();
        let (bucket, prefix) = (bucket.clone(), prefix.clone());
        let builder = builder.with_bucket_name(&bucket);
        let cfg = |k: AmazonS3ConfigKey| builder.get_config_value(&k);
        let region = cfg(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let virtual_hosted =
            cfg(AmazonS3ConfigKey::VirtualHostedStyleRequest).is_some_and(|v| v == "true");
        let endpoint = cfg(AmazonS3ConfigKey::Endpoint)
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let endpoint = url::Url::parse(&endpoint)
            .map_err(|e| Error::Config(format!("AWS_ENDPOINT `{endpoint}`: {e}")))?;
        let (access_key, secret_key) = match (
            cfg(AmazonS3ConfigKey::AccessKeyId),
            cfg(AmazonS3ConfigKey::SecretAccessKey),
        ) {
            (Some(a), Some(s)) => (a, s),
            _ => {
                return Err(Error::Config(
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set for s3:// URLs".into(),
                ))
            }
        };
        let bucket_client = BucketClient::new(
            endpoint.clone(),
            bucket.clone(),
            region,
            access_key,
            secret_key,
            cfg(AmazonS3ConfigKey::Token),
            virtual_hosted,
        )?;
        let s3 = Arc::new(
            builder
                .build()
                .map_err(|e| Error::Config(format!("`{url}`: {e}")))?,
        );
        Ok(ObjectStorage {
            inner: Arc::new(Inner {
                url,
                store: s3.clone(),
                multipart: Some(s3),
                bucket: Some(bucket_client),
                prefix,
                part_size_bytes: Self::DEFAULT_PART_SIZE_BYTES,
                uploads_in_flight_max: Self::DEFAULT_UPLOADS_IN_FLIGHT_MAX,
                conditional_put: tokio::sync::OnceCell::new(),
            }),
        })
    }
}
