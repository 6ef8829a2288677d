// SPDX-License-Identifier: GPL-2.0
/*
 * The C side of memmap_stream: what the Rust side needs and the kernel's Rust crate has no
 * binding for (dev_pagemap lookup, pfn_to_page(), the section's pageblock bitmap, page
 * allocation by order, preemption, the clock), the ZONE_DEVICE memmap provider of the
 * kernel patch (crates/kernel-oracle/kbuild/zone-device-memmap-provider.patch) and the
 * `check` parameter. Plain data crosses the boundary; no Rust type is shared.
 */
#include <linux/gfp.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ioport.h>
#include <linux/memory_hotplug.h>
#include <linux/memremap.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/pageblock-flags.h>
#include <linux/preempt.h>
#include <linux/sched.h>

/* One ZONE_DEVICE range as memmap_init_zone_device() saw it (mirrored in memmap_stream_main.rs). */
struct mms_namespace {
	u64 start_pfn;
	u64 nr_pages;
	u64 pgmap;		/* the struct dev_pagemap's address: folio->pgmap */
	u64 vmemmap_addr;	/* pfn_to_page(0) */
	u64 altmap_base_pfn;
	u64 altmap_reserve;
	u64 altmap_free;
	u32 type;		/* enum memory_type */
	u32 vmemmap_shift;
	u32 has_altmap;
	s32 nid;
	u32 early_first;	/* early_section() of the range's first and last section */
	u32 early_last;
};

/* The functions memmap_stream_main.rs declares and calls. */
int mms_find_namespace(struct mms_namespace *out);
void mms_put_namespace(u64 pgmap);
u32 mms_pageblock_migratetype(u64 pfn);
void *mms_alloc_pages(u32 order);
void mms_free_pages(void *addr, u32 order);
void mms_preempt_disable(void);
void mms_preempt_enable(void);
void mms_cond_resched(void);
u64 mms_ktime_ns(void);
int mms_register_provider(void);
void mms_unregister_provider(void);

/* Defined in memmap_stream_main.rs. */
int mms_provider_init(const struct mms_namespace *ns);
int mms_check(void);

struct mms_find {
	struct dev_pagemap *pgmap;
};

static int mms_find_in(struct resource *res, void *arg)
{
	struct mms_find *f = arg;
	unsigned long pfn;

	for (pfn = PHYS_PFN(res->start); pfn < PHYS_PFN(res->end + 1); pfn += PAGES_PER_SUBSECTION) {
		f->pgmap = get_dev_pagemap(pfn);
		if (f->pgmap)
			return 1;
	}
	return 0;
}

/* Describes pfns [start, end) of `pgmap` on node `nid` as memmap_init_zone_device() sees them. */
static void mms_describe(struct dev_pagemap *pgmap, unsigned long start, unsigned long end, int nid,
			 struct mms_namespace *out)
{
	out->start_pfn = start;
	out->nr_pages = end - start;
	out->pgmap = (u64)(unsigned long)pgmap;
	out->vmemmap_addr = (u64)(unsigned long)pfn_to_page(0);
	out->type = pgmap->type;
	out->vmemmap_shift = pgmap->vmemmap_shift;
	out->has_altmap = !!(pgmap->flags & PGMAP_ALTMAP_VALID);
	out->altmap_base_pfn = pgmap->altmap.base_pfn;
	out->altmap_reserve = pgmap->altmap.reserve;
	out->altmap_free = pgmap->altmap.free;
	out->nid = nid;
	out->early_first = early_section(__pfn_to_section(start));
	out->early_last = early_section(__pfn_to_section(end - 1));
}

/*
 * Finds the first ZONE_DEVICE range inside the legacy (memmap=) pmem regions and takes a
 * reference on its dev_pagemap; 0 on success, -ENODEV when there is none.
 */
int mms_find_namespace(struct mms_namespace *out)
{
	struct mms_find f = { .pgmap = NULL };
	struct dev_pagemap *pgmap;

	walk_iomem_res_desc(IORES_DESC_PERSISTENT_MEMORY_LEGACY, IORESOURCE_MEM, 0, -1, &f,
			    mms_find_in);
	pgmap = f.pgmap;
	if (!pgmap || pgmap->nr_range != 1) {
		put_dev_pagemap(pgmap);
		return -ENODEV;
	}
	mms_describe(pgmap, PHYS_PFN(pgmap->range.start), PHYS_PFN(pgmap->range.end + 1),
		     memory_add_physaddr_to_nid(pgmap->range.start), out);
	return 0;
}

void mms_put_namespace(u64 pgmap)
{
	put_dev_pagemap((struct dev_pagemap *)(unsigned long)pgmap);
}

/* The pageblock's migrate type bits from its section's pageblock bitmap. */
u32 mms_pageblock_migratetype(u64 pfn)
{
	unsigned long *bitmap = section_to_usemap(__pfn_to_section(pfn));
	unsigned long bitidx = ((pfn & (PAGES_PER_SECTION - 1)) >> pageblock_order) * NR_PAGEBLOCK_BITS;
	unsigned long word = READ_ONCE(bitmap[bitidx / BITS_PER_LONG]);

	return (word >> (bitidx % BITS_PER_LONG)) & PAGEBLOCK_MIGRATETYPE_MASK;
}

/* 2^order pages from the page allocator, by their direct-map address (NULL on failure). */
void *mms_alloc_pages(u32 order)
{
	struct page *page = alloc_pages(GFP_KERNEL, order);

	return page ? page_address(page) : NULL;
}

void mms_free_pages(void *addr, u32 order)
{
	free_pages((unsigned long)addr, order);
}

void mms_preempt_disable(void)
{
	preempt_disable();
}

void mms_preempt_enable(void)
{
	preempt_enable();
}

void mms_cond_resched(void)
{
	cond_resched();
}

u64 mms_ktime_ns(void)
{
	return ktime_get_ns();
}

/*
 * The provider: the struct pages memmap_init_zone_device(zone, start_pfn, nr_pages, pgmap)
 * initializes, written by memmap-core's streaming ZONE_DEVICE init (mms_provider_init() in
 * memmap_stream_main.rs). memmap_init_zone_device() calls it with this module held.
 */
static int mms_provider_call(unsigned long start_pfn, unsigned long nr_pages, int nid,
			     struct dev_pagemap *pgmap)
{
	struct mms_namespace ns;

	mms_describe(pgmap, start_pfn, start_pfn + nr_pages, nid, &ns);
	return mms_provider_init(&ns);
}

static const struct zone_device_memmap_provider mms_provider = {
	.owner = THIS_MODULE,
	.init = mms_provider_call,
};

int mms_register_provider(void)
{
	return zone_device_memmap_provider_register(&mms_provider);
}

void mms_unregister_provider(void)
{
	zone_device_memmap_provider_unregister(&mms_provider);
}

/* Writing anything to /sys/module/memmap_stream/parameters/check compares the namespace. */
static int mms_check_set(const char *val, const struct kernel_param *kp)
{
	return mms_check();
}

static const struct kernel_param_ops mms_check_ops = {
	.set = mms_check_set,
};
module_param_cb(check, &mms_check_ops, NULL, 0200);
MODULE_PARM_DESC(check, "write to compare the namespace's struct pages with memmap-core's slow path");
