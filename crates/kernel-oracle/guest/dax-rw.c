// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * dax-rw DEVICE SIZE ALIGN: maps a device-dax character device (it has no read or write,
 * only mmap) and writes every ALIGN-sized page of its SIZE bytes with a pattern of its offset,
 * unmaps it, maps it again and reads every byte back. Exit 0 when all are equal. Built
 * static by `kernel-oracle build` for the provider configurations' guests.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t pattern(uint64_t offset)
{
	return offset * 0x9e3779b97f4a7c15ull ^ 0x6d656d6d61702d72ull;
}

static uint64_t *map(int fd, uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED) {
		perror("dax-rw: mmap");
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	uint64_t size, align, off, pages = 0;
	uint64_t *p;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: dax-rw DEVICE SIZE ALIGN\n");
		return 2;
	}
	size = strtoull(argv[2], NULL, 0);
	align = strtoull(argv[3], NULL, 0);
	if (!size || !align || size % align || align % 8) {
		fprintf(stderr, "dax-rw: SIZE %s is not a multiple of ALIGN %s\n", argv[2], argv[3]);
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror("dax-rw: open");
		return 1;
	}
	p = map(fd, size);
	for (off = 0; off < size; off += 8)
		p[off / 8] = pattern(off);
	munmap(p, size);
	p = map(fd, size);
	for (off = 0; off < size; off += 8) {
		if (p[off / 8] != pattern(off)) {
			fprintf(stderr, "dax-rw: byte %llu reads %#llx, wrote %#llx\n",
				(unsigned long long)off, (unsigned long long)p[off / 8],
				(unsigned long long)pattern(off));
			return 1;
		}
		pages += off % align == 0;
	}
	munmap(p, size);
	close(fd);
	printf("dax-rw: %llu pages of %llu bytes written and read back\n",
	       (unsigned long long)pages, (unsigned long long)align);
	return 0;
}
