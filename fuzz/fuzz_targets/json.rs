//! AFL++ target `json`: [`countersign_fuzz::json::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::json::run(data));
}
