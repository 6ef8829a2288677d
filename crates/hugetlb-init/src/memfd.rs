//! Real HVO on Linux (`std`): a memfd-backed vmemmap whose optimized tail pages are mapped
//! read-only onto one page (the steps: `docs/hugetlb-init.md` in the repository).
//!
//! The struct pages are only ever accessed through raw pointers (memmap-core's [`Memmap`] keeps
//! no references into its storage), which is what makes replacing pages under it sound.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::vec::Vec;

use memmap_core::{InitError, KernelConfig, Memmap, PAGE_POISON_BYTE, StructPage, pageblocks_needed};
use rustix::fs::{FallocateFlags, MemfdFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::hstate::HUGE_MAX_HSTATE;
use crate::hvo::HvoError;
use crate::hvo::{RemapAlloc, RemapDone, TailTarget, VmemmapRemap};

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// One node's vmemmap in a memfd (see `docs/hugetlb-init.md`).
pub(crate) struct MemfdVmemmap<P: StructPage> {
    fd: OwnedFd,
    map: NonNull<u8>,
    map_len: usize,
    /// Bytes from the mapping's start to the struct page of `base_pfn` (the vmemmap is
    /// page-aligned at PFNs that are multiples of `PAGE_SIZE / sizeof(struct page)`, as the
    /// kernel's is).
    first_off: usize,
    /// A vmemmap page: the configuration's `PAGE_SIZE`.
    page: usize,
    base_pfn: u64,
    nr_pages: usize,
    spare_frames: u64,
    spare_used: u64,
    /// Linux 7.1+: the file offset of the node's shared tail page per hstate (a spare page).
    shared_tail: [Option<u64>; HUGE_MAX_HSTATE],
    cfg: KernelConfig,
    pageblocks: Vec<u8>,
    _page: PhantomData<P>,
}

// SAFETY: the mapping and the fd are owned by this value and only accessed through `&self` /
// `&mut self`; moving it to another thread moves that ownership, as for a `Vec`.
unsafe impl<P: StructPage> Send for MemfdVmemmap<P> {}

impl<P: StructPage> core::fmt::Debug for MemfdVmemmap<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemfdVmemmap")
            .field("base_pfn", &self.base_pfn)
            .field("nr_pages", &self.nr_pages)
            .field("map_len", &self.map_len)
            .field("spare_frames", &self.spare_frames)
            .field("spare_used", &self.spare_used)
            .finish_non_exhaustive()
    }
}

