//! The connection settings of a `postgres://` URL, and TLS through rustls.
//!
//! `sslmode` as libpq reads it, narrowed to what a coordination server needs:
//! `verify-full` checks the server's certificate against the web's root authorities and
//! its name against the host; `require` encrypts without checking who answers (libpq's
//! meaning too: protection from eavesdroppers, not from an impostor); `disable`, `prefer`,
//! `allow` or none connect in plain text, since loopback and private networks are where a
//! team's database usually sits. tokio-postgres itself parses only `disable`, `prefer` and
//! `require`, so the mode is taken out of the URL here.

use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Result, StoreError};

/// The driver's settings for `url`, and the TLS connector its `sslmode` asks for (`None`:
/// plain text).
pub(super) fn configure(url: &str) -> Result<(tokio_postgres::Config, Option<MakeRustlsConnect>)> {
    let (rest, mode) = take_sslmode(url);
    let mut config = tokio_postgres::Config::from_str(&rest).map_err(|e| {
        StoreError::Invalid(format!(
            "the PostgreSQL URL does not parse ({e}): write it as \
             postgres://user@host:port/database[?sslmode=require|verify-full]"
        ))
    })?;
    let tls = match mode.as_deref() {
        None | Some("disable" | "allow" | "prefer") => {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
            None
        }
        Some("require") => {
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
            Some(connector(false)?)
        }
        Some("verify-full" | "verify-ca") => {
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
            Some(connector(true)?)
        }
        Some(other) => {
            return Err(StoreError::Invalid(format!(
                "sslmode={other} is not one clawboo knows: use disable, require or verify-full"
            )));
        }
    };
    Ok((config, tls))
}

/// `url` without its `sslmode` parameter, and that parameter's value.
fn take_sslmode(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut mode = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some(("sslmode", value)) => {
                mode = Some(value.to_ascii_lowercase());
                false
            }
            _ => !pair.is_empty(),
        })
        .collect();
    if kept.is_empty() {
        (base.to_owned(), mode)
    } else {
        (format!("{base}?{}", kept.join("&")), mode)
    }
}

fn connector(verify: bool) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Invalid(format!("TLS cannot be set up: {e}")))?;
    let config = if verify {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth()
    };
    Ok(MakeRustlsConnect::new(config))
}

/// `sslmode=require`: any certificate is accepted (as libpq does in that mode), while the
/// handshake's signatures are still checked so the session keys are the server's.
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_is_taken_out_of_the_url() {
        assert_eq!(
            take_sslmode("postgres://u@h/db?sslmode=verify-full&connect_timeout=3"),
            (
                "postgres://u@h/db?connect_timeout=3".to_owned(),
                Some("verify-full".to_owned())
            )
        );
        assert_eq!(
            take_sslmode("postgres://u@h/db?sslmode=require"),
            ("postgres://u@h/db".to_owned(), Some("require".to_owned()))
        );
        assert_eq!(
            take_sslmode("postgres://u@h/db"),
            ("postgres://u@h/db".to_owned(), None)
        );
    }

    #[test]
    fn every_mode_builds_and_an_unknown_one_is_refused() {
        for mode in ["disable", "prefer", "require", "verify-full"] {
            let (_, tls) = configure(&format!("postgres://u@h/db?sslmode={mode}"))
                .unwrap_or_else(|e| panic!("{mode}: {e}"));
            assert_eq!(
                tls.is_some(),
                matches!(mode, "require" | "verify-full"),
                "{mode}"
            );
        }
        assert!(configure("postgres://u@h/db?sslmode=sometimes").is_err());
    }
}
