//! A validated command line: what [`super::execute`] runs.

use std::path::PathBuf;

use memmap_dump::{HotplugDump, HugetlbDump, ZoneDeviceDump};

use super::suite::Suite;
use crate::sweep::plan::Sweep;

/// A validated command line: nothing in it can fail for lack of memory or a bad size.
#[derive(Debug)]
pub enum Invocation {
    /// A timing command.
    Suite(Suite),
    /// `dump zone-device`.
    DumpZoneDevice(ZoneDeviceDump, PathBuf, bool),
    /// `dump hugetlb`.
    DumpHugetlb(HugetlbDump, PathBuf, bool),
    /// `dump hotplug`.
    DumpHotplug(HotplugDump, PathBuf, bool),
    /// `dump node`.
    DumpNode(memmap_dump::NodeDump, PathBuf, bool),
    /// `diff A B [--json]`.
    Diff(PathBuf, PathBuf, bool),
    /// `sweep`.
    Sweep(Sweep),
}
