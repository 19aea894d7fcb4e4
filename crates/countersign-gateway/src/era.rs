//! MCP revisions: the handshake era (2025-03-26, 2025-06-18, 2025-11-25: `initialize`, sessions)
//! and the modern era (2026-07-28: every request carries its version, identity and capabilities
//! in `_meta`; no sessions; `server/discover`; multi round-trip requests).
//!
//! The rules follow the 2026-07-28 specification: "Versioning and Compatibility" (a dual-era
//! server selects the era from how the client opens: a request carrying the modern `_meta` is
//! served statelessly, `initialize` selects the handshake era), "Overview / `_meta`" (a request
//! missing a required field is refused with -32602, HTTP 400) and "Streamable HTTP / Request
//! Metadata" (`MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` must match the body, else
//! HTTP 400 with -32020 `HeaderMismatch`; an unsupported version is HTTP 400 with -32022).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// The modern revision the gateway speaks.
pub const MODERN: &str = "2026-07-28";

/// The handshake-era revisions the gateway relays, newest first.
pub const LEGACY: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// Every revision the gateway serves, newest first (`server/discover`'s `supportedVersions`).
pub const SUPPORTED: [&str; 4] = [MODERN, LEGACY[0], LEGACY[1], LEGACY[2]];

/// `_meta` key of a request's protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a request's client capabilities.
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a request's client identity.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key naming the `subscriptions/listen` request a notification belongs to.
pub const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
/// The prefix MCP reserves for its own `_meta` keys.
const META_RESERVED: &str = "io.modelcontextprotocol/";

/// JSON-RPC code of a header that is missing or does not match the body (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC code of a protocol version the server does not implement (2026-07-28).
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// The protocol version a request declares in `params._meta`, if it declares one.
pub fn declared_version(message: &Value) -> Option<&Value> {
    message.pointer("/params/_meta")?.get(META_VERSION)
}

/// True when `version` is a revision of the modern era or one the gateway does not know as a
/// handshake revision (a later date, or anything else): such a request is judged by the modern
/// rules and refused with [`UNSUPPORTED_VERSION`] when the gateway does not speak it.
pub fn is_modern_shaped(version: &str) -> bool {
    !LEGACY.contains(&version) && version != "2024-11-05"
}

/// The error for a request declaring `requested`, which the gateway does not implement.
pub fn unsupported(requested: &str) -> Value {
    json!({
        "code": UNSUPPORTED_VERSION,
        "message": format!(
            "Unsupported protocol version `{}`: this gateway speaks {}: send one of them",
            countersign::evidence::printable(requested),
            SUPPORTED.join(", ")
        ),
        "data": {"supported": SUPPORTED, "requested": requested},
    })
}

/// Check a modern request's own `_meta`: a supported version and the required capabilities.
/// `Err` is the JSON-RPC error object to answer with.
pub fn check_request_meta(message: &Value) -> Result<(), Value> {
    let meta = message.pointer("/params/_meta");
    let version = meta.and_then(|meta| meta.get(META_VERSION));
    let Some(version) = version.and_then(Value::as_str) else {
        return Err(crate::wire::error_object(
            crate::codes::INVALID_PARAMS,
            format!(
                "invalid params: `params._meta[\"{META_VERSION}\"]` must be a string such as `{MODERN}`"
            ),
        ));
    };
    if version != MODERN {
        return Err(unsupported(version));
    }
    if !meta
        .and_then(|meta| meta.get(META_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Err(crate::wire::error_object(
            crate::codes::INVALID_PARAMS,
            format!(
                "invalid params: a {MODERN} request needs `params._meta[\"{META_CAPABILITIES}\"]` (an object, `{{}}` for none)"
            ),
        ));
    }
    Ok(())
}

/// Does a modern request's client declare `capability` (for example `elicitation`)?
pub fn declares(message: &Value, capability: &str) -> bool {
    message
        .pointer("/params/_meta")
        .and_then(|meta| meta.get(META_CAPABILITIES))
        .and_then(|capabilities| capabilities.get(capability))
        .is_some_and(|value| !value.is_null())
}

/// Remove the modern per-request fields (`io.modelcontextprotocol/*`) from `params._meta`, for
/// an upstream of the handshake era, which does not define them. An emptied `_meta` goes.
pub fn strip_modern_meta(params: &mut Value) {
    let Some(object) = params.as_object_mut() else {
        return;
    };
    let emptied = match object.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.retain(|key, _| !key.starts_with(META_RESERVED));
            meta.is_empty()
        }
        None => false,
    };
    if emptied {
        object.remove("_meta");
    }
}

