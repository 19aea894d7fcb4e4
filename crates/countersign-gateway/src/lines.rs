//! Newline-delimited JSON-RPC read with a cap, from the client (the stdio front) and from an
//! upstream over a byte stream alike: however long a line is, at most the cap and a few bytes
//! of it are held in memory, so a line over `--max-message-bytes` costs no more than one within
//! it (found by a first-time user: a 200 MB client line was read whole before it was refused).

use sha2::Digest;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// How many of an oversized line's last bytes are kept: enough for the `,"id":…}` that closes a
/// reply whose serializer writes `result` first ([`crate::wire::partial_message`]).
pub(crate) const TAIL_BYTES: usize = 64;

/// One line as [`read_line_capped`] read it.
pub(crate) struct CappedLine {
    /// The line's first bytes: all of it when it is at most the cap, else the cap and one byte.
    pub(crate) head: Vec<u8>,
    /// The line's last bytes past `head` ([`TAIL_BYTES`] at most).
    pub(crate) tail: Vec<u8>,
    /// The line's length in bytes, without its end.
    pub(crate) bytes: usize,
    /// SHA-256 of the whole line without its end, when asked for ([`CappedLine::new`]).
    digest: Option<sha2::Sha256>,
}

impl CappedLine {
    /// An empty line; `digest`: keep a running SHA-256 of it ([`CappedLine::digest`]).
    pub(crate) fn new(digest: bool) -> CappedLine {
        CappedLine {
            head: Vec::new(),
            tail: Vec::new(),
            bytes: 0,
            digest: digest.then(sha2::Sha256::new),
        }
    }

    /// `sha256:` and the hex SHA-256 of the whole line, when it was asked for.
    pub(crate) fn digest(self) -> Option<String> {
        self.digest.map(|digest| {
            let digest: [u8; 32] = digest.finalize().into();
            format!("sha256:{}", hex::encode(digest))
        })
    }
}

/// Read one line from `reader` into `line`, keeping at most `max + 1` bytes of it (so a line
/// over `max` is known to be) and its last [`TAIL_BYTES`]. Returns the bytes read, the line's
/// end included; 0 at the end of the input.
///
/// # Errors
///
/// The reader's own.
pub(crate) async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut CappedLine,
    max: usize,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(total);
        }
        let (chunk, found) = match buffer.iter().position(|&byte| byte == b'\n') {
            Some(end) => (&buffer[..end], Some(end + 1)),
            None => (buffer, None),
        };
        if let Some(digest) = &mut line.digest {
            digest.update(chunk);
        }
        line.bytes += chunk.len();
        let room = max.saturating_add(1).saturating_sub(line.head.len());
        let kept = chunk.len().min(room);
        line.head.extend_from_slice(&chunk[..kept]);
        let past = &chunk[kept..];
        line.tail
            .extend_from_slice(&past[past.len().saturating_sub(TAIL_BYTES)..]);
        let over = line.tail.len().saturating_sub(TAIL_BYTES);
        line.tail.drain(..over);
        let used = found.unwrap_or(buffer.len());
        total += used;
        reader.consume(used);
        if found.is_some() {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_long_line_keeps_its_head_tail_length_and_digest_only() {
        let long = format!("{}{}", "a".repeat(100), "z".repeat(100));
        let input = format!("{long}\nshort\n");
        let mut reader = tokio::io::BufReader::with_capacity(16, input.as_bytes());
        let mut line = CappedLine::new(true);
        let read = read_line_capped(&mut reader, &mut line, 10)
            .await
            .expect("read");
        assert_eq!(read, 201);
        assert_eq!((line.head.len(), line.bytes), (11, 200));
        assert_eq!(line.tail, "z".repeat(TAIL_BYTES).into_bytes());
        assert_eq!(
            line.digest(),
            Some(countersign::canonical::sha256_prefixed(long.as_bytes()))
        );
        let mut line = CappedLine::new(false);
        read_line_capped(&mut reader, &mut line, 10)
            .await
            .expect("read");
        assert_eq!((line.head.as_slice(), line.bytes), (&b"short"[..], 5));
        assert_eq!(line.digest(), None);
    }
}
