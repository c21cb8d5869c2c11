/* dlock latch set|down|wait: a count-down latch (Redisson's RCountDownLatch)
 * from the shell. One process sets the count, workers count down as they
 * finish, and whoever needs them all done waits for zero. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct latch_args {
    const char *sub;        /* "set", "down", "wait" */
    const char *name;
    const char *count;      /* set's N, unparsed */
    int64_t wait_ms;        /* wait's --wait, DLOCK_WAIT_FOREVER by default */
    int must_exist;         /* wait's --must-exist */
} latch_args;

/* The usage name of a subcommand, for messages: "latch set". */
static const char *sub_cmd(const char *sub)
{
    return strcmp(sub, "set") == 0    ? "latch set"
           : strcmp(sub, "down") == 0 ? "latch down"
           : strcmp(sub, "wait") == 0 ? "latch wait"
                                      : "latch";
}

/* [global options] [--wait DUR (wait only)] [--name NAME] NAME [N (set only)],
 * "--" ending the options. */
static int parse_latch(cli_opts *o, int argc, char **argv, latch_args *la)
{
    const char *cmd = sub_cmd(la->sub);
    int want = strcmp(la->sub, "set") == 0 ? 2 : 1, npos = 0, dashdash = 0;
    const char *pos[2] = {NULL, NULL};
    la->wait_ms = DLOCK_WAIT_FOREVER;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val;
        int r;
        if ((r = cli_common_arg(o, argc, argv, &i, &dashdash)) != 0) {
            if (r < 0)
                return -1;
            continue;
        }
        if (!dashdash) {
            if (strcmp(la->sub, "wait") == 0 && strcmp(a, "--must-exist") == 0) {
                la->must_exist = 1;
                continue;
            }
            if (strcmp(la->sub, "wait") == 0 &&
                ((r = cli_opt_value(o, cmd, argc, argv, &i, "--wait", "-w", &val)) != 0 ||
                 (r = cli_opt_value(o, cmd, argc, argv, &i, "--timeout", NULL, &val)) != 0)) {
                if (r < 0)
                    return -1;
                static const cli_dur_rule wait = {1, "no limit", 0, 0, NULL};
                if (cli_duration_opt(o, cmd, "--wait", val, &wait, &la->wait_ms) != 0)
                    return -1;
                if (la->wait_ms == CLI_DUR_INF)
                    la->wait_ms = DLOCK_WAIT_FOREVER;
                continue;
            }
            if ((r = cli_opt_value(o, cmd, argc, argv, &i, "--name", NULL, &val)) != 0) {
                if (r < 0)
                    return -1;
                a = val;   /* a NAME that begins with '-' */
            } else if (a[0] == '-' && a[1] != '\0' && !(npos == 1 && want == 2)) {
                /* (set's N may be "-1": refused below with its own message) */
                cli_usage_error(o, cmd, "unknown option '%s'", a);
                return -1;
            }
        }
        if (npos == want) {
            char e[80];
            cli_usage_error(o, cmd, "unexpected argument '%s'", cli_esc(a, e, sizeof(e)));
            return -1;
        }
        pos[npos++] = a;
    }
    if (npos < 1) {
        cli_usage_error(o, cmd, "missing latch NAME");
        return -1;
    }
    if (npos < want) {
        cli_usage_error(o, cmd, "missing the count N");
        return -1;
    }
    la->name = pos[0];
    la->count = pos[1];
    return 0;
}

/* A failure of subcommand `what` on latch `name`. */
static int latch_fail(const cli_opts *o, dlock_client *c, int rc, const char *what,
                      const char *name)
{
    return cli_fail_key(o, c, rc, what, name, DLOCK_KIND_COUNT, "a latch");
}

static int latch_set(const cli_opts *o, dlock_client *c, dlock_latch *l, int64_t n,
                     const char *name, const char *nm)
{
    int set = 0;
    int rc = dlock_latch_try_set_count(l, n, &set);
    if (rc != DLOCK_OK)
        return latch_fail(o, c, rc, "latch set", name);
    if (!set) {
        int64_t left = -1;
        dlock_latch_count(l, &left);
        cli_err(o, "latch '%s' is still counting (%lld left); its count is set only at zero, "
                   "left as it is", nm, (long long)left);
        return EXIT_NOTACQUIRED;
    }
    return 0;
}

