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
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    COLOR.store(
        !no_color && std::io::stdout().is_terminal(),
        Ordering::Relaxed,
    );
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
