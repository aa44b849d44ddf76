/* SPDX-License-Identifier: Apache-2.0 */
/* A static program for the `dir:` image test: prints its arguments. */
#include <stdio.h>

int main(int argc, char **argv)
{
	printf("hello");
	for (int i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n");
	return 0;
}
