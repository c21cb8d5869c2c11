/* Test harness: real redis-server processes on free loopback ports, started
 * and stopped by pid, plus helpers the tests share. */
#ifndef DLOCK_TEST_HARNESS_H
#define DLOCK_TEST_HARNESS_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"

typedef struct th_redis {
    pid_t pid;
    int port;         /* plain TCP: the admin connections (th_admin, th_cmd, th_cli) */
    int tls_port;     /* TLS, when started with TLS; else 0 */
    int tls;
    int acl;          /* the client URL names the ACL user "dlock" (docs/acl-rule.txt) */
    char dir[256];
    char url[512];    /* what a dlock client uses: redis://, or rediss:// with the test
                         certificates; the ACL user's credentials in ACL mode */
    char sock[300];   /* unix socket path */
    const char *extra[33];   /* extra arguments (string literals), NULL-terminated */
    int bus_port;            /* cluster node: its cluster bus port (0: not a cluster node) */
    int sentinel;            /* started as a sentinel (th_sentinels_start) */
} th_redis;

/* A lost callback (dlock_lock_set_lost_callback) that records the reason of
 * the last hold reported lost in th_lost_reason (0: none; the test resets
 * it) and its cause (dlock_last_lost_cause) in th_lost_cause. */
extern _Atomic int th_lost_reason;
extern _Atomic int th_lost_cause;
void th_on_lost(const char *name, const char *owner, dlock_lost_reason reason, void *ud);

/* Starts redis-server on a free 127.0.0.1 port (and a unix socket in its own
 * temp dir), without persistence. Extra "--opt value" pairs may follow, NULL
 * terminated. Returns 0 when it answers PING.
 *
 * With DLOCK_TEST_DEPLOY=sentinel or cluster in the environment, a start
 * without extra arguments starts that deployment instead (th_deploy_*):
 * r->url names it (redis-sentinel:// or redis-cluster://), r->port is the
 * primary's (sentinel) or a primary's (cluster), and th_cmd / th_int follow
 * MOVED to the node that serves a key; th_redis_destroy stops it all. Tests
 * that stop or restart their server, or count its calls, skip themselves
 * there (th_deployed).
 *
 * Modes of a single server, from the environment, so that the same tests run
 * every way (CTest's suite_tls and suite_acl run a set of them so):
 *   DLOCK_TEST_TLS=1  the server also listens with TLS (certificates made by
 *                     th_tls_dir, clients must present theirs) and r->url is
 *                     rediss:// to it; the admin helpers stay on the plain port
 *   DLOCK_TEST_ACL=1  the server gets the user "dlock" with exactly the rule of
 *                     docs/acl-rule.txt (PREFIX empty), and r->url logs in as
 *                     it (a server started with --requirepass is left alone) */
int th_redis_start(th_redis *r, ...);
/* The deployment under test: "single", "sentinel" or "cluster". */
const char *th_deploy_name(void);
/* 1 when r was started as a sentinel or cluster deployment. */
int th_deployed(const th_redis *r);
/* As th_redis_start, a single server with TLS whatever the mode. */
int th_redis_start_tls(th_redis *r, ...);
/* The port dlock clients of r use (TLS in TLS mode), e.g. behind a proxy. */
int th_client_port(const th_redis *r);
/* r->url moved to another port (a proxy's): same scheme, user, TLS files. */
const char *th_url_port(const th_redis *r, int port, char *buf, size_t size);
/* A directory with test certificates, made once per process with openssl:
 * ca.crt, server.crt/.key (localhost, 127.0.0.1), client.crt/.key (signed by
 * the CA), other-ca.crt (a CA nobody's certificate chains to). NULL when
 * openssl fails. */
const char *th_tls_dir(void);
/* Creates (or resets) ACL user `user` with password `pass` and exactly the
 * rule of docs/acl-rule.txt for lock names starting with `prefix`; 0 on
 * success. */
int th_acl_user(const th_redis *r, const char *user, const char *pass, const char *prefix);
/* 1 when the environment asks for TLS / ACL mode. */
int th_tls_mode(void);
int th_acl_mode(void);
/* A loopback port the kernel just handed out, or -1: a server bound right
 * after gets it unless another process races for it (then start again). */
int th_free_port(void);
/* Stops the server (SIGTERM, then SIGKILL) and waits for it. Keeps port/dir. */
void th_redis_stop(th_redis *r);
/* Starts it again on the same port, empty. */
int th_redis_restart(th_redis *r);
/* Stops and removes its directory. */
void th_redis_destroy(th_redis *r);

/* ------------------------------------------------------- deployments */

/* A primary with 2 replicas, each a th_redis (replicas of primary.port). */
#define TH_REPLICAS 2
typedef struct th_replset {
    th_redis primary;
    th_redis replica[TH_REPLICAS];
} th_replset;
/* Starts the primary and its replicas and waits (up to ~20 s) until every
 * replica's link to the primary is up. Extra "--opt value" pairs (NULL
 * terminated) go to every server. Returns 0 on success; on failure whatever
 * was started is stopped. */
