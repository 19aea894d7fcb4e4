//! Kernel messages on a page.

use maud::{Markup, html};

/// A kernel message for a page: its `code` spans (the backtick-quoted ids, commands and values
/// every refusal message uses) become `<code>` elements, the rest stays text (escaped as all
/// text is). An unpaired backtick is kept as it is.
pub(crate) fn prose(text: &str) -> Markup {
    let parts: Vec<&str> = text.split('`').collect();
    let paired = parts.len() % 2 == 1;
    html! {
        @for (index, part) in parts.iter().enumerate() {
            @if index % 2 == 1 && (paired || index + 1 < parts.len()) {
                code { (part) }
            } @else {
                @if index % 2 == 1 { "`" }
                (part)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prose;

    #[test]
    fn code_spans_become_code_elements_and_the_rest_stays_escaped_text() {
        assert_eq!(
            prose("approval `apr_1` expired: run `countersign pending`").into_string(),
            "approval <code>apr_1</code> expired: run <code>countersign pending</code>"
        );
        assert_eq!(
            prose("a `<b>` tag").into_string(),
            "a <code>&lt;b&gt;</code> tag"
        );
        assert_eq!(prose("one ` alone").into_string(), "one ` alone");
        assert_eq!(prose("plain").into_string(), "plain");
    }
}
