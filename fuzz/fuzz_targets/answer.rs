//! AFL++ target `answer`: [`countersign_fuzz::answer::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::answer::run(data));
}
