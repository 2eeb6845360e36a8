//! The one text normaliser that pattern matching runs on: the secret scrubber
//! ([`crate::scrub`]) and the broker's inspectors (`clawboo_broker`'s `inspect`) both match on
//! [`normalized`] text, so a zero-width space or full-width letters cannot split a token or a
//! phrase past them.

use std::borrow::Cow;

use icu_properties::CodePointSetData;
use icu_properties::props::DefaultIgnorableCodePoint;
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Whether `c` renders as nothing: a format character (Unicode category Cf: zero-width
/// space and joiners, soft hyphen, word joiner, byte-order mark, bidi controls, …) or any
/// other `Default_Ignorable_Code_Point` (variation selectors such as U+FE0F, the combining
/// grapheme joiner U+034F, the Hangul fillers U+3164 and U+FFA0, …). A forger can put one
/// anywhere inside a word, so every matcher drops them first.
pub fn is_invisible_char(c: char) -> bool {
    get_general_category(c) == GeneralCategory::Format
        || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// `text` with every invisible character removed and then in NFKC (compatibility forms such
/// as full-width letters become their plain letters). ASCII text is returned as it is.
pub fn normalized(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter(|&c| !is_invisible_char(c))
            .nfkc()
            .collect(),
    )
}

/// Where a NUL character (U+0000) stands in a JSON object's strings or keys (`name`,
/// `a.b`, `tags[2]`), if anywhere: PostgreSQL cannot store one and SQLite would, so the
/// surfaces refuse it before either is asked, naming the field.
pub fn nul_in_fields(fields: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    fields.iter().find_map(|(key, value)| {
        if key.contains('\0') {
            return Some(key.escape_debug().to_string());
        }
        nul_at(value).map(|rest| joined(key, &rest))
    })
}

/// `head` followed by the path `rest` below it.
fn joined(head: &str, rest: &str) -> String {
    if rest.is_empty() || rest.starts_with('[') {
        format!("{head}{rest}")
    } else {
        format!("{head}.{rest}")
    }
}

/// Where in `value` a NUL stands, relative to it (empty: the value itself).
fn nul_at(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(text) => text.contains('\0').then(String::new),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_at(item).map(|rest| joined(&format!("[{i}]"), &rest))),
        Value::Object(fields) => nul_in_fields(fields),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_borrowed_unchanged() {
        assert!(matches!(
            normalized("plain text"),
            Cow::Borrowed("plain text")
        ));
    }

    #[test]
    fn a_nul_is_found_and_named_wherever_it_stands() {
        let fields = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(
            nul_in_fields(&fields(serde_json::json!({"a": "x", "n": 1}))),
            None
        );
        assert_eq!(
            nul_in_fields(&fields(serde_json::json!({"title": "a\0b"}))).as_deref(),
            Some("title")
        );
        assert_eq!(
            nul_in_fields(&fields(serde_json::json!({"tags": ["ok", "b\0"]}))).as_deref(),
            Some("tags[1]")
        );
        assert_eq!(
            nul_in_fields(&fields(serde_json::json!({"a": {"b": [{"c": "\0"}]}}))).as_deref(),
            Some("a.b[0].c")
        );
        assert_eq!(
            nul_in_fields(&fields(serde_json::json!({"k\0": 1}))).as_deref(),
            Some("k\\0")
        );
    }

    #[test]
    fn every_default_ignorable_character_is_removed() {
        for invisible in [
            '\u{fe0f}',
            '\u{fe00}',
            '\u{034f}',
            '\u{3164}',
            '\u{ffa0}',
            '\u{180e}',
            '\u{115f}',
            '\u{17b4}',
            '\u{e0041}',
            '\u{1d173}',
        ] {
            assert_eq!(
                normalized(&format!("to{invisible}ken")),
                "token",
                "{invisible:?}"
            );
        }
    }

    #[test]
    fn format_characters_are_removed() {
        assert_eq!(
            normalized("to\u{200b}k\u{200c}e\u{200d}n\u{2060}s\u{feff}\u{ad}\u{202e}"),
            "tokens"
        );
    }

    #[test]
    fn compatibility_forms_fold_to_plain_letters() {
        assert_eq!(normalized("\u{ff53}\u{ff4b}\u{ff0d}\u{ff11}"), "sk-1");
        assert_eq!(normalized("\u{fb01}le"), "file");
        // Canonical composition is kept: an accented letter stays one letter.
        assert_eq!(normalized("e\u{301}"), "\u{e9}");
    }
}
