//! Value parsers shared by several commands' flags: each refuses, at parse time and with
//! clap's usage exit status (2), a value no run could use.

use std::time::Duration;

/// A duration longer than zero (`30s`, `5m`, `1h`; humantime's syntax).
///
/// # Errors
///
/// A sentence naming the problem: not a duration, or zero (a zero timeout would end every
/// command before it starts, and a zero interval would spin).
pub(crate) fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = duration(text, "30s, 5m or 1h")?;
    if duration.is_zero() {
        return Err("must be longer than zero, such as 30s, 5m or 1h".to_owned());
    }
    Ok(duration)
}

/// A duration of zero or more (humantime's syntax); a flag taking one is declared with
/// `allow_hyphen_values` so that `-5m` reaches this parser instead of reading as a flag.
///
/// # Errors
///
/// A sentence naming the problem (negative, or not a duration) with `examples` of the syntax.
pub(crate) fn duration(text: &str, examples: &str) -> Result<Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!(
            "a duration cannot be negative: write a number and a unit, such as {examples}"
        ));
    }
    // Only the units the docs list are taken, as in a policy (found by a first-time user:
    // humantime also reads `M` as months and `y` as years, so `1M` meant a month).
    let trimmed = text.trim();
    match countersign::clock::check_duration_units(trimmed) {
        Ok(()) => {}
        Err(countersign::clock::DurationUnitProblem::Missing) => {
            return Err(format!(
                "`{}` has no unit: write a number and a unit, such as {examples}",
                countersign::evidence::printable(trimmed)
            ));
        }
        Err(countersign::clock::DurationUnitProblem::Unknown(unit)) => {
            return Err(format!(
                "unknown unit `{}`: use `ms`, `s`, `m`, `h`, `d` or `w` after each number (or `sec`, `min`, `hour`, `day`, `week`), such as {examples}",
                countersign::evidence::printable(&unit)
            ));
        }
    }
    humantime::parse_duration(trimmed).map_err(|error| match error {
        // humantime's own sentence lists units (`ns` … `years`) the docs do not promise: name
        // the ones they do (found by a first-time user).
        humantime::DurationError::UnknownUnit { unit, .. } => format!(
            "unknown unit `{}`: use `s`, `m`, `h`, `d` or `w` after each number, such as {examples}",
            countersign::evidence::printable(&unit)
        ),
        other => format!("{other}: write a number and a unit, such as {examples}"),
    })
}

/// A duration of zero or more: [`duration`] with the usual examples (for `clap`).
///
/// # Errors
///
/// As [`duration`].
pub(crate) fn any_duration(text: &str) -> Result<Duration, String> {
    duration(text, "0s, 30s, 5m or 1h")
}

/// An action name: not empty, and not only whitespace.
///
/// # Errors
///
/// A sentence saying to give the name the policy lists.
pub(crate) fn action_name(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(
            "an action name cannot be empty: give the name the policy lists, such as `deploy` or `db.migrate`"
                .to_owned(),
        );
    }
    Ok(text.to_owned())
}

/// A process exit status that can mean "did nothing": 1 to 255 (0 is success, and a process's
/// exit status is one byte, POSIX `exit()`).
///
/// # Errors
///
/// A sentence naming the range.
pub(crate) fn failure_exit_code(text: &str) -> Result<i32, String> {
    let code: i32 = text.trim().parse().map_err(|_| {
        format!("`{text}` is not a whole number: give an exit status from 1 to 255")
    })?;
    if !(1..=255).contains(&code) {
        return Err(format!(
            "`{code}` cannot be a failing exit status: they run from 1 to 255 (0 is success)"
        ));
    }
    Ok(code)
}

/// A note kept with an answer or a resolution: at most [`countersign::approval::MAX_NOTE_BYTES`]
/// bytes, as every other surface allows.
///
/// # Errors
///
/// A sentence naming the limit and the note's length.
/// The `--note` parser: [`note`], whose refusal does not repeat the note (clap's own error
/// for a value parser quotes the value, which for a note past the limit is kilobytes of it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoteParser;

impl clap::builder::TypedValueParser for NoteParser {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        _argument: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let refused = |kind, message: String| {
            clap::Error::raw(kind, format!("--note: {message}\n")).with_cmd(command)
        };
        let text = value.to_str().ok_or_else(|| {
            refused(
                clap::error::ErrorKind::InvalidUtf8,
                "the note is not UTF-8 text".to_owned(),
            )
        })?;
        note(text).map_err(|message| refused(clap::error::ErrorKind::ValueValidation, message))
    }
}

pub(crate) fn note(text: &str) -> Result<String, String> {
    let limit = countersign::approval::MAX_NOTE_BYTES;
    if text.len() > limit {
        return Err(format!(
            "the note is {} bytes, longer than the {limit} every surface allows: shorten it, or link to the details",
            text.len()
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_unit_is_named_with_the_units_the_docs_give() {
        let error = duration("7x", "30m or 24h").unwrap_err();
        assert_eq!(
            error,
            "unknown unit `x`: use `ms`, `s`, `m`, `h`, `d` or `w` after each number (or `sec`, `min`, `hour`, `day`, `week`), such as 30m or 24h"
        );
        assert_eq!(duration("1h 30m", "30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("1h30m", "30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("2 days", "30m"), Ok(Duration::from_secs(172_800)));
        // Found by a first-time user: `1M` was a month and `1y` a year, units no help lists.
        for unlisted in ["1M", "1y", "5us", "2months"] {
            let error = duration(unlisted, "30m").unwrap_err();
            assert!(error.starts_with("unknown unit `"), "{unlisted}: {error}");
        }
        assert_eq!(
            duration("30", "30m or 24h").unwrap_err(),
            "`30` has no unit: write a number and a unit, such as 30m or 24h"
        );
    }

    #[test]
    fn refuses_what_no_run_could_use() {
        assert_eq!(positive_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(any_duration("0s"), Ok(Duration::ZERO));
        for negative in ["-5m", " -1s"] {
            let refused = positive_duration(negative).expect_err("negative");
            assert!(
                refused.starts_with("a duration cannot be negative"),
                "{refused}"
            );
        }
        assert!(
            positive_duration("0s")
                .unwrap_err()
                .contains("longer than zero")
        );
        assert!(
            positive_duration("soon")
                .unwrap_err()
                .contains("30s, 5m or 1h")
        );
        assert_eq!(action_name("deploy"), Ok("deploy".to_owned()));
        assert!(action_name(" ").unwrap_err().contains("cannot be empty"));
        assert_eq!(failure_exit_code("3"), Ok(3));
        assert!(
            note(&"x".repeat(4097))
                .unwrap_err()
                .contains("longer than the 4096")
        );
        assert_eq!(note("ok"), Ok("ok".to_owned()));
        for bad in ["0", "256", "-3"] {
            assert!(
                failure_exit_code(bad).unwrap_err().contains("1 to 255"),
                "{bad}"
            );
        }
    }
}
