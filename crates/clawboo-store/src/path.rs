//! The one database resolver every binary uses, so a stdio-attached agent and
//! `clawboo serve` can never silently disagree about which board they see.

use std::path::{Path, PathBuf};

/// Environment variable that overrides the default database.
pub const DB_PATH_ENV: &str = "CLAWBOO_DB_PATH";

/// Where a store lives, as `--db` or `CLAWBOO_DB_PATH` named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbLocation {
    /// A SQLite file (the embedded default); its folder exists once resolved.
    File(PathBuf),
    /// A PostgreSQL server, by its `postgres://` or `postgresql://` URL.
    Postgres(String),
}

/// Why `--db` or `CLAWBOO_DB_PATH` names nothing the store can open.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    /// A URL of a scheme no backend speaks. Only the scheme is repeated: the rest of the
    /// URL may hold a password.
    #[error(
        "`{scheme}://…` is not a database clawboo can open: give a SQLite file path, or a \
         postgres:// or postgresql:// URL"
    )]
    UnsupportedScheme { scheme: String },
    /// The SQLite file's folder is missing and cannot be created.
    #[error("cannot create the database folder {}: {source}", folder.display())]
    Folder {
        folder: PathBuf,
        source: std::io::Error,
    },
}

/// `~/.clawboo/clawboo.db` (falls back to `./.clawboo/clawboo.db` when no home is known).
pub fn default_db_path() -> PathBuf {
    std::env::home_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".clawboo")
        .join("clawboo.db")
}

/// Resolve the database: an explicit `--db` wins, then `CLAWBOO_DB_PATH` (when non-empty),
/// then [`default_db_path`]. A `postgres://`/`postgresql://` URL names a PostgreSQL server;
/// any other `scheme://` is refused rather than taken as a file name; anything else is a
/// SQLite file, whose parent folder is created when missing.
pub fn resolve_db(explicit: Option<&Path>) -> Result<DbLocation, LocationError> {
    let given = match explicit {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(DB_PATH_ENV) {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => default_db_path(),
        },
    };
    if let Some(scheme) = given.to_str().and_then(url_scheme) {
        return match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" => Ok(DbLocation::Postgres(given.display().to_string())),
            _ => Err(LocationError::UnsupportedScheme {
                scheme: scheme.to_string(),
            }),
        };
    }
    if let Some(folder) = given.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(|source| LocationError::Folder {
            folder: folder.to_path_buf(),
            source,
        })?;
    }
    Ok(DbLocation::File(given))
}

/// The scheme of `text` when it starts as a URL does (RFC 3986: a letter, then letters,
/// digits, `+`, `-` or `.`, then `://`). A path such as `./postgres://x` or `C:\db` has none.
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_valid = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (starts_with_letter && rest_valid).then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<DbLocation, LocationError> {
        resolve_db(Some(Path::new(text)))
    }

    #[test]
    fn postgres_urls_of_either_scheme_name_a_server() {
        for url in [
            "postgres://clawboo@db.internal:5432/board",
            "postgresql://u:secret@127.0.0.1/board?sslmode=require",
            "POSTGRES://u@h/db",
        ] {
            assert_eq!(resolve(url).unwrap(), DbLocation::Postgres(url.to_string()));
        }
    }

    #[test]
    fn other_schemes_are_refused_without_repeating_the_url() {
        for (url, scheme) in [
            ("mysql://root:hunter2@h/db", "mysql"),
            ("sqlite://board.db", "sqlite"),
            ("https://u:p@example.com/db", "https"),
        ] {
            let error = resolve(url).unwrap_err();
            let text = error.to_string();
            assert!(
                matches!(&error, LocationError::UnsupportedScheme { scheme: s } if s == scheme),
                "{url}: {error:?}"
            );
            assert!(!text.contains("hunter2") && !text.contains("u:p"), "{text}");
            assert!(text.contains("SQLite file path"), "{text}");
        }
    }

    #[test]
    fn paths_stay_paths_and_get_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nested").join("clawboo.db");
        assert_eq!(
            resolve_db(Some(&file)).unwrap(),
            DbLocation::File(file.clone())
        );
        assert!(file.parent().unwrap().is_dir());
        // Not URLs: no scheme before `://`, or a scheme that is not one.
        for text in [
            "://x",
            "1http://x",
            "./postgres://x",
            "C:\\board.db",
            "board.db",
        ] {
            assert_eq!(url_scheme(text), None, "{text}");
        }
    }
}
