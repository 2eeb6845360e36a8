//! The one text normaliser that pattern matching runs on: the secret scrubber
//! ([`crate::scrub`]) and the broker's inspectors ([`crate::broker::inspect`]) both match on
//! [`normalized`] text, so a zero-width space or full-width letters cannot split a token or a
//! phrase past them.

use std::borrow::Cow;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Whether `c` is a format character (Unicode category Cf: zero-width space and joiners,
/// soft hyphen, word joiner, byte-order mark, bidi controls, …): invisible when rendered, so
/// a forger can put one anywhere inside a word.
pub fn is_format_char(c: char) -> bool {
    get_general_category(c) == GeneralCategory::Format
}

/// `text` with every format character removed and then in NFKC (compatibility forms such as
/// full-width letters become their plain letters). ASCII text is returned as it is.
pub fn normalized(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter(|&c| !is_format_char(c))
            .nfkc()
            .collect(),
    )
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