impl<P: StructPage> MemfdVmemmap<P> {
    /// A vmemmap for the struct pages of `[base_pfn, base_pfn + nr_pages)`, with
    /// `spare_frames` spare pages for HVO head copies. With `poison`, the struct pages are
    /// filled with memmap-core's `PAGE_POISON_BYTE` (all memory becomes resident, like a
    /// populated vmemmap with garbage in the `NOINIT` struct pages); without it they are the
    /// file's zeros and take no memory until written.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for a system page size that does not divide the
    /// configuration's (which is the vmemmap page) or sizes that overflow, and, carrying memmap-core's [`InitError`] ([`io::Error::get_ref`]), for an
    /// invalid configuration or a range that passes the end of the `u64` PFN space or ends
    /// past the configuration's last pfn ([`InitError::BeyondMaxPfn`]: the checks of
    /// [`Memmap::new`], made here so that no later view of the vmemmap can fail); the
    /// `memfd_create`/`ftruncate`/`mmap` error otherwise.
    pub(crate) fn new(
        cfg: KernelConfig,
        base_pfn: u64,
        nr_pages: u64,
        spare_frames: u64,
        poison: bool,
    ) -> io::Result<Self> {
        let refused = |e: InitError| io::Error::new(io::ErrorKind::InvalidInput, e);
        cfg.flags_layout().map_err(|e| refused(InitError::Config(e)))?;
        let end = base_pfn
            .checked_add(nr_pages)
            .ok_or_else(|| refused(InitError::RangeOverflow { start_pfn: base_pfn, nr_pages }))?;
        if end > cfg.max_pfn() {
            return Err(refused(InitError::BeyondMaxPfn { end_pfn: end, max_pfn: cfg.max_pfn() }));
        }
        let page = usize::try_from(cfg.page_size()).map_err(|_| invalid("the page size is too large"))?;
        if page % rustix::param::page_size() != 0 {
            return Err(invalid("the system page size does not divide the configuration's"));
        }
        let nr = usize::try_from(nr_pages).map_err(|_| invalid("too many pages"))?;
        let per_page = (page / P::SIZE) as u64;
        let first_off = if P::SIZE.is_power_of_two() { (base_pfn % per_page) as usize * P::SIZE } else { 0 };
        let bytes = nr
            .checked_mul(P::SIZE)
            .and_then(|b| b.checked_add(first_off))
            .ok_or_else(|| invalid("too large"))?;
        let map_len = bytes.div_ceil(page).max(1).checked_mul(page).ok_or_else(|| invalid("too large"))?;
        let file_len = (map_len as u64)
            .checked_add(
                spare_frames.checked_mul(page as u64).ok_or_else(|| invalid("too many spare frames"))?,
            )
            .ok_or_else(|| invalid("too large"))?;
        let fd = rustix::fs::memfd_create(c"hugetlb-vmemmap", MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, file_len)?;
        let map = Self::map_all(&fd, map_len, page)?;
        let mut v = MemfdVmemmap {
            fd,
            map,
            map_len,
            first_off,
            page,
            base_pfn,
            nr_pages: nr,
            spare_frames,
            spare_used: 0,
            shared_tail: [None; HUGE_MAX_HSTATE],
            cfg,
            pageblocks: std::vec![0; pageblocks_needed(&cfg, base_pfn, nr_pages)],
            _page: PhantomData,
        };
        if poison {
            v.poison();
        }
        Ok(v)
    }

