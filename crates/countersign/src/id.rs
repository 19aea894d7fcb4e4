//! Random identifiers: approval requests (`apr_…`) and attempts (`att_…`).

use rand::Rng;

/// A random identifier: `prefix` plus 20 lowercase base-32 characters (100 bits).
pub(crate) fn random_id(prefix: &str) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut rng = rand::rng();
    let mut id = String::with_capacity(prefix.len() + 20);
    id.push_str(prefix);
    for _ in 0..20 {
        id.push(ALPHABET[rng.random_range(0..32)] as char);
    }
    id
}