/// The `_meta` the gateway sends with its own requests to a modern upstream.
pub fn own_meta() -> Value {
    json!({
        META_VERSION: MODERN,
        META_CLIENT_INFO: {"name": "countersign-gateway", "version": env!("CARGO_PKG_VERSION")},
        META_CAPABILITIES: {},
    })
}

/// Add `resultType: "complete"` to a modern client's result that lacks one (a handshake-era
/// upstream never sends it; 2026-07-28 requires it on every result).
pub fn mark_complete(result: &mut Value) {
    if let Some(object) = result.as_object_mut() {
        object
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
    }
}

/// Complete the result of `method` for a modern client: [`mark_complete`], and for the results
/// 2026-07-28 makes cacheable (list results, `resources/read`) the required `ttlMs` and
/// `cacheScope` when the upstream gave none (`0`, `private`: not cached, not shared). A
/// `tools/list` is always `private`: the gateway filters it by policy.
pub fn complete_result(method: &str, result: &mut Value) {
    mark_complete(result);
    let cacheable = matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    );
    if let (true, Some(object)) = (cacheable, result.as_object_mut()) {
        object.entry("ttlMs").or_insert_with(|| json!(0));
        object
            .entry("cacheScope")
            .or_insert_with(|| json!("private"));
        if method == "tools/list" {
            object.insert("cacheScope".into(), json!("private"));
        }
    }
}

/// The `Mcp-Name` source of a request: `params.name` for `tools/call` and `prompts/get`,
/// `params.uri` for `resources/read`; `None` for other methods.
fn name_source<'a>(method: &str, message: &'a Value) -> Option<Option<&'a str>> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    Some(
        message
            .get("params")
            .and_then(|params| params.get(field))
            .and_then(Value::as_str),
    )
}

/// A header value as the body value it mirrors: the Base64 sentinel form
/// (`=?base64?…?=`) decoded, anything else as it is. `None` for an undecodable value.
fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// A header value the way a modern client sends it: as it is when plain visible ASCII, else the
/// Base64 sentinel form.
pub fn encode_header_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|byte| (0x20..0x7f).contains(&byte))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && (!value.starts_with("=?base64?") || !value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", STANDARD.encode(value))
    }
}

/// The request metadata headers a modern request carries over HTTP.
/// Empty for a message that declares no version in `_meta` (handshake era).
pub fn request_headers(message: &Value) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    let Some(version) = declared_version(message).and_then(Value::as_str) else {
        return headers;
    };
    headers.push(("mcp-protocol-version", version.to_owned()));
    if let Some(method) = crate::wire::method(message) {
        headers.push(("mcp-method", method.to_owned()));
        if let Some(Some(name)) = name_source(method, message) {
            headers.push(("mcp-name", encode_header_value(name)));
        }
    }
    headers
}

