/* The exporter's listening sockets (listen.c). */
#ifndef DLOCK_CLI_LISTEN_H
#define DLOCK_CLI_LISTEN_H

#include <sys/socket.h>

#include "cli.h"

#define LISTEN_MAX 4   /* addresses listened on */

/* The listening sockets on spec ("host:port", "[v6]:port", ":port") into
 * fds[LISTEN_MAX]: their count, or -1 after a message (*code: the exit
 * code). */
int listen_open(const cli_opts *o, const char *spec, int *fds, int *code);
/* Closes fds[0..n-1]. */
void listen_close(int *fds, int n);
/* 1 for a loopback address (127/8, ::1, v4-mapped 127/8). */
int listen_loopback(const struct sockaddr *sa);

#endif
