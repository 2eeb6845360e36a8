//! The one database resolver every binary uses, so a stdio-attached agent and
//! `clawboo serve` can never silently disagree about which board they see.

use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the default database.
pub const DB_PATH_ENV: &str = "CLAWBOO_DB_PATH";

/// Where a store lives, as `--db` or `CLAWBOO_DB_PATH` named it. Its `Display` and `Debug`
/// never show a PostgreSQL URL's password, so a location can be logged or put in a snippet.
#[derive(Clone, PartialEq, Eq)]
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

impl DbLocation {
    /// Whether this names a PostgreSQL server.
    pub fn is_postgres(&self) -> bool {
        matches!(self, DbLocation::Postgres(_))
    }

    /// This location with a PostgreSQL URL's missing password filled in as libpq would
    /// (`PGPASSWORD`, else the password file): the driver reads neither by itself, and
    /// attach snippets carry the URL without its password. See the free function of that name.
    pub fn with_libpq_password(self) -> DbLocation {
        match self {
            DbLocation::Postgres(url) => DbLocation::Postgres(with_libpq_password(&url)),
            file => file,
        }
    }
}

impl From<PathBuf> for DbLocation {
    fn from(path: PathBuf) -> DbLocation {
        DbLocation::File(path)
    }
}

impl fmt::Display for DbLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbLocation::File(path) => write!(f, "{}", path.display()),
            DbLocation::Postgres(url) => f.write_str(&url_without_password(url)),
        }
    }
}

impl fmt::Debug for DbLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbLocation::File(path) => f.debug_tuple("File").field(path).finish(),
            DbLocation::Postgres(url) => f
                .debug_tuple("Postgres")
                .field(&url_without_password(url))
                .finish(),
        }
    }
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

/// Environment variable libpq reads a password from.
const PGPASSWORD_ENV: &str = "PGPASSWORD";
/// Environment variable naming libpq's password file (else `~/.pgpass`).
const PGPASSFILE_ENV: &str = "PGPASSFILE";
/// The port a URL without one means (libpq's and the driver's default).
const DEFAULT_PORT: &str = "5432";
/// Debian's default socket folder, which a password file names as `localhost`.
const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// `url` with the password filled in as libpq fills it when the URL has none (or an empty
/// one): `PGPASSWORD`, else the first matching line of the password file (`passfile=` in
/// the URL, else `PGPASSFILE`, else `~/.pgpass`; ignored, with a warning, when group or
/// others may read it). The driver reads neither by itself, and attach snippets carry the
/// URL without its password so that the secret stays in the agent host's environment or
/// password file. A URL that has a password, or for which nothing matches, is returned as
/// given. The password is appended as a `password=` parameter.
pub fn with_libpq_password(url: &str) -> String {
    let env = |name: &str| std::env::var(name).ok();
    fill_password(url, &env)
}

/// [`with_libpq_password`] with the environment read through `env`.
fn fill_password(url: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let Some(parts) = PgUrl::parse(url) else {
        return url.to_owned();
    };
    let has_password = parts
        .param("password")
        .or_else(|| parts.password.map(percent_decode))
        .is_some_and(|p| !p.is_empty());
    if has_password {
        return url.to_owned();
    }
    let password = env(PGPASSWORD_ENV)
        .filter(|p| !p.is_empty())
        .or_else(|| password_from_file(&parts, env));
    match password {
        Some(password) => {
            let separator = if parts.query.is_some() { '&' } else { '?' };
            format!("{url}{separator}password={}", percent_encode(&password))
        }
        None => url.to_owned(),
    }
}

/// The password file's entry for the first of the URL's hosts that has one.
fn password_from_file(parts: &PgUrl<'_>, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let file = parts
        .param("passfile")
        .or_else(|| env(PGPASSFILE_ENV).filter(|f| !f.is_empty()))
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|home| home.join(".pgpass")))?;
    let content = read_password_file(&file)?;
    let user = parts
        .param("user")
        .or_else(|| parts.user.map(percent_decode))
        .filter(|u| !u.is_empty())
        .or_else(|| env("USER"))
        .or_else(|| env("LOGNAME"))?;
    let dbname = parts
        .param("dbname")
        .or_else(|| parts.path.map(percent_decode))
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| user.clone());
    parts.hosts().into_iter().find_map(|(host, port)| {
        let host = match host.as_str() {
            "" | DEFAULT_SOCKET_DIR => "localhost".to_owned(),
            _ => host,
        };
        pgpass_lookup(&content, &host, &port, &dbname, &user)
    })
}

