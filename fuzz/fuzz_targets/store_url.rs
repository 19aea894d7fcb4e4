//! AFL++ target `store_url`: [`countersign_fuzz::store_url::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::store_url::run(data));
}
