/* dlock fence: a write to a key of data in Redis, done only when the fencing
 * token is not lower than the highest token the key's guard has seen
 * (dlock_fence_command). For shell commands run under `dlock run`, which
 * hands them their token in DLOCK_TOKEN. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define FENCE_TOKEN_MAX (1ULL << 53)

static int parse_token(const cli_opts *o, const char *s, const char *from, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s || s[0] == '-' || s[0] == '+' || v == 0) {
        cli_usage_error(o, "fence", "%s '%s' is not a fencing token (a positive integer)", from,
                        s);
        return -1;
    }
    /* No lock issues such a token: dlock's follow the server's clock in
     * microseconds (2^53 in the year 2255), Redisson's count acquisitions.
     * A guard raised to it would refuse every later fenced write of the key
     * (until its guard is deleted: docs/cli.md, "dlock fence"). */
    if (v > FENCE_TOKEN_MAX) {
        cli_usage_error(o, "fence", "%s '%s' is above %llu, more than any lock issues (a "
                                    "guard raised to it would refuse every later fenced write "
                                    "of the key)", from, s, (unsigned long long)FENCE_TOKEN_MAX);
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_fence(cli_opts *o, int argc, char **argv)
{
    const char *tok = NULL, *guard_of = NULL, *val;
    int i = 1, r;
    /* Options come before COMMAND; everything from COMMAND on is its own. */
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if ((r = cli_opt_value(o, "fence", argc, argv, &i, "--token", "-t", &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            tok = val;
        } else if ((r = cli_opt_value(o, "fence", argc, argv, &i, "--guard", NULL, &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            guard_of = val;
        } else if ((r = cli_global_opt(o, argc, argv, &i)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_usage_error(o, "fence", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else {
            break;
        }
    }
    if (guard_of && i < argc) {
        cli_usage_error(o, "fence", "--guard KEY takes no command");
        return EXIT_USAGE;
    }
    uint64_t token = 0;
    if (!guard_of) {
        if (argc - i < 2) {
            cli_usage_error(o, "fence", "missing COMMAND KEY (SET key value, INCRBY key 1, ...)");
            return EXIT_USAGE;
        }
        const char *from = "--token";
        if (!tok) {
            tok = getenv("DLOCK_TOKEN");
            from = "$DLOCK_TOKEN";
            if (!tok) {
                cli_usage_error(o, "fence", "no token: run under 'dlock run' (DLOCK_TOKEN) or "
                                            "give --token N");
                return EXIT_USAGE;
            }
            if (!*tok) {
                cli_usage_error(o, "fence", "$DLOCK_TOKEN is empty (a run over several names "
                                            "has no token): give --token N");
                return EXIT_USAGE;
            }
        }
        if (parse_token(o, tok, from, &token) < 0)
            return EXIT_USAGE;
    }
    dlock_client *c;
    o->label = "fence";
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    if (guard_of) {
        uint64_t h = 0;
        int rc = dlock_fence_guard(c, guard_of, &h);
        if (rc == DLOCK_OK)
            printf("%llu\n", (unsigned long long)h);
        else
            code = cli_fail(o, rc, "fence --guard");
        dlock_client_close(c);
        return code;
    }
    char *reply = NULL;
    size_t len = 0;
    int rc = dlock_fence_command(c, token, argc - i, (const char *const *)(argv + i), NULL,
                                 &reply, &len);
    if (rc == DLOCK_OK) {
        if (reply) {
            fwrite(reply, 1, len, stdout);
            fputc('\n', stdout);
        }
        free(reply);
    } else {
        code = cli_fail(o, rc, "fence");
    }
    dlock_client_close(c);
    return code;
}
