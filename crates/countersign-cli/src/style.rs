//! Colour and progress for people at a terminal; nothing for pipes, files and `NO_COLOR`.
//!
//! Colour is used only when standard output is a terminal and `NO_COLOR` is unset or empty
//! (<https://no-color.org>); progress bars only when standard error is a terminal. Both are
//! decided once, in `main`, so tests and pipes see plain text.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use anstyle::{AnsiColor, Style};

static COLOR: AtomicBool = AtomicBool::new(false);

/// Decide, once, whether this run paints its output.
pub fn init() {
    COLOR.store(
        color_enabled(
            std::env::var_os("NO_COLOR").as_deref(),
            std::io::stdout().is_terminal(),
        ),
        Ordering::Relaxed,
    );
}

/// Colour is on exactly when standard output is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>: "when present and not an empty string").
fn color_enabled(no_color: Option<&std::ffi::OsStr>, stdout_is_terminal: bool) -> bool {
    stdout_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

fn paint(text: &str, style: Style) -> String {
    if COLOR.load(Ordering::Relaxed) {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

/// A decision or outcome word, coloured by what it means: green for `allow`/`committed`/
/// `same`, yellow for `approve`/`ambiguous`/`handed_off`/`changed`, red for `deny`/`refused`/
/// `undecidable`.
pub fn word(text: &str) -> String {
    let color = match text {
        "allow" | "committed" | "same" | "added" => AnsiColor::Green,
        "approve" | "ambiguous" | "handed_off" | "changed" | "observed" => AnsiColor::Yellow,
        "deny" | "refused" | "failed" | "undecidable" | "removed" => AnsiColor::Red,
        _ => return text.to_owned(),
    };
    paint(text, Style::new().fg_color(Some(color.into())).bold())
}

/// A heading.
pub fn heading(text: &str) -> String {
    paint(text, Style::new().bold())
}

/// A progress bar of `length` steps on standard error, drawn only on a terminal.
pub fn progress(length: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(length);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta} left)")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::color_enabled;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert!(color_enabled(None, true));
        assert!(color_enabled(Some(OsStr::new("")), true));
        assert!(!color_enabled(Some(OsStr::new("1")), true));
        assert!(!color_enabled(None, false));
        assert!(!color_enabled(Some(OsStr::new("1")), false));
    }
}
