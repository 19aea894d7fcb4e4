//! The `approval` block of an entry or a rule, and the policy's `approvers` directory and
//! `approver_keys`: who may answer, how many must, with what identity.

use super::*;

pub(super) const REQUIREMENTS: &[&str] = &["asserted", "authenticated"];

/// The largest `quorum` the loader accepts.
pub(super) const MAX_QUORUM: i128 = 100;

/// An `approval` block (of an entry or a rule) and its document for the fingerprint.
pub(super) fn approval_spec(node: &Node) -> Result<(ApprovalSpec, Value), LoadError> {
    let entries = mapping(
        node,
        "approval",
        "a mapping such as `{ approvers: [\"group:finance\"], quorum: 2 }`",
    )?;
    check_keys(entries, KeyPlace::Approval)?;
    let approvers = match get(entries, "approvers") {
        Some(node) => {
            let approvers = identity_patterns(node, "approvers")?;
            if approvers.is_empty() {
                return Err(error_at(node, LoadErrorKind::EmptyApprovers));
            }
            approvers
        }
        None => vec!["*".to_owned()],
    };
    let quorum = match get(entries, "quorum") {
        None => 1,
        Some(node) => match &node.value {
            NodeValue::Integer(value) if (1..=MAX_QUORUM).contains(value) => {
                u32::try_from(*value).unwrap_or(1)
            }
            other => {
                let found = match other {
                    NodeValue::Integer(value) => format!("`{value}`"),
                    NodeValue::Float(value) => format!("`{value}`"),
                    // `"2"` is text, not the number 2: show the quotes, so the message does
                    // not read as refusing a valid count.
                    NodeValue::String(text) => format!("{text:?} (quoted, so text)"),
                    _ => format!("({})", node.value.kind_name()),
                };
                return Err(error_at(node, LoadErrorKind::InvalidQuorum { found }));
            }
        },
    };
    let distinct_from_requester = match get(entries, "distinct_from_requester") {
        None => false,
        Some(flag) => match &flag.value {
            NodeValue::Bool(flag) => *flag,
            _ => {
                return Err(wrong_type(
                    flag,
                    "distinct_from_requester",
                    "`true` or `false`",
                ));
            }
        },
    };
    let require = match get(entries, "require") {
        None => Requirement::Asserted,
        Some(node) => match string(node, "require", "`asserted` or `authenticated`")? {
            "asserted" => Requirement::Asserted,
            "authenticated" => Requirement::Authenticated,
            other => {
                return Err(error_at(
                    node,
                    LoadErrorKind::UnknownRequirement {
                        found: other.to_owned(),
                        suggestion: closest(other, REQUIREMENTS),
                    },
                ));
            }
        },
    };
    let ttl = get(entries, "ttl").map(duration).transpose()?;
    let mut document = json!({
        "approvers": approvers,
        "quorum": quorum,
        "distinct_from_requester": distinct_from_requester,
        "require": require.as_str(),
    });
    if let (Some(ttl), Value::Object(map)) = (ttl, &mut document) {
        map.insert("ttl_seconds".into(), json!(ttl.as_secs()));
    }
    Ok((
        ApprovalSpec {
            approvers,
            quorum,
            distinct_from_requester,
            require,
            ttl,
        },
        document,
    ))
}

/// A list of identity patterns (`approvers`, `resolvers`): `human:alice`, `human:*`,
/// `group:finance`, `*`.
pub(super) fn identity_patterns(node: &Node, key: &str) -> Result<Vec<String>, LoadError> {
    let expected = "a list of identities such as `human:alice`, `human:*` or `group:finance`";
    let NodeValue::Sequence(items) = &node.value else {
        return Err(wrong_type(node, key, expected));
    };
    let mut patterns = Vec::with_capacity(items.len());
    for item in items {
        let text = string(item, key, expected)?;
        check_identity(item, text, true)?;
        if !patterns.iter().any(|known: &String| known == text) {
            patterns.push(text.to_owned());
        }
    }
    Ok(patterns)
}

