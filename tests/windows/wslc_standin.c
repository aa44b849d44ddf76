/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A recording stand-in for wslc.exe (tests/windows/test_wslc_spawn.c): it
 * writes the arguments Windows split from its command line
 * (CommandLineToArgvW, the rules a real wslc.exe's runtime applies) to the
 * file named by MSB_STANDIN_RECORD, each UTF-8 and NUL-terminated, then
 * does what the file named by MSB_STANDIN_SCRIPT says, a line at a time:
 *   out TEXT    write TEXT to stdout        err TEXT   to stderr
 *   cat         copy stdin to stdout        flood N    N bytes of 'x' to stdout
 *   hang        sleep until killed          exit N     exit with code N
 * and exits 0 at the end of the script.
 */
#include <windows.h>

#include <shellapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(HANDLE h, const void *p, DWORD n)
{
	DWORD w;
	while (n > 0 && WriteFile(h, p, n, &w, NULL) && w > 0) {
		p = (const char *)p + w;
		n -= w;
	}
}

static void record(const char *path)
{
	int argc = 0;
	wchar_t **wargv = CommandLineToArgvW(GetCommandLineW(), &argc);
	FILE *f = fopen(path, "wb");
	if (!f || !wargv)
		exit(90);
	for (int i = 1; i < argc; i++) {
		char buf[4096];
		int n = WideCharToMultiByte(CP_UTF8, 0, wargv[i], -1, buf, sizeof(buf), NULL, NULL);
		if (n <= 0)
			exit(91);
		fwrite(buf, 1, (size_t)n, f); /* n counts the NUL */
	}
	fclose(f);
	LocalFree(wargv);
}

int main(void)
{
	const char *rec = getenv("MSB_STANDIN_RECORD");
	const char *script = getenv("MSB_STANDIN_SCRIPT");
	if (rec)
		record(rec);
	FILE *f = script ? fopen(script, "rb") : NULL;
	HANDLE out = GetStdHandle(STD_OUTPUT_HANDLE), err = GetStdHandle(STD_ERROR_HANDLE);
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (strncmp(line, "out ", 4) == 0) {
			put(out, line + 4, (DWORD)strlen(line + 4));
		} else if (strncmp(line, "err ", 4) == 0) {
			put(err, line + 4, (DWORD)strlen(line + 4));
		} else if (strcmp(line, "cat") == 0) {
			char buf[4096];
			DWORD n;
			HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
			while (ReadFile(in, buf, sizeof(buf), &n, NULL) && n > 0)
				put(out, buf, n);
		} else if (strncmp(line, "flood ", 6) == 0) {
			static char xs[65536];
			memset(xs, 'x', sizeof(xs));
			for (long left = strtol(line + 6, NULL, 10); left > 0;) {
				DWORD n = left > (long)sizeof(xs) ? (DWORD)sizeof(xs) : (DWORD)left;
				put(out, xs, n);
				left -= n;
			}
		} else if (strcmp(line, "hang") == 0) {
			Sleep(INFINITE);
		} else if (strncmp(line, "exit ", 5) == 0) {
			return (int)strtol(line + 5, NULL, 10);
		}
	}
	return 0;
}
