//! [`ApproverId`]: the one shape rule for who answers (issue #19).

use std::fmt;

/// The id of whoever answers an approval or resolves an effect, as receipts record it: one or
/// more parts joined by `:`, each part non-empty and made of ASCII letters, digits and
/// `.` `_` `-` `@` `+` `|`; at most [`ApproverId::MAX_LEN`] bytes. For example `alice`,
/// `human:alice`, `human:alice@example.com`, `oidc:auth0|5f1c`.
///
/// Refused, with [`ApproverIdError`]: an empty or blank name, an empty part (`human:`, `:`,
/// `:alice`, `human::alice`), whitespace anywhere (`human: bob`), and any other character
/// (control characters, quotes, non-ASCII letters that could pass for others).
///
/// An id read back from a store or a receipt body ([`ApproverId::from_stored`], `Deserialize`)
/// is taken as it was written, so an answer recorded before this rule existed still loads.
///
/// Two ids that differ only in ASCII letter case are the same person: equality, ordering and
/// hashing ignore case, so `human:ALICE` is not a second approver of a quorum `human:alice`
/// already counts in, and `agent:BOT` cannot answer `agent:bot`'s request (found by a first-time
/// user: both were counted apart). The id keeps the case it was written in.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(transparent)]
// INVARIANT (approver-shape): an id from outside the kernel always satisfies the rule above
// (`ApproverId::parse` is the only constructor for it); only the lenient read of the kernel's
// own records (`from_stored`, `Deserialize`) may hold an id written before the rule.
pub struct ApproverId(String);

impl ApproverId {
    /// The longest id accepted, in bytes.
    pub const MAX_LEN: usize = 256;

    /// The shape, as every refusal states it.
    pub const EXPECTED: &'static str = "a name such as `alice` or `kind:name` such as `human:alice`: parts joined by `:`, each non-empty, of letters, digits and `. _ - @ + |`, no spaces";

    /// Parse `text` strictly (no trimming: a surface trims what a person typed before it calls
    /// this, if it wants to).
    ///
    /// # Errors
    ///
    /// [`ApproverIdError`] naming the text and what is wrong with it.
    pub fn parse(text: &str) -> Result<ApproverId, ApproverIdError> {
        let fail = |problem: &'static str| ApproverIdError {
            given: text.to_owned(),
            problem,
        };
        if text.trim().is_empty() {
            return Err(fail("it is empty"));
        }
        if text.len() > ApproverId::MAX_LEN {
            return Err(fail("it is longer than 256 bytes"));
        }
        if text.chars().any(char::is_whitespace) {
            return Err(fail("it contains whitespace"));
        }
        if text.split(':').any(str::is_empty) {
            return Err(fail("a part before or after a `:` is empty"));
        }
        let allowed =
            |character: char| character.is_ascii_alphanumeric() || ".:_-@+|".contains(character);
        if !text.chars().all(allowed) {
            return Err(fail(
                "it contains a character other than ASCII letters and digits and `. _ - @ + | :`",
            ));
        }
        Ok(ApproverId(text.to_owned()))
    }

    /// Wrap an id the kernel stored itself, as it is: the lenient read path for answers and
    /// receipts an older version wrote. Never for an id from outside: use
    /// [`ApproverId::parse`].
    pub fn from_stored(text: impl Into<String>) -> ApproverId {
        ApproverId(text.into())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id, giving up the wrapper.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// Lenient, like [`ApproverId::from_stored`]: `Deserialize` reads records the kernel wrote.
impl<'de> serde::Deserialize<'de> for ApproverId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(deserializer).map(ApproverId)
    }
}

impl PartialEq for ApproverId {
    fn eq(&self, other: &ApproverId) -> bool {
        self.0.eq_ignore_ascii_case(&other.0)
    }
}

impl Eq for ApproverId {}

impl std::hash::Hash for ApproverId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for byte in self.0.bytes() {
            state.write_u8(byte.to_ascii_lowercase());
        }
        state.write_u8(0xff);
    }
}

impl Ord for ApproverId {
    fn cmp(&self, other: &ApproverId) -> std::cmp::Ordering {
        self.0
            .bytes()
            .map(|byte| byte.to_ascii_lowercase())
            .cmp(other.0.bytes().map(|byte| byte.to_ascii_lowercase()))
    }
}

impl PartialOrd for ApproverId {
    fn partial_cmp(&self, other: &ApproverId) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl ApproverId {
    /// Is this the id `other` names (a principal, a pattern's literal id), ASCII case aside?
    pub fn is(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl PartialEq<str> for ApproverId {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for ApproverId {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

impl PartialEq<String> for ApproverId {
    fn eq(&self, other: &String) -> bool {
        self.is(other)
    }
}

/// Read-only access to the text, so `&id` serves wherever `&str` is read.
impl std::ops::Deref for ApproverId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ApproverId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ApproverId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// Why a text is not an [`ApproverId`]: what was given, what is wrong, and the expected shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not an approver id: {problem}: write {}", given.escape_debug(), ApproverId::EXPECTED)]
pub struct ApproverIdError {
    /// The text given.
    pub given: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_names_and_kind_prefixed_names() {
        for good in [
            "alice",
            "human:alice",
            "human:alice@example.com",
            "oidc:auth0|5f1c",
            "human:mcp-client:stdio",
            "ops:dana",
            "human:a.b_c-d+e",
        ] {
            assert_eq!(
                ApproverId::parse(good).map(|id| id.into_string()),
                Ok(good.to_owned())
            );
        }
    }

    #[test]
    fn refuses_empty_parts_whitespace_and_other_characters_saying_the_shape() {
        for (bad, problem) in [
            ("", "it is empty"),
            (" ", "it is empty"),
            ("human:", "a part before or after a `:` is empty"),
            (":", "a part before or after a `:` is empty"),
            (":alice", "a part before or after a `:` is empty"),
            ("human::alice", "a part before or after a `:` is empty"),
            ("human: bob", "it contains whitespace"),
            ("human:bob\n", "it contains whitespace"),
            (
                "human:b\u{f3}b",
                "it contains a character other than ASCII letters and digits and `. _ - @ + | :`",
            ),
            (
                "human:\"bob\"",
                "it contains a character other than ASCII letters and digits and `. _ - @ + | :`",
            ),
        ] {
            let error = ApproverId::parse(bad).unwrap_err();
            assert_eq!(error.problem, problem, "{bad:?}");
            let message = error.to_string();
            assert!(
                message.contains("`human:alice`") && message.contains("is not an approver id"),
                "{message}"
            );
        }
        assert!(ApproverId::parse(&"a".repeat(257)).is_err());
        assert!(ApproverId::parse(&"a".repeat(256)).is_ok());
    }
}
