/* The harness's modes: TLS (test certificates made with openssl, a TLS port
 * beside the plain one) and ACL (the documented least-privilege user). */
#include "harness_int.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DLOCK_ACL_RULE
#error "DLOCK_ACL_RULE: the path of docs/acl-rule.txt"
#endif

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

int th_tls_mode(void) { return env_on("DLOCK_TEST_TLS"); }
int th_acl_mode(void) { return env_on("DLOCK_TEST_ACL"); }

int th_client_port(const th_redis *r) { return r->tls ? r->tls_port : r->port; }

const char *th__tls_query(int tls, char *buf, size_t size)
{
    const char *d = tls ? th_tls_dir() : NULL;
    buf[0] = '\0';
    if (d)
        snprintf(buf, size, "?cacert=%s/ca.crt&cert=%s/client.crt&key=%s/client.key", d, d, d);
    return buf;
}

const char *th_url_port(const th_redis *r, int port, char *buf, size_t size)
{
    char tls[1024];
    th__tls_query(r->tls, tls, sizeof(tls));
    snprintf(buf, size, "%s://%s127.0.0.1:%d%s", r->tls ? "rediss" : "redis",
             r->acl ? TH_ACL_USER ":" TH_ACL_PASS "@" : "", port, tls);
    return buf;
}

/* ------------------------------------------------------------ certificates */

static char tls_dir[64];
static pid_t tls_owner;

static void remove_tls_dir(void)
{
    if (getpid() != tls_owner)
        return;   /* a forked child's exit: the parent still uses them */
    static const char *files[] = {"ca.crt", "ca.key", "ca.srl", "server.crt", "server.key",
                                  "server.csr", "client.crt", "client.key", "client.csr",
                                  "other-ca.crt", "other-ca.key", "ext.cnf"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", tls_dir, files[i]);
        unlink(path);
    }
    rmdir(tls_dir);
}

/* Runs openssl with args in tls_dir; 0 on success. */
static int openssl(const char *const *args)
{
    char prog[PATH_MAX];
    if (!th__find_prog("openssl", prog, sizeof(prog))) {
        fprintf(stderr, "harness: openssl not found in PATH\n");
        return -1;
    }
    char *argv[40] = {prog};
    int argc = 1;
    for (int i = 0; args[i] && argc < 39; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)) || chdir(tls_dir) != 0)
        return -1;
    /* openssl talks on stderr even when it works: quiet unless it fails. */
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (null >= 0)
        dup2(null, 2);
    pid_t pid = th__spawn_argv(argv, -1);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    if (null >= 0)
        close(null);
    int rc = chdir(cwd);
    if (th_wait(pid, 30000) != 0 || rc != 0) {
        fprintf(stderr, "harness: openssl %s failed\n", args[0]);
        return -1;
    }
    return 0;
}

#define EC "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"

static int make_certs(void)
{
    FILE *f = NULL;
    char ext[PATH_MAX];
    snprintf(ext, sizeof(ext), "%s/ext.cnf", tls_dir);
    if (!(f = fopen(ext, "w")))
        return -1;
    fputs("subjectAltName=DNS:localhost,IP:127.0.0.1\n", f);
    fclose(f);
    static const char *ca[] = {"req", "-x509", EC, "-keyout", "ca.key", "-out", "ca.crt",
                               "-days", "7", "-subj", "/CN=dlock test CA", NULL};
    static const char *other[] = {"req", "-x509", EC, "-keyout", "other-ca.key", "-out",
                                  "other-ca.crt", "-days", "7", "-subj", "/CN=another CA", NULL};
    static const char *srv_req[] = {"req", EC, "-keyout", "server.key", "-out", "server.csr",
                                    "-subj", "/CN=localhost", NULL};
    static const char *srv_sign[] = {"x509", "-req", "-in", "server.csr", "-CA", "ca.crt",
                                     "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt",
                                     "-days", "7", "-extfile", "ext.cnf", NULL};
    static const char *cli_req[] = {"req", EC, "-keyout", "client.key", "-out", "client.csr",
                                    "-subj", "/CN=dlock test client", NULL};
    static const char *cli_sign[] = {"x509", "-req", "-in", "client.csr", "-CA", "ca.crt",
                                     "-CAkey", "ca.key", "-CAcreateserial", "-out", "client.crt",
                                     "-days", "7", NULL};
    const char *const *steps[] = {ca, other, srv_req, srv_sign, cli_req, cli_sign};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (openssl(steps[i]) != 0)
            return -1;
    return 0;
}

const char *th_tls_dir(void)
{
    static int state;   /* 0 not yet, 1 made, -1 failed */
    if (state == 0) {
        snprintf(tls_dir, sizeof(tls_dir), "/tmp/dlock-tls-XXXXXX");
        state = -1;
        if (mkdtemp(tls_dir)) {
            tls_owner = getpid();
            atexit(remove_tls_dir);
            if (make_certs() == 0)
                state = 1;
        }
    }
    return state == 1 ? tls_dir : NULL;
}

/* -------------------------------------------------------------------- ACL */

/* The rule of docs/acl-rule.txt as arguments of ACL SETUSER, with PREFIX
 * (lock names' prefix) replaced by `prefix`. Returns argc (0 on failure);
 * strings are malloc'd into argv (freed by the caller). */
static int th_acl_rule(const char *prefix, char **argv, int max)
{
    FILE *f = fopen(DLOCK_ACL_RULE, "r");
    if (!f) {
        fprintf(stderr, "harness: cannot read %s\n", DLOCK_ACL_RULE);
        return 0;
    }
    int argc = 0, keys = 0;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#')
            continue;
        for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
            if (argc >= max)
                break;
            /* No prefix: ~* is every key, and Redis refuses patterns after it. */
            if (tok[0] == '~' && !*prefix && keys++ > 0)
                continue;
            char buf[512];
            const char *p = strstr(tok, "PREFIX");
            if (p)
                snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(p - tok), tok, prefix, p + 6);
            else
                snprintf(buf, sizeof(buf), "%s", tok);
            argv[argc++] = strdup(buf);
        }
    }
    fclose(f);
    return argc;
}

int th_acl_user(const th_redis *r, const char *user, const char *pass, const char *prefix)
{
    char *rule[200];
    int n = th_acl_rule(prefix, rule, 200);
    if (n == 0)
        return -1;
    const char *argv[210];
    char pw[128];
    snprintf(pw, sizeof(pw), ">%s", pass);
    int argc = 0;
    argv[argc++] = "ACL";
    argv[argc++] = "SETUSER";
    argv[argc++] = user;
    argv[argc++] = "reset";
    argv[argc++] = "on";
    argv[argc++] = pw;
    for (int i = 0; i < n; i++)
        argv[argc++] = rule[i];
    redisContext *c = th_admin(r);
    redisReply *rep = c ? redisCommandArgv(c, argc, argv, NULL) : NULL;
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (!ok)
        fprintf(stderr, "harness: ACL SETUSER: %s\n",
                rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "no answer");
    if (rep)
        freeReplyObject(rep);
    if (c)
        redisFree(c);
    for (int i = 0; i < n; i++)
        free(rule[i]);
    return ok ? 0 : -1;
}

int th__acl_setup(th_redis *r) { return th_acl_user(r, TH_ACL_USER, TH_ACL_PASS, ""); }
