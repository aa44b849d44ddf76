/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_file's hold on the file it replaces (src/backends/ns/ns_files.c,
 * ns_files.replaced; issue 19): for a regular file of NS_RELEASE_LATER_MIN
 * bytes or more the caller gets an fd on the very inode the rename unlinked,
 * so that freeing it is the caller's close (the engine's host plane does it
 * off the write's path, 22.7); nothing for a small file, an absent one, or a
 * link, which stays refused (9.11). On a plain directory, no sandbox.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/ns/ns_files.h"
#include "util/fs.h"

static char dir[64];
static int dirfd_ = -1;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/msb-nsfiles-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	dirfd_ = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dirfd_ >= 0);
}

static void teardown(void)
{
	/* The names the tests make; the directory must then be empty. */
	static const char *const names[] = {"big.bin", "small.bin", "link.bin"};
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cr_assert(d >= 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlinkat(d, names[i], 0);
	close(d);
	close(dirfd_);
	cr_assert_eq(rmdir(dir), 0, "nothing else left behind");
}

static int write_held(const char *name, size_t len, uint8_t fillc, int *held, msb_error **err)
{
	uint8_t *data = malloc(len ? len : 1);
	cr_assert_not_null(data);
	memset(data, fillc, len);
	ns_files f = {.host_base = dir,
		      .guest_base = "/work",
		      .has_base_fd = true,
		      .base_fd = dirfd_,
		      .replaced = held};
	int r = msb_ns__write_file(&f, name, data, len, NULL, err);
	free(data);
	return r;
}

TestSuite(ns_files, .init = setup, .fini = teardown);

Test(ns_files, large_replaced_file_is_held_for_the_caller)
{
	size_t big = (size_t)NS_RELEASE_LATER_MIN;
	int held = 7;
	cr_assert_eq(write_held("big.bin", big, 'a', &held, NULL), 0);
	cr_assert_eq(held, -1, "nothing was replaced");
	struct stat before, h, now;
	cr_assert_eq(fstatat(dirfd_, "big.bin", &before, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(write_held("big.bin", big, 'b', &held, NULL), 0);
	cr_assert(held >= 0, "a replaced file of the threshold's size is held");
	cr_assert_eq(fstat(held, &h), 0);
	cr_assert_eq(h.st_ino, before.st_ino, "the held inode is the one replaced");
	cr_assert_eq(h.st_nlink, 0, "and it has no name left");
	cr_assert_eq(fstatat(dirfd_, "big.bin", &now, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_neq(now.st_ino, before.st_ino);
	cr_assert_eq((size_t)now.st_size, big);
	close(held);
}

Test(ns_files, small_file_or_link_is_not_held)
{
	int held = 7;
	cr_assert_eq(write_held("small.bin", 4096, 'a', &held, NULL), 0);
	cr_assert_eq(write_held("small.bin", 4096, 'b', &held, NULL), 0);
	cr_assert_eq(held, -1, "a small replaced file is freed in place");
	cr_assert_eq(write_held("big.bin", (size_t)NS_RELEASE_LATER_MIN, 'a', &held, NULL), 0);
	cr_assert_eq(symlinkat("big.bin", dirfd_, "link.bin"), 0);
	msb_error *err = NULL;
	held = 7;
	cr_assert(write_held("link.bin", 16, 'c', &held, &err) < 0, "a link stays refused");
	cr_assert_eq(msb_error_code(err), MSB_E_VALUE);
	msb_error_free(err);
	cr_assert_eq(held, -1);
}
