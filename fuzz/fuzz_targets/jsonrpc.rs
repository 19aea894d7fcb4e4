//! AFL++ target `jsonrpc`: [`countersign_fuzz::jsonrpc::run`] on every input (docs/fuzzing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| countersign_fuzz::jsonrpc::run(data));
}