static int latch_wait(const cli_opts *o, dlock_client *c, dlock_latch *l, const latch_args *la,
                      const char *nm)
{
    if (la->must_exist) {
        /* Redisson's rule makes an absent latch one at zero: a wait on a
         * mistyped name would return 0 at once. Redis keeps no latch at
         * zero, so one counted down already is absent too. */
        int64_t left = 0;
        int rc = dlock_latch_count(l, &left);
        if (rc != DLOCK_OK)
            return latch_fail(o, c, rc, "latch wait", la->name);
        if (left <= 0) {
            cli_err(o, "latch '%s' does not exist (never set, another name, or counted down to "
                       "zero already) (--must-exist)", nm);
            return EXIT_NOINPUT;
        }
    }
    int rc = dlock_latch_await(l, la->wait_ms);
    if (rc == DLOCK_OK)
        return 0;
    if (rc == DLOCK_ETIMEDOUT) {
        char waited[32];
        int64_t left = -1;
        dlock_latch_count(l, &left);
        if (left >= 0)
            cli_err(o, "latch '%s' not at zero within %s (%lld left)", nm,
                    cli_fmt_duration(la->wait_ms, waited, sizeof(waited)), (long long)left);
        else
            cli_err(o, "latch '%s' not at zero within %s", nm,
                    cli_fmt_duration(la->wait_ms, waited, sizeof(waited)));
        return EXIT_NOTACQUIRED;
    }
    return latch_fail(o, c, rc, "latch wait", la->name);
}

int cmd_latch(cli_opts *o, int argc, char **argv)
{
    if (argc < 2) {
        cli_usage_error(o, "latch", "missing set, down or wait");
        return EXIT_USAGE;
    }
    latch_args la;
    memset(&la, 0, sizeof(la));
    la.sub = argv[1];
    if (strcmp(la.sub, "set") != 0 && strcmp(la.sub, "down") != 0 &&
        strcmp(la.sub, "wait") != 0) {
        char e[80];
        cli_usage_error(o, "latch", "unknown subcommand '%s': set, down or wait",
                        cli_esc(la.sub, e, sizeof(e)));
        return EXIT_USAGE;
    }
    if (parse_latch(o, argc, argv, &la) != 0)
        return EXIT_USAGE;
    /* set's N is checked before Redis is reached: bad input changes nothing. */
    int64_t n = 0;
    if (la.count && cli_parse_count(la.count, &n) != 0) {
        char e[80];
        cli_usage_error(o, "latch set", "the count '%s' is not a whole number in 1..%lld",
                        cli_esc(la.count, e, sizeof(e)), (long long)DLOCK_COUNT_MAX);
        return EXIT_USAGE;
    }
    dlock_client *c;
    o->label = strcmp(la.sub, "wait") == 0 ? "latch-wait" : "latch";
    if (strcmp(la.sub, "wait") == 0 && la.wait_ms != DLOCK_WAIT_FOREVER)
        o->connect_bound_ms = la.wait_ms > 0 ? la.wait_ms : 1;   /* -w bounds the connect */
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    dlock_latch *l;
    int rc = dlock_latch_get(c, la.name, &l);
    if (rc != DLOCK_OK) {
        code = cli_fail(o, rc, "bad latch name");
        dlock_client_close(c);
        return code;
    }
    char nm[200];
    cli_esc(la.name, nm, sizeof(nm));
    if (strcmp(la.sub, "set") == 0) {
        code = latch_set(o, c, l, n, la.name, nm);
    } else if (strcmp(la.sub, "down") == 0) {
        rc = dlock_latch_count_down(l);
        code = rc == DLOCK_OK ? 0 : latch_fail(o, c, rc, "latch down", la.name);
    } else {
        code = latch_wait(o, c, l, &la, nm);
    }
    dlock_latch_free(l);
    dlock_client_close(c);
    return code;
}
