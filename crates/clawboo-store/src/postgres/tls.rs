//! The connection settings of a `postgres://` URL, and TLS through rustls.
//!
//! `sslmode` as libpq reads it, narrowed to what a coordination server needs:
//! `verify-full` checks the server's certificate against the authorities in the PEM file
//! `sslrootcert` names (a team's own CA) or, without one, the web's root authorities, and
//! its name against the host; `require` encrypts without checking who answers (libpq's
//! meaning too: protection from eavesdroppers, not from an impostor); `disable`, `prefer`,
//! `allow` or none connect in plain text, since loopback and private networks are where a
//! team's database usually sits. tokio-postgres itself parses only `disable`, `prefer` and
//! `require`, and no `sslrootcert`, so both are taken out of the URL here.

use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Result, StoreError};
use crate::path::percent_decode;

/// The driver's settings for `url`, and the TLS connector its `sslmode` asks for (`None`:
/// plain text).
pub(super) fn configure(url: &str) -> Result<(tokio_postgres::Config, Option<MakeRustlsConnect>)> {
    let (rest, mode) = take_param(url, "sslmode");
    let (rest, root_file) = take_param(&rest, "sslrootcert");
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
            Some(connector(false, None)?)
        }
        Some("verify-full" | "verify-ca") => {
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
            Some(connector(true, root_file.as_deref())?)
        }
        Some(other) => {
            return Err(StoreError::Invalid(format!(
                "sslmode={other} is not one clawboo knows: use disable, require or verify-full"
            )));
        }
    };
    Ok((config, tls))
}

/// `url` without its query parameter `name`, and that parameter's value, percent-decoded
/// (`sslmode` lower-cased, its values being keywords).
fn take_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some((key, found)) if key == name => {
                let found = percent_decode(found);
                value = Some(if name == "sslmode" {
                    found.to_ascii_lowercase()
                } else {
                    found
                });
                false
            }
            _ => !pair.is_empty(),
        })
        .collect();
    if kept.is_empty() {
        (base.to_owned(), value)
    } else {
        (format!("{base}?{}", kept.join("&")), value)
    }
}

/// rustls set up to check the server's certificate (`verify`) against the authorities of
/// `root_file` or the web's, or only to encrypt.
fn connector(verify: bool, root_file: Option<&str>) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Invalid(format!("TLS cannot be set up: {e}")))?;
    let config = if verify {
        let roots = match root_file {
            Some(file) => authorities_in(file)?,
            None => rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
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

/// The certificates of the PEM file `file` (libpq's `sslrootcert`), as trusted authorities.
fn authorities_in(file: &str) -> Result<rustls::RootCertStore> {
    let unusable = |why: String| {
        StoreError::Invalid(format!(
            "sslrootcert={file}: {why}; name a PEM file of the certificate authorities that \
             signed the server's certificate"
        ))
    };
    let mut roots = rustls::RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(file)
        .map_err(|e| unusable(format!("cannot read it ({e})")))?;
    for certificate in certificates {
        let certificate = certificate.map_err(|e| unusable(format!("not PEM ({e})")))?;
        roots
            .add(certificate)
            .map_err(|e| unusable(format!("a certificate in it is unusable ({e})")))?;
    }
    if roots.is_empty() {
        return Err(unusable("it holds no certificate".into()));
    }
    Ok(roots)
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
            take_param(
                "postgres://u@h/db?sslmode=verify-full&connect_timeout=3",
                "sslmode"
            ),
            (
                "postgres://u@h/db?connect_timeout=3".to_owned(),
                Some("verify-full".to_owned())
            )
        );
        assert_eq!(
            take_param("postgres://u@h/db?sslmode=require", "sslmode"),
            ("postgres://u@h/db".to_owned(), Some("require".to_owned()))
        );
        assert_eq!(
            take_param("postgres://u@h/db", "sslmode"),
            ("postgres://u@h/db".to_owned(), None)
        );
    }

    #[test]
    fn sslrootcert_is_taken_out_of_the_url_decoded() {
        assert_eq!(
            take_param(
                "postgres://u@h/db?sslrootcert=%2Fetc%2Fteam%20ca.pem&sslmode=verify-full",
                "sslrootcert"
            ),
            (
                "postgres://u@h/db?sslmode=verify-full".to_owned(),
                Some("/etc/team ca.pem".to_owned())
            )
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
