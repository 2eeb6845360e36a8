//! Output compaction: long tool outputs shrink before they reach the model, never at the
//! cost of an error line.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::Regex;

/// Outputs shorter than this many bytes pass unchanged.
pub const COMPACT_MIN_BYTES: usize = 512;
/// Lines kept from the start of a long output.
const HEAD_LINES: usize = 20;
/// Lines kept from the end of a long output.
const TAIL_LINES: usize = 20;
/// URLs longer than this are shortened (outside error lines).
const LONG_URL_CHARS: usize = 100;
/// Lines longer than this keep their start and end (outside error lines).
const LONG_LINE_CHARS: usize = 2000;

fn error_line_pattern() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\b(error|errors|err|fail|failed|failure|fatal|panic|panicked|exception|traceback|denied)\b|^E\d+|\[E\d+\]").ok()
    })
    .as_ref()
}

fn url_pattern() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r#"https?://[^\s"'<>)\]]+"#).ok())
        .as_ref()
}

/// Whether `line` reports an error (compaction never drops one).
pub fn is_error_line(line: &str) -> bool {
    error_line_pattern().is_some_and(|re| re.is_match(line))
}

fn take_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn last_chars(s: &str, n: usize) -> &str {
    let count = s.chars().count();
    if count <= n {
        return s;
    }
    match s.char_indices().nth(count - n) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

fn shorten_urls(line: &str) -> String {
    let Some(re) = url_pattern() else {
        return line.to_string();
    };
    re.replace_all(line, |caps: &regex::Captures<'_>| {
        let url = &caps[0];
        if url.chars().count() > LONG_URL_CHARS {
            format!("{}…{}", take_chars(url, 60), last_chars(url, 20))
        } else {
            url.to_string()
        }
    })
    .into_owned()
}

fn shorten_line(line: &str) -> String {
    if is_error_line(line) {
        return line.to_string();
    }
    let line = shorten_urls(line);
    let count = line.chars().count();
    if count > LONG_LINE_CHARS {
        format!(
            "{} … [{} chars omitted] … {}",
            take_chars(&line, 1000),
            count - 1500,
            last_chars(&line, 500)
        )
    } else {
        line
    }
}

/// Runs of identical lines become one line plus a count.
fn collapse_repeats(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut run = 1;
        while i + run < lines.len() && lines[i + run] == lines[i] {
            run += 1;
        }
        out.push(shorten_line(lines[i]));
        if run > 1 {
            out.push(format!("… [previous line repeated {} more times]", run - 1));
        }
        i += run;
    }
    out
}

/// Compact a tool output: under [`COMPACT_MIN_BYTES`] unchanged; otherwise repeated lines
/// collapse, the head and tail stay, every error line in between stays, very long URLs
/// shorten. The original is returned when the result would drop an error line or save
/// less than 5%.
pub fn compact(text: &str) -> String {
    if text.len() < COMPACT_MIN_BYTES {
        return text.to_string();
    }
    let lines: Vec<&str> = text.lines().collect();
    let collapsed = collapse_repeats(&lines);
    let mut kept: Vec<String> = Vec::new();
    if collapsed.len() <= HEAD_LINES + TAIL_LINES {
        kept = collapsed;
    } else {
        let tail_start = collapsed.len() - TAIL_LINES;
        let mut omitted = 0usize;
        for (index, line) in collapsed.iter().enumerate() {
            if index < HEAD_LINES || index >= tail_start || is_error_line(line) {
                if omitted > 0 {
                    kept.push(format!("… [{omitted} lines omitted]"));
                    omitted = 0;
                }
                kept.push(line.clone());
            } else {
                omitted += 1;
            }
        }
    }
    let mut compacted = kept.join("\n");
    if text.ends_with('\n') {
        compacted.push('\n');
    }
    let kept_lines: HashSet<&str> = compacted.lines().collect();
    let drops_an_error = lines
        .iter()
        .any(|line| is_error_line(line) && !kept_lines.contains(line));
    let saves_enough = compacted.len() * 100 <= text.len() * 95;
    if drops_an_error || !saves_enough {
        text.to_string()
    } else {
        compacted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_outputs_pass_unchanged() {
        let text = "same\n".repeat(100);
        assert!(text.len() < COMPACT_MIN_BYTES);
        assert_eq!(compact(&text), text);
    }

    #[test]
    fn long_outputs_keep_head_tail_and_every_error_line() {
        let mut lines: Vec<String> = (0..400).map(|i| format!("step {i} ok")).collect();
        lines[150] = "error: disk full at step 150".to_string();
        lines[222] = "thread 'main' panicked at src/x.rs:3".to_string();
        let text = lines.join("\n");
        let out = compact(&text);
        assert!(out.len() < text.len() / 4, "{}", out.len());
        for kept in [0, 19, 380, 399] {
            assert!(
                out.contains(&format!("step {kept} ok\n"))
                    || out.ends_with(&format!("step {kept} ok")),
                "line {kept}"
            );
        }
        assert!(!out.contains("step 100 ok"));
        assert!(out.contains("error: disk full at step 150"));
        assert!(out.contains("thread 'main' panicked at src/x.rs:3"));
        assert!(out.contains("… [130 lines omitted]"));
    }

    #[test]
    fn repeated_lines_collapse() {
        let text = format!("start\n{}end\n", "the same line again\n".repeat(60));
        let out = compact(&text);
        assert_eq!(
            out,
            "start\nthe same line again\n… [previous line repeated 59 more times]\nend\n"
        );
    }

    #[test]
    fn long_urls_shorten_outside_error_lines() {
        let url = format!("https://example.com/{}", "a".repeat(300));
        let text = format!(
            "see {url}\nerror fetching {url}\n{}",
            "filler line\n".repeat(3)
        );
        let out = compact(&text);
        assert!(out.starts_with("see https://example.com/aaaa"));
        assert!(out.lines().next().unwrap().contains('…'));
        assert!(out.contains(&format!("error fetching {url}")));
    }

    #[test]
    fn original_kept_when_saving_under_five_percent() {
        let text: String = (0..30)
            .map(|i| format!("distinct line number {i:04}\n"))
            .collect();
        assert!(text.len() >= COMPACT_MIN_BYTES);
        assert_eq!(compact(&text), text);
    }

    #[test]
    fn error_lines_are_never_collapsed_away() {
        // Repeated error lines collapse to one copy, which still keeps the line itself.
        let text = format!("{}{}", "error: retry\n".repeat(50), "done\n");
        let out = compact(&text);
        assert!(out.starts_with("error: retry\n… [previous line repeated 49 more times]"));
    }
}
