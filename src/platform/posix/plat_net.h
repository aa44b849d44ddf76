/* SPDX-License-Identifier: Apache-2.0 */
/* The socket address types (struct sockaddr_storage, AF_INET, AF_INET6,
 * in6_addr) and inet_pton/inet_ntop on POSIX. Its Windows form is platform/win32/plat_net.h; the
 * build system puts one of the two folders on the include path. */
#ifndef MSB_PLAT_NET_H
#define MSB_PLAT_NET_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#endif
