//! Device discovery against the real driver: skipped without a GPU, required
//! with `CUZK_REQUIRE_GPU=1`.

use cuzk_gpu_sched::{discover, testing::gpu_or_skip};

#[test]
fn discover_lists_visible_devices() {
    let Some(devs) = gpu_or_skip("discover_lists_visible_devices") else {
        return;
    };
    for (i, dev) in devs.iter().enumerate() {
        eprintln!("{dev}");
        assert_eq!(dev.ordinal, i);
        assert!(!dev.name.is_empty());
        assert!(dev.total_memory_bytes >= 1 << 30, "{dev}");
        // The committed PTX targets compute_80: anything older cannot run it.
        assert!(dev.compute_capability >= (8, 0), "{dev}");
        assert!(dev.multiprocessors > 0, "{dev}");
    }
    // A second look gives the same answer.
    assert_eq!(discover().expect("second discovery"), devs);
}
