//! Markdown in task descriptions, comments and team-room posts, rendered for the web board:
//! CommonMark (with tables, strikethrough and task lists) by `pulldown-cmark`, then cleaned
//! by `ammonia`. Raw HTML in the text is shown as text, never as markup (agents' words are
//! untrusted evidence), and the cleaner removes whatever else could run or load (scripts,
//! event handlers, `javascript:` links, styles, images), so the page may insert the result.

use std::sync::LazyLock;

use pulldown_cmark::{Event, Options, Parser, html};

/// The cleaner every rendering goes through; links open without the board as referrer.
static CLEANER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut cleaner = ammonia::Builder::default();
    cleaner.rm_tags(["img"]);
    cleaner.link_rel(Some("noopener noreferrer nofollow"));
    cleaner
});

/// `text` (markdown) as sanitized HTML.
pub fn to_html(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(text, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut rendered = String::with_capacity(text.len() + text.len() / 2);
    html::push_html(&mut rendered, events);
    CLEANER.clean(&rendered).to_string()
}

#[cfg(test)]
mod tests {
    use super::to_html;

    #[test]
    fn markdown_renders_and_nothing_runs() {
        let html = to_html("**bold** and `code`\n\n- [x] done\n\n[go](https://example.org)");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(
            html.contains("rel=\"noopener noreferrer nofollow\""),
            "{html}"
        );

        let html = to_html(
            "hi <script>alert(1)</script> <img src=x onerror=alert(2)>\n\n[x](javascript:alert(3))",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(
            html.contains("&lt;script&gt;"),
            "raw HTML is shown as text: {html}"
        );
    }
}