/// An identity (or, with `pattern`, an identity pattern): non-empty, no whitespace or control
/// characters, at most one `*` and only at the end, and `group:` followed by a name.
pub(super) fn check_identity(node: &Node, text: &str, pattern: bool) -> Result<(), LoadError> {
    let fail = |expected| {
        Err(error_at(
            node,
            LoadErrorKind::InvalidApprover {
                found: text.to_owned(),
                expected,
            },
        ))
    };
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return fail("an identity is a non-empty name without spaces, such as `human:alice`");
    }
    let stars = text.matches('*').count();
    if (!pattern && stars > 0) || stars > 1 || (stars == 1 && !text.ends_with('*')) {
        return fail(if pattern {
            "`*` may appear once, at the end, as in `human:*`"
        } else {
            "a directory names one identity: no `*`"
        });
    }
    if text == "group:" {
        return fail("`group:` must be followed by a group name, as in `group:finance`");
    }
    Ok(())
}

/// The top-level `directory`: identity → list of group names.
pub(super) fn directory(node: &Node) -> Result<BTreeMap<String, Vec<String>>, LoadError> {
    let entries = mapping(
        node,
        "directory",
        "a mapping of identities to lists of groups, such as `human:alice: [finance]`",
    )?;
    let mut directory = BTreeMap::new();
    for (key, value) in entries {
        let id = key_text(key, "directory")?;
        check_identity(key, id, false)?;
        if id.starts_with("group:") {
            return Err(error_at(
                key,
                LoadErrorKind::InvalidApprover {
                    found: id.to_owned(),
                    expected: "the directory lists people and agents, not groups",
                },
            ));
        }
        let expected = "a list of group names such as `[finance, ops]`";
        let NodeValue::Sequence(items) = &value.value else {
            return Err(wrong_type(value, id, expected));
        };
        let mut groups = Vec::with_capacity(items.len());
        for item in items {
            let group = string(item, id, expected)?;
            if group.starts_with("group:") || group.contains('*') {
                return Err(error_at(
                    item,
                    LoadErrorKind::InvalidApprover {
                        found: group.to_owned(),
                        expected: "a group name alone, such as `finance` (no `group:` prefix, no `*`)",
                    },
                ));
            }
            check_identity(item, group, false)?;
            groups.push(group.to_owned());
        }
        groups.sort();
        groups.dedup();
        directory.insert(id.to_owned(), groups);
    }
    Ok(directory)
}

/// The top-level `approvers` block: `keys`, a list of Ed25519 public keys, each inline
/// (`ed25519:` + base64url) or a public-key file (relative to the policy's folder). Returns
/// them in inline form.
pub(super) fn approver_keys(node: &Node, base: Option<&Path>) -> Result<Vec<String>, LoadError> {
    let entries = mapping(node, "approvers", "a mapping with `keys`")?;
    check_keys(entries, KeyPlace::Approvers)?;
    let Some(keys_node) = get(entries, "keys") else {
        return Ok(Vec::new());
    };
    let expected = "a list of public keys (`ed25519:...`) or public-key files";
    let NodeValue::Sequence(items) = &keys_node.value else {
        return Err(wrong_type(keys_node, "keys", expected));
    };
    let mut keys = Vec::with_capacity(items.len());
    for item in items {
        let text = string(item, "keys", expected)?;
        let parsed = if text.starts_with("ed25519:") || text.starts_with("-----BEGIN") {
            crate::token::PublicKey::parse(text)
        } else {
            let path = Path::new(text);
            let path = match base {
                Some(base) if path.is_relative() => base.join(path),
                _ => path.to_path_buf(),
            };
            crate::token::PublicKey::load(&path)
        };
        let key = parsed.map_err(|error| {
            error_at(
                item,
                LoadErrorKind::InvalidKey {
                    key: text.to_owned(),
                    message: error.to_string(),
                },
            )
        })?;
        let inline = key.to_string();
        if !keys.contains(&inline) {
            keys.push(inline);
        }
    }
    Ok(keys)
}