int th_replset_start(th_replset *rs, ...);
void th_replset_destroy(th_replset *rs);
/* The server of rs after cur (primary, replica 0, replica 1, primary, ...):
 * the next one to promote. NULL when cur is not of rs. */
th_redis *th_replset_next(th_replset *rs, const th_redis *cur);
/* Makes np (a server of rs) the primary and the others (the old primary
 * too) its replicas with REPLICAOF, as a failover does, whatever np had
 * received. 0 on success. */
int th_replset_promote(th_replset *rs, th_redis *np);
/* Waits (up to 20 s x th_slack()) until np has its replicas back. 0 then. */
int th_replset_await(const th_redis *np);
/* One replica set shared by the tests of a file (test_quarantine.c,
 * test_managed.c): th_rs_setup and th_rs_teardown are the cmocka group's
 * setup and teardown; th_rs.cur is the primary now, which the tests move as
 * they promote; th_rs_server(i) is server i of the set (0: the first primary,
 * then the replicas); th_rs_next() the one after th_rs.cur (th_replset_next). */
typedef struct th_rs_fixture {
    th_replset set;
    th_redis *cur;
} th_rs_fixture;
extern th_rs_fixture th_rs;
int th_rs_setup(void **state);
int th_rs_teardown(void **state);
th_redis *th_rs_server(int i);
th_redis *th_rs_next(void);

/* A URL naming nodes[0..n-1] as one deployment of `kind` ("replicated",
 * "sentinel", "cluster"): redis-KIND://127.0.0.1:p1,... with their client
 * ports, or rediss-KIND:// with the TLS ports and the test certificates when
 * nodes[0] has TLS; then `tail` ("" or a master's "#name"). Returns buf. */
const char *th_nodes_url(char *buf, size_t size, const char *kind, th_redis *const *nodes, int n,
                         const char *tail);

/* 3 sentinels monitoring a primary under a master name (quorum 2, down after
 * 1 s, failover timeout 5 s). url: redis-sentinel://127.0.0.1:p1,...#name.
 * In TLS mode (DLOCK_TEST_TLS) replication, the sentinels and the URL are
 * TLS: rediss-sentinel://...?cacert=...#name; the same for a cluster
 * (rediss-cluster://, the bus over TLS). th_cmd stays on plain ports. */
#define TH_SENTINELS 3
typedef struct th_sentinels {
    th_redis s[TH_SENTINELS];
    char master[64];
    char url[512];
} th_sentinels;
/* Starts the sentinels on rs->primary and waits (up to ~30 s) until each
 * knows the 2 replicas and the 2 other sentinels. 0 on success. */
int th_sentinels_start(th_sentinels *ss, const th_replset *rs, const char *master);
void th_sentinels_destroy(th_sentinels *ss);
/* The primary's port as sentinel s answers SENTINEL GET-MASTER-ADDR-BY-NAME,
 * or -1. */
int th_sentinel_primary_port(const th_redis *s, const char *master);
/* The server of rs that sentinel s names the primary of master, or NULL. */
th_redis *th_sentinel_primary(th_replset *rs, const th_redis *s, const char *master);
/* th_replset_start (no extra arguments) then th_sentinels_start: 0 on
 * success, else -1 with nothing left running. The pair a Sentinel test
 * program's group setup starts; th_sentinel_deploy_destroy stops both. */
int th_sentinel_deploy_start(th_replset *rs, th_sentinels *ss, const char *master);
void th_sentinel_deploy_destroy(th_replset *rs, th_sentinels *ss);

/* A Redis Cluster of 3 primaries with 1 replica each, created with
 * `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`.
 * url: redis-cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3 (seeds). */
#define TH_CLUSTER_NODES 6
typedef struct th_cluster {
    th_redis node[TH_CLUSTER_NODES];
    char url[512];
} th_cluster;
/* Starts the nodes, creates the cluster and waits (up to ~60 s) until every
 * node reports cluster_state:ok and every replica's link is up. 0 on success. */
int th_cluster_start(th_cluster *cl);
void th_cluster_destroy(th_cluster *cl);
/* Starts one cluster-enabled node on its own (no slots, no peers). */
int th_cluster_node_start(th_redis *r);
/* Waits up to timeout_ms until every running node says cluster_state:ok
 * and agrees on who serves each slot. 0 when it does. */
int th_cluster_wait_ok(th_cluster *cl, int64_t timeout_ms);
/* The running node that serves `key` as a primary (CLUSTER KEYSLOT, then
 * CLUSTER NODES), or NULL. */
th_redis *th_cluster_node_for(th_cluster *cl, const char *key);

/* A fresh admin connection (caller frees). */
redisContext *th_admin(const th_redis *r);
/* Runs one command on a fresh admin connection; returns the reply (caller
 * frees) or NULL. */
