/* Test harness: real redis-server processes on free loopback ports, started
 * and stopped by pid, plus helpers the tests share. */
#ifndef DLOCK_TEST_HARNESS_H
#define DLOCK_TEST_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"

typedef struct th_redis {
    pid_t pid;
    int port;
    char dir[256];
    char url[128];
    char sock[300];   /* unix socket path */
    const char *extra[33];   /* extra arguments (string literals), NULL-terminated */
} th_redis;

/* Starts redis-server on a free 127.0.0.1 port (and a unix socket in its own
 * temp dir), without persistence. Extra "--opt value" pairs may follow, NULL
 * terminated. Returns 0 when it answers PING. */
int th_redis_start(th_redis *r, ...);
/* Stops the server (SIGTERM, then SIGKILL) and waits for it. Keeps port/dir. */
void th_redis_stop(th_redis *r);
/* Starts it again on the same port, empty. */
int th_redis_restart(th_redis *r);
/* Stops and removes its directory. */
void th_redis_destroy(th_redis *r);

/* A fresh admin connection (caller frees). */
redisContext *th_admin(const th_redis *r);
/* Runs one command on a fresh admin connection; returns the reply (caller
 * frees) or NULL. */
redisReply *th_cmd(const th_redis *r, const char *fmt, ...);
/* Integer reply of a command, or INT64_MIN on error. */
long long th_int(const th_redis *r, const char *fmt, ...);
/* Calls Redis has served since it started (INFO commandstats): of command
 * `cmd` ("evalsha", ...), or of every command but INFO when cmd is NULL.
 * -1 when Redis cannot be asked. */
long long th_calls(const th_redis *r, const char *cmd);
/* Waits until the server has run no command (INFO aside) for 100 ms, at most
 * max_ms x th_slack(); returns th_calls(r, NULL) then. For "a waiter sends
 * nothing while it sleeps": its last retry (after subscribing) may still be
 * on its way on a loaded machine, and a waiter that polls never settles. */
long long th_calls_settled(const th_redis *r, int64_t max_ms);
/* Runs `redis-cli -p PORT args...` (NULL-terminated) and returns its exit status. */
int th_cli(const th_redis *r, ...);

/* Opens a client on r with a watchdog timeout (0 = default). Asserts success. */
dlock_client *th_client(const th_redis *r, int64_t watchdog_ms);
dlock_client *th_client_url(const char *url, int64_t watchdog_ms);

/* Starts a helper program (tests/worker) with args (NULL-terminated); its
 * stdout is a pipe returned in *out_fd. Returns the pid. */
pid_t th_spawn(int *out_fd, const char *prog, ...);
/* Reads one line from fd within timeout_ms into buf; 0 on success. */
int th_read_line(int fd, char *buf, size_t size, int64_t timeout_ms);
/* Waits for pid; returns its exit status (or 128+signal), -1 on timeout. */
int th_wait(pid_t pid, int64_t timeout_ms);

int64_t th_now_ms(void);
void th_sleep_ms(int64_t ms);
/* Multiplier for upper time bounds: > 1 under sanitizers (DLOCK_TEST_SLOW). */
int64_t th_slack(void);
/* A unique name for this test run: prefix + pid + counter. */
const char *th_name(char *buf, size_t size, const char *prefix);

#endif
