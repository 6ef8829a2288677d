//! The boot sequence: `hugetlb_bootmem_alloc`, reserved heads
//! (`memmap_init_reserved_heads`), then `gather_bootmem_prealloc` per node (in parallel under
//! `std`), [`prep_and_add_bootmem_folios`] with HVO and the fallback tail init.

use memmap_core::{InitHooks, StructPage};

use crate::HugetlbError;
use crate::MaybeSend;
use crate::bootmem::{BootRequest, HugeBootmemPage, alloc_with};
use crate::folio::reserve_bootmem_head;
use crate::hvo::VmemmapRemap;

pub(crate) use crate::gather::gather_bootmem_prealloc;
pub use crate::node::{BootParams, BootReport, HugetlbNode, NodeReport};
use crate::node::{hstate_of_config, take_group, take_group_mut, validate_nodes, validate_records};

/// The whole boot: `hugetlb_bootmem_alloc` (records), `memmap_init_reserved_heads`
/// (heads), `gather_bootmem_prealloc` (everything else); fills `records[..n]` and each node's
/// report.
///
/// # Errors
///
/// Everything is validated before the first write; on error nothing is written (struct pages,
/// pageblocks, records, hooks). See [`HugetlbError`].
pub fn boot<P, R, H>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    request: &BootRequest<'_>,
    params: &BootParams,
    records: &mut [HugeBootmemPage],
) -> Result<BootReport, HugetlbError>
where
    P: StructPage,
    R: VmemmapRemap<P> + MaybeSend,
    H: InitHooks + MaybeSend,
{
    let n = hugetlb_bootmem_alloc(nodes, request, records)?;
    memmap_init_reserved_heads(nodes, &records[..n])?;
    gather_bootmem_prealloc(nodes, &mut records[..n], params)
}

/// [`boot()`] with the folios where the caller puts them (pages taken from the buddy
/// allocator): `records` grouped by node in node order, each group in free-list order.
///
/// # Errors
///
/// Nothing is written on error: the node errors of `hugetlb_bootmem_alloc`,
/// [`HugetlbError::ZeroPages`] for no record, [`HugetlbError::RecordsNotGrouped`],
/// [`HugetlbError::FolioOutsideNode`], [`HugetlbError::FoliosOverlap`].
pub fn boot_placed<P, R, H>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &mut [HugeBootmemPage],
    params: &BootParams,
) -> Result<BootReport, HugetlbError>
where
    P: StructPage,
    R: VmemmapRemap<P> + MaybeSend,
    H: InitHooks + MaybeSend,
{
    validate_nodes(nodes)?;
    if records.is_empty() {
        return Err(HugetlbError::ZeroPages);
    }
    // First each folio inside its node (so `pfns()` is exact), then the pairs.
    validate_records(nodes, records)?;
    for (i, a) in records.iter().enumerate() {
        for b in &records[..i] {
            if a.head_pfn < b.pfns().end && b.head_pfn < a.pfns().end {
                return Err(HugetlbError::FoliosOverlap { a: b.head_pfn, b: a.head_pfn });
            }
        }
    }
    for r in records.iter_mut() {
        r.flags = 0;
        r.outcome = crate::bootmem::FolioOutcome::default();
    }
    memmap_init_reserved_heads(nodes, records)?;
    // Before the batched enqueue (6.1) the free list ends in the reverse of the gather's order:
    // gather each node's folios in the reverse of the order asked for, and hand the records
    // back in the caller's order.
    let reversed = nodes.first().is_some_and(|n| !n.memmap.config().behaviour().hugetlb_bootmem_batched);
    if reversed {
        reverse_groups(nodes, records);
    }
    let report = gather_bootmem_prealloc(nodes, records, params);
    if reversed {
        reverse_groups(nodes, records);
    }
    report
}

/// Reverses each node's group of `records` (grouped by node in `nodes`' order).
fn reverse_groups<P: StructPage, R, H>(nodes: &[HugetlbNode<'_, P, R, H>], records: &mut [HugeBootmemPage]) {
    let mut rest = records;
    for n in nodes {
        take_group_mut(&mut rest, n.spec.nid).reverse();
    }
}

/// `hugetlb_bootmem_alloc()` on the nodes: validates them and the request and computes the
/// records. Writes no struct page. Returns the number of records.
///
/// # Errors
///
/// Node errors ([`HugetlbError::NodeOutOfRange`], [`HugetlbError::BadZone`],
/// [`HugetlbError::NodeOutsideMemmap`], ...), [`HugetlbError::HstateNotOfConfig`] (the
/// request's hstate is not one of a node's configuration), and request errors
/// ([`HugetlbError::ZeroPages`], [`HugetlbError::NodeWithoutMemory`],
/// [`HugetlbError::RangeTooSmall`], ...). Nothing is written on error.
pub(crate) fn hugetlb_bootmem_alloc<P: StructPage, R, H>(
    nodes: &[HugetlbNode<'_, P, R, H>],
    request: &BootRequest<'_>,
    records: &mut [HugeBootmemPage],
) -> Result<usize, HugetlbError> {
    validate_nodes(nodes)?;
    for n in nodes {
        hstate_of_config(n, request.hstate)?;
    }
    let list_tail = nodes.first().is_some_and(|n| n.memmap.config().behaviour().hugetlb_boot_list_tail);
    alloc_with(nodes.len(), |i| nodes[i].spec, request, list_tail, records)
}

/// `memmap_init_reserved_pages()` for the boot pages: only the heads (the rest is
/// `MEMBLOCK_RSRV_NOINIT`), through [`reserve_bootmem_head`].
///
/// # Errors
///
/// [`HugetlbError::RecordsNotGrouped`], [`HugetlbError::HstateNotOfConfig`] or
/// [`HugetlbError::FolioOutsideNode`] (nothing written).
pub(crate) fn memmap_init_reserved_heads<P: StructPage, R, H: InitHooks>(
    nodes: &mut [HugetlbNode<'_, P, R, H>],
    records: &[HugeBootmemPage],
) -> Result<(), HugetlbError> {
    validate_nodes(nodes)?;
    validate_records(nodes, records)?;
    let mut rest = records;
    for n in nodes.iter_mut() {
        for r in take_group(&mut rest, n.spec.nid) {
            reserve_bootmem_head(&mut n.memmap, r.head_pfn, n.spec.zone, n.spec.nid, &mut n.hooks);
        }
    }
    Ok(())
}