/// The password file's text, unless it is missing, not a regular file, or (on Unix) open
/// to group or others, which libpq refuses too.
fn read_password_file(file: &Path) -> Option<String> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                "password file {} has group or world access and is ignored: \
                 chmod 600 it",
                file.display()
            );
            return None;
        }
    }
    std::fs::read_to_string(file).ok()
}

/// The password of the first line of a libpq password file
/// (`hostname:port:database:username:password`) matching the four values. A field that is
/// exactly `*` matches anything; `\` escapes the next character (`\:`, `\\`, `\*`); blank
/// lines and lines starting with `#` are skipped, as are lines of fewer than five fields.
fn pgpass_lookup(
    content: &str,
    host: &str,
    port: &str,
    dbname: &str,
    user: &str,
) -> Option<String> {
    content.lines().find_map(|line| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let fields = pgpass_fields(line);
        let [h, p, d, u, password, ..] = fields.as_slice() else {
            return None;
        };
        let matches = |field: &PgpassField, value: &str| field.wildcard || field.text == value;
        let all = matches(h, host) && matches(p, port) && matches(d, dbname) && matches(u, user);
        (all && !password.text.is_empty()).then(|| password.text.clone())
    })
}

/// One field of a password-file line, its escapes removed.
struct PgpassField {
    text: String,
    /// The field was a lone unescaped `*`.
    wildcard: bool,
}

/// Split a password-file line at its unescaped colons.
fn pgpass_fields(line: &str) -> Vec<PgpassField> {
    let mut fields = Vec::new();
    let mut text = String::new();
    let mut raw = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                raw.push(c);
                if let Some(next) = chars.next() {
                    raw.push(next);
                    text.push(next);
                }
            }
            ':' => {
                fields.push(PgpassField {
                    wildcard: raw == "*",
                    text: std::mem::take(&mut text),
                });
                raw.clear();
            }
            c => {
                raw.push(c);
                text.push(c);
            }
        }
    }
    fields.push(PgpassField {
        wildcard: raw == "*",
        text,
    });
    fields
}

/// A `postgres://` URL cut as libpq cuts it:
/// `scheme://[user[:password]@][host[:port][,…]][/dbname][?key=value&…]`, each part still
/// percent-encoded.
struct PgUrl<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    password: Option<&'a str>,
    hosts: &'a str,
    path: Option<&'a str>,
    query: Option<&'a str>,
}

impl<'a> PgUrl<'a> {
    fn parse(url: &'a str) -> Option<PgUrl<'a>> {
        let (scheme, rest) = url.split_once("://")?;
        // libpq: the user part ends at the first `@`, unless a `/` comes first.
        let (userinfo, rest) = match rest.find(['@', '/']) {
            Some(i) if rest[i..].starts_with('@') => (Some(&rest[..i]), &rest[i + 1..]),
            _ => (None, rest),
        };
        let (user, password) = match userinfo {
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (Some(user), Some(password)),
                None => (Some(info), None),
            },
            None => (None, None),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let (hosts, path) = match rest.split_once('/') {
            Some((hosts, path)) => (hosts, Some(path)),
            None => (rest, None),
        };
        Some(PgUrl {
            scheme,
            user,
            password,
            hosts,
            path,
            query,
        })
    }

    /// The query's `key=value` pairs, decoded.
    fn params(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.query
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(key), percent_decode(value))
            })
    }

    /// The last value of query parameter `key` (libpq: a later setting wins).
    fn param(&self, key: &str) -> Option<String> {
        self.params()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
            .last()
    }

    /// Every (host, port) the URL names, defaults applied: hosts from `host=` (else the
    /// authority), ports from the host's own `:port`, else `port=` (one for all, or one
    /// each), else 5432.
    fn hosts(&self) -> Vec<(String, String)> {
        let hosts: Vec<(String, Option<String>)> = match self.param("host") {
            Some(list) => list.split(',').map(|h| (h.to_owned(), None)).collect(),
            None => self
                .hosts
                .split(',')
                .map(|spec| {
                    let (host, port) = split_host_port(spec);
                    (percent_decode(host), port.map(percent_decode))
                })
                .collect(),
        };
        let ports: Vec<String> = self
            .param("port")
            .map(|p| p.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        hosts
            .into_iter()
            .enumerate()
            .map(|(i, (host, port))| {
                let port = port
                    .filter(|p| !p.is_empty())
                    .or_else(|| match ports.as_slice() {
                        [one] => Some(one.clone()),
                        many => many.get(i).cloned(),
                    })
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| DEFAULT_PORT.to_owned());
                (host, port)
            })
            .collect()
    }

    /// The URL again without its password (in the user part or as `password=`).
    fn without_password(&self) -> String {
        let mut out = format!("{}://", self.scheme);
        if let Some(user) = self.user {
            out.push_str(user);
            out.push('@');
        }
        out.push_str(self.hosts);
        if let Some(path) = self.path {
            out.push('/');
            out.push_str(path);
        }
        if let Some(query) = self.query {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|pair| {
                    let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
                    percent_decode(key) != "password"
                })
                .collect();
            if !kept.is_empty() {
                out.push('?');
                out.push_str(&kept.join("&"));
            }
        }
        out
    }
}

