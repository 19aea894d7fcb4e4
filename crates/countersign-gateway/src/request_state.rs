//! The gateway's `requestState` for MCP 2026-07-28 multi round-trip requests (MRTR): the
//! approval a `tools/call` waits for travels through the client and back, so it is
//! integrity-protected.
//!
//! The specification (2026-07-28, "Multi Round-Trip Requests", server requirements) treats
//! `requestState` as attacker-controlled input: when it influences authorization it MUST be
//! integrity-protected and state that fails verification MUST be rejected; to bound replay it
//! SHOULD name the principal, a short expiry and the originating request. Ours is
//! `cs1.<payload>.<tag>`: `payload` is base64url (no padding) of a JSON object with `principal`,
//! `request_id` (the approval request, `apr_…`), `action_hash` (`sha256:…`, the exact call),
//! and `exp` (Unix seconds); `tag` is base64url of HMAC-SHA-256 over a domain label and the
//! payload text, with a key made at gateway start (or configured:
//! [`crate::GatewayConfig::request_state_key`]). A state is single-purpose, not single-use:
//! the approval it points at is single-use in the store.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The prefix of every `requestState` the gateway issues.
pub(crate) const PREFIX: &str = "cs1.";

/// Mixed into the MAC so a tag made for anything else never verifies as a request state.
const DOMAIN: &[u8] = b"countersign-gateway/requestState/v1\0";

/// What a verified state names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Claims {
    pub(crate) principal: String,
    pub(crate) request_id: String,
    pub(crate) action_hash: String,
    pub(crate) expires: u64,
}

/// Why a presented state was refused (never which byte was wrong).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Invalid {
    #[error("it is not a state this gateway issued")]
    Malformed,
    #[error("its integrity check failed")]
    Forged,
    #[error("it expired")]
    Expired,
    #[error("it was issued to another principal")]
    OtherPrincipal,
    #[error("it was issued for another call (other tool or arguments)")]
    OtherCall,
}

/// The MAC key (32 bytes or more).
#[derive(Clone)]
pub(crate) struct StateKey(Vec<u8>);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("StateKey(<redacted>)")
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

impl StateKey {
    /// `key`, or 32 random bytes when none is configured.
    pub(crate) fn new(key: Option<&[u8]>) -> StateKey {
        match key {
            Some(key) => StateKey(key.to_vec()),
            None => StateKey(rand::random::<[u8; 32]>().to_vec()),
        }
    }

    fn mac(&self, payload: &str) -> HmacSha256 {
        let mut mac =
            <HmacSha256 as KeyInit>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable_key());
        mac.update(DOMAIN);
        mac.update(payload.as_bytes());
        mac
    }

    /// Issue a state naming `claims`.
    pub(crate) fn issue(&self, claims: &Claims) -> String {
        let payload = json!({
            "principal": claims.principal,
            "request_id": claims.request_id,
            "action_hash": claims.action_hash,
            "exp": claims.expires,
        });
        let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
        let tag = URL_SAFE_NO_PAD.encode(self.mac(&payload).finalize().into_bytes());
        format!("{PREFIX}{payload}.{tag}")
    }

    /// Verify `state` for a retried call by `principal` whose action hash is `action_hash`.
    pub(crate) fn verify(
        &self,
        state: &str,
        principal: &str,
        action_hash: &str,
    ) -> Result<Claims, Invalid> {
        let rest = state.strip_prefix(PREFIX).ok_or(Invalid::Malformed)?;
        let (payload, tag) = rest.split_once('.').ok_or(Invalid::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| Invalid::Malformed)?;
        // Constant time (the Mac trait's verification).
        self.mac(payload)
            .verify_slice(&tag)
            .map_err(|_| Invalid::Forged)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| Invalid::Malformed)?;
        let payload: Value = serde_json::from_slice(&payload).map_err(|_| Invalid::Malformed)?;
        let text = |key: &str| {
            payload
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(Invalid::Malformed)
        };
        let claims = Claims {
            principal: text("principal")?,
            request_id: text("request_id")?,
            action_hash: text("action_hash")?,
            expires: payload
                .get("exp")
                .and_then(Value::as_u64)
                .ok_or(Invalid::Malformed)?,
        };
        if claims.expires < now() {
            return Err(Invalid::Expired);
        }
        if claims.principal != principal {
            return Err(Invalid::OtherPrincipal);
        }
        if claims.action_hash != action_hash {
            return Err(Invalid::OtherCall);
        }
        Ok(claims)
    }
}

/// Seconds from now, for [`Claims::expires`].
pub(crate) fn expires_in(duration: std::time::Duration) -> u64 {
    now().saturating_add(duration.as_secs().max(1))
}

#[cold]
fn unreachable_key() -> HmacSha256 {
    // HMAC-SHA-256 takes any key length, so `new_from_slice` cannot fail; fall back to a
    // random block-sized key (nothing it tags will verify) rather than panic.
    let mut key = hmac::digest::Key::<HmacSha256>::default();
    key.iter_mut().for_each(|byte| *byte = rand::random::<u8>());
    <HmacSha256 as KeyInit>::new(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            principal: "agent:a".into(),
            request_id: "apr_aaaaaaaaaaaaaaaaaaaa".into(),
            action_hash: "sha256:00".into(),
            expires: expires_in(std::time::Duration::from_secs(60)),
        }
    }

    #[test]
    fn a_state_verifies_only_for_its_principal_and_call_under_its_key() {
        let key = StateKey::new(None);
        let state = key.issue(&claims());
        assert_eq!(key.verify(&state, "agent:a", "sha256:00"), Ok(claims()));
        assert_eq!(
            key.verify(&state, "agent:b", "sha256:00"),
            Err(Invalid::OtherPrincipal)
        );
        assert_eq!(
            key.verify(&state, "agent:a", "sha256:01"),
            Err(Invalid::OtherCall)
        );
        assert_eq!(
            StateKey::new(None).verify(&state, "agent:a", "sha256:00"),
            Err(Invalid::Forged)
        );
    }

    #[test]
    fn an_edited_payload_or_an_expired_state_is_refused() {
        let key = StateKey::new(Some(&[7u8; 32]));
        let state = key.issue(&claims());
        let (payload, tag) = state[PREFIX.len()..].split_once('.').expect("two parts");
        let mut edited = claims();
        edited.request_id = "apr_bbbbbbbbbbbbbbbbbbbb".into();
        let other = key.issue(&edited);
        let other_payload = other[PREFIX.len()..].split_once('.').expect("parts").0;
        assert_ne!(payload, other_payload);
        let forged = format!("{PREFIX}{other_payload}.{tag}");
        assert_eq!(
            key.verify(&forged, "agent:a", "sha256:00"),
            Err(Invalid::Forged)
        );
        assert_eq!(
            key.verify("opaque", "agent:a", "sha256:00"),
            Err(Invalid::Malformed)
        );
        let mut old = claims();
        old.expires = 1;
        assert_eq!(
            key.verify(&key.issue(&old), "agent:a", "sha256:00"),
            Err(Invalid::Expired)
        );
    }
}
