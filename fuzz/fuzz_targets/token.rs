//! AFL++ target `token`: [`countersign_fuzz::token::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::token::run(data));
}