/// Why a modern HTTP request is refused before it reaches a session: the JSON-RPC error object
/// (HTTP 400 in every case).
///
/// `header` reads one request header (ASCII case-insensitive name); `None` when absent, and
/// `Some(None)` when present but not visible ASCII.
pub fn check_headers<'a>(
    message: &Value,
    header: impl Fn(&str) -> Option<Option<&'a str>>,
) -> Result<(), Value> {
    let mismatch = |text: String| crate::wire::error_object(HEADER_MISMATCH, text);
    let Some(sent_version) = header("mcp-protocol-version") else {
        return Err(mismatch(format!(
            "Header mismatch: the required `MCP-Protocol-Version` header is missing: send `MCP-Protocol-Version: {MODERN}`"
        )));
    };
    let Some(sent_version) = sent_version else {
        return Err(mismatch(
            "Header mismatch: `MCP-Protocol-Version` holds characters a header value cannot: send the version as plain text".into(),
        ));
    };
    if is_modern_shaped(sent_version) && sent_version != MODERN {
        return Err(unsupported(sent_version));
    }
    match declared_version(message) {
        Some(Value::String(body)) if body == sent_version => {}
        Some(Value::String(body)) => {
            return Err(mismatch(format!(
                "Header mismatch: `MCP-Protocol-Version` is `{}` but the body's `_meta[\"{META_VERSION}\"]` is `{}`: send the same version in both",
                countersign::evidence::printable(sent_version),
                countersign::evidence::printable(body)
            )));
        }
        _ => check_request_meta(message)?,
    }
    let method = crate::wire::method(message).unwrap_or_default();
    match header("mcp-method") {
        None => {
            return Err(mismatch(format!(
                "Header mismatch: the required `Mcp-Method` header is missing: send `Mcp-Method: {}`",
                countersign::evidence::printable(method)
            )));
        }
        Some(sent) if sent == Some(method) => {}
        Some(sent) => {
            return Err(mismatch(format!(
                "Header mismatch: `Mcp-Method` is `{}` but the body's method is `{}`: send the same method in both",
                countersign::evidence::printable(sent.unwrap_or("(not text)")),
                countersign::evidence::printable(method)
            )));
        }
    }
    if let Some(body_name) = name_source(method, message) {
        // A body that names no target is the body's fault, whatever the headers say: no
        // `Mcp-Name` could match it (found by the `jsonrpc` fuzz target, issue #30).
        let Some(body_name) = body_name else {
            let field = if method == "resources/read" {
                "uri"
            } else {
                "name"
            };
            return Err(crate::wire::error_object(
                crate::codes::INVALID_PARAMS,
                format!(
                    "invalid params: `{method}` needs `params.{field}`, a string naming its target: send it, and the same in the `Mcp-Name` header"
                ),
            ));
        };
        let Some(sent) = header("mcp-name") else {
            return Err(mismatch(format!(
                "Header mismatch: `{method}` needs the `Mcp-Name` header naming its target: send it (Base64 sentinel form for names that are not plain ASCII)"
            )));
        };
        let decoded = sent.and_then(decode_header_value);
        if decoded.as_deref() != Some(body_name) {
            return Err(mismatch(format!(
                "Header mismatch: `Mcp-Name` is `{}` but the body names `{}`: send the same name in both",
                countersign::evidence::printable(sent.unwrap_or("(not text)")),
                countersign::evidence::printable(body_name)
            )));
        }
    }
    Ok(())
}

/// The `x-mcp-header` annotations of a tool's `inputSchema`: each header name (lowercase, as
/// `mcp-param-<name>`) and the chain of `properties` keys leading to its value. Only properties
/// reachable through `properties` alone count (2026-07-28, "Custom Headers from Tool
/// Parameters").
pub fn param_headers(input_schema: &Value) -> Vec<(String, Vec<String>)> {
    fn walk(schema: &Value, path: &mut Vec<String>, found: &mut Vec<(String, Vec<String>)>) {
        if path.len() > 32 {
            return;
        }
        if let Some(name) = schema.get("x-mcp-header").and_then(Value::as_str) {
            found.push((
                format!("mcp-param-{}", name.to_ascii_lowercase()),
                path.clone(),
            ));
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (key, property) in properties {
                path.push(key.clone());
                walk(property, path, found);
                path.pop();
            }
        }
    }
    let mut found = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut found);
    found.retain(|(_, path)| !path.is_empty());
    found
}

/// The `Mcp-Param-*` headers a client sends for `arguments` of a tool with the annotated
/// parameters `params`: one per value present (not `null`) and representable (string, integer
/// or boolean), encoded as [`encode_header_value`] says.
pub fn param_header_values(
    arguments: &Value,
    params: &[(String, Vec<String>)],
) -> Vec<(String, String)> {
    params
        .iter()
        .filter_map(|(name, path)| {
            let value = path
                .iter()
                .try_fold(arguments, |value, key| value.get(key))?;
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Bool(flag) => flag.to_string(),
                Value::Number(number) if number.is_i64() || number.is_u64() => number.to_string(),
                _ => return None,
            };
            Some((name.clone(), encode_header_value(&text)))
        })
        .collect()
}

