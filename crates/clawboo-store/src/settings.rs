//! Key/value settings (the attach-signing secret lives here).

use crate::Store;
use crate::error::Result;

impl Store {
    /// The value stored under `key`, if any.
    pub fn setting(&self, key: &str) -> Result<Option<String>> {
        self.read(|tx| {
            tx.query_opt("SELECT value FROM settings WHERE key = ?1", &[&key], |r| {
                r.get(0)
            })
        })
    }

    /// The value under `key`, created from `make` when missing. Atomic across processes
    /// and hosts: every caller sees the same value, whoever wrote it first.
    pub fn setting_or_insert_with(
        &self,
        key: &str,
        make: impl FnOnce() -> String,
    ) -> Result<String> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO settings(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO NOTHING",
                &[&key, &make()],
            )?;
            tx.query_one("SELECT value FROM settings WHERE key = ?1", &[&key], |r| {
                r.get(0)
            })
        })
    }
}
