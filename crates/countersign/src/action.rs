//! Actions: what an agent asked to do, in canonical form, and its hash.
//!
//! An [`Action`] is built by [`crate::Control`] only: the name the caller gave, the arguments in
//! RFC 8785 canonical form ([`canonical`]), the principal from the control's identity provider
//! (never from model output), and the resource, environment and effect key resolved from the
//! policy. Its [`ActionHash`] is what approvals are bound to.

pub mod canonical;

use crate::effect::EffectKey;
use canonical::{CanonicalError, CanonicalJson};

/// The schema string mixed into every action hash.
///
/// Changing what is hashed means changing this string: stored approvals then stop matching,
/// which is the safe direction.
pub const ACTION_SCHEMA: &str = "countersign.action/v1";

/// The text that replaces a secret argument's value in hashes and evidence.
pub const REDACTED: &str = "[redacted]";

pub use crate::id::{ActionHash, Principal, PrincipalError};

/// One action: a tool call in canonical form, bound to its principal and environment.
#[derive(Clone, Debug)]
pub struct Action {
    pub(crate) name: String,
    pub(crate) arguments: CanonicalJson,
    pub(crate) redacted_arguments: CanonicalJson,
    pub(crate) principal: Principal,
    pub(crate) resource: Option<String>,
    pub(crate) environment: String,
    pub(crate) effect_key: Option<EffectKey>,
    pub(crate) hash: ActionHash,
}

impl Action {
    /// Build an action from canonical arguments; `secret_arguments` are argument paths (dotted
    /// for nesting) whose values are replaced by `"[redacted]"` before hashing and in evidence.
    pub(crate) fn new(
        name: &str,
        arguments: CanonicalJson,
        secret_arguments: &[String],
        principal: Principal,
        resource: Option<String>,
        environment: &str,
        effect_key: Option<EffectKey>,
    ) -> Result<Action, CanonicalError> {
        let redacted_arguments = if secret_arguments.is_empty() {
            arguments.clone()
        } else {
            let mut value = arguments.to_value();
            for path in secret_arguments {
                redact_path(&mut value, path);
            }
            canonical::to_canonical(&value)?
        };
        let hash = action_hash(
            name,
            &redacted_arguments,
            &principal,
            resource.as_deref(),
            environment,
        )?;
        Ok(Action {
            name: name.to_owned(),
            arguments,
            redacted_arguments,
            principal,
            resource,
            environment: environment.to_owned(),
            effect_key,
            hash,
        })
    }

    /// The action name, such as `stripe.refund`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The canonical arguments: exactly what the executor receives.
    pub fn arguments(&self) -> &CanonicalJson {
        &self.arguments
    }

    /// The canonical arguments with every secret argument replaced by `"[redacted]"`: what is
    /// hashed, shown to approvers and written to evidence.
    pub fn redacted_arguments(&self) -> &CanonicalJson {
        &self.redacted_arguments
    }

    /// The principal the identity provider vouched for.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The resource, rendered from the policy's resource template, if any.
    pub fn resource(&self) -> Option<&str> {
        self.resource.as_deref()
    }

    /// The environment (from the policy, or the control's override).
    pub fn environment(&self) -> &str {
        &self.environment
    }

    /// The effect key, rendered from the effect template, if any.
    pub fn effect_key(&self) -> Option<&EffectKey> {
        self.effect_key.as_ref()
    }

    /// The action hash approvals are bound to.
    pub fn hash(&self) -> &ActionHash {
        &self.hash
    }
}

/// Compute an action hash from its parts; `arguments` must already be redacted.
///
/// # Errors
///
/// Never in practice: every part is a string or canonical JSON. The error type is kept so a
/// future part that can fail does not change the signature.
pub fn action_hash(
    name: &str,
    arguments: &CanonicalJson,
    principal: &Principal,
    resource: Option<&str>,
    environment: &str,
) -> Result<ActionHash, CanonicalError> {
    // The arguments are already canonical, so the RFC 8785 text of the hashed object is built
    // around them instead of parsing and re-serializing them on every call. Its keys are ASCII
    // and written in sorted order; strings get JCS escaping from the canonical writer.
    // `action_hash_matches_the_generic_canonical_form` pins this to `to_canonical`.
    let mut text = String::with_capacity(
        arguments.as_str().len()
            + name.len()
            + principal.as_str().len()
            + resource.map_or(4, str::len)
            + environment.len()
            + 128,
    );
    text.push_str("{\"arguments\":");
    text.push_str(arguments.as_str());
    text.push_str(",\"environment\":");
    canonical::write_string(environment, &mut text);
    text.push_str(",\"name\":");
    canonical::write_string(name, &mut text);
    text.push_str(",\"principal\":");
    canonical::write_string(principal.as_str(), &mut text);
    text.push_str(",\"resource\":");
    match resource {
        Some(resource) => canonical::write_string(resource, &mut text),
        None => text.push_str("null"),
    }
    text.push_str(",\"schema\":");
    canonical::write_string(ACTION_SCHEMA, &mut text);
    text.push('}');
    Ok(ActionHash::computed(canonical::sha256_prefixed(
        text.as_bytes(),
    )))
}