/// Check the `Mcp-Param-*` headers of a `tools/call` against its arguments, for the annotated
/// parameters `params` ([`param_headers`]): a value present in the body needs its header with
/// the same value (decoded from the Base64 sentinel form; integers compared as numbers); a
/// header without a value in the body is a mismatch too. `Err` is the -32020 error object.
pub fn check_param_headers<'a>(
    arguments: &Value,
    params: &[(String, Vec<String>)],
    header: impl Fn(&str) -> Option<Option<&'a str>>,
) -> Result<(), Value> {
    let mismatch = |text: String| crate::wire::error_object(HEADER_MISMATCH, text);
    for (name, path) in params {
        let value = path
            .iter()
            .try_fold(arguments, |value, key| value.get(key))
            .filter(|value| !value.is_null());
        let sent = header(name);
        let expected = match value {
            None => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Bool(flag)) => Some(flag.to_string()),
            Some(Value::Number(number)) => Some(number.to_string()),
            Some(_) => {
                return Err(mismatch(format!(
                    "Header mismatch: the parameter mirrored into `{name}` is not a string, integer or boolean"
                )));
            }
        };
        match (expected, sent) {
            (None, None) => {}
            (Some(expected), Some(Some(sent))) => {
                let decoded = decode_header_value(sent);
                let equal = decoded.as_deref() == Some(expected.as_str())
                    || match (value.and_then(Value::as_i64), decoded.as_deref()) {
                        (Some(number), Some(text)) => text
                            .parse::<f64>()
                            .is_ok_and(|parsed| parsed == number as f64),
                        _ => false,
                    };
                if !equal {
                    return Err(mismatch(format!(
                        "Header mismatch: `{name}` does not match the argument it mirrors: send the argument's value in it"
                    )));
                }
            }
            (Some(_), _) => {
                return Err(mismatch(format!(
                    "Header mismatch: the call has a value for the parameter the tool mirrors into `{name}` but no such header: send it (list the tools again if the schema changed)"
                )));
            }
            (None, Some(_)) => {
                return Err(mismatch(format!(
                    "Header mismatch: `{name}` is sent but the call has no value for the parameter it mirrors: leave the header out"
                )));
            }
        }
    }
    Ok(())
}

/// The `Mcp-Param-*` headers of a 2026-07-28 request (checked for `tools/call` only), against
/// the arguments they mirror, as `params` (the tool's annotated parameters, from the
/// `tools/list` the session relayed) names them. Headers for a tool whose schema the gateway
/// has not seen (`params` is `None`) cannot be checked: refused, so that nothing routed on them
/// is trusted (the client lists the tools and sends again).
/// `sends_params`: the request carries at least one `Mcp-Param-*` header.
pub fn check_call_param_headers<'a>(
    message: &Value,
    params: Option<&[(String, Vec<String>)]>,
    sends_params: bool,
    header: impl Fn(&str) -> Option<Option<&'a str>>,
) -> Result<(), Value> {
    if crate::wire::method(message) != Some("tools/call") {
        return Ok(());
    }
    let Some(params) = params else {
        if sends_params {
            return Err(crate::wire::error_object(
                HEADER_MISMATCH,
                "Header mismatch: `Mcp-Param-*` headers for a tool this gateway has not listed cannot be checked: call `tools/list`, then send the call again",
            ));
        }
        return Ok(());
    };
    let arguments = message
        .pointer("/params/arguments")
        .cloned()
        .unwrap_or(Value::Null);
    check_param_headers(&arguments, params, header)
}

