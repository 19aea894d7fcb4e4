//! [`Principal`]: who is acting.

use std::fmt;

/// Who is acting: the identity an [`crate::IdentityProvider`] vouches for.
///
/// Shape: a non-empty string of at most 256 characters with no control characters, such as
/// `agent:support-bot` or `user:42`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Principal(String);

impl Principal {
    /// A principal with the identifier `id`.
    ///
    /// # Errors
    ///
    /// [`PrincipalError`] when `id` is empty, longer than 256 characters or holds a control
    /// character.
    pub fn new(id: impl Into<String>) -> Result<Principal, PrincipalError> {
        let id = id.into();
        if id.trim().is_empty() {
            return Err(PrincipalError::Empty);
        }
        if id.chars().count() > 256 {
            return Err(PrincipalError::TooLong {
                length: id.chars().count(),
            });
        }
        if id.chars().any(char::is_control) {
            return Err(PrincipalError::ControlCharacter { id });
        }
        Ok(Principal(id))
    }

    /// Wrap a principal the kernel stored itself, as it is: the lenient read path for rows and
    /// receipts an older version wrote (see [`crate::id`]). Never for an identity from outside:
    /// use [`Principal::new`].
    pub fn from_stored(id: impl Into<String>) -> Principal {
        Principal(id.into())
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lenient, like [`Principal::from_stored`]: `Deserialize` reads records the kernel wrote.
impl<'de> serde::Deserialize<'de> for Principal {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(deserializer).map(Principal)
    }
}

/// Read-only access to the text, so `&id` serves wherever `&str` is read.
impl std::ops::Deref for Principal {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Principal {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Principal {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Principal {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Principal {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a string is not a valid [`Principal`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    /// The identifier is empty or only whitespace.
    #[error("principal is empty: give an identifier such as `agent:support-bot`")]
    Empty,
    /// The identifier is longer than 256 characters.
    #[error("principal is {length} characters long: the limit is 256")]
    TooLong {
        /// Its length in characters.
        length: usize,
    },
    /// The identifier holds a control character.
    #[error("principal `{}` holds a control character", id.escape_debug())]
    ControlCharacter {
        /// The identifier as given.
        id: String,
    },
}
