//! Why the sanitizer off-switch matters: under AddressSanitizer the generic backend makes a
//! one-byte out-of-bounds `memcpy_nontemporal` visible. The test re-runs itself in a child
//! process that performs the overflow and asserts that ASan reported it.
//!
//! It only does something in an ASan build (CI's ASan job sets
//! `STREAM_HAL_EXPECT_BACKEND=generic:address`, and then the test insists on running). In any
//! other build an out-of-bounds write is undefined behaviour, so it is never performed.

use stream_hal::{Backend, GenericReason, backend};

const CHILD_ENV: &str = "STREAM_HAL_ASAN_CHILD";
const TEST_NAME: &str = "asan_reports_a_one_byte_overflow";

fn asan_build() -> bool {
    matches!(backend(), Backend::Generic(GenericReason::Sanitizer(s)) if s.split(',').any(|x| x == "address"))
}

#[test]
fn asan_reports_a_one_byte_overflow() {
    if std::env::var_os(CHILD_ENV).is_some() {
        assert!(asan_build(), "child must only run in an ASan build");
        let src = [0x5au8; 65];
        let mut dst = vec![0u8; 64];
        // SAFETY: none — this is the deliberate one-byte overflow that ASan must catch. Only
        // reached in an ASan build, in a child process.
        unsafe { stream_hal::memcpy_nontemporal(dst.as_mut_ptr(), src.as_ptr(), 65) };
        stream_hal::drain();
        std::hint::black_box(&dst);
        return;
    }
    let required = std::env::var("STREAM_HAL_EXPECT_BACKEND")
        .is_ok_and(|v| v.split(&[':', ','][..]).any(|x| x == "address"));
    if !asan_build() {
        assert!(!required, "STREAM_HAL_EXPECT_BACKEND asks for ASan but backend() = {}", backend());
        eprintln!("not an AddressSanitizer build ({}): nothing to check", backend());
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the overflowing child exited successfully:\n{stderr}");
    assert!(stderr.contains("ERROR: AddressSanitizer: heap-buffer-overflow"), "no ASan report:\n{stderr}");
    assert!(stderr.contains("WRITE of size"), "ASan did not report a write:\n{stderr}");
}