/// The `server/discover` result the gateway answers with: every revision it serves, and the
/// upstream's capabilities, identity and instructions as the upstream reported them.
pub fn discover_result(upstream: &Map<String, Value>) -> Value {
    let mut result = Map::new();
    result.insert("resultType".into(), json!("complete"));
    result.insert("supportedVersions".into(), json!(SUPPORTED));
    for key in ["capabilities", "serverInfo", "instructions"] {
        if let Some(value) = upstream.get(key) {
            result.insert(key.into(), value.clone());
        }
    }
    let capabilities = result
        .entry("capabilities")
        .or_insert_with(|| json!({"tools": {}}));
    crate::tasks::strip_capabilities(capabilities);
    // What a principal may see depends on the policy: never cached, never shared.
    result.insert("ttlMs".into(), json!(0));
    result.insert("cacheScope".into(), json!("private"));
    if let Some(server_info) = upstream.get("serverInfo") {
        result.insert(
            "_meta".into(),
            json!({ "io.modelcontextprotocol/serverInfo": server_info }),
        );
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": {},
            "_meta": {META_VERSION: MODERN, META_CAPABILITIES: {}}}})
    }

    fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<Option<&'a str>> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| Some(*value))
        }
    }

    #[test]
    fn matching_headers_pass_and_each_mismatch_is_refused_with_the_specs_code() {
        let ok = [
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "write"),
        ];
        assert_eq!(check_headers(&call("write"), headers(&ok)), Ok(()));
        let code = |pairs: &[(&str, &str)], message: &Value| {
            check_headers(message, headers(pairs)).expect_err("refused")["code"]
                .as_i64()
                .expect("code")
        };
        assert_eq!(code(&ok, &call("delete")), HEADER_MISMATCH);
        assert_eq!(code(&ok[..2], &call("write")), HEADER_MISMATCH);
        assert_eq!(code(&ok[1..], &call("write")), HEADER_MISMATCH);
        let other_method = [ok[0], ("Mcp-Method", "tools/list"), ok[2]];
        assert_eq!(code(&other_method, &call("write")), HEADER_MISMATCH);
        let later = [("MCP-Protocol-Version", "2027-01-01"), ok[1], ok[2]];
        assert_eq!(code(&later, &call("write")), UNSUPPORTED_VERSION);
        let older_header = [("MCP-Protocol-Version", "2025-06-18"), ok[1], ok[2]];
        assert_eq!(code(&older_header, &call("write")), HEADER_MISMATCH);
    }

    #[test]
    fn a_body_that_names_no_target_is_invalid_params_not_a_header_mismatch() {
        // fuzz/regressions/jsonrpc/issue30-modern-call-without-name: the headers the gateway
        // sends for such a body failed its own check as a header mismatch.
        let ok = [
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "write"),
        ];
        let mut nameless = call("write");
        nameless["params"]
            .as_object_mut()
            .expect("params")
            .remove("name");
        for pairs in [&ok[..], &ok[..2]] {
            let error = check_headers(&nameless, headers(pairs)).expect_err("refused");
            assert_eq!(
                error["code"],
                json!(crate::codes::INVALID_PARAMS),
                "{error}"
            );
            assert!(
                error["message"]
                    .as_str()
                    .is_some_and(|message| message.contains("`params.name`")),
                "{error}"
            );
        }
        let mut numbered = call("write");
        numbered["params"]["name"] = json!(7);
        assert_eq!(
            check_headers(&numbered, headers(&ok)).expect_err("refused")["code"],
            json!(crate::codes::INVALID_PARAMS)
        );
    }

    #[test]
    fn a_base64_sentinel_name_is_decoded_before_comparing() {
        let name = "écrire";
        let encoded = encode_header_value(name);
        assert!(encoded.starts_with("=?base64?"), "{encoded}");
        let pairs = [
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", encoded.as_str()),
        ];
        assert_eq!(check_headers(&call(name), headers(&pairs)), Ok(()));
        assert!(check_headers(&call("ecrire"), headers(&pairs)).is_err());
    }

    #[test]
    fn mirrored_parameters_must_match_their_headers() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limits": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "items": {"type": "array", "items": {"type": "string", "x-mcp-header": "Hidden"}}}});
        let params = param_headers(&schema);
        assert_eq!(params.len(), 2, "{params:?}");
        let arguments = json!({"region": "us-west1", "limits": {"n": 42}});
        let check = |pairs: &[(&'static str, &'static str)]| {
            check_param_headers(&arguments, &params, headers(pairs))
        };
        assert_eq!(
            check(&[("mcp-param-region", "us-west1"), ("mcp-param-n", "42")]),
            Ok(())
        );
        assert_eq!(
            check(&[("mcp-param-region", "us-west1"), ("mcp-param-n", "42.0")]),
            Ok(())
        );
        assert!(check(&[("mcp-param-region", "eu-west1"), ("mcp-param-n", "42")]).is_err());
        assert!(check(&[("mcp-param-n", "42")]).is_err());
    }

    #[test]
    fn modern_fields_are_stripped_for_an_older_upstream_and_others_kept() {
        let mut params = json!({"name": "t", "_meta": {META_VERSION: MODERN, "progressToken": 3}});
        strip_modern_meta(&mut params);
        assert_eq!(params, json!({"name": "t", "_meta": {"progressToken": 3}}));
        let mut params = json!({"name": "t", "_meta": {META_VERSION: MODERN}});
        strip_modern_meta(&mut params);
        assert_eq!(params, json!({"name": "t"}));
    }
}
