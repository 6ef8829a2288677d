//! Size parsing and the whole command line on arbitrary input: an error or a validated
//! invocation, never a panic. The input is split at NUL bytes into arguments (any bytes, not
//! only UTF-8); the first argument is also parsed as a size.
//!
//! Properties: a size accepted in whole `unit` pages is a non-zero multiple of `unit` equal to
//! the plain parse; an accepted timing invocation's every scenario passes its own checks and
//! states a memory need within the machine given to the parser.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use libfuzzer_sys::fuzz_target;
use memmap_bench::cli::{Invocation, parse};
use memmap_bench::memory::{MemInfo, check};
use memmap_bench::size::{parse_pages, parse_size};

/// A fixed machine: 24 GiB, heuristic overcommit, no swap.
const MACHINE: MemInfo = MemInfo {
    available: Some(20 << 30),
    total: Some(24 << 30),
    swap_total: Some(0),
    commit_limit: Some(12 << 30),
    committed: Some(1 << 30),
    overcommit: Some(0),
    rlimit_as: None,
    cgroup: None,
};

fuzz_target!(|data: &[u8]| {
    let args: Vec<OsString> = data.split(|&b| b == 0).map(|a| OsString::from_vec(a.to_vec())).collect();
    if let Some(first) = args.first().and_then(|a| a.to_str()) {
        let plain = parse_size(first);
        for unit in [4096u64, 2 << 20] {
            if let Ok(bytes) = parse_pages(first, unit) {
                assert!(bytes >= unit && bytes % unit == 0, "{first:?}: {bytes}");
                assert_eq!(plain.clone(), Ok(bytes));
            }
        }
    }
    let argv = std::iter::once(OsString::from("memmap-bench")).chain(args);
    match parse(argv, &MACHINE) {
        Ok(Invocation::Suite(suite)) => {
            for s in &suite.scenarios {
                assert_eq!(s.check(), Ok(()), "{}", s.name());
                let need = s.memory_needed().expect("checked by parse");
                assert_eq!(check(s.name(), &need, &MACHINE), Ok(()));
            }
        }
        Ok(Invocation::DumpZoneDevice(opts, ..)) => {
            let need = memmap_bench::memory::zone_device_dump_need(&opts).expect("checked by parse");
            assert_eq!(check("dump", &need, &MACHINE), Ok(()));
        }
        Ok(Invocation::DumpHugetlb(opts, ..)) => {
            let need = memmap_bench::memory::hugetlb_dump_need(&opts).expect("checked by parse");
            assert_eq!(check("dump", &need, &MACHINE), Ok(()));
        }
        Ok(Invocation::DumpHotplug(opts, ..)) => {
            let bytes = opts.nr_pages.checked_mul(opts.struct_page_size()).expect("checked by parse");
            let need = memmap_bench::memory::MemoryNeed::resident(bytes);
            assert_eq!(check("dump", &need, &MACHINE), Ok(()));
        }
        Ok(Invocation::DumpNode(opts, ..)) => {
            let span = opts.layout().span();
            let need = memmap_bench::memory::node_dump_need(span.len(), opts.struct_page_size())
                .expect("checked by parse");
            assert_eq!(check("dump", &need, &MACHINE), Ok(()));
        }
        Ok(Invocation::Sweep(sweep)) => {
            // Every size parse kept is a whole number of 64 KiB and ascending.
            assert!(sweep.sizes.windows(2).all(|w| w[0] < w[1]), "{:?}", sweep.sizes);
            assert!(sweep.sizes.iter().all(|&b| b > 0 && b % (64 << 10) == 0), "{:?}", sweep.sizes);
        }
        Ok(Invocation::Diff(..)) | Err(_) => {}
    }
});
