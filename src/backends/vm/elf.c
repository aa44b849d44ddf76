/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an ELF file needs to run: its interpreter (PT_INTERP) and its
 * DT_NEEDED names. Used to build the `host` image from host files; the
 * input is the host's own, still every count and offset is bounded.
 */
#include <elf.h>
#include <unistd.h>

#include "vm_int.h"

#define MAX_PHDRS 256
#define MAX_DYN 4096
#define MAX_NAME 4096

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	if (off > INT64_MAX)
		return -ENOEXEC;
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENOEXEC;
		got += (size_t)n;
	}
	return 0;
}

static int read_str(int fd, uint64_t off, char **out)
{
	char buf[MAX_NAME + 1];
	ssize_t n = pread(fd, buf, MAX_NAME, (off_t)off);
	if (n <= 0)
		return -ENOEXEC;
	buf[n] = '\0';
	size_t len = strnlen(buf, (size_t)n);
	if (len == (size_t)n || len == 0)
		return -ENOEXEC;
	*out = strdup(buf);
	return *out ? 0 : -ENOMEM;
}

int msb_vm__elf_deps(int fd, char **interp, char ***needed)
{
	*interp = NULL;
	*needed = NULL;
	Elf64_Ehdr eh;
	int r = read_at(fd, &eh, sizeof(eh), 0);
	if (r < 0)
		return r;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > MAX_PHDRS)
		return -ENOEXEC;
	Elf64_Phdr ph[MAX_PHDRS];
	if ((r = read_at(fd, ph, sizeof(Elf64_Phdr) * eh.e_phnum, eh.e_phoff)) < 0)
		return r;
	_cleanup_free_ char *in = NULL;
	_cleanup_strv_ char **v = calloc(1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	const Elf64_Phdr *dyn = NULL;
	for (size_t i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_INTERP && !in && (r = read_str(fd, ph[i].p_offset, &in)) < 0)
			return r;
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = &ph[i];
	}
	if (dyn) {
		size_t count = dyn->p_filesz / sizeof(Elf64_Dyn);
		if (count > MAX_DYN)
			return -ENOEXEC;
		_cleanup_free_ Elf64_Dyn *d = calloc(count ? count : 1, sizeof(*d));
		if (!d)
			return -ENOMEM;
		if ((r = read_at(fd, d, count * sizeof(*d), dyn->p_offset)) < 0)
			return r;
		uint64_t strtab = 0;
		bool have_strtab = false;
		for (size_t i = 0; i < count && d[i].d_tag != DT_NULL; i++)
			if (d[i].d_tag == DT_STRTAB) {
				strtab = d[i].d_un.d_ptr;
				have_strtab = true;
			}
		/* The string table's address, as a file offset. */
		uint64_t stroff = 0;
		bool mapped = false;
		for (size_t i = 0; have_strtab && i < eh.e_phnum && !mapped; i++)
			if (ph[i].p_type == PT_LOAD && strtab >= ph[i].p_vaddr &&
			    strtab - ph[i].p_vaddr < ph[i].p_filesz) {
				stroff = strtab - ph[i].p_vaddr + ph[i].p_offset;
				mapped = true;
			}
		for (size_t i = 0; mapped && i < count && d[i].d_tag != DT_NULL; i++) {
			if (d[i].d_tag != DT_NEEDED)
				continue;
			char *name = NULL;
			if (d[i].d_un.d_val > UINT32_MAX ||
			    (r = read_str(fd, stroff + d[i].d_un.d_val, &name)) < 0)
				return r < 0 ? r : -ENOEXEC;
			if ((r = msb__strv_push_take(&v, name)) < 0) {
				free(name);
				return r;
			}
		}
	}
	*interp = TAKE_PTR(in);
	*needed = TAKE_PTR(v);
	return 0;
}
