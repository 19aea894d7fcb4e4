//! The anchor: a log's heads, exported and kept elsewhere, so that deleting its newest receipts
//! is caught ([`super::Verifier`] checks a log against one).

use super::*;

/// An externally kept reference point: the chain's head when it was exported.
///
/// JSON: `{"seq": 12, "hash": "sha256:…"}` for lane 0's head, and for a log of several lanes
/// ([`Receipt::lane`]) `"lanes": [{"lane": 3, "seq": 4, "hash": "sha256:…"}, …]` naming every
/// other lane that held receipts, so deleting the newest receipts of any lane is caught.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The number of receipts in lane 0 (its head's `seq`); 0, with [`GENESIS_HASH`], when lane
    /// 0 held none but other lanes did.
    pub seq: u64,
    /// Lane 0's head's hash.
    pub hash: String,
    /// The heads of the other lanes, each lane at most once; empty (and not written) for a log
    /// of one lane.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneHead>,
}

impl Anchor {
    /// The anchor of a log of one lane whose head is receipt `seq` with `hash`.
    pub fn of_lane_0(seq: u64, hash: ReceiptHash) -> Anchor {
        Anchor {
            seq,
            hash: hash.into_string(),
            lanes: Vec::new(),
        }
    }

    /// The `seq` and hash the anchor names for `lane`, if it names that lane.
    pub fn head_of(&self, lane: u32) -> Option<(u64, &str)> {
        if lane == 0 {
            return Some((self.seq, self.hash.as_str()));
        }
        self.lanes
            .iter()
            .find(|head| head.lane == lane)
            .map(|head| (head.seq, head.hash.as_str()))
    }

    /// Is the anchor well formed: every hash `sha256:` and 64 lowercase hex digits, lane 0's
    /// `seq` at least 1 (or 0 with [`GENESIS_HASH`] beside other lanes), every other lane's at
    /// least 1, no lane named twice and none of `lanes` lane 0?
    ///
    /// # Errors
    ///
    /// What is wrong, as a sentence.
    pub fn check_shape(&self) -> Result<(), String> {
        let hashes = std::iter::once(self.hash.as_str())
            .chain(self.lanes.iter().map(|head| head.hash.as_str()));
        for hash in hashes {
            if !crate::id::is_sha256(hash) {
                return Err(format!(
                    "its hash `{}` is not a receipt hash: {}",
                    printable(hash),
                    crate::id::SHA256_SHAPE
                ));
            }
        }
        if self.seq == 0 && self.lanes.is_empty() {
            return Err("its `seq` is 0, but receipts are numbered from 1".to_owned());
        }
        if self.seq == 0 && self.hash != GENESIS_HASH {
            return Err(format!(
                "its `seq` is 0 (lane 0 held no receipt) but its hash is not the genesis hash `{GENESIS_HASH}`"
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for head in &self.lanes {
            if head.lane == 0 {
                return Err(
                    "`lanes` names lane 0, whose head is the anchor's own `seq` and `hash`"
                        .to_owned(),
                );
            }
            if head.seq == 0 {
                return Err(format!(
                    "lane {}'s `seq` is 0, but receipts are numbered from 1",
                    head.lane
                ));
            }
            if !seen.insert(head.lane) {
                return Err(format!("`lanes` names lane {} twice", head.lane));
            }
        }
        Ok(())
    }
}