/// `host[:port]` or `[v6][:port]`.
fn split_host_port(spec: &str) -> (&str, Option<&str>) {
    if let Some(v6) = spec.strip_prefix('[')
        && let Some((host, rest)) = v6.split_once(']')
    {
        return (host, rest.strip_prefix(':'));
    }
    match spec.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (spec, None),
    }
}

/// A PostgreSQL URL without its password, for logs and snippets.
fn url_without_password(url: &str) -> String {
    match PgUrl::parse(url) {
        Some(parts) => parts.without_password(),
        None => "a PostgreSQL URL".to_owned(),
    }
}

/// Decode `%XX` escapes (invalid UTF-8 is replaced; a stray `%` stays).
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Escape everything but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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
    #[test]
    fn a_location_never_shows_a_password() {
        for (url, shown) in [
            (
                "postgres://clawboo:hunter2@db.internal:5432/board",
                "postgres://clawboo@db.internal:5432/board",
            ),
            (
                "postgresql://u@h/db?sslmode=require&password=hunter2",
                "postgresql://u@h/db?sslmode=require",
            ),
            ("postgres://u:hunter2@h", "postgres://u@h"),
            ("postgres://h:5433/db", "postgres://h:5433/db"),
            (
                "postgres://u:p%40ss%2Fhunter2@[::1]:5432/db",
                "postgres://u@[::1]:5432/db",
            ),
        ] {
            let location = DbLocation::Postgres(url.to_owned());
            assert_eq!(location.to_string(), shown);
            let debug = format!("{location:?}");
            assert!(!debug.contains("hunter2"), "{debug}");
        }
        assert_eq!(
            DbLocation::File(PathBuf::from("/a/b.db")).to_string(),
            "/a/b.db"
        );
    }

    /// `fill_password` with a fixed environment.
    fn fill(url: &str, vars: &[(&str, &str)]) -> String {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        fill_password(url, &env)
    }

    #[test]
    fn pgpassword_fills_a_missing_password_only() {
        let env = [("PGPASSWORD", "s3cret:&/?")];
        assert_eq!(
            fill("postgres://u@h/db", &env),
            "postgres://u@h/db?password=s3cret%3A%26%2F%3F"
        );
        assert_eq!(
            fill("postgres://u@h/db?sslmode=disable", &env),
            "postgres://u@h/db?sslmode=disable&password=s3cret%3A%26%2F%3F"
        );
        // An empty password is no password (as in libpq).
        assert_eq!(
            fill("postgres://u:@h/db", &env),
            "postgres://u:@h/db?password=s3cret%3A%26%2F%3F"
        );
        for given in ["postgres://u:mine@h/db", "postgres://u@h/db?password=mine"] {
            assert_eq!(fill(given, &env), given);
        }
        assert_eq!(fill("postgres://u@h/db", &[]), "postgres://u@h/db");
        assert_eq!(
            fill("postgres://u@h/db", &[("PGPASSWORD", "")]),
            "postgres://u@h/db"
        );
    }

    #[test]
    fn pgpass_lines_match_as_libpq_matches_them() {
        let file = "\
# comment
db.internal:5432:board:clawboo:first
*:*:*:clawboo:fallback
h\\:x:5432:d:u:esc\\:aped\\\\pw:ignored
localhost:5432:*:*:local
short:line
*:5433:*:*:
";
        let look = |h: &str, p: &str, d: &str, u: &str| pgpass_lookup(file, h, p, d, u);
        assert_eq!(
            look("db.internal", "5432", "board", "clawboo").as_deref(),
            Some("first")
        );
        assert_eq!(
            look("db.internal", "5432", "other", "clawboo").as_deref(),
            Some("fallback")
        );
        assert_eq!(
            look("h:x", "5432", "d", "u").as_deref(),
            Some("esc:aped\\pw")
        );
        assert_eq!(
            look("localhost", "5432", "any", "anyone").as_deref(),
            Some("local")
        );
        assert_eq!(look("db.internal", "5432", "board", "someone"), None);
        // An empty password field matches nothing usable.
        assert_eq!(look("elsewhere", "5433", "d", "u"), None);
        // `\*` is a literal star, not a wildcard.
        assert_eq!(pgpass_lookup("\\*:*:*:*:pw", "h", "5432", "d", "u"), None);
        assert_eq!(
            pgpass_lookup("\\*:*:*:*:pw", "*", "5432", "d", "u").as_deref(),
            Some("pw")
        );
        // Windows line ends.
        assert_eq!(
            pgpass_lookup("h:5432:d:u:pw\r\n", "h", "5432", "d", "u").as_deref(),
            Some("pw")
        );
    }

    #[test]
    fn the_password_file_is_read_with_the_urls_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "db2:6000:board:ops:two\nlocalhost:5432:ops:ops:sock\ndb1:5432:u:u:one\n",
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let passfile = file.display().to_string();
        let env = [("PGPASSFILE", passfile.as_str()), ("USER", "ops")];
        // The second host matches; the database defaults to the user.
        assert_eq!(
            fill("postgres://ops@db1,db2:6000/board", &env),
            "postgres://ops@db1,db2:6000/board?password=two"
        );
        // Port 5432 and dbname = user by default; a socket connection is `localhost`.
        assert_eq!(
            fill("postgres://?host=/var/run/postgresql", &env),
            "postgres://?host=/var/run/postgresql&password=sock"
        );
        assert_eq!(
            fill("postgres://u@db1", &env),
            "postgres://u@db1?password=one"
        );
        // `passfile=` in the URL wins over PGPASSFILE; PGPASSWORD wins over both.
        let url = format!("postgres://u@db1?passfile={passfile}");
        assert_eq!(
            fill(&url, &[("PGPASSFILE", "/nonexistent")]),
            format!("{url}&password=one")
        );
        assert_eq!(
            fill(
                "postgres://u@db1",
                &[("PGPASSFILE", passfile.as_str()), ("PGPASSWORD", "env")]
            ),
            "postgres://u@db1?password=env"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert_eq!(fill("postgres://u@db1", &env), "postgres://u@db1");
        }
    }

    #[test]
    fn hosts_and_ports_follow_libpq_defaults() {
        let hosts = |url: &str| PgUrl::parse(url).unwrap().hosts();
        let pair = |h: &str, p: &str| (h.to_owned(), p.to_owned());
        assert_eq!(hosts("postgres://h"), [pair("h", "5432")]);
        assert_eq!(
            hosts("postgres://a:1,[::1]:2,b/db"),
            [pair("a", "1"), pair("::1", "2"), pair("b", "5432")]
        );
        assert_eq!(
            hosts("postgres:///db?host=x,y&port=7,8"),
            [pair("x", "7"), pair("y", "8")]
        );
        assert_eq!(
            hosts("postgres://%2Ftmp%2Fpg/db"),
            [pair("/tmp/pg", "5432")]
        );
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%+1x"), "%+1x");
    }
}