/// Replace the value at a dotted `path` with `"[redacted]"`, if present.
pub(crate) fn redact_path(value: &mut serde_json::Value, path: &str) {
    let mut current = value;
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        let serde_json::Value::Object(map) = current else {
            return;
        };
        if segments.peek().is_none() {
            if let Some(slot) = map.get_mut(segment) {
                *slot = serde_json::Value::String(REDACTED.to_owned());
            }
            return;
        }
        match map.get_mut(segment) {
            Some(next) => current = next,
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn action(arguments: serde_json::Value, secrets: &[&str]) -> Action {
        let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        Action::new(
            "pay",
            canonical::to_canonical(&arguments).unwrap(),
            &secrets,
            Principal::new("agent:a").unwrap(),
            None,
            "test",
            None,
        )
        .unwrap()
    }

    /// The hand-built canonical text is exactly what the generic canonicalizer gives.
    #[test]
    fn action_hash_matches_the_generic_canonical_form() {
        #[derive(serde::Serialize)]
        struct Hashed<'a> {
            schema: &'a str,
            name: &'a str,
            arguments: serde_json::Value,
            principal: &'a str,
            resource: Option<&'a str>,
            environment: &'a str,
        }
        let arguments =
            canonical::to_canonical(&json!({"b": [1.5, "\u{1F600}"], "a": {"q\"": null}})).unwrap();
        let principal = Principal::new("agent:\"quoted\" é").unwrap();
        for resource in [None, Some("payment:pi_1\n")] {
            let generic = canonical::to_canonical(&Hashed {
                schema: ACTION_SCHEMA,
                name: "stripe.refund",
                arguments: arguments.to_value(),
                principal: principal.as_str(),
                resource,
                environment: "prod\u{7f}",
            })
            .unwrap()
            .sha256();
            let built = action_hash(
                "stripe.refund",
                &arguments,
                &principal,
                resource,
                "prod\u{7f}",
            )
            .unwrap();
            assert_eq!(built.as_str(), generic);
        }
    }

    #[test]
    fn hash_has_sha256_shape() {
        let hash = action(json!({"a": 1}), &[]).hash().as_str().to_owned();
        assert!(hash.starts_with("sha256:"));
        assert_eq!(hash.len(), 7 + 64);
        assert!(
            hash[7..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn one_and_one_point_zero_are_one_action() {
        assert_eq!(
            action(json!({"amount": 1}), &[]).hash(),
            action(json!({"amount": 1.0}), &[]).hash()
        );
    }

    #[test]
    fn hash_binds_every_part() {
        let base = action(json!({"amount": 1}), &[]);
        let other_principal = Action::new(
            "pay",
            base.arguments.clone(),
            &[],
            Principal::new("agent:b").unwrap(),
            None,
            "test",
            None,
        )
        .unwrap();
        let other_environment = Action::new(
            "pay",
            base.arguments.clone(),
            &[],
            base.principal.clone(),
            None,
            "production",
            None,
        )
        .unwrap();
        let other_resource = Action::new(
            "pay",
            base.arguments.clone(),
            &[],
            base.principal.clone(),
            Some("payment:1".into()),
            "test",
            None,
        )
        .unwrap();
        let other_name = Action::new(
            "refund",
            base.arguments.clone(),
            &[],
            base.principal.clone(),
            None,
            "test",
            None,
        )
        .unwrap();
        let other_amount = action(json!({"amount": 2}), &[]);
        let hashes = [
            base.hash(),
            other_principal.hash(),
            other_environment.hash(),
            other_resource.hash(),
            other_name.hash(),
            other_amount.hash(),
        ];
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn secret_arguments_are_redacted_and_excluded_from_the_hash() {
        let first = action(json!({"order": "o1", "auth_token": "t-1"}), &["auth_token"]);
        let second = action(json!({"order": "o1", "auth_token": "t-2"}), &["auth_token"]);
        assert_eq!(first.hash(), second.hash());
        assert!(!first.redacted_arguments().as_str().contains("t-1"));
        assert!(first.redacted_arguments().as_str().contains(REDACTED));
        // The executor still receives the real value.
        assert!(first.arguments().as_str().contains("t-1"));
    }

    #[test]
    fn redacts_nested_paths_and_ignores_missing_ones() {
        let mut value = json!({"card": {"token": "x", "last4": "4242"}});
        redact_path(&mut value, "card.token");
        redact_path(&mut value, "card.missing.deeper");
        redact_path(&mut value, "absent");
        assert_eq!(value, json!({"card": {"token": REDACTED, "last4": "4242"}}));
    }

    #[test]
    fn refuses_bad_principals() {
        assert_eq!(Principal::new("  "), Err(PrincipalError::Empty));
        assert!(matches!(
            Principal::new("a\u{0}b"),
            Err(PrincipalError::ControlCharacter { .. })
        ));
        assert!(matches!(
            Principal::new("x".repeat(257)),
            Err(PrincipalError::TooLong { .. })
        ));
    }
}
