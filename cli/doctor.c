/* dlock doctor [URL]: one pass over the deployment for what makes locks
 * unsafe (dlock_client_doctor), each finding with its fix. Exit 0 healthy
 * (notes only), 1 warnings, 2 unsafe; the usual codes (64, 69, 77, ...)
 * when it cannot ask. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct tally {
    int notes, warnings, unsafe;
} tally;

static void on_finding(dlock_doctor_level level, const char *node, const char *check,
                       const char *finding, const char *fix, void *ud)
{
    tally *t = ud;
    static const char *const words[] = {"note", "WARNING", "UNSAFE"};
    if (level == DLOCK_DOCTOR_UNSAFE)
        t->unsafe++;
    else if (level == DLOCK_DOCTOR_WARN)
        t->warnings++;
    else
        t->notes++;
    printf("%s: %s: %s: %s\n", words[level <= DLOCK_DOCTOR_UNSAFE ? level : 0], node, check,
           finding);
    if (fix)
        printf("  fix: %s\n", fix);
}

int cmd_doctor(cli_opts *o, int argc, char **argv)
{
    const char *name = NULL, *val, *url = NULL;
    int64_t replicas = 0;
    int dashdash = 0, r;
    for (int i = 1; i < argc; i++) {
        if ((r = cli_common_arg(o, argc, argv, &i, &dashdash)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (!dashdash &&
                   (r = cli_opt_value(o, "doctor", argc, argv, &i, "--name", NULL, &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            name = val;
        } else if (!dashdash && (r = cli_opt_value(o, "doctor", argc, argv, &i, "--replicas",
                                                   NULL, &val)) != 0) {
            if (r < 0)
                return EXIT_USAGE;
            char *end;
            long n = strtol(val, &end, 10);
            if (*val < '0' || *val > '9' || *end || n < 1 || n > 64) {
                char e[40];
                cli_usage_error(o, "doctor", "--replicas wants a count of 1 to 64, not '%s'",
                                cli_esc(val, e, sizeof(e)));
                return EXIT_USAGE;
            }
            replicas = n;
        } else if (!dashdash && argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_usage_error(o, "doctor", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else if (url) {
            cli_usage_error(o, "doctor", "one URL at most");
            return EXIT_USAGE;
        } else {
            url = argv[i];
        }
    }
    if (url) {
        /* As --url would: a copy for the library, the password masked for ps. */
        char *as_opt[] = {"--url", (char *)url};
        int j = 0;
        if (cli_global_opt(o, 2, as_opt, &j) < 0)
            return EXIT_USAGE;
    }
    o->replica_ack = (int)replicas;
    o->label = "doctor";
    dlock_client *c;
    int code = cli_open(o, &c, NULL, NULL);
    if (code)
        return code;
    tally t = {0, 0, 0};
    int rc = dlock_client_doctor(c, name, on_finding, &t);
    dlock_client_close(c);
    if (rc < 0)
        return cli_fail(o, rc, "doctor");
    if (!t.unsafe && !t.warnings)
        printf("healthy: nothing found that makes locks unsafe%s\n",
               t.notes ? " (see the notes: clock offsets, checks not made)" : "");
    else
        printf("%d unsafe, %d warning(s), %d note(s)\n", t.unsafe, t.warnings, t.notes);
    return rc;
}
