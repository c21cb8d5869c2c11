/* The harness's internals, shared by its files (tests include harness.h):
 *   harness_proc.c    time, slack, names, helper processes
 *   harness_server.c  single servers: start, stop, restart, modes' options
 *   harness_deploy.c  replica sets, sentinels, clusters, DLOCK_TEST_DEPLOY
 *   harness_admin.c   commands, counts and pub/sub beside the client
 *   harness_client.c  clients and the group fixture (fixture.h)
 *   harness_modes.c   the TLS and ACL modes */
#ifndef DLOCK_TEST_HARNESS_INT_H
#define DLOCK_TEST_HARNESS_INT_H

#include <stdarg.h>

#include "harness.h"

/* harness_proc.c */
const char *th__find_prog(const char *name, char *buf, size_t size);
/* Forks argv[0] with stdin from /dev/null and stdout to out_fd (-1:
 * /dev/null); the child dies with its parent. Returns the pid. */
pid_t th__spawn_argv(char *const argv[], int out_fd);

/* harness_server.c */
/* A fresh /tmp/dlock-test-XXXXXX for r (and its socket path); 0 on success. */
int th__make_dir(th_redis *r);
/* Picks free ports and launches r (its extra, bus_port < 0 for a cluster
 * node, sentinel flag and, for a sentinel, sentinel.conf's text, set). */
int th__start_in_dir(th_redis *r, const char *sentinel_conf);
/* Appends the NULL-terminated "--opt value" arguments of ap (or of the call)
 * after those r has. */
void th__collect_extra(th_redis *r, va_list ap);
void th__add_extra(th_redis *r, ...);

/* harness_deploy.c */
/* Starts the deployment of DLOCK_TEST_DEPLOY in r's place; 0 on success. */
int th__deploy_start(th_redis *r);
/* Stops r's deployment: 1 when r was one, 0 when it is a single server. */
int th__deploy_stop(const th_redis *r);
/* The cluster r stands for, or NULL. */
th_cluster *th__cluster_of(const th_redis *r);
/* The servers a count over r's deployment asks (r itself when single). */
int th__deployment_nodes(const th_redis *r, const th_redis **out, int max);

/* harness_modes.c */
/* The URL parameters that give a client the test certificates ("?cacert=..."),
 * or "" when tls is 0. Returns buf. */
const char *th__tls_query(int tls, char *buf, size_t size);
/* Creates the ACL user of the ACL mode on r; 0 on success. */
int th__acl_setup(th_redis *r);
#define TH_ACL_USER "dlock"
#define TH_ACL_PASS "dlock-test-pw"

#endif