redisReply *th_cmd(const th_redis *r, const char *fmt, ...);
/* Integer reply of a command, or INT64_MIN on error. */
long long th_int(const th_redis *r, const char *fmt, ...);
/* The server's clock (TIME) in ms, or -1 when it cannot be asked. */
long long th_server_ms(const th_redis *r);
/* A lock-delay marker (dlock_lock_delay:{name}, a string "<end ms> <owner
 * id>" without a TTL): the ms its delay has left by the server's clock (<= 0:
 * over), its owner id copied to owner (size bytes; may be NULL). LLONG_MIN
 * when there is no marker, or it is not of that form, or has a TTL. */
long long th_marker_left(const th_redis *r, const char *key, char *owner, size_t size);
/* Calls Redis has served since it started (INFO commandstats): of command
 * `cmd` ("evalsha", ...), or of every command but INFO when cmd is NULL.
 * -1 when Redis cannot be asked. On a cluster deployment the sum over its
 * primaries (a sentinel deployment: its primary); there the count of every
 * command (cmd NULL) includes the replicas' and sentinels' own. */
long long th_calls(const th_redis *r, const char *cmd);
/* Waits until the server has run no command (INFO aside) for 100 ms, at most
 * max_ms x th_slack(); returns th_calls(r, NULL) then. For "a waiter sends
 * nothing while it sleeps": its last retry (after subscribing) may still be
 * on its way on a loaded machine, and a waiter that polls never settles. */
long long th_calls_settled(const th_redis *r, int64_t max_ms);
/* Subscribers of a channel, as the deployment counts them: PUBSUB NUMSUB on
 * a single server; on a sentinel or cluster deployment the sum of NUMSUB and
 * SHARDNUMSUB over every node (a cluster's waiters SSUBSCRIBE on the node
 * serving the channel's slot). -1 when Redis cannot be asked. */
long long th_numsub(const th_redis *r, const char *channel);
/* Channels matching pattern that have subscribers (PUBSUB CHANNELS), summed
 * as th_numsub does (CHANNELS and SHARDCHANNELS on every node of a
 * deployment). -1 when Redis cannot be asked. */
long long th_channels(const th_redis *r, const char *pattern);
/* Publishes msg on channel as another client would there: SPUBLISH on a
 * cluster (sharded pub/sub, on the node serving the channel's slot), PUBLISH
 * otherwise. Returns the receivers Redis reports, or -1. */
long long th_publish(const th_redis *r, const char *channel, const char *msg);
/* A connection subscribed to channel where the deployment's publishers
 * publish (SSUBSCRIBE on the slot's node of a cluster, SUBSCRIBE
 * otherwise), its confirmation read; messages: redisGetReply, element[2]
 * the payload. NULL on failure. Caller frees. */
redisContext *th_subscribe(const th_redis *r, const char *channel);
/* Runs `redis-cli -p PORT args...` (NULL-terminated) and returns its exit status. */
int th_cli(const th_redis *r, ...);

/* Prints to stderr client c's counts (c may be NULL) and the last log lines
 * (info and above) of the clients th_client opened: for a failing test. */
void th_client_log_dump(dlock_client *c);
/* Opens a client on r with a watchdog timeout (0 = default). Asserts success.
 * Its log (info and above) goes to the ring th_client_log_dump prints. */
dlock_client *th_client(const th_redis *r, int64_t watchdog_ms);
dlock_client *th_client_url(const char *url, int64_t watchdog_ms);

/* Starts a helper program (tests/worker) with args (NULL-terminated); its
 * stdout is a pipe returned in *out_fd. Returns the pid. */
pid_t th_spawn(int *out_fd, const char *prog, ...);
/* Reads one line from fd within timeout_ms x th_slack() into buf; 0 on
 * success. */
int th_read_line(int fd, char *buf, size_t size, int64_t timeout_ms);
/* Waits for pid up to timeout_ms x th_slack(); returns its exit status (or
 * 128+signal), -1 on timeout. */
int th_wait(pid_t pid, int64_t timeout_ms);

/* Waits up to 5 s x th_slack() until client c counts a waiter on lock
 * `name`'s channel (redisson_lock__channel:{name}): its subscription is
 * made. 1 when it does, 0 at the deadline. */
int th_await_lock_waiter(dlock_client *c, const char *name);
int64_t th_now_ms(void);
void th_sleep_ms(int64_t ms);
/* Multiplier for every upper time bound of the tests (and the waits sized to
 * outlast something): the build's factor (DLOCK_TEST_SLOW, at least 3 under
 * ASan, 5 under TSan, 20 under valgrind) times the machine's load per CPU
 * (1 to 4, measured from /proc/loadavg, again each second; for a slowed
 * build 2 when more than 2 per CPU wait to run, else 1). Thread-safe. */
int64_t th_slack(void);
/* 1 when a TTL read after a lease was set is in (lease - margin x th_slack(),
 * lease] and positive: margin is what the test may take between setting and
 * reading on a quiet machine. */
int th_ttl_within(long long ttl, long long lease, long long margin);
/* A unique name for this test run: prefix + pid + counter. */
const char *th_name(char *buf, size_t size, const char *prefix);

#endif
