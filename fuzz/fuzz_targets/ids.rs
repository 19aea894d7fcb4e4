//! AFL++ target `ids`: [`countersign_fuzz::ids::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::ids::run(data));
}
