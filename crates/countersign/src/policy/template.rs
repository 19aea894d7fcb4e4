//! Effect-key and resource templates: `refund:{payment_id}`.

use std::fmt;

use serde_json::Value;

/// A parsed template: literal text with `{field}` placeholders.
///
/// A field is an argument name or a dotted path into nested objects (`customer.id`), matching
/// `[A-Za-z_][A-Za-z0-9_.]*` with no empty segment. Braces have no escape: every `{` opens a
/// field and every `}` closes one. Templates are compared and hashed by their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(String),
}

impl Template {
    /// Parse `text` into a template.
    ///
    /// # Errors
    /// [`TemplateError::Empty`], [`TemplateError::Unbalanced`], [`TemplateError::EmptyField`]
    /// or [`TemplateError::InvalidField`]; positions are 1-based character offsets in `text`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        if text.is_empty() {
            return Err(TemplateError::Empty);
        }
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut field: Option<(usize, String)> = None;
        for (index, character) in text.chars().enumerate() {
            let position = index + 1;
            match (&mut field, character) {
                (None, '{') => {
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    field = Some((position, String::new()));
                }
                (None, '}') => return Err(TemplateError::Unbalanced { position }),
                (None, other) => literal.push(other),
                (Some(_), '{') => return Err(TemplateError::Unbalanced { position }),
                (Some((start, name)), '}') => {
                    if name.is_empty() {
                        return Err(TemplateError::EmptyField { position: *start });
                    }
                    if !is_field_path(name) {
                        return Err(TemplateError::InvalidField {
                            field: std::mem::take(name),
                            position: *start,
                        });
                    }
                    parts.push(Part::Field(std::mem::take(name)));
                    field = None;
                }
                (Some((_, name)), other) => name.push(other),
            }
        }
        if let Some((start, _)) = field {
            return Err(TemplateError::Unbalanced { position: start });
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template {
            text: text.to_owned(),
            parts,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The field names in order of appearance (a field used twice appears twice).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Field(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Render against canonical arguments (a JSON object).
    ///
    /// Strings are inserted as they are (no quoting, no escaping); numbers in their canonical
    /// JSON (RFC 8785) form, so `1.0` renders as `1`; booleans as `true` or `false`.
    ///
    /// # Errors
    /// [`TemplateError::MissingField`] when a field is absent (or `arguments` is not an
    /// object), [`TemplateError::NullField`] for `null`, [`TemplateError::NonScalarField`] for
    /// an array or object, [`TemplateError::UnrepresentableNumber`] for a number canonical JSON
    /// refuses.
    pub fn render(&self, arguments: &Value) -> Result<String, TemplateError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Field(name) => match lookup(arguments, name) {
                    None => {
                        return Err(TemplateError::MissingField {
                            field: name.clone(),
                        });
                    }
                    Some(Value::Null) => {
                        return Err(TemplateError::NullField {
                            field: name.clone(),
                        });
                    }
                    Some(Value::String(text)) => out.push_str(text),
                    Some(Value::Bool(flag)) => out.push_str(if *flag { "true" } else { "false" }),
                    Some(number @ Value::Number(_)) => {
                        let canonical = crate::canonical::to_canonical(number).map_err(|_| {
                            TemplateError::UnrepresentableNumber {
                                field: name.clone(),
                            }
                        })?;
                        out.push_str(canonical.as_str());
                    }
                    Some(Value::Array(_)) => {
                        return Err(TemplateError::NonScalarField {
                            field: name.clone(),
                            found: "an array",
                        });
                    }
                    Some(Value::Object(_)) => {
                        return Err(TemplateError::NonScalarField {
                            field: name.clone(),
                            found: "an object",
                        });
                    }
                },
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.text)
    }
}

/// A template that does not parse, or cannot be rendered against given arguments.
///
/// Parse errors carry a 1-based character position in the template text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template is the empty string.
    #[error("the template is empty")]
    Empty,
    /// A `{` without its `}`, a `}` without its `{`, or a `{` inside a field.
    #[error("unbalanced brace at character {position}: write each field as `{{name}}`")]
    Unbalanced {
        /// 1-based character position.
        position: usize,
    },
    /// `{}`.
    #[error("empty field `{{}}` at character {position}: name an argument inside the braces")]
    EmptyField {
        /// 1-based character position of the `{`.
        position: usize,
    },
    /// A field name not matching `[A-Za-z_][A-Za-z0-9_.]*` (or with an empty dotted segment).
    #[error(
        "invalid field name `{field}` at character {position}: use letters, digits, `_` and `.` between names, starting with a letter or `_`"
    )]
    InvalidField {
        /// The name as written.
        field: String,
        /// 1-based character position of the `{`.
        position: usize,
    },
    /// The arguments have no such field.
    #[error("missing argument `{field}` needed by the template")]
    MissingField {
        /// The field.
        field: String,
    },
    /// The field is `null`.
    #[error("argument `{field}` is null: the template needs a string, number or boolean")]
    NullField {
        /// The field.
        field: String,
    },
    /// The field is an array or object.
    #[error("argument `{field}` is {found}: the template needs a string, number or boolean")]
    NonScalarField {
        /// The field.
        field: String,
        /// `an array` or `an object`.
        found: &'static str,
    },
    /// The field is a number that canonical JSON refuses.
    #[error("argument `{field}` is a number without a canonical form")]
    UnrepresentableNumber {
        /// The field.
        field: String,
    },
    /// A template declared in code names a secret argument (a policy file doing so is a load
    /// error): secrets never become keys or resources.
    #[error(
        "template `{template}` names the secret argument `{field}`: secrets never become effect keys or resources; key on a stable field instead"
    )]
    SecretField {
        /// The template text.
        template: String,
        /// The secret argument.
        field: String,
    },
    /// The rendered effect key is not usable (empty, or longer than 512 bytes).
    #[error("{message}")]
    BadKey {
        /// What is wrong.
        message: String,
    },
}

impl TemplateError {
    /// A stable, machine-readable reason code, such as `missing_field`.
    pub fn reason(&self) -> &'static str {
        match self {
            TemplateError::Empty => "empty",
            TemplateError::Unbalanced { .. } => "unbalanced",
            TemplateError::EmptyField { .. } => "empty_field",
            TemplateError::InvalidField { .. } => "invalid_field",
            TemplateError::MissingField { .. } => "missing_field",
            TemplateError::NullField { .. } => "null_field",
            TemplateError::NonScalarField { .. } => "non_scalar_field",
            TemplateError::UnrepresentableNumber { .. } => "unrepresentable_number",
            TemplateError::SecretField { .. } => "secret_field",
            TemplateError::BadKey { .. } => "bad_key",
        }
    }
}

/// Whether `path` is a field path: `[A-Za-z_][A-Za-z0-9_.]*` without empty segments.
pub(crate) fn is_field_path(path: &str) -> bool {
    let mut characters = path.chars();
    let starts_well =
        matches!(characters.next(), Some(first) if first.is_ascii_alphabetic() || first == '_');
    starts_well
        && path.chars().all(|character| {
            character.is_ascii_alphanumeric() || character == '_' || character == '.'
        })
        && path.split('.').all(|segment| !segment.is_empty())
}

/// Follow a dotted path through nested objects; `None` when any step is missing or not an
/// object.
pub(crate) fn lookup<'a>(arguments: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = arguments;
    for segment in path.split('.') {
        current = current.as_object()?.get(segment)?;
    }
    Some(current)
}
