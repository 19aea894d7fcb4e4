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
    let duration = humantime::parse_duration(text)
        .map_err(|error| format!("{error}: write a number and a unit, such as 30s, 5m or 1h"))?;
    if duration.is_zero() {
        return Err("must be longer than zero, such as 30s, 5m or 1h".to_owned());
    }
    Ok(duration)
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
    fn refuses_what_no_run_could_use() {
        assert_eq!(positive_duration("5m"), Ok(Duration::from_secs(300)));
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
