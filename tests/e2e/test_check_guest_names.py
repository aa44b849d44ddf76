"""scripts/check-guest-names (issue 15): the source check that refuses
follow-by-default and by-path system calls in the files that touch names in
guest-writable directories. It passes on the tree, refuses the forms behind
issue 15's finding 1 (the native socket's chmod by name after the bind), and
honours only a marker that gives a reason."""
import os
import subprocess

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "check-guest-names")


def run(*args):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=60)


def test_the_tree_passes():
    p = run()
    assert p.returncode == 0, p.stdout
    assert p.stdout.startswith("check-guest-names: ok")


# What hosttools_native.c did before issue 15, in short.
OLD_NATIVE = """
int start(const char *host_dir)
{
	int dir_fd = open(host_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/sock", dir_fd);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (fchmodat(dir_fd, "sock", 0666, 0) < 0 ||
	    listen(fd, 64) < 0)
		return -1;
	return 0;
}
"""


def test_the_old_native_socket_start_is_refused(tmp_path):
    f = tmp_path / "old_native.c"
    f.write_text(OLD_NATIVE)
    p = run("--files", str(f))
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert any(":8: fchmodat()" in ln for ln in lines), p.stdout
    assert any(":6: bind by path" in ln for ln in lines), p.stdout
    assert any(":4: open()" in ln for ln in lines), p.stdout


FORMS = """
void f(int d, const char *n, struct stat *st)
{
	chmod(n, 0600);
	chown(n, 0, 0);
	lchown(n, 0, 0);
	utimes(n, NULL);
	stat(n, st);
	lstat(n, st);
	opendir(n);
	fopen(n, "r");
	unlink(n);
	rename(n, n);
	fstatat(d, n, st, 0);
	fchownat(d, n, 0, 0, 0);
	utimensat(d, n, NULL, 0);
	openat(d, n, O_RDONLY);
	linkat(d, n, d, n, AT_SYMLINK_FOLLOW);
	msb__read_file_at(AT_FDCWD, n, 1, NULL, NULL);
	msb__rm_rf(n);
}
"""

ALLOWED = """
void g(int d, const char *n, struct stat *st, int fd)
{
	fstatat(d, n, st, AT_SYMLINK_NOFOLLOW);
	fchownat(fd, "", 0, 0, AT_EMPTY_PATH);
	openat(d, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	openat(d, ".", O_TMPFILE | O_WRONLY, 0600);
	openat(d, n,
	       O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	unlinkat(d, n, 0);
	renameat(d, n, d, n);
	mkdirat(d, n, 0755);
	fchmod(fd, 0700);
	fchown(fd, 0, 0);
	linkat(fd, "", d, n, AT_EMPTY_PATH);
	/* chmod(n) in a comment, and "stat(" in a string, are not calls */
	puts("open(x)");
	int x = open(n, O_RDONLY); /* guest-names: ok - a host path the caller chose */
	/* guest-names: ok - the host's /proc */
	int y =
		open("/proc", O_RDONLY);
	int z = open(n, O_RDONLY); /* guest-names: ok */
}
"""


def test_each_form_is_refused_and_only_a_reasoned_marker_allows(tmp_path):
    f = tmp_path / "forms.c"
    f.write_text(FORMS)
    p = run("--files", str(f))
    assert p.returncode == 1
    refused = [ln for ln in p.stdout.splitlines() if ln.startswith(str(f))]
    assert len(refused) == 17, p.stdout
    g = tmp_path / "allowed.c"
    g.write_text(ALLOWED)
    p = run("--files", str(g))
    # Only the marker without a reason is refused.
    refused = [ln for ln in p.stdout.splitlines() if ln.startswith(str(g))]
    assert len(refused) == 1 and ":22: open()" in refused[0], p.stdout