    /// Maps the file's first `map_len` bytes shared and read-write at an address aligned to
    /// `page` (a vmemmap page, a multiple of the host's page size): HVO remaps whole vmemmap
    /// pages, so they must start where the host's mappings can be cut. The address space is
    /// reserved with `page - host page` bytes to spare and the slack unmapped afterwards.
    fn map_all(fd: &OwnedFd, map_len: usize, page: usize) -> io::Result<NonNull<u8>> {
        let slack = page - rustix::param::page_size();
        let reserve_len = map_len.checked_add(slack).ok_or_else(|| invalid("too large"))?;
        // SAFETY: a fresh inaccessible anonymous mapping at an address the kernel chooses; it
        // overlaps nothing of ours.
        let reserve = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                reserve_len,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )?
        } as usize;
        let aligned = reserve.next_multiple_of(page);
        // SAFETY: `[aligned, aligned + map_len)` lies inside the reservation just made (the
        // alignment moves the start by less than `page`, which the slack covers), which nothing
        // else uses; MAP_FIXED replaces that part of it with the shared file mapping.
        let mapped = unsafe {
            rustix::mm::mmap(
                aligned as *mut c_void,
                map_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                0,
            )
        };
        // The reservation around the mapping (all of it when the mapping failed) is given back;
        // unmapping is best effort (a failure leaves inaccessible address space, never data).
        let trim = |start: usize, end: usize| {
            if end > start {
                // SAFETY: `[start, end)` is part of the reservation made above and holds no
                // mapping anything refers to.
                let _ = unsafe { rustix::mm::munmap(start as *mut c_void, end - start) };
            }
        };
        if let Err(e) = mapped {
            trim(reserve, reserve + reserve_len);
            return Err(e.into());
        }
        trim(reserve, aligned);
        trim(aligned + map_len, reserve + reserve_len);
        NonNull::new(aligned as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))
    }

    fn poison(&mut self) {
        // SAFETY: the whole mapping is ours, mapped read-write (after `new` or `reset`).
        unsafe { self.map.as_ptr().write_bytes(PAGE_POISON_BYTE, self.map_len) };
    }

    /// Gives every page back and maps the vmemmap anew, read-write, unoptimized (and poisoned
    /// if asked): the state of [`MemfdVmemmap::new`]. Needed before booting again after HVO
    /// made tail vmemmap pages read-only.
    ///
    /// # Errors
    ///
    /// The `munmap`/`ftruncate`/`mmap` error.
    pub(crate) fn reset(&mut self, poison: bool) -> io::Result<()> {
        // SAFETY: the mapping is ours and nothing borrows it (`&mut self`).
        unsafe { rustix::mm::munmap(self.map.as_ptr().cast::<c_void>(), self.map_len)? };
        let file_len = self.map_len as u64 + self.spare_frames * self.page as u64;
        rustix::fs::ftruncate(&self.fd, 0)?;
        rustix::fs::ftruncate(&self.fd, file_len)?;
        self.map = Self::map_all(&self.fd, self.map_len, self.page)?;
        self.spare_used = 0;
        self.shared_tail = [None; HUGE_MAX_HSTATE];
        if poison {
            self.poison();
        }
        Ok(())
    }

    /// A [`Memmap`] over the struct pages and the [`MemfdRemap`] that optimizes them. The
    /// pageblock array is reset to unset.
    ///
    /// Crate-private on purpose (as is the whole type): once the remapper has run, tail
    /// vmemmap pages are mapped read-only and alias the head page, so a safe `Memmap::write`
    /// through the view could fault, and a read of one alias after a write through another
    /// could be served from a value the compiler kept (it assumes distinct addresses do not
    /// alias). The boot, the only user, never writes an optimized tail and never reads one
    /// through this view; after the boot the struct pages are read with
    /// [`MemfdVmemmap::read`], whose loads are volatile.
    ///
    /// # Panics
    ///
    /// Never: [`MemfdVmemmap::new`] made every check of `Memmap::from_raw_parts` on the
    /// configuration and the range (which nothing changes afterwards), and sized the
    /// pageblock array with `pageblocks_needed`.
    pub(crate) fn parts(&mut self) -> (Memmap<'_, P>, MemfdRemap<'_, P>) {
        // SAFETY: `first_off + nr_pages * SIZE <= map_len`, inside the mapping.
        let pages = unsafe { self.map.as_ptr().add(self.first_off) }.cast::<P>();
        let pages = NonNull::new(pages).expect("non-null mapping");
        // SAFETY: the mapping is readable, aligned for `P` (page-aligned base, `first_off` a
        // multiple of `P::SIZE`), initialized (file zeros or poison) and exclusively borrowed
        // through `&mut self` for the lifetime of the view; pages that HVO makes read-only are
        // never written by the initializers (they only write tails of folios HVO did not
        // optimize).
        let memmap = unsafe {
            Memmap::from_raw_parts(self.cfg, self.base_pfn, pages, self.nr_pages, &mut self.pageblocks)
        }
        .unwrap_or_else(|e| unreachable!("MemfdVmemmap::new checked the config and the pfn range: {e}"));
        let remap = MemfdRemap {
            fd: self.fd.as_fd(),
            map: self.map,
            map_len: self.map_len,
            page: self.page,
            spare_base: self.map_len as u64,
            spare_frames: self.spare_frames,
            spare_used: &mut self.spare_used,
            shared_tail: &mut self.shared_tail,
            _page: PhantomData,
        };
        (memmap, remap)
    }

    /// First PFN.
    #[must_use]
    pub(crate) fn base_pfn(&self) -> u64 {
        self.base_pfn
    }

    /// Number of struct pages.
    #[must_use]
    pub(crate) fn nr_pages(&self) -> u64 {
        self.nr_pages as u64
    }

    /// Host address of the struct page of `pfn`.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the vmemmap.
    #[cfg(test)]
    pub(crate) fn host_addr(&self, pfn: u64) -> usize {
        assert!(pfn >= self.base_pfn && pfn - self.base_pfn < self.nr_pages as u64, "pfn outside vmemmap");
        self.map.as_ptr() as usize + self.first_off + (pfn - self.base_pfn) as usize * P::SIZE
    }

    /// The struct page of `pfn` as the CPU reads it through the (possibly remapped) vmemmap.
    ///
    /// The load is volatile: after HVO several virtual pages of the mapping are one physical
    /// page, which the compiler cannot know, so every read goes to memory.
    ///
    /// # Panics
    ///
    /// If `pfn` is outside the vmemmap.
    #[must_use]
    pub(crate) fn read(&self, pfn: u64) -> P {
        assert!(pfn >= self.base_pfn && pfn - self.base_pfn < self.nr_pages as u64, "pfn outside vmemmap");
        let off = self.first_off + (pfn - self.base_pfn) as usize * P::SIZE;
        // SAFETY: `off + P::SIZE <= map_len` (the pfn is inside the vmemmap, checked), so the
        // pointer stays inside the mapping, which is always readable (RO or RW), aligned for
        // `P` (page-aligned base, `first_off` and the offset multiples of `P::SIZE`, which is a
        // multiple of 8) and initialized (file zeros, poison or written pages); no `&mut` into it
        // exists while `&self` is held.
        unsafe { self.map.as_ptr().add(off).cast::<P>().read_volatile() }
    }

    /// The pageblock bytes of the last boot (`memmap_core::PAGEBLOCK_UNSET` where never set).
    #[must_use]
    pub(crate) fn pageblocks(&self) -> &[u8] {
        &self.pageblocks
    }

    /// Memory the vmemmap occupies: the memfd's allocated blocks (`st_blocks * 512`), struct
    /// pages and head copies. Pages punched out by HVO or never written do not count.
    ///
    /// # Errors
    ///
    /// The `fstat` error.
    pub(crate) fn resident_bytes(&self) -> io::Result<u64> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok(st.st_blocks as u64 * 512)
    }

    /// Spare pages used for head copies.
    #[cfg(test)]
    pub(crate) fn head_copies(&self) -> u64 {
        self.spare_used - self.shared_tail_pages()
    }

    /// Spare pages used as shared tail pages (Linux 7.1+: one per hstate HVO optimized).
    #[cfg(test)]
    pub(crate) fn shared_tail_pages(&self) -> u64 {
        self.shared_tail.iter().flatten().count() as u64
    }
}

