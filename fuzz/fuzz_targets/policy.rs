//! AFL++ target `policy`: [`countersign_fuzz::policy::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::policy::run(data));
}
