// Shared workload: 1M distinct 8-byte keys in pseudo-random order, 100-byte values,
// committed in atomic batches of 10k.
pub const N: u64 = 1_000_000;
pub const BATCH: u64 = 10_000;
pub fn key(i: u64) -> [u8; 8] {
    // i * odd constant mod 2^32 is a bijection, so keys are distinct and unordered.
    ((i.wrapping_mul(2_654_435_761)) & 0xffff_ffff).to_be_bytes()
}
pub fn value(i: u64) -> [u8; 100] {
    let mut v = [0u8; 100];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}
pub fn secs(t: std::time::Instant) -> f64 { t.elapsed().as_secs_f64() }