impl<P: StructPage> Drop for MemfdVmemmap<P> {
    fn drop(&mut self) {
        // SAFETY: the mapping (and every MAP_FIXED replacement inside it) is ours; no view
        // borrows it any more (views borrow `self`).
        let _ = unsafe { rustix::mm::munmap(self.map.as_ptr().cast::<c_void>(), self.map_len) };
    }
}

/// The HVO backend of one [`MemfdVmemmap`] (see `docs/hugetlb-init.md`).
pub(crate) struct MemfdRemap<'a, P: StructPage> {
    fd: BorrowedFd<'a>,
    map: NonNull<u8>,
    map_len: usize,
    /// A vmemmap page (the configuration's `PAGE_SIZE`).
    page: usize,
    spare_base: u64,
    spare_frames: u64,
    spare_used: &'a mut u64,
    shared_tail: &'a mut [Option<u64>; HUGE_MAX_HSTATE],
    _page: PhantomData<P>,
}

// SAFETY: the remapper only issues syscalls on its own vmemmap mapping and file, which the
// borrowed `MemfdVmemmap` owns for `'a`; moving it to the thread that gathers the node is like
// moving a `&mut MemfdVmemmap`.
unsafe impl<P: StructPage> Send for MemfdRemap<'_, P> {}

impl<P: StructPage> core::fmt::Debug for MemfdRemap<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemfdRemap").field("spare_used", &*self.spare_used).finish_non_exhaustive()
    }
}

impl<P: StructPage> MemfdRemap<'_, P> {
    /// `mmap(addr, len, prot, MAP_SHARED | MAP_FIXED, fd, off)`.
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must be inside this vmemmap's mapping, and no reference into it may
    /// be live.
    unsafe fn map_fixed(&self, addr: usize, len: usize, off: u64, prot: ProtFlags) -> rustix::io::Result<()> {
        // SAFETY: the caller guarantees the range is ours; MAP_FIXED replaces our own pages.
        unsafe {
            rustix::mm::mmap(
                addr as *mut c_void,
                len,
                prot,
                MapFlags::SHARED | MapFlags::FIXED,
                self.fd,
                off,
            )?;
        }
        Ok(())
    }

    fn punch(&self, off: u64, len: u64) {
        // Freeing is best effort: a failed punch leaves the memory allocated, never wrong data.
        let _ =
            rustix::fs::fallocate(self.fd, FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE, off, len);
    }
}

impl<P: StructPage> MemfdRemap<'_, P> {
    /// Writes `bytes` at file offset `off`.
    fn pwrite_all(&self, bytes: &[u8], off: u64) -> Result<(), HvoError> {
        let mut done = 0;
        while done < bytes.len() {
            match rustix::io::pwrite(self.fd, &bytes[done..], off + done as u64) {
                Ok(n) => done += n,
                Err(e) => return Err(HvoError::Remap { errno: e.raw_os_error() }),
            }
        }
        Ok(())
    }

    /// Takes the next spare page, if any.
    fn take_spare(&mut self) -> Option<u64> {
        (*self.spare_used < self.spare_frames).then(|| {
            let off = self.spare_base + *self.spare_used * self.page as u64;
            *self.spare_used += 1;
            off
        })
    }
}

/// Where HVO maps a folio's tail vmemmap pages (a file offset, `None`: onto its head page),
/// and the `(hstate slot, offset)` of a shared tail page made by this call (undone on failure).
type TailPages = (Option<u64>, Option<(usize, u64)>);

impl<P: StructPage> MemfdRemap<'_, P> {
    /// The shared tail page of `tail`'s hstate (Linux 7.1+ `vmemmap_get_tail()`), made from
    /// its initial struct pages on first use, or `(None, None)` for tails mapped onto the head
    /// page.
    fn shared_tail_page(&mut self, memmap: &Memmap<'_, P>, tail: TailTarget) -> Result<TailPages, HvoError> {
        const ENOMEM: i32 = 12;
        let TailTarget::Shared { hstate, init } = tail else { return Ok((None, None)) };
        let slot = hstate.index();
        if let Some(off) = self.shared_tail[slot] {
            return Ok((Some(off), None));
        }
        let Some(off) = self.take_spare() else {
            return Err(HvoError::Remap { errno: ENOMEM });
        };
        let mut bytes = std::vec![0u8; self.page];
        for (j, chunk) in (0..init.slots::<P>()).zip(bytes.chunks_exact_mut(P::SIZE)) {
            init.slot(memmap, j).to_bytes(chunk);
        }
        if let Err(e) = self.pwrite_all(&bytes, off) {
            self.punch(off, self.page as u64);
            *self.spare_used -= 1;
            return Err(e);
        }
        self.shared_tail[slot] = Some(off);
        Ok((Some(off), Some((slot, off))))
    }

    /// `alloc_pages_node()` + `copy_page()` of the head vmemmap page at host address `reuse`
    /// into a spare page: its offset, or `None` when no spare page is left (the kernel then
    /// keeps the head page in place).
    fn copy_head_page(&mut self, reuse: usize) -> Result<Option<u64>, HvoError> {
        let Some(off) = self.take_spare() else { return Ok(None) };
        // SAFETY: the head vmemmap page is inside the mapping and readable (the caller checked
        // the folio's range); nothing writes it during this call.
        let head = unsafe { core::slice::from_raw_parts(reuse as *const u8, self.page) };
        if let Err(e) = self.pwrite_all(head, off) {
            self.punch(off, self.page as u64);
            *self.spare_used -= 1;
            return Err(e);
        }
        Ok(Some(off))
    }
}

impl<P: StructPage> VmemmapRemap<P> for MemfdRemap<'_, P> {
    fn remap_free(
        &mut self,
        memmap: &mut Memmap<'_, P>,
        head_pfn: u64,
        nr_pages: u64,
        alloc: RemapAlloc,
        tail: TailTarget,
    ) -> Result<RemapDone, HvoError> {
        const EINVAL: i32 = 22;
        let (page, page_bytes) = (self.page, self.page as u64);
        let Some(size) = nr_pages.checked_mul(P::SIZE as u64) else {
            return Err(HvoError::Remap { errno: EINVAL });
        };
        if !P::SIZE.is_power_of_two() || size % page_bytes != 0 || !memmap.contains_range(head_pfn, nr_pages)
        {
            return Err(HvoError::Remap { errno: EINVAL });
        }
        let reuse = memmap.host_ptr(head_pfn) as usize;
        let base = self.map.as_ptr() as usize;
        if reuse % page != 0 || reuse < base || reuse + size as usize > base + self.map_len {
            return Err(HvoError::Remap { errno: EINVAL });
        }
        let reuse_off = (reuse - base) as u64;
        let pages = (size / page_bytes) as usize;
        // Linux 7.1+: vmemmap_get_tail(), before anything else (its failure is -ENOMEM).
        let (shared, new_tail) = self.shared_tail_page(memmap, tail)?;
        // Gives a tail page created by this call back.
        let drop_tail = |this: &mut Self| {
            if let Some((slot, off)) = new_tail {
                this.shared_tail[slot] = None;
                this.punch(off, page_bytes);
                *this.spare_used -= 1;
            }
        };
        // vmemmap_split_pmd(): the page-table allocation.
        if !alloc.page_table {
            drop_tail(self);
            return Err(HvoError::NoMemory);
        }
        // alloc_pages_node() + copy_page() of the head vmemmap page.
        let new_off = if alloc.head_copy {
            match self.copy_head_page(reuse) {
                Ok(off) => off,
                Err(e) => {
                    drop_tail(self);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let head_target = new_off.unwrap_or(reuse_off);
        let tail_target = shared.unwrap_or(head_target);
        let undo = |this: &mut Self, mapped: usize, e: rustix::io::Errno| {
            // Map the folio's original pages back over whatever was remapped (one call: their
            // file offsets are contiguous), and give the spare pages back (last taken first).
            // SAFETY: `[reuse, reuse + mapped pages)` is inside our mapping.
            let _ = unsafe {
                this.map_fixed(reuse, mapped * page, reuse_off, ProtFlags::READ | ProtFlags::WRITE)
            };
            if let Some(off) = new_off {
                this.punch(off, page_bytes);
                *this.spare_used -= 1;
            }
            drop_tail(this);
            HvoError::Remap { errno: e.raw_os_error() }
        };
        if new_off.is_some() {
            // SAFETY: `[reuse, reuse + page)` is the folio's head vmemmap page, inside our mapping
            // (the range was checked above); the `head` slice that read it has been dropped, so no
            // reference into it lives.
            let mapped =
                unsafe { self.map_fixed(reuse, page, head_target, ProtFlags::READ | ProtFlags::WRITE) };
            if let Err(e) = mapped {
                return Err(undo(self, 1, e));
            }
        }
        for k in 1..pages {
            // SAFETY: tail vmemmap page `k` of the folio is inside our mapping (range checked).
            if let Err(e) = unsafe { self.map_fixed(reuse + k * page, page, tail_target, ProtFlags::READ) } {
                return Err(undo(self, k, e));
            }
        }
        // free_vmemmap_page_list(): the old pages (the old head too when it was copied).
        let free_from = if new_off.is_some() { reuse_off } else { reuse_off + page_bytes };
        let freed = reuse_off + size - free_from;
        self.punch(free_from, freed);
        Ok(RemapDone { head_copied: new_off.is_some(), freed_pages: freed / page_bytes })
    }

    fn storage_pfn(&self, _memmap: &Memmap<'_, P>, pfn: u64) -> u64 {
        // The MMU does the aliasing.
        pfn
    }
}
